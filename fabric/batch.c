/*
 * batch: outgoing batches and their frames (fabric.h).  One Batch per
 * destination per loop iteration, so many requests are in flight at once
 * and the sender never waits for an answer; split into frames of about
 * FAB_CHUNK_BYTES so a large value never nears the receiver's frame cap.
 */
#include <string.h>

#include "lattice/alloc.h"
#include "fabric.h"

/* What one message costs in a frame, near enough: its bytes plus framing. */
static size_t req_cost(const Latdata__Req *r) { return r->key.len + r->value.len + 64; }
static size_t resp_cost(const Latdata__Resp *r) { return r->value.len + 128 * r->n_stats + 64; }

size_t fab_chunk_reqs(Latdata__Req *const *r, size_t n, size_t chunk)
{
    size_t k = 0, bytes = 0;
    while (k < n && (k == 0 || bytes + req_cost(r[k]) <= chunk)) bytes += req_cost(r[k]), k++;
    return k;
}

size_t fab_chunk_resps(Latdata__Resp *const *r, size_t n, size_t chunk)
{
    size_t k = 0, bytes = 0;
    while (k < n && (k == 0 || bytes + resp_cost(r[k]) <= chunk)) bytes += resp_cost(r[k]), k++;
    return k;
}

lattice_status fab_reqs_push(fab_reqs *q, Latdata__Req *r)
{
    if (q->n == q->cap) {
        size_t cap = q->cap ? q->cap * 2 : 64;
        Latdata__Req **v = lt_realloc(q->v, cap * sizeof *v);
        if (!v) {
            lt_free(r);
            return LATTICE_ERR_NOMEM;
        }
        q->v = v;
        q->cap = cap;
    }
    q->v[q->n++] = r;
    return LATTICE_OK;
}

void fab_reqs_flush(fab_reqs *q, const char *to, uint32_t proto, const Latdata__Meta *meta, bool one,
                    size_t chunk, fab_frame_fn send, void *arg)
{
    for (size_t at = 0; at < q->n || one;) {
        Latdata__Batch b = LATDATA__BATCH__INIT;
        b.proto = proto;
        b.to = (char *)to; /* the incarnation these are meant for */
        b.reqs = q->v + at;
        b.n_reqs = fab_chunk_reqs(q->v + at, q->n - at, chunk);
        if (meta) b.meta = (Latdata__Meta *)meta;
        send(arg, &b);
        meta = NULL;
        one = false;
        at += b.n_reqs;
    }
    fab_reqs_clear(q);
}

void fab_reqs_clear(fab_reqs *q)
{
    for (size_t i = 0; i < q->n; i++) lt_free(q->v[i]);
    q->n = 0;
}

void fab_reqs_free(fab_reqs *q)
{
    fab_reqs_clear(q);
    lt_free(q->v);
    q->v = NULL;
    q->cap = 0;
}

void fab_resps_flush(Latdata__Resp *const *r, size_t n, uint32_t proto, const Latdata__Meta *meta, size_t chunk,
                     fab_frame_fn send, void *arg)
{
    for (size_t at = 0, first = 1; at < n || first; first = 0) {
        Latdata__Batch b = LATDATA__BATCH__INIT;
        b.proto = proto;
        b.resps = (Latdata__Resp **)r + at;
        b.n_resps = fab_chunk_resps(r + at, n - at, chunk);
        if (first && meta) b.meta = (Latdata__Meta *)meta;
        send(arg, &b);
        at += b.n_resps;
    }
}

/* ------------------------------------------------------------- reply boxes */

static fab_reply_box *box_for(fab_replies *r, const uint8_t *ident, size_t len)
{
    for (size_t i = 0; i < r->n; i++)
        if (r->boxes[i].ident_len == len && memcmp(r->boxes[i].ident, ident, len) == 0) return &r->boxes[i];
    if (len > sizeof r->boxes->ident) return NULL;
    if (r->n == r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 8;
        fab_reply_box *b = lt_realloc(r->boxes, cap * sizeof *b);
        if (!b) return NULL;
        memset(b + r->cap, 0, (cap - r->cap) * sizeof *b);
        r->boxes = b;
        r->cap = cap;
    }
    fab_reply_box *b = &r->boxes[r->n++];
    memcpy(b->ident, ident, len);
    b->ident_len = len;
    b->n = 0;
    b->with_meta = false;
    return b;
}

static void resp_free(Latdata__Resp *resp)
{
    for (size_t s = 0; s < resp->n_stats; s++) lt_free(resp->stats[s]);
    lt_free(resp->stats);
    lt_free(resp);
}

lattice_status fab_replies_add(fab_replies *r, const uint8_t *ident, size_t len, Latdata__Resp *resp, bool with_meta)
{
    fab_reply_box *b = box_for(r, ident, len);
    if (b && b->n == b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 64;
        Latdata__Resp **x = lt_realloc(b->out, cap * sizeof *x);
        if (x) {
            b->out = x;
            b->cap = cap;
        }
    }
    if (!b || b->n == b->cap) {
        resp_free(resp);
        return LATTICE_ERR_NOMEM;
    }
    b->out[b->n++] = resp;
    if (with_meta) b->with_meta = true;
    return LATTICE_OK;
}

lattice_status fab_replies_meta(fab_replies *r, const uint8_t *ident, size_t len)
{
    fab_reply_box *b = box_for(r, ident, len);
    if (!b) return LATTICE_ERR_NOMEM;
    b->with_meta = true;
    return LATTICE_OK;
}

typedef struct frame_to {
    fab_frames *f;
    link_conn *c;
} frame_to;

static void send_to(void *arg, const Latdata__Batch *b)
{
    frame_to *t = arg;
    fab_send(t->f, t->c, b);
}

void fab_replies_flush(fab_replies *r, link_srv *srv, const Latdata__Meta *meta, fab_frames *f)
{
    for (size_t i = 0; i < r->n; i++) {
        fab_reply_box *b = &r->boxes[i];
        if (!b->n && !b->with_meta) continue;
        link_conn *c = srv ? link_srv_find(srv, b->ident, b->ident_len) : NULL;
        if (!c && f->count[FAB_DROP_SEND]) ++*f->count[FAB_DROP_SEND];
        frame_to t = {f, c};
        if (c) /* a push alone: one frame */
            fab_resps_flush(b->out, b->n, f->proto, b->with_meta ? meta : NULL, FAB_CHUNK_BYTES, send_to, &t);
        for (size_t k = 0; k < b->n; k++) resp_free(b->out[k]);
        b->n = 0;
        b->with_meta = false;
    }
    r->n = 0;
}

void fab_replies_free(fab_replies *r)
{
    for (size_t i = 0; i < r->cap; i++) {
        for (size_t k = 0; k < r->boxes[i].n; k++) resp_free(r->boxes[i].out[k]);
        lt_free(r->boxes[i].out);
    }
    lt_free(r->boxes);
    memset(r, 0, sizeof *r);
}
