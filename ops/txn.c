/*
 * txn: transactions - sub-operations on keys of one partition run by its
 * primary in one step (data thread).  The request and result layout is
 * lattice/txn.h; docs/CONSISTENCY.md ("Transactions") states the contract.
 *
 *  txn_execute   at the primary.  The data thread is the one writer of the
 *                partition, so running every sub-operation without
 *                yielding is atomic there.  Before it runs:
 *                - full_sync: if any of its keys has a write in flight, the
 *                  whole transaction waits for the newest such write (as a
 *                  read does, clean.c), so it never reads or builds on a
 *                  value that is not acknowledged;
 *                - a resend (same issuer, op sequence) of one applied
 *                  before gets the kept result (txn_kept) or R_LOST - it is
 *                  never applied twice (dedup.c holds its record);
 *                - its watches are checked: one failed, nothing runs.
 *                Its writes take consecutive versions of the partition's
 *                counter and go to every copy as ONE CTL_REPLICATE_TXN
 *                (the writes in order + the result).  The full_sync wait is
 *                one waitw listing every written key, so a read of any of
 *                them waits for all of them, and the partition's watermark
 *                stays below the first write until every copy answered.
 *  txn_apply_copy  at a copy: applies every write (only if newer, as
 *                backup.c) and keeps the result for a resend.  A write it
 *                has no room for makes it answer REGION_FULL - having
 *                applied the writes before that one: the primary then
 *                writes the previous state of every key the transaction
 *                wrote back on every copy, as one unit again (txn_undo), so
 *                no copy keeps a part of it and nothing acknowledged it.
 *  txn_run       the execution proper, with no network (unit-tested).
 */
#include <stdio.h>
#include <string.h>

#include "base/base.h"
#include "lattice/alloc.h"
#include "lattice/clock.h"
#include "lattice/log.h"
#include "lattice/coll.h"
#include "lattice/txn.h"
#include "ops_int.h"
#include "txn/txn.h"

/* ---- growable buffers over lattice_txn_buf ---- */

static bool buf_reserve(lattice_txn_buf *b, size_t more)
{
    if (b->failed) return false;
    if (b->len + more <= b->cap) return true;
    size_t nc = b->cap ? b->cap * 2 : 256;
    while (nc < b->len + more) nc *= 2;
    uint8_t *p = lt_realloc(b->p, nc);
    if (!p) {
        b->failed = true;
        return false;
    }
    b->p = p;
    b->cap = nc;
    return true;
}

static void buf_free(lattice_txn_buf *b)
{
    lt_free(b->p);
    memset(b, 0, sizeof *b);
}

/* ---- the request ---- */

typedef struct txn_sub {
    int kind;
    unsigned flags;
    const void *key, *value;
    size_t key_len, value_len;
    int64_t delta;
    uint64_t ttl_ms;
} txn_sub;

typedef struct txn_req {
    size_t n_watch, n_subs;
    lattice_txn_watch *watch;
    txn_sub *subs;
    bool woken; /* a blocking step run again by bwait.c (OPS_WOKEN) */
} txn_req;

static void req_free(txn_req *q)
{
    lt_free(q->watch);
    lt_free(q->subs);
    memset(q, 0, sizeof *q);
}

static bool sub_kind_ok(int kind)
{
    return (kind >= LATTICE_OP_GET && kind <= LATTICE_OP_CONTAINS) || kind == LATTICE_OP_SETRANGE ||
           kind == LATTICE_OP_SETBIT || kind == LATTICE_OP_INCRBYFLOAT || kind == LATTICE_TXN_VERSION ||
           kind == LATTICE_TXN_RENAME || kind == LATTICE_TXN_COPY || kind == LATTICE_TXN_IF_ABSENT ||
           kind == LATTICE_TXN_EXPIRE_IF || kind == LATTICE_TXN_IDLE || kind == LATTICE_TXN_PREPARE ||
           kind == LATTICE_TXN_FINISH || kind == LATTICE_TXN_DECIDE || kind == LATTICE_OP_COLL_READ ||
           kind == LATTICE_OP_COLL_WRITE || kind == LATTICE_TXN_LMOVE || kind == LATTICE_TXN_BPOP ||
           kind == LATTICE_TXN_SETOP;
}

static bool names_key(int kind)
{
    return kind == LATTICE_TXN_RENAME || kind == LATTICE_TXN_COPY || kind == LATTICE_TXN_LMOVE; /* value = a destination key */
}

static lattice_status key_ok(const lattice_meta_cache *c, uint32_t partition, const void *key, size_t len)
{
    if (len == 0) return LATTICE_ERR_INVAL;
    if (*(const uint8_t *)key == LATTICE_STORE_RESERVED_BYTE) return LATTICE_ERR_RESERVED_KEY; /* see req_decode */
    if (len > c->cfg.max_key_bytes) return LATTICE_ERR_TOO_LARGE;
    return lattice_partition_of_key(key, len, c->cfg.partitions) == partition ? LATTICE_OK : LATTICE_ERR_INVAL;
}

/* FINISH's and DECIDE's key: the grid's own record, of this partition. */
static lattice_status internal_key_ok(const lattice_meta_cache *c, uint32_t partition, const void *key, size_t len)
{
    lt_txp_kind kind;
    lt_txid id;
    if (!lt_txp_key_parse(key, len, &kind, &id)) return LATTICE_ERR_INVAL;
    return lattice_partition_of_key(key, len, c->cfg.partitions) == partition ? LATTICE_OK : LATTICE_ERR_INVAL;
}

/* BPOP's other keys (its value, packed as lattice/coll.h packs arguments):
 * each a key of this partition, within limits. */
static lattice_status bpop_keys_ok(const lattice_meta_cache *c, uint32_t partition, const void *v, size_t len)
{
    size_t n, off = 4;
    if (!lattice_coll_unpacked_count(v, len, &n)) return LATTICE_ERR_INVAL;
    lattice_status st = LATTICE_OK;
    for (size_t i = 0; i < n && st == LATTICE_OK; i++) {
        lattice_coll_arg k = lattice_coll_unpack_next(v, &off);
        st = key_ok(c, partition, k.ptr, k.len);
    }
    return st;
}

/* The keys a step names, in order (lattice_txn_keys_next): its key,
 * then a destination (RENAME, COPY, LMOVE), BPOP's other keys or SETOP's
 * keys.  For a sub req_decode accepted.  Not moved once begun. */
typedef struct sub_keys {
    lattice_op op;
    lattice_txn_keys it;
} sub_keys;

static void sub_keys_begin(sub_keys *k, const txn_sub *s)
{
    k->op = (lattice_op){(lattice_op_kind)s->kind, 0, NULL, s->key, s->key_len, s->value, s->value_len, s->delta, 0, 0};
    k->it = lattice_txn_keys_of(&k->op);
}

static bool sub_keys_next(sub_keys *k, const void **key, size_t *kl) { return lattice_txn_keys_next(&k->it, key, kl); }

/* SETOP's arguments (its value): packed, its keys among them - the first
 * it names its key - each of this partition. */
static lattice_status setop_ok(const lattice_meta_cache *c, uint32_t partition, const txn_sub *s)
{
    size_t n, first = LATTICE_TXN_SETOP_FIRST(s->delta), nk = LATTICE_TXN_SETOP_KEYS(s->delta);
    bool dest = (uint64_t)s->delta & LATTICE_TXN_SETOP_DEST;
    int op = LATTICE_TXN_SETOP_OP(s->delta);
    if (!lattice_coll_unpacked_count(s->value, s->value_len, &n) || op < 1 || op > LATTICE_SETOP_MAX_ ||
        ((uint64_t)s->delta & 0xfe00u) || nk == 0 || first > n || nk > n - first || (dest && first == 0))
        return LATTICE_ERR_INVAL;
    sub_keys it;
    sub_keys_begin(&it, s);
    const void *k;
    size_t kl;
    lattice_status st = LATTICE_OK;
    for (int i = 0; st == LATTICE_OK && sub_keys_next(&it, &k, &kl); i++) {
        if (i == 1 && (kl != s->key_len || memcmp(k, s->key, kl))) return LATTICE_ERR_INVAL; /* its key first */
        if (i) st = key_ok(c, partition, k, kl);
    }
    return st;
}

/* A blocking step (lattice/txn.h, LATTICE_TXN_BLOCK): the request's only one. */
static bool blocking_sub(const txn_sub *s)
{
    return (s->kind == LATTICE_TXN_BPOP || s->kind == LATTICE_TXN_LMOVE) && ((uint64_t)s->delta & LATTICE_TXN_BLOCK);
}

/* Decodes and checks a request: every key in `partition`, within limits. */
static lattice_status req_decode(const lattice_meta_cache *c, uint32_t partition, const void *v, size_t len,
                                 txn_req *q)
{
    memset(q, 0, sizeof *q);
    lattice_txn_buf b = {(uint8_t *)(uintptr_t)v, 0, len, false};
    if (lattice_txn_get_u(&b, 1) != LATTICE_TXN_FORMAT) return LATTICE_ERR_INVAL;
    uint64_t nw = lattice_txn_get_u(&b, 4);
    if (b.failed || nw > len / 21) return LATTICE_ERR_INVAL; /* each watch takes >= 21 bytes */
    q->n_watch = (size_t)nw;
    q->watch = lt_calloc(nw ? nw : 1, sizeof *q->watch);
    if (!q->watch) return LATTICE_ERR_NOMEM;
    lattice_status st = LATTICE_OK;
    for (size_t i = 0; i < q->n_watch && st == LATTICE_OK; i++) {
        lattice_txn_watch *w = &q->watch[i];
        w->key = lattice_txn_get_bytes(&b, &w->key_len);
        w->mode = (uint8_t)lattice_txn_get_u(&b, 1);
        w->version = lattice_txn_get_u(&b, 8);
        w->epoch = lattice_txn_get_u(&b, 8);
        if (b.failed || w->mode > LATTICE_TXN_W_ABSENT) st = LATTICE_ERR_INVAL;
        else st = key_ok(c, partition, w->key, w->key_len);
    }
    uint64_t ns = lattice_txn_get_u(&b, 4);
    if (st != LATTICE_OK || b.failed || ns > len / 29) return st != LATTICE_OK ? st : LATTICE_ERR_INVAL;
    q->n_subs = (size_t)ns;
    q->subs = lt_calloc(ns ? ns : 1, sizeof *q->subs);
    if (!q->subs) return LATTICE_ERR_NOMEM;
    for (size_t i = 0; i < q->n_subs && st == LATTICE_OK; i++) {
        txn_sub *s = &q->subs[i];
        s->kind = (int)lattice_txn_get_u(&b, 1);
        s->flags = (unsigned)lattice_txn_get_u(&b, 4);
        s->key = lattice_txn_get_bytes(&b, &s->key_len);
        s->value = lattice_txn_get_bytes(&b, &s->value_len);
        s->delta = (int64_t)lattice_txn_get_u(&b, 8);
        s->ttl_ms = lattice_txn_get_u(&b, 8);
        if (b.failed || !sub_kind_ok(s->kind) || (s->flags & ~(LATTICE_OP_FLAGS_ALL_ & ~LATTICE_OP_LOCAL)))
            st = LATTICE_ERR_INVAL;
        else if ((s->kind == LATTICE_TXN_PREPARE || s->kind == LATTICE_TXN_FINISH || s->kind == LATTICE_TXN_DECIDE) && i)
            st = LATTICE_ERR_INVAL; /* a step of a transaction across partitions governs its request: first */
        else if ((st = s->kind == LATTICE_TXN_FINISH || s->kind == LATTICE_TXN_DECIDE
                           ? internal_key_ok(c, partition, s->key, s->key_len)
                           : key_ok(c, partition, s->key, s->key_len)) != LATTICE_OK)
            ;
        else if (names_key(s->kind))
            st = key_ok(c, partition, s->value, s->value_len);
        else if (s->kind == LATTICE_TXN_BPOP)
            st = bpop_keys_ok(c, partition, s->value, s->value_len);
        else if (s->kind == LATTICE_TXN_SETOP)
            st = s->value_len > c->cfg.max_value_bytes ? LATTICE_ERR_TOO_LARGE : setop_ok(c, partition, s);
        else if (s->value_len > c->cfg.max_value_bytes)
            st = LATTICE_ERR_TOO_LARGE;
        else if (s->kind == LATTICE_TXN_IF_ABSENT && (s->delta < 0 || (uint64_t)s->delta >= q->n_subs - i))
            st = LATTICE_ERR_INVAL; /* it guards subs that are not there */
        else if (s->kind == LATTICE_TXN_EXPIRE_IF && ((uint64_t)s->delta & ~(uint64_t)LATTICE_TXN_EXP_ALL_))
            st = LATTICE_ERR_INVAL;
        if (st == LATTICE_OK && blocking_sub(s) && (q->n_subs != 1 || q->n_watch)) st = LATTICE_ERR_INVAL; /* it waits alone */
    }
    if (st == LATTICE_OK && b.len != len) st = LATTICE_ERR_INVAL; /* trailing bytes */
    return st;
}

/* ---- execution (txn_run) ---- */

/* What a run produced: the result encoding, the writes to replicate
 * (u32 klen, key, u8 remove, u64 expire, u64 version, u32 vlen, value)*,
 * and the hashes of the keys written. */
typedef struct txn_out {
    lattice_txn_buf res, wr;
    uint32_t n_writes;
    uint64_t first_version, last_version;
    uint64_t *hashes;
    size_t n_hashes, cap_hashes;
    bool aborted;
    bool would_block; /* a blocking step found nothing to pop before its deadline: the request waits */
} txn_out;

static void out_free(txn_out *o)
{
    buf_free(&o->res);
    buf_free(&o->wr);
    lt_free(o->hashes);
    memset(o, 0, sizeof *o);
}

static void add_result(txn_out *o, const lattice_op_result *r)
{
    if (!buf_reserve(&o->res, 24 + r->value_len)) return;
    lattice_txn_put_u(&o->res, (uint32_t)r->status, 4);
    lattice_txn_put_u(&o->res, r->flags, 4);
    lattice_txn_put_u(&o->res, (uint64_t)r->num, 8);
    lattice_txn_put_bytes(&o->res, r->value, r->value_len);
}

/* A write in the list: key, a flag byte (bit 0 removed; bits 1..3 a put's
 * value type, 0 for a string, so a string's write is what it was before
 * types), absolute expiry, version, value. */
static void add_write(txn_out *o, const void *key, size_t klen, const repl_out *w);

/* exec_lmove's writes, each into the step's list as it happens. */
static void wrote_one(void *arg, const void *key, size_t klen, const repl_out *w) { add_write(arg, key, klen, w); }

static void add_write(txn_out *o, const void *key, size_t klen, const repl_out *w)
{
    if (!buf_reserve(&o->wr, 29 + klen + w->value_len)) return;
    lattice_txn_put_bytes(&o->wr, key, klen);
    lattice_txn_put_u(&o->wr, w->remove ? 1u : (unsigned)w->type << 1, 1);
    lattice_txn_put_u(&o->wr, w->expire_ms, 8);
    lattice_txn_put_u(&o->wr, w->version, 8);
    lattice_txn_put_bytes(&o->wr, w->remove ? NULL : w->value, w->remove ? 0 : w->value_len);
    if (!o->n_writes++) o->first_version = w->version;
    o->last_version = w->version;
    uint64_t h = lt_fnv1a(key, klen);
    for (size_t i = 0; i < o->n_hashes; i++)
        if (o->hashes[i] == h) return;
    if (o->n_hashes == o->cap_hashes) {
        size_t nc = o->cap_hashes ? 2 * o->cap_hashes : 8;
        uint64_t *p = lt_realloc(o->hashes, nc * sizeof *p);
        if (!p) {
            o->wr.failed = true; /* an untracked key would let a read see it early: fail the run */
            return;
        }
        o->hashes = p;
        o->cap_hashes = nc;
    }
    o->hashes[o->n_hashes++] = h;
}

static void remove_key(lattice_meta_cache *c, uint32_t partition, const void *key, size_t klen, txn_out *o)
{
    fast_mark(c, partition);
    if (lattice_store_remove_v(c->store, partition, key, klen, c->counter[partition] + 1) != LATTICE_OK) return;
    c->writes++;
    repl_out rm = {true, true, NULL, 0, 0, ++c->counter[partition], 0};
    add_write(o, key, klen, &rm);
}

/* RENAME / RENAMENX / COPY: the source's value and absolute expiry to the
 * destination (s->value), then (RENAME) the source removed. */
static void run_move(lattice_meta_cache *c, uint32_t partition, const txn_sub *s, exec_scratch *sc,
                     lattice_op_result *r, txn_out *o)
{
    lattice_store_meta meta = {0};
    lt_free(sc->old);
    sc->old = NULL;
    int st = lattice_store_get_copy(c->store, partition, s->key, s->key_len, &sc->old, &meta);
    if (st != LATTICE_OK) {
        r->status = st;
        return;
    }
    bool same = s->key_len == s->value_len && memcmp(s->key, s->value, s->key_len) == 0;
    bool must_be_free = s->kind == LATTICE_TXN_RENAME ? (s->flags & LATTICE_OP_NX) : !(s->flags & LATTICE_OP_XX);
    if (same || must_be_free) {
        void *dv = NULL;
        lattice_store_meta dm = {0};
        int ds = same ? LATTICE_OK : lattice_store_get_copy(c->store, partition, s->value, s->value_len, &dv, &dm);
        lt_free(dv);
        if (ds != LATTICE_OK && ds != LATTICE_ERR_NOT_FOUND) {
            r->status = ds;
            return;
        }
        if (ds == LATTICE_OK && must_be_free) {
            r->status = LATTICE_ERR_EXISTS;
            return;
        }
        if (same) {
            r->status = LATTICE_OK; /* RENAME k k: nothing changes */
            return;
        }
    }
    exec_in dst = {LATTICE_OP_PUT, 0, partition, s->value, s->value_len, NULL, 0, 0, 0};
    repl_out w;
    r->status = exec_write_typed(c, &dst, sc->old, meta.value_len, meta.expire_ms, meta.type, &w); /* any type moves */
    if (r->status != LATTICE_OK) return;
    add_write(o, s->value, s->value_len, &w);
    if (s->kind == LATTICE_TXN_RENAME) remove_key(c, partition, s->key, s->key_len, o);
}

static void run_version(lattice_meta_cache *c, uint32_t partition, const txn_sub *s, exec_scratch *sc,
                        uint64_t epoch, lattice_op_result *r, uint8_t ep[8])
{
    lattice_store_meta meta = {0};
    lt_free(sc->old);
    sc->old = NULL;
    int st = lattice_store_get_copy(c->store, partition, s->key, s->key_len, &sc->old, &meta);
    if (st != LATTICE_OK && st != LATTICE_ERR_NOT_FOUND) {
        r->status = st;
        return;
    }
    r->flags = st == LATTICE_OK ? LATTICE_OP_R_FOUND : 0;
    r->num = (int64_t)(st == LATTICE_OK ? meta.version : c->counter[partition]);
    for (int i = 0; i < 8; i++) ep[i] = (uint8_t)(epoch >> (8 * i));
    r->value = ep;
    r->value_len = 8;
}

/* Is any of the n subs after subs[0] (MSETNX's keys) live?  -1: a store error. */
static int any_live(lattice_meta_cache *c, uint32_t partition, const txn_sub *subs, size_t n)
{
    for (size_t i = 1; i <= n; i++) {
        lattice_store_meta meta = {0};
        void *v = NULL;
        int st = lattice_store_get_copy(c->store, partition, subs[i].key, subs[i].key_len, &v, &meta);
        lt_free(v);
        if (st == LATTICE_OK) return 1;
        if (st != LATTICE_ERR_NOT_FOUND) return -1;
    }
    return 0;
}

/* EXPIRE NX/XX/GT/LT: the conditions against the key's expiry, then the
 * expiry set (or the key removed) as a single EXPIRE would. */
static void run_expire_if(lattice_meta_cache *c, uint32_t partition, const txn_sub *s, exec_scratch *sc,
                          lattice_op_result *r, txn_out *o)
{
    lattice_store_meta meta = {0};
    void *v = NULL;
    int st = lattice_store_get_copy(c->store, partition, s->key, s->key_len, &v, &meta);
    lt_free(v);
    if (st != LATTICE_OK) {
        r->status = st;
        return;
    }
    uint64_t cond = (uint64_t)s->delta, now = lt_wall_ms();
    bool has = meta.expire_ms != 0, past = cond & LATTICE_TXN_EXP_PAST;
    uint64_t when = past ? now : now + s->ttl_ms;
    bool go = true;
    if (cond & LATTICE_TXN_EXP_NX) go &= !has;
    if (cond & LATTICE_TXN_EXP_XX) go &= has;
    if (cond & LATTICE_TXN_EXP_GT) go &= has && when > meta.expire_ms;
    if (cond & LATTICE_TXN_EXP_LT) go &= !has || when < meta.expire_ms;
    if (!go) {
        r->status = LATTICE_ERR_NOT_FOUND;
        return;
    }
    exec_in in = {past ? LATTICE_OP_REMOVE : LATTICE_OP_EXPIRE, 0, partition, s->key, s->key_len, NULL, 0, 0,
                  past ? 0 : s->ttl_ms};
    repl_out w;
    exec_local(c, &in, sc, r, &w);
    if (w.needed) add_write(o, s->key, s->key_len, &w);
}

/* Does every watch still hold?  (A changed key or a new primary: no.) */
static bool watches_hold(lattice_meta_cache *c, uint32_t partition, const txn_req *q, uint64_t epoch)
{
    for (size_t i = 0; i < q->n_watch; i++) {
        const lattice_txn_watch *w = &q->watch[i];
        lattice_store_meta meta = {0};
        void *v = NULL;
        int st = lattice_store_get_copy(c->store, partition, w->key, w->key_len, &v, &meta);
        lt_free(v);
        if (st != LATTICE_OK && st != LATTICE_ERR_NOT_FOUND) return false;
        bool live = st == LATTICE_OK;
        switch (w->mode) {
        case LATTICE_TXN_W_VERSION:
            if (w->epoch != epoch || !live || meta.version != w->version) return false;
            break;
        case LATTICE_TXN_W_COUNTER:
            if (w->epoch != epoch || live || c->counter[partition] != w->version) return false;
            break;
        default:
            if (live) return false;
            break;
        }
    }
    return true;
}

/* ---- transactions across partitions: the participant's steps ----
 * (lattice/txn.h: PREPARE, FINISH, DECIDE; docs/TRANSACTIONS.md).  The
 * prepared row and the decision are entries under internal keys
 * (txn/txn.h), written and removed like any entry, so they replicate, log
 * and rebalance with their partition; the locks are read off the prepared
 * rows (txlock.c). */

static int cross_kind(const txn_req *q)
{
    int k = q->n_subs ? q->subs[0].kind : 0;
    return k == LATTICE_TXN_PREPARE || k == LATTICE_TXN_FINISH || k == LATTICE_TXN_DECIDE ? k : 0;
}

static uint64_t get_le(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = 0; i < n; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

/* PREPARE's record: its reads (the watches) and writes (the subs after
 * it), pointing into q; rec->reads and rec->writes malloc'd. */
static lattice_status prep_rec(const txn_req *q, lt_txp_rec *rec)
{
    memset(rec, 0, sizeof *rec);
    const txn_sub *h = &q->subs[0];
    if (h->value_len != LATTICE_TXN_PREP_BYTES) return LATTICE_ERR_INVAL;
    const uint8_t *v = h->value;
    rec->id = (lt_txid){get_le(v, 8), get_le(v + 8, 8)};
    rec->stamp = get_le(v + 16, 8);
    rec->home = (uint32_t)get_le(v + 24, 4);
    rec->deadline_ms = get_le(v + 28, 8);
    if (lt_txid_none(rec->id)) return LATTICE_ERR_INVAL;
    rec->n_reads = q->n_watch;
    rec->n_writes = q->n_subs - 1;
    rec->reads = lt_calloc(rec->n_reads ? rec->n_reads : 1, sizeof *rec->reads);
    rec->writes = lt_calloc(rec->n_writes ? rec->n_writes : 1, sizeof *rec->writes);
    if (!rec->reads || !rec->writes) {
        lt_txp_rec_free(rec);
        return LATTICE_ERR_NOMEM;
    }
    for (size_t i = 0; i < q->n_watch; i++) rec->reads[i] = (lt_txp_key_ref){q->watch[i].key, q->watch[i].key_len};
    for (size_t i = 1; i < q->n_subs; i++) {
        const txn_sub *s = &q->subs[i];
        if (s->kind != LATTICE_OP_PUT && s->kind != LATTICE_OP_REMOVE) {
            lt_txp_rec_free(rec);
            return LATTICE_ERR_INVAL;
        }
        bool rm = s->kind == LATTICE_OP_REMOVE;
        if (!rm && (s->delta < 0 || s->delta > LATTICE_STORE_TYPE_MAX)) {
            lt_txp_rec_free(rec);
            return LATTICE_ERR_INVAL;
        }
        rec->writes[i - 1] = (lt_txp_write){s->key, s->value, s->key_len, s->value_len, rm,
                                            rm ? 0 : (uint8_t)s->delta, rm ? 0 : s->ttl_ms};
    }
    return LATTICE_OK;
}

/* One write of a key by the participant (its own exec path: versions,
 * history, the copies' list). */
static void cross_write(lattice_meta_cache *c, uint32_t partition, int kind, const void *key, size_t klen,
                        const void *value, size_t vlen, uint64_t ttl_ms, exec_scratch *sc, txn_out *o)
{
    exec_in in = {kind, 0, partition, key, klen, value, vlen, 0, ttl_ms};
    lattice_op_result r = {0};
    repl_out w;
    exec_local(c, &in, sc, &r, &w);
    if (w.needed) add_write(o, key, klen, &w);
}

static lattice_status run_prepare(lattice_meta_cache *c, uint32_t partition, const txn_req *q, exec_scratch *sc,
                                  txn_out *o)
{
    lt_txp_rec rec;
    lattice_status st = prep_rec(q, &rec);
    if (st != LATTICE_OK) return st;
    uint8_t k[LT_TXP_KEY_MAX];
    size_t kl = lt_txp_key(c->cfg.partitions, partition, LT_TXP_PREPARED, rec.id, k);
    lattice_store_meta m = {0};
    lattice_op_result r = {.status = LATTICE_OK, .num = 1};
    int g = lattice_store_get(c->store, partition, k, kl, NULL, 0, &m);
    if (g == LATTICE_OK || g == LATTICE_ERR_TOO_LARGE) {
        r.num = 0; /* prepared already (a resend under another op sequence) */
    } else {
        uint8_t *v;
        size_t vl;
        if ((st = lt_txp_rec_encode(&rec, &v, &vl)) != LATTICE_OK) {
            lt_txp_rec_free(&rec);
            return st;
        }
        uint64_t g0 = lattice_store_reserved_gen(c->store, partition, NULL);
        cross_write(c, partition, LATTICE_OP_PUT, k, kl, v, vl, 0, sc, o);
        txlock_wrote(c, partition, g0, &rec, NULL);
        lt_free(v);
    }
    lt_txp_rec_free(&rec);
    add_result(o, &r);
    lattice_op_result later = {.status = LATTICE_OK}; /* the writes: applied at FINISH */
    for (size_t i = 1; i < q->n_subs; i++) add_result(o, &later);
    return LATTICE_OK;
}

/* FINISH's and DECIDE's request: that one sub, on a record of `kind`, with
 * an outcome byte. */
static bool one_step_ok(const txn_req *q, lt_txp_kind want)
{
    const txn_sub *h = &q->subs[0];
    lt_txp_kind kind;
    lt_txid id;
    if (q->n_subs != 1 || h->value_len != 1 || !lt_txp_key_parse(h->key, h->key_len, &kind, &id) || kind != want)
        return false;
    uint8_t o = *(const uint8_t *)h->value;
    return o == LATTICE_TXN_COMMIT || o == LATTICE_TXN_ABORT || (o == LATTICE_TXN_FORGET && want == LT_TXP_DECISION);
}

static lattice_status run_finish(lattice_meta_cache *c, uint32_t partition, const txn_req *q, exec_scratch *sc,
                                 txn_out *o)
{
    const txn_sub *h = &q->subs[0];
    if (!one_step_ok(q, LT_TXP_PREPARED)) return LATTICE_ERR_INVAL;
    unsigned outcome = *(const uint8_t *)h->value;
    void *row = NULL;
    lattice_store_meta m = {0};
    lattice_op_result r = {.status = LATTICE_OK, .num = 0};
    if (lattice_store_get_copy(c->store, partition, h->key, h->key_len, &row, &m) == LATTICE_OK) {
        lt_txp_rec rec;
        lattice_status st = lt_txp_rec_decode(row, m.value_len, &rec);
        if (st == LATTICE_ERR_NOMEM) {
            lt_free(row);
            return st;
        }
        if (st != LATTICE_OK)
            LT_LOG(LT_ERROR, "data", "cache %s: partition %u: a prepared transaction's record does not decode: "
                   "removed without its writes", c->cfg.name, partition);
        /* The row goes first (rec points into our copy of it), here and in
         * the unit every copy applies: the room it held - its values - is
         * then free for the writes, so a copy that had room for the row has
         * room for what it prepared. */
        lt_txp_kind kind;
        lt_txid id;
        uint64_t g0 = lattice_store_reserved_gen(c->store, partition, NULL);
        remove_key(c, partition, h->key, h->key_len, o);
        if (lt_txp_key_parse(h->key, h->key_len, &kind, &id)) txlock_wrote(c, partition, g0, NULL, &id);
        for (size_t i = 0; st == LATTICE_OK && outcome == LATTICE_TXN_COMMIT && i < rec.n_writes; i++) {
            const lt_txp_write *w = &rec.writes[i];
            if (w->remove) {
                cross_write(c, partition, LATTICE_OP_REMOVE, w->key, w->key_len, NULL, 0, 0, sc, o);
            } else { /* as written: its type and absolute expiry (none: the cache's default) */
                exec_in in = {LATTICE_OP_PUT, 0, partition, w->key, w->key_len, w->value, w->value_len, 0, 0};
                repl_out rw;
                uint64_t exp = w->expire_ms ? w->expire_ms : exec_expiry_for(c, 0); /* 0: the cache's own */
                int ws = exec_write_typed(c, &in, w->value, w->value_len, exp, w->type, &rw);
                if (ws == LATTICE_OK && rw.needed) add_write(o, w->key, w->key_len, &rw);
                else if (ws != LATTICE_OK)
                    LT_LOG(LT_ERROR, "data", "cache %s: partition %u: a committed transaction's write was not "
                           "applied here: %s", c->cfg.name, partition, lattice_strerror((lattice_status)ws));
            }
        }
        if (st == LATTICE_OK) lt_txp_rec_free(&rec);
        r.num = 1;
        lt_free(row);
    }
    add_result(o, &r);
    return LATTICE_OK;
}

static lattice_status run_decide(lattice_meta_cache *c, uint32_t partition, const txn_req *q, exec_scratch *sc,
                                 txn_out *o)
{
    const txn_sub *h = &q->subs[0];
    if (!one_step_ok(q, LT_TXP_DECISION)) return LATTICE_ERR_INVAL;
    uint8_t want = *(const uint8_t *)h->value;
    uint8_t have = 0;
    lattice_store_meta m = {0};
    int g = lattice_store_get(c->store, partition, h->key, h->key_len, &have, 1, &m);
    lattice_op_result r = {.status = LATTICE_OK};
    bool stands = (g == LATTICE_OK || g == LATTICE_ERR_TOO_LARGE) && m.value_len == 1;
    if (want == LATTICE_TXN_FORGET) {
        /* Every participant finished by it: nobody will ask again but a
         * sweep of a prepared row that a resent PREPARE left behind, and
         * that one may record abort (its writes were applied already, or
         * never).  Kept, the rows of a busy grid's decisions would pile up
         * for their hour in every partition's list of internal keys. */
        r.num = stands ? have : 0;
        if (stands) remove_key(c, partition, h->key, h->key_len, o);
    } else if (stands) {
        r.num = have; /* decided already: that stands */
    } else {
        /* Kept an hour: every prepared row of the transaction is finished
         * long before (the coordinator's finish, or the sweep within its
         * deadline and seconds); a copy cut off for longer that comes back
         * with a prepared row finds none and records abort - the one case
         * the expiry trades for not keeping decisions for ever. */
        cross_write(c, partition, LATTICE_OP_PUT, h->key, h->key_len, &want, 1, LATTICE_TXN_DECISION_KEEP_MS, sc, o);
        r.num = want;
    }
    add_result(o, &r);
    return LATTICE_OK;
}

/* Runs q on c's store (the caller is its partition's one writer).  OK with
 * o filled (o->aborted when a watch failed), or NOMEM (o->res/wr failed
 * part way: the writes made are in o->wr all the same). */
static lattice_status txn_run(lattice_meta_cache *c, uint32_t partition, const txn_req *q, uint64_t epoch,
                              exec_scratch *sc, txn_out *o)
{
    memset(o, 0, sizeof *o);
    if (!buf_reserve(&o->res, 5)) return LATTICE_ERR_NOMEM;
    lattice_txn_put_u(&o->res, LATTICE_TXN_FORMAT, 1);
    if (!watches_hold(c, partition, q, epoch)) {
        o->aborted = true;
        lattice_txn_put_u(&o->res, 0, 4);
        return LATTICE_OK;
    }
    lattice_txn_put_u(&o->res, q->n_subs, 4);
    switch (cross_kind(q)) {
    case LATTICE_TXN_PREPARE: return run_prepare(c, partition, q, sc, o);
    case LATTICE_TXN_FINISH: return run_finish(c, partition, q, sc, o);
    case LATTICE_TXN_DECIDE: return run_decide(c, partition, q, sc, o);
    default: break;
    }
    for (size_t i = 0; i < q->n_subs; i++) {
        const txn_sub *s = &q->subs[i];
        lattice_op_result r = {0};
        uint8_t ep[8];
        if (s->kind == LATTICE_TXN_IF_ABSENT) {
            size_t n = (size_t)s->delta;
            int live = any_live(c, partition, s, n);
            r.status = live < 0 ? LATTICE_ERR_IO : live ? LATTICE_ERR_EXISTS : LATTICE_OK;
            r.num = live == 0;
            add_result(o, &r);
            if (live == 0) continue;
            lattice_op_result skip = {.status = r.status};
            for (size_t k = 0; k < n; k++) add_result(o, &skip);
            i += n;
            continue;
        } else if (s->kind == LATTICE_TXN_IDLE) {
            uint64_t ms = 0;
            r.status = lattice_store_idle_ms(c->store, partition, s->key, s->key_len, lt_mono_ms(), &ms);
            r.num = (int64_t)ms;
        } else if (s->kind == LATTICE_TXN_EXPIRE_IF) {
            run_expire_if(c, partition, s, sc, &r, o);
        } else if (s->kind == LATTICE_TXN_VERSION) {
            run_version(c, partition, s, sc, epoch, &r, ep);
        } else if (s->kind == LATTICE_TXN_LMOVE) {
            exec_lmove(c, partition, s->key, s->key_len, s->value, s->value_len,
                       (s->delta & LATTICE_TXN_LMOVE_FROM_RIGHT ? EXEC_LMOVE_FROM_RIGHT : 0) |
                           (s->delta & LATTICE_TXN_LMOVE_TO_RIGHT ? EXEC_LMOVE_TO_RIGHT : 0) |
                           (q->woken ? EXEC_LMOVE_WOKEN : 0),
                       sc, &r, wrote_one, o);
        } else if (s->kind == LATTICE_TXN_BPOP) {
            exec_bpop(c, partition, s->key, s->key_len, s->value, s->value_len,
                      ((uint64_t)s->delta & LATTICE_TXN_BPOP_RIGHT ? EXEC_BPOP_RIGHT : 0) |
                          ((uint64_t)s->delta & LATTICE_TXN_BPOP_ZSET ? EXEC_BPOP_ZSET : 0) |
                          (q->woken ? EXEC_BPOP_WOKEN : 0),
                      (long long)((uint64_t)s->delta >> LATTICE_TXN_BPOP_COUNT_SHIFT), sc, &r, wrote_one, o);
        } else if (s->kind == LATTICE_TXN_SETOP) {
            exec_setop(c, partition, s->value, s->value_len, s->delta, sc, &r, wrote_one, o);
        } else if (names_key(s->kind)) {
            run_move(c, partition, s, sc, &r, o);
        } else {
            exec_in in = {s->kind, s->flags, partition, s->key, s->key_len, s->value, s->value_len, s->delta,
                          s->ttl_ms};
            repl_out w;
            exec_local(c, &in, sc, &r, &w);
            if (w.needed) add_write(o, s->key, s->key_len, &w);
        }
        /* Nothing to pop for a blocking step before its deadline: the
         * request waits (txn_execute); past it, nil as without the bit. */
        if (blocking_sub(s) && r.status == LATTICE_OK && r.num == 0 && (!s->ttl_ms || lt_wall_ms() < s->ttl_ms))
            o->would_block = true;
        add_result(o, &r);
    }
    return o->res.failed || o->wr.failed ? LATTICE_ERR_NOMEM : LATTICE_OK;
}

/* Applies an encoded write list (a copy: `copy` its ops; or the primary's
 * own undo: NULL): OK, or the first failure (the writes before it stay
 * applied). */
static lattice_status apply_writes(lattice_meta_cache *c, uint32_t partition, const void *p, size_t len, lattice_ops *copy)
{
    lattice_txn_buf b = {(uint8_t *)(uintptr_t)p, 0, len, false};
    while (b.len < len) {
        size_t kl, vl;
        const void *k = lattice_txn_get_bytes(&b, &kl);
        uint64_t flag = lattice_txn_get_u(&b, 1); /* add_write */
        bool rm = flag & 1;
        uint64_t exp = lattice_txn_get_u(&b, 8), ver = lattice_txn_get_u(&b, 8);
        const void *v = lattice_txn_get_bytes(&b, &vl);
        if (b.failed || (rm && flag != 1)) return LATTICE_ERR_INVAL;
        lattice_status st = exec_replicate_typed(c, partition, k, kl, v, vl, exp, ver, rm, (uint8_t)(flag >> 1));
        if (st != LATTICE_OK) return st;
        if (copy && rm && copy->grid_hooks.note_remove) copy->grid_hooks.note_remove(c, partition, k, kl, ver);
    }
    return LATTICE_OK;
}

/* ---- results kept for resends ---- */

typedef struct txn_kept_ent {
    uint64_t origin, seq; /* seq 0: empty */
    void *value;
    size_t len;
} txn_kept_ent;

struct txn_kept {
    size_t bytes; /* of every kept result: at most LATTICE_TXN_RESULTS_KEPT_BYTES */
    txn_kept_ent e[LATTICE_TXN_RESULTS_KEPT];
};

static void kept_put(lattice_ops *d, uint64_t origin, uint64_t seq, const void *v, size_t len)
{
    if (!seq || len > LATTICE_TXN_RESULT_KEEP_MAX) return;
    if (!d->txn_kept && !(d->txn_kept = lt_calloc(1, sizeof *d->txn_kept))) return;
    struct txn_kept *k = d->txn_kept;
    txn_kept_ent *e = &k->e[(origin ^ seq * 0x9E3779B97F4A7C15ull) % LATTICE_TXN_RESULTS_KEPT];
    /* Bounded in bytes too (1,024 results of a MiB would be a GiB): over
     * the budget the result is not kept, and a resend of it learns
     * "applied once, replies lost" (R_LOST). */
    if (k->bytes - e->len + len > LATTICE_TXN_RESULTS_KEPT_BYTES) return;
    void *copy = lt_malloc(len ? len : 1);
    if (!copy) return;
    if (len) memcpy(copy, v, len);
    lt_free(e->value);
    k->bytes = k->bytes - e->len + len;
    *e = (txn_kept_ent){origin, seq, copy, len};
}

static const txn_kept_ent *kept_get(const lattice_ops *d, uint64_t origin, uint64_t seq)
{
    if (!d->txn_kept || !seq) return NULL;
    const txn_kept_ent *e = &d->txn_kept->e[(origin ^ seq * 0x9E3779B97F4A7C15ull) % LATTICE_TXN_RESULTS_KEPT];
    return e->seq == seq && e->origin == origin ? e : NULL;
}

size_t txn_kept_bytes(const lattice_ops *d) { return d->txn_kept ? d->txn_kept->bytes : 0; }

static void sandbox_free(lattice_ops *d);

void txn_free(lattice_ops *d)
{
    sandbox_free(d);
    if (!d->txn_kept) return;
    for (size_t i = 0; i < LATTICE_TXN_RESULTS_KEPT; i++) lt_free(d->txn_kept->e[i].value);
    lt_free(d->txn_kept);
    d->txn_kept = NULL;
}

/* ---- replication ---- */

/* CTL_REPLICATE_TXN's value: u32 length of the writes, the writes, the result. */
static void send_txn(lattice_ops *d, lattice_meta_cache *c, uint32_t partition, const void *key, size_t klen,
                     const lattice_txn_buf *wr, uint64_t last_version, const lattice_txn_buf *res,
                     const char *origin_id, uint64_t seq, const lattice_op_result *r, waitw *w)
{
    lattice_txn_buf pl = {0};
    if (!buf_reserve(&pl, 4 + wr->len + res->len)) {
        /* No copy gets it: with a wait, it never completes a share; a
         * full_sync wait then acknowledges on the primary alone - say so. */
        LT_LOG(LT_WARN, "data", "cache %s: out of memory replicating a transaction", c->cfg.name);
        return;
    }
    lattice_txn_put_u(&pl, wr->len, 4);
    lattice_txn_put(&pl, wr->p, wr->len);
    lattice_txn_put(&pl, res->p, res->len);
    repl_out repl = {true, false, pl.p, pl.len, 0, last_version, 0};
    primary_send_copies(d, c, CTL_REPLICATE_TXN, partition, key, klen, &repl, origin_id, seq, r, w);
    buf_free(&pl);
}

lattice_status txn_apply_copy(lattice_ops *d, lattice_meta_cache *c, const Latdata__Req *q)
{
    lattice_txn_buf b = {q->value.data, 0, q->value.len, false};
    size_t wl = (size_t)lattice_txn_get_u(&b, 4);
    if (b.failed || wl > q->value.len - 4 || !c->store || q->partition >= c->cfg.partitions)
        return LATTICE_ERR_INVAL;
    lattice_status st = apply_writes(c, q->partition, q->value.data + 4, wl, d);
    if (st == LATTICE_OK && q->op_seq)
        kept_put(d, dedup_origin_hash(q->origin), q->op_seq, q->value.data + 4 + wl, q->value.len - 4 - wl);
    return st;
}

/* ---- undo (a copy had no room) ---- */

/* The previous state of every key a full_sync transaction may write, in one
 * block (freed by primary_after_write): entries (u32 klen, key, u8 had_old,
 * u64 expire, u32 vlen, value) from buf[0] to buf[len). */
typedef struct txn_undo_rec {
    int round; /* 0: the transaction was refused; 1: writing the previous state back was */
    uint32_t partition;
    uint64_t oh, seq;
    char origin_id[64];
    size_t len;
    uint8_t buf[];
} txn_undo_rec;

/* Appends key's present state to b (false: NOMEM or a store error). */
static bool capture_key(lattice_meta_cache *c, uint32_t partition, const void *key, size_t len, lattice_txn_buf *b)
{
    void *old = NULL;
    lattice_store_meta meta = {0};
    int st = lattice_store_get_copy(c->store, partition, key, len, &old, &meta);
    bool ok = (st == LATTICE_OK || st == LATTICE_ERR_NOT_FOUND) && buf_reserve(b, 21 + len + meta.value_len);
    if (ok) {
        lattice_txn_put_bytes(b, key, len);
        lattice_txn_put_u(b, st == LATTICE_OK ? 1u | (unsigned)meta.type << 1 : 0, 1); /* had it, and its type */
        lattice_txn_put_u(b, meta.expire_ms, 8);
        lattice_txn_put_bytes(b, old, st == LATTICE_OK ? meta.value_len : 0);
    }
    lt_free(old);
    return ok;
}

/* Every key the transaction may write (a key written twice is captured
 * twice: restoring it twice writes the same previous state). */
static txn_undo_rec *undo_capture(lattice_meta_cache *c, uint32_t partition, const txn_req *q, const char *origin_id,
                                  uint64_t seq)
{
    lattice_txn_buf b = {0};
    bool ok = true;
    lt_txp_rec rec;
    if (cross_kind(q) == LATTICE_TXN_PREPARE) {
        /* A PREPARE writes its row only (its subs are applied at FINISH):
         * the row's state is the one to put back. */
        if (prep_rec(q, &rec) == LATTICE_OK) {
            uint8_t k[LT_TXP_KEY_MAX];
            size_t kl = lt_txp_key(c->cfg.partitions, partition, LT_TXP_PREPARED, rec.id, k);
            lt_txp_rec_free(&rec);
            ok = capture_key(c, partition, k, kl, &b);
        }
    } else if (cross_kind(q) == LATTICE_TXN_FINISH) {
        /* A FINISH changes the keys its row writes, then removes the row:
         * their states first (put back first, they free room), the row's
         * after (the loop below). */
        void *row = NULL;
        lattice_store_meta m = {0};
        const txn_sub *h = &q->subs[0];
        if (lattice_store_get_copy(c->store, partition, h->key, h->key_len, &row, &m) == LATTICE_OK &&
            lt_txp_rec_decode(row, m.value_len, &rec) == LATTICE_OK) {
            for (size_t i = 0; ok && i < rec.n_writes; i++)
                ok = capture_key(c, partition, rec.writes[i].key, rec.writes[i].key_len, &b);
            lt_txp_rec_free(&rec);
        }
        lt_free(row);
    }
    for (size_t i = 0; i < q->n_subs && ok && cross_kind(q) != LATTICE_TXN_PREPARE; i++) {
        const txn_sub *s = &q->subs[i];
        if (ops_is_read(s->kind) || s->kind == LATTICE_TXN_VERSION || s->kind == LATTICE_TXN_IF_ABSENT ||
            s->kind == LATTICE_TXN_IDLE || (s->kind == LATTICE_TXN_SETOP && !exec_setop_writes(s->delta)))
            continue;
        sub_keys it;
        sub_keys_begin(&it, s);
        const void *k;
        size_t kl;
        for (bool first = true; ok && sub_keys_next(&it, &k, &kl); first = false)
            if (!first || s->kind != LATTICE_TXN_COPY) ok = capture_key(c, partition, k, kl, &b); /* COPY reads its source */
    }
    txn_undo_rec *u = ok ? lt_malloc(sizeof *u + b.len) : NULL;
    if (u) {
        *u = (txn_undo_rec){0, partition, dedup_origin_hash(seq ? origin_id : NULL), seq, {0}, b.len};
        if (seq && origin_id) snprintf(u->origin_id, sizeof u->origin_id, "%s", origin_id);
        if (b.len) memcpy(u->buf, b.p, b.len);
    }
    buf_free(&b);
    return u;
}

/* As undo_write (primary.c) for every key of the transaction at once: the
 * previous state back here and on every copy in one CTL_REPLICATE_TXN, on
 * the same wait; a second refusal removes the keys everywhere (always
 * fits).  The issuer then gets REGION_FULL. */
static bool txn_undo(lattice_ops *d, waitw *w)
{
    txn_undo_rec *u = w->undo;
    lattice_op_result full = {.status = LATTICE_ERR_REGION_FULL};
    lattice_meta_cache *c = primary_undo_begin(w, &u->round);
    if (!c) return false;
    txn_out o = {0};
    lattice_txn_buf b = {u->buf, 0, u->len, false};
    const void *first = NULL;
    size_t first_len = 0;
    while (b.len < u->len) {
        size_t kl, vl;
        const void *k = lattice_txn_get_bytes(&b, &kl);
        uint64_t flag = lattice_txn_get_u(&b, 1); /* capture_key */
        bool had = flag & 1;
        uint64_t exp = lattice_txn_get_u(&b, 8);
        const void *v = lattice_txn_get_bytes(&b, &vl);
        if (!first) first = k, first_len = kl;
        exec_in in = {LATTICE_OP_PUT, 0, u->partition, k, kl, NULL, 0, 0, 0};
        repl_out rp;
        if (had && u->round == 1 && exec_write_typed(c, &in, v, vl, exp, (uint8_t)(flag >> 1), &rp) == LATTICE_OK) {
            add_write(&o, k, kl, &rp);
            continue;
        }
        if (had && u->round == 1)
            LT_LOG(LT_WARN, "data", "cache %s: a refused transaction could not be undone here: its key is removed",
                   c->cfg.name);
        fast_mark(c, u->partition);
        lattice_store_remove_v(c->store, u->partition, k, kl, c->counter[u->partition] + 1);
        c->writes++;
        repl_out rm = {true, true, NULL, 0, 0, ++c->counter[u->partition], 0};
        add_write(&o, k, kl, &rm);
    }
    if (u->round > 1)
        LT_LOG(LT_WARN, "data", "cache %s: a copy had no room to undo a refused transaction: its keys are removed",
               c->cfg.name);
    if (u->seq) dedup_put(d, u->oh, u->seq, &full); /* a resend gets the refusal */
    w->remaining = 1;
    lattice_txn_buf none = {0};
    uint8_t hdr[5] = {LATTICE_TXN_FORMAT, 0, 0, 0, 0};
    none.p = hdr;
    none.len = none.cap = sizeof hdr;
    if (o.n_writes)
        send_txn(d, c, u->partition, first, first_len, &o.wr, o.last_version, &none, u->seq ? u->origin_id : NULL,
                 u->seq, &full, w);
    out_free(&o);
    sync_wait_release(d, w);
    return true;
}

static void txn_after(lattice_ops *d, waitw *w)
{
    primary_after_write(d, w);
    lt_free(w->more_keys);
    w->more_keys = NULL;
    w->n_more_keys = 0;
}

/* ---- the primary ---- */

/* The newest full_sync write in flight on any key of q, or NULL. */
static waitw *pending_on(lattice_ops *d, lattice_meta_cache *c, uint32_t partition, const txn_req *q)
{
    waitw *last = NULL;
    for (size_t i = 0; i < q->n_watch; i++) {
        waitw *w = clean_pending_write(d, c, partition, q->watch[i].key, q->watch[i].key_len);
        if (w && (!last || w->version > last->version)) last = w;
    }
    for (size_t i = 0; i < q->n_subs; i++) {
        sub_keys it;
        sub_keys_begin(&it, &q->subs[i]);
        const void *k;
        size_t kl;
        while (sub_keys_next(&it, &k, &kl)) {
            waitw *w = clean_pending_write(d, c, partition, k, kl);
            if (w && (!last || w->version > last->version)) last = w;
        }
    }
    return last;
}

/* True when a transaction prepared across partitions holds a key of q
 * (txlock.c): every key conservatively as written when q writes at all. */
static bool locked_by_prepared(lattice_meta_cache *c, uint32_t partition, const txn_req *q)
{
    bool writes = false;
    for (size_t i = 0; i < q->n_subs && !writes; i++) writes = !ops_is_read(q->subs[i].kind) && q->subs[i].kind != LATTICE_TXN_VERSION;
    for (size_t i = 0; i < q->n_watch; i++)
        if (txlock_blocks(c, partition, q->watch[i].key, q->watch[i].key_len, writes)) return true;
    for (size_t i = 0; i < q->n_subs; i++) {
        sub_keys it;
        sub_keys_begin(&it, &q->subs[i]);
        const void *k;
        size_t kl;
        while (sub_keys_next(&it, &k, &kl))
            if (txlock_blocks(c, partition, k, kl, writes)) return true;
    }
    return false;
}

/* Parks the whole transaction behind w (rerun with its name for resends). */
static lattice_status defer(waitw *w, const exec_in *in, const origin *org, const char *origin_id, uint64_t seq)
{
    bool named = seq && origin_id;
    return clean_defer_write(w, in, org, named ? origin_id : NULL, named ? seq : 0);
}

static void fail(lattice_ops *d, const origin *org, lattice_status st)
{
    lattice_op_result r = {.status = st};
    chan_complete(d, org, &r);
}

void txn_execute(lattice_ops *d, lattice_meta_cache *c, const exec_in *in, const origin *org, const char *origin_id,
                 uint64_t seq)
{
    if (!c->store) {
        fail(d, org, LATTICE_ERR_NOT_OWNER);
        return;
    }
    txn_req q;
    lattice_status st = req_decode(c, in->partition, in->value, in->value_len, &q);
    if (st != LATTICE_OK) {
        req_free(&q);
        fail(d, org, st);
        return;
    }
    q.woken = in->flags & OPS_WOKEN;
    bool full_sync = c->cfg.sync == LATTICE_SYNC_FULL;
    waitw *pw = full_sync ? pending_on(d, c, in->partition, &q) : NULL;
    if (pw) {
        req_free(&q);
        if ((st = defer(pw, in, org, origin_id, seq)) != LATTICE_OK) fail(d, org, st);
        return;
    }
    uint64_t oh = seq ? dedup_origin_hash(origin_id) : 0;
    const dedup_entry *seen = dedup_get(d, oh, seq);
    if (seen) {
        /* Applied here (or replicated here) before: never again.  Its
         * result if this copy kept it, else "applied, replies lost". */
        const txn_kept_ent *k = seen->status == LATTICE_OK ? kept_get(d, oh, seq) : NULL;
        lattice_op_result again = {(lattice_status)seen->status, k ? k->value : NULL, k ? k->len : 0, seen->num,
                                   seen->flags | (k || seen->status != LATTICE_OK ? 0 : LATTICE_OP_R_LOST)};
        req_free(&q);
        chan_complete(d, org, &again);
        return;
    }
    if (cross_kind(&q) == LATTICE_TXN_PREPARE) {
        /* Wait-die against the transactions prepared here (txlock.c). */
        lt_txp_rec rec;
        if ((st = prep_rec(&q, &rec)) != LATTICE_OK) {
            req_free(&q);
            fail(d, org, st);
            return;
        }
        bool unknown;
        lt_txp_locks *held = txlock_table(c, in->partition, &unknown);
        lt_txp_verdict v = unknown ? LT_TXP_WAIT : held ? lt_txp_locks_verdict(held, &rec) : LT_TXP_GRANT;
        lt_txid id = rec.id;
        lt_txp_rec_free(&rec);
        uint64_t due = 0;
        if (v == LT_TXP_DIE && !txlock_patience(c, in->partition, id.node, id.seq, lt_mono_ms(), &due)) {
            req_free(&q); /* waits a little for the older holder first */
            bool named = seq && origin_id;
            if ((st = txlock_park_until(d, c, in, org, named ? origin_id : NULL, named ? seq : 0, due)) != LATTICE_OK)
                fail(d, org, st);
            return;
        }
        if (v != LT_TXP_DIE) txlock_patience_end(c, in->partition, id.node, id.seq);
        if (v == LT_TXP_DIE) {
            req_free(&q);
            lattice_op_result died = {.status = LATTICE_OK, .flags = LATTICE_OP_R_ABORTED};
            chan_complete(d, org, &died);
            return;
        }
        if (v == LT_TXP_WAIT) {
            req_free(&q);
            bool named = seq && origin_id;
            if ((st = txlock_park(d, c, in, org, named ? origin_id : NULL, named ? seq : 0)) != LATTICE_OK)
                fail(d, org, st);
            return;
        }
    } else if (!cross_kind(&q) && locked_by_prepared(c, in->partition, &q)) {
        req_free(&q);
        bool named = seq && origin_id;
        if ((st = txlock_park(d, c, in, org, named ? origin_id : NULL, named ? seq : 0)) != LATTICE_OK) fail(d, org, st);
        return;
    }
    lattice_meta_member *owners[2 * (LATTICE_CACHE_MAX_BACKUPS + 1)];
    size_t n = lattice_meta_serving_owners(c, in->partition, owners, LATTICE_CACHE_MAX_BACKUPS + 1);
    n += lattice_meta_moving_owners(c, in->partition, owners + n, LATTICE_CACHE_MAX_BACKUPS + 1);
    txn_undo_rec *u = n > 1 && full_sync ? undo_capture(c, in->partition, &q, origin_id, seq) : NULL;
    if (n > 1 && full_sync && !u) {
        req_free(&q);
        fail(d, org, LATTICE_ERR_NOMEM);
        return;
    }
    txn_out o;
    st = txn_run(c, in->partition, &q, dedup_origin_hash(d->self_id), &d->scratch, &o);
    req_free(&q);
    if (st == LATTICE_OK && o.would_block && !o.n_writes) {
        /* A blocking pop with nothing to pop: it waits here (bwait.c). */
        out_free(&o);
        lt_free(u);
        bool named = seq && origin_id;
        if ((st = bwait_park(d, c, in, org, named ? origin_id : NULL, named ? seq : 0)) != LATTICE_OK) fail(d, org, st);
        return;
    }
    /* NOMEM part way: what was written still replicates (copies stay
     * equal); the issuer learns the transaction failed. */
    lattice_op_result r = {st, st == LATTICE_OK ? o.res.p : NULL, st == LATTICE_OK ? o.res.len : 0,
                           (int64_t)o.n_writes, o.aborted ? LATTICE_OP_R_ABORTED : 0};
    if (o.n_writes) {
        dedup_put(d, oh, seq, &r);
        if (st == LATTICE_OK) kept_put(d, oh, seq, o.res.p, o.res.len);
    }
    waitw *w = o.n_writes && n > 1 && full_sync ? primary_wait_begin(d, c, org, &r, txn_undo, u, txn_after, in->partition,
                                                                     o.first_version, in->key, in->key_len)
                                                : NULL;
    if (w) {
        w->oh = oh;
        w->seq = seq;
        w->more_keys = o.hashes; /* a read of any key it wrote waits for it */
        w->n_more_keys = o.n_hashes;
        o.hashes = NULL;
    } else {
        lt_free(u);
    }
    if (o.n_writes) {
        lattice_txn_buf empty = {0};
        send_txn(d, c, in->partition, in->key, in->key_len, &o.wr, o.last_version, st == LATTICE_OK ? &o.res : &empty,
                 origin_id, seq, &r, w);
    }
    bool wrote = o.n_writes != 0;
    if (w) sync_wait_release(d, w);
    else chan_complete(d, org, &r);
    out_free(&o);
    if (wrote && d->bwaits) bwait_tick(d); /* its waiters before the next operation (bwait.c) */
}

lattice_status txn_run_local(lattice_meta_cache *c, uint32_t partition, const void *req, size_t len, uint64_t epoch,
                             exec_scratch *s, txn_local_out *out)
{
    memset(out, 0, sizeof *out);
    txn_req q;
    lattice_status st = req_decode(c, partition, req, len, &q);
    txn_out o = {0};
    if (st == LATTICE_OK) st = txn_run(c, partition, &q, epoch, s, &o);
    req_free(&q);
    out->result = o.res.p;
    out->result_len = o.res.len;
    out->writes = o.wr.p;
    out->writes_len = o.wr.len;
    out->n_writes = o.n_writes;
    out->aborted = o.aborted;
    lt_free(o.hashes);
    return st;
}

lattice_status txn_apply_writes(lattice_meta_cache *c, uint32_t partition, const void *writes, size_t len)
{
    return apply_writes(c, partition, writes, len, NULL);
}

/* ---- a transaction across partitions, worked out (lattice_ops_txn_eval) ----
 * A private store of one partition in a region of its own: it holds the
 * entries a coordinator read, runs the request there as a primary would
 * (txn_run: the same value semantics, byte for byte), hands each written
 * key's final state on and is emptied again.  Only the data thread uses it. */

#define SANDBOX_MB 64u

struct txn_sandbox {
    lattice_region *region;
    lattice_store *store;
    exec_scratch sc;
};

void txn_sandbox_free(struct txn_sandbox **sb)
{
    struct txn_sandbox *b = *sb;
    if (!b) return;
    exec_scratch_free(&b->sc);
    if (b->store) lattice_store_destroy(b->store);
    if (b->region) lattice_region_destroy(b->region);
    lt_free(b);
    *sb = NULL;
}

static void sandbox_free(lattice_ops *d) { txn_sandbox_free(&d->txn_sandbox); }

static struct txn_sandbox *sandbox(struct txn_sandbox **sb)
{
    if (*sb) return *sb;
    struct txn_sandbox *b = lt_calloc(1, sizeof *b);
    if (!b) return NULL;
    *sb = b;
    lattice_region_config rc = {"txn-eval", 0, SANDBOX_MB, 0, LATTICE_REGION_REJECT};
    lattice_store_config sc = {"txn-eval", 1, NULL, NULL, NULL};
    if (lattice_region_create(&rc, &b->region) != LATTICE_OK || !(sc.region = b->region) ||
        lattice_store_create(&sc, &b->store) != LATTICE_OK) {
        txn_sandbox_free(sb);
        return NULL;
    }
    /* No change history: nothing rebalances from here, and the ring its
     * first write mapped was unmapped by every evaluation's clear - a
     * munmap whose TLB shootdown interrupted every thread of the node: 35%
     * of a RESP server's CPU under MULTI/EXEC across slots with 16
     * connections (perf), the ring mapped and zeroed again by the next. */
    lattice_store_history_configure(b->store, 0, 0);
    return b;
}

lattice_status lattice_ops_txn_eval(lattice_ops *d, const char *cache, const lattice_ops_txn_entry *e, size_t n,
                                    const void *req, size_t req_len, void **result, size_t *result_len,
                                    lattice_ops_txn_final_fn fn, void *arg)
{
    *result = NULL;
    *result_len = 0;
    const lattice_meta_cache *real = lattice_meta_cache_of(d->meta, cache ? cache : "default");
    if (!real) return LATTICE_ERR_NO_CACHE;
    return txn_eval(&d->txn_sandbox, &real->cfg, e, n, req, req_len, result, result_len, fn, arg);
}

lattice_status txn_eval(struct txn_sandbox **sb, const lattice_cache_config *cfg, const lattice_ops_txn_entry *e,
                        size_t n, const void *req, size_t req_len, void **result, size_t *result_len,
                        lattice_ops_txn_final_fn fn, void *arg)
{
    *result = NULL;
    *result_len = 0;
    struct txn_sandbox *b = sandbox(sb);
    if (!b) return LATTICE_ERR_NOMEM;
    uint64_t counter = 1;
    lattice_meta_cache c = {0};
    c.cfg = *cfg;
    c.cfg.partitions = 1;
    c.store = b->store;
    c.counter = &counter;
    lattice_status st = LATTICE_OK;
    for (size_t i = 0; st == LATTICE_OK && i < n; i++) {
        if (!e[i].live) continue;
        lattice_store_entry en = {0, e[i].key, e[i].key_len, e[i].value, e[i].value_len, e[i].expire_ms, 1, e[i].type};
        int ps = lattice_store_put(b->store, &en, 0);
        if (ps != LATTICE_OK) st = ps == LATTICE_ERR_NOMEM || ps == LATTICE_ERR_REGION_FULL ? LATTICE_ERR_TOO_LARGE : ps;
    }
    txn_req q = {0};
    txn_out o = {0};
    if (st == LATTICE_OK) st = req_decode(&c, 0, req, req_len, &q);
    if (st == LATTICE_OK) {
        q.n_watch = 0; /* checked against the reads by the caller */
        st = cross_kind(&q) ? LATTICE_ERR_INVAL : txn_run(&c, 0, &q, 0, &b->sc, &o);
    }
    /* Each written key's state as the request left it. */
    lattice_txn_buf w = {o.wr.p, 0, o.wr.len, false};
    while (st == LATTICE_OK && w.len < o.wr.len) {
        size_t kl, vl;
        const void *k = lattice_txn_get_bytes(&w, &kl);
        lattice_txn_get_u(&w, 1);
        lattice_txn_get_u(&w, 8);
        lattice_txn_get_u(&w, 8);
        lattice_txn_get_bytes(&w, &vl);
        if (w.failed) {
            st = LATTICE_ERR_INVAL;
            break;
        }
        void *v = NULL;
        lattice_store_meta m = {0};
        int g = lattice_store_get_copy(b->store, 0, k, kl, &v, &m);
        if (g == LATTICE_OK) st = fn(arg, k, kl, true, v, m.value_len, m.expire_ms, m.type);
        else if (g == LATTICE_ERR_NOT_FOUND) st = fn(arg, k, kl, false, NULL, 0, 0, 0);
        else st = g;
        lt_free(v);
    }
    req_free(&q);
    lattice_store_clear(b->store, 0);
    lt_free(o.wr.p);
    lt_free(o.hashes);
    if (st != LATTICE_OK) {
        lt_free(o.res.p);
        return st;
    }
    *result = o.res.p;
    *result_len = o.res.len;
    return LATTICE_OK;
}

bool lattice_ops_cache_partitions(lattice_ops *d, const char *cache, uint32_t *out)
{
    if (!d || !chan_on_data_thread(d)) return false;
    const lattice_meta_cache *c = lattice_meta_cache_of(d->meta, cache ? cache : "default");
    *out = c ? c->cfg.partitions : 0;
    return true;
}
