/*
 * Internal to grid/: the rebalance executor (rebal_exec.c), the running
 * grid's wiring of the network-free core in rebalance/rebalance.h.  It
 * lives in grid/, above ops/, because it executes over the data channel:
 * demands and supplies are requests on it (kinds it registers with ops/),
 * and it reads the caches' owners (meta) - rebalance/ sits below both and
 * sees neither.
 *
 * Every function here runs on the data thread only and keeps its state in
 * lattice_meta_cache.rb (demander side, per cache) and the grid's state
 * (struct lattice_grid, grid_int.h: the supplier sessions); nothing is
 * shared with other threads.  The store calls need the data thread
 * registered with RCU, which it is.  Design: docs/REBALANCE.md
 * ("In the grid").
 */
#ifndef LATTICE_GRID_REBAL_EXEC_H
#define LATTICE_GRID_REBAL_EXEC_H

#include <stdint.h>

#include "grid_int.h"

struct rebal_cache;
struct rebal_node;

/* After any topology or metadata change: recompute this node's MOVING
 * partitions per cache, evict copies it neither serves nor will own, drop
 * the sessions of the old plan and schedule a new one after the cache's
 * rebalance_delay_ms. */
void rebal_on_change(lattice_ops *d);
/* Every loop tick: start scheduled plans, drive demander and supplier
 * sessions (deadlines, throttle), clean up finished ones. */
void rebal_tick(lattice_ops *d, uint64_t now);
/* CTL_DEMAND / CTL_SUPPLY requests from a peer (key = sender node id,
 * value = encoded Demand / Supply). */
void rebal_on_demand(lattice_ops *d, const Latdata__Req *q);
void rebal_on_supply(lattice_ops *d, const Latdata__Req *q);
/* A replicated remove reached this node's copy of a partition: while it is
 * loading, supplied data must not bring the key back. */
void rebal_note_remove(lattice_meta_cache *c, uint32_t partition, const void *key, size_t key_len, uint64_t version);

/* Per-cache figures for stats (and so `lattice rebalance` and the
 * coordinator's switch decision). */
typedef struct rebal_figures {
    uint32_t left;        /* MOVING partitions here not loaded yet */
    uint32_t total;       /* partitions the current plan loads here */
    uint64_t entries, bytes;
    uint32_t done;        /* partitions the current (or last) plan loaded here */
    uint32_t delta;       /* ... of them as deltas of a kept copy */
    uint64_t elapsed_ms;  /* since the current plan started (0: none) */
    uint64_t view;        /* lattice_meta_server_view the MOVING set was computed on (0: stale) */
    bool active;          /* sessions running */
} rebal_figures;
void rebal_figures_of(const lattice_ops *d, const lattice_meta_cache *c, rebal_figures *f);

/* verify.c - `lattice verify`: LATTICE_GRID_CALL_DIGESTS gathers every server's digests of its
 * OWNING copies (CTL_DIGEST); the call's result value is a lattice_grid_digests. */
void rebal_start_digests(lattice_ops *d, opx *o);
void rebal_serve_digest(lattice_ops *d, const Latdata__Req *q, const origin *o);
/* Appends the digests one server sent (a CTL_DIGEST answer's value) to dr,
 * named by that server's node id; false when the value is not whole
 * digests (or out of memory). */
bool rebal_unpack_digests(lattice_grid_digests *dr, const char *node, const uint8_t *b, size_t len);

void rebal_cache_free(struct rebal_cache *rc);
/* meta's cache_gone hook: drops c's rebalance state (before its store goes). */
void rebal_cache_gone(void *arg, lattice_meta_cache *c);
void rebal_node_free(lattice_ops *d);

#endif
