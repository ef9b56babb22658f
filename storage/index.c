/*
 * The per-partition index table: memory, rebuilds, slot changes and the
 * cursor's range selection.  Layout and the rules readers rely on:
 * index_int.h.
 *
 * Load: a table is rebuilt when live + tombstones would pass 13/16 of its
 * home slots, to the capacity that puts the live keys at 5/8.  So the load
 * stays between 0.62 and 0.81 while a partition grows (12.8 bytes a slot:
 * 16-21 bytes per entry), and capacities are not powers of two (the home
 * slot is a multiply-shift, which works for any capacity).  A rebuild copies
 * slots only - it never reads a row - so growing costs a few slot copies per
 * entry, amortised.
 */
#include <stdlib.h>
#include <string.h>

#include "lattice/alloc.h"
#include "index_int.h"

#define LOAD_MAX_NUM 13u /* rebuild when used would pass 13/16 */
#define LOAD_MAX_DEN 16u
#define LOAD_NEW_NUM 5u  /* a rebuilt table starts at 5/8 */
#define LOAD_NEW_DEN 8u

static uint32_t lines_for(uint32_t cap)
{
    return (cap + IX_OVERFLOW + IX_LINE_SLOTS - 1) / IX_LINE_SLOTS;
}

size_t ix_bytes(uint32_t cap)
{
    /* With the slack that aligns the lines to cache lines. */
    return sizeof(struct ix_table) + (size_t)lines_for(cap) * sizeof(struct ix_line) + 63;
}

struct ix_table *ix_new(uint32_t cap)
{
    if (cap < IX_MIN_CAP) cap = IX_MIN_CAP;
    if (cap > IX_MAX_CAP) return NULL;
    void *mem = lt_malloc(ix_bytes(cap));
    if (!mem) return NULL;
    struct ix_table *t = (struct ix_table *)(((uintptr_t)mem + 63) & ~(uintptr_t)63);
    /* Zeroed: every tag IX_EMPTY (the links need no initial value, but the
     * lines are one memset). */
    memset(t, 0, sizeof *t + (size_t)lines_for(cap) * sizeof(struct ix_line));
    t->cap = cap;
    t->nslots = cap + IX_OVERFLOW;
    t->mem = mem;
    return t;
}

void ix_free(struct ix_table *t)
{
    if (t) lt_free(t->mem);
}

static void retire_cb(struct rcu_head *h)
{
    ix_free(caa_container_of(h, struct ix_table, rcu));
}

void ix_retire(struct ix_table *t)
{
    if (t) call_rcu(&t->rcu, retire_cb);
}

int ix_has_room(const struct ix_table *t, const struct ix_counts *n, uint32_t more)
{
    return (uint64_t)(n->used + more) * LOAD_MAX_DEN <= (uint64_t)t->cap * LOAD_MAX_NUM;
}

uint32_t ix_cap_for(uint64_t live, uint32_t more)
{
    uint64_t want = (live + more) * LOAD_NEW_DEN / LOAD_NEW_NUM + 1;
    /* At least room for `more` without an immediate second rebuild. */
    uint64_t floor = (live + more) * LOAD_MAX_DEN / LOAD_MAX_NUM + 1;
    if (want < floor) want = floor;
    if (want < IX_MIN_CAP) want = IX_MIN_CAP;
    return want > IX_MAX_CAP ? IX_MAX_CAP + 1u : (uint32_t)want;
}

long ix_free_slot(const struct ix_table *t, uint32_t tag)
{
    for (uint32_t i = ix_home(t, tag); i < t->nslots; i++)
        if (*ix_tagp(t, i) <= IX_TOMB) return (long)i;
    return -1;
}

void ix_fill(struct ix_table *t, struct ix_counts *n, long i, uint32_t tag, uint64_t link)
{
    if (*ix_tagp(t, (uint32_t)i) == IX_EMPTY) n->used++;
    n->live++;
    __atomic_store_n(ix_linkp(t, (uint32_t)i), link, __ATOMIC_RELEASE);
    __atomic_store_n(ix_tagp(t, (uint32_t)i), tag, __ATOMIC_RELEASE);
}

void ix_kill(struct ix_table *t, struct ix_counts *n, long i)
{
    n->live--;
    __atomic_store_n(ix_tagp(t, (uint32_t)i), IX_TOMB, __ATOMIC_RELEASE);
}

struct ix_table *ix_rebuild(const struct ix_table *old, uint32_t cap, struct ix_counts *n)
{
    for (;;) {
        struct ix_table *t = ix_new(cap);
        if (!t) return NULL;
        n->live = n->used = 0;
        int fits = 1;
        for (uint32_t i = 0; fits && i < old->nslots; i++) {
            uint32_t tag = *ix_tagp(old, i);
            if (tag <= IX_TOMB) continue;
            /* Not yet published: plain stores are enough. */
            uint32_t j = ix_home(t, tag);
            while (j < t->nslots && *ix_tagp(t, j) != IX_EMPTY) j++;
            if (j == t->nslots) {
                fits = 0;
                break;
            }
            *ix_tagp(t, j) = tag;
            *ix_linkp(t, j) = *ix_linkp(old, i);
            n->live++;
            n->used++;
        }
        if (fits) return t;
        /* A run of keys near the top of the tag space spilled past the
         * overflow slots: try a larger table. */
        ix_free(t);
        if (cap >= IX_MAX_CAP / 2) return NULL;
        cap *= 2;
    }
}
