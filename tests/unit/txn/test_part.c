/* The participant's state (txn/part.h) without a network: internal keys
 * land in the partition they name and parse back, users cannot write them,
 * prepared records survive their encoding and refuse damage, and the lock
 * table grants, queues and kills by wait-die, derived from the records. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "run_suite.h"
#include "lattice/alloc.h"
#include "partition/partition.h"
#include "txn/txn.h"

START_TEST(internal_keys_hash_to_their_partition)
{
    uint8_t k[LT_TXP_KEY_MAX];
    for (uint32_t parts = 1; parts <= LATTICE_PARTITION_MAX; parts *= 4)
        for (uint32_t p = 0; p < parts; p += parts > 64 ? parts / 64 + 1 : 1) {
            lt_txid id = {0x1234567890abcdefull + p, 77 + p};
            size_t n = lt_txp_key(parts, p, LT_TXP_PREPARED, id, k);
            ck_assert_uint_le(n, LT_TXP_KEY_MAX);
            ck_assert_uint_eq(lattice_partition_of_key(k, n, parts), p);
            ck_assert(lt_txp_key_reserved(k, n));
            lt_txp_kind kind;
            lt_txid back;
            ck_assert_int_eq(lt_txp_key_parse(k, n, &kind, &back), 1);
            ck_assert_int_eq(kind, LT_TXP_PREPARED);
            ck_assert(lt_txid_eq(back, id));
        }
    /* Every partition of the default count, both kinds. */
    for (uint32_t p = 0; p < 1024; p++) {
        lt_txid id = {p + 1, ~(uint64_t)p}; /* the id's bytes hold '{' and '}' too: the tag is the first pair */
        size_t n = lt_txp_key(1024, p, LT_TXP_DECISION, id, k);
        ck_assert_uint_eq(lattice_partition_of_key(k, n, 1024), p);
        lt_txp_kind kind;
        lt_txid back;
        ck_assert_int_eq(lt_txp_key_parse(k, n, &kind, &back), 1);
        ck_assert_int_eq(kind, LT_TXP_DECISION);
        ck_assert(lt_txid_eq(back, id));
    }
}
END_TEST

START_TEST(user_keys_are_not_internal)
{
    lt_txp_kind kind;
    lt_txid id;
    ck_assert(!lt_txp_key_reserved("user:1", 6));
    ck_assert(!lt_txp_key_reserved("", 0));
    ck_assert_int_eq(lt_txp_key_parse("user:1", 6, &kind, &id), 0);
    ck_assert_int_eq(lt_txp_key_parse("\xffltp{1}", 7, &kind, &id), 0); /* no id */
    uint8_t k[LT_TXP_KEY_MAX];
    size_t n = lt_txp_key(1024, 5, LT_TXP_PREPARED, (lt_txid){1, 2}, k);
    k[3] = 'x'; /* an unknown kind */
    ck_assert_int_eq(lt_txp_key_parse(k, n, &kind, &id), 0);
    ck_assert_int_eq(lt_txp_key_parse(k, n - 1, &kind, &id), 0);
}
END_TEST

static lt_txp_rec rec(uint64_t node, uint64_t seq, uint64_t stamp, const char **reads, size_t nr, const char **writes,
                      size_t nw, lt_txp_key_ref *rr, lt_txp_write *ww)
{
    for (size_t i = 0; i < nr; i++) rr[i] = (lt_txp_key_ref){reads[i], strlen(reads[i])};
    for (size_t i = 0; i < nw; i++)
        ww[i] = (lt_txp_write){writes[i], "value", strlen(writes[i]), 5, false, 0, 0};
    return (lt_txp_rec){{node, seq}, stamp, 3, 1000, nr, nw, rr, ww};
}

START_TEST(a_record_round_trips_and_refuses_damage)
{
    lt_txp_key_ref rr[2] = {{"r1", 2}, {"", 0}};
    lt_txp_write ww[3] = {{"w1", "v1", 2, 2, false, 0, 0},
                          {"w2", NULL, 2, 0, true, 0, 0},
                          {"w3", "\0bin\xff", 2, 5, false, 3, 1234567890123ull}};
    lt_txp_rec r = {{9, 10}, 11, 12, 13, 2, 3, rr, ww};
    uint8_t *buf;
    size_t len;
    ck_assert_int_eq(lt_txp_rec_encode(&r, &buf, &len), LATTICE_OK);
    lt_txp_rec d;
    ck_assert_int_eq(lt_txp_rec_decode(buf, len, &d), LATTICE_OK);
    ck_assert(lt_txid_eq(d.id, r.id));
    ck_assert_uint_eq(d.stamp, 11);
    ck_assert_uint_eq(d.home, 12);
    ck_assert_uint_eq(d.deadline_ms, 13);
    ck_assert_uint_eq(d.n_reads, 2);
    ck_assert_uint_eq(d.n_writes, 3);
    ck_assert_mem_eq(d.reads[0].key, "r1", 2);
    ck_assert_uint_eq(d.reads[1].len, 0);
    ck_assert(!d.writes[0].remove);
    ck_assert_mem_eq(d.writes[0].value, "v1", 2);
    ck_assert(d.writes[1].remove);
    ck_assert_uint_eq(d.writes[1].value_len, 0);
    ck_assert_uint_eq(d.writes[2].type, 3);
    ck_assert_uint_eq(d.writes[2].expire_ms, 1234567890123ull);
    ck_assert_mem_eq(d.writes[2].value, "\0bin\xff", 5);
    lt_txp_rec_free(&d);
    /* Every truncation, a trailing byte, another format, a count too large. */
    for (size_t cut = 0; cut < len; cut++) ck_assert_int_eq(lt_txp_rec_decode(buf, cut, &d), LATTICE_ERR_INVAL);
    uint8_t *more = malloc(len + 1);
    memcpy(more, buf, len);
    more[len] = 0;
    ck_assert_int_eq(lt_txp_rec_decode(more, len + 1, &d), LATTICE_ERR_INVAL);
    more[0] = 2;
    ck_assert_int_eq(lt_txp_rec_decode(more, len, &d), LATTICE_ERR_INVAL);
    memcpy(more, buf, len);
    memset(more + 1 + 8 + 8 + 8 + 4 + 8, 0xff, 4); /* n_reads */
    ck_assert_int_eq(lt_txp_rec_decode(more, len, &d), LATTICE_ERR_INVAL);
    free(more);
    lt_free(buf);
}
END_TEST

START_TEST(locks_follow_the_records)
{
    lt_txp_locks *t = lt_txp_locks_new();
    lt_txp_key_ref rr[4];
    lt_txp_write ww[4];
    const char *r1[] = {"a"}, *w1[] = {"b", "c"};
    lt_txp_rec x = rec(1, 1, 100, r1, 1, w1, 2, rr, ww);
    ck_assert_int_eq(lt_txp_locks_add(t, &x), LATTICE_OK);
    ck_assert_int_eq(lt_txp_locks_add(t, &x), LATTICE_OK); /* once: applied twice (a replay) */
    ck_assert_uint_eq(lt_txp_locks_count(t), 1);
    lt_txid who;
    uint64_t stamp;
    /* A read of a read-locked key is free; a write of it waits; anything on a written key waits. */
    ck_assert_uint_eq(lt_txp_locks_holders(t, "a", 1, false, &who, &stamp), 0);
    ck_assert_uint_eq(lt_txp_locks_holders(t, "a", 1, true, &who, &stamp), 1);
    ck_assert(lt_txid_eq(who, x.id));
    ck_assert_uint_eq(stamp, 100);
    ck_assert_uint_eq(lt_txp_locks_holders(t, "b", 1, false, &who, &stamp), 1);
    ck_assert_uint_eq(lt_txp_locks_holders(t, "c", 1, true, NULL, NULL), 1);
    ck_assert_uint_eq(lt_txp_locks_holders(t, "d", 1, true, NULL, NULL), 0);
    /* A second reader of "a" shares it. */
    lt_txp_key_ref rr2[1];
    lt_txp_write ww2[1];
    lt_txp_rec y = rec(2, 1, 200, r1, 1, NULL, 0, rr2, ww2);
    ck_assert_int_eq(lt_txp_locks_verdict(t, &y), LT_TXP_GRANT);
    ck_assert_int_eq(lt_txp_locks_add(t, &y), LATTICE_OK);
    ck_assert_uint_eq(lt_txp_locks_holders(t, "a", 1, true, &who, &stamp), 2);
    ck_assert(lt_txid_eq(who, x.id)); /* the older of the two */
    /* Released: x's keys go, y's read of "a" stays. */
    ck_assert(lt_txp_locks_release(t, x.id));
    ck_assert(!lt_txp_locks_release(t, x.id));
    ck_assert_uint_eq(lt_txp_locks_holders(t, "b", 1, true, NULL, NULL), 0);
    ck_assert_uint_eq(lt_txp_locks_holders(t, "a", 1, true, &who, NULL), 1);
    ck_assert(lt_txid_eq(who, y.id));
    ck_assert(lt_txp_locks_release(t, y.id));
    ck_assert_uint_eq(lt_txp_locks_count(t), 0);
    ck_assert_uint_eq(lt_txp_locks_holders(t, "a", 1, true, NULL, NULL), 0);
    lt_txp_locks_free(t);
}
END_TEST

START_TEST(wait_die)
{
    lt_txp_locks *t = lt_txp_locks_new();
    lt_txp_key_ref rr[2], rq[2];
    lt_txp_write ww[2], wq[2];
    const char *k[] = {"k"}, *other[] = {"z"};
    lt_txp_rec mid = rec(5, 5, 500, NULL, 0, k, 1, rr, ww); /* writes k */
    ck_assert_int_eq(lt_txp_locks_add(t, &mid), LATTICE_OK);
    /* Older than the holder: waits.  Younger: dies.  Its own locks never count. */
    lt_txp_rec q = rec(6, 1, 400, k, 1, NULL, 0, rq, wq);
    ck_assert_int_eq(lt_txp_locks_verdict(t, &q), LT_TXP_WAIT);
    q = rec(6, 2, 600, k, 1, NULL, 0, rq, wq);
    ck_assert_int_eq(lt_txp_locks_verdict(t, &q), LT_TXP_DIE);
    q = rec(6, 3, 600, NULL, 0, k, 1, rq, wq);
    ck_assert_int_eq(lt_txp_locks_verdict(t, &q), LT_TXP_DIE);
    ck_assert_int_eq(lt_txp_locks_verdict(t, &mid), LT_TXP_GRANT);
    q = rec(6, 4, 600, other, 1, other, 1, rq, wq);
    ck_assert_int_eq(lt_txp_locks_verdict(t, &q), LT_TXP_GRANT);
    /* Equal stamps: the ids order them, so exactly one of two waits. */
    lt_txp_rec a = rec(7, 1, 500, k, 1, NULL, 0, rq, wq);
    ck_assert_int_eq(lt_txp_locks_verdict(t, &a), LT_TXP_DIE); /* node 7 after node 5: younger */
    a = rec(3, 1, 500, k, 1, NULL, 0, rq, wq);
    ck_assert_int_eq(lt_txp_locks_verdict(t, &a), LT_TXP_WAIT); /* node 3: older */
    lt_txp_locks_free(t);
}
END_TEST

static void count_each(void *arg, const lt_txp_held *h)
{
    uint64_t *sum = arg;
    *sum += h->deadline_ms;
}

START_TEST(many_transactions_and_keys)
{
    lt_txp_locks *t = lt_txp_locks_new();
    enum { N = 2000 };
    static char keys[N][16];
    for (int i = 0; i < N; i++) snprintf(keys[i], sizeof keys[i], "key:%d", i);
    for (int i = 0; i < N; i++) {
        lt_txp_write w = {keys[i], "v", strlen(keys[i]), 1, false, 0, 0};
        lt_txp_key_ref r = {keys[(i + 1) % N], strlen(keys[(i + 1) % N])};
        lt_txp_rec x = {{1, (uint64_t)i + 1}, (uint64_t)i, 0, (uint64_t)i, 1, 1, &r, &w};
        ck_assert_int_eq(lt_txp_locks_add(t, &x), LATTICE_OK);
    }
    ck_assert_uint_eq(lt_txp_locks_count(t), N);
    uint64_t sum = 0;
    lt_txp_locks_each(t, count_each, &sum);
    ck_assert_uint_eq(sum, (uint64_t)N * (N - 1) / 2);
    for (int i = 0; i < N; i += 2) ck_assert(lt_txp_locks_release(t, (lt_txid){1, (uint64_t)i + 1}));
    ck_assert_uint_eq(lt_txp_locks_count(t), N / 2);
    for (int i = 0; i < N; i++) {
        /* key i: written by i (odd i live), read by i - 1 (odd i - 1 live). */
        size_t want = (size_t)(i % 2) + (size_t)(((i + N - 1) % N) % 2);
        ck_assert_msg(lt_txp_locks_holders(t, keys[i], strlen(keys[i]), true, NULL, NULL) == want, "key %d", i);
    }
    lt_txp_locks_free(t);
}
END_TEST

START_TEST(no_memory_leaves_the_table_as_it_was)
{
    lt_txp_locks *t = lt_txp_locks_new();
    lt_txp_key_ref rr[3];
    lt_txp_write ww[3];
    const char *r1[] = {"a", "b", "c"}, *w1[] = {"d", "e", "f"};
    lt_txp_rec x = rec(1, 1, 1, r1, 3, w1, 3, rr, ww);
    for (uint64_t nth = 1; nth < 40; nth++) {
        lattice_alloc_fail_nth(nth);
        lattice_status st = lt_txp_locks_add(t, &x);
        lattice_alloc_fail_nth(0);
        if (st == LATTICE_OK) {
            ck_assert_uint_eq(lt_txp_locks_count(t), 1);
            ck_assert(lt_txp_locks_release(t, x.id));
        }
        ck_assert_uint_eq(lt_txp_locks_count(t), 0);
        for (int i = 0; i < 3; i++) {
            ck_assert_uint_eq(lt_txp_locks_holders(t, r1[i], 1, true, NULL, NULL), 0);
            ck_assert_uint_eq(lt_txp_locks_holders(t, w1[i], 1, true, NULL, NULL), 0);
        }
    }
    lt_txp_locks_free(t);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("txn_part");
    TCase *tc = tcase_create("part");
    tcase_add_test(tc, internal_keys_hash_to_their_partition);
    tcase_add_test(tc, user_keys_are_not_internal);
    tcase_add_test(tc, a_record_round_trips_and_refuses_damage);
    tcase_add_test(tc, locks_follow_the_records);
    tcase_add_test(tc, wait_die);
    tcase_add_test(tc, many_transactions_and_keys);
    tcase_add_test(tc, no_memory_leaves_the_table_as_it_was);
    suite_add_tcase(s, tc);
    return lt_run_suite(s);
}
