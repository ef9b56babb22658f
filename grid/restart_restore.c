/*
 * restart_restore: the restoring phase of a whole-grid restart (data
 * thread; restart.c has the whole story).  Each round the coordinator
 * reads every owner's digest (CTL_DIGEST) and, for an owner whose copy is
 * not the one kept, asks the keeper (CTL_RESTART_PUSH) to send it
 * (CTL_RESTART_LOAD, in slices of LOAD_SLICE; the first clears the
 * partition).  When every owner holds the kept copy, restoring ends.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lattice/alloc.h"
#include "lattice/clock.h"
#include "lattice/log.h"
#include "ops/ops_int.h"
#include "restart_int.h"
#include "persist/persist.h"
#include "rebal_exec.h"
#include "rebalance/rebalance.h"

/* ------------------------------------------------------------ restoring */

static const lattice_partition_digest *digest_of(const rs_dec *dc, const char *node, uint32_t p)
{
    for (size_t i = 0; i < dc->dg.n; i++)
        if (dc->dg.d[i].partition == p && !strcmp(dc->dg.d[i].node, node)) return &dc->dg.d[i];
    return NULL;
}

static void push(lattice_ops *d, lattice_meta_cache *c, uint32_t p, const char *keeper, const char *to,
                 const rs_copy *want);
static bool note_reloading(lattice_ops *d, const char *name, uint32_t p);

/* keep[] of partition p (every one: UINT32_MAX) from the round's digests -
 * the owners' adopted copies - by counter, then fewer entries: a
 * coordinator that took over without the decision, or a keeper that did not
 * come back within the wait. */
static void derive(lattice_ops *d, rs_dec *dc, uint32_t only)
{
    for (uint32_t p = 0; p < dc->parts; p++)
        if (only == UINT32_MAX || p == only) memset(&dc->keep[p], 0, sizeof dc->keep[p]);
    for (size_t k = 0; k < dc->dg.n; k++) {
        const lattice_partition_digest *g = &dc->dg.d[k];
        peer *h = chan_peer_by_id(d, g->node);
        if (!h || g->partition >= dc->parts || (only != UINT32_MAX && g->partition != only) ||
            (!g->counter && !g->size))
            continue;
        rs_keep *kp = &dc->keep[g->partition];
        if (kp->cid[0] &&
            (g->counter < kp->copy.counter || (g->counter == kp->copy.counter && g->size >= kp->copy.size)))
            continue;
        snprintf(kp->cid, sizeof kp->cid, "%s", h->m.cid);
        kp->copy = (rs_copy){g->counter, g->size, g->hash};
    }
}

static bool is_kept(const lattice_partition_digest *g, const rs_keep *k)
{
    return g && k->cid[0] && g->hash == k->copy.hash && g->size == k->copy.size && g->counter == k->copy.counter;
}

/* The node id of a live server that holds p's kept copy: an owner whose
 * digest shows it, else the keeper (by consistent id: it may be back under
 * a new node id); NULL: none is live. */
static const char *holder(lattice_ops *d, const rs_dec *dc, uint32_t p, lattice_meta_member *const *own, size_t n)
{
    for (size_t o = 0; o < n; o++)
        if (is_kept(digest_of(dc, own[o]->id, p), &dc->keep[p])) return own[o]->id;
    peer *h = chan_peer_by_cid(d, dc->keep[p].cid);
    return h && h->m.server ? h->m.id : NULL;
}

/* Every digest of the round is in: push where an owner's copy is not the
 * kept one, or end restoring. */
static void round_done(lattice_ops *d)
{
    struct grid_restart *x = d->grid->restart;
    if (x->round_failed) return; /* a server did not answer: next round */
    bool all_equal = true;
    uint64_t now = lt_mono_ms();
    uint32_t waiting = 0;
    const char *wait_for = NULL;
    for (size_t i = 0; i < x->n_dec; i++) {
        rs_dec *dc = &x->dec[i];
        lattice_meta_cache *c = lattice_meta_cache_of(d->meta, dc->name);
        if (!c || !c->restoring || c->cfg.partitions != dc->parts) continue;
        if (dc->derived) {
            dc->derived = false;
            derive(d, dc, UINT32_MAX);
        }
        for (uint32_t p = 0; p < dc->parts; p++) {
            lattice_meta_member *own[LATTICE_CACHE_MAX_BACKUPS + 1];
            size_t n = lattice_meta_serving_owners(c, p, own, LATTICE_CACHE_MAX_BACKUPS + 1);
            rs_keep *k = &dc->keep[p];
            bool differs = false;
            for (size_t o = 0; o < n && !differs; o++) {
                const lattice_partition_digest *g = digest_of(dc, own[o]->id, p);
                differs = !is_kept(g, k) && !(!k->cid[0] && g && g->size == 0);
            }
            if (!differs) {
                k->since = 0;
                continue;
            }
            all_equal = false;
            if (!k->since) k->since = now;
            const char *from = k->cid[0] ? holder(d, dc, p, own, n) : NULL;
            if (k->cid[0] && x->wait_ms >= 0 && now - k->since >= (uint64_t)x->wait_ms) {
                /* The kept copy's holder is not back, or cannot send it. */
                LT_LOG(LT_WARN, "data", "whole-grid restart: cache %s partition %u: the kept copy (held by %s) did not "
                       "reach its owners within --restart-wait-ms %lld: the best copy the owners hold is kept",
                       dc->name, p, k->cid, (long long)x->wait_ms);
                derive(d, dc, p);
                k->since = now;
                continue; /* sent from the next round on */
            }
            if (k->cid[0] && !from) {
                waiting++;
                wait_for = k->cid;
                continue;
            }
            for (size_t o = 0; o < n; o++) {
                const lattice_partition_digest *g = digest_of(dc, own[o]->id, p);
                if (!is_kept(g, k) && !(!k->cid[0] && g && g->size == 0)) push(d, c, p, from, own[o]->id, &k->copy);
            }
        }
    }
    if (waiting && now >= x->waiting_logged + 10000) {
        x->waiting_logged = now;
        LT_LOG(LT_WARN, "data", "whole-grid restart: the kept copies of %u partitions are on servers that are not back "
               "(%s%s): waiting for them (--restart-wait-ms %lld)", waiting, wait_for, waiting > 1 ? ", ..." : "",
               (long long)x->wait_ms);
    }
    if (!all_equal) return;
    for (size_t i = 0; i < x->n_dec; i++) {
        lattice_meta_cache *c = lattice_meta_cache_of(d->meta, x->dec[i].name);
        if (c && c->restoring) lattice_meta_end_restoring(c);
    }
    x->phase = RESTART_DONE;
    x->publish = true;
    LT_LOG(LT_INFO, "data", "whole-grid restart: every owner holds the kept copy (%" PRIu64 " partitions sent); the "
           "grid serves, %" PRIu64 " ms after the start", x->pushes, lt_mono_ms() - x->started_ms);
}

/* p->ctl: the decision's index; p->pull: the round. */
static void digest_settle(lattice_ops *d, pend *p, const Latdata__Resp *rs)
{
    struct grid_restart *x = d->grid->restart;
    if (!x || x->phase != RESTART_RESTORING || p->pull != x->round) return;
    if (!rs || rs->status != LATTICE_OK || p->ctl < 0 || (size_t)p->ctl >= x->n_dec ||
        !rebal_unpack_digests(&x->dec[p->ctl].dg, p->target, rs->value.data, rs->value.len))
        x->round_failed = true;
    if (x->round_left && --x->round_left == 0) round_done(d);
}

/* Own digests of c's serving copies into dc. */
static bool own_digests_into(lattice_ops *d, lattice_meta_cache *c, rs_dec *dc)
{
    for (uint32_t p = 0; p < c->cfg.partitions; p++) {
        lattice_meta_member *own[LATTICE_CACHE_MAX_BACKUPS + 1];
        size_t n = lattice_meta_serving_owners(c, p, own, LATTICE_CACHE_MAX_BACKUPS + 1);
        bool mine = false;
        for (size_t i = 0; i < n && !mine; i++) mine = own[i]->self;
        if (!mine) continue;
        lattice_rebalance_digest g;
        if (lattice_rebalance_digest_partition(c->store, p, c->counter[p], &g) != LATTICE_OK) return false;
        uint8_t b[28];
        for (int i = 0; i < 4; i++) b[i] = (uint8_t)(p >> (8 * i));
        for (int i = 0; i < 8; i++) {
            b[4 + i] = (uint8_t)(g.hash >> (8 * i));
            b[12 + i] = (uint8_t)(g.size >> (8 * i));
            b[20 + i] = (uint8_t)(g.counter >> (8 * i));
        }
        if (!rebal_unpack_digests(&dc->dg, d->self_id, b, sizeof b)) return false;
    }
    return true;
}

static void start_round(lattice_ops *d)
{
    struct grid_restart *x = d->grid->restart;
    x->round++;
    x->round_failed = false;
    x->round_left = 1; /* this function's own share */
    for (size_t i = 0; i < x->n_dec; i++) {
        rs_dec *dc = &x->dec[i];
        dc->dg.n = 0;
        lattice_meta_cache *c = lattice_meta_cache_of(d->meta, dc->name);
        if (!c || !c->restoring) continue;
        for (size_t k = 0; k < d->n_peers; k++) {
            peer *p = d->peers[k];
            if (!p->m.server) continue;
            if (p->m.self) {
                if (!c->store || !own_digests_into(d, c, dc)) x->round_failed = true;
                continue;
            }
            pend *pe = p->dealer ? chan_pend_new(d, digest_settle, p) : NULL;
            Latdata__Req *q = pe ? chan_req_new(CTL_DIGEST, c->cfg.name, NULL, 0, NULL, 0) : NULL;
            if (!q) {
                x->round_failed = true;
                continue;
            }
            pe->ctl = (int)i;
            pe->pull = x->round;
            q->id = pe->id;
            x->round_left++;
            chan_send(d, p, q);
        }
    }
    if (--x->round_left == 0) round_done(d);
}

/* This coordinator holds restoring caches it did not decide (the one that
 * did left): it takes over, deciding from the owners' digests. */
static void take_over(lattice_ops *d)
{
    struct grid_restart *x = d->grid->restart;
    size_t n = 0;
    for (size_t i = 0; i < lattice_meta_cache_count(d->meta); i++) n += lattice_meta_cache_at(d->meta, i)->restoring;
    if (!n || !(x->dec = lt_calloc(n, sizeof *x->dec))) return;
    size_t derived = 0;
    for (size_t i = 0; i < lattice_meta_cache_count(d->meta); i++) {
        lattice_meta_cache *c = lattice_meta_cache_at(d->meta, i);
        if (!c->restoring) continue;
        rs_dec *dc = &x->dec[x->n_dec];
        snprintf(dc->name, sizeof dc->name, "%s", c->cfg.name);
        dc->parts = c->cfg.partitions;
        if (!(dc->keep = lt_calloc(dc->parts, sizeof *dc->keep))) continue;
        /* The decision in the metadata; without it (none fit), the owners'
         * digests rank the copies. */
        dc->derived = !rs_keep_decode(dc, c->restore_keep, c->n_restore_keep);
        derived += dc->derived;
        x->n_dec++;
    }
    x->phase = RESTART_RESTORING;
    x->started_ms = lt_mono_ms();
    LT_LOG(LT_WARN, "data", "whole-grid restart: this node coordinates now and takes over restoring %zu caches "
           "(%s)", x->n_dec, derived ? "the owners' copies are ranked by their digests" : "the decision's kept copies");
}

bool restart_restoring_tick(lattice_ops *d, uint64_t now)
{
    struct grid_restart *x = d->grid->restart;
    if (!x || !lattice_meta_is_coordinator(d->meta) || !lattice_meta_valid(d->meta)) return false;
    if (x->publish) { /* a round ended it (its last digest came in) */
        x->publish = false;
        return true;
    }
    if (x->phase != RESTART_RESTORING && !x->n_dec) take_over(d);
    if (x->phase != RESTART_RESTORING || x->round_left || now < x->last_round + ROUND_MS) return false;
    x->last_round = now;
    start_round(d);
    if (!x->publish) return false;
    x->publish = false;
    return true;
}

/* Whether this node's copy of p is the kept one (want: its digest as
 * push() encodes it), so that it may send it; logged when not. */
static bool holds(lattice_meta_cache *c, uint32_t p, const uint8_t *want, size_t len)
{
    lattice_rebalance_digest g;
    if (len != 24 || !c->store || lattice_rebalance_digest_partition(c->store, p, c->counter[p], &g) != LATTICE_OK)
        return false;
    uint64_t v[3] = {0};
    for (int k = 0; k < 3; k++)
        for (int i = 0; i < 8; i++) v[k] |= (uint64_t)want[8 * k + i] << (8 * i);
    if (g.counter == v[0] && g.size == v[1] && g.hash == v[2]) return true;
    LT_LOG(LT_WARN, "data", "whole-grid restart: cache %s partition %u: asked to send the kept copy (counter %" PRIu64
           ", %" PRIu64 " entries), this node holds another (counter %" PRIu64 ", %" PRIu64 " entries): not sent",
           c->cfg.name, p, v[0], v[1], g.counter, g.size);
    return false;
}

/* Coordinator: the keeper of p (NULL: nobody holds anything of it) sends
 * its copy - the one of digest want - to node `to`. */
static void push(lattice_ops *d, lattice_meta_cache *c, uint32_t p, const char *keeper, const char *to,
                 const rs_copy *want)
{
    struct grid_restart *x = d->grid->restart;
    x->pushes++;
    if (!keeper) { /* nobody held anything of p: the owner's copy must be empty */
        peer *t = chan_peer_by_id(d, to);
        if (t && t->m.self) {
            if (note_reloading(d, c->cfg.name, p)) {
                fast_mark(c, p);
                lattice_store_clear(c->store, p);
            }
            return;
        }
        Latdata__Req *q = t && t->dealer ? chan_req_new(CTL_RESTART_LOAD, c->cfg.name, NULL, 0, NULL, 0) : NULL;
        if (!q) return;
        q->partition = p;
        q->remove = true;
        q->version = c->counter[p];
        q->sender = d->self_id;
        chan_send(d, t, q);
        return;
    }
    peer *k = chan_peer_by_id(d, keeper);
    uint8_t w[24];
    for (int i = 0; i < 8; i++) {
        w[i] = (uint8_t)(want->counter >> (8 * i));
        w[8 + i] = (uint8_t)(want->size >> (8 * i));
        w[16 + i] = (uint8_t)(want->hash >> (8 * i));
    }
    if (k && k->m.self) {
        if (holds(c, p, w, sizeof w)) restart_send_copy(d, c, p, to);
        return;
    }
    if (!k || !k->dealer) return;
    Latdata__Req *q = chan_req_new(CTL_RESTART_PUSH, c->cfg.name, to, strlen(to), w, sizeof w);
    if (!q) return;
    q->partition = p;
    chan_send(d, k, q); /* no answer: the next round's digests tell */
}

typedef struct slice {
    lattice_ops *d;
    peer *to;
    lattice_meta_cache *c;
    uint32_t p;
    wbuf w;
    uint64_t n;
    bool first;
} slice;

static void slice_send(slice *s, bool last)
{
    if (s->w.failed) return;
    Latdata__Req *q = chan_req_new(CTL_RESTART_LOAD, s->c->cfg.name, NULL, 0, s->w.b, s->w.n);
    s->w.n = 0;
    if (!q) return;
    q->partition = s->p;
    q->remove = s->first;  /* the first slice clears the partition */
    q->delta = last;       /* the last one sets the counter */
    q->version = s->c->counter[s->p];
    q->sender = s->d->self_id;
    s->first = false;
    chan_send(s->d, s->to, q);
    q = NULL;
}

static int slice_add(void *arg, const lattice_store_item *it)
{
    slice *s = arg;
    rs_w_u64(&s->w, it->key_len);
    /* The value's type rides above its length (< 2^32): 0 for a string,
     * so a string's bytes are what they were before types. */
    rs_w_u64(&s->w, (uint64_t)it->type << 32 | it->value_len);
    rs_w_u64(&s->w, it->expire_ms);
    rs_w_u64(&s->w, it->version);
    rs_w_put(&s->w, it->key, it->key_len);
    rs_w_put(&s->w, it->value, it->value_len);
    s->n++;
    return 0;
}

void restart_send_copy(lattice_ops *d, lattice_meta_cache *c, uint32_t p, const char *to)
{
    peer *t = chan_peer_by_id(d, to);
    if (!t || !t->dealer || !c->store || p >= c->cfg.partitions || t->m.self) return;
    slice s = {d, t, c, p, {0}, 0, true};
    lattice_store_cursor *cur = NULL;
    int st = lattice_store_cursor_open(c->store, p, &cur);
    for (int done = 0; st == LATTICE_OK && !done;) {
        /* The store's pointers live only in the callback: copied there. */
        st = lattice_store_cursor_next(cur, 256, LOAD_SLICE, slice_add, &s, &done);
        if (st == LATTICE_OK && (s.w.n >= LOAD_SLICE || done)) slice_send(&s, done);
    }
    if (cur) lattice_store_cursor_close(cur);
    if (st != LATTICE_OK || s.w.failed)
        LT_LOG(LT_WARN, "data", "whole-grid restart: cache %s partition %u: cannot send the kept copy to %s: %s",
               c->cfg.name, p, t->m.cid, lattice_strerror(st != LATTICE_OK ? st : LATTICE_ERR_NOMEM));
    else
        LT_LOG(LT_INFO, "data", "whole-grid restart: cache %s partition %u: kept copy (%" PRIu64 " entries) sent to %s",
               c->cfg.name, p, s.n, t->m.cid);
    lt_free(s.w.b);
}

void restart_serve_push(lattice_ops *d, const Latdata__Req *q)
{
    lattice_meta_cache *c = lattice_meta_valid(d->meta) ? lattice_meta_cache_of(d->meta, q->cache) : NULL;
    char to[64];
    if (!c || !c->restoring || !q->key.len || q->key.len >= sizeof to) return;
    memcpy(to, q->key.data, q->key.len);
    to[q->key.len] = 0;
    if (q->partition < c->cfg.partitions && holds(c, q->partition, q->value.data, q->value.len))
        restart_send_copy(d, c, q->partition, to);
}

/* Before a partition's copy is cleared for a reload: DIR/reloading lists
 * it, durably, until the reload is durable (restart_reloads_done). */
static bool note_reloading(lattice_ops *d, const char *name, uint32_t p)
{
    struct grid_restart *x = d->grid->restart;
    lt_persist *ps = wal_persist(d);
    if (!x || !ps) return true;
    char line[LATTICE_CACHE_NAME_MAX + 16];
    snprintf(line, sizeof line, "%s %u\n", name, p);
    if (rs_reloading(x->reloading, name, p)) return true;
    size_t old = x->reloading ? strlen(x->reloading) : 0;
    char *t = lt_malloc(old + strlen(line) + 1);
    if (!t) return false;
    memcpy(t, x->reloading ? x->reloading : "", old);
    strcpy(t + old, line);
    if (lt_persist_save_text(ps, "reloading", t) != LATTICE_OK) {
        LT_LOG(LT_WARN, "data", "%s: cannot write DIR/reloading: partition %u of cache %s is not reloaded yet",
               lt_persist_dir(ps), p, name);
        lt_free(t);
        return false;
    }
    lt_free(x->reloading);
    x->reloading = t;
    return true;
}

void restart_reloads_end(lattice_ops *d)
{
    grid_restart *x = d->grid->restart;
    if (x && x->reloading) x->reload_done_due = true;
}

void restart_tick_durable(lattice_ops *d)
{
    struct grid_restart *x = d->grid->restart;
    if (!x || !x->reload_done_due || !wal_durable(d)) return;
    lt_persist *ps = wal_persist(d);
    if (ps && lt_persist_save_text(ps, "reloading", "") != LATTICE_OK) return; /* tried again */
    x->reload_done_due = false;
    lt_free(x->reloading);
    x->reloading = NULL;
}

void restart_serve_load(lattice_ops *d, const Latdata__Req *q)
{
    lattice_meta_cache *c = lattice_meta_valid(d->meta) ? lattice_meta_cache_of(d->meta, q->cache) : NULL;
    if (!c || !c->restoring || !c->store || q->partition >= c->cfg.partitions) return;
    uint32_t p = q->partition;
    if (q->remove && !note_reloading(d, c->cfg.name, p)) return; /* not cleared: the next round sends it again */
    fast_mark(c, p);
    if (q->remove) lattice_store_clear(c->store, p);
    rbuf r = {q->value.data, q->value.len, 0, false};
    uint64_t n = 0;
    while (r.at < r.n && !r.bad) {
        uint64_t kl = rs_r_u64(&r), vt = rs_r_u64(&r), exp = rs_r_u64(&r), ver = rs_r_u64(&r);
        uint64_t vl = vt & UINT32_MAX, type = vt >> 32; /* slice_add */
        if (type > LATTICE_STORE_TYPE_MAX) r.bad = true;
        const uint8_t *k = kl && kl <= r.n ? rs_r_bytes(&r, kl) : NULL;
        const uint8_t *v = !r.bad && vl <= r.n - r.at ? rs_r_bytes(&r, vl) : NULL;
        if (!k || (!v && vl) || r.bad) {
            r.bad = true;
            break;
        }
        lattice_store_entry e = {p, k, kl, v ? v : (const uint8_t *)"", vl, exp, ver, (uint8_t)type};
        if (lattice_store_put(c->store, &e, 0) != LATTICE_OK) {
            r.bad = true;
            break;
        }
        n++;
    }
    if (r.bad) {
        /* Malformed or no room: the copy is left cleared, so it differs and
         * the next round sends it again. */
        lattice_store_clear(c->store, p);
        d->malformed++;
        return;
    }
    if (q->delta) c->counter[p] = q->version;
}
