/*
 * Region eviction (policy evict): random-2-LRU over the pages that hold head
 * rows, then, when sampling finds nothing it may evict, a sweep of every
 * page; the owners' hooks (region_attach) decide which entries may go and
 * free them.  A writer out of pages evicts through take_page (region.c);
 * region_evict evicts on request.  Layout and locking: region_int.h.
 */
#include <sched.h>

#include "lattice/alloc.h"
#include "region_int.h"

static uint64_t rng_next(struct lane *l)
{
    uint64_t x = l->rng;
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    return l->rng = x;
}

/* Evicts the entries whose head rows sit on page pid (its lane locked).  A
 * page found to hold no head row loses its heads hint. */
static int evict_page(lattice_region *r, uint32_t pid, const struct evict_guard *g)
{
    struct page_hdr *h = hdr_w(r, pid);
    uint8_t *pg = (uint8_t *)h;
    int evicted = 0, heads = 0;
    for (uint32_t i = 0; h->kind == KIND_DATA && i < h->nitems; i++) {
        uint16_t off = page_items(pg)[i];
        struct rowv v;
        if (!off || row_parse(pg, r->page_size, off, &v) != 0 || !(v.flags & F_HEAD)) continue;
        heads++;
        if (v.owner == 0 || !r->owners[v.owner].fn) continue;
        uint64_t link = LATTICE_LINK(pid, i);
        if (v.klen <= v.piece_len) {
            /* The callback reads the key before it frees the row. */
            evicted += r->owners[v.owner].fn(r->owners[v.owner].ctx, v.partition,
                                             pg + v.payload_off, v.klen, link, g);
            continue;
        }
        void *key = lt_malloc(v.klen);
        struct read_req q = {.kbuf = key, .kcap = v.klen};
        if (key && region_read_entry(r, link, &q) == LATTICE_OK && q.klen == v.klen)
            evicted += r->owners[v.owner].fn(r->owners[v.owner].ctx, v.partition, key,
                                             v.klen, link, g);
        lt_free(key);
    }
    if (!heads && h->kind == KIND_DATA) __atomic_store_n(&h->heads, 0, __ATOMIC_RELAXED);
    return evicted;
}

/* May page pid be worth evicting?  An unlocked peek at a page of any lane:
 * re-checked under its lane's lock by evict_locked. */
static int evict_candidate(lattice_region *r, uint32_t pid)
{
    struct page_hdr *h = hdr_w(r, pid);
    return __atomic_load_n(&h->kind, __ATOMIC_RELAXED) == KIND_DATA &&
           __atomic_load_n(&h->bucket, __ATOMIC_RELAXED) != BUCKET_DETACHED &&
           __atomic_load_n(&h->heads, __ATOMIC_RELAXED);
}

/* The first candidate page at or after pid (wrapping), NO_PAGE when none. */
static uint32_t next_candidate(lattice_region *r, uint32_t pid, uint32_t mapped)
{
    for (uint32_t k = 0; k < mapped; k++, pid = pid + 1 == mapped ? 0 : pid + 1)
        if (evict_candidate(r, pid)) return pid;
    return NO_PAGE;
}

/* Evicts from page pid under its lane's lock (l is held; another lane is only
 * try-locked).  Entries evicted, or -1 when that lane was busy. */
static int evict_locked(lattice_region *r, struct lane *l, uint32_t pid, const struct evict_guard *g)
{
    struct lane *o = &r->lanes[__atomic_load_n(&hdr_w(r, pid)->lane, __ATOMIC_RELAXED)];
    if (o != l && pthread_mutex_trylock(&o->lock) != 0) return -1;
    struct page_hdr *h = hdr_w(r, pid);
    int evicted = 0;
    if (h->lane == o->idx && h->kind == KIND_DATA && h->bucket != BUCKET_DETACHED)
        evicted = evict_page(r, pid, g);
    if (o != l) pthread_mutex_unlock(&o->lock);
    __atomic_add_fetch(&r->evictions, (uint64_t)evicted, __ATOMIC_RELAXED);
    return evicted;
}

/* Random-2-LRU over pages: evicts the entries whose head rows sit on the
 * less recently used of two sampled data pages, of any lane.  Only pages
 * that hold head rows are sampled: a fragmented entry's continuation rows
 * fill pages of their own (a 4 KiB value on 4 KiB pages: one page each, its
 * head a few dozen bytes on a page shared with ~70 others), and evicting
 * such a page frees nothing, since only a head names its entry.  Each sample
 * walks from a random page to the next one with head rows.  Lane l locked.
 * Returns entries evicted, or -1 when the chosen page's lane was busy. */
int region_evict_one(lattice_region *r, struct lane *l, const struct evict_guard *g)
{
    uint32_t mapped = __atomic_load_n(&r->pages_mapped, __ATOMIC_ACQUIRE), cand[2], n = 0;
    for (int tries = 0; tries < 2 && mapped; tries++) {
        uint32_t pid = next_candidate(r, (uint32_t)(rng_next(l) % mapped), mapped);
        if (pid != NO_PAGE) cand[n++] = pid;
    }
    if (n == 0) return 0;
    uint32_t pid = cand[0];
    uint32_t ep = __atomic_load_n(&r->epoch, __ATOMIC_RELAXED);
    if (n == 2) {
        uint32_t a0 = __atomic_load_n(&hdr_w(r, cand[0])->access, __ATOMIC_RELAXED);
        uint32_t a1 = __atomic_load_n(&hdr_w(r, cand[1])->access, __ATOMIC_RELAXED);
        if ((int32_t)(ep - a1) > (int32_t)(ep - a0)) pid = cand[1];
    }
    return evict_locked(r, l, pid, g);
}

/* The last resort before REGION_FULL: every page with head rows, from a
 * random one, until one yields an eviction.  Sampling can miss what may be
 * evicted (the store's hook allows only some partitions: a node evicts the
 * entries it leads, and a page may hold other copies' rows only), so a full
 * region is reported only once no page at all yields an eviction.  Returns
 * entries evicted, 0 when nothing may be evicted, -1 when a lane that might
 * have had some was busy. */
int region_evict_sweep(lattice_region *r, struct lane *l, const struct evict_guard *g)
{
    uint32_t mapped = __atomic_load_n(&r->pages_mapped, __ATOMIC_ACQUIRE), busy = 0;
    if (!mapped) return 0;
    uint32_t pid = (uint32_t)(rng_next(l) % mapped);
    for (uint32_t k = 0; k < mapped; k++, pid = pid + 1 == mapped ? 0 : pid + 1) {
        if (!evict_candidate(r, pid)) continue;
        int ev = evict_locked(r, l, pid, g);
        if (ev > 0) return ev;
        if (ev < 0) busy++;
    }
    return busy ? -1 : 0;
}

int region_evict(lattice_region *r, size_t want, const struct evict_guard *g, size_t *evicted)
{
    *evicted = 0;
    if (r->policy != LATTICE_REGION_EVICT || want == 0) return LATTICE_OK;
    struct lane *l = region_lock_writer(r);
    /* take_page's loop, with "enough evicted" in place of "a page found". */
    int rounds = 0, busy = 0;
    while (*evicted < want) {
        int ev = rounds < EVICT_ROUNDS ? region_evict_one(r, l, g) : region_evict_sweep(r, l, g);
        if (ev > 0) {
            *evicted += (size_t)ev;
            rounds = 0;
            continue;
        }
        if (ev < 0 && ++busy < EVICT_BUSY_ROUNDS) {
            region_unlock(l);
            sched_yield();
            l = region_lock_writer(r);
            continue;
        }
        if (rounds++ >= EVICT_ROUNDS) break;
    }
    region_unlock(l);
    return LATTICE_OK;
}
