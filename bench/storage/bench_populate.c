/* Populate (cache2k PopulateParallelOnce): put integer keys 1..N (8-byte key,
 * 8-byte value) into an empty store of 1024 partitions, with 1 and 2
 * threads, against the reference (bench_common.h) filled with the same keys
 * and values in the same run.  Threads split the keys (t, t+T, t+2T ...).
 * Rounds alternate the four fills so that noise lands on rounds, and the
 * medians are the figures (see --help). */
#include <pthread.h>

#include "bench_common.h"

#define PARTS 1024

struct job {
    int kind; /* 0 reference, 1 store */
    struct cds_lfht *ht;
    lattice_store *s;
    uint64_t n, t, nthreads;
    int failed;
    pthread_barrier_t *bar;
    double t0, t1, cpu;
};

static void *worker(void *arg)
{
    struct job *j = arg;
    rcu_register_thread();
    pthread_barrier_wait(j->bar);
    j->t0 = now_s();
    double c0 = cpu_now_s();
    for (uint64_t k = 1 + j->t; k <= j->n; k += j->nthreads) {
        uint64_t v = k * 3;
        if (j->kind == 0) {
            if (ref_put(j->ht, k, v) != 0) j->failed = 1;
        } else {
            lattice_store_entry e = {part_of(k, PARTS), &k, 8, &v, 8, 0, 1, 0};
            if (lattice_store_put(j->s, &e, 0) != LATTICE_OK) j->failed = 1;
        }
    }
    j->cpu = cpu_now_s() - c0;
    j->t1 = now_s();
    rcu_unregister_thread();
    return NULL;
}

struct timing {
    double wall; /* first thread's start to the last thread's end */
    double cpu;  /* the threads' CPU seconds, summed */
};

static struct timing run_threads(int kind, struct cds_lfht *ht, lattice_store *s, uint64_t n,
                                 int threads)
{
    pthread_t th[2];
    struct job j[2];
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, (unsigned)threads);
    for (int t = 0; t < threads; t++) {
        j[t] = (struct job){kind, ht, s, n, (uint64_t)t, (uint64_t)threads, 0, &bar, 0, 0, 0};
        pthread_create(&th[t], NULL, worker, &j[t]);
    }
    double t0 = 1e30, t1 = 0, cpu = 0;
    int failed = 0;
    for (int t = 0; t < threads; t++) {
        pthread_join(th[t], NULL);
        t0 = j[t].t0 < t0 ? j[t].t0 : t0;
        t1 = j[t].t1 > t1 ? j[t].t1 : t1;
        cpu += j[t].cpu;
        failed |= j[t].failed;
    }
    pthread_barrier_destroy(&bar);
    if (failed) {
        fprintf(stderr, "populate: a put failed\n");
        exit(1);
    }
    return (struct timing){t1 - t0, cpu};
}

/* One fill of N keys into a new reference table (kind 0) or a new store
 * (kind 1), checked for its count, then freed. */
static struct timing fill(int kind, uint64_t n, int threads)
{
    struct timing tm;
    if (kind == 0) {
        struct cds_lfht *ht = ref_new();
        tm = run_threads(0, ht, NULL, n, threads);
        ref_destroy(ht);
        return tm;
    }
    lattice_region_config rcfg = {.name = "bench", .max_mb = 2048};
    lattice_region *r;
    lattice_store *s;
    lattice_store_config scfg = {.name = "bench", .partitions = PARTS};
    if (lattice_region_create(&rcfg, &r) != LATTICE_OK) exit(1);
    scfg.region = r;
    if (lattice_store_create(&scfg, &s) != LATTICE_OK) exit(1);
    tm = run_threads(1, NULL, s, n, threads);
    uint64_t count = 0;
    for (uint32_t p = 0; p < PARTS; p++) count += lattice_store_count(s, p);
    if (count != n) {
        fprintf(stderr, "populate: store holds %llu entries, expected %llu\n",
                (unsigned long long)count, (unsigned long long)n);
        exit(1);
    }
    lattice_store_destroy(s);
    lattice_region_destroy(r);
    return tm;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Median, smallest and largest of v[0..n-1] (sorts v). */
static void spread(double *v, int n, double *med, double *lo, double *hi)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    *med = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
    *lo = v[0];
    *hi = v[n - 1];
}

#define MAX_ROUNDS 31

int main(int argc, char **argv)
{
    /* --rounds R is ours; the rest goes to parse_opts. */
    int rounds = 0;
    uint64_t only_n = 0;
    char *rest[16];
    int nrest = 0;
    for (int i = 0; i < argc && nrest < 16; i++) {
        if (i > 0 && !strcmp(argv[i], "--rounds") && i + 1 < argc) {
            rounds = atoi(argv[++i]);
            if (rounds < 1 || rounds > MAX_ROUNDS) {
                fprintf(stderr, "bench_storage_populate: --rounds takes 1..%d\n", MAX_ROUNDS);
                return 2;
            }
        } else if (i > 0 && !strcmp(argv[i], "--keys") && i + 1 < argc) {
            only_n = strtoull(argv[++i], NULL, 10);
            if (only_n < 1000 || only_n > 100000000) {
                fprintf(stderr, "bench_storage_populate: --keys takes 1000..100000000\n");
                return 2;
            }
        } else {
            rest[nrest++] = argv[i];
        }
    }
    struct opts o;
    int rc = parse_opts(nrest, rest, &o,
                        "bench_storage_populate [--quick] [--json] [--rounds R] [--keys N]\n"
                        "Put keys 1..N (N = 1M, 2M, 4M, 8M; --quick: 100k, 200k) with 1 and 2 threads\n"
                        "into a store and into a plain cds_lfht of malloc'd entries (the reference).\n"
                        "Each N runs R rounds (default 5, --quick 3); a round fills all four (store and\n"
                        "reference, 1 and 2 threads) one after another, the order reversed every other\n"
                        "round, so a burst of other work on this shared machine lands on one round,\n"
                        "not on one side. Printed per N: the median round's store/reference time\n"
                        "(targets <= 1.2 with 1 thread, <= 1.5 with 2) and how much faster 2 writers\n"
                        "are than 1 for the store (target >= 1.6) and for the reference, each with the\n"
                        "smallest and largest round; and the CPU seconds 2 writers spend against 1\n"
                        "(1.00 = no work added by the second writer: locks, shared lines, faults).\n"
                        "--keys N runs that one N only.");
    if (rc >= 0) return rc;
    if (rounds == 0) rounds = o.quick ? 3 : 5;
    rcu_register_thread();
    uint64_t full[] = {1000000, 2000000, 4000000, 8000000}, quick[] = {100000, 200000};
    uint64_t *ns = o.quick ? quick : full;
    int nn = o.quick ? 2 : 4, all_ok = 1;
    if (only_n) {
        ns = &only_n;
        nn = 1;
    }
    if (!o.json)
        printf("%-8s %-17s %-17s %-22s %-22s %-10s %s\n", "N", "store/ref 1t", "store/ref 2t",
               "store 2w/1w (target)", "reference 2w/1w", "cpu 2w/1w", "(median [min-max] of rounds)");
    jappend("{\"benchmark\":\"storage_populate\",\"partitions\":%d,\"rounds\":%d,\"results\":[",
            PARTS, rounds);
    for (int i = 0; i < nn; i++) {
        double r1[MAX_ROUNDS], r2[MAX_ROUNDS], ss[MAX_ROUNDS], rs[MAX_ROUNDS], sc[MAX_ROUNDS],
            rc1[MAX_ROUNDS];
        for (int k = 0; k < rounds; k++) {
            /* order: store 1t, store 2t, ref 1t, ref 2t - reversed on odd rounds */
            struct timing t[4];
            for (int step = 0; step < 4; step++) {
                int which = k % 2 ? 3 - step : step;
                t[which] = fill(which < 2, ns[i], which % 2 + 1);
            }
            /* t[0] store 1t, t[1] store 2t, t[2] ref 1t, t[3] ref 2t */
            r1[k] = t[0].wall / t[2].wall;
            r2[k] = t[1].wall / t[3].wall;
            ss[k] = t[0].wall / t[1].wall;
            rs[k] = t[2].wall / t[3].wall;
            sc[k] = t[1].cpu / t[0].cpu;
            rc1[k] = t[3].cpu / t[2].cpu;
        }
        double m1, l1, h1, m2, l2, h2, ms, ls, hs, mr, lr, hr, mc, lc, hc, mrc, lrc, hrc;
        spread(r1, rounds, &m1, &l1, &h1);
        spread(r2, rounds, &m2, &l2, &h2);
        spread(ss, rounds, &ms, &ls, &hs);
        spread(rs, rounds, &mr, &lr, &hr);
        spread(sc, rounds, &mc, &lc, &hc);
        spread(rc1, rounds, &mrc, &lrc, &hrc);
        int ok1 = m1 <= 1.2, ok2 = m2 <= 1.5, oks = ms >= 1.6;
        all_ok &= ok1 && ok2 && oks;
        if (!o.json)
            printf("%-8llu %.2f [%.2f-%.2f]  %.2f [%.2f-%.2f]  %.2f [%.2f-%.2f]%-5s  %.2f [%.2f-%.2f]"
                   "       %.2f (ref %.2f)\n",
                   (unsigned long long)ns[i], m1, l1, h1, m2, l2, h2, ms, ls, hs,
                   oks ? "" : " miss", mr, lr, hr, mc, mrc);
        jappend("%s{\"n\":%llu,\"store_over_reference_1t\":%.3f,\"store_over_reference_2t\":%.3f,"
                "\"store_speedup_2w\":%.3f,\"store_speedup_2w_min\":%.3f,\"store_speedup_2w_max\":%.3f,"
                "\"reference_speedup_2w\":%.3f,\"reference_speedup_2w_min\":%.3f,"
                "\"reference_speedup_2w_max\":%.3f,\"store_cpu_2w_over_1w\":%.3f,"
                "\"reference_cpu_2w_over_1w\":%.3f,\"target_met\":%s}",
                i ? "," : "", (unsigned long long)ns[i], m1, m2, ms, ls, hs, mr, lr, hr, mc, mrc,
                ok1 && ok2 && oks ? "true" : "false");
        (void)lrc, (void)hrc, (void)lc, (void)hc;
    }
    jappend("],\"target\":\"store time <= 1.2x reference (1 thread), <= 1.5x (2 threads); "
            "2 store writers >= 1.6x faster than 1 (medians of rounds)\",\"all_targets_met\":%s}",
            all_ok ? "true" : "false");
    if (o.json) printf("%s\n", json_buf);
    else printf("targets: store <= 1.2x (1 thread) / 1.5x (2 threads) the reference's time, 2 writers\n"
                "         >= 1.6x faster than 1: %s\n", all_ok ? "met" : "MISSED");
    rcu_unregister_thread();
    return 0;
}
