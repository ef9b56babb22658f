/*
 * lattice cache create|destroy, lattice caches, lattice partitions CACHE
 * (JSON shapes: docs/CACHES.md).
 */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "lattice/alloc.h"
#include "lattice/cache_spec.h"

int cli_cache(cli_globals *g, int argc, char **argv)
{
    static const char use[] = "usage: lattice [GLOBAL OPTIONS] cache create NAME [k=v ...]\n"
                              "       lattice [GLOBAL OPTIONS] cache destroy NAME\n"
                              "  keys: mode=partitioned|replicated partitions=N backups=N sync=full_sync|primary_sync|full_async\n"
                              "        read_from_backup=true|false expiry_ms=N max_key_bytes=N max_value_bytes=N ...\n";
    if (cli_wants_help(argc, argv)) {
        fputs(use, stdout);
        return 0;
    }
    bool create = argc >= 3 && !strcmp(argv[1], "create");
    bool destroy = argc == 3 && !strcmp(argv[1], "destroy");
    if (!create && !destroy) {
        fputs(use, stderr);
        return 2;
    }
    char spec[LATTICE_CACHE_SPEC_MAX];
    if (create) {
        char err[256];
        if (lattice_cache_spec_from_args(argv[2], argc - 3, (const char *const *)argv + 3, spec, sizeof spec, err,
                                         sizeof err) != LATTICE_OK) {
            fprintf(stderr, "lattice cache create: %s\n", err);
            return 2;
        }
    }
    lattice_node *n = cli_attach(g);
    if (!n) return 1;
    lattice_status st = create ? lattice_cache_create(n, spec) : lattice_cache_destroy(n, argv[2]);
    if (g->json) {
        json_t *o = json_pack("{s:s, s:s, s:b}", "op", argv[1], "cache", argv[2], "ok", st == LATTICE_OK);
        if (st != LATTICE_OK) json_object_set_new(o, "error", json_string(lattice_strerror(st)));
        cli_print_json(o);
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
    lattice_node *n = cli_attach(g);
    if (!n) return 1;
    lattice_cache_info *ci = NULL;
    size_t nc = 0;
    lattice_status st = lattice_caches_info(n, &ci, &nc);
    if (st != LATTICE_OK) {
        fprintf(stderr, "lattice caches: %s\n", lattice_strerror(st));
        lattice_node_stop(n);
        return 1;
    }
    if (g->json) {
        json_t *arr = json_array();
        for (size_t i = 0; i < nc; i++) {
            json_t *nodes = json_array();
            for (size_t k = 0; k < ci[i].n_nodes; k++) {
                lattice_cache_node_info *x = &ci[i].nodes[k];
                json_array_append_new(nodes, json_pack("{s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "id", x->id,
                                                       "primary_entries", (json_int_t)x->primary_entries,
                                                       "backup_entries", (json_int_t)x->backup_entries,
                                                       "primary_partitions", (json_int_t)x->primary_partitions,
                                                       "backup_partitions", (json_int_t)x->backup_partitions, "reads",
                                                       (json_int_t)x->reads, "writes", (json_int_t)x->writes, "hits",
                                                       (json_int_t)x->hits, "misses", (json_int_t)x->misses));
                json_t *last = json_array_get(nodes, json_array_size(nodes) - 1);
                json_object_set_new(last, "moving_partitions", json_integer((json_int_t)x->moving_partitions));
                json_object_set_new(last, "evictions", json_integer((json_int_t)x->evictions));
                json_object_set_new(last, "moving_entries", json_integer((json_int_t)x->moving_entries));
            }
            json_array_append_new(arr, json_pack("{s:s, s:s, s:I, s:I, s:s, s:b, s:I, s:s, s:o}", "name", ci[i].name,
                                                 "mode", ci[i].mode, "partitions", (json_int_t)ci[i].partitions,
                                                 "backups", (json_int_t)ci[i].backups, "sync", ci[i].sync,
                                                 "read_from_backup", ci[i].read_from_backup, "size",
                                                 (json_int_t)ci[i].size, "spec", ci[i].spec, "nodes", nodes));
        }
        cli_print_json(json_pack("{s:o}", "caches", arr));
    } else {
        for (size_t i = 0; i < nc; i++) {
            printf("cache %s: %s, %u partitions, backups %u, %s, size %llu\n", ci[i].name, ci[i].mode,
                   ci[i].partitions, ci[i].backups, ci[i].sync, (unsigned long long)ci[i].size);
            printf("  %-38s %10s %10s %6s %6s %6s %10s %10s %10s %10s\n", "node", "primary", "backup", "p.prt", "b.prt",
                   "moving", "reads", "writes", "hits", "misses");
            for (size_t k = 0; k < ci[i].n_nodes; k++) {
                lattice_cache_node_info *x = &ci[i].nodes[k];
                printf("  %-38s %10llu %10llu %6u %6u %6u %10llu %10llu %10llu %10llu\n", x->id,
                       (unsigned long long)x->primary_entries, (unsigned long long)x->backup_entries,
                       x->primary_partitions, x->backup_partitions, x->moving_partitions, (unsigned long long)x->reads,
                       (unsigned long long)x->writes, (unsigned long long)x->hits, (unsigned long long)x->misses);
            }
        }
    }
    fflush(stdout);
    lattice_caches_info_free(ci, nc);
    lattice_node_stop(n);
    return 0;
}

int cli_partitions(cli_globals *g, int argc, char **argv)
{
    if (cli_wants_help(argc, argv)) {
        puts("usage: lattice [GLOBAL OPTIONS] partitions CACHE\n  each partition's owners (primary first) with "
             "their state; a partition with no live owner is LOST;\n  balance: min/avg/max primaries per node");
        return 0;
    }
    if (argc != 2) {
        fprintf(stderr, "usage: lattice [GLOBAL OPTIONS] partitions CACHE\n");
        return 2;
    }
    lattice_node *n = cli_attach(g);
    if (!n) return 1;
    lattice_partitions_info *pi = NULL;
    lattice_status st = lattice_cache_partitions(n, argv[1], &pi);
    if (st != LATTICE_OK) {
        fprintf(stderr, "lattice partitions: %s\n", lattice_strerror(st));
        lattice_node_stop(n);
        return 1;
    }
    /* primaries per node, for the balance summary */
    json_t *count = json_object();
    uint32_t lost = 0, under = 0;
    json_t *parts = json_array();
    for (uint32_t p = 0; p < pi->partitions; p++) {
        json_t *owners = json_array();
        bool owning = pi->n_owners[p] && pi->owners[(size_t)p * pi->max_owners].primary;
        if (!owning) lost++;
        for (uint32_t i = 0; i < pi->n_owners[p]; i++) {
            lattice_partition_owner *o = &pi->owners[(size_t)p * pi->max_owners + i];
            json_array_append_new(owners, json_pack("{s:s, s:s, s:s, s:s}", "node", o->node, "consistent_id",
                                                    o->consistent_id, "role", o->primary ? "primary" : "backup",
                                                    "state", o->state));
            if (o->primary) {
                json_t *c = json_object_get(count, o->node);
                json_object_set_new(count, o->node, json_integer(c ? json_integer_value(c) + 1 : 1));
            }
        }
        uint32_t serving = 0;
        for (uint32_t i = 0; i < pi->n_owners[p]; i++)
            serving += !strcmp(pi->owners[(size_t)p * pi->max_owners + i].state, "OWNING");
        const char *red = !owning ? "lost" : serving < pi->copies_wanted ? "under" : "full";
        if (owning && serving < pi->copies_wanted) under++;
        json_array_append_new(parts, json_pack("{s:I, s:o, s:s, s:s}", "id", (json_int_t)p, "owners", owners, "state",
                                               owning ? "OWNING" : "LOST", "redundancy", red));
    }
    long mn = -1, mx = 0, sum = 0, nn = 0;
    const char *k;
    json_t *v;
    json_object_foreach(count, k, v)
    {
        long x = (long)json_integer_value(v);
        mn = mn < 0 || x < mn ? x : mn;
        mx = x > mx ? x : mx;
        sum += x;
        nn++;
    }
    double avg = nn ? (double)sum / (double)nn : 0;
    if (g->json) {
        cli_print_json(json_pack("{s:s, s:[I,I], s:o, s:{s:I, s:f, s:I, s:I}, s:I, s:I, s:I}", "cache", pi->cache,
                             "topology_version", (json_int_t)pi->major, (json_int_t)pi->minor, "partitions", parts,
                             "balance", "primary_min", (json_int_t)(mn < 0 ? 0 : mn), "primary_avg", avg,
                             "primary_max", (json_int_t)mx, "nodes", (json_int_t)nn, "lost", (json_int_t)lost,
                             "under_replicated", (json_int_t)under, "copies_wanted", (json_int_t)pi->copies_wanted));
    } else {
        printf("cache %s, topology %llu.%llu, %u partitions, %u lost, %u under-replicated (copies wanted %u)\n",
               pi->cache, (unsigned long long)pi->major, (unsigned long long)pi->minor, pi->partitions, lost, under,
               pi->copies_wanted);
        for (uint32_t p = 0; p < pi->partitions; p++) {
            printf("  %5u:", p);
            if (!pi->n_owners[p] || !pi->owners[(size_t)p * pi->max_owners].primary) printf(" LOST");
            for (uint32_t i = 0; i < pi->n_owners[p]; i++) {
                lattice_partition_owner *o = &pi->owners[(size_t)p * pi->max_owners + i];
                printf(" %s(%s,%s)", o->consistent_id, o->primary ? "primary" : "backup", o->state);
            }
            putchar('\n');
        }
        printf("balance: primaries per node min %ld avg %.1f max %ld over %ld nodes\n", mn < 0 ? 0 : mn, avg, mx, nn);
        json_decref(parts);
    }
    json_decref(count);
    fflush(stdout);
    lattice_partitions_info_free(pi);
    lattice_node_stop(n);
    return 0;
}
