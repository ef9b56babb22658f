/*
 * Frame checks without a network (fabric/frames.c): a frame with a bad
 * MAC, another protocol number, an unknown field, bytes that do not
 * decode, or above the cap is refused and counted under its reason; a good
 * one passes.
 */
#include <check.h>
#include <string.h>

#include "run_suite.h"
#include "base/base.h"
#include "lattice/alloc.h"
#include "fabric/fabric.h"

#define PROTO 3

static uint64_t malformed, oversized, auth, send_failed;
static uint8_t key_a[LT_FRAME_KEY_BYTES], key_b[LT_FRAME_KEY_BYTES];

static fab_frames checks(const uint8_t *key)
{
    malformed = oversized = auth = send_failed = 0;
    return (fab_frames){.key = key, .max_frame = 1u << 20, .proto = PROTO,
                        .count = {&malformed, &oversized, &auth, &send_failed}};
}

/* A packed Batch of one request (MAC under key when not NULL). */
static uint8_t *packed(uint32_t proto, const uint8_t *key, size_t *len, uint8_t mac[LT_FRAME_MAC_BYTES])
{
    Latdata__Req r = LATDATA__REQ__INIT;
    Latdata__Req *rs[1] = {&r};
    r.id = 42;
    r.cache = "c";
    Latdata__Batch b = LATDATA__BATCH__INIT;
    b.proto = proto;
    b.reqs = rs;
    b.n_reqs = 1;
    uint8_t *buf = NULL;
    ck_assert_int_eq(lt_frame_pack(&b.base, key, &buf, len, mac), LATTICE_OK);
    return buf;
}

static void setup(void)
{
    lt_frame_derive_key((const uint8_t *)"secret-a", 8, "test", key_a);
    lt_frame_derive_key((const uint8_t *)"secret-b", 8, "test", key_b);
}

START_TEST(a_good_frame_passes)
{
    fab_frames f = checks(key_a);
    uint8_t mac[LT_FRAME_MAC_BYTES];
    size_t len;
    uint8_t *buf = packed(PROTO, key_a, &len, mac);
    Latdata__Batch *b = fab_unpack_batch(&f, buf, len, mac, sizeof mac);
    ck_assert_ptr_nonnull(b);
    ck_assert_uint_eq(b->n_reqs, 1);
    ck_assert_uint_eq(b->reqs[0]->id, 42);
    fab_batch_free(b);
    ck_assert_uint_eq(malformed + oversized + auth + send_failed, 0);
    lt_free(buf);
}
END_TEST

START_TEST(a_bad_mac_is_refused_and_counted)
{
    fab_frames f = checks(key_b);
    uint8_t mac[LT_FRAME_MAC_BYTES];
    size_t len;
    uint8_t *buf = packed(PROTO, key_a, &len, mac); /* another cluster's secret */
    ck_assert_ptr_null(fab_unpack_batch(&f, buf, len, mac, sizeof mac));
    ck_assert_uint_eq(auth, 1);
    ck_assert_ptr_null(fab_unpack_batch(&f, buf, len, NULL, 0)); /* no MAC at all */
    ck_assert_uint_eq(auth, 2);
    f = checks(key_a);
    mac[0] ^= 1; /* one bit */
    ck_assert_ptr_null(fab_unpack_batch(&f, buf, len, mac, sizeof mac));
    ck_assert_uint_eq(auth, 1);
    ck_assert_uint_eq(malformed + oversized, 0);
    lt_free(buf);
}
END_TEST

START_TEST(another_protocol_is_refused_and_counted)
{
    fab_frames f = checks(NULL);
    uint8_t mac[LT_FRAME_MAC_BYTES];
    size_t len;
    uint8_t *buf = packed(PROTO + 1, NULL, &len, mac);
    ck_assert_ptr_null(fab_unpack_batch(&f, buf, len, NULL, 0));
    ck_assert_uint_eq(malformed, 1);
    ck_assert_uint_eq(auth + oversized, 0);
    lt_free(buf);
}
END_TEST

START_TEST(an_oversized_frame_is_refused_and_counted)
{
    fab_frames f = checks(NULL);
    uint8_t mac[LT_FRAME_MAC_BYTES];
    size_t len;
    uint8_t *buf = packed(PROTO, NULL, &len, mac);
    f.max_frame = len - 1;
    ck_assert_ptr_null(fab_unpack_batch(&f, buf, len, NULL, 0));
    ck_assert_uint_eq(oversized, 1);
    f.max_frame = len; /* at the cap: passes */
    Latdata__Batch *b = fab_unpack_batch(&f, buf, len, NULL, 0);
    ck_assert_ptr_nonnull(b);
    fab_batch_free(b);
    ck_assert_uint_eq(oversized, 1);
    lt_free(buf);
}
END_TEST

START_TEST(unknown_fields_and_garbage_are_refused_and_counted)
{
    fab_frames f = checks(NULL);
    uint8_t mac[LT_FRAME_MAC_BYTES];
    size_t len;
    uint8_t *buf = packed(PROTO, NULL, &len, mac);
    uint8_t *more = lt_malloc(len + 3);
    memcpy(more, buf, len);
    more[len] = 0x98; /* field 99, varint: one a newer peer might send */
    more[len + 1] = 0x06;
    more[len + 2] = 0x01;
    ck_assert_ptr_null(fab_unpack_batch(&f, more, len + 3, NULL, 0));
    ck_assert_uint_eq(malformed, 1);
    uint8_t junk[] = {0xff, 0xff, 0xff, 0xff};
    ck_assert_ptr_null(fab_unpack_batch(&f, junk, sizeof junk, NULL, 0));
    ck_assert_uint_eq(malformed, 2);
    fab_dropped(&f, FAB_DROP_MALFORMED, "a test's drop"); /* what the reader refused: counted the same way */
    ck_assert_uint_eq(malformed, 3);
    fab_frames quiet = {.max_frame = 10, .proto = PROTO}; /* no counters: still refused */
    ck_assert_ptr_null(fab_unpack_batch(&quiet, junk, sizeof junk, NULL, 0));
    lt_free(more);
    lt_free(buf);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("fabric: frames");
    TCase *tc = tcase_create("frames");
    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_add_test(tc, a_good_frame_passes);
    tcase_add_test(tc, a_bad_mac_is_refused_and_counted);
    tcase_add_test(tc, another_protocol_is_refused_and_counted);
    tcase_add_test(tc, an_oversized_frame_is_refused_and_counted);
    tcase_add_test(tc, unknown_fields_and_garbage_are_refused_and_counted);
    suite_add_tcase(s, tc);
    return lt_run_suite(s);
}
