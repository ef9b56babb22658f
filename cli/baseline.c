/*
 * lattice baseline [show] | set|add|remove [--force] CONSISTENT_ID...: the
 * baseline topology (the servers that count for quorum) and changes to it,
 * which the coordinator makes (docs/OPERATIONS.md, "Network partitions and
 * the baseline").  Also the quorum summary `lattice top` prints.
 */
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "http/shapes.h"

/* The baseline member's server in t, NULL when it is not in the topology. */
static const lattice_member *online(const lattice_topology *t, const char *cid)
{
    for (size_t i = 0; i < lattice_topology_size(t); i++) {
        const lattice_member *m = lattice_topology_member(t, i);
        if (m->role == LATTICE_ROLE_SERVER && strcmp(m->consistent_id, cid) == 0) return m;
    }
    return NULL;
}

void cli_quorum_line(const lattice_topology *t)
{
    size_t size = lattice_topology_baseline_size(t), p = lattice_shapes_baseline_present(t);
    printf("Quorum %s: %zu of %zu baseline nodes in this topology (baseline version %llu)\n",
           p > size / 2 ? "held" : "LOST - this side refuses every operation", p, size,
           (unsigned long long)lattice_topology_baseline_version(t));
}

static void show(const lattice_topology *t, bool json)
{
    size_t size = lattice_topology_baseline_size(t);
    if (json) {
        json_t *nodes = json_array(), *others = json_array();
        for (size_t i = 0; i < size; i++) {
            const char *cid = lattice_topology_baseline_at(t, i);
            const lattice_member *m = online(t, cid);
            json_t *o = json_pack("{s:s, s:b}", "consistent_id", cid, "online", m != NULL);
            if (m) json_object_set_new(o, "id", json_string(m->id));
            json_array_append_new(nodes, o);
        }
        for (size_t i = 0; i < lattice_topology_size(t); i++) {
            const lattice_member *m = lattice_topology_member(t, i);
            bool in = false;
            for (size_t k = 0; k < size && !in; k++) in = !strcmp(lattice_topology_baseline_at(t, k), m->consistent_id);
            if (m->role == LATTICE_ROLE_SERVER && !in) json_array_append_new(others, json_string(m->consistent_id));
        }
        json_t *root = lattice_shapes_quorum(t);
        json_object_set_new(root, "baseline", nodes);
        json_object_set_new(root, "servers_not_in_baseline", others);
        cli_print_json(root);
        return;
    }
    cli_quorum_line(t);
    printf("\n%-24s %-8s %s\n", "CONSISTENT ID", "STATE", "NODE ID");
    for (size_t i = 0; i < size; i++) {
        const char *cid = lattice_topology_baseline_at(t, i);
        const lattice_member *m = online(t, cid);
        printf("%-24s %-8s %s\n", cid, m ? "online" : "offline", m ? m->id : "-");
    }
    for (size_t i = 0; i < lattice_topology_size(t); i++) {
        const lattice_member *m = lattice_topology_member(t, i);
        bool in = false;
        for (size_t k = 0; k < size && !in; k++) in = !strcmp(lattice_topology_baseline_at(t, k), m->consistent_id);
        if (m->role == LATTICE_ROLE_SERVER && !in) printf("%-24s %-8s %s\n", m->consistent_id, "joining", m->id);
    }
}

static int usage(FILE *f)
{
    fputs("usage: lattice [GLOBAL OPTIONS] baseline [show]\n"
          "       lattice [GLOBAL OPTIONS] baseline set|add|remove [--force] CONSISTENT_ID...\n"
          "The baseline topology: the servers (by consistent id, host:port) whose strict majority a side\n"
          "of the grid must reach to serve.  show: each member online or offline and the quorum.\n"
          "set/add name servers of the topology; remove names baseline members (a server retired for\n"
          "good).  Without quorum the coordinator refuses a change unless --force: force only when the\n"
          "missing servers are gone for good - forced on a cut-off side, both sides could serve.\n"
          "With --json, show prints {\"baseline_version\",\"baseline_nodes\",\"baseline_in_topology\",\n"
          "\"has_quorum\",\"baseline\":[{\"consistent_id\",\"online\",\"id\"}],\"servers_not_in_baseline\"}.\n",
          f);
    return f == stdout ? 0 : 2;
}

int cli_baseline(cli_globals *g, int argc, char **argv)
{
    if (cli_wants_help(argc, argv)) return usage(stdout);
    int op = 0, first = 2;
    bool force = false;
    const char *verb = argc > 1 ? argv[1] : "show";
    if (!strcmp(verb, "set")) op = LATTICE_BASELINE_SET;
    else if (!strcmp(verb, "add")) op = LATTICE_BASELINE_ADD;
    else if (!strcmp(verb, "remove")) op = LATTICE_BASELINE_REMOVE;
    else if (strcmp(verb, "show") != 0) return usage(stderr);
    if (argc > first && !strcmp(argv[first], "--force")) {
        force = true;
        first++;
    }
    if (op && argc <= first) return usage(stderr);
    if (!op && argc > 2) return usage(stderr);
    if (!op) { /* show: the topology an inspection gives carries the baseline */
        cli_source src;
        if (cli_source_open(g, "baseline", &src)) return 1;
        show(src.t, g->json);
        fflush(stdout);
        cli_source_close(&src);
        return 0;
    }
    lattice_node *n = cli_attach(g); /* a change: the coordinator answers members */
    if (!n) return 1;
    int rc = 0;
    uint64_t version = 0;
    char why[256];
    lattice_status st = lattice_node_baseline_change(n, op, (const char *const *)argv + first, (size_t)(argc - first),
                                                     force, g->timeout_ms, &version, why, sizeof why);
    if (st != LATTICE_OK) {
        fprintf(stderr, "lattice baseline %s: %s%s%s\n", verb, lattice_strerror(st), why[0] ? ": " : "", why);
        rc = 1;
    } else if (!g->json) {
        printf("baseline version %llu\n", (unsigned long long)version);
    }
    lattice_topology *t = rc == 0 ? lattice_node_topology(n) : NULL;
    /* The answer and the announcement travel apart: show the view that
     * holds the change (bounded: the change is made either way). */
    for (int i = 0; t && lattice_topology_baseline_version(t) < version && i < 100; i++) {
        lattice_topology_release(t);
        usleep(20000);
        t = lattice_node_topology(n);
    }
    if (t) {
        if (!g->json) show(t, false);
        else cli_print_json(lattice_shapes_quorum(t));
        lattice_topology_release(t);
    }
    lattice_node_stop(n);
    return rc;
}
