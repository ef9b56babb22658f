/*
 * latticed: one Lattice node.  Parses flags and --config, starts the node
 * and, on a server with --resp-port, the RESP endpoint on it (resp/resp.h),
 * waits for SIGTERM/SIGINT (blocked in every thread, taken with sigwait),
 * then stops gracefully so the grid announces this node as `left`.
 *
 * Order: the RESP port is bound before the node starts, so the node joins
 * advertising "resp_port" (CLUSTER SLOTS reads it on every member) and a
 * port in use fails the start; RESP's IO threads end before the node stops
 * (they submit to it), and its memory goes after (op callbacks ran).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

#include "lattice/lattice.h"
#include "lattice/log.h"
#include "node.h"
#include "resp/resp.h"

/* The RESP endpoint's sockets, bound before the node: NULL on a client or
 * without --resp-port. */
static lattice_status resp_bind(latticed_options *o, lattice_respd **out)
{
    *out = NULL;
    if (!o->resp.port || o->node.client) return LATTICE_OK;
    o->resp.host = o->node.host;
    o->resp.maxmemory = (long long)(o->node.region_mb > 0 ? o->node.region_mb : LATTICE_DEFAULT_REGION_MB) << 20;
    o->resp.maxmemory_evicts = o->node.region_evict;
    lattice_status st = lattice_respd_bind(&o->resp, out);
    if (st == LATTICE_OK) st = lattice_respd_advertise(*out, &o->node);
    if (st != LATTICE_OK) {
        LT_LOG(LT_ERROR, "node", "resp: cannot serve port %d: %s", o->resp.port, lattice_strerror(st));
        lattice_respd_destroy(*out);
        *out = NULL;
    }
    return st;
}

int main(int argc, char **argv)
{
    latticed_options o;
    latticed_options_init(&o);
    int rc = latticed_options_parse(&o, argc, argv);
    if (rc) {
        latticed_options_free(&o);
        return rc == 1 ? 0 : 2;
    }
    lattice_log_set_level(o.log_level);
    if (o.http_port) LT_LOG(LT_WARN, "node", "--http-port %d accepted; the HTTP endpoint is not served by this build yet", o.http_port);

    /* Block the stop signals before any thread exists: only sigwait sees them. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);

    lattice_respd *resp;
    lattice_node *n = NULL;
    lattice_status st = resp_bind(&o, &resp);
    if (st == LATTICE_OK) st = lattice_node_start(&o.node, &n);
    if (st == LATTICE_OK && resp) {
        st = lattice_respd_start(resp, n);
        if (st != LATTICE_OK) lattice_node_stop(n);
    }
    if (st != LATTICE_OK) {
        LT_LOG(LT_ERROR, "node", "cannot start: %s", lattice_strerror(st));
        lattice_respd_destroy(resp);
        latticed_options_free(&o);
        return 1;
    }
    LT_LOG(LT_INFO, "node", "latticed %s listening on %s:%d (cluster '%s', %s)", LATTICE_VERSION, o.node.host,
           lattice_node_port(n), o.node.cluster, o.node.client ? "client" : "server");
    int sig = 0;
    sigwait(&set, &sig);
    LT_LOG(LT_INFO, "node", "signal %d: stopping", sig);
    if (resp) lattice_respd_stop(resp);
    lattice_node_stop(n);
    lattice_respd_destroy(resp);
    LT_LOG(LT_INFO, "node", "stopped");
    latticed_options_free(&o);
    return 0;
}
