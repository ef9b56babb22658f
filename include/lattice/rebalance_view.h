/*
 * lattice/rebalance_view.h: how a rebalance looks from outside - per-cache
 * progress (what `lattice rebalance` prints: JSON and a --watch bar, with
 * rates and an ETA) and the comparison of per-partition copy digests that
 * `lattice verify` reports.  Part of the public C API; implemented by the
 * rebalance module.  The figures come from lattice_caches_info() and
 * lattice_cache_digests() (lattice.h).
 *
 * Plain values and pure functions: no clock is read here - callers pass
 * now_ms (lt_mono_ms() of lattice/clock.h) - and nothing is shared.
 */
#ifndef LATTICE_REBALANCE_VIEW_H
#define LATTICE_REBALANCE_VIEW_H

#include <stddef.h>
#include <stdint.h>

#include "lattice/cache_spec.h"
#include "lattice/status.h"

/* ------------------------------------------------------------------------ */
/* Progress                                                                  */
/* ------------------------------------------------------------------------ */

/* Per cache, on the demander.  A plain value; update it from one thread and
 * copy it out for readers. */
typedef struct lattice_rebalance_progress {
    char cache[LATTICE_CACHE_NAME_MAX + 1];
    uint32_t partitions_total;  /* partitions this rebalance loads here */
    uint32_t partitions_done;
    uint32_t partitions_moving; /* begun, not done */
    uint32_t partitions_delta;  /* done ones loaded as a delta of a kept copy */
    uint64_t entries_received;
    uint64_t bytes_received;    /* key + value bytes */
    uint64_t started_ms, updated_ms;
} lattice_rebalance_progress;

void lattice_rebalance_progress_init(lattice_rebalance_progress *p, const char *cache,
                                     uint32_t partitions_total, uint64_t now_ms);

typedef struct lattice_rebalance_rate {
    double bytes_per_s, entries_per_s;
    double eta_s;   /* from the partition completion rate; < 0 when unknown */
    double percent; /* partitions done / total */
} lattice_rebalance_rate;

void lattice_rebalance_progress_rate(const lattice_rebalance_progress *p, uint64_t now_ms,
                                     lattice_rebalance_rate *r);

/* `lattice rebalance --json`: {"in_progress":bool,"caches":[{"name",
 * "partitions_moving","partitions_left","entries_received","bytes_received",
 * "bytes_per_s","entries_per_s","eta_s"}]}.  snprintf contract. */
size_t lattice_rebalance_progress_json(const lattice_rebalance_progress *p, size_t n,
                                       uint64_t now_ms, char *buf, size_t len);
/* One line for `--watch`, e.g. "default [#####-----]  50% 512/1024 left
 * 1.2M entries 120.5 MB 35.2 MB/s eta 14s".  width = bar cells (>= 1).
 * snprintf contract. */
size_t lattice_rebalance_progress_bar(const lattice_rebalance_progress *p, uint64_t now_ms,
                                      unsigned width, char *buf, size_t len);

/* ------------------------------------------------------------------------ */
/* Verification (`lattice verify CACHE`)                                     */
/* ------------------------------------------------------------------------ */

typedef struct lattice_rebalance_digest {
    uint32_t node;        /* caller's node index */
    uint32_t partition;
    uint64_t hash;        /* sum of per-entry hashes of (key, value, expire, version) */
    uint64_t size;        /* live entries */
    uint64_t counter;     /* update counter of this copy */
} lattice_rebalance_digest;

#define LATTICE_REBALANCE_CONFLICT_HASH 1u
#define LATTICE_REBALANCE_CONFLICT_SIZE 2u
#define LATTICE_REBALANCE_CONFLICT_COUNTER 4u

typedef struct lattice_rebalance_conflict {
    uint32_t partition;
    uint32_t node_a, node_b;  /* node_a: the copy compared against (highest counter) */
    unsigned what;            /* LATTICE_REBALANCE_CONFLICT_* bits */
} lattice_rebalance_conflict;

/* Groups digests by partition and compares every copy with the copy holding
 * the highest counter (ties: lowest node).  *out is lt_malloc'd (NULL when
 * *count is 0), ordered by partition then node. */
lattice_status lattice_rebalance_verify(const lattice_rebalance_digest *d, size_t n,
                                        lattice_rebalance_conflict **out, size_t *count);

#endif
