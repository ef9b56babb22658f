/* Test cases of the rebalance suite, one function per source file, and the
 * helpers they share: stores with deterministic contents, and a driver that
 * runs a whole demander/supplier session in memory. */
#ifndef REBALANCE_TESTS_H
#define REBALANCE_TESTS_H

#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <urcu.h>

#include "lattice/alloc.h"
#include "rebalance/rebalance.h"

TCase *rebalance_plan_tcase(void);
TCase *rebalance_wire_tcase(void);
TCase *rebalance_flow_tcase(void);
TCase *rebalance_verify_tcase(void);
TCase *rebalance_join_tcase(void);
TCase *rebalance_delta_tcase(void);

static inline uint64_t t_mix64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
}

static inline void t_fill(uint8_t *v, size_t len, uint64_t id, uint64_t version)
{
    uint64_t x = t_mix64(id * 0x9e3779b97f4a7c15ull + version);
    for (size_t i = 0; i < len; i++) {
        if ((i & 7) == 0) x = t_mix64(x + i);
        v[i] = (uint8_t)(x >> ((i & 7) * 8));
    }
}

struct t_env {
    lattice_region *region;
    lattice_store *store;
};

static inline void t_env_open(struct t_env *e, uint32_t parts, uint64_t mb)
{
    lattice_region_config rc = {.name = "t", .page_size = 4096, .max_mb = mb};
    ck_assert_int_eq(lattice_region_create(&rc, &e->region), LATTICE_OK);
    lattice_store_config sc = {.name = "t", .partitions = parts, .region = e->region};
    ck_assert_int_eq(lattice_store_create(&sc, &e->store), LATTICE_OK);
}

static inline void t_env_close(struct t_env *e)
{
    lattice_store_destroy(e->store);
    lattice_region_destroy(e->region);
}

/* Puts key "k<id>" with a value of vlen bytes derived from (id, version). */
static inline void t_put(lattice_store *s, uint32_t part, uint64_t id, size_t vlen,
                         uint64_t version, uint64_t expire)
{
    char key[32];
    int kl = snprintf(key, sizeof key, "k%llu", (unsigned long long)id);
    uint8_t *v = malloc(vlen ? vlen : 1);
    t_fill(v, vlen, id, version);
    lattice_store_entry e = {.partition = part, .key = key, .key_len = (size_t)kl, .value = v,
                             .value_len = vlen, .expire_ms = expire, .version = version};
    ck_assert_int_eq(lattice_store_put(s, &e, 0), LATTICE_OK);
    free(v);
}

/* The id of a key written by t_put (keys are not NUL-terminated). */
static inline unsigned long t_key_id(const lattice_store_entry *e)
{
    char buf[32];
    size_t n = e->key_len < sizeof buf - 1 ? e->key_len : sizeof buf - 1;
    memcpy(buf, e->key, n);
    buf[n] = 0;
    return strtoul(buf + 1, NULL, 10);
}

static inline uint64_t t_digest(lattice_store *s, uint32_t part)
{
    lattice_rebalance_digest d;
    ck_assert_int_eq(lattice_rebalance_digest_partition(s, part, 0, &d), LATTICE_OK);
    return d.hash;
}

#endif
