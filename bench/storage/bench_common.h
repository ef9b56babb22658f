/* Shared by the storage benchmarks: clock, options, a JSON/text printer and
 * the reference every ratio is taken against: a plain cds_lfht (memb flavour)
 * of malloc'd entries {node, key, value} keyed by the same hash (XXH3) as the
 * store.  The reference is resized by its writers (cds_lfht_resize each time
 * the count doubles, to 2x the count: 0.5-1 entries per bucket, kinder to it
 * than the store's 1-2), because CDS_LFHT_AUTO_RESIZE stalled here: a table
 * filled from a thread that then exited stopped growing (docs/STORAGE.md). */
#ifndef LATTICE_BENCH_STORAGE_COMMON_H
#define LATTICE_BENCH_STORAGE_COMMON_H

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <urcu.h>
#include <urcu/rculfhash.h>
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "storage/storage.h"

struct opts {
    int json, quick;
};

static inline double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* CPU time of the calling thread: on a shared machine a thread's wall time
 * includes whatever ran on its core meanwhile, its CPU time does not. */
static inline double cpu_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline int parse_opts(int argc, char **argv, struct opts *o, const char *usage)
{
    memset(o, 0, sizeof *o);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json")) o->json = 1;
        else if (!strcmp(argv[i], "--quick")) o->quick = 1;
        else {
            int help = !strcmp(argv[i], "--help") || !strcmp(argv[i], "-h");
            fprintf(help ? stdout : stderr, "%s\n\n  --quick   small smoke run\n  --json    print one JSON object\n  --help    this text\n", usage);
            return help ? 0 : 2;
        }
    }
    return -1;
}

/* Text goes to stdout unless --json; JSON is collected and printed at the end. */
static char json_buf[1 << 16];
static size_t json_len;
static inline void jappend(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(json_buf + json_len, sizeof json_buf - json_len, fmt, ap);
    va_end(ap);
    if (n > 0 && json_len + (size_t)n < sizeof json_buf) json_len += (size_t)n;
}

static inline uint64_t mix64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
}

/* The partition a caller would compute (the partition module's job). */
static inline uint32_t part_of(uint64_t key, uint32_t parts)
{
    return (uint32_t)(mix64(key) & (parts - 1));
}

/* ---- reference: cds_lfht of malloc'd entries ---- */

struct ref_entry {
    struct cds_lfht_node node;
    uint64_t key;
    uint64_t value;
    struct rcu_head rcu;
};

static inline int ref_match(struct cds_lfht_node *n, const void *key)
{
    return caa_container_of(n, struct ref_entry, node)->key == *(const uint64_t *)key;
}

static inline unsigned long ref_hash(uint64_t key)
{
    return (unsigned long)XXH3_64bits(&key, sizeof key);
}

static inline void ref_free_rcu(struct rcu_head *h)
{
    free(caa_container_of(h, struct ref_entry, rcu));
}

static uint64_t ref_count; /* atomic */

static inline int ref_put(struct cds_lfht *ht, uint64_t key, uint64_t value)
{
    struct ref_entry *e = malloc(sizeof *e);
    if (!e) return -1;
    e->key = key;
    e->value = value;
    rcu_read_lock();
    struct cds_lfht_node *old = cds_lfht_add_replace(ht, ref_hash(key), ref_match, &key, &e->node);
    rcu_read_unlock();
    if (old) call_rcu(&caa_container_of(old, struct ref_entry, node)->rcu, ref_free_rcu);
    uint64_t n = old ? 0 : __atomic_add_fetch(&ref_count, 1, __ATOMIC_RELAXED);
    if (n >= 1024 && !(n & (n - 1))) cds_lfht_resize(ht, 2 * n);
    return 0;
}

static inline int ref_get(struct cds_lfht *ht, uint64_t key, uint64_t *value)
{
    struct cds_lfht_iter it;
    int found = 0;
    rcu_read_lock();
    cds_lfht_lookup(ht, ref_hash(key), ref_match, &key, &it);
    struct cds_lfht_node *n = cds_lfht_iter_get_node(&it);
    if (n) {
        *value = caa_container_of(n, struct ref_entry, node)->value;
        found = 1;
    }
    rcu_read_unlock();
    return found;
}

static inline void ref_destroy(struct cds_lfht *ht)
{
    struct cds_lfht_iter it;
    struct cds_lfht_node *n;
    rcu_read_lock();
    cds_lfht_for_each(ht, &it, n) {
        if (cds_lfht_del(ht, n) == 0) call_rcu(&caa_container_of(n, struct ref_entry, node)->rcu, ref_free_rcu);
    }
    rcu_read_unlock();
    rcu_barrier();
    cds_lfht_destroy(ht, NULL);
}

static inline struct cds_lfht *ref_new(void)
{
    __atomic_store_n(&ref_count, 0, __ATOMIC_RELAXED);
    return cds_lfht_new(2048, 2048, 0, 0, NULL);
}

#endif
