/*
 * Internal to ops/: the data thread's state and the functions each stage
 * file offers the stages above it.  Everything here belongs to the data
 * thread, except the fields marked "any thread".  grid/, which runs on the
 * data thread, sees it too (ops/CMakeLists.txt: lattice_ops_int) and reads
 * what ops/ owns here; it writes none of it but the counter `malformed`
 * (and, in grid/attach.c, the registration points and the pointer grid).
 * Its own state is its own (struct lattice_grid, grid/grid_int.h).  ops/
 * reaches grid/ only through its registration points below.
 *
 * Files: docs/ARCHITECTURE.md, "File map".  The pending table calls back
 * through the settle function its creator gave.  Below them all, the
 * cluster metadata (meta/meta.h: caches, owners, the base switch) and
 * rebalance/'s network-free core.
 */
#ifndef LATTICE_OPS_OPS_INT_H
#define LATTICE_OPS_OPS_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <urcu/wfcqueue.h>

#include "cache.pb-c.h"
#include "cache_int.h"
#include "discovery/discovery.h"
#include "fabric/fabric.h"
#include "ops/ops.h"

#define DATA_MAX_PEERS 256
/* A lineage of node ids (lattice_ops.lineage): up to 4 of 64 bytes, spaces. */
#define OPS_LINEAGE_IDS 4
#define OPS_LINEAGE_BYTES (OPS_LINEAGE_IDS * 64 + 4)
/* The HMAC key of the data channel is derived from the cluster secret with
 * this context (lt_frame_derive_key): every sender and receiver uses it. */
#define DATA_KEY_CONTEXT "lattice data channel v1"
#define NO_CACHE_WAIT_MS 300         /* an unknown cache: how long to pull and look again */

/* A member of the current topology as the data channel holds it.  Its
 * identity is the metadata's member (first, so owners meta returns convert
 * back with peer_of); the rest is the channel's. */
typedef struct peer {
    lattice_meta_member m;
    char addr[160];
    bool mark, dirty, push_meta;
    struct link_conn *dealer;     /* servers other than self: our connection to its data port (fabric/fabric.h) */
    uint8_t back[8];              /* a client, at the coordinator: the connection its last metadata pull */
    size_t back_len;              /* came on (link_srv_ident; 0: none) - its pushes go there (grid/control.c) */
    fab_reqs out;                 /* requests to send at the next flush (fabric/batch.c) */
} peer;

static inline struct peer *peer_of(lattice_meta_member *m) { return (struct peer *)m; }

typedef struct opx opx;

/* Where a primary's result goes: a local op, or the accepted connection the
 * request came on (link_srv_ident) + request id. */
typedef enum { ADDRESSED_UNSAID, ADDRESSED_HERE, ADDRESSED_ELSEWHERE } addressed_to;

typedef struct origin {
    opx *local;
    uint8_t ident[256];
    size_t ident_len;
    uint64_t rid;
    addressed_to to; /* a peer's request: the incarnation its sender meant (loop.c) */
} origin;

/* An operation submitted on this node (owned copy of everything). */
struct opx {
    struct cds_wfcq_node qnode;
    lattice_op op;                /* key/value point into data[] */
    char cache[LATTICE_CACHE_NAME_MAX + 1];
    lattice_op_fn fn;
    void *arg;
    size_t index;
    uint64_t deadline_ms, next_try_ms;
    uint64_t seq;                 /* writes: this node's op sequence, kept over resends */
    char origin[64];              /* ... and the node id it was first sent under (issue.c) */
    uint64_t seq_inc;             /* ... and this node's incarnation then */
    uint64_t no_cache_until;      /* unknown cache: pull metadata and retry until then */
    uint64_t lost_mark;           /* a client's PARTITION_LOST: retried until metadata pull lost_mark ended */
    uint32_t lost_part;           /* ... the partition it found LOST (its result's num) */
    struct opx *rnext;            /* retry list; a pool's free list (pool.c) */
    struct opx_pool *pool;        /* the pool its block goes back to; NULL: malloc'd */
    int call;                     /* LATTICE_GRID_CALL_* for internal calls, else 0 */
    char data[];
};

/* A read at the primary parked behind a write in flight on its key. */
typedef struct deferred_read {
    struct deferred_read *next;
    exec_in in;                   /* key points into key[] */
    origin org;
    char origin_id[64];           /* a transaction's issuer and op sequence (0: none), kept for its rerun */
    uint64_t seq;
    char key[];
} deferred_read;

/* A full_sync write waiting for its backups.  While it waits it is also in
 * its partition's in-flight list (clean.c): reads of its key at the primary
 * wait for it, and the partition's commit watermark stays below it. */
typedef struct waitw {
    int remaining;
    bool rejected;                /* a copy refused it (it saw a newer primary): not acknowledged */
    uint64_t cache_serial;        /* its cache (lattice_meta_cache.serial): counted in writes_in_flight */
    bool full;                    /* a copy refused it for lack of room (REGION_FULL) */
    int room_rounds;              /* times this node evicted for a copy without room and sent the write again (primary.c) */
    uint64_t oh, seq;             /* its resend record (dedup.c; seq 0: none) */
    /* primary.c: called instead of acknowledging when `full`; puts the
     * previous value back on every copy, re-arming this wait, and returns
     * true (the wait then ends with REGION_FULL).  `undo` is its record. */
    bool (*on_full)(lattice_ops *d, struct waitw *w);
    void *undo;
    origin org;
    lattice_op_result res;
    void *value;
    /* clean.c */
    lattice_meta_cache *c;        /* NULL: not tracked (or the cache went away) */
    uint32_t partition;
    uint64_t version, key_hash;
    uint64_t *more_keys;          /* a transaction: the hashes of every key it wrote (txn.c owns them) */
    size_t n_more_keys;
    bool done;
    bool linked;                  /* in its partition's in-flight list */
    bool finished;                /* its wait ended while still linked: clean.c frees it when it leaves the list */
    struct waitw *cnext;          /* the partition's in-flight list, oldest first */
    deferred_read *reads;         /* reads of the same key waiting for this write */
    /* Called once the result went out, before w is freed (primary.c). */
    void (*after)(lattice_ops *d, struct waitw *w);
} waitw;


/* Results of recent writes by (origin, op sequence), on the primary and its
 * copies, so a write resent after a failover returns its first result
 * instead of applying twice (an increment would count twice).  Direct
 * mapped and bounded: an entry overwritten before its resend arrives means
 * the write is applied again (the behaviour without this table). */
#define DEDUP_SLOTS 65536u
typedef struct dedup_entry {
    uint64_t origin, seq;         /* seq 0 = empty */
    int32_t status;
    uint32_t flags;
    int64_t num;
} dedup_entry;

typedef struct pend pend;
/* How a pending request ends: rs is the answer, or NULL when its target
 * left the topology, its deadline passed or the node stops.  Set by the
 * stage that sent it; the pending table frees p afterwards. */
typedef void (*pend_settle_fn)(lattice_ops *d, pend *p, const Latdata__Resp *rs);

struct pend {
    uint64_t id;                  /* its request id: the key in the pending table (fabric/pending.c) */
    pend_settle_fn settle;
    char target[64];              /* node id the request went to */
    opx *op;                      /* an issued op, a control request's caller (may be NULL) */
    waitw *w;                     /* a replication's full_sync wait */
    struct bcast *b;              /* a broadcast part (grid/) */
    int ctl;                      /* control requests: CTL_* */
    uint64_t pull;                /* CTL_META_GET: its number (pulls_sent) */
    /* A full_sync replication: its request, sent again when the target's
     * connection lost frames since (losses moved on: sync_wait_resend). */
    Latdata__Req *resend;
    uint32_t sent_losses;
    /* CTL_LEVEL: the partition whose key it asked to be rewritten (takeover.c) */
    uint64_t cache_serial;
    uint32_t partition;
    uint8_t attempts;
};

/* ---- Registration points: how the grid's machines (grid/grid.h) ride on
 * the data thread without ops/ naming them - ops/ includes nothing of
 * grid/.  lattice_grid_attach sets them before the data thread starts;
 * each runs on the data thread (or in its role).  An ops without the grid
 * (unit suites) skips every unset hook and answers the kinds nobody
 * registered INVAL. */
/* Serves a peer's request of one kind >= CTL_REPLICATE (cache_int.h), up to
 * CTL_REPLICATE + FAB_KINDS - 1 (others are ignored): the data channel's
 * registry of kinds (fabric/kinds.c).  Its handler gets the lattice_ops as
 * ctx and the request's origin (const origin *) as from. */
typedef fab_kind_fn ops_kind_fn;
void ops_on_kind(lattice_ops *d, int kind, ops_kind_fn fn);
/* Runs every loop tick, in the order registered. */
typedef void (*ops_tick_fn)(lattice_ops *d, uint64_t now);
#define OPS_MAX_TICKS 4
void ops_on_tick(lattice_ops *d, ops_tick_fn fn);
/* The data thread's events the grid acts on. */
typedef struct ops_grid_hooks {
    void (*on_meta)(lattice_ops *d, const Latdata__Meta *m); /* a frame carried the metadata */
    void (*on_topology)(lattice_ops *d);                     /* the peers follow a new topology */
    void (*run_call)(lattice_ops *d, opx *o);                /* an internal call (o->call) is due */
    void (*start_size)(lattice_ops *d, opx *o);              /* LATTICE_OP_SIZE passed the gate */
    bool (*refuses)(const lattice_ops *d);                   /* no metadata yet: a whole-grid restart waits */
    void (*keep_old)(lattice_ops *d, lattice_meta *old);     /* a rejoin: old's stores, before old goes */
    void (*rejoined)(lattice_ops *d);                        /* ... this node runs under a new id */
    void (*meta_fresh)(lattice_ops *d);                      /* a rejoin replaced the metadata by an empty one */
    /* The metadata is wanted now (an unknown cache, a LOST partition): a
     * pull at the next tick.  Returns the number that pull will carry
     * (pulls are numbered from 1); pulls_ended: the highest number of a
     * pull that ended (answered or given up).  Without the grid nobody
     * pulls: ops/ takes 1 and 0. */
    uint64_t (*pull_soon)(lattice_ops *d);
    uint64_t (*pulls_ended)(const lattice_ops *d);
    void (*cache_gone)(void *d, lattice_meta_cache *c);      /* meta frees c */
    /* A copy applied a replicated remove (backup.c, txn.c). */
    void (*note_remove)(lattice_meta_cache *c, uint32_t partition, const void *key, size_t key_len, uint64_t version);
    /* A recovered copy kept aside - as delta bases and for the lost records
     * naming an id of `ids` (the incarnations that wrote it): takes store,
     * counter, marks (NULL: none) (wal.c). */
    void (*keep_recovered)(lattice_ops *d, const lattice_cache_config *cfg, lattice_store *store, uint64_t *counter,
                           uint64_t *marks, const char *ids);
    void (*reloads_end)(lattice_ops *d);                     /* a cache ended restoring here (wal.c) */
    void (*durable_tick)(lattice_ops *d);                    /* wal_tick: what waits for the log */
    void (*free_sessions)(lattice_ops *d);                   /* destroy, before the stores go */
    void (*free)(lattice_ops *d);                            /* destroy, after them */
} ops_grid_hooks;

/* The data thread's state, grouped by owner: each group is written by the
 * file its comment names (others read it, or call that file's functions
 * below).  The grid's machines keep their state in struct lattice_grid
 * (grid/grid_int.h), which grid/ allocates and frees; ops/ holds only the
 * pointer and reaches what it needs of it through ops_grid_hooks (a pull
 * of the metadata: pull_soon, pulls_ended; a rejoin: meta_fresh). */
struct lattice_ops {
    /* ---- loop.c: set at init (lattice_ops_init), read-only after.  srv,
     * efd, have_key and key are the data channel's (channel.c). */
    bool client, have_key;
    uint8_t key[32];
    int op_timeout_ms, region_mb;
    char attr[200];
    lattice_cache_config local_cfgs[LATTICE_MAX_CACHES];
    size_t n_local_cfgs;
    struct link_srv *srv;         /* servers: the data port and the connections it accepted */
    int efd;
    lattice_region *region;
    struct lattice_discovery *disc;
    pthread_t thread;
    bool thread_started;

    /* any thread: the inbox (channel.c pushes, loop.c drains); loop.c's
     * lifecycle flags */
    struct cds_wfcq_head qhead;
    struct cds_wfcq_tail qtail;
    atomic_bool run_flag, accepting;
    atomic_bool fenced;           /* the node is leaving: serve nothing more (lattice_ops_fence) */

    /* The data thread's state below is owned by whoever holds run_lock: the
     * data thread itself everywhere but in its poll(2), or - while it sits
     * in poll - a thread that runs its own submit to completion there
     * (loop_run_here: no hand-off, docs/ARCHITECTURE.md "Run to
     * completion").  run_open: the data thread is up and takes such runs. */
    pthread_mutex_t run_lock;
    bool run_open;
    uint64_t poll_changes;        /* runs that changed what the data thread polls: its results are stale */

    /* ---- loop.c: the data thread's view of the topology and of this node
     * (on_topology), which every stage reads */
    bool running, seen_topology;
    bool inbox_pending;           /* enqueued from the data thread itself: poll without waiting */
    uint64_t major, minor;
    /* The topology major that first listed this incarnation (this node id).
     * A request routed by an older view was meant for a previous one - TCP
     * delivers what it queued during a partition once the link returns,
     * seconds later, to the new incarnation - and is refused (NOT_OWNER):
     * executed now, it would overwrite what was acknowledged meanwhile. */
    uint64_t self_since_major;
    uint64_t incarnation;         /* discovery's, of the view we act on (leases are per incarnation) */
    char self_id[64], coordinator[64];
    /* The node ids whose writes this node's stores carry on, oldest first,
     * this incarnation last: the incarnations before it that wrote the data
     * directory it adopted (a grid of one, a whole-grid restart), else only
     * self_id.  A lost record names the owners' ids of then (salvage.c);
     * copies kept under any id of the lineage answer it (wal.c sets it,
     * DIR/incarnations keeps it).  Empty: only self_id. */
    char lineage[OPS_LINEAGE_BYTES];
    uint64_t self_oh; /* dedup_origin_hash(self_id), set with it (ops_origin_hash) */
    peer *peers[DATA_MAX_PEERS];
    size_t n_peers;
    peer *self;
    /* ---- channel.c: batches, replies, the pending table */
    peer **dirty;
    size_t n_dirty;
    fab_replies replies;          /* responses owed to each asker until the flush (chan_reply) */
    fab_pending *pending;         /* requests sent, waiting for their answer: pend * by id */
    fab_frames frames;            /* the data channel's frame checks (key, cap, protocol) and drop counts */

    /* ---- loop.c: the data thread's own */
    /* The cluster metadata (meta/): created here, replaced by an empty one
     * on a rejoin (forget_data); grid/control.c applies what the
     * coordinator sends and every stage reads the owners from it. */
    lattice_meta *meta;
    uint64_t last_sweep;          /* the last sweep: pending deadlines, resends, stalled ops */
    /* giving memory back (give_memory_back): last try, and pages
     * released since malloc's free memory was last returned too;
     * heap_freed: copies went (a recovered copy dropped, kept copies
     * freed, partitions evicted) whose indexes and histories are free
     * heap now, given back at the next round even when no region page
     * was (their pages are reused at once by the rebalance that follows);
     * trim_ms: when malloc's free memory was last given back */
    uint64_t give_back_ms, gave_back_pages, trim_ms;
    bool heap_freed;
    atomic_uint_fast64_t ops_run_here; /* any thread: other ops run to completion on the calling thread */
    atomic_uint_fast64_t log_releases; /* log thread: the times it sent the held replies its fsync freed */
    /* The registration points (above): lattice_grid_attach fills them
     * before the data thread starts; loop.c (and the stages naming a hook)
     * call them.  grid: the grid's state, never dereferenced in ops/. */
    ops_grid_hooks grid_hooks;
    struct lattice_grid *grid;
    fab_kinds kinds;              /* who serves each control kind (ops_on_kind) */
    ops_tick_fn ticks[OPS_MAX_TICKS];
    size_t n_ticks;

    /* ---- issue.c: issue and route */
    uint64_t op_seq;              /* this node's last write sequence (opx.seq) */

    /* ---- primary.c: executing one op on the store (txn.c and issue.c's
     * local reads use it too; freed at destroy by loop.c) */
    exec_scratch scratch;

    /* ---- backup.c: backup apply */
    uint64_t repl_failed;         /* replicated writes this copy could not apply (logged every 1000th) */

    /* ---- sync_wait.c: the full_sync wait */
    uint64_t repl_resent;         /* full_sync replications sent again after a lost connection */
    uint64_t repl_no_cache;       /* full_sync replications a copy answered NO_CACHE (sent again) */
    uint64_t resend_logged_ms;
    uint64_t takeover_major, takeover_meta; /* the view takeover_check last looked at */
    uint64_t takeovers, takeover_keys;      /* partitions taken over with writes to level, and their keys */
    uint64_t levels_asked, level_failed;    /* CTL_LEVEL: keys a copy asked its new primary to rewrite; unanswered */
    uint64_t level_logged_ms;

    /* ---- retry.c: retry and failover */
    opx *retry, *retry_tail;      /* retry list, first in first out */

    /* ---- dedup.c: resend records */
    dedup_entry *dedup;           /* DEDUP_SLOTS, allocated at init (servers) */
    struct txwait *txwaits;       /* operations waiting for a prepared transaction's lock (txlock.c) */
    uint64_t txwaiting;
    struct bwait *bwaits, *bwaits_tail; /* blocking pops waiting for an element (bwait.c), oldest first */
    uint64_t bwaiting;
    bool bwait_busy, bwait_again;       /* bwait_tick runs (a rerun's write asks for another pass) */
    uint64_t txsweep_ms;          /* txlock_sweep's last round */
    struct txsettle *txsettles;   /* orphans being settled (txlock.c) */
    uint64_t txsettled;

    /* ---- clean.c: nothing here; its state is per cache and partition
     * (lattice_meta_cache) and in each waitw */

    /* ---- txn.c: transactions */
    struct txn_kept *txn_kept;    /* results of recent transactions for their resends */
    struct txn_sandbox *txn_sandbox; /* lattice_ops_txn_eval's store (txn.c), made at first use */

    /* ---- wal.c: --data-dir on the operation path */
    struct ops_wal *wal;          /* the log and what waits on it; NULL without */

    /* ---- evict.c: eviction across copies (region_evict set at init by loop.c) */
    bool region_evict;
    struct evict_rec **evq;       /* evictions not yet sent to the copies */
    size_t n_evq, cap_evq;
    struct evict_ctx *evc[LATTICE_META_MAX_CACHES];
    size_t n_evc;

    /* ---- fast.c: reads on the calling thread */
    struct fast_view *fast_view;  /* any thread under rcu_read_lock; written by the data thread (rcu_xchg_pointer) */
    _Atomic uint64_t fast_inc;    /* any thread: the incarnation the published roles were computed under */
    atomic_uint_fast64_t reads_inline; /* any thread: reads answered on the calling thread */
    uint64_t fast_stamp;          /* data thread: the view the words were last computed on */
    bool fast_republish;          /* data thread: a cache went; publish the others again */

    /* ---- channel.c: counters (data thread; read for logs; frames.count[]
     * points at them) */
    uint64_t malformed, oversized, auth_failed, send_failed; /* grid/'s decoders count malformed too */
};

/* ---- channel.c: the bottom - time, sockets, frames, pending table, replies */
/* A copy of q (one block, as chan_req_new_from makes). */
Latdata__Req *chan_req_dup(const Latdata__Req *q);
Latdata__Req *chan_req_new(int kind, const char *cache, const void *key, size_t klen, const void *val,
                           size_t vlen);
/* A request with its own copies of everything (one block; origin NULL = none). */
Latdata__Req *chan_req_new_from(int kind, const char *cache, const void *key, size_t klen, const void *val,
                                size_t vlen, const char *origin);
/* Queues r for p's next flush (one Batch per peer per loop iteration); owns r. */
lattice_status chan_send(lattice_ops *d, peer *p, Latdata__Req *r);
/* Queues a response on the connection o names (value and stats copied / owned). */
void chan_reply(lattice_ops *d, const origin *o, const lattice_op_result *r, Latdata__NodeCacheStats **stats,
                size_t n_stats, bool with_meta);
/* Sends the metadata message, alone, on the accepted connection ident
 * names at the next flush: how the coordinator pushes to a client node,
 * which it cannot dial. */
void chan_push_meta_back(lattice_ops *d, const uint8_t *ident, size_t len);
/* Marks p to carry the metadata message at the next flush. */
void chan_push_meta(lattice_ops *d, peer *p);
void chan_flush(lattice_ops *d);
peer *chan_peer_by_id(lattice_ops *d, const char *id);
peer *chan_peer_by_cid(lattice_ops *d, const char *cid);
peer *chan_peer_new(const lattice_member *m, bool self);
void chan_peer_free(peer *p);
/* The data thread names itself (chan_enqueue then skips the eventfd). */
void chan_enter_thread(lattice_ops *d);
/* One received frame through the frame layer: the checked batch, or NULL
 * (dropped, counted and logged: its connection is to be closed).  Free with
 * chan_batch_free. */
Latdata__Batch *chan_unpack_batch(lattice_ops *d, const uint8_t *msg, size_t len, const uint8_t *mac, size_t mac_len);
/* Counts a dropped frame under reason and logs it at most once a second
 * per reason (fab_dropped). */
void chan_dropped(lattice_ops *d, fab_drop reason, const char *why);
void chan_batch_free(Latdata__Batch *b);
/* A pending request to target, answered by settle (deadline: op_timeout_ms). */
pend *chan_pend_new(lattice_ops *d, pend_settle_fn settle, const peer *target);
pend *chan_pend_take(lattice_ops *d, uint64_t id);
/* p gives up on its answer at deadline_ms instead (UINT64_MAX: only when
 * its target leaves the topology). */
void chan_pend_deadline(lattice_ops *d, pend *p, uint64_t deadline_ms);
/* Settles (rs NULL) every pending request whose target left the topology or
 * whose deadline passed - or all of them. */
void chan_release_pending(lattice_ops *d, bool all);
/* Any thread: hands o to the data thread (chan_enqueue = chan_push, then
 * chan_wake; a submit of several ops pushes each and wakes once). */
lattice_status chan_enqueue(lattice_ops *d, opx *o);
/* Whether the calling thread acts as the data thread now. */
bool chan_on_data_thread(const lattice_ops *d);
/* A submit of n ops run to completion on the calling thread (an RCU
 * registered one) when the data thread is in its poll: true when it took
 * them (each ends as on the data thread - answered, sent, or retried);
 * false, nothing done, when the data thread is busy: hand them over. */
bool loop_run_here(lattice_ops *d, opx **all, size_t n);

/* pool.c: an opx of `bytes` (header, key and value) from this thread's pool
 * (up to OPX_POOL_BLOCK; larger ones are malloc'd), and its release from
 * any thread.  opx_alloc sets o->pool; the caller must keep it. */
#define OPX_POOL_BLOCK 512
#define OPX_POOL_KEEP 256
opx *opx_alloc(size_t bytes);
void opx_free(opx *o);
bool loop_release_durable(void *arg); /* persist's on_durable hook: the log thread sends the replies it freed */
lattice_status chan_push(lattice_ops *d, opx *o);
lattice_status chan_wake(lattice_ops *d);
/* The acknowledgement: a local op's callback (o freed), or a reply. */
void chan_complete_local(lattice_ops *d, opx *o, const lattice_op_result *r);
void chan_complete(lattice_ops *d, const origin *org, const lattice_op_result *r);

/* ---- dedup.c: results of recent writes by (origin, op sequence) */
uint64_t dedup_origin_hash(const char *node_id);
/* dedup_origin_hash, without hashing this node's own id again. */
uint64_t ops_origin_hash(const lattice_ops *d, const char *node_id);
void dedup_put(lattice_ops *d, uint64_t origin, uint64_t seq, const lattice_op_result *r);
const dedup_entry *dedup_get(const lattice_ops *d, uint64_t origin, uint64_t seq);

/* ---- retry.c: retry and failover re-routing */
/* Again after RETRY_MS (another owner may serve by then), or fail at the
 * deadline: TIMEOUT, or why when it is final (PARTITION_LOST, NO_CACHE). */
void retry_later(lattice_ops *d, opx *o, lattice_status why);
/* The settle of an issued op's request (P_OP): an answer completes it,
 * NOT_OWNER/AGAIN/STOPPED or no answer re-route it. */
void retry_settle_op(lattice_ops *d, pend *p, const Latdata__Resp *rs);
/* Takes the ops due for another try (all when stopping); the caller routes them. */
opx *retry_take_due(lattice_ops *d, uint64_t now);

/* ---- sync_wait.c: a full_sync write waiting for its copies */
/* A wait for a write of c, counted in c->writes_in_flight until it ends. */
waitw *sync_wait_new(lattice_meta_cache *c, const origin *org, const lattice_op_result *r);
/* One more copy to wait for: its request's settle is sync_wait_settle. */
void sync_wait_add(lattice_ops *d, waitw *w, pend *p);
void sync_wait_settle(lattice_ops *d, pend *p, const Latdata__Resp *rs);
/* Sends again every full_sync replication whose target's connection may
 * have lost it (closed, or refused a frame, since it was sent). */
void sync_wait_resend(lattice_ops *d);
void sync_wait_release(lattice_ops *d, waitw *w);

/* CTL_CLEAN from a primary: its commit watermark of one partition (backup.c). */
void backup_clean(lattice_ops *d, const Latdata__Req *q);

/* ---- gate.c: may this node serve now; is a peer's request meant for it */
/* May this node serve an operation of c now: it holds its lease (discovery)
 * and no base switch has frozen the cache. */
bool ops_serving(lattice_ops *d, const lattice_meta_cache *c);
/* True when this server reaches no strict majority of the baseline (its
 * lease is gone too); *num (may be NULL) gets LATTICE_OPS_QUORUM_NUM. */
bool ops_no_quorum(lattice_ops *d, int64_t *num);
/* The same two with the lease as ops_lease read it a moment before: the
 * route of one op reads the clock once, not once per check. */
bool ops_lease(lattice_ops *d);
/* Whether this node's grid holds a majority of its baseline (its view, not
 * the lease: a lease lapses for a moment; a cut-off side has none at all).
 * True without discovery and on a client. */
bool ops_quorum(lattice_ops *d);
bool ops_serving_leased(lattice_ops *d, const lattice_meta_cache *c, bool lease);
bool ops_no_quorum_leased(lattice_ops *d, bool lease, int64_t *num);
/* What a node that is not serving answers: NO_QUORUM (final, *num set) or
 * AGAIN (retried: a takeover, a pause, a base switch). */
lattice_status ops_refusal(lattice_ops *d, int64_t *num);
/* A request or replicated write its sender routed by a view older than this
 * incarnation (self_since_major): meant for a previous one. */
bool ops_before_incarnation(const lattice_ops *d, uint64_t topo_major);
/* A peer's request meant for another incarnation of this process: the node
 * id its frame names is not ours; a frame that names none (an older peer)
 * is judged by the view it was routed by (ops_before_incarnation). */
bool ops_not_meant_here(const lattice_ops *d, const origin *o, uint64_t topo_major);
/* Whom a peer's frame of requests names (Batch.to): this incarnation, another
 * (TCP delivering what it queued for the process before it rejoined), or
 * nobody. */
addressed_to ops_addressed(const lattice_ops *d, const char *to);

/* ---- txlock.c: the locks of transactions prepared across partitions ----
 * Read off partition p's prepared rows (docs/TRANSACTIONS.md).  The table
 * (NULL: p holds none); *unknown when it could not be read (no memory):
 * then treat every key of p as locked. */
struct lt_txp_locks;
struct lt_txp_locks *txlock_table(lattice_meta_cache *c, uint32_t p, bool *unknown);
/* True when a prepared transaction holds key against this access: a write
 * waits for any of its locks, a read only for a write lock. */
bool txlock_blocks(lattice_meta_cache *c, uint32_t p, const void *key, size_t key_len, bool write);
/* The data thread changed one prepared row of p itself, from reserved
 * generation g0: a PREPARE wrote `added`'s row, or a FINISH removed the
 * row of `released`.  A table current at g0, when nothing else changed
 * p's rows, follows the change instead of being read off the rows again. */
struct lt_txp_rec;
struct lt_txid;
void txlock_wrote(lattice_meta_cache *c, uint32_t p, uint64_t g0, const struct lt_txp_rec *added,
                  const struct lt_txid *released);
void txlock_cache_gone(lattice_meta_cache *c);
/* Parks an operation on a locked key until p's prepared rows or the view
 * change (polled by txlock_tick each tick); txlock_stop ends every waiter
 * with STOPPED.  NOMEM. */
lattice_status txlock_park(lattice_ops *d, lattice_meta_cache *c, const exec_in *in, const origin *org,
                           const char *origin_id, uint64_t seq);
/* The same, run again at due_ms (lt_mono_ms) at the latest. */
lattice_status txlock_park_until(lattice_ops *d, lattice_meta_cache *c, const exec_in *in, const origin *org,
                                 const char *origin_id, uint64_t seq, uint64_t due_ms);
/* Wait-die's "die" for prepare (id_node, id_seq) in p, with patience: true when it dies
 * now; false and *due when it waits until then first (TXLOCK_PATIENCE_MS
 * from its first meeting with an older holder here).  _end forgets it
 * (granted, or another verdict). */
bool txlock_patience(lattice_meta_cache *c, uint32_t p, uint64_t id_node, uint64_t id_seq, uint64_t now, uint64_t *due);
void txlock_patience_end(lattice_meta_cache *c, uint32_t p, uint64_t id_node, uint64_t id_seq);
void txlock_tick(lattice_ops *d);
void txlock_stop(lattice_ops *d);

/* bwait.c: a request whose blocking step (lattice/txn.h, LATTICE_TXN_BLOCK)
 * found nothing to pop waits, whole, until its partition's counter or the
 * view moves or its deadline (in->ttl_ms, wall clock) passes, then runs
 * again (primary_rerun); oldest first.  NOMEM.  bwait_tick after every
 * round of the loop; bwait_stop answers every waiter STOPPED. */
lattice_status bwait_park(lattice_ops *d, lattice_meta_cache *c, const exec_in *in, const origin *org,
                          const char *origin_id, uint64_t seq);
void bwait_tick(lattice_ops *d);
void bwait_stop(lattice_ops *d);
/* Settles the transactions prepared in partitions this node leads whose
 * deadline passed (their coordinator died, was cut off or paused): an abort
 * decision at the home partition if none stands, then the row finished by
 * the decision that does.  Each tick; acts at most every TXLOCK_SWEEP_MS. */
void txlock_sweep(lattice_ops *d, uint64_t now);

/* ---- clean.c: commit watermarks, so every read is linearizable (full_sync) */
/* Primary: the write w (version, key) is in flight to the copies. */
void clean_begin(lattice_ops *d, lattice_meta_cache *c, waitw *w, uint32_t partition, uint64_t version,
                 const void *key, size_t key_len);
/* Primary: w was acknowledged (or failed); advances the watermark and tells
 * the copies.  Returns the reads that waited for w (the caller runs and
 * frees them). */
deferred_read *clean_end(lattice_ops *d, waitw *w);
/* Primary: the write in flight on this key a read must wait for, or NULL. */
waitw *clean_pending_write(lattice_ops *d, lattice_meta_cache *c, uint32_t partition, const void *key,
                           size_t key_len);
/* Primary: park a read until w is done (copies in and org).  A write's
 * resend parked there (clean_defer_write) keeps its value and resend
 * record, so it reruns as the same write. */
lattice_status clean_defer_read(waitw *w, const exec_in *in, const origin *org);
/* A copy of an operation to run later (key and value copied): NULL on
 * NOMEM.  primary_rerun runs it here if this node still leads its
 * partition, or sends it back to be routed again. */
deferred_read *deferred_new(const exec_in *in, const origin *org, const char *origin_id, uint64_t seq);
void primary_rerun(lattice_ops *d, lattice_meta_cache *c, deferred_read *rd);
/* exec_in.flags of a blocking step bwait.c runs again after it waited
 * (never on the wire, above every LATTICE_OP_ flag): woken, it passes over
 * keys of another type instead of answering WRONGTYPE, as Redis serves a
 * blocked client only from a key of its type (txn.c, types/list.c). */
#define OPS_WOKEN (1u << 31)
lattice_status clean_defer_write(waitw *w, const exec_in *in, const origin *org, const char *origin_id,
                                 uint64_t seq);
/* Primary: this node serves the partition as primary now.  True, once,
 * when it was a copy that applied writes above the last watermark it heard
 * from its old primary: those (counters in (*from, counter]) may be missing
 * on the other copies (takeover.c), which it sends there again as writes
 * of this primary (clean_begin makes the role primary). */
bool clean_take_over(lattice_meta_cache *c, uint32_t partition, uint64_t *from);
/* Primary: the partition's commit watermark (versions <= it are acknowledged). */
uint64_t clean_committed(const lattice_meta_cache *c, uint32_t partition);
/* Copy: a replicated write of `version` was applied; `committed` is the
 * watermark its primary sent along (or in CTL_CLEAN). */
/* A replicate or watermark from `sender` (its primary) reached this copy:
 * when it is another primary than before, the copy's marks are capped at
 * its last watermark if it applied anything above it (clean.c) - and true,
 * with that watermark in *from: the copy holds writes of its old primary
 * the new one may not have (takeover_ask levels them). */
bool clean_note_sender(lattice_meta_cache *c, uint32_t partition, const char *sender, uint64_t *from);
void clean_note_applied(lattice_meta_cache *c, uint32_t partition, uint64_t version);
void clean_note_committed(lattice_meta_cache *c, uint32_t partition, uint64_t committed);

/* takeover.c: after the view changed (a topology, a metadata), each
 * partition this node now leads after it was its copy is brought level on
 * every copy before anything of it counts as acknowledged. */
void takeover_check(lattice_ops *d);
/* The other half (a copy): sender became the primary of partition while
 * this copy holds writes above watermark `from` it may lack; each key those
 * touched is sent to it as CTL_LEVEL, which rewrites the key's state there
 * under a new version on every copy.  Until each is answered this copy
 * answers no read of the partition itself (clean_level_begin / _end). */
void takeover_ask(lattice_ops *d, lattice_meta_cache *c, uint32_t partition, uint64_t from, const char *sender);
void takeover_level_serve(void *d, const Latdata__Req *q, const void *from);
void clean_level_begin(lattice_meta_cache *c, uint32_t partition);
void clean_level_end(lattice_meta_cache *c, uint32_t partition);
/* Copy: may a read be answered from this copy (no applied write that its
 * primary has not acknowledged)? */
bool clean_copy_is_clean(const lattice_meta_cache *c, uint32_t partition);
/* The partition's mark for a delta rebalance (docs/CONSISTENCY.md): a counter
 * up to which every copy applied every write - the primary's watermark, or
 * the newest one a copy heard, by the role it had last.  false for caches
 * without watermarks (not full_sync) or a partition it had no role in. */
bool clean_mark(const lattice_meta_cache *c, uint32_t partition, uint64_t *mark);
/* c's partition p as a delta base from this copy: the commit watermark it
 * knows (clean_mark) capped by the counter up to which it applied every
 * write (its history's contig); false without one (not full_sync, history
 * off or not valid). */
bool clean_delta_mark(const lattice_meta_cache *c, uint32_t p, uint64_t *mark);
/* The cache is going away: forget its in-flight lists (waits keep running). */
void clean_cache_gone(lattice_meta_cache *c);

/* ---- fast.c: reads on the calling thread (docs/CONSISTENCY.md) */
typedef struct fast_cache fast_cache;
typedef struct fast_view fast_view;
/* Data thread, before any change of partition's rows of c and whenever it
 * may have become readable: readers stop answering it until the next settle. */
void fast_mark(lattice_meta_cache *c, uint32_t partition);
/* Data thread, before every flush: publishes what changed since the last one. */
void fast_settle(lattice_ops *d);
/* May a read of p be answered from this node's store now (the data thread's view)? */
bool fast_readable(lattice_ops *d, lattice_meta_cache *c, uint32_t p);
/* The cache goes (cache_gone): out of the view, after a grace period freed. */
void fast_cache_gone(lattice_ops *d, lattice_meta_cache *c);
void fast_free(lattice_ops *d);
/* One read answered on the calling thread: its result, whose value lies in
 * buf or *heap (the caller lt_free()s heap after using r). */
#define FAST_BATCH 16
typedef struct fast_slot {
    lattice_op_result r;
    void *heap;
    bool done;
    char buf[1024];
} fast_slot;
/* Any registered RCU thread: answers what it can of ops[0..n) (n <= FAST_BATCH)
 * into out[i] (done set) and returns how many; the rest the data thread must
 * do (nothing counted for them). */
size_t fast_read_n(lattice_ops *d, const lattice_op *ops, size_t n, fast_slot *out);
/* fast_read_n of one op. */
bool fast_read(lattice_ops *d, const lattice_op *op, fast_slot *out);
/* The reads fast_read answered for c (added to the cache's stats). */
void fast_stats(const lattice_meta_cache *c, uint64_t *reads, uint64_t *hits, uint64_t *misses);

/* ---- evict.c: eviction across copies (--region-policy evict) */
/* Hooks every cache's store that has none yet (after the caches changed). */
void evict_attach(lattice_ops *d);
/* Sends the evictions recorded since the last call to the copies. */
void evict_flush(lattice_ops *d);
/* Entries this node evicted from c as primary. */
uint64_t evict_count(lattice_ops *d, const lattice_meta_cache *c);
void evict_cache_gone(lattice_ops *d, lattice_meta_cache *c);
/* Evicts, as primary, at least want entries (page by page: possibly more)
 * of partitions this node leads and copy_id holds a copy of - never c's key
 * (partition, key) - and records them for evict_flush; returns how many
 * went (0: none may go). */
size_t evict_for_copy(lattice_ops *d, lattice_meta_cache *c, const char *copy_id, size_t want, uint32_t partition,
                      const void *key, size_t key_len);
void evict_free(lattice_ops *d);

/* ---- primary.c: primary execution with de-duplication */
bool ops_is_read(int kind);
lattice_status primary_check_limits(const lattice_meta_cache *c, const lattice_op *op);
/* Executes as primary, forwards the write to every other owner and
 * acknowledges per the cache's sync (origin_id/seq name it for resends). */
void primary_execute(lattice_ops *d, lattice_meta_cache *c, const exec_in *in, const origin *org, const char *origin_id,
                     uint64_t seq);
/* The key was evicted here (evict.c): remove it on every other copy with the
 * partition's next counter, tracked as a full_sync write with no issuer. */
void primary_replicate_removal(lattice_ops *d, lattice_meta_cache *c, uint32_t partition, const void *key,
                               size_t key_len);
/* Sends a write (kind CTL_REPLICATE or CTL_REPLICATE_TXN, payload in repl)
 * to every other serving owner, then every MOVING owner; with w, each answer
 * releases one share of it. */
void primary_send_copies(lattice_ops *d, lattice_meta_cache *c, int kind, uint32_t partition, const void *key,
                         size_t key_len, const repl_out *repl, const char *origin_id, uint64_t seq,
                         const lattice_op_result *r, waitw *w);
/* A full_sync write's wait, in the partition's in-flight list from `version`
 * on (clean.c); it owns undo from then on.  NULL: NOMEM (undo not taken). */
waitw *primary_wait_begin(lattice_ops *d, lattice_meta_cache *c, const origin *org, const lattice_op_result *r,
                          bool (*on_full)(lattice_ops *d, waitw *w), void *undo, void (*after)(lattice_ops *d, waitw *w),
                          uint32_t partition, uint64_t version, const void *key, size_t key_len);
/* An undo's start (a copy had no room): the wait will end with REGION_FULL,
 * a second refusal undoes no more (round counts them).  The cache to undo
 * in, or NULL when it is gone. */
lattice_meta_cache *primary_undo_begin(waitw *w, int *round);
/* A copy had no room for a full_sync write: what this primary's store says
 * to do with it, from the key's state here (its write had version).
 * ROOM_EVICT: the key still holds that write - evict for the copy and send
 * it again; ROOM_SUPERSEDED: a newer write of the key followed it to the
 * copy - nothing to send; ROOM_REMOVE: the key is gone here (removed or
 * evicted since, or expired) - send the copy a remove at that version
 * instead, which needs no room; ROOM_NONE: cannot tell (an error). */
enum { ROOM_NONE, ROOM_EVICT, ROOM_SUPERSEDED, ROOM_REMOVE };
int primary_room_action(lattice_meta_cache *c, uint32_t partition, const void *key, size_t key_len,
                        uint64_t version);
/* sync_wait_settle, on REGION_FULL from p's copy: makes room there and
 * sends the write again on a new pending request holding p's share (true),
 * or answers for it (true, *answered set: the share goes, not full); false
 * when it cannot (rounds spent, nothing to evict, not the primary any
 * more): the write is refused and undone as before. */
bool primary_room_for_copy(lattice_ops *d, pend *p, bool *answered);
/* The end of a full_sync write's wait: its parked reads run, its undo record goes. */
void primary_after_write(lattice_ops *d, waitw *w);
/* A request that arrived on our data port for a partition we should be primary of. */
void primary_serve(lattice_ops *d, const Latdata__Req *q, const origin *org);

/* ---- txn.c: transactions (LATTICE_OP_TXN, lattice/txn.h) */
/* The primary runs in (kind TXN) as primary_execute does a write: resends,
 * full_sync wait, clean reads of every key, undo on a copy's REGION_FULL. */
void txn_execute(lattice_ops *d, lattice_meta_cache *c, const exec_in *in, const origin *org, const char *origin_id,
                 uint64_t seq);
/* A copy applies q (CTL_REPLICATE_TXN): every write, in order; keeps the
 * result for a resend.  Not OK: a write failed (the primary undoes all). */
lattice_status txn_apply_copy(lattice_ops *d, lattice_meta_cache *c, const Latdata__Req *q);
void txn_free(lattice_ops *d);
/* The bytes of the results kept for resends (at most LATTICE_TXN_RESULTS_KEPT_BYTES). */
size_t txn_kept_bytes(const lattice_ops *d);
/* The execution alone, on c's store (no network, no wait; unit tests): the
 * result and the write list a copy would apply (both lt_malloc'd, the
 * caller frees them). */
typedef struct txn_local_out {
    void *result, *writes;
    size_t result_len, writes_len;
    uint32_t n_writes;
    bool aborted;
} txn_local_out;
lattice_status txn_run_local(lattice_meta_cache *c, uint32_t partition, const void *req, size_t len, uint64_t epoch,
                             exec_scratch *s, txn_local_out *out);
lattice_status txn_apply_writes(lattice_meta_cache *c, uint32_t partition, const void *writes, size_t len);
/* lattice_ops_txn_eval (ops.h) on the private store *sb (made at first
 * use; txn_sandbox_free frees it) under cfg: unit-tested without a node. */
struct txn_sandbox;
lattice_status txn_eval(struct txn_sandbox **sb, const lattice_cache_config *cfg, const lattice_ops_txn_entry *e,
                        size_t n, const void *req, size_t req_len, void **result, size_t *result_len,
                        lattice_ops_txn_final_fn fn, void *arg);
void txn_sandbox_free(struct txn_sandbox **sb);

/* ---- backup.c: backup apply */
void backup_apply(lattice_ops *d, const Latdata__Req *q, const origin *org);

/* ---- walk.c: the partition-addressed kinds (WALK, CLEAR) at the primary */
bool walk_is_kind(int kind);
/* Runs in->kind on in->partition as its primary and answers org. */
void walk_execute(lattice_ops *d, lattice_meta_cache *c, const exec_in *in, const origin *org);

/* ---- issue.c: issue and route */
void issue_route(lattice_ops *d, opx *o);
/* An operation the data thread itself issues (op copied): routed now, fn
 * called on the data thread with its answer.  NOMEM. */
lattice_status issue_here(lattice_ops *d, const lattice_op *op, lattice_op_fn fn, void *arg);

/* wal.c: persistence (--data-dir) on the operation path */
lattice_status wal_init(lattice_ops *d, const char *dir, const char *mode, int checkpoint_mb);
void wal_free(lattice_ops *d);
void wal_attach(lattice_ops *d);
/* The data directory (NULL without --data-dir); whether recovered copies
 * wait for their fate (not adopted or dropped yet). */
struct lt_persist *wal_persist(const lattice_ops *d);
/* A batch of ops begins / ends (drain_queue, loop_run_here): with `group`
 * the log's batch takes the whole round (lt_persist_hold). */
struct lt_persist *wal_round_begin(lattice_ops *d); /* NULL: no log */
void wal_round_end(struct lt_persist *p);
bool wal_has_recovered(const lattice_ops *d);
void wal_cache_gone(lattice_ops *d, lattice_meta_cache *c);
bool wal_refuses(lattice_ops *d);
/* Every record appended so far is durable (true without --data-dir). */
bool wal_durable(lattice_ops *d);
/* Holds r until the log is durable past what was appended so far (true),
 * or false when it may go now.  Without memory to hold it, it waits for
 * the log here and sends it (true): a reply never goes before its records
 * are durable. */
bool wal_hold(lattice_ops *d, const origin *org, const lattice_op_result *r);
/* Replies that waited in wal_hold because holding them found no memory. */
uint64_t wal_nomem_waits(const lattice_ops *d);
void wal_release(lattice_ops *d);
void wal_tick(lattice_ops *d);
void wal_stop(lattice_ops *d);
/* chan_complete without the wait for the log (what wal_release sends). */
void chan_complete_now(lattice_ops *d, const origin *org, const lattice_op_result *r);

#endif
