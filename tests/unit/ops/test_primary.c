/*
 * The primary's pieces on a real store without a network: what it does for
 * a copy that had no room for a write, and the requests it builds.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <urcu.h>

#include "run_suite.h"
#include "lattice/alloc.h"
#include "ops_int.h"

#include "../types/one_cache.h"

START_TEST(request_copies_its_bytes)
{
    char key[] = "key", val[] = "value";
    Latdata__Req *r = chan_req_new(LATTICE_OP_PUT, "cache", key, 3, val, 5);
    ck_assert_ptr_nonnull(r);
    key[0] = 'X';
    val[0] = 'X';
    ck_assert_str_eq(r->cache, "cache");
    ck_assert_int_eq(memcmp(r->key.data, "key", 3), 0);
    ck_assert_int_eq(memcmp(r->value.data, "value", 5), 0);
    /* Packs and unpacks to the same fields; an unknown field is visible. */
    size_t n = latdata__req__get_packed_size(r);
    uint8_t *buf = malloc(n + 4);
    latdata__req__pack(r, buf);
    buf[n] = 0xf8; /* field 31, varint: unknown to us */
    buf[n + 1] = 0x01;
    buf[n + 2] = 0x05;
    Latdata__Req *u = latdata__req__unpack(NULL, n + 3, buf);
    ck_assert_ptr_nonnull(u);
    ck_assert_uint_eq(u->kind, LATTICE_OP_PUT);
    ck_assert_uint_eq(u->base.n_unknown_fields, 1);
    latdata__req__free_unpacked(u, NULL);
    ck_assert_ptr_null(latdata__req__unpack(NULL, 2, (const uint8_t *)"\x0a\xff"));
    free(buf);
    lt_free(r);
}
END_TEST

/* Issue #32, part 3: a copy answered REGION_FULL for a full_sync write of
 * version v; what the primary does follows from the key's state in its own
 * store.  Still at v: make room and send it again.  Newer: a later write
 * went to the copy after it, nothing to send.  Gone (removed, evicted, or
 * expired since): send a remove at v, as the write again would bring the
 * key back on the copy. */
START_TEST(room_action_follows_the_primary_store)
{
    lattice_store_entry e = {3, "k", 1, "v1", 2, 0, 5, 0};
    ck_assert_int_eq(lattice_store_put(cache.store, &e, 0), LATTICE_OK);
    ck_assert_int_eq(primary_room_action(&cache, 3, "k", 1, 5), ROOM_EVICT);
    ck_assert_int_eq(primary_room_action(&cache, 3, "k", 1, 4), ROOM_SUPERSEDED);
    ck_assert_int_eq(primary_room_action(&cache, 3, "k", 1, 6), ROOM_NONE); /* newer than the store: cannot be */
    ck_assert_int_eq(primary_room_action(&cache, 3, "absent", 6, 5), ROOM_REMOVE);
    ck_assert_int_eq(lattice_store_remove_v(cache.store, 3, "k", 1, 6), LATTICE_OK);
    ck_assert_int_eq(primary_room_action(&cache, 3, "k", 1, 5), ROOM_REMOVE);
    lattice_store_entry gone = {3, "x", 1, "v", 1, 1 /* expired long ago */, 7, 0};
    ck_assert_int_eq(lattice_store_put(cache.store, &gone, 0), LATTICE_OK);
    ck_assert_int_eq(primary_room_action(&cache, 3, "x", 1, 7), ROOM_REMOVE);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("ops_primary");
    TCase *t = tcase_create("primary");
    tcase_add_checked_fixture(t, setup, teardown);
    tcase_add_test(t, room_action_follows_the_primary_store);
    tcase_add_test(t, request_copies_its_bytes);
    suite_add_tcase(s, t);
    return lt_run_suite(s);
}
