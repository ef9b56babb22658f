/*
 * lattice top inspects the grid without joining it: the topology version
 * stays where it was however often it runs (every CLI call used to join and
 * leave: 5.0 became 175.0 in 17 minutes), and right after a kill -9 - of the
 * coordinator, too - it answers within its 2 s timeout and shows the dead
 * node as "silent" until the grid removes it.  Clients that do join (other
 * commands, applications) are logged at debug, not info.
 */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

/* `lattice --timeout-ms T --ip-finder F --json top`, parsed; NULL on failure. */
static json_t *top_within(const char *finder, int timeout_ms)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "%s --timeout-ms %d --ip-finder '%s' --json top 2>/dev/null", LATTICE_CLI_PATH,
             timeout_ms, finder);
    FILE *f = popen(cmd, "r");
    if (!f) return NULL;
    static char out[1 << 16];
    size_t n = fread(out, 1, sizeof out - 1, f);
    out[n] = 0;
    int st = pclose(f);
    return st == 0 ? json_loads(out, 0, NULL) : NULL;
}

static unsigned long long major_of(json_t *t)
{
    return (unsigned long long)json_integer_value(json_array_get(json_object_get(t, "topology_version"), 0));
}

typedef struct grid {
    int base;
    char finder[64];
    it_proc *p[3];
} grid;

static void start_grid(grid *g, int n, const char *fd_ms)
{
    g->base = it_free_ports(n);
    snprintf(g->finder, sizeof g->finder, "127.0.0.1:%d..%d", g->base, g->base + n - 1);
    for (int i = 0; i < n; i++) {
        char port[16], name[16];
        snprintf(port, sizeof port, "%d", g->base + i);
        snprintf(name, sizeof name, "n%d", i);
        const char *args[] = {"--port", port, "--port-range", "1", "--ip-finder", g->finder, "--failure-detection-ms",
                              fd_ms, NULL};
        g->p[i] = it_latticed(name, args);
        /* One at a time: n0 is the coordinator. */
        ck_assert(it_wait_log(g->p[i], " ready: ", 20000));
    }
}

typedef struct want {
    const char *finder;
    size_t servers;
} want;

static bool has_servers(void *ctx)
{
    want *w = ctx;
    json_t *t = top_within(w->finder, 5000);
    bool ok = t && it_servers(t) == w->servers;
    json_decref(t);
    return ok;
}

START_TEST(inspection_leaves_the_topology_version_alone)
{
    it_begin("inspect_version");
    grid g;
    start_grid(&g, 2, "1000");
    want w = {g.finder, 2};
    ck_assert(it_wait_for(has_servers, &w, 20000));
    json_t *t = top_within(g.finder, 5000);
    ck_assert_ptr_nonnull(t);
    unsigned long long v = major_of(t);
    json_decref(t);
    for (int i = 0; i < 10; i++) {
        t = top_within(g.finder, 5000);
        ck_assert_ptr_nonnull(t);
        ck_assert_msg(major_of(t) == v, "top moved the topology from %llu to %llu", v, major_of(t));
        ck_assert_int_eq(it_clients(t), 0);
        json_decref(t);
    }
    /* A command that does attach (put) moves the version - so the check
     * above could fail - and its join is not INFO noise on the servers. */
    char cmd[512];
    snprintf(cmd, sizeof cmd, "%s --ip-finder '%s' put default k v >/dev/null 2>&1", LATTICE_CLI_PATH, g.finder);
    ck_assert_int_eq(it_sh("%s", cmd), 0);
    t = top_within(g.finder, 5000);
    ck_assert_ptr_nonnull(t);
    ck_assert_msg(major_of(t) > v, "an attaching command left the version at %llu", major_of(t));
    json_decref(t);
    for (int i = 0; i < 2; i++) ck_assert(!it_log_has(g.p[i], ", client) joined"));
    it_end();
}
END_TEST

typedef struct dead {
    const char *finder, *cid;
    const char *state;  /* seen */
} dead;

static bool shows_silent(void *ctx)
{
    dead *d = ctx;
    json_t *t = top_within(d->finder, 2000);
    /* The answer must come within 2 s however the grid is doing. */
    ck_assert_msg(t != NULL, "top did not answer within 2 s after the kill");
    json_t *n = it_node_by_cid(t, d->cid);
    d->state = n ? json_string_value(json_object_get(n, "state")) : "removed";
    bool silent = n && !strcmp(d->state, "silent");
    json_decref(t);
    return silent;
}

START_TEST(top_answers_at_once_after_a_kill_and_shows_the_dead_node)
{
    it_begin("inspect_kill");
    grid g;
    /* A long failure detection: the dead node stays listed a while. */
    start_grid(&g, 3, "8000");
    want w = {g.finder, 3};
    ck_assert(it_wait_for(has_servers, &w, 20000));
    json_t *t = top_within(g.finder, 2000);
    ck_assert_ptr_nonnull(t);
    json_t *n;
    size_t i;
    json_array_foreach(json_object_get(t, "nodes"), i, n) ck_assert_str_eq(json_string_value(json_object_get(n, "state")), "alive");
    json_decref(t);
    /* Kill the coordinator: no join could succeed now, inspection still does. */
    char cid[32];
    snprintf(cid, sizeof cid, "127.0.0.1:%d", g.base);
    it_signal(g.p[0], SIGKILL);
    dead d = {g.finder, cid, NULL};
    ck_assert_msg(it_wait_for(shows_silent, &d, 8000), "the killed node was never shown silent (last: %s)", d.state);
    it_end();
}
END_TEST

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    Suite *s = suite_create("integration: inspect");
    TCase *tc = tcase_create("inspect");
    tcase_set_timeout(tc, 180);
    tcase_add_test(tc, inspection_leaves_the_topology_version_alone);
    tcase_add_test(tc, top_answers_at_once_after_a_kill_and_shows_the_dead_node);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
