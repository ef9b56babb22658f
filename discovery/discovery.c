/*
 * Membership: join, heartbeats, failure detection, leave - the state
 * machine.  This file holds the view and its transitions: a topology
 * adopted and published (with its events), the coordinator's new versions,
 * a rejoin, heartbeats and topologies sent.  Received frames are judged and
 * handled in handlers.c, the discovery thread's loop and timers run in
 * thread.c; sockets and framing live in transport.c, lifecycle and the
 * queries of other threads in api.c, the shared context in state.h.
 *
 * THREADS AND SOCKETS
 *   One discovery thread owns every control socket: the ROUTER bound on the
 *   peer port, one DEALER per known address (finder targets while joining,
 *   members once joined), the ROUTER's monitor PAIR, the multicast UDP
 *   sockets.  Other threads reach it only through the atomic `stop_req` flag
 *   plus an eventfd that wakes zmq_poll.  Messages to a peer go out on our
 *   DEALER to its ROUTER; replies to a request (Redirect, Joining, Refusal)
 *   go back through our ROUTER to the asker's DEALER.
 *
 * SHARED STATE AND LOCKS
 *   d->cur           current snapshot; written by the discovery thread only,
 *                    under pub_lock, with rcu_xchg_pointer; the previous one
 *                    loses the publisher's reference after a grace period
 *                    (call_rcu).  lattice_discovery_topology() takes pub_lock
 *                    and a reference; RCU readers use rcu_dereference.
 *   d->id            under pub_lock (it changes when we rejoin).
 *   d->joined, subs  under pub_lock; joined_cv signals joins.
 *   d->peers[]       under stats_lock (API threads read peer stats).
 *   counters         C11 atomics (read by any thread).
 *   everything else  discovery thread only.
 *   Lock order: pub_lock and stats_lock are never held together; no lock
 *   is held while a socket is used or an event callback runs.
 *
 * ORDER OF WORK IN ONE LOOP ITERATION (a tick: timeout/50, 10..100 ms)
 *   stall check -> drain every socket (frames before timers: after a stall
 *   the queued heartbeats must count before anyone is judged silent) ->
 *   timers: JOINING sends joins/probes and may seed; JOINED heartbeats and,
 *   on the coordinator, admits/removes.
 *
 * STATE MACHINE
 *
 *        start                 topology containing us
 *   IDLE ------> JOINING ---------------------------------> JOINED
 *                 ^  |  no cluster answered, we are the          |
 *                 |  |  smallest live joining server             |
 *                 |  +-------------------------------------------+ (seed: v1.0)
 *                 |                                              |
 *                 +----------------------------------------------+
 *                   our loop stalled > failure_detection_ms (SIGSTOP),
 *                   a topology without us, a peer says "removed",
 *                   (client) no server heard for failure_detection_ms:
 *                   rejoin with a NEW id, dropping the old view.
 *
 *   JOINED --stop--> LEAVING (send Leave to all, wait <= 1 s for a topology
 *   without us) --> STOPPED.
 *
 * COORDINATION
 *   The coordinator is the lowest-order server that is neither silent for
 *   failure_detection_ms nor leaving.  Every member computes it the same way
 *   from the same snapshot; whoever finds itself there and is not the
 *   snapshot's coordinator takes over.  Only the coordinator writes versions:
 *   each loop it batches all pending joiners, leavers and silent members into
 *   one new major version and sends the full member list to every member.
 *   Members accept a snapshot only from the coordinator it names, and only if
 *   it is newer (or the same version from a new coordinator after a takeover).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "state.h"
#include "lattice/alloc.h"
#include "lattice/log.h"

/* ------------------------------------------------------------ membership */

/* The cluster's failure detection timeout: the coordinator's setting, carried
 * in the topology, so a CLI client started with the default 10 s still
 * heartbeats as often as a grid run at 1 s expects. */
int ld_cfd(const lattice_discovery *d)
{
    return d->cur && d->cur->fd_ms >= 100 ? (int)d->cur->fd_ms : d->fd_ms;
}

static void remember_removed(lattice_discovery *d, const char *id)
{
    snprintf(d->removed[d->removed_next], sizeof d->removed[0], "%s", id);
    d->removed_next = (d->removed_next + 1) % MAX_REMOVED;
}

bool ld_was_removed(lattice_discovery *d, const char *id)
{
    for (size_t i = 0; i < MAX_REMOVED; i++)
        if (d->removed[i][0] && strcmp(d->removed[i], id) == 0) return true;
    return false;
}

static void sample_self(lattice_discovery *d, lattice_node_stats *s)
{
    memset(s, 0, sizeof *s);
    proc_sample(&d->ps, &s->rss_bytes);
    s->cpu_load = d->ps.load;
    pthread_mutex_lock(&d->stats_lock);
    d->self_load = s->cpu_load; /* for lattice_discovery_stats of this node, on any thread */
    pthread_mutex_unlock(&d->stats_lock);
    s->uptime_ms = lt_wall_ms() - d->start_wall_ms;
    s->frames_in = rd(&d->c_frames);
    s->malformed = rd(&d->c_malformed);
    s->oversized = rd(&d->c_oversized);
    s->auth_failed = rd(&d->c_auth);
    s->refused = rd(&d->c_refused);
    s->handshake_failed = rd(&d->c_handshake);
}

static void put_after_grace(struct rcu_head *h) { topo_put(caa_container_of(h, lattice_topology, rcu)); }

/* Replace the published snapshot (t may be NULL while rejoining). */
void ld_publish(lattice_discovery *d, lattice_topology *t)
{
    pthread_mutex_lock(&d->pub_lock);
    lattice_topology *old = rcu_xchg_pointer(&d->cur, t);
    d->joined = t != NULL;
    if (t) {
        d->refused = LATTICE_OK;
        pthread_cond_broadcast(&d->joined_cv);
    }
    pthread_mutex_unlock(&d->pub_lock);
    /* Drop the publisher's reference once RCU readers are done. */
    if (old) call_rcu(&old->rcu, put_after_grace);
}

static const char *kind_name(int k) { return k == 1 ? "joined" : k == 2 ? "left" : "failed"; }

/* Rebuild peers[] for the members of t (keeping what we know of old ones). */
static void sync_peers(lattice_discovery *d, const lattice_topology *t)
{
    peer np[MAX_PEERS];
    size_t n = 0;
    int64_t now = lt_mono_ms();
    pthread_mutex_lock(&d->stats_lock);
    for (size_t i = 0; t && i < t->n && n < MAX_PEERS; i++) {
        const lattice_member *m = &t->members[i];
        if (strcmp(m->id, d->id) == 0) continue;
        peer *old = find_peer(d, m->id);
        if (old) {
            np[n++] = *old;
        } else {
            memset(&np[n], 0, sizeof np[n]);
            snprintf(np[n].id, sizeof np[n].id, "%s", m->id);
            np[n].last_heard_ms = now;
            n++;
        }
    }
    memcpy(d->peers, np, n * sizeof *np);
    d->n_peers = n;
    pthread_mutex_unlock(&d->stats_lock);
}

/* Keep a DEALER to every member; drop the others (finder targets too once
 * joined). */
static void sync_conns(lattice_discovery *d, const lattice_topology *t)
{
    for (size_t i = 0; i < t->n; i++)
        if (strcmp(t->members[i].id, d->id) != 0) ld_ensure_conn(d, t->members[i].addr, false);
    for (size_t i = 0; i < d->n_conns;) {
        bool keep = false;
        for (size_t k = 0; k < t->n && !keep; k++) keep = strcmp(t->members[k].addr, d->conns[i].addr) == 0;
        if (keep) {
            d->conns[i].finder = false;
            i++;
        } else {
            ld_close_conn_at(d, i);
        }
    }
}

static void fire(lattice_discovery *d, const sub *subs, size_t ns, int k, const lattice_member *m,
                 const lattice_topology *t, bool quiet)
{
    /* Clients come and go with every application start: debug, not info. */
    if (!quiet)
        LT_LOG(m->role == LATTICE_ROLE_CLIENT ? LT_DEBUG : LT_INFO, MOD,
               "node %.8s (%s, %s) %s; topology %llu.%llu, %zu nodes", m->id, m->consistent_id,
               m->role == LATTICE_ROLE_CLIENT ? "client" : "server", kind_name(k), (unsigned long long)t->major,
               (unsigned long long)t->minor, t->n);
    (void)d;
    for (size_t s = 0; s < ns; s++) subs[s].fn(subs[s].ctx, k, m, t);
}

/* Events from the difference between our previous view and t, so a node
 * that missed a version (or rejoined) still reports every change; the
 * announcement's change list only says whether a removal was a leave.
 * Removals first, then joins, each in order.  With no previous view (our
 * first join) every member is reported joined, without a log line each. */
static void fire_events(lattice_discovery *d, const lattice_topology *old, const lattice_topology *t,
                        Latdisc__Change *const *ch, size_t nch)
{
    sub subs[MAX_SUBS];
    pthread_mutex_lock(&d->pub_lock);
    size_t ns = d->n_subs;
    memcpy(subs, d->subs, ns * sizeof *subs);
    pthread_mutex_unlock(&d->pub_lock);
    for (size_t i = 0; old && i < old->n; i++) {
        const lattice_member *m = &old->members[i];
        if (lattice_topology_find(t, m->id)) continue;
        int k = LATTICE_EVENT_FAILED;
        for (size_t c = 0; c < nch; c++)
            if (strcmp(ch[c]->id, m->id) == 0 && ch[c]->kind == LATTICE_EVENT_LEFT) k = LATTICE_EVENT_LEFT;
        fire(d, subs, ns, k, m, t, false);
    }
    for (size_t i = 0; i < t->n; i++) {
        const lattice_member *m = &t->members[i];
        if (old && lattice_topology_find(old, m->id)) continue;
        fire(d, subs, ns, LATTICE_EVENT_JOINED, m, t, !old || strcmp(m->id, d->id) == 0);
    }
}

/* e to every member of t but us (or only to `only_addr`), encoded once. */
void ld_send_members(lattice_discovery *d, const lattice_topology *t, const char *only_addr,
                         const Latdisc__Envelope *e)
{
    const char *addrs[MAX_PEERS];
    size_t n = 0;
    for (size_t i = 0; i < t->n && n < MAX_PEERS; i++) {
        const lattice_member *m = &t->members[i];
        if (strcmp(m->id, d->id) == 0 || (only_addr && strcmp(only_addr, m->addr) != 0)) continue;
        addrs[n++] = m->addr;
    }
    ld_send_many(d, addrs, n, e);
}

void ld_send_heartbeat(lattice_discovery *d, const char *only_addr)
{
    const lattice_topology *t = d->cur;
    if (!t) return;
    Latdisc__Envelope e;
    Latdisc__Heartbeat hb;
    Latdisc__Stats st;
    lattice_node_stats s;
    sample_self(d, &s);
    ld_env_init(d, &e);
    latdisc__heartbeat__init(&hb);
    latdisc__stats__init(&st);
    hb.major = t->major;
    hb.minor = t->minor;
    hb.sent_ms = lt_mono_ms();
    st.cpu_load = s.cpu_load;
    st.rss_bytes = s.rss_bytes;
    st.uptime_ms = s.uptime_ms;
    st.frames_in = s.frames_in;
    st.malformed = s.malformed;
    st.oversized = s.oversized;
    st.auth_failed = s.auth_failed;
    st.refused = s.refused;
    st.handshake_failed = s.handshake_failed;
    hb.stats = &st;
    e.body_case = LATDISC__ENVELOPE__BODY_HEARTBEAT;
    e.heartbeat = &hb;
    ld_send_members(d, t, only_addr, &e);
}

/* Send t (with its changes) to every member, or only to `only_addr`. */
void ld_send_topology(lattice_discovery *d, const lattice_topology *t, Latdisc__Change **ch, size_t nch,
                          const char *only_addr)
{
    Latdisc__Envelope e;
    Latdisc__Topology p;
    if (topo_to_proto(t, &p) != LATTICE_OK) return;
    p.changes = ch;
    p.n_changes = nch;
    ld_env_init(d, &e);
    e.body_case = LATDISC__ENVELOPE__BODY_TOPOLOGY;
    e.topology = &p;
    ld_send_members(d, t, only_addr, &e);
    p.changes = NULL;
    p.n_changes = 0;
    topo_proto_release(&p);
}

/* Adopt t as our view (it contains us).  Takes over the reference. */
void ld_adopt(lattice_discovery *d, lattice_topology *t, Latdisc__Change *const *ch, size_t nch)
{
    lattice_topology *old = d->view; /* our reference moves to t below */
    topo_get(t);
    d->view = t;
    bool was_joining = d->state == ST_JOINING;
    for (size_t i = 0; i < nch; i++)
        if (ch[i]->kind != LATTICE_EVENT_JOINED) remember_removed(d, ch[i]->id);
    sync_peers(d, t);
    sync_conns(d, t);
    ld_publish(d, t);
    if (was_joining) {
        d->state = ST_JOINED;
        d->joined_mono_ms = (int64_t)lt_mono_ms();
        const lattice_member *me = lattice_topology_find(t, d->id);
        LT_LOG(LT_INFO, MOD, "ready: joined cluster '%s' as %s order %llu at %s; topology %llu.%llu, %zu nodes, coordinator %.8s",
               d->cluster, d->client ? "client" : "server", (unsigned long long)(me ? me->order : 0), d->my_addr,
               (unsigned long long)t->major, (unsigned long long)t->minor, t->n, t->coordinator);
        ld_send_heartbeat(d, NULL);
    } else {
        /* New members learn our stats now rather than a heartbeat later. */
        for (size_t i = 0; i < nch; i++)
            if (ch[i]->kind == LATTICE_EVENT_JOINED) {
                const lattice_member *m = lattice_topology_find(t, ch[i]->id);
                if (m) ld_send_heartbeat(d, m->addr);
            }
    }
    ld_update_lease(d);
    fire_events(d, old, t, ch, nch);
    topo_put(old);
}

void ld_begin_join(lattice_discovery *d, const char *why)
{
    if (why) {
        /* A rejoin is a new node: a new id, so nobody confuses us with the
         * incarnation the grid removed.  (The first join keeps init's id.) */
        LT_LOG(LT_WARN, MOD, "%s: dropping the old view and rejoining as a new node", why);
        char id[64];
        new_uuid(id);
        pthread_mutex_lock(&d->pub_lock);
        snprintf(d->id, sizeof d->id, "%s", id);
        pthread_mutex_unlock(&d->pub_lock);
        lattice_log_set_node(id);
    }
    lattice_topology *old = d->cur;
    /* Keep the members' addresses as join targets: a client reconnects
     * through any server it knew, not only the finders. */
    for (size_t i = 0; old && i < old->n; i++) ld_ensure_conn(d, old->members[i].addr, true);
    ld_publish(d, NULL);
    sync_peers(d, NULL);
    d->state = ST_JOINING;
    ld_update_lease(d); /* a joining node serves nothing */
    atomic_fetch_add_explicit(&d->incarnation, 1, memory_order_acq_rel);
    d->join_time_ms = lt_wall_ms();
    d->join_started_ms = lt_mono_ms();
    d->last_join_send_ms = 0;
    d->merge_to[0] = 0; /* a merge names its target after this (ld_join_into) */
    d->last_probe_ms = 0;
    d->saw_cluster_ms = 0;
    d->n_joiners = 0;
    ld_seed_reset(d);
    pthread_mutex_lock(&d->pub_lock);
    d->refused = LATTICE_OK;
    pthread_mutex_unlock(&d->pub_lock);
    for (size_t i = 0; i < d->n_pending; i++) member_free_fields(&d->pending[i]);
    d->n_pending = 0;
    ld_dns_poll(d, lt_mono_ms());
    for (size_t i = 0; i < d->n_statics; i++) {
        char a[128];
        snprintf(a, sizeof a, "tcp://%s:%d", d->statics[i].host, d->statics[i].port);
        ld_ensure_conn(d, a, true);
    }
    LT_LOG(LT_INFO, MOD, "joining cluster '%s' as %s %s (%zu static addresses%s%s)", d->cluster,
           d->client ? "client" : "server", d->my_addr, d->n_statics, d->mcast ? ", multicast" : "",
           d->n_dns ? ", dns" : "");
}

/* Servers of p in cur's baseline. */
static size_t baseline_kept(const lattice_topology *cur, const Latdisc__Topology *p)
{
    size_t n = 0;
    for (size_t i = 0; i < p->n_members; i++)
        n += !p->members[i]->client && topo_in_baseline(cur, p->members[i]->consistent_id);
    return n;
}

/* Does p drop a strict majority of our baseline - servers of our view that
 * p no longer lists?  Then its coordinator is on the smaller side for
 * certain: the servers it could not hear hold the quorum, not it. */
static bool drops_baseline_majority(const lattice_topology *cur, const Latdisc__Topology *p)
{
    if (!cur->n_baseline) return false;
    size_t dropped = 0;
    for (size_t i = 0; i < cur->n; i++) {
        const lattice_member *m = &cur->members[i];
        if (m->role != LATTICE_ROLE_SERVER || !topo_in_baseline(cur, m->consistent_id)) continue;
        bool kept = false;
        for (size_t k = 0; k < p->n_members && !kept; k++) kept = strcmp(p->members[k]->id, m->id) == 0;
        dropped += !kept;
    }
    return dropped > cur->n_baseline / 2;
}

/* A topology arrived from `sender`. */
void ld_on_topology(lattice_discovery *d, const Latdisc__Envelope *e, const zmq_msg_t *route)
{
    const Latdisc__Topology *p = e->topology;
    if (strcmp(e->sender, p->coordinator) != 0) return; /* only the coordinator speaks */
    bool has_coord = false;
    for (size_t i = 0; i < p->n_members; i++) {
        const Latdisc__Member *m = p->members[i];
        if (!m->id[0] || strlen(m->id) >= 64 || strncmp(m->addr, "tcp://", 6) != 0) {
            cnt(&d->c_malformed);
            return;
        }
        for (size_t k = 0; k < i; k++)
            if (strcmp(p->members[k]->id, m->id) == 0) {
                cnt(&d->c_malformed);
                return;
            }
        has_coord |= strcmp(m->id, p->coordinator) == 0;
    }
    if (!has_coord) {
        cnt(&d->c_malformed);
        return;
    }
    bool contains_me = false;
    for (size_t i = 0; i < p->n_members; i++) contains_me |= strcmp(p->members[i]->id, d->id) == 0;
    const lattice_topology *cur = d->cur;
    if (d->state == ST_JOINED || d->state == ST_LEAVING) {
        if (ld_views_conflict(cur, p)) {
            /* Another grid that admitted members of ours - this node
             * perhaps - under orders of its own (merge.c): not a view of
             * ours, new or old.  Adopting it would leave each such grid
             * with the other's view and nobody coordinating (both lists
             * name a live server of lower order); the coordinators judge
             * it as a grid to merge with, and one side dissolves. */
            if (gate(d, 11))
                LT_LOG(LT_WARN, MOD, "topology %llu.%llu of %.8s lists members of this grid under other orders: "
                       "another grid admitted them too (servers that started grids at the same moment); "
                       "merging rather than applying it", (unsigned long long)p->major,
                       (unsigned long long)p->minor, p->coordinator);
            if (d->state == ST_JOINED) ld_judge_grid(d, p, route);
            return;
        }
        /* A coordinator outside our view is another grid (a partition that
         * healed, or a stale frame TCP delivered late): only a newer view
         * that lists us may come from there (we missed its coordinator's
         * join); telling grids apart is the Hellos' job, not this one's. */
        bool in_view = lattice_topology_find(cur, p->coordinator) != NULL;
        bool newer = p->major > cur->major || (p->major == cur->major && p->minor > cur->minor);
        bool takeover = in_view && p->major == cur->major && p->minor == cur->minor &&
                        strcmp(p->coordinator, cur->coordinator) != 0;
        if (!newer && !takeover) return;
        if (!contains_me && !in_view) return;
        if (!contains_me && drops_baseline_majority(cur, p)) {
            /* Its coordinator removed us with servers it could not hear that
             * form a strict majority of the baseline: it is the side that is
             * cut off, or the first to wake from a stall the whole machine
             * took.  Rejoining on its word would drop our copies -
             * and the majority's, had it sent the same to all of them.  We
             * keep our view; it is silent to us now (we are not in its
             * view), so our coordinator removes it, and it merges back into
             * this side as a new node (it holds no quorum). */
            if (gate(d, 10))
                LT_LOG(LT_WARN, MOD, "ignoring topology %llu.%llu of %.8s: it drops this node with a majority of the "
                       "baseline and keeps %zu of the %zu baseline servers", (unsigned long long)p->major,
                       (unsigned long long)p->minor, p->coordinator, baseline_kept(cur, p), cur->n_baseline);
            return;
        }
        if (!contains_me) {
            if (d->state == ST_LEAVING) {
                d->state = ST_STOPPED; /* our leave was announced */
                return;
            }
            ld_begin_join(d, "a newer topology no longer lists this node");
            return;
        }
    } else if (d->state != ST_JOINING || !contains_me) {
        if (d->state == ST_JOINING) d->saw_cluster_ms = lt_mono_ms();
        return;
    }
    lattice_topology *t = topo_from_proto(p);
    if (!t) return;
    ld_adopt(d, t, p->changes, p->n_changes);
}

/* The coordinator as every member computes it: the lowest-order server that
 * is neither silent nor leaving (us included: we are never silent to us). */
const lattice_member *ld_effective_coordinator(lattice_discovery *d, int64_t now)
{
    const lattice_topology *t = d->cur;
    for (size_t i = 0; i < t->n; i++) {
        const lattice_member *m = &t->members[i];
        if (m->role != LATTICE_ROLE_SERVER) continue;
        if (strcmp(m->id, d->id) == 0) return d->state == ST_LEAVING ? NULL : m;
        peer *p = find_peer(d, m->id);
        if (p && !p->leaving && now - p->last_heard_ms <= ld_cfd(d)) return m;
    }
    return NULL;
}

static void add_change(Latdisc__Change *store, Latdisc__Change **ptrs, size_t *n, const char *id, int kind)
{
    latdisc__change__init(&store[*n]);
    store[*n].id = (char *)id;
    store[*n].kind = (uint32_t)kind;
    ptrs[*n] = &store[*n];
    (*n)++;
}

/* We are the coordinator: fold every pending join, leave and failure into
 * one new major version and announce it. */
void ld_coordinate(lattice_discovery *d, int64_t now)
{
    const lattice_topology *t = d->cur;
    enum { CAP = MAX_PEERS + MAX_PENDING };
    const lattice_member *keep[CAP];
    Latdisc__Change chs[CAP], *chp[CAP];
    size_t nk = 0, nch = 0;
    bool takeover = strcmp(t->coordinator, d->id) != 0;
    for (size_t i = 0; i < t->n && nk < CAP; i++) {
        const lattice_member *m = &t->members[i];
        if (strcmp(m->id, d->id) == 0) {
            keep[nk++] = m;
            continue;
        }
        peer *p = find_peer(d, m->id);
        bool silent = !p || now - p->last_heard_ms > ld_cfd(d);
        bool replaced = false; /* same host:port rejoined: the old process is gone */
        for (size_t k = 0; k < d->n_pending; k++)
            replaced |= strcmp(d->pending[k].consistent_id, m->consistent_id) == 0;
        if (p && p->leaving) add_change(chs, chp, &nch, m->id, LATTICE_EVENT_LEFT);
        else if (silent || replaced) add_change(chs, chp, &nch, m->id, LATTICE_EVENT_FAILED);
        else keep[nk++] = m;
    }
    if (!nch && !d->n_pending && !takeover) return;
    uint64_t next = t->next_order;
    for (size_t i = 0; i < d->n_pending && nk < CAP; i++) {
        /* The same host:port twice in one batch (a node that rejoined again
         * before its first attempt was admitted): only the newest counts. */
        bool newer = false;
        for (size_t k = i + 1; k < d->n_pending && !newer; k++)
            newer = strcmp(d->pending[k].consistent_id, d->pending[i].consistent_id) == 0;
        if (newer) continue;
        d->pending[i].order = next++;
        keep[nk++] = &d->pending[i];
        add_change(chs, chp, &nch, d->pending[i].id, LATTICE_EVENT_JOINED);
    }
    lattice_topology *nt = topo_build(t->major + 1, 0, next, (uint32_t)d->fd_ms, d->id, keep, nk);
    if (nt && !topo_set_baseline(nt, (const char *const *)t->baseline, t->n_baseline, t->baseline_version)) {
        topo_put(nt);
        nt = NULL;
    }
    if (!nt) return; /* out of memory: try again next tick */
    if (takeover)
        LT_LOG(LT_WARN, MOD, "coordinator %.8s is gone; taking over as coordinator", t->coordinator);
    for (size_t i = 0; i < d->n_pending; i++) ld_ensure_conn(d, d->pending[i].addr, false);
    ld_send_topology(d, nt, chp, nch, NULL);
    /* Announce to the removed too: a live leaver learns it may stop. */
    for (size_t i = 0; i < nch; i++) {
        if (chp[i]->kind == LATTICE_EVENT_JOINED) continue;
        const lattice_member *m = lattice_topology_find(t, chp[i]->id);
        if (m) {
            Latdisc__Envelope e;
            Latdisc__Topology p;
            if (topo_to_proto(nt, &p) == LATTICE_OK) {
                ld_env_init(d, &e);
                e.body_case = LATDISC__ENVELOPE__BODY_TOPOLOGY;
                e.topology = &p;
                ld_send_to(d, m->addr, &e);
                topo_proto_release(&p);
            }
        }
    }
    ld_adopt(d, nt, chp, nch); /* frees nothing the changes point to: ids live in t/pending */
    for (size_t i = 0; i < d->n_pending; i++) member_free_fields(&d->pending[i]);
    d->n_pending = 0;
}

bool ld_announce_baseline(lattice_discovery *d, const char *const *cids, size_t n)
{
    const lattice_topology *t = d->cur;
    const lattice_member *ms[MAX_PEERS + MAX_PENDING];
    size_t k = 0;
    for (size_t i = 0; i < t->n && k < MAX_PEERS + MAX_PENDING; i++) ms[k++] = &t->members[i];
    lattice_topology *nt = topo_build(t->major, t->minor + 1, t->next_order, (uint32_t)d->fd_ms, d->id, ms, k);
    if (!nt || !topo_set_baseline(nt, cids, n, t->baseline_version + 1)) {
        topo_put(nt);
        return false;
    }
    ld_send_topology(d, nt, NULL, 0, NULL);
    ld_adopt(d, nt, NULL, 0);
    return true;
}
