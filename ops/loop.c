/*
 * loop: the data thread - poll, dispatch to the stages, topology changes -
 * and the lifecycle of a lattice_ops (ops/ops.h).
 *
 * One thread owns everything in a lattice_ops: the data port (servers; a
 * TCP listener, fabric/fabric.h) and the connections it accepted (requests from
 * peers arrive on them and are answered on the one each came in on), one
 * connection per server peer (our requests leave on it, their answers come
 * back on it), every cache's store writes, the pending-request table and
 * the cluster metadata.  Other threads only push work (lattice_ops_submit,
 * lattice_grid_call) onto `inbox`, a cds_wfcq queue, and write the eventfd
 * that poll watches beside the sockets.
 *
 * Loop:  poll -> drain inbox (issue.c routes new ops) -> accept; requests on
 * accepted connections (primary.c executes, backup.c applies, the kind's
 * registered server answers: grid/) -> responses on our connections (the
 * pending request's settle: complete, retry, release a wait) -> every 10 ms:
 * topology change (peers, live owners, re-route ops whose target left), the
 * registered ticks (grid/: metadata pull, rebalance), deadlines, due
 * retries; every 250 ms stalled connections -> flush: one Batch per
 * peer and per accepted connection, written at once as far as the socket
 * takes it.
 */
#include <errno.h>
#include <malloc.h>
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

#include "base/base.h"
#include "lattice/alloc.h"
#include "lattice/clock.h"
#include "lattice/log.h"
#include "fabric/fabric.h"
#include "ops_int.h"

#define TICK_MS 10
#define RUN_HERE_MAX_OPS 1024 /* loop_run_here: larger submits are handed over (the lock's hold, ~1.5 ms) */
#define SWEEP_MS 250
#define PEND_BUCKETS 65536u
#define MAX_FRAMES 256 /* frames one connection hands over per loop iteration */

static void ops_free(lattice_ops *d);

/* Once a second: the region gives the memory of pages emptied beyond its
 * slack back to the OS (partitions that moved away, a flush), a bounded
 * number of pages a round; once it has nothing more to give, malloc's free
 * memory goes too (the indexes of the same partitions; their histories'
 * rings are unmapped as they go), so a
 * server's RSS follows what it holds instead of the most it ever held.
 * Copies that went while their region pages were reused at once (a
 * recovered copy dropped at a restart, then the rebalance: the soak's
 * fifth hour saw 30 MiB of such free heap stay resident for minutes) mark
 * heap_freed, and malloc's free memory goes at the next round as well.
 * And once a minute in any case: after such a trim the heap has holes the
 * OS took back, and the writes' churn (values, replication buffers) faults
 * their pages in again one by one, free or not - the sixth soak hour saw a
 * restarted node's memory outside the region and the heap in use climb 2-5
 * MiB in 10 minutes, one that never restarted stay flat. */
#define GIVE_BACK_MS 1000
#define GIVE_BACK_PAGES 4096
#define TRIM_EVERY_MS 60000
#define TRIM_LOG_MIB 4 /* a periodic trim logs only what is worth a line */
static void give_memory_back(lattice_ops *d, uint64_t now)
{
    if (now - d->give_back_ms < GIVE_BACK_MS) return;
    d->give_back_ms = now;
    uint32_t n = lattice_region_release(d->region, GIVE_BACK_PAGES, LATTICE_REGION_SLACK_AUTO);
    d->gave_back_pages += n;
    if (n) return;
    bool asked = d->gave_back_pages || d->heap_freed;
    if (!asked && now - d->trim_ms < TRIM_EVERY_MS) return;
    d->trim_ms = now;
    uint64_t before = lt_rss_bytes(), t0 = lt_mono_us();
    malloc_trim(0);
    uint64_t after = lt_rss_bytes(), took_us = lt_mono_us() - t0;
    uint64_t mib = d->gave_back_pages * lattice_region_page_size(d->region) >> 20;
    uint64_t heap_mib = before > after ? (before - after) >> 20 : 0;
    if ((asked && (mib || heap_mib)) || heap_mib >= TRIM_LOG_MIB)
        LT_LOG(LT_INFO, "memory",
               "gave %llu MiB of emptied region pages and %llu MiB of malloc's free memory back to the OS (trim %.1f ms)",
               (unsigned long long)mib, (unsigned long long)heap_mib, took_us / 1000.0);
    else
        LT_LOG(LT_DEBUG, "memory", "malloc_trim gave %llu KiB back in %llu us",
               (unsigned long long)(before > after ? (before - after) >> 10 : 0), (unsigned long long)took_us);
    d->gave_back_pages = 0;
    d->heap_freed = false;
}

static void handle_response(lattice_ops *d, const Latdata__Resp *rs)
{
    pend *p = chan_pend_take(d, rs->id);
    if (!p) return; /* full_async, or already re-routed: nothing waits for it */
    p->settle(d, p, rs);
    lt_free(p);
}

void ops_on_kind(lattice_ops *d, int kind, ops_kind_fn fn)
{
    if (kind >= 0) (void)fab_kinds_on(&d->kinds, (uint32_t)kind, fn); /* outside the range: ignored, as before */
}

void ops_on_tick(lattice_ops *d, ops_tick_fn fn)
{
    if (d->n_ticks < OPS_MAX_TICKS) d->ticks[d->n_ticks++] = fn;
}

/* The copies' kinds, as the registry calls them (ops_kind_fn). */
static void serve_replicate(void *d, const Latdata__Req *q, const void *o) { backup_apply(d, q, o); }

static void serve_clean(void *d, const Latdata__Req *q, const void *o)
{
    (void)o;
    backup_clean(d, q);
}

/* A request from a peer: an op to the primary, a control kind to whoever
 * registered it (backup.c the copies' kinds, grid/ the rest). */
static void serve(lattice_ops *d, const Latdata__Req *q, const origin *o)
{
    takeover_check(d); /* a metadata the grid applied since (a settle, a call): levelled first */
    if (q->kind < CTL_REPLICATE) {
        primary_serve(d, q, o);
        return;
    }
    lattice_op_result r = {.status = LATTICE_ERR_INVAL};
    if (!fab_kinds_dispatch(&d->kinds, d, q, o)) chan_reply(d, o, &r, NULL, 0, false); /* nobody serves it */
}

/* A frame on a connection our data port accepted: requests, answered on it. */
static bool on_request_frame(void *arg, link_conn *c, const uint8_t *msg, size_t len, const uint8_t *mac,
                             size_t mac_len)
{
    lattice_ops *d = arg;
    Latdata__Batch *b = chan_unpack_batch(d, msg, len, mac, mac_len);
    if (!b) return false;
    if (b->meta && d->grid_hooks.on_meta) d->grid_hooks.on_meta(d, b->meta); /* serve() levels first (takeover.c) */
    origin o = {0};
    o.ident_len = link_srv_ident(c, o.ident);
    if (b->n_reqs) o.to = ops_addressed(d, b->to);
    for (size_t i = 0; i < b->n_reqs; i++) {
        o.rid = b->reqs[i]->id;
        serve(d, b->reqs[i], &o);
        evict_flush(d);
    }
    chan_batch_free(b);
    return true;
}

/* A frame on our connection to a peer: the answers to our requests. */
static bool on_response_frame(void *arg, link_conn *c, const uint8_t *msg, size_t len, const uint8_t *mac,
                              size_t mac_len)
{
    (void)c;
    lattice_ops *d = arg;
    Latdata__Batch *b = chan_unpack_batch(d, msg, len, mac, mac_len);
    if (!b) return false;
    if (b->meta && d->grid_hooks.on_meta) {
        d->grid_hooks.on_meta(d, b->meta);
        takeover_check(d); /* before anything is served in the new view */
    }
    for (size_t i = 0; i < b->n_resps; i++) {
        handle_response(d, b->resps[i]);
        evict_flush(d);
    }
    chan_batch_free(b);
    return true;
}

/* A connection closed for its input or its silence: counted and logged (a
 * frame the frame layer refused was logged by chan_unpack_batch already). */
static void conn_closed(lattice_ops *d, const link_conn *c, link_why why)
{
    if (why == LINK_TIMEOUT) {
        chan_dropped(d, FAB_DROP_MALFORMED, c->proven ? "a data-channel frame left unfinished (no byte for 30 s)"
                                                      : "a new connection that sent no whole frame within 10 s");
    } else if (why == LINK_BAD) {
        if (c->rd_refused == LINK_RD_OVERSIZED) chan_dropped(d, FAB_DROP_OVERSIZED, "a data-channel frame above the frame cap");
        else if (c->rd_refused == LINK_RD_EMPTY) chan_dropped(d, FAB_DROP_MALFORMED, "a data-channel frame of no message");
        else if (c->rd_refused == LINK_RD_GARBAGE) chan_dropped(d, FAB_DROP_MALFORMED, "bytes that are not a data-channel frame");
        else if (c->rd_refused == LINK_RD_NOMEM) chan_dropped(d, FAB_DROP_MALFORMED, "a data-channel frame this node had no memory to read");
    }
    /* What a lost connection took with it is resent by the deadlines and the retry layer only. */
    if (c->lost_frames) {
        d->send_failed += c->lost_frames;
        LT_LOG(LT_INFO, "data", "a data connection%s%s closed (%s) with %zu frames unsent", c->dial ? " to " : "",
               c->dial ? c->addr : "", why == LINK_EOF ? "by the other side" : why == LINK_IOERR ? "I/O error" : "refused",
               c->lost_frames);
    } else if (c->dial && why != LINK_OK) {
        LT_LOG(LT_DEBUG, "data", "the data connection to %s closed (%s)", c->addr, why == LINK_EOF ? "by the peer" : "I/O error");
    }
}

/* Connections that stopped making progress (link_check_stall). */
static void sweep_stalled(lattice_ops *d, uint64_t now)
{
    for (size_t i = 0; d->srv && i < LINK_MAX_IN; i++) {
        link_conn *c = d->srv->in[i];
        if (c && link_check_stall(c, now) != LINK_OK) {
            conn_closed(d, c, LINK_TIMEOUT);
            link_srv_drop(d->srv, c);
        }
    }
    for (size_t i = 0; i < d->n_peers; i++) {
        link_conn *c = d->peers[i]->dealer;
        if (c && link_check_stall(c, now) != LINK_OK) {
            conn_closed(d, c, LINK_TIMEOUT);
            link_close(c, now);
        }
    }
}

/* Ops are taken off the queue DRAIN_WINDOW at a time, and the store lines
 * each keyed op will touch here - its partition's lock, its index line,
 * then its row - are prefetched for all of them before the first runs, so
 * a pipeline's cache misses overlap instead of following one another (the
 * key lookup's misses were ~30% of a node under SET -P 16).  A prefetch
 * changes and decides nothing: an op that goes elsewhere, or finds its row
 * moved, only wasted a load. */
#define DRAIN_WINDOW 16

static void prefetch_ops(lattice_ops *d, opx *const *w, size_t n)
{
    struct {
        lattice_store *s;
        uint32_t p, tag;
    } pf[DRAIN_WINDOW];
    const char *last = NULL;
    lattice_meta_cache *c = NULL;
    for (size_t i = 0; i < n; i++) {
        const opx *o = w[i];
        pf[i].s = NULL;
        if (o->call || !o->op.key || !o->op.key_len || walk_is_kind(o->op.kind)) continue;
        if (!last || strcmp(last, o->cache) != 0) {
            c = lattice_meta_cache_of(d->meta, o->cache);
            last = o->cache;
        }
        if (!c || !c->store) continue;
        pf[i].s = c->store;
        pf[i].p = lattice_partition_of_key(o->op.key, o->op.key_len, c->cfg.partitions);
        pf[i].tag = lattice_store_prefetch_write(c->store, pf[i].p, o->op.key, o->op.key_len);
    }
    rcu_read_lock();
    for (size_t i = 0; i < n; i++) {
        if (!pf[i].s) continue;
        lattice_store_prefetch_row(pf[i].s, pf[i].p, pf[i].tag);
        if (!ops_is_read(w[i]->op.kind)) lattice_store_prefetch_history(pf[i].s, pf[i].p);
    }
    rcu_read_unlock();
}

static void drain_queue(lattice_ops *d)
{
    bool held = false;
    struct lt_persist *log = NULL;
    for (;;) {
        opx *w[DRAIN_WINDOW];
        size_t n = 0;
        while (n < DRAIN_WINDOW) {
            struct cds_wfcq_node *q = __cds_wfcq_dequeue_nonblocking(&d->qhead, &d->qtail);
            if (!q || q == CDS_WFCQ_WOULDBLOCK) break;
            w[n++] = caa_container_of(q, opx, qnode);
        }
        if (!n) break;
        takeover_check(d);
        if (!held) log = wal_round_begin(d); /* the log's batch waits for the round */
        held = true;
        if (n > 1 && lattice_meta_valid(d->meta)) prefetch_ops(d, w, n);
        for (size_t i = 0; i < n; i++) {
            if (w[i]->call) d->grid_hooks.run_call(d, w[i]); /* only grid/ submits calls */
            else issue_route(d, w[i]);
            evict_flush(d);
        }
    }
    wal_round_end(log);
}

static void drain_inbox(lattice_ops *d)
{
    uint64_t v;
    if (read(d->efd, &v, sizeof v) < 0 && errno != EAGAIN) LT_LOG(LT_WARN, "data", "eventfd: %s", strerror(errno));
    drain_queue(d);
}

static void run_retries(lattice_ops *d, uint64_t now)
{
    takeover_check(d);
    for (opx *o = retry_take_due(d, now), *next; o; o = next) {
        next = o->rnext;
        if (o->call) d->grid_hooks.run_call(d, o);
        else issue_route(d, o);
        evict_flush(d);
    }
}

/* meta frees a cache: what the executor (grid/) and the watermarks hang on it first. */
static void cache_gone(void *arg, lattice_meta_cache *c)
{
    lattice_ops *d = arg;
    fast_cache_gone(arg, c);
    if (d->grid_hooks.cache_gone) d->grid_hooks.cache_gone(arg, c);
    clean_cache_gone(c);
    txlock_cache_gone(c);
    evict_cache_gone(arg, c);
    wal_cache_gone(arg, c);
}

/* This node rejoined under a new id (the grid removed its old incarnation,
 * whose partitions others took over): what it holds may be stale, and
 * keys removed meanwhile must not come back through it.  It starts over as
 * the new node it is - no caches, no stores - and pulls the metadata.  The
 * old stores are kept aside (grid/salvage.c) for the partitions nobody else
 * held; the first metadata frees every copy nobody needs. */
static void forget_data(lattice_ops *d)
{
    if (d->client || !lattice_meta_cache_count(d->meta)) return;
    LT_LOG(LT_WARN, "data", "rejoined as a new node: dropping the %zu caches' copies of the old incarnation",
           lattice_meta_cache_count(d->meta));
    lattice_meta *fresh = NULL;
    lattice_meta_config mc = {d->client, d->region, cache_gone, d};
    if (lattice_meta_create(&mc, &fresh) != LATTICE_OK) return; /* NOMEM: keep them (not served: no lease) */
    if (d->grid_hooks.keep_old) d->grid_hooks.keep_old(d, d->meta);
    lattice_meta_destroy(d->meta);
    d->meta = fresh;
    if (d->grid_hooks.meta_fresh) d->grid_hooks.meta_fresh(d);
}

/* Rebuilds peers from a new topology: new servers get a connection (opened
 * at the first send), departed ones are closed and never dialled again
 * (their pending requests re-routed). */
static void on_topology(lattice_ops *d, lattice_topology *t)
{
    char self[64];
    lattice_discovery_local_id(d->disc, self, sizeof self);
    if (d->self_id[0] && strcmp(d->self_id, self) != 0) {
        forget_data(d);
        if (d->grid_hooks.rejoined) d->grid_hooks.rejoined(d);
    }
    if (strcmp(d->self_id, self) != 0) {
        d->self_since_major = lattice_topology_major(t);
        d->lineage[0] = 0; /* a new incarnation starts empty: its stores carry only its own writes */
    }
    snprintf(d->self_id, sizeof d->self_id, "%s", self);
    d->self_oh = dedup_origin_hash(d->self_id);
    for (size_t i = 0; i < d->n_peers; i++) d->peers[i]->mark = false;
    size_t n = lattice_topology_size(t);
    for (size_t i = 0; i < n; i++) {
        const lattice_member *m = lattice_topology_member(t, i);
        peer *p = chan_peer_by_id(d, m->id);
        if (!p) {
            if (d->n_peers == DATA_MAX_PEERS) continue;
            p = chan_peer_new(m, strcmp(m->id, self) == 0);
            if (!p) continue;
            d->peers[d->n_peers++] = p;
        }
        p->mark = true;
    }
    /* The metadata gets the new member set before a departed peer is freed:
     * its owner tables point at members. */
    peer *gone[DATA_MAX_PEERS];
    lattice_meta_member *members[DATA_MAX_PEERS];
    size_t k = 0, n_gone = 0;
    d->self = NULL;
    for (size_t i = 0; i < d->n_peers; i++) {
        peer *p = d->peers[i];
        if (!p->mark) {
            gone[n_gone++] = p;
            continue;
        }
        if (p->m.self) d->self = p;
        members[k] = &p->m;
        d->peers[k++] = p;
    }
    d->n_peers = k;
    const char *coord = lattice_topology_coordinator(t);
    snprintf(d->coordinator, sizeof d->coordinator, "%s", coord ? coord : "");
    lattice_meta_set_epoch(d->meta, lattice_topology_major(t)); /* before: a takeover's first write is in it */
    if (lattice_meta_set_members(d->meta, members, k, d->coordinator)) lattice_meta_bump(d->meta);
    for (size_t i = 0; i < n_gone; i++) {
        for (size_t j = 0; j < d->n_dirty; j++)
            if (d->dirty[j] == gone[i]) d->dirty[j] = d->dirty[--d->n_dirty];
        chan_peer_free(gone[i]);
    }
    d->major = lattice_topology_major(t);
    d->minor = lattice_topology_minor(t);
    chan_release_pending(d, false);
    if (d->grid_hooks.on_topology) d->grid_hooks.on_topology(d);
}

static void check_topology(lattice_ops *d)
{
    /* The incarnation before the topology: should a rejoin fall between
     * the two reads, we act on the new view under the old number - served
     * by no lease - until the next check corrects it. */
    uint64_t inc = lattice_discovery_incarnation(d->disc);
    lattice_topology *t = lattice_discovery_topology(d->disc);
    if (!t) return;
    if (lattice_topology_major(t) != d->major || lattice_topology_minor(t) != d->minor || !d->seen_topology ||
        inc != d->incarnation) {
        d->seen_topology = true;
        d->incarnation = inc;
        on_topology(d, t);
        takeover_check(d); /* before anything is served in the new view */
    }
    lattice_topology_release(t);
}

/* What one pollfd stands for. */
typedef struct watch {
    link_conn *c;                 /* NULL: the eventfd or the listener */
    peer *p;                      /* our connection to p; NULL: an accepted one */
} watch;

static size_t build_poll(lattice_ops *d, struct pollfd *fds, watch *w, uint64_t now)
{
    size_t n = 0;
    fds[n] = (struct pollfd){d->efd, POLLIN, 0};
    w[n++] = (watch){NULL, NULL};
    if (!d->srv) goto peers;
    if (now >= d->srv->accept_paused_until) {
        fds[n] = (struct pollfd){d->srv->lfd, POLLIN, 0};
        w[n++] = (watch){NULL, NULL};
    }
    for (size_t i = 0; i < LINK_MAX_IN && d->srv->n_in; i++) {
        link_conn *c = d->srv->in[i];
        if (!c) continue;
        if (c->fd < 0) { /* a reply's write failed (link_send closed it): its slot is free again */
            conn_closed(d, c, LINK_IOERR);
            link_srv_drop(d->srv, c);
            continue;
        }
        fds[n] = (struct pollfd){c->fd, link_events(c), 0};
        w[n++] = (watch){c, NULL};
    }
peers:
    for (size_t i = 0; i < d->n_peers; i++) {
        link_conn *c = d->peers[i]->dealer;
        if (!c || !link_events(c)) continue;
        fds[n] = (struct pollfd){c->fd, link_events(c), 0};
        w[n++] = (watch){c, d->peers[i]};
    }
    return n;
}

static void accept_new(lattice_ops *d, uint64_t now)
{
    link_srv *s = d->srv;
    link_srv_accept(s, now);
    if (s->refused == s->refused_logged || now - s->refused_log_ms < 1000) return;
    s->refused_logged = s->refused;
    s->refused_log_ms = now;
    LT_LOG(LT_WARN, "data", "refused data connections: %zu open (at most %zu) or no file descriptor left (%llu refused so far)",
           s->n_in, s->max_in, (unsigned long long)s->refused);
}

/* Everything poll found ready: accepts, requests, responses, writes. */
static void service(lattice_ops *d, struct pollfd *fds, const watch *w, size_t n, uint64_t now)
{
    for (size_t i = 1; i < n; i++) {
        if (!fds[i].revents) continue;
        if (!w[i].c) {
            accept_new(d, now);
            continue;
        }
        if (w[i].p) {
            link_why why = link_service(w[i].c, fds[i].revents, DATA_MAX_FRAME, MAX_FRAMES, on_response_frame, d, now);
            if (why != LINK_OK) conn_closed(d, w[i].c, why);
        } else {
            link_why why = link_service(w[i].c, fds[i].revents, DATA_MAX_FRAME, MAX_FRAMES, on_request_frame, d, now);
            if (why != LINK_OK) {
                conn_closed(d, w[i].c, why);
                link_srv_drop(d->srv, w[i].c);
            }
        }
    }
}

static void *data_main(void *arg)
{
    lattice_ops *d = arg;
    chan_enter_thread(d);
    rcu_register_thread();
    struct pollfd *fds = lt_calloc(LINK_MAX_IN + DATA_MAX_PEERS + 2, sizeof *fds);
    watch *w = lt_calloc(LINK_MAX_IN + DATA_MAX_PEERS + 2, sizeof *w);
    if (!fds || !w) {
        LT_LOG(LT_ERROR, "data", "no memory for the data thread's poll set");
        atomic_store(&d->run_flag, false);
    }
    uint64_t last_tick = 0;
    bool stale = false; /* a thread ran ops here during the last poll */
    pthread_mutex_lock(&d->run_lock);
    d->run_open = fds && w;
    while (atomic_load(&d->run_flag)) {
        size_t n = build_poll(d, fds, w, lt_mono_ms());
        uint64_t changes = d->poll_changes;
        /* The poll is the one place this thread does not hold its state:
         * a submitting thread may run its ops meanwhile (loop_run_here). */
        pthread_mutex_unlock(&d->run_lock);
        int rc = poll(fds, (nfds_t)n, d->inbox_pending || stale ? 0 : TICK_MS);
        pthread_mutex_lock(&d->run_lock);
        d->inbox_pending = false;
        if (rc < 0 && errno != EINTR) break;
        /* Such a run may have closed or opened connections the poll set
         * names, or left output on one: then its results are not served,
         * the next poll (at once, the sockets still ready) is made from the
         * state as it is now. */
        stale = d->poll_changes != changes;
        drain_inbox(d);
        uint64_t now = lt_mono_ms();
        if (rc > 0 && !stale) service(d, fds, w, n, now);
        /* Waiters on transaction locks run again as soon as a row they wait
         * for changed, not at the next tick: a younger transaction's retry
         * (its abort's finish, a read round, a prepare: well under a tick
         * over loopback) otherwise took the released lock again before the
         * older waiter ran, every time, and the older one waited out its
         * 10 s deadline (fault_steady with commits across slots). */
        if (d->txwaits) txlock_tick(d);
        if (d->bwaits) bwait_tick(d); /* a push wakes its partition's blocked pops at once */
        /* The tick's clock is read after the frames were served: what they
         * stamped (a supplier session's last demand, say) must not lie in
         * the tick's future, or "now - stamp" wraps around - a supplier
         * session was freed as a minute idle right after its demand, and
         * the demander waited 10 s for every window it had acked. */
        now = lt_mono_ms();
        if (now - last_tick >= TICK_MS) {
            last_tick = now;
            check_topology(d);
            if (now - d->last_sweep >= SWEEP_MS) {
                d->last_sweep = now;
                chan_release_pending(d, false); /* targets alive but silent: deadlines */
                sync_wait_resend(d);            /* replications a lost connection may have dropped */
                sweep_stalled(d, now);
            }
            for (size_t i = 0; i < d->n_ticks; i++) d->ticks[i](d, now);
            takeover_check(d); /* a tick of grid/ may have applied a metadata */
            wal_tick(d);
            evict_flush(d);
            txlock_tick(d);
            txlock_sweep(d, now);
            run_retries(d, now);
            if (d->region) {
                lattice_region_tick(d->region, now); /* OBJECT IDLETIME's clock (once a second) */
                give_memory_back(d, now);
            }
        }
        wal_release(d); /* replies whose records the log made durable */
        fast_settle(d); /* before anything of this round leaves (fast.c) */
        chan_flush(d);
    }
    d->run_open = false;
    wal_stop(d);
    lt_free(fds);
    lt_free(w);
    /* Stopping: every op still here ends with STOPPED. */
    d->running = false;
    drain_inbox(d);
    chan_release_pending(d, true);
    txlock_stop(d);
    bwait_stop(d);
    run_retries(d, UINT64_MAX);
    chan_flush(d);
    pthread_mutex_unlock(&d->run_lock);
    rcu_unregister_thread();
    return NULL;
}

/* What the data thread's poll set holds of its peers' connections: one
 * whose pointer, descriptor or events changed (opened at a first send,
 * closed by a failed one, output left queued) needs a new poll set. */
static uint64_t peers_sig(const lattice_ops *d)
{
    uint64_t h = 1469598103934665603ULL ^ d->n_peers;
    for (size_t i = 0; i < d->n_peers; i++) {
        const link_conn *c = d->peers[i]->dealer;
        h = (h ^ (uint64_t)(uintptr_t)c) * 1099511628211ULL;
        if (!c) continue;
        h = (h ^ (uint64_t)(uint32_t)c->fd) * 1099511628211ULL;
        h = (h ^ (uint64_t)(uint16_t)link_events(c)) * 1099511628211ULL;
    }
    return h;
}

/* o ends on this node without waiting for another: its key's partition has
 * this node for its only serving copy (no backup to wait for, no primary
 * elsewhere to ask).  Only such ops are worth running on the submitting
 * thread: for the others the answer comes back through the data thread
 * anyway, and the submitting thread - the busier one - would take over the
 * data thread's sending as well (measured: 3 nodes, full_sync, SET -c 50
 * 0.9x the hand-off; docs/BENCHMARKS.md, "#12, run to completion"). */
static bool ends_here(lattice_ops *d, const opx *o)
{
    if (o->call || walk_is_kind(o->op.kind) || !o->op.key || !lattice_meta_valid(d->meta)) return false;
    lattice_meta_cache *c = lattice_meta_cache_of(d->meta, o->cache);
    if (!c || !c->store) return false;
    uint32_t p = lattice_partition_of_key(o->op.key, o->op.key_len, c->cfg.partitions);
    lattice_meta_member *own[2];
    return lattice_meta_serving_owners(c, p, own, 2) == 1 && own[0]->self && !lattice_meta_moving_owners(c, p, own, 2);
}

/* A thread other than the data thread took run_lock (loop_run_here,
 * loop_release_durable): it acts as the data thread until state_give.
 * Returns what the poll set holds of the peers' connections. */
static uint64_t state_taken(lattice_ops *d)
{
    chan_enter_thread(d);
    return peers_sig(d);
}

/* Ends such a run as the data thread ends a round - the callbacks' next
 * ops, then what turned readable (fast_settle), then the replies - and
 * gives run_lock back.  A run that changed the connections the data
 * thread polls (sig), or replied on an accepted one, makes its poll's
 * results stale: it is woken to poll from the new state. */
static void state_give(lattice_ops *d, uint64_t sig)
{
    while (d->inbox_pending) {
        d->inbox_pending = false;
        drain_queue(d);
    }
    fast_settle(d);
    bool replied = d->replies.n > 0;
    chan_flush(d);
    bool changed = replied || peers_sig(d) != sig;
    if (changed) d->poll_changes++;
    chan_enter_thread(NULL);
    pthread_mutex_unlock(&d->run_lock);
    if (changed) {
        uint64_t one = 1;
        if (write(d->efd, &one, sizeof one) < 0 && errno != EAGAIN) LT_LOG(LT_WARN, "data", "eventfd: %s", strerror(errno));
    }
}

/* Run to completion (docs/ARCHITECTURE.md): the data thread is in its poll,
 * so the submitting thread takes its state and runs the ops itself, as the
 * data thread would - what others queued before them first, so every
 * connection's order holds - with no eventfd write, no wake-up and no
 * second hand-off back for an op this node answers.  What it sent to peers
 * is answered on connections the data thread already polls; only when the
 * run changed those (peers_sig), or replied on an accepted one, is the
 * data thread woken to poll from the new state. */
bool loop_run_here(lattice_ops *d, opx **all, size_t n)
{
    /* Even a round of pipelines (SET -c 50 -P 16: 800 ops) runs here: the
     * hand-off's allocation, queue and wake-up cost more than the data
     * thread's overlap with this one wins back while a client needs the
     * other core (server CPU per SET 2.1-2.6 us handed over, 1.5-1.8 run
     * here; 0.8 -> 1.0x Redis, docs/BENCHMARKS.md "#12, session 17").  The
     * limit bounds how long the lock is held from the data thread. */
    if (n > RUN_HERE_MAX_OPS || d->client || chan_on_data_thread(d)) return false;
    if (pthread_mutex_trylock(&d->run_lock) != 0) return false;
    bool here = d->run_open && atomic_load(&d->accepting);
    for (size_t i = 0; here && i < n; i++) here = ends_here(d, all[i]);
    if (!here) {
        pthread_mutex_unlock(&d->run_lock);
        return false;
    }
    uint64_t sig = state_taken(d);
    struct lt_persist *log = wal_round_begin(d); /* the log's batch takes the whole run */
    drain_queue(d);
    takeover_check(d);
    for (size_t at = 0; at < n; at += DRAIN_WINDOW) {
        size_t k = n - at < DRAIN_WINDOW ? n - at : DRAIN_WINDOW;
        if (k > 1) prefetch_ops(d, all + at, k); /* ends_here found the metadata valid */
        for (size_t i = at; i < at + k; i++) {
            issue_route(d, all[i]);
            evict_flush(d);
        }
    }
    wal_round_end(log);
    state_give(d, sig);
    atomic_fetch_add_explicit(&d->ops_run_here, n, memory_order_relaxed);
    return true;
}

/* The log's thread, when its durable LSN moved (persist's on_durable): the
 * replies that waited for it go out from here while the data thread sits
 * in its poll - the reply reaches its IO thread with one wake-up, not two
 * (data thread, then IO thread).  False (the data thread is busy, or
 * stopped): the log's eventfd wakes it for them as before. */
bool loop_release_durable(void *arg)
{
    lattice_ops *d = arg;
    if (pthread_mutex_trylock(&d->run_lock) != 0) return false;
    if (!d->run_open) {
        pthread_mutex_unlock(&d->run_lock);
        return false;
    }
    uint64_t sig = state_taken(d);
    wal_release(d);
    state_give(d, sig);
    atomic_fetch_add_explicit(&d->log_releases, 1, memory_order_relaxed);
    return true;
}

/* --------------------------------------------------------------- lifecycle */

lattice_region *lattice_ops_region(lattice_ops *d) { return d ? d->region : NULL; }

void lattice_ops_fence(lattice_ops *d)
{
    atomic_store_explicit(&d->fenced, true, memory_order_release);
}

lattice_status lattice_ops_init(const lattice_ops_config *c, lattice_ops **out, const char **attr)
{
    *out = NULL;
    *attr = NULL;
    lattice_ops *d = lt_calloc(1, sizeof *d);
    if (!d) return LATTICE_ERR_NOMEM;
    d->efd = -1;
    pthread_mutex_init(&d->run_lock, NULL);
    d->pending = fab_pending_new(PEND_BUCKETS);
    d->dirty = lt_calloc(DATA_MAX_PEERS, sizeof *d->dirty);
    if (!d->pending || !d->dirty) goto nomem;
    fab_kinds_init(&d->kinds, CTL_REPLICATE);
    d->frames = (fab_frames){.max_frame = DATA_MAX_FRAME, .proto = LATTICE_DATA_PROTO,
                             .count = {[FAB_DROP_MALFORMED] = &d->malformed, [FAB_DROP_OVERSIZED] = &d->oversized,
                                       [FAB_DROP_AUTH] = &d->auth_failed, [FAB_DROP_SEND] = &d->send_failed}};
    d->client = c->client;
    d->op_timeout_ms = c->op_timeout_ms > 0 ? c->op_timeout_ms : LATTICE_DEFAULT_OP_TIMEOUT_MS;
    d->region_mb = c->region_mb > 0 ? c->region_mb : LATTICE_DEFAULT_REGION_MB;
    for (size_t i = 0; i < c->n_caches && i < LATTICE_MAX_CACHES; i++) {
        char err[256];
        lattice_cache_config cfg;
        if (lattice_cache_config_parse_spec(&cfg, c->caches[i], err, sizeof err) != LATTICE_OK) {
            LT_LOG(LT_ERROR, "data", "--cache %s: %s", c->caches[i], err);
            ops_free(d);
            return LATTICE_ERR_INVAL;
        }
        d->local_cfgs[d->n_local_cfgs++] = cfg;
    }
    if (c->secret) {
        lt_frame_derive_key(c->secret, c->secret_len, DATA_KEY_CONTEXT, d->key);
        d->have_key = true;
        d->frames.key = d->key;
    }
    d->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (d->efd < 0) goto io;
    cds_wfcq_init(&d->qhead, &d->qtail);
    if (!d->client) {
        d->dedup = lt_calloc(DEDUP_SLOTS, sizeof *d->dedup);
        if (!d->dedup) goto nomem;
        d->region_evict = c->region_evict;
        lattice_region_config rc = {"data", 0, (uint64_t)d->region_mb, 0,
                                    d->region_evict ? LATTICE_REGION_EVICT : LATTICE_REGION_REJECT};
        if (lattice_region_create(&rc, &d->region) != LATTICE_OK) goto nomem;
        if (c->data_dir) {
            lattice_status st = wal_init(d, c->data_dir, c->wal_fsync, c->checkpoint_mb);
            if (st != LATTICE_OK) {
                ops_free(d);
                return st;
            }
        }

        /* The data port: a port the kernel picks on the node's host; its
         * address is advertised as the data_addr attribute. */
        d->srv = lt_calloc(1, sizeof *d->srv);
        if (!d->srv) goto nomem;
        char bound[160];
        const char *host = c->host ? c->host : "127.0.0.1";
        if (link_srv_open(d->srv, host, bound, sizeof bound) != LATTICE_OK) {
            LT_LOG(LT_ERROR, "data", "cannot bind the data port on %s: %s", host, strerror(errno));
            lt_free(d->srv);
            d->srv = NULL;
            goto io;
        }
        LT_LOG(LT_INFO, "data", "data port %s", bound);
        snprintf(d->attr, sizeof d->attr, "data_addr=%s", bound);
        *attr = d->attr;
    }
    lattice_meta_config mc = {d->client, d->region, cache_gone, d};
    if (lattice_meta_create(&mc, &d->meta) != LATTICE_OK) goto nomem;
    ops_on_kind(d, CTL_REPLICATE, serve_replicate);
    ops_on_kind(d, CTL_REPLICATE_TXN, serve_replicate);
    ops_on_kind(d, CTL_CLEAN, serve_clean);
    ops_on_kind(d, CTL_LEVEL, takeover_level_serve);
    *out = d;
    return LATTICE_OK;
nomem:
    ops_free(d);
    return LATTICE_ERR_NOMEM;
io:
    ops_free(d);
    return LATTICE_ERR_IO;
}

lattice_status lattice_ops_start(lattice_ops *d, struct lattice_discovery *disc)
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

void lattice_ops_stop(lattice_ops *d)
{
    if (!d || !d->thread_started) return;
    atomic_store(&d->accepting, false);
    atomic_store(&d->run_flag, false);
    uint64_t one = 1;
    if (write(d->efd, &one, sizeof one) < 0) LT_LOG(LT_WARN, "data", "eventfd: %s", strerror(errno));
    pthread_join(d->thread, NULL);
    d->thread_started = false;
}

void lattice_ops_destroy(lattice_ops *d)
{
    if (d) ops_free(d);
}

static void ops_free(lattice_ops *d)
{
    /* A registered thread is needed for the stores' RCU teardown. */
    rcu_register_thread();
    wal_free(d); /* first: the stores freed below are no DROP records */
    if (d->grid_hooks.free_sessions) d->grid_hooks.free_sessions(d); /* rebalance's supplier sessions read the stores */
    fast_free(d);
    if (d->meta) lattice_meta_destroy(d->meta);
    if (d->grid_hooks.free) d->grid_hooks.free(d);
    evict_free(d);
    exec_scratch_free(&d->scratch);
    for (size_t i = 0; i < d->n_peers; i++) chan_peer_free(d->peers[i]);
    if (d->region) lattice_region_destroy(d->region);
    rcu_unregister_thread();
    fab_replies_free(&d->replies);
    if (d->srv) link_srv_close(d->srv);
    lt_free(d->srv);
    if (d->efd >= 0) close(d->efd);
    pthread_mutex_destroy(&d->run_lock);
    fab_pending_free(d->pending);
    lt_free(d->dirty);
    lt_free(d->dedup);
    txn_free(d);
    lt_free(d);
}
