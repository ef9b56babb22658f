/*
 * hash: Redis 7.0's hash commands (t_hash.c) on a value of type
 * LATTICE_TYPE_HASH, in coll.c's frame.  Each command checks its arguments
 * in Redis's order (what Redis checks before it looks the key up comes
 * first, so the errors a client sees are Redis's), then reads the key's row,
 * answers, and writes the new row (or removes the key when its last field
 * went).
 *
 * The row (docs/TYPES.md): one format byte (HASH_ROW_PAIRS), the field
 * count as a varint, then each field and its value as (varint length,
 * bytes), in insertion order - the order Redis's listpack keeps, so a small
 * hash lists its fields as Redis lists them.  Overwriting a field keeps its
 * place; a new field goes last.  Every command reads the whole row and a
 * write writes it again: O(fields) per command; a command of many fields
 * (HSET, HMGET, HDEL) finds them through a hash index built for it.
 */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/base.h"
#include "coll_int.h"
#include "lattice/alloc.h"
#include "lattice/clock.h"

#define HASH_ROW_PAIRS 1
#define HASH_LISTPACK_ENTRIES 128 /* Redis's hash-max-listpack-entries default: HSCAN answers in one go up to it */

typedef struct hpair {
    const char *f, *v;
    size_t fl, vl;
} hpair;

/* The key's pairs (x->found), in a table with room for extra more; NULL
 * with r->status set when the row is malformed or memory short. */
static hpair *decode(coll_ctx *x, size_t extra, size_t *n)
{
    coll_reader w;
    if (!coll_row_open(x, HASH_ROW_PAIRS, &w)) return NULL;
    hpair *v = coll_items(x, w.count + extra, sizeof *v);
    if (!v) {
        x->r->status = LATTICE_ERR_NOMEM;
        return NULL;
    }
    for (size_t i = 0; i < w.count; i++)
        if (!coll_row_bytes(x, &w, &v[i].f, &v[i].fl) || !coll_row_bytes(x, &w, &v[i].v, &v[i].vl)) return NULL;
    if (!coll_row_close(x, &w)) return NULL;
    *n = w.count;
    return v;
}

static coll_bytes hkey(const void *tab, size_t i)
{
    const hpair *v = tab;
    return (coll_bytes){v[i].f, v[i].fl};
}

static size_t find(const hpair *v, size_t n, const void *f, size_t fl) { return coll_index_find(NULL, v, n, f, fl, hkey); }

/* An index of v[0..n) when `lookups` of them pay for one (room for cap
 * fields); false: memory short (r->status). */
static bool index_of(coll_ctx *x, coll_index *ix, const hpair *v, size_t n, size_t lookups, size_t cap)
{
    ix->slot = NULL;
    return !coll_index_worth(lookups, n) || coll_index_build(x, ix, v, n, cap, hkey);
}

/* Writes v[0..n) as the key's row, or removes the key when n is 0. */
static bool store(coll_ctx *x, const hpair *v, size_t n)
{
    if (n == 0) return coll_remove(x);
    size_t body = 0;
    for (size_t i = 0; i < n; i++) body += coll_item_len(v[i].fl) + coll_item_len(v[i].vl);
    unsigned char *p = coll_row_start(x, HASH_ROW_PAIRS, n, body);
    if (!p) return false;
    for (size_t i = 0; i < n; i++) p = coll_item_put(coll_item_put(p, v[i].f, v[i].fl), v[i].v, v[i].vl);
    return coll_write(x, coll_row_size(n, body), LATTICE_TYPE_HASH);
}

/* Loads and decodes the key's hash (absent: none) with room for extra. */
static hpair *load(coll_ctx *x, size_t extra, size_t *n)
{
    *n = 0;
    if (!coll_load(x, LATTICE_TYPE_HASH)) return NULL;
    return decode(x, extra, n);
}

/* ---- writes ---- */

/* HSET / HMSET field value [field value ...]: a field given twice takes its
 * last value and counts once. */
static void hset(coll_ctx *x)
{
    if (x->argc % 2) {
        coll_arity_error(x);
        return;
    }
    size_t n, created = 0;
    hpair *v = load(x, x->argc / 2, &n);
    coll_index ix;
    if (!v || !index_of(x, &ix, v, n, x->argc / 2, n + x->argc / 2)) return;
    for (size_t i = 0; i < x->argc; i += 2) {
        const lattice_coll_arg *f = &x->argv[i], *val = &x->argv[i + 1];
        size_t k = coll_index_find(&ix, v, n, f->ptr, f->len, hkey);
        if (k == n) {
            v[n++] = (hpair){f->ptr, NULL, f->len, 0};
            if (ix.slot) coll_index_add(&ix, v, k, hkey);
            created++;
        }
        v[k].v = val->ptr;
        v[k].vl = val->len;
    }
    coll_index_free(&ix);
    if (!store(x, v, n)) return;
    x->r->num = (int64_t)created;
    if (x->cmd == LATTICE_COLL_HMSET) coll_simple(x, "OK");
    else coll_int(x, (long long)created);
}

static void hsetnx(coll_ctx *x)
{
    size_t n;
    hpair *v = load(x, 1, &n);
    if (!v) return;
    const lattice_coll_arg *f = &x->argv[0], *val = &x->argv[1];
    if (find(v, n, f->ptr, f->len) < n) {
        coll_int(x, 0);
        return;
    }
    v[n++] = (hpair){f->ptr, val->ptr, f->len, val->len};
    if (!store(x, v, n)) return;
    x->r->num = 1;
    coll_int(x, 1);
}

static void hdel(coll_ctx *x)
{
    size_t n, deleted = 0;
    hpair *v = load(x, 0, &n);
    coll_index ix;
    if (!v || !index_of(x, &ix, v, n, x->argc, n)) return;
    for (size_t i = 0; i < x->argc; i++) {
        size_t k = coll_index_find(&ix, v, n, x->argv[i].ptr, x->argv[i].len, hkey);
        if (k == n) continue;
        v[k].fl = SIZE_MAX; /* gone: no lookup matches it; compacted below */
        deleted++;
    }
    coll_index_free(&ix);
    size_t kept = 0;
    for (size_t i = 0; i < n; i++)
        if (v[i].fl != SIZE_MAX) v[kept++] = v[i];
    n = kept;
    if (deleted && !store(x, v, n)) return;
    x->r->num = (int64_t)deleted;
    coll_int(x, (long long)deleted);
}

/* The field's value as a new pair of v (added last when absent). */
static void put_field(hpair *v, size_t *n, const lattice_coll_arg *f, const char *val, size_t vl)
{
    size_t k = find(v, *n, f->ptr, f->len);
    if (k == *n) v[(*n)++] = (hpair){f->ptr, NULL, f->len, 0};
    v[k].v = val;
    v[k].vl = vl;
}

static void hincrby(coll_ctx *x)
{
    long long incr, cur = 0;
    if (!coll_arg_ll(&x->argv[1], &incr)) {
        coll_error(x, COLL_ERR_NOT_INT);
        return;
    }
    size_t n;
    hpair *v = load(x, 1, &n);
    if (!v) return;
    size_t k = find(v, n, x->argv[0].ptr, x->argv[0].len);
    if (k < n && !coll_arg_ll(&(lattice_coll_arg){v[k].v, v[k].vl}, &cur)) {
        coll_error(x, "ERR hash value is not an integer");
        return;
    }
    if ((incr < 0 && cur < 0 && incr < LLONG_MIN - cur) || (incr > 0 && cur > 0 && incr > LLONG_MAX - cur)) {
        coll_error(x, "ERR increment or decrement would overflow");
        return;
    }
    char buf[24];
    cur += incr;
    int len = snprintf(buf, sizeof buf, "%lld", cur);
    put_field(v, &n, &x->argv[0], buf, (size_t)len);
    if (!store(x, v, n)) return;
    x->r->num = cur;
    coll_int(x, cur);
}

static void hincrbyfloat(coll_ctx *x)
{
    long double incr, cur = 0;
    if (!exec_parse_ld(x->argv[1].ptr, x->argv[1].len, &incr)) {
        coll_error(x, "ERR value is not a valid float");
        return;
    }
    if (isnan(incr) || isinf(incr)) {
        coll_error(x, "ERR value is NaN or Infinity");
        return;
    }
    size_t n;
    hpair *v = load(x, 1, &n);
    if (!v) return;
    size_t k = find(v, n, x->argv[0].ptr, x->argv[0].len);
    if (k < n && !exec_parse_ld(v[k].v, v[k].vl, &cur)) {
        coll_error(x, "ERR hash value is not a float");
        return;
    }
    cur += incr;
    if (isnan(cur) || isinf(cur)) {
        coll_error(x, "ERR increment would produce NaN or Infinity");
        return;
    }
    static __thread char buf[EXEC_LD_TEXT_MAX];
    size_t len = exec_format_ld(buf, sizeof buf, cur);
    put_field(v, &n, &x->argv[0], buf, len);
    if (!store(x, v, n)) return;
    coll_bulk(x, buf, len);
}

/* ---- reads ---- */

static void hget(coll_ctx *x)
{
    size_t n;
    hpair *v = load(x, 0, &n);
    if (!v) return;
    size_t k = find(v, n, x->argv[0].ptr, x->argv[0].len);
    if (k < n) coll_bulk(x, v[k].v, v[k].vl);
    else coll_null(x);
}

static void hmget(coll_ctx *x)
{
    size_t n;
    hpair *v = load(x, 0, &n);
    coll_index ix;
    if (!v || !index_of(x, &ix, v, n, x->argc, n)) return;
    coll_array(x, x->argc);
    for (size_t i = 0; i < x->argc; i++) {
        size_t k = coll_index_find(&ix, v, n, x->argv[i].ptr, x->argv[i].len, hkey);
        if (k < n) coll_bulk(x, v[k].v, v[k].vl);
        else coll_null(x);
    }
    coll_index_free(&ix);
}

/* HLEN, HSTRLEN, HEXISTS: one integer. */
static void hcount(coll_ctx *x)
{
    size_t n;
    hpair *v = load(x, 0, &n);
    if (!v) return;
    if (x->cmd == LATTICE_COLL_HLEN) {
        coll_int(x, (long long)n);
        return;
    }
    size_t k = find(v, n, x->argv[0].ptr, x->argv[0].len);
    if (x->cmd == LATTICE_COLL_HEXISTS) coll_int(x, k < n);
    else coll_int(x, k < n ? (long long)v[k].vl : 0);
}

/* HKEYS, HVALS, HGETALL (a map). */
static void hall(coll_ctx *x)
{
    size_t n;
    hpair *v = load(x, 0, &n);
    if (!v) return;
    bool keys = x->cmd != LATTICE_COLL_HVALS, vals = x->cmd != LATTICE_COLL_HKEYS;
    if (keys && vals) coll_map(x, n);
    else coll_array(x, n);
    for (size_t i = 0; i < n; i++) {
        if (keys) coll_bulk(x, v[i].f, v[i].fl);
        if (vals) coll_bulk(x, v[i].v, v[i].vl);
    }
}

static void rand_pair(coll_ctx *x, const hpair *p, bool withvalues)
{
    coll_bulk(x, p->f, p->fl);
    if (withvalues) coll_bulk(x, p->v, p->vl);
}

/* HRANDFIELD [count [WITHVALUES]] (hrandfieldCommand): without a count one
 * field or nil; a negative count that many picks, repeats allowed; a
 * positive one distinct fields, the whole hash when it has no more. */
static void hrandfield(coll_ctx *x)
{
    long long l;
    bool withvalues, counted;
    if (!coll_rand_args(x, "withvalues", &counted, &l, &withvalues)) return;
    size_t n;
    hpair *v = load(x, 0, &n);
    if (!v) return;
    if (!counted) {
        size_t k = n ? (size_t)(coll_rand() % n) : 0;
        if (!n) coll_null(x);
        else coll_bulk(x, v[k].f, v[k].fl);
        return;
    }
    if (!n || l == 0) {
        coll_array(x, 0);
        return;
    }
    if (l < 0 || l == 1) {
        unsigned long long count = l < 0 ? (unsigned long long)-l : 1;
        if (withvalues) coll_pairs(x, count);
        else coll_array(x, count);
        for (unsigned long long i = 0; i < count && !x->nomem; i++) rand_pair(x, &v[coll_rand() % n], withvalues);
        return;
    }
    size_t count = (unsigned long long)l >= n ? n : (size_t)l;
    if (withvalues) coll_pairs(x, count);
    else coll_array(x, count);
    if (count == n) {
        for (size_t i = 0; i < n; i++) rand_pair(x, &v[i], withvalues);
        return;
    }
    /* A partial shuffle of the table: its first count entries. */
    for (size_t i = 0; i < count; i++) {
        size_t j = i + (size_t)(coll_rand() % (n - i));
        hpair t = v[i];
        v[i] = v[j];
        v[j] = t;
        rand_pair(x, &v[i], withvalues);
    }
}

/* HSCAN cursor [MATCH pattern] [COUNT count] (hscanCommand): the whole
 * hash in one answer, cursor 0, as Redis answers for a listpack (the row is
 * one); MATCH keeps the fields it matches. */
static void hscan(coll_ctx *x)
{
    if (!coll_scan_cursor(x)) return;
    size_t n;
    hpair *v = load(x, 0, &n);
    if (!v) return;
    char *pat = NULL;
    size_t plen = 0;
    if (!x->found) {
        coll_empty_scan(x);
        return;
    }
    if (!coll_scan_options(x, &pat, &plen)) return;
    size_t kept = 0;
    for (size_t i = 0; i < n; i++)
        if (!pat || lt_glob_match(pat, plen, v[i].f, v[i].fl, 0)) v[kept++] = v[i];
    lt_free(pat);
    coll_array(x, 2);
    coll_bulk(x, "0", 1);
    coll_array(x, kept * 2);
    for (size_t i = 0; i < kept; i++) {
        coll_bulk(x, v[i].f, v[i].fl);
        coll_bulk(x, v[i].v, v[i].vl);
    }
}

void hash_run(coll_ctx *x)
{
    switch (x->cmd) {
    case LATTICE_COLL_HSET:
    case LATTICE_COLL_HMSET: hset(x); break;
    case LATTICE_COLL_HSETNX: hsetnx(x); break;
    case LATTICE_COLL_HDEL: hdel(x); break;
    case LATTICE_COLL_HINCRBY: hincrby(x); break;
    case LATTICE_COLL_HINCRBYFLOAT: hincrbyfloat(x); break;
    case LATTICE_COLL_HGET: hget(x); break;
    case LATTICE_COLL_HMGET: hmget(x); break;
    case LATTICE_COLL_HLEN:
    case LATTICE_COLL_HSTRLEN:
    case LATTICE_COLL_HEXISTS: hcount(x); break;
    case LATTICE_COLL_HKEYS:
    case LATTICE_COLL_HVALS:
    case LATTICE_COLL_HGETALL: hall(x); break;
    case LATTICE_COLL_HRANDFIELD: hrandfield(x); break;
    case LATTICE_COLL_HSCAN: hscan(x); break;
    default: x->r->status = LATTICE_ERR_INVAL; break;
    }
}
