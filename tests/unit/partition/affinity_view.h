/*
 * Views of a rendezvous assignment that tests and the partition benchmark
 * measure it by - per-node balance, the partitions that move between two
 * assignments, Redis slot runs, redundancy given live nodes.  The running
 * node needs none of them, so they live here, built on partition/partition.h's
 * public accessors only.
 */
#ifndef AFFINITY_VIEW_H
#define AFFINITY_VIEW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "partition/partition.h"

/* Partitions node owns in the given roles (AV_ROLE_* bits),
 * in partition order, into out (NULL: only count; else room for
 * lattice_affinity_partitions(a) entries).  Returns how many. */
#define AV_ROLE_PRIMARY 1u
#define AV_ROLE_BACKUP 2u
uint32_t av_node_partitions(const lattice_affinity *a, uint32_t node,
                                          unsigned roles, uint32_t *out);

/* Redis slots 0..16383 grouped into maximal runs whose partitions have the
 * same owner list, for CLUSTER SLOTS/SHARDS: slot s lives in partition
 * lattice_partition_of_slot(s), so read a run's owners from `partition`.
 * A partition is one contiguous slot range, so there are at most as many
 * runs as partitions (all 16384 slots are always covered, in order).
 * *ranges is lt_malloc'd (lt_free it); NOMEM on allocation failure. */
typedef struct av_slot_range {
    uint16_t first, last;     /* inclusive */
    uint32_t partition;       /* partition of `first` */
} av_slot_range;

lattice_status av_slot_ranges(const lattice_affinity *a, av_slot_range **ranges,
                                            size_t *count);

/* How two assignments of the same cache differ, partition by partition. */
#define AV_PRIMARY_CHANGED 1u /* another primary (or none) */
#define AV_OWNERS_CHANGED 2u  /* the set of owners differs */
#define AV_ORDER_CHANGED 4u   /* same owners, other backup order */

typedef struct av_change {
    uint32_t partition;
    uint32_t flags;           /* AV_*_CHANGED */
} av_change;

/* Lists, in partition order, every partition whose owner list (compared by
 * consistent id) differs between from and to.  *changes is allocated with
 * lt_malloc (free with lt_free; NULL when *count is 0).  INVAL when the
 * partition counts differ. */
lattice_status av_diff(const lattice_affinity *from, const lattice_affinity *to,
                                     av_change **changes, size_t *count);

/* Primaries/backups per node. */
typedef struct av_balance {
    uint32_t nodes;
    uint32_t primary_min, primary_max;
    double primary_avg;
    uint32_t backup_min, backup_max;
    double backup_avg;
} av_balance;

void av_balance_of(const lattice_affinity *a, av_balance *out);
uint32_t av_primaries_of(const lattice_affinity *a, uint32_t node);
uint32_t av_backups_of(const lattice_affinity *a, uint32_t node);

/* Redundancy of a partition given which of the assignment's nodes are alive. */
typedef enum av_redundancy {
    AV_REDUNDANCY_FULL = 0,  /* every assigned copy that can exist is alive */
    AV_REDUNDANCY_UNDER = 1, /* some copy alive, fewer than wanted */
    AV_REDUNDANCY_LOST = 2,  /* no assigned owner alive */
} av_redundancy;

const char *av_redundancy_name(av_redundancy r); /* "full","under","lost" */

/* mask[node] = 1 for each node of a whose consistent id is in live[0..n); ids
 * that a does not know are ignored.  mask has lattice_affinity_node_count(a)
 * bytes.  Returns how many live ids were given that are servers at all
 * (n minus NULL entries), which is what "copies wanted" is measured against. */
uint32_t av_live_mask(const lattice_affinity *a, const char *const *live,
                                    size_t n, uint8_t *mask);

/* Wanted copies = min(copies of a, live_servers); LOST when no owner of p is
 * live, UNDER when fewer than wanted are, FULL otherwise. */
av_redundancy av_classify(const lattice_affinity *a, uint32_t p,
                                             const uint8_t *mask, uint32_t live_servers);

typedef struct av_health {
    uint32_t full, under, lost;
} av_health;

/* Classifies every partition (per_partition may be NULL, else has
 * lattice_affinity_partitions(a) entries) and sums them up. */
lattice_status av_health_of(const lattice_affinity *a, const char *const *live,
                                          size_t n, av_redundancy *per_partition,
                                          av_health *sum);

#endif
