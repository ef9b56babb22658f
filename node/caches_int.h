/*
 * Internal to node/: the caches module (data channel, cache registry, the
 * operation path).  Everything in these structs is owned and touched by the
 * node's data thread only, except where a field says otherwise.  See
 * docs/CACHES.md for the design.
 */
#ifndef LATTICE_NODE_CACHES_INT_H
#define LATTICE_NODE_CACHES_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "lattice/ops.h"
#include "partition/partition.h"
#include "storage/storage.h"

#define LATTICE_DATA_PROTO 1
#define DATA_MAX_FRAME (64u << 20)   /* a data frame above this is dropped and counted */

/* Control kinds on the data channel (above every lattice_op_kind). */
enum {
    CTL_REPLICATE = 100, /* primary -> backup: apply (key, value, expire, version) or remove */
    CTL_STATS = 101,     /* -> server: per-cache stats of that node */
    CTL_META_GET = 102,  /* -> coordinator: answer with the cluster metadata */
    CTL_CREATE = 103,    /* -> coordinator: value = cache spec */
    CTL_DESTROY = 104,   /* -> coordinator: cache = name */
    CTL_PART_SIZE = 105, /* -> server: num = primary entries of one cache on that node */
    CTL_DEMAND = 106,    /* demander -> supplier: key = sender id, value = Demand (node/rebal.c) */
    CTL_SUPPLY = 107,    /* supplier -> demander: key = sender id, value = Supply */
    CTL_DIGEST = 108,    /* -> server: value = digests of its OWNING copies of one cache */
};

/* What a node holds a partition as: its position among the serving owners. */
typedef enum {
    ROLE_NONE = -1,
    ROLE_PRIMARY = 0,
    ROLE_BACKUP = 1,
} owner_role;

struct peer;

/* One cache as this node knows it (from the coordinator's metadata). */
typedef struct cache_def {
    lattice_cache_config cfg;
    char **base;                /* affinity base: consistent ids (sorted as received) */
    size_t n_base;
    uint64_t base_version;
    lattice_affinity *aff;      /* affinity over the base */
    struct peer **live;         /* per affinity node: its live peer (or self), NULL = gone */
    lattice_affinity *ideal;    /* affinity over the live servers when they differ from the base, else NULL */
    struct peer **ideal_live;   /* per ideal node: its peer */
    lattice_store *store;       /* servers only */
    uint64_t *counter;          /* per-partition update counter */
    uint64_t reads, writes, hits, misses;
    uint64_t frozen_until;      /* monotonic ms: writes answer AGAIN until then (base check) */
    struct rebal_cache *rb;     /* rebalance state (node/rebal.c), NULL until first planned */
} cache_def;

/* Serving owners of p: the base's owners filtered to live nodes, primary
 * first.  Fills out[0..max) and returns how many. */
size_t cache_serving_owners(const cache_def *c, uint32_t p, struct peer **out, size_t max);
/* MOVING owners of p: ideal owners (affinity over the live servers) that
 * are not serving it.  Writes reach them, reads do not; issue 5's rebalance
 * fills them with the partition's older entries. */
size_t cache_moving_owners(const cache_def *c, uint32_t p, struct peer **out, size_t max);

/* The replication a primary's write produces (key, value, expiry, version or
 * a remove), valid until the next exec call. */
typedef struct repl_out {
    bool needed;
    bool remove;
    const void *value;
    size_t value_len;
    uint64_t expire_ms;
    uint64_t version;
} repl_out;

/* One operation as executed by a primary (or a reading backup). */
typedef struct exec_in {
    int kind;
    unsigned flags;
    uint32_t partition;
    const void *key;
    size_t key_len;
    const void *value;
    size_t value_len;
    int64_t delta;
    uint64_t ttl_ms;
} exec_in;

/* Result bytes live in *scratch (lt_malloc'd, grown as needed; the caller
 * frees it eventually). */
typedef struct exec_scratch {
    void *old;      /* previous value (store copy) */
    void *buf;      /* built value (increment/append) */
    size_t buf_cap;
} exec_scratch;

void exec_scratch_free(exec_scratch *s);
/* Executes on the local store.  Writes take the next update counter. */
void exec_local(cache_def *c, const exec_in *in, exec_scratch *s, lattice_op_result *r, repl_out *repl);
/* A backup applies a replicated write: put only if newer, or remove. */
lattice_status exec_replicate(cache_def *c, uint32_t partition, const void *key, size_t key_len,
                              const void *value, size_t value_len, uint64_t expire_ms, uint64_t version,
                              bool remove);
uint64_t exec_now_ms(void);


/* ---- the data module (node/data.c) ---- */

typedef struct lattice_data lattice_data;
struct lattice_discovery;

typedef struct lattice_data_config {
    bool client;
    const char *host;               /* bind address of the data ROUTER */
    const uint8_t *secret;          /* NULL = no MAC */
    size_t secret_len;
    const char *const *caches;      /* --cache specs this node brings */
    size_t n_caches;
    int region_mb;                  /* 0 = default */
    int op_timeout_ms;              /* 0 = default */
} lattice_data_config;

/* init binds the data ROUTER (servers) so its address can be advertised as
 * the node attribute data_addr before discovery starts: *attr is "data_addr=tcp://..."
 * (owned by the data module) or NULL for clients. */
lattice_status lattice_data_init(const lattice_data_config *c, lattice_data **out, const char **attr);
lattice_status lattice_data_start(lattice_data *d, struct lattice_discovery *disc);
void lattice_data_stop(lattice_data *d);
void lattice_data_destroy(lattice_data *d);
lattice_data *lattice_node_data(lattice_node *n);

/* Internal calls run on the data thread (api.c): fn gets a result whose
 * value points at a call-specific struct. */
enum { CALL_STATS = 1, CALL_CREATE = 2, CALL_DESTROY = 3, CALL_PARTITIONS = 4, CALL_DIGESTS = 5 };
lattice_status data_call(lattice_data *d, int call, const char *arg, lattice_op_fn fn, void *farg);

/* CALL_STATS result: one entry per (server node). */
typedef struct stats_node {
    char id[64];
    size_t n;
    lattice_cache_node_info *caches; /* caches[i] is the cache names[i] */
    char (*names)[LATTICE_CACHE_NAME_MAX + 1];
    uint64_t *view_major, *base_version; /* per cache: what its rebalance figures were computed on */
} stats_node;
typedef struct stats_result {
    size_t n_caches;
    lattice_cache_config *cfgs;
    size_t n_nodes;
    stats_node *nodes;
} stats_result;

#endif
