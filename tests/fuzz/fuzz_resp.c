/* libFuzzer entry point for the RESP parser; built only with clang under
 * -DLATTICE_FUZZ=ON (scripts/fuzz).  The checks live in resp_fuzz_check.c so
 * the gcc-built replay test runs exactly the same ones over the corpus. */
#include <stddef.h>
#include <stdint.h>

#include "resp_fuzz_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    resp_fuzz_one(data, size);
    return 0;
}
