/*
 * setop: Redis 7.0's commands over several sets or sorted sets of one
 * partition (LATTICE_TXN_SETOP of lattice/txn.h, run by a transaction's
 * step, ops/txn.c): SINTER, SINTERSTORE, SINTERCARD, SUNION, SUNIONSTORE,
 * SDIFF, SDIFFSTORE, SMOVE (t_set.c), ZUNION, ZUNIONSTORE, ZINTER,
 * ZINTERSTORE, ZINTERCARD, ZDIFF, ZDIFFSTORE, ZRANGESTORE (t_zset.c),
 * GEOSEARCHSTORE and GEORADIUS[BYMEMBER] ... STORE (geo.c's searches).
 *
 * Each reads its sources whole through the commands of their type (SMEMBERS,
 * or ZRANGESTORE's read of every member with its score: coll.c's frame),
 * works the answer out in tables of its own, and writes a destination
 * through the commands of its type too (the key removed, then SADD or ZADD
 * of the result), so a stored set or sorted set takes the same row as one
 * built by SADD or ZADD (an intset's order, a sorted set's).  What it
 * writes is handed to wrote as it happens: the rows replicate, never the
 * command.  The size of the new row is checked against the cache's
 * max_value_bytes before anything changes.
 *
 * Redis's order of checks is kept: the keys' types (WRONGTYPE) before the
 * options of ZUNIONSTORE and its kin, the options before the key for
 * ZRANGESTORE (zrange's own parser).  Results in Redis's order where Redis
 * has one: an integer set of at most 512 members ascending (an intset),
 * a sorted set by score then member; another set in the order its members
 * were found (Redis's hashtable order is arbitrary).
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll_int.h"
#include "lattice/alloc.h"
#include "lattice/txn.h"

#define INTSET_MAX 512 /* Redis's set-max-intset-entries default */
#define ERR_LIMIT "ERR LIMIT can't be negative"
#define ERR_WEIGHT "ERR weight value is not a float"

enum { AGG_SUM, AGG_MIN, AGG_MAX };
enum { OP_UNION, OP_INTER, OP_DIFF };

typedef struct mem {
    const char *p;
    size_t len;
    double score;
} mem;

/* One source: its members (bytes in buf) with their scores (1 for a set's). */
typedef struct src {
    mem *v;
    size_t n;
    char *buf;
    int type;      /* lattice_value_type + 1; 0 absent */
    size_t key;    /* the argument that named it: the same key twice is the same source */
    double weight;
    coll_index ix; /* of v, when lookups pay for it */
} src;

/* One command's run. */
typedef struct run {
    lattice_meta_cache *c;
    uint32_t partition;
    exec_scratch *s;
    lattice_op_result *r;
    exec_wrote_fn wrote;
    void *arg;
    lattice_coll_arg *a; /* its arguments */
    size_t n;
    src *src;
    size_t nsrc;
    mem *out; /* the result */
    size_t nout, cap;
    coll_index oix; /* of out (a union's accumulator) */
} run;

static coll_bytes mkey(const void *tab, size_t i)
{
    const mem *v = tab;
    return (coll_bytes){v[i].p, v[i].len};
}

static bool nomem(run *u)
{
    u->r->status = LATTICE_ERR_NOMEM;
    return false;
}

/* exec_coll of cmd on key with args a[0..n): r->value its reply; false
 * (u->r->status) when it failed as a whole. */
static bool coll(run *u, int cmd, const lattice_coll_arg *key, const lattice_coll_arg *a, size_t n, repl_out *w)
{
    size_t len = lattice_coll_packed_len(a, n);
    unsigned char *p = lt_malloc(len);
    if (!p || lattice_coll_pack(p, len, a, n) != len) {
        lt_free(p);
        return nomem(u);
    }
    exec_in in = {lattice_coll_is_write(cmd) ? LATTICE_OP_COLL_WRITE : LATTICE_OP_COLL_READ, 0, u->partition, key->ptr,
                  key->len, p, len, cmd, 0};
    repl_out none;
    exec_coll(u->c, &in, u->s, u->r, w ? w : &none);
    lt_free(p);
    return u->r->status == LATTICE_OK;
}

/* The first element of the last reply. */
static bool reply_head(run *u, lattice_coll_elem *e, size_t *off)
{
    *off = 0;
    if (lattice_coll_reply_next(u->r->value, u->r->value_len, off, e) == 1) return true;
    u->r->status = LATTICE_ERR_PROTO;
    return false;
}

/* The last reply's members (scored: each followed by its score), whose
 * header h ended at off, copied into sr. */
static bool take_members(run *u, src *sr, const lattice_coll_elem *h, size_t off, bool scored)
{
    sr->n = h->num > 0 ? (size_t)h->num : 0;
    if (!(sr->v = lt_malloc((sr->n ? sr->n : 1) * sizeof *sr->v)) ||
        !(sr->buf = lt_malloc(u->r->value_len ? u->r->value_len : 1)))
        return nomem(u);
    if (u->r->value_len) memcpy(sr->buf, u->r->value, u->r->value_len);
    const char *base = u->r->value;
    for (size_t i = 0; i < sr->n; i++) {
        lattice_coll_elem m, sc;
        if (lattice_coll_reply_next(base, u->r->value_len, &off, &m) != 1 || m.type != '$' ||
            (scored && (lattice_coll_reply_next(base, u->r->value_len, &off, &sc) != 1 || sc.type != ','))) {
            u->r->status = LATTICE_ERR_PROTO;
            return false;
        }
        sr->v[i] = (mem){sr->buf + (m.ptr - base), m.len, 1.0};
        if (scored) {
            char t[64];
            snprintf(t, sizeof t, "%.*s", (int)(sc.len < 63 ? sc.len : 63), sc.ptr);
            sr->v[i].score = strtod(t, NULL); /* "%.17g", inf, -inf: exact */
        }
    }
    return true;
}

/* Reads a source of type t (a set or a sorted set) into sr: every member
 * (with its score), copied out of the reply. */
static bool load(run *u, src *sr, const lattice_coll_arg *key)
{
    bool zset = sr->type == LATTICE_TYPE_ZSET + 1;
    lattice_coll_arg all[2] = {{"0", 1}, {"-1", 2}};
    if (!coll(u, zset ? LATTICE_COLL_ZRANGESTORE : LATTICE_COLL_SMEMBERS, key, all, zset ? 2 : 0, NULL)) return false;
    lattice_coll_elem h;
    size_t off;
    if (!reply_head(u, &h, &off)) return false;
    if (h.type == '-') { /* WRONGTYPE comes as the status; anything else is not ours */
        u->r->status = LATTICE_ERR_PROTO;
        return false;
    }
    return take_members(u, sr, &h, off, zset);
}

/* The types of keys a[first .. first+n) (sets only, or sets and sorted
 * sets): WRONGTYPE at the first of another, as Redis checks them all
 * before it reads one. */
static bool types_of(run *u, size_t first, size_t n, bool zsets_too)
{
    if (!(u->src = lt_calloc(n, sizeof *u->src))) return nomem(u);
    u->nsrc = n;
    for (size_t i = 0; i < n; i++) {
        const lattice_coll_arg *k = &u->a[first + i];
        int st, t = coll_live_type(u->c, u->partition, k->ptr, k->len, &st);
        if (st != LATTICE_OK) {
            u->r->status = st;
            return false;
        }
        if (t && t != LATTICE_TYPE_SET + 1 && !(zsets_too && t == LATTICE_TYPE_ZSET + 1)) {
            u->r->status = LATTICE_ERR_WRONGTYPE;
            u->r->flags |= LATTICE_OP_R_FOUND | LATTICE_OP_R_TYPE_FLAGS(t - 1);
            return false;
        }
        src *sr = &u->src[i];
        sr->type = t;
        sr->weight = 1.0;
        sr->key = first + i;
        for (size_t j = 0; j < i; j++) /* the same key: one source (its index) */
            if (u->a[first + j].len == k->len && !memcmp(u->a[first + j].ptr, k->ptr, k->len)) sr->key = first + j;
    }
    return true;
}

static bool load_all(run *u)
{
    for (size_t i = 0; i < u->nsrc; i++)
        if (u->src[i].type && !load(u, &u->src[i], &u->a[u->src[i].key])) return false;
    return true;
}

/* Every source after the first indexed, where looking each member of the
 * first up in it pays for one. */
static bool index_others(run *u)
{
    size_t lookups = u->nsrc ? u->src[0].n : 0;
    coll_ctx x = {.s = u->s, .r = u->r};
    for (size_t i = 1; i < u->nsrc; i++) {
        src *sr = &u->src[i];
        if (coll_index_worth(lookups, sr->n) && !coll_index_build(&x, &sr->ix, sr->v, sr->n, sr->n, mkey)) return false;
    }
    return true;
}

/* The member's place in sr, or sr->n. */
static size_t find(const src *sr, const char *p, size_t len)
{
    return coll_index_find(&sr->ix, sr->v, sr->n, p, len, mkey);
}

static bool out_add(run *u, const mem *m)
{
    if (u->nout == u->cap) {
        size_t nc = u->cap ? 2 * u->cap : 16;
        mem *q = lt_realloc(u->out, nc * sizeof *q);
        if (!q) return nomem(u);
        u->out = q;
        u->cap = nc;
    }
    u->out[u->nout++] = *m;
    return true;
}

/* Sources by size, smallest first, stable (glibc's qsort of Redis's
 * zuiCompareByCardinality: a merge sort). */
static void by_size(src *v, size_t n)
{
    for (size_t i = 1; i < n; i++) {
        src t = v[i];
        size_t j = i;
        for (; j > 0 && v[j - 1].n > t.n; j--) v[j] = v[j - 1];
        v[j] = t;
    }
}

/* ---- replies and the destination ---- */

static coll_ctx reply_begin(run *u)
{
    u->s->reply_len = 0;
    u->r->flags = 0; /* the flags and count of the reads and writes made */
    u->r->num = 0;
    u->r->value = NULL;
    u->r->value_len = 0;
    return (coll_ctx){.c = u->c, .s = u->s, .r = u->r};
}

static void reply_end(run *u, coll_ctx *x)
{
    if (x->nomem) u->r->status = LATTICE_ERR_NOMEM;
    u->r->value = u->s->reply;
    u->r->value_len = u->s->reply_len;
}

static void reply_error(run *u, const char *e)
{
    coll_ctx x = reply_begin(u);
    coll_error(&x, e);
    reply_end(u, &x);
}

static void reply_int(run *u, long long v)
{
    coll_ctx x = reply_begin(u);
    coll_int(&x, v);
    reply_end(u, &x);
}

static int by_int(const void *a, const void *b)
{
    int64_t x = 0, y = 0;
    exec_parse_i64(((const mem *)a)->p, ((const mem *)a)->len, &x);
    exec_parse_i64(((const mem *)b)->p, ((const mem *)b)->len, &y);
    return (x > y) - (x < y);
}

/* A set of integers Redis would keep as an intset: listed ascending. */
static void intset_order(run *u)
{
    if (u->nout > INTSET_MAX) return;
    for (size_t i = 0; i < u->nout; i++) {
        int64_t v;
        if (!exec_parse_i64(u->out[i].p, u->out[i].len, &v)) return;
    }
    if (u->nout > 1) qsort(u->out, u->nout, sizeof *u->out, by_int);
}

static int by_score(const void *pa, const void *pb)
{
    const mem *a = pa, *b = pb;
    if (a->score != b->score) return a->score < b->score ? -1 : 1;
    size_t l = a->len < b->len ? a->len : b->len;
    int c = l ? memcmp(a->p, b->p, l) : 0;
    return c ? c : (a->len > b->len) - (a->len < b->len);
}

static void reply_members(run *u, bool zset, bool withscores)
{
    coll_ctx x = reply_begin(u);
    if (!zset) coll_set(&x, u->nout);
    else if (withscores) coll_pairs(&x, u->nout);
    else coll_array(&x, u->nout);
    for (size_t i = 0; i < u->nout; i++) {
        coll_bulk(&x, u->out[i].p, u->out[i].len);
        if (withscores) coll_double(&x, u->out[i].score);
    }
    reply_end(u, &x);
}

/* The key at argument i removed when it is live. */
static bool remove_key(run *u, size_t i)
{
    exec_in in = {LATTICE_OP_REMOVE, 0, u->partition, u->a[i].ptr, u->a[i].len, NULL, 0, 0, 0};
    repl_out w;
    int st = exec_remove_entry(u->c, &in, &w);
    if (st == LATTICE_ERR_NOT_FOUND) return true;
    if (st != LATTICE_OK) {
        u->r->status = st;
        return false;
    }
    u->wrote(u->arg, in.key, in.key_len, &w);
    return true;
}

/* Writes the result as the key at argument d (replacing whatever it held;
 * removed when the result is empty) and answers its size. */
static void store(run *u, size_t d, bool zset)
{
    size_t body = 0;
    for (size_t i = 0; i < u->nout; i++) body += (zset ? 8 : 0) + coll_item_len(u->out[i].len);
    if (u->nout && coll_row_size(u->nout, body) > u->c->cfg.max_value_bytes) {
        u->r->status = LATTICE_ERR_TOO_LARGE; /* nothing changed */
        return;
    }
    if (!remove_key(u, d)) return;
    if (u->nout) {
        size_t per = zset ? 2 : 1;
        lattice_coll_arg *a = lt_malloc(u->nout * per * sizeof *a);
        char (*sc)[32] = zset ? lt_malloc(u->nout * sizeof *sc) : NULL;
        if (!a || (zset && !sc)) {
            lt_free(a);
            lt_free(sc);
            nomem(u);
            return;
        }
        for (size_t i = 0; i < u->nout; i++) {
            if (zset) {
                const double v = u->out[i].score;
                int k = isinf(v) ? snprintf(sc[i], sizeof sc[i], "%s", v > 0 ? "inf" : "-inf")
                                 : snprintf(sc[i], sizeof sc[i], "%.17g", v);
                a[2 * i] = (lattice_coll_arg){sc[i], (size_t)k};
            }
            a[per * i + per - 1] = (lattice_coll_arg){u->out[i].p, u->out[i].len};
        }
        repl_out w = {0};
        bool ok = coll(u, zset ? LATTICE_COLL_ZADD : LATTICE_COLL_SADD, &u->a[d], a, u->nout * per, &w);
        lt_free(a);
        lt_free(sc);
        if (!ok) return;
        if (w.needed) u->wrote(u->arg, u->a[d].ptr, u->a[d].len, &w);
    }
    reply_int(u, (long long)u->nout);
}

/* ---- sets (t_set.c) ---- */

/* SINTER, SINTERSTORE, SINTERCARD: a missing key is an empty set. */
static void sinter(run *u, size_t first, size_t n, int op)
{
    long long limit = 0;
    if (op == LATTICE_SETOP_SINTERCARD) { /* numkeys was the RESP server's; LIMIT n after the keys */
        for (size_t j = first + n; j < u->n; j++) {
            if (coll_is(&u->a[j], "limit") && j + 1 < u->n) {
                j++;
                if (!coll_arg_ll(&u->a[j], &limit) || limit < 0) {
                    reply_error(u, ERR_LIMIT);
                    return;
                }
            } else {
                reply_error(u, COLL_ERR_SYNTAX);
                return;
            }
        }
    }
    if (!types_of(u, first, n, false) || !load_all(u)) return;
    by_size(u->src, u->nsrc);
    if (!index_others(u)) return;
    src *s0 = &u->src[0];
    for (size_t k = 0; k < s0->n; k++) {
        size_t i = 1;
        for (; i < u->nsrc; i++)
            if (u->src[i].key != s0->key && find(&u->src[i], s0->v[k].p, s0->v[k].len) == u->src[i].n) break;
        if (i < u->nsrc) continue;
        if (!out_add(u, &s0->v[k])) return;
        if (op == LATTICE_SETOP_SINTERCARD && limit && u->nout >= (size_t)limit) break;
    }
    if (op == LATTICE_SETOP_SINTERCARD) {
        reply_int(u, (long long)u->nout);
        return;
    }
    intset_order(u);
    if (op == LATTICE_SETOP_SINTERSTORE) {
        store(u, 0, false);
        return;
    }
    reply_members(u, false, false);
}

/* SUNION, SUNIONSTORE, SDIFF, SDIFFSTORE. */
static void sunion_diff(run *u, size_t first, size_t n, bool diff, bool dest)
{
    if (!types_of(u, first, n, false) || !load_all(u) || (diff && !index_others(u))) return;
    size_t total = 0;
    for (size_t i = 0; i < u->nsrc; i++) total += u->src[i].n;
    coll_ctx x = {.s = u->s, .r = u->r};
    if (total && !coll_index_build(&x, &u->oix, NULL, 0, total, mkey)) return;
    for (size_t i = 0; i < u->nsrc; i++) {
        const src *sr = &u->src[i];
        if (diff && i > 0) break;
        for (size_t k = 0; k < sr->n; k++) {
            if (coll_index_find(&u->oix, u->out, u->nout, sr->v[k].p, sr->v[k].len, mkey) < u->nout) continue;
            if (diff) { /* in no other set (the first set named again: in it) */
                size_t j = 1;
                for (; j < u->nsrc; j++)
                    if (u->src[j].key == sr->key || find(&u->src[j], sr->v[k].p, sr->v[k].len) < u->src[j].n) break;
                if (j < u->nsrc) continue;
            }
            if (!out_add(u, &sr->v[k])) return;
            coll_index_add(&u->oix, u->out, u->nout - 1, mkey);
        }
    }
    intset_order(u);
    if (dest) {
        store(u, 0, false);
        return;
    }
    reply_members(u, false, false);
}

/* SMOVE source destination member (smoveCommand). */
static void smove(run *u)
{
    const lattice_coll_arg *sk = &u->a[0], *dk = &u->a[1], *m = &u->a[2];
    int st, ts = coll_live_type(u->c, u->partition, sk->ptr, sk->len, &st), td = 0;
    if (st == LATTICE_OK && ts) td = coll_live_type(u->c, u->partition, dk->ptr, dk->len, &st);
    if (st != LATTICE_OK) {
        u->r->status = st;
        return;
    }
    if (!ts) {
        reply_int(u, 0);
        return;
    }
    int bad = ts != LATTICE_TYPE_SET + 1 ? ts : td && td != LATTICE_TYPE_SET + 1 ? td : 0;
    if (bad) {
        u->r->status = LATTICE_ERR_WRONGTYPE;
        u->r->flags |= LATTICE_OP_R_FOUND | LATTICE_OP_R_TYPE_FLAGS(bad - 1);
        return;
    }
    bool same = sk->len == dk->len && !memcmp(sk->ptr, dk->ptr, sk->len);
    repl_out w = {0};
    if (!coll(u, same ? LATTICE_COLL_SISMEMBER : LATTICE_COLL_SREM, sk, m, 1, &w)) return;
    lattice_coll_elem e;
    size_t off;
    if (!reply_head(u, &e, &off)) return;
    if (same || e.type != ':' || e.num == 0) {
        reply_int(u, e.type == ':' && e.num);
        return;
    }
    if (w.needed) u->wrote(u->arg, sk->ptr, sk->len, &w);
    w = (repl_out){0};
    if (!coll(u, LATTICE_COLL_SADD, dk, m, 1, &w)) return;
    if (w.needed) u->wrote(u->arg, dk->ptr, dk->len, &w);
    reply_int(u, 1);
}

/* ---- sorted sets (t_zset.c) ---- */

static void aggregate(double *target, double v, int agg)
{
    if (agg == AGG_SUM) {
        *target += v;
        if (isnan(*target)) *target = 0.0; /* inf + -inf */
    } else if (agg == AGG_MIN) {
        *target = v < *target ? v : *target;
    } else {
        *target = v > *target ? v : *target;
    }
}

/* ZUNION / ZINTER / ZDIFF [STORE], ZINTERCARD
 * (zunionInterDiffGenericCommand): the keys' types, then the options. */
static void zsetop(run *u, size_t first, size_t n, int op, bool dest, bool card)
{
    if (!types_of(u, first, n, true)) return;
    int agg = AGG_SUM;
    bool withscores = false;
    long long limit = 0;
    for (size_t j = first + n; j < u->n;) {
        size_t left = u->n - j;
        if (op != OP_DIFF && !card && left >= n + 1 && coll_is(&u->a[j], "weights")) {
            j++;
            for (size_t i = 0; i < n; i++, j++) {
                int ok = coll_parse_double(&u->a[j], &u->src[i].weight);
                if (ok < 0) {
                    nomem(u);
                    return;
                }
                if (!ok) {
                    reply_error(u, ERR_WEIGHT);
                    return;
                }
            }
        } else if (op != OP_DIFF && !card && left >= 2 && coll_is(&u->a[j], "aggregate")) {
            const lattice_coll_arg *a = &u->a[j + 1];
            agg = coll_is(a, "sum") ? AGG_SUM : coll_is(a, "min") ? AGG_MIN : coll_is(a, "max") ? AGG_MAX : -1;
            if (agg < 0) {
                reply_error(u, COLL_ERR_SYNTAX);
                return;
            }
            j += 2;
        } else if (!dest && !card && coll_is(&u->a[j], "withscores")) {
            withscores = true;
            j++;
        } else if (card && left >= 2 && coll_is(&u->a[j], "limit")) {
            if (!coll_arg_ll(&u->a[j + 1], &limit) || limit < 0) {
                reply_error(u, ERR_LIMIT);
                return;
            }
            j += 2;
        } else {
            reply_error(u, COLL_ERR_SYNTAX);
            return;
        }
    }
    if (!load_all(u)) return;
    size_t total = 0;
    for (size_t i = 0; i < n; i++) total += u->src[i].n;
    if (op != OP_DIFF) by_size(u->src, n);
    src *s0 = &u->src[0];
    coll_ctx x = {.s = u->s, .r = u->r};
    if (op != OP_UNION && !index_others(u)) return;
    if (op == OP_INTER) {
        for (size_t k = 0; k < s0->n; k++) {
            double score = s0->weight * s0->v[k].score;
            if (isnan(score)) score = 0;
            size_t i = 1;
            for (; i < n; i++) {
                size_t at = u->src[i].key == s0->key ? k : find(&u->src[i], s0->v[k].p, s0->v[k].len);
                if (at == u->src[i].n) break;
                aggregate(&score, u->src[i].v[at].score * u->src[i].weight, agg);
            }
            if (i < n) continue;
            mem m = {s0->v[k].p, s0->v[k].len, score};
            if (!out_add(u, &m)) return;
            if (card && limit && u->nout >= (size_t)limit) break;
        }
    } else if (op == OP_UNION) {
        if (total && !coll_index_build(&x, &u->oix, NULL, 0, total, mkey)) return;
        for (size_t i = 0; i < n; i++) {
            const src *sr = &u->src[i];
            for (size_t k = 0; k < sr->n; k++) {
                double score = sr->weight * sr->v[k].score;
                if (isnan(score)) score = 0;
                size_t at = coll_index_find(&u->oix, u->out, u->nout, sr->v[k].p, sr->v[k].len, mkey);
                if (at < u->nout) {
                    aggregate(&u->out[at].score, score, agg);
                    continue;
                }
                mem m = {sr->v[k].p, sr->v[k].len, score};
                if (!out_add(u, &m)) return;
                coll_index_add(&u->oix, u->out, u->nout - 1, mkey);
            }
        }
    } else { /* DIFF: the first's members in no other, with their scores */
        for (size_t k = 0; k < s0->n; k++) {
            size_t i = 1;
            for (; i < n; i++)
                if (u->src[i].key == s0->key || find(&u->src[i], s0->v[k].p, s0->v[k].len) < u->src[i].n) break;
            if (i < n) continue;
            if (!out_add(u, &s0->v[k])) return;
        }
    }
    if (card) {
        reply_int(u, (long long)u->nout);
        return;
    }
    if (u->nout > 1) qsort(u->out, u->nout, sizeof *u->out, by_score);
    if (dest) {
        store(u, 0, true);
        return;
    }
    reply_members(u, true, withscores);
}

/* ZRANGESTORE dst src min max [BYSCORE|BYLEX] [REV] [LIMIT offset count],
 * GEOSEARCHSTORE dst src ..., GEORADIUS[BYMEMBER] ... STORE|STOREDIST dst
 * (args[0] dst, then the command's own arguments from the source on): the
 * source's read of what to store (zrange's parser and range, WRONGTYPE
 * after its errors; geo.c's search), pairs of member and score, stored. */
static void read_and_store(run *u, int cmd)
{
    if (!coll(u, cmd, &u->a[1], u->a + 2, u->n - 2, NULL)) return;
    lattice_coll_elem h;
    size_t off;
    if (!reply_head(u, &h, &off)) return;
    if (h.type == '-') { /* its error is the reply */
        char m[256];
        snprintf(m, sizeof m, "%.*s", (int)(h.len < 255 ? h.len : 255), h.ptr);
        reply_error(u, m);
        return;
    }
    if (h.type != '&' && !(h.type == '*' && h.num == 0)) { /* an empty source: "*0" */
        u->r->status = LATTICE_ERR_PROTO;
        return;
    }
    if (!(u->src = lt_calloc(1, sizeof *u->src))) {
        nomem(u);
        return;
    }
    u->nsrc = 1;
    src *sr = &u->src[0];
    sr->type = LATTICE_TYPE_ZSET + 1;
    if (!take_members(u, sr, &h, off, true)) return;
    for (size_t i = 0; i < sr->n; i++)
        if (!out_add(u, &sr->v[i])) return;
    if (u->nout > 1) qsort(u->out, u->nout, sizeof *u->out, by_score); /* REV came reversed */
    store(u, 0, true);
}

bool exec_setop_writes(int64_t delta)
{
    switch (LATTICE_TXN_SETOP_OP(delta)) {
    case LATTICE_SETOP_SINTERSTORE:
    case LATTICE_SETOP_SUNIONSTORE:
    case LATTICE_SETOP_SDIFFSTORE:
    case LATTICE_SETOP_SMOVE:
    case LATTICE_SETOP_ZUNIONSTORE:
    case LATTICE_SETOP_ZINTERSTORE:
    case LATTICE_SETOP_ZDIFFSTORE:
    case LATTICE_SETOP_ZRANGESTORE:
    case LATTICE_SETOP_GEORADIUS:
    case LATTICE_SETOP_GEORADIUSBYMEMBER:
    case LATTICE_SETOP_GEOSEARCHSTORE: return true;
    default: return false;
    }
}

void exec_setop(lattice_meta_cache *c, uint32_t partition, const void *args, size_t args_len, int64_t delta,
                exec_scratch *s, lattice_op_result *r, exec_wrote_fn wrote, void *arg)
{
    memset(r, 0, sizeof *r);
    run u = {c, partition, s, r, wrote, arg, NULL, 0, NULL, 0, NULL, 0, 0, {0}};
    size_t n, off = 4;
    if (!lattice_coll_unpacked_count(args, args_len, &n)) {
        r->status = LATTICE_ERR_INVAL;
        return;
    }
    if (!(u.a = lt_malloc((n ? n : 1) * sizeof *u.a))) {
        r->status = LATTICE_ERR_NOMEM;
        return;
    }
    for (size_t i = 0; i < n; i++) u.a[i] = lattice_coll_unpack_next(args, &off);
    u.n = n;
    size_t first = LATTICE_TXN_SETOP_FIRST(delta), nk = LATTICE_TXN_SETOP_KEYS(delta);
    int op = LATTICE_TXN_SETOP_OP(delta);
    switch (op) {
    case LATTICE_SETOP_SINTER:
    case LATTICE_SETOP_SINTERSTORE:
    case LATTICE_SETOP_SINTERCARD: sinter(&u, first, nk, op); break;
    case LATTICE_SETOP_SUNION: sunion_diff(&u, first, nk, false, false); break;
    case LATTICE_SETOP_SUNIONSTORE: sunion_diff(&u, first, nk, false, true); break;
    case LATTICE_SETOP_SDIFF: sunion_diff(&u, first, nk, true, false); break;
    case LATTICE_SETOP_SDIFFSTORE: sunion_diff(&u, first, nk, true, true); break;
    case LATTICE_SETOP_SMOVE: n == 3 ? smove(&u) : (void)(r->status = LATTICE_ERR_INVAL); break;
    case LATTICE_SETOP_ZUNION: zsetop(&u, first, nk, OP_UNION, false, false); break;
    case LATTICE_SETOP_ZUNIONSTORE: zsetop(&u, first, nk, OP_UNION, true, false); break;
    case LATTICE_SETOP_ZINTER: zsetop(&u, first, nk, OP_INTER, false, false); break;
    case LATTICE_SETOP_ZINTERSTORE: zsetop(&u, first, nk, OP_INTER, true, false); break;
    case LATTICE_SETOP_ZINTERCARD: zsetop(&u, first, nk, OP_INTER, false, true); break;
    case LATTICE_SETOP_ZDIFF: zsetop(&u, first, nk, OP_DIFF, false, false); break;
    case LATTICE_SETOP_ZDIFFSTORE: zsetop(&u, first, nk, OP_DIFF, true, false); break;
    case LATTICE_SETOP_ZRANGESTORE:
    case LATTICE_SETOP_GEORADIUS:
    case LATTICE_SETOP_GEORADIUSBYMEMBER:
    case LATTICE_SETOP_GEOSEARCHSTORE: {
        static const int cmd[] = {[LATTICE_SETOP_ZRANGESTORE] = LATTICE_COLL_ZRANGESTORE,
                                  [LATTICE_SETOP_GEORADIUS] = LATTICE_COLL_GEORADIUS,
                                  [LATTICE_SETOP_GEORADIUSBYMEMBER] = LATTICE_COLL_GEORADIUSBYMEMBER,
                                  [LATTICE_SETOP_GEOSEARCHSTORE] = LATTICE_COLL_GEOSEARCHSTORE};
        if (n >= 2 && first == 1 && nk == 1) read_and_store(&u, cmd[op]);
        else r->status = LATTICE_ERR_INVAL;
        break;
    }
    default: r->status = LATTICE_ERR_INVAL; break;
    }
    if (r->status != LATTICE_OK) {
        r->value = NULL;
        r->value_len = 0;
    }
    for (size_t i = 0; i < u.nsrc; i++) {
        coll_index_free(&u.src[i].ix);
        lt_free(u.src[i].v);
        lt_free(u.src[i].buf);
    }
    coll_index_free(&u.oix);
    lt_free(u.src);
    lt_free(u.out);
    lt_free(u.a);
}
