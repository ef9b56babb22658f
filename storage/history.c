/*
 * history: bounded ring of (counter, key) per partition (history.h).
 * Callers serialise every call on one history (store.c: the partition lock).
 */
#include "history.h"

#include <string.h>
#include <unistd.h>

#include "lattice/alloc.h"

/* A ring's slots are pages of their own (lt_map), not heap: a partition's
 * ring is 40 KiB at the defaults, allocated at its first write and freed when
 * the partition leaves.  From malloc, the rings of partitions that came and
 * went (a restart elsewhere, a joiner's share) left 40-65 KiB holes between
 * small long-lived blocks that the next rings did not fit exactly, and the
 * node's RSS crept up by a few MiB an hour through such events (the soak,
 * docs/BENCHMARKS.md).  Unmapped, the memory is the OS's again at once. */
static size_t ring_bytes(uint32_t cap)
{
    size_t pg = (size_t)sysconf(_SC_PAGESIZE);
    return ((size_t)cap * sizeof(hist_rec) + pg - 1) / pg * pg;
}

static void ring_free(hist_rec *ring, uint32_t cap)
{
    if (ring) lt_unmap(ring, ring_bytes(cap));
}

void lt_hist_init(lt_hist *h)
{
    memset(h, 0, sizeof *h);
}

static void drop_oldest(lt_hist *h)
{
    hist_rec *r = &h->ring[h->head];
    if (r->counter > h->dropped) h->dropped = r->counter;
    h->any_dropped = true;
    h->bytes -= LT_HIST_REC_BYTES(r->key_len);
    if (r->key_len > LT_HIST_INLINE_KEY) lt_free(r->key.heap);
    h->head = (h->head + 1) % h->cap;
    h->n--;
}

static void empty(lt_hist *h)
{
    while (h->n) drop_oldest(h);
    ring_free(h->ring, h->cap);
    h->ring = NULL;
    h->cap = h->head = 0;
}

void lt_hist_free(lt_hist *h)
{
    empty(h);
    lt_hist_init(h);
}

void lt_hist_reset(lt_hist *h)
{
    lt_hist_free(h);
}

void lt_hist_lose(lt_hist *h)
{
    empty(h); /* nothing in it can be trusted to be complete any more */
    h->lost = true;
    h->valid = false;
}

/* Gives the ring its slots, all at once, at the first record: as many as
 * max_entries and max_bytes allow, touched now.  A history's memory is then
 * known from its partition's first write on and stays flat while it fills
 * (a ring that doubled as writes came in grew a node's RSS for minutes after
 * every restart, and left the old rings' holes in the heap).  A ring whose
 * bounds were raised since grows once more to the new bound. */
static bool grow(lt_hist *h, uint32_t max_entries, uint64_t max_bytes)
{
    if (h->n < h->cap) return true;
    uint64_t by_bytes = max_bytes / sizeof(hist_rec);
    uint32_t cap = by_bytes < max_entries ? (uint32_t)by_bytes : max_entries;
    if (cap <= h->cap) cap = h->cap * 2 < max_entries ? h->cap * 2 : max_entries;
    if (cap <= h->cap) return false;
    hist_rec *x = lt_map(ring_bytes(cap));
    if (!x) return false;
    memset(x, 0, cap * sizeof *x); /* zero already; touched, so RSS shows it from now */
    for (uint32_t i = 0; i < h->n; i++) x[i] = h->ring[(h->head + i) % h->cap];
    ring_free(h->ring, h->cap);
    h->ring = x;
    h->cap = cap;
    h->head = 0;
    return true;
}

/* Counter c was applied: contig moves over it and whatever it joins. */
static void contig_note(lt_hist *h, uint64_t c)
{
    if (!h->valid || c <= h->contig || c - h->contig > 64) return; /* too far ahead: a gap below */
    h->win |= 1ull << (c - h->contig - 1);
    while (h->win & 1) {
        h->win >>= 1;
        h->contig++;
    }
}

void lt_hist_note(lt_hist *h, uint32_t max_entries, uint64_t max_bytes, uint64_t counter, const void *key,
                  size_t key_len, bool removed)
{
    if (h->lost) return;
    contig_note(h, counter);
    uint64_t cost = LT_HIST_REC_BYTES(key_len);
    if (!max_entries || cost > max_bytes || key_len > UINT32_MAX) {
        /* Off, or a record that never fits: the change cannot be told. */
        if (!max_entries) lt_hist_lose(h);
        else {
            if (counter > h->dropped) h->dropped = counter;
            h->any_dropped = true;
        }
        return;
    }
    while (h->n && (h->n >= max_entries || h->bytes + cost > max_bytes)) drop_oldest(h);
    uint8_t *k = key_len > LT_HIST_INLINE_KEY ? lt_malloc(key_len) : NULL;
    if ((key_len > LT_HIST_INLINE_KEY && !k) || !grow(h, max_entries, max_bytes)) {
        lt_free(k);
        lt_hist_lose(h);
        return;
    }
    hist_rec *r = &h->ring[(h->head + h->n) % h->cap];
    r->counter = counter;
    r->key_len = (uint32_t)key_len;
    r->removed = removed;
    if (k) r->key.heap = k;
    if (key_len) memcpy(k ? k : r->key.inl, key, key_len);
    h->n++;
    h->bytes += cost;
}

void lt_hist_valid_from(lt_hist *h, uint64_t base)
{
    if (h->lost) return;
    if (!h->valid || base > h->contig) {
        h->contig = base;
        h->win = 0;
    }
    h->valid = true;
    h->base = base;
    /* The ring is in arrival order, not counter order: pass again while
     * contig moves (each pass that moves it consumes a record). */
    for (uint64_t before = UINT64_MAX; before != h->contig;) {
        before = h->contig;
        for (uint32_t i = 0; i < h->n; i++) contig_note(h, h->ring[(h->head + i) % h->cap].counter);
    }
}

bool lt_hist_recorded_above(const lt_hist *h, uint64_t x)
{
    return !h->lost && (!h->any_dropped || h->dropped <= x);
}

bool lt_hist_complete_above(const lt_hist *h, uint64_t x)
{
    return h->valid && h->base <= x && lt_hist_recorded_above(h, x);
}

void lt_hist_walk_above(const lt_hist *h, uint64_t x, lt_hist_fn fn, void *arg)
{
    for (uint32_t i = 0; i < h->n; i++) {
        const hist_rec *r = &h->ring[(h->head + i) % h->cap];
        if (r->counter > x && fn(arg, hist_rec_key(r), r->key_len, r->counter, r->removed)) return;
    }
}
