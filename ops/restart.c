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
#include "ops_int.h"
#include "persist/persist.h"
#include "rebal_exec.h"
#include "rebalance/rebalance.h"

#define ROUND_MS 500
#define LOAD_SLICE (1u << 20)

typedef struct rs_copy {
    uint64_t counter, size, hash;
} rs_copy;

typedef struct rs_cache {
    char name[LATTICE_CACHE_NAME_MAX + 1];
    char *spec;
    uint64_t base_version;
    char **cids;
    size_t n_cids;
    uint32_t parts;
    rs_copy *copy;
} rs_cache;

typedef struct rs_report {
    char node[64];
    char cid[160];
    rs_cache *c;
    size_t n;
} rs_report;

typedef struct rs_keep { /* per partition: the copy kept */
    char cid[160];       /* its holder's consistent id; "" none: no node holds anything of it */
    uint64_t rank_bv;
    rs_copy copy;
    uint64_t since;      /* when an owner was first seen without it (0: none is) */
} rs_keep;

typedef struct rs_dec {
    char name[LATTICE_CACHE_NAME_MAX + 1];
    uint32_t parts;
    rs_keep *keep;
    bool derived;           /* a coordinator that took over restoring: keep[] from the owners' digests */
    lattice_ops_digests dg; /* the round's digests */
} rs_dec;

struct ops_restart {
    int phase; /* 0 none, 1 waiting, 2 restoring, 3 done */
    int64_t wait_ms;
    uint64_t since, last_round, round;
    rs_report *rep;
    size_t n_rep;
    rs_dec *dec;
    size_t n_dec;
    size_t round_left;
    bool round_failed;
    uint64_t pushes, started_ms, waiting_logged;
    bool publish; /* restoring ended: the metadata is to be published */
    char *reloading; /* DIR/reloading as written: "CACHE PARTITION" lines this node is loading */
    bool reload_done_due;
};

/* ------------------------------------------------------------ encoding */

typedef struct wbuf {
    uint8_t *b;
    size_t n, cap;
    bool failed;
} wbuf;

static void w_put(wbuf *w, const void *p, size_t n)
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

static void w_u64(wbuf *w, uint64_t v)
{
    uint8_t b[8];
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)(v >> (8 * i));
    w_put(w, b, 8);
}

static void w_str(wbuf *w, const char *s)
{
    size_t n = strlen(s);
    w_u64(w, n);
    w_put(w, s, n);
}

typedef struct rbuf {
    const uint8_t *b;
    size_t n, at;
    bool bad;
} rbuf;

static uint64_t r_u64(rbuf *r)
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
static const uint8_t *r_bytes(rbuf *r, uint64_t len)
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
    uint64_t len = r_u64(r);
    const uint8_t *p = len < max ? r_bytes(r, len) : NULL;
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
static bool reloading(const char *text, const char *name, uint32_t p)
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
    w_u64(w, k);
    for (size_t i = 0; i < n; i++) {
        rs_kept k;
        if (!kept_copy(p, bases, i, &k)) continue;
        w_str(w, k.name);
        w_str(w, k.spec);
        w_u64(w, k.base);
        w_u64(w, k.n_cids);
        for (size_t c = 0; c < k.n_cids; c++) w_str(w, k.cids[c]);
        cids_free(k.cids, k.n_cids);
        w_u64(w, k.parts);
        for (uint32_t q = 0; q < k.parts; q++) {
            lattice_rebalance_digest g;
            if (lattice_rebalance_digest_partition(k.store, q, k.counter[q], &g) != LATTICE_OK) {
                w->failed = true;
                break;
            }
            if (reloading(partial, k.name, q)) g = (lattice_rebalance_digest){0}; /* partial: never kept */
            w_u64(w, g.counter);
            w_u64(w, g.size);
            w_u64(w, g.hash);
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
    uint64_t n = r_u64(&r);
    if (r.bad || n > LATTICE_META_MAX_CACHES) return false;
    out->c = lt_calloc(n ? n : 1, sizeof *out->c);
    if (!out->c) return false;
    for (uint64_t i = 0; i < n && !r.bad; i++) {
        rs_cache *c = &out->c[out->n++];
        char spec[1024];
        if (!r_str(&r, c->name, sizeof c->name) || !r_str(&r, spec, sizeof spec)) break;
        c->spec = lt_strdup(spec);
        c->base_version = r_u64(&r);
        uint64_t nc = r_u64(&r);
        if (r.bad || nc > LATTICE_AFFINITY_MAX_NODES || !c->spec) {
            r.bad = true;
            break;
        }
        c->cids = lt_calloc(nc ? nc : 1, sizeof *c->cids);
        for (uint64_t k = 0; c->cids && k < nc && !r.bad; k++) {
            char cid[160];
            if (r_str(&r, cid, sizeof cid) && !(c->cids[c->n_cids++] = lt_strdup(cid))) r.bad = true;
        }
        uint64_t parts = r_u64(&r);
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
            c->copy[q].counter = r_u64(&r);
            c->copy[q].size = r_u64(&r);
            c->copy[q].hash = r_u64(&r);
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

static rs_report *report_of(struct ops_restart *x, const char *node)
{
    for (size_t i = 0; i < x->n_rep; i++)
        if (!strcmp(x->rep[i].node, node)) return &x->rep[i];
    return NULL;
}

static void add_report(lattice_ops *d, const char *node, const uint8_t *b, size_t len)
{
    struct ops_restart *x = d->restart;
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
    struct ops_restart *x = d->restart;
    if (!x || x->phase != 1 || !rs || rs->status != LATTICE_OK) return; /* asked again next round */
    add_report(d, p->target, rs->value.data, rs->value.len);
}

/* ------------------------------------------------------------ waiting */

/* The newest kept base of cache `name` among the reports (NULL: none). */
static const rs_cache *newest_base(const struct ops_restart *x, const char *name)
{
    const rs_cache *best = NULL;
    for (size_t i = 0; i < x->n_rep; i++)
        for (size_t k = 0; k < x->rep[i].n; k++) {
            const rs_cache *c = &x->rep[i].c[k];
            if (!strcmp(c->name, name) && c->n_cids && (!best || c->base_version > best->base_version)) best = c;
        }
    return best;
}

static const rs_report *report_by_cid(const struct ops_restart *x, const char *cid)
{
    for (size_t i = 0; i < x->n_rep; i++)
        if (!strcmp(x->rep[i].cid, cid)) return &x->rep[i];
    return NULL;
}

/* Servers of the newest bases that have not reported: how many (names in
 * missing, space-separated). */
static size_t missing(const struct ops_restart *x, char *out, size_t cap)
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
    struct ops_restart *x = d->restart;
    if (!x) return false;
    if (x->phase == 1) return true;
    if (x->phase != 0) return false;
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
        x->phase = 3;
        return false;
    }
    x->phase = 1;
    x->since = lt_mono_ms();
    x->started_ms = x->since;
    LT_LOG(LT_WARN, "data", "whole-grid restart: this node's data directory holds copies of a grid of several servers: "
           "waiting for every server of its baseline to report before serving (--restart-wait-ms %lld%s)",
           (long long)x->wait_ms, x->wait_ms < 0 ? ": no end" : "");
    return true;
}

bool restart_refuses(const lattice_ops *d)
{
    return (d->restart && d->restart->phase == 1) ||
           (d->restart_seen_ms && lt_mono_ms() - d->restart_seen_ms < 2 * META_PULL_INTERVAL_MS);
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
    w_u64(w, n);
    for (size_t i = 0; i < n; i++) w_str(w, ids[i]);
    for (uint32_t p = 0; !w->failed && p < dc->parts; p++) {
        w_u64(w, idx[p]);
        w_u64(w, dc->keep[p].copy.counter);
        w_u64(w, dc->keep[p].copy.size);
        w_u64(w, dc->keep[p].copy.hash);
    }
    lt_free(ids);
    lt_free(idx);
    return !w->failed;
}

/* dc->keep[] from the metadata's form (any bytes: false on a malformed one). */
static bool keep_decode(rs_dec *dc, const uint8_t *b, size_t len)
{
    rbuf r = {b, len, 0, false};
    uint64_t n = r_u64(&r);
    if (r.bad || n > dc->parts) return false;
    char (*ids)[160] = lt_calloc(n ? n : 1, sizeof *ids);
    for (uint64_t i = 0; ids && i < n && !r.bad; i++) r_str(&r, ids[i], sizeof ids[i]);
    if (!ids || r.bad || (r.n - r.at) / 32 != dc->parts || (r.n - r.at) % 32) {
        lt_free(ids);
        return false;
    }
    for (uint32_t p = 0; p < dc->parts && !r.bad; p++) {
        uint64_t i = r_u64(&r);
        rs_keep *k = &dc->keep[p];
        k->copy.counter = r_u64(&r);
        k->copy.size = r_u64(&r);
        k->copy.hash = r_u64(&r);
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
    struct ops_restart *x = d->restart;
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
    struct ops_restart *x = d->restart;
    if (!x || x->phase != 1 || !lattice_meta_is_coordinator(d->meta) || lattice_meta_valid(d->meta)) return false;
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
    x->phase = nb ? 2 : 3;
    x->last_round = now; /* the servers adopt first */
    return true;
}

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
    struct ops_restart *x = d->restart;
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
    x->phase = 3;
    x->publish = true;
    LT_LOG(LT_INFO, "data", "whole-grid restart: every owner holds the kept copy (%" PRIu64 " partitions sent); the "
           "grid serves, %" PRIu64 " ms after the start", x->pushes, lt_mono_ms() - x->started_ms);
}

/* p->ctl: the decision's index; p->pull: the round. */
static void digest_settle(lattice_ops *d, pend *p, const Latdata__Resp *rs)
{
    struct ops_restart *x = d->restart;
    if (!x || x->phase != 2 || p->pull != x->round) return;
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
    struct ops_restart *x = d->restart;
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
    struct ops_restart *x = d->restart;
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
        dc->derived = !keep_decode(dc, c->restore_keep, c->n_restore_keep);
        derived += dc->derived;
        x->n_dec++;
    }
    x->phase = 2;
    x->started_ms = lt_mono_ms();
    LT_LOG(LT_WARN, "data", "whole-grid restart: this node coordinates now and takes over restoring %zu caches "
           "(%s)", x->n_dec, derived ? "the owners' copies are ranked by their digests" : "the decision's kept copies");
}

bool restart_restoring_tick(lattice_ops *d, uint64_t now)
{
    struct ops_restart *x = d->restart;
    if (!x || !lattice_meta_is_coordinator(d->meta) || !lattice_meta_valid(d->meta)) return false;
    if (x->publish) { /* a round ended it (its last digest came in) */
        x->publish = false;
        return true;
    }
    if (x->phase != 2 && !x->n_dec) take_over(d);
    if (x->phase != 2 || x->round_left || now < x->last_round + ROUND_MS) return false;
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
    struct ops_restart *x = d->restart;
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
    w_u64(&s->w, it->key_len);
    w_u64(&s->w, it->value_len);
    w_u64(&s->w, it->expire_ms);
    w_u64(&s->w, it->version);
    w_put(&s->w, it->key, it->key_len);
    w_put(&s->w, it->value, it->value_len);
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
    struct ops_restart *x = d->restart;
    lt_persist *ps = wal_persist(d);
    if (!x || !ps) return true;
    char line[LATTICE_CACHE_NAME_MAX + 16];
    snprintf(line, sizeof line, "%s %u\n", name, p);
    if (reloading(x->reloading, name, p)) return true;
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

void restart_reloads_end(lattice_ops *d) { if (d->restart && d->restart->reloading) d->restart->reload_done_due = true; }

void restart_tick_durable(lattice_ops *d)
{
    struct ops_restart *x = d->restart;
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
        uint64_t kl = r_u64(&r), vl = r_u64(&r), exp = r_u64(&r), ver = r_u64(&r);
        const uint8_t *k = kl && kl <= r.n ? r_bytes(&r, kl) : NULL;
        const uint8_t *v = !r.bad && vl <= r.n - r.at ? r_bytes(&r, vl) : NULL;
        if (!k || (!v && vl) || r.bad) {
            r.bad = true;
            break;
        }
        lattice_store_entry e = {p, k, kl, v ? v : (const uint8_t *)"", vl, exp, ver};
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

/* ------------------------------------------------------------ lifecycle */

lattice_status restart_create(lattice_ops *d, int64_t wait_ms)
{
    d->restart = lt_calloc(1, sizeof *d->restart);
    if (!d->restart) return LATTICE_ERR_NOMEM;
    d->restart->wait_ms = wait_ms;
    return LATTICE_OK;
}

static void forget(struct ops_restart *x)
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
    struct ops_restart *x = d->restart;
    if (!x || (x->phase != 1 && x->phase != 2)) return;
    LT_LOG(LT_WARN, "data", "whole-grid restart: this node rejoined the grid as a new node; it no longer "
           "coordinates the restart (whoever coordinates decides)");
    forget(x);
    x->phase = 0;
}

void restart_free(lattice_ops *d)
{
    struct ops_restart *x = d->restart;
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
    d->restart = NULL;
}

const char *restart_phase(const lattice_ops *d)
{
    static const char *const names[] = {"none", "waiting", "restoring", "done"};
    return d->restart ? names[d->restart->phase] : "none";
}
