#include "lattice/clock.h"

#include <time.h>

static uint64_t read_ms(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

uint64_t lt_mono_ms(void) { return read_ms(CLOCK_MONOTONIC); }

uint64_t lt_mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

uint64_t lt_wall_ms(void) { return read_ms(CLOCK_REALTIME); }
