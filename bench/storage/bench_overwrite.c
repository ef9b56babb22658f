/* Overwrite vs insert: N keys (16-byte keys, 100-byte values, 1024
 * partitions, one thread) are put into an empty store (insert), then every
 * key is put again four times: with a value of the same size (the row is
 * rewritten where it is), the same size again at a version past 2^7 (as a
 * partition's update counter gets there in a grid: the version's varint
 * takes a byte more unless it was padded, region_int.h), 8 bytes shorter
 * (same place, a hole left), and 40 bytes longer (into the page's gap when
 * there is one, else relocated to another page).  Each pass walks the keys in a shuffled order, as a cache
 * sees them.  Prints ops/s of each pass and overwrite/insert; the reference
 * (bench_common.h's cds_lfht of malloc'd records, add_replace) is timed on
 * the same keys in the same run for scale. */
#include "bench_common.h"

#define PARTS 1024

static void make_key(uint8_t *k, uint64_t i)
{
    uint64_t a = mix64(i), b = i;
    memcpy(k, &a, 8);
    memcpy(k + 8, &b, 8);
}

/* One pass over the keys in order[]: ops/s. */
static double pass(lattice_store *s, const uint64_t *order, uint64_t n, size_t vlen,
                   uint64_t version)
{
    static uint8_t value[256];
    uint8_t key[16];
    memset(value, (int)version, sizeof value);
    double t0 = now_s();
    for (uint64_t i = 0; i < n; i++) {
        uint64_t id = order[i];
        make_key(key, id);
        lattice_store_entry e = {(uint32_t)(mix64(id + 1) & (PARTS - 1)), key, 16, value, vlen,
                                 0, version, 0};
        if (lattice_store_put(s, &e, 0) != LATTICE_OK) {
            fprintf(stderr, "overwrite: put failed\n");
            exit(1);
        }
    }
    return (double)n / (now_s() - t0);
}

static double ref_pass(struct cds_lfht *ht, const uint64_t *order, uint64_t n, uint64_t v)
{
    double t0 = now_s();
    for (uint64_t i = 0; i < n; i++)
        if (ref_put(ht, order[i], v) != 0) exit(1);
    return (double)n / (now_s() - t0);
}

int main(int argc, char **argv)
{
    struct opts o;
    int rc = parse_opts(argc, argv, &o,
                        "bench_storage_overwrite [--quick] [--json]\n"
                        "Puts 1M keys (--quick: 100k; 16-byte keys, 100-byte values) into an empty\n"
                        "store, then overwrites every key with values of the same size (twice: the\n"
                        "second at a version past 2^7), 8 bytes shorter and 40 bytes longer; prints\n"
                        "ops/s and overwrite/insert.");
    if (rc >= 0) return rc;
    rcu_register_thread();
    uint64_t n = o.quick ? 100000 : 1000000;
    uint64_t *order = malloc(sizeof(uint64_t) * n);
    for (uint64_t i = 0; i < n; i++) order[i] = i;
    for (uint64_t i = n - 1; i > 0; i--) {
        uint64_t j = mix64(i) % (i + 1), t = order[i];
        order[i] = order[j], order[j] = t;
    }
    struct cds_lfht *ht = ref_new();
    double ref_ins = ref_pass(ht, order, n, 1), ref_ow = ref_pass(ht, order, n, 2);
    ref_destroy(ht);

    lattice_region_config rcfg = {.name = "bench", .max_mb = 1024};
    lattice_region *r;
    lattice_store *s;
    if (lattice_region_create(&rcfg, &r) != LATTICE_OK) return 1;
    lattice_store_config scfg = {.name = "bench", .partitions = PARTS, .region = r};
    if (lattice_store_create(&scfg, &s) != LATTICE_OK) return 1;
    struct { const char *name; size_t vlen; uint64_t version; double ops; } p[] = {
        {"insert", 100, 1, 0}, {"same size", 100, 2, 0}, {"same, v 300", 100, 300, 0},
        {"8 B shorter", 92, 301, 0}, {"40 B longer", 132, 302, 0},
    };
    enum { PASSES = sizeof p / sizeof *p };
    for (int i = 0; i < PASSES; i++) p[i].ops = pass(s, order, n, p[i].vlen, p[i].version);
    lattice_store_metrics m;
    lattice_store_metrics_get(s, &m);
    if (m.entries != n) {
        fprintf(stderr, "overwrite: %llu entries, expected %llu\n", (unsigned long long)m.entries,
                (unsigned long long)n);
        return 1;
    }
    if (!o.json) printf("%-12s %12s %16s\n", "pass", "ops/s", "over insert");
    jappend("{\"benchmark\":\"storage_overwrite\",\"entries\":%llu,\"reference_insert_ops_s\":%.0f,"
            "\"reference_overwrite_ops_s\":%.0f,\"results\":[",
            (unsigned long long)n, ref_ins, ref_ow);
    for (int i = 0; i < PASSES; i++) {
        if (!o.json) printf("%-12s %12.0f %15.2fx\n", p[i].name, p[i].ops, p[i].ops / p[0].ops);
        jappend("%s{\"pass\":\"%s\",\"value_bytes\":%zu,\"ops_s\":%.0f,\"over_insert\":%.3f}",
                i ? "," : "", p[i].name, p[i].vlen, p[i].ops, p[i].ops / p[0].ops);
    }
    jappend("],\"pages_data\":%llu}", (unsigned long long)m.region.pages_data);
    if (o.json) printf("%s\n", json_buf);
    else printf("reference (cds_lfht, 8-byte values): insert %.0f ops/s, overwrite %.0f ops/s\n",
                ref_ins, ref_ow);
    lattice_store_destroy(s);
    lattice_region_destroy(r);
    free(order);
    rcu_unregister_thread();
    return 0;
}
