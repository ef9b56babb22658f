/* Names of partition copy states, as JSON and the CLI print them. */
#include "partition/partition.h"

static const char *const state_names[LATTICE_PART_STATE_COUNT_] = {
    "MOVING", "OWNING", "RENTING", "EVICTED", "LOST",
};

const char *lattice_partition_state_name(lattice_partition_state s)
{
    return (unsigned)s < LATTICE_PART_STATE_COUNT_ ? state_names[s] : "UNKNOWN";
}
