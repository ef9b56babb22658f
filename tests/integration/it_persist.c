/*
 * Persistence (--data-dir) with real latticed processes: kill -9 under a
 * load and restart, checked from the recorded history of every write (each
 * key has one writer, so a key may hold its last acknowledged value, or the
 * value of the one write in flight when the node died, and nothing else); a
 * truncated and a corrupted log; a full disk (a small tmpfs the test mounts);
 * three nodes killed at once and restarted.
 */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "resp_grid.h"

#define WRITERS 4
#define KEYS_PER_WRITER 200
#define MAX_OPS 60000
#define MAX_MS 20000
#define SERVE_MS 60000 /* a node acknowledges writes again within this */

/* Per key: the last acknowledged state and the one in flight. */
typedef struct key_hist {
    char acked[32];   /* "" = absent (never written, or removed) */
    char pending[32]; /* the write sent and not answered; "-" a remove, "" none */
} key_hist;

typedef struct writer {
    int node, id;
    key_hist h[KEYS_PER_WRITER];
    long acked_ops;
} writer;

static atomic_bool stop_flag;
static char pad[300];

static uint64_t lt_mono_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_nsec / 1000000;
}

static void *write_loop(void *arg)
{
    writer *w = arg;
    redisContext *c = try_conn(w->node);
    if (!c) return NULL;
    uint64_t t0 = lt_mono_ms();
    unsigned seed = (unsigned)w->id * 7919u + 1;
    for (long op = 0; op < MAX_OPS && lt_mono_ms() - t0 < MAX_MS && !atomic_load(&stop_flag); op++) {
        int k = (int)(rand_r(&seed) % KEYS_PER_WRITER);
        key_hist *h = &w->h[k];
        char key[32];
        snprintf(key, sizeof key, "w%d:k%d", w->id, k);
        bool del = rand_r(&seed) % 10 == 0;
        redisReply *r;
        if (del) {
            snprintf(h->pending, sizeof h->pending, "-");
            r = redisCommand(c, "DEL %s", key);
        } else {
            snprintf(h->pending, sizeof h->pending, "v%d.%ld.%u", w->id, op, seed % 1000);
            r = redisCommand(c, "SET %s %s:%s", key, h->pending, pad); /* ~400 bytes a record: checkpoints happen */
        }
        if (!r) break; /* the node died: this write stays in flight */
        bool ok = r->type != REDIS_REPLY_ERROR;
        freeReplyObject(r);
        if (!ok) break;
        if (del) h->acked[0] = 0;
        else memcpy(h->acked, h->pending, sizeof h->acked);
        h->pending[0] = 0;
        w->acked_ops++;
    }
    redisFree(c);
    return NULL;
}

/* Starts the writers; the histories carry over from an earlier run (the keys
 * keep what it left). */
static void run_writers(writer *w, pthread_t *th, int node)
{
    atomic_store(&stop_flag, false);
    memset(pad, 'p', sizeof pad - 1);
    for (int i = 0; i < WRITERS; i++) {
        w[i].acked_ops = 0;
        w[i].node = node;
        w[i].id = i;
        pthread_create(&th[i], NULL, write_loop, &w[i]);
    }
}

static long acked_total(const writer *w)
{
    long n = 0;
    for (int i = 0; i < WRITERS; i++) n += __atomic_load_n(&w[i].acked_ops, __ATOMIC_RELAXED);
    return n;
}

/* Every key against its history, read through node `node`. */
static void check_history(const writer *w, int node)
{
    redisContext *c = conn_to(node);
    long checked = 0;
    for (int i = 0; i < WRITERS; i++)
        for (int k = 0; k < KEYS_PER_WRITER; k++) {
            const key_hist *h = &w[i].h[k];
            char key[32];
            snprintf(key, sizeof key, "w%d:k%d", i, k);
            redisReply *r = cmd(c, "GET %s", key);
            ck_assert_msg(r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_NIL, "GET %s: %s", key,
                          r->type == REDIS_REPLY_ERROR ? r->str : "?");
            char got[64] = "";
            if (r->type == REDIS_REPLY_STRING) { /* "ID:PAD" */
                char *colon = strchr(r->str, ':');
                ck_assert_msg(colon && !strcmp(colon + 1, pad), "%s holds a damaged value", key);
                snprintf(got, sizeof got, "%.*s", (int)(colon - r->str), r->str);
            }
            bool ok = !strcmp(got, h->acked) || (h->pending[0] == '-' && !got[0]) ||
                      (h->pending[0] && h->pending[0] != '-' && !strcmp(got, h->pending));
            ck_assert_msg(ok, "%s holds '%s': acknowledged '%s', in flight '%s'", key, got, h->acked, h->pending);
            freeReplyObject(r);
            checked++;
        }
    redisFree(c);
    ck_assert_int_eq(checked, WRITERS * KEYS_PER_WRITER);
}

static char data_dir[4][512];

static const char **node_args4(int i, const char *mode, const char *extra1, const char *extra2, const char *extra3,
                               const char *extra4)
{
    static const char *a[4][16];
    snprintf(data_dir[i], sizeof data_dir[i], "%s/data%d", it_dir(), i);
    int k = 0;
    a[i][k++] = "--data-dir";
    a[i][k++] = data_dir[i];
    a[i][k++] = "--wal-fsync";
    a[i][k++] = mode;
    if (extra1) a[i][k++] = extra1;
    if (extra2) a[i][k++] = extra2;
    if (extra3) a[i][k++] = extra3;
    if (extra4) a[i][k++] = extra4;
    a[i][k] = NULL;
    return a[i];
}

static const char **node_args(int i, const char *mode, const char *extra1, const char *extra2)
{
    return node_args4(i, mode, extra1, extra2, NULL, NULL);
}

static bool enough_acked(void *ctx) { return acked_total(ctx) >= 3000; }

static void kill9_under_load(const char *mode)
{
    /* Checkpoints every MiB: the restart reads a checkpoint and a log tail. */
    const char *extra[] = {"--data-dir", NULL, "--wal-fsync", mode, "--checkpoint-mb", "1", NULL};
    start_grid(0, 1, NULL);
    extra[1] = node_args(0, mode, NULL, NULL)[1];
    start_node(0, extra);
    wait_serving(0, SERVE_MS);
    static writer w[WRITERS];
    pthread_t th[WRITERS];
    for (int round = 0; round < 2; round++) {
        run_writers(w, th, 0);
        ck_assert(it_wait_for(enough_acked, w, 60000));
        /* The log's thread sent replies its fsync freed itself (the data
         * thread idle in its poll): the path the history checks below. */
        if (round == 0) ck_assert_int_gt(info_stat(0, "lattice_wal_log_releases:"), 0);
        it_signal(srv[0], SIGKILL);
        ck_assert(it_wait_exit(srv[0], 10000));
        for (int i = 0; i < WRITERS; i++) pthread_join(th[i], NULL);
        start_node(0, extra);
        wait_serving(0, SERVE_MS);
        ck_assert(it_log_has(srv[0], "entries restored from"));
        check_history(w, 0);
    }
    it_signal(srv[0], SIGTERM);
    ck_assert(it_wait_exit(srv[0], 20000));
}

START_TEST(kill9_under_load_always)
{
    it_begin("persist_kill9_always");
    kill9_under_load("always");
    it_end();
}
END_TEST

START_TEST(kill9_under_load_group)
{
    it_begin("persist_kill9_group");
    kill9_under_load("group");
    it_end();
}
END_TEST

/* The first segment of a data dir (the one the first run wrote). */
static void first_segment(const char *dir, char *out, size_t cap)
{
    char buf[400];
    ck_assert_int_eq(it_capture_stdout(buf, sizeof buf, "ls %s | grep '^wal-' | sort | head -1", dir), 0);
    buf[strcspn(buf, "\n")] = 0;
    ck_assert(buf[0]);
    snprintf(out, cap, "%s/%s", dir, buf);
}

/* Where a segment's records end: the writer zeroes room ahead of them, and
 * a record's last byte (here the end of "value-N") is never zero. */
static off_t data_end(const char *path)
{
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    off_t end = 0, at = 0;
    int ch;
    while ((ch = fgetc(f)) != EOF) {
        at++;
        if (ch) end = at;
    }
    fclose(f);
    return end;
}

/* Writes k0..k(n-1) one after the other (each acknowledged before the next). */
static void write_seq(int node, int n)
{
    redisContext *c = conn_to(node);
    for (int i = 0; i < n; i++) {
        redisReply *r = cmd(c, "SET seq:%d value-%d", i, i);
        ck_assert_int_eq(r->type, REDIS_REPLY_STATUS);
        freeReplyObject(r);
    }
    redisFree(c);
}

/* The keys present form a prefix seq:0..seq:(m-1); returns m. */
static int prefix_len(int node, int n)
{
    redisContext *c = conn_to(node);
    int m = 0;
    bool gap = false;
    for (int i = 0; i < n; i++) {
        redisReply *r = cmd(c, "GET seq:%d", i);
        bool there = r->type == REDIS_REPLY_STRING;
        if (there) {
            char want[32];
            snprintf(want, sizeof want, "value-%d", i);
            ck_assert_str_eq(r->str, want);
            ck_assert_msg(!gap, "seq:%d is there after a missing key: not a prefix", i);
            m++;
        } else {
            gap = true;
        }
        freeReplyObject(r);
    }
    redisFree(c);
    return m;
}

START_TEST(truncated_and_corrupted_log)
{
    it_begin("persist_torn_log");
    start_grid(0, 1, NULL);
    start_node(0, node_args(0, "always", NULL, NULL));
    wait_serving(0, SERVE_MS);
    write_seq(0, 300);
    it_signal(srv[0], SIGKILL);
    ck_assert(it_wait_exit(srv[0], 10000));
    char seg[1024];
    first_segment(data_dir[0], seg, sizeof seg);
    off_t end = data_end(seg);
    /* Cut inside the last record: the node starts and has all but that one. */
    ck_assert_int_eq(truncate(seg, end - 7), 0);
    start_node(0, node_args(0, "always", NULL, NULL));
    wait_serving(0, SERVE_MS);
    ck_assert(it_log_has(srv[0], "the log ends at byte"));
    int m = prefix_len(0, 300);
    ck_assert_int_eq(m, 299);
    it_signal(srv[0], SIGKILL);
    ck_assert(it_wait_exit(srv[0], 10000));
    /* A flipped byte in the middle: the log ends before it, the node serves
     * what came before (a prefix), never a damaged value. */
    first_segment(data_dir[0], seg, sizeof seg); /* the restart wrote on in a new one */
    end = data_end(seg);
    FILE *f = fopen(seg, "r+b");
    ck_assert_ptr_nonnull(f);
    fseek(f, end / 2, SEEK_SET);
    int ch = fgetc(f);
    fseek(f, end / 2, SEEK_SET);
    fputc(ch ^ 0x5a, f);
    fclose(f);
    it_proc *before = srv[0];
    start_node(0, node_args(0, "always", NULL, NULL));
    ck_assert_ptr_ne(before, srv[0]);
    wait_serving(0, SERVE_MS);
    m = prefix_len(0, 300);
    ck_assert_int_gt(m, 0);
    ck_assert_int_lt(m, 299);
    ck_assert(it_log_has(srv[0], "the log ends at byte"));
    it_signal(srv[0], SIGTERM);
    ck_assert(it_wait_exit(srv[0], 20000));
    it_end();
}
END_TEST

START_TEST(full_disk_refuses_writes_keeps_data)
{
    it_begin("persist_full_disk");
    char mnt[512];
    snprintf(mnt, sizeof mnt, "%s/small", it_dir());
    mkdir(mnt, 0755);
    if (mount("tmpfs", mnt, "tmpfs", 0, "size=4m") != 0) {
        fprintf(stderr, "full_disk: cannot mount a tmpfs (%s): skipped\n", strerror(errno));
        it_end();
        return;
    }
    char dd[600], filler[640];
    snprintf(dd, sizeof dd, "%s/data", mnt);
    snprintf(filler, sizeof filler, "%s/filler", mnt);
    /* Fill all but ~1 MiB: the log gets that. */
    ck_assert_int_eq(it_sh("dd if=/dev/zero of=%s bs=1M count=3 status=none", filler), 0);
    const char *args[] = {"--data-dir", dd, "--wal-fsync", "always", NULL};
    start_grid(0, 1, NULL);
    start_node(0, args);
    wait_serving(0, SERVE_MS);
    redisContext *c = conn_to(0);
    static char val[16384];
    memset(val, 'x', sizeof val - 1);
    int acked = 0;
    bool refused = false;
    for (int i = 0; i < 400 && !refused; i++) {
        redisReply *r = cmd(c, "SET big:%d %s", i, val);
        if (r->type == REDIS_REPLY_ERROR) {
            ck_assert_msg(strstr(r->str, "disk full") && strstr(r->str, "data directory"), "error: %s", r->str);
            refused = true;
        } else {
            ck_assert_int_eq(r->type, REDIS_REPLY_STATUS);
            acked++;
        }
        freeReplyObject(r);
    }
    ck_assert_msg(refused, "a full disk refuses writes");
    ck_assert_int_gt(acked, 10);
    ck_assert(it_log_has(srv[0], "No space left on device"));
    /* Writes stay refused, reads are served, nothing acknowledged is lost. */
    redisReply *r = cmd(c, "SET another 1");
    ck_assert_int_eq(r->type, REDIS_REPLY_ERROR);
    freeReplyObject(r);
    for (int i = 0; i < acked; i++) {
        r = cmd(c, "STRLEN big:%d", i);
        ck_assert_int_eq(r->integer, (long long)sizeof val - 1);
        freeReplyObject(r);
    }
    /* Room again: the log writes again, and so do clients. */
    ck_assert_int_eq(unlink(filler), 0);
    bool writes = false;
    for (int i = 0; i < 200 && !writes; i++) {
        r = cmd(c, "SET after:room 1");
        writes = r->type == REDIS_REPLY_STATUS;
        freeReplyObject(r);
        if (!writes) usleep(50000);
    }
    ck_assert(writes);
    redisFree(c);
    it_signal(srv[0], SIGKILL);
    ck_assert(it_wait_exit(srv[0], 10000));
    start_node(0, args);
    wait_serving(0, SERVE_MS);
    c = conn_to(0);
    for (int i = 0; i < acked; i++) {
        r = cmd(c, "STRLEN big:%d", i);
        ck_assert_msg(r->integer == (long long)sizeof val - 1, "big:%d lost", i);
        freeReplyObject(r);
    }
    r = cmd(c, "GET after:room");
    ck_assert_int_eq(r->type, REDIS_REPLY_STRING);
    freeReplyObject(r);
    redisFree(c);
    it_signal(srv[0], SIGKILL);
    ck_assert(it_wait_exit(srv[0], 10000));
    ck_assert_int_eq(umount(mnt), 0);
    it_end();
}
END_TEST

START_TEST(three_nodes_killed_and_restarted)
{
    it_begin("persist_three_nodes");
    /* backups=2: every node holds every partition, so the first one back
     * has all the data (see docs/PERSISTENCE.md for backups=1). */
    const char *cache = "default:backups=2,partitions=64";
    start_grid(0, 3, NULL);
    for (int i = 0; i < 3; i++) {
        const char **a = node_args(i, "group", "--cache", cache);
        start_node(i, a);
    }
    for (int i = 0; i < 3; i++) wait_serving(i, SERVE_MS);
    /* All three in one grid before the load. */
    for (int tries = 0; tries < 600; tries++) {
        json_t *top = it_top(finder, NULL, NULL);
        size_t n = top ? it_servers(top) : 0;
        if (top) json_decref(top);
        if (n == 3) break;
        usleep(100000);
    }
    static writer w[WRITERS];
    pthread_t th[WRITERS];
    run_writers(w, th, 1);
    ck_assert(it_wait_for(enough_acked, w, 60000));
    for (int i = 0; i < 3; i++) it_signal(srv[i], SIGKILL);
    for (int i = 0; i < 3; i++) ck_assert(it_wait_exit(srv[i], 10000));
    for (int i = 0; i < WRITERS; i++) pthread_join(th[i], NULL);
    /* A whole-grid restart: the first back waits for the others of its
     * base, then each keeps its copy (it_restart covers backups=1). */
    start_node(0, node_args(0, "group", "--cache", cache));
    ck_assert(it_wait_log(srv[0], "whole-grid restart", 20000));
    for (int i = 1; i < 3; i++) start_node(i, node_args(i, "group", "--cache", cache));
    for (int i = 0; i < 3; i++) wait_serving(i, SERVE_MS);
    for (int i = 0; i < 3; i++) ck_assert(it_log_has(srv[i], "entries restored from"));
    for (int i = 0; i < 3; i++) check_history(w, i);
    for (int i = 0; i < 3; i++) it_signal(srv[i], SIGTERM);
    for (int i = 0; i < 3; i++) ck_assert(it_wait_exit(srv[i], 20000));
    it_end();
}
END_TEST

static void expect_rejoin_state(int node)
{
    redisContext *c = conn_to(node);
    for (int i = 0; i < 200; i++) {
        redisReply *r = cmd(c, "GET rj:%d", i);
        if (i < 100) ck_assert_msg(r->type == REDIS_REPLY_NIL, "rj:%d was removed while the node was away: back", i);
        else ck_assert_msg(r->type == REDIS_REPLY_STRING && !strcmp(r->str, "new"), "rj:%d is not the new value", i);
        freeReplyObject(r);
    }
    redisFree(c);
}

static bool verify_clean(void *ctx)
{
    (void)ctx;
    char out[1 << 14];
    int rc = it_capture_stdout(out, sizeof out, "%s --ip-finder %s --json verify default", LATTICE_CLI_PATH, finder);
    json_t *j = rc == 0 ? json_loads(out, 0, NULL) : NULL;
    bool ok = j && json_array_size(json_object_get(j, "conflicts")) == 0 &&
              json_integer_value(json_object_get(j, "copies")) > 0;
    if (j) json_decref(j);
    return ok;
}

/* The servers node's data dir names in cache default's base (its "base"
 * file, written a tick after the base switched): what a whole-grid restart
 * ranks its copies by. */
static int base_file_servers(void *ctx)
{
    int node = (int)(intptr_t)ctx;
    char path[600], line[1024];
    snprintf(path, sizeof path, "%s/base", data_dir[node]);
    FILE *f = fopen(path, "r");
    int n = 0;
    while (f && fgets(line, sizeof line, f)) {
        if (strncmp(line, "default ", 8)) continue;
        n = -2; /* the name and the base version come first */
        for (char *t = strtok(line, " \n"); t; t = strtok(NULL, " \n")) n++;
    }
    if (f) fclose(f);
    return n;
}

static bool base_file_has_three(void *ctx) { return base_file_servers(ctx) == 3; }

START_TEST(rejoin_drops_a_stale_copy)
{
    /* A node killed and restarted into a grid that went on without it
     * drops what it recovered: keys removed and overwritten meanwhile do
     * not come back through it (its copies, once loaded by the rebalance,
     * equal the others': `lattice verify`).  What the rebalance loads into
     * it is logged too: the whole grid killed and this node restarted first,
     * alone, it serves the grid's last state. */
    it_begin("persist_rejoin");
    const char *cache = "default:backups=2,partitions=64";
    start_grid(0, 3, NULL);
    for (int i = 0; i < 3; i++) start_node(i, node_args(i, "group", "--cache", cache));
    for (int i = 0; i < 3; i++) wait_serving(i, SERVE_MS);
    ck_assert(it_wait_for(verify_clean, NULL, 60000));
    ck_assert_msg(it_wait_baseline(finder, 3, 60000), "the baseline never held the 3 servers");
    redisContext *c = conn_to(0);
    for (int i = 0; i < 200; i++) freeReplyObject(cmd(c, "SET rj:%d old", i));
    redisFree(c);
    it_signal(srv[2], SIGKILL);
    ck_assert(it_wait_exit(srv[2], 10000));
    wait_serving(0, SERVE_MS);
    c = conn_to(0);
    for (int i = 0; i < 200; i++) {
        redisReply *r = i < 100 ? cmd(c, "DEL rj:%d", i) : cmd(c, "SET rj:%d new", i);
        ck_assert_int_ne(r->type, REDIS_REPLY_ERROR);
        freeReplyObject(r);
    }
    redisFree(c);
    start_node(2, node_args(2, "group", "--cache", cache));
    wait_serving(2, SERVE_MS);
    ck_assert(it_wait_log(srv[2], "is dropped", 20000));
    ck_assert(it_wait_for(verify_clean, NULL, 60000));
    expect_rejoin_state(2);
    /* Back in the base, with its copies, and its data dir says so: else the
     * whole-grid restart below rightly drops its copy (a node not in the
     * base it kept may hold a stale one) and its partitions are LOST. */
    ck_assert(it_wait_settled(finder, "default", 3, 60000));
    ck_assert_msg(it_wait_for(base_file_has_three, (void *)(intptr_t)2, 20000),
                  "node 2's base file never named the 3 servers (it names %d)", base_file_servers((void *)(intptr_t)2));
    for (int i = 0; i < 3; i++) it_signal(srv[i], SIGKILL);
    for (int i = 0; i < 3; i++) ck_assert(it_wait_exit(srv[i], 10000));
    /* Alone, without waiting for the other two (backups=2: it owns every
     * partition). */
    start_node(2, node_args4(2, "group", "--cache", cache, "--restart-wait-ms", "0"));
    wait_serving(2, SERVE_MS);
    ck_assert(it_log_has(srv[2], "entries restored from"));
    expect_rejoin_state(2);
    it_signal(srv[2], SIGTERM);
    ck_assert(it_wait_exit(srv[2], 20000));
    it_end();
}
END_TEST

static long rss_mib(pid_t pid)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    long kib = -1;
    while (kib < 0 && fgets(line, sizeof line, f))
        if (!strncmp(line, "VmRSS:", 6)) kib = atol(line + 6);
    fclose(f);
    return kib < 0 ? -1 : kib / 1024;
}

/* The restarted node holds no more than a node that never dropped a copy
 * (s0, the same share of the same partitions), give or take 16 MiB. */
static bool as_small_as_s0(void *ctx)
{
    (void)ctx;
    long r0 = rss_mib(srv[0]->pid), r2 = rss_mib(srv[2]->pid);
    return r0 > 0 && r2 > 0 && r2 <= r0 + 16;
}

START_TEST(a_dropped_copy_goes_back_to_the_os)
{
    /* A node restarted into a grid that went on without it replays its log
     * and then drops what it recovered (rejoin_drops_a_stale_copy), and the
     * rebalance reuses its region pages at once.  The copy's update
     * histories (40 KiB a partition, 1024 partitions: 40 MiB) are unmapped
     * as they go, its indexes are free heap that the node trims within a
     * round of a second: the soak's fifth hour had a restarted node hold 30
     * MiB of such memory resident until the end of the run
     * (docs/BENCHMARKS.md, "The fifth hour").  So once settled, the node is
     * no larger than one that never held the dropped copy. */
    it_begin("persist_trim");
    const char *cache = "default:backups=1";
    start_grid(0, 3, NULL);
    for (int i = 0; i < 3; i++) start_node(i, node_args(i, "group", "--cache", cache));
    for (int i = 0; i < 3; i++) wait_serving(i, SERVE_MS);
    ck_assert_msg(it_wait_baseline(finder, 3, 60000), "the baseline never held the 3 servers");
    ck_assert(it_wait_settled(finder, "default", 3, 60000));
    redisContext *c = conn_to(0);
    for (int b = 0; b < 40000; b += 1000) {
        for (int i = b; i < b + 1000; i++) redisAppendCommand(c, "SET trim:%d %0100d", i, i);
        for (int i = b; i < b + 1000; i++) {
            redisReply *r = NULL;
            ck_assert_int_eq(redisGetReply(c, (void **)&r), REDIS_OK);
            ck_assert_msg(r->type == REDIS_REPLY_STATUS, "SET trim:%d: %s", i, r->str ? r->str : "");
            freeReplyObject(r);
        }
    }
    redisFree(c);
    it_signal(srv[2], SIGKILL);
    ck_assert(it_wait_exit(srv[2], 10000));
    wait_serving(0, SERVE_MS);
    c = conn_to(0);
    freeReplyObject(cmd(c, "SET trim:after the kill x"));
    redisFree(c);
    start_node(2, node_args(2, "group", "--cache", cache));
    wait_serving(2, SERVE_MS);
    ck_assert(it_wait_log(srv[2], "is dropped", 20000));
    ck_assert(it_wait_settled(finder, "default", 3, 60000));
    bool small = it_wait_for(as_small_as_s0, NULL, 30000);
    long r0 = rss_mib(srv[0]->pid), r2 = rss_mib(srv[2]->pid);
    fprintf(stderr, "persist_trim: RSS s0 %ld MiB, restarted s2 %ld MiB\n", r0, r2);
    ck_assert_msg(small, "the restarted node holds %ld MiB, the one that never dropped a copy %ld MiB", r2, r0);
    it_end();
}
END_TEST

START_TEST(restart_keeps_the_consistent_id)
{
    /* The first start finds its port taken and moves up; a restart with the
     * port free again binds the one it had (its consistent id, the key of
     * its affinity, stays). */
    it_begin("persist_cid");
    int base = it_free_ports(3);
    resp_base = it_free_ports(1);
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)base)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ck_assert_int_eq(bind(s, (struct sockaddr *)&a, sizeof a), 0);
    ck_assert_int_eq(listen(s, 1), 0);
    char port[16], fnd[64], rport[16], want[80];
    snprintf(port, sizeof port, "%d", base);
    snprintf(fnd, sizeof fnd, "127.0.0.1:%d..%d", base, base + 2);
    snprintf(rport, sizeof rport, "%d", resp_base);
    snprintf(want, sizeof want, "listening on 127.0.0.1:%d ", base + 1);
    snprintf(data_dir[0], sizeof data_dir[0], "%s/data0", it_dir());
    const char *args[] = {"--port", port, "--port-range", "3", "--ip-finder", fnd, "--resp-port", rport,
                          "--data-dir", data_dir[0], NULL};
    srv[0] = it_latticed("c0", args);
    wait_serving(0, SERVE_MS);
    ck_assert(it_log_has(srv[0], want));
    it_signal(srv[0], SIGTERM);
    ck_assert(it_wait_exit(srv[0], 20000));
    close(s);
    srv[0] = it_latticed("c1", args);
    wait_serving(0, SERVE_MS);
    ck_assert(it_log_has(srv[0], "trying port"));
    ck_assert(it_log_has(srv[0], want));
    redisContext *c = conn_to(0);
    redisReply *r = cmd(c, "GET it:probe");
    ck_assert_int_eq(r->type, REDIS_REPLY_STRING);
    freeReplyObject(r);
    redisFree(c);
    it_signal(srv[0], SIGTERM);
    ck_assert(it_wait_exit(srv[0], 20000));
    it_end();
}
END_TEST

int main(int argc, char **argv)
{
    Suite *s = suite_create("it_persist");
    TCase *tc = tcase_create("persist");
    tcase_set_timeout(tc, 600);
    static const it_named tests[] = {
        {"kill9_under_load_always", &kill9_under_load_always},
        {"kill9_under_load_group", &kill9_under_load_group},
        {"truncated_and_corrupted_log", &truncated_and_corrupted_log},
        {"full_disk_refuses_writes_keeps_data", &full_disk_refuses_writes_keeps_data},
        {"three_nodes_killed_and_restarted", &three_nodes_killed_and_restarted},
        {"rejoin_drops_a_stale_copy", &rejoin_drops_a_stale_copy},
        {"a_dropped_copy_goes_back_to_the_os", &a_dropped_copy_goes_back_to_the_os},
        {"restart_keeps_the_consistent_id", &restart_keeps_the_consistent_id},
    };
    it_add_named(tc, tests, sizeof tests / sizeof tests[0], argc, argv);
    suite_add_tcase(s, tc);
    return it_run_suite(s);
}
