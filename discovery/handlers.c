/*
 * What arrives at the discovery thread: each frame (peer ROUTER and DEALERs)
 * and datagram (multicast) judged - authentication, size, protocol version,
 * cluster name - and handed to the handler of its kind: joins, heartbeats
 * and their acks, refusals, leaves and multicast probes here; topologies in
 * discovery.c, hellos and dissolves in merge.c, baseline changes in
 * baseline.c, inspections in inspect.c.  Discovery thread only; the state
 * machine and the lock rules are drawn in discovery.c's header.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

#include "state.h"
#include "lattice/log.h"

static bool is_member(const lattice_topology *t, const char *id) { return lattice_topology_find(t, id) != NULL; }

static bool pending_has(lattice_discovery *d, const char *id)
{
    for (size_t i = 0; i < d->n_pending; i++)
        if (strcmp(d->pending[i].id, id) == 0) return true;
    return false;
}

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
    const lattice_member *coord = ld_effective_coordinator(d, lt_mono_ms());
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
        ld_send_topology(d, t, NULL, 0, m->addr); /* it missed the announcement */
        return;
    }
    if (ld_was_removed(d, m->id)) {
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
         * majority rejoin and drop its copies (ld_on_topology ignores its
         * view for the same reason). */
        if (ld_was_removed(d, e->sender) && ld_present_quorum(t))
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
    if (first) ld_send_heartbeat(d, lattice_topology_find(t, e->sender)->addr);
    bool behind = h->major < t->major || (h->major == t->major && h->minor < t->minor);
    if (behind && strcmp(t->coordinator, d->id) == 0) {
        const lattice_member *m = lattice_topology_find(t, e->sender);
        ld_send_topology(d, t, NULL, 0, m->addr);
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
    case LATDISC__ENVELOPE__BODY_TOPOLOGY: ld_on_topology(d, e, route); break;
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
