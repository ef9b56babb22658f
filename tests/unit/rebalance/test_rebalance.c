/* The rebalance suite: every test case of the module in one runner. */
#include "rebalance_tests.h"

int main(void)
{
    Suite *s = suite_create("rebalance");
    suite_add_tcase(s, rebalance_plan_tcase());
    suite_add_tcase(s, rebalance_wire_tcase());
    suite_add_tcase(s, rebalance_flow_tcase());
    suite_add_tcase(s, rebalance_verify_tcase());
    suite_add_tcase(s, rebalance_join_tcase());
    SRunner *r = srunner_create(s);
    srunner_run_all(r, CK_NORMAL);
    int failed = srunner_ntests_failed(r);
    srunner_free(r);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
