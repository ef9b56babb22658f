/*
 * Internal to liblattice (node.c, api.c): what the public API's
 * implementation needs of the node beyond lattice.h.
 */
#ifndef LATTICE_NODE_INT_H
#define LATTICE_NODE_INT_H

#include "lattice/lattice.h"
#include "lattice/ops.h"

#include <pthread.h>

/* The node's operation path (api.c submits to it); valid from
 * lattice_node_start until lattice_node_stop. */
struct lattice_ops;
struct lattice_ops *lattice_node_ops(lattice_node *n);

/* node.c: the secret file's contents into *out (lt_malloc'd, 1..64 KiB, a
 * trailing newline dropped; INVAL, logged, otherwise); node_forget_secret
 * wipes and frees them. */
lattice_status node_read_secret(const char *path, uint8_t **out, size_t *out_len);
void node_forget_secret(uint8_t *secret, size_t len);

/* metrics.c: the counters of the operations this node issued
 * (lattice/metrics.h).  lattice_op_submit goes through node_metrics_submit,
 * which counts each result before the caller's callback runs. */
typedef struct node_metrics node_metrics;
node_metrics *node_metrics_new(void);
void node_metrics_free(node_metrics *m);
node_metrics *lattice_node_metrics_of(lattice_node *n);
/* inline: lattice_op_submit_inline (reads may complete on the calling thread). */
lattice_status node_metrics_submit(node_metrics *m, struct lattice_ops *ops, const struct lattice_op *o, size_t n,
                                   lattice_op_fn fn, void *arg, bool inline_reads);
/* tx.c: one commit of an interactive transaction ended with st. */
void node_metrics_tx(node_metrics *m, lattice_status st);

/* A count-down latch: the blocking calls (api.c, tx.c) submit asynchronous
 * work and wait until each of its `left` callbacks counted down. */
typedef struct node_latch {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    size_t left;
} node_latch;

#define NODE_LATCH(n) {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, (n)}

static inline void node_latch_count_down(node_latch *l)
{
    pthread_mutex_lock(&l->mu);
    if (--l->left == 0) pthread_cond_signal(&l->cv);
    pthread_mutex_unlock(&l->mu);
}

static inline void node_latch_wait(node_latch *l)
{
    pthread_mutex_lock(&l->mu);
    while (l->left) pthread_cond_wait(&l->cv, &l->mu);
    pthread_mutex_unlock(&l->mu);
}

#endif
