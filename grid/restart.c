/*
 * restart: a whole-grid restart from the data directories (data thread;
 * docs/PERSISTENCE.md, "Whole-grid restart").
 *
 * Every node with --data-dir keeps the affinity base of each cache it
 * applied in DIR/base (wal.c).  A coordinator that starts a grid (no
 * metadata yet) while it holds recovered copies whose base names other
 * servers does not start the metadata at once:
 *
 *   waiting     it asks every live server for a report (CTL_RESTART_REPORT:
 *               per recovered cache its spec, its kept base and version,
 *               and per partition the copy's update counter, entries and
 *               content hash) until every server of the newest base among
 *               the reports has answered - or --restart-wait-ms passed.
 *               Operations are refused meanwhile (LATTICE_ERR_RESTARTING,
 *               on every node: a metadata pull answers it too).
 *   decision    per partition the copy to keep: the highest (base version
 *               of its node's kept base, update counter, then fewer
 *               entries - a copy that applied more trailing removes).  Then
 *               the metadata starts on that newest base (its servers with
 *               their node ids now, "-" for one that did not report) with
 *               the cache marked restoring; each server that reported
 *               adopts its recovered copy (wal.c).
 *   restoring   nothing of the cache is served, nothing moves, no base
 *               switch.  Each round the coordinator reads every owner's
 *               digest (CTL_DIGEST) and, for an owner whose copy is not the
 *               one kept, asks the keeper (CTL_RESTART_PUSH) to send it
 *               (CTL_RESTART_LOAD, in slices; the first clears the
 *               partition).  When every owner holds the kept copy it ends
 *               restoring: the grid serves, and where a server was missing
 *               the rebalance goes on as after a departure.
 *
 * The decision travels in the metadata (CacheDef.restore_keep: per
 * partition the keeper's consistent id and the kept copy's digest), so a
 * coordinator that takes the restore over keeps the same copies, and a
 * keeper that dies is waited for (--restart-wait-ms): it comes back from
 * its data directory with the same copy and sends it under its new node id.
 * Replacing it by the best copy the owners hold could keep an old data
 * directory's copy; that happens only when the keeper is not back within
 * the wait (logged).
 *
 * When the owners' copies agree (a grid stopped or killed while no write
 * was in flight on them), no entry moves.
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

/* ------------------------------------------------------------ encoding */

void rs_w_put(wbuf *w, const void *p, size_t n)
{
    if (w->failed) return;
    if (w->n + n > w->cap) {
        size_t cap = w->cap ? w->cap : 4096;
        while (cap < w->n + n) cap *= 2;
        uint8_t *x = lt_realloc(w->b, cap);
        if (!x) {
            w->failed = true;
            return;
        }
        w->b = x;
        w->cap = cap;
    }
    memcpy(w->b + w->n, p, n);
    w->n += n;
}

void rs_w_u64(wbuf *w, uint64_t v)
{
    uint8_t b[8];
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)(v >> (8 * i));
    rs_w_put(w, b, 8);
}

static void w_str(wbuf *w, const char *s)
{
    size_t n = strlen(s);
    rs_w_u64(w, n);
    rs_w_put(w, s, n);
}


uint64_t rs_r_u64(rbuf *r)
{
    if (r->bad || r->n - r->at < 8) {
        r->bad = true;
        return 0;
    }
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v |= (uint64_t)r->b[r->at + i] << (8 * i);
    r->at += 8;
    return v;
}

/* A string of at most max-1 bytes into out; bad beyond. */
const uint8_t *rs_r_bytes(rbuf *r, uint64_t len)
{
    if (r->bad || len > r->n - r->at) {
        r->bad = true;
        return NULL;
    }
    const uint8_t *p = r->b + r->at;
    r->at += len;
    return p;
}

static bool r_str(rbuf *r, char *out, size_t max)
{
    uint64_t len = rs_r_u64(r);
    const uint8_t *p = len < max ? rs_r_bytes(r, len) : NULL;
    if (!p) {
        r->bad = true;
        return false;
    }
    memcpy(out, p, len);
    out[len] = 0;
    return true;
}

/* ------------------------------------------------------------ the kept bases (DIR/base) */

/* The base line of cache `name` in text ("NAME VERSION CID..."): its
 * version and cids (lt_malloc'd array of lt_strdup'd strings). */
static bool base_of(const char *text, const char *name, uint64_t *version, char ***cids, size_t *n)
{
    *version = 0;
    *cids = NULL;
    *n = 0;
    for (const char *l = text; l && *l;) {
        const char *e = strchr(l, '\n');
        size_t len = e ? (size_t)(e - l) : strlen(l);
        char line[8192];
        if (len < sizeof line) {
            memcpy(line, l, len);
            line[len] = 0;
            char *save = NULL, *tok = strtok_r(line, " ", &save);
            if (tok && !strcmp(tok, name) && (tok = strtok_r(NULL, " ", &save))) {
                *version = strtoull(tok, NULL, 10);
                char **v = lt_calloc(LATTICE_AFFINITY_MAX_NODES, sizeof *v);
                while (v && *n < LATTICE_AFFINITY_MAX_NODES && (tok = strtok_r(NULL, " ", &save)))
                    if (!(v[(*n)++] = lt_strdup(tok))) break;
                *cids = v;
                return v != NULL;
            }
        }
        l = e ? e + 1 : NULL;
    }
    return false;
}

static void cids_free(char **v, size_t n)
{
    for (size_t i = 0; v && i < n; i++) lt_free(v[i]);
    lt_free(v);
}

/* Recovered copy i with the base it was kept under (cids: the caller frees
 * them with cids_free). */
typedef struct {
    const char *name, *spec;
    lattice_store *store;
    const uint64_t *counter;
    uint32_t parts;
    uint64_t base;
    char **cids;
    size_t n_cids;
} rs_kept;

static bool kept_copy(lt_persist *p, const char *bases, size_t i, rs_kept *k)
{
    k->spec = lt_persist_recovered_spec(p, i);
    if (!k->spec || !lt_persist_recovered_copy(p, i, &k->name, &k->store, &k->counter, &k->parts)) return false;
    base_of(bases, k->name, &k->base, &k->cids, &k->n_cids);
    return true;
}

/* ------------------------------------------------------------ reports */

/* Whether DIR/reloading lists partition p of cache name: its copy was being
 * replaced when the node stopped, so it is partial and never kept. */
bool rs_reloading(const char *text, const char *name, uint32_t p)
{
    char line[LATTICE_CACHE_NAME_MAX + 16];
    snprintf(line, sizeof line, "%s %u\n", name, p);
    size_t n = strlen(line);
    for (const char *l = text; l && *l;) {
        if (!strncmp(l, line, n)) return true;
        l = strchr(l, '\n');
        if (l) l++;
    }
    return false;
}

/* This node's report: its recovered copies not yet adopted or dropped. */
static bool own_report(lattice_ops *d, wbuf *w)
{
    lt_persist *p = wal_persist(d);
    size_t n = p ? lt_persist_recovered_count(p) : 0, k = 0;
    char *bases = p ? lt_persist_read_bases(p) : NULL;
    char *partial = p ? lt_persist_read_text(p, "reloading") : NULL;
    for (size_t i = 0; i < n; i++) k += lt_persist_recovered_spec(p, i) != NULL;
    rs_w_u64(w, k);
    for (size_t i = 0; i < n; i++) {
        rs_kept k;
        if (!kept_copy(p, bases, i, &k)) continue;
        w_str(w, k.name);
        w_str(w, k.spec);
        rs_w_u64(w, k.base);
        rs_w_u64(w, k.n_cids);
        for (size_t c = 0; c < k.n_cids; c++) w_str(w, k.cids[c]);
        cids_free(k.cids, k.n_cids);
        rs_w_u64(w, k.parts);
        for (uint32_t q = 0; q < k.parts; q++) {
            lattice_rebalance_digest g;
            if (lattice_rebalance_digest_partition(k.store, q, k.counter[q], &g) != LATTICE_OK) {
                w->failed = true;
                break;
            }
            if (rs_reloading(partial, k.name, q)) g = (lattice_rebalance_digest){0}; /* partial: never kept */
            rs_w_u64(w, g.counter);
            rs_w_u64(w, g.size);
            rs_w_u64(w, g.hash);
        }
    }
    lt_free(bases);
    lt_free(partial);
    return !w->failed;
}

static void report_free(rs_report *r)
{
    for (size_t i = 0; i < r->n; i++) {
        lt_free(r->c[i].spec);
        cids_free(r->c[i].cids, r->c[i].n_cids);
        lt_free(r->c[i].copy);
    }
    lt_free(r->c);
    memset(r, 0, sizeof *r);
}

/* Decodes a report (any bytes: false on a malformed one). */
static bool report_parse(rs_report *out, const uint8_t *b, size_t len)
{
    rbuf r = {b, len, 0, false};
    uint64_t n = rs_r_u64(&r);
    if (r.bad || n > LATTICE_META_MAX_CACHES) return false;
    out->c = lt_calloc(n ? n : 1, sizeof *out->c);
    if (!out->c) return false;
    for (uint64_t i = 0; i < n && !r.bad; i++) {
        rs_cache *c = &out->c[out->n++];
        char spec[1024];
        if (!r_str(&r, c->name, sizeof c->name) || !r_str(&r, spec, sizeof spec)) break;
        c->spec = lt_strdup(spec);
        c->base_version = rs_r_u64(&r);
        uint64_t nc = rs_r_u64(&r);
        if (r.bad || nc > LATTICE_AFFINITY_MAX_NODES || !c->spec) {
            r.bad = true;
            break;
        }
        c->cids = lt_calloc(nc ? nc : 1, sizeof *c->cids);
        for (uint64_t k = 0; c->cids && k < nc && !r.bad; k++) {
            char cid[160];
            if (r_str(&r, cid, sizeof cid) && !(c->cids[c->n_cids++] = lt_strdup(cid))) r.bad = true;
        }
        uint64_t parts = rs_r_u64(&r);
        if (!c->cids || r.bad || parts == 0 || parts > LATTICE_STORE_MAX_PARTITIONS || (r.n - r.at) / 24 < parts) {
            r.bad = true;
            break;
        }
        c->parts = (uint32_t)parts;
        c->copy = lt_calloc(parts, sizeof *c->copy);
        if (!c->copy) {
            r.bad = true;
            break;
        }
        for (uint32_t q = 0; q < c->parts; q++) {
            c->copy[q].counter = rs_r_u64(&r);
            c->copy[q].size = rs_r_u64(&r);
            c->copy[q].hash = rs_r_u64(&r);
        }
    }
    if (r.bad || r.at != r.n) {
        report_free(out);
        return false;
    }
    return true;
}

void restart_serve_report(lattice_ops *d, const origin *o)
{
    lattice_op_result r = {0};
    wbuf w = {0};
    r.status = !lattice_meta_valid(d->meta) && own_report(d, &w) ? LATTICE_OK : LATTICE_ERR_AGAIN;
    r.value = w.b;
    r.value_len = r.status == LATTICE_OK ? w.n : 0;
    chan_reply(d, o, &r, NULL, 0, false); /* copies the value */
    lt_free(w.b);
}

static rs_report *report_of(struct grid_restart *x, const char *node)
{
    for (size_t i = 0; i < x->n_rep; i++)
        if (!strcmp(x->rep[i].node, node)) return &x->rep[i];
    return NULL;
}

static void add_report(lattice_ops *d, const char *node, const uint8_t *b, size_t len)
{
    struct grid_restart *x = d->grid->restart;
    peer *p = chan_peer_by_id(d, node);
    if (!p || !p->m.server || report_of(x, node)) return;
    rs_report *r = lt_realloc(x->rep, (x->n_rep + 1) * sizeof *r);
    if (!r) return;
    x->rep = r;
    rs_report *n = &x->rep[x->n_rep];
    memset(n, 0, sizeof *n);
    if (!report_parse(n, b, len)) {
        LT_LOG(LT_WARN, "data", "whole-grid restart: a malformed report from %s ignored", p->m.cid);
        return;
    }
    snprintf(n->node, sizeof n->node, "%s", node);
    snprintf(n->cid, sizeof n->cid, "%s", p->m.cid);
    x->n_rep++;
    LT_LOG(LT_INFO, "data", "whole-grid restart: %s reported %zu recovered caches", n->cid, n->n);
}

static void report_settle(lattice_ops *d, pend *p, const Latdata__Resp *rs)
{
    struct grid_restart *x = d->grid->restart;
    if (!x || x->phase != RESTART_WAITING || !rs || rs->status != LATTICE_OK) return; /* asked again next round */
    add_report(d, p->target, rs->value.data, rs->value.len);
}

/* ------------------------------------------------------------ waiting */

/* The newest kept base of cache `name` among the reports (NULL: none). */
static const rs_cache *newest_base(const struct grid_restart *x, const char *name)
{
    const rs_cache *best = NULL;
    for (size_t i = 0; i < x->n_rep; i++)
        for (size_t k = 0; k < x->rep[i].n; k++) {
            const rs_cache *c = &x->rep[i].c[k];
            if (!strcmp(c->name, name) && c->n_cids && (!best || c->base_version > best->base_version)) best = c;
        }
    return best;
}

static const rs_report *report_by_cid(const struct grid_restart *x, const char *cid)
{
    for (size_t i = 0; i < x->n_rep; i++)
        if (!strcmp(x->rep[i].cid, cid)) return &x->rep[i];
    return NULL;
}

/* Servers of the newest bases that have not reported: how many (names in
 * missing, space-separated). */
static size_t missing(const struct grid_restart *x, char *out, size_t cap)
{
    size_t n = 0, at = 0;
    out[0] = 0;
    for (size_t i = 0; i < x->n_rep; i++)
        for (size_t k = 0; k < x->rep[i].n; k++) {
            const rs_cache *b = newest_base(x, x->rep[i].c[k].name);
            for (size_t c = 0; b && c < b->n_cids; c++) {
                if (report_by_cid(x, b->cids[c]) || strstr(out, b->cids[c])) continue;
                n++;
                int w = snprintf(out + at, cap - at, "%s%s", at ? " " : "", b->cids[c]);
                if (w > 0 && (size_t)w < cap - at) at += (size_t)w;
            }
        }
    return n;
}

bool restart_waits(lattice_ops *d)
{
    struct grid_restart *x = d->grid->restart;
    if (!x) return false;
    if (x->phase == RESTART_WAITING) return true;
    if (x->phase != RESTART_NONE) return false;
    /* Waiting only pays when this node's copies come from a grid of more
     * than itself: a grid of one starts at once, as before. */
    lt_persist *p = wal_persist(d);
    char *bases = p && wal_has_recovered(d) ? lt_persist_read_bases(p) : NULL;
    bool others = false;
    for (size_t i = 0; bases && i < lt_persist_recovered_count(p) && !others; i++) {
        rs_kept k;
        if (!kept_copy(p, bases, i, &k)) continue;
        for (size_t c = 0; c < k.n_cids && !others; c++)
            others = !d->self || strcmp(k.cids[c], d->self->m.cid) != 0;
        cids_free(k.cids, k.n_cids);
    }
    lt_free(bases);
    if (!others) {
        x->phase = RESTART_DONE;
        return false;
    }
    x->phase = RESTART_WAITING;
    x->since = lt_mono_ms();
    x->started_ms = x->since;
    LT_LOG(LT_WARN, "data", "whole-grid restart: this node's data directory holds copies of a grid of several servers: "
           "waiting for every server of its baseline to report before serving (--restart-wait-ms %lld%s)",
           (long long)x->wait_ms, x->wait_ms < 0 ? ": no end" : "");
    return true;
}

bool restart_refuses(const lattice_ops *d)
{
    return (d->grid->restart && d->grid->restart->phase == RESTART_WAITING) ||
           (d->grid->restart_seen_ms && lt_mono_ms() - d->grid->restart_seen_ms < 2 * META_PULL_INTERVAL_MS);
}

/* ------------------------------------------------------------ the decision */

/* The decision of one cache as the metadata carries it: the keepers'
 * consistent ids, then per partition its keeper's index among them
 * (UINT64_MAX: nobody holds anything of it) and the kept copy's digest. */
static bool keep_encode(const rs_dec *dc, wbuf *w)
{
    const char **ids = lt_calloc(dc->parts, sizeof *ids);
    uint64_t *idx = lt_calloc(dc->parts, sizeof *idx);
    size_t n = 0;
    for (uint32_t p = 0; ids && idx && p < dc->parts; p++) {
        const char *cid = dc->keep[p].cid;
        idx[p] = UINT64_MAX;
        if (!cid[0]) continue;
        for (size_t i = 0; i < n && idx[p] == UINT64_MAX; i++)
            if (!strcmp(ids[i], cid)) idx[p] = i;
        if (idx[p] == UINT64_MAX) {
            idx[p] = n;
            ids[n++] = cid;
        }
    }
    if (!ids || !idx) w->failed = true;
    rs_w_u64(w, n);
    for (size_t i = 0; i < n; i++) w_str(w, ids[i]);
    for (uint32_t p = 0; !w->failed && p < dc->parts; p++) {
        rs_w_u64(w, idx[p]);
        rs_w_u64(w, dc->keep[p].copy.counter);
        rs_w_u64(w, dc->keep[p].copy.size);
        rs_w_u64(w, dc->keep[p].copy.hash);
    }
    lt_free(ids);
    lt_free(idx);
    return !w->failed;
}

/* dc->keep[] from the metadata's form (any bytes: false on a malformed one). */
bool rs_keep_decode(rs_dec *dc, const uint8_t *b, size_t len)
{
    rbuf r = {b, len, 0, false};
    uint64_t n = rs_r_u64(&r);
    if (r.bad || n > dc->parts) return false;
    char (*ids)[160] = lt_calloc(n ? n : 1, sizeof *ids);
    for (uint64_t i = 0; ids && i < n && !r.bad; i++) r_str(&r, ids[i], sizeof ids[i]);
    if (!ids || r.bad || (r.n - r.at) / 32 != dc->parts || (r.n - r.at) % 32) {
        lt_free(ids);
        return false;
    }
    for (uint32_t p = 0; p < dc->parts && !r.bad; p++) {
        uint64_t i = rs_r_u64(&r);
        rs_keep *k = &dc->keep[p];
        k->copy.counter = rs_r_u64(&r);
        k->copy.size = rs_r_u64(&r);
        k->copy.hash = rs_r_u64(&r);
        if (i == UINT64_MAX) k->cid[0] = 0;
        else if (i < n) snprintf(k->cid, sizeof k->cid, "%s", ids[i]);
        else r.bad = true;
    }
    lt_free(ids);
    return !r.bad;
}

/* Decides which copy of every partition is kept; fills bases for the
 * metadata (entries "CID NODE_ID", "-" for a server that did not report;
 * the decision in keeps[], which the caller frees). */
static size_t decide(lattice_ops *d, lattice_meta_restart_base *bases, char ***entries, wbuf *keeps)
{
    struct grid_restart *x = d->grid->restart;
    size_t nb = 0;
    x->dec = lt_calloc(LATTICE_META_MAX_CACHES, sizeof *x->dec);
    if (!x->dec) return 0;
    for (size_t i = 0; i < d->n_local_cfgs && nb < LATTICE_META_MAX_CACHES; i++) {
        const lattice_cache_config *cfg = &d->local_cfgs[i];
        const rs_cache *b = newest_base(x, cfg->name);
        if (!b) continue;
        char spec[1024];
        lattice_cache_config_format(cfg, 0, spec, sizeof spec);
        rs_dec *dc = &x->dec[x->n_dec];
        snprintf(dc->name, sizeof dc->name, "%s", cfg->name);
        dc->parts = cfg->partitions;
        dc->keep = lt_calloc(cfg->partitions, sizeof *dc->keep);
        char **ent = lt_calloc(b->n_cids, sizeof *ent);
        if (!dc->keep || !ent) {
            lt_free(dc->keep);
            lt_free(ent);
            continue;
        }
        for (size_t c = 0; c < b->n_cids; c++) {
            const rs_report *r = report_by_cid(x, b->cids[c]);
            size_t len = strlen(b->cids[c]) + 66;
            if ((ent[c] = lt_malloc(len))) snprintf(ent[c], len, "%s %s", b->cids[c], r ? r->node : "-");
        }
        uint32_t differ = 0, kept = 0;
        for (size_t r = 0; r < x->n_rep; r++)
            for (size_t k = 0; k < x->rep[r].n; k++) {
                const rs_cache *c = &x->rep[r].c[k];
                if (strcmp(c->name, cfg->name) || strcmp(c->spec, spec) || c->parts != cfg->partitions) continue;
                for (uint32_t p = 0; p < c->parts; p++) {
                    const rs_copy *y = &c->copy[p];
                    rs_keep *kp = &dc->keep[p];
                    if (!y->counter && !y->size) continue;
                    bool better = !kp->cid[0] || c->base_version > kp->rank_bv ||
                                  (c->base_version == kp->rank_bv &&
                                   (y->counter > kp->copy.counter ||
                                    (y->counter == kp->copy.counter && y->size < kp->copy.size)));
                    if (kp->cid[0] && (y->hash != kp->copy.hash || y->size != kp->copy.size)) differ++;
                    if (!better) continue;
                    snprintf(kp->cid, sizeof kp->cid, "%s", x->rep[r].cid);
                    kp->rank_bv = c->base_version;
                    kp->copy = *y;
                }
            }
        for (uint32_t p = 0; p < dc->parts; p++) kept += dc->keep[p].cid[0] != 0;
        LT_LOG(LT_INFO, "data", "whole-grid restart: cache %s: base version %" PRIu64 " of %zu servers; %u partitions "
               "hold data, copies differ %u times (the highest update counter is kept)", cfg->name, b->base_version,
               b->n_cids, kept, differ);
        entries[nb] = ent;
        keeps[nb] = (wbuf){0};
        if (!keep_encode(dc, &keeps[nb])) keeps[nb].n = 0; /* no room: a takeover decides from the digests */
        bases[nb] = (lattice_meta_restart_base){dc->name, ent, b->n_cids, b->base_version, keeps[nb].b, keeps[nb].n};
        nb++;
        x->n_dec++;
    }
    return nb;
}

bool restart_tick(lattice_ops *d, uint64_t now)
{
    struct grid_restart *x = d->grid->restart;
    if (!x || x->phase != RESTART_WAITING || !lattice_meta_is_coordinator(d->meta) || lattice_meta_valid(d->meta)) return false;
    /* Only while this node holds its lease: one that is rejoining (its
     * grid merged into another) decides nothing for a grid it left. */
    if (d->disc && !lattice_discovery_serving(d->disc, d->incarnation)) return false;
    if (!report_of(x, d->self_id)) {
        wbuf w = {0};
        if (own_report(d, &w)) add_report(d, d->self_id, w.b, w.n);
        lt_free(w.b);
    }
    char miss[1024];
    size_t n_miss = missing(x, miss, sizeof miss);
    /* now was read before the wait began (the loop's turn): never negative */
    bool timed_out = x->wait_ms >= 0 && now > x->since && now - x->since >= (uint64_t)x->wait_ms;
    if (n_miss && !timed_out) {
        if (now < x->last_round + ROUND_MS) return false;
        x->last_round = now;
        for (size_t i = 0; i < d->n_peers; i++) {
            peer *p = d->peers[i];
            if (!p->m.server || p->m.self || !p->dealer || report_of(x, p->m.id)) continue;
            pend *pe = chan_pend_new(d, report_settle, p);
            Latdata__Req *q = pe ? chan_req_new(CTL_RESTART_REPORT, NULL, NULL, 0, NULL, 0) : NULL;
            if (!q) continue;
            q->id = pe->id;
            chan_send(d, p, q);
        }
        return false;
    }
    if (n_miss)
        LT_LOG(LT_WARN, "data", "whole-grid restart: %s did not report within --restart-wait-ms %lld: the grid starts "
               "without them (their partitions are served by the other owners; none left: LOST)", miss,
               (long long)x->wait_ms);
    lattice_meta_restart_base bases[LATTICE_META_MAX_CACHES];
    char **entries[LATTICE_META_MAX_CACHES];
    wbuf keeps[LATTICE_META_MAX_CACHES];
    size_t nb = decide(d, bases, entries, keeps);
    lattice_meta_start_restart(d->meta, d->local_cfgs, d->n_local_cfgs, bases, nb);
    for (size_t i = 0; i < nb; i++) {
        cids_free(entries[i], bases[i].n);
        lt_free(keeps[i].b);
    }
    x->phase = nb ? RESTART_RESTORING : RESTART_DONE;
    x->last_round = now; /* the servers adopt first */
    return true;
}

/* ------------------------------------------------------------ lifecycle */

lattice_status restart_create(lattice_ops *d, int64_t wait_ms)
{
    d->grid->restart = lt_calloc(1, sizeof *d->grid->restart);
    if (!d->grid->restart) return LATTICE_ERR_NOMEM;
    d->grid->restart->wait_ms = wait_ms;
    return LATTICE_OK;
}

static void forget(struct grid_restart *x)
{
    for (size_t i = 0; i < x->n_rep; i++) report_free(&x->rep[i]);
    lt_free(x->rep);
    x->rep = NULL;
    x->n_rep = 0;
    for (size_t i = 0; i < x->n_dec; i++) {
        lt_free(x->dec[i].keep);
        lt_free(x->dec[i].dg.d);
    }
    lt_free(x->dec);
    x->dec = NULL;
    x->n_dec = 0;
    x->round_left = 0;
    x->publish = false;
}

void restart_rejoined(lattice_ops *d)
{
    struct grid_restart *x = d->grid->restart;
    if (!x || (x->phase != RESTART_WAITING && x->phase != RESTART_RESTORING)) return;
    LT_LOG(LT_WARN, "data", "whole-grid restart: this node rejoined the grid as a new node; it no longer "
           "coordinates the restart (whoever coordinates decides)");
    forget(x);
    x->phase = RESTART_NONE;
}

void restart_free(lattice_ops *d)
{
    struct grid_restart *x = d->grid->restart;
    if (!x) return;
    for (size_t i = 0; i < x->n_rep; i++) report_free(&x->rep[i]);
    lt_free(x->rep);
    for (size_t i = 0; i < x->n_dec; i++) {
        lt_free(x->dec[i].keep);
        lt_free(x->dec[i].dg.d);
    }
    lt_free(x->dec);
    lt_free(x->reloading);
    lt_free(x);
    d->grid->restart = NULL;
}

const char *restart_phase(const lattice_ops *d)
{
    static const char *const names[] = {"none", "waiting", "restoring", "done"};
    return d->grid->restart ? names[d->grid->restart->phase] : "none";
}
