/*
 * latticed: one Lattice node.  Parses flags and --config, starts the node
 * and, on a server with --resp-port, the RESP endpoint on it (resp/resp.h),
 * waits for SIGTERM/SIGINT (blocked in every thread, taken with sigwait),
 * then stops gracefully so the grid announces this node as `left`.
 *
 * Order: the RESP and HTTP ports are bound before the node starts, so the node joins
 * advertising "resp_port" (CLUSTER SLOTS reads it on every member) and a
 * port in use fails the start; RESP's IO threads and HTTP's threads end before the node stops
 * (they submit to it), and its memory goes after (op callbacks ran).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "lattice/lattice.h"
#include "lattice/log.h"
#include "node.h"
#include "http/http.h"
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

/* No --ip-finder: look for the local grid where nodes bind by default,
 * HOST:47500..47509 (Ignite's default range) with HOST the node's --host,
 * so a second bare latticed joins the first instead of seeding a grid of
 * its own.  The string lives in `o`. */
static lattice_status default_finder(latticed_options *o)
{
    if (o->node.n_finders) return LATTICE_OK;
    char spec[128], err[256];
    snprintf(spec, sizeof spec, "%s:%d..%d", o->node.host, LATTICE_DEFAULT_PORT, LATTICE_DEFAULT_PORT + 9);
    lattice_status st = latticed_option_set(o, "ip-finder", spec, err, sizeof err);
    if (st != LATTICE_OK) LT_LOG(LT_ERROR, "node", "default --ip-finder %s: %s", spec, err);
    return st;
}

/* The HTTP endpoint's socket, bound before the node: NULL without
 * --http-port. */
static lattice_status http_bind(latticed_options *o, lattice_httpd **out)
{
    *out = NULL;
    if (!o->http_port) return LATTICE_OK;
    lattice_httpd_config hc = {o->node.host, o->http_port, o->node.cluster ? o->node.cluster : "lattice"};
    lattice_status st = lattice_httpd_bind(&hc, out);
    if (st != LATTICE_OK) LT_LOG(LT_ERROR, "node", "http: cannot serve port %d: %s", o->http_port, lattice_strerror(st));
    return st;
}

/* The RESP endpoint's part of /metrics. */
static void resp_metrics(void *ctx, FILE *o)
{
    lattice_respd_stats s;
    lattice_respd_stats_get(ctx, &s);
    static const char *const fam[][3] = {
        {"lattice_resp_clients", "gauge", "RESP clients connected now"},
        {"lattice_resp_connections_total", "counter", "RESP connections accepted"},
        {"lattice_resp_rejected_connections_total", "counter", "RESP connections refused (max clients)"},
        {"lattice_resp_commands_total", "counter", "RESP commands processed"},
    };
    const uint64_t v[] = {s.clients, s.connections, s.rejected, s.commands};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        fprintf(o, "# HELP %s %s\n# TYPE %s %s\n%s %llu\n", fam[i][0], fam[i][2], fam[i][0], fam[i][1], fam[i][0],
                (unsigned long long)v[i]);
}

/* The RESP endpoint's slow log, for the HTTP endpoint's /slowlog. */
static void resp_slow_entry(void *sink, const lattice_respd_slow_entry *e)
{
    lattice_httpd_slow_entry h = {e->id,   e->time_s, e->duration_us, e->argc,
                                  e->argv, e->argv_len, e->client,    e->client_name};
    lattice_httpd_slowlog_add(sink, &h);
}

static void resp_slowlog(void *ctx, size_t max, lattice_httpd_slowlog *sink)
{
    lattice_respd_slowlog_info info;
    lattice_respd_slowlog_read(ctx, max, resp_slow_entry, sink, &info);
    lattice_httpd_slowlog_config(sink, info.slower_than_us, info.max_len, info.len);
}

/* Starts the endpoints bound before the node; stops the node on failure. */
static lattice_status serve(lattice_node *n, lattice_respd *resp, lattice_httpd *http)
{
    lattice_status st = resp ? lattice_respd_start(resp, n) : LATTICE_OK;
    if (st == LATTICE_OK && http) {
        if (resp) {
            lattice_httpd_add_metrics(http, resp_metrics, resp);
            lattice_httpd_set_slowlog(http, resp_slowlog, resp);
        }
        st = lattice_httpd_start(http, n);
        if (st != LATTICE_OK && resp) lattice_respd_stop(resp);
    }
    if (st != LATTICE_OK) lattice_node_stop(n);
    return st;
}

/* Before a graceful stop: while this server is the only serving copy of
 * partitions another server is loading (or has loaded, the base switch
 * pending), stopping would leave them LOST.  Serve on - every endpoint
 * still up - until the switch hands them over, at most HANDOVER_WAIT_MS;
 * a second SIGTERM/SIGINT stops at once, and a side without quorum (which
 * switches no base) at once too. */
#define HANDOVER_WAIT_MS 30000
static void hand_over(lattice_node *n, const sigset_t *set)
{
    uint32_t left = 0, said = 0;
    for (int waited = 0; waited < HANDOVER_WAIT_MS; waited += 100) {
        lattice_quorum q;
        lattice_node_quorum(n, &q);
        if (!q.has_quorum) break; /* no base switch without quorum: nothing would be handed over */
        if (lattice_node_handover_pending(n, &left) != LATTICE_OK || !left) break;
        if (waited % 1000 == 0 && left != said) {
            LT_LOG(LT_INFO, "node", "waiting for %u partitions only this node serves to switch to the copies "
                   "rebalanced elsewhere (at most %d s; a second signal stops at once)", left,
                   (HANDOVER_WAIT_MS - waited) / 1000);
            said = left;
        }
        struct timespec tick = {0, 100 * 1000000L};
        if (sigtimedwait(set, NULL, &tick) > 0) {
            LT_LOG(LT_WARN, "node", "second signal: stopping now, %u partitions not handed over", left);
            return;
        }
    }
    if (left) LT_LOG(LT_WARN, "node", "stopping with %u partitions not handed over: they stay LOST until this node returns", left);
    else if (said) LT_LOG(LT_INFO, "node", "handed over: every partition has another serving copy");
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

    /* Block the stop signals before any thread exists: only sigwait sees them. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);

    lattice_respd *resp = NULL;
    lattice_httpd *http = NULL;
    lattice_node *n = NULL;
    lattice_status st = default_finder(&o);
    if (st == LATTICE_OK) st = resp_bind(&o, &resp);
    if (st == LATTICE_OK) st = http_bind(&o, &http);
    if (st == LATTICE_OK) st = lattice_node_start(&o.node, &n);
    if (st == LATTICE_OK) st = serve(n, resp, http);
    if (st != LATTICE_OK) {
        LT_LOG(LT_ERROR, "node", "cannot start: %s", lattice_strerror(st));
        lattice_httpd_destroy(http);
        lattice_respd_destroy(resp);
        latticed_options_free(&o);
        return 1;
    }
    LT_LOG(LT_INFO, "node", "latticed %s listening on %s:%d (cluster '%s', %s)", LATTICE_VERSION, o.node.host,
           lattice_node_port(n), o.node.cluster, o.node.client ? "client" : "server");
    int sig = 0;
    sigwait(&set, &sig);
    LT_LOG(LT_INFO, "node", "signal %d: stopping", sig);
    hand_over(n, &set);
    lattice_httpd_stop(http);
    if (resp) lattice_respd_stop(resp);
    lattice_node_stop(n);
    lattice_httpd_destroy(http);
    lattice_respd_destroy(resp);
    LT_LOG(LT_INFO, "node", "stopped");
    latticed_options_free(&o);
    return 0;
}
