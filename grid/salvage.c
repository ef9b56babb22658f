/*
 * salvage: the copies a node keeps when it rejoins under a new id (data
 * thread).
 *
 * A node that rejoins as a new one normally starts empty: what it held may
 * be stale (the grid served its partitions meanwhile), and keys removed
 * since must not come back through it.  One case is different: a partition
 * whose every serving owner left in one topology change - two servers of a
 * backups=1 cache cut off together - had no live copy on the side that
 * carried on, so nobody wrote it there, and the cut-off owners' copies hold
 * all its acknowledged writes.  Dropping them would lose those writes.
 *
 * So forget_data() hands the old incarnation's stores here instead of
 * freeing them.  The coordinator recorded each such partition with the node
 * ids of the owners it had just before (lattice_meta_lost); this node
 * reports, in every base check, the kept copies of the partitions whose
 * record names its old id, with their update counters - whether or not it
 * is one of the partition's owners-to-be.  Once every owner a record names
 * has reported, the coordinator picks the copy with the highest counter
 * (they differ only by writes no client saw acknowledged; on a tie, an
 * owner-to-be's) and names its holder the restorer; the restorer moves that
 * copy into its new store, and from there the rebalance loads the partition
 * into its owners-to-be (the planner sees the restorer's copy as the one
 * OWNING copy; a restorer that is no owner-to-be holds it only to supply
 * it, until the record ends).  The next
 * base switch ends the record.  A copy no record names is freed at the first
 * metadata this node applies; one a record names is kept until the record
 * ends (its restorer may leave and another be picked).
 *
 * A node keeps one set of copies: a second rejoin before they were used
 * keeps the first set (the incarnation in between held nothing of them).
 * Only a grid holding a quorum of its baseline frees or moves them
 * (the `quorum` argument): an incarnation in between may have joined the
 * cut-off side that a merge dissolves a moment later, whose metadata never
 * heard of the records naming them - had it freed the copies it loaded
 * there, or every copy its records did not name, the records of the grid
 * that counts would wait forever for a copy that is gone.
 */
#include <stdio.h>
#include <string.h>

#include "lattice/alloc.h"
#include "lattice/clock.h"
#include "lattice/log.h"
#include "grid_int.h"
#include "persist/persist.h"

struct salvage_cache {
    lattice_cache_config cfg;
    lattice_store *store;
    uint64_t *counter;
    uint8_t *held;  /* per partition: still kept */
    uint64_t *mark; /* per partition: delta base up to this counter (has_mark) */
    uint8_t *has_mark;
    uint64_t kept_ms; /* when it was kept (lt_mono_ms) */
};

static void cache_drop(salvage_cache *s)
{
    if (s->store) lattice_store_destroy(s->store);
    lt_free(s->counter);
    lt_free(s->held);
    lt_free(s->mark);
    lt_free(s->has_mark);
    memset(s, 0, sizeof *s);
}

void salvage_free(lattice_ops *d)
{
    for (size_t i = 0; i < d->grid->n_salvage; i++) cache_drop(&d->grid->salvage[i]);
    lt_free(d->grid->salvage);
    d->grid->salvage = NULL;
    d->grid->n_salvage = 0;
    d->grid->salvage_id[0] = 0;
}

void salvage_keep_recovered(lattice_ops *d, const lattice_cache_config *cfg, lattice_store *store,
                            uint64_t *counter, uint64_t *marks, const char *ids)
{
    /* Every cache the data directory recovered is kept beside the others
     * (one set: the incarnations that wrote the directory); never mixed
     * into copies another incarnation kept.  Before, only the first cache
     * attached was kept - the others loaded in full after a restart. */
    bool other_set = d->grid->n_salvage && strcmp(d->grid->salvage_id, ids) != 0;
    uint8_t *held = lt_calloc(cfg->partitions, 1), *has = lt_calloc(cfg->partitions, 1);
    salvage_cache *x = other_set ? NULL : lt_realloc(d->grid->salvage, (d->grid->n_salvage + 1) * sizeof *x);
    if (!marks && (marks = lt_malloc(cfg->partitions * sizeof *marks)))
        for (uint32_t p = 0; p < cfg->partitions; p++) marks[p] = LT_MARK_NONE;
    if (!held || !has || !x || !marks) {
        lt_free(held), lt_free(has), lt_free(marks), lt_free(counter);
        lattice_store_destroy(store);
        return;
    }
    d->grid->salvage = x;
    /* The lost records of now: a partition whose every owner was killed at
     * once (two servers of a backups=1 cache) waits for their copies, and
     * this directory holds one of them - all its acknowledged writes (a
     * write is acknowledged once logged) - mark or no mark. */
    const lattice_meta_cache *now = d->meta && lattice_meta_valid(d->meta) ? lattice_meta_cache_of(d->meta, cfg->name) : NULL;
    if (now && !lattice_cache_config_equal(&now->cfg, cfg)) now = NULL;
    uint32_t marked = 0, named = 0;
    for (uint32_t p = 0; p < cfg->partitions; p++) {
        if (!lattice_store_count(store, p)) {
            marks[p] = LT_MARK_NONE;
            continue;
        }
        const lattice_meta_lost *l = now ? lattice_meta_lost_of(now, p) : NULL;
        if (l && lattice_meta_lost_names(l, ids)) {
            held[p] = 1;
            named++;
        }
        if (marks[p] == LT_MARK_NONE) continue;
        held[p] = has[p] = 1;
        /* Every grid write up to the mark is in it (what the mark was
         * written for): complete from there; its replayed history lists
         * what it changed above (docs/PERSISTENCE.md, "Delta rejoin"). */
        lattice_store_history_valid_from(store, p, marks[p]);
        marked++;
    }
    if (!marked && !named) { /* nothing in it serves as a delta base (an idle cache) nor a lost record */
        lt_free(held), lt_free(has), lt_free(marks), lt_free(counter);
        lattice_store_destroy(store);
        return;
    }
    for (uint32_t p = 0; p < cfg->partitions; p++)
        if (!held[p]) lattice_store_clear(store, p);
    salvage_cache *s = &d->grid->salvage[d->grid->n_salvage++];
    memset(s, 0, sizeof *s);
    s->cfg = *cfg;
    s->store = store;
    s->counter = counter;
    s->held = held;
    s->mark = marks;
    s->has_mark = has;
    s->kept_ms = lt_mono_ms();
    snprintf(d->grid->salvage_id, sizeof d->grid->salvage_id, "%s", ids);
    LT_LOG(LT_INFO, "data", "cache %s: keeping the copy recovered from the data directory (incarnations %s) as a "
           "delta base: %u partitions with a mark, %u a lost record waits for", cfg->name, ids, marked, named);
}

size_t salvage_held(const lattice_ops *d)
{
    size_t n = 0;
    for (size_t i = 0; i < d->grid->n_salvage; i++) {
        const salvage_cache *s = &d->grid->salvage[i];
        for (uint32_t p = 0; s->store && p < s->cfg.partitions; p++) n += s->held[p];
    }
    return n;
}

void salvage_keep(lattice_ops *d, lattice_meta *old)
{
    if (d->grid->n_salvage && salvage_held(d)) { /* the first set is the one that held data */
        LT_LOG(LT_INFO, "data", "still keeping the copies of incarnation %s (%zu partitions) for the grid's lost records",
               d->grid->salvage_id, salvage_held(d));
        return;
    }
    /* A first set that holds nothing any more (every partition of it was
     * loaded, in a grid with quorum) can serve no lost record: the copies
     * of the incarnation that loaded them are the ones to keep - a node
     * paused twice comes back as a delta again, not in full. */
    if (d->grid->n_salvage) salvage_free(d);
    size_t n = lattice_meta_cache_count(old);
    d->grid->salvage = lt_calloc(n ? n : 1, sizeof *d->grid->salvage);
    if (!d->grid->salvage) return;
    for (size_t i = 0; i < n; i++) {
        lattice_meta_cache *c = lattice_meta_cache_at(old, i);
        uint8_t *held = lt_malloc(c->cfg.partitions);
        if (!c->store || !c->counter || !held) {
            lt_free(held);
            continue;
        }
        memset(held, 1, c->cfg.partitions);
        salvage_cache *s = &d->grid->salvage[d->grid->n_salvage++];
        s->cfg = c->cfg;
        s->store = c->store;
        s->counter = c->counter;
        s->held = held;
        s->kept_ms = lt_mono_ms();
        /* Delta bases: the copies this node served, with the watermark it
         * knew, but never above the counter up to which this copy applied
         * every write (its history's contig): a watermark says the grid
         * acknowledged every write up to it, not that this copy got each
         * one (a write it answered without applying, one sent to its next
         * incarnation while this one still held the cache).  docs/CONSISTENCY.md,
         * "Delta rebalance". */
        s->mark = lt_calloc(c->cfg.partitions, sizeof *s->mark);
        s->has_mark = lt_calloc(c->cfg.partitions, 1);
        for (uint32_t p = 0; s->mark && s->has_mark && p < c->cfg.partitions; p++)
            s->has_mark[p] = clean_delta_mark(c, p, &s->mark[p]);
        /* The meta frees the cache without them; the eviction hook named it. */
        lattice_store_set_evict_hook(s->store, NULL);
        uint32_t marked = 0;
        for (uint32_t p = 0; s->has_mark && p < c->cfg.partitions; p++) marked += s->has_mark[p];
        LT_LOG(LT_INFO, "data", "cache %s: keeping the copies of the old incarnation, %u of them with a delta mark",
               c->cfg.name, marked);
        c->store = NULL;
        c->counter = NULL;
    }
    /* Under every id whose writes the stores carry (a copy adopted from the
     * data directory still holds its writers' partitions). */
    snprintf(d->grid->salvage_id, sizeof d->grid->salvage_id, "%s", d->lineage[0] ? d->lineage : d->self_id);
}

/* The kept cache matching c (same name and config), or NULL. */
static salvage_cache *of(lattice_ops *d, const lattice_meta_cache *c)
{
    for (size_t i = 0; i < d->grid->n_salvage; i++)
        if (d->grid->salvage[i].store && lattice_cache_config_equal(&d->grid->salvage[i].cfg, &c->cfg)) return &d->grid->salvage[i];
    return NULL;
}

/* Whether the kept copy of p is one a record asks for. */
static bool wanted(const lattice_ops *d, const lattice_meta_cache *c, const salvage_cache *s, uint32_t p)
{
    const lattice_meta_lost *l = lattice_meta_lost_of(c, p);
    return s->held[p] && l && lattice_meta_lost_names(l, d->grid->salvage_id);
}

/* Whether the kept copy of p may serve as a delta base: it has a mark and
 * this node is to load p (one of its moving owners). */
static bool delta_wanted(const lattice_meta_cache *c, const salvage_cache *s, uint32_t p)
{
    if (!s->has_mark || !s->has_mark[p] || !c->cfg.history) return false;
    lattice_meta_member *own[LATTICE_CACHE_MAX_BACKUPS + 1];
    size_t nm = lattice_meta_moving_owners(c, p, own, LATTICE_CACHE_MAX_BACKUPS + 1);
    for (size_t k = 0; k < nm; k++)
        if (own[k]->self) return true;
    return false;
}

lattice_store *salvage_delta_base(lattice_ops *d, const lattice_meta_cache *c, uint32_t p, uint64_t *mark)
{
    salvage_cache *s = of(d, c);
    if (!s || p >= s->cfg.partitions || !s->held[p] || !s->has_mark || !s->has_mark[p]) return NULL;
    if (lattice_store_history_above(s->store, p, s->mark[p], true, NULL, NULL) != LATTICE_OK) return NULL;
    *mark = s->mark[p];
    return s->store;
}

void salvage_done(lattice_ops *d, const lattice_meta_cache *c, uint32_t p, bool quorum)
{
    salvage_cache *s = of(d, c);
    if (!quorum || !s || p >= s->cfg.partitions || !s->held[p] || wanted(d, c, s, p)) return;
    s->held[p] = 0;
    if (s->has_mark) s->has_mark[p] = 0;
    lattice_store_clear(s->store, p);
}

/* Whether c's metadata knows this node yet: it serves or loads one of its
 * partitions.  The first metadata a rejoined or restarted node applies may
 * be one made before the coordinator saw it join; its kept copies wait for
 * the one that plans it in (at most SALVAGE_WAIT_MS). */
#define SALVAGE_WAIT_MS 60000
static bool planned_in(const lattice_meta_cache *c)
{
    lattice_meta_member *own[2 * (LATTICE_CACHE_MAX_BACKUPS + 1)];
    for (uint32_t p = 0; p < c->cfg.partitions; p++) {
        size_t n = lattice_meta_serving_owners(c, p, own, LATTICE_CACHE_MAX_BACKUPS + 1);
        n += lattice_meta_moving_owners(c, p, own + n, LATTICE_CACHE_MAX_BACKUPS + 1);
        for (size_t k = 0; k < n; k++)
            if (own[k]->self) return true;
    }
    return false;
}

void salvage_prune(lattice_ops *d, bool quorum)
{
    if (!quorum || !d->grid->n_salvage || !lattice_meta_valid(d->meta)) return;
    size_t kept_caches = 0;
    for (size_t i = 0; i < d->grid->n_salvage; i++) {
        salvage_cache *s = &d->grid->salvage[i];
        if (!s->store) continue;
        lattice_meta_cache *c = lattice_meta_cache_of(d->meta, s->cfg.name);
        if (c && lattice_cache_config_equal(&c->cfg, &s->cfg) && s->has_mark && !planned_in(c) &&
            lt_mono_ms() - s->kept_ms < SALVAGE_WAIT_MS) {
            kept_caches++;
            continue;
        }
        bool any = false;
        for (uint32_t p = 0; c && lattice_cache_config_equal(&c->cfg, &s->cfg) && p < s->cfg.partitions; p++) {
            if (!s->held[p]) continue;
            if (wanted(d, c, s, p) || delta_wanted(c, s, p)) {
                any = true;
                continue;
            }
            s->held[p] = 0;
            lattice_store_clear(s->store, p);
        }
        if (any) {
            kept_caches++;
            continue;
        }
        LT_LOG(LT_INFO, "data", "cache %s: the copies kept from incarnation %s are not needed; freed", s->cfg.name,
               d->grid->salvage_id);
        cache_drop(s);
        d->heap_freed = true;
    }
    if (!kept_caches) salvage_free(d);
}

size_t salvage_report(lattice_ops *d, const lattice_meta_cache *c, uint32_t *parts, uint64_t *counters,
                      uint64_t *entries, size_t max)
{
    salvage_cache *s = of(d, c);
    size_t n = 0;
    for (size_t i = 0; s && i < c->n_lost && n < max; i++) {
        uint32_t p = c->lost[i].partition;
        /* Whether or not this node is one of p's owners-to-be: the record
         * waits for every owner it names, and a holder that is no owner-to-be
         * restores too - it supplies the copy to the owners-to-be
         * (rebal_exec.c).  Reporting only as an owner-to-be left a partition
         * LOST for good once the live servers had changed so that its
         * former owner's new incarnation owned it no more (a server joined
         * meanwhile). */
        if (p >= s->cfg.partitions || !wanted(d, c, s, p)) continue;
        parts[n] = p;
        counters[n] = s->counter[p];
        entries[n] = lattice_store_count(s->store, p);
        n++;
    }
    return n;
}

/* ------------------------------------------------------------- restore */

typedef struct copy_buf {
    lattice_store_entry *e;
    size_t n, cap;
    bool failed;
} copy_buf;

static int collect(void *arg, const lattice_store_item *it)
{
    copy_buf *b = arg;
    if (b->n == b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 256;
        lattice_store_entry *x = lt_realloc(b->e, cap * sizeof *x);
        if (!x) {
            b->failed = true;
            return 1;
        }
        b->e = x;
        b->cap = cap;
    }
    void *k = lt_malloc(it->key_len), *v = lt_malloc(it->value_len ? it->value_len : 1);
    if (!k || !v) {
        lt_free(k);
        lt_free(v);
        b->failed = true;
        return 1;
    }
    memcpy(k, it->key, it->key_len);
    memcpy(v, it->value, it->value_len);
    b->e[b->n++] = (lattice_store_entry){it->partition, k, it->key_len, v, it->value_len, it->expire_ms, it->version, it->type};
    return 0;
}

static void buf_clear(copy_buf *b)
{
    for (size_t i = 0; i < b->n; i++) {
        lt_free((void *)b->e[i].key);
        lt_free((void *)b->e[i].value);
    }
    b->n = 0;
}

bool salvage_restore(lattice_ops *d, lattice_meta_cache *c, uint32_t p, bool quorum, uint64_t *entries)
{
    salvage_cache *s = of(d, c);
    if (!quorum || !s || !c->store || p >= s->cfg.partitions || !wanted(d, c, s, p)) return false;
    /* Copied in slices: entries are read out of the kept store (whose
     * pointers live only in the walk's callback) and written into the new
     * one outside it.  The kept copy is left whole until the end, so a
     * failure (a full region) leaves nothing half-moved: the new store's
     * partition is cleared and the record stays for another try. */
    fast_mark(c, p);
    lattice_store_clear(c->store, p);
    lattice_store_cursor *cur = NULL;
    copy_buf b = {0};
    int st = lattice_store_cursor_open(s->store, p, &cur);
    uint64_t moved = 0;
    for (int done = 0; st == LATTICE_OK && !done;) {
        st = lattice_store_cursor_next(cur, 256, 1u << 20, collect, &b, &done);
        if (b.failed) st = LATTICE_ERR_NOMEM;
        for (size_t i = 0; st == LATTICE_OK && i < b.n; i++) st = lattice_store_put(c->store, &b.e[i], 0);
        moved += b.n;
        buf_clear(&b);
    }
    if (cur) lattice_store_cursor_close(cur);
    lt_free(b.e);
    if (st != LATTICE_OK) {
        lattice_store_clear(c->store, p);
        LT_LOG(LT_WARN, "data", "cache %s: partition %u: cannot restore the copy of incarnation %s: %s", c->cfg.name,
               p, d->grid->salvage_id, lattice_strerror(st));
        return false;
    }
    c->counter[p] = s->counter[p];
    s->held[p] = 0;
    lattice_store_clear(s->store, p);
    *entries += moved;
    return true;
}
