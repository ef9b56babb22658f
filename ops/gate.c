/*
 * gate: whether this node may serve a cache now, and whether a peer's
 * request is meant for it (data thread, and the RESP IO threads' inline
 * reads through ops_serving_leased).
 *
 * A server serves while it holds its lease (discovery: a majority of the
 * baseline heard it lately), is not fenced (a stalled or paused node stops
 * itself), and the cache is neither frozen by a base switch nor restoring
 * from its data dir.  What it answers when it may not: NO_QUORUM when a
 * majority of the baseline is out of reach (final), else AGAIN (a takeover,
 * a pause just ended, a switch: the issuer retries).  A peer's request
 * names the incarnation it was meant for (the frame's `to`); one meant for
 * an earlier incarnation of this process - TCP delivering what it queued
 * before the process rejoined - is refused as NOT_OWNER.
 */
#include <string.h>

#include "ops_int.h"

bool ops_lease(lattice_ops *d)
{
    /* Without discovery (the stages' unit tests drive them directly) there
     * is no lease to hold; a started node always has one. */
    return !d->disc || lattice_discovery_serving(d->disc, d->incarnation);
}

bool ops_quorum(lattice_ops *d)
{
    if (d->client || !d->disc) return true;
    lattice_quorum q;
    lattice_discovery_quorum(d->disc, &q);
    return q.has_quorum && q.baseline;
}

bool ops_serving_leased(lattice_ops *d, const lattice_meta_cache *c, bool lease)
{
    return lease && !atomic_load_explicit(&d->fenced, memory_order_acquire) &&
           !lattice_meta_frozen(c) && !c->restoring;
}

bool ops_serving(lattice_ops *d, const lattice_meta_cache *c) { return ops_serving_leased(d, c, ops_lease(d)); }

bool ops_no_quorum(lattice_ops *d, int64_t *num) { return ops_no_quorum_leased(d, d->client || ops_lease(d), num); }

bool ops_no_quorum_leased(lattice_ops *d, bool lease, int64_t *num)
{
    /* The lease is the cheap test (a clock read): a node holding one has
     * quorum.  Without it, the lease may be down for a moment only - a
     * takeover in flight, a pause just ended - while a majority of the
     * baseline is still reachable: that retries; no majority is final. */
    if (d->client || !d->disc || lease) return false;
    lattice_quorum q;
    lattice_discovery_quorum(d->disc, &q);
    /* No baseline at all: this server has no topology yet (starting, or
     * restarted and not yet admitted).  It knows nothing of the grid's
     * quorum - that is a wait, not a refusal: the op retries until the node
     * joins or its deadline passes (TRYAGAIN), never "0 of 0 reachable". */
    if (q.has_quorum || !q.baseline) return false;
    if (num) *num = LATTICE_OPS_QUORUM_NUM(q.reachable, q.baseline);
    return true;
}

bool ops_before_incarnation(const lattice_ops *d, uint64_t topo_major)
{
    return topo_major && topo_major < d->self_since_major;
}

addressed_to ops_addressed(const lattice_ops *d, const char *to)
{
    if (!to || !to[0]) return ADDRESSED_UNSAID;
    if (!strcmp(to, d->self_id)) return ADDRESSED_HERE;
    /* The data thread may not know its new id yet: discovery's is current. */
    char now[64] = "";
    if (d->disc) lattice_discovery_local_id(d->disc, now, sizeof now);
    return strcmp(to, now) == 0 ? ADDRESSED_HERE : ADDRESSED_ELSEWHERE;
}

bool ops_not_meant_here(const lattice_ops *d, const origin *o, uint64_t topo_major)
{
    /* The view alone misjudges a joiner: a primary that saw it join routes
     * by that topology, while the joiner's data thread may first have seen
     * a later one (topologies coalesce) - its resent replications were
     * refused, the write unacknowledged, and its retry ran again on the
     * joiner that had received the write's effect with the supplied data
     * (fault_two_joins: an INCR counted twice). */
    if (o->to == ADDRESSED_HERE) return false;
    if (o->to == ADDRESSED_ELSEWHERE) return true;
    return ops_before_incarnation(d, topo_major);
}

lattice_status ops_refusal(lattice_ops *d, int64_t *num)
{
    return ops_no_quorum(d, num) ? LATTICE_ERR_NO_QUORUM : LATTICE_ERR_AGAIN;
}
