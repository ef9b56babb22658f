/*
 * bwait: blocking pops waiting at the key's primary (data thread;
 * docs/TYPES.md, "Blocking pops").
 *
 * A BLPOP, BRPOP, BZPOPMIN/MAX or BLMOVE that finds nothing to pop is a
 * transaction step with LATTICE_TXN_BLOCK (lattice/txn.h): txn_execute
 * parks its request here, whole, instead of answering.  It runs again -
 * through primary_rerun, which sends it to the new primary if this node no
 * longer leads the partition, or parks it again if there is still nothing -
 * when its partition's update counter moved (any write of the partition:
 * a push to one of its keys is one), when the view moved, or when its
 * deadline passed (it then answers nil, as without the bit).  Waiters run
 * again oldest first and a waiter that parks again goes last, so among the
 * waiters of one partition the first to wait is the first served, as
 * Redis serves its blocked clients.  A waiter whose issuer left the
 * topology is dropped without running: nobody would receive what it pops
 * (asked when the view moved - a node leaving moves it).
 *
 * Checked right after every write a primary runs (primary_execute,
 * txn_execute), so the waiters are served before the next operation runs -
 * a client that arrives after the push cannot take the element from one
 * that waited, and a BLMOVE's push serves the next waiter in the same step,
 * as Redis serves its blocked clients after the command that pushed - and
 * after every round of the data thread's loop for the rest (a view that
 * moved, a deadline, a clear); a waiter costs a few loads a check.
 */
#include <string.h>

#include "lattice/alloc.h"
#include "lattice/clock.h"
#include "lattice/log.h"
#include "ops_int.h"

typedef struct bwait {
    struct bwait *next;
    uint64_t cache_serial, counter, major, meta;
    uint64_t deadline_ms; /* lt_wall_ms (0: none) */
    uint32_t partition;
    deferred_read *op;
} bwait;

lattice_status bwait_park(lattice_ops *d, lattice_meta_cache *c, const exec_in *in, const origin *org,
                          const char *origin_id, uint64_t seq)
{
    if (!org->local && seq && origin_id && origin_id[0] && !chan_peer_by_id(d, origin_id)) {
        /* Sent before its issuer left and received after this node saw it
         * go: no later view change would drop it, so it never waits. */
        LT_LOG(LT_INFO, "data", "partition %u: a blocking pop of node %s dropped: that node left", in->partition,
               origin_id);
        return LATTICE_OK;
    }
    if (seq && origin_id)
        for (bwait *x = d->bwaits; x; x = x->next)
            if (x->op->seq == seq && !strcmp(x->op->origin_id, origin_id)) {
                /* A resend of a request waiting here (its issuer retried):
                 * one waiter, answering the newest send. */
                x->op->org = *org;
                return LATTICE_OK;
            }
    bwait *w = lt_malloc(sizeof *w);
    deferred_read *op = w ? deferred_new(in, org, origin_id, seq) : NULL;
    if (!op) {
        lt_free(w);
        return LATTICE_ERR_NOMEM;
    }
    *w = (bwait){NULL, c->serial, c->counter[in->partition], d->major, lattice_meta_version(d->meta), in->ttl_ms,
                 in->partition, op};
    if (d->bwaits_tail) d->bwaits_tail->next = w;
    else d->bwaits = w;
    d->bwaits_tail = w;
    d->bwaiting++;
    return LATTICE_OK;
}

static void drop(lattice_ops *d, bwait *w)
{
    lt_free(w->op);
    lt_free(w);
    d->bwaiting--;
}

static void one_pass(lattice_ops *d);

void bwait_tick(lattice_ops *d)
{
    if (!d->bwaits) return;
    /* A rerun that pops writes, and its write may serve others (BLMOVE's
     * push): they run in the same call, one pass after another, never
     * nested. */
    if (d->bwait_busy) {
        d->bwait_again = true;
        return;
    }
    d->bwait_busy = true;
    do {
        d->bwait_again = false;
        one_pass(d);
    } while (d->bwait_again && d->bwaits);
    d->bwait_busy = false;
}

static void one_pass(lattice_ops *d)
{
    uint64_t meta = lattice_meta_version(d->meta), wall = lt_wall_ms();
    bwait *ready = NULL, **rt = &ready, **pp = &d->bwaits;
    d->bwaits_tail = NULL;
    while (*pp) {
        bwait *w = *pp;
        deferred_read *op = w->op;
        bool view = w->major != d->major || w->meta != meta;
        lattice_meta_cache *c = view ? NULL : lattice_meta_cache_by_serial(d->meta, w->cache_serial);
        bool moved = view || !c || !c->store || c->counter[w->partition] != w->counter ||
                     (w->deadline_ms && wall >= w->deadline_ms);
        if (!moved) {
            d->bwaits_tail = w;
            pp = &w->next;
            continue;
        }
        /* A node that leaves moves the view: only then is the issuer asked for. */
        if (view && !op->org.local && op->seq && op->origin_id[0] && !chan_peer_by_id(d, op->origin_id)) {
            *pp = w->next; /* its issuer is gone: what it would pop would reach nobody */
            LT_LOG(LT_INFO, "data", "partition %u: a blocking pop of node %s dropped: that node left", w->partition,
                   op->origin_id);
            drop(d, w);
            continue;
        }
        *pp = w->next; /* out of the list, in order, before any rerun parks again */
        w->next = NULL;
        *rt = w;
        rt = &w->next;
    }
    while (ready) {
        bwait *next = ready->next;
        lattice_meta_cache *c = lattice_meta_cache_by_serial(d->meta, ready->cache_serial);
        d->bwaiting--;
        ready->op->in.flags |= OPS_WOKEN; /* it waited: keys of another type are passed over now (txn.c) */
        primary_rerun(d, c, ready->op); /* may park it again: last */
        lt_free(ready->op);
        lt_free(ready);
        ready = next;
    }
}

void bwait_stop(lattice_ops *d)
{
    while (d->bwaits) {
        bwait *w = d->bwaits;
        d->bwaits = w->next;
        if (w->op->org.local) {
            retry_later(d, w->op->org.local, LATTICE_ERR_STOPPED);
        } else {
            lattice_op_result r = {.status = LATTICE_ERR_STOPPED};
            chan_complete(d, &w->op->org, &r);
        }
        drop(d, w);
    }
    d->bwaits_tail = NULL;
}
