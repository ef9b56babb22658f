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
 * Today the commit covers keys of one Redis slot (a hash tag groups keys):
 * a read or write that would add a second slot answers UNSUPPORTED and
 * changes nothing in the transaction (docs/TRANSACTIONS.md, "Across slots").
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

#endif
