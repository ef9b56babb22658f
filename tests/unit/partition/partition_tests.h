/* Test cases of the partition suite, one function per source file. */
#ifndef PARTITION_TESTS_H
#define PARTITION_TESTS_H

#include <check.h>

TCase *partition_hash_tcase(void);
TCase *partition_config_tcase(void);
TCase *partition_affinity_tcase(void);
TCase *partition_state_tcase(void);

#endif
