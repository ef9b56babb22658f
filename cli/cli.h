/*
 * The `lattice` tool: global options (before the command) and a command
 * table; each command gets the parsed globals and its own argv.  Later
 * issues add rows (caches, partitions, rebalance, get/put/del, bench).
 */
#ifndef LATTICE_CLI_H
#define LATTICE_CLI_H

#include <stdbool.h>

#include "lattice/lattice.h"

typedef struct cli_globals {
    lattice_config node;   /* client-mode node used to attach */
    bool json;
    int timeout_ms;        /* how long to wait for the grid */
} cli_globals;

typedef struct cli_command {
    const char *name;
    const char *summary;
    int (*run)(cli_globals *g, int argc, char **argv); /* argv[0] = command name */
} cli_command;

int cli_top(cli_globals *g, int argc, char **argv);
int cli_kv(cli_globals *g, int argc, char **argv);       /* get, put, del */
int cli_cache(cli_globals *g, int argc, char **argv);    /* cache create|destroy */
int cli_caches(cli_globals *g, int argc, char **argv);
int cli_partitions(cli_globals *g, int argc, char **argv);
int cli_bench(cli_globals *g, int argc, char **argv);
int cli_rebalance(cli_globals *g, int argc, char **argv);
int cli_verify(cli_globals *g, int argc, char **argv);
int cli_baseline(cli_globals *g, int argc, char **argv);

/* Print o as one compact JSON line on stdout, then release it. */
struct json_t;
void cli_print_json(struct json_t *o);
/* True when a command's own arguments (argv[1..]) ask for --help or -h. */
bool cli_wants_help(int argc, char **argv);

/* The quorum line of the side this topology shows (baseline.c), for top;
 * its JSON is lattice_shapes_quorum (http/shapes.h). */
void cli_quorum_line(const lattice_topology *t);

/* attach.c: attach as a client node (prints why on failure). NULL when it
 * cannot join. */
lattice_node *cli_attach(cli_globals *g);
/* Where an inspection command (top, caches, partitions, rebalance, verify,
 * baseline show) reads the grid: an inspection (lattice_inspect: no join,
 * the topology version does not move), or - multicast finders only, no
 * address to ask - a client node. */
typedef struct cli_source {
    lattice_inspection *x;
    lattice_node *n;
    const lattice_topology *t;  /* x's, or the node's (held) */
    lattice_topology *held;
} cli_source;
/* 0, or the exit status with why printed (naming `what`). */
int cli_source_open(cli_globals *g, const char *what, cli_source *s);
/* A fresh view (rebalance --watch: servers come and go): 0 or 1 as open. */
int cli_source_refresh(cli_globals *g, const char *what, cli_source *s);
void cli_source_close(cli_source *s);
/* lattice_caches_info, lattice_cache_partitions and lattice_cache_digests
 * (lattice.h) from the source: by inspection, or the client node's. */
lattice_status cli_source_caches(const cli_globals *g, cli_source *s, lattice_cache_info **ci, size_t *nc);
lattice_status cli_source_partitions(const cli_globals *g, cli_source *s, const char *cache,
                                     lattice_partitions_info **pi);
lattice_status cli_source_digests(const cli_globals *g, cli_source *s, const char *cache,
                                  lattice_partition_digest **pd, size_t *nd);
/* --host not given: the local address that routes to the first finder. */
void cli_pick_host(cli_globals *g);
/* Print why `what` failed with st: the refusal named (secret, cluster name,
 * protocol), or the finders nobody answered at. */
void cli_explain(const cli_globals *g, const char *what, lattice_status st);

#endif
