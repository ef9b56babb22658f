/*
 * The per-partition index table: memory, rebuilds, slot changes and the
 * cursor's range selection.  Layout and the rules readers rely on:
 * index_int.h.
 *
 * Load: a table is rebuilt when live + tombstones would pass 13/16 of its
 * home slots, to the capacity that puts the live keys at 5/8.  So the load
 * stays between 0.62 and 0.81 while a partition grows (12 bytes a slot:
 * 15-19 bytes per entry), and capacities are not powers of two (the home
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

size_t ix_bytes(uint32_t cap)
{
    uint32_t n = cap + IX_OVERFLOW;
    return sizeof(struct ix_table) + ix_tags_bytes(cap) + (size_t)n * sizeof(uint64_t);
}

struct ix_table *ix_new(uint32_t cap)
{
    if (cap < IX_MIN_CAP) cap = IX_MIN_CAP;
    if (cap > IX_MAX_CAP) return NULL;
    uint32_t n = cap + IX_OVERFLOW;
    /* Zeroed: every tag IX_EMPTY.  The links need no initial value. */
    struct ix_table *t = lt_malloc(ix_bytes(cap));
    if (!t) return NULL;
    memset(t, 0, sizeof *t + ix_tags_bytes(cap));
    t->cap = cap;
    t->nslots = n;
    t->links = ix_links_at(t, cap);
    return t;
}

void ix_free(struct ix_table *t) { lt_free(t); }

static void retire_cb(struct rcu_head *h)
{
    ix_free(caa_container_of(h, struct ix_table, rcu));
}

void ix_retire(struct ix_table *t)
{
    if (t) call_rcu(&t->rcu, retire_cb);
}

int ix_has_room(const struct ix_table *t, uint32_t more)
{
    return (uint64_t)(t->used + more) * LOAD_MAX_DEN <= (uint64_t)t->cap * LOAD_MAX_NUM;
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
        if (t->tags[i] <= IX_TOMB) return (long)i;
    return -1;
}

void ix_fill(struct ix_table *t, long i, uint32_t tag, uint64_t link)
{
    if (t->tags[i] == IX_EMPTY) t->used++;
    t->live++;
    __atomic_store_n(&t->links[i], link, __ATOMIC_RELEASE);
    __atomic_store_n(&t->tags[i], tag, __ATOMIC_RELEASE);
}

void ix_kill(struct ix_table *t, long i)
{
    t->live--;
    __atomic_store_n(&t->tags[i], IX_TOMB, __ATOMIC_RELEASE);
}

struct ix_table *ix_rebuild(const struct ix_table *old, uint32_t cap)
{
    for (;;) {
        struct ix_table *t = ix_new(cap);
        if (!t) return NULL;
        int fits = 1;
        for (uint32_t i = 0; fits && i < old->nslots; i++) {
            uint32_t tag = old->tags[i];
            if (tag <= IX_TOMB) continue;
            /* Not yet published: plain stores are enough. */
            uint32_t j = ix_home(t, tag);
            while (j < t->nslots && t->tags[j] != IX_EMPTY) j++;
            if (j == t->nslots) {
                fits = 0;
                break;
            }
            t->tags[j] = tag;
            t->links[j] = old->links[i];
            t->live++;
            t->used++;
        }
        if (fits) return t;
        /* A run of keys near the top of the tag space spilled past the
         * overflow slots: try a larger table. */
        ix_free(t);
        if (cap >= IX_MAX_CAP / 2) return NULL;
        cap *= 2;
    }
}
