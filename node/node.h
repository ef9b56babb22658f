/*
 * node: the lattice_node context and its lifecycle (lattice.h's node API),
 * plus latticed's configuration (flags and --config FILE).
 *
 * Lifecycle: lattice_node_start() runs every module's init (no sockets) in
 * data-flow order, then every start; lattice_node_stop() runs stop and
 * destroy in reverse.  Modules of later issues (caches, rebalance, RESP,
 * HTTP) add one row to the module table in node.c.
 */
#ifndef LATTICE_NODE_H
#define LATTICE_NODE_H

#include <stdbool.h>
#include <stddef.h>

#include "lattice/lattice.h"

#define LATTICED_MAX_CACHES 32

/* The node's operation path (api.c submits to it). */
struct lattice_ops;
struct lattice_ops *lattice_node_ops(lattice_node *n);

/* Everything latticed takes from flags and the config file.  Strings point
 * into `store` (owned by the struct). */
typedef struct latticed_options {
    lattice_config node;
    int log_level;                      /* LT_* */
    const char *caches[LATTICED_MAX_CACHES]; /* --cache specs, validated and kept */
    size_t n_caches;
    int region_mb, resp_port, http_port;    /* 0 = not given */
    char *store[256];                   /* strdup'd strings to free */
    size_t n_store;
} latticed_options;

void latticed_options_init(latticed_options *o);
void latticed_options_free(latticed_options *o);
/* Apply one key (a flag's long name without "--", '_' accepted for '-') and
 * value.  LATTICE_ERR_INVAL with a message in err on a bad key or value. */
lattice_status latticed_option_set(latticed_options *o, const char *key, const char *value, char *err,
                                   size_t errlen);
/* Load key = value lines (ini syntax, no sections needed). */
lattice_status latticed_options_load_file(latticed_options *o, const char *path, char *err, size_t errlen);
/* Parse argv: --config first, then the flags (flags win).  Returns 0 to run,
 * 1 when --help/--version printed, 2 on a usage error (printed). */
int latticed_options_parse(latticed_options *o, int argc, char **argv);

#endif
