/* Populate (cache2k PopulateParallelOnce): put integer keys 1..N (8-byte key,
 * 8-byte value) into an empty store of 1024 partitions, with 1 and 2
 * threads, against the reference (bench_common.h) filled with the same keys
 * and values in the same run.  Threads split the keys (t, t+T, t+2T ...). */
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
    double t0, t1;
};

static void *worker(void *arg)
{
    struct job *j = arg;
    rcu_register_thread();
    pthread_barrier_wait(j->bar);
    j->t0 = now_s();
    for (uint64_t k = 1 + j->t; k <= j->n; k += j->nthreads) {
        uint64_t v = k * 3;
        if (j->kind == 0) {
            if (ref_put(j->ht, k, v) != 0) j->failed = 1;
        } else {
            lattice_store_entry e = {part_of(k, PARTS), &k, 8, &v, 8, 0, 1};
            if (lattice_store_put(j->s, &e, 0) != LATTICE_OK) j->failed = 1;
        }
    }
    j->t1 = now_s();
    rcu_unregister_thread();
    return NULL;
}

/* Seconds from the first thread's start to the last thread's end. */
static double run(int kind, struct cds_lfht *ht, lattice_store *s, uint64_t n, int threads)
{
    pthread_t th[2];
    struct job j[2];
    if (threads < 1 || threads > 2) threads = threads < 1 ? 1 : 2; /* the runs use 1 and 2 */
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, (unsigned)threads);
    for (int t = 0; t < threads; t++) {
        j[t] = (struct job){kind, ht, s, n, (uint64_t)t, (uint64_t)threads, 0, &bar, 0, 0};
        pthread_create(&th[t], NULL, worker, &j[t]);
    }
    double t0 = 1e30, t1 = 0;
    int failed = 0;
    for (int t = 0; t < threads; t++) {
        pthread_join(th[t], NULL);
        t0 = j[t].t0 < t0 ? j[t].t0 : t0;
        t1 = j[t].t1 > t1 ? j[t].t1 : t1;
        failed |= j[t].failed;
    }
    pthread_barrier_destroy(&bar);
    if (failed) {
        fprintf(stderr, "populate: a put failed\n");
        exit(1);
    }
    return t1 - t0;
}

int main(int argc, char **argv)
{
    struct opts o;
    int rc = parse_opts(argc, argv, &o,
                        "bench_storage_populate [--quick] [--json]\n"
                        "Put keys 1..N (N = 1M, 2M, 4M, 8M; --quick: 100k, 200k) with 1 and 2 threads\n"
                        "into a store and into a plain cds_lfht of malloc'd entries; prints seconds\n"
                        "and store/reference time (targets: <= 1.2 with 1 thread, <= 1.5 with 2), and\n"
                        "how much faster 2 store writers are than 1 (target >= 1.6).");
    if (rc >= 0) return rc;
    rcu_register_thread();
    uint64_t full[] = {1000000, 2000000, 4000000, 8000000}, quick[] = {100000, 200000};
    uint64_t *ns = o.quick ? quick : full;
    int nn = o.quick ? 2 : 4, all_ok = 1, first = 1;
    double store1 = 0;
    if (!o.json)
        printf("%-9s %7s %10s %10s %8s %9s\n", "N", "threads", "ref s", "store s", "ratio", "speedup");
    jappend("{\"benchmark\":\"storage_populate\",\"partitions\":%d,\"results\":[", PARTS);
    for (int i = 0; i < nn; i++) {
        for (int threads = 1; threads <= 2; threads++) {
            struct cds_lfht *ht = ref_new();
            double tr = run(0, ht, NULL, ns[i], threads);
            ref_destroy(ht);
            lattice_region_config rcfg = {.name = "bench", .max_mb = 2048};
            lattice_region *r;
            lattice_store *s;
            lattice_store_config scfg = {.name = "bench", .partitions = PARTS};
            if (lattice_region_create(&rcfg, &r) != LATTICE_OK) return 1;
            scfg.region = r;
            if (lattice_store_create(&scfg, &s) != LATTICE_OK) return 1;
            double tsr = run(1, NULL, s, ns[i], threads);
            uint64_t count = 0;
            for (uint32_t p = 0; p < PARTS; p++) count += lattice_store_count(s, p);
            if (count != ns[i]) {
                fprintf(stderr, "populate: store holds %llu entries, expected %llu\n",
                        (unsigned long long)count, (unsigned long long)ns[i]);
                return 1;
            }
            lattice_store_destroy(s);
            lattice_region_destroy(r);
            double ratio = tsr / tr;
            if (threads == 1) store1 = tsr;
            double speedup = threads == 2 ? store1 / tsr : 1.0;
            int ok = ratio <= (threads == 1 ? 1.2 : 1.5) && (threads == 1 || speedup >= 1.6);
            all_ok &= ok;
            if (!o.json)
                printf("%-9llu %7d %10.3f %10.3f %7.2fx %8.2fx%s\n", (unsigned long long)ns[i],
                       threads, tr, tsr, ratio, speedup, ok ? "" : "  (target missed)");
            jappend("%s{\"n\":%llu,\"threads\":%d,\"reference_s\":%.4f,\"store_s\":%.4f,"
                    "\"store_over_reference\":%.3f,\"store_mops\":%.3f,\"reference_mops\":%.3f,"
                    "\"store_speedup_over_1_thread\":%.3f,\"target_met\":%s}",
                    first ? "" : ",", (unsigned long long)ns[i], threads, tr, tsr, ratio,
                    (double)ns[i] / tsr / 1e6, (double)ns[i] / tr / 1e6, speedup, ok ? "true" : "false");
            first = 0;
        }
    }
    jappend("],\"target\":\"store time <= 1.2x reference (1 thread), <= 1.5x (2 threads); "
            "2 store writers >= 1.6x faster than 1\",\"all_targets_met\":%s}",
            all_ok ? "true" : "false");
    if (o.json) printf("%s\n", json_buf);
    else printf("targets: store <= 1.2x (1 thread) / 1.5x (2 threads) the reference's time, 2 writers\n"
                "         >= 1.6x faster than 1: %s\n", all_ok ? "met" : "MISSED");
    rcu_unregister_thread();
    return 0;
}
