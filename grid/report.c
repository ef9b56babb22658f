/*
 * report: what a server tells about its caches, and the broadcasts that
 * gather it (data thread) - CTL_STATS (per cache: entries, partitions by
 * role, reads and writes, rebalance figures, and the kept copies of lost
 * partitions, salvage.c) for `lattice top`/`caches` and the coordinator's
 * base check, and CTL_PART_SIZE for SIZE (DBSIZE).
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

#define MAX_SALVAGE_REPORT 16384u

/* One block (the reply box frees it with one lt_free): the stats, then the
 * kept copies it reports (salvage.c), their incarnation id, and the cache's
 * name - a copy: the box may be flushed after the cache is gone (a rejoin
 * frees every cache between a stats answer and the flush). */
Latdata__NodeCacheStats *report_node_stats(lattice_ops *d, lattice_meta_cache *c)
{
    size_t ns = 0;
    uint32_t *parts = NULL;
    uint64_t *counters = NULL, *entries = NULL;
    if (d->grid->n_salvage && c->n_lost) {
        size_t max = c->n_lost < MAX_SALVAGE_REPORT ? c->n_lost : MAX_SALVAGE_REPORT;
        parts = lt_malloc(max * sizeof *parts);
        counters = lt_malloc(max * sizeof *counters);
        entries = lt_malloc(max * sizeof *entries);
        if (parts && counters && entries) ns = salvage_report(d, c, parts, counters, entries, max);
    }
    size_t name_len = strlen(c->cfg.name) + 1;
    Latdata__NodeCacheStats *s = lt_calloc(
        1, sizeof *s + ns * (sizeof(Latdata__Salvage *) + sizeof(Latdata__Salvage)) + sizeof d->grid->salvage_id + name_len);
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
    s->name = inc + sizeof d->grid->salvage_id;
    memcpy(s->name, c->cfg.name, name_len);
    if (ns) {
        memcpy(inc, d->grid->salvage_id, sizeof d->grid->salvage_id);
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

void control_stats_add(lattice_grid_stats *sr, const char *node, Latdata__NodeCacheStats *const *st, size_t n)
{
    lattice_grid_stats_node *x = lt_realloc(sr->nodes, (sr->n_nodes + 1) * sizeof *x);
    if (!x) return;
    sr->nodes = x;
    lattice_grid_stats_node *sn = &x[sr->n_nodes];
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

static void stats_free(lattice_grid_stats *sr)
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

void lattice_grid_stats_free(lattice_grid_stats *sr) { stats_free(sr); }

/* One part of a broadcast answered (rs) or gave up (rs NULL). */
void report_bcast_part(lattice_ops *d, bcast *b, const Latdata__Resp *rs)
{
    if (rs && b->kind == CTL_PART_SIZE) b->sum += rs->num;
    if (rs && b->kind == CTL_STATS && b->stats) control_stats_add(b->stats, rs->node, rs->stats, rs->n_stats);
    if (rs && b->kind == CTL_STATS && !b->op) salvage_add(b, rs->node, rs->stats, rs->n_stats);
    if ((!rs || rs->status != LATTICE_OK) && !b->op) b->sum = -1; /* base check: a server did not answer or prepare: do not switch */
    if (--b->remaining > 0) return;
    if (!b->op) {
        base_finish_check(d, b);
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

void report_settle_bcast(lattice_ops *d, pend *p, const Latdata__Resp *rs) { report_bcast_part(d, p->b, rs); }

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
                if (lattice_meta_serving_owners(c, k, own, 1) == 1 && own[0]->self) rs.num += (int64_t)lattice_store_user_count(c->store, k);
            }
            b->remaining++;
            report_bcast_part(d, b, &rs);
            continue;
        }
        if (!p->dealer) continue;
        pend *pe = chan_pend_new(d, report_settle_bcast, p);
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
    report_bcast_part(d, b, NULL);
}

/* Sends CTL_STATS to every server; self answers at once.  op NULL: the
 * coordinator's base check polls (nothing is frozen). */
void report_start_stats(lattice_ops *d, opx *op)
{
    bcast *b = lt_calloc(1, sizeof *b);
    lattice_grid_stats *sr = lt_calloc(1, sizeof *sr);
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
    b->servers = base_servers_hash(d);
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
                if ((st[n] = report_node_stats(d, lattice_meta_cache_at(d->meta, k)))) n++;
            control_stats_add(sr, d->self_id, st, n);
            if (!op) salvage_add(b, d->self_id, st, n);
            for (size_t k = 0; k < n; k++) lt_free(st[k]);
            continue;
        }
        if (!p->dealer) continue;
        pend *pe = chan_pend_new(d, report_settle_bcast, p);
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
    report_bcast_part(d, b, (const Latdata__Resp *)&(Latdata__Resp)LATDATA__RESP__INIT);
}
