/* Partition state names: the node's per-partition reports print them, so
 * scripts match on these exact words. */
#include "partition/partition.h"
#include "partition_tests.h"

START_TEST(state_names_are_the_reported_words)
{
    static const char *names[] = {"MOVING", "OWNING", "RENTING", "EVICTED", "LOST"};
    for (int s = 0; s < LATTICE_PART_STATE_COUNT_; s++)
        ck_assert_str_eq(lattice_partition_state_name((lattice_partition_state)s), names[s]);
    ck_assert_str_eq(lattice_partition_state_name((lattice_partition_state)9), "UNKNOWN");
}
END_TEST

TCase *partition_state_tcase(void)
{
    TCase *tc = tcase_create("state");
    tcase_add_test(tc, state_names_are_the_reported_words);
    return tc;
}
