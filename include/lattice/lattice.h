/*
 * The public C API of Lattice: start and stop a node (server or client mode),
 * read the current topology, subscribe to membership events.
 *
 *     lattice_config c;
 *     lattice_config_init(&c);
 *     c.cluster = "prod";
 *     c.finders[c.n_finders++] = "127.0.0.1:47500..47502";
 *     c.client = true;
 *     lattice_node *n;
 *     if (lattice_node_start(&c, &n) == LATTICE_OK &&
 *         lattice_node_wait_joined(n, 10000) == LATTICE_OK) {
 *         lattice_topology *t = lattice_node_topology(n);   // a reference: yours
 *         for (size_t i = 0; i < lattice_topology_size(t); i++)
 *             puts(lattice_topology_member(t, i)->consistent_id);
 *         lattice_topology_release(t);
 *     }
 *     lattice_node_stop(n);                                 // graceful leave + free
 *
 * Caches (docs/CACHES.md): any node, server or client, reads and writes any
 * cache; each operation goes to the key's primary.
 *
 *     lattice_cache_put(n, "default", "k", 1, "v", 1);      // acked per the cache's sync mode
 *     void *v; size_t vl;
 *     if (lattice_cache_get(n, "default", "k", 1, &v, &vl) == LATTICE_OK) lt_free(v);
 *     lattice_cache_create(n, "sessions:backups=2,expiry_ms=60000");
 *
 * The asynchronous form (many operations in flight, callbacks on the node's
 * data thread) is lattice/ops.h.
 *
 * Thread rules: every function here may be called from any thread, except
 * that event callbacks run on the node's discovery thread and must neither
 * block nor call lattice_node_stop().  A topology is immutable; the pointer
 * returned by lattice_node_topology() stays valid until you release it, even
 * while newer versions are published.
 */
#ifndef LATTICE_LATTICE_H
#define LATTICE_LATTICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lattice/status.h"
#include "lattice/topology.h"

#define LATTICE_VERSION "0.1.0"
#define LATTICE_DEFAULT_PORT_RANGE 100
#define LATTICE_DEFAULT_FAILURE_DETECTION_MS 10000
#define LATTICE_DEFAULT_MAX_MESSAGE_BYTES (1u << 20)
#define LATTICE_MAX_FINDERS 16
#define LATTICE_MAX_CACHES 32
#define LATTICE_DEFAULT_REGION_MB 256
#define LATTICE_DEFAULT_OP_TIMEOUT_MS 15000
/* docs/CONFIGURATION.md says why a minute: far above a restart or a short
 * network cut, so neither churns the baseline. */
#define LATTICE_DEFAULT_BASELINE_AUTO_ADJUST_MS 60000
#define LATTICE_DEFAULT_RESTART_WAIT_MS 300000

typedef struct lattice_config {
    const char *cluster;              /* default "lattice" */
    const char *host;                 /* address to bind and advertise; default 127.0.0.1 */
    int port;                         /* peer port; default 47500; 0 = any free port */
    int port_range;                   /* try port..port+range-1 when taken; default 100 */
    const char *finders[LATTICE_MAX_FINDERS]; /* static specs and/or multicast://G:P */
    size_t n_finders;
    bool client;                      /* client mode: in the topology, never owns data */
    int failure_detection_ms;         /* default 10000 */
    const char *secret_file;          /* NULL: no authentication */
    int max_message_bytes;            /* cap on one control frame; default 1 MiB */
    int multicast_attempts;           /* probes per join attempt; default 2 */
    int multicast_wait_ms;            /* wait for answers after a probe; default 300 */
    const char *attrs[LATTICE_MAX_ATTRS]; /* "key=value" strings advertised with the node */
    size_t n_attrs;
    const char *caches[LATTICE_MAX_CACHES]; /* "NAME[:k=v,...]" caches this node declares */
    size_t n_caches;                  /* none anywhere: the grid has a cache "default" */
    int region_mb;                    /* data region bound in MiB; default 256 */
    bool region_evict;                /* a full region evicts (primary-chosen, replicated as removes)
                                         instead of refusing writes with REGION_FULL; default false */
    int op_timeout_ms;                /* an operation's deadline, retries included; default 15000 */
    int baseline_auto_adjust_ms;      /* a baseline server gone this long leaves the baseline;
                                         -1 never; default LATTICE_DEFAULT_BASELINE_AUTO_ADJUST_MS */
    const char *data_dir;             /* persistence: write-ahead log + checkpoints here; NULL = memory only */
    const char *wal_fsync;            /* "always" | "group" (default) | "off" (docs/PERSISTENCE.md) */
    int checkpoint_mb;                /* a checkpoint once the log holds this many MiB; 0 = 256 */
    int restart_wait_ms;              /* whole-grid restart: how long the coordinator waits for every
                                         baseline server to report; -1 no end; default
                                         LATTICE_DEFAULT_RESTART_WAIT_MS (docs/PERSISTENCE.md) */
} lattice_config;

/* Fill defaults (pointers NULL, numbers as documented above). */
void lattice_config_init(lattice_config *c);

typedef struct lattice_node lattice_node;

/* Take a reference to the current topology (NULL before the node joined).
 * Release it with lattice_topology_release(). */
lattice_topology *lattice_node_topology(lattice_node *n);

/* Latest stats heard from node `id` (or this node's own). LATTICE_ERR_NOT_FOUND
 * when none arrived yet. */
lattice_status lattice_node_stats_of(lattice_node *n, const char *id, lattice_node_stats *out);
/* What this node hears of member `id` now, as lattice_inspection_member
 * answers it from outside: state ("alive", "silent" - a heartbeat late,
 * not removed yet - or "leaving"; a static string), ms since its last
 * heartbeat, its latest stats.  LATTICE_ERR_NOT_FOUND when id is not in
 * this node's topology. */
lattice_status lattice_node_member_state(lattice_node *n, const char *id, lattice_member_state *out);

/* Start a node: binds the peer port (moving up within port_range when
 * taken), then joins in the background. */
lattice_status lattice_node_start(const lattice_config *c, lattice_node **out);
/* Wait until the node is in a topology: LATTICE_OK.  When peers have
 * refused it for a second without any admitting it: LATTICE_ERR_CLUSTER
 * (another cluster name), LATTICE_ERR_AUTH (missing or wrong secret) or
 * LATTICE_ERR_PROTO (protocol version) - the node keeps trying in the
 * background; LATTICE_ERR_TIMEOUT otherwise. */
lattice_status lattice_node_wait_joined(lattice_node *n, int timeout_ms);
/* Up to 8 subscribers; LATTICE_ERR_TOO_LARGE beyond. */
lattice_status lattice_node_subscribe(lattice_node *n, lattice_event_fn fn, void *ctx);
/* This node's current id (changes if it had to rejoin); copied into buf. */
void lattice_node_id(lattice_node *n, char *buf, size_t len);
/* The peer port actually bound. */
int lattice_node_port(lattice_node *n);
/* Graceful stop: announces `left`, waits briefly for the coordinator, frees. */
void lattice_node_stop(lattice_node *n);
/* How many partitions only this server serves while another live server
 * holds a MOVING copy of them (a rebalance towards it under way, or done
 * and waiting for the base switch).  A server stopped now would leave them
 * LOST until it returns; a graceful stop first waits, bounded, while this
 * is above 0 (latticed does: docs/OPERATIONS.md, "Stopping a node"). */
lattice_status lattice_node_handover_pending(lattice_node *n, uint32_t *partitions);

/* A view of the grid without joining it (lattice/topology.h, "inspection"):
 * asks the static finders of c (cluster, finders, secret_file are used) and
 * keeps the first member's answer.  The topology version does not move.
 * UNSUPPORTED with a multicast finder; AUTH / CLUSTER / PROTO when only
 * refusals came back; TIMEOUT when no member answered within timeout_ms.
 * Free *out with lattice_inspection_free. */
lattice_status lattice_inspect(const lattice_config *c, int timeout_ms, lattice_inspection **out);
/* ---- baseline and quorum (docs/CONSISTENCY.md, "Baseline and quorum") ----
 *
 * The quorum of this node now: a server without it refuses every cache
 * operation with LATTICE_ERR_NO_QUORUM (a client always has it; the
 * servers it talks to refuse instead).  Cheap: no message. */
void lattice_node_quorum(lattice_node *n, lattice_quorum *out);
/* Change the baseline (the topology's lattice_topology_baseline_*): op is
 * LATTICE_BASELINE_SET, _ADD or _REMOVE with consistent ids ("host:port").
 * Set and add name servers of the topology; remove, baseline members; the
 * result is never empty.  Without quorum the coordinator refuses
 * (NO_QUORUM) unless force - force only for servers gone for good: a
 * forced change on a cut-off side can let both sides serve.  OK once the
 * coordinator announced the change (*version, may be NULL: the baseline
 * version holding it); INVAL with the reason in why (may be NULL);
 * TIMEOUT without an answer. */
lattice_status lattice_node_baseline_change(lattice_node *n, int op, const char *const *cids, size_t count,
                                            bool force, int timeout_ms, uint64_t *version, char *why,
                                            size_t why_len);

/* ---- caches (blocking; asynchronous forms: lattice/ops.h) ----
 *
 * Every call routes to the key's primary and waits for the acknowledgement
 * the cache's sync mode gives (see lattice/ops.h).  cache NULL = "default".
 * Never call these from an ops callback (they wait for the data thread).
 * Values returned through void ** are lt_malloc'd: lt_free them. */
lattice_status lattice_cache_get(lattice_node *n, const char *cache, const void *key, size_t key_len,
                                 void **value, size_t *value_len);
lattice_status lattice_cache_put(lattice_node *n, const char *cache, const void *key, size_t key_len,
                                 const void *value, size_t value_len);
lattice_status lattice_cache_remove(lattice_node *n, const char *cache, const void *key, size_t key_len);
/* LATTICE_ERR_EXISTS when the key held a value (then nothing changed). */
lattice_status lattice_cache_put_if_absent(lattice_node *n, const char *cache, const void *key,
                                           size_t key_len, const void *value, size_t value_len);
/* *old = previous value or NULL when there was none. */
lattice_status lattice_cache_get_and_put(lattice_node *n, const char *cache, const void *key, size_t key_len,
                                         const void *value, size_t value_len, void **old, size_t *old_len);
/* LATTICE_ERR_NOT_FOUND when absent (then nothing changed). */
lattice_status lattice_cache_replace(lattice_node *n, const char *cache, const void *key, size_t key_len,
                                     const void *value, size_t value_len);
lattice_status lattice_cache_increment(lattice_node *n, const char *cache, const void *key, size_t key_len,
                                       int64_t delta, int64_t *result);
/* Entries in the cache over every server (primary copies). */
lattice_status lattice_cache_size(lattice_node *n, const char *cache, uint64_t *size);

typedef struct lattice_kv {
    const void *key;
    size_t key_len;
    void *value;          /* put_all: the value; get_all: filled (lt_malloc'd) or NULL */
    size_t value_len;
    lattice_status status; /* per entry, filled by both */
} lattice_kv;
/* Keys are grouped by primary, one message per node.  Returns LATTICE_OK when
 * every entry succeeded, else the first failing entry's status (see .status;
 * a get_all miss is NOT_FOUND in .status but not a failure of the call). */
lattice_status lattice_cache_put_all(lattice_node *n, const char *cache, lattice_kv *kvs, size_t count);
lattice_status lattice_cache_get_all(lattice_node *n, const char *cache, lattice_kv *kvs, size_t count);

/* spec: "NAME[:k=v,...]" (docs/CACHES.md).  EXISTS when a cache of that name
 * exists with another config (the same config is OK), INVAL on a bad spec. */
lattice_status lattice_cache_create(lattice_node *n, const char *spec);
lattice_status lattice_cache_destroy(lattice_node *n, const char *name);
/* Gives up the cache's LOST partitions (no live copy, none coming back - a
 * kill of every owner): their owners-to-be serve them again, empty, and the
 * cache's assignment can move on (docs/OPERATIONS.md).  *partitions (may be
 * NULL): how many were LOST.  NO_CACHE; NO_QUORUM on a side without it. */
lattice_status lattice_cache_reset_lost(lattice_node *n, const char *name, uint32_t *partitions);

typedef struct lattice_cache_node_info {
    char id[64];                      /* node id */
    uint64_t primary_entries, backup_entries;
    uint32_t primary_partitions, backup_partitions;
    uint64_t reads, writes, hits, misses;
    uint64_t evictions;               /* entries evicted as primary (--region-policy evict), removed on every copy */
    uint64_t expirations;             /* expired entries this node's copy reclaimed (TTL) */
    uint64_t index_bytes;             /* memory of this node's index of the cache (its partitions' tables) */
    uint32_t writes_in_flight;        /* full_sync writes this node applied as primary, not yet acknowledged by every copy */
    uint32_t moving_partitions;       /* held MOVING: writes reach them, reads do not */
    uint64_t moving_entries;
    /* Rebalance on this node: MOVING partitions not loaded yet, partitions
     * the current plan loads, entries and key+value bytes it received, time
     * since it started (ms), whether one is running or scheduled. */
    uint32_t rebalance_left, rebalance_total;
    uint64_t rebalance_entries, rebalance_bytes, rebalance_elapsed_ms;
    bool rebalance_active;
    /* Partitions the current (or last) plan loaded here, and how many of
     * them came as deltas of the copy this node kept (docs/REBALANCE.md §9). */
    uint32_t rebalance_done, rebalance_delta;
    /* This node's rows of the cache in the data region it shares with every
     * other cache: their bytes (row headers included, counted as rows are
     * written and freed), the row pieces, and the pages they fill packed
     * (row bytes and item slots over a page's room; not the pages they sit
     * on, which other caches' rows share). */
    uint64_t row_bytes, rows, pages;
} lattice_cache_node_info;

typedef struct lattice_cache_info {
    char name[65];
    char spec[1024];                  /* every option, "NAME:k=v,..." */
    char mode[16], sync[16];
    uint32_t partitions, backups;
    bool read_from_backup;
    uint64_t size;                    /* sum of primary entries */
    size_t n_nodes;
    lattice_cache_node_info *nodes;   /* one per server that answered */
} lattice_cache_info;

/* Every cache with stats gathered from every server (one request each). */
lattice_status lattice_caches_info(lattice_node *n, lattice_cache_info **out, size_t *count);
void lattice_caches_info_free(lattice_cache_info *c, size_t count);

/* Keys and slots (docs/PARTITIONS.md): a key's slot is Redis Cluster's,
 * CRC16 (XMODEM) of the key or of its {hash tag}, modulo LATTICE_KEY_SLOTS;
 * slot s lives in partition s / (LATTICE_KEY_SLOTS / partitions)
 * (lattice_slot_partition), so a partition is one contiguous slot range,
 * whose owners lattice_cache_partitions() below lists (CLUSTER SLOTS is
 * built so).  Pure: need no node.  An invalid partition count or slot
 * gives partition 0. */
#define LATTICE_KEY_SLOTS 16384u
uint16_t lattice_key_slot(const void *key, size_t len);
uint32_t lattice_slot_partition(uint32_t slot, uint32_t partitions);

/* Who serves each partition of a cache, as this node sees it now. */
typedef struct lattice_partition_owner {
    char node[64];                    /* node id */
    char consistent_id[160];
    int primary;                      /* 1 primary, 0 backup */
    const char *state;                /* "OWNING", "MOVING", ... */
} lattice_partition_owner;

typedef struct lattice_partitions_info {
    char cache[65];
    uint64_t major, minor;            /* topology version seen */
    uint32_t partitions;
    uint32_t *n_owners;               /* per partition: serving owners (OWNING, primary first),
                                         then MOVING ones; no OWNING owner = LOST */
    lattice_partition_owner *owners;  /* partition p: owners[p * max_owners ...] */
    uint32_t max_owners;
    uint32_t copies_wanted;           /* min(backups + 1, live servers); replicated: live servers.
                                         Fewer OWNING owners: under-replicated; none: LOST */
} lattice_partitions_info;

lattice_status lattice_cache_partitions(lattice_node *n, const char *cache, lattice_partitions_info **out);
void lattice_partitions_info_free(lattice_partitions_info *p);

/* One copy of one partition as `lattice verify` compares them: an
 * order-independent content hash over (key, value, expiry, version), the
 * live entry count and the copy's update counter. */
typedef struct lattice_partition_digest {
    char node[64];                    /* node id holding the copy */
    uint32_t partition;
    uint64_t hash, size, counter;
} lattice_partition_digest;

/* The digest of every OWNING copy (serving owners) of every partition of
 * the cache, from every server; *out is freed with
 * lattice_partition_digests_free.  Take it while the cache is idle, as
 * Ignite's idle_verify does: writes in flight show up as conflicts.
 * NO_CACHE, TIMEOUT (a server did not answer), NOMEM. */
lattice_status lattice_cache_digests(lattice_node *n, const char *cache, lattice_partition_digest **out,
                                     size_t *count);
void lattice_partition_digests_free(lattice_partition_digest *d);

/* ---- the same figures by inspection (no join) ----
 *
 * lattice_caches_info, lattice_cache_partitions and lattice_cache_digests
 * read from outside the grid: x (lattice_inspect's answer) names every
 * server, and each is asked directly over its data channel, authenticated
 * with c's secret_file - the asker never joins, so the topology version
 * does not move (what `lattice caches`, `partitions`, `rebalance` and
 * `verify` use).  The results are the same structs, freed the same way;
 * partitions reports x's topology version.  timeout_ms bounds the wait: a
 * server that did not answer in time is left out of the caches' nodes, and
 * makes the digests TIMEOUT; TIMEOUT too when no server gave the cache
 * metadata.  NO_CACHE for an unknown cache (partitions, digests). */
lattice_status lattice_inspect_caches_info(const lattice_config *c, const lattice_inspection *x, int timeout_ms,
                                           lattice_cache_info **out, size_t *count);
lattice_status lattice_inspect_partitions(const lattice_config *c, const lattice_inspection *x, const char *cache,
                                          int timeout_ms, lattice_partitions_info **out);
lattice_status lattice_inspect_digests(const lattice_config *c, const lattice_inspection *x, const char *cache,
                                       int timeout_ms, lattice_partition_digest **out, size_t *count);

#endif
