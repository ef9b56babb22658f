/*
 * base_switch: the coordinator's base check and the affinity base switch
 * (data thread).
 *
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
#include "grid_int.h"
#include "ops/ops_int.h"
#include "rebal_exec.h"

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


size_t base_live_servers(const lattice_ops *d)
{
    size_t n = 0;
    for (size_t i = 0; i < d->n_peers; i++) n += d->peers[i]->m.server;
    return n;
}

/* What the servers told this check about cache c, for the switch predicate. */
static bool switch_due(lattice_ops *d, const bcast *b, const lattice_meta_cache *c)
{
    if (c->restoring) return false; /* a whole-grid restart: the copies are made equal first (restart.c) */
    const lattice_grid_stats *sr = b->stats;
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
        .live_servers = base_live_servers(d),
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
        d->grid->switch_waiting_since = 0;
    } else if (!d->grid->switch_waiting_since) {
        d->grid->switch_waiting_since = now;
    } else if (now - d->grid->switch_waiting_since > 10000 && now - d->grid->switch_logged > 10000) {
        d->grid->switch_logged = now;
        char why[512] = "";
        size_t w = 0;
        for (size_t k = 0; k < n && w < sizeof why - 80; k++)
            if (rep[k].rebalance_left || rep[k].view != in.view || rep[k].base_version != in.base_version)
                w += (size_t)snprintf(why + w, sizeof why - w, " [left %u, view %s, base %llu]", rep[k].rebalance_left,
                                      rep[k].view == in.view ? "same" : "other", (unsigned long long)rep[k].base_version);
        LT_LOG(LT_INFO, "data",
               "cache %s: base switch waiting for %llu s: %zu of %zu servers reported%s%s (base %llu)", c->cfg.name,
               (unsigned long long)(now - d->grid->switch_waiting_since) / 1000, n, in.live_servers,
               in.all_answered ? "" : ", not all answered", why, (unsigned long long)in.base_version);
    }
    lt_free(rep);
    return due;
}

static void start_prepare(lattice_ops *d, uint32_t caches);

/* A poll or a prepare round ended (every part answered or gave up). */
void base_finish_check(lattice_ops *d, bcast *b)
{
    d->grid->base_check_running = false;
    if (!lattice_meta_is_coordinator(d->meta)) return; /* no longer ours to write */
    if (!b->version) {
        if (pick_restorers(d, b)) {
            lattice_meta_bump(d->meta);
            control_push_meta(d);
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
        control_push_meta(d);
        if (changed) {
            LT_LOG(LT_INFO, "data", "affinity base switched to the %zu live servers (metadata version %llu)",
                   base_live_servers(d), (unsigned long long)lattice_meta_version(d->meta));
            rebal_on_change(d);
        }
    }
    /* The servers changed while we counted: check again at once.  A cache
     * still off an unchanged live set waits for its new owners to finish
     * loading (late affinity): the next periodic tick (BASE_CHECK_MS) polls
     * again - never at once, or polls would run back to back. */
    if (base_servers_hash(d) != b->servers) base_start_check(d);
}

/* The answer to a prepare: status OK with the cache's final figures, or why
 * not.  self_pend: the coordinator's own part (its pending entry), else a
 * reply to org. */
static void answer_prepare(lattice_ops *d, lattice_meta_cache *c, lattice_status st, const origin *org,
                           uint64_t self_pend)
{
    Latdata__NodeCacheStats **sts = lt_calloc(1, sizeof *sts);
    size_t n = sts && st == LATTICE_OK && (sts[0] = report_node_stats(d, c)) ? 1 : 0;
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
void base_serve_prepare(lattice_ops *d, const char *name, uint64_t version, const char *coordinator,
                          const origin *org, uint64_t self_pend)
{
    lattice_status st = coordinator && *coordinator ? lattice_meta_freeze(d->meta, name, version, coordinator)
                                                    : LATTICE_ERR_AGAIN;
    lattice_meta_cache *c = st == LATTICE_OK ? lattice_meta_cache_of(d->meta, name) : NULL;
    if (c && c->writes_in_flight > 0) {
        if (d->grid->n_parked < MAX_PARKED_PREPARES) {
            parked_prepare *pp = &d->grid->parked[d->grid->n_parked++];
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
void base_serve_parked(lattice_ops *d)
{
    for (size_t i = 0; i < d->grid->n_parked;) {
        lattice_meta_cache *c = lattice_meta_cache_by_serial(d->meta, d->grid->parked[i].serial);
        if (c && c->writes_in_flight > 0) {
            i++;
            continue;
        }
        parked_prepare pp = d->grid->parked[i];
        d->grid->parked[i] = d->grid->parked[--d->grid->n_parked];
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
    lattice_grid_stats *sr = lt_calloc(1, sizeof *sr);
    if (!b || !sr) {
        lt_free(b);
        lt_free(sr);
        return; /* the next tick polls again */
    }
    b->kind = CTL_STATS;
    b->stats = sr;
    b->version = lattice_meta_version(d->meta);
    b->caches = caches;
    b->servers = base_servers_hash(d);
    b->remaining = 1;
    d->grid->base_check_running = true;
    for (size_t i = 0; i < lattice_meta_cache_count(d->meta); i++) {
        if (!(caches >> i & 1u)) continue;
        const char *name = lattice_meta_cache_at(d->meta, i)->cfg.name;
        for (size_t k = 0; k < d->n_peers; k++) {
            peer *p = d->peers[k];
            if (!p->m.server) continue;
            pend *pe = p->m.self || p->dealer ? chan_pend_new(d, report_settle_bcast, p) : NULL;
            Latdata__Req *q = pe && !p->m.self ? chan_req_new_from(CTL_STATS, name, NULL, 0, NULL, 0, d->self_id) : NULL;
            if (!pe || (!p->m.self && !q)) {
                if (pe) lt_free(chan_pend_take(d, pe->id));
                b->sum = -1; /* a server we cannot ask is not prepared: no switch */
                continue;
            }
            pe->b = b;
            b->remaining++;
            if (p->m.self) {
                base_serve_prepare(d, name, b->version, d->self_id, &(origin){0}, pe->id);
                continue;
            }
            q->id = pe->id;
            q->flags = STATS_PREPARE;
            q->version = b->version;
            chan_send(d, p, q);
        }
    }
    report_bcast_part(d, b, (const Latdata__Resp *)&(Latdata__Resp)LATDATA__RESP__INIT);
}

/* FNV-1a over the live servers' node ids (topology order). */
uint64_t base_servers_hash(const lattice_ops *d)
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
void base_start_check(lattice_ops *d)
{
    /* A coordinator without quorum (the minority side of a partition)
     * never moves a base: the side with quorum decides affinity. */
    if (d->grid->base_check_running || ops_no_quorum(d, NULL)) return;
    bool any = false;
    for (size_t i = 0; i < lattice_meta_cache_count(d->meta); i++)
        any |= !lattice_meta_base_is_live(d->meta, lattice_meta_cache_at(d->meta, i));
    if (!any) return;
    d->grid->base_check_running = true;
    report_start_stats(d, NULL);
}
