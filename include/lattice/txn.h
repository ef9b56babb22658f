/*
 * lattice/txn.h: the payload of a LATTICE_OP_TXN operation (prefix
 * lattice_txn_) - sub-operations on keys of one partition, executed by the
 * partition's primary in one step, all-or-nothing for readers and
 * replicated as one unit (docs/CONSISTENCY.md, "Transactions").
 *
 * Header-only, so the endpoints (which see only the public API) and the
 * primary share one encoding.  Little-endian, length-prefixed:
 *
 *   request (op.value)  u8 1, u32 n_watch, watch*, u32 n_ops, sub*
 *     watch             u32 klen, key, u8 mode, u64 version, u64 epoch
 *     sub               u8 kind, u32 flags, u32 klen, key, u32 vlen, value,
 *                       i64 delta, u64 ttl_ms
 *   result (r.value)    u8 1, u32 n, (i32 status, u32 flags, i64 num,
 *                       u32 vlen, value)*  - one per sub, in order
 *
 * op.key is any key of the transaction (it routes the op); every key must
 * map to that key's partition (else INVAL).  A sub is a lattice_op kind
 * (GET ... CONTAINS: as a single op would run, with its result) or one of
 * the TXN_* kinds below.  Watches are checked first: when one fails
 * nothing runs and the result has flag LATTICE_OP_R_ABORTED (no value).
 * The op's status is OK once it ran (each sub has its own status), or an
 * error of the whole (INVAL malformed, TOO_LARGE, NOT_OWNER, ...).
 * A resend after a failover (same issuer and op sequence) of a transaction
 * applied before gets the first result again when the copy kept it (its
 * last LATTICE_TXN_RESULTS_KEPT transactions, results up to
 * LATTICE_TXN_RESULT_KEEP_MAX bytes, LATTICE_TXN_RESULTS_KEPT_BYTES in
 * all), else status OK with flag
 * LATTICE_OP_R_LOST and no value: applied once, its replies unknown.
 */
#ifndef LATTICE_TXN_H
#define LATTICE_TXN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "lattice/coll.h"
#include "lattice/ops.h"

#define LATTICE_TXN_FORMAT 1
#define LATTICE_TXN_RESULTS_KEPT 1024u
#define LATTICE_TXN_RESULT_KEEP_MAX (1u << 20)
#define LATTICE_TXN_RESULTS_KEPT_BYTES (16u << 20)

/* Sub-operation kinds only a transaction has. */
enum {
    /* WATCH's read: flags R_FOUND and num = the entry's version when the key
     * is live, else num = the partition's update counter; value = the 8-byte
     * epoch (the primary's incarnation).  Status OK. */
    LATTICE_TXN_VERSION = 64,
    /* value = destination key.  Moves the value and its expiry there
     * (RENAME); flag LATTICE_OP_NX: only if the destination is absent, else
     * EXISTS (RENAMENX).  NOT_FOUND: no source.  Source == destination: OK
     * (NX: EXISTS), nothing changes. */
    LATTICE_TXN_RENAME = 65,
    /* value = destination key.  Copies value and expiry (COPY); flag
     * LATTICE_OP_XX replaces a live destination, else EXISTS. */
    LATTICE_TXN_COPY = 66,
    /* MSETNX's guard: delta = n, the number of subs right after it that it
     * guards.  They run only when none of their keys is live: then OK with
     * num 1; else this sub and each of the n answer EXISTS, nothing runs. */
    LATTICE_TXN_IF_ABSENT = 67,
    /* EXPIRE with conditions: delta = LATTICE_TXN_EXP_* bits, ttl_ms = the
     * new TTL from now (with EXP_PAST: the deadline passed, the key is
     * removed).  Every given condition is checked against the key's expiry
     * at the primary.  OK: done; NOT_FOUND: no key, or a condition failed. */
    LATTICE_TXN_EXPIRE_IF = 68,
    /* OBJECT IDLETIME: num = a lower bound of the ms since the key was last
     * read or written (its storage page's access stamp: lattice_store_idle_ms);
     * NOT_FOUND when absent.  Reads nothing else, touches nothing. */
    LATTICE_TXN_IDLE = 69,
    /* A transaction across partitions (docs/TRANSACTIONS.md), built by the
     * coordinator only - each is the first and governs the request:
     * PREPARE: value = LATTICE_TXN_PREP_BYTES (u64 node, u64 seq, u64 stamp,
     *   u32 home, u64 deadline_ms: the transaction's id, start stamp, home
     *   partition, wall-clock deadline); the watches are its reads here, the
     *   subs after it (PUT or REMOVE only) its writes here, applied only at
     *   FINISH - a PUT's ttl_ms is its absolute expiry (ms since the epoch;
     *   0: the cache's expiry_ms from FINISH on, as a PUT's 0) and its delta
     *   the value's type (0 a string).  Watches fail: R_ABORTED.  A key held by an older prepared
     *   transaction: R_ABORTED too (wait-die: the younger dies); by younger
     *   ones: the request waits.  Else the prepared row is written (an
     *   internal key of this partition) and the result is OK - then num 1,
     *   or num 0 when it was prepared already.
     * FINISH: key = the prepared row's internal key, value = 1 byte,
     *   LATTICE_TXN_COMMIT or LATTICE_TXN_ABORT: applies the row's writes
     *   (commit) and removes it, as one step.  num 1, or 0 when no such row
     *   was there (finished already).
     * DECIDE: key = the decision's internal key in the home partition,
     *   value = 1 byte, the outcome wanted: written if there is none; num =
     *   the outcome that stands.  value LATTICE_TXN_FORGET instead: every
     *   participant finished, the decision is removed (num = the outcome
     *   that stood, 0 none). */
    LATTICE_TXN_PREPARE = 70,
    LATTICE_TXN_FINISH = 71,
    LATTICE_TXN_DECIDE = 72,
    /* LMOVE / RPOPLPUSH: value = destination key, delta = LATTICE_TXN_LMOVE_*
     * bits.  Pops an element of the source list and pushes it onto the
     * destination list as one step; value of the result = the element as a
     * reply of lattice/coll.h ($ bulk), or nil (_) when the source holds no
     * list.  WRONGTYPE, nothing moved, when the source (or, the source being
     * a list, the destination) holds another type. */
    LATTICE_TXN_LMOVE = 73,
    /* BLPOP / BRPOP / BZPOPMIN / BZPOPMAX: key = the first key, value = the
     * others packed as lattice/coll.h packs arguments (all of the request's
     * partition), delta = LATTICE_TXN_BPOP_* bits.  Pops from the first of
     * them that holds an element: value of the result = [key, element] (a
     * list) or [key, member, score] (a sorted set) as a reply of
     * lattice/coll.h; WRONGTYPE (nothing popped) at the first key on the
     * way that holds another type; a null array (*-1) when none holds one. */
    LATTICE_TXN_BPOP = 74,
    /* SINTER ... ZRANGESTORE, SMOVE (a lattice_setop of lattice/coll.h):
     * value = the command's arguments after its name, packed as
     * lattice/coll.h packs them; delta = the lattice_setop, the
     * LATTICE_TXN_SETOP_DEST bit when the first argument is a key (the
     * destination), and which arguments are its other keys: a run of
     * LATTICE_TXN_SETOP_KEYS(delta) from argument
     * LATTICE_TXN_SETOP_FIRST(delta); key = the first key it names.  Every
     * key of the request's partition.  The value of the result is the
     * command's reply as a reply of lattice/coll.h (docs/TYPES.md). */
    LATTICE_TXN_SETOP = 75,
};
#define LATTICE_TXN_SETOP_DEST 0x100u
#define LATTICE_TXN_SETOP_DELTA(op, dest, first, n)                                                              \
    ((int64_t)((uint64_t)(op) | ((dest) ? LATTICE_TXN_SETOP_DEST : 0u) | ((uint64_t)(uint16_t)(first) << 16) | \
               ((uint64_t)(uint32_t)(n) << 32)))
#define LATTICE_TXN_SETOP_OP(delta) ((int)((uint64_t)(delta) & 0xffu))
#define LATTICE_TXN_SETOP_FIRST(delta) ((size_t)(((uint64_t)(delta) >> 16) & 0xffffu))
#define LATTICE_TXN_SETOP_KEYS(delta) ((size_t)((uint64_t)(delta) >> 32))
#define LATTICE_TXN_LMOVE_FROM_RIGHT 0x1u /* pop the source's tail (else its head) */
#define LATTICE_TXN_LMOVE_TO_RIGHT 0x2u   /* push at the destination's tail (else its head) */
#define LATTICE_TXN_BPOP_RIGHT 0x1u       /* a list's tail (else its head) */
#define LATTICE_TXN_BPOP_ZSET 0x2u        /* sorted sets: the lowest score (with RIGHT: the highest) */
/* BPOP's delta from bit 32 up: LMPOP / ZMPOP's count (0: one element, in
 * BLPOP's reply; n: up to n, [key, [elements]] / [key, [[member, score]...]]). */
#define LATTICE_TXN_BPOP_COUNT_SHIFT 32
/* LMOVE and BPOP: nothing to pop, the request waits at the primary until
 * there is (then runs) or until the sub's ttl_ms, a wall-clock deadline in
 * ms since the epoch (0: none), passes (then answers as without the bit).
 * The one sub of its request; the request's op carries LATTICE_OP_BLOCKING
 * with the same ttl_ms (docs/TYPES.md, "Blocking pops"). */
#define LATTICE_TXN_BLOCK 0x4u
#define LATTICE_TXN_PREP_BYTES 36u
#define LATTICE_TXN_DECISION_KEEP_MS 3600000u /* a decision row expires after an hour */
#define LATTICE_TXN_COMMIT 1u
#define LATTICE_TXN_ABORT 2u
#define LATTICE_TXN_FORGET 3u /* DECIDE's value once every participant finished */

/* Conditions of LATTICE_TXN_EXPIRE_IF (Redis's EXPIRE NX/XX/GT/LT). */
#define LATTICE_TXN_EXP_NX 0x1u   /* the key has no expiry */
#define LATTICE_TXN_EXP_XX 0x2u   /* the key has an expiry */
#define LATTICE_TXN_EXP_GT 0x4u   /* it has one, and the new is later */
#define LATTICE_TXN_EXP_LT 0x8u   /* it has none (no expiry is infinite), or the new is earlier */
#define LATTICE_TXN_EXP_PAST 0x10u /* the new deadline passed: remove instead */
#define LATTICE_TXN_EXP_ALL_ 0x1fu

/* Watch modes. */
enum {
    LATTICE_TXN_W_VERSION = 0, /* live, with this version, same epoch */
    LATTICE_TXN_W_COUNTER = 1, /* absent, partition counter unchanged, same epoch */
    LATTICE_TXN_W_ABSENT = 2,  /* absent (MSETNX) */
};

/* Result flags of the whole transaction. */
#define LATTICE_OP_R_ABORTED 0x2u /* a watch failed: nothing ran */
#define LATTICE_OP_R_LOST 0x4u    /* a resend of an applied transaction whose results were not kept */

typedef struct lattice_txn_watch {
    const void *key;
    size_t key_len;
    uint8_t mode;
    uint64_t version, epoch;
} lattice_txn_watch;

typedef struct lattice_txn_sub_result {
    int32_t status;
    uint32_t flags;
    int64_t num;
    const void *value;
    size_t value_len;
} lattice_txn_sub_result;

/* ---- the byte layer ---- */

typedef struct lattice_txn_buf {
    uint8_t *p;
    size_t len, cap;
    bool failed; /* a size check failed (writers: no room; readers: truncated) */
} lattice_txn_buf;

static inline void lattice_txn_put(lattice_txn_buf *b, const void *src, size_t n)
{
    if (b->failed || b->len + n > b->cap) {
        b->failed = true;
        return;
    }
    if (n) memcpy(b->p + b->len, src, n);
    b->len += n;
}
static inline void lattice_txn_put_u(lattice_txn_buf *b, uint64_t v, int bytes)
{
    uint8_t t[8];
    for (int i = 0; i < bytes; i++) t[i] = (uint8_t)(v >> (8 * i));
    lattice_txn_put(b, t, (size_t)bytes);
}
static inline uint64_t lattice_txn_get_u(lattice_txn_buf *b, int bytes)
{
    if (b->failed || b->len + (size_t)bytes > b->cap) {
        b->failed = true;
        return 0;
    }
    uint64_t v = 0;
    for (int i = 0; i < bytes; i++) v |= (uint64_t)b->p[b->len + (size_t)i] << (8 * i);
    b->len += (size_t)bytes;
    return v;
}
/* A length-prefixed byte string: points into the buffer. */
static inline const void *lattice_txn_get_bytes(lattice_txn_buf *b, size_t *n)
{
    *n = (size_t)lattice_txn_get_u(b, 4);
    if (b->failed || *n > b->cap - b->len) {
        b->failed = true;
        *n = 0;
        return NULL;
    }
    const void *p = b->p + b->len;
    b->len += *n;
    return p;
}
static inline void lattice_txn_put_bytes(lattice_txn_buf *b, const void *p, size_t n)
{
    lattice_txn_put_u(b, n, 4);
    lattice_txn_put(b, p, n);
}

/* ---- request ---- */

static inline size_t lattice_txn_request_size(const lattice_txn_watch *w, size_t nw, const lattice_op *ops, size_t n)
{
    size_t s = 9;
    for (size_t i = 0; i < nw; i++) s += 4 + w[i].key_len + 17;
    for (size_t i = 0; i < n; i++) s += 1 + 4 + 4 + ops[i].key_len + 4 + ops[i].value_len + 16;
    return s;
}
/* Writes the request into out (cap bytes, lattice_txn_request_size):
 * bytes written, 0 when it does not fit.  ops[i].kind may be a TXN_* kind. */
static inline size_t lattice_txn_request_encode(const lattice_txn_watch *w, size_t nw, const lattice_op *ops, size_t n,
                                                void *out, size_t cap)
{
    lattice_txn_buf b = {(uint8_t *)out, 0, cap, false};
    lattice_txn_put_u(&b, LATTICE_TXN_FORMAT, 1);
    lattice_txn_put_u(&b, nw, 4);
    for (size_t i = 0; i < nw; i++) {
        lattice_txn_put_bytes(&b, w[i].key, w[i].key_len);
        lattice_txn_put_u(&b, w[i].mode, 1);
        lattice_txn_put_u(&b, w[i].version, 8);
        lattice_txn_put_u(&b, w[i].epoch, 8);
    }
    lattice_txn_put_u(&b, n, 4);
    for (size_t i = 0; i < n; i++) {
        lattice_txn_put_u(&b, (uint64_t)ops[i].kind, 1);
        lattice_txn_put_u(&b, ops[i].flags, 4);
        lattice_txn_put_bytes(&b, ops[i].key, ops[i].key_len);
        lattice_txn_put_bytes(&b, ops[i].value, ops[i].value_len);
        lattice_txn_put_u(&b, (uint64_t)ops[i].delta, 8);
        lattice_txn_put_u(&b, ops[i].ttl_ms, 8);
    }
    return b.failed ? 0 : b.len;
}

/* Reads a request back (its builder's view: resolved pointers): the
 * number of subs, past the watches, or -1 when malformed.  Then
 * lattice_txn_request_next once per sub: its kind, flags, key, value,
 * delta and ttl_ms into *op (pointing into the request). */
static inline long lattice_txn_request_begin(lattice_txn_buf *b, const void *req, size_t len)
{
    *b = (lattice_txn_buf){(uint8_t *)(uintptr_t)req, 0, len, false};
    if (lattice_txn_get_u(b, 1) != LATTICE_TXN_FORMAT) return -1;
    uint64_t nw = lattice_txn_get_u(b, 4);
    for (uint64_t i = 0; i < nw && !b->failed; i++) {
        size_t kl;
        lattice_txn_get_bytes(b, &kl);
        lattice_txn_get_u(b, 1);
        lattice_txn_get_u(b, 8);
        lattice_txn_get_u(b, 8);
    }
    uint64_t n = lattice_txn_get_u(b, 4);
    return b->failed || n > len ? -1 : (long)n;
}

static inline bool lattice_txn_request_next(lattice_txn_buf *b, lattice_op *op)
{
    memset(op, 0, sizeof *op);
    op->kind = (lattice_op_kind)lattice_txn_get_u(b, 1);
    op->flags = (unsigned)lattice_txn_get_u(b, 4);
    op->key = (const char *)lattice_txn_get_bytes(b, &op->key_len);
    op->value = (const char *)lattice_txn_get_bytes(b, &op->value_len);
    op->delta = (int64_t)lattice_txn_get_u(b, 8);
    op->ttl_ms = lattice_txn_get_u(b, 8);
    return !b->failed;
}

/* The keys a sub-operation names, in order: its key, then its destination
 * (RENAME, COPY, LMOVE), BPOP's other keys or SETOP's keys among its
 * arguments (the first of them is its key again).  A malformed value
 * names no more keys (the primary refuses it):
 *
 *     lattice_txn_keys it = lattice_txn_keys_of(&sub);
 *     while (lattice_txn_keys_next(&it, &k, &kl)) ...
 */
typedef struct lattice_txn_keys {
    const lattice_op *s;
    int at;        /* 0: the key next */
    size_t left;   /* BPOP: keys still to come; SETOP: arguments */
    size_t off, i; /* in the packed value; SETOP: the argument's index */
} lattice_txn_keys;

static inline lattice_txn_keys lattice_txn_keys_of(const lattice_op *s)
{
    lattice_txn_keys it = {s, 0, 0, 4, 0};
    return it;
}

static inline bool lattice_txn_keys_next(lattice_txn_keys *it, const void **k, size_t *kl)
{
    const lattice_op *s = it->s;
    int kind = (int)s->kind;
    if (it->at == 0) {
        it->at = 1;
        *k = s->key, *kl = s->key_len;
        if ((kind == LATTICE_TXN_BPOP || kind == LATTICE_TXN_SETOP) &&
            !lattice_coll_unpacked_count(s->value, s->value_len, &it->left))
            it->left = 0;
        else if (kind == LATTICE_TXN_RENAME || kind == LATTICE_TXN_COPY || kind == LATTICE_TXN_LMOVE)
            it->left = 1;
        return true;
    }
    if (kind == LATTICE_TXN_SETOP) {
        size_t first = LATTICE_TXN_SETOP_FIRST(s->delta), n = LATTICE_TXN_SETOP_KEYS(s->delta);
        bool dest = (uint64_t)s->delta & LATTICE_TXN_SETOP_DEST;
        while (it->i < it->left) {
            size_t i = it->i++;
            lattice_coll_arg a = lattice_coll_unpack_next(s->value, &it->off);
            if ((i == 0 && dest) || (i >= first && i - first < n)) {
                *k = a.ptr, *kl = a.len;
                return true;
            }
        }
        return false;
    }
    if (!it->left) return false;
    it->left--;
    if (kind == LATTICE_TXN_BPOP) {
        lattice_coll_arg a = lattice_coll_unpack_next(s->value, &it->off);
        *k = a.ptr, *kl = a.len;
    } else {
        *k = s->value, *kl = s->value_len;
    }
    return true;
}

/* A VERSION sub's answer as the watch it stands for: false when it is not
 * one (an error, or no 8-byte epoch). */
static inline bool lattice_txn_version_watch(const lattice_txn_sub_result *r, uint8_t *mode, uint64_t *version,
                                             uint64_t *epoch)
{
    if (r->status != LATTICE_OK || r->value_len != 8) return false;
    uint64_t e = 0;
    for (int i = 0; i < 8; i++) e |= (uint64_t)((const uint8_t *)r->value)[i] << (8 * i);
    *mode = (r->flags & LATTICE_OP_R_FOUND) ? LATTICE_TXN_W_VERSION : LATTICE_TXN_W_COUNTER;
    *version = (uint64_t)r->num;
    *epoch = e;
    return true;
}

/* ---- result ---- */

/* Reads the header of a result: the number of subs, or -1 when malformed.
 * Then lattice_txn_result_next once per sub. */
static inline long lattice_txn_result_begin(lattice_txn_buf *b, const void *value, size_t len)
{
    *b = (lattice_txn_buf){(uint8_t *)(uintptr_t)value, 0, len, false};
    if (lattice_txn_get_u(b, 1) != LATTICE_TXN_FORMAT) return -1;
    uint64_t n = lattice_txn_get_u(b, 4);
    return b->failed || n > len ? -1 : (long)n;
}
static inline bool lattice_txn_result_next(lattice_txn_buf *b, lattice_txn_sub_result *r)
{
    r->status = (int32_t)lattice_txn_get_u(b, 4);
    r->flags = (uint32_t)lattice_txn_get_u(b, 4);
    r->num = (int64_t)lattice_txn_get_u(b, 8);
    r->value = lattice_txn_get_bytes(b, &r->value_len);
    return !b->failed;
}

#endif
