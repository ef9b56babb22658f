/*
 * Private to discovery/: the discovery context shared by discovery.c (the
 * membership state machine; its frames in handlers.c, its thread in
 * thread.c), transport.c (sockets), api.c (lifecycle and queries) and the
 * other files of the folder.  The locking rules are drawn in discovery.c's
 * header.
 */
#ifndef LATTICE_DISCOVERY_STATE_H
#define LATTICE_DISCOVERY_STATE_H

#include <netinet/in.h>
#include <pthread.h>
#include <sodium.h>
#include <stdatomic.h>
#include <stdio.h>
#include <zmq.h>

#include "internal.h"
#include "lattice/clock.h"

#define MOD "discovery"
#define MAX_CONNS 512
#define MAX_PEERS 256
#define MAX_STATIC 512
#define LD_MAX_DNS 8            /* dns:// finders */
#define LD_DNS_REFRESH_MS 5000  /* how often they are resolved again */
#define LD_DNS_SLOW_MS 5000     /* a lookup running this long is logged (once) */
#define LD_DNS_MAX_ADDRS 64     /* usable addresses kept per name */
#define MAX_JOINERS 64
#define MAX_PENDING 64
#define MAX_REMOVED 128
#define MAX_SUBS 8
#define JOIN_RETRY_MS 100
#define ELECT_WAIT_MS 500
#define LOOP_TICK_MS 20

enum dstate { ST_IDLE, ST_JOINING, ST_JOINED, ST_LEAVING, ST_STOPPED };
/* Refusal reasons (PROTOCOL.md).  NO_SECRET comes from a node that has no
 * secret at all: a grid with a secret must not take it as "refused". */
enum refusal { REF_CLUSTER = 1, REF_SECRET = 2, REF_PROTO = 3, REF_REMOVED = 4, REF_NO_SECRET = 5 };

typedef struct conn {
    char addr[128];
    void *sock;
    bool finder; /* a finder target: kept only while joining */
} conn;

typedef struct peer {
    char id[64];
    int64_t last_heard_ms;
    int64_t ack_ms;  /* our send time of the newest heartbeat it acknowledged (0: none) */
    uint64_t hb_major, hb_minor; /* the topology version its latest heartbeat reported */
    bool leaving;
    bool have_stats;
    lattice_node_stats stats;
} peer;

typedef struct joiner_seen {
    char key[128];
    int64_t seen_ms;
} joiner_seen;

/* A baseline member the coordinator misses from the topology, since when
 * (auto-adjust, baseline.c). */
typedef struct absent_cid {
    char cid[128];
    int64_t since_ms;
} absent_cid;

/* An API thread's baseline change, handed to the discovery thread. */
enum bl_state { BL_IDLE, BL_QUEUED, BL_SENT, BL_DONE };
#define BL_MAX_CIDS 64
typedef struct bl_request {
    enum bl_state state;
    int op;
    bool force;
    uint64_t id;
    size_t n;
    char cids[BL_MAX_CIDS][128];
    int64_t sent_ms;
    lattice_status status;
    uint64_t version;
    char text[256];
} bl_request;

/* A dns:// finder as the discovery thread sees it (dns.c). */
typedef struct ld_dns_name {
    char name[256];
    int port;
    uint64_t seen_gen;  /* the resolver's answers taken so far (0: none yet) */
    lattice_finder_addr good[LD_DNS_MAX_ADDRS]; /* the last good answer's IPv4 addresses */
    size_t n_good;
    bool logged_ok, slow_logged; /* what was logged last, so each change is logged once */
    int logged_err;
    size_t n_v6_logged;
} ld_dns_name;
typedef struct ld_dns_shared ld_dns_shared;

typedef struct sub {
    lattice_event_fn fn;
    void *ctx;
} sub;

struct lattice_discovery {
    /* configuration (immutable after init) */
    char cluster[256], host[64];
    int port, port_range, fd_ms, max_msg;
    bool client, has_key, mcast;
    uint8_t key[LT_FRAME_KEY_BYTES];
    lattice_finder_addr statics[MAX_STATIC]; /* [0, n_fixed): static finders; then dns:// results */
    size_t n_statics;
    size_t n_fixed;          /* set at init; the rest is rewritten by ld_dns_poll (discovery thread) */
    ld_dns_name dns[LD_MAX_DNS]; /* name, port immutable after init; the rest discovery thread */
    size_t n_dns;
    ld_dns_shared *dns_shared;   /* the resolver's hand-over block (dns.c); set by start, cleared by stop */
    char mgroup[64];
    int mport, m_attempts, m_wait_ms;
    lattice_attr attrs[LATTICE_MAX_ATTRS];
    size_t n_attrs;

    /* sockets (discovery thread after start) */
    void *zctx, *router, *monitor;
    int wake_fd, mc_listen_fd, mc_send_fd;
    int bound_port;
    conn conns[MAX_CONNS];
    size_t n_conns;

    /* membership (discovery thread) */
    enum dstate state;
    char my_addr[128], consistent_id[128];
    uint64_t join_time_ms, start_wall_ms;
    int64_t join_started_ms, last_join_send_ms, last_hb_ms, last_loop_ms, last_probe_ms;
    int64_t saw_cluster_ms, leave_started_ms;
    int64_t last_hello_ms;   /* coordinator: last Hello round to non-members */
    char merge_to[128];      /* a merge's join: the grid it merges into (merge.c) */
    int64_t merge_until_ms;  /* ... asked alone until then */
    char cands[16][128];     /* multicast answers from nodes outside our topology */
    size_t n_cands;
    joiner_seen joiners[MAX_JOINERS];
    size_t n_joiners;
    char heard[MAX_CONNS][128]; /* this join: addresses a frame came from (seed.c) */
    size_t n_heard;
    int64_t silent_since_ms, last_listen_probe_ms; /* a finder address that listens but sent nothing */
    char silent_addr[128];
    bool silent_gave_up;
    lattice_member pending[MAX_PENDING];
    size_t n_pending;
    char removed[MAX_REMOVED][64];
    size_t removed_next;
    proc_sampler ps;
    int64_t log_gate[16]; /* rate limit for repeated warnings, one slot per kind */

    /* shared (see the file header) */
    pthread_mutex_t pub_lock, stats_lock;
    double self_load; /* stats_lock: this process's CPU load as the last heartbeat measured it */
    pthread_cond_t joined_cv;
    lattice_topology *cur;
    lattice_topology *view; /* discovery thread: the last topology we adopted (kept while rejoining), for event diffs */
    char id[64];
    bool joined;
    lattice_status refused; /* why a peer refused us while joining (LATTICE_OK: none) */
    int64_t refused_at_ms;  /* first refusal of this join attempt (monotonic) */
    sub subs[MAX_SUBS];
    size_t n_subs;
    peer peers[MAX_PEERS];
    size_t n_peers;
    atomic_bool stop_req;
    atomic_int_fast64_t lease_until; /* monotonic ms; written by the discovery thread (lease.c) */
    atomic_uint_fast64_t incarnation; /* bumped by every (re)join; written by the discovery thread */
    _Atomic int64_t joined_mono_ms;  /* when this incarnation was admitted (written by the discovery thread) */
    int64_t quiet_until_ms;          /* discovery thread: after a stall, no coordinating until then */
    int auto_adjust_ms;              /* --baseline-auto-adjust-ms (-1: never) */
    absent_cid absent[MAX_PEERS];    /* discovery thread (coordinator): baseline members missing */
    size_t n_absent;
    char bl_last_sender[64];         /* discovery thread: the last change applied, for resends */
    uint64_t bl_last_id, bl_last_version;
    pthread_mutex_t bl_lock;         /* guards bl; never held with pub_lock or stats_lock */
    pthread_cond_t bl_cv;
    bl_request bl;
    uint64_t bl_next_id;             /* under bl_lock */
    bool thread_started;
    pthread_t thr;
    atomic_uint_fast64_t c_frames, c_malformed, c_oversized, c_auth, c_refused, c_handshake;
};

/* ------------------------------------------------------------------ utils */

static inline void new_uuid(char out[64])
{
    uint8_t b[16];
    randombytes_buf(b, sizeof b);
    b[6] = (uint8_t)((b[6] & 0x0f) | 0x40);
    b[8] = (uint8_t)((b[8] & 0x3f) | 0x80);
    snprintf(out, 64, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
             b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
}

/* True at most once a second per gate: repeated bad input must not flood
 * the log, but the first occurrence is always logged. */
static inline bool gate(lattice_discovery *d, int g)
{
    int64_t now = lt_mono_ms();
    if (now - d->log_gate[g] < 1000) return false;
    d->log_gate[g] = now;
    return true;
}

static inline void cnt(atomic_uint_fast64_t *c) { atomic_fetch_add_explicit(c, 1, memory_order_relaxed); }
static inline uint64_t rd(atomic_uint_fast64_t *c) { return atomic_load_explicit(c, memory_order_relaxed); }


/* Copy a peer-supplied string for a log line: at most n-1 bytes, control
 * characters replaced, so a peer cannot forge or split our log lines. */
static inline const char *printable(const char *in, char *out, size_t n)
{
    size_t i = 0;
    for (; in && in[i] && i + 1 < n; i++) out[i] = (unsigned char)in[i] < 0x20 || in[i] == 0x7f ? '?' : in[i];
    out[i] = 0;
    return out;
}

/* Call with stats_lock held, or on the discovery thread (the only writer). */
static inline peer *find_peer(lattice_discovery *d, const char *id)
{
    for (size_t i = 0; i < d->n_peers; i++)
        if (strcmp(d->peers[i].id, id) == 0) return &d->peers[i];
    return NULL;
}

/* ---- transport.c: sockets (discovery thread only) ---- */
conn *ld_find_conn(lattice_discovery *d, const char *addr);
/* A DEALER to addr (created on first use); NULL for our own or a bad address. */
conn *ld_ensure_conn(lattice_discovery *d, const char *addr, bool finder);
void ld_close_conn_at(lattice_discovery *d, size_t i);
void ld_env_init(lattice_discovery *d, Latdisc__Envelope *e);
void ld_send_env(lattice_discovery *d, void *sock, const zmq_msg_t *route, const Latdisc__Envelope *e,
                 bool unauthenticated);
void ld_send_to(lattice_discovery *d, const char *addr, const Latdisc__Envelope *e);
/* A merge's join: asks only addr for a few failure-detection periods (merge.c). */
void ld_join_into(lattice_discovery *d, const char *addr);
/* Encode once, send to each address (addrs == NULL: to the first n conns). */
void ld_send_many(lattice_discovery *d, const char *const *addrs, size_t n, const Latdisc__Envelope *e);
void ld_reply_refusal(lattice_discovery *d, const zmq_msg_t *route, int reason, const char *text,
                      const char *about_id);
bool ld_recv_one(lattice_discovery *d, void *sock, bool is_router);
void ld_drain_monitor(lattice_discovery *d);
void ld_drain_udp(lattice_discovery *d, int fd);
#define LD_DATAGRAM_MAX 2048
void ld_send_datagram(lattice_discovery *d, int fd, const struct sockaddr_in *to, const Latdisc__Envelope *e,
                      bool unauthenticated);
/* Ask the multicast group who is there (servers answer with their address). */
void ld_send_probe(lattice_discovery *d);
lattice_status ld_open_sockets(lattice_discovery *d);
void ld_close_sockets(lattice_discovery *d);

/* ---- discovery.c: the state machine's view and its transitions (discovery thread) ---- */
/* The cluster's failure detection timeout (the coordinator's, from the topology). */
int ld_cfd(const lattice_discovery *d);
/* Drop the current view and join again (why != NULL: as a new node, logged). */
void ld_begin_join(lattice_discovery *d, const char *why);
/* Replace the published snapshot (t may be NULL while rejoining). */
void ld_publish(lattice_discovery *d, lattice_topology *t);
/* Adopt t (it contains us) as our view: peers, connections, the published
 * snapshot, the lease, the events.  Takes over the reference. */
void ld_adopt(lattice_discovery *d, lattice_topology *t, Latdisc__Change *const *ch, size_t nch);
/* A topology arrived from its coordinator: adopt it, ignore it, rejoin. */
void ld_on_topology(lattice_discovery *d, const Latdisc__Envelope *e, const zmq_msg_t *route);
/* The coordinator as every member computes it: the lowest-order server that
 * is neither silent nor leaving (NULL: none). */
const lattice_member *ld_effective_coordinator(lattice_discovery *d, int64_t now);
/* We are the coordinator: fold every pending join, leave and failure into
 * one new major version and announce it. */
void ld_coordinate(lattice_discovery *d, int64_t now);
/* Was id removed from a topology we adopted (among the last MAX_REMOVED)? */
bool ld_was_removed(lattice_discovery *d, const char *id);
/* A heartbeat with our stats / t with its changes, to every member of the
 * current view (of t) but us, or only to only_addr. */
void ld_send_heartbeat(lattice_discovery *d, const char *only_addr);
void ld_send_topology(lattice_discovery *d, const lattice_topology *t, Latdisc__Change **ch, size_t nch,
                      const char *only_addr);
/* e to every member of t but us (or only to only_addr), encoded once. */
void ld_send_members(lattice_discovery *d, const lattice_topology *t, const char *only_addr,
                     const Latdisc__Envelope *e);
/* ---- handlers.c: received frames and datagrams (discovery thread) ---- */
/* Judge and dispatch one received frame (route: the ROUTER's routing frame). */
void ld_handle_frame(lattice_discovery *d, const zmq_msg_t *route, const uint8_t *buf, size_t len,
                     const uint8_t *mac, size_t mac_len, const char *via);
/* Judge and dispatch one datagram (mac: 32 bytes or NULL). */
void ld_handle_datagram(lattice_discovery *d, const struct sockaddr_in *from, const uint8_t *buf, size_t len,
                        const uint8_t *mac);
/* ---- thread.c: the discovery thread's loop and timers ---- */
void *ld_thread_main(void *arg);
/* seed.c: may this joining server start a grid of its own yet? */
void ld_seed_reset(lattice_discovery *d);
void ld_note_heard(lattice_discovery *d, const char *addr);
bool ld_seed_held(lattice_discovery *d, int64_t now);
/* How long a grid heard of (saw_cluster_ms) or a silent listener holds seeding back. */
int64_t ld_seed_hold_ms(const lattice_discovery *d);

/* ---- lease.c ---- */
/* How long an acknowledged heartbeat keeps our lease: below the failure
 * detection timeout, so we stop serving before anyone may remove us. */
int ld_lease_ms(const lattice_discovery *d);
/* Recompute d->lease_until from the peers' acks and the current view. */
void ld_update_lease(lattice_discovery *d);

/* Echo times of the baseline servers of t other than self_id, and how the
 * lease counts them (lease.c).  Call on the discovery thread or with
 * stats_lock held. */
size_t ld_baseline_acks(lattice_discovery *d, const lattice_topology *t, const char *self_id,
                        int64_t *acks, size_t *n_baseline, bool *self_counts, int64_t *coord_ack);

/* ---- baseline.c ---- */
/* Quorum now, on the discovery thread: reachable baseline servers of n. */
bool ld_quorum_now(lattice_discovery *d, int64_t now, size_t *reachable, size_t *n);
/* Servers of t that are baseline members, and whether they are a strict
 * majority of t's baseline (a legacy topology without one: true). */
bool ld_present_quorum(const lattice_topology *t);
bool ld_present_quorum_proto(const Latdisc__Topology *p);
/* Coordinator: keep the baseline current (joins at once, departures after
 * auto_adjust_ms), one change at a time. */
void ld_baseline_tick(lattice_discovery *d, int64_t now);
/* Every loop: hand an API thread's change request on (or apply it). */
void ld_baseline_pump(lattice_discovery *d, int64_t now);
void ld_on_baseline_change(lattice_discovery *d, const Latdisc__Envelope *e, const zmq_msg_t *route);
void ld_on_baseline_answer(lattice_discovery *d, const Latdisc__Envelope *e);

/* ---- discovery.c, for baseline.c ---- */
/* Coordinator: announce t's members again under (major, minor + 1) with
 * this baseline, and adopt it.  False on allocation failure. */
bool ld_announce_baseline(lattice_discovery *d, const char *const *cids, size_t n);

/* ---- merge.c: grids that formed apart ---- */
void ld_note_candidate(lattice_discovery *d, const char *addr);
void ld_send_hellos(lattice_discovery *d, int64_t now);
void ld_on_hello(lattice_discovery *d, const Latdisc__Envelope *e, const zmq_msg_t *route);
/* f (a view from its coordinator) shares members with t but gives one of
 * them another order: a second grid that admitted the same nodes. */
bool ld_views_conflict(const lattice_topology *t, const Latdisc__Topology *f);
/* Judge f, the view of another grid's coordinator: answer with ours (via
 * route, when not NULL) and dissolve ours into it if ours yields. */
void ld_judge_grid(lattice_discovery *d, const Latdisc__Topology *f, const zmq_msg_t *route);
/* dns.c: the dns:// finders' resolver thread.  start (API thread, before
 * the discovery thread) starts it when there are dns:// finders; stop never
 * waits for a running lookup.  poll (discovery thread, every tick) takes new
 * answers: changed addresses become join targets, a failed or slow lookup
 * keeps the last good ones.  answered: every name has had one answer (a
 * server does not seed a grid of its own before). */
lattice_status ld_dns_start(lattice_discovery *d);
void ld_dns_stop(lattice_discovery *d);
void ld_dns_poll(lattice_discovery *d, int64_t now);
bool ld_dns_answered(const lattice_discovery *d);
/* inspect.c: answer an Inspect from outside the topology (discovery thread). */
void ld_on_inspect(lattice_discovery *d, const zmq_msg_t *route);
void ld_on_dissolve(lattice_discovery *d, const Latdisc__Envelope *e);

#endif
