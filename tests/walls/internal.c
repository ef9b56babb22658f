/* Must not build: a module (rebalance, which links storage) reaches into
 * storage's internal header. */
#include "rebalance/rebalance.h"
#include "storage/region_int.h"

int main(void) { return 0; }
