/*
 * Helpers for integration tests that attach to a grid through the C API
 * (lattice.h) rather than through the CLI: link lattice_node.
 */
#ifndef LATTICE_IT_GRID_CLIENT_H
#define LATTICE_IT_GRID_CLIENT_H

#include <stddef.h>

#include "lattice/lattice.h"

/* Server members in n's current topology. */
size_t servers_of(lattice_node *n);
/* Fail the test unless n's topology reaches exactly `servers` servers
 * within 20 s. */
void wait_grid(lattice_node *n, size_t servers);

#endif
