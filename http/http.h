/*
 * http: the HTTP endpoint of a node (prefix lattice_httpd_), served with
 * libmicrohttpd.  docs/OPERATIONS.md, "HTTP endpoint", lists what it serves:
 *
 *   GET /metrics    Prometheus text format (0.0.4), every name lattice_*
 *   GET /health     200 "ok" when the node serves, 503 and the reason otherwise
 *   GET /topology   the JSON of `lattice --json top`
 *   GET /caches     the JSON of `lattice --json caches`
 *
 * It stands on the public C API only (lattice/lattice.h, lattice/metrics.h),
 * as resp/ does.  latticed's main runs it next to the node:
 *
 *     lattice_httpd *h;
 *     lattice_httpd_bind(&hc, &h);          // the port, before the node starts
 *     lattice_node_start(&node_config, &n);
 *     lattice_httpd_start(h, n);            // serving threads
 *     ...
 *     lattice_httpd_stop(h);                // before the node goes
 *     lattice_node_stop(n);
 *     lattice_httpd_destroy(h);
 *
 * The port is bound first so that a port in use fails the start before the
 * node joins anything (the socket has SO_REUSEADDR, which lets a restart
 * bind over a TIME-WAIT left by the previous process, and no SO_REUSEPORT,
 * so a live listener is never shared).  Each connection gets its own thread
 * (libmicrohttpd's thread-per-connection mode, at most 64 at once): a
 * /caches that waits for a slow server never holds up /health or /metrics.
 */
#ifndef LATTICE_HTTP_HTTP_H
#define LATTICE_HTTP_HTTP_H

#include <stdio.h>

#include "lattice/lattice.h"

typedef struct lattice_httpd_config {
    const char *host;           /* bind address; NULL = 127.0.0.1 */
    int port;                   /* 1..65535 */
} lattice_httpd_config;

typedef struct lattice_httpd lattice_httpd;

/* More /metrics lines from the program that runs the endpoint (latticed adds
 * the RESP endpoint's): called on a serving thread with the response
 * stream; it must write complete Prometheus families. */
typedef void (*lattice_httpd_metrics_fn)(void *ctx, FILE *out);

/* Binds and listens (no threads yet).  INVAL on a bad port, IO when the port
 * cannot be bound (in use: the log says so). */
lattice_status lattice_httpd_bind(const lattice_httpd_config *c, lattice_httpd **out);
/* Before start: add fn's lines to every /metrics. */
void lattice_httpd_add_metrics(lattice_httpd *h, lattice_httpd_metrics_fn fn, void *ctx);
/* Serves on node n until stop. IO when libmicrohttpd cannot start. */
lattice_status lattice_httpd_start(lattice_httpd *h, lattice_node *n);
/* Ends every serving thread (waits for requests in progress): call before
 * lattice_node_stop. */
void lattice_httpd_stop(lattice_httpd *h);
/* NULL is a no-op. */
void lattice_httpd_destroy(lattice_httpd *h);

#endif
