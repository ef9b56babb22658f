/* Partition states and the node's partition map: allowed transitions, all or
 * nothing batches, update counters, and lock-free snapshot reads from several
 * threads while a writer publishes. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <urcu.h>

#include "lattice/alloc.h"
#include "partition/partition.h"
#include "partition_tests.h"

static void setup(void) { rcu_register_thread(); }
static void teardown(void) { rcu_unregister_thread(); }

START_TEST(state_names_and_transitions)
{
    static const char *names[] = {"MOVING", "OWNING", "RENTING", "EVICTED", "LOST"};
    for (int s = 0; s < LATTICE_PART_STATE_COUNT_; s++) {
        ck_assert_str_eq(lattice_partition_state_name((lattice_partition_state)s), names[s]);
        ck_assert_int_eq(lattice_partition_state_parse(names[s]), s);
    }
    ck_assert_int_eq(lattice_partition_state_parse("owning"), LATTICE_PART_OWNING);
    ck_assert_int_eq(lattice_partition_state_parse("OWNED"), -1);
    ck_assert_int_eq(lattice_partition_state_parse(NULL), -1);
    ck_assert_str_eq(lattice_partition_state_name((lattice_partition_state)9), "UNKNOWN");

    /* The documented lifecycle (partition.h), row = from, column = to. */
    static const char allowed[5][6] = {
        /*            M  O  R  E  L */
        /* MOVING */ "11101",
        /* OWNING */ "01101",
        /* RENTING*/ "00110",
        /* EVICTED*/ "11010",
        /* LOST   */ "01011",
    };
    for (int f = 0; f < 5; f++)
        for (int t = 0; t < 5; t++)
            ck_assert_msg(lattice_partition_state_transition_ok((lattice_partition_state)f,
                                                                (lattice_partition_state)t) ==
                              (allowed[f][t] == '1'),
                          "%s -> %s", names[f], names[t]);
    ck_assert(!lattice_partition_state_transition_ok((lattice_partition_state)7, LATTICE_PART_OWNING));
    ck_assert(!lattice_partition_state_transition_ok(LATTICE_PART_OWNING, (lattice_partition_state)-1));
}
END_TEST

static lattice_partition_state state_of(lattice_partition_map *m, const char *cache, uint32_t p)
{
    lattice_partition_state s = LATTICE_PART_STATE_COUNT_;
    ck_assert_int_eq(lattice_partition_map_state(m, cache, p, &s), LATTICE_OK);
    return s;
}

static uint64_t version_of(lattice_partition_map *m)
{
    rcu_read_lock();
    uint64_t v = lattice_partition_snapshot_version(lattice_partition_map_snapshot(m));
    rcu_read_unlock();
    return v;
}

START_TEST(caches_start_evicted_and_follow_the_lifecycle)
{
    lattice_partition_map *m;
    ck_assert_int_eq(lattice_partition_map_create(&m), LATTICE_OK);
    ck_assert_uint_eq(version_of(m), 0);
    ck_assert_int_eq(lattice_partition_map_add_cache(m, "orders", 16), LATTICE_OK);
    ck_assert_int_eq(lattice_partition_map_add_cache(m, "alpha", 4), LATTICE_OK);
    ck_assert_uint_eq(version_of(m), 2);
    ck_assert_int_eq(lattice_partition_map_add_cache(m, "orders", 16), LATTICE_ERR_EXISTS);
    ck_assert_int_eq(lattice_partition_map_add_cache(m, "x", 3), LATTICE_ERR_INVAL);
    ck_assert_int_eq(lattice_partition_map_add_cache(m, "x", 0), LATTICE_ERR_INVAL);
    ck_assert_int_eq(lattice_partition_map_add_cache(m, "bad name", 4), LATTICE_ERR_INVAL);
    ck_assert_int_eq(lattice_partition_map_add_cache(m, NULL, 4), LATTICE_ERR_INVAL);
    ck_assert_uint_eq(version_of(m), 2); /* refused changes publish nothing */
    for (uint32_t p = 0; p < 16; p++) ck_assert_int_eq(state_of(m, "orders", p), LATTICE_PART_EVICTED);

    uint32_t parts[] = {1, 3, 5};
    ck_assert_int_eq(lattice_partition_map_set_states(m, "orders", parts, 3, LATTICE_PART_MOVING),
                     LATTICE_OK);
    ck_assert_int_eq(lattice_partition_map_set_states(m, "orders", parts, 3, LATTICE_PART_OWNING),
                     LATTICE_OK);
    ck_assert_int_eq(state_of(m, "orders", 3), LATTICE_PART_OWNING);
    ck_assert_int_eq(state_of(m, "orders", 2), LATTICE_PART_EVICTED);
    ck_assert_int_eq(state_of(m, "alpha", 1), LATTICE_PART_EVICTED);

    /* all or nothing: 7 is EVICTED and cannot go RENTING, so 1 and 3 stay */
    uint64_t v = version_of(m);
    uint32_t mixed[] = {1, 7, 3};
    ck_assert_int_eq(lattice_partition_map_set_states(m, "orders", mixed, 3, LATTICE_PART_RENTING),
                     LATTICE_ERR_INVAL);
    ck_assert_int_eq(state_of(m, "orders", 1), LATTICE_PART_OWNING);
    uint32_t out_of_range[] = {1, 16};
    ck_assert_int_eq(lattice_partition_map_set_states(m, "orders", out_of_range, 2,
                                                      LATTICE_PART_RENTING),
                     LATTICE_ERR_INVAL);
    ck_assert_int_eq(lattice_partition_map_set_state(m, "nope", 1, LATTICE_PART_RENTING),
                     LATTICE_ERR_NO_CACHE);
    ck_assert_int_eq(lattice_partition_map_set_state(m, "orders", 1, (lattice_partition_state)42),
                     LATTICE_ERR_INVAL);
    ck_assert_int_eq(lattice_partition_map_set_states(m, "orders", NULL, 2, LATTICE_PART_OWNING),
                     LATTICE_ERR_INVAL);
    ck_assert_int_eq(lattice_partition_map_set_states(m, "orders", NULL, 0, LATTICE_PART_OWNING),
                     LATTICE_OK); /* an empty batch is a no-op */
    ck_assert_uint_eq(version_of(m), v);

    /* RENTING -> EVICTED; then it can be loaded again; OWNING -> LOST -> OWNING */
    ck_assert_int_eq(lattice_partition_map_set_state(m, "orders", 1, LATTICE_PART_RENTING), LATTICE_OK);
    ck_assert_int_eq(lattice_partition_map_set_state(m, "orders", 1, LATTICE_PART_OWNING),
                     LATTICE_ERR_INVAL);
    ck_assert_int_eq(lattice_partition_map_set_state(m, "orders", 1, LATTICE_PART_EVICTED), LATTICE_OK);
    ck_assert_int_eq(lattice_partition_map_set_state(m, "orders", 1, LATTICE_PART_MOVING), LATTICE_OK);
    ck_assert_int_eq(lattice_partition_map_set_state(m, "orders", 3, LATTICE_PART_LOST), LATTICE_OK);
    ck_assert_int_eq(lattice_partition_map_set_state(m, "orders", 3, LATTICE_PART_OWNING), LATTICE_OK);

    lattice_partition_state s;
    ck_assert_int_eq(lattice_partition_map_state(m, "orders", 16, &s), LATTICE_ERR_INVAL);
    ck_assert_int_eq(lattice_partition_map_state(m, "none", 0, &s), LATTICE_ERR_NO_CACHE);
    ck_assert_int_eq(lattice_partition_map_state(m, "orders", 0, NULL), LATTICE_ERR_INVAL);

    /* the snapshot view: caches by name, counts per state */
    rcu_read_lock();
    const lattice_partition_snapshot *snap = lattice_partition_map_snapshot(m);
    ck_assert_uint_eq(lattice_partition_snapshot_cache_count(snap), 2);
    int32_t ci = lattice_partition_snapshot_cache_index(snap, "orders");
    ck_assert_int_ge(ci, 0);
    ck_assert_str_eq(lattice_partition_snapshot_cache_name(snap, (uint32_t)ci), "orders");
    ck_assert_uint_eq(lattice_partition_snapshot_partitions(snap, (uint32_t)ci), 16);
    uint32_t counts[LATTICE_PART_STATE_COUNT_];
    lattice_partition_snapshot_count_states(snap, (uint32_t)ci, counts);
    ck_assert_uint_eq(counts[LATTICE_PART_MOVING], 1);
    ck_assert_uint_eq(counts[LATTICE_PART_OWNING], 2);
    ck_assert_uint_eq(counts[LATTICE_PART_EVICTED], 13);
    ck_assert_int_eq(lattice_partition_snapshot_state(snap, (uint32_t)ci, 99), LATTICE_PART_EVICTED);
    ck_assert_int_eq(lattice_partition_snapshot_cache_index(snap, "zzz"), -1);
    ck_assert_ptr_null(lattice_partition_snapshot_cache_name(snap, 5));
    rcu_read_unlock();

    ck_assert_int_eq(lattice_partition_map_remove_cache(m, "orders"), LATTICE_OK);
    ck_assert_int_eq(lattice_partition_map_remove_cache(m, "orders"), LATTICE_ERR_NO_CACHE);
    ck_assert_int_eq(lattice_partition_map_state(m, "orders", 0, &s), LATTICE_ERR_NO_CACHE);
    ck_assert_int_eq(state_of(m, "alpha", 0), LATTICE_PART_EVICTED);
    lattice_partition_map_destroy(m);
    lattice_partition_map_destroy(NULL);
}
END_TEST

START_TEST(update_counters_count_advance_and_reset_on_eviction)
{
    lattice_partition_map *m;
    lattice_status st;
    ck_assert_int_eq(lattice_partition_map_create(&m), LATTICE_OK);
    ck_assert_int_eq(lattice_partition_map_add_cache(m, "c", 8), LATTICE_OK);
    ck_assert_uint_eq(lattice_partition_map_next_counter(m, "c", 2, &st), 1);
    ck_assert_int_eq(st, LATTICE_OK);
    ck_assert_uint_eq(lattice_partition_map_next_counter(m, "c", 2, NULL), 2);
    ck_assert_uint_eq(lattice_partition_map_counter(m, "c", 2, &st), 2);
    ck_assert_uint_eq(lattice_partition_map_counter(m, "c", 3, &st), 0);
    /* a backup raises its counter to the primary's, never lowers it */
    ck_assert_uint_eq(lattice_partition_map_advance_counter(m, "c", 2, 10, &st), 10);
    ck_assert_uint_eq(lattice_partition_map_advance_counter(m, "c", 2, 4, &st), 10);
    ck_assert_uint_eq(lattice_partition_map_counter(m, "c", 2, &st), 10);
    /* counters are not part of the published states: changing states keeps them */
    ck_assert_int_eq(lattice_partition_map_set_state(m, "c", 2, LATTICE_PART_OWNING), LATTICE_OK);
    ck_assert_uint_eq(lattice_partition_map_counter(m, "c", 2, &st), 10);
    ck_assert_int_eq(lattice_partition_map_set_state(m, "c", 2, LATTICE_PART_RENTING), LATTICE_OK);
    ck_assert_uint_eq(lattice_partition_map_counter(m, "c", 2, &st), 10);
    ck_assert_int_eq(lattice_partition_map_set_state(m, "c", 2, LATTICE_PART_EVICTED), LATTICE_OK);
    ck_assert_uint_eq(lattice_partition_map_counter(m, "c", 2, &st), 0);
    rcu_read_lock();
    const lattice_partition_snapshot *s = lattice_partition_map_snapshot(m);
    ck_assert_uint_eq(lattice_partition_snapshot_counter(s, 0, 2), 0);
    ck_assert_uint_eq(lattice_partition_snapshot_counter(s, 0, 99), 0);
    rcu_read_unlock();
    /* bad cache / partition */
    ck_assert_uint_eq(lattice_partition_map_next_counter(m, "zz", 0, &st), 0);
    ck_assert_int_eq(st, LATTICE_ERR_NO_CACHE);
    ck_assert_uint_eq(lattice_partition_map_next_counter(m, "c", 8, &st), 0);
    ck_assert_int_eq(st, LATTICE_ERR_INVAL);
    ck_assert_uint_eq(lattice_partition_map_counter(NULL, "c", 0, &st), 0);
    ck_assert_int_eq(st, LATTICE_ERR_INVAL);
    /* a re-created cache starts from zero */
    lattice_partition_map_next_counter(m, "c", 5, &st);
    ck_assert_int_eq(lattice_partition_map_remove_cache(m, "c"), LATTICE_OK);
    ck_assert_int_eq(lattice_partition_map_add_cache(m, "c", 8), LATTICE_OK);
    ck_assert_uint_eq(lattice_partition_map_counter(m, "c", 5, &st), 0);
    lattice_partition_map_destroy(m);
}
END_TEST

START_TEST(allocation_failure_leaves_the_map_unchanged)
{
    lattice_partition_map *m;
    ck_assert_int_eq(lattice_partition_map_create(&m), LATTICE_OK);
    ck_assert_int_eq(lattice_partition_map_add_cache(m, "c", 8), LATTICE_OK);
    uint64_t v = version_of(m);
    lattice_alloc_fail_nth(1);
    ck_assert_int_eq(lattice_partition_map_set_state(m, "c", 0, LATTICE_PART_MOVING), LATTICE_ERR_NOMEM);
    lattice_alloc_fail_nth(1);
    ck_assert_int_eq(lattice_partition_map_add_cache(m, "d", 8), LATTICE_ERR_NOMEM);
    lattice_alloc_fail_nth(2);
    ck_assert_int_eq(lattice_partition_map_add_cache(m, "d", 8), LATTICE_ERR_NOMEM);
    lattice_alloc_fail_nth(1);
    ck_assert_int_eq(lattice_partition_map_remove_cache(m, "c"), LATTICE_ERR_NOMEM);
    lattice_alloc_fail_nth(0);
    ck_assert_uint_eq(version_of(m), v);
    ck_assert_int_eq(state_of(m, "c", 0), LATTICE_PART_EVICTED);
    lattice_partition_state s;
    ck_assert_int_eq(lattice_partition_map_state(m, "d", 0, &s), LATTICE_ERR_NO_CACHE);
    lattice_partition_map *m2 = NULL;
    lattice_alloc_fail_nth(1);
    ck_assert_int_eq(lattice_partition_map_create(&m2), LATTICE_ERR_NOMEM);
    lattice_alloc_fail_nth(2);
    ck_assert_int_eq(lattice_partition_map_create(&m2), LATTICE_ERR_NOMEM);
    lattice_alloc_fail_nth(0);
    ck_assert_ptr_null(m2);
    ck_assert_int_eq(lattice_partition_map_create(NULL), LATTICE_ERR_INVAL);
    lattice_partition_map_destroy(m);
}
END_TEST

/*
 * Concurrency: one writer walks every partition of a cache through
 * EVICTED -> MOVING -> OWNING -> RENTING -> EVICTED, one whole-cache batch per
 * snapshot, while two registered reader threads check, without any lock, that
 * each snapshot they see is whole (every partition in the same state), the
 * state the version implies, and that versions never go backwards; they also
 * bump update counters, which must all be counted.
 */
#define PARTS 1024
#define ROUNDS 400
#define READERS 2

static const lattice_partition_state cycle[4] = {LATTICE_PART_EVICTED, LATTICE_PART_MOVING,
                                                 LATTICE_PART_OWNING, LATTICE_PART_RENTING};

struct shared {
    lattice_partition_map *m;
    uint64_t base;      /* version right after add_cache: all EVICTED */
    int done;           /* writer finished; atomic */
    int bad;            /* readers' error count; atomic */
    uint64_t seen[READERS];
    uint64_t bumps[READERS];
};

struct reader_arg {
    struct shared *sh;
    int id;
};

static void *reader(void *p)
{
    struct reader_arg *ra = p;
    struct shared *sh = ra->sh;
    rcu_register_thread();
    uint64_t last = 0;
    for (;;) {
        int done = __atomic_load_n(&sh->done, __ATOMIC_ACQUIRE);
        rcu_read_lock();
        const lattice_partition_snapshot *s = lattice_partition_map_snapshot(sh->m);
        uint64_t v = lattice_partition_snapshot_version(s);
        int32_t ci = lattice_partition_snapshot_cache_index(s, "hot");
        lattice_partition_state want = cycle[(v - sh->base) % 4];
        int bad = v < last || ci < 0;
        for (uint32_t q = 0; !bad && q < PARTS; q++)
            bad = lattice_partition_snapshot_state(s, (uint32_t)ci, q) != want;
        rcu_read_unlock();
        if (bad) __atomic_add_fetch(&sh->bad, 1, __ATOMIC_RELAXED);
        if (v != last) sh->seen[ra->id]++;
        last = v;
        /* RENTING and EVICTED reset counters; bump a partition of another cache */
        lattice_status st;
        lattice_partition_map_next_counter(sh->m, "steady", (uint32_t)(sh->bumps[ra->id] % 8), &st);
        if (st == LATTICE_OK) sh->bumps[ra->id]++;
        if (done) break;
    }
    rcu_unregister_thread();
    return NULL;
}

START_TEST(snapshot_reads_from_threads_never_see_a_torn_map)
{
    struct shared sh = {0};
    ck_assert_int_eq(lattice_partition_map_create(&sh.m), LATTICE_OK);
    ck_assert_int_eq(lattice_partition_map_add_cache(sh.m, "steady", 8), LATTICE_OK);
    ck_assert_int_eq(lattice_partition_map_add_cache(sh.m, "hot", PARTS), LATTICE_OK);
    sh.base = version_of(sh.m);
    uint32_t *all = malloc(PARTS * sizeof *all);
    for (uint32_t q = 0; q < PARTS; q++) all[q] = q;

    pthread_t t[READERS];
    struct reader_arg ra[READERS];
    for (int i = 0; i < READERS; i++) {
        ra[i] = (struct reader_arg){&sh, i};
        ck_assert_int_eq(pthread_create(&t[i], NULL, reader, &ra[i]), 0);
    }
    /* a snapshot held across many publishes stays intact */
    rcu_read_lock();
    const lattice_partition_snapshot *held = lattice_partition_map_snapshot(sh.m);
    for (int r = 1; r <= 8; r++)
        ck_assert_int_eq(lattice_partition_map_set_states(sh.m, "hot", all, PARTS, cycle[r % 4]),
                         LATTICE_OK);
    int32_t hci = lattice_partition_snapshot_cache_index(held, "hot");
    for (uint32_t q = 0; q < PARTS; q++)
        ck_assert_int_eq(lattice_partition_snapshot_state(held, (uint32_t)hci, q), LATTICE_PART_EVICTED);
    ck_assert_uint_eq(lattice_partition_snapshot_version(held), sh.base);
    rcu_read_unlock();

    for (int r = 9; r <= ROUNDS * 4; r++)
        ck_assert_int_eq(lattice_partition_map_set_states(sh.m, "hot", all, PARTS, cycle[r % 4]),
                         LATTICE_OK);
    __atomic_store_n(&sh.done, 1, __ATOMIC_RELEASE);
    for (int i = 0; i < READERS; i++) pthread_join(t[i], NULL);

    ck_assert_int_eq(sh.bad, 0);
    uint64_t total = 0;
    for (int i = 0; i < READERS; i++) {
        ck_assert_uint_gt(sh.seen[i], 0);
        total += sh.bumps[i];
    }
    uint64_t sum = 0;
    for (uint32_t q = 0; q < 8; q++) sum += lattice_partition_map_counter(sh.m, "steady", q, NULL);
    ck_assert_uint_eq(sum, total);
    ck_assert_uint_eq(version_of(sh.m), sh.base + ROUNDS * 4);
    free(all);
    lattice_partition_map_destroy(sh.m);
}
END_TEST

TCase *partition_map_tcase(void)
{
    TCase *tc = tcase_create("map");
    tcase_set_timeout(tc, 120); /* sanitizer and valgrind runs are slow */
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, state_names_and_transitions);
    tcase_add_test(tc, caches_start_evicted_and_follow_the_lifecycle);
    tcase_add_test(tc, update_counters_count_advance_and_reset_on_eviction);
    tcase_add_test(tc, allocation_failure_leaves_the_map_unchanged);
    tcase_add_test(tc, snapshot_reads_from_threads_never_see_a_torn_map);
    return tc;
}
