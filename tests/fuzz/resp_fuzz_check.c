/*
 * One fuzz case for the RESP parser, shared by the libFuzzer harness
 * (fuzz_resp.c, clang) and the corpus replay test (replay_resp.c, gcc).
 *
 * Input layout: byte 0 picks where to split the stream, byte 1 picks the
 * chunk size of a second, many-piece split and the options (small limits,
 * pre-AUTH limits); the rest is the byte stream a client would send.
 *
 * Invariants checked (abort() on violation, so both builds report it):
 *   1. one read, a split at a data-derived point, and many small reads give
 *      the same commands and the same final error;
 *   2. every argument lies inside the input it came from or in memory the
 *      parser owns (ASan checks the reads), its length within the limits
 *      and the total within the input size; argc >= 1;
 *   3. an error is sticky: the next call returns it again, consuming nothing,
 *      and a protocol error's reply starts with "ERR Protocol error: ";
 *   4. the commands of a clean parse, re-encoded as multibulk, re-parse to
 *      the same argv;
 *   5. the command table, SET parser and encoder accept whatever argv came
 *      out without misbehaving;
 *   6. the parser's memory follows the bytes received, never a declared
 *      length: at most 32 bytes per input byte (argv slots for tiny
 *      arguments) plus a fixed 256 KiB.
 */
#include "resp_fuzz_check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "resp/resp.h"

#define CHECK(cond)                                                            \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "resp fuzz invariant failed: %s (%s:%d)\n", #cond, \
                    __FILE__, __LINE__);                                       \
            abort();                                                           \
        }                                                                      \
    } while (0)

typedef struct {
    char *s;
    size_t n, cap;
} sbuf;

static void sb_add(sbuf *b, const void *p, size_t n)
{
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->s = realloc(b->s, b->cap);
        CHECK(b->s != NULL);
    }
    if (n) memcpy(b->s + b->n, p, n);
    b->n += n;
}

static void sb_len(sbuf *b, size_t v) { sb_add(b, &v, sizeof(v)); }

typedef struct {
    sbuf cmds;      /* serialised argv of every command */
    sbuf wire;      /* the same commands re-encoded as multibulk */
    size_t ncmds;
    int error;      /* 0, or the parser status of the final error */
    char reply[128];
} outcome;

/* Touch the pure helpers with the command, for crashes and sanitizer reports. */
static void exercise(const lattice_resp_command *c)
{
    char err[LATTICE_RESP_ERR_MAX];
    const lattice_resp_cmd *cmd = lattice_resp_cmd_resolve(c->argc, c->argv, err);
    if (!cmd) {
        CHECK(strncmp(err, "ERR ", 4) == 0);
        CHECK(strlen(err) < LATTICE_RESP_ERR_MAX);
        return;
    }
    size_t idx[16];
    size_t nk = lattice_resp_cmd_keys(cmd, c->argc, idx, 16);
    for (size_t i = 0; i < nk; i++) CHECK(idx[i] > 0 && idx[i] < c->argc);
    if (lattice_resp_cmd_id_of(cmd) == LATTICE_RESP_CMD_SET) {
        lattice_resp_set_opts o;
        lattice_status st = lattice_resp_parse_set(c->argc, c->argv, 1700000000000LL, &o, err);
        CHECK(st == LATTICE_OK || strncmp(err, "ERR ", 4) == 0);
        CHECK(!((o.flags & LATTICE_RESP_SET_NX) && (o.flags & LATTICE_RESP_SET_XX)));
    }
    lattice_resp_cmd_id id = lattice_resp_cmd_id_of(cmd);
    if (id == LATTICE_RESP_CMD_EXPIRE || id == LATTICE_RESP_CMD_PEXPIRE) {
        lattice_resp_expire_opts e;
        lattice_status st = lattice_resp_parse_expire(c->argc, c->argv, id == LATTICE_RESP_CMD_EXPIRE ? 1000 : 1,
                                                      1700000000000LL, &e, err);
        CHECK(st == LATTICE_OK || strncmp(err, "ERR ", 4) == 0);
    }
    if (id == LATTICE_RESP_CMD_HELLO) {
        lattice_resp_hello_opts h;
        lattice_status st = lattice_resp_parse_hello(c->argc, c->argv, &h, err);
        CHECK(st != LATTICE_OK || h.proto == 0 || h.proto == 2 || h.proto == 3);
        CHECK(st == LATTICE_OK || strncmp(err, "ERR ", 4) == 0 || strncmp(err, "NOPROTO ", 8) == 0);
    }
    long long v;
    for (size_t i = 0; i < c->argc; i++) (void)lattice_resp_string2ll(c->argv[i].ptr, c->argv[i].len, &v);
}

static void record(outcome *o, const lattice_resp_command *c, const char *chunk, size_t len,
                   size_t total, const lattice_resp_limits *lim)
{
    CHECK(c->argc >= 1);
    sb_len(&o->cmds, c->argc);
    char hdr[32];
    sb_add(&o->wire, hdr, (size_t)snprintf(hdr, sizeof(hdr), "*%zu\r\n", c->argc));
    size_t sum = 0;
    for (size_t i = 0; i < c->argc; i++) {
        const lattice_resp_arg *a = &c->argv[i];
        CHECK(a->len <= lim->max_bulk_len);
        CHECK(a->len == 0 || a->ptr != NULL);
        /* Inside this chunk, or entirely outside it (the parser's copy). */
        if (a->ptr >= chunk && a->ptr < chunk + len) CHECK(a->len <= (size_t)(chunk + len - a->ptr));
        sum += a->len;
        sb_len(&o->cmds, a->len);
        sb_add(&o->cmds, a->ptr, a->len);
        sb_add(&o->wire, hdr, (size_t)snprintf(hdr, sizeof(hdr), "$%zu\r\n", a->len));
        sb_add(&o->wire, a->ptr, a->len);
        sb_add(&o->wire, "\r\n", 2);
    }
    CHECK(sum <= total);
    o->ncmds++;
    exercise(c);
}

/* Parse data[0,n) fed in chunks of `step` bytes, the first one `first`
 * bytes long; each chunk lives in its own heap copy freed after use. */
static void run(const uint8_t *data, size_t n, size_t first, size_t step,
                const lattice_resp_limits *lim, int auth, outcome *o)
{
    memset(o, 0, sizeof(*o));
    lattice_resp_parser *p = lattice_resp_parser_new(lim);
    CHECK(p != NULL);
    lattice_resp_parser_set_auth_required(p, auth);
    size_t from = 0;
    int first_chunk = 1;
    do {
        size_t len = first_chunk ? first : step;
        first_chunk = 0;
        if (len > n - from) len = n - from;
        char *chunk = malloc(len ? len : 1);
        CHECK(chunk != NULL);
        if (len) memcpy(chunk, data + from, len);
        size_t pos = 0;
        for (;;) {
            size_t used = (size_t)-1;
            lattice_resp_command c;
            lattice_resp_result r = lattice_resp_parse(p, chunk + pos, len - pos, &used, &c);
            CHECK(lattice_resp_parser_memory(p) <= 32 * (from + len) + (256u << 10));
            if (r == LATTICE_RESP_COMMAND) {
                CHECK(used <= len - pos);
                record(o, &c, chunk, len, n, lim);
                pos += used;
                continue;
            }
            if (r == LATTICE_RESP_ERROR) {
                lattice_status st = lattice_resp_parser_status(p);
                CHECK(st == LATTICE_ERR_PROTO || st == LATTICE_ERR_TOO_LARGE || st == LATTICE_ERR_NOMEM);
                const char *reply = lattice_resp_parser_error_reply(p);
                CHECK((st == LATTICE_ERR_PROTO) == (reply != NULL));
                if (reply) {
                    CHECK(strncmp(reply, "ERR Protocol error: ", 20) == 0);
                    CHECK(strpbrk(reply, "\r\n") == NULL);
                    snprintf(o->reply, sizeof(o->reply), "%s", reply);
                }
                o->error = (int)st;
                /* sticky */
                size_t again = 7;
                CHECK(lattice_resp_parse(p, "PING\r\n", 6, &again, &c) == LATTICE_RESP_ERROR);
                CHECK(again == 0);
                free(chunk);
                lattice_resp_parser_free(p);
                return;
            }
            CHECK(r == LATTICE_RESP_NEED_MORE && used == len - pos);
            break;
        }
        memset(chunk, 0x5A, len);
        free(chunk);
        from += len;
    } while (from < n);
    lattice_resp_parser_free(p);
}

static int same(const outcome *a, const outcome *b)
{
    return a->ncmds == b->ncmds && a->cmds.n == b->cmds.n &&
           (a->cmds.n == 0 || memcmp(a->cmds.s, b->cmds.s, a->cmds.n) == 0) &&
           a->error == b->error && strcmp(a->reply, b->reply) == 0;
}

static void release(outcome *o)
{
    free(o->cmds.s);
    free(o->wire.s);
}

void resp_fuzz_one(const uint8_t *data, size_t size)
{
    if (size < 2) return;
    uint8_t split = data[0], opts = data[1];
    data += 2, size -= 2;

    lattice_resp_limits lim = lattice_resp_default_limits();
    if (opts & 0x80) { /* small limits, so the limit paths are reachable */
        lim.max_inline_len = 24;
        lim.max_bulk_len = 40;
        lim.max_multibulk_len = 6;
    }
    int auth = (opts & 0x40) != 0;
    size_t step = (size_t)(opts & 0x3F) + 1;
    size_t cut = size ? (size_t)split * size / 255 : 0;

    outcome whole, two, many;
    run(data, size, size, size, &lim, auth, &whole);
    run(data, size, cut, size, &lim, auth, &two);
    run(data, size, step, step, &lim, auth, &many);
    CHECK(same(&whole, &two));
    CHECK(same(&whole, &many));

    /* Re-encoded commands parse back to the same argv, with no error. */
    outcome again;
    lattice_resp_limits big = lattice_resp_default_limits();
    run((const uint8_t *)whole.wire.s, whole.wire.n, whole.wire.n, whole.wire.n, &big, 0, &again);
    CHECK(again.error == 0);
    CHECK(again.ncmds == whole.ncmds);
    CHECK(again.cmds.n == whole.cmds.n);
    CHECK(whole.cmds.n == 0 || memcmp(again.cmds.s, whole.cmds.s, whole.cmds.n) == 0);

    /* The encoder takes any argument bytes. */
    if (whole.ncmds) {
        lattice_resp_out *o = lattice_resp_out_new(1 << 20, (opts & 1) ? 3 : 2);
        CHECK(o != NULL);
        lattice_resp_add_bulk(o, whole.cmds.s, whole.cmds.n);
        lattice_resp_add_simple(o, whole.cmds.s, whole.cmds.n < 100 ? whole.cmds.n : 100);
        lattice_resp_add_verbatim(o, "txt", whole.cmds.s, whole.cmds.n);
        /* the library's own multibulk encoder agrees with the harness's */
        lattice_resp_out *w = lattice_resp_out_new(0, 2);
        lattice_resp_parser *p = lattice_resp_parser_new(NULL);
        CHECK(w != NULL && p != NULL);
        size_t pos = 0, used;
        lattice_resp_command c;
        while (lattice_resp_parse(p, whole.wire.s + pos, whole.wire.n - pos, &used, &c) == LATTICE_RESP_COMMAND) {
            CHECK(lattice_resp_add_command(w, c.argc, c.argv) == LATTICE_OK);
            pos += used;
        }
        CHECK(lattice_resp_out_pending(w) == whole.wire.n);
        char *copy = malloc(whole.wire.n ? whole.wire.n : 1);
        CHECK(copy != NULL);
        CHECK(lattice_resp_out_peek(w, copy, whole.wire.n) == whole.wire.n);
        CHECK(memcmp(copy, whole.wire.s, whole.wire.n) == 0);
        free(copy);
        lattice_resp_parser_free(p);
        lattice_resp_out_free(w);
        struct iovec iov[8];
        int k = lattice_resp_out_iov(o, iov, 8);
        size_t sum = 0;
        for (int i = 0; i < k; i++) sum += iov[i].iov_len;
        CHECK(sum == lattice_resp_out_pending(o));
        lattice_resp_out_free(o);
    }
    release(&whole), release(&two), release(&many), release(&again);
}
