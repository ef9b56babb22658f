/*
 * Region batch insert: the run of rows a batch appends to one page
 * (region_append_run, called by region_insert_batch_locked in region.c),
 * and the copies it uses.  Layout and locking: region_int.h.
 */
#include <string.h>

#include "region_int.h"

/* The batch path copies with AVX-512 masked moves on CPUs that have them
 * (x86-64 only); LATTICE_STORAGE_PLAIN_COPY builds without them (the tests
 * build the library both ways). */
#if defined(__x86_64__) && !defined(LATTICE_STORAGE_PLAIN_COPY)
#define WIDE_COPY 1
#include <immintrin.h>
#endif

/* Bytes of varint v, without a loop (head_hdr_len's varint_len loops once
 * per 7 bits). */
static inline uint32_t varint_bytes(uint64_t v)
{
    return (uint32_t)(64 - __builtin_clzll(v | 1) + 6) / 7;
}

/* memcpy of the few bytes a small row's key or value has, without a
 * library call: two overlapping moves cover 4..64 bytes, anything else goes
 * to memcpy.  Its size tests mispredict when sizes vary (see copy_masked). */
static inline __attribute__((always_inline)) void copy_small(uint8_t *d, const void *src,
                                                             size_t n)
{
    const uint8_t *s = src;
    if (n >= 16 && n <= 64) {
        if (n > 32) {
            uint8_t a[32], b[32];
            memcpy(a, s, 32), memcpy(b, s + n - 32, 32);
            memcpy(d, a, 32), memcpy(d + n - 32, b, 32);
        } else {
            uint8_t a[16], b[16];
            memcpy(a, s, 16), memcpy(b, s + n - 16, 16);
            memcpy(d, a, 16), memcpy(d + n - 16, b, 16);
        }
    } else if (n >= 4 && n < 16) {
        if (n >= 8) {
            uint64_t a, b;
            memcpy(&a, s, 8), memcpy(&b, s + n - 8, 8);
            memcpy(d, &a, 8), memcpy(d + n - 8, &b, 8);
        } else {
            uint32_t a, b;
            memcpy(&a, s, 4), memcpy(&b, s + n - 4, 4);
            memcpy(d, &a, 4), memcpy(d + n - 4, &b, 4);
        }
    } else {
        memcpy(d, s, n);
    }
}

#ifdef WIDE_COPY
/* The same with one masked load and store for up to 64 bytes (AVX-512BW):
 * no size test to mispredict - rows of random sizes spent ~5 ns a row on
 * copy_small's.  A masked load touches only the bytes its mask selects, so
 * it never reads past the source.  Used only when the CPU has AVX-512BW
 * (region.wide_copy). */
#define WIDE_TARGET __attribute__((target("avx512f,avx512bw")))
static inline __attribute__((always_inline)) WIDE_TARGET void copy_masked(uint8_t *d,
                                                                          const void *s,
                                                                          size_t n)
{
    if (n > 64) {
        memcpy(d, s, n);
        return;
    }
    __mmask64 m = n ? ~0ull >> (64 - n) : 0;
    _mm512_mask_storeu_epi8(d, m, _mm512_maskz_loadu_epi8(m, s));
}
#endif

typedef void copy_fn(uint8_t *d, const void *s, size_t n);

/* Appends rows e[i..n) to the gap of page pid (lane l, in a write section)
 * for as long as they fit there unfragmented, and returns the index of the
 * first row it did not write.  This is what a batch can do that single
 * inserts cannot: the page's counters stay in registers for the whole run
 * and are stored once, the item slots are filled in order, and each row is
 * encoded straight into its place - the header of a row whose varints are
 * all one byte as one store.  The page must have no free item slot (every
 * new row takes a new one). */
static inline __attribute__((always_inline)) size_t
append_rows(lattice_region *r, struct lane *l, uint32_t pid, const lattice_store_entry *e,
            size_t i, size_t n, uint8_t owner, uint64_t *links, copy_fn *copy)
{
    struct page_hdr *h = hdr_w(r, pid);
    uint8_t *pg = (uint8_t *)h;
    uint16_t *it = page_items(h);
    uint32_t upper = h->upper, nit = h->nitems, bytes = 0, max_row = r->max_row;
    uint32_t gap = upper - HDR - 2u * nit;
    size_t j;
    for (j = i; j < n; j++) {
        const lattice_store_entry *x = &e[j];
        uint64_t payload = (uint64_t)x->key_len + x->value_len;
        if (payload > max_row) break;
        int small = (x->partition | x->key_len | x->value_len | x->version) < 0x80 &&
                    !x->expire_ms;
        uint32_t hl = small ? 5 + ROW_VERSION_BYTES
                            : 2 + varint_bytes(x->partition) + varint_bytes(x->key_len) +
                                  varint_bytes(x->value_len) + version_len(x->version) + (x->expire_ms ? 8 : 0);
        uint32_t len = hl + (uint32_t)payload;
        /* The gap bounds nitems too: a page of at most 16 KiB has room for
         * far fewer than 65535 slots. */
        if (len + 2 > gap) break;
        gap -= len + 2;
        upper -= len;
        it[nit] = (uint16_t)upper;
        uint8_t *p = pg + upper;
        if (small) {
            p[0] = (uint8_t)(F_HEAD | F_TYPE(x->type)), p[1] = owner, p[2] = (uint8_t)x->partition;
            p[3] = (uint8_t)x->key_len, p[4] = (uint8_t)x->value_len;
            p = version_put(p + 5, x->version);
        } else {
            *p++ = (uint8_t)(F_HEAD | (x->expire_ms ? F_EXPIRE : 0) | F_TYPE(x->type));
            *p++ = owner;
            p = varint_put(p, x->partition);
            p = varint_put(p, x->key_len);
            p = varint_put(p, x->value_len);
            p = version_put(p, x->version);
            if (x->expire_ms) p = put_fixed(p, x->expire_ms, 8);
        }
        copy(p, x->key, x->key_len);
        if (x->value_len) copy(p + x->key_len, x->value, x->value_len); /* value may be NULL */
        links[j] = LATTICE_LINK(pid, nit) | (uint64_t)upper << 48;
        nit++;
        bytes += len;
    }
    uint32_t rows = (uint32_t)(j - i);
    h->upper = (uint16_t)upper;
    h->nitems = (uint16_t)nit;
    h->live = (uint16_t)(h->live + rows);
    h->free = (uint16_t)(h->free - bytes - 2 * rows);
    l->rows += rows;
    l->row_bytes += bytes;
    l->owner_rows[owner] += rows;
    l->owner_bytes[owner] += bytes;
    return j;
}

static size_t append_run_plain(lattice_region *r, struct lane *l, uint32_t pid,
                               const lattice_store_entry *e, size_t i, size_t n, uint8_t owner,
                               uint64_t *links)
{
    return append_rows(r, l, pid, e, i, n, owner, links, copy_small);
}

#ifdef WIDE_COPY
static WIDE_TARGET size_t append_run_wide(lattice_region *r, struct lane *l, uint32_t pid,
                                          const lattice_store_entry *e, size_t i, size_t n,
                                          uint8_t owner, uint64_t *links)
{
    return append_rows(r, l, pid, e, i, n, owner, links, copy_masked);
}
#endif

size_t region_append_run(lattice_region *r, struct lane *l, uint32_t pid,
                         const lattice_store_entry *e, size_t i, size_t n, uint8_t owner,
                         uint64_t *links)
{
#ifdef WIDE_COPY
    if (r->wide_copy) return append_run_wide(r, l, pid, e, i, n, owner, links);
#endif
    return append_run_plain(r, l, pid, e, i, n, owner, links);
}

int region_wide_copy_supported(void)
{
#ifdef WIDE_COPY
    return __builtin_cpu_supports("avx512bw");
#else
    return 0;
#endif
}
