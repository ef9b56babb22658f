/*
 * batch: outgoing batches and their frames (fabric.h).  One Batch per
 * destination per loop iteration, so many requests are in flight at once
 * and the sender never waits for an answer; split into frames of about
 * FAB_CHUNK_BYTES so a large value never nears the receiver's frame cap.
 */
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
