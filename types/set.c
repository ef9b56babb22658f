/*
 * set: Redis 7.0's set commands (t_set.c) on a value of type
 * LATTICE_TYPE_SET, in coll.c's frame: SISMEMBER, SMISMEMBER, SCARD,
 * SMEMBERS, SRANDMEMBER, SSCAN, SADD, SREM, SPOP.  Each command checks its
 * arguments in Redis's order (what Redis checks before it looks the key up
 * comes first: SPOP's and SRANDMEMBER's count and their extra arguments,
 * SSCAN's cursor), then reads the key's row, answers, and writes the new
 * row (or removes the key when its last member went).
 *
 * The row (docs/TYPES.md):
 *
 *     byte 0   format: 1 = integers, 2 = members
 *     varint   member count
 *     then count times: varint member length, member bytes
 *
 * Format 1, "integers": every member is the canonical text of an int64
 * (what exec_parse_i64 accepts, no NUL: Redis's string2ll) and there are
 * at most 512 of them (Redis's set-max-intset-entries); the members are
 * kept sorted by numeric value, ascending - exactly Redis's intset, so
 * SMEMBERS, SSCAN and SRANDMEMBER/SPOP of the whole set list an integer set
 * as Redis does.  Lookups are binary searches.
 *
 * Format 2, "members": any bytes, in insertion order (a new member goes
 * last).  Redis 7.0 keeps these in a hashtable whose order is arbitrary:
 * clients (and our tests) compare such replies sorted.  Lookups are linear,
 * or through a hash index built for the command when it looks up many
 * members in a big set.
 *
 * A set is format 1 when its first members are integers, and becomes
 * format 2 when a non-integer member arrives or it grows past 512 members.
 * Removing members never converts it back - except where Redis builds a new
 * set: an SPOP whose count leaves few members (Redis's "case 3": the
 * members kept are copied into a new set, an intset if they are all
 * integers) rewrites the kept members as format 1 when they are integers
 * and at most 512, as Redis does.
 *
 * Randomness (SRANDMEMBER, SPOP) is coll_rand().  SPOP is a write like the
 * others: what it removed is simply absent from the new row, and the row is
 * what replicates - never the command.
 *
 * Every command reads the whole row and a write writes it again: O(members)
 * per command, as for hashes.  SSCAN answers the whole set at once with
 * cursor 0 (Redis does so for an intset, and for a hashtable small enough
 * for its COUNT).
 *
 * RESP3: Redis answers SMEMBERS and SPOP key count with a set ('~', an
 * array in RESP2): set_header.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "coll_int.h"
#include "lattice/alloc.h"

#define SET_ROW_INTS 1
#define SET_ROW_MEMBERS 2
#define SET_MAX_INTSET 512            /* Redis's set-max-intset-entries default */
#define SPOP_MOVE_STRATEGY_MUL 5      /* t_set.c: when SPOP builds a new set of what it keeps */
#define SET_ERR_POSITIVE "ERR value is out of range, must be positive"

typedef struct smember {
    const char *p;
    size_t len;
    int64_t v;   /* its value, when it is an integer (format 1: always) */
    bool mark;   /* removed (SREM), popped or kept (SPOP) */
} smember;

/* The key's set as one command sees it. */
typedef struct sset {
    smember *v;   /* in coll_items, with room for the members a command may add */
    size_t n;
    int fmt;      /* SET_ROW_INTS or SET_ROW_MEMBERS; 0: the key is absent */
    coll_index ix; /* format 2: a hash index of v, or none */
} sset;

/* A member Redis's intset can hold: the canonical text of an int64. */
static bool is_int(const void *p, size_t len, int64_t *v)
{
    return exec_parse_i64(p, len, v); /* no NUL, as Redis's string2ll */
}

static int by_value(const void *a, const void *b)
{
    int64_t x = ((const smember *)a)->v, y = ((const smember *)b)->v;
    return (x > y) - (x < y);
}

/* Every member of v[0..n) an integer (their values set): an intset in Redis. */
static bool all_ints(smember *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!is_int(v[i].p, v[i].len, &v[i].v)) return false;
    return true;
}

/* ---- the row ---- */

/* The key's members (x->found) in s, in a table with room for extra more;
 * false with r->status set when the row is malformed (PROTO: an unknown
 * format, no member, an integer row out of order or holding another
 * member) or memory short. */
static bool decode(coll_ctx *x, sset *s, size_t extra)
{
    const unsigned char *old = x->s->old;
    uint8_t fmt = x->found && x->meta.value_len && old[0] == SET_ROW_MEMBERS ? SET_ROW_MEMBERS : SET_ROW_INTS;
    coll_reader w;
    s->n = 0;
    s->fmt = 0;
    if (!coll_row_open(x, fmt, &w)) return false;
    if (x->found && (w.count == 0 || (fmt == SET_ROW_INTS && w.count > SET_MAX_INTSET))) goto bad;
    if (extra > SIZE_MAX - w.count || !(s->v = coll_items(x, w.count + extra, sizeof *s->v))) {
        x->r->status = LATTICE_ERR_NOMEM;
        return false;
    }
    for (size_t i = 0; i < w.count; i++) {
        smember *m = &s->v[i];
        *m = (smember){NULL, 0, 0, false};
        if (!coll_row_bytes(x, &w, &m->p, &m->len)) return false;
        if (fmt == SET_ROW_INTS && (!is_int(m->p, m->len, &m->v) || (i && m->v <= s->v[i - 1].v))) goto bad;
    }
    if (!coll_row_close(x, &w)) return false;
    s->n = w.count;
    if (x->found) s->fmt = fmt;
    return true;
bad:
    x->r->status = LATTICE_ERR_PROTO;
    return false;
}

/* Loads and decodes the key's set (absent: empty, fmt 0) with room for extra. */
static bool load(coll_ctx *x, sset *s, size_t extra)
{
    if (!coll_load(x, LATTICE_TYPE_SET)) return false;
    return decode(x, s, extra);
}

/* Writes v[0..n) as the key's row in format fmt, or removes the key when n is 0. */
static bool store(coll_ctx *x, const smember *v, size_t n, int fmt)
{
    if (n == 0) return coll_remove(x);
    size_t body = 0;
    for (size_t i = 0; i < n; i++) body += coll_item_len(v[i].len);
    unsigned char *p = coll_row_start(x, (uint8_t)fmt, n, body);
    if (!p) return false;
    for (size_t i = 0; i < n; i++) p = coll_item_put(p, v[i].p, v[i].len);
    return coll_write(x, coll_row_size(n, body), LATTICE_TYPE_SET);
}

/* The unmarked members of s->v moved to its front, in order: their number. */
static size_t compact(sset *s)
{
    size_t k = 0;
    for (size_t i = 0; i < s->n; i++)
        if (!s->v[i].mark) s->v[k++] = s->v[i];
    return k;
}

/* ---- lookups ---- */

static coll_bytes skey(const void *tab, size_t i)
{
    const smember *v = tab;
    return (coll_bytes){v[i].p, v[i].len};
}

/* A format 2 set about to be looked up `lookups` times while it grows to
 * at most room members: a hash index of it when that saves work.  False:
 * memory short (r->status). */
static bool maybe_index(coll_ctx *x, sset *s, size_t lookups, size_t room)
{
    if (s->fmt != SET_ROW_MEMBERS || s->ix.slot || !coll_index_worth(lookups, room)) return true;
    return coll_index_build(x, &s->ix, s->v, s->n, room, skey);
}

/* The position of the member (p, len) in s (marked ones included), or s->n. */
static size_t sfind(const sset *s, const void *p, size_t len)
{
    if (s->fmt == SET_ROW_INTS) {
        int64_t v;
        if (!is_int(p, len, &v)) return s->n;
        size_t lo = 0, hi = s->n;
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (s->v[mid].v < v) lo = mid + 1;
            else hi = mid;
        }
        return lo < s->n && s->v[lo].v == v ? lo : s->n;
    }
    return coll_index_find(&s->ix, s->v, s->n, p, len, skey); /* linear without an index */
}

static bool has(const sset *s, const lattice_coll_arg *a)
{
    size_t k = sfind(s, a->ptr, a->len);
    return k < s->n && !s->v[k].mark;
}

/* ---- replies ---- */

/* The header of what Redis answers with addReplySetLen / shared.emptyset
 * (SMEMBERS, SPOP key count): a set in RESP3 there, an array here until
 * the reply framing has a set. */
static void set_header(coll_ctx *x, size_t n) { coll_set(x, n); }

static void bulk(coll_ctx *x, const smember *m) { coll_bulk(x, m->p, m->len); }

/* ---- writes ---- */

/* SADD key member [member ...]: the number of members added, a member given
 * twice counted once. */
static void sadd(coll_ctx *x, sset *s)
{
    if (!load(x, s, x->argc)) return;
    size_t n0 = s->n;
    bool ints = s->fmt != SET_ROW_MEMBERS;
    for (size_t i = 0; ints && i < x->argc; i++)
        ints = is_int(x->argv[i].ptr, x->argv[i].len, &s->v[n0 + i].v);
    size_t n = n0;
    int fmt = SET_ROW_MEMBERS;
    if (ints) {
        /* an intset (or a new key) given integers: merged, sorted, unique */
        for (size_t i = 0; i < x->argc; i++) {
            s->v[n].p = x->argv[i].ptr;
            s->v[n].len = x->argv[i].len;
            s->v[n++].mark = false;
        }
        qsort(s->v, n, sizeof *s->v, by_value);
        size_t u = 0;
        for (size_t i = 0; i < n; i++)
            if (u == 0 || s->v[i].v != s->v[u - 1].v) s->v[u++] = s->v[i];
        n = u;
        if (n <= SET_MAX_INTSET) fmt = SET_ROW_INTS;
    } else {
        /* members (an intset converts, its members keep their order): new ones go last */
        s->fmt = SET_ROW_MEMBERS;
        if (!maybe_index(x, s, x->argc, n0 + x->argc)) return;
        for (size_t i = 0; i < x->argc; i++) {
            const lattice_coll_arg *a = &x->argv[i];
            if (sfind(s, a->ptr, a->len) < s->n) continue;
            s->v[s->n] = (smember){a->ptr, a->len, 0, false};
            if (s->ix.slot) coll_index_add(&s->ix, s->v, s->n, skey);
            s->n++;
        }
        n = s->n;
    }
    size_t added = n - n0;
    if (added && !store(x, s->v, n, fmt)) return;
    x->r->num = (int64_t)added;
    coll_int(x, (long long)added);
}

/* SREM key member [member ...]: the number removed; the last one removes the key. */
static void srem(coll_ctx *x, sset *s)
{
    if (!load(x, s, 0)) return;
    size_t removed = 0;
    if (!maybe_index(x, s, x->argc, s->n)) return;
    for (size_t i = 0; i < x->argc && removed < s->n; i++) {
        size_t k = sfind(s, x->argv[i].ptr, x->argv[i].len);
        if (k == s->n || s->v[k].mark) continue;
        s->v[k].mark = true;
        removed++;
    }
    if (removed && !store(x, s->v, compact(s), s->fmt)) return;
    x->r->num = (int64_t)removed;
    coll_int(x, (long long)removed);
}

/* A random permutation's first k positions of 0..n-1 (partial
 * Fisher-Yates) in a new table; NULL (r->status) when memory is short. */
static size_t *pick(coll_ctx *x, size_t n, size_t k)
{
    size_t *idx = n <= SIZE_MAX / sizeof *idx ? lt_malloc((n ? n : 1) * sizeof *idx) : NULL;
    if (!idx) {
        x->r->status = LATTICE_ERR_NOMEM;
        return NULL;
    }
    for (size_t i = 0; i < n; i++) idx[i] = i;
    for (size_t i = 0; i < k; i++) {
        size_t j = i + (size_t)(coll_rand() % (n - i)), t = idx[i];
        idx[i] = idx[j];
        idx[j] = t;
    }
    return idx;
}

/* SPOP key count (spopWithCountCommand): the whole set when count reaches
 * its size (the key removed); otherwise count distinct random members. */
static void spop_count(coll_ctx *x, sset *s, unsigned long long count)
{
    size_t n = s->n;
    if (count >= n) {
        /* Redis answers the union of the set alone: an intset again (sorted)
         * when every member is an integer and there are at most 512 */
        if (s->fmt == SET_ROW_MEMBERS && n <= SET_MAX_INTSET && all_ints(s->v, n))
            qsort(s->v, n, sizeof *s->v, by_value);
        set_header(x, n);
        for (size_t i = 0; i < n; i++) bulk(x, &s->v[i]);
        coll_remove(x);
        return;
    }
    size_t remaining = n - (size_t)count;
    set_header(x, (size_t)count);
    if ((unsigned long long)remaining * SPOP_MOVE_STRATEGY_MUL > count) {
        /* case 2: count random members taken out one by one */
        size_t *idx = pick(x, n, (size_t)count);
        if (!idx) return;
        for (size_t i = 0; i < count; i++) {
            s->v[idx[i]].mark = true;
            bulk(x, &s->v[idx[i]]);
        }
        lt_free(idx);
        store(x, s->v, compact(s), s->fmt);
        return;
    }
    /* case 3: the members to keep picked at random (a new set of them,
     * made an intset when they fit one), the others answered in the set's
     * order */
    size_t *idx = pick(x, n, remaining);
    if (!idx) return;
    for (size_t i = 0; i < remaining; i++) s->v[idx[i]].mark = true;
    lt_free(idx);
    for (size_t i = 0; i < n; i++)
        if (!s->v[i].mark) bulk(x, &s->v[i]);
    for (size_t i = 0; i < n; i++) s->v[i].mark = !s->v[i].mark;
    size_t kept = compact(s);
    int fmt = s->fmt;
    if (fmt == SET_ROW_MEMBERS && kept <= SET_MAX_INTSET && all_ints(s->v, kept)) {
        qsort(s->v, kept, sizeof *s->v, by_value);
        fmt = SET_ROW_INTS;
    }
    store(x, s->v, kept, fmt);
}

/* SPOP key [count] (spopCommand): one random member (nil when absent), or
 * with a count an array of them; the member(s) leave the set. */
static void spop(coll_ctx *x, sset *s)
{
    long long l = 0;
    if (x->argc > 1) {
        coll_error(x, COLL_ERR_SYNTAX);
        return;
    }
    bool counted = x->argc == 1;
    if (counted && (!coll_arg_ll(&x->argv[0], &l) || l < 0)) {
        coll_error(x, SET_ERR_POSITIVE);
        return;
    }
    if (!load(x, s, 0)) return;
    if (!x->found || (counted && l == 0)) {
        if (counted) set_header(x, 0);
        else coll_null(x);
        return;
    }
    if (counted) {
        spop_count(x, s, (unsigned long long)l);
        return;
    }
    smember *m = &s->v[coll_rand() % s->n];
    m->mark = true;
    bulk(x, m);
    store(x, s->v, compact(s), s->fmt);
}

/* ---- reads ---- */

static void sismember(coll_ctx *x, sset *s)
{
    if (!load(x, s, 0)) return;
    coll_int(x, has(s, &x->argv[0]));
}

/* SMISMEMBER: an absent key is an empty set, its answers zeros. */
static void smismember(coll_ctx *x, sset *s)
{
    if (!load(x, s, 0) || !maybe_index(x, s, x->argc, s->n)) return;
    coll_array(x, x->argc);
    for (size_t i = 0; i < x->argc; i++) coll_int(x, has(s, &x->argv[i]));
}

static void scard(coll_ctx *x, sset *s)
{
    if (!load(x, s, 0)) return;
    coll_int(x, (long long)s->n);
}

/* SMEMBERS (sinterCommand of one key): the members in the set's order. */
static void smembers(coll_ctx *x, sset *s)
{
    if (!load(x, s, 0)) return;
    set_header(x, s->n);
    for (size_t i = 0; i < s->n; i++) bulk(x, &s->v[i]);
}

/* SRANDMEMBER key [count] (srandmemberCommand, srandmemberWithCountCommand):
 * without a count one member or nil; a negative count that many picks,
 * repeats allowed; a positive one distinct members, the whole set (in its
 * order) when it has no more. */
static void srandmember(coll_ctx *x, sset *s)
{
    long long l = 0;
    if (x->argc > 1) {
        coll_error(x, COLL_ERR_SYNTAX);
        return;
    }
    bool counted = x->argc == 1;
    if (counted) {
        if (!coll_arg_ll(&x->argv[0], &l)) {
            coll_error(x, COLL_ERR_NOT_INT);
            return;
        }
        if (l < -LLONG_MAX) {
            coll_error(x, COLL_ERR_LONG_RANGE);
            return;
        }
    }
    if (!load(x, s, 0)) return;
    size_t n = s->n;
    if (!counted) {
        if (!n) coll_null(x);
        else bulk(x, &s->v[coll_rand() % n]);
        return;
    }
    if (!n || l == 0) {
        coll_array(x, 0);
        return;
    }
    if (l < 0 || l == 1) {
        unsigned long long count = l < 0 ? (unsigned long long)-l : 1;
        coll_array(x, count);
        for (unsigned long long i = 0; i < count && !x->nomem; i++) bulk(x, &s->v[coll_rand() % n]);
        return;
    }
    if ((unsigned long long)l >= n) {
        coll_array(x, n);
        for (size_t i = 0; i < n; i++) bulk(x, &s->v[i]);
        return;
    }
    /* A partial shuffle of the table (a copy of the row's): its first count entries. */
    size_t count = (size_t)l;
    coll_array(x, count);
    for (size_t i = 0; i < count; i++) {
        size_t j = i + (size_t)(coll_rand() % (n - i));
        smember t = s->v[i];
        s->v[i] = s->v[j];
        s->v[j] = t;
        bulk(x, &s->v[i]);
    }
}

/* SSCAN cursor [MATCH pattern] [COUNT count] (sscanCommand): the whole set
 * in one answer, cursor 0 (as Redis answers for an intset, whatever the
 * cursor); MATCH keeps the members it matches. */
static void sscan(coll_ctx *x, sset *s)
{
    if (!coll_scan_cursor(x)) return;
    if (!load(x, s, 0)) return;
    if (!x->found) {
        coll_empty_scan(x);
        return;
    }
    char *pat = NULL;
    size_t plen = 0;
    if (!coll_scan_options(x, &pat, &plen)) return;
    size_t kept = 0;
    for (size_t i = 0; i < s->n; i++)
        if (!pat || lt_glob_match(pat, plen, s->v[i].p, s->v[i].len, 0)) s->v[kept++] = s->v[i];
    lt_free(pat);
    coll_array(x, 2);
    coll_bulk(x, "0", 1);
    coll_array(x, kept);
    for (size_t i = 0; i < kept; i++) bulk(x, &s->v[i]);
}

void set_run(coll_ctx *x)
{
    sset s = {0};
    switch (x->cmd) {
    case LATTICE_COLL_SADD: sadd(x, &s); break;
    case LATTICE_COLL_SREM: srem(x, &s); break;
    case LATTICE_COLL_SPOP: spop(x, &s); break;
    case LATTICE_COLL_SISMEMBER: sismember(x, &s); break;
    case LATTICE_COLL_SMISMEMBER: smismember(x, &s); break;
    case LATTICE_COLL_SCARD: scard(x, &s); break;
    case LATTICE_COLL_SMEMBERS: smembers(x, &s); break;
    case LATTICE_COLL_SRANDMEMBER: srandmember(x, &s); break;
    case LATTICE_COLL_SSCAN: sscan(x, &s); break;
    default: x->r->status = LATTICE_ERR_INVAL; break;
    }
    coll_index_free(&s.ix);
}
