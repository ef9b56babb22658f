/*
 * latticed's configuration (flags and --config FILE), used by node/main.c and
 * node/config.c - the latticed program, not liblattice (the lattice_node
 * library implements lattice.h and knows nothing of these options).
 *
 * Everything the node takes goes into `node` (lattice_node_start); the RESP
 * endpoint's options go into `resp`, which main hands to resp/resp.h after
 * setting resp.host to the node's --host.
 */
#ifndef LATTICE_NODE_H
#define LATTICE_NODE_H

#include <stdbool.h>
#include <stddef.h>

#include "lattice/lattice.h"
#include "resp/resp.h"

#define LATTICED_MAX_CACHES 32

/* Everything latticed takes from flags and the config file.  Strings point
 * into `store` (owned by the struct). */
typedef struct latticed_options {
    lattice_config node;
    lattice_respd_config resp;          /* resp.port 0 = no RESP endpoint */
    int log_level;                      /* LT_* */
    const char *caches[LATTICED_MAX_CACHES]; /* --cache specs, validated and kept */
    size_t n_caches;
    int region_mb, http_port;           /* 0 = not given */
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
