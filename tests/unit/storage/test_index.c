/* The per-partition index table and the region's lanes: rebuilds (grow and
 * shrink) while readers and a cursor walker run, tombstone churn against a
 * reference map, a failed allocation at every N during rebuilds and batch
 * presizing, and empty pages moving between lanes. */
#include <pthread.h>

#include "run_suite.h"
#include "helpers.h"

static lattice_store_entry ent(char *k, uint64_t id, uint8_t *v, size_t vlen, uint64_t ver,
                               uint32_t parts)
{
    int kl = key_of(k, 32, id);
    fill_value(v, vlen, id, ver);
    return (lattice_store_entry){.partition = (uint32_t)(id % parts), .key = k,
                                 .key_len = (size_t)kl, .value = v, .value_len = vlen,
                                 .version = ver};
}

/* ---- rebuilds under readers ---- */

enum { STABLE = 500, GROW = 40000, ROUNDS = 4 };

struct shared {
    lattice_store *s;
    int stop;      /* atomic */
    uint64_t bad;  /* atomic: a stable key missed or a wrong value */
    uint64_t reads, walks; /* atomics */
};

/* Stable keys (ids 0..STABLE-1) hold value (id, 1) for the whole test. */
static void *stable_reader(void *arg)
{
    struct shared *sh = arg;
    rcu_register_thread();
    uint8_t buf[64];
    char k[32];
    for (uint64_t n = 0; !__atomic_load_n(&sh->stop, __ATOMIC_ACQUIRE); n++) {
        uint64_t id = mix64(n + (uint64_t)(uintptr_t)&n) % STABLE;
        int kl = key_of(k, sizeof k, id);
        lattice_store_meta m;
        int st = lattice_store_get(sh->s, 0, k, (size_t)kl, buf, sizeof buf, &m);
        if (st != LATTICE_OK || m.version != 1 || m.value_len != 40 || !value_ok(buf, 40, id, 1))
            __atomic_add_fetch(&sh->bad, 1, __ATOMIC_RELAXED);
        __atomic_add_fetch(&sh->reads, 1, __ATOMIC_RELAXED);
    }
    rcu_unregister_thread();
    return NULL;
}

struct seen {
    uint8_t count[STABLE];
    int other_bad;
};

static int count_stable(void *arg, const lattice_store_item *it)
{
    struct seen *sn = arg;
    unsigned long long id;
    if (sscanf((const char *)it->key, "key:%8llu", &id) != 1) {
        sn->other_bad = 1;
        return 0;
    }
    if (!value_ok(it->value, it->value_len, id, it->version)) sn->other_bad = 1;
    if (id < STABLE) sn->count[id]++;
    return 0;
}

/* Walks partition 0 in small batches while it grows and shrinks: every
 * stable key exactly once per walk. */
static void *walker(void *arg)
{
    struct shared *sh = arg;
    rcu_register_thread();
    static struct seen sn;
    while (!__atomic_load_n(&sh->stop, __ATOMIC_ACQUIRE)) {
        memset(&sn, 0, sizeof sn);
        lattice_store_cursor *c;
        if (lattice_store_cursor_open(sh->s, 0, &c) != LATTICE_OK) break;
        int done = 0;
        while (!done) lattice_store_cursor_next(c, 37, 0, count_stable, &sn, &done);
        lattice_store_cursor_close(c);
        for (int i = 0; i < STABLE; i++)
            if (sn.count[i] != 1) __atomic_add_fetch(&sh->bad, 1, __ATOMIC_RELAXED);
        if (sn.other_bad) __atomic_add_fetch(&sh->bad, 1, __ATOMIC_RELAXED);
        __atomic_add_fetch(&sh->walks, 1, __ATOMIC_RELAXED);
    }
    rcu_unregister_thread();
    return NULL;
}

START_TEST(rebuilds_never_hide_a_present_key)
{
    lattice_region *r = new_region(4096, 64, LATTICE_REGION_REJECT);
    lattice_store *s = new_store(r, 1, NULL);
    uint8_t v[64];
    char k[32];
    for (uint64_t id = 0; id < STABLE; id++) {
        lattice_store_entry e = ent(k, id, v, 40, 1, 1);
        ck_assert_int_eq(lattice_store_put(s, &e, 0), LATTICE_OK);
    }
    struct shared sh = {.s = s};
    pthread_t th[3];
    pthread_create(&th[0], NULL, stable_reader, &sh);
    pthread_create(&th[1], NULL, stable_reader, &sh);
    pthread_create(&th[2], NULL, walker, &sh);
    lattice_store_metrics m;
    uint64_t grown = 0;
    for (int round = 0; round < ROUNDS; round++) {
        /* Grow through many rebuilds (one by one, then in batches), then
         * empty again, leaving tombstones that later rebuilds drop. */
        for (uint64_t id = STABLE; id < STABLE + GROW; id++) {
            lattice_store_entry e = ent(k, id, v, 20, 2, 1);
            if (round & 1) {
                ck_assert_int_eq(lattice_store_put(s, &e, 0), LATTICE_OK);
                continue;
            }
            lattice_store_entry b[50];
            char bk[50][32];
            uint8_t bv[50][20];
            int nb = 0;
            for (; nb < 50 && id < STABLE + GROW; nb++, id++) b[nb] = ent(bk[nb], id, bv[nb], 20, 2, 1);
            id--;
            size_t applied;
            ck_assert_int_eq(lattice_store_insert_batch(s, 0, b, (size_t)nb, 0, &applied), LATTICE_OK);
            ck_assert_uint_eq(applied, (size_t)nb);
        }
        lattice_store_metrics_get(s, &m);
        if (m.index_buckets > grown) grown = m.index_buckets;
        for (uint64_t id = STABLE; id < STABLE + GROW; id++) {
            int kl = key_of(k, sizeof k, id);
            ck_assert_int_eq(lattice_store_remove(s, 0, k, (size_t)kl), LATTICE_OK);
        }
    }
    /* Churn over a few keys: tombstones are reused or dropped by rebuilds,
     * and the emptied table has shrunk (at most 8 slots per live key). */
    for (uint64_t n = 0; n < 200000; n++) {
        uint64_t id = STABLE + n % 64;
        lattice_store_entry e = ent(k, id, v, 8, 3, 1);
        ck_assert_int_eq(lattice_store_put(s, &e, 0), LATTICE_OK);
        int kl = key_of(k, sizeof k, id);
        ck_assert_int_eq(lattice_store_remove(s, 0, k, (size_t)kl), LATTICE_OK);
    }
    lattice_store_metrics_get(s, &m);
    ck_assert_uint_le(m.index_buckets, (uint64_t)(STABLE + 64) * 8);
    __atomic_store_n(&sh.stop, 1, __ATOMIC_RELEASE);
    for (int i = 0; i < 3; i++) pthread_join(th[i], NULL);
    ck_assert_uint_gt(grown, GROW);
    ck_assert_uint_gt(sh.reads, 1000);
    ck_assert_uint_gt(sh.walks, 0);
    ck_assert_uint_eq(sh.bad, 0);
    ck_assert_uint_eq(m.entries, STABLE);
    ck_assert_int_eq(lattice_region_check(r), LATTICE_OK);
    lattice_store_destroy(s);
    lattice_region_destroy(r);
}
END_TEST

/* ---- failing allocations during rebuilds ---- */

enum { FKEYS = 3000 };

static void check_all(lattice_store *s, const uint8_t *present)
{
    uint8_t b[16];
    char k[32];
    uint64_t n = 0;
    for (uint64_t id = 0; id < FKEYS; id++) {
        int kl = key_of(k, sizeof k, id);
        lattice_store_meta m;
        int st = lattice_store_get(s, (uint32_t)(id % 2), k, (size_t)kl, b, sizeof b, &m);
        ck_assert_msg(st == (present[id] ? LATTICE_OK : LATTICE_ERR_NOT_FOUND), "key %llu: %s",
                      (unsigned long long)id, lattice_strerror(st));
        if (present[id]) ck_assert(value_ok(b, 16, id, 1)), n++;
    }
    ck_assert_uint_eq(lattice_store_count(s, 0) + lattice_store_count(s, 1), n);
}

START_TEST(a_failed_allocation_at_every_n_leaves_the_index_intact)
{
    /* Each round arms a failure at the nth allocation from now and runs the
     * same mix: puts that cross table rebuilds, a presized batch, a clear
     * that drops the table, a cursor.  Whatever fails, the store must hold
     * exactly what succeeded. */
    for (uint64_t nth = 1; nth <= 40; nth++) {
        lattice_region *r = new_region(4096, 16, LATTICE_REGION_REJECT);
        lattice_store *s = new_store(r, 2, NULL);
        static uint8_t present[FKEYS];
        memset(present, 0, sizeof present);
        uint8_t v[16];
        char k[32];
        lattice_alloc_fail_nth(nth);
        for (uint64_t id = 0; id < 1000; id++) {
            lattice_store_entry e = ent(k, id, v, 16, 1, 2);
            int st = lattice_store_put(s, &e, 0);
            ck_assert(st == LATTICE_OK || st == LATTICE_ERR_NOMEM);
            present[id] = st == LATTICE_OK;
        }
        lattice_alloc_fail_nth(nth);
        for (uint64_t base = 1000; base < 3000; base += 400) {
            lattice_store_entry b[200];
            static char bk[200][32];
            static uint8_t bv[200][16];
            for (int i = 0; i < 200; i++) b[i] = ent(bk[i], base + 2 * (uint64_t)i, bv[i], 16, 1, 2);
            size_t applied = 0;
            int st = lattice_store_insert_batch(s, 0, b, 200, 0, &applied);
            ck_assert(st == LATTICE_OK || st == LATTICE_ERR_NOMEM);
            ck_assert(st == LATTICE_OK ? applied == 200 : applied < 200);
            for (size_t i = 0; i < applied; i++) present[base + 2 * i] = 1;
        }
        check_all(s, present);
        lattice_alloc_fail_nth(nth % 7 + 1);
        lattice_store_cursor *c = NULL;
        if (lattice_store_cursor_open(s, 1, &c) == LATTICE_OK) {
            int done = 0, st = LATTICE_OK;
            struct got g = {0};
            while (!done && st == LATTICE_OK) st = lattice_store_cursor_next(c, 50, 0, got_item, &g, &done);
            ck_assert(st == LATTICE_OK || st == LATTICE_ERR_NOMEM);
            got_free(&g);
            lattice_store_cursor_close(c);
        }
        lattice_alloc_fail_nth(0);
        ck_assert_int_eq(lattice_store_clear(s, 0), LATTICE_OK);
        for (uint64_t id = 0; id < FKEYS; id += 2) present[id] = 0;
        check_all(s, present);
        ck_assert_int_eq(lattice_region_check(r), LATTICE_OK);
        /* And it keeps working once memory is back. */
        for (uint64_t id = 0; id < FKEYS; id++) {
            lattice_store_entry e = ent(k, id, v, 16, 1, 2);
            ck_assert_int_eq(lattice_store_put(s, &e, 0), LATTICE_OK);
            present[id] = 1;
        }
        check_all(s, present);
        lattice_store_destroy(s);
        lattice_region_destroy(r);
    }
    ck_assert_uint_gt(lattice_alloc_injected_failures(), 30);
}
END_TEST

/* ---- lanes ---- */

struct fill_job {
    lattice_store *s;
    uint32_t partition;
    uint64_t first, n;
};

/* Puts keys first, first+2, ... into the partition until the region is full. */
static void *fill_until_full(void *arg)
{
    struct fill_job *j = arg;
    rcu_register_thread();
    uint8_t v[200];
    char k[32];
    for (j->n = 0;; j->n++) {
        lattice_store_entry e = ent(k, j->first + 2 * j->n, v, 200, 1, 2);
        e.partition = j->partition;
        int st = lattice_store_put(j->s, &e, 0);
        if (st == LATTICE_ERR_REGION_FULL) break;
        ck_assert_int_eq(st, LATTICE_OK);
    }
    rcu_unregister_thread();
    return NULL;
}

START_TEST(lanes_hand_empty_pages_to_each_other)
{
    /* 16 MiB: two lanes, and each writer thread writes through its own.
     * One thread fills the whole region; once it is emptied, a second
     * thread (the other lane) gets those pages without the region mapping
     * anything new, and holds as many entries. */
    lattice_region *r = new_region(4096, 16, LATTICE_REGION_REJECT);
    lattice_store *s = new_store(r, 2, NULL);
    struct fill_job j0 = {s, 0, 0, 0}, j1 = {s, 1, 1, 0};
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, fill_until_full, &j0), 0);
    pthread_join(th, NULL);
    lattice_region_metrics m;
    lattice_region_metrics_get(r, &m);
    uint64_t mapped = m.pages_mapped;
    ck_assert_uint_eq(mapped, m.pages_max);
    ck_assert_int_eq(lattice_store_clear(s, 0), LATTICE_OK);
    lattice_region_metrics_get(r, &m);
    ck_assert_uint_eq(m.pages_reuse, mapped);
    ck_assert_int_eq(pthread_create(&th, NULL, fill_until_full, &j1), 0);
    pthread_join(th, NULL);
    lattice_region_metrics_get(r, &m);
    ck_assert_uint_eq(m.pages_mapped, mapped);
    ck_assert_uint_eq(j1.n, j0.n);
    ck_assert_int_eq(lattice_region_check(r), LATTICE_OK);
    char k[32];
    for (uint64_t i = 0; i < j1.n; i += 13) {
        int kl = key_of(k, sizeof k, 2 * i + 1);
        uint8_t b[200];
        ck_assert_int_eq(lattice_store_get(s, 1, k, (size_t)kl, b, sizeof b, NULL), LATTICE_OK);
        ck_assert(value_ok(b, 200, 2 * i + 1, 1));
    }
    lattice_store_destroy(s);
    lattice_region_destroy(r);
}
END_TEST

static void setup(void) { rcu_register_thread(); }
static void teardown(void) { rcu_unregister_thread(); }

int main(void)
{
    Suite *s = suite_create("storage_index");
    TCase *tc = tcase_create("index");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 240);
    tcase_add_test(tc, rebuilds_never_hide_a_present_key);
    tcase_add_test(tc, a_failed_allocation_at_every_n_leaves_the_index_intact);
    tcase_add_test(tc, lanes_hand_empty_pages_to_each_other);
    suite_add_tcase(s, tc);
    return lt_run_suite(s);
}
