/*
 * walk: the partition-addressed operations at a partition's primary (data
 * thread) - WALK, the keys of one partition in position order (SCAN, KEYS,
 * RANDOMKEY), and CLEAR, the removal of a partition's entries on every copy
 * (FLUSHALL, FLUSHDB).  issue.c routes them by op.partition instead of a
 * key's hash, primary.c's primary_serve hands them here.
 *
 *  WALK   A key's position is the store's (lattice_store_key_position, a
 *         32-bit hash of the key): a function of the key alone, so where a
 *         walk stopped means the same on whichever node holds the partition
 *         next, and a key present in the partition throughout a walk is
 *         returned at least once however often the partition moves (each
 *         answer is "every key at positions [from, next)", complete as the
 *         primary saw it).  The store's cursor walks a partition in position
 *         order, so an answer starts at `from` directly and costs the keys
 *         it returns (SCAN with a small COUNT stays linear over a whole
 *         walk).  Expired entries are skipped (the store's cursor does).
 *  CLEAR  Up to LATTICE_OP_CLEAR_MAX entries of the partition are removed
 *         here, each with the partition's next update counter, and each
 *         removal goes to every other serving and MOVING owner as a
 *         replicated remove (as an eviction does, ops/evict.c), all on ONE
 *         wait: the answer goes out once every copy applied every removal,
 *         so after it no copy serves a removed key.  With full_sync the wait
 *         is in the partition's in-flight list (clean.c), so backups stay
 *         "dirty" (forward reads) until it ends.  Only entries of versions
 *         up to a bound are removed - the partition's update counter when
 *         the first round ran here, answered in num and passed back by the
 *         next rounds - so a write the primary executed after the clear
 *         began survives it, and a clear ends however fast others write.
 *         The issuer repeats while R_MORE is set.
 */
#include <stdlib.h>
#include <string.h>

#include "lattice/alloc.h"
#include "lattice/log.h"
#include "ops_int.h"

#define WALK_MAX_BYTES (1u << 20) /* keys of one WALK answer (it may pass this by one key) */

typedef struct walk_ctx {
    char *buf;                    /* the answer: header, then (u32 length, key) per key */
    size_t len, cap;
    uint32_t n;
    bool nomem;
} walk_ctx;

/* Copies it's key to buf at len + skip, growing it (false: out of memory). */
static bool key_append(char **buf, size_t *cap, size_t len, size_t skip, const lattice_store_item *it)
{
    size_t need = len + skip + it->key_len;
    if (need > *cap) {
        size_t nc = *cap ? 2 * *cap : 4096;
        while (nc < need) nc *= 2;
        char *b = lt_realloc(*buf, nc);
        if (!b) return false;
        *buf = b;
        *cap = nc;
    }
    memcpy(*buf + len + skip, it->key, it->key_len);
    return true;
}

static void put_u32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)v;
    p[1] = (unsigned char)(v >> 8);
    p[2] = (unsigned char)(v >> 16);
    p[3] = (unsigned char)(v >> 24);
}

static int walk_collect(void *arg, const lattice_store_item *it)
{
    walk_ctx *x = arg;
    if (x->nomem) return 0;
    if (it->key_len && *(const uint8_t *)it->key == LATTICE_STORE_RESERVED_BYTE) return 0; /* the grid's own */
    if (!key_append(&x->buf, &x->cap, x->len, 4, it)) return x->nomem = true, 0;
    /* The key's length and its value's type (lattice/ops.h, WALK's answer). */
    put_u32((unsigned char *)x->buf + x->len, (uint32_t)it->key_len | (uint32_t)it->type << 24);
    x->len += 4 + it->key_len;
    x->n++;
    return 0;
}

/* One answer: the store's cursor, moved to `from`, hands out the entries in
 * position order and never cuts between two keys of one position; finding
 * the start costs what the answer holds, not a pass over the partition. */
static void do_walk(lattice_ops *d, lattice_meta_cache *c, uint32_t partition, uint64_t from, int64_t want,
                    const origin *org)
{
    lattice_op_result r = {.status = LATTICE_OK, .num = -1};
    size_t limit = want < 1 ? 1 : want > (int64_t)LATTICE_OP_WALK_MAX ? LATTICE_OP_WALK_MAX : (size_t)want;
    walk_ctx x = {.len = LATTICE_OP_WALK_HDR};
    lattice_store_cursor *cur = NULL;
    int done = 1;
    x.buf = lt_malloc(x.cap = 4096);
    int st = x.buf ? lattice_store_cursor_open(c->store, partition, &cur) : LATTICE_ERR_NOMEM;
    if (st == LATTICE_OK) {
        lattice_store_cursor_seek(cur, from);
        st = lattice_store_cursor_next(cur, limit, WALK_MAX_BYTES, walk_collect, &x, &done);
        if (st == LATTICE_OK && x.nomem) st = LATTICE_ERR_NOMEM;
    }
    if (st == LATTICE_OK) {
        put_u32((unsigned char *)x.buf, c->cfg.partitions);
        put_u32((unsigned char *)x.buf + 4, x.n);
        if (!done) r.num = (int64_t)lattice_store_cursor_position(cur);
        r.value = x.buf;
        r.value_len = x.len;
    } else {
        r.status = st;
        r.num = 0;
    }
    lattice_store_cursor_close(cur);
    c->reads++;
    chan_complete(d, org, &r);
    lt_free(x.buf);
}

typedef struct clear_ctx {
    uint64_t bound;               /* entries of versions above it stay */
    char *buf;
    size_t len, cap;
    size_t *lens;
    size_t n;
    bool nomem;
} clear_ctx;

static int clear_collect(void *arg, const lattice_store_item *it)
{
    clear_ctx *x = arg;
    if (it->version > x->bound) return 0; /* written after the clear began here */
    /* A prepared transaction's row stays: its finish applies or drops it
     * (removing it would free its locks without its outcome). */
    if (it->key_len && *(const uint8_t *)it->key == LATTICE_STORE_RESERVED_BYTE) return 0;
    if (!key_append(&x->buf, &x->cap, x->len, 0, it)) return x->nomem = true, 1;
    x->len += it->key_len;
    x->lens[x->n++] = it->key_len;
    return 0;
}

static void do_clear(lattice_ops *d, lattice_meta_cache *c, uint32_t partition, uint64_t bound,
                     const origin *org)
{
    lattice_op_result r = {.status = LATTICE_OK};
    clear_ctx x = {.bound = bound ? bound : c->counter[partition]};
    x.lens = lt_malloc(LATTICE_OP_CLEAR_MAX * sizeof *x.lens);
    lattice_store_cursor *cur = NULL;
    int st = x.lens ? lattice_store_cursor_open(c->store, partition, &cur) : LATTICE_ERR_NOMEM;
    int done = 0;
    while (st == LATTICE_OK && !done && !x.nomem && x.n < LATTICE_OP_CLEAR_MAX)
        st = lattice_store_cursor_next(cur, 1, SIZE_MAX, clear_collect, &x, &done);
    if (cur) lattice_store_cursor_close(cur);
    if (x.nomem) st = LATTICE_ERR_NOMEM;
    if (st != LATTICE_OK) {
        r.status = st;
        chan_complete(d, org, &r);
        lt_free(x.lens);
        lt_free(x.buf);
        return;
    }
    if (!done) r.flags |= LATTICE_OP_R_MORE;
    unsigned char hdr[LATTICE_OP_WALK_HDR] = {0}; /* as WALK's: the partitions, no keys */
    put_u32(hdr, c->cfg.partitions);
    r.value = hdr;
    r.value_len = sizeof hdr;
    lattice_meta_member *owners[2 * (LATTICE_CACHE_MAX_BACKUPS + 1)];
    size_t n = lattice_meta_serving_owners(c, partition, owners, LATTICE_CACHE_MAX_BACKUPS + 1);
    n += lattice_meta_moving_owners(c, partition, owners + n, LATTICE_CACHE_MAX_BACKUPS + 1);
    waitw *w = n > 1 ? sync_wait_new(c, org, &r) : NULL;
    bool tracked = false;
    size_t off = 0;
    int64_t removed = 0;
    for (size_t i = 0; i < x.n; off += x.lens[i++]) {
        const char *key = x.buf + off;
        fast_mark(c, partition);
        if (lattice_store_remove_v(c->store, partition, key, x.lens[i], c->counter[partition] + 1) != LATTICE_OK) continue;
        removed++;
        c->writes++;
        repl_out repl = {true, true, NULL, 0, 0, ++c->counter[partition], 0};
        if (w && !tracked && c->cfg.sync == LATTICE_SYNC_FULL) {
            /* The first removal's version holds the partition's watermark
             * below every removal of this round until all are applied. */
            w->after = primary_after_write;
            clean_begin(d, c, w, partition, repl.version, key, x.lens[i]);
            tracked = true;
        }
        primary_send_copies(d, c, CTL_REPLICATE, partition, key, x.lens[i], &repl, NULL, 0, &r, w);
    }
    r.num = (int64_t)x.bound;
    (void)removed;
    if (w) {
        w->res.num = r.num;
        sync_wait_release(d, w);
    } else {
        chan_complete(d, org, &r);
    }
    lt_free(x.lens);
    lt_free(x.buf);
}

bool walk_is_kind(int kind) { return kind == LATTICE_OP_WALK || kind == LATTICE_OP_CLEAR; }

void walk_execute(lattice_ops *d, lattice_meta_cache *c, const exec_in *in, const origin *org)
{
    if (!c->store) {
        lattice_op_result r = {.status = LATTICE_ERR_NOT_OWNER};
        chan_complete(d, org, &r);
    } else if (in->kind == LATTICE_OP_WALK) {
        do_walk(d, c, in->partition, in->ttl_ms, in->delta, org);
    } else if (wal_refuses(d)) { /* the data dir cannot take the removals (wal.c) */
        lattice_op_result r = {.status = LATTICE_ERR_DISK_FULL};
        chan_complete(d, org, &r);
    } else {
        do_clear(d, c, in->partition, in->ttl_ms, org);
    }
}
