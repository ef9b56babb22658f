/*
 * coll: the frame every collection command runs in (LATTICE_OP_COLL_READ
 * and _WRITE, lattice/coll.h) - its packed arguments checked and laid out,
 * the key's value read with its type checked, the reply built in RESP3's
 * framing, the new value written (or the key removed when the collection
 * emptied) with the partition's next update counter.  The commands of each
 * type are in a file of their own (hash.c).  Pure as the rest of types/:
 * the primary runs it (ops/primary.c), a clean copy a read of it.
 *
 * Replication: a write replicates the key's new value as any write does
 * (repl_out), so a copy applies it with exec_replicate_typed.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "coll_int.h"
#include "lattice/alloc.h"

/* A reply longer than this is refused (NOMEM) rather than built: it could
 * not travel in one data-channel frame either (HRANDFIELD -1000000000). */
#define COLL_REPLY_MAX ((size_t)64 << 20)

static const char *const names[LATTICE_COLL_CMD_MAX_ + 1] = {
    [LATTICE_COLL_HGET] = "hget",
    [LATTICE_COLL_HMGET] = "hmget",
    [LATTICE_COLL_HLEN] = "hlen",
    [LATTICE_COLL_HSTRLEN] = "hstrlen",
    [LATTICE_COLL_HEXISTS] = "hexists",
    [LATTICE_COLL_HKEYS] = "hkeys",
    [LATTICE_COLL_HVALS] = "hvals",
    [LATTICE_COLL_HGETALL] = "hgetall",
    [LATTICE_COLL_HRANDFIELD] = "hrandfield",
    [LATTICE_COLL_HSCAN] = "hscan",
    [LATTICE_COLL_HSET] = "hset",
    [LATTICE_COLL_HSETNX] = "hsetnx",
    [LATTICE_COLL_HMSET] = "hmset",
    [LATTICE_COLL_HDEL] = "hdel",
    [LATTICE_COLL_HINCRBY] = "hincrby",
    [LATTICE_COLL_HINCRBYFLOAT] = "hincrbyfloat",
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
void coll_array(coll_ctx *x, size_t n) { header(x, '*', (long long)n); }
void coll_map(coll_ctx *x, size_t n) { header(x, '%', (long long)n); }
void coll_pairs(coll_ctx *x, size_t n) { header(x, '&', (long long)n); }

void coll_arity_error(coll_ctx *x)
{
    char m[96];
    snprintf(m, sizeof m, "ERR wrong number of arguments for '%s' command", x->name);
    coll_error(x, m);
}

/* ---- the frame ---- */

void exec_coll(lattice_meta_cache *c, const exec_in *in, exec_scratch *s, lattice_op_result *r, repl_out *repl)
{
    int cmd = (int)in->delta;
    bool write = in->kind == LATTICE_OP_COLL_WRITE;
    size_t n;
    if (in->delta < 1 || in->delta > LATTICE_COLL_CMD_MAX_ || !names[cmd] || lattice_coll_is_write(cmd) != write ||
        !lattice_coll_unpacked_count(in->value, in->value_len, &n)) {
        r->status = LATTICE_ERR_INVAL;
        return;
    }
    s->reply_len = 0;
    coll_ctx x = {c, in, s, r, repl, cmd, names[cmd], n, NULL, false, {0}, false};
    if (!coll_items(&x, 0, 1)) {
        r->status = LATTICE_ERR_NOMEM;
        return;
    }
    size_t off = 4;
    for (size_t i = 0; i < n; i++) x.argv[i] = lattice_coll_unpack_next(in->value, &off);
    hash_run(&x);
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
