/*
 * clean: commit watermarks, so that every read of a full_sync cache is
 * linearizable wherever it is served (data thread).
 *
 * A full_sync write is applied by the primary first and by its copies as
 * CTL_REPLICATE arrives; it is acknowledged once every copy applied it.
 * Between the two, a value is visible somewhere that is not yet committed
 * (others may not have it).  The rules, CRAQ's clean/dirty versions per
 * partition:
 *
 *   primary  a write waiting for its copies is in its partition's in-flight
 *            list (oldest first).  A read of a key with a write in flight
 *            waits for that write (clean_pending_write / clean_defer_read):
 *            the primary never shows a value before it is acknowledged.
 *            The partition's watermark is just below the oldest write in
 *            flight (every version up to it is acknowledged), or its update
 *            counter when nothing is in flight.  When the watermark moves it
 *            goes to every copy (CTL_CLEAN, batched per flush with the other
 *            requests to that peer), and rides along on every replicate.
 *   copy     remembers the newest version it applied by replication and the
 *            newest watermark it heard.  It answers a read itself only while
 *            it applied nothing above the watermark (clean_copy_is_clean);
 *            otherwise the read goes to the primary.  A write the copy has
 *            not received yet is not acknowledged anywhere, so the copy's
 *            older value is still a linearizable answer.
 *
 * A copy that just became one (after a switch or a failover) has heard no
 * watermark: it forwards reads until its primary's next commit tells it.
 * primary_sync and full_async caches keep no list: their reads from backups
 * may be stale by design (docs/CONSISTENCY.md).
 */
#include <string.h>

#include "base/base.h"
#include "lattice/alloc.h"
#include "lattice/clock.h"
#include "ops_int.h"

typedef struct clean_part {
    uint64_t heard;       /* copy: newest watermark its primary sent */
    uint64_t applied;     /* copy: newest replicated version applied */
    uint64_t notified;    /* primary: the watermark last sent to the copies */
    uint64_t cap;         /* a watermark and delta mark it may never pass (capped: see cap_at) */
    uint64_t sender;      /* copy: hash of the primary whose writes it applied last (0: none yet) */
    uint8_t role;         /* the last role this node had: ROLE_PRIMARY / ROLE_COPY (0: none yet) */
    bool capped;
    uint32_t levelling;   /* copy: CTL_LEVEL requests not answered yet (takeover.c) */
    waitw *head, *tail;   /* primary: writes in flight, oldest first */
} clean_part;

enum { ROLE_PRIMARY = 1, ROLE_COPY = 2 };

typedef struct clean_cache {
    uint32_t parts;
    clean_part p[];
} clean_cache;

static clean_cache *state(lattice_meta_cache *c)
{
    if (c->clean) return c->clean;
    clean_cache *cc = lt_calloc(1, sizeof *cc + c->cfg.partitions * sizeof cc->p[0]);
    if (!cc) return NULL;
    cc->parts = c->cfg.partitions;
    c->clean = cc;
    return cc;
}

static uint64_t key_hash(const void *key, size_t len)
{
    return lt_fnv1a(key, len);
}

/* From here on, this copy's contents above v may not be the grid's (it
 * applied writes nobody acknowledged, whose counters another primary gave
 * other writes): its watermark and every delta mark stay at or below v for
 * as long as the copy lives, whatever role it takes next. */
static void cap_at(clean_part *cp, uint64_t v)
{
    if (!cp->capped || v < cp->cap) cp->cap = v;
    cp->capped = true;
}

void clean_begin(lattice_ops *d, lattice_meta_cache *c, waitw *w, uint32_t partition, uint64_t version,
                 const void *key, size_t key_len)
{
    (void)d;
    clean_cache *cc = state(c);
    if (!cc || partition >= cc->parts) return; /* untracked: reads of it are not held back (NOMEM only) */
    w->c = c;
    w->partition = partition;
    w->version = version;
    w->key_hash = key_hash(key, key_len);
    w->linked = true;
    clean_part *cp = &cc->p[partition];
    cp->role = ROLE_PRIMARY;
    if (cp->tail) cp->tail->cnext = w;
    else cp->head = w;
    cp->tail = w;
}

uint64_t clean_committed(const lattice_meta_cache *c, uint32_t partition)
{
    const clean_cache *cc = c->clean;
    const clean_part *cp = cc && partition < cc->parts ? &cc->p[partition] : NULL;
    uint64_t wm = cp && cp->head ? cp->head->version - 1 : c->counter[partition];
    return cp && cp->capped && wm > cp->cap ? cp->cap : wm;
}

/* The watermark to every copy that gets the partition's writes. */
static void tell_copies(lattice_ops *d, lattice_meta_cache *c, uint32_t partition, uint64_t wm)
{
    lattice_meta_member *owners[2 * (LATTICE_CACHE_MAX_BACKUPS + 1)];
    size_t n = lattice_meta_serving_owners(c, partition, owners, LATTICE_CACHE_MAX_BACKUPS + 1);
    n += lattice_meta_moving_owners(c, partition, owners + n, LATTICE_CACHE_MAX_BACKUPS + 1);
    for (size_t i = 0; i < n; i++) {
        peer *to = peer_of(owners[i]);
        if (to->m.self || !to->dealer) continue;
        Latdata__Req *q = chan_req_new_from(CTL_CLEAN, c->cfg.name, NULL, 0, NULL, 0, NULL);
        if (!q) continue;
        q->partition = partition;
        q->committed = wm;
        q->sender = d->self_id; /* the copy tells one primary's watermarks from another's (clean_note_sender) */
        chan_send(d, to, q);
    }
}

deferred_read *clean_end(lattice_ops *d, waitw *w)
{
    deferred_read *reads = w->reads;
    w->reads = NULL;
    w->done = true;
    lattice_meta_cache *c = w->c;
    clean_cache *cc = c ? c->clean : NULL;
    if (!cc) return reads;
    clean_part *cp = &cc->p[w->partition];
    if (w->rejected) {
        /* Not acknowledged: a copy refused it (a newer primary numbers its
         * own writes from the same counters) or this side lost its lease.
         * The watermark and every delta mark of this copy must stay below
         * it for as long as the copy lives, whatever role it takes next:
         * the counter passes it once the list empties, and a delta mark
         * above it would skip the new primary's writes of the same
         * counters (salvage.c: the kept copy of a cut-off primary).  Such a
         * primary was deposed and rejoins under a new id; the cost of the
         * cap while it lives is only that its copies forward reads. */
        cap_at(cp, w->version - 1);
    }
    while (cp->head && cp->head->done) {
        waitw *h = cp->head;
        cp->head = h->cnext;
        h->cnext = NULL;
        h->c = NULL;
        h->linked = false;
        /* Waits end out of order (a topology change releases them in any
         * order): one that ended behind an older one stayed listed, and
         * is freed only now that it leaves the list. */
        if (h->finished) lt_free(h);
    }
    if (!cp->head) cp->tail = NULL;
    fast_mark(c, w->partition); /* may be readable again: re-checked at the settle */
    uint64_t wm = clean_committed(c, w->partition);
    if (wm > cp->notified) {
        cp->notified = wm;
        tell_copies(d, c, w->partition, wm);
    }
    return reads;
}

/* A transaction's other keys (txn.c). */
static bool has_hash(const waitw *w, uint64_t h)
{
    for (size_t i = 0; i < w->n_more_keys; i++)
        if (w->more_keys[i] == h) return true;
    return false;
}

waitw *clean_pending_write(lattice_ops *d, lattice_meta_cache *c, uint32_t partition, const void *key,
                           size_t key_len)
{
    (void)d;
    clean_cache *cc = c->clean;
    if (!cc || partition >= cc->parts || !cc->p[partition].head) return NULL;
    uint64_t h = key_hash(key, key_len);
    waitw *last = NULL; /* the newest write of the key: the read must see it */
    for (waitw *w = cc->p[partition].head; w; w = w->cnext)
        if (!w->done && (w->key_hash == h || has_hash(w, h))) last = w;
    return last;
}

deferred_read *deferred_new(const exec_in *in, const origin *org, const char *origin_id, uint64_t seq)
{
    size_t id_len = origin_id ? strlen(origin_id) : 0;
    deferred_read *r = lt_malloc(sizeof *r + in->key_len + in->value_len);
    if (!r || id_len >= sizeof r->origin_id) {
        lt_free(r);
        return NULL;
    }
    r->in = *in;
    memcpy(r->key, in->key, in->key_len);
    r->in.key = r->key;
    if (in->value_len) memcpy(r->key + in->key_len, in->value, in->value_len);
    r->in.value = in->value_len ? r->key + in->key_len : NULL;
    r->org = *org;
    r->seq = seq;
    memcpy(r->origin_id, origin_id ? origin_id : "", id_len + 1);
    r->next = NULL;
    return r;
}

lattice_status clean_defer_write(waitw *w, const exec_in *in, const origin *org, const char *origin_id,
                                 uint64_t seq)
{
    deferred_read *r = deferred_new(in, org, origin_id, seq);
    if (!r) return LATTICE_ERR_NOMEM;
    r->next = w->reads;
    w->reads = r;
    return LATTICE_OK;
}

lattice_status clean_defer_read(waitw *w, const exec_in *in, const origin *org)
{
    exec_in read = *in;
    read.value = NULL;
    read.value_len = 0;
    return clean_defer_write(w, &read, org, NULL, 0); /* a plain read has no resend record */
}

bool clean_take_over(lattice_meta_cache *c, uint32_t partition, uint64_t *from)
{
    clean_cache *cc = c->clean;
    if (!cc || partition >= cc->parts) return false;
    clean_part *cp = &cc->p[partition];
    /* Its role stays as it was until it leads a write (clean_begin, the
     * levelling's first): a copy's delta mark is the watermark it heard,
     * a primary's its counter - and a copy's counter may count writes
     * nobody acknowledged (a load takes what its supplier applied), which
     * a side without quorum, where this node leads but writes nothing,
     * never acknowledges.  A mark at that counter made a rejoin's delta
     * skip the majority's writes under the same counters
     * (fault_partition_two_of_five: 2 acknowledged SETs missing on the
     * rejoined node). */
    if (cp->role != ROLE_COPY || cp->applied <= cp->heard) return false; /* all it holds was acknowledged: on every copy */
    *from = cp->heard;
    return true;
}

bool clean_note_sender(lattice_meta_cache *c, uint32_t partition, const char *sender, uint64_t *from)
{
    clean_cache *cc = state(c);
    if (!cc || partition >= cc->parts || !sender || !*sender) return false;
    clean_part *cp = &cc->p[partition];
    uint64_t h = lt_fnv1a(sender, strlen(sender)) | 1;
    /* Another primary's stream.  What this copy applied of the old one's
     * above its last watermark may never have been acknowledged - a primary
     * cut off with this copy on its side, or deposed - and the new primary
     * numbers its writes from its own counter, reusing those numbers: the
     * copy's history calls them applied (contig) and the new primary's
     * watermark covers them, so a mark min(heard, contig) would skip the
     * new primary's writes of the same counters (fault_partition_two_of_five,
     * backups=2: a cut-off backup heard the majority's watermark before it
     * rejoined).  A switch after the old primary drained (every applied
     * write acknowledged and heard) needs no cap. */
    bool level = cp->sender && cp->sender != h && cp->applied > cp->heard;
    if (level) {
        cap_at(cp, cp->heard);
        *from = cp->heard;
    }
    cp->sender = h;
    return level;
}

void clean_level_begin(lattice_meta_cache *c, uint32_t partition)
{
    clean_cache *cc = state(c);
    if (cc && partition < cc->parts) cc->p[partition].levelling++;
}

void clean_level_end(lattice_meta_cache *c, uint32_t partition)
{
    clean_cache *cc = c->clean;
    if (cc && partition < cc->parts && cc->p[partition].levelling) cc->p[partition].levelling--;
}

void clean_note_applied(lattice_meta_cache *c, uint32_t partition, uint64_t version)
{
    clean_cache *cc = state(c);
    if (cc && partition < cc->parts && version > cc->p[partition].applied) cc->p[partition].applied = version;
}

void clean_note_committed(lattice_meta_cache *c, uint32_t partition, uint64_t committed)
{
    clean_cache *cc = state(c);
    if (cc && partition < cc->parts) cc->p[partition].role = ROLE_COPY;
    if (cc && partition < cc->parts && committed > cc->p[partition].heard) cc->p[partition].heard = committed;
}

bool clean_mark(const lattice_meta_cache *c, uint32_t partition, uint64_t *mark)
{
    if (c->cfg.sync != LATTICE_SYNC_FULL || partition >= c->cfg.partitions) return false;
    const clean_cache *cc = c->clean;
    if (!cc || partition >= cc->parts || !cc->p[partition].role) return false;
    /* As the partition's primary last: its own watermark; as a copy: the
     * newest one its primary sent - but never above a write this node
     * applied as primary and nobody acknowledged: a deposed primary that
     * heard the new primary's watermark later (as its copy, before it
     * rejoined) still holds its own write under a counter the new primary
     * gave another one, and its history's contig counts it as applied. */
    const clean_part *cp = &cc->p[partition];
    *mark = cp->role == ROLE_PRIMARY ? clean_committed(c, partition) : cp->heard;
    if (cp->capped && *mark > cp->cap) *mark = cp->cap;
    return true;
}

bool clean_delta_mark(const lattice_meta_cache *c, uint32_t p, uint64_t *mark)
{
    if (!c->store || !c->cfg.history) return false;
    lattice_store_history_stat hs;
    lattice_store_history_info(c->store, p, &hs);
    if (!hs.valid || hs.lost) return false;
    if (!clean_mark(c, p, mark)) {
        /* Nobody wrote it while this node held it - it neither led it nor
         * heard a watermark - and its history is complete from counter 0:
         * it holds every write up to 0 (none).  A delta from 0 is then
         * whatever the grid wrote since, as exact as a full copy; without a
         * mark the never-written partitions of an idle cache came back "in
         * full" (empty loads, counted as such: it_rebalance delta). */
        if (c->counter[p] != 0 || hs.base != 0) return false;
        *mark = 0;
    }
    if (*mark > hs.contig) *mark = hs.contig;
    return true;
}

bool clean_copy_is_clean(const lattice_meta_cache *c, uint32_t partition)
{
    const clean_cache *cc = c->clean;
    if (!cc || partition >= cc->parts) return true; /* nothing applied by replication yet */
    /* Levelling (takeover.c): it may hold writes nobody acknowledged,
     * under counters its new primary's watermark covers. */
    return cc->p[partition].applied <= cc->p[partition].heard && !cc->p[partition].levelling;
}

void clean_cache_gone(lattice_meta_cache *c)
{
    clean_cache *cc = c->clean;
    if (!cc) return;
    for (uint32_t p = 0; p < cc->parts; p++)
        for (waitw *w = cc->p[p].head, *n; w; w = n) {
            n = w->cnext;
            w->cnext = NULL;
            w->linked = false;
            if (w->finished) lt_free(w);
            else w->c = NULL; /* its wait completes; its reads are answered AGAIN (primary.c) */
        }
    lt_free(cc);
    c->clean = NULL;
}
