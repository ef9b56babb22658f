/*
 * The fixture of the suites that execute ops on a real store without a
 * network (types/test_exec.c, types/test_typed.c, ops/test_primary.c): one
 * 8 MiB region, one cache "t" of 16 partitions with values up to 64 bytes,
 * its update counters, and the executor's scratch buffers.  Each suite is
 * its own program, so the statics are its own.
 */
#ifndef LATTICE_TESTS_ONE_CACHE_H
#define LATTICE_TESTS_ONE_CACHE_H

#include <check.h>
#include <string.h>
#include <urcu.h>

#include "lattice/alloc.h"
#include "types/types.h"

static lattice_region *region;
static lattice_meta_cache cache;
static exec_scratch scratch;

static void setup(void)
{
    rcu_register_thread();
    lattice_region_config rc = {"t", 0, 8, 0, LATTICE_REGION_REJECT};
    ck_assert_int_eq(lattice_region_create(&rc, &region), LATTICE_OK);
    memset(&cache, 0, sizeof cache);
    lattice_cache_config_init(&cache.cfg, "t");
    cache.cfg.partitions = 16;
    cache.cfg.max_value_bytes = 64;
    lattice_store_config sc = {"t", 16, region, NULL, NULL};
    ck_assert_int_eq(lattice_store_create(&sc, &cache.store), LATTICE_OK);
    cache.counter = lt_calloc(16, sizeof *cache.counter);
}

static void teardown(void)
{
    exec_scratch_free(&scratch);
    lattice_store_destroy(cache.store);
    lt_free(cache.counter);
    lattice_region_destroy(region);
    rcu_unregister_thread();
}

#endif
