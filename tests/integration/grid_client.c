#include "grid_client.h"

#include <check.h>
#include <stdbool.h>

#include "harness.h"

size_t servers_of(lattice_node *n)
{
    lattice_topology *t = lattice_node_topology(n);
    size_t s = 0;
    for (size_t i = 0; t && i < lattice_topology_size(t); i++)
        s += lattice_topology_member(t, i)->role == LATTICE_ROLE_SERVER;
    if (t) lattice_topology_release(t);
    return s;
}

typedef struct wait_servers {
    lattice_node *n;
    size_t want;
} wait_servers;

static bool has_servers(void *ctx)
{
    wait_servers *w = ctx;
    return servers_of(w->n) == w->want;
}

void wait_grid(lattice_node *n, size_t servers)
{
    wait_servers w = {n, servers};
    ck_assert_msg(it_wait_for(has_servers, &w, 20000), "grid never reached %zu servers", servers);
}
