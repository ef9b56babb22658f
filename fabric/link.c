/*
 * link: the data channel's TCP transport (fabric.h has the contract).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/uio.h>
#include <unistd.h>

#include "base/base.h"
#include "lattice/alloc.h"
#include "lattice/log.h"
#include "fabric.h"

#define READ_CHUNK 65536u
#define WRITE_IOVS 48u           /* frames per sendmsg (3 iovecs each) */

struct link_out {
    link_out *next;
    uint8_t hdr[LINK_HDR_BYTES];
    uint8_t mac[LT_FRAME_MAC_BYTES];
    size_t mac_len, len;
    uint8_t *msg;                /* lt_frame_pack's buffer */
};

/* ------------------------------------------------------------ frame reader */

void link_header(uint8_t hdr[LINK_HDR_BYTES], size_t len, size_t mac_len)
{
    hdr[0] = 'L';
    hdr[1] = 'T';
    hdr[2] = LINK_VERSION;
    hdr[3] = (uint8_t)mac_len;
    hdr[4] = (uint8_t)(len >> 24);
    hdr[5] = (uint8_t)(len >> 16);
    hdr[6] = (uint8_t)(len >> 8);
    hdr[7] = (uint8_t)len;
}

static bool reserve(link_reader *r, size_t need)
{
    if (need <= r->cap) return true;
    size_t cap = r->cap ? r->cap : 256;
    while (cap < need) cap *= 2;
    uint8_t *b = lt_realloc(r->buf, cap);
    if (!b) return false;
    r->buf = b;
    r->cap = cap;
    return true;
}

void link_reader_reset(link_reader *r)
{
    r->have = r->want = 0;
    r->done = false;
    if (r->cap > (1u << 20)) { /* a big frame passed: do not keep its buffer */
        lt_free(r->buf);
        r->buf = NULL;
        r->cap = 0;
    }
}

link_rd link_reader_feed(link_reader *r, const uint8_t *in, size_t n, size_t max_body, size_t *used)
{
    if (r->done) link_reader_reset(r);
    size_t at = 0;
    if (!r->want) {
        size_t k = LINK_HDR_BYTES - r->have < n ? LINK_HDR_BYTES - r->have : n;
        if (!reserve(r, LINK_HDR_BYTES)) return LINK_RD_NOMEM;
        memcpy(r->buf + r->have, in, k);
        r->have += k;
        at = k;
        /* Refuse as early as the bytes allow: a wrong first byte is garbage already. */
        static const uint8_t magic[3] = {'L', 'T', LINK_VERSION};
        for (size_t i = 0; i < r->have && i < 3; i++)
            if (r->buf[i] != magic[i]) return LINK_RD_GARBAGE;
        if (r->have > 3 && r->buf[3] != 0 && r->buf[3] != LT_FRAME_MAC_BYTES) return LINK_RD_GARBAGE;
        if (r->have < LINK_HDR_BYTES) {
            *used = at;
            return LINK_RD_MORE;
        }
        uint32_t len = (uint32_t)r->buf[4] << 24 | (uint32_t)r->buf[5] << 16 | (uint32_t)r->buf[6] << 8 | r->buf[7];
        if (len == 0) return LINK_RD_EMPTY;
        if (len > max_body) return LINK_RD_OVERSIZED;
        r->want = LINK_HDR_BYTES + (size_t)len + r->buf[3];
    }
    size_t k = r->want - r->have < n - at ? r->want - r->have : n - at;
    /* Grow with what arrives, not with what the header announced. */
    if (!reserve(r, r->have + k)) return LINK_RD_NOMEM;
    memcpy(r->buf + r->have, in + at, k);
    r->have += k;
    *used = at + k;
    if (r->have < r->want) return LINK_RD_MORE;
    r->done = true;
    return LINK_RD_FRAME;
}

void link_reader_frame(const link_reader *r, const uint8_t **msg, size_t *len, const uint8_t **mac, size_t *mac_len)
{
    size_t ml = r->buf[3];
    *msg = r->buf + LINK_HDR_BYTES;
    *len = r->want - LINK_HDR_BYTES - ml;
    *mac = ml ? r->buf + r->want - ml : NULL;
    *mac_len = ml;
}

bool link_reader_idle(const link_reader *r) { return r->done || r->have == 0; }

void link_reader_free(link_reader *r)
{
    lt_free(r->buf);
    memset(r, 0, sizeof *r);
}

/* ------------------------------------------------------------- connections */

static void sock_opts(int fd)
{
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    /* Heartbeats (discovery) find a dead peer and close its connection
     * through the topology; keepalive only reaps connections of strangers
     * and of peers whose host vanished without a reset. */
    setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
    int idle = 30, intvl = 5, cnt = 3;
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof intvl);
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof cnt);
}

/* "tcp://host:port" (host a name, an IPv4 address or [IPv6]) to sa. */
static bool parse_addr(const char *addr, struct sockaddr_storage *sa, socklen_t *sa_len)
{
    if (strncmp(addr, "tcp://", 6) != 0) return false;
    char host[128];
    const char *h = addr + 6, *colon = strrchr(h, ':');
    if (!colon || colon == h || (size_t)(colon - h) >= sizeof host) return false;
    memcpy(host, h, (size_t)(colon - h));
    host[colon - h] = 0;
    char *hp = host;
    size_t hl = strlen(hp);
    if (hp[0] == '[' && hl > 2 && hp[hl - 1] == ']') {
        hp[hl - 1] = 0;
        hp++;
    }
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV}, *res = NULL;
    if (getaddrinfo(hp, colon + 1, &hints, &res) != 0 || !res) return false;
    memcpy(sa, res->ai_addr, res->ai_addrlen);
    *sa_len = res->ai_addrlen;
    freeaddrinfo(res);
    return true;
}

link_conn *link_dial(const char *addr)
{
    link_conn *c = lt_calloc(1, sizeof *c);
    if (!c) return NULL;
    c->fd = -1;
    c->dial = true;
    snprintf(c->addr, sizeof c->addr, "%s", addr);
    if (!parse_addr(addr, &c->sa, &c->sa_len)) {
        lt_free(c);
        return NULL;
    }
    return c;
}

static void drop_queue(link_conn *c)
{
    for (link_out *o = c->qhead, *next; o; o = next) {
        next = o->next;
        lt_free(o->msg);
        lt_free(o);
    }
    c->qhead = c->qtail = NULL;
    c->q_bytes = c->q_off = 0;
}

void link_close(link_conn *c, uint64_t now)
{
    c->losses++; /* what it queued, and what the kernel had not delivered yet, is gone */
    c->lost_frames = 0;
    for (link_out *o = c->qhead; o; o = o->next) c->lost_frames++;
    if (c->fd >= 0) close(c->fd);
    c->fd = -1;
    c->connecting = false;
    drop_queue(c);
    link_reader_reset(&c->rd);
    c->partial_ms = 0;
    if (c->dial) {
        c->backoff_ms = c->backoff_ms ? c->backoff_ms * 2 : LINK_BACKOFF_MIN_MS;
        if (c->backoff_ms > LINK_BACKOFF_MAX_MS) c->backoff_ms = LINK_BACKOFF_MAX_MS;
        c->retry_ms = now + c->backoff_ms;
    }
}

void link_free(link_conn *c)
{
    if (!c) return;
    if (c->fd >= 0) close(c->fd);
    drop_queue(c);
    link_reader_free(&c->rd);
    lt_free(c);
}

/* A connect to a port nobody listens on, from the same host, can pick that
 * very port as its source and connect to itself (TCP simultaneous open):
 * the data port of a peer that just died lies in the ephemeral range.  Such
 * a connection would take every frame and answer none. */
static bool self_connected(int fd)
{
    struct sockaddr_storage a, b;
    socklen_t al = sizeof a, bl = sizeof b;
    if (getsockname(fd, (struct sockaddr *)&a, &al) != 0 || getpeername(fd, (struct sockaddr *)&b, &bl) != 0) return false;
    return al == bl && memcmp(&a, &b, al) == 0;
}

static bool start_connect(link_conn *c, uint64_t now)
{
    int fd = socket(c->sa.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        link_close(c, now);
        return false;
    }
    sock_opts(fd);
    c->fd = fd;
    c->opened_ms = now;
    if (connect(fd, (struct sockaddr *)&c->sa, c->sa_len) == 0) {
        if (self_connected(fd)) {
            link_close(c, now);
            return false;
        }
        c->connecting = false;
        c->backoff_ms = 0;
        return true;
    }
    if (errno == EINPROGRESS) {
        c->connecting = true;
        return true;
    }
    link_close(c, now);
    return false;
}

link_why link_write(link_conn *c, uint64_t now)
{
    while (c->fd >= 0 && !c->connecting && c->qhead) {
        struct iovec iov[WRITE_IOVS * 3];
        int n = 0;
        size_t skip = c->q_off;
        for (link_out *o = c->qhead; o && n + 3 <= (int)(WRITE_IOVS * 3); o = o->next) {
            const struct iovec parts[3] = {{o->hdr, LINK_HDR_BYTES}, {o->msg, o->len}, {o->mac, o->mac_len}};
            for (int k = 0; k < 3; k++) {
                size_t l = parts[k].iov_len;
                if (skip >= l) {
                    skip -= l;
                    continue;
                }
                iov[n].iov_base = (uint8_t *)parts[k].iov_base + skip;
                iov[n++].iov_len = l - skip;
                skip = 0;
            }
        }
        /* sendmsg for MSG_NOSIGNAL: a peer's reset must not raise SIGPIPE in an embedding process. */
        struct msghdr mh = {.msg_iov = iov, .msg_iovlen = (size_t)n};
        ssize_t w = sendmsg(c->fd, &mh, MSG_NOSIGNAL);
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return LINK_OK;
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) {
            link_close(c, now);
            return LINK_IOERR;
        }
        size_t left = (size_t)w;
        while (left && c->qhead) {
            link_out *o = c->qhead;
            size_t total = LINK_HDR_BYTES + o->len + o->mac_len, rest = total - c->q_off;
            if (left < rest) {
                c->q_off += left;
                break;
            }
            left -= rest;
            c->q_off = 0;
            c->q_bytes -= total;
            c->qhead = o->next;
            if (!c->qhead) c->qtail = NULL;
            lt_free(o->msg);
            lt_free(o);
        }
    }
    return LINK_OK;
}

lattice_status link_send(link_conn *c, const uint8_t *key, const Latdata__Batch *b, uint64_t now)
{
    if (c->fd < 0) {
        if (!c->dial || now < c->retry_ms || !start_connect(c, now)) {
            c->losses++;
            return LATTICE_ERR_IO;
        }
    }
    if (c->q_bytes >= LINK_QUEUE_BYTES) {
        c->losses++;
        return LATTICE_ERR_IO;
    }
    link_out *o = lt_calloc(1, sizeof *o);
    if (!o || lt_frame_pack(&b->base, key, &o->msg, &o->len, o->mac) != LATTICE_OK) {
        lt_free(o);
        c->losses++;
        return LATTICE_ERR_NOMEM;
    }
    o->mac_len = key ? LT_FRAME_MAC_BYTES : 0;
    link_header(o->hdr, o->len, o->mac_len);
    bool was_empty = !c->qhead;
    if (c->qtail) c->qtail->next = o;
    else c->qhead = o;
    c->qtail = o;
    c->q_bytes += LINK_HDR_BYTES + o->len + o->mac_len;
    /* Output already waiting for the socket: this frame goes after it, when poll says writable. */
    if (was_empty && link_write(c, now) != LINK_OK) return LATTICE_ERR_IO;
    return LATTICE_OK;
}

short link_events(const link_conn *c)
{
    if (c->fd < 0) return 0;
    if (c->connecting) return POLLOUT;
    return (short)(POLLIN | (c->qhead ? POLLOUT : 0));
}

static link_why feed(link_conn *c, const uint8_t *in, size_t n, size_t max_body, size_t *frames, link_frame_fn fn,
                     void *arg)
{
    while (n) {
        size_t used = 0;
        link_rd v = link_reader_feed(&c->rd, in, n, max_body, &used);
        if (v == LINK_RD_MORE) return LINK_OK;
        if (v != LINK_RD_FRAME) {
            c->rd_refused = v;
            return LINK_BAD;
        }
        in += used;
        n -= used;
        const uint8_t *msg, *mac;
        size_t len, ml;
        link_reader_frame(&c->rd, &msg, &len, &mac, &ml);
        if (!fn(arg, c, msg, len, mac, ml)) {
            c->rd_refused = LINK_RD_FRAME;
            return LINK_BAD;
        }
        c->proven = true;
        (*frames)++;
    }
    return LINK_OK;
}

link_why link_service(link_conn *c, short revents, size_t max_body, size_t max_frames, link_frame_fn fn,
                      void *arg, uint64_t now)
{
    if (c->fd < 0) return LINK_IOERR;
    if (c->connecting) {
        if (!(revents & (POLLOUT | POLLERR | POLLHUP))) return LINK_OK;
        int err = 0;
        socklen_t el = sizeof err;
        if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &el) != 0 || err || self_connected(c->fd)) {
            link_close(c, now);
            return LINK_IOERR;
        }
        c->connecting = false;
        c->backoff_ms = 0;
        revents |= POLLOUT;
    }
    if ((revents & POLLOUT) && link_write(c, now) != LINK_OK) return LINK_IOERR;
    if (!(revents & (POLLIN | POLLERR | POLLHUP))) return LINK_OK;
    size_t frames = 0;
    uint8_t chunk[READ_CHUNK];
    /* A bounded share per call, so one busy connection cannot starve the others. */
    for (int k = 0; k < 64 && frames < max_frames; k++) {
        ssize_t r = read(c->fd, chunk, sizeof chunk);
        if (r == 0) {
            link_close(c, now);
            return LINK_EOF;
        }
        if (r < 0 && errno == EINTR) continue;
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
        if (r < 0) {
            link_close(c, now);
            return LINK_IOERR;
        }
        link_why w = feed(c, chunk, (size_t)r, max_body, &frames, fn, arg);
        if (w != LINK_OK) {
            link_close(c, now);
            return w;
        }
        /* A stall is a frame begun with no byte of it for a while: any progress restarts the clock. */
        c->partial_ms = link_reader_idle(&c->rd) ? 0 : now;
        if (c->fd < 0) return LINK_IOERR; /* the callback's reply closed it */
        if ((size_t)r < sizeof chunk) break;
    }
    return LINK_OK;
}

link_why link_check_stall(const link_conn *c, uint64_t now)
{
    if (c->fd < 0 || c->connecting) return LINK_OK;
    if (!link_reader_idle(&c->rd) && c->partial_ms && now - c->partial_ms >= LINK_STALL_MS) return LINK_TIMEOUT;
    if (!c->dial && !c->proven && now - c->opened_ms >= LINK_HELLO_MS) return LINK_TIMEOUT;
    return LINK_OK;
}

/* ------------------------------------------------------------- the listener */

lattice_status link_srv_open(link_srv *s, const char *host, char *bound, size_t bound_len)
{
    memset(s, 0, sizeof *s);
    s->lfd = -1;
    char addr[160];
    bool v6 = strchr(host, ':') != NULL;
    snprintf(addr, sizeof addr, v6 ? "tcp://[%s]:0" : "tcp://%s:0", host);
    struct sockaddr_storage sa;
    socklen_t sl;
    if (!parse_addr(addr, &sa, &sl)) return LATTICE_ERR_INVAL;
    int fd = socket(sa.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return LATTICE_ERR_IO;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, (struct sockaddr *)&sa, sl) != 0 || listen(fd, 512) != 0) {
        close(fd);
        return LATTICE_ERR_IO;
    }
    sl = sizeof sa;
    getsockname(fd, (struct sockaddr *)&sa, &sl);
    char ip[INET6_ADDRSTRLEN] = "";
    unsigned port;
    if (sa.ss_family == AF_INET6) {
        inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&sa)->sin6_addr, ip, sizeof ip);
        port = ntohs(((struct sockaddr_in6 *)&sa)->sin6_port);
        snprintf(bound, bound_len, "tcp://[%s]:%u", ip, port);
    } else {
        inet_ntop(AF_INET, &((struct sockaddr_in *)&sa)->sin_addr, ip, sizeof ip);
        port = ntohs(((struct sockaddr_in *)&sa)->sin_port);
        snprintf(bound, bound_len, "tcp://%s:%u", ip, port);
    }
    s->lfd = fd;
    /* A flood must leave descriptors for everything else (discovery,
     * clients, our own connections): at most a quarter of the limit. */
    s->max_in = LINK_MAX_IN;
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur / 4 < s->max_in)
        s->max_in = rl.rlim_cur / 4 > 16 ? (size_t)(rl.rlim_cur / 4) : 16;
    return LATTICE_OK;
}

void link_srv_close(link_srv *s)
{
    for (size_t i = 0; i < LINK_MAX_IN; i++) {
        link_free(s->in[i]);
        s->in[i] = NULL;
    }
    s->n_in = 0;
    if (s->lfd >= 0) close(s->lfd);
    s->lfd = -1;
}

void link_srv_accept(link_srv *s, uint64_t now)
{
    for (int k = 0; k < 64; k++) {
        int fd = accept4(s->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            /* Out of descriptors: the listener would poll readable in a
             * busy loop; rest it a moment (stalled strangers time out). */
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                s->refused++;
                s->accept_paused_until = now + 100;
            }
            return;
        }
        size_t slot = LINK_MAX_IN;
        if (s->n_in < s->max_in)
            for (slot = 0; slot < LINK_MAX_IN && s->in[slot]; slot++) {}
        link_conn *c = slot < LINK_MAX_IN ? lt_calloc(1, sizeof *c) : NULL;
        if (!c) {
            close(fd);
            s->refused++;
            continue;
        }
        sock_opts(fd);
        c->fd = fd;
        c->opened_ms = now;
        c->slot = (uint32_t)slot;
        c->gen = ++s->gen[slot];
        s->in[slot] = c;
        s->n_in++;
    }
}

void link_srv_drop(link_srv *s, link_conn *c)
{
    if (c->slot < LINK_MAX_IN && s->in[c->slot] == c) {
        s->in[c->slot] = NULL;
        s->n_in--;
    }
    link_free(c);
}

size_t link_srv_ident(const link_conn *c, uint8_t *ident)
{
    memcpy(ident, &c->slot, 4);
    memcpy(ident + 4, &c->gen, 4);
    return 8;
}

link_conn *link_srv_find(link_srv *s, const uint8_t *ident, size_t len)
{
    uint32_t slot, gen;
    if (len != 8) return NULL;
    memcpy(&slot, ident, 4);
    memcpy(&gen, ident + 4, 4);
    if (slot >= LINK_MAX_IN || !s->in[slot] || s->in[slot]->gen != gen || s->in[slot]->fd < 0) return NULL;
    return s->in[slot];
}
