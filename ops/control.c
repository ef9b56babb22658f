/*
 * control: the metadata exchange, the internal calls of the API, stats and
 * the coordinator's base check - the control traffic of the data channel
 * (data thread).  What the metadata is and decides lives in meta/; this
 * file carries it.
 *
 * The coordinator is the metadata's only writer: it starts it from its own
 * --cache list (or a cache "default"), applies CREATE/DESTROY sent by any
 * node, pushes each new version to every server and answers META_GET,
 * which every node sends on each topology change and every second.
 * Base switch, in three steps, with no timed correctness:
 *   poll     while the live servers differ from some cache's base (on each
 *            change of the server set, and every BASE_CHECK_MS while a cache
 *            waits for its rebalance), the coordinator asks every server for
 *            its stats - nothing is frozen - and feeds them to
 *            lattice_meta_switch_due: does a switch look due?
 *   prepare  only then, for those caches: CTL_STATS with STATS_PREPARE
 *            naming the coordinator's metadata version V.  A server freezes
 *            the cache (lattice_meta_freeze: every operation of it served
 *            there waits until it holds a version newer than V, or its
 *            coordinator changes) and answers once every full_sync write of
 *            the cache it started has been acknowledged by its copies, so its
 *            figures are final and no replication of it is still travelling.
 *   decide   if every live server prepared and the version is still V, the
 *            predicate again on the prepared answers: switch the bases it
 *            allows.  Either way a new version V+1 goes to every server, and
 *            applying it unfreezes.  Nobody serves a cache under the old base
 *            once somebody serves it under the new one: a server is frozen
 *            from its answer until it applies V+1, which carries the new base.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "lattice/alloc.h"
#include "lattice/log.h"
#include "ops_int.h"
#include "rebal_exec.h"

_Static_assert(LATTICE_META_MAX_CACHES == LATTICE_MAX_CACHES, "meta/ and lattice.h disagree on the cache limit");

/* Every server gets the new version on our connection to it; a client node
 * (servers never dial one) on the connection its last pull came on -
 * before, a client learnt a base switch only at its next pull, up to
 * META_PULL_INTERVAL_MS later, routing by the old owners meanwhile. */
static void push_meta(lattice_ops *d)
{
    for (size_t i = 0; i < d->n_peers; i++) {
        peer *p = d->peers[i];
        if (p->dealer) chan_push_meta(d, p);
        else if (!p->m.server && !p->m.self && p->back_len) chan_push_meta_back(d, p->back, p->back_len);
    }
}

/* How often a non-coordinator pulls the metadata: META_PULL_INTERVAL_MS, or
 * LATTICE_META_PULL_MS from the environment (tests: a client that must
 * learn a change by the coordinator's push, not by its pull). */
static uint64_t pull_interval_ms(lattice_ops *d)
{
    if (!d->meta_pull_ms) {
        const char *e = getenv("LATTICE_META_PULL_MS");
        long long v = e ? atoll(e) : 0;
        d->meta_pull_ms = v > 0 ? (uint64_t)v : META_PULL_INTERVAL_MS;
    }
    return d->meta_pull_ms;
}

void control_meta_apply(lattice_ops *d, const Latdata__Meta *m)
{
    bool changed = lattice_meta_apply(d->meta, m);
    wal_attach(d); /* before anything uses a new cache's store: it may be swapped for the recovered one */
    if (changed) {
        rebal_on_change(d);
        salvage_prune(d, ops_quorum(d));
    }
    evict_attach(d);
}

static void start_base_check(lattice_ops *d);
static void serve_parked(lattice_ops *d);
static void control_settle_ctl(lattice_ops *d, pend *p, const Latdata__Resp *rs);
#define BASE_CHECK_MS 300

void control_on_topology(lattice_ops *d)
{
    if (lattice_meta_is_coordinator(d->meta)) {
        /* A whole-grid restart waits for the baseline's reports first
         * (restart.c); control_tick starts the metadata then. */
        if (!lattice_meta_valid(d->meta) && !restart_waits(d))
            lattice_meta_start(d->meta, d->local_cfgs, d->n_local_cfgs);
        if (!lattice_meta_valid(d->meta)) return;
        wal_attach(d);
        evict_attach(d);
        push_meta(d);
        start_base_check(d);
    } else {
        d->last_meta_pull = 0; /* pull now */
        wal_attach(d);         /* what waited for d->self (wal.c) */
        evict_attach(d);
    }
    rebal_on_change(d);
}

static void send_ctl(lattice_ops *d, int kind, const char *cache, const char *value, opx *op)
{
    peer *coord = chan_peer_by_id(d, d->coordinator);
    if (!coord || !coord->dealer) {
        if (op) retry_later(d, op, LATTICE_ERR_TIMEOUT);
        return;
    }
    pend *p = chan_pend_new(d, control_settle_ctl, coord);
    /* A pull names its sender and the version it holds: the coordinator
     * pushes to a client on the connection it came on, and passes a version
     * above its own (a takeover that lagged: lattice_meta_seen_version). */
    bool pull = kind == CTL_META_GET;
    Latdata__Req *q = p ? chan_req_new_from(kind, cache, NULL, 0, value, value ? strlen(value) : 0,
                                            pull ? d->self_id : NULL)
                        : NULL;
    if (!q) {
        if (op) retry_later(d, op, LATTICE_ERR_TIMEOUT);
        return;
    }
    p->ctl = kind;
    p->op = op;
    if (pull) p->pull = ++d->pulls_sent;
    if (pull && lattice_meta_valid(d->meta)) {
        q->meta_version = lattice_meta_version(d->meta);
        /* Borrowed until the flush packs it: d's buffer, not the metadata's
         * (a rejoin replaces the metadata in between). */
        snprintf(d->pull_writer, sizeof d->pull_writer, "%s", lattice_meta_writer(d->meta));
        q->sender = d->pull_writer;
    }
    q->id = p->id;
    chan_send(d, coord, q);
}

/* The metadata changed on the coordinator outside a topology change (a
 * whole-grid restart started it, or ended restoring). */
static void restart_publish(lattice_ops *d, bool started)
{
    if (!started) lattice_meta_bump(d->meta);
    wal_attach(d);
    evict_attach(d);
    push_meta(d);
    rebal_on_change(d);
}

void control_tick(lattice_ops *d, uint64_t now)
{
    if (d->n_parked) serve_parked(d);
    if (d->seen_topology && restart_tick(d, now)) restart_publish(d, true);
    if (d->seen_topology && restart_restoring_tick(d, now)) restart_publish(d, false);
    if (d->seen_topology && lattice_meta_is_coordinator(d->meta) && lattice_meta_valid(d->meta) && now - d->last_meta_pull >= BASE_CHECK_MS) {
        /* The coordinator pulls nothing: last_meta_pull paces its base
         * checks instead (a rebalance ends long after the topology change). */
        d->last_meta_pull = now;
        start_base_check(d);
    }
    if (!d->seen_topology || lattice_meta_is_coordinator(d->meta)) return;
    if (now - d->last_meta_pull >= pull_interval_ms(d)) {
        d->last_meta_pull = now;
        send_ctl(d, CTL_META_GET, NULL, NULL, NULL);
    }
    if (lattice_meta_valid(d->meta) && !d->creates_sent && !d->client) {
        d->creates_sent = true;
        for (size_t i = 0; i < d->n_local_cfgs; i++) {
            lattice_meta_cache *c = lattice_meta_cache_of(d->meta, d->local_cfgs[i].name);
            if (c && lattice_cache_config_equal(&c->cfg, &d->local_cfgs[i])) continue;
            if (c) {
                LT_LOG(LT_ERROR, "data", "--cache %s differs from the grid's cache of that name; the grid's is used",
                       d->local_cfgs[i].name);
                continue;
            }
            char spec[1024];
            lattice_cache_config_format(&d->local_cfgs[i], LATTICE_CACHE_FORMAT_ALL, spec, sizeof spec);
            send_ctl(d, CTL_CREATE, NULL, spec, NULL);
        }
    }
}

static lattice_status coord_write(lattice_ops *d, int call, const char *arg, int64_t *num)
{
    if (ops_no_quorum(d, NULL)) return LATTICE_ERR_NO_QUORUM; /* the registry is the quorum side's */
    uint32_t lost = 0;
    lattice_status st = call == LATTICE_OPS_CALL_CREATE    ? lattice_meta_add(d->meta, arg)
                        : call == LATTICE_OPS_CALL_DESTROY ? lattice_meta_remove(d->meta, arg)
                                                           : lattice_meta_reset_lost(d->meta, arg, &lost);
    if (num) *num = lost;
    if (st == LATTICE_OK) {
        wal_attach(d); /* a new cache's store is logged from its first write */
        push_meta(d);
        if (lost) rebal_on_change(d); /* this node may be an owner-to-be too */
    }
    return st;
}

static int ctl_of_call(int call)
{
    return call == LATTICE_OPS_CALL_CREATE ? CTL_CREATE : call == LATTICE_OPS_CALL_DESTROY ? CTL_DESTROY : CTL_RESET_LOST;
}

static int call_of_ctl(int kind)
{
    return kind == CTL_CREATE ? LATTICE_OPS_CALL_CREATE : kind == CTL_DESTROY ? LATTICE_OPS_CALL_DESTROY
                                                                                : LATTICE_OPS_CALL_RESET_LOST;
}

/* ------------------------------------------------------------------- stats */

#define MAX_SALVAGE_REPORT 16384u

/* One block (the reply box frees it with one lt_free): the stats, then the
 * kept copies it reports (salvage.c), their incarnation id, and the cache's
 * name - a copy: the box may be flushed after the cache is gone (a rejoin
 * frees every cache between a stats answer and the flush). */
static Latdata__NodeCacheStats *node_stats(lattice_ops *d, lattice_meta_cache *c)
{
    size_t ns = 0;
    uint32_t *parts = NULL;
    uint64_t *counters = NULL, *entries = NULL;
    if (d->n_salvage && c->n_lost) {
        size_t max = c->n_lost < MAX_SALVAGE_REPORT ? c->n_lost : MAX_SALVAGE_REPORT;
        parts = lt_malloc(max * sizeof *parts);
        counters = lt_malloc(max * sizeof *counters);
        entries = lt_malloc(max * sizeof *entries);
        if (parts && counters && entries) ns = salvage_report(d, c, parts, counters, entries, max);
    }
    size_t name_len = strlen(c->cfg.name) + 1;
    Latdata__NodeCacheStats *s = lt_calloc(
        1, sizeof *s + ns * (sizeof(Latdata__Salvage *) + sizeof(Latdata__Salvage)) + sizeof d->salvage_id + name_len);
    if (!s) {
        lt_free(parts);
        lt_free(counters);
        lt_free(entries);
        return NULL;
    }
    latdata__node_cache_stats__init(s);
    Latdata__Salvage **ptr = (Latdata__Salvage **)(s + 1);
    Latdata__Salvage *sv = (Latdata__Salvage *)(ptr + ns);
    char *inc = (char *)(sv + ns);
    s->name = inc + sizeof d->salvage_id;
    memcpy(s->name, c->cfg.name, name_len);
    if (ns) {
        memcpy(inc, d->salvage_id, sizeof d->salvage_id);
        for (size_t i = 0; i < ns; i++) {
            latdata__salvage__init(&sv[i]);
            sv[i].partition = parts[i];
            sv[i].incarnation = inc;
            sv[i].counter = counters[i];
            sv[i].entries = entries[i];
            ptr[i] = &sv[i];
        }
        s->salvage = ptr;
        s->n_salvage = ns;
    }
    lt_free(parts);
    lt_free(counters);
    lt_free(entries);
    for (uint32_t p = 0; c->store && p < c->cfg.partitions; p++) {
        lattice_meta_member *own[LATTICE_CACHE_MAX_BACKUPS + 1];
        size_t n = lattice_meta_serving_owners(c, p, own, LATTICE_CACHE_MAX_BACKUPS + 1);
        lattice_meta_member *mov[LATTICE_CACHE_MAX_BACKUPS + 1];
        size_t nm = lattice_meta_moving_owners(c, p, mov, LATTICE_CACHE_MAX_BACKUPS + 1);
        for (size_t i = 0; i < nm; i++) {
            if (!mov[i]->self) continue;
            s->moving_partitions++;
            s->moving_entries += lattice_store_count(c->store, p);
        }
        for (size_t i = 0; i < n; i++) {
            if (!own[i]->self) continue;
            uint64_t cnt = lattice_store_count(c->store, p);
            if (i == 0) {
                s->primary_partitions++;
                s->primary_entries += cnt;
            } else {
                s->backup_partitions++;
                s->backup_entries += cnt;
            }
        }
    }
    uint64_t fr, fh, fm;
    fast_stats(c, &fr, &fh, &fm); /* reads answered on other threads (fast.c) */
    s->reads = c->reads + fr;
    s->writes = c->writes;
    s->hits = c->hits + fh;
    s->misses = c->misses + fm;
    s->evictions = evict_count(d, c);
    if (c->store) {
        lattice_store_metrics sm;
        lattice_store_metrics_get(c->store, &sm);
        s->expirations = sm.expirations;
        s->index_bytes = sm.index_bytes;
        lattice_store_usage u;
        lattice_store_usage_get(c->store, &u);
        s->row_bytes = u.row_bytes;
        s->rows = u.rows;
        s->pages = u.pages;
    }
    s->writes_in_flight = c->writes_in_flight;
    rebal_figures f;
    rebal_figures_of(d, c, &f);
    s->rebalance_left = f.left;
    s->rebalance_view_major = f.view;
    s->rebalance_base_version = c->base_version;
    s->rebalance_total = f.total;
    s->rebalance_entries = f.entries;
    s->rebalance_bytes = f.bytes;
    s->rebalance_elapsed_ms = f.elapsed_ms;
    s->rebalance_active = f.active;
    s->rebalance_done = f.done;
    s->rebalance_delta = f.delta;
    return s;
}

/* A kept copy one server reported in a base check (salvage.c). */
typedef struct salvage_rep {
    char cache[LATTICE_CACHE_NAME_MAX + 1];
    char node[64], inc[64];
    uint32_t partition;
    uint64_t counter, entries;
} salvage_rep;

static void salvage_add(bcast *b, const char *node, Latdata__NodeCacheStats *const *st, size_t n)
{
    for (size_t i = 0; i < n; i++)
        for (size_t k = 0; k < st[i]->n_salvage; k++) {
            const Latdata__Salvage *sv = st[i]->salvage[k];
            salvage_rep *x = lt_realloc(b->salv, (b->n_salv + 1) * sizeof *x);
            if (!x) return;
            b->salv = x;
            salvage_rep *r = &x[b->n_salv++];
            snprintf(r->cache, sizeof r->cache, "%s", st[i]->name ? st[i]->name : "");
            snprintf(r->node, sizeof r->node, "%s", node ? node : "");
            snprintf(r->inc, sizeof r->inc, "%s", sv->incarnation ? sv->incarnation : "");
            r->partition = sv->partition;
            r->counter = sv->counter;
            r->entries = sv->entries;
        }
}

/* The restorer of each lost partition of the caches, from a poll's reports:
 * once every owner its record names reported a kept copy, the live server
 * holding the one with the highest counter (the copies differ only by
 * writes no client saw acknowledged: a full_sync write is acknowledged once
 * every copy has it), an owner-to-be or not.  A restorer that left is
 * replaced the same way.
 * True when a record changed (the caller publishes a version). */
static bool pick_restorers(lattice_ops *d, const bcast *b)
{
    bool changed = false;
    for (size_t i = 0; i < lattice_meta_cache_count(d->meta); i++) {
        lattice_meta_cache *c = lattice_meta_cache_at(d->meta, i);
        size_t picked = 0;
        for (size_t k = 0; k < c->n_lost; k++) {
            const lattice_meta_lost *l = &c->lost[k];
            peer *cur = l->restorer[0] ? chan_peer_by_id(d, l->restorer) : NULL;
            if (cur && cur->m.server) continue;
            const salvage_rep *best = NULL;
            bool best_owner = false;
            size_t reported = 0;
            lattice_meta_member *mov[LATTICE_CACHE_MAX_BACKUPS + 1];
            size_t nm = lattice_meta_moving_owners(c, l->partition, mov, LATTICE_CACHE_MAX_BACKUPS + 1);
            for (size_t j = 0; j < b->n_salv; j++) {
                const salvage_rep *r = &b->salv[j];
                if (r->partition != l->partition || strcmp(r->cache, c->cfg.name) || !lattice_meta_lost_names(l, r->inc))
                    continue;
                reported++;
                /* Any live holder may restore (it supplies the owners-to-be);
                 * on equal counters an owner-to-be, which keeps its copy. */
                bool owner = false;
                for (size_t k = 0; k < nm && !owner; k++) owner = strcmp(mov[k]->id, r->node) == 0;
                if (!best || r->counter > best->counter || (r->counter == best->counter && owner && !best_owner)) {
                    best = r;
                    best_owner = owner;
                }
            }
            const char *who = best && reported >= lattice_meta_lost_owner_count(l) ? best->node : NULL;
            if (lattice_meta_set_restorer(c, l->partition, who)) {
                changed = true;
                picked += who != NULL;
            }
        }
        if (picked)
            LT_LOG(LT_INFO, "data", "cache %s: %zu lost partitions found every former owner's copy; restoring them",
                   c->cfg.name, picked);
    }
    return changed;
}

void control_stats_add(lattice_ops_stats *sr, const char *node, Latdata__NodeCacheStats *const *st, size_t n)
{
    lattice_ops_stats_node *x = lt_realloc(sr->nodes, (sr->n_nodes + 1) * sizeof *x);
    if (!x) return;
    sr->nodes = x;
    lattice_ops_stats_node *sn = &x[sr->n_nodes];
    memset(sn, 0, sizeof *sn);
    snprintf(sn->id, sizeof sn->id, "%s", node ? node : "");
    sn->caches = lt_calloc(n ? n : 1, sizeof *sn->caches);
    sn->names = lt_calloc(n ? n : 1, sizeof *sn->names);
    sn->view_major = lt_calloc(n ? n : 1, sizeof *sn->view_major);
    sn->base_version = lt_calloc(n ? n : 1, sizeof *sn->base_version);
    if (!sn->caches || !sn->names || !sn->view_major || !sn->base_version) {
        lt_free(sn->caches);
        lt_free(sn->names);
        lt_free(sn->view_major);
        lt_free(sn->base_version);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        lattice_cache_node_info *ci = &sn->caches[i];
        snprintf(ci->id, sizeof ci->id, "%s", sn->id);
        snprintf(sn->names[i], sizeof sn->names[i], "%s", st[i]->name);
        ci->primary_entries = st[i]->primary_entries;
        ci->backup_entries = st[i]->backup_entries;
        ci->primary_partitions = st[i]->primary_partitions;
        ci->backup_partitions = st[i]->backup_partitions;
        ci->reads = st[i]->reads;
        ci->writes = st[i]->writes;
        ci->hits = st[i]->hits;
        ci->misses = st[i]->misses;
        ci->evictions = st[i]->evictions;
        ci->expirations = st[i]->expirations;
        ci->index_bytes = st[i]->index_bytes;
        ci->row_bytes = st[i]->row_bytes;
        ci->rows = st[i]->rows;
        ci->pages = st[i]->pages;
        ci->writes_in_flight = st[i]->writes_in_flight;
        ci->moving_partitions = st[i]->moving_partitions;
        ci->moving_entries = st[i]->moving_entries;
        ci->rebalance_left = st[i]->rebalance_left;
        ci->rebalance_total = st[i]->rebalance_total;
        ci->rebalance_entries = st[i]->rebalance_entries;
        ci->rebalance_bytes = st[i]->rebalance_bytes;
        ci->rebalance_elapsed_ms = st[i]->rebalance_elapsed_ms;
        ci->rebalance_active = st[i]->rebalance_active;
        ci->rebalance_done = st[i]->rebalance_done;
        ci->rebalance_delta = st[i]->rebalance_delta;
        sn->view_major[i] = st[i]->rebalance_view_major;
        sn->base_version[i] = st[i]->rebalance_base_version;
    }
    sn->n = n;
    sr->n_nodes++;
}

static size_t live_server_count(const lattice_ops *d)
{
    size_t n = 0;
    for (size_t i = 0; i < d->n_peers; i++) n += d->peers[i]->m.server;
    return n;
}

/* What the servers told this check about cache c, for the switch predicate. */
static bool switch_due(lattice_ops *d, const bcast *b, const lattice_meta_cache *c)
{
    if (c->restoring) return false; /* a whole-grid restart: the copies are made equal first (restart.c) */
    const lattice_ops_stats *sr = b->stats;
    size_t cap = 0;
    for (size_t k = 0; sr && k < sr->n_nodes; k++) cap += sr->nodes[k].n;
    lattice_meta_switch_report *rep = lt_calloc(cap ? cap : 1, sizeof *rep);
    if (!rep) return false;
    size_t n = 0;
    for (size_t k = 0; sr && k < sr->n_nodes; k++)
        for (size_t j = 0; j < sr->nodes[k].n; j++) {
            const lattice_cache_node_info *ci = &sr->nodes[k].caches[j];
            if (strcmp(sr->nodes[k].names[j], c->cfg.name) != 0) continue;
            rep[n++] = (lattice_meta_switch_report){ci->primary_entries + ci->backup_entries, ci->rebalance_left,
                                                    sr->nodes[k].view_major[j], sr->nodes[k].base_version[j]};
        }
    uint64_t kept = 0;
    for (size_t j = 0; j < b->n_salv; j++)
        if (strcmp(b->salv[j].cache, c->cfg.name) == 0) kept += b->salv[j].entries + 1;
    lattice_meta_switch_input in = {
        .base_is_live = lattice_meta_base_is_live(d->meta, c),
        .all_answered = sr && b->sum == 0,
        .rebalance_mode = c->cfg.rebalance_mode,
        .view = lattice_meta_server_view(d->meta),
        .base_version = c->base_version,
        .live_servers = live_server_count(d),
        .kept_entries = kept,
        .reports = rep,
        .n_reports = n,
        .lost_partitions = c->n_lost, /* reset-lost clears them */
    };
    bool due = lattice_meta_switch_due(&in);
    /* A switch that waits for long says on what, every 10 s (the figures of
     * a live server that is not ready, or who did not answer). */
    uint64_t now = lt_mono_ms();
    if (due || in.base_is_live) {
        d->switch_waiting_since = 0;
    } else if (!d->switch_waiting_since) {
        d->switch_waiting_since = now;
    } else if (now - d->switch_waiting_since > 10000 && now - d->switch_logged > 10000) {
        d->switch_logged = now;
        char why[512] = "";
        size_t w = 0;
        for (size_t k = 0; k < n && w < sizeof why - 80; k++)
            if (rep[k].rebalance_left || rep[k].view != in.view || rep[k].base_version != in.base_version)
                w += (size_t)snprintf(why + w, sizeof why - w, " [left %u, view %s, base %llu]", rep[k].rebalance_left,
                                      rep[k].view == in.view ? "same" : "other", (unsigned long long)rep[k].base_version);
        LT_LOG(LT_INFO, "data",
               "cache %s: base switch waiting for %llu s: %zu of %zu servers reported%s%s (base %llu)", c->cfg.name,
               (unsigned long long)(now - d->switch_waiting_since) / 1000, n, in.live_servers,
               in.all_answered ? "" : ", not all answered", why, (unsigned long long)in.base_version);
    }
    lt_free(rep);
    return due;
}

static void start_prepare(lattice_ops *d, uint32_t caches);
static uint64_t servers_hash(const lattice_ops *d);

/* A poll or a prepare round ended (every part answered or gave up). */
static void finish_base_check(lattice_ops *d, bcast *b)
{
    d->base_check_running = false;
    if (!lattice_meta_is_coordinator(d->meta)) return; /* no longer ours to write */
    if (!b->version) {
        if (pick_restorers(d, b)) {
            lattice_meta_bump(d->meta);
            push_meta(d);
            rebal_on_change(d);
        }
        uint32_t due = 0;
        for (size_t i = 0; i < lattice_meta_cache_count(d->meta); i++)
            if (switch_due(d, b, lattice_meta_cache_at(d->meta, i))) due |= 1u << i;
        if (due) {
            start_prepare(d, due);
            return;
        }
    } else {
        /* A version written meanwhile (a cache created or destroyed)
         * released the freezes early: no switch on this round's figures. */
        bool still = lattice_meta_version(d->meta) == b->version, changed = false;
        for (size_t i = 0; i < lattice_meta_cache_count(d->meta); i++) {
            lattice_meta_cache *c = lattice_meta_cache_at(d->meta, i);
            if (still && (b->caches >> i & 1u) && switch_due(d, b, c) && lattice_meta_switch_base(d->meta, c) == LATTICE_OK)
                changed = true;
        }
        lattice_meta_bump(d->meta); /* always: its arrival unfreezes every prepared server */
        push_meta(d);
        if (changed) {
            LT_LOG(LT_INFO, "data", "affinity base switched to the %zu live servers (metadata version %llu)",
                   live_server_count(d), (unsigned long long)lattice_meta_version(d->meta));
            rebal_on_change(d);
        }
    }
    /* The servers changed while we counted: check again at once.  A cache
     * still off an unchanged live set waits for its new owners to finish
     * loading (late affinity): the next periodic tick (BASE_CHECK_MS) polls
     * again - never at once, or polls would run back to back. */
    if (servers_hash(d) != b->servers) start_base_check(d);
}

static void stats_free(lattice_ops_stats *sr)
{
    if (!sr) return;
    for (size_t i = 0; i < sr->n_nodes; i++) {
        lt_free(sr->nodes[i].caches);
        lt_free(sr->nodes[i].names);
        lt_free(sr->nodes[i].view_major);
        lt_free(sr->nodes[i].base_version);
    }
    lt_free(sr->nodes);
    lt_free(sr->cfgs);
    lt_free(sr);
}

void lattice_ops_stats_free(lattice_ops_stats *sr) { stats_free(sr); }

/* One part of a broadcast answered (rs) or gave up (rs NULL). */
static void bcast_part(lattice_ops *d, bcast *b, const Latdata__Resp *rs)
{
    if (rs && b->kind == CTL_PART_SIZE) b->sum += rs->num;
    if (rs && b->kind == CTL_STATS && b->stats) control_stats_add(b->stats, rs->node, rs->stats, rs->n_stats);
    if (rs && b->kind == CTL_STATS && !b->op) salvage_add(b, rs->node, rs->stats, rs->n_stats);
    if ((!rs || rs->status != LATTICE_OK) && !b->op) b->sum = -1; /* base check: a server did not answer or prepare: do not switch */
    if (--b->remaining > 0) return;
    if (!b->op) {
        finish_base_check(d, b);
        stats_free(b->stats);
        lt_free(b->salv);
    } else {
        lattice_op_result r = {0};
        r.num = b->sum;
        if (b->kind == CTL_STATS) {
            r.value = b->stats;
            r.value_len = sizeof *b->stats;
        }
        chan_complete_local(d, b->op, &r); /* the caller owns b->stats now */
    }
    lt_free(b);
}

static void settle_bcast(lattice_ops *d, pend *p, const Latdata__Resp *rs) { bcast_part(d, p->b, rs); }

/* SIZE: the sum of primary entries over every server (CTL_PART_SIZE), or
 * with LATTICE_OP_LOCAL this node's alone. */
void control_start_size(lattice_ops *d, opx *o)
{
    bcast *b = lt_calloc(1, sizeof *b);
    if (!b) {
        lattice_op_result r = {.status = LATTICE_ERR_NOMEM};
        chan_complete_local(d, o, &r);
        return;
    }
    b->kind = CTL_PART_SIZE;
    b->op = o;
    b->remaining = 1;
    bool local = o->op.flags & LATTICE_OP_LOCAL; /* Redis Cluster's DBSIZE: this node's share */
    for (size_t i = 0; i < d->n_peers; i++) {
        peer *p = d->peers[i];
        if (!p->m.server || (local && !p->m.self)) continue;
        if (p->m.self) {
            lattice_meta_cache *c = lattice_meta_cache_of(d->meta, o->cache);
            Latdata__Resp rs = LATDATA__RESP__INIT;
            for (uint32_t k = 0; c && c->store && k < c->cfg.partitions; k++) {
                lattice_meta_member *own[1];
                if (lattice_meta_serving_owners(c, k, own, 1) == 1 && own[0]->self) rs.num += (int64_t)lattice_store_count(c->store, k);
            }
            b->remaining++;
            bcast_part(d, b, &rs);
            continue;
        }
        if (!p->dealer) continue;
        pend *pe = chan_pend_new(d, settle_bcast, p);
        Latdata__Req *q = pe ? chan_req_new(CTL_PART_SIZE, o->cache, NULL, 0, NULL, 0) : NULL;
        if (!q) { /* out of memory: the pending entry must not settle a part never counted */
            if (pe) lt_free(chan_pend_take(d, pe->id));
            continue;
        }
        pe->b = b;
        q->id = pe->id;
        b->remaining++;
        chan_send(d, p, q);
    }
    bcast_part(d, b, NULL);
}

/* Sends CTL_STATS to every server; self answers at once.  op NULL: the
 * coordinator's base check polls (nothing is frozen). */
static void start_stats(lattice_ops *d, opx *op)
{
    bcast *b = lt_calloc(1, sizeof *b);
    lattice_ops_stats *sr = lt_calloc(1, sizeof *sr);
    if (!b || !sr) {
        lt_free(b);
        lt_free(sr);
        if (op) {
            lattice_op_result r = {.status = LATTICE_ERR_NOMEM};
            chan_complete_local(d, op, &r);
        }
        return;
    }
    b->kind = CTL_STATS;
    b->op = op;
    b->stats = sr;
    b->servers = servers_hash(d);
    size_t nc = lattice_meta_cache_count(d->meta);
    sr->cfgs = lt_calloc(nc ? nc : 1, sizeof *sr->cfgs);
    for (size_t i = 0; sr->cfgs && i < nc; i++) sr->cfgs[sr->n_caches++] = lattice_meta_cache_at(d->meta, i)->cfg;
    b->remaining = 1;
    for (size_t i = 0; i < d->n_peers; i++) {
        peer *p = d->peers[i];
        if (!p->m.server) continue;
        if (p->m.self) {
            Latdata__NodeCacheStats *st[LATTICE_MAX_CACHES];
            size_t n = 0;
            for (size_t k = 0; k < lattice_meta_cache_count(d->meta); k++)
                if ((st[n] = node_stats(d, lattice_meta_cache_at(d->meta, k)))) n++;
            control_stats_add(sr, d->self_id, st, n);
            if (!op) salvage_add(b, d->self_id, st, n);
            for (size_t k = 0; k < n; k++) lt_free(st[k]);
            continue;
        }
        if (!p->dealer) continue;
        pend *pe = chan_pend_new(d, settle_bcast, p);
        Latdata__Req *q = pe ? chan_req_new(CTL_STATS, NULL, NULL, 0, NULL, 0) : NULL;
        if (!q) { /* out of memory: this server is not counted (a base check does not switch) */
            if (pe) lt_free(chan_pend_take(d, pe->id));
            if (!op) b->sum = -1;
            continue;
        }
        pe->b = b;
        q->id = pe->id;
        b->remaining++;
        chan_send(d, p, q);
    }
    bcast_part(d, b, (const Latdata__Resp *)&(Latdata__Resp)LATDATA__RESP__INIT);
}

/* The answer to a prepare: status OK with the cache's final figures, or why
 * not.  self_pend: the coordinator's own part (its pending entry), else a
 * reply to org. */
static void answer_prepare(lattice_ops *d, lattice_meta_cache *c, lattice_status st, const origin *org,
                           uint64_t self_pend)
{
    Latdata__NodeCacheStats **sts = lt_calloc(1, sizeof *sts);
    size_t n = sts && st == LATTICE_OK && (sts[0] = node_stats(d, c)) ? 1 : 0;
    if (st == LATTICE_OK && !n) st = LATTICE_ERR_NOMEM;
    if (!self_pend) {
        lattice_op_result r = {.status = st};
        chan_reply(d, org, &r, sts, n, false); /* the box frees sts */
        return;
    }
    pend *p = chan_pend_take(d, self_pend);
    if (p) { /* NULL: the round gave up on it already */
        Latdata__Resp rs = LATDATA__RESP__INIT;
        rs.status = st;
        rs.node = d->self_id;
        rs.stats = sts;
        rs.n_stats = n;
        p->settle(d, p, &rs);
        lt_free(p);
    }
    for (size_t i = 0; i < n; i++) lt_free(sts[i]);
    lt_free(sts);
}

/* A prepare from `coordinator` for cache `name` at metadata version
 * `version`: freeze, then answer once the cache's full_sync writes drained
 * (parked until then; control_tick looks again). */
static void serve_prepare(lattice_ops *d, const char *name, uint64_t version, const char *coordinator,
                          const origin *org, uint64_t self_pend)
{
    lattice_status st = coordinator && *coordinator ? lattice_meta_freeze(d->meta, name, version, coordinator)
                                                    : LATTICE_ERR_AGAIN;
    lattice_meta_cache *c = st == LATTICE_OK ? lattice_meta_cache_of(d->meta, name) : NULL;
    if (c && c->writes_in_flight > 0) {
        if (d->n_parked < MAX_PARKED_PREPARES) {
            parked_prepare *pp = &d->parked[d->n_parked++];
            pp->serial = c->serial;
            pp->self_pend = self_pend;
            pp->org = *org;
            return;
        }
        st = LATTICE_ERR_AGAIN; /* still frozen: the coordinator's next version releases it */
    }
    answer_prepare(d, c, st, org, self_pend);
}

/* Parked prepares whose cache drained (or went away) are answered. */
static void serve_parked(lattice_ops *d)
{
    for (size_t i = 0; i < d->n_parked;) {
        lattice_meta_cache *c = lattice_meta_cache_by_serial(d->meta, d->parked[i].serial);
        if (c && c->writes_in_flight > 0) {
            i++;
            continue;
        }
        parked_prepare pp = d->parked[i];
        d->parked[i] = d->parked[--d->n_parked];
        /* Thawed meanwhile (a newer version, another coordinator): that
         * round is over, and this answer must not count as prepared. */
        lattice_status st = !c ? LATTICE_ERR_NO_CACHE : lattice_meta_frozen(c) ? LATTICE_OK : LATTICE_ERR_AGAIN;
        answer_prepare(d, c, st, &pp.org, pp.self_pend);
    }
}

/* The prepare round for the caches a poll found due (bit i: cache i). */
static void start_prepare(lattice_ops *d, uint32_t caches)
{
    bcast *b = lt_calloc(1, sizeof *b);
    lattice_ops_stats *sr = lt_calloc(1, sizeof *sr);
    if (!b || !sr) {
        lt_free(b);
        lt_free(sr);
        return; /* the next tick polls again */
    }
    b->kind = CTL_STATS;
    b->stats = sr;
    b->version = lattice_meta_version(d->meta);
    b->caches = caches;
    b->servers = servers_hash(d);
    b->remaining = 1;
    d->base_check_running = true;
    for (size_t i = 0; i < lattice_meta_cache_count(d->meta); i++) {
        if (!(caches >> i & 1u)) continue;
        const char *name = lattice_meta_cache_at(d->meta, i)->cfg.name;
        for (size_t k = 0; k < d->n_peers; k++) {
            peer *p = d->peers[k];
            if (!p->m.server) continue;
            pend *pe = p->m.self || p->dealer ? chan_pend_new(d, settle_bcast, p) : NULL;
            Latdata__Req *q = pe && !p->m.self ? chan_req_new_from(CTL_STATS, name, NULL, 0, NULL, 0, d->self_id) : NULL;
            if (!pe || (!p->m.self && !q)) {
                if (pe) lt_free(chan_pend_take(d, pe->id));
                b->sum = -1; /* a server we cannot ask is not prepared: no switch */
                continue;
            }
            pe->b = b;
            b->remaining++;
            if (p->m.self) {
                serve_prepare(d, name, b->version, d->self_id, &(origin){0}, pe->id);
                continue;
            }
            q->id = pe->id;
            q->flags = STATS_PREPARE;
            q->version = b->version;
            chan_send(d, p, q);
        }
    }
    bcast_part(d, b, (const Latdata__Resp *)&(Latdata__Resp)LATDATA__RESP__INIT);
}

/* FNV-1a over the live servers' node ids (topology order). */
static uint64_t servers_hash(const lattice_ops *d)
{
    uint64_t h = LT_FNV1A_BASIS;
    for (size_t i = 0; i < d->n_peers; i++)
        if (d->peers[i]->m.server) h = lt_fnv1a_add(h, d->peers[i]->m.id, strlen(d->peers[i]->m.id) + 1);
    return h;
}

/* A poll while some cache's base is not the live server set - on each
 * topology change, every BASE_CHECK_MS (control_tick) and at once after a
 * round during which the servers changed.  Whether a poll is needed depends
 * on the bases and the live set only, never on which set an earlier check
 * saw: a switch decided on figures polled from servers A can make a later
 * set B live, and the set can then go back to A (a server that joined
 * during the poll leaves) - a base check remembering "A was checked" would
 * never look again. */
static void start_base_check(lattice_ops *d)
{
    /* A coordinator without quorum (the minority side of a partition)
     * never moves a base: the side with quorum decides affinity. */
    if (d->base_check_running || ops_no_quorum(d, NULL)) return;
    bool any = false;
    for (size_t i = 0; i < lattice_meta_cache_count(d->meta); i++)
        any |= !lattice_meta_base_is_live(d->meta, lattice_meta_cache_at(d->meta, i));
    if (!any) return;
    d->base_check_running = true;
    start_stats(d, NULL);
}

/* ------------------------------------------------------------ serve / call */

void control_serve(lattice_ops *d, const Latdata__Req *q, const origin *o)
{
    lattice_op_result r = {0};
    switch (q->kind) {
    case CTL_DEMAND:
        rebal_on_demand(d, q);
        return;
    case CTL_SUPPLY:
        rebal_on_supply(d, q);
        return;
    case CTL_DIGEST:
        rebal_serve_digest(d, q, o);
        return;
    case CTL_RESTART_REPORT:
        restart_serve_report(d, o);
        return;
    case CTL_RESTART_PUSH:
        restart_serve_push(d, q);
        return;
    case CTL_RESTART_LOAD:
        restart_serve_load(d, q);
        return;
    case CTL_STATS: {
        if (q->flags & STATS_PREPARE) {
            serve_prepare(d, q->cache, q->version, q->origin, o, 0);
            return;
        }
        size_t nc = lattice_meta_cache_count(d->meta);
        Latdata__NodeCacheStats **st = lt_calloc(nc ? nc : 1, sizeof *st);
        size_t n = 0;
        for (size_t k = 0; st && k < nc; k++)
            if ((st[n] = node_stats(d, lattice_meta_cache_at(d->meta, k)))) n++;
        chan_reply(d, o, &r, st, n, false); /* the box frees st */
        return;
    }
    case CTL_PART_SIZE: {
        lattice_meta_cache *c = lattice_meta_cache_of(d->meta, q->cache);
        for (uint32_t k = 0; c && c->store && k < c->cfg.partitions; k++) {
            lattice_meta_member *own[1];
            if (lattice_meta_serving_owners(c, k, own, 1) == 1 && own[0]->self) r.num += (int64_t)lattice_store_count(c->store, k);
        }
        chan_reply(d, o, &r, NULL, 0, false);
        return;
    }
    case CTL_META_GET:
        if (lattice_meta_seen_version(d->meta, q->meta_version, q->sender)) push_meta(d); /* the same metadata, above theirs */
        if (q->origin && *q->origin && lattice_meta_is_coordinator(d->meta)) {
            peer *asker = chan_peer_by_id(d, q->origin);
            if (asker && !asker->m.server && !asker->m.self && o->ident_len <= sizeof asker->back) {
                memcpy(asker->back, o->ident, o->ident_len);
                asker->back_len = o->ident_len;
            }
        }
        r.status = lattice_meta_valid(d->meta) ? LATTICE_OK : restart_refuses(d) ? LATTICE_ERR_RESTARTING : LATTICE_ERR_AGAIN;
        chan_reply(d, o, &r, NULL, 0, lattice_meta_valid(d->meta));
        return;
    case CTL_CREATE:
    case CTL_DESTROY:
    case CTL_RESET_LOST: {
        if (!lattice_meta_is_coordinator(d->meta) || !lattice_meta_valid(d->meta)) {
            r.status = LATTICE_ERR_AGAIN;
        } else {
            char spec[1100];
            size_t n = q->value.len < sizeof spec - 1 ? q->value.len : sizeof spec - 1;
            memcpy(spec, q->value.data, n);
            spec[n] = 0;
            r.status = coord_write(d, call_of_ctl((int)q->kind), spec, &r.num);
        }
        chan_reply(d, o, &r, NULL, 0, true);
        return;
    }
    default:
        r.status = LATTICE_ERR_INVAL;
        chan_reply(d, o, &r, NULL, 0, false);
    }
}

static void control_settle_ctl(lattice_ops *d, pend *p, const Latdata__Resp *rs)
{
    /* The answer's metadata, if any, is applied by now (loop.c). */
    if (p->pull > d->pulls_ended) d->pulls_ended = p->pull;
    if (p->ctl == CTL_META_GET && rs) d->restart_seen_ms = rs->status == LATTICE_ERR_RESTARTING ? lt_mono_ms() : 0;
    if (!p->op) return;
    if (!rs || rs->status == LATTICE_ERR_AGAIN) {
        retry_later(d, p->op, LATTICE_ERR_TIMEOUT);
        return;
    }
    lattice_op_result r = {0};
    r.status = (lattice_status)rs->status;
    r.num = rs->num;
    chan_complete_local(d, p->op, &r);
}

lattice_status control_partitions_info(const lattice_meta *meta, const char *cache, uint32_t live,
                                      uint64_t major, uint64_t minor, lattice_partitions_info **out)
{
    *out = NULL;
    lattice_meta_cache *c = lattice_meta_cache_of(meta, cache);
    if (!c) return lattice_meta_valid(meta) ? LATTICE_ERR_NO_CACHE : LATTICE_ERR_AGAIN;
    lattice_partitions_info *pi = lt_calloc(1, sizeof *pi);
    uint32_t copies = c->aff ? lattice_affinity_copies(c->aff) : 0;
    if (c->ideal && lattice_affinity_copies(c->ideal) > copies) copies = lattice_affinity_copies(c->ideal);
    if (copies > LATTICE_CACHE_MAX_BACKUPS + 1) copies = LATTICE_CACHE_MAX_BACKUPS + 1;
    uint32_t maxo = 2 * copies; /* serving owners, then MOVING ones */
    if (pi) {
        pi->n_owners = lt_calloc(c->cfg.partitions, sizeof *pi->n_owners);
        pi->owners = lt_calloc((size_t)c->cfg.partitions * (maxo ? maxo : 1), sizeof *pi->owners);
    }
    if (!pi || !pi->n_owners || !pi->owners) {
        if (pi) {
            lt_free(pi->n_owners);
            lt_free(pi->owners);
            lt_free(pi);
        }
        return LATTICE_ERR_NOMEM;
    }
    snprintf(pi->cache, sizeof pi->cache, "%s", c->cfg.name);
    pi->major = major;
    pi->minor = minor;
    pi->partitions = c->cfg.partitions;
    pi->max_owners = maxo;
    uint32_t wanted = c->cfg.mode == LATTICE_CACHE_REPLICATED ? live : c->cfg.backups + 1;
    pi->copies_wanted = wanted < live ? wanted : live;
    for (uint32_t p = 0; p < c->cfg.partitions; p++) {
        lattice_meta_member *own[2 * (LATTICE_CACHE_MAX_BACKUPS + 1)];
        size_t ns = lattice_meta_serving_owners(c, p, own, copies);
        size_t n = ns + lattice_meta_moving_owners(c, p, own + ns, copies);
        pi->n_owners[p] = (uint32_t)n;
        for (size_t i = 0; i < n; i++) {
            lattice_partition_owner *po = &pi->owners[(size_t)p * maxo + i];
            snprintf(po->node, sizeof po->node, "%s", own[i]->id);
            snprintf(po->consistent_id, sizeof po->consistent_id, "%s", own[i]->cid);
            po->primary = i == 0 && ns > 0;
            po->state = lattice_partition_state_name(i < ns ? LATTICE_PART_OWNING : LATTICE_PART_MOVING);
        }
    }
    *out = pi;
    return LATTICE_OK;
}

static void partitions_call(lattice_ops *d, opx *o)
{
    lattice_op_result r = {0};
    lattice_partitions_info *pi = NULL;
    r.status = control_partitions_info(d->meta, o->data, (uint32_t)live_server_count(d), d->major, d->minor, &pi);
    if (r.status == LATTICE_ERR_AGAIN) {
        retry_later(d, o, LATTICE_ERR_TIMEOUT);
        return;
    }
    r.value = pi;
    r.value_len = pi ? sizeof *pi : 0;
    chan_complete_local(d, o, &r);
}

/* The partitions whose only serving copy is this node's while another live
 * server holds a MOVING copy: a rebalance towards it is under way or done
 * and waits for the base switch.  Leaving now would leave them LOST though
 * a copy is (almost) complete elsewhere; a graceful stop waits for the
 * switch instead (node/main.c).  A partition nobody else loads is not
 * counted: waiting would not save it. */
static int64_t handover_pending(lattice_ops *d)
{
    int64_t n = 0;
    for (size_t i = 0; lattice_meta_valid(d->meta) && i < lattice_meta_cache_count(d->meta); i++) {
        const lattice_meta_cache *c = lattice_meta_cache_at(d->meta, i);
        for (uint32_t p = 0; c->store && p < c->cfg.partitions; p++) {
            lattice_meta_member *own[LATTICE_CACHE_MAX_BACKUPS + 1], *mov[LATTICE_CACHE_MAX_BACKUPS + 1];
            if (lattice_meta_serving_owners(c, p, own, LATTICE_CACHE_MAX_BACKUPS + 1) != 1 || !own[0]->self) continue;
            size_t nm = lattice_meta_moving_owners(c, p, mov, LATTICE_CACHE_MAX_BACKUPS + 1);
            bool elsewhere = false;
            for (size_t k = 0; k < nm && !elsewhere; k++) elsewhere = !mov[k]->self && mov[k]->server;
            n += elsewhere;
        }
    }
    return n;
}

void control_run_call(lattice_ops *d, opx *o)
{
    lattice_op_result r = {0};
    if (o->call == LATTICE_OPS_CALL_HANDOVER) {
        r.num = handover_pending(d);
        chan_complete_local(d, o, &r);
        return;
    }
    if (!lattice_meta_valid(d->meta)) {
        retry_later(d, o, LATTICE_ERR_TIMEOUT);
        return;
    }
    switch (o->call) {
    case LATTICE_OPS_CALL_STATS: start_stats(d, o); return;
    case LATTICE_OPS_CALL_PARTITIONS: partitions_call(d, o); return;
    case LATTICE_OPS_CALL_DIGESTS: rebal_start_digests(d, o); return;
    case LATTICE_OPS_CALL_CREATE:
    case LATTICE_OPS_CALL_DESTROY:
    case LATTICE_OPS_CALL_RESET_LOST:
        if (lattice_meta_is_coordinator(d->meta)) {
            r.status = coord_write(d, o->call, o->data, &r.num);
            chan_complete_local(d, o, &r);
        } else {
            send_ctl(d, ctl_of_call(o->call), NULL, o->data, o);
        }
        return;
    default: r.status = LATTICE_ERR_INVAL; chan_complete_local(d, o, &r);
    }
}

lattice_status lattice_ops_call(lattice_ops *d, lattice_ops_call_kind call, const char *arg, lattice_op_fn fn,
                                void *farg)
{
    size_t al = arg ? strlen(arg) : 0;
    opx *o = lt_calloc(1, sizeof *o + al + 1);
    if (!o) return LATTICE_ERR_NOMEM;
    if (al) memcpy(o->data, arg, al);
    o->call = (int)call;
    o->fn = fn;
    o->arg = farg;
    o->deadline_ms = lt_mono_ms() + (uint64_t)d->op_timeout_ms;
    lattice_status st = chan_enqueue(d, o);
    if (st != LATTICE_OK) opx_free(o);
    return st;
}
