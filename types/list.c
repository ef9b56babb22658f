/* placeholder while list.c is written */
#include "coll_int.h"
void list_run(coll_ctx *x) { x->r->status = LATTICE_ERR_UNSUPPORTED; }
