/* The partition suite: every test case of the module in one runner. */
#include <stdlib.h>

#include "partition_tests.h"

int main(void)
{
    Suite *s = suite_create("partition");
    suite_add_tcase(s, partition_hash_tcase());
    suite_add_tcase(s, partition_config_tcase());
    suite_add_tcase(s, partition_affinity_tcase());
    suite_add_tcase(s, partition_state_tcase());
    SRunner *r = srunner_create(s);
    srunner_run_all(r, CK_NORMAL);
    int failed = srunner_ntests_failed(r);
    srunner_free(r);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
