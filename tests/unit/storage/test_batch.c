/* Region batch insert: rows of every small shape (one- and multi-byte
 * varints, expire times, 0-byte values, keys and values around the 4, 8, 16,
 * 32 and 64-byte copy sizes) written by batches read back exactly and match
 * what single inserts write; batches and removes churned against a
 * reference; a failed chunk map at every N keeps exactly the rows written.
 * The suite also runs against the library built without the AVX-512 copy
 * (test_storage_batch_plain), so both copy paths are covered on any CPU. */
#include "run_suite.h"
#include "helpers.h"

struct ent {
    lattice_store_entry e;
    uint8_t key[80];
    uint8_t *val;
    uint64_t id;
};

static const uint32_t parts[] = {0, 1, 127, 128, 16383};
static const uint64_t versions[] = {0, 1, 127, 128, 16384, 1ull << 40, UINT64_MAX};

/* Entry id: its shape follows from the id, its bytes from (id, version). */
static void make(struct ent *x, uint64_t id, size_t max_value)
{
    uint64_t m = mix64(id + 17);
    size_t klen = 1 + m % 70, vlen = (m >> 8) % (max_value + 1);
    x->id = id;
    fill_value(x->key, klen, id, 7);
    x->val = malloc(vlen + 1);
    fill_value(x->val, vlen, id, 1);
    x->e = (lattice_store_entry){
        .partition = id % 3 ? parts[(m >> 20) % 5] : (uint32_t)((m >> 24) % 16384),
        .key = x->key, .key_len = klen, .value = x->val, .value_len = vlen,
        .version = versions[(m >> 32) % 7], .expire_ms = id % 4 ? 0 : 1 + (m >> 40)};
}

static void assert_ent(lattice_region *r, uint64_t link, const struct ent *x)
{
    struct got g = {0};
    ck_assert_int_eq(lattice_region_read(r, link, got_item, &g), LATTICE_OK);
    ck_assert_int_eq(g.calls, 1);
    ck_assert_uint_eq(g.klen, x->e.key_len);
    ck_assert_msg(memcmp(g.key, x->key, g.klen) == 0, "key of %llu differs", (unsigned long long)x->id);
    ck_assert_uint_eq(g.vlen, x->e.value_len);
    ck_assert_msg(memcmp(g.value, x->val, g.vlen) == 0, "value of %llu differs",
                  (unsigned long long)x->id);
    ck_assert_uint_eq(g.partition, x->e.partition);
    ck_assert_uint_eq(g.version, x->e.version);
    ck_assert_uint_eq(g.expire, x->e.expire_ms);
    got_free(&g);
}

/* Batches of n entries from x[0..total), n cycling through awkward sizes. */
static void insert_batches(lattice_region *r, struct ent *x, size_t total, uint64_t *links)
{
    static const size_t sizes[] = {1, 2, 7, 64, 100, 3, 200, 31};
    lattice_store_entry *e = calloc(total, sizeof *e);
    for (size_t i = 0; i < total; i++) e[i] = x[i].e;
    for (size_t i = 0, k = 0; i < total; k++) {
        size_t n = sizes[k % 8], done = 0;
        if (n > total - i) n = total - i;
        ck_assert_int_eq(lattice_region_insert_batch(r, e + i, n, links + i, &done), LATTICE_OK);
        ck_assert_uint_eq(done, n);
        i += n;
    }
    free(e);
}

START_TEST(batch_rows_of_every_shape_read_back_as_single_inserts_write_them)
{
    enum { N = 4000 };
    lattice_region *a = new_region(4096, 32, LATTICE_REGION_REJECT);
    lattice_region *b = new_region(4096, 32, LATTICE_REGION_REJECT);
    struct ent *x = calloc(N, sizeof *x);
    uint64_t *la = calloc(N, 8), *lb = calloc(N, 8);
    /* Mostly rows under 130 bytes (the fast path), every 50th over a page. */
    for (uint64_t i = 0; i < N; i++) make(&x[i], i, i % 50 == 49 ? 9000 : 130);
    for (size_t i = 0; i < N; i++) ck_assert_int_eq(lattice_region_insert(a, &x[i].e, &la[i]), LATTICE_OK);
    insert_batches(b, x, N, lb);
    ck_assert_int_eq(lattice_region_check(a), LATTICE_OK);
    ck_assert_int_eq(lattice_region_check(b), LATTICE_OK);
    lattice_region_metrics ma, mb;
    lattice_region_metrics_get(a, &ma);
    lattice_region_metrics_get(b, &mb);
    ck_assert_uint_eq(ma.rows, mb.rows);
    ck_assert_uint_eq(ma.row_bytes, mb.row_bytes);
    for (size_t i = 0; i < N; i++) {
        assert_ent(a, la[i], &x[i]);
        assert_ent(b, lb[i], &x[i]);
    }
    /* Free slots and holes in partly filled pages: the next batches reuse
     * slots and compact pages instead of only appending. */
    for (size_t i = 0; i < N; i += 3) ck_assert_int_eq(lattice_region_remove(b, lb[i]), LATTICE_OK);
    struct ent *y = calloc(N, sizeof *y);
    uint64_t *ly = calloc(N, 8);
    for (uint64_t i = 0; i < N; i++) make(&y[i], N + i, 130);
    insert_batches(b, y, N, ly);
    ck_assert_int_eq(lattice_region_check(b), LATTICE_OK);
    for (size_t i = 0; i < N; i++) {
        if (i % 3) assert_ent(b, lb[i], &x[i]);
        assert_ent(b, ly[i], &y[i]);
    }
    for (size_t i = 0; i < N; i++) free(x[i].val), free(y[i].val);
    free(x), free(y), free(la), free(lb), free(ly);
    lattice_region_destroy(a);
    lattice_region_destroy(b);
}
END_TEST

START_TEST(batches_and_removes_churn_against_a_reference)
{
    enum { CAP = 40000, ROUNDS = 300 };
    lattice_region *r = new_region(1024, 64, LATTICE_REGION_REJECT);
    struct ent *x = calloc(CAP, sizeof *x);
    uint64_t *links = calloc(CAP, 8);
    uint8_t *live = calloc(CAP, 1);
    lattice_store_entry *e = calloc(256, sizeof *e);
    size_t next = 0, nlive = 0;
    uint64_t seed = 99;
    for (int round = 0; round < ROUNDS && next + 256 <= CAP; round++) {
        size_t n = 1 + (seed = mix64(seed)) % 200, done = 0;
        for (size_t i = 0; i < n; i++) {
            /* On 1 KiB pages, values up to 3000 bytes make some rows fragmented. */
            make(&x[next + i], next + i, (seed >> 16) % 5 ? 64 : 3000);
            e[i] = x[next + i].e;
        }
        ck_assert_int_eq(lattice_region_insert_batch(r, e, n, links + next, &done), LATTICE_OK);
        ck_assert_uint_eq(done, n);
        memset(live + next, 1, n);
        next += n, nlive += n;
        /* Remove about 40% of what lives, at random. */
        for (size_t k = 0, m = nlive * 2 / 5; k < m; k++) {
            size_t i = (seed = mix64(seed)) % next;
            if (!live[i]) continue;
            ck_assert_int_eq(lattice_region_remove(r, links[i]), LATTICE_OK);
            live[i] = 0, nlive--;
        }
        if (round % 25 == 0 || round == ROUNDS - 1) {
            ck_assert_int_eq(lattice_region_check(r), LATTICE_OK);
            for (size_t i = 0; i < next; i++)
                if (live[i]) assert_ent(r, links[i], &x[i]);
        }
    }
    for (size_t i = 0; i < next; i++) free(x[i].val);
    free(x), free(links), free(live), free(e);
    lattice_region_destroy(r);
}
END_TEST

START_TEST(a_failed_chunk_map_at_every_n_keeps_exactly_the_rows_written)
{
    enum { N = 3000 };
    struct ent *x = calloc(N, sizeof *x);
    lattice_store_entry *e = calloc(N, sizeof *e);
    uint64_t *links = calloc(N, 8);
    /* 907-992-byte rows, four to a 4 KiB page: 3000 of them fill three 1 MiB chunks. */
    for (uint64_t i = 0; i < N; i++) {
        make(&x[i], i, 64);
        free(x[i].val);
        x[i].val = malloc(900);
        fill_value(x[i].val, 900, i, 1);
        x[i].e.value = x[i].val, x[i].e.value_len = 900;
        e[i] = x[i].e;
    }
    for (uint64_t nth = 1; nth <= 5; nth++) {
        lattice_region *r = new_region(4096, 8, LATTICE_REGION_REJECT);
        size_t done = 0, more = 0;
        /* The batch maps three chunks: allocation nth (1..3) is one of them. */
        lattice_alloc_fail_nth(nth);
        int st = lattice_region_insert_batch(r, e, N, links, &done);
        lattice_alloc_fail_nth(0);
        ck_assert_int_eq(st, nth <= 3 ? LATTICE_ERR_NOMEM : LATTICE_OK);
        ck_assert(nth <= 3 ? done < N : done == N);
        if (nth > 1) ck_assert_uint_gt(done, 0);
        lattice_region_metrics m;
        lattice_region_metrics_get(r, &m);
        ck_assert_uint_eq(m.rows, done);
        ck_assert_uint_eq(m.pages_mapped, (nth <= 3 ? nth - 1 : 3) * 256);
        ck_assert_int_eq(lattice_region_check(r), LATTICE_OK);
        for (size_t i = 0; i < done; i++) assert_ent(r, links[i], &x[i]);
        /* The rest goes in once memory can be had again. */
        ck_assert_int_eq(lattice_region_insert_batch(r, e + done, N - done, links + done, &more),
                         LATTICE_OK);
        ck_assert_uint_eq(done + more, N);
        ck_assert_int_eq(lattice_region_check(r), LATTICE_OK);
        for (size_t i = 0; i < N; i++) assert_ent(r, links[i], &x[i]);
        lattice_region_destroy(r);
    }
    for (size_t i = 0; i < N; i++) free(x[i].val);
    free(x), free(e), free(links);
}
END_TEST

static void setup(void) { rcu_register_thread(); }
static void teardown(void) { rcu_unregister_thread(); }

int main(void)
{
    Suite *s = suite_create("storage_batch");
    TCase *tc = tcase_create("batch");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, batch_rows_of_every_shape_read_back_as_single_inserts_write_them);
    tcase_add_test(tc, batches_and_removes_churn_against_a_reference);
    tcase_add_test(tc, a_failed_chunk_map_at_every_n_keeps_exactly_the_rows_written);
    suite_add_tcase(s, tc);
    return lt_run_suite(s);
}
