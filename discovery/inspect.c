/*
 * inspect: a view of a grid from outside it (what `lattice top` shows),
 * without joining - so inspecting never bumps the topology version, and a
 * grid whose coordinator just died answers at once (no join to wait for).
 *
 * The asker opens a DEALER to every static finder address (dns:// names
 * resolved once) and sends one
 * Inspect envelope (MAC'd with the cluster key like every peer frame).  Any
 * member (joined or leaving) answers on its peer ROUTER with an
 * InspectAnswer: its current topology and, per member, the stats of its
 * latest heartbeat, how long it has been silent, and a state - "alive",
 * "silent" (a heartbeat late, not removed yet) or "leaving".  The
 * asker keeps the first answer; refusals (cluster name, secret, protocol)
 * are reported when no member answered.
 */
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "internal.h"
#include "lattice/alloc.h"
#include "lattice/clock.h"
#include "state.h"

#define MAX_ADDRS 512

typedef struct inspected_member {
    char id[64];
    lattice_member_state st;
    char state[16];
} inspected_member;

struct lattice_inspection {
    lattice_topology *t;
    char source[128];
    size_t n;
    inspected_member *m;
};

/* ------------------------------------------------------------ the member */

/* What this node hears of member `id` now: the stats of its latest
 * heartbeat, how long it has been silent and a state.  Any thread (the peer
 * table is read under stats_lock); fd_ms is the grid's failure detection.
 * out->state is a static string. */
static void hear(lattice_discovery *d, const char *id, int fd_ms, int64_t now, lattice_member_state *out)
{
    memset(out, 0, sizeof *out);
    out->have_stats = lattice_discovery_stats(d, id, &out->stats) == LATTICE_OK;
    char self[64];
    lattice_discovery_local_id(d, self, sizeof self);
    pthread_mutex_lock(&d->stats_lock);
    const peer *p = strcmp(id, self) == 0 ? NULL : find_peer(d, id);
    uint64_t silent = p && now > p->last_heard_ms ? (uint64_t)(now - p->last_heard_ms) : 0;
    bool leaving = p && p->leaving;
    pthread_mutex_unlock(&d->stats_lock);
    out->silent_ms = silent;
    /* Heartbeats go every fd/5: half an interval late is worth showing (the
     * node is removed as failed after five). */
    out->state = leaving ? "leaving" : silent > (uint64_t)(3 * fd_ms / 10) ? "silent" : "alive";
}

lattice_status lattice_discovery_member_state(lattice_discovery *d, const char *id, lattice_member_state *out)
{
    lattice_topology *t = id ? lattice_discovery_topology(d) : NULL;
    bool member = t && lattice_topology_find(t, id) != NULL;
    int fd_ms = t && t->fd_ms >= 100 ? (int)t->fd_ms : d->fd_ms;
    if (t) lattice_topology_release(t);
    if (!member) return LATTICE_ERR_NOT_FOUND;
    hear(d, id, fd_ms, lt_mono_ms(), out);
    return LATTICE_OK;
}

void ld_on_inspect(lattice_discovery *d, const zmq_msg_t *route)
{
    if (!route || (d->state != ST_JOINED && d->state != ST_LEAVING) || !d->cur) return;
    const lattice_topology *t = d->cur;
    Latdisc__Topology view;
    Latdisc__MemberState *ms = lt_calloc(t->n ? t->n : 1, sizeof *ms);
    Latdisc__MemberState **msp = lt_calloc(t->n ? t->n : 1, sizeof *msp);
    Latdisc__Stats *ss = lt_calloc(t->n ? t->n : 1, sizeof *ss);
    if (!ms || !msp || !ss || topo_to_proto(t, &view) != LATTICE_OK) {
        lt_free(ms), lt_free(msp), lt_free(ss);
        return;
    }
    int64_t now = lt_mono_ms();
    for (size_t i = 0; i < t->n; i++) {
        const lattice_member *m = &t->members[i];
        latdisc__member_state__init(&ms[i]);
        msp[i] = &ms[i];
        ms[i].id = (char *)m->id;
        lattice_member_state h;
        hear(d, m->id, ld_cfd(d), now, &h);
        ms[i].state = (char *)h.state;
        ms[i].silent_ms = h.silent_ms;
        if (h.have_stats) {
            const lattice_node_stats s = h.stats;
            latdisc__stats__init(&ss[i]);
            ss[i].cpu_load = s.cpu_load;
            ss[i].rss_bytes = s.rss_bytes;
            ss[i].uptime_ms = s.uptime_ms;
            ss[i].frames_in = s.frames_in;
            ss[i].malformed = s.malformed;
            ss[i].oversized = s.oversized;
            ss[i].auth_failed = s.auth_failed;
            ss[i].refused = s.refused;
            ss[i].handshake_failed = s.handshake_failed;
            ms[i].stats = &ss[i];
        }
    }
    Latdisc__InspectAnswer a;
    latdisc__inspect_answer__init(&a);
    a.view = &view;
    a.n_members = t->n;
    a.members = msp;
    Latdisc__Envelope e;
    ld_env_init(d, &e);
    e.body_case = LATDISC__ENVELOPE__BODY_INSPECT_ANSWER;
    e.inspect_answer = &a;
    ld_send_env(d, d->router, route, &e, false);
    topo_proto_release(&view);
    lt_free(ms);
    lt_free(msp);
    lt_free(ss);
}

/* ------------------------------------------------------------- the asker */

static lattice_inspection *from_answer(const Latdisc__InspectAnswer *a, const char *source)
{
    if (!a->view) return NULL;
    lattice_inspection *x = lt_calloc(1, sizeof *x);
    if (!x) return NULL;
    x->t = topo_from_proto(a->view);
    x->m = lt_calloc(a->n_members ? a->n_members : 1, sizeof *x->m);
    if (!x->t || !x->m) {
        lattice_inspection_free(x);
        return NULL;
    }
    snprintf(x->source, sizeof x->source, "%s", source);
    for (size_t i = 0; i < a->n_members; i++) {
        const Latdisc__MemberState *s = a->members[i];
        inspected_member *m = &x->m[x->n++];
        snprintf(m->id, sizeof m->id, "%s", s->id);
        snprintf(m->state, sizeof m->state, "%s", s->state);
        m->st.state = m->state;
        m->st.silent_ms = s->silent_ms;
        if (s->stats) {
            const Latdisc__Stats *p = s->stats;
            m->st.have_stats = true;
            m->st.stats = (lattice_node_stats){p->cpu_load, p->rss_bytes, p->uptime_ms, p->frames_in, p->malformed,
                                               p->oversized, p->auth_failed, p->refused, p->handshake_failed};
        }
    }
    return x;
}

static lattice_status refusal_status(uint32_t reason)
{
    return reason == 1 ? LATTICE_ERR_CLUSTER : reason == 3 ? LATTICE_ERR_PROTO : LATTICE_ERR_AUTH;
}

/* One message from a DEALER: an answer (*out set), a refusal (*refused
 * set), or nothing of use. */
static void read_one(void *s, const uint8_t *key, const char *source, lattice_inspection **out,
                     lattice_status *refused)
{
    zmq_msg_t parts[2];
    int n = 0, more = 1;
    while (more) {
        zmq_msg_t m;
        zmq_msg_init(&m);
        if (zmq_msg_recv(&m, s, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&m);
            break;
        }
        more = zmq_msg_more(&m);
        if (n < 2) parts[n++] = m;
        else zmq_msg_close(&m);
    }
    if (n == 0) return;
    const uint8_t *buf = zmq_msg_data(&parts[0]);
    size_t len = zmq_msg_size(&parts[0]);
    const uint8_t *mac = n > 1 ? zmq_msg_data(&parts[1]) : NULL;
    size_t mac_len = n > 1 ? zmq_msg_size(&parts[1]) : 0;
    Latdisc__Envelope *e = NULL;
    if (wire_decode(buf, len, mac, mac_len, key, 16u << 20, &e) == WIRE_OK &&
        e->body_case == LATDISC__ENVELOPE__BODY_INSPECT_ANSWER) {
        *out = from_answer(e->inspect_answer, source);
    } else {
        /* Refusals travel without a MAC: the refuser may lack our key. */
        wire_free(e);
        e = NULL;
        if (wire_decode(buf, len, NULL, 0, NULL, 16u << 20, &e) == WIRE_OK &&
            e->body_case == LATDISC__ENVELOPE__BODY_REFUSAL)
            *refused = refusal_status(e->refusal->reason);
    }
    wire_free(e);
    for (int i = 0; i < n; i++) zmq_msg_close(&parts[i]);
}

static lattice_status send_inspect(void *s, const char *cluster, const uint8_t *key)
{
    Latdisc__Envelope e;
    Latdisc__Inspect q;
    latdisc__envelope__init(&e);
    latdisc__inspect__init(&q);
    e.proto_major = LATTICE_PROTO_MAJOR;
    e.proto_minor = LATTICE_PROTO_MINOR;
    e.cluster = (char *)cluster;
    e.sender = "inspect";
    e.sender_addr = "";
    e.body_case = LATDISC__ENVELOPE__BODY_INSPECT;
    e.inspect = &q;
    uint8_t *buf, mac[LT_FRAME_MAC_BYTES];
    size_t len;
    lattice_status st = wire_encode(&e, key, &buf, &len, mac);
    if (st != LATTICE_OK) return st;
    if (zmq_send(s, buf, len, ZMQ_DONTWAIT | (key ? ZMQ_SNDMORE : 0)) >= 0 && key)
        zmq_send(s, mac, LT_FRAME_MAC_BYTES, ZMQ_DONTWAIT);
    lt_free(buf);
    return LATTICE_OK;
}

lattice_status lattice_discovery_inspect(const lattice_discovery_config *c, int timeout_ms,
                                         lattice_inspection **out)
{
    *out = NULL;
    static __thread lattice_finder_addr addrs[MAX_ADDRS];
    size_t n = 0;
    for (size_t i = 0; i < c->n_finders; i++) {
        if (lattice_finder_is_multicast(c->finders[i])) return LATTICE_ERR_UNSUPPORTED;
        size_t k = 0;
        if (lattice_finder_is_dns(c->finders[i])) {
            char name[256];
            int port;
            if (lattice_finder_parse_dns(c->finders[i], name, &port) != LATTICE_OK) return LATTICE_ERR_INVAL;
            lattice_finder_resolve_dns(name, port, addrs + n, MAX_ADDRS - n, &k, NULL, NULL, NULL); /* none yet: others may answer */
        } else {
            lattice_status st = lattice_finder_parse_static(c->finders[i], LATTICE_DEFAULT_PORT, 10, addrs + n,
                                                            MAX_ADDRS - n, &k);
            if (st != LATTICE_OK) return st;
        }
        n += k;
    }
    if (!n) return LATTICE_ERR_TIMEOUT; /* dns:// names without records: nobody to ask */
    uint8_t key[LT_FRAME_KEY_BYTES];
    if (c->secret) wire_derive_key(c->secret, c->secret_len, key);
    void *ctx = zmq_ctx_new();
    void **socks = lt_calloc(n, sizeof *socks);
    zmq_pollitem_t *items = lt_calloc(n, sizeof *items);
    lattice_status refused = LATTICE_OK, st = LATTICE_ERR_TIMEOUT;
    if (!ctx || !socks || !items) {
        st = LATTICE_ERR_NOMEM;
        goto out;
    }
    int zero = 0;
    for (size_t i = 0; i < n; i++) {
        char ep[128];
        snprintf(ep, sizeof ep, "tcp://%.63s:%d", addrs[i].host, addrs[i].port);
        socks[i] = zmq_socket(ctx, ZMQ_DEALER);
        zmq_setsockopt(socks[i], ZMQ_LINGER, &zero, sizeof zero);
        /* Queue for a peer only once connected: an absent address never
         * holds the inspect. */
        int one = 1;
        zmq_setsockopt(socks[i], ZMQ_IMMEDIATE, &one, sizeof one);
        zmq_connect(socks[i], ep);
        items[i] = (zmq_pollitem_t){socks[i], 0, ZMQ_POLLIN, 0};
    }
    /* Resend every 200 ms: ZMQ_IMMEDIATE drops what a not yet connected
     * DEALER would queue. */
    uint64_t until = lt_mono_ms() + (uint64_t)timeout_ms, next_send = 0, refused_at = 0;
    /* A refusal is final once it stood a second with no member answering
     * (another address may still admit us: a node of another grid). */
    while (!*out && lt_mono_ms() < until && !(refused_at && lt_mono_ms() - refused_at >= 1000)) {
        if (lt_mono_ms() >= next_send) {
            for (size_t i = 0; i < n; i++) send_inspect(socks[i], c->cluster, c->secret ? key : NULL);
            next_send = lt_mono_ms() + 200;
        }
        if (zmq_poll(items, (int)n, 50) <= 0) continue;
        for (size_t i = 0; i < n && !*out; i++) {
            if (!(items[i].revents & ZMQ_POLLIN)) continue;
            char src[128];
            snprintf(src, sizeof src, "tcp://%.63s:%d", addrs[i].host, addrs[i].port);
            read_one(socks[i], c->secret ? key : NULL, src, out, &refused);
            if (refused != LATTICE_OK && !refused_at) refused_at = lt_mono_ms();
        }
    }
    st = *out ? LATTICE_OK : refused != LATTICE_OK ? refused : LATTICE_ERR_TIMEOUT;
out:
    for (size_t i = 0; socks && i < n; i++)
        if (socks[i]) zmq_close(socks[i]);
    lt_free(socks);
    lt_free(items);
    if (ctx) zmq_ctx_term(ctx);
    return st;
}

const lattice_topology *lattice_inspection_topology(const lattice_inspection *x) { return x->t; }
const char *lattice_inspection_source(const lattice_inspection *x) { return x->source; }

lattice_status lattice_inspection_member(const lattice_inspection *x, const char *id, lattice_member_state *out)
{
    for (size_t i = 0; i < x->n; i++)
        if (!strcmp(x->m[i].id, id)) {
            *out = x->m[i].st;
            return LATTICE_OK;
        }
    return LATTICE_ERR_NOT_FOUND;
}

void lattice_inspection_free(lattice_inspection *x)
{
    if (!x) return;
    if (x->t) topo_put(x->t);
    lt_free(x->m);
    lt_free(x);
}
