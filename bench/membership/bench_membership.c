/*
 * bench_membership: how fast real latticed processes agree on a topology and
 * how fast they remove a killed node.
 *
 *   convergence  N nodes started at once (static finder, then multicast on
 *                loopback): time from the first spawn until every node's own
 *                log shows an N-node topology.  Reference, same run: N lone
 *                nodes (each its own finder) until each logs `ready` - the
 *                cost of spawning N processes and a seed's election wait.
 *   removal      a 3-node grid at --failure-detection-ms F: kill -9 one node
 *                (the coordinator every third trial), time until every
 *                survivor logs it failed; restart it and repeat.  Reported
 *                against F; the target is <= F + 1000 ms in every trial.
 *
 * Times come from the nodes' own log timestamps (ms, wall clock), so the
 * polling here adds nothing.  Every process is stopped by pid.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAXN 32
#define WAIT_MS 30000

typedef struct node {
    pid_t pid;
    int port;
    char log[256];
} node;

static char dir[128];
static node nodes[MAXN];
static int nn;

static int64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void stop_node(node *n, int sig)
{
    if (n->pid <= 0) return;
    kill(n->pid, sig);
    for (int i = 0; i < 200; i++) {
        if (waitpid(n->pid, NULL, WNOHANG) == n->pid) {
            n->pid = 0;
            return;
        }
        usleep(10000);
    }
    kill(n->pid, SIGKILL);
    waitpid(n->pid, NULL, 0);
    n->pid = 0;
}

static void stop_all(void)
{
    for (int i = 0; i < nn; i++) kill(nodes[i].pid, SIGTERM);
    for (int i = 0; i < nn; i++) stop_node(&nodes[i], SIGTERM);
    nn = 0;
}

static void on_signal(int sig)
{
    (void)sig;
    for (int i = 0; i < nn; i++)
        if (nodes[i].pid > 0) kill(nodes[i].pid, SIGKILL);
    _exit(1);
}

static pid_t spawn(const char *log, const char *const *args)
{
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(fd, 2);
        dup2(fd, 1);
        const char *argv[32] = {LATTICED_PATH};
        int k = 1;
        for (int i = 0; args[i] && k < 31; i++) argv[k++] = args[i];
        argv[k] = NULL;
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    return pid;
}

static node *start(int port, const char *finder, int fd_ms)
{
    node *n = &nodes[nn];
    char p[16], f[16];
    snprintf(p, sizeof p, "%d", port);
    snprintf(f, sizeof f, "%d", fd_ms);
    snprintf(n->log, sizeof n->log, "%s/n%d.log", dir, port);
    const char *args[] = {"--port", p, "--port-range", "1", "--ip-finder", finder, "--failure-detection-ms", f, NULL};
    n->pid = spawn(n->log, args);
    n->port = port;
    nn++;
    return n;
}

/* Timestamp (ms) of the first line at or after `from` bytes containing
 * `needle`, or -1. */
static int64_t log_time(const char *path, long from, const char *needle)
{
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    fseek(f, from, SEEK_SET);
    char line[2048];
    int64_t t = -1;
    while (t < 0 && fgets(line, sizeof line, f)) {
        if (!strstr(line, needle)) continue;
        struct tm tm = {0};
        int ms = 0;
        if (sscanf(line, "%4d-%2d-%2dT%2d:%2d:%2d.%3dZ", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour,
                   &tm.tm_min, &tm.tm_sec, &ms) == 7) {
            tm.tm_year -= 1900;
            tm.tm_mon -= 1;
            t = (int64_t)timegm(&tm) * 1000 + ms;
        }
    }
    fclose(f);
    return t;
}

static long log_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (long)st.st_size : 0;
}

/* Wait until every node in [first, first+n) except `skip` logged `needle`
 * after its offset; returns the latest timestamp, or -1 on timeout. */
static int64_t wait_all(int first, int n, int skip, const long *offs, const char *needle)
{
    int64_t until = wall_ms() + WAIT_MS;
    while (wall_ms() < until) {
        int64_t latest = 0;
        bool all = true;
        for (int i = first; i < first + n && all; i++) {
            if (i == skip) continue;
            int64_t t = log_time(nodes[i].log, offs ? offs[i] : 0, needle);
            if (t < 0) all = false;
            else if (t > latest) latest = t;
        }
        if (all) return latest;
        usleep(20000);
    }
    return -1;
}

static bool port_free(int p)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)p)};
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    bool ok = bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0;
    close(fd);
    return ok;
}

static int free_ports(int n)
{
    for (int t = 0; t < 1000; t++) {
        /* Below the kernel's ephemeral range (32768..): 16 nodes bind their
         * data ports and open ~250 connections from ephemeral ports, and one
         * of those taking a port chosen here before its node bound it left
         * that node out (a run that never converged). */
        int b = 20000 + rand() % (32768 - 20000 - n);
        bool ok = true;
        for (int i = 0; i < n && ok; i++) ok = port_free(b + i);
        if (ok) return b;
    }
    fprintf(stderr, "bench: no free ports\n");
    exit(1);
}

/* N lone nodes: spawn cost + a seed's election wait. */
static int64_t reference_ms(int n, int fd_ms)
{
    int b = free_ports(n);
    int64_t t0 = wall_ms();
    for (int i = 0; i < n; i++) {
        char f[32];
        snprintf(f, sizeof f, "127.0.0.1:%d", b + i);
        start(b + i, f, fd_ms);
    }
    int64_t t = wait_all(0, n, -1, NULL, " ready: ");
    stop_all();
    return t < 0 ? -1 : t - t0;
}

static int64_t converge_ms(int n, bool mcast, int fd_ms)
{
    int b = free_ports(n);
    char finder[64], needle[32];
    if (mcast) snprintf(finder, sizeof finder, "multicast://228.1.2.4:%d", 40000 + rand() % 20000);
    else snprintf(finder, sizeof finder, "127.0.0.1:%d..%d", b, b + n - 1);
    snprintf(needle, sizeof needle, ", %d nodes", n);
    int64_t t0 = wall_ms();
    for (int i = 0; i < n; i++) start(b + i, finder, fd_ms);
    int64_t t = wait_all(0, n, -1, NULL, needle);
    stop_all();
    return t < 0 ? -1 : t - t0;
}

static int removal_trials(int trials, int fd_ms, int64_t *out)
{
    int b = free_ports(3);
    char finder[64];
    snprintf(finder, sizeof finder, "127.0.0.1:%d..%d", b, b + 2);
    for (int i = 0; i < 3; i++) start(b + i, finder, fd_ms);
    if (wait_all(0, 3, -1, NULL, ", 3 nodes") < 0) return -1;
    int done = 0;
    for (int t = 0; t < trials; t++) {
        /* The coordinator is the lowest order: after restarts, whoever is
         * oldest.  Rotate victims so the coordinator dies too. */
        int v = t % 3;
        long offs[3];
        for (int i = 0; i < 3; i++) offs[i] = log_size(nodes[i].log);
        char needle[64];
        snprintf(needle, sizeof needle, "(127.0.0.1:%d, server) failed", nodes[v].port);
        int64_t t0 = wall_ms();
        stop_node(&nodes[v], SIGKILL);
        int64_t t1 = wait_all(0, 3, v, offs, needle);
        if (t1 < 0) break;
        out[done++] = t1 - t0;
        /* Restart it and wait until all three agree again. */
        char p[16], f[16];
        snprintf(p, sizeof p, "%d", nodes[v].port);
        snprintf(f, sizeof f, "%d", fd_ms);
        const char *args[] = {"--port", p, "--port-range", "1", "--ip-finder", finder, "--failure-detection-ms", f, NULL};
        for (int i = 0; i < 3; i++) offs[i] = log_size(nodes[i].log);
        offs[v] = 0;
        nodes[v].pid = spawn(nodes[v].log, args);
        if (wait_all(0, 3, -1, offs, ", 3 nodes") < 0) break;
    }
    stop_all();
    return done;
}

static int cmp64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

static void usage(void)
{
    puts("usage: bench_membership [--json] [--large N] [--trials N] [--fd MS] [--no-multicast]\n"
         "Convergence of 3 and N (default 16) nodes started at once, static and multicast (loopback),\n"
         "against N lone nodes spawned to `ready` in the same run; then kill -9 removal time over\n"
         "--trials (default 20) at --failure-detection-ms MS (default 1000), against MS.\n"
         "Targets: 3 nodes < 2000 ms, 16 nodes < 10000 ms, removal <= MS + 1000 in every trial.");
}

int main(int argc, char **argv)
{
    bool json = false, mc = true;
    int large = 16, trials = 20, fd = 1000;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json")) json = true;
        else if (!strcmp(argv[i], "--no-multicast")) mc = false;
        else if (!strcmp(argv[i], "--large") && i + 1 < argc) large = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--trials") && i + 1 < argc) trials = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--fd") && i + 1 < argc) fd = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage();
            return 0;
        } else {
            fprintf(stderr, "bench_membership: unknown option %s\n", argv[i]);
            usage();
            return 2;
        }
    }
    if (large < 3 || large > MAXN || trials < 1 || trials > 100 || fd < 200 || fd > 60000) {
        fprintf(stderr, "bench_membership: --large 3..%d, --trials 1..100, --fd 200..60000\n", MAXN);
        return 2;
    }
    srand((unsigned)(getpid() ^ time(NULL)));
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    snprintf(dir, sizeof dir, "/tmp/lattice-bench-");
    size_t l = strlen(dir); /* mkdtemp's template: six trailing X */
    memset(dir + l, 'X', 6);
    dir[l + 6] = 0;
    if (!mkdtemp(dir)) return 1;

    int sizes[2] = {3, large};
    int64_t ref[2], st[2], mcast[2] = {-1, -1};
    for (int k = 0; k < 2; k++) {
        if (!json) fprintf(stderr, "bench: %d nodes: reference, static, multicast...\n", sizes[k]);
        ref[k] = reference_ms(sizes[k], fd);
        st[k] = converge_ms(sizes[k], false, fd);
        if (mc) mcast[k] = converge_ms(sizes[k], true, fd);
    }
    if (!json) fprintf(stderr, "bench: removal, %d trials...\n", trials);
    int64_t rem[100];
    int got = removal_trials(trials, fd, rem);
    int within = 0;
    int64_t worst = -1, p50 = -1;
    if (got > 0) {
        for (int i = 0; i < got; i++) within += rem[i] <= fd + 1000;
        qsort(rem, (size_t)got, sizeof rem[0], cmp64);
        worst = rem[got - 1];
        p50 = rem[got / 2];
    }
    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "bench: could not remove %s\n", dir);

    if (json) {
        printf("{\"failure_detection_ms\":%d", fd);
        for (int k = 0; k < 2; k++)
            printf(",\"converge_%d\":{\"reference_ms\":%lld,\"static_ms\":%lld,\"multicast_ms\":%lld,"
                   "\"static_ratio\":%.2f,\"multicast_ratio\":%.2f}",
                   sizes[k], (long long)ref[k], (long long)st[k], (long long)mcast[k],
                   ref[k] > 0 ? (double)st[k] / (double)ref[k] : -1.0,
                   ref[k] > 0 && mcast[k] > 0 ? (double)mcast[k] / (double)ref[k] : -1.0);
        printf(",\"removal\":{\"trials\":%d,\"completed\":%d,\"within_timeout_plus_1s\":%d,\"p50_ms\":%lld,"
               "\"max_ms\":%lld,\"p50_ratio_to_timeout\":%.2f,\"max_ratio_to_timeout\":%.2f}}\n",
               trials, got, within, (long long)p50, (long long)worst, (double)p50 / fd, (double)worst / fd);
        return 0;
    }
    printf("convergence (ms from first spawn until every node's log shows the full topology)\n");
    printf("%6s %12s %10s %8s %12s %8s  target\n", "nodes", "reference", "static", "ratio", "multicast", "ratio");
    for (int k = 0; k < 2; k++)
        printf("%6d %12lld %10lld %7.2fx %12lld %7.2fx  < %d ms\n", sizes[k], (long long)ref[k], (long long)st[k],
               ref[k] > 0 ? (double)st[k] / (double)ref[k] : -1.0, (long long)mcast[k],
               ref[k] > 0 && mcast[k] > 0 ? (double)mcast[k] / (double)ref[k] : -1.0, sizes[k] <= 3 ? 2000 : 10000);
    printf("removal after kill -9 at failure detection %d ms: %d/%d trials within %d ms; p50 %lld ms (%.2fx timeout), "
           "max %lld ms (%.2fx timeout)\n",
           fd, within, trials, fd + 1000, (long long)p50, (double)p50 / fd, (long long)worst, (double)worst / fd);
    return 0;
}
