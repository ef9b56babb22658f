/*
 * walk: the partition-addressed operations at a partition's primary (data
 * thread) - WALK, the keys of one partition in position order (SCAN, KEYS,
 * RANDOMKEY), and CLEAR, the removal of a partition's entries on every copy
 * (FLUSHALL, FLUSHDB).  issue.c routes them by op.partition instead of a
 * key's hash, primary.c's primary_serve hands them here.
 *
 *  WALK   A key's position is lattice_op_walk_position (a 48-bit hash of
 *         the key): a function of the key alone, so where a walk stopped
 *         means the same on whichever node holds the partition next, and a
 *         key present in the partition throughout a walk is returned at
 *         least once however often the partition moves (each answer is
 *         "every key at positions [from, hi]", complete as the primary saw
 *         it).  The store iterates in its own order, so one answer costs a
 *         pass over the partition: the first keeps the `limit` lowest
 *         positions >= from (a max-heap), the second copies the keys at
 *         positions [from, hi].  Expired entries are skipped (the store's
 *         cursor does).  Both passes run within one turn of the data thread,
 *         the partition's only writer while it is primary.
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

typedef struct walk_pick {
    uint64_t pos;
    size_t off, len;
} walk_pick;

typedef struct walk_ctx {
    uint64_t from, hi;
    size_t limit;
    uint64_t *heap;               /* pass 1: max-heap of the lowest positions >= from */
    size_t n_heap, candidates;
    walk_pick *picks;             /* pass 2: the keys at [from, hi] */
    size_t n_picks, cap_picks;
    char *buf;
    size_t len, cap;
    bool nomem;
} walk_ctx;

/* Copies it's key to buf at len, growing it (false: out of memory). */
static bool key_append(char **buf, size_t *cap, size_t len, const lattice_store_item *it)
{
    if (len + it->key_len > *cap) {
        size_t nc = *cap ? 2 * *cap : 4096;
        while (nc < len + it->key_len) nc *= 2;
        char *b = lt_realloc(*buf, nc);
        if (!b) return false;
        *buf = b;
        *cap = nc;
    }
    memcpy(*buf + len, it->key, it->key_len);
    return true;
}

static void heap_down(uint64_t *h, size_t n, size_t i)
{
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < n && h[l] > h[m]) m = l;
        if (r < n && h[r] > h[m]) m = r;
        if (m == i) return;
        uint64_t t = h[i];
        h[i] = h[m];
        h[m] = t;
        i = m;
    }
}

static void heap_up(uint64_t *h, size_t i)
{
    while (i > 0 && h[(i - 1) / 2] < h[i]) {
        uint64_t t = h[i];
        h[i] = h[(i - 1) / 2];
        h[(i - 1) / 2] = t;
        i = (i - 1) / 2;
    }
}

static int pass_select(void *arg, const lattice_store_item *it)
{
    walk_ctx *x = arg;
    uint64_t pos = lattice_op_walk_position(it->key, it->key_len);
    if (pos < x->from) return 0;
    x->candidates++;
    if (x->n_heap < x->limit) {
        x->heap[x->n_heap] = pos;
        heap_up(x->heap, x->n_heap++);
    } else if (pos < x->heap[0]) {
        x->heap[0] = pos;
        heap_down(x->heap, x->n_heap, 0);
    }
    return 0;
}

static int pass_collect(void *arg, const lattice_store_item *it)
{
    walk_ctx *x = arg;
    uint64_t pos = lattice_op_walk_position(it->key, it->key_len);
    if (pos < x->from || pos > x->hi) return 0;
    if (x->n_picks == x->cap_picks) {
        size_t cap = x->cap_picks ? 2 * x->cap_picks : 64;
        walk_pick *p = lt_realloc(x->picks, cap * sizeof *p);
        if (!p) return x->nomem = true, 1;
        x->picks = p;
        x->cap_picks = cap;
    }
    if (!key_append(&x->buf, &x->cap, x->len, it)) return x->nomem = true, 1;
    x->picks[x->n_picks++] = (walk_pick){pos, x->len, it->key_len};
    x->len += it->key_len;
    return 0;
}

/* One pass of fn over the partition's live entries. */
static int walk_pass(lattice_store *s, uint32_t partition, lattice_store_visit_fn fn, walk_ctx *x)
{
    lattice_store_cursor *cur;
    int st = lattice_store_cursor_open(s, partition, &cur);
    if (st != LATTICE_OK) return st;
    int done = 0;
    while (st == LATTICE_OK && !done && !x->nomem) st = lattice_store_cursor_next(cur, 1024, SIZE_MAX, fn, x, &done);
    lattice_store_cursor_close(cur);
    return x->nomem ? LATTICE_ERR_NOMEM : st;
}

static int pick_cmp(const void *a, const void *b)
{
    const walk_pick *x = a, *y = b;
    return x->pos < y->pos ? -1 : x->pos > y->pos;
}

static void put_u32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)v;
    p[1] = (unsigned char)(v >> 8);
    p[2] = (unsigned char)(v >> 16);
    p[3] = (unsigned char)(v >> 24);
}

static void do_walk(lattice_ops *d, lattice_meta_cache *c, uint32_t partition, uint64_t from, int64_t want,
                    const origin *org)
{
    (void)d;
    lattice_op_result r = {.status = LATTICE_OK, .num = -1};
    walk_ctx x = {.from = from, .limit = want < 1 ? 1 : want > (int64_t)LATTICE_OP_WALK_MAX ? LATTICE_OP_WALK_MAX : (size_t)want};
    unsigned char *out = NULL;
    size_t n_out = 0, out_len = LATTICE_OP_WALK_HDR;
    x.heap = lt_malloc(x.limit * sizeof *x.heap);
    int st = x.heap ? walk_pass(c->store, partition, pass_select, &x) : LATTICE_ERR_NOMEM;
    if (st == LATTICE_OK && x.n_heap) {
        x.hi = x.heap[0];
        st = walk_pass(c->store, partition, pass_collect, &x);
    }
    if (st == LATTICE_OK) {
        qsort(x.picks, x.n_picks, sizeof *x.picks, pick_cmp);
        /* Cut at the byte bound, never inside one position's keys. */
        size_t bytes = 0;
        while (n_out < x.n_picks) {
            if (n_out && bytes + x.picks[n_out].len > WALK_MAX_BYTES && x.picks[n_out].pos != x.picks[n_out - 1].pos)
                break;
            bytes += x.picks[n_out].len;
            out_len += 4 + x.picks[n_out].len;
            n_out++;
        }
        bool more = n_out < x.n_picks || x.n_picks < x.candidates;
        if (n_out && more) r.num = (int64_t)x.picks[n_out - 1].pos + 1;
        out = lt_malloc(out_len);
        if (!out) st = LATTICE_ERR_NOMEM;
    }
    if (st == LATTICE_OK) {
        put_u32(out, c->cfg.partitions);
        put_u32(out + 4, (uint32_t)n_out);
        size_t at = LATTICE_OP_WALK_HDR;
        for (size_t i = 0; i < n_out; i++) {
            put_u32(out + at, (uint32_t)x.picks[i].len);
            memcpy(out + at + 4, x.buf + x.picks[i].off, x.picks[i].len);
            at += 4 + x.picks[i].len;
        }
        r.value = out;
        r.value_len = out_len;
    } else {
        r.status = st;
        r.num = 0;
    }
    c->reads++;
    chan_complete(d, org, &r);
    lt_free(out);
    lt_free(x.heap);
    lt_free(x.picks);
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
    if (!key_append(&x->buf, &x->cap, x->len, it)) return x->nomem = true, 1;
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
        if (lattice_store_remove(c->store, partition, key, x.lens[i]) != LATTICE_OK) continue;
        removed++;
        c->writes++;
        repl_out repl = {true, true, NULL, 0, 0, ++c->counter[partition]};
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
    } else {
        do_clear(d, c, in->partition, in->ttl_ms, org);
    }
}
