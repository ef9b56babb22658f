/*
 * txn: the coordinator's side of an interactive transaction (prefix lt_txc_),
 * pure - no network, no threads.  The node's C API (node/tx.c,
 * lattice/transaction.h) runs exactly this: it asks for the op to send, sends
 * it with lattice_op_submit, and hands the answer back here.
 * docs/TRANSACTIONS.md states the protocol and the promise.
 *
 * Optimistic: a read asks the key's primary for the value and its version in
 * one step (a LATTICE_OP_TXN of [VERSION, GET]) and remembers both; a write is
 * only buffered.  The commit is one LATTICE_OP_TXN at the primary that
 * carries every read as a watch (its version and the primary's epoch) and
 * every buffered write: the primary checks the watches and applies the
 * writes in one step, or applies nothing (ABORTED).  The transaction takes
 * effect at that step, so committed transactions are strictly serializable
 * with each other and with single-key operations.
 *
 * A new transaction takes keys of one Redis slot (a read or write that would
 * add a second slot answers UNSUPPORTED) until lt_txc_across lifts that:
 * then a commit whose keys lie in several partitions is an lt_txx (below;
 * docs/TRANSACTIONS.md, "Across partitions").
 *
 * One transaction is used by one thread at a time.
 */
#ifndef LATTICE_TXN_TXN_H
#define LATTICE_TXN_TXN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lattice/ops.h"
#include "lattice/status.h"

typedef struct lt_txc lt_txc;

typedef enum lt_txc_state {
    LT_TXC_ACTIVE = 0,     /* reads and writes accepted */
    LT_TXC_COMMITTING = 1, /* the commit op is out */
    LT_TXC_ENDED = 2,      /* committed, aborted, rolled back or failed: only free */
} lt_txc_state;

/* cache NULL = "default"; deadline_ms on lt_mono_ms's clock (0 = none);
 * label may be NULL (shown in logs). */
lattice_status lt_txc_new(const char *cache, uint64_t deadline_ms, const char *label, lt_txc **out);
void lt_txc_free(lt_txc *t);

const char *lt_txc_cache(const lt_txc *t);
const char *lt_txc_label(const lt_txc *t);
lt_txc_state lt_txc_state_of(const lt_txc *t);
/* Keys read (watched) and keys written so far. */
size_t lt_txc_reads(const lt_txc *t);
size_t lt_txc_writes(const lt_txc *t);

/* TIMEOUT (and the transaction ends) once now_ms passed the deadline;
 * STOPPED when it ended; else OK. */
lattice_status lt_txc_check(lt_txc *t, uint64_t now_ms);

/* A read the transaction can answer itself: its own write of the key, or
 * its earlier read (repeatable).  1: answered (*found, value valid until the
 * next call that changes t); 0: ask the grid (lt_txc_read_op). */
int lt_txc_local_get(const lt_txc *t, const void *key, size_t key_len, bool *found, const void **value,
                     size_t *value_len);

typedef struct lt_txc_key {
    const void *key;
    size_t len;
} lt_txc_key;

/* OK when keys[0..n) can all join the transaction: every new one of them
 * of the slot of its keys (or, for a transaction without keys yet, of one
 * slot); UNSUPPORTED otherwise, TOO_LARGE for a key too long. */
lattice_status lt_txc_can_join(const lt_txc *t, const lt_txc_key *keys, size_t n);

/* The op that reads keys[0..n) (n >= 1, all of one slot) at their primary
 * in one step: each key's version and value.  op's pointers stay valid
 * until the next call on t (op.key is keys[0].key).  UNSUPPORTED: a key is
 * of another slot than the others or the transaction's; TOO_LARGE. */
lattice_status lt_txc_read_op(lt_txc *t, const lt_txc_key *keys, size_t n, lattice_op *op);
/* The answer to that op.  OK: each[i] is OK (lt_txc_local_get has the key
 * now) or the key's own error (NOT_FOUND: absent, and remembered so).  Else
 * the op's error (each[] untouched; the transaction stays active, the read
 * may be tried again). */
lattice_status lt_txc_read_done(lt_txc *t, const lt_txc_key *keys, size_t n, const lattice_op_result *r,
                                lattice_status *each);

/* Buffers a put (remove = false) or a remove of key; the later of two
 * writes of a key wins.  UNSUPPORTED as lt_txc_read_op. */
lattice_status lt_txc_write(lt_txc *t, const void *key, size_t key_len, const void *value, size_t value_len,
                            bool remove);

/* lt_txc_write of a value of `type` (a lattice_value_type; 0 a string)
 * expiring at expire_ms (ms since the epoch, 0 never) - kept by a commit
 * across partitions; a commit in one step writes a string without expiry. */
lattice_status lt_txc_write_as(lt_txc *t, const void *key, size_t key_len, const void *value, size_t value_len,
                               bool remove, uint64_t expire_ms, uint8_t type);

/* What the transaction read of key: false when it did not read it. */
typedef struct lt_txc_read {
    bool live;
    const void *value; /* valid until the next call that changes t */
    size_t value_len;
    uint64_t expire_ms;
    uint8_t type;
    uint8_t mode;      /* its watch: LATTICE_TXN_W_VERSION (live) or W_COUNTER */
    uint64_t version, epoch;
} lt_txc_read;
bool lt_txc_read_of(const lt_txc *t, const void *key, size_t key_len, lt_txc_read *out);

/* The commit op (valid until the next call on t), the state becomes
 * COMMITTING.  *none = true: nothing was read or written - committed
 * already, no op to send (the state is ENDED). */
lattice_status lt_txc_commit_op(lt_txc *t, lattice_op *op, bool *none);
/* Its answer: OK committed, ABORTED (a read key changed, or the primary's
 * epoch did: nothing applied, safe to retry), UNKNOWN (the grid applied the
 * commit once but its answer was lost in a failover: the outcome cannot be
 * told), or the op's error (nothing applied: the ops path answers an error
 * only for an op it did not run).  The state becomes ENDED. */
lattice_status lt_txc_commit_done(lt_txc *t, const lattice_op_result *r);

/* Ends an active transaction without a commit (nothing was sent). */
void lt_txc_rollback(lt_txc *t);

/* ---- the commit across partitions (docs/TRANSACTIONS.md) ----
 * When a transaction's keys lie in several partitions of the cache
 * (lt_txc_partitions > 1) its commit is an lt_txx: a PREPARE at each
 * participant (lt_txx_prepare_op / lt_txx_prepared), a DECIDE at the home
 * partition (commit only when every participant prepared; abort
 * otherwise - the decision that stands is the outcome), a FINISH at each
 * participant (again until answered).  The ids come from the caller: id
 * unique in the grid, stamp its start (wait-die's age), the deadline on
 * the wall clock (participants compare it with theirs).  Ops stay valid
 * until the next call on x or its transaction. */
typedef struct lt_txx lt_txx;
size_t lt_txc_partitions(const lt_txc *t, uint32_t partitions);
/* Lifts the one-slot rule: keys of any slot may join t (a read op still
 * reads keys of one slot). */
void lt_txc_across(lt_txc *t);
/* Reads take a value of any type as stored (its type kept with the read,
 * lt_txc_read_of) instead of WRONGTYPE for a non-string: what a
 * coordinator that runs the primaries' value semantics itself needs. */
void lt_txc_any_type(lt_txc *t);
/* True when every key of t shares one slot (none: true). */
bool lt_txc_one_slot(const lt_txc *t);

/* ================================================================
 * The participant's side of a transaction across partitions (prefix
 * lt_txp_), pure - no network, no threads.  docs/TRANSACTIONS.md ("Across
 * partitions") states the protocol; this is the state it rests on:
 *
 *  - internal keys: a prepared transaction and a decision are rows of a
 *    partition, under keys users cannot write (a reserved first byte) whose
 *    hash tag is chosen so they hash to that partition.  Being rows, they
 *    are replicated, logged and rebalanced with the partition.
 *  - the prepared record: the value of a prepared row - the transaction's
 *    id and start stamp, its home partition, its deadline, the keys it read
 *    and the writes it will apply.
 *  - the lock table: per partition, derived from the prepared rows a copy
 *    holds (added as a row is applied, released as it goes), so a new
 *    primary holds its predecessor's locks.  Wait-die decides a conflict.
 * ================================================================ */

/* ---- transaction ids ---- */

/* Who coordinates (a hash of its node id and incarnation) and its own
 * sequence number: unique in the grid, never 0. */
typedef struct lt_txid {
    uint64_t node, seq;
} lt_txid;

static inline bool lt_txid_eq(lt_txid a, lt_txid b) { return a.node == b.node && a.seq == b.seq; }
static inline bool lt_txid_none(lt_txid a) { return !a.node && !a.seq; }

/* ---- internal keys ---- */

/* The first byte of every internal key; a user key that starts with it is
 * refused (lt_txp_key_reserved). */
#define LT_TXP_KEY_BYTE 0xffu
#define LT_TXP_KEY_MAX 64u

typedef enum lt_txp_kind {
    LT_TXP_PREPARED = 'p', /* a participant's prepared record */
    LT_TXP_DECISION = 'd', /* the home partition's outcome */
} lt_txp_kind;

/* The first bytes every internal key of `kind` starts with (out: at least
 * 4 bytes); their count. */
size_t lt_txp_key_prefix(lt_txp_kind kind, uint8_t *out);

/* True when a user may not write key: it starts with the reserved byte. */
bool lt_txp_key_reserved(const void *key, size_t len);

/* Writes the internal key of (kind, id) in partition p of a cache of
 * `partitions` partitions into out (LT_TXP_KEY_MAX bytes); its length.
 * lattice_partition_of_key(out, len, partitions) == p. */
size_t lt_txp_key(uint32_t partitions, uint32_t p, lt_txp_kind kind, lt_txid id, uint8_t *out);

/* 1 and *kind, *id when key is an internal key; 0 otherwise. */
int lt_txp_key_parse(const void *key, size_t len, lt_txp_kind *kind, lt_txid *id);

/* ---- the prepared record ---- */

typedef struct lt_txp_write {
    const void *key, *value;
    size_t key_len, value_len;
    bool remove;
    uint8_t type;       /* the value's type tag (0: a string) */
    uint64_t expire_ms; /* absolute, 0 = none */
} lt_txp_write;

typedef struct lt_txp_key_ref {
    const void *key;
    size_t len;
} lt_txp_key_ref;

typedef struct lt_txp_rec {
    lt_txid id;
    uint64_t stamp;       /* the transaction's start: wait-die's age (lower is older) */
    uint32_t home;        /* the partition holding the decision */
    uint64_t deadline_ms; /* wall clock: past it, a primary settles the row */
    size_t n_reads, n_writes;
    lt_txp_key_ref *reads;
    lt_txp_write *writes;
} lt_txp_rec;

/* Encodes r into a malloc'd buffer (*out, *len).  NOMEM. */
lattice_status lt_txp_rec_encode(const lt_txp_rec *r, uint8_t **out, size_t *len);
/* Decodes buf into r; r's arrays are malloc'd (lt_txp_rec_free) and point
 * into buf, which must outlive r.  INVAL for a malformed record. */
lattice_status lt_txp_rec_decode(const void *buf, size_t len, lt_txp_rec *r);
void lt_txp_rec_free(lt_txp_rec *r);

/* ---- the decision ---- */

typedef enum lt_txp_outcome {
    LT_TXP_UNDECIDED = 0,
    LT_TXP_COMMIT = 1,
    LT_TXP_ABORT = 2,
} lt_txp_outcome;

/* ---- the lock table of one partition ---- */

typedef struct lt_txp_locks lt_txp_locks;

lt_txp_locks *lt_txp_locks_new(void);
void lt_txp_locks_free(lt_txp_locks *t);

/* The record's locks: a write lock on every key it writes, a read lock on
 * every key it reads (and does not write).  A record already held (same
 * id) is not added twice.  NOMEM leaves the table as it was. */
lattice_status lt_txp_locks_add(lt_txp_locks *t, const lt_txp_rec *r);
/* Releases every lock of id; false when it held none. */
bool lt_txp_locks_release(lt_txp_locks *t, lt_txid id);
/* Transactions holding locks. */
size_t lt_txp_locks_count(const lt_txp_locks *t);

/* What holds key against an access: for a read (write = false) only a
 * write lock does, for a write any lock does.  Returns how many holders
 * (0: free) and the oldest of them in *oldest (id and stamp). */
size_t lt_txp_locks_holders(const lt_txp_locks *t, const void *key, size_t len, bool write, lt_txid *oldest,
                            uint64_t *oldest_stamp);

typedef enum lt_txp_verdict {
    LT_TXP_GRANT = 0, /* no other transaction holds any of its keys */
    LT_TXP_WAIT = 1,  /* held by younger ones only: wait for them (bounded by the deadline) */
    LT_TXP_DIE = 2,   /* held by an older one: abort, safe to retry */
} lt_txp_verdict;

/* Wait-die for a transaction (id, stamp) that wants r's locks: DIE when
 * any key it needs is held by an older transaction, WAIT when held only by
 * younger ones, GRANT when free (its own locks do not count). */
lt_txp_verdict lt_txp_locks_verdict(const lt_txp_locks *t, const lt_txp_rec *r);

/* The coordinator's commit across partitions (above): t becomes
 * COMMITTING and x borrows its keys (free x before t). */
lattice_status lt_txx_new(lt_txc *t, uint32_t partitions, lt_txid id, uint64_t stamp, uint64_t deadline_wall_ms,
                          lt_txx **out);
void lt_txx_free(lt_txx *x);
size_t lt_txx_parts(const lt_txx *x);
uint32_t lt_txx_home(const lt_txx *x);
uint32_t lt_txx_part(const lt_txx *x, size_t i);
lattice_status lt_txx_prepare_op(lt_txx *x, size_t i, lattice_op *op);
/* OK prepared; ABORTED (a read changed, or an older transaction holds a
 * key: safe to retry); UNKNOWN (the answer was lost: maybe prepared); or
 * the refusal as it stood. */
lattice_status lt_txx_prepared(lt_txx *x, size_t i, const lattice_op_result *r);
bool lt_txx_all_prepared(const lt_txx *x);
lattice_status lt_txx_decide_op(lt_txx *x, bool commit, lattice_op *op);
/* OK and *commit = the decision that stands; else ask again. */
lattice_status lt_txx_decided(lt_txx *x, const lattice_op_result *r, bool *commit);
/* Once every FINISH was answered: the op that removes the decision (no
 * participant will ask for it again; its answer can be ignored - a
 * decision left behind expires). */
lattice_status lt_txx_forget_op(lt_txx *x, lattice_op *op);
lattice_status lt_txx_finish_op(lt_txx *x, size_t i, bool commit, lattice_op *op);
/* OK finished (now or before); else ask again. */
lattice_status lt_txx_finished(lt_txx *x, size_t i, const lattice_op_result *r);

/* Calls fn for every held transaction (for the deadline sweep). */
typedef struct lt_txp_held {
    lt_txid id;
    uint64_t stamp, deadline_ms;
    uint32_t home;
} lt_txp_held;
void lt_txp_locks_each(const lt_txp_locks *t, void (*fn)(void *arg, const lt_txp_held *h), void *arg);


#endif
