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

#define LATTICE_DATA_PROTO 1
/* A data frame above this is dropped and counted.  One value of the largest
 * max_value_bytes (512 MiB) plus its key (<= 16 MiB) and framing must fit:
 * a frame holds at least one whole request (chunk_req). */
#define DATA_MAX_FRAME (544u << 20)

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
    CTL_RESTART_REPORT = 130,/* coordinator -> server, whole-grid restart: its recovered copies (restart.c) */
    CTL_RESTART_PUSH = 131,  /* coordinator -> keeper: send partition's kept copy to node `key` */
    CTL_RESTART_LOAD = 132,  /* keeper -> owner: a slice of the kept copy (remove: clear first; delta: last) */
};

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
void exec_local(lattice_meta_cache *c, const exec_in *in, exec_scratch *s, lattice_op_result *r, repl_out *repl);
/* rmw.c: SETRANGE, SETBIT, INCRBYFLOAT (lattice/ops.h), on the primary;
 * and what they share with primary.c's kinds. */
void exec_setrange(lattice_meta_cache *c, const exec_in *in, exec_scratch *s, lattice_op_result *r, repl_out *repl);
void exec_setbit(lattice_meta_cache *c, const exec_in *in, exec_scratch *s, lattice_op_result *r, repl_out *repl);
void exec_incrbyfloat(lattice_meta_cache *c, const exec_in *in, exec_scratch *s, lattice_op_result *r, repl_out *repl);
/* Redis's long double text (ld2string, human form) into buf; its length. */
size_t exec_format_ld(char *buf, size_t cap, long double v);
bool exec_scratch_reserve(exec_scratch *s, size_t n);
int exec_read_old(lattice_meta_cache *c, const exec_in *in, exec_scratch *s, lattice_store_meta *meta);
uint64_t exec_expiry_for(const lattice_meta_cache *c, uint64_t ttl_ms);
/* Writes (key, value, expire) with the partition's next counter and fills repl. */
int exec_write_entry(lattice_meta_cache *c, const exec_in *in, const void *v, size_t vlen, uint64_t expire,
                     repl_out *repl);
/* A backup applies a replicated write: put only if newer, or remove. */
lattice_status exec_replicate(lattice_meta_cache *c, uint32_t partition, const void *key, size_t key_len,
                              const void *value, size_t value_len, uint64_t expire_ms, uint64_t version,
                              bool remove);


#endif
