/*
 * Reply encoder and the per-connection output buffer.
 *
 * The buffer is a list of blocks (BLOCK bytes, or one exactly sized block
 * for an element larger than that), so appending never moves bytes already
 * queued and the pending bytes map straight onto iovecs for writev.  Up to
 * MAX_SPARES drained blocks are kept, so a connection in steady state does
 * not allocate.  The limit counts pending bytes (appended, not yet consumed);
 * an element that would cross it is refused whole and the buffer is marked
 * overflowed, which the server answers by closing the client as Redis does
 * at client-output-buffer-limit.
 *
 * Every appender writes one complete element or nothing: it computes the
 * element's size, reserves it in one piece, then fills it.
 */
#include "resp_codec.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "lattice/alloc.h"

#define BLOCK (16 * 1024)
#define MAX_SPARES 4 /* drained blocks kept per connection (64 KiB) */

struct block {
    struct block *next;
    size_t cap, start, end; /* pending bytes are data[start, end) */
    char data[];
};

struct lattice_resp_out {
    struct block *head, *tail;
    struct block *spare;  /* drained BLOCK-sized blocks, linked by next */
    int nspare;
    size_t pending;
    size_t limit; /* 0 = unlimited */
    int proto;    /* 2 or 3 */
    int overflowed;
    int muted;    /* CLIENT REPLY OFF/SKIP: appenders drop what they are given */
};

lattice_resp_out *lattice_resp_out_new(size_t limit, int proto)
{
    lattice_resp_out *o = lt_calloc(1, sizeof(*o));
    if (!o) return NULL;
    o->limit = limit;
    o->proto = proto == 3 ? 3 : 2;
    return o;
}

void lattice_resp_out_free(lattice_resp_out *o)
{
    if (!o) return;
    for (struct block *b = o->head, *n; b; b = n) {
        n = b->next;
        lt_free(b);
    }
    for (struct block *b = o->spare, *n; b; b = n) {
        n = b->next;
        lt_free(b);
    }
    lt_free(o);
}

void lattice_resp_out_set_proto(lattice_resp_out *o, int proto) { o->proto = proto == 3 ? 3 : 2; }
int lattice_resp_out_proto(const lattice_resp_out *o) { return o->proto; }
void lattice_resp_out_set_limit(lattice_resp_out *o, size_t limit) { o->limit = limit; }
size_t lattice_resp_out_pending(const lattice_resp_out *o) { return o->pending; }
int lattice_resp_out_overflowed(const lattice_resp_out *o) { return o->overflowed; }
void lattice_resp_out_set_muted(lattice_resp_out *o, int muted) { o->muted = muted; }

void lattice_resp_out_clear_overflow(lattice_resp_out *o)
{
    if (!o->limit || o->pending <= o->limit) o->overflowed = 0;
}

int lattice_resp_out_iov(const lattice_resp_out *o, struct iovec *iov, int max)
{
    int n = 0;
    for (const struct block *b = o->head; b && n < max; b = b->next) {
        if (b->end == b->start) continue;
        iov[n].iov_base = (void *)(b->data + b->start);
        iov[n].iov_len = b->end - b->start;
        n++;
    }
    return n;
}

size_t lattice_resp_out_peek(const lattice_resp_out *o, void *dst, size_t cap)
{
    size_t k = 0;
    for (const struct block *b = o->head; b && k < cap; b = b->next) {
        size_t n = b->end - b->start;
        if (n > cap - k) n = cap - k;
        memcpy((char *)dst + k, b->data + b->start, n);
        k += n;
    }
    return k;
}

void lattice_resp_out_consume(lattice_resp_out *o, size_t n)
{
    if (n > o->pending) n = o->pending;
    o->pending -= n;
    while (o->head) {
        struct block *b = o->head;
        size_t have = b->end - b->start;
        if (n < have) {
            b->start += n;
            return;
        }
        n -= have;
        if (b == o->tail) { /* keep the tail for the next appends */
            b->start = b->end = 0;
            return;
        }
        o->head = b->next;
        if (o->nspare < MAX_SPARES && b->cap == BLOCK) {
            b->next = o->spare;
            o->spare = b;
            o->nspare++;
        } else {
            lt_free(b);
        }
    }
}

/* Room for n contiguous bytes at the tail, or NULL with *st set. */
static char *reserve(lattice_resp_out *o, size_t n, lattice_status *st)
{
    if (o->limit && (n > o->limit || o->pending > o->limit - n)) {
        o->overflowed = 1;
        *st = LATTICE_ERR_TOO_LARGE;
        return NULL;
    }
    struct block *t = o->tail;
    if (t && t->cap - t->end >= n) return t->data + t->end;
    struct block *b;
    if (n <= BLOCK && o->spare) {
        b = o->spare;
        o->spare = b->next;
        o->nspare--;
    } else {
        size_t cap = n > BLOCK ? n : BLOCK;
        b = lt_malloc(sizeof(*b) + cap);
        if (!b) {
            *st = LATTICE_ERR_NOMEM;
            return NULL;
        }
        b->cap = cap;
    }
    b->next = NULL;
    b->start = b->end = 0;
    if (t) {
        t->next = b;
    } else {
        o->head = b;
    }
    o->tail = b;
    return b->data;
}

static void commit(lattice_resp_out *o, size_t n)
{
    o->tail->end += n;
    o->pending += n;
}

/* Append prefix, body and CRLF as one element; body is copied with CR/LF
 * made spaces when sanitize is set. */
static lattice_status put(lattice_resp_out *o, const char *pre, size_t pn, const void *body,
                          size_t bn, int crlf, int sanitize)
{
    lattice_status st = LATTICE_OK;
    if (o->muted) return LATTICE_OK;
    size_t n = pn + bn + (crlf ? 2 : 0);
    char *d = reserve(o, n, &st);
    if (!d) return st;
    memcpy(d, pre, pn);
    if (bn) memcpy(d + pn, body, bn);
    if (sanitize)
        for (size_t i = pn; i < pn + bn; i++)
            if (d[i] == '\r' || d[i] == '\n') d[i] = ' ';
    if (crlf) memcpy(d + pn + bn, "\r\n", 2);
    commit(o, n);
    return LATTICE_OK;
}

/* A header such as "*3\r\n" or "$5\r\n" into buf; returns its length. */
static size_t header(char *buf, char type, long long v)
{
    buf[0] = type;
    size_t k = 1 + lattice_resp_ll2string(buf + 1, v);
    buf[k++] = '\r';
    buf[k++] = '\n';
    return k;
}

lattice_status lattice_resp_add_raw(lattice_resp_out *o, const void *p, size_t n)
{
    return put(o, "", 0, p, n, 0, 0);
}

lattice_status lattice_resp_add_simple(lattice_resp_out *o, const char *s, size_t n)
{
    return put(o, "+", 1, s, n, 1, 1);
}

lattice_status lattice_resp_add_error(lattice_resp_out *o, const char *msg, size_t n)
{
    return put(o, "-", 1, msg, n, 1, 1);
}

lattice_status lattice_resp_add_int(lattice_resp_out *o, long long v)
{
    char h[32];
    return put(o, h, header(h, ':', v), NULL, 0, 0, 0);
}

lattice_status lattice_resp_add_bulk(lattice_resp_out *o, const void *p, size_t n)
{
    char h[32];
    return put(o, h, header(h, '$', (long long)n), p, n, 1, 0);
}

lattice_status lattice_resp_add_null(lattice_resp_out *o)
{
    return o->proto == 3 ? put(o, "_\r\n", 3, NULL, 0, 0, 0) : put(o, "$-1\r\n", 5, NULL, 0, 0, 0);
}

lattice_status lattice_resp_add_null_array(lattice_resp_out *o)
{
    return o->proto == 3 ? put(o, "_\r\n", 3, NULL, 0, 0, 0) : put(o, "*-1\r\n", 5, NULL, 0, 0, 0);
}

lattice_status lattice_resp_add_array(lattice_resp_out *o, size_t n)
{
    char h[32];
    return put(o, h, header(h, '*', (long long)n), NULL, 0, 0, 0);
}

lattice_status lattice_resp_add_map(lattice_resp_out *o, size_t pairs)
{
    char h[32];
    size_t k = o->proto == 3 ? header(h, '%', (long long)pairs) : header(h, '*', (long long)pairs * 2);
    return put(o, h, k, NULL, 0, 0, 0);
}

lattice_status lattice_resp_add_set(lattice_resp_out *o, size_t n)
{
    char h[32];
    return put(o, h, header(h, o->proto == 3 ? '~' : '*', (long long)n), NULL, 0, 0, 0);
}

lattice_status lattice_resp_add_double(lattice_resp_out *o, double d)
{
    /* Redis's addReplyDouble: "%.17g", with inf spelled out explicitly. */
    char txt[64];
    int n = isinf(d) ? snprintf(txt, sizeof(txt), "%s", d > 0 ? "inf" : "-inf")
                     : snprintf(txt, sizeof(txt), "%.17g", d);
    if (o->proto == 3) return put(o, ",", 1, txt, (size_t)n, 1, 0);
    return lattice_resp_add_bulk(o, txt, (size_t)n);
}

lattice_status lattice_resp_add_bool(lattice_resp_out *o, int b)
{
    if (o->proto == 3) return put(o, b ? "#t\r\n" : "#f\r\n", 4, NULL, 0, 0, 0);
    return put(o, b ? ":1\r\n" : ":0\r\n", 4, NULL, 0, 0, 0);
}

lattice_status lattice_resp_add_verbatim(lattice_resp_out *o, const char *fmt, const void *p, size_t n)
{
    if (o->proto != 3) return lattice_resp_add_bulk(o, p, n);
    char h[40];
    size_t k = header(h, '=', (long long)n + 4);
    size_t f = strnlen(fmt, 3);
    memcpy(h + k, fmt, f);
    memset(h + k + f, ' ', 3 - f);
    h[k + 3] = ':';
    return put(o, h, k + 4, p, n, 1, 0);
}

lattice_status lattice_resp_add_command(lattice_resp_out *o, size_t argc, const lattice_resp_arg *argv)
{
    /* Size the whole multibulk first so it is appended whole or not at all. */
    char h[32];
    size_t total = header(h, '*', (long long)argc);
    for (size_t i = 0; i < argc; i++) total += header(h, '$', (long long)argv[i].len) + argv[i].len + 2;
    lattice_status st = LATTICE_OK;
    if (o->muted) return LATTICE_OK;
    char *d = reserve(o, total, &st);
    if (!d) return st;
    size_t k = header(d, '*', (long long)argc);
    for (size_t i = 0; i < argc; i++) {
        k += header(d + k, '$', (long long)argv[i].len);
        if (argv[i].len) memcpy(d + k, argv[i].ptr, argv[i].len);
        k += argv[i].len;
        d[k++] = '\r';
        d[k++] = '\n';
    }
    commit(o, total);
    return LATTICE_OK;
}
