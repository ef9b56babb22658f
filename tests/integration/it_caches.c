/*
 * Caches on real grids: three latticed servers on loopback, and this test
 * process attached as a client node (and, where a test says so, as one more
 * server node) through the public API - so every operation goes over the
 * data channel exactly as an application's would.
 */
#include <check.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>


#include "cache.pb-c.h"
#include "harness.h"
#include "grid_client.h"
#include "lattice/alloc.h"
#include "lattice/lattice.h"
#include "lattice/ops.h"

static char finder[64];
static it_proc *srv[4];

static it_proc *start_one(const char *name, int port_no, const char *const *extra)
{
    char port[16];
    snprintf(port, sizeof port, "%d", port_no);
    const char *args[32] = {"--port", port, "--port-range", "1", "--ip-finder", finder,
                            "--failure-detection-ms", "1000", "--log-level", "info"};
    int k = 10;
    for (int e = 0; extra && extra[e] && k < 30; e++) args[k++] = extra[e];
    args[k] = NULL;
    it_proc *p = it_latticed(name, args);
    ck_assert_ptr_nonnull(p);
    return p;
}

/* Starts n latticed on consecutive free ports with the given extra flags. */
static int start_grid(int n, const char *const *extra)
{
    int base = it_free_ports(n + 1);
    snprintf(finder, sizeof finder, "127.0.0.1:%d..%d", base, base + n);
    for (int i = 0; i < n; i++) {
        char name[16];
        snprintf(name, sizeof name, "s%d", i);
        srv[i] = start_one(name, base + i, extra);
    }
    return base;
}

static lattice_node *attach(bool client, int port)
{
    lattice_config c;
    lattice_config_init(&c);
    c.client = client;
    c.port = port;
    c.port_range = 1;
    c.failure_detection_ms = 1000;
    c.finders[c.n_finders++] = finder;
    /* A deadline, not an expectation: no test here waits for one to pass,
     * and on a busy machine 192 MiB of put_all may take a while. */
    c.op_timeout_ms = 60000;
    lattice_node *n = NULL;
    ck_assert_int_eq(lattice_node_start(&c, &n), LATTICE_OK);
    ck_assert_int_eq(lattice_node_wait_joined(n, 15000), LATTICE_OK);
    return n;
}


/* The grid is serving cache `cache` once a put through it succeeds. */
typedef struct ready_ctx {
    lattice_node *n;
    const char *cache;
} ready_ctx;

static bool cache_ready(void *ctx)
{
    ready_ctx *r = ctx;
    return lattice_cache_put(r->n, r->cache, "__ready", 7, "1", 1) == LATTICE_OK &&
           lattice_cache_remove(r->n, r->cache, "__ready", 7) == LATTICE_OK;
}

static void wait_ready(lattice_node *n, const char *cache)
{
    ready_ctx r = {n, cache};
    ck_assert_msg(it_wait_for(cache_ready, &r, 20000), "cache %s never served", cache);
}


static void put_range(lattice_node *n, const char *cache, const char *prefix, long count)
{
    enum { B = 500 };
    static char keys[B][48], vals[B][48];
    lattice_kv kv[B];
    for (long i = 0; i < count; i += B) {
        size_t m = 0;
        for (long k = i; k < count && k < i + B; k++, m++) {
            key_of(keys[m], sizeof keys[m], prefix, k);
            snprintf(vals[m], sizeof vals[m], "v%08ld", k);
            kv[m] = (lattice_kv){keys[m], strlen(keys[m]), vals[m], strlen(vals[m]), 0};
        }
        lattice_status st = lattice_cache_put_all(n, cache, kv, m);
        ck_assert_msg(st == LATTICE_OK, "put_all at %ld: %s", i, lattice_strerror(st));
    }
}

static json_t *caches_json(void)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "%s --ip-finder %s --json caches", LATTICE_CLI_PATH, finder);
    FILE *f = popen(cmd, "r");
    if (!f) return NULL;
    static char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    pclose(f);
    return json_loads(buf, 0, NULL);
}

static json_t *partitions_json(const char *cache)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "%s --ip-finder %s --json partitions %s", LATTICE_CLI_PATH, finder, cache);
    FILE *f = popen(cmd, "r");
    if (!f) return NULL;
    static char buf[1 << 21];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    pclose(f);
    return json_loads(buf, 0, NULL);
}

/* Every one of `nodes` servers is primary of some partition of `cache`: its
 * affinity base covers them all.  A cache created while the grid formed
 * starts on the servers there were; with rebalance_mode=none it moves to
 * the full set only while it is still empty, so a test that relies on data
 * on every node waits for this before its first write. */
typedef struct spread_ctx {
    const char *cache;
    long nodes;
} spread_ctx;

static bool spread(void *ctx)
{
    spread_ctx *s = ctx;
    json_t *pj = partitions_json(s->cache);
    long n = pj ? (long)json_integer_value(json_object_get(json_object_get(pj, "balance"), "nodes")) : 0;
    if (pj) json_decref(pj);
    return n == s->nodes;
}

static void wait_spread(const char *cache, long nodes)
{
    spread_ctx s = {cache, nodes};
    ck_assert_msg(it_wait_for(spread, &s, 30000), "cache %s never spread over %ld servers", cache, nodes);
}

static json_t *cache_in(json_t *all, const char *name)
{
    json_t *arr = json_object_get(all, "caches"), *c;
    size_t i;
    json_array_foreach(arr, i, c) if (!strcmp(json_string_value(json_object_get(c, "name")), name)) return c;
    return NULL;
}

/* 100k puts through a client node; every key read back through that client
 * and through a server node started in this process; caches --json counts
 * add up to size x (backups + 1); a replicated cache holds every key on
 * every server. */
START_TEST(put_100k_read_back_everywhere)
{
    it_begin("caches_100k");
    const char *extra[] = {"--cache", "default:backups=1", "--cache", "rep:mode=replicated", NULL};
    int base = start_grid(3, extra);
    lattice_node *c = attach(true, 0);
    wait_grid(c, 3);
    wait_ready(c, "default");
    const long N = 100000;
    put_range(c, "default", "k", N);
    long got = count_present(c, "default", "k", N, NULL);
    printf("100k: %ld of %ld keys read back through the client\n", got, N);
    ck_assert_int_eq(got, N);
    uint64_t size = 0;
    ck_assert_int_eq(lattice_cache_size(c, "default", &size), LATTICE_OK);
    ck_assert_int_eq(size, (uint64_t)N);

    json_t *all = caches_json();
    ck_assert_ptr_nonnull(all);
    json_t *d = cache_in(all, "default");
    ck_assert_ptr_nonnull(d);
    ck_assert_int_eq(json_integer_value(json_object_get(d, "size")), N);
    json_t *nodes = json_object_get(d, "nodes"), *x;
    size_t i;
    long prim = 0, back = 0;
    json_array_foreach(nodes, i, x)
    {
        prim += json_integer_value(json_object_get(x, "primary_entries"));
        back += json_integer_value(json_object_get(x, "backup_entries"));
    }
    ck_assert_int_eq(json_array_size(nodes), 3);
    /* Each node entry names its server by consistent id: the three
     * servers' host:port, each once. */
    bool seen[3] = {false, false, false};
    json_array_foreach(nodes, i, x)
    {
        const char *cid = json_string_value(json_object_get(x, "consistent_id"));
        ck_assert_ptr_nonnull(cid);
        int port = 0;
        ck_assert_int_eq(sscanf(cid, "127.0.0.1:%d", &port), 1);
        ck_assert_msg(port >= base && port < base + 3 && !seen[port - base], "consistent_id %s", cid);
        seen[port - base] = true;
    }
    ck_assert_int_eq(prim, N);
    ck_assert_int_eq(prim + back, N * 2); /* size x (backups + 1) */
    json_decref(all);

    /* Replicated: every server holds every key. */
    wait_ready(c, "rep");
    put_range(c, "rep", "r", 2000);
    all = caches_json();
    json_t *r = cache_in(all, "rep");
    ck_assert_ptr_nonnull(r);
    json_array_foreach(json_object_get(r, "nodes"), i, x)
    {
        long held = json_integer_value(json_object_get(x, "primary_entries")) +
                    json_integer_value(json_object_get(x, "backup_entries"));
        ck_assert_int_eq(held, 2000);
        /* Its rows: each at least its value ("v%08ld", 9 bytes) and a key. */
        ck_assert_int_ge(json_integer_value(json_object_get(x, "bytes")), 2000 * 10);
        ck_assert_int_ge(json_integer_value(json_object_get(x, "pages")), 1);
    }
    json_decref(all);

    /* A server node in this process reads every key back through itself. */
    lattice_node *s = attach(false, base + 3);
    wait_grid(s, 4);
    wait_ready(s, "default");
    got = count_present(s, "default", "k", N, NULL);
    printf("100k: %ld of %ld keys read back through a server node\n", got, N);
    ck_assert_int_eq(got, N);
    lattice_node_stop(s);
    lattice_node_stop(c);
    it_end();
}
END_TEST

/* ---- promise 1: kill -9 under a full_sync backups=1 put load ---- */

typedef struct load {
    lattice_node *n;
    const char *cache;
    atomic_long inflight;
    uint8_t *acked;  /* per key: 1 once acknowledged OK */
    atomic_long n_acked, n_failed;
    atomic_long max_ms; /* longest put (reported, never asserted: no timed assertions) */
} load;

static long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

typedef struct put_ctx {
    load *l;
    long key;
    long start_ms;
} put_ctx;

static void put_done(void *arg, size_t i, const lattice_op_result *r)
{
    (void)i;
    put_ctx *p = arg;
    long took = now_ms() - p->start_ms, prev = atomic_load(&p->l->max_ms);
    while (took > prev && !atomic_compare_exchange_weak(&p->l->max_ms, &prev, took)) {
    }
    if (r->status == LATTICE_OK) {
        p->l->acked[p->key] = 1;
        atomic_fetch_add(&p->l->n_acked, 1);
    } else {
        atomic_fetch_add(&p->l->n_failed, 1);
    }
    atomic_fetch_sub(&p->l->inflight, 1);
    free(p);
}

/* Puts keys [from, to) keeping up to 64 in flight; kills victim (if any)
 * once kill_at keys were submitted. */
static void put_load(load *l, long from, long to, long kill_at, it_proc *victim)
{
    char key[48], val[48];
    for (long k = from; k < to; k++) {
        while (atomic_load(&l->inflight) >= 64) usleep(100);
        if (victim && k == kill_at) {
            it_signal(victim, SIGKILL);
            printf("promise1: kill -9 %s after %ld puts submitted\n", victim->name, k - from);
        }
        key_of(key, sizeof key, "p", k);
        snprintf(val, sizeof val, "v%08ld", k);
        put_ctx *p = malloc(sizeof *p);
        ck_assert_ptr_nonnull(p);
        p->l = l;
        p->key = k;
        p->start_ms = now_ms();
        atomic_fetch_add(&l->inflight, 1);
        lattice_op op = lattice_op_put(l->cache, key, strlen(key), val, strlen(val));
        ck_assert_int_eq(lattice_op_submit(l->n, &op, 1, put_done, p), LATTICE_OK);
    }
    while (atomic_load(&l->inflight) > 0) usleep(1000);
}

/* _i = 1: kill an ordinary server; _i = 0: kill the coordinator (oldest),
 * which also serializes the cache metadata. */
START_TEST(kill9_full_sync_loses_no_acknowledged_write)
{
    it_begin(_i == 0 ? "caches_promise1_coordinator" : "caches_promise1");
    /* rebalance_mode=none: this test checks the grid right after the failure,
     * before any redundancy restore (it_rebalance covers that). */
    const char *extra[] = {"--cache", "default:backups=1,sync=full_sync,rebalance_mode=none", "--cache",
                           "solo:backups=0,rebalance_mode=none", NULL};
    int base = start_grid(3, extra);
    lattice_node *c = attach(true, 0);
    wait_grid(c, 3);
    wait_ready(c, "default");
    wait_ready(c, "solo");
    wait_spread("solo", 3);
    wait_spread("default", 3);
    /* A backups=0 cache with data on every node, for the LOST check below. */
    put_range(c, "solo", "s", 3000);

    const long N = 40000;
    load l = {.n = c, .cache = "default", .acked = calloc(N + 2000, 1)};
    ck_assert_ptr_nonnull(l.acked);
    put_load(&l, 0, N, N / 4, srv[_i]);
    long acked = atomic_load(&l.n_acked);
    long present = count_present(c, "default", "p", N, l.acked);
    printf("promise1: acknowledged %ld, failed %ld, present %ld, missing %ld; longest put %ld ms "
           "(failure detection 1000 ms)\n", acked, atomic_load(&l.n_failed), present, acked - present,
           atomic_load(&l.max_ms));
    ck_assert_int_gt(acked, N / 2);
    ck_assert_int_eq(acked - present, 0);
    /* The survivors serve every partition again: a fresh write everywhere works. */
    long before = atomic_load(&l.n_acked);
    put_load(&l, N, N + 2000, -1, NULL);
    ck_assert_int_eq(atomic_load(&l.n_acked) - before, 2000);

    /* backups=0: keys whose only copy died get PARTITION_LOST, the rest serve. */
    long ok = 0, lost = 0, other = 0;
    for (long k = 0; k < 3000; k++) {
        char key[48];
        key_of(key, sizeof key, "s", k);
        void *v = NULL;
        size_t vl = 0;
        lattice_status st = lattice_cache_get(c, "solo", key, strlen(key), &v, &vl);
        lt_free(v);
        if (st == LATTICE_OK) ok++;
        else if (st == LATTICE_ERR_PARTITION_LOST) lost++;
        else other++;
    }
    printf("solo (backups=0) after the kill: %ld served, %ld lost, %ld other\n", ok, lost, other);
    ck_assert_int_gt(lost, 0);
    ck_assert_int_gt(ok, 0);
    ck_assert_int_eq(other, 0);
    /* The tools say so: solo has LOST partitions; default (backups=1, 2 of 3
     * servers left, no rebalance yet) has under-replicated ones, none lost. */
    json_t *pj = partitions_json("solo");
    ck_assert_ptr_nonnull(pj);
    ck_assert_int_gt(json_integer_value(json_object_get(pj, "lost")), 0);
    json_decref(pj);
    pj = partitions_json("default");
    ck_assert_ptr_nonnull(pj);
    ck_assert_int_eq(json_integer_value(json_object_get(pj, "lost")), 0);
    ck_assert_int_gt(json_integer_value(json_object_get(pj, "under_replicated")), 0);
    json_decref(pj);

    /* The killed server restarts on its address, empty: it must not take its
     * old partitions back (it would serve them without their data) - it
     * holds them MOVING while the backups keep serving every acked key. */
    it_proc *again = start_one("restarted", base + _i, extra);
    ck_assert_ptr_nonnull(again);
    wait_grid(c, 3);
    ck_assert(it_wait_log(again, "cache metadata version", 20000));
    long total = atomic_load(&l.n_acked);
    present = count_present(c, "default", "p", N + 2000, l.acked);
    printf("promise1: after the restart %ld of %ld acknowledged keys present\n", present, total);
    ck_assert_int_eq(present, total);
    lattice_node_stop(c);
    free(l.acked);
    it_end();
}
END_TEST

/* primary_sync acks after the primary applied (a read, served by the primary,
 * sees it at once); full_async acks once sent (the write shows up later). */
START_TEST(primary_sync_and_full_async_as_documented)
{
    it_begin("caches_sync_modes");
    const char *extra[] = {"--cache", "ps:backups=1,sync=primary_sync,read_from_backup=false", "--cache",
                           "fa:backups=1,sync=full_async", NULL};
    start_grid(3, extra);
    lattice_node *c = attach(true, 0);
    wait_grid(c, 3);
    wait_ready(c, "ps");
    wait_ready(c, "fa");
    for (int i = 0; i < 200; i++) {
        char key[32];
        snprintf(key, sizeof key, "ps%d", i);
        ck_assert_int_eq(lattice_cache_put(c, "ps", key, strlen(key), "x", 1), LATTICE_OK);
        void *v = NULL;
        size_t vl = 0;
        ck_assert_int_eq(lattice_cache_get(c, "ps", key, strlen(key), &v, &vl), LATTICE_OK);
        lt_free(v);
    }
    put_range(c, "fa", "a", 2000);
    /* No assertion that the async writes are visible at once; they must arrive. */
    long got = 0;
    for (int tries = 0; tries < 100 && got < 2000; tries++) {
        got = count_present(c, "fa", "a", 2000, NULL);
        if (got < 2000) usleep(50000);
    }
    ck_assert_int_eq(got, 2000);
    /* Both keep backups: counts add up to 2 copies once settled - once the
     * cache's base spans the three servers.  It was created while the grid
     * formed (a base of fewer servers: with one, no backup at all) and the
     * counts are of serving owners only, not of the copies a rebalance is
     * still loading. */
    wait_spread("ps", 3);
    json_t *all = caches_json();
    json_t *ps = cache_in(all, "ps"), *x;
    size_t i;
    long copies = 0;
    json_array_foreach(json_object_get(ps, "nodes"), i, x) copies +=
        json_integer_value(json_object_get(x, "primary_entries")) + json_integer_value(json_object_get(x, "backup_entries"));
    ck_assert_int_eq(copies, 400);
    json_decref(all);
    lattice_node_stop(c);
    it_end();
}
END_TEST

/* A cache created at run time (CLI) is known to a node that joins later;
 * unknown cache, oversized key/value and a full region get clear errors
 * and leave stored data intact; the CLI's get/put/del/cache. */

START_TEST(runtime_cache_cli_and_bad_requests)
{
    it_begin("caches_cli");
    static char out[1 << 20];
    const char *extra[] = {"--region-mb", "4", NULL};
    int base = start_grid(2, extra);
    lattice_node *c = attach(true, 0);
    wait_grid(c, 2);
    wait_ready(c, "default");
    const char *L = LATTICE_CLI_PATH;
    ck_assert_int_eq(it_capture(out, sizeof out, "%s --ip-finder %s cache create rt backups=1 max_key_bytes=16 max_value_bytes=64 rebalance_mode=none", L, finder), 0);
    ck_assert_int_eq(it_capture(out, sizeof out, "%s --ip-finder %s cache create rt backups=1 max_key_bytes=16 max_value_bytes=64 rebalance_mode=none", L, finder), 0);
    ck_assert_int_eq(it_capture(out, sizeof out, "%s --ip-finder %s cache create rt backups=2", L, finder), 1);
    ck_assert_ptr_nonnull(strstr(out, "another config"));
    ck_assert_int_eq(it_capture(out, sizeof out, "%s --ip-finder %s cache create 'bad name'", L, finder), 2);
    ck_assert_int_eq(it_capture(out, sizeof out, "%s --ip-finder %s put rt hello world", L, finder), 0);
    ck_assert_int_eq(it_capture(out, sizeof out, "%s --ip-finder %s get rt hello", L, finder), 0);
    ck_assert_str_eq(out, "world\n");
    ck_assert_int_eq(it_capture(out, sizeof out, "%s --ip-finder %s get nosuch hello", L, finder), 1);
    ck_assert_ptr_nonnull(strstr(out, "no cache named 'nosuch'"));
    ck_assert_int_eq(it_capture(out, sizeof out, "%s --ip-finder %s put rt a-key-longer-than-16 v", L, finder), 1);
    ck_assert_ptr_nonnull(strstr(out, "lattice put:"));
    ck_assert_int_eq(it_capture(out, sizeof out, "%s get --help", L), 0);
    ck_assert_int_eq(it_capture(out, sizeof out, "%s put rt onlykey", L), 2);

    /* API: bad requests get their own errors; the stored value is unharmed. */
    char big[100];
    memset(big, 'b', sizeof big);
    ck_assert_int_eq(lattice_cache_put(c, "rt", "hello", 5, big, sizeof big), LATTICE_ERR_TOO_LARGE);
    ck_assert_int_eq(lattice_cache_put(c, "rt", "", 0, "v", 1), LATTICE_ERR_INVAL);
    ck_assert_int_eq(lattice_cache_put(c, "none", "k", 1, "v", 1), LATTICE_ERR_NO_CACHE);
    void *v = NULL;
    size_t vl = 0;
    ck_assert_int_eq(lattice_cache_get(c, "rt", "hello", 5, &v, &vl), LATTICE_OK);
    ck_assert_int_eq(vl, 5);
    ck_assert_int_eq(memcmp(v, "world", 5), 0);
    lt_free(v);
    /* Conditional forms. */
    ck_assert_int_eq(lattice_cache_put_if_absent(c, "rt", "hello", 5, "x", 1), LATTICE_ERR_EXISTS);
    ck_assert_int_eq(lattice_cache_replace(c, "rt", "absent", 6, "x", 1), LATTICE_ERR_NOT_FOUND);
    int64_t cnt = 0;
    ck_assert_int_eq(lattice_cache_increment(c, "rt", "ctr", 3, 5, &cnt), LATTICE_OK);
    ck_assert_int_eq(lattice_cache_increment(c, "rt", "ctr", 3, -2, &cnt), LATTICE_OK);
    ck_assert_int_eq(cnt, 3);
    ck_assert_int_eq(lattice_cache_increment(c, "rt", "hello", 5, 1, &cnt), LATTICE_ERR_INVAL);
    ck_assert_int_eq(lattice_cache_get_and_put(c, "rt", "hello", 5, "there", 5, &v, &vl), LATTICE_OK);
    ck_assert_int_eq(vl, 5);
    ck_assert_int_eq(memcmp(v, "world", 5), 0);
    lt_free(v);

    /* A full region (4 MiB per server): REGION_FULL, earlier keys intact. */
    static char blob[60000];
    memset(blob, 'z', sizeof blob);
    lattice_status st = LATTICE_OK;
    int stored = 0;
    for (int i = 0; i < 400 && st == LATTICE_OK; i++) {
        char key[32];
        snprintf(key, sizeof key, "big%d", i);
        st = lattice_cache_put(c, "default", key, strlen(key), blob, sizeof blob);
        if (st == LATTICE_OK) stored++;
    }
    printf("region: %d blobs of 60000 bytes stored, then %s\n", stored, lattice_strerror(st));
    ck_assert_int_eq(st, LATTICE_ERR_REGION_FULL);
    for (int i = 0; i < stored; i++) {
        char key[32];
        snprintf(key, sizeof key, "big%d", i);
        ck_assert_int_eq(lattice_cache_get(c, "default", key, strlen(key), &v, &vl), LATTICE_OK);
        ck_assert_int_eq(vl, sizeof blob);
        lt_free(v);
    }

    /* A server joining later knows the run-time cache and serves through it. */
    lattice_node *late = attach(false, base + 2);
    wait_grid(late, 3);
    wait_ready(late, "rt");
    ck_assert_int_eq(lattice_cache_get(late, "rt", "hello", 5, &v, &vl), LATTICE_OK);
    lt_free(v);
    lattice_partitions_info *pi = NULL;
    ck_assert_int_eq(lattice_cache_partitions(late, "rt", &pi), LATTICE_OK);
    ck_assert_int_eq(pi->partitions, 1024);
    /* rt held data when it joined and has rebalance_mode=none, so no partition
     * moved to it: it holds its ideal partitions MOVING, never as a serving owner. */
    char late_id[64];
    lattice_node_id(late, late_id, sizeof late_id);
    uint32_t moving = 0;
    for (uint32_t p = 0; p < pi->partitions; p++)
        for (uint32_t i = 0; i < pi->n_owners[p]; i++) {
            lattice_partition_owner *o = &pi->owners[(size_t)p * pi->max_owners + i];
            if (strcmp(o->node, late_id) != 0) continue;
            ck_assert_str_eq(o->state, "MOVING");
            ck_assert_int_eq(o->primary, 0);
            moving++;
        }
    ck_assert_uint_gt(moving, 0);
    lattice_partitions_info_free(pi);
    /* Writes reach MOVING copies: new keys land on the joiner too. */
    for (int i = 0; i < 300; i++) {
        char key[16];
        snprintf(key, sizeof key, "m%d", i);
        ck_assert_int_eq(lattice_cache_put(c, "rt", key, strlen(key), "x", 1), LATTICE_OK);
    }
    lattice_cache_info *ci = NULL;
    size_t nci = 0;
    ck_assert_int_eq(lattice_caches_info(c, &ci, &nci), LATTICE_OK);
    uint64_t moving_entries = 0;
    for (size_t i = 0; i < nci; i++)
        for (size_t k = 0; !strcmp(ci[i].name, "rt") && k < ci[i].n_nodes; k++)
            if (!strcmp(ci[i].nodes[k].id, late_id)) moving_entries = ci[i].nodes[k].moving_entries;
    lattice_caches_info_free(ci, nci);
    printf("joiner: %u partitions MOVING, %llu entries written to them\n", moving, (unsigned long long)moving_entries);
    ck_assert_uint_gt(moving_entries, 0);

    ck_assert_int_eq(it_capture(out, sizeof out, "%s --ip-finder %s del rt hello", L, finder), 0);
    ck_assert_int_eq(it_capture(out, sizeof out, "%s --ip-finder %s del rt hello", L, finder), 1);
    ck_assert_int_eq(it_capture(out, sizeof out, "%s --ip-finder %s --json partitions rt", L, finder), 0);
    json_t *pj = json_loads(out, 0, NULL);
    ck_assert_ptr_nonnull(pj);
    ck_assert_int_eq(json_array_size(json_object_get(pj, "partitions")), 1024);
    json_decref(pj);
    ck_assert_int_eq(it_capture(out, sizeof out, "%s --ip-finder %s cache destroy rt", L, finder), 0);
    ck_assert_int_eq(it_capture(out, sizeof out, "%s --ip-finder %s get rt ctr", L, finder), 1);
    ck_assert_ptr_nonnull(strstr(out, "no cache named 'rt'"));
    lattice_node_stop(late);
    lattice_node_stop(c);
    it_end();
}
END_TEST

/* The node closed fd (bad input refused): end of stream, well within a bound. */
static void closed_by_node(int fd, int within_ms)
{
    uint8_t rb[512];
    ck_assert_int_eq(it_data_recv(fd, rb, sizeof rb, within_ms), 0);
    close(fd);
}

/* Garbage on a server's data port - not a frame, not protobuf, truncated,
 * oversized or empty lengths, unknown fields, a wrong protocol number, a
 * MAC where the grid has none, half a frame and silence, a flood of
 * connections - closes that connection with a logged drop; the node keeps
 * serving and answers a well-formed request right after (promise 3). */
static bool some_refused(void *ctx)
{
    (void)ctx;
    return it_log_has(srv[0], "refused data connections") || it_log_has(srv[1], "refused data connections");
}

START_TEST(bad_frames_on_the_data_port_are_dropped)
{
    it_begin("caches_bad_frames");
    start_grid(2, NULL);
    lattice_node *c = attach(true, 0);
    wait_grid(c, 2);
    wait_ready(c, "default");
    ck_assert_int_eq(lattice_cache_put(c, NULL, "keep", 4, "me", 2), LATTICE_OK);
    lattice_topology *t = lattice_node_topology(c);
    char addr[160] = "";
    for (size_t i = 0; i < lattice_topology_size(t) && !addr[0]; i++) {
        const char *a = lattice_member_attr(lattice_topology_member(t, i), "data_addr");
        if (a) snprintf(addr, sizeof addr, "%s", a);
    }
    lattice_topology_release(t);
    ck_assert(addr[0]);
    /* A well-formed batch to reuse: one GET. */
    Latdata__Req req = LATDATA__REQ__INIT, *reqs[1] = {&req};
    req.id = 7;
    req.kind = 1;
    req.cache = "default";
    req.key.data = (uint8_t *)"keep";
    req.key.len = 4;
    Latdata__Batch b = LATDATA__BATCH__INIT;
    b.proto = 1;
    b.n_reqs = 1;
    b.reqs = reqs;
    uint8_t good[256];
    size_t gl = latdata__batch__pack(&b, good);
    b.proto = 99;
    uint8_t wrong_proto[256];
    size_t wl = latdata__batch__pack(&b, wrong_proto);
    uint8_t unknown[300];
    memcpy(unknown, good, gl);
    unknown[gl] = 0xf8; /* field 31 varint */
    unknown[gl + 1] = 0x01;
    unknown[gl + 2] = 0x01;
    const char junk[] = "\xff\xff\xff\xff\x0f garbage";
    int fd;
    /* Not a frame at all (raw bytes, an HTTP request). */
    ck_assert_int_ge(fd = it_data_connect(addr), 0);
    ck_assert_int_eq(write(fd, junk, sizeof junk), (ssize_t)sizeof junk);
    closed_by_node(fd, 10000);
    ck_assert(it_wait_log(srv[0], "dropped bytes that are not a data-channel frame", 10000) ||
              it_wait_log(srv[1], "dropped bytes that are not a data-channel frame", 1000));
    /* Frames whose message the frame layer refuses. */
    const struct { const void *msg; size_t len; } refused[] = {
        {junk, sizeof junk}, {good, gl / 2}, {wrong_proto, wl}, {unknown, gl + 3}};
    for (size_t k = 0; k < sizeof refused / sizeof refused[0]; k++) {
        ck_assert_int_ge(fd = it_data_connect(addr), 0);
        ck_assert(it_data_send(fd, refused[k].msg, refused[k].len, NULL, 0));
        closed_by_node(fd, 10000);
    }
    /* A MAC where the grid has no secret. */
    ck_assert_int_ge(fd = it_data_connect(addr), 0);
    ck_assert(it_data_send(fd, good, gl, good, 32));
    closed_by_node(fd, 10000);
    /* Lengths: zero, and over the cap (only the header is sent: refused on it). */
    ck_assert_int_ge(fd = it_data_connect(addr), 0);
    ck_assert(it_data_send(fd, "", 0, NULL, 0));
    closed_by_node(fd, 10000);
    const uint8_t over[8] = {'L', 'T', 1, 0, 0xff, 0xff, 0xff, 0xf0};
    ck_assert_int_ge(fd = it_data_connect(addr), 0);
    ck_assert_int_eq(write(fd, over, sizeof over), (ssize_t)sizeof over);
    closed_by_node(fd, 10000);
    /* Half a frame and silence: closed once it stalled (a bound well past
     * the 10 s a new connection has to deliver its first frame). */
    ck_assert_int_ge(fd = it_data_connect(addr), 0);
    const uint8_t half[8] = {'L', 'T', 1, 0, 0, 0, 0, 100};
    ck_assert_int_eq(write(fd, half, sizeof half), (ssize_t)sizeof half);
    ck_assert_int_eq(write(fd, good, 10), 10);
    closed_by_node(fd, 60000);
    uint8_t rb[512];
    long rn = 0;
    /* A flood: more connections than a node accepts at once, each silent,
     * all held open until the node said it refused some (closing them as
     * they were opened let a slow node - beside a build - read the first
     * ones' EOFs before it accepted the last, and never reach its limit). */
    enum { FLOOD = 1100 };
    static int flood[FLOOD];
    for (int i = 0; i < FLOOD; i++) flood[i] = it_data_connect(addr);
    ck_assert_msg(it_wait_for(some_refused, NULL, 30000), "no node logged refused data connections");
    /* ... while it still answers on a fresh one (the well-formed request
     * proves the port reads what we send, and only it got an answer). */
    for (int k = 0; k < FLOOD; k++) {
        if (flood[k] >= 0) close(flood[k]);
        if (k == FLOOD / 2) {
            ck_assert_int_ge(fd = it_data_connect(addr), 0);
            ck_assert(it_data_send(fd, good, gl, NULL, 0));
            long n = it_data_recv(fd, rb, sizeof rb, 10000);
            if (n <= 0) { /* refused while full: the closes since made room */
                close(fd);
                ck_assert_int_ge(fd = it_data_connect(addr), 0);
                ck_assert(it_data_send(fd, good, gl, NULL, 0));
                n = it_data_recv(fd, rb, sizeof rb, 10000);
            }
            ck_assert_int_gt(n, 0);
            rn = n;
            close(fd);
        }
    }
    Latdata__Batch *rbatch = latdata__batch__unpack(NULL, (size_t)rn, rb);
    ck_assert_ptr_nonnull(rbatch);
    ck_assert_uint_eq(rbatch->n_resps, 1);
    ck_assert_uint_eq(rbatch->resps[0]->id, 7);
    /* (Its status is the node's verdict on a request without a routing
     * view - INVAL; that it is answered at all is what counts here.  The
     * grid serving right is checked through the client below.) */
    latdata__batch__free_unpacked(rbatch, NULL);
    void *v = NULL;
    size_t vl = 0;
    ck_assert_int_eq(lattice_cache_get(c, NULL, "keep", 4, &v, &vl), LATTICE_OK);
    ck_assert_int_eq(vl, 2);
    lt_free(v);
    ck_assert_int_eq(lattice_cache_put(c, NULL, "after", 5, "ok", 2), LATTICE_OK);

    /* Big values: 24 x 8 MiB in one put_all is ~96 MiB per server - more than
     * a data frame may hold (64 MiB); the sender splits it, nothing is dropped. */
    ck_assert_int_eq(lattice_cache_create(c, "big:backups=0,max_value_bytes=8388608"), LATTICE_OK);
    wait_ready(c, "big");
    enum { NB = 24 };
    size_t vsz = 8u << 20;
    char *big = malloc(vsz);
    ck_assert_ptr_nonnull(big);
    memset(big, 'B', vsz);
    static char bkeys[NB][16];
    lattice_kv kv[NB];
    for (int i = 0; i < NB; i++) {
        snprintf(bkeys[i], sizeof bkeys[i], "big%d", i);
        big[0] = (char)('a' + i);
        kv[i] = (lattice_kv){bkeys[i], strlen(bkeys[i]), big, vsz, 0};
    }
    ck_assert_int_eq(lattice_cache_put_all(c, "big", kv, NB), LATTICE_OK);
    for (int i = 0; i < NB; i++) kv[i].value = NULL;
    ck_assert_int_eq(lattice_cache_get_all(c, "big", kv, NB), LATTICE_OK);
    for (int i = 0; i < NB; i++) {
        ck_assert_int_eq(kv[i].status, LATTICE_OK);
        ck_assert_uint_eq(kv[i].value_len, vsz);
        lt_free(kv[i].value);
    }
    free(big);
    lattice_node_stop(c);
    it_end();
}
END_TEST

/* Entries the grid evicted as primaries, summed over the nodes (`lattice caches`). */
static long grid_evictions(const char *cache)
{
    char out[1 << 16];
    int rc = it_capture(out, sizeof out, "%s --ip-finder %s --json caches", LATTICE_CLI_PATH, finder);
    json_t *j = json_loads(out, 0, NULL);
    ck_assert_msg(rc == 0 && j, "caches: rc %d: %.300s", rc, out);
    long sum = -1;
    json_t *cs = json_object_get(j, "caches");
    for (size_t i = 0; i < json_array_size(cs); i++) {
        json_t *c = json_array_get(cs, i);
        if (strcmp(json_string_value(json_object_get(c, "name")), cache) != 0) continue;
        json_t *nodes = json_object_get(c, "nodes");
        sum = 0;
        for (size_t k = 0; k < json_array_size(nodes); k++)
            sum += (long)json_integer_value(json_object_get(json_array_get(nodes, k), "evictions"));
    }
    json_decref(j);
    ck_assert_int_ge(sum, 0);
    return sum;
}

/* Fills a 3-node grid of 4 MiB regions with 3,000 values of 3,000 bytes
 * (18 MB with the backups, 12 MiB of regions) under the given policy.
 * Either way `lattice verify` finds the copies equal afterwards, every
 * acknowledged write reads back unless it was evicted, no refused write
 * left anything behind, and no read returns another key's value.
 *   reject: writes a copy has no room for fail with REGION_FULL on every
 *           copy (the primary undoes its own change).  Before, a backup
 *           without room logged it and the primary acknowledged anyway.
 *   evict:  each partition's primary evicts and removes the entries on
 *           every copy; the keys missing among the acknowledged ones are
 *           exactly the evictions the nodes counted (less any refused key
 *           evicted before its undo).  The RESP endpoint names the policy
 *           as Redis's maxmemory-policy. */
static void fill_past_regions(bool evict)
{
    it_begin(evict ? "caches_evict" : "caches_full");
    int base = it_free_ports(5);
    snprintf(finder, sizeof finder, "127.0.0.1:%d..%d", base, base + 3);
    for (int i = 0; i < 3; i++) {
        char name[16], resp[16];
        snprintf(name, sizeof name, "s%d", i);
        snprintf(resp, sizeof resp, "%d", base + 4);
        const char *extra[] = {"--region-mb", "4", "--region-policy", evict ? "evict" : "reject",
                               i == 0 ? "--resp-port" : NULL, resp, NULL};
        srv[i] = start_one(name, base + i, extra);
    }
    lattice_node *c = attach(true, 0);
    wait_grid(c, 3);
    wait_ready(c, "default");
    char out[1 << 16];
    ck_assert_int_eq(it_capture(out, sizeof out, "redis-cli -p %d CONFIG GET maxmemory*", base + 4), 0);
    ck_assert_msg(strstr(out, evict ? "allkeys-lru" : "noeviction") && strstr(out, "4194304"), "%s", out);
    enum { N = 3000, VSZ = 3000 };
    static uint8_t acked[N];
    static char val[VSZ + 1];
    long n_acked = 0, n_full = 0, missing = 0;
    for (long i = 0; i < N; i++) {
        char key[48];
        key_of(key, sizeof key, "full", i);
        memset(val, 'x', VSZ);
        int h = snprintf(val, sizeof val, "v%08ld", i);
        val[h] = 'x';
        lattice_status st = lattice_cache_put(c, "default", key, strlen(key), val, VSZ);
        ck_assert_msg(st == LATTICE_OK || st == LATTICE_ERR_REGION_FULL, "put %ld: %s", i, lattice_strerror(st));
        acked[i] = st == LATTICE_OK;
        n_acked += acked[i];
        n_full += !acked[i];
    }
    ck_assert_int_gt(n_acked, 0);
    int rc = it_capture(out, sizeof out, "%s --ip-finder %s --json verify default", LATTICE_CLI_PATH, finder);
    json_t *j = json_loads(out, 0, NULL);
    ck_assert_msg(rc == 0 && j, "verify: rc %d: %.300s", rc, out);
    ck_assert_msg(json_array_size(json_object_get(j, "conflicts")) == 0, "verify: %.300s", out);
    json_decref(j);
    for (long i = 0; i < N; i++) {
        char key[48];
        key_of(key, sizeof key, "full", i);
        void *v = NULL;
        size_t vl = 0;
        lattice_status st = lattice_cache_get(c, "default", key, strlen(key), &v, &vl);
        ck_assert_msg(st == LATTICE_OK || st == LATTICE_ERR_NOT_FOUND, "%s: %s", key, lattice_strerror(st));
        if (st == LATTICE_OK) {
            char want[16];
            int h = snprintf(want, sizeof want, "v%08ld", i);
            ck_assert_msg(acked[i] && vl == VSZ && memcmp(v, want, (size_t)h) == 0, "%s reads a value never acknowledged",
                          key);
        } else if (acked[i]) {
            missing++;
        }
        lt_free(v);
    }
    long evictions = grid_evictions("default");
    printf("full regions (%s): %ld of %d writes acknowledged, %ld refused (REGION_FULL), %ld evicted, %ld acknowledged "
           "and missing\n",
           evict ? "evict" : "reject", n_acked, N, n_full, evictions, missing);
    if (evict) {
        ck_assert_int_gt(evictions, 0);
        ck_assert_int_le(missing, evictions);
        ck_assert_int_le(evictions, missing + n_full);
        /* Room is made on the primaries: far more is acknowledged than the
         * regions could hold at once. */
        ck_assert_int_gt(n_acked, (12L << 20) / (2 * VSZ));
    } else {
        ck_assert_int_eq(evictions, 0);
        ck_assert_int_eq(missing, 0);
        ck_assert_int_gt(n_full, 0);
    }
    lattice_node_stop(c);
    it_end();
}

START_TEST(full_regions_refuse_without_losing_acknowledged_writes)
{
    fill_past_regions(false);
}
END_TEST

START_TEST(full_regions_evict_on_primaries_and_keep_copies_equal)
{
    fill_past_regions(true);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("caches");
    TCase *tc = tcase_create("grid");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, put_100k_read_back_everywhere);
    tcase_add_loop_test(tc, kill9_full_sync_loses_no_acknowledged_write, 0, 2);
    tcase_add_test(tc, primary_sync_and_full_async_as_documented);
    tcase_add_test(tc, runtime_cache_cli_and_bad_requests);
    tcase_add_test(tc, bad_frames_on_the_data_port_are_dropped);
    tcase_add_test(tc, full_regions_refuse_without_losing_acknowledged_writes);
    tcase_add_test(tc, full_regions_evict_on_primaries_and_keep_copies_equal);
    suite_add_tcase(s, tc);
    return it_run_suite(s);
}
