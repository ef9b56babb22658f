/*
 * Internal to the RESP endpoint (resp/respd*.c).  Ownership rules:
 *   - a conn, its parser, read buffer and output buffer belong to its IO
 *     thread alone;
 *   - a batch is filled by the IO thread, then (after lattice_op_submit)
 *     its results are written only by the data thread's callbacks until the
 *     last one pushes it to the IO thread's queue; from then on the IO
 *     thread owns it again.  `remaining` is the hand-over counter.
 */
#ifndef LATTICE_RESP_RESPD_INT_H
#define LATTICE_RESP_RESPD_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <urcu/wfcqueue.h>

#include "lattice/ops.h"
#include "lattice/txn.h"
#include "resp.h"
#include "resp_codec.h"

#define RBUF_SIZE (64 * 1024)
#define BATCH_MAX_CMDS 1024          /* commands of one submit; the rest waits */
#define BATCH_SPARE 64               /* emptied batches an IO thread keeps for reuse (respd.c) */
#define BATCH_KEEP_ENTS 256          /* ... only with arrays of at most this many entries */
#define BATCH_KEEP_BYTES (64 * 1024) /* ... and arenas of at most this many bytes */
#define SLOTS_CACHE_MS 250           /* a CLUSTER view is reused this long */
#define CACHE_NAME_MAX 64            /* bytes of a cache name (docs/CACHES.md) */
#define AWARE_SLOTS 32               /* distinct served slots that mark a connection cluster-aware */

/* Whether a connection routes by the slot map (docs/RESP.md, "Redirection"):
 * AWARE_YES connections get MOVED for a key this node does not serve,
 * the others are proxied. */
enum { AWARE_LEARNING = 0, AWARE_YES = 1, AWARE_NO = 2 };

struct io_thread;
struct respd_view;
struct respd_xreq;
struct respd_mon;

typedef struct conn {
    int fd;
    struct io_thread *io;
    struct conn *prev, *next;         /* io->conns */
    lattice_resp_parser *parser;
    lattice_resp_out *out;
    char *rbuf;                       /* bytes read, parsed from roff to rlen */
    size_t roff, rlen;
    bool in_flight;                   /* a batch is out: read nothing more */
    bool closing;                     /* close once the output is written */
    bool dead;                        /* fd closed; free when the batch returns */
    bool authed;
    bool want_out;                    /* EPOLLOUT armed */
    uint32_t armed_ev;                /* the events epoll has for it (arm skips an unchanged MOD) */
    bool hold_in;                     /* bytes came while a batch was out: EPOLLIN off until it returns (arm) */
    bool blocked;                     /* its batch out holds a blocking pop: an EOF meanwhile closes it at once */
    uint8_t aware;                    /* AWARE_* */
    uint8_t n_seen;                   /* AWARE_LEARNING: distinct slots in seen[] */
    bool readonly;                    /* READONLY (until READWRITE / RESET): replica reads wanted */
    /* CLIENT REPLY: off drops every reply; skip drops the current command's,
     * skip_next (CLIENT REPLY SKIP) becomes skip for the next command. */
    bool reply_off, reply_skip, reply_skip_next;
    uint16_t seen[AWARE_SLOTS];
    /* Slots whose replica read here was answered MOVED once (a bit per
     * slot, NULL until the first), valid for demotion generation told_gen
     * (respd_misrouted, docs/RESP.md "Redirection"). */
    uint8_t *told;
    uint32_t told_gen;
    long long id;
    uint64_t last_ms;
    uint64_t since_ms;                /* accepted (CLIENT INFO age) */
    const char *last_cmd;             /* CLIENT LIST cmd=: the table's name of the last command, NULL before */
    struct respd_mon *mon;            /* MONITOR: this connection's feed (respd_intro.c) */
    char name[128];
    char addr[64];
    struct respd_tx *tx;              /* MULTI / WATCH state (respd_tx.c); NULL: none */
} conn;

/* One command of a batch and where its ops are. */
typedef struct ent {
    uint16_t cmd;                     /* lattice_resp_cmd_id */
    uint16_t sflags;                  /* SET/EXPIRE option flags */
    bool mute;                        /* sent under CLIENT REPLY OFF/SKIP: no reply */
    bool later;                       /* queued in MULTI, run at EXEC in its place: argv packed at arena + first, n bytes (respd_tx.c) */
    bool across;                      /* its ops wrapped as one txn op across partitions (respd_tx_wrap_across) */
    bool blocking;                    /* a blocking pop waiting at the primary (respd_tx.c): counted in n_blocked */
    uint32_t first, n;                /* ops [first, first+n) */
    int64_t when_ms;                  /* conditional EXPIRE: the new deadline; ranges: start */
    int64_t arg2;                     /* ranges: end; GETBIT: the offset */
    uint32_t slow;                    /* SLOWLOG: its argv in batch->slow from slow - 1; 0 = none kept */
    struct walker *walk;              /* KEYS, RANDOMKEY, FLUSH*: its walk (respd_walk.c) */
    struct batch *sub;                /* EXEC: the queued commands (owned; respd_tx.c) */
} ent;
#define ENT_ERROR 0                   /* ent.cmd of an error reply kept in order (arena bytes) */

typedef struct opres {
    lattice_status status;
    unsigned flags;
    int64_t num;
    size_t voff, vlen;                /* value in batch->vals */
    bool has_value;
    bool cond_expire;                 /* TTL read of EXPIRE NX/XX/GT/LT: phase 2 follows */
    bool walk;                        /* the first op of a walk: respd_walk_first goes on */
    uint32_t ent;                     /* index of its entry */
} opres;

typedef struct batch {
    struct cds_wfcq_node qnode;
    conn *c;
    struct lattice_respd *r;
    ent *ents;
    size_t n_ents, cap_ents;
    lattice_op *ops;
    opres *res;
    size_t n_ops, cap_ops, cap_res;
    char *arena;                      /* keys and values copied from the parser */
    size_t arena_len, arena_cap;
    char *vals;                       /* result values (data thread) */
    size_t vals_len, vals_cap;
    bool vals_nomem;
    uint64_t keybits[64];             /* hashes of the keys its entries touch (a 4096-bit filter) */
    atomic_size_t remaining;
    bool sealed;                      /* holds a keyspace walk, or ends with WATCH / EXEC: nothing more joins it */
    bool queue;                       /* MULTI's queue: its ops become the subs of EXEC's transaction (respd_tx.c) */
    uint64_t start_us;                /* when its first command was parsed (commandstats) */
    struct batch *round_next;         /* io->round: batches of this epoll round */
    struct respd_xreq *xreq;          /* CLIENT LIST/KILL: legs out to the IO threads instead of ops */
    char *slow;                       /* SLOWLOG: packed argv of its key commands */
    size_t slow_len, slow_cap;
} batch;

typedef struct io_thread {
    struct lattice_respd *r;
    int index;
    int lfd;                          /* listening socket (SO_REUSEPORT) */
    int efd;                          /* eventfd: batches returned, or stop */
    int ep;
    uint64_t now_ms;                  /* lt_mono_ms() after its last epoll_wait (connections' last_ms) */
    uint64_t all_here_ms;             /* respd_route found this node primary of every slot at now_ms + 1 (0: not) */
    pthread_t th;
    bool running;
    struct cds_wfcq_head qhead;
    struct cds_wfcq_tail qtail;
    conn *conns;
    size_t n_conns;
    batch *round;                     /* ready, submitted at the end of the round */
    conn *graves;                     /* dead connections, freed at the end of the round (respd.c) */
    batch *spare;                     /* emptied batches (linked by round_next), at most BATCH_SPARE */
    size_t n_spare;
    size_t round_ops;
    /* A batch answered on this thread (lattice_op_submit_inline) is queued
     * without the eventfd; the loop drains it after the round. */
    bool self_returned;
    /* respd_intro.c: requests of other threads' CLIENT LIST/KILL (legs)
     * for this thread's connections, woken by efd; mon_wake: a monitor of
     * this thread has lines waiting. */
    struct cds_wfcq_head xhead;
    struct cds_wfcq_tail xtail;
    atomic_bool mon_wake;
    /* wait_events (respd.c): whether this thread polls before it sleeps,
     * from the time it spent runnable but not running (its schedstat). */
    int sched_fd;                     /* /proc/self/task/<tid>/schedstat; -1: unknown */
    uint64_t sched_ms, sched_delay_ns; /* the last reading */
    bool poll_ok;                     /* the CPU was ours over the last interval */
} io_thread;

struct lattice_respd {
    lattice_respd_config cfg;        /* strings point at the copies below */
    lattice_resp_limits limits;      /* the parser's, from cfg */
    char host[64];
    char password[256];
    char cache[CACHE_NAME_MAX + 1];
    bool need_auth;
    lattice_node *node;
    int port;
    char attr[32];
    int n_io;
    int poll_us;                      /* wait_events: poll this long after the last events; 0 = never */
    io_thread io[LATTICE_RESPD_MAX_IO_THREADS];
    atomic_bool stop;
    atomic_int n_clients;
    atomic_llong next_id;
    atomic_int idle_timeout_s;        /* cfg.idle_timeout_s, changed by CONFIG SET timeout */
    atomic_ullong total_conns, total_cmds, rejected_conns;
    /* INFO commandstats, per lattice_resp_cmd_id: calls, and microseconds
     * from parse to reply (a key command's include its grid round trip). */
    atomic_ullong cmd_calls[LATTICE_RESP_CMD_ID_COUNT_], cmd_usec[LATTICE_RESP_CMD_ID_COUNT_];
    uint64_t start_ms;
    pthread_mutex_t view_lock;        /* guards view and the demotion record */
    struct respd_view *view;
    /* Partitions this node stopped being the primary of (one view to the
     * next), whose clients may still believe it is: demoted[p] != 0.
     * demote_gen counts the views that found new ones (respd_route). */
    uint8_t *demoted;
    uint32_t n_demoted, demote_gen;
    /* SLOWLOG (respd_intro.c): newest first; slow_lock guards the list. */
    atomic_llong slow_slower_than, slow_max_len;
    /* Redis's encoding thresholds (CONFIG SET/GET hash-max-listpack-entries
     * ...: respd_immediate.c's enc_params, in its order): accepted, kept and
     * reported; OBJECT ENCODING sends four of them to the primary, and a
     * collection's row does not depend on them (docs/TYPES.md). */
    atomic_llong enc[7];
    atomic_int n_blocked;             /* live connections whose batch out holds a blocking pop (INFO blocked_clients) */
    pthread_mutex_t slow_lock;
    struct respd_slow *slow_head, *slow_tail;
    long long slow_len, slow_next_id;
    /* MONITOR (respd_intro.c): every monitor of every IO thread. */
    pthread_mutex_t mon_lock;
    struct respd_mon *mons;
    atomic_int n_mons;
};

/* respd_cmd.c: running one parsed command. */
/* Run one parsed command: CMD_BATCHED when it became an entry of b (ops, or
 * an error reply kept in order), CMD_DONE when it was answered at once into
 * c->out, CMD_DEFER when it needs an immediate answer but b already holds
 * entries (the caller parses it again after the batch: replies keep their
 * order). */
typedef enum { CMD_DONE, CMD_BATCHED, CMD_DEFER } cmd_outcome;
cmd_outcome respd_command(struct lattice_respd *r, conn *c, batch *b, const lattice_resp_command *cmd);
/* As respd_command for a command EXEC runs in its place (never queued
 * again; b is empty): answered into c->out, or entries of b. */
cmd_outcome respd_command_in_exec(struct lattice_respd *r, conn *c, batch *b, size_t argc,
                                  const lattice_resp_arg *argv);

/* respd_batch.c: a batch's storage, the first key commands made into its
 * ops, the data thread's callbacks, the replies when it returns. */
/* Encode every entry's reply into c->out, in order. */
void respd_batch_replies(struct lattice_respd *r, conn *c, batch *b);
void respd_batch_free(batch *b);
/* Empties b for reuse by its IO thread (respd.c's spare batches): what its
 * entries hold is freed, its arrays are kept.  False (nothing done) when
 * they grew past BATCH_KEEP_*: such a batch is freed instead. */
bool respd_batch_reset(batch *b);
/* The data-thread callback of every submit. */
void respd_op_done(void *arg, size_t i, const lattice_op_result *res);
void respd_add_status_error(lattice_resp_out *o, lattice_status st);
/* respd.c, data thread: hands a finished batch back to its connection's IO thread. */
void respd_batch_return(batch *b);

/* respd_batch.c, for the command files: an entry of command id, an op of
 * it (key/val copied into the batch's arena), an error reply kept in order. */
ent *respd_ent_new(batch *b, lattice_resp_cmd_id cmd);
bool respd_op_add(batch *b, ent *e, lattice_op_kind kind, unsigned flags, const lattice_resp_arg *key,
                  const lattice_resp_arg *val, int64_t delta, uint64_t ttl);
cmd_outcome respd_ent_error(batch *b, const char *msg);
/* An op's failure, with what only its result carries (NO_QUORUM counts). */
void respd_add_result_error(lattice_resp_out *o, const opres *x);
/* The value an op returned (vals arena). */
void respd_add_value(lattice_resp_out *o, const batch *b, const opres *x);

/* respd_str.c: the string and keyspace commands beyond the first set
 * (SETEX ... BITCOUNT in lattice_resp_cmd_id).  respd_str_command turns
 * one into ops of a new entry (or an error entry); respd_str_reply encodes
 * its reply once the ops came back. */
bool respd_is_str_command(lattice_resp_cmd_id id);
cmd_outcome respd_str_command(batch *b, lattice_resp_cmd_id id, size_t argc, const lattice_resp_arg *argv);
void respd_str_reply(lattice_resp_out *o, const batch *b, const ent *e);

/* respd_rmw.c: SETRANGE, SETBIT, INCRBYFLOAT, DUMP, RESTORE and OBJECT's
 * key subcommands (SETRANGE ... MEMORY_USAGE in lattice_resp_cmd_id), as
 * respd_str.c's; respd_object_help answers OBJECT HELP. */
bool respd_is_rmw_command(lattice_resp_cmd_id id);
cmd_outcome respd_rmw_command(batch *b, lattice_resp_cmd_id id, size_t argc, const lattice_resp_arg *argv);
void respd_rmw_reply(lattice_resp_out *o, const batch *b, const ent *e);
void respd_object_help(lattice_resp_out *o);
/* respd_coll.c: the hash commands (HSET ... HSCAN in lattice_resp_cmd_id),
 * one LATTICE_OP_COLL_* op each (lattice/coll.h), as respd_str.c's. */
bool respd_is_coll_command(lattice_resp_cmd_id id);
cmd_outcome respd_coll_command(batch *b, lattice_resp_cmd_id id, size_t argc, const lattice_resp_arg *argv);
void respd_coll_reply(lattice_resp_out *o, const batch *b, const ent *e);
/* Adds entry e's op: collection command cmd (lattice/coll.h) of key with
 * the n arguments args, packed; false when out of memory. */
bool respd_coll_op(batch *b, ent *e, int cmd, const lattice_resp_arg *key, const lattice_resp_arg *args, size_t n);
/* A reply in lattice/coll.h's framing (a primary's), in o's protocol. */
/* respd_tx.c: b came back for a connection that closed meanwhile: what its
 * blocking pops popped goes back to its key (docs/TYPES.md). */
void respd_tx_give_back(struct lattice_respd *r, const batch *b);
void respd_coll_add_reply(lattice_resp_out *o, const char *p, size_t len);
/* respd_walk.c: SCAN, KEYS, RANDOMKEY, FLUSHDB, FLUSHALL - walks of every
 * partition (or, for a cluster-aware connection, of those this node is
 * primary of).  A walk command is alone in its batch (b->sealed), so it
 * runs after what was sent before it and before what follows. */
bool respd_is_walk_command(lattice_resp_cmd_id id);
cmd_outcome respd_walk_command(struct lattice_respd *r, conn *c, batch *b, lattice_resp_cmd_id id, size_t argc,
                               const lattice_resp_arg *argv);
/* Data thread: the first op of a walk came back (opres.walk). */
void respd_walk_first(batch *b, size_t i, const lattice_op_result *res);
void respd_walk_reply(lattice_resp_out *o, const batch *b, const ent *e);
void respd_walk_free(struct walker *w);
/* respd_batch.c: the data thread's share of b ends (the last hands it back). */
void respd_batch_release(batch *b);
/* respd_batch.c: monotonic microseconds (commandstats). */
uint64_t respd_now_us(void);

/* respd_immediate.c: the commands answered at once into c->out (connection
 * and server commands; INFO and CLUSTER go on to respd_cluster.c). */
void respd_immediate_command(struct lattice_respd *r, conn *c, lattice_resp_cmd_id id, size_t argc,
                             const lattice_resp_arg *argv);
/* CONFIG GET/SET/RESETSTAT: not a command of the table (for tools only). */
void respd_config_command(struct lattice_respd *r, conn *c, size_t argc, const lattice_resp_arg *argv);
/* The encoding thresholds' defaults (respd_immediate.c). */
void respd_enc_init(struct lattice_respd *r);
/* CONFIG RESETSTAT: the counters INFO stats and commandstats show. */
void respd_reset_stats(struct lattice_respd *r);
/* The CLIENT INFO line of c (Redis 7.0's fields, "\n" ended; c's IO
 * thread only); its length (at most cap - 1). */
size_t respd_client_line(struct lattice_respd *r, conn *c, char *buf, size_t cap);

/* respd.c, for respd_intro.c: close a connection of the calling IO thread;
 * write what it has pending (and re-arm it). */
void respd_conn_close(conn *c);
void respd_conn_flush(conn *c);

/* respd_intro.c: CLIENT LIST/KILL, SLOWLOG, MONITOR (docs/RESP.md). */
void respd_intro_init(struct lattice_respd *r);
void respd_intro_destroy(struct lattice_respd *r);
/* CLIENT LIST/KILL as the only entry of b (CMD_BATCHED: b->xreq set), or
 * an error entry; SLOWLOG and MONITOR answered at once into c->out. */
cmd_outcome respd_intro_command(struct lattice_respd *r, conn *c, batch *b, lattice_resp_cmd_id id, size_t argc,
                                const lattice_resp_arg *argv);
/* Sends b's legs to every IO thread; c waits as for a batch. */
void respd_intro_post(struct lattice_respd *r, conn *c, batch *b);
/* IO thread, after each round of events: legs to answer, monitor lines to send. */
void respd_intro_drain(io_thread *io);
void respd_intro_reply(lattice_resp_out *o, const batch *b, const ent *e);
void respd_intro_free(struct respd_xreq *x);
/* A command ran (slowlog: took microseconds) / is about to run (monitor). */
bool respd_slowlog_wants(struct lattice_respd *r);
void respd_slowlog_add(struct lattice_respd *r, conn *c, size_t argc, const lattice_resp_arg *argv, uint64_t took_us);
/* Key commands: keep argv in the batch now (e->slow), log at reply time. */
void respd_slowlog_keep(batch *b, ent *e, size_t argc, const lattice_resp_arg *argv);
void respd_slowlog_add_kept(struct lattice_respd *r, conn *c, const batch *b, const ent *e, uint64_t took_us);
void respd_monitor_feed(struct lattice_respd *r, conn *c, const lattice_resp_cmd *rc, size_t argc,
                        const lattice_resp_arg *argv);
/* A monitor connection closes: it leaves the monitors. */
void respd_mon_detach(conn *c);
/* For respd_tx.c: what a key command is and does (respd_batch.c), Redis
 * Cluster's routing check (respd_cmd.c), an entry replying constant bytes
 * (arena), and one entry's reply (in_exec: queued in a transaction; both
 * respd_batch.c). */
bool respd_is_key_command(lattice_resp_cmd_id id);
cmd_outcome respd_key_command(struct lattice_respd *r, batch *b, lattice_resp_cmd_id id, size_t argc,
                              const lattice_resp_arg *argv);
bool respd_misrouted(struct lattice_respd *r, conn *c, const lattice_resp_cmd *rc, size_t argc,
                     const lattice_resp_arg *argv, char *err);
ent *respd_ent_bytes(batch *b, lattice_resp_cmd_id cmd, const void *p, size_t n);
void respd_entry_reply(lattice_resp_out *o, const batch *b, const ent *e, bool in_exec);

/* respd_tx.c: MULTI/EXEC/DISCARD/WATCH/UNWATCH, RENAME/RENAMENX/COPY/MSETNX. */
bool respd_is_tx_command(lattice_resp_cmd_id id);
bool respd_is_tx_key_command(lattice_resp_cmd_id id);
/* Keys of several slots may run as one transaction on c (respd_tx.c). */
bool respd_cross_slot_ok(const lattice_respd *r, const conn *c);
/* DEL, UNLINK, EXISTS, TOUCH, MGET, MSET just built as b's last entry:
 * over keys of several slots, one transaction across partitions; its reply. */
void respd_tx_wrap_across(lattice_respd *r, conn *c, batch *b);
void respd_tx_across_reply(lattice_resp_out *o, const batch *b, const ent *e);
bool respd_tx_in_multi(const conn *c);
/* GEORADIUS / GEORADIUSBYMEMBER with STORE or STOREDIST (argv[store_at]
 * the key): one LATTICE_TXN_SETOP step of the source and that key, as
 * GEOSEARCHSTORE (in MULTI, when b is the queue, a queued sub). */
cmd_outcome respd_tx_geo_store(batch *b, lattice_resp_cmd_id id, size_t argc, const lattice_resp_arg *argv,
                               size_t store_at);
/* One LATTICE_OP_TXN in e of subs[0..n) with watches w[0..nw) (flags:
 * LATTICE_OP_ACROSS ...); false when memory is short. */
bool respd_tx_add_op(batch *b, ent *e, unsigned flags, const lattice_txn_watch *w, size_t nw, const lattice_op *subs,
                     size_t n);
/* CLIENT LIST's multi=: the commands queued (also while EXEC runs them), -1 outside MULTI. */
long respd_tx_queued(const conn *c);
/* A transaction command, or any command while MULTI is open (rc NULL: err
 * says why it did not resolve). */
cmd_outcome respd_tx_command(struct lattice_respd *r, conn *c, batch *b, const lattice_resp_cmd *rc, size_t argc,
                             const lattice_resp_arg *argv, char *err);
/* RENAME, RENAMENX, COPY, MSETNX as an entry of b (in_multi: a queued sub-op). */
cmd_outcome respd_tx_key_command(batch *b, lattice_resp_cmd_id id, size_t argc, const lattice_resp_arg *argv,
                                 bool in_multi);
/* OBJECT IDLETIME key as an entry of b: a txn op of one LATTICE_TXN_IDLE
 * (in_multi: the sub alone, queued). */
cmd_outcome respd_tx_idle_command(batch *b, const lattice_resp_arg *argv, bool in_multi);
/* WATCH and EXEC replies (they change c's state). */
void respd_tx_reply(conn *c, const batch *b, const ent *e);
void respd_tx_entry_reply(lattice_resp_out *o, const batch *b, const ent *e, bool in_exec);
void respd_tx_free(conn *c);

/* The monotonic ms an IO thread read after its last epoll_wait (one clock
 * read a wake-up); the clock itself on any other thread. */
uint64_t respd_io_now_ms(void);
/* respd_route's memo on an IO thread: whether this node was primary of
 * every slot at this wake-up's clock (a view lookup takes two mutexes). */
bool respd_io_all_here(void);
void respd_io_note_all_here(void);

/* respd_cluster.c: CLUSTER and INFO. */
void respd_cluster(struct lattice_respd *r, conn *c, lattice_resp_cmd_id id, size_t argc,
                   const lattice_resp_arg *argv);
void respd_info(struct lattice_respd *r, conn *c, size_t argc, const lattice_resp_arg *argv);
void respd_view_free(struct respd_view *v);
/* Where a command on `slot` runs for a cluster-aware connection: here
 * (this node is the slot's primary; RESPD_HERE_REPLICA: a serving replica
 * and replica_ok, a read; RESPD_HERE_ALL when this node is every slot's
 * primary), or elsewhere:
 * then moved holds "MOVED <slot> <ip>:<port>" (LATTICE_RESP_ERR_MAX bytes).
 * RESPD_HERE_DEMOTED: a read here as a replica of a partition this node was
 * the primary of before - a client may send it here from a stale map; moved
 * holds the primary's MOVED and *gen (when not NULL) the demotion generation.
 * RESPD_HERE_UNKNOWN: no serving primary is known for the slot (no view
 * yet, this node not in it, a lost partition, every copy still moving): it
 * runs here and the ops API answers - which says nothing about whether the
 * client routes by the slot map. */
typedef enum {
    RESPD_HERE,
    RESPD_HERE_ALL,
    RESPD_HERE_REPLICA,
    RESPD_MOVED,
    RESPD_HERE_DEMOTED,
    RESPD_HERE_UNKNOWN
} respd_where;
respd_where respd_route(struct lattice_respd *r, uint16_t slot, bool replica_ok, char *moved, uint32_t *gen);
/* The partitions of the endpoint's cache as the current view knows them (0: not yet). */
uint32_t respd_partitions(struct lattice_respd *r);
/* Redis-style 40 hex digit node name for a Lattice node id. */
void respd_node_name(const char *id, char out[41]);

#endif
