/*
 * Internal to node/: the data thread's state (data.c: loop, sockets,
 * pending table; route.c: routing, serving, replication; meta.c: cluster
 * metadata, caches, stats).  Everything here belongs to the data thread,
 * except the fields marked "any thread".
 */
#ifndef LATTICE_NODE_DATA_INT_H
#define LATTICE_NODE_DATA_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <urcu/wfcqueue.h>

#include "cache.pb-c.h"
#include "caches_int.h"
#include "lattice/clock.h"

#define DATA_MAX_PEERS 256
#define META_PULL_INTERVAL_MS 1000
#define NO_CACHE_WAIT_MS 300         /* an unknown cache: how long to pull and look again */
#define FREEZE_MS 2000               /* longest a base check may hold writes back */
#define STATS_FREEZE 1u              /* CTL_STATS flag: freeze writes before counting */

typedef struct peer {
    char id[64], cid[160], addr[160];
    bool self, server, mark, dirty, push_meta;
    void *dealer;                 /* servers other than self */
    Latdata__Req **out;           /* requests to send at the next flush */
    size_t n_out, cap_out;
} peer;

typedef struct opx opx;

/* Where a primary's result goes: a local op, or a ROUTER identity + request id. */
typedef struct origin {
    opx *local;
    uint8_t ident[256];
    size_t ident_len;
    uint64_t rid;
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
    uint64_t no_cache_until;      /* unknown cache: pull metadata and retry until then */
    struct opx *rnext;            /* retry list */
    int call;                     /* CALL_* for internal calls, else 0 */
    char data[];
};

/* A full_sync write waiting for its backups. */
typedef struct waitw {
    int remaining;
    origin org;
    lattice_op_result res;
    void *value;
} waitw;

/* A request sent to every server (stats, size, base check). */
typedef struct bcast {
    int remaining;
    int kind;                     /* CTL_STATS, CTL_PART_SIZE or CTL_DIGEST */
    opx *op;                      /* caller (NULL: the coordinator's base check) */
    int64_t sum;
    stats_result *stats;
    struct digest_result *digests; /* CTL_DIGEST (node/rebal.c) */
} bcast;

enum { P_OP = 1, P_REPL = 2, P_BCAST = 3, P_CTL = 4 };

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

typedef struct pend {
    uint64_t id;
    struct pend *hnext, *next, *prev;
    int type;
    char target[64];              /* node id the request went to */
    opx *op;                      /* P_OP, P_CTL (may be NULL) */
    waitw *w;                     /* P_REPL */
    bcast *b;                     /* P_BCAST */
    int ctl;                      /* P_CTL: CTL_* */
    uint64_t deadline_ms;         /* P_BCAST, P_CTL: give up on the answer then (P_OP uses its op's) */
} pend;

typedef struct reply_box {
    uint8_t ident[256];
    size_t ident_len;
    Latdata__Resp **out;
    size_t n, cap;
    bool with_meta;
} reply_box;

struct lattice_data {
    /* set at init, read-only after */
    bool client, have_key;
    uint8_t key[32];
    int op_timeout_ms, region_mb;
    char attr[200];
    lattice_cache_config local_cfgs[LATTICE_MAX_CACHES];
    size_t n_local_cfgs;
    void *zctx, *router;
    int efd;
    lattice_region *region;
    struct lattice_discovery *disc;
    pthread_t thread;
    bool thread_started;

    /* any thread */
    struct cds_wfcq_head qhead;
    struct cds_wfcq_tail qtail;
    atomic_bool run_flag, accepting;

    /* data thread */
    bool running, seen_topology;
    bool inbox_pending;           /* enqueued from the data thread itself: poll without waiting */
    uint64_t major, minor;
    char self_id[64], coordinator[64];
    peer *peers[DATA_MAX_PEERS];
    size_t n_peers;
    peer *self;
    peer **dirty;
    size_t n_dirty;
    reply_box *boxes;
    size_t n_boxes, cap_boxes;
    pend **buckets;
    pend *all;
    size_t n_pending;
    uint64_t next_id;
    opx *retry;
    exec_scratch scratch;
    dedup_entry *dedup;           /* DEDUP_SLOTS, allocated at init (servers) */
    uint64_t op_seq;

    /* cluster metadata */
    bool meta_valid, creates_sent, base_check_running;
    uint64_t meta_version;
    cache_def *caches[LATTICE_MAX_CACHES];
    size_t n_caches;
    Latdata__Meta *meta_msg;      /* packed form of the above, for replies/pushes */
    uint64_t last_meta_pull, last_sweep;
    uint64_t checked_servers;     /* hash of the live server set the last base check saw */
    char (*live_buf)[240];        /* meta.c scratch: live servers as base entries (callers) */
    char (*check_buf)[240];       /* meta.c scratch for base_is_live_set only */

    struct rebal_sup *rb_sups;    /* supplier sessions (node/rebal.c) */

    /* counters (data thread; read for logs) */
    uint64_t malformed, oversized, auth_failed, send_failed, repl_failed;
};

Latdata__Req *data_req_new(int kind, const char *cache, const void *key, size_t klen, const void *val,
                           size_t vlen);
Latdata__Req *data_req_new_from(int kind, const char *cache, const void *key, size_t klen, const void *val,
                                size_t vlen, const char *origin);
lattice_status data_send_req(lattice_data *d, peer *p, Latdata__Req *r);
void data_reply(lattice_data *d, const origin *o, const lattice_op_result *r, Latdata__NodeCacheStats **stats,
                size_t n_stats, bool with_meta);
void data_flush(lattice_data *d);
peer *data_peer_by_id(lattice_data *d, const char *id);
peer *data_peer_by_cid(lattice_data *d, const char *cid);
void data_complete_local(lattice_data *d, opx *o, const lattice_op_result *r);
void data_complete(lattice_data *d, const origin *org, const lattice_op_result *r);
void data_opx_free(opx *o);
void data_retry(lattice_data *d, opx *o, lattice_status why);
void data_wait_release(lattice_data *d, waitw *w);
lattice_status data_enqueue(lattice_data *d, opx *o);
void data_free(lattice_data *d);
/* pend_new for route.c/meta.c */
pend *data_pend_new(lattice_data *d, int type, const peer *target);

/* route.c */
uint64_t data_origin_hash(const char *node_id);
void data_dedup_put(lattice_data *d, uint64_t origin, uint64_t seq, const lattice_op_result *r);
const dedup_entry *data_dedup_get(const lattice_data *d, uint64_t origin, uint64_t seq);
void data_route(lattice_data *d, opx *o);
void data_serve(lattice_data *d, const Latdata__Req *r, const origin *o);

/* meta.c */
cache_def *data_cache(lattice_data *d, const char *name);
void data_meta_apply(lattice_data *d, const Latdata__Meta *m);
void data_meta_on_topology(lattice_data *d);
void data_meta_tick(lattice_data *d, uint64_t now);
void data_caches_free(lattice_data *d);
void data_run_call(lattice_data *d, opx *o);
void data_ctl_response(lattice_data *d, pend *p, const Latdata__Resp *rs);
void data_bcast_part(lattice_data *d, bcast *b, const Latdata__Resp *rs);
void data_serve_ctl(lattice_data *d, const Latdata__Req *r, const origin *o);
bool data_is_coordinator(const lattice_data *d);
/* True while a base check holds this cache's writes back. */
bool data_cache_frozen(const cache_def *c);
void data_stats_result_free(stats_result *sr);

#endif
