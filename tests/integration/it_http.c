/*
 * The HTTP endpoint (--http-port): /metrics parsed by the Prometheus
 * reference parser (python3-prometheus-client, tests/integration/
 * prom_parse.py) with figures that follow what clients did, /health 200
 * while the node serves and 503 with the reason while it does not (a wrong
 * secret), /topology and /caches in the CLI's JSON shapes, and clear
 * answers to unknown pages and methods.
 */
#include <arpa/inet.h>
#include <check.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.h"

/* One HTTP/1.0 request to 127.0.0.1:port; returns the status code (-1 when
 * no answer) and the body in body (NUL-terminated). */
static int http_req(int port, const char *method, const char *path, char *body, size_t cap)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    body[0] = 0;
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    char req[256];
    int n = snprintf(req, sizeof req, "%s %s HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n", method, path);
    if (write(fd, req, (size_t)n) != n) {
        close(fd);
        return -1;
    }
    static char buf[1 << 20];
    size_t len = 0;
    ssize_t r;
    while (len < sizeof buf - 1 && (r = read(fd, buf + len, sizeof buf - 1 - len)) > 0) len += (size_t)r;
    close(fd);
    buf[len] = 0;
    int code = -1;
    if (sscanf(buf, "HTTP/1.%*d %d", &code) != 1) return -1;
    const char *b = strstr(buf, "\r\n\r\n");
    snprintf(body, cap, "%s", b ? b + 4 : "");
    return code;
}

static char body[1 << 20];

/* GET /metrics, parsed by the reference parser: the JSON of prom_parse.py. */
static json_t *metrics(int port)
{
    if (http_req(port, "GET", "/metrics", body, sizeof body) != 200) return NULL;
    const char *path = it_write_file("metrics.txt", body);
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s/tests/integration/prom_parse.py %s", LATTICE_SOURCE_DIR, path);
    FILE *f = popen(cmd, "r");
    static char out[1 << 21];
    size_t n = fread(out, 1, sizeof out - 1, f);
    out[n] = 0;
    if (pclose(f) != 0) return NULL;
    return json_loads(out, 0, NULL);
}

/* The value of the sample `name` whose labels include every k=v of want
 * (NULL-terminated pairs); -1 when there is none. */
static double sample(json_t *m, const char *name, const char *const *want)
{
    size_t i;
    json_t *s;
    json_array_foreach(json_object_get(m, "samples"), i, s) {
        if (strcmp(json_string_value(json_array_get(s, 0)), name) != 0) continue;
        json_t *labels = json_array_get(s, 1);
        bool match = true;
        for (int k = 0; want && want[k]; k += 2) {
            const char *v = json_string_value(json_object_get(labels, want[k]));
            match &= v && !strcmp(v, want[k + 1]);
        }
        if (match) return json_number_value(json_array_get(s, 2));
    }
    return -1;
}

static const char *family_type(json_t *m, const char *name)
{
    return json_string_value(json_object_get(json_object_get(m, "families"), name));
}

typedef struct grid {
    int peer, resp, http;
    char finder[64];
    it_proc *p[2];
} grid;

/* Two servers with the cache spec (and a second one, may be NULL). */
static void start_two(grid *g, const char *cache, const char *cache2)
{
    g->peer = it_free_ports(2);
    g->resp = it_free_ports(2);
    g->http = it_free_ports(2);
    snprintf(g->finder, sizeof g->finder, "127.0.0.1:%d..%d", g->peer, g->peer + 1);
    for (int i = 0; i < 2; i++) {
        char port[16], rp[16], hp[16], name[16];
        snprintf(port, sizeof port, "%d", g->peer + i);
        snprintf(rp, sizeof rp, "%d", g->resp + i);
        snprintf(hp, sizeof hp, "%d", g->http + i);
        snprintf(name, sizeof name, "n%d", i);
        const char *args[] = {"--port", port, "--port-range", "1", "--ip-finder", g->finder, "--failure-detection-ms",
                              "1000", "--resp-port", rp, "--http-port", hp, "--cache", cache,
                              cache2 ? "--cache" : NULL, cache2, NULL};
        g->p[i] = it_latticed(name, args);
    }
}

typedef struct want_servers {
    int port;
    double n;
} want_servers;

static bool sees_servers(void *ctx)
{
    want_servers *w = ctx;
    json_t *m = metrics(w->port);
    const char *server[] = {"role", "server", NULL};
    bool ok = m && sample(m, "lattice_nodes", server) == w->n;
    json_decref(m);
    return ok;
}

static int health_port;
static bool unhealthy(void *ctx)
{
    (void)ctx;
    return http_req(health_port, "GET", "/health", body, sizeof body) == 503;
}
/* 503 naming the refusal (until a refusal stood for a second the reason
 * reads "still joining"). */
static bool refused(void *ctx)
{
    (void)ctx;
    return http_req(health_port, "GET", "/health", body, sizeof body) == 503 && strstr(body, "refused");
}
static bool healthy(void *ctx)
{
    (void)ctx;
    return http_req(health_port, "GET", "/health", body, sizeof body) == 200;
}

/* Node expired_port's /metrics counts expired entries of cache default. */
static int expired_port;
/* Node expired_port's sweeper reclaimed the expired keys: it counted
 * expirations and its copies hold exactly the expected_entries that never
 * expire (primaries and the other's backups: with one backup, every entry). */
static long expected_entries;
static bool expired(void *ctx)
{
    (void)ctx;
    json_t *m = metrics(expired_port);
    const char *cache_default[] = {"cache", "default", NULL};
    const char *prim[] = {"cache", "default", "copy", "primary", NULL};
    const char *back[] = {"cache", "default", "copy", "backup", NULL};
    bool yes = m && sample(m, "lattice_cache_expirations_total", cache_default) > 0 &&
               sample(m, "lattice_cache_entries", prim) + sample(m, "lattice_cache_entries", back) == expected_entries;
    if (m) json_decref(m);
    return yes;
}

START_TEST(metrics_parse_and_follow_the_clients)
{
    it_begin("http_metrics");
    grid g;
    start_two(&g, "default:backups=1", NULL);
    want_servers w = {g.http, 2};
    ck_assert_msg(it_wait_for(sees_servers, &w, 30000), "node 0's /metrics never showed 2 servers");
    w.port = g.http + 1;
    ck_assert(it_wait_for(sees_servers, &w, 30000));
    health_port = g.http;
    ck_assert_msg(it_wait_for(healthy, NULL, 30000), "/health: %s", body);
    ck_assert_str_eq(body, "ok\n");

    redisContext *c = redisConnect("127.0.0.1", g.resp);
    ck_assert(c && !c->err);
    enum { N = 200 };
    for (int i = 0; i < N; i++) {
        redisReply *r = redisCommand(c, "SET key:%d value-%d", i, i);
        ck_assert(r && r->type == REDIS_REPLY_STATUS);
        freeReplyObject(r);
    }
    redisReply *r = redisCommand(c, "GET no-such-key");
    ck_assert(r && r->type == REDIS_REPLY_NIL);
    freeReplyObject(r);

    json_t *m = metrics(g.http);
    ck_assert_msg(m != NULL, "the reference parser refused /metrics:\n%s", body);
    /* Every name is lattice_*, and the kinds are what a scraper expects. */
    const char *name;
    json_t *v;
    json_object_foreach(json_object_get(m, "families"), name, v) ck_assert_msg(!strncmp(name, "lattice_", 8), "%s", name);
    ck_assert_str_eq(family_type(m, "lattice_operations"), "counter");
    ck_assert_str_eq(family_type(m, "lattice_operation_duration_seconds"), "histogram");
    ck_assert_str_eq(family_type(m, "lattice_cache_entries"), "gauge");
    const char *put_ok[] = {"kind", "put", "result", "ok", NULL};
    const char *get_nf[] = {"kind", "get", "result", "not_found", NULL};
    const char *put[] = {"kind", "put", NULL};
    const char *put_inf[] = {"kind", "put", "le", "+Inf", NULL};
    ck_assert_double_eq(sample(m, "lattice_operations_total", put_ok), N);
    ck_assert_double_eq(sample(m, "lattice_operations_total", get_nf), 1);
    ck_assert_double_eq(sample(m, "lattice_operation_duration_seconds_count", put), N);
    ck_assert_double_eq(sample(m, "lattice_operation_duration_seconds_bucket", put_inf), N);
    ck_assert(sample(m, "lattice_operation_duration_seconds_sum", put) > 0);
    ck_assert(sample(m, "lattice_resp_commands_total", NULL) >= N + 1);
    ck_assert_double_eq(sample(m, "lattice_resp_clients", NULL), 1);
    ck_assert_double_eq(sample(m, "lattice_peers", NULL), 1);
    ck_assert(sample(m, "lattice_topology_version_major", NULL) >= 2);
    ck_assert(sample(m, "lattice_region_row_bytes", NULL) > 0);
    /* The heap holds at least the index of the cache it just reported. */
    const char *in_use[] = {"state", "in_use", NULL};
    const char *dflt[] = {"cache", "default", NULL};
    ck_assert_str_eq(family_type(m, "lattice_heap_bytes"), "gauge");
    ck_assert(sample(m, "lattice_heap_bytes", in_use) >= sample(m, "lattice_cache_index_bytes", dflt));
    const char *cache_default[] = {"cache", "default", NULL};
    ck_assert_double_eq(sample(m, "lattice_cache_size", cache_default), N);
    ck_assert_str_eq(family_type(m, "lattice_cache_expirations"), "counter");
    ck_assert(sample(m, "lattice_cache_index_bytes", cache_default) > 0);
    /* Nothing is waiting for a copy once every SET was answered. */
    ck_assert_double_eq(sample(m, "lattice_cache_replication_in_flight", cache_default), 0);
    ck_assert_double_eq(sample(m, "lattice_cache_evictions_total", cache_default), 0);
    json_decref(m);
    /* Keys with a 1 ms TTL: each copy's sweeper reclaims them and says so. */
    for (int i = 0; i < 20; i++) {
        redisReply *x = redisCommand(c, "SET ttl:%d v PX 1", i);
        ck_assert(x && x->type == REDIS_REPLY_STATUS);
        freeReplyObject(x);
    }
    /* Each node's sweeper reclaims its copies of them (on its own clock:
     * each node is waited for) and says so; with one backup each node then
     * holds every other entry - its primaries and the other's backups. */
    expected_entries = N;
    for (int i = 0; i < 2; i++) {
        expired_port = g.http + i;
        ck_assert_msg(it_wait_for(expired, NULL, 30000),
                      "node %d: lattice_cache_expirations_total never counted the expired keys, or its entries "
                      "never came back to %d", i, N);
    }
    redisFree(c);

    /* /topology and /caches: the CLI's JSON. */
    ck_assert_int_eq(http_req(g.http, "GET", "/topology", body, sizeof body), 200);
    json_t *t = json_loads(body, 0, NULL);
    ck_assert_ptr_nonnull(t);
    ck_assert_int_eq(json_array_size(json_object_get(t, "topology_version")), 2);
    ck_assert_int_eq(json_array_size(json_object_get(t, "nodes")), 2);
    ck_assert_int_eq(it_servers(t), 1); /* besides the node that answered */
    ck_assert_ptr_nonnull(json_string_value(json_object_get(t, "coordinator")));
    json_decref(t);
    ck_assert_int_eq(http_req(g.http + 1, "GET", "/caches", body, sizeof body), 200);
    json_t *cs = json_loads(body, 0, NULL);
    ck_assert_ptr_nonnull(cs);
    json_t *c0 = json_array_get(json_object_get(cs, "caches"), 0);
    ck_assert_str_eq(json_string_value(json_object_get(c0, "name")), "default");
    ck_assert_int_eq(json_integer_value(json_object_get(c0, "size")), N);
    ck_assert_int_eq(json_array_size(json_object_get(c0, "nodes")), 2);
    /* Each node entry names its server by consistent id, as the CLI does:
     * the two servers' host:port, not their node ids. */
    json_t *nx;
    size_t ni;
    int ports_seen = 0;
    json_array_foreach(json_object_get(c0, "nodes"), ni, nx)
    {
        const char *cid = json_string_value(json_object_get(nx, "consistent_id"));
        ck_assert_ptr_nonnull(cid);
        ck_assert_str_ne(cid, json_string_value(json_object_get(nx, "id")));
        ck_assert_ptr_nonnull(strstr(cid, "127.0.0.1:"));
        ports_seen++;
    }
    ck_assert_int_eq(ports_seen, 2);
    json_decref(cs);

    /* Mistakes get an answer that says what is served. */
    ck_assert_int_eq(http_req(g.http, "GET", "/nope", body, sizeof body), 404);
    ck_assert_ptr_nonnull(strstr(body, "/metrics"));
    ck_assert_int_eq(http_req(g.http, "POST", "/metrics", body, sizeof body), 405);
    it_end();
}
END_TEST

/* What one node's /metrics and /caches say of a cache's rows. */
typedef struct usage_want {
    int http;
    const char *cache;
    double lo, hi;    /* lattice_cache_bytes in [lo, hi] */
    double bytes, pages, region_data;
} usage_want;

static bool usage_in_range(void *ctx)
{
    usage_want *w = ctx;
    json_t *m = metrics(w->http);
    if (!m) return false;
    const char *lab[] = {"cache", w->cache, NULL}, *data[] = {"state", "data", NULL};
    w->bytes = sample(m, "lattice_cache_bytes", lab);
    w->pages = sample(m, "lattice_cache_pages", lab);
    w->region_data = sample(m, "lattice_region_pages", data);
    bool ok = w->bytes >= w->lo && w->bytes <= w->hi && !strcmp(family_type(m, "lattice_cache_bytes"), "gauge") &&
              !strcmp(family_type(m, "lattice_cache_pages"), "gauge");
    json_decref(m);
    return ok;
}

/* GET /caches: the "bytes" of cache name summed over its nodes (-1 when a
 * node's entry lacks "bytes" or "pages"). */
static double caches_bytes(int http, const char *name)
{
    if (http_req(http, "GET", "/caches", body, sizeof body) != 200) return -1;
    json_t *cs = json_loads(body, 0, NULL), *c;
    size_t i;
    double sum = -1;
    json_array_foreach(json_object_get(cs, "caches"), i, c) {
        if (strcmp(json_string_value(json_object_get(c, "name")), name) != 0) continue;
        size_t k;
        json_t *x;
        sum = 0;
        json_array_foreach(json_object_get(c, "nodes"), k, x) {
            json_t *b = json_object_get(x, "bytes");
            if (!json_is_integer(b) || !json_is_integer(json_object_get(x, "pages"))) {
                sum = -1;
                break;
            }
            sum += (double)json_integer_value(b);
        }
    }
    json_decref(cs);
    return sum;
}

/* lattice_cache_bytes and _pages follow a cache's data on each node (both
 * hold every entry: one backup), not the region's: another cache on the
 * same region stays at zero; overwrites with smaller values shrink them, and
 * deleting every key brings them back to zero. */
START_TEST(cache_bytes_and_pages_follow_the_data)
{
    it_begin("http_cache_bytes");
    grid g;
    start_two(&g, "default:backups=1", "other:backups=1");
    health_port = g.http;
    ck_assert_msg(it_wait_for(healthy, NULL, 30000), "/health: %s", body);
    health_port = g.http + 1;
    ck_assert_msg(it_wait_for(healthy, NULL, 30000), "/health: %s", body);
    redisContext *c = redisConnect("127.0.0.1", g.resp);
    ck_assert(c && !c->err);
    enum { N = 300, BIG = 1000, SMALL = 10, KEY = 9 }; /* keys "key:%05d" */
    static char v[BIG];
    memset(v, 'x', sizeof v);
    for (int i = 0; i < N; i++) {
        redisReply *r = redisCommand(c, "SET key:%05d %b", i, v, (size_t)BIG);
        ck_assert(r && r->type == REDIS_REPLY_STATUS);
        freeReplyObject(r);
    }
    /* A row holds its key and value and a header of a few dozen bytes at most. */
    for (int i = 0; i < 2; i++) {
        usage_want w = {g.http + i, "default", N * (KEY + BIG), N * (KEY + BIG + 40.0), 0, 0, 0};
        ck_assert_msg(it_wait_for(usage_in_range, &w, 30000), "node %d: lattice_cache_bytes %.0f, want %.0f..%.0f", i,
                      w.bytes, w.lo, w.hi);
        ck_assert_msg(w.pages >= w.bytes / 4096 && w.pages <= w.region_data, "node %d: %.0f pages for %.0f bytes, "
                      "%.0f data pages in the region", i, w.pages, w.bytes, w.region_data);
        usage_want o = {g.http + i, "other", 0, 0, 0, 0, 0};
        ck_assert_msg(usage_in_range(&o), "node %d: cache other has %.0f bytes, %.0f pages", i, o.bytes, o.pages);
        ck_assert_double_eq(o.pages, 0);
    }
    double js = caches_bytes(g.http, "default");
    ck_assert_msg(js >= 2.0 * N * (KEY + BIG) && js <= 2.0 * N * (KEY + BIG + 40), "/caches bytes %.0f", js);
    for (int i = 0; i < N; i++) {
        redisReply *r = redisCommand(c, "SET key:%05d %b", i, v, (size_t)SMALL);
        ck_assert(r && r->type == REDIS_REPLY_STATUS);
        freeReplyObject(r);
    }
    for (int i = 0; i < 2; i++) {
        usage_want w = {g.http + i, "default", N * (KEY + SMALL), N * (KEY + SMALL + 40.0), 0, 0, 0};
        ck_assert_msg(it_wait_for(usage_in_range, &w, 30000), "node %d after overwrites: %.0f bytes, want %.0f..%.0f",
                      i, w.bytes, w.lo, w.hi);
    }
    for (int i = 0; i < N; i++) {
        redisReply *r = redisCommand(c, "DEL key:%05d", i);
        ck_assert(r && r->type == REDIS_REPLY_INTEGER && r->integer == 1);
        freeReplyObject(r);
    }
    for (int i = 0; i < 2; i++) {
        usage_want w = {g.http + i, "default", 0, 0, 0, 0, 0};
        ck_assert_msg(it_wait_for(usage_in_range, &w, 30000), "node %d after DEL: %.0f bytes", i, w.bytes);
        ck_assert_double_eq(w.pages, 0);
    }
    ck_assert_double_eq(caches_bytes(g.http + 1, "default"), 0);
    redisFree(c);
    it_end();
}
END_TEST

START_TEST(health_says_503_and_why_while_the_node_does_not_serve)
{
    it_begin("http_health");
    int peer = it_free_ports(2), http = it_free_ports(2);
    char finder[64], p0[16], p1[16], h0[16], h1[16];
    snprintf(finder, sizeof finder, "127.0.0.1:%d..%d", peer, peer + 1);
    snprintf(p0, sizeof p0, "%d", peer);
    snprintf(p1, sizeof p1, "%d", peer + 1);
    snprintf(h0, sizeof h0, "%d", http);
    snprintf(h1, sizeof h1, "%d", http + 1);
    const char *s1 = it_write_file("s1", "the grid's secret\n"), *s2 = it_write_file("s2", "another secret\n");
    const char *a0[] = {"--port", p0, "--port-range", "1", "--ip-finder", finder, "--secret-file", s1,
                        "--http-port", h0, NULL};
    it_proc *good = it_latticed("good", a0);
    ck_assert(it_wait_log(good, " ready: ", 20000));
    health_port = http;
    ck_assert_msg(it_wait_for(healthy, NULL, 30000), "/health: %s", body);
    ck_assert_str_eq(body, "ok\n");
    /* A node with the wrong secret is refused: 503, and the reason.  (A
     * client: a server that heard no answer in time would start a grid of
     * its own and be healthy there.) */
    const char *a1[] = {"--client", "--port", p1, "--port-range", "1", "--ip-finder", finder, "--secret-file", s2,
                        "--http-port", h1, NULL};
    it_proc *bad = it_latticed("bad", a1);
    ck_assert(it_wait_log(bad, "join refused", 20000));
    health_port = http + 1;
    ck_assert_msg(it_wait_for(unhealthy, NULL, 30000), "/health: %s", body);
    ck_assert_msg(it_wait_for(refused, NULL, 30000), "/health: %s", body);
    ck_assert_msg(strstr(body, "refused: authentication failed") != NULL, "%s", body);
    /* Its other pages still answer. */
    json_t *m = metrics(http + 1);
    ck_assert_ptr_nonnull(m);
    ck_assert_double_eq(sample(m, "lattice_joined", NULL), 0);
    json_decref(m);
    it_end();
}
END_TEST

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    Suite *s = suite_create("integration: http");
    TCase *tc = tcase_create("http");
    tcase_set_timeout(tc, 180);
    tcase_add_test(tc, metrics_parse_and_follow_the_clients);
    tcase_add_test(tc, cache_bytes_and_pages_follow_the_data);
    tcase_add_test(tc, health_says_503_and_why_while_the_node_does_not_serve);
    suite_add_tcase(s, tc);
    return it_run_suite(s);
}
