/* lattice_store_usage_get: a store's rows and row bytes in a region it
 * shares, counted where rows are written and freed, against references
 * computed apart from the counters: a scan of the store's entries, a twin
 * store given the same writes on a region of its own, and the region's
 * totals (which lattice_region_check verifies page by page, per owner too). */
#include "run_suite.h"
#include "helpers.h"

/* The documented head row (storage/page.c): flags, owner, varints of
 * partition, key length, value length and version (padded to at least 3
 * bytes), the expire time when set, then key and value - for an entry that
 * fits one page. */
static uint64_t varint_len(uint64_t v)
{
    uint64_t n = 1;
    while (v >= 0x80) v >>= 7, n++;
    return n;
}

/* The version's varint is padded to at least 3 bytes. */
static uint64_t row_len(uint32_t partition, size_t klen, size_t vlen, uint64_t version, uint64_t expire)
{
    uint64_t vn = varint_len(version) < 3 ? 3 : varint_len(version);
    return 2 + varint_len(partition) + varint_len(klen) + varint_len(vlen) + vn + (expire ? 8 : 0) + klen + vlen;
}

struct scan {
    uint64_t rows, bytes;
};

static int add_row(void *arg, const lattice_store_item *it)
{
    struct scan *sc = arg;
    sc->rows++;
    sc->bytes += row_len(it->partition, it->key_len, it->value_len, it->version, it->expire_ms);
    return 0;
}

/* Every entry of every partition, through cursors (the reference sum). */
static struct scan scan_store(lattice_store *s)
{
    struct scan sc = {0, 0};
    for (uint32_t p = 0; p < lattice_store_partitions(s); p++) {
        lattice_store_cursor *c;
        ck_assert_int_eq(lattice_store_cursor_open(s, p, &c), LATTICE_OK);
        int done = 0;
        while (!done) ck_assert_int_eq(lattice_store_cursor_next(c, 256, 0, add_row, &sc, &done), LATTICE_OK);
        lattice_store_cursor_close(c);
    }
    return sc;
}

static lattice_store_usage usage(lattice_store *s)
{
    lattice_store_usage u;
    lattice_store_usage_get(s, &u);
    return u;
}

static uint64_t rnd(uint64_t *x) { return *x = mix64(*x + 0x9e3779b97f4a7c15ull); }

/* One random write to s: new keys, overwrites longer and shorter (in place,
 * into the page's gap, moved), removes, expiring puts, batches, a cleared
 * partition now and then.  Values stay below a page: unfragmented rows. */
static void random_write(lattice_store *s, uint64_t *x, uint64_t keys, uint64_t now, uint64_t *version)
{
    static uint8_t v[1500];
    char k[32];
    uint64_t id = rnd(x) % keys, what = rnd(x) % 100;
    uint32_t parts = lattice_store_partitions(s);
    int kl = key_of(k, sizeof k, id);
    if (what < 55) {
        size_t len = rnd(x) % 3 ? rnd(x) % 120 : rnd(x) % sizeof v;
        fill_value(v, len, id, ++*version);
        lattice_store_entry e = {.partition = (uint32_t)(id % parts), .key = k, .key_len = (size_t)kl, .value = v,
                                 .value_len = len, .version = *version,
                                 .expire_ms = rnd(x) % 8 == 0 ? now + 1 + rnd(x) % 100 : 0};
        int st = lattice_store_put(s, &e, 0);
        ck_assert(st == LATTICE_OK || st == LATTICE_ERR_REGION_FULL);
    } else if (what < 85) {
        int st = lattice_store_remove(s, (uint32_t)(id % parts), k, (size_t)kl);
        ck_assert(st == LATTICE_OK || st == LATTICE_ERR_NOT_FOUND);
    } else if (what < 99) {
        enum { B = 16 };
        char bk[B][32];
        lattice_store_entry be[B];
        uint32_t part = (uint32_t)(rnd(x) % parts);
        size_t n = 0;
        for (uint64_t j = rnd(x) % keys; n < B; j++) {
            if (j % parts != part) continue;
            int bl = key_of(bk[n], sizeof bk[n], j);
            be[n] = (lattice_store_entry){.partition = part, .key = bk[n], .key_len = (size_t)bl, .value = v,
                                          .value_len = rnd(x) % 200, .version = ++*version};
            n++;
        }
        size_t applied = 0;
        int st = lattice_store_insert_batch(s, part, be, n, 0, &applied);
        ck_assert(st == LATTICE_OK || st == LATTICE_ERR_REGION_FULL);
    } else if (rnd(x) % 8 == 0) {
        ck_assert_int_eq(lattice_store_clear(s, (uint32_t)(rnd(x) % parts)), LATTICE_OK);
    }
}

/* Two stores share an evicting region; after every round (expired entries
 * reclaimed) each store's counters equal the sum a scan of its entries
 * gives, and with the region's raw rows they add up to the region's totals. */
START_TEST(usage_equals_the_rows_a_scan_finds)
{
    struct fake_clock clk = {1000000};
    lattice_region *r = new_region(4096, 1, LATTICE_REGION_EVICT);
    lattice_store *a = new_store(r, 8, &clk), *b = new_store(r, 4, &clk);
    ck_assert_uint_eq(usage(a).row_bytes, 0);
    /* Raw region rows (owner 0) are no store's. */
    uint8_t raw[300] = {0};
    lattice_store_entry re = {.key = "raw", .key_len = 3, .value = raw, .value_len = sizeof raw, .version = 1};
    uint64_t raw_link;
    ck_assert_int_eq(lattice_region_insert(r, &re, &raw_link), LATTICE_OK);
    uint64_t xa = 1, xb = 2, version = 0;
    for (int round = 0; round < 40; round++) {
        for (int i = 0; i < 500; i++) {
            random_write(a, &xa, 20000, clk.now, &version);
            if (i % 3 == 0) random_write(b, &xb, 3000, clk.now, &version);
        }
        clk.now += 50; /* some expire times pass: reclaim them, so the scan sees every row */
        lattice_store_expire(a, 0);
        lattice_store_expire(b, 0);
        struct scan sa = scan_store(a), sb = scan_store(b);
        lattice_store_usage ua = usage(a), ub = usage(b);
        ck_assert_uint_eq(ua.rows, sa.rows);
        ck_assert_uint_eq(ua.row_bytes, sa.bytes);
        ck_assert_uint_eq(ub.rows, sb.rows);
        ck_assert_uint_eq(ub.row_bytes, sb.bytes);
        lattice_region_metrics m;
        lattice_region_metrics_get(r, &m);
        uint64_t raw_bytes = row_len(0, 3, sizeof raw, 1, 0);
        ck_assert_uint_eq(ua.row_bytes + ub.row_bytes + raw_bytes, m.row_bytes);
        ck_assert_uint_eq(ua.rows + ub.rows + 1, m.rows);
        ck_assert_uint_le(ua.pages + ub.pages, m.pages_data + 1);
        ck_assert_uint_ge(ua.pages * 4096, ua.row_bytes);
        ck_assert_int_eq(lattice_region_check(r), LATTICE_OK);
    }
    lattice_store_metrics sm;
    lattice_store_metrics_get(a, &sm);
    ck_assert_uint_gt(sm.evictions, 0); /* the region filled: eviction freed rows too */
    /* Destroying one store frees exactly its rows. */
    lattice_store_usage ua = usage(a);
    lattice_store_destroy(b);
    lattice_region_metrics m;
    lattice_region_metrics_get(r, &m);
    ck_assert_uint_eq(m.row_bytes, ua.row_bytes + row_len(0, 3, sizeof raw, 1, 0));
    for (uint32_t p = 0; p < 8; p++) ck_assert_int_eq(lattice_store_clear(a, p), LATTICE_OK);
    ck_assert_uint_eq(usage(a).rows, 0);
    ck_assert_uint_eq(usage(a).row_bytes, 0);
    ck_assert_uint_eq(usage(a).pages, 0);
    ck_assert_int_eq(lattice_region_check(r), LATTICE_OK);
    lattice_store_destroy(a);
    ck_assert_int_eq(lattice_region_remove(r, raw_link), LATTICE_OK);
    lattice_region_destroy(r);
}
END_TEST

/* Entries larger than a page (fragments on several pages, charged to their
 * store) and updates across that size: a store sharing its region counts
 * exactly what its twin, alone on a region of its own, counts - which is
 * that whole region's rows. */
START_TEST(fragmented_rows_count_for_their_store)
{
    lattice_region *r = new_region(1024, 4, LATTICE_REGION_REJECT), *rt = new_region(1024, 4, LATTICE_REGION_REJECT);
    lattice_store *a = new_store(r, 4, NULL), *other = new_store(r, 4, NULL), *twin = new_store(rt, 4, NULL);
    static uint8_t v[5000];
    char k[32];
    uint64_t x = 7;
    for (int i = 0; i < 3000; i++) {
        uint64_t id = rnd(&x) % 200;
        int kl = key_of(k, sizeof k, id);
        size_t len = rnd(&x) % 4 == 0 ? 1000 + rnd(&x) % 4000 : rnd(&x) % 300;
        fill_value(v, len, id, (uint64_t)i + 1);
        lattice_store_entry e = {.partition = (uint32_t)(id % 4), .key = k, .key_len = (size_t)kl, .value = v,
                                 .value_len = len, .version = (uint64_t)i + 1};
        if (rnd(&x) % 5 == 0) {
            int s1 = lattice_store_remove(a, e.partition, k, (size_t)kl);
            ck_assert_int_eq(lattice_store_remove(twin, e.partition, k, (size_t)kl), s1);
        } else {
            ck_assert_int_eq(lattice_store_put(a, &e, 0), LATTICE_OK);
            ck_assert_int_eq(lattice_store_put(twin, &e, 0), LATTICE_OK);
        }
        e.value_len = rnd(&x) % 2000; /* the other store's rows interleave on the same pages */
        ck_assert_int_eq(lattice_store_put(other, &e, 0), LATTICE_OK);
        if (i % 250 == 0) {
            lattice_store_usage ua = usage(a), ut = usage(twin);
            lattice_region_metrics mt;
            lattice_region_metrics_get(rt, &mt);
            ck_assert_uint_eq(ua.rows, ut.rows);
            ck_assert_uint_eq(ua.row_bytes, ut.row_bytes);
            ck_assert_uint_eq(ut.rows, mt.rows);
            ck_assert_uint_eq(ut.row_bytes, mt.row_bytes);
            ck_assert_uint_le(ut.pages, mt.pages_data); /* packed never takes more pages than stored */
            ck_assert_int_eq(lattice_region_check(r), LATTICE_OK);
        }
    }
    lattice_store_metrics sm;
    lattice_store_metrics_get(a, &sm);
    ck_assert_uint_gt(usage(a).rows, sm.entries); /* some entries are in several pieces */
    lattice_store_destroy(other);
    lattice_region_metrics m;
    lattice_region_metrics_get(r, &m);
    ck_assert_uint_eq(usage(a).row_bytes, m.row_bytes);
    lattice_store_destroy(a);
    lattice_store_destroy(twin);
    lattice_region_destroy(r);
    lattice_region_destroy(rt);
}
END_TEST

static void setup(void) { rcu_register_thread(); }
static void teardown(void) { rcu_unregister_thread(); }

int main(void)
{
    Suite *s = suite_create("storage_usage");
    TCase *tc = tcase_create("usage");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, usage_equals_the_rows_a_scan_finds);
    tcase_add_test(tc, fragmented_rows_count_for_their_store);
    suite_add_tcase(s, tc);
    return lt_run_suite(s);
}
