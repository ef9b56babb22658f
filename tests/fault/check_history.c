/*
 * The history checker on histories whose verdict is known: hand-written
 * linearizable and non-linearizable register histories, unknown outcomes,
 * counters, the file format, and a randomized self-test (histories produced
 * by a sequential register with random overlaps must pass; one read changed
 * to a value two completed writes had already replaced must fail).
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "history.h"
#include "run_suite.h"

static fh_history h;

static void setup(void) { fh_init(&h); }
static void teardown(void) { fh_free(&h); }

static void op(int client, fh_kind kind, const char *key, int64_t value, int64_t inv, int64_t cmp, fh_outcome oc)
{
    fh_op o = {.invoke = inv, .complete = oc == FH_UNKNOWN ? FH_INF : cmp, .value = value, .client = client,
               .node = client % 3, .kind = kind, .outcome = oc};
    snprintf(o.key, sizeof o.key, "%s", key);
    fh_add(&h, &o);
}

#define W(c, v, a, b) op(c, FH_WRITE, "k", v, a, b, FH_OK)
#define R(c, v, a, b) op(c, FH_READ, "k", v, a, b, FH_OK)

static bool valid(void)
{
    fh_report r;
    return fh_check(&h, stderr, &r);
}

START_TEST(sequential_register)
{
    R(0, FH_NIL, 0, 1);
    W(0, 1, 2, 3);
    R(1, 1, 4, 5);
    W(1, 2, 6, 7);
    R(0, 2, 8, 9);
    ck_assert(valid());
}
END_TEST

START_TEST(concurrent_overlaps_are_fine)
{
    /* A long write; reads inside it may see the old or the new value, as
     * long as none sees the old after one saw the new. */
    W(0, 1, 0, 1);
    W(1, 2, 10, 100);
    R(2, 1, 20, 30);
    R(3, 2, 25, 35);
    R(2, 2, 40, 50);
    /* Two concurrent writes: a later read may return either. */
    W(0, 3, 200, 300);
    W(1, 4, 210, 310);
    R(2, 3, 400, 410);
    R(3, 3, 420, 430);
    ck_assert(valid());
}
END_TEST

START_TEST(stale_read_after_newer_read_fails)
{
    /* What the issue measured: a GET returned the new value, a later GET
     * (served by a backup) the old one. */
    W(0, 1, 0, 1);
    W(1, 2, 10, 100);
    R(2, 2, 20, 30);
    R(3, 1, 40, 50);
    ck_assert(!valid());
}
END_TEST

START_TEST(stale_read_fails)
{
    W(0, 1, 0, 1);
    W(0, 2, 2, 3);
    R(1, 1, 4, 5);
    ck_assert(!valid());
}
END_TEST

START_TEST(lost_write_fails)
{
    W(0, 1, 0, 1);
    R(1, FH_NIL, 2, 3);
    ck_assert(!valid());
}
END_TEST

START_TEST(never_written_value_fails)
{
    W(0, 1, 0, 1);
    R(1, 7, 2, 3);
    ck_assert(!valid());
    fh_free(&h);
    /* A failed write never happened: reading its value is the same fault. */
    op(0, FH_WRITE, "k", 5, 0, 1, FH_FAIL);
    R(1, 5, 2, 3);
    ck_assert(!valid());
}
END_TEST

START_TEST(read_of_a_future_write_fails)
{
    R(0, 1, 0, 1);
    W(1, 1, 2, 3);
    ck_assert(!valid());
}
END_TEST

START_TEST(unknown_write_may_land_late)
{
    /* No answer at 0; read long after: it happened, at some point. */
    op(0, FH_WRITE, "k", 1, 0, 0, FH_UNKNOWN);
    R(1, FH_NIL, 100, 110);
    W(2, 2, 120, 130);
    R(1, 1, 1000, 1010);
    ck_assert(valid());
}
END_TEST

START_TEST(unknown_write_cannot_be_undone)
{
    op(0, FH_WRITE, "k", 1, 0, 0, FH_UNKNOWN);
    R(1, 1, 100, 110);
    R(1, FH_NIL, 200, 210);
    ck_assert(!valid());
}
END_TEST

START_TEST(unknown_write_not_before_its_invoke)
{
    R(1, 1, 0, 10);
    op(0, FH_WRITE, "k", 1, 20, 0, FH_UNKNOWN);
    ck_assert(!valid());
}
END_TEST

START_TEST(many_unread_unknown_writes_are_cheap)
{
    for (int i = 0; i < 2000; i++) op(i % 7, FH_WRITE, "k", 1000 + i, i * 10, 0, FH_UNKNOWN);
    W(0, 1, 5, 50000);
    R(1, 1, 60000, 60001);
    fh_report r;
    ck_assert(fh_check(&h, stderr, &r));
    ck_assert_uint_eq(r.inconclusive, 0);
}
END_TEST

/* Forty reads of one value, all concurrent with each other and with a
 * write of another: which order they take is no choice (a read changes
 * nothing), so the search must not try them in every order - it did, and
 * such a segment ran a fault run's check out of its budget. */
START_TEST(concurrent_reads_are_no_choice)
{
    W(0, 1, 0, 10);
    for (int i = 0; i < 40; i++) R(1 + i % 5, 1, 20 + i, 1000 + i);
    W(6, 2, 25, 2000);
    for (int i = 0; i < 20; i++) R(7 + i % 5, i % 2 ? 2 : 1, 30 + i, 1500 + i);
    R(2, 2, 2001, 2002);
    fh_report r = {0};
    fh_check_registers(&h, 1000000, stderr, &r);
    ck_assert_uint_eq(r.inconclusive, 0);
    ck_assert_uint_eq(r.violations, 0);
    /* The same with a read of 1 after a read of 2 completed: not linearizable. */
    R(3, 1, 2003, 2004);
    memset(&r, 0, sizeof r);
    fh_check_registers(&h, 1000000, NULL, &r);
    ck_assert_uint_eq(r.inconclusive, 0);
    ck_assert_uint_eq(r.violations, 1);
}
END_TEST

START_TEST(keys_are_independent)
{
    op(0, FH_WRITE, "a", 1, 0, 1, FH_OK);
    op(0, FH_WRITE, "b", 2, 2, 3, FH_OK);
    op(1, FH_READ, "a", 1, 4, 5, FH_OK);
    op(1, FH_READ, "b", 2, 4, 5, FH_OK);
    fh_report r;
    ck_assert(fh_check(&h, stderr, &r));
    ck_assert_uint_eq(r.keys, 2);
    op(1, FH_READ, "b", 1, 6, 7, FH_OK); /* a's value read from b */
    ck_assert(!fh_check(&h, stderr, &r));
    ck_assert_uint_eq(r.violations, 1);
}
END_TEST

START_TEST(each_violation_is_counted)
{
    /* Two stale reads far apart: two anomalies on one key; the second is
     * found although the search restarts after the first. */
    W(0, 1, 0, 1);
    W(0, 2, 2, 3);
    R(1, 1, 4, 5);
    W(0, 3, 10, 11);
    R(1, 3, 12, 13);
    W(0, 4, 14, 15);
    R(1, 3, 16, 17);
    R(1, 4, 18, 19);
    fh_report r;
    ck_assert(!fh_check(&h, stderr, &r));
    ck_assert_uint_eq(r.violations, 1);
    ck_assert_uint_eq(r.anomalies, 2);
}
END_TEST

#define I(c, v, a, b) op(c, FH_INCR, "n", v, a, b, FH_OK)
#define RN(c, v, a, b) op(c, FH_READ, "n", v, a, b, FH_OK)

START_TEST(counter_valid)
{
    RN(0, FH_NIL, 0, 1);
    I(0, 1, 2, 3);
    I(1, 3, 4, 10); /* concurrent with the next one */
    I(2, 2, 5, 9);
    op(3, FH_INCR, "n", 0, 11, 0, FH_UNKNOWN);
    op(3, FH_INCR, "n", 0, 12, 13, FH_FAIL);
    RN(0, 4, 20, 21); /* the unknown one happened */
    RN(1, 4, 22, 23);
    ck_assert(valid());
}
END_TEST

START_TEST(counter_lost_increment_fails)
{
    I(0, 1, 0, 1);
    I(0, 2, 2, 3);
    RN(1, 1, 4, 5); /* the final read lacks one */
    ck_assert(!valid());
}
END_TEST

START_TEST(counter_doubled_fails)
{
    I(0, 1, 0, 1);
    I(1, 1, 2, 3); /* the first one lost: both acknowledged as 1 */
    ck_assert(!valid());
    fh_free(&h);
    /* Applied twice: one INCR, the counter moved by two. */
    I(0, 2, 0, 1);
    ck_assert(!valid());
    fh_free(&h);
    I(0, 1, 0, 1);
    RN(1, 2, 4, 5);
    ck_assert(!valid());
}
END_TEST

START_TEST(counter_real_time_order)
{
    I(0, 2, 0, 1);
    I(1, 1, 2, 3); /* started after 2 was returned */
    ck_assert(!valid());
}
END_TEST

START_TEST(file_round_trip)
{
    W(3, 17, 100, 200);
    op(4, FH_WRITE, "k", 18, 150, 0, FH_UNKNOWN);
    R(5, FH_NIL, 1, 2);
    op(6, FH_INCR, "n", 9, 5, 6, FH_FAIL);
    char path[] = "/tmp/fault-history-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    ck_assert(fh_save(&h, path, "seed 42"));
    fh_history back;
    fh_init(&back);
    ck_assert(fh_load(&back, path));
    unlink(path);
    ck_assert_uint_eq(back.n, h.n);
    for (size_t i = 0; i < h.n; i++) {
        ck_assert_int_eq(back.ops[i].invoke, h.ops[i].invoke);
        ck_assert_int_eq(back.ops[i].complete, h.ops[i].complete);
        ck_assert_int_eq(back.ops[i].value, h.ops[i].value);
        ck_assert_int_eq(back.ops[i].client, h.ops[i].client);
        ck_assert_int_eq(back.ops[i].node, h.ops[i].node);
        ck_assert_int_eq(back.ops[i].kind, h.ops[i].kind);
        ck_assert_int_eq(back.ops[i].outcome, h.ops[i].outcome);
        ck_assert_str_eq(back.ops[i].key, h.ops[i].key);
    }
    fh_free(&back);
}
END_TEST

START_TEST(malformed_file_is_refused)
{
    char path[] = "/tmp/fault-history-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    const char bad[] = "1 0 w k 5 10 20 ok\n1 0 x k 5 10 20 ok\n";
    ck_assert_int_eq(write(fd, bad, sizeof bad - 1), (ssize_t)(sizeof bad - 1));
    close(fd);
    ck_assert(!fh_load(&h, path));
    unlink(path);
}
END_TEST

/* ---- randomized self-test ---- */

static uint64_t rng;
static uint64_t next_rand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

typedef struct lin_op {
    fh_op o;
    int64_t at; /* the instant it takes effect */
} lin_op;

static int by_at(const void *a, const void *b)
{
    const lin_op *x = a, *y = b;
    return (x->at > y->at) - (x->at < y->at);
}

/* `clients` sequential clients, each doing ops of random length on `keys`
 * registers; each op takes effect at a random instant inside its interval,
 * where a sequential register decides what a read returns. */
static void generate(size_t total, int clients, int keys, int unknown_pct)
{
    lin_op *ops = calloc(total, sizeof *ops);
    int64_t *clock = calloc((size_t)clients, sizeof *clock);
    ck_assert(ops && clock);
    int64_t serial = 1;
    for (size_t i = 0; i < total; i++) {
        int c = (int)(next_rand() % (uint64_t)clients);
        lin_op *l = &ops[i];
        l->o.client = c;
        l->o.invoke = clock[c] + (int64_t)(next_rand() % 50);
        l->o.complete = l->o.invoke + 1 + (int64_t)(next_rand() % 400);
        l->at = l->o.invoke + (int64_t)(next_rand() % (uint64_t)(l->o.complete - l->o.invoke));
        clock[c] = l->o.complete;
        snprintf(l->o.key, sizeof l->o.key, "k%d", (int)(next_rand() % (uint64_t)keys));
        l->o.kind = next_rand() % 2 ? FH_WRITE : FH_READ;
        l->o.value = l->o.kind == FH_WRITE ? serial++ : FH_NIL;
        l->o.outcome = FH_OK;
        if (l->o.kind == FH_WRITE && (int)(next_rand() % 100) < unknown_pct) {
            l->o.outcome = FH_UNKNOWN;
            l->o.complete = FH_INF;
        }
    }
    qsort(ops, total, sizeof *ops, by_at);
    int64_t *state = malloc((size_t)keys * sizeof *state);
    for (int k = 0; k < keys; k++) state[k] = FH_NIL;
    for (size_t i = 0; i < total; i++) {
        int k = atoi(ops[i].o.key + 1);
        if (ops[i].o.kind == FH_WRITE) state[k] = ops[i].o.value;
        else ops[i].o.value = state[k];
        fh_add(&h, &ops[i].o);
    }
    free(state);
    free(ops);
    free(clock);
}

/* Changes one read to the value of a write that a later completed write had
 * replaced before the read began: never linearizable. */
static bool mutate(void)
{
    for (size_t tries = 0; tries < 10000; tries++) {
        fh_op *r = &h.ops[next_rand() % h.n];
        if (r->kind != FH_READ) continue;
        for (size_t b = 0; b < h.n; b++) {
            fh_op *wb = &h.ops[b];
            if (wb->kind != FH_WRITE || wb->outcome != FH_OK || strcmp(wb->key, r->key) ||
                wb->complete >= r->invoke || wb->value == r->value)
                continue;
            for (size_t a = 0; a < h.n; a++) {
                fh_op *wa = &h.ops[a];
                if (wa->kind == FH_WRITE && wa->outcome == FH_OK && !strcmp(wa->key, r->key) &&
                    wa->complete < wb->invoke && wa->value != r->value) {
                    r->value = wa->value;
                    return true;
                }
            }
        }
    }
    return false;
}

START_TEST(random_histories_pass_and_mutants_fail)
{
    rng = 0x9e3779b97f4a7c15ULL ^ ((uint64_t)_i * 7919 + 1);
    generate(2000, 8, 3, 5);
    ck_assert_msg(valid(), "a history of a sequential register failed (iteration %d)", _i);
    ck_assert(mutate());
    ck_assert_msg(!valid(), "a mutated history passed (iteration %d)", _i);
}
END_TEST

START_TEST(large_history_checks_within_budget)
{
    /* About a 60 s fault run: 50k operations, 24 clients, 5 keys. The
     * verdict must come from the search, not from the step budget. */
    rng = 12345;
    generate(50000, 24, 5, 2);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    fh_report r;
    ck_assert(fh_check(&h, stderr, &r));
    clock_gettime(CLOCK_MONOTONIC, &t1);
    ck_assert_uint_eq(r.inconclusive, 0);
    printf("50000 operations on 5 keys checked in %.2f s\n",
           (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("fault_history");
    TCase *tc = tcase_create("checker");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, sequential_register);
    tcase_add_test(tc, concurrent_overlaps_are_fine);
    tcase_add_test(tc, stale_read_after_newer_read_fails);
    tcase_add_test(tc, stale_read_fails);
    tcase_add_test(tc, lost_write_fails);
    tcase_add_test(tc, never_written_value_fails);
    tcase_add_test(tc, read_of_a_future_write_fails);
    tcase_add_test(tc, unknown_write_may_land_late);
    tcase_add_test(tc, unknown_write_cannot_be_undone);
    tcase_add_test(tc, unknown_write_not_before_its_invoke);
    tcase_add_test(tc, many_unread_unknown_writes_are_cheap);
    tcase_add_test(tc, concurrent_reads_are_no_choice);
    tcase_add_test(tc, keys_are_independent);
    tcase_add_test(tc, each_violation_is_counted);
    tcase_add_test(tc, counter_valid);
    tcase_add_test(tc, counter_lost_increment_fails);
    tcase_add_test(tc, counter_doubled_fails);
    tcase_add_test(tc, counter_real_time_order);
    tcase_add_test(tc, file_round_trip);
    tcase_add_test(tc, malformed_file_is_refused);
    tcase_add_loop_test(tc, random_histories_pass_and_mutants_fail, 0, 40);
    tcase_add_test(tc, large_history_checks_within_budget);
    suite_add_tcase(s, tc);
    return lt_run_suite(s);
}
