/*
 * bench_direct_get: the in-process reference of the caches benchmark - a
 * direct lattice_store_get on a local store holding the same keys
 * ("key-0".."key-(N-1)", as `lattice bench` writes them) and value size, one
 * thread, for about 300 ms.  bench/caches/matrix runs it after every grid get
 * run and reports "a grid get's p50 is X times a direct get" from the two
 * figures of the same run (docs/BENCHMARKS.md, "Grid get vs storage get").
 * The time includes formatting the random key and computing its partition,
 * as a grid get's does.
 *
 *   bench_direct_get [--keys N] [--value-size N] [--json]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <urcu.h>

#include "lattice/alloc.h"
#include "partition/partition.h"
#include "storage/storage.h"

#define PARTS 1024
#define MAX_KEYS 1000000L

static uint64_t rnd(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ns per get; 0 when the store could not be filled. */
static double direct_get_ns(long keys, long vsize)
{
    lattice_region_config rc = {"bench", 0, 1024, 0, LATTICE_REGION_REJECT};
    lattice_region *r = NULL;
    lattice_store *s = NULL;
    char *value = lt_malloc((size_t)vsize + 1), *buf = lt_malloc((size_t)vsize + 1);
    double ns = 0;
    if (!value || !buf || lattice_region_create(&rc, &r) != LATTICE_OK) goto out;
    memset(value, 'v', (size_t)vsize);
    lattice_store_config sc = {"bench", PARTS, r, NULL, NULL};
    if (lattice_store_create(&sc, &s) != LATTICE_OK) goto out;
    char k[32];
    for (long i = 0; i < keys; i++) {
        int len = snprintf(k, sizeof k, "key-%ld", i);
        lattice_store_entry e = {lattice_partition_of_key(k, (size_t)len, PARTS), k, (size_t)len, value, (size_t)vsize,
                                 0, 1, 0};
        if (lattice_store_put(s, &e, 0) != LATTICE_OK) goto out;
    }
    uint64_t rng = 88172645463325252ull, n = 0, t0 = now_ns(), t1 = t0;
    while (t1 - t0 < 300000000u) {
        for (int i = 0; i < 1000; i++, n++) {
            int len = snprintf(k, sizeof k, "key-%ld", (long)(rnd(&rng) % (uint64_t)keys));
            lattice_store_get(s, lattice_partition_of_key(k, (size_t)len, PARTS), k, (size_t)len, buf,
                              (size_t)vsize + 1, NULL);
        }
        t1 = now_ns();
    }
    ns = (double)(t1 - t0) / (double)n;
out:
    if (s) lattice_store_destroy(s);
    if (r) lattice_region_destroy(r);
    lt_free(value);
    lt_free(buf);
    return ns;
}

static int usage(FILE *f, int rc)
{
    fputs("usage: bench_direct_get [--keys N] [--value-size N] [--json]\n"
          "  --keys N          key range key-0..key-(N-1), 1..1000000 (default 100000)\n"
          "  --value-size N    bytes per value, 0..1048576 (default 100)\n"
          "  --json            print one JSON object\n",
          f);
    return rc;
}

static int num(const char *s, long lo, long hi, long *out)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (!*s || *end || v < lo || v > hi) return 0;
    *out = v;
    return 1;
}

int main(int argc, char **argv)
{
    long keys = 100000, vsize = 100;
    int json = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json")) json = 1;
        else if (!strcmp(argv[i], "--keys") && i + 1 < argc && num(argv[i + 1], 1, MAX_KEYS, &keys)) i++;
        else if (!strcmp(argv[i], "--value-size") && i + 1 < argc && num(argv[i + 1], 0, 1 << 20, &vsize)) i++;
        else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) return usage(stdout, 0);
        else return usage(stderr, 2);
    }
    rcu_register_thread();
    double ns = direct_get_ns(keys, vsize);
    rcu_unregister_thread();
    if (ns <= 0) {
        fprintf(stderr, "bench_direct_get: could not fill a store of %ld keys\n", keys);
        return 1;
    }
    if (json) printf("{\"direct_get_ns\":%.1f,\"keys\":%ld,\"value_size\":%ld}\n", ns, keys, vsize);
    else printf("direct storage get: %.0f ns (%ld keys, %ld-byte values, 1 thread)\n", ns, keys, vsize);
    return 0;
}
