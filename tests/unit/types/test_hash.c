/*
 * Hashes in types/ without a network (LATTICE_OP_COLL_*, lattice/coll.h):
 * each command executed on a real store, its reply read back with
 * lattice_coll_reply_next; the row a write replicates applied on a second
 * store (a copy) answers the same; what Redis checks before the key is
 * looked up comes first; a value of another type is WRONGTYPE both ways;
 * the last field's HDEL removes the key; the key's expiry survives writes;
 * bad packed arguments and a kind that does not match the command are
 * refused before anything is read.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <urcu.h>

#include "cache.pb-c.h"
#include "lattice/alloc.h"
#include "lattice/clock.h"
#include "lattice/coll.h"
#include "run_suite.h"
#include "types/types.h"

#include "one_cache.h"
#include "coll_fixture.h"

START_TEST(fields_keep_their_order_and_the_counts_are_redis)
{
    SHOWS(run(LATTICE_COLL_HSET, "h", "a", "1", "b", "2", "a", "3", NULL), ":2");
    ck_assert(last_repl.needed && !last_repl.remove);
    ck_assert_int_eq(last_repl.type, LATTICE_TYPE_HASH);
    SHOWS(run(LATTICE_COLL_HGETALL, "h", NULL), "%2 $a $3 $b $2");
    SHOWS(run(LATTICE_COLL_HSET, "h", "c", "x", "a", "9", NULL), ":1");
    SHOWS(run(LATTICE_COLL_HKEYS, "h", NULL), "*3 $a $b $c");
    SHOWS(run(LATTICE_COLL_HVALS, "h", NULL), "*3 $9 $2 $x");
    SHOWS(run(LATTICE_COLL_HMSET, "h", "b", "", NULL), "+OK");
    SHOWS(run(LATTICE_COLL_HGET, "h", "b", NULL), "$");
    SHOWS(run(LATTICE_COLL_HGET, "h", "zz", NULL), "_");
    SHOWS(run(LATTICE_COLL_HMGET, "h", "c", "zz", "a", NULL), "*3 $x _ $9");
    SHOWS(run(LATTICE_COLL_HLEN, "h", NULL), ":3");
    SHOWS(run(LATTICE_COLL_HSTRLEN, "h", "c", NULL), ":1");
    SHOWS(run(LATTICE_COLL_HEXISTS, "h", "zz", NULL), ":0");
    SHOWS(run(LATTICE_COLL_HSETNX, "h", "a", "new", NULL), ":0");
    ck_assert(!last_repl.needed); /* nothing written, nothing replicated */
    SHOWS(run(LATTICE_COLL_HSETNX, "h", "d", "new", NULL), ":1");
    /* a deleted field that comes back goes last */
    SHOWS(run(LATTICE_COLL_HDEL, "h", "a", "a", "nope", NULL), ":1");
    SHOWS(run(LATTICE_COLL_HSET, "h", "a", "1", NULL), ":1");
    SHOWS(run(LATTICE_COLL_HKEYS, "h", NULL), "*4 $b $c $d $a");
    /* absent keys */
    SHOWS(run(LATTICE_COLL_HGETALL, "none", NULL), "%0");
    SHOWS(run(LATTICE_COLL_HKEYS, "none", NULL), "*0");
    SHOWS(run(LATTICE_COLL_HMGET, "none", "a", NULL), "*1 _");
    SHOWS(run(LATTICE_COLL_HLEN, "none", NULL), ":0");
    SHOWS(run(LATTICE_COLL_HDEL, "none", "a", NULL), ":0");
    ck_assert(!last_repl.needed);
}
END_TEST

START_TEST(the_last_field_gone_removes_the_key)
{
    SHOWS(run(LATTICE_COLL_HSET, "h", "a", "1", "b", "2", NULL), ":2");
    SHOWS(run(LATTICE_COLL_HDEL, "h", "a", "b", NULL), ":2");
    ck_assert(last_repl.needed && last_repl.remove);
    lattice_store_meta m = {0};
    ck_assert_int_eq(lattice_store_get(cache.store, part("h"), "h", 1, NULL, 0, &m), LATTICE_ERR_NOT_FOUND);
}
END_TEST

START_TEST(numbers_in_fields)
{
    SHOWS(run(LATTICE_COLL_HINCRBY, "n", "i", "5", NULL), ":5");
    SHOWS(run(LATTICE_COLL_HINCRBY, "n", "i", "-7", NULL), ":-2");
    SHOWS(run(LATTICE_COLL_HINCRBY, "n", "i", "x", NULL), "-ERR value is not an integer or out of range");
    SHOWS(run(LATTICE_COLL_HSET, "n", "s", "abc", "big", "9223372036854775807", NULL), ":2");
    SHOWS(run(LATTICE_COLL_HINCRBY, "n", "s", "1", NULL), "-ERR hash value is not an integer");
    SHOWS(run(LATTICE_COLL_HINCRBY, "n", "big", "1", NULL), "-ERR increment or decrement would overflow");
    SHOWS(run(LATTICE_COLL_HINCRBYFLOAT, "n", "f", "10.5", NULL), "$10.5");
    SHOWS(run(LATTICE_COLL_HINCRBYFLOAT, "n", "f", "0.1", NULL), "$10.6");
    SHOWS(run(LATTICE_COLL_HINCRBYFLOAT, "n", "i", "5.0e3", NULL), "$4998");
    SHOWS(run(LATTICE_COLL_HINCRBYFLOAT, "n", "s", "1", NULL), "-ERR hash value is not a float");
    SHOWS(run(LATTICE_COLL_HINCRBYFLOAT, "n", "f", "x", NULL), "-ERR value is not a valid float");
    SHOWS(run(LATTICE_COLL_HGET, "n", "i", NULL), "$4998");
}
END_TEST

START_TEST(arguments_first_then_the_key)
{
    lattice_store_entry e = {part("s"), "s", 1, "str", 3, 0, 1, LATTICE_TYPE_STRING};
    ck_assert_int_eq(lattice_store_put(cache.store, &e, 0), LATTICE_OK);
    cache.counter[part("s")] = 1;
    /* Redis checks these before it looks the key up */
    SHOWS(run(LATTICE_COLL_HSET, "s", "a", NULL), "-ERR wrong number of arguments for 'hset' command");
    SHOWS(run(LATTICE_COLL_HINCRBY, "s", "f", "1.5", NULL), "-ERR value is not an integer or out of range");
    SHOWS(run(LATTICE_COLL_HRANDFIELD, "s", "1", "values", NULL), "-ERR syntax error");
    SHOWS(run(LATTICE_COLL_HSCAN, "s", "x", NULL), "-ERR invalid cursor");
    /* then WRONGTYPE, with the type it holds */
    lattice_op_result r = run(LATTICE_COLL_HGET, "s", "f", NULL);
    ck_assert_int_eq(r.status, LATTICE_ERR_WRONGTYPE);
    ck_assert_uint_eq(LATTICE_OP_R_TYPE(r.flags), LATTICE_TYPE_STRING);
    r = run(LATTICE_COLL_HSET, "s", "f", "v", NULL);
    ck_assert_int_eq(r.status, LATTICE_ERR_WRONGTYPE);
    ck_assert(!last_repl.needed);
    /* and a string kind on a hash */
    SHOWS(run(LATTICE_COLL_HSET, "h", "a", "1", NULL), ":1");
    exec_in in = {LATTICE_OP_APPEND, 0, part("h"), "h", 1, "x", 1, 0, 0};
    exec_local(&cache, &in, &scratch, &r, &last_repl);
    ck_assert_int_eq(r.status, LATTICE_ERR_WRONGTYPE);
    /* HSCAN's options come after the key: an absent key is an empty scan */
    SHOWS(run(LATTICE_COLL_HSCAN, "none", "0", "COUNT", "0", NULL), "*2 $0 *0");
    SHOWS(run(LATTICE_COLL_HSCAN, "h", "0", "COUNT", "0", NULL), "-ERR syntax error");
}
END_TEST

START_TEST(scan_and_random_fields)
{
    SHOWS(run(LATTICE_COLL_HSET, "h", "ab", "1", "b", "2", "ac", "3", NULL), ":3");
    SHOWS(run(LATTICE_COLL_HSCAN, "h", "0", NULL), "*2 $0 *6 $ab $1 $b $2 $ac $3");
    SHOWS(run(LATTICE_COLL_HSCAN, "h", "0", "MATCH", "a*", "COUNT", "1", NULL), "*2 $0 *4 $ab $1 $ac $3");
    SHOWS(run(LATTICE_COLL_HRANDFIELD, "h", "0", NULL), "*0");
    SHOWS(run(LATTICE_COLL_HRANDFIELD, "h", "5", NULL), "*3 $ab $b $ac"); /* more than it has: all of them */
    SHOWS(run(LATTICE_COLL_HRANDFIELD, "none", NULL), "_");
    SHOWS(run(LATTICE_COLL_HRANDFIELD, "none", "3", NULL), "*0");
    lattice_op_result r = run(LATTICE_COLL_HRANDFIELD, "h", "-5", "WITHVALUES", NULL);
    ck_assert_int_eq(r.status, LATTICE_OK);
    ck_assert(strncmp(show(&r), "&5 ", 3) == 0);
    /* two distinct fields out of three */
    r = run(LATTICE_COLL_HRANDFIELD, "h", "2", NULL);
    const char *s = show(&r);
    ck_assert(strncmp(s, "*2 $", 4) == 0);
    char f1[8], f2[8];
    ck_assert_int_eq(sscanf(s, "*2 $%7s $%7s", f1, f2), 2);
    ck_assert_str_ne(f1, f2);
}
END_TEST

START_TEST(a_copy_applies_the_row_and_answers_the_same)
{
    SHOWS(run(LATTICE_COLL_HSET, "h", "a", "1", "b", "2", NULL), ":2");
    ck_assert_int_eq(cache.counter[part("h")], last_repl.version);
    /* a second store as a copy of the partition */
    lattice_store *mine = cache.store;
    lattice_store *copy;
    lattice_store_config sc = {"c", 16, region, NULL, NULL};
    ck_assert_int_eq(lattice_store_create(&sc, &copy), LATTICE_OK);
    cache.store = copy;
    ck_assert_int_eq(exec_replicate_typed(&cache, part("h"), "h", 1, last_repl.value, last_repl.value_len,
                                          last_repl.expire_ms, last_repl.version, false, last_repl.type),
                     LATTICE_OK);
    SHOWS(run(LATTICE_COLL_HGETALL, "h", NULL), "%2 $a $1 $b $2");
    cache.store = mine;
    lattice_store_destroy(copy);
}
END_TEST

START_TEST(writes_keep_the_expiry)
{
    SHOWS(run(LATTICE_COLL_HSET, "h", "a", "1", NULL), ":1");
    exec_in in = {LATTICE_OP_EXPIRE, 0, part("h"), "h", 1, NULL, 0, 0, 100000};
    lattice_op_result r;
    exec_local(&cache, &in, &scratch, &r, &last_repl);
    ck_assert_int_eq(r.status, LATTICE_OK);
    uint64_t exp = last_repl.expire_ms;
    ck_assert_uint_gt(exp, lt_wall_ms());
    SHOWS(run(LATTICE_COLL_HSET, "h", "b", "2", NULL), ":1");
    ck_assert_uint_eq(last_repl.expire_ms, exp);
    SHOWS(run(LATTICE_COLL_HINCRBY, "h", "c", "1", NULL), ":1");
    ck_assert_uint_eq(last_repl.expire_ms, exp);
}
END_TEST

START_TEST(refused_before_anything_is_read)
{
    /* a write command under the read kind, and the other way round */
    char buf[8];
    size_t len = lattice_coll_pack(buf, sizeof buf, NULL, 0);
    exec_in in = {LATTICE_OP_COLL_READ, 0, part("h"), "h", 1, buf, len, LATTICE_COLL_HSET, 0};
    lattice_op_result r;
    exec_local(&cache, &in, &scratch, &r, &last_repl);
    ck_assert_int_eq(r.status, LATTICE_ERR_INVAL);
    in.kind = LATTICE_OP_COLL_WRITE;
    in.delta = LATTICE_COLL_HGET;
    exec_local(&cache, &in, &scratch, &r, &last_repl);
    ck_assert_int_eq(r.status, LATTICE_ERR_INVAL);
    in.delta = 200;
    exec_local(&cache, &in, &scratch, &r, &last_repl);
    ck_assert_int_eq(r.status, LATTICE_ERR_INVAL);
    /* packed arguments cut short, or with bytes left over */
    static const char cut[] = "\x01\x00\x00\x00\x05\x00\x00\x00ab";
    in = (exec_in){LATTICE_OP_COLL_READ, 0, part("h"), "h", 1, cut, sizeof cut - 1, LATTICE_COLL_HGET, 0};
    exec_local(&cache, &in, &scratch, &r, &last_repl);
    ck_assert_int_eq(r.status, LATTICE_ERR_INVAL);
    static const char extra[] = "\x00\x00\x00\x00z";
    in.value = extra;
    in.value_len = sizeof extra - 1;
    exec_local(&cache, &in, &scratch, &r, &last_repl);
    ck_assert_int_eq(r.status, LATTICE_ERR_INVAL);
    /* a row past the cache's max_value_bytes (64 here) */
    char big[60];
    memset(big, 'v', sizeof big - 1);
    big[sizeof big - 1] = 0;
    SHOWS(run(LATTICE_COLL_HSET, "h", "a", big, NULL), ":1");
    r = run(LATTICE_COLL_HSET, "h", "b", big, NULL);
    ck_assert_int_eq(r.status, LATTICE_ERR_TOO_LARGE);
    SHOWS(run(LATTICE_COLL_HKEYS, "h", NULL), "*1 $a");
}
END_TEST

/* Commands of many fields find them through an index (coll_index): the
 * same answers as one at a time, duplicates within one command included. */
START_TEST(many_fields_in_one_command)
{
    enum { N = 3000 };
    cache.cfg.max_value_bytes = 1u << 20;
    static char names[N][8];
    static lattice_coll_arg a[2 * N + 2];
    static char buf[1 << 17];
    for (int i = 0; i < N; i++) {
        snprintf(names[i], sizeof names[i], "f%d", i);
        a[2 * i] = (lattice_coll_arg){names[i], strlen(names[i])};
        a[2 * i + 1] = (lattice_coll_arg){names[i], strlen(names[i])};
    }
    a[2 * N] = a[0]; /* f0 again: its last value wins, counted once */
    a[2 * N + 1] = (lattice_coll_arg){"last", 4};
    size_t len = lattice_coll_pack(buf, sizeof buf, a, 2 * N + 2);
    ck_assert_uint_gt(len, 0);
    exec_in in = {LATTICE_OP_COLL_WRITE, 0, part("big"), "big", 3, buf, len, LATTICE_COLL_HSET, 0};
    lattice_op_result r;
    exec_local(&cache, &in, &scratch, &r, &last_repl);
    SHOWS(r, ":3000");
    SHOWS(run(LATTICE_COLL_HLEN, "big", NULL), ":3000");
    SHOWS(run(LATTICE_COLL_HMGET, "big", "f0", "f2999", "nope", "f1500", NULL), "*4 $last $f2999 _ $f1500");
    /* HDEL of every other field, each named twice */
    static lattice_coll_arg d[N];
    for (int i = 0; i < N / 2; i++) d[2 * i] = d[2 * i + 1] = (lattice_coll_arg){names[2 * i], strlen(names[2 * i])};
    len = lattice_coll_pack(buf, sizeof buf, d, N);
    in = (exec_in){LATTICE_OP_COLL_WRITE, 0, part("big"), "big", 3, buf, len, LATTICE_COLL_HDEL, 0};
    exec_local(&cache, &in, &scratch, &r, &last_repl);
    SHOWS(r, ":1500");
    SHOWS(run(LATTICE_COLL_HLEN, "big", NULL), ":1500");
    SHOWS(run(LATTICE_COLL_HMGET, "big", "f0", "f1", "f2998", "f2999", NULL), "*4 _ $f1 _ $f2999");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("types_hash");
    TCase *t = tcase_create("hash");
    tcase_add_checked_fixture(t, setup, teardown);
    tcase_add_test(t, fields_keep_their_order_and_the_counts_are_redis);
    tcase_add_test(t, the_last_field_gone_removes_the_key);
    tcase_add_test(t, numbers_in_fields);
    tcase_add_test(t, arguments_first_then_the_key);
    tcase_add_test(t, scan_and_random_fields);
    tcase_add_test(t, a_copy_applies_the_row_and_answers_the_same);
    tcase_add_test(t, writes_keep_the_expiry);
    tcase_add_test(t, refused_before_anything_is_read);
    tcase_add_test(t, many_fields_in_one_command);
    suite_add_tcase(s, t);
    return lt_run_suite(s);
}
