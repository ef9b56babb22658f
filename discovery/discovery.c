/*
 * Membership: join, heartbeats, failure detection, leave - the state
 * machine.  Sockets and framing live in transport.c, lifecycle and the
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

static bool is_member(const lattice_topology *t, const char *id) { return lattice_topology_find(t, id) != NULL; }


static void remember_removed(lattice_discovery *d, const char *id)
{
    snprintf(d->removed[d->removed_next], sizeof d->removed[0], "%s", id);
    d->removed_next = (d->removed_next + 1) % MAX_REMOVED;
}

static bool was_removed(lattice_discovery *d, const char *id)
{
    for (size_t i = 0; i < MAX_REMOVED; i++)
        if (d->removed[i][0] && strcmp(d->removed[i], id) == 0) return true;
    return false;
}

static void self_member(lattice_discovery *d, lattice_member *m, uint64_t order)
{
    memset(m, 0, sizeof *m);
    m->id = d->id;
    m->consistent_id = d->consistent_id;
    m->order = order;
    m->role = d->client ? LATTICE_ROLE_CLIENT : LATTICE_ROLE_SERVER;
    m->addr = d->my_addr;
    m->host = d->host;
    m->start_time_ms = d->join_time_ms;
    m->attrs = d->attrs;
    m->n_attrs = d->n_attrs;
}

static void sample_self(lattice_discovery *d, lattice_node_stats *s)
{
    memset(s, 0, sizeof *s);
    proc_sample(&d->ps, &s->rss_bytes);
    s->cpu_load = d->ps.load;
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
static void publish(lattice_discovery *d, lattice_topology *t)
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

static void send_heartbeat(lattice_discovery *d, const char *only_addr)
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
static void send_topology(lattice_discovery *d, const lattice_topology *t, Latdisc__Change **ch, size_t nch,
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
static void adopt(lattice_discovery *d, lattice_topology *t, Latdisc__Change *const *ch, size_t nch)
{
    lattice_topology *old = d->view; /* our reference moves to t below */
    topo_get(t);
    d->view = t;
    bool was_joining = d->state == ST_JOINING;
    for (size_t i = 0; i < nch; i++)
        if (ch[i]->kind != LATTICE_EVENT_JOINED) remember_removed(d, ch[i]->id);
    sync_peers(d, t);
    sync_conns(d, t);
    publish(d, t);
    if (was_joining) {
        d->state = ST_JOINED;
        d->joined_mono_ms = (int64_t)lt_mono_ms();
        const lattice_member *me = lattice_topology_find(t, d->id);
        LT_LOG(LT_INFO, MOD, "ready: joined cluster '%s' as %s order %llu at %s; topology %llu.%llu, %zu nodes, coordinator %.8s",
               d->cluster, d->client ? "client" : "server", (unsigned long long)(me ? me->order : 0), d->my_addr,
               (unsigned long long)t->major, (unsigned long long)t->minor, t->n, t->coordinator);
        send_heartbeat(d, NULL);
    } else {
        /* New members learn our stats now rather than a heartbeat later. */
        for (size_t i = 0; i < nch; i++)
            if (ch[i]->kind == LATTICE_EVENT_JOINED) {
                const lattice_member *m = lattice_topology_find(t, ch[i]->id);
                if (m) send_heartbeat(d, m->addr);
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
    publish(d, NULL);
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
static void on_topology(lattice_discovery *d, const Latdisc__Envelope *e, const zmq_msg_t *route)
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
    adopt(d, t, p->changes, p->n_changes);
}

/* The coordinator as every member computes it: the lowest-order server that
 * is neither silent nor leaving (us included: we are never silent to us). */
static const lattice_member *effective_coordinator(lattice_discovery *d, int64_t now)
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

static bool pending_has(lattice_discovery *d, const char *id)
{
    for (size_t i = 0; i < d->n_pending; i++)
        if (strcmp(d->pending[i].id, id) == 0) return true;
    return false;
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
static void coordinate(lattice_discovery *d, int64_t now)
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
    send_topology(d, nt, chp, nch, NULL);
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
    adopt(d, nt, chp, nch); /* frees nothing the changes point to: ids live in t/pending */
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
    send_topology(d, nt, NULL, 0, NULL);
    adopt(d, nt, NULL, 0);
    return true;
}

/* ------------------------------------------------------------- handlers */

static void note_joiner(lattice_discovery *d, const char *key)
{
    int64_t now = lt_mono_ms();
    for (size_t i = 0; i < d->n_joiners; i++)
        if (strcmp(d->joiners[i].key, key) == 0) {
            d->joiners[i].seen_ms = now;
            return;
        }
    if (d->n_joiners == MAX_JOINERS) return;
    snprintf(d->joiners[d->n_joiners].key, sizeof d->joiners[0].key, "%s", key);
    d->joiners[d->n_joiners++].seen_ms = now;
}

static void on_join(lattice_discovery *d, const Latdisc__Envelope *e, const zmq_msg_t *route)
{
    const Latdisc__Member *m = e->join->self;
    if (!m || !m->id[0] || strlen(m->id) >= 64 || strcmp(m->id, e->sender) != 0 ||
        strncmp(m->addr, "tcp://", 6) != 0 || strlen(m->addr) >= 128) {
        cnt(&d->c_malformed);
        return;
    }
    if (d->state == ST_JOINING) {
        if (d->client || m->client || !route) return;
        /* The asker is a joining server too: it counts in the seed choice. */
        if (strlen(m->consistent_id) < 128) note_joiner(d, m->consistent_id);
        Latdisc__Envelope r;
        Latdisc__Joining j;
        ld_env_init(d, &r);
        latdisc__joining__init(&j);
        j.key = d->consistent_id;
        r.body_case = LATDISC__ENVELOPE__BODY_JOINING;
        r.joining = &j;
        ld_send_env(d, d->router, route, &r, false);
        return;
    }
    if (d->state != ST_JOINED) return;
    const lattice_topology *t = d->cur;
    const lattice_member *coord = effective_coordinator(d, lt_mono_ms());
    if (!coord || strcmp(coord->id, d->id) != 0) {
        if (!route || !coord) return;
        Latdisc__Envelope r;
        Latdisc__Redirect rd;
        ld_env_init(d, &r);
        latdisc__redirect__init(&rd);
        rd.coordinator_addr = (char *)coord->addr;
        r.body_case = LATDISC__ENVELOPE__BODY_REDIRECT;
        r.redirect = &rd;
        ld_send_env(d, d->router, route, &r, false);
        return;
    }
    if (is_member(t, m->id)) {
        send_topology(d, t, NULL, 0, m->addr); /* it missed the announcement */
        return;
    }
    if (was_removed(d, m->id)) {
        ld_reply_refusal(d, route, REF_REMOVED, "this node id was removed from the topology; rejoin with a new id",
                         m->id);
        return;
    }
    if (pending_has(d, m->id) || d->n_pending == MAX_PENDING) return;
    lattice_attr attrs[LATTICE_MAX_ATTRS];
    lattice_member view;
    member_from_proto_view(m, &view, attrs, LATTICE_MAX_ATTRS);
    lattice_member *slot = &d->pending[d->n_pending];
    if (!member_copy(slot, &view)) {
        member_free_fields(slot);
        return;
    }
    d->n_pending++;
}

static void on_heartbeat(lattice_discovery *d, const Latdisc__Envelope *e, const zmq_msg_t *route)
{
    if (d->state != ST_JOINED && d->state != ST_LEAVING) return;
    const lattice_topology *t = d->cur;
    if (!is_member(t, e->sender)) {
        /* Only a view that holds a quorum of the baseline sends a member
         * away: a node that removed everyone it could not hear (cut off,
         * or the first to wake from a stall) would otherwise make the
         * majority rejoin and drop its copies (on_topology ignores its
         * view for the same reason). */
        if (was_removed(d, e->sender) && ld_present_quorum(t))
            ld_reply_refusal(d, route, REF_REMOVED, "you were removed from the topology; rejoin with a new id",
                             e->sender);
        return;
    }
    const Latdisc__Heartbeat *h = e->heartbeat;
    if (h->sent_ms && route) {
        /* The sender's lease counts from its send time (lease.c). */
        Latdisc__Envelope a;
        Latdisc__HeartbeatAck ack;
        ld_env_init(d, &a);
        latdisc__heartbeat_ack__init(&ack);
        ack.echo_ms = h->sent_ms;
        ack.major = t->major;
        ack.minor = t->minor;
        a.body_case = LATDISC__ENVELOPE__BODY_HEARTBEAT_ACK;
        a.heartbeat_ack = &ack;
        ld_send_env(d, d->router, route, &a, false);
    }
    bool first = false;
    pthread_mutex_lock(&d->stats_lock);
    peer *p = find_peer(d, e->sender);
    if (p && h->stats) {
        const Latdisc__Stats *s = h->stats;
        first = !p->have_stats;
        p->have_stats = true;
        p->hb_major = h->major;
        p->hb_minor = h->minor;
        p->stats = (lattice_node_stats){s->cpu_load, s->rss_bytes, s->uptime_ms, s->frames_in, s->malformed,
                                        s->oversized, s->auth_failed, s->refused, s->handshake_failed};
    }
    pthread_mutex_unlock(&d->stats_lock);
    /* Our own first heartbeat to a new member can overtake the topology
     * that admits it (another connection) and be dropped there; answering
     * its first heartbeat guarantees it hears from us now, not a period
     * later (lattice top waits for everyone's stats). */
    if (first) send_heartbeat(d, lattice_topology_find(t, e->sender)->addr);
    bool behind = h->major < t->major || (h->major == t->major && h->minor < t->minor);
    if (behind && strcmp(t->coordinator, d->id) == 0) {
        const lattice_member *m = lattice_topology_find(t, e->sender);
        send_topology(d, t, NULL, 0, m->addr);
    }
}

/* A member heard the heartbeat we sent at echo_ms: our lease may grow.  Only
 * echoes of this incarnation's heartbeats count, and never one from the
 * future (a forged or corrupted clock value). */
static void on_heartbeat_ack(lattice_discovery *d, const Latdisc__Envelope *e)
{
    if (d->state != ST_JOINED && d->state != ST_LEAVING) return;
    if (!is_member(d->cur, e->sender)) return;
    int64_t echo = (int64_t)e->heartbeat_ack->echo_ms;
    if (echo < d->joined_mono_ms || echo > (int64_t)lt_mono_ms()) return;
    pthread_mutex_lock(&d->stats_lock);
    peer *p = find_peer(d, e->sender);
    if (p && echo > p->ack_ms) p->ack_ms = echo;
    pthread_mutex_unlock(&d->stats_lock);
    ld_update_lease(d);
}

static void on_refusal(lattice_discovery *d, const Latdisc__Envelope *e, bool authenticated)
{
    const Latdisc__Refusal *r = e->refusal;
    ld_note_heard(d, e->sender_addr);
    if (r->reason == REF_REMOVED) {
        /* Only about our current id: a frame our previous incarnation left
         * in a queue must not make this one rejoin. */
        if (!authenticated || strcmp(r->about_id, d->id) != 0) return;
        if (d->state == ST_JOINED) {
            ld_begin_join(d, "a peer reports this node was removed");
        } else if (d->state == ST_JOINING) {
            /* Admitted, never heard from, removed: the grid cannot reach the
             * address we advertise. */
            if (gate(d, 9))
                LT_LOG(LT_ERROR, MOD, "the grid admitted this node but could not reach it at %s and removed it; "
                       "check --host and firewalls", d->my_addr);
            ld_begin_join(d, "this node was removed before it could take part");
        }
        return;
    }
    char who[128], why[256];
    if (r->reason == REF_NO_SECRET) {
        /* A node without any secret ignores our authenticated frames: not a
         * grid of ours, and no reason to give up or not to seed. */
        if (gate(d, 8))
            LT_LOG(LT_WARN, MOD, "%s has no cluster secret and ignores this node",
                   e->sender_addr[0] ? printable(e->sender_addr, who, sizeof who) : "a peer");
        return;
    }
    /* A grid answered, even if it refuses us: starting a grid of our own
     * on the same addresses would only split them. */
    if (d->state == ST_JOINING) {
        d->saw_cluster_ms = lt_mono_ms();
        pthread_mutex_lock(&d->pub_lock);
        if (d->refused == LATTICE_OK) d->refused_at_ms = lt_mono_ms();
        d->refused = r->reason == REF_CLUSTER ? LATTICE_ERR_CLUSTER
                     : r->reason == REF_SECRET ? LATTICE_ERR_AUTH
                                               : LATTICE_ERR_PROTO;
        pthread_mutex_unlock(&d->pub_lock);
    }
    if (gate(d, 0))
        LT_LOG(LT_ERROR, MOD, "join refused by %s: %s",
               e->sender_addr[0] ? printable(e->sender_addr, who, sizeof who) : "a peer",
               printable(r->text, why, sizeof why));
}

static void on_leave(lattice_discovery *d, const Latdisc__Envelope *e)
{
    pthread_mutex_lock(&d->stats_lock);
    peer *p = find_peer(d, e->sender);
    if (p) p->leaving = true;
    pthread_mutex_unlock(&d->stats_lock);
}


/* Cluster name and protocol checks; true when e may be handled. */
static bool admissible(lattice_discovery *d, const Latdisc__Envelope *e, const zmq_msg_t *route)
{
    if (strcmp(e->cluster, d->cluster) == 0) return true;
    cnt(&d->c_refused);
    char who[128], name[65];
    printable(e->cluster, name, sizeof name);
    if (gate(d, 1))
        LT_LOG(LT_WARN, MOD, "refused %s from %s: cluster name '%s' is not this cluster's '%s'",
               e->body_case == LATDISC__ENVELOPE__BODY_JOIN ? "join" : "message",
               printable(e->sender_addr, who, sizeof who), name, d->cluster);
    char text[400];
    snprintf(text, sizeof text, "cluster name '%s' does not match cluster '%.64s' at %.100s", name, d->cluster,
             d->my_addr);
    ld_reply_refusal(d, route, REF_CLUSTER, text, NULL);
    return false;
}

static void dispatch(lattice_discovery *d, const Latdisc__Envelope *e, const zmq_msg_t *route)
{
    ld_note_heard(d, e->sender_addr);
    if (e->body_case == LATDISC__ENVELOPE__BODY_REFUSAL) {
        on_refusal(d, e, true);
        return;
    }
    if (!admissible(d, e, route)) return;
    /* A frame of our cluster from a grid's member (a coordinator's hello to
     * non-members, a redirect, a topology): a grid is there and will take
     * us - never start one beside it.  Joins and "joining" answers come
     * from servers as new as we are; inspections from no member at all. */
    if (d->state == ST_JOINING && e->body_case != LATDISC__ENVELOPE__BODY_JOIN &&
        e->body_case != LATDISC__ENVELOPE__BODY_JOINING && e->body_case != LATDISC__ENVELOPE__BODY_INSPECT)
        d->saw_cluster_ms = lt_mono_ms();
    /* Any frame from a member proves it alive. */
    pthread_mutex_lock(&d->stats_lock);
    peer *p = find_peer(d, e->sender);
    if (p) p->last_heard_ms = lt_mono_ms();
    pthread_mutex_unlock(&d->stats_lock);
    switch (e->body_case) {
    case LATDISC__ENVELOPE__BODY_JOIN: on_join(d, e, route); break;
    case LATDISC__ENVELOPE__BODY_JOINING:
        if (d->state == ST_JOINING && e->joining->key[0] && strlen(e->joining->key) < 128)
            note_joiner(d, e->joining->key);
        /* The grid we merge into dissolved too (into a third): it admits
         * nobody now, so join wherever a grid answers (merge.c). */
        if (d->state == ST_JOINING && d->merge_to[0] && strcmp(e->sender_addr, d->merge_to) == 0)
            d->merge_until_ms = 0;
        break;
    case LATDISC__ENVELOPE__BODY_REDIRECT:
        if (d->state == ST_JOINING) {
            d->saw_cluster_ms = lt_mono_ms();
            ld_ensure_conn(d, e->redirect->coordinator_addr, true);
        }
        break;
    case LATDISC__ENVELOPE__BODY_TOPOLOGY: on_topology(d, e, route); break;
    case LATDISC__ENVELOPE__BODY_HEARTBEAT: on_heartbeat(d, e, route); break;
    case LATDISC__ENVELOPE__BODY_HEARTBEAT_ACK: on_heartbeat_ack(d, e); break;
    case LATDISC__ENVELOPE__BODY_LEAVE: on_leave(d, e); break;
    case LATDISC__ENVELOPE__BODY_HELLO: ld_on_hello(d, e, route); break;
    case LATDISC__ENVELOPE__BODY_DISSOLVE: ld_on_dissolve(d, e); break;
    case LATDISC__ENVELOPE__BODY_INSPECT: ld_on_inspect(d, route); break;
    case LATDISC__ENVELOPE__BODY_BASELINE_CHANGE: ld_on_baseline_change(d, e, route); break;
    case LATDISC__ENVELOPE__BODY_BASELINE_ANSWER: ld_on_baseline_answer(d, e); break;
    default: cnt(&d->c_malformed); break; /* probes belong on UDP */
    }
}

/* Judge one received frame set (route may be NULL, mac may be NULL). */
void ld_handle_frame(lattice_discovery *d, const zmq_msg_t *route, const uint8_t *buf, size_t len,
                         const uint8_t *mac, size_t mac_len, const char *via)
{
    cnt(&d->c_frames);
    Latdisc__Envelope *e = NULL;
    enum wire_verdict v = wire_decode(buf, len, mac, mac_len, d->has_key ? d->key : NULL, (size_t)d->max_msg, &e);
    switch (v) {
    case WIRE_OK: dispatch(d, e, route); break;
    case WIRE_OVERSIZED:
        cnt(&d->c_oversized);
        if (gate(d, 2))
            LT_LOG(LT_WARN, MOD, "dropped a %zu-byte frame on the %s: above max_message_bytes %d", len, via, d->max_msg);
        break;
    case WIRE_MALFORMED:
        cnt(&d->c_malformed);
        if (gate(d, 3)) LT_LOG(LT_WARN, MOD, "dropped an undecodable %zu-byte frame on the %s", len, via);
        break;
    case WIRE_PROTO_MAJOR:
        cnt(&d->c_refused);
        if (gate(d, 4))
        {
            char who[128];
            LT_LOG(LT_WARN, MOD, "refused a frame from %s: protocol version %u, this node speaks %d",
                   printable(e->sender_addr, who, sizeof who), e->proto_major, LATTICE_PROTO_MAJOR);
        }
        {
            char text[128];
            snprintf(text, sizeof text, "protocol version %u is not spoken here (this node speaks %d.%d)",
                     e->proto_major, LATTICE_PROTO_MAJOR, LATTICE_PROTO_MINOR);
            ld_reply_refusal(d, route, REF_PROTO, text, NULL);
        }
        break;
    case WIRE_AUTH: {
        /* An unauthenticated refusal is only logged; everything else is dropped. */
        Latdisc__Envelope *peek = NULL;
        if (len <= (size_t)d->max_msg &&
            wire_decode(buf, len, NULL, 0, NULL, (size_t)d->max_msg, &peek) == WIRE_OK &&
            peek->body_case == LATDISC__ENVELOPE__BODY_REFUSAL) {
            on_refusal(d, peek, false);
            wire_free(peek);
            break;
        }
        wire_free(peek);
        cnt(&d->c_auth);
        if (gate(d, 5))
            LT_LOG(LT_WARN, MOD, "dropped a frame on the %s that failed authentication (%s); check --secret-file",
                   via, d->has_key ? (mac ? "wrong cluster secret" : "no cluster secret") : "peer uses a secret this node lacks");
        ld_reply_refusal(d, route, d->has_key ? REF_SECRET : REF_NO_SECRET,
                      d->has_key ? "authentication failed: the cluster secret is missing or wrong"
                                 : "this node has no cluster secret but the joiner uses one",
                         NULL);
        break;
    }
    }
    wire_free(e);
}

/* Multicast finder traffic.  A server answers a probe of its cluster with
 * its peer address; a probe failing authentication gets an unauthenticated
 * refusal, so a joiner without the secret logs why and never seeds a grid
 * of its own. */
void ld_handle_datagram(lattice_discovery *d, const struct sockaddr_in *from, const uint8_t *buf, size_t len,
                        const uint8_t *mac)
{
    cnt(&d->c_frames);
    Latdisc__Envelope *e = NULL;
    enum wire_verdict v = wire_decode(buf, len, mac, mac ? LT_FRAME_MAC_BYTES : 0, d->has_key ? d->key : NULL,
                                      (size_t)d->max_msg, &e);
    if (v == WIRE_AUTH) {
        Latdisc__Envelope *peek = NULL;
        if (wire_decode(buf, len, NULL, 0, NULL, (size_t)d->max_msg, &peek) == WIRE_OK) {
            if (peek->body_case == LATDISC__ENVELOPE__BODY_REFUSAL) {
                on_refusal(d, peek, false);
                wire_free(peek);
                return;
            }
            if (peek->body_case == LATDISC__ENVELOPE__BODY_PROBE && !d->client && d->mc_send_fd >= 0) {
                Latdisc__Envelope r;
                Latdisc__Refusal rf;
                ld_env_init(d, &r);
                latdisc__refusal__init(&rf);
                rf.reason = d->has_key ? REF_SECRET : REF_NO_SECRET;
                rf.text = d->has_key ? "authentication failed: the cluster secret is missing or wrong"
                                     : "this node has no cluster secret but the prober uses one";
                r.body_case = LATDISC__ENVELOPE__BODY_REFUSAL;
                r.refusal = &rf;
                ld_send_datagram(d, d->mc_send_fd, from, &r, true);
            }
        }
        wire_free(peek);
    }
    if (v != WIRE_OK) {
        cnt(v == WIRE_AUTH ? &d->c_auth : &d->c_malformed);
        if (gate(d, 7))
            LT_LOG(LT_WARN, MOD, "dropped a multicast datagram from %s (%s)", inet_ntoa(from->sin_addr),
                   v == WIRE_AUTH ? "failed authentication; check --secret-file" : "malformed or another protocol");
    } else if (e->body_case == LATDISC__ENVELOPE__BODY_REFUSAL) {
        on_refusal(d, e, d->has_key);
    } else if (strcmp(e->cluster, d->cluster) != 0) {
        cnt(&d->c_refused); /* another grid sharing the group: not ours to answer */
    } else if (e->body_case == LATDISC__ENVELOPE__BODY_PROBE && !d->client && d->state != ST_LEAVING &&
               strcmp(e->sender, d->id) != 0 && d->mc_send_fd >= 0) {
        Latdisc__Envelope r;
        Latdisc__ProbeAnswer a;
        ld_env_init(d, &r);
        latdisc__probe_answer__init(&a);
        a.addr = d->my_addr;
        r.body_case = LATDISC__ENVELOPE__BODY_PROBE_ANSWER;
        r.probe_answer = &a;
        ld_send_datagram(d, d->mc_send_fd, from, &r, false);
    } else if (e->body_case == LATDISC__ENVELOPE__BODY_PROBE_ANSWER && d->state == ST_JOINING) {
        if (ld_ensure_conn(d, e->probe_answer->addr, true))
            LT_LOG(LT_DEBUG, MOD, "multicast: %.100s answered", e->probe_answer->addr);
    } else if (e->body_case == LATDISC__ENVELOPE__BODY_PROBE_ANSWER && d->state == ST_JOINED) {
        ld_note_candidate(d, e->probe_answer->addr);
    }
    wire_free(e);
}

/* ---------------------------------------------------------------- timers */

static void send_joins(lattice_discovery *d, int64_t now)
{
    if (now - d->last_join_send_ms < JOIN_RETRY_MS) return;
    d->last_join_send_ms = now;
    Latdisc__Envelope e;
    Latdisc__JoinRequest j;
    Latdisc__Member pm;
    lattice_member me;
    self_member(d, &me, 0);
    if (member_to_proto(&me, &pm) != LATTICE_OK) return;
    ld_env_init(d, &e);
    latdisc__join_request__init(&j);
    j.self = &pm;
    e.body_case = LATDISC__ENVELOPE__BODY_JOIN;
    e.join = &j;
    const char *target = d->merge_to;
    if (d->merge_to[0] && now < d->merge_until_ms) ld_send_many(d, &target, 1, &e); /* merge.c */
    else ld_send_many(d, NULL, d->n_conns, &e);
    member_proto_release(&pm);
    if (d->mcast && d->mc_send_fd >= 0 && now - d->last_probe_ms >= d->m_wait_ms) {
        d->last_probe_ms = now;
        ld_send_probe(d);
    }
}

/* No grid answered: the smallest live joining server starts one (v1.0). */
static void maybe_seed(lattice_discovery *d, int64_t now)
{
    int64_t wait = ELECT_WAIT_MS;
    if (d->mcast && (int64_t)d->m_attempts * d->m_wait_ms > wait) wait = (int64_t)d->m_attempts * d->m_wait_ms;
    /* A node that was in a grid only ever rejoins one: it was removed or
     * dissolved by a grid that exists, which may answer late (after a
     * partition heals, connections come back seconds apart).  A grid of its
     * own would start with a quorum of one beside it and metadata of its
     * own; restarting the process is the way to start a new grid. */
    if (d->client || d->view || now - d->join_started_ms < wait) return;
    /* A dns:// name not answered yet may name the grid (a slow name server
     * must not make every node of a headless service seed its own). */
    if (!ld_dns_answered(d)) return;
    if (d->saw_cluster_ms && now - d->saw_cluster_ms < ld_seed_hold_ms(d)) return;
    for (size_t i = 0; i < d->n_joiners; i++)
        if (now - d->joiners[i].seen_ms < ELECT_WAIT_MS && strcmp(d->joiners[i].key, d->consistent_id) < 0)
            return;
    if (ld_seed_held(d, now)) return;
    lattice_member me;
    self_member(d, &me, 1);
    const lattice_member *ms[1] = {&me};
    lattice_topology *t = topo_build(1, 0, 2, (uint32_t)d->fd_ms, d->id, ms, 1);
    const char *first[1] = {d->consistent_id}; /* the first server: the grid's first baseline */
    if (t && !topo_set_baseline(t, first, 1, 1)) {
        topo_put(t);
        t = NULL;
    }
    if (!t) return;
    Latdisc__Change ch, *chp = &ch;
    latdisc__change__init(&ch);
    ch.id = d->id;
    ch.kind = LATTICE_EVENT_JOINED;
    LT_LOG(LT_INFO, MOD, "no grid answered within %lld ms: starting cluster '%s' as its first node", (long long)wait,
           d->cluster);
    adopt(d, t, &chp, 1);
}

static void joined_tick(lattice_discovery *d, int64_t now)
{
    if (now - d->last_hb_ms >= ld_cfd(d) / 5) {
        d->last_hb_ms = now;
        send_heartbeat(d, NULL);
    }
    const lattice_topology *t = d->cur;
    if (d->client) {
        /* A client never coordinates; with every server silent it rejoins
         * through whatever server it can still reach. */
        bool any = false;
        for (size_t i = 0; i < t->n && !any; i++) {
            const lattice_member *m = &t->members[i];
            peer *p = m->role == LATTICE_ROLE_SERVER ? find_peer(d, m->id) : NULL;
            any = p && now - p->last_heard_ms <= ld_cfd(d);
        }
        if (!any) ld_begin_join(d, "no server of the topology answered within failure_detection_ms");
        return;
    }
    const lattice_member *c = effective_coordinator(d, now);
    if (c && strcmp(c->id, d->id) == 0 && now >= d->quiet_until_ms) {
        coordinate(d, now);
        if (d->state == ST_JOINED) ld_baseline_tick(d, now);
        if (d->state == ST_JOINED) ld_send_hellos(d, now);
    }
}

/* ------------------------------------------------------------ the thread */

static size_t build_poll(lattice_discovery *d, zmq_pollitem_t *it)
{
    size_t n = 0;
    it[n++] = (zmq_pollitem_t){.socket = d->router, .events = ZMQ_POLLIN};
    it[n++] = (zmq_pollitem_t){.socket = d->monitor, .events = ZMQ_POLLIN};
    it[n++] = (zmq_pollitem_t){.fd = d->wake_fd, .events = ZMQ_POLLIN};
    if (d->mc_listen_fd >= 0) it[n++] = (zmq_pollitem_t){.fd = d->mc_listen_fd, .events = ZMQ_POLLIN};
    if (d->mc_send_fd >= 0) it[n++] = (zmq_pollitem_t){.fd = d->mc_send_fd, .events = ZMQ_POLLIN};
    for (size_t i = 0; i < d->n_conns; i++) it[n++] = (zmq_pollitem_t){.socket = d->conns[i].sock, .events = ZMQ_POLLIN};
    return n;
}

/* Drain everything that arrived before any timer runs: after a stall, the
 * heartbeats queued meanwhile must count before we judge anyone silent. */
static void drain_all(lattice_discovery *d)
{
    for (int k = 0; k < 10000 && ld_recv_one(d, d->router, true); k++) {}
    ld_drain_monitor(d);
    if (d->mc_listen_fd >= 0) ld_drain_udp(d, d->mc_listen_fd);
    if (d->mc_send_fd >= 0) ld_drain_udp(d, d->mc_send_fd);
    for (size_t i = 0; i < d->n_conns; i++) {
        void *s = d->conns[i].sock;
        for (int k = 0; k < 1000 && ld_recv_one(d, s, false); k++)
            if (i >= d->n_conns || d->conns[i].sock != s) break; /* conns changed under us */
    }
}

static void leave_grid(lattice_discovery *d)
{
    if (d->state != ST_JOINED) return;
    const lattice_topology *t = d->cur;
    d->state = ST_LEAVING;
    if (t->n <= 1) return;
    LT_LOG(LT_INFO, MOD, "leaving the grid gracefully");
    Latdisc__Envelope e;
    Latdisc__Leave l;
    ld_env_init(d, &e);
    latdisc__leave__init(&l);
    e.body_case = LATDISC__ENVELOPE__BODY_LEAVE;
    e.leave = &l;
    for (size_t i = 0; i < t->n; i++)
        if (strcmp(t->members[i].id, d->id) != 0) ld_send_to(d, t->members[i].addr, &e);
    /* Wait for the coordinator (maybe a new one) to announce us gone. */
    uint64_t until = lt_mono_ms() + 1000;
    zmq_pollitem_t it[MAX_CONNS + 8];
    while (d->state == ST_LEAVING && lt_mono_ms() < until) {
        size_t n = build_poll(d, it);
        zmq_poll(it, (int)n, LOOP_TICK_MS);
        drain_all(d);
    }
}

/* Timer granularity: 1/50 of the timeout, 10..100 ms - removal within a
 * tick of the timeout, without waking an idle default grid (10 s) 50 times a
 * second.  Frames wake the poll at once whatever the tick. */
static int tick_ms(const lattice_discovery *d)
{
    int t = ld_cfd(d) / 50;
    return t < 10 ? 10 : t > LOOP_TICK_MS * 5 ? LOOP_TICK_MS * 5 : t;
}

/* The discovery thread stood still since its last look (a pause, or a
 * machine too busy to run it): our lease lapsed meanwhile, so nothing was
 * served from the stale view; whether the grid removed us, its answers to
 * our next heartbeats say (a removed node is refused and rejoins as a new
 * one).  Rejoining on our own would turn mere scheduling delay into dropped
 * copies.  Until a failure detection period has passed we do not
 * coordinate: what we hear now is older than what the others decided
 * meanwhile, and the others may have stood still too - the first to wake
 * must not remove the rest.  Half the timeout counts: a peer's last
 * heartbeat may be a fifth of it older than the stall. */
static void note_stall(lattice_discovery *d, int64_t now)
{
    int64_t gap = now - d->last_loop_ms;
    d->last_loop_ms = now;
    if (d->state == ST_JOINING && gap > ELECT_WAIT_MS / 2) {
        /* The seed election needs the time to hear the other joining
         * servers, and a stall gave us none of it: when the whole machine
         * stood still, every node wakes with its wait run out and the
         * others' last joins older than ELECT_WAIT_MS, and each would start
         * a grid of its own in the same instant.  Listen again first. */
        LT_LOG(LT_WARN, MOD, "this node was stalled for %lld ms while joining: listening %d ms more for a grid or a "
               "smaller joining server before starting a grid of its own", (long long)gap, ELECT_WAIT_MS);
        d->join_started_ms = now;
        return;
    }
    if (d->state != ST_JOINED || gap <= ld_cfd(d) / 2) return;
    LT_LOG(LT_WARN, MOD, "this node was stalled for %lld ms (failure detection %d ms): serving "
           "nothing until the grid confirms it is still a member", (long long)gap, ld_cfd(d));
    d->quiet_until_ms = now + ld_cfd(d);
    ld_update_lease(d);
}

void *ld_thread_main(void *arg)
{
    lattice_discovery *d = arg;
    rcu_register_thread();
    ld_begin_join(d, NULL);
    d->last_loop_ms = lt_mono_ms();
    zmq_pollitem_t it[MAX_CONNS + 8];
    while (!atomic_load(&d->stop_req)) {
        size_t n = build_poll(d, it);
        zmq_poll(it, (int)n, tick_ms(d));
        int64_t now = lt_mono_ms();
        note_stall(d, now);
        drain_all(d);
        ld_dns_poll(d, now);
        /* Again: a stall while draining leaves what
         * we heard as old as before it, and nobody may be judged silent on
         * that. */
        now = lt_mono_ms();
        note_stall(d, now);
        if (d->state == ST_JOINING) {
            send_joins(d, now);
            maybe_seed(d, now);
        } else if (d->state == ST_JOINED) {
            joined_tick(d, now);
        }
        ld_baseline_pump(d, now);
    }
    leave_grid(d);
    d->state = ST_STOPPED;
    publish(d, NULL);
    rcu_barrier(); /* every deferred put ran before we go */
    rcu_unregister_thread();
    return NULL;
}
