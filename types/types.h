/*
 * types/types.h: value semantics - executing one operation of lattice/ops.h
 * on a node's store (prefix exec_).  Pure: a store, its partition counters
 * and the cache's configuration in, a result and the replication it needs
 * out; no network, no thread.  The operation path (ops/) calls it on the
 * primary, on a copy, and for a transaction's sub-operations.
 */
#ifndef LATTICE_TYPES_TYPES_H
#define LATTICE_TYPES_TYPES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lattice/ops.h"
#include "meta/meta.h"
#include "storage/storage.h"

/* A value's type, kept with every entry: in its store row (the store keeps
 * it as lattice_store_entry.type, 0..LATTICE_STORE_TYPE_MAX), in replication
 * and rebalance messages (absent = string), in log records and checkpoints,
 * and as Redis's RDB type byte in DUMP payloads (resp/rdb.c maps them:
 * RESP sees them only as LATTICE_OP_R_TYPE of lattice/ops.h, the same
 * numbers).  Numbers are stable: they are in rows, on the wire and on disk.
 * The collection types' rows and commands are coll.c's and hash.c, list.c,
 * set.c and zset.c's (docs/TYPES.md); every string command answers
 * WRONGTYPE (LATTICE_ERR_WRONGTYPE) on them, and every collection command
 * on a value of another type. */
typedef enum lattice_value_type {
    LATTICE_TYPE_STRING = 0,
    LATTICE_TYPE_HASH = 1,
    LATTICE_TYPE_LIST = 2,
    LATTICE_TYPE_SET = 3,
    LATTICE_TYPE_ZSET = 4,
    LATTICE_TYPE_MAX_ = 4,
} lattice_value_type;

/* The replication a primary's write produces (key, value, expiry, version or
 * a remove), valid until the next exec call. */
typedef struct repl_out {
    bool needed;
    bool remove;
    const void *value;
    size_t value_len;
    uint64_t expire_ms;
    uint64_t version;
    uint8_t type;      /* the value's lattice_value_type (0 = string) */
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
    void *buf;      /* built value (increment/append; a collection's new row) */
    size_t buf_cap;
    char *reply;    /* a collection command's reply (coll.c) */
    size_t reply_len, reply_cap;
    void *items;    /* a collection's decoded elements, its arguments (coll.c) */
    size_t items_cap;
} exec_scratch;

void exec_scratch_free(exec_scratch *s);
/* Executes on the local store.  Writes take the next update counter. */
void exec_local(lattice_meta_cache *c, const exec_in *in, exec_scratch *s, lattice_op_result *r, repl_out *repl);
/* rmw.c: SETRANGE, SETBIT, INCRBYFLOAT (lattice/ops.h), on the primary;
 * and what they share with exec.c's kinds. */
void exec_setrange(lattice_meta_cache *c, const exec_in *in, exec_scratch *s, lattice_op_result *r, repl_out *repl);
void exec_setbit(lattice_meta_cache *c, const exec_in *in, exec_scratch *s, lattice_op_result *r, repl_out *repl);
void exec_incrbyfloat(lattice_meta_cache *c, const exec_in *in, exec_scratch *s, lattice_op_result *r, repl_out *repl);
/* coll.c: LATTICE_OP_COLL_READ and _WRITE (lattice/coll.h), on the primary
 * or a clean copy: the command's reply in r->value (s->reply). */
void exec_coll(lattice_meta_cache *c, const exec_in *in, exec_scratch *s, lattice_op_result *r, repl_out *repl);
/* list.c: LMOVE / RPOPLPUSH of src to dst, keys of one partition: pops an
 * element of src (the tail when where has EXEC_LMOVE_FROM_RIGHT) and pushes
 * it onto dst (its tail with EXEC_LMOVE_TO_RIGHT) in one step, each write
 * handed to wrote as it happens.  r->value: the element as a reply of
 * lattice/coll.h ($ bulk) and num 1, or nil ("_") and num 0 when src holds
 * no list;
 * WRONGTYPE (nothing moves) when src, or dst, holds another type. */
#define EXEC_LMOVE_FROM_RIGHT 0x1u
#define EXEC_LMOVE_TO_RIGHT 0x2u
/* BLMOVE woken from its wait: a source of another type is no list yet (it
 * waits on), as Redis serves a blocked client only from a key of its type. */
#define EXEC_LMOVE_WOKEN 0x4u
typedef void (*exec_wrote_fn)(void *arg, const void *key, size_t key_len, const repl_out *w);
void exec_lmove(lattice_meta_cache *c, uint32_t partition, const void *src, size_t src_len, const void *dst,
                size_t dst_len, unsigned where, exec_scratch *s, lattice_op_result *r, exec_wrote_fn wrote, void *arg);
/* list.c: BLPOP / BRPOP / BZPOPMIN / BZPOPMAX's pop, keys of one partition
 * (the caller checks): key, then the keys packed in others (lattice/coll.h's
 * packing), in order - the first that holds an element pops one (a list's
 * head, its tail with EXEC_BPOP_RIGHT; with EXEC_BPOP_ZSET a sorted set's
 * lowest score, with RIGHT its highest), its write handed to wrote; r->value
 * [key, element] or [key, member, score] as a reply of lattice/coll.h, num 1;
 * with a count (LMPOP, ZMPOP: up to count) [key, [elements]] or
 * [key, [[member, score] ...]].  None holds one: a null array ("*-1"), num 0.
 * The first key on the way of another type: WRONGTYPE, nothing popped. */
#define EXEC_BPOP_RIGHT 0x1u
#define EXEC_BPOP_ZSET 0x2u
/* Woken from its wait: keys of another type are passed over (it waits on
 * when none holds one), where its first run answered WRONGTYPE. */
#define EXEC_BPOP_WOKEN 0x4u
void exec_bpop(lattice_meta_cache *c, uint32_t partition, const void *key, size_t key_len, const void *others,
               size_t others_len, unsigned which, long long count, exec_scratch *s, lattice_op_result *r,
               exec_wrote_fn wrote, void *arg);
/* setop.c: SINTER ... ZRANGESTORE, SMOVE (LATTICE_TXN_SETOP of
 * lattice/txn.h: args its packed arguments, delta the lattice_setop and
 * where its keys are), keys of one partition (the caller checks): r->value
 * the reply as a reply of lattice/coll.h, each write handed to wrote;
 * WRONGTYPE (nothing written) at the first key of another type. */
void exec_setop(lattice_meta_cache *c, uint32_t partition, const void *args, size_t args_len, int64_t delta,
                exec_scratch *s, lattice_op_result *r, exec_wrote_fn wrote, void *arg);
/* Whether the SETOP of delta may write (a destination, SMOVE). */
bool exec_setop_writes(int64_t delta);
/* Removes the key with the partition's next counter and fills repl; the
 * store's status (NOT_FOUND: nothing there, the counter unchanged). */
int exec_remove_entry(lattice_meta_cache *c, const exec_in *in, repl_out *repl);
/* Redis's string2ll (only the canonical decimal form of an int64) and
 * string2ld (strtold over the whole text, not NaN, no blank first). */
bool exec_parse_i64(const void *v, size_t n, int64_t *out);
bool exec_parse_ld(const char *s, size_t n, long double *out);
#define EXEC_LD_TEXT_MAX (5 * 1024) /* Redis's MAX_LONG_DOUBLE_CHARS */
/* Redis's long double text (ld2string, human form) into buf; its length. */
size_t exec_format_ld(char *buf, size_t cap, long double v);
bool exec_scratch_reserve(exec_scratch *s, size_t n);
/* After exec_read_old: true (r answered LATTICE_ERR_WRONGTYPE) when the live
 * entry is not a string - a string kind then changes nothing. */
bool exec_wrong_type(int st, const lattice_store_meta *meta, lattice_op_result *r);
int exec_read_old(lattice_meta_cache *c, const exec_in *in, exec_scratch *s, lattice_store_meta *meta);
uint64_t exec_expiry_for(const lattice_meta_cache *c, uint64_t ttl_ms);
/* Writes (key, value, expire) with the partition's next counter and fills repl. */
int exec_write_entry(lattice_meta_cache *c, const exec_in *in, const void *v, size_t vlen, uint64_t expire,
                     repl_out *repl);
/* A read's answer (GET, CONTAINS, TTL) from the store's status, value and
 * meta, into r (zeroed by the caller): the same on the primary, on a clean
 * backup (exec_local) and on the calling thread (ops/fast.c).  Every read
 * of a live entry reports its type in r->flags (LATTICE_OP_R_TYPE); a GET
 * of a non-string is LATTICE_ERR_WRONGTYPE, as Redis's GET. */
void exec_read_answer(int kind, int st, const void *val, const lattice_store_meta *meta, lattice_op_result *r);
/* exec_write_entry for a value of type (a lattice_value_type): what keeps
 * a value's type when it moves (RENAME, COPY) or is written back (undo). */
int exec_write_typed(lattice_meta_cache *c, const exec_in *in, const void *v, size_t vlen, uint64_t expire,
                     uint8_t type, repl_out *repl);
/* A backup applies a replicated write: put only if newer, or remove. */
lattice_status exec_replicate(lattice_meta_cache *c, uint32_t partition, const void *key, size_t key_len,
                              const void *value, size_t value_len, uint64_t expire_ms, uint64_t version,
                              bool remove);
/* The same for a value of type (a lattice_value_type; INVAL above
 * LATTICE_STORE_TYPE_MAX): the copy keeps the primary's type. */
lattice_status exec_replicate_typed(lattice_meta_cache *c, uint32_t partition, const void *key, size_t key_len,
                                    const void *value, size_t value_len, uint64_t expire_ms, uint64_t version,
                                    bool remove, uint8_t type);

#endif
