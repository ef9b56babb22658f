/* libFuzzer entry point for the log reader (persist/); built only with clang
 * under -DLATTICE_FUZZ=ON (scripts/fuzz --wal).  The checks live in
 * wal_fuzz_check.c, which replay_wal runs over the corpus in ctest. */
#include <stddef.h>
#include <stdint.h>

void wal_fuzz_one(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    wal_fuzz_one(data, size);
    return 0;
}
