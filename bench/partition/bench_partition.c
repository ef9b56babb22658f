/*
 * bench_partition: what rendezvous affinity costs and buys, measured against
 * references computed in the same run.
 *
 *  1. balance:  primaries (and backups) per node for N = 2..32, 1024
 *               partitions, backups=1: min / avg / max and max/avg.
 *  2. compute:  time for a full assignment (1024 and 16384 partitions at 3,
 *               16 and 32 nodes, backups=1), as a ratio to a plain
 *               "crc16(partition) % N, then the next nodes" modulo table of
 *               the same shape - the cheapest table one could build.
 *  3. movement: share of partitions whose owners change when an (N+1)th node
 *               joins, rendezvous vs the modulo table, vs the ideal 1/(N+1).
 *  3b. slot runs: how many runs of Redis slots with identical owner lists
 *               CLUSTER SLOTS has to list (no reference: a count).
 *  4. hashing:  key -> partition (table CRC16 + hash tag) against the bitwise
 *               CRC16 of the definition, for 16- and 64-byte keys.
 *
 * Bounded: every timing repeats until --min-ms of work (default 40) or 2000
 * repetitions, and keeps the fastest of 3 such runs.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lattice/alloc.h"
#include "lattice/log.h"
#include "affinity_view.h"
#include "partition/partition.h"

static double min_ms = 40;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Seconds per call of fn(arg): the fastest of 3 runs of >= min_ms each. */
static double time_per_call(void (*fn)(void *), void *arg)
{
    double best = 1e30;
    for (int run = 0; run < 3; run++) {
        int reps = 0;
        double t0 = now_s(), t;
        do {
            fn(arg);
            reps++;
            t = now_s() - t0;
        } while (t * 1e3 < min_ms && reps < 2000);
        if (t / reps < best) best = t / reps;
    }
    return best;
}

#define MAXN 33
struct topo {
    lattice_affinity_node n[MAXN];
    char ids[MAXN][48];
    size_t count;
};

/* The same ids as the unit test's balance table (tests/unit/partition). */
static void make_topo(struct topo *t, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        snprintf(t->ids[i], sizeof t->ids[i], "10.0.%zu.%zu:47500", i / 256, i % 256);
        t->n[i] = (lattice_affinity_node){t->ids[i], t->ids[i], i + 1};
    }
    t->count = n;
}

/* The reference table: primary crc16(p) % N, backups the next nodes. */
static void modulo_table(uint32_t parts, uint32_t n, uint32_t copies, uint16_t *owners)
{
    for (uint32_t p = 0; p < parts; p++) {
        uint32_t first = lattice_partition_crc16(&p, sizeof p) % n;
        for (uint32_t j = 0; j < copies; j++) owners[(size_t)p * copies + j] = (uint16_t)((first + j) % n);
    }
}

struct job {
    struct topo *t;
    lattice_cache_config cfg;
    uint64_t sink;
    unsigned round;     /* which topology variant run_affinity uses next */
};

/* Rotating over 16 topologies (same size, other ids) keeps the branch
 * predictor from learning one repeated input: a node computes an assignment
 * once per topology change, with a cold predictor. */
#define VARIANTS 16
static struct topo variants[VARIANTS];

static void make_variants(size_t n, const struct topo *hosts_from)
{
    for (int v = 0; v < VARIANTS; v++) {
        for (size_t i = 0; i < n; i++) {
            snprintf(variants[v].ids[i], sizeof variants[v].ids[i], "10.%d.%zu.%zu:47500", v + 1,
                     i / 256, i % 256);
            variants[v].n[i] = (lattice_affinity_node){variants[v].ids[i], hosts_from->n[i].host,
                                                       i + 1};
        }
        variants[v].count = n;
    }
}

static void run_affinity(void *arg)
{
    struct job *j = arg;
    const struct topo *t = &variants[j->round++ % VARIANTS];
    lattice_affinity *a = NULL;
    if (lattice_affinity_compute(t->n, t->count, &j->cfg, &a) != LATTICE_OK) exit(1);
    if (lattice_affinity_primary(a, 1) < 0) exit(1);
    lattice_affinity_free(a);
}

static void run_modulo(void *arg)
{
    struct job *j = arg;
    uint32_t copies = j->cfg.backups + 1 < j->t->count ? j->cfg.backups + 1 : (uint32_t)j->t->count;
    /* allocate like the real thing does, so the ratio compares the ranking */
    uint16_t *o = malloc((size_t)j->cfg.partitions * copies * sizeof *o);
    if (!o) exit(1);
    modulo_table(j->cfg.partitions, (uint32_t)j->t->count, copies, o);
    j->sink += o[1];
    free(o);
}

static uint16_t crc16_bitwise(const uint8_t *p, size_t n)
{
    uint16_t crc = 0;
    for (size_t i = 0; i < n; i++) {
        crc ^= (uint16_t)(p[i] << 8);
        for (int b = 0; b < 8; b++)
            crc = (uint16_t)((crc & 0x8000u) ? ((unsigned)crc << 1) ^ 0x1021u : (unsigned)crc << 1);
    }
    return crc;
}

#define NKEYS 4096
struct keys {
    char k[NKEYS][64];
    size_t len;
    uint64_t sink;
};

static void run_keys_table(void *arg)
{
    struct keys *k = arg;
    for (int i = 0; i < NKEYS; i++) k->sink += lattice_partition_of_key(k->k[i], k->len, 1024);
}

static void run_keys_bitwise(void *arg)
{
    struct keys *k = arg;
    for (int i = 0; i < NKEYS; i++) k->sink += crc16_bitwise((const uint8_t *)k->k[i], k->len) & 1023;
}

static int usage(FILE *f, int rc)
{
    fprintf(f,
            "usage: bench_partition [--json] [--min-ms N]\n"
            "  Rendezvous affinity: primaries per node for N=2..32 (1024 partitions),\n"
            "  assignment time vs a crc16-modulo table (1024/16384 partitions, 3/16/32\n"
            "  nodes), partitions moved by a join, and key hashing vs bitwise CRC16.\n"
            "  --json      print one JSON object instead of tables\n"
            "  --min-ms N  minimum milliseconds per timing run (default 40, 1..2000)\n");
    return rc;
}

/* Partitions whose owner list differs between the modulo tables of n and
 * n+1 nodes (copies <= n). */
static uint32_t modulo_moved(uint32_t parts, uint32_t n, uint32_t copies)
{
    size_t bytes = (size_t)parts * copies * sizeof(uint16_t);
    uint16_t *a = malloc(bytes), *b = malloc(bytes);
    if (!a || !b) exit(1);
    modulo_table(parts, n, copies, a);
    modulo_table(parts, n + 1, copies, b);
    uint32_t moved = 0;
    for (uint32_t p = 0; p < parts; p++)
        moved += memcmp(&a[(size_t)p * copies], &b[(size_t)p * copies], copies * sizeof *a) != 0;
    free(a), free(b);
    return moved;
}

static struct topo topo;

static lattice_affinity *must_compute(size_t n, const lattice_cache_config *c)
{
    lattice_affinity *a = NULL;
    if (lattice_affinity_compute(topo.n, n, c, &a) != LATTICE_OK) {
        fprintf(stderr, "bench_partition: affinity failed\n");
        exit(1);
    }
    return a;
}

/* 1. primaries/backups per node, N = 2..32 */
static void section_balance(int json)
{
    if (json) printf("\"balance\":[");
    else printf("Primaries per node, 1024 partitions, backups=1\n"
                "%4s %6s %7s %6s %8s | %6s %7s %6s\n", "N", "p.min", "p.avg", "p.max", "max/avg",
                "b.min", "b.avg", "b.max");
    double worst16 = 0, worst32 = 0;
    make_topo(&topo, 32);
    for (size_t n = 2; n <= 32; n++) {
        lattice_cache_config c;
        lattice_cache_config_init(&c, "bench");
        lattice_affinity *a = must_compute(n, &c);
        av_balance b;
        av_balance_of(a, &b);
        double r = b.primary_max / b.primary_avg;
        if (n <= 16 && r > worst16) worst16 = r;
        if (r > worst32) worst32 = r;
        if (json)
            printf("%s{\"nodes\":%zu,\"primary_min\":%u,\"primary_avg\":%.2f,\"primary_max\":%u,"
                   "\"max_over_avg\":%.3f,\"backup_min\":%u,\"backup_avg\":%.2f,\"backup_max\":%u}",
                   n > 2 ? "," : "", n, b.primary_min, b.primary_avg, b.primary_max, r,
                   b.backup_min, b.backup_avg, b.backup_max);
        else
            printf("%4zu %6u %7.1f %6u %8.3f | %6u %7.1f %6u\n", n, b.primary_min, b.primary_avg,
                   b.primary_max, r, b.backup_min, b.backup_avg, b.backup_max);
        lattice_affinity_free(a);
    }
    if (json) printf("],\"worst_max_over_avg_n_le_16\":%.3f,\"worst_max_over_avg_n_le_32\":%.3f",
                     worst16, worst32);
    else printf("worst max/avg: %.3f (N<=16), %.3f (N<=32)\n\n", worst16, worst32);
}

/* 2. time for a full assignment vs the modulo table */
static void section_compute(int json)
{
    static const struct {
        uint32_t parts;
        size_t nodes;
        const char *variant;
    } rows[] = {
        {1024, 3, "backups=1"},   {1024, 16, "backups=1"},  {1024, 32, "backups=1"},
        {16384, 3, "backups=1"},  {16384, 16, "backups=1"}, {16384, 32, "backups=1"},
        {1024, 16, "exclude_neighbors"}, {1024, 16, "replicated"},
    };
    if (json) printf(",\"compute\":[");
    else printf("Full assignment: rendezvous vs crc16-modulo table (same shape), same run\n"
                "%6s %4s %-18s %14s %12s %8s\n", "parts", "N", "variant", "rendezvous_us",
                "modulo_us", "ratio");
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        make_topo(&topo, rows[i].nodes);
        for (size_t h = 0; h < rows[i].nodes; h++) /* 4 hosts for exclude_neighbors */
            topo.n[h].host = topo.ids[h % 4];
        make_variants(rows[i].nodes, &topo);
        struct job j = {.t = &topo};
        lattice_cache_config_init(&j.cfg, "bench");
        j.cfg.partitions = rows[i].parts;
        if (strcmp(rows[i].variant, "exclude_neighbors") == 0) j.cfg.exclude_neighbors = true;
        if (strcmp(rows[i].variant, "replicated") == 0) {
            j.cfg.mode = LATTICE_CACHE_REPLICATED;
            j.cfg.backups = (uint32_t)rows[i].nodes - 1; /* modulo table of the same shape */
        }
        double ta = time_per_call(run_affinity, &j);
        double tm = time_per_call(run_modulo, &j);
        if (json)
            printf("%s{\"partitions\":%u,\"nodes\":%zu,\"variant\":\"%s\",\"rendezvous_us\":%.1f,"
                   "\"modulo_us\":%.1f,\"ratio\":%.2f}", i ? "," : "", rows[i].parts,
                   rows[i].nodes, rows[i].variant, ta * 1e6, tm * 1e6, ta / tm);
        else
            printf("%6u %4zu %-18s %14.1f %12.1f %8.2f\n", rows[i].parts, rows[i].nodes,
                   rows[i].variant, ta * 1e6, tm * 1e6, ta / tm);
    }
    if (json) printf("]");
}

/* 3. partitions whose owners change on a join */
static void section_join(int json)
{
    if (json) printf(",\"join_moved\":[");
    else printf("\nPartitions whose owners change when node N+1 joins (1024 partitions, backups=1)\n"
                "%4s %12s %10s %10s\n", "N", "rendezvous", "ideal", "modulo");
    static const size_t join_list[] = {2, 3, 8, 16, 31};
    make_topo(&topo, 32);
    for (size_t ji = 0; ji < sizeof join_list / sizeof join_list[0]; ji++) {
        size_t n = join_list[ji];
        lattice_cache_config c;
        lattice_cache_config_init(&c, "bench");
        lattice_affinity *a = must_compute(n, &c), *b = must_compute(n + 1, &c);
        av_change *ch;
        size_t nch;
        if (av_diff(a, b, &ch, &nch) != LATTICE_OK) exit(1);
        lt_free(ch);
        /* ideal: the joiner takes its fair share of copies, each a distinct partition */
        double ideal = fmin(1.0, 2.0 / (double)(n + 1));
        double mod = modulo_moved(1024, (uint32_t)n, 2) / 1024.0;
        if (json)
            printf("%s{\"nodes\":%zu,\"rendezvous\":%.3f,\"ideal\":%.3f,\"modulo\":%.3f}",
                   ji ? "," : "", n, nch / 1024.0, ideal, mod);
        else
            printf("%4zu %11.1f%% %9.1f%% %9.1f%%\n", n, 100.0 * nch / 1024.0, 100 * ideal,
                   100 * mod);
        lattice_affinity_free(a);
        lattice_affinity_free(b);
    }
    if (json) printf("]");
}

/* 3b. what CLUSTER SLOTS has to list: runs of slots with the same owners */
static void section_slot_runs(int json)
{
    if (json) printf(",\"slot_runs\":[");
    else printf("\nRuns of Redis slots with identical owner lists (CLUSTER SLOTS entries), backups=1\n"
                "%6s %4s %8s\n", "parts", "N", "runs");
    static const uint32_t run_parts[] = {16, 1024, 16384};
    make_topo(&topo, 16);
    for (size_t ri = 0; ri < 6; ri++) {
        size_t n = ri % 2 ? 16 : 3;
        lattice_cache_config c;
        lattice_cache_config_init(&c, "bench");
        c.partitions = run_parts[ri / 2];
        lattice_affinity *a = must_compute(n, &c);
        av_slot_range *r;
        size_t runs;
        if (av_slot_ranges(a, &r, &runs) != LATTICE_OK) exit(1);
        if (json)
            printf("%s{\"partitions\":%u,\"nodes\":%zu,\"runs\":%zu}", ri ? "," : "", c.partitions,
                   n, runs);
        else
            printf("%6u %4zu %8zu\n", c.partitions, n, runs);
        lt_free(r);
        lattice_affinity_free(a);
    }
    if (json) printf("]");
}

/* 4. key -> partition vs the bitwise CRC */
static void section_hashing(int json)
{
    if (json) printf(",\"key_hashing\":[");
    else printf("\nKey -> partition (1024 partitions): table CRC16 vs bitwise CRC16, same run\n"
                "%6s %12s %12s %8s\n", "bytes", "table_ns", "bitwise_ns", "speedup");
    static struct keys k;
    static const size_t lens[] = {16, 64};
    for (size_t li = 0; li < 2; li++) {
        k.len = lens[li];
        for (int i = 0; i < NKEYS; i++)
            for (size_t b = 0; b < k.len; b++) k.k[i][b] = (char)('a' + (i * 31 + (int)b * 7) % 26);
        double tt = time_per_call(run_keys_table, &k) / NKEYS;
        double tb = time_per_call(run_keys_bitwise, &k) / NKEYS;
        if (json)
            printf("%s{\"key_bytes\":%zu,\"table_ns\":%.2f,\"bitwise_ns\":%.2f,\"speedup\":%.2f}",
                   li ? "," : "", k.len, tt * 1e9, tb * 1e9, tb / tt);
        else
            printf("%6zu %12.2f %12.2f %8.2f\n", k.len, tt * 1e9, tb * 1e9, tb / tt);
    }
    if (json) printf("]");
}

int main(int argc, char **argv)
{
    int json = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0) {
            json = 1;
        } else if (strcmp(argv[i], "--min-ms") == 0 && i + 1 < argc) {
            min_ms = atof(argv[++i]);
            if (!(min_ms >= 1 && min_ms <= 2000)) {
                fprintf(stderr, "bench_partition: --min-ms must be 1..2000\n");
                return usage(stderr, 2);
            }
        } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            return usage(stdout, 0);
        } else {
            fprintf(stderr, "bench_partition: unknown option '%s'\n", argv[i]);
            return usage(stderr, 2);
        }
    }
    lattice_log_set_level(LT_ERROR);
    if (json) printf("{");
    section_balance(json);
    section_compute(json);
    section_join(json);
    section_slot_runs(json);
    section_hashing(json);
    if (json) printf("}\n");
    return 0;
}
