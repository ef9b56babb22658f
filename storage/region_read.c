/*
 * The region's lock-free reader: region_read_entry reads an entry's head
 * row and its continuation chain under each page's seqlock, retrying torn
 * reads (region_int.h draws the page layout and the seqlock; region_read.h
 * holds the small inline helpers it shares with the store's get).
 */
#include "lattice/log.h"
#include "region_int.h"
#include "region_read.h"

#define SPIN_LIMIT 100000000u

static uint32_t seq_begin(const struct page_hdr *h, unsigned *spins)
{
    uint32_t s;
    while ((s = __atomic_load_n(&h->seq, __ATOMIC_ACQUIRE)) & 1) {
        ++*spins;
        __builtin_ia32_pause();
    }
    return s;
}

static int seq_same(const struct page_hdr *h, uint32_t s)
{
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    return __atomic_load_n(&h->seq, __ATOMIC_RELAXED) == s;
}

/* Compares / copies payload bytes [pos, pos+len) of one piece. */
static void take_piece(struct read_req *q, uint64_t pos, const uint8_t *src, uint64_t len)
{
    uint64_t kpart = 0;
    if (pos < q->klen) {
        kpart = q->klen - pos < len ? q->klen - pos : len;
        if (q->want_key && q->match && differ(src, (const uint8_t *)q->want_key + pos, kpart))
            q->match = 0;
        if (q->kbuf && q->klen <= q->kcap) copy((uint8_t *)q->kbuf + pos, src, kpart);
    }
    if (len > kpart && q->vbuf && q->vlen <= q->vcap)
        copy((uint8_t *)q->vbuf + (pos + kpart - q->klen), src + kpart, len - kpart);
}

/* Reads the continuation chain from next; 0 when consistent, -1 to retry. */
static int read_chain(lattice_region *r, struct read_req *q, uint64_t next, uint64_t pos,
                      unsigned *spins)
{
    uint64_t total = q->klen + q->vlen;
    for (;;) {
        const uint8_t *pg = page_addr(r, LATTICE_LINK_PAGE(next));
        if (!pg) return -1;
        const struct page_hdr *h = (const struct page_hdr *)pg;
        uint32_t s = seq_begin(h, spins);
        SEQLOCK_READ_SECTION();
        uint16_t item = LATTICE_LINK_ITEM(next), nitems = h->nitems;
        uint16_t off = item < nitems ? page_items((void *)pg)[item] : 0;
        struct rowv v;
        if (!off || row_parse(pg, r->page_size, off, &v) != 0 || !(v.flags & F_CONT) ||
            pos + v.piece_len > total)
            return -1;
        take_piece(q, pos, pg + v.payload_off, v.piece_len);
        if (!seq_same(h, s)) return -1;
        pos += v.piece_len;
        if (!(v.flags & F_NEXT)) return pos == total ? 0 : -1;
        next = v.next;
    }
}

/* The reader's common case - an unfragmented head row whose header lies
 * wholly inside the page - parsed with one bounds check instead of one per
 * byte: its varints are at most 3 (partition), 3 (key), 4 (value) and 10
 * (version) bytes, so the header is at most 2 + 20 + 8 bytes.  The checks on
 * the values are row_parse's: the bytes may be garbage.  -1: not such a row
 * (the caller falls back to row_parse). */
static inline int head_parse_fast(const uint8_t *pg, uint32_t page_size, uint32_t off,
                                  struct rowv *v)
{
    if (off < HDR || off + 32 > page_size) return -1;
    const uint8_t *p = pg + off;
    if ((p[0] & (F_HEAD | F_CONT | F_NEXT)) != F_HEAD) return -1;
    v->flags = p[0];
    v->owner = p[1];
    p += 2;
    int bad = 0;
    uint64_t part = varint_fast(&p, 3, &bad), kl = varint_fast(&p, 3, &bad);
    uint64_t vl = varint_fast(&p, 4, &bad);
    v->version = varint_fast(&p, 10, &bad);
    if (bad || part >= LATTICE_STORE_MAX_PARTITIONS || kl > LATTICE_STORE_MAX_KEY ||
        vl > LATTICE_STORE_MAX_VALUE)
        return -1;
    v->partition = (uint32_t)part, v->klen = (uint32_t)kl, v->vlen = (uint32_t)vl;
    v->expire = 0;
    if (v->flags & F_EXPIRE) {
        uint64_t x = 0;
        for (int i = 0; i < 8; i++) x |= (uint64_t)p[i] << (8 * i);
        v->expire = x;
        p += 8;
    }
    v->next = 0;
    v->piece_len = v->klen + v->vlen;
    v->payload_off = (uint32_t)(p - pg);
    if ((uint64_t)v->payload_off + v->piece_len > page_size) return -1;
    v->len = v->payload_off + v->piece_len - off;
    return 0;
}

int region_read_entry(lattice_region *r, uint64_t link, struct read_req *q)
{
    unsigned spins = 0;
    for (;; spins++) {
        if (spins > SPIN_LIMIT) {
            LT_LOG(LT_ERROR, "storage", "region %s: row at page %u item %u never read whole",
                   r->name, LATTICE_LINK_PAGE(link), LATTICE_LINK_ITEM(link));
            return LATTICE_ERR_NOT_FOUND;
        }
        const uint8_t *pg = page_addr(r, LATTICE_LINK_PAGE(link));
        if (!pg) return LATTICE_ERR_NOT_FOUND;
        struct page_hdr *h = (struct page_hdr *)pg;
        uint16_t item = LATTICE_LINK_ITEM(link);
        /* Header, item slot and (by the link's position hint) the row are on
         * different lines: fetch them at once instead of one after another. */
        __builtin_prefetch(pg + HDR + 2u * item);
        if (link >> 48 && (link >> 48) < r->page_size) __builtin_prefetch(pg + (link >> 48));
        uint32_t s = seq_begin(h, &spins);
        SEQLOCK_READ_SECTION();
        uint16_t nitems = h->nitems;
        uint16_t off = item < nitems ? page_items((void *)pg)[item] : 0;
        struct rowv v;
        if (!off ||
            (head_parse_fast(pg, r->page_size, off, &v) != 0 &&
             row_parse(pg, r->page_size, off, &v) != 0) ||
            !(v.flags & F_HEAD) || v.piece_len > (uint64_t)v.klen + v.vlen) {
            if (seq_same(h, s)) return LATTICE_ERR_NOT_FOUND;
            continue;
        }
        q->owner = v.owner;
        q->partition = v.partition;
        q->klen = v.klen, q->vlen = v.vlen;
        q->version = v.version, q->expire = v.expire;
        q->type = ROW_TYPE(v.flags);
        q->match = !q->want_key || (q->want_klen == v.klen && q->want_owner == v.owner &&
                                    q->want_partition == v.partition);
        if (q->match || !q->want_key) take_piece(q, 0, pg + v.payload_off, v.piece_len);
        if (!seq_same(h, s)) continue;
        if ((v.flags & F_NEXT) && (q->match || !q->want_key)) {
            if (read_chain(r, q, v.next, v.piece_len, &spins) != 0 || !seq_same(h, s)) continue;
        }
        uint32_t ep = __atomic_load_n(&r->epoch, __ATOMIC_RELAXED);
        if (!q->no_touch && __atomic_load_n(&h->access, __ATOMIC_RELAXED) != ep)
            __atomic_store_n(&h->access, ep, __ATOMIC_RELAXED);
        return LATTICE_OK;
    }
}
