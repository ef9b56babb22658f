/*
 * The pending table without a network (fabric/pending.c): requests found
 * and taken by id, walked newest first, and handed back when their
 * deadline passes or their answer can never come.
 */
#include <check.h>
#include <stdint.h>

#include "run_suite.h"
#include "fabric/fabric.h"

START_TEST(insert_find_take_by_id)
{
    fab_pending *t = fab_pending_new(4); /* few buckets: chains of several ids */
    ck_assert_ptr_nonnull(t);
    int items[20];
    uint64_t ids[20];
    for (int i = 0; i < 20; i++) {
        ids[i] = fab_pending_add(t, &items[i], 1000);
        ck_assert_uint_eq(ids[i], (uint64_t)i + 1); /* ids in order from 1: the wire's request ids */
    }
    ck_assert_uint_eq(fab_pending_count(t), 20);
    for (int i = 0; i < 20; i++) ck_assert_ptr_eq(fab_pending_find(t, ids[i]), &items[i]);
    ck_assert_ptr_null(fab_pending_find(t, 21));
    ck_assert_ptr_eq(fab_pending_take(t, ids[7]), &items[7]);
    ck_assert_ptr_null(fab_pending_take(t, ids[7])); /* an answer that came twice: nothing waits */
    ck_assert_ptr_null(fab_pending_find(t, ids[7]));
    ck_assert_uint_eq(fab_pending_count(t), 19);
    for (int i = 0; i < 20; i++)
        if (i != 7) ck_assert_ptr_eq(fab_pending_take(t, ids[i]), &items[i]);
    ck_assert_uint_eq(fab_pending_count(t), 0);
    ck_assert_ptr_null(fab_pending_first(t));
    /* nodes come back from the spare list; ids go on */
    ck_assert_uint_eq(fab_pending_add(t, &items[0], 1), 21);
    ck_assert_ptr_eq(fab_pending_take(t, 21), &items[0]);
    fab_pending_free(t);
    ck_assert_ptr_null(fab_pending_new(3)); /* not a power of two */
}
END_TEST

START_TEST(walks_newest_first)
{
    fab_pending *t = fab_pending_new(16);
    int items[5];
    for (int i = 0; i < 5; i++) fab_pending_add(t, &items[i], 1000);
    fab_pending_take(t, 3);
    int want[] = {4, 3, 1, 0}, k = 0;
    for (const fab_pend_node *n = fab_pending_first(t); n; n = fab_pending_after(n)) {
        ck_assert_int_lt(k, 4);
        ck_assert_ptr_eq(fab_pend_item(n), &items[want[k++]]);
    }
    ck_assert_int_eq(k, 4);
    fab_pending_free(t); /* items are the caller's: never freed by the table */
}
END_TEST

typedef struct ended {
    void *item[16];
    int n;
    void *gone_item;              /* the one whose target "left" */
} ended;

static bool is_gone(void *arg, void *item) { return item == ((ended *)arg)->gone_item; }

static void on_end(void *arg, void *item)
{
    ended *e = arg;
    e->item[e->n++] = item;
}

START_TEST(expires_by_deadline_or_when_gone)
{
    fab_pending *t = fab_pending_new(16);
    int items[6];
    fab_pending_add(t, &items[0], 100);
    fab_pending_add(t, &items[1], 200);
    fab_pending_add(t, &items[2], 300);
    fab_pending_add(t, &items[3], UINT64_MAX); /* only when its target leaves */
    fab_pending_add(t, &items[4], 100);
    fab_pending_add(t, &items[5], UINT64_MAX);
    ck_assert(fab_pending_set_deadline(t, 5, UINT64_MAX)); /* items[4]: no deadline after all */
    ck_assert(!fab_pending_set_deadline(t, 99, 1));

    ended e = {0};
    fab_pending_expire(t, 99, is_gone, on_end, &e); /* nothing due */
    ck_assert_int_eq(e.n, 0);
    fab_pending_expire(t, 200, is_gone, on_end, &e); /* the deadline itself is due; newest first */
    ck_assert_int_eq(e.n, 2);
    ck_assert_ptr_eq(e.item[0], &items[1]);
    ck_assert_ptr_eq(e.item[1], &items[0]);
    ck_assert_ptr_null(fab_pending_find(t, 1));
    ck_assert_ptr_null(fab_pending_find(t, 2));
    ck_assert_uint_eq(fab_pending_count(t), 4);

    e.n = 0;
    e.gone_item = &items[3];
    fab_pending_expire(t, 250, is_gone, on_end, &e); /* no deadline, but its answer will never come */
    ck_assert_int_eq(e.n, 1);
    ck_assert_ptr_eq(e.item[0], &items[3]);

    e.n = 0;
    e.gone_item = NULL;
    fab_pending_expire(t, UINT64_MAX - 1, NULL, on_end, &e);
    ck_assert_int_eq(e.n, 1); /* items[2]; items[4] and [5] wait without a deadline */
    ck_assert_ptr_eq(e.item[0], &items[2]);
    ck_assert_uint_eq(fab_pending_count(t), 2);
    fab_pending_free(t);
}
END_TEST

/* end may send again: what it adds is kept, not visited in the same sweep. */
static fab_pending *resend_t;
static int resent;

static void resend(void *arg, void *item)
{
    (void)arg;
    fab_pending_add(resend_t, item, 1000);
    resent++;
}

START_TEST(an_expiry_that_sends_again_keeps_the_new_request)
{
    resend_t = fab_pending_new(16);
    int items[3];
    for (int i = 0; i < 3; i++) fab_pending_add(resend_t, &items[i], 10);
    fab_pending_expire(resend_t, 10, NULL, resend, NULL);
    ck_assert_int_eq(resent, 3);
    ck_assert_uint_eq(fab_pending_count(resend_t), 3);
    for (int i = 0; i < 3; i++) ck_assert_ptr_nonnull(fab_pending_find(resend_t, 4 + (uint64_t)i));
    fab_pending_free(resend_t);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("fabric: pending");
    TCase *tc = tcase_create("pending");
    tcase_add_test(tc, insert_find_take_by_id);
    tcase_add_test(tc, walks_newest_first);
    tcase_add_test(tc, expires_by_deadline_or_when_gone);
    tcase_add_test(tc, an_expiry_that_sends_again_keeps_the_new_request);
    suite_add_tcase(s, tc);
    return lt_run_suite(s);
}
