/*
 * bench/transport/pingpong: one request in flight between two processes
 * over 127.0.0.1, ZeroMQ DEALER/ROUTER (the data channel before #12) against
 * the data channel's TCP transport (fabric/link.c), in the same run: the child
 * echoes on both, the parent times round trips of the same packed Batch
 * (one 8-byte request) in alternating blocks and prints each transport's
 * median round trip and the ratio (docs/BENCHMARKS.md, "#12").
 */
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "base/base.h"
#include "cache.pb-c.h"
#include "lattice/clock.h"
#include "fabric/fabric.h"

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The echo side: whatever arrives on either transport goes back as it came. */
typedef struct echo {
    link_conn *c;
} echo;

static bool echo_frame(void *arg, link_conn *c, const uint8_t *msg, size_t len, const uint8_t *mac, size_t ml)
{
    (void)arg, (void)mac, (void)ml;
    ProtobufCMessage *m = NULL;
    if (lt_frame_unpack(&latdata__batch__descriptor, msg, len, NULL, 0, NULL, 1 << 20, &m) != LT_FRAME_OK) return false;
    link_send(c, NULL, (Latdata__Batch *)m, lt_mono_ms());
    lt_frame_free(m);
    return true;
}

static void child(void *router, link_srv *srv)
{
    link_conn *in = NULL;
    pid_t parent = getppid();
    double until = now_us() + 600e6; /* bounded: the parent stops it long before */
    for (;;) {
        if (getppid() != parent || now_us() > until) _exit(0);
        zmq_pollitem_t it[3] = {{router, 0, ZMQ_POLLIN, 0}, {NULL, srv->lfd, ZMQ_POLLIN, 0}, {NULL, -1, 0, 0}};
        int n = 2;
        if (in && in->fd >= 0) it[n++] = (zmq_pollitem_t){NULL, in->fd, link_events(in), 0};
        if (zmq_poll(it, n, 1000) < 0) continue;
        if (it[0].revents) {
            zmq_msg_t id, body;
            zmq_msg_init(&id);
            zmq_msg_init(&body);
            zmq_msg_recv(&id, router, 0);
            zmq_msg_recv(&body, router, 0);
            ProtobufCMessage *m = NULL;
            lt_frame_unpack(&latdata__batch__descriptor, zmq_msg_data(&body), zmq_msg_size(&body), NULL, 0, NULL, 1 << 20, &m);
            uint8_t buf[256];
            size_t bl = m ? protobuf_c_message_pack(m, buf) : 0;
            lt_frame_free(m);
            zmq_msg_send(&id, router, ZMQ_SNDMORE);
            zmq_send(router, buf, bl, 0);
            zmq_msg_close(&body);
        }
        if (it[1].revents) {
            link_srv_accept(srv, lt_mono_ms());
            for (size_t i = 0; i < LINK_MAX_IN; i++)
                if (srv->in[i] && srv->in[i] != in) in = srv->in[i];
        }
        if (n == 3 && it[2].revents) link_service(in, it[2].revents, 1 << 20, 64, echo_frame, NULL, lt_mono_ms());
    }
}

static bool got_frame(void *arg, link_conn *c, const uint8_t *msg, size_t len, const uint8_t *mac, size_t ml)
{
    (void)c, (void)msg, (void)len, (void)mac, (void)ml;
    (*(int *)arg)++;
    return true;
}

int main(int argc, char **argv)
{
    int json = 0, n = 20000;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json")) json = 1;
        else if (!strcmp(argv[i], "-n") && i + 1 < argc) n = atoi(argv[++i]);
        else {
            fprintf(!strcmp(argv[i], "--help") ? stdout : stderr,
                    "usage: pingpong [--json] [-n ROUND_TRIPS]\n"
                    "  one request in flight to a child process over 127.0.0.1: ZeroMQ DEALER/ROUTER\n"
                    "  and the data channel's TCP transport, alternating blocks of 1000; prints the\n"
                    "  median round trip of each and TCP / ZeroMQ (default -n 20000 each).\n");
            return strcmp(argv[i], "--help") ? 2 : 0;
        }
    }
    if (n < 1000) n = 1000;
    signal(SIGPIPE, SIG_IGN);
    link_srv srv;
    char laddr[160], zaddr[128] = "";
    int pfd[2];
    if (pipe(pfd) != 0 || link_srv_open(&srv, "127.0.0.1", laddr, sizeof laddr) != LATTICE_OK) {
        fprintf(stderr, "pingpong: cannot bind on 127.0.0.1\n");
        return 1;
    }
    /* ZeroMQ's I/O threads do not survive fork: the child makes its own context. */
    pid_t pid = fork();
    if (pid == 0) {
        void *cctx = zmq_ctx_new(), *router = zmq_socket(cctx, ZMQ_ROUTER);
        size_t zl = sizeof zaddr;
        if (zmq_bind(router, "tcp://127.0.0.1:*") != 0 || zmq_getsockopt(router, ZMQ_LAST_ENDPOINT, zaddr, &zl) != 0)
            zaddr[0] = 0;
        if (write(pfd[1], zaddr, sizeof zaddr) != (ssize_t)sizeof zaddr || !zaddr[0]) _exit(1);
        child(router, &srv);
    }
    link_srv_close(&srv);
    if (read(pfd[0], zaddr, sizeof zaddr) != (ssize_t)sizeof zaddr || !zaddr[0]) {
        fprintf(stderr, "pingpong: the echo process could not bind on 127.0.0.1\n");
        return 1;
    }
    void *ctx = zmq_ctx_new();
    void *dealer = zmq_socket(ctx, ZMQ_DEALER);
    zmq_connect(dealer, zaddr);
    link_conn *lc = link_dial(laddr);
    Latdata__Req r = LATDATA__REQ__INIT, *rs[1] = {&r};
    r.id = 1;
    r.key.data = (uint8_t *)"01234567";
    r.key.len = 8;
    Latdata__Batch b = LATDATA__BATCH__INIT;
    b.proto = 1;
    b.reqs = rs;
    b.n_reqs = 1;
    uint8_t buf[256], rb[256];
    size_t bl = latdata__batch__pack(&b, buf);
    double *tz = malloc(sizeof(double) * (size_t)n), *tt = malloc(sizeof(double) * (size_t)n);
    int nz = 0, nt = 0, warm = 200;
    while (nz < n || nt < n) {
        for (int k = 0; k < 1000 + warm && nz < n; k++) { /* ZeroMQ block */
            double t0 = now_us();
            zmq_send(dealer, buf, bl, 0);
            if (zmq_recv(dealer, rb, sizeof rb, 0) < 0) break;
            if (k >= warm) tz[nz++] = now_us() - t0;
        }
        for (int k = 0; k < 1000 + warm && nt < n; k++) { /* TCP block */
            double t0 = now_us();
            int got = 0;
            link_send(lc, NULL, &b, lt_mono_ms());
            while (!got) {
                struct pollfd p = {lc->fd, link_events(lc), 0};
                if (p.fd < 0 || poll(&p, 1, 5000) <= 0) break;
                link_service(lc, p.revents, 1 << 20, 64, got_frame, &got, lt_mono_ms());
            }
            if (!got) break;
            if (k >= warm) tt[nt++] = now_us() - t0;
        }
        warm = 0;
    }
    kill(pid, SIGTERM);
    waitpid(pid, NULL, 0);
    qsort(tz, (size_t)nz, sizeof *tz, cmp);
    qsort(tt, (size_t)nt, sizeof *tt, cmp);
    double mz = tz[nz / 2], mt = tt[nt / 2], z99 = tz[nz * 99 / 100], t99 = tt[nt * 99 / 100];
    if (json)
        printf("{\"round_trips\":%d,\"zmq_p50_us\":%.1f,\"zmq_p99_us\":%.1f,\"tcp_p50_us\":%.1f,\"tcp_p99_us\":%.1f,"
               "\"tcp_vs_zmq\":%.3f}\n",
               n, mz, z99, mt, t99, mt / mz);
    else
        printf("round trip, 1 in flight (%d each): ZeroMQ DEALER/ROUTER p50 %.1f us p99 %.1f us; "
               "TCP (fabric/link.c) p50 %.1f us p99 %.1f us; TCP / ZeroMQ %.2f\n",
               n, mz, z99, mt, t99, mt / mz);
    link_free(lc);
    zmq_close(dealer);
    zmq_ctx_term(ctx);
    free(tz);
    free(tt);
    return 0;
}
