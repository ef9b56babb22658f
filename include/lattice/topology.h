/*
 * lattice/topology.h: what a node sees of its grid - immutable, versioned
 * topology snapshots, their members, the stats each member reports in its
 * heartbeats, and membership events.  Part of the public C API (lattice.h
 * includes it); implemented by the discovery module, which is why it is a
 * header of its own: the bottom of the stack must not include lattice.h.
 *
 * A topology is immutable; a pointer to one stays valid until its
 * reference is released (lattice_node_topology() in lattice.h hands one
 * out), even while newer versions are published.
 */
#ifndef LATTICE_TOPOLOGY_H
#define LATTICE_TOPOLOGY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lattice/status.h"

#define LATTICE_DEFAULT_PORT 47500 /* a node's peer port unless configured */
#define LATTICE_MAX_ATTRS 16       /* attributes a member advertises, at most */

typedef struct lattice_topology lattice_topology;

enum lattice_role { LATTICE_ROLE_SERVER = 0, LATTICE_ROLE_CLIENT = 1 };

typedef struct lattice_attr {
    const char *key;
    const char *value;
} lattice_attr;

/* One node in a topology.  Owned by the topology: valid while you hold it. */
typedef struct lattice_member {
    const char *id;                   /* random UUID per start (and per rejoin) */
    const char *consistent_id;        /* advertised host:port */
    uint64_t order;                   /* join order; the lowest server is coordinator */
    int role;                         /* enum lattice_role */
    const char *addr;                 /* tcp://host:port of its peer port */
    const char *host;
    uint64_t start_time_ms;           /* wall clock at (re)join, ms since the epoch */
    size_t n_attrs;
    const lattice_attr *attrs;
} lattice_member;

void lattice_topology_release(lattice_topology *t);
uint64_t lattice_topology_major(const lattice_topology *t);
uint64_t lattice_topology_minor(const lattice_topology *t);
const char *lattice_topology_coordinator(const lattice_topology *t); /* node id */
size_t lattice_topology_size(const lattice_topology *t);
/* Members sorted by order; i < size. */
const lattice_member *lattice_topology_member(const lattice_topology *t, size_t i);
/* NULL when absent. */
const lattice_member *lattice_topology_find(const lattice_topology *t, const char *id);
const char *lattice_member_attr(const lattice_member *m, const char *key);

/* The baseline topology this snapshot carries: the consistent ids of the
 * servers that count for quorum (sorted), and its version (docs/
 * CONSISTENCY.md, "Baseline and quorum").  A baseline member need not be in
 * the topology (it may be down or cut off); i < baseline_size. */
size_t lattice_topology_baseline_size(const lattice_topology *t);
const char *lattice_topology_baseline_at(const lattice_topology *t, size_t i);
uint64_t lattice_topology_baseline_version(const lattice_topology *t);

/* A node's quorum: whether the servers it reaches (itself included) are a
 * strict majority of the baseline.  A server without quorum serves nothing
 * (LATTICE_ERR_NO_QUORUM); a client has no quorum of its own to hold and
 * always reports has_quorum. */
/* Baseline changes (lattice_node_baseline_change in lattice.h). */
enum { LATTICE_BASELINE_SET = 1, LATTICE_BASELINE_ADD = 2, LATTICE_BASELINE_REMOVE = 3 };

typedef struct lattice_quorum {
    bool has_quorum;
    size_t reachable;          /* baseline servers in this node's topology (not removed as silent),
                                  this node included */
    size_t baseline;           /* baseline size */
    uint64_t baseline_version;
} lattice_quorum;

/* What each node reports about itself in its heartbeats. */
typedef struct lattice_node_stats {
    double cpu_load;                  /* process CPU, 1.0 = one core busy */
    uint64_t rss_bytes;
    uint64_t uptime_ms;
    uint64_t frames_in;
    uint64_t malformed;               /* dropped: undecodable/truncated/unknown fields */
    uint64_t oversized;               /* dropped: above max_message_bytes */
    uint64_t auth_failed;             /* dropped: missing or wrong MAC */
    uint64_t refused;                 /* joins refused: cluster name, protocol version */
    uint64_t handshake_failed;        /* non-ZeroMQ bytes on the peer port */
} lattice_node_stats;

enum lattice_event_kind { LATTICE_EVENT_JOINED = 1, LATTICE_EVENT_LEFT = 2, LATTICE_EVENT_FAILED = 3 };

/* Called on the discovery thread once per member change, in version order:
 * the difference between the node's previous view and the new one (its
 * first view reports every member joined).  `member` and `topology` are
 * borrowed for the call; a removed member is described by the old view. */
typedef void (*lattice_event_fn)(void *ctx, int kind, const lattice_member *member,
                                 const lattice_topology *topology);

/* ---- inspection: a grid seen from outside (lattice_inspect, lattice.h) ----
 *
 * One member's answer: its topology and what it hears of every member.  The
 * asker never joined, so the topology version did not move for it. */
typedef struct lattice_inspection lattice_inspection;

typedef struct lattice_member_state {
    int have_stats;                   /* a heartbeat of it was heard */
    lattice_node_stats stats;
    uint64_t silent_ms;               /* since the answering member last heard it */
    const char *state;                /* "alive", "silent" (missed heartbeats, not removed yet), "leaving" */
} lattice_member_state;

/* Borrowed: valid until lattice_inspection_free. */
const lattice_topology *lattice_inspection_topology(const lattice_inspection *i);
/* The peer address that answered. */
const char *lattice_inspection_source(const lattice_inspection *i);
/* LATTICE_ERR_NOT_FOUND when id is not in the topology; out->state is
 * valid until lattice_inspection_free. */
lattice_status lattice_inspection_member(const lattice_inspection *i, const char *id, lattice_member_state *out);
void lattice_inspection_free(lattice_inspection *i);

#endif
