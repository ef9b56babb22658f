/* Data region: slotted page layout, link stability, fragments, free-list
 * buckets and page reuse, batch packing, a full region, bad input. */
#include <stdio.h>
#include <unistd.h>

#include "run_suite.h"
#include "helpers.h"

static lattice_store_entry mk(char *kbuf, uint64_t id, uint8_t *vbuf, size_t vlen)
{
    int kl = key_of(kbuf, 32, id);
    fill_value(vbuf, vlen, id, 1);
    return (lattice_store_entry){.partition = (uint32_t)(id % 7), .key = kbuf,
                                 .key_len = (size_t)kl, .value = vbuf, .value_len = vlen,
                                 .version = 1, .expire_ms = id % 3 ? 0 : 1000 + id};
}

/* The row at link is entry id with a vlen-byte value. */
static void assert_row(lattice_region *r, uint64_t link, uint64_t id, size_t vlen)
{
    struct got g = {0};
    char k[32];
    int kl = key_of(k, sizeof k, id);
    ck_assert_int_eq(lattice_region_read(r, link, got_item, &g), LATTICE_OK);
    ck_assert_int_eq(g.calls, 1);
    ck_assert_uint_eq(g.klen, (size_t)kl);
    ck_assert(memcmp(g.key, k, (size_t)kl) == 0);
    ck_assert_uint_eq(g.vlen, vlen);
    ck_assert_msg(value_ok(g.value, vlen, id, 1), "value of %llu differs", (unsigned long long)id);
    ck_assert_uint_eq(g.partition, id % 7);
    ck_assert_uint_eq(g.expire, id % 3 ? 0 : 1000 + id);
    got_free(&g);
}

START_TEST(bad_config_is_refused)
{
    lattice_region *r = NULL;
    uint32_t bad_pages[] = {512, 1000, 3000, 32768, 2048 + 1};
    for (size_t i = 0; i < sizeof bad_pages / sizeof *bad_pages; i++) {
        lattice_region_config c = {.page_size = bad_pages[i], .max_mb = 4};
        ck_assert_int_eq(lattice_region_create(&c, &r), LATTICE_ERR_INVAL);
        ck_assert_ptr_null(r);
    }
    ck_assert_int_eq(lattice_region_create(NULL, &r), LATTICE_ERR_INVAL);
    ck_assert_ptr_null(r);
    lattice_region_config c0 = {.page_size = 4096, .max_mb = 0};
    ck_assert_int_eq(lattice_region_create(&c0, &r), LATTICE_ERR_INVAL);
    lattice_region_config c1 = {.page_size = 4096, .max_mb = 2, .prealloc_mb = 3};
    ck_assert_int_eq(lattice_region_create(&c1, &r), LATTICE_ERR_INVAL);
    lattice_region_config c2 = {.page_size = 4096, .max_mb = 2, .policy = 9};
    ck_assert_int_eq(lattice_region_create(&c2, &r), LATTICE_ERR_INVAL);
    lattice_region_config c3 = {.max_mb = 2, .prealloc_mb = 2};
    ck_assert_int_eq(lattice_region_create(&c3, &r), LATTICE_OK);
    ck_assert_uint_eq(lattice_region_page_size(r), 4096);
    lattice_region_metrics m;
    lattice_region_metrics_get(r, &m);
    ck_assert_uint_eq(m.pages_mapped, 512);
    ck_assert_uint_eq(m.pages_reuse, 512);
    lattice_region_destroy(r);
}
END_TEST

START_TEST(rows_round_trip_and_pages_stay_well_formed)
{
    uint32_t sizes[] = {1024, 4096, 16384};
    for (size_t si = 0; si < 3; si++) {
        lattice_region *r = new_region(sizes[si], 8, LATTICE_REGION_REJECT);
        uint64_t links[600];
        uint8_t v[700];
        char k[32];
        for (uint64_t i = 0; i < 600; i++) {
            lattice_store_entry e = mk(k, i, v, (i * 37) % 700);
            ck_assert_int_eq(lattice_region_insert(r, &e, &links[i]), LATTICE_OK);
        }
        ck_assert_int_eq(lattice_region_check(r), LATTICE_OK);
        for (uint64_t i = 0; i < 600; i++) assert_row(r, links[i], i, (i * 37) % 700);
        lattice_region_page_info pi;
        ck_assert_int_eq(lattice_region_page_inspect(r, LATTICE_LINK_PAGE(links[0]), &pi),
                         LATTICE_OK);
        ck_assert_int_eq(pi.kind, LATTICE_PAGE_DATA);
        ck_assert_uint_ge(pi.items, pi.live);
        ck_assert_uint_gt(pi.live, 0);
        ck_assert_uint_lt(pi.free, sizes[si]);
        lattice_region_metrics m;
        lattice_region_metrics_get(r, &m);
        ck_assert_uint_eq(m.rows, 600);
        ck_assert_uint_eq(m.pages_data + m.pages_reuse, m.pages_mapped);
        lattice_region_destroy(r);
    }
}
END_TEST

START_TEST(links_survive_removes_and_compaction)
{
    lattice_region *r = new_region(4096, 4, LATTICE_REGION_REJECT);
    uint64_t links[30];
    uint8_t v[400];
    char k[32];
    for (uint64_t i = 0; i < 30; i++) {
        lattice_store_entry e = mk(k, i, v, 100);
        ck_assert_int_eq(lattice_region_insert(r, &e, &links[i]), LATTICE_OK);
        ck_assert_uint_eq(LATTICE_LINK_PAGE(links[i]), LATTICE_LINK_PAGE(links[0]));
    }
    uint32_t page = LATTICE_LINK_PAGE(links[0]);
    for (uint64_t i = 1; i < 30; i += 2) ck_assert_int_eq(lattice_region_remove(r, links[i]), LATTICE_OK);
    /* The 15 holes are ~110 bytes each: a 300-byte row only fits after compaction. */
    lattice_region_page_info before;
    lattice_region_page_inspect(r, page, &before);
    uint64_t big[3];
    for (uint64_t i = 0; i < 3; i++) {
        lattice_store_entry e = mk(k, 100 + i, v, 300);
        ck_assert_int_eq(lattice_region_insert(r, &e, &big[i]), LATTICE_OK);
        ck_assert_uint_eq(LATTICE_LINK_PAGE(big[i]), page);
    }
    ck_assert_int_eq(lattice_region_check(r), LATTICE_OK);
    for (uint64_t i = 0; i < 30; i += 2) assert_row(r, links[i], i, 100);
    for (uint64_t i = 0; i < 3; i++) assert_row(r, big[i], 100 + i, 300);
    /* Removed links read as absent (or as a new row reusing the slot, never garbage). */
    struct got g = {0};
    int st = lattice_region_read(r, links[29], got_item, &g);
    ck_assert(st == LATTICE_ERR_NOT_FOUND || st == LATTICE_OK);
    got_free(&g);
    ck_assert_int_eq(lattice_region_remove(r, links[29]) == LATTICE_OK ? 1 : 0,
                     st == LATTICE_OK ? 1 : 0);
    lattice_region_destroy(r);
}
END_TEST

static void fragment_round_trip(uint32_t page, size_t vlen)
{
    lattice_region *r = new_region(page, 8, LATTICE_REGION_REJECT);
    uint8_t *v = malloc(vlen + 1);
    char k[32];
    lattice_store_entry e = mk(k, vlen, v, vlen);
    uint64_t link;
    ck_assert_int_eq(lattice_region_insert(r, &e, &link), LATTICE_OK);
    ck_assert_int_eq(lattice_region_check(r), LATTICE_OK);
    assert_row(r, link, vlen, vlen);
    ck_assert_int_eq(lattice_region_remove(r, link), LATTICE_OK);
    lattice_region_metrics m;
    lattice_region_metrics_get(r, &m);
    ck_assert_uint_eq(m.rows, 0);
    ck_assert_uint_eq(m.row_bytes, 0);
    ck_assert_uint_eq(m.pages_data, 0);
    ck_assert_int_eq(lattice_region_check(r), LATTICE_OK);
    free(v);
    lattice_region_destroy(r);
}

START_TEST(fragments_round_trip_at_every_boundary)
{
    uint32_t pages[] = {1024, 4096};
    for (int pi = 0; pi < 2; pi++) {
        lattice_region *r = new_region(pages[pi], 1, LATTICE_REGION_REJECT);
        size_t payload = lattice_region_page_payload(r);
        lattice_region_destroy(r);
        fragment_round_trip(pages[pi], 0);
        fragment_round_trip(pages[pi], 1);
        /* Around one page payload, around two and three: the split points. */
        for (size_t mult = 1; mult <= 3; mult++)
            for (size_t d = 0; d <= 48; d++) fragment_round_trip(pages[pi], mult * payload - 24 + d);
        fragment_round_trip(pages[pi], 1u << 20);
    }
}
END_TEST

START_TEST(one_mib_values_round_trip_with_neighbours)
{
    lattice_region *r = new_region(4096, 16, LATTICE_REGION_REJECT);
    uint8_t *v = malloc((1u << 20) + 1);
    char k[32];
    uint64_t links[6];
    size_t lens[6] = {1u << 20, 10, (1u << 20) - 1, 4000, (1u << 20) + 1, 0};
    for (int i = 0; i < 6; i++) {
        lattice_store_entry e = mk(k, (uint64_t)i, v, lens[i]);
        ck_assert_int_eq(lattice_region_insert(r, &e, &links[i]), LATTICE_OK);
    }
    ck_assert_int_eq(lattice_region_check(r), LATTICE_OK);
    for (int i = 0; i < 6; i++) assert_row(r, links[i], (uint64_t)i, lens[i]);
    ck_assert_int_eq(lattice_region_remove(r, links[0]), LATTICE_OK);
    for (int i = 1; i < 6; i++) assert_row(r, links[i], (uint64_t)i, lens[i]);
    ck_assert_int_eq(lattice_region_check(r), LATTICE_OK);
    free(v);
    lattice_region_destroy(r);
}
END_TEST

START_TEST(pages_move_between_buckets_and_are_reused)
{
    lattice_region *r = new_region(4096, 2, LATTICE_REGION_REJECT);
    lattice_region_metrics m;
    uint8_t v[200];
    char k[32];
    uint64_t links[64];
    lattice_store_entry e = mk(k, 1, v, 150);
    ck_assert_int_eq(lattice_region_insert(r, &e, &links[0]), LATTICE_OK);
    uint32_t page = LATTICE_LINK_PAGE(links[0]);
    lattice_region_page_info pi;
    lattice_region_page_inspect(r, page, &pi);
    int first_bucket = pi.bucket;
    ck_assert_int_eq(first_bucket, (int)(pi.free / (4096 / LATTICE_REGION_BUCKETS)) >= LATTICE_REGION_BUCKETS
                                       ? LATTICE_REGION_BUCKETS - 1
                                       : (int)(pi.free / (4096 / LATTICE_REGION_BUCKETS)));
    lattice_region_metrics_get(r, &m);
    ck_assert_uint_eq(m.pages_in_bucket[first_bucket], 1);
    int last_bucket = first_bucket, n = 1, moves = 0;
    uint64_t other;
    /* Fill the page with 150-byte rows: its bucket only goes down, until the
     * bucket no longer promises room for one and the next row opens a page. */
    for (;;) {
        e = mk(k, (uint64_t)n + 1, v, 150);
        ck_assert_int_eq(lattice_region_insert(r, &e, &other), LATTICE_OK);
        if (LATTICE_LINK_PAGE(other) != page) break;
        links[n++] = other;
        lattice_region_page_inspect(r, page, &pi);
        ck_assert_int_le(pi.bucket, last_bucket);
        moves += pi.bucket != last_bucket;
        last_bucket = pi.bucket;
        ck_assert_int_eq(lattice_region_check(r), LATTICE_OK);
    }
    ck_assert_int_gt(moves, 3);
    ck_assert_int_lt(pi.bucket * (4096 / LATTICE_REGION_BUCKETS), 150 + 2 + 20);
    /* Small rows still go to the fuller page (best fit) until it is in no bucket ... */
    uint64_t small[64];
    int ns = 0;
    while (pi.bucket >= 0) {
        ck_assert_int_lt(ns, 64);
        e = mk(k, 10000 + (uint64_t)ns, v, 4);
        ck_assert_int_eq(lattice_region_insert(r, &e, &small[ns]), LATTICE_OK);
        ck_assert_uint_eq(LATTICE_LINK_PAGE(small[ns]), page);
        ns++;
        lattice_region_page_inspect(r, page, &pi);
    }
    lattice_region_metrics_get(r, &m);
    ck_assert_uint_eq(m.pages_full, 1);
    /* ... and then it is never offered, though a 4-byte value would fit. */
    uint64_t l2;
    e = mk(k, 20000, v, 4);
    ck_assert_int_eq(lattice_region_insert(r, &e, &l2), LATTICE_OK);
    ck_assert_uint_ne(LATTICE_LINK_PAGE(l2), page);
    ck_assert_int_eq(lattice_region_remove(r, l2), LATTICE_OK);
    for (int i = 0; i < ns; i++) ck_assert_int_eq(lattice_region_remove(r, small[i]), LATTICE_OK);
    /* Emptying the page puts it on the reuse list ... */
    for (int i = 0; i < n; i++) {
        ck_assert_int_eq(lattice_region_remove(r, links[i]), LATTICE_OK);
        ck_assert_int_eq(lattice_region_check(r), LATTICE_OK);
    }
    lattice_region_page_inspect(r, page, &pi);
    ck_assert_int_eq(pi.kind, LATTICE_PAGE_REUSE);
    ck_assert_int_eq(pi.bucket, -1);
    lattice_region_metrics_get(r, &m);
    uint64_t mapped = m.pages_mapped;
    /* ... and a row that needs a fresh page gets a reused one, not new memory. */
    ck_assert_int_eq(lattice_region_remove(r, other), LATTICE_OK);
    lattice_region_metrics_get(r, &m);
    uint64_t reusable = m.pages_reuse;
    ck_assert_uint_gt(reusable, 0);
    for (uint64_t i = 0; i < reusable; i++) {
        uint8_t big[3000];
        e = mk(k, 5000 + i, big, 3000);
        uint64_t l;
        ck_assert_int_eq(lattice_region_insert(r, &e, &l), LATTICE_OK);
        if (i == 0) ck_assert_uint_eq(LATTICE_LINK_PAGE(l), LATTICE_LINK_PAGE(other)); /* last emptied, first reused */
    }
    lattice_region_metrics_get(r, &m);
    ck_assert_uint_eq(m.pages_mapped, mapped);
    ck_assert_uint_eq(m.pages_reuse, 0);
    ck_assert_int_eq(lattice_region_check(r), LATTICE_OK);
    lattice_region_destroy(r);
}
END_TEST

START_TEST(batch_insert_packs_the_same_rows)
{
    enum { N = 700 };
    lattice_region *a = new_region(4096, 16, LATTICE_REGION_REJECT);
    lattice_region *b = new_region(4096, 16, LATTICE_REGION_REJECT);
    lattice_store_entry *e = calloc(N, sizeof *e);
    char (*keys)[32] = calloc(N, 32);
    uint8_t **vals = calloc(N, sizeof *vals);
    uint64_t *la = calloc(N, 8), *lb = calloc(N, 8);
    for (uint64_t i = 0; i < N; i++) {
        size_t vlen = i % 50 == 0 ? 9000 + i : (mix64(i) % 600);
        vals[i] = malloc(vlen + 1);
        e[i] = mk(keys[i], i, vals[i], vlen);
        ck_assert_int_eq(lattice_region_insert(a, &e[i], &la[i]), LATTICE_OK);
    }
    size_t done = 0;
    ck_assert_int_eq(lattice_region_insert_batch(b, e, N, lb, &done), LATTICE_OK);
    ck_assert_uint_eq(done, N);
    ck_assert_int_eq(lattice_region_check(a), LATTICE_OK);
    ck_assert_int_eq(lattice_region_check(b), LATTICE_OK);
    for (uint64_t i = 0; i < N; i++) {
        assert_row(a, la[i], i, e[i].value_len);
        assert_row(b, lb[i], i, e[i].value_len);
    }
    lattice_region_metrics ma, mb;
    lattice_region_metrics_get(a, &ma);
    lattice_region_metrics_get(b, &mb);
    ck_assert_uint_eq(ma.rows, mb.rows);
    ck_assert_uint_eq(ma.row_bytes, mb.row_bytes);
    ck_assert_uint_le(mb.pages_data, ma.pages_data + 1);
    for (uint64_t i = 0; i < N; i++) free(vals[i]);
    free(vals), free(keys), free(e), free(la), free(lb);
    lattice_region_destroy(a);
    lattice_region_destroy(b);
}
END_TEST

START_TEST(full_region_rejects_and_keeps_every_row)
{
    lattice_region *r = new_region(4096, 1, LATTICE_REGION_REJECT);
    uint8_t v[100];
    uint8_t *huge = malloc(200000);
    char k[32];
    uint64_t links[20000];
    int n = 0, st;
    for (;; n++) {
        ck_assert_int_lt(n, 20000);
        lattice_store_entry e = mk(k, (uint64_t)n, v, 100);
        st = lattice_region_insert(r, &e, &links[n]);
        if (st != LATTICE_OK) break;
    }
    ck_assert_int_eq(st, LATTICE_ERR_REGION_FULL);
    ck_assert_int_gt(n, 5000);
    lattice_region_metrics before, after;
    lattice_region_metrics_get(r, &before);
    /* A fragmented row that cannot fit must leave no fragment behind. */
    for (int i = 0; i < 20; i++) {
        ck_assert_int_eq(lattice_region_remove(r, links[i * 100]), LATTICE_OK);
    }
    lattice_region_metrics_get(r, &before);
    lattice_store_entry e = mk(k, 777777, huge, 200000);
    uint64_t l;
    ck_assert_int_eq(lattice_region_insert(r, &e, &l), LATTICE_ERR_REGION_FULL);
    lattice_region_metrics_get(r, &after);
    ck_assert_uint_eq(after.rows, before.rows);
    ck_assert_uint_eq(after.row_bytes, before.row_bytes);
    ck_assert_int_eq(lattice_region_check(r), LATTICE_OK);
    for (int i = 0; i < n; i++)
        if (i % 100 || i >= 2000) assert_row(r, links[i], (uint64_t)i, 100);
    free(huge);
    lattice_region_destroy(r);
}
END_TEST

/* Fills the region with one 3,500-byte row per page until it is full;
 * returns how many rows went in. */
static int fill_pages(lattice_region *r, uint64_t *links, int max, uint64_t id0)
{
    static uint8_t v[3500];
    char k[32];
    int n = 0;
    for (; n < max; n++) {
        lattice_store_entry e = mk(k, id0 + (uint64_t)n, v, sizeof v);
        int st = lattice_region_insert(r, &e, &links[n]);
        if (st == LATTICE_ERR_REGION_FULL) break;
        ck_assert_int_eq(st, LATTICE_OK);
    }
    return n;
}

START_TEST(emptied_pages_go_back_to_the_os_and_come_back)
{
    enum { MB = 24, MAX = MB * 256 };
    lattice_region *r = new_region(4096, MB, LATTICE_REGION_REJECT);
    uint64_t *links = malloc(MAX * sizeof *links);
    int n = fill_pages(r, links, MAX, 0);
    ck_assert_int_gt(n, MAX * 9 / 10);
    lattice_region_metrics m;
    lattice_region_metrics_get(r, &m);
    uint64_t mapped = m.pages_mapped;
    /* Nothing empty yet: nothing to give back. */
    ck_assert_uint_eq(lattice_region_release(r, UINT32_MAX, LATTICE_REGION_SLACK_AUTO), 0);

    for (int i = 0; i < n; i++) ck_assert_int_eq(lattice_region_remove(r, links[i]), LATTICE_OK);
    uint64_t rss_full = lt_rss_bytes();
    /* At most max_pages a call; then the rest, down to the slack (a chunk). */
    ck_assert_uint_eq(lattice_region_release(r, 100, LATTICE_REGION_SLACK_AUTO), 100);
    uint32_t rest = lattice_region_release(r, UINT32_MAX, LATTICE_REGION_SLACK_AUTO);
    ck_assert_uint_eq(100 + rest, mapped - 256);
    ck_assert_uint_eq(lattice_region_release(r, UINT32_MAX, LATTICE_REGION_SLACK_AUTO), 0);
    uint64_t rss_after = lt_rss_bytes();
    ck_assert_msg(rss_full - rss_after >= (mapped - 256) * 4096 * 9 / 10,
                  "RSS %llu -> %llu bytes: the pages' memory was not given back",
                  (unsigned long long)rss_full, (unsigned long long)rss_after);
    lattice_region_metrics_get(r, &m);
    ck_assert_uint_eq(m.pages_released, mapped - 256);
    ck_assert_uint_eq(m.pages_reuse, 256);
    ck_assert_uint_eq(m.pages_mapped, mapped);
    ck_assert_int_eq(lattice_region_check(r), LATTICE_OK);
    int released_seen = 0;
    for (uint32_t p = 0; p < mapped; p++) {
        lattice_region_page_info pi;
        ck_assert_int_eq(lattice_region_page_inspect(r, p, &pi), LATTICE_OK);
        released_seen += pi.kind == LATTICE_PAGE_RELEASED;
    }
    ck_assert_int_eq(released_seen, (int)(mapped - 256));
    /* A reader holding a link into a released page finds no row there. */
    struct got g = {0};
    ck_assert_int_eq(lattice_region_read(r, links[n - 1], got_item, &g), LATTICE_ERR_NOT_FOUND);

    /* The bound is unchanged: as many rows fit again, on the same memory. */
    int n2 = fill_pages(r, links, MAX, 100000);
    ck_assert_int_eq(n2, n);
    lattice_region_metrics_get(r, &m);
    ck_assert_uint_eq(m.pages_mapped, mapped);
    ck_assert_uint_eq(m.pages_released, 0);
    ck_assert_int_eq(lattice_region_check(r), LATTICE_OK);
    for (int i = 0; i < n2; i++) assert_row(r, links[i], 100000 + (uint64_t)i, 3500);
    free(links);
    lattice_region_destroy(r);

    /* Preallocated memory stays: the user asked for it resident. */
    lattice_region_config pc = {.name = "pre", .page_size = 4096, .max_mb = 4, .prealloc_mb = 4};
    ck_assert_int_eq(lattice_region_create(&pc, &r), LATTICE_OK);
    ck_assert_uint_eq(lattice_region_release(r, UINT32_MAX, 0), 0);
    lattice_region_destroy(r);
    /* Pages smaller than the OS's share its pages: nothing can go back. */
    r = new_region(1024, 4, LATTICE_REGION_REJECT);
    uint64_t l;
    char k[32];
    uint8_t v[100];
    lattice_store_entry e = mk(k, 1, v, 100);
    ck_assert_int_eq(lattice_region_insert(r, &e, &l), LATTICE_OK);
    ck_assert_int_eq(lattice_region_remove(r, l), LATTICE_OK);
    ck_assert_uint_eq(lattice_region_release(r, UINT32_MAX, 0), 0);
    lattice_region_destroy(r);
}
END_TEST

static int count_calls(void *arg, const lattice_store_item *it)
{
    (void)it;
    ++*(int *)arg;
    return 0;
}

START_TEST(bad_input_gets_a_clear_status)
{
    lattice_region *r = new_region(4096, 2, LATTICE_REGION_REJECT);
    uint64_t l;
    uint8_t v[8] = {0};
    lattice_store_entry e = {.key = "k", .key_len = 1, .value = v, .value_len = 8};
    lattice_store_entry bad = e;
    bad.key = NULL;
    ck_assert_int_eq(lattice_region_insert(r, &bad, &l), LATTICE_ERR_INVAL);
    bad = e, bad.key_len = 0;
    ck_assert_int_eq(lattice_region_insert(r, &bad, &l), LATTICE_ERR_INVAL);
    bad = e, bad.key_len = LATTICE_STORE_MAX_KEY + 1;
    ck_assert_int_eq(lattice_region_insert(r, &bad, &l), LATTICE_ERR_INVAL);
    bad = e, bad.value = NULL;
    ck_assert_int_eq(lattice_region_insert(r, &bad, &l), LATTICE_ERR_INVAL);
    bad = e, bad.partition = LATTICE_STORE_MAX_PARTITIONS;
    ck_assert_int_eq(lattice_region_insert(r, &bad, &l), LATTICE_ERR_INVAL);
    bad = e, bad.value_len = (size_t)LATTICE_STORE_MAX_VALUE + 1;
    ck_assert_int_eq(lattice_region_insert(r, &bad, &l), LATTICE_ERR_TOO_LARGE);
    ck_assert_int_eq(lattice_region_insert(r, NULL, &l), LATTICE_ERR_INVAL);
    ck_assert_int_eq(lattice_region_insert(r, &e, NULL), LATTICE_ERR_INVAL);
    size_t done = 7;
    ck_assert_int_eq(lattice_region_insert_batch(r, NULL, 3, &l, &done), LATTICE_ERR_INVAL);
    ck_assert_int_eq(lattice_region_read(r, 0, NULL, NULL), LATTICE_ERR_INVAL);
    lattice_store_entry two[2] = {e, bad};
    ck_assert_int_eq(lattice_region_insert_batch(r, two, 2, &l, &done), LATTICE_ERR_TOO_LARGE);
    ck_assert_uint_eq(done, 0);
    lattice_region_metrics m;
    lattice_region_metrics_get(r, &m);
    ck_assert_uint_eq(m.rows, 0);
    /* Links that name nothing: beyond the region, beyond the table, removed. */
    int calls = 0;
    ck_assert_int_eq(lattice_region_read(r, LATTICE_LINK(999999, 0), count_calls, &calls),
                     LATTICE_ERR_NOT_FOUND);
    ck_assert_int_eq(lattice_region_remove(r, LATTICE_LINK(999999, 0)), LATTICE_ERR_NOT_FOUND);
    ck_assert_int_eq(lattice_region_insert(r, &e, &l), LATTICE_OK);
    ck_assert_int_eq(lattice_region_read(r, l + 5, count_calls, &calls), LATTICE_ERR_NOT_FOUND);
    ck_assert_int_eq(lattice_region_remove(r, l + 5), LATTICE_ERR_NOT_FOUND);
    ck_assert_int_eq(lattice_region_remove(r, l), LATTICE_OK);
    ck_assert_int_eq(lattice_region_remove(r, l), LATTICE_ERR_NOT_FOUND);
    ck_assert_int_eq(lattice_region_read(r, l, count_calls, &calls), LATTICE_ERR_NOT_FOUND);
    ck_assert_int_eq(calls, 0);
    lattice_region_page_info pi;
    ck_assert_int_eq(lattice_region_page_inspect(r, 1u << 30, &pi), LATTICE_ERR_NOT_FOUND);
    ck_assert_int_eq(lattice_region_check(r), LATTICE_OK);
    lattice_region_destroy(r);
}
END_TEST

START_TEST(failed_allocations_leave_the_region_intact)
{
    for (uint64_t nth = 1; nth <= 4; nth++) {
        lattice_region_config c = {.max_mb = 8, .prealloc_mb = 2};
        lattice_region *r = NULL;
        lattice_alloc_fail_nth(nth);
        int st = lattice_region_create(&c, &r);
        lattice_alloc_fail_nth(0);
        ck_assert(st == LATTICE_OK || st == LATTICE_ERR_NOMEM);
        ck_assert(st == LATTICE_OK ? r != NULL : r == NULL);
        lattice_region_destroy(r);
    }
    lattice_region *r = new_region(4096, 8, LATTICE_REGION_REJECT);
    uint8_t v[1000];
    char k[32];
    uint64_t links[9000];
    int n = 0, nomem = 0;
    /* Every chunk mapping fails once: the insert says NOMEM and changes nothing. */
    for (int i = 0; i < 9000; i++) {
        lattice_region_metrics before, after;
        lattice_region_metrics_get(r, &before);
        lattice_store_entry e = mk(k, (uint64_t)n, v, 1000);
        lattice_alloc_fail_nth(1);
        int st = lattice_region_insert(r, &e, &links[n]);
        lattice_alloc_fail_nth(0);
        if (st == LATTICE_ERR_REGION_FULL) break;
        if (st == LATTICE_ERR_NOMEM) {
            nomem++;
            lattice_region_metrics_get(r, &after);
            ck_assert_uint_eq(after.rows, before.rows);
            ck_assert_uint_eq(after.pages_mapped, before.pages_mapped);
            ck_assert_int_eq(lattice_region_insert(r, &e, &links[n]), LATTICE_OK);
        } else {
            ck_assert_int_eq(st, LATTICE_OK);
        }
        n++;
    }
    ck_assert_int_eq(nomem, 8); /* 8 MiB = 8 chunks, each refused once */
    ck_assert_int_eq(lattice_region_check(r), LATTICE_OK);
    for (int i = 0; i < n; i++) assert_row(r, links[i], (uint64_t)i, 1000);
    lattice_region_destroy(r);
}
END_TEST

static void setup(void) { rcu_register_thread(); }
static void teardown(void) { rcu_unregister_thread(); }

int main(void)
{
    Suite *s = suite_create("storage_region");
    TCase *tc = tcase_create("region");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, bad_config_is_refused);
    tcase_add_test(tc, rows_round_trip_and_pages_stay_well_formed);
    tcase_add_test(tc, links_survive_removes_and_compaction);
    tcase_add_test(tc, fragments_round_trip_at_every_boundary);
    tcase_add_test(tc, one_mib_values_round_trip_with_neighbours);
    tcase_add_test(tc, pages_move_between_buckets_and_are_reused);
    tcase_add_test(tc, batch_insert_packs_the_same_rows);
    tcase_add_test(tc, full_region_rejects_and_keeps_every_row);
    tcase_add_test(tc, emptied_pages_go_back_to_the_os_and_come_back);
    tcase_add_test(tc, bad_input_gets_a_clear_status);
    tcase_add_test(tc, failed_allocations_leave_the_region_intact);
    suite_add_tcase(s, tc);
    return lt_run_suite(s);
}
