/*
 * evict: eviction across copies (data thread; --region-policy evict).
 *
 * A full region makes room by evicting entries (storage: random-2-LRU over
 * pages).  Copies of a partition stay equal by one rule: only the
 * partition's serving primary evicts its entries, and every eviction
 * reaches the other copies as a remove.  The store's hook (storage.h)
 * carries the rule: may_evict allows a partition only while this node
 * serves it as primary (holding its lease, not fenced, the cache not
 * frozen), so a backup never drops what its primary keeps; a write that
 * could only make room in other partitions fails with REGION_FULL as under
 * the reject policy.  Any write on this node may trigger an eviction - a
 * client write it executes as primary, a backup write or a rebalance
 * supply it applies - and it evicts only entries of partitions it leads.
 *
 * The hook runs inside the store call that needs room, with store locks
 * held, so it only records the key; evict_flush, which the loop calls after
 * every request, response and operation it handles, turns each record into
 * a remove with the partition's next update counter, replicated and
 * tracked like any write (primary_replicate_removal): until every copy has
 * dropped the key, a read of it at the primary waits and the partition's
 * commit watermark stays below the removal, so no backup serves the evicted
 * value once the primary has answered without it.  Nothing else runs on
 * the data thread between the eviction and its flush.
 */
#include <string.h>

#include "lattice/alloc.h"
#include "lattice/log.h"
#include "ops_int.h"

/* The hook's argument: one per cache with a store. */
struct evict_ctx {
    lattice_ops *d;
    lattice_meta_cache *c;
    uint64_t evicted;            /* entries this node evicted as primary */
    const char *for_copy;        /* evict_for_copy: only partitions this node also holds a copy of */
};

/* An eviction not yet sent to the copies. */
struct evict_rec {
    lattice_meta_cache *c;
    uint32_t partition;
    size_t key_len;
    char key[];
};

/* Is node id a serving or MOVING owner of partition p of c? */
static bool holds_copy(lattice_meta_cache *c, uint32_t p, const char *id)
{
    lattice_meta_member *owners[2 * (LATTICE_CACHE_MAX_BACKUPS + 1)];
    size_t n = lattice_meta_serving_owners(c, p, owners, LATTICE_CACHE_MAX_BACKUPS + 1);
    n += lattice_meta_moving_owners(c, p, owners + n, LATTICE_CACHE_MAX_BACKUPS + 1);
    for (size_t i = 0; i < n; i++)
        if (strcmp(owners[i]->id, id) == 0) return true;
    return false;
}

static int may_evict(void *arg, uint32_t partition)
{
    struct evict_ctx *x = arg;
    lattice_meta_member *own[1];
    bool may = ops_serving(x->d, x->c) && lattice_meta_serving_owners(x->c, partition, own, 1) == 1 && own[0]->self;
    if (may && x->for_copy) may = holds_copy(x->c, partition, x->for_copy);
    if (may) fast_mark(x->c, partition); /* before its entries go (fast.c) */
    return may;
}

static void evicted(void *arg, uint32_t partition, const void *key, size_t key_len, uint64_t version)
{
    (void)version; /* the removal takes the next counter; this one is superseded */
    struct evict_ctx *x = arg;
    lattice_ops *d = x->d;
    struct evict_rec *r = lt_malloc(sizeof *r + key_len);
    if (r && d->n_evq == d->cap_evq) {
        size_t cap = d->cap_evq ? d->cap_evq * 2 : 64;
        struct evict_rec **q = lt_realloc(d->evq, cap * sizeof *q);
        if (q) d->evq = q, d->cap_evq = cap;
    }
    if (!r || d->n_evq == d->cap_evq) {
        /* The entry is gone here and its copies keep it: `lattice verify`
         * shows the difference.  Only when memory for the record ran out. */
        lt_free(r);
        LT_LOG(LT_ERROR, "data", "cache %s: out of memory recording an eviction: its copies keep the entry",
               x->c->cfg.name);
        return;
    }
    r->c = x->c;
    r->partition = partition;
    r->key_len = key_len;
    memcpy(r->key, key, key_len);
    d->evq[d->n_evq++] = r;
    x->evicted++;
}

static struct evict_ctx *ctx_of(lattice_ops *d, const lattice_meta_cache *c)
{
    for (size_t i = 0; i < d->n_evc; i++)
        if (d->evc[i]->c == c) return d->evc[i];
    return NULL;
}

void evict_attach(lattice_ops *d)
{
    if (!d->region_evict) return;
    if (wal_has_recovered(d)) return; /* the recovered stores may yet replace these (wal_attach) */
    for (size_t i = 0; i < lattice_meta_cache_count(d->meta); i++) {
        lattice_meta_cache *c = lattice_meta_cache_at(d->meta, i);
        if (!c->store || ctx_of(d, c) || d->n_evc == LATTICE_META_MAX_CACHES) continue;
        struct evict_ctx *x = lt_calloc(1, sizeof *x);
        if (!x) {
            /* Without the hook this store's entries are never evicted: its
             * writes fail with REGION_FULL when the region is full. */
            LT_LOG(LT_ERROR, "data", "cache %s: out of memory: its entries will not be evicted", c->cfg.name);
            continue;
        }
        *x = (struct evict_ctx){d, c, 0, NULL};
        lattice_store_evict_hook h = {may_evict, evicted, x};
        lattice_store_set_evict_hook(c->store, &h);
        d->evc[d->n_evc++] = x;
    }
}

void evict_flush(lattice_ops *d)
{
    /* A removal's replication cannot evict (a remove needs no room), so the
     * queue does not grow while it drains. */
    for (size_t i = 0; i < d->n_evq; i++) {
        struct evict_rec *r = d->evq[i];
        if (r->c) primary_replicate_removal(d, r->c, r->partition, r->key, r->key_len);
        lt_free(r);
    }
    d->n_evq = 0;
}

size_t evict_for_copy(lattice_ops *d, lattice_meta_cache *c, const char *copy_id, size_t want, uint32_t partition,
                      const void *key, size_t key_len)
{
    if (!d->region_evict || !c->store || !ctx_of(d, c)) return 0;
    /* Every store on the region may be asked (one region per node): each
     * cache's hook allows only what copy_id also holds. */
    for (size_t i = 0; i < d->n_evc; i++) d->evc[i]->for_copy = copy_id;
    size_t n = lattice_store_evict(c->store, want, partition, key, key_len);
    for (size_t i = 0; i < d->n_evc; i++) d->evc[i]->for_copy = NULL;
    return n;
}

uint64_t evict_count(lattice_ops *d, const lattice_meta_cache *c)
{
    struct evict_ctx *x = ctx_of(d, c);
    return x ? x->evicted : 0;
}

void evict_cache_gone(lattice_ops *d, lattice_meta_cache *c)
{
    for (size_t i = 0; i < d->n_evq; i++)
        if (d->evq[i]->c == c) d->evq[i]->c = NULL;
    for (size_t i = 0; i < d->n_evc; i++) {
        if (d->evc[i]->c != c) continue;
        if (c->store) lattice_store_set_evict_hook(c->store, NULL);
        lt_free(d->evc[i]);
        d->evc[i] = d->evc[--d->n_evc];
        return;
    }
}

void evict_free(lattice_ops *d)
{
    for (size_t i = 0; i < d->n_evq; i++) lt_free(d->evq[i]);
    lt_free(d->evq);
    for (size_t i = 0; i < d->n_evc; i++) lt_free(d->evc[i]);
    d->evq = NULL;
    d->n_evq = d->cap_evq = d->n_evc = 0;
}
