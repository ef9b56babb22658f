/*
 * Internal to grid/: what its files offer each other - the metadata
 * exchange (control.c), the base switch (base_switch.c), stats and salvage
 * reports (report.c), the API's internal calls (calls.c), whole-grid
 * restart (restart.c) and salvage (salvage.c).  The rebalance executor and
 * verify: rebal_exec.h; restart's own state: restart_int.h.
 *
 * Every function here runs on the data thread of the lattice_ops it is
 * given.  Who owns what: ops/'s state (ops/ops_int.h: the topology, the
 * peers, the metadata, the channel) grid/ reads and leaves to ops/ to
 * write; the grid's own state is struct lattice_grid below (d->grid),
 * written only here, and ops/ reaches it through the hooks attach.c
 * registers (pull_soon, pulls_ended, meta_fresh, ...).
 */
#ifndef LATTICE_GRID_GRID_INT_H
#define LATTICE_GRID_GRID_INT_H

#include "grid/grid.h"
#include "ops/ops_int.h"

#define META_PULL_INTERVAL_MS 1000
#define STATS_PREPARE 1u             /* CTL_STATS flag: the base switch's prepare (control.c) */

/* A request sent to every server (stats, size, base check). */
typedef struct bcast {
    int remaining;
    int kind;                     /* CTL_STATS, CTL_PART_SIZE or CTL_DIGEST */
    opx *op;                      /* caller (NULL: the coordinator's base check) */
    int64_t sum;
    lattice_grid_stats *stats;
    lattice_grid_digests *digests; /* CTL_DIGEST (rebal_exec.c) */
    uint64_t version;             /* base check: the metadata version its prepare named (0: a poll) */
    uint32_t caches;              /* ... and the caches it prepared (bit i: cache i at that version) */
    uint64_t servers;             /* base check: the live server set it started on (servers_hash) */
    struct salvage_rep *salv;     /* base check: the kept copies the servers reported (control.c) */
    size_t n_salv;
} bcast;

/* A prepare of the base switch this node answers once every full_sync write
 * of its cache has drained (base_switch.c). */
#define MAX_PARKED_PREPARES 64       /* prepares one node holds back at once (more: answered AGAIN) */
typedef struct parked_prepare {
    uint64_t serial;              /* the cache (lattice_meta_cache.serial) */
    uint64_t self_pend;           /* the coordinator's own part: its pending entry; 0: answer org */
    origin org;
} parked_prepare;

/* The grid's state on one node (lattice_ops.grid): allocated by
 * lattice_grid_attach, freed by its free hook (attach.c).  Data thread
 * only, like the rest of the ops it rides on.  Each group is written by the
 * file that names it and by nobody outside grid/; ops/ reaches what it
 * needs of it through its hooks (ops_grid_hooks). */
struct lattice_grid {
    /* restart.c, restart_restore.c: a whole-grid restart (servers only) */
    struct grid_restart *restart;
    uint64_t restart_seen_ms;     /* control.c: the coordinator last answered a pull "restarting" */

    /* control.c: the metadata exchange (ops/ asks for a pull and reads
     * pulls_ended through the pull_soon and pulls_ended hooks) */
    bool creates_sent;            /* --cache specs sent to the coordinator (again after a rejoin: meta_fresh) */
    uint64_t last_meta_pull;      /* the last pull (the coordinator: base check); 0: pull at the next tick */
    uint64_t pulls_sent, pulls_ended; /* metadata pulls (CTL_META_GET) numbered from 1: the last sent, the highest ended */
    uint64_t meta_pull_ms;        /* a non-coordinator's pull interval (0: not read yet) */
    char pull_writer[64];         /* a pull's Req.sender: the writer of the metadata held */

    /* base_switch.c */
    bool base_check_running;
    uint64_t switch_waiting_since, switch_logged; /* a base switch waiting on the figures */
    parked_prepare parked[MAX_PARKED_PREPARES];
    size_t n_parked;

    /* rebal_exec.c */
    struct rebal_sup *rb_sups;    /* supplier sessions */
    struct rebal_parked *rb_parked; /* demands from servers this data thread does not know yet */
    size_t n_rb_parked;

    /* salvage.c: copies kept from the previous incarnation */
    struct salvage_cache *salvage;
    size_t n_salvage;
    char salvage_id[OPS_LINEAGE_BYTES]; /* the node ids they were held under (a lineage) */
};

/* ---- salvage.c: copies kept over a rejoin (lattice_meta_lost) */
typedef struct salvage_cache salvage_cache;
/* Takes old's stores (before it is destroyed) unless a set is kept already. */
void salvage_keep(lattice_ops *d, lattice_meta *old);
/* After a metadata version: frees every kept copy no lost record asks for.
 * `quorum` (ops_quorum): only a grid with a quorum of its baseline frees,
 * moves or consumes kept copies (salvage_done, salvage_restore too). */
void salvage_prune(lattice_ops *d, bool quorum);
/* The kept copies of c's lost partitions whose record names this node's old
 * id: partitions, counters, entries (up to max); how many. */
size_t salvage_report(lattice_ops *d, const lattice_meta_cache *c, uint32_t *parts, uint64_t *counters,
                      uint64_t *entries, size_t max);
/* Moves the kept copy of p into c's store with its counter (adding its
 * entries to *entries); false when there is none or it does not fit
 * (nothing changed then). */
bool salvage_restore(lattice_ops *d, lattice_meta_cache *c, uint32_t p, bool quorum, uint64_t *entries);
/* The kept copy of c's partition p as a delta base (docs/REBALANCE.md §9):
 * its store and mark, when it has one and its history holds every change
 * above the mark; NULL otherwise. */
lattice_store *salvage_delta_base(lattice_ops *d, const lattice_meta_cache *c, uint32_t p, uint64_t *mark);
/* A copy recovered from the data directory, kept aside (not served) as the
 * delta bases of the partitions marks names (LT_MARK_NONE: none; marks
 * NULL: none at all) and for the lost records of the current metadata that
 * name one of ids (the incarnations that wrote the directory); the others
 * are cleared.  Takes store, counter and marks. */
void salvage_keep_recovered(lattice_ops *d, const lattice_cache_config *cfg, lattice_store *store,
                            uint64_t *counter, uint64_t *marks, const char *ids);
/* p is loaded (as a delta or in full): its kept copy is not needed any more. */
void salvage_done(lattice_ops *d, const lattice_meta_cache *c, uint32_t p, bool quorum);
void salvage_free(lattice_ops *d);
/* How many partitions' copies are kept. */
size_t salvage_held(const lattice_ops *d);

/* ---- control.c: metadata exchange, internal calls, stats, base check */
void control_meta_apply(lattice_ops *d, const Latdata__Meta *m);
void control_on_topology(lattice_ops *d);
void control_tick(lattice_ops *d, uint64_t now);
void control_serve(lattice_ops *d, const Latdata__Req *q, const origin *o);
void control_run_call(lattice_ops *d, opx *o);
void control_start_size(lattice_ops *d, opx *o);
/* The hooks of the same names (ops/ops_int.h, ops_grid_hooks). */
uint64_t control_pull_soon(lattice_ops *d);
uint64_t control_pulls_ended(const lattice_ops *d);
void control_meta_fresh(lattice_ops *d);
/* One server's CTL_STATS answer (node id, per-cache stats) as a node of sr. */
void control_stats_add(lattice_grid_stats *sr, const char *node, Latdata__NodeCacheStats *const *st, size_t n);
/* LATTICE_GRID_CALL_PARTITIONS: the owners of every partition of `cache` as
 * meta holds them, with `live` servers in the topology of version
 * major.minor.  NO_CACHE; AGAIN while meta holds no metadata yet; NOMEM.
 * Also what inspect.c answers a non-member with. */
lattice_status control_partitions_info(const lattice_meta *meta, const char *cache, uint32_t live,
                                      uint64_t major, uint64_t minor, lattice_partitions_info **out);

/* ---- restart.c: whole-grid restart from the data directories */
typedef struct grid_restart grid_restart;
lattice_status restart_create(lattice_ops *d, int64_t wait_ms);
void restart_free(lattice_ops *d);
/* This node rejoined under a new id: a wait it ran as coordinator ends
 * (its reports named the old incarnation); whoever coordinates now decides. */
void restart_rejoined(lattice_ops *d);
/* Coordinator without metadata: true while it waits for the baseline's
 * reports instead of starting the metadata (the first call decides). */
bool restart_waits(lattice_ops *d);
/* Coordinator, waiting: asks for reports; true once the metadata was
 * started (the caller attaches and publishes it). */
bool restart_tick(lattice_ops *d, uint64_t now);
/* Coordinator, restoring: a digest round; true when restoring ended (the
 * caller publishes the metadata). */
bool restart_restoring_tick(lattice_ops *d, uint64_t now);
/* Operations are refused with LATTICE_ERR_RESTARTING (the grid waits). */
bool restart_refuses(const lattice_ops *d);
void restart_serve_report(lattice_ops *d, const origin *o);
void restart_serve_push(lattice_ops *d, const Latdata__Req *q);
void restart_serve_load(lattice_ops *d, const Latdata__Req *q);
void restart_send_copy(lattice_ops *d, lattice_meta_cache *c, uint32_t p, const char *to);
/* Restoring ended here: once the log is durable, DIR/reloading is emptied
 * (restart_tick_durable, from wal_tick). */
void restart_reloads_end(lattice_ops *d);
void restart_tick_durable(lattice_ops *d);
const char *restart_phase(const lattice_ops *d);

/* A kept copy one server reported in a base check (salvage.c). */
typedef struct salvage_rep {
    char cache[LATTICE_CACHE_NAME_MAX + 1];
    char node[64], inc[OPS_LINEAGE_BYTES]; /* inc: the kept set's lineage */
    uint32_t partition;
    uint64_t counter, entries;
} salvage_rep;

/* control.c, besides its control_ functions above */
/* The new metadata version to every server and to the client nodes. */
void control_push_meta(lattice_ops *d);
/* A control request to the coordinator (op: the caller's, retried when it
 * cannot be sent; NULL: the node's own, e.g. a pull). */
void control_send_ctl(lattice_ops *d, int kind, const char *cache, const char *value, opx *op);

/* base_switch.c */
size_t base_live_servers(const lattice_ops *d);
/* FNV-1a over the live servers' node ids (topology order). */
uint64_t base_servers_hash(const lattice_ops *d);
void base_start_check(lattice_ops *d);
void base_finish_check(lattice_ops *d, bcast *b);
void base_serve_prepare(lattice_ops *d, const char *name, uint64_t version, const char *coordinator,
                        const origin *org, uint64_t self_pend);
void base_serve_parked(lattice_ops *d);

/* report.c */
Latdata__NodeCacheStats *report_node_stats(lattice_ops *d, lattice_meta_cache *c);
void report_bcast_part(lattice_ops *d, bcast *b, const Latdata__Resp *rs);
void report_settle_bcast(lattice_ops *d, pend *p, const Latdata__Resp *rs);
void report_start_stats(lattice_ops *d, opx *op);

/* calls.c */
lattice_status calls_coord_write(lattice_ops *d, int call, const char *arg, int64_t *num);
int calls_of_ctl(int kind);

#endif
