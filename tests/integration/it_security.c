/*
 * Bad peers: a node of another cluster name, a node without or with the
 * wrong cluster secret, and garbage / truncated / oversized / unknown-field
 * frames on the peer port.  Each is refused or dropped, logged and counted,
 * and the grid keeps working.
 */
#include <arpa/inet.h>
#include <check.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zmq.h>

#include "discovery.pb-c.h"
#include "harness.h"

#define FD "1000"
#define WAIT_MS 20000

static it_proc *start_node(const char *name, int port, const char *finder, const char *const *extra)
{
    char p[16];
    snprintf(p, sizeof p, "%d", port);
    const char *args[32] = {"--port", p, "--port-range", "1", "--ip-finder", finder, "--failure-detection-ms", FD};
    int k = 8;
    for (int i = 0; extra && extra[i] && k < 31; i++) args[k++] = extra[i];
    args[k] = NULL;
    return it_latticed(name, args);
}

typedef struct want {
    const char *finder;
    const char *const *extra;
    size_t servers;
    json_t *last;
} want;

static bool top_has(void *ctx)
{
    want *w = ctx;
    json_decref(w->last);
    w->last = it_top(w->finder, w->extra, NULL);
    return w->last && it_servers(w->last) == w->servers;
}

static json_t *wait_top(const char *finder, const char *const *extra, size_t servers)
{
    want w = {finder, extra, servers, NULL};
    if (!it_wait_for(top_has, &w, WAIT_MS)) {
        json_decref(w.last);
        return NULL;
    }
    return w.last;
}

static bool file_has(const char *name, const char *needle)
{
    char path[512], line[1024];
    snprintf(path, sizeof path, "%s/%s", it_dir(), name);
    FILE *f = fopen(path, "r");
    bool found = false;
    while (f && !found && fgets(line, sizeof line, f)) found = strstr(line, needle) != NULL;
    if (f) fclose(f);
    return found;
}

static json_int_t dropped(json_t *top, const char *cid, const char *what)
{
    json_t *n = it_node_by_cid(top, cid);
    return n ? json_integer_value(json_object_get(json_object_get(n, "dropped"), what)) : -1;
}

START_TEST(a_node_of_another_cluster_name_is_refused_and_both_sides_log_it)
{
    it_begin("cluster");
    int b = it_free_ports(3);
    char finder[64];
    snprintf(finder, sizeof finder, "127.0.0.1:%d..%d", b, b + 2);
    const char *alpha[] = {"--cluster", "alpha", NULL};
    const char *beta[] = {"--cluster", "beta", NULL};
    it_proc *a0 = start_node("alpha0", b, finder, alpha);
    it_proc *a1 = start_node("alpha1", b + 1, finder, alpha);
    json_t *top = wait_top(finder, alpha, 2);
    ck_assert_ptr_nonnull(top);
    json_decref(top);
    it_proc *x = start_node("beta", b + 2, finder, beta);
    ck_assert(it_wait_log(x, "join refused by", WAIT_MS));
    ck_assert(it_log_has(x, "cluster name 'beta' does not match cluster 'alpha'"));
    ck_assert(it_wait_log(a0, "cluster name 'beta' is not this cluster's 'alpha'", 5000) ||
              it_wait_log(a1, "cluster name 'beta' is not this cluster's 'alpha'", 5000));
    /* It never joined anything, and alpha still has exactly its two nodes. */
    ck_assert(!it_log_has(x, " ready: "));
    top = wait_top(finder, alpha, 2);
    ck_assert_ptr_nonnull(top);
    char cid[32];
    snprintf(cid, sizeof cid, "127.0.0.1:%d", b + 2);
    ck_assert_ptr_null(it_node_by_cid(top, cid));
    char c0[32], c1[32];
    snprintf(c0, sizeof c0, "127.0.0.1:%d", b);
    snprintf(c1, sizeof c1, "127.0.0.1:%d", b + 1);
    ck_assert_int_ge(dropped(top, c0, "refused"), 0);
    ck_assert_int_ge(dropped(top, c1, "refused"), 0);
    ck_assert_int_gt(dropped(top, c0, "refused") + dropped(top, c1, "refused"), 0);
    json_decref(top);
    /* The CLI with the wrong name is told at once. */
    ck_assert_ptr_null(it_top(finder, beta, NULL));
    ck_assert(file_has("top-errors.log", "the nodes there belong to another cluster than 'beta' (check --cluster)"));
    it_end();
}
END_TEST

START_TEST(a_node_without_or_with_a_wrong_secret_is_refused_and_gets_no_topology)
{
    it_begin("secret");
    int b = it_free_ports(4);
    char finder[64];
    snprintf(finder, sizeof finder, "127.0.0.1:%d..%d", b, b + 3);
    const char *good = it_write_file("good.secret", "correct horse battery staple\n");
    const char *bad = it_write_file("bad.secret", "incorrect horse\n");
    const char *with_good[] = {"--secret-file", good, NULL};
    const char *with_bad[] = {"--secret-file", bad, NULL};
    it_proc *s0 = start_node("s0", b, finder, with_good);
    it_proc *s1 = start_node("s1", b + 1, finder, with_good);
    json_t *top = wait_top(finder, with_good, 2);
    ck_assert_msg(top != NULL, "the grid with a secret did not form");
    json_decref(top);
    it_proc *none = start_node("nosecret", b + 2, finder, NULL);
    it_proc *wrong = start_node("wrongsecret", b + 3, finder, with_bad);
    ck_assert(it_wait_log(none, "join refused by", WAIT_MS));
    ck_assert(it_wait_log(wrong, "join refused by", WAIT_MS));
    ck_assert(it_wait_log(wrong, "authentication failed: the cluster secret is missing or wrong", WAIT_MS));
    ck_assert(it_wait_log(none, "authentication failed: the cluster secret is missing or wrong", WAIT_MS));
    ck_assert(it_wait_log(s0, "failed authentication", 5000) || it_wait_log(s1, "failed authentication", 5000));
    /* Give them time to try hard, then check they never saw a topology. */
    top = wait_top(finder, with_good, 2);
    ck_assert_ptr_nonnull(top);
    char c0[32], c1[32], cn[32], cw[32];
    snprintf(c0, sizeof c0, "127.0.0.1:%d", b);
    snprintf(c1, sizeof c1, "127.0.0.1:%d", b + 1);
    snprintf(cn, sizeof cn, "127.0.0.1:%d", b + 2);
    snprintf(cw, sizeof cw, "127.0.0.1:%d", b + 3);
    ck_assert_ptr_null(it_node_by_cid(top, cn));
    ck_assert_ptr_null(it_node_by_cid(top, cw));
    ck_assert_int_gt(dropped(top, c0, "auth_failed") + dropped(top, c1, "auth_failed"), 0);
    json_decref(top);
    ck_assert(!it_log_has(none, " ready: "));
    ck_assert(!it_log_has(wrong, " ready: "));
    ck_assert(!it_log_has(none, " joined;"));
    ck_assert(!it_log_has(wrong, " joined;"));
    /* The CLI without the secret is refused too, and says why at once. */
    const char *quick[] = {"--timeout-ms", "30000", NULL};
    ck_assert_ptr_null(it_top(finder, quick, NULL));
    ck_assert(file_has("top-errors.log", "the grid refused the cluster secret (check --secret-file"));
    it_end();
}
END_TEST

static void zsend(void *s, const void *buf, size_t len, int flags) { ck_assert_int_ge(zmq_send(s, buf, len, flags), 0); }

static size_t packed_join(uint8_t *out, size_t cap, uint32_t major)
{
    Latdisc__Envelope e = LATDISC__ENVELOPE__INIT;
    Latdisc__JoinRequest j = LATDISC__JOIN_REQUEST__INIT;
    Latdisc__Member m = LATDISC__MEMBER__INIT;
    m.id = "00000000-0000-4000-8000-000000000001";
    m.consistent_id = "127.0.0.1:1";
    m.addr = "tcp://127.0.0.1:1";
    j.self = &m;
    e.proto_major = major;
    e.cluster = "lattice";
    e.sender = m.id;
    e.sender_addr = m.addr;
    e.body_case = LATDISC__ENVELOPE__BODY_JOIN;
    e.join = &j;
    size_t n = latdisc__envelope__get_packed_size(&e);
    ck_assert_uint_le(n, cap);
    return latdisc__envelope__pack(&e, out);
}

typedef struct count_ctx {
    json_t *top;
    const char *finder, *cid;
} count_ctx;

/* junk, truncated, unknown field, empty, 3 frames: 5 malformed; one
 * oversized; two raw connections: handshake failures. */
static bool all_counted(void *vp)
{
    count_ctx *c = vp;
    json_decref(c->top);
    c->top = it_top(c->finder, NULL, NULL);
    return c->top && dropped(c->top, c->cid, "malformed") >= 5 && dropped(c->top, c->cid, "oversized") >= 1 &&
           dropped(c->top, c->cid, "handshake_failed") >= 1 && dropped(c->top, c->cid, "refused") >= 1;
}

START_TEST(garbage_truncated_oversized_and_unknown_field_frames_are_dropped_and_counted)
{
    it_begin("garbage");
    int b = it_free_ports(4);
    char finder[64], cid0[32];
    snprintf(finder, sizeof finder, "127.0.0.1:%d..%d", b, b + 3);
    snprintf(cid0, sizeof cid0, "127.0.0.1:%d", b);
    const char *small[] = {"--max-message-bytes", "4096", NULL};
    it_proc *p0 = NULL;
    for (int i = 0; i < 3; i++) {
        char name[16];
        snprintf(name, sizeof name, "node%d", i);
        it_proc *p = start_node(name, b + i, finder, small);
        if (i == 0) p0 = p;
    }
    json_t *top = wait_top(finder, NULL, 3);
    ck_assert_ptr_nonnull(top);
    json_decref(top);

    /* Raw bytes that are not ZMTP at all. */
    for (int k = 0; k < 2; k++) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)b)};
        inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
        ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
        const char junk[] = "GET / HTTP/1.0\r\n\r\n\x00\x01\x02 garbage garbage garbage garbage garbage garbage";
        ck_assert_int_gt(write(fd, junk, sizeof junk), 0);
        usleep(200000);
        close(fd);
    }
    /* ZMTP frames with bad contents. */
    void *ctx = zmq_ctx_new();
    void *s = zmq_socket(ctx, ZMQ_DEALER);
    char ep[64];
    snprintf(ep, sizeof ep, "tcp://127.0.0.1:%d", b);
    ck_assert_int_eq(zmq_connect(s, ep), 0);
    uint8_t good[512], junk[300], big[8192];
    size_t n = packed_join(good, sizeof good, 1);
    for (size_t i = 0; i < sizeof junk; i++) junk[i] = (uint8_t)(rand() | 0x80); /* never a valid varint end */
    memset(big, 0x41, sizeof big);
    zsend(s, junk, sizeof junk, 0);                 /* undecodable */
    zsend(s, good, n / 2, 0);                       /* truncated */
    zsend(s, big, sizeof big, 0);                   /* oversized (cap 4096) */
    uint8_t unk[600];
    memcpy(unk, good, n);
    unk[n] = (uint8_t)((9 << 3) | 0);               /* unknown field 9, varint */
    unk[n + 1] = 1;
    zsend(s, unk, n + 2, 0);                        /* unknown field */
    zsend(s, good, 0, 0);                           /* empty */
    zsend(s, good, n, ZMQ_SNDMORE);                 /* too many frames */
    zsend(s, good, n, ZMQ_SNDMORE);
    zsend(s, good, n, 0);
    /* Another protocol major: refused, with an answer the sender can log. */
    uint8_t v2[512];
    size_t n2 = packed_join(v2, sizeof v2, 2);
    zsend(s, v2, n2, 0);
    zmq_pollitem_t pi = {.socket = s, .events = ZMQ_POLLIN};
    Latdisc__Envelope *reply = NULL;
    for (int tries = 0; tries < 100 && !reply; tries++) {
        if (zmq_poll(&pi, 1, 100) <= 0) continue;
        uint8_t rb[2048];
        int rn = zmq_recv(s, rb, sizeof rb, 0);
        ck_assert_int_gt(rn, 0);
        reply = latdisc__envelope__unpack(NULL, (size_t)rn, rb);
        ck_assert_ptr_nonnull(reply);
        if (reply->body_case != LATDISC__ENVELOPE__BODY_REFUSAL || reply->refusal->reason != 3) {
            latdisc__envelope__free_unpacked(reply, NULL); /* e.g. the refusal of the junk */
            reply = NULL;
        }
    }
    ck_assert_msg(reply != NULL, "no refusal for protocol version 2");
    ck_assert_ptr_nonnull(strstr(reply->refusal->text, "protocol version 2"));
    latdisc__envelope__free_unpacked(reply, NULL);
    int linger = 2000;
    zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof linger);
    zmq_close(s);
    zmq_ctx_term(ctx);

    count_ctx c = {NULL, finder, cid0};
    ck_assert_msg(it_wait_for(all_counted, &c, WAIT_MS), "bad frames were not all counted");
    ck_assert_uint_eq(it_servers(c.top), 3);
    ck_assert(it_log_has(p0, "protocol version 2, this node speaks 1"));
    ck_assert(it_log_has(p0, "ended before a ZeroMQ handshake"));
    ck_assert(it_log_has(p0, "above max_message_bytes 4096"));
    json_decref(c.top);
    /* The grid still works: a fourth node joins. */
    start_node("node3", b + 3, finder, small);
    top = wait_top(finder, NULL, 4);
    ck_assert_msg(top != NULL, "grid stopped admitting nodes after bad input");
    json_decref(top);
    it_end();
}
END_TEST

int main(void)
{
    Suite *s = suite_create("integration: security and bad input");
    TCase *tc = tcase_create("peers");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, a_node_of_another_cluster_name_is_refused_and_both_sides_log_it);
    tcase_add_test(tc, a_node_without_or_with_a_wrong_secret_is_refused_and_gets_no_topology);
    tcase_add_test(tc, garbage_truncated_oversized_and_unknown_field_frames_are_dropped_and_counted);
    suite_add_tcase(s, tc);
    return it_run_suite(s);
}
