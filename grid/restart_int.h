/*
 * Internal to grid/: the state of a whole-grid restart, shared by restart.c
 * (reports, waiting, the decision, the lifecycle) and restart_restore.c
 * (restoring: the rounds of digests, and sending the kept copies).
 */
#ifndef LATTICE_GRID_RESTART_INT_H
#define LATTICE_GRID_RESTART_INT_H

#include "grid_int.h"

#define ROUND_MS 500
#define LOAD_SLICE (1u << 20)

typedef enum restart_phase_id {
    RESTART_NONE,      /* no restart: the grid started as usual, or this node is not its coordinator */
    RESTART_WAITING,   /* the coordinator waits for the baseline's reports */
    RESTART_RESTORING, /* the metadata started; owners get the kept copies */
    RESTART_DONE,
} restart_phase_id;

typedef struct rs_copy {
    uint64_t counter, size, hash;
} rs_copy;

typedef struct rs_cache {
    char name[LATTICE_CACHE_NAME_MAX + 1];
    char *spec;
    uint64_t base_version;
    char **cids;
    size_t n_cids;
    uint32_t parts;
    rs_copy *copy;
} rs_cache;

typedef struct rs_report {
    char node[64];
    char cid[160];
    rs_cache *c;
    size_t n;
} rs_report;

typedef struct rs_keep { /* per partition: the copy kept */
    char cid[160];       /* its holder's consistent id; "" none: no node holds anything of it */
    uint64_t rank_bv;
    rs_copy copy;
    uint64_t since;      /* when an owner was first seen without it (0: none is) */
} rs_keep;

typedef struct rs_dec {
    char name[LATTICE_CACHE_NAME_MAX + 1];
    uint32_t parts;
    rs_keep *keep;
    bool derived;           /* a coordinator that took over restoring: keep[] from the owners' digests */
    lattice_grid_digests dg; /* the round's digests */
} rs_dec;

struct grid_restart {
    restart_phase_id phase;
    int64_t wait_ms;
    uint64_t since, last_round, round;
    rs_report *rep;
    size_t n_rep;
    rs_dec *dec;
    size_t n_dec;
    size_t round_left;
    bool round_failed;
    uint64_t pushes, started_ms, waiting_logged;
    bool publish; /* restoring ended: the metadata is to be published */
    char *reloading; /* DIR/reloading as written: "CACHE PARTITION" lines this node is loading */
    bool reload_done_due;
};

/* The reports' and the decision's byte encoding: little-endian u64s and
 * length-prefixed strings; a failed write or a short read sticks. */
typedef struct wbuf {
    uint8_t *b;
    size_t n, cap;
    bool failed;
} wbuf;

typedef struct rbuf {
    const uint8_t *b;
    size_t n, at;
    bool bad;
} rbuf;

void rs_w_put(wbuf *w, const void *p, size_t n);
void rs_w_u64(wbuf *w, uint64_t v);
uint64_t rs_r_u64(rbuf *r);
const uint8_t *rs_r_bytes(rbuf *r, uint64_t len);
/* Whether DIR/reloading's text names partition p of cache name (a copy
 * this node was loading when it stopped: never kept). */
bool rs_reloading(const char *text, const char *name, uint32_t p);
/* The decision of one cache (CacheDef.restore_keep) into dc->keep. */
bool rs_keep_decode(rs_dec *dc, const uint8_t *b, size_t len);

#endif
