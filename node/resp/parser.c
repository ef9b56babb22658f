/*
 * Incremental RESP request parser (the server side of processInputBuffer,
 * processMultibulkBuffer and processInlineBuffer in Redis's networking.c).
 *
 * States (one command at a time):
 *
 *   START --'*'--> MB_HDR --n>0--> BULK_HDR --> BULK_DATA --more args--> BULK_HDR
 *     |              |  n<=0: skipped                  '-- last arg --> emit, START
 *     '--other-----> INLINE --line--> split (sdssplitargs rules) --> emit, START
 *   any error --> ERROR (sticky until reset)
 *
 * Storage rules, which keep memory bounded by what actually arrived:
 *   - A header or inline line cut by the end of a read is stashed in `line`,
 *     never longer than max_inline_len (+ the CR), whatever the peer sends.
 *   - Arguments point into the caller's buffer while their whole command lies
 *     in it (zero copy).  When a command is cut by the end of a read, its
 *     arguments so far are copied into `own` and the rest follows them there;
 *     `own` grows at most to twice the bytes received, never to a declared
 *     bulk length up front, and never past max_query_buf.
 *   - `own` of a finished command is reused by the next one and given back
 *     when it grew past KEEP_BYTES.
 *
 * Redis compatibility, deliberately: a multibulk header ends at the first CR
 * and the byte after it is skipped unchecked; a bulk's two trailing bytes are
 * skipped unchecked; an inline line ends at LF with one CR before it removed,
 * and a NUL in it ends it (sdssplitargs works on C strings).  Where Redis's
 * outcome depends on how reads happened to split the stream ("too big"
 * checks), the limit here applies to the line's length, so that any split of
 * the same bytes gives the same result.
 */
#include "resp/resp.h"

#include <stdio.h>
#include <string.h>

#include "lattice/alloc.h"

enum { ST_START, ST_MB_HDR, ST_BULK_HDR, ST_BULK_DATA, ST_INLINE, ST_ERROR };

#define KEEP_BYTES (64 * 1024) /* own/line capacity kept between commands */
#define KEEP_ARGS 1024         /* argv capacity kept between commands */
#define FIRST_ARGS 16

struct lattice_resp_parser {
    lattice_resp_limits lim;
    int auth_required;
    int state;
    int owned;            /* this command's arguments live in own (off[]) */
    int is_inline;
    int64_t mb_left;      /* arguments still to come in this multibulk */
    uint64_t bulk_len;    /* BULK_DATA: declared length */
    uint64_t bulk_done;   /* BULK_DATA (owned): data + trailer bytes consumed */
    int bulk_pushed;      /* BULK_DATA (owned): its argument slot exists */

    char *line;           /* stashed unfinished line */
    size_t line_len, line_cap;
    char *own;            /* argument bytes of a command cut across reads */
    size_t own_len, own_cap;
    lattice_resp_arg *argv;
    size_t *off;          /* owned: argument i starts at own + off[i] */
    size_t argc, argv_cap;

    lattice_status status;
    int has_reply;
    char err[96];
};

lattice_resp_limits lattice_resp_default_limits(void)
{
    lattice_resp_limits l = {
        .max_bulk_len = LATTICE_RESP_DEFAULT_MAX_BULK,
        .max_multibulk_len = LATTICE_RESP_DEFAULT_MAX_MULTIBULK,
        .max_inline_len = LATTICE_RESP_DEFAULT_MAX_INLINE,
        .max_query_buf = LATTICE_RESP_DEFAULT_MAX_QUERYBUF,
    };
    return l;
}

lattice_resp_parser *lattice_resp_parser_new(const lattice_resp_limits *limits)
{
    lattice_resp_parser *p = lt_calloc(1, sizeof(*p));
    if (!p) return NULL;
    p->lim = limits ? *limits : lattice_resp_default_limits();
    p->state = ST_START;
    return p;
}

void lattice_resp_parser_free(lattice_resp_parser *p)
{
    if (!p) return;
    lt_free(p->line);
    lt_free(p->own);
    lt_free(p->argv);
    lt_free(p->off);
    lt_free(p);
}

/* Give back buffers that one big command made large. */
static void trim_storage(lattice_resp_parser *p)
{
    if (p->own_cap > KEEP_BYTES) {
        lt_free(p->own);
        p->own = NULL, p->own_cap = 0;
    }
    if (p->line_cap > KEEP_BYTES) {
        lt_free(p->line);
        p->line = NULL, p->line_cap = 0;
    }
    if (p->argv_cap > KEEP_ARGS) {
        lt_free(p->argv), lt_free(p->off);
        p->argv = NULL, p->off = NULL, p->argv_cap = 0;
    }
}

static void begin_command(lattice_resp_parser *p)
{
    p->argc = 0;
    p->own_len = 0;
    p->line_len = 0;
    p->owned = 0;
    p->is_inline = 0;
    p->mb_left = 0;
    p->bulk_len = p->bulk_done = 0;
    p->bulk_pushed = 0;
    trim_storage(p);
}

void lattice_resp_parser_reset(lattice_resp_parser *p)
{
    begin_command(p);
    p->state = ST_START;
    p->status = LATTICE_OK;
    p->has_reply = 0;
    p->err[0] = '\0';
}

void lattice_resp_parser_set_auth_required(lattice_resp_parser *p, int required)
{
    p->auth_required = required != 0;
}

lattice_status lattice_resp_parser_status(const lattice_resp_parser *p) { return p->status; }

const char *lattice_resp_parser_error_reply(const lattice_resp_parser *p)
{
    return p->has_reply ? p->err : NULL;
}

size_t lattice_resp_parser_memory(const lattice_resp_parser *p)
{
    return sizeof(*p) + p->line_cap + p->own_cap +
           p->argv_cap * (sizeof(*p->argv) + sizeof(*p->off));
}

static lattice_resp_result fail(lattice_resp_parser *p, lattice_status st, const char *reply)
{
    p->state = ST_ERROR;
    p->status = st;
    p->has_reply = reply != NULL;
    snprintf(p->err, sizeof(p->err), "%s", reply ? reply : lattice_strerror(st));
    return LATTICE_RESP_ERROR;
}

static lattice_resp_result fail_expected_dollar(lattice_resp_parser *p, char got)
{
    /* Redis's addReplyErrorFormat turns CR/LF into spaces; a NUL would end
     * the C string, so it is shown as a space too. */
    if (got == '\r' || got == '\n' || got == '\0') got = ' ';
    char msg[64];
    snprintf(msg, sizeof(msg), "ERR Protocol error: expected '$', got '%c'", got);
    return fail(p, LATTICE_ERR_PROTO, msg);
}

/* Grow a byte buffer to hold at least need bytes, doubling.  need is only
 * ever bytes that arrived, so the capacity stays below twice them: a
 * declared bulk length is never allocated ahead of its bytes. */
static int grow_bytes(char **buf, size_t *cap, size_t need)
{
    if (need <= *cap) return 0;
    size_t n = *cap ? *cap * 2 : 256;
    if (n < need) n = need;
    char *b = lt_realloc(*buf, n);
    if (!b) return -1;
    *buf = b, *cap = n;
    return 0;
}

static int grow_args(lattice_resp_parser *p, size_t need)
{
    if (need <= p->argv_cap) return 0;
    size_t n = p->argv_cap ? p->argv_cap * 2 : FIRST_ARGS;
    if (n < need) n = need;
    lattice_resp_arg *a = lt_realloc(p->argv, n * sizeof(*a));
    if (!a) return -1;
    p->argv = a;
    size_t *o = lt_realloc(p->off, n * sizeof(*o));
    if (!o) return -1; /* argv grew; argv_cap stays, which is safe */
    p->off = o;
    p->argv_cap = n;
    return 0;
}

/* Copy the zero-copy arguments of the unfinished command into own, because
 * the caller is about to reuse its buffer. */
static int migrate(lattice_resp_parser *p)
{
    size_t total = p->own_len;
    for (size_t i = 0; i < p->argc; i++) total += p->argv[i].len;
    if (grow_bytes(&p->own, &p->own_cap, total) < 0) return -1;
    for (size_t i = 0; i < p->argc; i++) {
        if (p->argv[i].len) memcpy(p->own + p->own_len, p->argv[i].ptr, p->argv[i].len);
        p->off[i] = p->own_len;
        p->own_len += p->argv[i].len;
    }
    p->owned = 1;
    return 0;
}

/* Append to the stash, refusing a line longer than max (CR excluded). */
static int stash(lattice_resp_parser *p, const char *s, size_t n)
{
    if (n == 0) return 0;
    if (grow_bytes(&p->line, &p->line_cap, p->line_len + n) < 0) return -1;
    memcpy(p->line + p->line_len, s, n);
    p->line_len += n;
    return 0;
}

enum { LINE_MORE = 0, LINE_OK = 1, LINE_TOO_BIG = -1, LINE_NOMEM = -2 };

/*
 * Take the next line from buf at *pos, joining it to a stashed prefix.
 * inl == 0: a header, ending at the first CR plus one more byte (any byte).
 * inl == 1: an inline line, ending at LF, with one CR before it removed.
 * On LINE_OK, (*out, *outlen) is the line without terminator (in buf or in the
 * stash, which the caller empties after use).
 */
static int take_line(lattice_resp_parser *p, const char *buf, size_t len, size_t *pos, int inl,
                     const char **out, size_t *outlen)
{
    const char *s = buf + *pos;
    size_t avail = len - *pos, max = p->lim.max_inline_len;

    if (!inl && p->line_len && p->line[p->line_len - 1] == '\r') {
        if (avail == 0) return LINE_MORE;
        *pos += 1; /* the byte after CR, unchecked as in Redis */
        *out = p->line, *outlen = p->line_len - 1;
        return LINE_OK;
    }
    const char *t = memchr(s, inl ? '\n' : '\r', avail);
    size_t n = t ? (size_t)(t - s) : avail;           /* bytes before the terminator */
    int complete = t && (inl || n + 1 < avail);
    if (complete) {
        size_t body = p->line_len + n;
        if (inl && body && (n ? s[n - 1] : p->line[p->line_len - 1]) == '\r') body--;
        if (body > max) return LINE_TOO_BIG;
        *pos += n + (inl ? 1 : 2);
        if (p->line_len == 0) {
            *out = s, *outlen = body;
            return LINE_OK;
        }
        if (stash(p, s, n) < 0) return LINE_NOMEM;
        *out = p->line, *outlen = body;
        return LINE_OK;
    }
    /* Unfinished: everything left belongs to this line.  A trailing CR may
     * still be the terminator's, so it does not count against the limit. */
    size_t body = p->line_len + avail;
    if (body && (avail ? s[avail - 1] : p->line[p->line_len - 1]) == '\r') body--;
    if (body > max) return LINE_TOO_BIG;
    if (stash(p, s, avail) < 0) return LINE_NOMEM;
    *pos = len;
    return LINE_MORE;
}

/* Push a finished argument that is wholly in the caller's buffer. */
static int push_arg(lattice_resp_parser *p, const char *ptr, size_t n)
{
    if (p->argc == p->argv_cap && grow_args(p, p->argc + 1) < 0) return -1;
    p->argv[p->argc].ptr = ptr;
    p->argv[p->argc].len = n;
    p->argc++;
    return 0;
}

/* Push an argument whose bytes are (or will be) at own + off. */
static int push_owned(lattice_resp_parser *p, size_t off, size_t n)
{
    if (p->argc == p->argv_cap && grow_args(p, p->argc + 1) < 0) return -1;
    p->off[p->argc] = off;
    p->argv[p->argc].ptr = NULL;
    p->argv[p->argc].len = n;
    p->argc++;
    return 0;
}

static int is_hex(int c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

static int hex_val(int c)
{
    if (c >= '0' && c <= '9') return c - '0';
    return (c | 0x20) - 'a' + 10;
}

static int is_space(int c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

/*
 * Split an inline line into own as Redis's sdssplitargs: blanks separate
 * arguments; "double quotes" take \xHH, \n \r \t \b \a and \<any>; 'single
 * quotes' take only \'; a closing quote must be followed by a blank or the
 * end.  Returns 1, 0 for unbalanced quotes, -1 out of memory.
 */
static int split_inline(lattice_resp_parser *p, const char *line, size_t n)
{
    const char *nul = memchr(line, '\0', n);
    size_t e = nul ? (size_t)(nul - line) : n, i = 0;
    /* Byte at index q, or 0 past the end: sdssplitargs reads a C string. */
#define AT(q) ((q) < e ? (unsigned char)line[(q)] : 0)
    if (grow_bytes(&p->own, &p->own_cap, e + 1) < 0) return -1;
    p->owned = 1;
    p->own_len = 0;
    char *o = p->own;
    for (;;) {
        while (i < e && is_space((unsigned char)line[i])) i++;
        if (i >= e) return 1;
        size_t start = p->own_len;
        int inq = 0, insq = 0, done = 0;
        while (!done) {
            int c = AT(i);
            if (inq) {
                if (c == '\\' && AT(i + 1) == 'x' && is_hex(AT(i + 2)) && is_hex(AT(i + 3))) {
                    o[p->own_len++] = (char)(hex_val(AT(i + 2)) * 16 + hex_val(AT(i + 3)));
                    i += 3;
                } else if (c == '\\' && AT(i + 1)) {
                    i++;
                    int x = AT(i);
                    o[p->own_len++] = x == 'n' ? '\n' : x == 'r' ? '\r' : x == 't' ? '\t'
                                    : x == 'b' ? '\b' : x == 'a' ? '\a' : (char)x;
                } else if (c == '"') {
                    if (AT(i + 1) && !is_space(AT(i + 1))) return 0;
                    done = 1;
                } else if (!c) {
                    return 0;
                } else {
                    o[p->own_len++] = (char)c;
                }
            } else if (insq) {
                if (c == '\\' && AT(i + 1) == '\'') {
                    i++;
                    o[p->own_len++] = '\'';
                } else if (c == '\'') {
                    if (AT(i + 1) && !is_space(AT(i + 1))) return 0;
                    done = 1;
                } else if (!c) {
                    return 0;
                } else {
                    o[p->own_len++] = (char)c;
                }
            } else if (c == ' ' || c == '\n' || c == '\r' || c == '\t' || c == '\0') {
                done = 1;
            } else if (c == '"') {
                inq = 1;
            } else if (c == '\'') {
                insq = 1;
            } else {
                o[p->own_len++] = (char)c;
            }
            if (AT(i)) i++;
        }
        if (push_owned(p, start, p->own_len - start) < 0) return -1;
    }
#undef AT
}

/* Emit the finished command and return to START. */
static lattice_resp_result emit(lattice_resp_parser *p, size_t pos, size_t *consumed,
                                lattice_resp_command *cmd)
{
    if (p->owned) /* own is still NULL when every owned argument is empty */
        for (size_t i = 0; i < p->argc; i++) p->argv[i].ptr = p->own ? p->own + p->off[i] : "";
    cmd->argc = p->argc;
    cmd->argv = p->argv;
    cmd->is_inline = p->is_inline;
    p->state = ST_START;
    *consumed = pos;
    return LATTICE_RESP_COMMAND;
}

static lattice_resp_result line_failure(lattice_resp_parser *p, int r, const char *too_big)
{
    if (r == LINE_NOMEM) return fail(p, LATTICE_ERR_NOMEM, NULL);
    return fail(p, LATTICE_ERR_PROTO, too_big);
}

/*
 * The common case of a header, "*N" or "$N" with plain digits and its CR
 * plus one byte in this buffer, without the stash: read the digits while
 * looking for the CR.  Returns the bytes used, or 0 when the general path
 * must decide (stash in use, a sign, 19+ digits, a leading zero, a short
 * buffer, or a line the inline limit would refuse); on the accepted inputs
 * it gives exactly what take_line + string2ll give.
 */
static size_t fast_header(const lattice_resp_parser *p, const char *s, size_t avail, long long *v)
{
    if (p->line_len || avail < 4 || s[1] < '1' || s[1] > '9') return 0;
    unsigned long long x = (unsigned long long)(s[1] - '0');
    size_t i = 2, lim = avail < 20 ? avail : 20;
    while (i < lim && s[i] >= '0' && s[i] <= '9') x = x * 10 + (unsigned)(s[i++] - '0');
    if (i >= lim || s[i] != '\r' || i + 1 >= avail || i > p->lim.max_inline_len) return 0;
    *v = (long long)x;
    return i + 2;
}

/* The multibulk count "*N" (ok = it parsed as a number). */
static int on_mb_count(lattice_resp_parser *p, int ok, long long v)
{
    if (!ok || v > p->lim.max_multibulk_len) {
        fail(p, LATTICE_ERR_PROTO, "ERR Protocol error: invalid multibulk length");
        return -1;
    }
    if (v > LATTICE_RESP_UNAUTH_MAX_MULTIBULK && p->auth_required) {
        fail(p, LATTICE_ERR_PROTO, "ERR Protocol error: unauthenticated multibulk length");
        return -1;
    }
    p->line_len = 0;
    if (v <= 0) {
        p->state = ST_START; /* empty command: skipped */
        return 0;
    }
    p->mb_left = v;
    p->state = ST_BULK_HDR;
    return 0;
}

static int on_mb_header(lattice_resp_parser *p, const char *l, size_t n)
{
    long long v = 0;
    int ok = lattice_resp_string2ll(l + 1, n - 1, &v);
    return on_mb_count(p, ok, v);
}

/* A bulk length "$N" (ok = it parsed as a number). */
static int on_bulk_len(lattice_resp_parser *p, int ok, long long v)
{
    if (!ok || v < 0 || (unsigned long long)v > p->lim.max_bulk_len) {
        fail(p, LATTICE_ERR_PROTO, "ERR Protocol error: invalid bulk length");
        return -1;
    }
    if (v > LATTICE_RESP_UNAUTH_MAX_BULK && p->auth_required) {
        fail(p, LATTICE_ERR_PROTO, "ERR Protocol error: unauthenticated bulk length");
        return -1;
    }
    p->line_len = 0;
    p->bulk_len = (uint64_t)v;
    p->bulk_done = 0;
    p->state = ST_BULK_DATA;
    return 0;
}

static int on_bulk_header(lattice_resp_parser *p, const char *l, size_t n)
{
    if (n == 0 || l[0] != '$') {
        fail_expected_dollar(p, n ? l[0] : '\r');
        return -1;
    }
    long long v = 0;
    int ok = lattice_resp_string2ll(l + 1, n - 1, &v);
    return on_bulk_len(p, ok, v);
}

/* Feed the current bulk from buf at *pos.  1 = argument finished, 0 = need
 * more bytes (all consumed), -1 = failed (state set). */
static int on_bulk_data(lattice_resp_parser *p, const char *buf, size_t len, size_t *pos)
{
    uint64_t need = p->bulk_len + 2;
    size_t avail = len - *pos;
    if (!p->owned && avail >= need) {
        if (push_arg(p, buf + *pos, (size_t)p->bulk_len) < 0) goto nomem;
        *pos += (size_t)need;
        return 1;
    }
    if (!p->owned && migrate(p) < 0) goto nomem;
    if (!p->bulk_pushed) {
        if (push_owned(p, p->own_len, (size_t)p->bulk_len) < 0) goto nomem;
        p->bulk_pushed = 1;
    }
    uint64_t data_left = p->bulk_done < p->bulk_len ? p->bulk_len - p->bulk_done : 0;
    size_t take = data_left < avail ? (size_t)data_left : avail;
    if (take) {
        if ((uint64_t)p->own_len + take + p->line_len > p->lim.max_query_buf) {
            fail(p, LATTICE_ERR_TOO_LARGE, NULL);
            return -1;
        }
        if (grow_bytes(&p->own, &p->own_cap, p->own_len + take) < 0) goto nomem;
        memcpy(p->own + p->own_len, buf + *pos, take);
        p->own_len += take;
        *pos += take, avail -= take;
        p->bulk_done += take;
    }
    uint64_t trail_left = need - p->bulk_done;
    size_t skip = trail_left < avail ? (size_t)trail_left : avail;
    *pos += skip;
    p->bulk_done += skip;
    return p->bulk_done == need;
nomem:
    fail(p, LATTICE_ERR_NOMEM, NULL);
    return -1;
}

/* The end of the input with a command unfinished: keep what it needs. */
static lattice_resp_result need_more(lattice_resp_parser *p, size_t len, size_t *consumed)
{
    *consumed = len;
    if (p->argc > 0 && !p->owned && migrate(p) < 0) return fail(p, LATTICE_ERR_NOMEM, NULL);
    return LATTICE_RESP_NEED_MORE;
}

lattice_resp_result lattice_resp_parse(lattice_resp_parser *p, const char *buf, size_t len,
                                       size_t *consumed, lattice_resp_command *cmd)
{
    size_t pos = 0;
    const char *l;
    size_t n, adv;
    long long v;
    int r;

    if (p->state == ST_ERROR) {
        *consumed = 0;
        return LATTICE_RESP_ERROR;
    }
    if (len == 0) { /* nothing to do; buf may be NULL */
        *consumed = 0;
        return LATTICE_RESP_NEED_MORE;
    }
    for (;;) {
        switch (p->state) {
        case ST_START:
            if (pos == len) {
                *consumed = len;
                return LATTICE_RESP_NEED_MORE;
            }
            begin_command(p);
            p->state = buf[pos] == '*' ? ST_MB_HDR : ST_INLINE;
            break;
        case ST_MB_HDR:
            if ((adv = fast_header(p, buf + pos, len - pos, &v)) != 0) {
                pos += adv;
                if (on_mb_count(p, 1, v) < 0) return LATTICE_RESP_ERROR;
                break;
            }
            r = take_line(p, buf, len, &pos, 0, &l, &n);
            if (r == LINE_MORE) return need_more(p, len, consumed);
            if (r < 0) return line_failure(p, r, "ERR Protocol error: too big mbulk count string");
            if (on_mb_header(p, l, n) < 0) return LATTICE_RESP_ERROR;
            break;
        case ST_BULK_HDR:
            if (pos < len && buf[pos] == '$' && (adv = fast_header(p, buf + pos, len - pos, &v)) != 0) {
                pos += adv;
                if (on_bulk_len(p, 1, v) < 0) return LATTICE_RESP_ERROR;
                break;
            }
            r = take_line(p, buf, len, &pos, 0, &l, &n);
            if (r == LINE_MORE) return need_more(p, len, consumed);
            if (r < 0) return line_failure(p, r, "ERR Protocol error: too big bulk count string");
            if (on_bulk_header(p, l, n) < 0) return LATTICE_RESP_ERROR;
            break;
        case ST_BULK_DATA:
            r = on_bulk_data(p, buf, len, &pos);
            if (r < 0) return LATTICE_RESP_ERROR;
            if (r == 0) return need_more(p, len, consumed);
            p->bulk_done = 0;
            p->bulk_pushed = 0;
            if (--p->mb_left > 0) {
                p->state = ST_BULK_HDR;
                break;
            }
            return emit(p, pos, consumed, cmd);
        case ST_INLINE:
            r = take_line(p, buf, len, &pos, 1, &l, &n);
            if (r == LINE_MORE) return need_more(p, len, consumed);
            if (r < 0) return line_failure(p, r, "ERR Protocol error: too big inline request");
            /* The split writes into own, so a stashed line must not be own. */
            r = split_inline(p, l, n);
            p->line_len = 0;
            if (r < 0) return fail(p, LATTICE_ERR_NOMEM, NULL);
            if (r == 0) return fail(p, LATTICE_ERR_PROTO, "ERR Protocol error: unbalanced quotes in request");
            if (p->argc == 0) {
                p->state = ST_START; /* blank line: skipped */
                break;
            }
            p->is_inline = 1;
            return emit(p, pos, consumed, cmd);
        default:
            *consumed = pos;
            return LATTICE_RESP_ERROR;
        }
    }
}
