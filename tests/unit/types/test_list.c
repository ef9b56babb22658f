/*
 * Lists in types/ without a network (LATTICE_OP_COLL_*, lattice/coll.h):
 * each command on a real store, its reply read back; pushes to either end
 * in Redis's order, pops with and without a count (a null array for no
 * list), the last element popped removes the key, LINSERT/LSET/LREM/LTRIM
 * in place, LPOS's options, Redis's order of checks, the row a write
 * replicates applied on a copy, the expiry kept.
 */
#include <check.h>
#include <stdio.h>
#include <string.h>
#include <urcu.h>

#include "cache.pb-c.h"
#include "lattice/clock.h"
#include "run_suite.h"
#include "types/types.h"

#include "one_cache.h"
#include "coll_fixture.h"

START_TEST(pushes_and_pops_at_both_ends)
{
    SHOWS(run(LATTICE_COLL_RPUSH, "l", "a", "b", NULL), ":2");
    ck_assert(last_repl.needed && !last_repl.remove);
    ck_assert_int_eq(last_repl.type, LATTICE_TYPE_LIST);
    SHOWS(run(LATTICE_COLL_LPUSH, "l", "x", "y", NULL), ":4"); /* each to the head in turn: y x a b */
    SHOWS(run(LATTICE_COLL_RPUSHX, "l", "z", NULL), ":5");
    SHOWS(run(LATTICE_COLL_LPUSHX, "none", "z", NULL), ":0");
    ck_assert(!last_repl.needed);
    SHOWS(run(LATTICE_COLL_LRANGE, "l", "0", "-1", NULL), "*5 $y $x $a $b $z");
    SHOWS(run(LATTICE_COLL_LPOP, "l", NULL), "$y");
    SHOWS(run(LATTICE_COLL_RPOP, "l", "2", NULL), "*2 $z $b"); /* from the tail, last first */
    SHOWS(run(LATTICE_COLL_LPOP, "l", "0", NULL), "*0");
    SHOWS(run(LATTICE_COLL_LPOP, "none", "2", NULL), "*-1");
    SHOWS(run(LATTICE_COLL_LPOP, "none", NULL), "_");
    SHOWS(run(LATTICE_COLL_LPOP, "l", "9", NULL), "*2 $x $a");
    ck_assert(last_repl.needed && last_repl.remove); /* the last one went: no list */
    SHOWS(run(LATTICE_COLL_LLEN, "l", NULL), ":0");
    SHOWS(run(LATTICE_COLL_LRANGE, "l", "0", "-1", NULL), "*0");
}
END_TEST

START_TEST(in_place_edits)
{
    SHOWS(run(LATTICE_COLL_RPUSH, "l", "a", "b", "a", "c", "a", NULL), ":5");
    SHOWS(run(LATTICE_COLL_LINSERT, "l", "BEFORE", "b", "B", NULL), ":6");
    SHOWS(run(LATTICE_COLL_LINSERT, "l", "after", "c", "C", NULL), ":7");
    SHOWS(run(LATTICE_COLL_LINSERT, "l", "AFTER", "nope", "D", NULL), ":-1");
    SHOWS(run(LATTICE_COLL_LINSERT, "none", "AFTER", "a", "D", NULL), ":0");
    SHOWS(run(LATTICE_COLL_LSET, "l", "-1", "A", NULL), "+OK");
    SHOWS(run(LATTICE_COLL_LRANGE, "l", "0", "-1", NULL), "*7 $a $B $b $a $c $C $A");
    SHOWS(run(LATTICE_COLL_LREM, "l", "-1", "a", NULL), ":1"); /* the one nearest the tail */
    SHOWS(run(LATTICE_COLL_LRANGE, "l", "0", "-1", NULL), "*6 $a $B $b $c $C $A");
    SHOWS(run(LATTICE_COLL_LREM, "l", "0", "a", NULL), ":1");
    SHOWS(run(LATTICE_COLL_LTRIM, "l", "1", "-2", NULL), "+OK");
    SHOWS(run(LATTICE_COLL_LRANGE, "l", "0", "-1", NULL), "*3 $b $c $C");
    SHOWS(run(LATTICE_COLL_LINDEX, "l", "-3", NULL), "$b");
    SHOWS(run(LATTICE_COLL_LINDEX, "l", "3", NULL), "_");
    SHOWS(run(LATTICE_COLL_LTRIM, "l", "5", "1", NULL), "+OK"); /* an empty range: the list goes */
    ck_assert(last_repl.remove);
    SHOWS(run(LATTICE_COLL_LSET, "l", "0", "x", NULL), "-ERR no such key");
}
END_TEST

START_TEST(lpos_options)
{
    SHOWS(run(LATTICE_COLL_RPUSH, "l", "a", "b", "c", "a", "b", "c", "a", NULL), ":7");
    SHOWS(run(LATTICE_COLL_LPOS, "l", "a", NULL), ":0");
    SHOWS(run(LATTICE_COLL_LPOS, "l", "a", "RANK", "2", NULL), ":3");
    SHOWS(run(LATTICE_COLL_LPOS, "l", "a", "RANK", "-1", NULL), ":6");
    SHOWS(run(LATTICE_COLL_LPOS, "l", "a", "COUNT", "0", NULL), "*3 :0 :3 :6");
    SHOWS(run(LATTICE_COLL_LPOS, "l", "a", "COUNT", "2", "RANK", "-1", NULL), "*2 :6 :3");
    SHOWS(run(LATTICE_COLL_LPOS, "l", "a", "MAXLEN", "3", "COUNT", "0", NULL), "*1 :0");
    SHOWS(run(LATTICE_COLL_LPOS, "l", "z", NULL), "_");
    SHOWS(run(LATTICE_COLL_LPOS, "none", "z", "COUNT", "1", NULL), "*0");
}
END_TEST

START_TEST(arguments_first_then_the_key)
{
    lattice_store_entry e = {part("s"), "s", 1, "str", 3, 0, 1, LATTICE_TYPE_STRING};
    ck_assert_int_eq(lattice_store_put(cache.store, &e, 0), LATTICE_OK);
    cache.counter[part("s")] = 1;
    SHOWS(run(LATTICE_COLL_LPOP, "s", "x", NULL), "-ERR value is out of range, must be positive");
    SHOWS(run(LATTICE_COLL_LPOP, "s", "1", "2", NULL), "-ERR wrong number of arguments for 'lpop' command");
    SHOWS(run(LATTICE_COLL_LRANGE, "s", "x", "1", NULL), "-ERR value is not an integer or out of range");
    SHOWS(run(LATTICE_COLL_LINSERT, "s", "MIDDLE", "a", "b", NULL), "-ERR syntax error");
    SHOWS(run(LATTICE_COLL_LPOS, "s", "a", "RANK", "0", NULL),
          "-ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to "
          "start from the end of the list");
    SHOWS(run(LATTICE_COLL_LTRIM, "s", "0", "x", NULL), "-ERR value is not an integer or out of range");
    ck_assert_int_eq(run(LATTICE_COLL_RPUSH, "s", "a", NULL).status, LATTICE_ERR_WRONGTYPE);
    ck_assert(!last_repl.needed);
    /* LINDEX and LSET read the key before their index, as Redis 7.0 */
    ck_assert_int_eq(run(LATTICE_COLL_LINDEX, "s", "x", NULL).status, LATTICE_ERR_WRONGTYPE);
    SHOWS(run(LATTICE_COLL_LINDEX, "none", "x", NULL), "_");
    SHOWS(run(LATTICE_COLL_RPUSH, "l", "a", NULL), ":1");
    SHOWS(run(LATTICE_COLL_LINDEX, "l", "x", NULL), "-ERR value is not an integer or out of range");
    SHOWS(run(LATTICE_COLL_LSET, "l", "5", "x", NULL), "-ERR index out of range");
}
END_TEST

START_TEST(a_copy_applies_the_row_and_the_expiry_stays)
{
    SHOWS(run(LATTICE_COLL_RPUSH, "l", "a", "b", NULL), ":2");
    exec_in in = {LATTICE_OP_EXPIRE, 0, part("l"), "l", 1, NULL, 0, 0, 100000};
    lattice_op_result r;
    exec_local(&cache, &in, &scratch, &r, &last_repl);
    uint64_t exp = last_repl.expire_ms;
    ck_assert_uint_gt(exp, lt_wall_ms());
    SHOWS(run(LATTICE_COLL_LPOP, "l", NULL), "$a");
    ck_assert_uint_eq(last_repl.expire_ms, exp);
    lattice_store *mine = cache.store, *copy;
    lattice_store_config sc = {"c", 16, region, NULL, NULL};
    ck_assert_int_eq(lattice_store_create(&sc, &copy), LATTICE_OK);
    cache.store = copy;
    ck_assert_int_eq(exec_replicate_typed(&cache, part("l"), "l", 1, last_repl.value, last_repl.value_len,
                                          last_repl.expire_ms, last_repl.version, false, last_repl.type),
                     LATTICE_OK);
    SHOWS(run(LATTICE_COLL_LRANGE, "l", "0", "-1", NULL), "*1 $b");
    cache.store = mine;
    lattice_store_destroy(copy);
}
END_TEST

/* exec_lmove: each write handed over as it happens, in order. */
static int n_wrote;
static char wrote_keys[4][8];

static void note(void *arg, const void *key, size_t len, const repl_out *w)
{
    (void)arg;
    ck_assert(w->needed);
    ck_assert_int_lt(n_wrote, 4);
    memcpy(wrote_keys[n_wrote], key, len);
    wrote_keys[n_wrote++][len] = 0;
}

static lattice_op_result lmove(const char *src, const char *dst, unsigned where)
{
    lattice_op_result r;
    n_wrote = 0;
    /* keys of one partition: the fixture's is by key, so both are looked up in src's */
    exec_lmove(&cache, part(src), src, strlen(src), dst, strlen(dst), where, &scratch, &r, note, NULL);
    return r;
}

START_TEST(lmove_pops_and_pushes_in_one_step)
{
    /* a second key of the first one's partition */
    const char *a = "la", *b = NULL;
    char cand[8];
    for (int i = 0; i < 1000 && !b; i++) {
        snprintf(cand, sizeof cand, "lb%d", i);
        if (part(cand) == part(a)) b = cand;
    }
    ck_assert_ptr_nonnull(b);
    SHOWS(run(LATTICE_COLL_RPUSH, a, "1", "2", "3", NULL), ":3");
    SHOWS(lmove(a, b, EXEC_LMOVE_FROM_RIGHT), "$3"); /* RPOPLPUSH */
    ck_assert_int_eq(n_wrote, 2);
    ck_assert_str_eq(wrote_keys[0], a);
    ck_assert_str_eq(wrote_keys[1], b);
    SHOWS(lmove(a, a, EXEC_LMOVE_TO_RIGHT), "$1"); /* a rotation: 2 1 */
    SHOWS(run(LATTICE_COLL_LRANGE, a, "0", "-1", NULL), "*2 $2 $1");
    SHOWS(run(LATTICE_COLL_LRANGE, b, "0", "-1", NULL), "*1 $3");
    SHOWS(lmove("none", b, 0), "_");
    ck_assert_int_eq(n_wrote, 0);
    /* the destination's type is checked before anything moves */
    lattice_store_entry e = {part(b), b, strlen(b), "str", 3, 0, cache.counter[part(b)] + 1, LATTICE_TYPE_STRING};
    ck_assert_int_eq(lattice_store_put(cache.store, &e, 0), LATTICE_OK);
    cache.counter[part(b)]++;
    ck_assert_int_eq(lmove(a, b, 0).status, LATTICE_ERR_WRONGTYPE);
    ck_assert_int_eq(n_wrote, 0);
    SHOWS(run(LATTICE_COLL_LLEN, a, NULL), ":2");
    /* a source of another type: WRONGTYPE even towards no list */
    ck_assert_int_eq(lmove(b, "none", 0).status, LATTICE_ERR_WRONGTYPE);
}
END_TEST

/* exec_bpop: BLPOP's pop over keys of one partition, in order. */
static lattice_op_result bpop(const char *const *keys, size_t n, unsigned which, long long count)
{
    lattice_coll_arg a[4];
    for (size_t i = 1; i < n; i++) a[i - 1] = (lattice_coll_arg){keys[i], strlen(keys[i])};
    static char packed[256];
    size_t len = lattice_coll_pack(packed, sizeof packed, a, n - 1);
    ck_assert_uint_gt(len, 0);
    lattice_op_result r;
    n_wrote = 0;
    exec_bpop(&cache, part(keys[0]), keys[0], strlen(keys[0]), packed, len, which, count, &scratch, &r, note, NULL);
    return r;
}

START_TEST(bpop_takes_the_first_key_that_holds_one)
{
    /* three keys of one partition: a hash tag */
    const char *k[] = {"{p}a", "{p}b", "{p}c"};
    SHOWS(bpop(k, 3, 0, 0), "*-1");
    ck_assert_int_eq(n_wrote, 0);
    SHOWS(run(LATTICE_COLL_RPUSH, k[1], "x", "y", "z", NULL), ":3");
    SHOWS(bpop(k, 3, 0, 0), "*2 ${p}b $x"); /* a is empty: b's head */
    ck_assert_int_eq(n_wrote, 1);
    ck_assert_str_eq(wrote_keys[0], k[1]);
    SHOWS(bpop(k, 3, EXEC_BPOP_RIGHT, 0), "*2 ${p}b $z");
    SHOWS(bpop(k, 3, 0, 5), "*2 ${p}b *1 $y"); /* LMPOP's shape; b emptied */
    SHOWS(run(LATTICE_COLL_LLEN, k[1], NULL), ":0");
    /* sorted sets: [key, member, score]; with a count nested pairs */
    SHOWS(run(LATTICE_COLL_ZADD, k[2], "1", "m1", "2.5", "m2", "3", "m3", NULL), ":3");
    SHOWS(bpop(k, 3, EXEC_BPOP_ZSET, 0), "*3 ${p}c $m1 ,1");
    SHOWS(bpop(k, 3, EXEC_BPOP_ZSET | EXEC_BPOP_RIGHT, 0), "*3 ${p}c $m3 ,3");
    SHOWS(bpop(k, 3, EXEC_BPOP_ZSET, 4), "*2 ${p}c *1 *2 $m2 ,2.5");
    /* another type on the way, before a key that holds one: WRONGTYPE, nothing popped */
    SHOWS(run(LATTICE_COLL_RPUSH, k[2], "l", NULL), ":1");
    SHOWS(run(LATTICE_COLL_ZADD, k[1], "1", "z", NULL), ":1");
    lattice_op_result r = bpop(k, 3, 0, 0);
    ck_assert_int_eq(r.status, LATTICE_ERR_WRONGTYPE);
    ck_assert_int_eq(n_wrote, 0);
    SHOWS(run(LATTICE_COLL_LLEN, k[2], NULL), ":1");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("types_list");
    TCase *t = tcase_create("list");
    tcase_add_checked_fixture(t, setup, teardown);
    tcase_add_test(t, pushes_and_pops_at_both_ends);
    tcase_add_test(t, in_place_edits);
    tcase_add_test(t, lpos_options);
    tcase_add_test(t, arguments_first_then_the_key);
    tcase_add_test(t, a_copy_applies_the_row_and_the_expiry_stays);
    tcase_add_test(t, lmove_pops_and_pushes_in_one_step);
    tcase_add_test(t, bpop_takes_the_first_key_that_holds_one);
    suite_add_tcase(s, t);
    return lt_run_suite(s);
}
