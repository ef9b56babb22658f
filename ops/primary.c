/*
 * primary: primary execution with de-duplication (data thread).
 *
 *  primary_serve    a request that arrived on our data port: the primary checks
 *                   it is the serving primary in its own view (else
 *                   NOT_OWNER: the issuer retries), that it may serve now -
 *                   its lease holds, it is not leaving, no base switch
 *                   froze the cache (else AGAIN) - then executes.  A read
 *                   of a key with a full_sync write in flight waits for
 *                   that write (clean.c).
 *  primary_execute  a resend of a write applied before gets its first
 *                   result (dedup.c); otherwise exec_local runs the op and
 *                   the write goes to every other serving owner and every
 *                   MOVING owner (CTL_REPLICATE, applied by backup.c); the
 *                   acknowledgement follows the cache's sync: full_sync once
 *                   every copy answered (sync_wait.c), else at once.  A
 *                   full_sync write one copy has no room for is undone on
 *                   every copy and fails with REGION_FULL (undo_write).
 *
 * The op itself runs in types/ (exec_local: value semantics, the update
 * counter a write takes); the data thread is the one writer of
 * every partition this node is primary of, so a read-modify-write is atomic.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lattice/alloc.h"
#include "lattice/log.h"
#include "fabric/fabric.h"
#include "ops_int.h"


/* ------------------------------------------------------------ the primary */

bool ops_is_read(int kind)
{
    return kind == LATTICE_OP_GET || kind == LATTICE_OP_TTL || kind == LATTICE_OP_CONTAINS ||
           kind == LATTICE_OP_COLL_READ;
}

lattice_status primary_check_limits(const lattice_meta_cache *c, const lattice_op *op)
{
    if (op->kind < LATTICE_OP_GET || op->kind > LATTICE_OP_KIND_MAX_ || (op->flags & ~LATTICE_OP_FLAGS_ALL_))
        return LATTICE_ERR_INVAL;
    if (op->kind == LATTICE_OP_SIZE || walk_is_kind(op->kind)) return LATTICE_OK;
    if (op->key_len == 0) return LATTICE_ERR_INVAL;
    /* The grid's own records (a transaction's prepared rows and decisions):
     * only a transaction's own steps name them (txn.c checks those). */
    if (op->kind != LATTICE_OP_TXN && *(const uint8_t *)op->key == LATTICE_STORE_RESERVED_BYTE)
        return LATTICE_ERR_RESERVED_KEY;
    /* A transaction's value holds its sub-operations, each checked by txn.c. */
    size_t vmax = op->kind == LATTICE_OP_TXN ? (size_t)DATA_MAX_FRAME / 2 : c->cfg.max_value_bytes;
    if (op->key_len > c->cfg.max_key_bytes || op->value_len > vmax) return LATTICE_ERR_TOO_LARGE;
    return LATTICE_OK;
}

/* A read parked behind a write runs once that write is acknowledged, if
 * this node still serves the partition as primary. */
void primary_rerun(lattice_ops *d, lattice_meta_cache *c, deferred_read *rd)
{
    lattice_meta_member *own[1];
    bool mine = c && ops_serving(d, c) && lattice_meta_serving_owners(c, rd->in.partition, own, 1) == 1 &&
                own[0]->self;
    if (mine) {
        primary_execute(d, c, &rd->in, &rd->org, rd->seq ? rd->origin_id : NULL, rd->seq);
    } else if (rd->org.local) {
        retry_later(d, rd->org.local, LATTICE_ERR_NOT_OWNER);
    } else {
        lattice_op_result again = {.status = LATTICE_ERR_NOT_OWNER};
        chan_complete(d, &rd->org, &again);
    }
}

/* The previous state of a key a full_sync write changes, kept until the
 * write is acknowledged: should a copy have no room for the write, the
 * primary writes this back everywhere (with a new version) instead of
 * acknowledging.  Allocated in one piece: key, then origin id, then value. */
typedef struct undo_rec {
    uint32_t partition;
    bool had_old;
    int round; /* 0: the write was refused; 1: writing the previous value back was */
    uint64_t old_expire, oh, seq;
    size_t key_len, old_len;
    const char *origin_id; /* NULL: the write carried no op sequence */
    char *key;
    char *old;
    uint8_t old_type; /* the previous value's type, written back with it */
    char buf[];
} undo_rec;

static undo_rec *undo_capture(const lattice_meta_cache *c, const exec_in *in, const char *origin_id, uint64_t seq)
{
    void *old = NULL;
    lattice_store_meta meta = {0};
    int st = lattice_store_get_copy(c->store, in->partition, in->key, in->key_len, &old, &meta);
    if (st != LATTICE_OK && st != LATTICE_ERR_NOT_FOUND) return NULL;
    size_t idn = seq && origin_id ? strlen(origin_id) + 1 : 0;
    size_t oldn = st == LATTICE_OK ? meta.value_len : 0;
    undo_rec *u = lt_malloc(sizeof *u + in->key_len + idn + oldn);
    if (u) {
        *u = (undo_rec){in->partition, st == LATTICE_OK, 0, meta.expire_ms, dedup_origin_hash(seq ? origin_id : NULL), seq,
                        in->key_len, oldn, NULL, u->buf, u->buf + in->key_len + idn, meta.type};
        memcpy(u->key, in->key, in->key_len);
        if (idn) u->origin_id = memcpy(u->buf + in->key_len, origin_id, idn);
        if (oldn) memcpy(u->old, old, oldn);
    }
    lt_free(old);
    return u;
}

/* Sends the write to every other serving owner, then every MOVING owner;
 * with w, each answer releases one share of it. */
void primary_send_copies(lattice_ops *d, lattice_meta_cache *c, int kind, uint32_t partition, const void *key,
                         size_t key_len, const repl_out *repl, const char *origin_id, uint64_t seq,
                         const lattice_op_result *r, waitw *w)
{
    lattice_meta_member *owners[2 * (LATTICE_CACHE_MAX_BACKUPS + 1)];
    size_t n = lattice_meta_serving_owners(c, partition, owners, LATTICE_CACHE_MAX_BACKUPS + 1);
    n += lattice_meta_moving_owners(c, partition, owners + n, LATTICE_CACHE_MAX_BACKUPS + 1);
    uint64_t committed = clean_committed(c, partition);
    for (size_t i = 0; i < n; i++) {
        peer *to = peer_of(owners[i]);
        if (to->m.self || !to->dealer) continue;
        Latdata__Req *q = chan_req_new_from(kind, c->cfg.name, key, key_len, repl->value, repl->value_len,
                                            seq ? origin_id : NULL);
        if (!q) continue;
        q->partition = partition;
        q->expire_ms = repl->expire_ms;
        q->version = repl->version;
        q->remove = repl->remove;
        q->value_type = repl->type; /* 0 for a string: not encoded, the message as before types */
        q->committed = committed;
        q->sender = d->self_id;
        q->topo_major = d->major;
        q->meta_version = lattice_meta_version(d->meta);
        if (seq) {
            q->op_seq = seq;
            q->res_status = r->status;
            q->res_num = r->num;
            q->res_flags = r->flags;
        }
        if (w) {
            pend *p = chan_pend_new(d, sync_wait_settle, to);
            if (!p) {
                lt_free(q);
                continue;
            }
            sync_wait_add(d, w, p);
            q->id = p->id;
            p->resend = chan_req_dup(q); /* NULL (NOMEM): not resent, as before */
            p->sent_losses = to->dealer->losses;
        }
        chan_send(d, to, q);
    }
}

/* A copy had no room for the write: nothing may acknowledge it, and the
 * copies that applied it (this one included) must hold what they held
 * before, or they would differ from the copy that refused.  So the previous
 * value (or the key's absence) is written back here with the next version
 * and replicated like any write, on the same wait: the key stays in flight
 * and the partition's watermark below the refused write until every copy
 * has the previous value again, so no read ever shows the refused value as
 * committed.  Then the issuer gets REGION_FULL.  A copy that refused the
 * write still holds the previous row, so writing it back there needs no
 * room; elsewhere it can fail only if the previous value was longer and the
 * region filled meanwhile: then (here, or on a copy: round 1) the key is
 * removed everywhere instead, which always fits (logged). */
lattice_meta_cache *primary_undo_begin(waitw *w, int *round)
{
    lattice_op_result full = {.status = LATTICE_ERR_REGION_FULL};
    w->full = false;
    lt_free(w->value);
    w->value = NULL;
    w->res = full;
    if ((*round)++ > 0) w->on_full = NULL;
    return w->c && w->c->store ? w->c : NULL; /* w->c: NULL once the cache is gone (clean.c) */
}

static bool undo_write(lattice_ops *d, waitw *w)
{
    undo_rec *u = w->undo;
    lattice_op_result full = {.status = LATTICE_ERR_REGION_FULL};
    lattice_meta_cache *c = primary_undo_begin(w, &u->round);
    if (!c) return false; /* nothing left to undo: just refuse */
    uint64_t version = ++c->counter[u->partition];
    fast_mark(c, u->partition);
    repl_out repl = {true, !u->had_old, u->old, u->old_len, u->old_expire, version, u->old_type};
    int st = LATTICE_ERR_NOT_FOUND;
    if (u->round > 1)
        LT_LOG(LT_WARN, "data", "cache %s: a copy had no room to undo a refused write: the key is removed",
               c->cfg.name);
    else if (u->had_old) {
        lattice_store_entry e = {u->partition, u->key, u->key_len, u->old, u->old_len, u->old_expire, version, u->old_type};
        st = lattice_store_put(c->store, &e, 0);
        if (st != LATTICE_OK)
            LT_LOG(LT_WARN, "data", "cache %s: a refused write could not be undone here (%s): the key is removed",
                   c->cfg.name, lattice_strerror(st));
    }
    if (st != LATTICE_OK) {
        repl = (repl_out){true, true, NULL, 0, 0, version, 0};
        lattice_store_remove_v(c->store, u->partition, u->key, u->key_len, version);
    }
    c->writes++;
    if (u->seq) dedup_put(d, u->oh, u->seq, &full); /* a resend gets the refusal, not the first OK */
    w->remaining = 1;
    primary_send_copies(d, c, CTL_REPLICATE, u->partition, u->key, u->key_len, &repl, u->origin_id, u->seq, &full, w);
    sync_wait_release(d, w);
    return true;
}

int primary_room_action(lattice_meta_cache *c, uint32_t partition, const void *key, size_t key_len,
                        uint64_t version)
{
    lattice_store_meta m = {0};
    int st = lattice_store_get(c->store, partition, key, key_len, NULL, 0, &m);
    if (st == LATTICE_ERR_NOT_FOUND) return ROOM_REMOVE;
    if (st != LATTICE_OK && st != LATTICE_ERR_TOO_LARGE) return ROOM_NONE;
    if (m.version == version) return ROOM_EVICT;
    return m.version > version ? ROOM_SUPERSEDED : ROOM_NONE;
}

/* Rounds of making room for one write: each evicts twice what the last
 * did (1, 2, 4 ... 128 entries asked for; the region evicts whole pages of
 * heads, so often more), then the write is refused as before. */
#define ROOM_ROUNDS 8

bool primary_room_for_copy(lattice_ops *d, pend *p, bool *answered)
{
    *answered = false;
    waitw *w = p->w;
    Latdata__Req *q = p->resend;
    if (!q || q->kind != CTL_REPLICATE || q->remove || !d->region_evict || w->room_rounds >= ROOM_ROUNDS)
        return false;
    lattice_meta_cache *c = lattice_meta_cache_by_serial(d->meta, w->cache_serial);
    peer *to = chan_peer_by_id(d, p->target);
    lattice_meta_member *own[1];
    if (!c || !c->store || !to || !to->dealer || q->partition >= c->cfg.partitions || !ops_serving(d, c) ||
        lattice_meta_serving_owners(c, q->partition, own, 1) != 1 || !own[0]->self)
        return false; /* not the primary any more: only a primary evicts */
    int act = primary_room_action(c, q->partition, q->key.data, q->key.len, q->version);
    if (act == ROOM_EVICT) {
        size_t want = (size_t)1 << w->room_rounds;
        if (evict_for_copy(d, c, p->target, want, q->partition, q->key.data, q->key.len) == 0) return false; /* nothing here it also holds may go */
        /* The removes go out before the write again, on the same
         * connection: the copy frees those rows first. */
        evict_flush(d);
        /* The eviction may have taken the key itself: then its remove is
         * on its way, and the write must not follow it. */
        act = primary_room_action(c, q->partition, q->key.data, q->key.len, q->version);
    }
    if (act == ROOM_NONE) return false;
    if (act == ROOM_SUPERSEDED) {
        /* A newer write of the key went to the copy after this one (same
         * connection, in order): the copy gets the key's newer state, and
         * this write needs no room there any more. */
        *answered = true;
        return true;
    }
    if (act == ROOM_REMOVE) {
        /* The key is gone here since (a remove or an eviction, which went
         * to the copy after the write, or it expired): sending the write
         * again would bring it back there.  A remove at the write's version
         * leaves the copy as this node is, and never needs room. */
        q->remove = true;
        q->value.data = NULL;
        q->value.len = 0;
        q->expire_ms = 0;
    }
    w->room_rounds++;
    pend *n = chan_pend_new(d, sync_wait_settle, to);
    Latdata__Req *again = n ? chan_req_dup(q) : NULL;
    if (!again) {
        /* No memory: its share stays with no request for it would hang
         * the write; refuse it as before. */
        if (n) lt_free(chan_pend_take(d, n->id));
        return false;
    }
    n->w = w;
    chan_pend_deadline(d, n, UINT64_MAX);
    n->resend = q;
    n->resend->id = n->id;
    again->id = n->id;
    n->sent_losses = to->dealer->losses;
    p->resend = NULL;
    chan_send(d, to, again);
    return true;
}

void primary_after_write(lattice_ops *d, waitw *w)
{
    lattice_meta_cache *c = w->c;
    deferred_read *rd = clean_end(d, w);
    while (rd) {
        deferred_read *next = rd->next;
        primary_rerun(d, c, rd);
        lt_free(rd);
        rd = next;
    }
    lt_free(w->undo);
    w->undo = NULL;
}

waitw *primary_wait_begin(lattice_ops *d, lattice_meta_cache *c, const origin *org, const lattice_op_result *r,
                          bool (*on_full)(lattice_ops *d, waitw *w), void *undo, void (*after)(lattice_ops *d, waitw *w),
                          uint32_t partition, uint64_t version, const void *key, size_t key_len)
{
    waitw *w = sync_wait_new(c, org, r);
    if (!w) return NULL;
    w->after = after;
    w->on_full = on_full;
    w->undo = undo;
    clean_begin(d, c, w, partition, version, key, key_len);
    return w;
}

void primary_execute(lattice_ops *d, lattice_meta_cache *c, const exec_in *in, const origin *org, const char *origin_id,
                     uint64_t seq)
{
    lattice_op_result r;
    repl_out repl;
    bool full_sync = c->cfg.sync == LATTICE_SYNC_FULL;
    if (!ops_is_read(in->kind) && wal_refuses(d)) { /* the data dir cannot take it (wal.c) */
        lattice_op_result full = {.status = LATTICE_ERR_DISK_FULL};
        chan_complete(d, org, &full);
        return;
    }
    if (in->kind == LATTICE_OP_TXN) {
        txn_execute(d, c, in, org, origin_id, seq); /* several keys in one step (txn.c) */
        return;
    }
    if (ops_is_read(in->kind) && full_sync) {
        /* Never show a value before it is acknowledged: a read of a key
         * with a write in flight waits for that write (clean.c). */
        waitw *pw = clean_pending_write(d, c, in->partition, in->key, in->key_len);
        if (pw) {
            if (clean_defer_read(pw, in, org) == LATTICE_OK) return;
            lattice_op_result nomem = {.status = LATTICE_ERR_NOMEM};
            chan_complete(d, org, &nomem);
            return;
        }
    }
    uint64_t oh = seq ? ops_origin_hash(d, origin_id) : 0;
    const dedup_entry *seen = ops_is_read(in->kind) ? NULL : dedup_get(d, oh, seq);
    waitw *level = seen && full_sync ? clean_pending_write(d, c, in->partition, in->key, in->key_len) : NULL;
    if (level) {
        /* A resend of a write this node holds while a write of its key is
         * still in flight - its first attempt, or a takeover levelling the
         * copies (takeover.c): answered from its record only once that is
         * on every copy, or a copy that lacks it would call it absent. */
        if (clean_defer_write(level, in, org, origin_id, seq) == LATTICE_OK) return;
        lattice_op_result nomem = {.status = LATTICE_ERR_NOMEM};
        chan_complete(d, org, &nomem);
        return;
    }
    if (seen) {
        /* A resend of a write applied here (or replicated here) before: its
         * first result, without applying it again (a previous value it
         * returned is not kept: value is empty). */
        lattice_op_result again = {(lattice_status)seen->status, NULL, 0, seen->num, seen->flags};
        /* INCRBYFLOAT's reply is the text it wrote: the entry holds it
         * while its version is still the one the record names. */
        void *v = NULL;
        lattice_store_meta m = {0};
        if (in->kind == LATTICE_OP_INCRBYFLOAT && seen->status == LATTICE_OK && c->store &&
            lattice_store_get_copy(c->store, in->partition, in->key, in->key_len, &v, &m) == LATTICE_OK &&
            m.version == (uint64_t)seen->num) {
            again.value = v;
            again.value_len = m.value_len;
        }
        chan_complete(d, org, &again);
        lt_free(v);
        return;
    }
    if (c->store && txlock_blocks(c, in->partition, in->key, in->key_len, !ops_is_read(in->kind))) {
        /* A transaction prepared across partitions holds the key (a write
         * waits for any of its locks, a read for its write lock): it runs
         * once the transaction finished (txlock.c), so it serializes with
         * it and never reads what a committed transaction replaced. */
        if (txlock_park(d, c, in, org, origin_id, seq) == LATTICE_OK) return;
        lattice_op_result nomem = {.status = LATTICE_ERR_NOMEM};
        chan_complete(d, org, &nomem);
        return;
    }
    lattice_meta_member *owners[2 * (LATTICE_CACHE_MAX_BACKUPS + 1)];
    size_t n = 0;
    if (!ops_is_read(in->kind)) {
        n = lattice_meta_serving_owners(c, in->partition, owners, LATTICE_CACHE_MAX_BACKUPS + 1);
        n += lattice_meta_moving_owners(c, in->partition, owners + n, LATTICE_CACHE_MAX_BACKUPS + 1);
    }
    /* A full_sync write to several copies keeps the key's previous state
     * until it is acknowledged (undo_write); without it (NOMEM) the write
     * is refused rather than risk copies that differ. */
    undo_rec *u = n > 1 && full_sync && c->store ? undo_capture(c, in, origin_id, seq) : NULL;
    if (n > 1 && full_sync && c->store && !u) {
        lattice_op_result nomem = {.status = LATTICE_ERR_NOMEM};
        chan_complete(d, org, &nomem);
        return;
    }
    exec_local(c, in, &d->scratch, &r, &repl);
    if (repl.needed) dedup_put(d, oh, seq, &r);
    waitw *w = repl.needed && n > 1 && full_sync
                   ? primary_wait_begin(d, c, org, &r, undo_write, u, primary_after_write, in->partition, repl.version,
                                        in->key, in->key_len)
                   : NULL;
    if (w) {
        w->oh = oh;
        w->seq = seq;
    } else {
        lt_free(u);
    }
    /* Entries this write evicted here go to the copies as removes first
     * (evict.c), so each copy frees what this node freed before it needs
     * room for the write: the primary evicts ahead for its copies. */
    evict_flush(d);
    if (repl.needed)
        primary_send_copies(d, c, CTL_REPLICATE, in->partition, in->key, in->key_len, &repl, origin_id, seq, &r, w);
    if (w) sync_wait_release(d, w);
    else chan_complete(d, org, &r);
    if (repl.needed && d->bwaits) bwait_tick(d); /* its waiters before the next operation (bwait.c) */
}

void primary_replicate_removal(lattice_ops *d, lattice_meta_cache *c, uint32_t partition, const void *key,
                               size_t key_len)
{
    lattice_meta_member *owners[2 * (LATTICE_CACHE_MAX_BACKUPS + 1)];
    size_t n = lattice_meta_serving_owners(c, partition, owners, LATTICE_CACHE_MAX_BACKUPS + 1);
    n += lattice_meta_moving_owners(c, partition, owners + n, LATTICE_CACHE_MAX_BACKUPS + 1);
    repl_out repl = {true, true, NULL, 0, 0, ++c->counter[partition], 0};
    /* The store dropped the entry without a counter: this is its remove. */
    lattice_store_history_note(c->store, partition, key, key_len, repl.version, true);
    lattice_op_result r = {.status = LATTICE_OK};
    origin none = {0}; /* no issuer: chan_complete drops the result */
    waitw *w = n > 1 && c->cfg.sync == LATTICE_SYNC_FULL
                   ? primary_wait_begin(d, c, &none, &r, NULL, NULL, primary_after_write, partition, repl.version, key,
                                        key_len)
                   : NULL;
    primary_send_copies(d, c, CTL_REPLICATE, partition, key, key_len, &repl, NULL, 0, &r, w);
    if (w) sync_wait_release(d, w);
}

void primary_serve(lattice_ops *d, const Latdata__Req *q, const origin *org)
{
    lattice_op_result r = {0};
    if (!lattice_meta_valid(d->meta)) {
        r.status = LATTICE_ERR_AGAIN;
        chan_reply(d, org, &r, NULL, 0, false);
        return;
    }
    lattice_meta_cache *c = lattice_meta_cache_of(d->meta, q->cache);
    if (!c) {
        r.status = LATTICE_ERR_NO_CACHE;
        chan_reply(d, org, &r, NULL, 0, false);
        return;
    }
    lattice_op op = {(lattice_op_kind)q->kind, q->flags, q->cache, q->key.data, q->key.len, q->value.data,
                     q->value.len, q->delta, q->ttl_ms, q->partition};
    lattice_status st = primary_check_limits(c, &op);
    if (st == LATTICE_OK && (op.kind == LATTICE_OP_SIZE || q->partition >= c->cfg.partitions ||
                             (!walk_is_kind(op.kind) &&
                              q->partition != lattice_partition_of_key(op.key, op.key_len, c->cfg.partitions))))
        st = LATTICE_ERR_INVAL;
    if (st != LATTICE_OK) {
        r.status = st;
        chan_reply(d, org, &r, NULL, 0, false);
        return;
    }
    lattice_meta_member *own[1];
    if (lattice_meta_serving_owners(c, q->partition, own, 1) != 1 || !own[0]->self ||
        ops_not_meant_here(d, org, q->topo_major)) {
        r.status = LATTICE_ERR_NOT_OWNER;
        chan_reply(d, org, &r, NULL, 0, false);
        return;
    }
    if (!ops_serving(d, c)) {
        /* No lease (paused, cut off), leaving, or a base switch holds the
         * cache: nothing is served from a view others may have left. */
        r.status = ops_refusal(d, &r.num);
        chan_reply(d, org, &r, NULL, 0, false);
        return;
    }
    exec_in in = {op.kind, op.flags, q->partition, op.key, op.key_len, op.value, op.value_len, op.delta, op.ttl_ms};
    if (walk_is_kind(op.kind)) walk_execute(d, c, &in, org);
    else primary_execute(d, c, &in, org, q->origin, q->op_seq);
}
