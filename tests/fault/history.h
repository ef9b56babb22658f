/*
 * Histories of single-key operations and their checker (the fault suite's
 * verdict).
 *
 * An operation was invoked at `invoke` and completed at `complete` (monotonic
 * nanoseconds, the client's clock) by one client on one key:
 *   FH_WRITE  SET key value           value: the value written
 *   FH_READ   GET key                 value: the value read, FH_NIL if absent
 *   FH_INCR   INCR key                value: the new value when ok
 * Outcome:
 *   FH_OK       acknowledged (a read: returned `value`)
 *   FH_FAIL     definitely not applied (the checker drops it)
 *   FH_UNKNOWN  no answer or an error after which it may have happened: it
 *               may take effect at any moment after its invoke, or never.
 *
 * Register keys (written by FH_WRITE) must be linearizable as registers that
 * start absent: fh_check_registers() partitions the history by key and runs
 * Wing & Gong's search with Lowe's memoization of (linearized set, state), as
 * Knossos and Porcupine do. Every write must carry a value no other write of
 * that key carries (the driver makes them unique), which is what lets an
 * unknown write nobody read be dropped without losing a verdict.
 *
 * Counter keys (touched by FH_INCR; reads of them are allowed) must lose no
 * acknowledged increment and double none: fh_check_counters().
 */
#ifndef LATTICE_FAULT_HISTORY_H
#define LATTICE_FAULT_HISTORY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define FH_NIL INT64_MIN
#define FH_INF INT64_MAX
#define FH_KEY_MAX 48

typedef enum { FH_WRITE, FH_READ, FH_INCR } fh_kind;
typedef enum { FH_OK, FH_FAIL, FH_UNKNOWN } fh_outcome;

typedef struct fh_op {
    int64_t invoke, complete; /* complete is ignored for FH_UNKNOWN */
    int64_t value;
    int client;
    int node; /* the node the client sent it to (for diagnosis only) */
    fh_kind kind;
    fh_outcome outcome;
    char key[FH_KEY_MAX];
} fh_op;

typedef struct fh_history {
    fh_op *ops;
    size_t n, cap;
} fh_history;

void fh_init(fh_history *h);
void fh_free(fh_history *h);
/* Appends a copy of op (aborts when out of memory: a test tool). */
void fh_add(fh_history *h, const fh_op *op);
void fh_append_all(fh_history *dst, const fh_history *src);

/* Text form, one operation a line ("# ..." lines are comments):
 *   CLIENT NODE KIND KEY VALUE INVOKE COMPLETE OUTCOME
 * NODE the node index the client talked to, KIND w|r|i, VALUE a decimal integer or "nil", INVOKE/COMPLETE ns or "-",
 * OUTCOME ok|fail|unknown. */
bool fh_save(const fh_history *h, const char *path, const char *comment);
/* false (and a message on stderr naming the line) when the file is malformed. */
bool fh_load(fh_history *h, const char *path);

typedef struct fh_report {
    size_t ops_checked;  /* ok and unknown operations the checks considered */
    size_t keys;         /* distinct keys */
    size_t violations;   /* keys whose history is not valid */
    size_t anomalies;    /* register segments that cannot be linearized, plus
                          * one per kind of counter fault */
    size_t inconclusive; /* register keys whose search exceeded its budget */
} fh_report;

/* Checks every register key; describes each violation on out (may be NULL).
 * `budget` bounds the search steps per key (0: a default of 20 million);
 * a key that exhausts it counts as inconclusive, never as valid. */
void fh_check_registers(const fh_history *h, size_t budget, FILE *out, fh_report *r);
/* For a register key the search rejected: counts the stale reads, reads of
 * absent after a write, read inversions and reads of a future write, and
 * shows the first witness of each (check_register calls it). */
void fh_explain_register(const fh_history *h, const char *key, FILE *out);
/* Checks every counter key: acknowledged increments return distinct values
 * within [1, attempts], in real-time order; every read lies between what was
 * certainly applied before it started and what could have been by its end. */
void fh_check_counters(const fh_history *h, FILE *out, fh_report *r);
/* Both checks; true when there is no violation and nothing inconclusive. */
bool fh_check(const fh_history *h, FILE *out, fh_report *r);

/* The distinct keys of h, in order of first use (*keys points into h; free
 * the array), and whether a key is a counter (some INCR touches it). */
size_t fh_distinct_keys(const fh_history *h, const char ***keys);
bool fh_is_counter(const fh_history *h, const char *key);

/* The longest stretch of [from, to] in which no operation completed ok (ns). */
int64_t fh_longest_gap(const fh_history *h, int64_t from, int64_t to);
size_t fh_count_ok(const fh_history *h, int64_t after);

#endif
