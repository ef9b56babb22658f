/*
 * Whole-grid restart (docs/PERSISTENCE.md) with real latticed processes: a
 * 3-server grid, backups=1 over 1024 partitions (no node holds every
 * partition), under a recorded concurrent SET/GET load; kill -9 of all
 * three; restart from the data directories.  The history - the load, then
 * reads of every key through every node after the restart - must be
 * linearizable (tests/fault's checker: no acknowledged write lost, no value
 * that was never written, no stale read), and no rebalance moved an entry.
 * Variants: one node's data directory is an old copy (it must not win), one
 * node never returns (--restart-wait-ms ends the wait; backups cover it),
 * the restore's coordinator is killed at its decision (a survivor takes
 * the restore over), and both at once: the survivor must wait for the
 * killed coordinator's copies rather than keep the old directory's.
 */
#include <check.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "resp_grid.h"
#include "../fault/history.h"

#define CLIENTS 4
#define KEYS 64
#define MAX_OPS 40000
#define MAX_MS 20000
#define CACHE "default:backups=1,partitions=1024"
#define SERVE_MS 120000 /* a node acknowledges writes again within this */

static atomic_bool stop_flag;
static atomic_long ok_ops;
static atomic_long seq_next;

static int64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

typedef struct client {
    int id, node;
    fh_history h;
} client;

static void *load(void *arg)
{
    client *cl = arg;
    redisContext *c = try_conn(cl->node);
    if (!c) return NULL;
    unsigned seed = (unsigned)cl->id * 7919u + 17;
    int64_t t0 = now_ns();
    for (long i = 0; i < MAX_OPS && !atomic_load(&stop_flag) && now_ns() - t0 < (int64_t)MAX_MS * 1000000; i++) {
        fh_op op = {0};
        op.client = cl->id;
        op.node = cl->node;
        snprintf(op.key, sizeof op.key, "r:%u", rand_r(&seed) % KEYS);
        bool write = rand_r(&seed) % 3 != 0;
        op.kind = write ? FH_WRITE : FH_READ;
        if (write) op.value = atomic_fetch_add(&seq_next, 1) + 1;
        op.invoke = now_ns();
        redisReply *r = write ? redisCommand(c, "SET %s %lld", op.key, (long long)op.value)
                              : redisCommand(c, "GET %s", op.key);
        op.complete = now_ns();
        if (!r) { /* the node died: a write may have happened, a read tells nothing */
            op.outcome = write ? FH_UNKNOWN : FH_FAIL;
            fh_add(&cl->h, &op);
            break;
        }
        if (r->type == REDIS_REPLY_ERROR) {
            op.outcome = write ? FH_UNKNOWN : FH_FAIL;
        } else {
            op.outcome = FH_OK;
            if (!write) op.value = r->type == REDIS_REPLY_NIL ? FH_NIL : strtoll(r->str, NULL, 10);
            atomic_fetch_add(&ok_ops, 1);
        }
        freeReplyObject(r);
        fh_add(&cl->h, &op);
    }
    redisFree(c);
    return NULL;
}

static client clients[CLIENTS];
static fh_history all;

static void run_load(pthread_t *th)
{
    atomic_store(&stop_flag, false);
    atomic_store(&ok_ops, 0);
    for (int i = 0; i < CLIENTS; i++) {
        clients[i].id = i;
        clients[i].node = i % 3;
        fh_init(&clients[i].h);
        pthread_create(&th[i], NULL, load, &clients[i]);
    }
}

static void join_load(pthread_t *th)
{
    for (int i = 0; i < CLIENTS; i++) {
        pthread_join(th[i], NULL);
        fh_append_all(&all, &clients[i].h);
        fh_free(&clients[i].h);
    }
}

static bool enough(void *ctx)
{
    (void)ctx;
    return atomic_load(&ok_ops) >= 3000;
}

/* Reads of every key through node i, recorded (client 100 + i). */
static void read_all(int i)
{
    redisContext *c = conn_to(i);
    for (int k = 0; k < KEYS; k++) {
        fh_op op = {0};
        op.client = 100 + i;
        op.node = i;
        op.kind = FH_READ;
        snprintf(op.key, sizeof op.key, "r:%d", k);
        op.invoke = now_ns();
        redisReply *r = cmd(c, "GET %s", op.key);
        op.complete = now_ns();
        ck_assert_msg(r->type != REDIS_REPLY_ERROR, "GET %s through node %d: %s", op.key, i, r->str);
        op.outcome = FH_OK;
        op.value = r->type == REDIS_REPLY_NIL ? FH_NIL : strtoll(r->str, NULL, 10);
        freeReplyObject(r);
        fh_add(&all, &op);
    }
    redisFree(c);
}

static void check_linearizable(const char *what)
{
    fh_report rep;
    char path[600];
    snprintf(path, sizeof path, "%s/history-%s.txt", it_dir(), what);
    fh_save(&all, path, what);
    bool ok = fh_check(&all, stderr, &rep);
    printf("%s: %zu operations on %zu keys checked: %zu violations, %zu inconclusive\n", what, rep.ops_checked, rep.keys,
           rep.violations, rep.inconclusive);
    ck_assert_msg(ok, "%s: the history is not linearizable (%s)", what, path);
}

static char data_dir[3][512];

static const char **node_args(int i, const char *wait_ms)
{
    static const char *a[3][12];
    snprintf(data_dir[i], sizeof data_dir[i], "%s/data%d", it_dir(), i);
    int k = 0;
    a[i][k++] = "--data-dir";
    a[i][k++] = data_dir[i];
    a[i][k++] = "--wal-fsync";
    a[i][k++] = "group";
    a[i][k++] = "--cache";
    a[i][k++] = CACHE;
    a[i][k++] = "--restart-wait-ms";
    a[i][k++] = wait_ms;
    a[i][k] = NULL;
    return a[i];
}

static long rebalance_entries(void)
{
    char out[1 << 14];
    int rc = it_capture_stdout(out, sizeof out, "%s --ip-finder %s --json rebalance", LATTICE_CLI_PATH, finder);
    json_t *j = rc == 0 ? json_loads(out, 0, NULL) : NULL;
    ck_assert_msg(j, "lattice --json rebalance: %s", out);
    long n = -1;
    json_t *c;
    size_t i;
    json_array_foreach(json_object_get(j, "caches"), i, c) n = (long)json_integer_value(json_object_get(c, "entries_received"));
    json_decref(j);
    return n;
}

static bool rebalance_settled(void *ctx)
{
    (void)ctx;
    char out[1 << 14];
    int rc = it_capture_stdout(out, sizeof out, "%s --ip-finder %s --json rebalance", LATTICE_CLI_PATH, finder);
    json_t *j = rc == 0 ? json_loads(out, 0, NULL) : NULL;
    bool ok = j && json_is_false(json_object_get(j, "in_progress"));
    if (j) json_decref(j);
    return ok;
}

/* Three servers up, in one baseline, no rebalance running. */
static void start_three(void)
{
    for (int i = 0; i < 3; i++) start_node(i, node_args(i, "60000"));
    for (int i = 0; i < 3; i++) wait_serving(i, SERVE_MS);
    ck_assert_msg(it_wait_baseline(finder, 3, 60000), "the baseline never held the 3 servers");
    ck_assert(it_wait_for(rebalance_settled, NULL, 120000));
}

static void kill_all(void)
{
    for (int i = 0; i < 3; i++)
        if (srv[i] && srv[i]->running) it_signal(srv[i], SIGKILL);
    for (int i = 0; i < 3; i++)
        if (srv[i]) ck_assert(it_wait_exit(srv[i], 10000));
}

static void load_and_kill(void)
{
    pthread_t th[CLIENTS];
    run_load(th);
    ck_assert(it_wait_for(enough, NULL, 60000));
    kill_all();
    join_load(th);
}

START_TEST(all_three_killed_and_restarted)
{
    it_begin("restart_all");
    fh_init(&all);
    start_grid(0, 3, NULL);
    start_three();
    load_and_kill();
    for (int i = 0; i < 3; i++) start_node(i, node_args(i, "60000"));
    for (int i = 0; i < 3; i++) wait_serving(i, SERVE_MS);
    for (int i = 0; i < 3; i++) ck_assert_msg(it_log_has(srv[i], "entries restored from"), "node %d kept its copy", i);
    bool coordinated = false;
    for (int i = 0; i < 3; i++) coordinated |= it_log_has(srv[i], "every owner holds the kept copy");
    ck_assert(coordinated);
    ck_assert(it_wait_for(rebalance_settled, NULL, 60000));
    long moved = rebalance_entries();
    printf("whole-grid restart: rebalance entries_received %ld\n", moved);
    ck_assert_int_eq(moved, 0);
    for (int i = 0; i < 3; i++) read_all(i);
    check_linearizable("all_three");
    for (int i = 0; i < 3; i++) it_signal(srv[i], SIGTERM);
    for (int i = 0; i < 3; i++) ck_assert(it_wait_exit(srv[i], 20000));
    fh_free(&all);
    it_end();
}
END_TEST

/* Node 2 stops, its data directory is copied, it comes back (dropping its
 * copy: the grid is live) and the load goes on; then all three are killed
 * (under load) and node 2's directory is put back to the old copy: older in
 * base version and counters than the others'. */
static void old_dir_for_node_2(void)
{
    fh_init(&all);
    start_grid(0, 3, NULL);
    start_three();
    pthread_t th[CLIENTS];
    run_load(th);
    ck_assert(it_wait_for(enough, NULL, 60000));
    atomic_store(&stop_flag, true);
    join_load(th);
    it_signal(srv[2], SIGTERM);
    ck_assert(it_wait_exit(srv[2], 20000));
    ck_assert_int_eq(it_sh("cp -a %s %s.old", data_dir[2], data_dir[2]), 0);
    start_node(2, node_args(2, "60000"));
    wait_serving(2, SERVE_MS);
    ck_assert(it_wait_for(rebalance_settled, NULL, 120000));
    load_and_kill();
    ck_assert_int_eq(it_sh("rm -rf %s && mv %s.old %s", data_dir[2], data_dir[2], data_dir[2]), 0);
}

START_TEST(an_old_data_dir_does_not_win)
{
    /* Node 2 restarts from an old copy of its data directory: it must not
     * bring an old value back. */
    it_begin("restart_old_dir");
    old_dir_for_node_2();
    for (int i = 0; i < 3; i++) start_node(i, node_args(i, "60000"));
    for (int i = 0; i < 3; i++) wait_serving(i, SERVE_MS);
    /* Its stale partitions were replaced by the kept copies. */
    char sent[200];
    snprintf(sent, sizeof sent, "sent to 127.0.0.1:%d", peer_base + 2);
    bool replaced = false;
    for (int i = 0; i < 2; i++) replaced |= it_log_has(srv[i], sent);
    ck_assert_msg(replaced, "no kept copy was sent to the node with the old data directory");
    ck_assert(it_wait_for(rebalance_settled, NULL, 120000));
    for (int i = 0; i < 3; i++) read_all(i);
    check_linearizable("old_dir");
    for (int i = 0; i < 3; i++) it_signal(srv[i], SIGTERM);
    for (int i = 0; i < 3; i++) ck_assert(it_wait_exit(srv[i], 20000));
    fh_free(&all);
    it_end();
}
END_TEST

START_TEST(one_node_never_returns)
{
    /* Two of three come back with --restart-wait-ms 3000: they refuse
     * operations naming the wait, then serve without the third; with
     * backups=1 every partition has a copy on one of them. */
    it_begin("restart_missing");
    fh_init(&all);
    start_grid(0, 3, NULL);
    start_three();
    load_and_kill();
    for (int i = 0; i < 2; i++) start_node(i, node_args(i, "3000"));
    bool refused = false;
    for (int tries = 0; tries < 200 && !refused; tries++) {
        redisContext *c = try_conn(0);
        redisReply *r = c ? redisCommand(c, "GET r:0") : NULL;
        refused = r && r->type == REDIS_REPLY_ERROR && strstr(r->str, "restarting");
        if (r) freeReplyObject(r);
        if (c) redisFree(c);
        if (!refused) usleep(20000);
    }
    ck_assert_msg(refused, "an operation during the wait was not refused naming it");
    for (int i = 0; i < 2; i++) wait_serving(i, SERVE_MS);
    ck_assert(it_log_has(srv[0], "did not report within") || it_log_has(srv[1], "did not report within"));
    for (int i = 0; i < 2; i++) read_all(i);
    check_linearizable("missing");
    for (int i = 0; i < 2; i++) it_signal(srv[i], SIGTERM);
    for (int i = 0; i < 2; i++) ck_assert(it_wait_exit(srv[i], 20000));
    fh_free(&all);
    it_end();
}
END_TEST

/* The node that coordinates the restore is killed the moment it decided
 * which copies to keep (the caches are restoring then: nothing served, a
 * digest round at least to go), and comes back from its data directory: a
 * survivor takes the restore over, deciding from the owners' digests, or
 * waits for every report again; either way no acknowledged write may be
 * lost. */
static void coordinator_dies(bool kill_after_adoption)
{
    fh_init(&all);
    start_grid(0, 3, NULL);
    start_three();
    load_and_kill();
    for (int i = 0; i < 3; i++) start_node(i, node_args(i, "60000"));
    int victim = -1;
    for (int tries = 0; tries < 6000 && victim < 0; tries++) {
        for (int i = 0; i < 3 && victim < 0; i++)
            if (it_log_has(srv[i], "whole-grid restart: cache default: base version")) victim = i;
        if (victim < 0) usleep(5000);
    }
    ck_assert_msg(victim >= 0, "no node decided the restore");
    if (kill_after_adoption) { /* ... or once another node adopted its copy: the caches are restoring */
        bool adopted = false;
        for (int tries = 0; tries < 6000 && !adopted; tries++) {
            for (int i = 0; i < 3; i++) adopted |= i != victim && it_log_has(srv[i], "entries restored from");
            if (!adopted) usleep(2000);
        }
        ck_assert_msg(adopted, "no other node adopted its copy");
    }
    it_signal(srv[victim], SIGKILL);
    ck_assert(it_wait_exit(srv[victim], 10000));
    printf("restore takeover: killed node %d, the restore's coordinator, %s\n", victim,
           kill_after_adoption ? "once another node adopted its copy" : "at its decision");
    start_node(victim, node_args(victim, "60000"));
    for (int i = 0; i < 3; i++) wait_serving(i, SERVE_MS);
    /* Which way it went depends on how far the decision had spread: a
     * survivor took the restoring caches over, or (the kill came before the
     * metadata left) it waited again for every server's report and decided
     * anew, the killed node reporting from its data directory again. */
    bool took_over = false;
    for (int i = 0; i < 3; i++) took_over |= i != victim && it_log_has(srv[i], "takes over restoring");
    printf("restore takeover: %s\n", took_over ? "a survivor took the restore over"
                                                : "the survivors waited for the killed node and decided again");
    ck_assert(it_wait_for(rebalance_settled, NULL, 120000));
    for (int i = 0; i < 3; i++) read_all(i);
    check_linearizable("takeover");
    for (int i = 0; i < 3; i++) it_signal(srv[i], SIGTERM);
    for (int i = 0; i < 3; i++) ck_assert(it_wait_exit(srv[i], 20000));
    fh_free(&all);
    it_end();
}

START_TEST(the_coordinator_dies_at_its_decision)
{
    it_begin("restart_takeover");
    coordinator_dies(false);
}
END_TEST

START_TEST(the_coordinator_dies_while_restoring)
{
    it_begin("restart_takeover2");
    coordinator_dies(true);
}
END_TEST

START_TEST(an_old_data_dir_and_the_coordinator_dies)
{
    /* The two limits at once: node 2 comes back from an old copy of its
     * data directory, and the restore's coordinator (node 0, started first)
     * is killed once the others adopted their copies - before its first
     * digest round, so before it sent anything.  For the partitions node 0
     * and node 2 own, node 0's copy is the only new one: the survivor that
     * takes the restore over must wait for node 0 to come back and send it,
     * never keep node 2's old copy. */
    it_begin("restart_old_dir_takeover");
    old_dir_for_node_2();
    start_node(0, node_args(0, "60000"));
    ck_assert(it_wait_log(srv[0], "waiting for every server of its baseline", 60000));
    for (int i = 1; i < 3; i++) start_node(i, node_args(i, "60000"));
    ck_assert(it_wait_log(srv[0], "whole-grid restart: cache default: base version", 120000));
    bool adopted = false;
    for (int tries = 0; tries < 6000 && !adopted; tries++) {
        for (int i = 1; i < 3; i++) adopted |= it_log_has(srv[i], "entries restored from");
        if (!adopted) usleep(2000);
    }
    ck_assert_msg(adopted, "no other node adopted its copy");
    it_signal(srv[0], SIGKILL);
    ck_assert(it_wait_exit(srv[0], 10000));
    char sent[200];
    snprintf(sent, sizeof sent, "sent to 127.0.0.1:%d", peer_base + 2);
    bool sent_before = it_log_has(srv[0], sent);
    printf("old dir + takeover: node 0 killed %s it sent a kept copy to node 2\n", sent_before ? "after" : "before");
    start_node(0, node_args(0, "60000"));
    for (int i = 0; i < 3; i++) wait_serving(i, SERVE_MS);
    bool took_over = it_log_has(srv[1], "takes over restoring") || it_log_has(srv[2], "takes over restoring");
    printf("old dir + takeover: %s\n", took_over ? "a survivor took the restore over" : "decided anew");
    if (took_over && !sent_before)
        ck_assert_msg(it_log_has(srv[0], sent), "the returned coordinator never sent its kept copies to node 2");
    ck_assert(it_wait_for(rebalance_settled, NULL, 120000));
    for (int i = 0; i < 3; i++) read_all(i);
    check_linearizable("old_dir_takeover");
    for (int i = 0; i < 3; i++) it_signal(srv[i], SIGTERM);
    for (int i = 0; i < 3; i++) ck_assert(it_wait_exit(srv[i], 20000));
    fh_free(&all);
    it_end();
}
END_TEST

int main(int argc, char **argv)
{
    Suite *s = suite_create("it_restart");
    TCase *tc = tcase_create("restart");
    tcase_set_timeout(tc, 900);
    static const it_named tests[] = {
        {"all_three_killed_and_restarted", &all_three_killed_and_restarted},
        {"an_old_data_dir_does_not_win", &an_old_data_dir_does_not_win},
        {"one_node_never_returns", &one_node_never_returns},
        {"the_coordinator_dies_at_its_decision", &the_coordinator_dies_at_its_decision},
        {"the_coordinator_dies_while_restoring", &the_coordinator_dies_while_restoring},
        {"an_old_data_dir_and_the_coordinator_dies", &an_old_data_dir_and_the_coordinator_dies},
    };
    it_add_named(tc, tests, sizeof tests / sizeof tests[0], argc, argv);
    suite_add_tcase(s, tc);
    return it_run_suite(s);
}
