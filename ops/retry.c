/*
 * retry: retry and failover re-routing (data thread).
 *
 * An op that cannot be served right now - its primary answered NOT_OWNER,
 * AGAIN or STOPPED (its view of the topology differs for a moment), its
 * target left the topology (a failover: the pending table settles it with
 * no answer), or it never answered - is routed again RETRY_MS later, from
 * scratch: serving owners are recomputed, so after a primary dies its first
 * live backup gets the resend (with the same op sequence: dedup.c keeps it
 * from applying twice).  At the op's deadline (op_timeout_ms) it ends with
 * TIMEOUT; PARTITION_LOST and NO_CACHE are final.
 */
#include "lattice/alloc.h"
#include "ops_int.h"

#define RETRY_MS 20

static void fail_op(lattice_ops *d, opx *o, lattice_status st)
{
    lattice_op_result r = {0};
    r.status = st;
    chan_complete_local(d, o, &r);
}

void retry_later(lattice_ops *d, opx *o, lattice_status why)
{
    uint64_t now = ops_mono_ms();
    if (now >= o->deadline_ms || !d->running) {
        fail_op(d, o, !d->running ? LATTICE_ERR_STOPPED
                      : why == LATTICE_ERR_PARTITION_LOST || why == LATTICE_ERR_NO_CACHE ? why
                                                                                         : LATTICE_ERR_TIMEOUT);
        return;
    }
    o->next_try_ms = now + RETRY_MS;
    o->rnext = d->retry;
    d->retry = o;
}

void retry_settle_op(lattice_ops *d, pend *p, const Latdata__Resp *rs)
{
    opx *o = p->op;
    if (!rs) {
        retry_later(d, o, LATTICE_ERR_TIMEOUT); /* the target left, or the deadline passed */
        return;
    }
    lattice_status st = (lattice_status)rs->status;
    if (st == LATTICE_ERR_NOT_OWNER || st == LATTICE_ERR_AGAIN || st == LATTICE_ERR_STOPPED) {
        retry_later(d, o, st);
        return;
    }
    lattice_op_result r = {st, rs->value.data, rs->value.len, rs->num, rs->flags};
    chan_complete_local(d, o, &r);
}

opx *retry_take_due(lattice_ops *d, uint64_t now)
{
    opx *list = d->retry, *keep = NULL, *due = NULL, **tail = &due;
    d->retry = NULL;
    while (list) {
        opx *o = list;
        list = o->rnext;
        if (!d->running) {
            fail_op(d, o, LATTICE_ERR_STOPPED);
        } else if (o->next_try_ms <= now) {
            o->rnext = NULL;
            *tail = o; /* in list order, as they were queued */
            tail = &o->rnext;
        } else {
            o->rnext = keep;
            keep = o;
        }
    }
    d->retry = keep;
    return due;
}
