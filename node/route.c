/*
 * route: where an operation goes and what its primary does (data thread).
 *
 *  issuer:  cache known? key/value within limits? -> partition -> serving
 *           owners (affinity base filtered to live nodes; none: LOST) ->
 *           a read with read_from_backup on a local owner runs here; else
 *           the primary: ourselves (execute) or a request to its DEALER.
 *  primary: checks it is the serving primary in its own view (else
 *           NOT_OWNER: the issuer retries), executes, forwards the write to
 *           every other serving owner (CTL_REPLICATE) and acknowledges per
 *           the sync mode: full_sync once every backup answered (or left),
 *           primary_sync at once.
 *  backup:  applies CTL_REPLICATE only if newer and answers.
 */
#include <string.h>

#include "lattice/alloc.h"
#include "lattice/log.h"
#include "data_int.h"

size_t cache_serving_owners(const cache_def *c, uint32_t p, struct peer **out, size_t max)
{
    uint32_t cnt = 0;
    const uint16_t *own = c->aff ? lattice_affinity_owners(c->aff, p, &cnt) : NULL;
    size_t n = 0;
    for (uint32_t i = 0; own && i < cnt && n < max; i++)
        if (c->live[own[i]]) out[n++] = c->live[own[i]];
    return n;
}

size_t cache_moving_owners(const cache_def *c, uint32_t p, struct peer **out, size_t max)
{
    if (!c->ideal) return 0;
    struct peer *serving[LATTICE_CACHE_MAX_BACKUPS + 1];
    size_t ns = cache_serving_owners(c, p, serving, LATTICE_CACHE_MAX_BACKUPS + 1);
    uint32_t cnt = 0;
    const uint16_t *own = lattice_affinity_owners(c->ideal, p, &cnt);
    size_t n = 0;
    for (uint32_t i = 0; own && i < cnt && n < max; i++) {
        struct peer *q = c->ideal_live[own[i]];
        bool dup = !q;
        for (size_t k = 0; k < ns && !dup; k++) dup = serving[k] == q;
        if (!dup) out[n++] = q;
    }
    return n;
}

static bool is_read(int kind)
{
    return kind == LATTICE_OP_GET || kind == LATTICE_OP_TTL || kind == LATTICE_OP_CONTAINS;
}

uint64_t data_origin_hash(const char *node_id)
{
    uint64_t h = 1469598103934665603ull;
    for (const char *c = node_id ? node_id : ""; *c; c++) h = (h ^ (uint8_t)*c) * 1099511628211ull;
    return h | 1; /* never 0 */
}

static size_t dedup_slot(uint64_t origin, uint64_t seq)
{
    return (size_t)((origin ^ (seq * 0x9E3779B97F4A7C15ull)) >> 16) & (DEDUP_SLOTS - 1);
}

void data_dedup_put(lattice_data *d, uint64_t origin, uint64_t seq, const lattice_op_result *r)
{
    if (!d->dedup || !seq) return;
    dedup_entry *e = &d->dedup[dedup_slot(origin, seq)];
    *e = (dedup_entry){origin, seq, r->status, r->flags, r->num};
}

const dedup_entry *data_dedup_get(const lattice_data *d, uint64_t origin, uint64_t seq)
{
    if (!d->dedup || !seq) return NULL;
    const dedup_entry *e = &d->dedup[dedup_slot(origin, seq)];
    return e->seq == seq && e->origin == origin ? e : NULL;
}

/* Executes as primary and replicates; the result goes to org. */
/* origin_id/seq name the write for resends (seq 0: not named). */
static void exec_primary(lattice_data *d, cache_def *c, const exec_in *in, const origin *org, const char *origin_id,
                         uint64_t seq)
{
    lattice_op_result r;
    repl_out repl;
    uint64_t oh = seq ? data_origin_hash(origin_id) : 0;
    const dedup_entry *seen = is_read(in->kind) ? NULL : data_dedup_get(d, oh, seq);
    if (seen) {
        /* A resend of a write applied here (or replicated here) before: its
         * first result, without applying it again (a previous value it
         * returned is not kept: value is empty). */
        lattice_op_result again = {(lattice_status)seen->status, NULL, 0, seen->num, seen->flags};
        data_complete(d, org, &again);
        return;
    }
    exec_local(c, in, &d->scratch, &r, &repl);
    if (repl.needed) data_dedup_put(d, oh, seq, &r);
    /* Every other serving owner, then every MOVING owner: all get the write. */
    peer *owners[2 * (LATTICE_CACHE_MAX_BACKUPS + 1)];
    size_t n = 0;
    if (repl.needed) {
        n = cache_serving_owners(c, in->partition, owners, LATTICE_CACHE_MAX_BACKUPS + 1);
        n += cache_moving_owners(c, in->partition, owners + n, LATTICE_CACHE_MAX_BACKUPS + 1);
    }
    waitw *w = NULL;
    if (n > 1 && c->cfg.sync == LATTICE_SYNC_FULL) {
        w = lt_calloc(1, sizeof *w);
        if (w) {
            w->org = *org;
            w->res = r;
            w->remaining = 1; /* ourselves, released below */
            if (r.value_len) {
                w->value = lt_malloc(r.value_len);
                if (w->value) memcpy(w->value, r.value, r.value_len);
                else w->res.value_len = 0;
            }
        }
    }
    for (size_t i = 0; i < n; i++) {
        if (owners[i]->self || !owners[i]->dealer) continue;
        Latdata__Req *q = data_req_new_from(CTL_REPLICATE, c->cfg.name, in->key, in->key_len, repl.value,
                                            repl.value_len, seq ? origin_id : NULL);
        if (!q) continue;
        q->partition = in->partition;
        q->expire_ms = repl.expire_ms;
        q->version = repl.version;
        q->remove = repl.remove;
        if (seq) {
            q->op_seq = seq;
            q->res_status = r.status;
            q->res_num = r.num;
            q->res_flags = r.flags;
        }
        if (w) {
            pend *p = data_pend_new(d, P_REPL, owners[i]);
            if (!p) {
                lt_free(q);
                continue;
            }
            p->w = w;
            w->remaining++;
            q->id = p->id;
        }
        data_send_req(d, owners[i], q);
    }
    if (w) data_wait_release(d, w);
    else data_complete(d, org, &r);
}

static lattice_status check_limits(const cache_def *c, const lattice_op *op)
{
    if (op->kind < LATTICE_OP_GET || op->kind > LATTICE_OP_KIND_MAX_ || (op->flags & ~LATTICE_OP_FLAGS_ALL_))
        return LATTICE_ERR_INVAL;
    if (op->kind == LATTICE_OP_SIZE) return LATTICE_OK;
    if (op->key_len == 0) return LATTICE_ERR_INVAL;
    if (op->key_len > c->cfg.max_key_bytes || op->value_len > c->cfg.max_value_bytes) return LATTICE_ERR_TOO_LARGE;
    return LATTICE_OK;
}

static void start_size(lattice_data *d, opx *o)
{
    bcast *b = lt_calloc(1, sizeof *b);
    if (!b) {
        lattice_op_result r = {.status = LATTICE_ERR_NOMEM};
        data_complete_local(d, o, &r);
        return;
    }
    b->kind = CTL_PART_SIZE;
    b->op = o;
    b->remaining = 1;
    for (size_t i = 0; i < d->n_peers; i++) {
        peer *p = d->peers[i];
        if (!p->server) continue;
        if (p->self) {
            cache_def *c = data_cache(d, o->cache);
            Latdata__Resp rs = LATDATA__RESP__INIT;
            for (uint32_t k = 0; c && c->store && k < c->cfg.partitions; k++) {
                peer *own[1];
                if (cache_serving_owners(c, k, own, 1) == 1 && own[0]->self) rs.num += (int64_t)lattice_store_count(c->store, k);
            }
            b->remaining++;
            data_bcast_part(d, b, &rs);
            continue;
        }
        if (!p->dealer) continue;
        pend *pe = data_pend_new(d, P_BCAST, p);
        Latdata__Req *q = pe ? data_req_new(CTL_PART_SIZE, o->cache, NULL, 0, NULL, 0) : NULL;
        if (!q) continue;
        pe->b = b;
        q->id = pe->id;
        b->remaining++;
        data_send_req(d, p, q);
    }
    data_bcast_part(d, b, NULL);
}

void data_route(lattice_data *d, opx *o)
{
    lattice_op_result r = {0};
    if (!d->meta_valid) {
        data_retry(d, o, LATTICE_ERR_TIMEOUT);
        return;
    }
    cache_def *c = data_cache(d, o->cache);
    if (!c) {
        /* A cache created a moment ago elsewhere may not have reached us yet
         * (clients learn by pulling): pull now and look again for a while.
         * The coordinator writes the metadata, so it knows at once. */
        uint64_t now = lt_mono_ms();
        if (!o->no_cache_until && !data_is_coordinator(d)) {
            o->no_cache_until = now + NO_CACHE_WAIT_MS;
            d->last_meta_pull = 0;
        }
        if (now < o->no_cache_until) {
            data_retry(d, o, LATTICE_ERR_NO_CACHE);
            return;
        }
        r.status = LATTICE_ERR_NO_CACHE;
        data_complete_local(d, o, &r);
        return;
    }
    lattice_status st = check_limits(c, &o->op);
    if (st != LATTICE_OK) {
        r.status = st;
        data_complete_local(d, o, &r);
        return;
    }
    if (c->cfg.rebalance_mode == LATTICE_REBALANCE_SYNC && c->ideal) {
        /* rebalance_mode=sync: while the live servers differ from the
         * affinity base (a rebalance is due or running) the cache's
         * operations wait - retried until the switch or their deadline. */
        data_retry(d, o, LATTICE_ERR_TIMEOUT);
        return;
    }
    if (o->op.kind == LATTICE_OP_SIZE) {
        start_size(d, o);
        return;
    }
    uint32_t p = lattice_partition_of_key(o->op.key, o->op.key_len, c->cfg.partitions);
    peer *owners[LATTICE_CACHE_MAX_BACKUPS + 1];
    size_t n = cache_serving_owners(c, p, owners, LATTICE_CACHE_MAX_BACKUPS + 1);
    if (n == 0) {
        r.status = LATTICE_ERR_PARTITION_LOST;
        data_complete_local(d, o, &r);
        return;
    }
    exec_in in = {o->op.kind, o->op.flags, p, o->op.key, o->op.key_len, o->op.value, o->op.value_len,
                  o->op.delta, o->op.ttl_ms};
    origin org = {.local = o};
    if (!is_read(o->op.kind) && !o->seq) o->seq = ++d->op_seq;
    if (is_read(o->op.kind) && c->cfg.read_from_backup && c->store) {
        for (size_t i = 1; i < n; i++) {
            if (!owners[i]->self) continue;
            repl_out repl;
            exec_local(c, &in, &d->scratch, &r, &repl);
            data_complete_local(d, o, &r);
            return;
        }
    }
    if (owners[0]->self) {
        if (!is_read(o->op.kind) && data_cache_frozen(c)) {
            data_retry(d, o, LATTICE_ERR_AGAIN); /* a base check is counting: retry shortly */
            return;
        }
        exec_primary(d, c, &in, &org, d->self_id, o->seq);
        return;
    }
    peer *prim = owners[0];
    if (!prim->dealer) {
        data_retry(d, o, LATTICE_ERR_TIMEOUT);
        return;
    }
    Latdata__Req *q = data_req_new_from(o->op.kind, c->cfg.name, o->op.key, o->op.key_len, o->op.value,
                                        o->op.value_len, o->seq ? d->self_id : NULL);
    if (!q) {
        r.status = LATTICE_ERR_NOMEM;
        data_complete_local(d, o, &r);
        return;
    }
    q->flags = o->op.flags;
    q->partition = p;
    q->ttl_ms = o->op.ttl_ms;
    q->delta = o->op.delta;
    q->topo_major = d->major;
    q->op_seq = o->seq;
    bool async_write = !is_read(o->op.kind) && c->cfg.sync == LATTICE_SYNC_ASYNC;
    if (!async_write) {
        pend *pe = data_pend_new(d, P_OP, prim);
        if (!pe) {
            lt_free(q);
            r.status = LATTICE_ERR_NOMEM;
            data_complete_local(d, o, &r);
            return;
        }
        pe->op = o;
        q->id = pe->id;
    }
    data_send_req(d, prim, q);
    if (async_write) data_complete_local(d, o, &r); /* full_async: acknowledged once sent */
}

/* A request that arrived on our ROUTER. */
void data_serve(lattice_data *d, const Latdata__Req *q, const origin *org)
{
    lattice_op_result r = {0};
    if (q->kind >= CTL_REPLICATE) {
        data_serve_ctl(d, q, org);
        return;
    }
    if (!d->meta_valid) {
        r.status = LATTICE_ERR_AGAIN;
        data_reply(d, org, &r, NULL, 0, false);
        return;
    }
    cache_def *c = data_cache(d, q->cache);
    if (!c) {
        r.status = LATTICE_ERR_NO_CACHE;
        data_reply(d, org, &r, NULL, 0, false);
        return;
    }
    lattice_op op = {(lattice_op_kind)q->kind, q->flags, q->cache, q->key.data, q->key.len, q->value.data,
                     q->value.len, q->delta, q->ttl_ms};
    lattice_status st = check_limits(c, &op);
    if (st == LATTICE_OK && (op.kind == LATTICE_OP_SIZE || q->partition >= c->cfg.partitions ||
                             q->partition != lattice_partition_of_key(op.key, op.key_len, c->cfg.partitions)))
        st = LATTICE_ERR_INVAL;
    if (st != LATTICE_OK) {
        r.status = st;
        data_reply(d, org, &r, NULL, 0, false);
        return;
    }
    peer *own[1];
    if (cache_serving_owners(c, q->partition, own, 1) != 1 || !own[0]->self) {
        r.status = LATTICE_ERR_NOT_OWNER;
        data_reply(d, org, &r, NULL, 0, false);
        return;
    }
    if (!is_read(op.kind) && data_cache_frozen(c)) {
        r.status = LATTICE_ERR_AGAIN;
        data_reply(d, org, &r, NULL, 0, false);
        return;
    }
    exec_in in = {op.kind, op.flags, q->partition, op.key, op.key_len, op.value, op.value_len, op.delta, op.ttl_ms};
    exec_primary(d, c, &in, org, q->origin, q->op_seq);
}
