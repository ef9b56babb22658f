/*
 * Slotted data pages and the row codec.  Layout and rules: region_int.h.
 *
 * Row formats (integers in little-endian; v = LEB128 varint):
 *   head:  flags u8 | owner u8 | v partition | v key_len | v value_len |
 *          v version | [expire u64 if F_EXPIRE] |
 *          [next link: page u32, item u16; piece_len u16  if F_NEXT] | payload
 *   cont:  flags u8 | [next link: page u32, item u16 if F_NEXT] | piece_len u16 | payload
 * The payload of an entry is key || value.  An unfragmented head holds all of
 * it (piece_len = key_len + value_len); a fragmented one holds the first
 * piece and links the continuation rows that hold the rest, in order.
 * Varints keep the header of a typical small row at 8-10 bytes; the
 * version's is padded with continuation bytes to at least ROW_VERSION_BYTES
 * (region_int.h), so an overwrite of the same size fits its row while the
 * partition's counter grows.
 */
#include <string.h>

#include "region_int.h"

void page_write_begin(struct page_hdr *h)
{
    /* Odd seq first, then the changes: a reader that sees the changes also
     * sees the odd (or a later) seq when it re-checks. */
    __atomic_store_n(&h->seq, h->seq + 1, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_RELEASE);
}

void page_write_end(struct page_hdr *h)
{
    __atomic_store_n(&h->seq, h->seq + 1, __ATOMIC_RELEASE);
}

void page_init_empty(struct page_hdr *h, uint32_t page_size)
{
    h->nitems = 0;
    h->upper = (uint16_t)page_size;
    h->free = (uint16_t)(page_size - HDR);
    h->live = 0;
    __atomic_store_n(&h->heads, 0, __ATOMIC_RELAXED);
}

/* ---- varints ---- */

/* Bounded reader over possibly garbage bytes. */
struct rd {
    const uint8_t *p, *end;
    int bad;
};

static uint64_t rd_varint(struct rd *r)
{
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (r->p >= r->end) break;
        uint8_t b = *r->p++;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) return v;
    }
    r->bad = 1;
    return 0;
}

static uint64_t rd_fixed(struct rd *r, int n)
{
    if (r->end - r->p < n) {
        r->bad = 1;
        return 0;
    }
    uint64_t v = 0;
    for (int i = 0; i < n; i++) v |= (uint64_t)r->p[i] << (8 * i);
    r->p += n;
    return v;
}

static uint64_t rd_link(struct rd *r)
{
    uint64_t page = rd_fixed(r, 4);
    uint64_t item = rd_fixed(r, 2);
    return LATTICE_LINK(page, item);
}

/* ---- rows ---- */

int row_parse(const uint8_t *pg, uint32_t page_size, uint32_t off, struct rowv *v)
{
    if (off < HDR || off >= page_size) return -1;
    struct rd r = {pg + off, pg + page_size, 0};
    memset(v, 0, sizeof *v);
    v->flags = (uint8_t)rd_fixed(&r, 1);
    if (v->flags & F_HEAD) {
        if (v->flags & F_CONT) return -1;
        v->owner = (uint8_t)rd_fixed(&r, 1);
        uint64_t part = rd_varint(&r), kl = rd_varint(&r), vl = rd_varint(&r);
        v->version = rd_varint(&r);
        if (part >= LATTICE_STORE_MAX_PARTITIONS || kl > LATTICE_STORE_MAX_KEY ||
            vl > LATTICE_STORE_MAX_VALUE)
            return -1;
        v->partition = (uint32_t)part, v->klen = (uint32_t)kl, v->vlen = (uint32_t)vl;
        if (v->flags & F_EXPIRE) v->expire = rd_fixed(&r, 8);
        if (v->flags & F_NEXT) {
            v->next = rd_link(&r);
            v->piece_len = (uint32_t)rd_fixed(&r, 2);
        } else {
            v->piece_len = v->klen + v->vlen;
        }
    } else if (v->flags & F_CONT) {
        if (v->flags & F_NEXT) v->next = rd_link(&r);
        v->piece_len = (uint32_t)rd_fixed(&r, 2);
    } else {
        return -1;
    }
    if (r.bad) return -1;
    v->payload_off = (uint32_t)(r.p - pg);
    if ((uint64_t)v->payload_off + v->piece_len > page_size) return -1;
    v->len = v->payload_off + v->piece_len - off;
    return 0;
}

/* ---- page space ---- */

int page_fits(const struct page_hdr *h, uint32_t len)
{
    uint32_t need = len + (h->live < h->nitems ? 0 : 2);
    return h->free >= need && h->nitems < UINT16_MAX;
}

static uint32_t row_len_trusted(const uint8_t *pg, uint32_t page_size, uint32_t off)
{
    struct rowv v;
    /* Writers only: rows on pages are well formed under the region lock. */
    if (row_parse(pg, page_size, off, &v) != 0) return 0;
    return v.len;
}

void page_compact(struct page_hdr *h, uint32_t page_size)
{
    uint8_t tmp[LATTICE_REGION_MAX_PAGE];
    uint8_t *pg = (uint8_t *)h;
    uint16_t *it = page_items(pg);
    uint32_t pos = page_size;
    /* Copy live rows, in item order, to the back of a scratch page; item ids
     * stay, only their offsets change. */
    for (uint32_t i = 0; i < h->nitems; i++) {
        if (!it[i]) continue;
        uint32_t len = row_len_trusted(pg, page_size, it[i]);
        pos -= len;
        memcpy(tmp + pos, pg + it[i], len);
        it[i] = (uint16_t)pos;
    }
    memcpy(pg + pos, tmp + pos, page_size - pos);
    h->upper = (uint16_t)pos;
}

uint16_t page_place(struct page_hdr *h, uint32_t page_size, uint32_t len, int slot)
{
    uint16_t *it = page_items(h);
    int newslot = 0;
    if (slot < 0) {
        if (h->live < h->nitems) {
            for (slot = 0; it[slot]; slot++) continue;
        } else {
            slot = h->nitems;
            newslot = 1;
        }
    }
    uint32_t need = len + (newslot ? 2 : 0);
    uint32_t gap = h->upper - HDR - 2u * h->nitems;
    if (gap < need) page_compact(h, page_size);
    if (newslot) {
        h->nitems++;
        h->free -= 2;
    }
    h->upper -= (uint16_t)len;
    it[slot] = h->upper;
    h->live++;
    h->free -= (uint16_t)len;
    return (uint16_t)slot;
}

uint32_t page_remove(struct page_hdr *h, uint32_t page_size, uint16_t item, int keep_slot,
                     uint32_t len)
{
    uint16_t *it = page_items(h);
    uint32_t off = it[item];
    if (!len) len = row_len_trusted((uint8_t *)h, page_size, off);
    it[item] = 0;
    h->live--;
    h->free += (uint16_t)len;
    /* The lowest row went: nothing lives below off + len any more. */
    if (off == h->upper) h->upper = (uint16_t)(off + len);
    while (!keep_slot && h->nitems && !it[h->nitems - 1]) {
        h->nitems--;
        h->free += 2;
    }
    return len;
}
