/*
 * channel: the bottom of the operation path - what the data channel means
 * to an op: its peers and their requests, an op's result as a response to
 * its asker, the pending requests of ops and the acknowledgement of an op,
 * and the hand-off of submitted ops to the data thread (data thread,
 * except chan_enqueue).
 *
 * The transport is fabric/'s: requests leave on our TCP connection to the
 * peer's data port (peer.dealer) and their responses come back on it;
 * requests from others arrive on the connections our data port accepted
 * and are answered on the one each came in on (an origin's ident names
 * it).  fabric/ batches what is bound for one peer or one asker within one
 * loop iteration and splits it into frames (batch.c), checks every frame
 * received and counts what it drops (frames.c), and keeps the table of
 * requests waiting for an answer (pending.c); this file says which peer,
 * which asker and which op.
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

static __thread lattice_ops *on_data_thread; /* the data thread's own lattice_ops */

void chan_enter_thread(lattice_ops *d) { on_data_thread = d; }
bool chan_on_data_thread(const lattice_ops *d) { return on_data_thread == d; }

/* ------------------------------------------------------------ pending table */

pend *chan_pend_take(lattice_ops *d, uint64_t id) { return fab_pending_take(d->pending, id); }

pend *chan_pend_new(lattice_ops *d, pend_settle_fn settle, const peer *target)
{
    pend *p = lt_calloc(1, sizeof *p);
    if (!p) return NULL;
    p->settle = settle;
    snprintf(p->target, sizeof p->target, "%s", target->m.id);
    p->id = fab_pending_add(d->pending, p, lt_mono_ms() + (uint64_t)d->op_timeout_ms);
    if (!p->id) {
        lt_free(p);
        return NULL;
    }
    return p;
}

void chan_pend_deadline(lattice_ops *d, pend *p, uint64_t deadline_ms)
{
    fab_pending_set_deadline(d->pending, p->id, deadline_ms);
}

/* ------------------------------------------------------------------- peers */

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
    lattice_status st = fab_reqs_push(&p->out, r);
    if (st != LATTICE_OK) return st;
    if (!p->dirty) {
        p->dirty = true;
        d->dirty[d->n_dirty++] = p;
    }
    return LATTICE_OK;
}

/* One frame to a connection; a send the transport refused (queue full, no
 * connection) is counted - the pending request's deadline and the retry
 * layer resend. */
typedef struct frame_to {
    lattice_ops *d;
    link_conn *c;
} frame_to;

static void send_frame(void *arg, const Latdata__Batch *b)
{
    frame_to *t = arg;
    fab_send(&t->d->frames, t->c, b);
}

static void flush_peer(lattice_ops *d, peer *p)
{
    p->dirty = false;
    if (!p->out.n && !p->push_meta) return;
    if (!p->dealer) { /* nowhere to send: the ops' deadlines resend */
        fab_reqs_clear(&p->out);
        return;
    }
    frame_to t = {d, p->dealer};
    const Latdata__Meta *meta = p->push_meta ? lattice_meta_message(d->meta) : NULL;
    /* to: the incarnation these are meant for (ops_not_meant_here) */
    fab_reqs_flush(&p->out, p->m.id, LATTICE_DATA_PROTO, meta, p->push_meta, FAB_CHUNK_BYTES, send_frame, &t);
    p->push_meta = false;
}

void chan_push_meta(lattice_ops *d, peer *p)
{
    p->push_meta = true;
    if (!p->dirty) {
        p->dirty = true;
        d->dirty[d->n_dirty++] = p;
    }
}

/* Queue a response to the connection o names (fabric/batch.c's reply boxes).
 * value is copied; stats are owned (freed with the response, or at once on
 * NOMEM). */
void chan_reply(lattice_ops *d, const origin *o, const lattice_op_result *r, Latdata__NodeCacheStats **stats,
                size_t n_stats, bool with_meta)
{
    Latdata__Resp *resp = lt_malloc(sizeof *resp + r->value_len);
    if (!resp) {
        for (size_t s = 0; s < n_stats; s++) lt_free(stats[s]);
        lt_free(stats);
        return;
    }
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
    (void)fab_replies_add(&d->replies, o->ident, o->ident_len, resp, with_meta); /* NOMEM: the asker's deadline resends */
}

void chan_push_meta_back(lattice_ops *d, const uint8_t *ident, size_t len)
{
    (void)fab_replies_meta(&d->replies, ident, len);
}

void chan_flush(lattice_ops *d)
{
    for (size_t i = 0; i < d->n_dirty; i++) flush_peer(d, d->dirty[i]);
    d->n_dirty = 0;
    /* Each asker's answers on the connection its requests came on; one gone
     * meanwhile took them with it (the asker's deadlines resend). */
    fab_replies_flush(&d->replies, d->srv, lattice_meta_message(d->meta), &d->frames);
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
    fab_reqs_free(&p->out);
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

/* A frame that failed the checks (fabric/frames.c counts and logs it). */
void chan_dropped(lattice_ops *d, fab_drop reason, const char *why) { fab_dropped(&d->frames, reason, why); }

Latdata__Batch *chan_unpack_batch(lattice_ops *d, const uint8_t *msg, size_t len, const uint8_t *mac, size_t mac_len)
{
    return fab_unpack_batch(&d->frames, msg, len, mac, mac_len);
}

void chan_batch_free(Latdata__Batch *b) { fab_batch_free(b); }

/* An answer that will never come: the target left the topology, or the
 * node stops (all). */
typedef struct release_ctx {
    lattice_ops *d;
    bool all;
} release_ctx;

static bool pend_gone(void *arg, void *item)
{
    release_ctx *r = arg;
    return r->all || !chan_peer_by_id(r->d, ((pend *)item)->target);
}

static void pend_end(void *arg, void *item)
{
    release_ctx *r = arg;
    pend *p = item;
    p->settle(r->d, p, NULL);
    lt_free(p);
}

void chan_release_pending(lattice_ops *d, bool all)
{
    release_ctx r = {d, all};
    fab_pending_expire(d->pending, lt_mono_ms(), pend_gone, pend_end, &r);
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
