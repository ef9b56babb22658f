/* Shared by the storage suites: deterministic values, a fake clock, and
 * helpers to build regions and stores.  Every test body runs in a forked
 * child (Check), so each test registers itself with RCU first. */
#ifndef LATTICE_TEST_STORAGE_HELPERS_H
#define LATTICE_TEST_STORAGE_HELPERS_H

#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <urcu.h>

#include "lattice/alloc.h"
#include "storage/storage.h"

static inline uint64_t mix64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
}

/* Value bytes are a function of (key id, version), so a reader can tell a
 * well-formed value from a torn or recycled one. */
static inline void fill_value(uint8_t *v, size_t len, uint64_t id, uint64_t version)
{
    uint64_t x = mix64(id * 0x9e3779b97f4a7c15ull + version);
    for (size_t i = 0; i < len; i++) {
        if ((i & 7) == 0) x = mix64(x + i);
        v[i] = (uint8_t)(x >> ((i & 7) * 8));
    }
}

static inline int value_ok(const uint8_t *v, size_t len, uint64_t id, uint64_t version)
{
    uint8_t *want = malloc(len ? len : 1);
    fill_value(want, len, id, version);
    int ok = memcmp(v, want, len) == 0;
    free(want);
    return ok;
}

static inline int key_of(char *buf, size_t cap, uint64_t id)
{
    return snprintf(buf, cap, "key:%08llu", (unsigned long long)id);
}

struct fake_clock {
    uint64_t now;
};

static inline uint64_t fake_clock_ms(void *arg)
{
    return __atomic_load_n(&((struct fake_clock *)arg)->now, __ATOMIC_RELAXED);
}

static inline lattice_region *new_region(uint32_t page, uint64_t mb, lattice_region_policy pol)
{
    lattice_region_config rc = {.name = "test", .page_size = page, .max_mb = mb, .policy = pol};
    lattice_region *r = NULL;
    ck_assert_int_eq(lattice_region_create(&rc, &r), LATTICE_OK);
    return r;
}

static inline lattice_store *new_store(lattice_region *r, uint32_t parts, struct fake_clock *clk)
{
    lattice_store_config sc = {.name = "test", .partitions = parts, .region = r,
                               .clock_ms = clk ? fake_clock_ms : NULL, .clock_arg = clk};
    lattice_store *s = NULL;
    ck_assert_int_eq(lattice_store_create(&sc, &s), LATTICE_OK);
    return s;
}

/* Copies one item (region_read / cursors) into a heap record. */
struct got {
    uint32_t partition;
    size_t klen, vlen;
    uint64_t expire, version;
    uint8_t *key, *value;
    int calls;
};

static inline int got_item(void *arg, const lattice_store_item *it)
{
    struct got *g = arg;
    g->calls++;
    g->partition = it->partition;
    g->klen = it->key_len, g->vlen = it->value_len;
    g->expire = it->expire_ms, g->version = it->version;
    free(g->key), free(g->value);
    g->key = malloc(it->key_len + 1), g->value = malloc(it->value_len + 1);
    memcpy(g->key, it->key, it->key_len);
    memcpy(g->value, it->value, it->value_len);
    return 0;
}

static inline void got_free(struct got *g)
{
    free(g->key), free(g->value);
    memset(g, 0, sizeof *g);
}

#endif
