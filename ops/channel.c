/*
 * channel: the bottom of the operation path - the data channel's sockets
 * and frames, the pending-request table, the per-peer and per-identity
 * outgoing batches, and the acknowledgement of an op (data thread, except
 * chan_enqueue).
 *
 * The transport is link.c's TCP connections: requests leave on our
 * connection to the peer's data port (peer.dealer) and their responses come
 * back on it; requests from others arrive on the connections our data port
 * accepted and are answered on the one each came in on (an origin's ident
 * names it).  Everything bound for one peer within one loop iteration
 * leaves as one Batch (split into frames of about CHUNK_BYTES), so many
 * requests are in flight at once and the thread never waits for an answer.
 * Frames are checked before use: size, HMAC (when there is a cluster
 * secret), protocol number, no unknown fields; anything else is dropped and
 * counted, and the connection it came on is closed.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>
#include <urcu.h>
#include <urcu/wfcqueue.h>

#include "cache.pb-c.h"
#include "base/base.h"
#include "lattice/alloc.h"
#include "lattice/log.h"
#include "fabric/fabric.h"
#include "ops_int.h"

#define CHUNK_BYTES (4u << 20)
#define PEND_BUCKETS 65536u

static __thread lattice_ops *on_data_thread; /* the data thread's own lattice_ops */

void chan_enter_thread(lattice_ops *d) { on_data_thread = d; }
bool chan_on_data_thread(const lattice_ops *d) { return on_data_thread == d; }

/* ------------------------------------------------------------ pending table */

static void pend_link(lattice_ops *d, pend *p)
{
    uint32_t b = (uint32_t)(p->id & (PEND_BUCKETS - 1));
    p->hnext = d->buckets[b];
    d->buckets[b] = p;
    p->next = d->all;
    p->prev = NULL;
    if (d->all) d->all->prev = p;
    d->all = p;
    d->n_pending++;
}

pend *chan_pend_take(lattice_ops *d, uint64_t id)
{
    uint32_t b = (uint32_t)(id & (PEND_BUCKETS - 1));
    for (pend **pp = &d->buckets[b]; *pp; pp = &(*pp)->hnext) {
        if ((*pp)->id != id) continue;
        pend *p = *pp;
        *pp = p->hnext;
        if (p->prev) p->prev->next = p->next;
        else d->all = p->next;
        if (p->next) p->next->prev = p->prev;
        d->n_pending--;
        return p;
    }
    return NULL;
}

pend *chan_pend_new(lattice_ops *d, pend_settle_fn settle, const peer *target)
{
    pend *p = lt_calloc(1, sizeof *p);
    if (!p) return NULL;
    p->id = ++d->next_id;
    p->settle = settle;
    p->deadline_ms = lt_mono_ms() + (uint64_t)d->op_timeout_ms;
    snprintf(p->target, sizeof p->target, "%s", target->m.id);
    pend_link(d, p);
    return p;
}

/* ------------------------------------------------------------------- peers */

static void req_free(Latdata__Req *r) { lt_free(r); }

/* A request with its own copies of cache, key, value and origin (one block;
 * origin NULL = none). */
Latdata__Req *chan_req_new_from(int kind, const char *cache, const void *key, size_t klen, const void *val,
                                size_t vlen, const char *origin)
{
    size_t cl = cache ? strlen(cache) + 1 : 1, ol = origin ? strlen(origin) + 1 : 0;
    Latdata__Req *r = lt_malloc(sizeof *r + cl + klen + vlen + ol);
    if (!r) return NULL;
    latdata__req__init(r);
    char *b = (char *)(r + 1);
    r->kind = (uint32_t)kind;
    memcpy(b, cache ? cache : "", cl);
    r->cache = b;
    b += cl;
    if (klen) memcpy(b, key, klen);
    r->key.data = (uint8_t *)b;
    r->key.len = klen;
    b += klen;
    if (vlen) memcpy(b, val, vlen);
    r->value.data = (uint8_t *)b;
    r->value.len = vlen;
    b += vlen;
    if (ol) {
        memcpy(b, origin, ol);
        r->origin = b;
    }
    return r;
}

Latdata__Req *chan_req_dup(const Latdata__Req *q)
{
    Latdata__Req *r = chan_req_new_from((int)q->kind, q->cache, q->key.data, q->key.len, q->value.data, q->value.len,
                                        q->origin);
    if (!r) return NULL;
    Latdata__Req keep = *r; /* the copies of the strings and bytes */
    *r = *q;
    r->cache = keep.cache;
    r->key = keep.key;
    r->value = keep.value;
    r->origin = keep.origin;
    return r;
}

Latdata__Req *chan_req_new(int kind, const char *cache, const void *key, size_t klen, const void *val,
                           size_t vlen)
{
    return chan_req_new_from(kind, cache, key, klen, val, vlen, NULL);
}

lattice_status chan_send(lattice_ops *d, peer *p, Latdata__Req *r)
{
    if (p->n_out == p->cap_out) {
        size_t cap = p->cap_out ? p->cap_out * 2 : 64;
        Latdata__Req **o = lt_realloc(p->out, cap * sizeof *o);
        if (!o) {
            req_free(r);
            return LATTICE_ERR_NOMEM;
        }
        p->out = o;
        p->cap_out = cap;
    }
    p->out[p->n_out++] = r;
    if (!p->dirty) {
        p->dirty = true;
        d->dirty[d->n_dirty++] = p;
    }
    return LATTICE_OK;
}

/* A send the transport refused (queue full, no connection): counted; the
 * pending request's deadline and the retry layer resend. */
static void send_frame(lattice_ops *d, link_conn *c, const Latdata__Batch *b)
{
    uint64_t now = lt_mono_ms();
    if (link_send(c, d->have_key ? d->key : NULL, b, now) == LATTICE_OK) return;
    d->send_failed++;
    if (d->drop_logged_ms[DROP_SEND] && now - d->drop_logged_ms[DROP_SEND] < 1000) return;
    d->drop_logged_ms[DROP_SEND] = now;
    if (c->fd < 0)
        LT_LOG(LT_WARN, "data", "dropped an outgoing data-channel frame to %s: not connected (connecting again after a backoff) (%llu so far)",
               c->addr, (unsigned long long)d->send_failed);
    else
        LT_LOG(LT_WARN, "data", "dropped an outgoing data-channel frame%s%s: its connection has %u MiB queued, the bound (%llu so far)",
               c->dial ? " to " : "", c->dial ? c->addr : "", LINK_QUEUE_BYTES >> 20, (unsigned long long)d->send_failed);
}

/* How many of items[0..n) fit one frame of about CHUNK_BYTES (at least 1):
 * large values are split over several messages so none nears
 * DATA_MAX_FRAME, which a receiver drops. */
static size_t chunk_req(Latdata__Req *const *r, size_t n)
{
    size_t k = 0, bytes = 0;
    while (k < n && (k == 0 || bytes + r[k]->key.len + r[k]->value.len + 64 <= CHUNK_BYTES))
        bytes += r[k]->key.len + r[k]->value.len + 64, k++;
    return k;
}

static size_t chunk_resp(Latdata__Resp *const *r, size_t n)
{
    size_t k = 0, bytes = 0;
    while (k < n && (k == 0 || bytes + r[k]->value.len + 128 * r[k]->n_stats + 64 <= CHUNK_BYTES))
        bytes += r[k]->value.len + 128 * r[k]->n_stats + 64, k++;
    return k;
}

static void flush_peer(lattice_ops *d, peer *p)
{
    p->dirty = false;
    if (!p->n_out && !p->push_meta) return;
    for (size_t at = 0; p->dealer && (at < p->n_out || p->push_meta);) {
        Latdata__Batch b = LATDATA__BATCH__INIT;
        b.proto = LATTICE_DATA_PROTO;
        b.to = p->m.id; /* the incarnation these are meant for (ops_not_meant_here) */
        b.reqs = p->out + at;
        b.n_reqs = chunk_req(p->out + at, p->n_out - at);
        const Latdata__Meta *meta = lattice_meta_message(d->meta);
        if (p->push_meta && meta) b.meta = (Latdata__Meta *)meta;
        send_frame(d, p->dealer, &b); /* a lost send is retried by the ops' deadlines */
        p->push_meta = false;
        at += b.n_reqs;
    }
    for (size_t i = 0; i < p->n_out; i++) req_free(p->out[i]);
    p->n_out = 0;
}

void chan_push_meta(lattice_ops *d, peer *p)
{
    p->push_meta = true;
    if (!p->dirty) {
        p->dirty = true;
        d->dirty[d->n_dirty++] = p;
    }
}

static reply_box *box_for(lattice_ops *d, const uint8_t *ident, size_t len)
{
    for (size_t i = 0; i < d->n_boxes; i++)
        if (d->boxes[i].ident_len == len && memcmp(d->boxes[i].ident, ident, len) == 0) return &d->boxes[i];
    if (d->n_boxes == d->cap_boxes) {
        size_t cap = d->cap_boxes ? d->cap_boxes * 2 : 8;
        reply_box *b = lt_realloc(d->boxes, cap * sizeof *b);
        if (!b) return NULL;
        memset(b + d->cap_boxes, 0, (cap - d->cap_boxes) * sizeof *b);
        d->boxes = b;
        d->cap_boxes = cap;
    }
    reply_box *b = &d->boxes[d->n_boxes++];
    memcpy(b->ident, ident, len);
    b->ident_len = len;
    b->n = 0;
    b->with_meta = false;
    return b;
}

/* Queue a response to the connection o names.  value/stats are copied. */
void chan_reply(lattice_ops *d, const origin *o, const lattice_op_result *r, Latdata__NodeCacheStats **stats,
                size_t n_stats, bool with_meta)
{
    reply_box *b = box_for(d, o->ident, o->ident_len);
    if (!b) return;
    if (b->n == b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 64;
        Latdata__Resp **x = lt_realloc(b->out, cap * sizeof *x);
        if (!x) return;
        b->out = x;
        b->cap = cap;
    }
    Latdata__Resp *resp = lt_malloc(sizeof *resp + r->value_len);
    if (!resp) return;
    latdata__resp__init(resp);
    resp->id = o->rid;
    resp->status = r->status;
    resp->num = r->num;
    resp->flags = r->flags;
    if (r->value_len) memcpy(resp + 1, r->value, r->value_len);
    resp->value.data = (uint8_t *)(resp + 1);
    resp->value.len = r->value_len;
    resp->stats = stats;
    resp->n_stats = n_stats;
    resp->node = d->self_id;
    b->out[b->n++] = resp;
    if (with_meta) b->with_meta = true;
}

void chan_push_meta_back(lattice_ops *d, const uint8_t *ident, size_t len)
{
    reply_box *b = box_for(d, ident, len);
    if (b) b->with_meta = true;
}

static void flush_boxes(lattice_ops *d)
{
    for (size_t i = 0; i < d->n_boxes; i++) {
        reply_box *b = &d->boxes[i];
        if (!b->n && !b->with_meta) continue;
        /* The connection the requests came on; gone meanwhile: the asker
         * lost them with it (its deadlines resend). */
        link_conn *c = link_srv_find(d->srv, b->ident, b->ident_len);
        if (!c) d->send_failed++; /* not logged: a peer that left or an asker that gave up */
        for (size_t at = 0, first = 1; c && (at < b->n || first); first = 0) { /* a push alone: one frame */
            Latdata__Batch batch = LATDATA__BATCH__INIT;
            batch.proto = LATTICE_DATA_PROTO;
            batch.resps = b->out + at;
            batch.n_resps = chunk_resp(b->out + at, b->n - at);
            const Latdata__Meta *meta = lattice_meta_message(d->meta);
            if (first && b->with_meta && meta) batch.meta = (Latdata__Meta *)meta;
            send_frame(d, c, &batch);
            at += batch.n_resps;
        }
        for (size_t k = 0; k < b->n; k++) {
            for (size_t s = 0; s < b->out[k]->n_stats; s++) lt_free(b->out[k]->stats[s]);
            lt_free(b->out[k]->stats);
            lt_free(b->out[k]);
        }
        b->n = 0;
        b->with_meta = false;
    }
    d->n_boxes = 0;
}

void chan_flush(lattice_ops *d)
{
    for (size_t i = 0; i < d->n_dirty; i++) flush_peer(d, d->dirty[i]);
    d->n_dirty = 0;
    flush_boxes(d);
}

peer *chan_peer_by_id(lattice_ops *d, const char *id)
{
    for (size_t i = 0; i < d->n_peers; i++)
        if (strcmp(d->peers[i]->m.id, id) == 0) return d->peers[i];
    return NULL;
}

peer *chan_peer_by_cid(lattice_ops *d, const char *cid)
{
    for (size_t i = 0; i < d->n_peers; i++)
        if (strcmp(d->peers[i]->m.cid, cid) == 0) return d->peers[i];
    return NULL;
}

void chan_peer_free(peer *p)
{
    for (size_t i = 0; i < p->n_out; i++) req_free(p->out[i]);
    lt_free(p->out);
    link_free(p->dealer);
    lt_free(p);
}

peer *chan_peer_new(const lattice_member *m, bool self)
{
    peer *p = lt_calloc(1, sizeof *p);
    if (!p) return NULL;
    snprintf(p->m.id, sizeof p->m.id, "%s", m->id);
    snprintf(p->m.cid, sizeof p->m.cid, "%s", m->consistent_id);
    p->m.self = self;
    p->m.server = m->role == LATTICE_ROLE_SERVER;
    const char *addr = lattice_member_attr(m, "data_addr");
    if (addr) snprintf(p->addr, sizeof p->addr, "%s", addr);
    if (!self && addr && p->m.server) {
        p->dealer = link_dial(addr); /* connects at the first send */
        if (!p->dealer) LT_LOG(LT_WARN, "data", "cannot reach %s's data port: not an address: %s", p->m.id, addr);
    }
    return p;
}

/* ------------------------------------------------------------- completion */

void chan_complete_local(lattice_ops *d, opx *o, const lattice_op_result *r)
{
    (void)d;
    o->fn(o->arg, o->index, r);
    opx_free(o);
}

void chan_complete(lattice_ops *d, const origin *org, const lattice_op_result *r)
{
    if (!wal_hold(d, org, r)) chan_complete_now(d, org, r); /* else: once the log is durable past it (wal.c) */
}

void chan_complete_now(lattice_ops *d, const origin *org, const lattice_op_result *r)
{
    if (org->local) chan_complete_local(d, org->local, r);
    else if (org->ident_len) chan_reply(d, org, r, NULL, 0, false); /* else: no issuer (an eviction) */
}

/* A frame that failed the checks: counted, and logged at most once a
 * second per reason - repeated bad input from a peer or an outside asker
 * must not flood the log, but its first occurrence is always there. */
void chan_dropped(lattice_ops *d, int reason, const char *why)
{
    uint64_t *counter = reason == DROP_OVERSIZED ? &d->oversized : reason == DROP_AUTH ? &d->auth_failed : &d->malformed;
    (*counter)++;
    uint64_t now = lt_mono_ms();
    if (d->drop_logged_ms[reason] && now - d->drop_logged_ms[reason] < 1000) return;
    d->drop_logged_ms[reason] = now;
    LT_LOG(LT_WARN, "data", "dropped %s and closed its data connection (%llu so far)", why, (unsigned long long)*counter);
}

Latdata__Batch *chan_unpack_batch(lattice_ops *d, const uint8_t *msg, size_t len, const uint8_t *mac, size_t mac_len)
{
    /* base/'s frame layer: size, MAC, decode, unknown fields at any depth. */
    ProtobufCMessage *m = NULL;
    Latdata__Batch *b = NULL;
    switch (lt_frame_unpack(&latdata__batch__descriptor, msg, len, mac, mac_len, d->have_key ? d->key : NULL,
                            DATA_MAX_FRAME, &m)) {
    case LT_FRAME_OK: b = (Latdata__Batch *)m; break;
    case LT_FRAME_OVERSIZED: chan_dropped(d, DROP_OVERSIZED, "a data-channel frame above the frame cap"); break;
    case LT_FRAME_AUTH: chan_dropped(d, DROP_AUTH, "a data-channel frame that failed authentication (check --secret-file)"); break;
    case LT_FRAME_MALFORMED: chan_dropped(d, DROP_MALFORMED, "a data-channel frame that does not decode"); break;
    }
    if (b && b->proto != LATTICE_DATA_PROTO) {
        lt_frame_free(m);
        b = NULL;
        chan_dropped(d, DROP_MALFORMED, "a data-channel frame of another data protocol version");
    }
    return b;
}

void chan_batch_free(Latdata__Batch *b) { lt_frame_free(&b->base); }

void chan_release_pending(lattice_ops *d, bool all)
{
    uint64_t now = lt_mono_ms();
    pend *p = d->all;
    while (p) {
        pend *next = p->next;
        bool gone = all || !chan_peer_by_id(d, p->target);
        if (gone || now >= p->deadline_ms) {
            chan_pend_take(d, p->id);
            p->settle(d, p, NULL);
            lt_free(p);
        }
        p = next;
    }
}

/* Any thread: hand an op to the data thread (chan_push), then wake it once
 * for everything pushed (chan_wake): a submit of n ops costs one eventfd
 * write, not n - the IO thread of a RESP endpoint paid one system call per
 * SET for it (docs/BENCHMARKS.md, #12 write path).  The wake comes after
 * the pushes, and the data thread reads the eventfd before it drains the
 * inbox, so no pushed op waits for a later wake-up.  A callback submitting
 * its next op runs on the data thread itself: no eventfd write is needed
 * there, only the note that the inbox is not empty, so the loop polls
 * without waiting. */
lattice_status chan_push(lattice_ops *d, opx *o)
{
    if (!atomic_load(&d->accepting)) return LATTICE_ERR_STOPPED;
    cds_wfcq_node_init(&o->qnode);
    cds_wfcq_enqueue(&d->qhead, &d->qtail, &o->qnode);
    return LATTICE_OK;
}

lattice_status chan_wake(lattice_ops *d)
{
    if (on_data_thread == d) {
        d->inbox_pending = true;
        return LATTICE_OK;
    }
    uint64_t one = 1;
    if (write(d->efd, &one, sizeof one) < 0 && errno != EAGAIN) return LATTICE_ERR_IO;
    return LATTICE_OK;
}

lattice_status chan_enqueue(lattice_ops *d, opx *o)
{
    lattice_status st = chan_push(d, o);
    return st == LATTICE_OK ? chan_wake(d) : st;
}
