/* The frame layer every peer channel receives through (base/base.h): size
 * cap, MAC with the cluster secret, decoding, and unknown fields refused at
 * every depth.  Uses the real wire schemas of the data channel (cache.proto)
 * and the control plane (discovery.proto). */
#include <check.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#include "run_suite.h"
#include "base/base.h"
#include "cache.pb-c.h"
#include "discovery.pb-c.h"
#include "lattice/alloc.h"

static uint8_t key[LT_FRAME_KEY_BYTES], other_key[LT_FRAME_KEY_BYTES];

static void setup(void)
{
    lt_frame_derive_key((const uint8_t *)"s3cret", 6, "lattice data channel v1", key);
    lt_frame_derive_key((const uint8_t *)"s3cres", 6, "lattice data channel v1", other_key);
}

static uint8_t one = 1;
static ProtobufCMessageUnknownField unknown50 = {
    .tag = 50, .wire_type = PROTOBUF_C_WIRE_TYPE_VARINT, .len = 1, .data = &one};

/* A data-channel batch: one request, metadata with one cache definition
 * (depth 2: Batch -> Meta -> CacheDef). */
typedef struct {
    Latdata__Batch b;
    Latdata__Req r, *rp;
    Latdata__Meta m;
    Latdata__CacheDef c, *cp;
} batch;

static void batch_init(batch *x)
{
    latdata__batch__init(&x->b);
    latdata__req__init(&x->r);
    latdata__meta__init(&x->m);
    latdata__cache_def__init(&x->c);
    x->b.proto = 1;
    x->r.kind = 2;
    x->r.cache = "default";
    x->r.key.data = (uint8_t *)"key-1";
    x->r.key.len = 5;
    x->r.value.data = (uint8_t *)"a value long enough to cut";
    x->r.value.len = strlen("a value long enough to cut");
    x->rp = &x->r;
    x->b.n_reqs = 1;
    x->b.reqs = &x->rp;
    x->c.spec = "default:backups=1";
    x->cp = &x->c;
    x->m.n_caches = 1;
    x->m.caches = &x->cp;
    x->b.meta = &x->m;
}

static uint8_t *pack(const ProtobufCMessage *m, const uint8_t *k, size_t *len, uint8_t mac[LT_FRAME_MAC_BYTES])
{
    uint8_t *buf = NULL;
    ck_assert_int_eq(lt_frame_pack(m, k, &buf, len, mac), LATTICE_OK);
    return buf;
}

static lt_frame_verdict unpack(const uint8_t *buf, size_t len, const uint8_t *mac, size_t mac_len, const uint8_t *k,
                               size_t max)
{
    ProtobufCMessage *m = (ProtobufCMessage *)&one; /* must be reset */
    lt_frame_verdict v = lt_frame_unpack(&latdata__batch__descriptor, buf, len, mac, mac_len, k, max, &m);
    if (v == LT_FRAME_OK) ck_assert_ptr_nonnull(m);
    else ck_assert_ptr_null(m);
    lt_frame_free(m);
    return v;
}

START_TEST(good_frame_round_trips_with_and_without_mac)
{
    batch x;
    batch_init(&x);
    uint8_t mac[LT_FRAME_MAC_BYTES];
    size_t len;
    uint8_t *buf = pack(&x.b.base, key, &len, mac);
    ProtobufCMessage *m = NULL;
    ck_assert_int_eq(lt_frame_unpack(&latdata__batch__descriptor, buf, len, mac, sizeof mac, key, len, &m),
                     LT_FRAME_OK);
    Latdata__Batch *b = (Latdata__Batch *)m;
    ck_assert_uint_eq(b->proto, 1);
    ck_assert_uint_eq(b->n_reqs, 1);
    ck_assert_str_eq(b->reqs[0]->cache, "default");
    ck_assert_mem_eq(b->reqs[0]->key.data, "key-1", 5);
    ck_assert_str_eq(b->meta->caches[0]->spec, "default:backups=1");
    lt_frame_free(m);
    lt_free(buf);
    /* No secret on either side: no MAC frame. */
    buf = pack(&x.b.base, NULL, &len, mac);
    ck_assert_int_eq(unpack(buf, len, NULL, 0, NULL, 4096), LT_FRAME_OK);
    lt_free(buf);
}
END_TEST

START_TEST(oversized_frame_is_refused_before_anything_else)
{
    batch x;
    batch_init(&x);
    uint8_t mac[LT_FRAME_MAC_BYTES];
    size_t len;
    uint8_t *buf = pack(&x.b.base, key, &len, mac);
    ck_assert_int_eq(unpack(buf, len, mac, sizeof mac, key, len), LT_FRAME_OK); /* the cap is inclusive */
    ck_assert_int_eq(unpack(buf, len, mac, sizeof mac, key, len - 1), LT_FRAME_OVERSIZED);
    /* Size is checked first: even a frame that would fail its MAC counts as oversized. */
    ck_assert_int_eq(unpack(buf, len, NULL, 0, key, len - 1), LT_FRAME_OVERSIZED);
    lt_free(buf);
}
END_TEST

START_TEST(truncated_frame_is_malformed_or_fails_its_mac)
{
    batch x;
    batch_init(&x);
    uint8_t mac[LT_FRAME_MAC_BYTES];
    size_t len;
    uint8_t *buf = pack(&x.b.base, NULL, &len, mac);
    ck_assert_int_eq(unpack(buf, 0, NULL, 0, NULL, 4096), LT_FRAME_MALFORMED);
    /* Cut inside the last length-delimited field (the metadata). */
    ck_assert_int_eq(unpack(buf, len - 1, NULL, 0, NULL, 4096), LT_FRAME_MALFORMED);
    /* Every cut either fails to decode or decodes into a complete message of
     * its own (a cut between fields); none crashes or leaks. */
    for (size_t cut = 1; cut < len; cut++) {
        lt_frame_verdict v = unpack(buf, cut, NULL, 0, NULL, 4096);
        ck_assert(v == LT_FRAME_MALFORMED || v == LT_FRAME_OK);
    }
    lt_free(buf);
    /* With a secret, a truncated frame never passes the MAC of the whole. */
    buf = pack(&x.b.base, key, &len, mac);
    for (size_t cut = 0; cut < len; cut++) ck_assert_int_eq(unpack(buf, cut, mac, sizeof mac, key, 4096), LT_FRAME_AUTH);
    lt_free(buf);
}
END_TEST

START_TEST(bad_mac_is_refused)
{
    batch x;
    batch_init(&x);
    uint8_t mac[LT_FRAME_MAC_BYTES];
    size_t len;
    uint8_t *buf = pack(&x.b.base, key, &len, mac);
    ck_assert_int_eq(unpack(buf, len, mac, sizeof mac, other_key, 4096), LT_FRAME_AUTH); /* another secret */
    ck_assert_int_eq(unpack(buf, len, NULL, 0, key, 4096), LT_FRAME_AUTH);               /* no MAC frame */
    ck_assert_int_eq(unpack(buf, len, mac, sizeof mac - 1, key, 4096), LT_FRAME_AUTH);   /* short MAC */
    ck_assert_int_eq(unpack(buf, len, mac, sizeof mac, NULL, 4096), LT_FRAME_AUTH);      /* we have no secret */
    mac[7] ^= 1;
    ck_assert_int_eq(unpack(buf, len, mac, sizeof mac, key, 4096), LT_FRAME_AUTH);
    mac[7] ^= 1;
    buf[len / 2] ^= 0x40; /* a flipped body bit */
    ck_assert_int_eq(unpack(buf, len, mac, sizeof mac, key, 4096), LT_FRAME_AUTH);
    buf[len / 2] ^= 0x40;
    ck_assert_int_eq(unpack(buf, len, mac, sizeof mac, key, 4096), LT_FRAME_OK);
    lt_free(buf);
}
END_TEST

START_TEST(unknown_field_at_any_depth_is_malformed)
{
    uint8_t mac[LT_FRAME_MAC_BYTES];
    size_t len;
    uint8_t *buf;
    /* depth 0, 1 (a repeated Req) and 2 (Batch -> Meta -> repeated CacheDef),
     * each also with a valid MAC: authenticated is not enough. */
    for (int depth = 0; depth <= 2; depth++) {
        batch x;
        batch_init(&x);
        ProtobufCMessage *at = depth == 0 ? &x.b.base : depth == 1 ? &x.r.base : &x.c.base;
        at->n_unknown_fields = 1;
        at->unknown_fields = &unknown50;
        buf = pack(&x.b.base, key, &len, mac);
        ck_assert_int_eq(unpack(buf, len, mac, sizeof mac, key, 4096), LT_FRAME_MALFORMED);
        lt_free(buf);
    }
    /* The control plane's envelope: Envelope -> JoinRequest (oneof) -> Member. */
    Latdisc__Envelope e = LATDISC__ENVELOPE__INIT;
    Latdisc__JoinRequest j = LATDISC__JOIN_REQUEST__INIT;
    Latdisc__Member m = LATDISC__MEMBER__INIT;
    m.id = "x";
    j.self = &m;
    e.body_case = LATDISC__ENVELOPE__BODY_JOIN;
    e.join = &j;
    buf = pack(&e.base, NULL, &len, mac);
    ProtobufCMessage *out = NULL;
    ck_assert_int_eq(lt_frame_unpack(&latdisc__envelope__descriptor, buf, len, NULL, 0, NULL, 4096, &out), LT_FRAME_OK);
    lt_frame_free(out);
    lt_free(buf);
    m.base.n_unknown_fields = 1;
    m.base.unknown_fields = &unknown50;
    buf = pack(&e.base, NULL, &len, mac);
    ck_assert_int_eq(lt_frame_unpack(&latdisc__envelope__descriptor, buf, len, NULL, 0, NULL, 4096, &out),
                     LT_FRAME_MALFORMED);
    ck_assert_ptr_null(out);
    lt_free(buf);
    /* protobuf-c 1.4 keeps an overlong tag for field 0 as an unknown field. */
    const uint8_t odd[] = {0x0a, 0x00, 0x80, 0x00, 0x00};
    ck_assert_int_eq(unpack(odd, sizeof odd, NULL, 0, NULL, 4096), LT_FRAME_MALFORMED);
}
END_TEST

START_TEST(allocation_failure_while_decoding_is_a_drop)
{
    batch x;
    batch_init(&x);
    uint8_t mac[LT_FRAME_MAC_BYTES];
    size_t len;
    uint8_t *buf = pack(&x.b.base, NULL, &len, mac);
    for (uint64_t nth = 1; nth <= 6; nth++) {
        lattice_alloc_fail_nth(nth);
        lt_frame_verdict v = unpack(buf, len, NULL, 0, NULL, 4096);
        lattice_alloc_fail_nth(0);
        ck_assert(v == LT_FRAME_MALFORMED || v == LT_FRAME_OK);
    }
    lt_free(buf);
    lattice_alloc_fail_nth(1);
    ck_assert_int_eq(lt_frame_pack(&x.b.base, NULL, &buf, &len, mac), LATTICE_ERR_NOMEM);
    lattice_alloc_fail_nth(0);
}
END_TEST

START_TEST(keys_are_blake2b_of_the_secret_keyed_by_the_channel)
{
    /* The derivation is part of the wire: nodes of older builds compute it
     * with crypto_generichash(secret, key = context). */
    static const char *ctx[] = {"lattice data channel v1", "lattice cluster secret v1"};
    uint8_t a[LT_FRAME_KEY_BYTES], b[LT_FRAME_KEY_BYTES], want[LT_FRAME_KEY_BYTES];
    lt_frame_derive_key((const uint8_t *)"s3cret", 6, ctx[0], a);
    lt_frame_derive_key((const uint8_t *)"s3cret", 6, ctx[1], b);
    ck_assert_mem_ne(a, b, sizeof a);
    for (int i = 0; i < 2; i++) {
        crypto_generichash(want, sizeof want, (const uint8_t *)"s3cret", 6, (const uint8_t *)ctx[i], strlen(ctx[i]));
        ck_assert_mem_eq(i ? b : a, want, sizeof want);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("base_frame");
    TCase *tc = tcase_create("frame");
    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_add_test(tc, good_frame_round_trips_with_and_without_mac);
    tcase_add_test(tc, oversized_frame_is_refused_before_anything_else);
    tcase_add_test(tc, truncated_frame_is_malformed_or_fails_its_mac);
    tcase_add_test(tc, bad_mac_is_refused);
    tcase_add_test(tc, unknown_field_at_any_depth_is_malformed);
    tcase_add_test(tc, allocation_failure_while_decoding_is_a_drop);
    tcase_add_test(tc, keys_are_blake2b_of_the_secret_keyed_by_the_channel);
    suite_add_tcase(s, tc);
    return lt_run_suite(s);
}
