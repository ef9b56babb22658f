/*
 * bench_console [--quick] [--json] [--rounds R] [--window-s W]: what the web
 * console's polling costs the node that serves it (docs/BENCHMARKS.md, "Web
 * console").  Three latticed on loopback (--http-port each, the default
 * cache: 1024 partitions, one backup), this program in the page's place on
 * node 0, asking what the page asks (http/console/app.mjs):
 *
 *   steady  every 2 s /health?format=json, /topology, /rebalance, /metrics,
 *           and every 10 s /caches and /partitions?cache=default - the page
 *           on a grid where nothing moves;
 *   busy    every 2 s every page, /partitions and /caches included - the page
 *           while a rebalance runs or a partition is not owning;
 *   idle    nothing asked: the reference, the node's own CPU (heartbeats,
 *           its threads' polls) in the same run.
 *
 * Each round runs an idle, a steady and a busy window of W seconds (default
 * 30) in turn, reading every node's CPU time (utime + stime, /proc) before
 * and after; the figures are the medians over R rounds (default 3): the CPU
 * each pattern adds to node 0 as a share of one core (the claim: under 1%),
 * the same for the two other nodes (/caches and /rebalance ask every
 * server), and the ratio of node 0's CPU to its idle CPU.  Then a burst of
 * 100 rounds back to back gives the CPU of one round to the millisecond,
 * and what it would cost at one round every 2 s.  Every request is a new
 * HTTP/1.0 connection (a browser keeps its connections: an upper bound).
 * Every process is stopped by the integration harness's guardian.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

#define NODES 3
#define POLL_MS 2000
#define SLOW_EVERY 5 /* the page's SLOW_MS (10 s) in polls */

static int http_port;
static it_proc *proc[NODES];

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* CPU seconds (user + system) of pid so far. */
static double cpu_s(pid_t pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    const char *p = strrchr(buf, ')'); /* after the command name, which may hold spaces */
    unsigned long long ut = 0, st = 0;
    if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2) return -1;
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

/* GET path from node 0; the bytes of the body read (-1: no answer).  The
 * body is read whole and dropped, as the page parses it elsewhere. */
static long get(const char *path)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)http_port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    char req[256], buf[65536];
    int n = snprintf(req, sizeof req, "GET %s HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n", path);
    long total = -1;
    if (write(fd, req, (size_t)n) == n) {
        ssize_t r;
        total = 0;
        while ((r = read(fd, buf, sizeof buf)) > 0) total += r;
    }
    close(fd);
    return total;
}

/* One poll of the page: every page when busy, else the slow ones every
 * SLOW_EVERY-th poll.  The bytes answered. */
static long poll_once(bool busy, int k)
{
    static const char *const every[] = {"/health?format=json", "/topology", "/rebalance", "/metrics"};
    static const char *const slow[] = {"/caches", "/partitions?cache=default"};
    long bytes = 0;
    for (size_t i = 0; i < sizeof every / sizeof *every; i++) bytes += get(every[i]);
    if (busy || k % SLOW_EVERY == 0)
        for (size_t i = 0; i < sizeof slow / sizeof *slow; i++) bytes += get(slow[i]);
    return bytes;
}

typedef enum { IDLE, STEADY, BUSY, PATTERNS } pattern;
static const char *const pattern_name[] = {"idle", "steady", "busy"};

/* One window of w seconds of pattern p: every node's CPU seconds spent per
 * wall second (cores), into cores[NODES]. */
static void window(pattern p, double w, double cores[NODES])
{
    double c0[NODES], t0 = now_s();
    for (int i = 0; i < NODES; i++) c0[i] = cpu_s(proc[i]->pid);
    for (int k = 0; now_s() - t0 < w; k++) {
        double next = t0 + (double)(k + 1) * POLL_MS / 1000.0;
        if (p != IDLE) poll_once(p == BUSY, k);
        double left = next - now_s();
        if (left > 0) usleep((useconds_t)(left * 1e6));
    }
    double dt = now_s() - t0;
    for (int i = 0; i < NODES; i++) cores[i] = (cpu_s(proc[i]->pid) - c0[i]) / dt;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static bool settled(void *ctx)
{
    (void)ctx;
    static char body[1 << 20];
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)http_port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bool ok = false;
    if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0) {
        const char req[] = "GET /partitions?cache=default HTTP/1.0\r\n\r\n";
        size_t len = 0;
        ssize_t r;
        if (write(fd, req, sizeof req - 1) == (ssize_t)(sizeof req - 1))
            while (len < sizeof body - 1 && (r = read(fd, body + len, sizeof body - 1 - len)) > 0) len += (size_t)r;
        body[len] = 0;
        const char *j = strstr(body, "\r\n\r\n");
        json_t *p = j ? json_loads(j + 4, 0, NULL) : NULL;
        ok = p && json_integer_value(json_object_get(p, "lost")) == 0 &&
             json_integer_value(json_object_get(p, "under_replicated")) == 0 &&
             json_array_size(json_object_get(p, "nodes")) == NODES && !strstr(j, "\"MOVING\"");
        json_decref(p);
    }
    close(fd);
    return ok;
}

int main(int argc, char **argv)
{
    bool quick = false, as_json = false;
    int rounds = 3;
    double w = 30;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) quick = true;
        else if (!strcmp(argv[i], "--json")) as_json = true;
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--window-s") && i + 1 < argc) w = atof(argv[++i]);
        else {
            fputs("usage: bench_console [--quick] [--json] [--rounds R (3)] [--window-s W (30)]\n"
                  "  what the web console's 2 s polling costs the node serving it, against the node idle\n",
                  strcmp(argv[i], "--help") ? stderr : stdout);
            return strcmp(argv[i], "--help") ? 2 : 0;
        }
    }
    if (quick) rounds = 1, w = 6;
    if (rounds < 1 || rounds > 50 || w < 2) {
        fputs("bench_console: --rounds 1..50, --window-s 2 or more\n", stderr);
        return 2;
    }
    it_begin("bench_console");
    int peer = it_free_ports(NODES), http = it_free_ports(NODES);
    http_port = http;
    char finder[64];
    snprintf(finder, sizeof finder, "127.0.0.1:%d..%d", peer, peer + NODES - 1);
    for (int i = 0; i < NODES; i++) {
        char port[16], hp[16], name[16];
        snprintf(port, sizeof port, "%d", peer + i);
        snprintf(hp, sizeof hp, "%d", http + i);
        snprintf(name, sizeof name, "n%d", i);
        const char *args[] = {"--port", port, "--port-range", "1", "--ip-finder", finder, "--failure-detection-ms",
                              "1000", "--http-port", hp, NULL};
        proc[i] = it_latticed(name, args);
    }
    if (!it_wait_for(settled, NULL, 120000)) {
        fputs("bench_console: the grid did not settle (3 servers, every partition owning) in 120 s\n", stderr);
        return 1;
    }
    sleep(2);
    long bytes_steady = 0, bytes_busy = 0;
    for (int k = 0; k < SLOW_EVERY; k++) bytes_steady += poll_once(false, k), bytes_busy += poll_once(true, k);

    double node0[PATTERNS][50], others[PATTERNS][50];
    for (int r = 0; r < rounds; r++) {
        for (pattern p = IDLE; p < PATTERNS; p++) {
            double c[NODES];
            window(p, w, c);
            node0[p][r] = c[0];
            others[p][r] = c[1] + c[2];
            if (!as_json)
                fprintf(stderr, "round %d %-6s node0 %.3f%% of a core, nodes 1+2 %.3f%%\n", r + 1, pattern_name[p],
                        c[0] * 100, c[1] * 100 + c[2] * 100);
        }
    }
    double n0[PATTERNS], oth[PATTERNS];
    for (pattern p = IDLE; p < PATTERNS; p++) n0[p] = median(node0[p], rounds), oth[p] = median(others[p], rounds);

    /* The burst: 100 polls of each pattern back to back (a steady one asks
     * the slow pages every SLOW_EVERY-th), node 0's CPU less its idle rate
     * over the same time: the CPU of one poll. */
    double burst_ms[2];
    for (int b = 0; b < 2; b++) {
        double c0 = cpu_s(proc[0]->pid), t0 = now_s();
        for (int k = 0; k < 100; k++) poll_once(b == 1, k);
        double dt = now_s() - t0, used = cpu_s(proc[0]->pid) - c0 - n0[IDLE] * dt;
        burst_ms[b] = used * 1000.0 / 100.0;
    }
    if (as_json) {
        printf("{\"rounds\":%d,\"window_s\":%.0f,\"idle_node0_core\":%.5f,\"steady_node0_core\":%.5f,"
               "\"busy_node0_core\":%.5f,\"steady_added_node0_core\":%.5f,\"busy_added_node0_core\":%.5f,"
               "\"steady_added_others_core\":%.5f,\"busy_added_others_core\":%.5f,\"steady_ratio_to_idle\":%.3f,"
               "\"busy_ratio_to_idle\":%.3f,\"burst_steady_poll_ms\":%.3f,\"burst_busy_poll_ms\":%.3f,"
               "\"bytes_per_10s_steady\":%ld,\"bytes_per_10s_busy\":%ld}\n",
               rounds, w, n0[IDLE], n0[STEADY], n0[BUSY], n0[STEADY] - n0[IDLE], n0[BUSY] - n0[IDLE],
               oth[STEADY] - oth[IDLE], oth[BUSY] - oth[IDLE], n0[IDLE] > 0 ? n0[STEADY] / n0[IDLE] : 0,
               n0[IDLE] > 0 ? n0[BUSY] / n0[IDLE] : 0, burst_ms[0], burst_ms[1], bytes_steady, bytes_busy);
    } else {
        printf("web console polling every 2 s, node 0 of 3 (median of %d rounds of %.0f s windows):\n", rounds, w);
        printf("  idle (reference)   node 0 %.3f%% of a core\n", n0[IDLE] * 100);
        printf("  steady page        node 0 %.3f%% of a core: +%.3f%% (x%.2f idle); nodes 1+2 +%.3f%%; %ld bytes per 10 s\n",
               n0[STEADY] * 100, (n0[STEADY] - n0[IDLE]) * 100, n0[IDLE] > 0 ? n0[STEADY] / n0[IDLE] : 0,
               (oth[STEADY] - oth[IDLE]) * 100, bytes_steady);
        printf("  busy page          node 0 %.3f%% of a core: +%.3f%% (x%.2f idle); nodes 1+2 +%.3f%%; %ld bytes per 10 s\n",
               n0[BUSY] * 100, (n0[BUSY] - n0[IDLE]) * 100, n0[IDLE] > 0 ? n0[BUSY] / n0[IDLE] : 0,
               (oth[BUSY] - oth[IDLE]) * 100, bytes_busy);
        printf("  burst of 100 polls back to back: %.2f ms CPU per steady poll, %.2f ms per busy poll;\n"
               "    at one poll per 2 s: steady %.3f%%, busy %.3f%% of a core\n",
               burst_ms[0], burst_ms[1], burst_ms[0] / POLL_MS * 100, burst_ms[1] / POLL_MS * 100);
    }
    it_end();
    return 0;
}
