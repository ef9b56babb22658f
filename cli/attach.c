/*
 * Attaching to the grid: as a client node (commands that read or write
 * caches), or by inspection (top: no join, the topology version stays).
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"

static void print_finders(const cli_globals *g)
{
    for (size_t i = 0; i < g->node.n_finders; i++) fprintf(stderr, " %s", g->node.finders[i]);
}

void cli_explain(const cli_globals *g, const char *what, lattice_status st)
{
    if (st == LATTICE_ERR_AUTH)
        fprintf(stderr, "lattice: %s: the grid refused the cluster secret (check --secret-file%s)\n", what,
                g->node.secret_file ? "" : "; the grid uses one and none was given");
    else if (st == LATTICE_ERR_CLUSTER)
        fprintf(stderr, "lattice: %s: the nodes there belong to another cluster than '%s' (check --cluster)\n", what,
                g->node.cluster);
    else if (st == LATTICE_ERR_PROTO)
        fprintf(stderr, "lattice: %s: the grid speaks another protocol version (upgrade lattice or latticed)\n", what);
    else if (st == LATTICE_ERR_TIMEOUT) {
        fprintf(stderr, "lattice: %s: no grid of cluster '%s' answered within %d ms (finders:", what, g->node.cluster,
                g->timeout_ms);
        print_finders(g);
        fprintf(stderr, ")\n");
    } else
        fprintf(stderr, "lattice: %s: %s\n", what, lattice_strerror(st));
}

lattice_node *cli_attach(cli_globals *g)
{
    lattice_node *n;
    lattice_status st = lattice_node_start(&g->node, &n);
    if (st != LATTICE_OK) {
        cli_explain(g, "cannot start a client node", st);
        return NULL;
    }
    st = lattice_node_wait_joined(n, g->timeout_ms);
    if (st != LATTICE_OK) {
        cli_explain(g, "cannot attach", st);
        lattice_node_stop(n);
        return NULL;
    }
    return n;
}
