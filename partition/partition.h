/*
 * partition: how a cache's keys are split over the server nodes.
 *
 *   key --crc16/{hash tag}--> slot (0..16383) --/ (16384/partitions)--> partition
 *   (server nodes, cache config) --rendezvous--> assignment: owners per partition
 *   per node and partition: the state of its copy (lattice_partition_state)
 *
 * Everything here is pure and network-free.  The node module turns
 * its topology snapshot into an array of lattice_affinity_node; every node and
 * every client computes the same assignment from the same input (the hash and
 * mix functions below are part of the cluster's contract: changing them is a
 * wire-incompatible change).  Details and rationale: docs/PARTITIONS.md.
 */
#ifndef LATTICE_PARTITION_H
#define LATTICE_PARTITION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lattice/cache_spec.h"
#include "lattice/status.h"

/* ------------------------------------------------------------------------ */
/* Key -> partition                                                          */
/* ------------------------------------------------------------------------ */

#define LATTICE_PARTITION_SLOTS 16384u        /* Redis Cluster's slot count */
#define LATTICE_PARTITION_MAX 16384u          /* partitions: power of two, 1..MAX */
#define LATTICE_PARTITION_DEFAULT 1024u

/* CRC16-XMODEM (poly 0x1021, init 0, no reflection), as Redis Cluster:
 * "123456789" -> 0x31C3.  len 0 gives 0; data may be NULL only when len is 0. */
uint16_t lattice_partition_crc16(const void *data, size_t len);

/* Redis's hash-tag rule: if the key holds a '{' and, after the first '{', a
 * '}' with at least one byte between them, only those bytes are hashed;
 * otherwise the whole key.  Returns the offset and length of the hashed part. */
void lattice_partition_hash_part(const void *key, size_t len, size_t *off, size_t *part_len);

/* The Redis Cluster slot of a key (CLUSTER KEYSLOT): crc16(hash part) & 16383. */
uint16_t lattice_partition_key_slot(const void *key, size_t len);

/* partition = slot / (16384 / partitions): each partition is one contiguous
 * range of Redis slots, so CLUSTER SLOTS lists at most one range per
 * partition.  An invalid count (lattice_partition_count_valid) or slot gives 0. */
uint32_t lattice_partition_of_slot(uint32_t slot, uint32_t partitions);
/* lattice_partition_of_slot(lattice_partition_key_slot(key, len), partitions). */
uint32_t lattice_partition_of_key(const void *key, size_t len, uint32_t partitions);

/* True for a power of two in 1..LATTICE_PARTITION_MAX. */
bool lattice_partition_count_valid(uint64_t partitions);

/* ------------------------------------------------------------------------ */
/* Cache configuration                                                       */
/* ------------------------------------------------------------------------ */

/*
 * A plain value (not opaque on purpose): it is copied into messages, compared
 * and printed by several modules, and holds no pointers, so a struct copy is a
 * full copy.  Always start from lattice_cache_config_init() and change it with
 * the parsers, which validate.
 */
#define LATTICE_REGION_NAME_MAX 64
#define LATTICE_CACHE_MAX_BACKUPS 64

typedef enum lattice_cache_mode {
    LATTICE_CACHE_PARTITIONED = 0,
    LATTICE_CACHE_REPLICATED = 1,
} lattice_cache_mode;

typedef enum lattice_cache_sync {
    LATTICE_SYNC_FULL = 0,      /* "full_sync": ack after every backup applied */
    LATTICE_SYNC_PRIMARY = 1,   /* "primary_sync": ack after the primary applied */
    LATTICE_SYNC_ASYNC = 2,     /* "full_async": ack once sent to the primary */
} lattice_cache_sync;

typedef enum lattice_rebalance_mode {
    LATTICE_REBALANCE_ASYNC = 0,
    LATTICE_REBALANCE_SYNC = 1,
    LATTICE_REBALANCE_NONE = 2,
} lattice_rebalance_mode;

typedef struct lattice_cache_config {
    char name[LATTICE_CACHE_NAME_MAX + 1];
    lattice_cache_mode mode;          /* mode=partitioned|replicated */
    uint32_t partitions;              /* partitions=1024 (power of two, 1..16384) */
    uint32_t backups;                 /* backups=1 (0..64; clamped to servers-1) */
    lattice_cache_sync sync;          /* sync=full_sync */
    bool read_from_backup;            /* read_from_backup=true */
    uint64_t expiry_ms;               /* expiry_ms=none (0 = entries never expire) */
    char region[LATTICE_REGION_NAME_MAX + 1]; /* region=default */
    bool exclude_neighbors;           /* exclude_neighbors=false */
    lattice_rebalance_mode rebalance_mode;    /* rebalance_mode=async */
    uint64_t rebalance_batch_bytes;   /* 524288 */
    uint32_t rebalance_prefetch;      /* 3 */
    uint64_t rebalance_throttle_ms;   /* 0 */
    uint64_t rebalance_delay_ms;      /* 0 */
    uint32_t history;                 /* 1024: update records kept per partition (delta rebalance; 0 = off) */
    uint64_t history_bytes;           /* 65536: ... and their bytes per partition */
    uint64_t max_key_bytes;           /* 65536 */
    uint64_t max_value_bytes;         /* 536870912 (512 MiB, Redis's largest string) */
} lattice_cache_config;

/* Every option at its default, with the given name (NULL or invalid -> ""). */
void lattice_cache_config_init(lattice_cache_config *c, const char *name);

/* Names: 1..64 bytes of [A-Za-z0-9_.-], not starting with '.' or '-'.  On
 * failure writes a sentence to err (if non-NULL) and returns false. */
bool lattice_cache_config_name_valid(const char *name, char *err, size_t errlen);

/* "k=v,k=v,..." (the part after ':' in --cache).  All or nothing: on error the
 * config is unchanged.  A key given twice is an error.  "" sets nothing. */
lattice_status lattice_cache_config_parse_list(lattice_cache_config *c, const char *list,
                                               char *err, size_t errlen);

/* --cache NAME[:k=v,...]: resets c to defaults named NAME, then applies the list. */
lattice_status lattice_cache_config_parse_spec(lattice_cache_config *c, const char *spec,
                                               char *err, size_t errlen);

/* `lattice cache create NAME k=v ...`: same as parse_spec with argv as the list. */
lattice_status lattice_cache_config_parse_args(lattice_cache_config *c, const char *name,
                                               int argc, const char *const *argv,
                                               char *err, size_t errlen);

#define LATTICE_CACHE_FORMAT_ALL 0      /* every key, in the documented order */
#define LATTICE_CACHE_FORMAT_CHANGED 1  /* only keys that differ from the default */

/* Formats "NAME:k=v,..." (or just "NAME" when nothing is printed) so that
 * parse_spec(format(c)) == c.  snprintf contract: returns the length the full
 * text needs; writes at most len bytes including the NUL. */
size_t lattice_cache_config_format(const lattice_cache_config *c, int flags, char *buf,
                                   size_t len);

bool lattice_cache_config_equal(const lattice_cache_config *a, const lattice_cache_config *b);

/* Names as used in specs and JSON ("partitioned", "full_sync", "async"). */
const char *lattice_cache_mode_name(lattice_cache_mode m);
const char *lattice_cache_sync_name(lattice_cache_sync s);

/* ------------------------------------------------------------------------ */
/* Rendezvous affinity                                                       */
/* ------------------------------------------------------------------------ */

/* One server node of a topology, as the node module hands it over.  Strings
 * are copied by lattice_affinity_compute; the caller keeps ownership. */
typedef struct lattice_affinity_node {
    const char *consistent_id; /* "host:port", unique and non-empty */
    const char *host;          /* for exclude_neighbors; NULL/"" = its own host */
    uint64_t order;            /* join order; the assignment does not depend on it */
} lattice_affinity_node;

#define LATTICE_AFFINITY_MAX_NODES 4096u

/* An immutable assignment: for each partition its owners, primary first.
 * Nodes are identified by index 0..node_count-1 in consistent-id order, so two
 * assignments of the same topology have the same indexes whatever the input
 * order.  Read-only after compute, so any number of threads may read it. */
typedef struct lattice_affinity lattice_affinity;

/* Computes the assignment of cfg over nodes[0..n) (rules and the exact
 * ranking formula: docs/PARTITIONS.md).  Uses cfg's partitions, backups, mode
 * and exclude_neighbors; replicated caches ignore exclude_neighbors.  n may be
 * 0 (every partition then has no owner).  INVAL for a bad partition count,
 * backups or mode, a NULL/empty or duplicate consistent id, or more than
 * LATTICE_AFFINITY_MAX_NODES nodes; NOMEM if an allocation fails.  *out is
 * set only on LATTICE_OK. */
lattice_status lattice_affinity_compute(const lattice_affinity_node *nodes, size_t n,
                                        const lattice_cache_config *cfg,
                                        lattice_affinity **out);
void lattice_affinity_free(lattice_affinity *a);

uint32_t lattice_affinity_partitions(const lattice_affinity *a);
/* Owners every partition has: min(backups+1, nodes), or nodes when replicated. */
uint32_t lattice_affinity_copies(const lattice_affinity *a);
uint32_t lattice_affinity_node_count(const lattice_affinity *a);
const char *lattice_affinity_node_id(const lattice_affinity *a, uint32_t node);
/* Index of a consistent id, or -1. */
int32_t lattice_affinity_node_index(const lattice_affinity *a, const char *consistent_id);

/* Owners of partition p, primary first; *count = lattice_affinity_copies(a).
 * The array lives as long as a.  p out of range -> NULL, *count = 0. */
const uint16_t *lattice_affinity_owners(const lattice_affinity *a, uint32_t p,
                                        uint32_t *count);
/* Primary's node index, or -1 when the partition has no owner / p is out of range. */
int32_t lattice_affinity_primary(const lattice_affinity *a, uint32_t p);
/* Position of node among p's owners: 0 primary, 1.. backups, -1 not an owner. */
int lattice_affinity_role(const lattice_affinity *a, uint32_t p, uint32_t node);

/* ------------------------------------------------------------------------ */
/* Partition states                                                          */
/* ------------------------------------------------------------------------ */

/*
 * The state of a node's copy of a partition (as Ignite's
 * GridDhtPartitionState), as the rebalance executor holds it per cache and
 * reports it.  Writes reach OWNING and MOVING copies; reads are served only by
 * OWNING copies.  A partition a node holds nothing of is EVICTED.  The
 * executor moves a copy EVICTED -> MOVING when this node must load it,
 * MOVING -> OWNING when it is loaded, MOVING -> LOST when no live copy can
 * supply it (LOST -> MOVING when the server set changes and one may), and
 * back to EVICTED when the partition is no longer this node's to load.
 * RENTING names a copy no longer assigned to a node; the executor drops such a
 * copy at once, so it goes straight to EVICTED.
 */
typedef enum lattice_partition_state {
    LATTICE_PART_MOVING = 0,
    LATTICE_PART_OWNING = 1,
    LATTICE_PART_RENTING = 2,
    LATTICE_PART_EVICTED = 3,
    LATTICE_PART_LOST = 4,
    LATTICE_PART_STATE_COUNT_
} lattice_partition_state;

/* "MOVING", "OWNING", ... (JSON/CLI); "UNKNOWN" out of range. */
const char *lattice_partition_state_name(lattice_partition_state s);

#endif
