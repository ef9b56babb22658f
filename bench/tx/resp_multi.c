/*
 * resp_multi: the same-slot MULTI/EXEC row of bench/tx (docs/BENCHMARKS.md,
 * "Transactions"), against its reference measured by the same program on
 * the same grid: a plain SET through the same RESP port.
 *
 *   --mode set    each connection: SET <key> <value>, one at a time
 *   --mode multi  each connection: MULTI, SET {t}a <value>, SET {t}b
 *                 <value>, EXEC - two keys of one hash tag (one slot), sent
 *                 as one write, the next transaction after EXEC answered
 *   --mode xmulti the same with two random keys of their own slots (almost
 *                 always two partitions, often two primaries): a
 *                 transaction across partitions
 *
 * Keys are random over --keys.  Every connection is one thread; the run is
 * bounded by --duration (after --warmup) and by --max-ops per connection,
 * so it stops by itself.  Prints operations (or committed transactions) a
 * second, p50/p99/p99.9 in microseconds and the errors, or one JSON object.
 */
#include <getopt.h>
#include <hiredis/hiredis.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_CONNS 64
#define MAX_SAMPLES (1u << 21) /* per connection */

static struct {
    const char *host;
    int port, conns, value_size, json;
    double duration, warmup;
    long keys, max_ops;
    int multi;
} opt = {"127.0.0.1", 0, 4, 100, 0, 5, 1, 100000, 5000000, 0};

typedef struct worker {
    pthread_t th;
    unsigned seed;
    uint32_t *lat_us; /* samples after the warm-up */
    size_t n;
    long errors;
    char err[160];
} worker;

static double t_start, t_measure, t_end;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void note_error(worker *w, const char *what)
{
    if (!w->errors++) snprintf(w->err, sizeof w->err, "%s", what);
}

/* One SET or one MULTI/SET/SET/EXEC; false when the connection failed. */
static int one(worker *w, redisContext *c, const char *value)
{
    long k = (long)(rand_r(&w->seed) % (unsigned)opt.keys);
    char a[48], b[48];
    redisReply *r = NULL;
    if (!opt.multi) {
        snprintf(a, sizeof a, "key:%ld", k);
        r = redisCommand(c, "SET %s %s", a, value);
        if (!r) return 0;
        if (r->type != REDIS_REPLY_STATUS) note_error(w, r->str ? r->str : "SET: not +OK");
        freeReplyObject(r);
        return 1;
    }
    if (opt.multi == 2) { /* two keys of their own slots */
        snprintf(a, sizeof a, "x:%ld", k);
        snprintf(b, sizeof b, "y:%ld", (long)(rand_r(&w->seed) % (unsigned)opt.keys));
    } else {
        snprintf(a, sizeof a, "{t%ld}a", k);
        snprintf(b, sizeof b, "{t%ld}b", k);
    }
    redisAppendCommand(c, "MULTI");
    redisAppendCommand(c, "SET %s %s", a, value);
    redisAppendCommand(c, "SET %s %s", b, value);
    redisAppendCommand(c, "EXEC");
    for (int i = 0; i < 4; i++) {
        if (redisGetReply(c, (void **)&r) != REDIS_OK) return 0;
        if (i == 3 && (r->type != REDIS_REPLY_ARRAY || r->elements != 2))
            note_error(w, r->type == REDIS_REPLY_ERROR ? r->str : "EXEC: not an array of 2 replies");
        else if (r->type == REDIS_REPLY_ERROR) note_error(w, r->str);
        freeReplyObject(r);
    }
    return 1;
}

static void *run(void *arg)
{
    worker *w = arg;
    struct timeval tv = {5, 0};
    redisContext *c = redisConnectWithTimeout(opt.host, opt.port, tv);
    if (!c || c->err) {
        note_error(w, c ? c->errstr : "connect: no memory");
        if (c) redisFree(c);
        return NULL;
    }
    redisSetTimeout(c, tv);
    char *value = malloc((size_t)opt.value_size + 1);
    memset(value, 'v', (size_t)opt.value_size);
    value[opt.value_size] = 0;
    for (long i = 0; i < opt.max_ops; i++) {
        double t0 = now_s();
        if (t0 >= t_end) break;
        if (!one(w, c, value)) {
            note_error(w, c->errstr);
            break;
        }
        double t1 = now_s();
        if (t0 >= t_measure && w->n < MAX_SAMPLES) w->lat_us[w->n++] = (uint32_t)((t1 - t0) * 1e6);
    }
    free(value);
    redisFree(c);
    return NULL;
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: resp_multi --port P [--mode set|multi|xmulti] [--conns N] [--duration S] [--warmup S]\n"
               "                  [--keys N] [--value-size B] [--max-ops N] [--host H] [--json]\n"
               "  RESP load on one port: plain SETs (the reference) or same-slot transactions\n"
               "  (MULTI, SET {t}a, SET {t}b, EXEC), or the same over two keys of two slots\n"
               "  (xmulti: across partitions), one in flight per connection.\n"
               "  --conns N       connections, one thread each (default 4, max 64)\n"
               "  --duration S    measured seconds after --warmup (defaults 5 and 1)\n"
               "  --max-ops N     per connection, a bound besides the time (default 5000000)\n");
}

int main(int argc, char **argv)
{
    static const struct option lo[] = {{"port", 1, 0, 'p'},     {"mode", 1, 0, 'm'},   {"conns", 1, 0, 'c'},
                                       {"duration", 1, 0, 'd'}, {"warmup", 1, 0, 'w'}, {"keys", 1, 0, 'k'},
                                       {"value-size", 1, 0, 'v'}, {"max-ops", 1, 0, 'x'}, {"host", 1, 0, 'H'},
                                       {"json", 0, 0, 'j'},     {"help", 0, 0, 'h'},   {0, 0, 0, 0}};
    int o;
    while ((o = getopt_long(argc, argv, "p:m:c:d:w:k:v:x:H:jh", lo, NULL)) != -1) {
        switch (o) {
        case 'p': opt.port = atoi(optarg); break;
        case 'm':
            if (!strcmp(optarg, "multi")) opt.multi = 1;
            else if (!strcmp(optarg, "xmulti")) opt.multi = 2;
            else if (!strcmp(optarg, "set")) opt.multi = 0;
            else {
                usage(stderr);
                return 2;
            }
            break;
        case 'c': opt.conns = atoi(optarg); break;
        case 'd': opt.duration = atof(optarg); break;
        case 'w': opt.warmup = atof(optarg); break;
        case 'k': opt.keys = atol(optarg); break;
        case 'v': opt.value_size = atoi(optarg); break;
        case 'x': opt.max_ops = atol(optarg); break;
        case 'H': opt.host = optarg; break;
        case 'j': opt.json = 1; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (opt.port <= 0 || opt.port > 65535 || opt.conns < 1 || opt.conns > MAX_CONNS || opt.duration <= 0 ||
        opt.duration > 3600 || opt.warmup < 0 || opt.keys < 1 || opt.value_size < 1 || opt.value_size > 1 << 20 ||
        opt.max_ops < 1) {
        usage(stderr);
        return 2;
    }
    worker *w = calloc((size_t)opt.conns, sizeof *w);
    t_start = now_s();
    t_measure = t_start + opt.warmup;
    t_end = t_measure + opt.duration;
    for (int i = 0; i < opt.conns; i++) {
        w[i].seed = (unsigned)(i * 7919 + 17);
        w[i].lat_us = malloc(MAX_SAMPLES * sizeof *w[i].lat_us);
        pthread_create(&w[i].th, NULL, run, &w[i]);
    }
    size_t total = 0;
    long errors = 0;
    const char *first_err = NULL;
    for (int i = 0; i < opt.conns; i++) {
        pthread_join(w[i].th, NULL);
        total += w[i].n;
        errors += w[i].errors;
        if (w[i].errors && !first_err) first_err = w[i].err;
    }
    double took = now_s() < t_end ? now_s() - t_measure : opt.duration;
    uint32_t *all = malloc((total ? total : 1) * sizeof *all);
    size_t n = 0;
    for (int i = 0; i < opt.conns; i++) {
        memcpy(all + n, w[i].lat_us, w[i].n * sizeof *all);
        n += w[i].n;
        free(w[i].lat_us);
    }
    qsort(all, n, sizeof *all, cmp_u32);
#define PCT(q) (n ? all[(size_t)((double)(n - 1) * (q))] : 0)
    double rate = took > 0 ? (double)n / took : 0;
    if (opt.json)
        printf("{\"mode\":\"%s\",\"conns\":%d,\"per_s\":%.0f,\"p50_us\":%u,\"p99_us\":%u,\"p999_us\":%u,"
               "\"errors\":%ld}\n",
               opt.multi == 2 ? "xmulti" : opt.multi ? "multi" : "set", opt.conns, rate, PCT(0.5), PCT(0.99), PCT(0.999), errors);
    else
        printf("%s, %d connections: %.0f/s, p50 %u us, p99 %u us, p99.9 %u us, %ld errors\n",
               opt.multi == 2 ? "MULTI/SET/SET/EXEC across slots" : opt.multi ? "MULTI/SET/SET/EXEC" : "SET", opt.conns, rate, PCT(0.5), PCT(0.99), PCT(0.999), errors);
    if (first_err) fprintf(stderr, "resp_multi: first error: %s\n", first_err);
    free(all);
    free(w);
    return errors ? 1 : 0;
}
