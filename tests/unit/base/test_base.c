/* The shared basics every module relies on: status strings, the allocation
 * wrapper's failure injection, and log level parsing/filtering. */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "run_suite.h"
#include "lattice/alloc.h"
#include "lattice/log.h"
#include "lattice/status.h"

START_TEST(every_status_has_a_distinct_message)
{
    for (int i = 0; i < LATTICE_STATUS_COUNT_; i++) {
        const char *m = lattice_strerror(i);
        ck_assert_ptr_nonnull(m);
        ck_assert_str_ne(m, "unknown status");
        for (int j = 0; j < i; j++) ck_assert_str_ne(m, lattice_strerror(j));
    }
    ck_assert_str_eq(lattice_strerror(-1), "unknown status");
    ck_assert_str_eq(lattice_strerror(LATTICE_STATUS_COUNT_), "unknown status");
    ck_assert_str_eq(lattice_strerror(LATTICE_ERR_REGION_FULL), "data region full");
}
END_TEST

START_TEST(alloc_fails_exactly_the_nth_call)
{
    lattice_alloc_fail_nth(3);
    void *a = lt_malloc(8), *b = lt_malloc(8), *c = lt_malloc(8), *d = lt_malloc(8);
    ck_assert_ptr_nonnull(a);
    ck_assert_ptr_nonnull(b);
    ck_assert_ptr_null(c);
    ck_assert_ptr_nonnull(d);
    ck_assert_uint_eq(lattice_alloc_injected_failures(), 1);
    lt_free(a), lt_free(b), lt_free(d);
    lattice_alloc_fail_nth(0);
}
END_TEST

/* The node's allocations pay no shared counter: calls are counted only
 * while a test counts (or an injector is armed). */
START_TEST(alloc_counts_only_while_watched)
{
    uint64_t before = lattice_alloc_calls();
    lt_free(lt_malloc(8));
    ck_assert_uint_eq(lattice_alloc_calls(), before);
    lattice_alloc_count(1);
    lt_free(lt_malloc(8));
    lt_free(lt_calloc(2, 8));
    ck_assert_uint_eq(lattice_alloc_calls(), before + 2);
    lattice_alloc_count(0);
    lt_free(lt_strdup("x"));
    ck_assert_uint_eq(lattice_alloc_calls(), before + 2);
    /* armed after calls that went uncounted: still the nth from now */
    lattice_alloc_fail_nth(2);
    void *a = lt_malloc(8);
    ck_assert_ptr_nonnull(a);
    ck_assert_ptr_null(lt_malloc(8));
    lattice_alloc_fail_nth(0);
    lt_free(a);
}
END_TEST

START_TEST(alloc_sticky_failure_until_disarmed)
{
    lattice_alloc_fail_from(2);
    void *a = lt_malloc(8);
    ck_assert_ptr_nonnull(a);
    ck_assert_ptr_null(lt_calloc(1, 8));
    ck_assert_ptr_null(lt_strdup("x"));
    ck_assert_ptr_null(lt_map(1 << 20));
    lattice_alloc_fail_from(0);
    char *s = lt_strdup("lattice");
    ck_assert_str_eq(s, "lattice");
    lt_free(s), lt_free(a);
}
END_TEST

START_TEST(log_levels_parse_and_filter)
{
    ck_assert_int_eq(lattice_log_parse_level("debug"), LT_DEBUG);
    ck_assert_int_eq(lattice_log_parse_level("WARN"), LT_WARN);
    ck_assert_int_eq(lattice_log_parse_level("nonsense"), -1);

    int fds[2];
    ck_assert_int_eq(pipe(fds), 0);
    lattice_log_set_fd(fds[1]);
    lattice_log_set_node("0123456789abcdef");
    lattice_log_set_level(LT_WARN);
    int evaluated = 0;
    LT_LOG(LT_DEBUG, "test", "hidden %d", ++evaluated); /* filtered: args not evaluated */
    LT_LOG(LT_ERROR, "test", "shown %d", 42);
    lattice_log_set_fd(2);
    close(fds[1]);
    char buf[512] = {0};
    ssize_t n = read(fds[0], buf, sizeof buf - 1);
    ck_assert_int_gt(n, 0);
    ck_assert_int_eq(evaluated, 0);
    ck_assert_ptr_null(strstr(buf, "hidden"));
    ck_assert_ptr_nonnull(strstr(buf, "ERROR [node 01234567] test: shown 42\n"));
    ck_assert_int_eq(buf[4], '-'); /* starts with an ISO timestamp */
    close(fds[0]);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("base");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, every_status_has_a_distinct_message);
    tcase_add_test(tc, alloc_fails_exactly_the_nth_call);
    tcase_add_test(tc, alloc_sticky_failure_until_disarmed);
    tcase_add_test(tc, alloc_counts_only_while_watched);
    tcase_add_test(tc, log_levels_parse_and_filter);
    suite_add_tcase(s, tc);
    return lt_run_suite(s);
}
