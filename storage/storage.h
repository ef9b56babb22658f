/*
 * Lattice storage: data regions of fixed-size pages, and stores (one cache's
 * data on one node) that index entries in those pages per partition.
 *
 *   region  - a bounded set of pages (page size 1024..16384, power of two).
 *             Memory is mapped from the OS in 1 MiB chunks as needed and
 *             pre-faulted when mapped, never on the insert path of a row.
 *             Data pages are slotted: an item table after the page header,
 *             rows growing from the back.  A row is addressed by a link
 *             (page id, item id) that stays valid while other rows on the page
 *             come and go: compaction moves bytes, never item ids.  Rows larger
 *             than a page are split into fragments chained by links.  A free
 *             list keeps data pages in buckets by free space; emptied pages go
 *             to a reuse list that is drained before new memory is mapped;
 *             beyond a slack, their memory goes back to the OS
 *             (lattice_region_release) and is faulted in again when needed.
 *   store   - `partitions` indexes (open-addressing tables, key -> link) over one
 *             region; several stores may share one region.  Every entry has a
 *             caller-chosen 64-bit version and an optional absolute expire time.
 *
 * Threads and RCU (liburcu memb flavour)
 *   Every thread that calls any lattice_store_* function, or
 *   lattice_region_read, must be registered with rcu_register_thread() (and
 *   unregister before it exits).  Nothing fails loudly if it is not: the
 *   thread's reads are simply not protected.
 *   Readers (get, get_all, count, cursors) never take a lock and never wait
 *   for a lock holder: they take rcu_read_lock themselves, look the key up in
 *   the partition's table and copy the row out of its page under a per-page
 *   sequence counter, retrying when a writer changed the page meanwhile (at worst they
 *   spin for the few hundred nanoseconds a writer spends inside one page).
 *   Metrics take the region's lane locks briefly.  Region pages
 *   are never unmapped before the region is destroyed, so a reader can at
 *   worst read a stale page, which the sequence check rejects; replaced index
 *   tables are freed only after an RCU grace period.  So a reader never returns a
 *   torn or recycled row: it returns a value that the key held at some
 *   instant during the call.
 *   Writers (put, remove, batch insert, clear, expire) serialise per
 *   partition (a mutex per partition) and, for the short time they change
 *   pages, on a lane of the region (a region of max_mb has one lane per
 *   8 MiB, up to 8: each its own free list and lock).  A thread writes new
 *   rows through a lane of its own (threads take lanes round robin), and
 *   changes or frees a row under the lane of the row's page.  Lock order:
 *   partition, then lane.  Any number of writers may run at once; writers
 *   to different partitions run in parallel throughout, each filling its
 *   own pages, as long as there are no more writer threads than lanes.
 *   Memory is mapped and faulted in outside every lock.
 *   Do not call store functions from inside rcu_read_lock(): destroy waits
 *   for grace periods (rcu_barrier).
 *
 * Memory: every allocation goes through lattice/alloc.h; a failed allocation
 * returns LATTICE_ERR_NOMEM and leaves the store exactly as it was.
 */
#ifndef LATTICE_STORAGE_H
#define LATTICE_STORAGE_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

#include "lattice/status.h"

/* ------------------------------------------------------------------ region */

typedef struct lattice_region lattice_region;

/* What a write does when no page has room and the region is at its maximum. */
typedef enum lattice_region_policy {
    LATTICE_REGION_REJECT = 0, /* the write fails with LATTICE_ERR_REGION_FULL; nothing stored changes */
    LATTICE_REGION_EVICT = 1,  /* random-2-LRU: sample two pages, evict the entries of the one read
                                  or written least recently; repeat until the row fits */
} lattice_region_policy;

#define LATTICE_REGION_BUCKETS 32       /* free-list buckets, each page_size/32 bytes wide */
#define LATTICE_REGION_MIN_PAGE 1024
#define LATTICE_REGION_MAX_PAGE 16384
#define LATTICE_REGION_DEFAULT_PAGE 4096
#define LATTICE_REGION_CHUNK (1u << 20) /* memory is mapped in chunks of this many bytes */

typedef struct lattice_region_config {
    const char *name;             /* for logs; may be NULL */
    uint32_t page_size;           /* power of two in [1024, 16384]; 0 means 4096 */
    uint64_t max_mb;              /* the bound, in MiB (>= 1) */
    uint64_t prealloc_mb;         /* map and pre-fault this much at create (<= max_mb) */
    lattice_region_policy policy; /* when full */
} lattice_region_config;

/* A link names a row: page id in bits 16..47, item id in the low 16.  Links
 * returned by inserts also carry, in bits 48..63, where the row sat in its
 * page when written: readers only prefetch that address (it goes stale when
 * the page is compacted, which costs nothing but the prefetch).  Compare
 * links with LATTICE_LINK_SAME. */
#define LATTICE_LINK(page, item) (((uint64_t)(page) << 16) | (uint16_t)(item))
#define LATTICE_LINK_PAGE(link) ((uint32_t)((link) >> 16))
#define LATTICE_LINK_ITEM(link) ((uint16_t)((link) & 0xffff))
#define LATTICE_LINK_SAME(a, b) ((((a) ^ (b)) & 0xffffffffffffull) == 0)

/* Page kinds reported by lattice_region_page_inspect. */
/* RELEASED: empty, its memory given back to the OS (lattice_region_release). */
enum { LATTICE_PAGE_UNMAPPED = 0, LATTICE_PAGE_REUSE = 1, LATTICE_PAGE_DATA = 2, LATTICE_PAGE_RELEASED = 3 };

typedef struct lattice_region_page_info {
    int kind;           /* LATTICE_PAGE_* */
    uint32_t free;      /* bytes a row could use after compaction (incl. item slots) */
    uint32_t items;     /* item slots in the table (used and free) */
    uint32_t live;      /* rows on the page */
    int bucket;         /* free-list bucket, or -1 when in none (full or reuse list) */
} lattice_region_page_info;

typedef struct lattice_region_metrics {
    uint64_t page_size;
    uint64_t pages_max;        /* the bound */
    uint64_t pages_mapped;     /* memory taken from the OS, in pages */
    uint64_t pages_released;   /* of those, empty pages whose memory went back to the OS */
    uint64_t pages_data;       /* pages holding rows */
    uint64_t pages_reuse;      /* emptied pages on the reuse list */
    uint64_t pages_full;       /* data pages in no bucket (too little room for any row) */
    uint64_t pages_in_bucket[LATTICE_REGION_BUCKETS];
    uint64_t rows;             /* row pieces stored (a fragmented entry counts each piece) */
    uint64_t row_bytes;        /* bytes of those rows incl. row headers, excl. item slots */
    uint64_t evictions;        /* entries evicted because the region was full */
} lattice_region_metrics;

/* Creates a region.  INVAL for a bad page size or max_mb == 0 or prealloc > max. */
int lattice_region_create(const lattice_region_config *cfg, lattice_region **out);
/* Frees all memory.  Every store using the region must be destroyed first. */
void lattice_region_destroy(lattice_region *r);

uint32_t lattice_region_page_size(const lattice_region *r);
/* The largest row (header + key + value bytes) that fits one page unfragmented. */
uint32_t lattice_region_page_payload(const lattice_region *r);

void lattice_region_metrics_get(lattice_region *r, lattice_region_metrics *m);
/* Gives the memory of empty pages back to the OS (madvise MADV_DONTNEED),
 * beyond slack_pages of them kept resident (LATTICE_REGION_SLACK_AUTO: a
 * chunk, or a 32nd of the pages holding rows, whichever is more, and only
 * once 64 or more pages are beyond it, so a region that shrinks a little and
 * grows again pays no page faults) and never below the
 * preallocated pages; at most max_pages per call.
 * The pages stay the region's: a writer that needs a page takes them back
 * before mapping new memory, so the bound is unchanged.  Returns the pages
 * released (0 when the page size is below the OS's).  Takes each lane lock
 * in turn: safe beside writers and lock-free readers. */
#define LATTICE_REGION_SLACK_AUTO UINT32_MAX
uint32_t lattice_region_release(lattice_region *r, uint32_t max_pages, uint32_t slack_pages);
/* Page details (tests and diagnostics).  Takes every lane lock. */
int lattice_region_page_inspect(lattice_region *r, uint32_t page, lattice_region_page_info *info);
/* Walks every page and free-list bucket and checks the layout invariants
 * (rows inside the page and disjoint, item table and free counts consistent,
 * each page in exactly the bucket its free space says).  Returns LATTICE_OK or
 * LATTICE_ERR_PROTO after logging the first violation.  Takes every lane lock. */
int lattice_region_check(lattice_region *r);
/* Marks the passing of time for idle times (lattice_store_idle_ms): call
 * about once a second (more often is a no-op) with a monotonic clock in ms. */
void lattice_region_tick(lattice_region *r, uint64_t now_ms);

/* ----------------------------------------------------------------- entries */

/* One entry as written.  Keys are 1..LATTICE_STORE_MAX_KEY bytes, values
 * 0..LATTICE_STORE_MAX_VALUE bytes. */
#define LATTICE_STORE_MAX_KEY 65535u
#define LATTICE_STORE_MAX_VALUE (256u << 20)
#define LATTICE_STORE_MAX_PARTITIONS 16384u

/* An entry's value type: a small number the store keeps with the entry and
 * gives back with it, without knowing what it means (types/types.h names
 * them: 0 is a string).  0..LATTICE_STORE_TYPE_MAX; 0 costs nothing in a
 * row, and every row written before types existed reads as 0. */
#define LATTICE_STORE_TYPE_MAX 7u

typedef struct lattice_store_entry {
    uint32_t partition;
    const void *key;
    size_t key_len;
    const void *value;
    size_t value_len;
    uint64_t expire_ms; /* absolute, ms since the Unix epoch (the store's clock); 0 = never */
    uint64_t version;   /* set by the caller: the per-partition update counter */
    uint8_t type;       /* value type, <= LATTICE_STORE_TYPE_MAX (INVAL above); 0 = string */
} lattice_store_entry;

/* An entry as read; pointers are valid only during the callback that gets it. */
typedef struct lattice_store_item {
    uint32_t partition;
    const void *key;
    size_t key_len;
    const void *value;
    size_t value_len;
    uint64_t expire_ms;
    uint64_t version;
    uint8_t type;       /* the entry's value type (0 = string) */
} lattice_store_item;

/* Return non-zero to stop the walk. */
typedef int (*lattice_store_visit_fn)(void *arg, const lattice_store_item *item);

/* Region-level row operations: the store is built on these; benchmarks and
 * page-layout tests use them directly.  Rows written here belong to no store
 * (eviction skips them).  insert_batch packs as many rows as fit into each
 * page under one page acquisition; on error it stops, and *done rows (whose
 * links are in links[0..*done)) stay written.  read copies one row out (it
 * does not need rcu_read_lock) and calls fn; NOT_FOUND when the link names no
 * row.  remove frees a row and its fragments. */
int lattice_region_insert(lattice_region *r, const lattice_store_entry *e, uint64_t *link);
int lattice_region_insert_batch(lattice_region *r, const lattice_store_entry *e, size_t n,
                                uint64_t *links, size_t *done);
int lattice_region_read(lattice_region *r, uint64_t link, lattice_store_visit_fn fn, void *arg);
int lattice_region_remove(lattice_region *r, uint64_t link);

/* ------------------------------------------------------------------- store */

typedef struct lattice_store lattice_store;
typedef struct lattice_store_cursor lattice_store_cursor;

typedef struct lattice_store_config {
    const char *name;      /* for logs; may be NULL */
    uint32_t partitions;   /* power of two in [1, 16384] */
    lattice_region *region;
    /* Clock for expiry, ms since the epoch; NULL = CLOCK_REALTIME.  Tests pass their own. */
    uint64_t (*clock_ms)(void *arg);
    void *clock_arg;
} lattice_store_config;

/* Flags for put, put_all, insert_batch. */
#define LATTICE_STORE_IF_ABSENT 0x1  /* only when no live entry: else LATTICE_ERR_EXISTS */
#define LATTICE_STORE_IF_PRESENT 0x2 /* only over a live entry: else LATTICE_ERR_NOT_FOUND */
#define LATTICE_STORE_IF_NEWER 0x4   /* only when entry.version > the stored version (or no
                                        live entry): else LATTICE_ERR_EXISTS, nothing changed */

typedef struct lattice_store_meta {
    size_t value_len;
    uint64_t expire_ms;
    uint64_t version;
    uint8_t type;       /* the entry's value type (0 = string) */
} lattice_store_meta;

typedef struct lattice_store_metrics {
    uint64_t entries;      /* indexed entries (incl. expired ones not yet reclaimed) */
    uint64_t expirations;  /* expired entries reclaimed */
    uint64_t evictions;    /* entries evicted from this store */
    uint64_t index_bytes;  /* index memory: the partitions' tables (12.8 bytes a slot + header) */
    uint64_t index_buckets;/* home slots of the partitions' tables (load kept in 0.62..0.81) */
    lattice_region_metrics region;
} lattice_store_metrics;

/* Registers the store with its region (at most 255 stores per region). */
int lattice_store_create(const lattice_store_config *cfg, lattice_store **out);
/* Eviction across copies.  A region with policy evict frees room by evicting
 * entries of the stores on it; a grid keeps its copies equal by letting only
 * a partition's primary evict, and by sending each eviction to the other
 * copies like a remove.  may_evict (NULL: every partition) says whether this
 * store's entries of a partition may be evicted here; evicted hears of each
 * entry evicted from this store, before its row is freed (key valid only
 * during the call; version is the entry's).  Both are called by the thread
 * whose write needs room, with a partition lock of this store and a lane
 * lock of the region held: they must not call any store or region
 * function.  h NULL removes the hook.  Takes every partition lock. */
typedef struct lattice_store_evict_hook {
    int (*may_evict)(void *arg, uint32_t partition);
    void (*evicted)(void *arg, uint32_t partition, const void *key, size_t key_len, uint64_t version);
    void *arg;
} lattice_store_evict_hook;
void lattice_store_set_evict_hook(lattice_store *s, const lattice_store_evict_hook *h);
/* Evicts on demand, before any write needs room: entries of the stores on
 * s's region (each store's hook says which may go) until at least want were
 * evicted, or none is left that may go (or the region's policy is reject).
 * The region evicts page by page (every entry whose head row sits on the
 * chosen page and that may go), so it may evict more than want.  Returns
 * the entries evicted.  skip_key (NULL: none) names an entry of s never
 * to evict.  The grid calls it as a primary making room on a copy that had
 * none for a write (docs/CACHES.md, "Eviction"): the hook then allows only
 * the partitions that copy also holds, and the write's own key is skipped.
 * No partition or lane lock of the region may be held by the caller. */
size_t lattice_store_evict(lattice_store *s, size_t want, uint32_t skip_partition, const void *skip_key,
                           size_t skip_klen);

/* Persistence: hears of every change to this store's entries - each put
 * applied (put, put_all, insert_batch, an update in place or moved), each
 * remove of an entry, each eviction (as a remove, version the entry's),
 * each clear (key NULL).  Expiry reclaims nothing that needs hearing of:
 * expiry times are absolute.  Called by the writing thread with the
 * partition's lock held (and, for an eviction, a lane lock): it must not
 * call any store or region function.  h NULL removes the hook.  Takes
 * every partition lock. */
enum { LATTICE_STORE_CHANGE_PUT = 1, LATTICE_STORE_CHANGE_REMOVE = 2, LATTICE_STORE_CHANGE_CLEAR = 3 };
typedef struct lattice_store_change_hook {
    void (*changed)(void *arg, int kind, const lattice_store_entry *e);
    void *arg;
} lattice_store_change_hook;
void lattice_store_set_change_hook(lattice_store *s, const lattice_store_change_hook *h);

/* Keys that start with this byte are reserved for the grid's own records
 * (a transaction across partitions keeps its prepared state and its
 * decision as entries of the partitions involved, txn/txn.h).  Eviction
 * never takes such an entry: it would free a transaction's locks without
 * its outcome.  Each partition keeps the list of the reserved keys it
 * holds, whichever path wrote them (an operation, a replicated write, a
 * rebalance, a log replay, a restore), so what the node derives from them
 * (the lock table) is rebuilt from the rows themselves when their
 * generation moved. */
#define LATTICE_STORE_RESERVED_BYTE 0xffu
/* Partition p's reserved generation: it changes with every put, remove or
 * clear of a reserved key of p (0: none ever); *n (may be NULL) = how
 * many p holds now. */
uint64_t lattice_store_reserved_gen(lattice_store *s, uint32_t partition, uint32_t *n);
/* True unless p surely holds no reserved key that starts with prefix
 * (prefix_len 0: any) - its list names none and is complete: one
 * uncontended lock, the listed keys compared, no entry read. */
bool lattice_store_reserved_held(lattice_store *s, uint32_t partition, const void *prefix, size_t prefix_len);
/* Calls fn with each reserved entry of p (it->value and the rest as a
 * cursor gives them; a key removed meanwhile is skipped) and sets *gen to
 * the generation they belong to: a later lattice_store_reserved_gen that
 * differs means they changed since.  fn's non-zero return stops the walk
 * and is returned.  NOMEM. */
int lattice_store_reserved_each(lattice_store *s, uint32_t partition, int (*fn)(void *arg, const lattice_store_item *it),
                                void *arg, uint64_t *gen);

/* Update history (delta rebalance, docs/REBALANCE.md §9).  Each partition
 * keeps its latest changes as (counter, key, removed) records - every put
 * with its entry's version, every remove_v with its counter - at most
 * max_entries records and max_bytes (keys + 24 bytes a record) per
 * partition, the oldest dropped first (defaults below; the cache keys
 * `history` and `history_bytes`; 0 entries turns it off).  A clear empties
 * it; a remove without a counter, or running out of memory, marks it lost
 * until the next clear.  Expiry records nothing (expiry times are absolute,
 * every copy expires alike); an eviction records nothing either: the owner
 * that evicts records the remove it sends with lattice_store_history_note.
 *
 * history_above(p, mark, need_complete, fn): LATTICE_OK and fn for every
 * record with counter > mark (oldest first) when every change above mark is
 * recorded (nothing above it dropped, not lost) - and, with need_complete,
 * when the copy was declared complete from a base <= mark
 * (history_valid_from: after a full load at that counter, or for a copy held
 * since the partition's first write); else LATTICE_ERR_NOT_FOUND (the gap
 * is older than the history: a full copy is needed).  fn runs with the
 * partition lock held: it must not call the store. */
#define LATTICE_STORE_HISTORY_DEFAULT_ENTRIES 1024u
#define LATTICE_STORE_HISTORY_DEFAULT_BYTES 65536u
typedef int (*lattice_store_history_fn)(void *arg, const void *key, size_t key_len, uint64_t counter, bool removed);
typedef struct lattice_store_history_stat {
    uint32_t records;
    uint64_t bytes, dropped, base;
    uint64_t contig; /* valid: every counter in (base, contig] was applied here (history.h) */
    bool lost, valid;
} lattice_store_history_stat;
void lattice_store_history_configure(lattice_store *s, uint32_t max_entries, uint64_t max_bytes);
void lattice_store_history_note(lattice_store *s, uint32_t partition, const void *key, size_t key_len,
                                uint64_t version, bool removed);
void lattice_store_history_valid_from(lattice_store *s, uint32_t partition, uint64_t base);
int lattice_store_history_above(lattice_store *s, uint32_t partition, uint64_t mark, bool need_complete,
                                lattice_store_history_fn fn, void *arg);
void lattice_store_history_info(lattice_store *s, uint32_t partition, lattice_store_history_stat *out);

/* Stops the sweeper if running, frees every row of this store from the region
 * and all index memory.  No other thread may use the store any more. */
void lattice_store_destroy(lattice_store *s);

/* Insert or update.  An update writes over the old row when the new one is
 * no longer, into the page's gap when it fits there (the link keeps its page
 * and item either way), else writes it elsewhere and frees the old row.  Errors: INVAL (bad partition/key), TOO_LARGE, NOMEM, REGION_FULL,
 * EXISTS / NOT_FOUND for the conditional flags.  On any error nothing changed. */
int lattice_store_put(lattice_store *s, const lattice_store_entry *e, unsigned flags);

/* Copies the value into buf (up to cap bytes).  NOT_FOUND when absent or
 * expired; TOO_LARGE when cap is smaller than the value (meta->value_len tells
 * the size needed).  meta may be NULL. */
int lattice_store_get(lattice_store *s, uint32_t partition, const void *key, size_t key_len,
                      void *buf, size_t cap, lattice_store_meta *meta);
/* Hints for a batch of gets, so that their cache misses overlap instead of
 * following one another: lattice_store_prefetch starts loading the index
 * line where key's probe starts and returns the key's tag; once that line
 * had time to arrive (after the prefetches of the other keys of the batch),
 * lattice_store_prefetch_row starts loading the page header, item slot and
 * row of the first entry with that tag.  They change nothing and decide
 * nothing: a wrong guess (another key's row, a table being replaced) costs
 * only a wasted load, and the get that follows checks everything as
 * always.  prefetch_row reads the table, so the caller holds
 * rcu_read_lock across it (as a reader of the store does anyway). */
uint32_t lattice_store_prefetch(lattice_store *s, uint32_t partition, const void *key, size_t key_len);
/* The same for a batch of writes: also the partition's lock and fill
 * (a put writes them) and its history's header, for writing. */
uint32_t lattice_store_prefetch_write(lattice_store *s, uint32_t partition, const void *key, size_t key_len);
void lattice_store_prefetch_row(lattice_store *s, uint32_t partition, uint32_t tag);
/* After prefetch_write (its header had time to arrive): the history slot
 * the write will fill.  It reads the history without the partition lock,
 * so only the thread that serialises the store's writes calls it (the
 * data thread's state, ops/loop.c). */
void lattice_store_prefetch_history(lattice_store *s, uint32_t partition);
/* As get, but the value is returned in *value, allocated with lt_malloc (the
 * caller lt_free()s it). */
int lattice_store_get_copy(lattice_store *s, uint32_t partition, const void *key,
                           size_t key_len, void **value, lattice_store_meta *meta);
/* NOT_FOUND when absent (an expired entry is reclaimed and reported absent).
 * Without a counter the partition's update history can no longer tell what
 * changed (it is marked lost until the next clear); the grid's paths use
 * remove_v with the update counter the remove took (the history records it,
 * and the change hook sees it as the entry's version: the log's REMOVE). */
int lattice_store_remove(lattice_store *s, uint32_t partition, const void *key, size_t key_len);
int lattice_store_remove_v(lattice_store *s, uint32_t partition, const void *key, size_t key_len,
                           uint64_t version);
/* OBJECT IDLETIME: a lower bound of the time since key was last read or
 * written, in ms of lattice_region_tick's clock (now_ms) - the store keeps
 * an access stamp per page, not per key, so it is the time since any entry
 * of the key's page was used (0 until a tick passed since; at most the
 * region's last 4,096 ticks back).  Read-only: the stamp stays.
 * NOT_FOUND when absent or expired. */
int lattice_store_idle_ms(lattice_store *s, uint32_t partition, const void *key, size_t key_len, uint64_t now_ms,
                          uint64_t *idle_ms);

/* put for every entry in order (any partitions; consecutive new keys of one
 * partition go through the batch path).  Stops at the first error other than
 * a refused condition; *applied counts entries written. */
int lattice_store_put_all(lattice_store *s, const lattice_store_entry *e, size_t n,
                          unsigned flags, size_t *applied);
/* Calls fn for every key found live (keys[i].value is ignored). */
int lattice_store_get_all(lattice_store *s, const lattice_store_entry *keys, size_t n,
                          lattice_store_visit_fn fn, void *arg);

/* Batch insert into one partition (rebalance): rows of new keys are packed
 * into pages several per page acquisition; existing keys are updated as by
 * put.  With IF_NEWER an entry is skipped (not an error) unless newer than
 * the stored one.  Leaves exactly the contents the same puts would.
 * *applied counts entries written.  Stops at the first hard error. */
int lattice_store_insert_batch(lattice_store *s, uint32_t partition,
                               const lattice_store_entry *e, size_t n, unsigned flags,
                               size_t *applied);

/* Removes every entry of the partition.  Open cursors stay valid (they end). */
int lattice_store_clear(lattice_store *s, uint32_t partition);
/* Entries indexed in the partition (expired ones count until reclaimed). */
uint64_t lattice_store_count(lattice_store *s, uint32_t partition);
/* The partition's entries less its reserved ones (the grid's own records):
 * what a user counts (DBSIZE, lattice_cache_size). */
uint64_t lattice_store_user_count(lattice_store *s, uint32_t partition);

/* Iteration over one partition, for rebalance supply.  A cursor survives
 * concurrent writes: every entry present in the partition from open until
 * the walk ends is returned exactly once; entries added or removed meanwhile
 * may or may not be.  Expired entries are skipped.  next() calls fn for up to
 * max_entries entries (and stops early once max_bytes of key+value were
 * returned, always returning at least one), then returns; *done is set when
 * the partition is exhausted.  A cursor may be used by one thread at a time. */
int lattice_store_cursor_open(lattice_store *s, uint32_t partition, lattice_store_cursor **out);
int lattice_store_cursor_next(lattice_store_cursor *c, size_t max_entries, size_t max_bytes,
                              lattice_store_visit_fn fn, void *arg, int *done);
void lattice_store_cursor_close(lattice_store_cursor *c);
/* Positions.  A cursor walks its partition in position order; a key's
 * position is a function of the key alone (lattice_store_key_position, below
 * LATTICE_STORE_POSITION_END), the same in every store and on every node, so
 * a walk can stop and go on where it stopped in another store (after the
 * partition moved).  position() is where the next batch starts (END once
 * done); seek() moves the cursor to a position: the next batch starts at the
 * first entry at or above it.  A batch is never cut between two keys of one
 * position, and finding the start costs the entries of that batch, not a
 * pass over the partition. */
#define LATTICE_STORE_POSITION_END (1ull << 32)
uint64_t lattice_store_key_position(const void *key, size_t len);
uint64_t lattice_store_cursor_position(const lattice_store_cursor *c);
void lattice_store_cursor_seek(lattice_store_cursor *c, uint64_t position);

/* Expiry.  expire() reclaims up to max expired entries (0 = no limit),
 * resuming where the last call stopped, and returns how many it reclaimed;
 * the node calls it periodically.  Or start a sweeper thread that calls it
 * every interval_ms; stop joins it (destroy stops it too). */
size_t lattice_store_expire(lattice_store *s, size_t max);
int lattice_store_sweeper_start(lattice_store *s, unsigned interval_ms);
void lattice_store_sweeper_stop(lattice_store *s);

void lattice_store_metrics_get(lattice_store *s, lattice_store_metrics *m);
uint32_t lattice_store_partitions(const lattice_store *s);

/* This store's share of its region, exact at any instant between writes: the
 * region counts every row it writes and frees by the row's owner (inserts,
 * updates in place or moved, batch inserts, removes, clear, expiry,
 * eviction; compaction moves rows without changing them), so no scan.
 * Pages are shared by every store of a region, so `pages` is what the rows
 * fill packed - row bytes plus their item slots over the bytes a page holds
 * after its header, rounded up - not a count of the pages they sit on.
 * Takes the region's lane locks briefly. */
typedef struct lattice_store_usage {
    uint64_t rows;      /* row pieces (a fragmented entry counts each piece) */
    uint64_t row_bytes; /* bytes of those rows, row headers included, item slots not */
    uint64_t pages;
} lattice_store_usage;
void lattice_store_usage_get(lattice_store *s, lattice_store_usage *u);

#endif
