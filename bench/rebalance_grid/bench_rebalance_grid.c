/*
 * bench_rebalance_grid: a node joins a 3-node grid holding N entries
 * (default 1M of 100-byte values, backups=1).  Real latticed processes on
 * loopback; this program attaches as a client node.
 *
 * Figures (same run):
 *  - load: the time to put the N entries with put_all batches - the
 *    reference rate for moving the same bytes;
 *  - rebalance: join -> the affinity switch (every partition OWNING on its
 *    new owners), and the joiner's own transfer figures (entries and
 *    key+value bytes received, time from its plan start to its last batch),
 *    as MB/s and entries/s and as a ratio to the load rate;
 *  - `lattice bench --op putget` ops/s during the rebalance vs before it
 *    (seconds of the per-second series that overlap the rebalance window).
 * Every process it starts is stopped by pid; bounded by --timeout-s.
 */
#include <errno.h>
#include <jansson.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lattice/alloc.h"
#include "lattice/lattice.h"

#define MAX_PROCS 8

static pid_t procs[MAX_PROCS];
static int n_procs;
static char dir[256];

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void stop_all(void)
{
    for (int i = 0; i < n_procs; i++)
        if (procs[i] > 0) kill(procs[i], SIGTERM);
    for (int i = 0; i < n_procs; i++) {
        if (procs[i] <= 0) continue;
        int st;
        for (int k = 0; k < 100 && waitpid(procs[i], &st, WNOHANG) == 0; k++) usleep(50000);
        if (waitpid(procs[i], &st, WNOHANG) == 0) {
            kill(procs[i], SIGKILL);
            waitpid(procs[i], &st, 0);
        }
        procs[i] = 0;
    }
    if (dir[0]) {
        char cmd[300];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    }
}

static void die(const char *why)
{
    fprintf(stderr, "bench_rebalance_grid: %s\n", why);
    stop_all();
    exit(1);
}

static pid_t spawn(const char *log, char *const argv[])
{
    pid_t p = fork();
    if (p < 0) die("fork failed");
    if (p == 0) {
        FILE *f = freopen(log, "w", stdout);
        if (!f || !freopen(log, "a", stderr)) _exit(127);
        execv(argv[0], argv);
        _exit(127);
    }
    if (n_procs == MAX_PROCS) die("too many processes");
    procs[n_procs++] = p;
    return p;
}

static int port_free(int port)
{
    int s = socket(AF_INET, SOCK_STREAM, 0);
    if (s < 0) return 0;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int ok = bind(s, (struct sockaddr *)&a, sizeof a) == 0;
    close(s);
    return ok;
}

static int free_ports(int n)
{
    for (int tries = 0; tries < 200; tries++) {
        int base = 30000 + (int)((getpid() * 7919u + (unsigned)tries * 104729u) % 25000u);
        int ok = 1;
        for (int i = 0; i < n && ok; i++) ok = port_free(base + i);
        if (ok) return base;
    }
    die("no free ports");
    return 0;
}

static char finder[64];
static char cluster[48]; /* our own: never merge with another grid on nearby ports */
static int base_port;

static void start_server(int i)
{
    char port[16], log[300], name[16];
    snprintf(port, sizeof port, "%d", base_port + i);
    snprintf(name, sizeof name, "s%d", i);
    snprintf(log, sizeof log, "%s/%s.log", dir, name);
    char *argv[] = {LATTICED_PATH, "--port", port, "--port-range", "1", "--ip-finder", finder,
                    "--failure-detection-ms", "1000", "--region-mb", "1024", "--log-level", "info",
                    "--cache", "default:backups=1", "--cluster", cluster, NULL};
    spawn(log, argv);
}

static size_t servers_of(lattice_node *n)
{
    lattice_topology *t = lattice_node_topology(n);
    size_t s = 0;
    for (size_t i = 0; t && i < lattice_topology_size(t); i++)
        s += lattice_topology_member(t, i)->role == LATTICE_ROLE_SERVER;
    if (t) lattice_topology_release(t);
    return s;
}

static void wait_servers(lattice_node *n, size_t want, double timeout)
{
    double end = now_s() + timeout;
    while (servers_of(n) != want)
        if (now_s() > end) die("grid did not form");
        else usleep(50000);
}

/* Every node's figures for the default cache: done when `servers` nodes
 * report, nothing is MOVING and the joiner serves primaries. */
typedef struct figures {
    int done;
    uint64_t joiner_entries, joiner_bytes, joiner_ms, joiner_primaries;
} figures;

static void read_figures(lattice_node *n, const char *joiner_id, size_t servers, figures *f)
{
    memset(f, 0, sizeof *f);
    lattice_cache_info *ci = NULL;
    size_t nc = 0;
    if (lattice_caches_info(n, &ci, &nc) != LATTICE_OK) return;
    for (size_t i = 0; i < nc; i++) {
        if (strcmp(ci[i].name, "default") != 0) continue;
        uint32_t moving = 0;
        for (size_t k = 0; k < ci[i].n_nodes; k++) {
            const lattice_cache_node_info *x = &ci[i].nodes[k];
            moving += x->moving_partitions;
            if (joiner_id && !strcmp(x->id, joiner_id)) {
                f->joiner_entries = x->rebalance_entries;
                f->joiner_bytes = x->rebalance_bytes;
                f->joiner_ms = x->rebalance_elapsed_ms;
                f->joiner_primaries = x->primary_partitions;
            }
        }
        f->done = ci[i].n_nodes == servers && moving == 0 && f->joiner_primaries > 0;
    }
    lattice_caches_info_free(ci, nc);
}

static const char *joiner_id_of(lattice_node *n, int port, char *buf, size_t cap)
{
    lattice_topology *t = lattice_node_topology(n);
    char suffix[16];
    snprintf(suffix, sizeof suffix, ":%d", port);
    const char *r = NULL;
    for (size_t i = 0; t && i < lattice_topology_size(t) && !r; i++) {
        const lattice_member *m = lattice_topology_member(t, i);
        size_t cl = strlen(m->consistent_id), sl = strlen(suffix);
        if (cl >= sl && !strcmp(m->consistent_id + cl - sl, suffix)) {
            snprintf(buf, cap, "%s", m->id);
            r = buf;
        }
    }
    if (t) lattice_topology_release(t);
    return r;
}

static void load(lattice_node *n, long entries, int vsize)
{
    enum { B = 1000 };
    static char keys[B][24];
    char *val = lt_malloc((size_t)vsize + 1);
    if (!val) die("out of memory");
    memset(val, 'v', (size_t)vsize);
    lattice_kv kv[B];
    for (long i = 0; i < entries; i += B) {
        size_t m = 0;
        for (long k = i; k < entries && k < i + B; k++, m++) {
            snprintf(keys[m], sizeof keys[m], "r%09ld", k);
            kv[m] = (lattice_kv){keys[m], strlen(keys[m]), val, (size_t)vsize, 0};
        }
        lattice_status st = lattice_cache_put_all(n, "default", kv, m);
        if (st != LATTICE_OK) {
            fprintf(stderr, "put_all: %s\n", lattice_strerror(st));
            die("load failed");
        }
    }
    lt_free(val);
}

/* Runs `lattice bench --op putget` for `secs` seconds in the background;
 * returns its pid, output in out_path. */
static pid_t start_putget(int secs, const char *out_path)
{
    char d[16];
    snprintf(d, sizeof d, "%d", secs);
    char *argv[] = {LATTICE_CLI_PATH, "--ip-finder", finder, "--cluster", cluster, "--json", "bench", "--op", "putget", "--threads",
                    "16", "--duration", d, "--warmup", "0", "--keys", "100000", "--value-size", "100", NULL};
    return spawn(out_path, argv);
}

static json_t *finish_putget(pid_t p, const char *out_path, double timeout)
{
    double end = now_s() + timeout;
    int st;
    while (waitpid(p, &st, WNOHANG) == 0)
        if (now_s() > end) die("lattice bench did not finish");
        else usleep(50000);
    for (int i = 0; i < n_procs; i++)
        if (procs[i] == p) procs[i] = 0;
    FILE *f = fopen(out_path, "r");
    if (!f) die("no bench output");
    char line[65536];
    json_t *j = NULL;
    while (fgets(line, sizeof line, f))
        if (line[0] == '{' && !j) j = json_loads(line, 0, NULL);
    fclose(f);
    if (!j) die("bench output not JSON");
    return j;
}

static void usage(FILE *f)
{
    fputs("usage: bench_rebalance_grid [--entries N] [--value-size N] [--timeout-s N] [--json] [--help]\n"
          "  A 4th node joins a 3-node grid (backups=1) holding N entries (default 1000000) of\n"
          "  --value-size bytes (default 100): time to the affinity switch, MB/s and entries/s\n"
          "  moved vs the rate of loading the same entries with put_all (same run), and\n"
          "  `lattice bench --op putget` ops/s during the rebalance vs before it.\n"
          "  Starts and stops its own latticed processes (by pid); bounded by --timeout-s (600).\n",
          f);
}

int main(int argc, char **argv)
{
    long entries = 1000000, timeout = 600;
    int vsize = 100, json = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--json")) {
            json = 1;
        } else if (!strcmp(argv[i], "--entries") && i + 1 < argc) {
            entries = strtol(argv[++i], NULL, 10);
        } else if (!strcmp(argv[i], "--value-size") && i + 1 < argc) {
            vsize = (int)strtol(argv[++i], NULL, 10);
        } else if (!strcmp(argv[i], "--timeout-s") && i + 1 < argc) {
            timeout = strtol(argv[++i], NULL, 10);
        } else {
            usage(stderr);
            return 2;
        }
    }
    if (entries < 1000 || entries > 5000000 || vsize < 1 || vsize > 4096 || timeout < 10 || timeout > 3600) {
        fputs("bench_rebalance_grid: --entries 1000..5000000, --value-size 1..4096, --timeout-s 10..3600\n", stderr);
        return 2;
    }
    /* mkdtemp's template: the prefix and six 'X' it replaces */
    int pl = snprintf(dir, sizeof dir, "/tmp/bench-rebalance-grid-");
    memset(dir + pl, 'X', 6);
    dir[pl + 6] = 0;
    if (!mkdtemp(dir)) {
        dir[0] = 0;
        die("mkdtemp failed");
    }
    signal(SIGPIPE, SIG_IGN);
    snprintf(cluster, sizeof cluster, "bench-rebalance-%d", (int)getpid());
    base_port = free_ports(5);
    snprintf(finder, sizeof finder, "127.0.0.1:%d..%d", base_port, base_port + 4);
    for (int i = 0; i < 3; i++) start_server(i);

    lattice_config c;
    lattice_config_init(&c);
    c.client = true;
    c.port = 0;
    c.port_range = 1;
    c.failure_detection_ms = 1000;
    c.finders[c.n_finders++] = finder;
    c.cluster = cluster;
    c.op_timeout_ms = 30000;
    lattice_node *n = NULL;
    if (lattice_node_start(&c, &n) != LATTICE_OK || lattice_node_wait_joined(n, 20000) != LATTICE_OK)
        die("cannot attach");
    wait_servers(n, 3, 30);
    double end = now_s() + 30;
    while (lattice_cache_put(n, "default", "__ready", 7, "1", 1) != LATTICE_OK)
        if (now_s() > end) die("cache never ready");
        else usleep(100000);
    lattice_cache_remove(n, "default", "__ready", 7);

    double t0 = now_s();
    load(n, entries, vsize);
    double load_s = now_s() - t0;
    double bytes_each = 10.0 + vsize; /* key "r%09ld" + value */
    double load_eps = (double)entries / load_s, load_mbs = (double)entries * bytes_each / load_s / 1e6;
    if (!json) printf("loaded %ld entries in %.2f s (%.0f entries/s, %.1f MB/s)\n", entries, load_s, load_eps, load_mbs);

    char before_path[300], during_path[300];
    snprintf(before_path, sizeof before_path, "%s/putget_before.json", dir);
    snprintf(during_path, sizeof during_path, "%s/putget_during.json", dir);
    json_t *before = finish_putget(start_putget(5, before_path), before_path, 60);
    double before_ops = json_real_value(json_object_get(before, "ops_per_s"));

    const int during_s = 10;
    pid_t bp = start_putget(during_s, during_path);
    double bench_start = now_s();
    usleep(1500 * 1000);
    double t_join = now_s();
    start_server(3);
    wait_servers(n, 4, 30);
    char jid_buf[64];
    const char *jid = NULL;
    figures f = {0};
    end = t_join + (double)timeout;
    for (;;) {
        if (!jid) jid = joiner_id_of(n, base_port + 3, jid_buf, sizeof jid_buf);
        read_figures(n, jid, 4, &f);
        if (f.done) break;
        if (now_s() > end) die("rebalance did not finish within --timeout-s");
        usleep(20000);
    }
    double t_switch = now_s();
    json_t *during = finish_putget(bp, during_path, 60 + during_s);
    /* Seconds of the series overlapping [t_join, t_switch]. */
    json_t *series = json_object_get(during, "per_second");
    double w0 = t_join - bench_start, w1 = t_switch - bench_start, sum = 0;
    int cnt = 0;
    for (size_t i = 0; i < json_array_size(series); i++) {
        double s0 = (double)i, s1 = (double)i + 1;
        if (s1 <= w0 || s0 >= w1) continue;
        sum += (double)json_integer_value(json_array_get(series, i));
        cnt++;
    }
    double during_ops = cnt ? sum / cnt : 0;
    double total_s = t_switch - t_join;
    double xfer_s = (double)f.joiner_ms / 1000.0;
    double mbs = xfer_s > 0 ? (double)f.joiner_bytes / xfer_s / 1e6 : 0;
    double eps = xfer_s > 0 ? (double)f.joiner_entries / xfer_s : 0;
    lattice_node_stop(n);
    stop_all();
    if (json) {
        json_t *o = json_pack("{s:I, s:i, s:f, s:f, s:f, s:f, s:I, s:I, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:i}",
                              "entries", (json_int_t)entries, "value_size", vsize, "load_s", load_s,
                              "load_entries_per_s", load_eps, "load_mb_per_s", load_mbs, "join_to_switch_s", total_s,
                              "moved_entries", (json_int_t)f.joiner_entries, "moved_bytes", (json_int_t)f.joiner_bytes,
                              "transfer_s", xfer_s, "moved_mb_per_s", mbs, "moved_entries_per_s", eps,
                              "moved_rate_vs_load", load_eps > 0 ? eps / load_eps : 0, "putget_before_ops_per_s",
                              before_ops, "putget_during_ops_per_s", during_ops, "putget_during_vs_before",
                              before_ops > 0 ? during_ops / before_ops : 0, "putget_seconds_overlapping", cnt);
        char *s = json_dumps(o, JSON_COMPACT);
        if (s) puts(s);
        free(s);
        json_decref(o);
    } else {
        printf("join -> affinity switch: %.2f s\n", total_s);
        printf("joiner received %llu entries, %.1f MB in %.2f s: %.1f MB/s, %.0f entries/s (%.2fx the put_all load rate)\n",
               (unsigned long long)f.joiner_entries, (double)f.joiner_bytes / 1e6, xfer_s, mbs, eps,
               load_eps > 0 ? eps / load_eps : 0);
        printf("putget: %.0f ops/s before, %.0f during (%d s overlapping): %.2fx\n", before_ops, during_ops, cnt,
               before_ops > 0 ? during_ops / before_ops : 0);
    }
    json_decref(before);
    json_decref(during);
    return 0;
}
