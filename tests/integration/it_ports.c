/*
 * Ports at start: a RESP, HTTP or peer port another process listens on is
 * refused (exit 1 and a message naming the port), never shared; a port a
 * stopped node left in TIME-WAIT is not "in use" and a restart on it works
 * at once; and a bare latticed looks for the local grid where bare nodes
 * bind (HOST:47500..47509), so a second one joins the first.
 */
#include <check.h>
#include <hiredis/hiredis.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

typedef struct ports {
    int peer, resp, http;
    char p[16], r[16], h[16], finder[64];
} ports;

static void ports_pick(ports *x)
{
    x->peer = it_free_ports(2);
    x->resp = it_free_ports(1);
    x->http = it_free_ports(1);
    snprintf(x->p, sizeof x->p, "%d", x->peer);
    snprintf(x->r, sizeof x->r, "%d", x->resp);
    snprintf(x->h, sizeof x->h, "%d", x->http);
    snprintf(x->finder, sizeof x->finder, "127.0.0.1:%d..%d", x->peer, x->peer + 1);
}

static it_proc *start_node(const char *name, const ports *x)
{
    const char *args[] = {"--port", x->p, "--port-range", "1", "--ip-finder", x->finder, "--resp-port", x->r,
                          "--http-port", x->h, "--failure-detection-ms", "1000", NULL};
    return it_latticed(name, args);
}

/* A second node given a port the first serves exits 1 and says which. */
static void refused(const char *name, const char *const *args, const char *needle)
{
    it_proc *p = it_latticed(name, args);
    ck_assert_msg(it_wait_exit(p, 20000), "%s did not exit", name);
    ck_assert_msg(it_log_has(p, needle), "%s: no '%s' in its log", name, needle);
    ck_assert_msg(it_log_has(p, "cannot start"), "%s: no 'cannot start' in its log", name);
}

START_TEST(ports_in_use_are_refused_at_start_never_shared)
{
    it_begin("ports_in_use");
    ports x;
    ports_pick(&x);
    it_proc *a = start_node("a", &x);
    ck_assert(it_wait_log(a, " ready: ", 20000));
    char other[16];
    snprintf(other, sizeof other, "%d", x.peer + 1);
    int spare = it_free_ports(1);
    char sp[16];
    snprintf(sp, sizeof sp, "%d", spare);
    /* RESP: the port a serves (SO_REUSEPORT used to let b take half the
     * connections). */
    const char *resp_args[] = {"--port", other, "--port-range", "1", "--ip-finder", x.finder, "--resp-port", x.r, NULL};
    char needle[128];
    snprintf(needle, sizeof needle, "resp: cannot listen on 127.0.0.1:%d: Address already in use", x.resp);
    refused("b_resp", resp_args, needle);
    /* HTTP. */
    const char *http_args[] = {"--port", other, "--port-range", "1", "--ip-finder", x.finder, "--http-port", x.h, NULL};
    snprintf(needle, sizeof needle, "http: cannot listen on 127.0.0.1:%d: Address already in use", x.http);
    refused("b_http", http_args, needle);
    /* Peer port, with no range to move up in. */
    const char *peer_args[] = {"--port", x.p, "--port-range", "1", "--ip-finder", x.finder, "--resp-port", sp, NULL};
    snprintf(needle, sizeof needle, "no free peer port in %d..%d", x.peer, x.peer);
    refused("b_peer", peer_args, needle);
    /* Every RESP connection is still a's. */
    for (int i = 0; i < 6; i++) {
        redisContext *c = redisConnect("127.0.0.1", x.resp);
        ck_assert(c && !c->err);
        redisReply *r = redisCommand(c, "INFO server");
        ck_assert(r && r->type == REDIS_REPLY_STRING);
        char pid[32];
        snprintf(pid, sizeof pid, "process_id:%d\r", (int)a->pid);
        ck_assert_msg(strstr(r->str, pid) != NULL, "connection %d answered by another process", i);
        freeReplyObject(r);
        redisFree(c);
    }
    it_end();
}
END_TEST

static bool time_wait_on(int port)
{
    return it_sh("ss -tan state time-wait '( sport = :%d )' | grep -q ':%d '", port, port) == 0;
}

/* /health answers 200 on port *ctx. */
static bool health_ok(void *ctx)
{
    return it_sh("curl -sf -o /dev/null http://127.0.0.1:%d/health", *(int *)ctx) == 0;
}

START_TEST(a_stopped_node_restarts_on_its_ports_at_once)
{
    it_begin("ports_restart");
    ports x;
    ports_pick(&x);
    char p1[16], r1[16];
    snprintf(p1, sizeof p1, "%d", x.peer + 1);
    snprintf(r1, sizeof r1, "%d", it_free_ports(1));
    const char *other[] = {"--port", p1, "--port-range", "1", "--ip-finder", x.finder, "--resp-port", r1,
                           "--failure-detection-ms", "1000", NULL};
    it_proc *b = it_latticed("b", other);
    it_proc *a = start_node("a", &x);
    ck_assert(it_wait_log(a, " ready: ", 20000));
    ck_assert(it_wait_log(b, " ready: ", 20000));
    /* Both in the baseline, and both owners of the cache, before a leaves:
     * a leave while a is still the only serving owner leaves every
     * partition LOST (on a busy machine the SIGTERM came 20 ms before the
     * base switch that would have made b an owner - and, in a CI beside a
     * build, 0.28 s after b joined, with b in the baseline but its
     * rebalanced copies not yet switched in), and /health waits for those
     * below.  This test is about the ports, not about a leave during a
     * rebalance. */
    ck_assert_msg(it_wait_baseline(x.finder, 2, 60000), "the baseline never held both servers");
    ck_assert_msg(it_wait_settled(x.finder, "default", 2, 60000), "the cache never settled on both servers");
    /* Connections a closes first leave TIME-WAIT on its own ports: a RESP
     * client still connected, an HTTP request answered. */
    redisContext *c = redisConnect("127.0.0.1", x.resp);
    ck_assert(c && !c->err);
    redisReply *r = redisCommand(c, "PING");
    ck_assert(r);
    freeReplyObject(r);
    ck_assert_int_eq(it_sh("curl -s -o /dev/null http://127.0.0.1:%d/metrics", x.http), 0);
    it_signal(a, SIGTERM);
    ck_assert(it_wait_exit(a, 20000));
    redisFree(c);
    ck_assert_msg(time_wait_on(x.resp) || time_wait_on(x.peer) || time_wait_on(x.http),
                  "no TIME-WAIT left on a's ports: the restart below proves nothing");
    it_proc *a2 = start_node("a2", &x);
    ck_assert_msg(it_wait_log(a2, " ready: ", 20000), "the restart on the same ports failed");
    ck_assert(!it_log_has(a2, "is taken"));
    c = redisConnect("127.0.0.1", x.resp);
    ck_assert(c && !c->err);
    r = redisCommand(c, "PING");
    ck_assert(r && r->type == REDIS_REPLY_STATUS);
    freeReplyObject(r);
    redisFree(c);
    /* Its HTTP port serves at once; /health says 200 once the grid assigned
     * the restarted server its partitions again (a base switch: not at once). */
    ck_assert_int_eq(it_sh("curl -s -o /dev/null http://127.0.0.1:%d/metrics", x.http), 0);
    ck_assert_msg(it_wait_for(health_ok, &x.http, 30000), "/health never answered 200 after the restart");
    it_end();
}
END_TEST

static char host[32];
static bool two_servers(void *ctx)
{
    (void)ctx;
    char finder[64];
    snprintf(finder, sizeof finder, "%s:47500..47509", host);
    const char *extra[] = {"--host", host, NULL};
    json_t *t = it_top(finder, extra, NULL);
    bool ok = t && it_servers(t) == 2;
    json_decref(t);
    return ok;
}

START_TEST(a_bare_latticed_joins_the_local_grid)
{
    it_begin("ports_default_finder");
    /* The default ports on an address of 127/8 no other test uses. */
    srand((unsigned)time(NULL) ^ (unsigned)getpid());
    snprintf(host, sizeof host, "127.%d.%d.%d", 100 + rand() % 100, 1 + rand() % 250, 1 + rand() % 250);
    const char *bare[] = {"--host", host, "--failure-detection-ms", "1000", NULL};
    it_proc *a = it_latticed("a", bare);
    ck_assert(it_wait_log(a, " ready: ", 20000));
    ck_assert(it_log_has(a, "47500"));
    it_proc *b = it_latticed("b", bare);
    ck_assert(it_wait_log(b, " ready: ", 20000));
    ck_assert_msg(it_log_has(b, "peer port 47500 is taken; trying 47501"), "b did not move up from 47500");
    ck_assert_msg(!it_log_has(b, "starting cluster"), "the second bare node seeded a grid of its own");
    ck_assert(it_wait_for(two_servers, NULL, 20000));
    it_end();
}
END_TEST

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    Suite *s = suite_create("integration: ports");
    TCase *tc = tcase_create("ports");
    tcase_set_timeout(tc, 180);
    tcase_add_test(tc, ports_in_use_are_refused_at_start_never_shared);
    tcase_add_test(tc, a_stopped_node_restarts_on_its_ports_at_once);
    tcase_add_test(tc, a_bare_latticed_joins_the_local_grid);
    suite_add_tcase(s, tc);
    return it_run_suite(s);
}
