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

#include "data_int.h"

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
    uint64_t view;        /* rebal_server_view the MOVING set was computed on (0: stale) */
    bool active;          /* sessions running */
} rebal_figures;
/* The live server set as a number (equal sets, equal numbers). */
uint64_t rebal_server_view(const lattice_data *d);
void rebal_figures_of(const lattice_data *d, const cache_def *c, rebal_figures *f);

/* `lattice verify`: CALL_DIGESTS gathers every server's digests of its
 * OWNING copies (CTL_DIGEST); the call's result value is a digest_result. */
typedef struct digest_result {
    lattice_partition_digest *d;
    size_t n, cap;
} digest_result;
void rebal_start_digests(lattice_data *d, opx *o);
void rebal_serve_digest(lattice_data *d, const Latdata__Req *q, const origin *o);
void rebal_digest_part(lattice_data *d, bcast *b, const Latdata__Resp *rs);

void rebal_cache_free(struct rebal_cache *rc);
void rebal_node_free(lattice_data *d);

#endif
