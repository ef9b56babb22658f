/*
 * Histories of list-append transactions and their checker, after Elle
 * (Kingsbury & Alvaro, "Elle: Inferring Isolation Anomalies from
 * Experimental Observations", VLDB 2020).
 *
 * Every key holds a list that starts empty.  A transaction is a sequence of
 * micro-operations:
 *   TX_APPEND key value   appends value (unique among all appends to key)
 *   TX_READ   key         reads the whole list (recorded when the txn is ok)
 * and ends ok (committed, its reads known), failed (definitely no effect) or
 * unknown (no answer: it may have committed at any time after its invoke, or
 * never).  Because appended values are unique, the longest read of a key
 * gives the key's version order, every other read must be a prefix of it,
 * and each read names the transaction that wrote what it saw.  From that
 * the checker infers the dependency graph:
 *   ww  T1 appended x, T2 appended the element right after x
 *   wr  T1 appended x, T2 read a list ending in x
 *   rw  T1 read a list, T2 appended the element right after its end
 *   rt  T1 completed before T2 was invoked (real time)
 * and reports, with a witness each:
 *   G0       a cycle of ww edges (dirty write)
 *   G1a      a read of a failed transaction's append (aborted read)
 *   G1b      a read ending in a value its writer later overwrote in the same
 *            transaction (intermediate read)
 *   G1c      a cycle of ww and wr edges
 *   G-single a cycle with exactly one rw edge (read skew)
 *   G2       a cycle with several rw edges (write skew and the like)
 *   ...-realtime: the same cycles once rt edges are added - serializable but
 *            not strictly serializable (a stale read, say)
 *   lost-append  an acknowledged append nobody ever read, missing from a
 *            read that began after it completed
 *   incompatible-order  two reads of a key neither of which is a prefix of
 *            the other
 *   duplicate / garbage  a read holding a value twice, or a value nobody
 *            appended
 *   internal a transaction that does not see its own earlier appends and reads
 * Strict serializability admits none of them.
 */
#ifndef LATTICE_FAULT_TXN_H
#define LATTICE_FAULT_TXN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "history.h" /* fh_outcome, FH_INF */

typedef enum { TX_APPEND, TX_READ } tx_kind;

typedef struct tx_mop {
    tx_kind kind;
    uint32_t key;
    int64_t value;  /* TX_APPEND: the value appended */
    size_t list0;   /* TX_READ: the list read, elems[list0 .. list0 + n) */
    size_t n;
    bool known;     /* TX_READ: the list is known (ok transactions) */
} tx_mop;

typedef struct tx_op {
    int64_t invoke, complete; /* monotonic ns; complete FH_INF when unknown */
    int client, node;
    fh_outcome outcome;
    size_t mop0, nmops; /* mops[mop0 .. mop0 + nmops) */
} tx_op;

typedef struct tx_history {
    tx_op *ops;
    size_t n, cap;
    tx_mop *mops;
    size_t nmops, mops_cap;
    int64_t *elems;
    size_t nelems, elems_cap;
} tx_history;

void tx_init(tx_history *h);
void tx_free(tx_history *h);

/* Building a transaction: tx_begin, its micro-operations in order, tx_end.
 * (Aborts when out of memory: a test tool.) */
void tx_begin(tx_history *h, int client, int node, int64_t invoke);
void tx_append(tx_history *h, uint32_t key, int64_t value);
/* A read whose list is not known (the transaction failed or is unknown). */
void tx_read_unknown(tx_history *h, uint32_t key);
void tx_read(tx_history *h, uint32_t key, const int64_t *list, size_t n);
void tx_end(tx_history *h, fh_outcome outcome, int64_t complete);
/* Appends every transaction of src to dst. */
void tx_append_all(tx_history *dst, const tx_history *src);

/* Text form, one transaction a line ("# ..." lines are comments):
 *   CLIENT NODE INVOKE COMPLETE OUTCOME MOP[;MOP...]
 * MOP "a KEY VALUE", "r KEY V1,V2,..." ("r KEY -" the empty list, "r KEY ?"
 * unknown); COMPLETE "-" when unknown; OUTCOME ok|fail|unknown. */
bool tx_save(const tx_history *h, const char *path, const char *comment);
/* false (and a message on stderr naming the line) when malformed. */
bool tx_load(tx_history *h, const char *path);

typedef enum {
    TXA_G0,
    TXA_G1A,
    TXA_G1B,
    TXA_G1C,
    TXA_G_SINGLE,
    TXA_G2,
    TXA_G0_RT,
    TXA_G1C_RT,
    TXA_G_SINGLE_RT,
    TXA_G2_RT,
    TXA_LOST,
    TXA_INCOMPATIBLE,
    TXA_DUPLICATE,
    TXA_GARBAGE,
    TXA_INTERNAL,
    TXA_KINDS_
} tx_anomaly;

const char *tx_anomaly_name(tx_anomaly a);

typedef struct tx_report {
    size_t ok, failed, unknown; /* transactions */
    size_t keys;                /* distinct keys */
    size_t edges;               /* dependency edges inferred (ww, wr, rw) */
    size_t found[TXA_KINDS_];   /* instances of each anomaly */
    size_t unclassified;        /* cycles past the first 100 components */
    size_t anomalies;           /* their sum */
} tx_report;

/* Checks h; describes the first witness of each anomaly kind on out (may be
 * NULL).  True when there is none. */
bool tx_check(const tx_history *h, FILE *out, tx_report *r);

#endif
