/*
 * lattice/ops.h: the asynchronous cache-operation API of a node (prefix lattice_op_).
 *
 * Any thread submits an operation (or a batch); the call copies everything
 * it needs, never blocks on the network and returns at once.  The node's
 * data thread routes each operation to its partition's primary (locally or
 * over the data channel), retries it on a topology change, and calls the
 * completion callback exactly once per operation, with the result, IN THE
 * DATA THREAD'S ROLE: on the data thread, or on another thread that holds
 * the data thread's state for a moment (run to completion: a thread in
 * lattice_op_submit_inline - the node's RESP IO threads - runs the ops it
 * submits, and what others queued before them, itself while the data
 * thread polls).  Either way callbacks never run two at once, nor beside
 * the data thread's work, and a callback may run on a thread that is not
 * the one that submitted its op.  lattice_op_submit never calls fn before
 * it returns; lattice_op_submit_inline may (below).  A callback must not
 * block, must not take a lock a submitting thread may hold, and must not
 * call the blocking wrappers of lattice.h (they wait for the data thread:
 * deadlock); it may submit further operations.
 *
 *     static void done(void *arg, size_t i, const lattice_op_result *r) {
 *         if (r->status == LATTICE_OK) use(r->value, r->value_len);
 *     }
 *     lattice_op op = lattice_op_get("default", "k", 1);
 *     lattice_op_submit(node, &op, 1, done, ctx);
 *
 * Semantics per kind (the primary executes them; one writer per partition,
 * so read-modify-write kinds are atomic):
 *   GET            value, num = its absolute expiry (ms since the epoch, 0 none);
 *                  NOT_FOUND when absent or expired.
 *   PUT            stores value.  flags: NX (only if absent, else EXISTS),
 *                  XX (only if present, else NOT_FOUND), RETURN_OLD (value =
 *                  previous value, R_FOUND when there was one), KEEP_TTL
 *                  (keep the entry's expiry).  ttl_ms > 0 expires the entry
 *                  after ttl_ms; 0 uses the cache's expiry_ms (0 = never).
 *   REMOVE         NOT_FOUND when absent; RETURN_OLD gives the value removed.
 *   INCREMENT      value must be a decimal int64 (absent = 0), adds delta,
 *                  num = result; INVAL when not an integer or on overflow.
 *   APPEND         appends value (absent = empty); num = new length.
 *   EXPIRE         ttl_ms > 0 sets the expiry, 0 removes it; NOT_FOUND absent.
 *   TTL            num = ms left, -1 no expiry; NOT_FOUND when absent.
 *   CONTAINS       num = 1/0 (status OK either way).
 *   SIZE           num = entries in the cache over every server (primaries);
 *                  key ignored.  flag LOCAL: only the entries of the
 *                  partitions this node is primary of (Redis Cluster's
 *                  DBSIZE), answered without asking other servers.
 *   SETRANGE       writes value at byte offset delta (>= 0), padding with
 *                  zero bytes (absent = empty); num = new length.  An empty
 *                  value changes nothing (num = current length, 0 absent).
 *                  TOO_LARGE when offset + length > max_value_bytes.
 *   SETBIT         sets bit delta (>= 0; bit 0 = the first byte's high bit)
 *                  to value ("0" or "1", one byte), growing the value with
 *                  zero bytes (absent = empty); num = the bit's old value.
 *                  TOO_LARGE when the bit's byte lies past max_value_bytes.
 *   INCRBYFLOAT    value = the increment as text; adds it to the entry's
 *                  number (absent = 0) in long double, stores it as Redis
 *                  formats it; value = the new text.  INVAL with num 0 when
 *                  either is no valid float, num 1 when the sum is NaN or
 *                  infinite.  SETRANGE, SETBIT and INCRBYFLOAT keep the TTL.
 *   WALK           partition-addressed (the key is unused): the keys of the
 *                  live entries of `partition` whose position is >= ttl_ms,
 *                  in position order, about delta of them (capped at
 *                  LATTICE_OP_WALK_MAX, and at ~1 MiB of keys).  A key's
 *                  position is a 32-bit hash of the whole key (at most
 *                  LATTICE_OP_WALK_POS_MAX): the same on every node, so a walk goes on
 *                  where it stopped after the partition moved.  Keys of one
 *                  position are never split between two answers.  value =
 *                  lattice_op_walk_* encoding; num = the position to go on
 *                  from, or -1 when no key is left above the last one.
 *                  flag LOCAL: NOT_OWNER at once unless this node is the
 *                  partition's primary (nothing is sent).
 *   CLEAR          partition-addressed: removes up to LATTICE_OP_CLEAR_MAX
 *                  entries of `partition` at its primary whose version is
 *                  at most ttl_ms (0: the partition's update counter now),
 *                  each removal replicated to every other copy with the
 *                  partition's next counter; answered once every copy
 *                  applied them (whatever the cache's sync mode).  num =
 *                  the bound used (pass it as ttl_ms to the next round, so
 *                  what was written since stays); flag R_MORE when the
 *                  partition may hold more; value = WALK's header (the
 *                  partition count, no keys).
 *   TXN            value = sub-operations (and watches) on keys of one
 *                  partition, run by its primary in one step and
 *                  replicated as one unit; value of the result = every
 *                  sub-operation's result (lattice/txn.h).
 *   COLL_READ,     a command of a collection type (hashes: HSET, HGET ...) on
 *   COLL_WRITE     the key's value, executed by its primary: delta = the
 *                  command, value = its arguments after the key, packed;
 *                  value of the result = the command's reply (lattice/coll.h).
 *                  A write keeps the key's expiry; one that empties the value
 *                  removes the key.  WRONGTYPE on a value of another type.
 * Errors common to all: NO_CACHE, INVAL (empty key, bad kind), TOO_LARGE
 * (key/value above the cache's max_key_bytes/max_value_bytes), REGION_FULL,
 * PARTITION_LOST (no live copy of the key's partition; num = that partition,
 * which stays refused - never "absent" - until a copy comes back or
 * `lattice cache reset-lost` gives it up), TIMEOUT (no primary answered within the
 * node's op_timeout_ms, retries included), STOPPED (node stopping).
 *
 * Acknowledgement (the callback) of writes follows the cache's sync mode:
 * full_sync after the primary and every live backup applied, primary_sync
 * after the primary applied, full_async as soon as the request left this
 * node (its outcome is never reported: status OK) - except TXN, answered
 * by the primary on every sync mode (its result is the sub-results).
 */
#ifndef LATTICE_OPS_H
#define LATTICE_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "lattice/lattice.h"

typedef enum lattice_op_kind {
    LATTICE_OP_GET = 1,
    LATTICE_OP_PUT = 2,
    LATTICE_OP_REMOVE = 3,
    LATTICE_OP_INCREMENT = 4,
    LATTICE_OP_APPEND = 5,
    LATTICE_OP_EXPIRE = 6,
    LATTICE_OP_TTL = 7,
    LATTICE_OP_CONTAINS = 8,
    LATTICE_OP_SIZE = 9,
    LATTICE_OP_SETRANGE = 10,
    LATTICE_OP_SETBIT = 11,
    LATTICE_OP_INCRBYFLOAT = 12,
    LATTICE_OP_WALK = 13,
    LATTICE_OP_CLEAR = 14,
    LATTICE_OP_TXN = 15,        /* sub-operations of one partition in one step: lattice/txn.h */
    LATTICE_OP_COLL_READ = 16,  /* a read of a collection value (hash ...): lattice/coll.h */
    LATTICE_OP_COLL_WRITE = 17, /* a write of one: lattice/coll.h */
    LATTICE_OP_KIND_MAX_ = 17,
} lattice_op_kind;

/* Request flags. */
#define LATTICE_OP_NX 0x1u          /* PUT only if absent (put_if_absent, SET NX) */
#define LATTICE_OP_XX 0x2u          /* PUT only if present (replace, SET XX) */
#define LATTICE_OP_RETURN_OLD 0x4u  /* PUT/REMOVE: return the previous value */
#define LATTICE_OP_KEEP_TTL 0x8u    /* PUT: keep the entry's expiry */
#define LATTICE_OP_LOCAL 0x10u      /* SIZE, WALK: this node's primary entries only */
#define LATTICE_OP_ACROSS 0x20u     /* TXN: its keys may lie in several partitions (lattice/txn.h) */
#define LATTICE_OP_ANY_TYPE 0x40u   /* GET: a value of any type as it is stored (its type in R_TYPE), not WRONGTYPE */
/* TXN of a blocking sub (lattice/txn.h, LATTICE_TXN_BLOCK): the issuer
 * waits for it until its ttl_ms (a wall-clock deadline; 0: for ever) and
 * the usual op timeout after that, not the op timeout alone. */
#define LATTICE_OP_BLOCKING 0x80u
#define LATTICE_OP_FLAGS_ALL_ 0xffu

/* Result flags. */
#define LATTICE_OP_R_FOUND 0x1u     /* the key held a live entry before the op */
#define LATTICE_OP_R_MORE 0x2u      /* CLEAR: the partition may hold more entries */
/* GET, CONTAINS, TTL of a live entry (and a WRONGTYPE answer): the entry's
 * value type in bits 8..11, numbered as types/types.h's lattice_value_type
 * (0 string, 1 hash, 2 list, 3 set, 4 zset) - 0, so nothing set, for a
 * string.  Every kind of this header reads and writes strings: one that
 * meets a value of another type answers LATTICE_ERR_WRONGTYPE (R_FOUND and
 * the type set) and changes nothing - except PUT without RETURN_OLD
 * (replaces it with a string, as SET), REMOVE without RETURN_OLD, EXPIRE
 * and TTL, which take any type. */
#define LATTICE_OP_R_TYPE_SHIFT 8
#define LATTICE_OP_R_TYPE_MASK 0xf00u
#define LATTICE_OP_R_TYPE(flags) (((flags) & LATTICE_OP_R_TYPE_MASK) >> LATTICE_OP_R_TYPE_SHIFT)
#define LATTICE_OP_R_TYPE_FLAGS(type) (((unsigned)(type) << LATTICE_OP_R_TYPE_SHIFT) & LATTICE_OP_R_TYPE_MASK)

#define LATTICE_OP_WALK_MAX 4096u   /* keys of one WALK answer at most */
#define LATTICE_OP_CLEAR_MAX 1024u  /* entries one CLEAR removes at most */
#define LATTICE_OP_WALK_POS_MAX ((1ull << 32) - 1)

typedef struct lattice_op {
    lattice_op_kind kind;
    unsigned flags;
    const char *cache;      /* NULL = "default" */
    const void *key;
    size_t key_len;
    const void *value;      /* PUT, APPEND, SETRANGE, SETBIT, INCRBYFLOAT */
    size_t value_len;
    int64_t delta;          /* INCREMENT; SETRANGE, SETBIT: the offset */
    uint64_t ttl_ms;        /* PUT, EXPIRE; WALK: the position to start at */
    uint32_t partition;     /* WALK, CLEAR: the partition (they have no key) */
} lattice_op;

/* A NO_QUORUM result carries in num how many baseline servers the refusing
 * node reached and the baseline's size ("no quorum: 1 of 3 baseline nodes
 * reachable"). */
#define LATTICE_OPS_QUORUM_NUM(reachable, baseline) ((int64_t)(reachable) << 16 | (int64_t)((baseline) & 0xffff))
#define LATTICE_OPS_QUORUM_REACHABLE(num) ((size_t)((num) >> 16))
#define LATTICE_OPS_QUORUM_BASELINE(num) ((size_t)((num) & 0xffff))

typedef struct lattice_op_result {
    lattice_status status;
    const void *value;      /* valid only during the callback */
    size_t value_len;
    int64_t num;
    unsigned flags;         /* LATTICE_OP_R_* */
} lattice_op_result;

/* i = index of the op within its submit call. */
typedef void (*lattice_op_fn)(void *arg, size_t i, const lattice_op_result *r);

/* Submits ops[0..n).  Returns LATTICE_OK and then calls fn once for every
 * op (in any order), or returns an error (INVAL: n == 0 or NULL arguments,
 * NOMEM, STOPPED) and calls fn never.  Bad individual ops (unknown kind,
 * empty key) are reported through fn.  Ops bound for the same node are sent
 * in one message. */
lattice_status lattice_op_submit(lattice_node *node, const lattice_op *ops, size_t n,
                                 lattice_op_fn fn, void *arg);
/* As lattice_op_submit, but a read (GET, TTL, CONTAINS without flags) this
 * node can answer from its own store right now - its serving primary's copy
 * with no write of the partition in flight, or a clean backup copy with
 * read_from_backup - completes on the calling thread before this returns,
 * with the same consistency (docs/CONSISTENCY.md, "Reads on the calling
 * thread"); the others go on as with lattice_op_submit.  So fn may run
 * before this returns: it must not take a lock the caller holds.  The
 * calling thread must have called lattice_op_thread_enter. */
lattice_status lattice_op_submit_inline(lattice_node *node, const lattice_op *ops, size_t n,
                                        lattice_op_fn fn, void *arg);
/* A thread that calls lattice_op_submit_inline enters once before and exits
 * before it ends (it becomes a reader of the stores' RCU structures). */
void lattice_op_thread_enter(void);
void lattice_op_thread_exit(void);

/* WALK's answer: u32 partitions of the cache, u32 n, then n times (u32
 * length word, key bytes); little-endian.  The length word is the key's
 * length (at most 65535) in bits 0..23 and the entry's value type
 * (LATTICE_OP_R_TYPE's numbers) in bits 24..31: 0 for a string, so a
 * string's key is what it was before types.  lattice_op_walk_next_typed
 * reads the key at *off (start at LATTICE_OP_WALK_HDR): 1, the key and its
 * type, 0 at the end or on a malformed value; lattice_op_walk_next the
 * same without the type. */
#define LATTICE_OP_WALK_HDR 8u
#define LATTICE_OP_WALK_LEN(word) ((word) & 0xffffffu)
#define LATTICE_OP_WALK_TYPE(word) ((word) >> 24)
static inline uint32_t lattice_op_walk_u32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline int lattice_op_walk_next_typed(const void *value, size_t len, size_t *off, const char **key,
                                             size_t *key_len, unsigned *type)
{
    const unsigned char *v = (const unsigned char *)value;
    if (*off + 4 > len) return 0;
    uint32_t w = lattice_op_walk_u32(v + *off), n = LATTICE_OP_WALK_LEN(w);
    if (n > len - *off - 4) return 0;
    *key = (const char *)v + *off + 4;
    *key_len = n;
    *type = LATTICE_OP_WALK_TYPE(w);
    *off += 4 + (size_t)n;
    return 1;
}
static inline int lattice_op_walk_next(const void *value, size_t len, size_t *off, const char **key,
                                       size_t *key_len)
{
    unsigned type;
    return lattice_op_walk_next_typed(value, len, off, key, key_len, &type);
}

/* Builders (plain values; no copies until submit). */
static inline lattice_op lattice_op_get(const char *cache, const void *key, size_t key_len)
{
    lattice_op o = {LATTICE_OP_GET, 0, cache, key, key_len, NULL, 0, 0, 0, 0};
    return o;
}
static inline lattice_op lattice_op_put(const char *cache, const void *key, size_t key_len,
                                        const void *value, size_t value_len)
{
    lattice_op o = {LATTICE_OP_PUT, 0, cache, key, key_len, value, value_len, 0, 0, 0};
    return o;
}
static inline lattice_op lattice_op_remove(const char *cache, const void *key, size_t key_len)
{
    lattice_op o = {LATTICE_OP_REMOVE, 0, cache, key, key_len, NULL, 0, 0, 0, 0};
    return o;
}

#endif
