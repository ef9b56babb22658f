/* Builds with liblattice's include paths: the whole public C API. */
#include "lattice/alloc.h"
#include "lattice/cache_spec.h"
#include "lattice/clock.h"
#include "lattice/lattice.h"
#include "lattice/log.h"
#include "lattice/ops.h"
#include "lattice/rebalance_view.h"
#include "lattice/status.h"
#include "lattice/topology.h"

int main(void) { return lattice_strerror(LATTICE_OK) == NULL; }
