/*
 * Transactions over RESP on a grid (docs/CONSISTENCY.md, "Transactions"),
 * 3 servers, backups=1, full_sync:
 *
 *   concurrent_multi_incr  writers on two nodes run MULTI INCR {x}a INCR
 *                          {x}b EXEC while readers on every node run MULTI
 *                          GET {x}a GET {x}b EXEC; the history is checked:
 *                          no reader ever saw the two differ, each reader's
 *                          values never went back, each EXEC's two
 *                          increments returned the same number, every
 *                          number 1..N was returned exactly once (no
 *                          transaction applied twice or lost), the end is N;
 *                          then one EXEC of 600 SETs
 *   failover_exec_stream   a stream of those EXECs through node 0 while the
 *                          keys' primary (another node) is killed with -9:
 *                          on the survivors the two counters are equal (no
 *                          transaction half applied), at least every
 *                          acknowledged one and at most every one sent
 *                          (none applied twice)
 *   full_backup_undoes_the_whole_transaction  a backup without room for a
 *                          transaction's writes: EXEC answers OOM and no
 *                          copy keeps any of it (lattice verify)
 *   full_backup_refuses_a_prepare_across_slots  the same with the two keys
 *                          in two slots: the prepared row is refused
 * *   multi_keyless_on_grid  MULTI with keyless commands between keyed ones
 *                          (PING, DBSIZE, ECHO) through every node (plain
 *                          connections: proxied), a cluster-aware one on the
 *                          slot's primary and elsewhere (MOVED at queue time:
 *                          EXECABORT, as Redis Cluster), and ioredis's
 *                          cluster client's multi()
 *
 * `it_resp_tx NAME...` runs some.
 */
#include <check.h>
#include <hiredis.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "resp_grid.h"

static const char *const grid_args[] = {"--cache", "default:backups=1,sync=full_sync", NULL};

/* MULTI INCR a INCR b EXEC: 1 and the two numbers (*x, *y), 0 on an error reply, -1 when the connection broke. */
static int exec_incr(redisContext *c, const char *a, const char *b, long long *x, long long *y)
{
    redisAppendCommand(c, "MULTI");
    redisAppendCommand(c, "INCR %s", a);
    redisAppendCommand(c, "INCR %s", b);
    redisAppendCommand(c, "EXEC");
    int ok = 1;
    for (int i = 0; i < 4; i++) {
        redisReply *r = NULL;
        if (redisGetReply(c, (void **)&r) != REDIS_OK || !r) return -1;
        if (i == 3) {
            if (r->type == REDIS_REPLY_ARRAY && r->elements == 2 && r->element[0]->type == REDIS_REPLY_INTEGER &&
                r->element[1]->type == REDIS_REPLY_INTEGER) {
                *x = r->element[0]->integer;
                *y = r->element[1]->integer;
            } else {
                ok = 0;
            }
        }
        freeReplyObject(r);
    }
    return ok;
}

#define WRITERS 2
#define READERS 3
#define PER_WRITER 150

typedef struct worker {
    pthread_t th;
    int node;
    int id;
    atomic_bool *stop;
    char err[256];
    long long *seen;         /* writers: numbers returned */
    size_t n_seen;
    long long reads;
} worker;

static void *writer_main(void *p)
{
    worker *w = p;
    redisContext *c = try_conn(w->node);
    if (!c) {
        snprintf(w->err, sizeof w->err, "writer %d: no connection", w->id);
        return NULL;
    }
    for (int i = 0; i < PER_WRITER && !w->err[0]; i++) {
        long long x, y;
        int st = exec_incr(c, "{x}a", "{x}b", &x, &y);
        if (st != 1) snprintf(w->err, sizeof w->err, "writer %d: EXEC %d failed (%d: %s)", w->id, i, st, c->errstr);
        else if (x != y) snprintf(w->err, sizeof w->err, "writer %d: EXEC returned a=%lld b=%lld", w->id, x, y);
        else w->seen[w->n_seen++] = x;
    }
    redisFree(c);
    return NULL;
}

static void *reader_main(void *p)
{
    worker *w = p;
    redisContext *c = try_conn(w->node);
    if (!c) {
        snprintf(w->err, sizeof w->err, "reader %d: no connection", w->id);
        return NULL;
    }
    long long last = 0;
    for (int i = 0; i < 100000 && !w->err[0] && !atomic_load(w->stop); i++) {
        redisAppendCommand(c, "MULTI");
        redisAppendCommand(c, "GET {x}a");
        redisAppendCommand(c, "GET {x}b");
        redisAppendCommand(c, "EXEC");
        for (int k = 0; k < 4; k++) {
            redisReply *r = NULL;
            if (redisGetReply(c, (void **)&r) != REDIS_OK || !r) {
                snprintf(w->err, sizeof w->err, "reader %d: connection broke", w->id);
                break;
            }
            if (k == 3) {
                if (r->type != REDIS_REPLY_ARRAY || r->elements != 2) {
                    snprintf(w->err, sizeof w->err, "reader %d: EXEC reply type %d", w->id, r->type);
                } else {
                    long long a = r->element[0]->str ? atoll(r->element[0]->str) : 0;
                    long long b = r->element[1]->str ? atoll(r->element[1]->str) : 0;
                    if (a != b) snprintf(w->err, sizeof w->err, "reader %d saw a=%lld b=%lld", w->id, a, b);
                    else if (a < last) snprintf(w->err, sizeof w->err, "reader %d went back: %lld then %lld", w->id, last, a);
                    last = a;
                    w->reads++;
                }
            }
            freeReplyObject(r);
        }
    }
    redisFree(c);
    return NULL;
}

static int cmp_ll(const void *a, const void *b)
{
    long long x = *(const long long *)a, y = *(const long long *)b;
    return x < y ? -1 : x > y;
}

START_TEST(concurrent_multi_incr)
{
    it_begin("resp_tx");
    start_grid(3, 3, grid_args);
    rg_spread sc = {rg_slot_of("{x}a"), -1, 3};
    ck_assert_msg(it_wait_for(rg_settled, &sc, 90000), "the grid never agreed on the slot's owners");
    atomic_bool stop = false;
    worker wr[WRITERS] = {0}, rd[READERS] = {0};
    for (int i = 0; i < READERS; i++) {
        rd[i] = (worker){.node = i % 3, .id = i, .stop = &stop};
        ck_assert_int_eq(pthread_create(&rd[i].th, NULL, reader_main, &rd[i]), 0);
    }
    for (int i = 0; i < WRITERS; i++) {
        wr[i] = (worker){.node = i % 3, .id = i, .stop = &stop, .seen = calloc(PER_WRITER, sizeof(long long))};
        ck_assert_int_eq(pthread_create(&wr[i].th, NULL, writer_main, &wr[i]), 0);
    }
    for (int i = 0; i < WRITERS; i++) pthread_join(wr[i].th, NULL);
    atomic_store(&stop, true);
    for (int i = 0; i < READERS; i++) pthread_join(rd[i].th, NULL);
    long long all[WRITERS * PER_WRITER];
    size_t n = 0;
    for (int i = 0; i < WRITERS; i++) {
        ck_assert_msg(!wr[i].err[0], "%s", wr[i].err);
        memcpy(all + n, wr[i].seen, wr[i].n_seen * sizeof *all);
        n += wr[i].n_seen;
        free(wr[i].seen);
    }
    long long reads = 0;
    for (int i = 0; i < READERS; i++) {
        ck_assert_msg(!rd[i].err[0], "%s", rd[i].err);
        reads += rd[i].reads;
    }
    ck_assert_uint_eq(n, WRITERS * PER_WRITER);
    qsort(all, n, sizeof *all, cmp_ll);
    for (size_t i = 0; i < n; i++) ck_assert_msg(all[i] == (long long)i + 1, "EXEC results: %lld at %zu", all[i], i);
    ck_assert_msg(reads > 0, "no reader EXEC completed");
    for (int i = 0; i < 3; i++) {
        redisContext *c = conn_to(i);
        redisReply *r = cmd(c, "MGET {x}a {x}b");
        ck_assert(r->type == REDIS_REPLY_ARRAY && r->elements == 2 && r->element[0]->str && r->element[1]->str);
        ck_assert_int_eq(atoll(r->element[0]->str), n);
        ck_assert_int_eq(atoll(r->element[1]->str), n);
        freeReplyObject(r);
        redisFree(c);
    }
    /* A long transaction: 600 SETs in one EXEC (its undo record and its
     * replication hold every key). */
    redisContext *c = conn_to(1);
    redisAppendCommand(c, "MULTI");
    for (int i = 0; i < 600; i++) redisAppendCommand(c, "SET {x}k%d v%d", i, i);
    redisAppendCommand(c, "EXEC");
    for (int i = 0; i < 602; i++) {
        redisReply *r = NULL;
        ck_assert_int_eq(redisGetReply(c, (void **)&r), REDIS_OK);
        if (i == 601) {
            ck_assert_msg(r->type == REDIS_REPLY_ARRAY && r->elements == 600, "EXEC of 600: type %d %s", r->type,
                          r->str ? r->str : "");
            for (size_t k = 0; k < r->elements; k++) ck_assert_str_eq(r->element[k]->str, "OK");
        }
        freeReplyObject(r);
    }
    redisReply *r = cmd(c, "GET {x}k599");
    ck_assert_str_eq(r->str, "v599");
    freeReplyObject(r);
    redisFree(c);
    it_end();
}
END_TEST

START_TEST(failover_exec_stream)
{
    it_begin("resp_tx");
    start_grid(3, 3, grid_args);
    /* A key whose primary is not node 0 (the client's node). */
    char a[32], b[32];
    int prim = -1, rep = -1;
    for (int t = 0; t < 1000; t++) {
        snprintf(a, sizeof a, "{f%d}a", t);
        snprintf(b, sizeof b, "{f%d}b", t);
        rg_spread sc = {rg_slot_of(a), -1, 3};
        ck_assert_msg(it_wait_for(rg_settled, &sc, 90000), "the grid never agreed on the slot's owners");
        rg_owners_of(0, rg_slot_of(a), &prim, &rep);
        if (prim > 0) break;
    }
    ck_assert_int_gt(prim, 0);
    ck_assert_msg(it_wait_for(rg_baseline_of_three, NULL, 90000), "the baseline never counted the three servers");
    /* Windows of pipelined EXECs; the kill lands while one window is in
     * flight, so some transactions reach the primary (and maybe its backup)
     * unacknowledged and are resent by node 0 after the failover. */
    redisContext *c = conn_to(0);
    long long acked = 0, sent = 0;
    int errors = 0;
    const int windows = 30, per = 10, kill_window = 6;
    for (int wi = 0; wi < windows; wi++) {
        for (int k = 0; k < per; k++) {
            redisAppendCommand(c, "MULTI");
            redisAppendCommand(c, "INCR %s", a);
            redisAppendCommand(c, "INCR %s", b);
            redisAppendCommand(c, "EXEC");
        }
        int done = 0;
        while (!done) ck_assert_int_eq(redisBufferWrite(c, &done), REDIS_OK);
        sent += per;
        if (wi == kill_window) it_signal(srv[prim], SIGKILL);
        for (int k = 0; k < 4 * per; k++) {
            redisReply *r = NULL;
            ck_assert_msg(redisGetReply(c, (void **)&r) == REDIS_OK && r, "node 0 did not answer: %s", c->errstr);
            if (k % 4 == 3 && r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
                r->element[0]->type == REDIS_REPLY_INTEGER && r->element[1]->type == REDIS_REPLY_INTEGER) {
                ck_assert_msg(r->element[0]->integer == r->element[1]->integer, "EXEC returned %lld and %lld",
                              r->element[0]->integer, r->element[1]->integer);
                acked++;
            } else if (r->type == REDIS_REPLY_ERROR && errors++ < 5) {
                fprintf(stderr, "failover_exec_stream: reply %d of window %d: %s\n", k, wi, r->str);
            }
            freeReplyObject(r);
        }
    }
    redisFree(c);
    rg_spread sc = {rg_slot_of(a), prim, 3};
    ck_assert_msg(it_wait_for(rg_settled, &sc, 90000), "the survivors never agreed on the slot's owners");
    ck_assert_msg(acked > kill_window * per, "only %lld of %lld EXECs acknowledged", acked, sent);
    for (int i = 0; i < 3; i++) {
        if (i == prim) continue;
        c = conn_to(i);
        redisReply *r = cmd(c, "MULTI");
        freeReplyObject(r);
        freeReplyObject(cmd(c, "GET %s", a));
        freeReplyObject(cmd(c, "GET %s", b));
        r = cmd(c, "EXEC");
        ck_assert_msg(r->type == REDIS_REPLY_ARRAY && r->elements == 2 && r->element[0]->str && r->element[1]->str,
                      "node %d: EXEC reply type %d", i, r->type);
        long long va = atoll(r->element[0]->str), vb = atoll(r->element[1]->str);
        fprintf(stderr, "failover_exec_stream: node %d holds %lld; %lld of %lld EXECs acknowledged\n", i, va, acked,
                sent);
        ck_assert_msg(va == vb, "node %d: a transaction half applied: a=%lld b=%lld", i, va, vb);
        ck_assert_msg(va >= acked && va <= sent, "node %d: counter %lld, acknowledged %lld, sent %lld", i, va, acked, sent);
        freeReplyObject(r);
        redisFree(c);
    }
    it_end();
}
END_TEST

/* Two servers, the keys' backup with a 4 MiB region: EXECs that each set a
 * small key and a 600 KB one until the backup has no room.  The refused
 * transaction answers OOM and leaves nothing of itself on either copy: the
 * small key holds the last acknowledged value, the big one is absent, and
 * `lattice verify` finds the copies equal. */
static void full_backup_case(bool across)
{
    it_begin(across ? "resp_tx_full_across" : "resp_tx_full");
    peer_base = it_free_ports(2);
    resp_base = it_free_ports(2);
    snprintf(finder, sizeof finder, "127.0.0.1:%d..%d", peer_base, peer_base + 1);
    const char *small[] = {"--cache", "default:backups=1,sync=full_sync", "--region-mb", "4", NULL};
    start_node(0, grid_args);
    start_node(1, small);
    char a[32], big[48];
    int prim = -1, rep = -1, t = 0;
    for (; t < 1000; t++) {
        snprintf(a, sizeof a, "{u%d}a", t);
        rg_spread sc = {rg_slot_of(a), -1, 2};
        ck_assert_msg(it_wait_for(rg_settled, &sc, 90000), "the grid never agreed on the slot's owners");
        rg_owners_of(0, rg_slot_of(a), &prim, &rep);
        if (prim == 0 && rep == 1) break;
    }
    ck_assert_msg(prim == 0 && rep == 1, "no slot with node 0 primary and node 1 replica");
    int slot = rg_slot_of(a);
    for (int j = 0; across && rg_slot_of(a) == slot; j++) /* the small key in another slot: across partitions */
        snprintf(a, sizeof a, "{w%d}a", j);
    redisContext *c = conn_to(0);
    static char val[600000];
    memset(val, 'b', sizeof val);
    char last[32] = "";
    int refused = -1;
    for (int i = 0; i < 40 && refused < 0; i++) {
        char na[32];
        snprintf(na, sizeof na, "new%d", i);
        snprintf(big, sizeof big, "{u%d}big%d", t, i);
        freeReplyObject(cmd(c, "MULTI"));
        freeReplyObject(cmd(c, "SET %s %s", a, na));
        freeReplyObject(cmd(c, "SET %s %b", big, val, sizeof val));
        redisReply *r = cmd(c, "EXEC");
        if (r->type == REDIS_REPLY_ARRAY) {
            ck_assert_int_eq(r->elements, 2);
            snprintf(last, sizeof last, "%s", na);
        } else {
            ck_assert_msg(r->type == REDIS_REPLY_ERROR && !strncmp(r->str, "OOM", 3), "EXEC %d: type %d %s", i, r->type,
                          r->str ? r->str : "");
            refused = i;
        }
        freeReplyObject(r);
    }
    ck_assert_msg(refused > 0, "the backup's region never filled (refused at %d)", refused);
    redisReply *r = cmd(c, "GET %s", a);
    ck_assert_msg(r->type == REDIS_REPLY_STRING && !strcmp(r->str, last), "%s: '%s', the last acknowledged '%s'", a,
                  r->str ? r->str : "(nil)", last);
    freeReplyObject(r);
    r = cmd(c, "EXISTS %s", big);
    ck_assert_int_eq(r->integer, 0);
    freeReplyObject(r);
    redisFree(c);
    it_verify_clean(finder, "default");
    it_end();
}

START_TEST(full_backup_undoes_the_whole_transaction)
{
    full_backup_case(false);
}
END_TEST

/* The same across slots: the big key's prepared row (its value in it) is
 * what the backup has no room for; the prepare is undone (the row removed
 * on every copy), EXEC answers OOM, nothing of it is applied anywhere. */
START_TEST(full_backup_refuses_a_prepare_across_slots)
{
    full_backup_case(true);
}
END_TEST

/* One reply; the test fails when there is none or its type differs. */
static redisReply *elem(redisReply *r, size_t i, int type)
{
    ck_assert_msg(r->type == REDIS_REPLY_ARRAY && i < r->elements, "no element %zu", i);
    ck_assert_msg(r->element[i]->type == type, "element %zu: type %d, not %d (%s)", i, r->element[i]->type, type,
                  r->element[i]->str ? r->element[i]->str : "");
    return r->element[i];
}

/* MULTI SET a v PING DBSIZE GET a ECHO e INCR n EXEC on c: the EXEC reply is checked; DBSIZE's count back. */
static long long multi_keyless(redisContext *c, const char *v)
{
    static const char *const q[] = {"SET {y}a %s", "PING", "DBSIZE", "GET {y}a", "ECHO e", "INCR {y}n"};
    redisAppendCommand(c, "MULTI");
    for (size_t i = 0; i < sizeof q / sizeof q[0]; i++) redisAppendCommand(c, q[i], v);
    redisAppendCommand(c, "EXEC");
    redisReply *r = NULL;
    for (size_t i = 0; i < sizeof q / sizeof q[0] + 2; i++) {
        if (r) freeReplyObject(r);
        ck_assert_int_eq(redisGetReply(c, (void **)&r), REDIS_OK);
        if (i > 0 && i <= sizeof q / sizeof q[0]) ck_assert_msg(r->type == REDIS_REPLY_STATUS && !strcmp(r->str, "QUEUED"), "'%s' not queued: %s", q[i - 1], r->str ? r->str : "");
    }
    ck_assert_str_eq(elem(r, 0, REDIS_REPLY_STATUS)->str, "OK");
    ck_assert_str_eq(elem(r, 1, REDIS_REPLY_STATUS)->str, "PONG");
    long long n = elem(r, 2, REDIS_REPLY_INTEGER)->integer;
    ck_assert_str_eq(elem(r, 3, REDIS_REPLY_STRING)->str, v);
    ck_assert_str_eq(elem(r, 4, REDIS_REPLY_STRING)->str, "e");
    elem(r, 5, REDIS_REPLY_INTEGER);
    ck_assert_uint_eq(r->elements, 6);
    freeReplyObject(r);
    return n;
}

START_TEST(multi_keyless_on_grid)
{
    it_begin("resp_tx_keyless");
    start_grid(3, 3, grid_args);
    rg_spread sc = {rg_slot_of("{y}a"), -1, 3};
    ck_assert_msg(it_wait_for(rg_settled, &sc, 90000), "the grid never agreed on the slot's owners");
    int prim, rep;
    rg_owners_of(0, sc.slot, &prim, &rep);
    ck_assert_int_ge(prim, 0);
    for (int i = 0; i < 3; i++) {
        /* The grid's own keys (first byte 0xff) are refused, a read on the
         * calling thread included: whichever node holds one. */
        redisContext *c = conn_to(i);
        static const char *const forms[] = {"SET %b v", "GET %b"};
        for (size_t f = 0; f < 2; f++) {
            redisReply *r = redisCommand(c, forms[f], "\xffk", (size_t)2);
            ck_assert_ptr_nonnull(r);
            ck_assert_msg(r->type == REDIS_REPLY_ERROR && strstr(r->str, "reserved for the grid's own records"),
                          "'%s' of a 0xff key on node %d: %s", forms[f], i, r->str ? r->str : "(not an error)");
            freeReplyObject(r);
        }
        redisFree(c);
    }
    for (int i = 0; i < 3; i++) { /* plain connections: proxied where this node is not the primary */
        redisContext *c = conn_to(i);
        char v[16];
        snprintf(v, sizeof v, "v%d", i);
        multi_keyless(c, v);
        redisFree(c);
    }
    /* Cluster-aware (READWRITE, as cluster clients send): on the primary
     * DBSIZE counts the key the transaction's first part just wrote. */
    redisContext *c = conn_to(prim);
    freeReplyObject(cmd(c, "READWRITE"));
    ck_assert_int_ge(multi_keyless(c, "p"), 1);
    redisFree(c);
    int other = (prim + 1) % 3;
    c = conn_to(other);
    freeReplyObject(cmd(c, "READWRITE"));
    static const char *const moved[][2] = {{"MULTI", "OK"}, {"PING", "QUEUED"}, {"SET {y}a m", "MOVED"},
                                           {"EXEC", "EXECABORT Transaction discarded because of previous errors."}};
    for (size_t i = 0; i < sizeof moved / sizeof moved[0]; i++) {
        redisReply *r = cmd(c, moved[i][0]);
        ck_assert_msg(r->str && !strncmp(r->str, moved[i][1], strlen(moved[i][1])), "'%s' on node %d: %s", moved[i][0],
                      other, r->str ? r->str : "(no text)");
        freeReplyObject(r);
    }
    redisFree(c);
    /* ioredis's cluster client: multi() with keyless commands in it. */
    int st = run("cd %s/tests/clients && timeout 60 node -e '"
                 "const {Cluster}=require(\"ioredis\");"
                 "const c=new Cluster([{host:\"127.0.0.1\",port:%d}]);"
                 "c.multi().set(\"{y}c\",\"1\").ping().dbsize().get(\"{y}c\").echo(\"x\").exec()"
                 ".then((r)=>{console.log(JSON.stringify(r));return c.quit();})"
                 ".catch((e)=>{console.log(\"error \"+e.message);process.exit(1);});'",
                 LATTICE_SOURCE_DIR, resp_base);
    ck_assert_msg(st == 0, "ioredis: %s", out_buf);
    ck_assert_msg(strstr(out_buf, "[[null,\"OK\"],[null,\"PONG\"],[null,") &&
                      strstr(out_buf, "],[null,\"1\"],[null,\"x\"]]"),
                  "ioredis multi: %s", out_buf);
    it_end();
}
END_TEST

int main(int argc, char **argv)
{
    static const it_named tests[] = {
        {"concurrent_multi_incr", &concurrent_multi_incr},
        {"failover_exec_stream", &failover_exec_stream},
        {"full_backup_undoes_the_whole_transaction", &full_backup_undoes_the_whole_transaction},
        {"full_backup_refuses_a_prepare_across_slots", &full_backup_refuses_a_prepare_across_slots},
        {"multi_keyless_on_grid", &multi_keyless_on_grid},
    };
    Suite *s = suite_create("resp_tx");
    TCase *tc = tcase_create("grid");
    tcase_set_timeout(tc, 600);
    it_add_named(tc, tests, sizeof tests / sizeof tests[0], argc, argv);
    suite_add_tcase(s, tc);
    return it_run_suite(s);
}
