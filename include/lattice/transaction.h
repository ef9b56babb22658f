/*
 * lattice/transaction.h: interactive transactions (prefix lattice_tx_),
 * docs/TRANSACTIONS.md.
 *
 *     lattice_tx *tx;
 *     lattice_tx_begin(node, "default", 0, "transfer", &tx);
 *     lattice_tx_get(tx, "{acct}a", 7, &v, &vl);       // value and version read
 *     lattice_tx_put(tx, "{acct}a", 7, "90", 2);       // buffered
 *     lattice_tx_put(tx, "{acct}b", 7, "110", 3);
 *     st = lattice_tx_commit(tx);                      // frees tx
 *     if (st == LATTICE_ERR_ABORTED) ... run it again
 *
 * Optimistic: reads go to the key's primary and remember the entry's
 * version; writes are buffered in the transaction and sent by the commit,
 * which the primary runs in one step - it checks that nothing read changed
 * (else nothing applies: ABORTED) and applies every write on every copy as
 * one unit.  Committed transactions are strictly serializable with each
 * other and with single-key operations; an aborted or rolled-back
 * transaction leaves nothing anyone can read.  A transaction sees its own
 * writes, and a key read twice gives the same answer (the first).  Only the
 * commit validates the reads: values read in a transaction that is rolled
 * back (or whose commit fails) are not known to be one consistent snapshot.
 *
 * Keys of any partitions.  Keys of one partition (a hash tag groups keys:
 * "{user42}name") commit in one step at its primary; keys of several
 * commit across partitions - prepared at each, decided at one, finished at
 * each (docs/TRANSACTIONS.md), a round trip or two more.  Keys that start
 * with byte 0xff are the grid's own (LATTICE_ERR_RESERVED_KEY).
 *
 * Errors: ABORTED - a key read changed (or its primary changed) before the
 * commit, or, across partitions, an older transaction held one of its keys
 * (wait-die): nothing applied, safe to retry; TIMEOUT - the transaction's
 * timeout passed before the commit was sent: it ended, nothing applied;
 * UNKNOWN - the commit was sent and its answer lost (a failover, the
 * operation's deadline): it applied once or not at all; any other error of a
 * commit - nothing applied.  A read's error leaves the transaction active.
 *
 * A lattice_tx is used by one thread at a time.  The blocking calls wait
 * for the node's data thread: never call them from an operation callback.
 */
#ifndef LATTICE_TRANSACTION_H
#define LATTICE_TRANSACTION_H

#include <stdbool.h>
#include <stddef.h>

#include "lattice/lattice.h"
#include "lattice/ops.h"

typedef struct lattice_tx lattice_tx;

/* The default timeout of a transaction (timeout_ms 0): from begin to the
 * commit being sent. */
#define LATTICE_TX_TIMEOUT_MS 10000

/* cache NULL = "default"; timeout_ms 0 = LATTICE_TX_TIMEOUT_MS; label may be
 * NULL (shown in the node's log next to an UNKNOWN outcome).  Nothing is
 * sent. */
lattice_status lattice_tx_begin(lattice_node *n, const char *cache, int timeout_ms, const char *label,
                                lattice_tx **out);

/* The value of key as the transaction sees it (*value: lt_free it);
 * NOT_FOUND when absent. */
lattice_status lattice_tx_get(lattice_tx *tx, const void *key, size_t key_len, void **value, size_t *value_len);
/* Buffered; nothing is sent before the commit. */
lattice_status lattice_tx_put(lattice_tx *tx, const void *key, size_t key_len, const void *value,
                              size_t value_len);
lattice_status lattice_tx_remove(lattice_tx *tx, const void *key, size_t key_len);
/* get then put: *old the value before (lt_free it), NOT_FOUND and no old
 * value when there was none - the put is buffered either way. */
lattice_status lattice_tx_get_and_put(lattice_tx *tx, const void *key, size_t key_len, const void *value,
                                      size_t value_len, void **old, size_t *old_len);
/* Every kv put (buffered), or none on an error. */
lattice_status lattice_tx_put_all(lattice_tx *tx, const lattice_kv *kvs, size_t count);
/* Reads every key at once; each kv's status, value (lt_free it) and
 * value_len as lattice_cache_get_all; the call's status is the first
 * failure other than NOT_FOUND. */
lattice_status lattice_tx_get_all(lattice_tx *tx, lattice_kv *kvs, size_t count);

/* Commits and frees tx: OK, ABORTED, TIMEOUT, UNKNOWN or another error
 * (above). */
lattice_status lattice_tx_commit(lattice_tx *tx);
/* Ends tx without applying anything and frees it. */
void lattice_tx_rollback(lattice_tx *tx);

/* A transaction's age: its start, the stamp wait-die compares across
 * partitions (the older one waits, a younger one gives way: ABORTED).  Run
 * again after ABORTED, a transaction that keeps its first attempt's age
 * (lattice_tx_keep_age right after begin) is older than every one begun
 * since, so it stops losing to them - with many large transactions over
 * the same keys, retries that each began younger aborted one another
 * nearly every time.  keep_age only ever makes tx older. */
uint64_t lattice_tx_age(const lattice_tx *tx);
void lattice_tx_keep_age(lattice_tx *tx, uint64_t age);

/* Asynchronous forms.  fn runs once, in the data thread's role (as a
 * lattice_op_fn, lattice/ops.h); value valid only during the call.  The
 * transaction must not be used again before fn ran. */
typedef void (*lattice_tx_get_fn)(void *arg, lattice_status status, const void *value, size_t value_len);
typedef void (*lattice_tx_done_fn)(void *arg, lattice_status status);
/* OK: fn will run (possibly before this returns, when the transaction
 * answers the read itself); an error: fn will not run. */
lattice_status lattice_tx_get_async(lattice_tx *tx, const void *key, size_t key_len, lattice_tx_get_fn fn,
                                    void *arg);
/* Frees tx before fn runs (or before an error returns). */
lattice_status lattice_tx_commit_async(lattice_tx *tx, lattice_tx_done_fn fn, void *arg);

#endif
