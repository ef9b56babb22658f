/*
 * types/ without a network: what each operation kind does to a real store
 * (exec_local), and what a copy applies (exec_replicate).
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <urcu.h>

#include "run_suite.h"
#include "lattice/alloc.h"
#include "lattice/clock.h"
#include "types/types.h"

#include "one_cache.h"

static lattice_op_result run(int kind, unsigned flags, const char *key, const char *value, int64_t delta,
                             uint64_t ttl, repl_out *repl)
{
    exec_in in = {kind, flags, lattice_partition_of_key(key, strlen(key), 16), key, strlen(key), value,
                  value ? strlen(value) : 0, delta, ttl};
    lattice_op_result r;
    repl_out tmp;
    exec_local(&cache, &in, &scratch, &r, repl ? repl : &tmp);
    return r;
}

static void assert_value(const lattice_op_result *r, const char *want)
{
    ck_assert_int_eq(r->status, LATTICE_OK);
    ck_assert_uint_eq(r->value_len, strlen(want));
    ck_assert_int_eq(memcmp(r->value, want, r->value_len), 0);
}

START_TEST(put_get_and_conditional_puts)
{
    repl_out rp;
    lattice_op_result r = run(LATTICE_OP_PUT, 0, "k", "v1", 0, 0, &rp);
    ck_assert_int_eq(r.status, LATTICE_OK);
    ck_assert(rp.needed && !rp.remove);
    ck_assert_uint_eq(rp.version, 1);
    r = run(LATTICE_OP_GET, 0, "k", NULL, 0, 0, NULL);
    assert_value(&r, "v1");
    /* NX over a value: EXISTS, value kept; XX over nothing: NOT_FOUND. */
    r = run(LATTICE_OP_PUT, LATTICE_OP_NX, "k", "v2", 0, 0, &rp);
    ck_assert_int_eq(r.status, LATTICE_ERR_EXISTS);
    ck_assert(!rp.needed);
    r = run(LATTICE_OP_PUT, LATTICE_OP_XX, "absent", "v", 0, 0, &rp);
    ck_assert_int_eq(r.status, LATTICE_ERR_NOT_FOUND);
    ck_assert(!rp.needed);
    r = run(LATTICE_OP_GET, 0, "absent", NULL, 0, 0, NULL);
    ck_assert_int_eq(r.status, LATTICE_ERR_NOT_FOUND);
    /* get_and_put returns the old value and stores the new one. */
    r = run(LATTICE_OP_PUT, LATTICE_OP_RETURN_OLD, "k", "v3", 0, 0, &rp);
    assert_value(&r, "v1");
    ck_assert(r.flags & LATTICE_OP_R_FOUND);
    ck_assert_uint_eq(rp.version, 2); /* the partition's counter moves on every write */
    r = run(LATTICE_OP_GET, 0, "k", NULL, 0, 0, NULL);
    assert_value(&r, "v3");
    ck_assert_uint_eq(cache.reads, 3);
    ck_assert_uint_eq(cache.hits, 2);
    ck_assert_uint_eq(cache.misses, 1);
}
END_TEST

START_TEST(remove_and_get_and_remove)
{
    run(LATTICE_OP_PUT, 0, "k", "v", 0, 0, NULL);
    repl_out rp;
    lattice_op_result r = run(LATTICE_OP_REMOVE, LATTICE_OP_RETURN_OLD, "k", NULL, 0, 0, &rp);
    assert_value(&r, "v");
    ck_assert(rp.needed && rp.remove);
    r = run(LATTICE_OP_REMOVE, 0, "k", NULL, 0, 0, &rp);
    ck_assert_int_eq(r.status, LATTICE_ERR_NOT_FOUND);
    ck_assert(!rp.needed);
    r = run(LATTICE_OP_CONTAINS, 0, "k", NULL, 0, 0, NULL);
    ck_assert_int_eq(r.status, LATTICE_OK);
    ck_assert_int_eq(r.num, 0);
}
END_TEST

START_TEST(increment_only_on_integers)
{
    lattice_op_result r = run(LATTICE_OP_INCREMENT, 0, "n", NULL, 5, 0, NULL);
    ck_assert_int_eq(r.status, LATTICE_OK);
    ck_assert_int_eq(r.num, 5);
    r = run(LATTICE_OP_INCREMENT, 0, "n", NULL, -7, 0, NULL);
    ck_assert_int_eq(r.num, -2);
    r = run(LATTICE_OP_GET, 0, "n", NULL, 0, 0, NULL);
    assert_value(&r, "-2");
    static const char *bad[] = {"abc", "", "1.5", " 1", "01", "+1", "-0", "99999999999999999999", NULL};
    for (int i = 0; bad[i]; i++) {
        run(LATTICE_OP_PUT, 0, "b", bad[i], 0, 0, NULL);
        repl_out rp;
        r = run(LATTICE_OP_INCREMENT, 0, "b", NULL, 1, 0, &rp);
        ck_assert_msg(r.status == LATTICE_ERR_INVAL, "incremented '%s'", bad[i]);
        ck_assert(!rp.needed);
        r = run(LATTICE_OP_GET, 0, "b", NULL, 0, 0, NULL);
        assert_value(&r, bad[i]); /* unchanged */
    }
    run(LATTICE_OP_PUT, 0, "m", "9223372036854775807", 0, 0, NULL);
    r = run(LATTICE_OP_INCREMENT, 0, "m", NULL, 1, 0, NULL);
    ck_assert_int_eq(r.status, LATTICE_ERR_INVAL); /* overflow */
}
END_TEST

START_TEST(append_expire_ttl)
{
    lattice_op_result r = run(LATTICE_OP_APPEND, 0, "a", "abc", 0, 0, NULL);
    ck_assert_int_eq(r.num, 3);
    r = run(LATTICE_OP_APPEND, 0, "a", "def", 0, 0, NULL);
    ck_assert_int_eq(r.num, 6);
    r = run(LATTICE_OP_GET, 0, "a", NULL, 0, 0, NULL);
    assert_value(&r, "abcdef");
    /* Appending past max_value_bytes (64): TOO_LARGE, value unchanged. */
    char big[70];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = 0;
    r = run(LATTICE_OP_APPEND, 0, "a", big, 0, 0, NULL);
    ck_assert_int_eq(r.status, LATTICE_ERR_TOO_LARGE);
    r = run(LATTICE_OP_TTL, 0, "a", NULL, 0, 0, NULL);
    ck_assert_int_eq(r.num, -1);
    r = run(LATTICE_OP_EXPIRE, 0, "a", NULL, 0, 100000, NULL);
    ck_assert_int_eq(r.status, LATTICE_OK);
    r = run(LATTICE_OP_TTL, 0, "a", NULL, 0, 0, NULL);
    ck_assert(r.num > 0 && r.num <= 100000);
    /* KEEP_TTL keeps it over a put; a plain put drops it. */
    run(LATTICE_OP_PUT, LATTICE_OP_KEEP_TTL, "a", "new", 0, 0, NULL);
    r = run(LATTICE_OP_TTL, 0, "a", NULL, 0, 0, NULL);
    ck_assert(r.num > 0);
    run(LATTICE_OP_PUT, 0, "a", "newer", 0, 0, NULL);
    r = run(LATTICE_OP_TTL, 0, "a", NULL, 0, 0, NULL);
    ck_assert_int_eq(r.num, -1);
    r = run(LATTICE_OP_EXPIRE, 0, "absent", NULL, 0, 10, NULL);
    ck_assert_int_eq(r.status, LATTICE_ERR_NOT_FOUND);
    /* An expiry already passed: the entry reads as absent. */
    run(LATTICE_OP_PUT, 0, "e", "v", 0, 0, NULL);
    uint32_t p = lattice_partition_of_key("e", 1, 16);
    lattice_store_entry e = {p, "e", 1, "v", 1, lt_wall_ms() - 1000, 99, 0};
    ck_assert_int_eq(lattice_store_put(cache.store, &e, 0), LATTICE_OK);
    r = run(LATTICE_OP_GET, 0, "e", NULL, 0, 0, NULL);
    ck_assert_int_eq(r.status, LATTICE_ERR_NOT_FOUND);
    r = run(LATTICE_OP_KIND_MAX_ + 1, 0, "e", NULL, 0, 0, NULL);
    ck_assert_int_eq(r.status, LATTICE_ERR_INVAL);
}
END_TEST

START_TEST(replicate_applies_only_newer)
{
    const char *k = "r";
    uint32_t p = lattice_partition_of_key(k, 1, 16);
    ck_assert_int_eq(exec_replicate(&cache, p, k, 1, "v5", 2, 0, 5, false), LATTICE_OK);
    ck_assert_uint_eq(cache.counter[p], 5);
    /* An older write arriving late changes nothing (and is not an error). */
    ck_assert_int_eq(exec_replicate(&cache, p, k, 1, "v3", 2, 0, 3, false), LATTICE_OK);
    lattice_op_result r = run(LATTICE_OP_GET, 0, k, NULL, 0, 0, NULL);
    assert_value(&r, "v5");
    ck_assert_uint_eq(cache.counter[p], 5);
    /* After a failover this node's next write is numbered above what it saw. */
    repl_out rp;
    run(LATTICE_OP_PUT, 0, k, "v6", 0, 0, &rp);
    ck_assert_uint_eq(rp.version, 6);
    ck_assert_int_eq(exec_replicate(&cache, p, k, 1, NULL, 0, 0, 7, true), LATTICE_OK);
    r = run(LATTICE_OP_GET, 0, k, NULL, 0, 0, NULL);
    ck_assert_int_eq(r.status, LATTICE_ERR_NOT_FOUND);
    /* A remove of an absent key, bad partition or empty key. */
    ck_assert_int_eq(exec_replicate(&cache, p, k, 1, NULL, 0, 0, 8, true), LATTICE_OK);
    ck_assert_int_eq(exec_replicate(&cache, 16, k, 1, "v", 1, 0, 9, false), LATTICE_ERR_INVAL);
    ck_assert_int_eq(exec_replicate(&cache, p, k, 0, "v", 1, 0, 9, false), LATTICE_ERR_INVAL);
}
END_TEST


/* ---- SETRANGE, SETBIT, INCRBYFLOAT (types/rmw.c) ---- */

static void assert_bytes(const lattice_op_result *r, const char *want, size_t n)
{
    ck_assert_int_eq(r->status, LATTICE_OK);
    ck_assert_uint_eq(r->value_len, n);
    ck_assert_int_eq(memcmp(r->value, want, n), 0);
}

START_TEST(setrange_pads_keeps_ttl_and_bounds)
{
    repl_out rp;
    lattice_op_result r = run(LATTICE_OP_SETRANGE, 0, "s", "ab", 3, 0, &rp);
    ck_assert_int_eq(r.status, LATTICE_OK);
    ck_assert_int_eq(r.num, 5);
    ck_assert(rp.needed && !rp.remove && rp.value_len == 5);
    r = run(LATTICE_OP_SETRANGE, 0, "s", "X", 0, 0, NULL);
    ck_assert_int_eq(r.num, 5);
    r = run(LATTICE_OP_GET, 0, "s", NULL, 0, 0, NULL);
    assert_bytes(&r, "X\0\0ab", 5);
    /* An empty value writes nothing: the length as it is, no key made. */
    r = run(LATTICE_OP_SETRANGE, 0, "none", "", 10, 0, &rp);
    ck_assert_int_eq(r.status, LATTICE_OK);
    ck_assert_int_eq(r.num, 0);
    ck_assert(!rp.needed);
    r = run(LATTICE_OP_CONTAINS, 0, "none", NULL, 0, 0, NULL);
    ck_assert_int_eq(r.num, 0);
    r = run(LATTICE_OP_SETRANGE, 0, "s", "", 10, 0, NULL);
    ck_assert_int_eq(r.num, 5);
    /* The expiry survives; past max_value_bytes (64) is TOO_LARGE. */
    run(LATTICE_OP_EXPIRE, 0, "s", NULL, 0, 100000, NULL);
    r = run(LATTICE_OP_SETRANGE, 0, "s", "ab", 62, 0, NULL);
    ck_assert_int_eq(r.num, 64);
    r = run(LATTICE_OP_TTL, 0, "s", NULL, 0, 0, NULL);
    ck_assert(r.num > 0);
    r = run(LATTICE_OP_SETRANGE, 0, "s", "ab", 63, 0, &rp);
    ck_assert_int_eq(r.status, LATTICE_ERR_TOO_LARGE);
    ck_assert(!rp.needed);
    r = run(LATTICE_OP_SETRANGE, 0, "s", "a", INT64_MAX, 0, NULL);
    ck_assert_int_eq(r.status, LATTICE_ERR_TOO_LARGE);
    r = run(LATTICE_OP_SETRANGE, 0, "s", "a", -1, 0, NULL);
    ck_assert_int_eq(r.status, LATTICE_ERR_INVAL);
}
END_TEST

START_TEST(setbit_old_bit_growth_and_no_change)
{
    repl_out rp;
    lattice_op_result r = run(LATTICE_OP_SETBIT, 0, "b", "1", 7, 0, &rp);
    ck_assert_int_eq(r.status, LATTICE_OK);
    ck_assert_int_eq(r.num, 0);
    ck_assert(rp.needed);
    r = run(LATTICE_OP_GET, 0, "b", NULL, 0, 0, NULL);
    assert_bytes(&r, "\x01", 1);
    /* The same bit again: its old value, and nothing written or replicated. */
    uint64_t before = cache.counter[lattice_partition_of_key("b", 1, 16)];
    r = run(LATTICE_OP_SETBIT, 0, "b", "1", 7, 0, &rp);
    ck_assert_int_eq(r.num, 1);
    ck_assert(!rp.needed);
    ck_assert_uint_eq(cache.counter[lattice_partition_of_key("b", 1, 16)], before);
    run(LATTICE_OP_SETBIT, 0, "b", "1", 0, 0, NULL);
    r = run(LATTICE_OP_SETBIT, 0, "b", "0", 7, 0, NULL);
    ck_assert_int_eq(r.num, 1);
    r = run(LATTICE_OP_SETBIT, 0, "b", "1", 17, 0, NULL);
    ck_assert_int_eq(r.num, 0);
    r = run(LATTICE_OP_GET, 0, "b", NULL, 0, 0, NULL);
    assert_bytes(&r, "\x80\x00\x40", 3);
    /* Clearing a bit past the end still grows the value (Redis does too). */
    r = run(LATTICE_OP_SETBIT, 0, "b", "0", 39, 0, NULL);
    r = run(LATTICE_OP_GET, 0, "b", NULL, 0, 0, NULL);
    assert_bytes(&r, "\x80\x00\x40\x00\x00", 5);
    r = run(LATTICE_OP_SETBIT, 0, "b", "1", 64 * 8 - 1, 0, NULL);
    ck_assert_int_eq(r.status, LATTICE_OK);
    r = run(LATTICE_OP_SETBIT, 0, "b", "1", 64 * 8, 0, NULL);
    ck_assert_int_eq(r.status, LATTICE_ERR_TOO_LARGE);
    ck_assert_int_eq(run(LATTICE_OP_SETBIT, 0, "b", "2", 1, 0, NULL).status, LATTICE_ERR_INVAL);
    ck_assert_int_eq(run(LATTICE_OP_SETBIT, 0, "b", "", 1, 0, NULL).status, LATTICE_ERR_INVAL);
    ck_assert_int_eq(run(LATTICE_OP_SETBIT, 0, "b", "1", -1, 0, NULL).status, LATTICE_ERR_INVAL);
}
END_TEST

START_TEST(incrbyfloat_formats_as_redis_and_refuses)
{
    /* redis-server 7.0's answers to the same INCRBYFLOAT sequence. */
    static const struct {
        const char *incr, *want;
    } steps[] = {
        {"10.5", "10.5"}, {"0.1", "10.6"}, {"-5.0e3", "-4989.39999999999999991"}, {"4989.4", "0"}, {"3.0e3", "3000"},
        {"-3000.25", "-0.25"}, {"0.25", "0"}, {"1e-20", "0"}, {"0x10", "16"},
    };
    for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
        lattice_op_result r = run(LATTICE_OP_INCRBYFLOAT, 0, "f", steps[i].incr, 0, 0, NULL);
        ck_assert_msg(r.status == LATTICE_OK, "step %zu: %d", i, r.status);
        assert_bytes(&r, steps[i].want, strlen(steps[i].want));
        r = run(LATTICE_OP_GET, 0, "f", NULL, 0, 0, NULL);
        assert_value(&r, steps[i].want);
    }
    /* The expiry is kept. */
    run(LATTICE_OP_EXPIRE, 0, "f", NULL, 0, 100000, NULL);
    run(LATTICE_OP_INCRBYFLOAT, 0, "f", "1", 0, 0, NULL);
    ck_assert(run(LATTICE_OP_TTL, 0, "f", NULL, 0, 0, NULL).num > 0);
    /* Not a float (either side): INVAL, num 0, nothing written. */
    static const char *const bad[] = {"abc", "", " 1", "1 ", "nan", "1e99999", NULL};
    for (int i = 0; bad[i]; i++) {
        repl_out rp;
        lattice_op_result r = run(LATTICE_OP_INCRBYFLOAT, 0, "f", bad[i], 0, 0, &rp);
        ck_assert_msg(r.status == LATTICE_ERR_INVAL && r.num == 0 && !rp.needed, "'%s'", bad[i]);
    }
    run(LATTICE_OP_PUT, 0, "nf", "12abc", 0, 0, NULL);
    lattice_op_result r = run(LATTICE_OP_INCRBYFLOAT, 0, "nf", "1", 0, 0, NULL);
    ck_assert(r.status == LATTICE_ERR_INVAL && r.num == 0);
    /* A sum that overflows to infinity: INVAL, num 1, the value kept. */
    run(LATTICE_OP_PUT, 0, "big", "1e4932", 0, 0, NULL);
    r = run(LATTICE_OP_INCRBYFLOAT, 0, "big", "1e4932", 0, 0, NULL);
    ck_assert(r.status == LATTICE_ERR_INVAL && r.num == 1);
    r = run(LATTICE_OP_GET, 0, "big", NULL, 0, 0, NULL);
    assert_value(&r, "1e4932");
    r = run(LATTICE_OP_INCRBYFLOAT, 0, "big", "inf", 0, 0, NULL);
    ck_assert(r.status == LATTICE_ERR_INVAL && r.num == 1);
    /* A result longer than max_value_bytes (64): TOO_LARGE. */
    r = run(LATTICE_OP_INCRBYFLOAT, 0, "big", "1", 0, 0, NULL);
    ck_assert_int_eq(r.status, LATTICE_ERR_TOO_LARGE);
}
END_TEST


/* ---- end of the rmw kinds ---- */

int main(void)
{
    Suite *s = suite_create("types");
    TCase *t = tcase_create("exec");
    tcase_add_checked_fixture(t, setup, teardown);
    tcase_add_test(t, put_get_and_conditional_puts);
    tcase_add_test(t, remove_and_get_and_remove);
    tcase_add_test(t, increment_only_on_integers);
    tcase_add_test(t, append_expire_ttl);
    tcase_add_test(t, replicate_applies_only_newer);
    tcase_add_test(t, setrange_pads_keeps_ttl_and_bounds);
    tcase_add_test(t, setbit_old_bit_growth_and_no_change);
    tcase_add_test(t, incrbyfloat_formats_as_redis_and_refuses);
    suite_add_tcase(s, t);
    return lt_run_suite(s);
}
