/*
 * Demand/Supply messages (proto/rebalance.proto): encoding, checked
 * decoding and the supplier's batcher.  The demander's applier: apply.c.
 *
 * Decoding rules (protobuf-c 1.4 keeps unknown fields, and unpacks
 * before anyone looked at the length): the length is checked first, then the
 * message is unpacked with the project allocator, then every field a caller
 * relies on is range-checked, and any unknown field rejects the message.
 *
 * The batcher bounds a message by its exact encoded size: it computes each
 * entry's wire size (the same arithmetic protobuf-c does) against a budget
 * of batch_bytes minus the largest header the message can have.
 */
#include <string.h>

#include "base/base.h"
#include "lattice/alloc.h"
#include "rebalance.pb-c.h"
#include "rebalance/rebalance.h"

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
    Latreb__DeltaBase *db = d->delta_count ? lt_calloc(d->delta_count, sizeof *db) : NULL;
    Latreb__DeltaBase **dp = d->delta_count ? lt_calloc(d->delta_count, sizeof *dp) : NULL;
    ProtobufCBinaryData *kb = NULL;
    size_t nk = 0;
    for (size_t i = 0; i < d->delta_count; i++) nk += d->deltas[i].key_count;
    kb = nk ? lt_calloc(nk, sizeof *kb) : NULL;
    if ((d->delta_count && (!db || !dp)) || (nk && !kb)) {
        lt_free(db);
        lt_free(dp);
        lt_free(kb);
        return LATTICE_ERR_NOMEM;
    }
    for (size_t i = 0, k = 0; i < d->delta_count; i++) {
        latreb__delta_base__init(&db[i]);
        db[i].partition = d->deltas[i].partition;
        db[i].mark = d->deltas[i].mark;
        db[i].n_keys = d->deltas[i].key_count;
        db[i].keys = kb + k;
        for (size_t j = 0; j < d->deltas[i].key_count; j++, k++)
            kb[k] = (ProtobufCBinaryData){d->deltas[i].keys[j].len, d->deltas[i].keys[j].data};
        dp[i] = &db[i];
    }
    m.n_delta = d->delta_count;
    m.delta = dp;
    size_t n = latreb__demand__get_packed_size(&m);
    uint8_t *b = lt_malloc(n ? n : 1);
    if (b) latreb__demand__pack(&m, b);
    lt_free(db);
    lt_free(dp);
    lt_free(kb);
    if (!b) return LATTICE_ERR_NOMEM;
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
    Latreb__Demand *m = latreb__demand__unpack(&lt_pb_allocator, len, buf);
    if (!m) return LATTICE_ERR_PROTO;
    lattice_status st = LATTICE_ERR_PROTO;
    if (!lt_pb_no_unknown_fields(&m->base) || m->format != LATTICE_REBALANCE_FORMAT || !cache_ok(m->cache) ||
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
    if (m->n_delta > m->n_partitions) goto out_clear;
    if (m->n_delta) {
        d->deltas = lt_calloc(m->n_delta, sizeof *d->deltas);
        if (!d->deltas) {
            st = LATTICE_ERR_NOMEM;
            goto out_clear;
        }
    }
    for (size_t i = 0; i < m->n_delta; i++) {
        const Latreb__DeltaBase *x = m->delta[i];
        if (!lt_pb_no_unknown_fields(&x->base) || x->partition >= LATTICE_PARTITION_MAX ||
            x->n_keys > LATTICE_REBALANCE_MAX_DELTA_KEYS)
            goto out_clear;
        lattice_rebalance_delta_base *y = &d->deltas[d->delta_count++];
        y->partition = x->partition;
        y->mark = x->mark;
        y->keys = x->n_keys ? lt_calloc(x->n_keys, sizeof *y->keys) : NULL;
        if (x->n_keys && !y->keys) {
            st = LATTICE_ERR_NOMEM;
            goto out_clear;
        }
        for (size_t k = 0; k < x->n_keys; k++) {
            if (!x->keys[k].len || x->keys[k].len > LATTICE_STORE_MAX_KEY) goto out_clear;
            y->keys[k].data = lt_malloc(x->keys[k].len);
            if (!y->keys[k].data) {
                st = LATTICE_ERR_NOMEM;
                goto out_clear;
            }
            memcpy(y->keys[k].data, x->keys[k].data, x->keys[k].len);
            y->keys[k].len = x->keys[k].len;
            y->key_count++;
        }
    }
    st = LATTICE_OK;
    goto out;
out_clear:
    lattice_rebalance_demand_clear(d);
out:
    latreb__demand__free_unpacked(m, &lt_pb_allocator);
    return st;
}

void lattice_rebalance_demand_clear(lattice_rebalance_demand *d)
{
    if (!d) return;
    lt_free(d->partitions);
    d->partitions = NULL;
    d->partition_count = 0;
    for (size_t i = 0; i < d->delta_count; i++) {
        for (size_t k = 0; k < d->deltas[i].key_count; k++) lt_free(d->deltas[i].keys[k].data);
        lt_free(d->deltas[i].keys);
    }
    lt_free(d->deltas);
    d->deltas = NULL;
    d->delta_count = 0;
}

const lattice_rebalance_delta_base *lattice_rebalance_demand_delta(const lattice_rebalance_demand *d, uint32_t p)
{
    for (size_t i = 0; d && i < d->delta_count; i++)
        if (d->deltas[i].partition == p) return &d->deltas[i];
    return NULL;
}

/* ----------------------------------------------------------------- supply */

size_t lattice_rebalance_max_supply_bytes(const lattice_cache_config *c)
{
    /* Header (cache name, ids, counter) and an entry's tags and varints. */
    uint64_t framing = 256 + LATTICE_CACHE_NAME_MAX;
    uint64_t lone = c->max_key_bytes + c->max_value_bytes + framing;
    uint64_t n = c->rebalance_batch_bytes > lone ? c->rebalance_batch_bytes : lone;
    return n > SIZE_MAX ? SIZE_MAX : (size_t)n;
}

/*
 * Supply is decoded by hand, without copies: protobuf-c's unpacker allocates
 * every Entry and copies every key and value (15 us of the 22 us a 100-entry
 * message of small rows cost the demander; docs/BENCHMARKS.md), while the
 * applier only needs pointers for the batch insert.  The parser follows the
 * protobuf wire format exactly as protobuf-c accepts it (any field order,
 * later scalars win, varints of at most 10 bytes) and is stricter: unknown
 * field numbers, wrong wire types and uint32 fields above 2^32-1 are
 * rejected.  Tests check it against protobuf-c's unpacker on mutated input.
 */
struct view_entry {
    const uint8_t *key, *value;
    uint32_t klen, vlen;
    uint64_t expire, version;
    bool removed;
    uint8_t type;         /* field 7, absent = 0 (a string) */
};

struct lattice_rebalance_supply {
    char cache[LATTICE_CACHE_NAME_MAX + 1];
    lattice_rebalance_ids ids;
    uint32_t partition, status;
    uint64_t batch, update_counter, payload;
    bool last, delta;
    struct view_entry *e;
    size_t n, cap;
};

struct rd {
    const uint8_t *p, *end;
};

static inline int rd_varint(struct rd *r, uint64_t *v)
{
    /* Most varints here (tags, lengths of small rows, flags) are one byte. */
    if (r->p < r->end && !(*r->p & 0x80)) {
        *v = *r->p++;
        return 0;
    }
    uint64_t x = 0;
    for (int shift = 0; shift < 70; shift += 7) {
        if (r->p == r->end) return -1;
        uint8_t b = *r->p++;
        if (shift == 63 && b > 1) return -1;
        x |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *v = x;
            return 0;
        }
    }
    return -1;
}

static int rd_u32(struct rd *r, uint32_t *v)
{
    uint64_t x;
    if (rd_varint(r, &x) || x > UINT32_MAX) return -1;
    *v = (uint32_t)x;
    return 0;
}

static int rd_bytes(struct rd *r, const uint8_t **data, size_t *len)
{
    uint64_t n;
    if (rd_varint(r, &n) || n > (uint64_t)(r->end - r->p)) return -1;
    *data = r->p;
    *len = (size_t)n;
    r->p += n;
    return 0;
}

/* Reads a tag; -1 for a field number or wire type we do not accept. */
static int rd_tag(struct rd *r, uint32_t *field, uint32_t *wt)
{
    uint64_t t;
    if (rd_varint(r, &t) || t > UINT32_MAX) return -1;
    *field = (uint32_t)(t >> 3);
    *wt = (uint32_t)(t & 7);
    return 0;
}

static int parse_entry(struct rd *r, struct view_entry *e)
{
    memset(e, 0, sizeof *e);
    while (r->p < r->end) {
        uint32_t f, wt;
        const uint8_t *d;
        size_t n;
        if (rd_tag(r, &f, &wt)) return -1;
        if ((f == 1 || f == 2) && wt == 2) {
            if (rd_bytes(r, &d, &n)) return -1;
            if (f == 1) {
                if (n > LATTICE_STORE_MAX_KEY) return -1;
                e->key = d, e->klen = (uint32_t)n;
            } else {
                if (n > LATTICE_STORE_MAX_VALUE) return -1;
                e->value = d, e->vlen = (uint32_t)n;
            }
        } else if ((f == 3 || f == 4) && wt == 0) {
            if (rd_varint(r, f == 3 ? &e->expire : &e->version)) return -1;
        } else if (f == 5 && wt == 0) {
            uint64_t v;
            if (rd_varint(r, &v)) return -1;
            e->removed = v != 0;
        } else if (f == 7 && wt == 0) {
            /* A type this build cannot keep in a row is refused with the
             * message, as a field it does not know would be. */
            uint64_t v;
            if (rd_varint(r, &v) || v > LATTICE_STORE_TYPE_MAX) return -1;
            e->type = (uint8_t)v;
        } else {
            return -1;
        }
    }
    return e->klen ? 0 : -1;
}

static int add_entry(lattice_rebalance_supply *s, const uint8_t *d, size_t n)
{
    if (s->n == s->cap) {
        size_t nc = s->cap ? s->cap * 2 : 128;
        struct view_entry *e = lt_realloc(s->e, nc * sizeof *e);
        if (!e) return -2;
        s->e = e;
        s->cap = nc;
    }
    struct rd r = {d, d + n};
    if (parse_entry(&r, &s->e[s->n])) return -1;
    s->payload += s->e[s->n].klen + s->e[s->n].vlen;
    s->n++;
    return 0;
}

/* 0 ok, -1 malformed, -2 out of memory. */
static int parse_supply(struct rd *r, lattice_rebalance_supply *s, uint32_t *format)
{
    bool have_cache = false;
    while (r->p < r->end) {
        uint32_t f, wt;
        const uint8_t *d;
        size_t n;
        uint64_t v;
        if (rd_tag(r, &f, &wt)) return -1;
        if (f == 2 || f == 9) {
            if (wt != 2 || rd_bytes(r, &d, &n)) return -1;
            if (f == 9) {
                int rc = add_entry(s, d, n);
                if (rc) return rc;
            } else {
                if (n == 0 || n > LATTICE_CACHE_NAME_MAX) return -1;
                memcpy(s->cache, d, n);
                s->cache[n] = 0;
                have_cache = true;
            }
            continue;
        }
        if (wt != 0 || f == 0 || f > 13) return -1;
        switch (f) {
        case 1: if (rd_u32(r, format)) return -1; break;
        case 3: if (rd_varint(r, &s->ids.topology_major)) return -1; break;
        case 4: if (rd_varint(r, &s->ids.topology_minor)) return -1; break;
        case 5: if (rd_varint(r, &s->ids.rebalance_id)) return -1; break;
        case 6: if (rd_u32(r, &s->ids.session)) return -1; break;
        case 7: if (rd_u32(r, &s->partition)) return -1; break;
        case 8: if (rd_varint(r, &s->batch)) return -1; break;
        case 10: if (rd_varint(r, &v)) return -1; s->last = v != 0; break;
        case 11: if (rd_varint(r, &s->update_counter)) return -1; break;
        case 12: if (rd_u32(r, &s->status)) return -1; break;
        case 13: if (rd_varint(r, &v)) return -1; s->delta = v != 0; break;
        default: return -1;
        }
    }
    return have_cache ? 0 : -1;
}

lattice_status lattice_rebalance_supply_decode(const void *buf, size_t len, size_t max_len,
                                               lattice_rebalance_supply **out)
{
    if (!out || (!buf && len)) return LATTICE_ERR_INVAL;
    if (!max_len) max_len = LATTICE_REBALANCE_MAX_MESSAGE;
    if (len > max_len) return LATTICE_ERR_TOO_LARGE;
    lattice_rebalance_supply *s = lt_calloc(1, sizeof *s);
    if (!s) return LATTICE_ERR_NOMEM;
    struct rd r = {buf, (const uint8_t *)buf + len};
    uint32_t format = 0;
    int rc = parse_supply(&r, s, &format);
    if (rc == -2) {
        lattice_rebalance_supply_free(s);
        return LATTICE_ERR_NOMEM;
    }
    if (rc || format != LATTICE_REBALANCE_FORMAT || !cache_ok(s->cache) ||
        s->partition >= LATTICE_PARTITION_MAX || s->batch == 0 ||
        s->status >= LATTICE_STATUS_COUNT_) {
        lattice_rebalance_supply_free(s);
        return LATTICE_ERR_PROTO;
    }
    *out = s;
    return LATTICE_OK;
}

void lattice_rebalance_supply_info_of(const lattice_rebalance_supply *s,
                                      lattice_rebalance_supply_info *info)
{
    *info = (lattice_rebalance_supply_info){
        .cache = s->cache,
        .ids = s->ids,
        .partition = s->partition,
        .batch = s->batch,
        .entries = s->n,
        .payload_bytes = s->payload,
        .last = s->last,
        .update_counter = s->update_counter,
        .status = (lattice_status)s->status,
        .delta = s->delta,
    };
}

bool lattice_rebalance_supply_entry_removed(const lattice_rebalance_supply *s, size_t i)
{
    return i < s->n && s->e[i].removed;
}

void lattice_rebalance_supply_entry(const lattice_rebalance_supply *s, size_t i,
                                    lattice_store_entry *e)
{
    const struct view_entry *v = &s->e[i];
    *e = (lattice_store_entry){.partition = s->partition, .key = v->key, .key_len = v->klen,
                               .value = v->vlen ? v->value : (const void *)"",
                               .value_len = v->vlen, .expire_ms = v->expire,
                               .version = v->version, .type = v->type};
}

void lattice_rebalance_supply_free(lattice_rebalance_supply *s)
{
    if (!s) return;
    lt_free(s->e);
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
    uint32_t removed;     /* delta: a removal */
    uint32_t type;        /* the value's type (0: a string, not sent) */
};

struct lattice_rebalance_batcher {
    lattice_store_cursor *cursor;
    char cache[LATTICE_CACHE_NAME_MAX + 1];
    lattice_rebalance_ids ids;
    uint32_t partition;
    uint64_t limit;
    int cursor_done, finished;
    bool delta;           /* create_delta: the arena holds the whole delta, no cursor */
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
    if (p->removed) body += 2;
    if (p->type) body += 1 + varint_size(p->type);
    return 1 + varint_size(body) + body;
}

static size_t pend_size(const struct pend *p)
{
    return (sizeof *p + p->klen + p->vlen + 7) & ~(size_t)7;
}

static int collect(void *arg, const lattice_store_item *it)
{
    lattice_rebalance_batcher *b = arg;
    /* After a failed copy keep nothing more: a later entry stored after a
     * lost one would hide the loss. */
    if (b->oom) return 1;
    struct pend p = {(uint32_t)it->key_len, (uint32_t)it->value_len, it->expire_ms, it->version, 0, it->type};
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
    m.delta = b->delta;
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
        e->removed = p.removed != 0;
        e->type = p.type;
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
    if (b->cursor) lattice_store_cursor_close(b->cursor);
    lt_free(b->arena);
    lt_free(b->ents);
    lt_free(b->eptr);
    lt_free(b);
}

/* ------------------------------------------------------------ delta batcher */

/* The delta's keys: a small open-addressing set, each key with the highest
 * counter the history gave it (0: listed by the demander only). */
struct dkey {
    const uint8_t *ext; /* a listed key (the demand's bytes), or NULL: at off in the set's arena */
    size_t off;
    uint32_t len;
    uint64_t counter;
    bool used;
};

struct dset {
    struct dkey *t;
    size_t cap, n;
    uint8_t *keys;      /* copies of the history's keys */
    size_t used, kcap;
    bool oom;
};

static uint64_t dhash(const void *k, size_t n)
{
    return lt_fnv1a(k, n);
}

static const uint8_t *dkey_of(const struct dset *s, const struct dkey *k)
{
    return k->ext ? k->ext : s->keys + k->off;
}

static int dset_add(struct dset *s, const void *key, size_t len, uint64_t counter, bool copy)
{
    if (s->oom) return 1;
    if ((s->n + 1) * 2 > s->cap) {
        size_t nc = s->cap ? s->cap * 2 : 64;
        struct dkey *t = lt_calloc(nc, sizeof *t);
        if (!t) {
            s->oom = true;
            return 1;
        }
        for (size_t i = 0; i < s->cap; i++) {
            if (!s->t[i].used) continue;
            size_t j = dhash(dkey_of(s, &s->t[i]), s->t[i].len) & (nc - 1);
            while (t[j].used) j = (j + 1) & (nc - 1);
            t[j] = s->t[i];
        }
        lt_free(s->t);
        s->t = t;
        s->cap = nc;
    }
    size_t j = dhash(key, len) & (s->cap - 1);
    while (s->t[j].used) {
        if (s->t[j].len == len && memcmp(dkey_of(s, &s->t[j]), key, len) == 0) {
            if (counter > s->t[j].counter) s->t[j].counter = counter;
            return 0;
        }
        j = (j + 1) & (s->cap - 1);
    }
    const uint8_t *ext = copy ? NULL : key;
    size_t off = s->used;
    if (copy) {
        /* Offsets, not pointers: the arena may move while keys are added. */
        if (s->used + len > s->kcap) {
            size_t nc = s->kcap ? s->kcap * 2 : 4096;
            while (nc < s->used + len) nc *= 2;
            uint8_t *a = lt_realloc(s->keys, nc);
            if (!a) {
                s->oom = true;
                return 1;
            }
            s->keys = a;
            s->kcap = nc;
        }
        memcpy(s->keys + s->used, key, len);
        s->used += len;
    }
    s->t[j] = (struct dkey){ext, off, (uint32_t)len, counter, true};
    s->n++;
    return 0;
}

static int hist_key(void *arg, const void *key, size_t key_len, uint64_t counter, bool removed)
{
    (void)removed;
    return dset_add(arg, key, key_len, counter, true);
}

lattice_status lattice_rebalance_delta_base_of(lattice_store *store, uint32_t partition, uint64_t mark,
                                               lattice_rebalance_delta_base *out)
{
    if (!store || !out || partition >= lattice_store_partitions(store)) return LATTICE_ERR_INVAL;
    *out = (lattice_rebalance_delta_base){partition, mark, NULL, 0};
    struct dset ks = {0};
    int rc = lattice_store_history_above(store, partition, mark, true, hist_key, &ks);
    lattice_status st = rc != LATTICE_OK || ks.n > LATTICE_REBALANCE_MAX_DELTA_KEYS ? LATTICE_ERR_NOT_FOUND
                        : ks.oom                                               ? LATTICE_ERR_NOMEM
                                                                               : LATTICE_OK;
    lattice_rebalance_key *keys = st == LATTICE_OK && ks.n ? lt_calloc(ks.n, sizeof *keys) : NULL;
    if (st == LATTICE_OK && ks.n && !keys) st = LATTICE_ERR_NOMEM;
    size_t n = 0;
    for (size_t i = 0; st == LATTICE_OK && i < ks.cap; i++) {
        const struct dkey *k = &ks.t[i];
        if (!k->used) continue;
        if (!(keys[n].data = lt_malloc(k->len ? k->len : 1))) {
            st = LATTICE_ERR_NOMEM;
            break;
        }
        memcpy(keys[n].data, dkey_of(&ks, k), k->len);
        keys[n++].len = k->len;
    }
    lt_free(ks.t);
    lt_free(ks.keys);
    if (st != LATTICE_OK) {
        for (size_t i = 0; i < n; i++) lt_free(keys[i].data);
        lt_free(keys);
        return st;
    }
    out->keys = keys;
    out->key_count = n;
    return LATTICE_OK;
}

/* Appends one entry to the arena (the batcher's pend layout). */
static int arena_put(lattice_rebalance_batcher *b, const struct pend *p, const void *key, const void *value)
{
    size_t need = b->used + pend_size(p);
    if (need > b->cap) {
        size_t nc = b->cap ? b->cap : 4096;
        while (nc < need) nc *= 2;
        uint8_t *a = lt_realloc(b->arena, nc);
        if (!a) return -1;
        b->arena = a;
        b->cap = nc;
    }
    memcpy(b->arena + b->used, p, sizeof *p);
    memcpy(b->arena + b->used + sizeof *p, key, p->klen);
    if (p->vlen) memcpy(b->arena + b->used + sizeof *p + p->klen, value, p->vlen);
    b->used += pend_size(p);
    return 0;
}

lattice_status lattice_rebalance_batcher_create_delta(lattice_store *store, const char *cache,
                                                      const lattice_rebalance_ids *ids, uint32_t partition,
                                                      uint64_t batch_bytes, uint64_t counter,
                                                      const lattice_rebalance_delta_base *base,
                                                      lattice_rebalance_batcher **out)
{
    if (!store || !cache_ok(cache) || !ids || !out || !base || batch_bytes < LATTICE_REBALANCE_MIN_BATCH ||
        partition >= lattice_store_partitions(store) || base->partition != partition)
        return LATTICE_ERR_INVAL;
    if (counter < base->mark) return LATTICE_ERR_NOT_FOUND; /* not the lineage the mark counts in */
    struct dset ks = {0};
    int rc = lattice_store_history_above(store, partition, base->mark, true, hist_key, &ks);
    lattice_status st = rc == LATTICE_OK ? LATTICE_OK : LATTICE_ERR_NOT_FOUND;
    if (st == LATTICE_OK && ks.oom) st = LATTICE_ERR_NOMEM;
    for (size_t i = 0; st == LATTICE_OK && i < base->key_count; i++)
        if (dset_add(&ks, base->keys[i].data, base->keys[i].len, 0, false)) st = LATTICE_ERR_NOMEM;
    lattice_rebalance_batcher *b = st == LATTICE_OK ? lt_calloc(1, sizeof *b) : NULL;
    if (st == LATTICE_OK && !b) st = LATTICE_ERR_NOMEM;
    for (size_t i = 0; st == LATTICE_OK && i < ks.cap; i++) {
        const struct dkey *k = &ks.t[i];
        if (!k->used) continue;
        void *v = NULL;
        lattice_store_meta meta = {0};
        const uint8_t *kb = dkey_of(&ks, k);
        int g = lattice_store_get_copy(store, partition, kb, k->len, &v, &meta);
        struct pend p = {k->len, 0, 0, 0, 0, 0};
        if (g == LATTICE_OK) {
            p.vlen = (uint32_t)meta.value_len;
            p.expire = meta.expire_ms;
            p.version = meta.version;
            p.type = meta.type;
        } else if (g == LATTICE_ERR_NOT_FOUND) {
            if (!k->counter) continue; /* listed only, absent here: the demander dropped it already */
            p.removed = 1;
            p.version = k->counter;
        } else {
            st = (lattice_status)g;
            break;
        }
        if (arena_put(b, &p, kb, v)) st = LATTICE_ERR_NOMEM;
        lt_free(v);
    }
    lt_free(ks.t);
    lt_free(ks.keys);
    if (st != LATTICE_OK) {
        lattice_rebalance_batcher_free(b);
        return st;
    }
    strcpy(b->cache, cache);
    b->ids = *ids;
    b->partition = partition;
    b->limit = batch_bytes;
    b->cursor_done = 1;
    b->delta = true;
    *out = b;
    return LATTICE_OK;
}
