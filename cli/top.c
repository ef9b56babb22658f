/*
 * lattice top: the topology version, the coordinator and every node with its
 * state, from one member's answer to an inspection (lattice_inspect): the
 * CLI never joins, so the version does not move, and a grid that just lost
 * a node - even its coordinator - answers at once, the dead node listed as
 * "silent" until the grid removes it.  With a multicast finder (no address
 * to ask) top attaches as a client node instead.
 */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "http/shapes.h"
#include "lattice/clock.h"

static void member_state(const cli_source *v, const lattice_member *m, lattice_member_state *s)
{
    memset(s, 0, sizeof *s);
    lattice_status st = v->x ? lattice_inspection_member(v->x, m->id, s) : lattice_node_member_state(v->n, m->id, s);
    if (st != LATTICE_OK) {
        memset(s, 0, sizeof *s);
        s->state = "unknown";
    }
}

static const char *role_name(int r) { return r == LATTICE_ROLE_CLIENT ? "client" : "server"; }

static uint64_t uptime_of(const lattice_member *m, const lattice_member_state *s)
{
    uint64_t now = lt_wall_ms();
    return s->have_stats ? s->stats.uptime_ms : now > m->start_time_ms ? now - m->start_time_ms : 0;
}

static bool heard(void *ctx, const lattice_member *m, lattice_member_state *s)
{
    member_state(ctx, m, s);
    return true;
}

static void print_json(const cli_source *v)
{
    json_t *root = lattice_shapes_top(v->t, heard, (void *)v, lt_wall_ms());
    if (v->x) json_object_set_new(root, "answered_by", json_string(lattice_inspection_source(v->x)));
    cli_print_json(root);
}

static void fmt_uptime(uint64_t ms, char *b, size_t n)
{
    uint64_t s = ms / 1000;
    if (s >= 86400) snprintf(b, n, "%llud%02llu:%02llu", (unsigned long long)(s / 86400), (unsigned long long)(s % 86400 / 3600), (unsigned long long)(s % 3600 / 60));
    else snprintf(b, n, "%02llu:%02llu:%02llu", (unsigned long long)(s / 3600), (unsigned long long)(s % 3600 / 60), (unsigned long long)(s % 60));
}

static void print_table(const cli_source *v)
{
    const lattice_topology *t = v->t;
    size_t servers = 0, sz = lattice_topology_size(t);
    for (size_t i = 0; i < sz; i++) servers += lattice_topology_member(t, i)->role == LATTICE_ROLE_SERVER;
    const lattice_member *coord = lattice_topology_find(t, lattice_topology_coordinator(t));
    printf("Topology %llu.%llu   coordinator %s   %zu node%s (%zu server%s, %zu client%s)\n",
           (unsigned long long)lattice_topology_major(t), (unsigned long long)lattice_topology_minor(t),
           coord ? coord->consistent_id : lattice_topology_coordinator(t), sz, sz == 1 ? "" : "s", servers,
           servers == 1 ? "" : "s", sz - servers, sz - servers == 1 ? "" : "s");
    cli_quorum_line(t);
    printf("\n%-21s %-8s %-7s %5s %-6s %-15s %9s %6s %10s  %s\n", "NODE", "ID8", "STATE", "ORDER", "ROLE", "HOST",
           "UPTIME", "CPU", "MEMORY", "LAST HEARD");
    for (size_t i = 0; i < sz; i++) {
        const lattice_member *m = lattice_topology_member(t, i);
        lattice_member_state s;
        member_state(v, m, &s);
        char up[32], cpu[16] = "-", mem[16] = "-", heard[32];
        fmt_uptime(uptime_of(m, &s), up, sizeof up);
        if (s.have_stats) {
            snprintf(cpu, sizeof cpu, "%.1f%%", s.stats.cpu_load * 100.0);
            snprintf(mem, sizeof mem, "%.1f MiB", (double)s.stats.rss_bytes / (1024.0 * 1024.0));
        }
        snprintf(heard, sizeof heard, "%.1f s ago", (double)s.silent_ms / 1000.0);
        printf("%-21s %-8.8s %-7s %5llu %-6s %-15s %9s %6s %10s  %s\n", m->consistent_id, m->id, s.state,
               (unsigned long long)m->order, role_name(m->role), m->host, up, cpu, mem, heard);
    }
    if (v->x) printf("\n(answered by %s; partitions and entries per node: lattice caches)\n", lattice_inspection_source(v->x));
}

int cli_top(cli_globals *g, int argc, char **argv)
{
    if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        puts("usage: lattice [GLOBAL OPTIONS] top [--json]\n"
             "Ask the grid (without joining it: the topology version does not move) for the topology\n"
             "version, the coordinator and every node: consistent id (host:port, the name used\n"
             "everywhere), id, state (alive, silent: a heartbeat late, leaving), order, role, host, uptime,\n"
             "CPU load, memory (RSS) and when it was last heard.\n"
             "With --json: {\"topology_version\":[major,minor], \"coordinator\":ID, \"answered_by\":ADDR,\n"
             "  \"nodes\":[{\"id\",\"consistent_id\",\"order\",\"role\",\"addr\",\"host\",\"uptime_ms\",\"state\",\n"
             "  \"silent_ms\",\"cpu_load\",\"memory_rss_bytes\",\"dropped\":{...},\"attrs\":{...}}],\n"
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
    cli_source v;
    int rc = cli_source_open(g, "top", &v);
    if (rc) return rc;
    if (g->json) print_json(&v);
    else print_table(&v);
    fflush(stdout);
    cli_source_close(&v);
    return 0;
}
