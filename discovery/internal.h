/*
 * Internal to discovery/: the topology snapshot representation and the wire
 * helpers shared by discovery.c, topology.c, wire.c and finder.c.
 */
#ifndef LATTICE_DISCOVERY_INTERNAL_H
#define LATTICE_DISCOVERY_INTERNAL_H

#include <stdatomic.h>
#include <urcu.h>

#include "base/base.h"
#include "discovery.pb-c.h"
#include "discovery/discovery.h"

/* An immutable snapshot.  Reference counted: the publisher holds one
 * reference while it is current (dropped after an RCU grace period), every
 * lattice_discovery_topology() caller holds one more. */
struct lattice_topology {
    /* C11 atomics rather than urcu_ref: the count orders the last reader's
     * accesses before the free, and ThreadSanitizer can see that. */
    atomic_long refs;
    struct rcu_head rcu;
    uint64_t major, minor, next_order;
    uint32_t fd_ms; /* the cluster's failure detection timeout (the coordinator's setting) */
    char *coordinator;
    size_t n;
    lattice_member *members; /* sorted by order */
    /* The baseline (consistent ids of the servers that count for quorum),
     * sorted, and its version; set by topo_set_baseline before the
     * snapshot is published, never after. */
    char **baseline;
    size_t n_baseline;
    uint64_t baseline_version;
};

/* Deep copy of members[0..n) into a new snapshot with one reference. NULL on
 * allocation failure. */
lattice_topology *topo_build(uint64_t major, uint64_t minor, uint64_t next_order, uint32_t fd_ms,
                             const char *coordinator, const lattice_member *const *members, size_t n);
lattice_topology *topo_from_proto(const Latdisc__Topology *p);
/* Give a snapshot that is not yet published its baseline (copied, sorted,
 * duplicates dropped).  false on allocation failure (t keeps none). */
bool topo_set_baseline(lattice_topology *t, const char *const *cids, size_t n, uint64_t version);
bool topo_in_baseline(const lattice_topology *t, const char *cid);
void topo_get(lattice_topology *t);
void topo_put(lattice_topology *t);
/* Fill a proto view of t (strings borrowed from t; free with
 * topo_proto_release).  LATTICE_ERR_NOMEM on failure. */
lattice_status topo_to_proto(const lattice_topology *t, Latdisc__Topology *p);
void topo_proto_release(Latdisc__Topology *p);
/* Member <-> proto (borrowed strings; attrs array allocated). */
lattice_status member_to_proto(const lattice_member *m, Latdisc__Member *p);
void member_proto_release(Latdisc__Member *p);
/* A member view of a proto member (strings borrowed, attrs not copied). */
void member_from_proto_view(const Latdisc__Member *p, lattice_member *m, lattice_attr *attrs, size_t max_attrs);

/* Deep copy (false on allocation failure; free with member_free_fields
 * either way). */
bool member_copy(lattice_member *dst, const lattice_member *src);
void member_free_fields(lattice_member *m);

/* ---- wire (wire.c, on base's frame layer) ---- */

/* Decode one frame.  Checks size, MAC (when key != NULL), unknown fields at
 * every depth (lt_frame_unpack), then a body, string lengths and protocol
 * major.  On WIRE_OK and WIRE_PROTO_MAJOR *out is an unpacked envelope to free
 * with wire_free. */
enum wire_verdict {
    WIRE_OK = 0,
    WIRE_OVERSIZED,
    WIRE_MALFORMED,
    WIRE_AUTH,        /* MAC missing, wrong, or present when we have no key */
    WIRE_PROTO_MAJOR, /* decodable but another protocol major */
};
enum wire_verdict wire_decode(const uint8_t *buf, size_t len, const uint8_t *mac, size_t mac_len,
                              const uint8_t *key, size_t max_bytes, Latdisc__Envelope **out);
void wire_free(Latdisc__Envelope *e);
/* Pack e into a new buffer (lt_malloc) and compute its MAC into mac when
 * key != NULL. */
lattice_status wire_encode(const Latdisc__Envelope *e, const uint8_t *key, uint8_t **buf, size_t *len,
                           uint8_t mac[LT_FRAME_MAC_BYTES]);
/* The control plane's HMAC key from secret file contents (a key apart from
 * the data channel's). */
void wire_derive_key(const uint8_t *secret, size_t len, uint8_t key[LT_FRAME_KEY_BYTES]);

/* ---- merging (merge.c) ---- */
/* Does our grid (quorum of its baseline present, servers, coordinator
 * host:port) dissolve into theirs?  A grid without quorum yields to one
 * with it; otherwise fewer servers yields; a tie: the larger coordinator
 * host:port yields. */
bool merge_yields(bool my_quorum, size_t my_servers, const char *my_coord_cid, bool their_quorum,
                  size_t their_servers, const char *their_coord_cid);

/* ---- process stats ---- */
typedef struct proc_sampler {
    double last_cpu_s, last_wall_s;
    double load;
} proc_sampler;
void proc_sample(proc_sampler *s, uint64_t *rss_bytes);

/* ---- multicast finder sockets (finder.c) ---- */
/* A UDP socket joined to group:port on interface `iface` (the node's host
 * address), SO_REUSEADDR; -1 on failure (errno set). */
int mcast_listen(const char *group, int port, const char *iface);
/* An unbound UDP socket sending to multicast through `iface`; -1 on failure. */
int mcast_sender(const char *iface);

#endif
