/*
 * lattice top: attach as a client node, wait for the topology and for every
 * node's latest heartbeat stats, print the table (or the JSON of
 * docs/OPERATIONS.md),
 * then detach with a graceful leave.
 */
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "lattice/alloc.h"
#include "lattice/clock.h"

lattice_node *cli_attach(cli_globals *g)
{
    lattice_node *n;
    lattice_status st = lattice_node_start(&g->node, &n);
    if (st != LATTICE_OK) {
        fprintf(stderr, "lattice: cannot start a client node: %s\n", lattice_strerror(st));
        return NULL;
    }
    lattice_status st2 = lattice_node_wait_joined(n, g->timeout_ms);
    if (st2 != LATTICE_OK && st2 != LATTICE_ERR_TIMEOUT) {
        fprintf(stderr, "lattice: the grid refused this client: %s%s\n", lattice_strerror(st2),
                st2 == LATTICE_ERR_AUTH ? " (check --secret-file)" : st2 == LATTICE_ERR_CLUSTER ? " (check --cluster)" : "");
        lattice_node_stop(n);
        return NULL;
    }
    if (st2 != LATTICE_OK) {
        fprintf(stderr, "lattice: no grid of cluster '%s' answered within %d ms (finders:", g->node.cluster,
                g->timeout_ms);
        for (size_t i = 0; i < g->node.n_finders; i++) fprintf(stderr, " %s", g->node.finders[i]);
        fprintf(stderr, ")%s\n", g->node.secret_file ? "" : "; does the grid need --secret-file?");
        lattice_node_stop(n);
        return NULL;
    }
    return n;
}

/* Every node heartbeats to a new member at once; wait (bounded) until the
 * stats of every member of one snapshot are in, and return that snapshot
 * (a reference): printing a newer one could list nodes not heard yet. */
static lattice_topology *wait_stats(lattice_node *n, int budget_ms)
{
    uint64_t until = lt_mono_ms() + (uint64_t)budget_ms;
    for (;;) {
        lattice_topology *t = lattice_node_topology(n);
        if (!t) return NULL;
        bool all = true;
        lattice_node_stats s;
        for (size_t i = 0; i < lattice_topology_size(t) && all; i++)
            all = lattice_node_stats_of(n, lattice_topology_member(t, i)->id, &s) == LATTICE_OK;
        if (all || lt_mono_ms() >= until) return t;
        lattice_topology_release(t);
        usleep(20000);
    }
}

/* Partitions and entries a server holds over every cache (primary + backup
 * copies), from one stats request per server; NULL info: not available. */
typedef struct held {
    lattice_cache_info *ci;
    size_t n;
} held;

static bool held_of(const held *h, const char *id, uint64_t *parts, uint64_t *entries)
{
    *parts = *entries = 0;
    bool found = false;
    for (size_t i = 0; h && i < h->n; i++)
        for (size_t k = 0; k < h->ci[i].n_nodes; k++) {
            const lattice_cache_node_info *x = &h->ci[i].nodes[k];
            if (strcmp(x->id, id) != 0) continue;
            found = true;
            *parts += (uint64_t)x->primary_partitions + x->backup_partitions;
            *entries += x->primary_entries + x->backup_entries;
        }
    return found;
}

static held held_info;

static const char *role_name(int r) { return r == LATTICE_ROLE_CLIENT ? "client" : "server"; }

static json_t *node_json(lattice_node *n, const lattice_member *m, const char *self)
{
    lattice_node_stats s;
    bool have = lattice_node_stats_of(n, m->id, &s) == LATTICE_OK;
    uint64_t now = lt_wall_ms();
    json_t *o = json_pack("{s:s, s:s, s:I, s:s, s:s, s:s, s:I, s:b}", "id", m->id, "consistent_id", m->consistent_id,
                          "order", (json_int_t)m->order, "role", role_name(m->role), "addr", m->addr, "host", m->host,
                          "uptime_ms", (json_int_t)(have ? s.uptime_ms : now > m->start_time_ms ? now - m->start_time_ms : 0),
                          "self", strcmp(m->id, self) == 0);
    uint64_t parts, entries;
    if (held_of(&held_info, m->id, &parts, &entries)) {
        json_object_set_new(o, "partitions", json_integer((json_int_t)parts));
        json_object_set_new(o, "entries", json_integer((json_int_t)entries));
    }
    json_t *attrs = json_object();
    for (size_t i = 0; i < m->n_attrs; i++) json_object_set_new(attrs, m->attrs[i].key, json_string(m->attrs[i].value));
    json_object_set_new(o, "attrs", attrs);
    if (have) {
        json_object_set_new(o, "cpu_load", json_real(s.cpu_load));
        json_object_set_new(o, "memory_rss_bytes", json_integer((json_int_t)s.rss_bytes));
        json_object_set_new(o, "dropped",
                            json_pack("{s:I, s:I, s:I, s:I, s:I, s:I}", "malformed", (json_int_t)s.malformed,
                                      "oversized", (json_int_t)s.oversized, "auth_failed", (json_int_t)s.auth_failed,
                                      "refused", (json_int_t)s.refused, "handshake_failed",
                                      (json_int_t)s.handshake_failed, "frames_in", (json_int_t)s.frames_in));
    }
    return o;
}

static void print_json(lattice_node *n, const lattice_topology *t, const char *self)
{
    json_t *nodes = json_array();
    for (size_t i = 0; i < lattice_topology_size(t); i++)
        json_array_append_new(nodes, node_json(n, lattice_topology_member(t, i), self));
    json_t *root = json_pack("{s:[I,I], s:s, s:s, s:o}", "topology_version", (json_int_t)lattice_topology_major(t),
                             (json_int_t)lattice_topology_minor(t), "coordinator", lattice_topology_coordinator(t),
                             "self", self, "nodes", nodes);
    json_object_set_new(root, "quorum", cli_quorum_json(t));
    cli_print_json(root);
}

static void fmt_uptime(uint64_t ms, char *b, size_t n)
{
    uint64_t s = ms / 1000;
    if (s >= 86400) snprintf(b, n, "%llud%02llu:%02llu", (unsigned long long)(s / 86400), (unsigned long long)(s % 86400 / 3600), (unsigned long long)(s % 3600 / 60));
    else snprintf(b, n, "%02llu:%02llu:%02llu", (unsigned long long)(s / 3600), (unsigned long long)(s % 3600 / 60), (unsigned long long)(s % 60));
}

static void print_table(lattice_node *n, const lattice_topology *t, const char *self)
{
    size_t servers = 0, sz = lattice_topology_size(t);
    for (size_t i = 0; i < sz; i++) servers += lattice_topology_member(t, i)->role == LATTICE_ROLE_SERVER;
    printf("Topology %llu.%llu   coordinator %.8s   %zu node%s (%zu server%s, %zu client%s)\n",
           (unsigned long long)lattice_topology_major(t), (unsigned long long)lattice_topology_minor(t),
           lattice_topology_coordinator(t), sz, sz == 1 ? "" : "s", servers, servers == 1 ? "" : "s",
           sz - servers, sz - servers == 1 ? "" : "s");
    cli_quorum_line(t);
    printf("\n%-9s %-21s %5s %-6s %-27s %-15s %9s %6s %10s %6s %10s\n", "ID8", "CONSISTENT ID", "ORDER", "ROLE",
           "ADDRESS", "HOST", "UPTIME", "CPU", "MEMORY", "PARTS", "ENTRIES");
    for (size_t i = 0; i < sz; i++) {
        const lattice_member *m = lattice_topology_member(t, i);
        lattice_node_stats s;
        bool have = lattice_node_stats_of(n, m->id, &s) == LATTICE_OK;
        char up[32], cpu[16] = "-", mem[16] = "-";
        uint64_t now = lt_wall_ms();
        fmt_uptime(have ? s.uptime_ms : now > m->start_time_ms ? now - m->start_time_ms : 0, up, sizeof up);
        if (have) {
            snprintf(cpu, sizeof cpu, "%.1f%%", s.cpu_load * 100.0);
            snprintf(mem, sizeof mem, "%.1f MiB", (double)s.rss_bytes / (1024.0 * 1024.0));
        }
        char parts_s[24] = "-", entries_s[24] = "-";
        uint64_t parts, entries;
        if (held_of(&held_info, m->id, &parts, &entries)) {
            snprintf(parts_s, sizeof parts_s, "%llu", (unsigned long long)parts);
            snprintf(entries_s, sizeof entries_s, "%llu", (unsigned long long)entries);
        }
        printf("%-8.8s%s %-21s %5llu %-6s %-27s %-15s %9s %6s %10s %6s %10s\n", m->id, strcmp(m->id, self) ? " " : "*",
               m->consistent_id, (unsigned long long)m->order, role_name(m->role), m->addr, m->host, up, cpu, mem,
               parts_s, entries_s);
    }
    printf("\n(* = this lattice command, attached as a client; it leaves when done)\n");
}

int cli_top(cli_globals *g, int argc, char **argv)
{
    if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        puts("usage: lattice [GLOBAL OPTIONS] top [--json]\n"
             "Attach as a client node and show the topology version, the coordinator and every node:\n"
             "id (8 chars), consistent id, order, role, address, host, uptime, CPU load, memory (RSS),\n"
             "partitions and entries held over every cache (primary + backup copies).\n"
             "With --json: {\"topology_version\":[major,minor], \"coordinator\":ID, \"self\":ID,\n"
             "  \"nodes\":[{\"id\",\"consistent_id\",\"order\",\"role\",\"addr\",\"host\",\"uptime_ms\",\n"
             "  \"cpu_load\",\"memory_rss_bytes\",\"partitions\",\"entries\",\"dropped\":{...},\"attrs\":{...},\"self\"}],\n"
             "  \"quorum\":{\"baseline_version\",\"baseline_nodes\",\"baseline_in_topology\",\"has_quorum\"}}");
        return 0;
    }
    /* --json is global (before the command) but accepted here too. */
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json")) {
            g->json = true;
            continue;
        }
        fprintf(stderr, "lattice top: unexpected argument '%s' (see lattice top --help)\n", argv[i]);
        return 2;
    }
    lattice_node *n = cli_attach(g);
    if (!n) return 1;
    lattice_topology *t = wait_stats(n, 3000);
    if (lattice_caches_info(n, &held_info.ci, &held_info.n) != LATTICE_OK) held_info.ci = NULL, held_info.n = 0;
    char self[64];
    lattice_node_id(n, self, sizeof self);
    if (!t) {
        fprintf(stderr, "lattice top: lost the grid while reading it\n");
        lattice_node_stop(n);
        return 1;
    }
    if (g->json) print_json(n, t, self);
    else print_table(n, t, self);
    fflush(stdout);
    lattice_caches_info_free(held_info.ci, held_info.n);
    lattice_topology_release(t);
    lattice_node_stop(n);
    return 0;
}
