/*
 * ops/ops.h: the operation path of a node (prefix lattice_ops_): the data
 * thread, its data channel and every stage an operation passes through.
 *
 * A node has one lattice_ops.  Its data thread owns the data channel (plain
 * TCP, link.c: a data port others connect to and send requests on, one
 * connection of ours to each server peer), the pending table, the cluster
 * metadata (meta/) and every store write.  Other threads hand work over:
 * lattice_ops_submit (the cache operations of lattice/ops.h) and
 * lattice_ops_call (stats, create/destroy, partitions, digests) - or, in
 * lattice_ops_submit_inline, take the data thread's state for a moment and
 * run their ops to completion themselves (loop_run_here).  Every callback
 * runs in the data thread's role (on it, or on such a thread: never two at
 * once), except those of reads lattice_ops_submit_inline answers from the
 * store on the calling thread (fast.c).
 *
 * Every file and what it holds: docs/ARCHITECTURE.md, "File map".
 * The metadata exchange (control.c) and the rebalance executor
 * (rebal_exec.c) ride on the same channel.
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
    int restart_wait_ms;            /* whole-grid restart's wait for the baseline (-1: no end; restart.c) */
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

/* Internal calls, run on the data thread: fn gets a result whose value
 * points at a call-specific struct the caller then owns. */
typedef enum lattice_ops_call_kind {
    LATTICE_OPS_CALL_STATS = 1,      /* value: lattice_ops_stats (lattice_ops_stats_free) */
    LATTICE_OPS_CALL_CREATE = 2,     /* arg: full cache spec */
    LATTICE_OPS_CALL_DESTROY = 3,    /* arg: cache name */
    LATTICE_OPS_CALL_PARTITIONS = 4, /* arg: cache name; value: lattice_partitions_info */
    LATTICE_OPS_CALL_DIGESTS = 5,    /* arg: cache name; value: lattice_ops_digests */
    LATTICE_OPS_CALL_RESET_LOST = 6, /* arg: cache name; num: the LOST partitions given up */
    LATTICE_OPS_CALL_HANDOVER = 7,   /* num: partitions this node alone serves while another live
                                        server holds them MOVING (a graceful stop waits for them) */
} lattice_ops_call_kind;
lattice_status lattice_ops_call(lattice_ops *d, lattice_ops_call_kind call, const char *arg, lattice_op_fn fn,
                                void *farg);

/* LATTICE_OPS_CALL_STATS: one entry per server node. */
typedef struct lattice_ops_stats_node {
    char id[64];
    size_t n;
    lattice_cache_node_info *caches; /* caches[i] is the cache names[i] */
    char (*names)[LATTICE_CACHE_NAME_MAX + 1];
    uint64_t *view_major, *base_version; /* per cache: what its rebalance figures were computed on */
} lattice_ops_stats_node;
typedef struct lattice_ops_stats {
    size_t n_caches;
    lattice_cache_config *cfgs;
    size_t n_nodes;
    lattice_ops_stats_node *nodes;
} lattice_ops_stats;
void lattice_ops_stats_free(lattice_ops_stats *s);

/* LATTICE_OPS_CALL_DIGESTS: every server's digests of its OWNING copies
 * (d is lt_malloc'd; the struct too). */
typedef struct lattice_ops_digests {
    lattice_partition_digest *d;
    size_t n, cap;
} lattice_ops_digests;

/* ---- inspection (inspect.c): the data channel asked from outside ----
 *
 * What `lattice caches`, `partitions`, `rebalance` and `verify` read
 * without joining: the asker is no member, so the topology version does
 * not move.  It asks every server of `topology` (an inspection's, which
 * names their data_addr) directly, as a client node would, with the data
 * channel's MAC from the cluster secret, and waits at most timeout_ms on
 * the caller's thread (no lattice_ops needed).  Results are the internal
 * calls' (LATTICE_OPS_CALL_STATS, _PARTITIONS, _DIGESTS), owned by the
 * caller; TIMEOUT when no server gave its metadata in time. */
typedef struct lattice_ops_inspect {
    const lattice_topology *topology;
    const uint8_t *secret;          /* NULL = no MAC */
    size_t secret_len;
    int timeout_ms;
    /* Node ids the inspection saw silent (a heartbeat late: most likely
     * dead, soon removed): asked, but not waited for - as a client node
     * stops waiting once a dead server leaves its topology. */
    const char *const *silent;
    size_t n_silent;
} lattice_ops_inspect;
/* Every server's stats; a server that did not answer in time is left out. */
lattice_status lattice_ops_inspect_stats(const lattice_ops_inspect *in, lattice_ops_stats **out);
/* NO_CACHE when the metadata has no such cache. */
lattice_status lattice_ops_inspect_partitions(const lattice_ops_inspect *in, const char *cache,
                                              lattice_partitions_info **out);
/* Every server's digests of its OWNING copies: TIMEOUT unless all answered. */
lattice_status lattice_ops_inspect_digests(const lattice_ops_inspect *in, const char *cache,
                                           lattice_ops_digests **out);

#endif
