/*
 * Internal to node/: rebalancing in the running grid (node/rebal.c), the
 * node's wiring of the network-free core in rebalance/rebalance.h.
 *
 * Every function here runs on the data thread only and keeps its state in
 * cache_def.rb (demander side, per cache) and lattice_data.rb (supplier
 * sessions); nothing is shared with other threads.  The store calls need the
 * data thread registered with RCU, which it is.  Design: docs/REBALANCE.md
 * ("In the grid").
 */
#ifndef LATTICE_NODE_REBAL_INT_H
#define LATTICE_NODE_REBAL_INT_H

#include <stdint.h>

#include "node/data_int.h"

struct rebal_cache;
struct rebal_node;

/* After any topology or metadata change: recompute this node's MOVING
 * partitions per cache, evict copies it neither serves nor will own, drop
 * the sessions of the old plan and schedule a new one after the cache's
 * rebalance_delay_ms. */
void rebal_on_change(lattice_data *d);
/* Every loop tick: start scheduled plans, drive demander and supplier
 * sessions (deadlines, throttle), clean up finished ones. */
void rebal_tick(lattice_data *d, uint64_t now);
/* CTL_DEMAND / CTL_SUPPLY requests from a peer (key = sender node id,
 * value = encoded Demand / Supply). */
void rebal_on_demand(lattice_data *d, const Latdata__Req *q);
void rebal_on_supply(lattice_data *d, const Latdata__Req *q);
/* A replicated remove reached this node's copy of a partition: while it is
 * loading, supplied data must not bring the key back. */
void rebal_note_remove(cache_def *c, uint32_t partition, const void *key, size_t key_len, uint64_t version);

/* Per-cache figures for stats (and so `lattice rebalance` and the
 * coordinator's switch decision). */
typedef struct rebal_figures {
    uint32_t left;        /* MOVING partitions here not loaded yet */
    uint32_t total;       /* partitions the current plan loads here */
    uint64_t entries, bytes;
    uint64_t elapsed_ms;  /* since the current plan started (0: none) */
    uint64_t view_major;  /* topology major the MOVING set was computed on */
    bool active;          /* sessions running */
} rebal_figures;
void rebal_figures_of(const lattice_data *d, const cache_def *c, rebal_figures *f);

void rebal_cache_free(struct rebal_cache *rc);
void rebal_node_free(lattice_data *d);

#endif
