/*
 * http/shapes.h: the JSON shapes of the grid's inspection views (prefix
 * lattice_shapes_), built in one place for the two programs that print
 * them: the CLI's `lattice --json top | caches | partitions | rebalance`
 * and the HTTP endpoint's /topology, /caches, /partitions, /rebalance
 * (docs/OPERATIONS.md).  The same keys either way, so a script - or the web
 * console - reads both; keys may be added, never renamed.
 *
 * Pure functions of the public API's structs (lattice.h, rebalance_view.h):
 * no clock is read and nothing is asked of a node, so the CLI feeds them
 * what an inspection answered and the endpoint what its node sees.  Every
 * json_t returned is a new reference: the caller's (NULL only when out of
 * memory).
 */
#ifndef LATTICE_HTTP_SHAPES_H
#define LATTICE_HTTP_SHAPES_H

#include <jansson.h>
#include <stdbool.h>

#include "lattice/lattice.h"
#include "lattice/rebalance_view.h"

/* How the caller hears member m (lattice_inspection_member, or
 * lattice_node_member_state): fill *out, false when it knows nothing. */
typedef bool (*lattice_shapes_member_fn)(void *ctx, const lattice_member *m, lattice_member_state *out);

/* `top`: {"topology_version":[major,minor],"coordinator":ID,"nodes":[{"id",
 * "consistent_id","order","role","addr","host","uptime_ms","state",
 * "silent_ms","attrs",{"cpu_load","memory_rss_bytes","dropped"} when heard}],
 * "quorum":{...}}.  now_wall_ms: lt_wall_ms(), the uptime of a member no
 * stats were heard of. */
json_t *lattice_shapes_top(const lattice_topology *t, lattice_shapes_member_fn fn, void *ctx, uint64_t now_wall_ms);
/* The quorum of the side t shows: {"baseline_version","baseline_nodes",
 * "baseline_in_topology","has_quorum"}. */
json_t *lattice_shapes_quorum(const lattice_topology *t);
/* How many baseline servers t holds (the quorum's baseline_in_topology). */
size_t lattice_shapes_baseline_present(const lattice_topology *t);

/* `caches`: {"caches":[{"name","mode","partitions","backups","sync",
 * "read_from_backup","size","spec","nodes":[{"id","consistent_id",
 * "primary_entries","backup_entries","primary_partitions",
 * "backup_partitions","moving_partitions","moving_entries","reads","writes",
 * "hits","misses","evictions","bytes","pages"}]}]}.  t (may be NULL) names
 * the nodes by consistent id. */
json_t *lattice_shapes_caches(const lattice_cache_info *ci, size_t nc, const lattice_topology *t);

/* `partitions CACHE`: {"cache","topology_version","partitions":[{"id",
 * "owners":[{"node","consistent_id","role","state"}],"state":"OWNING"|"LOST",
 * "redundancy":"full"|"under"|"lost"}],"balance":{"primary_min",
 * "primary_avg","primary_max","nodes"},"nodes":[{"consistent_id",
 * "primaries","backups"}],"lost","under_replicated","copies_wanted"}. */
json_t *lattice_shapes_partitions(const lattice_partitions_info *pi);

/* `rebalance`: every server's figures of every cache summed per cache, and
 * per node its last rebalance. */
typedef struct lattice_shapes_rebalance_node {
    char id[64], consistent_id[160];
    uint64_t entries, bytes;
    uint32_t done, delta;  /* partitions loaded, of them as deltas of a kept copy */
} lattice_shapes_rebalance_node;

typedef struct lattice_shapes_rebalance {
    lattice_rebalance_progress *caches;   /* one per cache, in ci's order */
    size_t n_caches;
    lattice_shapes_rebalance_node *nodes;
    size_t n_nodes;
    bool in_progress;                     /* a plan runs somewhere or a partition is MOVING */
} lattice_shapes_rebalance;

/* Sums ci (lattice_caches_info's answer) into *out; now_ms: lt_mono_ms().
 * NOMEM.  Free with lattice_shapes_rebalance_free. */
lattice_status lattice_shapes_rebalance_gather(const lattice_cache_info *ci, size_t nc, const lattice_topology *t,
                                               uint64_t now_ms, lattice_shapes_rebalance *out);
void lattice_shapes_rebalance_free(lattice_shapes_rebalance *r);
/* {"in_progress":bool,"caches":[{"name","partitions_moving",
 * "partitions_left","partitions_total","entries_received","bytes_received",
 * "bytes_per_s","entries_per_s","eta_s"}],"nodes":[{"id","consistent_id",
 * "entries_received","bytes_received","mode":"full"|"delta",
 * "partitions_full","partitions_delta"}]}; the rates and estimate since
 * each cache's rebalance began (lattice_rebalance_progress_rate). */
json_t *lattice_shapes_rebalance_json(const lattice_shapes_rebalance *r, uint64_t now_ms);
/* "delta" when at least one partition of the node's last rebalance came as a
 * delta of the copy it kept (only what it missed), "full" otherwise. */
const char *lattice_shapes_rebalance_mode(const lattice_shapes_rebalance_node *x);

#endif
