/*
 * Keyspace walks over RESP on real grids (docs/RESP.md, "Keyspace walks"):
 *
 *   scan_covers_grid_and_primaries
 *                    a plain connection's SCAN and KEYS on any node list
 *                    every key of a 3-node grid; cluster-aware SCAN on each
 *                    node gives disjoint sets (each node's DBSIZE keys)
 *                    whose union is every key; RANDOMKEY names a stored key
 *   flushall_empties_every_copy
 *                    FLUSHALL (SYNC) through one node: DBSIZE 0 on every
 *                    node, no key readable there, `lattice verify` clean;
 *                    writes sent after it replied all survive, writes
 *                    acknowledged before it was sent are all gone
 *   scan_through_join_and_leave
 *                    a plain SCAN that runs while a 4th server joins and
 *                    one leaves (SIGTERM) returns every key present
 *                    throughout at least once, and ends
 *
 * `it_resp_walk NAME...` runs some.
 */
#include <check.h>
#include <hiredis.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "resp_grid.h"

#define NKEYS 3000

static const char *const extra[] = {"--cache", "default:backups=1,sync=full_sync", NULL};

/* Primaries that CLUSTER NODES on node i lists with slots. */
static int primaries(int i)
{
    redisContext *c = try_conn(i);
    if (!c) return -1;
    redisReply *r = redisCommand(c, "CLUSTER NODES");
    int n = 0;
    if (r && r->type == REDIS_REPLY_STRING) {
        for (char *line = r->str; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
            int fields = 0;
            for (char *p = line; *p && *p != '\n'; p++)
                if (*p == ' ') fields++;
            n += fields >= 8; /* "... connected <slots>" */
        }
    }
    if (r) freeReplyObject(r);
    redisFree(c);
    return n;
}

typedef struct spread_ctx {
    int nodes[RG_MAX], n, want;
} spread_ctx;

static bool spread(void *p)
{
    spread_ctx *x = p;
    for (int k = 0; k < x->n; k++)
        if (primaries(x->nodes[k]) != x->want) return false;
    return true;
}

static void wait_spread(spread_ctx x)
{
    ck_assert_msg(it_wait_for(spread, &x, 90000), "CLUSTER NODES never showed %d primaries", x.want);
}

static bool serves(void *p)
{
    redisContext *c = try_conn(*(int *)p);
    if (!c) return false;
    redisReply *r = redisCommand(c, "SET __ready 1");
    bool ok = r && r->type == REDIS_REPLY_STATUS;
    if (r) freeReplyObject(r);
    if (ok) {
        r = redisCommand(c, "DEL __ready");
        if (r) freeReplyObject(r);
    }
    redisFree(c);
    return ok;
}

static void three_nodes(void)
{
    start_grid(3, RG_MAX, extra);
    wait_spread((spread_ctx){{0, 1, 2}, 3, 3});
    for (int i = 0; i < 3; i++) ck_assert_msg(it_wait_for(serves, &i, 30000), "node %d never served", i);
}

static void write_keys(redisContext *c, const char *prefix, int n)
{
    for (int i = 0; i < n; i++) redisAppendCommand(c, "SET %s%d v%d", prefix, i, i);
    for (int i = 0; i < n; i++) {
        redisReply *r = NULL;
        ck_assert_int_eq(redisGetReply(c, (void **)&r), REDIS_OK);
        ck_assert_msg(r->type == REDIS_REPLY_STATUS, "SET: %s", r->str ? r->str : "?");
        freeReplyObject(r);
    }
}

/* seen[i] counts how often key<i> was listed; other keys fail the test. */
static void note(redisReply *arr, const char *prefix, int *seen, int n)
{
    size_t pl = strlen(prefix);
    for (size_t k = 0; k < arr->elements; k++) {
        const char *s = arr->element[k]->str;
        ck_assert_msg(!strncmp(s, prefix, pl), "a key never written: %s", s);
        int i = atoi(s + pl);
        ck_assert(i >= 0 && i < n);
        seen[i]++;
    }
}

/* One SCAN call; returns the next cursor. */
static unsigned long long scan_step(redisContext *c, unsigned long long cur, int count, const char *prefix, int *seen,
                                    int n)
{
    redisReply *r = cmd(c, "SCAN %llu COUNT %d", cur, count);
    ck_assert_msg(r->type == REDIS_REPLY_ARRAY && r->elements == 2, "SCAN: type %d %s", r->type, r->str ? r->str : "");
    unsigned long long next = strtoull(r->element[0]->str, NULL, 10);
    note(r->element[1], prefix, seen, n);
    freeReplyObject(r);
    return next;
}

static void full_scan(redisContext *c, int count, const char *prefix, int *seen, int n)
{
    unsigned long long cur = 0;
    int calls = 0;
    do {
        cur = scan_step(c, cur, count, prefix, seen, n);
        ck_assert_msg(++calls < 200000, "SCAN never ended");
    } while (cur);
}

static void verify_clean(void)
{
    char out[1 << 16];
    int rc = it_capture_stdout(out, sizeof out, "%s --ip-finder %s --json verify default", LATTICE_CLI_PATH, finder);
    json_t *j = json_loads(out, 0, NULL);
    ck_assert_msg(rc == 0 && j, "verify: rc %d: %s", rc, out);
    ck_assert_int_eq(json_array_size(json_object_get(j, "conflicts")), 0);
    json_decref(j);
}

START_TEST(scan_covers_grid_and_primaries)
{
    it_begin("resp_walk_cover");
    three_nodes();
    redisContext *w = conn_to(0);
    write_keys(w, "key", NKEYS);
    static int seen[NKEYS], mine[NKEYS];
    for (int node = 0; node < 3; node++) {
        redisContext *c = conn_to(node); /* plain: it never showed it routes by slots */
        memset(seen, 0, sizeof seen);
        full_scan(c, node == 0 ? 10 : 500, "key", seen, NKEYS);
        for (int i = 0; i < NKEYS; i++) ck_assert_msg(seen[i] >= 1, "node %d: plain SCAN missed key%d", node, i);
        memset(seen, 0, sizeof seen);
        redisReply *r = cmd(c, "KEYS key*");
        note(r, "key", seen, NKEYS);
        freeReplyObject(r);
        for (int i = 0; i < NKEYS; i++) ck_assert_msg(seen[i] == 1, "node %d: KEYS listed key%d %d times", node, i, seen[i]);
        r = cmd(c, "RANDOMKEY");
        ck_assert_msg(r->type == REDIS_REPLY_STRING && !strncmp(r->str, "key", 3), "RANDOMKEY: %d", r->type);
        freeReplyObject(r);
        redisFree(c);
    }
    /* Cluster-aware (READONLY marks it): each node walks what it is primary of. */
    memset(mine, 0, sizeof mine);
    long long total = 0;
    for (int node = 0; node < 3; node++) {
        redisContext *c = conn_to(node);
        freeReplyObject(cmd(c, "READONLY"));
        memset(seen, 0, sizeof seen);
        full_scan(c, 100, "key", seen, NKEYS);
        long long n = 0;
        for (int i = 0; i < NKEYS; i++) {
            n += seen[i] > 0;
            mine[i] += seen[i] > 0;
        }
        redisReply *r = cmd(c, "DBSIZE");
        ck_assert_msg(r->integer == n, "node %d: aware SCAN listed %lld keys, DBSIZE %lld", node, n, r->integer);
        freeReplyObject(r);
        ck_assert_msg(n > 0 && n < NKEYS, "node %d: %lld keys as primary", node, n);
        r = cmd(c, "KEYS *");
        ck_assert_int_eq((long long)r->elements, n);
        freeReplyObject(r);
        total += n;
        redisFree(c);
    }
    for (int i = 0; i < NKEYS; i++) ck_assert_msg(mine[i] == 1, "key%d listed by %d primaries", i, mine[i]);
    ck_assert_int_eq(total, NKEYS);
    redisFree(w);
    it_end();
}
END_TEST

START_TEST(flushall_empties_every_copy)
{
    it_begin("resp_walk_flush");
    three_nodes();
    redisContext *w = conn_to(0), *f = conn_to(1);
    write_keys(w, "old", NKEYS); /* acknowledged before the FLUSHALL is sent */
    /* FLUSHALL goes out; writes race with it; then it answers; then more writes. */
    redisAppendCommand(f, "FLUSHALL");
    write_keys(w, "mid", 500);
    redisReply *r = NULL;
    ck_assert_int_eq(redisGetReply(f, (void **)&r), REDIS_OK);
    ck_assert_msg(r->type == REDIS_REPLY_STATUS && !strcmp(r->str, "OK"), "FLUSHALL: %s", r->str ? r->str : "?");
    freeReplyObject(r);
    write_keys(w, "new", 500);
    for (int node = 0; node < 3; node++) {
        redisContext *c = conn_to(node);
        freeReplyObject(cmd(c, "READONLY")); /* reads of replicated slots are answered from this copy */
        for (int i = 0; i < NKEYS; i++) redisAppendCommand(c, "GET old%d", i);
        for (int i = 0; i < NKEYS; i++) {
            ck_assert_int_eq(redisGetReply(c, (void **)&r), REDIS_OK);
            /* MOVED for a slot this node does not hold: its holders answer below. */
            ck_assert_msg(r->type == REDIS_REPLY_NIL || (r->type == REDIS_REPLY_ERROR && !strncmp(r->str, "MOVED", 5)),
                          "node %d: old%d still readable (%d %s)", node, i, r->type, r->str ? r->str : "");
            freeReplyObject(r);
        }
        redisFree(c);
        c = conn_to(node); /* plain: proxied to each primary */
        for (int i = 0; i < 500; i++) {
            r = cmd(c, "GET new%d", i);
            ck_assert_msg(r->type == REDIS_REPLY_STRING, "node %d: new%d, written after FLUSHALL answered, lost", node, i);
            freeReplyObject(r);
        }
        redisFree(c);
    }
    /* Every old key is gone on every copy: the copies agree with the primaries. */
    verify_clean();
    freeReplyObject(cmd(f, "FLUSHALL SYNC"));
    for (int node = 0; node < 3; node++) {
        redisContext *c = conn_to(node);
        r = cmd(c, "DBSIZE");
        ck_assert_msg(r->type == REDIS_REPLY_INTEGER && r->integer == 0, "node %d: DBSIZE %lld after FLUSHALL", node,
                      r->integer);
        freeReplyObject(r);
        r = cmd(c, "RANDOMKEY");
        ck_assert_int_eq(r->type, REDIS_REPLY_NIL);
        freeReplyObject(r);
        redisFree(c);
    }
    verify_clean();
    redisFree(w);
    redisFree(f);
    it_end();
}
END_TEST

START_TEST(scan_through_join_and_leave)
{
    it_begin("resp_walk_topology");
    three_nodes();
    redisContext *w = conn_to(0);
    write_keys(w, "key", NKEYS);
    redisFree(w);
    static int seen[NKEYS];
    redisContext *c = conn_to(0); /* plain, on a node that stays */
    unsigned long long cur = 0;
    int calls = 0;
    /* A few steps, then a join; a few more, then a leave; then to the end. */
    for (int k = 0; k < 20; k++) cur = scan_step(c, cur, 20, "key", seen, NKEYS), calls++;
    ck_assert_msg(cur != 0, "the scan ended before the topology changed");
    start_node(3, extra);
    wait_spread((spread_ctx){{0, 1, 2, 3}, 4, 4});
    for (int k = 0; k < 20 && cur; k++) cur = scan_step(c, cur, 20, "key", seen, NKEYS), calls++;
    ck_assert_msg(cur != 0, "the scan ended before the leave");
    ck_assert_msg(it_wait_baseline(finder, 4, 60000), "the baseline never held the 4 servers");
    it_signal(srv[2], SIGTERM);
    ck_assert(it_wait_exit(srv[2], 30000));
    wait_spread((spread_ctx){{0, 1, 3}, 3, 3});
    while (cur) {
        cur = scan_step(c, cur, 20, "key", seen, NKEYS);
        ck_assert_msg(++calls < 200000, "SCAN never ended");
    }
    for (int i = 0; i < NKEYS; i++) ck_assert_msg(seen[i] >= 1, "SCAN across the join and leave missed key%d", i);
    redisFree(c);
    it_end();
}
END_TEST

int main(int argc, char **argv)
{
    static const it_named tests[] = {
        {"scan_covers_grid_and_primaries", &scan_covers_grid_and_primaries},
        {"flushall_empties_every_copy", &flushall_empties_every_copy},
        {"scan_through_join_and_leave", &scan_through_join_and_leave},
    };
    Suite *s = suite_create("resp_walk");
    TCase *tc = tcase_create("grid");
    tcase_set_timeout(tc, 400);
    it_add_named(tc, tests, sizeof tests / sizeof tests[0], argc, argv);
    suite_add_tcase(s, tc);
    return it_run_suite(s);
}
