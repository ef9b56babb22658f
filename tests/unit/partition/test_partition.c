/* The partition suite: every test case of the module in one runner. */
#include <stdlib.h>

#include "run_suite.h"
#include "partition_tests.h"

int main(void)
{
    Suite *s = suite_create("partition");
    suite_add_tcase(s, partition_hash_tcase());
    suite_add_tcase(s, partition_config_tcase());
    suite_add_tcase(s, partition_affinity_tcase());
    suite_add_tcase(s, partition_state_tcase());
    return lt_run_suite(s);
}
