/* The per-partition update history (delta rebalance): what it records, its
 * bounds in records and bytes, the ring's wrap, and the decision it gives a
 * supplier - every change above a mark is known, or a full copy is needed. */
#include <malloc.h>

#include "run_suite.h"
#include "helpers.h"
#include "history.h"

struct seen {
    uint64_t counters[4096];
    char keys[4096][32];
    bool removed[4096];
    size_t n;
};

static int collect(void *arg, const void *key, size_t key_len, uint64_t counter, bool removed)
{
    struct seen *s = arg;
    ck_assert_uint_lt(s->n, 4096);
    ck_assert_uint_lt(key_len, 32);
    memcpy(s->keys[s->n], key, key_len);
    s->keys[s->n][key_len] = 0;
    s->counters[s->n] = counter;
    s->removed[s->n++] = removed;
    return 0;
}

static void put(lattice_store *st, uint32_t p, uint64_t id, uint64_t version)
{
    char k[32];
    int kl = key_of(k, sizeof k, id);
    lattice_store_entry e = {p, k, (size_t)kl, "v", 1, 0, version, 0};
    ck_assert_int_eq(lattice_store_put(st, &e, 0), LATTICE_OK);
}

static void rm(lattice_store *st, uint32_t p, uint64_t id, uint64_t version)
{
    char k[32];
    int kl = key_of(k, sizeof k, id);
    ck_assert_int_eq(lattice_store_remove_v(st, p, k, (size_t)kl, version), LATTICE_OK);
}

START_TEST(records_puts_and_removes_with_their_counters)
{
    lattice_region *r = new_region(4096, 8, LATTICE_REGION_REJECT);
    lattice_store *st = new_store(r, 4, NULL);
    for (uint64_t i = 1; i <= 10; i++) put(st, 1, i, i);
    rm(st, 1, 3, 11);
    put(st, 2, 99, 5); /* another partition: not in 1's history */
    struct seen s = {0};
    ck_assert_int_eq(lattice_store_history_above(st, 1, 8, false, collect, &s), LATTICE_OK);
    ck_assert_uint_eq(s.n, 3);
    ck_assert_uint_eq(s.counters[0], 9);
    ck_assert_str_eq(s.keys[0], "key:00000009");
    ck_assert_uint_eq(s.counters[2], 11);
    ck_assert(s.removed[2]);
    ck_assert_str_eq(s.keys[2], "key:00000003");
    /* Not declared complete: a supplier may not use it. */
    ck_assert_int_eq(lattice_store_history_above(st, 1, 8, true, NULL, NULL), LATTICE_ERR_NOT_FOUND);
    lattice_store_history_valid_from(st, 1, 0);
    ck_assert_int_eq(lattice_store_history_above(st, 1, 8, true, NULL, NULL), LATTICE_OK);
    lattice_store_history_valid_from(st, 1, 9); /* complete only from 9 (a full load at 9) */
    ck_assert_int_eq(lattice_store_history_above(st, 1, 8, true, NULL, NULL), LATTICE_ERR_NOT_FOUND);
    ck_assert_int_eq(lattice_store_history_above(st, 1, 9, true, NULL, NULL), LATTICE_OK);
    /* The change hook's REMOVE sees the counter too (the log's record). */
    lattice_store_destroy(st);
    lattice_region_destroy(r);
}
END_TEST

START_TEST(bound_in_records_drops_oldest_and_raises_the_floor)
{
    lattice_region *r = new_region(4096, 8, LATTICE_REGION_REJECT);
    lattice_store *st = new_store(r, 1, NULL);
    lattice_store_history_configure(st, 100, 1u << 20);
    lattice_store_history_valid_from(st, 0, 0);
    for (uint64_t i = 1; i <= 1000; i++) put(st, 0, i % 37, i); /* wraps the ring many times */
    lattice_store_history_stat hs;
    lattice_store_history_info(st, 0, &hs);
    ck_assert_uint_eq(hs.records, 100);
    ck_assert_uint_eq(hs.dropped, 900);
    /* The fallback decision: a gap older than the history needs a full copy. */
    ck_assert_int_eq(lattice_store_history_above(st, 0, 899, true, NULL, NULL), LATTICE_ERR_NOT_FOUND);
    struct seen s = {0};
    ck_assert_int_eq(lattice_store_history_above(st, 0, 900, true, collect, &s), LATTICE_OK);
    ck_assert_uint_eq(s.n, 100);
    for (size_t i = 0; i < s.n; i++) ck_assert_uint_eq(s.counters[i], 901 + i); /* oldest first, none lost */
    memset(&s, 0, sizeof s);
    ck_assert_int_eq(lattice_store_history_above(st, 0, 990, true, collect, &s), LATTICE_OK);
    ck_assert_uint_eq(s.n, 10);
    ck_assert_uint_eq(s.counters[0], 991);
    lattice_store_destroy(st);
    lattice_region_destroy(r);
}
END_TEST

/* Keys on both sides of the record's inline room (24 bytes) come back as
 * written, through the ring's wrap, and a long key costs its bytes against
 * the bound where a short one costs only its slot. */
START_TEST(short_and_long_keys_come_back_through_the_wrap)
{
    lattice_region *r = new_region(4096, 8, LATTICE_REGION_REJECT);
    lattice_store *st = new_store(r, 1, NULL);
    lattice_store_history_configure(st, 8, 1u << 20);
    size_t lens[] = {1, 23, 24, 25, 31};
    for (uint64_t i = 1; i <= 20; i++) {
        char k[32];
        size_t kl = lens[i % 5];
        for (size_t j = 0; j < kl; j++) k[j] = (char)('a' + (i + j) % 26);
        lattice_store_entry e = {0, k, kl, "v", 1, 0, i, 0};
        ck_assert_int_eq(lattice_store_put(st, &e, 0), LATTICE_OK);
    }
    struct seen s = {0};
    ck_assert_int_eq(lattice_store_history_above(st, 0, 12, false, collect, &s), LATTICE_OK);
    ck_assert_uint_eq(s.n, 8); /* 13..20: the 8 the ring holds */
    for (size_t n = 0; n < s.n; n++) {
        uint64_t i = 13 + n;
        ck_assert_uint_eq(s.counters[n], i);
        size_t kl = lens[i % 5];
        ck_assert_uint_eq(strlen(s.keys[n]), kl);
        for (size_t j = 0; j < kl; j++) ck_assert_int_eq(s.keys[n][j], 'a' + (i + j) % 26);
    }
    lattice_store_history_stat hs;
    lattice_store_history_info(st, 0, &hs);
    /* Of 13..20, four have keys over 24 bytes: 13 and 18 (25 bytes), 14 and 19 (31). */
    ck_assert_uint_eq(hs.bytes, 8 * 40 + 25 + 31 + 25 + 31);
    lattice_store_destroy(st);
    lattice_region_destroy(r);
}
END_TEST

START_TEST(bound_in_bytes)
{
    lattice_region *r = new_region(4096, 8, LATTICE_REGION_REJECT);
    lattice_store *st = new_store(r, 1, NULL);
    /* key:NNNNNNNN is 12 bytes, held in the record's 40-byte slot: 10
     * records fit 400 bytes. */
    lattice_store_history_configure(st, 1000, 400);
    for (uint64_t i = 1; i <= 50; i++) put(st, 0, i, i);
    lattice_store_history_stat hs;
    lattice_store_history_info(st, 0, &hs);
    ck_assert_uint_eq(hs.records, 10);
    ck_assert_uint_le(hs.bytes, 400);
    ck_assert_uint_eq(hs.dropped, 40);
    ck_assert_int_eq(lattice_store_history_above(st, 0, 39, false, NULL, NULL), LATTICE_ERR_NOT_FOUND);
    ck_assert_int_eq(lattice_store_history_above(st, 0, 40, false, NULL, NULL), LATTICE_OK);
    lattice_store_destroy(st);
    lattice_region_destroy(r);
}
END_TEST

START_TEST(unknown_counter_and_clear)
{
    lattice_region *r = new_region(4096, 8, LATTICE_REGION_REJECT);
    lattice_store *st = new_store(r, 2, NULL);
    lattice_store_history_valid_from(st, 0, 0);
    put(st, 0, 1, 1);
    put(st, 0, 2, 2);
    char k[32];
    int kl = key_of(k, sizeof k, 1);
    /* A remove that does not say its counter: nothing above anything is known. */
    ck_assert_int_eq(lattice_store_remove(st, 0, k, (size_t)kl), LATTICE_OK);
    ck_assert_int_eq(lattice_store_history_above(st, 0, 0, false, NULL, NULL), LATTICE_ERR_NOT_FOUND);
    put(st, 0, 3, 3);
    lattice_store_history_valid_from(st, 0, 3);
    ck_assert_int_eq(lattice_store_history_above(st, 0, 100, true, NULL, NULL), LATTICE_ERR_NOT_FOUND);
    /* A clear starts over: empty, recorded from here, not complete until declared. */
    ck_assert_int_eq(lattice_store_clear(st, 0), LATTICE_OK);
    ck_assert_int_eq(lattice_store_history_above(st, 0, 0, false, NULL, NULL), LATTICE_OK);
    ck_assert_int_eq(lattice_store_history_above(st, 0, 0, true, NULL, NULL), LATTICE_ERR_NOT_FOUND);
    put(st, 0, 4, 7);
    struct seen s = {0};
    ck_assert_int_eq(lattice_store_history_above(st, 0, 0, false, collect, &s), LATTICE_OK);
    ck_assert_uint_eq(s.n, 1);
    ck_assert_uint_eq(s.counters[0], 7);
    /* History off: every change loses it. */
    lattice_store_history_configure(st, 0, 0);
    put(st, 1, 5, 1);
    ck_assert_int_eq(lattice_store_history_above(st, 1, 0, false, NULL, NULL), LATTICE_ERR_NOT_FOUND);
    lattice_store_destroy(st);
    lattice_region_destroy(r);
}
END_TEST

START_TEST(insert_batch_is_recorded)
{
    lattice_region *r = new_region(4096, 8, LATTICE_REGION_REJECT);
    lattice_store *st = new_store(r, 1, NULL);
    lattice_store_entry e[20];
    char k[20][32];
    for (int i = 0; i < 20; i++) {
        int kl = key_of(k[i], sizeof k[i], (uint64_t)i);
        e[i] = (lattice_store_entry){0, k[i], (size_t)kl, "x", 1, 0, (uint64_t)(100 + i), 0};
    }
    size_t applied = 0;
    ck_assert_int_eq(lattice_store_insert_batch(st, 0, e, 20, LATTICE_STORE_IF_NEWER, &applied), LATTICE_OK);
    ck_assert_uint_eq(applied, 20);
    struct seen s = {0};
    ck_assert_int_eq(lattice_store_history_above(st, 0, 109, false, collect, &s), LATTICE_OK);
    ck_assert_uint_eq(s.n, 10);
    lattice_store_destroy(st);
    lattice_region_destroy(r);
}
END_TEST

/* contig, the counter up to which a copy applied every write (the cap of a
 * delta mark): a gap stops it until the missing counter comes; counters
 * out of order are taken in once the gap closes; one far ahead of it (past
 * the 64-counter window) does not move it; a load's valid_from starts it at
 * the load's counter and takes in what arrived during the load. */
static uint64_t contig_of(lattice_store *st, uint32_t p)
{
    lattice_store_history_stat hs;
    lattice_store_history_info(st, p, &hs);
    ck_assert(hs.valid);
    return hs.contig;
}

START_TEST(contig_stops_at_a_gap)
{
    lattice_region *r = new_region(4096, 8, LATTICE_REGION_REJECT);
    lattice_store *st = new_store(r, 2, NULL);
    lattice_store_history_valid_from(st, 0, 0);
    put(st, 0, 1, 1);
    put(st, 0, 2, 2);
    put(st, 0, 4, 4); /* 3 never came (yet) */
    ck_assert_uint_eq(contig_of(st, 0), 2);
    put(st, 0, 3, 3);
    ck_assert_uint_eq(contig_of(st, 0), 4);
    rm(st, 0, 1, 5);
    lattice_store_history_note(st, 0, "gone", 4, 6, true); /* a remove of a key absent here */
    ck_assert_uint_eq(contig_of(st, 0), 6);
    put(st, 0, 9, 100); /* far ahead: a gap below it */
    ck_assert_uint_eq(contig_of(st, 0), 6);
    /* A load at 50 on partition 1, with writes 52, 51 and 60 arriving
     * while it ran (recorded before it was declared complete). */
    put(st, 1, 1, 52);
    put(st, 1, 2, 51);
    put(st, 1, 3, 60);
    put(st, 1, 4, 7); /* a loaded entry: below the load's counter */
    lattice_store_history_valid_from(st, 1, 50);
    ck_assert_uint_eq(contig_of(st, 1), 52);
    lattice_store_destroy(st);
    lattice_region_destroy(r);
}
END_TEST

/* A ring takes all its slots at its first record - as many as both bounds
 * allow - so its memory stays flat while it fills (no regrowth per write
 * burst after a restart); raised bounds grow it once more. */
START_TEST(ring_takes_its_slots_at_the_first_record)
{
    lt_hist h;
    lt_hist_init(&h);
    ck_assert_uint_eq(h.cap, 0);
    lt_hist_note(&h, 1024, 65536, 1, "k1", 2, false);
    ck_assert_uint_eq(h.cap, 1024); /* 1024 records of 40 B fit 64 KiB */
    hist_rec *ring = h.ring;
    for (uint64_t c = 2; c <= 3000; c++) lt_hist_note(&h, 1024, 65536, c, "k", 1, false);
    ck_assert_ptr_eq(h.ring, ring); /* never moved */
    ck_assert_uint_eq(h.n, 1024);
    lt_hist_free(&h);
    lt_hist_note(&h, 1024, 4000, 1, "k1", 2, false); /* the bytes bound binds: 100 slots */
    ck_assert_uint_eq(h.cap, 4000 / sizeof(hist_rec));
    for (uint64_t c = 2; c <= 200; c++) lt_hist_note(&h, 1024, 4000, c, "k", 1, false);
    ck_assert_uint_eq(h.n, 4000 / sizeof(hist_rec));
    for (uint64_t c = 201; c <= 400; c++) lt_hist_note(&h, 1024, 65536, c, "k", 1, false); /* raised */
    ck_assert_uint_eq(h.n, 300); /* the 100 kept, and 200 more */
    ck_assert_uint_ge(h.cap, 300);
    ck_assert_uint_le(h.cap, 1024);
    lt_hist_free(&h);
}
END_TEST

/* Rings are pages of their own, not heap: 256 partitions' rings, taken and
 * freed as partitions come and go, leave no holes in malloc's heap, and the
 * heap does not hold them while they live. */
START_TEST(rings_are_not_heap)
{
    enum { N = 256 };
    static lt_hist hs[N];
    struct mallinfo2 before = mallinfo2();
    for (int i = 0; i < N; i++) {
        lt_hist_init(&hs[i]);
        lt_hist_note(&hs[i], 1024, 65536, 1, "k1", 2, false);
        ck_assert_uint_eq(hs[i].cap, 1024);
        ck_assert_uint_eq((uintptr_t)hs[i].ring % 4096, 0); /* page-aligned: mapped */
    }
    struct mallinfo2 held = mallinfo2();
    size_t rings = (size_t)N * 1024 * sizeof(hist_rec); /* 10 MiB */
    size_t grew = (held.uordblks + held.hblkhd) - (before.uordblks + before.hblkhd);
    ck_assert_uint_lt(grew, rings / 16);
    for (int i = 0; i < N; i++) {
        for (uint64_t c = 2; c <= 1100; c++) lt_hist_note(&hs[i], 1024, 65536, c, "k", 1, false);
        ck_assert_uint_eq(hs[i].n, 1024);
        lt_hist_free(&hs[i]);
    }
}
END_TEST

static void setup(void) { rcu_register_thread(); }
static void teardown(void) { rcu_unregister_thread(); }

int main(void)
{
    Suite *s = suite_create("storage_history");
    TCase *tc = tcase_create("history");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, records_puts_and_removes_with_their_counters);
    tcase_add_test(tc, bound_in_records_drops_oldest_and_raises_the_floor);
    tcase_add_test(tc, bound_in_bytes);
    tcase_add_test(tc, ring_takes_its_slots_at_the_first_record);
    tcase_add_test(tc, rings_are_not_heap);
    tcase_add_test(tc, short_and_long_keys_come_back_through_the_wrap);
    tcase_add_test(tc, unknown_counter_and_clear);
    tcase_add_test(tc, insert_batch_is_recorded);
    tcase_add_test(tc, contig_stops_at_a_gap);
    suite_add_tcase(s, tc);
    return lt_run_suite(s);
}
