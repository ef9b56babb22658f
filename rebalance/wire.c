/*
 * Demand/Supply messages (proto/rebalance.proto): encoding, checked
 * decoding, the supplier's batcher and the demander's applier.
 *
 * Decoding rules (PITFALLS: protobuf-c keeps unknown fields, and unpacks
 * before anyone looked at the length): the length is checked first, then the
 * message is unpacked with the project allocator, then every field a caller
 * relies on is range-checked, and any unknown field rejects the message.
 *
 * The batcher bounds a message by its exact encoded size: it computes each
 * entry's wire size (the same arithmetic protobuf-c does) against a budget
 * of batch_bytes minus the largest header the message can have.
 */
#include <string.h>

#include "lattice/alloc.h"
#include "lattice/log.h"
#include "rebalance.pb-c.h"
#include "rebalance/rebalance.h"

static void *pb_alloc(void *data, size_t n)
{
    (void)data;
    return lt_malloc(n ? n : 1);
}

static void pb_free(void *data, void *p)
{
    (void)data;
    lt_free(p);
}

static ProtobufCAllocator pb_allocator = {.alloc = pb_alloc, .free = pb_free};

static int cache_ok(const char *name)
{
    return name && lattice_cache_config_name_valid(name, NULL, 0);
}

/* ----------------------------------------------------------------- demand */

lattice_status lattice_rebalance_demand_encode(const lattice_rebalance_demand *d, void **buf,
                                               size_t *len)
{
    if (!d || !buf || !len || !cache_ok(d->cache) || !d->partitions || !d->partition_count ||
        d->partition_count > LATTICE_PARTITION_MAX)
        return LATTICE_ERR_INVAL;
    for (size_t i = 0; i < d->partition_count; i++)
        if (d->partitions[i] >= LATTICE_PARTITION_MAX) return LATTICE_ERR_INVAL;
    Latreb__Demand m = LATREB__DEMAND__INIT;
    m.format = LATTICE_REBALANCE_FORMAT;
    m.cache = (char *)d->cache;
    m.topology_major = d->ids.topology_major;
    m.topology_minor = d->ids.topology_minor;
    m.rebalance_id = d->ids.rebalance_id;
    m.session = d->ids.session;
    m.n_partitions = d->partition_count;
    m.partitions = d->partitions;
    m.ack = d->ack;
    m.resume = d->resume;
    m.window = d->window;
    size_t n = latreb__demand__get_packed_size(&m);
    uint8_t *b = lt_malloc(n ? n : 1);
    if (!b) return LATTICE_ERR_NOMEM;
    latreb__demand__pack(&m, b);
    *buf = b;
    *len = n;
    return LATTICE_OK;
}

lattice_status lattice_rebalance_demand_decode(const void *buf, size_t len, size_t max_len,
                                               lattice_rebalance_demand *d)
{
    if (!d || (!buf && len)) return LATTICE_ERR_INVAL;
    memset(d, 0, sizeof *d);
    if (!max_len) max_len = LATTICE_REBALANCE_MAX_MESSAGE;
    if (len > max_len) return LATTICE_ERR_TOO_LARGE;
    Latreb__Demand *m = latreb__demand__unpack(&pb_allocator, len, buf);
    if (!m) return LATTICE_ERR_PROTO;
    lattice_status st = LATTICE_ERR_PROTO;
    if (m->base.n_unknown_fields || m->format != LATTICE_REBALANCE_FORMAT || !cache_ok(m->cache) ||
        !m->n_partitions || m->n_partitions > LATTICE_PARTITION_MAX)
        goto out;
    for (size_t i = 0; i < m->n_partitions; i++)
        if (m->partitions[i] >= LATTICE_PARTITION_MAX) goto out;
    d->partitions = lt_malloc(m->n_partitions * sizeof *d->partitions);
    if (!d->partitions) {
        st = LATTICE_ERR_NOMEM;
        goto out;
    }
    memcpy(d->partitions, m->partitions, m->n_partitions * sizeof *d->partitions);
    d->partition_count = m->n_partitions;
    strcpy(d->cache, m->cache); /* length checked by cache_ok */
    d->ids = (lattice_rebalance_ids){m->topology_major, m->topology_minor, m->rebalance_id,
                                     m->session};
    d->ack = m->ack;
    d->resume = m->resume;
    d->window = m->window;
    st = LATTICE_OK;
out:
    latreb__demand__free_unpacked(m, &pb_allocator);
    return st;
}

void lattice_rebalance_demand_clear(lattice_rebalance_demand *d)
{
    if (!d) return;
    lt_free(d->partitions);
    d->partitions = NULL;
    d->partition_count = 0;
}

/* ----------------------------------------------------------------- supply */

struct lattice_rebalance_supply {
    Latreb__Supply *m;
    uint64_t payload;
};

lattice_status lattice_rebalance_supply_decode(const void *buf, size_t len, size_t max_len,
                                               lattice_rebalance_supply **out)
{
    if (!out || (!buf && len)) return LATTICE_ERR_INVAL;
    if (!max_len) max_len = LATTICE_REBALANCE_MAX_MESSAGE;
    if (len > max_len) return LATTICE_ERR_TOO_LARGE;
    Latreb__Supply *m = latreb__supply__unpack(&pb_allocator, len, buf);
    if (!m) return LATTICE_ERR_PROTO;
    uint64_t payload = 0;
    if (m->base.n_unknown_fields || m->format != LATTICE_REBALANCE_FORMAT || !cache_ok(m->cache) ||
        m->partition >= LATTICE_PARTITION_MAX || m->batch == 0 ||
        m->status >= LATTICE_STATUS_COUNT_)
        goto bad;
    for (size_t i = 0; i < m->n_entries; i++) {
        const Latreb__Entry *e = m->entries[i];
        if (e->base.n_unknown_fields || e->key.len == 0 || e->key.len > LATTICE_STORE_MAX_KEY ||
            e->value.len > LATTICE_STORE_MAX_VALUE)
            goto bad;
        payload += e->key.len + e->value.len;
    }
    lattice_rebalance_supply *s = lt_malloc(sizeof *s);
    if (!s) {
        latreb__supply__free_unpacked(m, &pb_allocator);
        return LATTICE_ERR_NOMEM;
    }
    s->m = m;
    s->payload = payload;
    *out = s;
    return LATTICE_OK;
bad:
    latreb__supply__free_unpacked(m, &pb_allocator);
    return LATTICE_ERR_PROTO;
}

void lattice_rebalance_supply_info_of(const lattice_rebalance_supply *s,
                                      lattice_rebalance_supply_info *info)
{
    const Latreb__Supply *m = s->m;
    *info = (lattice_rebalance_supply_info){
        .cache = m->cache,
        .ids = {m->topology_major, m->topology_minor, m->rebalance_id, m->session},
        .partition = m->partition,
        .batch = m->batch,
        .entries = m->n_entries,
        .payload_bytes = s->payload,
        .last = m->last,
        .update_counter = m->update_counter,
        .status = (lattice_status)m->status,
    };
}

void lattice_rebalance_supply_entry(const lattice_rebalance_supply *s, size_t i,
                                    lattice_store_entry *e)
{
    const Latreb__Entry *m = s->m->entries[i];
    *e = (lattice_store_entry){.partition = s->m->partition, .key = m->key.data,
                               .key_len = m->key.len, .value = m->value.data,
                               .value_len = m->value.len, .expire_ms = m->expire_ms,
                               .version = m->version};
}

void lattice_rebalance_supply_free(lattice_rebalance_supply *s)
{
    if (!s) return;
    latreb__supply__free_unpacked(s->m, &pb_allocator);
    lt_free(s);
}

static void supply_header(Latreb__Supply *m, const char *cache, const lattice_rebalance_ids *ids,
                          uint32_t partition, uint64_t batch)
{
    latreb__supply__init(m);
    m->format = LATTICE_REBALANCE_FORMAT;
    m->cache = (char *)cache;
    m->topology_major = ids->topology_major;
    m->topology_minor = ids->topology_minor;
    m->rebalance_id = ids->rebalance_id;
    m->session = ids->session;
    m->partition = partition;
    m->batch = batch;
}

static lattice_status pack_supply(const Latreb__Supply *m, void **buf, size_t *len)
{
    size_t n = latreb__supply__get_packed_size(m);
    uint8_t *b = lt_malloc(n ? n : 1);
    if (!b) return LATTICE_ERR_NOMEM;
    latreb__supply__pack(m, b);
    *buf = b;
    *len = n;
    return LATTICE_OK;
}

lattice_status lattice_rebalance_supply_encode_refusal(const char *cache,
                                                       const lattice_rebalance_ids *ids,
                                                       uint32_t partition, uint64_t batch,
                                                       lattice_status why, void **buf,
                                                       size_t *len)
{
    if (!cache_ok(cache) || !ids || !buf || !len || partition >= LATTICE_PARTITION_MAX ||
        batch == 0 || why == LATTICE_OK || why >= LATTICE_STATUS_COUNT_)
        return LATTICE_ERR_INVAL;
    Latreb__Supply m;
    supply_header(&m, cache, ids, partition, batch);
    m.last = true;
    m.status = (uint32_t)why;
    return pack_supply(&m, buf, len);
}

/* ---------------------------------------------------------------- batcher */

/* A pending entry in the batcher's arena: header then key and value bytes. */
struct pend {
    uint32_t klen;
    uint32_t vlen;
    uint64_t expire, version;
};

struct lattice_rebalance_batcher {
    lattice_store_cursor *cursor;
    char cache[LATTICE_CACHE_NAME_MAX + 1];
    lattice_rebalance_ids ids;
    uint32_t partition;
    uint64_t limit;
    int cursor_done, finished;
    int oom;              /* an arena allocation failed inside the cursor callback */
    uint8_t *arena;       /* pending entries from `head` to `used` */
    size_t head, used, cap;
    Latreb__Entry *ents;  /* scratch for packing */
    Latreb__Entry **eptr;
    size_t ecap;
};

static size_t varint_size(uint64_t v)
{
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

/* Wire size of an entry inside Supply (field 9: tag, length, body). */
static size_t entry_wire_size(const struct pend *p)
{
    size_t body = 0;
    if (p->klen) body += 1 + varint_size(p->klen) + p->klen;
    if (p->vlen) body += 1 + varint_size(p->vlen) + p->vlen;
    if (p->expire) body += 1 + varint_size(p->expire);
    if (p->version) body += 1 + varint_size(p->version);
    return 1 + varint_size(body) + body;
}

static size_t pend_size(const struct pend *p)
{
    return (sizeof *p + p->klen + p->vlen + 7) & ~(size_t)7;
}

static int collect(void *arg, const lattice_store_item *it)
{
    lattice_rebalance_batcher *b = arg;
    struct pend p = {(uint32_t)it->key_len, (uint32_t)it->value_len, it->expire_ms, it->version};
    size_t need = b->used + pend_size(&p);
    if (need > b->cap) {
        size_t nc = b->cap ? b->cap : 4096;
        while (nc < need) nc *= 2;
        uint8_t *a = lt_realloc(b->arena, nc);
        if (!a) {
            b->oom = 1;
            return 1;
        }
        b->arena = a;
        b->cap = nc;
    }
    memcpy(b->arena + b->used, &p, sizeof p);
    memcpy(b->arena + b->used + sizeof p, it->key, it->key_len);
    if (it->value_len) memcpy(b->arena + b->used + sizeof p + it->key_len, it->value, it->value_len);
    b->used += pend_size(&p);
    return 0;
}

lattice_status lattice_rebalance_batcher_create(lattice_store *store, const char *cache,
                                                const lattice_rebalance_ids *ids,
                                                uint32_t partition, uint64_t batch_bytes,
                                                lattice_rebalance_batcher **out)
{
    if (!store || !cache_ok(cache) || !ids || !out || batch_bytes < LATTICE_REBALANCE_MIN_BATCH ||
        partition >= lattice_store_partitions(store))
        return LATTICE_ERR_INVAL;
    lattice_rebalance_batcher *b = lt_calloc(1, sizeof *b);
    if (!b) return LATTICE_ERR_NOMEM;
    int rc = lattice_store_cursor_open(store, partition, &b->cursor);
    if (rc != LATTICE_OK) {
        lt_free(b);
        return (lattice_status)rc;
    }
    strcpy(b->cache, cache);
    b->ids = *ids;
    b->partition = partition;
    b->limit = batch_bytes;
    *out = b;
    return LATTICE_OK;
}

/* Moves the pending entries to the front of the arena (between batches). */
static void compact(lattice_rebalance_batcher *b)
{
    if (b->head == 0) return;
    memmove(b->arena, b->arena + b->head, b->used - b->head);
    b->used -= b->head;
    b->head = 0;
}

static lattice_status scratch(lattice_rebalance_batcher *b, size_t n)
{
    if (n <= b->ecap) return LATTICE_OK;
    size_t nc = b->ecap ? b->ecap * 2 : 256;
    while (nc < n) nc *= 2;
    Latreb__Entry *e = lt_realloc(b->ents, nc * sizeof *e);
    if (!e) return LATTICE_ERR_NOMEM;
    b->ents = e;
    Latreb__Entry **p = lt_realloc(b->eptr, nc * sizeof *p);
    if (!p) return LATTICE_ERR_NOMEM;
    b->eptr = p;
    b->ecap = nc;
    return LATTICE_OK;
}

/* Pulls more entries from the cursor into the arena (at least one unless the
 * partition is exhausted). */
static lattice_status pull(lattice_rebalance_batcher *b, size_t budget)
{
    int done = 0;
    b->oom = 0;
    int rc = lattice_store_cursor_next(b->cursor, 4096, budget ? budget : 1, collect, b, &done);
    if (rc != LATTICE_OK) return (lattice_status)rc;
    /* The cursor cannot take back entries it handed out: a failed copy
     * would lose an entry, so it fails the whole batcher. */
    if (b->oom) return LATTICE_ERR_NOMEM;
    b->cursor_done = done;
    return LATTICE_OK;
}

lattice_status lattice_rebalance_batcher_next(lattice_rebalance_batcher *b, uint64_t batch,
                                              uint64_t counter, void **buf, size_t *len,
                                              bool *last, size_t *entries)
{
    if (!b || !buf || !len || !last || batch == 0 || b->finished || b->oom)
        return LATTICE_ERR_INVAL;
    Latreb__Supply m;
    supply_header(&m, b->cache, &b->ids, b->partition, batch);
    m.last = true;
    m.update_counter = UINT64_MAX;
    size_t header = latreb__supply__get_packed_size(&m);
    size_t size = header;
    compact(b);
    size_t off = 0, n = 0;
    bool is_last = false;
    for (;;) {
        if (off == b->used) {
            if (b->cursor_done) {
                is_last = true;
                break;
            }
            lattice_status st = pull(b, size < b->limit ? b->limit - size : 1);
            if (st != LATTICE_OK) return st;
            continue;
        }
        struct pend p;
        memcpy(&p, b->arena + off, sizeof p);
        size_t es = entry_wire_size(&p);
        if (n > 0 && size + es > b->limit) break;
        size += es;
        off += pend_size(&p);
        n++;
    }
    lattice_status st = scratch(b, n);
    if (st != LATTICE_OK) return st;
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        struct pend p;
        memcpy(&p, b->arena + o, sizeof p);
        Latreb__Entry *e = &b->ents[i];
        latreb__entry__init(e);
        e->key.data = b->arena + o + sizeof p;
        e->key.len = p.klen;
        e->value.data = b->arena + o + sizeof p + p.klen;
        e->value.len = p.vlen;
        e->expire_ms = p.expire;
        e->version = p.version;
        b->eptr[i] = e;
        o += pend_size(&p);
    }
    m.n_entries = n;
    m.entries = b->eptr;
    m.last = is_last;
    m.update_counter = is_last ? counter : 0;
    st = pack_supply(&m, buf, len);
    if (st != LATTICE_OK) return st;
    b->head = off;
    b->finished = is_last;
    *last = is_last;
    if (entries) *entries = n;
    return LATTICE_OK;
}

void lattice_rebalance_batcher_free(lattice_rebalance_batcher *b)
{
    if (!b) return;
    lattice_store_cursor_close(b->cursor);
    lt_free(b->arena);
    lt_free(b->ents);
    lt_free(b->eptr);
    lt_free(b);
}

/* ---------------------------------------------------------------- applier */

enum { PART_IDLE = 0, PART_LOADING = 1, PART_DONE = 2 };

struct lattice_rebalance_applier {
    lattice_store *store;
    char cache[LATTICE_CACHE_NAME_MAX + 1];
    lattice_rebalance_ids ids;
    lattice_rebalance_progress *progress;
    uint8_t *state;        /* per partition: PART_* */
    uint32_t partitions, pending;
    lattice_store_entry *ents;
    size_t ecap;
};

lattice_status lattice_rebalance_applier_create(lattice_store *store, const char *cache,
                                                const lattice_rebalance_ids *ids,
                                                lattice_rebalance_progress *progress,
                                                lattice_rebalance_applier **out)
{
    if (!store || !cache_ok(cache) || !ids || !out) return LATTICE_ERR_INVAL;
    lattice_rebalance_applier *a = lt_calloc(1, sizeof *a);
    if (!a) return LATTICE_ERR_NOMEM;
    a->partitions = lattice_store_partitions(store);
    a->state = lt_calloc(a->partitions, 1);
    if (!a->state) {
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
    for (size_t i = 0; i < in.entries; i++) lattice_rebalance_supply_entry(s, i, &a->ents[i]);
    size_t applied = 0;
    if (in.entries) {
        int rc = lattice_store_insert_batch(a->store, in.partition, a->ents, in.entries,
                                            LATTICE_STORE_IF_NEWER, &applied);
        if (rc != LATTICE_OK) return (lattice_status)rc;
    }
    r->verdict = LATTICE_REBALANCE_APPLIED;
    r->applied = applied;
    r->skipped = in.entries - applied;
    if (a->progress) {
        a->progress->entries_received += in.entries;
        a->progress->bytes_received += in.payload_bytes;
    }
    if (in.last) {
        a->state[in.partition] = PART_DONE;
        a->pending--;
        r->partition_done = true;
        r->update_counter = in.update_counter;
        if (a->progress) {
            a->progress->partitions_moving--;
            a->progress->partitions_done++;
        }
    }
    return LATTICE_OK;
}

uint32_t lattice_rebalance_applier_pending(const lattice_rebalance_applier *a)
{
    return a->pending;
}

void lattice_rebalance_applier_free(lattice_rebalance_applier *a)
{
    if (!a) return;
    lt_free(a->state);
    lt_free(a->ents);
    lt_free(a);
}
