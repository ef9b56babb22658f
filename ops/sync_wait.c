/*
 * sync_wait: the full_sync wait (data thread).
 *
 * A full_sync write is acknowledged after the primary and every live backup
 * and MOVING owner applied it.  The primary creates one wait per write
 * (remaining = 1 for itself), adds one for each copy it forwarded the write
 * to, and releases its own share once it is done sending.  Each copy's
 * answer - or its leaving the topology - releases one share; the last one
 * delivers the primary's result to the issuer.  A replication request has
 * no deadline: a full_sync ack must never skip a live backup (the op times
 * out at its issuer meanwhile).  So it must not be lost on the way either:
 * each keeps a copy of its request, sent again when the connection to its
 * copy lost frames since it went (closed, or refusing a frame while it
 * reconnects: fabric.h's losses), until the copy answers.  Applying a write
 * twice changes nothing (versions: backup.c), and an answer to the first
 * send after the second is one for a settled request, dropped.  Each cache counts its waits
 * (writes_in_flight): the base switch's prepare is answered only once they
 * drained (control.c), so no replication of an old primary is still on the
 * way when the coordinator switches.
 * A copy that answers NO_CACHE has not applied it (its metadata lags: a
 * cache just created): its share stays held and the write goes to it again
 * at the next sweep, until it applies it or the cache is gone here too.
 * A copy that refuses the write (it follows a newer primary: this one was
 * deposed), or a lease that lapsed before the last share came in (this
 * node was cut off or paused, and a copy "left" only because this side
 * removed it), makes the write unacknowledged: the issuer retries, and the
 * primary it finds then executes it (a resend that comes back here is
 * answered TIMEOUT from its record: applied here, refused there, its
 * outcome is unknown).  A copy that refuses it for lack of
 * room (REGION_FULL) gets room: the primary evicts entries that copy also
 * holds (replicated as removes, sent first) and sends the write again, up
 * to 8 rounds (primary_room_for_copy).  Only when that cannot help (nothing
 * it may evict, the rounds spent: a row larger than the copy's region)
 * does the write fail: before answering, the primary puts the key's
 * previous value back everywhere (primary.c, undo_write), so the copies
 * stay equal and the client gets REGION_FULL.
 */
#include <string.h>

#include "lattice/alloc.h"
#include "lattice/log.h"
#include "fabric/fabric.h"
#include "ops_int.h"

waitw *sync_wait_new(lattice_meta_cache *c, const origin *org, const lattice_op_result *r)
{
    waitw *w = lt_calloc(1, sizeof *w);
    if (!w) return NULL;
    w->cache_serial = c->serial;
    c->writes_in_flight++;
    w->org = *org;
    w->res = *r;
    w->remaining = 1; /* the primary's own share, released by it */
    if (r->value_len) {
        w->value = lt_malloc(r->value_len);
        if (w->value) memcpy(w->value, r->value, r->value_len);
        else w->res.value_len = 0;
    }
    return w;
}

void sync_wait_add(lattice_ops *d, waitw *w, pend *p)
{
    p->w = w;
    chan_pend_deadline(d, p, UINT64_MAX);
    w->remaining++;
}

static void wait_done(lattice_ops *d, waitw *w)
{
    if (w->full && !w->rejected && w->on_full && w->on_full(d, w)) return; /* re-armed: ends later */
    /* A copy that left the topology released its share without applying
     * the write.  That is an acknowledgement only while this node still
     * serves: on a cut-off side the copies "left" because this side
     * removed them, and the side with quorum never saw the write. */
    if (!w->rejected && d->disc && !lattice_discovery_serving(d->disc, d->incarnation)) w->rejected = true;
    lattice_meta_cache *c = lattice_meta_cache_by_serial(d->meta, w->cache_serial); /* NULL: destroyed meanwhile */
    if (c) c->writes_in_flight--;
    lattice_op_result r = w->res;
    r.value = w->value;
    if (w->rejected && w->seq) {
        /* Its resend must not find the first attempt's record and be
         * answered OK from it: the copy that refused never applied it.  Nor
         * may it run again here, where it was applied (an increment would
         * count twice).  Routed to the new primary it runs there, which has
         * no record; should it come back here, its outcome is unknown. */
        lattice_op_result unknown = {.status = LATTICE_ERR_TIMEOUT};
        dedup_put(d, w->oh, w->seq, &unknown);
    }
    if (!w->rejected) {
        chan_complete(d, &w->org, &r);
    } else if (w->org.local) {
        /* A copy follows a newer primary: this node's write is not
         * acknowledged; the issuer goes again, to the primary it finds. */
        retry_later(d, w->org.local, LATTICE_ERR_AGAIN);
    } else {
        lattice_op_result again = {.status = LATTICE_ERR_AGAIN};
        chan_complete(d, &w->org, &again);
    }
    if (w->after) w->after(d, w);
    lt_free(w->value);
    w->value = NULL;
    /* Still in its partition's in-flight list (an older write there is
     * not done yet): clean.c frees it when it leaves the list. */
    if (w->linked) w->finished = true;
    else lt_free(w);
}

void sync_wait_release(lattice_ops *d, waitw *w)
{
    if (--w->remaining <= 0) wait_done(d, w);
}

/* A copy answered NO_CACHE: its metadata is behind this node's (the cache
 * was just created) and it applied nothing, so its share stays held - by a
 * new pending request to the same copy, carrying the request, which the
 * next sweep sends again (sync_wait_resend).  False when that cannot be (the
 * cache is gone here too, the copy left, no memory): the share goes. */
static bool rearm(lattice_ops *d, pend *p)
{
    peer *to = chan_peer_by_id(d, p->target);
    if (!p->resend || !to || !to->dealer || !lattice_meta_cache_by_serial(d->meta, p->w->cache_serial)) return false;
    pend *n = chan_pend_new(d, sync_wait_settle, to);
    if (!n) return false;
    n->w = p->w;
    chan_pend_deadline(d, n, UINT64_MAX);
    n->resend = p->resend;
    n->resend->id = n->id;
    n->sent_losses = to->dealer->losses - 1; /* "lost since": the sweep sends it */
    p->resend = NULL;
    d->repl_no_cache++;
    return true;
}

void sync_wait_settle(lattice_ops *d, pend *p, const Latdata__Resp *rs)
{
    if (rs && rs->status == LATTICE_ERR_NO_CACHE && rearm(d, p)) return;
    /* A copy without room for the write: its primary makes room there (it
     * evicts entries that copy also holds, replicated as removes) and sends
     * the write again, for a bounded number of rounds (primary.c). */
    bool answered = false;
    if (rs && rs->status == LATTICE_ERR_REGION_FULL && primary_room_for_copy(d, p, &answered)) {
        if (!answered) return; /* p's share now rides on the request sent again */
        lt_free(p->resend);
        p->resend = NULL;
        sync_wait_release(d, p->w);
        return;
    }
    lt_free(p->resend);
    p->resend = NULL;
    /* Applied or not, this copy has answered (or left); one that refused the
     * write because it follows a newer primary means we are deposed. */
    if (rs && rs->status == LATTICE_ERR_NOT_OWNER) p->w->rejected = true;
    /* One without room for it: the write must not be acknowledged, and the
     * copies that applied it must get the previous value back (primary.c). */
    if (rs && rs->status == LATTICE_ERR_REGION_FULL) p->w->full = true;
    sync_wait_release(d, p->w);
}

void sync_wait_resend(lattice_ops *d)
{
    uint64_t before = d->repl_resent;
    const char *last = NULL;
    for (const fab_pend_node *e = fab_pending_first(d->pending); e; e = fab_pending_after(e)) {
        pend *p = fab_pend_item(e);
        if (!p->resend) continue;
        peer *to = chan_peer_by_id(d, p->target);
        if (!to || !to->dealer || to->dealer->losses == p->sent_losses) continue;
        Latdata__Req *q = chan_req_dup(p->resend);
        if (!q) continue;
        p->sent_losses = to->dealer->losses; /* a send that fails again moves it on: next sweep */
        if (chan_send(d, to, q) == LATTICE_OK) d->repl_resent++;
        last = to->m.id;
    }
    uint64_t now = lt_mono_ms();
    if (d->repl_resent != before && now - d->resend_logged_ms >= 1000) {
        d->resend_logged_ms = now;
        LT_LOG(LT_INFO, "data", "sent %llu full_sync replications again (the connection to %s lost frames, or the copy did not know the cache yet; %llu so far)",
               (unsigned long long)(d->repl_resent - before), last, (unsigned long long)d->repl_resent);
    }
}
