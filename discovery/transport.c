/*
 * Control-plane sockets, owned by the discovery thread: the ROUTER on the
 * peer port (bound within the port range) and its handshake monitor, one
 * DEALER per peer address, the multicast UDP sockets; framing of envelopes
 * (envelope frame + MAC frame) and datagrams (envelope bytes + MAC).
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

/* ------------------------------------------------------------ connections */

conn *ld_find_conn(lattice_discovery *d, const char *addr)
{
    for (size_t i = 0; i < d->n_conns; i++)
        if (strcmp(d->conns[i].addr, addr) == 0) return &d->conns[i];
    return NULL;
}

conn *ld_ensure_conn(lattice_discovery *d, const char *addr, bool finder)
{
    if (!addr || strncmp(addr, "tcp://", 6) != 0 || strlen(addr) >= sizeof d->conns[0].addr) return NULL;
    if (strcmp(addr, d->my_addr) == 0) return NULL;
    conn *c = ld_find_conn(d, addr);
    if (c) {
        c->finder |= finder;
        return c;
    }
    if (d->n_conns == MAX_CONNS) return NULL;
    void *s = zmq_socket(d->zctx, ZMQ_DEALER);
    if (!s) return NULL;
    int linger = 500, hwm = 64, ivl = 100, ivl_max = 1000; /* linger: a last topology reaches a removed node */
    zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(s, ZMQ_SNDHWM, &hwm, sizeof hwm);
    zmq_setsockopt(s, ZMQ_RECONNECT_IVL, &ivl, sizeof ivl);
    zmq_setsockopt(s, ZMQ_RECONNECT_IVL_MAX, &ivl_max, sizeof ivl_max);
    zmq_setsockopt(s, ZMQ_MAXMSGSIZE, &(int64_t){(int64_t)d->max_msg * 4 + 4096}, sizeof(int64_t));
    if (zmq_connect(s, addr) != 0) {
        zmq_close(s);
        return NULL;
    }
    c = &d->conns[d->n_conns++];
    snprintf(c->addr, sizeof c->addr, "%s", addr);
    c->sock = s;
    c->finder = finder;
    return c;
}

void ld_close_conn_at(lattice_discovery *d, size_t i)
{
    zmq_close(d->conns[i].sock);
    d->conns[i] = d->conns[--d->n_conns];
}

/* --------------------------------------------------------------- sending */

void ld_env_init(lattice_discovery *d, Latdisc__Envelope *e)
{
    latdisc__envelope__init(e);
    e->proto_major = LATTICE_PROTO_MAJOR;
    e->proto_minor = LATTICE_PROTO_MINOR;
    e->cluster = d->cluster;
    e->sender = d->id;
    e->sender_addr = d->my_addr;
}

/* Send e on sock, preceded by a routing frame when route != NULL.  With
 * `unauthenticated` no MAC frame is added (refusals: the receiver may not
 * have our key). */
static void send_bytes(void *sock, const zmq_msg_t *route, const uint8_t *buf, size_t len, const uint8_t *mac)
{
    /* DONTWAIT everywhere: a dead peer's full queue (SNDHWM) drops the frame
     * rather than stalling the discovery thread. */
    if (route && zmq_send(sock, zmq_msg_data((zmq_msg_t *)route), zmq_msg_size(route),
                          ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0)
        return;
    if (zmq_send(sock, buf, len, ZMQ_DONTWAIT | (mac ? ZMQ_SNDMORE : 0)) < 0) return;
    if (mac) zmq_send(sock, mac, LT_FRAME_MAC_BYTES, ZMQ_DONTWAIT);
}

void ld_send_env(lattice_discovery *d, void *sock, const zmq_msg_t *route, const Latdisc__Envelope *e,
                     bool unauthenticated)
{
    uint8_t *buf, mac[LT_FRAME_MAC_BYTES];
    size_t len;
    bool with_mac = d->has_key && !unauthenticated;
    if (wire_encode(e, with_mac ? d->key : NULL, &buf, &len, mac) != LATTICE_OK) return;
    send_bytes(sock, route, buf, len, with_mac ? mac : NULL);
    lt_free(buf);
}

void ld_send_many(lattice_discovery *d, const char *const *addrs, size_t n, const Latdisc__Envelope *e)
{
    uint8_t *buf, mac[LT_FRAME_MAC_BYTES];
    size_t len;
    if (!n || wire_encode(e, d->has_key ? d->key : NULL, &buf, &len, mac) != LATTICE_OK) return;
    for (size_t i = 0; i < n; i++) {
        conn *c = addrs ? ld_ensure_conn(d, addrs[i], false) : &d->conns[i];
        if (c) send_bytes(c->sock, NULL, buf, len, d->has_key ? mac : NULL);
    }
    lt_free(buf);
}

void ld_send_to(lattice_discovery *d, const char *addr, const Latdisc__Envelope *e)
{
    conn *c = ld_ensure_conn(d, addr, false);
    if (c) ld_send_env(d, c->sock, NULL, e, false);
}

void ld_reply_refusal(lattice_discovery *d, const zmq_msg_t *route, int reason, const char *text,
                      const char *about_id)
{
    if (!route) return;
    Latdisc__Envelope e;
    Latdisc__Refusal r;
    ld_env_init(d, &e);
    latdisc__refusal__init(&r);
    r.reason = (uint32_t)reason;
    r.text = (char *)text;
    if (about_id) r.about_id = (char *)about_id;
    e.body_case = LATDISC__ENVELOPE__BODY_REFUSAL;
    e.refusal = &r;
    /* REMOVED is only believed when authenticated; the others must reach a
     * peer that may lack our key, so they travel without a MAC. */
    ld_send_env(d, d->router, route, &e, reason != REF_REMOVED);
}

/* ------------------------------------------------------------- receiving */

/* Read one multipart message from sock (ROUTER: with a routing frame). */
bool ld_recv_one(lattice_discovery *d, void *sock, bool is_router)
{
    zmq_msg_t parts[4];
    size_t n = 0;
    int more = 1;
    bool got = false;
    while (more) {
        zmq_msg_t tmp;
        zmq_msg_init(&tmp);
        if (zmq_msg_recv(&tmp, sock, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&tmp);
            break;
        }
        got = true;
        more = zmq_msg_more(&tmp);
        if (n < 4) parts[n++] = tmp;
        else zmq_msg_close(&tmp); /* too many frames: counted below */
    }
    if (!got) return false;
    size_t first = is_router ? 1 : 0, body = n - first;
    const char *via = is_router ? "peer port" : "peer connection";
    if (n == 4 || body < 1 || body > 2) {
        cnt(&d->c_frames);
        cnt(&d->c_malformed);
        if (gate(d, 3)) LT_LOG(LT_WARN, MOD, "dropped a message with %zu frames on the %s", n, via);
    } else {
        const zmq_msg_t *b = &parts[first];
        const zmq_msg_t *m = body == 2 ? &parts[first + 1] : NULL;
        ld_handle_frame(d, is_router ? &parts[0] : NULL, zmq_msg_data((zmq_msg_t *)b), zmq_msg_size(b),
                     m ? zmq_msg_data((zmq_msg_t *)m) : NULL, m ? zmq_msg_size(m) : 0, via);
    }
    for (size_t i = 0; i < n; i++) zmq_msg_close(&parts[i]);
    return true;
}

/* ROUTER monitor: count connections that failed the ZMTP handshake (raw
 * garbage on the peer port never becomes a message). */
void ld_drain_monitor(lattice_discovery *d)
{
    for (;;) {
        zmq_msg_t ev, addr;
        zmq_msg_init(&ev);
        if (zmq_msg_recv(&ev, d->monitor, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&ev);
            return;
        }
        uint16_t event = 0;
        if (zmq_msg_size(&ev) >= 2) memcpy(&event, zmq_msg_data(&ev), 2);
        bool more = zmq_msg_more(&ev);
        zmq_msg_close(&ev);
        if (more) {
            zmq_msg_init(&addr);
            zmq_msg_recv(&addr, d->monitor, 0);
            zmq_msg_close(&addr);
        }
        if (event & (ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                     ZMQ_EVENT_HANDSHAKE_FAILED_AUTH)) {
            cnt(&d->c_handshake);
            if (gate(d, 6)) LT_LOG(LT_WARN, MOD, "a connection on the peer port ended before a ZeroMQ handshake (not a ZeroMQ peer, or it hung up)");
        }
    }
}

/* Datagram layout: one flag byte (1 = no MAC, 2 = MAC follows), the
 * envelope bytes, then the 32-byte MAC when flagged.  With `unauthenticated`
 * no MAC is added (refusals). */
void ld_send_probe(lattice_discovery *d)
{
    Latdisc__Envelope pe;
    Latdisc__Probe pr;
    ld_env_init(d, &pe);
    latdisc__probe__init(&pr);
    pe.body_case = LATDISC__ENVELOPE__BODY_PROBE;
    pe.probe = &pr;
    struct sockaddr_in g = {.sin_family = AF_INET, .sin_port = htons((uint16_t)d->mport)};
    inet_pton(AF_INET, d->mgroup, &g.sin_addr);
    ld_send_datagram(d, d->mc_send_fd, &g, &pe, false);
}

void ld_send_datagram(lattice_discovery *d, int fd, const struct sockaddr_in *to, const Latdisc__Envelope *e,
                      bool unauthenticated)
{
    uint8_t *buf, mac[LT_FRAME_MAC_BYTES];
    size_t len;
    bool with_mac = d->has_key && !unauthenticated;
    if (wire_encode(e, with_mac ? d->key : NULL, &buf, &len, mac) != LATTICE_OK) return;
    uint8_t out[LD_DATAGRAM_MAX];
    size_t total = 1 + len + (with_mac ? LT_FRAME_MAC_BYTES : 0);
    if (total <= sizeof out) {
        out[0] = with_mac ? 2 : 1;
        memcpy(out + 1, buf, len);
        if (with_mac) memcpy(out + 1 + len, mac, LT_FRAME_MAC_BYTES);
        sendto(fd, out, total, MSG_DONTWAIT, (const struct sockaddr *)to, sizeof *to);
    }
    lt_free(buf);
}

/* Datagrams: probes on the group socket, answers on the sender socket. */
void ld_drain_udp(lattice_discovery *d, int fd)
{
    uint8_t buf[LD_DATAGRAM_MAX + 1];
    for (;;) {
        struct sockaddr_in from;
        socklen_t fl = sizeof from;
        ssize_t n = recvfrom(fd, buf, sizeof buf, MSG_DONTWAIT, (struct sockaddr *)&from, &fl);
        if (n < 0) return;
        size_t len = (size_t)n;
        bool ok = len >= 2 && len <= LD_DATAGRAM_MAX && (buf[0] == 1 || (buf[0] == 2 && len > 1 + LT_FRAME_MAC_BYTES));
        if (!ok) {
            cnt(&d->c_frames);
            cnt(&d->c_malformed);
            if (gate(d, 7)) LT_LOG(LT_WARN, MOD, "dropped a malformed %zu-byte datagram from %s", len, inet_ntoa(from.sin_addr));
            continue;
        }
        size_t body = len - 1 - (buf[0] == 2 ? LT_FRAME_MAC_BYTES : 0);
        ld_handle_datagram(d, &from, buf + 1, body, buf[0] == 2 ? buf + 1 + body : NULL);
    }
}

lattice_status ld_bind_router(lattice_discovery *d)
{
    if (d->port == 0) { /* an ephemeral port: CLI clients */
        char ep[128];
        size_t len = sizeof ep;
        snprintf(ep, sizeof ep, "tcp://%s:*", d->host);
        if (zmq_bind(d->router, ep) != 0 || zmq_getsockopt(d->router, ZMQ_LAST_ENDPOINT, ep, &len) != 0) {
            LT_LOG(LT_ERROR, MOD, "cannot bind an ephemeral port on %s: %s", d->host, zmq_strerror(errno));
            return LATTICE_ERR_IO;
        }
        const char *colon = strrchr(ep, ':');
        d->bound_port = colon ? atoi(colon + 1) : 0;
        snprintf(d->my_addr, sizeof d->my_addr, "%s", ep);
        snprintf(d->consistent_id, sizeof d->consistent_id, "%s:%d", d->host, d->bound_port);
        return LATTICE_OK;
    }
    for (int p = d->port; p < d->port + d->port_range && p <= 65535; p++) {
        char ep[128];
        snprintf(ep, sizeof ep, "tcp://%s:%d", d->host, p);
        if (zmq_bind(d->router, ep) == 0) {
            d->bound_port = p;
            snprintf(d->my_addr, sizeof d->my_addr, "%s", ep);
            snprintf(d->consistent_id, sizeof d->consistent_id, "%s:%d", d->host, p);
            return LATTICE_OK;
        }
        if (errno != EADDRINUSE) {
            LT_LOG(LT_ERROR, MOD, "cannot bind %s: %s", ep, zmq_strerror(errno));
            return LATTICE_ERR_IO;
        }
        LT_LOG(LT_INFO, MOD, "peer port %d is taken; trying %d", p, p + 1);
    }
    LT_LOG(LT_ERROR, MOD, "no free peer port in %d..%d on %s", d->port, d->port + d->port_range - 1, d->host);
    return LATTICE_ERR_IO;
}

lattice_status ld_open_sockets(lattice_discovery *d)
{
    d->zctx = zmq_ctx_new();
    if (!d->zctx) return LATTICE_ERR_IO;
    d->router = zmq_socket(d->zctx, ZMQ_ROUTER);
    if (!d->router) return LATTICE_ERR_IO;
    int zero = 0;
    /* Frames between max_message_bytes and 4x are read and counted as
     * oversized; beyond that libzmq drops the connection itself. */
    int64_t cap = (int64_t)d->max_msg * 4 + 4096;
    zmq_setsockopt(d->router, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(d->router, ZMQ_MAXMSGSIZE, &cap, sizeof cap);
    char mon[64];
    snprintf(mon, sizeof mon, "inproc://lattice-mon-%p", (void *)d);
    if (zmq_socket_monitor(d->router, mon, ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                                              ZMQ_EVENT_HANDSHAKE_FAILED_AUTH) != 0)
        return LATTICE_ERR_IO;
    d->monitor = zmq_socket(d->zctx, ZMQ_PAIR);
    if (!d->monitor || zmq_connect(d->monitor, mon) != 0) return LATTICE_ERR_IO;
    zmq_setsockopt(d->monitor, ZMQ_LINGER, &zero, sizeof zero);
    lattice_status st = ld_bind_router(d);
    if (st != LATTICE_OK) return st;
    d->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (d->wake_fd < 0) return LATTICE_ERR_IO;
    if (d->mcast) {
        d->mc_send_fd = mcast_sender(d->host);
        if (d->mc_send_fd < 0) {
            LT_LOG(LT_ERROR, MOD, "multicast: cannot send through %s: %s", d->host, strerror(errno));
            return LATTICE_ERR_IO;
        }
        if (!d->client) {
            d->mc_listen_fd = mcast_listen(d->mgroup, d->mport, d->host);
            if (d->mc_listen_fd < 0) {
                LT_LOG(LT_ERROR, MOD, "multicast: cannot join %s:%d on %s: %s", d->mgroup, d->mport, d->host,
                       strerror(errno));
                return LATTICE_ERR_IO;
            }
        }
    }
    return LATTICE_OK;
}

void ld_close_sockets(lattice_discovery *d)
{
    for (size_t i = 0; i < d->n_conns; i++) {
        int linger = 0;
        zmq_setsockopt(d->conns[i].sock, ZMQ_LINGER, &linger, sizeof linger);
        zmq_close(d->conns[i].sock);
    }
    d->n_conns = 0;
    if (d->router) {
        zmq_socket_monitor(d->router, NULL, 0);
        zmq_close(d->router);
    }
    if (d->monitor) zmq_close(d->monitor);
    d->router = d->monitor = NULL;
    if (d->zctx) zmq_ctx_term(d->zctx);
    d->zctx = NULL;
    if (d->wake_fd >= 0) close(d->wake_fd);
    if (d->mc_listen_fd >= 0) close(d->mc_listen_fd);
    if (d->mc_send_fd >= 0) close(d->mc_send_fd);
    d->wake_fd = d->mc_listen_fd = d->mc_send_fd = -1;
}
