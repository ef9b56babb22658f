/*
 * respd: the Redis-protocol (RESP2/RESP3) endpoint of a server node
 * (prefix lattice_respd_).  docs/RESP.md, part "Server", describes it.
 *
 * Threads: `io_threads` IO threads, each with its own epoll set and its own
 * SO_REUSEPORT listening socket on the same port (the kernel spreads new
 * connections over them).  A connection belongs to the IO thread that
 * accepted it for its whole life: only that thread reads, parses, writes or
 * frees it.  Commands that touch keys become lattice_op's, one
 * lattice_op_submit per pipeline read; their completions run on the node's
 * data thread, which only copies results into the batch and, on the last
 * one, hands the batch back to the connection's IO thread (cds_wfcq queue +
 * eventfd).  So no socket is ever written from two threads.
 *
 * Lifecycle (a row of node.c's module table): init binds the listening
 * sockets (so "resp_port" can be advertised as a node attribute before
 * discovery starts), start runs the IO threads, stop ends them, destroy
 * frees everything - after the data module stopped, so every op callback
 * has run by then.
 */
#ifndef LATTICE_NODE_RESPD_H
#define LATTICE_NODE_RESPD_H

#include <stddef.h>
#include <stdint.h>

#include "lattice/lattice.h"
#include "resp/resp.h"

#define LATTICE_RESPD_DEFAULT_MAX_CLIENTS 10000
#define LATTICE_RESPD_MAX_IO_THREADS 8

typedef struct lattice_respd_config {
    const char *host;            /* bind address (the node's --host) */
    int port;                    /* > 0 */
    const char *password;        /* NULL/"" = no AUTH needed */
    const char *cache;           /* NULL = "default" */
    int io_threads;              /* 0 = 1 */
    int max_clients;             /* 0 = LATTICE_RESPD_DEFAULT_MAX_CLIENTS */
    int idle_timeout_s;          /* 0 = never close idle clients (Redis's default) */
    lattice_resp_limits limits;  /* zero fields = Redis's defaults */
    uint64_t output_limit;       /* bytes pending per client; 0 = unlimited (Redis's default) */
} lattice_respd_config;

typedef struct lattice_respd lattice_respd;

/* Binds the sockets (no threads yet).  *attr is "resp_port=N" (owned by the
 * respd) for the node to advertise. */
lattice_status lattice_respd_init(const lattice_respd_config *c, lattice_node *node, lattice_respd **out,
                                  const char **attr);
lattice_status lattice_respd_start(lattice_respd *r);
void lattice_respd_stop(lattice_respd *r);
/* Call after the data module stopped (every op callback has run). */
void lattice_respd_destroy(lattice_respd *r);
int lattice_respd_port(const lattice_respd *r);

#endif
