/*
 * meta/meta.h: the cluster metadata as one node holds it (prefix
 * lattice_meta_): the cache registry, owner liveness, serving and moving
 * owners, and the base switch.  No sockets and no clock: the operation path
 * (ops/) carries the metadata messages and passes the time it read.
 *
 * Metadata = every cache's config plus its affinity base (the servers at its
 * last assignment switch, each "CONSISTENT_ID NODE_ID"), versioned.  The
 * coordinator (the oldest server) is its only writer: it starts it
 * (lattice_meta_start), creates and destroys caches, switches bases, and
 * every other node applies each newer version it receives
 * (lattice_meta_apply).  docs/CACHES.md, "Cluster metadata".
 *
 *   serving owners of p  affinity(base)[p] filtered to base members alive
 *                        in the current topology - alive meaning the same
 *                        node id - primary first; none: LOST.
 *   moving owners of p   affinity(live servers)[p] that do not serve p,
 *                        while the live servers differ from the base.
 *   base switch          lattice_meta_switch_due, a pure function of what
 *                        every server reported in one base check; the
 *                        freeze that holds a cache's operations while the
 *                        coordinator decides (lattice_meta_freeze).
 *
 * Threads: a lattice_meta and everything it returns belong to one thread
 * (the node's data thread); the stores it creates need that thread
 * registered with RCU.  Members are the caller's: lattice_meta keeps the
 * pointers it was given until the next lattice_meta_set_members, which must
 * come before a member it holds is freed.
 */
#ifndef LATTICE_META_META_H
#define LATTICE_META_META_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cache.pb-c.h"
#include "lattice/status.h"
#include "partition/partition.h"
#include "storage/storage.h"

/* Caches a grid holds at most (lattice.h's LATTICE_MAX_CACHES; ops/ checks
 * they agree). */
#define LATTICE_META_MAX_CACHES 32

/* A node of the current topology as the metadata sees it.  The caller (the
 * data channel) embeds it in its own per-peer state and keeps it alive. */
typedef struct lattice_meta_member {
    char id[64];       /* node id: new at every start (liveness) */
    char cid[160];     /* consistent id "host:port": stable (affinity) */
    bool self, server;
} lattice_meta_member;

/* One cache as this node knows it.  meta writes the config, base, affinity
 * and owner fields; the operation path owns the store's contents, the
 * counters and the stats below them (one thread, so no lock). */
/* A partition whose every serving owner left in one topology change (a
 * network cut, a pause): no live copy serves it, and the copies of those
 * owners - kept by their processes when they rejoin under new ids
 * (grid/salvage.c) - are the only ones that hold its acknowledged writes.
 * The coordinator records it (lattice_meta_set_members) and picks the
 * restorer once every one of those owners reported its kept copy; the
 * record ends with the next base switch. */
typedef struct lattice_meta_lost {
    uint32_t partition;
    char restorer[64];                 /* node id of the live server restoring it; "" none yet */
    char *owners;                      /* the owners' node ids before the loss, space-separated */
    char *msg;                         /* "P RESTORER|- OWNERS" as the metadata carries it */
} lattice_meta_lost;

typedef struct lattice_meta_cache {
    lattice_cache_config cfg;
    char **base;                       /* affinity base: "CONSISTENT_ID NODE_ID" (as received) */
    size_t n_base;
    uint64_t base_version;
    lattice_affinity *aff;             /* affinity over the base */
    lattice_meta_member **live;        /* per affinity node: its live member, NULL = gone */
    lattice_affinity *ideal;           /* affinity over the live servers when they differ from the base */
    lattice_meta_member **ideal_live;  /* per ideal node: its member */
    uint64_t serial;                   /* unique among the caches of this process, ever */
    uint64_t frozen_at;                /* a prepare froze it at this metadata version (0: not frozen) */
    uint64_t lost_reset;               /* lattice_meta_reset_lost: at this base version (0: never) */
    bool restoring;                    /* whole-grid restart: copies being made equal, nothing served */
    uint8_t *restore_keep;             /* while restoring: the decision (grid/restart.c's encoding; meta only carries it) */
    size_t n_restore_keep;
    lattice_meta_lost *lost;           /* by partition, ascending */
    size_t n_lost;
    char **lost_msg;                   /* lost[i].msg, for the message */
    /* The operation path's: */
    lattice_store *store;              /* servers only */
    uint64_t *counter;                 /* per-partition update counter */
    uint64_t reads, writes, hits, misses;
    uint32_t writes_in_flight;         /* full_sync writes waiting for their copies (sync_wait.c) */
    void *rb;                          /* the rebalance executor's state (freed through cache_gone) */
    void *clean;                       /* the commit watermarks (ops/clean.c; freed through cache_gone) */
    struct fast_cache *fast;           /* what readers on other threads test (ops/fast.c; freed through cache_gone) */
    void *txlocks;                     /* prepared transactions' locks (ops/txlock.c; freed through cache_gone) */
    /* Called before any change of a partition's rows by whoever changes
     * them (types/: a write, a replicated write; ops/: removes, clears,
     * evictions, restores call ops/fast.c's fast_mark directly): ops/fast.c
     * sets it with `fast`; NULL: nobody reads on other threads. */
    void (*before_change)(struct lattice_meta_cache *c, uint32_t partition);
} lattice_meta_cache;

typedef struct lattice_meta lattice_meta;

typedef struct lattice_meta_config {
    bool client;                       /* clients hold no store */
    lattice_region *region;            /* where servers' stores live */
    /* Called before a cache is freed (destroyed, or replaced by another
     * config of the same name), so the caller drops what it hangs on it. */
    void (*cache_gone)(void *arg, lattice_meta_cache *c);
    void *arg;
} lattice_meta_config;

lattice_status lattice_meta_create(const lattice_meta_config *c, lattice_meta **out);
void lattice_meta_destroy(lattice_meta *m);

/* A new topology: its members (pointers kept until the next call), this
 * node among them, the coordinator's node id.  Recomputes every cache's
 * live and moving owners.  With this node the coordinator (and the
 * metadata valid), every partition that had serving owners before and has
 * none now gets a lost record naming them; true when one was added (the
 * caller publishes a new version: lattice_meta_bump).  A coordinator records
 * with or without quorum: a grid that lost its quorum with the owners (one
 * server killed, another stalled past the failure detection) regains it
 * when the stalled one rejoins under a new id, and that node's kept copies
 * are wanted only if a record names its old id.  A minority's records go
 * when its side dissolves into the quorum's at a heal (its metadata with
 * them). */
bool lattice_meta_set_members(lattice_meta *m, lattice_meta_member *const *members, size_t n,
                              const char *coordinator);
bool lattice_meta_is_coordinator(const lattice_meta *m);
/* The topology major of this node's view, before each
 * lattice_meta_set_members (it only grows).  The coordinator writes its
 * versions from (major << 32) + 1 up: a new coordinator's first version
 * passes every version its predecessor wrote, and no two coordinators
 * write the same version (meta.c, next_version). */
void lattice_meta_set_epoch(lattice_meta *m, uint64_t topology_major);
/* Coordinator: a member reported holding `version`, written by `writer`
 * (its metadata pull names both).  Above ours, or ours in number but
 * another coordinator's - a takeover whose view lagged its predecessor's -
 * ours jumps past it; true then (the caller publishes).  Else nothing. */
bool lattice_meta_seen_version(lattice_meta *m, uint64_t version, const char *writer);
/* The node id of the coordinator that wrote the version held ("": unknown). */
const char *lattice_meta_writer(const lattice_meta *m);
const lattice_meta_member *lattice_meta_self(const lattice_meta *m);
/* The live server set as a number: equal sets, equal numbers (clients do
 * not count).  Rebalance figures carry it so the switch compares like with like. */
uint64_t lattice_meta_server_view(const lattice_meta *m);

/* ---- the registry */
bool lattice_meta_valid(const lattice_meta *m);
uint64_t lattice_meta_version(const lattice_meta *m);
size_t lattice_meta_cache_count(const lattice_meta *m);
lattice_meta_cache *lattice_meta_cache_at(const lattice_meta *m, size_t i);
/* NULL or "" = "default". */
lattice_meta_cache *lattice_meta_cache_of(const lattice_meta *m, const char *name);
/* The cache whose serial this is, or NULL once it is gone (destroyed or
 * replaced): lets a late completion find its cache without a pointer. */
lattice_meta_cache *lattice_meta_cache_by_serial(const lattice_meta *m, uint64_t serial);
/* The packed form of the registry for pushes and replies (NULL: none yet). */
const Latdata__Meta *lattice_meta_message(const lattice_meta *m);

/* A version from the coordinator: applied when newer than ours and we are
 * not its writer.  True when applied (caches may have come, gone, moved). */
bool lattice_meta_apply(lattice_meta *m, const Latdata__Meta *msg);

/* ---- the coordinator's writes (each bumps the version) */
/* First metadata: cfgs (or a cache "default" when n is 0) on the live servers. */
void lattice_meta_start(lattice_meta *m, const lattice_cache_config *cfgs, size_t n);
/* A whole-grid restart's base for one cache: the servers of the base the
 * grid had (as the data directories kept it), each "CONSISTENT_ID NODE_ID"
 * with the node id of its server now ("-": it is not back), and the kept
 * base version. */
typedef struct lattice_meta_restart_base {
    const char *name;
    char *const *entries;
    size_t n;
    uint64_t version;
    const uint8_t *keep;  /* the decision, carried while the cache is restoring */
    size_t n_keep;
} lattice_meta_restart_base;
/* lattice_meta_start, except that a cache named in bases gets that base
 * back (a server not back is not alive in it: its partitions are served by
 * the other owners and moved by rebalance as after a departure), base
 * version + 1, and starts restoring. */
void lattice_meta_start_restart(lattice_meta *m, const lattice_cache_config *cfgs, size_t n,
                                const lattice_meta_restart_base *bases, size_t n_bases);
/* Coordinator: ends c's restoring (then lattice_meta_bump publishes it). */
void lattice_meta_end_restoring(lattice_meta_cache *c);
/* Same name and config: OK; same name, other config: EXISTS; bad spec: INVAL. */
lattice_status lattice_meta_add(lattice_meta *m, const char *spec);
lattice_status lattice_meta_remove(lattice_meta *m, const char *name); /* NO_CACHE */
/* A base check ended (switched or not): a new version, whose arrival
 * releases every cache a prepare froze. */
void lattice_meta_bump(lattice_meta *m);

/* ---- owners (hot path: no allocation) */
/* Serving owners of p, primary first: fills out[0..max), returns how many. */
size_t lattice_meta_serving_owners(const lattice_meta_cache *c, uint32_t p, lattice_meta_member **out,
                                   size_t max);
/* MOVING owners of p: writes reach them, reads do not.  None while the
 * cache is restoring. */
size_t lattice_meta_moving_owners(const lattice_meta_cache *c, uint32_t p, lattice_meta_member **out,
                                  size_t max);

/* ---- lost partitions (lattice_meta_lost) */
const lattice_meta_lost *lattice_meta_lost_of(const lattice_meta_cache *c, uint32_t p);
/* True when one of ids (node ids separated by spaces: a lineage, as a node
 * that restarted from its data directory reports) is one of the owners the
 * record names. */
bool lattice_meta_lost_names(const lattice_meta_lost *l, const char *ids);
size_t lattice_meta_lost_owner_count(const lattice_meta_lost *l);
/* Coordinator: p is restored by node id (NULL: none).  True when it changed
 * (then lattice_meta_bump publishes it). */
bool lattice_meta_set_restorer(lattice_meta_cache *c, uint32_t p, const char *id);
/* Coordinator, on an operator's word (`lattice cache reset-lost`): every
 * partition of cache `name` without a serving owner is given up - its
 * owners-to-be take it as empty (c->lost_reset = the base version), its
 * records end.  *n_lost: how many there were (none: nothing changes).
 * NO_CACHE. */
lattice_status lattice_meta_reset_lost(lattice_meta *m, const char *name, uint32_t *n_lost);

/* ---- the base switch */
/* True when c's base is the live server set (nothing to switch). */
bool lattice_meta_base_is_live(lattice_meta *m, const lattice_meta_cache *c);
/* Switches c's base to the live servers (base version + 1). */
lattice_status lattice_meta_switch_base(lattice_meta *m, lattice_meta_cache *c);
/* The freeze of the base switch's prepare round, by metadata version, never
 * by time.  A prepare from `coordinator` naming `version` freezes cache
 * `name`: lattice_meta_frozen is true - every operation of it served here
 * (reads and writes at the primary, reads at a backup) waits - until this
 * node holds a metadata version newer than `version` (applied, or written
 * when it is the coordinator), or until the coordinator changes (the new
 * one runs its own check).  Replicated writes are not held: a primary's
 * in-flight writes must still complete.
 *   OK         frozen (or frozen already)
 *   AGAIN      not frozen: the prepare is stale (we hold a newer version)
 *              or its sender is not our coordinator
 *   NO_CACHE   we do not know the cache yet (the switch must wait for us) */
lattice_status lattice_meta_freeze(lattice_meta *m, const char *name, uint64_t version, const char *coordinator);
bool lattice_meta_frozen(const lattice_meta_cache *c);

/* One server's answer to a base check, for one cache. */
typedef struct lattice_meta_switch_report {
    uint64_t entries;          /* primary + backup entries of the cache there */
    uint32_t rebalance_left;   /* partitions it holds MOVING and has not loaded */
    uint64_t view;             /* the server view those figures were computed on */
    uint64_t base_version;     /* ... and the base version */
} lattice_meta_switch_report;

typedef struct lattice_meta_switch_input {
    bool base_is_live;         /* the base is the live set already */
    bool all_answered;         /* every live server answered the check */
    lattice_rebalance_mode rebalance_mode;
    uint64_t view;             /* the coordinator's server view now */
    uint64_t base_version;     /* the cache's base version now */
    size_t live_servers;
    uint64_t kept_entries;     /* entries of kept copies reported for lost partitions */
    const lattice_meta_switch_report *reports;
    size_t n_reports;
    size_t lost_partitions;    /* partitions recorded LOST (every owner gone at once), not given up */
} lattice_meta_switch_input;

/* The base switch predicate (pure).  Switch when every live server answered,
 * the base differs from the live set, and either the cache holds no entry
 * anywhere and lost none (nothing to move: the live servers' counts are of
 * serving owners, so when every owner of a partition died they count
 * nothing of what it held) or rebalancing is on and every live server
 * reports its MOVING partitions loaded on this same server view and base
 * (late affinity).  A server that did not answer cancels the switch. */
bool lattice_meta_switch_due(const lattice_meta_switch_input *in);

#endif
