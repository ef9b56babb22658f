/*
 * Helpers for integration tests that attach to a grid through the C API
 * (lattice.h) rather than through the CLI: link lattice_node.
 */
#ifndef LATTICE_IT_GRID_CLIENT_H
#define LATTICE_IT_GRID_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include "lattice/lattice.h"

/* Server members in n's current topology. */
size_t servers_of(lattice_node *n);
/* Fail the test unless n's topology reaches exactly `servers` servers
 * within 20 s. */
void wait_grid(lattice_node *n, size_t servers);
/* The test key for index i: "<prefix>-<i, 8 digits>"; its value is "v<i, 8 digits>". */
void key_of(char *buf, size_t cap, const char *prefix, long i);
/* Reads keys [0, count) of `cache` (only those with only[k] set, when given)
 * through node n in batches of 500; returns how many hold their value. */
long count_present(lattice_node *n, const char *cache, const char *prefix, long count, const uint8_t *only);

#endif
