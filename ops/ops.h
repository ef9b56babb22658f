/*
 * ops/ops.h: the operation path of a node (prefix lattice_ops_): the data
 * thread, its data channel and every stage an operation passes through.
 *
 * A node has one lattice_ops.  Its data thread owns the data channel (plain
 * TCP, link.c: a data port others connect to and send requests on, one
 * connection of ours to each server peer), the pending table, the cluster
 * metadata (meta/) and every store write.  Other threads hand work over:
 * lattice_ops_submit (the cache operations of lattice/ops.h) and
 * lattice_grid_call (grid/grid.h: stats, create/destroy, ...) - or, in
 * lattice_ops_submit_inline, take the data thread's state for a moment and
 * run their ops to completion themselves (loop_run_here).  Every callback
 * runs in the data thread's role (on it, or on such a thread: never two at
 * once), except those of reads lattice_ops_submit_inline answers from the
 * store on the calling thread (fast.c).
 *
 * Every file and what it holds: docs/ARCHITECTURE.md, "File map".
 * The grid's machines (grid/grid.h: the metadata exchange, rebalance,
 * restart, salvage) ride on the same channel and thread: they register
 * with it (ops_int.h, "Registration points"); ops/ never calls them by name.
 *
 * Lifecycle (node/node.c): init binds the data port (servers) so its
 * address can be advertised before discovery starts; start runs the data
 * thread; stop ends every op still in flight with STOPPED; destroy frees.
 */
#ifndef LATTICE_OPS_OPS_H
#define LATTICE_OPS_OPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lattice/lattice.h"
#include "lattice/ops.h"
#include "partition/partition.h"

struct lattice_discovery;
typedef struct lattice_ops lattice_ops;

typedef struct lattice_ops_config {
    bool client;
    const char *host;               /* bind address of the data port */
    const uint8_t *secret;          /* NULL = no MAC */
    size_t secret_len;
    const char *const *caches;      /* --cache specs this node brings */
    size_t n_caches;
    int region_mb;                  /* 0 = default */
    bool region_evict;              /* a full region evicts (evict.c) instead of refusing writes */
    int op_timeout_ms;              /* 0 = default */
    const char *data_dir;           /* persistence (docs/PERSISTENCE.md); NULL = in memory only */
    const char *wal_fsync;          /* always | group | off; NULL = group */
    int checkpoint_mb;              /* 0 = LT_CHECKPOINT_LOG_BYTES */
} lattice_ops_config;

/* *attr is "data_addr=tcp://..." (owned by the lattice_ops) or NULL for
 * clients. */
lattice_status lattice_ops_init(const lattice_ops_config *c, lattice_ops **out, const char **attr);
/* The node is about to leave: from now on it serves no operation (they
 * answer AGAIN and their issuers retry elsewhere once the topology moves
 * on), while it still applies what primaries replicate to it.  Call before
 * discovery announces the leave, so the grid never has two primaries.  Any
 * thread. */
void lattice_ops_fence(lattice_ops *d);
lattice_status lattice_ops_start(lattice_ops *d, struct lattice_discovery *disc);
void lattice_ops_stop(lattice_ops *d);
void lattice_ops_destroy(lattice_ops *d);

/* The data region (NULL on a client), valid until destroy: its metrics may
 * be read from any thread (storage/storage.h, lattice_region_metrics_get). */
struct lattice_region;
struct lattice_region *lattice_ops_region(lattice_ops *d);

/* Any thread: lattice_op_submit's contract (lattice/ops.h). */
lattice_status lattice_ops_submit(lattice_ops *d, const lattice_op *ops, size_t n, lattice_op_fn fn, void *arg);
/* As lattice_ops_submit, but a read this node may answer from its own store
 * right now (fast.c) completes on the calling thread before this returns;
 * the rest goes to the data thread.  The calling thread must be registered
 * with lattice_ops_thread_enter. */
lattice_status lattice_ops_submit_inline(lattice_ops *d, const lattice_op *ops, size_t n, lattice_op_fn fn, void *arg);
/* A thread that calls lattice_ops_submit_inline: enter once before, exit
 * before it ends (it becomes an RCU reader of the stores). */
void lattice_ops_thread_enter(void);
void lattice_ops_thread_exit(void);
/* Reads answered on the calling thread since the node started. */
uint64_t lattice_ops_reads_inline(lattice_ops *d);
/* Other ops (writes, reads the inline path could not answer) the submitting
 * thread of lattice_ops_submit_inline ran to completion itself. */
uint64_t lattice_ops_run_here(lattice_ops *d);
/* With --data-dir: the times the log's thread sent the replies its fsync
 * freed itself, the data thread idle (loop_release_durable). */
uint64_t lattice_ops_log_releases(lattice_ops *d);

/* ---- a transaction across partitions, worked out (txn.c) ----
 * The coordinator of a LATTICE_OP_TXN whose keys lie in several partitions
 * (node/txexec.c) reads every key it names, then runs its sub-operations
 * here on those entries alone - a private store of one partition holding
 * exactly them, under the cache's configuration - as a primary would run
 * them in one step.  *result (lattice/txn.h's result layout, lt_malloc'd)
 * is the transaction's answer; fn gets each written key's final state (a
 * key may come more than once, with the same state), which the commit
 * writes.  The request's watches are ignored (the caller checks them
 * against its reads).  Data thread only.  TOO_LARGE: the entries do not fit
 * the private store (64 MiB). */
/* In the data thread's role (a callback of an op): true, and *out the
 * cache's partition count (0: no such cache).  Elsewhere false - ask
 * through a grid call (which the data thread itself must never wait for). */
bool lattice_ops_cache_partitions(lattice_ops *d, const char *cache, uint32_t *out);
typedef struct lattice_ops_txn_entry {
    const void *key;
    size_t key_len;
    bool live;
    const void *value;
    size_t value_len;
    uint64_t expire_ms; /* absolute, 0 none */
    uint8_t type;
} lattice_ops_txn_entry;
typedef lattice_status (*lattice_ops_txn_final_fn)(void *arg, const void *key, size_t key_len, bool live,
                                                   const void *value, size_t value_len, uint64_t expire_ms,
                                                   uint8_t type);
lattice_status lattice_ops_txn_eval(lattice_ops *d, const char *cache, const lattice_ops_txn_entry *e, size_t n,
                                    const void *req, size_t req_len, void **result, size_t *result_len,
                                    lattice_ops_txn_final_fn fn, void *arg);

#endif
