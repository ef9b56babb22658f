/*
 * coll: the frame every collection command runs in (LATTICE_OP_COLL_READ
 * and _WRITE, lattice/coll.h) - its packed arguments checked and laid out,
 * the key's value read with its type checked, the reply built in RESP3's
 * framing, the new value written (or the key removed when the collection
 * emptied) with the partition's next update counter.  The commands of each
 * type are in a file of their own (hash.c, list.c, set.c, zset.c).  Pure as the rest of types/:
 * the primary runs it (ops/primary.c), a clean copy a read of it.
 *
 * Replication: a write replicates the key's new value as any write does
 * (repl_out), so a copy applies it with exec_replicate_typed.
 */
#include <errno.h>
#include <limits.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/base.h"
#include "coll_int.h"
#include "lattice/alloc.h"
#include "lattice/clock.h"

/* A reply longer than this is refused (NOMEM) rather than built: it could
 * not travel in one data-channel frame either (HRANDFIELD -1000000000). */
#define COLL_REPLY_MAX ((size_t)64 << 20)

/* Each command: its name in Redis's error texts, the file of its type,
 * and how many arguments it takes after the key - exactly or at least
 * args, as Redis's arity says (which counts the command's name and key
 * too); exec_coll answers Redis's arity error before anything else.  The
 * few further rules (HSET's pairs, LPOP's one count ...) are the
 * commands' own. */
enum { EXACT, AT_LEAST };
typedef struct coll_def {
    const char *name;
    void (*run)(coll_ctx *x);
    unsigned char args, rule;
} coll_def;

static void object_run(coll_ctx *x);

static const coll_def defs[LATTICE_COLL_CMD_MAX_ + 1] = {
    [LATTICE_COLL_HGET] = {"hget", hash_run, 1, EXACT},
    [LATTICE_COLL_HMGET] = {"hmget", hash_run, 1, AT_LEAST},
    [LATTICE_COLL_HLEN] = {"hlen", hash_run, 0, EXACT},
    [LATTICE_COLL_HSTRLEN] = {"hstrlen", hash_run, 1, EXACT},
    [LATTICE_COLL_HEXISTS] = {"hexists", hash_run, 1, EXACT},
    [LATTICE_COLL_HKEYS] = {"hkeys", hash_run, 0, EXACT},
    [LATTICE_COLL_HVALS] = {"hvals", hash_run, 0, EXACT},
    [LATTICE_COLL_HGETALL] = {"hgetall", hash_run, 0, EXACT},
    [LATTICE_COLL_HRANDFIELD] = {"hrandfield", hash_run, 0, AT_LEAST},
    [LATTICE_COLL_HSCAN] = {"hscan", hash_run, 1, AT_LEAST},
    [LATTICE_COLL_HSET] = {"hset", hash_run, 2, AT_LEAST},
    [LATTICE_COLL_HSETNX] = {"hsetnx", hash_run, 2, EXACT},
    [LATTICE_COLL_HMSET] = {"hmset", hash_run, 2, AT_LEAST},
    [LATTICE_COLL_HDEL] = {"hdel", hash_run, 1, AT_LEAST},
    [LATTICE_COLL_HINCRBY] = {"hincrby", hash_run, 2, EXACT},
    [LATTICE_COLL_HINCRBYFLOAT] = {"hincrbyfloat", hash_run, 2, EXACT},
    [LATTICE_COLL_LLEN] = {"llen", list_run, 0, EXACT},
    [LATTICE_COLL_LRANGE] = {"lrange", list_run, 2, EXACT},
    [LATTICE_COLL_LINDEX] = {"lindex", list_run, 1, EXACT},
    [LATTICE_COLL_LPOS] = {"lpos", list_run, 1, AT_LEAST},
    [LATTICE_COLL_LPUSH] = {"lpush", list_run, 1, AT_LEAST},
    [LATTICE_COLL_RPUSH] = {"rpush", list_run, 1, AT_LEAST},
    [LATTICE_COLL_LPUSHX] = {"lpushx", list_run, 1, AT_LEAST},
    [LATTICE_COLL_RPUSHX] = {"rpushx", list_run, 1, AT_LEAST},
    [LATTICE_COLL_LPOP] = {"lpop", list_run, 0, AT_LEAST},
    [LATTICE_COLL_RPOP] = {"rpop", list_run, 0, AT_LEAST},
    [LATTICE_COLL_LSET] = {"lset", list_run, 2, EXACT},
    [LATTICE_COLL_LINSERT] = {"linsert", list_run, 3, EXACT},
    [LATTICE_COLL_LREM] = {"lrem", list_run, 2, EXACT},
    [LATTICE_COLL_LTRIM] = {"ltrim", list_run, 2, EXACT},
    [LATTICE_COLL_SISMEMBER] = {"sismember", set_run, 1, EXACT},
    [LATTICE_COLL_SMISMEMBER] = {"smismember", set_run, 1, AT_LEAST},
    [LATTICE_COLL_SCARD] = {"scard", set_run, 0, EXACT},
    [LATTICE_COLL_SMEMBERS] = {"smembers", set_run, 0, EXACT},
    [LATTICE_COLL_SRANDMEMBER] = {"srandmember", set_run, 0, AT_LEAST},
    [LATTICE_COLL_SSCAN] = {"sscan", set_run, 1, AT_LEAST},
    [LATTICE_COLL_SADD] = {"sadd", set_run, 1, AT_LEAST},
    [LATTICE_COLL_SREM] = {"srem", set_run, 1, AT_LEAST},
    [LATTICE_COLL_SPOP] = {"spop", set_run, 0, AT_LEAST},
    [LATTICE_COLL_ZCARD] = {"zcard", zset_run, 0, EXACT},
    [LATTICE_COLL_ZSCORE] = {"zscore", zset_run, 1, EXACT},
    [LATTICE_COLL_ZMSCORE] = {"zmscore", zset_run, 1, AT_LEAST},
    [LATTICE_COLL_ZRANK] = {"zrank", zset_run, 1, EXACT},
    [LATTICE_COLL_ZREVRANK] = {"zrevrank", zset_run, 1, EXACT},
    [LATTICE_COLL_ZCOUNT] = {"zcount", zset_run, 2, EXACT},
    [LATTICE_COLL_ZLEXCOUNT] = {"zlexcount", zset_run, 2, EXACT},
    [LATTICE_COLL_ZRANGE] = {"zrange", zset_run, 2, AT_LEAST},
    [LATTICE_COLL_ZREVRANGE] = {"zrevrange", zset_run, 2, AT_LEAST},
    [LATTICE_COLL_ZRANGEBYSCORE] = {"zrangebyscore", zset_run, 2, AT_LEAST},
    [LATTICE_COLL_ZREVRANGEBYSCORE] = {"zrevrangebyscore", zset_run, 2, AT_LEAST},
    [LATTICE_COLL_ZRANGEBYLEX] = {"zrangebylex", zset_run, 2, AT_LEAST},
    [LATTICE_COLL_ZREVRANGEBYLEX] = {"zrevrangebylex", zset_run, 2, AT_LEAST},
    [LATTICE_COLL_ZRANDMEMBER] = {"zrandmember", zset_run, 0, AT_LEAST},
    [LATTICE_COLL_ZSCAN] = {"zscan", zset_run, 1, AT_LEAST},
    [LATTICE_COLL_ZRANGESTORE] = {"zrangestore", zset_run, 2, AT_LEAST},
    [LATTICE_COLL_GEOADD] = {"geoadd", geo_run, 3, AT_LEAST},
    [LATTICE_COLL_GEOPOS] = {"geopos", geo_run, 0, AT_LEAST},
    [LATTICE_COLL_GEODIST] = {"geodist", geo_run, 2, AT_LEAST},
    [LATTICE_COLL_GEOHASH] = {"geohash", geo_run, 0, AT_LEAST},
    [LATTICE_COLL_GEORADIUS] = {"georadius", geo_run, 4, AT_LEAST},
    [LATTICE_COLL_GEORADIUS_RO] = {"georadius_ro", geo_run, 4, AT_LEAST},
    [LATTICE_COLL_GEORADIUSBYMEMBER] = {"georadiusbymember", geo_run, 3, AT_LEAST},
    [LATTICE_COLL_GEORADIUSBYMEMBER_RO] = {"georadiusbymember_ro", geo_run, 3, AT_LEAST},
    [LATTICE_COLL_GEOSEARCH] = {"geosearch", geo_run, 1, AT_LEAST},
    [LATTICE_COLL_GEOSEARCHSTORE] = {"geosearchstore", geo_run, 1, AT_LEAST},
    [LATTICE_COLL_ZADD] = {"zadd", zset_run, 2, AT_LEAST},
    [LATTICE_COLL_ZINCRBY] = {"zincrby", zset_run, 2, EXACT},
    [LATTICE_COLL_ZREM] = {"zrem", zset_run, 1, AT_LEAST},
    [LATTICE_COLL_ZREMRANGEBYRANK] = {"zremrangebyrank", zset_run, 2, EXACT},
    [LATTICE_COLL_ZREMRANGEBYSCORE] = {"zremrangebyscore", zset_run, 2, EXACT},
    [LATTICE_COLL_ZREMRANGEBYLEX] = {"zremrangebylex", zset_run, 2, EXACT},
    [LATTICE_COLL_ZPOPMIN] = {"zpopmin", zset_run, 0, AT_LEAST},
    [LATTICE_COLL_ZPOPMAX] = {"zpopmax", zset_run, 0, AT_LEAST},
    [LATTICE_COLL_OBJECT] = {"object", object_run, 1, AT_LEAST},
};

static bool grow(void **p, size_t *cap, size_t need)
{
    if (need <= *cap && *p) return true;
    size_t nc = *cap ? *cap : 64;
    while (nc < need) nc *= 2;
    void *q = lt_realloc(*p, nc);
    if (!q) return false;
    *p = q;
    *cap = nc;
    return true;
}

void *coll_items(coll_ctx *x, size_t n, size_t elem)
{
    exec_scratch *s = x->s;
    size_t at = x->argc * sizeof *x->argv;
    if (n > (SIZE_MAX - at) / (elem ? elem : 1) || !grow(&s->items, &s->items_cap, at + n * elem)) {
        x->nomem = true;
        return NULL;
    }
    x->argv = s->items;
    return (char *)s->items + at;
}

void *coll_row(coll_ctx *x, size_t n)
{
    if (!exec_scratch_reserve(x->s, n)) {
        x->nomem = true;
        return NULL;
    }
    return x->s->buf;
}

int coll_live_type(lattice_meta_cache *c, uint32_t partition, const void *key, size_t len, int *st)
{
    lattice_store_meta m = {0};
    int g = lattice_store_get(c->store, partition, key, len, NULL, 0, &m);
    *st = LATTICE_OK;
    if (g == LATTICE_ERR_NOT_FOUND) return 0;
    if (g != LATTICE_OK && g != LATTICE_ERR_TOO_LARGE) {
        *st = g;
        return 0;
    }
    return m.type + 1;
}

bool coll_load(coll_ctx *x, uint8_t type)
{
    lattice_store_meta meta = {0};
    int st = exec_read_old(x->c, x->in, x->s, &meta);
    x->found = false;
    if (st == LATTICE_ERR_NOT_FOUND) return true;
    if (st != LATTICE_OK) {
        x->r->status = st;
        return false;
    }
    x->r->flags |= LATTICE_OP_R_FOUND | LATTICE_OP_R_TYPE_FLAGS(meta.type);
    if (meta.type != type) {
        x->r->status = LATTICE_ERR_WRONGTYPE;
        return false;
    }
    x->found = true;
    x->meta = meta;
    return true;
}

bool coll_write(coll_ctx *x, size_t n, uint8_t type)
{
    if (n > x->c->cfg.max_value_bytes) {
        x->r->status = LATTICE_ERR_TOO_LARGE;
        return false;
    }
    uint64_t expire = x->found ? x->meta.expire_ms : exec_expiry_for(x->c, 0);
    x->r->status = exec_write_typed(x->c, x->in, x->s->buf, n, expire, type, x->repl);
    return x->r->status == LATTICE_OK;
}

bool coll_remove(coll_ctx *x)
{
    x->r->status = exec_remove_entry(x->c, x->in, x->repl);
    return x->r->status == LATTICE_OK;
}

/* ---- rows ---- */

static bool malformed(coll_ctx *x)
{
    x->r->status = LATTICE_ERR_PROTO;
    return false;
}

bool coll_row_open(coll_ctx *x, uint8_t format, coll_reader *w)
{
    *w = (coll_reader){x->s->old, x->found ? x->meta.value_len : 0, 1, 0};
    if (!x->found) return true;
    uint64_t count;
    if (w->len < 2 || w->p[0] != format || !coll_varint_get(w->p, w->len, &w->off, &count) || count > w->len)
        return malformed(x);
    w->count = (size_t)count;
    return true;
}

bool coll_row_bytes(coll_ctx *x, coll_reader *w, const char **p, size_t *n)
{
    uint64_t l;
    if (!coll_varint_get(w->p, w->len, &w->off, &l) || l > w->len - w->off) return malformed(x);
    *p = (const char *)w->p + w->off;
    *n = (size_t)l;
    w->off += (size_t)l;
    return true;
}

bool coll_row_fixed(coll_ctx *x, coll_reader *w, size_t n, const unsigned char **p)
{
    if (n > w->len - w->off) return malformed(x);
    *p = w->p + w->off;
    w->off += n;
    return true;
}

bool coll_row_close(coll_ctx *x, const coll_reader *w) { return !x->found || w->off == w->len || malformed(x); }

unsigned char *coll_row_start(coll_ctx *x, uint8_t format, size_t count, size_t body)
{
    unsigned char *p = coll_row(x, coll_row_size(count, body));
    if (!p) {
        x->r->status = LATTICE_ERR_NOMEM;
        return NULL;
    }
    p[0] = format;
    return p + 1 + coll_varint_put(p + 1, count);
}

/* ---- the per-command index ---- */

static size_t slot_of(const void *p, size_t n)
{
    uint64_t h = lt_fnv1a(p, n);
    return (size_t)(h ^ (h >> 29));
}

bool coll_index_build(coll_ctx *x, coll_index *ix, const void *tab, size_t n, size_t cap, coll_key_fn key)
{
    size_t size = 16;
    while (size / 2 < cap) {
        if (size > SIZE_MAX / 4 / sizeof *ix->slot) {
            x->r->status = LATTICE_ERR_NOMEM;
            return false;
        }
        size *= 2;
    }
    if (!(ix->slot = lt_calloc(size, sizeof *ix->slot))) {
        x->r->status = LATTICE_ERR_NOMEM;
        return false;
    }
    ix->mask = size - 1;
    for (size_t i = 0; i < n; i++) coll_index_add(ix, tab, i, key);
    return true;
}

void coll_index_add(coll_index *ix, const void *tab, size_t i, coll_key_fn key)
{
    coll_bytes b = key(tab, i);
    size_t k = slot_of(b.p, b.n) & ix->mask;
    while (ix->slot[k]) k = (k + 1) & ix->mask;
    ix->slot[k] = i + 1;
}

static bool same_bytes(coll_bytes b, const void *p, size_t len) { return b.n == len && (!len || !memcmp(b.p, p, len)); }

size_t coll_index_find(const coll_index *ix, const void *tab, size_t n, const void *p, size_t len, coll_key_fn key)
{
    if (ix && ix->slot) {
        for (size_t k = slot_of(p, len) & ix->mask; ix->slot[k]; k = (k + 1) & ix->mask)
            if (same_bytes(key(tab, ix->slot[k] - 1), p, len)) return ix->slot[k] - 1;
        return n;
    }
    for (size_t i = 0; i < n; i++)
        if (same_bytes(key(tab, i), p, len)) return i;
    return n;
}

void coll_index_free(coll_index *ix)
{
    lt_free(ix->slot);
    ix->slot = NULL;
}

/* ---- the reply ---- */

static void put(coll_ctx *x, const void *p, size_t n)
{
    exec_scratch *s = x->s;
    if (x->nomem) return;
    if (n > COLL_REPLY_MAX - s->reply_len || !grow((void **)&s->reply, &s->reply_cap, s->reply_len + n)) {
        x->nomem = true;
        return;
    }
    memcpy(s->reply + s->reply_len, p, n);
    s->reply_len += n;
}

static void header(coll_ctx *x, char t, long long v)
{
    char h[32];
    int n = snprintf(h, sizeof h, "%c%lld\r\n", t, v);
    put(x, h, (size_t)n);
}

void coll_raw(coll_ctx *x, const void *p, size_t n) { put(x, p, n); }

void coll_simple(coll_ctx *x, const char *s)
{
    put(x, "+", 1);
    put(x, s, strlen(s));
    put(x, "\r\n", 2);
}

void coll_error(coll_ctx *x, const char *s)
{
    put(x, "-", 1);
    put(x, s, strlen(s));
    put(x, "\r\n", 2);
}

void coll_int(coll_ctx *x, long long v) { header(x, ':', v); }

void coll_bulk(coll_ctx *x, const void *p, size_t n)
{
    header(x, '$', (long long)n);
    put(x, p, n);
    put(x, "\r\n", 2);
}

void coll_null(coll_ctx *x) { put(x, "_\r\n", 3); }
void coll_null_array(coll_ctx *x) { put(x, "*-1\r\n", 5); }
void coll_array(coll_ctx *x, size_t n) { header(x, '*', (long long)n); }
void coll_map(coll_ctx *x, size_t n) { header(x, '%', (long long)n); }
void coll_set(coll_ctx *x, size_t n) { header(x, '~', (long long)n); }
void coll_pairs(coll_ctx *x, size_t n) { header(x, '&', (long long)n); }

void coll_double(coll_ctx *x, double d)
{
    char t[64];
    int n = isinf(d) ? snprintf(t, sizeof t, "%s", d > 0 ? "inf" : "-inf") : snprintf(t, sizeof t, "%.17g", d);
    put(x, ",", 1);
    put(x, t, (size_t)n);
    put(x, "\r\n", 2);
}

void coll_arity_error(coll_ctx *x)
{
    char m[96];
    snprintf(m, sizeof m, "ERR wrong number of arguments for '%s' command", x->name);
    coll_error(x, m);
}

uint64_t coll_rand(void)
{
    static __thread uint64_t s;
    if (!s) s = lt_mono_us() * 0x9e3779b97f4a7c15ull | 1;
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    return s;
}

/* ---- *SCAN's arguments (parseScanCursorOrReply, scanGenericCommand) ---- */

bool coll_scan_cursor(coll_ctx *x)
{
    if (x->argc < 1) {
        coll_arity_error(x);
        return false;
    }
    char cur[64], *end;
    const lattice_coll_arg *c0 = &x->argv[0];
    bool ok = c0->len < sizeof cur; /* Redis's strtoul: "" is 0, a leading blank or anything left over is not */
    if (ok) {
        memcpy(cur, c0->ptr, c0->len);
        cur[c0->len] = 0;
        errno = 0;
        (void)strtoul(cur, &end, 10);
        ok = !(cur[0] == ' ' || (cur[0] >= '\t' && cur[0] <= '\r')) && *end == 0 && errno != ERANGE;
    }
    if (!ok) coll_error(x, "ERR invalid cursor");
    return ok;
}

void coll_empty_scan(coll_ctx *x)
{
    coll_array(x, 2);
    coll_bulk(x, "0", 1);
    coll_array(x, 0);
}

bool coll_is(const lattice_coll_arg *a, const char *s)
{
    size_t n = strlen(s);
    const char *nul = memchr(a->ptr, 0, a->len); /* Redis's strcasecmp stops there */
    size_t al = nul ? (size_t)(nul - (const char *)a->ptr) : a->len;
    return al == n && strncasecmp(a->ptr, s, n) == 0;
}

bool coll_arg_ll(const lattice_coll_arg *a, long long *v)
{
    int64_t t;
    if (!exec_parse_i64(a->ptr, a->len, &t)) return false;
    *v = t;
    return true;
}

bool coll_rand_args(coll_ctx *x, const char *with, bool *counted, long long *count, bool *with_set)
{
    *counted = x->argc >= 1;
    *with_set = false;
    *count = 0;
    if (!*counted) return true;
    if (!coll_arg_ll(&x->argv[0], count)) {
        coll_error(x, COLL_ERR_NOT_INT);
        return false;
    }
    if (*count < -LLONG_MAX) {
        coll_error(x, COLL_ERR_LONG_RANGE);
        return false;
    }
    if (x->argc > 2 || (x->argc == 2 && !coll_is(&x->argv[1], with))) {
        coll_error(x, COLL_ERR_SYNTAX);
        return false;
    }
    *with_set = x->argc == 2;
    if (*with_set && (*count < -LLONG_MAX / 2 || *count > LLONG_MAX / 2)) {
        coll_error(x, "ERR value is out of range");
        return false;
    }
    return true;
}

bool coll_scan_options(coll_ctx *x, char **pattern, size_t *plen)
{
    const lattice_coll_arg *pat = NULL;
    *pattern = NULL;
    for (size_t i = 1; i < x->argc; i += 2) {
        size_t left = x->argc - i;
        if (coll_is(&x->argv[i], "count") && left >= 2) {
            long long cnt;
            if (!coll_arg_ll(&x->argv[i + 1], &cnt)) {
                coll_error(x, COLL_ERR_NOT_INT);
                return false;
            }
            if (cnt < 1) {
                coll_error(x, COLL_ERR_SYNTAX);
                return false;
            }
        } else if (coll_is(&x->argv[i], "match") && left >= 2) {
            pat = &x->argv[i + 1];
        } else {
            coll_error(x, COLL_ERR_SYNTAX);
            return false;
        }
    }
    if (!pat || (pat->len == 1 && *(const char *)pat->ptr == '*')) return true; /* "*" matches all: no filter */
    /* NUL-ended: lt_glob_match reads one byte past it. */
    if (!(*pattern = lt_malloc(pat->len + 1))) {
        x->r->status = LATTICE_ERR_NOMEM;
        return false;
    }
    memcpy(*pattern, pat->ptr, pat->len);
    (*pattern)[pat->len] = 0;
    *plen = pat->len;
    return true;
}

/* ---- the frame ---- */

/* ---- OBJECT ENCODING and MEMORY USAGE, of a key of any type ---- */

/* What one entry costs the store beside its key and value bytes: the row's
 * header and item slot in its page and its slot in the partition's index
 * (docs/STORAGE.md) - an estimate, as Redis's MEMORY USAGE is. */
#define COLL_ENTRY_OVERHEAD 48
#define EMBSTR_LIMIT 44 /* Redis's OBJ_ENCODING_EMBSTR_SIZE_LIMIT */

/* A collection's element count and its longest element (a hash's field or
 * value, a sorted set's member); false on a malformed row. */
static bool row_shape(const unsigned char *p, size_t len, uint8_t type, size_t *count, size_t *longest)
{
    size_t off = 1;
    uint64_t n, l;
    if (len < 2 || !coll_varint_get(p, len, &off, &n) || n > len) return false;
    *count = (size_t)n;
    *longest = 0;
    size_t per = type == LATTICE_TYPE_HASH ? 2 : 1;
    for (uint64_t i = 0; i < n * per; i++) {
        if (type == LATTICE_TYPE_ZSET) {
            if (len - off < 8) return false;
            off += 8;
        }
        if (!coll_varint_get(p, len, &off, &l) || l > len - off) return false;
        off += (size_t)l;
        if (l > *longest) *longest = (size_t)l;
    }
    return off == len;
}

static long long threshold(const coll_ctx *x, size_t i)
{
    long long v;
    return i < x->argc && coll_arg_ll(&x->argv[i], &v) ? v : 0;
}

/* The encoding Redis 7.0 gives such a value: a string by its text
 * (tryObjectEncoding), a hash or sorted set by its size against the
 * thresholds (listpack up to so many elements of up to so many bytes), a set
 * by its row's format (the integer format is Redis's intset), a list always
 * quicklist.  Lattice converts nothing when a collection shrinks, so a hash
 * that grew past the thresholds and shrank again is "listpack" here, where
 * Redis keeps its hashtable. */
static const char *encoding_of(coll_ctx *x, const unsigned char *p, size_t len, uint8_t type)
{
    size_t count, longest;
    int64_t v;
    switch (type) {
    case LATTICE_TYPE_STRING:
        if (len <= 20 && exec_parse_i64(p, len, &v)) return "int";
        return len <= EMBSTR_LIMIT ? "embstr" : "raw";
    case LATTICE_TYPE_LIST: return "quicklist";
    case LATTICE_TYPE_SET: return len && p[0] == 1 ? "intset" : "hashtable";
    case LATTICE_TYPE_HASH:
    case LATTICE_TYPE_ZSET: {
        if (!row_shape(p, len, type, &count, &longest)) return NULL;
        size_t at = type == LATTICE_TYPE_HASH ? 1 : 3;
        bool small = (long long)count <= threshold(x, at) && (long long)longest <= threshold(x, at + 1);
        return small ? "listpack" : type == LATTICE_TYPE_HASH ? "hashtable" : "skiplist";
    }
    default: return "raw";
    }
}

static void object_run(coll_ctx *x)
{
    lattice_store_meta meta = {0};
    int st = exec_read_old(x->c, x->in, x->s, &meta);
    if (st == LATTICE_ERR_NOT_FOUND) {
        coll_null(x);
        return;
    }
    if (st != LATTICE_OK) {
        x->r->status = st;
        return;
    }
    x->found = true;
    x->r->flags |= LATTICE_OP_R_FOUND | LATTICE_OP_R_TYPE_FLAGS(meta.type);
    if (x->argc && coll_is(&x->argv[0], "memory")) {
        coll_int(x, (long long)(x->in->key_len + meta.value_len + COLL_ENTRY_OVERHEAD));
        return;
    }
    if (x->argc && coll_is(&x->argv[0], "elements")) { /* DUMP's: a string's value, a collection's elements */
        static const lattice_coll_arg all[2] = {{"0", 1}, {"-1", 2}};
        int cmd = meta.type == LATTICE_TYPE_HASH ? LATTICE_COLL_HGETALL
                  : meta.type == LATTICE_TYPE_LIST ? LATTICE_COLL_LRANGE
                  : meta.type == LATTICE_TYPE_SET  ? LATTICE_COLL_SMEMBERS
                  : meta.type == LATTICE_TYPE_ZSET ? LATTICE_COLL_ZRANGESTORE
                                                   : 0;
        if (!cmd) {
            coll_bulk(x, x->s->old, meta.value_len);
            return;
        }
        x->argc = cmd == LATTICE_COLL_LRANGE || cmd == LATTICE_COLL_ZRANGESTORE ? 2 : 0;
        if (!coll_items(x, 0, 1)) return;
        if (x->argc) x->argv[0] = all[0], x->argv[1] = all[1];
        x->cmd = cmd; /* the type's own command reads the row again, as it reads it */
        x->found = false;
        defs[cmd].run(x);
        return;
    }
    const char *e = encoding_of(x, x->s->old, meta.value_len, meta.type);
    if (!e) {
        x->r->status = LATTICE_ERR_PROTO; /* a malformed row answers, never crashes */
        return;
    }
    coll_bulk(x, e, strlen(e));
}

void exec_coll(lattice_meta_cache *c, const exec_in *in, exec_scratch *s, lattice_op_result *r, repl_out *repl)
{
    int cmd = (int)in->delta;
    bool write = in->kind == LATTICE_OP_COLL_WRITE;
    size_t n;
    if (in->delta < 1 || in->delta > LATTICE_COLL_CMD_MAX_ || !defs[cmd].run || lattice_coll_is_write(cmd) != write ||
        !lattice_coll_unpacked_count(in->value, in->value_len, &n)) {
        r->status = LATTICE_ERR_INVAL;
        return;
    }
    s->reply_len = 0;
    coll_ctx x = {c, in, s, r, repl, cmd, defs[cmd].name, n, NULL, false, {0}, false};
    if (!coll_items(&x, 0, 1)) {
        r->status = LATTICE_ERR_NOMEM;
        return;
    }
    size_t off = 4;
    for (size_t i = 0; i < n; i++) x.argv[i] = lattice_coll_unpack_next(in->value, &off);
    if (defs[cmd].rule == EXACT ? n != defs[cmd].args : n < defs[cmd].args) coll_arity_error(&x);
    else defs[cmd].run(&x);
    if (!write) {
        c->reads++;
        if (x.found) c->hits++;
        else if (r->status == LATTICE_OK) c->misses++;
    }
    if (r->status != LATTICE_OK) return;
    if (x.nomem) {
        /* A write that happened stays acknowledged: its num (an integer
         * reply) still answers; only the reply's bytes are missing. */
        if (!repl->needed) r->status = LATTICE_ERR_NOMEM;
        return;
    }
    r->value = s->reply;
    r->value_len = s->reply_len;
}
