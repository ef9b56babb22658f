/*
 * Internal to ops/: what the control files - control.c (the metadata
 * exchange), base_switch.c, report.c and calls.c - offer each other.
 */
#ifndef LATTICE_OPS_CONTROL_H
#define LATTICE_OPS_CONTROL_H

#include "ops_int.h"

/* A kept copy one server reported in a base check (salvage.c). */
typedef struct salvage_rep {
    char cache[LATTICE_CACHE_NAME_MAX + 1];
    char node[64], inc[64];
    uint32_t partition;
    uint64_t counter, entries;
} salvage_rep;

/* control.c */
/* The new metadata version to every server and to the client nodes. */
void control_push_meta(lattice_ops *d);
/* A control request to the coordinator (op: the caller's, retried when it
 * cannot be sent; NULL: the node's own, e.g. a pull). */
void control_send_ctl(lattice_ops *d, int kind, const char *cache, const char *value, opx *op);

/* base_switch.c */
size_t base_live_servers(const lattice_ops *d);
/* FNV-1a over the live servers' node ids (topology order). */
uint64_t base_servers_hash(const lattice_ops *d);
void base_start_check(lattice_ops *d);
void base_finish_check(lattice_ops *d, bcast *b);
void base_serve_prepare(lattice_ops *d, const char *name, uint64_t version, const char *coordinator,
                        const origin *org, uint64_t self_pend);
void base_serve_parked(lattice_ops *d);

/* report.c */
Latdata__NodeCacheStats *report_node_stats(lattice_ops *d, lattice_meta_cache *c);
void report_bcast_part(lattice_ops *d, bcast *b, const Latdata__Resp *rs);
void report_settle_bcast(lattice_ops *d, pend *p, const Latdata__Resp *rs);
void report_start_stats(lattice_ops *d, opx *op);

/* calls.c */
lattice_status calls_coord_write(lattice_ops *d, int call, const char *arg, int64_t *num);
int calls_of_ctl(int kind);

#endif
