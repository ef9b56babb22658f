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
 *
 * Retries keep their order (first in, first routed again): a pipeline of
 * writes to one key - SET then INCR from one RESP connection, submitted in
 * one call - that a base check's freeze turned back with AGAIN must reach
 * the primary again in the order it was submitted, or the INCR would count
 * from an absent key.
 */
#include "lattice/alloc.h"
#include "ops_int.h"

#define RETRY_MS 20

static void fail_op(lattice_ops *d, opx *o, lattice_status st)
{
    lattice_op_result r = {0};
    r.status = st;
    if (st == LATTICE_ERR_PARTITION_LOST) r.num = o->lost_part; /* which partition (lattice/ops.h) */
    chan_complete_local(d, o, &r);
}

void retry_later(lattice_ops *d, opx *o, lattice_status why)
{
    uint64_t now = lt_mono_ms();
    if (now >= o->deadline_ms || !d->running) {
        fail_op(d, o, !d->running ? LATTICE_ERR_STOPPED
                      : why == LATTICE_ERR_PARTITION_LOST || why == LATTICE_ERR_NO_CACHE ? why
                                                                                         : LATTICE_ERR_TIMEOUT);
        return;
    }
    o->next_try_ms = now + RETRY_MS;
    o->rnext = NULL;
    if (d->retry) d->retry_tail->rnext = o;
    else d->retry = o;
    d->retry_tail = o;
}

void retry_settle_op(lattice_ops *d, pend *p, const Latdata__Resp *rs)
{
    opx *o = p->op;
    if (!rs) {
        retry_later(d, o, LATTICE_ERR_TIMEOUT); /* the target left, or the deadline passed */
        return;
    }
    lattice_status st = (lattice_status)rs->status;
    /* A primary without quorum while this server has it: that primary is
     * on the far side of a cut and will be failed over - retry.  Otherwise
     * (a client, or this side has no quorum either) the refusal stands. */
    bool far_side = st == LATTICE_ERR_NO_QUORUM && !d->client && !ops_no_quorum(d, NULL);
    if (st == LATTICE_ERR_NOT_OWNER || st == LATTICE_ERR_AGAIN || st == LATTICE_ERR_STOPPED || far_side) {
        retry_later(d, o, st);
        return;
    }
    lattice_op_result r = {st, rs->value.data, rs->value.len, rs->num, rs->flags};
    chan_complete_local(d, o, &r);
}

opx *retry_take_due(lattice_ops *d, uint64_t now)
{
    opx *list = d->retry, *due = NULL, **due_tail = &due;
    d->retry = d->retry_tail = NULL;
    while (list) {
        opx *o = list;
        list = o->rnext;
        o->rnext = NULL;
        if (!d->running) {
            fail_op(d, o, LATTICE_ERR_STOPPED);
        } else if (o->next_try_ms <= now) {
            *due_tail = o; /* in the order they were queued */
            due_tail = &o->rnext;
        } else {
            if (d->retry) d->retry_tail->rnext = o;
            else d->retry = o;
            d->retry_tail = o;
        }
    }
    return due;
}
