/* placeholder while set.c is written */
#include "coll_int.h"
void set_run(coll_ctx *x) { x->r->status = LATTICE_ERR_UNSUPPORTED; }
