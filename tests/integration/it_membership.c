/*
 * Membership with real latticed processes: static grids form, simultaneous
 * starts converge, kill -9 (coordinator and another), SIGSTOP/SIGCONT,
 * graceful stop, a taken port, a client node that outlives its server, and
 * the shape of `lattice --json top`.
 */
#include <arpa/inet.h>
#include <check.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.h"

#define FD "1000"
#define WAIT_MS 20000

typedef struct grid {
    int base, n;
    char finder[64];
    it_proc *p[16];
    char cid[16][32];
} grid;

static void grid_start(grid *g, int n, const char *const *extra)
{
    g->n = n;
    g->base = it_free_ports(n);
    snprintf(g->finder, sizeof g->finder, "127.0.0.1:%d..%d", g->base, g->base + n - 1);
    for (int i = 0; i < n; i++) {
        char port[16], name[16];
        snprintf(port, sizeof port, "%d", g->base + i);
        snprintf(name, sizeof name, "node%d", i);
        snprintf(g->cid[i], sizeof g->cid[i], "127.0.0.1:%d", g->base + i);
        const char *args[32] = {"--port", port, "--port-range", "1", "--ip-finder", g->finder,
                                "--failure-detection-ms", FD};
        int k = 8;
        for (int e = 0; extra && extra[e] && k < 31; e++) args[k++] = extra[e];
        args[k] = NULL;
        g->p[i] = it_latticed(name, args);
    }
}

typedef struct want {
    const char *finder;
    size_t servers, clients;
    const char *not_coordinator; /* coordinator must differ from this id */
    json_t *last;
} want;

static bool top_matches(void *ctx)
{
    want *w = ctx;
    json_decref(w->last);
    w->last = it_top(w->finder, NULL, NULL);
    if (!w->last) return false;
    if (it_servers(w->last) != w->servers || it_clients(w->last) != w->clients) return false;
    const char *c = json_string_value(json_object_get(w->last, "coordinator"));
    return !w->not_coordinator || (c && strcmp(c, w->not_coordinator) != 0);
}

/* Wait until top shows exactly `servers` servers (and `clients` other clients). */
static json_t *wait_top(const char *finder, size_t servers, size_t clients, const char *not_coord)
{
    want w = {finder, servers, clients, not_coord, NULL};
    if (!it_wait_for(top_matches, &w, WAIT_MS)) {
        json_decref(w.last);
        return NULL;
    }
    return w.last;
}

static const char *id_of(json_t *top, const char *cid)
{
    json_t *n = it_node_by_cid(top, cid);
    return n ? json_string_value(json_object_get(n, "id")) : NULL;
}

static int index_of_order1(grid *g, json_t *top)
{
    for (int i = 0; i < g->n; i++) {
        json_t *n = it_node_by_cid(top, g->cid[i]);
        if (n && !strcmp(json_string_value(json_object_get(n, "id")),
                         json_string_value(json_object_get(top, "coordinator"))))
            return i;
    }
    return -1;
}

START_TEST(three_node_static_grid_forms_and_top_json_matches_design)
{
    it_begin("static3");
    grid g;
    grid_start(&g, 3, NULL);
    json_t *top = wait_top(g.finder, 3, 0, NULL);
    ck_assert_msg(top != NULL, "3-node grid did not form");
    for (int i = 0; i < 3; i++) ck_assert(it_log_has(g.p[i], " ready: "));
    ck_assert(it_orders_unique(top));
    /* docs/OPERATIONS.md: {"topology_version":[major,minor], "coordinator":ID, "nodes":[...]} */
    json_t *v = json_object_get(top, "topology_version");
    ck_assert(json_is_array(v) && json_array_size(v) == 2);
    ck_assert(json_is_integer(json_array_get(v, 0)) && json_integer_value(json_array_get(v, 0)) >= 2);
    ck_assert(json_is_integer(json_array_get(v, 1)));
    const char *coord = json_string_value(json_object_get(top, "coordinator"));
    ck_assert_ptr_nonnull(coord);
    bool coord_listed = false;
    size_t i;
    json_t *n;
    json_array_foreach(json_object_get(top, "nodes"), i, n) {
        const char *id = json_string_value(json_object_get(n, "id"));
        ck_assert(id && strlen(id) == 36);
        ck_assert(json_is_string(json_object_get(n, "consistent_id")));
        ck_assert(json_is_integer(json_object_get(n, "order")) && json_integer_value(json_object_get(n, "order")) >= 1);
        const char *role = json_string_value(json_object_get(n, "role"));
        ck_assert(role && (!strcmp(role, "server") || !strcmp(role, "client")));
        ck_assert(json_is_string(json_object_get(n, "addr")) && json_is_string(json_object_get(n, "host")));
        ck_assert(json_is_integer(json_object_get(n, "uptime_ms")));
        ck_assert(json_is_number(json_object_get(n, "cpu_load")));
        ck_assert(json_integer_value(json_object_get(n, "memory_rss_bytes")) > 0);
        coord_listed |= !strcmp(id, coord);
        if (!strcmp(role, "server")) ck_assert_str_eq(json_string_value(json_object_get(n, "host")), "127.0.0.1");
    }
    ck_assert(coord_listed);
    /* The coordinator is the oldest server: order 1. */
    json_t *first = json_array_get(json_object_get(top, "nodes"), 0);
    ck_assert_int_eq(json_integer_value(json_object_get(first, "order")), 1);
    ck_assert_str_eq(json_string_value(json_object_get(first, "id")), coord);
    for (int k = 0; k < 3; k++) ck_assert_ptr_nonnull(it_node_by_cid(top, g.cid[k]));
    json_decref(top);
    it_end();
}
END_TEST

START_TEST(five_nodes_started_at_once_converge_with_unique_orders)
{
    it_begin("five");
    grid g;
    grid_start(&g, 5, NULL);
    json_t *top = wait_top(g.finder, 5, 0, NULL);
    ck_assert_msg(top != NULL, "5 nodes did not converge");
    ck_assert(it_orders_unique(top));
    /* Every node saw a 5-node topology itself (not only the coordinator). */
    for (int i = 0; i < 5; i++) ck_assert(it_wait_log(g.p[i], ", 5 nodes", 5000));
    /* One grid, not several: every node's own view names the same coordinator. */
    const char *coord = json_string_value(json_object_get(top, "coordinator"));
    char needle[64];
    snprintf(needle, sizeof needle, "coordinator %.8s", coord);
    for (int i = 0; i < 5; i++) ck_assert(it_log_has(g.p[i], needle));
    /* Every node moved through versions in one direction only. */
    for (int i = 0; i < 5; i++) ck_assert_msg(it_log_versions_monotonic(g.p[i], NULL), "node%d went back", i);
    json_decref(top);
    it_end();
}
END_TEST

START_TEST(kill9_of_coordinator_and_of_another_node_is_detected_by_every_survivor)
{
    it_begin("kill9");
    grid g;
    grid_start(&g, 4, NULL);
    json_t *top = wait_top(g.finder, 4, 0, NULL);
    ck_assert_ptr_nonnull(top);
    int c = index_of_order1(&g, top);
    ck_assert_int_ge(c, 0);
    char old_coord[64];
    snprintf(old_coord, sizeof old_coord, "%s", json_string_value(json_object_get(top, "coordinator")));
    json_decref(top);
    it_signal(g.p[c], SIGKILL);
    it_wait_exit(g.p[c], 2000);
    top = wait_top(g.finder, 3, 0, old_coord);
    ck_assert_msg(top != NULL, "coordinator's failure not detected");
    char needle[96];
    snprintf(needle, sizeof needle, "(%s, server) failed", g.cid[c]);
    for (int i = 0; i < 4; i++)
        if (i != c) ck_assert_msg(it_wait_log(g.p[i], needle, 5000), "node%d never removed the coordinator", i);
    /* Now a non-coordinator. */
    int victim = -1;
    const char *coord = json_string_value(json_object_get(top, "coordinator"));
    for (int i = 0; i < 4 && victim < 0; i++)
        if (i != c && strcmp(id_of(top, g.cid[i]), coord) != 0) victim = i;
    ck_assert_int_ge(victim, 0);
    json_decref(top);
    it_signal(g.p[victim], SIGKILL);
    it_wait_exit(g.p[victim], 2000);
    top = wait_top(g.finder, 2, 0, NULL);
    ck_assert_msg(top != NULL, "second failure not detected");
    snprintf(needle, sizeof needle, "(%s, server) failed", g.cid[victim]);
    for (int i = 0; i < 4; i++)
        if (i != c && i != victim) ck_assert(it_wait_log(g.p[i], needle, 5000));
    ck_assert(it_orders_unique(top));
    for (int i = 0; i < 4; i++)
        if (i != c && i != victim) ck_assert(it_log_versions_monotonic(g.p[i], NULL));
    json_decref(top);
    it_end();
}
END_TEST

/* The baseline counts n servers (it grows one server at a time after the
 * grid forms; a pause before that leaves the others without quorum). */
typedef struct baseline_want {
    const char *finder;
    long n;
} baseline_want;

static bool baseline_counts(void *ctx)
{
    baseline_want *w = ctx;
    json_t *top = it_top(w->finder, NULL, NULL);
    bool ok = top && json_integer_value(json_object_get(json_object_get(top, "quorum"), "baseline_nodes")) == w->n;
    json_decref(top);
    return ok;
}

START_TEST(sigstopped_coordinator_is_removed_and_rejoins_with_a_new_id)
{
    it_begin("sigstop");
    grid g;
    grid_start(&g, 3, NULL);
    baseline_want bw = {g.finder, 3};
    ck_assert_msg(it_wait_for(baseline_counts, &bw, WAIT_MS), "the baseline never counted the three servers");
    json_t *top = wait_top(g.finder, 3, 0, NULL);
    ck_assert_ptr_nonnull(top);
    int c = index_of_order1(&g, top);
    ck_assert_int_ge(c, 0);
    char old_id[64], others[3][64];
    snprintf(old_id, sizeof old_id, "%s", id_of(top, g.cid[c]));
    for (int i = 0; i < 3; i++) snprintf(others[i], sizeof others[i], "%s", id_of(top, g.cid[i]));
    json_decref(top);
    it_signal(g.p[c], SIGSTOP);
    top = wait_top(g.finder, 2, 0, old_id);
    ck_assert_msg(top != NULL, "stopped coordinator was not removed");
    json_decref(top);
    it_signal(g.p[c], SIGCONT);
    ck_assert(it_wait_log(g.p[c], "rejoining as a new node", 10000));
    top = wait_top(g.finder, 3, 0, NULL);
    ck_assert_msg(top != NULL, "resumed node did not rejoin");
    const char *new_id = id_of(top, g.cid[c]);
    ck_assert_ptr_nonnull(new_id);
    ck_assert_str_ne(new_id, old_id);
    /* It never acted on its stale view: the others kept their ids, and it
     * announced no failure of its own. */
    for (int i = 0; i < 3; i++)
        if (i != c) ck_assert_str_eq(id_of(top, g.cid[i]), others[i]);
    for (int i = 0; i < 3; i++) {
        char needle[96];
        snprintf(needle, sizeof needle, "(%s, server) failed", g.cid[i]);
        if (i != c) ck_assert_msg(!it_log_has(g.p[c], needle), "resumed node declared %s failed", g.cid[i]);
    }
    ck_assert(it_orders_unique(top));
    json_decref(top);
    it_end();
}
END_TEST

START_TEST(graceful_stop_is_announced_as_left)
{
    it_begin("left");
    grid g;
    grid_start(&g, 3, NULL);
    json_t *top = wait_top(g.finder, 3, 0, NULL);
    ck_assert_ptr_nonnull(top);
    json_decref(top);
    it_signal(g.p[2], SIGTERM);
    ck_assert(it_wait_exit(g.p[2], 5000));
    ck_assert(it_log_has(g.p[2], "stopped"));
    char left[96], failed[96];
    snprintf(left, sizeof left, "(%s, server) left", g.cid[2]);
    snprintf(failed, sizeof failed, "(%s, server) failed", g.cid[2]);
    for (int i = 0; i < 2; i++) {
        ck_assert(it_wait_log(g.p[i], left, 5000));
        ck_assert(!it_log_has(g.p[i], failed));
    }
    top = wait_top(g.finder, 2, 0, NULL);
    ck_assert_ptr_nonnull(top);
    json_decref(top);
    /* The coordinator leaving: the next oldest takes over, still `left`. */
    it_signal(g.p[0], SIGTERM);
    ck_assert(it_wait_exit(g.p[0], 5000));
    snprintf(left, sizeof left, "(%s, server) left", g.cid[0]);
    ck_assert(it_wait_log(g.p[1], left, 5000));
    it_end();
}
END_TEST

START_TEST(a_taken_port_moves_the_node_to_the_next_in_range)
{
    it_begin("port");
    int base = it_free_ports(3);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)base)};
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    ck_assert_int_eq(listen(fd, 1), 0);
    char port[16], finder[64], taken[64], cid[32];
    snprintf(port, sizeof port, "%d", base);
    snprintf(finder, sizeof finder, "127.0.0.1:%d..%d", base, base + 2);
    const char *args[] = {"--port", port, "--port-range", "3", "--ip-finder", finder, "--failure-detection-ms", FD, NULL};
    it_proc *p = it_latticed("node0", args);
    ck_assert(it_wait_log(p, " ready: ", WAIT_MS));
    snprintf(taken, sizeof taken, "peer port %d is taken", base);
    ck_assert(it_log_has(p, taken));
    /* The listener on the taken port accepts connections and says nothing:
     * the node held back (it might have been a paused grid), then started a
     * grid of its own - once the listener's backlog is full, or after 5
     * failure-detection timeouts. */
    ck_assert(it_log_has(p, "accepts connections but sent nothing"));
    json_t *top = wait_top(finder, 1, 0, NULL);
    ck_assert_ptr_nonnull(top);
    snprintf(cid, sizeof cid, "127.0.0.1:%d", base + 1);
    ck_assert_ptr_nonnull(it_node_by_cid(top, cid));
    json_decref(top);
    close(fd);
    it_end();
}
END_TEST

/* A fresh server beside a grid that does not answer - paused (SIGSTOP),
 * its port still accepting connections - must not start a grid of its own:
 * with a quorum of one it would acknowledge writes that vanish when it
 * merges into the real grid.  It says why it waits and joins the grid as
 * soon as that answers. */
START_TEST(a_fresh_server_waits_for_a_paused_grid)
{
    it_begin("paused_grid");
    int base = it_free_ports(2);
    char finder[64], port0[16], port1[16];
    snprintf(finder, sizeof finder, "127.0.0.1:%d..%d", base, base + 1);
    snprintf(port0, sizeof port0, "%d", base);
    snprintf(port1, sizeof port1, "%d", base + 1);
    const char *a0[] = {"--port", port0, "--port-range", "1", "--ip-finder", finder, "--failure-detection-ms", FD, NULL};
    const char *a1[] = {"--port", port1, "--port-range", "1", "--ip-finder", finder, "--failure-detection-ms", FD, NULL};
    it_proc *p0 = it_latticed("node0", a0);
    ck_assert(it_wait_log(p0, " ready: ", WAIT_MS));
    it_signal(p0, SIGSTOP);
    it_proc *p1 = it_latticed("node1", a1);
    ck_assert(it_wait_log(p1, "accepts connections but sent nothing", WAIT_MS));
    it_signal(p0, SIGCONT);
    ck_assert(it_wait_log(p1, " ready: ", WAIT_MS));
    ck_assert_msg(!it_log_has(p1, "as its first node"), "node1 started a grid beside the paused one");
    json_t *top = wait_top(finder, 2, 0, NULL);
    ck_assert_ptr_nonnull(top);
    char cid0[32];
    snprintf(cid0, sizeof cid0, "127.0.0.1:%d", base);
    ck_assert_str_eq(json_string_value(json_object_get(top, "coordinator")), id_of(top, cid0));
    json_decref(top);
    it_end();
}
END_TEST

START_TEST(client_node_is_listed_as_client_and_reconnects_after_its_server_dies)
{
    it_begin("client");
    grid g;
    grid_start(&g, 3, NULL);
    json_t *top = wait_top(g.finder, 3, 0, NULL);
    ck_assert_ptr_nonnull(top);
    int c = index_of_order1(&g, top);
    int via = (c + 1) % 3; /* the client knows one non-coordinator server only */
    json_decref(top);
    char only[64];
    snprintf(only, sizeof only, "127.0.0.1:%d", g.base + via);
    int cport = it_free_ports(1);
    char cp[16];
    snprintf(cp, sizeof cp, "%d", cport);
    const char *args[] = {"--client", "--port", cp, "--port-range", "1", "--ip-finder", only,
                          "--failure-detection-ms", FD, NULL};
    it_proc *cl = it_latticed("client", args);
    ck_assert(it_wait_log(cl, " ready: ", WAIT_MS));
    top = wait_top(g.finder, 3, 1, NULL);
    ck_assert_msg(top != NULL, "client not listed");
    char ccid[32];
    snprintf(ccid, sizeof ccid, "127.0.0.1:%d", cport);
    json_t *cn = it_node_by_cid(top, ccid);
    ck_assert_ptr_nonnull(cn);
    ck_assert_str_eq(json_string_value(json_object_get(cn, "role")), "client");
    json_decref(top);
    it_signal(g.p[via], SIGKILL);
    it_wait_exit(g.p[via], 2000);
    top = wait_top(g.finder, 2, 1, NULL);
    ck_assert_msg(top != NULL, "client did not stay in the grid after its server died");
    ck_assert_ptr_nonnull(it_node_by_cid(top, ccid));
    json_decref(top);
    /* Even when every server it knew from the topology but one is gone, it
     * is back after the coordinator dies too. */
    top = wait_top(g.finder, 2, 1, NULL);
    ck_assert_ptr_nonnull(top);
    int c2 = index_of_order1(&g, top);
    json_decref(top);
    ck_assert_int_ge(c2, 0);
    it_signal(g.p[c2], SIGKILL);
    it_wait_exit(g.p[c2], 2000);
    top = wait_top(g.finder, 1, 1, NULL);
    ck_assert_msg(top != NULL, "client lost after the coordinator died");
    json_decref(top);
    it_end();
}
END_TEST

START_TEST(a_node_restarted_on_its_port_before_detection_replaces_its_old_self)
{
    it_begin("restart");
    grid g;
    /* A long timeout: the restart must be recognised without waiting for it. */
    const char *slow[] = {"--failure-detection-ms", "30000", NULL};
    grid_start(&g, 3, slow);
    json_t *top = wait_top(g.finder, 3, 0, NULL);
    ck_assert_ptr_nonnull(top);
    int victim = (index_of_order1(&g, top) + 1) % 3;
    char old_id[64];
    snprintf(old_id, sizeof old_id, "%s", id_of(top, g.cid[victim]));
    json_decref(top);
    it_signal(g.p[victim], SIGKILL);
    ck_assert(it_wait_exit(g.p[victim], 2000));
    char port[16];
    snprintf(port, sizeof port, "%d", g.base + victim);
    const char *args[] = {"--port", port, "--port-range", "1", "--ip-finder", g.finder, "--failure-detection-ms",
                          "30000", NULL};
    it_proc *again = it_latticed("restarted", args);
    ck_assert(it_wait_log(again, " ready: ", WAIT_MS));
    top = wait_top(g.finder, 3, 0, NULL);
    ck_assert_ptr_nonnull(top);
    const char *now_id = id_of(top, g.cid[victim]);
    ck_assert_ptr_nonnull(now_id);
    ck_assert_str_ne(now_id, old_id);
    /* One entry per host:port, and the old incarnation was reported failed. */
    size_t same = 0, i;
    json_t *n;
    json_array_foreach(json_object_get(top, "nodes"), i, n) same += !strcmp(json_string_value(json_object_get(n, "consistent_id")), g.cid[victim]);
    ck_assert_uint_eq(same, 1);
    char needle[96];
    snprintf(needle, sizeof needle, "node %.8s (%s, server) failed", old_id, g.cid[victim]);
    for (int k = 0; k < 3; k++)
        if (k != victim) ck_assert(it_wait_log(g.p[k], needle, 5000));
    json_decref(top);
    it_end();
}
END_TEST

/* Every node, asked on its own port, shows the same n-server grid: the same
 * coordinator and the same member ids.  (lattice top answers with the view
 * of the node asked first, so asking through the finder range alone would
 * not tell two grids that list each other's nodes apart.) */
typedef struct one_grid {
    grid *g;
    char coord[64], ids[16][64];
} one_grid;

static bool same_grid_everywhere(void *ctx)
{
    one_grid *w = ctx;
    bool ok = true;
    for (int i = 0; i < w->g->n && ok; i++) {
        json_t *top = it_top(w->g->cid[i], NULL, NULL);
        ok = top && it_servers(top) == (size_t)w->g->n && it_clients(top) == 0;
        const char *c = ok ? json_string_value(json_object_get(top, "coordinator")) : NULL;
        ok = ok && c;
        if (ok && i == 0) snprintf(w->coord, sizeof w->coord, "%s", c);
        ok = ok && !strcmp(c, w->coord);
        for (int k = 0; k < w->g->n && ok; k++) {
            const char *id = id_of(top, w->g->cid[k]);
            ok = id != NULL;
            if (ok && i == 0) snprintf(w->ids[k], sizeof w->ids[k], "%s", id);
            ok = ok && !strcmp(id, w->ids[k]);
        }
        json_decref(top);
    }
    return ok;
}

/* Issue #32: nodes started together while the machine stalls.  Once they
 * exchange joins, every process is paused at once for longer than the seed
 * election wait: each wakes with its wait run out and the others' joins old,
 * and each started a grid of its own in the same instant - then admitted the
 * others' joins still on the way, so every node ended in several grids that
 * list each other's nodes under other orders, nobody coordinating them as
 * one.  Now a joining node that was stalled listens again before it seeds,
 * and grids that admitted each other's nodes merge. */
START_TEST(nodes_started_together_through_a_machine_stall_form_one_grid)
{
    it_begin("stall_start");
    for (int round = 0; round < 3; round++) {
        grid g;
        grid_start(&g, 4, NULL);
        for (int i = 0; i < 4; i++) ck_assert(it_wait_log(g.p[i], "joining cluster", WAIT_MS));
        usleep(100 * 1000); /* they hear each other's joins */
        for (int i = 0; i < 4; i++) it_signal(g.p[i], SIGSTOP);
        usleep(1500 * 1000); /* the stall: three times the seed election wait */
        for (int i = 0; i < 4; i++) it_signal(g.p[i], SIGCONT);
        one_grid w = {.g = &g};
        ck_assert_msg(it_wait_for(same_grid_everywhere, &w, WAIT_MS), "round %d: the nodes did not end as one grid",
                      round);
        json_t *top = wait_top(g.finder, 4, 0, NULL);
        ck_assert_ptr_nonnull(top);
        ck_assert(it_orders_unique(top));
        json_decref(top);
        for (int i = 0; i < 4; i++) {
            it_signal(g.p[i], SIGKILL);
            it_wait_exit(g.p[i], 2000);
        }
    }
    it_end();
}
END_TEST

int main(int argc, char **argv)
{
    Suite *s = suite_create("integration: membership");
    TCase *tc = tcase_create("grid");
    tcase_set_timeout(tc, 120);
    static const it_named tests[] = {
        {"three_node_static_grid_forms_and_top_json_matches_design", &three_node_static_grid_forms_and_top_json_matches_design},
        {"five_nodes_started_at_once_converge_with_unique_orders", &five_nodes_started_at_once_converge_with_unique_orders},
        {"kill9_of_coordinator_and_of_another_node_is_detected_by_every_survivor", &kill9_of_coordinator_and_of_another_node_is_detected_by_every_survivor},
        {"sigstopped_coordinator_is_removed_and_rejoins_with_a_new_id", &sigstopped_coordinator_is_removed_and_rejoins_with_a_new_id},
        {"graceful_stop_is_announced_as_left", &graceful_stop_is_announced_as_left},
        {"a_taken_port_moves_the_node_to_the_next_in_range", &a_taken_port_moves_the_node_to_the_next_in_range},
        {"a_fresh_server_waits_for_a_paused_grid", &a_fresh_server_waits_for_a_paused_grid},
        {"client_node_is_listed_as_client_and_reconnects_after_its_server_dies", &client_node_is_listed_as_client_and_reconnects_after_its_server_dies},
        {"a_node_restarted_on_its_port_before_detection_replaces_its_old_self", &a_node_restarted_on_its_port_before_detection_replaces_its_old_self},
        {"nodes_started_together_through_a_machine_stall_form_one_grid", &nodes_started_together_through_a_machine_stall_form_one_grid},
    };
    it_add_named(tc, tests, sizeof tests / sizeof tests[0], argc, argv); /* it_membership [NAME...] */
    suite_add_tcase(s, tc);
    return it_run_suite(s);
}
