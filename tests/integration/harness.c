#include "harness.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static it_proc procs[IT_MAX_PROCS];
static int nprocs;
static char dir[256];
static char test_name[128];

/* The guardian: a process forked by it_begin() that outlives the test
 * process however it ends (Check ends a failed test with _exit and a timed
 * out one with SIGKILL, so no exit hook of ours would run).  The test
 * reports to it over a pipe - "P pid log name" per process, "N netns" per
 * namespace, "OK" when the test passed - and when the pipe closes it kills
 * every process, removes every namespace, and either deletes the temp dir
 * (passed) or prints the logs (failed). */
static int guard_fd = -1;

static void guard_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void guard_say(const char *fmt, ...)
{
    char line[600];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line - 1, fmt, ap);
    va_end(ap);
    if (n < 0 || guard_fd < 0) return;
    if (n > (int)sizeof line - 2) n = (int)sizeof line - 2;
    line[n++] = '\n';
    if (write(guard_fd, line, (size_t)n) != n) perror("guardian pipe");
}

static void guardian(int rfd)
{
    static char buf[1 << 16];
    size_t len = 0;
    for (;;) {
        ssize_t n = read(rfd, buf + len, sizeof buf - 1 - len);
        if (n <= 0) break;
        len += (size_t)n;
    }
    buf[len] = 0;
    bool ok = false;
    char *save = NULL;
    char *copy = strdup(buf);
    for (char *l = strtok_r(copy, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        int pid;
        if (sscanf(l, "P %d", &pid) == 1 && pid > 0) {
            kill(pid, SIGCONT);
            kill(pid, SIGKILL);
        }
        ok |= strcmp(l, "OK") == 0;
    }
    free(copy);
    if (!ok) {
        fprintf(stderr, "==== %s failed (logs kept in %s) ====\n", test_name, dir);
        save = NULL;
        char *copy3 = strdup(buf); /* strtok_r cuts what it reads: keep buf whole */
        for (char *l = strtok_r(copy3, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
            char log[400];
            if (sscanf(l, "P %*d %399s", log) != 1) continue;
            char cmd[600];
            fprintf(stderr, "---- %s (last 40 lines)\n", log);
            snprintf(cmd, sizeof cmd, "tail -40 '%s' >&2", log);
            if (system(cmd) != 0) fprintf(stderr, "(no log)\n");
        }
        free(copy3);
        char cmd[600];
        snprintf(cmd, sizeof cmd, "echo '---- last top:' >&2; cat '%s/last-top.json' >&2 2>/dev/null", dir);
        if (system(cmd) != 0) fprintf(stderr, "(no top output)\n");
    }
    /* Namespaces last: their processes are gone by now. */
    char *copy2 = strdup(buf);
    save = NULL;
    for (char *l = strtok_r(copy2, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        char ns[64];
        if (sscanf(l, "N %63s", ns) == 1) it_sh("ip netns del %s 2>/dev/null", ns);
    }
    free(copy2);
    if (ok && !getenv("IT_KEEP")) it_sh("rm -rf '%s'", dir); /* IT_KEEP=1 keeps a passing test's logs */
    _exit(0);
}

void it_end(void) { guard_say("OK"); }
void it_guard_netns(const char *ns) { guard_say("N %s", ns); }

void it_begin(const char *name)
{
    snprintf(test_name, sizeof test_name, "%s", name);
    snprintf(dir, sizeof dir, "/tmp/lattice-it-%s-", name);
    size_t l = strlen(dir); /* mkdtemp's template: six trailing X */
    memset(dir + l, 'X', 6);
    dir[l + 6] = 0;
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        exit(1);
    }
    nprocs = 0;
    srand((unsigned)(getpid() ^ time(NULL)));
    int fds[2];
    /* O_CLOEXEC: no spawned node may hold the write end open. */
    if (pipe2(fds, O_CLOEXEC) != 0) {
        perror("pipe2");
        exit(1);
    }
    fflush(NULL);
    pid_t g = fork();
    if (g == 0) {
        close(fds[1]);
        setpgid(0, 0); /* not in the test's process group */
        guardian(fds[0]);
    }
    close(fds[0]);
    guard_fd = fds[1];
}

const char *it_dir(void) { return dir; }

static bool port_free(int p)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)p)};
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    bool ok = bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0;
    close(fd);
    return ok;
}

/* The ranges it_free_ports handed out in this process: a port is free
 * until the node it was picked for binds it, so a second pick before that
 * could name it again (fault_cut_data_links: its RESP range 28213..28215
 * and its peer range from 28215 were picked one after the other, and node
 * 2 found its RESP port taken by node 0's peer port). */
#define IT_MAX_PICKS 256 /* the last ones; older picks are long bound */
struct pick {
    int base, n;
};
static struct pick picks[IT_MAX_PICKS];
static unsigned n_picks;

static bool picked(int base, int n)
{
    for (unsigned i = 0; i < n_picks && i < IT_MAX_PICKS; i++)
        if (base < picks[i].base + picks[i].n && picks[i].base < base + n) return true;
    return false;
}

int it_free_ports(int n)
{
    for (int tries = 0; tries < 1000; tries++) {
        /* Below the kernel's ephemeral range (32768..60999 here): ephemeral
         * binds - every server's data port, client nodes' peer ports, TCP
         * source ports - can then never take a port chosen here before the
         * node that wants it binds it (a test once lost its port that way). */
        int base = 20000 + rand() % (32768 - 20000 - n);
        bool ok = !picked(base, n);
        for (int i = 0; i < n && ok; i++) ok = port_free(base + i);
        if (!ok) continue;
        picks[n_picks++ % IT_MAX_PICKS] = (struct pick){base, n};
        return base;
    }
    fprintf(stderr, "no %d free consecutive ports\n", n);
    exit(1);
}

it_proc *it_spawn(const char *name, const char *ns, const char *const *argv)
{
    if (nprocs == IT_MAX_PROCS) return NULL;
    it_proc *p = &procs[nprocs++];
    snprintf(p->name, sizeof p->name, "%s", name);
    snprintf(p->log, sizeof p->log, "%s/%s.log", dir, name);
    const char *full[64];
    int k = 0;
    if (ns) {
        full[k++] = "/usr/sbin/ip";
        full[k++] = "netns";
        full[k++] = "exec";
        full[k++] = ns;
    }
    for (int i = 0; argv[i] && k < 63; i++) full[k++] = argv[i];
    full[k] = NULL;
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlive the test */
        int fd = open(p->log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
            close(fd);
        }
        execv(full[0], (char *const *)full);
        _exit(127);
    }
    p->pid = pid;
    p->running = pid > 0;
    if (pid > 0) guard_say("P %d %s %s", (int)pid, p->log, p->name);
    return p;
}

it_proc *it_latticed(const char *name, const char *const *args)
{
    const char *argv[64];
    int k = 0;
    argv[k++] = LATTICED_PATH;
    for (int i = 0; args[i] && k < 63; i++) argv[k++] = args[i];
    argv[k] = NULL;
    return it_spawn(name, NULL, argv);
}

void it_signal(it_proc *p, int sig)
{
    if (p->running) kill(p->pid, sig);
}

bool it_wait_exit(it_proc *p, int timeout_ms)
{
    for (int waited = 0; p->running && waited <= timeout_ms; waited += 20) {
        if (waitpid(p->pid, NULL, WNOHANG) == p->pid) {
            p->running = false;
            break;
        }
        usleep(20000);
    }
    return !p->running;
}

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

bool it_wait_for(bool (*cond)(void *ctx), void *ctx, int timeout_ms)
{
    int64_t until = mono_ms() + timeout_ms;
    for (;;) {
        if (cond(ctx)) return true;
        if (mono_ms() > until) return false;
        usleep(100000);
    }
}

bool it_log_has(const it_proc *p, const char *needle)
{
    FILE *f = fopen(p->log, "r");
    if (!f) return false;
    char line[4096];
    bool found = false;
    while (!found && fgets(line, sizeof line, f)) found = strstr(line, needle) != NULL;
    fclose(f);
    return found;
}

bool it_log_versions_monotonic(const it_proc *p, unsigned long long *last_major)
{
    FILE *f = fopen(p->log, "r");
    if (!f) return false;
    char line[4096];
    unsigned long long pm = 0, pn = 0;
    bool ok = true;
    while (fgets(line, sizeof line, f)) {
        const char *t = strstr(line, "topology ");
        unsigned long long M, m;
        if (!t || sscanf(t, "topology %llu.%llu", &M, &m) != 2) continue;
        if (M < pm || (M == pm && m < pn)) ok = false;
        pm = M;
        pn = m;
    }
    fclose(f);
    if (last_major) *last_major = pm;
    return ok;
}

typedef struct log_wait {
    const it_proc *p;
    const char *needle;
} log_wait;

static bool log_cond(void *ctx)
{
    log_wait *w = ctx;
    return it_log_has(w->p, w->needle);
}

bool it_wait_log(const it_proc *p, const char *needle, int timeout_ms)
{
    log_wait w = {p, needle};
    return it_wait_for(log_cond, &w, timeout_ms);
}

typedef struct baseline_want {
    const char *finder;
    int servers;
} baseline_want;

static bool baseline_counts(void *p)
{
    const baseline_want *w = p;
    char out[1 << 14];
    int rc = it_capture_stdout(out, sizeof out, "%s --timeout-ms 5000 --ip-finder '%s' --json baseline", LATTICE_CLI_PATH,
                               w->finder);
    json_t *j = rc == 0 ? json_loads(out, 0, NULL) : NULL;
    bool ok = j && json_integer_value(json_object_get(j, "baseline_nodes")) == w->servers;
    json_decref(j);
    return ok;
}

bool it_wait_baseline(const char *finder, int servers, int timeout_ms)
{
    baseline_want w = {finder, servers};
    return it_wait_for(baseline_counts, &w, timeout_ms);
}

typedef struct settled_want {
    const char *finder, *cache;
    int servers;
} settled_want;

static bool cache_settled(void *ctx)
{
    const settled_want *w = ctx;
    size_t cap = 4 << 20; /* a partition table of every owner */
    char *out = malloc(cap);
    if (!out) return false;
    int rc = it_capture_stdout(out, cap, "%s --timeout-ms 5000 --ip-finder '%s' --json partitions '%s' 2>>%s/top-errors.log",
                               LATTICE_CLI_PATH, w->finder, w->cache, dir);
    json_t *j = rc == 0 ? json_loads(out, 0, NULL) : NULL;
    free(out);
    bool ok = j && json_integer_value(json_object_get(j, "lost")) == 0 &&
              json_integer_value(json_object_get(j, "under_replicated")) == 0 &&
              json_integer_value(json_object_get(json_object_get(j, "balance"), "nodes")) == w->servers;
    json_decref(j);
    return ok;
}

bool it_wait_settled(const char *finder, const char *cache, int servers, int timeout_ms)
{
    settled_want w = {finder, cache, servers};
    return it_wait_for(cache_settled, &w, timeout_ms);
}

json_t *it_top(const char *finder, const char *const *extra, const char *ns)
{
    char cmd[2048];
    int n = 0;
    if (ns) n += snprintf(cmd + n, sizeof cmd - n, "/usr/sbin/ip netns exec %s ", ns);
    n += snprintf(cmd + n, sizeof cmd - n, "%s --timeout-ms 5000 --ip-finder '%s'", LATTICE_CLI_PATH, finder);
    for (int i = 0; extra && extra[i]; i++) n += snprintf(cmd + n, sizeof cmd - n, " '%s'", extra[i]);
    snprintf(cmd + n, sizeof cmd - n, " --json top 2>>%s/top-errors.log", dir);
    FILE *f = popen(cmd, "r");
    if (!f) return NULL;
    char buf[65536];
    size_t len = fread(buf, 1, sizeof buf - 1, f);
    buf[len] = 0;
    char path[600];
    snprintf(path, sizeof path, "%s/last-top.json", dir); /* shown if the test fails */
    FILE *lt = fopen(path, "w");
    if (lt) {
        fwrite(buf, 1, len, lt);
        fclose(lt);
    }
    int st = pclose(f);
    if (st != 0) return NULL;
    json_error_t err;
    return json_loads(buf, 0, &err);
}

static size_t count_role(json_t *top, const char *role)
{
    size_t n = 0, i;
    json_t *node;
    json_array_foreach(json_object_get(top, "nodes"), i, node) {
        const char *r = json_string_value(json_object_get(node, "role"));
        n += r && strcmp(r, role) == 0 && !json_is_true(json_object_get(node, "self"));
    }
    return n;
}

size_t it_servers(json_t *top) { return count_role(top, "server"); }
size_t it_clients(json_t *top) { return count_role(top, "client"); }

json_t *it_node_by_cid(json_t *top, const char *cid)
{
    size_t i;
    json_t *node;
    json_array_foreach(json_object_get(top, "nodes"), i, node) {
        const char *c = json_string_value(json_object_get(node, "consistent_id"));
        if (c && strcmp(c, cid) == 0) return node;
    }
    return NULL;
}

bool it_orders_unique(json_t *top)
{
    json_t *nodes = json_object_get(top, "nodes");
    for (size_t i = 0; i < json_array_size(nodes); i++)
        for (size_t k = 0; k < i; k++)
            if (json_integer_value(json_object_get(json_array_get(nodes, i), "order")) ==
                json_integer_value(json_object_get(json_array_get(nodes, k), "order")))
                return false;
    return true;
}

const char *it_write_file(const char *name, const char *content)
{
    static char paths[8][300];
    static int slot;
    char *p = paths[slot++ % 8];
    snprintf(p, 300, "%s/%s", dir, name);
    FILE *f = fopen(p, "w");
    if (f) {
        fputs(content, f);
        fclose(f);
    }
    return p;
}

static int capture(char *out, size_t cap, bool with_stderr, const char *fmt, va_list ap)
{
    char cmd[4096];
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    if (with_stderr) strncat(cmd, " 2>&1", sizeof cmd - strlen(cmd) - 1);
    out[0] = 0;
    FILE *f = popen(cmd, "r");
    if (!f) return -1;
    size_t n = fread(out, 1, cap - 1, f);
    out[n] = 0;
    int st = pclose(f);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

int it_capture(char *out, size_t cap, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int st = capture(out, cap, true, fmt, ap);
    va_end(ap);
    return st;
}

int it_capture_stdout(char *out, size_t cap, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int st = capture(out, cap, false, fmt, ap);
    va_end(ap);
    return st;
}

int it_sh(const char *fmt, ...)
{
    char cmd[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

void it_add_named(TCase *tc, const it_named *list, size_t n, int argc, char **argv)
{
    for (size_t i = 0; i < n; i++) {
        bool want = argc < 2;
        for (int a = 1; a < argc; a++) want |= !strcmp(argv[a], list[i].name);
        if (want) tcase_add_test(tc, *list[i].test);
    }
}

int it_run_suite(Suite *s)
{
    SRunner *r = srunner_create(s);
    srunner_run_all(r, CK_NORMAL);
    int failed = srunner_ntests_failed(r);
    srunner_free(r);
    return failed ? 1 : 0;
}

/* ------------------------------------------------------------ data channel */

int it_data_connect(const char *addr)
{
    char host[64];
    int port;
    if (sscanf(addr, "tcp://%63[^:]:%d", host, &port) != 2) return -1;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    if (fd < 0 || inet_pton(AF_INET, host, &sa.sin_addr) != 1 || connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        if (fd >= 0) close(fd);
        return -1;
    }
    return fd;
}

static bool write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len) {
        ssize_t w = send(fd, p, len, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return false;
        p += w;
        len -= (size_t)w;
    }
    return true;
}

bool it_data_send(int fd, const void *msg, size_t len, const void *mac, size_t mac_len)
{
    uint8_t h[8] = {'L', 'T', 1, (uint8_t)mac_len, (uint8_t)(len >> 24), (uint8_t)(len >> 16), (uint8_t)(len >> 8),
                    (uint8_t)len};
    return write_all(fd, h, sizeof h) && write_all(fd, msg, len) && (!mac_len || write_all(fd, mac, mac_len));
}

/* n bytes (buf NULL: skipped) by the deadline: 1, 0 at end of stream, -1 at the deadline. */
static int read_n(int fd, uint8_t *buf, size_t n, uint64_t until_ms)
{
    while (n) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        uint64_t now = (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
        if (now >= until_ms) return -1;
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, (int)(until_ms - now)) <= 0) continue;
        uint8_t scratch[4096];
        size_t want = buf ? n : (n < sizeof scratch ? n : sizeof scratch);
        ssize_t r = read(fd, buf ? buf : scratch, want);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return 0; /* closed (or reset) */
        if (buf) buf += r;
        n -= (size_t)r;
    }
    return 1;
}

long it_data_recv(int fd, void *buf, size_t cap, int ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t until = (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000 + (uint64_t)ms;
    uint8_t h[8];
    int r = read_n(fd, h, sizeof h, until);
    if (r <= 0) return r;
    if (h[0] != 'L' || h[1] != 'T' || h[2] != 1) return -1;
    size_t len = (size_t)h[4] << 24 | (size_t)h[5] << 16 | (size_t)h[6] << 8 | h[7];
    if (len > cap) return -1;
    r = read_n(fd, buf, len, until);
    if (r <= 0) return r;
    r = read_n(fd, NULL, h[3], until);
    return r <= 0 ? r : (long)len;
}

void it_verify_clean(const char *finder, const char *cache)
{
    static char out[1 << 16];
    int rc = it_capture_stdout(out, sizeof out, "%s --ip-finder '%s' --json verify %s", LATTICE_CLI_PATH, finder, cache);
    json_t *j = json_loads(out, 0, NULL);
    ck_assert_msg(rc == 0 && j, "verify: rc %d: %.300s", rc, out);
    ck_assert_msg(json_array_size(json_object_get(j, "conflicts")) == 0, "verify: %.500s", out);
    json_decref(j);
}
