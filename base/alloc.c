#include "lattice/alloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static uint64_t calls;       /* calls made while watched, atomically incremented */
static uint64_t fail_at;     /* call number that fails; 0 = none */
static int fail_sticky;      /* fail every call >= fail_at */
static uint64_t injected;
static int watched;          /* WATCH_ARMED | WATCH_COUNTING: 0 outside the tests */
#define WATCH_ARMED 1
#define WATCH_COUNTING 2

/* True when this call must fail.  Unwatched (always, outside the tests
 * that arm or count) this is one relaxed load of a line nobody writes:
 * counting every call in a shared atomic made each allocation a write to
 * one cache line all threads share (should_fail was 2.8% of a node under
 * SET -P 16, the IO thread allocating and the data thread freeing). */
static int should_fail(void)
{
    if (__builtin_expect(!__atomic_load_n(&watched, __ATOMIC_RELAXED), 1)) return 0;
    uint64_t n = __atomic_add_fetch(&calls, 1, __ATOMIC_RELAXED);
    uint64_t at = __atomic_load_n(&fail_at, __ATOMIC_RELAXED);
    if (at == 0) return 0;
    if (n == at || (n > at && __atomic_load_n(&fail_sticky, __ATOMIC_RELAXED))) {
        __atomic_add_fetch(&injected, 1, __ATOMIC_RELAXED);
        return 1;
    }
    return 0;
}

static void arm(uint64_t nth, int sticky)
{
    __atomic_store_n(&fail_sticky, sticky, __ATOMIC_RELAXED);
    uint64_t now = __atomic_load_n(&calls, __ATOMIC_RELAXED);
    __atomic_store_n(&fail_at, nth ? now + nth : 0, __ATOMIC_RELAXED);
    if (nth) __atomic_or_fetch(&watched, WATCH_ARMED, __ATOMIC_RELAXED);
    else __atomic_and_fetch(&watched, ~WATCH_ARMED, __ATOMIC_RELAXED);
}

void lattice_alloc_count(int on)
{
    if (on) __atomic_or_fetch(&watched, WATCH_COUNTING, __ATOMIC_RELAXED);
    else __atomic_and_fetch(&watched, ~WATCH_COUNTING, __ATOMIC_RELAXED);
}

void lattice_alloc_fail_nth(uint64_t nth) { arm(nth, 0); }
void lattice_alloc_fail_from(uint64_t nth) { arm(nth, 1); }
uint64_t lattice_alloc_calls(void) { return __atomic_load_n(&calls, __ATOMIC_RELAXED); }
uint64_t lattice_alloc_injected_failures(void) { return __atomic_load_n(&injected, __ATOMIC_RELAXED); }

int lt_alloc_check(void) { return should_fail(); }
void *lt_malloc(size_t n) { return should_fail() ? NULL : malloc(n ? n : 1); }
void *lt_calloc(size_t count, size_t n) { return should_fail() ? NULL : calloc(count ? count : 1, n ? n : 1); }
void *lt_realloc(void *p, size_t n) { return should_fail() ? NULL : realloc(p, n ? n : 1); }
void lt_free(void *p) { free(p); }

char *lt_strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = lt_malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

void *lt_map(size_t n)
{
    if (should_fail()) return NULL;
    void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

void lt_unmap(void *p, size_t n)
{
    if (p) munmap(p, n);
}

uint64_t lt_rss_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long long size = 0, res = 0;
    if (!f) return 0;
    if (fscanf(f, "%llu %llu", &size, &res) != 2) res = 0;
    fclose(f);
    return (uint64_t)res * (uint64_t)sysconf(_SC_PAGESIZE);
}
