/*
 * Sorted sets in types/ without a network (LATTICE_OP_COLL_*, lattice/coll.h):
 * each command on a real store, its reply read back; ZADD's options and
 * their conflicts, Redis's order (score, then member bytes), scores as
 * Redis writes them (%.17g, inf, -0 stored as 0), ranges by rank, score and
 * lex with REV, LIMIT and WITHSCORES (pairs), the older range commands,
 * pops with and without a count, ZRANDMEMBER's shapes, ZSCAN, Redis's
 * order of checks (arguments before WRONGTYPE where Redis checks them
 * first), the last member gone removes the key, the row a write replicates
 * applied on a copy, the expiry kept, many members at once (the hash
 * index), a row past max_value_bytes.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <urcu.h>

#include "cache.pb-c.h"
#include "lattice/clock.h"
#include "run_suite.h"
#include "types/types.h"

#include "one_cache.h"
#include "coll_fixture.h"

/* Rows of a few members exceed one_cache.h's 64 bytes: 4 KiB here. */
static void setup_z(void)
{
    setup();
    cache.cfg.max_value_bytes = 4096;
}

#define WRONGTYPE(r) ck_assert_int_eq((r).status, LATTICE_ERR_WRONGTYPE)

/* cmd on key with argc arguments of any length (run() takes 16 short ones). */
static lattice_op_result runv(int cmd, const char *key, size_t argc, const lattice_coll_arg *a)
{
    size_t len = lattice_coll_packed_len(a, argc);
    char *buf = malloc(len);
    ck_assert_ptr_nonnull(buf);
    ck_assert_uint_eq(lattice_coll_pack(buf, len, a, argc), len);
    lattice_op op = lattice_op_coll(NULL, cmd, key, strlen(key), buf, len);
    exec_in in = {op.kind, 0, part(key), key, strlen(key), op.value, op.value_len, op.delta, 0};
    lattice_op_result r;
    exec_local(&cache, &in, &scratch, &r, &last_repl);
    free(buf);
    return r;
}

static void put_string(const char *key)
{
    lattice_store_entry e = {part(key), key, strlen(key), "str", 3, 0, 1, LATTICE_TYPE_STRING};
    ck_assert_int_eq(lattice_store_put(cache.store, &e, 0), LATTICE_OK);
    cache.counter[part(key)] = 1;
}

START_TEST(zadd_options_and_replies)
{
    SHOWS(run(LATTICE_COLL_ZADD, "z", "1", "a", "2", "b", "3", "c", NULL), ":3");
    ck_assert(last_repl.needed && !last_repl.remove);
    ck_assert_int_eq(last_repl.type, LATTICE_TYPE_ZSET);
    ck_assert_int_eq(last_repl.value_len, 1 + 1 + 3 * (8 + 1 + 1)); /* the row: format, count, 3 x (score, len, member) */
    SHOWS(run(LATTICE_COLL_ZADD, "z", "1", "a", NULL), ":0");
    ck_assert(!last_repl.needed); /* nothing changed: nothing written */
    SHOWS(run(LATTICE_COLL_ZADD, "z", "CH", "5", "a", "1", "x", NULL), ":2");
    SHOWS(run(LATTICE_COLL_ZADD, "z", "5", "a", "1", "y", NULL), ":1"); /* without CH: the added ones */
    SHOWS(run(LATTICE_COLL_ZADD, "z", "nx", "10", "a", "11", "n", NULL), ":1");
    SHOWS(run(LATTICE_COLL_ZSCORE, "z", "a", NULL), ",5");
    SHOWS(run(LATTICE_COLL_ZADD, "z", "xx", "ch", "10", "a", "11", "none", NULL), ":1");
    SHOWS(run(LATTICE_COLL_ZSCORE, "z", "none", NULL), "_");
    SHOWS(run(LATTICE_COLL_ZADD, "z", "XX", "CH", "GT", "9", "a", "12", "a", NULL), ":1"); /* 9 < 10 refused, 12 taken */
    SHOWS(run(LATTICE_COLL_ZADD, "z", "lt", "ch", "13", "a", NULL), ":0");
    SHOWS(run(LATTICE_COLL_ZADD, "z", "gt", "ch", "0", "new", NULL), ":1"); /* GT/LT never stop an addition */
    /* INCR: the new score, nil when a condition stops it */
    SHOWS(run(LATTICE_COLL_ZADD, "z", "INCR", "2.5", "b", NULL), ",4.5");
    SHOWS(run(LATTICE_COLL_ZADD, "z", "incr", "nx", "1", "b", NULL), "_");
    SHOWS(run(LATTICE_COLL_ZADD, "z", "incr", "xx", "1", "nob", NULL), "_");
    SHOWS(run(LATTICE_COLL_ZADD, "z", "incr", "gt", "-1", "b", NULL), "_");
    SHOWS(run(LATTICE_COLL_ZADD, "z", "incr", "lt", "-1", "b", NULL), ",3.5");
    SHOWS(run(LATTICE_COLL_ZINCRBY, "z", "1", "b", NULL), ",4.5");
    SHOWS(run(LATTICE_COLL_ZINCRBY, "z", "0.1", "fresh", NULL), ",0.10000000000000001");
    /* a member given twice: added once, then updated */
    SHOWS(run(LATTICE_COLL_ZADD, "z", "1", "q", "2", "q", "3", "q", NULL), ":1");
    SHOWS(run(LATTICE_COLL_ZADD, "z", "ch", "4", "q", "5", "q", NULL), ":2"); /* CH counts each update */
    SHOWS(run(LATTICE_COLL_ZSCORE, "z", "q", NULL), ",5");
    SHOWS(run(LATTICE_COLL_ZRANGE, "z", "0", "-1", "WITHSCORES", NULL),
           "&9 $new ,0 $fresh ,0.10000000000000001 $x ,1 $y ,1 $c ,3 $b ,4.5 $q ,5 $n ,11 $a ,12");
    /* XX on no key creates nothing */
    SHOWS(run(LATTICE_COLL_ZADD, "none", "xx", "1", "a", NULL), ":0");
    ck_assert(!last_repl.needed);
    SHOWS(run(LATTICE_COLL_ZADD, "none", "xx", "incr", "1", "a", NULL), "_");
    SHOWS(run(LATTICE_COLL_ZCARD, "none", NULL), ":0");
    /* the integer replies of writes are in num too (a resend's answer) */
    lattice_op_result r = run(LATTICE_COLL_ZADD, "z", "ch", "7", "a", "7", "b", "7", "c2", NULL);
    ck_assert_int_eq(r.num, 3);
}
END_TEST

START_TEST(zadd_errors_in_redis_order)
{
    put_string("s");
    /* options, pairs, conflicts and scores before the key's type */
    SHOWS(run(LATTICE_COLL_ZADD, "s", "nx", "xx", "1", "a", NULL),
          "-ERR XX and NX options at the same time are not compatible");
    SHOWS(run(LATTICE_COLL_ZADD, "s", "gt", "lt", "1", "a", NULL),
          "-ERR GT, LT, and/or NX options at the same time are not compatible");
    SHOWS(run(LATTICE_COLL_ZADD, "s", "nx", "gt", "1", "a", NULL),
          "-ERR GT, LT, and/or NX options at the same time are not compatible");
    SHOWS(run(LATTICE_COLL_ZADD, "s", "incr", "1", "a", "2", "b", NULL),
          "-ERR INCR option supports a single increment-element pair");
    SHOWS(run(LATTICE_COLL_ZADD, "s", "1", "a", "2", NULL), "-ERR syntax error");
    SHOWS(run(LATTICE_COLL_ZADD, "s", "nx", "xx", "1", NULL), "-ERR syntax error"); /* pairs come first */
    SHOWS(run(LATTICE_COLL_ZADD, "s", "1", "a", "x", "b", NULL), "-ERR value is not a valid float");
    WRONGTYPE(run(LATTICE_COLL_ZADD, "s", "1", "a", NULL));
    SHOWS(run(LATTICE_COLL_ZINCRBY, "s", "x", "a", NULL), "-ERR value is not a valid float");
    SHOWS(run(LATTICE_COLL_ZINCRBY, "s", "nx", "a", NULL), "-ERR syntax error"); /* an option's name, as in Redis */
    WRONGTYPE(run(LATTICE_COLL_ZINCRBY, "s", "1", "a", NULL));
    ck_assert(!last_repl.needed);
    /* string2d's rules for a score */
    static const char *const bad[] = {"", " 1", "1 ", "nan", "1e999", "-1e999", "1e-400", "1x", "0x", "(1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        SHOWS(run(LATTICE_COLL_ZADD, "z", bad[i], "a", NULL), "-ERR value is not a valid float");
    lattice_coll_arg nul[] = {{"1\0", 2}, {"a", 1}};
    SHOWS(runv(LATTICE_COLL_ZADD, "z", 2, nul), "-ERR value is not a valid float");
    SHOWS(run(LATTICE_COLL_ZCARD, "z", NULL), ":0");
    SHOWS(run(LATTICE_COLL_ZADD, "z", "4e-320", "tiny", "0x10", "hex", "+inf", "p", "-inf", "m", "1e3", "k", NULL),
          ":5");
    SHOWS(run(LATTICE_COLL_ZRANGE, "z", "0", "-1", "withscores", NULL),
           "&5 $m ,-inf $tiny ,3.999955468730732e-320 $hex ,16 $k ,1000 $p ,inf");
    /* inf + -inf: NaN, nothing changes */
    SHOWS(run(LATTICE_COLL_ZINCRBY, "z", "-inf", "p", NULL), "-ERR resulting score is not a number (NaN)");
    ck_assert(!last_repl.needed);
    SHOWS(run(LATTICE_COLL_ZADD, "z", "incr", "-inf", "p", NULL), "-ERR resulting score is not a number (NaN)");
    SHOWS(run(LATTICE_COLL_ZSCORE, "z", "p", NULL), ",inf");
    /* the arity the RESP table checks, for a C caller */
    SHOWS(run(LATTICE_COLL_ZADD, "z", "1", NULL), "-ERR wrong number of arguments for 'zadd' command");
    SHOWS(run(LATTICE_COLL_ZINCRBY, "z", "1", "a", "b", NULL), "-ERR wrong number of arguments for 'zincrby' command");
}
END_TEST

START_TEST(order_scores_and_lookups)
{
    /* one score: members by their bytes, the shorter first; NUL inside */
    lattice_coll_arg m[] = {{"0", 1}, {"b", 1}, {"0", 1}, {"a\0b", 3}, {"0", 1}, {"", 0}, {"0", 1}, {"a", 1},
                            {"0", 1}, {"\xff", 1}, {"0", 1}, {"a\0", 2}, {"-1", 2}, {"zz", 2}};
    SHOWS(runv(LATTICE_COLL_ZADD, "z", 14, m), ":7");
    SHOWS(run(LATTICE_COLL_ZRANGE, "z", "0", "-1", NULL), "*7 $zz $ $a $a $a $b $\xff"); /* show() stops at NUL */
    lattice_coll_arg q[] = {{"a\0", 2}};
    SHOWS(runv(LATTICE_COLL_ZRANK, "z", 1, q), ":3");
    SHOWS(runv(LATTICE_COLL_ZREVRANK, "z", 1, q), ":3");
    SHOWS(run(LATTICE_COLL_ZRANK, "z", "a", NULL), ":2");
    SHOWS(run(LATTICE_COLL_ZREVRANK, "z", "zz", NULL), ":6");
    SHOWS(run(LATTICE_COLL_ZRANK, "z", "nope", NULL), "_");
    SHOWS(run(LATTICE_COLL_ZRANK, "none", "a", NULL), "_");
    SHOWS(run(LATTICE_COLL_ZCARD, "z", NULL), ":7");
    /* scores: %.17g, -0 stored as 0 (a listpack's integer) but INCR's reply is -0 */
    SHOWS(run(LATTICE_COLL_ZADD, "y", "incr", "-0", "n", NULL), ",-0");
    SHOWS(run(LATTICE_COLL_ZSCORE, "y", "n", NULL), ",0");
    SHOWS(run(LATTICE_COLL_ZADD, "y", "-0", "n2", "0.1", "d", "1e17", "big", "-2.5", "neg", NULL), ":4");
    SHOWS(run(LATTICE_COLL_ZMSCORE, "y", "n2", "d", "nope", "big", "neg", NULL),
           "*5 ,0 ,0.10000000000000001 _ ,1e+17 ,-2.5");
    SHOWS(run(LATTICE_COLL_ZMSCORE, "none", "a", "b", NULL), "*2 _ _");
    SHOWS(run(LATTICE_COLL_ZSCORE, "none", "a", NULL), "_");
    SHOWS(run(LATTICE_COLL_ZADD, "y", "0", "n", NULL), ":0"); /* 0 == -0: no change */
    ck_assert(!last_repl.needed);
}
END_TEST

START_TEST(zrange_by_rank_score_and_lex)
{
    SHOWS(run(LATTICE_COLL_ZADD, "r", "1", "a", "2", "b", "3", "c", "4", "d", "5", "e", "5", "ee", "-1", "neg", "inf",
              "top", NULL),
          ":8");
    SHOWS(run(LATTICE_COLL_ZRANGE, "r", "0", "-1", NULL), "*8 $neg $a $b $c $d $e $ee $top");
    SHOWS(run(LATTICE_COLL_ZRANGE, "r", "2", "3", "WITHSCORES", NULL), "&2 $b ,2 $c ,3");
    SHOWS(run(LATTICE_COLL_ZRANGE, "r", "-3", "-1", NULL), "*3 $e $ee $top");
    SHOWS(run(LATTICE_COLL_ZRANGE, "r", "5", "2", NULL), "*0");
    SHOWS(run(LATTICE_COLL_ZRANGE, "r", "100", "200", "withscores", NULL), "&0");
    SHOWS(run(LATTICE_COLL_ZRANGE, "r", "-100", "1", NULL), "*2 $neg $a");
    SHOWS(run(LATTICE_COLL_ZRANGE, "r", "0", "2", "REV", NULL), "*3 $top $ee $e");
    SHOWS(run(LATTICE_COLL_ZRANGE, "r", "0", "1", "limit", "0", "-1", NULL), "*2 $neg $a"); /* LIMIT x -1 is none */
    /* BYSCORE: '(' exclusive, -inf/+inf, REV takes max first, LIMIT */
    SHOWS(run(LATTICE_COLL_ZRANGE, "r", "(1", "4", "BYSCORE", NULL), "*3 $b $c $d");
    SHOWS(run(LATTICE_COLL_ZRANGE, "r", "(1", "(4", "byscore", "withscores", NULL), "&2 $b ,2 $c ,3");
    SHOWS(run(LATTICE_COLL_ZRANGE, "r", "1", "(1", "byscore", NULL), "*0");
    SHOWS(run(LATTICE_COLL_ZRANGE, "r", "4", "1", "byscore", NULL), "*0");
    SHOWS(run(LATTICE_COLL_ZRANGE, "r", "4", "(1", "byscore", "rev", NULL), "*3 $d $c $b");
    SHOWS(run(LATTICE_COLL_ZRANGE, "r", "-inf", "+inf", "byscore", "limit", "2", "3", NULL), "*3 $b $c $d");
    SHOWS(run(LATTICE_COLL_ZRANGE, "r", "-inf", "+inf", "byscore", "limit", "6", "-1", NULL), "*2 $ee $top");
    SHOWS(run(LATTICE_COLL_ZRANGE, "r", "-inf", "+inf", "byscore", "limit", "-1", "3", NULL), "*0");
    SHOWS(run(LATTICE_COLL_ZRANGE, "r", "-inf", "+inf", "byscore", "limit", "8", "3", NULL), "*0");
    SHOWS(run(LATTICE_COLL_ZRANGE, "r", "-inf", "+inf", "byscore", "limit", "0", "0", NULL), "*0");
    SHOWS(run(LATTICE_COLL_ZRANGE, "r", "+inf", "-inf", "byscore", "rev", "limit", "1", "2", "withscores", NULL),
           "&2 $ee ,5 $e ,5");
    SHOWS(run(LATTICE_COLL_ZRANGE, "r", "5", "5", "byscore", NULL), "*2 $e $ee");
    /* zslParseRange's strtod: blanks first, "" is 0, "(" alone is (0, hex; not NaN nor junk */
    SHOWS(run(LATTICE_COLL_ZRANGE, "r", " 1", "2", "byscore", NULL), "*2 $a $b");
    SHOWS(run(LATTICE_COLL_ZRANGE, "r", "", "", "byscore", NULL), "*0");
    SHOWS(run(LATTICE_COLL_ZRANGE, "r", "(", "1", "byscore", NULL), "*1 $a");
    SHOWS(run(LATTICE_COLL_ZRANGE, "r", "0x1", "0x2", "byscore", NULL), "*2 $a $b");
    SHOWS(run(LATTICE_COLL_ZRANGE, "r", "1e999", "inf", "byscore", NULL), "*1 $top");
    lattice_coll_arg nul[] = {{"4\0junk", 6}, {"5", 1}, {"byscore", 7}};
    SHOWS(runv(LATTICE_COLL_ZRANGE, "r", 3, nul), "*3 $d $e $ee"); /* a C string: up to the NUL */
    SHOWS(run(LATTICE_COLL_ZRANGE, "r", "nan", "1", "byscore", NULL), "-ERR min or max is not a float");
    SHOWS(run(LATTICE_COLL_ZRANGE, "r", "1", "1x", "byscore", NULL), "-ERR min or max is not a float");
    /* BYLEX on one score */
    SHOWS(run(LATTICE_COLL_ZADD, "l", "0", "a", "0", "b", "0", "c", "0", "d", "0", "e", NULL), ":5");
    SHOWS(run(LATTICE_COLL_ZRANGE, "l", "-", "+", "BYLEX", NULL), "*5 $a $b $c $d $e");
    SHOWS(run(LATTICE_COLL_ZRANGE, "l", "[b", "(d", "bylex", NULL), "*2 $b $c");
    SHOWS(run(LATTICE_COLL_ZRANGE, "l", "(b", "[d", "bylex", NULL), "*2 $c $d");
    SHOWS(run(LATTICE_COLL_ZRANGE, "l", "+", "[c", "bylex", "rev", NULL), "*3 $e $d $c");
    SHOWS(run(LATTICE_COLL_ZRANGE, "l", "-", "+", "bylex", "limit", "1", "2", NULL), "*2 $b $c");
    SHOWS(run(LATTICE_COLL_ZRANGE, "l", "[", "[aa", "bylex", NULL), "*1 $a");
    SHOWS(run(LATTICE_COLL_ZRANGE, "l", "-", "-", "bylex", NULL), "*0");
    SHOWS(run(LATTICE_COLL_ZRANGE, "l", "+", "-", "bylex", NULL), "*0");
    SHOWS(run(LATTICE_COLL_ZRANGE, "l", "[c", "(c", "bylex", NULL), "*0");
    SHOWS(run(LATTICE_COLL_ZRANGE, "l", "a", "+", "bylex", NULL), "-ERR min or max not valid string range item");
    SHOWS(run(LATTICE_COLL_ZRANGE, "l", "", "+", "bylex", NULL), "-ERR min or max not valid string range item");
    SHOWS(run(LATTICE_COLL_ZRANGE, "l", "-x", "+", "bylex", NULL), "-ERR min or max not valid string range item");
    lattice_coll_arg plus[] = {{"-", 1}, {"+\0x", 3}, {"bylex", 5}};
    SHOWS(runv(LATTICE_COLL_ZRANGE, "l", 3, plus), "*5 $a $b $c $d $e"); /* "+" as a C string */
    /* BYLEX over different scores walks the row as Redis walks a listpack */
    SHOWS(run(LATTICE_COLL_ZADD, "m", "3", "a", "1", "b", "2", "c", "1", "z", "3", "x", NULL), ":5");
    SHOWS(run(LATTICE_COLL_ZRANGE, "m", "[b", "[y", "bylex", NULL), "*1 $b"); /* b z c a x: z > y stops */
    SHOWS(run(LATTICE_COLL_ZRANGE, "m", "[z", "[a", "bylex", "rev", NULL), "*5 $x $a $c $z $b"); /* all >= a */
    /* option errors, in Redis's order, before the key */
    SHOWS(run(LATTICE_COLL_ZRANGE, "r", "0", "1", "limit", "0", "1", NULL),
          "-ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX");
    SHOWS(run(LATTICE_COLL_ZRANGE, "r", "-", "+", "bylex", "withscores", NULL),
          "-ERR syntax error, WITHSCORES not supported in combination with BYLEX");
    SHOWS(run(LATTICE_COLL_ZRANGE, "r", "0", "1", "bogus", NULL), "-ERR syntax error");
    SHOWS(run(LATTICE_COLL_ZRANGE, "r", "0", "1", "rev", "rev", NULL), "-ERR syntax error");
    SHOWS(run(LATTICE_COLL_ZRANGE, "r", "0", "1", "byscore", "bylex", NULL), "-ERR syntax error");
    SHOWS(run(LATTICE_COLL_ZRANGE, "r", "0", "1", "limit", "0", NULL), "-ERR syntax error");
    SHOWS(run(LATTICE_COLL_ZRANGE, "r", "0", "1", "limit", "x", "1", "bogus", NULL),
          "-ERR value is not an integer or out of range");
    SHOWS(run(LATTICE_COLL_ZRANGE, "r", "x", "1", NULL), "-ERR value is not an integer or out of range");
    SHOWS(run(LATTICE_COLL_ZRANGE, "r", "0", "1.5", NULL), "-ERR value is not an integer or out of range");
    SHOWS(run(LATTICE_COLL_ZRANGE, "none", "0", "-1", "withscores", NULL), "*0");
    put_string("s");
    SHOWS(run(LATTICE_COLL_ZRANGE, "s", "0", "1", "limit", "0", "1", NULL),
          "-ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX");
    WRONGTYPE(run(LATTICE_COLL_ZRANGE, "s", "0", "1", "withscores", "withscores", NULL));
}
END_TEST

START_TEST(the_older_range_commands)
{
    SHOWS(run(LATTICE_COLL_ZADD, "r", "1", "a", "2", "b", "3", "c", "4", "d", NULL), ":4");
    SHOWS(run(LATTICE_COLL_ZREVRANGE, "r", "0", "-1", NULL), "*4 $d $c $b $a");
    SHOWS(run(LATTICE_COLL_ZREVRANGE, "r", "1", "2", "withscores", NULL), "&2 $c ,3 $b ,2");
    SHOWS(run(LATTICE_COLL_ZREVRANGE, "r", "0", "1", "byscore", NULL), "-ERR syntax error");
    SHOWS(run(LATTICE_COLL_ZREVRANGE, "r", "0", "1", "rev", NULL), "-ERR syntax error");
    SHOWS(run(LATTICE_COLL_ZREVRANGE, "r", "0", "1", "limit", "0", "1", NULL),
          "-ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX");
    SHOWS(run(LATTICE_COLL_ZRANGEBYSCORE, "r", "(1", "+inf", NULL), "*3 $b $c $d");
    SHOWS(run(LATTICE_COLL_ZRANGEBYSCORE, "r", "-inf", "+inf", "WITHSCORES", "LIMIT", "1", "2", NULL),
           "&2 $b ,2 $c ,3");
    SHOWS(run(LATTICE_COLL_ZRANGEBYSCORE, "r", "1", "4", "rev", NULL), "-ERR syntax error");
    SHOWS(run(LATTICE_COLL_ZRANGEBYSCORE, "r", "x", "4", NULL), "-ERR min or max is not a float");
    SHOWS(run(LATTICE_COLL_ZREVRANGEBYSCORE, "r", "4", "(1", NULL), "*3 $d $c $b");
    SHOWS(run(LATTICE_COLL_ZREVRANGEBYSCORE, "r", "1", "4", NULL), "*0");
    SHOWS(run(LATTICE_COLL_ZREVRANGEBYSCORE, "r", "+inf", "-inf", "limit", "1", "1", NULL), "*1 $c");
    SHOWS(run(LATTICE_COLL_ZADD, "l", "0", "a", "0", "b", "0", "c", NULL), ":3");
    SHOWS(run(LATTICE_COLL_ZRANGEBYLEX, "l", "(a", "+", NULL), "*2 $b $c");
    SHOWS(run(LATTICE_COLL_ZRANGEBYLEX, "l", "-", "+", "limit", "0", "2", NULL), "*2 $a $b");
    SHOWS(run(LATTICE_COLL_ZRANGEBYLEX, "l", "-", "+", "withscores", NULL),
          "-ERR syntax error, WITHSCORES not supported in combination with BYLEX");
    SHOWS(run(LATTICE_COLL_ZRANGEBYLEX, "l", "x", "+", NULL), "-ERR min or max not valid string range item");
    SHOWS(run(LATTICE_COLL_ZREVRANGEBYLEX, "l", "+", "-", NULL), "*3 $c $b $a");
    SHOWS(run(LATTICE_COLL_ZREVRANGEBYLEX, "l", "[b", "-", "limit", "1", "5", NULL), "*1 $a");
    SHOWS(run(LATTICE_COLL_ZREVRANGEBYLEX, "l", "-", "+", NULL), "*0");
    SHOWS(run(LATTICE_COLL_ZRANGEBYSCORE, "none", "0", "1", NULL), "*0");
}
END_TEST

START_TEST(counts)
{
    SHOWS(run(LATTICE_COLL_ZADD, "r", "1", "a", "2", "b", "3", "c", "4", "d", NULL), ":4");
    SHOWS(run(LATTICE_COLL_ZCOUNT, "r", "-inf", "+inf", NULL), ":4");
    SHOWS(run(LATTICE_COLL_ZCOUNT, "r", "(1", "(4", NULL), ":2");
    SHOWS(run(LATTICE_COLL_ZCOUNT, "r", "4", "1", NULL), ":0");
    SHOWS(run(LATTICE_COLL_ZCOUNT, "r", "x", "1", NULL), "-ERR min or max is not a float");
    SHOWS(run(LATTICE_COLL_ZCOUNT, "none", "1", "2", NULL), ":0");
    SHOWS(run(LATTICE_COLL_ZLEXCOUNT, "r", "-", "+", NULL), ":4");
    SHOWS(run(LATTICE_COLL_ZLEXCOUNT, "r", "(a", "[c", NULL), ":2");
    SHOWS(run(LATTICE_COLL_ZLEXCOUNT, "r", "x", "+", NULL), "-ERR min or max not valid string range item");
    SHOWS(run(LATTICE_COLL_ZLEXCOUNT, "none", "-", "+", NULL), ":0");
    put_string("s");
    SHOWS(run(LATTICE_COLL_ZCOUNT, "s", "x", "1", NULL), "-ERR min or max is not a float");
    WRONGTYPE(run(LATTICE_COLL_ZCOUNT, "s", "1", "1", NULL));
    SHOWS(run(LATTICE_COLL_ZLEXCOUNT, "s", "x", "1", NULL), "-ERR min or max not valid string range item");
    WRONGTYPE(run(LATTICE_COLL_ZLEXCOUNT, "s", "-", "+", NULL));
}
END_TEST

START_TEST(removals_and_the_last_member)
{
    SHOWS(run(LATTICE_COLL_ZADD, "q", "1", "a", "2", "b", "3", "c", NULL), ":3");
    SHOWS(run(LATTICE_COLL_ZREM, "q", "a", "nope", "a", NULL), ":1");
    ck_assert_int_eq(last_repl.type, LATTICE_TYPE_ZSET);
    SHOWS(run(LATTICE_COLL_ZREM, "q", "nope", NULL), ":0");
    ck_assert(!last_repl.needed);
    SHOWS(run(LATTICE_COLL_ZREM, "none", "a", NULL), ":0");
    SHOWS(run(LATTICE_COLL_ZREM, "q", "c", "b", "x", NULL), ":2");
    ck_assert(last_repl.needed && last_repl.remove); /* the last one went: no set */
    SHOWS(run(LATTICE_COLL_ZCARD, "q", NULL), ":0");
    SHOWS(run(LATTICE_COLL_ZSCORE, "q", "c", NULL), "_");
    SHOWS(run(LATTICE_COLL_ZADD, "r", "1", "a", "2", "b", "3", "c", "4", "d", "5", "e", "6", "f", NULL), ":6");
    SHOWS(run(LATTICE_COLL_ZREMRANGEBYSCORE, "r", "(1", "3", NULL), ":2");
    SHOWS(run(LATTICE_COLL_ZREMRANGEBYSCORE, "r", "10", "20", NULL), ":0");
    ck_assert(!last_repl.needed);
    SHOWS(run(LATTICE_COLL_ZREMRANGEBYRANK, "r", "-2", "-1", NULL), ":2");
    SHOWS(run(LATTICE_COLL_ZREMRANGEBYRANK, "r", "5", "1", NULL), ":0");
    SHOWS(run(LATTICE_COLL_ZRANGE, "r", "0", "-1", NULL), "*2 $a $d");
    SHOWS(run(LATTICE_COLL_ZREMRANGEBYLEX, "r", "[b", "+", NULL), ":1");
    SHOWS(run(LATTICE_COLL_ZREMRANGEBYRANK, "r", "0", "-1", NULL), ":1");
    ck_assert(last_repl.remove);
    SHOWS(run(LATTICE_COLL_ZADD, "l", "0", "a", "0", "b", "0", "c", "0", "d", NULL), ":4");
    SHOWS(run(LATTICE_COLL_ZREMRANGEBYLEX, "l", "(a", "[c", NULL), ":2");
    SHOWS(run(LATTICE_COLL_ZRANGE, "l", "0", "-1", NULL), "*2 $a $d");
    SHOWS(run(LATTICE_COLL_ZREMRANGEBYLEX, "l", "-", "+", NULL), ":2");
    ck_assert(last_repl.remove);
    SHOWS(run(LATTICE_COLL_ZREMRANGEBYSCORE, "none", "1", "2", NULL), ":0");
    lattice_op_result r = run(LATTICE_COLL_ZREMRANGEBYRANK, "none", "0", "1", NULL);
    ck_assert_int_eq(r.num, 0);
    /* the range before the key */
    put_string("s");
    SHOWS(run(LATTICE_COLL_ZREMRANGEBYRANK, "s", "x", "1", NULL), "-ERR value is not an integer or out of range");
    SHOWS(run(LATTICE_COLL_ZREMRANGEBYSCORE, "s", "x", "1", NULL), "-ERR min or max is not a float");
    SHOWS(run(LATTICE_COLL_ZREMRANGEBYLEX, "s", "x", "1", NULL), "-ERR min or max not valid string range item");
    WRONGTYPE(run(LATTICE_COLL_ZREMRANGEBYRANK, "s", "0", "1", NULL));
    WRONGTYPE(run(LATTICE_COLL_ZREM, "s", "a", NULL));
}
END_TEST

START_TEST(pops)
{
    SHOWS(run(LATTICE_COLL_ZADD, "p", "1", "a", "2", "b", "3", "c", "4", "d", "5", "e", NULL), ":5");
    SHOWS(run(LATTICE_COLL_ZPOPMIN, "p", NULL), "*2 $a ,1"); /* one flat pair, RESP3 too */
    SHOWS(run(LATTICE_COLL_ZPOPMAX, "p", NULL), "*2 $e ,5");
    SHOWS(run(LATTICE_COLL_ZPOPMIN, "p", "2", NULL), "&2 $b ,2 $c ,3"); /* a count: pairs */
    SHOWS(run(LATTICE_COLL_ZPOPMIN, "p", "0", NULL), "*0");
    ck_assert(!last_repl.needed);
    SHOWS(run(LATTICE_COLL_ZPOPMAX, "p", "-1", NULL), "-ERR value is out of range, must be positive");
    SHOWS(run(LATTICE_COLL_ZPOPMAX, "p", "x", NULL), "-ERR value is out of range, must be positive");
    SHOWS(run(LATTICE_COLL_ZPOPMIN, "p", "1", "2", NULL), "-ERR syntax error");
    SHOWS(run(LATTICE_COLL_ZPOPMAX, "p", "10", NULL), "&1 $d ,4");
    ck_assert(last_repl.needed && last_repl.remove);
    SHOWS(run(LATTICE_COLL_ZPOPMIN, "p", NULL), "*0");
    SHOWS(run(LATTICE_COLL_ZPOPMIN, "p", "3", NULL), "*0");
    SHOWS(run(LATTICE_COLL_ZADD, "p", "1", "a", "2", "b", "3", "c", NULL), ":3");
    SHOWS(run(LATTICE_COLL_ZPOPMAX, "p", "2", NULL), "&2 $c ,3 $b ,2"); /* highest first */
    SHOWS(run(LATTICE_COLL_ZRANGE, "p", "0", "-1", NULL), "*1 $a");
    put_string("s");
    SHOWS(run(LATTICE_COLL_ZPOPMIN, "s", "x", NULL), "-ERR value is out of range, must be positive");
    WRONGTYPE(run(LATTICE_COLL_ZPOPMIN, "s", "0", NULL));
    WRONGTYPE(run(LATTICE_COLL_ZPOPMAX, "s", NULL));
}
END_TEST

/* Checks a ZRANDMEMBER reply of r2's members a..e (scores 1..5): want
 * members, distinct or not, with scores or not; order: 1 ascending, -1
 * descending, 0 any.  */
static void rand_shape(lattice_op_result r, long long want, bool distinct, bool withscores, int order)
{
    ck_assert_int_eq(r.status, LATTICE_OK);
    size_t off = 0;
    lattice_coll_elem e;
    ck_assert_int_eq(lattice_coll_reply_next(r.value, r.value_len, &off, &e), 1);
    ck_assert_int_eq(e.type, withscores ? '&' : '*');
    ck_assert_int_eq(e.num, want);
    bool seen[5] = {false};
    int last = order > 0 ? -1 : 5;
    for (long long i = 0; i < want; i++) {
        ck_assert_int_eq(lattice_coll_reply_next(r.value, r.value_len, &off, &e), 1);
        ck_assert_int_eq(e.type, '$');
        ck_assert_uint_eq(e.len, 1);
        int k = e.ptr[0] - 'a';
        ck_assert(k >= 0 && k < 5);
        ck_assert(!distinct || !seen[k]);
        seen[k] = true;
        if (order) {
            ck_assert(order > 0 ? k > last : k < last);
            last = k;
        }
        if (withscores) {
            ck_assert_int_eq(lattice_coll_reply_next(r.value, r.value_len, &off, &e), 1);
            ck_assert_int_eq(e.type, ',');
            ck_assert(e.len == 1 && e.ptr[0] == '1' + k);
        }
    }
    ck_assert_int_eq(lattice_coll_reply_next(r.value, r.value_len, &off, &e), 0);
}

START_TEST(random_members)
{
    SHOWS(run(LATTICE_COLL_ZADD, "r2", "1", "a", "2", "b", "3", "c", "4", "d", "5", "e", NULL), ":5");
    for (int round = 0; round < 20; round++) {
        lattice_op_result r = run(LATTICE_COLL_ZRANDMEMBER, "r2", NULL);
        ck_assert_int_eq(r.status, LATTICE_OK);
        const char *v = r.value;
        ck_assert(r.value_len == 7 && v[0] == '$' && v[4] >= 'a' && v[4] <= 'e');
        rand_shape(run(LATTICE_COLL_ZRANDMEMBER, "r2", "1", NULL), 1, true, false, 0);
        rand_shape(run(LATTICE_COLL_ZRANDMEMBER, "r2", "1", "WITHSCORES", NULL), 1, true, true, 0);
        rand_shape(run(LATTICE_COLL_ZRANDMEMBER, "r2", "2", NULL), 2, true, false, 0);
        rand_shape(run(LATTICE_COLL_ZRANDMEMBER, "r2", "1", NULL), 1, true, false, 0);
        rand_shape(run(LATTICE_COLL_ZRANDMEMBER, "r2", "4", "withscores", NULL), 4, true, true, 0);
        rand_shape(run(LATTICE_COLL_ZRANDMEMBER, "r2", "5", NULL), 5, true, false, -1); /* all: highest first */
        rand_shape(run(LATTICE_COLL_ZRANDMEMBER, "r2", "50", "withscores", NULL), 5, true, true, -1);
        rand_shape(run(LATTICE_COLL_ZRANDMEMBER, "r2", "-7", NULL), 7, false, false, 0);
        rand_shape(run(LATTICE_COLL_ZRANDMEMBER, "r2", "-3", "withscores", NULL), 3, false, true, 0);
    }
    /* a third of the set or less: a sample in the set's order */
    lattice_coll_arg fill[32];
    static char names[16][4];
    for (int i = 0; i < 16; i++) {
        snprintf(names[i], sizeof names[i], "m%02d", i);
        fill[2 * i] = (lattice_coll_arg){"1", 1};
        fill[2 * i + 1] = (lattice_coll_arg){names[i], 3};
    }
    SHOWS(runv(LATTICE_COLL_ZADD, "r16", 32, fill), ":16");
    for (int round = 0; round < 20; round++) {
        lattice_op_result r = run(LATTICE_COLL_ZRANDMEMBER, "r16", "5", NULL);
        ck_assert_int_eq(r.status, LATTICE_OK);
        size_t off = 0;
        lattice_coll_elem e;
        ck_assert_int_eq(lattice_coll_reply_next(r.value, r.value_len, &off, &e), 1);
        ck_assert_int_eq(e.num, 5);
        char last[4] = "";
        for (int i = 0; i < 5; i++) {
            ck_assert_int_eq(lattice_coll_reply_next(r.value, r.value_len, &off, &e), 1);
            ck_assert_uint_eq(e.len, 3);
            ck_assert_int_gt(strncmp(e.ptr, last, 3), 0);
            memcpy(last, e.ptr, 3);
        }
    }
    SHOWS(run(LATTICE_COLL_ZRANDMEMBER, "r2", "0", NULL), "*0");
    SHOWS(run(LATTICE_COLL_ZRANDMEMBER, "r2", "0", "withscores", NULL), "*0");
    SHOWS(run(LATTICE_COLL_ZRANDMEMBER, "none", NULL), "_");
    SHOWS(run(LATTICE_COLL_ZRANDMEMBER, "none", "3", NULL), "*0");
    SHOWS(run(LATTICE_COLL_ZRANDMEMBER, "none", "-3", "withscores", NULL), "*0");
    /* the count and its options before the key */
    put_string("s");
    SHOWS(run(LATTICE_COLL_ZRANDMEMBER, "s", "x", NULL), "-ERR value is not an integer or out of range");
    SHOWS(run(LATTICE_COLL_ZRANDMEMBER, "s", "1", "bogus", NULL), "-ERR syntax error");
    SHOWS(run(LATTICE_COLL_ZRANDMEMBER, "s", "1", "withscores", "x", NULL), "-ERR syntax error");
    SHOWS(run(LATTICE_COLL_ZRANDMEMBER, "s", "-9223372036854775808", "bogus", NULL),
          "-ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807");
    SHOWS(run(LATTICE_COLL_ZRANDMEMBER, "s", "-9223372036854775807", "withscores", NULL), "-ERR value is out of range");
    SHOWS(run(LATTICE_COLL_ZRANDMEMBER, "s", "4611686018427387904", "withscores", NULL), "-ERR value is out of range");
    WRONGTYPE(run(LATTICE_COLL_ZRANDMEMBER, "s", "4611686018427387903", "withscores", NULL));
    WRONGTYPE(run(LATTICE_COLL_ZRANDMEMBER, "s", "0", NULL));
    WRONGTYPE(run(LATTICE_COLL_ZRANDMEMBER, "s", NULL));
}
END_TEST

START_TEST(scan_whole_set)
{
    SHOWS(run(LATTICE_COLL_ZADD, "sc", "1", "a", "2.5", "b", "1e17", "big", "1e19", "bigger", "-0", "e", "inf", "f",
              "0.1", "d", NULL),
          ":7");
    /* scores as a listpack holds them: integers up to 2^62 without exponent */
    SHOWS(run(LATTICE_COLL_ZSCAN, "sc", "0", NULL),
          "*2 $0 *14 $e $0 $d $0.10000000000000001 $a $1 $b $2.5 $big $100000000000000000 $bigger $1e+19 $f $inf");
    SHOWS(run(LATTICE_COLL_ZSCAN, "sc", "0", "MATCH", "b*", "COUNT", "1", NULL),
          "*2 $0 *6 $b $2.5 $big $100000000000000000 $bigger $1e+19");
    SHOWS(run(LATTICE_COLL_ZSCAN, "sc", "0", "match", "x*", NULL), "*2 $0 *0");
    SHOWS(run(LATTICE_COLL_ZSCAN, "sc", "x", NULL), "-ERR invalid cursor");
    SHOWS(run(LATTICE_COLL_ZSCAN, "sc", "0", "COUNT", "0", NULL), "-ERR syntax error");
    SHOWS(run(LATTICE_COLL_ZSCAN, "sc", "0", "COUNT", "x", NULL), "-ERR value is not an integer or out of range");
    SHOWS(run(LATTICE_COLL_ZSCAN, "sc", "0", "MATCH", NULL), "-ERR syntax error");
    SHOWS(run(LATTICE_COLL_ZSCAN, "none", "0", "COUNT", "0", NULL), "*2 $0 *0"); /* no key: no options read */
    SHOWS(run(LATTICE_COLL_ZSCAN, "none", "x", NULL), "-ERR invalid cursor");
    put_string("s");
    SHOWS(run(LATTICE_COLL_ZSCAN, "s", "x", NULL), "-ERR invalid cursor");
    WRONGTYPE(run(LATTICE_COLL_ZSCAN, "s", "0", "COUNT", "x", NULL));
}
END_TEST

START_TEST(reads_on_another_type)
{
    put_string("s");
    WRONGTYPE(run(LATTICE_COLL_ZCARD, "s", NULL));
    WRONGTYPE(run(LATTICE_COLL_ZSCORE, "s", "a", NULL));
    WRONGTYPE(run(LATTICE_COLL_ZMSCORE, "s", "a", NULL));
    WRONGTYPE(run(LATTICE_COLL_ZRANK, "s", "a", NULL));
    WRONGTYPE(run(LATTICE_COLL_ZREVRANK, "s", "a", NULL));
    WRONGTYPE(run(LATTICE_COLL_ZREVRANGE, "s", "0", "1", NULL));
    WRONGTYPE(run(LATTICE_COLL_ZRANGEBYSCORE, "s", "0", "1", NULL));
    WRONGTYPE(run(LATTICE_COLL_ZREVRANGEBYLEX, "s", "+", "-", NULL));
    ck_assert(!last_repl.needed);
    /* a hash command on a sorted set */
    SHOWS(run(LATTICE_COLL_ZADD, "z", "1", "a", NULL), ":1");
    WRONGTYPE(run(LATTICE_COLL_HGET, "z", "a", NULL));
    WRONGTYPE(run(LATTICE_COLL_LLEN, "z", NULL));
}
END_TEST

START_TEST(a_copy_applies_the_row_and_the_expiry_stays)
{
    SHOWS(run(LATTICE_COLL_ZADD, "z", "1", "a", "2", "b", "3", "c", NULL), ":3");
    exec_in in = {LATTICE_OP_EXPIRE, 0, part("z"), "z", 1, NULL, 0, 0, 100000};
    lattice_op_result r;
    exec_local(&cache, &in, &scratch, &r, &last_repl);
    uint64_t exp = last_repl.expire_ms;
    ck_assert_uint_gt(exp, lt_wall_ms());
    SHOWS(run(LATTICE_COLL_ZINCRBY, "z", "5", "a", NULL), ",6");
    ck_assert_uint_eq(last_repl.expire_ms, exp);
    SHOWS(run(LATTICE_COLL_ZPOPMIN, "z", NULL), "*2 $b ,2");
    ck_assert_uint_eq(last_repl.expire_ms, exp);
    lattice_store *mine = cache.store, *copy;
    lattice_store_config sc = {"c", 16, region, NULL, NULL};
    ck_assert_int_eq(lattice_store_create(&sc, &copy), LATTICE_OK);
    cache.store = copy;
    ck_assert_int_eq(exec_replicate_typed(&cache, part("z"), "z", 1, last_repl.value, last_repl.value_len,
                                          last_repl.expire_ms, last_repl.version, false, last_repl.type),
                     LATTICE_OK);
    SHOWS(run(LATTICE_COLL_ZRANGE, "z", "0", "-1", "withscores", NULL), "&2 $c ,3 $a ,6");
    SHOWS(run(LATTICE_COLL_ZRANK, "z", "a", NULL), ":1");
    cache.store = mine;
    SHOWS(run(LATTICE_COLL_ZRANGE, "z", "0", "-1", "withscores", NULL), "&2 $c ,3 $a ,6");
    /* the last member gone: the copy removes the key */
    SHOWS(run(LATTICE_COLL_ZREM, "z", "a", "c", NULL), ":2");
    ck_assert(last_repl.needed && last_repl.remove);
    cache.store = copy;
    ck_assert_int_eq(exec_replicate_typed(&cache, part("z"), "z", 1, NULL, 0, 0, last_repl.version, true,
                                          LATTICE_TYPE_ZSET),
                     LATTICE_OK);
    SHOWS(run(LATTICE_COLL_ZCARD, "z", NULL), ":0");
    cache.store = mine;
    lattice_store_destroy(copy);
}
END_TEST

/* Many members in one command (the hash index of zset.c), checked against
 * what a member-by-member run gives. */
START_TEST(many_members_at_once)
{
    cache.cfg.max_value_bytes = 1 << 20;
    enum { N = 600 };
    static char names[2 * N][8], scores[2 * N][8];
    static lattice_coll_arg a[4 * N];
    for (int i = 0; i < 2 * N; i++) {
        snprintf(names[i], sizeof names[i], "k%04d", (i * 7919) % (2 * N));
        snprintf(scores[i], sizeof scores[i], "%d", (i * 31) % 97);
    }
    for (int i = 0; i < N; i++) {
        a[2 * i] = (lattice_coll_arg){scores[i], strlen(scores[i])};
        a[2 * i + 1] = (lattice_coll_arg){names[i], 5};
    }
    SHOWS(runv(LATTICE_COLL_ZADD, "big", 2 * N, a), ":600");
    for (int i = 0; i < N; i++) {
        SHOWS(runv(LATTICE_COLL_ZADD, "one", 2, &a[2 * i]), ":1");
    }
    /* then N more pairs, half of them members already there, one command */
    for (int i = 0; i < N; i++) {
        int k = N / 2 + i;
        a[2 * i] = (lattice_coll_arg){scores[(k * 3) % (2 * N)], strlen(scores[(k * 3) % (2 * N)])};
        a[2 * i + 1] = (lattice_coll_arg){names[k], 5};
    }
    lattice_op_result r = runv(LATTICE_COLL_ZADD, "big", 2 * N, a);
    ck_assert_int_eq(r.status, LATTICE_OK);
    long long added = 0;
    for (int i = 0; i < N; i++) {
        lattice_op_result o = runv(LATTICE_COLL_ZADD, "one", 2, &a[2 * i]);
        ck_assert_int_eq(o.status, LATTICE_OK);
        added += o.num;
    }
    ck_assert_int_eq(r.num, added);
    /* ZREM of many, ZMSCORE of many */
    for (int i = 0; i < N; i++) a[i] = (lattice_coll_arg){names[(i * 5) % (2 * N)], 5};
    r = runv(LATTICE_COLL_ZREM, "big", N, a);
    ck_assert_int_eq(r.status, LATTICE_OK);
    long long removed = 0;
    for (int i = 0; i < N; i++) {
        lattice_op_result o = runv(LATTICE_COLL_ZREM, "one", 1, &a[i]);
        removed += o.num;
    }
    ck_assert_int_eq(r.num, removed);
    static char want[1 << 16];
    lattice_op_result w = runv(LATTICE_COLL_ZMSCORE, "one", N, a);
    memcpy(want, w.value, w.value_len);
    size_t wl = w.value_len;
    r = runv(LATTICE_COLL_ZMSCORE, "big", N, a);
    ck_assert(r.value_len == wl && !memcmp(r.value, want, wl));
    w = run(LATTICE_COLL_ZRANGE, "one", "0", "-1", "withscores", NULL);
    ck_assert_uint_lt(w.value_len, sizeof want);
    memcpy(want, w.value, w.value_len);
    wl = w.value_len;
    r = run(LATTICE_COLL_ZRANGE, "big", "0", "-1", "withscores", NULL);
    ck_assert(r.value_len == wl && !memcmp(r.value, want, wl));
}
END_TEST

START_TEST(refused_and_too_large)
{
    /* unknown command numbers and malformed rows are not replies */
    lattice_op_result r;
    static const char row[] = "\x01\x05\x00"; /* count 5, nothing after */
    lattice_store_entry e = {part("bad"), "bad", 3, row, sizeof row - 1, 0, 1, LATTICE_TYPE_ZSET};
    ck_assert_int_eq(lattice_store_put(cache.store, &e, 0), LATTICE_OK);
    cache.counter[part("bad")] = 1;
    r = run(LATTICE_COLL_ZCARD, "bad", NULL);
    ck_assert_int_eq(r.status, LATTICE_ERR_PROTO);
    /* a row past the cache's max_value_bytes (64 here) */
    cache.cfg.max_value_bytes = 64;
    char big[50];
    memset(big, 'm', sizeof big - 1);
    big[sizeof big - 1] = 0;
    SHOWS(run(LATTICE_COLL_ZADD, "z", "1", big, NULL), ":1");
    r = run(LATTICE_COLL_ZADD, "z", "2", "another", NULL);
    ck_assert_int_eq(r.status, LATTICE_ERR_TOO_LARGE);
    SHOWS(run(LATTICE_COLL_ZCARD, "z", NULL), ":1");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("types_zset");
    TCase *t = tcase_create("zset");
    tcase_add_checked_fixture(t, setup_z, teardown);
    tcase_add_test(t, zadd_options_and_replies);
    tcase_add_test(t, zadd_errors_in_redis_order);
    tcase_add_test(t, order_scores_and_lookups);
    tcase_add_test(t, zrange_by_rank_score_and_lex);
    tcase_add_test(t, the_older_range_commands);
    tcase_add_test(t, counts);
    tcase_add_test(t, removals_and_the_last_member);
    tcase_add_test(t, pops);
    tcase_add_test(t, random_members);
    tcase_add_test(t, scan_whole_set);
    tcase_add_test(t, reads_on_another_type);
    tcase_add_test(t, a_copy_applies_the_row_and_the_expiry_stays);
    tcase_add_test(t, many_members_at_once);
    tcase_add_test(t, refused_and_too_large);
    suite_add_tcase(s, t);
    return lt_run_suite(s);
}
