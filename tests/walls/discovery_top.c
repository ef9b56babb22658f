/* Must not build: the bottom of the stack (discovery) includes the top. */
#include "discovery/discovery.h"
#include "lattice/lattice.h"

int main(void) { return 0; }
