/*
 * resp/rdb.c: Redis's DUMP payload of strings - the CRC-64 check value,
 * LZF round trips and malformed streams, payload encodings and every
 * refusal RESTORE relies on.  (Byte identity with redis-server's DUMP is
 * it_resp_vs_redis's rmw_and_object.)
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
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
    /* A type Lattice holds no value of (a stream): NOT_STRING with its
     * type; an unknown one: format. */
    p[pn - 10] = 10;
    for (int t = 0; t < 2; t++) {
        p[0] = t ? 99 : 15;
        crc = rdb_crc64(0, p, pn - 8);
        for (int k = 0; k < 8; k++) p[pn - 8 + k] = (char)(crc >> (8 * k));
        ck_assert_int_eq(rdb_load_string(p, pn, &out, &on, &type), t ? RDB_LOAD_BAD_FORMAT : RDB_LOAD_NOT_STRING);
        ck_assert_int_eq(type, t ? 99 : 15);
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
 * rdb_dump_string's byte for byte; each collection type takes Redis's plain
 * encoding, and what is dumped loads back the same. */
static rdb_value val(int type, rdb_elem *e, size_t n)
{
    rdb_value v = {type, e, n, NULL, 0};
    return v;
}

static void value_round_trip(const rdb_value *v, int rdb_type)
{
    char *p;
    size_t n;
    ck_assert_int_eq(rdb_dump_value(v, &p, &n), LATTICE_OK);
    ck_assert_int_eq((unsigned char)p[0], rdb_type);
    rdb_value back;
    int t;
    ck_assert_int_eq(rdb_load_value(p, n, &back, &t), RDB_LOAD_OK);
    ck_assert_int_eq(t, rdb_type);
    ck_assert_int_eq(back.type, v->type);
    ck_assert_uint_eq(back.n, v->n);
    for (size_t i = 0; i < v->n; i++) {
        ck_assert_uint_eq(back.v[i].len, v->v[i].len);
        ck_assert_mem_eq(back.v[i].p, v->v[i].p, v->v[i].len);
        if (v->type == 4) ck_assert(back.v[i].score == v->v[i].score);
    }
    rdb_value_free(&back);
    lt_free(p);
}

START_TEST(dump_by_value_type)
{
    static const char *const vals[] = {"", "12", "-5", "hello", "abcdefghijabcdefghijabcdefghijabcdefghij"};
    for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++) {
        char *a, *b;
        size_t na, nb;
        rdb_elem e = {vals[i], strlen(vals[i]), 0};
        rdb_value v = val(0, &e, 1);
        ck_assert_int_eq(rdb_dump_string(vals[i], strlen(vals[i]), &a, &na), LATTICE_OK);
        ck_assert_int_eq(rdb_dump_value(&v, &b, &nb), LATTICE_OK);
        ck_assert_uint_eq(na, nb);
        ck_assert_mem_eq(a, b, na);
        ck_assert_uint_eq((unsigned char)b[0], 0);
        lt_free(a);
        lt_free(b);
    }
    ck_assert_int_eq(rdb_type_of_value(0), 0);
    ck_assert_int_eq(rdb_type_of_value(1), 4);
    ck_assert_int_eq(rdb_type_of_value(2), 1);
    ck_assert_int_eq(rdb_type_of_value(3), 2);
    ck_assert_int_eq(rdb_type_of_value(4), 5);
    ck_assert_int_eq(rdb_type_of_value(5), -1);
    rdb_elem h[] = {{"f", 1, 0}, {"12", 2, 0}, {"long value long value long value", 32, 0}, {"", 0, 0}};
    rdb_value v = val(1, h, 4);
    value_round_trip(&v, 4);
    v = val(2, h, 3);
    value_round_trip(&v, 1);
    v = val(3, h, 4);
    value_round_trip(&v, 2);
    rdb_elem z[] = {{"a", 1, -1.5}, {"b", 1, 1e300}, {"c", 1, INFINITY}, {"d", 1, 0.1}};
    v = val(4, z, 4);
    value_round_trip(&v, 5);
    char *p = NULL;
    size_t n = 0;
    v = val(1, h, 3); /* a hash of an odd count */
    ck_assert_int_eq(rdb_dump_value(&v, &p, &n), LATTICE_ERR_INVAL);
    v = val(7, h, 1);
    ck_assert_int_eq(rdb_dump_value(&v, &p, &n), LATTICE_ERR_INVAL);
    ck_assert_ptr_null(p);
}
END_TEST

/* A payload of type t whose body is b[0..n), version 10 and its CRC after. */
static size_t payload(unsigned char *out, int t, const unsigned char *b, size_t n)
{
    out[0] = (unsigned char)t;
    memcpy(out + 1, b, n);
    out[1 + n] = 10;
    out[2 + n] = 0;
    uint64_t crc = rdb_crc64(0, out, n + 3);
    for (int k = 0; k < 8; k++) out[n + 3 + k] = (unsigned char)(crc >> (8 * k));
    return n + 11;
}

static void shows(const unsigned char *p, size_t n, int type, const char *want)
{
    rdb_value v;
    int t;
    ck_assert_int_eq(rdb_load_value(p, n, &v, &t), RDB_LOAD_OK);
    ck_assert_int_eq(v.type, type);
    char got[512] = "";
    size_t at = 0;
    for (size_t i = 0; i < v.n; i++) {
        at += (size_t)snprintf(got + at, sizeof got - at, "%s%.*s", i ? " " : "", (int)v.v[i].len, v.v[i].p);
        if (type == 4) at += (size_t)snprintf(got + at, sizeof got - at, "=%g", v.v[i].score);
    }
    ck_assert_str_eq(got, want);
    rdb_value_free(&v);
}

/* Redis 7.0's small encodings, as it DUMPs them (the bytes of
 * redis-server 7.0.15's payloads of these commands): a listpack hash, an intset, a listpack sorted set with an
 * integer and a text score, a quicklist of one packed and one plain node. */
START_TEST(load_redis_small_encodings)
{
    static unsigned char p[512];
    /* HSET h f v n 7: listpack of 4 entries "f" "v" "n" 7 */
    static const unsigned char lp_hash[] = {0x12, 0x12, 0, 0, 0, 4, 0, 0x81, 'f', 2, 0x81, 'v', 2,
                                            0x81, 'n', 2, 7, 1, 0xff};
    shows(p, payload(p, 16, lp_hash, sizeof lp_hash), 1, "f v n 7");
    /* SADD s 5 -2 70000: intset of 4-byte integers, sorted */
    static const unsigned char is[] = {0x14, 4, 0, 0, 0, 3, 0, 0, 0, 0xfe, 0xff, 0xff, 0xff, 5, 0, 0, 0,
                                       0x70, 0x11, 0x01, 0};
    shows(p, payload(p, 11, is, sizeof is), 3, "-2 5 70000");
    /* ZADD z 1.5 a 300 b: "a" "1.5" "b" 300 (13-bit integer) */
    static const unsigned char lp_z[] = {0x15, 0x15, 0, 0, 0, 4, 0, 0x81, 'a', 2, 0x83, '1', '.', '5', 4,
                                         0x81, 'b', 2, 0xc1, 0x2c, 2, 0xff};
    shows(p, payload(p, 17, lp_z, sizeof lp_z), 4, "a=1.5 b=300");
    /* RPUSH l x -1 then a plain node "big": quicklist 2 nodes */
    static const unsigned char ql[] = {2, 2, 0x0d, 0x0d, 0, 0, 0, 2, 0, 0x81, 'x', 2, 0xdf, 0xff, 2, 0xff,
                                       1, 3, 'b', 'i', 'g'};
    shows(p, payload(p, 18, ql, sizeof ql), 2, "x -1 big");
    /* An empty collection, a listpack's count of bytes wrong, a hash of
     * an odd count: format errors. */
    static const unsigned char empty[] = {0};
    rdb_value v;
    int t;
    ck_assert_int_eq(rdb_load_value(p, payload(p, 2, empty, 1), &v, &t), RDB_LOAD_BAD_FORMAT);
    unsigned char bad[sizeof lp_hash];
    memcpy(bad, lp_hash, sizeof bad);
    bad[1] = 17;
    ck_assert_int_eq(rdb_load_value(p, payload(p, 16, bad, sizeof bad), &v, &t), RDB_LOAD_BAD_FORMAT);
    static const unsigned char odd[] = {0x0a, 0x0a, 0, 0, 0, 1, 0, 0x81, 'f', 2, 0xff};
    ck_assert_int_eq(rdb_load_value(p, payload(p, 16, odd, sizeof odd), &v, &t), RDB_LOAD_BAD_FORMAT);
}
END_TEST

/* The fuzz of load_survives_mutated_payloads over collection payloads:
 * every answer a result, never an overrun; what loads dumps and loads
 * back the same. */
START_TEST(load_survives_mutated_collections)
{
    static const unsigned char lp_hash[] = {0x12, 0x12, 0, 0, 0, 4, 0, 0x81, 'f', 2, 0x81, 'v', 2,
                                            0x81, 'n', 2, 7, 1, 0xff};
    static const unsigned char is[] = {0x14, 4, 0, 0, 0, 3, 0, 0, 0, 0xfe, 0xff, 0xff, 0xff, 5, 0, 0, 0,
                                       0x70, 0x11, 0x01, 0};
    static const unsigned char ql[] = {2, 2, 0x0d, 0x0d, 0, 0, 0, 2, 0, 0x81, 'x', 2, 0xdf, 0xff, 2, 0xff,
                                       1, 3, 'b', 'i', 'g'};
    rdb_elem z[] = {{"a", 1, -1.5}, {"bb", 2, 2}, {"ccc", 3, 3}};
    rdb_value zv = val(4, z, 3);
    char *zp;
    size_t zn;
    ck_assert_int_eq(rdb_dump_value(&zv, &zp, &zn), LATTICE_OK);
    struct {
        int t;
        const unsigned char *b;
        size_t n;
    } seeds[] = {{16, lp_hash, sizeof lp_hash}, {11, is, sizeof is}, {18, ql, sizeof ql},
                 {5, (const unsigned char *)zp + 1, zn - 11}};
    unsigned seed = 777;
    static unsigned char body[256], buf[300];
    for (int it = 0; it < 40000; it++) {
        size_t k = (size_t)it % 4, n = seeds[k].n;
        memcpy(body, seeds[k].b, n);
        for (int m = 0; m < 1 + it % 3; m++) {
            seed = seed * 1103515245u + 12345u;
            body[(seed >> 8) % n] = (unsigned char)(seed >> 20);
        }
        if (it % 7 == 0 && n > 2) n -= 1 + (seed >> 3) % (n - 1);
        size_t pn = payload(buf, seeds[k].t, body, n);
        rdb_value v;
        int t;
        rdb_load_result lr = rdb_load_value(buf, pn, &v, &t);
        ck_assert(lr == RDB_LOAD_OK || lr == RDB_LOAD_BAD_FORMAT);
        if (lr != RDB_LOAD_OK) continue;
        if (v.type == 1 && v.n % 2) ck_abort_msg("a hash of an odd count loaded");
        value_round_trip(&v, rdb_type_of_value((unsigned)v.type));
        rdb_value_free(&v);
    }
    lt_free(zp);
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
    tcase_add_test(t, load_redis_small_encodings);
    tcase_add_test(t, load_survives_mutated_collections);
    suite_add_tcase(s, t);
    return lt_run_suite(s);
}
