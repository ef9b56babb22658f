/*
 * The demander's applier: stores supplied batches into loading (MOVING)
 * partitions under the version rule, and keeps the removes seen during a
 * load so supplied data never brings a removed key back.
 *
 * Version rule: every entry carries the partition update counter of its
 * last write.  Batches go in with insert_batch(IF_NEWER), so a write that
 * reached the MOVING copy during the load (its counter was assigned by the
 * primary after the supplier's copy was written) is never overwritten by
 * an older supplied value.  A remove leaves no entry to compare against, so
 * the node reports it (note_remove) and this file filters supplied entries
 * against those "tombstones" until the partition's last batch.
 */
#include <string.h>
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "lattice/alloc.h"
#include "rebalance/rebalance.h"
#include "rebalance_int.h"

enum { PART_IDLE = 0, PART_LOADING = 1, PART_DONE = 2 };


struct tomb {
    struct tomb *next;
    uint64_t hash, version;
    uint32_t partition, klen;
    uint8_t key[];
};

static uint64_t tomb_hash(uint32_t partition, const void *key, size_t len)
{
    return XXH3_64bits_withSeed(key, len, partition);
}

static struct tomb **tomb_find(lattice_rebalance_applier *a, uint32_t partition, const void *key,
                               size_t len, uint64_t h)
{
    struct tomb **pp = &a->tombs[h & (a->tomb_buckets - 1)];
    for (; *pp; pp = &(*pp)->next)
        if ((*pp)->hash == h && (*pp)->partition == partition && (*pp)->klen == len &&
            !memcmp((*pp)->key, key, len))
            return pp;
    return pp;
}

static int tomb_grow(lattice_rebalance_applier *a)
{
    size_t nb = a->tomb_buckets ? a->tomb_buckets * 2 : 256;
    struct tomb **t = lt_calloc(nb, sizeof *t);
    if (!t) return -1;
    for (size_t i = 0; i < a->tomb_buckets; i++)
        for (struct tomb *x = a->tombs[i], *nx; x; x = nx) {
            nx = x->next;
            x->next = t[x->hash & (nb - 1)];
            t[x->hash & (nb - 1)] = x;
        }
    lt_free(a->tombs);
    a->tombs = t;
    a->tomb_buckets = nb;
    return 0;
}

static void tomb_drop_partition(lattice_rebalance_applier *a, uint32_t partition)
{
    if (!a->tomb_count[partition]) return;
    for (size_t i = 0; i < a->tomb_buckets; i++)
        for (struct tomb **pp = &a->tombs[i]; *pp;) {
            if ((*pp)->partition != partition) {
                pp = &(*pp)->next;
                continue;
            }
            struct tomb *x = *pp;
            *pp = x->next;
            lt_free(x);
            a->tomb_total--;
        }
    a->tomb_count[partition] = 0;
}

lattice_status lattice_rebalance_applier_note_remove(lattice_rebalance_applier *a,
                                                     uint32_t partition, const void *key,
                                                     size_t key_len, uint64_t version)
{
    if (!a || partition >= a->partitions || !key || !key_len || key_len > LATTICE_STORE_MAX_KEY)
        return LATTICE_ERR_INVAL;
    if (a->state[partition] != PART_LOADING) return LATTICE_OK;
    if (a->tomb_total >= a->tomb_buckets && tomb_grow(a)) return LATTICE_ERR_NOMEM;
    uint64_t h = tomb_hash(partition, key, key_len);
    struct tomb **pp = tomb_find(a, partition, key, key_len, h);
    if (*pp) {
        if (version > (*pp)->version) (*pp)->version = version;
        return LATTICE_OK;
    }
    struct tomb *x = lt_malloc(sizeof *x + key_len);
    if (!x) return LATTICE_ERR_NOMEM;
    *x = (struct tomb){NULL, h, version, partition, (uint32_t)key_len};
    memcpy(x->key, key, key_len);
    *pp = x;
    a->tomb_total++;
    a->tomb_count[partition]++;
    return LATTICE_OK;
}

/* Drops supplied entries that a remove seen during the load supersedes;
 * returns how many remain (compacted in place). */
static size_t drop_removed(lattice_rebalance_applier *a, uint32_t partition, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        const lattice_store_entry *e = &a->ents[i];
        struct tomb **pp = tomb_find(a, partition, e->key, e->key_len,
                                     tomb_hash(partition, e->key, e->key_len));
        if (*pp && e->version <= (*pp)->version) continue;
        a->ents[k++] = *e;
    }
    return k;
}

/* ------------------------------------------------------------------ delta */

static int note_prior_remove(void *arg, const void *key, size_t key_len, uint64_t counter, bool removed)
{
    void **x = arg;
    lattice_rebalance_applier *a = x[0];
    uint32_t p = *(uint32_t *)x[1];
    if (removed && lattice_rebalance_applier_note_remove(a, p, key, key_len, counter) != LATTICE_OK) {
        x[2] = (void *)1;
        return 1;
    }
    return 0;
}

lattice_status lattice_rebalance_applier_begin_delta(lattice_rebalance_applier *a, uint32_t partition,
                                                     lattice_store *base, uint64_t mark)
{
    if (!a || !base || partition >= a->partitions || lattice_store_partitions(base) != a->partitions)
        return LATTICE_ERR_INVAL;
    if (!a->base) {
        a->base = lt_calloc(a->partitions, sizeof *a->base);
        a->mark = lt_calloc(a->partitions, sizeof *a->mark);
        a->adopted = lt_calloc(a->partitions, 1);
        if (!a->base || !a->mark || !a->adopted) {
            lt_free(a->base), lt_free(a->mark), lt_free(a->adopted);
            a->base = NULL, a->mark = NULL, a->adopted = NULL;
            return LATTICE_ERR_NOMEM;
        }
    }
    lattice_status st = lattice_rebalance_applier_begin(a, partition, false);
    if (st != LATTICE_OK) return st;
    void *x[3] = {a, &partition, NULL};
    if (lattice_store_history_above(a->store, partition, 0, false, note_prior_remove, x) != LATTICE_OK) return LATTICE_ERR_NOT_FOUND;
    if (x[2]) return LATTICE_ERR_NOMEM;
    a->base[partition] = base;
    a->mark[partition] = mark;
    a->adopted[partition] = 0;
    return LATTICE_OK;
}

typedef struct take_buf {
    lattice_store_entry *e;
    size_t n, cap;
    uint8_t *arena;         /* the batch's keys and values, one after the other */
    size_t used, acap;
    uint64_t mark;
    bool failed;
    lattice_rebalance_applier *a;
    uint32_t p;
} take_buf;

/* Bytes into the batch's arena; the entries hold offsets until take_fix
 * turns them into pointers (the arena may move while it grows). */
static bool take_copy(take_buf *b, const void *x, size_t n, size_t *off)
{
    if (b->used + n > b->acap) {
        size_t nc = b->acap ? b->acap * 2 : 1u << 16;
        while (nc < b->used + n) nc *= 2;
        uint8_t *y = lt_realloc(b->arena, nc);
        if (!y) return false;
        b->arena = y;
        b->acap = nc;
    }
    memcpy(b->arena + b->used, x, n);
    *off = b->used;
    b->used += n;
    return true;
}

static int take_one(void *arg, const lattice_store_item *it)
{
    take_buf *b = arg;
    if (it->version > b->mark) return 0; /* may be unacknowledged: the delta brings the grid's */
    if (b->a->tomb_count[b->p]) {
        struct tomb **t = tomb_find(b->a, b->p, it->key, it->key_len, tomb_hash(b->p, it->key, it->key_len));
        if (*t && it->version <= (*t)->version) return 0; /* removed since */
    }
    if (b->n == b->cap) {
        size_t nc = b->cap ? b->cap * 2 : 256;
        lattice_store_entry *x = lt_realloc(b->e, nc * sizeof *x);
        if (!x) {
            b->failed = true;
            return 1;
        }
        b->e = x;
        b->cap = nc;
    }
    size_t ko, vo;
    if (!take_copy(b, it->key, it->key_len, &ko) || !take_copy(b, it->value, it->value_len, &vo)) {
        b->failed = true;
        return 1;
    }
    b->e[b->n++] = (lattice_store_entry){it->partition, (const void *)(uintptr_t)ko, it->key_len,
                                         (const void *)(uintptr_t)vo, it->value_len, it->expire_ms, it->version, it->type};
    return 0;
}

static void take_fix(take_buf *b)
{
    for (size_t i = 0; i < b->n; i++) {
        b->e[i].key = b->arena + (uintptr_t)b->e[i].key;
        b->e[i].value = b->arena + (uintptr_t)b->e[i].value;
    }
}

static void take_clear(take_buf *b)
{
    b->n = 0;
    b->used = 0;
}

/* Takes the kept copy of p in (entries up to its mark, minus removes seen). */
static lattice_status adopt(lattice_rebalance_applier *a, uint32_t p, uint64_t *taken)
{
    lattice_store_cursor *cur = NULL;
    take_buf b = {.mark = a->mark[p], .a = a, .p = p};
    int st = lattice_store_cursor_open(a->base[p], p, &cur);
    for (int done = 0; st == LATTICE_OK && !done;) {
        st = lattice_store_cursor_next(cur, 1024, 1u << 20, take_one, &b, &done);
        if (b.failed) st = LATTICE_ERR_NOMEM;
        size_t applied = 0;
        if (st == LATTICE_OK && b.n) {
            take_fix(&b);
            st = lattice_store_insert_batch(a->store, p, b.e, b.n, LATTICE_STORE_IF_NEWER, &applied);
            *taken += applied;
        }
        take_clear(&b);
    }
    if (cur) lattice_store_cursor_close(cur);
    lt_free(b.e);
    lt_free(b.arena);
    return (lattice_status)st;
}

/* A delta removal: gone unless the stored entry is newer. */
static lattice_status apply_removal(lattice_rebalance_applier *a, uint32_t p, const lattice_store_entry *e)
{
    lattice_status st = lattice_rebalance_applier_note_remove(a, p, e->key, e->key_len, e->version);
    if (st != LATTICE_OK) return st;
    void *v = NULL;
    lattice_store_meta m = {0};
    int g = lattice_store_get_copy(a->store, p, e->key, e->key_len, &v, &m);
    lt_free(v);
    if (g == LATTICE_ERR_NOT_FOUND) return LATTICE_OK;
    if (g != LATTICE_OK) return (lattice_status)g;
    if (m.version >= e->version) return LATTICE_OK;
    g = lattice_store_remove_v(a->store, p, e->key, e->key_len, e->version);
    return g == LATTICE_ERR_NOT_FOUND ? LATTICE_OK : (lattice_status)g;
}

lattice_status lattice_rebalance_applier_create(lattice_store *store, const char *cache,
                                                const lattice_rebalance_ids *ids,
                                                lattice_rebalance_progress *progress,
                                                lattice_rebalance_applier **out)
{
    if (!store || !cache || !lattice_cache_config_name_valid(cache, NULL, 0) || !ids || !out)
        return LATTICE_ERR_INVAL;
    lattice_rebalance_applier *a = lt_calloc(1, sizeof *a);
    if (!a) return LATTICE_ERR_NOMEM;
    a->partitions = lattice_store_partitions(store);
    a->state = lt_calloc(a->partitions, 1);
    a->tomb_count = lt_calloc(a->partitions, sizeof *a->tomb_count);
    if (!a->state || !a->tomb_count) {
        lt_free(a->state);
        lt_free(a->tomb_count);
        lt_free(a);
        return LATTICE_ERR_NOMEM;
    }
    a->store = store;
    strcpy(a->cache, cache);
    a->ids = *ids;
    a->progress = progress;
    *out = a;
    return LATTICE_OK;
}

void lattice_rebalance_applier_set_ids(lattice_rebalance_applier *a,
                                       const lattice_rebalance_ids *ids)
{
    a->ids = *ids;
}

lattice_status lattice_rebalance_applier_begin(lattice_rebalance_applier *a, uint32_t partition,
                                               bool full)
{
    if (!a || partition >= a->partitions) return LATTICE_ERR_INVAL;
    if (full) {
        int rc = lattice_store_clear(a->store, partition);
        if (rc != LATTICE_OK) return (lattice_status)rc;
    }
    if (a->state[partition] != PART_LOADING) {
        if (a->state[partition] == PART_DONE && a->progress) a->progress->partitions_done--;
        a->state[partition] = PART_LOADING;
        a->pending++;
        if (a->progress) a->progress->partitions_moving++;
    }
    return LATTICE_OK;
}

static int ids_equal(const lattice_rebalance_ids *x, const lattice_rebalance_ids *y)
{
    return x->topology_major == y->topology_major && x->topology_minor == y->topology_minor &&
           x->rebalance_id == y->rebalance_id && x->session == y->session;
}

lattice_status lattice_rebalance_applier_apply(lattice_rebalance_applier *a,
                                               const lattice_rebalance_supply *s,
                                               lattice_rebalance_apply_result *r)
{
    if (!a || !s || !r) return LATTICE_ERR_INVAL;
    memset(r, 0, sizeof *r);
    lattice_rebalance_supply_info in;
    lattice_rebalance_supply_info_of(s, &in);
    if (strcmp(in.cache, a->cache) || !ids_equal(&in.ids, &a->ids)) {
        r->verdict = LATTICE_REBALANCE_STALE;
        return LATTICE_OK;
    }
    if (in.status != LATTICE_OK) {
        r->verdict = LATTICE_REBALANCE_REFUSED;
        return LATTICE_OK;
    }
    if (in.partition >= a->partitions || a->state[in.partition] != PART_LOADING) {
        r->verdict = LATTICE_REBALANCE_UNEXPECTED;
        return LATTICE_OK;
    }
    if (in.entries > a->ecap) {
        size_t nc = a->ecap ? a->ecap : 128;
        while (nc < in.entries) nc *= 2;
        lattice_store_entry *e = lt_realloc(a->ents, nc * sizeof *e);
        if (!e) return LATTICE_ERR_NOMEM;
        a->ents = e;
        a->ecap = nc;
    }
    uint32_t p = in.partition;
    bool has_base = a->base && a->base[p];
    if (has_base && in.delta && !a->adopted[p]) {
        uint64_t taken = 0;
        lattice_status st = adopt(a, p, &taken);
        if (st != LATTICE_OK) {
            /* Half taken in: start the partition over in full. */
            lattice_store_clear(a->store, p);
            a->base[p] = NULL;
            return st;
        }
        a->adopted[p] = 1;
    } else if (has_base && !in.delta) {
        /* The supplier's history does not reach back: a full copy.  Should
         * the kept copy be in already (a switch of supplier), it goes, so
         * nothing the grid removed stays. */
        if (a->adopted[p]) lattice_store_clear(a->store, p);
        a->base[p] = NULL;
        a->adopted[p] = 0;
    } else if (in.delta && !has_base) {
        r->verdict = LATTICE_REBALANCE_UNEXPECTED; /* a delta against a base we did not offer */
        return LATTICE_OK;
    }
    size_t n = 0, applied = 0;
    for (size_t i = 0; i < in.entries; i++) {
        lattice_rebalance_supply_entry(s, i, &a->ents[n]);
        if (!lattice_rebalance_supply_entry_removed(s, i)) {
            n++;
            continue;
        }
        lattice_status st = apply_removal(a, p, &a->ents[n]);
        if (st != LATTICE_OK) return st;
        applied++;
    }
    if (a->tomb_count[in.partition]) n = drop_removed(a, in.partition, n);
    if (n) {
        int rc = lattice_store_insert_batch(a->store, in.partition, a->ents, n,
                                            LATTICE_STORE_IF_NEWER, &applied);
        if (rc != LATTICE_OK) return (lattice_status)rc;
    }
    r->verdict = LATTICE_REBALANCE_APPLIED;
    r->delta = in.delta;
    r->applied = applied;
    r->skipped = in.entries - applied;
    if (a->progress) {
        a->progress->entries_received += in.entries;
        a->progress->bytes_received += in.payload_bytes;
    }
    if (in.last) {
        tomb_drop_partition(a, in.partition);
        a->state[in.partition] = PART_DONE;
        a->pending--;
        r->partition_done = true;
        r->update_counter = in.update_counter;
        if (a->base) a->base[p] = NULL;
        if (a->progress) {
            a->progress->partitions_moving--;
            a->progress->partitions_done++;
            a->progress->partitions_delta += in.delta;
        }
    }
    return LATTICE_OK;
}

void lattice_rebalance_applier_free(lattice_rebalance_applier *a)
{
    if (!a) return;
    for (size_t i = 0; i < a->tomb_buckets; i++)
        for (struct tomb *x = a->tombs[i], *nx; x; x = nx) {
            nx = x->next;
            lt_free(x);
        }
    lt_free(a->tombs);
    lt_free(a->tomb_count);
    lt_free(a->base);
    lt_free(a->mark);
    lt_free(a->adopted);
    lt_free(a->state);
    lt_free(a->ents);
    lt_free(a);
}
