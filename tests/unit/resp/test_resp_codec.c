/* The reply encoder (byte-exact RESP2 and RESP3), the output buffer (limit,
 * iovecs, consume), the command table with Redis's error wording, string2ll
 * and the SET option parser. */
#include <check.h>
#include <limits.h>
#include "base/base.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lattice/alloc.h"
#include "resp_codec.h"
#include "run_suite.h"

Suite *resp_parser_suite(void);

/* ---- encoder ------------------------------------------------------------ */

static char outbuf[1 << 16];

static const char *drain(lattice_resp_out *o)
{
    size_t n = lattice_resp_out_peek(o, outbuf, sizeof(outbuf) - 1);
    ck_assert_uint_eq(n, lattice_resp_out_pending(o));
    outbuf[n] = '\0';
    lattice_resp_out_consume(o, n);
    ck_assert_uint_eq(lattice_resp_out_pending(o), 0);
    return outbuf;
}

/* Append the same sample reply in the buffer's protocol. */
static void sample(lattice_resp_out *o)
{
    ck_assert_int_eq(lattice_resp_add_simple(o, "OK", 2), LATTICE_OK);
    ck_assert_int_eq(lattice_resp_add_error(o, "ERR syntax error", 16), LATTICE_OK);
    ck_assert_int_eq(lattice_resp_add_int(o, -42), LATTICE_OK);
    ck_assert_int_eq(lattice_resp_add_int(o, LLONG_MIN), LATTICE_OK);
    ck_assert_int_eq(lattice_resp_add_bulk(o, "a\r\nb", 4), LATTICE_OK);
    ck_assert_int_eq(lattice_resp_add_bulk(o, "", 0), LATTICE_OK);
    ck_assert_int_eq(lattice_resp_add_null(o), LATTICE_OK);
    ck_assert_int_eq(lattice_resp_add_null_array(o), LATTICE_OK);
    ck_assert_int_eq(lattice_resp_add_array(o, 2), LATTICE_OK);
    ck_assert_int_eq(lattice_resp_add_map(o, 2), LATTICE_OK);
    ck_assert_int_eq(lattice_resp_add_set(o, 3), LATTICE_OK);
    ck_assert_int_eq(lattice_resp_add_double(o, 1.5), LATTICE_OK);
    ck_assert_int_eq(lattice_resp_add_double(o, INFINITY), LATTICE_OK);
    ck_assert_int_eq(lattice_resp_add_double(o, -INFINITY), LATTICE_OK);
    ck_assert_int_eq(lattice_resp_add_double(o, 0.1), LATTICE_OK);
    ck_assert_int_eq(lattice_resp_add_bool(o, 1), LATTICE_OK);
    ck_assert_int_eq(lattice_resp_add_bool(o, 0), LATTICE_OK);
    ck_assert_int_eq(lattice_resp_add_verbatim(o, "txt", "# Server\r\n", 10), LATTICE_OK);
}

START_TEST(encoder_resp2_is_byte_exact)
{
    lattice_resp_out *o = lattice_resp_out_new(0, 2);
    sample(o);
    ck_assert_str_eq(drain(o),
                     "+OK\r\n"
                     "-ERR syntax error\r\n"
                     ":-42\r\n"
                     ":-9223372036854775808\r\n"
                     "$4\r\na\r\nb\r\n"
                     "$0\r\n\r\n"
                     "$-1\r\n"
                     "*-1\r\n"
                     "*2\r\n"
                     "*4\r\n"
                     "*3\r\n"
                     "$3\r\n1.5\r\n"
                     "$3\r\ninf\r\n"
                     "$4\r\n-inf\r\n"
                     "$19\r\n0.10000000000000001\r\n"
                     ":1\r\n"
                     ":0\r\n"
                     "$10\r\n# Server\r\n\r\n");
    lattice_resp_out_free(o);
}
END_TEST

START_TEST(encoder_resp3_is_byte_exact)
{
    lattice_resp_out *o = lattice_resp_out_new(0, 3);
    sample(o);
    ck_assert_str_eq(drain(o),
                     "+OK\r\n"
                     "-ERR syntax error\r\n"
                     ":-42\r\n"
                     ":-9223372036854775808\r\n"
                     "$4\r\na\r\nb\r\n"
                     "$0\r\n\r\n"
                     "_\r\n"
                     "_\r\n"
                     "*2\r\n"
                     "%2\r\n"
                     "~3\r\n"
                     ",1.5\r\n"
                     ",inf\r\n"
                     ",-inf\r\n"
                     ",0.10000000000000001\r\n"
                     "#t\r\n"
                     "#f\r\n"
                     "=14\r\ntxt:# Server\r\n\r\n");
    lattice_resp_out_set_proto(o, 2);
    ck_assert_int_eq(lattice_resp_out_proto(o), 2);
    lattice_resp_out_free(o);
}
END_TEST

START_TEST(commands_reencode_as_multibulk_and_parse_back)
{
    lattice_resp_out *o = lattice_resp_out_new(0, 3);
    lattice_resp_arg argv[] = {{"SET", 3}, {"k\r\n", 3}, {"", 0}, {"v\0x", 3}};
    ck_assert_int_eq(lattice_resp_add_command(o, 4, argv), LATTICE_OK);
    char buf[128];
    size_t n = lattice_resp_out_peek(o, buf, sizeof(buf));
    static const char want[] = "*4\r\n$3\r\nSET\r\n$3\r\nk\r\n\r\n$0\r\n\r\n$3\r\nv\0x\r\n";
    ck_assert_uint_eq(n, sizeof(want) - 1);
    ck_assert_mem_eq(buf, want, n);
    lattice_resp_parser *p = lattice_resp_parser_new(NULL);
    lattice_resp_command c;
    size_t used;
    ck_assert_int_eq(lattice_resp_parse(p, buf, n, &used, &c), LATTICE_RESP_COMMAND);
    ck_assert_uint_eq(c.argc, 4);
    for (int i = 0; i < 4; i++) {
        ck_assert_uint_eq(c.argv[i].len, argv[i].len);
        ck_assert_mem_eq(c.argv[i].ptr, argv[i].ptr, argv[i].len);
    }
    lattice_resp_parser_free(p);
    /* whole or nothing under a limit */
    lattice_resp_out_set_limit(o, n + 10);
    ck_assert_int_eq(lattice_resp_add_command(o, 4, argv), LATTICE_ERR_TOO_LARGE);
    ck_assert_uint_eq(lattice_resp_out_pending(o), n);
    lattice_resp_out_free(o);
}
END_TEST

START_TEST(status_and_error_lines_cannot_break_the_stream)
{
    lattice_resp_out *o = lattice_resp_out_new(0, 2);
    lattice_resp_add_simple(o, "a\r\nb", 4);
    lattice_resp_add_error(o, "ERR x\ny", 7);
    ck_assert_str_eq(drain(o), "+a  b\r\n-ERR x y\r\n");
    lattice_resp_out_free(o);
}
END_TEST

START_TEST(iovecs_cover_every_pending_byte_in_order)
{
    lattice_resp_out *o = lattice_resp_out_new(0, 2);
    char *big = malloc(50000);
    memset(big, 'z', 50000);
    /* many small elements, one larger than a block, more small ones */
    for (int i = 0; i < 3000; i++) lattice_resp_add_int(o, i);
    lattice_resp_add_bulk(o, big, 50000);
    for (int i = 0; i < 3000; i++) lattice_resp_add_int(o, i);
    size_t pending = lattice_resp_out_pending(o);
    struct iovec iov[64];
    int n = lattice_resp_out_iov(o, iov, 64);
    ck_assert_int_gt(n, 2);
    size_t sum = 0;
    char *flat = malloc(pending), *copy = malloc(pending);
    for (int i = 0; i < n; i++) {
        memcpy(flat + sum, iov[i].iov_base, iov[i].iov_len);
        sum += iov[i].iov_len;
    }
    ck_assert_uint_eq(sum, pending);
    ck_assert_uint_eq(lattice_resp_out_peek(o, copy, pending), pending);
    ck_assert_mem_eq(flat, copy, pending);
    ck_assert_mem_eq(flat, ":0\r\n:1\r\n", 8);
    /* partial writes: consume in odd steps; what is left is the tail */
    size_t left = pending;
    while (left > 7) {
        lattice_resp_out_consume(o, 7777 < left ? 7777 : left - 7);
        left = lattice_resp_out_pending(o);
        n = lattice_resp_out_iov(o, iov, 64);
        ck_assert_mem_eq(iov[0].iov_base, flat + pending - left, iov[0].iov_len);
    }
    ck_assert_uint_eq(lattice_resp_out_peek(o, copy, 7), 7);
    ck_assert_mem_eq(copy, &"\r\n:2999\r\n"[2], 7);
    lattice_resp_out_consume(o, left);
    ck_assert_int_eq(lattice_resp_out_iov(o, iov, 64), 0);
    /* reusable after draining */
    lattice_resp_add_simple(o, "PONG", 4);
    ck_assert_str_eq(drain(o), "+PONG\r\n");
    free(big), free(flat), free(copy);
    lattice_resp_out_free(o);
}
END_TEST

START_TEST(output_limit_refuses_whole_elements_and_flags_overflow)
{
    lattice_resp_out *o = lattice_resp_out_new(21, 2);
    ck_assert_int_eq(lattice_resp_add_bulk(o, "0123456789", 10), LATTICE_OK); /* 17 bytes */
    ck_assert_int_eq(lattice_resp_out_overflowed(o), 0);
    ck_assert_int_eq(lattice_resp_add_bulk(o, "abc", 3), LATTICE_ERR_TOO_LARGE);
    ck_assert_int_eq(lattice_resp_out_overflowed(o), 1);
    ck_assert_uint_eq(lattice_resp_out_pending(o), 17);
    ck_assert_int_eq(lattice_resp_add_int(o, 1), LATTICE_OK); /* 4 bytes: exactly 21 */
    ck_assert_str_eq(drain(o), "$10\r\n0123456789\r\n:1\r\n");
    lattice_resp_out_clear_overflow(o);
    ck_assert_int_eq(lattice_resp_out_overflowed(o), 0);
    ck_assert_int_eq(lattice_resp_add_bulk(o, "x", 1), LATTICE_OK);
    lattice_resp_out_set_limit(o, 0);
    char big[1000] = {0};
    ck_assert_int_eq(lattice_resp_add_bulk(o, big, sizeof(big)), LATTICE_OK);
    lattice_resp_out_free(o);
}
END_TEST

START_TEST(steady_state_replies_do_not_allocate)
{
    lattice_resp_out *o = lattice_resp_out_new(0, 2);
    char val[100] = {0};
    struct iovec iov[8];
    uint64_t before = 0;
    lattice_alloc_count(1);
    for (int round = 0; round < 50; round++) {
        if (round == 2) before = lattice_alloc_calls();
        for (int i = 0; i < 400; i++) { /* ~26 KB: crosses a block boundary */
            lattice_resp_add_simple(o, "OK", 2);
            lattice_resp_add_bulk(o, val, sizeof(val));
        }
        int n = lattice_resp_out_iov(o, iov, 8);
        size_t sum = 0;
        for (int k = 0; k < n; k++) sum += iov[k].iov_len;
        ck_assert_uint_eq(sum, 400 * (5 + 6 + 100 + 2));
        lattice_resp_out_consume(o, sum);
    }
    ck_assert_uint_eq(lattice_alloc_calls() - before, 0);
    lattice_alloc_count(0);
    lattice_resp_out_free(o);
}
END_TEST

START_TEST(encoder_allocation_failure_appends_nothing)
{
    lattice_resp_out *o = lattice_resp_out_new(0, 2);
    lattice_resp_add_simple(o, "OK", 2);
    char big[20000] = {0};
    lattice_alloc_fail_nth(1);
    ck_assert_int_eq(lattice_resp_add_bulk(o, big, sizeof(big)), LATTICE_ERR_NOMEM);
    lattice_alloc_fail_nth(0);
    ck_assert_int_eq(lattice_resp_out_overflowed(o), 0);
    ck_assert_str_eq(drain(o), "+OK\r\n");
    lattice_alloc_fail_nth(1);
    ck_assert_ptr_null(lattice_resp_out_new(0, 2));
    lattice_alloc_fail_nth(0);
    lattice_resp_out_free(o);
}
END_TEST

/* ---- command table ------------------------------------------------------ */

static lattice_resp_arg A(const char *s) { return (lattice_resp_arg){s, strlen(s)}; }

START_TEST(lookup_is_case_insensitive_and_exact)
{
    const lattice_resp_cmd *c = lattice_resp_cmd_lookup("gEt", 3);
    ck_assert_ptr_nonnull(c);
    ck_assert_str_eq(lattice_resp_cmd_name(c), "get");
    ck_assert_int_eq(lattice_resp_cmd_id_of(c), LATTICE_RESP_CMD_GET);
    ck_assert_ptr_null(lattice_resp_cmd_lookup("ge", 2));
    ck_assert_ptr_null(lattice_resp_cmd_lookup("gets", 4));
    ck_assert_ptr_null(lattice_resp_cmd_lookup("get\0", 4));
    ck_assert_ptr_null(lattice_resp_cmd_lookup("", 0));
    const char *names[] = {"GET", "SET", "DEL", "EXISTS", "MGET", "MSET", "INCR", "DECR", "INCRBY",
                           "APPEND", "STRLEN", "GETDEL", "EXPIRE", "PEXPIRE", "TTL", "PTTL",
                           "PERSIST", "PING", "ECHO", "AUTH", "HELLO", "SELECT", "DBSIZE", "INFO",
                           "COMMAND", "CLIENT", "QUIT", "CLUSTER", "READONLY", "READWRITE", "ASKING",
                           "ZRANGESTORE", "SINTERCARD", "GEORADIUSBYMEMBER_RO", "GeoSearchStore", "ZSCAN",
                           "BRPOPLPUSH", "HRANDFIELD", "SMOVE"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        ck_assert_msg(lattice_resp_cmd_lookup(names[i], strlen(names[i])) != NULL, "%s", names[i]);
}
END_TEST

static int gm(const char *p, const char *k) { return lt_glob_match(p, strlen(p), k, strlen(k), 0); }

/* Redis 7.0's stringmatchlen on its corner cases (it_resp_vs_redis checks
 * many more against a real redis-server); deep '*' nesting never recurses
 * past 1000 frames. */
START_TEST(glob_matches_as_redis)
{
    ck_assert(gm("h?llo", "hello") && !gm("h?llo", "hllo"));
    ck_assert(gm("h[b-a]llo", "hallo") && gm("h[^e]llo", "hallo") && !gm("h[^e]llo", "hello"));
    ck_assert(gm("h\\*llo", "h*llo") && !gm("h\\*llo", "hello"));
    ck_assert(!gm("h[", "h[") && gm("[a", "a") && !gm("", "a") && !gm("*", "") /* KEYS * lists "" by its shortcut, as Redis */ && gm("a*", "a"));
    ck_assert(gm("[\\]]", "]") && gm("*a*b", "xxaxxb") && !gm("*a*b", "xxbxxa"));
    static char pat[1 << 21], key[1 << 20];
    for (size_t i = 0; i < sizeof key - 1; i++) pat[2 * i] = 'a', pat[2 * i + 1] = '*', key[i] = 'a';
    ck_assert(!gm(pat, "b"));  /* 1M stars: no match, no stack overflow */
    ck_assert(gm("*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*b", key) == 0); /* skipLongerMatches: quick */
}
END_TEST

START_TEST(every_entry_is_reachable_and_consistent)
{
    size_t n = lattice_resp_cmd_count();
    int seen[LATTICE_RESP_CMD_ID_COUNT_] = {0};
    for (size_t i = 0; i < n; i++) {
        const lattice_resp_cmd *c = lattice_resp_cmd_at(i);
        ck_assert_ptr_nonnull(c);
        seen[lattice_resp_cmd_id_of(c)] = 1;
        int f, l, s;
        lattice_resp_cmd_key_spec(c, &f, &l, &s);
        uint32_t fl = lattice_resp_cmd_flags(c);
        /* a command with keys reads or writes them; one without writes none -
         * but the keyspace-wide FLUSHDB/FLUSHALL, as Redis flags them */
        lattice_resp_cmd_id id = lattice_resp_cmd_id_of(c);
        int flush = id == LATTICE_RESP_CMD_FLUSHDB || id == LATTICE_RESP_CMD_FLUSHALL;
        if (f > 0) ck_assert((fl & LATTICE_RESP_F_WRITE) || (fl & LATTICE_RESP_F_READONLY));
        else ck_assert(!(fl & LATTICE_RESP_F_WRITE) || flush);
        ck_assert(!((fl & LATTICE_RESP_F_WRITE) && (fl & LATTICE_RESP_F_READONLY)));
        ck_assert_int_ne(lattice_resp_cmd_arity(c), 0);
    }
    ck_assert_ptr_null(lattice_resp_cmd_at(n));
    for (int id = 1; id < LATTICE_RESP_CMD_ID_COUNT_; id++) ck_assert_msg(seen[id], "id %d", id);
}
END_TEST

START_TEST(resolve_checks_arity_with_redis_wording)
{
    char err[LATTICE_RESP_ERR_MAX];
    lattice_resp_arg get1[] = {A("GET")};
    ck_assert_ptr_null(lattice_resp_cmd_resolve(1, get1, err));
    ck_assert_str_eq(err, "ERR wrong number of arguments for 'get' command");
    lattice_resp_arg get3[] = {A("get"), A("a"), A("b")};
    ck_assert_ptr_null(lattice_resp_cmd_resolve(3, get3, err));
    ck_assert_str_eq(err, "ERR wrong number of arguments for 'get' command");
    lattice_resp_arg set2[] = {A("SET"), A("k")};
    ck_assert_ptr_null(lattice_resp_cmd_resolve(2, set2, err));
    ck_assert_str_eq(err, "ERR wrong number of arguments for 'set' command");
    lattice_resp_arg set5[] = {A("SET"), A("k"), A("v"), A("EX"), A("10")};
    ck_assert_int_eq(lattice_resp_cmd_id_of(lattice_resp_cmd_resolve(5, set5, err)), LATTICE_RESP_CMD_SET);
    lattice_resp_arg ping[] = {A("PING")};
    ck_assert_ptr_nonnull(lattice_resp_cmd_resolve(1, ping, err));
    lattice_resp_arg mset3[] = {A("MSET"), A("k"), A("v"), A("k2")};
    ck_assert_ptr_null(lattice_resp_cmd_resolve(4, mset3, err));
    ck_assert_str_eq(err, "ERR wrong number of arguments for 'mset' command");
    ck_assert_ptr_nonnull(lattice_resp_cmd_resolve(3, mset3, err));
    lattice_resp_arg dbsize[] = {A("dbsize"), A("x")};
    ck_assert_ptr_null(lattice_resp_cmd_resolve(2, dbsize, err));
    ck_assert_str_eq(err, "ERR wrong number of arguments for 'dbsize' command");
}
END_TEST

START_TEST(unknown_command_text_matches_redis)
{
    char err[LATTICE_RESP_ERR_MAX];
    lattice_resp_arg a[] = {A("foo"), A("a"), A("b")};
    ck_assert_ptr_null(lattice_resp_cmd_resolve(3, a, err));
    ck_assert_str_eq(err, "ERR unknown command 'foo', with args beginning with: 'a' 'b' ");
    lattice_resp_arg b[] = {A("nope")};
    ck_assert_ptr_null(lattice_resp_cmd_resolve(1, b, err));
    ck_assert_str_eq(err, "ERR unknown command 'nope', with args beginning with: ");
    /* args are cut at 128 bytes of text, the name at 128, CR/LF become spaces */
    char longarg[300];
    memset(longarg, 'x', 299);
    longarg[299] = '\0';
    lattice_resp_arg c[] = {A(longarg), A("a\r\nb"), A(longarg), A("never")};
    ck_assert_ptr_null(lattice_resp_cmd_resolve(4, c, err));
    char want[LATTICE_RESP_ERR_MAX];
    snprintf(want, sizeof(want), "ERR unknown command '%.128s', with args beginning with: 'a  b' '%.121s' ",
             longarg, longarg);
    ck_assert_str_eq(err, want);
    /* a NUL ends an argument as printf's %s does */
    lattice_resp_arg d[] = {{"bad\0cmd", 7}, {"x\0y", 3}};
    ck_assert_ptr_null(lattice_resp_cmd_resolve(2, d, err));
    ck_assert_str_eq(err, "ERR unknown command 'bad', with args beginning with: 'x' ");
    ck_assert_ptr_null(lattice_resp_cmd_resolve(0, NULL, err));
}
END_TEST

START_TEST(containers_resolve_subcommands)
{
    char err[LATTICE_RESP_ERR_MAX];
    lattice_resp_arg a[] = {A("cluster"), A("SLOTS")};
    const lattice_resp_cmd *c = lattice_resp_cmd_resolve(2, a, err);
    ck_assert_ptr_nonnull(c);
    ck_assert_int_eq(lattice_resp_cmd_id_of(c), LATTICE_RESP_CMD_CLUSTER_SLOTS);
    ck_assert_str_eq(lattice_resp_cmd_name(c), "cluster|slots");
    lattice_resp_arg b[] = {A("CLUSTER"), A("bogus")};
    ck_assert_ptr_null(lattice_resp_cmd_resolve(2, b, err));
    ck_assert_str_eq(err, "ERR unknown subcommand 'bogus'. Try CLUSTER HELP.");
    lattice_resp_arg c1[] = {A("cluster")};
    ck_assert_ptr_null(lattice_resp_cmd_resolve(1, c1, err));
    ck_assert_str_eq(err, "ERR wrong number of arguments for 'cluster' command");
    lattice_resp_arg k[] = {A("cluster"), A("keyslot")};
    ck_assert_ptr_null(lattice_resp_cmd_resolve(2, k, err));
    ck_assert_str_eq(err, "ERR wrong number of arguments for 'cluster|keyslot' command");
    lattice_resp_arg cmd[] = {A("COMMAND")};
    ck_assert_int_eq(lattice_resp_cmd_id_of(lattice_resp_cmd_resolve(1, cmd, err)), LATTICE_RESP_CMD_COMMAND);
    lattice_resp_arg docs[] = {A("COMMAND"), A("docs")};
    ck_assert_int_eq(lattice_resp_cmd_id_of(lattice_resp_cmd_resolve(2, docs, err)), LATTICE_RESP_CMD_COMMAND_DOCS);
    lattice_resp_arg si[] = {A("client"), A("setinfo"), A("lib-name"), A("redis-py")};
    ck_assert_int_eq(lattice_resp_cmd_id_of(lattice_resp_cmd_resolve(4, si, err)), LATTICE_RESP_CMD_CLIENT_SETINFO);
    ck_assert_ptr_null(lattice_resp_cmd_lookup_sub(lattice_resp_cmd_lookup("get", 3), "x", 1));
}
END_TEST

START_TEST(flags_mark_auth_exempt_and_write_commands)
{
    const char *no_auth[] = {"auth", "hello", "quit"};
    for (int i = 0; i < 3; i++)
        ck_assert(lattice_resp_cmd_flags(lattice_resp_cmd_lookup(no_auth[i], strlen(no_auth[i]))) &
                  LATTICE_RESP_F_NO_AUTH);
    ck_assert(!(lattice_resp_cmd_flags(lattice_resp_cmd_lookup("get", 3)) & LATTICE_RESP_F_NO_AUTH));
    ck_assert(!(lattice_resp_cmd_flags(lattice_resp_cmd_lookup("ping", 4)) & LATTICE_RESP_F_NO_AUTH));
    const char *writes[] = {"set", "del", "mset", "incr", "decr", "incrby", "append", "getdel",
                            "expire", "pexpire", "persist"};
    for (int i = 0; i < 11; i++)
        ck_assert_msg(lattice_resp_cmd_flags(lattice_resp_cmd_lookup(writes[i], strlen(writes[i]))) &
                          LATTICE_RESP_F_WRITE, "%s", writes[i]);
    const char *reads[] = {"get", "exists", "mget", "strlen", "ttl", "pttl"};
    for (int i = 0; i < 6; i++)
        ck_assert(lattice_resp_cmd_flags(lattice_resp_cmd_lookup(reads[i], strlen(reads[i]))) &
                  LATTICE_RESP_F_READONLY);
}
END_TEST

START_TEST(key_positions_route_by_key)
{
    size_t idx[8];
    const lattice_resp_cmd *get = lattice_resp_cmd_lookup("get", 3);
    ck_assert_uint_eq(lattice_resp_cmd_keys(get, 2, idx, 8), 1);
    ck_assert_uint_eq(idx[0], 1);
    const lattice_resp_cmd *set = lattice_resp_cmd_lookup("set", 3);
    ck_assert_uint_eq(lattice_resp_cmd_keys(set, 5, idx, 8), 1);
    ck_assert_uint_eq(idx[0], 1);
    const lattice_resp_cmd *del = lattice_resp_cmd_lookup("del", 3);
    ck_assert_uint_eq(lattice_resp_cmd_keys(del, 4, idx, 8), 3);
    ck_assert_uint_eq(idx[0], 1);
    ck_assert_uint_eq(idx[2], 3);
    ck_assert_uint_eq(lattice_resp_cmd_keys(del, 4, idx, 2), 2);
    const lattice_resp_cmd *mset = lattice_resp_cmd_lookup("mset", 4);
    ck_assert_uint_eq(lattice_resp_cmd_keys(mset, 7, idx, 8), 3);
    ck_assert_uint_eq(idx[0], 1);
    ck_assert_uint_eq(idx[1], 3);
    ck_assert_uint_eq(idx[2], 5);
    ck_assert_uint_eq(lattice_resp_cmd_keys(mset, 4, idx, 8), 1); /* MSET k v k2: one pair */
    int f, l, s;
    lattice_resp_cmd_key_spec(mset, &f, &l, &s);
    ck_assert_int_eq(f, 1);
    ck_assert_int_eq(l, -1);
    ck_assert_int_eq(s, 2);
    ck_assert_uint_eq(lattice_resp_cmd_keys(lattice_resp_cmd_lookup("ping", 4), 2, idx, 8), 0);
    ck_assert_uint_eq(lattice_resp_cmd_keys(lattice_resp_cmd_lookup("echo", 4), 2, idx, 8), 0);
    ck_assert_uint_eq(lattice_resp_cmd_keys(get, 1, idx, 8), 0);
}
END_TEST

/* ---- string2ll ---------------------------------------------------------- */

START_TEST(string2ll_matches_redis)
{
    long long v = 7;
    ck_assert(lattice_resp_string2ll("0", 1, &v) && v == 0);
    ck_assert(lattice_resp_string2ll("-1", 2, &v) && v == -1);
    ck_assert(lattice_resp_string2ll("9223372036854775807", 19, &v) && v == LLONG_MAX);
    ck_assert(lattice_resp_string2ll("-9223372036854775808", 20, &v) && v == LLONG_MIN);
    const char *bad[] = {"", "-", "+1", " 1", "1 ", "-0", "01", "00", "9223372036854775808",
                         "-9223372036854775809", "18446744073709551616", "99999999999999999999",
                         "1a", "0x10", "1.0", "--1", "123456789012345678901"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        ck_assert_msg(!lattice_resp_string2ll(bad[i], strlen(bad[i]), &v), "'%s' accepted", bad[i]);
    ck_assert(!lattice_resp_string2ll("1\0", 2, &v));
    ck_assert(lattice_resp_string2ll("12", 1, &v) && v == 1); /* only len bytes are read */
    char b[24];
    ck_assert_uint_eq(lattice_resp_ll2string(b, LLONG_MIN), 20);
    ck_assert_str_eq(b, "-9223372036854775808");
    ck_assert_uint_eq(lattice_resp_ll2string(b, 0), 1);
    ck_assert_str_eq(b, "0");
    for (long long x = -1000; x < 1000; x += 7) {
        size_t n = lattice_resp_ll2string(b, x * 1000003);
        ck_assert(lattice_resp_string2ll(b, n, &v) && v == x * 1000003);
    }
}
END_TEST

/* ---- SET options -------------------------------------------------------- */

static lattice_status set_with(const char *const *opts, size_t n, lattice_resp_set_opts *o, char *err)
{
    lattice_resp_arg argv[16] = {A("SET"), A("k"), A("v")};
    for (size_t i = 0; i < n; i++) argv[3 + i] = A(opts[i]);
    return lattice_resp_parse_set(3 + n, argv, 1000000, o, err);
}

#define SET_OK(want_flags, want_at, ...)                                              \
    do {                                                                             \
        const char *o_[] = {__VA_ARGS__};                                            \
        lattice_resp_set_opts so;                                                    \
        char e_[LATTICE_RESP_ERR_MAX] = "";                                          \
        ck_assert_msg(set_with(o_, sizeof(o_) / sizeof(o_[0]), &so, e_) == LATTICE_OK, "%s", e_); \
        ck_assert_uint_eq(so.flags, (want_flags));                                   \
        ck_assert_int_eq(so.expire_at_ms, (want_at));                                \
    } while (0)

#define SET_ERR(want_err, ...)                                                        \
    do {                                                                             \
        const char *o_[] = {__VA_ARGS__};                                            \
        lattice_resp_set_opts so;                                                    \
        char e_[LATTICE_RESP_ERR_MAX] = "";                                          \
        ck_assert_int_eq(set_with(o_, sizeof(o_) / sizeof(o_[0]), &so, e_), LATTICE_ERR_INVAL); \
        ck_assert_str_eq(e_, (want_err));                                            \
    } while (0)

START_TEST(set_options_combine_as_redis)
{
    lattice_resp_set_opts so;
    char err[LATTICE_RESP_ERR_MAX];
    ck_assert_int_eq(set_with(NULL, 0, &so, err), LATTICE_OK);
    ck_assert_uint_eq(so.flags, 0);
    SET_OK(LATTICE_RESP_SET_NX, 0, "nx");
    SET_OK(LATTICE_RESP_SET_XX | LATTICE_RESP_SET_GET, 0, "XX", "get");
    SET_OK(LATTICE_RESP_SET_EX, 1000000 + 10000, "EX", "10");
    SET_OK(LATTICE_RESP_SET_PX | LATTICE_RESP_SET_NX, 1000000 + 1500, "px", "1500", "NX");
    SET_OK(LATTICE_RESP_SET_EXAT, 2000000000000LL, "EXAT", "2000000000");
    SET_OK(LATTICE_RESP_SET_PXAT, 5, "PXAT", "5");
    SET_OK(LATTICE_RESP_SET_KEEPTTL | LATTICE_RESP_SET_GET, 0, "KEEPTTL", "GET");
    SET_OK(LATTICE_RESP_SET_EX, 1000000 + 20000, "EX", "10", "EX", "20"); /* last wins */
    SET_OK(LATTICE_RESP_SET_NX, 0, "NX", "NX");
    SET_OK(LATTICE_RESP_SET_NX | LATTICE_RESP_SET_GET | LATTICE_RESP_SET_PX, 1000000 + 1,
           "GET", "NX", "PX", "1");
}
END_TEST

START_TEST(set_option_conflicts_and_bad_values)
{
    const char *syn = "ERR syntax error";
    SET_ERR(syn, "NX", "XX");
    SET_ERR(syn, "XX", "NX");
    SET_ERR(syn, "EX", "10", "PX", "10");
    SET_ERR(syn, "PX", "10", "EXAT", "10");
    SET_ERR(syn, "EX", "10", "KEEPTTL");
    SET_ERR(syn, "KEEPTTL", "PXAT", "10");
    SET_ERR(syn, "EX");
    SET_ERR(syn, "NXX");
    SET_ERR(syn, "PERSIST");
    SET_ERR(syn, "EX", "abc", "bogus"); /* syntax is checked before the value */
    SET_ERR("ERR value is not an integer or out of range", "EX", "abc");
    SET_ERR("ERR value is not an integer or out of range", "PX", "+5");
    SET_ERR("ERR value is not an integer or out of range", "EX", "1.5");
    SET_ERR("ERR invalid expire time in 'set' command", "EX", "0");
    SET_ERR("ERR invalid expire time in 'set' command", "PX", "-5");
    SET_ERR("ERR invalid expire time in 'set' command", "EX", "9223372036854775");
    SET_ERR("ERR invalid expire time in 'set' command", "PX", "9223372036854775807");
    SET_ERR("ERR invalid expire time in 'set' command", "EXAT", "9223372036854776");
}
END_TEST

START_TEST(error_texts_are_redis_words)
{
    char err[LATTICE_RESP_ERR_MAX];
    ck_assert_str_eq(LATTICE_RESP_ERR_NOAUTH, "NOAUTH Authentication required.");
    ck_assert_str_eq(LATTICE_RESP_ERR_WRONGPASS,
                     "WRONGPASS invalid username-password pair or user is disabled.");
    lattice_resp_err_arity("mget", err);
    ck_assert_str_eq(err, "ERR wrong number of arguments for 'mget' command");
    lattice_resp_err_expire("expire", err);
    ck_assert_str_eq(err, "ERR invalid expire time in 'expire' command");
}
END_TEST


/* ---- EXPIRE and HELLO options ------------------------------------------- */

static lattice_status expire_with(int unit, const char *const *args, size_t n,
                                  lattice_resp_expire_opts *o, char *err)
{
    lattice_resp_arg argv[8] = {A("EXPIRE"), A("k")};
    for (size_t i = 0; i < n; i++) argv[2 + i] = A(args[i]);
    return lattice_resp_parse_expire(2 + n, argv, unit, 1000000, o, err);
}

START_TEST(expire_options_and_values_as_redis)
{
    lattice_resp_expire_opts o;
    char err[LATTICE_RESP_ERR_MAX];
    const char *a1[] = {"10"};
    ck_assert_int_eq(expire_with(1000, a1, 1, &o, err), LATTICE_OK);
    ck_assert_int_eq(o.when_ms, 1000000 + 10000);
    ck_assert_uint_eq(o.flags, 0);
    const char *a2[] = {"-5", "gt", "XX"};
    ck_assert_int_eq(expire_with(1, a2, 3, &o, err), LATTICE_OK);
    ck_assert_int_eq(o.when_ms, 1000000 - 5);
    ck_assert_uint_eq(o.flags, LATTICE_RESP_EXPIRE_GT | LATTICE_RESP_EXPIRE_XX);
    const char *a3[] = {"10", "NX", "GT"};
    ck_assert_int_eq(expire_with(1000, a3, 3, &o, err), LATTICE_ERR_INVAL);
    ck_assert_str_eq(err, "ERR NX and XX, GT or LT options at the same time are not compatible");
    const char *a4[] = {"10", "GT", "LT"};
    ck_assert_int_eq(expire_with(1000, a4, 3, &o, err), LATTICE_ERR_INVAL);
    ck_assert_str_eq(err, "ERR GT and LT options at the same time are not compatible");
    const char *a5[] = {"10", "bogus"};
    ck_assert_int_eq(expire_with(1000, a5, 2, &o, err), LATTICE_ERR_INVAL);
    ck_assert_str_eq(err, "ERR Unsupported option bogus");
    const char *a6[] = {"ten", "bogus"}; /* options are checked before the value */
    ck_assert_int_eq(expire_with(1000, a6, 2, &o, err), LATTICE_ERR_INVAL);
    ck_assert_str_eq(err, "ERR Unsupported option bogus");
    const char *a7[] = {"ten"};
    ck_assert_int_eq(expire_with(1000, a7, 1, &o, err), LATTICE_ERR_INVAL);
    ck_assert_str_eq(err, "ERR value is not an integer or out of range");
    const char *a8[] = {"9223372036854776"};
    ck_assert_int_eq(expire_with(1000, a8, 1, &o, err), LATTICE_ERR_INVAL);
    ck_assert_str_eq(err, "ERR invalid expire time in 'expire' command");
    const char *a9[] = {"9223372036854775807"};
    ck_assert_int_eq(expire_with(1, a9, 1, &o, err), LATTICE_ERR_INVAL);
    ck_assert_str_eq(err, "ERR invalid expire time in 'pexpire' command");
}
END_TEST

/* File-static: the parsed options point into it after hello_with returns. */
static lattice_resp_arg hello_argv[8];

static lattice_status hello_with(const char *const *args, size_t n, lattice_resp_hello_opts *o, char *err)
{
    lattice_resp_arg *argv = hello_argv;
    argv[0] = A("HELLO");
    for (size_t i = 0; i < n; i++) argv[1 + i] = A(args[i]);
    return lattice_resp_parse_hello(1 + n, argv, o, err);
}

START_TEST(hello_arguments_as_redis)
{
    lattice_resp_hello_opts o;
    char err[LATTICE_RESP_ERR_MAX];
    ck_assert_int_eq(hello_with(NULL, 0, &o, err), LATTICE_OK);
    ck_assert_int_eq(o.proto, 0);
    const char *a1[] = {"3", "AUTH", "default", "pw", "SETNAME", "app-1"};
    ck_assert_int_eq(hello_with(a1, 6, &o, err), LATTICE_OK);
    ck_assert_int_eq(o.proto, 3);
    ck_assert_mem_eq(o.username->ptr, "default", 7);
    ck_assert_mem_eq(o.password->ptr, "pw", 2);
    ck_assert_mem_eq(o.client_name->ptr, "app-1", 5);
    const char *a2[] = {"4"};
    ck_assert_int_eq(hello_with(a2, 1, &o, err), LATTICE_ERR_INVAL);
    ck_assert_str_eq(err, "NOPROTO unsupported protocol version");
    const char *a3[] = {"three"};
    ck_assert_int_eq(hello_with(a3, 1, &o, err), LATTICE_ERR_INVAL);
    ck_assert_str_eq(err, "ERR Protocol version is not an integer or out of range");
    const char *a4[] = {"2", "AUTH", "onlyuser"};
    ck_assert_int_eq(hello_with(a4, 3, &o, err), LATTICE_ERR_INVAL);
    ck_assert_str_eq(err, "ERR Syntax error in HELLO option 'AUTH'");
    const char *a5[] = {"2", "SETNAME", "has space"};
    ck_assert_int_eq(hello_with(a5, 3, &o, err), LATTICE_ERR_INVAL);
    ck_assert_str_eq(err, "ERR Client names cannot contain spaces, newlines or special characters.");
    ck_assert(lattice_resp_client_name_ok("", 0));
    ck_assert(!lattice_resp_client_name_ok("a\x80", 2));
    ck_assert(!lattice_resp_client_name_ok("a\nb", 3));
}
END_TEST


/* ---- COMMAND replies ---------------------------------------------------- */

/* Skip one RESP2/RESP3 element at s[*pos]; 0 when malformed. */
static int skip_elem(const char *s, size_t n, size_t *pos)
{
    if (*pos >= n) return 0;
    char t = s[*pos];
    const char *cr = memchr(s + *pos, '\r', n - *pos);
    if (!cr || (size_t)(cr - s) + 1 >= n || cr[1] != '\n') return 0;
    long long v = 0;
    int num = lattice_resp_string2ll(s + *pos + 1, (size_t)(cr - s - *pos - 1), &v);
    *pos = (size_t)(cr - s) + 2;
    switch (t) {
    case '+': case '-': case ':': case ',': case '#': case '_': return 1;
    case '$': case '=':
        if (!num || v < 0 || *pos + (size_t)v + 2 > n) return 0;
        *pos += (size_t)v + 2;
        return 1;
    case '*': case '~': case '%':
        if (!num || v < 0) return 0;
        for (long long i = 0; i < (t == '%' ? 2 * v : v); i++)
            if (!skip_elem(s, n, pos)) return 0;
        return 1;
    default: return 0;
    }
}

START_TEST(command_info_is_redis_shaped)
{
    lattice_resp_out *o = lattice_resp_out_new(0, 2);
    ck_assert_int_eq(lattice_resp_add_command_info(o, lattice_resp_cmd_lookup("get", 3)), LATTICE_OK);
    ck_assert_str_eq(drain(o),
                     "*10\r\n$3\r\nget\r\n:2\r\n*2\r\n+readonly\r\n+fast\r\n:1\r\n:1\r\n:1\r\n"
                     "*3\r\n+@read\r\n+@string\r\n+@fast\r\n*0\r\n"
                     "*1\r\n*6\r\n$5\r\nflags\r\n*2\r\n+RO\r\n+access\r\n"
                     "$12\r\nbegin_search\r\n*4\r\n$4\r\ntype\r\n$5\r\nindex\r\n$4\r\nspec\r\n*2\r\n$5\r\nindex\r\n:1\r\n"
                     "$9\r\nfind_keys\r\n*4\r\n$4\r\ntype\r\n$5\r\nrange\r\n$4\r\nspec\r\n*6\r\n"
                     "$7\r\nlastkey\r\n:0\r\n$7\r\nkeystep\r\n:1\r\n$5\r\nlimit\r\n:0\r\n"
                     "*0\r\n");
    ck_assert_int_eq(lattice_resp_add_command_info(o, NULL), LATTICE_OK);
    ck_assert_str_eq(drain(o), "$-1\r\n");
    lattice_resp_out_set_proto(o, 3);
    lattice_resp_add_command_info(o, lattice_resp_cmd_lookup("mset", 4));
    const char *m = drain(o);
    static const char head[] = "*10\r\n$4\r\nmset\r\n:-3\r\n~2\r\n+write\r\n+denyoom\r\n:1\r\n:-1\r\n:2\r\n";
    ck_assert(strncmp(m, head, sizeof(head) - 1) == 0);
    ck_assert(strstr(m, "%3\r\n$5\r\nflags\r\n~2\r\n+OW\r\n+update\r\n") != NULL);
    ck_assert(strstr(m, "$7\r\nlastkey\r\n:-1\r\n$7\r\nkeystep\r\n:2\r\n") != NULL);
    lattice_resp_out_free(o);
}
END_TEST

START_TEST(command_table_reply_is_well_formed_in_both_protocols)
{
    for (int proto = 2; proto <= 3; proto++) {
        lattice_resp_out *o = lattice_resp_out_new(0, proto);
        ck_assert_int_eq(lattice_resp_add_command_table(o), LATTICE_OK);
        size_t n = lattice_resp_out_pending(o), pos = 0;
        char *buf = malloc(n);
        lattice_resp_out_peek(o, buf, n);
        char head[16];
        snprintf(head, sizeof(head), "*%zu\r\n", lattice_resp_cmd_top_count());
        ck_assert(strncmp(buf, head, strlen(head)) == 0);
        ck_assert(skip_elem(buf, n, &pos));
        ck_assert_uint_eq(pos, n);
        static const char sub[] = "$13\r\ncluster|slots\r\n";
        ck_assert(memmem(buf, n, sub, sizeof(sub) - 1) != NULL);
        free(buf);
        lattice_resp_out_free(o);
    }
    ck_assert_uint_eq(lattice_resp_cmd_top_count(), 175); /* 51 + SETRANGE SETBIT INCRBYFLOAT DUMP RESTORE OBJECT MEMORY + SLOWLOG MONITOR RESET + SCAN KEYS RANDOMKEY FLUSHDB FLUSHALL + MULTI EXEC DISCARD WATCH UNWATCH RENAME RENAMENX COPY MSETNX + 10 blocking and numkeys pops + 16 hash, 16 list, 9 set and 23 sorted-set commands + 16 over several sets or sorted sets + 10 GEO */
}
END_TEST

static Suite *resp_codec_suite(void)
{
    Suite *s = suite_create("resp_codec");
    TCase *t = tcase_create("encoder");
    tcase_add_test(t, encoder_resp2_is_byte_exact);
    tcase_add_test(t, encoder_resp3_is_byte_exact);
    tcase_add_test(t, status_and_error_lines_cannot_break_the_stream);
    tcase_add_test(t, commands_reencode_as_multibulk_and_parse_back);
    tcase_add_test(t, iovecs_cover_every_pending_byte_in_order);
    tcase_add_test(t, output_limit_refuses_whole_elements_and_flags_overflow);
    tcase_add_test(t, encoder_allocation_failure_appends_nothing);
    tcase_add_test(t, steady_state_replies_do_not_allocate);
    suite_add_tcase(s, t);
    t = tcase_create("commands");
    tcase_add_test(t, lookup_is_case_insensitive_and_exact);
    tcase_add_test(t, every_entry_is_reachable_and_consistent);
    tcase_add_test(t, glob_matches_as_redis);
    tcase_add_test(t, resolve_checks_arity_with_redis_wording);
    tcase_add_test(t, unknown_command_text_matches_redis);
    tcase_add_test(t, containers_resolve_subcommands);
    tcase_add_test(t, flags_mark_auth_exempt_and_write_commands);
    tcase_add_test(t, key_positions_route_by_key);
    tcase_add_test(t, error_texts_are_redis_words);
    tcase_add_test(t, command_info_is_redis_shaped);
    tcase_add_test(t, command_table_reply_is_well_formed_in_both_protocols);
    suite_add_tcase(s, t);
    t = tcase_create("helpers");
    tcase_add_test(t, string2ll_matches_redis);
    tcase_add_test(t, set_options_combine_as_redis);
    tcase_add_test(t, set_option_conflicts_and_bad_values);
    tcase_add_test(t, expire_options_and_values_as_redis);
    tcase_add_test(t, hello_arguments_as_redis);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    SRunner *r = srunner_create(resp_codec_suite());
    srunner_add_suite(r, resp_parser_suite());
    return lt_run_runner(r);
}
