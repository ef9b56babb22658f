/*
 * latticed: one Lattice node.  Parses flags and --config, starts the node,
 * waits for SIGTERM/SIGINT (blocked in every thread, taken with sigwait),
 * then stops gracefully so the grid announces this node as `left`.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

#include "lattice/lattice.h"
#include "lattice/log.h"
#include "node.h"

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

    lattice_node *n;
    lattice_status st = lattice_node_start(&o.node, &n);
    if (st != LATTICE_OK) {
        LT_LOG(LT_ERROR, "node", "cannot start: %s", lattice_strerror(st));
        latticed_options_free(&o);
        return 1;
    }
    LT_LOG(LT_INFO, "node", "latticed %s listening on %s:%d (cluster '%s', %s)", LATTICE_VERSION, o.node.host,
           lattice_node_port(n), o.node.cluster, o.node.client ? "client" : "server");
    int sig = 0;
    sigwait(&set, &sig);
    LT_LOG(LT_INFO, "node", "signal %d: stopping", sig);
    lattice_node_stop(n);
    LT_LOG(LT_INFO, "node", "stopped");
    latticed_options_free(&o);
    return 0;
}
