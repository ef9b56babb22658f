/*
 * it_tx: interactive transactions through the C API (lattice/transaction.h)
 * on a grid of real latticed processes, a client node as the coordinator:
 * nothing is visible before the commit and everything after; a conflicting
 * write or transaction aborts a commit (nothing applied); concurrent
 * read-modify-write transactions with retries lose no increment; a
 * rollback, a timeout and a key of another slot apply nothing; a failover
 * of the primary between read and commit aborts the commit; bank transfers
 * through a kill -9 of their primary keep the total in every committed
 * audit and at the end; list-append transactions through a kill -9 give a
 * history the fault suite's checker finds strict serializable.
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

#include "grid_client.h"
#include "base/base.h"
#include "harness.h"
#include "lattice/alloc.h"
#include "lattice/lattice.h"
#include "lattice/metrics.h"
#include "lattice/transaction.h"
#include "lattice/txn.h"
#include "partition/partition.h"
#include "txn.h" /* tests/fault: the list-append history and its checker */

static char finder[64];
static it_proc *srv[3];
static int base_port;

static void start_grid(int n)
{
    base_port = it_free_ports(n + 2);
    snprintf(finder, sizeof finder, "127.0.0.1:%d..%d", base_port, base_port + n + 1);
    for (int i = 0; i < n; i++) {
        char port[16], name[16];
        snprintf(port, sizeof port, "%d", base_port + i);
        snprintf(name, sizeof name, "s%d", i);
        const char *args[] = {"--port", port, "--port-range", "1", "--ip-finder", finder, "--failure-detection-ms",
                              "1000", "--cache", "default:backups=1,sync=full_sync", "--log-level", "info", NULL};
        srv[i] = it_latticed(name, args);
        ck_assert_ptr_nonnull(srv[i]);
    }
}

static lattice_node *attach(void)
{
    lattice_config c;
    lattice_config_init(&c);
    c.client = true;
    c.port = 0;
    c.failure_detection_ms = 1000;
    c.finders[c.n_finders++] = finder;
    c.op_timeout_ms = 60000; /* a deadline, not an expectation */
    lattice_node *n = NULL;
    ck_assert_int_eq(lattice_node_start(&c, &n), LATTICE_OK);
    ck_assert_int_eq(lattice_node_wait_joined(n, 15000), LATTICE_OK);
    return n;
}

static bool ready(void *ctx)
{
    lattice_node *n = ctx;
    return lattice_cache_put(n, "default", "__ready", 7, "1", 1) == LATTICE_OK &&
           lattice_cache_remove(n, "default", "__ready", 7) == LATTICE_OK;
}

static lattice_node *grid_up(void)
{
    start_grid(3);
    lattice_node *c = attach();
    wait_grid(c, 3);
    ck_assert_msg(it_wait_for(ready, c, 30000), "the grid never served");
    return c;
}

/* The value of key through a plain get, "" when absent. */
static char *get_str(lattice_node *n, const char *key)
{
    static char buf[256];
    void *v = NULL;
    size_t vl = 0;
    lattice_status st = lattice_cache_get(n, "default", key, strlen(key), &v, &vl);
    ck_assert_msg(st == LATTICE_OK || st == LATTICE_ERR_NOT_FOUND, "get %s: %s", key, lattice_strerror(st));
    ck_assert_uint_lt(vl, sizeof buf);
    if (vl) memcpy(buf, v, vl);
    buf[vl] = 0;
    lt_free(v);
    return buf;
}

static char *tx_get_str(lattice_tx *tx, const char *key, lattice_status *st)
{
    static char buf[256];
    void *v = NULL;
    size_t vl = 0;
    *st = lattice_tx_get(tx, key, strlen(key), &v, &vl);
    ck_assert_uint_lt(vl, sizeof buf);
    if (vl) memcpy(buf, v, vl);
    buf[vl] = 0;
    lt_free(v);
    return buf;
}

static void put(lattice_tx *tx, const char *key, const char *val)
{
    ck_assert_int_eq(lattice_tx_put(tx, key, strlen(key), val, strlen(val)), LATTICE_OK);
}

START_TEST(writes_appear_together_at_the_commit_and_never_before)
{
    it_begin("tx_commit");
    lattice_node *c = grid_up();
    lattice_tx *tx;
    ck_assert_int_eq(lattice_tx_begin(c, NULL, 0, "basic", &tx), LATTICE_OK);
    lattice_status st;
    ck_assert_str_eq(tx_get_str(tx, "{acct}a", &st), "");
    ck_assert_int_eq(st, LATTICE_ERR_NOT_FOUND);
    put(tx, "{acct}a", "90");
    put(tx, "{acct}b", "110");
    lattice_kv kv[2] = {{"{acct}c", 7, "7", 1, 0}, {"{acct}d", 7, "8", 1, 0}};
    ck_assert_int_eq(lattice_tx_put_all(tx, kv, 2), LATTICE_OK);
    ck_assert_int_eq(lattice_tx_remove(tx, "{acct}d", 7), LATTICE_OK);
    /* The transaction sees its own writes; nobody else does yet. */
    ck_assert_str_eq(tx_get_str(tx, "{acct}a", &st), "90");
    ck_assert_int_eq(st, LATTICE_OK);
    ck_assert_str_eq(get_str(c, "{acct}a"), "");
    ck_assert_str_eq(get_str(c, "{acct}b"), "");
    lattice_kv all[3] = {{"{acct}a", 7, NULL, 0, 0}, {"{acct}d", 7, NULL, 0, 0}, {"{acct}e", 7, NULL, 0, 0}};
    ck_assert_int_eq(lattice_tx_get_all(tx, all, 3), LATTICE_OK);
    ck_assert_int_eq(all[0].status, LATTICE_OK);
    ck_assert(all[0].value_len == 2 && !memcmp(all[0].value, "90", 2));
    ck_assert_int_eq(all[1].status, LATTICE_ERR_NOT_FOUND); /* removed in the transaction */
    ck_assert_int_eq(all[2].status, LATTICE_ERR_NOT_FOUND); /* read from the grid: absent */
    for (int i = 0; i < 3; i++) lt_free(all[i].value);
    ck_assert_int_eq(lattice_tx_commit(tx), LATTICE_OK);
    ck_assert_str_eq(get_str(c, "{acct}a"), "90");
    ck_assert_str_eq(get_str(c, "{acct}b"), "110");
    ck_assert_str_eq(get_str(c, "{acct}c"), "7");
    ck_assert_str_eq(get_str(c, "{acct}d"), "");

    /* get_and_put gives the committed value, and a second read of a key the same answer. */
    ck_assert_int_eq(lattice_tx_begin(c, "default", 5000, NULL, &tx), LATTICE_OK);
    void *old = NULL;
    size_t ol = 0;
    ck_assert_int_eq(lattice_tx_get_and_put(tx, "{acct}a", 7, "80", 2, &old, &ol), LATTICE_OK);
    ck_assert(ol == 2 && !memcmp(old, "90", 2));
    lt_free(old);
    ck_assert_str_eq(tx_get_str(tx, "{acct}b", &st), "110");
    ck_assert_int_eq(lattice_cache_put(c, "default", "{acct}b", 7, "999", 3), LATTICE_OK);
    ck_assert_str_eq(tx_get_str(tx, "{acct}b", &st), "110"); /* repeatable */
    /* ... but {acct}b changed since it was read: the commit aborts, nothing applies. */
    ck_assert_int_eq(lattice_tx_commit(tx), LATTICE_ERR_ABORTED);
    ck_assert_str_eq(get_str(c, "{acct}a"), "90");
    ck_assert_str_eq(get_str(c, "{acct}b"), "999");
    lattice_node_stop(c);
    it_end();
}
END_TEST

START_TEST(rollback_and_timeout_apply_nothing)
{
    it_begin("tx_nothing");
    lattice_node *c = grid_up();
    lattice_tx *tx;
    ck_assert_int_eq(lattice_tx_begin(c, NULL, 0, "rb", &tx), LATTICE_OK);
    put(tx, "{r}1", "x");
    lattice_tx_rollback(tx);
    ck_assert_str_eq(get_str(c, "{r}1"), "");

    ck_assert_int_eq(lattice_tx_begin(c, NULL, 200, "late", &tx), LATTICE_OK);
    put(tx, "{r}2", "x");
    struct timespec d = {0, 400 * 1000000L}; /* past its 200 ms: the deadline, not a race */
    nanosleep(&d, NULL);
    ck_assert_int_eq(lattice_tx_commit(tx), LATTICE_ERR_TIMEOUT);
    ck_assert_str_eq(get_str(c, "{r}2"), "");

    /* A transaction run again keeps its first attempt's age: keep_age
     * makes it older, never younger. */
    lattice_tx *first, *again;
    ck_assert_int_eq(lattice_tx_begin(c, NULL, 0, "first", &first), LATTICE_OK);
    struct timespec ms5 = {0, 5 * 1000000L};
    nanosleep(&ms5, NULL);
    ck_assert_int_eq(lattice_tx_begin(c, NULL, 0, "again", &again), LATTICE_OK);
    uint64_t age = lattice_tx_age(first), later = lattice_tx_age(again);
    ck_assert_uint_gt(age, 0);
    ck_assert_uint_gt(later, age);
    lattice_tx_keep_age(again, age);
    ck_assert_uint_eq(lattice_tx_age(again), age);
    lattice_tx_keep_age(again, later + 1000);
    lattice_tx_keep_age(again, 0);
    ck_assert_uint_eq(lattice_tx_age(again), age);
    lattice_tx_rollback(first);
    lattice_tx_rollback(again);

    lattice_node_stop(c);
    it_end();
}
END_TEST

/* Keys of several partitions commit together or not at all: nothing is
 * visible before the commit and all of it after; a read key written in
 * between aborts the commit and none of its writes applies; a removal
 * takes part like a put. */
typedef struct chain {
    lattice_node *n;
    int left;
    lattice_status last;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done;
} chain;

/* Commits a transaction over {c}i and {d}i (two partitions), and from its
 * callback the next one, until left reaches 0 or one fails. */
static void chain_next(void *arg, lattice_status st)
{
    chain *ch = arg;
    ch->last = st;
    lattice_tx *tx = NULL;
    if (st == LATTICE_OK && ch->left > 0 && lattice_tx_begin(ch->n, NULL, 0, "chain", &tx) == LATTICE_OK) {
        char k1[16], k2[16];
        int i = --ch->left;
        snprintf(k1, sizeof k1, "{c}%d", i);
        snprintf(k2, sizeof k2, "{d}%d", i);
        if (lattice_tx_put(tx, k1, strlen(k1), "v", 1) != LATTICE_OK ||
            lattice_tx_put(tx, k2, strlen(k2), "v", 1) != LATTICE_OK) {
            lattice_tx_rollback(tx);
            ch->last = LATTICE_ERR_INVAL;
        } else if ((st = lattice_tx_commit_async(tx, chain_next, ch)) == LATTICE_OK) {
            return;
        } else {
            ch->last = st; /* the call freed tx */
        }
    }
    pthread_mutex_lock(&ch->mu);
    ch->done = true;
    pthread_cond_signal(&ch->cv);
    pthread_mutex_unlock(&ch->mu);
}

START_TEST(across_partitions_all_or_nothing)
{
    it_begin("tx_across");
    lattice_node *c = grid_up();
    lattice_tx *tx;
    lattice_status st;
    ck_assert_int_eq(lattice_tx_begin(c, NULL, 0, "across", &tx), LATTICE_OK);
    put(tx, "{p}1", "a");
    put(tx, "{q}1", "b");
    lattice_kv kv[2] = {{"{r}1", 4, "c", 1, 0}, {"{s}1", 4, "d", 1, 0}};
    ck_assert_int_eq(lattice_tx_put_all(tx, kv, 2), LATTICE_OK);
    ck_assert_str_eq(get_str(c, "{p}1"), "");
    ck_assert_str_eq(get_str(c, "{s}1"), "");
    ck_assert_int_eq(lattice_tx_commit(tx), LATTICE_OK);
    ck_assert_str_eq(get_str(c, "{p}1"), "a");
    ck_assert_str_eq(get_str(c, "{q}1"), "b");
    ck_assert_str_eq(get_str(c, "{r}1"), "c");
    ck_assert_str_eq(get_str(c, "{s}1"), "d");

    /* A read of two partitions, one of its keys written meanwhile. */
    ck_assert_int_eq(lattice_tx_begin(c, NULL, 0, "conflict", &tx), LATTICE_OK);
    lattice_kv all[2] = {{"{p}1", 4, NULL, 0, 0}, {"{q}1", 4, NULL, 0, 0}};
    ck_assert_int_eq(lattice_tx_get_all(tx, all, 2), LATTICE_OK);
    ck_assert_uint_eq(all[0].value_len, 1);
    ck_assert_uint_eq(all[1].value_len, 1);
    lt_free(all[0].value);
    lt_free(all[1].value);
    ck_assert_int_eq(lattice_cache_put(c, "default", "{q}1", 4, "B", 1), LATTICE_OK);
    put(tx, "{p}1", "A");
    put(tx, "{r}1", "C");
    ck_assert_int_eq(lattice_tx_remove(tx, "{s}1", 4), LATTICE_OK);
    ck_assert_int_eq(lattice_tx_commit(tx), LATTICE_ERR_ABORTED);
    ck_assert_str_eq(get_str(c, "{p}1"), "a");
    ck_assert_str_eq(get_str(c, "{r}1"), "c");
    ck_assert_str_eq(get_str(c, "{s}1"), "d");
    /* The keys are free again: plain writes go through. */
    ck_assert_int_eq(lattice_cache_put(c, "default", "{p}1", 4, "x", 1), LATTICE_OK);
    ck_assert_int_eq(lattice_cache_put(c, "default", "{r}1", 4, "y", 1), LATTICE_OK);

    /* The same, undisturbed: commits, the removal included. */
    ck_assert_int_eq(lattice_tx_begin(c, NULL, 0, "again", &tx), LATTICE_OK);
    char *q = tx_get_str(tx, "{q}1", &st);
    ck_assert_str_eq(q, "B");
    put(tx, "{p}1", "A");
    ck_assert_int_eq(lattice_tx_remove(tx, "{s}1", 4), LATTICE_OK);
    ck_assert_int_eq(lattice_tx_commit(tx), LATTICE_OK);
    ck_assert_str_eq(get_str(c, "{p}1"), "A");
    ck_assert_str_eq(get_str(c, "{s}1"), "");

    /* Commits across partitions chained from the commit's own callback
     * (the data thread's role, as lattice bench's closed loop): none may
     * wait for that thread. */
    chain ch = {c, 5, LATTICE_OK, PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false};
    chain_next(&ch, LATTICE_OK);
    pthread_mutex_lock(&ch.mu);
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 30;
    while (!ch.done && pthread_cond_timedwait(&ch.cv, &ch.mu, &until) == 0) {}
    bool done = ch.done;
    pthread_mutex_unlock(&ch.mu);
    ck_assert_msg(done, "a commit across partitions from a callback never answered (it waited for its own thread)");
    ck_assert_int_eq(ch.last, LATTICE_OK);
    ck_assert_str_eq(get_str(c, "{c}0"), "v");
    ck_assert_str_eq(get_str(c, "{d}4"), "v");
    lattice_node_stop(c);
    it_end();
}
END_TEST

typedef struct sync_op {
    atomic_int done;
    lattice_op_result r;
    uint8_t *buf;
    size_t cap;
} sync_op;

static void sync_op_done(void *arg, size_t i, const lattice_op_result *r)
{
    (void)i;
    sync_op *s = arg;
    s->r = *r;
    size_t n = r->value_len < s->cap ? r->value_len : s->cap;
    if (n) memcpy(s->buf, r->value, n);
    s->r.value = s->buf;
    s->r.value_len = n;
    atomic_store(&s->done, 1);
}

static lattice_status submit_wait(lattice_node *n, const lattice_op *op, lattice_op_result *out, uint8_t *buf, size_t cap)
{
    sync_op s = {0, {0}, buf, cap};
    lattice_status st = lattice_op_submit(n, op, 1, sync_op_done, &s);
    if (st != LATTICE_OK) return st;
    for (int i = 0; i < 120000 && !atomic_load(&s.done); i++) usleep(1000); /* the op's own deadline ends it first */
    if (!atomic_load(&s.done)) return LATTICE_ERR_TIMEOUT;
    *out = s.r;
    return LATTICE_OK;
}

/* A transaction prepared and then orphaned - its coordinator gone before it
 * finished, as if killed after its prepare: the key stays locked until the
 * deadline passes, then the partition's primary records an abort at the
 * home partition and finishes the row, so the key is free again and the
 * prepared write never appears.  The grid's own keys (first byte 0xff)
 * are refused to users. */
START_TEST(an_orphaned_prepare_is_settled_by_its_deadline)
{
    it_begin("tx_orphan");
    lattice_node *c = grid_up();
    ck_assert_int_eq(lattice_cache_put(c, "default", "\xff" "x", 2, "v", 1), LATTICE_ERR_RESERVED_KEY);
    void *rv = NULL;
    size_t rvl = 0;
    ck_assert_int_eq(lattice_cache_get(c, "default", "\xff" "x", 2, &rv, &rvl), LATTICE_ERR_RESERVED_KEY);
    ck_assert_int_eq(lattice_cache_put(c, "default", "orphan:1", 8, "before", 6), LATTICE_OK);
    /* A PREPARE as a coordinator sends it, in the name of this client node
     * - a live member, so only the deadline settles it (a coordinator that
     * left the topology is settled at once: it_resp_xtx
     * a_killed_coordinators_keys_are_released) - that never finishes it:
     * deadline 1 s from now on the wall clock. */
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    uint64_t wall = (uint64_t)now.tv_sec * 1000 + (uint64_t)now.tv_nsec / 1000000;
    uint8_t hdr[LATTICE_TXN_PREP_BYTES];
    char me[64];
    lattice_node_id(c, me, sizeof me);
    uint64_t fields[5] = {lt_fnv1a(me, strlen(me)) | 1, 1u << 30, wall, lattice_partition_of_key("orphan:1", 8, 1024),
                          wall + 1000};
    int widths[5] = {8, 8, 8, 4, 8};
    for (int f = 0, at = 0; f < 5; at += widths[f++])
        for (int b = 0; b < widths[f]; b++) hdr[at + b] = (uint8_t)(fields[f] >> (8 * b));
    lattice_op subs[2] = {{(lattice_op_kind)LATTICE_TXN_PREPARE, 0, NULL, "orphan:1", 8, (const char *)hdr, sizeof hdr, 0, 0, 0},
                          lattice_op_put(NULL, "orphan:1", 8, "never", 5)};
    uint8_t req[256];
    size_t len = lattice_txn_request_encode(NULL, 0, subs, 2, req, sizeof req);
    ck_assert_uint_gt(len, 0);
    lattice_op op = {LATTICE_OP_TXN, 0, "default", "orphan:1", 8, (const char *)req, len, 0, 0, 0};
    lattice_op_result r;
    uint8_t res[256];
    ck_assert_int_eq(submit_wait(c, &op, &r, res, sizeof res), LATTICE_OK);
    ck_assert_int_eq(r.status, LATTICE_OK);
    ck_assert(!(r.flags & LATTICE_OP_R_ABORTED));
    /* The grid's own rows (the prepared row, later the decision) are not
     * the user's: the cache holds one key. */
    uint64_t size = 0;
    ck_assert_int_eq(lattice_cache_size(c, "default", &size), LATTICE_OK);
    ck_assert_uint_eq(size, 1);
    /* Locked: a plain write waits until the sweep settles it (deadline +
     * grace), then applies; the prepared value never shows. */
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    ck_assert_int_eq(lattice_cache_put(c, "default", "orphan:1", 8, "after", 5), LATTICE_OK);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double waited = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    printf("orphan: the plain write waited %.2f s for the prepared transaction to be settled\n", waited);
    ck_assert_str_eq(get_str(c, "orphan:1"), "after");
    /* It went through only once the orphan was settled (not a timing: the
     * settle's line is written before the row's finish frees the key). */
    bool settled = false;
    for (int i = 0; i < 3; i++) settled = settled || it_log_has(srv[i], "outlived its coordinator or its deadline");
    ck_assert_msg(settled, "the plain write applied while the prepared transaction still held its key");
    lattice_node_stop(c);
    it_end();
}
END_TEST

/* Concurrent read-modify-write transactions over a few counters: each
 * commits +1 to one counter and +1 to the total, retrying when aborted.
 * A lost update (two transactions committing on the same read) would make a
 * counter or the total fall short of the commits counted. */
enum { WORKERS = 4, PER_WORKER = 150, COUNTERS = 3 };

typedef struct worker {
    lattice_node *n;
    unsigned seed;
    long committed[COUNTERS], aborted, unknown;
} worker;

static long num_of(lattice_tx *tx, const char *key, bool *ok)
{
    void *v = NULL;
    size_t vl = 0;
    lattice_status st = lattice_tx_get(tx, key, strlen(key), &v, &vl);
    long x = 0;
    if (st == LATTICE_OK) {
        char b[32];
        snprintf(b, sizeof b, "%.*s", (int)(vl < 31 ? vl : 31), (const char *)v);
        x = atol(b);
    }
    lt_free(v);
    *ok = st == LATTICE_OK || st == LATTICE_ERR_NOT_FOUND;
    return x;
}

static void *work(void *arg)
{
    worker *w = arg;
    time_t stop = time(NULL) + 120; /* bounded in time as in count */
    for (int i = 0; i < PER_WORKER && time(NULL) < stop;) {
        int k = (int)(rand_r(&w->seed) % COUNTERS);
        char key[32], val[32];
        snprintf(key, sizeof key, "{ctr}%d", k);
        lattice_tx *tx;
        if (lattice_tx_begin(w->n, NULL, 0, "incr", &tx) != LATTICE_OK) continue;
        bool ok1, ok2;
        long x = num_of(tx, key, &ok1), total = num_of(tx, "{ctr}total", &ok2);
        if (!ok1 || !ok2) {
            lattice_tx_rollback(tx);
            continue;
        }
        snprintf(val, sizeof val, "%ld", x + 1);
        lattice_tx_put(tx, key, strlen(key), val, strlen(val));
        snprintf(val, sizeof val, "%ld", total + 1);
        lattice_tx_put(tx, "{ctr}total", 10, val, strlen(val));
        lattice_status st = lattice_tx_commit(tx);
        if (st == LATTICE_OK) {
            w->committed[k]++;
            i++;
        } else if (st == LATTICE_ERR_ABORTED) {
            w->aborted++;
        } else {
            w->unknown++;
            i++;
        }
    }
    return NULL;
}

START_TEST(contending_increments_lose_nothing)
{
    it_begin("tx_increments");
    lattice_node *c = grid_up();
    worker w[WORKERS];
    pthread_t th[WORKERS];
    for (int i = 0; i < WORKERS; i++) {
        memset(&w[i], 0, sizeof w[i]);
        w[i].n = c;
        w[i].seed = 17u * (unsigned)i + 1;
        ck_assert_int_eq(pthread_create(&th[i], NULL, work, &w[i]), 0);
    }
    long committed[COUNTERS] = {0}, total = 0, aborted = 0, unknown = 0;
    for (int i = 0; i < WORKERS; i++) {
        pthread_join(th[i], NULL);
        for (int k = 0; k < COUNTERS; k++) committed[k] += w[i].committed[k], total += w[i].committed[k];
        aborted += w[i].aborted;
        unknown += w[i].unknown;
    }
    printf("increments: %ld committed, %ld aborted (retried), %ld unknown\n", total, aborted, unknown);
    ck_assert_int_eq(unknown, 0); /* no fault here: every outcome is known */
    ck_assert_int_eq(total, WORKERS * PER_WORKER);
    ck_assert_int_gt(aborted, 0); /* 4 workers on 3 keys: they did contend */
    char key[32];
    for (int k = 0; k < COUNTERS; k++) {
        snprintf(key, sizeof key, "{ctr}%d", k);
        ck_assert_int_eq(atol(get_str(c, key)), committed[k]);
    }
    ck_assert_int_eq(atol(get_str(c, "{ctr}total")), total);
    /* The coordinator's metrics count the same outcomes. */
    lattice_node_metrics m;
    ck_assert_int_eq(lattice_node_metrics_get(c, &m), LATTICE_OK);
    ck_assert_uint_eq(m.tx[LATTICE_OK], (uint64_t)total);
    ck_assert_uint_eq(m.tx[LATTICE_ERR_ABORTED], (uint64_t)aborted);
    ck_assert_uint_eq(m.tx[LATTICE_ERR_UNKNOWN], 0);
    lattice_node_stop(c);
    it_end();
}
END_TEST

/* The server holding the primary copy of key's partition. */
static int primary_of(lattice_node *c, const char *key)
{
    lattice_partitions_info *pi = NULL;
    ck_assert_int_eq(lattice_cache_partitions(c, "default", &pi), LATTICE_OK);
    uint32_t p = lattice_slot_partition(lattice_key_slot(key, strlen(key)), pi->partitions);
    ck_assert_uint_gt(pi->n_owners[p], 0);
    const lattice_partition_owner *o = &pi->owners[(size_t)p * pi->max_owners];
    ck_assert_int_eq(o->primary, 1);
    int port = 0;
    ck_assert_int_eq(sscanf(o->consistent_id, "127.0.0.1:%d", &port), 1);
    lattice_partitions_info_free(pi);
    ck_assert(port >= base_port && port < base_port + 3);
    return port - base_port;
}

/* Three servers in the baseline, every partition with its backup (the kill
 * of one leaves a majority and a copy); a client node attached to them. */
static lattice_node *grid_settled(void)
{
    lattice_node *c = grid_up();
    ck_assert(it_wait_baseline(finder, 3, 30000));
    ck_assert(it_wait_settled(finder, "default", 3, 30000));
    return c;
}

/* kill -9 of the server holding the primary copy of key's partition. */
static void kill_primary_of(lattice_node *c, const char *key)
{
    int victim = primary_of(c, key);
    it_signal(srv[victim], SIGKILL);
    ck_assert(it_wait_exit(srv[victim], 10000));
}

START_TEST(a_failover_between_read_and_commit_aborts)
{
    it_begin("tx_failover");
    lattice_node *c = grid_settled();
    ck_assert_int_eq(lattice_cache_put(c, "default", "{f}k", 4, "before", 6), LATTICE_OK);
    lattice_tx *tx;
    ck_assert_int_eq(lattice_tx_begin(c, NULL, 60000, "failover", &tx), LATTICE_OK);
    lattice_status st;
    ck_assert_str_eq(tx_get_str(tx, "{f}k", &st), "before");
    put(tx, "{f}k", "after");
    kill_primary_of(c, "{f}k");
    /* The backup takes over with a new epoch: the read's watch cannot hold
     * there, whatever the value (the new primary cannot know what the old
     * one let through after the read). */
    ck_assert_int_eq(lattice_tx_commit(tx), LATTICE_ERR_ABORTED);
    ck_assert_str_eq(get_str(c, "{f}k"), "before");
    /* Run again, it commits on the new primary. */
    ck_assert_int_eq(lattice_tx_begin(c, NULL, 60000, "again", &tx), LATTICE_OK);
    ck_assert_str_eq(tx_get_str(tx, "{f}k", &st), "before");
    put(tx, "{f}k", "after");
    ck_assert_int_eq(lattice_tx_commit(tx), LATTICE_OK);
    ck_assert_str_eq(get_str(c, "{f}k"), "after");
    lattice_node_stop(c);
    it_end();
}
END_TEST

/* The bank: ACCOUNTS accounts of one slot, START each; transfer threads
 * move random amounts between two accounts in a transaction, an auditor
 * reads every account in a read-only transaction and commits it (the
 * commit validates that none changed since it was read).  Midway the
 * accounts' primary is killed -9.  Every committed audit must see the
 * total, and so must the final read: a partial transfer never shows, and
 * none applied twice or half (UNKNOWN outcomes too keep the total). */
enum { ACCOUNTS = 8, START = 100 };

typedef struct bank {
    lattice_node *n;
    atomic_bool stop;
    atomic_long transfers, audits, bad_audits, aborted, unknown, failed;
    long bad_total;
} bank;

static const char *bank_tag = "{bank}"; /* "": every account in a slot of its own */
static void acct_key(char *k, size_t cap, int i) { snprintf(k, cap, "%sacct-%d", bank_tag, i); }

static void *transfer(void *arg)
{
    bank *b = arg;
    unsigned seed = (unsigned)(uintptr_t)&seed;
    time_t stop = time(NULL) + 90;
    for (int i = 0; i < 2000 && !atomic_load(&b->stop) && time(NULL) < stop; i++) {
        int from = (int)(rand_r(&seed) % ACCOUNTS), to = (int)(rand_r(&seed) % ACCOUNTS);
        if (from == to) continue;
        char kf[32], kt[32], v[32];
        acct_key(kf, sizeof kf, from);
        acct_key(kt, sizeof kt, to);
        lattice_tx *tx;
        if (lattice_tx_begin(b->n, NULL, 0, "transfer", &tx) != LATTICE_OK) continue;
        bool ok1, ok2;
        long f = num_of(tx, kf, &ok1), t = num_of(tx, kt, &ok2);
        if (!ok1 || !ok2 || f == 0) {
            lattice_tx_rollback(tx);
            continue;
        }
        long amount = 1 + (long)(rand_r(&seed) % (unsigned long)f);
        snprintf(v, sizeof v, "%ld", f - amount);
        lattice_tx_put(tx, kf, strlen(kf), v, strlen(v));
        snprintf(v, sizeof v, "%ld", t + amount);
        lattice_tx_put(tx, kt, strlen(kt), v, strlen(v));
        lattice_status st = lattice_tx_commit(tx);
        atomic_fetch_add(st == LATTICE_OK              ? &b->transfers
                         : st == LATTICE_ERR_ABORTED   ? &b->aborted
                         : st == LATTICE_ERR_UNKNOWN   ? &b->unknown
                                                       : &b->failed,
                         1);
    }
    return NULL;
}

static void *audit(void *arg)
{
    bank *b = arg;
    time_t stop = time(NULL) + 90;
    static char keys[ACCOUNTS][32];
    for (int i = 0; i < ACCOUNTS; i++) acct_key(keys[i], sizeof keys[i], i);
    /* Until the transfers stop - and then until one audit committed: a
     * read-only transaction may keep aborting while writers keep changing
     * its keys (nothing promises it a turn), and the test wants at least one. */
    long mine = 0;
    while ((!atomic_load(&b->stop) || !mine) && time(NULL) < stop) {
        lattice_kv kv[ACCOUNTS];
        for (int i = 0; i < ACCOUNTS; i++) kv[i] = (lattice_kv){keys[i], strlen(keys[i]), NULL, 0, 0};
        lattice_tx *tx;
        if (lattice_tx_begin(b->n, NULL, 0, "audit", &tx) != LATTICE_OK) continue;
        lattice_status st = lattice_tx_get_all(tx, kv, ACCOUNTS);
        long total = 0;
        for (int i = 0; i < ACCOUNTS; i++) {
            char x[32];
            snprintf(x, sizeof x, "%.*s", (int)(kv[i].value_len < 31 ? kv[i].value_len : 31),
                     kv[i].value ? (const char *)kv[i].value : "");
            total += atol(x);
            lt_free(kv[i].value);
        }
        if (st != LATTICE_OK) {
            lattice_tx_rollback(tx);
            continue;
        }
        if (lattice_tx_commit(tx) != LATTICE_OK) continue; /* not validated: it proves nothing */
        atomic_fetch_add(&b->audits, 1);
        mine++;
        if (total != (long)ACCOUNTS * START) {
            atomic_fetch_add(&b->bad_audits, 1);
            b->bad_total = total;
        }
    }
    return NULL;
}

static void bank_run(void);
START_TEST(bank_transfers_through_a_kill_keep_the_total)
{
    bank_run();
}
END_TEST

static void bank_run(void)
{
    it_begin(*bank_tag ? "tx_bank" : "tx_bank_across");
    lattice_node *c = grid_settled();
    char k[32];
    for (int i = 0; i < ACCOUNTS; i++) {
        acct_key(k, sizeof k, i);
        ck_assert_int_eq(lattice_cache_put(c, "default", k, strlen(k), "100", 3), LATTICE_OK);
    }
    bank b = {.n = c};
    pthread_t tt[3], ta;
    for (int i = 0; i < 3; i++) ck_assert_int_eq(pthread_create(&tt[i], NULL, transfer, &b), 0);
    ck_assert_int_eq(pthread_create(&ta, NULL, audit, &b), 0);
    /* Once some transfers committed, the accounts' primary dies. */
    for (int i = 0; i < 3000 && atomic_load(&b.transfers) < 100; i++) usleep(10000);
    acct_key(k, sizeof k, 0);
    long before = atomic_load(&b.transfers);
    kill_primary_of(c, k);
    /* ... and transfers commit again on the new primary. */
    for (int i = 0; i < 6000 && atomic_load(&b.transfers) < before + 100; i++) usleep(10000);
    atomic_store(&b.stop, true);
    for (int i = 0; i < 3; i++) pthread_join(tt[i], NULL);
    pthread_join(ta, NULL);
    long total = 0;
    for (int i = 0; i < ACCOUNTS; i++) {
        acct_key(k, sizeof k, i);
        total += atol(get_str(c, k));
    }
    printf("bank: %ld transfers committed (%ld before the kill), %ld aborted, %ld unknown, %ld failed; "
           "%ld audits committed, %ld saw another total; final total %ld\n",
           atomic_load(&b.transfers), before, atomic_load(&b.aborted), atomic_load(&b.unknown), atomic_load(&b.failed),
           atomic_load(&b.audits), atomic_load(&b.bad_audits), total);
    ck_assert_int_ge(atomic_load(&b.transfers), before + 100);
    ck_assert_int_gt(atomic_load(&b.audits), 0);
    ck_assert_msg(atomic_load(&b.bad_audits) == 0, "a committed audit saw a total of %ld", b.bad_total);
    ck_assert_int_eq(total, (long)ACCOUNTS * START);
    lattice_node_stop(c);
    it_end();
}


/* The bank with every account in a partition of its own: each transfer a
 * commit across two partitions, each audit a read-only commit across all
 * eight, the first account's primary killed -9 midway. */
START_TEST(bank_across_partitions_through_a_kill_keeps_the_total)
{
    bank_tag = "";
    bank_run();
    bank_tag = "{bank}";
}
END_TEST

/* List-append (Elle's workload, the fault suite's checker): 4 clients run
 * transactions of 1-3 micro-operations over 6 keys of one slot - read a
 * key's list, or append a unique token to it (a get and a put of the list
 * with the token added) - while the keys' primary is killed -9 midway.
 * Every transaction goes into a history (committed: ok, with the lists it
 * read; ABORTED, TIMEOUT, other refusals: failed; UNKNOWN: unknown), a final
 * transaction reads every key, and tests/fault/txn.c looks for G0, G1a/b/c,
 * G-single, G2 (and their real-time forms), lost appends, incompatible
 * orders, duplicates. */
enum { LA_CLIENTS = 4, LA_KEYS = 6, LA_TXNS = 150 };

typedef struct la_client {
    lattice_node *n;
    int id;
    tx_history h;
    atomic_bool *stop;
    atomic_long ok, failed, unknown;
} la_client;

static int64_t mono_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static const char *la_tag = "{la}"; /* "": the keys over six slots */
static void la_key(char *k, size_t cap, uint32_t i) { snprintf(k, cap, "%sk%u", la_tag, i); }

/* Parses "1,2,3" into list (at most cap); its length. */
static size_t parse_list(const void *v, size_t vl, int64_t *list, size_t cap)
{
    char *s = lt_malloc(vl + 1); /* a value has no terminator: strtoll must stop at its end */
    ck_assert_ptr_nonnull(s);
    if (vl) memcpy(s, v, vl);
    s[vl] = 0;
    size_t n = 0;
    for (char *p = s, *e; *p && n < cap; p = *e == ',' ? e + 1 : e) {
        list[n++] = strtoll(p, &e, 10);
        if (e == p) break; /* not a number: stop (the checker reports what was read) */
    }
    lt_free(s);
    return n;
}

typedef struct la_mop {
    bool append;
    uint32_t key;
    int64_t value;
    int64_t list[512];
    size_t n;
    bool read_ok;
} la_mop;

static void *la_work(void *arg)
{
    la_client *c = arg;
    unsigned seed = 7u * (unsigned)c->id + 3;
    int64_t next = 1;
    time_t stop = time(NULL) + 90;
    static _Thread_local la_mop mops[3];
    for (int t = 0; t < LA_TXNS && !atomic_load(c->stop) && time(NULL) < stop; t++) {
        size_t nm = 1 + rand_r(&seed) % 3;
        int64_t invoke = mono_ns();
        lattice_tx *tx;
        if (lattice_tx_begin(c->n, NULL, 0, "list-append", &tx) != LATTICE_OK) continue;
        lattice_status st = LATTICE_OK;
        for (size_t m = 0; m < nm; m++) {
            la_mop *x = &mops[m];
            x->append = rand_r(&seed) % 2;
            x->key = (uint32_t)(rand_r(&seed) % LA_KEYS);
            x->read_ok = false;
            x->n = 0;
            char k[32];
            la_key(k, sizeof k, x->key);
            void *v = NULL;
            size_t vl = 0;
            lattice_status g = lattice_tx_get(tx, k, strlen(k), &v, &vl);
            if (g != LATTICE_OK && g != LATTICE_ERR_NOT_FOUND) {
                lt_free(v);
                st = g;
                break;
            }
            if (!x->append) {
                x->n = parse_list(v, vl, x->list, 512);
                x->read_ok = true;
            } else {
                x->value = (int64_t)c->id * 1000000 + next++;
                char *nv = lt_malloc(vl + 32);
                int len = snprintf(nv, vl + 32, "%.*s%s%lld", (int)vl, v ? (const char *)v : "", vl ? "," : "",
                                   (long long)x->value);
                st = lattice_tx_put(tx, k, strlen(k), nv, (size_t)len);
                lt_free(nv);
            }
            lt_free(v);
            if (st != LATTICE_OK) break;
        }
        if (st == LATTICE_OK) st = lattice_tx_commit(tx);
        else lattice_tx_rollback(tx);
        int64_t complete = mono_ns();
        fh_outcome o = st == LATTICE_OK ? FH_OK : st == LATTICE_ERR_UNKNOWN ? FH_UNKNOWN : FH_FAIL;
        tx_begin(&c->h, c->id, 0, invoke);
        for (size_t m = 0; m < nm; m++) {
            la_mop *x = &mops[m];
            if (x->append) tx_append(&c->h, x->key, x->value);
            else if (o == FH_OK && x->read_ok) tx_read(&c->h, x->key, x->list, x->n);
            else tx_read_unknown(&c->h, x->key);
        }
        tx_end(&c->h, o, o == FH_UNKNOWN ? FH_INF : complete);
        atomic_fetch_add(o == FH_OK ? &c->ok : o == FH_FAIL ? &c->failed : &c->unknown, 1);
    }
    return NULL;
}

static void la_run(void);
START_TEST(list_append_histories_through_a_kill_are_strict_serializable)
{
    la_run();
}
END_TEST

/* The same over keys of six slots: every transaction of two or three keys
 * a commit across partitions. */
START_TEST(list_append_across_partitions_through_a_kill_is_strict_serializable)
{
    la_tag = "";
    la_run();
    la_tag = "{la}";
}
END_TEST

static void la_run(void)
{
    it_begin(*la_tag ? "tx_list_append" : "tx_list_append_across");
    lattice_node *n = grid_settled();
    atomic_bool stop = false;
    la_client c[LA_CLIENTS];
    pthread_t th[LA_CLIENTS];
    for (int i = 0; i < LA_CLIENTS; i++) {
        memset(&c[i], 0, sizeof c[i]);
        c[i].n = n;
        c[i].id = i + 1;
        c[i].stop = &stop;
        tx_init(&c[i].h);
        ck_assert_int_eq(pthread_create(&th[i], NULL, la_work, &c[i]), 0);
    }
    for (int i = 0; i < 3000; i++) { /* a third of the way, the keys' primary dies */
        long done = 0;
        for (int j = 0; j < LA_CLIENTS; j++)
            done += atomic_load(&c[j].ok) + atomic_load(&c[j].failed) + atomic_load(&c[j].unknown);
        if (done >= LA_CLIENTS * LA_TXNS / 3) break;
        usleep(10000);
    }
    char k0[16];
    la_key(k0, sizeof k0, 0);
    kill_primary_of(n, k0);
    for (int i = 0; i < LA_CLIENTS; i++) pthread_join(th[i], NULL);
    tx_history all;
    tx_init(&all);
    long ok = 0, failed = 0, unknown = 0;
    for (int i = 0; i < LA_CLIENTS; i++) {
        tx_append_all(&all, &c[i].h);
        ok += atomic_load(&c[i].ok), failed += atomic_load(&c[i].failed), unknown += atomic_load(&c[i].unknown);
        tx_free(&c[i].h);
    }
    /* The final read: every key, in one transaction. */
    lattice_tx *tx;
    lattice_status st = LATTICE_ERR_AGAIN;
    for (int attempt = 0; attempt < 20 && st != LATTICE_OK; attempt++) {
        int64_t invoke = mono_ns();
        ck_assert_int_eq(lattice_tx_begin(n, NULL, 0, "final", &tx), LATTICE_OK);
        static char keys[LA_KEYS][32];
        lattice_kv kv[LA_KEYS];
        for (uint32_t k = 0; k < LA_KEYS; k++) {
            la_key(keys[k], sizeof keys[k], k);
            kv[k] = (lattice_kv){keys[k], strlen(keys[k]), NULL, 0, 0};
        }
        st = lattice_tx_get_all(tx, kv, LA_KEYS);
        if (st == LATTICE_OK) st = lattice_tx_commit(tx);
        else lattice_tx_rollback(tx);
        if (st == LATTICE_OK) {
            tx_begin(&all, 0, 0, invoke);
            for (uint32_t k = 0; k < LA_KEYS; k++) {
                static int64_t list[4096];
                size_t m = parse_list(kv[k].value, kv[k].value_len, list, 4096);
                tx_read(&all, k, list, m);
            }
            tx_end(&all, FH_OK, mono_ns());
        }
        for (uint32_t k = 0; k < LA_KEYS; k++) lt_free(kv[k].value);
    }
    ck_assert_int_eq(st, LATTICE_OK);
    char path[512];
    snprintf(path, sizeof path, "%s/txn.txt", it_dir());
    tx_save(&all, path, "it_tx list-append through a kill -9 of the keys' primary");
    tx_report rep;
    bool clean = tx_check(&all, stdout, &rep);
    printf("list-append: %ld ok, %ld failed, %ld unknown; %zu keys, %zu dependency edges, %zu anomalies\n", ok,
           failed, unknown, rep.keys, rep.edges, rep.anomalies);
    fflush(stdout); /* the witnesses, before a failed assertion ends this process */
    tx_free(&all);
    ck_assert_msg(clean, "the history has anomalies (above; history in %s)", path);
    ck_assert_int_ge(ok, LA_CLIENTS * LA_TXNS / 3); /* enough committed to say something */
    lattice_node_stop(n);
    it_end();
}


int main(int argc, char **argv)
{
    Suite *s = suite_create("tx");
    TCase *tc = tcase_create("grid");
    tcase_set_timeout(tc, 300);
    static const it_named tests[] = {
        {"writes_appear_together_at_the_commit_and_never_before", &writes_appear_together_at_the_commit_and_never_before},
        {"rollback_and_timeout_apply_nothing", &rollback_and_timeout_apply_nothing},
        {"across_partitions_all_or_nothing", &across_partitions_all_or_nothing},
        {"an_orphaned_prepare_is_settled_by_its_deadline", &an_orphaned_prepare_is_settled_by_its_deadline},
        {"contending_increments_lose_nothing", &contending_increments_lose_nothing},
        {"a_failover_between_read_and_commit_aborts", &a_failover_between_read_and_commit_aborts},
        {"bank_transfers_through_a_kill_keep_the_total", &bank_transfers_through_a_kill_keep_the_total},
        {"bank_across_partitions_through_a_kill_keeps_the_total", &bank_across_partitions_through_a_kill_keeps_the_total},
        {"list_append_histories_through_a_kill_are_strict_serializable",
         &list_append_histories_through_a_kill_are_strict_serializable},
        {"list_append_across_partitions_through_a_kill_is_strict_serializable",
         &list_append_across_partitions_through_a_kill_is_strict_serializable},
    };
    it_add_named(tc, tests, sizeof tests / sizeof tests[0], argc, argv); /* it_tx [NAME...] */
    suite_add_tcase(s, tc);
    return it_run_suite(s);
}
