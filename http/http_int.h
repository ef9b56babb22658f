/*
 * Internal to http/: the page builders httpd.c routes to.  Each writes its
 * whole body to `out` (an open_memstream) and returns the HTTP status.
 */
#ifndef LATTICE_HTTP_INT_H
#define LATTICE_HTTP_INT_H

#include <stdio.h>

#include "lattice/lattice.h"

/* prom.c: GET /metrics. */
int http_metrics(lattice_node *n, FILE *out);
/* json.c: GET /topology and GET /caches. */
int http_topology(lattice_node *n, FILE *out);
int http_caches(lattice_node *n, FILE *out);
/* httpd.c: GET /health - 200 "ok" or 503 and the reason. */
int http_health(lattice_node *n, FILE *out);

#endif
