/*
 * http: the HTTP endpoint of a node (prefix lattice_httpd_), served with
 * libmicrohttpd.  docs/OPERATIONS.md, "HTTP endpoint", lists what it serves:
 *
 *   GET /                 the web console (HTML, CSS, JS built into the binary)
 *   GET /metrics          Prometheus text format (0.0.4), every name lattice_*
 *   GET /health           200 "ok" when the node serves, 503 and the reason otherwise
 *                         (?format=json: always 200, the verdict as JSON)
 *   GET /topology         the JSON of `lattice --json top`
 *   GET /caches           the JSON of `lattice --json caches`
 *   GET /partitions       the JSON of `lattice --json partitions CACHE` (?cache=NAME)
 *   GET /rebalance        the JSON of `lattice --json rebalance`
 *   GET /slowlog          the node's slow log (the RESP endpoint's SLOWLOG) as JSON
 *
 * The JSON pages are built by http/shapes.h, the code the CLI prints with.
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
    const char *cluster;        /* the grid's name /topology shows; NULL = none (copied) */
} lattice_httpd_config;

typedef struct lattice_httpd lattice_httpd;

/* More /metrics lines from the program that runs the endpoint (latticed adds
 * the RESP endpoint's): called on a serving thread with the response
 * stream; it must write complete Prometheus families. */
typedef void (*lattice_httpd_metrics_fn)(void *ctx, FILE *out);

/* One entry of the slow log /slowlog shows (SLOWLOG GET's fields: docs/
 * RESP.md).  Borrowed for the call of lattice_httpd_slowlog_add. */
typedef struct lattice_httpd_slow_entry {
    long long id, time_s, duration_us;
    size_t argc;
    const char *const *argv;          /* argv[i] is argv_len[i] bytes, any bytes */
    const size_t *argv_len;
    const char *client, *client_name;
} lattice_httpd_slow_entry;

/* Where a slow log source writes what /slowlog answers (opaque). */
typedef struct lattice_httpd_slowlog lattice_httpd_slowlog;
/* The source's settings and length now (SLOWLOG LEN, CONFIG GET slowlog-*). */
void lattice_httpd_slowlog_config(lattice_httpd_slowlog *s, long long slower_than_us, long long max_len,
                                  long long len);
/* One entry, newest first. */
void lattice_httpd_slowlog_add(lattice_httpd_slowlog *s, const lattice_httpd_slow_entry *e);
/* A slow log source: called on a serving thread; writes its settings and at
 * most max entries into s. */
typedef void (*lattice_httpd_slowlog_fn)(void *ctx, size_t max, lattice_httpd_slowlog *s);

/* Binds and listens (no threads yet).  INVAL on a bad port, IO when the port
 * cannot be bound (in use: the log says so). */
lattice_status lattice_httpd_bind(const lattice_httpd_config *c, lattice_httpd **out);
/* Before start: add fn's lines to every /metrics. */
void lattice_httpd_add_metrics(lattice_httpd *h, lattice_httpd_metrics_fn fn, void *ctx);
/* Before start: where /slowlog reads (latticed: the RESP endpoint's log).
 * Without one /slowlog answers an empty log with "source":null. */
void lattice_httpd_set_slowlog(lattice_httpd *h, lattice_httpd_slowlog_fn fn, void *ctx);
/* Serves on node n until stop. IO when libmicrohttpd cannot start. */
lattice_status lattice_httpd_start(lattice_httpd *h, lattice_node *n);
/* Ends every serving thread (waits for requests in progress): call before
 * lattice_node_stop. */
void lattice_httpd_stop(lattice_httpd *h);
/* NULL is a no-op. */
void lattice_httpd_destroy(lattice_httpd *h);

#endif
