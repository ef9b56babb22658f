/* Must not build: code on the public API (the CLI) includes a module header. */
#include "lattice/lattice.h"
#include "storage/storage.h"

int main(void) { return 0; }
