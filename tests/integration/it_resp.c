/*
 * The RESP endpoint with real Redis clients nobody here wrote: the hiredis C
 * API, redis-cli (plain and -c) and redis-benchmark (plain and --cluster)
 * against real latticed grids on loopback.
 *
 *   commands_three_nodes      every docs/RESP.md command with its values and
 *                             Redis's errors; keys written through one node
 *                             read through the others; RESP3 via HELLO 3
 *   cluster_slots_match_partitions
 *                             CLUSTER SLOTS/NODES/SHARDS/INFO/MYID/KEYSLOT
 *                             agree with `lattice --json partitions default`
 *   redis_cli_and_benchmark   redis-cli, redis-cli -c, redis-benchmark plain
 *                             and --cluster
 *   topology_change           CLUSTER SLOTS follows a join and a kill -9,
 *                             and redis-cli -c still reaches every key
 *   auth_enforced             --requirepass: NOAUTH, WRONGPASS, HELLO AUTH
 *   malformed_closes_only_offender
 *                             each kind of bad input gets Redis's protocol
 *                             error and closes that connection only
 *   thousand_connections      1,000 clients open at once (two IO threads),
 *                             each pipelining a few commands
 *   max_clients_and_idle_timeout
 *                             --resp-max-clients, --resp-timeout,
 *                             --resp-output-limit
 *   lost_partition_is_clusterdown
 *                             backups=0 and a kill -9: that node's keys get
 *                             CLUSTERDOWN, the survivor's still serve
 *   rmw_atomic_on_grid        SETBIT, INCRBYFLOAT, SETRANGE from 4 clients at
 *                             once on 3 nodes (backups=1 full_sync): exact
 *                             results, copies agree, a kill -9 loses nothing
 *   set_operations_on_grid    SMOVE of the same members from 4 clients at
 *                             once: each moves once; SINTERSTORE,
 *                             ZUNIONSTORE, SUNIONSTORE over three slots;
 *                             copies agree, a kill -9 loses nothing
 *   blocking_pops_on_grid     a BLPOP waiting through another node gets
 *                             the element pushed after its primary's kill;
 *                             a dead issuer's waiter is dropped
 *   introspection_io_threads  CLIENT LIST/KILL over connections of two IO
 *                             threads, MONITOR of another connection, a
 *                             monitor that never reads is dropped
 *   idle_node_sleeps          the IO thread polls only right after requests
 *                             (--resp-poll-us): once the load stops, and
 *                             between sparse requests, the node sleeps
 */
#include <arpa/inet.h>
#include <check.h>
#include <hiredis.h>
#include <jansson.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.h"
#include "resp_grid.h"

/* Each helper runs a command, checks the reply's type and value, frees it. */
static void expect_status(redisContext *c, const char *want, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(c, fmt, ap);
    va_end(ap);
    ck_assert_msg(r, "no reply to %s", fmt);
    ck_assert_msg(r->type == REDIS_REPLY_STATUS && !strcmp(r->str, want), "%s: want +%s, got type %d '%s'", fmt, want,
                  r->type, r->str ? r->str : "");
    freeReplyObject(r);
}

static void expect_int(redisContext *c, long long want, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(c, fmt, ap);
    va_end(ap);
    ck_assert_msg(r, "no reply to %s", fmt);
    ck_assert_msg(r->type == REDIS_REPLY_INTEGER && r->integer == want, "%s: want :%lld, got type %d %lld '%s'", fmt,
                  want, r->type, r->integer, r->str ? r->str : "");
    freeReplyObject(r);
}

static void expect_str(redisContext *c, const char *want, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(c, fmt, ap);
    va_end(ap);
    ck_assert_msg(r, "no reply to %s", fmt);
    if (!want) {
        ck_assert_msg(r->type == REDIS_REPLY_NIL, "%s: want nil, got type %d '%s'", fmt, r->type, r->str ? r->str : "");
    } else {
        ck_assert_msg(r->type == REDIS_REPLY_STRING && r->len == strlen(want) && !memcmp(r->str, want, r->len),
                      "%s: want '%s', got type %d '%s'", fmt, want, r->type, r->str ? r->str : "");
    }
    freeReplyObject(r);
}

static void expect_err(redisContext *c, const char *want, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(c, fmt, ap);
    va_end(ap);
    ck_assert_msg(r, "no reply to %s", fmt);
    ck_assert_msg(r->type == REDIS_REPLY_ERROR && !strncmp(r->str, want, strlen(want)), "%s: want -%s, got type %d '%s'",
                  fmt, want, r->type, r->str ? r->str : "");
    freeReplyObject(r);
}

/* ---- raw sockets, for bytes no well-behaved client sends ---- */

static char raw_buf[1 << 16];
static size_t raw_len;

static int raw_connect(int i)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)(resp_base + i))};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    ck_assert_int_eq(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    struct timeval tv = {0, 200 * 1000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    raw_len = 0;
    raw_buf[0] = 0;
    return fd;
}

static void raw_send_n(int fd, const char *p, size_t n)
{
    raw_len = 0;
    raw_buf[0] = 0;
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w <= 0) return; /* the server may close early: the reads tell */
        p += w;
        n -= (size_t)w;
    }
}

static void raw_send(int fd, const char *s) { raw_send_n(fd, s, strlen(s)); }

typedef struct raw_ctx {
    int fd;
    const char *want;   /* NULL: wait for EOF */
    bool eof;
} raw_ctx;

static bool raw_cond(void *p)
{
    raw_ctx *x = p;
    for (;;) {
        if (x->want && strstr(raw_buf, x->want)) return true;
        ssize_t n = recv(x->fd, raw_buf + raw_len, sizeof raw_buf - 1 - raw_len, 0);
        if (n == 0) {
            x->eof = true;
            return !x->want || strstr(raw_buf, x->want);
        }
        if (n < 0) return false;
        raw_len += (size_t)n;
        raw_buf[raw_len] = 0;
    }
}

static bool raw_wait_contains(int fd, const char *want)
{
    raw_ctx x = {fd, want, false};
    return it_wait_for(raw_cond, &x, 10000);
}

static bool raw_wait_closed(int fd)
{
    raw_ctx x = {fd, NULL, false};
    return it_wait_for(raw_cond, &x, 10000) && x.eof;
}

typedef struct ports_ctx {
    int node;
    int want_primaries;
    int absent_port;     /* must not appear (0 = none) */
} ports_ctx;
static bool slots_follow(void *p);

/* Every node's CLUSTER SLOTS names n primaries.  Tests wait for this before
 * writing: a cache that holds keys keeps its partitions where they are when
 * a node joins until the rebalance module moves them. */
static void wait_spread(int n)
{
    for (int i = 0; i < n; i++) {
        ports_ctx x = {i, n, 0};
        ck_assert_msg(it_wait_for(slots_follow, &x, 60000), "node %d: CLUSTER SLOTS never showed %d primaries", i, n);
    }
}

START_TEST(commands_three_nodes)
{
    it_begin("resp_commands");
    const char *extra[] = {"--cache", "default:backups=1", NULL};
    start_grid(3, 3, extra);
    wait_spread(3);
    for (int i = 0; i < 3; i++) wait_serving(i, 30000);
    redisContext *a = conn_to(0), *b = conn_to(1), *c = conn_to(2);

    expect_status(a, "PONG", "PING");
    expect_str(a, "hi", "PING hi");
    expect_str(a, "hello world", "ECHO %s", "hello world");
    expect_status(a, "OK", "SELECT 0");
    expect_err(a, "ERR DB index is out of range", "SELECT 1");
    expect_err(a, "ERR value is not an integer or out of range", "SELECT x");

    /* Keys written through one node read through the others. */
    for (int i = 0; i < 200; i++) expect_status(a, "OK", "SET k%d v%d", i, i);
    for (int i = 0; i < 200; i++) {
        char want[16];
        snprintf(want, sizeof want, "v%d", i);
        expect_str(i % 2 ? b : c, want, "GET k%d", i);
    }
    expect_str(b, NULL, "GET missing");
    expect_int(a, 1, "DEL it:probe");
    /* DBSIZE counts what each node holds as primary, as Redis Cluster. */
    long long dbsize = 0;
    redisContext *abc[] = {a, b, c};
    for (int i = 0; i < 3; i++) {
        redisReply *d = cmd(abc[i], "DBSIZE");
        ck_assert_int_eq(d->type, REDIS_REPLY_INTEGER);
        ck_assert_msg(d->integer > 0 && d->integer < 200, "node %d DBSIZE %lld: not its share", i, d->integer);
        dbsize += d->integer;
        freeReplyObject(d);
    }
    ck_assert_int_eq(dbsize, 200);

    /* SET options. */
    expect_str(a, NULL, "SET k0 x NX");
    expect_str(b, "v0", "GET k0");
    expect_status(a, "OK", "SET fresh 1 NX");
    expect_str(a, NULL, "SET nothere 1 XX");
    expect_str(c, NULL, "GET nothere");
    expect_status(a, "OK", "SET k0 w XX");
    expect_str(a, "w", "SET k0 w2 GET");
    expect_str(a, NULL, "SET brandnew z GET");
    expect_str(b, "z", "GET brandnew");
    expect_status(a, "OK", "SET ex 1 EX 100");
    redisReply *r = cmd(b, "TTL ex");
    ck_assert(r->type == REDIS_REPLY_INTEGER && r->integer > 90 && r->integer <= 100);
    freeReplyObject(r);
    expect_status(a, "OK", "SET px 1 PX 100000");
    r = cmd(c, "PTTL px");
    ck_assert(r->type == REDIS_REPLY_INTEGER && r->integer > 90000 && r->integer <= 100000);
    freeReplyObject(r);
    expect_err(a, "ERR syntax error", "SET k0 v NX XX");
    expect_err(a, "ERR invalid expire time in 'set' command", "SET k0 v EX 0");
    expect_err(a, "ERR value is not an integer or out of range", "SET k0 v EX abc");
    expect_err(a, "ERR wrong number of arguments for 'set' command", "SET k0");

    /* MGET / MSET across nodes, DEL / EXISTS counts. */
    expect_status(b, "OK", "MSET m1 a m2 b m3 c");
    r = cmd(c, "MGET m1 m2 nope m3");
    ck_assert_int_eq(r->type, REDIS_REPLY_ARRAY);
    ck_assert_int_eq(r->elements, 4);
    ck_assert_str_eq(r->element[0]->str, "a");
    ck_assert_str_eq(r->element[1]->str, "b");
    ck_assert_int_eq(r->element[2]->type, REDIS_REPLY_NIL);
    ck_assert_str_eq(r->element[3]->str, "c");
    freeReplyObject(r);
    expect_err(a, "ERR wrong number of arguments for 'mset' command", "MSET a b c");
    expect_int(a, 3, "EXISTS m1 m2 nope m3");
    expect_int(a, 2, "EXISTS m1 m1");
    expect_int(b, 2, "DEL m1 m2 nope");
    expect_int(c, 0, "EXISTS m1 m2");

    /* Counters. */
    expect_int(a, 1, "INCR ctr");
    expect_int(b, 11, "INCRBY ctr 10");
    expect_int(c, 10, "DECR ctr");
    expect_int(a, -5, "DECRBY ctr 15");
    expect_str(b, "-5", "GET ctr");
    expect_err(a, "ERR value is not an integer or out of range", "INCR k1");
    expect_err(a, "ERR value is not an integer or out of range", "INCRBY ctr x");
    expect_status(a, "OK", "SET big 9223372036854775807");
    expect_err(a, "ERR", "INCR big");
    expect_str(a, "9223372036854775807", "GET big");

    /* APPEND, STRLEN, GETDEL. */
    expect_int(a, 5, "APPEND ap hello");
    expect_int(b, 11, "APPEND ap %s", " world");
    expect_str(c, "hello world", "GET ap");
    expect_int(a, 11, "STRLEN ap");
    expect_int(a, 0, "STRLEN nope");
    expect_str(b, "hello world", "GETDEL ap");
    expect_str(c, NULL, "GETDEL ap");
    expect_str(a, NULL, "GET ap");

    /* Expiry. */
    expect_int(a, -2, "TTL nope");
    expect_int(a, -1, "TTL k1");
    expect_int(a, 1, "EXPIRE k1 100");
    r = cmd(b, "TTL k1");
    ck_assert(r->integer > 90 && r->integer <= 100);
    freeReplyObject(r);
    expect_int(a, 0, "EXPIRE k1 50 NX");
    expect_int(a, 0, "EXPIRE k1 50 GT");
    expect_int(a, 1, "EXPIRE k1 50 LT");
    r = cmd(c, "TTL k1");
    ck_assert(r->integer > 40 && r->integer <= 50);
    freeReplyObject(r);
    expect_int(a, 1, "PERSIST k1");
    expect_int(a, 0, "PERSIST k1");
    expect_int(b, -1, "TTL k1");
    expect_int(a, 0, "EXPIRE nope 10");
    expect_int(a, 0, "EXPIRE k2 10 XX");
    expect_int(a, 1, "PEXPIRE k2 200000");
    r = cmd(c, "PTTL k2");
    ck_assert(r->integer > 190000 && r->integer <= 200000);
    freeReplyObject(r);
    expect_int(a, 1, "EXPIRE k3 -1");
    expect_str(b, NULL, "GET k3");
    expect_status(a, "OK", "SET short 1 PX 300");
    expect_str(a, "1", "GET short");
    usleep(600 * 1000);
    expect_str(b, NULL, "GET short");
    expect_err(a, "ERR NX and XX, GT or LT options at the same time are not compatible", "EXPIRE k2 10 NX XX");

    /* Errors in Redis's words. */
    expect_err(a, "ERR unknown command 'NOSUCH', with args beginning with: 'x' ", "NOSUCH x");
    expect_err(a, "ERR wrong number of arguments for 'get' command", "GET");
    expect_err(a, "ERR AUTH <password> called without any password configured", "AUTH x");

    /* CLIENT, COMMAND, INFO, CONFIG GET. */
    expect_status(a, "OK", "CLIENT SETNAME tester");
    expect_str(a, "tester", "CLIENT GETNAME");
    expect_err(a, "ERR Client names cannot contain spaces", "CLIENT SETNAME %s", "a b");
    expect_status(a, "OK", "CLIENT SETINFO lib-name hiredis");
    r = cmd(a, "CLIENT ID");
    ck_assert_int_eq(r->type, REDIS_REPLY_INTEGER);
    freeReplyObject(r);
    r = cmd(a, "COMMAND COUNT");
    ck_assert_msg(r->type == REDIS_REPLY_INTEGER && r->integer >= 25, "COMMAND COUNT %lld", r->integer);
    freeReplyObject(r);
    r = cmd(a, "COMMAND INFO get");
    ck_assert(r->type == REDIS_REPLY_ARRAY && r->elements == 1 && r->element[0]->type == REDIS_REPLY_ARRAY);
    ck_assert_str_eq(r->element[0]->element[0]->str, "get");
    ck_assert_int_eq(r->element[0]->element[1]->integer, 2);
    freeReplyObject(r);
    r = cmd(a, "INFO");
    ck_assert_int_eq(r->type, REDIS_REPLY_STRING);
    ck_assert_ptr_nonnull(strstr(r->str, "cluster_enabled:1"));
    ck_assert_ptr_nonnull(strstr(r->str, "redis_version:"));
    ck_assert_ptr_nonnull(strstr(r->str, "connected_clients:"));
    ck_assert_ptr_nonnull(strstr(r->str, "db0:keys="));
    freeReplyObject(r);
    r = cmd(a, "CONFIG GET save");
    ck_assert(r->type == REDIS_REPLY_ARRAY && r->elements == 2);
    freeReplyObject(r);

    /* Pipelining: 300 commands in one write, replies in order. */
    for (int i = 0; i < 100; i++) {
        redisAppendCommand(c, "SET p%d %d", i, i);
        redisAppendCommand(c, "INCR p%d", i);
        redisAppendCommand(c, "PING");
    }
    for (int i = 0; i < 100; i++) {
        redisReply *x;
        ck_assert_int_eq(redisGetReply(c, (void **)&x), REDIS_OK);
        ck_assert_int_eq(x->type, REDIS_REPLY_STATUS);
        freeReplyObject(x);
        ck_assert_int_eq(redisGetReply(c, (void **)&x), REDIS_OK);
        ck_assert_int_eq(x->integer, i + 1);
        freeReplyObject(x);
        ck_assert_int_eq(redisGetReply(c, (void **)&x), REDIS_OK);
        ck_assert_str_eq(x->str, "PONG");
        freeReplyObject(x);
    }

    /* RESP3 through HELLO 3 (Debian's hiredis 0.14 speaks RESP2 only: raw bytes). */
    int s3 = raw_connect(0);
    raw_send(s3, "HELLO 3\r\n");
    ck_assert_msg(raw_wait_contains(s3, "proto"), "HELLO 3 reply: %s", raw_buf);
    ck_assert_msg(raw_buf[0] == '%', "HELLO 3 must answer a RESP3 map, got %s", raw_buf);
    raw_send(s3, "GET nope\r\nGET k5\r\nSET k5 v5 GET\r\n");
    ck_assert_msg(raw_wait_contains(s3, "_\r\n$2\r\nv5\r\n$2\r\nv5\r\n"), "RESP3 null/bulks: %s", raw_buf);
    raw_send(s3, "QUIT\r\n");
    ck_assert_msg(raw_wait_closed(s3), "QUIT must close");
    close(s3);
    expect_status(b, "OK", "QUIT");

    redisFree(a);
    redisFree(b);
    redisFree(c);
    it_end();
}
END_TEST

/* `lattice --json partitions default`: per partition, the RESP ports of its
 * owners (primary first).  Returns the partition count, 0 on failure. */
static size_t partition_ports(int ports[][4], int nports[], size_t max)
{
    if (run("%s --timeout-ms 5000 --ip-finder '%s' --json partitions default", LATTICE_CLI_PATH, finder) != 0) return 0;
    json_error_t e;
    json_t *j = json_loads(out_buf, 0, &e);
    if (!j) return 0;
    json_t *parts = json_object_get(j, "partitions");
    size_t n = json_array_size(parts);
    for (size_t p = 0; p < n && p < max; p++) {
        json_t *owners = json_object_get(json_array_get(parts, p), "owners");
        nports[p] = 0;
        for (size_t k = 0; k < json_array_size(owners) && k < 4; k++) {
            const char *cid = json_string_value(json_object_get(json_array_get(owners, k), "consistent_id"));
            const char *colon = cid ? strrchr(cid, ':') : NULL;
            ports[p][nports[p]++] = colon ? resp_base + atoi(colon + 1) - peer_base : -1;
        }
    }
    json_decref(j);
    return n;
}

/* CLUSTER SLOTS through node i: per slot, the RESP ports (primary first);
 * returns the number of slots covered. */
static int slots_ports(int i, int ports[16384][4], int nports[16384])
{
    redisContext *c = conn_to(i);
    redisReply *r = cmd(c, "CLUSTER SLOTS");
    ck_assert_int_eq(r->type, REDIS_REPLY_ARRAY);
    memset(nports, 0, 16384 * sizeof *nports);
    int covered = 0;
    for (size_t k = 0; k < r->elements; k++) {
        redisReply *x = r->element[k];
        ck_assert(x->type == REDIS_REPLY_ARRAY && x->elements >= 3);
        long long first = x->element[0]->integer, last = x->element[1]->integer;
        ck_assert(first >= 0 && first <= last && last < 16384);
        for (long long s = first; s <= last; s++) {
            ck_assert_msg(nports[s] == 0, "slot %lld listed twice", s);
            for (size_t o = 2; o < x->elements && o < 6; o++) {
                redisReply *nd = x->element[o];
                ck_assert(nd->type == REDIS_REPLY_ARRAY && nd->elements >= 3);
                ck_assert_str_eq(nd->element[0]->str, "127.0.0.1");
                ck_assert_int_eq(nd->element[2]->len, 40);
                ports[s][nports[s]++] = (int)nd->element[1]->integer;
            }
            covered++;
        }
    }
    freeReplyObject(r);
    redisFree(c);
    return covered;
}

static int part_p[16384][4], part_n[16384], slot_p[16384][4], slot_n[16384];

/* CLUSTER SLOTS of node i equals the partition table, slot by slot. */
static bool slots_agree(int i)
{
    size_t parts = partition_ports(part_p, part_n, 16384);
    if (!parts || slots_ports(i, slot_p, slot_n) != 16384) return false;
    for (int s = 0; s < 16384; s++) {
        int p = s / (int)(16384 / parts); /* a partition is one slot range */
        if (slot_n[s] != part_n[p]) return false;
        for (int k = 0; k < slot_n[s]; k++)
            if (slot_p[s][k] != part_p[p][k]) return false;
    }
    return true;
}

START_TEST(cluster_slots_match_partitions)
{
    it_begin("resp_cluster");
    const char *extra[] = {"--cache", "default:backups=1,partitions=256", NULL};
    start_grid(3, 3, extra);
    wait_spread(3);
    for (int i = 0; i < 3; i++) wait_serving(i, 30000);
    for (int i = 0; i < 3; i++) {
        /* The three views converge; then every node describes the same table. */
        bool ok = false;
        for (int t = 0; t < 50 && !ok; t++) {
            ok = slots_agree(i);
            if (!ok) usleep(200 * 1000);
        }
        ck_assert_msg(ok, "CLUSTER SLOTS of node %d disagrees with lattice partitions", i);
    }
    redisContext *a = conn_to(0);
    /* Compact: a partition is one slot range, so at most 256 ranges (the
     * low-bit mapping of old gave ~13,500). */
    redisReply *sl = cmd(a, "CLUSTER SLOTS");
    ck_assert_msg(sl->type == REDIS_REPLY_ARRAY && sl->elements >= 3 && sl->elements <= 256, "CLUSTER SLOTS: %zu ranges",
                  sl->elements);
    freeReplyObject(sl);
    /* Redis's own slot numbers (crc16 XMODEM, hash tags). */
    expect_int(a, 12182, "CLUSTER KEYSLOT foo");
    expect_int(a, 11058, "CLUSTER KEYSLOT somekey");
    expect_int(a, 2515, "CLUSTER KEYSLOT foo{hash_tag}");
    expect_int(a, 2515, "CLUSTER KEYSLOT bar{hash_tag}");
    redisReply *r = cmd(a, "CLUSTER MYID");
    ck_assert(r->type == REDIS_REPLY_STRING && r->len == 40);
    char myid[41];
    snprintf(myid, sizeof myid, "%s", r->str);
    freeReplyObject(r);
    r = cmd(a, "CLUSTER NODES");
    ck_assert_int_eq(r->type, REDIS_REPLY_STRING);
    int lines = 0;
    for (const char *p = r->str; (p = strchr(p, '\n')); p++) lines++;
    ck_assert_int_eq(lines, 3);
    char self_line[128];
    snprintf(self_line, sizeof self_line, "%s 127.0.0.1:%d@%d myself,master", myid, resp_base, peer_base);
    ck_assert_msg(strstr(r->str, self_line), "CLUSTER NODES lacks '%s':\n%s", self_line, r->str);
    freeReplyObject(r);
    r = cmd(a, "CLUSTER INFO");
    ck_assert_ptr_nonnull(strstr(r->str, "cluster_state:ok"));
    ck_assert_ptr_nonnull(strstr(r->str, "cluster_slots_ok:16384"));
    ck_assert_ptr_nonnull(strstr(r->str, "cluster_known_nodes:3"));
    freeReplyObject(r);
    r = cmd(a, "CLUSTER SHARDS");
    ck_assert(r->type == REDIS_REPLY_ARRAY && r->elements == 3);
    long long slots = 0;
    for (size_t k = 0; k < r->elements; k++) {
        redisReply *sh = r->element[k]; /* RESP2: [ "slots", [...], "nodes", [...] ] */
        ck_assert(sh->elements == 4 && !strcmp(sh->element[0]->str, "slots"));
        for (size_t q = 0; q + 1 < sh->element[1]->elements; q += 2)
            slots += sh->element[1]->element[q + 1]->integer - sh->element[1]->element[q]->integer + 1;
    }
    ck_assert_int_eq(slots, 16384);
    freeReplyObject(r);
    expect_err(a, "ERR unknown subcommand 'BOGUS'. Try CLUSTER HELP.", "CLUSTER BOGUS");
    redisFree(a);
    it_end();
}
END_TEST

START_TEST(redis_cli_and_benchmark)
{
    it_begin("resp_tools");
    const char *extra[] = {"--cache", "default:backups=1", NULL};
    start_grid(3, 3, extra);
    wait_spread(3);
    for (int i = 0; i < 3; i++) wait_serving(i, 30000);
    ck_assert_int_eq(run("redis-cli -p %d SET clikey hello", resp_base), 0);
    ck_assert_str_eq(out_buf, "OK\n");
    ck_assert_int_eq(run("redis-cli -p %d GET clikey", resp_base + 1), 0);
    ck_assert_str_eq(out_buf, "hello\n");
    ck_assert_int_eq(run("redis-cli -c -p %d GET clikey", resp_base + 2), 0);
    ck_assert_str_eq(out_buf, "hello\n");
    ck_assert_int_eq(run("redis-cli -c -p %d INCRBY clictr 41", resp_base + 2), 0);
    ck_assert_str_eq(out_buf, "41\n");
    /* redis-cli hits every node with -c for 50 keys: each one reads back. */
    for (int i = 0; i < 50; i++) {
        ck_assert_int_eq(run("redis-cli -c -p %d SET cli%d val%d", resp_base + i % 3, i, i), 0);
        ck_assert_str_eq(out_buf, "OK\n");
    }
    for (int i = 0; i < 50; i++) {
        char want[32];
        snprintf(want, sizeof want, "val%d\n", i);
        ck_assert_int_eq(run("redis-cli -c -p %d GET cli%d", resp_base + (i + 1) % 3, i), 0);
        ck_assert_str_eq(out_buf, want);
    }
    ck_assert_int_eq(run("redis-cli -p %d PING", resp_base), 0);
    ck_assert_str_eq(out_buf, "PONG\n");

    /* redis-benchmark plain: values it wrote are there (key:__rand_int__
     * stays literal without -r). */
    ck_assert_int_eq(run("redis-benchmark -p %d -t set,get -n 2000 -c 10 -d 7 -q", resp_base), 0);
    ck_assert_msg(strstr(out_buf, "SET:") && strstr(out_buf, "GET:") && strstr(out_buf, "requests per second"),
                  "redis-benchmark: %s", out_buf);
    ck_assert_msg(!strstr(out_buf, "ERR") && !strstr(out_buf, "rror"), "redis-benchmark: %s", out_buf);
    ck_assert_int_eq(run("redis-cli -p %d STRLEN key:__rand_int__", resp_base + 1), 0);
    ck_assert_str_eq(out_buf, "7\n");
    ck_assert_int_eq(run("redis-benchmark -p %d -t set,get -n 2000 -c 10 -P 8 -r 1000 -q", resp_base + 1), 0);
    ck_assert_msg(strstr(out_buf, "SET:") && strstr(out_buf, "GET:") && !strstr(out_buf, "rror"), "pipelined: %s", out_buf);

    /* redis-benchmark --cluster reads CLUSTER NODES and goes to each owner. */
    ck_assert_int_eq(run("redis-benchmark --cluster -p %d -t set,get -n 3000 -c 9 -q", resp_base), 0);
    ck_assert_msg(strstr(out_buf, "Cluster has 3 master nodes"), "--cluster: %s", out_buf);
    ck_assert_msg(strstr(out_buf, "SET:") && strstr(out_buf, "GET:") && !strstr(out_buf, "rror"), "--cluster: %s", out_buf);
    it_end();
}
END_TEST

/* CLUSTER SLOTS of node x->node covers every slot, names want_primaries
 * distinct primaries and never absent_port. */
static bool slots_follow(void *p)
{
    ports_ctx *x = p;
    struct timeval tv = {2, 0};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", resp_base + x->node, tv);
    bool ok = false;
    if (c && !c->err) {
        redisSetTimeout(c, tv);
        redisReply *r = redisCommand(c, "CLUSTER SLOTS");
        if (r && r->type == REDIS_REPLY_ARRAY) {
            int seen[8] = {0}, n = 0;
            long long slots = 0;
            bool absent = true;
            for (size_t k = 0; k < r->elements; k++) {
                redisReply *e = r->element[k];
                slots += e->element[1]->integer - e->element[0]->integer + 1;
                for (size_t o = 2; o < e->elements; o++)
                    if (e->element[o]->element[1]->integer == x->absent_port) absent = false;
                int port = (int)e->element[2]->element[1]->integer, d = port - resp_base;
                if (d >= 0 && d < 8 && !seen[d]) {
                    seen[d] = 1;
                    n++;
                }
            }
            ok = slots == 16384 && n == x->want_primaries && absent;
        }
        if (r) freeReplyObject(r);
    }
    if (c) redisFree(c);
    return ok;
}

START_TEST(topology_change)
{
    it_begin("resp_topology");
    const char *extra[] = {"--cache", "default:backups=1,sync=full_sync", NULL};
    start_grid(2, 3, extra);
    /* Slots first: a key written before the second node is in would keep
     * every partition on the first (see the join below). */
    ports_ctx two = {0, 2, 0};
    ck_assert_msg(it_wait_for(slots_follow, &two, 30000), "CLUSTER SLOTS never showed 2 primaries");
    wait_serving(0, 30000);
    wait_serving(1, 30000);
    /* A node joins: the slots spread over three primaries.  (The keys are
     * written after the join: moving stored partitions to a joiner is the
     * rebalance module's work; CLUSTER SLOTS follows whatever it serves.) */
    ck_assert_int_eq(run("redis-cli -p %d DEL it:probe", resp_base), 0);
    start_node(2, extra);
    for (int n = 0; n < 3; n++) {
        ports_ctx three = {n, 3, 0};
        ck_assert_msg(it_wait_for(slots_follow, &three, 60000), "node %d: CLUSTER SLOTS never showed 3 primaries", n);
    }
    ck_assert_msg(slots_agree(0), "after the join CLUSTER SLOTS disagrees with lattice partitions");
    for (int i = 0; i < 100; i++) {
        ck_assert_int_eq(run("redis-cli -c -p %d SET tk%d tv%d", resp_base + i % 3, i, i), 0);
        ck_assert_str_eq(out_buf, "OK\n");
    }
    for (int i = 0; i < 100; i++) {
        char want[32];
        snprintf(want, sizeof want, "tv%d\n", i);
        ck_assert_int_eq(run("redis-cli -c -p %d GET tk%d", resp_base + 2, i), 0);
        ck_assert_str_eq(out_buf, want);
    }
    /* One dies (kill -9): its slots move to the survivors, no key is lost. */
    it_signal(srv[1], SIGKILL);
    for (int n = 0; n < 3; n += 2) {
        ports_ctx after = {n, 2, resp_base + 1};
        ck_assert_msg(it_wait_for(slots_follow, &after, 60000), "node %d: CLUSTER SLOTS still names the dead node", n);
    }
    for (int i = 0; i < 100; i++) {
        char want[32];
        snprintf(want, sizeof want, "tv%d\n", i);
        ck_assert_int_eq(run("redis-cli -c -p %d GET tk%d", resp_base + (i % 2 ? 0 : 2), i), 0);
        ck_assert_str_eq(out_buf, want);
    }
    it_end();
}
END_TEST

START_TEST(auth_enforced)
{
    it_begin("resp_auth");
    const char *extra[] = {"--requirepass", "s3cret", NULL};
    start_grid(1, 1, extra);
    struct timeval tv = {5, 0};
    redisContext *c = NULL;
    for (int t = 0; t < 100; t++) {
        c = redisConnectWithTimeout("127.0.0.1", resp_base, tv);
        if (c && !c->err) break;
        if (c) redisFree(c);
        c = NULL;
        usleep(100 * 1000);
    }
    ck_assert_ptr_nonnull(c);
    expect_err(c, "NOAUTH Authentication required.", "GET a");
    expect_err(c, "NOAUTH Authentication required.", "PING");
    expect_err(c, "NOAUTH Authentication required.", "CLUSTER SLOTS");
    expect_err(c, "NOAUTH HELLO must be called with the client already authenticated", "HELLO 2");
    expect_err(c, "WRONGPASS invalid username-password pair or user is disabled.", "AUTH nope");
    expect_err(c, "WRONGPASS", "AUTH other s3cret");
    expect_err(c, "WRONGPASS", "HELLO 2 AUTH default nope");
    expect_status(c, "OK", "AUTH s3cret");
    expect_status(c, "PONG", "PING");
    expect_status(c, "OK", "SET a 1");
    expect_str(c, "1", "GET a");
    redisFree(c);
    c = conn_to(0);
    redisReply *r = cmd(c, "HELLO 2 AUTH default s3cret");
    ck_assert_int_eq(r->type, REDIS_REPLY_ARRAY);
    freeReplyObject(r);
    expect_str(c, "1", "GET a");
    redisFree(c);
    c = conn_to(0);
    expect_status(c, "OK", "AUTH default s3cret");
    expect_str(c, "1", "GET a");
    redisFree(c);
    c = conn_to(0);
    expect_status(c, "OK", "QUIT"); /* allowed before AUTH */
    redisFree(c);
    /* Pre-AUTH limits (Redis 7.2): a huge unauthenticated multibulk is refused. */
    int s = raw_connect(0);
    raw_send(s, "*20\r\n");
    ck_assert(raw_wait_contains(s, "-ERR Protocol error: unauthenticated multibulk length\r\n"));
    ck_assert(raw_wait_closed(s));
    close(s);
    ck_assert_int_eq(run("redis-cli -p %d -a s3cret --no-auth-warning GET a", resp_base), 0);
    ck_assert_str_eq(out_buf, "1\n");
    ck_assert_int_eq(run("redis-cli -p %d GET a", resp_base), 0);
    ck_assert_msg(strstr(out_buf, "NOAUTH"), "redis-cli without -a: %s", out_buf);
    it_end();
}
END_TEST

START_TEST(malformed_closes_only_offender)
{
    it_begin("resp_malformed");
    start_grid(1, 1, NULL);
    wait_serving(0, 30000);
    redisContext *good = conn_to(0);
    expect_status(good, "OK", "SET g 1");
    static char big_inline[70 * 1024];
    memset(big_inline, 'a', sizeof big_inline);
    static const struct {
        const char *in;
        const char *reply;
    } bad[] = {
        {"*1\r\n$abc\r\n", "-ERR Protocol error: invalid bulk length\r\n"},
        {"*3\r\n$3\r\nSET\r\n:1\r\n", "-ERR Protocol error: expected '$', got ':'\r\n"},
        {"*99999999999\r\n", "-ERR Protocol error: invalid multibulk length\r\n"},
        {"*1\r\n$999999999999\r\n", "-ERR Protocol error: invalid bulk length\r\n"},
        {"SET \"a b\r\n", "-ERR Protocol error: unbalanced quotes in request\r\n"},
        {"*2\r\n$3\r\nGET\r\n$-5\r\n", "-ERR Protocol error: invalid bulk length\r\n"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int s = raw_connect(0);
        raw_send(s, "PING\r\n");
        ck_assert(raw_wait_contains(s, "+PONG\r\n"));
        raw_send(s, bad[i].in);
        ck_assert_msg(raw_wait_contains(s, bad[i].reply), "input %zu: want %s, got %s", i, bad[i].reply, raw_buf);
        ck_assert_msg(raw_wait_closed(s), "input %zu: the connection stays open", i);
        close(s);
        expect_str(good, "1", "GET g"); /* everyone else is served */
    }
    int s = raw_connect(0);
    raw_send_n(s, big_inline, sizeof big_inline);
    ck_assert_msg(raw_wait_contains(s, "-ERR Protocol error: too big inline request\r\n"), "big inline: %s", raw_buf);
    ck_assert(raw_wait_closed(s));
    close(s);
    /* A client that vanishes mid-command, and one that sends half a pipeline. */
    s = raw_connect(0);
    raw_send(s, "*3\r\n$3\r\nSET\r\n$1\r\nh\r\n$10\r\nabc");
    close(s);
    s = raw_connect(0);
    raw_send(s, "SET p1 1\r\nGET p1\r\nINCR p1\r\nGET p");
    ck_assert(raw_wait_contains(s, "+OK\r\n$1\r\n1\r\n:2\r\n"));
    raw_send(s, "1\r\n");
    ck_assert(raw_wait_contains(s, "$1\r\n2\r\n"));
    /* Regression: an error reply kept in order, then a command answered at
     * once, in one read - the second used to wait for a read that never came. */
    raw_send(s, "GET\r\nINCRBY p1 x\r\nPING\r\nGET p1\r\nECHO e\r\n");
    ck_assert_msg(raw_wait_contains(s, "-ERR wrong number of arguments for 'get' command\r\n"
                                       "-ERR value is not an integer or out of range\r\n+PONG\r\n$1\r\n2\r\n$1\r\ne\r\n"),
                  "mixed pipeline: %s", raw_buf);
    close(s);
    expect_str(good, "1", "GET g");
    expect_status(good, "PONG", "PING");
    redisFree(good);
    it_end();
}
END_TEST

START_TEST(thousand_connections)
{
    it_begin("resp_conns");
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
    ck_assert_msg(rl.rlim_cur >= 1100, "need 1100 descriptors, the hard limit is %llu", (unsigned long long)rl.rlim_max);
    /* Two IO threads per node: connections spread over both sockets. */
    const char *extra[] = {"--cache", "default:backups=1", "--resp-io-threads", "2", NULL};
    start_grid(3, 3, extra);
    for (int i = 0; i < 3; i++) wait_serving(i, 30000);
    enum { N = 1000 };
    static redisContext *cs[N];
    for (int i = 0; i < N; i++) cs[i] = conn_to(i % 3);
    /* All open at once: each pipelines a few commands, then all read. */
    for (int i = 0; i < N; i++) {
        redisAppendCommand(cs[i], "SET conn%d %d", i, i);
        redisAppendCommand(cs[i], "INCR conn%d", i);
        redisAppendCommand(cs[i], "GET conn%d", (i + 1) % N);
        redisAppendCommand(cs[i], "PING");
        ck_assert_int_eq(redisBufferWrite(cs[i], &(int){0}), REDIS_OK);
    }
    for (int i = 0; i < N; i++) {
        redisReply *r;
        ck_assert_int_eq(redisGetReply(cs[i], (void **)&r), REDIS_OK);
        ck_assert_str_eq(r->str, "OK");
        freeReplyObject(r);
        ck_assert_int_eq(redisGetReply(cs[i], (void **)&r), REDIS_OK);
        ck_assert_int_eq(r->integer, i + 1);
        freeReplyObject(r);
        ck_assert_int_eq(redisGetReply(cs[i], (void **)&r), REDIS_OK);
        ck_assert(r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_NIL);
        freeReplyObject(r);
        ck_assert_int_eq(redisGetReply(cs[i], (void **)&r), REDIS_OK);
        ck_assert_str_eq(r->str, "PONG");
        freeReplyObject(r);
    }
    redisReply *r = cmd(cs[0], "INFO clients");
    long clients = 0;
    const char *p = strstr(r->str, "connected_clients:");
    ck_assert_ptr_nonnull(p);
    clients = atol(p + 18);
    ck_assert_msg(clients >= N / 3, "node 0 sees %ld clients", clients);
    freeReplyObject(r);
    for (int i = 0; i < N; i++) {
        char want[16];
        snprintf(want, sizeof want, "%d", i + 1);
        if (i % 50 == 0) expect_str(cs[(i + 7) % N], want, "GET conn%d", i);
    }
    for (int i = 0; i < N; i++) redisFree(cs[i]);
    it_end();
}
END_TEST

/* A client is counted until the server's IO thread has read its EOF, so
 * right after clients close, a new one may still be over --resp-max-clients
 * (as with Redis).  True once a new client is admitted: it got +PONG; the
 * admitted socket is kept in *(int *)p. */
static bool admitted_again(void *p)
{
    int s = raw_connect(0);
    raw_send(s, "PING\r\n");
    raw_ctx line = {s, "\r\n", false};
    if (it_wait_for(raw_cond, &line, 10000) && strstr(raw_buf, "+PONG\r\n")) {
        *(int *)p = s;
        return true;
    }
    close(s);
    return false;
}

/* INFO clients on c says c is the only client. */
static char info_buf[256];
static bool alone(void *ctx)
{
    redisReply *r = redisCommand(ctx, "INFO clients");
    bool ok = r && r->type == REDIS_REPLY_STRING && strstr(r->str, "connected_clients:1\r\n");
    snprintf(info_buf, sizeof info_buf, "%s", r && r->str ? r->str : "no reply");
    if (r) freeReplyObject(r);
    return ok;
}

START_TEST(max_clients_and_idle_timeout)
{
    it_begin("resp_limits");
    const char *extra[] = {"--resp-max-clients", "4", "--resp-timeout", "1", "--resp-output-limit", "4096", NULL};
    start_grid(1, 1, extra);
    wait_serving(0, 30000);
    redisContext *cs[4];
    /* wait_serving's client has closed, but the server counts it until its
     * IO thread sees the close: the first client waits until it is alone
     * (a busy machine let a fourth client be refused before). */
    cs[0] = conn_to(0);
    ck_assert_msg(it_wait_for(alone, cs[0], 30000), "the closed probe client still counts: %s", info_buf);
    for (int i = 0; i < 4; i++) {
        if (i) cs[i] = conn_to(0);
        expect_status(cs[i], "PONG", "PING");
    }
    int s = raw_connect(0);
    ck_assert_msg(raw_wait_contains(s, "-ERR max number of clients reached\r\n"), "5th client: %s", raw_buf);
    ck_assert(raw_wait_closed(s));
    close(s);
    for (int i = 0; i < 4; i++) redisFree(cs[i]);
    /* Closed clients free their places; idle clients are closed after
     * --resp-timeout; busy ones are not. */
    ck_assert_msg(it_wait_for(admitted_again, &s, 30000), "no client admitted after 4 of 4 closed: %s", raw_buf);
    ck_assert_msg(raw_wait_closed(s), "an idle client stays open past --resp-timeout");
    close(s);
    /* A reply above --resp-output-limit closes that client only. */
    redisContext *c = conn_to(0);
    static char big[8000];
    memset(big, 'b', sizeof big - 1);
    expect_status(c, "OK", "SET big %s", big);
    expect_int(c, (long long)strlen(big), "STRLEN big");
    s = raw_connect(0);
    raw_send(s, "GET big\r\n");
    ck_assert_msg(raw_wait_closed(s), "a reply over the output limit must close the client");
    ck_assert_msg(!strstr(raw_buf, "bbbb"), "no part of the oversized reply may be sent");
    close(s);
    expect_status(c, "PONG", "PING");
    redisFree(c);
    it_end();
}
END_TEST

/* CPU seconds process pid has used (user + system). */
static double cpu_seconds(pid_t pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    size_t k = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[k] = 0;
    const char *p = strrchr(buf, ')'); /* the command name may hold spaces */
    ck_assert_ptr_nonnull(p);
    unsigned long long ut = 0, st = 0;
    /* after ")": state, then fields 4..13; utime and stime are 14 and 15 */
    ck_assert_int_eq(sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st), 2);
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

/* A polling IO thread (wait_events) must stop polling when requests stop:
 * a node left spinning burns a core of a shared host for nothing.  A busy
 * machine only lowers what the node gets, so the bounds hold under load;
 * a thread that polled on would use about a whole second per second. */
START_TEST(idle_node_sleeps)
{
    it_begin("resp_idle");
    const char *extra[] = {"--resp-poll-us", "1000", NULL}; /* a wider window than the default: easier to catch */
    start_grid(1, 1, extra);
    wait_serving(0, 30000);
    redisContext *c = conn_to(0);
    for (int i = 0; i < 20000; i++) redisAppendCommand(c, "SET k%d %d", i % 1000, i);
    for (int i = 0; i < 20000; i++) {
        redisReply *r = NULL;
        ck_assert_int_eq(redisGetReply(c, (void **)&r), REDIS_OK);
        freeReplyObject(r);
    }
    double t0 = cpu_seconds(srv[0]->pid);
    sleep(2);
    double idle = cpu_seconds(srv[0]->pid) - t0;
    ck_assert_msg(idle < 0.5, "an idle node used %.2f s of CPU in 2 s after its load stopped", idle);
    /* Sparse requests: each opens a window of 1 ms at most. */
    t0 = cpu_seconds(srv[0]->pid);
    for (int i = 0; i < 100; i++) {
        expect_status(c, "OK", "SET sparse %d", i);
        usleep(20000);
    }
    double sparse = cpu_seconds(srv[0]->pid) - t0;
    ck_assert_msg(sparse < 1.0, "100 requests 20 ms apart cost the node %.2f s of CPU", sparse);
    redisFree(c);
    it_end();
}
END_TEST

typedef struct lost_ctx {
    const char *key;
} lost_ctx;

static bool key_lost(void *p)
{
    lost_ctx *x = p;
    struct timeval tv = {2, 0};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", resp_base, tv);
    bool ok = false;
    if (c && !c->err) {
        redisSetTimeout(c, tv);
        redisReply *r = redisCommand(c, "GET %s", x->key);
        ok = r && r->type == REDIS_REPLY_ERROR && !strncmp(r->str, "CLUSTERDOWN Hash slot not served: partition ", 44) &&
             strstr(r->str, " is LOST");
        if (r) freeReplyObject(r);
    }
    if (c) redisFree(c);
    return ok;
}

/* The baseline counts n servers: until it does, a kill can leave the side
 * without quorum (the baseline grows one server at a time). */
static bool baseline_has(void *ctx)
{
    json_t *top = it_top(finder, NULL, NULL);
    bool ok = top && json_integer_value(json_object_get(json_object_get(top, "quorum"), "baseline_nodes")) ==
                         *(long *)ctx;
    json_decref(top);
    return ok;
}

START_TEST(lost_partition_is_clusterdown)
{
    it_begin("resp_lost");
    const char *extra[] = {"--cache", "default:backups=0", NULL};
    /* Three servers: one killed leaves two of three, a quorum of the
     * baseline (of two, the survivor alone would refuse everything). */
    start_grid(3, 3, extra);
    wait_spread(3);
    ck_assert_int_eq(slots_ports(0, slot_p, slot_n), 16384);
    /* One key on each node, by CLUSTER KEYSLOT and CLUSTER SLOTS. */
    char on[2][32] = {"", ""};
    redisContext *c = conn_to(0);
    for (int i = 0; i < 1000 && (!on[0][0] || !on[1][0]); i++) {
        char k[32];
        snprintf(k, sizeof k, "lost%d", i);
        redisReply *r = cmd(c, "CLUSTER KEYSLOT %s", k);
        int owner = slot_p[r->integer][0] - resp_base;
        freeReplyObject(r);
        if (owner >= 0 && owner < 2 && !on[owner][0]) snprintf(on[owner], sizeof on[owner], "%s", k);
    }
    ck_assert(on[0][0] && on[1][0]);
    expect_status(c, "OK", "SET %s a", on[0]);
    expect_status(c, "OK", "SET %s b", on[1]);
    redisFree(c);
    long three = 3;
    ck_assert_msg(it_wait_for(baseline_has, &three, 30000), "the baseline never counted the three servers");
    it_signal(srv[1], SIGKILL);
    lost_ctx x = {on[1]};
    ck_assert_msg(it_wait_for(key_lost, &x, 30000), "a key of the killed node (backups=0) never got CLUSTERDOWN");
    c = conn_to(0);
    expect_str(c, "a", "GET %s", on[0]); /* the survivor's partitions still serve */
    redisReply *r = cmd(c, "CLUSTER INFO");
    ck_assert_msg(strstr(r->str, "cluster_state:fail"), "CLUSTER INFO after a loss: %s", r->str);
    freeReplyObject(r);
    redisFree(c);
    it_end();
}
END_TEST

/* ---- rmw_atomic_on_grid: SETBIT, INCRBYFLOAT, SETRANGE from several
 * connections at once (each proxied to the key's primary), backups=1
 * full_sync: no update is lost, every INCRBYFLOAT saw a distinct total,
 * the copies agree (`lattice verify`), and the values survive the
 * primary's kill -9. ---- */

#define RMW_THREADS 4
#define RMW_ROUNDS 120

/* A worker's replies that were not what the command must answer. */
typedef struct bad_log {
    int errors;
    char first_err[160];
} bad_log;

static void note_bad(bad_log *b, const char *what, const redisReply *r)
{
    if (!b->errors++)
        snprintf(b->first_err, sizeof b->first_err, "%s: %s", what, r ? (r->str ? r->str : "(not a string)") : "no reply");
}

typedef struct rmw_worker {
    int t;
    pthread_t th;
    bad_log bad;
    double sums[RMW_ROUNDS];
} rmw_worker;

static void *rmw_work(void *arg)
{
    rmw_worker *w = arg;
    struct timeval tv = {30, 0};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", resp_base + w->t % 3, tv);
    if (!c || c->err) {
        note_bad(&w->bad, "connect", NULL);
        if (c) redisFree(c);
        return NULL;
    }
    redisSetTimeout(c, tv);
    char slot[2] = {(char)('a' + w->t), (char)('a' + w->t)};
    for (int i = 0; i < RMW_ROUNDS; i++) {
        long long n = (long long)w->t * RMW_ROUNDS + i;
        redisReply *r = redisCommand(c, "SETBIT rmw:bits %lld 1", n);
        if (!r || r->type != REDIS_REPLY_INTEGER || r->integer != 0) note_bad(&w->bad, "SETBIT", r); /* each bit once */
        if (r) freeReplyObject(r);
        r = redisCommand(c, "INCRBYFLOAT rmw:sum 0.5");
        if (!r || r->type != REDIS_REPLY_STRING) note_bad(&w->bad, "INCRBYFLOAT", r);
        else w->sums[i] = strtod(r->str, NULL);
        if (r) freeReplyObject(r);
        r = redisCommand(c, "SETRANGE rmw:range %lld %b", 2 * n, slot, (size_t)2);
        if (!r || r->type != REDIS_REPLY_INTEGER) note_bad(&w->bad, "SETRANGE", r);
        if (r) freeReplyObject(r);
    }
    redisFree(c);
    return NULL;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The three keys hold exactly what every update together makes. */
static bool rmw_values_exact(redisContext *c, char *why, size_t cap)
{
    enum { N = RMW_THREADS * RMW_ROUNDS };
    char bits[N / 8], range[2 * N];
    memset(bits, 0xff, sizeof bits);
    for (int k = 0; k < N; k++) range[2 * k] = range[2 * k + 1] = (char)('a' + k / RMW_ROUNDS);
    char sum[32];
    snprintf(sum, sizeof sum, "%d", N / 2);
    redisReply *r = redisCommand(c, "GET rmw:bits");
    bool ok = r && r->type == REDIS_REPLY_STRING && r->len == sizeof bits && !memcmp(r->str, bits, sizeof bits);
    if (!ok)
        snprintf(why, cap, "rmw:bits: %zu bytes%s%s", r && r->type == REDIS_REPLY_STRING ? r->len : 0,
                 r && r->type == REDIS_REPLY_ERROR ? ", error " : "", r && r->type == REDIS_REPLY_ERROR ? r->str : "");
    if (r) freeReplyObject(r);
    r = ok ? redisCommand(c, "GET rmw:sum") : NULL;
    if (ok && !(ok = r && r->type == REDIS_REPLY_STRING && !strcmp(r->str, sum)))
        snprintf(why, cap, "rmw:sum: %s, want %s", r && r->str ? r->str : "?", sum);
    if (r) freeReplyObject(r);
    r = ok ? redisCommand(c, "GET rmw:range") : NULL;
    if (ok && !(ok = r && r->type == REDIS_REPLY_STRING && r->len == sizeof range && !memcmp(r->str, range, sizeof range)))
        snprintf(why, cap, "rmw:range differs (%zu bytes)", r && r->type == REDIS_REPLY_STRING ? r->len : 0);
    if (r) freeReplyObject(r);
    return ok;
}

/* it_wait_for's test that node's values are exactly what a check wants. */
typedef struct exact_ctx {
    int node;
    bool (*exact)(redisContext *c, char *why, size_t cap);
    char why[160];
} exact_ctx;

static bool reads_exact(void *p)
{
    exact_ctx *x = p;
    redisContext *c = try_conn(x->node);
    bool ok = c && x->exact(c, x->why, sizeof x->why);
    if (c) redisFree(c);
    return ok;
}

/* `lattice verify default`: no conflict between the copies. */
static void verify_clean(void)
{
    int rc = it_capture(out_buf, sizeof out_buf, "%s --ip-finder %s --json verify default", LATTICE_CLI_PATH, finder);
    json_t *j = json_loads(out_buf, 0, NULL);
    ck_assert_msg(rc == 0 && j, "verify: rc %d: %.300s", rc, out_buf);
    ck_assert_msg(json_array_size(json_object_get(j, "conflicts")) == 0, "verify: %.300s", out_buf);
    json_decref(j);
}

/* The RESP port of the primary of key's slot, from node i's CLUSTER SLOTS. */
static int rmw_primary_port(int i, const char *key)
{
    redisContext *c = conn_to(i);
    redisReply *k = cmd(c, "CLUSTER KEYSLOT %s", key), *r = cmd(c, "CLUSTER SLOTS");
    int port = -1;
    for (size_t e = 0; e < r->elements; e++) {
        redisReply *rg = r->element[e];
        if (rg->element[0]->integer <= k->integer && k->integer <= rg->element[1]->integer)
            port = (int)rg->element[2]->element[1]->integer;
    }
    freeReplyObject(k);
    freeReplyObject(r);
    redisFree(c);
    return port;
}

START_TEST(rmw_atomic_on_grid)
{
    it_begin("resp_rmw_grid");
    const char *extra[] = {"--cache", "default:backups=1,sync=full_sync", NULL};
    start_grid(3, 3, extra);
    wait_spread(3);
    for (int i = 0; i < 3; i++) wait_serving(i, 30000);
    static rmw_worker w[RMW_THREADS];
    for (int t = 0; t < RMW_THREADS; t++) {
        w[t].t = t;
        ck_assert_int_eq(pthread_create(&w[t].th, NULL, rmw_work, &w[t]), 0);
    }
    for (int t = 0; t < RMW_THREADS; t++) pthread_join(w[t].th, NULL);
    static double all[RMW_THREADS * RMW_ROUNDS];
    for (int t = 0; t < RMW_THREADS; t++) {
        ck_assert_msg(w[t].bad.errors == 0, "worker %d: %d bad replies, first %s", t, w[t].bad.errors, w[t].bad.first_err);
        memcpy(all + t * RMW_ROUNDS, w[t].sums, sizeof w[t].sums);
    }
    /* Every INCRBYFLOAT answered a different total: 0.5, 1, ... in all. */
    qsort(all, RMW_THREADS * RMW_ROUNDS, sizeof all[0], cmp_double);
    for (int k = 0; k < RMW_THREADS * RMW_ROUNDS; k++)
        ck_assert_msg(all[k] == 0.5 * (k + 1), "INCRBYFLOAT results: #%d is %g", k, all[k]);
    exact_ctx rd = {0, rmw_values_exact, ""};
    ck_assert_msg(reads_exact(&rd), "after the updates: %s", rd.why);
    verify_clean();
    /* The primary of the bitmap dies: a survivor serves the same values.
     * Not before the baseline holds all three (it grows one server at a time
     * after the grid forms, and the updates above can be done sooner): a
     * kill at a baseline of two would leave the survivors without quorum. */
    ck_assert_msg(it_wait_baseline(finder, 3, 60000), "the baseline never held the three servers");
    int victim = rmw_primary_port(0, "rmw:bits") - resp_base;
    ck_assert_msg(victim >= 0 && victim < 3, "no primary for rmw:bits");
    it_signal(srv[victim], SIGKILL);
    rd.node = (victim + 1) % 3;
    ck_assert_msg(it_wait_for(reads_exact, &rd, 60000), "after the primary's kill: %s", rd.why);
    it_end();
}
END_TEST

/* ---- end of rmw_atomic_on_grid ---- */

/* ---- hashes_atomic_on_grid: HINCRBY, HSET, HSETNX and HDEL of shared
 * hashes from several connections at once (each proxied to the key's
 * primary), backups=1 full_sync: every HINCRBY answered a distinct total,
 * every HSET of a new field counted it once, the hashes hold exactly what
 * every command together makes through every node, the copies agree
 * (`lattice verify`), and the hashes survive their primary's kill -9. ---- */

#define HX_THREADS 4
#define HX_ROUNDS 100

typedef struct hx_worker {
    int t;
    pthread_t th;
    bad_log bad;
    long long totals[HX_ROUNDS];
} hx_worker;

static void *hx_work(void *arg)
{
    hx_worker *w = arg;
    struct timeval tv = {30, 0};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", resp_base + w->t % 3, tv);
    if (!c || c->err) {
        note_bad(&w->bad, "connect", NULL);
        if (c) redisFree(c);
        return NULL;
    }
    redisSetTimeout(c, tv);
    for (int i = 0; i < HX_ROUNDS; i++) {
        redisReply *r = redisCommand(c, "HINCRBY hx:count total 1");
        if (!r || r->type != REDIS_REPLY_INTEGER) note_bad(&w->bad, "HINCRBY", r);
        else w->totals[i] = r->integer;
        if (r) freeReplyObject(r);
        r = redisCommand(c, "HSET hx:set f%d_%d v%d gone%d_%d x", w->t, i, i, w->t, i);
        if (!r || r->type != REDIS_REPLY_INTEGER || r->integer != 2) note_bad(&w->bad, "HSET", r); /* two new fields */
        if (r) freeReplyObject(r);
        r = redisCommand(c, "HSETNX hx:set f%d_%d other", w->t, i);
        if (!r || r->type != REDIS_REPLY_INTEGER || r->integer != 0) note_bad(&w->bad, "HSETNX", r);
        if (r) freeReplyObject(r);
        r = redisCommand(c, "HDEL hx:set gone%d_%d", w->t, i);
        if (!r || r->type != REDIS_REPLY_INTEGER || r->integer != 1) note_bad(&w->bad, "HDEL", r);
        if (r) freeReplyObject(r);
    }
    redisFree(c);
    return NULL;
}

/* The two hashes hold exactly what every command together makes. */
static bool hx_values_exact(redisContext *c, char *why, size_t cap)
{
    enum { N = HX_THREADS * HX_ROUNDS };
    redisReply *r = redisCommand(c, "HGET hx:count total");
    bool ok = r && r->type == REDIS_REPLY_STRING && atoll(r->str) == N;
    if (!ok) snprintf(why, cap, "hx:count total: %s", r && r->str ? r->str : "(no string)");
    if (r) freeReplyObject(r);
    r = ok ? redisCommand(c, "HGETALL hx:set") : NULL;
    if (ok && !(ok = r && r->type == REDIS_REPLY_ARRAY && r->elements == 2 * N))
        snprintf(why, cap, "hx:set: %zu elements, want %d", r && r->type == REDIS_REPLY_ARRAY ? r->elements : 0, 2 * N);
    static char seen[HX_THREADS][HX_ROUNDS];
    memset(seen, 0, sizeof seen);
    for (size_t e = 0; ok && e + 1 < r->elements; e += 2) {
        int t, i, v;
        if (sscanf(r->element[e]->str, "f%d_%d", &t, &i) != 2 || t < 0 || t >= HX_THREADS || i < 0 || i >= HX_ROUNDS ||
            seen[t][i]++ || sscanf(r->element[e + 1]->str, "v%d", &v) != 1 || v != i) {
            snprintf(why, cap, "hx:set: field %s = %s", r->element[e]->str, r->element[e + 1]->str);
            ok = false;
        }
    }
    if (r) freeReplyObject(r);
    return ok;
}

static int cmp_ll(const void *a, const void *b)
{
    long long x = *(const long long *)a, y = *(const long long *)b;
    return x < y ? -1 : x > y;
}

START_TEST(hashes_atomic_on_grid)
{
    it_begin("resp_hash_grid");
    const char *extra[] = {"--cache", "default:backups=1,sync=full_sync", NULL};
    start_grid(3, 3, extra);
    wait_spread(3);
    for (int i = 0; i < 3; i++) wait_serving(i, 30000);
    static hx_worker w[HX_THREADS];
    for (int t = 0; t < HX_THREADS; t++) {
        w[t].t = t;
        ck_assert_int_eq(pthread_create(&w[t].th, NULL, hx_work, &w[t]), 0);
    }
    for (int t = 0; t < HX_THREADS; t++) pthread_join(w[t].th, NULL);
    static long long all[HX_THREADS * HX_ROUNDS];
    for (int t = 0; t < HX_THREADS; t++) {
        ck_assert_msg(w[t].bad.errors == 0, "worker %d: %d bad replies, first %s", t, w[t].bad.errors, w[t].bad.first_err);
        memcpy(all + t * HX_ROUNDS, w[t].totals, sizeof w[t].totals);
    }
    /* Every HINCRBY answered a different total: 1, 2, ... in all. */
    qsort(all, HX_THREADS * HX_ROUNDS, sizeof all[0], cmp_ll);
    for (int k = 0; k < HX_THREADS * HX_ROUNDS; k++)
        ck_assert_msg(all[k] == k + 1, "HINCRBY results: #%d is %lld", k, all[k]);
    for (int i = 0; i < 3; i++) {
        exact_ctx rd = {i, hx_values_exact, ""};
        ck_assert_msg(reads_exact(&rd), "after the updates, through node %d: %s", i, rd.why);
    }
    verify_clean();
    /* The primary of hx:set dies (once the baseline holds all three, as
     * rmw_atomic_on_grid): a survivor serves the same hashes. */
    ck_assert_msg(it_wait_baseline(finder, 3, 60000), "the baseline never held the three servers");
    int victim = rmw_primary_port(0, "hx:set") - resp_base;
    ck_assert_msg(victim >= 0 && victim < 3, "no primary for hx:set");
    it_signal(srv[victim], SIGKILL);
    exact_ctx rd = {(victim + 1) % 3, hx_values_exact, ""};
    ck_assert_msg(it_wait_for(reads_exact, &rd, 60000), "after the primary's kill: %s", rd.why);
    it_end();
}
END_TEST

/* ---- end of hashes_atomic_on_grid ---- */

/* ---- set_operations_on_grid: 4 clients SMOVE the same 200 members from
 * {g}a to {g}b through every node at once (backups=1 full_sync): each
 * member moves once (200 replies of 1 in all), every member ends in one
 * set; SINTERSTORE, ZUNIONSTORE and a SUNIONSTORE over keys of three slots
 * (one transaction) store what redis-server would, the copies agree
 * (`lattice verify`), and the results survive their primary's kill -9. ---- */

#define SM_THREADS 4
#define SM_MEMBERS 200

typedef struct sm_worker {
    int t;
    pthread_t th;
    bad_log bad;
    int moved;
} sm_worker;

static void *sm_work(void *arg)
{
    sm_worker *w = arg;
    struct timeval tv = {30, 0};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", resp_base + w->t % 3, tv);
    if (!c || c->err) {
        note_bad(&w->bad, "connect", NULL);
        if (c) redisFree(c);
        return NULL;
    }
    redisSetTimeout(c, tv);
    for (int i = 0; i < SM_MEMBERS; i++) {
        int m = (i + w->t * 37) % SM_MEMBERS; /* each worker in its own order */
        redisReply *r = redisCommand(c, "SMOVE {g}a {g}b m%d", m);
        if (!r || r->type != REDIS_REPLY_INTEGER || r->integer < 0 || r->integer > 1) note_bad(&w->bad, "SMOVE", r);
        else w->moved += (int)r->integer;
        if (r) freeReplyObject(r);
    }
    redisFree(c);
    return NULL;
}

static bool reply_is(redisContext *c, const char *command, const char *want, char *why, size_t cap)
{
    redisReply *r = redisCommand(c, command);
    char got[512] = "";
    size_t at = 0;
    if (r && r->type == REDIS_REPLY_INTEGER) at += (size_t)snprintf(got, sizeof got, "%lld", r->integer);
    for (size_t i = 0; r && r->type == REDIS_REPLY_ARRAY && i < r->elements && at < sizeof got; i++)
        at += (size_t)snprintf(got + at, sizeof got - at, "%s%s", i ? " " : "", r->element[i]->str ? r->element[i]->str : "?");
    bool ok = r && (r->type == REDIS_REPLY_INTEGER || r->type == REDIS_REPLY_ARRAY) && !strcmp(got, want);
    if (!ok) snprintf(why, cap, "%s: %s, want %s", command, r && r->type == REDIS_REPLY_ERROR ? r->str : got, want);
    if (r) freeReplyObject(r);
    return ok;
}

/* What the commands together made, read through one node. */
static bool sm_values_exact(redisContext *c, char *why, size_t cap)
{
    char n[16];
    snprintf(n, sizeof n, "%d", SM_MEMBERS);
    return reply_is(c, "SCARD {g}a", "0", why, cap) && reply_is(c, "SCARD {g}b", n, why, cap) &&
           reply_is(c, "EXISTS {g}a", "0", why, cap) && reply_is(c, "SMEMBERS {g}inter", "3 4", why, cap) &&
           reply_is(c, "ZRANGE {g}zu 0 -1 WITHSCORES", "a 1 c 3 b 12 d 30", why, cap) &&
           reply_is(c, "SMEMBERS {z}u", "1 2 3 4 9", why, cap);
}

START_TEST(set_operations_on_grid)
{
    it_begin("resp_setop_grid");
    const char *extra[] = {"--cache", "default:backups=1,sync=full_sync", NULL};
    start_grid(3, 3, extra);
    wait_spread(3);
    for (int i = 0; i < 3; i++) wait_serving(i, 30000);
    redisContext *c = conn_to(1);
    static char line[8192];
    size_t at = (size_t)snprintf(line, sizeof line, "SADD {g}a");
    for (int i = 0; i < SM_MEMBERS; i++) at += (size_t)snprintf(line + at, sizeof line - at, " m%d", i);
    redisReply *r = cmd(c, line);
    ck_assert_int_eq(r->integer, SM_MEMBERS);
    freeReplyObject(r);
    static sm_worker w[SM_THREADS];
    for (int t = 0; t < SM_THREADS; t++) {
        w[t].t = t;
        ck_assert_int_eq(pthread_create(&w[t].th, NULL, sm_work, &w[t]), 0);
    }
    int moved = 0;
    for (int t = 0; t < SM_THREADS; t++) {
        pthread_join(w[t].th, NULL);
        ck_assert_msg(w[t].bad.errors == 0, "worker %d: %d bad replies, first %s", t, w[t].bad.errors, w[t].bad.first_err);
        moved += w[t].moved;
    }
    ck_assert_int_eq(moved, SM_MEMBERS); /* each member moved once, whoever moved it */
    static const char *const setup[] = {
        "SADD {g}s1 1 2 3 4", "SADD {g}s2 3 4 5", "SINTERSTORE {g}inter {g}s1 {g}s2", "ZADD {g}z1 1 a 2 b 3 c",
        "ZADD {g}z2 10 b 30 d", "ZUNIONSTORE {g}zu 2 {g}z1 {g}z2", "SADD {x}s 1 2 9", "SADD {y}s 3 4 9",
        "SUNIONSTORE {z}u {x}s {y}s",
    };
    for (size_t i = 0; i < sizeof setup / sizeof setup[0]; i++) {
        r = cmd(c, setup[i]);
        ck_assert_msg(r->type == REDIS_REPLY_INTEGER, "%s: %s", setup[i], r->str ? r->str : "?");
        freeReplyObject(r);
    }
    redisFree(c);
    for (int i = 0; i < 3; i++) {
        exact_ctx rd = {i, sm_values_exact, ""};
        ck_assert_msg(reads_exact(&rd), "through node %d: %s", i, rd.why);
    }
    verify_clean();
    /* The primary of {g} dies: a survivor serves the same results. */
    ck_assert_msg(it_wait_baseline(finder, 3, 60000), "the baseline never held the three servers");
    int victim = rmw_primary_port(0, "{g}b") - resp_base;
    ck_assert_msg(victim >= 0 && victim < 3, "no primary for {g}b");
    it_signal(srv[victim], SIGKILL);
    exact_ctx rd = {(victim + 1) % 3, sm_values_exact, ""};
    ck_assert_msg(it_wait_for(reads_exact, &rd, 60000), "after the primary's kill: %s", rd.why);
    it_end();
}
END_TEST

/* ---- end of set_operations_on_grid ---- */

/* ---- blocking_pops_on_grid: a BLPOP waits at the key's primary, through
 * another node; the primary dies while it waits: after the failover a push
 * still reaches the waiting client.  The issuing node dies while its client
 * waits: the primary drops the waiter, and a push after that stays in the
 * list instead of being popped for nobody. ---- */

static long long blocked_on(int i)
{
    redisContext *c = conn_to(i);
    redisReply *r = cmd(c, "INFO clients");
    const char *p = r->type == REDIS_REPLY_STRING ? strstr(r->str, "blocked_clients:") : NULL;
    long long n = p ? atoll(p + strlen("blocked_clients:")) : -1;
    freeReplyObject(r);
    redisFree(c);
    return n;
}

/* RPUSH key v through node i until it is acknowledged (a failover may
 * refuse it for a while); false after 60 s. */
static bool push_until_done(int i, const char *key, const char *v)
{
    for (int t = 0; t < 600; t++) {
        redisContext *c = try_conn(i);
        redisReply *r = c ? redisCommand(c, "RPUSH %s %s", key, v) : NULL;
        bool ok = r && r->type == REDIS_REPLY_INTEGER;
        if (r) freeReplyObject(r);
        if (c) redisFree(c);
        if (ok) return true;
        usleep(100 * 1000);
    }
    return false;
}

typedef struct drop_ctx {
    int issuer;
} drop_ctx;

/* Both survivors' topology counts two servers. */
static bool issuer_gone(void *p)
{
    const drop_ctx *x = p;
    for (int i = 0; i < 3; i++) {
        if (i == x->issuer) continue;
        redisContext *c = try_conn(i);
        redisReply *r = c ? redisCommand(c, "CLUSTER NODES") : NULL;
        int lines = 0;
        if (r && r->type == REDIS_REPLY_STRING)
            for (const char *q = r->str; *q; q++) lines += *q == '\n';
        if (r) freeReplyObject(r);
        if (c) redisFree(c);
        if (lines != 2) return false;
    }
    return true;
}

START_TEST(blocking_pops_on_grid)
{
    it_begin("resp_blocking_grid");
    const char *extra[] = {"--cache", "default:backups=1,sync=full_sync", NULL};
    start_grid(3, 3, extra);
    wait_spread(3);
    for (int i = 0; i < 3; i++) wait_serving(i, 30000);
    ck_assert_msg(it_wait_baseline(finder, 3, 60000), "the baseline never held the three servers");
    /* The primary dies while a client waits through another node. */
    int p = rmw_primary_port(0, "bq:1") - resp_base;
    ck_assert_msg(p >= 0 && p < 3, "no primary for bq:1");
    int a = (p + 1) % 3, o = (p + 2) % 3;
    int fd = raw_connect(a);
    raw_send(fd, "BLPOP bq:1 0\r\n");
    for (int t = 0; t < 500 && blocked_on(a) != 1; t++) usleep(20 * 1000);
    ck_assert_int_eq(blocked_on(a), 1);
    it_signal(srv[p], SIGKILL);
    ck_assert(it_wait_exit(srv[p], 30000));
    ck_assert_msg(push_until_done(o, "bq:1", "after-failover"), "no RPUSH acknowledged after the failover");
    raw_ctx x = {fd, "after-failover", false};
    ck_assert_msg(it_wait_for(raw_cond, &x, 60000), "the waiting client got %s", raw_buf);
    ck_assert_str_eq(raw_buf, "*2\r\n$4\r\nbq:1\r\n$14\r\nafter-failover\r\n");
    close(fd);
    /* Back to three; then the issuing node dies while its client waits. */
    start_node(p, extra);
    wait_serving(p, 60000);
    ck_assert_msg(it_wait_for(rg_baseline_of_three, NULL, 60000), "the baseline never held three again");
    /* settled: no rebalance moves bq:2's partition while its client waits */
    ck_assert_msg(it_wait_settled(finder, "default", 3, 60000), "the grid never settled after the restart");
    int q = rmw_primary_port(o, "bq:2") - resp_base;
    ck_assert_msg(q >= 0 && q < 3, "no primary for bq:2");
    int issuer = (q + 1) % 3, third = (q + 2) % 3;
    fd = raw_connect(issuer);
    raw_send(fd, "BLPOP bq:2 0\r\n");
    for (int t = 0; t < 500 && blocked_on(issuer) != 1; t++) usleep(20 * 1000);
    ck_assert_int_eq(blocked_on(issuer), 1);
    it_signal(srv[issuer], SIGKILL);
    ck_assert(it_wait_exit(srv[issuer], 30000));
    close(fd);
    /* Once the survivors' view lost the issuer, a push is not popped for
     * it: its waiter is dropped where it waits (or, still on its way, where
     * it arrives). */
    drop_ctx dc = {issuer};
    ck_assert_msg(it_wait_for(issuer_gone, &dc, 60000), "the survivors never saw the issuer leave");
    ck_assert_msg(push_until_done(third, "bq:2", "kept"), "no RPUSH acknowledged");
    usleep(300 * 1000); /* a waiter left would have popped it by now */
    redisContext *c = conn_to(third);
    redisReply *r = cmd(c, "LRANGE bq:2 0 -1");
    ck_assert_msg(r->type == REDIS_REPLY_ARRAY && r->elements == 1 && !strcmp(r->element[0]->str, "kept"),
                  "bq:2 after the push: %zu elements", r->elements);
    freeReplyObject(r);
    redisFree(c);
    it_end();
}
END_TEST

/* ---- CLIENT LIST/KILL, MONITOR across IO threads ---- */

enum { IC = 12 };

/* CLIENT LIST's line of connection id, copied into line; false when absent. */
static bool list_line_of(const char *list, long long id, char *line, size_t cap)
{
    char want[40];
    snprintf(want, sizeof want, "id=%lld ", id);
    for (const char *p = list; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
        if (strncmp(p, want, strlen(want))) continue;
        const char *e = strchr(p, '\n');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        snprintf(line, cap, "%.*s", (int)n, p);
        return true;
    }
    return false;
}

typedef struct gone_ctx {
    redisContext *c;
    long long id;
} gone_ctx;

static bool client_gone(void *p)
{
    gone_ctx *g = p;
    redisReply *r = cmd(g->c, "CLIENT LIST");
    char line[1024];
    bool gone = !list_line_of(r->str, g->id, line, sizeof line);
    freeReplyObject(r);
    return gone;
}

START_TEST(introspection_io_threads)
{
    it_begin("resp_intro");
    const char *extra[] = {"--resp-io-threads", "2", NULL};
    start_grid(1, 1, extra);
    wait_serving(0, 30000);
    /* Twelve connections: the kernel spreads them over both IO threads'
     * sockets (SO_REUSEPORT); CLIENT LIST must see every one. */
    redisContext *cs[IC];
    long long ids[IC];
    for (int i = 0; i < IC; i++) {
        cs[i] = conn_to(0);
        expect_status(cs[i], "OK", "CLIENT SETNAME conn%d", i);
        redisReply *r = cmd(cs[i], "CLIENT ID");
        ids[i] = r->integer;
        freeReplyObject(r);
    }
    redisReply *r = cmd(cs[0], "CLIENT LIST");
    ck_assert_int_eq(r->type, REDIS_REPLY_STRING);
    for (int i = 0; i < IC; i++) {
        char line[1024], name[32];
        ck_assert_msg(list_line_of(r->str, ids[i], line, sizeof line), "id %lld missing from\n%s", ids[i], r->str);
        snprintf(name, sizeof name, " name=conn%d ", i);
        ck_assert_msg(strstr(line, name), "connection %d's line: %s", i, line);
        ck_assert_msg(strstr(line, i ? " cmd=client|id " : " cmd=client|list "), "connection %d's cmd: %s", i, line);
    }
    freeReplyObject(r);
    r = cmd(cs[1], "CLIENT LIST ID %lld %lld 999999", ids[5], ids[2]);
    char l5[1024], l2[1024];
    ck_assert(list_line_of(r->str, ids[5], l5, sizeof l5) && list_line_of(r->str, ids[2], l2, sizeof l2));
    ck_assert_msg(strstr(r->str, l5) < strstr(r->str, l2), "CLIENT LIST ID keeps the order asked: %s", r->str);
    ck_assert_int_eq(strchr(strchr(r->str, '\n') + 1, '\n') - r->str + 1, (long)strlen(r->str)); /* two lines */
    freeReplyObject(r);
    /* CLIENT KILL ID closes exactly that one, whichever thread owns it. */
    for (int k = 2; k <= 3; k++) expect_int(cs[0], 1, "CLIENT KILL ID %lld", ids[k]);
    expect_int(cs[0], 0, "CLIENT KILL ID %lld", ids[2]);
    for (int k = 2; k <= 3; k++) {
        r = redisCommand(cs[k], "PING");
        ck_assert_msg(!r, "a killed connection still answers");
        redisFree(cs[k]);
        cs[k] = NULL;
    }
    for (int i = 0; i < IC; i++)
        if (cs[i]) expect_status(cs[i], "PONG", "PING");
    r = cmd(cs[0], "CLIENT LIST");
    char line[1024];
    ck_assert(!list_line_of(r->str, ids[2], line, sizeof line) && !list_line_of(r->str, ids[3], line, sizeof line));
    ck_assert(list_line_of(r->str, ids[4], line, sizeof line));
    freeReplyObject(r);
    /* Killing itself: the reply, then the close. */
    expect_int(cs[11], 1, "CLIENT KILL ID %lld SKIPME no", ids[11]);
    ck_assert_msg(!redisCommand(cs[11], "PING"), "CLIENT KILL of itself must close after the reply");
    redisFree(cs[11]);
    cs[11] = NULL;
    /* MONITOR sees the commands of another connection, in Redis's format. */
    r = cmd(cs[5], "CLIENT INFO");
    char addr[64] = "";
    ck_assert(sscanf(strstr(r->str, "addr="), "addr=%63s", addr) == 1);
    freeReplyObject(r);
    expect_status(cs[4], "OK", "MONITOR");
    expect_status(cs[5], "OK", "SET mk %b", "v\x00\"1", (size_t)4);
    expect_status(cs[5], "PONG", "PING");
    char want[160];
    snprintf(want, sizeof want, " [0 %s] \"SET\" \"mk\" \"v\\x00\\\"1\"", addr);
    ck_assert_int_eq(redisGetReply(cs[4], (void **)&r), REDIS_OK);
    ck_assert_msg(r->type == REDIS_REPLY_STATUS && strstr(r->str, want) && r->str[0] >= '1', "monitor line '%s'", r->str);
    freeReplyObject(r);
    ck_assert_int_eq(redisGetReply(cs[4], (void **)&r), REDIS_OK);
    ck_assert_msg(strstr(r->str, "] \"PING\""), "monitor line '%s'", r->str);
    freeReplyObject(r);
    r = cmd(cs[0], "CLIENT LIST ID %lld", ids[4]);
    ck_assert_msg(strstr(r->str, " flags=O "), "a monitor's flags: %s", r->str);
    freeReplyObject(r);
    redisFree(cs[4]);
    cs[4] = NULL;
    /* A monitor that never reads (a small receive buffer) is dropped once
     * its feed passes the bound; the node keeps serving the others. */
    int m = socket(AF_INET, SOCK_STREAM, 0);
    int small = 4096;
    setsockopt(m, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)resp_base)};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    ck_assert_int_eq(connect(m, (struct sockaddr *)&a, sizeof a), 0);
    static const char mon_req[] = "CLIENT ID\r\nMONITOR\r\n";
    ck_assert_int_eq(write(m, mon_req, sizeof mon_req - 1), (ssize_t)(sizeof mon_req - 1));
    char head[64] = "";
    size_t hl = 0;
    while (!strstr(head, "+OK\r\n") && hl < sizeof head - 1) {
        ssize_t n = read(m, head + hl, sizeof head - 1 - hl);
        ck_assert(n > 0);
        hl += (size_t)n;
        head[hl] = 0;
    }
    gone_ctx g = {cs[0], atoll(head + 1)};
    ck_assert(g.id > 0);
    static char big[64 * 1024];
    memset(big, 'm', sizeof big - 1);
    bool dropped = false;
    for (int round = 0; round < 100 && !dropped; round++) { /* at most 2000 x 64 KB */
        for (int k = 0; k < 20; k++) redisAppendCommand(cs[6], "SET flood %s", big);
        for (int k = 0; k < 20; k++) {
            ck_assert_int_eq(redisGetReply(cs[6], (void **)&r), REDIS_OK);
            ck_assert_str_eq(r->str, "OK");
            freeReplyObject(r);
        }
        dropped = client_gone(&g);
    }
    ck_assert_msg(dropped, "a monitor that never reads was never dropped");
    close(m);
    for (int i = 0; i < IC; i++)
        if (cs[i]) expect_status(cs[i], "PONG", "PING");
    expect_int(cs[7], (long long)strlen(big), "STRLEN flood");
    for (int i = 0; i < IC; i++)
        if (cs[i]) redisFree(cs[i]);
    it_end();
}
END_TEST

int main(int argc, char **argv)
{
    static const it_named tests[] = {
        {"commands_three_nodes", &commands_three_nodes},
        {"cluster_slots_match_partitions", &cluster_slots_match_partitions},
        {"redis_cli_and_benchmark", &redis_cli_and_benchmark},
        {"topology_change", &topology_change},
        {"auth_enforced", &auth_enforced},
        {"malformed_closes_only_offender", &malformed_closes_only_offender},
        {"thousand_connections", &thousand_connections},
        {"max_clients_and_idle_timeout", &max_clients_and_idle_timeout},
        {"lost_partition_is_clusterdown", &lost_partition_is_clusterdown},
        {"rmw_atomic_on_grid", &rmw_atomic_on_grid},
        {"hashes_atomic_on_grid", &hashes_atomic_on_grid},
        {"blocking_pops_on_grid", &blocking_pops_on_grid},
        {"set_operations_on_grid", &set_operations_on_grid},
        {"introspection_io_threads", &introspection_io_threads},
        {"idle_node_sleeps", &idle_node_sleeps},
    };
    Suite *s = suite_create("resp");
    TCase *tc = tcase_create("grid");
    tcase_set_timeout(tc, 240);
    it_add_named(tc, tests, sizeof tests / sizeof tests[0], argc, argv);
    suite_add_tcase(s, tc);
    return it_run_suite(s);
}
