/*
 * Store: per-partition indexes (cds_lfht, key -> link) over a shared region.
 *
 * Index node = cds_lfht node (16 bytes) + link (8): 24 bytes, taken from
 * per-partition slabs.  The key lives only in the row; the lfht compares
 * hashes first and calls match_node only on equal hashes, which reads the key
 * out of the page.  A node is published (cds_lfht_add) after its row is
 * written and its link set, and recycled only after a grace period: deleted
 * nodes collect in a limbo batch handed to call_rcu, whose callback puts them
 * back on the partition's free list (under the partition lock).
 *
 * Locks: part.lock serialises writers of one partition and guards every
 * non-atomic field of struct part; the region lock is taken inside it (never
 * the other way round, except eviction, which only try-locks partitions).
 * Readers take rcu_read_lock only.
 *
 * Cursors are marker nodes (link == MARKER_LINK) inside the partition's lfht.
 * The lfht keeps nodes in split order (by bit-reversed hash) whatever it
 * resizes, and an added node goes after every node of equal hash, so a
 * marker added at the hash of the last entry returned sits right after it:
 * the next batch resumes there and sees every entry still present exactly
 * once.  A batch always ends at the end of a run of equal hashes.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <urcu.h>
#include <urcu/rculfhash.h>
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "lattice/alloc.h"
#include "lattice/clock.h"
#include "lattice/log.h"
#include "region_int.h"

#define MARKER_LINK UINT64_MAX
#define LIMBO_N 126
#define SLAB_MIN 16
#define SLAB_MAX 64
#define CHUNK_NODES 256
#define BATCH_PEND 64

struct inode {
    struct cds_lfht_node lfn;
    union {
        uint64_t link;           /* atomic: release store, acquire load */
        struct inode *next_free; /* only once off the table and past a grace period */
    };
};

struct cmarker {
    struct inode n;
    struct rcu_head rcu;
};

struct slab {
    struct slab *next;
    size_t bytes;
    struct inode nodes[];
};

struct part;
struct limbo {
    struct rcu_head rcu;
    struct part *p;
    uint32_t n;
    struct inode *v[LIMBO_N];
};

struct part {
    pthread_mutex_t lock;
    struct lattice_store *s;
    struct cds_lfht *ht;  /* created under lock, published with rcu_assign_pointer */
    uint64_t count;       /* atomic; changed under lock */
    uint64_t expiring;    /* atomic; entries with an expire time */
    uint64_t buckets;     /* atomic read; the table's size, changed under lock */
    uint64_t min_expire;  /* atomic read; no entry expires before this (lock) */
    struct inode *free;   /* lock */
    struct slab *slabs;   /* lock */
    size_t slab_next;     /* lock */
    struct limbo *limbo;  /* lock */
    uint32_t idx;
};

struct lattice_store {
    lattice_region *region;
    uint8_t owner;
    uint32_t nparts;
    struct part *parts;
    /* Readers' copy of each partition's table pointer, packed so the lookup
     * path touches 8 bytes instead of a whole struct part (one cache miss
     * fewer per get).  Published with rcu_assign_pointer under the lock. */
    struct cds_lfht **hts;
    uint64_t (*clock_ms)(void *);
    void *clock_arg;
    uint64_t expirations, evictions, index_bytes; /* atomics */
    pthread_mutex_t sweep_lock; /* serialises expire(); guards sweep_part */
    uint32_t sweep_part;
    pthread_mutex_t sw_lock; /* sweeper thread state below */
    pthread_cond_t sw_cond;
    pthread_t sw_thread;
    int sw_running, sw_stop;
    unsigned sw_interval;
    char name[32];
};

struct lattice_store_cursor {
    lattice_store *s;
    uint32_t part;
    struct cmarker *marker; /* NULL before the first batch */
    int done;
    uint8_t *buf;
    size_t cap;
};

static uint64_t realtime_ms(void *arg)
{
    (void)arg;
    return lt_wall_ms();
}

static unsigned long key_hash(const void *key, size_t len)
{
    return (unsigned long)XXH3_64bits(key, len);
}

static uint64_t bitrev64(uint64_t x)
{
    x = ((x >> 1) & 0x5555555555555555ull) | ((x & 0x5555555555555555ull) << 1);
    x = ((x >> 2) & 0x3333333333333333ull) | ((x & 0x3333333333333333ull) << 2);
    x = ((x >> 4) & 0x0f0f0f0f0f0f0f0full) | ((x & 0x0f0f0f0f0f0f0f0full) << 4);
    return __builtin_bswap64(x);
}

static int expired(const lattice_store *s, uint64_t expire, uint64_t *now)
{
    if (!expire) return 0;
    if (!*now) *now = s->clock_ms(s->clock_arg);
    return expire <= *now;
}

/* ------------------------------------------------------------ node memory */

static struct inode *node_alloc(lattice_store *s, struct part *p)
{
    if (!p->free) {
        size_t n = p->slab_next ? p->slab_next : SLAB_MIN;
        size_t bytes = sizeof(struct slab) + n * sizeof(struct inode);
        struct slab *sl = lt_malloc(bytes);
        if (!sl) return NULL;
        sl->bytes = bytes;
        sl->next = p->slabs;
        p->slabs = sl;
        for (size_t i = n; i-- > 0;) {
            sl->nodes[i].next_free = p->free;
            p->free = &sl->nodes[i];
        }
        p->slab_next = n * 2 > SLAB_MAX ? SLAB_MAX : n * 2;
        __atomic_add_fetch(&s->index_bytes, bytes, __ATOMIC_RELAXED);
    }
    struct inode *in = p->free;
    p->free = in->next_free;
    return in;
}

/* A node that was never published goes straight back. */
static void node_unused(struct part *p, struct inode *in)
{
    in->next_free = p->free;
    p->free = in;
}

static void limbo_done(struct rcu_head *head)
{
    struct limbo *l = caa_container_of(head, struct limbo, rcu);
    struct part *p = l->p;
    pthread_mutex_lock(&p->lock);
    for (uint32_t i = 0; i < l->n; i++) node_unused(p, l->v[i]);
    pthread_mutex_unlock(&p->lock);
    lt_free(l);
}

/* A node removed from the table: reusable after a grace period.  Called with
 * the partition lock, outside rcu_read_lock. */
static void node_retire(struct part *p, struct inode *in)
{
    if (!p->limbo) {
        p->limbo = lt_malloc(sizeof *p->limbo);
        if (!p->limbo) {
            /* No memory for a batch: wait the grace period here instead. */
            synchronize_rcu();
            node_unused(p, in);
            return;
        }
        p->limbo->p = p;
        p->limbo->n = 0;
    }
    p->limbo->v[p->limbo->n++] = in;
    if (p->limbo->n == LIMBO_N) {
        call_rcu(&p->limbo->rcu, limbo_done);
        p->limbo = NULL;
    }
}

/* ---------------------------------------------------------------- lookup */

struct match_ctx {
    lattice_store *s;
    struct read_req q;
};

static int match_node(struct cds_lfht_node *n, const void *arg)
{
    struct inode *in = caa_container_of(n, struct inode, lfn);
    struct match_ctx *m = (struct match_ctx *)arg;
    uint64_t link = __atomic_load_n(&in->link, __ATOMIC_ACQUIRE);
    for (;;) {
        if (link == MARKER_LINK) return 0;
        int st = region_read_entry(m->s->region, link, &m->q);
        if (st == LATTICE_OK && m->q.match) return 1;
        /* Not our row any more: the entry moved (reload) or is going away. */
        uint64_t again = __atomic_load_n(&in->link, __ATOMIC_ACQUIRE);
        if (again == link) return 0;
        link = again;
    }
}

/* Finds key in partition p; q gets the entry's metadata (and the value when
 * q->vbuf is set).  Needs rcu_read_lock. */
static struct inode *lookup(lattice_store *s, uint32_t part, const void *key, size_t klen,
                            unsigned long hash, struct match_ctx *m)
{
    struct cds_lfht *ht = rcu_dereference(s->hts[part]);
    if (!ht) return NULL;
    m->s = s;
    m->q.want_key = key;
    m->q.want_klen = klen;
    m->q.want_owner = s->owner;
    m->q.want_partition = part;
    struct cds_lfht_iter it;
    cds_lfht_lookup(ht, hash, match_node, m, &it);
    struct cds_lfht_node *n = cds_lfht_iter_get_node(&it);
    return n ? caa_container_of(n, struct inode, lfn) : NULL;
}

/* The tables are resized by the writers themselves (cds_lfht_resize, which
 * runs in the caller's thread), not by CDS_LFHT_AUTO_RESIZE: the lazy resize
 * runs on liburcu's one global workqueue thread, and here a table filled from
 * a thread that later exited stopped growing (every add then walked chains of
 * thousands of nodes); ACCOUNTING makes it worse (PITFALLS).  Growing at
 * load factor 2 to twice the size keeps 1-2 entries per bucket: 8-16 bytes of
 * bucket per entry. */
#define MIN_BUCKETS 16
#define MAX_LOAD 2

static int ensure_table(lattice_store *s, struct part *p)
{
    if (p->ht) return LATTICE_OK;
    struct cds_lfht *ht = cds_lfht_new(MIN_BUCKETS, MIN_BUCKETS, 0, 0, NULL);
    if (!ht) return LATTICE_ERR_NOMEM;
    __atomic_store_n(&p->buckets, MIN_BUCKETS, __ATOMIC_RELAXED);
    __atomic_add_fetch(&p->s->index_bytes, MIN_BUCKETS * sizeof(struct cds_lfht_node),
                       __ATOMIC_RELAXED);
    rcu_assign_pointer(p->ht, ht);
    rcu_assign_pointer(s->hts[p->idx], ht);
    return LATTICE_OK;
}

/* Partition lock held, outside rcu_read_lock. */
static void maybe_grow(lattice_store *s, struct part *p)
{
    uint64_t n = p->count, size = p->buckets;
    if (n <= MAX_LOAD * size) return;
    while (n > MAX_LOAD * size) size *= 2;
    cds_lfht_resize(p->ht, size);
    __atomic_add_fetch(&s->index_bytes, (size - p->buckets) * sizeof(struct cds_lfht_node),
                       __ATOMIC_RELAXED);
    __atomic_store_n(&p->buckets, size, __ATOMIC_RELAXED);
}

/* ---------------------------------------------------------------- eviction */

static int store_evict(void *ctx, uint32_t part, const void *key, size_t klen, uint64_t link,
                       const struct evict_guard *g)
{
    lattice_store *s = ctx;
    if (part >= s->nparts) return 0;
    struct part *p = &s->parts[part];
    int held = g && g->store == s && g->partition == part;
    if (!held && pthread_mutex_trylock(&p->lock) != 0) return 0;
    int done = 0;
    struct match_ctx m = {0};
    rcu_read_lock();
    struct inode *in = lookup(s, part, key, klen, key_hash(key, klen), &m);
    if (in && (!g || in != g->skip_node) &&
        LATTICE_LINK_SAME(__atomic_load_n(&in->link, __ATOMIC_ACQUIRE), link) &&
        cds_lfht_del(p->ht, &in->lfn) == 0)
        done = 1;
    rcu_read_unlock();
    if (done) {
        region_free_locked(s->region, link);
        node_retire(p, in);
        __atomic_sub_fetch(&p->count, 1, __ATOMIC_RELAXED);
        if (m.q.expire) __atomic_sub_fetch(&p->expiring, 1, __ATOMIC_RELAXED);
        __atomic_add_fetch(&s->evictions, 1, __ATOMIC_RELAXED);
    }
    if (!held) pthread_mutex_unlock(&p->lock);
    return done;
}

/* ---------------------------------------------------------------- writes */

static int entry_ok(const lattice_store *s, const lattice_store_entry *e)
{
    if (!e || !e->key || e->key_len == 0 || e->key_len > LATTICE_STORE_MAX_KEY ||
        (!e->value && e->value_len) || e->partition >= s->nparts)
        return LATTICE_ERR_INVAL;
    return e->value_len > LATTICE_STORE_MAX_VALUE ? LATTICE_ERR_TOO_LARGE : LATTICE_OK;
}

struct found {
    struct inode *node;
    struct match_ctx m;
    int live;
};

static void find_locked(lattice_store *s, struct part *p, const lattice_store_entry *e,
                        unsigned long hash, uint64_t *now, struct found *f)
{
    memset(&f->m, 0, sizeof f->m);
    rcu_read_lock();
    f->node = lookup(s, p->idx, e->key, e->key_len, hash, &f->m);
    rcu_read_unlock();
    f->live = f->node && !expired(s, f->m.q.expire, now);
}

static int refused(const struct found *f, const lattice_store_entry *e, unsigned flags)
{
    if ((flags & LATTICE_STORE_IF_ABSENT) && f->live) return LATTICE_ERR_EXISTS;
    if ((flags & LATTICE_STORE_IF_PRESENT) && !f->live) return LATTICE_ERR_NOT_FOUND;
    if ((flags & LATTICE_STORE_IF_NEWER) && f->live && e->version <= f->m.q.version)
        return LATTICE_ERR_EXISTS;
    return LATTICE_OK;
}

/* Lets the sweep skip partitions where nothing can have expired yet. */
static void note_expiry(struct part *p, uint64_t expire_ms)
{
    if (expire_ms < p->min_expire) __atomic_store_n(&p->min_expire, expire_ms, __ATOMIC_RELAXED);
}

static int update_locked(lattice_store *s, struct part *p, struct found *f,
                         const lattice_store_entry *e)
{
    struct evict_guard g = {s, p->idx, f->node};
    region_lock(s->region);
    int st = region_update_locked(s->region, &f->node->link, e, s->owner, &g);
    region_unlock(s->region);
    if (st != LATTICE_OK) return st;
    if (!f->live) __atomic_add_fetch(&s->expirations, 1, __ATOMIC_RELAXED);
    int64_t d = (e->expire_ms != 0) - (f->m.q.expire != 0);
    if (d) __atomic_add_fetch(&p->expiring, (uint64_t)d, __ATOMIC_RELAXED);
    if (e->expire_ms) note_expiry(p, e->expire_ms);
    return LATTICE_OK;
}

static void publish(struct part *p, struct inode *in, uint64_t link, unsigned long hash,
                    const lattice_store_entry *e)
{
    __atomic_store_n(&in->link, link, __ATOMIC_RELEASE);
    rcu_read_lock();
    cds_lfht_add(p->ht, hash, &in->lfn);
    rcu_read_unlock();
    __atomic_add_fetch(&p->count, 1, __ATOMIC_RELAXED);
    if (e->expire_ms) {
        __atomic_add_fetch(&p->expiring, 1, __ATOMIC_RELAXED);
        note_expiry(p, e->expire_ms);
    }
    maybe_grow(p->s, p);
}

static int insert_locked(lattice_store *s, struct part *p, const lattice_store_entry *e,
                         unsigned long hash)
{
    struct inode *in = node_alloc(s, p);
    if (!in) return LATTICE_ERR_NOMEM;
    struct evict_guard g = {s, p->idx, NULL};
    uint64_t link;
    region_lock(s->region);
    int st = region_insert_locked(s->region, e, s->owner, &link, &g);
    region_unlock(s->region);
    if (st != LATTICE_OK) {
        node_unused(p, in);
        return st;
    }
    publish(p, in, link, hash, e);
    return LATTICE_OK;
}

int lattice_store_put(lattice_store *s, const lattice_store_entry *e, unsigned flags)
{
    int st = entry_ok(s, e);
    if (st != LATTICE_OK) return st;
    struct part *p = &s->parts[e->partition];
    unsigned long hash = key_hash(e->key, e->key_len);
    uint64_t now = 0;
    struct found f;
    pthread_mutex_lock(&p->lock);
    st = ensure_table(s, p);
    if (st == LATTICE_OK) {
        find_locked(s, p, e, hash, &now, &f);
        st = refused(&f, e, flags);
    }
    if (st == LATTICE_OK)
        st = f.node ? update_locked(s, p, &f, e) : insert_locked(s, p, e, hash);
    pthread_mutex_unlock(&p->lock);
    return st;
}

/* Removes the found node and its row.  Partition lock held, no rcu lock. */
static void drop_locked(lattice_store *s, struct part *p, struct inode *in, uint64_t expire)
{
    rcu_read_lock();
    int gone = cds_lfht_del(p->ht, &in->lfn);
    rcu_read_unlock();
    if (gone != 0) return;
    region_lock(s->region);
    region_free_locked(s->region, in->link);
    region_unlock(s->region);
    node_retire(p, in);
    __atomic_sub_fetch(&p->count, 1, __ATOMIC_RELAXED);
    if (expire) __atomic_sub_fetch(&p->expiring, 1, __ATOMIC_RELAXED);
}

int lattice_store_remove(lattice_store *s, uint32_t partition, const void *key, size_t key_len)
{
    lattice_store_entry e = {.partition = partition, .key = key, .key_len = key_len};
    int st = entry_ok(s, &e);
    if (st != LATTICE_OK) return st;
    struct part *p = &s->parts[partition];
    uint64_t now = 0;
    struct found f;
    pthread_mutex_lock(&p->lock);
    find_locked(s, p, &e, key_hash(key, key_len), &now, &f);
    if (f.node) {
        drop_locked(s, p, f.node, f.m.q.expire);
        if (!f.live) __atomic_add_fetch(&s->expirations, 1, __ATOMIC_RELAXED);
    }
    pthread_mutex_unlock(&p->lock);
    return f.live ? LATTICE_OK : LATTICE_ERR_NOT_FOUND;
}

/* ---------------------------------------------------------------- batches */

struct pending {
    size_t n;
    lattice_store_entry e[BATCH_PEND];
    unsigned long hash[BATCH_PEND];
    struct inode *node[BATCH_PEND];
    uint64_t link[BATCH_PEND];
};

/* Writes the pending new keys page by page, then publishes them. */
static int flush(lattice_store *s, struct part *p, struct pending *pd, size_t *applied)
{
    if (!pd->n) return LATTICE_OK;
    struct evict_guard g = {s, p->idx, NULL};
    size_t done = 0;
    region_lock(s->region);
    int st = region_insert_batch_locked(s->region, pd->e, pd->n, s->owner, pd->link, &done, &g);
    region_unlock(s->region);
    for (size_t i = 0; i < pd->n; i++) {
        if (i < done) publish(p, pd->node[i], pd->link[i], pd->hash[i], &pd->e[i]);
        else node_unused(p, pd->node[i]);
    }
    *applied += done;
    pd->n = 0;
    return st;
}

static int pending_has(const struct pending *pd, const lattice_store_entry *e, unsigned long h)
{
    for (size_t i = 0; i < pd->n; i++)
        if (pd->hash[i] == h && pd->e[i].key_len == e->key_len &&
            memcmp(pd->e[i].key, e->key, e->key_len) == 0)
            return 1;
    return 0;
}

static int batch_one(lattice_store *s, struct part *p, const lattice_store_entry *e,
                     unsigned flags, struct pending *pd, size_t *applied, uint64_t *now)
{
    unsigned long hash = key_hash(e->key, e->key_len);
    int st;
    if (pending_has(pd, e, hash) && (st = flush(s, p, pd, applied)) != LATTICE_OK) return st;
    struct found f;
    find_locked(s, p, e, hash, now, &f);
    if (refused(&f, e, flags) != LATTICE_OK) return LATTICE_OK; /* skipped, not an error */
    if (f.node) {
        st = update_locked(s, p, &f, e);
        *applied += st == LATTICE_OK;
        return st;
    }
    struct inode *in = node_alloc(s, p);
    if (!in) return LATTICE_ERR_NOMEM;
    pd->e[pd->n] = *e;
    pd->hash[pd->n] = hash;
    pd->node[pd->n++] = in;
    return pd->n == BATCH_PEND ? flush(s, p, pd, applied) : LATTICE_OK;
}

static int batch_locked(lattice_store *s, struct part *p, const lattice_store_entry *e,
                        size_t n, unsigned flags, size_t *applied)
{
    struct pending *pd = lt_malloc(sizeof *pd);
    if (!pd) return LATTICE_ERR_NOMEM;
    pd->n = 0;
    uint64_t now = 0;
    int st = ensure_table(s, p);
    for (size_t i = 0; st == LATTICE_OK && i < n; i++)
        st = batch_one(s, p, &e[i], flags, pd, applied, &now);
    int fst = flush(s, p, pd, applied);
    lt_free(pd);
    return st != LATTICE_OK ? st : fst;
}

int lattice_store_insert_batch(lattice_store *s, uint32_t partition,
                               const lattice_store_entry *e, size_t n, unsigned flags,
                               size_t *applied)
{
    size_t dummy;
    if (!applied) applied = &dummy;
    *applied = 0;
    if (partition >= s->nparts || (n && !e)) return LATTICE_ERR_INVAL;
    for (size_t i = 0; i < n; i++) {
        int st = entry_ok(s, &e[i]);
        if (st != LATTICE_OK) return st;
        if (e[i].partition != partition) return LATTICE_ERR_INVAL;
    }
    struct part *p = &s->parts[partition];
    pthread_mutex_lock(&p->lock);
    int st = batch_locked(s, p, e, n, flags, applied);
    pthread_mutex_unlock(&p->lock);
    return st;
}

int lattice_store_put_all(lattice_store *s, const lattice_store_entry *e, size_t n,
                          unsigned flags, size_t *applied)
{
    size_t dummy;
    if (!applied) applied = &dummy;
    *applied = 0;
    if (n && !e) return LATTICE_ERR_INVAL;
    for (size_t i = 0; i < n; i++) {
        int st = entry_ok(s, &e[i]);
        if (st != LATTICE_OK) return st;
    }
    for (size_t i = 0; i < n;) {
        size_t j = i + 1;
        while (j < n && e[j].partition == e[i].partition) j++;
        struct part *p = &s->parts[e[i].partition];
        pthread_mutex_lock(&p->lock);
        int st = batch_locked(s, p, e + i, j - i, flags, applied);
        pthread_mutex_unlock(&p->lock);
        if (st != LATTICE_OK) return st;
        i = j;
    }
    return LATTICE_OK;
}

/* ---------------------------------------------------------------- reads */

int lattice_store_get(lattice_store *s, uint32_t partition, const void *key, size_t key_len,
                      void *buf, size_t cap, lattice_store_meta *meta)
{
    if (partition >= s->nparts || !key || key_len == 0 || key_len > LATTICE_STORE_MAX_KEY ||
        (!buf && cap))
        return LATTICE_ERR_INVAL;
    struct match_ctx m = {.q = {.vbuf = buf, .vcap = buf ? cap : 0}};
    if (!buf) m.q.vbuf = &m, m.q.vcap = 0; /* copy nothing, but a 0-byte value "fits" */
    rcu_read_lock();
    struct inode *in = lookup(s, partition, key, key_len, key_hash(key, key_len), &m);
    rcu_read_unlock();
    uint64_t now = 0;
    if (!in || expired(s, m.q.expire, &now)) return LATTICE_ERR_NOT_FOUND;
    if (meta) {
        meta->value_len = m.q.vlen;
        meta->expire_ms = m.q.expire;
        meta->version = m.q.version;
    }
    return m.q.vlen > cap ? LATTICE_ERR_TOO_LARGE : LATTICE_OK;
}

int lattice_store_get_copy(lattice_store *s, uint32_t partition, const void *key,
                           size_t key_len, void **value, lattice_store_meta *meta)
{
    lattice_store_meta mm;
    size_t cap = 64;
    if (!value) return LATTICE_ERR_INVAL;
    *value = NULL;
    for (;;) {
        void *buf = lt_malloc(cap);
        if (!buf) return LATTICE_ERR_NOMEM;
        int st = lattice_store_get(s, partition, key, key_len, buf, cap, &mm);
        if (st == LATTICE_OK) {
            *value = buf;
            if (meta) *meta = mm;
            return st;
        }
        lt_free(buf);
        if (st != LATTICE_ERR_TOO_LARGE) return st;
        cap = mm.value_len; /* grew meanwhile: loop again */
    }
}

int lattice_store_get_all(lattice_store *s, const lattice_store_entry *keys, size_t n,
                          lattice_store_visit_fn fn, void *arg)
{
    if ((n && !keys) || !fn) return LATTICE_ERR_INVAL;
    size_t cap = 256;
    uint8_t *buf = lt_malloc(cap); /* one buffer for the whole call, grown as needed */
    if (!buf) return LATTICE_ERR_NOMEM;
    int st = LATTICE_OK;
    for (size_t i = 0; i < n; i++) {
        lattice_store_meta mm;
        while ((st = lattice_store_get(s, keys[i].partition, keys[i].key, keys[i].key_len, buf,
                                       cap, &mm)) == LATTICE_ERR_TOO_LARGE) {
            uint8_t *nb = lt_realloc(buf, mm.value_len);
            if (!nb) {
                lt_free(buf);
                return LATTICE_ERR_NOMEM;
            }
            buf = nb;
            cap = mm.value_len;
        }
        if (st == LATTICE_ERR_NOT_FOUND) {
            st = LATTICE_OK;
            continue;
        }
        if (st != LATTICE_OK) break;
        lattice_store_item it = {keys[i].partition, keys[i].key, keys[i].key_len,
                                 buf, mm.value_len, mm.expire_ms, mm.version};
        if (fn(arg, &it)) break;
    }
    lt_free(buf);
    return st;
}

uint64_t lattice_store_count(lattice_store *s, uint32_t partition)
{
    if (partition >= s->nparts) return 0;
    return __atomic_load_n(&s->parts[partition].count, __ATOMIC_RELAXED);
}

uint32_t lattice_store_partitions(const lattice_store *s) { return s->nparts; }

/* ---------------------------------------------------------------- walks */

/* Makes sure the partition's limbo batch has room for one more node. */
static int limbo_room(struct part *p)
{
    if (p->limbo) return 1;
    p->limbo = lt_malloc(sizeof *p->limbo);
    if (!p->limbo) return 0;
    p->limbo->p = p;
    p->limbo->n = 0;
    return 1;
}

/* Removes every entry of p (or only those expired at now), up to max (0 = no
 * limit); returns how many.  Partition lock held.  The walk deletes inside
 * one read-side section, so node_retire's grace-period wait is avoided: the
 * limbo batch is made room for before each delete. */
static size_t reclaim(lattice_store *s, struct part *p, int only_expired, uint64_t now,
                      size_t max)
{
    size_t total = 0;
    struct inode *stuck;
    uint64_t next_min = UINT64_MAX;
    int whole = 1;
    do {
        stuck = NULL;
        struct cds_lfht_iter it;
        struct cds_lfht_node *n;
        rcu_read_lock();
        cds_lfht_for_each(p->ht, &it, n) {
            struct inode *in = caa_container_of(n, struct inode, lfn);
            uint64_t link = __atomic_load_n(&in->link, __ATOMIC_ACQUIRE);
            if (link == MARKER_LINK) continue;
            struct read_req q = {0};
            if (region_read_entry(s->region, link, &q) != LATTICE_OK) q.expire = 0;
            if (only_expired && !(q.expire && q.expire <= now)) {
                if (q.expire && q.expire < next_min) next_min = q.expire;
                continue;
            }
            if (!limbo_room(p)) {
                stuck = in;
                break;
            }
            if (cds_lfht_del(p->ht, n) != 0) continue;
            region_lock(s->region);
            region_free_locked(s->region, link);
            region_unlock(s->region);
            node_retire(p, in); /* has room: never waits */
            __atomic_sub_fetch(&p->count, 1, __ATOMIC_RELAXED);
            if (q.expire) __atomic_sub_fetch(&p->expiring, 1, __ATOMIC_RELAXED);
            if (++total == max) {
                whole = 0;
                break;
            }
        }
        rcu_read_unlock();
        if (stuck) {
            /* No memory for a limbo batch: drop this one entry the slow way. */
            struct read_req q = {0};
            region_read_entry(s->region, stuck->link, &q);
            drop_locked(s, p, stuck, q.expire);
            total++;
        }
        if (stuck) whole = 0; /* the walk restarts: survivors seen twice is harmless */
    } while (stuck && total != max);
    /* A finished walk saw every survivor: none expires before next_min. */
    if (whole || !only_expired) __atomic_store_n(&p->min_expire, next_min, __ATOMIC_RELAXED);
    return total;
}

int lattice_store_clear(lattice_store *s, uint32_t partition)
{
    if (partition >= s->nparts) return LATTICE_ERR_INVAL;
    struct part *p = &s->parts[partition];
    pthread_mutex_lock(&p->lock);
    if (p->ht) reclaim(s, p, 0, 0, 0);
    pthread_mutex_unlock(&p->lock);
    return LATTICE_OK;
}

size_t lattice_store_expire(lattice_store *s, size_t max)
{
    size_t total = 0;
    pthread_mutex_lock(&s->sweep_lock);
    uint64_t now = s->clock_ms(s->clock_arg);
    for (uint32_t k = 0; k < s->nparts; k++) {
        uint32_t i = (s->sweep_part + k) & (s->nparts - 1);
        struct part *p = &s->parts[i];
        if (!__atomic_load_n(&p->expiring, __ATOMIC_RELAXED) ||
            __atomic_load_n(&p->min_expire, __ATOMIC_RELAXED) > now)
            continue;
        pthread_mutex_lock(&p->lock);
        size_t n = p->ht ? reclaim(s, p, 1, now, max ? max - total : 0) : 0;
        pthread_mutex_unlock(&p->lock);
        total += n;
        if (max && total >= max) {
            s->sweep_part = i; /* this partition may hold more: resume here */
            break;
        }
    }
    pthread_mutex_unlock(&s->sweep_lock);
    __atomic_add_fetch(&s->expirations, total, __ATOMIC_RELAXED);
    return total;
}

/* ---------------------------------------------------------------- cursors */

struct rec {
    uint32_t klen, vlen;
    uint64_t expire, version;
};

static void marker_free(struct rcu_head *head)
{
    lt_free(caa_container_of(head, struct cmarker, rcu));
}

int lattice_store_cursor_open(lattice_store *s, uint32_t partition, lattice_store_cursor **out)
{
    if (!out) return LATTICE_ERR_INVAL;
    *out = NULL;
    if (partition >= s->nparts) return LATTICE_ERR_INVAL;
    lattice_store_cursor *c = lt_calloc(1, sizeof *c);
    if (!c) return LATTICE_ERR_NOMEM;
    c->s = s;
    c->part = partition;
    *out = c;
    return LATTICE_OK;
}

static void drop_marker(lattice_store_cursor *c)
{
    if (!c->marker) return;
    struct part *p = &c->s->parts[c->part];
    rcu_read_lock();
    cds_lfht_del(p->ht, &c->marker->n.lfn);
    rcu_read_unlock();
    call_rcu(&c->marker->rcu, marker_free);
    c->marker = NULL;
}

void lattice_store_cursor_close(lattice_store_cursor *c)
{
    if (!c) return;
    drop_marker(c);
    lt_free(c->buf);
    lt_free(c);
}

static int grow(lattice_store_cursor *c, size_t need)
{
    if (need <= c->cap) return 1;
    size_t cap = c->cap ? c->cap : 4096;
    while (cap < need) cap *= 2;
    uint8_t *b = lt_realloc(c->buf, cap);
    if (!b) return 0;
    c->buf = b;
    c->cap = cap;
    return 1;
}

/* Copies node in's entry to c->buf + used.  1 copied (*need = bytes used),
 * 0 skipped (gone, moving away or expired), -1 out of memory.  RCU read lock. */
static int copy_node(lattice_store_cursor *c, struct inode *in, unsigned long rh, size_t used,
                     size_t *need, uint64_t *now)
{
    lattice_store *s = c->s;
    uint64_t link = __atomic_load_n(&in->link, __ATOMIC_ACQUIRE);
    for (;;) {
        if (link == MARKER_LINK) return 0;
        struct read_req q = {0};
        if (region_read_entry(s->region, link, &q) != LATTICE_OK) goto moved;
        size_t sz = (sizeof(struct rec) + q.klen + q.vlen + 7) & ~(size_t)7;
        if (!grow(c, used + sz)) return -1;
        uint8_t *base = c->buf + used + sizeof(struct rec);
        size_t klen = q.klen, vlen = q.vlen;
        q = (struct read_req){.kbuf = base, .kcap = klen, .vbuf = base + klen, .vcap = vlen};
        if (region_read_entry(s->region, link, &q) != LATTICE_OK) goto moved;
        if (q.klen != klen || q.vlen != vlen) continue;
        /* A stale link may name a recycled row: the key must hash to this node. */
        if (q.owner != s->owner || q.partition != c->part ||
            key_hash(base, klen) != (unsigned long)bitrev64(rh))
            goto moved;
        if (expired(s, q.expire, now)) return 0;
        struct rec r = {(uint32_t)klen, (uint32_t)vlen, q.expire, q.version};
        memcpy(c->buf + used, &r, sizeof r);
        *need = sz;
        return 1;
    moved:;
        uint64_t again = __atomic_load_n(&in->link, __ATOMIC_ACQUIRE);
        if (again == link) return 0;
        link = again;
    }
}

/* Collects one batch into c->buf.  Sets *end when the table was exhausted
 * and *last_rh to the reverse hash the batch ended at. */
static int collect(lattice_store_cursor *c, struct cds_lfht *ht, size_t max_entries,
                   size_t max_bytes, size_t *count, size_t *used, int *end,
                   unsigned long *last_rh)
{
    struct cds_lfht_iter it;
    uint64_t now = 0;
    size_t bytes = 0;
    int have = 0;
    if (!c->marker) {
        cds_lfht_first(ht, &it);
    } else {
        it.node = &c->marker->n.lfn;
        it.next = rcu_dereference(c->marker->n.lfn.next);
        cds_lfht_next(ht, &it);
    }
    for (struct cds_lfht_node *n; (n = cds_lfht_iter_get_node(&it)); cds_lfht_next(ht, &it)) {
        /* Stop only between runs of equal hashes: the marker goes after a run. */
        if (have && (*count >= max_entries || (max_bytes && bytes >= max_bytes)) &&
            n->reverse_hash != *last_rh)
            return LATTICE_OK;
        size_t need = 0;
        int got = copy_node(c, caa_container_of(n, struct inode, lfn), n->reverse_hash, *used,
                            &need, &now);
        if (got < 0) return LATTICE_ERR_NOMEM;
        *last_rh = n->reverse_hash;
        have = 1;
        if (got) {
            const struct rec *r = (const struct rec *)(c->buf + *used);
            bytes += (size_t)r->klen + r->vlen;
            *used += need;
            ++*count;
        }
    }
    *end = 1;
    return LATTICE_OK;
}

int lattice_store_cursor_next(lattice_store_cursor *c, size_t max_entries, size_t max_bytes,
                              lattice_store_visit_fn fn, void *arg, int *done)
{
    int dummy;
    if (!done) done = &dummy;
    *done = c->done;
    if (c->done) return LATTICE_OK;
    if (!fn) return LATTICE_ERR_INVAL;
    if (max_entries == 0) max_entries = 1;
    struct part *p = &c->s->parts[c->part];
    struct cmarker *nm = lt_malloc(sizeof *nm);
    if (!nm) return LATTICE_ERR_NOMEM;
    nm->n.link = MARKER_LINK;
    size_t count = 0, used = 0;
    int end = 0;
    unsigned long last_rh = 0;
    struct cmarker *added = NULL;
    rcu_read_lock();
    struct cds_lfht *ht = rcu_dereference(p->ht);
    int st = ht ? collect(c, ht, max_entries, max_bytes, &count, &used, &end, &last_rh)
                : LATTICE_OK;
    if (!ht) end = 1;
    if (st == LATTICE_OK && !end) {
        cds_lfht_add(ht, (unsigned long)bitrev64(last_rh), &nm->n.lfn);
        added = nm;
    }
    rcu_read_unlock();
    if (!added) lt_free(nm);
    if (st != LATTICE_OK) return st; /* position unchanged: the caller may retry */
    drop_marker(c);
    c->marker = added;
    c->done = end;
    /* Delivered after the walk, outside the read-side section. */
    for (size_t off = 0, i = 0; i < count; i++) {
        struct rec r;
        memcpy(&r, c->buf + off, sizeof r);
        const uint8_t *k = c->buf + off + sizeof r;
        lattice_store_item item = {c->part, k, r.klen, k + r.klen, r.vlen, r.expire, r.version};
        fn(arg, &item);
        off += (sizeof r + r.klen + r.vlen + 7) & ~(size_t)7;
    }
    *done = end;
    return LATTICE_OK;
}

/* ---------------------------------------------------------------- lifecycle */

static void *sweeper_main(void *arg)
{
    lattice_store *s = arg;
    rcu_register_thread();
    pthread_mutex_lock(&s->sw_lock);
    while (!s->sw_stop) {
        pthread_mutex_unlock(&s->sw_lock);
        lattice_store_expire(s, 0);
        pthread_mutex_lock(&s->sw_lock);
        if (s->sw_stop) break;
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        uint64_t ns = (uint64_t)ts.tv_nsec + (uint64_t)s->sw_interval * 1000000u;
        ts.tv_sec += (time_t)(ns / 1000000000u);
        ts.tv_nsec = (long)(ns % 1000000000u);
        pthread_cond_timedwait(&s->sw_cond, &s->sw_lock, &ts);
    }
    pthread_mutex_unlock(&s->sw_lock);
    rcu_unregister_thread();
    return NULL;
}

int lattice_store_sweeper_start(lattice_store *s, unsigned interval_ms)
{
    if (interval_ms == 0) return LATTICE_ERR_INVAL;
    pthread_mutex_lock(&s->sw_lock);
    int st = LATTICE_OK;
    if (s->sw_running) {
        st = LATTICE_ERR_EXISTS;
    } else {
        s->sw_stop = 0;
        s->sw_interval = interval_ms;
        if (pthread_create(&s->sw_thread, NULL, sweeper_main, s) != 0) st = LATTICE_ERR_NOMEM;
        else s->sw_running = 1;
    }
    pthread_mutex_unlock(&s->sw_lock);
    return st;
}

void lattice_store_sweeper_stop(lattice_store *s)
{
    pthread_mutex_lock(&s->sw_lock);
    int running = s->sw_running;
    s->sw_stop = 1;
    pthread_cond_signal(&s->sw_cond);
    pthread_mutex_unlock(&s->sw_lock);
    if (!running) return;
    pthread_join(s->sw_thread, NULL);
    pthread_mutex_lock(&s->sw_lock);
    s->sw_running = 0;
    pthread_mutex_unlock(&s->sw_lock);
}

int lattice_store_create(const lattice_store_config *cfg, lattice_store **out)
{
    if (!out) return LATTICE_ERR_INVAL;
    *out = NULL;
    if (!cfg || !cfg->region || cfg->partitions == 0 ||
        cfg->partitions > LATTICE_STORE_MAX_PARTITIONS ||
        (cfg->partitions & (cfg->partitions - 1)))
        return LATTICE_ERR_INVAL;
    lattice_store *s = lt_calloc(1, sizeof *s);
    if (!s) return LATTICE_ERR_NOMEM;
    s->parts = lt_calloc(cfg->partitions, sizeof *s->parts);
    s->hts = lt_calloc(cfg->partitions, sizeof *s->hts);
    if (!s->parts || !s->hts) {
        lt_free(s->parts);
        lt_free(s->hts);
        lt_free(s);
        return LATTICE_ERR_NOMEM;
    }
    s->region = cfg->region;
    s->nparts = cfg->partitions;
    s->clock_ms = cfg->clock_ms ? cfg->clock_ms : realtime_ms;
    s->clock_arg = cfg->clock_arg;
    snprintf(s->name, sizeof s->name, "%s", cfg->name ? cfg->name : "default");
    int st = region_attach(s->region, store_evict, s, &s->owner);
    if (st != LATTICE_OK) {
        lt_free(s->parts);
        lt_free(s->hts);
        lt_free(s);
        return st;
    }
    for (uint32_t i = 0; i < s->nparts; i++) {
        pthread_mutex_init(&s->parts[i].lock, NULL);
        s->parts[i].s = s;
        s->parts[i].idx = i;
        s->parts[i].min_expire = UINT64_MAX;
    }
    pthread_mutex_init(&s->sweep_lock, NULL);
    pthread_mutex_init(&s->sw_lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&s->sw_cond, &ca);
    pthread_condattr_destroy(&ca);
    *out = s;
    return LATTICE_OK;
}

void lattice_store_destroy(lattice_store *s)
{
    if (!s) return;
    lattice_store_sweeper_stop(s);
    /* Detached first, so no eviction calls into this store any more. */
    region_detach(s->region, s->owner);
    for (uint32_t i = 0; i < s->nparts; i++) {
        struct part *p = &s->parts[i];
        pthread_mutex_lock(&p->lock);
        if (p->ht) reclaim(s, p, 0, 0, 0);
        pthread_mutex_unlock(&p->lock);
    }
    rcu_barrier(); /* limbo callbacks take partition locks */
    for (uint32_t i = 0; i < s->nparts; i++) {
        struct part *p = &s->parts[i];
        lt_free(p->limbo);
        if (p->ht && cds_lfht_destroy(p->ht, NULL) != 0)
            LT_LOG(LT_ERROR, "storage", "store %s: partition %u index not empty at destroy "
                   "(a cursor left open?)", s->name, i);
        while (p->slabs) {
            struct slab *next = p->slabs->next;
            lt_free(p->slabs);
            p->slabs = next;
        }
        pthread_mutex_destroy(&p->lock);
    }
    pthread_mutex_destroy(&s->sweep_lock);
    pthread_mutex_destroy(&s->sw_lock);
    pthread_cond_destroy(&s->sw_cond);
    lt_free(s->parts);
    lt_free(s->hts);
    lt_free(s);
}

void lattice_store_metrics_get(lattice_store *s, lattice_store_metrics *m)
{
    memset(m, 0, sizeof *m);
    for (uint32_t i = 0; i < s->nparts; i++)
        m->entries += __atomic_load_n(&s->parts[i].count, __ATOMIC_RELAXED);
    m->expirations = __atomic_load_n(&s->expirations, __ATOMIC_RELAXED);
    m->evictions = __atomic_load_n(&s->evictions, __ATOMIC_RELAXED);
    m->index_bytes = __atomic_load_n(&s->index_bytes, __ATOMIC_RELAXED);
    for (uint32_t i = 0; i < s->nparts; i++)
        m->index_buckets += __atomic_load_n(&s->parts[i].buckets, __ATOMIC_RELAXED);
    lattice_region_metrics_get(s->region, &m->region);
}
