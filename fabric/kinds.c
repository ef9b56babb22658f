/*
 * kinds: the registry of message kinds (fabric.h).  Each subsystem names the
 * kinds it serves at start-up; the receiving loop looks a request's kind up
 * here instead of switching over every kind of every subsystem.
 */
#include <string.h>

#include "fabric.h"

void fab_kinds_init(fab_kinds *k, uint32_t base)
{
    memset(k, 0, sizeof *k);
    k->base = base;
}

lattice_status fab_kinds_on(fab_kinds *k, uint32_t kind, fab_kind_fn fn)
{
    if (kind < k->base || kind - k->base >= FAB_KINDS) return LATTICE_ERR_INVAL;
    k->fn[kind - k->base] = fn;
    return LATTICE_OK;
}

bool fab_kinds_dispatch(fab_kinds *k, void *ctx, const Latdata__Req *q, const void *from)
{
    fab_kind_fn fn = q->kind >= k->base && q->kind - k->base < FAB_KINDS ? k->fn[q->kind - k->base] : NULL;
    if (!fn) {
        k->refused++;
        return false;
    }
    fn(ctx, q, from);
    return true;
}
