/*
 * Three network namespaces joined by a bridge (in a fourth, "switch"
 * namespace, so the root namespace is untouched): multicast discovery,
 * authenticated probes, static + multicast finders at once, and a partition
 * (a veth set down, then up) that splits the grid and merges it again.
 * The test creates and removes them itself; it needs root (CI runs as root)
 * and reports itself skipped otherwise.  Each namespace routes 224.0.0.0/4
 * through its veth (the kernel would pick eth0), each node binds its
 * namespace's address.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

static char ns[4][32], sw[32];
static int tag;

/* False (after a loud message) when this machine cannot make namespaces at
 * all - not root, or a container without CAP_SYS_ADMIN; any later step
 * failing is a test failure. */
static bool netns_setup(void)
{
    tag = getpid() % 100000;
    snprintf(sw, sizeof sw, "ltsw%d", tag);
    it_guard_netns(sw);
    if (geteuid() != 0 || it_sh("ip netns add %s", sw) != 0) {
        fprintf(stderr, "it_multicast: SKIPPED: cannot create network namespaces here (needs root)\n");
        return false;
    }
    ck_assert_int_eq(it_sh("ip -n %s link add br0 type bridge mcast_snooping 0 && ip -n %s link set br0 up", sw, sw), 0);
    for (int i = 0; i < 3; i++) {
        snprintf(ns[i], sizeof ns[i], "ltn%d%c", tag, 'a' + i);
        it_guard_netns(ns[i]);
        ck_assert_int_eq(it_sh("ip netns add %s", ns[i]), 0);
        ck_assert_int_eq(it_sh("ip -n %s link add v%d type veth peer name p%d netns %s", ns[i], i, i, sw), 0);
        ck_assert_int_eq(it_sh("ip -n %s link set p%d master br0 && ip -n %s link set p%d up", sw, i, sw, i), 0);
        ck_assert_int_eq(it_sh("ip -n %s addr add 10.77.0.%d/24 dev v%d && ip -n %s link set v%d up && "
                               "ip -n %s link set lo up && ip -n %s route add 224.0.0.0/4 dev v%d",
                               ns[i], i + 1, i, ns[i], i, ns[i], ns[i], i),
                         0);
    }
    return true;
}

typedef struct want {
    json_t *last;
    const char *secret;
} want;

static bool three_servers(void *ctx)
{
    want *w = ctx;
    json_decref(w->last);
    const char *extra[] = {"--host", "10.77.0.1", NULL};
    w->last = it_top("multicast://228.1.2.4:47400", extra, ns[0]);
    return w->last && it_servers(w->last) == 3;
}

START_TEST(three_namespaces_find_each_other_by_multicast)
{
    it_begin("multicast");
    if (!netns_setup()) {
        it_end();
        return;
    }
    it_proc *p[3];
    for (int i = 0; i < 3; i++) {
        char host[32], name[16];
        snprintf(host, sizeof host, "10.77.0.%d", i + 1);
        snprintf(name, sizeof name, "node%d", i);
        const char *argv[] = {LATTICED_PATH, "--host", host, "--ip-finder", "multicast://228.1.2.4:47400",
                              "--failure-detection-ms", "1000", NULL};
        p[i] = it_spawn(name, ns[i], argv);
    }
    for (int i = 0; i < 3; i++) ck_assert(it_wait_log(p[i], " ready: ", 20000));
    want w = {NULL, NULL};
    ck_assert_msg(it_wait_for(three_servers, &w, 20000), "the namespaces did not form one grid");
    for (int i = 0; i < 3; i++) {
        char cid[32];
        snprintf(cid, sizeof cid, "10.77.0.%d:47500", i + 1);
        json_t *n = it_node_by_cid(w.last, cid);
        ck_assert_msg(n != NULL, "%s missing", cid);
        char host[32];
        snprintf(host, sizeof host, "10.77.0.%d", i + 1);
        ck_assert_str_eq(json_string_value(json_object_get(n, "host")), host);
    }
    ck_assert(it_orders_unique(w.last));
    json_decref(w.last);
    /* Only multicast could have found them: no static finder was given, and
     * every node used the default port in its own namespace. */
    ck_assert(it_log_has(p[0], "0 static addresses, multicast"));
    /* With no address to inspect, the inspection commands attach as a
     * client node and still read every server. */
    static char out[1 << 16];
    int rc = it_capture_stdout(out, sizeof out,
                               "ip netns exec %s %s --host 10.77.0.1 --ip-finder multicast://228.1.2.4:47400 --json caches",
                               ns[0], LATTICE_CLI_PATH);
    json_t *j = rc == 0 ? json_loads(out, 0, NULL) : NULL;
    ck_assert_msg(j, "caches by multicast: rc %d: %s", rc, out);
    ck_assert_int_eq(json_array_size(json_object_get(json_array_get(json_object_get(j, "caches"), 0), "nodes")), 3);
    json_decref(j);
    it_end();
}
END_TEST

static bool three_servers_with_secret(void *ctx)
{
    want *w = ctx;
    json_decref(w->last);
    const char *extra[] = {"--host", "10.77.0.2", "--secret-file", w->secret, NULL};
    w->last = it_top("multicast://228.1.2.4:47400", extra, ns[1]);
    return w->last && it_servers(w->last) == 3;
}

START_TEST(multicast_probes_are_authenticated_and_static_combines_with_multicast)
{
    it_begin("mcsecret");
    if (!netns_setup()) {
        it_end();
        return;
    }
    const char *secret = it_write_file("secret", "multicast secret\n");
    it_proc *p[2];
    for (int i = 0; i < 2; i++) {
        char host[32], name[16];
        snprintf(host, sizeof host, "10.77.0.%d", i + 1);
        snprintf(name, sizeof name, "node%d", i);
        const char *argv[] = {LATTICED_PATH, "--host", host, "--ip-finder", "multicast://228.1.2.4:47400",
                              "--failure-detection-ms", "1000", "--secret-file", secret, NULL};
        p[i] = it_spawn(name, ns[i], argv);
    }
    for (int i = 0; i < 2; i++) ck_assert(it_wait_log(p[i], " ready: ", 20000));
    /* Without the secret, in namespace a (its port 47500 is taken there:
     * it moves to 47501): its probes are refused, it logs why and never
     * starts a grid of its own. */
    const char *bare[] = {LATTICED_PATH, "--host", "10.77.0.1", "--ip-finder", "multicast://228.1.2.4:47400",
                          "--failure-detection-ms", "1000", NULL};
    it_proc *intruder = it_spawn("nosecret", ns[0], bare);
    ck_assert(it_wait_log(intruder, "join refused by", 20000));
    ck_assert(it_log_has(intruder, "authentication failed"));
    ck_assert(it_wait_log(p[0], "failed authentication", 5000) || it_wait_log(p[1], "failed authentication", 5000));
    /* Static and multicast at once, with the secret, from namespace c. */
    const char *both[] = {LATTICED_PATH, "--host", "10.77.0.3", "--ip-finder", "10.77.0.1:47500",
                          "--ip-finder", "multicast://228.1.2.4:47400", "--failure-detection-ms", "1000",
                          "--secret-file", secret, NULL};
    it_proc *third = it_spawn("both", ns[2], both);
    ck_assert(it_wait_log(third, " ready: ", 20000));
    want w = {NULL, secret};
    ck_assert_msg(it_wait_for(three_servers_with_secret, &w, 20000), "secret grid did not reach 3 servers");
    ck_assert_ptr_null(it_node_by_cid(w.last, "10.77.0.1:47501"));
    ck_assert_ptr_nonnull(it_node_by_cid(w.last, "10.77.0.3:47500"));
    json_decref(w.last);
    ck_assert(!it_log_has(intruder, " ready: "));
    ck_assert(!it_log_has(intruder, "starting cluster"));
    it_end();
}
END_TEST

typedef struct part {
    const char *finder;
    size_t servers;
    const char *cid, *not_id; /* cid present with an id other than not_id */
    json_t *last;
} part;

static bool view_from_a(void *ctx)
{
    part *w = ctx;
    json_decref(w->last);
    const char *extra[] = {"--host", "10.77.0.1", "--timeout-ms", "3000", NULL};
    w->last = it_top(w->finder, extra, ns[0]);
    if (!w->last || it_servers(w->last) != w->servers) return false;
    if (!w->cid) return true;
    json_t *n = it_node_by_cid(w->last, w->cid);
    return n && strcmp(json_string_value(json_object_get(n, "id")), w->not_id) != 0;
}

START_TEST(a_partitioned_node_is_removed_and_merges_back_when_the_link_returns)
{
    it_begin("partition");
    if (!netns_setup()) {
        it_end();
        return;
    }
    const char *finder = "10.77.0.1:47500,10.77.0.2:47500,10.77.0.3:47500";
    it_proc *p[3];
    for (int i = 0; i < 3; i++) {
        char host[32], name[16];
        snprintf(host, sizeof host, "10.77.0.%d", i + 1);
        snprintf(name, sizeof name, "node%d", i);
        const char *argv[] = {LATTICED_PATH, "--host", host, "--ip-finder", finder, "--failure-detection-ms", "1000", NULL};
        p[i] = it_spawn(name, ns[i], argv);
    }
    part w = {finder, 3, NULL, NULL, NULL};
    ck_assert_msg(it_wait_for(view_from_a, &w, 20000), "grid did not form");
    char old_id[64];
    snprintf(old_id, sizeof old_id, "%s", json_string_value(json_object_get(it_node_by_cid(w.last, "10.77.0.3:47500"), "id")));
    /* Cut node2 off: both sides remove each other. */
    ck_assert_int_eq(it_sh("ip -n %s link set v2 down", ns[2]), 0);
    w.servers = 2;
    ck_assert_msg(it_wait_for(view_from_a, &w, 20000), "the majority did not remove the cut-off node");
    ck_assert(it_wait_log(p[2], "(10.77.0.1:47500, server) failed", 10000));
    /* Heal: the one-node grid finds the larger one and merges into it. */
    ck_assert_int_eq(it_sh("ip -n %s link set v2 up", ns[2]), 0);
    /* No client attaches until then: only the coordinators' Hellos can
     * bring the two grids together. */
    ck_assert_msg(it_wait_log(p[2], "rejoining as a new node", 20000), "the cut-off node never rejoined");
    w.servers = 3;
    w.cid = "10.77.0.3:47500";
    w.not_id = old_id;
    ck_assert_msg(it_wait_for(view_from_a, &w, 30000), "the grids did not merge");
    ck_assert(it_log_has(p[2], "merging into it"));
    ck_assert(!it_log_has(p[0], "merging into it"));
    ck_assert(!it_log_has(p[1], "merging into it"));
    ck_assert(it_orders_unique(w.last));
    json_decref(w.last);
    it_end();
}
END_TEST

int main(void)
{
    Suite *s = suite_create("integration: multicast");
    TCase *tc = tcase_create("netns");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, three_namespaces_find_each_other_by_multicast);
    tcase_add_test(tc, multicast_probes_are_authenticated_and_static_combines_with_multicast);
    tcase_add_test(tc, a_partitioned_node_is_removed_and_merges_back_when_the_link_returns);
    suite_add_tcase(s, tc);
    return it_run_suite(s);
}
