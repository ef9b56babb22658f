/* Delta against full rebalance of a copy that missed 1% of the writes
 * (docs/BENCHMARKS.md, "Delta rebalance"), in process, network-free: the
 * rebalance core's batcher -> encode -> decode -> applier, the same path
 * the grid's messages take minus the channel.
 *
 * A supplier store of N entries (100-byte values, 64 partitions) and a
 * demander's kept copy equal up to a mark; then the supplier takes N/100
 * more writes (overwrites, new keys and removes) that the kept copy missed.
 * Full: every partition streamed in full into an empty store.  Delta: every
 * partition as a delta of the kept copy (DeltaBase with its mark) into an
 * empty store that takes the kept copy in.  Both must end equal to the
 * supplier (checked by digests).  Reported: encoded bytes on the wire and
 * seconds for each, and delta/full ratios, measured in the same run.
 *
 *   bench_delta [--entries N] [--json]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <urcu.h>

#include "lattice/alloc.h"
#include "rebalance/rebalance.h"

#define PARTS 64u
static const lattice_rebalance_ids IDS = {1, 0, 1, 1u << 16};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static lattice_store *mk(lattice_region *r)
{
    lattice_store_config sc = {.name = "bench", .partitions = PARTS, .region = r};
    lattice_store *s = NULL;
    if (lattice_store_create(&sc, &s) != LATTICE_OK) exit(1);
    lattice_store_history_configure(s, 4096, 1u << 20);
    return s;
}

static void put(lattice_store *s, uint64_t id, uint64_t version, uint64_t *counter)
{
    char k[32], v[100];
    int kl = snprintf(k, sizeof k, "key-%010llu", (unsigned long long)id);
    memset(v, 'a' + (int)(version % 26), sizeof v);
    uint32_t p = (uint32_t)(id % PARTS);
    lattice_store_entry e = {p, k, (size_t)kl, v, sizeof v, 0, version, 0};
    if (lattice_store_put(s, &e, 0) != LATTICE_OK) exit(1);
    if (counter && counter[p] < version) counter[p] = version;
}

typedef struct keys {
    lattice_rebalance_key *k;
    size_t n, cap;
} keys;

static int list_key(void *arg, const void *key, size_t len, uint64_t counter, bool removed)
{
    (void)counter, (void)removed;
    keys *ks = arg;
    if (ks->n == ks->cap) {
        ks->cap = ks->cap ? ks->cap * 2 : 16;
        ks->k = realloc(ks->k, ks->cap * sizeof *ks->k);
    }
    ks->k[ks->n].data = lt_malloc(len);
    memcpy(ks->k[ks->n].data, key, len);
    ks->k[ks->n++].len = len;
    return 0;
}

/* Moves every partition from sup into dst (delta against kept when kept is
 * given); returns the encoded bytes. */
static uint64_t move_all(lattice_store *sup, const uint64_t *counter, lattice_store *kept, const uint64_t *mark,
                         lattice_store *dst, uint64_t *entries, uint32_t *delta_parts)
{
    uint64_t bytes = 0;
    lattice_rebalance_applier *a;
    if (lattice_rebalance_applier_create(dst, "bench", &IDS, NULL, &a) != LATTICE_OK) exit(1);
    for (uint32_t p = 0; p < PARTS; p++) {
        lattice_rebalance_batcher *b = NULL;
        keys ks = {0};
        if (kept) {
            if (lattice_store_history_above(kept, p, mark[p], true, list_key, &ks) != LATTICE_OK) exit(1);
            lattice_rebalance_delta_base db = {p, mark[p], ks.k, ks.n};
            if (lattice_rebalance_applier_begin_delta(a, p, kept, mark[p]) != LATTICE_OK) exit(1);
            if (lattice_rebalance_batcher_create_delta(sup, "bench", &IDS, p, 524288, counter[p], &db, &b) == LATTICE_OK)
                (*delta_parts)++;
        } else if (lattice_rebalance_applier_begin(a, p, false) != LATTICE_OK) {
            exit(1);
        }
        if (!b && lattice_rebalance_batcher_create(sup, "bench", &IDS, p, 524288, &b) != LATTICE_OK) exit(1);
        bool last = false;
        for (uint64_t n = 1; !last; n++) {
            void *buf;
            size_t len, ne;
            if (lattice_rebalance_batcher_next(b, n, counter[p], &buf, &len, &last, &ne) != LATTICE_OK) exit(1);
            lattice_rebalance_supply *s;
            if (lattice_rebalance_supply_decode(buf, len, 0, &s) != LATTICE_OK) exit(1);
            lattice_rebalance_apply_result r;
            if (lattice_rebalance_applier_apply(a, s, &r) != LATTICE_OK || r.verdict != LATTICE_REBALANCE_APPLIED) exit(1);
            bytes += len;
            *entries += ne;
            lattice_rebalance_supply_free(s);
            lt_free(buf);
        }
        lattice_rebalance_batcher_free(b);
        for (size_t i = 0; i < ks.n; i++) lt_free(ks.k[i].data);
        free(ks.k);
    }
    lattice_rebalance_applier_free(a);
    return bytes;
}

static int same(lattice_store *x, lattice_store *y)
{
    for (uint32_t p = 0; p < PARTS; p++) {
        lattice_rebalance_digest a, b;
        if (lattice_rebalance_digest_partition(x, p, 0, &a) != LATTICE_OK ||
            lattice_rebalance_digest_partition(y, p, 0, &b) != LATTICE_OK || a.hash != b.hash || a.size != b.size)
            return 0;
    }
    return 1;
}

int main(int argc, char **argv)
{
    long n = 200000;
    int json = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--entries") && i + 1 < argc) n = atol(argv[++i]);
        else if (!strcmp(argv[i], "--json")) json = 1;
        else {
            fprintf(stderr, "usage: bench_delta [--entries N] [--json]\n");
            return 2;
        }
    }
    if (n < 1000) n = 1000;
    rcu_register_thread();
    uint64_t mb = (uint64_t)n * 5 * 200 / (1u << 20) + 64;
    lattice_region_config rc = {.name = "bench", .page_size = 4096, .max_mb = mb};
    lattice_region *r;
    if (lattice_region_create(&rc, &r) != LATTICE_OK) return 1;
    lattice_store *sup = mk(r), *kept = mk(r);
    uint64_t counter[PARTS] = {0}, mark[PARTS];
    for (uint32_t p = 0; p < PARTS; p++) {
        lattice_store_history_valid_from(sup, p, 0);
        lattice_store_history_valid_from(kept, p, 0);
    }
    for (long i = 0; i < n; i++) {
        uint64_t v = counter[i % PARTS] + 1;
        put(sup, (uint64_t)i, v, counter);
        put(kept, (uint64_t)i, v, NULL);
    }
    memcpy(mark, counter, sizeof mark);
    /* 1% missed: half overwrites, a quarter new keys, a quarter removes. */
    long missed = n / 100;
    for (long i = 0; i < missed; i++) {
        uint64_t id = (uint64_t)((i * 7919) % n);
        uint32_t p = (uint32_t)(id % PARTS);
        if (i % 4 < 2) {
            put(sup, id, counter[p] + 1, counter);
        } else if (i % 4 == 2) {
            put(sup, (uint64_t)(n + i), counter[(uint64_t)(n + i) % PARTS] + 1, counter);
        } else {
            char k[32];
            int kl = snprintf(k, sizeof k, "key-%010llu", (unsigned long long)id);
            if (lattice_store_remove_v(sup, p, k, (size_t)kl, counter[p] + 1) == LATTICE_OK) counter[p]++;
        }
    }
    lattice_store *full_dst = mk(r), *delta_dst = mk(r);
    uint64_t fe = 0, de = 0;
    uint32_t dp = 0, none = 0;
    double t0 = now_s();
    uint64_t fb = move_all(sup, counter, NULL, NULL, full_dst, &fe, &none);
    double t1 = now_s();
    uint64_t db = move_all(sup, counter, kept, mark, delta_dst, &de, &dp);
    double t2 = now_s();
    int ok = same(sup, full_dst) && same(sup, delta_dst);
    double ft = t1 - t0, dt = t2 - t1;
    if (json)
        printf("{\"entries\":%ld,\"missed_writes\":%ld,\"full\":{\"bytes\":%llu,\"entries\":%llu,\"s\":%.4f},"
               "\"delta\":{\"bytes\":%llu,\"entries\":%llu,\"s\":%.4f,\"partitions_delta\":%u},"
               "\"bytes_ratio\":%.4f,\"time_ratio\":%.4f,\"equal\":%s}\n",
               n, missed, (unsigned long long)fb, (unsigned long long)fe, ft, (unsigned long long)db,
               (unsigned long long)de, dt, dp, (double)db / (double)fb, dt / ft, ok ? "true" : "false");
    else
        printf("%ld entries, %ld missed writes\n  full:  %llu bytes, %llu entries, %.3f s\n"
               "  delta: %llu bytes, %llu entries, %.3f s (%u/%u partitions as deltas)\n"
               "  delta/full: bytes %.4f, time %.4f; copies equal to the supplier: %s\n",
               n, missed, (unsigned long long)fb, (unsigned long long)fe, ft, (unsigned long long)db,
               (unsigned long long)de, dt, dp, PARTS, (double)db / (double)fb, dt / ft, ok ? "yes" : "NO");
    lattice_store_destroy(sup);
    lattice_store_destroy(kept);
    lattice_store_destroy(full_dst);
    lattice_store_destroy(delta_dst);
    lattice_region_destroy(r);
    rcu_unregister_thread();
    return ok ? 0 : 1;
}
