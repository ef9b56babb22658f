/*
 * Attaching to the grid: as a client node (commands that write: get/put/
 * del, cache, bench, baseline changes), or by inspection (top, caches,
 * partitions, rebalance, verify, baseline show: no join, so the topology
 * version stays where it is).  With a multicast finder there is no address
 * to inspect, and those commands attach as a client node instead.
 */
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

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
    else if (st == LATTICE_ERR_INVAL) {
        fprintf(stderr, "lattice: %s: bad finder or --host (finders:", what);
        print_finders(g);
        fprintf(stderr, "; want HOST[:PORT[..PORT]][,...], multicast://GROUP[:PORT] or dns://NAME[:PORT])\n");
    } else if (st == LATTICE_ERR_PROTO)
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

int cli_source_open(cli_globals *g, const char *what, cli_source *s)
{
    memset(s, 0, sizeof *s);
    lattice_status st = lattice_inspect(&g->node, g->timeout_ms, &s->x);
    if (st == LATTICE_OK) {
        s->t = lattice_inspection_topology(s->x);
        return 0;
    }
    if (st != LATTICE_ERR_UNSUPPORTED) {
        cli_explain(g, what, st);
        return 1;
    }
    s->n = cli_attach(g);
    if (!s->n) return 1;
    s->t = s->held = lattice_node_topology(s->n);
    if (!s->t) {
        fprintf(stderr, "lattice %s: lost the grid while reading it\n", what);
        cli_source_close(s);
        return 1;
    }
    return 0;
}

int cli_source_refresh(cli_globals *g, const char *what, cli_source *s)
{
    if (s->n) {
        lattice_topology *t = lattice_node_topology(s->n);
        if (!t) return 0; /* between views: keep the last one */
        lattice_topology_release(s->held);
        s->t = s->held = t;
        return 0;
    }
    lattice_inspection *x = NULL;
    lattice_status st = lattice_inspect(&g->node, g->timeout_ms, &x);
    if (st != LATTICE_OK) {
        cli_explain(g, what, st);
        return 1;
    }
    lattice_inspection_free(s->x);
    s->x = x;
    s->t = lattice_inspection_topology(x);
    return 0;
}

void cli_source_close(cli_source *s)
{
    lattice_inspection_free(s->x);
    if (s->held) lattice_topology_release(s->held);
    if (s->n) lattice_node_stop(s->n);
    memset(s, 0, sizeof *s);
}

lattice_status cli_source_caches(const cli_globals *g, cli_source *s, lattice_cache_info **ci, size_t *nc)
{
    return s->x ? lattice_inspect_caches_info(&g->node, s->x, g->timeout_ms, ci, nc) : lattice_caches_info(s->n, ci, nc);
}

lattice_status cli_source_partitions(const cli_globals *g, cli_source *s, const char *cache,
                                     lattice_partitions_info **pi)
{
    return s->x ? lattice_inspect_partitions(&g->node, s->x, cache, g->timeout_ms, pi)
                : lattice_cache_partitions(s->n, cache, pi);
}

lattice_status cli_source_digests(const cli_globals *g, cli_source *s, const char *cache,
                                  lattice_partition_digest **pd, size_t *nd)
{
    return s->x ? lattice_inspect_digests(&g->node, s->x, cache, g->timeout_ms, pd, nd)
                : lattice_cache_digests(s->n, cache, pd, nd);
}

/* The local address the kernel would use to reach the first finder's host:
 * a UDP socket connect()ed there sends nothing, but getsockname() names the
 * source address its route picks - 127.0.0.1 for a loopback grid, the
 * interface's address for a grid on another host or namespace.  Multicast
 * finders keep 127.0.0.1 (the group is reached through --host). */
static void pick(cli_globals *g);

void cli_pick_host(cli_globals *g)
{
    if (g->node.host) return;
    pick(g);
    if (!g->node.host) g->node.host = "127.0.0.1";
}

static void pick(cli_globals *g)
{
    static char local[INET_ADDRSTRLEN];
    if (!g->node.n_finders) return;
    const char *spec = g->node.finders[0];
    if (!strncmp(spec, "multicast://", 12)) return;
    if (!strncmp(spec, "dns://", 6)) spec += 6;
    char host[256];
    size_t n = strcspn(spec, ":,");
    if (n == 0 || n >= sizeof host) return;
    memcpy(host, spec, n);
    host[n] = 0;
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_DGRAM}, *ai = NULL;
    if (getaddrinfo(host, "47500", &hints, &ai) != 0 || !ai) return;
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in me;
    socklen_t len = sizeof me;
    if (fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) == 0 &&
        getsockname(fd, (struct sockaddr *)&me, &len) == 0 &&
        inet_ntop(AF_INET, &me.sin_addr, local, sizeof local))
        g->node.host = local;
    if (fd >= 0) close(fd);
    freeaddrinfo(ai);
}
