/*
 * Internal to liblattice: what node/txexec.c (a LATTICE_OP_TXN across
 * partitions) takes of tx.c's interactive transaction beyond
 * lattice/transaction.h.
 */
#ifndef LATTICE_NODE_TX_H
#define LATTICE_NODE_TX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lattice/ops.h"
#include "lattice/transaction.h"
#include "txn/txn.h"

/* One answer of a read: the key's index in the caller's list. */
typedef void (*node_tx_each_fn)(void *arg, size_t i, lattice_status st, const void *value, size_t value_len);
/* Reads keys[0..n) (any slots; one op per slot, sent in one submit): fn
 * once per key, on the data thread.  OK, or an error and fn never. */
lattice_status node_tx_read_all(lattice_tx *tx, const lt_txc_key *keys, size_t n, node_tx_each_fn fn, void *arg);
/* The transaction's coordinator state (its reads, its buffered writes). */
lt_txc *node_tx_coord(lattice_tx *tx);
/* The commit of a transaction whose keys lie in more than one of the
 * cache's `partitions` (known to the caller: no grid call, so the data
 * thread may call it).  Takes tx; INVAL (and tx freed) when its keys lie
 * in one partition. */
lattice_status node_tx_commit_in(lattice_tx *tx, uint32_t partitions, lattice_tx_done_fn fn, void *arg);

/* txexec.c: true when ops[0..n) hold a LATTICE_OP_TXN with
 * LATTICE_OP_ACROSS; node_txexec_submit then runs those as transactions
 * across partitions and the rest as lattice_op_submit would. */
bool node_txexec_wants(const lattice_op *ops, size_t n);
lattice_status node_txexec_submit(lattice_node *node, const lattice_op *ops, size_t n, lattice_op_fn fn, void *arg,
                                  bool inline_reads);

#endif
