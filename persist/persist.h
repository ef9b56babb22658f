/*
 * Lattice persistence (docs/PERSISTENCE.md): a node's write-ahead log, its
 * checkpoints and its restart from them, in one data directory.
 *
 *   record      one change of a store: (cache, partition, update counter,
 *               kind, key, value, expiry), framed by its length and a
 *               CRC32C (lt_rec_encode / lt_rec_decode).  The log and the
 *               checkpoints are sequences of records.
 *   log (wal)   segment files wal-<LSN>.log of whole records.  An LSN is a
 *               byte position in the log as one stream; a record's LSN is
 *               where it starts, a segment's name the LSN of its first
 *               record.  Appends (any thread; the stores' change hook)
 *               copy the record into memory; the log's own thread writes
 *               them and fsyncs by the mode, then publishes the durable
 *               LSN, calls the on_durable hook and, unless the hook
 *               answered for it, writes 1 to the notify eventfd.
 *   checkpoint  checkpoint-<LSN>.ckpt: every live entry of every store
 *               with each cache's spec and partition counters, as of LSN;
 *               written to a temporary file, fsynced, renamed into place;
 *               then the segments it covers are deleted.
 *   recovery    lt_persist_open loads the newest checkpoint and replays
 *               the log after it into stores on the given region; a torn
 *               or corrupt record ends the log there (the files are cut,
 *               the cut logged).
 *
 * Threads: the log has one writer thread.  lt_persist_* other than append
 * and the durable/failed reads belong to one thread (the data thread).
 */
#ifndef LATTICE_PERSIST_H
#define LATTICE_PERSIST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lattice/status.h"
#include "storage/storage.h"

/* ---------------------------------------------------------------- records */

enum {
    LT_REC_PUT = 1,      /* key, value, expire_ms, version */
    LT_REC_REMOVE = 2,   /* key; version: the counter the remove took (0 when unknown) */
    LT_REC_CLEAR = 3,    /* every entry of the partition */
    LT_REC_DROP = 4,     /* the cache and all its entries are gone */
    LT_REC_CACHE = 5,    /* value: the cache's spec (lattice_cache_config_format); version: its partitions */
    LT_REC_COUNTERS = 6, /* checkpoints: value = partitions x u64 little-endian update counters */
    LT_REC_END = 7,      /* checkpoints: the last record; version = records before it */
    LT_REC_MARKS = 8,    /* checkpoints: value = partitions x u64 little-endian delta marks
                          * (LT_MARK_NONE: none; docs/PERSISTENCE.md, "Delta rejoin") */
    LT_REC_KIND_MAX_ = 8,
};

#define LT_REC_HEAD 8        /* u32 crc32c of the rest, u32 body length */
#define LT_REC_FIXED 40      /* the body's fixed part */
#define LT_REC_MAX_CACHE 255
#define LT_REC_MAX_BODY (LT_REC_FIXED + LT_REC_MAX_CACHE + 65535u + (256u << 20) + 8u * 16384u)

typedef struct lt_rec {
    uint8_t kind;
    uint64_t lsn;        /* the record's position in its log (0 in a checkpoint) */
    const char *cache;   /* not NUL-terminated */
    size_t cache_len;    /* 1..255 */
    uint32_t partition;
    uint64_t version;
    uint64_t expire_ms;
    const void *key;
    size_t key_len;
    const void *value;
    size_t value_len;
    uint8_t type;        /* PUT: the value's type (lattice_store_entry.type; 0 = string) */
} lt_rec;

/* Decoding outcomes besides LATTICE_OK. */
enum { LT_REC_TORN = 1, LT_REC_BAD = 2 };

uint32_t lt_crc32c(uint32_t crc, const void *p, size_t n);
size_t lt_rec_size(const lt_rec *r);
/* Writes lt_rec_size(r) bytes to out. */
void lt_rec_encode(const lt_rec *r, uint8_t *out);
/* One record from buf[0..avail): LATTICE_OK (*used its size; r's pointers
 * point into buf), LT_REC_TORN (the bytes end inside the record: a cut
 * write), LT_REC_BAD (a wrong CRC, length or field).  *why says what. */
int lt_rec_decode(const uint8_t *buf, size_t avail, lt_rec *r, size_t *used, const char **why);

/* ------------------------------------------------------------- the node */

typedef enum lt_wal_fsync {
    LT_WAL_GROUP = 0,  /* default: one fsync per batch; a batch gathers until the round of appends under
                          way ends (lt_persist_hold), <= LT_WAL_GROUP_US */
    LT_WAL_ALWAYS = 1, /* each batch written and fsynced at once (fsync before every ack) */
    LT_WAL_OFF = 2,    /* written (survives kill -9), never fsynced (not a power cut) */
} lt_wal_fsync;

#define LT_WAL_GROUP_US 1000                 /* group: the longest a batch waits for more records */
#define LT_WAL_GROUP_BYTES (256u << 10)      /* group: a batch this large goes at once */
#define LT_WAL_KEEP_BYTES (1u << 20)         /* a batch buffer grown past this by a burst is freed once written */
#define LT_WAL_SEGMENT_BYTES (64ull << 20)   /* a segment is closed past this size */
#define LT_WAL_PREFILL_BYTES (1u << 20)      /* a segment is zeroed this far ahead of its records */
#define LT_CHECKPOINT_LOG_BYTES (256ull << 20) /* default: a checkpoint once the log holds this much */

/* Parses "always", "group", "off". */
int lt_wal_fsync_parse(const char *s, lt_wal_fsync *out);
const char *lt_wal_fsync_name(lt_wal_fsync m);

typedef struct lt_persist lt_persist;

typedef struct lt_persist_config {
    const char *dir;            /* created when missing */
    lt_wal_fsync fsync;
    lattice_region *region;     /* recovered stores live here */
    int notify_fd;              /* eventfd written when the durable LSN moves or the log fails; -1 none */
    uint64_t segment_bytes;     /* 0: LT_WAL_SEGMENT_BYTES */
    uint64_t checkpoint_bytes;  /* 0: LT_CHECKPOINT_LOG_BYTES */
    uint32_t group_us;          /* group: the longest a held batch waits; 0: LT_WAL_GROUP_US */
    /* Called on the log's thread each time the durable LSN moved, before
     * the notify: true when it handed out what waited on it itself, so the
     * eventfd is not written (a wake-up saved).  The thread is an RCU reader
     * while the hook is set.  NULL: the eventfd alone. */
    bool (*on_durable)(void *arg);
    void *on_durable_arg;
} lt_persist_config;

/* Recovers what the directory holds, then starts the log after it.  IO with
 * a logged reason when the directory cannot be used or the data does not fit
 * the region.  The caller's thread must be an RCU reader (storage.h). */
lattice_status lt_persist_open(const lt_persist_config *c, lt_persist **out);
/* Stops the log thread after writing (and, unless off, fsyncing) every
 * record; frees the recovered stores nobody took. */
void lt_persist_close(lt_persist *p);
const char *lt_persist_dir(const lt_persist *p);

/* What recovery found: caches with their spec, store and counters. */
size_t lt_persist_recovered_count(const lt_persist *p);
const char *lt_persist_recovered_spec(const lt_persist *p, size_t i); /* NULL once taken or dropped */
/* The recovered store of the cache named name (its spec must equal spec):
 * the caller owns store and counter (lt_free) from now on.  NOT_FOUND. */
lattice_status lt_persist_take(lt_persist *p, const char *name, const char *spec, lattice_store **store,
                               uint64_t **counter, uint32_t partitions);
/* The delta marks the newest checkpoint held for recovered copy i (per
 * partition; LT_MARK_NONE: none, also for a partition cleared since), or
 * NULL when it held none. */
#define LT_MARK_NONE UINT64_MAX
const uint64_t *lt_persist_recovered_marks(const lt_persist *p, size_t i);
/* As lt_persist_take, for a copy the node keeps aside rather than serves
 * (a delta base, grid/salvage.c): the caller also owns *marks (NULL when
 * none), and a DROP record goes to the log, so a later restart does not
 * find the copy again. */
lattice_status lt_persist_take_aside(lt_persist *p, size_t i, lattice_store **store, uint64_t **counter,
                                     uint64_t **marks);
/* Frees every recovered copy not taken (logged with why), and appends a DROP
 * record for each: call it before attaching a store of the same name. */
void lt_persist_discard(lt_persist *p, const char *why);
/* Records counted at recovery: loaded from the checkpoint, replayed from the log. */
void lt_persist_recovery_figures(const lt_persist *p, uint64_t *ckpt_entries, uint64_t *log_records,
                                 uint64_t *cut_bytes, uint64_t *ms);

/* DIR/node.id without opening the directory: false when there is none. */
bool lt_persist_peek_cid(const char *dir, char *out, size_t cap);
/* The node's previous identity, kept in DIR/node.id ("" when none). */
const char *lt_persist_prev_cid(const lt_persist *p);
lattice_status lt_persist_save_cid(lt_persist *p, const char *cid);
/* DIR/base: the affinity base of each cache as this node last applied it
 * ("NAME BASE_VERSION CID..." a line each; docs/PERSISTENCE.md "Whole-grid
 * restart"), replaced whole.  read: lt_malloc'd text, NULL when none. */
#define LT_PERSIST_BASES_MAX (1u << 20)
lattice_status lt_persist_save_bases(lt_persist *p, const char *text);
char *lt_persist_read_bases(const lt_persist *p);
/* DIR/name := text (replaced whole), and read back (lt_malloc'd, NULL when
 * absent; at most LT_PERSIST_BASES_MAX bytes). */
lattice_status lt_persist_save_text(const lt_persist *p, const char *name, const char *text);
char *lt_persist_read_text(const lt_persist *p, const char *name);
/* Recovered copy i before it is taken or dropped (read only): false when
 * there is none. */
bool lt_persist_recovered_copy(const lt_persist *p, size_t i, const char **name, lattice_store **store,
                               const uint64_t **counter, uint32_t *partitions);

/* Appends one record (any thread; never blocks on IO).  Returns the LSN
 * just past it; 0 when it could not be kept (no memory: logged, the log is
 * failed until a checkpoint). */
uint64_t lt_persist_append(lt_persist *p, const lt_rec *r);
/* A round of appends begins / ends (the data thread's batch of ops): with
 * `group` a batch that starts meanwhile waits for the round's end (at most
 * LT_WAL_GROUP_US), so one fsync takes the whole round.  Nestable, any
 * thread. */
void lt_persist_hold(lt_persist *p);
void lt_persist_unhold(lt_persist *p);
/* The LSN past the last appended record, and the one up to which the log
 * is durable (by the mode). */
uint64_t lt_persist_appended(lt_persist *p);
uint64_t lt_persist_durable(lt_persist *p);
/* Non-zero while the log cannot write (a full disk, an IO error): *msg
 * names the directory and the error. */
bool lt_persist_failed(lt_persist *p, const char **msg);
/* Bytes in the log since the last checkpoint; whether one is due. */
uint64_t lt_persist_log_bytes(lt_persist *p);
bool lt_persist_checkpoint_due(lt_persist *p);

/* Store change hook for one cache's store (storage.h): each change becomes
 * a record.  The returned handle lives until lt_persist_close. */
typedef struct lt_persist_cache lt_persist_cache;
lt_persist_cache *lt_persist_cache_attach(lt_persist *p, lattice_store *s, const char *name, const char *spec,
                                          uint32_t partitions);
/* The partitions' update counters of the store's cache (read by the hook,
 * on the writing thread): a REMOVE record carries the partition's counter
 * then (at least the removed entry's version). */
void lt_persist_cache_counters(lt_persist_cache *pc, const uint64_t *counter);
/* The cache is gone: a DROP record; the handle is detached from its store. */
void lt_persist_cache_drop(lt_persist_cache *pc);

/* Checkpoints: the caller (the one writer of the stores) gives every cache;
 * the checkpoint holds the state after every record appended so far.  Blocks
 * for the writing. */
typedef struct lt_persist_ckpt_cache {
    const char *name, *spec;
    lattice_store *store;
    const uint64_t *counter;
    uint32_t partitions;
    const uint64_t *marks; /* NULL: no MARKS record */
} lt_persist_ckpt_cache;
lattice_status lt_persist_checkpoint(lt_persist *p, const lt_persist_ckpt_cache *c, size_t n);

/* Write a checkpoint file (no log involved): tests, the checkpoint above. */
lattice_status lt_checkpoint_write(const char *path, uint64_t lsn, const lt_persist_ckpt_cache *c, size_t n);

#endif
