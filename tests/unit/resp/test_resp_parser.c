/* The RESP request parser: pipelines split anywhere parse like one read,
 * inline quoting as Redis's sdssplitargs, each malformed class with Redis's
 * error text, limits enforced without big allocations, allocation failure
 * reported and never a crash. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lattice/alloc.h"
#include "resp_codec.h"

/* ---- helpers ----------------------------------------------------------- */

typedef struct {
    char *s;
    size_t n, cap;
} text;

static void tx_add(text *t, const void *p, size_t n)
{
    if (t->n + n + 1 > t->cap) {
        t->cap = (t->n + n + 1) * 2;
        t->s = realloc(t->s, t->cap);
    }
    memcpy(t->s + t->n, p, n);
    t->n += n;
    t->s[t->n] = '\0';
}

static void tx_fmt(text *t, const char *fmt, size_t v)
{
    char b[64];
    int k = snprintf(b, sizeof(b), fmt, v);
    tx_add(t, b, (size_t)k);
}

/* Serialise a command as "argc[len:bytes]...;" so runs compare as strings. */
static void tx_cmd(text *t, const lattice_resp_command *c)
{
    tx_fmt(t, "%zu", c->argc);
    for (size_t i = 0; i < c->argc; i++) {
        tx_fmt(t, "[%zu:", c->argv[i].len);
        tx_add(t, c->argv[i].ptr, c->argv[i].len);
        tx_add(t, "]", 1);
    }
    tx_add(t, c->is_inline ? "i;" : ";", 2 - !c->is_inline);
}

/*
 * Feed in[0,n) cut at the given offsets (ascending), each chunk in its own
 * heap copy that is scribbled over and freed once the parser returned
 * NEED_MORE - so an argument that wrongly kept pointing into an old read is
 * caught.  Returns the serialised commands plus "!<error>" at the end.
 */
static char *run_cuts(lattice_resp_parser *p, const char *in, size_t n, const size_t *cuts,
                      size_t ncuts)
{
    text t = {0};
    tx_add(&t, "", 0);
    size_t from = 0;
    for (size_t c = 0; c <= ncuts; c++) {
        size_t to = c < ncuts ? cuts[c] : n;
        size_t len = to - from;
        char *chunk = malloc(len ? len : 1);
        memcpy(chunk, in + from, len);
        size_t pos = 0;
        for (;;) {
            size_t used = 0;
            lattice_resp_command cmd;
            lattice_resp_result r = lattice_resp_parse(p, chunk + pos, len - pos, &used, &cmd);
            if (r == LATTICE_RESP_COMMAND) {
                ck_assert_uint_le(used, len - pos);
                for (size_t i = 0; i < cmd.argc; i++) ck_assert(cmd.argv[i].ptr != NULL || cmd.argv[i].len == 0);
                tx_cmd(&t, &cmd);
                pos += used;
                continue;
            }
            if (r == LATTICE_RESP_ERROR) {
                const char *e = lattice_resp_parser_error_reply(p);
                tx_add(&t, "!", 1);
                if (e) tx_add(&t, e, strlen(e));
                else tx_fmt(&t, "status %zu", (size_t)lattice_resp_parser_status(p));
                memset(chunk, 0xA5, len);
                free(chunk);
                return t.s;
            }
            ck_assert_uint_eq(used, len - pos);
            break;
        }
        memset(chunk, 0xA5, len);
        free(chunk);
        from = to;
    }
    return t.s;
}

static char *run_once(const char *in, size_t n)
{
    lattice_resp_parser *p = lattice_resp_parser_new(NULL);
    char *s = run_cuts(p, in, n, NULL, 0);
    lattice_resp_parser_free(p);
    return s;
}

static char *run_with(const lattice_resp_limits *lim, const char *in, size_t n)
{
    lattice_resp_parser *p = lattice_resp_parser_new(lim);
    char *s = run_cuts(p, in, n, NULL, 0);
    lattice_resp_parser_free(p);
    return s;
}

#define RUN(lit) run_once((lit), sizeof(lit) - 1)

static void expect(const char *in, size_t n, const char *want)
{
    char *got = run_once(in, n);
    ck_assert_str_eq(got, want);
    free(got);
}
#define EXPECT(lit, want) expect((lit), sizeof(lit) - 1, (want))

static const char PIPELINE[] =
    "*3\r\n$3\r\nSET\r\n$5\r\nkey:1\r\n$11\r\nvalue\r\n1234\r\n"
    "*2\r\n$3\r\nGET\r\n$5\r\nkey:1\r\n"
    "PING\r\n"
    "*0\r\n"
    "set \"a b\" 'c\\'d' \"\\x41\\n\"\n"
    "*1\r\n$0\r\n\r\n"
    "*2\r\n$4\r\nECHO\r\n$12\r\n\r\n*1\r\n$4\r\nxy\r\n"
    "\r\n"
    "*-1\r\n"
    "*4\r\n$4\r\nMGET\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n";

static const char PIPELINE_WANT[] =
    "3[3:SET][5:key:1][11:value\r\n1234];"
    "2[3:GET][5:key:1];"
    "1[4:PING]i;"
    "4[3:set][3:a b][3:c'd][2:A\n]i;"
    "1[0:];"
    "2[4:ECHO][12:\r\n*1\r\n$4\r\nxy];"
    "4[4:MGET][1:a][1:b][1:c];";

/* ---- splitting --------------------------------------------------------- */

START_TEST(pipeline_in_one_read)
{
    EXPECT(PIPELINE, PIPELINE_WANT);
}
END_TEST

START_TEST(pipeline_split_at_every_byte_parses_the_same)
{
    size_t n = sizeof(PIPELINE) - 1;
    for (size_t cut = 0; cut <= n; cut++) {
        lattice_resp_parser *p = lattice_resp_parser_new(NULL);
        char *got = run_cuts(p, PIPELINE, n, &cut, 1);
        ck_assert_msg(strcmp(got, PIPELINE_WANT) == 0, "cut at %zu: %s", cut, got);
        free(got);
        lattice_resp_parser_free(p);
    }
}
END_TEST

START_TEST(pipeline_split_at_every_pair_of_points_parses_the_same)
{
    size_t n = sizeof(PIPELINE) - 1;
    lattice_resp_parser *p = lattice_resp_parser_new(NULL);
    for (size_t a = 0; a <= n; a++) {
        for (size_t b = a; b <= n; b++) {
            size_t cuts[2] = {a, b};
            char *got = run_cuts(p, PIPELINE, n, cuts, 2);
            ck_assert_msg(strcmp(got, PIPELINE_WANT) == 0, "cuts %zu,%zu: %s", a, b, got);
            free(got);
        }
    }
    lattice_resp_parser_free(p);
}
END_TEST

START_TEST(pipeline_fed_one_byte_at_a_time)
{
    size_t n = sizeof(PIPELINE) - 1, cuts[sizeof(PIPELINE)];
    for (size_t i = 0; i < n; i++) cuts[i] = i + 1;
    lattice_resp_parser *p = lattice_resp_parser_new(NULL);
    char *got = run_cuts(p, PIPELINE, n, cuts, n);
    ck_assert_str_eq(got, PIPELINE_WANT);
    free(got);
    lattice_resp_parser_free(p);
}
END_TEST

START_TEST(whole_command_in_one_read_is_zero_copy)
{
    static const char in[] = "*2\r\n$3\r\nGET\r\n$3\r\nkey\r\n";
    lattice_resp_parser *p = lattice_resp_parser_new(NULL);
    lattice_resp_command c;
    size_t used;
    ck_assert_int_eq(lattice_resp_parse(p, in, sizeof(in) - 1, &used, &c), LATTICE_RESP_COMMAND);
    ck_assert_uint_eq(used, sizeof(in) - 1);
    ck_assert_ptr_eq(c.argv[0].ptr, in + 8);
    ck_assert_ptr_eq(c.argv[1].ptr, in + 17);
    ck_assert_int_eq(lattice_resp_parse(p, in + used, 0, &used, &c), LATTICE_RESP_NEED_MORE);
    lattice_resp_parser_free(p);
}
END_TEST

START_TEST(empty_reads_change_nothing_in_any_state)
{
    /* A zero-byte read (even with a NULL buffer) after every prefix of the
     * pipeline is NEED_MORE and leaves the result unchanged. */
    size_t n = sizeof(PIPELINE) - 1;
    for (size_t cut = 0; cut <= n; cut += 3) {
        lattice_resp_parser *p = lattice_resp_parser_new(NULL);
        text t = {0};
        tx_add(&t, "", 0);
        size_t pos = 0, used;
        lattice_resp_command c;
        for (int phase = 0; phase < 2; phase++) {
            size_t end = phase == 0 ? cut : n;
            while (lattice_resp_parse(p, PIPELINE + pos, end - pos, &used, &c) == LATTICE_RESP_COMMAND) {
                tx_cmd(&t, &c);
                pos += used;
            }
            pos = end;
            ck_assert_int_eq(lattice_resp_parse(p, NULL, 0, &used, &c), LATTICE_RESP_NEED_MORE);
            ck_assert_uint_eq(used, 0);
        }
        ck_assert_str_eq(t.s, PIPELINE_WANT);
        free(t.s);
        lattice_resp_parser_free(p);
    }
}
END_TEST

START_TEST(steady_state_parsing_does_not_allocate)
{
    /* Pipelines arriving whole or cut across reads: once the parser's
     * buffers have grown, parsing allocates nothing more. */
    lattice_resp_parser *p = lattice_resp_parser_new(NULL);
    size_t n = sizeof(PIPELINE) - 1, cuts[3] = {50, 51, 140};
    uint64_t before = 0;
    lattice_alloc_count(1);
    for (int round = 0; round < 20; round++) {
        if (round == 2) before = lattice_alloc_calls();
        char *got = run_cuts(p, PIPELINE, n, cuts, 3);
        ck_assert_str_eq(got, PIPELINE_WANT);
        free(got);
    }
    ck_assert_uint_eq(lattice_alloc_calls() - before, 0);
    lattice_alloc_count(0);
    lattice_resp_parser_free(p);
}
END_TEST

START_TEST(big_bulk_across_many_reads)
{
    size_t len = 300000;
    char hdr[64];
    int h = snprintf(hdr, sizeof(hdr), "*2\r\n$3\r\nSET\r\n$%zu\r\n", len);
    size_t n = (size_t)h + len + 2 + 14;
    char *in = malloc(n);
    memcpy(in, hdr, (size_t)h);
    for (size_t i = 0; i < len; i++) in[h + i] = (char)('a' + i % 26);
    memcpy(in + h + len, "\r\n*1\r\n$4\r\nPING\r\n", 16);
    n = (size_t)h + len + 16;
    size_t cuts[64], nc = 0;
    for (size_t at = 7; at < n && nc < 64; at += 4999) cuts[nc++] = at;
    lattice_resp_parser *p = lattice_resp_parser_new(NULL);
    char *split = run_cuts(p, in, n, cuts, nc);
    char *whole = run_once(in, n);
    ck_assert_str_eq(split, whole);
    ck_assert(strstr(whole, "[300000:abcdefghijklmnopqrstuvwxyzabc") != NULL);
    ck_assert(strstr(whole, "1[4:PING];") != NULL);
    free(split), free(whole), free(in);
    lattice_resp_parser_free(p);
}
END_TEST

/* ---- inline ------------------------------------------------------------ */

START_TEST(inline_commands_split_like_sdssplitargs)
{
    EXPECT("PING\r\n", "1[4:PING]i;");
    EXPECT("PING\n", "1[4:PING]i;");
    EXPECT("  set   k    v  \r\n", "3[3:set][1:k][1:v]i;");
    EXPECT("set k \"\"\r\n", "3[3:set][1:k][0:]i;");
    EXPECT("echo \"tab\\there\"\r\n", "2[4:echo][8:tab\there]i;");
    EXPECT("echo \"\\x4a\\x4B\\xzz\"\r\n", "2[4:echo][5:JKxzz]i;");
    EXPECT("echo \"q\\\"q\"\r\n", "2[4:echo][3:q\"q]i;");
    EXPECT("echo 'it\\'s' 'a\\nb'\r\n", "3[4:echo][4:it's][4:a\\nb]i;");
    EXPECT("echo a\"b\"\r\n", "2[4:echo][2:ab]i;");
    EXPECT("echo \"a\"\tb\r\n", "3[4:echo][1:a][1:b]i;");
    EXPECT("a\rb\r\n", "2[1:a][1:b]i;");
    EXPECT("get k\0 tail\r\n", "2[3:get][1:k]i;");
    EXPECT("\r\n\n   \r\nPING\r\n", "1[4:PING]i;");
    EXPECT("get \"a\\\r\n", "!ERR Protocol error: unbalanced quotes in request");
}
END_TEST

START_TEST(inline_unbalanced_quotes)
{
    EXPECT("set \"abc\r\n", "!ERR Protocol error: unbalanced quotes in request");
    EXPECT("set 'abc\r\n", "!ERR Protocol error: unbalanced quotes in request");
    EXPECT("set \"a\"b\r\n", "!ERR Protocol error: unbalanced quotes in request");
    EXPECT("set 'a'b\r\n", "!ERR Protocol error: unbalanced quotes in request");
    EXPECT("set \"a\0\"\r\n", "!ERR Protocol error: unbalanced quotes in request");
    /* commands before the bad one are still delivered */
    EXPECT("PING\r\nset \"x\r\n", "1[4:PING]i;!ERR Protocol error: unbalanced quotes in request");
}
END_TEST

/* ---- malformed multibulk ----------------------------------------------- */

START_TEST(malformed_multibulk_gets_redis_error_text)
{
    EXPECT("*abc\r\n", "!ERR Protocol error: invalid multibulk length");
    EXPECT("*+1\r\n", "!ERR Protocol error: invalid multibulk length");
    EXPECT("* 1\r\n", "!ERR Protocol error: invalid multibulk length");
    EXPECT("*\r\n", "!ERR Protocol error: invalid multibulk length");
    EXPECT("*1048577\r\n", "!ERR Protocol error: invalid multibulk length");
    EXPECT("*3000000000\r\n", "!ERR Protocol error: invalid multibulk length");
    EXPECT("*99999999999999999999\r\n", "!ERR Protocol error: invalid multibulk length");
    EXPECT("*1\r\n$-1\r\n", "!ERR Protocol error: invalid bulk length");
    EXPECT("*1\r\n$x\r\n", "!ERR Protocol error: invalid bulk length");
    EXPECT("*1\r\n$\r\n", "!ERR Protocol error: invalid bulk length");
    EXPECT("*1\r\n$536870913\r\n", "!ERR Protocol error: invalid bulk length");
    EXPECT("*1\r\n$01\r\n", "!ERR Protocol error: invalid bulk length");
    EXPECT("*1\r\nx\r\n", "!ERR Protocol error: expected '$', got 'x'");
    EXPECT("*3\r\n$3\r\nSET\r\n$1\r\nx\r\nfooz\r\n", "!ERR Protocol error: expected '$', got 'f'");
    EXPECT("*1\r\n\r\n", "!ERR Protocol error: expected '$', got ' '");
    EXPECT("*1\r\n:1\r\n", "!ERR Protocol error: expected '$', got ':'");
    /* Redis skips a negative count silently: nothing is run */
    EXPECT("*-10\r\nPING\r\n", "1[4:PING]i;");
}
END_TEST

START_TEST(too_big_header_and_inline_lines)
{
    size_t n = LATTICE_RESP_DEFAULT_MAX_INLINE + 10;
    char *in = malloc(n + 16);
    /* an inline line with no newline */
    memset(in, 'a', n);
    char *got = run_once(in, n);
    ck_assert_str_eq(got, "!ERR Protocol error: too big inline request");
    free(got);
    /* an mbulk count that never ends */
    in[0] = '*';
    memset(in + 1, '1', n - 1);
    got = run_once(in, n);
    ck_assert_str_eq(got, "!ERR Protocol error: too big mbulk count string");
    free(got);
    /* a bulk count that never ends */
    memcpy(in, "*1\r\n$", 5);
    memset(in + 5, '1', n - 5);
    got = run_once(in, n);
    ck_assert_str_eq(got, "!ERR Protocol error: too big bulk count string");
    free(got);
    free(in);
}
END_TEST

START_TEST(endless_lines_are_refused_by_the_limit_not_by_memory)
{
    /* A peer streaming a line with no end: refused once the line passes the
     * inline limit, having held no more than about twice that. */
    const char *starts[] = {"", "*", "*1\r\n$"};
    char chunk[4096];
    memset(chunk, '7', sizeof(chunk));
    for (int k = 0; k < 3; k++) {
        lattice_resp_parser *p = lattice_resp_parser_new(NULL);
        lattice_resp_command c;
        size_t used, fed = strlen(starts[k]);
        lattice_resp_result r = lattice_resp_parse(p, starts[k], fed, &used, &c);
        while (r == LATTICE_RESP_NEED_MORE && fed < (1u << 20)) {
            r = lattice_resp_parse(p, chunk, sizeof(chunk), &used, &c);
            fed += sizeof(chunk);
            ck_assert_uint_le(lattice_resp_parser_memory(p), 2 * LATTICE_RESP_DEFAULT_MAX_INLINE + 4096);
        }
        ck_assert_int_eq(r, LATTICE_RESP_ERROR);
        ck_assert_uint_le(fed, LATTICE_RESP_DEFAULT_MAX_INLINE + 2 * sizeof(chunk));
        ck_assert(strstr(lattice_resp_parser_error_reply(p), "too big") != NULL);
        lattice_resp_parser_free(p);
    }
}
END_TEST

START_TEST(inline_length_limit_is_exact_and_split_independent)
{
    lattice_resp_limits lim = lattice_resp_default_limits();
    lim.max_inline_len = 16;
    /* 16 bytes + CRLF: allowed, even when cut right after the CR */
    static const char ok[] = "echo 01234567890\r\nPING\r\n";
    static const char bad[] = "echo 012345678901\r\n";
    for (size_t cut = 0; cut <= sizeof(ok) - 1; cut++) {
        lattice_resp_parser *p = lattice_resp_parser_new(&lim);
        char *got = run_cuts(p, ok, sizeof(ok) - 1, &cut, 1);
        ck_assert_msg(strcmp(got, "2[4:echo][11:01234567890]i;1[4:PING]i;") == 0, "cut %zu: %s", cut, got);
        free(got);
        lattice_resp_parser_free(p);
        p = lattice_resp_parser_new(&lim);
        size_t c2 = cut < sizeof(bad) - 1 ? cut : sizeof(bad) - 1;
        got = run_cuts(p, bad, sizeof(bad) - 1, &c2, 1);
        ck_assert_str_eq(got, "!ERR Protocol error: too big inline request");
        free(got);
        lattice_resp_parser_free(p);
    }
}
END_TEST

START_TEST(unauthenticated_limits_apply_only_when_required)
{
    static const char many[] = "*11\r\n";
    static const char big[] = "*2\r\n$3\r\nSET\r\n$16385\r\n";
    lattice_resp_parser *p = lattice_resp_parser_new(NULL);
    lattice_resp_parser_set_auth_required(p, 1);
    char *got = run_cuts(p, many, sizeof(many) - 1, NULL, 0);
    ck_assert_str_eq(got, "!ERR Protocol error: unauthenticated multibulk length");
    free(got);
    lattice_resp_parser_reset(p);
    got = run_cuts(p, big, sizeof(big) - 1, NULL, 0);
    ck_assert_str_eq(got, "!ERR Protocol error: unauthenticated bulk length");
    free(got);
    /* the absolute limit is checked first, as Redis */
    lattice_resp_parser_reset(p);
    got = run_cuts(p, "*3000000000\r\n", 13, NULL, 0);
    ck_assert_str_eq(got, "!ERR Protocol error: invalid multibulk length");
    free(got);
    lattice_resp_parser_reset(p);
    lattice_resp_parser_set_auth_required(p, 0);
    got = run_cuts(p, big, sizeof(big) - 1, NULL, 0);
    ck_assert_str_eq(got, "");
    free(got);
    lattice_resp_parser_free(p);
}
END_TEST

START_TEST(error_is_sticky_until_reset)
{
    lattice_resp_parser *p = lattice_resp_parser_new(NULL);
    lattice_resp_command c;
    size_t used = 99;
    ck_assert_int_eq(lattice_resp_parse(p, "*x\r\n", 4, &used, &c), LATTICE_RESP_ERROR);
    ck_assert_int_eq(lattice_resp_parser_status(p), LATTICE_ERR_PROTO);
    ck_assert_int_eq(lattice_resp_parse(p, "PING\r\n", 6, &used, &c), LATTICE_RESP_ERROR);
    ck_assert_uint_eq(used, 0);
    ck_assert_str_eq(lattice_resp_parser_error_reply(p), "ERR Protocol error: invalid multibulk length");
    lattice_resp_parser_reset(p);
    ck_assert_ptr_null(lattice_resp_parser_error_reply(p));
    ck_assert_int_eq(lattice_resp_parse(p, "PING\r\n", 6, &used, &c), LATTICE_RESP_COMMAND);
    lattice_resp_parser_free(p);
}
END_TEST

START_TEST(bulk_trailer_is_skipped_unchecked_like_redis)
{
    EXPECT("*1\r\n$3\r\nfooXY*1\r\n$1\r\nz\r\n", "1[3:foo];1[1:z];");
    EXPECT("*1\rX$1\r\nz\r\n", "1[1:z];");
}
END_TEST

/* ---- limits and memory -------------------------------------------------- */

START_TEST(huge_declared_bulk_allocates_nothing_big)
{
    static const char hdr[] = "*2\r\n$3\r\nSET\r\n$536870912\r\nabcdefgh";
    lattice_resp_parser *p = lattice_resp_parser_new(NULL);
    lattice_alloc_count(1);
    uint64_t calls = lattice_alloc_calls();
    lattice_resp_command c;
    size_t used;
    ck_assert_int_eq(lattice_resp_parse(p, hdr, sizeof(hdr) - 1, &used, &c), LATTICE_RESP_NEED_MORE);
    ck_assert_uint_lt(lattice_resp_parser_memory(p), 4096);
    ck_assert_uint_le(lattice_alloc_calls() - calls, 4);
    /* 4 MiB more arrive in 64 KiB reads: memory follows the bytes, not the header */
    char *chunk = calloc(1, 65536);
    for (int i = 0; i < 64; i++)
        ck_assert_int_eq(lattice_resp_parse(p, chunk, 65536, &used, &c), LATTICE_RESP_NEED_MORE);
    size_t mem = lattice_resp_parser_memory(p);
    ck_assert_uint_ge(mem, 4u << 20);
    ck_assert_uint_le(mem, 9u << 20);
    free(chunk);
    lattice_alloc_count(0);
    lattice_resp_parser_free(p);
}
END_TEST

START_TEST(huge_declared_multibulk_allocates_nothing_big)
{
    lattice_resp_parser *p = lattice_resp_parser_new(NULL);
    lattice_resp_command c;
    size_t used;
    ck_assert_int_eq(lattice_resp_parse(p, "*1048576\r\n$1\r\na\r\n", 17, &used, &c), LATTICE_RESP_NEED_MORE);
    ck_assert_uint_lt(lattice_resp_parser_memory(p), 4096);
    lattice_resp_parser_free(p);
}
END_TEST

START_TEST(query_buffer_limit_closes_without_reply)
{
    lattice_resp_limits lim = lattice_resp_default_limits();
    lim.max_query_buf = 100000;
    lattice_resp_parser *p = lattice_resp_parser_new(&lim);
    lattice_resp_command c;
    size_t used;
    static const char hdr[] = "*3\r\n$3\r\nSET\r\n$60000\r\n";
    ck_assert_int_eq(lattice_resp_parse(p, hdr, sizeof(hdr) - 1, &used, &c), LATTICE_RESP_NEED_MORE);
    char *data = calloc(1, 60002);
    memcpy(data + 60000, "\r\n", 2);
    ck_assert_int_eq(lattice_resp_parse(p, data, 60002, &used, &c), LATTICE_RESP_NEED_MORE);
    ck_assert_int_eq(lattice_resp_parse(p, "$60000\r\n", 8, &used, &c), LATTICE_RESP_NEED_MORE);
    ck_assert_int_eq(lattice_resp_parse(p, data, 60002, &used, &c), LATTICE_RESP_ERROR);
    ck_assert_int_eq(lattice_resp_parser_status(p), LATTICE_ERR_TOO_LARGE);
    ck_assert_ptr_null(lattice_resp_parser_error_reply(p));
    free(data);
    lattice_resp_parser_free(p);
}
END_TEST

START_TEST(configured_limits_are_enforced)
{
    lattice_resp_limits lim = lattice_resp_default_limits();
    lim.max_bulk_len = 10;
    lim.max_multibulk_len = 3;
    static const char a[] = "*1\r\n$10\r\n0123456789\r\n*1\r\n$11\r\n";
    char *got = run_with(&lim, a, sizeof(a) - 1);
    ck_assert_str_eq(got, "1[10:0123456789];!ERR Protocol error: invalid bulk length");
    free(got);
    static const char b[] = "*3\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n*4\r\n";
    got = run_with(&lim, b, sizeof(b) - 1);
    ck_assert_str_eq(got, "3[1:a][1:b][1:c];!ERR Protocol error: invalid multibulk length");
    free(got);
}
END_TEST

START_TEST(big_buffers_are_given_back_after_the_command)
{
    lattice_resp_parser *p = lattice_resp_parser_new(NULL);
    static const char hdr[] = "*1\r\n$200000\r\n";
    lattice_resp_command c;
    size_t used;
    char *data = calloc(1, 200002);
    ck_assert_int_eq(lattice_resp_parse(p, hdr, sizeof(hdr) - 1, &used, &c), LATTICE_RESP_NEED_MORE);
    ck_assert_int_eq(lattice_resp_parse(p, data, 200002, &used, &c), LATTICE_RESP_COMMAND);
    ck_assert_uint_eq(c.argv[0].len, 200000);
    ck_assert_uint_ge(lattice_resp_parser_memory(p), 200000);
    ck_assert_int_eq(lattice_resp_parse(p, "PING\r\n", 6, &used, &c), LATTICE_RESP_COMMAND);
    ck_assert_uint_lt(lattice_resp_parser_memory(p), 100000);
    free(data);
    lattice_resp_parser_free(p);
}
END_TEST

/* ---- allocation failure ------------------------------------------------- */

START_TEST(allocation_failure_is_an_error_never_a_crash)
{
    size_t n = sizeof(PIPELINE) - 1;
    size_t cuts[] = {3, 9, 30, 31, 70, 90, 120, 121, 122, 160, 180};
    int saw_nomem = 0, saw_clean = 0;
    for (uint64_t k = 1; k < 40; k++) {
        lattice_alloc_fail_nth(k);
        lattice_resp_parser *p = lattice_resp_parser_new(NULL);
        if (!p) {
            lattice_alloc_fail_nth(0);
            continue;
        }
        char *got = run_cuts(p, PIPELINE, n, cuts, sizeof(cuts) / sizeof(cuts[0]));
        lattice_alloc_fail_nth(0);
        if (strcmp(got, PIPELINE_WANT) == 0) {
            saw_clean = 1;
        } else {
            /* a prefix of the right commands, then the out-of-memory error */
            char *bang = strchr(got, '!');
            ck_assert_ptr_nonnull(bang);
            ck_assert_int_eq(lattice_resp_parser_status(p), LATTICE_ERR_NOMEM);
            ck_assert_ptr_null(lattice_resp_parser_error_reply(p));
            ck_assert(strncmp(got, PIPELINE_WANT, (size_t)(bang - got)) == 0);
            saw_nomem = 1;
        }
        free(got);
        lattice_resp_parser_free(p);
    }
    ck_assert(saw_nomem);
    ck_assert(saw_clean);
}
END_TEST

Suite *resp_parser_suite(void);
Suite *resp_parser_suite(void)
{
    Suite *s = suite_create("resp_parser");
    TCase *t = tcase_create("split");
    tcase_add_test(t, pipeline_in_one_read);
    tcase_add_test(t, pipeline_split_at_every_byte_parses_the_same);
    tcase_add_test(t, pipeline_split_at_every_pair_of_points_parses_the_same);
    tcase_add_test(t, pipeline_fed_one_byte_at_a_time);
    tcase_add_test(t, whole_command_in_one_read_is_zero_copy);
    tcase_add_test(t, big_bulk_across_many_reads);
    tcase_add_test(t, empty_reads_change_nothing_in_any_state);
    tcase_add_test(t, steady_state_parsing_does_not_allocate);
    tcase_set_timeout(t, 120);
    suite_add_tcase(s, t);
    t = tcase_create("inline");
    tcase_add_test(t, inline_commands_split_like_sdssplitargs);
    tcase_add_test(t, inline_unbalanced_quotes);
    suite_add_tcase(s, t);
    t = tcase_create("malformed");
    tcase_add_test(t, malformed_multibulk_gets_redis_error_text);
    tcase_add_test(t, too_big_header_and_inline_lines);
    tcase_add_test(t, endless_lines_are_refused_by_the_limit_not_by_memory);
    tcase_add_test(t, inline_length_limit_is_exact_and_split_independent);
    tcase_add_test(t, unauthenticated_limits_apply_only_when_required);
    tcase_add_test(t, error_is_sticky_until_reset);
    tcase_add_test(t, bulk_trailer_is_skipped_unchecked_like_redis);
    suite_add_tcase(s, t);
    t = tcase_create("limits");
    tcase_add_test(t, huge_declared_bulk_allocates_nothing_big);
    tcase_add_test(t, huge_declared_multibulk_allocates_nothing_big);
    tcase_add_test(t, query_buffer_limit_closes_without_reply);
    tcase_add_test(t, configured_limits_are_enforced);
    tcase_add_test(t, big_buffers_are_given_back_after_the_command);
    tcase_add_test(t, allocation_failure_is_an_error_never_a_crash);
    suite_add_tcase(s, t);
    return s;
}
