/*
 * resp/rdb.c: Redis's DUMP payload of strings - the CRC-64 check value,
 * LZF round trips and malformed streams, payload encodings and every
 * refusal RESTORE relies on.  (Byte identity with redis-server's DUMP is
 * it_resp_vs_redis's rmw_and_object.)
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "run_suite.h"
#include "lattice/alloc.h"
#include "rdb.h"

START_TEST(crc64_is_jones)
{
    /* Redis's crc64.c test vector. */
    ck_assert_uint_eq(rdb_crc64(0, "123456789", 9), 0xe9c6d914c4b8d9caull);
    ck_assert_uint_eq(rdb_crc64(0, "", 0), 0);
}
END_TEST

START_TEST(lzf_round_trips_and_refuses_malformed)
{
    static unsigned char in[70000], z[80000], back[70000];
    unsigned seed = 7;
    size_t sizes[] = {1, 2, 3, 4, 21, 100, 264, 265, 8193, 20000, 70000};
    for (int kind = 0; kind < 3; kind++)
        for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
            size_t n = sizes[s];
            for (size_t i = 0; i < n; i++) {
                seed = seed * 1103515245u + 12345u;
                in[i] = kind == 0 ? (unsigned char)(seed >> 16) : kind == 1 ? (unsigned char)(i % 7) : (unsigned char)"ab"[(seed >> 20) & 1];
            }
            size_t c = rdb_lzf_compress(in, n, z, sizeof z);
            ck_assert_msg(c > 0, "kind %d size %zu", kind, n);
            ck_assert_uint_eq(rdb_lzf_decompress(z, c, back, n), n);
            ck_assert_int_eq(memcmp(in, back, n), 0);
            /* One byte short of room: refused, not overrun. */
            ck_assert_uint_eq(rdb_lzf_decompress(z, c, back, n - 1), 0);
        }
    /* Repetitive input shrinks; an output cap too small refuses. */
    memset(in, 'a', 1000);
    size_t c = rdb_lzf_compress(in, 1000, z, sizeof z);
    ck_assert(c > 0 && c < 50);
    ck_assert_uint_eq(rdb_lzf_compress(in, 1000, z, c - 1), 0);
    /* A back reference before the start, a truncated literal, a missing offset byte. */
    ck_assert_uint_eq(rdb_lzf_decompress("\x20\x00", 2, back, 100), 0);
    ck_assert_uint_eq(rdb_lzf_decompress("\x05" "ab", 3, back, 100), 0);
    ck_assert_uint_eq(rdb_lzf_decompress("\x00" "a" "\x20", 3, back, 100), 0);
    ck_assert_uint_eq(rdb_lzf_decompress("\x00" "a" "\x20\x00", 4, back, 100), 4);
    ck_assert_int_eq(memcmp(back, "aaaa", 4), 0);
}
END_TEST

static void round_trip(const char *v, size_t n, unsigned char first_enc)
{
    char *p, *out;
    size_t pn, on;
    int type;
    ck_assert_int_eq(rdb_dump_string(v, n, &p, &pn), LATTICE_OK);
    ck_assert_int_eq((unsigned char)p[0], 0);
    ck_assert_msg((unsigned char)p[1] == first_enc, "'%.20s': encoding byte %02x", v, (unsigned char)p[1]);
    ck_assert_int_eq(p[pn - 10], 10); /* RDB version 10, little endian */
    ck_assert_int_eq(p[pn - 9], 0);
    ck_assert_int_eq(rdb_load_string(p, pn, &out, &on, &type), RDB_LOAD_OK);
    ck_assert_uint_eq(on, n);
    ck_assert_int_eq(memcmp(out, v, n), 0);
    lt_free(out);
    lt_free(p);
}

START_TEST(dump_encodings_round_trip)
{
    round_trip("", 0, 0x00);
    round_trip("hello", 5, 0x05);
    round_trip("-128", 4, 0xC0);
    round_trip("-129", 4, 0xC1);
    round_trip("32768", 5, 0xC2);
    round_trip("2147483648", 10, 0x0a); /* beyond int32: as text */
    round_trip("012", 3, 0x03);         /* not canonical: as text */
    static char big[20000];
    memset(big, 'z', sizeof big);
    round_trip(big, sizeof big, 0xC3);  /* LZF */
    for (size_t i = 0; i < 100; i++) big[i] = (char)(i * 37 + 11);
    round_trip(big, 100, 0x40);         /* incompressible, 14-bit length */
}
END_TEST

START_TEST(load_refuses_what_redis_refuses)
{
    char *p, *out;
    size_t pn, on;
    int type;
    ck_assert_int_eq(rdb_dump_string("hello", 5, &p, &pn), LATTICE_OK);
    ck_assert_int_eq(rdb_load_string(p, 9, &out, &on, &type), RDB_LOAD_BAD_CHECKSUM);
    p[pn - 1] ^= 1;
    ck_assert_int_eq(rdb_load_string(p, pn, &out, &on, &type), RDB_LOAD_BAD_CHECKSUM);
    p[pn - 1] ^= 1;
    /* A newer RDB version, even with a matching checksum. */
    p[pn - 10] = 11;
    uint64_t crc = rdb_crc64(0, p, pn - 8);
    for (int k = 0; k < 8; k++) p[pn - 8 + k] = (char)(crc >> (8 * k));
    ck_assert_int_eq(rdb_load_string(p, pn, &out, &on, &type), RDB_LOAD_BAD_CHECKSUM);
    /* Another type (a hash): NOT_STRING with its type; an unknown one: format. */
    p[pn - 10] = 10;
    for (int t = 0; t < 2; t++) {
        p[0] = t ? 99 : 4;
        crc = rdb_crc64(0, p, pn - 8);
        for (int k = 0; k < 8; k++) p[pn - 8 + k] = (char)(crc >> (8 * k));
        ck_assert_int_eq(rdb_load_string(p, pn, &out, &on, &type), t ? RDB_LOAD_BAD_FORMAT : RDB_LOAD_NOT_STRING);
        ck_assert_int_eq(type, t ? 99 : 4);
    }
    /* A length past the payload's end. */
    p[0] = 0;
    p[1] = 0x3f;
    crc = rdb_crc64(0, p, pn - 8);
    for (int k = 0; k < 8; k++) p[pn - 8 + k] = (char)(crc >> (8 * k));
    ck_assert_int_eq(rdb_load_string(p, pn, &out, &on, &type), RDB_LOAD_BAD_FORMAT);
    lt_free(p);
}
END_TEST

/* Bounded fuzzing: mutated payloads (bytes changed, cut short, lengths
 * forged) with their checksum made right again, so the decoder itself
 * meets them; it must answer, never overrun (run under valgrind or ASan
 * to see the latter), and a decoded value must round-trip. */
START_TEST(load_survives_mutated_payloads)
{
    static const char *const seeds[] = {"", "7", "-30000", "hello world", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
                                        "abcabcabcabcabcabcabcabcXabcabcabcabcabcabc"};
    unsigned seed = 12345;
    static unsigned char buf[256];
    for (int it = 0; it < 20000; it++) {
        const char *v = seeds[it % 6];
        char *p;
        size_t pn;
        ck_assert_int_eq(rdb_dump_string(v, strlen(v), &p, &pn), LATTICE_OK);
        memcpy(buf, p, pn);
        lt_free(p);
        size_t body = pn - 10;
        for (int m = 0; m < 1 + it % 4; m++) {
            seed = seed * 1103515245u + 12345u;
            size_t at = 1 + (seed >> 8) % (body > 1 ? body - 1 : 1);
            buf[at] = (unsigned char)(seed >> 20);
        }
        if (it % 5 == 0 && body > 2) body -= 1 + (seed >> 3) % (body - 1); /* cut short */
        buf[body] = 10;
        buf[body + 1] = 0;
        uint64_t crc = rdb_crc64(0, buf, body + 2);
        for (int k = 0; k < 8; k++) buf[body + 2 + k] = (unsigned char)(crc >> (8 * k));
        char *out = NULL;
        size_t on;
        int type;
        rdb_load_result lr = rdb_load_string(buf, body + 10, &out, &on, &type);
        ck_assert(lr == RDB_LOAD_OK || lr == RDB_LOAD_BAD_FORMAT || lr == RDB_LOAD_NOT_STRING);
        if (lr == RDB_LOAD_OK) {
            char *again, *back;
            size_t an, bn;
            ck_assert_int_eq(rdb_dump_string(out, on, &again, &an), LATTICE_OK);
            ck_assert_int_eq(rdb_load_string(again, an, &back, &bn, &type), RDB_LOAD_OK);
            ck_assert(bn == on && !memcmp(back, out, on));
            lt_free(again);
            lt_free(back);
            lt_free(out);
        }
    }
}
END_TEST

/* A value's type picks the payload's RDB type byte: a string's payload is
 * rdb_dump_string's byte for byte; the collection types name Redis 7.0's
 * type bytes and have no payload yet. */
START_TEST(dump_by_value_type)
{
    static const char *const vals[] = {"", "12", "-5", "hello", "abcdefghijabcdefghijabcdefghijabcdefghij"};
    for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++) {
        char *a, *b;
        size_t na, nb;
        ck_assert_int_eq(rdb_dump_string(vals[i], strlen(vals[i]), &a, &na), LATTICE_OK);
        ck_assert_int_eq(rdb_dump_value(0, vals[i], strlen(vals[i]), &b, &nb), LATTICE_OK);
        ck_assert_uint_eq(na, nb);
        ck_assert_mem_eq(a, b, na);
        ck_assert_uint_eq((unsigned char)b[0], 0);
        lt_free(a);
        lt_free(b);
    }
    ck_assert_int_eq(rdb_type_of_value(0), 0);
    ck_assert_int_eq(rdb_type_of_value(1), 16);
    ck_assert_int_eq(rdb_type_of_value(2), 18);
    ck_assert_int_eq(rdb_type_of_value(3), 2);
    ck_assert_int_eq(rdb_type_of_value(4), 17);
    ck_assert_int_eq(rdb_type_of_value(5), -1);
    char *p = NULL;
    size_t n = 0;
    for (unsigned t = 1; t <= 7; t++) ck_assert_int_eq(rdb_dump_value(t, "x", 1, &p, &n), LATTICE_ERR_UNSUPPORTED);
    ck_assert_ptr_null(p);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("resp_rdb");
    TCase *t = tcase_create("rdb");
    /* Check's default is 4 s a test: the mutated-payload loop under ASan
     * beside a build took longer in a CI run.  CTest's TIMEOUT bounds it. */
    tcase_set_timeout(t, 120);
    tcase_add_test(t, crc64_is_jones);
    tcase_add_test(t, lzf_round_trips_and_refuses_malformed);
    tcase_add_test(t, dump_encodings_round_trip);
    tcase_add_test(t, load_refuses_what_redis_refuses);
    tcase_add_test(t, load_survives_mutated_payloads);
    tcase_add_test(t, dump_by_value_type);
    suite_add_tcase(s, t);
    return lt_run_suite(s);
}
