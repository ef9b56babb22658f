/*
 * The state behind rebalance/'s opaque handles, shared by its files and read
 * by its unit suite (which inspects a plan's tasks, an applier's pending
 * count, a demander's position and a supplier's window through
 * tests/unit/rebalance/rebalance_view.c).  Product code outside rebalance/
 * never includes this header: the build does not put it on their path.
 */
#ifndef REBALANCE_INT_H
#define REBALANCE_INT_H

#include "rebalance/rebalance.h"

struct lattice_rebalance_plan {
    uint32_t *rank;      /* rank[node] = position by consistent id (for sessions) */
    size_t nnodes;
    lattice_rebalance_task *tasks;
    size_t ntasks, cap_tasks;
    uint32_t *suppliers;
    size_t nsup, cap_sup;
    uint32_t *lost;
    size_t nlost, cap_lost;
};

struct tomb;

struct lattice_rebalance_applier {
    lattice_store *store;
    char cache[LATTICE_CACHE_NAME_MAX + 1];
    lattice_rebalance_ids ids;
    lattice_rebalance_progress *progress;
    uint8_t *state;        /* per partition: PART_* */
    uint32_t partitions, pending;
    lattice_store_entry *ents;
    size_t ecap;
    /* Removes seen while partitions load (see note_remove): chained hash of
     * (partition, key) -> version; tomb_count[p] per partition. */
    struct tomb **tombs;
    size_t tomb_buckets, tomb_total;
    uint32_t *tomb_count;
    /* Delta loads (begin_delta): the kept copy and its mark per partition,
     * and whether it was taken in (on the first delta batch). */
    lattice_store **base;
    uint64_t *mark;
    uint8_t *adopted;
};

struct lattice_rebalance_demander {
    char cache[LATTICE_CACHE_NAME_MAX + 1];
    lattice_rebalance_ids ids;
    lattice_rebalance_flow_config cfg;
    uint32_t *parts;
    size_t n, cur, first;   /* loading parts[cur]; this session asked for parts[first..n) */
    uint32_t nsup, sup, tried;
    uint64_t expected;      /* next batch number accepted */
    uint64_t deadline;
    lattice_rebalance_demander_state state;
    const lattice_rebalance_delta_base *bases; /* the caller's, sent with every first demand */
    size_t nbases;
};

struct kept {
    uint64_t batch;
    void *buf;
    size_t len;
};

struct lattice_rebalance_supplier {
    lattice_store *store;
    char cache[LATTICE_CACHE_NAME_MAX + 1];
    lattice_rebalance_ids ids;
    lattice_rebalance_flow_config cfg;
    lattice_rebalance_counter_fn counter_fn;
    void *counter_arg;
    uint32_t *parts;
    size_t n, cur;
    lattice_rebalance_batcher *b;  /* for parts[cur] */
    lattice_rebalance_demand bases;/* the first demand's delta bases (deltas only) */
    uint32_t delta_parts, full_parts; /* partitions sent as deltas / in full */
    uint32_t window;
    uint64_t next_batch, acked;    /* built 1..next_batch-1; acked 1..acked */
    struct kept *kept;             /* unacked batches, oldest first; window entries */
    uint32_t nkept;
    bool all_built, sent_any;
    uint64_t last_send_ms;
};

#endif
