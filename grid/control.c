/*
 * control: the metadata exchange - the control traffic of the data channel
 * (data thread).  What the metadata is and decides lives in meta/; this
 * file carries it, and dispatches the control kinds a peer sends to the
 * file that serves them: the base switch (base_switch.c), stats and kept
 * copies (report.c), the API's internal calls (calls.c), rebalance
 * (rebal_exec.c) and whole-grid restart (restart.c).
 *
 * The coordinator is the metadata's only writer: it starts it from its own
 * --cache list (or a cache "default"), applies CREATE/DESTROY sent by any
 * node, pushes each new version to every server and answers META_GET,
 * which every node sends on each topology change and every second.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "lattice/alloc.h"
#include "lattice/log.h"
#include "grid_int.h"
#include "ops/ops_int.h"
#include "rebal_exec.h"

_Static_assert(LATTICE_META_MAX_CACHES == LATTICE_MAX_CACHES, "meta/ and lattice.h disagree on the cache limit");

/* Every server gets the new version on our connection to it; a client node
 * (servers never dial one) on the connection its last pull came on -
 * before, a client learnt a base switch only at its next pull, up to
 * META_PULL_INTERVAL_MS later, routing by the old owners meanwhile. */
void control_push_meta(lattice_ops *d)
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
    if (!d->grid->meta_pull_ms) {
        const char *e = getenv("LATTICE_META_PULL_MS");
        long long v = e ? atoll(e) : 0;
        d->grid->meta_pull_ms = v > 0 ? (uint64_t)v : META_PULL_INTERVAL_MS;
    }
    return d->grid->meta_pull_ms;
}

uint64_t control_pull_soon(lattice_ops *d)
{
    d->grid->last_meta_pull = 0;
    return d->grid->pulls_sent + 1;
}

uint64_t control_pulls_ended(const lattice_ops *d) { return d->grid->pulls_ended; }

/* The metadata started over empty (a rejoin): send the --cache specs
 * again once it is valid, and pull it now. */
void control_meta_fresh(lattice_ops *d)
{
    d->grid->creates_sent = false;
    d->grid->last_meta_pull = 0;
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
        control_push_meta(d);
        base_start_check(d);
    } else {
        d->grid->last_meta_pull = 0; /* pull now */
        wal_attach(d);         /* what waited for d->self (wal.c) */
        evict_attach(d);
    }
    rebal_on_change(d);
}

void control_send_ctl(lattice_ops *d, int kind, const char *cache, const char *value, opx *op)
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
    if (pull) p->pull = ++d->grid->pulls_sent;
    if (pull && lattice_meta_valid(d->meta)) {
        q->meta_version = lattice_meta_version(d->meta);
        /* Borrowed until the flush packs it: the grid's buffer, not the metadata's
         * (a rejoin replaces the metadata in between). */
        snprintf(d->grid->pull_writer, sizeof d->grid->pull_writer, "%s", lattice_meta_writer(d->meta));
        q->sender = d->grid->pull_writer;
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
    control_push_meta(d);
    rebal_on_change(d);
}

void control_tick(lattice_ops *d, uint64_t now)
{
    if (d->grid->n_parked) base_serve_parked(d);
    if (d->seen_topology && restart_tick(d, now)) restart_publish(d, true);
    if (d->seen_topology && restart_restoring_tick(d, now)) restart_publish(d, false);
    if (d->seen_topology && lattice_meta_is_coordinator(d->meta) && lattice_meta_valid(d->meta) &&
        now - d->grid->last_meta_pull >= BASE_CHECK_MS) {
        /* The coordinator pulls nothing: last_meta_pull paces its base
         * checks instead (a rebalance ends long after the topology change). */
        d->grid->last_meta_pull = now;
        base_start_check(d);
    }
    if (!d->seen_topology || lattice_meta_is_coordinator(d->meta)) return;
    if (now - d->grid->last_meta_pull >= pull_interval_ms(d)) {
        d->grid->last_meta_pull = now;
        control_send_ctl(d, CTL_META_GET, NULL, NULL, NULL);
    }
    if (lattice_meta_valid(d->meta) && !d->grid->creates_sent && !d->client) {
        d->grid->creates_sent = true;
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
            control_send_ctl(d, CTL_CREATE, NULL, spec, NULL);
        }
    }
}


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
            base_serve_prepare(d, q->cache, q->version, q->origin, o, 0);
            return;
        }
        size_t nc = lattice_meta_cache_count(d->meta);
        Latdata__NodeCacheStats **st = lt_calloc(nc ? nc : 1, sizeof *st);
        size_t n = 0;
        for (size_t k = 0; st && k < nc; k++)
            if ((st[n] = report_node_stats(d, lattice_meta_cache_at(d->meta, k)))) n++;
        chan_reply(d, o, &r, st, n, false); /* the box frees st */
        return;
    }
    case CTL_PART_SIZE: {
        lattice_meta_cache *c = lattice_meta_cache_of(d->meta, q->cache);
        for (uint32_t k = 0; c && c->store && k < c->cfg.partitions; k++) {
            lattice_meta_member *own[1];
            if (lattice_meta_serving_owners(c, k, own, 1) == 1 && own[0]->self) r.num += (int64_t)lattice_store_user_count(c->store, k);
        }
        chan_reply(d, o, &r, NULL, 0, false);
        return;
    }
    case CTL_META_GET:
        if (lattice_meta_seen_version(d->meta, q->meta_version, q->sender)) control_push_meta(d); /* the same metadata, above theirs */
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
            r.status = calls_coord_write(d, calls_of_ctl((int)q->kind), spec, &r.num);
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
    /* The answer's metadata, if any, is applied by now (ops/loop.c, the on_meta hook). */
    if (p->pull > d->grid->pulls_ended) d->grid->pulls_ended = p->pull;
    if (p->ctl == CTL_META_GET && rs) d->grid->restart_seen_ms = rs->status == LATTICE_ERR_RESTARTING ? lt_mono_ms() : 0;
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
