/*
 * Internals shared by store.c (writes, reads, lifecycle) and store_walk.c
 * (clear, expiry, cursors).  Not a public header: only storage/ includes it.
 *
 * Locks: part.lock serialises the writers of one partition and guards every
 * non-atomic field of struct part and the partition's table (index_int.h);
 * the region lock is taken inside it (never the other way round, except
 * eviction, which only try-locks partitions).  Readers take rcu_read_lock
 * only and reach a partition's table through store.tabs[].
 */
#ifndef LATTICE_STORAGE_STORE_INT_H
#define LATTICE_STORAGE_STORE_INT_H

#include <pthread.h>
#include <stdint.h>
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "history.h"
#include "index_int.h"
#include "region_int.h"

/* The first cache line holds what every write changes (the lock, the
 * table's fill, the count), so a write to a partition another writer used
 * last moves one line between the cores, not three. */
struct part {
    pthread_mutex_t lock;
    struct ix_table *tab; /* lock; NULL until the first write (and after clear) */
    struct ix_counts n;   /* tab's fill; lock */
    uint64_t count;       /* atomic; changed under lock */
    struct lattice_store *s;
    uint64_t expiring;    /* atomic; entries with an expire time */
    uint64_t slots;       /* atomic read; home slots of the table (metrics) */
    uint64_t min_expire;  /* atomic read; no entry expires before this (lock) */
    uint32_t idx;
    struct reserved *reserved; /* lock; the reserved keys held (NULL: none) */
    uint64_t reserved_gen;     /* atomic read; changed under lock by every change of a reserved key */
    bool reserved_walk;        /* lock; the list missed a key (no memory): walk the partition until its clear */
} __attribute__((aligned(64)));

struct lattice_store {
    lattice_region *region;
    uint8_t owner;
    uint32_t nparts;
    struct part *parts;
    /* Readers' copy of each partition's table and its capacity, packed so a
     * lookup touches 16 bytes here instead of a struct part, and computes
     * the home slot without loading the table header (a line of its own,
     * one more miss per get).  The pair is written under the partition
     * lock inside a seqlock (seq odd while it changes), so a reader takes t
     * and cap only as they were published together (tabref_read). */
    struct tabref {
        struct ix_table *t;
        uint32_t cap;
        uint32_t seq;
    } *tabs;
    /* Per partition, the first bytes every head row of this store and
     * partition starts with (head_prefix, region_read.h): a get checks a
     * row's owner and partition with them instead of encoding them. */
    uint32_t *heads;
    uint64_t (*clock_ms)(void *);
    void *clock_arg;
    uint64_t expirations, evictions, index_bytes; /* atomics */
    lattice_store_evict_hook hook; /* changed with every partition lock held */
    lattice_store_change_hook change; /* likewise */
    /* Per partition, its update history (history.h), guarded by that
     * partition's lock; kept out of struct part, which readers touch. */
    lt_hist *hists;
    uint32_t hist_entries;   /* history bound per partition (records; 0 = off); set before use */
    uint64_t hist_bytes;     /* ... and bytes */
    pthread_mutex_t sweep_lock; /* serialises expire(); guards sweep_part */
    uint32_t sweep_part;
    pthread_mutex_t sw_lock; /* sweeper thread state below */
    pthread_cond_t sw_cond;
    pthread_t sw_thread;
    int sw_running, sw_stop;
    unsigned sw_interval;
    char name[32];
};

/* The key's tag: the top of its XXH3 64-bit hash.  Keys of up to 16 bytes
 * go straight to XXH3's short-input function (what XXH3_64bits itself
 * calls for them, with the default secret and seed 0), which is inlined
 * here: gcc does not inline the whole XXH3_64bits, and the call and its
 * length dispatch cost a get ~15 instructions.  A unit test checks that
 * both give the same hash for every length. */
static inline __attribute__((always_inline)) uint64_t key_hash(const void *key, size_t len)
{
    if (len <= 16) return XXH3_len_0to16_64b((const xxh_u8 *)key, len, XXH3_kSecret, 0);
    return XXH3_64bits(key, len);
}

static inline __attribute__((always_inline)) uint32_t key_tag(const void *key, size_t len)
{
    return ix_tag(key_hash(key, len));
}

static inline int expired(const lattice_store *s, uint64_t expire, uint64_t *now)
{
    if (!expire) return 0;
    if (!*now) *now = s->clock_ms(s->clock_arg);
    return expire <= *now;
}

/* Replaces the partition's table by t (or NULL) with fill n for readers and
 * writers and frees the old one after a grace period.  Partition lock held. */
void store_swap_table(lattice_store *s, struct part *p, struct ix_table *t, struct ix_counts n);
/* Removes the entry in slot i of the partition's table (its row included).
 * Partition lock held, region lock not held. */
void store_drop_slot(lattice_store *s, struct part *p, long i, uint64_t expire);
/* Rebuilds a table mostly emptied by removes smaller.  Partition lock held. */
void store_maybe_shrink(lattice_store *s, struct part *p);
/* Removes every entry of the partition and drops its table.  Partition lock
 * held. */
void store_clear_locked(lattice_store *s, struct part *p);

/* A put, remove or clear that concerns reserved keys (store_walk.c):
 * keeps p->reserved and bumps p->reserved_gen.  Partition lock held. */
void store_reserved_note(struct part *p, int kind, const lattice_store_entry *e);
void store_reserved_free(struct part *p);

/* Every change of an entry goes through here (partition lock held): the
 * history hears of it with its counter (UINT64_MAX: not known), then the
 * persistence hook. */
#define STORE_NO_COUNTER UINT64_MAX
static inline void store_note(lattice_store *s, struct part *p, int kind, const lattice_store_entry *e,
                              uint64_t counter)
{
    lt_hist *h = &s->hists[p->idx];
    if (kind == LATTICE_STORE_CHANGE_CLEAR) lt_hist_reset(h);
    else if (counter == STORE_NO_COUNTER) lt_hist_lose(h);
    else lt_hist_note(h, s->hist_entries, s->hist_bytes, counter, e->key, e->key_len,
                      kind == LATTICE_STORE_CHANGE_REMOVE);
    if (s->change.changed) s->change.changed(s->change.arg, kind, e);
    if (kind == LATTICE_STORE_CHANGE_CLEAR ? p->reserved != NULL
                                           : e->key_len && *(const uint8_t *)e->key == LATTICE_STORE_RESERVED_BYTE)
        store_reserved_note(p, kind, e);
}

#endif
