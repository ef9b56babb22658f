/*
 * lattice bench: a load generator in the manner of Yardstick, as a client
 * node.  --threads T keeps T operations in flight: each "thread" is a
 * closed loop of the async API (lattice/ops.h) - when its operation completes
 * (callback on the data thread) it records the latency and submits the next
 * one - so T costs no OS threads and the data thread batches whatever is
 * bound for one server into one message.  Prints ops/s every second and a
 * summary with p50/p99/p99.9; --json prints one JSON object at the end.
 * The in-process reference (a direct storage get on the same keys) is
 * bench/caches/bench_direct_get: the CLI stays on the public API.
 */
#include <getopt.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "lattice/alloc.h"
#include "lattice/ops.h"
#include "lattice/transaction.h"

#define HIST_US (1u << 20) /* latencies up to ~1 s at 1 us resolution, the rest in the last bucket */

enum { OP_GET, OP_PUT, OP_PUTGET, OP_PUTALL, OP_PUTTX, OP_GETANDPUTTX, OP_PUTALLTX };

static bool is_tx(int op) { return op == OP_PUTTX || op == OP_GETANDPUTTX || op == OP_PUTALLTX; }

typedef struct bench bench;

typedef struct worker {
    bench *b;
    uint64_t start_ns;
    uint64_t rng;
    bool getting;        /* putget: the get half */
    size_t batch_left;   /* putall: ops of this batch not yet completed */
    lattice_tx *tx;      /* puttx, getandputtx: the transaction under way */
    uint64_t age;        /* its first attempt's (lattice_tx_keep_age); 0: a new transaction */
    char key[64];
    lattice_op ops[];    /* putall batch */
} worker;

struct bench {
    lattice_node *n;
    const char *cache;
    int op;
    long keys;
    int value_size, batch;
    char *value;
    atomic_bool recording, stop;
    atomic_uint_fast64_t ops_done, errors, active;
    atomic_uint_fast64_t aborted; /* transactions: aborted attempts (each retried) */
    uint32_t *hist;      /* data thread only (callbacks), read after stop */
    uint64_t hist_n;
    char (*batch_keys)[64];
};

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t rnd(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static void submit_next(worker *w);

static void record(bench *b, uint64_t ns, uint64_t count)
{
    if (!atomic_load(&b->recording)) return;
    uint64_t us = ns / 1000;
    b->hist[us < HIST_US ? us : HIST_US - 1]++;
    b->hist_n++;
    atomic_fetch_add(&b->ops_done, count);
}

static void done_fn(void *arg, size_t i, const lattice_op_result *r)
{
    (void)i;
    worker *w = arg;
    bench *b = w->b;
    if (r->status != LATTICE_OK && r->status != LATTICE_ERR_NOT_FOUND) atomic_fetch_add(&b->errors, 1);
    if (b->op == OP_PUTALL && --w->batch_left > 0) return;
    record(b, now_ns() - w->start_ns, b->op == OP_PUTALL ? (uint64_t)b->batch : 1);
    submit_next(w);
}

/* Transactions (Yardstick's PutTx, GetAndPutTx, PutAllTx): one key each,
 * or --batch random keys over every partition (putalltx: a commit across
 * partitions), a closed loop of the asynchronous transaction API.  An
 * aborted commit is counted and run again with the same keys; its latency
 * is from the first attempt to the commit. */
static void tx_attempt(worker *w);

static void tx_committed(void *arg, lattice_status st)
{
    worker *w = arg;
    bench *b = w->b;
    w->tx = NULL;
    if (st == LATTICE_ERR_ABORTED) {
        if (atomic_load(&b->recording)) atomic_fetch_add(&b->aborted, 1);
        if (!atomic_load(&b->stop)) {
            tx_attempt(w);
            return;
        }
    } else if (st != LATTICE_OK) {
        atomic_fetch_add(&b->errors, 1);
    } else {
        record(b, now_ns() - w->start_ns, (uint64_t)b->batch);
    }
    submit_next(w);
}

static void tx_commit(worker *w)
{
    bench *b = w->b;
    lattice_status st = LATTICE_OK;
    if (b->op == OP_PUTALLTX) {
        lattice_kv *kv = (lattice_kv *)(w->ops + b->batch); /* after the keys: see cli_bench's allocation */
        for (int i = 0; i < b->batch; i++) {
            const char *k = (const char *)(kv + b->batch) + (size_t)i * 64;
            kv[i] = (lattice_kv){k, strlen(k), b->value, (size_t)b->value_size, 0};
        }
        st = lattice_tx_put_all(w->tx, kv, (size_t)b->batch);
    } else {
        st = lattice_tx_put(w->tx, w->key, strlen(w->key), b->value, (size_t)b->value_size);
    }
    if (st != LATTICE_OK) {
        lattice_tx_rollback(w->tx);
        tx_committed(w, st);
        return;
    }
    lattice_tx *tx = w->tx;
    if ((st = lattice_tx_commit_async(tx, tx_committed, w)) != LATTICE_OK) tx_committed(w, st);
}

static void tx_read(void *arg, lattice_status st, const void *value, size_t value_len)
{
    (void)value;
    (void)value_len;
    worker *w = arg;
    if (st != LATTICE_OK && st != LATTICE_ERR_NOT_FOUND) {
        lattice_tx_rollback(w->tx);
        tx_committed(w, st);
        return;
    }
    tx_commit(w);
}

static void tx_attempt(worker *w)
{
    bench *b = w->b;
    lattice_status st = lattice_tx_begin(b->n, b->cache, 0, "bench", &w->tx);
    if (st != LATTICE_OK) {
        w->tx = NULL;
        atomic_fetch_add(&b->errors, 1);
        atomic_fetch_sub(&b->active, 1);
        return;
    }
    /* Run again after ABORTED with the first attempt's age, as an
     * application should: younger every time, large transactions over the
     * same keys kept dying (64 putAll transactions of 100 keys in flight:
     * 2,376 aborts to 300 commits in 5 s). */
    if (w->age) lattice_tx_keep_age(w->tx, w->age);
    else w->age = lattice_tx_age(w->tx);
    if (b->op == OP_PUTTX || b->op == OP_PUTALLTX) {
        tx_commit(w);
        return;
    }
    if ((st = lattice_tx_get_async(w->tx, w->key, strlen(w->key), tx_read, w)) != LATTICE_OK) {
        lattice_tx_rollback(w->tx);
        tx_committed(w, st);
    }
}

static void submit_next(worker *w)
{
    bench *b = w->b;
    if (atomic_load(&b->stop)) {
        atomic_fetch_sub(&b->active, 1);
        return;
    }
    w->start_ns = now_ns();
    w->age = 0; /* a new transaction */
    lattice_status st;
    if (b->op == OP_PUTALLTX) {
        char *keys = (char *)((lattice_kv *)(w->ops + b->batch) + b->batch);
        for (int i = 0; i < b->batch; i++)
            snprintf(keys + (size_t)i * 64, 64, "key-%ld", (long)(rnd(&w->rng) % (uint64_t)b->keys));
        tx_attempt(w);
        return;
    }
    if (b->op == OP_PUTTX || b->op == OP_GETANDPUTTX) {
        snprintf(w->key, sizeof w->key, "key-%ld", (long)(rnd(&w->rng) % (uint64_t)b->keys));
        tx_attempt(w);
        return;
    }
    if (b->op == OP_PUTALL) {
        for (int i = 0; i < b->batch; i++) {
            char *k = (char *)(w->ops + b->batch) + (size_t)i * 64;
            int len = snprintf(k, 64, "key-%ld", (long)(rnd(&w->rng) % (uint64_t)b->keys));
            w->ops[i] = lattice_op_put(b->cache, k, (size_t)len, b->value, (size_t)b->value_size);
        }
        w->batch_left = (size_t)b->batch;
        st = lattice_op_submit(b->n, w->ops, (size_t)b->batch, done_fn, w);
    } else {
        bool get = b->op == OP_GET || (b->op == OP_PUTGET && w->getting);
        if (b->op != OP_PUTGET || !w->getting)
            snprintf(w->key, sizeof w->key, "key-%ld", (long)(rnd(&w->rng) % (uint64_t)b->keys));
        if (b->op == OP_PUTGET) w->getting = !w->getting;
        lattice_op op = get ? lattice_op_get(b->cache, w->key, strlen(w->key))
                            : lattice_op_put(b->cache, w->key, strlen(w->key), b->value, (size_t)b->value_size);
        st = lattice_op_submit(b->n, &op, 1, done_fn, w);
    }
    if (st != LATTICE_OK) {
        atomic_fetch_add(&b->errors, 1);
        atomic_fetch_sub(&b->active, 1);
    }
}

static uint64_t percentile_us(const bench *b, double q)
{
    if (!b->hist_n) return 0;
    uint64_t want = (uint64_t)ceil(q * (double)b->hist_n), seen = 0;
    for (uint32_t i = 0; i < HIST_US; i++) {
        seen += b->hist[i];
        if (seen >= want) return i;
    }
    return HIST_US - 1;
}

/* Loads keys [0, keys) with put_all batches (for get). */
static lattice_status preload(bench *b)
{
    enum { B = 1000 };
    static char keys[B][32];
    lattice_kv kv[B];
    for (long i = 0; i < b->keys; i += B) {
        size_t m = 0;
        for (long k = i; k < b->keys && k < i + B; k++, m++) {
            snprintf(keys[m], sizeof keys[m], "key-%ld", k);
            kv[m] = (lattice_kv){keys[m], strlen(keys[m]), b->value, (size_t)b->value_size, 0};
        }
        lattice_status st = lattice_cache_put_all(b->n, b->cache, kv, m);
        if (st != LATTICE_OK) return st;
    }
    return LATTICE_OK;
}

/* The summary: one JSON object (series is consumed) or a line of text. */
static void report(const cli_globals *g, bench *b, const char *opname, long threads, long duration, double secs,
                   json_t *series)
{
    const char *cache = b->cache;
    int op = b->op;
    long keys = b->keys, vsize = b->value_size;
    uint64_t total = atomic_load(&b->ops_done);
    double rate = (double)total / secs;
    uint64_t p50 = percentile_us(b, 0.5), p99 = percentile_us(b, 0.99), p999 = percentile_us(b, 0.999);
    if (g->json) {
        json_t *j = json_pack("{s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:f, s:I, s:I, s:I, s:I, s:I, s:o}", "op", opname,
                              "cache", cache, "threads", (json_int_t)threads, "duration_s", (json_int_t)duration,
                              "keys", (json_int_t)keys, "value_size", (json_int_t)vsize, "batch", (json_int_t)b->batch,
                              "ops_per_s", rate, "p50_us", (json_int_t)p50, "p99_us", (json_int_t)p99, "p999_us",
                              (json_int_t)p999, "errors", (json_int_t)atomic_load(&b->errors), "aborted",
                              (json_int_t)atomic_load(&b->aborted), "per_second", series);
        cli_print_json(j);
    } else {
        json_decref(series);
        bool tx = is_tx(op);
        printf("%s: %.0f %s/s over %.1f s, %ld in flight%s; latency p50 %" PRIu64 " us, p99 %" PRIu64
               " us, p99.9 %" PRIu64 " us; errors %" PRIu64,
               opname, rate, op == OP_PUTALLTX ? "keys of committed transactions" : tx ? "committed transactions" : "ops",
               secs, threads, op == OP_PUTALL || op == OP_PUTALLTX ? " (batches; ops = keys)" : "", p50, p99, p999,
               (uint64_t)atomic_load(&b->errors));
        if (tx) printf("; aborted attempts %" PRIu64 " (each run again)", (uint64_t)atomic_load(&b->aborted));
        printf("\n");
    }
}

static int usage(FILE *f, int rc)
{
    fputs("usage: lattice [GLOBAL OPTIONS] bench [OPTIONS]\n"
          "  --op get|put|putget|putall|puttx|getandputtx|putalltx   (default put)\n"
          "  --threads N       operations kept in flight, 1..4096 (default 8)\n"
          "  --duration S      measured seconds, 1..600 (default 10)\n"
          "  --warmup S        unmeasured seconds first, 0..60 (default 2)\n"
          "  --keys N          key range key-0..key-(N-1), 1..10000000 (default 100000)\n"
          "  --value-size N    bytes, 0..1048576 (default 100)\n"
          "  --batch N         putall, putalltx: keys per put_all, 1..10000 (default 100)\n"
          "  --cache NAME      (default default)\n"
          "Runs as a client node; prints ops/s every second, then p50/p99/p99.9 latency.\n"
          "get and getandputtx preload every key first.  puttx: one put in a transaction;\n"
          "getandputtx: a get and a put of one key in a transaction (Yardstick's PutTx,\n"
          "GetAndPutTx); putalltx: a put_all of --batch random keys in a transaction (PutAllTx:\n"
          "its keys lie in many partitions, so it commits across them; ops/s counts keys);\n"
          "an aborted transaction is run again with its first attempt's age and counted\n"
          "apart (\"aborted\"), its latency taken from its first attempt.  With --json\n"
          "(global) prints one JSON object.\n",
          f);
    return rc;
}

static bool num(const char *s, long lo, long hi, long *out)
{
    char *e;
    long v = strtol(s, &e, 10);
    if (!*s || *e || v < lo || v > hi) return false;
    *out = v;
    return true;
}

int cli_bench(cli_globals *g, int argc, char **argv)
{
    static const struct option o[] = {{"op", 1, 0, 'o'},         {"threads", 1, 0, 't'}, {"duration", 1, 0, 'd'},
                                      {"warmup", 1, 0, 'w'},     {"keys", 1, 0, 'k'},    {"value-size", 1, 0, 'v'},
                                      {"batch", 1, 0, 'b'},      {"cache", 1, 0, 'c'},   {"help", 0, 0, 'h'},
                                      {0, 0, 0, 0}};
    long threads = 8, duration = 10, warmup = 2, keys = 100000, vsize = 100, batch = 100;
    const char *opname = "put", *cache = "default";
    optind = 1;
    int ch;
    static const struct { int ch; long lo, hi; } bounds[] = {{'t', 1, 4096}, {'d', 1, 600}, {'w', 0, 60},
                                                            {'k', 1, 10000000}, {'v', 0, 1 << 20}, {'b', 1, 10000}};
    int idx = 0;
    while ((ch = getopt_long(argc, argv, "", o, &idx)) != -1) {
        bool ok = true;
        switch (ch) {
        case 'o': opname = optarg; break;
        case 't': ok = num(optarg, 1, 4096, &threads); break;
        case 'd': ok = num(optarg, 1, 600, &duration); break;
        case 'w': ok = num(optarg, 0, 60, &warmup); break;
        case 'k': ok = num(optarg, 1, 10000000, &keys); break;
        case 'v': ok = num(optarg, 0, 1 << 20, &vsize); break;
        case 'b': ok = num(optarg, 1, 10000, &batch); break;
        case 'c': cache = optarg; break;
        case 'h': return usage(stdout, 0);
        default: return usage(stderr, 2);
        }
        if (!ok) {
            long lo = 0, hi = 0;
            for (size_t i = 0; i < sizeof bounds / sizeof bounds[0]; i++)
                if (bounds[i].ch == ch) lo = bounds[i].lo, hi = bounds[i].hi;
            fprintf(stderr, "lattice bench: --%s wants %ld..%ld, not '%s'\n", o[idx].name, lo, hi, optarg);
            return 2;
        }
    }
    if (optind != argc) return usage(stderr, 2);
    int op = !strcmp(opname, "get") ? OP_GET : !strcmp(opname, "put") ? OP_PUT : !strcmp(opname, "putget") ? OP_PUTGET
             : !strcmp(opname, "putall") ? OP_PUTALL : !strcmp(opname, "puttx") ? OP_PUTTX
             : !strcmp(opname, "getandputtx") ? OP_GETANDPUTTX : !strcmp(opname, "putalltx") ? OP_PUTALLTX : -1;
    if (op < 0) {
        fprintf(stderr, "lattice bench: --op wants get, put, putget, putall, puttx, getandputtx or putalltx\n");
        return 2;
    }
    bench *b = lt_calloc(1, sizeof *b);
    if (!b) return 1;
    b->hist = lt_calloc(HIST_US, sizeof *b->hist);
    b->value = lt_malloc((size_t)vsize + 1);
    if (!b->hist || !b->value) return 1;
    memset(b->value, 'v', (size_t)vsize);
    b->cache = cache;
    b->op = op;
    b->keys = keys;
    b->value_size = (int)vsize;
    b->batch = op == OP_PUTALL || op == OP_PUTALLTX ? (int)batch : 1;
    b->n = cli_attach(g);
    if (!b->n) return 1;
    if (op == OP_GET || op == OP_GETANDPUTTX) {
        if (!g->json) fprintf(stderr, "preloading %ld keys...\n", keys);
        lattice_status st = preload(b);
        if (st != LATTICE_OK) {
            fprintf(stderr, "lattice bench: preload failed: %s\n", lattice_strerror(st));
            lattice_node_stop(b->n);
            return 1;
        }
    }
    worker **ws = lt_calloc((size_t)threads, sizeof *ws);
    for (long i = 0; ws && i < threads; i++) {
        /* ops[batch] (putall), then for putalltx kv[batch] and the keys (64 bytes each) */
        ws[i] = lt_calloc(1, sizeof(worker) + (size_t)b->batch * (sizeof(lattice_op) + sizeof(lattice_kv) + 64));
        if (!ws[i]) return 1;
        ws[i]->b = b;
        ws[i]->rng = 0x9E3779B97F4A7C15ull * (uint64_t)(i + 1);
    }
    atomic_store(&b->active, (uint64_t)threads);
    for (long i = 0; i < threads; i++) submit_next(ws[i]);
    if (warmup) sleep((unsigned)warmup);
    atomic_store(&b->recording, true);
    uint64_t t0 = now_ns(), last = 0;
    json_t *series = json_array();
    for (long s = 1; s <= duration; s++) {
        uint64_t target = t0 + (uint64_t)s * 1000000000u, t = now_ns();
        if (target > t) usleep((useconds_t)((target - t) / 1000));
        uint64_t done = atomic_load(&b->ops_done);
        json_array_append_new(series, json_integer((json_int_t)(done - last)));
        if (!g->json) {
            printf("[%3lds] %10" PRIu64 " ops/s  errors %" PRIu64 "\n", s, done - last, (uint64_t)atomic_load(&b->errors));
            fflush(stdout);
        }
        last = done;
    }
    atomic_store(&b->recording, false);
    double secs = (double)(now_ns() - t0) / 1e9;
    atomic_store(&b->stop, true);
    for (int i = 0; i < 10000 && atomic_load(&b->active) > 0; i++) usleep(1000);
    report(g, b, opname, threads, duration, secs, series);
    fflush(stdout);
    lattice_node_stop(b->n);
    for (long i = 0; i < threads; i++) lt_free(ws[i]);
    lt_free(ws);
    lt_free(b->hist);
    lt_free(b->value);
    lt_free(b);
    return 0;
}
