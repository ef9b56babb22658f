/*
 * Data region: page memory, the free lists (lanes), rows and fragments,
 * eviction.  This file takes a page for a row (take_page), writes, updates
 * and frees rows, and holds the region's API and its idle-time clock; the
 * lanes' locks, lists and memory are in region_lanes.c, eviction in
 * region_evict.c, the lock-free reader in region_read.c, a batch's run of
 * rows in region_batch.c.
 *
 * Memory comes from the OS in LATTICE_REGION_CHUNK pieces (lt_map) and is
 * pre-faulted when mapped (MADV_POPULATE_WRITE, else a memset): a first-touch
 * fault costs 11-15 us per 4 KiB here, so no row write ever touches a fresh
 * page.  Chunks are never unmapped before destroy, so a lock-free reader
 * holding any link can always dereference its page.
 *
 * Lanes (region_int.h): REGION_LANES independent free lists, each with its
 * own lock, so writers of partitions on different lanes never wait for each
 * other.  Within a lane: a data page with live rows sits in bucket
 * free/step (step = page_size / 32), or in none ("full") when free < step.
 * An insert needing len + 2 bytes (row + item slot) starts at bucket
 * ceil((len+2)/step), where every page is known to fit, and takes the first
 * page of the lowest non-empty bucket (one bit scan of bucket_mask): the
 * fullest page that surely fits, with no page scan.  A page whose last row
 * goes is reset and pushed on its lane's reuse list.  A lane out of pages
 * takes, in order: its reuse list, another lane's reuse list (try-lock), a
 * new chunk, and (policy evict) evicts: random-2-LRU over the pages that hold
 * head rows (page_hdr.heads), then, when sampling finds nothing it may evict,
 * a sweep of every page; only a sweep that evicts nothing reports the region
 * full.
 *
 * Page states (page_hdr.bucket): 0..31 in that bucket list; BUCKET_NONE full;
 * BUCKET_REUSE on the reuse list; BUCKET_DETACHED taken by a writer that is
 * filling it, in no list.  All under the page's lane lock.
 */
#include <sched.h>
#include <stdio.h>
#include <string.h>

#include "lattice/alloc.h"
#include "lattice/log.h"
#include "region_int.h"

static struct lane *lock_lane0(lattice_region *r)
{
    pthread_mutex_lock(&r->lanes[0].lock);
    return &r->lanes[0];
}

/* The lane of a page's rows.  The caller holds that lane (or all). */
static struct lane *lane_of(lattice_region *r, uint32_t pid)
{
    return &r->lanes[hdr_w(r, pid)->lane];
}

/* ---------------------------------------------------------------- pages */

/* A detached data page of lane l that fits a row of len bytes: from l's
 * buckets, its reuse list, another lane's reuse list, a new chunk, or
 * (policy evict) after evicting. */
static int take_page(lattice_region *r, struct lane *l, uint32_t len,
                     const struct evict_guard *g, uint32_t *out)
{
    uint32_t b0 = (len + 2 + r->step - 1) / r->step;
    int rounds = 0, busy = 0;
    for (;;) {
        uint32_t m = b0 < LATTICE_REGION_BUCKETS ? l->bucket_mask >> b0 << b0 : 0;
        if (m) {
            uint32_t pid = l->bucket_head[__builtin_ctz(m)];
            region_lane_detach(r, l, pid);
            *out = pid;
            return LATTICE_OK;
        }
        if (l->reuse_head != NO_PAGE) {
            uint32_t pid = l->reuse_head;
            region_list_unlink(r, &l->reuse_head, pid);
            l->pages_reuse--;
            l->pages_data++;
            struct page_hdr *h = hdr_w(r, pid);
            __atomic_store_n(&h->kind, KIND_DATA, __ATOMIC_RELAXED); /* evict_candidate peeks */
            __atomic_store_n(&h->bucket, BUCKET_DETACHED, __ATOMIC_RELAXED);
            *out = pid;
            return LATTICE_OK;
        }
        if (region_steal_reuse(r, l)) continue;
        int st = region_map_chunk(r, l);
        if (st == LATTICE_OK) continue;
        if (st == LATTICE_ERR_NOMEM) return st;
        if (r->policy != LATTICE_REGION_EVICT) return LATTICE_ERR_REGION_FULL;
        /* Sampling first; a round that evicted something is progress (the
         * region holds finitely many entries), so only fruitless rounds
         * count.  A round lost to another writer holding the sampled page's
         * lane is not a sign that nothing can be evicted: with more writers
         * than lanes it happens often.  Such rounds count against a larger
         * bound.  Then the sweep decides. */
        int ev = rounds < EVICT_ROUNDS ? region_evict_one(r, l, g) : region_evict_sweep(r, l, g);
        if (ev > 0) {
            rounds = 0;
            continue;
        }
        if (ev < 0 && ++busy < EVICT_BUSY_ROUNDS) {
            sched_yield();
            continue;
        }
        if (rounds++ >= EVICT_ROUNDS) return LATTICE_ERR_REGION_FULL;
    }
}

static void stamp(lattice_region *r, struct lane *l, struct page_hdr *h)
{
    if (++l->epoch_tick % 64 == 0) __atomic_add_fetch(&r->epoch, 1, __ATOMIC_RELAXED);
    __atomic_store_n(&h->access, __atomic_load_n(&r->epoch, __ATOMIC_RELAXED), __ATOMIC_RELAXED);
}

/* ---------------------------------------------------------------- writes */

/* Writes one row of len bytes (head or fragment) into a page that fits. */
static int put_row(lattice_region *r, struct lane *l, const lattice_store_entry *e,
                   uint8_t owner, int cont, int frag, uint64_t next, uint64_t pos,
                   uint32_t piece, uint32_t len, uint64_t *link, const struct evict_guard *g)
{
    uint32_t pid;
    int st = take_page(r, l, len, g, &pid);
    if (st != LATTICE_OK) return st;
    struct page_hdr *h = hdr_w(r, pid);
    page_write_begin(h);
    uint16_t item = page_place(h, r->page_size, len, -1);
    uint8_t *dst = (uint8_t *)h + page_items(h)[item];
    if (cont) cont_encode(dst, e, frag, next, pos, piece);
    else head_encode(dst, e, owner, frag, next, piece), __atomic_store_n(&h->heads, 1, __ATOMIC_RELAXED);
    stamp(r, l, h);
    page_write_end(h);
    region_lane_place(r, l, pid);
    l->rows++;
    l->row_bytes += len;
    l->owner_rows[owner]++;
    l->owner_bytes[owner] += len;
    *link = LATTICE_LINK(pid, item) | (uint64_t)page_items(h)[item] << 48;
    return LATTICE_OK;
}

/* *owner: the entry's owner, read from its head row (the first call) and
 * charged for its continuation rows, which carry none. */
static void free_row(lattice_region *r, uint64_t link, uint64_t *next, int *has_next, uint8_t *owner)
{
    uint32_t pid = LATTICE_LINK_PAGE(link);
    struct page_hdr *h = hdr_w(r, pid);
    struct lane *l = lane_of(r, pid);
    struct rowv v;
    uint16_t off = page_items(h)[LATTICE_LINK_ITEM(link)];
    int ok = row_parse((uint8_t *)h, r->page_size, off, &v) == 0;
    *has_next = ok && (v.flags & F_NEXT);
    *next = v.next;
    if (ok && (v.flags & F_HEAD)) *owner = v.owner;
    page_write_begin(h);
    uint32_t len = page_remove(h, r->page_size, LATTICE_LINK_ITEM(link), 0, ok ? v.len : 0);
    page_write_end(h);
    region_lane_rebucket(r, l, pid);
    l->rows--;
    l->row_bytes -= len;
    l->owner_rows[*owner]--;
    l->owner_bytes[*owner] -= len;
}

void region_free_locked(lattice_region *r, uint64_t link)
{
    int more = 1;
    uint8_t owner = 0;
    while (more) free_row(r, link, &link, &more, &owner);
}

int region_insert_locked(lattice_region *r, struct lane *l, const lattice_store_entry *e,
                         uint8_t owner, uint64_t *link, const struct evict_guard *g)
{
    uint64_t total = e->key_len + e->value_len;
    uint32_t hs = head_hdr_len(e, 0);
    if (hs + total <= r->max_row)
        return put_row(r, l, e, owner, 0, 0, 0, 0, 0, (uint32_t)(hs + total), link, g);

    /* Fragmented: full continuation rows hold the tail, the head the rest
     * (maybe nothing).  Written last piece first, so each knows its next. */
    uint32_t hf = head_hdr_len(e, 1);
    uint64_t cap = r->max_row - CONT_HDR_NEXT, hmax = r->max_row - hf;
    uint64_t k = (total - hmax + cap - 1) / cap;
    uint64_t head = total > k * cap ? total - k * cap : 0;
    uint64_t next = 0;
    int has_next = 0;
    for (uint64_t j = k; j-- > 0;) {
        uint64_t pos = head + j * cap;
        uint32_t piece = (uint32_t)(total - pos < cap ? total - pos : cap);
        uint32_t len = (has_next ? CONT_HDR_NEXT : CONT_HDR_LAST) + piece;
        uint64_t lk;
        int st = put_row(r, l, e, owner, 1, has_next, next, pos, piece, len, &lk, g);
        if (st != LATTICE_OK) {
            if (has_next) region_free_locked(r, next);
            return st;
        }
        next = lk, has_next = 1;
    }
    int st = put_row(r, l, e, owner, 0, 1, next, 0, (uint32_t)head, (uint32_t)(hf + head), link, g);
    if (st != LATTICE_OK) region_free_locked(r, next);
    return st;
}

int region_insert_batch_locked(lattice_region *r, struct lane *l, const lattice_store_entry *e,
                               size_t n, uint8_t owner, uint64_t *links, size_t *done,
                               const struct evict_guard *g)
{
    uint32_t cur = NO_PAGE;
    struct page_hdr *h = NULL;
    int st = LATTICE_OK;
    size_t i = 0;
    while (i < n) {
        uint64_t len = head_hdr_len(&e[i], 0) + e[i].key_len + e[i].value_len;
        if (cur != NO_PAGE && (len > r->max_row || !page_fits(h, (uint32_t)len))) {
            /* Release before taking another page: eviction must see it placed. */
            stamp(r, l, h);
            page_write_end(h);
            region_lane_place(r, l, cur);
            cur = NO_PAGE;
        }
        if (len > r->max_row) {
            st = region_insert_locked(r, l, &e[i], owner, &links[i], g);
            if (st != LATTICE_OK) break;
            i++;
            continue;
        }
        if (cur == NO_PAGE) {
            st = take_page(r, l, (uint32_t)len, g, &cur);
            if (st != LATTICE_OK) break;
            h = hdr_w(r, cur);
            page_write_begin(h);
            __atomic_store_n(&h->heads, 1, __ATOMIC_RELAXED); /* a batch writes head rows only */
        }
        if (h->live == h->nitems) {
            size_t j = region_append_run(r, l, cur, e, i, n, owner, links);
            if (j > i) {
                i = j;
                continue;
            }
        }
        /* A free slot to reuse, or a row that fits only after compaction. */
        uint16_t item = page_place(h, r->page_size, (uint32_t)len, -1);
        uint16_t off = page_items(h)[item];
        head_encode((uint8_t *)h + off, &e[i], owner, 0, 0, 0);
        l->rows++;
        l->row_bytes += len;
        l->owner_rows[owner]++;
        l->owner_bytes[owner] += len;
        links[i] = LATTICE_LINK(cur, item) | (uint64_t)off << 48;
        i++;
    }
    if (cur != NO_PAGE) {
        stamp(r, l, h);
        page_write_end(h);
        region_lane_place(r, l, cur);
    }
    *done = i;
    return st;
}

/* Rewrites the entry at *linkp within its page when it fits there (lane l
 * is that page's, locked).  Returns 1 when it did, 0 when the row must move,
 * -1 when no row is there. */
static int update_in_page(lattice_region *r, struct lane *l, uint64_t *linkp,
                          const lattice_store_entry *e, uint8_t owner)
{
    uint64_t old = *linkp;
    uint32_t pid = LATTICE_LINK_PAGE(old);
    uint16_t item = LATTICE_LINK_ITEM(old);
    struct page_hdr *h = hdr_w(r, pid);
    struct rowv v;
    if (row_parse((uint8_t *)h, r->page_size, page_items(h)[item], &v) != 0) {
        LT_LOG(LT_ERROR, "storage", "region %s: no row at page %u item %u to update", r->name,
               pid, item);
        return -1;
    }
    uint64_t len = head_hdr_len(e, 0) + e->key_len + e->value_len;
    uint32_t gap = h->upper - HDR - 2u * h->nitems;
    if (!(v.flags & F_NEXT) && len <= v.len) {
        /* Over the old row, at the same offset: no compaction, link and hint
         * unchanged.  A shorter row leaves a hole that compaction drops. */
        page_write_begin(h);
        head_encode((uint8_t *)h + page_items(h)[item], e, owner, 0, 0, 0);
        h->free = (uint16_t)(h->free + v.len - len);
        stamp(r, l, h);
        page_write_end(h);
        region_lane_rebucket(r, l, pid);
        l->row_bytes -= v.len - len;
        l->owner_bytes[v.owner] -= v.len;
        l->owner_bytes[owner] += len;
        return 1;
    }
    if (!(v.flags & F_NEXT) && len <= gap) {
        /* Into the gap of the same page (no compaction): same item id, so
         * the link does not change, only its position hint. */
        page_write_begin(h);
        page_remove(h, r->page_size, item, 1, v.len);
        page_place(h, r->page_size, (uint32_t)len, item);
        head_encode((uint8_t *)h + page_items(h)[item], e, owner, 0, 0, 0);
        stamp(r, l, h);
        page_write_end(h);
        region_lane_rebucket(r, l, pid);
        l->row_bytes += len - v.len;
        l->owner_bytes[v.owner] -= v.len;
        l->owner_bytes[owner] += len;
        __atomic_store_n(linkp, LATTICE_LINK(pid, item) | (uint64_t)page_items(h)[item] << 48,
                         __ATOMIC_RELEASE);
        return 1;
    }
    return 0;
}

int region_update(lattice_region *r, uint64_t *linkp, const lattice_store_entry *e,
                  uint8_t owner, const struct evict_guard *g)
{
    uint64_t old = *linkp;
    struct lane *l = region_lock_page(r, old);
    int done = update_in_page(r, l, linkp, e, owner);
    region_unlock(l);
    if (done) return done > 0 ? LATTICE_OK : LATTICE_ERR_PROTO;
    /* Relocation: the new row through this writer's lane, then the old one
     * freed under its page's lane - one lane at a time, never two. */
    uint64_t nl;
    l = region_lock_writer(r);
    int st = region_insert_locked(r, l, e, owner, &nl, g);
    region_unlock(l);
    if (st != LATTICE_OK) return st;
    /* Readers holding the old link see its page change and reload the link. */
    __atomic_store_n(linkp, nl, __ATOMIC_RELEASE);
    region_free(r, old);
    return LATTICE_OK;
}

void region_free(lattice_region *r, uint64_t link)
{
    struct lane *l = region_lock_page(r, link);
    region_free_locked(r, link);
    region_unlock(l);
}

/* ---------------------------------------------------------------- public */

static int is_pow2(uint64_t x) { return x && !(x & (x - 1)); }

int lattice_region_create(const lattice_region_config *cfg, lattice_region **out)
{
    if (!out) return LATTICE_ERR_INVAL;
    *out = NULL;
    if (!cfg) return LATTICE_ERR_INVAL;
    uint32_t ps = cfg->page_size ? cfg->page_size : LATTICE_REGION_DEFAULT_PAGE;
    if (!is_pow2(ps) || ps < LATTICE_REGION_MIN_PAGE || ps > LATTICE_REGION_MAX_PAGE ||
        cfg->max_mb == 0 || cfg->max_mb > (1u << 20) || cfg->prealloc_mb > cfg->max_mb ||
        (cfg->policy != LATTICE_REGION_REJECT && cfg->policy != LATTICE_REGION_EVICT))
        return LATTICE_ERR_INVAL;
    lattice_region *r = lt_calloc(1, sizeof *r);
    if (!r) return LATTICE_ERR_NOMEM;
    r->chunks = lt_calloc(cfg->max_mb, sizeof *r->chunks);
    if (!r->chunks) {
        lt_free(r);
        return LATTICE_ERR_NOMEM;
    }
    pthread_mutex_init(&r->map_lock, NULL);
    pthread_mutex_init(&r->tick_lock, NULL);
    pthread_cond_init(&r->map_cond, NULL);
    snprintf(r->name, sizeof r->name, "%s", cfg->name ? cfg->name : "default");
    r->page_size = ps;
    r->page_shift = (uint32_t)__builtin_ctz(ps);
    r->step = ps / LATTICE_REGION_BUCKETS;
    r->max_row = ps - HDR - 2;
    r->wide_copy = region_wide_copy_supported();
    r->chunk_pages = LATTICE_REGION_CHUNK / ps;
    r->chunk_shift = (uint32_t)__builtin_ctz(r->chunk_pages);
    r->nchunks = (uint32_t)cfg->max_mb;
    r->max_pages = r->nchunks * r->chunk_pages;
    r->policy = cfg->policy;
    r->keep_pages = (uint32_t)cfg->prealloc_mb * r->chunk_pages;
    /* Untouched until pages are released: costs address space, not memory.
     * Without it the region keeps its empty pages (lattice_region_release). */
    r->released = lt_calloc(r->max_pages, sizeof *r->released);
    for (uint32_t i = 0; i < REGION_LANES; i++) {
        struct lane *l = &r->lanes[i];
        pthread_mutex_init(&l->lock, NULL);
        l->idx = i;
        l->reuse_head = NO_PAGE;
        for (int b = 0; b < LATTICE_REGION_BUCKETS; b++) l->bucket_head[b] = NO_PAGE;
        l->rng = 0x9e3779b97f4a7c15ull ^ ((uint64_t)(uintptr_t)r + i * 0x632be59bd9b4e019ull);
    }
    r->nlanes = (uint32_t)(cfg->max_mb / REGION_MB_PER_LANE);
    if (r->nlanes < 1) r->nlanes = 1;
    if (r->nlanes > REGION_LANES) r->nlanes = REGION_LANES;
    /* Preallocated pages start on lane 0; other lanes take them as they need. */
    pthread_mutex_lock(&r->lanes[0].lock);
    int st = LATTICE_OK;
    for (uint64_t i = 0; st == LATTICE_OK && i < cfg->prealloc_mb; i++) st = region_map_chunk(r, &r->lanes[0]);
    pthread_mutex_unlock(&r->lanes[0].lock);
    if (st != LATTICE_OK) {
        lattice_region_destroy(r);
        return LATTICE_ERR_NOMEM;
    }
    *out = r;
    return LATTICE_OK;
}

void lattice_region_destroy(lattice_region *r)
{
    if (!r) return;
    for (uint32_t c = 0; c < r->nchunks; c++)
        if (r->chunks[c]) lt_unmap(r->chunks[c], LATTICE_REGION_CHUNK);
    pthread_mutex_destroy(&r->map_lock);
    pthread_mutex_destroy(&r->tick_lock);
    pthread_cond_destroy(&r->map_cond);
    for (int i = 0; i < REGION_LANES; i++) pthread_mutex_destroy(&r->lanes[i].lock);
    lt_free(r->chunks);
    lt_free(r->released);
    lt_free(r);
}

uint32_t lattice_region_page_size(const lattice_region *r) { return r->page_size; }
uint32_t lattice_region_page_payload(const lattice_region *r) { return r->max_row; }

int region_attach(lattice_region *r, evict_fn fn, void *ctx, uint8_t *owner)
{
    int st = LATTICE_ERR_TOO_LARGE;
    region_lock_all(r);
    for (int i = 1; i < MAX_OWNERS; i++) {
        if (!r->owners[i].fn) {
            r->owners[i].fn = fn;
            r->owners[i].ctx = ctx;
            *owner = (uint8_t)i;
            st = LATTICE_OK;
            break;
        }
    }
    region_unlock_all(r);
    return st;
}

void region_detach(lattice_region *r, uint8_t owner)
{
    region_lock_all(r);
    r->owners[owner].fn = NULL;
    r->owners[owner].ctx = NULL;
    region_unlock_all(r);
}

static int entry_valid(const lattice_store_entry *e)
{
    return e->key && e->key_len >= 1 && e->key_len <= LATTICE_STORE_MAX_KEY &&
           (e->value || !e->value_len) && e->partition < LATTICE_STORE_MAX_PARTITIONS;
}

static int entry_check(const lattice_store_entry *e)
{
    if (!e || !entry_valid(e)) return LATTICE_ERR_INVAL;
    return e->value_len > LATTICE_STORE_MAX_VALUE ? LATTICE_ERR_TOO_LARGE : LATTICE_OK;
}

/* Raw rows all go through lane 0: they belong to no partition, and one
 * free list keeps the region API's packing exactly best fit. */
int lattice_region_insert(lattice_region *r, const lattice_store_entry *e, uint64_t *link)
{
    int st = link ? entry_check(e) : LATTICE_ERR_INVAL;
    if (st != LATTICE_OK) return st;
    struct lane *l = lock_lane0(r);
    st = region_insert_locked(r, l, e, 0, link, NULL);
    region_unlock(l);
    return st;
}

int lattice_region_insert_batch(lattice_region *r, const lattice_store_entry *e, size_t n,
                                uint64_t *links, size_t *done)
{
    if (!done || (n && (!e || !links))) return LATTICE_ERR_INVAL;
    *done = 0;
    for (size_t i = 0; i < n; i++) {
        int st = entry_check(&e[i]);
        if (st != LATTICE_OK) return st;
    }
    struct lane *l = lock_lane0(r);
    int st = region_insert_batch_locked(r, l, e, n, 0, links, done, NULL);
    region_unlock(l);
    return st;
}

int lattice_region_read(lattice_region *r, uint64_t link, lattice_store_visit_fn fn, void *arg)
{
    if (!fn) return LATTICE_ERR_INVAL;
    for (;;) {
        struct read_req q = {0};
        int st = region_read_entry(r, link, &q);
        if (st != LATTICE_OK) return st;
        size_t klen = q.klen, vlen = q.vlen;
        void *k = lt_malloc(klen), *v = lt_malloc(vlen);
        if (!k || !v) {
            lt_free(k), lt_free(v);
            return LATTICE_ERR_NOMEM;
        }
        q = (struct read_req){.kbuf = k, .kcap = klen, .vbuf = v, .vcap = vlen};
        st = region_read_entry(r, link, &q);
        if (st == LATTICE_OK && q.klen == klen && q.vlen == vlen) {
            lattice_store_item it = {q.partition, k, klen, v, vlen, q.expire, q.version, q.type};
            fn(arg, &it);
        }
        lt_free(k), lt_free(v);
        if (st != LATTICE_OK || (q.klen == klen && q.vlen == vlen)) return st;
    }
}

int lattice_region_remove(lattice_region *r, uint64_t link)
{
    int st = LATTICE_ERR_NOT_FOUND;
    uint32_t pid = LATTICE_LINK_PAGE(link);
    uint16_t item = LATTICE_LINK_ITEM(link);
    if (pid >= __atomic_load_n(&r->pages_mapped, __ATOMIC_ACQUIRE)) return st;
    struct page_hdr *h = hdr_w(r, pid);
    struct lane *l;
    /* The page's lane changes only while it is empty (no row to remove). */
    for (;;) {
        l = &r->lanes[__atomic_load_n(&h->lane, __ATOMIC_RELAXED)];
        pthread_mutex_lock(&l->lock);
        if (h->lane == l->idx) break;
        pthread_mutex_unlock(&l->lock);
    }
    struct rowv v;
    if (h->kind == KIND_DATA && item < h->nitems && page_items(h)[item] &&
        row_parse((uint8_t *)h, r->page_size, page_items(h)[item], &v) == 0 &&
        (v.flags & F_HEAD) && v.owner == 0) {
        region_free_locked(r, link);
        st = LATTICE_OK;
    }
    region_unlock(l);
    return st;
}

void lattice_region_metrics_get(lattice_region *r, lattice_region_metrics *m)
{
    memset(m, 0, sizeof *m);
    region_lock_all(r);
    m->page_size = r->page_size;
    m->pages_max = r->max_pages;
    m->pages_mapped = r->pages_mapped;
    pthread_mutex_lock(&r->map_lock);
    m->pages_released = r->nreleased;
    pthread_mutex_unlock(&r->map_lock);
    for (int i = 0; i < REGION_LANES; i++) {
        const struct lane *l = &r->lanes[i];
        m->pages_data += l->pages_data;
        m->pages_reuse += l->pages_reuse;
        m->pages_full += l->pages_full;
        for (int b = 0; b < LATTICE_REGION_BUCKETS; b++) m->pages_in_bucket[b] += l->bucket_count[b];
        m->rows += l->rows;
        m->row_bytes += l->row_bytes;
    }
    m->evictions = __atomic_load_n(&r->evictions, __ATOMIC_RELAXED);
    region_unlock_all(r);
}

void region_owner_usage(lattice_region *r, uint8_t owner, uint64_t *rows, uint64_t *bytes)
{
    *rows = *bytes = 0;
    region_lock_all(r);
    for (int i = 0; i < REGION_LANES; i++) {
        *rows += r->lanes[i].owner_rows[owner];
        *bytes += r->lanes[i].owner_bytes[owner];
    }
    region_unlock_all(r);
}

int lattice_region_page_inspect(lattice_region *r, uint32_t page, lattice_region_page_info *info)
{
    memset(info, 0, sizeof *info);
    info->bucket = -1;
    region_lock_all(r);
    int st = page < r->pages_mapped ? LATTICE_OK : LATTICE_ERR_NOT_FOUND;
    if (st == LATTICE_OK) {
        struct page_hdr *h = hdr_w(r, page);
        info->kind = h->kind == KIND_DATA    ? LATTICE_PAGE_DATA
                     : h->kind == KIND_REUSE ? LATTICE_PAGE_REUSE
                                             : LATTICE_PAGE_RELEASED;
        info->free = h->free;
        info->items = h->nitems;
        info->live = h->live;
        if (h->bucket < LATTICE_REGION_BUCKETS) info->bucket = h->bucket;
    }
    region_unlock_all(r);
    return st;
}


/* ---- idle time (OBJECT IDLETIME) ---- */

void lattice_region_tick(lattice_region *r, uint64_t now_ms)
{
    pthread_mutex_lock(&r->tick_lock);
    uint32_t last = r->tick_n ? (r->tick_head + r->tick_n - 1) % REGION_TICKS : 0;
    if (!r->tick_n || now_ms - r->tick_ms[last] >= 1000) {
        /* The epoch ends now: every later access is stamped with a newer one. */
        uint32_t ep = __atomic_fetch_add(&r->epoch, 1, __ATOMIC_RELAXED);
        uint32_t i = (r->tick_head + r->tick_n) % REGION_TICKS;
        if (r->tick_n == REGION_TICKS) r->tick_head = (r->tick_head + 1) % REGION_TICKS;
        else r->tick_n++;
        r->tick_ep[i] = ep;
        r->tick_ms[i] = now_ms;
    }
    pthread_mutex_unlock(&r->tick_lock);
}

uint64_t region_page_idle_ms(lattice_region *r, uint32_t pid, uint64_t now_ms)
{
    uint32_t a = __atomic_load_n(&hdr_w(r, pid)->access, __ATOMIC_RELAXED);
    uint64_t idle = 0;
    pthread_mutex_lock(&r->tick_lock);
    /* The first tick that ended the page's epoch or a later one: the access
     * came before it (epochs wrap: compared by difference). */
    uint32_t lo = 0, hi = r->tick_n;
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if ((int32_t)(r->tick_ep[(r->tick_head + mid) % REGION_TICKS] - a) >= 0) hi = mid;
        else lo = mid + 1;
    }
    if (lo < r->tick_n) {
        uint64_t t = r->tick_ms[(r->tick_head + lo) % REGION_TICKS];
        idle = now_ms > t ? now_ms - t : 0;
    }
    pthread_mutex_unlock(&r->tick_lock);
    return idle;
}

