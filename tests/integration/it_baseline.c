/*
 * The baseline topology and the quorum on a real grid (loopback): the first
 * servers form the baseline; a side without a strict majority of it refuses
 * with "-CLUSTERDOWN no quorum: X of Y" (two of three servers paused) and
 * serves again when they return; `lattice baseline remove` retires a
 * stopped server (and refuses an unknown one); --baseline-auto-adjust-ms
 * drops a server gone that long; a lone survivor of most of the baseline
 * refuses baseline changes until forced.
 */
#include <check.h>
#include <hiredis.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "harness.h"

static int peer_base, resp_base;
static char finder[64];
static it_proc *p[3];

static void start(int i, const char *adjust_ms)
{
    char port[16], rport[16], name[16];
    snprintf(port, sizeof port, "%d", peer_base + i);
    snprintf(rport, sizeof rport, "%d", resp_base + i);
    snprintf(name, sizeof name, "s%d", i);
    const char *args[] = {"--port", port, "--port-range", "1", "--ip-finder", finder, "--failure-detection-ms", "1000",
                          "--resp-port", rport, "--baseline-auto-adjust-ms", adjust_ms, NULL};
    p[i] = it_latticed(name, args);
    ck_assert_ptr_nonnull(p[i]);
}

/* The reply to SET on node i, as text ("OK", the error, or "" without one). */
static void set_on(int i, char *out, size_t n)
{
    struct timeval tv = {3, 0};
    out[0] = 0;
    redisContext *c = redisConnectWithTimeout("127.0.0.1", resp_base + i, tv);
    if (!c || c->err) {
        if (c) redisFree(c);
        return;
    }
    redisSetTimeout(c, tv);
    redisReply *r = redisCommand(c, "SET k v");
    if (r && (r->type == REDIS_REPLY_STATUS || r->type == REDIS_REPLY_ERROR)) snprintf(out, n, "%s", r->str);
    if (r) freeReplyObject(r);
    redisFree(c);
}

typedef struct want_reply {
    int node;
    const char *text;
    char last[256];
} want_reply;

static bool replies(void *ctx)
{
    want_reply *w = ctx;
    set_on(w->node, w->last, sizeof w->last);
    return strcmp(w->last, w->text) == 0;
}

/* `lattice [extra] --json baseline [args]` through the finder. */
static json_t *cli(int *status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static json_t *cli(int *status, const char *fmt, ...)
{
    char args[512], cmd[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    snprintf(cmd, sizeof cmd, "%s --timeout-ms 5000 --ip-finder '%s' --json baseline %s 2>>%s/cli.log",
             LATTICE_CLI_PATH, finder, args, it_dir());
    FILE *f = popen(cmd, "r");
    ck_assert_ptr_nonnull(f);
    static char buf[65536];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    int st = pclose(f);
    *status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    return json_loads(buf, 0, NULL);
}

typedef struct want_baseline {
    long nodes, online;
} want_baseline;

static bool baseline_is(void *ctx)
{
    want_baseline *w = ctx;
    int st;
    json_t *j = cli(&st, " ");
    long online = 0;
    json_t *m;
    size_t i;
    json_array_foreach(json_object_get(j, "baseline"), i, m) online += json_is_true(json_object_get(m, "online"));
    bool ok = st == 0 && json_integer_value(json_object_get(j, "baseline_nodes")) == w->nodes && online == w->online;
    json_decref(j);
    return ok;
}

static void form(const char *adjust_ms)
{
    peer_base = it_free_ports(3);
    resp_base = it_free_ports(3);
    snprintf(finder, sizeof finder, "127.0.0.1:%d..%d", peer_base, peer_base + 2);
    for (int i = 0; i < 3; i++) start(i, adjust_ms);
    want_baseline all = {3, 3};
    ck_assert_msg(it_wait_for(baseline_is, &all, 30000), "the three servers never formed the baseline");
}

START_TEST(a_side_without_a_majority_of_the_baseline_refuses_and_serves_again)
{
    it_begin("baseline_quorum");
    form("-1");
    want_reply ok = {0, "OK", ""};
    ck_assert_msg(it_wait_for(replies, &ok, 20000), "never served: %s", ok.last);
    /* Two of three paused: node 0 alone reaches 1 of 3 and refuses, with
     * the figures, instead of timing out. */
    it_signal(p[1], SIGSTOP);
    it_signal(p[2], SIGSTOP);
    want_reply refused = {0, "CLUSTERDOWN no quorum: 1 of 3 baseline nodes reachable", ""};
    ck_assert_msg(it_wait_for(replies, &refused, 20000), "node 0 alone answered '%s'", refused.last);
    /* The lone node holds no quorum: an operator's change is refused
     * unless forced. */
    int st;
    char cid[32];
    snprintf(cid, sizeof cid, "127.0.0.1:%d", peer_base + 2);
    json_decref(cli(&st, "remove %s", cid));
    ck_assert_int_eq(st, 1);
    it_signal(p[1], SIGCONT);
    it_signal(p[2], SIGCONT);
    ck_assert_msg(it_wait_for(replies, &ok, 30000), "never served again: %s", ok.last);
    want_baseline all = {3, 3};
    ck_assert(it_wait_for(baseline_is, &all, 30000));
    it_end();
}
END_TEST

START_TEST(an_operator_retires_a_stopped_server_and_unknown_ids_are_refused)
{
    it_begin("baseline_cli");
    form("-1");
    it_signal(p[2], SIGKILL);
    it_wait_exit(p[2], 10000);
    /* Auto-adjust is off: the killed server stays in the baseline, offline. */
    want_baseline offline = {3, 2};
    ck_assert(it_wait_for(baseline_is, &offline, 30000));
    int st;
    json_decref(cli(&st, "remove 127.0.0.1:1"));
    ck_assert_int_eq(st, 1); /* not in the baseline */
    json_decref(cli(&st, "add 127.0.0.1:1"));
    ck_assert_int_eq(st, 1); /* not a server of the topology */
    char cid[32];
    snprintf(cid, sizeof cid, "127.0.0.1:%d", peer_base + 2);
    json_t *j = cli(&st, "remove %s", cid);
    ck_assert_int_eq(st, 0);
    ck_assert_int_eq(json_integer_value(json_object_get(j, "baseline_nodes")), 2);
    json_decref(j);
    want_baseline two = {2, 2};
    ck_assert(it_wait_for(baseline_is, &two, 10000));
    /* Its return puts it back at once (a join cannot split the grid). */
    start(2, "-1");
    want_baseline back = {3, 3};
    ck_assert(it_wait_for(baseline_is, &back, 30000));
    it_end();
}
END_TEST

START_TEST(a_server_gone_for_the_auto_adjust_time_leaves_the_baseline)
{
    it_begin("baseline_auto");
    form("1500");
    it_signal(p[1], SIGKILL);
    it_wait_exit(p[1], 10000);
    want_baseline two = {2, 2};
    ck_assert_msg(it_wait_for(baseline_is, &two, 30000), "the baseline never dropped the killed server");
    /* Quorum is now 2 of 2: the grid serves. */
    want_reply ok = {0, "OK", ""};
    ck_assert_msg(it_wait_for(replies, &ok, 20000), "did not serve: %s", ok.last);
    it_end();
}
END_TEST

int main(void)
{
    Suite *s = suite_create("baseline");
    TCase *tc = tcase_create("grid");
    tcase_set_timeout(tc, 180);
    tcase_add_test(tc, a_side_without_a_majority_of_the_baseline_refuses_and_serves_again);
    tcase_add_test(tc, an_operator_retires_a_stopped_server_and_unknown_ids_are_refused);
    tcase_add_test(tc, a_server_gone_for_the_auto_adjust_time_leaves_the_baseline);
    suite_add_tcase(s, tc);
    return it_run_suite(s);
}
