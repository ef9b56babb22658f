/*
 * issue: where an operation goes (data thread) - the first stage of the
 * operation path.
 *
 *  lattice_ops_submit (any thread) copies each op and hands it to the data
 *  thread; issue_route then checks: cache known? kind, key and value within
 *  limits? -> partition -> serving owners (the affinity base filtered to
 *  live nodes; none: PARTITION_LOST) -> a read with read_from_backup on a
 *  local owner runs here; else the primary: ourselves (primary.c) or a
 *  request on our connection to it, kept in the pending table until its answer
 *  (retry.c settles it: complete, or route again).
 */
#include <string.h>

#include <urcu.h>

#include "lattice/alloc.h"
#include "lattice/clock.h"
#include "lattice/log.h"
#include "ops_int.h"

/* snprintf(dst, cap, "%s", src) without the formatter: twice per write. */
static void copy_name(char *dst, size_t cap, const char *src)
{
    size_t n = strnlen(src, cap - 1);
    memcpy(dst, src, n);
    dst[n] = 0;
}

/* deadline_ms: the submit's, read once for all its ops (a clock read per op
 * was one of the IO thread's clock reads, together 4.7% of the node's
 * samples under redis-benchmark SET -P 16). */
static opx *opx_new(const lattice_op *op, lattice_op_fn fn, void *arg, size_t index, uint64_t deadline_ms)
{
    size_t kl = op->key ? op->key_len : 0, vl = op->value ? op->value_len : 0;
    opx *o = opx_alloc(sizeof *o + kl + vl + 1);
    if (!o) return NULL;
    struct opx_pool *pool = o->pool;
    memset(o, 0, sizeof *o);
    o->pool = pool;
    o->op = *op;
    copy_name(o->cache, sizeof o->cache, op->cache ? op->cache : "default");
    if (kl) memcpy(o->data, op->key, kl);
    if (vl) memcpy(o->data + kl, op->value, vl);
    o->op.key = o->data;
    o->op.key_len = kl;
    o->op.value = o->data + kl;
    o->op.value_len = vl;
    o->op.cache = o->cache;
    o->fn = fn;
    o->arg = arg;
    o->index = index;
    o->deadline_ms = deadline_ms;
    if (op->flags & LATTICE_OP_BLOCKING) {
        /* It waits at the primary until its ttl_ms (a wall-clock deadline)
         * or for ever: the op timeout counts from then. */
        uint64_t wall = lt_wall_ms();
        o->deadline_ms = !op->ttl_ms ? UINT64_MAX : deadline_ms + (op->ttl_ms > wall ? op->ttl_ms - wall : 0);
    }
    return o;
}

lattice_status issue_here(lattice_ops *d, const lattice_op *op, lattice_op_fn fn, void *arg)
{
    opx *o = opx_new(op, fn, arg, 0, lt_mono_ms() + (uint64_t)d->op_timeout_ms);
    if (!o) return LATTICE_ERR_NOMEM;
    issue_route(d, o);
    return LATTICE_OK;
}

/* The data thread takes them: each pushed, then one wake-up for all. */
static void hand_over(lattice_ops *d, opx **all, size_t n)
{
    for (size_t i = 0; i < n; i++) chan_push(d, all[i]);
    chan_wake(d);
}

/* here: the caller is an RCU-registered thread (lattice_ops_submit_inline's
 * contract), which may run the ops to completion itself (loop_run_here). */
static lattice_status submit(lattice_ops *d, const lattice_op *ops, size_t n, lattice_op_fn fn, void *arg, bool here)
{
    if (!ops || !n || !fn) return LATTICE_ERR_INVAL;
    if (!d) return LATTICE_ERR_STOPPED;
    opx *small[64];
    opx **all = n <= 64 ? small : lt_malloc(n * sizeof *all);
    if (!all) return LATTICE_ERR_NOMEM;
    uint64_t deadline = lt_mono_ms() + (uint64_t)d->op_timeout_ms;
    for (size_t i = 0; i < n; i++) {
        all[i] = opx_new(&ops[i], fn, arg, i, deadline);
        if (!all[i]) {
            while (i--) opx_free(all[i]);
            if (all != small) lt_free(all);
            return LATTICE_ERR_NOMEM;
        }
    }
    if (!atomic_load(&d->accepting)) {
        for (size_t i = 0; i < n; i++) opx_free(all[i]);
        if (all != small) lt_free(all);
        return LATTICE_ERR_STOPPED;
    }
    if (!here || !loop_run_here(d, all, n)) hand_over(d, all, n);
    if (all != small) lt_free(all);
    return LATTICE_OK;
}

lattice_status lattice_ops_submit(lattice_ops *d, const lattice_op *ops, size_t n, lattice_op_fn fn, void *arg)
{
    return submit(d, ops, n, fn, arg, false);
}

lattice_status lattice_ops_submit_inline(lattice_ops *d, const lattice_op *ops, size_t n, lattice_op_fn fn, void *arg)
{
    if (!ops || !n || !fn) return LATTICE_ERR_INVAL;
    if (!d) return LATTICE_ERR_STOPPED;
    if (d->client || !atomic_load(&d->accepting)) return lattice_ops_submit(d, ops, n, fn, arg);
    uint64_t small[4] = {0};
    uint64_t *done = n <= 256 ? small : lt_calloc((n + 63) / 64, sizeof *done);
    if (!done) return submit(d, ops, n, fn, arg, true);
    /* The reads first.  Once one callback ran this returns OK, so an op
     * that cannot be handed over afterwards is answered NOMEM through fn. */
    size_t answered = 0;
    fast_slot slot[FAST_BATCH];
    for (size_t at = 0; at < n; at += FAST_BATCH) {
        size_t k = n - at < FAST_BATCH ? n - at : FAST_BATCH;
        if (!fast_read_n(d, ops + at, k, slot)) continue;
        for (size_t j = 0; j < k; j++) {
            if (!slot[j].done) continue;
            size_t i = at + j;
            fn(arg, i, &slot[j].r);
            lt_free(slot[j].heap);
            done[i / 64] |= 1ull << (i % 64);
            answered++;
        }
    }
    lattice_status st = LATTICE_OK;
    if (!answered) {
        st = submit(d, ops, n, fn, arg, true);
    } else {
        opx *small_rest[64];
        opx **rest = n - answered <= 64 ? small_rest : lt_malloc((n - answered) * sizeof *rest);
        size_t k = 0;
        uint64_t deadline = lt_mono_ms() + (uint64_t)d->op_timeout_ms;
        for (size_t i = 0; i < n; i++) {
            if (done[i / 64] & (1ull << (i % 64))) continue;
            opx *o = opx_new(&ops[i], fn, arg, i, deadline);
            if (o && rest) {
                rest[k++] = o;
            } else if (o) {
                chan_push(d, o); /* no room for the list: handed over one by one */
                chan_wake(d);
            } else {
                lattice_op_result r = {.status = LATTICE_ERR_NOMEM};
                fn(arg, i, &r);
            }
        }
        if (k && !loop_run_here(d, rest, k)) hand_over(d, rest, k);
        if (rest != small_rest) lt_free(rest);
    }
    if (done != small) lt_free(done);
    return st;
}

void lattice_ops_thread_enter(void) { rcu_register_thread(); }
void lattice_ops_thread_exit(void) { rcu_unregister_thread(); }
uint64_t lattice_ops_run_here(lattice_ops *d)
{
    return d ? atomic_load_explicit(&d->ops_run_here, memory_order_relaxed) : 0;
}
uint64_t lattice_ops_log_releases(lattice_ops *d)
{
    return d ? atomic_load_explicit(&d->log_releases, memory_order_relaxed) : 0;
}

uint64_t lattice_ops_reads_inline(lattice_ops *d)
{
    return d ? atomic_load_explicit(&d->reads_inline, memory_order_relaxed) : 0;
}

/* Answers o here with status (and num). */
static void answer(lattice_ops *d, opx *o, lattice_status status, int64_t num)
{
    lattice_op_result r = {.status = status, .num = num};
    chan_complete_local(d, o, &r);
}

/* The metadata exchange (grid/control.c) owns the pulls; without it
 * (unit suites) nobody pulls: the pull asked for is number 1 and none ends. */
static uint64_t pull_soon(lattice_ops *d) { return d->grid_hooks.pull_soon ? d->grid_hooks.pull_soon(d) : 1; }
static uint64_t pulls_ended(const lattice_ops *d)
{
    return d->grid_hooks.pulls_ended ? d->grid_hooks.pulls_ended(d) : 0;
}

/* The checks before an op's partition is looked at: the cache, if this node
 * may route o for it now (*lease: the lease read once for every check of
 * this op); NULL when o was answered or put back for a retry. */
static lattice_meta_cache *route_cache(lattice_ops *d, opx *o, bool *lease)
{
    if (o->seq && o->seq_inc != d->incarnation) {
        /* A write sent before this node rejoined under a new id (it was
         * paused or cut off past the failure detection): its first attempt
         * may have been applied and replicated, and the grid has moved on -
         * the partition's primary now may hold a copy a rebalance supplied,
         * without the resend record (dedup.c) that would keep a resend from
         * applying it a second time over the writes acknowledged since
         * (fault_stop_primary: a value read back 3 s after it was
         * overwritten).  Its outcome is unknown; so says the answer. */
        answer(d, o, LATTICE_ERR_TIMEOUT, 0);
        return NULL;
    }
    if (!lattice_meta_valid(d->meta)) {
        if (d->grid_hooks.refuses && d->grid_hooks.refuses(d)) answer(d, o, LATTICE_ERR_RESTARTING, 0); /* a whole-grid restart waits: naming it */
        else retry_later(d, o, LATTICE_ERR_TIMEOUT);
        return NULL;
    }
    if (d->disc && !d->client && !d->seen_topology) {
        /* A server not admitted yet (starting, or restarted) may hold the
         * metadata already - the coordinator pushes it on the data port -
         * but no member set: every partition would look ownerless (LOST)
         * and the quorum "0 of 0".  Neither is the grid's answer: wait for
         * the join (TRYAGAIN past the deadline). */
        retry_later(d, o, LATTICE_ERR_TIMEOUT);
        return NULL;
    }
    lattice_meta_cache *c = lattice_meta_cache_of(d->meta, o->cache);
    if (!c) {
        /* A cache created a moment ago elsewhere may not have reached us yet
         * (clients learn by pulling): pull now and look again for a while.
         * The coordinator writes the metadata, so it knows at once. */
        uint64_t now = lt_mono_ms();
        if (!o->no_cache_until && !lattice_meta_is_coordinator(d->meta)) {
            o->no_cache_until = now + NO_CACHE_WAIT_MS;
            pull_soon(d);
        }
        if (now < o->no_cache_until) retry_later(d, o, LATTICE_ERR_NO_CACHE);
        else answer(d, o, LATTICE_ERR_NO_CACHE, 0);
        return NULL;
    }
    if (c->restoring) { /* a whole-grid restart makes the copies equal first (restart.c) */
        answer(d, o, LATTICE_ERR_RESTARTING, 0);
        return NULL;
    }
    lattice_status st = primary_check_limits(c, &o->op);
    if (st != LATTICE_OK) {
        answer(d, o, st, 0);
        return NULL;
    }
    if (c->cfg.rebalance_mode == LATTICE_REBALANCE_SYNC && c->ideal) {
        /* rebalance_mode=sync: while the live servers differ from the
         * affinity base (a rebalance is due or running) the cache's
         * operations wait - retried until the switch or their deadline. */
        retry_later(d, o, LATTICE_ERR_TIMEOUT);
        return NULL;
    }
    /* One lease read for this op's checks (each was a clock read). */
    *lease = d->client || ops_lease(d);
    int64_t num = 0;
    if (ops_no_quorum_leased(d, *lease, &num)) {
        /* Refused here, whichever node is the key's primary: this side of
         * the grid may not acknowledge anything (docs/CONSISTENCY.md). */
        answer(d, o, LATTICE_ERR_NO_QUORUM, num);
        return NULL;
    }
    return c;
}

/* Partition p has no serving owner.  A client learns a base switch by
 * pulling (once a second): the partition may serve again already.  So it
 * pulls now and looks again once that pull ended (answered, or given up),
 * or at the op's deadline.  Servers get the metadata pushed. */
static void route_lost(lattice_ops *d, opx *o, uint32_t p)
{
    o->lost_part = p;
    if (d->client && !o->lost_mark) o->lost_mark = pull_soon(d);
    if (d->client && pulls_ended(d) < o->lost_mark) retry_later(d, o, LATTICE_ERR_PARTITION_LOST);
    else answer(d, o, LATTICE_ERR_PARTITION_LOST, p); /* the caller can name it (RESP's CLUSTERDOWN does) */
}

/* A read with read_from_backup where this node holds a backup copy of its
 * partition: true when it was answered here (or put back for a retry). */
static bool read_local_copy(lattice_ops *d, opx *o, lattice_meta_cache *c, const exec_in *in,
                            lattice_meta_member *const *owners, size_t n, bool lease)
{
    for (size_t i = 1; i < n; i++) {
        if (!owners[i]->self) continue;
        /* A backup answers only from a clean copy: nothing applied here
         * that its primary has not acknowledged (clean.c); else the
         * primary answers.  primary_sync/full_async: as it stands. */
        if (c->cfg.sync == LATTICE_SYNC_FULL && !clean_copy_is_clean(c, in->partition)) return false;
        /* A transaction prepared across partitions holds the key: its
         * primary answers once the transaction finished (txlock.c). */
        if (txlock_blocks(c, in->partition, in->key, in->key_len, false)) return false;
        if (!ops_serving_leased(d, c, lease)) {
            retry_later(d, o, LATTICE_ERR_AGAIN);
            return true;
        }
        lattice_op_result r = {0};
        repl_out repl;
        exec_local(c, in, &d->scratch, &r, &repl);
        chan_complete_local(d, o, &r);
        return true;
    }
    return false;
}

/* To the primary on another node: a request, kept in the pending table
 * until its answer (retry.c settles it) - or, a full_async write,
 * acknowledged once sent. */
static void send_to_primary(lattice_ops *d, opx *o, lattice_meta_cache *c, uint32_t p, peer *prim, bool walk)
{
    if (!prim->dealer) {
        retry_later(d, o, LATTICE_ERR_TIMEOUT);
        return;
    }
    Latdata__Req *q = chan_req_new_from(o->op.kind, c->cfg.name, o->op.key, o->op.key_len, o->op.value,
                                        o->op.value_len, o->seq ? o->origin : NULL);
    if (!q) {
        answer(d, o, LATTICE_ERR_NOMEM, 0);
        return;
    }
    q->flags = o->op.flags;
    q->partition = p;
    q->ttl_ms = o->op.ttl_ms;
    q->delta = o->op.delta;
    q->topo_major = d->major;
    q->op_seq = o->seq;
    /* A transaction's results are its answer: it waits for the primary even on full_async. */
    bool async_write = !ops_is_read(o->op.kind) && !walk && o->op.kind != LATTICE_OP_TXN && c->cfg.sync == LATTICE_SYNC_ASYNC;
    if (!async_write) {
        pend *pe = chan_pend_new(d, retry_settle_op, prim);
        if (!pe) {
            lt_free(q);
            answer(d, o, LATTICE_ERR_NOMEM, 0);
            return;
        }
        pe->op = o;
        chan_pend_deadline(d, pe, o->deadline_ms);
        q->id = pe->id;
    }
    chan_send(d, prim, q);
    if (async_write) answer(d, o, LATTICE_OK, 0); /* full_async: acknowledged once sent */
}

void issue_route(lattice_ops *d, opx *o)
{
    bool lease = false;
    lattice_meta_cache *c = route_cache(d, o, &lease);
    if (!c) return;
    if (o->op.kind == LATTICE_OP_SIZE) { /* every server's count: grid/report.c */
        if (d->grid_hooks.start_size) d->grid_hooks.start_size(d, o);
        else answer(d, o, LATTICE_ERR_INVAL, 0);
        return;
    }
    bool walk = walk_is_kind(o->op.kind); /* partition-addressed (walk.c) */
    if (walk && o->op.partition >= c->cfg.partitions) {
        answer(d, o, LATTICE_ERR_INVAL, 0);
        return;
    }
    uint32_t p = walk ? o->op.partition : lattice_partition_of_key(o->op.key, o->op.key_len, c->cfg.partitions);
    lattice_meta_member *owners[LATTICE_CACHE_MAX_BACKUPS + 1];
    size_t n = lattice_meta_serving_owners(c, p, owners, LATTICE_CACHE_MAX_BACKUPS + 1);
    if (n == 0) {
        route_lost(d, o, p);
        return;
    }
    exec_in in = {o->op.kind, o->op.flags, p, o->op.key, o->op.key_len, o->op.value, o->op.value_len,
                  o->op.delta, o->op.ttl_ms};
    if (!ops_is_read(o->op.kind) && !walk && !o->seq) {
        /* The write's name for resends: this node's id now.  A rejoin under
         * a new id ends its resends (route_cache's first check): named by
         * the new id a resend would miss the first result and apply twice
         * (an INCR counted twice after a pause, fault_stop_coordinator), and
         * even under the old name the primary it finds may lack the record. */
        o->seq = ++d->op_seq;
        o->seq_inc = d->incarnation;
        copy_name(o->origin, sizeof o->origin, d->self_id);
    }
    if (lattice_meta_frozen(c)) {
        retry_later(d, o, LATTICE_ERR_AGAIN); /* a base switch is deciding: nothing served here meanwhile */
        return;
    }
    if (ops_is_read(o->op.kind) && c->cfg.read_from_backup && c->store &&
        read_local_copy(d, o, c, &in, owners, n, lease))
        return;
    if (owners[0]->self) {
        if (!ops_serving_leased(d, c, lease)) {
            /* No lease, leaving, or a base switch holds the cache: retry
             * shortly (the view will have moved on or come back). */
            retry_later(d, o, LATTICE_ERR_AGAIN);
            return;
        }
        origin org = {.local = o};
        if (walk) walk_execute(d, c, &in, &org);
        else primary_execute(d, c, &in, &org, o->origin, o->seq);
        return;
    }
    if (walk && (o->op.flags & LATTICE_OP_LOCAL)) {
        answer(d, o, LATTICE_ERR_NOT_OWNER, 0); /* another node's: not this walk's */
        return;
    }
    send_to_primary(d, o, c, p, peer_of(owners[0]), walk);
}
