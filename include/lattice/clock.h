/*
 * The project's two clocks, in milliseconds (the monotonic one also in microseconds).  Every module reads time through
 * these, so there is one definition of "now" and one rounding (down).
 *
 *   lt_mono_ms()  CLOCK_MONOTONIC: never jumps, never goes back; the base of
 *                 every timeout, deadline and rate.  Its zero is arbitrary
 *                 (boot), so it never travels between processes.
 *   lt_mono_us()  the same monotonic clock in microseconds: for latencies
 *                 shorter than a millisecond (the operation histograms).
 *   lt_wall_ms()  CLOCK_REALTIME, ms since the Unix epoch: for what another
 *                 process or a human reads (entry expiry, join times, uptime
 *                 shown by the CLI).  May jump when the system clock is set.
 *
 * Public because the topology reports wall-clock times (start_time_ms) and
 * durations (uptime_ms) that an application compares with its own clock.
 * Any thread; one clock_gettime(2) (a vDSO call, no system call) each.
 */
#ifndef LATTICE_CLOCK_H
#define LATTICE_CLOCK_H

#include <stdint.h>

uint64_t lt_mono_ms(void);
uint64_t lt_mono_us(void);
uint64_t lt_wall_ms(void);

#endif
