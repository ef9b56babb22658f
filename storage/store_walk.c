/*
 * Walks over one partition: clear, the expiry sweep, and cursors.
 *
 * Cursors.  A cursor's position is a tag: every entry whose tag is below
 * `from` has been returned.  Tags do not change while an entry lives and a
 * table is ordered by tag up to probe displacement (a key's home slot is
 * monotonic in its tag, probes never wrap), so a batch can take "every live
 * entry with from <= tag < upto" from whatever table is current, across
 * rebuilds:
 *   1. scan from the home slot of `from`, collecting live slots with a tag
 *      >= from; once enough are collected at slot i, set upto to the lowest
 *      tag whose home is i or later, and keep scanning to the next empty
 *      slot - every key with a smaller tag sits before it (its probe chain
 *      from its home never crosses an empty slot);
 *   2. sort what was collected by tag and copy the rows in that order,
 *      cutting early for max_entries / max_bytes only where the tag changes,
 *      so a batch never splits a run of equal tags; the next batch starts at
 *      the tag of the first entry not returned.
 * The guarantee: every entry present from open to the end of the walk is
 * returned exactly once, whatever writers do meanwhile; entries added or
 * removed meanwhile may or may not be returned.  A slot whose row does not
 * check out while the table was replaced meanwhile (its link may be stale)
 * makes the batch start again on the new table.
 */
#include <stdlib.h>
#include <string.h>

#include "lattice/alloc.h"
#include "lattice/log.h"
#include "store_int.h"

#define TAG_END (1ull << 32)
#define STALE (-2)

/* ---------------------------------------------------------------- reclaim */

/* Removes every entry of p (or only those expired at now), up to max (0 = no
 * limit); returns how many.  Partition lock held. */
static size_t reclaim(lattice_store *s, struct part *p, int only_expired, uint64_t now,
                      size_t max)
{
    struct ix_table *t = p->tab;
    size_t total = 0;
    uint64_t next_min = UINT64_MAX;
    int whole = 1;
    for (uint32_t i = 0; t && i < t->nslots; i++) {
        if (*ix_tagp(t, i) <= IX_TOMB) continue;
        struct read_req q = {0};
        if (region_read_entry(s->region, *ix_linkp(t, i), &q) != LATTICE_OK) q.expire = 0;
        if (only_expired && !(q.expire && q.expire <= now)) {
            if (q.expire && q.expire < next_min) next_min = q.expire;
            continue;
        }
        store_drop_slot(s, p, (long)i, q.expire);
        if (++total == max) {
            whole = 0;
            break;
        }
    }
    /* A finished walk saw every survivor: none expires before next_min. */
    if (whole || !only_expired) __atomic_store_n(&p->min_expire, next_min, __ATOMIC_RELAXED);
    if (only_expired && total) store_maybe_shrink(s, p);
    return total;
}

void store_clear_locked(lattice_store *s, struct part *p)
{
    if (!p->tab) return;
    reclaim(s, p, 0, 0, 0);
    /* Readers still searching the old table find tombstones only. */
    store_swap_table(s, p, NULL, (struct ix_counts){0, 0});
}

/* ---- reserved keys (storage.h) ----
 *
 * A partition holds few of them at a time (the transactions prepared in it
 * and the decisions it keeps), so a plain array of copies does. */

struct reserved {
    uint8_t **keys;
    uint32_t *lens;
    uint32_t n, cap;
};

void store_reserved_free(struct part *p)
{
    struct reserved *r = p->reserved;
    if (!r) return;
    for (uint32_t i = 0; i < r->n; i++) lt_free(r->keys[i]);
    lt_free(r->keys);
    lt_free(r->lens);
    lt_free(r);
    p->reserved = NULL;
}

static long reserved_find(const struct reserved *r, const void *key, size_t len)
{
    for (uint32_t i = 0; r && i < r->n; i++)
        if (r->lens[i] == len && !memcmp(r->keys[i], key, len)) return i;
    return -1;
}

static void reserved_drop(struct part *p, uint32_t i)
{
    struct reserved *r = p->reserved;
    lt_free(r->keys[i]);
    r->keys[i] = r->keys[r->n - 1];
    r->lens[i] = r->lens[r->n - 1];
    if (!--r->n) store_reserved_free(p);
}

void store_reserved_note(struct part *p, int kind, const lattice_store_entry *e)
{
    __atomic_add_fetch(&p->reserved_gen, 1, __ATOMIC_RELEASE);
    if (kind == LATTICE_STORE_CHANGE_CLEAR) {
        store_reserved_free(p);
        p->reserved_walk = false;
        return;
    }
    long i = reserved_find(p->reserved, e->key, e->key_len);
    struct reserved *r = p->reserved;
    if (kind == LATTICE_STORE_CHANGE_REMOVE) {
        if (i >= 0) reserved_drop(p, (uint32_t)i);
        return;
    }
    if (i >= 0 || e->key_len > UINT32_MAX) return;
    /* Out of memory, the key is not listed: its record is missed until the
     * partition's next change of a reserved key (logged). */
    if (!r && !(r = p->reserved = lt_calloc(1, sizeof *r))) goto nomem;
    if (r->n == r->cap) {
        uint32_t cap = r->cap ? 2 * r->cap : 4;
        uint8_t **k = lt_realloc(r->keys, cap * sizeof *k);
        if (k) r->keys = k;
        uint32_t *l = k ? lt_realloc(r->lens, cap * sizeof *l) : NULL;
        if (!l) goto nomem;
        r->lens = l;
        r->cap = cap;
    }
    uint8_t *copy = lt_malloc(e->key_len);
    if (!copy) goto nomem;
    memcpy(copy, e->key, e->key_len);
    r->keys[r->n] = copy;
    r->lens[r->n++] = (uint32_t)e->key_len;
    return;
nomem:
    if (p->reserved && !p->reserved->n) store_reserved_free(p);
    if (!p->reserved_walk)
        LT_LOG(LT_WARN, "store", "partition %u: out of memory listing a reserved key: its reserved keys are found by "
               "walking it until it is cleared", p->idx);
    p->reserved_walk = true;
}

struct reserved_walk {
    int (*fn)(void *arg, const lattice_store_item *it);
    void *arg;
    int rc;
};

static int walk_reserved(void *arg, const lattice_store_item *it)
{
    struct reserved_walk *w = arg;
    if (!it->key_len || *(const uint8_t *)it->key != LATTICE_STORE_RESERVED_BYTE) return 0;
    w->rc = w->fn(w->arg, it);
    return w->rc;
}

uint64_t lattice_store_user_count(lattice_store *s, uint32_t partition)
{
    uint64_t all = lattice_store_count(s, partition);
    if (partition >= s->nparts || !__atomic_load_n(&s->parts[partition].reserved_gen, __ATOMIC_ACQUIRE)) return all;
    uint32_t n = 0;
    lattice_store_reserved_gen(s, partition, &n);
    return all > n ? all - n : 0;
}

uint64_t lattice_store_reserved_gen(lattice_store *s, uint32_t partition, uint32_t *n)
{
    if (partition >= s->nparts) return 0;
    struct part *p = &s->parts[partition];
    if (n) {
        pthread_mutex_lock(&p->lock);
        *n = p->reserved ? p->reserved->n : 0;
        pthread_mutex_unlock(&p->lock);
    }
    return __atomic_load_n(&p->reserved_gen, __ATOMIC_ACQUIRE);
}

bool lattice_store_reserved_held(lattice_store *s, uint32_t partition, const void *prefix, size_t prefix_len)
{
    if (partition >= s->nparts) return false;
    struct part *p = &s->parts[partition];
    if (!__atomic_load_n(&p->reserved_gen, __ATOMIC_ACQUIRE)) return false; /* never held one */
    pthread_mutex_lock(&p->lock);
    bool held = p->reserved_walk; /* the list is short of a key: it may be one */
    const struct reserved *r = p->reserved;
    for (uint32_t i = 0; !held && r && i < r->n; i++)
        held = r->lens[i] >= prefix_len && (!prefix_len || !memcmp(r->keys[i], prefix, prefix_len));
    pthread_mutex_unlock(&p->lock);
    return held;
}

int lattice_store_reserved_each(lattice_store *s, uint32_t partition, int (*fn)(void *arg, const lattice_store_item *it),
                                void *arg, uint64_t *gen)
{
    if (partition >= s->nparts) return LATTICE_ERR_INVAL;
    struct part *p = &s->parts[partition];
    pthread_mutex_lock(&p->lock);
    *gen = p->reserved_gen;
    if (p->reserved_walk) {
        pthread_mutex_unlock(&p->lock);
        struct reserved_walk w = {fn, arg, 0};
        lattice_store_cursor *cur = NULL;
        if (lattice_store_cursor_open(s, partition, &cur) != LATTICE_OK) return LATTICE_ERR_NOMEM;
        int done = 0;
        while (!done && !w.rc)
            if (lattice_store_cursor_next(cur, 256, 1 << 20, walk_reserved, &w, &done) != LATTICE_OK) {
                if (!w.rc) w.rc = LATTICE_ERR_NOMEM;
                break;
            }
        lattice_store_cursor_close(cur);
        return w.rc;
    }
    struct reserved *r = p->reserved;
    uint32_t n = r ? r->n : 0;
    uint8_t **keys = n ? lt_calloc(n, sizeof *keys) : NULL;
    uint32_t *lens = n ? lt_calloc(n, sizeof *lens) : NULL;
    bool ok = !n || (keys && lens);
    for (uint32_t i = 0; ok && i < n; i++) {
        keys[i] = lt_malloc(r->lens[i]);
        if (!keys[i]) {
            ok = false;
            break;
        }
        memcpy(keys[i], r->keys[i], r->lens[i]);
        lens[i] = r->lens[i];
    }
    pthread_mutex_unlock(&p->lock);
    int rc = ok ? 0 : LATTICE_ERR_NOMEM;
    bool *absent = n && ok ? lt_calloc(n, sizeof *absent) : NULL;
    bool any_absent = false;
    for (uint32_t i = 0; ok && !rc && i < n; i++) {
        void *v = NULL;
        lattice_store_meta m = {0};
        if (lattice_store_get_copy(s, partition, keys[i], lens[i], &v, &m) != LATTICE_OK) {
            /* Removed since (the generation moved), or expired: an expiry
             * is not noted, so the list still names it (below). */
            if (absent) absent[i] = any_absent = true;
            continue;
        }
        lattice_store_item it = {partition, keys[i], lens[i], v, m.value_len, m.expire_ms, m.version, m.type};
        rc = fn(arg, &it);
        lt_free(v);
    }
    if (any_absent) {
        /* Absent while no reserved key changed: expired.  Off the list. */
        pthread_mutex_lock(&p->lock);
        for (uint32_t i = 0; p->reserved_gen == *gen && i < n; i++) {
            long at = absent[i] ? reserved_find(p->reserved, keys[i], lens[i]) : -1;
            if (at >= 0) reserved_drop(p, (uint32_t)at);
        }
        pthread_mutex_unlock(&p->lock);
    }
    lt_free(absent);
    for (uint32_t i = 0; keys && i < n; i++) lt_free(keys[i]);
    lt_free(keys);
    lt_free(lens);
    return rc;
}

int lattice_store_clear(lattice_store *s, uint32_t partition)
{
    if (partition >= s->nparts) return LATTICE_ERR_INVAL;
    struct part *p = &s->parts[partition];
    pthread_mutex_lock(&p->lock);
    store_clear_locked(s, p);
    lattice_store_entry all = {.partition = partition};
    store_note(s, p, LATTICE_STORE_CHANGE_CLEAR, &all, 0);
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
        size_t n = reclaim(s, p, 1, now, max ? max - total : 0);
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

struct pick {
    uint32_t tag;
    uint32_t slot;
};

struct rec {
    uint32_t klen : 24, type : 8; /* keys are at most 65535 bytes: the type fits beside */
    uint32_t vlen;
    uint64_t expire, version;
};

struct lattice_store_cursor {
    lattice_store *s;
    uint32_t part;
    uint64_t from; /* every entry with a smaller tag was returned; TAG_END: done */
    uint8_t *buf;  /* the batch's records, delivered after the walk */
    size_t cap;
    struct pick *picks;
    size_t npicks_cap;
};

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

void lattice_store_cursor_close(lattice_store_cursor *c)
{
    if (!c) return;
    lt_free(c->buf);
    lt_free(c->picks);
    lt_free(c);
}

uint64_t lattice_store_key_position(const void *key, size_t len)
{
    return key_tag(key, len);
}

uint64_t lattice_store_cursor_position(const lattice_store_cursor *c)
{
    return c->from;
}

void lattice_store_cursor_seek(lattice_store_cursor *c, uint64_t position)
{
    c->from = position < TAG_END ? position : TAG_END;
}

static int grow_buf(lattice_store_cursor *c, size_t need)
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

static int push_pick(lattice_store_cursor *c, size_t n, uint32_t tag, uint32_t slot)
{
    if (n == c->npicks_cap) {
        size_t cap = c->npicks_cap ? c->npicks_cap * 2 : 256;
        struct pick *np = lt_realloc(c->picks, cap * sizeof *np);
        if (!np) return 0;
        c->picks = np;
        c->npicks_cap = cap;
    }
    c->picks[n] = (struct pick){tag, slot};
    return 1;
}

/* Step 1: collects into c->picks every live slot of t with from <= tag <
 * *upto, at least `enough` of them unless the tag space ends first.
 * Returns the count, or -1 out of memory.  RCU read lock held. */
static long select_range(lattice_store_cursor *c, const struct ix_table *t, uint64_t from,
                         size_t enough, uint64_t *upto)
{
    uint64_t lim = TAG_END;
    size_t n = 0;
    int cut = 0;
    for (uint32_t i = ix_home(t, (uint32_t)from); i < t->nslots; i++) {
        uint32_t tag = ix_tag_at(t, i);
        if (!cut && n >= enough && i < t->cap) {
            /* Lowest tag with home >= i: ceil(i * 2^32 / cap). */
            lim = (((uint64_t)i << 32) + t->cap - 1) / t->cap;
            cut = 1;
        }
        if (cut && tag == IX_EMPTY) break;
        if (tag <= IX_TOMB || tag < from || tag >= lim) continue;
        if (!push_pick(c, n++, tag, i)) return -1;
    }
    *upto = lim;
    return (long)n;
}

static int pick_cmp(const void *a, const void *b)
{
    uint32_t x = ((const struct pick *)a)->tag, y = ((const struct pick *)b)->tag;
    return (x > y) - (x < y);
}

/* Copies the entry of pick k to c->buf + used: 1 copied (*need = bytes
 * used), 0 skipped (gone or expired), -1 out of memory, STALE when its row
 * does not check out and the table was replaced.  RCU read lock held. */
static int copy_pick(lattice_store_cursor *c, const struct ix_table *t, const struct pick *k,
                     size_t used, size_t *need, uint64_t *now)
{
    lattice_store *s = c->s;
    uint64_t link = ix_link_at(t, k->slot);
    for (;;) {
        struct read_req q = {0};
        if (region_read_entry(s->region, link, &q) != LATTICE_OK) goto moved;
        size_t sz = (sizeof(struct rec) + q.klen + q.vlen + 7) & ~(size_t)7;
        if (!grow_buf(c, used + sz)) return -1;
        uint8_t *base = c->buf + used + sizeof(struct rec);
        size_t klen = q.klen, vlen = q.vlen;
        q = (struct read_req){.kbuf = base, .kcap = klen, .vbuf = base + klen, .vcap = vlen};
        if (region_read_entry(s->region, link, &q) != LATTICE_OK) goto moved;
        if (q.klen != klen || q.vlen != vlen) continue;
        /* A stale link may name a recycled row: the key must have this tag. */
        if (q.owner != s->owner || q.partition != c->part || key_tag(base, klen) != k->tag)
            goto moved;
        if (expired(s, q.expire, now)) return 0;
        struct rec r = {(uint32_t)klen, q.type, (uint32_t)vlen, q.expire, q.version};
        memcpy(c->buf + used, &r, sizeof r);
        *need = sz;
        return 1;
    moved:;
        uint64_t again = ix_link_at(t, k->slot);
        if (again != link) {
            link = again;
            continue;
        }
        if (ix_tag_at(t, k->slot) != k->tag) return 0; /* removed */
        return rcu_dereference(s->tabs[c->part].t) == t ? 0 : STALE;
    }
}

/* One batch from table t: fills c->buf with *count records and sets *next
 * to where the following batch starts.  Ranges are selected SELECT_STEP
 * entries at a time, so a batch cut by max_bytes never sorts more than a
 * step beyond what it returns. */
#define SELECT_STEP 256

static int collect(lattice_store_cursor *c, const struct ix_table *t, size_t max_entries,
                   size_t max_bytes, size_t *count, size_t *used, uint64_t *next)
{
    uint64_t from = c->from, now = 0;
    size_t bytes = 0;
    *count = *used = 0;
    for (;;) {
        uint64_t upto;
        size_t want = max_entries - *count;
        long n = select_range(c, t, from, want < SELECT_STEP ? want : SELECT_STEP, &upto);
        if (n < 0) return LATTICE_ERR_NOMEM;
        if (n > 1) qsort(c->picks, (size_t)n, sizeof *c->picks, pick_cmp);
        for (long k = 0; k < n; k++) {
            /* Stop only between runs of equal tags (and a range never
             * splits one: equal tags share a home slot). */
            if ((*count >= max_entries || (max_bytes && bytes >= max_bytes)) &&
                (k == 0 || c->picks[k].tag != c->picks[k - 1].tag)) {
                *next = c->picks[k].tag;
                return LATTICE_OK;
            }
            size_t need = 0;
            int got = copy_pick(c, t, &c->picks[k], *used, &need, &now);
            if (got == -1) return LATTICE_ERR_NOMEM;
            if (got == STALE) return STALE;
            if (got) {
                const struct rec *r = (const struct rec *)(c->buf + *used);
                bytes += (size_t)r->klen + r->vlen;
                *used += need;
                ++*count;
            }
        }
        *next = upto;
        if (upto == TAG_END || *count >= max_entries || (max_bytes && bytes >= max_bytes))
            return LATTICE_OK;
        from = upto;
    }
}

int lattice_store_cursor_next(lattice_store_cursor *c, size_t max_entries, size_t max_bytes,
                              lattice_store_visit_fn fn, void *arg, int *done)
{
    int dummy;
    if (!done) done = &dummy;
    *done = c->from == TAG_END;
    if (*done) return LATTICE_OK;
    if (!fn) return LATTICE_ERR_INVAL;
    if (max_entries == 0) max_entries = 1;
    size_t count = 0, used = 0;
    uint64_t next = TAG_END;
    int st;
    rcu_read_lock();
    do {
        const struct ix_table *t = rcu_dereference(c->s->tabs[c->part].t);
        st = t ? collect(c, t, max_entries, max_bytes, &count, &used, &next) : LATTICE_OK;
        if (!t) count = 0, next = TAG_END;
    } while (st == STALE);
    rcu_read_unlock();
    if (st != LATTICE_OK) return st; /* position unchanged: the caller may retry */
    c->from = next;
    /* Delivered after the walk, outside the read-side section. */
    for (size_t off = 0, i = 0; i < count; i++) {
        struct rec r;
        memcpy(&r, c->buf + off, sizeof r);
        const uint8_t *k = c->buf + off + sizeof r;
        lattice_store_item item = {c->part, k, r.klen, k + r.klen, r.vlen, r.expire, r.version, r.type};
        fn(arg, &item);
        off += (sizeof r + r.klen + r.vlen + 7) & ~(size_t)7;
    }
    *done = c->from == TAG_END;
    return LATTICE_OK;
}
