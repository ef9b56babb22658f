/*
 * The lock-free reader's small helpers and the get's common case, inline so
 * that lattice_store_get runs the whole hit without a call: region_read.c
 * uses the helpers for the general reader, store.c the small-row read.
 * Not a public header: only storage/ includes it (after region_int.h).
 *
 * Why inline: a hit of a small row used to cost ~390 instructions against
 * the reference's ~170 (a plain cds_lfht of malloc'd records,
 * docs/BENCHMARKS.md); a call into region_read.c with a request struct
 * built byte by byte (varint_put into a buffer, then memcpy) and an
 * out-of-line hash cost ~80 of them (387 -> 310 per hit inline).
 */
#ifndef LATTICE_STORAGE_REGION_READ_H
#define LATTICE_STORAGE_REGION_READ_H

#include <stdint.h>
#include <string.h>

#include "region_int.h"

/* A varint of at most max bytes (max >= 2); *bad set when it runs longer.
 * One- and two-byte varints (most partitions, lengths, versions) take no
 * loop. */
static inline uint64_t varint_fast(const uint8_t **pp, int max, int *bad)
{
    const uint8_t *p = *pp;
    uint64_t v = p[0];
    if (v < 0x80) {
        *pp = p + 1;
        return v;
    }
    v = (v & 0x7f) | (uint64_t)(p[1] & 0x7f) << 7;
    if (p[1] < 0x80) {
        *pp = p + 2;
        return v;
    }
    for (int i = 2; i < max; i++) {
        uint8_t b = p[i];
        v |= (uint64_t)(b & 0x7f) << (7 * i);
        if (!(b & 0x80)) {
            *pp = p + i + 1;
            return v;
        }
    }
    *bad = 1;
    return 0;
}

/* memcmp(a, b, n) != 0 and memcpy for the short keys and values most rows
 * have, without a library call: two overlapping 8- or 4-byte accesses cover
 * 4..16 bytes. */
static inline int differ(const uint8_t *a, const uint8_t *b, uint64_t n)
{
    if (n >= 8 && n <= 16) {
        uint64_t a0, a1, b0, b1;
        memcpy(&a0, a, 8), memcpy(&a1, a + n - 8, 8);
        memcpy(&b0, b, 8), memcpy(&b1, b + n - 8, 8);
        return ((a0 ^ b0) | (a1 ^ b1)) != 0;
    }
    if (n >= 4 && n < 8) {
        uint32_t a0, a1, b0, b1;
        memcpy(&a0, a, 4), memcpy(&a1, a + n - 4, 4);
        memcpy(&b0, b, 4), memcpy(&b1, b + n - 4, 4);
        return ((a0 ^ b0) | (a1 ^ b1)) != 0;
    }
    return memcmp(a, b, n) != 0;
}

static inline void copy(uint8_t *dst, const uint8_t *src, uint64_t n)
{
    if (n >= 8 && n <= 16) {
        uint64_t a, b;
        memcpy(&a, src, 8), memcpy(&b, src + n - 8, 8);
        memcpy(dst, &a, 8), memcpy(dst + n - 8, &b, 8);
    } else {
        memcpy(dst, src, n);
    }
}

/* 8 bytes stored little-endian (put_fixed's order) as a number. */
static inline uint64_t le64_at(const uint8_t *p)
{
    uint64_t x;
    memcpy(&x, p, 8);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    x = __builtin_bswap64(x);
#endif
    return x;
}

/* The varint bytes of v < 2^21 as a little-endian number, and their count:
 * what varint_put writes, without a loop or a buffer.  Below 2^14 (every
 * partition, most key lengths) it takes no branch. */
static inline uint64_t varint_word(uint32_t v, uint32_t *n)
{
    if (__builtin_expect(v >= 0x4000, 0)) {
        *n = 3;
        return (v & 0x7f) | 0x80 | (uint64_t)(((v >> 7) & 0x7f) | 0x80) << 8 |
               (uint64_t)(v >> 14) << 16;
    }
    uint32_t big = v >= 0x80;
    *n = 1 + big;
    uint64_t two = (v & 0x7f) | 0x80 | (uint64_t)(v >> 7) << 8;
    return big ? two : v;
}

/* The first bytes of a head row of partition `partition` written by store
 * `owner`: flags F_HEAD, owner, the partition's varint (< 2^14: 1-2
 * bytes), as a little-endian number.  A store keeps one per partition
 * (store.heads), so a get does not encode it. */
static inline uint32_t head_prefix(uint8_t owner, uint32_t partition)
{
    uint32_t n;
    return F_HEAD | (uint32_t)owner << 8 | (uint32_t)varint_word(partition, &n) << 16;
}

/* A get's request for region_read_small: the wanted key and where its
 * value goes, then what the row said. */
struct small_get {
    const void *key;
    size_t klen;
    void *buf;           /* the value is copied here when vlen <= cap */
    size_t cap;
    size_t vlen;         /* results, when it returns 1 */
    uint64_t version, expire;
};

/* The common get: reads the head row of the entry at link where the link's
 * position hint says, if it is a small unfragmented head row whose header
 * lies inside the page.  1: the row is this key's (g has its value, vlen,
 * version and expire time); 0: a consistent row of another key; -1: anything
 * else (stale hint, fragmented, torn, being written) - the caller asks the
 * general reader.
 *
 * Page header, item slot and row are loaded with no load depending on
 * another (one round of misses; all three addresses come from the link), and the row is accepted only if the slot
 * points at the hint and the page's seqlock count was even and unchanged:
 * exactly the row the general reader, which reads the row at the slot's
 * offset, would accept.  A link read from a live index slot always names a
 * page that was mapped before the link was published (release) and pages
 * are never unmapped, so the page's chunk pointer is not bounds-checked
 * against pages_mapped here.  Needs rcu_read_lock (the caller's table). */
static inline __attribute__((always_inline)) int region_read_small(const lattice_region *r,
                                                                   uint64_t link, uint32_t prefix,
                                                                   struct small_get *g)
{
    uint32_t hint = (uint32_t)(link >> 48), pid = LATTICE_LINK_PAGE(link), ps = r->page_size;
    const uint8_t *c = __atomic_load_n(&r->chunks[pid >> r->chunk_shift], __ATOMIC_ACQUIRE);
    /* A head row of this form has at most 7 + 4 + 10 + 8 header bytes, so
     * one bounds check covers the header.  The item slot needs none: the
     * link was handed out for a row of this page, so its slot lies inside
     * the page (whether it is still in use is item < nitems, checked with
     * the seqlock). */
    if (!c || hint - HDR > ps - 32 - HDR) return -1; /* also refuses a link without a hint */
    const uint8_t *pg = c + ((size_t)(pid & (r->chunk_pages - 1)) << r->page_shift);
    struct page_hdr *h = (struct page_hdr *)pg;
    uint32_t s = __atomic_load_n(&h->seq, __ATOMIC_ACQUIRE);
    SEQLOCK_READ_SECTION();
    const uint8_t *p = pg + hint;
    /* The row must start as this key's head row: the prefix (flags without
     * F_EXPIRE, owner, partition), then the key length - at most 7 bytes,
     * checked with one 8-byte compare.  The prefix's type bits are 0, so
     * only a string's row passes: a row of another type goes to the
     * general reader, which returns its type. */
    uint32_t pn = 1 + ((prefix >> 23) & 1), kn;
    uint64_t head = prefix | varint_word((uint32_t)g->klen, &kn) << (16 + 8 * pn);
    uint32_t head_len = 2 + pn + kn;
    uint64_t mask = ((1ull << (8 * head_len)) - 1) & ~(uint64_t)F_EXPIRE, w;
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    head = __builtin_bswap64(head), mask = __builtin_bswap64(mask);
#endif
    memcpy(&w, p, 8);
    if ((w ^ head) & mask) return -1;
    p += head_len;
    uint64_t vl, version, expire = 0;
    if (!((p[0] | p[3]) & 0x80) && (p[1] & p[2] & 0x80)) { /* one-byte value length, version below 2^21 */
        vl = p[0], version = (p[1] & 0x7fu) | (uint64_t)(p[2] & 0x7f) << 7 | (uint64_t)p[3] << 14;
        p += 4;
    } else {
        int bad = 0;
        vl = varint_fast(&p, 4, &bad), version = varint_fast(&p, 10, &bad);
        if (bad) return -1;
    }
    if (pg[hint] & F_EXPIRE) {
        expire = le64_at(p);
        p += 8;
    }
    /* Also bounds vl by the page size (below LATTICE_STORE_MAX_VALUE). */
    if ((uint64_t)(p - pg) + g->klen + vl > ps) return -1;
    int mine = !differ(p, g->key, g->klen);
    if (mine && vl && vl <= g->cap) copy(g->buf, p + g->klen, vl);
    /* The slot and nitems are read inside the section like the row (their
     * loads still issue with the row's: their addresses are known). */
    uint32_t item = LATTICE_LINK_ITEM(link);
    if ((s & 1) | (page_items((void *)pg)[item] != hint) | (item >= h->nitems)) return -1;
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    if (__atomic_load_n(&h->seq, __ATOMIC_RELAXED) != s) return -1;
    if (!mine) return 0;
    g->vlen = vl, g->version = version, g->expire = expire;
    /* The page's LRU epoch: a plain store, and only when it changed. */
    uint32_t ep = __atomic_load_n(&r->epoch, __ATOMIC_RELAXED);
    if (__atomic_load_n(&h->access, __ATOMIC_RELAXED) != ep)
        __atomic_store_n(&h->access, ep, __ATOMIC_RELAXED);
    return 1;
}

#endif
