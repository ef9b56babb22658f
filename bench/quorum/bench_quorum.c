/*
 * bench_quorum [RUNS]: how fast a cut-off minority stops acknowledging, and
 * how fast a healed grid is whole again.  Three latticed in network
 * namespaces (tests/fault/netns.h; needs root), --failure-detection-ms
 * 1000, the default cache (backups=1, full_sync), 10,000 keys preloaded.
 * Per run (default 5):
 *
 *   cut -> refusal  one client writes to the cut-off node in a loop; the
 *                   time from the cut (its bridge port moved away) to the
 *                   first "-CLUSTERDOWN no quorum" reply.  Target: below
 *                   failure_detection_ms + 1 s; the ratio is to that target.
 *   heal -> whole   the time from the heal to one topology of three servers
 *                   with every partition one primary and one backup, all
 *                   OWNING, quorum 3 of 3, and `lattice verify default`
 *                   clean (polled; each poll takes ~0.2-0.5 s, so this is an
 *                   upper bound to within one poll).
 *   reference       in the same run, the same node killed (-9) and
 *                   restarted instead: kill -> whole, the cost of the
 *                   rejoin and rebalance a heal also pays.
 *
 * Writes go on on the majority side throughout (one client), so the heal
 * has changed data to move.  Every process it starts is stopped by the
 * harness guardian, which also deletes the namespaces.
 */
#include <hiredis.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "netns.h"

#define NODES 3
#define FD_MS 1000
#define CUT_MS 5000
#define PRELOAD 10000

static fnet f;
static it_proc *proc[NODES];
static int incarnation[NODES];
static atomic_bool stop_writers;
static _Atomic int64_t cut_at, first_refusal;

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void start(int i)
{
    char name[32];
    snprintf(name, sizeof name, "n%d-%d", i, incarnation[i]++);
    const char *argv[] = {LATTICED_PATH, "--host", f.host[i], "--port", "47500", "--port-range", "1", "--ip-finder",
                          f.finder, "--failure-detection-ms", "1000", "--resp-port", "6379", NULL};
    proc[i] = it_spawn(name, f.ns[i], argv);
}

static redisContext *conn(int i)
{
    struct timeval tv = {2, 0};
    redisContext *c = redisConnectWithTimeout(f.host[i], 6379, tv);
    if (c && !c->err) {
        redisSetTimeout(c, tv);
        return c;
    }
    if (c) redisFree(c);
    return NULL;
}

static bool serves(void *ctx)
{
    redisContext *c = conn(*(int *)ctx);
    redisReply *r = c ? redisCommand(c, "SET __ready 1") : NULL;
    bool ok = r && r->type == REDIS_REPLY_STATUS;
    if (r) freeReplyObject(r);
    if (c) redisFree(c);
    return ok;
}

static json_t *cli(const char *what)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "ip netns exec %s %s --host %s --timeout-ms 5000 --ip-finder '%s' --json %s 2>/dev/null",
             f.ctl, LATTICE_CLI_PATH, f.ctl_host, f.finder, what);
    FILE *p = popen(cmd, "r");
    if (!p) return NULL;
    static char buf[1 << 21];
    size_t n = fread(buf, 1, sizeof buf - 1, p);
    buf[n] = 0;
    int st = pclose(p);
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? json_loads(buf, 0, NULL) : NULL;
}

/* One topology of NODES servers, quorum held, every partition one primary
 * and one backup OWNING, and every copy the same. */
static bool whole(void *ctx)
{
    (void)ctx;
    json_t *top = cli("top");
    bool ok = top && it_servers(top) == NODES &&
              json_is_true(json_object_get(json_object_get(top, "quorum"), "has_quorum")) &&
              json_integer_value(json_object_get(json_object_get(top, "quorum"), "baseline_in_topology")) == NODES;
    json_decref(top);
    json_t *pj = ok ? cli("partitions default") : NULL;
    ok = pj && json_integer_value(json_object_get(pj, "lost")) == 0 &&
         json_integer_value(json_object_get(pj, "under_replicated")) == 0;
    json_t *p, *o;
    size_t i, k;
    json_array_foreach(json_object_get(pj, "partitions"), i, p) {
        long n = 0;
        json_array_foreach(json_object_get(p, "owners"), k, o) {
            n++;
            ok &= !strcmp(json_string_value(json_object_get(o, "state")), "OWNING");
        }
        ok &= n == 2;
    }
    json_decref(pj);
    json_t *v = ok ? cli("verify default") : NULL;
    ok = v && json_array_size(json_object_get(v, "conflicts")) == 0;
    json_decref(v);
    return ok;
}

static void *minority_writer(void *arg)
{
    int node = *(int *)arg;
    redisContext *c = NULL;
    for (long k = 0; !atomic_load(&stop_writers); k++) {
        if (!c && !(c = conn(node))) {
            usleep(10000);
            continue;
        }
        int64_t t = now_ns();
        redisReply *r = redisCommand(c, "SET m%ld %ld", k % 1000, k);
        if (!r) {
            redisFree(c);
            c = NULL;
            continue;
        }
        int64_t cut = atomic_load(&cut_at), zero = 0;
        if (cut && t >= cut && r->type == REDIS_REPLY_ERROR && strstr(r->str, "no quorum"))
            atomic_compare_exchange_strong(&first_refusal, &zero, now_ns());
        freeReplyObject(r);
    }
    if (c) redisFree(c);
    return NULL;
}

static void *majority_writer(void *arg)
{
    int node = *(int *)arg;
    redisContext *c = NULL;
    for (long k = 0; !atomic_load(&stop_writers); k++) {
        if (!c && !(c = conn(node))) {
            usleep(10000);
            continue;
        }
        redisReply *r = redisCommand(c, "SET key:%ld v%ld", k % PRELOAD, k);
        if (!r) {
            redisFree(c);
            c = NULL;
        } else {
            freeReplyObject(r);
        }
    }
    if (c) redisFree(c);
    return NULL;
}

static void preload(void)
{
    redisContext *c = conn(0);
    if (!c) exit(1);
    for (int i = 0; i < PRELOAD; i++) redisAppendCommand(c, "SET key:%d %0100d", i, i);
    for (int i = 0; i < PRELOAD; i++) {
        redisReply *r;
        if (redisGetReply(c, (void **)&r) != REDIS_OK) exit(1);
        freeReplyObject(r);
    }
    redisFree(c);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void summary(const char *what, double *v, int n, double ref)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    double sum = 0;
    for (int i = 0; i < n; i++) sum += v[i];
    printf("%-22s median %.2f s  mean %.2f s  min %.2f s  max %.2f s", what, v[n / 2], sum / n, v[0], v[n - 1]);
    if (ref > 0) printf("  (median / reference %.2f)", v[n / 2] / ref);
    printf("\n");
}

int main(int argc, char **argv)
{
    int runs = argc > 1 ? atoi(argv[1]) : 5;
    if (runs < 1 || runs > 50) {
        fprintf(stderr, "usage: bench_quorum [RUNS 1..50]\n");
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    it_begin("bench_quorum");
    if (!fnet_setup(&f, NODES)) return 77;
    for (int i = 0; i < NODES; i++) {
        start(i);
        if (i == 0 && !it_wait_for(serves, &i, 30000)) return 1;
    }
    for (int i = 0; i < NODES; i++)
        if (!it_wait_for(serves, &i, 30000)) return 1;
    preload();
    if (!it_wait_for(whole, NULL, 60000)) return 1;
    double refusal[50], heal[50], restart[50];
    int victim = 2, other = 0;
    for (int r = 0; r < runs; r++) {
        atomic_store(&stop_writers, false);
        atomic_store(&cut_at, 0);
        atomic_store(&first_refusal, 0);
        pthread_t wm, wj;
        pthread_create(&wm, NULL, minority_writer, &victim);
        pthread_create(&wj, NULL, majority_writer, &other);
        usleep(1000000);
        fnet_isolate(&f, &victim, 1);
        atomic_store(&cut_at, now_ns());
        usleep(CUT_MS * 1000);
        fnet_heal(&f);
        int64_t healed = now_ns();
        atomic_store(&stop_writers, true);
        pthread_join(wm, NULL);
        pthread_join(wj, NULL);
        int64_t fr = atomic_load(&first_refusal);
        refusal[r] = fr ? (double)(fr - atomic_load(&cut_at)) / 1e9 : -1;
        if (!it_wait_for(whole, NULL, 120000)) {
            fprintf(stderr, "run %d: the grid was not whole within 120 s of the heal\n", r + 1);
            return 1;
        }
        heal[r] = (double)(now_ns() - healed) / 1e9;
        /* Reference: the same node killed and restarted. */
        int64_t killed = now_ns();
        it_signal(proc[victim], SIGKILL);
        it_wait_exit(proc[victim], 10000);
        start(victim);
        if (!it_wait_for(whole, NULL, 120000)) {
            fprintf(stderr, "run %d: the grid was not whole within 120 s of the restart\n", r + 1);
            return 1;
        }
        restart[r] = (double)(now_ns() - killed) / 1e9;
        printf("run %d: cut -> first refusal %.3f s, heal -> whole %.2f s, kill+restart -> whole %.2f s\n", r + 1,
               refusal[r], heal[r], restart[r]);
    }
    double ref_restart[50];
    memcpy(ref_restart, restart, sizeof restart);
    qsort(ref_restart, (size_t)runs, sizeof *ref_restart, cmp_double);
    summary("cut -> first refusal", refusal, runs, (FD_MS + 1000) / 1000.0);
    summary("heal -> whole", heal, runs, ref_restart[runs / 2]);
    summary("kill+restart -> whole", restart, runs, 0);
    printf("(cut -> refusal: reference = the target, failure detection + 1 s = %.1f s; heal -> whole: reference =\n"
           " kill+restart -> whole of the same node, median, same run)\n",
           (FD_MS + 1000) / 1000.0);
    for (int i = 0; i < NODES; i++) it_signal(proc[i], SIGTERM);
    for (int i = 0; i < NODES; i++) it_wait_exit(proc[i], 10000);
    it_end();
    return 0;
}
