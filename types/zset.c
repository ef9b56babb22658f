/*
 * zset: Redis 7.0's sorted-set commands (t_zset.c) on a value of type
 * LATTICE_TYPE_ZSET, in coll.c's frame: ZADD (NX XX GT LT CH INCR),
 * ZINCRBY, ZREM, ZREMRANGEBYRANK, ZREMRANGEBYSCORE, ZREMRANGEBYLEX,
 * ZPOPMIN, ZPOPMAX, ZCARD, ZSCORE, ZMSCORE, ZRANK, ZREVRANK, ZCOUNT,
 * ZLEXCOUNT, ZRANGE (BYSCORE BYLEX REV LIMIT WITHSCORES), ZREVRANGE,
 * Z[REV]RANGEBYSCORE, Z[REV]RANGEBYLEX, ZRANDMEMBER, ZSCAN.  As in hash.c,
 * each command checks what Redis checks before it looks the key up first
 * (ZADD's options and scores, the ranges, LIMIT, ZPOPMIN's count,
 * ZRANDMEMBER's count, ZSCAN's cursor), then reads the key's row
 * (WRONGTYPE), answers, and writes the new row - or removes the key when
 * its last member went: Redis never keeps an empty sorted set.
 *
 * The row (docs/TYPES.md):
 *
 *     byte 0   format: 1 = sorted
 *     varint   member count
 *     then count times, in Redis's order - by score ascending, members of
 *     one score by their bytes (memcmp, then the shorter first):
 *         8 bytes  the score, an IEEE-754 double, little-endian (never NaN)
 *         varint   member length
 *         bytes    the member
 *
 * Redis 7.0 keeps a small sorted set (up to 128 members of up to 64 bytes)
 * as a listpack in this same order, so ranges, ranks, pops, ZSCAN and
 * ZRANDMEMBER of the whole set list members as Redis does.  What follows
 * from the listpack is kept too: a score is stored as an integer when it is
 * one (|score| <= 2^62), so -0 is stored as 0 (the reply of ZADD INCR or
 * ZINCRBY that computed -0 says "-0", the stored score is 0), and ZSCAN
 * writes the score as the listpack holds it ("100000000000000000" where
 * ZSCORE says "1e+17").  The lex ranges walk the row as Redis walks a
 * listpack (the first member >= min, then on while <= max), which is what
 * Redis answers when the scores differ.
 *
 * Scores: ZADD, ZINCRBY take Redis's string2d (strtod over the whole text,
 * no blank first, no NaN, no overflow: "ERR value is not a valid float");
 * a range bound takes zslParseRange's strtod (up to the first NUL,
 * blanks first allowed, "" is 0, overflow is +-inf).  Scores go out with
 * coll_double (RESP3 doubles, RESP2 bulk strings "%.17g").
 *
 * Every command decodes the whole row into a table (coll_items) and a write
 * encodes it again: O(members) per command; ZADD of k members sorts the
 * table once (O(n log n)), member lookups are linear, or through a hash
 * index built for the command when it looks up many members in a big set.
 * ZSCAN answers the whole set at once with cursor 0, as Redis does for a
 * listpack.  Randomness (ZRANDMEMBER) is coll_rand(); ZRANDMEMBER is a read.
 */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/base.h"
#include "coll_int.h"
#include "lattice/alloc.h"

#define ZSET_ROW_SORTED 1
#define ZRANDMEMBER_SUB_MUL 3   /* t_zset.c's ZRANDMEMBER_SUB_STRATEGY_MUL */
#define ERR_FLOAT "ERR value is not a valid float"
#define ERR_NAN "ERR resulting score is not a number (NaN)"
#define ERR_RANGE_FLOAT "ERR min or max is not a float"
#define ERR_RANGE_LEX "ERR min or max not valid string range item"
#define ERR_POSITIVE "ERR value is out of range, must be positive"


/* ---- the row ---- */

static double get_score(const unsigned char *p)
{
    uint64_t u = 0;
    for (int i = 7; i >= 0; i--) u = u << 8 | p[i];
    double d;
    memcpy(&d, &u, sizeof d);
    return d;
}

static void put_score(unsigned char *p, double d)
{
    if (d == 0) d = 0; /* -0 is stored as 0, as Redis's listpack stores it (an integer) */
    uint64_t u;
    memcpy(&u, &d, sizeof u);
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(u >> (8 * i));
}

/* The key's members (x->found), in a table with room for extra more; NULL
 * with r->status set when the row is malformed (a NaN score too) or
 * memory short. */
static zent *decode(coll_ctx *x, size_t extra, size_t *n)
{
    coll_reader w;
    if (!coll_row_open(x, ZSET_ROW_SORTED, &w)) return NULL;
    zent *v = coll_items(x, w.count + extra, sizeof *v);
    if (!v) {
        x->r->status = LATTICE_ERR_NOMEM;
        return NULL;
    }
    for (size_t i = 0; i < w.count; i++) {
        const unsigned char *sc;
        if (!coll_row_fixed(x, &w, 8, &sc) || !coll_row_bytes(x, &w, &v[i].m, &v[i].ml)) return NULL;
        v[i].score = get_score(sc);
        v[i].gone = false;
        if (isnan(v[i].score)) {
            x->r->status = LATTICE_ERR_PROTO;
            return NULL;
        }
    }
    if (!coll_row_close(x, &w)) return NULL;
    *n = w.count;
    return v;
}

static zent *load(coll_ctx *x, size_t extra, size_t *n)
{
    *n = 0;
    if (!coll_load(x, LATTICE_TYPE_ZSET)) return NULL;
    return decode(x, extra, n);
}

const zent *zset_members(coll_ctx *x, size_t *n) { return load(x, 0, n); }

/* Writes v[0..n) (in order) as the key's row, or removes the key when n is 0. */
static bool store(coll_ctx *x, const zent *v, size_t n)
{
    if (n == 0) return coll_remove(x);
    size_t body = 0;
    for (size_t i = 0; i < n; i++) body += 8 + coll_item_len(v[i].ml);
    unsigned char *p = coll_row_start(x, ZSET_ROW_SORTED, n, body);
    if (!p) return false;
    for (size_t i = 0; i < n; i++) {
        put_score(p, v[i].score);
        p = coll_item_put(p + 8, v[i].m, v[i].ml);
    }
    return coll_write(x, coll_row_size(n, body), LATTICE_TYPE_ZSET);
}

/* ---- order and lookups ---- */

/* Redis's sdscmp: the bytes, then the shorter first. */
static int mcmp(const char *a, size_t al, const char *b, size_t bl)
{
    size_t l = al < bl ? al : bl;
    int c = l ? memcmp(a, b, l) : 0;
    if (c) return c;
    return al < bl ? -1 : al > bl;
}

static int ecmp(const void *pa, const void *pb)
{
    const zent *a = pa, *b = pb;
    if (a->score < b->score) return -1;
    if (a->score > b->score) return 1;
    return mcmp(a->m, a->ml, b->m, b->ml);
}

static coll_bytes zkey(const void *tab, size_t i)
{
    const zent *v = tab;
    return (coll_bytes){v[i].m, v[i].ml};
}

/* An index of v[0..n) with room for cap members when lookups pay for it
 * (ix->slot NULL: linear); false (NOMEM) only when memory is short. */
static bool index_build(coll_ctx *x, coll_index *ix, const zent *v, size_t n, size_t lookups, size_t cap)
{
    ix->slot = NULL;
    return !coll_index_worth(lookups, n) || coll_index_build(x, ix, v, n, cap, zkey);
}

/* The member's place in v[0..n) (not removed), or n. */
static size_t find(const coll_index *ix, const zent *v, size_t n, const char *m, size_t ml)
{
    size_t i = coll_index_find(ix, v, n, m, ml, zkey);
    return i < n && v[i].gone ? n : i;
}

/* ---- arguments ---- */

/* The argument as a NUL-ended string in tmp (or an allocation *heap to lt_free). */
static char *cstr(const lattice_coll_arg *a, char *tmp, size_t cap, char **heap)
{
    char *b = tmp;
    *heap = NULL;
    if (a->len >= cap) {
        if (!(b = *heap = lt_malloc(a->len + 1))) return NULL;
    }
    if (a->len) memcpy(b, a->ptr, a->len);
    b[a->len] = 0;
    return b;
}

int coll_parse_double(const lattice_coll_arg *a, double *out)
{
    char tmp[128], *heap, *end;
    char *b = cstr(a, tmp, sizeof tmp, &heap);
    if (!b) return -1;
    errno = 0;
    double d = strtod(b, &end);
    bool ok = a->len && !isspace((unsigned char)b[0]) && (size_t)(end - b) == a->len &&
              !(errno == ERANGE && (d == HUGE_VAL || d == -HUGE_VAL || fpclassify(d) == FP_ZERO)) && !isnan(d);
    lt_free(heap);
    *out = d;
    return ok;
}

/* A score range (zrangespec) or a lex range (zlexrangespec: a bound is
 * -1 for "-", 1 for "+", 0 for the bytes). */
typedef struct zspec {
    bool lex;
    double min, max;
    bool minex, maxex;
    int lmin, lmax;
    const char *smin, *smax;
    size_t smin_l, smax_l;
} zspec;

/* One bound of zslParseRange: strtod of the text up to its first NUL,
 * after '(' when exclusive; nothing left, not NaN.  -1: memory short. */
static int parse_bound(const lattice_coll_arg *a, double *d, bool *ex)
{
    char tmp[128], *heap, *end;
    char *b = cstr(a, tmp, sizeof tmp, &heap);
    if (!b) return -1;
    *ex = b[0] == '(';
    *d = strtod(b + (*ex ? 1 : 0), &end);
    int ok = end[0] == 0 && !isnan(*d);
    lt_free(heap);
    return ok;
}

static int parse_range(const lattice_coll_arg *min, const lattice_coll_arg *max, zspec *r)
{
    memset(r, 0, sizeof *r);
    int a = parse_bound(min, &r->min, &r->minex);
    if (a != 1) return a;
    return parse_bound(max, &r->max, &r->maxex);
}

/* zslParseLexRangeItem: "+", "-" (alone, as C strings), "(bytes", "[bytes". */
static bool parse_lex_item(const lattice_coll_arg *a, int *kind, const char **s, size_t *sl, bool *ex)
{
    const char *c = a->ptr;
    if (a->len == 0) return false;
    switch (c[0]) {
    case '+':
    case '-':
        if (a->len > 1 && c[1] != 0) return false;
        *kind = c[0] == '+' ? 1 : -1;
        *ex = true;
        return true;
    case '(':
    case '[':
        *kind = 0;
        *ex = c[0] == '(';
        *s = c + 1;
        *sl = a->len - 1;
        return true;
    default: return false;
    }
}

static bool parse_lex(const lattice_coll_arg *min, const lattice_coll_arg *max, zspec *r)
{
    memset(r, 0, sizeof *r);
    r->lex = true;
    return parse_lex_item(min, &r->lmin, &r->smin, &r->smin_l, &r->minex) &&
           parse_lex_item(max, &r->lmax, &r->smax, &r->smax_l, &r->maxex);
}

/* sdscmplex of a member against a bound. */
static int lexcmp(const zent *e, int kind, const char *s, size_t sl)
{
    if (kind) return -kind; /* everything is above "-" and below "+" */
    return mcmp(e->m, e->ml, s, sl);
}

static bool gte_min(const zent *e, const zspec *r)
{
    if (r->lex) {
        int c = lexcmp(e, r->lmin, r->smin, r->smin_l);
        return r->minex ? c > 0 : c >= 0;
    }
    return r->minex ? e->score > r->min : e->score >= r->min;
}

static bool lte_max(const zent *e, const zspec *r)
{
    if (r->lex) {
        int c = lexcmp(e, r->lmax, r->smax, r->smax_l);
        return r->maxex ? c < 0 : c <= 0;
    }
    return r->maxex ? e->score < r->max : e->score <= r->max;
}

/* zzlIsInRange / zzlIsInLexRange: false when no member can be in it. */
static bool maybe_in(const zent *v, size_t n, const zspec *r)
{
    if (r->lex) {
        int c;
        if (r->lmin == r->lmax && r->lmin) c = 0;
        else if (r->lmin == -1 || r->lmax == 1) c = -1;
        else if (r->lmin == 1 || r->lmax == -1) c = 1;
        else c = mcmp(r->smin, r->smin_l, r->smax, r->smax_l);
        if (c > 0 || (c == 0 && (r->minex || r->maxex))) return false;
    } else if (r->min > r->max || (r->min == r->max && (r->minex || r->maxex))) {
        return false;
    }
    return n && gte_min(&v[n - 1], r) && lte_max(&v[0], r);
}

/* zzlFirstInRange: from the head, the first member >= min if it is <= max;
 * -1 when none. */
static long long first_in(const zent *v, size_t n, const zspec *r)
{
    if (!maybe_in(v, n, r)) return -1;
    for (size_t i = 0; i < n; i++)
        if (gte_min(&v[i], r)) return lte_max(&v[i], r) ? (long long)i : -1;
    return -1;
}

/* zzlLastInRange: from the tail, the first member <= max if it is >= min. */
static long long last_in(const zent *v, size_t n, const zspec *r)
{
    if (!maybe_in(v, n, r)) return -1;
    for (size_t i = n; i-- > 0;)
        if (lte_max(&v[i], r)) return gte_min(&v[i], r) ? (long long)i : -1;
    return -1;
}

/* The members of a range from the head (Redis's delete and count loops):
 * [*s, *s + count). */
static size_t forward_range(const zent *v, size_t n, const zspec *r, size_t *s)
{
    long long f = first_in(v, n, r);
    if (f < 0) return 0;
    size_t i = (size_t)f;
    while (i < n && lte_max(&v[i], r)) i++;
    *s = (size_t)f;
    return i - (size_t)f;
}

/* Redis's index arithmetic (ZRANGE by rank, ZREMRANGEBYRANK): [*s, *e]
 * within n, or false when the range is empty. */
static bool clamp(long long start, long long end, size_t n, size_t *s, size_t *e)
{
    long long ln = (long long)n;
    if (start < 0) start += ln;
    if (end < 0) end += ln;
    if (start < 0) start = 0;
    if (start > end || start >= ln) return false;
    if (end >= ln) end = ln - 1;
    *s = (size_t)start;
    *e = (size_t)end;
    return true;
}

/* A member and its score in the reply. */
static void emit(coll_ctx *x, const zent *e, bool withscores)
{
    coll_bulk(x, e->m, e->ml);
    if (withscores) coll_double(x, e->score);
}

/* n members (RESP3 pairs with their scores, RESP2 one flat array). */
static void header(coll_ctx *x, size_t n, bool withscores)
{
    if (withscores) coll_pairs(x, n);
    else coll_array(x, n);
}

/* ---- writes ---- */

#define ZADD_NX 0x1
#define ZADD_XX 0x2
#define ZADD_GT 0x4
#define ZADD_LT 0x8
#define ZADD_INCR 0x10

/* ZADD key [NX|XX] [GT|LT] [CH] [INCR] score member ... and ZINCRBY key
 * increment member (zaddGenericCommand: ZINCRBY takes the options too). */
static void zadd(coll_ctx *x)
{
    unsigned f = x->cmd == LATTICE_COLL_ZINCRBY ? ZADD_INCR : 0;
    bool ch = false;
    size_t si = 0;
    for (; si < x->argc; si++) {
        const lattice_coll_arg *o = &x->argv[si];
        if (coll_is(o, "nx")) f |= ZADD_NX;
        else if (coll_is(o, "xx")) f |= ZADD_XX;
        else if (coll_is(o, "ch")) ch = true;
        else if (coll_is(o, "incr")) f |= ZADD_INCR;
        else if (coll_is(o, "gt")) f |= ZADD_GT;
        else if (coll_is(o, "lt")) f |= ZADD_LT;
        else break;
    }
    bool incr = f & ZADD_INCR, nx = f & ZADD_NX, xx = f & ZADD_XX, gt = f & ZADD_GT, lt = f & ZADD_LT;
    size_t elements = x->argc - si;
    if (elements % 2 || !elements) {
        coll_error(x, COLL_ERR_SYNTAX);
        return;
    }
    elements /= 2;
    if (nx && xx) {
        coll_error(x, "ERR XX and NX options at the same time are not compatible");
        return;
    }
    if ((gt && nx) || (lt && nx) || (gt && lt)) {
        coll_error(x, "ERR GT, LT, and/or NX options at the same time are not compatible");
        return;
    }
    if (incr && elements > 1) {
        coll_error(x, "ERR INCR option supports a single increment-element pair");
        return;
    }
    for (size_t j = 0; j < elements; j++) {
        double d;
        int ok = coll_parse_double(&x->argv[si + 2 * j], &d);
        if (ok < 0) {
            x->r->status = LATTICE_ERR_NOMEM;
            return;
        }
        if (!ok) {
            coll_error(x, ERR_FLOAT);
            return;
        }
    }
    size_t n;
    zent *v = load(x, elements, &n);
    if (!v) return;
    size_t added = 0, updated = 0, processed = 0;
    double score = 0;
    if (x->found || !xx) {
        coll_index ix;
        if (!index_build(x, &ix, v, n, elements, n + elements)) return;
        for (size_t j = 0; j < elements; j++) {
            const lattice_coll_arg *m = &x->argv[si + 2 * j + 1];
            double s;
            if (coll_parse_double(&x->argv[si + 2 * j], &s) != 1) { /* checked above: only memory can fail */
                coll_index_free(&ix);
                x->r->status = LATTICE_ERR_NOMEM;
                return;
            }
            size_t i = find(&ix, v, n, m->ptr, m->len);
            if (i < n) {
                if (nx) continue;
                double cur = v[i].score;
                if (incr) {
                    s += cur;
                    if (isnan(s)) {
                        coll_index_free(&ix);
                        coll_error(x, ERR_NAN);
                        return;
                    }
                }
                if ((lt && s >= cur) || (gt && s <= cur)) continue;
                processed++;
                score = s;
                if (s != cur) {
                    v[i].score = s;
                    updated++;
                }
            } else if (!xx) {
                v[n] = (zent){s, m->ptr, m->len, false};
                if (ix.slot) coll_index_add(&ix, v, n, zkey);
                n++;
                added++;
                processed++;
                score = s;
            }
        }
        coll_index_free(&ix);
    }
    if (added || updated) {
        qsort(v, n, sizeof *v, ecmp);
        if (!store(x, v, n)) return;
    }
    if (incr) {
        if (processed) coll_double(x, score);
        else coll_null(x);
    } else {
        long long reply = (long long)(ch ? added + updated : added);
        x->r->num = reply;
        coll_int(x, reply);
    }
}

/* Drops the removed members of v[0..n); the count left. */
static size_t compact(zent *v, size_t n)
{
    size_t w = 0;
    for (size_t i = 0; i < n; i++)
        if (!v[i].gone) v[w++] = v[i];
    return w;
}

static void zrem(coll_ctx *x)
{
    size_t n;
    zent *v = load(x, 0, &n);
    if (!v) return;
    size_t deleted = 0;
    if (x->found) {
        coll_index ix;
        if (!index_build(x, &ix, v, n, x->argc, n)) return;
        for (size_t j = 0; j < x->argc && deleted < n; j++) {
            size_t i = find(&ix, v, n, x->argv[j].ptr, x->argv[j].len);
            if (i == n) continue;
            v[i].gone = true;
            deleted++;
        }
        coll_index_free(&ix);
    }
    if (deleted && !store(x, v, compact(v, n))) return;
    x->r->num = (long long)deleted;
    coll_int(x, (long long)deleted);
}

/* A score range (by_score) or a lex range from argv[0], argv[1]: false when
 * the reply is the error (or r->status NOMEM). */
static bool spec_of(coll_ctx *x, bool by_score, zspec *r)
{
    if (!by_score) {
        if (parse_lex(&x->argv[0], &x->argv[1], r)) return true;
        coll_error(x, ERR_RANGE_LEX);
        return false;
    }
    int ok = parse_range(&x->argv[0], &x->argv[1], r);
    if (ok < 0) x->r->status = LATTICE_ERR_NOMEM;
    else if (!ok) coll_error(x, ERR_RANGE_FLOAT);
    return ok > 0;
}

/* ZREMRANGEBYRANK start stop, ZREMRANGEBYSCORE min max, ZREMRANGEBYLEX
 * min max: the range first, then the key; the number removed. */
static void zremrange(coll_ctx *x)
{
    long long start = 0, end = 0;
    zspec r;
    if (x->cmd == LATTICE_COLL_ZREMRANGEBYRANK) {
        if (!coll_arg_ll(&x->argv[0], &start) || !coll_arg_ll(&x->argv[1], &end)) {
            coll_error(x, COLL_ERR_NOT_INT);
            return;
        }
    } else if (!spec_of(x, x->cmd == LATTICE_COLL_ZREMRANGEBYSCORE, &r)) {
        return;
    }
    size_t n, s = 0, cnt = 0;
    zent *v = load(x, 0, &n);
    if (!v) return;
    if (x->cmd == LATTICE_COLL_ZREMRANGEBYRANK) {
        size_t e;
        if (clamp(start, end, n, &s, &e)) cnt = e - s + 1;
    } else {
        cnt = forward_range(v, n, &r, &s);
    }
    if (cnt) {
        memmove(v + s, v + s + cnt, (n - s - cnt) * sizeof *v);
        if (!store(x, v, n - cnt)) return;
    }
    x->r->num = (long long)cnt;
    coll_int(x, (long long)cnt);
}

/* ZPOPMIN / ZPOPMAX key [count]: without a count one [member, score] flat
 * array (RESP3 too), with one up to count pairs; an empty array without a
 * set. */
static void zpop(coll_ctx *x)
{
    bool max = x->cmd == LATTICE_COLL_ZPOPMAX, counted = x->argc == 1;
    long long count = -1;
    if (x->argc > 1) {
        coll_error(x, COLL_ERR_SYNTAX);
        return;
    }
    if (counted && (!coll_arg_ll(&x->argv[0], &count) || count < 0)) {
        coll_error(x, ERR_POSITIVE);
        return;
    }
    size_t n;
    zent *v = load(x, 0, &n);
    if (!v) return;
    if (!x->found || count == 0) {
        coll_array(x, 0);
        return;
    }
    size_t take = !counted ? 1 : (unsigned long long)count > n ? n : (size_t)count;
    /* The reply before the row changes: it points into the row read. */
    if (counted) coll_pairs(x, take);
    else coll_array(x, 2);
    for (size_t i = 0; i < take; i++) emit(x, max ? &v[n - 1 - i] : &v[i], true);
    if (x->nomem) {
        x->r->status = LATTICE_ERR_NOMEM; /* nothing popped: the reply could not be built */
        return;
    }
    store(x, max ? v : v + take, n - take);
}

/* ---- reads ---- */

static void zcard(coll_ctx *x)
{
    size_t n;
    if (load(x, 0, &n)) coll_int(x, (long long)n);
}

static void zscore(coll_ctx *x)
{
    size_t n;
    zent *v = load(x, 0, &n);
    if (!v) return;
    size_t i = find(NULL, v, n, x->argv[0].ptr, x->argv[0].len);
    if (i < n) coll_double(x, v[i].score);
    else coll_null(x);
}

static void zmscore(coll_ctx *x)
{
    size_t n;
    zent *v = load(x, 0, &n);
    if (!v) return;
    coll_index ix;
    if (!index_build(x, &ix, v, n, x->argc, n)) return;
    coll_array(x, x->argc);
    for (size_t j = 0; j < x->argc; j++) {
        size_t i = find(&ix, v, n, x->argv[j].ptr, x->argv[j].len);
        if (i < n) coll_double(x, v[i].score);
        else coll_null(x);
    }
    coll_index_free(&ix);
}

static void zrank(coll_ctx *x)
{
    size_t n;
    zent *v = load(x, 0, &n);
    if (!v) return;
    size_t i = find(NULL, v, n, x->argv[0].ptr, x->argv[0].len);
    if (i == n) coll_null(x);
    else coll_int(x, (long long)(x->cmd == LATTICE_COLL_ZREVRANK ? n - 1 - i : i));
}

/* ZCOUNT key min max, ZLEXCOUNT key min max. */
static void zcount(coll_ctx *x)
{
    zspec r;
    if (!spec_of(x, x->cmd == LATTICE_COLL_ZCOUNT, &r)) return;
    size_t n, s;
    zent *v = load(x, 0, &n);
    if (v) coll_int(x, (long long)forward_range(v, n, &r, &s));
}

enum { BY_AUTO, BY_RANK, BY_SCORE, BY_LEX };
enum { DIR_AUTO, DIR_FORWARD, DIR_REVERSE };

/* ZRANGE key min max [BYSCORE|BYLEX] [REV] [LIMIT offset count]
 * [WITHSCORES] and the older forms (zrangeGenericCommand): the options,
 * their conflicts, the range, then the key. */
static void zrange(coll_ctx *x)
{
    int by = BY_AUTO, dir = DIR_AUTO;
    switch (x->cmd) {
    case LATTICE_COLL_ZREVRANGE: by = BY_RANK, dir = DIR_REVERSE; break;
    case LATTICE_COLL_ZRANGEBYSCORE: by = BY_SCORE, dir = DIR_FORWARD; break;
    case LATTICE_COLL_ZREVRANGEBYSCORE: by = BY_SCORE, dir = DIR_REVERSE; break;
    case LATTICE_COLL_ZRANGEBYLEX: by = BY_LEX, dir = DIR_FORWARD; break;
    case LATTICE_COLL_ZREVRANGEBYLEX: by = BY_LEX, dir = DIR_REVERSE; break;
    default: break;
    }
    bool withscores = false, store = x->cmd == LATTICE_COLL_ZRANGESTORE;
    long long offset = 0, limit = -1;
    for (size_t j = 2; j < x->argc; j++) {
        size_t left = x->argc - j - 1;
        const lattice_coll_arg *o = &x->argv[j];
        if (!store && coll_is(o, "withscores")) {
            withscores = true;
        } else if (coll_is(o, "limit") && left >= 2) {
            if (!coll_arg_ll(&x->argv[j + 1], &offset) || !coll_arg_ll(&x->argv[j + 2], &limit)) {
                coll_error(x, COLL_ERR_NOT_INT);
                return;
            }
            j += 2;
        } else if (dir == DIR_AUTO && coll_is(o, "rev")) {
            dir = DIR_REVERSE;
        } else if (by == BY_AUTO && coll_is(o, "bylex")) {
            by = BY_LEX;
        } else if (by == BY_AUTO && coll_is(o, "byscore")) {
            by = BY_SCORE;
        } else {
            coll_error(x, COLL_ERR_SYNTAX);
            return;
        }
    }
    if (dir == DIR_AUTO) dir = DIR_FORWARD;
    if (by == BY_AUTO) by = BY_RANK;
    if (limit != -1 && by == BY_RANK) {
        coll_error(x, "ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX");
        return;
    }
    if (withscores && by == BY_LEX) {
        coll_error(x, "ERR syntax error, WITHSCORES not supported in combination with BYLEX");
        return;
    }
    withscores = withscores || store; /* ZRANGESTORE keeps every member's score, BYLEX too */
    bool rev = dir == DIR_REVERSE;
    const lattice_coll_arg *amin = &x->argv[0], *amax = &x->argv[1];
    if (rev && by != BY_RANK) { /* the range is given as max, min */
        amin = &x->argv[1];
        amax = &x->argv[0];
    }
    long long start = 0, end = 0;
    zspec r;
    if (by == BY_RANK) {
        if (!coll_arg_ll(amin, &start) || !coll_arg_ll(amax, &end)) {
            coll_error(x, COLL_ERR_NOT_INT);
            return;
        }
    } else if (by == BY_SCORE) {
        int ok = parse_range(amin, amax, &r);
        if (ok < 0) {
            x->r->status = LATTICE_ERR_NOMEM;
            return;
        }
        if (!ok) {
            coll_error(x, ERR_RANGE_FLOAT);
            return;
        }
    } else if (!parse_lex(amin, amax, &r)) {
        coll_error(x, ERR_RANGE_LEX);
        return;
    }
    size_t n;
    zent *v = load(x, 0, &n);
    if (!v) return;
    if (!x->found) {
        coll_array(x, 0);
        return;
    }
    if (by == BY_RANK) {
        size_t s, e;
        if (!clamp(start, end, n, &s, &e)) {
            header(x, 0, withscores);
            return;
        }
        header(x, e - s + 1, withscores);
        for (size_t i = s; i <= e; i++) emit(x, rev ? &v[n - 1 - i] : &v[i], withscores);
        return;
    }
    /* genericZrangebyscoreCommand / ...bylex: the first member in range
     * from the head (from the tail for REV), offset members skipped
     * unchecked, then up to limit while in range (a negative limit: all,
     * a negative offset: none). */
    size_t cnt = 0;
    long long i = -1;
    if (!(offset > 0 && (unsigned long long)offset >= n) && offset >= 0) {
        i = rev ? last_in(v, n, &r) : first_in(v, n, &r);
        if (i >= 0) i = rev ? i - offset : i + offset;
        if (i >= (long long)n) i = -1;
    }
    if (i >= 0) {
        for (long long k = i; k >= 0 && k < (long long)n && (limit < 0 || cnt < (unsigned long long)limit);
             k += rev ? -1 : 1) {
            if (rev ? !gte_min(&v[k], &r) : !lte_max(&v[k], &r)) break;
            cnt++;
        }
    }
    header(x, cnt, withscores);
    for (size_t k = 0; k < cnt; k++) emit(x, &v[rev ? (size_t)i - k : (size_t)i + k], withscores);
}

/* ZRANDMEMBER key [count [WITHSCORES]] (zrandmemberCommand): without a
 * count one member or nil; a negative count that many picks, repeats
 * allowed; a positive one distinct members: the whole set (highest first,
 * as Redis iterates a sorted set) when it has no more, else a sample -
 * in random order when the count is above a third of the set, in the
 * set's order otherwise (Redis's listpack sampling). */
static void zrandmember(coll_ctx *x)
{
    long long l;
    bool withscores, counted;
    if (!coll_rand_args(x, "withscores", &counted, &l, &withscores)) return;
    size_t n;
    zent *v = load(x, 0, &n);
    if (!v) return;
    if (!counted) {
        const zent *e = n ? &v[coll_rand() % n] : NULL;
        if (e) coll_bulk(x, e->m, e->ml);
        else coll_null(x);
        return;
    }
    if (!n || l == 0) {
        coll_array(x, 0);
        return;
    }
    if (l < 0 || l == 1) {
        unsigned long long count = l < 0 ? (unsigned long long)-l : 1;
        header(x, count, withscores);
        for (unsigned long long k = 0; k < count && !x->nomem; k++) emit(x, &v[coll_rand() % n], withscores);
        return;
    }
    if ((unsigned long long)l >= n) {
        header(x, n, withscores);
        for (size_t k = n; k-- > 0;) emit(x, &v[k], withscores);
        return;
    }
    size_t count = (size_t)l;
    header(x, count, withscores);
    if (count * ZRANDMEMBER_SUB_MUL > n) {
        /* A partial shuffle of the table: its first count entries. */
        for (size_t k = 0; k < count; k++) {
            size_t j = k + (size_t)(coll_rand() % (n - k));
            zent t = v[k];
            v[k] = v[j];
            v[j] = t;
            emit(x, &v[k], withscores);
        }
        return;
    }
    /* Selection sampling: each member with probability needed / left, in order. */
    size_t need = count;
    for (size_t k = 0; k < n && need; k++) {
        if (coll_rand() % (n - k) < need) {
            emit(x, &v[k], withscores);
            need--;
        }
    }
}

/* The score as a listpack holds it (ZSCAN's text): an integer when it is
 * one within +-2^62 (Redis's double2ll), else d2string's "%.17g", inf. */
static size_t scan_score(char *buf, size_t cap, double d)
{
    if (isinf(d)) return (size_t)snprintf(buf, cap, "%s", d > 0 ? "inf" : "-inf");
    if (d >= (double)(-LLONG_MAX / 2) && d <= (double)(LLONG_MAX / 2)) {
        long long ll = (long long)d;
        if ((double)ll == d) return (size_t)snprintf(buf, cap, "%lld", ll);
    }
    return (size_t)snprintf(buf, cap, "%.17g", d);
}

/* ZSCAN cursor [MATCH pattern] [COUNT count]: the whole set in one answer,
 * cursor 0, each member then its score as bulk strings (both protocols),
 * as Redis answers for a listpack. */
static void zscan(coll_ctx *x)
{
    if (!coll_scan_cursor(x)) return;
    size_t n;
    zent *v = load(x, 0, &n);
    if (!v) return;
    if (!x->found) {
        coll_empty_scan(x);
        return;
    }
    char *pat = NULL;
    size_t plen = 0;
    if (!coll_scan_options(x, &pat, &plen)) return;
    size_t kept = 0;
    for (size_t i = 0; i < n; i++)
        if (!pat || lt_glob_match(pat, plen, v[i].m, v[i].ml, 0)) v[kept++] = v[i];
    lt_free(pat);
    coll_array(x, 2);
    coll_bulk(x, "0", 1);
    coll_array(x, kept * 2);
    for (size_t i = 0; i < kept; i++) {
        char t[64];
        coll_bulk(x, v[i].m, v[i].ml);
        coll_bulk(x, t, scan_score(t, sizeof t, v[i].score));
    }
}

void zset_run(coll_ctx *x)
{
    switch (x->cmd) {
    case LATTICE_COLL_ZADD:
    case LATTICE_COLL_ZINCRBY: zadd(x); break;
    case LATTICE_COLL_ZREM: zrem(x); break;
    case LATTICE_COLL_ZREMRANGEBYRANK:
    case LATTICE_COLL_ZREMRANGEBYSCORE:
    case LATTICE_COLL_ZREMRANGEBYLEX: zremrange(x); break;
    case LATTICE_COLL_ZPOPMIN:
    case LATTICE_COLL_ZPOPMAX: zpop(x); break;
    case LATTICE_COLL_ZCARD: zcard(x); break;
    case LATTICE_COLL_ZSCORE: zscore(x); break;
    case LATTICE_COLL_ZMSCORE: zmscore(x); break;
    case LATTICE_COLL_ZRANK:
    case LATTICE_COLL_ZREVRANK: zrank(x); break;
    case LATTICE_COLL_ZCOUNT:
    case LATTICE_COLL_ZLEXCOUNT: zcount(x); break;
    case LATTICE_COLL_ZRANGE:
    case LATTICE_COLL_ZREVRANGE:
    case LATTICE_COLL_ZRANGEBYSCORE:
    case LATTICE_COLL_ZREVRANGEBYSCORE:
    case LATTICE_COLL_ZRANGEBYLEX:
    case LATTICE_COLL_ZREVRANGEBYLEX:
    case LATTICE_COLL_ZRANGESTORE: zrange(x); break;
    case LATTICE_COLL_ZRANDMEMBER: zrandmember(x); break;
    case LATTICE_COLL_ZSCAN: zscan(x); break;
    default: x->r->status = LATTICE_ERR_INVAL; break;
    }
}
