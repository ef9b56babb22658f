/*
 * Reads and writes that run to completion on the RESP IO thread
 * (docs/CONSISTENCY.md, "Reads on the calling thread"; docs/ARCHITECTURE.md,
 * "Run to completion"):
 *
 *   reads_run_inline_and_count      one node: GET, EXISTS, TTL, MGET are
 *                                   answered on the IO thread (INFO's
 *                                   lattice_reads_inline counts them),
 *                                   with the right values, and the cache's
 *                                   reads/hits/misses (`lattice caches`)
 *                                   count every one of them
 *   writes_run_to_completion_in_order  one node, two IO threads: writes
 *                                   the IO threads run themselves
 *                                   (lattice_ops_run_here) beside the data
 *                                   thread: concurrent INCRs answer 1..N
 *                                   once each, a pipeline's GET sees its
 *                                   last SET
 *   paused_primary_refuses_inline   three nodes, backups=1, full_sync: a
 *                                   key's primary that serves its reads
 *                                   inline is SIGSTOPped, the grid fails it
 *                                   over and a new value is acknowledged
 *                                   elsewhere; a GET already waiting in the
 *                                   paused node's socket when it resumes
 *                                   must not return the old value (its lease
 *                                   lapsed: the IO thread must not answer)
 *   lost_partition_refuses_reads    three nodes, backups=0: the only owner
 *                                   of some partitions is killed (-9); a
 *                                   GET, MGET or EXISTS of a key written
 *                                   there must be an error naming the LOST
 *                                   partition (RESP), or PARTITION_LOST (the
 *                                   C API), never "absent" - before and
 *                                   after the survivors' rebalance found no
 *                                   copy to load, and after the dead owner
 *                                   restarts empty
 *   lost_mid_rebalance_refuses_reads the same when the only server of a
 *                                   cache's base dies while a throttled
 *                                   rebalance fills the newcomers' copies:
 *                                   the partial copies never answer
 *
 * `it_resp_inline NAME...` runs some.
 */
#include <check.h>
#include <hiredis.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "lattice/alloc.h"
#include "lattice/lattice.h"
#include "lattice/ops.h"
#include "resp_grid.h"

/* Server i answers SET (it serves the cache). */
static bool serves(void *p)
{
    int i = *(int *)p;
    redisContext *c = try_conn(i);
    if (!c) return false;
    redisReply *r = redisCommand(c, "SET probe%d x", i);
    bool ok = r && r->type == REDIS_REPLY_STATUS && strcmp(r->str, "OK") == 0;
    if (r) freeReplyObject(r);
    redisFree(c);
    return ok;
}

/* The baseline counts the three servers (it grows one at a time after the
 * grid forms: a pause before that leaves the others without quorum). */
static bool baseline_of_three(void *ctx)
{
    (void)ctx;
    json_t *top = it_top(finder, NULL, NULL);
    bool ok = top && json_integer_value(json_object_get(json_object_get(top, "quorum"), "baseline_nodes")) == 3;
    json_decref(top);
    return ok;
}

static long long reads_inline(int i) { return info_stat(i, "lattice_reads_inline:"); }

/* The cache's reads, hits and misses over every node (`lattice caches`). */
static void cache_reads(long long *reads, long long *hits, long long *misses)
{
    static char out[1 << 16];
    int rc = it_capture_stdout(out, sizeof out, "%s --ip-finder '%s' --json caches", LATTICE_CLI_PATH, finder);
    json_t *j = json_loads(out, 0, NULL);
    ck_assert_msg(rc == 0 && j, "caches: rc %d: %.300s", rc, out);
    json_t *nodes = json_object_get(json_array_get(json_object_get(j, "caches"), 0), "nodes"), *x;
    size_t i;
    *reads = *hits = *misses = 0;
    json_array_foreach(nodes, i, x)
    {
        *reads += json_integer_value(json_object_get(x, "reads"));
        *hits += json_integer_value(json_object_get(x, "hits"));
        *misses += json_integer_value(json_object_get(x, "misses"));
    }
    json_decref(j);
}

#define KEYS 200
#define ROUND_READS 300  /* read_round: 200 + 50 GETs, 20 EXISTS + 20 TTL, MGET of 10 */
#define ROUND_MISSES 51  /* the 50 absent GETs and MGET's {m}absent */

/* One round of reads: every key (GET), 50 absent ones, EXISTS and TTL of
 * 20, one MGET of 10; checks every answer.  Returns the reads it made. */
static long long read_round(redisContext *c)
{
    long long n = 0;
    char k[32], v[32];
    for (int i = 0; i < KEYS; i++, n++) {
        snprintf(k, sizeof k, "ik%d", i);
        snprintf(v, sizeof v, "val-%d", i);
        redisReply *r = cmd(c, "GET %s", k);
        ck_assert_msg(r->type == REDIS_REPLY_STRING && strcmp(r->str, v) == 0, "GET %s: %s", k, r->str ? r->str : "?");
        freeReplyObject(r);
    }
    for (int i = 0; i < 50; i++, n++) {
        redisReply *r = cmd(c, "GET absent%d", i);
        ck_assert_int_eq(r->type, REDIS_REPLY_NIL);
        freeReplyObject(r);
    }
    for (int i = 0; i < 20; i++, n += 2) {
        redisReply *r = cmd(c, "EXISTS ik%d", i);
        ck_assert_int_eq(r->integer, 1);
        freeReplyObject(r);
        r = cmd(c, "TTL ik%d", i);
        ck_assert_msg(i % 2 ? r->integer == -1 : r->integer > 0 && r->integer <= 1000, "TTL ik%d: %lld", i, r->integer);
        freeReplyObject(r);
    }
    /* Keys of one slot: an MGET across slots is a transaction, not ten reads */
    redisReply *r = cmd(c, "MGET {m}0 {m}1 {m}2 {m}3 {m}4 {m}absent {m}6 {m}7 {m}8 {m}9");
    ck_assert_int_eq(r->elements, 10);
    ck_assert_int_eq(r->element[5]->type, REDIS_REPLY_NIL);
    ck_assert_str_eq(r->element[9]->str, "val-9");
    freeReplyObject(r);
    return n + 10;
}

typedef struct round_ctx {
    redisContext *c;
    long long made;
} round_ctx;

/* A round in which every read was answered inline (a write's settle may
 * not have run yet when the first reads arrive: then the data thread
 * answers them, and the next round shows it). */
static bool all_inline_round(void *p)
{
    round_ctx *x = p;
    long long before = reads_inline(0);
    long long n = read_round(x->c);
    x->made += n;
    return reads_inline(0) - before == n;
}

START_TEST(reads_run_inline_and_count)
{
    it_begin("resp_inline_count");
    static const char *const args[] = {"--cache", "default:backups=0,sync=full_sync", NULL};
    start_grid(1, 1, args);
    int zero = 0;
    ck_assert_msg(it_wait_for(serves, &zero, 60000), "the node never served");
    redisContext *c = conn_to(0);
    for (int i = 0; i < KEYS; i++) {
        redisReply *r = i % 2 ? cmd(c, "SET ik%d val-%d", i, i) : cmd(c, "SET ik%d val-%d EX 1000", i, i);
        ck_assert_str_eq(r->str, "OK");
        freeReplyObject(r);
    }
    for (int i = 0; i < 10; i++) /* read_round's MGET */
        if (i != 5) freeReplyObject(cmd(c, "SET {m}%d val-%d", i, i));
    long long r0, h0, m0;
    cache_reads(&r0, &h0, &m0);
    round_ctx x = {c, 0};
    ck_assert_msg(it_wait_for(all_inline_round, &x, 60000), "no round of reads was answered inline: %lld inline",
                  reads_inline(0));
    /* Every read counted once in the cache's figures, whichever thread
     * answered: a round is 300 reads, 51 of them misses. */
    long long r1, h1, m1;
    cache_reads(&r1, &h1, &m1);
    ck_assert_int_eq(x.made % ROUND_READS, 0);
    long long rounds = x.made / ROUND_READS;
    ck_assert_int_eq(r1 - r0, rounds * ROUND_READS);
    ck_assert_int_eq(m1 - m0, rounds * ROUND_MISSES);
    ck_assert_int_eq(h1 - h0, rounds * (ROUND_READS - ROUND_MISSES));
    redisFree(c);
    it_end();
}
END_TEST

#define RUN_CLIENTS 4
#define RUN_INCRS 500
#define RUN_PIPE 100

typedef struct run_client {
    int id;
    long long got[RUN_INCRS]; /* its INCR answers, in order */
    int bad;                  /* answers that were not what they must be */
    char why[160];
} run_client;

/* One connection: INCRs of the shared counter one at a time, then a
 * pipeline of SETs of its own key and the GET behind them. */
static void *run_client_main(void *p)
{
    run_client *x = p;
    redisContext *c = conn_to(0);
    for (int i = 0; i < RUN_INCRS; i++) {
        redisReply *r = redisCommand(c, "INCR runctr");
        if (!r || r->type != REDIS_REPLY_INTEGER) {
            x->bad++;
            snprintf(x->why, sizeof x->why, "INCR: %s", r && r->str ? r->str : "no answer");
        } else {
            x->got[i] = r->integer;
            if (i && r->integer <= x->got[i - 1]) { /* one connection's INCRs are ordered */
                x->bad++;
                snprintf(x->why, sizeof x->why, "INCR %d answered %lld after %lld", i, r->integer, x->got[i - 1]);
            }
        }
        if (r) freeReplyObject(r);
    }
    for (int i = 0; i < RUN_PIPE; i++) redisAppendCommand(c, "SET runkey%d v%d", x->id, i);
    redisAppendCommand(c, "GET runkey%d", x->id);
    for (int i = 0; i <= RUN_PIPE; i++) {
        redisReply *r = NULL;
        if (redisGetReply(c, (void **)&r) != 0 || !r) {
            x->bad++;
            snprintf(x->why, sizeof x->why, "pipeline: connection lost");
            break;
        }
        char want[16];
        snprintf(want, sizeof want, "v%d", RUN_PIPE - 1);
        if (i == RUN_PIPE && (r->type != REDIS_REPLY_STRING || strcmp(r->str, want))) {
            x->bad++;
            snprintf(x->why, sizeof x->why, "GET behind the pipeline: '%s', not '%s'", r->str ? r->str : "?", want);
        }
        freeReplyObject(r);
    }
    redisFree(c);
    return NULL;
}

static int cmp_ll(const void *a, const void *b)
{
    long long x = *(const long long *)a, y = *(const long long *)b;
    return (x > y) - (x < y);
}

/* Writes run to completion on the IO threads (docs/ARCHITECTURE.md, "Run to
 * completion"): one node with two IO threads, four connections INCR one
 * counter concurrently - the two IO threads and the data thread take turns
 * at the node's state - then pipeline SETs of their own keys.  Every INCR
 * answer is a distinct number, together exactly 1..total, each
 * connection's rising; the counter ends at the total; each pipeline's GET
 * sees its last SET; and INFO's lattice_ops_run_here counts ops the IO
 * threads ran themselves. */
START_TEST(writes_run_to_completion_in_order)
{
    it_begin("resp_inline_run_here");
    static const char *const args[] = {"--cache", "default:backups=0", "--resp-io-threads", "2", NULL};
    start_grid(1, 1, args);
    int zero = 0;
    ck_assert_msg(it_wait_for(serves, &zero, 60000), "the node never served");
    long long before = info_stat(0, "lattice_ops_run_here:");
    ck_assert_int_ge(before, 0);
    static run_client cl[RUN_CLIENTS];
    pthread_t th[RUN_CLIENTS];
    for (int i = 0; i < RUN_CLIENTS; i++) {
        memset(&cl[i], 0, sizeof cl[i]);
        cl[i].id = i;
        ck_assert_int_eq(pthread_create(&th[i], NULL, run_client_main, &cl[i]), 0);
    }
    for (int i = 0; i < RUN_CLIENTS; i++) pthread_join(th[i], NULL);
    static long long all[RUN_CLIENTS * RUN_INCRS];
    for (int i = 0; i < RUN_CLIENTS; i++) {
        ck_assert_msg(cl[i].bad == 0, "connection %d: %d wrong answers, e.g. %s", i, cl[i].bad, cl[i].why);
        memcpy(all + i * RUN_INCRS, cl[i].got, sizeof cl[i].got);
    }
    qsort(all, RUN_CLIENTS * RUN_INCRS, sizeof all[0], cmp_ll);
    for (int k = 0; k < RUN_CLIENTS * RUN_INCRS; k++)
        ck_assert_msg(all[k] == k + 1, "INCR answers: %lld where %d was due (lost or doubled)", all[k], k + 1);
    redisContext *c = conn_to(0);
    redisReply *r = cmd(c, "GET runctr");
    char total[16];
    snprintf(total, sizeof total, "%d", RUN_CLIENTS * RUN_INCRS);
    ck_assert_str_eq(r->str, total);
    freeReplyObject(r);
    redisFree(c);
    long long after = info_stat(0, "lattice_ops_run_here:");
    printf("run here: %lld of %d writes ran on the IO threads\n", after - before,
           RUN_CLIENTS * (RUN_INCRS + RUN_PIPE));
    ck_assert_int_gt(after - before, 0);
    it_end();
}
END_TEST

/* The node index of key's primary in node i's CLUSTER SLOTS, -1 when none. */
static int primary_of(int i, const char *key)
{
    redisContext *c = try_conn(i);
    if (!c) return -1;
    redisReply *s = redisCommand(c, "CLUSTER KEYSLOT %s", key);
    long long slot = s && s->type == REDIS_REPLY_INTEGER ? s->integer : -1;
    if (s) freeReplyObject(s);
    int prim = -1;
    redisReply *r = slot < 0 ? NULL : redisCommand(c, "CLUSTER SLOTS");
    for (size_t k = 0; r && r->type == REDIS_REPLY_ARRAY && k < r->elements; k++) {
        redisReply *e = r->element[k];
        if (e->elements >= 3 && slot >= e->element[0]->integer && slot <= e->element[1]->integer)
            prim = (int)e->element[2]->element[1]->integer - resp_base;
    }
    if (r) freeReplyObject(r);
    redisFree(c);
    return prim;
}

typedef struct pick_ctx {
    char key[32];
    int prim;
} pick_ctx;

/* Every node names the same primary for the key. */
static bool agreed(void *p)
{
    pick_ctx *x = p;
    int a = primary_of(0, x->key);
    for (int i = 1; i < 3; i++)
        if (primary_of(i, x->key) != a) return false;
    x->prim = a;
    return a >= 0;
}

typedef struct inline_ctx {
    redisContext *c;
    int node;
    const char *key, *want;
} inline_ctx;

/* A GET of the key on the node was answered inline (with the value). */
static bool served_inline(void *p)
{
    inline_ctx *x = p;
    long long before = reads_inline(x->node);
    redisReply *r = cmd(x->c, "GET %s", x->key);
    ck_assert_msg(r->type == REDIS_REPLY_STRING && strcmp(r->str, x->want) == 0, "GET: %s", r->str ? r->str : "?");
    freeReplyObject(r);
    return reads_inline(x->node) == before + 1;
}

START_TEST(paused_primary_refuses_inline)
{
    it_begin("resp_inline_pause");
    static const char *const args[] = {"--cache", "default:backups=1,sync=full_sync", "--failure-detection-ms", "1000",
                                       NULL};
    start_grid(3, 3, args);
    for (int i = 0; i < 3; i++) ck_assert_msg(it_wait_for(serves, &i, 60000), "server %d never served", i);
    ck_assert_msg(it_wait_for(baseline_of_three, NULL, 60000), "the baseline never counted three servers");
    ck_assert_msg(it_wait_settled(finder, "default", 3, 120000), "the cache never settled on the three servers");
    pick_ctx pk = {"pausekey", -1};
    ck_assert_msg(it_wait_for(agreed, &pk, 60000), "the nodes never agreed on the key's primary");
    int p = pk.prim, q = (p + 1) % 3;
    redisContext *cp = conn_to(p), *cq = conn_to(q);
    redisReply *r = cmd(cq, "SET pausekey old");
    ck_assert_str_eq(r->str, "OK");
    freeReplyObject(r);
    inline_ctx ic = {cp, p, "pausekey", "old"};
    ck_assert_msg(it_wait_for(served_inline, &ic, 60000), "the primary never served the key inline");

    it_signal(srv[p], SIGSTOP);
    /* Acknowledged elsewhere once the grid removed the paused primary (the
     * write is retried until a live owner serves the partition). */
    r = cmd(cq, "SET pausekey new");
    ck_assert_msg(r->type == REDIS_REPLY_STATUS && strcmp(r->str, "OK") == 0, "SET during the pause: %s",
                  r->str ? r->str : "?");
    freeReplyObject(r);
    /* The GET waits in the paused node's socket; it is the first thing its
     * IO thread reads when the node resumes. */
    redisAppendCommand(cp, "GET pausekey");
    int done = 0;
    ck_assert_int_eq(redisBufferWrite(cp, &done), REDIS_OK);
    usleep(200 * 1000);
    it_signal(srv[p], SIGCONT);
    redisReply *g = NULL;
    ck_assert_int_eq(redisGetReply(cp, (void **)&g), REDIS_OK);
    ck_assert_ptr_nonnull(g);
    ck_assert_msg(!(g->type == REDIS_REPLY_STRING && strcmp(g->str, "old") == 0),
                  "the resumed primary answered a value overwritten and acknowledged during its pause");
    freeReplyObject(g);
    redisFree(cp);
    redisFree(cq);
    it_end();
}
END_TEST

#define LOST_KEYS 1500

/* The partition a RESP error named LOST for key i, -1: none yet. */
static long lost_part[LOST_KEYS];

/* What a read of an acknowledged key answered. */
enum { R_VALUE, R_LOST, R_RETRY };

/* One reply to a read of key i ("lk<i>" = "v<i>"): its value, an error that
 * names a LOST partition of the cache, or (before the grid decided) an
 * error to retry.  "Absent", a wrong value or any other error fails. */
static int judge(const redisReply *r, const char *what, long i)
{
    ck_assert_ptr_nonnull(r);
    char want[32];
    snprintf(want, sizeof want, "v%ld", i);
    if (r->type == REDIS_REPLY_STRING) {
        ck_assert_msg(strcmp(r->str, want) == 0, "%s lk%ld: '%s', not '%s'", what, i, r->str, want);
        return R_VALUE;
    }
    if (r->type == REDIS_REPLY_INTEGER) {
        ck_assert_msg(r->integer == 1, "%s lk%ld answered %lld: an acknowledged key reported absent", what, i,
                      r->integer);
        return R_VALUE;
    }
    ck_assert_msg(r->type == REDIS_REPLY_ERROR, "%s lk%ld answered %s: an acknowledged key reported absent", what, i,
                  r->type == REDIS_REPLY_NIL ? "nil" : "neither a value nor an error");
    if (strncmp(r->str, "TRYAGAIN", 8) == 0) return R_RETRY; /* the dead owner not yet failed */
    const char *pn = strstr(r->str, "partition ");
    ck_assert_msg(strncmp(r->str, "CLUSTERDOWN", 11) == 0 && pn && strstr(r->str, "is LOST"),
                  "%s lk%ld: '%s' (not an error naming the LOST partition)", what, i, r->str);
    long part = strtol(pn + 10, NULL, 10);
    if (i >= 0) { /* not an MGET's error (for one of its keys) */
        ck_assert_msg(lost_part[i] < 0 || lost_part[i] == part, "lk%ld: named partition %ld, before %ld", i, part,
                      lost_part[i]);
        lost_part[i] = part;
    }
    return R_LOST;
}

typedef struct lost_round {
    int node;
    long value, lost, retry;
} lost_round;

/* GET, EXISTS and MGET (in tens) of every key on one node; true once no
 * answer asks for a retry and some partition is LOST. */
static bool lost_round_done(void *p)
{
    lost_round *x = p;
    x->value = x->lost = x->retry = 0;
    redisContext *c = conn_to(x->node);
    long n[3] = {0};
    for (long i = 0; i < LOST_KEYS; i++) {
        redisReply *r = cmd(c, "GET lk%ld", i);
        int g = judge(r, "GET", i);
        freeReplyObject(r);
        n[g]++;
        r = cmd(c, "EXISTS lk%ld", i);
        int e = judge(r, "EXISTS", i);
        freeReplyObject(r);
        if (g != R_RETRY && e != R_RETRY)
            ck_assert_msg(g == e, "lk%ld: GET and EXISTS disagree on whether its partition is LOST", i);
        if (e == R_RETRY) n[R_RETRY]++;
    }
    /* MGET on a connection of its own: its first keys span slots, so the
     * node takes it for a plain client (no CROSSSLOT). */
    redisFree(c);
    c = conn_to(x->node);
    for (long i = 0; i + 10 <= LOST_KEYS; i += 10) {
        redisReply *r = cmd(c, "MGET lk%ld lk%ld lk%ld lk%ld lk%ld lk%ld lk%ld lk%ld lk%ld lk%ld", i, i + 1, i + 2,
                            i + 3, i + 4, i + 5, i + 6, i + 7, i + 8, i + 9);
        if (r->type == REDIS_REPLY_ARRAY) {
            ck_assert_int_eq(r->elements, 10);
            for (size_t k = 0; k < 10; k++) judge(r->element[k], "MGET", i + (long)k);
        } else if (judge(r, "MGET", -1) == R_RETRY) {
            n[R_RETRY]++;
        }
        freeReplyObject(r);
    }
    redisFree(c);
    x->value = n[R_VALUE];
    x->lost = n[R_LOST];
    x->retry = n[R_RETRY];
    return x->retry == 0 && x->lost > 0;
}

/* `lattice partitions default` counts LOST partitions. */
static bool partitions_lost(void *p)
{
    (void)p;
    if (run("%s --ip-finder %s --json partitions default", LATTICE_CLI_PATH, finder) != 0) return false;
    json_t *j = json_loads(out_buf, 0, NULL);
    bool lost = j && json_integer_value(json_object_get(j, "lost")) > 0;
    json_decref(j);
    return lost;
}

typedef struct api_wait {
    _Atomic bool done;
    lattice_status status;
    int64_t num;
} api_wait;

static void api_done(void *arg, size_t i, const lattice_op_result *r)
{
    (void)i;
    api_wait *w = arg;
    w->status = r->status;
    w->num = r->num;
    atomic_store(&w->done, true);
}

static bool api_is_done(void *p) { return atomic_load(&((api_wait *)p)->done); }

START_TEST(lost_partition_refuses_reads)
{
    it_begin("resp_inline_lost");
    for (long i = 0; i < LOST_KEYS; i++) lost_part[i] = -1;
    static const char *const args[] = {"--cache", "default:backups=0", NULL};
    start_grid(3, 3, args);
    for (int i = 0; i < 3; i++) ck_assert_msg(it_wait_for(serves, &i, 60000), "server %d never served", i);
    ck_assert_msg(it_wait_for(baseline_of_three, NULL, 60000), "the baseline never counted three servers");
    /* Every server owns some partitions (the base spans the three). */
    pick_ctx pk = {"lk0", -1};
    ck_assert(it_wait_for(agreed, &pk, 60000));
    redisContext *c = conn_to(0);
    for (long i = 0; i < LOST_KEYS; i++) {
        redisReply *r = cmd(c, "SET lk%ld v%ld", i, i);
        ck_assert_msg(r->type == REDIS_REPLY_STATUS, "SET lk%ld: %s", i, r->str ? r->str : "?");
        freeReplyObject(r);
    }
    redisFree(c);
    it_signal(srv[2], SIGKILL);
    ck_assert(it_wait_exit(srv[2], 10000));

    /* On both survivors, through the node that owned the key's partition
     * before, and through the other one. */
    for (int node = 0; node < 2; node++) {
        lost_round x = {node, 0, 0, 0};
        ck_assert_msg(it_wait_for(lost_round_done, &x, 120000), "node %d: %ld values, %ld LOST, %ld to retry", node,
                      x.value, x.lost, x.retry);
        printf("lost: node %d: %ld of %d keys served, %ld refused as LOST\n", node, x.value, LOST_KEYS, x.lost);
        ck_assert_int_gt(x.value, 0);
    }

    /* The C API (a client-mode node): PARTITION_LOST for the same keys. */
    lattice_config cfg;
    lattice_config_init(&cfg);
    cfg.client = true;
    cfg.failure_detection_ms = 1000;
    cfg.finders[cfg.n_finders++] = finder;
    lattice_node *n = NULL;
    ck_assert_int_eq(lattice_node_start(&cfg, &n), LATTICE_OK);
    ck_assert_int_eq(lattice_node_wait_joined(n, 15000), LATTICE_OK);
    long api_lost = 0, api_ok = 0;
    for (long i = 0; i < LOST_KEYS; i++) {
        char key[32], want[32];
        snprintf(key, sizeof key, "lk%ld", i);
        snprintf(want, sizeof want, "v%ld", i);
        void *v = NULL;
        size_t vl = 0;
        lattice_status st = lattice_cache_get(n, "default", key, strlen(key), &v, &vl);
        ck_assert_msg(st == LATTICE_OK || st == LATTICE_ERR_PARTITION_LOST, "get %s: %s", key, lattice_strerror(st));
        ck_assert_msg((st == LATTICE_ERR_PARTITION_LOST) == (lost_part[i] >= 0), "get %s: %s, RESP said otherwise",
                      key, lattice_strerror(st));
        if (st == LATTICE_OK) {
            ck_assert_msg(vl == strlen(want) && memcmp(v, want, vl) == 0, "get %s: a wrong value", key);
            api_ok++;
        } else {
            /* The op API names the partition: the one RESP named. */
            lattice_op op = {.kind = LATTICE_OP_GET, .cache = "default", .key = key, .key_len = strlen(key)};
            api_wait w = {.done = false};
            ck_assert_int_eq(lattice_op_submit(n, &op, 1, api_done, &w), LATTICE_OK);
            ck_assert(it_wait_for(api_is_done, &w, 120000));
            ck_assert_int_eq(w.status, LATTICE_ERR_PARTITION_LOST);
            ck_assert_int_eq(w.num, lost_part[i]);
            api_lost++;
        }
        lt_free(v);
    }
    printf("lost: C API: %ld served, %ld PARTITION_LOST\n", api_ok, api_lost);
    ck_assert_int_gt(api_lost, 0);

    /* After the survivors' rebalance found no copy to load (`lattice
     * partitions` counts them LOST), reads are still refused, not absent. */
    ck_assert_msg(it_wait_for(partitions_lost, NULL, 60000), "`lattice partitions` never counted a LOST partition");
    for (int node = 0; node < 2; node++) {
        lost_round x = {node, 0, 0, 0};
        ck_assert_msg(it_wait_for(lost_round_done, &x, 120000), "node %d after the rebalance: %ld values, %ld LOST, "
                      "%ld to retry", node, x.value, x.lost, x.retry);
        ck_assert_int_eq(x.lost, api_lost);
    }

    /* The killed server restarts on its address, empty: it must not serve
     * its old partitions as if they were empty - they stay LOST. */
    start_node(2, args);
    ck_assert_msg(it_wait_log(srv[2], "cache metadata version", 60000), "the restarted server never got the metadata");
    for (int node = 0; node < 3; node++) {
        lost_round x = {node, 0, 0, 0};
        ck_assert_msg(it_wait_for(lost_round_done, &x, 120000), "node %d after the restart: %ld values, %ld LOST, "
                      "%ld to retry", node, x.value, x.lost, x.retry);
        printf("lost: after the restart, node %d: %ld served, %ld refused as LOST\n", node, x.value, x.lost);
        ck_assert_int_eq(x.lost, api_lost);
    }
    lattice_node_stop(n);
    it_end();
}
END_TEST

/* The fault suite's case: a cache whose base is one server (the grid grew
 * around it and the rebalance to the newcomers is under way, throttled)
 * loses that server to kill -9.  Every partition is LOST; the newcomers
 * hold partial MOVING copies, which must not answer: every read of a key
 * written there is refused as LOST - never nil, never a value read from a
 * copy that was still loading. */
START_TEST(lost_mid_rebalance_refuses_reads)
{
    it_begin("resp_inline_lost_moving");
    for (long i = 0; i < LOST_KEYS; i++) lost_part[i] = -1;
    static const char *const args[] = {"--cache",
                                       "default:backups=1,rebalance_throttle_ms=200,rebalance_batch_bytes=4096",
                                       NULL};
    start_grid(1, 3, args);
    int zero = 0;
    ck_assert_msg(it_wait_for(serves, &zero, 60000), "server 0 never served");
    redisContext *c = conn_to(0);
    for (long i = 0; i < LOST_KEYS; i++) {
        redisReply *r = cmd(c, "SET lk%ld v%ld", i, i);
        ck_assert_msg(r->type == REDIS_REPLY_STATUS, "SET lk%ld: %s", i, r->str ? r->str : "?");
        freeReplyObject(r);
    }
    redisFree(c);
    start_node(1, args);
    start_node(2, args);
    ck_assert_msg(it_wait_for(baseline_of_three, NULL, 60000), "the baseline never counted three servers");
    ck_assert_msg(it_wait_log(srv[1], "started", 60000) && it_wait_log(srv[2], "started", 60000),
                  "the newcomers never started loading");
    ck_assert_msg(!it_log_has(srv[1], "finished") || !it_log_has(srv[2], "finished"),
                  "the throttled rebalance finished before the kill: the test saw no partial copy");
    it_signal(srv[0], SIGKILL);
    ck_assert(it_wait_exit(srv[0], 10000));
    for (int node = 1; node < 3; node++) {
        lost_round x = {node, 0, 0, 0};
        ck_assert_msg(it_wait_for(lost_round_done, &x, 120000), "node %d: %ld values, %ld LOST, %ld to retry", node,
                      x.value, x.lost, x.retry);
        printf("lost mid-rebalance: node %d: %ld served, %ld refused as LOST\n", node, x.value, x.lost);
    }
    it_end();
}
END_TEST

int main(int argc, char **argv)
{
    static const it_named tests[] = {
        {"reads_run_inline_and_count", &reads_run_inline_and_count},
        {"writes_run_to_completion_in_order", &writes_run_to_completion_in_order},
        {"paused_primary_refuses_inline", &paused_primary_refuses_inline},
        {"lost_partition_refuses_reads", &lost_partition_refuses_reads},
        {"lost_mid_rebalance_refuses_reads", &lost_mid_rebalance_refuses_reads},
    };
    Suite *s = suite_create("resp_inline");
    TCase *tc = tcase_create("grid");
    tcase_set_timeout(tc, 600);
    it_add_named(tc, tests, sizeof tests / sizeof tests[0], argc, argv);
    suite_add_tcase(s, tc);
    return it_run_suite(s);
}
