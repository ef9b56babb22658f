/*
 * history: the bounded per-partition update history a store keeps for delta
 * rebalance (docs/REBALANCE.md §9).  Internal to storage/ (store.c embeds one
 * per partition and drives it under the partition lock); unit-tested alone.
 *
 * A record is (counter, key, removed): the copy changed key at that update
 * counter.  The ring keeps at most max_entries records and max_bytes of keys
 * plus records; the oldest go first and raise `dropped`, the highest counter
 * the ring no longer holds.  Two questions it answers:
 *
 *   recorded_above(x)  every change this copy applied with a counter > x is
 *                      in the ring: nothing above x was dropped and no change
 *                      of unknown counter happened (a remove or eviction
 *                      without a counter marks the history `lost`).
 *   complete_above(x)  as recorded_above(x), and the copy itself holds every
 *                      update of the grid up to x: the caller said so with
 *                      valid_from(base) (after a full load at base, or for a
 *                      copy owned since the partition's first write), x >= base.
 *
 * A clear empties the ring and forgets validity.
 *
 * contig: with the history valid, every counter in (base, contig] is one
 * this copy applied - each counter was noted, none skipped.  Counters are
 * numbered one by one per partition by its primary, so a gap (a replicated
 * write this copy never received, or answered without applying) stops it
 * there for good: a copy may claim to hold the grid's writes only up to
 * contig (the delta mark, docs/CONSISTENCY.md).  Counters noted out of
 * order are kept in a 64-counter window above contig.
 */
#ifndef LATTICE_STORAGE_HISTORY_H
#define LATTICE_STORAGE_HISTORY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Keys up to this many bytes are held in the record itself: a note is then
 * no allocation and a drop no free (every write of a full_sync cache notes
 * one; an lt_malloc and lt_free per write were 2-3% of a node under
 * redis-benchmark SET -P 16). */
#define LT_HIST_INLINE_KEY 24u

typedef struct hist_rec {
    uint64_t counter;
    uint32_t key_len;
    bool removed;
    union {
        uint8_t *heap; /* key_len > LT_HIST_INLINE_KEY: lt_malloc'd */
        uint8_t inl[LT_HIST_INLINE_KEY];
    } key;
} hist_rec;

static inline const uint8_t *hist_rec_key(const hist_rec *r)
{
    return r->key_len > LT_HIST_INLINE_KEY ? r->key.heap : r->key.inl;
}

typedef struct lt_hist {
    hist_rec *ring;
    uint32_t cap, head, n;   /* ring slots allocated, oldest, count */
    uint64_t bytes;          /* keys + records held */
    uint64_t dropped;        /* highest counter dropped from the ring (0: none) */
    bool any_dropped;
    bool lost;               /* a change of unknown counter: nothing above anything is known */
    bool valid;              /* the copy is complete up to base */
    uint64_t base;
    uint64_t contig;         /* valid: every counter in (base, contig] was noted */
    uint64_t win;            /* bit i: counter contig + 1 + i was noted */
} lt_hist;

/* Bytes one record costs against max_bytes: its slot, and its key when the
 * key does not fit the slot. */
#define LT_HIST_REC_BYTES(key_len) \
    ((uint64_t)sizeof(hist_rec) + ((uint64_t)(key_len) > LT_HIST_INLINE_KEY ? (uint64_t)(key_len) : 0))

void lt_hist_init(lt_hist *h);
void lt_hist_free(lt_hist *h);
/* Records a change; an allocation failure marks the history lost.  With
 * max_entries 0 the history is off: every change marks it lost. */
void lt_hist_note(lt_hist *h, uint32_t max_entries, uint64_t max_bytes, uint64_t counter, const void *key,
                  size_t key_len, bool removed);
/* A change whose counter is not known (a remove without one, an eviction). */
void lt_hist_lose(lt_hist *h);
/* Clear: empty, not valid, not lost (a cleared copy starts over). */
void lt_hist_reset(lt_hist *h);
/* Complete up to base: contig starts there (and takes in the ring's
 * counters just above it, noted while the copy was loading). */
void lt_hist_valid_from(lt_hist *h, uint64_t base);
bool lt_hist_recorded_above(const lt_hist *h, uint64_t x);
bool lt_hist_complete_above(const lt_hist *h, uint64_t x);
/* Calls fn for each record with counter > x, oldest first; fn returning
 * non-zero stops the walk. */
typedef int (*lt_hist_fn)(void *arg, const void *key, size_t key_len, uint64_t counter, bool removed);
void lt_hist_walk_above(const lt_hist *h, uint64_t x, lt_hist_fn fn, void *arg);

#endif
