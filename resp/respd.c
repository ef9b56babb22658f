/*
 * respd: sockets, IO threads and pipelines of the RESP endpoint.
 *
 * Per connection: read what the socket has, parse every complete command in
 * it; consecutive key commands become one batch submitted with ONE
 * lattice_op_submit (ops for one node travel in one message, so a pipeline
 * costs one round trip per destination node).  While a batch is out the
 * connection reads nothing more (its bytes wait in rbuf); when the batch
 * comes back (cds_wfcq + eventfd from the data thread) its replies are
 * encoded in order, parsing resumes, and everything pending goes out with
 * one writev.  Commands that need no cache (PING, CLUSTER ...) are answered
 * at once when no batch entry precedes them, else they wait for the next
 * round: replies never change order.
 *
 * Errors of one client (malformed protocol, output limit, idle timeout)
 * close that connection only.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "lattice/alloc.h"
#include "lattice/clock.h"
#include "lattice/log.h"
#include "respd_int.h"

#define MAX_EVENTS 256
#define TAG_LISTEN ((void *)1)
#define TAG_EVENT ((void *)2)

static int listen_on(const char *host, int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    if (inet_pton(AF_INET, host, &a.sin_addr) != 1 || bind(fd, (struct sockaddr *)&a, sizeof a) < 0 ||
        listen(fd, 4096) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* The IO threads' listeners share the port through SO_REUSEPORT, which would
 * as gladly share it with another process that set it too (half the
 * connections each).  So first bind it once without SO_REUSEPORT: that
 * fails while any socket listens there, and succeeds over a TIME-WAIT
 * (SO_REUSEADDR), so a restarted node gets its port back at once. */
static bool port_free(const char *host, int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return false;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    bool ok = inet_pton(AF_INET, host, &a.sin_addr) == 1 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0;
    int saved = errno;
    close(fd);
    errno = saved;
    return ok;
}

/* Many clients need many descriptors: take the hard limit. */
static void raise_nofile(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

lattice_status lattice_respd_bind(const lattice_respd_config *c, lattice_respd **out)
{
    *out = NULL;
    if (!c || c->port <= 0 || c->port > 65535) return LATTICE_ERR_INVAL;
    lattice_respd *r = lt_calloc(1, sizeof *r);
    if (!r) return LATTICE_ERR_NOMEM;
    r->cfg = *c;
    atomic_store(&r->idle_timeout_s, c->idle_timeout_s);
    lattice_resp_limits d = lattice_resp_default_limits();
    r->limits = d;
    if (c->max_bulk > 0) r->limits.max_bulk_len = (uint64_t)c->max_bulk;
    if (c->max_multibulk > 0) r->limits.max_multibulk_len = c->max_multibulk;
    if (c->max_inline > 0) r->limits.max_inline_len = (size_t)c->max_inline;
    if (r->cfg.output_limit < 0) r->cfg.output_limit = 0;
    if (r->cfg.max_clients <= 0) r->cfg.max_clients = LATTICE_RESPD_DEFAULT_MAX_CLIENTS;
    r->n_io = c->io_threads > 0 ? c->io_threads : 1;
    r->poll_us = c->poll_us == 0 ? LATTICE_RESPD_DEFAULT_POLL_US : c->poll_us > 0 ? c->poll_us : 0;
    if (r->n_io > LATTICE_RESPD_MAX_IO_THREADS) r->n_io = LATTICE_RESPD_MAX_IO_THREADS;
    snprintf(r->host, sizeof r->host, "%s", c->host ? c->host : "127.0.0.1");
    snprintf(r->password, sizeof r->password, "%s", c->password ? c->password : "");
    snprintf(r->cache, sizeof r->cache, "%s", c->cache && *c->cache ? c->cache : "default");
    r->cfg.host = r->host;
    r->cfg.password = r->password;
    r->cfg.cache = r->cache;
    r->need_auth = r->password[0] != 0;
    r->port = c->port;
    r->start_ms = lt_mono_ms();
    pthread_mutex_init(&r->view_lock, NULL);
    respd_intro_init(r);
    atomic_init(&r->next_id, 1);
    raise_nofile();
    if (!port_free(r->host, r->port)) {
        LT_LOG(LT_ERROR, "resp", "cannot listen on %s:%d: %s%s", r->host, r->port, strerror(errno),
               errno == EADDRINUSE ? " (another process serves that port; pick another --resp-port)" : "");
        r->n_io = 0; /* no IO thread state set up yet */
        lattice_respd_destroy(r);
        return LATTICE_ERR_IO;
    }
    for (int i = 0; i < r->n_io; i++) {
        io_thread *io = &r->io[i];
        io->r = r;
        io->index = i;
        io->ep = io->efd = -1;
        cds_wfcq_init(&io->qhead, &io->qtail);
        cds_wfcq_init(&io->xhead, &io->xtail);
        io->lfd = listen_on(r->host, r->port);
        if (io->lfd < 0) {
            LT_LOG(LT_ERROR, "resp", "cannot listen on %s:%d: %s", r->host, r->port, strerror(errno));
            lattice_respd_destroy(r);
            return LATTICE_ERR_IO;
        }
        io->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        io->ep = epoll_create1(EPOLL_CLOEXEC);
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = TAG_LISTEN};
        struct epoll_event ev2 = {.events = EPOLLIN, .data.ptr = TAG_EVENT};
        if (io->efd < 0 || io->ep < 0 || epoll_ctl(io->ep, EPOLL_CTL_ADD, io->lfd, &ev) < 0 ||
            epoll_ctl(io->ep, EPOLL_CTL_ADD, io->efd, &ev2) < 0) {
            lattice_respd_destroy(r);
            return LATTICE_ERR_IO;
        }
    }
    snprintf(r->attr, sizeof r->attr, "resp_port=%d", r->port);
    *out = r;
    return LATTICE_OK;
}

lattice_status lattice_respd_advertise(const lattice_respd *r, lattice_config *c)
{
    if (c->n_attrs == LATTICE_MAX_ATTRS) return LATTICE_ERR_TOO_LARGE;
    c->attrs[c->n_attrs++] = r->attr;
    return LATTICE_OK;
}

/* ---- connections ---- */

/* EPOLLIN stays armed while a batch is out: a client that waits for its
 * replies (most do) sends nothing meanwhile, so taking EPOLLIN off as the
 * batch left and putting it back as it returned cost two epoll_ctl per
 * request for nothing (a third of the IO thread's system calls under
 * redis-benchmark SET -c 50, docs/BENCHMARKS.md).  Only when bytes do come
 * while the batch is out (the event loop sets hold_in) is EPOLLIN taken off,
 * until the batch is back - level-triggered epoll would report them again
 * at every wait. */
static void arm(conn *c)
{
    uint32_t ev = 0;
    if (!c->in_flight) c->hold_in = false;
    if (!c->closing && !c->hold_in) ev |= EPOLLIN;
    if (lattice_resp_out_pending(c->out)) ev |= EPOLLOUT;
    c->want_out = (ev & EPOLLOUT) != 0;
    if (ev == c->armed_ev) return;
    struct epoll_event e = {.events = ev, .data.ptr = c};
    epoll_ctl(c->io->ep, EPOLL_CTL_MOD, c->fd, &e);
    c->armed_ev = ev;
}

static void conn_free(conn *c)
{
    respd_tx_free(c);
    lattice_resp_parser_free(c->parser);
    lattice_resp_out_free(c->out);
    lt_free(c->rbuf);
    lt_free(c->told);
    lt_free(c);
}

/* A dead connection no batch refers to any more: freed after the epoll
 * round, since a later event of the round may still name it (a flush that
 * failed while batches returned, or a CLIENT KILL, closes connections
 * other than the one whose event is handled). */
static void conn_bury(conn *c)
{
    c->next = c->io->graves;
    c->io->graves = c;
}

static void free_graves(io_thread *io)
{
    while (io->graves) {
        conn *c = io->graves;
        io->graves = c->next;
        conn_free(c);
    }
}

/* Closes the socket now; the struct goes when no batch refers to it. */
static void conn_close(conn *c)
{
    io_thread *io = c->io;
    if (c->dead) return;
    if (c->mon) respd_mon_detach(c);
    epoll_ctl(io->ep, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    c->dead = true;
    if (c->prev) c->prev->next = c->next;
    else io->conns = c->next;
    if (c->next) c->next->prev = c->prev;
    io->n_conns--;
    atomic_fetch_sub(&io->r->n_clients, 1);
    if (c->blocked) atomic_fetch_sub(&io->r->n_blocked, 1); /* gone: no longer a blocked client */
    c->blocked = false;
    if (!c->in_flight) conn_bury(c);
}

void respd_conn_close(conn *c) { conn_close(c); }

static void accept_all(io_thread *io)
{
    lattice_respd *r = io->r;
    for (;;) {
        struct sockaddr_in a;
        socklen_t al = sizeof a;
        int fd = accept4(io->lfd, (struct sockaddr *)&a, &al, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EMFILE || errno == ENFILE)
                LT_LOG(LT_WARN, "resp", "accept: %s (raise the open file limit)", strerror(errno));
            return;
        }
        if (atomic_fetch_add(&r->n_clients, 1) >= r->cfg.max_clients) {
            atomic_fetch_sub(&r->n_clients, 1);
            atomic_fetch_add(&r->rejected_conns, 1);
            static const char msg[] = "-ERR max number of clients reached\r\n";
            ssize_t w = write(fd, msg, sizeof msg - 1);
            (void)w;
            close(fd);
            continue;
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        conn *c = lt_calloc(1, sizeof *c);
        if (c) {
            c->parser = lattice_resp_parser_new(&r->limits);
            c->out = lattice_resp_out_new((size_t)r->cfg.output_limit, 2);
            c->rbuf = lt_malloc(RBUF_SIZE);
        }
        if (!c || !c->parser || !c->out || !c->rbuf) {
            if (c) conn_free(c);
            close(fd);
            atomic_fetch_sub(&r->n_clients, 1);
            continue;
        }
        c->fd = fd;
        c->io = io;
        c->id = atomic_fetch_add(&r->next_id, 1);
        c->authed = !r->need_auth;
        c->last_ms = c->since_ms = lt_mono_ms();
        lattice_resp_parser_set_auth_required(c->parser, r->need_auth);
        char ip[INET_ADDRSTRLEN] = "?";
        inet_ntop(AF_INET, &a.sin_addr, ip, sizeof ip);
        snprintf(c->addr, sizeof c->addr, "%s:%d", ip, ntohs(a.sin_port));
        struct epoll_event e = {.events = EPOLLIN, .data.ptr = c};
        c->armed_ev = EPOLLIN;
        if (epoll_ctl(io->ep, EPOLL_CTL_ADD, fd, &e) < 0) {
            conn_free(c);
            close(fd);
            atomic_fetch_sub(&r->n_clients, 1);
            continue;
        }
        c->next = io->conns;
        if (io->conns) io->conns->prev = c;
        io->conns = c;
        io->n_conns++;
        atomic_fetch_add(&r->total_conns, 1);
    }
}

/* Writes what is pending; false when the connection was closed. */
static bool flush(conn *c)
{
    while (lattice_resp_out_pending(c->out)) {
        struct iovec iov[64];
        int n = lattice_resp_out_iov(c->out, iov, 64);
        ssize_t w = writev(c->fd, iov, n);
        if (w < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK) break;
            if (errno == EINTR) continue;
            conn_close(c);
            return false;
        }
        lattice_resp_out_consume(c->out, (size_t)w);
    }
    if (lattice_resp_out_overflowed(c->out)) {
        LT_LOG(LT_WARN, "resp", "client %s over the output buffer limit: closed", c->addr);
        conn_close(c);
        return false;
    }
    if (!lattice_resp_out_pending(c->out) && c->closing) {
        conn_close(c);
        return false;
    }
    return true;
}

void respd_conn_flush(conn *c)
{
    if (flush(c)) arm(c);
}

/* A batch for the next command of c: a spare one of its IO thread when
 * there is one.  Every request made one calloc and four or five reallocs
 * for its batch and its arrays, and as many frees when it came back - a
 * tenth of the IO thread's samples under SET -c 50 went to malloc and free
 * (docs/BENCHMARKS.md, #12 write path). */
static batch *batch_take(io_thread *io)
{
    batch *b = io->spare;
    if (!b) return lt_calloc(1, sizeof *b);
    io->spare = b->round_next;
    io->n_spare--;
    b->round_next = NULL;
    return b;
}

/* A batch done with (on its connection's IO thread): kept as a spare, or freed. */
static void batch_done(io_thread *io, batch *b)
{
    if (!b) return;
    if (io->n_spare >= BATCH_SPARE || !respd_batch_reset(b)) {
        respd_batch_free(b);
        return;
    }
    b->round_next = io->spare;
    io->spare = b;
    io->n_spare++;
}

/* A batch is ready: its ops go out with the others of this epoll round
 * (flush_round), so connections read together cost one submit. */
static void queue_batch(lattice_respd *r, conn *c, batch *b)
{
    /* The arena may have moved while it grew: point the ops at it now. */
    for (size_t i = 0; i < b->n_ops; i++) {
        lattice_op *o = &b->ops[i];
        if (o->key) o->key = b->arena + (uintptr_t)o->key - 1;
        if (o->value) o->value = b->arena + (uintptr_t)o->value - 1;
        o->cache = r->cache;
    }
    atomic_store(&b->remaining, b->n_ops);
    b->c = c;
    c->in_flight = true;
    io_thread *io = c->io;
    b->round_next = io->round;
    io->round = b;
    io->round_ops += b->n_ops;
}

/* One submit for the batches of several connections: the callback finds
 * the batch of op i by its offset. */
typedef struct round {
    atomic_size_t remaining;     /* ops + 1 (until submit returned) */
    size_t n;
    size_t *offs;                /* first op of batches[k] (in the same allocation) */
    batch **batches;
} round;

static void round_release(round *rd)
{
    if (atomic_fetch_sub(&rd->remaining, 1) == 1) lt_free(rd);
}

static void round_done(void *arg, size_t i, const lattice_op_result *res)
{
    round *rd = arg;
    size_t lo = 0, hi = rd->n; /* the last k with offs[k] <= i */
    while (hi - lo > 1) {
        size_t mid = (lo + hi) / 2;
        if (rd->offs[mid] <= i) lo = mid;
        else hi = mid;
    }
    respd_op_done(rd->batches[lo], i - rd->offs[lo], res);
    round_release(rd);
}

static void fail_batch(lattice_respd *r, batch *b, lattice_status st)
{
    conn *c = b->c;
    c->in_flight = false;
    if (c->blocked) atomic_fetch_sub(&r->n_blocked, 1);
    c->blocked = false;
    respd_batch_free(b);
    if (c->dead) {
        conn_bury(c);
        return;
    }
    respd_add_status_error(c->out, st);
    c->closing = true;
    (void)r;
    if (flush(c)) arm(c);
}

static void flush_round(io_thread *io)
{
    lattice_respd *r = io->r;
    batch *list = io->round;
    size_t total = io->round_ops;
    io->round = NULL;
    io->round_ops = 0;
    if (!list) return;
    lattice_status st;
    if (!list->round_next) { /* one batch: no mapping needed */
        atomic_fetch_add(&list->remaining, 1);
        st = lattice_op_submit_inline(r->node, list->ops, list->n_ops, respd_op_done, list);
        if (st == LATTICE_OK) respd_op_done(list, SIZE_MAX, NULL);
        else fail_batch(r, list, st);
        return;
    }
    size_t n = 0;
    for (batch *b = list; b; b = b->round_next) n++;
    /* The round and its two maps in one allocation. */
    round *rd = lt_malloc(sizeof *rd + n * (sizeof *rd->offs + sizeof *rd->batches));
    lattice_op *ops = lt_malloc(total * sizeof *ops);
    st = LATTICE_ERR_NOMEM;
    if (rd && ops) {
        rd->offs = (size_t *)(rd + 1);
        rd->batches = (batch **)(rd->offs + n);
        size_t off = 0, k = 0;
        for (batch *b = list; b; b = b->round_next, k++) {
            rd->offs[k] = off;
            rd->batches[k] = b;
            memcpy(ops + off, b->ops, b->n_ops * sizeof *ops);
            off += b->n_ops;
        }
        rd->n = n;
        atomic_store(&rd->remaining, total + 1);
        st = lattice_op_submit_inline(r->node, ops, total, round_done, rd);
    }
    lt_free(ops);
    if (st == LATTICE_OK) {
        round_release(rd);
        return;
    }
    lt_free(rd);
    for (batch *b = list, *nx; b; b = nx) {
        nx = b->round_next;
        fail_batch(r, b, st);
    }
}

/* Parses and runs what rbuf holds.  Stops when a batch went out. */
static void process(lattice_respd *r, conn *c)
{
    batch *b = NULL;
    while (!c->closing && !c->dead) {
        lattice_resp_command cmd;
        size_t used = 0;
        lattice_resp_result pr = LATTICE_RESP_NEED_MORE;
        if (c->roff < c->rlen)
            pr = lattice_resp_parse(c->parser, c->rbuf + c->roff, c->rlen - c->roff, &used, &cmd);
        if (pr == LATTICE_RESP_ERROR) {
            const char *e = lattice_resp_parser_error_reply(c->parser);
            if (e) {
                lattice_resp_add_error(c->out, e, strlen(e));
                LT_LOG(LT_INFO, "resp", "client %s: %s: closed", c->addr, e);
            }
            c->closing = true;
            c->roff = c->rlen = 0;
            break;
        }
        if (pr == LATTICE_RESP_NEED_MORE) {
            c->roff = c->rlen = 0;
            break;
        }
        if (!b) {
            b = batch_take(c->io);
            if (b) b->start_us = respd_now_us();
            if (!b) {
                c->closing = true;
                break;
            }
            b->r = r;
        }
        /* CLIENT REPLY: a reply written now, or an entry replied later,
         * is dropped when the connection was off or skipping as the
         * command ran (Redis's resetClient order: skip lasts one command). */
        bool mute = c->reply_off || c->reply_skip;
        size_t ents_before = b->n_ents;
        lattice_resp_out_set_muted(c->out, mute);
        cmd_outcome oc = respd_command(r, c, b, &cmd);
        lattice_resp_out_set_muted(c->out, 0);
        if (oc != CMD_DEFER) {
            c->roff += used;
            atomic_fetch_add(&r->total_cmds, 1);
            for (size_t i = ents_before; i < b->n_ents; i++) b->ents[i].mute = mute;
            c->reply_skip = c->reply_skip_next;
            c->reply_skip_next = false;
        }
        if (b->xreq) break; /* CLIENT LIST/KILL: its legs go out alone */
        if (oc == CMD_DEFER || b->n_ents >= BATCH_MAX_CMDS) {
            if (b->n_ops) break; /* the rest is parsed again after the batch */
            /* Only error replies so far: nothing to wait for, go on. */
            respd_batch_replies(r, c, b);
            batch_done(c->io, b);
            b = NULL;
        }
    }
    if (b && b->xreq && !c->dead) {
        respd_intro_post(r, c, b);
        return;
    }
    if (b && b->n_ents && !b->n_ops && !c->dead) {
        respd_batch_replies(r, c, b); /* only error entries: nothing to submit */
    } else if (b && b->n_ents && !c->dead) {
        queue_batch(r, c, b);
        return;
    }
    batch_done(c->io, b);
}

/* The IO thread running on this thread, if any (on_readable,
 * respd_batch_return). */
static __thread io_thread *this_io;

uint64_t respd_io_now_ms(void) { return this_io ? this_io->now_ms : lt_mono_ms(); }
bool respd_io_all_here(void) { return this_io && this_io->all_here_ms == this_io->now_ms + 1; }
void respd_io_note_all_here(void)
{
    if (this_io) this_io->all_here_ms = this_io->now_ms + 1;
}

static void on_readable(lattice_respd *r, conn *c)
{
    if (c->roff < c->rlen) { /* leftovers from before the last batch */
        process(r, c);
    } else {
        ssize_t n = read(c->fd, c->rbuf, RBUF_SIZE);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
            conn_close(c);
            return;
        }
        if (n < 0) return;
        c->last_ms = this_io ? this_io->now_ms : lt_mono_ms(); /* one clock read a wake-up, not a read */
        c->roff = 0;
        c->rlen = (size_t)n;
        process(r, c);
    }
    if (c->dead) return;
    if (flush(c)) arm(c);
}

/* Batches the data thread finished: encode their replies, continue. */
static void drain_returns(io_thread *io)
{
    lattice_respd *r = io->r;
    struct cds_wfcq_node *n;
    /* The only dequeuer: the blocking form waits out an enqueue that took
     * the tail but has not linked yet (its producer wrote no eventfd). */
    while ((n = __cds_wfcq_dequeue_blocking(&io->qhead, &io->qtail))) {
        batch *b = caa_container_of(n, batch, qnode);
        conn *c = b->c;
        c->in_flight = false;
        if (c->blocked) atomic_fetch_sub(&r->n_blocked, 1);
        c->blocked = false;
        if (c->dead) {
            respd_tx_give_back(r, b); /* a blocking pop's element reaches nobody */
            conn_bury(c);
            batch_done(io, b);
            continue;
        }
        respd_batch_replies(r, c, b);
        batch_done(io, b);
        process(r, c);
        if (c->dead) continue;
        if (flush(c)) arm(c);
    }
}

/* Whether the peer closed (or reset) the connection: nothing left to read
 * but the end.  Asked only while a blocking pop waits for it. */
static bool peer_closed(conn *c)
{
    char one;
    ssize_t n = recv(c->fd, &one, 1, MSG_PEEK | MSG_DONTWAIT);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

static void idle_sweep(io_thread *io)
{
    int t = atomic_load(&io->r->idle_timeout_s);
    if (t <= 0) return;
    uint64_t now = lt_mono_ms();
    for (conn *c = io->conns, *nx; c; c = nx) {
        nx = c->next;
        if (!c->in_flight && now - c->last_ms > (uint64_t)t * 1000) conn_close(c);
    }
}

/* Submits the round; batches it answered on this thread come back at once
 * (their connections go on parsing, maybe into another round). */
static void run_rounds(io_thread *io)
{
    flush_round(io);
    while (io->self_returned) {
        io->self_returned = false;
        drain_returns(io);
        flush_round(io);
    }
}

/* The next events.  A thread whose last wait returned some polls
 * (epoll_wait without sleeping) for up to poll_us before it sleeps: under
 * load the next request arrives within microseconds, and a sleeping thread
 * costs the client that sends it a wake-up - on a VM an interprocessor
 * interrupt - and itself a reschedule.  Measured: redis-benchmark -c 50
 * spends 2 us less per request (of 19), SET rises 1.0 -> 1.1x a
 * redis-server, -c 1 1.0 -> 1.2x (docs/BENCHMARKS.md, "#12, session 17").
 * It polls only while the CPU is its own (poll_check): on a machine with
 * more busy threads than cores - three nodes and the client on two -
 * polling takes the core from threads with work.  An idle node sleeps. */
static int wait_events(io_thread *io, struct epoll_event *ev, bool *busy)
{
    int n = 0;
    if (*busy && io->poll_ok) {
        uint64_t until = lt_mono_us() + (uint64_t)io->r->poll_us;
        while ((n = epoll_wait(io->ep, ev, MAX_EVENTS, 0)) == 0 && lt_mono_us() < until) {}
    }
    if (n <= 0) n = epoll_wait(io->ep, ev, MAX_EVENTS, 1000);
    *busy = n > 0;
    return n;
}

#define POLL_CHECK_MS 100      /* how often poll_check reads the thread's schedstat */
#define POLL_MAX_DELAY_PCT 10  /* polls while it waited to run less than this share of the time */

/* Whether this thread may poll: it waited runnable for a CPU (schedstat's
 * second field, run_delay) under POLL_MAX_DELAY_PCT of the last interval.
 * Measured at -c 50: one node 1-3% (a core to spare: poll), three nodes
 * and the client on two cores ~50% (every core taken: sleep).  Without
 * schedstat (a kernel without CONFIG_SCHED_INFO) it polls as configured. */
static void poll_check(io_thread *io)
{
    if (io->sched_fd < 0 || io->now_ms - io->sched_ms < POLL_CHECK_MS) return; /* no fd: poll_us <= 0, or no schedstat */
    char buf[96];
    ssize_t k = pread(io->sched_fd, buf, sizeof buf - 1, 0);
    unsigned long long delay_ns;
    if (k <= 0) return;
    buf[k] = 0;
    if (sscanf(buf, "%*[0-9] %llu", &delay_ns) != 1) return; /* time on the CPU, then run_delay */
    uint64_t span_ns = (io->now_ms - io->sched_ms) * 1000000;
    io->poll_ok = io->sched_ms && (delay_ns - io->sched_delay_ns) * 100 < span_ns * POLL_MAX_DELAY_PCT;
    io->sched_ms = io->now_ms;
    io->sched_delay_ns = delay_ns;
}

static void poll_check_open(io_thread *io)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/self/task/%ld/schedstat", (long)syscall(SYS_gettid));
    io->sched_fd = io->r->poll_us > 0 ? open(path, O_RDONLY | O_CLOEXEC) : -1;
    io->poll_ok = io->r->poll_us > 0 && io->sched_fd < 0; /* no schedstat: as configured */
    io->sched_ms = 0;
}

static void *io_main(void *arg)
{
    io_thread *io = arg;
    lattice_respd *r = io->r;
    lattice_op_thread_enter(); /* reads may run here (lattice_op_submit_inline) */
    this_io = io;
    struct epoll_event ev[MAX_EVENTS];
    uint64_t last_sweep = lt_mono_ms();
    bool busy = false; /* the last wait returned events */
    poll_check_open(io);
    while (!atomic_load(&r->stop)) {
        int n = wait_events(io, ev, &busy);
        io->now_ms = lt_mono_ms();
        poll_check(io);
        for (int i = 0; i < n; i++) {
            void *p = ev[i].data.ptr;
            if (p == TAG_LISTEN) {
                accept_all(io);
            } else if (p == TAG_EVENT) {
                uint64_t v;
                ssize_t rd = read(io->efd, &v, sizeof v);
                (void)rd;
                drain_returns(io);
            } else {
                conn *c = p;
                if (c->dead) continue;
                if (ev[i].events & (EPOLLERR | EPOLLHUP) && !(ev[i].events & EPOLLIN)) {
                    conn_close(c);
                    continue;
                }
                if ((ev[i].events & EPOLLOUT) && !flush(c)) continue;
                if ((ev[i].events & EPOLLIN) && !c->in_flight) {
                    on_readable(r, c);
                    continue;
                }
                if ((ev[i].events & EPOLLIN) && c->blocked && peer_closed(c)) {
                    /* It left while a blocking pop waits for it: closed now,
                     * so what the pop brings back goes back (drain_returns). */
                    conn_close(c);
                    continue;
                }
                if (ev[i].events & EPOLLIN) c->hold_in = true; /* its batch is out: read later (arm) */
                if (!c->dead) arm(c);
            }
        }
        /* After the events: CLIENT KILL and a dropped monitor close
         * connections that later entries of ev[] may name. */
        respd_intro_drain(io);
        run_rounds(io);
        uint64_t now = io->now_ms;
        if (now - last_sweep >= 1000) {
            idle_sweep(io);
            last_sweep = now;
        }
        free_graves(io);
    }
    if (io->sched_fd >= 0) close(io->sched_fd);
    io->sched_fd = -1;
    this_io = NULL;
    lattice_op_thread_exit();
    return NULL;
}

/* The last op of a batch hands it back to its IO thread (from the data
 * thread, or from that IO thread itself when it answered the op inline). */
void respd_batch_return(batch *b)
{
    io_thread *io = b->c->io;
    cds_wfcq_node_init(&b->qnode);
    if (this_io == io) { /* answered on its own IO thread: no wake-up needed */
        cds_wfcq_enqueue(&io->qhead, &io->qtail, &b->qnode);
        io->self_returned = true;
        return;
    }
    /* Wake the IO thread only when the queue was empty: otherwise a wake-up
     * is already due and the drain takes this batch too. */
    if (!cds_wfcq_enqueue(&io->qhead, &io->qtail, &b->qnode)) {
        uint64_t one = 1;
        ssize_t w = write(io->efd, &one, sizeof one);
        (void)w;
    }
}

lattice_status lattice_respd_start(lattice_respd *r, lattice_node *n)
{
    if (!r || !n) return LATTICE_ERR_INVAL;
    r->node = n;
    for (int i = 0; i < r->n_io; i++) {
        if (pthread_create(&r->io[i].th, NULL, io_main, &r->io[i]) != 0) {
            lattice_respd_stop(r);
            return LATTICE_ERR_NOMEM;
        }
        r->io[i].running = true;
    }
    LT_LOG(LT_INFO, "resp", "RESP endpoint on %s:%d (%d IO thread%s, cache '%s'%s)", r->host, r->port, r->n_io,
           r->n_io == 1 ? "" : "s", r->cache, r->need_auth ? ", password required" : "");
    return LATTICE_OK;
}

void lattice_respd_stop(lattice_respd *r)
{
    atomic_store(&r->stop, true);
    for (int i = 0; i < r->n_io; i++) {
        io_thread *io = &r->io[i];
        if (!io->running) continue;
        uint64_t one = 1;
        ssize_t w = write(io->efd, &one, sizeof one);
        (void)w;
        pthread_join(io->th, NULL);
        io->running = false;
        if (io->lfd >= 0) close(io->lfd);
        io->lfd = -1;
    }
}

void lattice_respd_destroy(lattice_respd *r)
{
    if (!r) return;
    respd_intro_destroy(r); /* legs still queued: their batches go to the queues drained below */
    for (int i = 0; i < r->n_io; i++) {
        io_thread *io = &r->io[i];
        /* Every callback has run (the node stopped first): batches still
         * queued are the last references to their connections. */
        struct cds_wfcq_node *n;
        while ((n = __cds_wfcq_dequeue_nonblocking(&io->qhead, &io->qtail)) && n != CDS_WFCQ_WOULDBLOCK) {
            batch *b = caa_container_of(n, batch, qnode);
            b->c->in_flight = false;
            if (b->c->dead) conn_free(b->c);
            respd_batch_free(b);
        }
        while (io->conns) conn_close(io->conns);
        free_graves(io);
        while (io->spare) {
            batch *b = io->spare;
            io->spare = b->round_next;
            respd_batch_free(b);
        }
        if (io->lfd >= 0) close(io->lfd);
        if (io->efd >= 0) close(io->efd);
        if (io->ep >= 0) close(io->ep);
        cds_wfcq_destroy(&io->qhead, &io->qtail);
    }
    respd_view_free(r->view);
    lt_free(r->demoted);
    pthread_mutex_destroy(&r->view_lock);
    pthread_mutex_destroy(&r->slow_lock);
    pthread_mutex_destroy(&r->mon_lock);
    lt_free(r);
}

void lattice_respd_stats_get(const lattice_respd *r, lattice_respd_stats *out)
{
    lattice_respd *w = (lattice_respd *)r; /* atomic loads only: C11 atomics take no const object */
    int c = atomic_load(&w->n_clients);
    out->clients = c > 0 ? (uint64_t)c : 0;
    out->connections = atomic_load(&w->total_conns);
    out->commands = atomic_load(&w->total_cmds);
    out->rejected = atomic_load(&w->rejected_conns);
}
