/* Read-only (cache2k ReadOnlyBenchmark): 100k entries (8-byte integer keys and
 * values), gets of random keys at hit rates 100% (keys drawn from the 100k)
 * and 50% (drawn from 200k), 1 and 2 threads; ops/s of the store against the
 * reference (bench_common.h) holding the same entries, in the same run.  Key
 * sequences are drawn before timing; the store's caller also computes the
 * partition of each key, as a real caller must.  The target is on wall-time
 * ops/s; the ratio of ops per CPU-second is printed next to it because on a
 * shared machine wall time also counts other processes on the core. */
#include <pthread.h>

#include "bench_common.h"

#define PARTS 1024
#define ENTRIES 100000
#define SEQ (1u << 20)

struct job {
    int kind;
    struct cds_lfht *ht;
    lattice_store *s;
    const uint64_t *keys;
    uint64_t ops, hits, off;
    pthread_barrier_t *bar;
    double t0, t1, cpu;
};

static void *worker(void *arg)
{
    struct job *j = arg;
    rcu_register_thread();
    pthread_barrier_wait(j->bar);
    uint64_t hits = 0, v;
    j->t0 = now_s();
    double c0 = cpu_now_s();
    for (uint64_t i = 0; i < j->ops; i++) {
        uint64_t k = j->keys[(i + j->off) & (SEQ - 1)];
        if (j->kind == 0) hits += (uint64_t)ref_get(j->ht, k, &v);
        else hits += lattice_store_get(j->s, part_of(k, PARTS), &k, 8, &v, 8, NULL) == LATTICE_OK;
    }
    j->t1 = now_s();
    j->cpu = cpu_now_s() - c0;
    j->hits = hits;
    rcu_unregister_thread();
    return NULL;
}

/* ops/s by wall time; *cpu_ops gets ops per CPU-second of the threads. */
static double run(int kind, struct cds_lfht *ht, lattice_store *s, const uint64_t *keys,
                  uint64_t ops, int threads, uint64_t *hits, double *cpu_ops)
{
    pthread_t th[2];
    struct job j[2];
    pthread_barrier_t bar;
    if (threads < 1 || threads > 2) threads = threads < 1 ? 1 : 2; /* the runs use 1 and 2 */
    pthread_barrier_init(&bar, NULL, (unsigned)threads);
    for (int t = 0; t < threads; t++) {
        j[t] = (struct job){kind, ht, s, keys, ops, 0, (uint64_t)t * (SEQ / 2), &bar, 0, 0, 0};
        pthread_create(&th[t], NULL, worker, &j[t]);
    }
    double t0 = 1e30, t1 = 0, cpu = 0;
    *hits = 0;
    for (int t = 0; t < threads; t++) {
        pthread_join(th[t], NULL);
        t0 = j[t].t0 < t0 ? j[t].t0 : t0;
        t1 = j[t].t1 > t1 ? j[t].t1 : t1;
        *hits += j[t].hits;
        cpu += j[t].cpu;
    }
    *cpu_ops = (double)ops * threads / cpu;
    pthread_barrier_destroy(&bar);
    return (double)ops * threads / (t1 - t0);
}

int main(int argc, char **argv)
{
    struct opts o;
    int rc = parse_opts(argc, argv, &o,
                        "bench_storage_readonly [--quick] [--json]\n"
                        "Random gets over 100k entries at 100% and 50% hit rate, 1 and 2 threads,\n"
                        "store against a plain cds_lfht of malloc'd entries; prints ops/s and\n"
                        "store/reference (target >= 0.75).");
    if (rc >= 0) return rc;
    rcu_register_thread();
    uint64_t ops = o.quick ? 500000 : 10000000;
    struct cds_lfht *ht = ref_new();
    lattice_region_config rcfg = {.name = "bench", .max_mb = 64, .prealloc_mb = 16};
    lattice_region *r;
    lattice_store *s;
    if (lattice_region_create(&rcfg, &r) != LATTICE_OK) return 1;
    lattice_store_config scfg = {.name = "bench", .partitions = PARTS, .region = r};
    if (lattice_store_create(&scfg, &s) != LATTICE_OK) return 1;
    for (uint64_t k = 0; k < ENTRIES; k++) {
        uint64_t v = k * 3;
        lattice_store_entry e = {part_of(k, PARTS), &k, 8, &v, 8, 0, 1};
        if (ref_put(ht, k, v) != 0 || lattice_store_put(s, &e, 0) != LATTICE_OK) return 1;
    }
    uint64_t *keys = malloc(sizeof(uint64_t) * SEQ);
    int all_ok = 1, first = 1;
    if (!o.json)
        printf("%-5s %7s %14s %14s %8s %10s\n", "hit", "threads", "ref ops/s", "store ops/s", "ratio",
               "cpu ratio");
    jappend("{\"benchmark\":\"storage_readonly\",\"entries\":%d,\"ops_per_thread\":%llu,\"results\":[",
            ENTRIES, (unsigned long long)ops);
    for (int hit = 100; hit >= 50; hit -= 50) {
        uint64_t range = hit == 100 ? ENTRIES : 2 * ENTRIES, seed = 7;
        for (uint32_t i = 0; i < SEQ; i++) keys[i] = (seed = mix64(seed + i)) % range;
        for (int threads = 1; threads <= 2; threads++) {
            uint64_t hr, hs;
            double ref_cpu, st_cpu;
            double ref = run(0, ht, NULL, keys, ops, threads, &hr, &ref_cpu);
            double st = run(1, NULL, s, keys, ops, threads, &hs, &st_cpu);
            if (hr != hs) {
                fprintf(stderr, "readonly: hits differ (reference %llu, store %llu)\n",
                        (unsigned long long)hr, (unsigned long long)hs);
                return 1;
            }
            double ratio = st / ref;
            int ok = ratio >= 0.75;
            all_ok &= ok;
            if (!o.json)
                printf("%3d%%  %7d %14.0f %14.0f %7.2fx %9.2fx%s\n", hit, threads, ref, st, ratio,
                       st_cpu / ref_cpu, ok ? "" : "  (target missed)");
            jappend("%s{\"hit_percent\":%d,\"threads\":%d,\"reference_ops_s\":%.0f,\"store_ops_s\":%.0f,"
                    "\"store_over_reference\":%.3f,\"store_over_reference_cpu\":%.3f,\"measured_hit_rate\":%.4f,\"target_met\":%s}",
                    first ? "" : ",", hit, threads, ref, st, ratio, st_cpu / ref_cpu,
                    (double)hs / (double)(ops * (uint64_t)threads), ok ? "true" : "false");
            first = 0;
        }
    }
    jappend("],\"target\":\"store ops/s >= 0.75x reference\",\"all_targets_met\":%s}",
            all_ok ? "true" : "false");
    if (o.json) printf("%s\n", json_buf);
    else printf("target: store >= 0.75x the reference's ops/s: %s\n", all_ok ? "met" : "MISSED");
    free(keys);
    lattice_store_destroy(s);
    lattice_region_destroy(r);
    ref_destroy(ht);
    rcu_unregister_thread();
    return 0;
}
