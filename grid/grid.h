/*
 * grid/grid.h: the grid's machines of a node (prefix lattice_grid_): the
 * metadata exchange and the base switch, stats and salvage reports, the
 * API's internal calls, the rebalance executor and verify, whole-grid
 * restart, salvage of kept copies, and inspection from outside the grid.
 *
 * They run on the data thread of a lattice_ops (ops/ops.h) and ride on its
 * data channel, but ops/ never names them: lattice_grid_attach registers
 * them at the registration points ops/ offers (its tick list, its table of
 * control kinds, its event hooks: ops/ops_int.h).  So grid/ includes ops/,
 * and ops/ includes nothing of grid/.  Every file and what it holds:
 * docs/ARCHITECTURE.md, "File map".
 */
#ifndef LATTICE_GRID_GRID_H
#define LATTICE_GRID_GRID_H

#include <stdint.h>

#include "ops/ops.h"

/* Attaches the grid's machines to d: after lattice_ops_init, before
 * lattice_ops_start (node/node.c).  restart_wait_ms: a whole-grid
 * restart's wait for the baseline (-1: no end; restart.c).  NOMEM leaves d
 * as it was; lattice_ops_destroy frees what attach took. */
lattice_status lattice_grid_attach(lattice_ops *d, int64_t restart_wait_ms);

/* Internal calls, run on the data thread: fn gets a result whose value
 * points at a call-specific struct the caller then owns. */
typedef enum lattice_grid_call_kind {
    LATTICE_GRID_CALL_STATS = 1,      /* value: lattice_grid_stats (lattice_grid_stats_free) */
    LATTICE_GRID_CALL_CREATE = 2,     /* arg: full cache spec */
    LATTICE_GRID_CALL_DESTROY = 3,    /* arg: cache name */
    LATTICE_GRID_CALL_PARTITIONS = 4, /* arg: cache name; value: lattice_partitions_info */
    LATTICE_GRID_CALL_DIGESTS = 5,    /* arg: cache name; value: lattice_grid_digests */
    LATTICE_GRID_CALL_RESET_LOST = 6, /* arg: cache name; num: the LOST partitions given up */
    LATTICE_GRID_CALL_HANDOVER = 7,   /* num: partitions this node alone serves while another live
                                         server holds them MOVING (a graceful stop waits for them) */
} lattice_grid_call_kind;
lattice_status lattice_grid_call(lattice_ops *d, lattice_grid_call_kind call, const char *arg, lattice_op_fn fn,
                                 void *farg);

/* LATTICE_GRID_CALL_STATS: one entry per server node. */
typedef struct lattice_grid_stats_node {
    char id[64];
    size_t n;
    lattice_cache_node_info *caches; /* caches[i] is the cache names[i] */
    char (*names)[LATTICE_CACHE_NAME_MAX + 1];
    uint64_t *view_major, *base_version; /* per cache: what its rebalance figures were computed on */
} lattice_grid_stats_node;
typedef struct lattice_grid_stats {
    size_t n_caches;
    lattice_cache_config *cfgs;
    size_t n_nodes;
    lattice_grid_stats_node *nodes;
} lattice_grid_stats;
void lattice_grid_stats_free(lattice_grid_stats *s);

/* LATTICE_GRID_CALL_DIGESTS: every server's digests of its OWNING copies
 * (d is lt_malloc'd; the struct too). */
typedef struct lattice_grid_digests {
    lattice_partition_digest *d;
    size_t n, cap;
} lattice_grid_digests;

/* ---- inspection (inspect.c): the data channel asked from outside ----
 *
 * What `lattice caches`, `partitions`, `rebalance` and `verify` read
 * without joining: the asker is no member, so the topology version does
 * not move.  It asks every server of `topology` (an inspection's, which
 * names their data_addr) directly, as a client node would, with the data
 * channel's MAC from the cluster secret, and waits at most timeout_ms on
 * the caller's thread (no lattice_ops needed).  Results are the internal
 * calls' (LATTICE_GRID_CALL_STATS, _PARTITIONS, _DIGESTS), owned by the
 * caller; TIMEOUT when no server gave its metadata in time. */
typedef struct lattice_grid_inspect {
    const lattice_topology *topology;
    const uint8_t *secret;          /* NULL = no MAC */
    size_t secret_len;
    int timeout_ms;
    /* Node ids the inspection saw silent (a heartbeat late: most likely
     * dead, soon removed): asked, but not waited for - as a client node
     * stops waiting once a dead server leaves its topology. */
    const char *const *silent;
    size_t n_silent;
} lattice_grid_inspect;
/* Every server's stats; a server that did not answer in time is left out. */
lattice_status lattice_grid_inspect_stats(const lattice_grid_inspect *in, lattice_grid_stats **out);
/* NO_CACHE when the metadata has no such cache. */
lattice_status lattice_grid_inspect_partitions(const lattice_grid_inspect *in, const char *cache,
                                               lattice_partitions_info **out);
/* Every server's digests of its OWNING copies: TIMEOUT unless all answered. */
lattice_status lattice_grid_inspect_digests(const lattice_grid_inspect *in, const char *cache,
                                            lattice_grid_digests **out);

#endif
