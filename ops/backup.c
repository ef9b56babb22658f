/*
 * backup: backup apply (data thread).
 *
 * A copy of a partition - a backup among its serving owners, or a MOVING
 * owner being filled by rebalance - receives every write its primary
 * applied as CTL_REPLICATE: (key, value, absolute expiry, version) or a
 * remove.  It applies a write or a remove only if its version is newer
 * than the stored one (LATTICE_STORE_IF_NEWER: an older write arriving late,
 * or again, changes nothing) and raises its own update counter to it, so after a failover the
 * new primary numbers its writes above everything it saw.  It keeps the
 * write's resend record (dedup.c), so should it become primary a resend
 * gets the first result, and tells a partition that is loading about a
 * remove (rebal_exec.c: supplied data must not bring the key back).  Then
 * it answers, which releases one share of the primary's full_sync wait.
 * It notes the version applied and the primary's commit watermark, which
 * say whether it may answer reads itself (clean.c).  A write from a deposed
 * primary (an older view that names another primary) is refused with
 * NOT_OWNER, so that primary does not acknowledge it.  A write this copy
 * has no room for is answered REGION_FULL and changes nothing here (a copy
 * never makes room on its own: the copies would differ); a full_sync
 * primary then undoes the write everywhere (primary.c).
 */
#include <string.h>

#include "lattice/log.h"
#include "ops_int.h"


/* A write from a primary whose view is older than ours, and that is not the
 * partition's serving primary in ours, comes from a deposed primary (paused,
 * cut off, or left): applying it could overwrite what the new primary
 * acknowledged since.  A sender with the same or a newer view is the
 * primary of that view. */
static bool from_deposed_primary(lattice_ops *d, lattice_meta_cache *c, const Latdata__Req *q)
{
    if (!q->sender || !q->sender[0]) return false; /* a peer that does not name itself: as before */
    uint64_t mv = lattice_meta_version(d->meta);
    bool older = q->topo_major < d->major || (q->topo_major == d->major && q->meta_version < mv);
    if (!older) return false;
    lattice_meta_member *own[1];
    if (q->partition >= c->cfg.partitions || lattice_meta_serving_owners(c, q->partition, own, 1) != 1) return true;
    return strcmp(own[0]->id, q->sender) != 0;
}

void backup_apply(lattice_ops *d, const Latdata__Req *q, const origin *o)
{
    lattice_op_result r = {0};
    lattice_meta_cache *c = lattice_meta_valid(d->meta) ? lattice_meta_cache_of(d->meta, q->cache) : NULL;
    if (c && (from_deposed_primary(d, c, q) || ops_not_meant_here(d, o, q->topo_major))) {
        r.status = LATTICE_ERR_NOT_OWNER;
        if (d->repl_failed++ % 1000 == 0)
            LT_LOG(LT_WARN, "data", "cache %s: refused a replicated write from %s: not the partition's primary in this view, or meant for an earlier incarnation of this node (%llu so far)",
                   q->cache, q->sender && q->sender[0] ? q->sender : "a peer", (unsigned long long)d->repl_failed);
        if (q->id) chan_reply(d, o, &r, NULL, 0, false);
        return;
    }
    uint64_t from;
    if (c && clean_note_sender(c, q->partition, q->sender, &from)) /* before this write counts as applied */
        takeover_ask(d, c, q->partition, from, q->sender);
    if (!c) r.status = LATTICE_ERR_NO_CACHE;
    else if (q->kind == CTL_REPLICATE_TXN) r.status = txn_apply_copy(d, c, q);
    else if (q->value_type > LATTICE_STORE_TYPE_MAX) r.status = LATTICE_ERR_PROTO; /* not a type this build keeps */
    else r.status = exec_replicate_typed(c, q->partition, q->key.data, q->key.len, q->value.data, q->value.len,
                                         q->expire_ms, q->version, q->remove, (uint8_t)q->value_type);
    if (r.status == LATTICE_OK) {
        clean_note_applied(c, q->partition, q->version);
        clean_note_committed(c, q->partition, q->committed);
    }
    if (r.status == LATTICE_OK && q->op_seq) {
        /* Should we become primary, a resend of this write gets this result. */
        lattice_op_result first = {(lattice_status)q->res_status, NULL, 0, q->res_num, q->res_flags};
        dedup_put(d, dedup_origin_hash(q->origin), q->op_seq, &first);
    }
    /* This copy did not apply a write (a full region, say): a full_sync
     * primary undoes it and does not acknowledge it; for the other syncs
     * the copy now lacks it.  Say so, without flooding the log. */
    if (r.status != LATTICE_OK && d->repl_failed++ % 1000 == 0)
        LT_LOG(LT_WARN, "data", "cache %s: a replicated write was not applied here: %s (%llu so far)", q->cache,
               lattice_strerror(r.status), (unsigned long long)d->repl_failed);
    if (c && q->remove && r.status == LATTICE_OK && d->grid_hooks.note_remove) /* rebalance: grid/rebal_exec.c */
        d->grid_hooks.note_remove(c, q->partition, q->key.data, q->key.len, q->version);
    if (q->id) chan_complete(d, o, &r); /* with --data-dir, once the write is durable here */
}

void backup_clean(lattice_ops *d, const Latdata__Req *q)
{
    lattice_meta_cache *c = lattice_meta_valid(d->meta) ? lattice_meta_cache_of(d->meta, q->cache) : NULL;
    if (c && c->store) {
        uint64_t from;
        if (clean_note_sender(c, q->partition, q->sender, &from)) takeover_ask(d, c, q->partition, from, q->sender);
        clean_note_committed(c, q->partition, q->committed);
        fast_mark(c, q->partition); /* the copy may be clean now: re-checked at the settle */
    }
}
