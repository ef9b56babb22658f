/*
 * Internals shared by the region (region*.c, page.c) and the store (store.c).
 * Not a public header: only storage/ includes it.
 *
 * Page layout (every size in bytes, P = page size):
 *
 *   [page_hdr][item 0][item 1]...[item n-1] ->gap<- [row][row]...[row]
 *   0         HDR                            upper                    P
 *
 * An item is a uint16 offset of its row (0 = free slot).  Rows grow down from
 * P; `upper` is the lowest row offset.  `free` counts every byte a new row
 * could use after compaction: P - HDR - 2*nitems - sum(live row lengths).
 * Compaction moves rows towards the end of the page and rewrites their item
 * offsets, never item ids, so links stay valid.
 *
 * Writers change a page only with its lane's lock held (see struct lane),
 * inside page_write_begin/page_write_end, which make `seq` odd and then even
 * again.
 * Readers read `seq`, copy, and accept the copy only if `seq` was even and
 * unchanged (a seqlock); see region_read_entry.
 */
#ifndef LATTICE_STORAGE_REGION_INT_H
#define LATTICE_STORAGE_REGION_INT_H

#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "storage/storage.h"

#define NO_PAGE UINT32_MAX
#define BUCKET_NONE 0xff  /* data page too full for any bucket */
#define BUCKET_REUSE 0xfe /* empty page on the reuse list */
#define BUCKET_DETACHED 0xfd /* taken by a writer that is filling it, in no list */
#define MAX_OWNERS 256    /* owner 0 = raw region rows, 1..255 = stores */
#define REGION_TICKS 4096 /* idle-time samples kept: about 68 minutes at one a second */

enum { KIND_UNMAPPED = 0, KIND_REUSE = 1, KIND_DATA = 2 };

struct page_hdr {
    uint32_t seq;       /* seqlock: odd while a writer changes the page */
    uint32_t access;    /* region access epoch of the last read/write (LRU) */
    uint32_t prev;      /* bucket / reuse list neighbours; lane lock */
    uint32_t next;
    uint16_t nitems;    /* item slots, used and free */
    uint16_t upper;     /* lowest row offset */
    uint16_t free;      /* see the file comment */
    uint16_t live;      /* rows on the page */
    /* bucket, kind and lane: written under the lane lock with relaxed atomic
     * stores, because evictors (evict_candidate, evict_locked) and
     * region_lock_page peek at them with atomic loads without that lock. */
    uint8_t bucket;     /* bucket index, BUCKET_NONE or BUCKET_REUSE; lane lock */
    uint8_t kind;       /* KIND_*; lane lock */
    uint8_t lane;       /* the lane whose lists hold the page; changes only while the
                           page is empty, with both lanes locked */
    uint8_t heads;      /* eviction's hint: 1 once a head row was written here since the
                           page was last empty (0: continuation rows only, which name no
                           entry, so evicting the page would free nothing); lane lock,
                           read unlocked by evictors of other lanes */
};
#define HDR ((uint32_t)sizeof(struct page_hdr))

/* A seqlock reader's section, for ThreadSanitizer: between taking `seq` and
 * checking it again a reader loads page bytes while the page's writer may be
 * changing them - by design, the copy is thrown away when `seq` moved.  TSan
 * cannot know that, so under TSan the reader's accesses from this statement
 * to the end of its scope are not shown to it (they are not checked, and a
 * later writer is not checked against them).  The `seq` loads are atomics
 * either way and still order an accepted copy after the writer's changes.
 * Nothing outside a TSan build. */
#if defined(__SANITIZE_THREAD__)
#define LT_TSAN_BUILD 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define LT_TSAN_BUILD 1
#endif
#endif
#ifdef LT_TSAN_BUILD
void AnnotateIgnoreReadsBegin(const char *file, int line);
void AnnotateIgnoreReadsEnd(const char *file, int line);
static inline void seqlock_read_section_end(int *unused)
{
    (void)unused;
    AnnotateIgnoreReadsEnd(__FILE__, __LINE__);
}
#define SEQLOCK_READ_SECTION()                                                                     \
    int seqlock_read_section_ __attribute__((cleanup(seqlock_read_section_end), unused)) =          \
        (AnnotateIgnoreReadsBegin(__FILE__, __LINE__), 0)
#else
#define SEQLOCK_READ_SECTION() ((void)0)
#endif

/* Row flags (first byte of every row).  Bits 4..6 of a head row hold the
 * entry's value type (lattice_store_entry.type, 0..LATTICE_STORE_TYPE_MAX);
 * a string is 0, so a string's row is byte for byte what it was before
 * types, and a row written before them reads as a string.  Bit 7 is spare
 * (written 0).  Continuation rows carry no type. */
enum { F_HEAD = 1, F_CONT = 2, F_EXPIRE = 4, F_NEXT = 8 };
#define F_TYPE_SHIFT 4
#define F_TYPE_MASK 0x70u
#define F_TYPE(type) ((uint8_t)(((unsigned)(type) << F_TYPE_SHIFT) & F_TYPE_MASK))
#define ROW_TYPE(flags) ((uint8_t)(((flags) & F_TYPE_MASK) >> F_TYPE_SHIFT))

/* A parsed row (head or continuation fragment). */
struct rowv {
    uint8_t flags;        /* F_*, and a head row's type in F_TYPE_MASK */
    uint8_t owner;
    uint32_t partition;
    uint32_t klen, vlen;
    uint64_t version, expire;
    uint64_t next;        /* link of the next fragment when F_NEXT */
    uint32_t payload_off; /* offset in the page of this piece's payload */
    uint32_t piece_len;   /* payload bytes in this piece */
    uint32_t len;         /* whole row length incl. header */
};

/* Called by the region, with the lane of the entry's page locked, to evict one entry whose
 * head row is at `link`.  The owner must not block: it try-locks the
 * partition (unless the guard says this thread already holds it), checks the
 * index still maps key to link, removes the index node and frees the row
 * with region_free_locked.  Returns 1 when it evicted the entry. */
struct evict_guard {
    const void *store;     /* the store whose partition lock this thread holds, or NULL */
    uint32_t partition;
    const void *skip_node; /* index node being written: never evict it */
    /* An entry never to evict, by key (lattice_store_evict: a write in
     * flight to a copy that had no room for it); skip_store NULL: none. */
    const void *skip_store;
    uint32_t skip_partition;
    const void *skip_key;
    size_t skip_klen;
};
typedef int (*evict_fn)(void *ctx, uint32_t partition, const void *key, size_t klen,
                        uint64_t link, const struct evict_guard *g);

/* A lane is a free list of its own: writers of different lanes take pages,
 * write rows and move pages between buckets in parallel.  Every page belongs
 * to one lane.  A writer thread writes new rows through its own lane (thread
 * n uses lane n % nlanes; raw region rows go through lane 0), so two writers
 * fill open pages of their own whatever partitions they write, and every
 * piece of one entry sits on one lane's pages.  A row is changed or freed
 * under the lock of the lane its page belongs to (region_lock_page).  An
 * empty page may move to another lane (a lane that runs dry takes reuse
 * pages from the others before the region maps new memory); a page with
 * rows never does.  Lock order: partition, lane, map_lock; a thread holds
 * one lane at a time, except an evictor, which only try-locks a second.
 * The price: free space in one lane's partly filled pages is not offered to
 * another lane (empty pages are), so a region uses one lane per 8 MiB of
 * max_mb, up to REGION_LANES: a small region keeps a single best-fit list. */
#define REGION_LANES 8
#define REGION_MB_PER_LANE 8

struct lane {
    pthread_mutex_t lock;   /* its pages' contents and lists, and the fields below */
    uint32_t idx;
    uint32_t bucket_head[LATTICE_REGION_BUCKETS];
    uint32_t bucket_mask;   /* bit b set when bucket b is not empty */
    uint64_t bucket_count[LATTICE_REGION_BUCKETS];
    uint32_t reuse_head;    /* lock; stored atomically, other lanes peek at it unlocked */
    uint64_t pages_reuse, pages_data, pages_full;
    uint64_t rows, row_bytes;
    /* The same per owner (rows of a fragmented entry charged to its head's
     * owner), so a store's share of a shared region is exact without a scan. */
    uint64_t owner_rows[MAX_OWNERS], owner_bytes[MAX_OWNERS];
    uint32_t epoch_tick;
    uint64_t rng;
} __attribute__((aligned(64)));

struct lattice_region {
    pthread_mutex_t map_lock; /* publishing chunks (pages_mapped, chunks[]), pages_inflight */
    pthread_cond_t map_cond;  /* signalled when a chunk in flight is published or given up */
    uint32_t pages_inflight;  /* pages of chunks being mapped outside every lock; map_lock */
    char name[32];
    uint32_t page_size;
    uint32_t page_shift;
    uint32_t step;          /* bucket width: page_size / LATTICE_REGION_BUCKETS */
    uint32_t max_row;       /* largest row on one page: P - HDR - 2 */
    int wide_copy;          /* the CPU has AVX-512BW: batches copy with masked moves */
    uint32_t chunk_pages;   /* pages per chunk (power of two) */
    uint32_t chunk_shift;
    uint32_t max_pages;
    uint32_t nchunks;       /* slots in chunks[] */
    uint8_t **chunks;       /* published with release stores; never unmapped until destroy */
    uint32_t pages_mapped;  /* atomic; readers bound page ids with it */
    /* Empty pages whose memory went back to the OS (region_release_lane):
     * in no lane's list, their bytes zeros (kind KIND_UNMAPPED) until a lane
     * takes them again.  Each keeps the seq it had, so its next life starts
     * above it and a reader holding the old seq always sees the change.
     * map_lock; the array has room for every page of the bound. */
    struct released_page { uint32_t pid, seq; } *released;
    uint32_t nreleased;
    uint32_t keep_pages;    /* never released below this many resident pages (prealloc) */
    lattice_region_policy policy;
    uint32_t nlanes;          /* lanes in use: 1..REGION_LANES */
    uint64_t evictions;       /* atomic */
    uint32_t epoch;           /* atomic LRU clock: bumped every 64 row writes of a lane, and by each tick */
    /* lattice_region_tick's samples (OBJECT IDLETIME): tick i ended epoch
     * tick_ep[i] at tick_ms[i], oldest first in a ring from tick_head;
     * an access stamped with an epoch <= tick_ep[i] came before tick_ms[i].
     * Guarded by tick_lock. */
    pthread_mutex_t tick_lock;
    uint32_t tick_ep[REGION_TICKS];
    uint64_t tick_ms[REGION_TICKS];
    uint32_t tick_head, tick_n;

    /* Changed with every lane locked, so an evicting writer (holding one) sees
     * a stable table. */
    struct {
        evict_fn fn;
        void *ctx;
    } owners[MAX_OWNERS];
    struct lane lanes[REGION_LANES];
};

/* ---- page.c: page layout, row codec, seqlock (no locking of their own) ---- */

static inline uint8_t *page_addr(const lattice_region *r, uint32_t pid)
{
    if (pid >= __atomic_load_n(&r->pages_mapped, __ATOMIC_ACQUIRE)) return NULL;
    uint8_t *c = __atomic_load_n(&r->chunks[pid >> r->chunk_shift], __ATOMIC_ACQUIRE);
    if (!c) return NULL;
    return c + ((size_t)(pid & (r->chunk_pages - 1)) << r->page_shift);
}
/* Writer side (a lane lock held): pid is known to be mapped. */
static inline struct page_hdr *hdr_w(const lattice_region *r, uint32_t pid)
{
    return (struct page_hdr *)(r->chunks[pid >> r->chunk_shift] +
                               ((size_t)(pid & (r->chunk_pages - 1)) << r->page_shift));
}
static inline struct page_hdr *page_hdr(const lattice_region *r, uint32_t pid)
{
    return (struct page_hdr *)page_addr(r, pid);
}
static inline uint16_t *page_items(void *pg) { return (uint16_t *)((uint8_t *)pg + HDR); }

void page_write_begin(struct page_hdr *h);
void page_write_end(struct page_hdr *h);
void page_init_empty(struct page_hdr *h, uint32_t page_size);
/* Parses the row at offset off; -1 when the bytes are not a well-formed row
 * that lies inside the page (readers may see garbage and must not trust it). */
int row_parse(const uint8_t *pg, uint32_t page_size, uint32_t off, struct rowv *v);
/* Row encoding (inline: it is the inner loop of every insert).  head_hdr_len:
 * header bytes of a head row for e (frag = head of a fragmented row);
 * head_encode writes it (with payload bytes [0, piece_len) when fragmented);
 * cont_encode writes a continuation row with payload bytes [pos, pos+len)
 * of key||value. */
#define CONT_HDR_NEXT 9u
#define CONT_HDR_LAST 3u

static inline uint32_t varint_len(uint64_t v)
{
    uint32_t n = 1;
    while (v >= 0x80) v >>= 7, n++;
    return n;
}

static inline uint8_t *varint_put(uint8_t *p, uint64_t v)
{
    while (v >= 0x80) {
        *p++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *p++ = (uint8_t)v;
    return p;
}

/* A head row's version takes at least ROW_VERSION_BYTES bytes (a varint
 * padded with continuation bytes, which every reader decodes as the plain
 * one): a partition's update counter grows by one per write, and a version
 * that crossed 2^7 or 2^14 made the rewrite of an entry of the same size
 * one byte longer than its row - a move to another page, a hole, and
 * compaction of the page that took the row, on every overwrite
 * (redis-benchmark SET -P 16: 12% of the data thread).  Three bytes cover
 * 2^21 writes per partition. */
#define ROW_VERSION_BYTES 3u

/* Bytes version_put writes for v (no loop: it is on every insert's path). */
static inline uint32_t version_len(uint64_t v)
{
    uint32_t n = (uint32_t)(64 - __builtin_clzll(v | 1) + 6) / 7;
    return n < ROW_VERSION_BYTES ? ROW_VERSION_BYTES : n;
}

static inline uint8_t *version_put(uint8_t *p, uint64_t v)
{
    for (uint32_t i = 0; i + 1 < ROW_VERSION_BYTES || v >= 0x80; i++) {
        *p++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *p++ = (uint8_t)v;
    return p;
}

static inline uint8_t *put_fixed(uint8_t *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++) p[i] = (uint8_t)(v >> (8 * i));
    return p + n;
}

static inline uint8_t *put_link(uint8_t *p, uint64_t link)
{
    p = put_fixed(p, LATTICE_LINK_PAGE(link), 4);
    return put_fixed(p, LATTICE_LINK_ITEM(link), 2);
}

static inline uint32_t head_hdr_len(const lattice_store_entry *e, int frag)
{
    return 2 + varint_len(e->partition) + varint_len(e->key_len) + varint_len(e->value_len) +
           version_len(e->version) + (e->expire_ms ? 8 : 0) + (frag ? 8 : 0);
}

/* Copies payload bytes [pos, pos+len) of key||value to dst. */
static inline void payload_copy(uint8_t *dst, const lattice_store_entry *e, uint64_t pos, uint64_t len)
{
    if (pos < e->key_len) {
        uint64_t k = e->key_len - pos < len ? e->key_len - pos : len;
        memcpy(dst, (const uint8_t *)e->key + pos, k);
        dst += k, pos += k, len -= k;
    }
    if (len) memcpy(dst, (const uint8_t *)e->value + (pos - e->key_len), len);
}

static inline void head_encode(uint8_t *dst, const lattice_store_entry *e, uint8_t owner, int frag,
                 uint64_t next, uint32_t piece_len)
{
    uint8_t *p = dst;
    *p++ = (uint8_t)(F_HEAD | (e->expire_ms ? F_EXPIRE : 0) | (frag ? F_NEXT : 0) | F_TYPE(e->type));
    *p++ = owner;
    p = varint_put(p, e->partition);
    p = varint_put(p, e->key_len);
    p = varint_put(p, e->value_len);
    p = version_put(p, e->version);
    if (e->expire_ms) p = put_fixed(p, e->expire_ms, 8);
    if (frag) {
        p = put_link(p, next);
        p = put_fixed(p, piece_len, 2);
    } else {
        piece_len = (uint32_t)(e->key_len + e->value_len);
    }
    payload_copy(p, e, 0, piece_len);
}

static inline void cont_encode(uint8_t *dst, const lattice_store_entry *e, int has_next, uint64_t next,
                 uint64_t pos, uint32_t len)
{
    uint8_t *p = dst;
    *p++ = (uint8_t)(F_CONT | (has_next ? F_NEXT : 0));
    if (has_next) p = put_link(p, next);
    p = put_fixed(p, len, 2);
    payload_copy(p, e, pos, len);
}


/* Room: can a row of len bytes go in (possibly after compaction)? */
int page_fits(const struct page_hdr *h, uint32_t len);
/* Places len bytes in the page (compacting when needed) and returns the item
 * id; the caller fills the bytes at page + items[id].  Inside a write section. */
uint16_t page_place(struct page_hdr *h, uint32_t page_size, uint32_t len, int slot);
/* Removes the row of item id (len bytes, or 0 to parse it); returns its
 * length.  keep_slot leaves the (now free) slot in the table for page_place
 * to refill.  Inside a write section. */
uint32_t page_remove(struct page_hdr *h, uint32_t page_size, uint16_t item, int keep_slot,
                     uint32_t len);
void page_compact(struct page_hdr *h, uint32_t page_size);

/* ---- region_read.c: the lock-free reader ---- */

/* A reader's request: all of it optional except the link. */
struct read_req {
    const void *want_key;  /* compare (with owner/partition) when non-NULL */
    size_t want_klen;
    uint8_t want_owner;
    uint32_t want_partition;
    void *kbuf;            /* copy the key here when non-NULL and klen <= kcap */
    size_t kcap;
    void *vbuf;            /* copy the value here when non-NULL and vlen <= vcap */
    size_t vcap;
    /* results of a consistent read */
    int match;             /* key, owner and partition equal the wanted ones */
    uint8_t owner;
    uint32_t partition;
    size_t klen, vlen;
    uint64_t version, expire;
    uint8_t type;          /* the head row's value type (ROW_TYPE) */
    uint32_t row_bytes;    /* all pieces, headers included */
    int no_touch;          /* leave the page's access stamp as it is (OBJECT IDLETIME) */
    uint64_t link;         /* store.c's search: the matched entry's link */
};
/* Consistent read of the entry whose head row is at link: OK, or NOT_FOUND
 * when no head row is there.  Lock-free; retries torn reads itself. */
int region_read_entry(lattice_region *r, uint64_t link, struct read_req *q);

/* ---- region_lanes.c: lane locks, a lane's page lists, its memory ---- */

/* Locks and returns the calling thread's lane, for writing new rows. */
struct lane *region_lock_writer(lattice_region *r);
/* Locks and returns the lane of the page holding the row at link. */
struct lane *region_lock_page(lattice_region *r, uint64_t link);
void region_unlock(struct lane *l);
/* Every lane, in order (metrics, checks, the owner table). */
void region_lock_all(lattice_region *r);
void region_unlock_all(lattice_region *r);
/* Page lists of lane l (locked), linked through page_hdr.prev/next:
 * unlink pid from the list at *head; take a data page out of whatever list
 * holds it (BUCKET_DETACHED); put a detached data page where its free space
 * says (an empty one on the reuse list); move a page whose free space
 * changed to its bucket. */
void region_list_unlink(lattice_region *r, uint32_t *head, uint32_t pid);
void region_lane_detach(lattice_region *r, struct lane *l, uint32_t pid);
void region_lane_place(lattice_region *r, struct lane *l, uint32_t pid);
void region_lane_rebucket(lattice_region *r, struct lane *l, uint32_t pid);
/* Maps one chunk onto lane l's reuse list (l locked on entry and return,
 * released meanwhile): OK when the caller should look at its lists again,
 * REGION_FULL at the bound, NOMEM when the OS refused. */
int region_map_chunk(lattice_region *r, struct lane *l);
/* Moves one empty page from another lane's reuse list to l's (l locked,
 * the other only try-locked); 1 when it moved one. */
int region_steal_reuse(lattice_region *r, struct lane *l);
/* Puts up to RELEASE_TAKE released pages back on lane l's reuse list,
 * faulting them in (l locked); 1 when it took any. */
#define RELEASE_TAKE 64
int region_take_released(lattice_region *r, struct lane *l);

/* ---- region_evict.c: eviction (policy evict) ---- */

#define EVICT_ROUNDS 64        /* sampled rounds that evict nothing before the sweep */
#define EVICT_BUSY_ROUNDS 4096 /* rounds lost to another lane's lock being held */
/* One sampled round (random-2-LRU) / the sweep of every page, lane l
 * locked: entries evicted, 0 when none may go, -1 when the lane of a page
 * that might have had some was busy. */
int region_evict_one(lattice_region *r, struct lane *l, const struct evict_guard *g);
int region_evict_sweep(lattice_region *r, struct lane *l, const struct evict_guard *g);
/* Evicts entries (policy evict; the owners' hooks decide which may go) until
 * at least want were evicted or none is left that may go: the same
 * sampling, then sweep, as a writer that finds no room.  *evicted counts
 * them; g's skip fields name an entry never to evict (g may be NULL).  No
 * lane may be held; takes the caller's writer lane. */
int region_evict(lattice_region *r, size_t want, const struct evict_guard *g, size_t *evicted);

/* ---- region.c: rows, the owners, idle time ---- */

/* A lower bound of the time since page pid was last read or written (ms,
 * lattice_region_tick's clock): 0 until a tick passed since. */
uint64_t region_page_idle_ms(lattice_region *r, uint32_t pid, uint64_t now_ms);

int region_attach(lattice_region *r, evict_fn fn, void *ctx, uint8_t *owner);
void region_detach(lattice_region *r, uint8_t owner);
/* Rows and row bytes (headers included) of owner, summed over the lanes
 * under their locks. */
void region_owner_usage(lattice_region *r, uint8_t owner, uint64_t *rows, uint64_t *bytes);

/* All *_locked functions need lane l locked; the rows they write go to l's
 * pages, the rows they change or free must be on l's pages. */
int region_insert_locked(lattice_region *r, struct lane *l, const lattice_store_entry *e,
                         uint8_t owner, uint64_t *link, const struct evict_guard *g);
/* Packs rows of e[0..n) (none fragmented or not) page by page. */
int region_insert_batch_locked(lattice_region *r, struct lane *l, const lattice_store_entry *e,
                               size_t n, uint8_t owner, uint64_t *links, size_t *done,
                               const struct evict_guard *g);
/* region_batch.c: appends rows e[i..n) to the gap of page pid (lane l
 * locked, inside a write section, no free item slot on the page) for as
 * long as they fit there unfragmented; returns the first row not written. */
size_t region_append_run(lattice_region *r, struct lane *l, uint32_t pid,
                         const lattice_store_entry *e, size_t i, size_t n, uint8_t owner,
                         uint64_t *links);
/* Whether this CPU has what region_append_run's masked copy needs. */
int region_wide_copy_supported(void);
/* Rewrites the entry at *linkp in place when it fits its page; otherwise
 * writes it through the caller's lane, publishes the new link in *linkp
 * (release store) and frees the old row.  Takes the lanes it needs (none
 * may be held).  On error nothing changed. */
int region_update(lattice_region *r, uint64_t *linkp, const lattice_store_entry *e,
                  uint8_t owner, const struct evict_guard *g);
/* region_free_locked under the lane of the row's page (none may be held). */
void region_free(lattice_region *r, uint64_t link);
/* Frees the entry at link (all its pieces); the lock of the lane holding its
 * pages must be held (the evictor may hold a second lane: the page says). */
void region_free_locked(lattice_region *r, uint64_t link);

#endif
