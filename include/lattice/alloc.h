/*
 * The one allocation wrapper.  All project code allocates through lt_malloc /
 * lt_calloc / lt_realloc / lt_strdup and frees with lt_free, so tests can
 *   - count calls and live allocations, and
 *   - make the Nth call from now fail (return NULL), to prove every caller
 *     turns an allocation failure into LATTICE_ERR_NOMEM without crashing
 *     or corrupting what was stored.
 * Thread-safe (atomics).  With no failure armed the cost is one relaxed
 * atomic load and one atomic increment per call.
 */
#ifndef LATTICE_ALLOC_H
#define LATTICE_ALLOC_H

#include <stddef.h>
#include <stdint.h>

void *lt_malloc(size_t n);
void *lt_calloc(size_t count, size_t n);
void *lt_realloc(void *p, size_t n);
char *lt_strdup(const char *s);
void lt_free(void *p);
/* For a module's own pool handing out memory it already holds: counts as one
 * allocation call, and is 1 when that call must fail (an armed injector). */
int lt_alloc_check(void);
/* Large, page-aligned memory straight from the OS (mmap); counted like the others. */
void *lt_map(size_t n);
void lt_unmap(void *p, size_t n);
/* The process's resident bytes (/proc/self/statm), 0 when unknown. */
uint64_t lt_rss_bytes(void);

/* Make the nth allocation call from now (1 = the very next) fail; 0 disarms. */
void lattice_alloc_fail_nth(uint64_t nth);
/* Make every call fail from the nth on (sticky), until disarmed with 0. */
void lattice_alloc_fail_from(uint64_t nth);
/* Count every call from now on (on = 1) or stop (0).  Calls are counted only
 * while counting or armed: the check then costs a shared atomic per call,
 * which the node's hot path does not pay otherwise. */
void lattice_alloc_count(int on);
/* Calls counted so far (while counting or armed) and failures injected so far. */
uint64_t lattice_alloc_calls(void);
uint64_t lattice_alloc_injected_failures(void);

#endif
