/*
 * resp: the Redis-protocol (RESP2/RESP3) endpoint of a server node
 * (prefix lattice_respd_).  docs/RESP.md, part "Server", describes it.
 *
 * It stands on the public API only (lattice/lattice.h, lattice/ops.h): key
 * commands become lattice_op's, CLUSTER views are built from
 * lattice_node_topology and lattice_cache_partitions.  latticed's main
 * starts it next to the node:
 *
 *     lattice_respd *r;
 *     lattice_respd_bind(&rc, &r);                 // sockets, before the node
 *     lattice_respd_advertise(r, &node_config);    // "resp_port=N" in attrs[]
 *     lattice_node_start(&node_config, &n);
 *     lattice_respd_start(r, n);                   // IO threads
 *     ...
 *     lattice_respd_stop(r);                       // before the node goes
 *     lattice_node_stop(n);                        // every op callback has run
 *     lattice_respd_destroy(r);
 *
 * The port is bound before the node starts so that the node joins with the
 * "resp_port" attribute CLUSTER SLOTS/SHARDS/NODES read on every member;
 * clients that connect before lattice_respd_start wait in the backlog.
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
 */
#ifndef LATTICE_RESP_RESP_H
#define LATTICE_RESP_RESP_H

#include <stddef.h>
#include <stdint.h>

#include "lattice/lattice.h"

#define LATTICE_RESPD_DEFAULT_MAX_CLIENTS 10000
#define LATTICE_RESPD_MAX_IO_THREADS 8
#define LATTICE_RESPD_DEFAULT_POLL_US 50 /* an IO thread polls this long after its last events */

/* Zero / NULL fields take the default named beside them (Redis's). */
typedef struct lattice_respd_config {
    const char *host;            /* bind address (the node's --host); NULL = 127.0.0.1 */
    int port;                    /* 1..65535 */
    const char *password;        /* requirepass; NULL/"" = no AUTH needed */
    const char *cache;           /* cache the commands use; NULL = "default" */
    int io_threads;              /* 0 = 1; at most LATTICE_RESPD_MAX_IO_THREADS */
    int poll_us;                 /* 0 = LATTICE_RESPD_DEFAULT_POLL_US; < 0 = never poll, always sleep */
    int max_clients;             /* 0 = LATTICE_RESPD_DEFAULT_MAX_CLIENTS */
    int idle_timeout_s;          /* 0 = never close idle clients (Redis's default) */
    long long max_bulk;          /* 0 = 512 MiB (proto-max-bulk-len) */
    long long max_multibulk;     /* 0 = 1048576 elements */
    long long max_inline;        /* 0 = 65536 bytes */
    long long output_limit;      /* bytes pending per client; 0 = unlimited (Redis's default) */
    long long maxmemory;         /* CONFIG GET maxmemory: the node's region bound in bytes */
    bool maxmemory_evicts;       /* CONFIG GET maxmemory-policy: allkeys-lru, else noeviction */
    int moved;                   /* LATTICE_RESPD_MOVED_*: which clients get MOVED; 0 = AWARE */
    int cross_slot;              /* LATTICE_RESPD_CROSS_*: who may run keys of several slots at once */
} lattice_respd_config;

/* Which connections are redirected with MOVED (docs/RESP.md, "Redirection");
 * the others are proxied to the key's primary. */
#define LATTICE_RESPD_MOVED_AWARE 0   /* connections that route by the slot map */
#define LATTICE_RESPD_MOVED_ALWAYS 1  /* every connection, as Redis Cluster (redis-cli -c) */
#define LATTICE_RESPD_MOVED_NEVER 2   /* none: every key is proxied */

/* Which connections run a command or MULTI/EXEC over keys of several slots
 * as one transaction across partitions (docs/RESP.md, "Transactions across
 * slots"); the others get CROSSSLOT, as from Redis Cluster. */
#define LATTICE_RESPD_CROSS_AWARE 0   /* plain connections; cluster-aware ones get CROSSSLOT */
#define LATTICE_RESPD_CROSS_ALLOW 1   /* every connection */

typedef struct lattice_respd lattice_respd;

/* Binds the listening sockets (no threads yet).  Strings of c are copied.
 * INVAL on a bad port, IO when the port cannot be bound (in use). */
lattice_status lattice_respd_bind(const lattice_respd_config *c, lattice_respd **out);
/* Appends the "resp_port=N" attribute to c->attrs (the string is owned by
 * r: keep r until the node stopped).  TOO_LARGE when attrs[] is full. */
lattice_status lattice_respd_advertise(const lattice_respd *r, lattice_config *c);
/* Serves clients on node n (a started server node) until stop. */
lattice_status lattice_respd_start(lattice_respd *r, lattice_node *n);
/* Ends the IO threads: call before lattice_node_stop. */
void lattice_respd_stop(lattice_respd *r);
/* Call after lattice_node_stop (every op callback has run then); NULL is a
 * no-op. */
void lattice_respd_destroy(lattice_respd *r);

/* What the HTTP endpoint's /metrics shows of RESP; any thread, until destroy. */
typedef struct lattice_respd_stats {
    uint64_t clients;            /* connected now */
    uint64_t connections, commands, rejected; /* since start */
} lattice_respd_stats;
void lattice_respd_stats_get(const lattice_respd *r, lattice_respd_stats *out);

/* The slow log (SLOWLOG, docs/RESP.md) as data, for the HTTP endpoint's
 * /slowlog.  An entry is borrowed for the call: argv[i] is argv_len[i]
 * bytes (not NUL-terminated), trimmed and redacted as SLOWLOG GET shows it. */
typedef struct lattice_respd_slow_entry {
    long long id, time_s, duration_us;
    size_t argc;
    const char *const *argv;
    const size_t *argv_len;
    const char *client, *client_name;   /* ip:port, CLIENT SETNAME's name ("" none) */
} lattice_respd_slow_entry;
typedef void (*lattice_respd_slow_fn)(void *ctx, const lattice_respd_slow_entry *e);
typedef struct lattice_respd_slowlog_info {
    long long slower_than_us, max_len;  /* slowlog-log-slower-than, slowlog-max-len now */
    long long len;                      /* SLOWLOG LEN */
} lattice_respd_slowlog_info;
/* Fills *info and calls fn with at most max entries, newest first, under
 * the log's lock: fn must be quick and must not call into r.  Any thread,
 * between start and destroy. */
void lattice_respd_slowlog_read(lattice_respd *r, size_t max, lattice_respd_slow_fn fn, void *ctx,
                                lattice_respd_slowlog_info *info);

#endif
