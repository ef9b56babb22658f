/*
 * fast: reads that run to completion on the thread that read the request
 * (docs/CONSISTENCY.md, "Reads on the calling thread").
 *
 * The data thread publishes, per cache and partition, one word a reader on
 * any registered RCU thread can test: seq[p] EVEN means "this node may
 * answer a read of p from its own store right now" - it is p's serving
 * primary with no full_sync write of p in flight, or a serving copy with
 * read_from_backup whose copy is clean (clean.c), and the cache is neither
 * frozen by a base switch nor waiting on a sync rebalance.  ODD means "ask
 * the data thread".  The rules that keep it honest:
 *
 *   fast_mark     before ANY change of p's rows (a write, a replicated
 *                 write, a remove, a clear, an eviction, a restore) and
 *                 whenever p may have become readable (a watermark moved):
 *                 seq[p] goes odd (if even) and p is queued for a re-check.
 *                 The odd store is followed by a release fence, so a
 *                 reader that sees any row written after it also sees the
 *                 odd word afterwards (the Linux seqlock's write_begin).
 *   fast_settle   just before every flush of the data channel (so before
 *                 any acknowledgement, prepare answer or reply of that loop
 *                 iteration leaves): re-checks each queued partition and
 *                 turns it even (a release store) when readable - with
 *                 --data-dir only once every record the log was handed is
 *                 durable (wal_durable), so an inline read never returns
 *                 what a crash could take back.  When the
 *                 view moved - topology, incarnation, metadata version, a
 *                 freeze - every partition of every cache is bumped odd and
 *                 re-checked, so no reader straddles two views.
 *   fast_read_n   (any thread), a batch of up to FAST_BATCH reads: per
 *                 read, s1 = seq[p] (acquire); odd: fall back.  Read the
 *                 store (lock-free RCU).  Acquire fence, s2 = seq[p];
 *                 s1 != s2: fall back (something changed p).  Then the
 *                 serving gate, once for the batch, checked after its last
 *                 read: the lease of the incarnation the roles were computed
 *                 under still holds now and the node is not fenced - or
 *                 none of the batch is answered here.  Before the reads,
 *                 every read's index line and then its row are prefetched,
 *                 so a pipeline's misses overlap.
 *
 * Lifetime: the caches' fast_cache objects are listed in an RCU-published
 * view; a cache that goes away leaves the view and waits a grace period
 * before it (and then its store, meta.c) is freed.
 */
#include <stdatomic.h>
#include <string.h>
#include <urcu.h>

#include "lattice/alloc.h"
#include "ops_int.h"
#include "txn/txn.h"

struct fast_cache {
    char name[LATTICE_CACHE_NAME_MAX + 1];
    lattice_store *store;  /* the cache's for life: taken away (salvage.c) only as the cache goes */
    uint32_t partitions;
    size_t max_key;
    /* any thread: reads answered here (added to the cache's stats) */
    atomic_uint_fast64_t reads, hits, misses;
    /* data thread: partitions to re-check at the next settle */
    uint64_t *dirty;
    bool any_dirty;
    _Atomic uint64_t seq[]; /* per partition: even = readable here now */
};

struct fast_view {
    struct rcu_head rh;
    size_t n;
    fast_cache *c[];
};

static fast_cache *fast_new(const lattice_meta_cache *c)
{
    uint32_t n = c->cfg.partitions;
    fast_cache *f = lt_calloc(1, sizeof *f + n * sizeof f->seq[0]);
    if (!f) return NULL;
    f->dirty = lt_calloc((n + 63) / 64, sizeof *f->dirty);
    if (!f->dirty) {
        lt_free(f);
        return NULL;
    }
    memcpy(f->name, c->cfg.name, sizeof f->name);
    f->name[sizeof f->name - 1] = 0;
    f->store = c->store;
    f->partitions = n;
    f->max_key = c->cfg.max_key_bytes;
    for (uint32_t p = 0; p < n; p++) atomic_init(&f->seq[p], 1); /* odd until checked */
    for (uint32_t p = 0; p < n; p++) f->dirty[p / 64] |= 1ull << (p % 64); /* all, at the next settle */
    f->any_dirty = true;
    return f;
}

static void fast_cache_free(fast_cache *f)
{
    if (!f) return;
    lt_free(f->dirty);
    lt_free(f);
}

void fast_mark(lattice_meta_cache *c, uint32_t partition)
{
    fast_cache *f = c ? c->fast : NULL;
    if (!f || partition >= f->partitions) return;
    uint64_t s = atomic_load_explicit(&f->seq[partition], memory_order_relaxed);
    if (!(s & 1)) {
        atomic_store_explicit(&f->seq[partition], s + 1, memory_order_relaxed);
        atomic_thread_fence(memory_order_release); /* before the rows change */
    }
    f->dirty[partition / 64] |= 1ull << (partition % 64);
    f->any_dirty = true;
}

bool fast_readable(lattice_ops *d, lattice_meta_cache *c, uint32_t p)
{
    if (!c->store || !lattice_meta_valid(d->meta) || lattice_meta_frozen(c) || c->restoring) return false;
    if (c->cfg.rebalance_mode == LATTICE_REBALANCE_SYNC && c->ideal) return false;
    /* A transaction prepared in p holds keys a read must wait for
     * (txlock.c): the data thread answers p's reads meanwhile.  Its rows'
     * arrival and removal are changes of p, so p is re-checked then.  Any
     * prepared row will do, asked of the store's list of internal keys:
     * reading the lock table off the rows at every change of a busy
     * partition was a fifth of a server's time under putAll transactions. */
    uint8_t pre[4];
    size_t pl = lt_txp_key_prefix(LT_TXP_PREPARED, pre);
    if (lattice_store_reserved_held(c->store, p, pre, pl)) return false;
    lattice_meta_member *owners[LATTICE_CACHE_MAX_BACKUPS + 1];
    size_t n = lattice_meta_serving_owners(c, p, owners, LATTICE_CACHE_MAX_BACKUPS + 1);
    if (n == 0) return false;
    bool full = c->cfg.sync == LATTICE_SYNC_FULL;
    if (owners[0]->self) return !full || clean_committed(c, p) == c->counter[p];
    if (!c->cfg.read_from_backup) return false;
    for (size_t i = 1; i < n; i++)
        if (owners[i]->self) return !full || clean_copy_is_clean(c, p);
    return false;
}

static void recheck(lattice_ops *d, lattice_meta_cache *c, fast_cache *f, uint32_t p)
{
    uint64_t s = atomic_load_explicit(&f->seq[p], memory_order_relaxed);
    bool want = fast_readable(d, c, p);
    /* Release: the rows written before, and the state that made p
     * readable, are visible to a reader that sees the even word. */
    if (want && (s & 1)) atomic_store_explicit(&f->seq[p], s + 1, memory_order_release);
    else if (!want && !(s & 1)) atomic_store_explicit(&f->seq[p], s + 1, memory_order_release);
}

static void view_free_cb(struct rcu_head *h)
{
    lt_free(caa_container_of(h, fast_view, rh));
}

/* Publishes the view of every cache with a fast_cache; false on NOMEM
 * (the old view stays: the next settle tries again). */
static bool publish(lattice_ops *d)
{
    size_t n = lattice_meta_cache_count(d->meta);
    fast_view *v = lt_malloc(sizeof *v + n * sizeof v->c[0]);
    if (!v) return false;
    v->n = 0;
    for (size_t i = 0; i < n; i++) {
        lattice_meta_cache *c = lattice_meta_cache_at(d->meta, i);
        if (c->fast) v->c[v->n++] = c->fast;
    }
    fast_view *old = rcu_xchg_pointer(&d->fast_view, v);
    if (old) call_rcu(&old->rh, view_free_cb);
    return true;
}

/* What, when it changes, may change any partition's readability. */
static uint64_t view_stamp(lattice_ops *d)
{
    uint64_t h = 1469598103934665603ull;
#define MIX(x) (h = (h ^ (uint64_t)(x)) * 1099511628211ull)
    MIX(d->major);
    MIX(d->minor);
    MIX(d->incarnation);
    MIX(lattice_meta_version(d->meta));
    MIX(lattice_meta_valid(d->meta));
    size_t n = lattice_meta_cache_count(d->meta);
    MIX(n);
    for (size_t i = 0; i < n; i++) {
        lattice_meta_cache *c = lattice_meta_cache_at(d->meta, i);
        MIX(c->serial);
        MIX(c->frozen_at);
        MIX(c->ideal != NULL);
        MIX(c->store != NULL);
    }
#undef MIX
    return h;
}

void fast_settle(lattice_ops *d)
{
    if (d->client || !d->meta) return;
    uint64_t stamp = view_stamp(d);
    bool all = stamp != d->fast_stamp;
    if (all) {
        d->fast_stamp = stamp;
        atomic_store_explicit(&d->fast_inc, d->incarnation, memory_order_release);
    }
    /* With --data-dir a changed row may not be on disk yet: no partition
     * turns readable until every record appended so far is durable (a value
     * an inline read returned must survive a crash, as wal_hold makes sure
     * for the data thread's replies). */
    bool durable = wal_durable(d);
    size_t n = lattice_meta_cache_count(d->meta);
    bool added = false;
    for (size_t i = 0; i < n; i++) {
        lattice_meta_cache *c = lattice_meta_cache_at(d->meta, i);
        if (c->store && !c->fast && (c->fast = fast_new(c))) {
            c->before_change = fast_mark; /* types/ marks before the rows it changes */
            added = true;
        }
    }
    if (added || d->fast_republish) d->fast_republish = !publish(d);
    for (size_t i = 0; i < n; i++) {
        lattice_meta_cache *c = lattice_meta_cache_at(d->meta, i);
        fast_cache *f = c->fast;
        if (!f) continue;
        if (all) {
            for (uint32_t p = 0; p < f->partitions; p++) {
                fast_mark(c, p);
                if (durable) recheck(d, c, f, p);
            }
        } else if (f->any_dirty && durable) {
            for (uint32_t w = 0; w < (f->partitions + 63) / 64; w++)
                for (uint64_t bits = f->dirty[w]; bits; bits &= bits - 1)
                    recheck(d, c, f, w * 64 + (uint32_t)__builtin_ctzll(bits));
        }
        if (!durable) continue; /* marked partitions stay odd and queued until the log catches up */
        memset(f->dirty, 0, (f->partitions + 63) / 64 * sizeof *f->dirty);
        f->any_dirty = false;
    }
}

void fast_cache_gone(lattice_ops *d, lattice_meta_cache *c)
{
    fast_cache *f = c->fast;
    if (!f) return;
    for (uint32_t p = 0; p < f->partitions; p++) fast_mark(c, p);
    /* No allocation here (a cache may go while memory is short): readers
     * find no view for a moment and ask the data thread; the next settle
     * publishes the others again. */
    fast_view *old = rcu_xchg_pointer(&d->fast_view, NULL);
    synchronize_rcu(); /* no reader holds the view, f or its store after this */
    lt_free(old);
    c->fast = NULL;
    c->before_change = NULL;
    fast_cache_free(f);
    d->fast_republish = true;
}

void fast_free(lattice_ops *d)
{
    fast_view *old = rcu_xchg_pointer(&d->fast_view, NULL);
    synchronize_rcu();
    lt_free(old);
    rcu_barrier(); /* views retired by call_rcu are freed before we return */
    for (size_t i = 0; d->meta && i < lattice_meta_cache_count(d->meta); i++) {
        lattice_meta_cache *c = lattice_meta_cache_at(d->meta, i);
        fast_cache_free(c->fast);
        c->fast = NULL;
        c->before_change = NULL;
    }
}

/* ------------------------------------------------------ the reader's side */

static fast_cache *find(const fast_view *v, const char *name)
{
    for (size_t i = 0; v && i < v->n; i++)
        if (strcmp(v->c[i]->name, name) == 0) return v->c[i];
    return NULL;
}

/* One read of f's store (buf first, then an allocation for a larger value);
 * the value goes to *val (buf or *heap). */
static int read_store(fast_cache *f, uint32_t p, const lattice_op *op, void *buf, size_t cap, void **heap,
                      const void **val, lattice_store_meta *meta)
{
    int st = lattice_store_get(f->store, p, op->key, op->key_len, buf, op->kind == LATTICE_OP_GET ? cap : 0, meta);
    *val = buf;
    if (st == LATTICE_ERR_TOO_LARGE && op->kind != LATTICE_OP_GET) return LATTICE_OK; /* only the meta was wanted */
    if (st != LATTICE_ERR_TOO_LARGE) return st;
    st = lattice_store_get_copy(f->store, p, op->key, op->key_len, heap, meta);
    *val = *heap;
    return st;
}

/* A read of the batch that may be answered here: its cache and partition. */
typedef struct fast_try {
    fast_cache *f;
    uint32_t p, tag;
} fast_try;

static fast_cache *find_cached(const fast_view *v, const char *name, const char **last, fast_cache **lastf)
{
    if (*last && (*last == name || strcmp(*last, name) == 0)) return *lastf;
    *last = name;
    return *lastf = find(v, name);
}

static void answer(const lattice_op *op, int st, const void *val, const lattice_store_meta *meta,
                   lattice_op_result *r)
{
    memset(r, 0, sizeof *r);
    /* As the primary's read (types/exec.c); only OK and NOT_FOUND get here. */
    exec_read_answer(op->kind, st, val, meta, r);
}

size_t fast_read_n(lattice_ops *d, const lattice_op *ops, size_t n, fast_slot *out)
{
    fast_try t[FAST_BATCH];
    size_t answered = 0;
    if (n > FAST_BATCH) n = FAST_BATCH;
    for (size_t i = 0; i < n; i++) out[i].done = false, out[i].heap = NULL;
    if (atomic_load_explicit(&d->fenced, memory_order_acquire)) return 0;
    rcu_read_lock();
    const fast_view *v = rcu_dereference(d->fast_view);
    const char *last = NULL;
    fast_cache *lastf = NULL;
    /* 1: which reads may be tried here, and a prefetch of each one's index
     * line; 2: (those lines on their way) a prefetch of each one's row - so
     * the batch's misses overlap instead of one get's waiting for the last. */
    for (size_t i = 0; i < n; i++) {
        const lattice_op *op = &ops[i];
        t[i].f = NULL;
        if (!ops_is_read(op->kind) || op->kind == LATTICE_OP_COLL_READ || op->flags || !op->key || !op->key_len)
            continue; /* a collection's read runs its command at the primary (types/coll.c) */
        if (*(const uint8_t *)op->key == LATTICE_STORE_RESERVED_BYTE) continue; /* the grid's own: refused there */
        fast_cache *f = find_cached(v, op->cache && *op->cache ? op->cache : "default", &last, &lastf);
        if (!f || op->key_len > f->max_key) continue;
        t[i].f = f;
        t[i].p = lattice_partition_of_key(op->key, op->key_len, f->partitions);
        t[i].tag = n > 1 ? lattice_store_prefetch(f->store, t[i].p, op->key, op->key_len) : 0;
    }
    if (n > 1)
        for (size_t i = 0; i < n; i++)
            if (t[i].f) lattice_store_prefetch_row(t[i].f->store, t[i].p, t[i].tag);
    /* 3: each read between two loads of its partition's word. */
    for (size_t i = 0; i < n; i++) {
        fast_cache *f = t[i].f;
        if (!f) continue;
        const lattice_op *op = &ops[i];
        uint64_t s1 = atomic_load_explicit(&f->seq[t[i].p], memory_order_acquire);
        if (s1 & 1) continue;
        lattice_store_meta meta = {0};
        const void *val = NULL;
        int st = read_store(f, t[i].p, op, out[i].buf, sizeof out[i].buf, &out[i].heap, &val, &meta);
        atomic_thread_fence(memory_order_acquire); /* the rows read before the word below */
        uint64_t s2 = atomic_load_explicit(&f->seq[t[i].p], memory_order_relaxed);
        if (s1 != s2 || (st != LATTICE_OK && st != LATTICE_ERR_NOT_FOUND)) {
            lt_free(out[i].heap);
            out[i].heap = NULL;
            continue;
        }
        answer(op, st, val, &meta, &out[i].r);
        out[i].done = true;
        answered++;
    }
    /* 4: the gate, once, after every read of the batch: they all happened
     * while the lease of the incarnation the words were computed under
     * held, and the node was not fenced. */
    if (answered) {
        bool gate = !d->disc || lattice_discovery_serving(d->disc, atomic_load_explicit(&d->fast_inc, memory_order_acquire));
        gate = gate && !atomic_load_explicit(&d->fenced, memory_order_acquire);
        /* The cache's counters (shared by every IO thread): one add per
         * run of reads of one cache, not two a read. */
        fast_cache *run = NULL;
        uint64_t hits = 0, misses = 0;
        for (size_t i = 0; i <= n; i++) {
            if (i < n && !out[i].done) continue;
            if (i < n && !gate) {
                out[i].done = false;
                lt_free(out[i].heap);
                out[i].heap = NULL;
                continue;
            }
            if (run && (i == n || t[i].f != run)) {
                atomic_fetch_add_explicit(&run->reads, hits + misses, memory_order_relaxed);
                if (hits) atomic_fetch_add_explicit(&run->hits, hits, memory_order_relaxed);
                if (misses) atomic_fetch_add_explicit(&run->misses, misses, memory_order_relaxed);
                hits = misses = 0;
            }
            if (i == n) break;
            run = t[i].f;
            bool hit = ops[i].kind == LATTICE_OP_CONTAINS ? out[i].r.num != 0 : out[i].r.status == LATTICE_OK;
            *(hit ? &hits : &misses) += 1;
        }
        if (!gate) answered = 0;
    }
    rcu_read_unlock();
    if (answered) atomic_fetch_add_explicit(&d->reads_inline, answered, memory_order_relaxed);
    return answered;
}

bool fast_read(lattice_ops *d, const lattice_op *op, fast_slot *out)
{
    return fast_read_n(d, op, 1, out) == 1;
}

void fast_stats(const lattice_meta_cache *c, uint64_t *reads, uint64_t *hits, uint64_t *misses)
{
    fast_cache *f = c->fast;
    *reads = *hits = *misses = 0;
    if (!f) return;
    *reads = atomic_load_explicit(&f->reads, memory_order_relaxed);
    *hits = atomic_load_explicit(&f->hits, memory_order_relaxed);
    *misses = atomic_load_explicit(&f->misses, memory_order_relaxed);
}
