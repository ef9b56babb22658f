/*
 * discovery: IP finders, the join protocol, heartbeats, failure detection and
 * topology snapshots.  One discovery thread owns every control socket; see
 * discovery.c's header for the state machine and docs/MEMBERSHIP.md.
 *
 * Lifecycle (called from node/ only): init (parses, no sockets) -> start
 * (binds the peer port, starts the thread) -> stop (graceful leave, joins the
 * thread) -> destroy.  Topology readers: lattice_discovery_topology() returns
 * a reference (any thread); lattice_discovery_topology_rcu() needs
 * rcu_read_lock held by a thread registered with rcu_register_thread().
 * The accessors of the public lattice/topology.h are implemented here.
 */
#ifndef LATTICE_DISCOVERY_H
#define LATTICE_DISCOVERY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lattice/status.h"
#include "lattice/topology.h"

#define LATTICE_PROTO_MAJOR 1
#define LATTICE_PROTO_MINOR 1
#define LATTICE_MCAST_DEFAULT_GROUP "228.1.2.4"
#define LATTICE_MCAST_DEFAULT_PORT 47400

typedef struct lattice_discovery lattice_discovery;

typedef struct lattice_discovery_config {
    const char *cluster;
    const char *host;
    int port, port_range;
    const char *const *finders;
    size_t n_finders;
    bool client;
    int failure_detection_ms;
    const uint8_t *secret; /* key material (file contents); NULL = none */
    size_t secret_len;
    int max_message_bytes;
    int multicast_attempts, multicast_wait_ms;
    const char *const *attrs; /* "k=v" */
    size_t n_attrs;
    /* A baseline member gone from the topology this long is removed from
     * the baseline by a coordinator holding quorum; -1: never (0 from a
     * zeroed config: at once). */
    int baseline_auto_adjust_ms;
} lattice_discovery_config;

/* ---- IP finders (pure; unit-tested) ---- */

/* One static address: host (numeric or name, resolved) and port. */
typedef struct lattice_finder_addr {
    char host[64];
    int port;
} lattice_finder_addr;

/* Expand a static spec (Ignite's format: "host", "host:port", "host:p1..p2",
 * comma lists) into out[]; a spec without port uses
 * default_port..default_port+default_range-1.  At most max entries (the rest
 * is an error: LATTICE_ERR_TOO_LARGE).  LATTICE_ERR_INVAL on a malformed spec
 * (empty item, port outside 1..65535, p2 < p1, unresolvable host). */
lattice_status lattice_finder_parse_static(const char *spec, int default_port, int default_range,
                                           lattice_finder_addr *out, size_t max, size_t *n);
/* "multicast://GROUP[:PORT]" -> group, port. LATTICE_ERR_INVAL when not a
 * multicast spec or the group is not in 224.0.0.0/4. */
lattice_status lattice_finder_parse_multicast(const char *spec, char group[64], int *port);
bool lattice_finder_is_multicast(const char *spec);
/* "dns://NAME[:PORT]" (PORT default 47500) -> name, port.  INVAL when not a
 * DNS spec or the name is empty or not a host name. */
bool lattice_finder_is_dns(const char *spec);
lattice_status lattice_finder_parse_dns(const char *spec, char name[256], int *port);
/* Every A record of name (deduplicated) with port, into out[0..max); the
 * AAAA records are counted into *n_v6 and the first named in v6_first (both
 * may be NULL): Lattice peers listen on IPv4 only, so they are no join
 * targets.  NOT_FOUND when the name has no record (*gai_err, if not NULL,
 * gets getaddrinfo's code); OK with *n == 0 when it has only AAAA records.
 * Blocks as long as the name servers take. */
lattice_status lattice_finder_resolve_dns(const char *name, int port, lattice_finder_addr *out, size_t max,
                                          size_t *n, size_t *n_v6, char v6_first[64], int *gai_err);

/* ---- inspection (inspect.c): a view of the grid without joining ---- */

/* Asks every static finder address of c (cluster, finders, secret; the rest
 * unused) for its view; the first answer within timeout_ms wins.
 * UNSUPPORTED with a multicast finder (nothing to ask directly), AUTH /
 * CLUSTER / PROTO when only refusals came back, TIMEOUT when nothing did. */
lattice_status lattice_discovery_inspect(const lattice_discovery_config *c, int timeout_ms,
                                         lattice_inspection **out);

/* ---- lifecycle ---- */

lattice_status lattice_discovery_init(const lattice_discovery_config *c, lattice_discovery **out);
lattice_status lattice_discovery_start(lattice_discovery *d);
/* Graceful: sends a leave, waits up to ~1 s for the coordinator to announce
 * it, then closes every socket and joins the thread.  Idempotent. */
void lattice_discovery_stop(lattice_discovery *d);
void lattice_discovery_destroy(lattice_discovery *d);

/* ---- queries (any thread) ---- */

lattice_topology *lattice_discovery_topology(lattice_discovery *d);
/* Call with rcu_read_lock held (registered thread); valid until unlock. */
const lattice_topology *lattice_discovery_topology_rcu(lattice_discovery *d);
/* LATTICE_OK once in a topology; LATTICE_ERR_CLUSTER / _AUTH / _PROTO when
 * peers have refused us for a second without any admitting us (we keep
 * trying in the background);
 * LATTICE_ERR_TIMEOUT otherwise. */
lattice_status lattice_discovery_wait_joined(lattice_discovery *d, int timeout_ms);
lattice_status lattice_discovery_subscribe(lattice_discovery *d, lattice_event_fn fn, void *ctx);
void lattice_discovery_local_id(lattice_discovery *d, char *buf, size_t len);
int lattice_discovery_port(lattice_discovery *d);
lattice_status lattice_discovery_stats(lattice_discovery *d, const char *id, lattice_node_stats *out);
/* What this node hears of member id now, as an inspection answers it
 * (lattice_inspection_member): its latest stats, how long it has been
 * silent, its state ("alive", "silent", "leaving"; a static string).
 * NOT_FOUND when id is not in the current topology. */
lattice_status lattice_discovery_member_state(lattice_discovery *d, const char *id, lattice_member_state *out);

/* ---- leases (docs/MEMBERSHIP.md, "Leases") ---- */

#define LATTICE_LEASE_MAX_PEERS 256
/* Until when (CLOCK_MONOTONIC ms) this server may serve from its view: 0
 * while it is not a member, INT64_MAX for a client.  Any thread; lock-free. */
int64_t lattice_discovery_lease_until(lattice_discovery *d);
/* This node's incarnation: a number that changes whenever it (re)joins under
 * a new id.  Read it before the topology it goes with. */
uint64_t lattice_discovery_incarnation(lattice_discovery *d);
/* True while the lease of that incarnation is valid now: a caller still
 * acting on an older incarnation's view is never served by the new one's
 * lease. */
bool lattice_discovery_serving(lattice_discovery *d, uint64_t incarnation);
/* Pure: the lease given the send times echoed by the other baseline
 * servers of the topology (acks[0..n_acks), 0 = never), the size of the
 * baseline, whether we are in it, the coordinator's echo (-1 when we are
 * the coordinator, 0 = never) and the lease length.  Needs the
 * coordinator's echo and a strict majority of the baseline (us included
 * when self_counts); returns 0 when either is missing. */
int64_t lattice_lease_until(const int64_t *acks, size_t n_acks, size_t n_baseline, bool self_counts,
                            int64_t coord_ack, int lease_ms);
/* Pure: how many baseline servers are reachable - us (self_counts) and
 * every one whose echo is younger than lease_ms at `now`. */
size_t lattice_quorum_reachable(const int64_t *acks, size_t n_acks, bool self_counts, int64_t now, int lease_ms);

/* ---- baseline and quorum (docs/CONSISTENCY.md, "Baseline and quorum") ---- */

/* This node's quorum now (any thread): a strict majority of the baseline
 * is still in its topology - not removed as silent for the failure-
 * detection timeout.  A client reports has_quorum (it
 * holds nothing to fence) with the baseline figures of its view. */
void lattice_discovery_quorum(lattice_discovery *d, lattice_quorum *out);
/* op: LATTICE_BASELINE_SET/ADD/REMOVE (topology.h). */
/* Ask the coordinator to change the baseline and wait for its answer (any
 * thread but the discovery thread).  OK once the coordinator announced a
 * topology holding the change (*version: its baseline version); INVAL for
 * a consistent id that is not a server of the topology (set, add) or not
 * in the baseline (remove), or an empty result; NO_QUORUM when the
 * coordinator holds no quorum and `force` is false; TIMEOUT without an
 * answer.  why (may be NULL) gets the coordinator's text. */
lattice_status lattice_discovery_baseline_change(lattice_discovery *d, int op, const char *const *cids, size_t n,
                                                 bool force, int timeout_ms, uint64_t *version, char *why,
                                                 size_t why_len);

#endif
