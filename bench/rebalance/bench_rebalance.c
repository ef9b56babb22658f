/* Rebalance benchmarks (docs/BENCHMARKS.md, section Rebalance).
 *
 * 1. Demander time per supply message of 100 entries (IGNITE-11584's
 *    measurement, at the store level): decode one encoded Supply and store
 *    its entries, (a) one lattice_store_put(IF_NEWER) per entry against
 *    (b) the applier (one lattice_store_insert_batch(IF_NEWER)).  The row
 *    size (key + value) is drawn uniformly from each class.  Between rounds
 *    the partition is cleared (not timed), as a full load starts from a
 *    cleared partition.  Median of the rounds; single/batch is the ratio.
 * 2. End to end, in process: N entries of 100-byte values in 64 partitions
 *    moved batcher -> encode -> decode -> applier into a second store, against
 *    a plain lattice_store_put loop of the same entries into a fresh store and
 *    a memcpy of the same key+value bytes, measured in the same run.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <urcu.h>

#include "lattice/alloc.h"
#include "rebalance/rebalance.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t mix64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
}

static char json[1 << 14];
static size_t jlen;
static void jappend(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(json + jlen, sizeof json - jlen, fmt, ap);
    va_end(ap);
    if (n > 0 && jlen + (size_t)n < sizeof json) jlen += (size_t)n;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static lattice_store *new_store(lattice_region **r, uint32_t parts, uint64_t mb)
{
    lattice_region_config rc = {.name = "bench", .page_size = 4096, .max_mb = mb, .prealloc_mb = mb};
    lattice_store_config sc = {.name = "bench", .partitions = parts};
    lattice_store *s;
    if (lattice_region_create(&rc, r) != LATTICE_OK) return NULL;
    sc.region = *r;
    if (lattice_store_create(&sc, &s) != LATTICE_OK) return NULL;
    return s;
}

static const lattice_rebalance_ids IDS = {1, 0, 1, 1};

static const struct { uint32_t lo, hi; } classes[] = {
    {4, 64}, {100, 300}, {300, 700}, {700, 1200}, {1200, 3000},
    {1000, 8000}, {4000, 16000}, {100, 32000},
};

/* Builds one encoded Supply of 100 entries of the class from a scratch store. */
static int make_supply(uint32_t lo, uint32_t hi, uint64_t seed, void **buf, size_t *len)
{
    lattice_region *r;
    lattice_store *s = new_store(&r, 1, 16);
    if (!s) return -1;
    static uint8_t value[32000];
    memset(value, 0xab, sizeof value);
    for (int i = 0; i < 100; i++) {
        seed = mix64(seed + (uint64_t)i);
        uint32_t size = lo + (uint32_t)(seed % (hi - lo + 1));
        uint32_t key = (uint32_t)i;
        lattice_store_entry e = {.partition = 0, .key = &key, .key_len = 4, .value = value,
                                 .value_len = size - 4, .version = 1 + (uint64_t)i};
        if (lattice_store_put(s, &e, 0) != LATTICE_OK) return -1;
    }
    lattice_rebalance_batcher *b;
    bool last;
    if (lattice_rebalance_batcher_create(s, "bench", &IDS, 0, 8u << 20, &b) != LATTICE_OK ||
        lattice_rebalance_batcher_next(b, 1, 100, buf, len, &last, NULL) != LATTICE_OK || !last)
        return -1;
    lattice_rebalance_batcher_free(b);
    lattice_store_destroy(s);
    lattice_region_destroy(r);
    return 0;
}

/* Decode + store one message; batch = applier, else one put per entry. */
static int store_message(lattice_store *s, lattice_rebalance_applier *a, const void *buf,
                         size_t len, int batch)
{
    lattice_rebalance_supply *sp;
    if (lattice_rebalance_supply_decode(buf, len, 0, &sp) != LATTICE_OK) return -1;
    int rc = 0;
    if (batch) {
        lattice_rebalance_apply_result res;
        rc = lattice_rebalance_applier_apply(a, sp, &res) != LATTICE_OK ||
             res.verdict != LATTICE_REBALANCE_APPLIED || res.applied != 100;
    } else {
        lattice_rebalance_supply_info in;
        lattice_rebalance_supply_info_of(sp, &in);
        for (size_t i = 0; i < in.entries && !rc; i++) {
            lattice_store_entry e;
            lattice_rebalance_supply_entry(sp, i, &e);
            rc = lattice_store_put(s, &e, LATTICE_STORE_IF_NEWER) != LATTICE_OK;
        }
    }
    lattice_rebalance_supply_free(sp);
    return rc;
}

static int bench_messages(int rounds, int json_out)
{
    lattice_region *r;
    lattice_store *s = new_store(&r, 1, 64);
    lattice_rebalance_applier *a;
    if (!s || lattice_rebalance_applier_create(s, "bench", &IDS, NULL, &a) != LATTICE_OK) return 1;
    double *ts = malloc(sizeof(double) * (size_t)rounds), *tb = malloc(sizeof(double) * (size_t)rounds);
    double *td = malloc(sizeof(double) * (size_t)rounds);
    if (!json_out)
        printf("%-12s %16s %16s %8s %12s\n", "row bytes", "single us/msg", "batch us/msg", "ratio",
               "(decode us)");
    jappend("\"messages\":{\"entries_per_message\":100,\"rounds\":%d,\"results\":[", rounds);
    int all_ok = 1;
    for (size_t ci = 0; ci < sizeof classes / sizeof *classes; ci++) {
        void *buf;
        size_t len;
        if (make_supply(classes[ci].lo, classes[ci].hi, 1000 + ci, &buf, &len)) return 1;
        for (int round = 0; round < rounds; round++) {
            /* Alternate which goes first so neither always gets the warmer cache. */
            for (int pass = 0; pass < 2; pass++) {
                int batch = (pass + round) & 1;
                lattice_store_clear(s, 0);
                if (lattice_rebalance_applier_begin(a, 0, false) != LATTICE_OK) return 1;
                double t0 = now_s();
                if (store_message(s, a, buf, len, batch)) return 1;
                (batch ? tb : ts)[round] = now_s() - t0;
            }
            /* Decode alone: the part both paths share. */
            lattice_rebalance_supply *sp;
            double t0 = now_s();
            if (lattice_rebalance_supply_decode(buf, len, 0, &sp) != LATTICE_OK) return 1;
            lattice_rebalance_supply_free(sp);
            td[round] = now_s() - t0;
        }
        qsort(td, (size_t)rounds, sizeof *td, cmp_d);
        double d_us = td[rounds / 2] * 1e6;
        qsort(ts, (size_t)rounds, sizeof *ts, cmp_d);
        qsort(tb, (size_t)rounds, sizeof *tb, cmp_d);
        double s_us = ts[rounds / 2] * 1e6, b_us = tb[rounds / 2] * 1e6, ratio = s_us / b_us;
        int ok = ci == 0 ? ratio >= 1.5 : ratio > 1.0;
        all_ok &= ok;
        char label[32];
        snprintf(label, sizeof label, "%u-%u", classes[ci].lo, classes[ci].hi);
        if (!json_out)
            printf("%-12s %16.2f %16.2f %7.2fx %12.2f%s\n", label, s_us, b_us, ratio, d_us,
                   ok ? "" : "  (target missed)");
        jappend("%s{\"row_bytes\":\"%s\",\"message_bytes\":%zu,\"single_us\":%.3f,\"batch_us\":%.3f,"
                "\"single_over_batch\":%.3f,\"decode_us\":%.3f,\"target_met\":%s}",
                ci ? "," : "", label, len, s_us, b_us, ratio, d_us, ok ? "true" : "false");
        lt_free(buf);
    }
    jappend("],\"target\":\"batch faster in every class, >= 1.5x for 4-64 B\","
            "\"all_targets_met\":%s}", all_ok ? "true" : "false");
    if (!json_out)
        printf("median of %d rounds; target (batch faster everywhere, >= 1.5x for 4-64 B): %s\n\n",
               rounds, all_ok ? "met" : "MISSED");
    free(ts);
    free(tb);
    free(td);
    lattice_rebalance_applier_free(a);
    lattice_store_destroy(s);
    lattice_region_destroy(r);
    return 0;
}

#define E2E_PARTS 64u

static int bench_end_to_end(uint64_t n, int json_out)
{
    uint64_t mb = (n * 260) / (1u << 20) + 64;
    lattice_region *rs, *rd, *rp;
    lattice_store *src = new_store(&rs, E2E_PARTS, mb), *dst = new_store(&rd, E2E_PARTS, mb),
                  *ref = new_store(&rp, E2E_PARTS, mb);
    if (!src || !dst || !ref) return 1;
    /* Entries as an array (the put-loop reference reads them from here). */
    char (*keys)[16] = malloc(n * sizeof *keys);
    uint8_t value[100];
    memset(value, 0x5c, sizeof value);
    lattice_store_entry *ents = malloc(n * sizeof *ents);
    uint64_t payload = 0;
    for (uint64_t i = 0; i < n; i++) {
        int kl = snprintf(keys[i], sizeof keys[i], "key:%010llu", (unsigned long long)i);
        ents[i] = (lattice_store_entry){.partition = (uint32_t)(mix64(i) & (E2E_PARTS - 1)),
                                        .key = keys[i], .key_len = (size_t)kl, .value = value,
                                        .value_len = sizeof value, .version = i + 1};
        payload += (uint64_t)kl + sizeof value;
        if (lattice_store_put(src, &ents[i], 0) != LATTICE_OK) return 1;
    }
    /* Reference 1: memcpy of the same bytes. */
    uint8_t *flat = malloc(payload);
    memset(flat, 1, payload); /* fault the pages in first: the reference is the copy, not the faults */
    double t0 = now_s();
    uint64_t off = 0;
    for (uint64_t i = 0; i < n; i++) {
        memcpy(flat + off, ents[i].key, ents[i].key_len);
        memcpy(flat + off + ents[i].key_len, value, sizeof value);
        off += ents[i].key_len + sizeof value;
    }
    double t_memcpy = now_s() - t0;
    /* Reference 2: a plain put loop into a fresh store. */
    t0 = now_s();
    for (uint64_t i = 0; i < n; i++)
        if (lattice_store_put(ref, &ents[i], 0) != LATTICE_OK) return 1;
    double t_put = now_s() - t0;
    /* The rebalance path. */
    lattice_rebalance_applier *a;
    if (lattice_rebalance_applier_create(dst, "bench", &IDS, NULL, &a) != LATTICE_OK) return 1;
    uint64_t messages = 0, wire = 0, moved = 0;
    t0 = now_s();
    for (uint32_t p = 0; p < E2E_PARTS; p++) {
        lattice_rebalance_batcher *b;
        if (lattice_rebalance_applier_begin(a, p, true) != LATTICE_OK ||
            lattice_rebalance_batcher_create(src, "bench", &IDS, p, 512 * 1024, &b) != LATTICE_OK)
            return 1;
        bool last = false;
        for (uint64_t batch = 1; !last; batch++) {
            void *buf;
            size_t len;
            if (lattice_rebalance_batcher_next(b, batch, 7, &buf, &len, &last, NULL) != LATTICE_OK)
                return 1;
            lattice_rebalance_supply *sp;
            lattice_rebalance_apply_result res;
            if (lattice_rebalance_supply_decode(buf, len, 0, &sp) != LATTICE_OK ||
                lattice_rebalance_applier_apply(a, sp, &res) != LATTICE_OK)
                return 1;
            moved += res.applied;
            lattice_rebalance_supply_free(sp);
            lt_free(buf);
            messages++;
            wire += len;
        }
        lattice_rebalance_batcher_free(b);
    }
    double t_reb = now_s() - t0;
    if (moved != n) {
        fprintf(stderr, "moved %llu of %llu entries\n", (unsigned long long)moved,
                (unsigned long long)n);
        return 1;
    }
    double mbs = (double)payload / t_reb / 1e6, eps = (double)n / t_reb;
    double put_mbs = (double)payload / t_put / 1e6, put_eps = (double)n / t_put;
    double cpy_mbs = (double)payload / t_memcpy / 1e6;
    if (!json_out) {
        printf("end to end: %llu entries (%.1f MB of keys+values) in %llu messages (%.1f MB on the wire)\n",
               (unsigned long long)n, (double)payload / 1e6, (unsigned long long)messages,
               (double)wire / 1e6);
        printf("  %-34s %9.1f MB/s %12.0f entries/s\n", "batcher->encode->decode->applier", mbs, eps);
        printf("  %-34s %9.1f MB/s %12.0f entries/s  (rebalance/put = %.2fx)\n",
               "reference: plain put loop", put_mbs, put_eps, eps / put_eps);
        printf("  %-34s %9.1f MB/s %12s            (rebalance/memcpy = %.3fx)\n",
               "reference: memcpy of the bytes", cpy_mbs, "", mbs / cpy_mbs);
    }
    jappend(",\"end_to_end\":{\"entries\":%llu,\"payload_bytes\":%llu,\"messages\":%llu,"
            "\"wire_bytes\":%llu,\"seconds\":%.4f,\"mb_per_s\":%.2f,\"entries_per_s\":%.0f,"
            "\"put_loop_mb_per_s\":%.2f,\"put_loop_entries_per_s\":%.0f,\"memcpy_mb_per_s\":%.1f,"
            "\"rebalance_over_put_loop\":%.3f,\"rebalance_over_memcpy\":%.4f}",
            (unsigned long long)n, (unsigned long long)payload, (unsigned long long)messages,
            (unsigned long long)wire, t_reb, mbs, eps, put_mbs, put_eps, cpy_mbs, eps / put_eps,
            mbs / cpy_mbs);
    lattice_rebalance_applier_free(a);
    free(flat);
    free(ents);
    free(keys);
    lattice_store_destroy(src);
    lattice_store_destroy(dst);
    lattice_store_destroy(ref);
    lattice_region_destroy(rs);
    lattice_region_destroy(rd);
    lattice_region_destroy(rp);
    return 0;
}

int main(int argc, char **argv)
{
    int json_out = 0, quick = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json")) json_out = 1;
        else if (!strcmp(argv[i], "--quick")) quick = 1;
        else {
            int help = !strcmp(argv[i], "--help") || !strcmp(argv[i], "-h");
            fprintf(help ? stdout : stderr,
                    "bench_rebalance [--quick] [--json]\n"
                    "Demander time per 100-entry supply message (decode + store), one put per\n"
                    "entry vs the applier's batch insert, for eight row-size classes; then\n"
                    "1M entries of 100-byte values moved batcher -> encode -> decode -> applier\n"
                    "against a plain put loop and a memcpy of the same bytes.\n\n"
                    "  --quick   small smoke run (50 rounds, 100k entries)\n"
                    "  --json    print one JSON object\n"
                    "  --help    this text\n");
            return help ? 0 : 2;
        }
    }
    rcu_register_thread();
    jappend("{\"benchmark\":\"rebalance\",");
    int rc = bench_messages(quick ? 50 : 1000, json_out);
    if (!rc) rc = bench_end_to_end(quick ? 100000 : 1000000, json_out);
    jappend("}");
    if (!rc && json_out) printf("%s\n", json);
    rcu_unregister_thread();
    return rc;
}
