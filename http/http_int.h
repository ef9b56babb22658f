/*
 * Internal to http/: the page builders httpd.c routes to.  Each writes its
 * whole body to `out` (an open_memstream) and returns the HTTP status.
 */
#ifndef LATTICE_HTTP_INT_H
#define LATTICE_HTTP_INT_H

#include <stdio.h>

#include "http/http.h"
#include "lattice/lattice.h"

/* prom.c: GET /metrics. */
int http_metrics(lattice_node *n, FILE *out);
/* json.c: GET /topology (with the cluster's name), /caches, /partitions (cache NULL = "default"),
 * /rebalance - the CLI's --json shapes (http/shapes.h). */
int http_topology(lattice_node *n, const char *cluster, FILE *out);
int http_caches(lattice_node *n, FILE *out);
int http_partitions(lattice_node *n, const char *cache, FILE *out);
int http_rebalance(lattice_node *n, FILE *out);
/* json.c: GET /slowlog from fn (NULL: no source), at most max entries. */
int http_slowlog(lattice_httpd_slowlog_fn fn, void *ctx, size_t max, FILE *out);
/* httpd.c: GET /health - 200 "ok" or 503 and the reason. */
int http_health(lattice_node *n, FILE *out);

/* console.c: the web console's assets, embedded at build time
 * (console/embed.cmake writes the arrays). */
typedef struct http_asset {
    const char *name;           /* served as "/" + name; index.html also as "/" */
    const char *type;           /* Content-Type */
    const unsigned char *data;
    size_t len;
} http_asset;
/* The asset served at url, NULL when none. */
bool http_console_asset(const char *url, http_asset *out);

#endif
