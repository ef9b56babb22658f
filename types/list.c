/*
 * list: Redis 7.0's list commands (t_list.c) on a value of type
 * LATTICE_TYPE_LIST, in coll.c's frame: LPUSH, RPUSH, LPUSHX, RPUSHX, LPOP
 * and RPOP (with a count), LLEN, LRANGE, LINDEX, LSET, LINSERT, LREM,
 * LTRIM, LPOS; and exec_lmove (LMOVE, RPOPLPUSH: two keys, run by a
 * transaction's step, ops/txn.c).  As in hash.c, each command checks what Redis checks before
 * it looks the key up first, then reads the key's row, answers and writes
 * the new row (or removes the key when its last element went: Redis never
 * keeps an empty list).
 *
 * The row (docs/TYPES.md): one format byte (LIST_ROW_PLAIN), the element
 * count as a varint, then each element as (varint length, bytes), head
 * first.  Every command reads the whole row and a write writes it again:
 * O(elements) per command.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll_int.h"
#include "lattice/alloc.h"

#define LIST_ROW_PLAIN 1
#define ERR_RANGE "ERR value is out of range, must be positive"

typedef lattice_coll_arg elem;

/* The key's elements (x->found), in a table with room for extra more;
 * NULL with r->status set when the row is malformed or memory short. */
static elem *decode(coll_ctx *x, size_t extra, size_t *n)
{
    coll_reader w;
    if (!coll_row_open(x, LIST_ROW_PLAIN, &w)) return NULL;
    elem *v = coll_items(x, w.count + extra, sizeof *v);
    if (!v) {
        x->r->status = LATTICE_ERR_NOMEM;
        return NULL;
    }
    for (size_t i = 0; i < w.count; i++) {
        const char *p;
        if (!coll_row_bytes(x, &w, &p, &v[i].len)) return NULL;
        v[i].ptr = p;
    }
    if (!coll_row_close(x, &w)) return NULL;
    *n = w.count;
    return v;
}

static elem *load(coll_ctx *x, size_t extra, size_t *n)
{
    *n = 0;
    if (!coll_load(x, LATTICE_TYPE_LIST)) return NULL;
    return decode(x, extra, n);
}

/* Writes v[0..n) as the key's row, or removes the key when n is 0. */
static bool store(coll_ctx *x, const elem *v, size_t n)
{
    if (n == 0) return coll_remove(x);
    size_t body = 0;
    for (size_t i = 0; i < n; i++) body += coll_item_len(v[i].len);
    unsigned char *p = coll_row_start(x, LIST_ROW_PLAIN, n, body);
    if (!p) return false;
    for (size_t i = 0; i < n; i++) p = coll_item_put(p, v[i].ptr, v[i].len);
    return coll_write(x, coll_row_size(n, body), LATTICE_TYPE_LIST);
}

static bool same(const elem *a, const elem *b) { return a->len == b->len && (!a->len || !memcmp(a->ptr, b->ptr, a->len)); }

/* Redis's index arithmetic for LRANGE/LTRIM: [*start, *end] within n, or
 * false when the range is empty. */
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

/* ---- writes ---- */

/* LPUSH / RPUSH / LPUSHX / RPUSHX key element...: the new length (the X
 * forms 0 without a list). */
static void push(coll_ctx *x)
{
    bool head = x->cmd == LATTICE_COLL_LPUSH || x->cmd == LATTICE_COLL_LPUSHX;
    bool only = x->cmd == LATTICE_COLL_LPUSHX || x->cmd == LATTICE_COLL_RPUSHX;
    size_t n, k = x->argc;
    elem *v = load(x, k, &n);
    if (!v) return;
    if (only && !x->found) {
        coll_int(x, 0);
        return;
    }
    if (head) {
        memmove(v + k, v, n * sizeof *v);
        for (size_t i = 0; i < k; i++) v[i] = x->argv[k - 1 - i]; /* each goes to the head in turn */
    } else {
        memcpy(v + n, x->argv, k * sizeof *v);
    }
    n += k;
    if (!store(x, v, n)) return;
    x->r->num = (int64_t)n;
    coll_int(x, (long long)n);
}

/* LPOP / RPOP key [count]: one element (nil without a list), or with a
 * count an array of up to count (a null array without a list). */
static void pop(coll_ctx *x)
{
    bool head = x->cmd == LATTICE_COLL_LPOP, counted = x->argc == 1;
    long long count = 0;
    if (x->argc > 1) {
        coll_arity_error(x);
        return;
    }
    if (counted && (!coll_arg_ll(&x->argv[0], &count) || count < 0)) {
        coll_error(x, ERR_RANGE);
        return;
    }
    size_t n;
    elem *v = load(x, 0, &n);
    if (!v) return;
    if (!x->found) {
        if (counted) coll_null_array(x);
        else coll_null(x);
        return;
    }
    if (counted && count == 0) {
        coll_array(x, 0);
        return;
    }
    size_t take = !counted ? 1 : (unsigned long long)count > n ? n : (size_t)count;
    /* The reply before the row changes: it points into the row read. */
    if (counted) coll_array(x, take);
    for (size_t i = 0; i < take; i++) {
        const elem *e = head ? &v[i] : &v[n - 1 - i];
        coll_bulk(x, e->ptr, e->len);
    }
    if (x->nomem) {
        x->r->status = LATTICE_ERR_NOMEM; /* nothing popped: the reply could not be built */
        return;
    }
    store(x, head ? v + take : v, n - take);
}

static void lset(coll_ctx *x)
{
    size_t n;
    elem *v = load(x, 0, &n);
    if (!v) return;
    if (!x->found) {
        coll_error(x, "ERR no such key");
        return;
    }
    long long idx;
    if (!coll_arg_ll(&x->argv[0], &idx)) {
        coll_error(x, COLL_ERR_NOT_INT);
        return;
    }
    if (idx < 0) idx += (long long)n;
    if (idx < 0 || idx >= (long long)n) {
        coll_error(x, "ERR index out of range");
        return;
    }
    v[idx] = x->argv[1];
    if (store(x, v, n)) coll_simple(x, "OK");
}

/* LINSERT key BEFORE|AFTER pivot element: the new length, -1 without the
 * pivot, 0 without a list. */
static void linsert(coll_ctx *x)
{
    bool after = coll_is(&x->argv[0], "after");
    if (!after && !coll_is(&x->argv[0], "before")) {
        coll_error(x, COLL_ERR_SYNTAX);
        return;
    }
    size_t n;
    elem *v = load(x, 1, &n);
    if (!v) return;
    size_t i = 0;
    while (i < n && !same(&v[i], &x->argv[1])) i++;
    if (!x->found || i == n) {
        coll_int(x, x->found ? -1 : 0);
        return;
    }
    size_t at = after ? i + 1 : i;
    memmove(v + at + 1, v + at, (n - at) * sizeof *v);
    v[at] = x->argv[2];
    n++;
    if (!store(x, v, n)) return;
    x->r->num = (int64_t)n;
    coll_int(x, (long long)n);
}

/* LREM key count element: count > 0 the first count from the head, < 0
 * from the tail, 0 all; the number removed. */
static void lrem(coll_ctx *x)
{
    long long count;
    if (!coll_arg_ll(&x->argv[0], &count)) {
        coll_error(x, COLL_ERR_NOT_INT);
        return;
    }
    size_t n;
    elem *v = load(x, 0, &n);
    if (!v) return;
    unsigned long long limit = count == 0 ? ULLONG_MAX : count < 0 ? 0ull - (unsigned long long)count
                                                                   : (unsigned long long)count;
    size_t removed = 0;
    if (count >= 0) {
        size_t w = 0;
        for (size_t i = 0; i < n; i++) {
            if (removed < limit && same(&v[i], &x->argv[1])) removed++;
            else v[w++] = v[i];
        }
    } else {
        size_t w = n; /* from the tail: survivors packed towards the end */
        for (size_t i = n; i-- > 0;) {
            if (removed < limit && same(&v[i], &x->argv[1])) removed++;
            else v[--w] = v[i];
        }
        memmove(v, v + w, (n - w) * sizeof *v);
    }
    if (removed && !store(x, v, n - removed)) return;
    x->r->num = (int64_t)removed;
    coll_int(x, (long long)removed);
}

/* LTRIM's and LRANGE's arguments (start stop) and the list: false when
 * the reply is an error already (or r->status says why). */
static elem *range_of(coll_ctx *x, size_t *n, long long *start, long long *end)
{
    if (!coll_arg_ll(&x->argv[0], start) || !coll_arg_ll(&x->argv[1], end)) {
        coll_error(x, COLL_ERR_NOT_INT);
        return NULL;
    }
    return load(x, 0, n);
}

static void ltrim(coll_ctx *x)
{
    long long start, end;
    size_t n, s, e;
    elem *v = range_of(x, &n, &start, &end);
    if (!v) return;
    if (x->found) {
        bool keep = clamp(start, end, n, &s, &e);
        size_t left = keep ? e - s + 1 : 0;
        if (left != n && !store(x, keep ? v + s : v, left)) return;
    }
    coll_simple(x, "OK");
}

/* ---- reads ---- */

static void llen(coll_ctx *x)
{
    size_t n;
    if (load(x, 0, &n)) coll_int(x, (long long)n);
}

static void lrange(coll_ctx *x)
{
    long long start, end;
    size_t n, s, e;
    elem *v = range_of(x, &n, &start, &end);
    if (!v) return;
    if (!clamp(start, end, n, &s, &e)) {
        coll_array(x, 0);
        return;
    }
    coll_array(x, e - s + 1);
    for (size_t i = s; i <= e; i++) coll_bulk(x, v[i].ptr, v[i].len);
}

static void lindex(coll_ctx *x)
{
    size_t n;
    elem *v = load(x, 0, &n);
    if (!v) return;
    if (!x->found) {
        coll_null(x);
        return;
    }
    long long idx;
    if (!coll_arg_ll(&x->argv[0], &idx)) {
        coll_error(x, COLL_ERR_NOT_INT);
        return;
    }
    if (idx < 0) idx += (long long)n;
    if (idx < 0 || idx >= (long long)n) coll_null(x);
    else coll_bulk(x, v[idx].ptr, v[idx].len);
}

/* LPOS key element [RANK rank] [COUNT num] [MAXLEN len] (lposCommand): the
 * options first, then the key. */
static void lpos(coll_ctx *x)
{
    long long rank = 1, count = -1, maxlen = 0;
    for (size_t j = 1; j < x->argc; j++) {
        bool more = j + 1 < x->argc;
        if (coll_is(&x->argv[j], "rank") && more) {
            if (!coll_arg_ll(&x->argv[++j], &rank)) {
                coll_error(x, COLL_ERR_NOT_INT);
                return;
            }
            if (rank == LLONG_MIN) {
                coll_error(x, COLL_ERR_LONG_RANGE);
                return;
            }
            if (rank == 0) {
                coll_error(x, "ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... "
                              "or use negative to start from the end of the list");
                return;
            }
        } else if (coll_is(&x->argv[j], "count") && more) {
            if (!coll_arg_ll(&x->argv[++j], &count) || count < 0) {
                coll_error(x, "ERR COUNT can't be negative");
                return;
            }
        } else if (coll_is(&x->argv[j], "maxlen") && more) {
            if (!coll_arg_ll(&x->argv[++j], &maxlen) || maxlen < 0) {
                coll_error(x, "ERR MAXLEN can't be negative");
                return;
            }
        } else {
            coll_error(x, COLL_ERR_SYNTAX);
            return;
        }
    }
    size_t n;
    elem *v = load(x, 0, &n);
    if (!v) return;
    if (!x->found) {
        if (count != -1) coll_array(x, 0);
        else coll_null(x);
        return;
    }
    bool from_tail = rank < 0;
    unsigned long long want = from_tail ? 0ull - (unsigned long long)rank : (unsigned long long)rank;
    /* The matches' positions, in the order found (the reply's count comes
     * first: collect them in the table's spare room). */
    if (!coll_items(x, n * sizeof *v + (n + 1) * sizeof(size_t), 1)) {
        x->r->status = LATTICE_ERR_NOMEM;
        return;
    }
    v = x->argv + x->argc; /* the table, where coll_items may have moved it */
    size_t *hit = (size_t *)(v + n);
    size_t nhits = 0;
    unsigned long long matches = 0;
    for (size_t step = 0; step < n && (maxlen == 0 || step < (unsigned long long)maxlen); step++) {
        size_t i = from_tail ? n - 1 - step : step;
        if (!same(&v[i], &x->argv[0])) continue;
        if (++matches < want) continue;
        hit[nhits++] = i;
        if (count == -1 || (count && matches - want + 1 >= (unsigned long long)count)) break;
    }
    if (count == -1) {
        if (nhits) coll_int(x, (long long)hit[0]);
        else coll_null(x);
        return;
    }
    coll_array(x, nhits);
    for (size_t i = 0; i < nhits; i++) coll_int(x, (long long)hit[i]);
}

void list_run(coll_ctx *x)
{
    switch (x->cmd) {
    case LATTICE_COLL_LPUSH:
    case LATTICE_COLL_RPUSH:
    case LATTICE_COLL_LPUSHX:
    case LATTICE_COLL_RPUSHX: push(x); break;
    case LATTICE_COLL_LPOP:
    case LATTICE_COLL_RPOP: pop(x); break;
    case LATTICE_COLL_LSET: lset(x); break;
    case LATTICE_COLL_LINSERT: linsert(x); break;
    case LATTICE_COLL_LREM: lrem(x); break;
    case LATTICE_COLL_LTRIM: ltrim(x); break;
    case LATTICE_COLL_LLEN: llen(x); break;
    case LATTICE_COLL_LRANGE: lrange(x); break;
    case LATTICE_COLL_LINDEX: lindex(x); break;
    case LATTICE_COLL_LPOS: lpos(x); break;
    default: x->r->status = LATTICE_ERR_INVAL; break;
    }
}

/* ---- LMOVE / RPOPLPUSH: two keys of one partition in one step ---- */

void exec_lmove(lattice_meta_cache *c, uint32_t partition, const void *src, size_t src_len, const void *dst,
                size_t dst_len, unsigned where, exec_scratch *s, lattice_op_result *r, exec_wrote_fn wrote, void *arg)
{
    memset(r, 0, sizeof *r);
    int st, ts = coll_live_type(c, partition, src, src_len, &st), td = 0;
    if (ts && ts != LATTICE_TYPE_LIST + 1 && (where & EXEC_LMOVE_WOKEN)) ts = 0; /* woken: no list there yet */
    if (st == LATTICE_OK && ts) td = coll_live_type(c, partition, dst, dst_len, &st);
    if (st != LATTICE_OK) {
        r->status = st;
        return;
    }
    /* lmoveGenericCommand's order: the source's type, an empty source (nil:
     * the destination is not looked at), then the destination's type. */
    int bad = ts && ts != LATTICE_TYPE_LIST + 1 ? ts : ts && td && td != LATTICE_TYPE_LIST + 1 ? td : 0;
    if (bad) {
        r->status = LATTICE_ERR_WRONGTYPE;
        r->flags |= LATTICE_OP_R_FOUND | LATTICE_OP_R_TYPE_FLAGS(bad - 1);
        return;
    }
    coll_ctx x = {.s = s, .r = r}; /* the reply's builder only */
    if (!ts) {
        s->reply_len = 0;
        coll_null(&x);
        if (x.nomem) r->status = LATTICE_ERR_NOMEM;
        r->value = s->reply;
        r->value_len = s->reply_len;
        return;
    }
    /* The element first (LINDEX 0 / -1): the copy pushed is made before
     * anything changes, so memory short changes nothing. */
    bool right = where & EXEC_LMOVE_FROM_RIGHT;
    unsigned char packed[12];
    lattice_coll_put_u32(packed, 1);
    lattice_coll_put_u32(packed + 4, 2);
    memcpy(packed + 8, right ? "-1" : "0", 2);
    exec_in peek = {LATTICE_OP_COLL_READ, 0, partition, src, src_len, packed, right ? 10u : 9u, LATTICE_COLL_LINDEX, 0};
    if (!right) lattice_coll_put_u32(packed + 4, 1);
    repl_out w;
    exec_coll(c, &peek, s, r, &w);
    lattice_coll_elem e;
    size_t off = 0;
    if (r->status != LATTICE_OK || lattice_coll_reply_next(r->value, r->value_len, &off, &e) != 1 || e.type != '$') {
        if (r->status == LATTICE_OK) r->status = LATTICE_ERR_PROTO;
        return;
    }
    size_t n = 8 + e.len;
    unsigned char *p = lt_malloc(n); /* the element, packed as a push's one argument */
    if (!p) {
        r->status = LATTICE_ERR_NOMEM;
        return;
    }
    lattice_coll_put_u32(p, 1);
    lattice_coll_put_u32(p + 4, (uint32_t)e.len);
    memcpy(p + 8, e.ptr, e.len);
    lattice_coll_put_u32(packed, 0);
    exec_in pop = {LATTICE_OP_COLL_WRITE, 0, partition, src, src_len, packed, 4,
                   right ? LATTICE_COLL_RPOP : LATTICE_COLL_LPOP, 0};
    exec_coll(c, &pop, s, r, &w);
    if (r->status != LATTICE_OK || !w.needed) {
        if (r->status == LATTICE_OK) r->status = LATTICE_ERR_PROTO;
        lt_free(p);
        return;
    }
    wrote(arg, src, src_len, &w);
    exec_in push = {LATTICE_OP_COLL_WRITE, 0, partition, dst, dst_len, p, n,
                    where & EXEC_LMOVE_TO_RIGHT ? LATTICE_COLL_RPUSH : LATTICE_COLL_LPUSH, 0};
    exec_coll(c, &push, s, r, &w);
    if (r->status == LATTICE_OK && w.needed) {
        wrote(arg, dst, dst_len, &w);
        s->reply_len = 0; /* the reply: the element moved */
        coll_bulk(&x, p + 8, e.len);
        if (x.nomem) r->status = LATTICE_ERR_NOMEM;
        r->value = s->reply;
        r->value_len = s->reply_len;
        r->num = 1; /* moved one (0: nothing to move) */
    } else {
        /* The push failed (a full region): the element goes back where it
         * was - the pop freed its room - and the push's error answers. */
        lattice_op_result back;
        lattice_status why = r->status == LATTICE_OK ? LATTICE_ERR_PROTO : r->status;
        push.key = src;
        push.key_len = src_len;
        push.delta = right ? LATTICE_COLL_RPUSH : LATTICE_COLL_LPUSH;
        exec_coll(c, &push, s, &back, &w);
        if (back.status == LATTICE_OK && w.needed) wrote(arg, src, src_len, &w);
        *r = (lattice_op_result){.status = why};
    }
    lt_free(p);
}

/* ---- BLPOP / BRPOP / BZPOPMIN / BZPOPMAX, LMPOP / ZMPOP and their blocking
 * forms: the first key of several that holds an element, in one step ---- */

/* The reply of a pop from key k, rebuilt from the pop's own reply (inner,
 * len bytes; a copy - the reply buffer is reused): [k, element],
 * [k, member, score], or with a count (LMPOP / ZMPOP) [k, [elements]] and
 * [k, [[member, score] ...]]. */
static void bpop_reply(coll_ctx *x, lattice_coll_arg k, const char *inner, size_t len, bool zset, bool counted)
{
    lattice_coll_elem e;
    size_t at = 0;
    x->s->reply_len = 0;
    if (!zset && counted) { /* LPOP k n answered an array: spliced in whole */
        coll_array(x, 2);
        coll_bulk(x, k.ptr, k.len);
        coll_raw(x, inner, len);
        return;
    }
    if (lattice_coll_reply_next(inner, len, &at, &e) != 1) {
        x->r->status = LATTICE_ERR_PROTO;
        return;
    }
    if (!zset) { /* LPOP k: the element */
        coll_array(x, 2);
        coll_bulk(x, k.ptr, k.len);
        coll_bulk(x, e.ptr, e.len);
        return;
    }
    /* ZPOPMIN k: "*2" member score; ZPOPMIN k n: "&n" then n pairs */
    size_t pairs = counted ? (size_t)e.num : 1;
    coll_array(x, counted ? 2 : 3);
    coll_bulk(x, k.ptr, k.len);
    if (counted) coll_array(x, pairs);
    for (size_t i = 0; i < pairs; i++) {
        lattice_coll_elem m, sc;
        if (lattice_coll_reply_next(inner, len, &at, &m) != 1 || lattice_coll_reply_next(inner, len, &at, &sc) != 1 ||
            sc.type != ',') {
            x->r->status = LATTICE_ERR_PROTO;
            return;
        }
        char text[64];
        snprintf(text, sizeof text, "%.*s", (int)(sc.len < 63 ? sc.len : 63), sc.ptr);
        if (counted) coll_array(x, 2);
        coll_bulk(x, m.ptr, m.len);
        coll_double(x, strtod(text, NULL)); /* "%.17g" read back is the same double */
    }
}

void exec_bpop(lattice_meta_cache *c, uint32_t partition, const void *key, size_t key_len, const void *others,
               size_t others_len, unsigned which, long long count, exec_scratch *s, lattice_op_result *r,
               exec_wrote_fn wrote, void *arg)
{
    memset(r, 0, sizeof *r);
    size_t n = 0, off = 4;
    if (!lattice_coll_unpacked_count(others, others_len, &n) || count < 0) {
        r->status = LATTICE_ERR_INVAL;
        return;
    }
    bool zset = which & EXEC_BPOP_ZSET, right = which & EXEC_BPOP_RIGHT;
    int want = (zset ? LATTICE_TYPE_ZSET : LATTICE_TYPE_LIST) + 1;
    coll_ctx x = {.s = s, .r = r}; /* the reply's builder only */
    for (size_t i = 0; i <= n; i++) {
        lattice_coll_arg k = {key, key_len};
        if (i) k = lattice_coll_unpack_next(others, &off);
        int st, t = coll_live_type(c, partition, k.ptr, k.len, &st);
        if (st != LATTICE_OK) {
            r->status = st;
            return;
        }
        if (!t || (t != want && (which & EXEC_BPOP_WOKEN))) continue; /* woken: Redis serves only a key of the type */
        if (t != want) { /* blockingPopGenericCommand: the first key of another type answers */
            r->status = LATTICE_ERR_WRONGTYPE;
            r->flags |= LATTICE_OP_R_FOUND | LATTICE_OP_R_TYPE_FLAGS(t - 1);
            return;
        }
        /* The pop itself: LPOP / RPOP / ZPOPMIN / ZPOPMAX k [count]. */
        char num[24];
        lattice_coll_arg ca = {num, (size_t)snprintf(num, sizeof num, "%lld", count)};
        unsigned char packed[8 + sizeof num];
        size_t plen = lattice_coll_pack(packed, sizeof packed, &ca, count ? 1 : 0);
        int cmd = zset ? (right ? LATTICE_COLL_ZPOPMAX : LATTICE_COLL_ZPOPMIN) : (right ? LATTICE_COLL_RPOP : LATTICE_COLL_LPOP);
        exec_in pop = {LATTICE_OP_COLL_WRITE, 0, partition, k.ptr, k.len, packed, plen, (uint64_t)cmd, 0};
        repl_out w;
        exec_coll(c, &pop, s, r, &w);
        if (r->status != LATTICE_OK || !w.needed) {
            if (r->status == LATTICE_OK) r->status = LATTICE_ERR_PROTO; /* a live list or set pops one */
            return;
        }
        wrote(arg, k.ptr, k.len, &w);
        char *inner = lt_malloc(r->value_len ? r->value_len : 1);
        if (!inner) {
            r->status = LATTICE_ERR_NOMEM; /* popped and replicated: the issuer learns it failed, as a lost reply */
            return;
        }
        size_t len = r->value_len;
        memcpy(inner, r->value, len);
        bpop_reply(&x, k, inner, len, zset, count > 0);
        lt_free(inner);
        if (x.nomem) r->status = LATTICE_ERR_NOMEM;
        r->value = s->reply;
        r->value_len = s->reply_len;
        r->num = 1;
        return;
    }
    s->reply_len = 0; /* nothing to pop */
    coll_null_array(&x);
    if (x.nomem) r->status = LATTICE_ERR_NOMEM;
    r->value = s->reply;
    r->value_len = s->reply_len;
    r->num = 0;
}
