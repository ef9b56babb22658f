/*
 * The list-append transaction checker on histories whose verdict is known:
 * one hand-written history per anomaly kind (and the concurrent cases that
 * are no anomaly), unknown outcomes, the file format, and a randomized
 * self-test (histories of a serial execution with random overlaps pass; one
 * read made stale fails).
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "run_suite.h"
#include "txn.h"

static tx_history h;
static tx_report rep;

static void setup(void) { tx_init(&h); }
static void teardown(void) { tx_free(&h); }

/* Micro-operations as text: "a K V", "r K -", "r K 1,2,3", "r K ?", separated
 * by ';' (the file form's syntax). */
static void txn(int client, int64_t inv_ms, int64_t cmp_ms, fh_outcome oc, const char *mops)
{
    tx_begin(&h, client, client % 3, inv_ms * 1000000);
    char *copy = strdup(mops), *save = NULL;
    for (char *m = strtok_r(copy, ";", &save); m; m = strtok_r(NULL, ";", &save)) {
        char kind;
        unsigned key;
        int off = 0;
        ck_assert_int_eq(sscanf(m, " %c %u %n", &kind, &key, &off), 2);
        const char *rest = m + off;
        if (kind == 'a') {
            tx_append(&h, key, strtoll(rest, NULL, 10));
        } else if (!strcmp(rest, "?")) {
            tx_read_unknown(&h, key);
        } else {
            int64_t list[64];
            size_t n = 0;
            for (const char *p = rest; strcmp(rest, "-") && *p;) {
                char *end;
                list[n++] = strtoll(p, &end, 10);
                p = *end == ',' ? end + 1 : end;
            }
            tx_read(&h, key, list, n);
        }
    }
    free(copy);
    tx_end(&h, oc, cmp_ms * 1000000);
}

#define OK(c, a, b, m) txn(c, a, b, FH_OK, m)

/* Checks h, with its report on stderr; the anomalies found. */
static size_t check(void)
{
    bool valid = tx_check(&h, stderr, &rep);
    ck_assert_int_eq(valid, rep.anomalies == 0);
    return rep.anomalies;
}

static void expect_only(tx_anomaly a)
{
    ck_assert_uint_gt(check(), 0);
    for (int k = 0; k < TXA_KINDS_; k++)
        ck_assert_msg(k == (int)a || rep.found[k] == 0, "expected only %s, found %zu %s", tx_anomaly_name(a),
                      rep.found[k], tx_anomaly_name(k));
    ck_assert_uint_gt(rep.found[a], 0);
}

START_TEST(serial_history_is_valid)
{
    OK(0, 0, 1, "a 1 1");
    OK(1, 2, 3, "r 1 1;a 2 1");
    OK(2, 4, 5, "r 1 1;r 2 1;a 1 2");
    OK(0, 6, 7, "r 1 1,2;r 2 1");
    ck_assert_uint_eq(check(), 0);
    ck_assert_uint_eq(rep.ok, 4);
    ck_assert_uint_eq(rep.keys, 2);
    ck_assert_uint_gt(rep.edges, 3);
}
END_TEST

START_TEST(concurrent_transactions_may_order_either_way)
{
    /* T1 and T2 overlap: a read inside both may see neither, one, or both,
     * as long as everyone agrees on one order. */
    OK(0, 0, 10, "a 1 1");
    OK(1, 0, 10, "a 1 2");
    OK(2, 5, 6, "r 1 -");
    OK(3, 5, 11, "r 1 2");
    OK(2, 12, 13, "r 1 2,1");
    ck_assert_uint_eq(check(), 0);
}
END_TEST

START_TEST(dirty_write_cycle_is_g0)
{
    /* T0 wrote before T1 on key 1, after it on key 2 */
    OK(0, 0, 10, "a 1 1;a 2 1");
    OK(1, 0, 10, "a 1 2;a 2 2");
    OK(2, 20, 21, "r 1 1,2;r 2 2,1");
    expect_only(TXA_G0);
}
END_TEST

START_TEST(read_of_a_failed_append_is_g1a)
{
    txn(0, 0, 1, FH_FAIL, "a 1 1");
    OK(1, 2, 3, "r 1 1");
    expect_only(TXA_G1A);
}
END_TEST

START_TEST(read_of_an_intermediate_append_is_g1b)
{
    OK(0, 0, 10, "a 1 1;a 1 2");
    OK(1, 5, 6, "r 1 1");
    expect_only(TXA_G1B);
}
END_TEST

START_TEST(circular_information_flow_is_g1c)
{
    /* each read the other's append: impossible in any order */
    OK(0, 0, 10, "a 1 1;r 2 2");
    OK(1, 0, 10, "a 2 2;r 1 1");
    expect_only(TXA_G1C);
}
END_TEST

START_TEST(read_skew_is_g_single)
{
    /* T1 sees T0's y but not its x */
    OK(0, 0, 10, "a 1 1;a 2 1");
    OK(1, 0, 10, "r 1 -;r 2 1");
    OK(2, 20, 21, "r 1 1");
    expect_only(TXA_G_SINGLE);
}
END_TEST

START_TEST(write_skew_is_g2)
{
    /* each read the key the other wrote before the other wrote it */
    OK(0, 0, 10, "r 1 -;a 2 1");
    OK(1, 0, 10, "r 2 -;a 1 1");
    OK(2, 20, 21, "r 1 1;r 2 1");
    expect_only(TXA_G2);
}
END_TEST

START_TEST(stale_read_is_g_single_realtime)
{
    /* serializable (T1 before T0) but T1 began after T0's commit */
    OK(0, 0, 1, "a 1 1");
    OK(1, 2, 3, "r 1 -");
    OK(2, 4, 5, "r 1 1");
    expect_only(TXA_G_SINGLE_RT);
}
END_TEST

START_TEST(acknowledged_append_nobody_reads_is_lost)
{
    OK(0, 0, 1, "a 1 1");
    OK(1, 0, 1, "a 1 2");
    OK(2, 5, 6, "r 1 2");
    expect_only(TXA_LOST);
    tx_free(&h);
    /* no read began after it: it may still be unseen */
    OK(0, 0, 10, "a 1 1");
    OK(1, 5, 6, "r 1 -");
    ck_assert_uint_eq(check(), 0);
}
END_TEST

START_TEST(reads_that_disagree_are_incompatible)
{
    OK(0, 0, 1, "a 1 1");
    OK(1, 0, 1, "a 1 2");
    OK(2, 5, 6, "r 1 1,2");
    OK(3, 5, 6, "r 1 2,1");
    ck_assert_uint_gt(check(), 0);
    ck_assert_uint_gt(rep.found[TXA_INCOMPATIBLE], 0);
}
END_TEST

START_TEST(duplicates_and_garbage)
{
    OK(0, 0, 1, "a 1 1");
    OK(1, 2, 3, "r 1 1,1");
    ck_assert_uint_gt(check(), 0);
    ck_assert_uint_gt(rep.found[TXA_DUPLICATE], 0);
    tx_free(&h);
    OK(0, 0, 1, "a 1 1");
    OK(1, 2, 3, "r 1 1,7");
    ck_assert_uint_gt(check(), 0);
    ck_assert_uint_gt(rep.found[TXA_GARBAGE], 0);
}
END_TEST

START_TEST(own_writes_must_be_visible)
{
    OK(0, 0, 1, "a 1 1;r 1 1;a 1 2;r 1 1,2");
    OK(1, 2, 3, "r 1 1,2");
    ck_assert_uint_eq(check(), 0);
    tx_free(&h);
    OK(0, 0, 1, "a 1 1;r 1 -");
    expect_only(TXA_INTERNAL);
}
END_TEST

START_TEST(unknown_outcomes)
{
    /* an unknown append may have landed (someone read it) or not */
    txn(0, 0, 0, FH_UNKNOWN, "a 1 1;r 2 ?");
    txn(1, 0, 0, FH_UNKNOWN, "a 1 2");
    OK(2, 10, 11, "r 1 1");
    OK(3, 12, 13, "a 1 3");
    OK(2, 14, 15, "r 1 1,3");
    ck_assert_uint_eq(check(), 0);
    ck_assert_uint_eq(rep.unknown, 2);
    /* but once read it has a place, and a later read must keep it */
    OK(3, 16, 17, "r 1 1");
    ck_assert_uint_gt(check(), 0);
}
END_TEST

START_TEST(appending_a_value_twice_is_malformed)
{
    OK(0, 0, 1, "a 1 1");
    OK(1, 2, 3, "a 1 1");
    ck_assert(!tx_check(&h, NULL, &rep));
}
END_TEST

START_TEST(file_round_trip)
{
    OK(0, 0, 1, "a 1 1;a 2 5");
    txn(1, 2, 0, FH_UNKNOWN, "a 1 2;r 3 ?");
    txn(2, 2, 4, FH_FAIL, "r 3 ?");
    OK(3, 5, 6, "r 1 1,2;r 3 -;r 2 5");
    char path[] = "/tmp/check_txn.XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    ck_assert(tx_save(&h, path, "a comment"));
    tx_history back;
    tx_init(&back);
    ck_assert(tx_load(&back, path));
    ck_assert_uint_eq(back.n, h.n);
    ck_assert_uint_eq(back.nmops, h.nmops);
    ck_assert_uint_eq(back.nelems, h.nelems);
    ck_assert_mem_eq(back.elems, h.elems, h.nelems * sizeof(int64_t));
    for (size_t i = 0; i < h.n; i++) {
        ck_assert_int_eq(back.ops[i].invoke, h.ops[i].invoke);
        ck_assert_int_eq(back.ops[i].complete, h.ops[i].complete);
        ck_assert_int_eq(back.ops[i].outcome, h.ops[i].outcome);
        ck_assert_int_eq(back.ops[i].client, h.ops[i].client);
    }
    for (size_t i = 0; i < h.nmops; i++) {
        ck_assert_int_eq(back.mops[i].kind, h.mops[i].kind);
        ck_assert_uint_eq(back.mops[i].key, h.mops[i].key);
        ck_assert_int_eq(back.mops[i].known, h.mops[i].known);
        if (h.mops[i].kind == TX_APPEND) ck_assert_int_eq(back.mops[i].value, h.mops[i].value);
        else ck_assert_uint_eq(back.mops[i].n, h.mops[i].n);
    }
    tx_free(&back);
    FILE *f = fopen(path, "a");
    fputs("0 0 1 2 ok a 1\n", f);
    fclose(f);
    tx_init(&back);
    ck_assert(!tx_load(&back, path));
    tx_free(&back);
    unlink(path);
}
END_TEST

/* A serial execution over 6 keys: transaction i takes effect at 10*i ms and
 * its interval stretches randomly around that instant, so concurrent ones
 * overlap; the history is strictly serializable by construction. */
#define RKEYS 6
#define RTXNS 3000
static void random_history(unsigned seed)
{
    srand(seed);
    int64_t state[RKEYS][RTXNS];
    size_t len[RKEYS] = {0};
    int64_t next = 1;
    for (int i = 0; i < RTXNS; i++) {
        int64_t at = 10 * (int64_t)i * 1000000;
        int64_t inv = at - rand() % 40000000, cmp = at + rand() % 40000000;
        int unknown = rand() % 50 == 0, failed = !unknown && rand() % 50 == 0;
        tx_begin(&h, i % 8, i % 3, inv);
        for (int m = 1 + rand() % 4; m-- > 0;) {
            int k = rand() % RKEYS;
            if (rand() % 2) {
                int64_t v = next++;
                tx_append(&h, (uint32_t)k, v);
                if (!failed) state[k][len[k]++] = v;
            } else if (unknown || failed) {
                tx_read_unknown(&h, (uint32_t)k);
            } else {
                tx_read(&h, (uint32_t)k, state[k], len[k]);
            }
        }
        tx_end(&h, unknown ? FH_UNKNOWN : failed ? FH_FAIL : FH_OK, cmp);
    }
    /* a final read of every key */
    tx_begin(&h, 9, 0, 10 * (int64_t)RTXNS * 1000000 + 50000000);
    for (int k = 0; k < RKEYS; k++) tx_read(&h, (uint32_t)k, state[k], len[k]);
    tx_end(&h, FH_OK, 10 * (int64_t)RTXNS * 1000000 + 60000000);
}

START_TEST(random_histories_pass_and_stale_mutants_fail)
{
    random_history(1000 + (unsigned)_i);
    ck_assert_uint_eq(check(), 0);
    ck_assert_uint_gt(rep.edges, RTXNS);
    /* Make one read stale: drop the last element of a read whose writer
     * had completed before the read began. */
    bool mutated = false;
    for (size_t t = h.n / 2; t < h.n - 1 && !mutated; t++) {
        const tx_op *o = &h.ops[t];
        if (o->outcome != FH_OK) continue;
        for (size_t j = 0; j < o->nmops && !mutated; j++) {
            tx_mop *m = &h.mops[o->mop0 + j];
            if (m->kind != TX_READ || m->n == 0) continue;
            int64_t last = h.elems[m->list0 + m->n - 1];
            bool own = false;
            for (size_t l = 0; l < o->nmops; l++)
                own |= h.mops[o->mop0 + l].kind == TX_APPEND && h.mops[o->mop0 + l].value == last;
            if (own) continue;
            for (size_t w = 0; w < t && !mutated; w++)
                for (size_t l = 0; l < h.ops[w].nmops; l++) {
                    const tx_mop *a = &h.mops[h.ops[w].mop0 + l];
                    if (a->kind == TX_APPEND && a->value == last && h.ops[w].outcome == FH_OK &&
                        h.ops[w].complete < o->invoke) {
                        m->n--;
                        mutated = true;
                        break;
                    }
                }
        }
    }
    ck_assert(mutated);
    ck_assert_uint_gt(check(), 0);
}
END_TEST

START_TEST(witnesses_name_the_transactions)
{
    OK(0, 0, 10, "r 1 -;a 2 1");
    OK(1, 0, 10, "r 2 -;a 1 1");
    OK(2, 20, 21, "r 1 1;r 2 1");
    char *buf = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&buf, &len);
    ck_assert(!tx_check(&h, out, &rep));
    fclose(out);
    ck_assert_ptr_nonnull(strstr(buf, "G2: "));
    ck_assert_ptr_nonnull(strstr(buf, "cycle: T"));
    ck_assert_ptr_nonnull(strstr(buf, "-rw 1->"));
    ck_assert_ptr_nonnull(strstr(buf, "-rw 2->"));
    free(buf);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("fault_txn");
    TCase *tc = tcase_create("checker");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, serial_history_is_valid);
    tcase_add_test(tc, concurrent_transactions_may_order_either_way);
    tcase_add_test(tc, dirty_write_cycle_is_g0);
    tcase_add_test(tc, read_of_a_failed_append_is_g1a);
    tcase_add_test(tc, read_of_an_intermediate_append_is_g1b);
    tcase_add_test(tc, circular_information_flow_is_g1c);
    tcase_add_test(tc, read_skew_is_g_single);
    tcase_add_test(tc, write_skew_is_g2);
    tcase_add_test(tc, stale_read_is_g_single_realtime);
    tcase_add_test(tc, acknowledged_append_nobody_reads_is_lost);
    tcase_add_test(tc, reads_that_disagree_are_incompatible);
    tcase_add_test(tc, duplicates_and_garbage);
    tcase_add_test(tc, own_writes_must_be_visible);
    tcase_add_test(tc, unknown_outcomes);
    tcase_add_test(tc, appending_a_value_twice_is_malformed);
    tcase_add_test(tc, file_round_trip);
    tcase_add_loop_test(tc, random_histories_pass_and_stale_mutants_fail, 0, 10);
    tcase_add_test(tc, witnesses_name_the_transactions);
    suite_add_tcase(s, tc);
    return lt_run_suite(s);
}
