/*
 * lattice rebalance [--watch] and lattice verify CACHE (docs/REBALANCE.md,
 * "In the grid").  Both read the grid by inspection, without joining it
 * (cli_source): rebalance reads every server's per-cache rebalance figures
 * from the stats, verify collects every OWNING copy's partition digests and
 * compares them with the core's comparator.
 */
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "http/shapes.h"
#include "lattice/alloc.h"
#include "lattice/clock.h"
#include "lattice/rebalance_view.h"

static volatile sig_atomic_t interrupted;

static void on_sigint(int sig)
{
    (void)sig;
    interrupted = 1;
}

/* Every server's figures per cache, summed (http/shapes.h: the same sums
 * the HTTP endpoint's /rebalance shows). */
static lattice_status gather(const cli_globals *g, cli_source *src, lattice_shapes_rebalance *r)
{
    lattice_cache_info *ci = NULL;
    size_t nc = 0;
    lattice_status st = cli_source_caches(g, src, &ci, &nc);
    if (st != LATTICE_OK) return st;
    st = lattice_shapes_rebalance_gather(ci, nc, src->t, lt_mono_ms(), r);
    lattice_caches_info_free(ci, nc);
    return st;
}

/* 999 -> "999 B", 20400000 -> "20.4 MB" (unit "B", "B/s"); entries: "1.2M entries". */
static void units(double v, const char *unit, char *out, size_t len)
{
    static const char *sfx[] = {"", "k", "M", "G", "T"};
    int i = 0;
    while (v >= 1000.0 && i < 4) v /= 1000.0, i++;
    bool bytes = unit[0] == 'B';
    if (i == 0) snprintf(out, len, "%.0f %s", v, unit);
    else snprintf(out, len, bytes ? "%.1f %s%s" : "%.1f%s %s", v, sfx[i], unit);
}

/* What --watch saw of one cache when its progress last moved: the estimate
 * is the partitions left at the rate this command itself observed, so it
 * says "?" until a partition completed while watching, and never "0s"
 * while partitions are left. */
typedef struct seen {
    char cache[LATTICE_CACHE_NAME_MAX + 1];
    uint64_t t0_ms;
    uint32_t done0;
    uint64_t bytes0, t_bytes0;
} seen;

static double estimate(seen *w, size_t *nw, const lattice_rebalance_progress *p, uint64_t now, double *bytes_per_s)
{
    seen *x = NULL;
    for (size_t i = 0; i < *nw && !x; i++)
        if (!strcmp(w[i].cache, p->cache)) x = &w[i];
    if (!x && *nw < 64) {
        x = &w[(*nw)++];
        snprintf(x->cache, sizeof x->cache, "%s", p->cache);
        x->t0_ms = x->t_bytes0 = now;
        x->done0 = p->partitions_done;
        x->bytes0 = p->bytes_received;
    }
    *bytes_per_s = 0;
    if (!x) return -1;
    if (p->partitions_done < x->done0 || p->bytes_received < x->bytes0) { /* a new rebalance began */
        x->t0_ms = x->t_bytes0 = now;
        x->done0 = p->partitions_done;
        x->bytes0 = p->bytes_received;
    }
    if (now > x->t_bytes0) *bytes_per_s = (double)(p->bytes_received - x->bytes0) * 1000.0 / (double)(now - x->t_bytes0);
    uint32_t left = p->partitions_total - p->partitions_done;
    if (!left) return 0;
    if (p->partitions_done <= x->done0 || now <= x->t0_ms) return -1;
    return (double)left * (double)(now - x->t0_ms) / 1000.0 / (double)(p->partitions_done - x->done0);
}

static void print_line(const lattice_rebalance_progress *p, bool busy, double eta, double bps)
{
    uint32_t left = p->partitions_total - p->partitions_done;
    double pct = p->partitions_total ? 100.0 * (double)p->partitions_done / (double)p->partitions_total : 100.0;
    char bar[21], ent[32], bytes[32], rate[32], est[32];
    unsigned full = (unsigned)(pct / 5.0);
    memset(bar, '#', full > 20 ? 20 : full);
    memset(bar + (full > 20 ? 20 : full), '-', 20 - (full > 20 ? 20 : full));
    bar[20] = 0;
    units((double)p->entries_received, "entries", ent, sizeof ent);
    units((double)p->bytes_received, "B", bytes, sizeof bytes);
    units(bps, "B/s", rate, sizeof rate);
    if (eta < 0) snprintf(est, sizeof est, "eta ?");
    else if (eta < 1 && left) snprintf(est, sizeof est, "eta <1s");
    else snprintf(est, sizeof est, "eta %.0fs", eta);
    printf("%s [%s] %3.0f%% %u/%u partitions left, %s, %s, %s, %s%s\n", p->cache, bar, pct, left,
           p->partitions_total, ent, bytes, rate, est, busy ? "" : "  (idle)");
}

int cli_rebalance(cli_globals *g, int argc, char **argv)
{
    static const char use[] =
        "usage: lattice [GLOBAL OPTIONS] rebalance [--watch] [--interval-ms N] [--max-s N]\n"
        "  per cache: partitions left to load, entries and bytes moved, rate and estimate\n"
        "  (sums over the servers' current plans).  --watch redraws a progress bar every\n"
        "  interval (default 1000 ms) until no rebalance runs and nothing is MOVING, Ctrl-C,\n"
        "  or --max-s seconds (default 600); its estimate is the partitions left at the rate\n"
        "  it watched them complete (\"?\" until one did).  --json: one object (with --watch,\n"
        "  one per interval, a line each)\n"
        "  {\"in_progress\":bool,\"caches\":[{\"name\",\"partitions_moving\",\"partitions_left\",\n"
        "  \"partitions_total\",\"entries_received\",\"bytes_received\",\"bytes_per_s\",\n"
        "  \"entries_per_s\",\"eta_s\"}],\"nodes\":[{\"id\",\"consistent_id\",\"entries_received\",\n"
        "  \"bytes_received\",\"mode\":\"full\"|\"delta\",\"partitions_full\",\"partitions_delta\"}]}\n"
        "  (nodes: each server's last rebalance; mode \"delta\" when a partition came as a\n"
        "  delta of the copy the node kept: only the updates it missed)\n";
    if (cli_wants_help(argc, argv)) {
        fputs(use, stdout);
        return 0;
    }
    bool watch = false;
    long interval = 1000, max_s = 600;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--watch")) {
            watch = true;
        } else if (!strcmp(argv[i], "--interval-ms") && i + 1 < argc) {
            interval = strtol(argv[++i], NULL, 10);
        } else if (!strcmp(argv[i], "--max-s") && i + 1 < argc) {
            max_s = strtol(argv[++i], NULL, 10);
        } else {
            fputs(use, stderr);
            return 2;
        }
    }
    if (interval < 50 || interval > 60000 || max_s < 1 || max_s > 86400) {
        fputs("lattice rebalance: --interval-ms 50..60000, --max-s 1..86400\n", stderr);
        return 2;
    }
    cli_source src;
    if (cli_source_open(g, "rebalance", &src)) return 1;
    signal(SIGINT, on_sigint);
    uint64_t end = lt_mono_ms() + (uint64_t)max_s * 1000u;
    int rc = 0;
    seen w[64];
    size_t nw = 0;
    bool first = true;
    for (;;) {
        /* Every round asks the grid as it is now: servers join and leave
         * during a rebalance. */
        if (!first && cli_source_refresh(g, "rebalance", &src)) {
            rc = 1;
            break;
        }
        first = false;
        lattice_shapes_rebalance r;
        lattice_status st = gather(g, &src, &r);
        if (st != LATTICE_OK) {
            fprintf(stderr, "lattice rebalance: %s\n", lattice_strerror(st));
            rc = 1;
            break;
        }
        const lattice_rebalance_progress *p = r.caches;
        size_t np = r.n_caches;
        bool busy = r.in_progress;
        uint64_t now = lt_mono_ms();
        double eta[64], bps[64];
        for (size_t i = 0; i < np && i < 64; i++) eta[i] = watch ? estimate(w, &nw, &p[i], now, &bps[i]) : -1;
        if (g->json) {
            json_t *j = lattice_shapes_rebalance_json(&r, now);
            json_t *c;
            size_t k;
            json_array_foreach(json_object_get(j, "caches"), k, c)
                if (watch && k < 64) {
                    json_object_set_new(c, "eta_s", json_real(eta[k]));
                    json_object_set_new(c, "bytes_per_s", json_real(bps[k]));
                }
            if (j) cli_print_json(j);
        } else {
            for (size_t i = 0; i < np; i++) {
                double rate = 0, e = i < 64 ? eta[i] : -1;
                if (!watch) {
                    lattice_rebalance_rate rr;
                    lattice_rebalance_progress_rate(&p[i], now, &rr);
                    e = rr.eta_s;
                    rate = rr.bytes_per_s;
                } else if (i < 64) {
                    rate = bps[i];
                }
                print_line(&p[i], busy, e, rate);
            }
            for (size_t i = 0; i < r.n_nodes; i++) {
                const lattice_shapes_rebalance_node *x = &r.nodes[i];
                char ent[32], bytes[32];
                units((double)x->entries, "entries", ent, sizeof ent);
                units((double)x->bytes, "B", bytes, sizeof bytes);
                printf("  node %s (%s): last rebalance %s, %s, %s (%u partitions in full, %u as deltas)\n",
                       x->consistent_id[0] ? x->consistent_id : "?", x->id, lattice_shapes_rebalance_mode(x), ent,
                       bytes, x->done - x->delta, x->delta);
            }
        }
        fflush(stdout);
        lattice_shapes_rebalance_free(&r);
        if (!watch || !busy || interrupted || now >= end) break;
        usleep((useconds_t)interval * 1000u);
        if (interrupted) break;
    }
    cli_source_close(&src);
    return rc;
}

static const char *node_name(char (*names)[64], size_t n, uint32_t i) { return i < n ? names[i] : "?"; }

int cli_verify(cli_globals *g, int argc, char **argv)
{
    static const char use[] =
        "usage: lattice [GLOBAL OPTIONS] verify CACHE\n"
        "  compares every OWNING copy of every partition (content hash of key, value, expiry\n"
        "  and version; entry count; update counter) with the copy holding the highest\n"
        "  counter and lists conflicts.  Run it while the cache is idle: writes in flight\n"
        "  show up as conflicts.  Exit status: 0 no conflict, 3 conflicts, 1 error.\n"
        "  --json: {\"cache\",\"partitions\",\"copies\",\"conflicts\":[{\"partition\",\"node\",\n"
        "  \"against\",\"hash\",\"size\",\"counter\"}]}\n";
    if (cli_wants_help(argc, argv)) {
        fputs(use, stdout);
        return 0;
    }
    if (argc != 2) {
        fputs(use, stderr);
        return 2;
    }
    cli_source src;
    if (cli_source_open(g, "verify", &src)) return 1;
    lattice_partition_digest *pd = NULL;
    size_t nd = 0;
    lattice_status st = cli_source_digests(g, &src, argv[1], &pd, &nd);
    cli_source_close(&src);
    if (st == LATTICE_ERR_NO_CACHE) {
        fprintf(stderr, "lattice verify: no cache named '%s' (lattice caches lists them)\n", argv[1]);
        return 1;
    }
    if (st != LATTICE_OK) {
        fprintf(stderr, "lattice verify %s: %s\n", argv[1], lattice_strerror(st));
        return 1;
    }
    char (*names)[64] = lt_calloc(nd ? nd : 1, sizeof *names);
    lattice_rebalance_digest *dg = lt_calloc(nd ? nd : 1, sizeof *dg);
    uint8_t *seen = NULL;
    size_t nn = 0, parts = 0;
    uint32_t maxp = 0;
    for (size_t i = 0; i < nd; i++)
        if (pd[i].partition > maxp) maxp = pd[i].partition;
    seen = lt_calloc((size_t)maxp + 1, 1);
    if (!names || !dg || !seen) {
        fprintf(stderr, "lattice verify: %s\n", lattice_strerror(LATTICE_ERR_NOMEM));
        lt_free(names);
        lt_free(dg);
        lt_free(seen);
        lattice_partition_digests_free(pd);
        return 1;
    }
    for (size_t i = 0; i < nd; i++) {
        size_t k = 0;
        while (k < nn && strcmp(names[k], pd[i].node) != 0) k++;
        if (k == nn) snprintf(names[nn++], 64, "%s", pd[i].node);
        dg[i] = (lattice_rebalance_digest){(uint32_t)k, pd[i].partition, pd[i].hash, pd[i].size, pd[i].counter};
        if (!seen[pd[i].partition]) parts++;
        seen[pd[i].partition] = 1;
    }
    lattice_rebalance_conflict *cf = NULL;
    size_t ncf = 0;
    st = lattice_rebalance_verify(dg, nd, &cf, &ncf);
    if (st != LATTICE_OK) {
        fprintf(stderr, "lattice verify: %s\n", lattice_strerror(st));
    } else if (g->json) {
        json_t *arr = json_array();
        for (size_t i = 0; i < ncf; i++)
            json_array_append_new(
                arr, json_pack("{s:I, s:s, s:s, s:b, s:b, s:b}", "partition", (json_int_t)cf[i].partition, "node",
                               node_name(names, nn, cf[i].node_b), "against", node_name(names, nn, cf[i].node_a),
                               "hash", (cf[i].what & LATTICE_REBALANCE_CONFLICT_HASH) != 0, "size",
                               (cf[i].what & LATTICE_REBALANCE_CONFLICT_SIZE) != 0, "counter",
                               (cf[i].what & LATTICE_REBALANCE_CONFLICT_COUNTER) != 0));
        cli_print_json(json_pack("{s:s, s:I, s:I, s:o}", "cache", argv[1], "partitions", (json_int_t)parts, "copies",
                             (json_int_t)nd, "conflicts", arr));
    } else {
        printf("cache %s: %zu partitions, %zu copies compared, %zu conflicts\n", argv[1], parts, nd, ncf);
        for (size_t i = 0; i < ncf; i++)
            printf("  partition %u: %s differs from %s in%s%s%s\n", cf[i].partition, node_name(names, nn, cf[i].node_b),
                   node_name(names, nn, cf[i].node_a), cf[i].what & LATTICE_REBALANCE_CONFLICT_HASH ? " content" : "",
                   cf[i].what & LATTICE_REBALANCE_CONFLICT_SIZE ? " size" : "",
                   cf[i].what & LATTICE_REBALANCE_CONFLICT_COUNTER ? " counter" : "");
    }
    fflush(stdout);
    lt_free(cf);
    lt_free(names);
    lt_free(dg);
    lt_free(seen);
    lattice_partition_digests_free(pd);
    return st != LATTICE_OK ? 1 : ncf ? 3 : 0;
}
