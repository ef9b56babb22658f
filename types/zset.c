/* placeholder while zset.c is written */
#include "coll_int.h"
void zset_run(coll_ctx *x) { x->r->status = LATTICE_ERR_UNSUPPORTED; }
