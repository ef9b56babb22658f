/*
 * The per-partition index (index.c): an open-addressing table of
 * (tag, link) slots.  Not a public header: only storage/ includes it.
 *
 *   slot i lives in cache line i / 5 of the table, at position i % 5:
 *     struct ix_line { uint32 tags[5]; pad; uint64 links[5]; }  (64 bytes)
 *   tag   0 empty, 1 tombstone, else the key's tag
 *   link  the entry's head-row link (with its position hint), valid while
 *         the tag is a key's
 * A slot's tag and link share one cache line, so a probe costs one line
 * (two only when the probe crosses a line), not one for the tags and one
 * for the links.
 *
 * tag = the top 32 bits of the key's 64-bit hash (values 0 and 1 map to 2).
 * A key's home slot is (tag * cap) >> 32: monotonic in the tag, so the table
 * is ordered by tag up to probe displacement, which cursors rely on.  Probing
 * is linear and never wraps: nslots = cap + IX_OVERFLOW, and a probe that
 * runs off the end makes the writer rebuild a larger table.
 *
 * Rules that keep lock-free readers correct:
 *   - Only writers holding the partition lock change a table.  A slot goes
 *     empty -> key -> tombstone -> key ...: never back to empty, so every
 *     slot between a key's home and its slot stays non-empty for its life
 *     and a reader's probe always reaches it.
 *   - A new slot is written link first, then tag (release); readers load
 *     the tag (acquire), then the link.  A relocating update stores the new
 *     link (release) before freeing the old row, so a reader whose row
 *     vanished reloads the link and retries.
 *   - A rebuild copies every live slot into a new table, publishes it with
 *     rcu_assign_pointer and frees the old one after a grace period.  The
 *     old table is frozen from then on: a reader that finds nothing (or a
 *     row that no longer matches) in it re-reads the partition's table
 *     pointer and, when it changed, searches the new table.
 * The key lives only in its row; the row check (key bytes, store, partition)
 * is what decides a match, the tag only filters.
 */
#ifndef LATTICE_STORAGE_INDEX_INT_H
#define LATTICE_STORAGE_INDEX_INT_H

#include <stddef.h>
#include <stdint.h>
#include <urcu.h>

#define IX_EMPTY 0u
#define IX_TOMB 1u
#define IX_OVERFLOW 64u    /* slots past cap that probes may run into */
#define IX_MIN_CAP 16u
#define IX_MAX_CAP (1u << 30)

#define IX_LINE_SLOTS 5u

struct ix_line {
    uint32_t tags[IX_LINE_SLOTS];
    uint32_t pad;
    uint64_t links[IX_LINE_SLOTS];
} __attribute__((aligned(64)));

/* A table's fill, kept by its owner (struct part, beside the partition
 * lock) rather than in the table header: every insert changes it, and on
 * the lock's cache line that costs no line of its own - with two writers
 * on one partition each line a write touches moves between their cores. */
struct ix_counts {
    uint32_t live; /* slots holding a key; partition lock */
    uint32_t used; /* live + tombstones; partition lock */
};

struct ix_table {
    struct rcu_head rcu;
    uint32_t cap;    /* home slots */
    uint32_t nslots; /* cap + IX_OVERFLOW */
    void *mem;       /* what was allocated (the table is aligned inside it) */
    struct ix_line lines[]; /* ceil(nslots / 5) lines, cache-line aligned */
};

static inline uint32_t ix_tag(uint64_t hash)
{
    uint32_t t = (uint32_t)(hash >> 32);
    return t < 2 ? 2 : t;
}

static inline uint32_t ix_home_cap(uint32_t cap, uint32_t tag)
{
    return (uint32_t)(((uint64_t)tag * cap) >> 32);
}

static inline uint32_t ix_home(const struct ix_table *t, uint32_t tag)
{
    return ix_home_cap(t->cap, tag);
}

/* Slot i's tag and link: computed from the table address alone, so a
 * reader that knows cap need not wait for the table header. */
static inline uint32_t *ix_tagp(const struct ix_table *t, uint32_t i)
{
    return (uint32_t *)&t->lines[i / IX_LINE_SLOTS].tags[i % IX_LINE_SLOTS];
}

static inline uint64_t *ix_linkp(const struct ix_table *t, uint32_t i)
{
    return (uint64_t *)&t->lines[i / IX_LINE_SLOTS].links[i % IX_LINE_SLOTS];
}

static inline uint32_t ix_tag_at(const struct ix_table *t, uint32_t i)
{
    return __atomic_load_n(ix_tagp(t, i), __ATOMIC_ACQUIRE);
}

static inline uint64_t ix_link_at(const struct ix_table *t, uint32_t i)
{
    return __atomic_load_n(ix_linkp(t, i), __ATOMIC_ACQUIRE);
}

/* Bytes of a table of cap home slots (what the store reports as index memory). */
size_t ix_bytes(uint32_t cap);
/* A table with every slot empty, or NULL (out of memory). */
struct ix_table *ix_new(uint32_t cap);
void ix_free(struct ix_table *t);
/* Frees t after a grace period (call_rcu; the caller must be a registered
 * RCU thread outside a read-side section or inside one: both are allowed). */
void ix_retire(struct ix_table *t);

/* Whether `more` new keys fit without a rebuild (live + tombstones stay
 * within the maximum load). */
int ix_has_room(const struct ix_table *t, const struct ix_counts *n, uint32_t more);
/* The capacity a rebuild for `live` keys (plus room for `more`) should use. */
uint32_t ix_cap_for(uint64_t live, uint32_t more);
/* A new table of at least cap home slots holding every live slot of old
 * (tombstones dropped), its fill in *n.  NULL when out of memory or cap is
 * too large. */
struct ix_table *ix_rebuild(const struct ix_table *old, uint32_t cap, struct ix_counts *n);

/* Writers (partition lock): the first free (empty or tombstone) slot at or
 * after the home of tag, or -1 when the probe runs off the end. */
long ix_free_slot(const struct ix_table *t, uint32_t tag);
/* Fills free slot i (link first, then tag). */
void ix_fill(struct ix_table *t, struct ix_counts *n, long i, uint32_t tag, uint64_t link);
/* Turns live slot i into a tombstone. */
void ix_kill(struct ix_table *t, struct ix_counts *n, long i);

#endif
