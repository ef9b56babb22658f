/*
 * The registry of message kinds (fabric/kinds.c): a request goes to the
 * handler registered for its kind, with the owner's context and origin; a
 * kind nobody registered is refused and counted.
 */
#include <check.h>

#include "run_suite.h"
#include "fabric/fabric.h"

#define BASE 100

typedef struct seen {
    int calls;
    uint32_t kind;
    const void *from;
} seen;

static void handler_a(void *ctx, const Latdata__Req *q, const void *from)
{
    seen *s = ctx;
    s->calls++;
    s->kind = q->kind;
    s->from = from;
}

static void handler_b(void *ctx, const Latdata__Req *q, const void *from)
{
    (void)from;
    seen *s = ctx;
    s->calls += 100;
    s->kind = q->kind;
}

START_TEST(dispatches_by_kind)
{
    fab_kinds k;
    fab_kinds_init(&k, BASE);
    ck_assert_int_eq(fab_kinds_on(&k, BASE, handler_a), LATTICE_OK);
    ck_assert_int_eq(fab_kinds_on(&k, BASE + FAB_KINDS - 1, handler_b), LATTICE_OK);
    seen s = {0};
    int origin = 7;
    Latdata__Req q = LATDATA__REQ__INIT;
    q.kind = BASE;
    ck_assert(fab_kinds_dispatch(&k, &s, &q, &origin));
    ck_assert_int_eq(s.calls, 1);
    ck_assert_uint_eq(s.kind, BASE);
    ck_assert_ptr_eq(s.from, &origin);
    q.kind = BASE + FAB_KINDS - 1;
    ck_assert(fab_kinds_dispatch(&k, &s, &q, &origin));
    ck_assert_int_eq(s.calls, 101);
    /* registered again: the new handler serves it */
    ck_assert_int_eq(fab_kinds_on(&k, BASE, handler_b), LATTICE_OK);
    q.kind = BASE;
    ck_assert(fab_kinds_dispatch(&k, &s, &q, NULL));
    ck_assert_int_eq(s.calls, 201);
    ck_assert_uint_eq(k.refused, 0);
}
END_TEST

START_TEST(an_unknown_kind_is_refused_and_counted)
{
    fab_kinds k;
    fab_kinds_init(&k, BASE);
    ck_assert_int_eq(fab_kinds_on(&k, BASE + 1, handler_a), LATTICE_OK);
    seen s = {0};
    Latdata__Req q = LATDATA__REQ__INIT;
    uint32_t unknown[] = {BASE, BASE + 2, BASE - 1, 0, BASE + FAB_KINDS, UINT32_MAX};
    for (size_t i = 0; i < sizeof unknown / sizeof *unknown; i++) {
        q.kind = unknown[i];
        ck_assert(!fab_kinds_dispatch(&k, &s, &q, NULL));
    }
    ck_assert_int_eq(s.calls, 0);
    ck_assert_uint_eq(k.refused, sizeof unknown / sizeof *unknown);
    /* a kind outside the range cannot be registered */
    ck_assert_int_eq(fab_kinds_on(&k, BASE - 1, handler_a), LATTICE_ERR_INVAL);
    ck_assert_int_eq(fab_kinds_on(&k, BASE + FAB_KINDS, handler_a), LATTICE_ERR_INVAL);
    q.kind = BASE + FAB_KINDS;
    ck_assert(!fab_kinds_dispatch(&k, &s, &q, NULL));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("fabric: kinds");
    TCase *tc = tcase_create("kinds");
    tcase_add_test(tc, dispatches_by_kind);
    tcase_add_test(tc, an_unknown_kind_is_refused_and_counted);
    suite_add_tcase(s, tc);
    return lt_run_suite(s);
}
