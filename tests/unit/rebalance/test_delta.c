/* Delta rebalance, network-free: a supplier's history against a demander's
 * kept copy, including the copy that diverged - it applied writes nobody
 * acknowledged, numbered with counters the grid then gave to other writes -
 * which must end equal to the supplier's copy; and the full-copy fallback
 * when the gap is older than the history. */
#include "rebalance_tests.h"

static const lattice_rebalance_ids DIDS = {3, 1, 7, 1u << 16};

static void dput(lattice_store *s, const char *k, const char *v, uint64_t version)
{
    lattice_store_entry e = {0, k, strlen(k), v, strlen(v), 0, version, 0};
    ck_assert_int_eq(lattice_store_put(s, &e, 0), LATTICE_OK);
}

static void drm(lattice_store *s, const char *k, uint64_t version)
{
    ck_assert_int_eq(lattice_store_remove_v(s, 0, k, strlen(k), version), LATTICE_OK);
}

struct dump {
    char lines[256][64];
    size_t n;
};

static int dump_one(void *arg, const lattice_store_item *it)
{
    struct dump *d = arg;
    ck_assert_uint_lt(d->n, 256);
    snprintf(d->lines[d->n++], 64, "%.*s=%.*s@%llu", (int)it->key_len, (const char *)it->key, (int)it->value_len,
             (const char *)it->value, (unsigned long long)it->version);
    return 0;
}

static int cmp(const void *a, const void *b) { return strcmp(a, b); }

static void dump_of(lattice_store *s, struct dump *d)
{
    d->n = 0;
    lattice_store_cursor *c;
    ck_assert_int_eq(lattice_store_cursor_open(s, 0, &c), LATTICE_OK);
    int done = 0;
    while (!done) ck_assert_int_eq(lattice_store_cursor_next(c, 64, 0, dump_one, d, &done), LATTICE_OK);
    lattice_store_cursor_close(c);
    qsort(d->lines, d->n, sizeof d->lines[0], cmp);
}

static void same(lattice_store *a, lattice_store *b)
{
    struct dump *x = calloc(1, sizeof *x), *y = calloc(1, sizeof *y);
    dump_of(a, x);
    dump_of(b, y);
    ck_assert_uint_eq(x->n, y->n);
    for (size_t i = 0; i < x->n; i++) ck_assert_str_eq(x->lines[i], y->lines[i]);
    free(x);
    free(y);
}

static lattice_store *mk(lattice_region *r)
{
    lattice_store_config sc = {.name = "t", .partitions = 1, .region = r};
    lattice_store *s;
    ck_assert_int_eq(lattice_store_create(&sc, &s), LATTICE_OK);
    return s;
}

/* Streams the delta (or a full copy when the delta is refused) into dst. */
static bool load(lattice_store *sup, uint64_t counter, lattice_store *base, uint64_t mark, lattice_store *dst,
                 uint64_t *entries)
{
    /* The demander's base, as the node builds it: each key its kept copy
     * changed above the mark, once. */
    lattice_rebalance_delta_base db;
    ck_assert_int_eq(lattice_rebalance_delta_base_of(base, 0, mark, &db), LATTICE_OK);
    for (size_t i = 0; i < db.key_count; i++)
        for (size_t k = i + 1; k < db.key_count; k++)
            ck_assert(db.keys[i].len != db.keys[k].len || memcmp(db.keys[i].data, db.keys[k].data, db.keys[i].len));
    lattice_rebalance_batcher *b = NULL;
    lattice_status st = lattice_rebalance_batcher_create_delta(sup, "orders", &DIDS, 0, 4096, counter, &db, &b);
    bool delta = st == LATTICE_OK;
    if (!delta) {
        ck_assert_int_eq(st, LATTICE_ERR_NOT_FOUND);
        ck_assert_int_eq(lattice_rebalance_batcher_create(sup, "orders", &DIDS, 0, 4096, &b), LATTICE_OK);
    }
    lattice_rebalance_applier *a;
    ck_assert_int_eq(lattice_rebalance_applier_create(dst, "orders", &DIDS, NULL, &a), LATTICE_OK);
    ck_assert_int_eq(lattice_rebalance_applier_begin_delta(a, 0, base, mark), LATTICE_OK);
    *entries = 0;
    bool last = false;
    for (uint64_t n = 1; !last; n++) {
        void *buf;
        size_t len, ne;
        ck_assert_int_eq(lattice_rebalance_batcher_next(b, n, counter, &buf, &len, &last, &ne), LATTICE_OK);
        lattice_rebalance_supply *s;
        ck_assert_int_eq(lattice_rebalance_supply_decode(buf, len, 0, &s), LATTICE_OK);
        lattice_rebalance_apply_result r;
        ck_assert_int_eq(lattice_rebalance_applier_apply(a, s, &r), LATTICE_OK);
        ck_assert_int_eq(r.verdict, LATTICE_REBALANCE_APPLIED);
        ck_assert(r.delta == delta);
        *entries += ne;
        lattice_rebalance_supply_free(s);
        lt_free(buf);
    }
    lattice_rebalance_applier_free(a);
    lattice_rebalance_batcher_free(b);
    lattice_rebalance_demand m = {.deltas = lt_malloc(sizeof db), .delta_count = 1};
    ck_assert_ptr_nonnull(m.deltas);
    m.deltas[0] = db;
    lattice_rebalance_demand_clear(&m);
    return delta;
}

START_TEST(delta_of_a_divergent_copy_ends_equal_to_the_supplier)
{
    rcu_register_thread();
    lattice_region_config rc = {.name = "t", .page_size = 4096, .max_mb = 16};
    lattice_region *r;
    ck_assert_int_eq(lattice_region_create(&rc, &r), LATTICE_OK);
    lattice_store *grid = mk(r), *kept = mk(r), *fresh = mk(r);
    lattice_store_history_valid_from(grid, 0, 0);
    lattice_store_history_valid_from(kept, 0, 0);
    char k[16], v[16];
    /* 100 acknowledged writes, applied by both copies: the mark is 100. */
    for (uint64_t i = 1; i <= 100; i++) {
        snprintf(k, sizeof k, "k%llu", (unsigned long long)(i % 40));
        snprintf(v, sizeof v, "v%llu", (unsigned long long)i);
        dput(grid, k, v, i);
        dput(kept, k, v, i);
    }
    /* The old primary applied two writes and paused before its backups did:
     * never acknowledged.  The new primary gave 101.. to other writes. */
    dput(kept, "k1", "lost", 101);
    drm(kept, "k2", 102);
    dput(kept, "only-here", "lost", 103);
    dput(grid, "k3", "new", 101);
    drm(grid, "k4", 102);
    dput(grid, "k5", "new", 103);
    dput(grid, "born", "new", 104);
    dput(grid, "k3", "newer", 107); /* a key changed twice above the mark, on both sides */
    dput(kept, "k1", "lost2", 104);
    /* A write that reached the fresh copy before the load (it is MOVING),
     * and a remove that did: neither may be undone by the kept copy. */
    dput(grid, "k6", "during", 105);
    dput(fresh, "k6", "during", 105);
    drm(grid, "k7", 106);
    ck_assert_int_eq(lattice_store_remove_v(fresh, 0, "k7", 2, 106), LATTICE_ERR_NOT_FOUND);
    lattice_store_history_note(fresh, 0, "k7", 2, 106, true); /* as exec_replicate records it */
    uint64_t entries = 0;
    ck_assert(load(grid, 107, kept, 100, fresh, &entries));
    same(grid, fresh);
    /* Only what changed: k1 k2 only-here (listed) + k3 k4 k5 born k6 k7 (history). */
    ck_assert_uint_le(entries, 9);
    lattice_store_destroy(grid);
    lattice_store_destroy(kept);
    lattice_store_destroy(fresh);
    lattice_region_destroy(r);
    rcu_unregister_thread();
}
END_TEST

START_TEST(gap_older_than_the_history_falls_back_to_a_full_copy)
{
    rcu_register_thread();
    lattice_region_config rc = {.name = "t", .page_size = 4096, .max_mb = 16};
    lattice_region *r;
    ck_assert_int_eq(lattice_region_create(&rc, &r), LATTICE_OK);
    lattice_store *grid = mk(r), *kept = mk(r), *fresh = mk(r);
    lattice_store_history_configure(grid, 8, 1u << 20);
    lattice_store_history_valid_from(grid, 0, 0);
    lattice_store_history_valid_from(kept, 0, 0);
    char k[16], v[16];
    for (uint64_t i = 1; i <= 50; i++) {
        snprintf(k, sizeof k, "k%llu", (unsigned long long)(i % 20));
        snprintf(v, sizeof v, "v%llu", (unsigned long long)i);
        dput(grid, k, v, i);
        if (i <= 10) dput(kept, k, v, i);
    }
    dput(kept, "k3", "lost", 11); /* diverged too */
    lattice_rebalance_delta_base none;
    ck_assert_int_eq(lattice_rebalance_delta_base_of(fresh, 0, 10, &none), LATTICE_ERR_NOT_FOUND); /* no history */
    uint64_t entries = 0;
    ck_assert(!load(grid, 50, kept, 10, fresh, &entries)); /* 40 missed, 8 kept: full */
    same(grid, fresh);
    ck_assert_uint_eq(entries, 20);
    lattice_store_destroy(grid);
    lattice_store_destroy(kept);
    lattice_store_destroy(fresh);
    lattice_region_destroy(r);
    rcu_unregister_thread();
}
END_TEST

TCase *rebalance_delta_tcase(void)
{
    TCase *tc = tcase_create("delta");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, delta_of_a_divergent_copy_ends_equal_to_the_supplier);
    tcase_add_test(tc, gap_older_than_the_history_falls_back_to_a_full_copy);
    return tc;
}
