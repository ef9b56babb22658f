/*
 * rebalance: moving partitions to their new owners, without the network.
 *
 *   plan      (serving assignment, ideal assignment, copy states, live nodes)
 *             -> tasks "demander D loads partition P from suppliers S0, S1..."
 *                + copies that turn RENTING after the switch + LOST partitions
 *   supplier  store cursor -> batcher -> Supply bytes (<= batch_bytes each)
 *   demander  Supply bytes -> decode -> applier -> store insert_batch(IF_NEWER)
 *   flow      demander/supplier session state machines:
 *             (message in, now) -> (messages out, next deadline)
 *   progress  per cache counters, JSON for `lattice rebalance`, a --watch bar
 *   verify    per-partition order-independent content digests + comparator
 *
 * Nothing here opens a socket or reads a clock: the node drives the session
 * machines from its data thread with the time it read, so the tests drive
 * them the same way.  Nodes are named by consistent id (plan input) and by
 * index into the caller's node array (plan output).  Protocol, states and
 * rationale: docs/REBALANCE.md.
 *
 * Threads: every object here is used by one thread at a time (the caller's
 * data thread); none is shared.  Functions that touch a lattice_store
 * (batcher, applier, digest) need the calling thread registered with RCU
 * (rcu_register_thread), as every store call does, and must not be called
 * inside rcu_read_lock().
 * Memory: all allocations go through lattice/alloc.h; NOMEM leaves objects
 * usable (the batcher is the exception: see there).  Bytes returned in a
 * lattice_rebalance_out belong to it.
 */
#ifndef LATTICE_REBALANCE_H
#define LATTICE_REBALANCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lattice/rebalance_view.h"
#include "lattice/status.h"
#include "partition/partition.h"
#include "storage/storage.h"

/* ------------------------------------------------------------------------ */
/* Planner                                                                   */
/* ------------------------------------------------------------------------ */

/* What a node reports about its copy of a partition. */
typedef struct lattice_rebalance_copy {
    lattice_partition_state state;
    uint64_t counter; /* update counter */
} lattice_rebalance_copy;

typedef enum lattice_rebalance_policy {
    /* The serving primary supplies when it is among the best copies, else
     * the first best copy by consistent id. */
    LATTICE_REBALANCE_PREFER_PRIMARY = 0,
    /* The best copy with the fewest tasks so far (ties: consistent id), so
     * suppliers share the load.  Partitions are visited in order. */
    LATTICE_REBALANCE_SPREAD = 1,
} lattice_rebalance_policy;

typedef struct lattice_rebalance_plan_input {
    /* The assignment being served now (late affinity keeps it until the
     * switch); NULL when there is none.  Only its primaries are used. */
    const lattice_affinity *serving;
    /* The assignment to reach (computed from the live server nodes). */
    const lattice_affinity *ideal;
    /* Every node whose copies are reported: unique, non-empty consistent ids.
     * Output indexes refer to this array.  Its order does not change which
     * node is chosen (ties are broken by consistent id), so every node gets
     * the same plan from the same facts. */
    const char *const *nodes;
    size_t node_count;
    const uint8_t *live;                  /* node_count bytes, non-zero = alive */
    /* copies[n * partitions + p]: node n's copy of partition p. */
    const lattice_rebalance_copy *copies;
    lattice_rebalance_policy policy;
} lattice_rebalance_plan_input;

typedef struct lattice_rebalance_task {
    uint32_t partition;
    uint32_t demander;       /* node index */
    uint32_t supplier;       /* node index, the preferred one (= suppliers[0]) */
    uint64_t counter;        /* the suppliers' update counter at plan time */
    uint32_t supplier_first; /* this task's suppliers: */
    uint32_t supplier_count; /*   lattice_rebalance_plan_suppliers(plan)[first..first+count) */
} lattice_rebalance_task;

typedef struct lattice_rebalance_plan lattice_rebalance_plan;

/*
 * Rules (per partition p):
 *  - best = the highest counter among live OWNING copies of p.  No live
 *    OWNING copy: p is LOST (no task).  (Copies outside the ideal owners are
 *    not the plan's business: the executor evicts them at the switch.)
 *  - suppliers = live OWNING copies at best (a copy behind another never
 *    supplies), in preference order (policy above), the preferred first.
 *  - each live ideal owner that is not OWNING at best gets a full-load task
 *    (MOVING copies restart; OWNING copies behind best reload).
 *  - each live node holding p OWNING or MOVING that is not an ideal owner
 *    is listed as RENTING-after-switch.
 * A brand-new cache has no copies at all and is not planned: its owners go
 * EVICTED -> OWNING directly.  INVAL: NULL ideal/nodes/live/copies, empty or
 * duplicate ids, serving with another partition count; NOMEM.
 */
lattice_status lattice_rebalance_plan_compute(const lattice_rebalance_plan_input *in,
                                              lattice_rebalance_plan **out);
void lattice_rebalance_plan_free(lattice_rebalance_plan *p);

/* Tasks in (partition, demander consistent id) order.  Arrays live as long as
 * the plan. */
const uint32_t *lattice_rebalance_plan_suppliers(const lattice_rebalance_plan *p,
                                                 size_t *count);
const uint32_t *lattice_rebalance_plan_lost(const lattice_rebalance_plan *p, size_t *count);

/* Tasks grouped into demand sessions: tasks of one demander with the same
 * supplier list (same nodes, same order) are loaded in one session, so every
 * supplier in the list can serve every partition of it. */
typedef struct lattice_rebalance_session_spec {
    uint32_t demander;
    uint32_t supplier_first, supplier_count;   /* into lattice_rebalance_plan_suppliers */
    uint32_t partition_first, partition_count; /* into *partitions, ascending */
} lattice_rebalance_session_spec;

/* Every task in exactly one session; sessions ordered by demander consistent
 * id, then supplier list.  *specs and *partitions are lt_malloc'd (lt_free
 * both; NULL when there are no tasks).  NOMEM. */
lattice_status lattice_rebalance_plan_sessions(const lattice_rebalance_plan *p,
                                               lattice_rebalance_session_spec **specs,
                                               size_t *count, uint32_t **partitions);

/* ------------------------------------------------------------------------ */
/* Messages                                                                  */
/* ------------------------------------------------------------------------ */

#define LATTICE_REBALANCE_FORMAT 1
/* Largest message the decoders accept when the caller passes 0 as limit. */
#define LATTICE_REBALANCE_MAX_MESSAGE (64u << 20)

/* What identifies one rebalance attempt; messages of any other are stale. */
typedef struct lattice_rebalance_ids {
    uint64_t topology_major, topology_minor;
    uint64_t rebalance_id;
    uint32_t session;
} lattice_rebalance_ids;

/* Delta rebalance (docs/REBALANCE.md §9): the demander's older copy of a
 * partition holds every update up to mark; keys changed above it. */
typedef struct lattice_rebalance_key {
    uint8_t *data;           /* lt_malloc'd, owned by the demand */
    size_t len;
} lattice_rebalance_key;

typedef struct lattice_rebalance_delta_base {
    uint32_t partition;
    uint64_t mark;
    lattice_rebalance_key *keys;
    size_t key_count;
} lattice_rebalance_delta_base;

/* Most keys a delta base may list (more: ask for a full copy). */
#define LATTICE_REBALANCE_MAX_DELTA_KEYS 65536u

typedef struct lattice_rebalance_demand {
    char cache[LATTICE_CACHE_NAME_MAX + 1];
    lattice_rebalance_ids ids;
    uint32_t *partitions;    /* owned by the struct: lattice_rebalance_demand_clear */
    size_t partition_count;
    uint64_t ack;
    bool resume;
    uint32_t window;
    lattice_rebalance_delta_base *deltas; /* owned by the struct; may be NULL */
    size_t delta_count;
} lattice_rebalance_demand;

/* The demand's delta base of partition p, or NULL. */
const lattice_rebalance_delta_base *lattice_rebalance_demand_delta(const lattice_rebalance_demand *d, uint32_t p);

/* Encodes into an lt_malloc'd buffer.  INVAL for a bad cache name, a
 * partition above LATTICE_PARTITION_MAX or none; NOMEM. */
lattice_status lattice_rebalance_demand_encode(const lattice_rebalance_demand *d, void **buf,
                                               size_t *len);
/* Decodes bytes from a peer.  PROTO for anything malformed: truncated,
 * unknown fields, another format, a bad cache name, no or out-of-range
 * partitions; TOO_LARGE above max_len (0 = LATTICE_REBALANCE_MAX_MESSAGE).
 * On OK, clear d when done. */
lattice_status lattice_rebalance_demand_decode(const void *buf, size_t len, size_t max_len,
                                               lattice_rebalance_demand *d);
void lattice_rebalance_demand_clear(lattice_rebalance_demand *d);

/* The max_len a demander passes to supply_decode for a cache: a batch, or a
 * lone entry as large as the cache allows (it travels alone), plus framing. */
size_t lattice_rebalance_max_supply_bytes(const lattice_cache_config *c);

/* A decoded Supply (opaque).  Zero-copy: keys and values point into the
 * bytes given to decode, so keep those bytes until supply_free. */
typedef struct lattice_rebalance_supply lattice_rebalance_supply;

typedef struct lattice_rebalance_supply_info {
    const char *cache;
    lattice_rebalance_ids ids;
    uint32_t partition;
    uint64_t batch;
    size_t entries;
    uint64_t payload_bytes;  /* key + value bytes of all entries */
    bool last;
    uint64_t update_counter;
    lattice_status status;   /* supplier refused (e.g. NOT_OWNER) when not OK */
    bool delta;              /* sent as a delta of the demander's base */
} lattice_rebalance_supply_info;

/* PROTO: malformed, truncated, unknown fields, other format, bad cache name,
 * partition >= LATTICE_PARTITION_MAX, batch 0, an empty key or a key/value
 * above the store limits, a status out of range, a uint32 field above
 * 2^32-1.  TOO_LARGE above max_len.  NOMEM. */
lattice_status lattice_rebalance_supply_decode(const void *buf, size_t len, size_t max_len,
                                               lattice_rebalance_supply **out);
void lattice_rebalance_supply_info_of(const lattice_rebalance_supply *s,
                                      lattice_rebalance_supply_info *info);
/* Entry i as a store entry of the supply's partition (pointers into s). */
void lattice_rebalance_supply_entry(const lattice_rebalance_supply *s, size_t i,
                                    lattice_store_entry *e);
/* Entry i is a removal (delta only): the key is gone at its version. */
bool lattice_rebalance_supply_entry_removed(const lattice_rebalance_supply *s, size_t i);
void lattice_rebalance_supply_free(lattice_rebalance_supply *s);

/* A refusal (status != OK, last set, no entries), e.g. NOT_OWNER. */
lattice_status lattice_rebalance_supply_encode_refusal(const char *cache,
                                                       const lattice_rebalance_ids *ids,
                                                       uint32_t partition, uint64_t batch,
                                                       lattice_status why, void **buf,
                                                       size_t *len);

/* ------------------------------------------------------------------------ */
/* Supplier side: batcher                                                    */
/* ------------------------------------------------------------------------ */

/* Smallest batch_bytes accepted: room for the header and a small entry. */
#define LATTICE_REBALANCE_MIN_BATCH 256u

/* Streams one partition of a store as Supply messages.  Each message's
 * encoded size is at most batch_bytes, except a message whose single entry
 * alone is larger (it is sent alone).  Every entry present from create until
 * the last batch is sent exactly once (the store cursor's promise); entries
 * written meanwhile may or may not be (the demander gets those as writes).
 * Resumable: next() may be called any time later; the cursor keeps its
 * place and an entry that did not fit is carried to the next batch. */
typedef struct lattice_rebalance_batcher lattice_rebalance_batcher;

/* INVAL: NULL store/cache/ids, bad partition, batch_bytes below the minimum. */
lattice_status lattice_rebalance_batcher_create(lattice_store *store, const char *cache,
                                                const lattice_rebalance_ids *ids,
                                                uint32_t partition, uint64_t batch_bytes,
                                                lattice_rebalance_batcher **out);
/* Builds the next message, numbered `batch`, into an lt_malloc'd *buf.  When
 * the partition is exhausted the message has last set and carries `counter`
 * (read the partition's update counter just before: see docs/REBALANCE.md why
 * that is enough); *last reports it.  *entries (may be NULL) = entries in it.
 * After last, INVAL.  NOMEM while copying entries out of the cursor ends
 * the batcher (the cursor cannot hand those entries out again): every later
 * call is INVAL; free it and start the partition over (the demander's
 * IF_NEWER rule makes a restart harmless). */
lattice_status lattice_rebalance_batcher_next(lattice_rebalance_batcher *b, uint64_t batch,
                                              uint64_t counter, void **buf, size_t *len,
                                              bool *last, size_t *entries);
/* The demander's side of a delta: the base a kept copy offers for
 * partition p - mark, and every key its history changed above the mark,
 * each once (copies; lattice_rebalance_demand_clear frees them with the
 * demand that carries it).  NOT_FOUND when the history does not hold every
 * change above the mark, or they are more than
 * LATTICE_REBALANCE_MAX_DELTA_KEYS keys: the caller loads p in full. */
lattice_status lattice_rebalance_delta_base_of(lattice_store *store, uint32_t partition, uint64_t mark,
                                               lattice_rebalance_delta_base *out);
/* A delta of partition p against a demander's base: every key the store's
 * history changed above base->mark plus the base's keys, each with its
 * current value or as a removal (version: the key's last change the history
 * holds), taken now; entries written later reach the demander as writes.
 * NOT_FOUND when the history does not hold every change above the mark (or
 * the copy is not known complete up to it: lattice_store_history_above), or
 * counter < mark: the caller sends a full copy.  Messages carry delta. */
lattice_status lattice_rebalance_batcher_create_delta(lattice_store *store, const char *cache,
                                                      const lattice_rebalance_ids *ids, uint32_t partition,
                                                      uint64_t batch_bytes, uint64_t counter,
                                                      const lattice_rebalance_delta_base *base,
                                                      lattice_rebalance_batcher **out);
void lattice_rebalance_batcher_free(lattice_rebalance_batcher *b);

/* ------------------------------------------------------------------------ */
/* Demander side: applier                                                    */
/* ------------------------------------------------------------------------ */

typedef struct lattice_rebalance_applier lattice_rebalance_applier;

typedef enum lattice_rebalance_verdict {
    LATTICE_REBALANCE_APPLIED = 0,   /* stored (entries older than the store's were skipped) */
    LATTICE_REBALANCE_STALE = 1,     /* other cache, topology, rebalance or session: ignored */
    LATTICE_REBALANCE_UNEXPECTED = 2,/* partition not begun or already complete: ignored */
    LATTICE_REBALANCE_REFUSED = 3,   /* the supplier refused: ask another */
} lattice_rebalance_verdict;

typedef struct lattice_rebalance_apply_result {
    lattice_rebalance_verdict verdict;
    size_t applied;          /* entries written */
    size_t skipped;          /* entries not newer than the store's copy, or removed meanwhile */
    bool partition_done;     /* that was the last batch of its partition */
    bool delta;              /* the batch was a delta (the kept copy is in) */
    uint64_t update_counter; /* with partition_done */
} lattice_rebalance_apply_result;

/* One applier per (cache, rebalance) on the demander.  progress may be NULL;
 * else it is updated with every applied batch and finished partition. */
lattice_status lattice_rebalance_applier_create(lattice_store *store, const char *cache,
                                                const lattice_rebalance_ids *ids,
                                                lattice_rebalance_progress *progress,
                                                lattice_rebalance_applier **out);
/* A new session (the demander switched supplier): only ids.session changes
 * what is accepted; partitions begun stay begun. */
void lattice_rebalance_applier_set_ids(lattice_rebalance_applier *a,
                                       const lattice_rebalance_ids *ids);
/* Starts loading a partition.  full: clear it first.  Call it while the
 * partition is MOVING and before writes to it are accepted (a clear after
 * them would drop them).  INVAL for a bad partition. */
lattice_status lattice_rebalance_applier_begin(lattice_rebalance_applier *a, uint32_t partition,
                                               bool full);
/* Starts loading a partition of which `base` (another store, e.g. the copy
 * a node kept from before it was dropped) holds every update up to mark.
 * Should the supplier answer with a delta, the first delta batch takes in
 * base's entries with a version <= mark (those above it may be writes the
 * grid never acknowledged: the supplier sends the grid's state of those
 * keys, listed in the demand) that no remove seen since supersedes, under
 * IF_NEWER; removes in the delta take keys away whose stored version is
 * older.  Should it answer in full, the partition loads as by begin.  The
 * removes this partition applied before the load began are taken from its
 * own history: NOT_FOUND when that history is not complete since the
 * store's creation (then begin without a base).  base must outlive the
 * applier or the partition's load. */
lattice_status lattice_rebalance_applier_begin_delta(lattice_rebalance_applier *a, uint32_t partition,
                                                     lattice_store *base, uint64_t mark);
/* Stores one batch with insert_batch(IF_NEWER): a write that reached the
 * partition with a newer version is never overwritten by supplied data.
 * Store errors (REGION_FULL, NOMEM) are returned; the batch can be retried. */
lattice_status lattice_rebalance_applier_apply(lattice_rebalance_applier *a,
                                               const lattice_rebalance_supply *s,
                                               lattice_rebalance_apply_result *r);
/* A remove reached a loading partition (the node's write path calls this
 * for every remove applied to a MOVING copy, with the remove's update
 * counter).  Until the partition completes, supplied entries of that key
 * with a version <= `version` are dropped, so supplied data never brings
 * a removed key back.  No-op for a partition not loading.  INVAL, NOMEM. */
lattice_status lattice_rebalance_applier_note_remove(lattice_rebalance_applier *a,
                                                     uint32_t partition, const void *key,
                                                     size_t key_len, uint64_t version);
void lattice_rebalance_applier_free(lattice_rebalance_applier *a);

/* ------------------------------------------------------------------------ */
/* Flow control: session state machines                                      */
/* ------------------------------------------------------------------------ */

typedef struct lattice_rebalance_flow_config {
    uint32_t prefetch;      /* batches in flight beyond the last ack; >= 1 (default 3) */
    uint64_t throttle_ms;   /* pause between two batches of a supplier (default 0) */
    uint64_t timeout_ms;    /* demander: no batch for this long -> next supplier (10000) */
    uint64_t batch_bytes;   /* supplier: message size bound (524288) */
} lattice_rebalance_flow_config;

#define LATTICE_REBALANCE_DEFAULT_TIMEOUT_MS 10000u
/* Times the demander cycles through its suppliers before giving up. */
#define LATTICE_REBALANCE_ROUNDS 2u
#define LATTICE_REBALANCE_NO_DEADLINE UINT64_MAX

/* From a cache config (prefetch, throttle, batch bytes) and the default timeout. */
void lattice_rebalance_flow_config_of(const lattice_cache_config *c,
                                      lattice_rebalance_flow_config *f);

/* Messages a machine wants sent, and when it wants to be called again. */
typedef struct lattice_rebalance_msg {
    uint32_t to;        /* demander: index into its supplier list; supplier: 0 (the demander) */
    void *buf;          /* lt_malloc'd, owned by the out */
    size_t len;
} lattice_rebalance_msg;

typedef struct lattice_rebalance_out {
    lattice_rebalance_msg *msgs;
    size_t count, cap;
    uint64_t deadline;  /* call on_tick at or after this time; NO_DEADLINE: not needed */
} lattice_rebalance_out;

void lattice_rebalance_out_init(lattice_rebalance_out *o);
/* Frees the buffers (after sending them) and empties it; reusable. */
void lattice_rebalance_out_clear(lattice_rebalance_out *o);

/*
 * Demander session: one cache, a list of partitions, the candidate suppliers
 * (in preference order).
 *
 *   start ──► WAITING ──supply(batch = expected)──► WAITING (ack demand out)
 *               │  └── last of final partition ───► DONE
 *               └─ deadline / refusal ─► next supplier (cyclic), session+1,
 *                   current partition from batch 1 ─► WAITING, or FAILED once
 *                   suppliers x LATTICE_REBALANCE_ROUNDS attempts failed
 *
 * The caller applies an ACCEPTED batch (applier) before sending the ack in
 * `out`, and after every call copies lattice_rebalance_demander_ids into
 * the applier (lattice_rebalance_applier_set_ids) so it follows switches.  Stale batches (other ids or session) and out-of-order ones are
 * ignored; the timeout recovers from losses.
 */
typedef struct lattice_rebalance_demander lattice_rebalance_demander;

typedef enum lattice_rebalance_demander_event {
    LATTICE_REBALANCE_ACCEPT = 0,   /* apply this batch */
    LATTICE_REBALANCE_IGNORE = 1,   /* stale, duplicate or out of order */
    LATTICE_REBALANCE_SWITCHED = 2, /* refusal: moved on to the next supplier */
} lattice_rebalance_demander_event;

typedef enum lattice_rebalance_demander_state {
    LATTICE_REBALANCE_DEMANDER_IDLE = 0,
    LATTICE_REBALANCE_DEMANDER_WAITING = 1,
    LATTICE_REBALANCE_DEMANDER_DONE = 2,
    LATTICE_REBALANCE_DEMANDER_FAILED = 3,
} lattice_rebalance_demander_state;

/* ids.session is the first session number; it grows by one per switch. */
lattice_status lattice_rebalance_demander_create(const char *cache,
                                                 const lattice_rebalance_ids *ids,
                                                 const uint32_t *partitions, size_t n,
                                                 uint32_t supplier_count,
                                                 const lattice_rebalance_flow_config *cfg,
                                                 lattice_rebalance_demander **out);
/* Delta bases sent with the first demand of every session (the caller keeps
 * them alive until the demander is freed). */
void lattice_rebalance_demander_set_bases(lattice_rebalance_demander *d, const lattice_rebalance_delta_base *bases,
                                          size_t n);
lattice_status lattice_rebalance_demander_start(lattice_rebalance_demander *d, uint64_t now_ms,
                                                lattice_rebalance_out *out);
/* s is a decoded Supply from supplier `from` (index in the supplier list). */
lattice_status lattice_rebalance_demander_on_supply(lattice_rebalance_demander *d, uint32_t from,
                                                    const lattice_rebalance_supply *s,
                                                    uint64_t now_ms, lattice_rebalance_out *out,
                                                    lattice_rebalance_demander_event *ev);
lattice_status lattice_rebalance_demander_on_tick(lattice_rebalance_demander *d, uint64_t now_ms,
                                                  lattice_rebalance_out *out);
lattice_rebalance_demander_state lattice_rebalance_demander_state_of(
    const lattice_rebalance_demander *d);
/* The ids (session) in use. */
void lattice_rebalance_demander_ids(const lattice_rebalance_demander *d, lattice_rebalance_ids *ids);
void lattice_rebalance_demander_free(lattice_rebalance_demander *d);

/*
 * Supplier session: created from the first demand of a session; answers each
 * next demand (ack) with batches while fewer than `window` (capped by its own
 * prefetch) are unacked, one per throttle interval.  Keeps unacked batches so
 * a demand with `resume` gets them again.  counter_fn reports whether this
 * node may supply a partition (OK, or e.g. NOT_OWNER -> refusal) and its
 * update counter (read when the last batch is built).
 */
typedef lattice_status (*lattice_rebalance_counter_fn)(void *arg, uint32_t partition,
                                                       uint64_t *counter);
typedef struct lattice_rebalance_supplier lattice_rebalance_supplier;

lattice_status lattice_rebalance_supplier_create(lattice_store *store,
                                                 const lattice_rebalance_demand *first,
                                                 const lattice_rebalance_flow_config *cfg,
                                                 lattice_rebalance_counter_fn counter_fn,
                                                 void *counter_arg,
                                                 lattice_rebalance_supplier **out);
/* A demand of this session (the first one too).  STALE-like demands (other
 * ids) get INVAL and change nothing: the node routes by ids. */
lattice_status lattice_rebalance_supplier_on_demand(lattice_rebalance_supplier *s,
                                                    const lattice_rebalance_demand *d,
                                                    uint64_t now_ms, lattice_rebalance_out *out);
lattice_status lattice_rebalance_supplier_on_tick(lattice_rebalance_supplier *s, uint64_t now_ms,
                                                  lattice_rebalance_out *out);
/* Every batch sent and acknowledged (or this node refused: nothing more to send). */
bool lattice_rebalance_supplier_done(const lattice_rebalance_supplier *s);
/* Partitions this supplier sent as deltas and in full so far. */
void lattice_rebalance_supplier_modes(const lattice_rebalance_supplier *s, uint32_t *delta, uint32_t *full);
void lattice_rebalance_supplier_free(lattice_rebalance_supplier *s);

/* ------------------------------------------------------------------------ */
/* Progress and verification: the public half is lattice/rebalance_view.h    */
/* ------------------------------------------------------------------------ */

/* Walks the partition (a store cursor: take it when the partition is idle,
 * as idle_verify does, or expect conflicts from writes in flight).  The hash
 * does not depend on iteration order. */
lattice_status lattice_rebalance_digest_partition(lattice_store *s, uint32_t partition,
                                                  uint64_t counter, lattice_rebalance_digest *d);

#endif
