/*
 * soak: hours of mixed load on a 3-node grid of real latticed processes with
 * persistence, with a server killed (-9) and restarted every few minutes and
 * a 4th server joining and leaving (SIGTERM) now and then (issue #32,
 * docs/BENCHMARKS.md "Soak (#32)").
 *
 *  - load: RESP through hiredis (GET, SET, INCR, MULTI/EXEC on one slot by a
 *    hash tag) and a client node through the C API (put, get) over a key
 *    space filled at the start (so the key count stays constant), values of
 *    --value-min..--value-max bytes that start with their key;
 *  - a set workload inside that load: --set-rate writes a second are unique
 *    keys with unique values; each acknowledged one is remembered and read
 *    back through every live server (RESP) and the client node: once older
 *    than --set-retire, during the run while the grid is settled, and then
 *    deleted (so the key count stays constant); the rest at the end;
 *  - INCR results are checked per thread and counter: an acknowledged INCR
 *    that went missing shows as a result not above the one seen before;
 *  - once a --report-every (1 min): elapsed, ops/s, p99, errors (and the
 *    kills, restarts, joins and leaves of that minute), RSS and open fds of
 *    every server from /proc;
 *  - at the end: RSS slopes per node (%/hour, over the samples taken after
 *    the warm-up in the base state - 3 servers, settled, calm for 30 s - the
 *    level through the kills and the slope within incarnations, each with
 *    its standard error; every sample goes to rss.csv in the temp dir),
 *    p99 drift, errors outside kill windows (and outside stalls of
 *    the host, which every process logs at once here), set losses and
 *    `lattice verify default`.  Exit 1 when an acknowledged write was lost,
 *    a value was wrong or verify found conflicts; 2 on bad usage.
 *
 * Every process it starts is stopped by its pid: at the end, on error and on
 * SIGINT/SIGTERM (children also get SIGKILL if soak itself dies:
 * PR_SET_PDEATHSIG).
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lattice/alloc.h"
#include "lattice/lattice.h"
#include "lattice/log.h"

/* ---------------------------------------------------------------- options */

static struct options {
    double duration_s, kill_every_s, join_every_s, join_hold_s, report_s, warmup_s, settle_s;
    long keys;
    int vmin, vmax, resp_threads, client_threads, fd_ms, backups, region_mb, base_port, checkpoint_mb;
    int spare; /* a base server never killed, or -1 */
    double set_rate, set_retire_s;
    unsigned seed;
    bool json, keep;
    const char *latticed, *cli;
} opt;

static void usage(FILE *f)
{
    fputs("usage: soak [OPTIONS]\n"
          "  A 3-node grid of real latticed processes (loopback, --data-dir each, ports below 32768)\n"
          "  under a mixed RESP + client-node load, with a server killed -9 and restarted every\n"
          "  --kill-every and a 4th server joining and leaving (SIGTERM) every --join-every.\n"
          "  Prints one line per --report-every and a summary at the end (docs/BENCHMARKS.md,\n"
          "  \"Soak (#32)\").  Exit 0 clean, 1 an acknowledged write lost / a wrong value /\n"
          "  verify conflicts / an error, 2 bad usage.  Times: N[s|m|h] (plain N = seconds).\n"
          "  Errors are counted in kill windows (a kill until the grid settled again, plus 3\n"
          "  failure detections), in host-stall windows (a node logged \"was stalled\", or soak's\n"
          "  own loop stalled) or outside both.  The temp dir (node logs, data dirs, events.log:\n"
          "  events, every error, lost keys) is removed after a clean run, kept otherwise.\n"
          "\n"
          "  --duration T        load phase length (default 5m); the final checks come after it\n"
          "  --kill-every T      kill -9 a random one of the 3 base servers, restart it on the same\n"
          "                      ports and data dir (default 3m; 0 = never).  A kill waits until\n"
          "                      every partition has all its copies again (backups=1 survives\n"
          "                      one failure at a time)\n"
          "  --join-every T      a 4th server joins (default 10m; 0 = never) ...\n"
          "  --join-hold T       ... and leaves gracefully (SIGTERM) this long after it served\n"
          "                      (default half of --join-every)\n"
          "  --keys N            key space of the load, filled before it starts (default 100000)\n"
          "  --value-min N       smallest value in bytes (default 100)\n"
          "  --value-max N       largest value in bytes (default 1000)\n"
          "  --resp-threads N    RESP (hiredis) load threads (default 3)\n"
          "  --client-threads N  client-node (C API put/get) load threads (default 1)\n"
          "  --set-rate R        unique acknowledged writes a second, the set workload, taken\n"
          "                      out of the load's writes (default 20; 0 = none)\n"
          "  --set-retire T      while the grid is settled, unique keys acknowledged longer ago\n"
          "                      than this are read back through every live node and deleted,\n"
          "                      so the key count stays constant (default 10m; 0 = keep all to\n"
          "                      the end)\n"
          "  --backups N         the default cache's backups (default 1; sync full_sync)\n"
          "  --failure-detection-ms N   the servers' (default 2000)\n"
          "  --region-mb N       each server's data region (default: from --keys and --value-max,\n"
          "                      at least 512)\n"
          "  --checkpoint-mb N   the servers' --checkpoint-mb (default: latticed's, 256): smaller\n"
          "                      makes a short run checkpoint, and restart from a checkpoint\n"
          "  --report-every T    one progress line this often (default 1m)\n"
          "  --warmup T          RSS samples before this are left out of the slope (default\n"
          "                      10m, or a third of --duration when that is shorter).  The\n"
          "                      slope takes only samples of the base state (3 servers, no\n"
          "                      event for 30 s) and none of a restarted process's first 2 min\n"
          "  --settle-timeout T  longest wait for the grid to settle after an event (default 3m)\n"
          "  --base-port P       first of the 12 ports (4 peer, 4 RESP, 4 HTTP; default: a free range\n"
          "                      in 20000..32767)\n"
          "  --spare N           never kill base server sN (0-2), so one process lives through\n"
          "                      every event (for a heap profile of it; default: none)\n"
          "  --seed N            random seed (default: time and pid)\n"
          "  --keep              keep the temp dir (logs, data dirs; kept anyway on failure)\n"
          "  --json              progress lines on stderr, the summary as one JSON object on stdout\n"
          "  --latticed PATH, --lattice PATH   the binaries (default: this build's; copied into\n"
          "                      the temp dir at the start, so a rebuild meanwhile changes nothing)\n"
          "  --help\n",
          f);
}

static double parse_time(const char *s, const char *name)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s || v < 0) {
        fprintf(stderr, "soak: bad %s '%s'\n", name, s);
        exit(2);
    }
    if (*end == 'h') v *= 3600, end++;
    else if (*end == 'm' && end[1] != 's') v *= 60, end++;
    else if (*end == 'm' && end[1] == 's') v /= 1000, end += 2;
    else if (*end == 's') end++;
    if (*end) {
        fprintf(stderr, "soak: bad %s '%s'\n", name, s);
        exit(2);
    }
    return v;
}

static long parse_long(const char *s, const char *name, long lo, long hi)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (end == s || *end || v < lo || v > hi) {
        fprintf(stderr, "soak: %s must be %ld..%ld, not '%s'\n", name, lo, hi, s);
        exit(2);
    }
    return v;
}

/* ---------------------------------------------------------------- time */

static double t0;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double el(void) { return now_s() - t0; }

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
    FILE *f = opt.json ? stderr : stdout;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(f, fmt, ap);
    va_end(ap);
    fflush(f);
}

/* ---------------------------------------------------------------- processes */

#define N_SRV 4 /* 3 base servers and the joiner */

typedef struct server {
    pid_t pid;
    int peer, resp, http;
    char dir[300], log[300];
    int starts, crashes;
    double started_at;           /* el() of the current incarnation's serve */
    _Atomic int accepting;       /* load threads may connect */
    _Atomic int users;           /* load threads connected now */
} server;

static server srv[N_SRV];
static char tmpdir[256];
static char finder[64], cluster[48];
static volatile sig_atomic_t stop_signal;
static pid_t helper_pid; /* a running `lattice verify` */
static lattice_node *cn; /* the client node */

static void on_signal(int sig) { stop_signal = sig; }

static bool reap(server *s, int *status)
{
    if (s->pid <= 0) return true;
    int st = 0;
    pid_t r = waitpid(s->pid, &st, WNOHANG);
    if (r == s->pid || (r < 0 && errno == ECHILD)) {
        if (status) *status = st;
        s->pid = 0;
        return true;
    }
    return false;
}

static void stop_server(server *s, int sig, double timeout)
{
    if (s->pid <= 0) return;
    atomic_store(&s->accepting, 0);
    kill(s->pid, sig);
    double end = now_s() + timeout;
    while (!reap(s, NULL) && now_s() < end) usleep(20000);
    if (s->pid > 0) {
        kill(s->pid, SIGKILL);
        waitpid(s->pid, NULL, 0);
        s->pid = 0;
    }
}

static void stop_all(void)
{
    if (helper_pid > 0) {
        kill(helper_pid, SIGKILL);
        waitpid(helper_pid, NULL, 0);
        helper_pid = 0;
    }
    for (int i = 0; i < N_SRV; i++)
        if (srv[i].pid > 0) {
            atomic_store(&srv[i].accepting, 0);
            kill(srv[i].pid, SIGTERM);
        }
    for (int i = 0; i < N_SRV; i++) stop_server(&srv[i], SIGTERM, 15);
}

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("soak: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    /* the client node's threads may still run: stop the servers first */
    stop_all();
    if (tmpdir[0]) fprintf(stderr, "soak: logs and data dirs kept in %s\n", tmpdir);
    _exit(1);
}

static void spawn_server(int i)
{
    server *s = &srv[i];
    char peer[16], resp[16], http[16], fd[16], region[16], cache[64];
    snprintf(peer, sizeof peer, "%d", s->peer);
    snprintf(resp, sizeof resp, "%d", s->resp);
    snprintf(http, sizeof http, "%d", s->http);
    snprintf(fd, sizeof fd, "%d", opt.fd_ms);
    snprintf(region, sizeof region, "%d", opt.region_mb);
    snprintf(cache, sizeof cache, "default:backups=%d,sync=full_sync", opt.backups);
    char *argv[] = {(char *)opt.latticed, "--port", peer, "--port-range", "1", "--ip-finder", finder, "--cluster",
                    cluster, "--failure-detection-ms", fd, "--data-dir", s->dir, "--resp-port", resp, "--cache",
                    cache, "--region-mb", region, "--http-port", http, "--log-level", "info", NULL, NULL, NULL};
    char ckpt[16];
    if (opt.checkpoint_mb) {
        snprintf(ckpt, sizeof ckpt, "%d", opt.checkpoint_mb);
        size_t a = sizeof argv / sizeof argv[0] - 3;
        argv[a] = "--checkpoint-mb";
        argv[a + 1] = ckpt;
    }
    int lfd = open(s->log, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (lfd < 0) die("cannot open %s: %s", s->log, strerror(errno));
    dprintf(lfd, "==== soak: start %d of s%d at %.1f s\n", s->starts + 1, i, el());
    fflush(NULL);
    pid_t p = fork();
    if (p < 0) die("fork: %s", strerror(errno));
    if (p == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlive soak */
        dup2(lfd, 1);
        dup2(lfd, 2);
        close(lfd);
        execv(argv[0], argv);
        _exit(127);
    }
    close(lfd);
    s->pid = p;
    s->starts++;
}

/* RESP answers a SET within 1 s: the server serves. */
static bool serves(const server *s)
{
    struct timeval tv = {1, 0};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", s->resp, tv);
    bool ok = false;
    if (c && !c->err) {
        redisSetTimeout(c, tv);
        redisReply *r = redisCommand(c, "SET soak:probe %d", s->resp);
        ok = r && r->type == REDIS_REPLY_STATUS;
        if (r) freeReplyObject(r);
    }
    if (c) redisFree(c);
    return ok;
}

static bool port_free(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return false;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bool ok = bind(fd, (struct sockaddr *)&a, sizeof a) == 0;
    close(fd);
    return ok;
}

static int free_ports(int n)
{
    for (int tries = 0; tries < 2000; tries++) {
        /* below the ephemeral range (32768..60999): no source port takes one
         * before the node binds it (tests/integration/harness.c) */
        int base = 20000 + rand() % (32768 - 20000 - n);
        bool ok = true;
        for (int i = 0; i < n && ok; i++) ok = port_free(base + i);
        if (ok) return base;
    }
    die("no %d free consecutive ports below 32768", n);
}

/* /proc/<pid>/status VmRSS in KiB and the entries of /proc/<pid>/fd. */
static void proc_figures(pid_t pid, long *rss_kb, int *fds)
{
    *rss_kb = -1;
    *fds = -1;
    if (pid <= 0) return;
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    if (f) {
        while (fgets(line, sizeof line, f))
            if (sscanf(line, "VmRSS: %ld", rss_kb) == 1) break;
        fclose(f);
    }
    snprintf(path, sizeof path, "/proc/%d/fd", (int)pid);
    DIR *d = opendir(path);
    if (d) {
        int n = 0;
        struct dirent *e;
        while ((e = readdir(d)))
            if (e->d_name[0] != '.') n++;
        closedir(d);
        *fds = n;
    }
}

/* A value of the node's /metrics page: the first line starting with `name`
 * (labels included), or -1. */
static double metric_of(const char *text, const char *name)
{
    size_t l = strlen(name);
    for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
        if (!strncmp(p, name, l) && p[l] == ' ') return strtod(p + l + 1, NULL);
    return -1;
}

/* The region's resident pages ((mapped - released) x page size) and the C
 * library's heap in use of the node whose HTTP port is port, in KiB; -1
 * each when it does not answer within a second (one GET a sample). */
static void node_memory(int port, long *region_kb, long *heap_kb)
{
    *region_kb = *heap_kb = -1;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return;
    struct timeval tv = {1, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    static char buf[1 << 18];
    size_t n = 0;
    const char req[] = "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
    if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0 && write(fd, req, sizeof req - 1) == (ssize_t)sizeof req - 1) {
        ssize_t r;
        while (n < sizeof buf - 1 && (r = read(fd, buf + n, sizeof buf - 1 - n)) > 0) n += (size_t)r;
    }
    close(fd);
    buf[n] = 0;
    const char *body = strstr(buf, "\r\n\r\n");
    if (!body) return;
    double mapped = metric_of(body, "lattice_region_pages{state=\"mapped\"}");
    double released = metric_of(body, "lattice_region_pages{state=\"released\"}");
    double page = metric_of(body, "lattice_region_page_size_bytes");
    double heap = metric_of(body, "lattice_heap_bytes{state=\"in_use\"}");
    if (mapped >= 0 && released >= 0 && page > 0) *region_kb = (long)((mapped - released) * page / 1024);
    if (heap >= 0) *heap_kb = (long)(heap / 1024);
}

/* ---------------------------------------------------------------- figures */

/* Latency histogram: 16 buckets per power of two of microseconds. */
#define NB 640
static _Atomic uint64_t hist_now[NB];
static _Atomic uint64_t err_now;

static int bucket(uint64_t us)
{
    if (us < 16) return (int)us;
    int e = 63 - __builtin_clzll(us);
    int b = (e - 3) * 16 + (int)((us >> (e - 4)) & 15);
    return b < NB ? b : NB - 1;
}

static double bucket_ms(int b) /* the bucket's upper bound */
{
    if (b < 16) return (b + 1) / 1000.0;
    int e = b / 16 + 3, sub = b % 16;
    return (double)((16ull + (uint64_t)sub + 1) << (e - 4)) / 1000.0;
}

static double p_of(const uint64_t *h, double q, uint64_t *total)
{
    uint64_t n = 0;
    for (int i = 0; i < NB; i++) n += h[i];
    if (total) *total = n;
    if (!n) return 0;
    uint64_t want = (uint64_t)ceil(q * (double)n), seen = 0;
    for (int i = 0; i < NB; i++) {
        seen += h[i];
        if (seen >= want) return bucket_ms(i);
    }
    return bucket_ms(NB - 1);
}

/* Slices of SLICE_S seconds: histogram, errors, time. */
#define SLICE_S 10.0
typedef struct slice {
    double t;
    uint64_t h[NB];
    uint64_t errors;
    bool base; /* the whole slice in the base state (calm for CALM_S > SLICE_S at its end) */
} slice;
static slice *slices;
static size_t n_slices, cap_slices;

/* `base`: taken in the state the slope compares - the 3 base servers
 * serving, no 4th server, no event under way and none for CALM_S (a node
 * holds more with 3 servers than with 4, and more while it rebalances). */
typedef struct rss_sample {
    double t;
    long kb;
    long region_kb, heap_kb; /* from the node's /metrics; -1 when it did not answer */
    int node, incarnation;
    bool base;
} rss_sample;
static rss_sample *rss;
static size_t n_rss, cap_rss;

/* Windows where errors are expected, classified at the end: a kill (or an
 * unexpected exit) from the kill until the grid settled again, and a stall
 * of the host (soak's own loop, or a node logging "this node was stalled"),
 * each plus a grace of 3 failure detections.  An error counts as in a
 * window when the op's [start, end] overlaps it. */
enum { W_KILL, W_STALL };
typedef struct window {
    double a, b;
    int type;
} window;
static window wins[4096];
static int n_wins;
static double kill_open = -1; /* el() of the kill whose window is open */

static void add_window(double a, double b, int type)
{
    if (n_wins < (int)(sizeof wins / sizeof wins[0])) wins[n_wins++] = (window){a, b, type};
}

static double grace_s(void) { return 3.0 * opt.fd_ms / 1000; }

/* Error kinds: "via: message", counted; every error's times kept. */
#define N_KINDS 48
static struct {
    char what[64];
    uint64_t n, in_kill, in_stall, outside;
} kinds[N_KINDS];
static int n_kinds;
typedef struct errrec {
    double start, end;
    int kind;
} errrec;
#define MAX_ERRRECS 1000000
static errrec *errs;
static size_t n_errs, errs_dropped;
static pthread_mutex_t kinds_mu = PTHREAD_MUTEX_INITIALIZER;
static FILE *errlog;

static void error_seen(double start, const char *via, const char *what)
{
    double end = el();
    atomic_fetch_add(&err_now, 1);
    pthread_mutex_lock(&kinds_mu);
    char k[64];
    snprintf(k, sizeof k, "%s: %s", via, what);
    int i = 0;
    while (i < n_kinds && strcmp(kinds[i].what, k)) i++;
    if (i == n_kinds && n_kinds < N_KINDS) snprintf(kinds[n_kinds++].what, 64, "%s", k);
    if (i == N_KINDS) i = N_KINDS - 1; /* the last kind takes the rest */
    kinds[i].n++;
    if (!errs) errs = malloc(MAX_ERRRECS * sizeof *errs);
    if (errs && n_errs < MAX_ERRRECS) errs[n_errs++] = (errrec){start, end, i};
    else errs_dropped++;
    if (errlog) fprintf(errlog, "%.3f error (op from %.3f) %s\n", end, start, k);
    pthread_mutex_unlock(&kinds_mu);
}

/* After the load: every error into its window, the counts per kind. */
static void classify_errors(uint64_t *in_kill, uint64_t *in_stall, uint64_t *outside)
{
    *in_kill = *in_stall = *outside = 0;
    for (size_t e = 0; e < n_errs; e++) {
        int type = -1;
        for (int w = 0; w < n_wins; w++)
            if (errs[e].start <= wins[w].b && errs[e].end >= wins[w].a && (type < 0 || wins[w].type == W_KILL))
                type = wins[w].type;
        int k = errs[e].kind;
        if (type == W_KILL) kinds[k].in_kill++, (*in_kill)++;
        else if (type == W_STALL) kinds[k].in_stall++, (*in_stall)++;
        else {
            kinds[k].outside++, (*outside)++;
            if (errlog) fprintf(errlog, "OUTSIDE %.3f (op from %.3f) %s\n", errs[e].end, errs[e].start, kinds[k].what);
        }
    }
    *outside += errs_dropped; /* not classified: counted against the grid */
}

/* Stalls the nodes logged ("this node was stalled for N ms"), as windows:
 * their log stamps are UTC wall clock, t0_wall is el() 0. */
static double t0_wall;
static void stalls_from_log(const char *log)
{
    FILE *f = fopen(log, "r");
    if (!f) return;
    char line[1024];
    while (fgets(line, sizeof line, f)) {
        const char *p = strstr(line, "was stalled for ");
        int y, mo, d, h, mi;
        double sec;
        long ms;
        if (!p || sscanf(p, "was stalled for %ld ms", &ms) != 1) continue;
        if (sscanf(line, "%d-%d-%dT%d:%d:%lfZ", &y, &mo, &d, &h, &mi, &sec) != 6) continue;
        struct tm tm = {.tm_year = y - 1900, .tm_mon = mo - 1, .tm_mday = d, .tm_hour = h, .tm_min = mi};
        double at = (double)timegm(&tm) + sec - t0_wall;
        add_window(at - ms / 1000.0, at + grace_s(), W_STALL);
        if (errlog) fprintf(errlog, "%.3f STALL %ld ms logged in %s\n", at, ms, log);
    }
    fclose(f);
}

/* ---------------------------------------------------------------- the set workload */

typedef struct acked {
    uint64_t seq, rnd;
    double t;
    char via[8]; /* "s0".."s3" or "client" */
} acked;
static acked *acks;
static size_t n_acks, cap_acks;
static pthread_mutex_t acks_mu = PTHREAD_MUTEX_INITIALIZER;
static _Atomic uint64_t uniq_issued, uniq_failed;
static _Atomic int load_stop;
static double load_t0;

static void unique_kv(uint64_t seq, uint64_t rnd, char *k, size_t kc, char *v, size_t vc)
{
    snprintf(k, kc, "soak:u:%010" PRIu64, seq);
    snprintf(v, vc, "u%" PRIu64 ":%016" PRIx64, seq, rnd);
}

/* Is a unique write due now (set_rate a second since the load started)? */
static bool unique_due(uint64_t *seq)
{
    if (opt.set_rate <= 0) return false;
    uint64_t due = (uint64_t)((now_s() - load_t0) * opt.set_rate);
    uint64_t cur = atomic_load(&uniq_issued);
    while (cur < due)
        if (atomic_compare_exchange_weak(&uniq_issued, &cur, cur + 1)) {
            *seq = cur;
            return true;
        }
    return false;
}

static void remember(uint64_t seq, uint64_t rnd, const char *via)
{
    pthread_mutex_lock(&acks_mu);
    if (n_acks == cap_acks) {
        size_t nc = cap_acks ? cap_acks * 2 : 4096;
        acked *na = realloc(acks, nc * sizeof *na);
        if (!na) die("out of memory");
        acks = na;
        cap_acks = nc;
    }
    acks[n_acks] = (acked){seq, rnd, el(), ""};
    snprintf(acks[n_acks].via, sizeof acks[n_acks].via, "%s", via);
    n_acks++;
    pthread_mutex_unlock(&acks_mu);
}

/* ---------------------------------------------------------------- load */

#define N_COUNTERS 1000
static _Atomic uint64_t bad_values, incr_regressions;

typedef struct worker {
    pthread_t th;
    int id;
    uint64_t rng;
    int64_t last[N_COUNTERS]; /* last INCR result seen per counter (plain and tagged) */
    int64_t last_tx[N_COUNTERS];
    char filler[1100];
    uint64_t ops;
} worker;

static uint64_t rnd(worker *w)
{
    w->rng ^= w->rng << 13;
    w->rng ^= w->rng >> 7;
    w->rng ^= w->rng << 17;
    return w->rng;
}

static size_t make_value(worker *w, const char *key, char *v)
{
    size_t len = (size_t)opt.vmin + rnd(w) % (uint64_t)(opt.vmax - opt.vmin + 1);
    int p = snprintf(v, len + 1, "%s|", key);
    if ((size_t)p < len) memcpy(v + p, w->filler + rnd(w) % 64, len - (size_t)p);
    v[len] = 0;
    return len;
}

static bool value_ok(const char *key, const char *v, size_t vl)
{
    size_t kl = strlen(key);
    if (vl < (size_t)opt.vmin || vl > (size_t)opt.vmax) return false;
    if (vl <= kl) return false;
    return !memcmp(v, key, kl) && v[kl] == '|';
}

static void record(double start)
{
    double us = (now_s() - start) * 1e6;
    atomic_fetch_add_explicit(&hist_now[bucket((uint64_t)us)], 1, memory_order_relaxed);
}

static void check_incr(worker *w, int64_t *last, int c, long long got)
{
    if (got <= last[c]) {
        atomic_fetch_add(&incr_regressions, 1);
        if (errlog) fprintf(errlog, "%.3f INCR REGRESSION thread %d counter %d: %lld after %lld\n", el(), w->id, c, got,
                            (long long)last[c]);
    }
    last[c] = got;
}

static int pick_server(worker *w)
{
    int live[N_SRV], n = 0;
    for (int i = 0; i < N_SRV; i++)
        if (atomic_load(&srv[i].accepting)) live[n++] = i;
    return n ? live[rnd(w) % (uint64_t)n] : -1;
}

static const char *reply_err(redisContext *c, redisReply *r)
{
    if (!r) return c->errstr[0] ? c->errstr : "no reply";
    if (r->type == REDIS_REPLY_ERROR) return r->str;
    return "unexpected reply";
}

static void *resp_worker(void *arg)
{
    worker *w = arg;
    redisContext *c = NULL;
    int node = -1;
    char key[64], val[1200], via[8];
    const uint64_t max_ops = 1ull << 40; /* bounded in count as well as in time */
    while (!atomic_load(&load_stop) && w->ops < max_ops) {
        if (c && !atomic_load(&srv[node].accepting)) { /* draining or killed: move */
            redisFree(c);
            c = NULL;
            atomic_fetch_sub(&srv[node].users, 1);
        }
        if (!c) {
            node = pick_server(w);
            if (node < 0) {
                usleep(100000);
                continue;
            }
            atomic_fetch_add(&srv[node].users, 1);
            double cstart = el();
            struct timeval tv = {2, 0};
            c = redisConnectWithTimeout("127.0.0.1", srv[node].resp, tv);
            if (!c || c->err) {
                if (atomic_load(&srv[node].accepting)) error_seen(cstart, "connect", c ? c->errstr : "no context");
                if (c) redisFree(c);
                c = NULL;
                atomic_fetch_sub(&srv[node].users, 1);
                usleep(100000);
                continue;
            }
            tv.tv_sec = 20; /* above the grid's 15 s op timeout */
            redisSetTimeout(c, tv);
            snprintf(via, sizeof via, "s%d", node & 7);
        }
        double start = now_s(), est = el();
        uint64_t r = rnd(w) % 100, seq;
        bool ok = false;
        const char *what = NULL;
        redisReply *rep = NULL;
        if (unique_due(&seq)) {
            uint64_t rn = rnd(w);
            char uk[40], uv[48];
            unique_kv(seq, rn, uk, sizeof uk, uv, sizeof uv);
            rep = redisCommand(c, "SET %s %s", uk, uv);
            ok = rep && rep->type == REDIS_REPLY_STATUS && !strcmp(rep->str, "OK");
            if (ok) remember(seq, rn, via);
            else atomic_fetch_add(&uniq_failed, 1);
        } else if (r < 35) { /* GET */
            snprintf(key, sizeof key, "soak:k:%08" PRIu64, rnd(w) % (uint64_t)opt.keys);
            rep = redisCommand(c, "GET %s", key);
            ok = rep && (rep->type == REDIS_REPLY_STRING || rep->type == REDIS_REPLY_NIL);
            if (ok && rep->type == REDIS_REPLY_STRING && !value_ok(key, rep->str, rep->len)) {
                atomic_fetch_add(&bad_values, 1);
                if (errlog) fprintf(errlog, "%.3f BAD VALUE %s via %s: %.40s (%zu B)\n", el(), key, via, rep->str, rep->len);
            }
        } else if (r < 70) { /* SET */
            snprintf(key, sizeof key, "soak:k:%08" PRIu64, rnd(w) % (uint64_t)opt.keys);
            size_t vl = make_value(w, key, val);
            rep = redisCommand(c, "SET %s %b", key, val, vl);
            ok = rep && rep->type == REDIS_REPLY_STATUS;
        } else if (r < 85) { /* INCR: per thread counters, so results must rise */
            int k = (int)(rnd(w) % N_COUNTERS);
            rep = redisCommand(c, "INCR soak:c:%d:%d", w->id, k);
            ok = rep && rep->type == REDIS_REPLY_INTEGER;
            if (ok) check_incr(w, w->last, k, rep->integer);
        } else { /* MULTI/EXEC on one slot: {soak:t:T:K} */
            int k = (int)(rnd(w) % N_COUNTERS);
            char tag[48];
            snprintf(tag, sizeof tag, "{soak:t:%d:%d}", w->id, k);
            size_t vl = make_value(w, tag, val);
            redisAppendCommand(c, "MULTI");
            redisAppendCommand(c, "SET %s:a %b", tag, val, vl);
            redisAppendCommand(c, "INCR %s:n", tag);
            redisAppendCommand(c, "GET %s:a", tag);
            redisAppendCommand(c, "EXEC");
            ok = true;
            for (int i = 0; i < 5; i++) {
                redisReply *x = NULL;
                if (redisGetReply(c, (void **)&x) != REDIS_OK) {
                    ok = false;
                    what = c->errstr[0] ? c->errstr : "no reply";
                    break;
                }
                if (i < 4) {
                    if (x->type == REDIS_REPLY_ERROR && ok) {
                        ok = false;
                        snprintf(val, 80, "%s", x->str);
                        what = val;
                    }
                    freeReplyObject(x);
                } else
                    rep = x;
            }
            if (ok && rep) {
                if (rep->type == REDIS_REPLY_ARRAY && rep->elements == 3 && rep->element[1]->type == REDIS_REPLY_INTEGER &&
                    rep->element[2]->type == REDIS_REPLY_STRING) {
                    check_incr(w, w->last_tx, k, rep->element[1]->integer);
                    char akey[64];
                    snprintf(akey, sizeof akey, "%s", tag);
                    if (!value_ok(akey, rep->element[2]->str, rep->element[2]->len) ||
                        rep->element[2]->len != vl) {
                        atomic_fetch_add(&bad_values, 1);
                        if (errlog) fprintf(errlog, "%.3f BAD VALUE in EXEC %s via %s\n", el(), tag, via);
                    }
                } else {
                    ok = false;
                    what = rep->type == REDIS_REPLY_ERROR ? rep->str : "EXEC: unexpected reply";
                }
            }
        }
        if (ok) {
            record(start);
            w->ops++;
        } else {
            error_seen(est, via, what ? what : reply_err(c, rep));
        }
        if (rep) freeReplyObject(rep);
        if (c->err) { /* the connection is gone: another node next */
            redisFree(c);
            c = NULL;
            atomic_fetch_sub(&srv[node].users, 1);
            usleep(50000);
        }
    }
    if (c) {
        redisFree(c);
        atomic_fetch_sub(&srv[node].users, 1);
    }
    return NULL;
}

static void *client_worker(void *arg)
{
    worker *w = arg;
    char key[64], val[1200];
    const uint64_t max_ops = 1ull << 40;
    while (!atomic_load(&load_stop) && w->ops < max_ops) {
        double start = now_s(), est = el();
        uint64_t seq;
        lattice_status st;
        if (unique_due(&seq)) {
            uint64_t rn = rnd(w);
            char uk[40], uv[48];
            unique_kv(seq, rn, uk, sizeof uk, uv, sizeof uv);
            st = lattice_cache_put(cn, "default", uk, strlen(uk), uv, strlen(uv));
            if (st == LATTICE_OK) remember(seq, rn, "client");
            else atomic_fetch_add(&uniq_failed, 1);
        } else {
            snprintf(key, sizeof key, "soak:k:%08" PRIu64, rnd(w) % (uint64_t)opt.keys);
            if (rnd(w) % 2) {
                size_t vl = make_value(w, key, val);
                st = lattice_cache_put(cn, "default", key, strlen(key), val, vl);
            } else {
                void *v = NULL;
                size_t vl = 0;
                st = lattice_cache_get(cn, "default", key, strlen(key), &v, &vl);
                if (st == LATTICE_ERR_NOT_FOUND) st = LATTICE_OK;
                if (st == LATTICE_OK && v && !value_ok(key, v, vl)) {
                    atomic_fetch_add(&bad_values, 1);
                    if (errlog) fprintf(errlog, "%.3f BAD VALUE %s via client (%zu B)\n", el(), key, vl);
                }
                if (v) lt_free(v);
            }
        }
        if (st == LATTICE_OK) {
            record(start);
            w->ops++;
        } else {
            error_seen(est, "client", lattice_strerror(st));
            usleep(10000);
        }
    }
    return NULL;
}

/* ---------------------------------------------------------------- grid state */

static int servers_in_topology(void)
{
    lattice_topology *t = lattice_node_topology(cn);
    int n = 0;
    for (size_t i = 0; t && i < lattice_topology_size(t); i++)
        n += lattice_topology_member(t, i)->role == LATTICE_ROLE_SERVER;
    if (t) lattice_topology_release(t);
    return n;
}

/* The baseline is exactly the servers of the topology: a kill then leaves
 * a strict majority (a server that left stays in the baseline until it is
 * removed or --baseline-auto-adjust-ms passed, and 2 of 4 is no quorum). */
static bool baseline_is_topology(void)
{
    lattice_topology *t = lattice_node_topology(cn);
    if (!t) return false;
    size_t servers = 0, found = 0, nb = lattice_topology_baseline_size(t);
    for (size_t i = 0; i < lattice_topology_size(t); i++) {
        const lattice_member *m = lattice_topology_member(t, i);
        if (m->role != LATTICE_ROLE_SERVER) continue;
        servers++;
        for (size_t b = 0; b < nb; b++)
            if (!strcmp(lattice_topology_baseline_at(t, b), m->consistent_id)) {
                found++;
                break;
            }
    }
    lattice_topology_release(t);
    return nb == servers && found == servers;
}

/* Every partition of "default" has its copies, all OWNING, none MOVING, on
 * `want` servers (as the client node sees it). */
static bool settled(int want)
{
    if (servers_in_topology() != want || !baseline_is_topology()) return false;
    lattice_partitions_info *pi = NULL;
    if (lattice_cache_partitions(cn, "default", &pi) != LATTICE_OK) return false;
    bool ok = pi->partitions > 0;
    for (uint32_t p = 0; ok && p < pi->partitions; p++) {
        uint32_t owning = 0;
        for (uint32_t i = 0; i < pi->n_owners[p]; i++) {
            const lattice_partition_owner *o = &pi->owners[(size_t)p * pi->max_owners + i];
            if (strcmp(o->state, "OWNING")) ok = false;
            else owning++;
        }
        if (owning < pi->copies_wanted || !pi->n_owners[p] || !pi->owners[(size_t)p * pi->max_owners].primary)
            ok = false;
    }
    lattice_partitions_info_free(pi);
    return ok;
}

/* ---------------------------------------------------------------- events */

enum ev { EV_NONE, EV_RESTARTING, EV_SETTLING, EV_JOINING, EV_DRAINING, EV_LEAVING };
static enum ev ev_state;
static int ev_node;
static double ev_t, ev_serve_t;
static char minute_events[512];
static int n_kills, n_joins, n_leaves, n_crashes, n_stuck;
static double worst_serve_s, worst_settle_s;

static void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void note(const char *fmt, ...)
{
    char b[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b, sizeof b, fmt, ap);
    va_end(ap);
    size_t l = strlen(minute_events);
    snprintf(minute_events + l, sizeof minute_events - l, "%s%s", l ? ", " : "", b);
    if (errlog) fprintf(errlog, "%.3f EVENT %s\n", el(), b);
}

static void open_window(void)
{
    if (kill_open < 0) kill_open = el();
}

static void close_window(void)
{
    if (kill_open >= 0) add_window(kill_open, el() + grace_s(), W_KILL);
    kill_open = -1;
}

static int want_servers(void) { return 3 + (srv[3].pid > 0); }

static double next_kill, next_join, leave_at;
static double calm_since; /* el() when the last event ended */
#define CALM_S 30.0
#define YOUNG_S 120.0 /* a restarted process's warm-up, left out of the slope */

/* One step of the event machine: called every tick by the main loop. */
static void events_step(bool final_phase)
{
    double t = el();
    /* a server that exited by itself: a crash, restarted */
    for (int i = 0; i < N_SRV; i++) {
        int st;
        if (srv[i].pid > 0 && !(ev_state == EV_LEAVING && ev_node == i) && reap(&srv[i], &st)) {
            atomic_store(&srv[i].accepting, 0);
            srv[i].crashes++;
            n_crashes++;
            note("s%d EXITED (%s %d; log %s)", i, WIFSIGNALED(st) ? "signal" : "status",
                 WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st), srv[i].log);
            fprintf(stderr, "soak: s%d exited by itself at %.0f s: see %s\n", i, t, srv[i].log);
            if (i == 3) continue; /* the joiner is not brought back */
            open_window();
            spawn_server(i);
            ev_state = EV_RESTARTING;
            ev_node = i;
            ev_t = now_s();
        }
    }
    switch (ev_state) {
    case EV_NONE:
        if (final_phase) return;
        if (opt.kill_every_s > 0 && t >= next_kill) {
            if (!settled(want_servers())) return; /* a kill waits for every copy */
            int i = (int)((unsigned)rand() % 3u);
            if (i == opt.spare) i = (i + 1 + (int)((unsigned)rand() % 2u)) % 3;
            open_window();
            atomic_store(&srv[i].accepting, 0);
            kill(srv[i].pid, SIGKILL);
            waitpid(srv[i].pid, NULL, 0);
            srv[i].pid = 0;
            n_kills++;
            note("kill -9 s%d", i);
            spawn_server(i); /* same ports, same data dir */
            ev_state = EV_RESTARTING;
            ev_node = i;
            ev_t = now_s();
            next_kill = t + opt.kill_every_s;
        } else if (opt.join_every_s > 0 && srv[3].pid <= 0 && t >= next_join) {
            spawn_server(3);
            n_joins++;
            note("s3 joins");
            ev_state = EV_JOINING;
            ev_node = 3;
            ev_t = now_s();
            next_join = t + opt.join_every_s;
        } else if (srv[3].pid > 0 && t >= leave_at) {
            atomic_store(&srv[3].accepting, 0); /* load threads move off it first */
            ev_state = EV_DRAINING;
            ev_node = 3;
            ev_t = now_s();
        }
        return;
    case EV_RESTARTING:
    case EV_JOINING:
        if (serves(&srv[ev_node])) {
            ev_serve_t = now_s();
            srv[ev_node].started_at = el();
            atomic_store(&srv[ev_node].accepting, 1);
            double d = ev_serve_t - ev_t;
            if (d > worst_serve_s) worst_serve_s = d;
            note("s%d serves after %.1f s", ev_node, d);
            ev_state = EV_SETTLING;
        } else if (now_s() - ev_t > opt.settle_s) {
            n_stuck++;
            note("s%d NOT SERVING after %.0f s", ev_node, opt.settle_s);
            fprintf(stderr, "soak: s%d does not serve %.0f s after its start: see %s\n", ev_node, opt.settle_s,
                    srv[ev_node].log);
            ev_t = now_s(); /* keep waiting, say so again */
        }
        return;
    case EV_SETTLING:
        if (settled(want_servers())) {
            double d = now_s() - ev_t;
            if (d > worst_settle_s) worst_settle_s = d;
            note("s%d settled after %.1f s", ev_node, d);
            if (ev_node == 3) leave_at = el() + opt.join_hold_s;
            close_window();
            ev_state = EV_NONE;
            calm_since = el();
        } else if (now_s() - ev_t > opt.settle_s) {
            n_stuck++;
            note("grid NOT SETTLED %.0f s after s%d started", opt.settle_s, ev_node);
            close_window();
            ev_state = EV_NONE;
            calm_since = el();
        }
        return;
    case EV_DRAINING:
        if (atomic_load(&srv[3].users) == 0 || now_s() - ev_t > 30) {
            kill(srv[3].pid, SIGTERM);
            note("s3 leaves (SIGTERM)");
            ev_state = EV_LEAVING;
            ev_t = now_s();
        }
        return;
    case EV_LEAVING: {
        int st;
        if (reap(&srv[3], &st)) {
            n_leaves++;
            note("s3 left after %.1f s (exit %d)", now_s() - ev_t, WIFEXITED(st) ? WEXITSTATUS(st) : -WTERMSIG(st));
            /* retired: out of the baseline at once (docs/OPERATIONS.md) */
            char cid[32], why[200] = "";
            snprintf(cid, sizeof cid, "127.0.0.1:%d", srv[3].peer);
            const char *cids[] = {cid};
            lattice_status bs =
                lattice_node_baseline_change(cn, LATTICE_BASELINE_REMOVE, cids, 1, false, 10000, NULL, why, sizeof why);
            if (bs != LATTICE_OK) note("baseline remove %s: %s %s", cid, lattice_strerror(bs), why);
            ev_state = EV_SETTLING;
            ev_node = 3;
            ev_t = now_s();
            leave_at = 1e18;
        } else if (now_s() - ev_t > 120) {
            note("s3 did not stop 120 s after SIGTERM: killed");
            n_stuck++;
            stop_server(&srv[3], SIGKILL, 5);
        }
        return;
    }
    }
}

/* ---------------------------------------------------------------- reports */

static uint64_t hist_minute[NB];
static uint64_t err_minute;
static double last_report;

static void take_slice(void)
{
    if (n_slices == cap_slices) {
        size_t nc = cap_slices ? cap_slices * 2 : 64;
        slice *ns = realloc(slices, nc * sizeof *ns);
        if (!ns) die("out of memory");
        slices = ns;
        cap_slices = nc;
    }
    slice *s = &slices[n_slices++];
    s->t = now_s() - load_t0;
    for (int i = 0; i < NB; i++) {
        s->h[i] = atomic_exchange(&hist_now[i], 0);
        hist_minute[i] += s->h[i];
    }
    s->errors = atomic_exchange(&err_now, 0);
    err_minute += s->errors;
    s->base = ev_state == EV_NONE && srv[3].pid <= 0 && el() - calm_since >= CALM_S;
    for (int i = 0; i < N_SRV; i++) {
        if (srv[i].pid <= 0 || !atomic_load(&srv[i].accepting)) continue;
        long kb;
        int fds;
        proc_figures(srv[i].pid, &kb, &fds);
        if (kb < 0) continue;
        if (n_rss == cap_rss) {
            size_t nc = cap_rss ? cap_rss * 2 : 256;
            rss_sample *nr = realloc(rss, nc * sizeof *nr);
            if (!nr) die("out of memory");
            rss = nr;
            cap_rss = nc;
        }
        bool base = ev_state == EV_NONE && srv[3].pid <= 0 && el() - calm_since >= CALM_S;
        long region_kb, heap_kb;
        node_memory(srv[i].http, &region_kb, &heap_kb);
        rss[n_rss++] = (rss_sample){now_s() - load_t0, kb, region_kb, heap_kb, i, srv[i].starts, base};
    }
}

static void report_line(void)
{
    double t = now_s() - load_t0, span = t - last_report;
    uint64_t n;
    double p99 = p_of(hist_minute, 0.99, &n);
    char nodes[512] = "";
    size_t l = 0;
    for (int i = 0; i < N_SRV; i++) {
        long kb;
        int fds;
        proc_figures(srv[i].pid, &kb, &fds);
        if (kb >= 0 && !atomic_load(&srv[i].accepting))
            l += (size_t)snprintf(nodes + l, sizeof nodes - l, " | s%d starting", i);
        else if (kb >= 0)
            l += (size_t)snprintf(nodes + l, sizeof nodes - l, " | s%d %.1f MiB %d fds", i, kb / 1024.0, fds);
        else if (i < 3)
            l += (size_t)snprintf(nodes + l, sizeof nodes - l, " | s%d down", i);
        if (l >= sizeof nodes) l = sizeof nodes - 1;
    }
    say("[%3d:%02d] %8.0f ops/s  p99 %7.2f ms  errors %4" PRIu64 "%s%s%s\n", (int)(t / 60), (int)t % 60,
        span > 0 ? (double)n / span : 0, p99, err_minute, nodes, minute_events[0] ? "  events: " : "",
        minute_events);
    memset(hist_minute, 0, sizeof hist_minute);
    err_minute = 0;
    minute_events[0] = 0;
    last_report = t;
}

/* ---------------------------------------------------------------- end checks */

typedef struct node_loss {
    char name[8];
    bool checked;
    uint64_t missing, wrong, errors;
} node_loss;

/* The n acknowledged unique keys of a through server i (RESP, pipelined). */
static void readback_resp(int i, const acked *a, size_t n, node_loss *nl, uint8_t *lost)
{
    snprintf(nl->name, sizeof nl->name, "s%d", i);
    struct timeval tv = {5, 0};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", srv[i].resp, tv);
    if (!c || c->err) {
        nl->errors += n;
        if (c) redisFree(c);
        return;
    }
    tv.tv_sec = 20;
    redisSetTimeout(c, tv);
    nl->checked = true;
    char k[40], v[48];
    for (size_t b = 0; b < n; b += 500) {
        size_t e = b + 500 < n ? b + 500 : n;
        for (size_t j = b; j < e; j++) {
            unique_kv(a[j].seq, a[j].rnd, k, sizeof k, v, sizeof v);
            redisAppendCommand(c, "GET %s", k);
        }
        for (size_t j = b; j < e; j++) {
            redisReply *r = NULL;
            if (redisGetReply(c, (void **)&r) != REDIS_OK) {
                nl->errors += e - j;
                nl->checked = false;
                redisFree(c);
                return;
            }
            unique_kv(a[j].seq, a[j].rnd, k, sizeof k, v, sizeof v);
            if (r->type == REDIS_REPLY_NIL) {
                nl->missing++;
                lost[j] = 1;
            } else if (r->type != REDIS_REPLY_STRING) {
                nl->errors++;
            } else if (r->len != strlen(v) || memcmp(r->str, v, r->len)) {
                nl->wrong++;
                lost[j] = 1;
            }
            freeReplyObject(r);
        }
    }
    redisFree(c);
}

static void readback_client(const acked *a, size_t n, node_loss *nl, uint8_t *lost)
{
    snprintf(nl->name, sizeof nl->name, "client");
    nl->checked = true;
    enum { B = 500 };
    static char keys[B][40];
    lattice_kv kv[B];
    char v[48];
    for (size_t b = 0; b < n; b += B) {
        size_t m = 0;
        for (size_t j = b; j < n && j < b + B; j++, m++) {
            unique_kv(a[j].seq, a[j].rnd, keys[m], sizeof keys[m], v, sizeof v);
            kv[m] = (lattice_kv){keys[m], strlen(keys[m]), NULL, 0, 0};
        }
        lattice_cache_get_all(cn, "default", kv, m);
        for (size_t x = 0; x < m; x++) {
            size_t j = b + x;
            unique_kv(a[j].seq, a[j].rnd, keys[x], sizeof keys[x], v, sizeof v);
            if (kv[x].status == LATTICE_ERR_NOT_FOUND) {
                nl->missing++;
                lost[j] = 1;
            } else if (kv[x].status != LATTICE_OK) {
                nl->errors++;
            } else if (kv[x].value_len != strlen(v) || memcmp(kv[x].value, v, kv[x].value_len)) {
                nl->wrong++;
                lost[j] = 1;
            }
            if (kv[x].value) lt_free(kv[x].value);
        }
    }
}

/* The n acknowledged unique keys of a through every live server and the
 * client node; nl gets one row per node.  Returns the keys missing or wrong
 * through any of them (each logged to events.log). */
static uint64_t readback_all(const acked *a, size_t n, node_loss *nl, int *n_nl)
{
    uint8_t *lost = calloc(n ? n : 1, 1);
    if (!lost) die("out of memory");
    memset(nl, 0, (N_SRV + 1) * sizeof *nl);
    *n_nl = 0;
    for (int i = 0; i < N_SRV; i++)
        if (srv[i].pid > 0) readback_resp(i, a, n, &nl[(*n_nl)++], lost);
    readback_client(a, n, &nl[(*n_nl)++], lost);
    uint64_t lost_keys = 0;
    for (size_t j = 0; j < n; j++) {
        lost_keys += lost[j];
        if (lost[j] && errlog) {
            char k[40], v[48];
            unique_kv(a[j].seq, a[j].rnd, k, sizeof k, v, sizeof v);
            fprintf(errlog, "LOST %s = %s acknowledged at %.3f s via %s\n", k, v, a[j].t, a[j].via);
        }
    }
    free(lost);
    return lost_keys;
}

/* Keeps the key count constant: while the grid is settled, the unique keys
 * acknowledged more than --set-retire ago (so through several kills and
 * joins) are read back through every live node - the same check as at the
 * end - and then deleted.  What they found adds to the final figures. */
#define RETIRE_EVERY_S 60
static uint64_t retired_n, retired_lost, retired_errors;
static void retire_set_keys(void)
{
    double before = el() - opt.set_retire_s;
    pthread_mutex_lock(&acks_mu);
    size_t m = 0;
    while (m < n_acks && acks[m].t < before) m++;
    acked *a = m ? malloc(m * sizeof *a) : NULL;
    if (a) memcpy(a, acks, m * sizeof *a);
    pthread_mutex_unlock(&acks_mu);
    if (!a) return;
    node_loss nl[N_SRV + 1];
    int n_nl = 0;
    uint64_t lost = readback_all(a, m, nl, &n_nl), errors = 0;
    for (int i = 0; i < n_nl; i++) errors += nl[i].errors;
    /* Deleted through the first live server; a key whose delete failed is
     * simply left (it is counted as retired either way). */
    int s0 = 0;
    while (s0 < N_SRV && srv[s0].pid <= 0) s0++;
    struct timeval tv = {5, 0};
    redisContext *c = s0 < N_SRV ? redisConnectWithTimeout("127.0.0.1", srv[s0].resp, tv) : NULL;
    if (c && !c->err) {
        tv.tv_sec = 20;
        redisSetTimeout(c, tv);
        char k[40], v[48];
        for (size_t b = 0; b < m; b += 500) {
            size_t e = b + 500 < m ? b + 500 : m;
            for (size_t j = b; j < e; j++) {
                unique_kv(a[j].seq, a[j].rnd, k, sizeof k, v, sizeof v);
                redisAppendCommand(c, "DEL %s", k);
            }
            for (size_t j = b; j < e; j++) {
                redisReply *r = NULL;
                if (redisGetReply(c, (void **)&r) != REDIS_OK) break;
                freeReplyObject(r);
            }
        }
    }
    if (c) redisFree(c);
    pthread_mutex_lock(&acks_mu); /* load threads only append: the first m are a's */
    memmove(acks, acks + m, (n_acks - m) * sizeof *acks);
    n_acks -= m;
    pthread_mutex_unlock(&acks_mu);
    retired_n += m;
    retired_lost += lost;
    retired_errors += errors;
    if (lost || errors) note("retiring %zu unique keys: %" PRIu64 " lost, %" PRIu64 " read errors", m, lost, errors);
    free(a);
}

/* `lattice --json verify default`: conflicts, or -1 when it did not run. */
static int run_verify(char *out, size_t cap)
{
    char path[300];
    snprintf(path, sizeof path, "%s/verify.json", tmpdir);
    char *argv[] = {(char *)opt.cli, "--timeout-ms", "20000", "--ip-finder", finder, "--cluster", cluster, "--json",
                    "verify", "default", NULL};
    fflush(NULL);
    pid_t p = fork();
    if (p < 0) return -1;
    if (p == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (!freopen(path, "w", stdout)) _exit(127);
        char ep[300];
        snprintf(ep, sizeof ep, "%s/verify.err", tmpdir);
        if (!freopen(ep, "w", stderr)) _exit(127);
        execv(argv[0], argv);
        _exit(127);
    }
    helper_pid = p;
    int st = 0;
    double end = now_s() + 120;
    while (waitpid(p, &st, WNOHANG) == 0) {
        if (now_s() > end) {
            kill(p, SIGKILL);
            waitpid(p, &st, 0);
            helper_pid = 0;
            snprintf(out, cap, "verify did not finish in 120 s");
            return -1;
        }
        usleep(50000);
    }
    helper_pid = 0;
    json_error_t je;
    json_t *j = json_load_file(path, 0, &je);
    if (!j) {
        snprintf(out, cap, "verify exit %d, no JSON (see %s/verify.err)", WIFEXITED(st) ? WEXITSTATUS(st) : -1, tmpdir);
        return -1;
    }
    int conflicts = (int)json_array_size(json_object_get(j, "conflicts"));
    snprintf(out, cap, "%" JSON_INTEGER_FORMAT " partitions, %" JSON_INTEGER_FORMAT " copies, %d conflicts",
             json_integer_value(json_object_get(j, "partitions")), json_integer_value(json_object_get(j, "copies")),
             conflicts);
    json_decref(j);
    return conflicts;
}

/* The RSS slope of a node, least squares over the samples taken in the
 * base state (rss_sample) after the warm-up and after a restarted
 * incarnation's first YOUNG_S (it loads its share and fills its rings then).
 * Comparing like states only is what lets a slope say anything: over every
 * sample it would measure how long a 4th server was in.  Two fits:
 *  - level: one intercept for the node - does the memory of the node, as
 *    its operator sees it through the kills, climb over the run?
 *  - within: an intercept per incarnation (3 samples at least) - does one
 *    process's memory climb while it lives (a leak a restart hides)?
 * KiB per second, with its standard error (residuals taken as independent,
 * which 10 s samples are not quite: a lower bound). */
struct slope_fit {
    double slope, se, mean;
    int n;
};

/* What a fit is of: the process's RSS, RSS without the data region's
 * resident pages (everything else: heap, stacks, code), or the heap's
 * bytes in use.  The split tells a region that fills from a heap that
 * grows (a leak is in the heap; the region's resident pages follow the
 * data it holds). */
enum measure { M_RSS, M_REST, M_HEAP };

static double measure_of(const rss_sample *r, enum measure m)
{
    switch (m) {
    case M_REST: return r->region_kb >= 0 ? (double)(r->kb - r->region_kb) : NAN;
    case M_HEAP: return r->heap_kb >= 0 ? (double)r->heap_kb : NAN;
    default: return (double)r->kb;
    }
}

/* Which of node's samples the fits take: base state, after the warm-up, and
 * past their incarnation's first YOUNG_S (its first sample's time) unless
 * it is the first incarnation.  NULL when out of memory. */
static bool *fit_samples(int node, double warm)
{
    bool *in = calloc(n_rss ? n_rss : 1, sizeof *in);
    double *first = malloc(((size_t)srv[node].starts + 1) * sizeof *first);
    if (!in || !first) {
        free(in);
        free(first);
        return NULL;
    }
    for (int g = 0; g <= srv[node].starts; g++) first[g] = -1;
    for (size_t i = 0; i < n_rss; i++) {
        const rss_sample *r = &rss[i];
        if (r->node != node) continue;
        if (first[r->incarnation] < 0) first[r->incarnation] = r->t;
        in[i] = r->base && r->t >= warm && (r->incarnation == 1 || r->t >= first[r->incarnation] + YOUNG_S);
    }
    free(first);
    return in;
}

static struct slope_fit rss_slope(int node, double warm, bool per_incarnation, enum measure m)
{
    double sxy = 0, sxx = 0, syy = 0, sum = 0;
    int n = 0, groups = 0;
    bool *in = fit_samples(node, warm);
    for (size_t i = 0; in && i < n_rss; i++)
        if (in[i] && isnan(measure_of(&rss[i], m))) in[i] = false;
    int lo = per_incarnation ? 1 : 0, hi = in && per_incarnation ? srv[node].starts : in ? 0 : -1;
    for (int g = lo; g <= hi; g++) {
        double st = 0, sy = 0;
        int k = 0;
        for (size_t i = 0; i < n_rss; i++)
            if (in[i] && (!per_incarnation || rss[i].incarnation == g)) {
                st += rss[i].t;
                sy += measure_of(&rss[i], m);
                k++;
            }
        if (k < 3) continue;
        double mt = st / k, my = sy / k;
        for (size_t i = 0; i < n_rss; i++)
            if (in[i] && (!per_incarnation || rss[i].incarnation == g)) {
                double dt = rss[i].t - mt, dy = measure_of(&rss[i], m) - my;
                sxy += dt * dy;
                sxx += dt * dt;
                syy += dy * dy;
            }
        sum += sy;
        n += k;
        groups++;
    }
    free(in);
    struct slope_fit f = {NAN, NAN, n ? sum / n : 0, n};
    if (sxx > 0) {
        f.slope = sxy / sxx;
        double res = syy - f.slope * sxy;
        if (n > groups + 1 && res > 0) f.se = sqrt(res / (n - groups - 1) / sxx);
    }
    return f;
}

static double pct_per_hour(double kib_per_s, double mean_kib)
{
    return mean_kib > 0 && !isnan(kib_per_s) ? kib_per_s * 3600 / mean_kib * 100 : NAN;
}

/* Every RSS sample as CSV in the temp dir, for a look at what the slope
 * left out. */
static void write_rss_csv(void)
{
    char path[400];
    snprintf(path, sizeof path, "%s/rss.csv", tmpdir);
    FILE *f = fopen(path, "w");
    if (!f) return;
    fprintf(f, "t_s,node,incarnation,base,rss_kib,region_kib,heap_kib\n");
    for (size_t i = 0; i < n_rss; i++)
        fprintf(f, "%.1f,s%d,%d,%d,%ld,%ld,%ld\n", rss[i].t, rss[i].node, rss[i].incarnation, rss[i].base, rss[i].kb,
                rss[i].region_kb, rss[i].heap_kb);
    fclose(f);
}

/* The p99 of the slices in (from, to]; only those in the base state when
 * base_only (like states: a 4th server or a rebalance slows every
 * operation, and a window may hold more of them than another). */
static double window_p99(double from, double to, bool base_only, uint64_t *n)
{
    static uint64_t h[NB];
    memset(h, 0, sizeof h);
    for (size_t i = 0; i < n_slices; i++)
        if (slices[i].t > from && slices[i].t <= to + 0.5 && (!base_only || slices[i].base))
            for (int b = 0; b < NB; b++) h[b] += slices[i].h[b];
    return p_of(h, 0.99, n);
}

/* ---------------------------------------------------------------- main */

/* Copy a binary into the temp dir: every restart of an hours-long run then
 * execs the build it started with, whatever is rebuilt meanwhile. */
static const char *pin_binary(const char *src, const char *name)
{
    static char paths[2][320];
    static int slot;
    char *dst = paths[slot++ % 2];
    snprintf(dst, 320, "%s/%s", tmpdir, name);
    int in = open(src, O_RDONLY), out = open(dst, O_WRONLY | O_CREAT | O_TRUNC, 0755);
    if (in < 0 || out < 0) die("cannot copy %s to %s: %s", src, dst, strerror(errno));
    char buf[1 << 16];
    ssize_t n;
    while ((n = read(in, buf, sizeof buf)) > 0)
        if (write(out, buf, (size_t)n) != n) die("cannot copy %s: %s", src, strerror(errno));
    if (n < 0) die("cannot read %s: %s", src, strerror(errno));
    close(in);
    if (close(out) != 0) die("cannot copy %s: %s", src, strerror(errno));
    return dst;
}

static void fill(void)
{
    enum { B = 1000 };
    static char keys[B][32];
    static char vals[B][1100];
    lattice_kv kv[B];
    worker w = {.rng = 88172645463325252ull ^ opt.seed};
    for (size_t i = 0; i < sizeof w.filler; i++) w.filler[i] = (char)('a' + rnd(&w) % 26);
    double next = now_s() + 10;
    for (long i = 0; i < opt.keys; i += B) {
        size_t m = 0;
        for (long k = i; k < opt.keys && k < i + B; k++, m++) {
            snprintf(keys[m], sizeof keys[m], "soak:k:%08ld", k);
            size_t vl = make_value(&w, keys[m], vals[m]);
            kv[m] = (lattice_kv){keys[m], strlen(keys[m]), vals[m], vl, 0};
        }
        lattice_status st = LATTICE_ERR_AGAIN;
        for (int a = 0; a < 5 && st != LATTICE_OK; a++) st = lattice_cache_put_all(cn, "default", kv, m);
        if (st != LATTICE_OK) die("filling the key space: %s", lattice_strerror(st));
        if (stop_signal) die("stopped by signal %d", (int)stop_signal);
        if (now_s() > next) {
            say("  filled %ld of %ld keys\n", i + (long)m, opt.keys);
            next = now_s() + 10;
        }
    }
}

int main(int argc, char **argv)
{
    opt = (struct options){.duration_s = 300, .kill_every_s = 180, .set_retire_s = 600, .join_every_s = 600, .join_hold_s = -1,
                        .report_s = 60, .warmup_s = -1, .settle_s = 180, .keys = 100000, .vmin = 100,
                        .vmax = 1000, .resp_threads = 3, .client_threads = 1, .fd_ms = 2000, .backups = 1,
                        .region_mb = 0, .set_rate = 20, .spare = -1, .latticed = LATTICED_PATH, .cli = LATTICE_CLI_PATH};
    opt.seed = (unsigned)time(NULL) ^ (unsigned)getpid();
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(a, "--json")) {
            opt.json = true;
            continue;
        }
        if (!strcmp(a, "--keep")) {
            opt.keep = true;
            continue;
        }
        if (i + 1 >= argc) {
            usage(stderr);
            return 2;
        }
        const char *v = argv[++i];
        if (!strcmp(a, "--duration")) opt.duration_s = parse_time(v, a);
        else if (!strcmp(a, "--kill-every")) opt.kill_every_s = parse_time(v, a);
        else if (!strcmp(a, "--join-every")) opt.join_every_s = parse_time(v, a);
        else if (!strcmp(a, "--join-hold")) opt.join_hold_s = parse_time(v, a);
        else if (!strcmp(a, "--report-every")) opt.report_s = parse_time(v, a);
        else if (!strcmp(a, "--warmup")) opt.warmup_s = parse_time(v, a);
        else if (!strcmp(a, "--settle-timeout")) opt.settle_s = parse_time(v, a);
        else if (!strcmp(a, "--keys")) opt.keys = parse_long(v, a, 1, 100000000);
        else if (!strcmp(a, "--value-min")) opt.vmin = (int)parse_long(v, a, 32, 1000);
        else if (!strcmp(a, "--value-max")) opt.vmax = (int)parse_long(v, a, 32, 1000);
        else if (!strcmp(a, "--resp-threads")) opt.resp_threads = (int)parse_long(v, a, 0, 64);
        else if (!strcmp(a, "--client-threads")) opt.client_threads = (int)parse_long(v, a, 0, 64);
        else if (!strcmp(a, "--set-retire")) opt.set_retire_s = parse_time(v, a);
        else if (!strcmp(a, "--set-rate")) opt.set_rate = (double)parse_long(v, a, 0, 100000);
        else if (!strcmp(a, "--backups")) opt.backups = (int)parse_long(v, a, 1, 2);
        else if (!strcmp(a, "--failure-detection-ms")) opt.fd_ms = (int)parse_long(v, a, 200, 600000);
        else if (!strcmp(a, "--checkpoint-mb")) opt.checkpoint_mb = (int)parse_long(v, a, 1, 1 << 20);
        else if (!strcmp(a, "--region-mb")) opt.region_mb = (int)parse_long(v, a, 16, 1 << 20);
        else if (!strcmp(a, "--base-port")) opt.base_port = (int)parse_long(v, a, 1024, 32768 - 3 * N_SRV);
        else if (!strcmp(a, "--spare")) opt.spare = (int)parse_long(v, a, 0, 2);
        else if (!strcmp(a, "--seed")) opt.seed = (unsigned)parse_long(v, a, 0, 0x7fffffff);
        else if (!strcmp(a, "--latticed")) opt.latticed = v;
        else if (!strcmp(a, "--lattice")) opt.cli = v;
        else {
            usage(stderr);
            return 2;
        }
    }
    if (opt.vmin > opt.vmax) {
        fputs("soak: --value-min is above --value-max\n", stderr);
        return 2;
    }
    if (opt.report_s < SLICE_S) opt.report_s = SLICE_S;
    if (opt.join_hold_s < 0) opt.join_hold_s = opt.join_every_s / 2;
    if (opt.warmup_s < 0) opt.warmup_s = opt.duration_s / 3 < 600 ? opt.duration_s / 3 : 600;
    if (!opt.region_mb) {
        double mb = (double)opt.keys * (opt.vmax + 128) * 1.5 / (1 << 20);
        opt.region_mb = mb < 512 ? 512 : (int)mb;
    }
    srand(opt.seed);
    t0 = now_s();
    {
        struct timespec rt;
        clock_gettime(CLOCK_REALTIME, &rt);
        t0_wall = (double)rt.tv_sec + rt.tv_nsec / 1e9;
    }

    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    snprintf(tmpdir, sizeof tmpdir, "/tmp/lattice-soak.XXXXXX");
    if (!mkdtemp(tmpdir)) {
        tmpdir[0] = 0;
        die("mkdtemp: %s", strerror(errno));
    }
    char path[320];
    snprintf(path, sizeof path, "%s/events.log", tmpdir);
    errlog = fopen(path, "w");
    if (errlog) setvbuf(errlog, NULL, _IOLBF, 0);
    opt.latticed = pin_binary(opt.latticed, "latticed");
    opt.cli = pin_binary(opt.cli, "lattice");
    int base = opt.base_port ? opt.base_port : free_ports(3 * N_SRV);
    snprintf(finder, sizeof finder, "127.0.0.1:%d..%d", base, base + N_SRV - 1);
    snprintf(cluster, sizeof cluster, "soak-%d", (int)getpid());
    for (int i = 0; i < N_SRV; i++) {
        srv[i].peer = base + i;
        srv[i].resp = base + N_SRV + i;
        srv[i].http = base + 2 * N_SRV + i;
        snprintf(srv[i].dir, sizeof srv[i].dir, "%s/s%d-data", tmpdir, i);
        snprintf(srv[i].log, sizeof srv[i].log, "%s/s%d.log", tmpdir, i);
        if (mkdir(srv[i].dir, 0755) != 0) die("mkdir %s: %s", srv[i].dir, strerror(errno));
    }
    say("soak: %.0f s, kill every %.0f s, join every %.0f s (hold %.0f s), %ld keys of %d-%d B, %d RESP + %d "
        "client threads, %.0f unique writes/s, seed %u\n",
        opt.duration_s, opt.kill_every_s, opt.join_every_s, opt.join_hold_s, opt.keys, opt.vmin, opt.vmax,
        opt.resp_threads, opt.client_threads, opt.set_rate, opt.seed);
    say("soak: peer ports %d..%d, RESP %d..%d, HTTP %d..%d, logs and data in %s\n", base, base + 3, base + 4,
        base + 7, base + 8, base + 11, tmpdir);

    for (int i = 0; i < 3; i++) spawn_server(i);
    double end = now_s() + 60;
    for (int i = 0; i < 3; i++) {
        while (!serves(&srv[i])) {
            if (now_s() > end) die("s%d does not serve 60 s after its start (see %s)", i, srv[i].log);
            if (stop_signal) die("stopped by signal %d", (int)stop_signal);
            if (reap(&srv[i], NULL)) die("s%d exited at its start (see %s)", i, srv[i].log);
            usleep(100000);
        }
        atomic_store(&srv[i].accepting, 1);
        srv[i].started_at = el();
    }

    snprintf(path, sizeof path, "%s/client.log", tmpdir); /* the client node's log lines */
    int cfd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (cfd >= 0) lattice_log_set_fd(cfd);
    lattice_config c;
    lattice_config_init(&c);
    c.cluster = cluster;
    c.finders[c.n_finders++] = finder;
    c.client = true;
    c.port = 0;
    c.failure_detection_ms = opt.fd_ms;
    if (lattice_node_start(&c, &cn) != LATTICE_OK || lattice_node_wait_joined(cn, 30000) != LATTICE_OK)
        die("the client node did not join");
    end = now_s() + opt.settle_s;
    while (!settled(3)) {
        if (now_s() > end) die("the grid did not settle");
        if (stop_signal) die("stopped by signal %d", (int)stop_signal);
        usleep(100000);
    }
    say("soak: grid up in %.1f s; filling %ld keys\n", el(), opt.keys);
    fill();
    say("soak: filled in %.1f s; load for %.0f s\n", el(), opt.duration_s);

    /* ---- load */
    int nw = opt.resp_threads + opt.client_threads;
    worker *ws = calloc((size_t)(nw ? nw : 1), sizeof *ws);
    if (!ws) die("out of memory");
    load_t0 = now_s();
    next_kill = el() + opt.kill_every_s;
    next_join = el() + opt.join_every_s;
    leave_at = 1e18;
    for (int i = 0; i < nw; i++) {
        ws[i].id = i;
        ws[i].rng = 0x9E3779B97F4A7C15ull * (uint64_t)(i + 1) ^ opt.seed;
        for (size_t k = 0; k < sizeof ws[i].filler; k++) ws[i].filler[k] = (char)('a' + rnd(&ws[i]) % 26);
        for (int k = 0; k < N_COUNTERS; k++) ws[i].last[k] = ws[i].last_tx[k] = 0;
        if (pthread_create(&ws[i].th, NULL, i < opt.resp_threads ? resp_worker : client_worker, &ws[i]))
            die("pthread_create");
    }
    double next_slice = SLICE_S, next_report = opt.report_s, last_tick = el();
    double next_retire = opt.set_retire_s + RETIRE_EVERY_S;
    int stopped_by = 0;
    while (now_s() - load_t0 < opt.duration_s) {
        if (stop_signal) {
            stopped_by = stop_signal;
            break;
        }
        if (el() - last_tick > 1.5) { /* the 100 ms loop did not run: the host stalled soak too */
            add_window(last_tick, el() + grace_s(), W_STALL);
            note("soak's loop stalled %.1f s", el() - last_tick);
        }
        last_tick = el();
        events_step(false);
        double t = now_s() - load_t0;
        if (t >= next_slice) {
            take_slice();
            next_slice += SLICE_S;
        }
        if (t >= next_report) {
            report_line();
            next_report += opt.report_s;
        }
        if (opt.set_retire_s > 0 && t >= next_retire && ev_state == EV_NONE) {
            if (settled(want_servers())) {
                retire_set_keys();
                next_retire = t + RETIRE_EVERY_S;
            } else {
                next_retire = t + 5;
            }
        }
        usleep(100000);
    }
    atomic_store(&load_stop, 1);
    for (int i = 0; i < nw; i++) pthread_join(ws[i].th, NULL);
    double load_s = now_s() - load_t0;
    take_slice();
    if (stopped_by) die("stopped by signal %d", stopped_by);
    if (last_report < load_s - 1) report_line();

    /* ---- settle, then read back and verify */
    say("soak: load over at %.0f s; waiting for the grid to settle\n", load_s);
    end = now_s() + opt.settle_s;
    while (ev_state != EV_NONE || !settled(want_servers())) {
        if (now_s() > end) die("the grid did not settle after the load (see %s)", tmpdir);
        if (stop_signal) die("stopped by signal %d", (int)stop_signal);
        events_step(true);
        usleep(100000);
    }
    say("soak: reading back %zu acknowledged unique writes through every live node (%" PRIu64
        " more were read back and deleted during the run)\n", n_acks, retired_n);
    node_loss nl[N_SRV + 1];
    int n_nl = 0;
    uint64_t lost_keys = readback_all(acks, n_acks, nl, &n_nl) + retired_lost, read_errors = retired_errors;
    for (int i = 0; i < n_nl; i++) read_errors += nl[i].errors;
    uint64_t n_acked = n_acks + retired_n;
    char vtext[400];
    int conflicts = run_verify(vtext, sizeof vtext);
    char vfirst[400] = "";
    if (conflicts != 0) { /* once more: a conflict that stays is not a write in flight */
        snprintf(vfirst, sizeof vfirst, "%s", vtext);
        sleep(5);
        conflicts = run_verify(vtext, sizeof vtext);
    }

    /* ---- summary */
    double warm = opt.warmup_s;
    double win = opt.duration_s >= 1800 ? 600 : load_s / 3;
    uint64_t n_first, n_last;
    double p99_first = window_p99(0, win, false, &n_first), p99_last = window_p99(load_s - win, load_s, false, &n_last);
    uint64_t nb_first, nb_last;
    double pb_first = window_p99(0, win, true, &nb_first), pb_last = window_p99(load_s - win, load_s, true, &nb_last);
    double pb_drift = pb_first > 0 && nb_last ? (pb_last / pb_first - 1) * 100 : NAN;
    uint64_t all_h[NB] = {0}, total_ops = 0;
    for (size_t i = 0; i < n_slices; i++)
        for (int b = 0; b < NB; b++) all_h[b] += slices[i].h[b];
    double p99_all = p_of(all_h, 0.99, &total_ops), p50_all = p_of(all_h, 0.5, NULL);
    bool failed = lost_keys || conflicts != 0 || atomic_load(&bad_values) || atomic_load(&incr_regressions) ||
                  read_errors;
    close_window();
    for (int i = 0; i < N_SRV; i++) stalls_from_log(srv[i].log);
    snprintf(path, sizeof path, "%s/client.log", tmpdir);
    stalls_from_log(path);
    uint64_t ein, estall, eout;
    classify_errors(&ein, &estall, &eout);
    int n_stalls = 0;
    double longest_stall = 0;
    for (int i = 0; i < n_wins; i++)
        if (wins[i].type == W_STALL) {
            n_stalls++;
            if (wins[i].b - wins[i].a - grace_s() > longest_stall) longest_stall = wins[i].b - wins[i].a - grace_s();
        }

    bool keep = failed || n_crashes || n_stuck || eout || opt.keep;
    write_rss_csv();
    json_t *jn = json_array();
    if (!opt.json) say("\n==== soak summary (%.0f s of load) ====\n", load_s);
    if (!opt.json)
        say("ops: %" PRIu64 " (%.0f ops/s), p50 %.2f ms, p99 %.2f ms; p99 first %.0f s %.2f ms, last %.0f s %.2f ms "
            "(drift %+.0f%%)\n",
            total_ops, total_ops / load_s, p50_all, p99_all, win, p99_first, win, p99_last,
            p99_first > 0 ? (p99_last / p99_first - 1) * 100 : 0);
    if (!opt.json)
        say("  over base-state slices only (3 servers, calm %.0f s): p99 first %.2f ms (%" PRIu64 " ops), last %.2f ms "
            "(%" PRIu64 " ops), drift %+.0f%%\n",
            CALM_S, pb_first, nb_first, pb_last, nb_last, pb_drift);
    for (int i = 0; i < N_SRV; i++) {
        if (!srv[i].starts) continue;
#define JNUM(x) (isnan(x) ? json_null() : json_real(x))
        struct slope_fit lv = rss_slope(i, warm, false, M_RSS), wi = rss_slope(i, warm, true, M_RSS);
        double pct = pct_per_hour(lv.slope, lv.mean), se = pct_per_hour(lv.se, lv.mean);
        double wpct = pct_per_hour(wi.slope, wi.mean), wse = pct_per_hour(wi.se, wi.mean);
        /* The same two fits of RSS without the region, and of the heap in
         * use, in KiB an hour (a share of the RSS would hide which grew). */
        struct slope_fit rl = rss_slope(i, warm, false, M_REST), rw = rss_slope(i, warm, true, M_REST);
        struct slope_fit hl = rss_slope(i, warm, false, M_HEAP), hw = rss_slope(i, warm, true, M_HEAP);
        long kb;
        int fds;
        proc_figures(srv[i].pid, &kb, &fds);
        if (!opt.json) {
            char sl[48] = "n/a", ws[48] = "n/a";
            if (!isnan(pct)) snprintf(sl, sizeof sl, "%+.1f%%/h (se %.1f)", pct, se);
            if (!isnan(wpct)) snprintf(ws, sizeof ws, "%+.1f%%/h (se %.1f)", wpct, wse);
            say("s%d: %d starts (%d crashes), RSS slope %s, within incarnations %s (%d base-state samples after "
                "%.0f s, mean %.1f MiB), now %.1f MiB %d fds\n",
                i, srv[i].starts, srv[i].crashes, sl, ws, lv.n, warm, lv.mean / 1024, kb / 1024.0, fds);
            say("    without the region (mean %.1f MiB): %+.0f KiB/h (se %.0f), within %+.0f KiB/h (se %.0f); heap in use "
                "(mean %.1f MiB): %+.0f KiB/h (se %.0f), within %+.0f KiB/h (se %.0f)\n",
                rl.mean / 1024, rl.slope * 3600, rl.se * 3600, rw.slope * 3600, rw.se * 3600, hl.mean / 1024,
                hl.slope * 3600, hl.se * 3600, hw.slope * 3600, hw.se * 3600);
        }
        json_t *jsplit = json_pack("{s:f, s:o, s:o, s:o, s:o, s:f, s:o, s:o, s:o, s:o}", "rest_mean_mib", rl.mean / 1024,
                                   "rest_kib_per_hour", JNUM(rl.slope * 3600), "rest_se_kib", JNUM(rl.se * 3600),
                                   "rest_within_kib_per_hour", JNUM(rw.slope * 3600), "rest_within_se_kib",
                                   JNUM(rw.se * 3600), "heap_mean_mib", hl.mean / 1024, "heap_kib_per_hour",
                                   JNUM(hl.slope * 3600), "heap_se_kib", JNUM(hl.se * 3600),
                                   "heap_within_kib_per_hour", JNUM(hw.slope * 3600), "heap_within_se_kib",
                                   JNUM(hw.se * 3600));
        json_array_append_new(jn, json_pack("{s:s, s:i, s:i, s:o, s:o, s:o, s:o, s:i, s:f, s:I, s:i, s:o}", "node",
                                            i == 0 ? "s0" : i == 1 ? "s1" : i == 2 ? "s2" : "s3", "starts",
                                            srv[i].starts, "crashes", srv[i].crashes, "rss_slope_pct_per_hour",
                                            JNUM(pct), "rss_slope_se_pct", JNUM(se), "rss_slope_within_pct_per_hour",
                                            JNUM(wpct), "rss_slope_within_se_pct", JNUM(wse), "rss_samples", lv.n,
                                            "rss_mean_mib", lv.mean / 1024, "rss_now_kib", (json_int_t)kb, "fds_now", fds,
                                            "memory_split", jsplit));
#undef JNUM
    }
    if (!opt.json) {
        say("events: %d kills, %d joins, %d leaves, %d unexpected exits, %d stuck; slowest restart to serving %.1f "
            "s, slowest settle %.1f s\n",
            n_kills, n_joins, n_leaves, n_crashes, n_stuck, worst_serve_s, worst_settle_s);
        say("errors: %" PRIu64 " in kill windows, %" PRIu64 " in host-stall windows, %" PRIu64
            " outside (stalls: %d logged by the nodes or seen by soak, longest %.1f s)\n",
            ein, estall, eout, n_stalls, longest_stall);
        for (int i = 0; i < n_kinds; i++)
            say("  %6" PRIu64 " kill, %4" PRIu64 " stall, %4" PRIu64 " outside: %s\n", kinds[i].in_kill,
                kinds[i].in_stall, kinds[i].outside, kinds[i].what);
        say("set workload: %" PRIu64 " unique writes issued, %zu acknowledged, %" PRIu64
            " not acknowledged; lost %" PRIu64 "\n",
            atomic_load(&uniq_issued), (size_t)n_acked, atomic_load(&uniq_failed), lost_keys);
        if (retired_n)
            say("  of them %" PRIu64 " read back through every live node and deleted during the run, once older "
                "than %.0f s (a constant key count): %" PRIu64 " lost, %" PRIu64 " read errors\n",
                retired_n, opt.set_retire_s, retired_lost, retired_errors);
        for (int i = 0; i < n_nl; i++)
            say("  through %s: %" PRIu64 " missing, %" PRIu64 " wrong, %" PRIu64 " read errors%s\n", nl[i].name,
                nl[i].missing, nl[i].wrong, nl[i].errors, nl[i].checked ? "" : " (not fully read)");
        say("checks: %" PRIu64 " wrong values read, %" PRIu64 " INCR regressions (acknowledged INCR lost)\n",
            atomic_load(&bad_values), atomic_load(&incr_regressions));
        say("verify: %s%s%s%s\n", vtext, vfirst[0] ? " (first run: " : "", vfirst, vfirst[0] ? ")" : "");
        say("result: %s\n", failed ? "FAILED" : "clean");
    }
    if (opt.json) {
        json_t *je = json_array();
        for (int i = 0; i < n_kinds; i++)
            json_array_append_new(je, json_pack("{s:s, s:I, s:I, s:I}", "what", kinds[i].what, "in_kill_windows",
                                                (json_int_t)kinds[i].in_kill, "in_stall_windows",
                                                (json_int_t)kinds[i].in_stall, "outside", (json_int_t)kinds[i].outside));
        json_t *jr = json_array();
        for (int i = 0; i < n_nl; i++)
            json_array_append_new(jr, json_pack("{s:s, s:I, s:I, s:I}", "via", nl[i].name, "missing",
                                                (json_int_t)nl[i].missing, "wrong", (json_int_t)nl[i].wrong, "errors",
                                                (json_int_t)nl[i].errors));
        json_t *o = json_pack(
            "{s:f, s:I, s:f, s:f, s:f, s:{s:f, s:f, s:f, s:f, s:f, s:f, s:o}, s:o, s:{s:i, s:i, s:i, s:i, s:i, s:f, s:f}, "
            "s:{s:i, s:f, s:I, s:I, s:I, s:o}, s:{s:I, s:I, s:I, s:I, s:o}, s:I, s:I, s:{s:i, s:s}, s:b, s:s}",
            "load_s", load_s, "ops", (json_int_t)total_ops, "ops_per_s", total_ops / load_s, "p50_ms", p50_all,
            "p99_ms", p99_all, "p99_drift", "window_s", win, "first_ms", p99_first, "last_ms", p99_last, "pct",
            p99_first > 0 ? (p99_last / p99_first - 1) * 100 : 0.0, "base_first_ms", pb_first, "base_last_ms", pb_last,
            "base_pct", isnan(pb_drift) ? json_null() : json_real(pb_drift), "nodes", jn, "events", "kills", n_kills,
            "joins", n_joins, "leaves", n_leaves, "unexpected_exits", n_crashes, "stuck", n_stuck, "slowest_serve_s",
            worst_serve_s, "slowest_settle_s", worst_settle_s, "errors", "stalls", n_stalls, "longest_stall_s", longest_stall, "in_kill_windows", (json_int_t)ein,
            "in_stall_windows", (json_int_t)estall, "outside", (json_int_t)eout, "kinds", je, "set", "issued",
            (json_int_t)atomic_load(&uniq_issued), "acknowledged", (json_int_t)n_acked, "not_acknowledged",
            (json_int_t)atomic_load(&uniq_failed), "lost", (json_int_t)lost_keys, "read_back", jr, "wrong_values",
            (json_int_t)atomic_load(&bad_values), "incr_regressions", (json_int_t)atomic_load(&incr_regressions),
            "verify", "conflicts", conflicts, "text", vtext, "failed", failed, "dir", keep ? tmpdir : "(removed)");
        if (!o) die("summary JSON");
        char *s = json_dumps(o, JSON_COMPACT);
        puts(s);
        free(s);
        json_decref(o);
    }
    fflush(stdout);

    lattice_node_stop(cn);
    stop_all();
    if (errlog) fclose(errlog);
    if (keep) {
        fprintf(stderr, "soak: logs and data dirs kept in %s (events.log: errors, events, lost keys)\n", tmpdir);
    } else {
        char cmd[300];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
        if (system(cmd) != 0) fprintf(stderr, "soak: could not remove %s\n", tmpdir);
    }
    free(ws);
    return failed ? 1 : 0;
}
