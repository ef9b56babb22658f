/*
 * lattice cache create|destroy|reset-lost, lattice caches, lattice partitions CACHE
 * (JSON shapes: docs/CACHES.md).
 */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "http/shapes.h"
#include "lattice/alloc.h"
#include "lattice/cache_spec.h"

int cli_cache(cli_globals *g, int argc, char **argv)
{
    static const char use[] = "usage: lattice [GLOBAL OPTIONS] cache create NAME [k=v ...]\n"
                              "       lattice [GLOBAL OPTIONS] cache destroy NAME\n"
                              "       lattice [GLOBAL OPTIONS] cache reset-lost NAME\n"
                              "  reset-lost gives up the LOST partitions of NAME (every copy gone): they serve\n"
                              "  again, empty, and the cache's assignment can move on.  Their data is lost.\n"
                              "  keys: mode=partitioned|replicated partitions=N backups=N sync=full_sync|primary_sync|full_async\n"
                              "        read_from_backup=true|false expiry_ms=N max_key_bytes=N max_value_bytes=N ...\n";
    if (cli_wants_help(argc, argv)) {
        fputs(use, stdout);
        return 0;
    }
    bool create = argc >= 3 && !strcmp(argv[1], "create");
    bool destroy = argc == 3 && !strcmp(argv[1], "destroy");
    bool reset = argc == 3 && !strcmp(argv[1], "reset-lost");
    if (!create && !destroy && !reset) {
        fputs(use, stderr);
        return 2;
    }
    char spec[LATTICE_CACHE_SPEC_MAX];
    if (create) {
        char err[1024]; /* the parser lists every option on an unknown one */
        if (lattice_cache_spec_from_args(argv[2], argc - 3, (const char *const *)argv + 3, spec, sizeof spec, err,
                                         sizeof err) != LATTICE_OK) {
            fprintf(stderr, "lattice cache create: %s\n", err);
            return 2;
        }
    }
    lattice_node *n = cli_attach(g);
    if (!n) return 1;
    uint32_t lost = 0;
    lattice_status st = create   ? lattice_cache_create(n, spec)
                        : reset  ? lattice_cache_reset_lost(n, argv[2], &lost)
                                 : lattice_cache_destroy(n, argv[2]);
    if (g->json) {
        json_t *o = json_pack("{s:s, s:s, s:b}", "op", argv[1], "cache", argv[2], "ok", st == LATTICE_OK);
        if (st != LATTICE_OK) json_object_set_new(o, "error", json_string(lattice_strerror(st)));
        if (reset && st == LATTICE_OK) json_object_set_new(o, "lost_partitions", json_integer(lost));
        cli_print_json(o);
    } else if (reset && st == LATTICE_OK) {
        if (lost) printf("cache %s: %u LOST partitions given up; they serve again, empty\n", argv[2], lost);
        else printf("cache %s: no partition is LOST\n", argv[2]);
    } else if (st == LATTICE_OK) {
        printf("cache %s %s\n", argv[2], create ? "created" : "destroyed");
    } else {
        fprintf(stderr, "lattice cache %s %s: %s%s\n", argv[1], argv[2], lattice_strerror(st),
                st == LATTICE_ERR_EXISTS ? " (a cache of that name exists with another config)" : "");
    }
    fflush(stdout);
    lattice_node_stop(n);
    return st == LATTICE_OK ? 0 : 1;
}

/* Nodes are named by consistent id (host:port) everywhere the CLI prints
 * them; the id (a UUID per start) when the node already left. */
static const char *node_name(const lattice_topology *t, const char *id)
{
    const lattice_member *m = t ? lattice_topology_find(t, id) : NULL;
    return m ? m->consistent_id : id;
}

int cli_caches(cli_globals *g, int argc, char **argv)
{
    if (cli_wants_help(argc, argv)) {
        puts("usage: lattice [GLOBAL OPTIONS] caches\n  every cache: mode, partitions, backups, sync, size, and per server node:\n"
             "  primary/backup entries and partitions, reads/writes/hits/misses");
        return 0;
    }
    if (argc != 1) {
        fprintf(stderr, "usage: lattice [GLOBAL OPTIONS] caches\n");
        return 2;
    }
    cli_source src;
    if (cli_source_open(g, "caches", &src)) return 1;
    lattice_cache_info *ci = NULL;
    size_t nc = 0;
    lattice_status st = cli_source_caches(g, &src, &ci, &nc);
    if (st != LATTICE_OK) {
        fprintf(stderr, "lattice caches: %s\n", lattice_strerror(st));
        cli_source_close(&src);
        return 1;
    }
    const lattice_topology *t = src.t;
    if (g->json) {
        cli_print_json(lattice_shapes_caches(ci, nc, t));
    } else {
        for (size_t i = 0; i < nc; i++) {
            printf("cache %s: %s, %u partitions, backups %u, %s, size %llu\n", ci[i].name, ci[i].mode,
                   ci[i].partitions, ci[i].backups, ci[i].sync, (unsigned long long)ci[i].size);
            printf("  %-38s %10s %10s %6s %6s %6s %10s %10s %10s %10s\n", "node", "primary", "backup", "p.prt", "b.prt",
                   "moving", "reads", "writes", "hits", "misses");
            for (size_t k = 0; k < ci[i].n_nodes; k++) {
                lattice_cache_node_info *x = &ci[i].nodes[k];
                printf("  %-38s %10llu %10llu %6u %6u %6u %10llu %10llu %10llu %10llu\n", node_name(t, x->id),
                       (unsigned long long)x->primary_entries, (unsigned long long)x->backup_entries,
                       x->primary_partitions, x->backup_partitions, x->moving_partitions, (unsigned long long)x->reads,
                       (unsigned long long)x->writes, (unsigned long long)x->hits, (unsigned long long)x->misses);
            }
        }
    }
    fflush(stdout);
    lattice_caches_info_free(ci, nc);
    cli_source_close(&src);
    return 0;
}

static long num(json_t *o, const char *k) { return (long)json_integer_value(json_object_get(o, k)); }

/* The text form of lattice_shapes_partitions' JSON j of pi. */
static void print_partitions(const lattice_partitions_info *pi, json_t *j, bool detail)
{
    json_t *bal = json_object_get(j, "balance"), *parts = json_object_get(j, "partitions"), *x;
    size_t i;
    printf("cache %s, topology %llu.%llu, %u partitions, %ld lost, %ld under-replicated (copies wanted %u)\n",
           pi->cache, (unsigned long long)pi->major, (unsigned long long)pi->minor, pi->partitions, num(j, "lost"),
           num(j, "under_replicated"), pi->copies_wanted);
    printf("  %-21s %9s %9s\n", "NODE", "PRIMARIES", "BACKUPS");
    json_array_foreach(json_object_get(j, "nodes"), i, x)
        printf("  %-21s %9ld %9ld\n", json_string_value(json_object_get(x, "consistent_id")), num(x, "primaries"),
               num(x, "backups"));
    /* The partitions that need attention, at most 20 unless --detail. */
    unsigned shown = 0;
    for (uint32_t p = 0; p < pi->partitions; p++) {
        const char *red = json_string_value(json_object_get(json_array_get(parts, p), "redundancy"));
        if (!detail && (!strcmp(red, "full") || ++shown > 20)) continue;
        printf("  %5u:", p);
        if (!pi->n_owners[p] || !pi->owners[(size_t)p * pi->max_owners].primary) printf(" LOST");
        for (uint32_t k = 0; k < pi->n_owners[p]; k++) {
            lattice_partition_owner *o = &pi->owners[(size_t)p * pi->max_owners + k];
            printf(" %s(%s,%s)", o->consistent_id, o->primary ? "primary" : "backup", o->state);
        }
        putchar('\n');
    }
    if (!detail && shown > 20) printf("  ... %u more lost or under-replicated (--detail lists every partition)\n", shown - 20);
    printf("balance: primaries per node min %ld avg %.1f max %ld over %ld nodes\n", num(bal, "primary_min"),
           json_real_value(json_object_get(bal, "primary_avg")), num(bal, "primary_max"), num(bal, "nodes"));
}

int cli_partitions(cli_globals *g, int argc, char **argv)
{
    if (cli_wants_help(argc, argv)) {
        puts("usage: lattice [GLOBAL OPTIONS] partitions CACHE [--detail]\n  a summary: partitions lost and "
             "under-replicated, primaries and backups per node, balance (min/avg/max primaries);\n  --detail (and "
             "--json) also every partition's owners (primary first) with their state");
        return 0;
    }
    bool detail = argc == 3 && !strcmp(argv[2], "--detail");
    if (argc != 2 && !detail) {
        fprintf(stderr, "usage: lattice [GLOBAL OPTIONS] partitions CACHE [--detail]\n");
        return 2;
    }
    cli_source src;
    if (cli_source_open(g, "partitions", &src)) return 1;
    lattice_partitions_info *pi = NULL;
    lattice_status st = cli_source_partitions(g, &src, argv[1], &pi);
    cli_source_close(&src);
    if (st != LATTICE_OK) {
        if (st == LATTICE_ERR_NO_CACHE)
            fprintf(stderr, "lattice partitions: no cache named '%s' (lattice caches lists them)\n", argv[1]);
        else
            fprintf(stderr, "lattice partitions %s: %s\n", argv[1], lattice_strerror(st));
        return 1;
    }
    json_t *j = lattice_shapes_partitions(pi);
    if (!j) {
        fprintf(stderr, "lattice partitions %s: %s\n", argv[1], lattice_strerror(LATTICE_ERR_NOMEM));
        lattice_partitions_info_free(pi);
        return 1;
    }
    if (g->json) {
        cli_print_json(j);
    } else {
        print_partitions(pi, j, detail);
        json_decref(j);
    }
    fflush(stdout);
    lattice_partitions_info_free(pi);
    return 0;
}
