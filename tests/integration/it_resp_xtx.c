/*
 * RESP over keys of several slots, as one transaction across partitions
 * (docs/RESP.md, "Transactions across slots"), 3 servers, backups=1,
 * full_sync:
 *
 *   exec_across_slots_answers_as_redis  MULTI/EXEC of string commands over
 *                          keys of three slots gives Redis's replies, keeps
 *                          a key's expiry through INCR and APPEND, is seen
 *                          whole through every node; WATCH over two slots
 *                          (unchanged: EXEC runs; changed: nil, nothing
 *                          written); MSET, MGET, DEL, UNLINK, EXISTS, TOUCH,
 *                          MSETNX, RENAME, COPY across slots; a
 *                          cluster-aware connection gets CROSSSLOT, as from
 *                          Redis Cluster
 *   bank_across_slots_keeps_the_total  transfers (MULTI DECRBY INCRBY EXEC)
 *                          between 8 accounts of 8 slots from every node,
 *                          audits by MGET and by MULTI GET... EXEC: every
 *                          audit sees the total, the end has it, verify
 *                          finds the copies equal
 *   wait_cycles_of_two_to_four_all_commit  2, 3 and 4 connections, each
 *                          INCRing its own key and its neighbour's in one
 *                          transaction, 150 times: every wait cycle is
 *                          broken, all commit, every counter is exact
 *   a_killed_coordinators_keys_are_released  a client node committing
 *                          across partitions killed -9: its prepared rows
 *                          are settled, every key takes a SET, no row left
 *   list_append_across_slots_through_a_kill  Elle's list-append over RESP:
 *                          MULTI with APPEND and GET over 6 keys of 6
 *                          slots, while one key's primary is killed -9;
 *                          the history is checked (tests/fault/txn.h)
 *
 * `it_resp_xtx NAME...` runs some.
 */
#include <check.h>
#include <hiredis.h>
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
#include "txn.h"

static const char *const grid_args[] = {"--cache", "default:backups=1,sync=full_sync", NULL};

static int64_t mono_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* The test's 3-server grid, its baseline formed and every partition settled. */
static void grid_up(const char *name)
{
    it_begin(name);
    start_grid(3, 3, grid_args);
    ck_assert(it_wait_baseline(finder, 3, 60000));
    ck_assert(it_wait_settled(finder, "default", 3, 90000));
}

/* Sends argv-style commands pipelined; the replies in r[] (freed by the caller). */
static void pipeline(redisContext *c, redisReply **r, size_t n, const char *const *cmds)
{
    for (size_t i = 0; i < n; i++) redisAppendCommand(c, cmds[i]);
    for (size_t i = 0; i < n; i++) {
        r[i] = NULL;
        ck_assert_int_eq(redisGetReply(c, (void **)&r[i]), REDIS_OK);
        ck_assert_ptr_nonnull(r[i]);
    }
}

static void free_all(redisReply **r, size_t n)
{
    for (size_t i = 0; i < n; i++) freeReplyObject(r[i]);
}

static void expect_str(redisContext *c, const char *command, const char *want)
{
    redisReply *r = cmd(c, command);
    if (!want) ck_assert_msg(r->type == REDIS_REPLY_NIL, "%s: type %d", command, r->type);
    else ck_assert_msg(r->type == REDIS_REPLY_STRING && !strcmp(r->str, want), "%s: %s", command, r->str ? r->str : "(nil)");
    freeReplyObject(r);
}

static long long int_of(redisContext *c, const char *command)
{
    redisReply *r = cmd(c, command);
    ck_assert_msg(r->type == REDIS_REPLY_INTEGER, "%s: type %d %s", command, r->type, r->str ? r->str : "");
    long long v = r->integer;
    freeReplyObject(r);
    return v;
}

/* A key of a slot node i is the primary of (prefix + n), and its slot. */
static void key_served_by(int i, const char *prefix, char *k, size_t cap, int skip_slot)
{
    for (int n = 0; n < 100000; n++) {
        snprintf(k, cap, "%s%d", prefix, n);
        int s = rg_slot_of(k), p, rep;
        if (s == skip_slot) continue;
        rg_owners_of(i, s, &p, &rep);
        if (p == i) return;
    }
    ck_abort_msg("no key of %s served by node %d", prefix, i);
}

START_TEST(exec_across_slots_answers_as_redis)
{
    grid_up("resp_xtx");
    /* a, b, c: three slots (so at least two primaries). */
    ck_assert_int_ne(rg_slot_of("a"), rg_slot_of("b"));
    ck_assert_int_ne(rg_slot_of("b"), rg_slot_of("c"));
    redisContext *c = conn_to(0);
    freeReplyObject(cmd(c, "SET a 10 EX 100"));
    freeReplyObject(cmd(c, "SET b x"));
    static const char *const t1[] = {"MULTI", "INCR a", "APPEND b yz", "GET a", "SET c 5", "DEL b",
                                     "EXISTS b", "EXPIRE c 50", "GET b", "EXEC"};
    redisReply *r[16];
    pipeline(c, r, 10, t1);
    redisReply *x = r[9];
    ck_assert_msg(x->type == REDIS_REPLY_ARRAY && x->elements == 8, "EXEC: type %d %s", x->type, x->str ? x->str : "");
    ck_assert_int_eq(x->element[0]->integer, 11);
    ck_assert_int_eq(x->element[1]->integer, 3);
    ck_assert_str_eq(x->element[2]->str, "11");
    ck_assert_str_eq(x->element[3]->str, "OK");
    ck_assert_int_eq(x->element[4]->integer, 1);
    ck_assert_int_eq(x->element[5]->integer, 0);
    ck_assert_int_eq(x->element[6]->integer, 1);
    ck_assert_int_eq(x->element[7]->type, REDIS_REPLY_NIL);
    free_all(r, 10);
    /* Seen whole through every node, the expiries kept and set. */
    for (int i = 0; i < 3; i++) {
        redisContext *d = conn_to(i);
        expect_str(d, "GET a", "11");
        expect_str(d, "GET b", NULL);
        expect_str(d, "GET c", "5");
        long long ta = int_of(d, "TTL a"), tc = int_of(d, "TTL c");
        ck_assert_msg(ta > 80 && ta <= 100, "TTL a %lld: INCR across slots kept the expiry", ta);
        ck_assert_msg(tc > 30 && tc <= 50, "TTL c %lld", tc);
        redisFree(d);
    }
    /* WATCH over two slots: unchanged, EXEC runs ... */
    static const char *const w1[] = {"WATCH a c", "MULTI", "SET a 1", "SET c 2", "EXEC"};
    pipeline(c, r, 5, w1);
    ck_assert_str_eq(r[0]->str, "OK");
    ck_assert_msg(r[4]->type == REDIS_REPLY_ARRAY && r[4]->elements == 2, "EXEC after WATCH: type %d", r[4]->type);
    free_all(r, 5);
    /* ... changed by another connection in between: nil, nothing written. */
    redisContext *o = conn_to(1);
    freeReplyObject(cmd(c, "WATCH a c"));
    freeReplyObject(cmd(o, "SET c 7"));
    static const char *const w2[] = {"MULTI", "SET a 100", "SET c 200", "EXEC"};
    pipeline(c, r, 4, w2);
    ck_assert_msg(r[3]->type == REDIS_REPLY_NIL, "EXEC after a watched key changed: type %d", r[3]->type);
    free_all(r, 4);
    expect_str(o, "GET a", "1");
    expect_str(o, "GET c", "7");
    /* The multi-key commands across slots. */
    redisReply *m = cmd(c, "MSET a 1 b 2 c 3");
    ck_assert_str_eq(m->str, "OK");
    freeReplyObject(m);
    m = cmd(o, "MGET a b c d");
    ck_assert(m->type == REDIS_REPLY_ARRAY && m->elements == 4);
    ck_assert_str_eq(m->element[0]->str, "1");
    ck_assert_str_eq(m->element[1]->str, "2");
    ck_assert_str_eq(m->element[2]->str, "3");
    ck_assert_int_eq(m->element[3]->type, REDIS_REPLY_NIL);
    freeReplyObject(m);
    ck_assert_int_eq(int_of(c, "EXISTS a b c d"), 3);
    ck_assert_int_eq(int_of(c, "TOUCH a b d"), 2);
    ck_assert_int_eq(int_of(c, "MSETNX a 9 d 9"), 0); /* a exists: nothing written */
    expect_str(o, "GET d", NULL);
    ck_assert_int_eq(int_of(c, "MSETNX d 4 e 5"), 1);
    expect_str(o, "GET e", "5");
    m = cmd(c, "RENAME a q");
    ck_assert_str_eq(m->str, "OK");
    freeReplyObject(m);
    expect_str(o, "GET q", "1");
    expect_str(o, "GET a", NULL);
    ck_assert_int_eq(int_of(c, "COPY q w"), 1);
    ck_assert_int_eq(int_of(c, "RENAMENX q w"), 0);
    ck_assert_int_eq(int_of(c, "DEL q w zz"), 2);
    ck_assert_int_eq(int_of(c, "UNLINK b c d e"), 4);
    ck_assert_int_eq(int_of(o, "DBSIZE"), 0);
    /* A cluster-aware connection (it used 32 slots this node is the
     * primary of) gets CROSSSLOT, as from Redis Cluster. */
    redisContext *aw = conn_to(0);
    char k1[32], k2[32];
    int used = 0;
    for (int n = 0; n < 20000 && used < 40; n++) {
        char k[32];
        snprintf(k, sizeof k, "aw%d", n);
        int p, rep;
        rg_owners_of(0, rg_slot_of(k), &p, &rep);
        if (p != 0) continue;
        freeReplyObject(cmd(aw, "GET %s", k));
        used++;
    }
    key_served_by(0, "x", k1, sizeof k1, -1);
    key_served_by(0, "y", k2, sizeof k2, rg_slot_of(k1));
    m = cmd(aw, "MSET %s 1 %s 2", k1, k2);
    ck_assert_msg(m->type == REDIS_REPLY_ERROR && !strncmp(m->str, "CROSSSLOT", 9), "aware MSET: %s",
                  m->str ? m->str : "(not an error)");
    freeReplyObject(m);
    redisAppendCommand(aw, "MULTI");
    redisAppendCommand(aw, "SET %s 1", k1);
    redisAppendCommand(aw, "SET %s 2", k2);
    redisAppendCommand(aw, "EXEC");
    for (int i = 0; i < 4; i++) {
        redisReply *y = NULL;
        ck_assert_int_eq(redisGetReply(aw, (void **)&y), REDIS_OK);
        if (i == 3)
            ck_assert_msg(y->type == REDIS_REPLY_ERROR && strstr(y->str, "CROSSSLOT"), "aware EXEC: %s",
                          y->str ? y->str : "(not an error)");
        freeReplyObject(y);
    }
    expect_str(o, "GET x0", NULL);
    redisFree(aw);
    redisFree(o);
    redisFree(c);
    it_verify_clean(finder, "default");
    it_end();
}
END_TEST

/* ---- the bank ---- */

enum { ACCOUNTS = 8, START = 100, TRANSFERRERS = 3, AUDITORS = 2 };

static void acct_key(char *k, size_t cap, int i) { snprintf(k, cap, "acct%d", i); }

typedef struct bank {
    atomic_bool stop;
    atomic_long transfers, audits, failed;
    char err[256], refusal[256];
    pthread_mutex_t mu;
} bank;

typedef struct bank_worker {
    bank *b;
    int node, id;
} bank_worker;

static void bank_fail(bank *b, const char *fmt, long long v)
{
    pthread_mutex_lock(&b->mu);
    if (!b->err[0]) snprintf(b->err, sizeof b->err, fmt, v);
    pthread_mutex_unlock(&b->mu);
}

static void *transferrer(void *p)
{
    bank_worker *w = p;
    redisContext *c = try_conn(w->node);
    unsigned seed = 11u * (unsigned)w->id + 1;
    time_t end = time(NULL) + 60;
    for (int t = 0; c && t < 300 && !atomic_load(&w->b->stop) && time(NULL) < end; t++) {
        int from = rand_r(&seed) % ACCOUNTS, to = (from + 1 + rand_r(&seed) % (ACCOUNTS - 1)) % ACCOUNTS;
        int amt = 1 + rand_r(&seed) % 10;
        char kf[16], kt[16];
        acct_key(kf, sizeof kf, from);
        acct_key(kt, sizeof kt, to);
        redisAppendCommand(c, "MULTI");
        redisAppendCommand(c, "DECRBY %s %d", kf, amt);
        redisAppendCommand(c, "INCRBY %s %d", kt, amt);
        redisAppendCommand(c, "EXEC");
        for (int i = 0; i < 4; i++) {
            redisReply *r = NULL;
            if (redisGetReply(c, (void **)&r) != REDIS_OK || !r) {
                bank_fail(w->b, "transferrer: connection broke at %lld", t);
                redisFree(c);
                return NULL;
            }
            if (i == 3) {
                if (r->type == REDIS_REPLY_ARRAY && r->elements == 2) {
                    atomic_fetch_add(&w->b->transfers, 1);
                } else { /* an error reply (all or nothing: the total holds either way) */
                    atomic_fetch_add(&w->b->failed, 1);
                    pthread_mutex_lock(&w->b->mu);
                    if (!w->b->refusal[0])
                        snprintf(w->b->refusal, sizeof w->b->refusal, "%s", r->str ? r->str : "(no text)");
                    pthread_mutex_unlock(&w->b->mu);
                }
            }
            freeReplyObject(r);
        }
    }
    if (c) redisFree(c);
    return NULL;
}

static long long sum_of(redisReply *r)
{
    long long s = 0;
    for (size_t i = 0; i < r->elements; i++) s += r->element[i]->str ? atoll(r->element[i]->str) : -1000000;
    return s;
}

static void *auditor(void *p)
{
    bank_worker *w = p;
    redisContext *c = try_conn(w->node);
    char mget[256] = "MGET";
    for (int i = 0; i < ACCOUNTS; i++) {
        char k[16];
        acct_key(k, sizeof k, i);
        strcat(mget, " ");
        strcat(mget, k);
    }
    time_t end = time(NULL) + 60;
    long mine = 0; /* after the transfers stop, until one audit answered (see it_tx's audit) */
    for (int t = 0; c && t < 2000 && (!atomic_load(&w->b->stop) || !mine) && time(NULL) < end; t++) {
        redisReply *r = NULL;
        if (t % 2 == 0) {
            r = redisCommand(c, mget);
            if (!r) break;
            if (r->type == REDIS_REPLY_ARRAY && r->elements == ACCOUNTS) {
                long long s = sum_of(r);
                if (s != (long long)ACCOUNTS * START) bank_fail(w->b, "an MGET across slots saw a total of %lld", s);
                atomic_fetch_add(&w->b->audits, 1);
                mine++;
            }
            freeReplyObject(r);
            continue;
        }
        redisAppendCommand(c, "MULTI");
        for (int i = 0; i < ACCOUNTS; i++) redisAppendCommand(c, "GET acct%d", i);
        redisAppendCommand(c, "EXEC");
        for (int i = 0; i < ACCOUNTS + 2; i++) {
            if (redisGetReply(c, (void **)&r) != REDIS_OK || !r) break;
            if (i == ACCOUNTS + 1 && r->type == REDIS_REPLY_ARRAY && r->elements == ACCOUNTS) {
                long long s = sum_of(r);
                if (s != (long long)ACCOUNTS * START) bank_fail(w->b, "a MULTI of GETs across slots saw a total of %lld", s);
                atomic_fetch_add(&w->b->audits, 1);
                mine++;
            }
            freeReplyObject(r);
            r = NULL;
        }
    }
    if (c) redisFree(c);
    return NULL;
}

START_TEST(bank_across_slots_keeps_the_total)
{
    grid_up("resp_xtx_bank");
    redisContext *c = conn_to(0);
    for (int i = 0; i < ACCOUNTS; i++) {
        char k[16];
        acct_key(k, sizeof k, i);
        for (int j = 0; j < i; j++) {
            char o[16];
            acct_key(o, sizeof o, j);
            ck_assert_int_ne(rg_slot_of(k), rg_slot_of(o));
        }
        freeReplyObject(cmd(c, "SET %s %d", k, START));
    }
    bank b = {.mu = PTHREAD_MUTEX_INITIALIZER};
    pthread_t th[TRANSFERRERS + AUDITORS];
    bank_worker w[TRANSFERRERS + AUDITORS];
    for (int i = 0; i < TRANSFERRERS + AUDITORS; i++) {
        w[i] = (bank_worker){&b, i % 3, i};
        ck_assert_int_eq(pthread_create(&th[i], NULL, i < TRANSFERRERS ? transferrer : auditor, &w[i]), 0);
    }
    for (int i = 0; i < TRANSFERRERS; i++) pthread_join(th[i], NULL);
    atomic_store(&b.stop, true);
    for (int i = TRANSFERRERS; i < TRANSFERRERS + AUDITORS; i++) pthread_join(th[i], NULL);
    printf("bank over RESP: %ld transfers, %ld refused (the first: %s), %ld audits\n", atomic_load(&b.transfers),
           atomic_load(&b.failed), b.refusal[0] ? b.refusal : "-", atomic_load(&b.audits));
    ck_assert_msg(!b.err[0], "%s", b.err);
    ck_assert_int_ge(atomic_load(&b.transfers), TRANSFERRERS * 300 / 2);
    ck_assert_int_gt(atomic_load(&b.audits), 0);
    for (int n = 0; n < 3; n++) {
        redisContext *d = conn_to(n);
        long long s = 0;
        for (int i = 0; i < ACCOUNTS; i++) {
            redisReply *r = cmd(d, "GET acct%d", i);
            ck_assert(r->type == REDIS_REPLY_STRING);
            s += atoll(r->str);
            freeReplyObject(r);
        }
        ck_assert_int_eq(s, (long long)ACCOUNTS * START);
        redisFree(d);
    }
    redisFree(c);
    it_verify_clean(finder, "default");
    it_end();
}
END_TEST

/* ---- list-append over RESP ---- */

enum { LA_CLIENTS = 4, LA_KEYS = 6, LA_TXNS = 150 };

typedef struct la_client {
    int id, node;
    tx_history h;
    atomic_long ok, failed, unknown;
} la_client;

static size_t parse_list(const char *s, size_t len, int64_t *list, size_t cap)
{
    size_t n = 0;
    const char *p = s, *end = s + len;
    while (p < end && n < cap) {
        if (*p == ',') {
            p++;
            continue;
        }
        char *e;
        list[n++] = strtoll(p, &e, 10);
        if (e == p) break;
        p = e;
    }
    return n;
}

typedef struct la_mop {
    bool append;
    uint32_t key;
    int64_t value;
} la_mop;

static void *la_work(void *arg)
{
    la_client *c = arg;
    unsigned seed = 7u * (unsigned)c->id + 3;
    int64_t next = 1;
    time_t stop = time(NULL) + 90;
    redisContext *rc = try_conn(c->node);
    static _Thread_local int64_t list[4096];
    for (int t = 0; rc && t < LA_TXNS && time(NULL) < stop; t++) {
        la_mop m[3];
        size_t nm = 1 + rand_r(&seed) % 3;
        redisAppendCommand(rc, "MULTI");
        for (size_t i = 0; i < nm; i++) {
            m[i].append = rand_r(&seed) % 2;
            m[i].key = (uint32_t)(rand_r(&seed) % LA_KEYS);
            if (m[i].append) {
                m[i].value = (int64_t)c->id * 1000000 + next++;
                redisAppendCommand(rc, "APPEND lak%u ,%lld", m[i].key, (long long)m[i].value);
            } else {
                redisAppendCommand(rc, "GET lak%u", m[i].key);
            }
        }
        redisAppendCommand(rc, "EXEC");
        int64_t invoke = mono_ns();
        redisReply *r = NULL, *exec = NULL;
        bool broke = false;
        for (size_t i = 0; i < nm + 2; i++) {
            if (redisGetReply(rc, (void **)&r) != REDIS_OK || !r) {
                broke = true;
                break;
            }
            if (i == nm + 1) exec = r;
            else freeReplyObject(r);
        }
        int64_t complete = mono_ns();
        /* An array: committed.  Anything else (an error, no reply): unknown -
         * an error after a failover may come from a commit that applied. */
        fh_outcome o = exec && exec->type == REDIS_REPLY_ARRAY && exec->elements == nm ? FH_OK : FH_UNKNOWN;
        tx_begin(&c->h, c->id, c->node, invoke);
        for (size_t i = 0; i < nm; i++) {
            if (m[i].append) {
                tx_append(&c->h, m[i].key, m[i].value);
            } else if (o == FH_OK) {
                redisReply *e = exec->element[i];
                size_t n = e->type == REDIS_REPLY_STRING ? parse_list(e->str, e->len, list, 4096) : 0;
                tx_read(&c->h, m[i].key, list, n);
            } else {
                tx_read_unknown(&c->h, m[i].key);
            }
        }
        tx_end(&c->h, o, o == FH_OK ? complete : FH_INF);
        atomic_fetch_add(o == FH_OK ? &c->ok : &c->unknown, 1);
        if (exec) freeReplyObject(exec);
        if (broke) {
            redisFree(rc);
            rc = try_conn(c->node);
        }
    }
    if (rc) redisFree(rc);
    return NULL;
}

START_TEST(list_append_across_slots_through_a_kill)
{
    grid_up("resp_xtx_la");
    ck_assert(it_wait_for(rg_baseline_of_three, NULL, 60000));
    for (int i = 0; i < LA_KEYS; i++) {
        char k[16], o[16];
        snprintf(k, sizeof k, "lak%d", i);
        for (int j = 0; j < i; j++) {
            snprintf(o, sizeof o, "lak%d", j);
            ck_assert_int_ne(rg_slot_of(k), rg_slot_of(o));
        }
    }
    int victim, rep;
    rg_owners_of(0, rg_slot_of("lak0"), &victim, &rep);
    ck_assert_int_ge(victim, 0);
    la_client c[LA_CLIENTS];
    pthread_t th[LA_CLIENTS];
    for (int i = 0; i < LA_CLIENTS; i++) {
        memset(&c[i], 0, sizeof c[i]);
        c[i].id = i + 1;
        c[i].node = (victim + 1 + i % 2) % 3; /* clients on the two survivors */
        tx_init(&c[i].h);
        ck_assert_int_eq(pthread_create(&th[i], NULL, la_work, &c[i]), 0);
    }
    for (int i = 0; i < 3000; i++) { /* a third of the way, lak0's primary dies */
        long done = 0;
        for (int j = 0; j < LA_CLIENTS; j++) done += atomic_load(&c[j].ok) + atomic_load(&c[j].unknown);
        if (done >= LA_CLIENTS * LA_TXNS / 3) break;
        usleep(10000);
    }
    it_signal(srv[victim], SIGKILL);
    for (int i = 0; i < LA_CLIENTS; i++) pthread_join(th[i], NULL);
    tx_history all;
    tx_init(&all);
    long ok = 0, unknown = 0;
    for (int i = 0; i < LA_CLIENTS; i++) {
        tx_append_all(&all, &c[i].h);
        ok += atomic_load(&c[i].ok), unknown += atomic_load(&c[i].unknown);
        tx_free(&c[i].h);
    }
    /* The final read: every key in one EXEC, through a survivor. */
    redisContext *d = conn_to((victim + 1) % 3);
    bool read = false;
    for (int attempt = 0; attempt < 50 && !read; attempt++) {
        int64_t invoke = mono_ns();
        redisAppendCommand(d, "MULTI");
        for (int k = 0; k < LA_KEYS; k++) redisAppendCommand(d, "GET lak%d", k);
        redisAppendCommand(d, "EXEC");
        redisReply *r = NULL;
        for (int i = 0; i < LA_KEYS + 2; i++) {
            ck_assert_int_eq(redisGetReply(d, (void **)&r), REDIS_OK);
            if (i < LA_KEYS + 1) freeReplyObject(r);
        }
        if (r->type == REDIS_REPLY_ARRAY && r->elements == LA_KEYS) {
            tx_begin(&all, 0, 0, invoke);
            for (int k = 0; k < LA_KEYS; k++) {
                static int64_t list[8192];
                redisReply *e = r->element[k];
                size_t n = e->type == REDIS_REPLY_STRING ? parse_list(e->str, e->len, list, 8192) : 0;
                tx_read(&all, (uint32_t)k, list, n);
            }
            tx_end(&all, FH_OK, mono_ns());
            read = true;
        } else {
            usleep(200000);
        }
        freeReplyObject(r);
    }
    redisFree(d);
    ck_assert_msg(read, "the final read never committed");
    char path[512];
    snprintf(path, sizeof path, "%s/txn.txt", it_dir());
    tx_save(&all, path, "it_resp_xtx list-append over RESP across slots through a kill -9");
    tx_report rep_;
    bool clean = tx_check(&all, stdout, &rep_);
    printf("list-append over RESP: %ld ok, %ld unknown; %zu keys, %zu dependency edges, %zu anomalies\n", ok,
           unknown, rep_.keys, rep_.edges, rep_.anomalies);
    fflush(stdout);
    tx_free(&all);
    ck_assert_msg(clean, "the history has anomalies (above; history in %s)", path);
    ck_assert_int_ge(ok, LA_CLIENTS * LA_TXNS / 3);
    it_end();
}
END_TEST

/* ---- wait cycles ---- */

#define CYCLE_TXNS 150

typedef struct cycler {
    int k, i;                  /* cycle length, this member */
    char first[32], second[32]; /* its keys: its own, then the next member's */
    long committed;
    char err[160];
} cycler;

static void cycle_key(char *out, size_t cap, int k, int i)
{
    /* A slot of its own per member (hash tags of different slots, checked). */
    snprintf(out, cap, "{cyc%d.%d}n", k, i);
}

/* Member i of a cycle of k: MULTI INCR own INCR next EXEC, CYCLE_TXNS times,
 * each an order of locks that closes a wait cycle with its neighbours. */
static void *cycle_member(void *p)
{
    cycler *m = p;
    redisContext *c = try_conn(m->i % 3);
    for (int t = 0; c && t < CYCLE_TXNS && !m->err[0]; t++) {
        redisAppendCommand(c, "MULTI");
        redisAppendCommand(c, "INCR %s", m->first);
        redisAppendCommand(c, "INCR %s", m->second);
        redisAppendCommand(c, "EXEC");
        for (int j = 0; j < 4; j++) {
            redisReply *r = NULL;
            if (redisGetReply(c, (void **)&r) != REDIS_OK || !r) {
                snprintf(m->err, sizeof m->err, "connection broke at transaction %d", t);
                break;
            }
            if (j == 3) {
                if (r->type == REDIS_REPLY_ARRAY && r->elements == 2) m->committed++;
                else if (!m->err[0])
                    snprintf(m->err, sizeof m->err, "transaction %d: %s", t, r->str ? r->str : "not an array");
            }
            freeReplyObject(r);
        }
    }
    if (!c) snprintf(m->err, sizeof m->err, "no connection");
    if (c) redisFree(c);
    return NULL;
}

/* Cycles of 2, 3 and 4 transactions, each member locking its own key and
 * then its neighbour's, all at once and again: every wait cycle they form
 * is broken (wait-die, docs/TRANSACTIONS.md) and each transaction commits -
 * no refusal, no hang - and every counter ends at the commits that touched
 * it. */
START_TEST(wait_cycles_of_two_to_four_all_commit)
{
    grid_up("resp_xtx_cycles");
    for (int k = 2; k <= 4; k++) {
        cycler m[4];
        pthread_t th[4];
        for (int i = 0; i < k; i++) {
            m[i] = (cycler){.k = k, .i = i};
            cycle_key(m[i].first, sizeof m[i].first, k, i);
            cycle_key(m[i].second, sizeof m[i].second, k, (i + 1) % k);
            for (int j = 0; j < i; j++) ck_assert_int_ne(rg_slot_of(m[i].first), rg_slot_of(m[j].first));
        }
        for (int i = 0; i < k; i++) ck_assert_int_eq(pthread_create(&th[i], NULL, cycle_member, &m[i]), 0);
        for (int i = 0; i < k; i++) pthread_join(th[i], NULL);
        redisContext *c = conn_to(0);
        for (int i = 0; i < k; i++) {
            ck_assert_msg(!m[i].err[0], "cycle of %d, member %d: %s", k, i, m[i].err);
            ck_assert_int_eq(m[i].committed, CYCLE_TXNS);
            redisReply *r = cmd(c, "GET %s", m[i].first);
            ck_assert_msg(r->type == REDIS_REPLY_STRING, "GET %s: type %d", m[i].first, r->type);
            /* its own member's commits and its predecessor's */
            ck_assert_int_eq(atoll(r->str), m[i].committed + m[(i + k - 1) % k].committed);
            freeReplyObject(r);
        }
        redisFree(c);
        printf("wait cycle of %d: %d transactions committed by each member, counters exact\n", k, CYCLE_TXNS);
    }
    it_verify_clean(finder, "default");
    it_end();
}
END_TEST

/* ---- a coordinator killed ---- */

#define KC_KEYS 200

static int64_t set_all_ms(redisContext *c, const char *value)
{
    int64_t t0 = mono_ns();
    for (int i = 0; i < KC_KEYS; i++) redisAppendCommand(c, "SET key-%d %s", i, value);
    for (int i = 0; i < KC_KEYS; i++) {
        redisReply *r = NULL;
        ck_assert_int_eq(redisGetReply(c, (void **)&r), REDIS_OK);
        ck_assert_msg(r->type == REDIS_REPLY_STATUS, "SET key-%d after the kill: %s", i, r->str ? r->str : "?");
        freeReplyObject(r);
    }
    return (mono_ns() - t0) / 1000000;
}

/* `lattice bench --op putalltx` (a client node: the coordinator of its
 * transactions across partitions, 8 in flight over 200 keys) is killed -9.
 * The rows it prepared and never finished lock their keys until a primary
 * settles them (docs/TRANSACTIONS.md, "Orphans"): once the failure
 * detection removed it, not at the transactions' deadline.  Then every key
 * takes a SET, DBSIZE counts the 200 keys and no prepared row, and the
 * copies are equal.  Prints how long the SETs waited after the kill. */
START_TEST(a_killed_coordinators_keys_are_released)
{
    grid_up("resp_xtx_coord_kill");
    redisContext *c = conn_to(0);
    set_all_ms(c, "before");
    const char *argv[] = {LATTICE_CLI_PATH, "--ip-finder", finder, "bench", "--op", "putalltx", "--keys", "200",
                          "--batch", "20", "--threads", "8", "--duration", "60", "--warmup", "0", NULL};
    it_proc *bench = it_spawn("bench", NULL, argv);
    ck_assert_ptr_nonnull(bench);
    ck_assert_msg(it_wait_log(bench, "[  2s]", 60000), "the bench never ran 2 s");
    it_signal(bench, SIGKILL);
    int64_t killed = mono_ns();
    ck_assert(it_wait_exit(bench, 10000));
    int64_t waited = set_all_ms(c, "after");
    int64_t since_kill = (mono_ns() - killed) / 1000000;
    long long size = 0; /* DBSIZE counts the keys a node is primary of */
    for (int i = 0; i < 3; i++) {
        redisContext *ci = conn_to(i);
        size += int_of(ci, "DBSIZE");
        redisFree(ci);
    }
    int settled = 0;
    for (int i = 0; i < 3; i++) settled += it_log_has(srv[i], "outlived its coordinator or its deadline");
    printf("coordinator killed: every one of %d keys took a SET %lld ms after the kill (the SETs %lld ms), "
           "failure detection 1000 ms; %d of 3 servers settled orphaned rows\n", KC_KEYS, (long long)since_kill,
           (long long)waited, settled);
    fflush(stdout);
    for (int i = 0; i < KC_KEYS; i++) {
        char k[32];
        snprintf(k, sizeof k, "GET key-%d", i);
        expect_str(c, k, "after");
    }
    ck_assert_int_eq(size, KC_KEYS);
    redisFree(c);
    it_verify_clean(finder, "default");
    it_end();
}
END_TEST

int main(int argc, char **argv)
{
    static const it_named tests[] = {
        {"exec_across_slots_answers_as_redis", &exec_across_slots_answers_as_redis},
        {"bank_across_slots_keeps_the_total", &bank_across_slots_keeps_the_total},
        {"list_append_across_slots_through_a_kill", &list_append_across_slots_through_a_kill},
        {"wait_cycles_of_two_to_four_all_commit", &wait_cycles_of_two_to_four_all_commit},
        {"a_killed_coordinators_keys_are_released", &a_killed_coordinators_keys_are_released},
    };
    Suite *s = suite_create("resp_xtx");
    TCase *tc = tcase_create("grid");
    tcase_set_timeout(tc, 600);
    it_add_named(tc, tests, sizeof tests / sizeof tests[0], argc, argv);
    suite_add_tcase(s, tc);
    return it_run_suite(s);
}
