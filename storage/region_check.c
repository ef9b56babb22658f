/*
 * lattice_region_check: the page-layout and free-list invariants, walked
 * page by page, and the row counters (per lane and per owner) against the
 * rows found.  Tests call it after every kind of change; it is also a
 * diagnostic for a live region (it holds every lane's lock while it runs).
 */
#include <string.h>

#include "lattice/alloc.h"
#include "lattice/log.h"
#include "region_int.h"

#define FAIL(...)                                                                          \
    do {                                                                                   \
        LT_LOG(LT_ERROR, "storage", __VA_ARGS__);                                          \
        return LATTICE_ERR_PROTO;                                                          \
    } while (0)

static int expected_bucket(const lattice_region *r, uint32_t free)
{
    uint32_t b = free / r->step;
    if (b == 0) return BUCKET_NONE;
    return b >= LATTICE_REGION_BUCKETS ? LATTICE_REGION_BUCKETS - 1 : (int)b;
}

/* Rows and bytes per owner, found by the walk: a head row and the
 * continuation rows its chain links count for the head's owner. */
struct owned {
    uint64_t rows[MAX_OWNERS], bytes[MAX_OWNERS];
};

static int charge_chain(const lattice_region *r, const struct rowv *head, struct owned *o)
{
    o->rows[head->owner]++;
    o->bytes[head->owner] += head->len;
    uint64_t next = head->next;
    int more = head->flags & F_NEXT;
    for (uint32_t n = 0; more; n++) {
        uint32_t pid = LATTICE_LINK_PAGE(next);
        uint8_t *pg = pid < r->pages_mapped ? page_addr(r, pid) : NULL;
        struct rowv v;
        if (!pg || n > r->pages_mapped * (r->page_size / 4u) ||
            LATTICE_LINK_ITEM(next) >= ((struct page_hdr *)pg)->nitems ||
            row_parse(pg, r->page_size, page_items(pg)[LATTICE_LINK_ITEM(next)], &v) != 0 || !(v.flags & F_CONT))
            FAIL("page %u item %u: a fragment chain is broken", pid, LATTICE_LINK_ITEM(next));
        o->rows[head->owner]++;
        o->bytes[head->owner] += v.len;
        next = v.next;
        more = v.flags & F_NEXT;
    }
    return LATTICE_OK;
}

static int check_data_page(const lattice_region *r, uint32_t pid, uint64_t *rows,
                           uint64_t *bytes, struct owned *o)
{
    static __thread uint8_t occ[LATTICE_REGION_MAX_PAGE];
    uint8_t *pg = page_addr(r, pid);
    struct page_hdr *h = (struct page_hdr *)pg;
    uint16_t *it = page_items(pg);
    uint32_t P = r->page_size, sum = 0, live = 0, heads = 0;
    if (HDR + 2u * h->nitems > h->upper || h->upper > P)
        FAIL("page %u: item table (%u slots) runs into rows at %u", pid, h->nitems, h->upper);
    memset(occ, 0, P);
    for (uint32_t i = 0; i < h->nitems; i++) {
        if (!it[i]) continue;
        struct rowv v;
        if (it[i] < h->upper || row_parse(pg, P, it[i], &v) != 0)
            FAIL("page %u item %u: bad row at offset %u", pid, i, it[i]);
        for (uint32_t b = it[i]; b < it[i] + v.len; b++) {
            if (occ[b]) FAIL("page %u item %u: row overlaps another at byte %u", pid, i, b);
            occ[b] = 1;
        }
        live++;
        sum += v.len;
        if ((v.flags & F_HEAD) && charge_chain(r, &v, o) != LATTICE_OK) return LATTICE_ERR_PROTO;
        heads += (v.flags & F_HEAD) != 0;
    }
    if (heads && !h->heads) FAIL("page %u: %u head rows, but no heads hint (eviction would skip it)", pid, heads);
    if (h->nitems && !it[h->nitems - 1]) FAIL("page %u: free slot at the end of the table", pid);
    if (live != h->live || live == 0) FAIL("page %u: %u rows, header says %u", pid, live, h->live);
    if (h->free != P - HDR - 2u * h->nitems - sum)
        FAIL("page %u: free %u, rows say %u", pid, h->free, P - HDR - 2u * h->nitems - sum);
    if (h->bucket != expected_bucket(r, h->free))
        FAIL("page %u: in bucket %d, free %u wants %d", pid, h->bucket, h->free,
             expected_bucket(r, h->free));
    *rows += live;
    *bytes += sum;
    return LATTICE_OK;
}

static int check_list(const lattice_region *r, const struct lane *l, uint32_t head,
                      uint8_t bucket, uint64_t want)
{
    uint64_t n = 0;
    uint32_t prev = NO_PAGE;
    for (uint32_t pid = head; pid != NO_PAGE; pid = page_hdr(r, pid)->next) {
        struct page_hdr *h = page_hdr(r, pid);
        if (!h || h->bucket != bucket || h->prev != prev || ++n > r->pages_mapped)
            FAIL("list %d: page %u misplaced or list broken", bucket, pid);
        if (h->lane != l->idx)
            FAIL("lane %u list %d: page %u belongs to lane %u", l->idx, bucket, pid, h->lane);
        prev = pid;
    }
    if (n != want) FAIL("list %d: %llu pages, counted %llu", bucket, (unsigned long long)n,
                        (unsigned long long)want);
    return LATTICE_OK;
}

static int check_lane(const lattice_region *r, const struct lane *l)
{
    for (int b = 0; b < LATTICE_REGION_BUCKETS; b++) {
        if (check_list(r, l, l->bucket_head[b], (uint8_t)b, l->bucket_count[b]) != LATTICE_OK)
            return LATTICE_ERR_PROTO;
        if (!!(l->bucket_mask & (1u << b)) != (l->bucket_count[b] > 0))
            FAIL("lane %u bucket %d: mask bit disagrees with count", l->idx, b);
    }
    return check_list(r, l, l->reuse_head, BUCKET_REUSE, l->pages_reuse);
}

struct counts {
    uint64_t rows, bytes, data, reuse, full;
};

static int check_counts(const lattice_region *r, const struct counts *c, uint32_t lane)
{
    const struct lane *l = &r->lanes[lane];
    if (c->data != l->pages_data || c->reuse != l->pages_reuse || c->full != l->pages_full)
        FAIL("lane %u page counts: data %llu/%llu reuse %llu/%llu full %llu/%llu", lane,
             (unsigned long long)c->data, (unsigned long long)l->pages_data,
             (unsigned long long)c->reuse, (unsigned long long)l->pages_reuse,
             (unsigned long long)c->full, (unsigned long long)l->pages_full);
    if (c->rows != l->rows || c->bytes != l->row_bytes)
        FAIL("lane %u row counts: %llu rows %llu bytes, counters say %llu / %llu", lane,
             (unsigned long long)c->rows, (unsigned long long)c->bytes,
             (unsigned long long)l->rows, (unsigned long long)l->row_bytes);
    return check_lane(r, l);
}

/* The lanes' per-owner counters, summed, against the walk's. */
static int check_owners(const lattice_region *r, const struct owned *o)
{
    for (int w = 0; w < MAX_OWNERS; w++) {
        uint64_t rows = 0, bytes = 0;
        for (int i = 0; i < REGION_LANES; i++) {
            rows += r->lanes[i].owner_rows[w];
            bytes += r->lanes[i].owner_bytes[w];
        }
        if (rows != o->rows[w] || bytes != o->bytes[w])
            FAIL("owner %d: %llu rows %llu bytes, counters say %llu / %llu", w, (unsigned long long)o->rows[w],
                 (unsigned long long)o->bytes[w], (unsigned long long)rows, (unsigned long long)bytes);
    }
    return LATTICE_OK;
}

static int check_locked(const lattice_region *r, struct owned *o)
{
    struct counts c[REGION_LANES];
    memset(c, 0, sizeof c);
    uint64_t released = 0;
    for (uint32_t pid = 0; pid < r->pages_mapped; pid++) {
        struct page_hdr *h = page_hdr(r, pid);
        if (h->kind == KIND_UNMAPPED) { /* memory given back: reads as zeros */
            released++;
            continue;
        }
        if (h->seq & 1) FAIL("page %u: left in a write section", pid);
        if (h->lane >= REGION_LANES) FAIL("page %u: lane %u", pid, h->lane);
        struct counts *k = &c[h->lane];
        if (h->kind == KIND_REUSE) {
            if (h->live || h->nitems || h->free != r->page_size - HDR || h->bucket != BUCKET_REUSE)
                FAIL("page %u: on the reuse list but not empty", pid);
            k->reuse++;
            continue;
        }
        if (h->kind != KIND_DATA) FAIL("page %u: unknown kind %u", pid, h->kind);
        if (check_data_page(r, pid, &k->rows, &k->bytes, o) != LATTICE_OK) return LATTICE_ERR_PROTO;
        k->data++;
        k->full += h->bucket == BUCKET_NONE;
    }
    for (uint32_t i = 0; i < REGION_LANES; i++)
        if (check_counts(r, &c[i], i) != LATTICE_OK) return LATTICE_ERR_PROTO;
    if (released != r->nreleased)
        FAIL("%llu pages released, %u on the released stack", (unsigned long long)released, r->nreleased);
    for (uint32_t i = 0; i < r->nreleased; i++)
        if (page_hdr(r, r->released[i].pid)->kind != KIND_UNMAPPED)
            FAIL("page %u: on the released stack but in use", r->released[i].pid);
    return check_owners(r, o);
}

int lattice_region_check(lattice_region *r)
{
    struct owned *o = lt_calloc(1, sizeof *o);
    if (!o) return LATTICE_ERR_NOMEM;
    region_lock_all(r);
    pthread_mutex_lock(&r->map_lock); /* the released stack */
    int st = check_locked(r, o);
    pthread_mutex_unlock(&r->map_lock);
    region_unlock_all(r);
    lt_free(o);
    return st;
}
