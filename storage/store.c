/*
 * Store: per-partition indexes (open-addressing tables of (tag, link) slots,
 * index_int.h) over a shared region.  Writes, reads and the lifecycle;
 * clear, expiry and cursors are in store_walk.c.
 *
 * The key lives only in its row.  A get hashes the key once, probes the
 * partition's table comparing 32-bit tags, and reads the row of a slot whose
 * tag matches: header, item slot and row are addressed from the slot alone
 * (the link carries the row's position), so a hit costs one round of cache
 * misses after the table line.  The row check (key bytes, store, partition)
 * decides a match.  Removing an entry leaves a tombstone and never allocates.
 *
 * Locks and RCU: store_int.h.  Writers hold their partition's lock and need
 * no read-side section (the table they use cannot be freed under them and
 * pages are never unmapped); readers take rcu_read_lock only.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "lattice/alloc.h"
#include "lattice/clock.h"
#include "lattice/log.h"
#include "region_read.h"
#include "store_int.h"

#define BATCH_PEND 64
#define PRESIZE_MAX 65536 /* larger batches grow the table as they go */

static uint64_t realtime_ms(void *arg)
{
    (void)arg;
    return lt_wall_ms();
}

/* ---------------------------------------------------------------- lookup */

static void want(struct read_req *q, const lattice_store *s, uint32_t part, const void *key,
                 size_t klen)
{
    q->want_key = key;
    q->want_klen = klen;
    q->want_owner = s->owner;
    q->want_partition = part;
}

/* Searches table t (of cap home slots) for the key q wants; q gets the
 * entry's metadata (and the value when q->vbuf is set).  Returns the slot or
 * -1.  *freep (when given) gets the first free slot the probe passed, or -1.
 * Readers call it inside rcu_read_lock, writers with the partition lock. */
static long search(lattice_store *s, const struct ix_table *t, uint32_t cap, uint32_t tag,
                   struct read_req *q, long *freep)
{
    uint32_t i = ix_home_cap(cap, tag), end = cap + IX_OVERFLOW;
    /* Walk line by line: no division per probed slot. */
    const struct ix_line *ln = &t->lines[i / IX_LINE_SLOTS];
    uint32_t pos = i % IX_LINE_SLOTS;
    if (freep) *freep = -1;
    for (; i < end; i++) {
        uint32_t tg = __atomic_load_n(&ln->tags[pos], __ATOMIC_ACQUIRE);
        if (tg == tag) {
            uint64_t link = __atomic_load_n(&ln->links[pos], __ATOMIC_ACQUIRE);
            for (;;) {
                if (region_read_entry(s->region, link, q) == LATTICE_OK && q->match) {
                    q->link = link;
                    return i;
                }
                /* Not our row any more: the entry moved (reload) or is going away. */
                uint64_t again = __atomic_load_n(&ln->links[pos], __ATOMIC_ACQUIRE);
                if (again == link) break;
                link = again;
            }
        } else if (tg <= IX_TOMB) {
            if (freep && *freep < 0) *freep = (long)i;
            if (tg == IX_EMPTY) return -1;
        }
        if (++pos == IX_LINE_SLOTS) pos = 0, ln++;
    }
    return -1;
}

static long search_locked(lattice_store *s, const struct ix_table *t, uint32_t tag,
                          struct read_req *q, long *freep)
{
    return search(s, t, t->cap, tag, q, freep);
}

/* A partition's table and its capacity as published together; 0 while a
 * writer is changing them (the caller takes the general path: a reader
 * never waits for a writer here).  Needs rcu_read_lock. */
static int tabref_read(const struct tabref *ref, const struct ix_table **t, uint32_t *cap)
{
    uint32_t seq = __atomic_load_n(&ref->seq, __ATOMIC_ACQUIRE);
    *t = rcu_dereference(ref->t);
    *cap = __atomic_load_n(&ref->cap, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    return !(seq & 1) && __atomic_load_n(&ref->seq, __ATOMIC_RELAXED) == seq;
}

/* The reader's lookup: searches the current table, and the next one when a
 * rebuild replaced it meanwhile (the old table is frozen, and its links may
 * be stale).  The general path: it takes the capacity from the table
 * header, which never changes for a table, so it never waits for a writer
 * swapping tables.  Needs rcu_read_lock. */
static long read_lookup(lattice_store *s, uint32_t part, uint32_t tag, struct read_req *q)
{
    const struct tabref *ref = &s->tabs[part];
    const struct ix_table *t = rcu_dereference(ref->t);
    while (t) {
        long i = search(s, t, t->cap, tag, q, NULL);
        if (i >= 0) return i;
        const struct ix_table *now = rcu_dereference(ref->t);
        if (now == t) return -1;
        t = now;
    }
    return -1;
}

/* The common get, answered from the first matching slot of the current
 * table and region_read_small (row read at its position hint: one round of
 * misses for the table line, one for the page), all inline in
 * lattice_store_get.  Returns a get's status, or FAST_NO when the general
 * path (read_lookup) must decide: a row that moved, is fragmented or torn, a
 * tag shared with another key, a table being replaced.  Needs
 * rcu_read_lock. */
#define FAST_NO (-1) /* no lattice_status is negative */
static inline __attribute__((always_inline)) int get_fast(lattice_store *s, uint32_t part,
                                                          uint32_t tag, struct small_get *g)
{
    const struct tabref *ref = &s->tabs[part];
    const struct ix_table *t;
    uint32_t cap;
    if (!tabref_read(ref, &t, &cap)) return FAST_NO;
    if (!t) return LATTICE_ERR_NOT_FOUND;
    uint32_t i = ix_home_cap(cap, tag), left = cap + IX_OVERFLOW - i;
    const struct ix_line *ln = &t->lines[i / IX_LINE_SLOTS];
    for (uint32_t pos = i % IX_LINE_SLOTS;;) {
        uint32_t tg = __atomic_load_n(&ln->tags[pos], __ATOMIC_ACQUIRE);
        if (tg == tag) {
            uint64_t link = __atomic_load_n(&ln->links[pos], __ATOMIC_ACQUIRE);
            return region_read_small(s->region, link, s->heads[part], g) > 0 ? LATTICE_OK
                                                                               : FAST_NO;
        }
        if (tg == IX_EMPTY || !--left) break;
        if (++pos == IX_LINE_SLOTS) pos = 0, ln++;
    }
    return rcu_dereference(ref->t) == t ? LATTICE_ERR_NOT_FOUND : FAST_NO;
}

/* ---------------------------------------------------------------- tables */

void store_swap_table(lattice_store *s, struct part *p, struct ix_table *t, struct ix_counts n)
{
    struct ix_table *old = p->tab;
    int64_t d = (t ? (int64_t)ix_bytes(t->cap) : 0) - (old ? (int64_t)ix_bytes(old->cap) : 0);
    __atomic_add_fetch(&s->index_bytes, (uint64_t)d, __ATOMIC_RELAXED);
    __atomic_store_n(&p->slots, t ? t->cap : 0, __ATOMIC_RELAXED);
    p->tab = t;
    p->n = n;
    struct tabref *ref = &s->tabs[p->idx];
    __atomic_store_n(&ref->seq, ref->seq + 1, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_RELEASE);
    __atomic_store_n(&ref->cap, t ? t->cap : 0, __ATOMIC_RELAXED);
    rcu_assign_pointer(ref->t, t);
    __atomic_store_n(&ref->seq, ref->seq + 1, __ATOMIC_RELEASE);
    ix_retire(old);
}

static int ensure_table(lattice_store *s, struct part *p)
{
    if (p->tab) return LATTICE_OK;
    struct ix_table *t = ix_new(IX_MIN_CAP);
    if (!t) return LATTICE_ERR_NOMEM;
    store_swap_table(s, p, t, (struct ix_counts){0, 0});
    return LATTICE_OK;
}

/* Rebuilds the table with room for `more` new keys.  Partition lock held. */
static int rebuild(lattice_store *s, struct part *p, uint32_t more, uint32_t min_cap)
{
    uint32_t cap = ix_cap_for(p->n.live, more);
    if (cap < min_cap) cap = min_cap;
    struct ix_counts n;
    struct ix_table *t = ix_rebuild(p->tab, cap, &n);
    if (!t) return LATTICE_ERR_NOMEM;
    store_swap_table(s, p, t, n);
    return LATTICE_OK;
}

static int make_room(lattice_store *s, struct part *p, uint32_t more)
{
    return ix_has_room(p->tab, &p->n, more) ? LATTICE_OK : rebuild(s, p, more, 0);
}

/* A free slot for a new key (known absent) with this tag, rebuilding larger
 * when the probe runs off the end.  Partition lock held. */
static int claim_slot(lattice_store *s, struct part *p, uint32_t tag, long *slot)
{
    for (;;) {
        *slot = ix_free_slot(p->tab, tag);
        if (*slot >= 0) return LATTICE_OK;
        int st = rebuild(s, p, 1, p->tab->cap * 2);
        if (st != LATTICE_OK) return st;
    }
}

/* ---------------------------------------------------------------- eviction */

static int store_evict(void *ctx, uint32_t part, const void *key, size_t klen, uint64_t link,
                       const struct evict_guard *g)
{
    lattice_store *s = ctx;
    if (part >= s->nparts) return 0;
    if (klen && *(const uint8_t *)key == LATTICE_STORE_RESERVED_BYTE) return 0; /* a transaction's record stays */
    if (g && g->skip_store == s && part == g->skip_partition && klen == g->skip_klen && !memcmp(key, g->skip_key, klen))
        return 0;
    struct part *p = &s->parts[part];
    int held = g && g->store == s && g->partition == part;
    if (!held && pthread_mutex_trylock(&p->lock) != 0) return 0;
    int done = 0;
    if (p->tab && (!s->hook.may_evict || s->hook.may_evict(s->hook.arg, part))) {
        struct read_req q = {0};
        want(&q, s, part, key, klen);
        long i = search_locked(s, p->tab, key_tag(key, klen), &q, NULL);
        if (i >= 0 && (!g || (const void *)ix_linkp(p->tab, (uint32_t)i) != g->skip_node) &&
            LATTICE_LINK_SAME(*ix_linkp(p->tab, (uint32_t)i), link)) {
            /* Before the row goes: the key may point into its page. */
            if (s->hook.evicted) s->hook.evicted(s->hook.arg, part, key, klen, q.version);
            if (s->change.changed) {
                lattice_store_entry gone = {part, key, klen, NULL, 0, 0, q.version, 0};
                s->change.changed(s->change.arg, LATTICE_STORE_CHANGE_REMOVE, &gone);
            }
            /* No history record: the eviction's counter is the remove the
             * owner's eviction flush sends (lattice_store_history_note). */
            ix_kill(p->tab, &p->n, i);
            region_free_locked(s->region, link);
            __atomic_sub_fetch(&p->count, 1, __ATOMIC_RELAXED);
            if (q.expire) __atomic_sub_fetch(&p->expiring, 1, __ATOMIC_RELAXED);
            __atomic_add_fetch(&s->evictions, 1, __ATOMIC_RELAXED);
            done = 1;
        }
    }
    if (!held) pthread_mutex_unlock(&p->lock);
    return done;
}

/* ---------------------------------------------------------------- writes */

static int entry_ok(const lattice_store *s, const lattice_store_entry *e)
{
    if (!e || !e->key || e->key_len == 0 || e->key_len > LATTICE_STORE_MAX_KEY ||
        (!e->value && e->value_len) || e->partition >= s->nparts || e->type > LATTICE_STORE_TYPE_MAX)
        return LATTICE_ERR_INVAL;
    return e->value_len > LATTICE_STORE_MAX_VALUE ? LATTICE_ERR_TOO_LARGE : LATTICE_OK;
}

struct found {
    long slot;  /* -1 when absent */
    long free;  /* first free slot on the probe, or -1 */
    uint32_t tag;
    struct read_req q;
    int live;
};

static void find_locked(lattice_store *s, struct part *p, const lattice_store_entry *e,
                        uint64_t *now, struct found *f)
{
    memset(&f->q, 0, sizeof f->q);
    want(&f->q, s, p->idx, e->key, e->key_len);
    f->tag = key_tag(e->key, e->key_len);
    f->slot = search_locked(s, p->tab, f->tag, &f->q, &f->free);
    f->live = f->slot >= 0 && !expired(s, f->q.expire, now);
}

static int refused(const struct found *f, const lattice_store_entry *e, unsigned flags)
{
    if ((flags & LATTICE_STORE_IF_ABSENT) && f->live) return LATTICE_ERR_EXISTS;
    if ((flags & LATTICE_STORE_IF_PRESENT) && !f->live) return LATTICE_ERR_NOT_FOUND;
    if ((flags & LATTICE_STORE_IF_NEWER) && f->live && e->version <= f->q.version)
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
    uint64_t *linkp = ix_linkp(p->tab, (uint32_t)f->slot);
    struct evict_guard g = {.store = s, .partition = p->idx, .skip_node = linkp};
    int st = region_update(s->region, linkp, e, s->owner, &g);
    if (st != LATTICE_OK) return st;
    if (!f->live) __atomic_add_fetch(&s->expirations, 1, __ATOMIC_RELAXED);
    int64_t d = (e->expire_ms != 0) - (f->q.expire != 0);
    if (d) __atomic_add_fetch(&p->expiring, (uint64_t)d, __ATOMIC_RELAXED);
    if (e->expire_ms) note_expiry(p, e->expire_ms);
    return LATTICE_OK;
}

static void publish(struct part *p, long slot, uint32_t tag, uint64_t link,
                    const lattice_store_entry *e)
{
    ix_fill(p->tab, &p->n, slot, tag, link);
    __atomic_add_fetch(&p->count, 1, __ATOMIC_RELAXED);
    if (e->expire_ms) {
        __atomic_add_fetch(&p->expiring, 1, __ATOMIC_RELAXED);
        note_expiry(p, e->expire_ms);
    }
}

static int insert_locked(lattice_store *s, struct part *p, const lattice_store_entry *e,
                         struct found *f)
{
    /* The slot first: a failed rebuild leaves nothing written. */
    long slot = f->free;
    if (!ix_has_room(p->tab, &p->n, 1) || slot < 0) {
        int st = make_room(s, p, 1);
        if (st == LATTICE_OK) st = claim_slot(s, p, f->tag, &slot);
        if (st != LATTICE_OK) return st;
    }
    struct evict_guard g = {.store = s, .partition = p->idx};
    uint64_t link;
    struct lane *l = region_lock_writer(s->region);
    int st = region_insert_locked(s->region, l, e, s->owner, &link, &g);
    region_unlock(l);
    if (st != LATTICE_OK) return st;
    publish(p, slot, f->tag, link, e);
    return LATTICE_OK;
}

int lattice_store_put(lattice_store *s, const lattice_store_entry *e, unsigned flags)
{
    int st = entry_ok(s, e);
    if (st != LATTICE_OK) return st;
    struct part *p = &s->parts[e->partition];
    uint64_t now = 0;
    struct found f;
    pthread_mutex_lock(&p->lock);
    st = ensure_table(s, p);
    if (st == LATTICE_OK) {
        find_locked(s, p, e, &now, &f);
        st = refused(&f, e, flags);
    }
    if (st == LATTICE_OK)
        st = f.slot >= 0 ? update_locked(s, p, &f, e) : insert_locked(s, p, e, &f);
    if (st == LATTICE_OK) store_note(s, p, LATTICE_STORE_CHANGE_PUT, e, e->version);
    pthread_mutex_unlock(&p->lock);
    return st;
}

void store_drop_slot(lattice_store *s, struct part *p, long i, uint64_t expire)
{
    /* Tombstone first: a reader that still loads the link finds its row
     * gone, reloads the same link and moves on. */
    uint64_t link = *ix_linkp(p->tab, (uint32_t)i);
    ix_kill(p->tab, &p->n, i);
    region_free(s->region, link);
    __atomic_sub_fetch(&p->count, 1, __ATOMIC_RELAXED);
    if (expire) __atomic_sub_fetch(&p->expiring, 1, __ATOMIC_RELAXED);
}

/* A table mostly emptied by removes is rebuilt smaller (tombstones go with
 * it); without memory for that it just stays as it is. */
void store_maybe_shrink(lattice_store *s, struct part *p)
{
    struct ix_table *t = p->tab;
    if (t && t->cap > IX_MIN_CAP && (uint64_t)p->n.live * 8 < t->cap) rebuild(s, p, 0, 0);
}

int lattice_store_remove(lattice_store *s, uint32_t partition, const void *key, size_t key_len)
{
    return lattice_store_remove_v(s, partition, key, key_len, STORE_NO_COUNTER);
}

int lattice_store_remove_v(lattice_store *s, uint32_t partition, const void *key, size_t key_len, uint64_t version)
{
    lattice_store_entry e = {.partition = partition, .key = key, .key_len = key_len,
                             .version = version == STORE_NO_COUNTER ? 0 : version};
    int st = entry_ok(s, &e);
    if (st != LATTICE_OK) return st;
    struct part *p = &s->parts[partition];
    uint64_t now = 0;
    struct found f = {.slot = -1};
    pthread_mutex_lock(&p->lock);
    if (p->tab) find_locked(s, p, &e, &now, &f);
    if (f.slot >= 0) {
        store_drop_slot(s, p, f.slot, f.q.expire);
        if (!f.live) __atomic_add_fetch(&s->expirations, 1, __ATOMIC_RELAXED);
        else store_note(s, p, LATTICE_STORE_CHANGE_REMOVE, &e, version);
        store_maybe_shrink(s, p);
    }
    pthread_mutex_unlock(&p->lock);
    return f.live ? LATTICE_OK : LATTICE_ERR_NOT_FOUND;
}

/* ---------------------------------------------------------------- batches */

/* New keys of a batch, written together: the table is made room for all of
 * them with one rebuild at most, the rows are packed page by page under one
 * region lock, then the slots are filled. */
struct pending {
    size_t n;
    lattice_store_entry e[BATCH_PEND];
    uint32_t tag[BATCH_PEND];
    uint64_t link[BATCH_PEND];
};

static int flush(lattice_store *s, struct part *p, struct pending *pd, size_t *applied)
{
    if (!pd->n) return LATTICE_OK;
    int st = make_room(s, p, (uint32_t)pd->n);
    if (st != LATTICE_OK) {
        pd->n = 0;
        return st;
    }
    struct evict_guard g = {.store = s, .partition = p->idx};
    size_t done = 0;
    struct lane *l = region_lock_writer(s->region);
    st = region_insert_batch_locked(s->region, l, pd->e, pd->n, s->owner, pd->link, &done, &g);
    region_unlock(l);
    for (size_t i = 0; i < done; i++) {
        long slot;
        int cst = claim_slot(s, p, pd->tag[i], &slot);
        if (cst != LATTICE_OK) {
            /* No memory for a larger table: these rows go again. */
            for (size_t j = i; j < done; j++) region_free(s->region, pd->link[j]);
            done = i;
            st = cst;
            break;
        }
        publish(p, slot, pd->tag[i], pd->link[i], &pd->e[i]);
        store_note(s, p, LATTICE_STORE_CHANGE_PUT, &pd->e[i], pd->e[i].version);
    }
    *applied += done;
    pd->n = 0;
    return st;
}

static int pending_has(const struct pending *pd, const lattice_store_entry *e, uint32_t tag)
{
    for (size_t i = 0; i < pd->n; i++)
        if (pd->tag[i] == tag && pd->e[i].key_len == e->key_len &&
            memcmp(pd->e[i].key, e->key, e->key_len) == 0)
            return 1;
    return 0;
}

static int batch_one(lattice_store *s, struct part *p, const lattice_store_entry *e,
                     unsigned flags, struct pending *pd, size_t *applied, uint64_t *now)
{
    struct found f;
    int st;
    uint32_t tag = key_tag(e->key, e->key_len);
    if (pending_has(pd, e, tag) && (st = flush(s, p, pd, applied)) != LATTICE_OK) return st;
    find_locked(s, p, e, now, &f);
    if (refused(&f, e, flags) != LATTICE_OK) return LATTICE_OK; /* skipped, not an error */
    if (f.slot >= 0) {
        st = update_locked(s, p, &f, e);
        *applied += st == LATTICE_OK;
        if (st == LATTICE_OK) store_note(s, p, LATTICE_STORE_CHANGE_PUT, e, e->version);
        return st;
    }
    pd->e[pd->n] = *e;
    pd->tag[pd->n++] = f.tag;
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
    /* A partition loaded whole (rebalance) gets its table sized once. */
    if (st == LATTICE_OK && n > 1 && n <= PRESIZE_MAX) st = make_room(s, p, (uint32_t)n);
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

/* A get's answer from the entry's status, value length and metadata. */
static inline int get_done(lattice_store *s, int st, size_t vlen, uint64_t expire,
                           uint64_t version, uint8_t type, size_t cap, lattice_store_meta *meta)
{
    uint64_t now = 0;
    if (st != LATTICE_OK || expired(s, expire, &now)) return LATTICE_ERR_NOT_FOUND;
    if (meta) {
        meta->value_len = vlen;
        meta->expire_ms = expire;
        meta->version = version;
        meta->type = type;
    }
    return vlen > cap ? LATTICE_ERR_TOO_LARGE : LATTICE_OK;
}

/* What get_fast left to decide: the general reader (any row shape, moved
 * rows, a table being replaced).  Out of line, so that the common get
 * keeps its request in registers. */
static __attribute__((noinline)) int get_general(lattice_store *s, uint32_t partition,
                                                 uint32_t tag, const void *key, size_t key_len,
                                                 void *buf, size_t cap, lattice_store_meta *meta)
{
    struct read_req q = {.vbuf = buf, .vcap = cap};
    if (!buf) q.vbuf = &q, q.vcap = 0; /* copy nothing, but a 0-byte value "fits" */
    want(&q, s, partition, key, key_len);
    rcu_read_lock();
    long slot = read_lookup(s, partition, tag, &q);
    rcu_read_unlock();
    return get_done(s, slot < 0 ? LATTICE_ERR_NOT_FOUND : LATTICE_OK, q.vlen, q.expire,
                    q.version, q.type, cap, meta);
}

int lattice_store_get(lattice_store *s, uint32_t partition, const void *key, size_t key_len,
                      void *buf, size_t cap, lattice_store_meta *meta)
{
    /* One branch for every bad argument (key_len 0 wraps).  (!buf && cap)
     * is refused, so without a buffer cap is 0. */
    if (__builtin_expect((partition >= s->nparts) | !key | (key_len - 1 >= LATTICE_STORE_MAX_KEY) |
                             (!buf & (cap != 0)), 0))
        return LATTICE_ERR_INVAL;
    uint32_t tag = key_tag(key, key_len);
    struct small_get g = {key, key_len, buf, cap, 0, 0, 0}; /* never escapes: kept in registers */
    rcu_read_lock();
    int st = get_fast(s, partition, tag, &g);
    rcu_read_unlock();
    if (st == FAST_NO) return get_general(s, partition, tag, key, key_len, buf, cap, meta);
    /* The fast path matches only a string's row (region_read_small). */
    return get_done(s, st, g.vlen, g.expire, g.version, 0, cap, meta);
}

uint32_t lattice_store_prefetch(lattice_store *s, uint32_t partition, const void *key, size_t key_len)
{
    if (partition >= s->nparts || !key || key_len - 1 >= LATTICE_STORE_MAX_KEY) return 0;
    uint32_t tag = key_tag(key, key_len);
    const struct tabref *ref = &s->tabs[partition];
    const struct ix_table *t = __atomic_load_n(&ref->t, __ATOMIC_RELAXED);
    uint32_t cap = __atomic_load_n(&ref->cap, __ATOMIC_RELAXED);
    /* Only an address is computed from t: a prefetch of a table freed
     * meanwhile faults nothing. */
    if (t) __builtin_prefetch(&t->lines[ix_home_cap(cap, tag) / IX_LINE_SLOTS]);
    return tag;
}

uint32_t lattice_store_prefetch_write(lattice_store *s, uint32_t partition, const void *key, size_t key_len)
{
    if (partition >= s->nparts) return 0;
    __builtin_prefetch(&s->parts[partition], 1);
    __builtin_prefetch(&s->hists[partition], 1);
    return lattice_store_prefetch(s, partition, key, key_len);
}

void lattice_store_prefetch_history(lattice_store *s, uint32_t partition)
{
    if (partition >= s->nparts) return;
    const lt_hist *h = &s->hists[partition];
    /* The slot after the newest: where the record goes (when the ring is
     * full, the oldest's, which the note drops first). */
    if (h->ring && h->cap) __builtin_prefetch(&h->ring[(h->head + h->n) % h->cap], 1);
}

void lattice_store_prefetch_row(lattice_store *s, uint32_t partition, uint32_t tag)
{
    if (partition >= s->nparts || tag < 2) return;
    const struct ix_table *t;
    uint32_t cap;
    if (!tabref_read(&s->tabs[partition], &t, &cap) || !t) return;
    uint32_t i = ix_home_cap(cap, tag);
    const struct ix_line *ln = &t->lines[i / IX_LINE_SLOTS];
    /* The home line only: a probe that runs into the next one is rare. */
    for (uint32_t pos = i % IX_LINE_SLOTS; pos < IX_LINE_SLOTS; pos++) {
        uint32_t tg = __atomic_load_n(&ln->tags[pos], __ATOMIC_RELAXED);
        if (tg == IX_EMPTY) return;
        if (tg != tag) continue;
        uint64_t link = __atomic_load_n(&ln->links[pos], __ATOMIC_RELAXED);
        const lattice_region *r = s->region;
        uint32_t pid = LATTICE_LINK_PAGE(link), hint = (uint32_t)(link >> 48);
        if ((pid >> r->chunk_shift) >= r->nchunks) return;
        const uint8_t *c = __atomic_load_n(&r->chunks[pid >> r->chunk_shift], __ATOMIC_RELAXED);
        if (!c || hint >= r->page_size) return;
        const uint8_t *pg = c + ((size_t)(pid & (r->chunk_pages - 1)) << r->page_shift);
        __builtin_prefetch(pg);
        __builtin_prefetch(page_items((void *)pg) + LATTICE_LINK_ITEM(link));
        __builtin_prefetch(pg + hint);
        return;
    }
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
                                 buf, mm.value_len, mm.expire_ms, mm.version, mm.type};
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

size_t lattice_store_evict(lattice_store *s, size_t want, uint32_t skip_partition, const void *skip_key,
                           size_t skip_klen)
{
    /* No partition lock held (store NULL); only the skip fields. */
    struct evict_guard g = {NULL, 0, NULL, skip_key ? s : NULL, skip_partition, skip_key, skip_klen};
    size_t n = 0;
    region_evict(s->region, want, &g, &n);
    return n;
}

void lattice_store_set_evict_hook(lattice_store *s, const lattice_store_evict_hook *h)
{
    /* Under every partition lock: an evicting writer holds one of them, or
     * try-locks it, so no eviction sees half a hook. */
    for (uint32_t i = 0; i < s->nparts; i++) pthread_mutex_lock(&s->parts[i].lock);
    s->hook = h ? *h : (lattice_store_evict_hook){0};
    for (uint32_t i = s->nparts; i-- > 0;) pthread_mutex_unlock(&s->parts[i].lock);
}

void lattice_store_set_change_hook(lattice_store *s, const lattice_store_change_hook *h)
{
    for (uint32_t i = 0; i < s->nparts; i++) pthread_mutex_lock(&s->parts[i].lock);
    s->change = h ? *h : (lattice_store_change_hook){0};
    for (uint32_t i = s->nparts; i-- > 0;) pthread_mutex_unlock(&s->parts[i].lock);
}

static size_t parts_bytes(uint32_t n) { return (size_t)n * sizeof(struct part); }

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
    /* Mapped, so each struct part starts a cache line (it is aligned to
     * one): two writers on neighbouring partitions do not share a line. */
    s->parts = lt_map(parts_bytes(cfg->partitions));
    s->tabs = lt_calloc(cfg->partitions, sizeof *s->tabs);
    s->heads = lt_calloc(cfg->partitions, sizeof *s->heads);
    s->hists = lt_calloc(cfg->partitions, sizeof *s->hists);
    if (!s->parts || !s->tabs || !s->heads || !s->hists) {
        if (s->parts) lt_unmap(s->parts, parts_bytes(cfg->partitions));
        lt_free(s->tabs);
        lt_free(s->heads);
        lt_free(s->hists);
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
        lt_unmap(s->parts, parts_bytes(cfg->partitions));
        lt_free(s->tabs);
        lt_free(s->heads);
        lt_free(s->hists);
        lt_free(s);
        return st;
    }
    for (uint32_t i = 0; i < s->nparts; i++) {
        s->heads[i] = head_prefix(s->owner, i);
        pthread_mutex_init(&s->parts[i].lock, NULL);
        s->parts[i].s = s;
        s->parts[i].idx = i;
        s->parts[i].min_expire = UINT64_MAX;
        lt_hist_init(&s->hists[i]);
    }
    s->hist_entries = LATTICE_STORE_HISTORY_DEFAULT_ENTRIES;
    s->hist_bytes = LATTICE_STORE_HISTORY_DEFAULT_BYTES;
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
        store_clear_locked(s, p);
        lt_hist_free(&s->hists[i]);
        store_reserved_free(p);
        pthread_mutex_unlock(&p->lock);
        pthread_mutex_destroy(&p->lock);
    }
    rcu_barrier(); /* the retired tables */
    pthread_mutex_destroy(&s->sweep_lock);
    pthread_mutex_destroy(&s->sw_lock);
    pthread_cond_destroy(&s->sw_cond);
    lt_unmap(s->parts, parts_bytes(s->nparts));
    lt_free(s->tabs);
    lt_free(s->heads);
    lt_free(s->hists);
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
        m->index_buckets += __atomic_load_n(&s->parts[i].slots, __ATOMIC_RELAXED);
    lattice_region_metrics_get(s->region, &m->region);
}

void lattice_store_usage_get(lattice_store *s, lattice_store_usage *u)
{
    region_owner_usage(s->region, s->owner, &u->rows, &u->row_bytes);
    uint64_t room = s->region->page_size - HDR, used = u->row_bytes + 2 * u->rows;
    u->pages = (used + room - 1) / room;
}

int lattice_store_idle_ms(lattice_store *s, uint32_t partition, const void *key, size_t key_len, uint64_t now_ms,
                          uint64_t *idle_ms)
{
    if (partition >= s->nparts || !key || key_len - 1 >= LATTICE_STORE_MAX_KEY || !idle_ms) return LATTICE_ERR_INVAL;
    struct read_req q = {.vbuf = &q, .vcap = 0, .no_touch = 1}; /* no value copied; the stamp kept */
    want(&q, s, partition, key, key_len);
    rcu_read_lock();
    long slot = read_lookup(s, partition, key_tag(key, key_len), &q);
    rcu_read_unlock();
    if (slot < 0 || (q.expire && q.expire <= s->clock_ms(s->clock_arg))) return LATTICE_ERR_NOT_FOUND;
    *idle_ms = region_page_idle_ms(s->region, LATTICE_LINK_PAGE(q.link), now_ms);
    return LATTICE_OK;
}


/* ---------------------------------------------------------------- history */

void lattice_store_history_configure(lattice_store *s, uint32_t max_entries, uint64_t max_bytes)
{
    for (uint32_t i = 0; i < s->nparts; i++) pthread_mutex_lock(&s->parts[i].lock);
    s->hist_entries = max_entries;
    s->hist_bytes = max_bytes;
    for (uint32_t i = 0; i < s->nparts; i++) pthread_mutex_unlock(&s->parts[i].lock);
}

void lattice_store_history_note(lattice_store *s, uint32_t partition, const void *key, size_t key_len,
                                uint64_t version, bool removed)
{
    if (partition >= s->nparts) return;
    struct part *p = &s->parts[partition];
    pthread_mutex_lock(&p->lock);
    lt_hist_note(&s->hists[partition], s->hist_entries, s->hist_bytes, version, key, key_len, removed);
    pthread_mutex_unlock(&p->lock);
}

void lattice_store_history_valid_from(lattice_store *s, uint32_t partition, uint64_t base)
{
    if (partition >= s->nparts) return;
    struct part *p = &s->parts[partition];
    pthread_mutex_lock(&p->lock);
    lt_hist_valid_from(&s->hists[partition], base);
    pthread_mutex_unlock(&p->lock);
}

int lattice_store_history_above(lattice_store *s, uint32_t partition, uint64_t mark, bool need_complete,
                                lattice_store_history_fn fn, void *arg)
{
    if (partition >= s->nparts) return LATTICE_ERR_INVAL;
    struct part *p = &s->parts[partition];
    pthread_mutex_lock(&p->lock);
    const lt_hist *h = &s->hists[partition];
    bool ok = need_complete ? lt_hist_complete_above(h, mark) : lt_hist_recorded_above(h, mark);
    if (ok && fn) lt_hist_walk_above(h, mark, fn, arg);
    pthread_mutex_unlock(&p->lock);
    return ok ? LATTICE_OK : LATTICE_ERR_NOT_FOUND;
}

void lattice_store_history_info(lattice_store *s, uint32_t partition, lattice_store_history_stat *out)
{
    memset(out, 0, sizeof *out);
    if (partition >= s->nparts) return;
    struct part *p = &s->parts[partition];
    pthread_mutex_lock(&p->lock);
    const lt_hist *h = &s->hists[partition];
    out->records = h->n;
    out->bytes = h->bytes;
    out->dropped = h->any_dropped ? h->dropped : 0;
    out->lost = h->lost;
    out->valid = h->valid;
    out->base = h->base;
    out->contig = h->contig;
    pthread_mutex_unlock(&p->lock);
}
