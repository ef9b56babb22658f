/* Verification digests and the comparator; progress JSON and bar. */
#include "rebalance_tests.h"

static void put_raw(lattice_store *s, uint32_t part, const char *key, const char *value,
                    uint64_t expire, uint64_t version)
{
    lattice_store_entry e = {.partition = part, .key = key, .key_len = strlen(key), .value = value,
                             .value_len = strlen(value), .expire_ms = expire, .version = version};
    ck_assert_int_eq(lattice_store_put(s, &e, 0), LATTICE_OK);
}

START_TEST(digest_independent_of_order_detects_changes)
{
    rcu_register_thread();
    struct t_env a, b;
    t_env_open(&a, 2, 16);
    t_env_open(&b, 2, 16);
    enum { N = 500 };
    for (uint64_t i = 0; i < N; i++) t_put(a.store, 0, i, 40, i + 1, 0);
    for (uint64_t i = N; i-- > 0;) t_put(b.store, 0, i, 40, i + 1, 0); /* reverse order */
    lattice_rebalance_digest da, db;
    ck_assert_int_eq(lattice_rebalance_digest_partition(a.store, 0, 9, &da), LATTICE_OK);
    ck_assert_int_eq(lattice_rebalance_digest_partition(b.store, 0, 9, &db), LATTICE_OK);
    ck_assert_uint_eq(da.hash, db.hash);
    ck_assert_uint_eq(da.size, N);
    ck_assert_uint_eq(da.counter, 9);
    ck_assert_uint_ne(da.hash, 0);
    uint64_t base = da.hash;
    /* A changed value (same length, same version). */
    put_raw(b.store, 0, "k7", "a value of some other bytes entirely......", 0, 8);
    t_put(b.store, 0, 7, 40, 8, 0);
    ck_assert_uint_eq(t_digest(b.store, 0), base); /* restored: equal again */
    t_put(b.store, 0, 7, 40, 8, 0);
    {
        char key[] = "k7";
        uint8_t v[40];
        t_fill(v, 40, 7, 8);
        v[13] ^= 1;
        lattice_store_entry e = {.partition = 0, .key = key, .key_len = 2, .value = v,
                                 .value_len = 40, .version = 8};
        ck_assert_int_eq(lattice_store_put(b.store, &e, 0), LATTICE_OK);
    }
    ck_assert_uint_ne(t_digest(b.store, 0), base);
    t_put(b.store, 0, 7, 40, 8, 0);
    ck_assert_uint_eq(t_digest(b.store, 0), base);
    /* A changed version, same bytes. */
    t_put(b.store, 0, 7, 40, 8, 0);
    {
        char key[] = "k7";
        uint8_t v[40];
        t_fill(v, 40, 7, 8);
        lattice_store_entry e = {.partition = 0, .key = key, .key_len = 2, .value = v,
                                 .value_len = 40, .version = 9};
        ck_assert_int_eq(lattice_store_put(b.store, &e, 0), LATTICE_OK);
    }
    ck_assert_uint_ne(t_digest(b.store, 0), base);
    t_put(b.store, 0, 7, 40, 8, 0);
    /* A changed expire time. */
    t_put(b.store, 0, 7, 40, 8, 4102444800000ull);
    ck_assert_uint_ne(t_digest(b.store, 0), base);
    t_put(b.store, 0, 7, 40, 8, 0);
    ck_assert_uint_eq(t_digest(b.store, 0), base);
    /* A missing key. */
    ck_assert_int_eq(lattice_store_remove(b.store, 0, "k7", 2), LATTICE_OK);
    ck_assert_int_eq(lattice_rebalance_digest_partition(b.store, 0, 9, &db), LATTICE_OK);
    ck_assert_uint_ne(db.hash, base);
    ck_assert_uint_eq(db.size, N - 1);
    /* Bytes moved between key and value. */
    put_raw(a.store, 1, "ab", "c", 0, 1);
    put_raw(b.store, 1, "a", "bc", 0, 1);
    ck_assert_uint_ne(t_digest(a.store, 1), t_digest(b.store, 1));
    ck_assert_int_eq(lattice_rebalance_digest_partition(a.store, 2, 0, &da), LATTICE_ERR_INVAL);
    t_env_close(&a);
    t_env_close(&b);
    rcu_unregister_thread();
}
END_TEST

START_TEST(verify_lists_conflicts)
{
    const lattice_rebalance_digest d[] = {
        {.node = 2, .partition = 5, .hash = 10, .size = 3, .counter = 7},
        {.node = 0, .partition = 5, .hash = 10, .size = 3, .counter = 7},
        {.node = 1, .partition = 5, .hash = 11, .size = 3, .counter = 7}, /* value differs */
        {.node = 0, .partition = 1, .hash = 4, .size = 2, .counter = 9},
        {.node = 3, .partition = 1, .hash = 3, .size = 1, .counter = 8}, /* behind, key missing */
        {.node = 1, .partition = 2, .hash = 4, .size = 2, .counter = 9},
    };
    lattice_rebalance_conflict *c;
    size_t n;
    ck_assert_int_eq(lattice_rebalance_verify(d, 6, &c, &n), LATTICE_OK);
    ck_assert_uint_eq(n, 2);
    ck_assert_uint_eq(c[0].partition, 1);
    ck_assert_uint_eq(c[0].node_a, 0);
    ck_assert_uint_eq(c[0].node_b, 3);
    ck_assert_uint_eq(c[0].what, LATTICE_REBALANCE_CONFLICT_HASH | LATTICE_REBALANCE_CONFLICT_SIZE |
                                     LATTICE_REBALANCE_CONFLICT_COUNTER);
    ck_assert_uint_eq(c[1].partition, 5);
    ck_assert_uint_eq(c[1].node_a, 0);
    ck_assert_uint_eq(c[1].node_b, 1);
    ck_assert_uint_eq(c[1].what, LATTICE_REBALANCE_CONFLICT_HASH);
    lt_free(c);
    ck_assert_int_eq(lattice_rebalance_verify(d, 2, &c, &n), LATTICE_OK);
    ck_assert_uint_eq(n, 0);
    ck_assert_ptr_null(c);
    ck_assert_int_eq(lattice_rebalance_verify(NULL, 0, &c, &n), LATTICE_OK);
    ck_assert_int_eq(lattice_rebalance_verify(NULL, 1, &c, &n), LATTICE_ERR_INVAL);
}
END_TEST

START_TEST(progress_json_and_bar)
{
    lattice_rebalance_progress p[2];
    lattice_rebalance_progress_init(&p[0], "default", 100, 1000);
    lattice_rebalance_progress_init(&p[1], "orders", 10, 1000);
    p[0].partitions_done = 25;
    p[0].partitions_moving = 75;
    p[0].entries_received = 250000;
    p[0].bytes_received = 25000000;
    p[1].partitions_done = 10;
    char buf[1024];
    size_t n = lattice_rebalance_progress_json(p, 2, 11000, buf, sizeof buf);
    ck_assert_uint_eq(n, strlen(buf));
    ck_assert_ptr_nonnull(strstr(buf, "{\"in_progress\":true,\"caches\":[{\"name\":\"default\","
                                      "\"partitions_moving\":75,\"partitions_left\":75,"));
    ck_assert_ptr_nonnull(strstr(buf, "\"entries_received\":250000,\"bytes_received\":25000000,"
                                      "\"bytes_per_s\":2500000,\"entries_per_s\":25000,\"eta_s\":30.0}"));
    ck_assert_ptr_nonnull(strstr(buf, "{\"name\":\"orders\",\"partitions_moving\":0,\"partitions_left\":0,"));
    /* snprintf contract: a short buffer gets a prefix, the return says how much is needed. */
    char small[16];
    ck_assert_uint_eq(lattice_rebalance_progress_json(p, 2, 11000, small, sizeof small), n);
    ck_assert_uint_eq(strlen(small), sizeof small - 1);
    ck_assert_int_eq(strncmp(small, buf, sizeof small - 1), 0);
    n = lattice_rebalance_progress_json(p + 1, 1, 11000, buf, sizeof buf);
    ck_assert_ptr_nonnull(strstr(buf, "\"in_progress\":false"));
    n = lattice_rebalance_progress_bar(&p[0], 11000, 20, buf, sizeof buf);
    ck_assert_uint_eq(n, strlen(buf));
    ck_assert_str_eq(buf, "default [#####---------------]  25% 75/100 left 250.0k entries 25.0M B "
                          "2.5M B/s eta 30s");
    lattice_rebalance_progress_init(&p[1], "x", 4, 1000);
    lattice_rebalance_progress_bar(&p[1], 1000, 4, buf, sizeof buf);
    ck_assert_str_eq(buf, "x [----]   0% 4/4 left 0 entries 0 B 0 B/s eta ?");
}
END_TEST

TCase *rebalance_verify_tcase(void)
{
    TCase *tc = tcase_create("verify");
    tcase_add_test(tc, digest_independent_of_order_detects_changes);
    tcase_add_test(tc, verify_lists_conflicts);
    tcase_add_test(tc, progress_json_and_bar);
    return tc;
}
