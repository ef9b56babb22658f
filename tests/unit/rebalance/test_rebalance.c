/* The rebalance suite: every test case of the module in one runner. */
#include "run_suite.h"
#include "rebalance_tests.h"

int main(void)
{
    Suite *s = suite_create("rebalance");
    suite_add_tcase(s, rebalance_plan_tcase());
    suite_add_tcase(s, rebalance_wire_tcase());
    suite_add_tcase(s, rebalance_flow_tcase());
    suite_add_tcase(s, rebalance_verify_tcase());
    suite_add_tcase(s, rebalance_join_tcase());
    suite_add_tcase(s, rebalance_delta_tcase());
    return lt_run_suite(s);
}
