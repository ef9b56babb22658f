/* One fuzz case for the RESP parser (see resp_fuzz_check.c); aborts when an
 * invariant does not hold. */
#ifndef LATTICE_RESP_FUZZ_CHECK_H
#define LATTICE_RESP_FUZZ_CHECK_H

#include <stddef.h>
#include <stdint.h>

void resp_fuzz_one(const uint8_t *data, size_t size);

#endif
