/*
 * Internal to liblattice (node.c, api.c): what the public API's
 * implementation needs of the node beyond lattice.h.
 */
#ifndef LATTICE_NODE_INT_H
#define LATTICE_NODE_INT_H

#include "lattice/lattice.h"

/* The node's operation path (api.c submits to it); valid from
 * lattice_node_start until lattice_node_stop. */
struct lattice_ops;
struct lattice_ops *lattice_node_ops(lattice_node *n);

#endif
