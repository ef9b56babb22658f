/* Batch vs single row insert (IGNITE-11584's measurement): the time to insert
 * 100 rows into a data region, one lattice_region_insert per row (the normal
 * put path: take the region lock, find a page in the free list, write, move
 * the page to its new bucket) against one lattice_region_insert_batch (one
 * lock, rows packed page by page).  Rows are a 4-byte key plus a value, the
 * row size drawn uniformly from each range.  Between rounds the rows are
 * removed (not timed), so every round starts from the same free list. */
#include "bench_common.h"

static const struct { uint32_t lo, hi; } ranges[] = {
    {4, 64}, {100, 300}, {300, 700}, {700, 1200}, {1200, 3000},
    {1000, 8000}, {4000, 16000}, {100, 32000},
};

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    struct opts o;
    int rc = parse_opts(argc, argv, &o,
                        "bench_storage_batch [--quick] [--json]\n"
                        "Time to insert 100 rows into a data region one by one and as one batch,\n"
                        "for eight row-size ranges; prints us per 100 rows and single/batch.");
    if (rc >= 0) return rc;
    rcu_register_thread();
    int rounds = o.quick ? 50 : 2000;
    lattice_region_config rc_cfg = {.name = "bench", .page_size = 4096, .max_mb = 64, .prealloc_mb = 64};
    lattice_region *r;
    if (lattice_region_create(&rc_cfg, &r) != LATTICE_OK) return 1;
    static uint8_t value[32000];
    memset(value, 0xab, sizeof value);
    uint32_t keys[100];
    lattice_store_entry e[100];
    uint64_t links[100];
    double *ts = malloc(sizeof(double) * (size_t)rounds), *tb = malloc(sizeof(double) * (size_t)rounds);
    uint64_t seed = 12345;
    if (!o.json) printf("%-12s %14s %14s %8s\n", "row bytes", "single us/100", "batch us/100", "ratio");
    jappend("{\"benchmark\":\"storage_batch_vs_single\",\"rows\":100,\"rounds\":%d,\"results\":[", rounds);
    int all_ok = 1;
    for (size_t ri = 0; ri < sizeof ranges / sizeof *ranges; ri++) {
        for (int round = 0; round < rounds; round++) {
            for (int i = 0; i < 100; i++) {
                seed = mix64(seed + (uint64_t)i);
                uint32_t size = ranges[ri].lo + (uint32_t)(seed % (ranges[ri].hi - ranges[ri].lo + 1));
                keys[i] = (uint32_t)(round * 100 + i);
                e[i] = (lattice_store_entry){.partition = (uint32_t)i, .key = &keys[i], .key_len = 4,
                                             .value = value, .value_len = size - 4, .version = 1};
            }
            /* Alternate which goes first so neither always gets the warmer cache. */
            for (int pass = 0; pass < 2; pass++) {
                int batch = (pass + round) & 1;
                double t0 = now_s();
                if (batch) {
                    size_t done;
                    if (lattice_region_insert_batch(r, e, 100, links, &done) != LATTICE_OK) return 1;
                } else {
                    for (int i = 0; i < 100; i++)
                        if (lattice_region_insert(r, &e[i], &links[i]) != LATTICE_OK) return 1;
                }
                double t = now_s() - t0;
                (batch ? tb : ts)[round] = t;
                for (int i = 0; i < 100; i++) lattice_region_remove(r, links[i]);
            }
        }
        qsort(ts, (size_t)rounds, sizeof *ts, cmp_d);
        qsort(tb, (size_t)rounds, sizeof *tb, cmp_d);
        double s_us = ts[rounds / 2] * 1e6, b_us = tb[rounds / 2] * 1e6, ratio = s_us / b_us;
        int ok = ri == 0 ? ratio >= 5.0 : ratio >= 1.0;
        all_ok &= ok;
        char label[32];
        snprintf(label, sizeof label, "%u-%u", ranges[ri].lo, ranges[ri].hi);
        if (!o.json)
            printf("%-12s %14.2f %14.2f %7.2fx%s\n", label, s_us, b_us, ratio, ok ? "" : "  (target missed)");
        jappend("%s{\"row_bytes\":\"%s\",\"single_us_per_100\":%.3f,\"batch_us_per_100\":%.3f,"
                "\"single_over_batch\":%.3f,\"target_met\":%s}",
                ri ? "," : "", label, s_us, b_us, ratio, ok ? "true" : "false");
    }
    jappend("],\"target\":\"batch >= 5x faster for 4-64 B, never slower\",\"all_targets_met\":%s}",
            all_ok ? "true" : "false");
    if (o.json) printf("%s\n", json_buf);
    else printf("median of %d rounds; target: batch >= 5x for 4-64 B and never slower: %s\n", rounds,
                all_ok ? "met" : "MISSED");
    free(ts), free(tb);
    lattice_region_destroy(r);
    rcu_unregister_thread();
    return 0;
}
