/* The unit tests' main(): run a Check suite, exit 0 only when every test passed. */
#ifndef LATTICE_TEST_RUN_SUITE_H
#define LATTICE_TEST_RUN_SUITE_H

#include <check.h>
#include <stdlib.h>

/* Runs every suite of r (set up as the test needs: more suites, no fork),
 * then frees it. */
static inline int lt_run_runner(SRunner *r)
{
    srunner_run_all(r, CK_NORMAL);
    int failed = srunner_ntests_failed(r);
    srunner_free(r);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

static inline int lt_run_suite(Suite *s)
{
    return lt_run_runner(srunner_create(s));
}

#endif
