/*
 * Internal to ops/: the control kinds of the data channel, and what
 * executing one operation on the local store takes (primary.c, backup.c).
 * Everything here is owned and touched by the data thread only.  Design:
 * docs/CACHES.md.
 */
#ifndef LATTICE_OPS_CACHE_INT_H
#define LATTICE_OPS_CACHE_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "lattice/clock.h"
#include "lattice/ops.h"
#include "partition/partition.h"
#include "meta/meta.h"
#include "storage/storage.h"
#include "types/types.h"
#include "fabric/fabric.h" /* LATTICE_DATA_PROTO, DATA_MAX_FRAME */


/* Control kinds on the data channel (above every lattice_op_kind). */
enum {
    CTL_REPLICATE = 100, /* primary -> backup: apply (key, value, expire, version) or remove */
    CTL_STATS = 101,     /* -> server: per-cache stats of that node */
    CTL_META_GET = 102,  /* -> coordinator: answer with the cluster metadata */
    CTL_CREATE = 103,    /* -> coordinator: value = cache spec */
    CTL_DESTROY = 104,   /* -> coordinator: cache = name */
    CTL_PART_SIZE = 105, /* -> server: num = primary entries of one cache on that node */
    CTL_DEMAND = 106,    /* demander -> supplier: key = sender id, value = Demand (rebal_exec.c) */
    CTL_SUPPLY = 107,    /* supplier -> demander: key = sender id, value = Supply */
    CTL_DIGEST = 108,    /* -> server: value = digests of its OWNING copies of one cache */
    CTL_CLEAN = 109,     /* primary -> copies: partition's writes up to `committed` are acknowledged */
    CTL_RESET_LOST = 110,/* -> coordinator: cache = name; num = the LOST partitions given up */
    CTL_REPLICATE_TXN = 111, /* primary -> copies: a transaction's writes, applied together (txn.c) */
    CTL_LEVEL = 112,     /* copy -> its new primary: rewrite key (version: the copy's) on every copy (takeover.c) */
    CTL_RESTART_REPORT = 130,/* coordinator -> server, whole-grid restart: its recovered copies (restart.c) */
    CTL_RESTART_PUSH = 131,  /* coordinator -> keeper: send partition's kept copy to node `key` */
    CTL_RESTART_LOAD = 132,  /* keeper -> owner: a slice of the kept copy (remove: clear first; delta: last) */
};



#endif
