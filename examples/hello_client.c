/*
 * hello_client: an application that attaches to a Lattice grid as a client
 * node, stores hello = world in the cache "default", reads it back and
 * prints how many servers the grid has.
 *
 *     cc hello_client.c $(pkg-config --cflags --libs lattice) -o hello_client
 *     ./hello_client 127.0.0.1:47500..47509 lattice
 *
 * A client node is a member of the topology with role client: it holds no
 * data, and sends each operation straight to the key's primary.
 */
#include <stdio.h>
#include <string.h>

#include <lattice/alloc.h>
#include <lattice/lattice.h>

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s IP_FINDER CLUSTER   (e.g. 127.0.0.1:47500..47509 lattice)\n", argv[0]);
        return 2;
    }
    lattice_config c;
    lattice_config_init(&c);
    c.cluster = argv[2];
    c.finders[c.n_finders++] = argv[1];
    c.client = true;
    c.port = 0; /* any free peer port: never take a server's */
    lattice_node *n;
    lattice_status st = lattice_node_start(&c, &n);
    if (st != LATTICE_OK) {
        fprintf(stderr, "hello_client: cannot start a client node: %s\n", lattice_strerror(st));
        return 1;
    }
    st = lattice_node_wait_joined(n, 10000);
    if (st != LATTICE_OK) {
        fprintf(stderr, "hello_client: no grid of cluster '%s' at %s: %s\n", argv[2], argv[1], lattice_strerror(st));
        lattice_node_stop(n);
        return 1;
    }
    int rc = 1;
    void *v = NULL;
    size_t vl = 0;
    if ((st = lattice_cache_put(n, "default", "hello", 5, "world", 5)) != LATTICE_OK)
        fprintf(stderr, "hello_client: put: %s\n", lattice_strerror(st));
    else if ((st = lattice_cache_get(n, "default", "hello", 5, &v, &vl)) != LATTICE_OK)
        fprintf(stderr, "hello_client: get: %s\n", lattice_strerror(st));
    else {
        printf("hello = %.*s\n", (int)vl, (const char *)v);
        lt_free(v);
        rc = 0;
    }
    lattice_topology *t = lattice_node_topology(n);
    size_t servers = 0;
    for (size_t i = 0; t && i < lattice_topology_size(t); i++)
        servers += lattice_topology_member(t, i)->role == LATTICE_ROLE_SERVER;
    if (t) lattice_topology_release(t);
    printf("servers: %zu\n", servers);
    lattice_node_stop(n);
    return rc;
}
