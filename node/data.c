/*
 * data: the node's data thread - the data channel, the cache registry and
 * the operation path (docs/CACHES.md).
 *
 * One thread owns everything here: the data ROUTER (servers; requests from
 * peers arrive on it and are answered on it), one DEALER per server peer
 * (our requests leave on it, their answers come back on it), every cache's
 * store writes, the pending-request table and the cluster metadata.  Other
 * threads only push work (lattice_op_submit, data_call) onto `inbox`, a
 * cds_wfcq queue, and write the eventfd that zmq_poll watches.
 *
 * Loop:  poll -> drain inbox (route new ops) -> ROUTER requests (execute as
 * primary, replicate, answer) -> DEALER responses (complete or retry) ->
 * every 10 ms: topology change (peers, live owners, metadata pull, re-route
 * ops whose target left), retries and deadlines -> flush: one Batch per
 * peer and per ROUTER identity.
 *
 * Metadata (which caches exist and each one's affinity base) is serialized
 * by the coordinator: it answers META_GET, applies CREATE/DESTROY and pushes
 * every change to every server; clients and servers pull it on every
 * topology change.  See docs/CACHES.md for the base-switch rule.
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>
#include <urcu.h>
#include <urcu/wfcqueue.h>
#include <zmq.h>

#include "base/base.h"
#include "cache.pb-c.h"
#include "discovery/discovery.h"
#include "lattice/alloc.h"
#include "lattice/log.h"
#include "caches_int.h"
#include "data_int.h"
#include "rebal_int.h"

#define TICK_MS 10
#define RETRY_MS 20
#define SWEEP_MS 250
#define CHUNK_BYTES (4u << 20)
#define PEND_BUCKETS 65536u

static __thread lattice_data *on_data_thread; /* the data thread's own lattice_data */

/* ------------------------------------------------------------ pending table */

static void pend_link(lattice_data *d, pend *p)
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

static pend *pend_take(lattice_data *d, uint64_t id)
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

pend *data_pend_new(lattice_data *d, int type, const peer *target)
{
    pend *p = lt_calloc(1, sizeof *p);
    if (!p) return NULL;
    p->id = ++d->next_id;
    p->type = type;
    p->deadline_ms = lt_mono_ms() + (uint64_t)d->op_timeout_ms;
    snprintf(p->target, sizeof p->target, "%s", target->id);
    pend_link(d, p);
    return p;
}

/* ------------------------------------------------------------------- peers */

static void req_free(Latdata__Req *r) { lt_free(r); }

/* A request with its own copies of cache, key, value and origin (one block;
 * origin NULL = none). */
Latdata__Req *data_req_new_from(int kind, const char *cache, const void *key, size_t klen, const void *val,
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

Latdata__Req *data_req_new(int kind, const char *cache, const void *key, size_t klen, const void *val,
                           size_t vlen)
{
    return data_req_new_from(kind, cache, key, klen, val, vlen, NULL);
}

lattice_status data_send_req(lattice_data *d, peer *p, Latdata__Req *r)
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

static lattice_status send_frame(lattice_data *d, void *sock, const uint8_t *ident, size_t ident_len,
                                 const Latdata__Batch *b)
{
    uint8_t *buf, mac[LT_FRAME_MAC_BYTES];
    size_t n;
    if (lt_frame_pack(&b->base, d->have_key ? d->key : NULL, &buf, &n, mac) != LATTICE_OK) return LATTICE_ERR_NOMEM;
    int more = d->have_key ? ZMQ_SNDMORE : 0;
    int rc = 0;
    if (ident) rc = zmq_send(sock, ident, ident_len, ZMQ_SNDMORE | ZMQ_DONTWAIT);
    if (rc >= 0) rc = zmq_send(sock, buf, n, more | ZMQ_DONTWAIT);
    if (rc >= 0 && d->have_key) rc = zmq_send(sock, mac, LT_FRAME_MAC_BYTES, ZMQ_DONTWAIT);
    lt_free(buf);
    if (rc < 0) {
        d->send_failed++;
        return LATTICE_ERR_IO;
    }
    return LATTICE_OK;
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

static void flush_peer(lattice_data *d, peer *p)
{
    p->dirty = false;
    if (!p->n_out && !p->push_meta) return;
    for (size_t at = 0; p->dealer && (at < p->n_out || p->push_meta);) {
        Latdata__Batch b = LATDATA__BATCH__INIT;
        b.proto = LATTICE_DATA_PROTO;
        b.reqs = p->out + at;
        b.n_reqs = chunk_req(p->out + at, p->n_out - at);
        if (p->push_meta && d->meta_msg) b.meta = d->meta_msg;
        send_frame(d, p->dealer, NULL, 0, &b); /* a lost send is retried by the ops' deadlines */
        p->push_meta = false;
        at += b.n_reqs;
    }
    for (size_t i = 0; i < p->n_out; i++) req_free(p->out[i]);
    p->n_out = 0;
}

static reply_box *box_for(lattice_data *d, const uint8_t *ident, size_t len)
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

/* Queue a response to a ROUTER identity.  value/stats are copied. */
void data_reply(lattice_data *d, const origin *o, const lattice_op_result *r, Latdata__NodeCacheStats **stats,
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

static void flush_boxes(lattice_data *d)
{
    for (size_t i = 0; i < d->n_boxes; i++) {
        reply_box *b = &d->boxes[i];
        if (!b->n) continue;
        for (size_t at = 0; at < b->n;) {
            Latdata__Batch batch = LATDATA__BATCH__INIT;
            batch.proto = LATTICE_DATA_PROTO;
            batch.resps = b->out + at;
            batch.n_resps = chunk_resp(b->out + at, b->n - at);
            if (at == 0 && b->with_meta && d->meta_msg) batch.meta = d->meta_msg;
            send_frame(d, d->router, b->ident, b->ident_len, &batch);
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

void data_flush(lattice_data *d)
{
    for (size_t i = 0; i < d->n_dirty; i++) flush_peer(d, d->dirty[i]);
    d->n_dirty = 0;
    flush_boxes(d);
}

peer *data_peer_by_id(lattice_data *d, const char *id)
{
    for (size_t i = 0; i < d->n_peers; i++)
        if (strcmp(d->peers[i]->id, id) == 0) return d->peers[i];
    return NULL;
}

peer *data_peer_by_cid(lattice_data *d, const char *cid)
{
    for (size_t i = 0; i < d->n_peers; i++)
        if (strcmp(d->peers[i]->cid, cid) == 0) return d->peers[i];
    return NULL;
}

static void peer_free(peer *p)
{
    for (size_t i = 0; i < p->n_out; i++) req_free(p->out[i]);
    lt_free(p->out);
    if (p->dealer) zmq_close(p->dealer);
    lt_free(p);
}

static peer *peer_new(lattice_data *d, const lattice_member *m, bool self)
{
    peer *p = lt_calloc(1, sizeof *p);
    if (!p) return NULL;
    snprintf(p->id, sizeof p->id, "%s", m->id);
    snprintf(p->cid, sizeof p->cid, "%s", m->consistent_id);
    p->self = self;
    p->server = m->role == LATTICE_ROLE_SERVER;
    const char *addr = lattice_member_attr(m, "data_addr");
    if (addr) snprintf(p->addr, sizeof p->addr, "%s", addr);
    if (!self && addr && p->server) {
        p->dealer = zmq_socket(d->zctx, ZMQ_DEALER);
        int zero = 0, hwm = 1000000;
        if (p->dealer) {
            zmq_setsockopt(p->dealer, ZMQ_LINGER, &zero, sizeof zero);
            zmq_setsockopt(p->dealer, ZMQ_SNDHWM, &hwm, sizeof hwm);
            zmq_setsockopt(p->dealer, ZMQ_RCVHWM, &hwm, sizeof hwm);
            if (zmq_connect(p->dealer, addr) != 0) {
                LT_LOG(LT_WARN, "data", "cannot connect to %s: %s", addr, zmq_strerror(errno));
                zmq_close(p->dealer);
                p->dealer = NULL;
            }
        }
    }
    return p;
}

/* ------------------------------------------------------------- completion */

void data_complete_local(lattice_data *d, opx *o, const lattice_op_result *r)
{
    (void)d;
    o->fn(o->arg, o->index, r);
    data_opx_free(o);
}

void data_complete(lattice_data *d, const origin *org, const lattice_op_result *r)
{
    if (org->local) data_complete_local(d, org->local, r);
    else data_reply(d, org, r, NULL, 0, false);
}

void data_opx_free(opx *o) { lt_free(o); }

static void fail_op(lattice_data *d, opx *o, lattice_status st)
{
    lattice_op_result r = {0};
    r.status = st;
    data_complete_local(d, o, &r);
}

/* Retry later (another owner may be serving by then), or fail at the deadline. */
void data_retry(lattice_data *d, opx *o, lattice_status why)
{
    uint64_t now = lt_mono_ms();
    if (now >= o->deadline_ms || !d->running) {
        fail_op(d, o, !d->running ? LATTICE_ERR_STOPPED
                      : why == LATTICE_ERR_PARTITION_LOST || why == LATTICE_ERR_NO_CACHE ? why
                                                                                         : LATTICE_ERR_TIMEOUT);
        return;
    }
    o->next_try_ms = now + RETRY_MS;
    o->rnext = d->retry;
    d->retry = o;
}

/* ------------------------------------------------------------ wait (sync) */

static void wait_done(lattice_data *d, waitw *w)
{
    lattice_op_result r = w->res;
    r.value = w->value;
    data_complete(d, &w->org, &r);
    lt_free(w->value);
    lt_free(w);
}

void data_wait_release(lattice_data *d, waitw *w)
{
    if (--w->remaining <= 0) wait_done(d, w);
}

/* --------------------------------------------------------------- the loop */

static void handle_response(lattice_data *d, const Latdata__Resp *rs)
{
    pend *p = pend_take(d, rs->id);
    if (!p) return; /* full_async, or already re-routed: nothing waits for it */
    switch (p->type) {
    case P_OP: {
        opx *o = p->op;
        lattice_status st = (lattice_status)rs->status;
        if (st == LATTICE_ERR_NOT_OWNER || st == LATTICE_ERR_AGAIN || st == LATTICE_ERR_STOPPED) {
            data_retry(d, o, st);
        } else {
            lattice_op_result r = {st, rs->value.data, rs->value.len, rs->num, rs->flags};
            data_complete_local(d, o, &r);
        }
        break;
    }
    case P_REPL: data_wait_release(d, p->w); break;
    case P_BCAST: data_bcast_part(d, p->b, rs); break;
    case P_CTL: data_ctl_response(d, p, rs); break;
    }
    lt_free(p);
}

/* Reads one multi-part message: [ident] body [mac].  Returns the unpacked
 * batch or NULL (dropped and counted). */
static Latdata__Batch *read_batch(lattice_data *d, void *sock, bool router, uint8_t *ident, size_t *ident_len)
{
    zmq_msg_t parts[4];
    int n = 0;
    int more = 1;
    while (more) {
        zmq_msg_t m;
        zmq_msg_init(&m);
        if (zmq_msg_recv(&m, sock, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&m);
            break;
        }
        more = zmq_msg_more(&m);
        if (n < 4) parts[n++] = m;
        else zmq_msg_close(&m);
    }
    Latdata__Batch *b = NULL;
    int first = router ? 1 : 0;
    int count = n - first;
    if (n == 0) return NULL;
    if (router) {
        size_t il = zmq_msg_size(&parts[0]);
        if (il > 255) il = 255;
        memcpy(ident, zmq_msg_data(&parts[0]), il);
        *ident_len = il;
    }
    if (count < 1 || count > 2) {
        d->malformed++;
    } else {
        zmq_msg_t *mac = count == 2 ? &parts[first + 1] : NULL;
        ProtobufCMessage *m = NULL;
        switch (lt_frame_unpack(&latdata__batch__descriptor, zmq_msg_data(&parts[first]), zmq_msg_size(&parts[first]),
                                mac ? zmq_msg_data(mac) : NULL, mac ? zmq_msg_size(mac) : 0,
                                d->have_key ? d->key : NULL, DATA_MAX_FRAME, &m)) {
        case LT_FRAME_OK: b = (Latdata__Batch *)m; break;
        case LT_FRAME_OVERSIZED: d->oversized++; break;
        case LT_FRAME_AUTH: d->auth_failed++; break;
        case LT_FRAME_MALFORMED: d->malformed++; break;
        }
        if (b && b->proto != LATTICE_DATA_PROTO) {
            lt_frame_free(m);
            b = NULL;
            d->malformed++;
        }
    }
    for (int i = 0; i < n; i++) zmq_msg_close(&parts[i]);
    return b;
}

static void on_router(lattice_data *d)
{
    for (int k = 0; k < 256; k++) {
        int ev = 0;
        size_t evl = sizeof ev;
        zmq_getsockopt(d->router, ZMQ_EVENTS, &ev, &evl);
        if (!(ev & ZMQ_POLLIN)) return;
        uint8_t ident[256];
        size_t il = 0;
        Latdata__Batch *b = read_batch(d, d->router, true, ident, &il);
        if (!b) continue;
        if (b->meta) data_meta_apply(d, b->meta);
        for (size_t i = 0; i < b->n_reqs; i++) {
            origin o = {0};
            memcpy(o.ident, ident, il);
            o.ident_len = il;
            o.rid = b->reqs[i]->id;
            data_serve(d, b->reqs[i], &o);
        }
        lt_frame_free(&b->base);
    }
}

static void on_dealer(lattice_data *d, peer *p)
{
    for (int k = 0; k < 256; k++) {
        int ev = 0;
        size_t evl = sizeof ev;
        zmq_getsockopt(p->dealer, ZMQ_EVENTS, &ev, &evl);
        if (!(ev & ZMQ_POLLIN)) return;
        Latdata__Batch *b = read_batch(d, p->dealer, false, NULL, NULL);
        if (!b) continue;
        if (b->meta) data_meta_apply(d, b->meta);
        for (size_t i = 0; i < b->n_resps; i++) handle_response(d, b->resps[i]);
        lt_frame_free(&b->base);
    }
}

static void drain_inbox(lattice_data *d)
{
    uint64_t v;
    if (read(d->efd, &v, sizeof v) < 0 && errno != EAGAIN) LT_LOG(LT_WARN, "data", "eventfd: %s", strerror(errno));
    for (;;) {
        struct cds_wfcq_node *n = __cds_wfcq_dequeue_nonblocking(&d->qhead, &d->qtail);
        if (!n || n == CDS_WFCQ_WOULDBLOCK) break;
        opx *o = caa_container_of(n, opx, qnode);
        if (o->call) data_run_call(d, o);
        else data_route(d, o);
    }
}

static void run_retries(lattice_data *d, uint64_t now)
{
    opx *list = d->retry, *keep = NULL;
    d->retry = NULL;
    while (list) {
        opx *o = list;
        list = o->rnext;
        if (o->next_try_ms <= now || !d->running) {
            if (!d->running) fail_op(d, o, LATTICE_ERR_STOPPED);
            else if (o->call) data_run_call(d, o);
            else data_route(d, o);
        } else {
            o->rnext = keep;
            keep = o;
        }
    }
    /* data_route may have queued new retries meanwhile: keep both. */
    while (keep) {
        opx *o = keep;
        keep = o->rnext;
        o->rnext = d->retry;
        d->retry = o;
    }
}

/* Drops every pending request to a target no longer in the topology (or all
 * of them when stopping): ops are re-routed, replication waits released. */
static void release_pending(lattice_data *d, bool all)
{
    pend *p = d->all;
    while (p) {
        pend *next = p->next;
        bool gone = all || !data_peer_by_id(d, p->target);
        /* A replication wait ends only when the backup answers or leaves: a
         * full_sync ack must never skip a live backup (its op times out at
         * the issuer meanwhile).  Everything else gives up at its deadline. */
        uint64_t now = lt_mono_ms();
        bool late = p->type == P_OP    ? now >= p->op->deadline_ms
                    : p->type == P_REPL ? false
                                        : now >= p->deadline_ms;
        if (gone || late) {
            pend_take(d, p->id);
            switch (p->type) {
            case P_OP: data_retry(d, p->op, LATTICE_ERR_TIMEOUT); break;
            case P_REPL: data_wait_release(d, p->w); break;
            case P_BCAST: data_bcast_part(d, p->b, NULL); break;
            case P_CTL: data_ctl_response(d, p, NULL); break;
            }
            lt_free(p);
        }
        p = next;
    }
}

/* Rebuilds peers from a new topology: new servers get a DEALER, departed
 * ones are closed (their pending requests re-routed). */
static void on_topology(lattice_data *d, lattice_topology *t)
{
    char self[64];
    lattice_discovery_local_id(d->disc, self, sizeof self);
    snprintf(d->self_id, sizeof d->self_id, "%s", self);
    for (size_t i = 0; i < d->n_peers; i++) d->peers[i]->mark = false;
    size_t n = lattice_topology_size(t);
    for (size_t i = 0; i < n; i++) {
        const lattice_member *m = lattice_topology_member(t, i);
        peer *p = data_peer_by_id(d, m->id);
        if (!p) {
            if (d->n_peers == DATA_MAX_PEERS) continue;
            p = peer_new(d, m, strcmp(m->id, self) == 0);
            if (!p) continue;
            d->peers[d->n_peers++] = p;
        }
        p->mark = true;
    }
    d->self = NULL;
    size_t k = 0;
    for (size_t i = 0; i < d->n_peers; i++) {
        peer *p = d->peers[i];
        if (!p->mark) {
            for (size_t j = 0; j < d->n_dirty; j++)
                if (d->dirty[j] == p) d->dirty[j] = d->dirty[--d->n_dirty];
            peer_free(p);
            continue;
        }
        if (p->self) d->self = p;
        d->peers[k++] = p;
    }
    d->n_peers = k;
    const char *coord = lattice_topology_coordinator(t);
    snprintf(d->coordinator, sizeof d->coordinator, "%s", coord ? coord : "");
    d->major = lattice_topology_major(t);
    d->minor = lattice_topology_minor(t);
    release_pending(d, false);
    data_meta_on_topology(d);
}

static void check_topology(lattice_data *d)
{
    lattice_topology *t = lattice_discovery_topology(d->disc);
    if (!t) return;
    if (lattice_topology_major(t) != d->major || lattice_topology_minor(t) != d->minor || !d->seen_topology) {
        d->seen_topology = true;
        on_topology(d, t);
    }
    lattice_topology_release(t);
}

static size_t build_poll(lattice_data *d, zmq_pollitem_t *items, peer **owners)
{
    size_t n = 0;
    items[n++] = (zmq_pollitem_t){NULL, d->efd, ZMQ_POLLIN, 0};
    if (d->router) items[n++] = (zmq_pollitem_t){d->router, 0, ZMQ_POLLIN, 0};
    for (size_t i = 0; i < d->n_peers; i++) {
        if (!d->peers[i]->dealer) continue;
        owners[n] = d->peers[i];
        items[n++] = (zmq_pollitem_t){d->peers[i]->dealer, 0, ZMQ_POLLIN, 0};
    }
    return n;
}

static void *data_main(void *arg)
{
    lattice_data *d = arg;
    on_data_thread = d;
    rcu_register_thread();
    zmq_pollitem_t items[DATA_MAX_PEERS + 2];
    peer *owners[DATA_MAX_PEERS + 2];
    uint64_t last_tick = 0;
    while (atomic_load(&d->run_flag)) {
        size_t n = build_poll(d, items, owners);
        int rc = zmq_poll(items, (int)n, d->inbox_pending ? 0 : TICK_MS);
        d->inbox_pending = false;
        if (rc < 0 && errno != EINTR) break;
        drain_inbox(d);
        if (d->router) on_router(d);
        for (size_t i = 2 - (d->router ? 0 : 1); i < n; i++)
            if (data_peer_by_id(d, owners[i]->id) == owners[i]) on_dealer(d, owners[i]);
        uint64_t now = lt_mono_ms();
        if (now - last_tick >= TICK_MS) {
            last_tick = now;
            check_topology(d);
            if (now - d->last_sweep >= SWEEP_MS) {
                d->last_sweep = now;
                release_pending(d, false); /* targets alive but silent: deadlines */
            }
            data_meta_tick(d, now);
            rebal_tick(d, now);
            run_retries(d, now);
        }
        data_flush(d);
    }
    /* Stopping: every op still here ends with STOPPED. */
    d->running = false;
    drain_inbox(d);
    release_pending(d, true);
    run_retries(d, UINT64_MAX);
    data_flush(d);
    rcu_unregister_thread();
    return NULL;
}

/* --------------------------------------------------------------- lifecycle */

lattice_status lattice_data_init(const lattice_data_config *c, lattice_data **out, const char **attr)
{
    *out = NULL;
    *attr = NULL;
    lattice_data *d = lt_calloc(1, sizeof *d);
    if (!d) return LATTICE_ERR_NOMEM;
    d->efd = -1;
    d->buckets = lt_calloc(PEND_BUCKETS, sizeof *d->buckets);
    d->dirty = lt_calloc(DATA_MAX_PEERS, sizeof *d->dirty);
    if (!d->buckets || !d->dirty) goto nomem;
    d->client = c->client;
    d->op_timeout_ms = c->op_timeout_ms > 0 ? c->op_timeout_ms : LATTICE_DEFAULT_OP_TIMEOUT_MS;
    d->region_mb = c->region_mb > 0 ? c->region_mb : LATTICE_DEFAULT_REGION_MB;
    for (size_t i = 0; i < c->n_caches && i < LATTICE_MAX_CACHES; i++) {
        char err[256];
        lattice_cache_config cfg;
        if (lattice_cache_config_parse_spec(&cfg, c->caches[i], err, sizeof err) != LATTICE_OK) {
            LT_LOG(LT_ERROR, "data", "--cache %s: %s", c->caches[i], err);
            data_free(d);
            return LATTICE_ERR_INVAL;
        }
        d->local_cfgs[d->n_local_cfgs++] = cfg;
    }
    if (c->secret) {
        lt_frame_derive_key(c->secret, c->secret_len, "lattice data channel v1", d->key);
        d->have_key = true;
    }
    d->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    d->zctx = zmq_ctx_new();
    if (d->efd < 0 || !d->zctx) goto io;
    cds_wfcq_init(&d->qhead, &d->qtail);
    if (!d->client) {
        d->dedup = lt_calloc(DEDUP_SLOTS, sizeof *d->dedup);
        if (!d->dedup) goto nomem;
        lattice_region_config rc = {"data", 0, (uint64_t)d->region_mb, 0, LATTICE_REGION_REJECT};
        if (lattice_region_create(&rc, &d->region) != LATTICE_OK) goto nomem;
        d->router = zmq_socket(d->zctx, ZMQ_ROUTER);
        int zero = 0, hwm = 1000000;
        zmq_setsockopt(d->router, ZMQ_LINGER, &zero, sizeof zero);
        zmq_setsockopt(d->router, ZMQ_SNDHWM, &hwm, sizeof hwm);
        zmq_setsockopt(d->router, ZMQ_RCVHWM, &hwm, sizeof hwm);
        char ep[160];
        snprintf(ep, sizeof ep, "tcp://%s:*", c->host ? c->host : "127.0.0.1");
        if (zmq_bind(d->router, ep) != 0) {
            LT_LOG(LT_ERROR, "data", "cannot bind the data port on %s: %s", ep, zmq_strerror(errno));
            goto io;
        }
        char bound[160];
        size_t bl = sizeof bound;
        zmq_getsockopt(d->router, ZMQ_LAST_ENDPOINT, bound, &bl);
        snprintf(d->attr, sizeof d->attr, "data_addr=%s", bound);
        *attr = d->attr;
    }
    *out = d;
    return LATTICE_OK;
nomem:
    data_free(d);
    return LATTICE_ERR_NOMEM;
io:
    data_free(d);
    return LATTICE_ERR_IO;
}

lattice_status lattice_data_start(lattice_data *d, struct lattice_discovery *disc)
{
    d->disc = disc;
    d->running = true;
    atomic_store(&d->run_flag, true);
    atomic_store(&d->accepting, true);
    if (pthread_create(&d->thread, NULL, data_main, d) != 0) {
        d->running = false;
        return LATTICE_ERR_IO;
    }
    d->thread_started = true;
    return LATTICE_OK;
}

void lattice_data_stop(lattice_data *d)
{
    if (!d || !d->thread_started) return;
    atomic_store(&d->accepting, false);
    atomic_store(&d->run_flag, false);
    uint64_t one = 1;
    if (write(d->efd, &one, sizeof one) < 0) LT_LOG(LT_WARN, "data", "eventfd: %s", strerror(errno));
    pthread_join(d->thread, NULL);
    d->thread_started = false;
}

void lattice_data_destroy(lattice_data *d)
{
    if (d) data_free(d);
}

void data_free(lattice_data *d)
{
    /* A registered thread is needed for the stores' RCU teardown. */
    rcu_register_thread();
    data_caches_free(d);
    for (size_t i = 0; i < d->n_peers; i++) peer_free(d->peers[i]);
    if (d->region) lattice_region_destroy(d->region);
    rcu_unregister_thread();
    for (size_t i = 0; i < d->cap_boxes; i++) lt_free(d->boxes[i].out);
    lt_free(d->boxes);
    if (d->router) zmq_close(d->router);
    if (d->zctx) zmq_ctx_term(d->zctx);
    if (d->efd >= 0) close(d->efd);
    lt_free(d->buckets);
    lt_free(d->dirty);
    lt_free(d->dedup);
    lt_free(d);
}

/* Any thread: hand an op to the data thread.  A callback submitting its
 * next op runs on the data thread itself: no eventfd write (a system call
 * per op) is needed, only the note that the inbox is not empty, so the loop
 * polls without waiting. */
lattice_status data_enqueue(lattice_data *d, opx *o)
{
    if (!atomic_load(&d->accepting)) return LATTICE_ERR_STOPPED;
    cds_wfcq_node_init(&o->qnode);
    cds_wfcq_enqueue(&d->qhead, &d->qtail, &o->qnode);
    if (on_data_thread == d) {
        d->inbox_pending = true;
        return LATTICE_OK;
    }
    uint64_t one = 1;
    if (write(d->efd, &one, sizeof one) < 0 && errno != EAGAIN) return LATTICE_ERR_IO;
    return LATTICE_OK;
}
