/*
 * OBJECT ENCODING and MEMORY USAGE at the key's primary (LATTICE_COLL_OBJECT,
 * lattice/coll.h): a key of any type answers the encoding Redis 7.0 would
 * give its value - a string by its text, a hash or sorted set by its size
 * against the thresholds the command carries, a set by its row's format,
 * a list always quicklist - and its bytes; a missing key answers nil; the
 * command writes nothing.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <urcu.h>

#include "cache.pb-c.h"
#include "lattice/alloc.h"
#include "lattice/coll.h"
#include "run_suite.h"
#include "types/types.h"

#include "one_cache.h"
#include "coll_fixture.h"

/* OBJECT ENCODING of key under Redis's default thresholds (128 entries,
 * 64 bytes for hashes and sorted sets) or the ones given. */
#define ENC(key) run(LATTICE_COLL_OBJECT, key, "encoding", "128", "64", "128", "64", NULL)

static void put_string(const char *key, const char *v)
{
    exec_in in = {LATTICE_OP_PUT, 0, part(key), key, strlen(key), v, strlen(v), 0, 0};
    lattice_op_result r;
    exec_local(&cache, &in, &scratch, &r, &last_repl);
    ck_assert_int_eq(r.status, LATTICE_OK);
}

START_TEST(strings_by_their_text)
{
    put_string("i", "12345");
    SHOWS(ENC("i"), "$int");
    put_string("lead", "012");
    SHOWS(ENC("lead"), "$embstr");
    put_string("e", "hello");
    SHOWS(ENC("e"), "$embstr");
    char big[46];
    memset(big, 'x', 45), big[45] = 0;
    put_string("raw", big);
    SHOWS(ENC("raw"), "$raw");
    big[44] = 0;
    put_string("e44", big);
    SHOWS(ENC("e44"), "$embstr");
    SHOWS(ENC("nokey"), "_");
    SHOWS(run(LATTICE_COLL_OBJECT, "nokey", "memory", NULL), "_");
}
END_TEST

START_TEST(collections_by_size_and_format)
{
    cache.cfg.max_value_bytes = 4096; /* the fixture's 64 bytes hold no 65-byte field */
    SHOWS(run(LATTICE_COLL_HSET, "h", "f", "v", NULL), ":1");
    SHOWS(ENC("h"), "$listpack");
    /* a threshold of 0 entries: any hash is a hashtable (as the suite's
     * tests force it) */
    SHOWS(run(LATTICE_COLL_OBJECT, "h", "encoding", "0", "64", "128", "64", NULL), "$hashtable");
    char v65[66];
    memset(v65, 'v', 65), v65[65] = 0;
    SHOWS(run(LATTICE_COLL_HSET, "h", "g", v65, NULL), ":1");
    SHOWS(ENC("h"), "$hashtable");
    SHOWS(run(LATTICE_COLL_RPUSH, "l", "a", NULL), ":1");
    SHOWS(ENC("l"), "$quicklist");
    SHOWS(run(LATTICE_COLL_SADD, "s", "1", "2", NULL), ":2");
    SHOWS(ENC("s"), "$intset");
    SHOWS(run(LATTICE_COLL_SADD, "s", "x", NULL), ":1");
    SHOWS(ENC("s"), "$hashtable");
    SHOWS(run(LATTICE_COLL_ZADD, "z", "1", "a", "2", "b", NULL), ":2");
    SHOWS(ENC("z"), "$listpack");
    SHOWS(run(LATTICE_COLL_OBJECT, "z", "encoding", "128", "64", "1", "64", NULL), "$skiplist");
    SHOWS(run(LATTICE_COLL_ZADD, "z", "3", v65, NULL), ":1");
    SHOWS(ENC("z"), "$skiplist");
    SHOWS(run(LATTICE_COLL_ZREM, "z", v65, NULL), ":1");
    SHOWS(ENC("z"), "$listpack"); /* by size now: Lattice converts nothing (docs/TYPES.md) */
}
END_TEST

START_TEST(memory_counts_key_and_value_and_writes_nothing)
{
    cache.cfg.max_value_bytes = 4096;
    put_string("k", "value");
    lattice_op_result a = run(LATTICE_COLL_OBJECT, "k", "memory", NULL);
    ck_assert(!last_repl.needed);
    ck_assert_int_eq(a.status, LATTICE_OK);
    long long small = atoll(show(&a) + 1);
    ck_assert_int_gt(small, 1 + 5);
    char big[901]; /* what the fixture's packing takes */
    memset(big, 'b', 900), big[900] = 0;
    put_string("k", big);
    lattice_op_result b = run(LATTICE_COLL_OBJECT, "k", "memory", NULL);
    ck_assert_int_eq(atoll(show(&b) + 1) - small, 900 - 5);
    SHOWS(run(LATTICE_COLL_HSET, "h", "f", big, NULL), ":1");
    lattice_op_result h = run(LATTICE_COLL_OBJECT, "h", "memory", NULL);
    ck_assert_int_gt(atoll(show(&h) + 1), 900);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("types_object");
    TCase *t = tcase_create("object");
    tcase_add_checked_fixture(t, setup, teardown);
    tcase_add_test(t, strings_by_their_text);
    tcase_add_test(t, collections_by_size_and_format);
    tcase_add_test(t, memory_counts_key_and_value_and_writes_nothing);
    suite_add_tcase(s, t);
    return lt_run_suite(s);
}
