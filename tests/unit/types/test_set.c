/*
 * Sets in types/ without a network (LATTICE_OP_COLL_*, lattice/coll.h,
 * types/set.c): each command executed on a real store, its reply read back
 * with lattice_coll_reply_next; an integer set kept sorted as Redis's
 * intset (format 1), a set of other members in insertion order (format 2)
 * and the conversions between them; SPOP's and SRANDMEMBER's counts; what
 * Redis checks before the key is looked up comes first, then WRONGTYPE
 * both ways; the row a write replicates (SPOP's too) applied on a second
 * store (a copy) answers the same; the last member removed (SREM, SPOP)
 * removes the key; the key's expiry survives writes; a malformed row is
 * refused.
 */
#include <check.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <urcu.h>

#include "cache.pb-c.h"
#include "lattice/alloc.h"
#include "lattice/clock.h"
#include "lattice/coll.h"
#include "run_suite.h"
#include "lattice/txn.h"
#include "types/types.h"

#include "one_cache.h"

static uint32_t part(const char *key) { return lattice_partition_of_key(key, strlen(key), 16); }

/* The reply as text: elements separated by blanks, each its type byte and
 * its bytes or number ("*2 $a $1", ":3", "_", "-ERR ..."). */
static char shown[1 << 16];

static const char *show(const lattice_op_result *r)
{
    size_t off = 0, w = 0;
    lattice_coll_elem e;
    shown[0] = 0;
    int k;
    while ((k = lattice_coll_reply_next(r->value, r->value_len, &off, &e)) == 1) {
        int n = e.type == '$' || e.type == '+' || e.type == '-' || e.type == ','
                    ? snprintf(shown + w, sizeof shown - w, "%s%c%.*s", w ? " " : "", e.type, (int)e.len, e.ptr)
                : e.type == '_' ? snprintf(shown + w, sizeof shown - w, "%s_", w ? " " : "")
                                : snprintf(shown + w, sizeof shown - w, "%s%c%lld", w ? " " : "", e.type, e.num);
        ck_assert_uint_lt((size_t)n, sizeof shown - w);
        w += (size_t)n;
    }
    ck_assert_int_eq(k, 0);
    return shown;
}

static repl_out last_repl;

/* Runs cmd on key with the n arguments a. */
static lattice_op_result runv(int cmd, const char *key, size_t n, const lattice_coll_arg *a)
{
    static char buf[1 << 16];
    size_t len = lattice_coll_pack(buf, sizeof buf, a, n);
    ck_assert_uint_gt(len, 0);
    lattice_op op = lattice_op_coll(NULL, cmd, key, strlen(key), buf, len);
    exec_in in = {op.kind, 0, part(key), key, strlen(key), op.value, op.value_len, op.delta, 0};
    lattice_op_result r;
    exec_local(&cache, &in, &scratch, &r, &last_repl);
    return r;
}

/* Runs cmd on key with the NULL-ended arguments after it. */
static lattice_op_result run(int cmd, const char *key, ...)
{
    lattice_coll_arg a[32];
    size_t n = 0;
    va_list ap;
    va_start(ap, key);
    for (const char *s; (s = va_arg(ap, const char *));) {
        ck_assert_uint_lt(n, 32);
        a[n++] = (lattice_coll_arg){s, strlen(s)};
    }
    va_end(ap);
    return runv(cmd, key, n, a);
}

#define SHOWS(r, want)                                                                                                 \
    do {                                                                                                               \
        lattice_op_result r_ = (r);                                                                                    \
        ck_assert_int_eq(r_.status, LATTICE_OK);                                                                       \
        ck_assert_str_eq(show(&r_), want);                                                                             \
    } while (0)

/* The key's stored row: its format byte (0: no key). */
static int row_format(const char *key)
{
    static char buf[1 << 16];
    lattice_store_meta m = {0};
    int st = lattice_store_get(cache.store, part(key), key, strlen(key), buf, sizeof buf, &m);
    if (st == LATTICE_ERR_NOT_FOUND) return 0;
    ck_assert_int_eq(st, LATTICE_OK);
    ck_assert_uint_eq(m.type, LATTICE_TYPE_SET);
    return (unsigned char)buf[0];
}

static bool key_exists(const char *key)
{
    lattice_store_meta m = {0};
    return lattice_store_get(cache.store, part(key), key, strlen(key), NULL, 0, &m) != LATTICE_ERR_NOT_FOUND;
}

/* A reply "*n $a $b ..." (or "~n") as its n members sorted and blank-joined
 * in dst; the count. */
static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static size_t sorted_members(const char *reply, char *dst, size_t cap)
{
    static char copy[sizeof shown];
    static char *m[4096];
    snprintf(copy, sizeof copy, "%s", reply);
    size_t n = 0;
    char *save = NULL;
    char *t = strtok_r(copy, " ", &save);
    ck_assert(t && (t[0] == '*' || t[0] == '~')); /* an array, or a set (SMEMBERS, SPOP k n) */
    while ((t = strtok_r(NULL, " ", &save))) {
        ck_assert_msg(t[0] == '$', "not a bulk: %s", t);
        ck_assert_uint_lt(n, 4096);
        m[n++] = t + 1;
    }
    ck_assert_uint_eq(n, strtoul(copy + 1, NULL, 10));
    qsort(m, n, sizeof *m, cmp_str);
    size_t w = 0;
    dst[0] = 0;
    for (size_t i = 0; i < n; i++) w += (size_t)snprintf(dst + w, cap - w, "%s%s", i ? " " : "", m[i]);
    return n;
}

static void sorted_shows(lattice_op_result r, const char *want)
{
    static char got[sizeof shown];
    ck_assert_int_eq(r.status, LATTICE_OK);
    sorted_members(show(&r), got, sizeof got);
    ck_assert_str_eq(got, want);
}

START_TEST(integers_are_kept_sorted_as_an_intset)
{
    SHOWS(run(LATTICE_COLL_SADD, "s", "3", "1", "2", "1", "-5", "10", NULL), ":5");
    ck_assert(last_repl.needed && !last_repl.remove);
    ck_assert_int_eq(last_repl.type, LATTICE_TYPE_SET);
    ck_assert_int_eq(row_format("s"), 1);
    SHOWS(run(LATTICE_COLL_SMEMBERS, "s", NULL), "~5 $-5 $1 $2 $3 $10");
    SHOWS(run(LATTICE_COLL_SADD, "s", "4", "-9223372036854775808", "9223372036854775807", "3", NULL), ":3");
    SHOWS(run(LATTICE_COLL_SMEMBERS, "s", NULL),
          "~8 $-9223372036854775808 $-5 $1 $2 $3 $4 $10 $9223372036854775807");
    SHOWS(run(LATTICE_COLL_SADD, "s", "4", "10", NULL), ":0");
    ck_assert(!last_repl.needed); /* nothing added, nothing written */
    SHOWS(run(LATTICE_COLL_SCARD, "s", NULL), ":8");
    SHOWS(run(LATTICE_COLL_SISMEMBER, "s", "4", NULL), ":1");
    SHOWS(run(LATTICE_COLL_SISMEMBER, "s", "04", NULL), ":0");
    SHOWS(run(LATTICE_COLL_SISMEMBER, "s", "+4", NULL), ":0");
    SHOWS(run(LATTICE_COLL_SISMEMBER, "s", "99", NULL), ":0");
    SHOWS(run(LATTICE_COLL_SMISMEMBER, "s", "1", "01", "x", "-5", "9223372036854775808", NULL), "*5 :1 :0 :0 :1 :0");
    SHOWS(run(LATTICE_COLL_SREM, "s", "1", "1", "01", "99", "x", "10", NULL), ":2");
    ck_assert(last_repl.needed && !last_repl.remove);
    SHOWS(run(LATTICE_COLL_SMEMBERS, "s", NULL), "~6 $-9223372036854775808 $-5 $2 $3 $4 $9223372036854775807");
    ck_assert_int_eq(row_format("s"), 1);
    SHOWS(run(LATTICE_COLL_SREM, "s", "nope", NULL), ":0");
    ck_assert(!last_repl.needed);
    /* texts that are not canonical integers are members, not numbers */
    SHOWS(run(LATTICE_COLL_SADD, "t", "01", "+1", "-0", "1", NULL), ":4");
    ck_assert_int_eq(row_format("t"), 2);
    SHOWS(run(LATTICE_COLL_SMEMBERS, "t", NULL), "~4 $01 $+1 $-0 $1");
    SHOWS(run(LATTICE_COLL_SISMEMBER, "t", "01", NULL), ":1");
    /* absent keys */
    SHOWS(run(LATTICE_COLL_SMEMBERS, "none", NULL), "~0");
    SHOWS(run(LATTICE_COLL_SCARD, "none", NULL), ":0");
    SHOWS(run(LATTICE_COLL_SISMEMBER, "none", "a", NULL), ":0");
    SHOWS(run(LATTICE_COLL_SMISMEMBER, "none", "a", "b", NULL), "*2 :0 :0");
    SHOWS(run(LATTICE_COLL_SREM, "none", "a", NULL), ":0");
    ck_assert(!last_repl.needed);
    ck_assert(!key_exists("none"));
}
END_TEST

START_TEST(members_keep_their_order_and_a_set_converts_once)
{
    SHOWS(run(LATTICE_COLL_SADD, "m", "b", "a", "c", "a", NULL), ":3");
    ck_assert_int_eq(row_format("m"), 2);
    SHOWS(run(LATTICE_COLL_SMEMBERS, "m", NULL), "~3 $b $a $c");
    SHOWS(run(LATTICE_COLL_SADD, "m", "", "b", "d", NULL), ":2");
    SHOWS(run(LATTICE_COLL_SMEMBERS, "m", NULL), "~5 $b $a $c $ $d");
    SHOWS(run(LATTICE_COLL_SISMEMBER, "m", "", NULL), ":1");
    SHOWS(run(LATTICE_COLL_SREM, "m", "a", "", "zz", "a", NULL), ":2");
    SHOWS(run(LATTICE_COLL_SMEMBERS, "m", NULL), "~3 $b $c $d");
    /* an integer set takes a non-integer: format 2, its integers first in their order */
    SHOWS(run(LATTICE_COLL_SADD, "c", "5", "3", "1", NULL), ":3");
    ck_assert_int_eq(row_format("c"), 1);
    SHOWS(run(LATTICE_COLL_SADD, "c", "2", "x", "4", "3", NULL), ":3");
    ck_assert_int_eq(row_format("c"), 2);
    SHOWS(run(LATTICE_COLL_SMEMBERS, "c", NULL), "~6 $1 $3 $5 $2 $x $4");
    /* ... and stays format 2 when the non-integer goes */
    SHOWS(run(LATTICE_COLL_SREM, "c", "x", NULL), ":1");
    ck_assert_int_eq(row_format("c"), 2);
    SHOWS(run(LATTICE_COLL_SISMEMBER, "c", "4", NULL), ":1");
    SHOWS(run(LATTICE_COLL_SADD, "c", "0", NULL), ":1");
    SHOWS(run(LATTICE_COLL_SMEMBERS, "c", NULL), "~6 $1 $3 $5 $2 $4 $0");
    /* a member with a NUL after digits is no integer (Redis's string2ll) */
    lattice_coll_arg nul[] = {{"1\0", 2}, {"1", 1}};
    SHOWS(runv(LATTICE_COLL_SADD, "n", 2, nul), ":2");
    ck_assert_int_eq(row_format("n"), 2);
    SHOWS(runv(LATTICE_COLL_SISMEMBER, "n", 1, nul), ":1");
    SHOWS(run(LATTICE_COLL_SREM, "n", "1", NULL), ":1");
    SHOWS(runv(LATTICE_COLL_SISMEMBER, "n", 1, nul), ":1");
    SHOWS(run(LATTICE_COLL_SCARD, "n", NULL), ":1");
}
END_TEST

/* n integer members "0", "2", "4" ... (step), or "m0", "m1" ... (prefix). */
static lattice_coll_arg *members(size_t n, const char *prefix, int first, int step)
{
    static char text[4096][24];
    static lattice_coll_arg a[4096];
    ck_assert_uint_le(n, 4096);
    for (size_t i = 0; i < n; i++) {
        int len = snprintf(text[i], sizeof text[i], "%s%d", prefix, first + (int)i * step);
        a[i] = (lattice_coll_arg){text[i], (size_t)len};
    }
    return a;
}

START_TEST(past_512_integers_a_set_is_members)
{
    cache.cfg.max_value_bytes = 1 << 20;
    /* 512 integers: still an intset, sorted */
    SHOWS(runv(LATTICE_COLL_SADD, "e", 512, members(512, "", 511, -1)), ":512");
    ck_assert_int_eq(row_format("e"), 1);
    lattice_op_result r = run(LATTICE_COLL_SMEMBERS, "e", NULL);
    ck_assert_int_eq(r.status, LATTICE_OK);
    ck_assert(strncmp(show(&r), "~512 $0 $1 $2 $3 ", 17) == 0);
    ck_assert(strstr(shown, " $510 $511") && !strstr(shown, "$512"));
    SHOWS(run(LATTICE_COLL_SADD, "e", "100", "511", NULL), ":0");
    ck_assert_int_eq(row_format("e"), 1);
    /* the 513th converts it, and it never goes back when it shrinks */
    SHOWS(run(LATTICE_COLL_SADD, "e", "-1", NULL), ":1");
    ck_assert_int_eq(row_format("e"), 2);
    SHOWS(run(LATTICE_COLL_SCARD, "e", NULL), ":513");
    SHOWS(run(LATTICE_COLL_SISMEMBER, "e", "-1", NULL), ":1");
    SHOWS(run(LATTICE_COLL_SISMEMBER, "e", "300", NULL), ":1");
    SHOWS(runv(LATTICE_COLL_SREM, "e", 500, members(500, "", 0, 1)), ":500");
    ck_assert_int_eq(row_format("e"), 2);
    SHOWS(run(LATTICE_COLL_SCARD, "e", NULL), ":13");
    sorted_shows(run(LATTICE_COLL_SMEMBERS, "e", NULL), "-1 500 501 502 503 504 505 506 507 508 509 510 511");
    /* 513 in one SADD to a new key: members at once */
    SHOWS(runv(LATTICE_COLL_SADD, "f", 513, members(513, "", 0, 1)), ":513");
    ck_assert_int_eq(row_format("f"), 2);
    /* a big set of members: SADD, SREM, SMISMEMBER through the hash index */
    SHOWS(runv(LATTICE_COLL_SADD, "g", 3000, members(3000, "m", 0, 1)), ":3000");
    SHOWS(runv(LATTICE_COLL_SADD, "g", 2000, members(2000, "m", 2000, 1)), ":1000");
    SHOWS(run(LATTICE_COLL_SCARD, "g", NULL), ":4000");
    SHOWS(runv(LATTICE_COLL_SREM, "g", 1000, members(1000, "m", 0, 2)), ":1000");
    SHOWS(run(LATTICE_COLL_SMISMEMBER, "g", "m0", "m1", "m1998", "m1999", "m3999", "m4000", "x", NULL),
          "*7 :0 :1 :0 :1 :1 :0 :0");
    SHOWS(run(LATTICE_COLL_SCARD, "g", NULL), ":3000");
    r = run(LATTICE_COLL_SMEMBERS, "g", NULL);
    ck_assert_int_eq(r.status, LATTICE_OK);
    ck_assert(strncmp(show(&r), "~3000 $m1 $m3 $m5 ", 18) == 0); /* insertion order kept */
}
END_TEST

START_TEST(the_last_member_gone_removes_the_key)
{
    SHOWS(run(LATTICE_COLL_SADD, "s", "a", "b", NULL), ":2");
    SHOWS(run(LATTICE_COLL_SREM, "s", "a", "b", "c", NULL), ":2");
    ck_assert(last_repl.needed && last_repl.remove);
    ck_assert(!key_exists("s"));
    SHOWS(run(LATTICE_COLL_SADD, "s", "7", NULL), ":1");
    SHOWS(run(LATTICE_COLL_SPOP, "s", NULL), "$7");
    ck_assert(last_repl.needed && last_repl.remove);
    ck_assert(!key_exists("s"));
    SHOWS(run(LATTICE_COLL_SPOP, "s", NULL), "_");
    SHOWS(run(LATTICE_COLL_SADD, "s", "x", "y", NULL), ":2");
    sorted_shows(run(LATTICE_COLL_SPOP, "s", "2", NULL), "x y");
    ck_assert(last_repl.needed && last_repl.remove);
    ck_assert(!key_exists("s"));
    SHOWS(run(LATTICE_COLL_SADD, "s", "x", NULL), ":1");
    SHOWS(run(LATTICE_COLL_SPOP, "s", "9223372036854775807", NULL), "~1 $x");
    ck_assert(!key_exists("s"));
}
END_TEST

START_TEST(arguments_first_then_the_key)
{
    lattice_store_entry e = {part("str"), "str", 3, "v", 1, 0, 1, LATTICE_TYPE_STRING};
    ck_assert_int_eq(lattice_store_put(cache.store, &e, 0), LATTICE_OK);
    cache.counter[part("str")] = 1;
    /* Redis checks these before it looks the key up */
    SHOWS(run(LATTICE_COLL_SADD, "str", NULL), "-ERR wrong number of arguments for 'sadd' command");
    SHOWS(run(LATTICE_COLL_SREM, "str", NULL), "-ERR wrong number of arguments for 'srem' command");
    SHOWS(run(LATTICE_COLL_SISMEMBER, "str", "a", "b", NULL), "-ERR wrong number of arguments for 'sismember' command");
    SHOWS(run(LATTICE_COLL_SMISMEMBER, "str", NULL), "-ERR wrong number of arguments for 'smismember' command");
    SHOWS(run(LATTICE_COLL_SCARD, "str", "x", NULL), "-ERR wrong number of arguments for 'scard' command");
    SHOWS(run(LATTICE_COLL_SMEMBERS, "str", "x", NULL), "-ERR wrong number of arguments for 'smembers' command");
    SHOWS(run(LATTICE_COLL_SSCAN, "str", NULL), "-ERR wrong number of arguments for 'sscan' command");
    SHOWS(run(LATTICE_COLL_SPOP, "str", "x", NULL), "-ERR value is out of range, must be positive");
    SHOWS(run(LATTICE_COLL_SPOP, "str", "-1", NULL), "-ERR value is out of range, must be positive");
    SHOWS(run(LATTICE_COLL_SPOP, "str", "1", "2", NULL), "-ERR syntax error");
    SHOWS(run(LATTICE_COLL_SPOP, "str", "x", "y", NULL), "-ERR syntax error");
    SHOWS(run(LATTICE_COLL_SRANDMEMBER, "str", "x", NULL), "-ERR value is not an integer or out of range");
    SHOWS(run(LATTICE_COLL_SRANDMEMBER, "str", "9223372036854775808", NULL),
          "-ERR value is not an integer or out of range");
    SHOWS(run(LATTICE_COLL_SRANDMEMBER, "str", "-9223372036854775808", NULL),
          "-ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807");
    SHOWS(run(LATTICE_COLL_SRANDMEMBER, "str", "x", "y", NULL), "-ERR syntax error");
    lattice_coll_arg nul_count[] = {{"1\0", 2}};
    SHOWS(runv(LATTICE_COLL_SPOP, "str", 1, nul_count), "-ERR value is out of range, must be positive");
    SHOWS(runv(LATTICE_COLL_SRANDMEMBER, "str", 1, nul_count), "-ERR value is not an integer or out of range");
    SHOWS(run(LATTICE_COLL_SSCAN, "str", "x", NULL), "-ERR invalid cursor");
    SHOWS(run(LATTICE_COLL_SSCAN, "str", "18446744073709551616", NULL), "-ERR invalid cursor");
    /* then WRONGTYPE, with the type it holds, nothing written */
    static const struct {
        int cmd;
        const char *a, *b;
    } wrong[] = {
        {LATTICE_COLL_SADD, "a", NULL},      {LATTICE_COLL_SREM, "a", NULL},   {LATTICE_COLL_SPOP, NULL, NULL},
        {LATTICE_COLL_SPOP, "0", NULL},      {LATTICE_COLL_SPOP, "2", NULL},   {LATTICE_COLL_SISMEMBER, "a", NULL},
        {LATTICE_COLL_SMISMEMBER, "a", "b"}, {LATTICE_COLL_SCARD, NULL, NULL}, {LATTICE_COLL_SMEMBERS, NULL, NULL},
        {LATTICE_COLL_SRANDMEMBER, NULL, NULL}, {LATTICE_COLL_SRANDMEMBER, "0", NULL},
        {LATTICE_COLL_SSCAN, "0", NULL},     {LATTICE_COLL_SSCAN, "0", "COUNT"},
    };
    for (size_t i = 0; i < sizeof wrong / sizeof wrong[0]; i++) {
        lattice_op_result r = run(wrong[i].cmd, "str", wrong[i].a, wrong[i].b, NULL);
        ck_assert_msg(r.status == LATTICE_ERR_WRONGTYPE, "case %zu: status %d", i, r.status);
        ck_assert_uint_eq(LATTICE_OP_R_TYPE(r.flags), LATTICE_TYPE_STRING);
        ck_assert(!last_repl.needed);
    }
    /* SSCAN's options come after the key: WRONGTYPE above, an absent key
     * is an empty scan, a set checks them */
    SHOWS(run(LATTICE_COLL_SSCAN, "none", "0", "COUNT", "0", NULL), "*2 $0 *0");
    SHOWS(run(LATTICE_COLL_SADD, "s", "a", NULL), ":1");
    SHOWS(run(LATTICE_COLL_SSCAN, "s", "0", "COUNT", "0", NULL), "-ERR syntax error");
    SHOWS(run(LATTICE_COLL_SSCAN, "s", "0", "COUNT", "x", NULL), "-ERR value is not an integer or out of range");
    SHOWS(run(LATTICE_COLL_SSCAN, "s", "0", "MATCH", NULL), "-ERR syntax error");
    /* and other kinds on a set: a hash command, a string op */
    lattice_op_result r = run(LATTICE_COLL_HGET, "s", "a", NULL);
    ck_assert_int_eq(r.status, LATTICE_ERR_WRONGTYPE);
    ck_assert_uint_eq(LATTICE_OP_R_TYPE(r.flags), LATTICE_TYPE_SET);
    exec_in in = {LATTICE_OP_APPEND, 0, part("s"), "s", 1, "x", 1, 0, 0};
    exec_local(&cache, &in, &scratch, &r, &last_repl);
    ck_assert_int_eq(r.status, LATTICE_ERR_WRONGTYPE);
    SHOWS(run(LATTICE_COLL_SMEMBERS, "s", NULL), "~1 $a");
}
END_TEST

START_TEST(scan_members)
{
    SHOWS(run(LATTICE_COLL_SADD, "i", "12", "3", "1", "20", NULL), ":4");
    SHOWS(run(LATTICE_COLL_SSCAN, "i", "0", NULL), "*2 $0 *4 $1 $3 $12 $20");
    SHOWS(run(LATTICE_COLL_SSCAN, "i", "7", "COUNT", "1", NULL), "*2 $0 *4 $1 $3 $12 $20"); /* an intset: all */
    SHOWS(run(LATTICE_COLL_SSCAN, "i", "0", "MATCH", "1*", NULL), "*2 $0 *2 $1 $12");
    SHOWS(run(LATTICE_COLL_SSCAN, "i", "0", "MATCH", "x*", "COUNT", "10", NULL), "*2 $0 *0");
    SHOWS(run(LATTICE_COLL_SADD, "m", "ab", "b", "ac", NULL), ":3");
    SHOWS(run(LATTICE_COLL_SSCAN, "m", "0", "MATCH", "a*", NULL), "*2 $0 *2 $ab $ac");
    SHOWS(run(LATTICE_COLL_SSCAN, "m", "0", "match", "*", "count", "3", NULL), "*2 $0 *3 $ab $b $ac");
    SHOWS(run(LATTICE_COLL_SSCAN, "none", "0", NULL), "*2 $0 *0");
    SHOWS(run(LATTICE_COLL_SSCAN, "m", "0", "BOGUS", "x", NULL), "-ERR syntax error");
}
END_TEST

/* The members of a reply "*n $a $b ..." (or "~n ...", a set): each one of
 * the set's (a word in `of`, blank-separated), none twice when distinct. */
static void members_of(const char *reply, size_t n, const char *of, bool distinct)
{
    char head[32], copy[sizeof shown];
    snprintf(head, sizeof head, "*%zu", n);
    snprintf(copy, sizeof copy, "%s", reply);
    char *save = NULL, *t = strtok_r(copy, " ", &save);
    ck_assert(t && (t[0] == '*' || t[0] == '~'));
    ck_assert_str_eq(t + 1, head + 1);
    char seen[4096] = "";
    size_t k = 0;
    while ((t = strtok_r(NULL, " ", &save))) {
        char word[64];
        ck_assert(t[0] == '$');
        snprintf(word, sizeof word, " %s ", t + 1);
        char padded[4096];
        snprintf(padded, sizeof padded, " %s ", of);
        ck_assert_msg(strstr(padded, word), "'%s' is no member of '%s'", t + 1, of);
        if (distinct) {
            ck_assert_msg(!strstr(seen, word), "'%s' twice in %s", t + 1, reply);
            strncat(seen, word, sizeof seen - strlen(seen) - 1);
        }
        k++;
    }
    ck_assert_uint_eq(k, n);
}

START_TEST(random_members)
{
    SHOWS(run(LATTICE_COLL_SADD, "r", "a", "b", "c", "d", "e", "f", "g", "h", "i", "j", NULL), ":10");
    const char *all = "a b c d e f g h i j";
    /* SRANDMEMBER: nothing changes */
    lattice_op_result r = run(LATTICE_COLL_SRANDMEMBER, "r", NULL);
    ck_assert_int_eq(r.status, LATTICE_OK);
    ck_assert(show(&r)[0] == '$' && strlen(shown) == 2 && strchr("abcdefghij", shown[1]));
    static const struct {
        const char *count;
        size_t n;
        bool distinct;
    } rc[] = {{"1", 1, true}, {"3", 3, true}, {"4", 4, true}, {"9", 9, true}, {"-1", 1, false}, {"-25", 25, false}};
    for (size_t i = 0; i < sizeof rc / sizeof rc[0]; i++) {
        for (int round = 0; round < 20; round++) {
            r = run(LATTICE_COLL_SRANDMEMBER, "r", rc[i].count, NULL);
            ck_assert_int_eq(r.status, LATTICE_OK);
            ck_assert(!last_repl.needed);
            members_of(show(&r), rc[i].n, all, rc[i].distinct);
        }
    }
    SHOWS(run(LATTICE_COLL_SRANDMEMBER, "r", "10", NULL), "*10 $a $b $c $d $e $f $g $h $i $j"); /* all: its order */
    SHOWS(run(LATTICE_COLL_SRANDMEMBER, "r", "9223372036854775807", NULL), "*10 $a $b $c $d $e $f $g $h $i $j");
    SHOWS(run(LATTICE_COLL_SRANDMEMBER, "r", "0", NULL), "*0");
    SHOWS(run(LATTICE_COLL_SRANDMEMBER, "r", "-0", NULL), "-ERR value is not an integer or out of range");
    SHOWS(run(LATTICE_COLL_SRANDMEMBER, "none", NULL), "_");
    SHOWS(run(LATTICE_COLL_SRANDMEMBER, "none", "5", NULL), "*0");
    SHOWS(run(LATTICE_COLL_SRANDMEMBER, "none", "-5", NULL), "*0");
    SHOWS(run(LATTICE_COLL_SCARD, "r", NULL), ":10");
    /* SPOP: absent key, count 0 */
    SHOWS(run(LATTICE_COLL_SPOP, "none", NULL), "_");
    SHOWS(run(LATTICE_COLL_SPOP, "none", "3", NULL), "~0");
    SHOWS(run(LATTICE_COLL_SPOP, "none", "0", NULL), "~0");
    SHOWS(run(LATTICE_COLL_SPOP, "r", "0", NULL), "~0");
    ck_assert(!last_repl.needed);
    /* one member, then 2 (few: taken one by one), then 6 of the 7 left
     * (most: the one kept picked): distinct, gone from the set; with the
     * one left they are the 10 members */
    static char popped[sizeof shown];
    r = run(LATTICE_COLL_SPOP, "r", NULL);
    ck_assert_int_eq(r.status, LATTICE_OK);
    ck_assert(last_repl.needed && !last_repl.remove);
    char gone[64];
    snprintf(gone, sizeof gone, "%s", show(&r) + 1);
    snprintf(popped, sizeof popped, "*10 $%s", gone);
    SHOWS(run(LATTICE_COLL_SISMEMBER, "r", gone, NULL), ":0");
    SHOWS(run(LATTICE_COLL_SCARD, "r", NULL), ":9");
    r = run(LATTICE_COLL_SPOP, "r", "2", NULL);
    ck_assert_int_eq(r.status, LATTICE_OK);
    members_of(show(&r), 2, all, true);
    strcat(popped, strchr(shown, ' '));
    SHOWS(run(LATTICE_COLL_SCARD, "r", NULL), ":7");
    r = run(LATTICE_COLL_SPOP, "r", "6", NULL);
    ck_assert_int_eq(r.status, LATTICE_OK);
    members_of(show(&r), 6, all, true);
    strcat(popped, strchr(shown, ' '));
    SHOWS(run(LATTICE_COLL_SCARD, "r", NULL), ":1");
    r = run(LATTICE_COLL_SMEMBERS, "r", NULL);
    ck_assert_int_eq(r.status, LATTICE_OK);
    strcat(popped, strchr(show(&r), ' '));
    members_of(popped, 10, all, true);
}
END_TEST

START_TEST(spop_of_integers)
{
    /* the whole integer set: in its order */
    SHOWS(run(LATTICE_COLL_SADD, "i", "5", "4", "3", NULL), ":3");
    SHOWS(run(LATTICE_COLL_SPOP, "i", "3", NULL), "~3 $3 $4 $5");
    ck_assert(!key_exists("i"));
    /* a format 2 set of integers only: sorted too (Redis's union makes an intset of them) */
    SHOWS(run(LATTICE_COLL_SADD, "h", "x", "9", "7", "8", NULL), ":4");
    SHOWS(run(LATTICE_COLL_SREM, "h", "x", NULL), ":1");
    ck_assert_int_eq(row_format("h"), 2);
    SHOWS(run(LATTICE_COLL_SPOP, "h", "10", NULL), "~3 $7 $8 $9");
    /* most of an intset popped: the rest answered in order, the set stays sorted */
    SHOWS(run(LATTICE_COLL_SADD, "j", "1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11", "12", NULL), ":12");
    lattice_op_result r = run(LATTICE_COLL_SPOP, "j", "10", NULL);
    ck_assert_int_eq(r.status, LATTICE_OK);
    members_of(show(&r), 10, "1 2 3 4 5 6 7 8 9 10 11 12", true);
    long prev = 0;
    for (const char *p = strchr(shown, '$'); p; p = strchr(p + 1, '$')) {
        long v = strtol(p + 1, NULL, 10);
        ck_assert_int_gt(v, prev);
        prev = v;
    }
    ck_assert_int_eq(row_format("j"), 1);
    SHOWS(run(LATTICE_COLL_SCARD, "j", NULL), ":2");
    /* most of a format 2 set popped, the ones kept all integers: an intset
     * again (Redis builds a new set of them) */
    for (int round = 0; round < 30; round++) {
        SHOWS(run(LATTICE_COLL_SADD, "k", "a", "11", "10", "9", "8", "7", "6", "5", "4", "3", "2", "1", NULL), ":12");
        ck_assert_int_eq(row_format("k"), 2);
        r = run(LATTICE_COLL_SPOP, "k", "10", NULL);
        ck_assert_int_eq(r.status, LATTICE_OK);
        members_of(show(&r), 10, "a 1 2 3 4 5 6 7 8 9 10 11", true);
        bool a_popped = strstr(shown, " $a") != NULL;
        ck_assert_int_eq(row_format("k"), a_popped ? 1 : 2);
        r = run(LATTICE_COLL_SMEMBERS, "k", NULL);
        ck_assert_int_eq(r.status, LATTICE_OK);
        char left[128], want[128];
        snprintf(left, sizeof left, "%s", show(&r));
        long a = 0, b = 0;
        if (a_popped) {
            ck_assert_int_eq(sscanf(left, "~2 $%ld $%ld", &a, &b), 2);
            ck_assert_int_lt(a, b);
        }
        /* the two left, popped: the same, sorted when integers */
        r = run(LATTICE_COLL_SPOP, "k", "2", NULL);
        ck_assert_int_eq(r.status, LATTICE_OK);
        if (a_popped) {
            ck_assert_str_eq(show(&r), left);
        } else {
            sorted_members(left, want, sizeof want);
            sorted_shows(r, want);
        }
        ck_assert(!key_exists("k"));
    }
}
END_TEST

/* A second store as a copy of the partition: the last write's row applied
 * on it (or the key removed); the copy's answer to cmd, then back. */
static void on_copy_of(lattice_store *copy, const repl_out *w, const char *key, int cmd, const char *want)
{
    lattice_store *mine = cache.store;
    cache.store = copy;
    ck_assert(w->needed);
    ck_assert_int_eq(exec_replicate_typed(&cache, part(key), key, strlen(key), w->value, w->value_len, w->expire_ms,
                                          w->version, w->remove, w->type),
                     LATTICE_OK);
    SHOWS(run(cmd, key, NULL), want);
    cache.store = mine;
}

static void on_copy(lattice_store *copy, const char *key, int cmd, const char *want)
{
    repl_out w = last_repl;
    on_copy_of(copy, &w, key, cmd, want);
}

START_TEST(a_copy_applies_the_row_and_answers_the_same)
{
    lattice_store *copy;
    lattice_store_config sc = {"c", 16, region, NULL, NULL};
    ck_assert_int_eq(lattice_store_create(&sc, &copy), LATTICE_OK);
    SHOWS(run(LATTICE_COLL_SADD, "s", "3", "1", "2", NULL), ":3");
    ck_assert_int_eq(cache.counter[part("s")], last_repl.version);
    on_copy(copy, "s", LATTICE_COLL_SMEMBERS, "~3 $1 $2 $3");
    SHOWS(run(LATTICE_COLL_SADD, "s", "x", NULL), ":1");
    on_copy(copy, "s", LATTICE_COLL_SMEMBERS, "~4 $1 $2 $3 $x");
    SHOWS(run(LATTICE_COLL_SREM, "s", "2", NULL), ":1");
    on_copy(copy, "s", LATTICE_COLL_SMEMBERS, "~3 $1 $3 $x");
    /* SPOP: what it removed is what the copy lacks, the command never travels */
    for (int i = 0; i < 2; i++) {
        lattice_op_result r = run(LATTICE_COLL_SPOP, "s", NULL);
        ck_assert_int_eq(r.status, LATTICE_OK);
        ck_assert(last_repl.needed && !last_repl.remove);
        repl_out w = last_repl; /* (a read leaves the row it points to alone) */
        r = run(LATTICE_COLL_SMEMBERS, "s", NULL);
        ck_assert_int_eq(r.status, LATTICE_OK);
        char mine[64];
        snprintf(mine, sizeof mine, "%s", show(&r));
        on_copy_of(copy, &w, "s", LATTICE_COLL_SMEMBERS, mine);
    }
    SHOWS(run(LATTICE_COLL_SCARD, "s", NULL), ":1");
    SHOWS(run(LATTICE_COLL_SADD, "s", "a", "b", "c", "d", "e", "f", NULL), ":6");
    lattice_op_result r = run(LATTICE_COLL_SPOP, "s", "5", NULL);
    ck_assert_int_eq(r.status, LATTICE_OK);
    on_copy(copy, "s", LATTICE_COLL_SCARD, ":2");
    char mine[64];
    ck_assert_int_eq(run(LATTICE_COLL_SPOP, "s", "1", NULL).status, LATTICE_OK); /* the write to replicate */
    repl_out w = last_repl;
    r = run(LATTICE_COLL_SMEMBERS, "s", NULL);
    snprintf(mine, sizeof mine, "%s", show(&r));
    ck_assert(strncmp(mine, "~1 ", 3) == 0);
    on_copy_of(copy, &w, "s", LATTICE_COLL_SMEMBERS, mine);
    /* the last one popped: the copy removes the key too */
    ck_assert_int_eq(run(LATTICE_COLL_SPOP, "s", NULL).status, LATTICE_OK);
    ck_assert(last_repl.needed && last_repl.remove);
    on_copy(copy, "s", LATTICE_COLL_SCARD, ":0");
    lattice_store_meta m = {0};
    ck_assert_int_eq(lattice_store_get(copy, part("s"), "s", 1, NULL, 0, &m), LATTICE_ERR_NOT_FOUND);
    lattice_store_destroy(copy);
}
END_TEST

START_TEST(writes_keep_the_expiry)
{
    SHOWS(run(LATTICE_COLL_SADD, "s", "a", "b", "c", "d", NULL), ":4");
    ck_assert_uint_eq(last_repl.expire_ms, 0);
    exec_in in = {LATTICE_OP_EXPIRE, 0, part("s"), "s", 1, NULL, 0, 0, 100000};
    lattice_op_result r;
    exec_local(&cache, &in, &scratch, &r, &last_repl);
    ck_assert_int_eq(r.status, LATTICE_OK);
    uint64_t exp = last_repl.expire_ms;
    ck_assert_uint_gt(exp, lt_wall_ms());
    SHOWS(run(LATTICE_COLL_SADD, "s", "e", NULL), ":1");
    ck_assert_uint_eq(last_repl.expire_ms, exp);
    SHOWS(run(LATTICE_COLL_SREM, "s", "a", NULL), ":1");
    ck_assert_uint_eq(last_repl.expire_ms, exp);
    ck_assert_int_eq(run(LATTICE_COLL_SPOP, "s", NULL).status, LATTICE_OK);
    ck_assert_uint_eq(last_repl.expire_ms, exp);
    ck_assert_int_eq(run(LATTICE_COLL_SPOP, "s", "1", NULL).status, LATTICE_OK);
    ck_assert_uint_eq(last_repl.expire_ms, exp);
    lattice_store_meta m = {0};
    char row[64];
    ck_assert_int_eq(lattice_store_get(cache.store, part("s"), "s", 1, row, sizeof row, &m), LATTICE_OK);
    ck_assert_uint_eq(m.expire_ms, exp);
    /* gone with its last member, a new set has no expiry */
    SHOWS(run(LATTICE_COLL_SREM, "s", "a", "b", "c", "d", "e", NULL), ":2");
    ck_assert(!key_exists("s"));
    SHOWS(run(LATTICE_COLL_SADD, "s", "a", NULL), ":1");
    ck_assert_uint_eq(last_repl.expire_ms, 0);
}
END_TEST

START_TEST(refused_rows_and_sizes)
{
    /* a write command under the read kind, and the other way round */
    char buf[8];
    size_t len = lattice_coll_pack(buf, sizeof buf, NULL, 0);
    exec_in in = {LATTICE_OP_COLL_READ, 0, part("s"), "s", 1, buf, len, LATTICE_COLL_SADD, 0};
    lattice_op_result r;
    exec_local(&cache, &in, &scratch, &r, &last_repl);
    ck_assert_int_eq(r.status, LATTICE_ERR_INVAL);
    in.kind = LATTICE_OP_COLL_WRITE;
    in.delta = LATTICE_COLL_SMEMBERS;
    exec_local(&cache, &in, &scratch, &r, &last_repl);
    ck_assert_int_eq(r.status, LATTICE_ERR_INVAL);
    /* malformed rows of type set: an unknown format, an integer row out of
     * order or holding a non-integer, a count past the bytes, no member */
    static const struct {
        const char *row;
        size_t len;
    } bad[] = {{"\x03\x01\x01x", 4}, {"\x01\x02\x01" "2\x01" "1", 6}, {"\x01\x01\x01x", 4},
               {"\x02\x05\x01x", 4}, {"\x02\x00", 2}, {"\x02\x01\x01xz", 5}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        lattice_store_entry e = {part("bad"), "bad", 3, bad[i].row, bad[i].len, 0, 1 + i, LATTICE_TYPE_SET};
        ck_assert_int_eq(lattice_store_put(cache.store, &e, 0), LATTICE_OK);
        cache.counter[part("bad")] = 1 + i;
        r = run(LATTICE_COLL_SCARD, "bad", NULL);
        ck_assert_msg(r.status == LATTICE_ERR_PROTO, "row %zu: status %d", i, r.status);
        r = run(LATTICE_COLL_SADD, "bad", "y", NULL);
        ck_assert_int_eq(r.status, LATTICE_ERR_PROTO);
        ck_assert(!last_repl.needed);
    }
    /* a well-formed row written by hand reads back */
    lattice_store_entry e = {part("ok"), "ok", 2, "\x01\x02\x02-1\x01" "7", 7, 0, 1, LATTICE_TYPE_SET};
    ck_assert_int_eq(lattice_store_put(cache.store, &e, 0), LATTICE_OK);
    cache.counter[part("ok")] = 1;
    SHOWS(run(LATTICE_COLL_SMEMBERS, "ok", NULL), "~2 $-1 $7");
    SHOWS(run(LATTICE_COLL_SISMEMBER, "ok", "7", NULL), ":1");
    /* a row past the cache's max_value_bytes (64 here): refused, nothing changes */
    char big[50];
    memset(big, 'v', sizeof big - 1);
    big[sizeof big - 1] = 0;
    SHOWS(run(LATTICE_COLL_SADD, "s", big, NULL), ":1");
    r = run(LATTICE_COLL_SADD, "s", "another one that does not fit", NULL);
    ck_assert_int_eq(r.status, LATTICE_ERR_TOO_LARGE);
    ck_assert(!last_repl.needed);
    SHOWS(run(LATTICE_COLL_SCARD, "s", NULL), ":1");
}
END_TEST

/* exec_setop (LATTICE_TXN_SETOP): SINTERSTORE ... SMOVE over keys of one
 * partition, each write handed over as it happens. */
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

/* op with arguments args[0..n) (NULL-ended), its keys a run of nk from first. */
static lattice_op_result setop(int op, bool dest, size_t first, size_t nk, ...)
{
    lattice_coll_arg a[8];
    size_t n = 0;
    va_list ap;
    va_start(ap, nk);
    for (const char *x; (x = va_arg(ap, const char *));) a[n++] = (lattice_coll_arg){x, strlen(x)};
    va_end(ap);
    static char packed[256];
    size_t len = lattice_coll_pack(packed, sizeof packed, a, n);
    ck_assert_uint_gt(len, 0);
    lattice_op_result r;
    n_wrote = 0;
    const char *key = a[dest ? 0 : first].ptr;
    exec_setop(&cache, part(key), packed, len, LATTICE_TXN_SETOP_DELTA(op, dest, first, nk), &scratch, &r, note, NULL);
    return r;
}

START_TEST(set_operations_write_their_destination_in_one_step)
{
    SHOWS(run(LATTICE_COLL_SADD, "{p}a", "1", "2", "3", NULL), ":3");
    SHOWS(run(LATTICE_COLL_SADD, "{p}b", "3", "2", "9", NULL), ":3");
    SHOWS(setop(LATTICE_SETOP_SINTER, false, 0, 2, "{p}a", "{p}b", NULL), "~2 $2 $3");
    ck_assert_int_eq(n_wrote, 0);
    SHOWS(setop(LATTICE_SETOP_SINTERSTORE, true, 1, 2, "{p}d", "{p}a", "{p}b", NULL), ":2");
    ck_assert_int_eq(n_wrote, 1);
    ck_assert_str_eq(wrote_keys[0], "{p}d");
    SHOWS(run(LATTICE_COLL_SMEMBERS, "{p}d", NULL), "~2 $2 $3");
    /* a destination of another type is replaced: removed, then written */
    lattice_store_entry e = {part("{p}s"), "{p}s", 4, "str", 3, 0, cache.counter[part("{p}s")] + 1, LATTICE_TYPE_STRING};
    ck_assert_int_eq(lattice_store_put(cache.store, &e, 0), LATTICE_OK);
    cache.counter[part("{p}s")]++;
    SHOWS(setop(LATTICE_SETOP_SUNIONSTORE, true, 1, 2, "{p}s", "{p}a", "{p}b", NULL), ":4");
    ck_assert_int_eq(n_wrote, 2);
    ck_assert_str_eq(wrote_keys[0], "{p}s");
    ck_assert_str_eq(wrote_keys[1], "{p}s");
    SHOWS(run(LATTICE_COLL_SMEMBERS, "{p}s", NULL), "~4 $1 $2 $3 $9"); /* an intset's order */
    /* a source of another type: WRONGTYPE, nothing written */
    e.key = "{p}t";
    e.partition = part("{p}t");
    e.version = cache.counter[e.partition] + 1;
    ck_assert_int_eq(lattice_store_put(cache.store, &e, 0), LATTICE_OK);
    cache.counter[e.partition]++;
    ck_assert_int_eq(setop(LATTICE_SETOP_SINTERSTORE, true, 1, 2, "{p}d", "{p}a", "{p}t", NULL).status,
                     LATTICE_ERR_WRONGTYPE);
    ck_assert_int_eq(n_wrote, 0);
    SHOWS(run(LATTICE_COLL_SCARD, "{p}d", NULL), ":2");
    /* a result past max_value_bytes (64 here): refused before anything changes */
    SHOWS(run(LATTICE_COLL_SADD, "{p}x", "aaaaaaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbbbbbb", NULL), ":2");
    SHOWS(run(LATTICE_COLL_SADD, "{p}y", "cccccccccccccccccccc", "dddddddddddddddddddd", NULL), ":2");
    ck_assert_int_eq(setop(LATTICE_SETOP_SUNIONSTORE, true, 1, 2, "{p}d", "{p}x", "{p}y", NULL).status,
                     LATTICE_ERR_TOO_LARGE);
    ck_assert_int_eq(n_wrote, 0);
    SHOWS(run(LATTICE_COLL_SMEMBERS, "{p}d", NULL), "~2 $2 $3");
    /* an empty result removes the destination */
    SHOWS(setop(LATTICE_SETOP_SDIFFSTORE, true, 1, 2, "{p}d", "{p}a", "{p}a", NULL), ":0");
    ck_assert_int_eq(n_wrote, 1);
    SHOWS(run(LATTICE_COLL_SCARD, "{p}d", NULL), ":0");
    /* SMOVE: the source's write, then the destination's */
    SHOWS(setop(LATTICE_SETOP_SMOVE, false, 0, 2, "{p}a", "{p}b", "1", NULL), ":1");
    ck_assert_int_eq(n_wrote, 2);
    ck_assert_str_eq(wrote_keys[0], "{p}a");
    ck_assert_str_eq(wrote_keys[1], "{p}b");
    SHOWS(setop(LATTICE_SETOP_SMOVE, false, 0, 2, "{p}a", "{p}b", "1", NULL), ":0");
    ck_assert_int_eq(n_wrote, 0);
    /* sorted sets: sets count with score 1; weights and the order by score */
    SHOWS(run(LATTICE_COLL_ZADD, "{p}z", "5", "2", "0.5", "q", NULL), ":2");
    SHOWS(setop(LATTICE_SETOP_ZUNION, false, 1, 2, "2", "{p}z", "{p}b", "WEIGHTS", "2", "3", "WITHSCORES", NULL),
          "&5 $q ,1 $1 ,3 $3 ,3 $9 ,3 $2 ,13");
    SHOWS(setop(LATTICE_SETOP_ZINTERSTORE, true, 2, 2, "{p}zd", "2", "{p}z", "{p}b", "AGGREGATE", "MAX", NULL), ":1");
    SHOWS(run(LATTICE_COLL_ZRANGE, "{p}zd", "0", "-1", "WITHSCORES", NULL), "&1 $2 ,5");
    SHOWS(setop(LATTICE_SETOP_ZUNION, false, 1, 1, "1", "{p}z", "WEIGHTS", "x", NULL),
          "-ERR weight value is not a float");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("types_set");
    TCase *t = tcase_create("set");
    tcase_add_checked_fixture(t, setup, teardown);
    tcase_add_test(t, integers_are_kept_sorted_as_an_intset);
    tcase_add_test(t, members_keep_their_order_and_a_set_converts_once);
    tcase_add_test(t, past_512_integers_a_set_is_members);
    tcase_add_test(t, the_last_member_gone_removes_the_key);
    tcase_add_test(t, arguments_first_then_the_key);
    tcase_add_test(t, scan_members);
    tcase_add_test(t, random_members);
    tcase_add_test(t, spop_of_integers);
    tcase_add_test(t, a_copy_applies_the_row_and_answers_the_same);
    tcase_add_test(t, writes_keep_the_expiry);
    tcase_add_test(t, refused_rows_and_sizes);
    tcase_add_test(t, set_operations_write_their_destination_in_one_step);
    suite_add_tcase(s, t);
    return lt_run_suite(s);
}
