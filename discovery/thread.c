/*
 * The discovery thread: its loop (drain every socket, then the timers of
 * the state it is in), joining (joins and probes sent, the seed election),
 * a member's tick (heartbeats; on the coordinator, admissions and
 * removals), a stall noticed, and the graceful leave.  The order of work
 * in one iteration and the state machine are drawn in discovery.c's header.
 */
#include <stdio.h>
#include <string.h>

#include "state.h"
#include "lattice/log.h"

/* ---------------------------------------------------------------- timers */

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
    ld_adopt(d, t, &chp, 1);
}

static void joined_tick(lattice_discovery *d, int64_t now)
{
    if (now - d->last_hb_ms >= ld_cfd(d) / 5) {
        d->last_hb_ms = now;
        ld_send_heartbeat(d, NULL);
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
    const lattice_member *c = ld_effective_coordinator(d, now);
    if (c && strcmp(c->id, d->id) == 0 && now >= d->quiet_until_ms) {
        ld_coordinate(d, now);
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
    ld_publish(d, NULL);
    rcu_barrier(); /* every deferred put ran before we go */
    rcu_unregister_thread();
    return NULL;
}
