/*
 * coord: the coordinator's transaction state (txn.h) - its keys, each with
 * what the transaction read (the watch: mode, version, epoch; the value, for
 * a repeated read) and what it wrote (buffered until the commit), found
 * through a small open-addressing index; and the ops that read and commit.
 */
#include "txn.h"

#include <stdio.h>
#include <string.h>

#include "lattice/alloc.h"
#include "lattice/txn.h"
#include "partition/partition.h"

typedef struct txk {
    uint8_t *key;
    size_t key_len;
    /* read: a watch the commit carries */
    bool read, read_found;
    uint8_t mode;
    uint64_t version, epoch;
    uint8_t *rval;
    size_t rlen;
    uint64_t rexpire; /* the value read's absolute expiry (0 none) and type */
    uint8_t rtype;
    /* written: the commit applies it */
    bool written, removed;
    uint8_t *wval;
    size_t wlen;
    uint64_t wexpire; /* a write's absolute expiry (0 none) and type: lt_txc_write_as */
    uint8_t wtype;
} txk;

struct lt_txc {
    char *cache, *label;
    uint64_t deadline;
    lt_txc_state state;
    txk *k;
    size_t n, cap;
    uint32_t *ix; /* slots of k + 1 (0 empty), ix_cap a power of two */
    size_t ix_cap;
    int slot; /* of every key; -1 none yet */
    bool across; /* keys of any slot may join (lt_txc_across) */
    bool any_type; /* reads take values of any type (lt_txc_any_type) */
    size_t n_read, n_written;
    /* the last op built: its payload and the parts it points into */
    uint8_t *payload;
    size_t payload_cap;
    lattice_op *ops;
    size_t ops_cap;
    lattice_txn_watch *w;
    size_t w_cap;
};

static uint64_t hash_key(const void *key, size_t len)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < len; i++) h = (h ^ ((const uint8_t *)key)[i]) * 1099511628211ull;
    return h;
}

static char *dup_str(const char *s)
{
    size_t n = strlen(s);
    char *p = lt_malloc(n + 1);
    if (p) memcpy(p, s, n + 1);
    return p;
}

static bool dup_bytes(uint8_t **dst, const void *src, size_t n)
{
    uint8_t *p = lt_malloc(n ? n : 1);
    if (!p) return false;
    if (n) memcpy(p, src, n);
    *dst = p;
    return true;
}

lattice_status lt_txc_new(const char *cache, uint64_t deadline_ms, const char *label, lt_txc **out)
{
    *out = NULL;
    lt_txc *t = lt_calloc(1, sizeof *t);
    if (!t) return LATTICE_ERR_NOMEM;
    t->cache = dup_str(cache ? cache : "default");
    t->label = dup_str(label ? label : "");
    t->deadline = deadline_ms;
    t->slot = -1;
    if (!t->cache || !t->label) {
        lt_txc_free(t);
        return LATTICE_ERR_NOMEM;
    }
    *out = t;
    return LATTICE_OK;
}

void lt_txc_free(lt_txc *t)
{
    if (!t) return;
    for (size_t i = 0; i < t->n; i++) {
        lt_free(t->k[i].key);
        lt_free(t->k[i].rval);
        lt_free(t->k[i].wval);
    }
    lt_free(t->k);
    lt_free(t->ix);
    lt_free(t->payload);
    lt_free(t->ops);
    lt_free(t->w);
    lt_free(t->cache);
    lt_free(t->label);
    lt_free(t);
}

const char *lt_txc_cache(const lt_txc *t) { return t->cache; }
const char *lt_txc_label(const lt_txc *t) { return t->label; }
lt_txc_state lt_txc_state_of(const lt_txc *t) { return t->state; }
size_t lt_txc_reads(const lt_txc *t) { return t->n_read; }
size_t lt_txc_writes(const lt_txc *t) { return t->n_written; }

lattice_status lt_txc_check(lt_txc *t, uint64_t now_ms)
{
    if (t->state != LT_TXC_ACTIVE) return LATTICE_ERR_STOPPED;
    if (t->deadline && now_ms >= t->deadline) {
        t->state = LT_TXC_ENDED;
        return LATTICE_ERR_TIMEOUT;
    }
    return LATTICE_OK;
}

/* ---- the key index ---- */

static txk *find(const lt_txc *t, const void *key, size_t len)
{
    if (!t->ix_cap) return NULL;
    for (size_t j = hash_key(key, len) & (t->ix_cap - 1);; j = (j + 1) & (t->ix_cap - 1)) {
        uint32_t x = t->ix[j];
        if (!x) return NULL;
        txk *k = &t->k[x - 1];
        if (k->key_len == len && (!len || !memcmp(k->key, key, len))) return k;
    }
}

static bool ix_grow(lt_txc *t)
{
    size_t cap = t->ix_cap ? t->ix_cap * 2 : 16;
    uint32_t *ix = lt_calloc(cap, sizeof *ix);
    if (!ix) return false;
    for (size_t i = 0; i < t->n; i++) {
        size_t j = hash_key(t->k[i].key, t->k[i].key_len) & (cap - 1);
        while (ix[j]) j = (j + 1) & (cap - 1);
        ix[j] = (uint32_t)(i + 1);
    }
    lt_free(t->ix);
    t->ix = ix;
    t->ix_cap = cap;
    return true;
}

/* The key's slot may join the transaction's: UNSUPPORTED when it is another. */
static lattice_status slot_ok(const lt_txc *t, const void *key, size_t len)
{
    return t->across || t->slot < 0 || lattice_partition_key_slot(key, len) == (uint16_t)t->slot
               ? LATTICE_OK
               : LATTICE_ERR_UNSUPPORTED;
}

/* The key's entry, added when new (NULL: no memory, or UNSUPPORTED in *st). */
static txk *entry(lt_txc *t, const void *key, size_t len, lattice_status *st)
{
    txk *k = find(t, key, len);
    if (k) return k;
    if ((*st = slot_ok(t, key, len)) != LATTICE_OK) return NULL;
    *st = LATTICE_ERR_NOMEM;
    if (t->n >= UINT32_MAX - 1) return NULL;
    if (t->n == t->cap) {
        size_t nc = t->cap ? t->cap * 2 : 8;
        txk *p = lt_realloc(t->k, nc * sizeof *p);
        if (!p) return NULL;
        t->k = p;
        t->cap = nc;
    }
    if ((t->n + 1) * 2 > t->ix_cap && !ix_grow(t)) return NULL;
    k = &t->k[t->n];
    memset(k, 0, sizeof *k);
    if (!dup_bytes(&k->key, key, len)) return NULL;
    k->key_len = len;
    size_t j = hash_key(key, len) & (t->ix_cap - 1);
    while (t->ix[j]) j = (j + 1) & (t->ix_cap - 1);
    t->ix[j] = (uint32_t)(t->n + 1);
    t->n++;
    if (t->slot < 0) t->slot = lattice_partition_key_slot(key, len);
    *st = LATTICE_OK;
    return k;
}

/* ---- reads ---- */

int lt_txc_local_get(const lt_txc *t, const void *key, size_t key_len, bool *found, const void **value,
                     size_t *value_len)
{
    const txk *k = find(t, key, key_len);
    if (!k || (!k->written && !k->read)) return 0;
    bool f = k->written ? !k->removed : k->read_found;
    *found = f;
    *value = f ? (k->written ? k->wval : k->rval) : NULL;
    *value_len = f ? (k->written ? k->wlen : k->rlen) : 0;
    return 1;
}

/* Room for the op's parts: n ops, nw watches, a payload of bytes. */
static bool scratch(lt_txc *t, size_t n, size_t nw, size_t bytes)
{
    if (n > t->ops_cap) {
        lattice_op *p = lt_realloc(t->ops, n * sizeof *p);
        if (!p) return false;
        t->ops = p;
        t->ops_cap = n;
    }
    if (nw > t->w_cap) {
        lattice_txn_watch *p = lt_realloc(t->w, nw * sizeof *p);
        if (!p) return false;
        t->w = p;
        t->w_cap = nw;
    }
    if (bytes > t->payload_cap) {
        uint8_t *p = lt_realloc(t->payload, bytes);
        if (!p) return false;
        t->payload = p;
        t->payload_cap = bytes;
    }
    return true;
}

/* The TXN op of watches w[0..nw) and subs ops[0..n), routed by key. */
static lattice_status build(lt_txc *t, const void *key, size_t key_len, size_t nw, size_t n, lattice_op *op)
{
    size_t need = lattice_txn_request_size(t->w, nw, t->ops, n);
    if (!scratch(t, 0, 0, need)) return LATTICE_ERR_NOMEM;
    size_t len = lattice_txn_request_encode(t->w, nw, t->ops, n, t->payload, need);
    if (!len) return LATTICE_ERR_NOMEM;
    *op = (lattice_op){.kind = LATTICE_OP_TXN, .cache = t->cache, .key = key, .key_len = key_len,
                       .value = t->payload, .value_len = len};
    return LATTICE_OK;
}

lattice_status lt_txc_can_join(const lt_txc *t, const lt_txc_key *keys, size_t n)
{
    int slot = t->slot;
    for (size_t i = 0; i < n; i++) {
        if (keys[i].len > UINT32_MAX) return LATTICE_ERR_TOO_LARGE;
        if (t->across || find(t, keys[i].key, keys[i].len)) continue;
        uint16_t s = lattice_partition_key_slot(keys[i].key, keys[i].len);
        if (slot < 0) slot = s;
        else if (s != (uint16_t)slot) return LATTICE_ERR_UNSUPPORTED;
    }
    return LATTICE_OK;
}

lattice_status lt_txc_read_op(lt_txc *t, const lt_txc_key *keys, size_t n, lattice_op *op)
{
    if (t->state != LT_TXC_ACTIVE) return LATTICE_ERR_STOPPED;
    if (!n || n > SIZE_MAX / 4) return LATTICE_ERR_INVAL;
    /* One op reaches one partition: even keys the transaction knows must
     * share the slot of the first. */
    uint16_t slot = lattice_partition_key_slot(keys[0].key, keys[0].len);
    for (size_t i = 1; i < n; i++)
        if (lattice_partition_key_slot(keys[i].key, keys[i].len) != slot) return LATTICE_ERR_UNSUPPORTED;
    lattice_status st = lt_txc_can_join(t, keys, n);
    if (st != LATTICE_OK) return st;
    if (!scratch(t, 2 * n, 0, 0)) return LATTICE_ERR_NOMEM;
    for (size_t i = 0; i < n; i++) {
        t->ops[2 * i] = (lattice_op){.kind = (lattice_op_kind)LATTICE_TXN_VERSION, .cache = t->cache,
                                     .key = keys[i].key, .key_len = keys[i].len};
        t->ops[2 * i + 1] = lattice_op_get(t->cache, keys[i].key, keys[i].len);
        if (t->any_type) t->ops[2 * i + 1].flags = LATTICE_OP_ANY_TYPE;
    }
    return build(t, keys[0].key, keys[0].len, 0, 2 * n, op);
}

/* Remembers one key's read (a key read before keeps its first read). */
static lattice_status note_read(lt_txc *t, const lt_txc_key *key, const lattice_txn_sub_result *ver,
                                const lattice_txn_sub_result *get)
{
    uint8_t mode;
    uint64_t version, epoch;
    if (!lattice_txn_version_watch(ver, &mode, &version, &epoch)) return LATTICE_ERR_PROTO;
    if (get->status != LATTICE_OK && get->status != LATTICE_ERR_NOT_FOUND) return (lattice_status)get->status;
    lattice_status st;
    txk *k = entry(t, key->key, key->len, &st);
    if (!k) return st;
    if (k->read) return LATTICE_OK;
    bool live = get->status == LATTICE_OK;
    uint8_t *v = NULL;
    if (live && !dup_bytes(&v, get->value, get->value_len)) return LATTICE_ERR_NOMEM;
    k->read = true;
    k->read_found = live;
    k->mode = mode;
    k->version = version;
    k->epoch = epoch;
    k->rval = v;
    k->rlen = live ? get->value_len : 0;
    k->rexpire = live ? (uint64_t)get->num : 0;
    k->rtype = live ? (uint8_t)LATTICE_OP_R_TYPE(get->flags) : 0;
    t->n_read++;
    return LATTICE_OK;
}

lattice_status lt_txc_read_done(lt_txc *t, const lt_txc_key *keys, size_t n, const lattice_op_result *r,
                                lattice_status *each)
{
    if (t->state != LT_TXC_ACTIVE) return LATTICE_ERR_STOPPED;
    if (r->status != LATTICE_OK) return r->status;
    lattice_txn_buf b;
    if (lattice_txn_result_begin(&b, r->value, r->value_len) != (long)(2 * n)) return LATTICE_ERR_PROTO;
    for (size_t i = 0; i < n; i++) {
        lattice_txn_sub_result ver, get;
        if (!lattice_txn_result_next(&b, &ver) || !lattice_txn_result_next(&b, &get)) return LATTICE_ERR_PROTO;
        each[i] = note_read(t, &keys[i], &ver, &get);
        bool found;
        const void *v;
        size_t vl;
        if (each[i] == LATTICE_OK && lt_txc_local_get(t, keys[i].key, keys[i].len, &found, &v, &vl) && !found)
            each[i] = LATTICE_ERR_NOT_FOUND;
    }
    return LATTICE_OK;
}

/* ---- writes ---- */

lattice_status lt_txc_write(lt_txc *t, const void *key, size_t key_len, const void *value, size_t value_len,
                            bool remove)
{
    return lt_txc_write_as(t, key, key_len, value, value_len, remove, 0, 0);
}

lattice_status lt_txc_write_as(lt_txc *t, const void *key, size_t key_len, const void *value, size_t value_len,
                               bool remove, uint64_t expire_ms, uint8_t type)
{
    if (t->state != LT_TXC_ACTIVE) return LATTICE_ERR_STOPPED;
    if (key_len > UINT32_MAX || value_len > UINT32_MAX) return LATTICE_ERR_TOO_LARGE;
    uint8_t *v = NULL;
    if (!remove && !dup_bytes(&v, value, value_len)) return LATTICE_ERR_NOMEM;
    lattice_status st;
    txk *k = entry(t, key, key_len, &st);
    if (!k) {
        lt_free(v);
        return st;
    }
    if (!k->written) t->n_written++;
    lt_free(k->wval);
    k->written = true;
    k->removed = remove;
    k->wval = v;
    k->wlen = remove ? 0 : value_len;
    k->wexpire = remove ? 0 : expire_ms;
    k->wtype = remove ? 0 : type;
    return LATTICE_OK;
}

bool lt_txc_read_of(const lt_txc *t, const void *key, size_t key_len, lt_txc_read *out)
{
    const txk *k = find(t, key, key_len);
    if (!k || !k->read) return false;
    *out = (lt_txc_read){k->read_found, k->rval, k->rlen, k->rexpire, k->rtype, k->mode, k->version, k->epoch};
    return true;
}

/* ---- the end ---- */

lattice_status lt_txc_commit_op(lt_txc *t, lattice_op *op, bool *none)
{
    *none = false;
    if (t->state != LT_TXC_ACTIVE) return LATTICE_ERR_STOPPED;
    if (!t->n) {
        t->state = LT_TXC_ENDED;
        *none = true;
        return LATTICE_OK;
    }
    if (!scratch(t, t->n_written, t->n_read, 0)) return LATTICE_ERR_NOMEM;
    size_t nw = 0, n = 0;
    for (size_t i = 0; i < t->n; i++) {
        const txk *k = &t->k[i];
        if (k->read) t->w[nw++] = (lattice_txn_watch){k->key, k->key_len, k->mode, k->version, k->epoch};
        if (!k->written) continue;
        t->ops[n++] = k->removed ? lattice_op_remove(t->cache, k->key, k->key_len)
                                 : lattice_op_put(t->cache, k->key, k->key_len, k->wval, k->wlen);
    }
    lattice_status st = build(t, t->k[0].key, t->k[0].key_len, nw, n, op);
    if (st == LATTICE_OK) t->state = LT_TXC_COMMITTING;
    return st;
}

/* Errors after which the commit certainly did not apply: the request was
 * refused as it stood (no retry of it could have applied either), or the
 * transaction was undone on every copy (REGION_FULL, ops/txn.c). */
static bool refused(lattice_status st)
{
    switch (st) {
    case LATTICE_ERR_INVAL:
    case LATTICE_ERR_TOO_LARGE:
    case LATTICE_ERR_NO_CACHE:
    case LATTICE_ERR_NOMEM:
    case LATTICE_ERR_UNSUPPORTED:
    case LATTICE_ERR_REGION_FULL:
    case LATTICE_ERR_WRONGTYPE:
        return true;
    default:
        return false;
    }
}

lattice_status lt_txc_commit_done(lt_txc *t, const lattice_op_result *r)
{
    if (t->state != LT_TXC_COMMITTING) return LATTICE_ERR_STOPPED;
    t->state = LT_TXC_ENDED;
    if (r->status != LATTICE_OK) return refused(r->status) ? r->status : LATTICE_ERR_UNKNOWN;
    if (r->flags & LATTICE_OP_R_ABORTED) return LATTICE_ERR_ABORTED;
    if (r->flags & LATTICE_OP_R_LOST) return LATTICE_ERR_UNKNOWN;
    lattice_txn_buf b;
    long n = lattice_txn_result_begin(&b, r->value, r->value_len);
    if (n != (long)t->n_written) return LATTICE_ERR_UNKNOWN; /* it ran; its answer is unreadable */
    for (long i = 0; i < n; i++) {
        lattice_txn_sub_result s;
        if (!lattice_txn_result_next(&b, &s)) return LATTICE_ERR_UNKNOWN;
        /* A remove of an absent key is done; any other error is a write
         * the primary refused (a full region under --region-policy reject). */
        if (s.status != LATTICE_OK && s.status != LATTICE_ERR_NOT_FOUND) return (lattice_status)s.status;
    }
    return LATTICE_OK;
}

void lt_txc_across(lt_txc *t) { t->across = true; }
void lt_txc_any_type(lt_txc *t) { t->any_type = true; }

bool lt_txc_one_slot(const lt_txc *t)
{
    for (size_t i = 1; i < t->n; i++)
        if (lattice_partition_key_slot(t->k[i].key, t->k[i].key_len) !=
            lattice_partition_key_slot(t->k[0].key, t->k[0].key_len))
            return false;
    return true;
}

void lt_txc_rollback(lt_txc *t)
{
    t->state = LT_TXC_ENDED;
}

/* ---- the commit across partitions (docs/TRANSACTIONS.md) ----
 *
 * The transaction's keys grouped by partition; each participant gets a
 * PREPARE (its reads as watches, its writes), the home partition (the first
 * key's) keeps the decision, and each participant's prepared row is
 * finished by the decision that stands. */

struct lt_txx {
    lt_txc *t;
    uint32_t partitions;
    lt_txid id;
    uint64_t stamp, deadline_wall_ms;
    uint32_t *part;   /* participant i's partition */
    size_t *first;    /* the index (in t->k) of its first key */
    uint8_t *state;   /* LT_TXX_* per participant */
    size_t n;
    uint32_t home;
    uint8_t key[LT_TXP_KEY_MAX];
    uint8_t byte;
    uint8_t hdr[LATTICE_TXN_PREP_BYTES];
};

enum { TXX_ASKED = 0, TXX_PREPARED = 1, TXX_REFUSED = 2, TXX_UNKNOWN = 3 };

static uint32_t part_of(const lt_txx *x, const txk *k)
{
    return lattice_partition_of_key(k->key, k->key_len, x->partitions);
}

size_t lt_txc_partitions(const lt_txc *t, uint32_t partitions)
{
    size_t n = 0;
    for (size_t i = 0; i < t->n; i++) {
        uint32_t p = lattice_partition_of_key(t->k[i].key, t->k[i].key_len, partitions);
        bool seen = false;
        for (size_t j = 0; j < i && !seen; j++)
            seen = lattice_partition_of_key(t->k[j].key, t->k[j].key_len, partitions) == p;
        n += !seen;
    }
    return n;
}

lattice_status lt_txx_new(lt_txc *t, uint32_t partitions, lt_txid id, uint64_t stamp, uint64_t deadline_wall_ms,
                          lt_txx **out)
{
    *out = NULL;
    if (t->state != LT_TXC_ACTIVE) return LATTICE_ERR_STOPPED;
    if (!t->n || !lattice_partition_count_valid(partitions) || lt_txid_none(id)) return LATTICE_ERR_INVAL;
    lt_txx *x = lt_calloc(1, sizeof *x);
    if (!x) return LATTICE_ERR_NOMEM;
    *x = (lt_txx){.t = t, .partitions = partitions, .id = id, .stamp = stamp, .deadline_wall_ms = deadline_wall_ms};
    x->part = lt_calloc(t->n, sizeof *x->part);
    x->first = lt_calloc(t->n, sizeof *x->first);
    x->state = lt_calloc(t->n, sizeof *x->state);
    if (!x->part || !x->first || !x->state) {
        lt_txx_free(x);
        return LATTICE_ERR_NOMEM;
    }
    for (size_t i = 0; i < t->n; i++) {
        uint32_t p = part_of(x, &t->k[i]);
        size_t j = 0;
        while (j < x->n && x->part[j] != p) j++;
        if (j < x->n) continue;
        x->part[x->n] = p;
        x->first[x->n++] = i;
    }
    x->home = x->part[0];
    t->state = LT_TXC_COMMITTING;
    *out = x;
    return LATTICE_OK;
}

void lt_txx_free(lt_txx *x)
{
    if (!x) return;
    lt_free(x->part);
    lt_free(x->first);
    lt_free(x->state);
    lt_free(x);
}

size_t lt_txx_parts(const lt_txx *x) { return x->n; }
uint32_t lt_txx_home(const lt_txx *x) { return x->home; }
uint32_t lt_txx_part(const lt_txx *x, size_t i) { return i < x->n ? x->part[i] : 0; }

static void put_le(uint8_t *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++) p[i] = (uint8_t)(v >> (8 * i));
}

lattice_status lt_txx_prepare_op(lt_txx *x, size_t i, lattice_op *op)
{
    if (i >= x->n) return LATTICE_ERR_INVAL;
    lt_txc *t = x->t;
    uint32_t p = x->part[i];
    size_t nw = 0, ns = 1;
    for (size_t j = 0; j < t->n; j++)
        if (part_of(x, &t->k[j]) == p) {
            nw += t->k[j].read;
            ns += t->k[j].written;
        }
    if (!scratch(t, ns, nw, 0)) return LATTICE_ERR_NOMEM;
    uint8_t *hdr = x->hdr;
    put_le(hdr, x->id.node, 8);
    put_le(hdr + 8, x->id.seq, 8);
    put_le(hdr + 16, x->stamp, 8);
    put_le(hdr + 24, x->home, 4);
    put_le(hdr + 28, x->deadline_wall_ms, 8);
    const txk *first = &t->k[x->first[i]];
    t->ops[0] = (lattice_op){.kind = (lattice_op_kind)LATTICE_TXN_PREPARE, .cache = t->cache, .key = first->key,
                             .key_len = first->key_len, .value = (const char *)hdr, .value_len = LATTICE_TXN_PREP_BYTES};
    nw = 0, ns = 1;
    for (size_t j = 0; j < t->n; j++) {
        const txk *k = &t->k[j];
        if (part_of(x, k) != p) continue;
        if (k->read) t->w[nw++] = (lattice_txn_watch){k->key, k->key_len, k->mode, k->version, k->epoch};
        if (!k->written) continue;
        if (k->removed) {
            t->ops[ns++] = lattice_op_remove(t->cache, k->key, k->key_len);
        } else {
            lattice_op w = lattice_op_put(t->cache, k->key, k->key_len, k->wval, k->wlen);
            w.ttl_ms = k->wexpire; /* PREPARE's writes: absolute expiry, type in delta (lattice/txn.h) */
            w.delta = k->wtype;
            t->ops[ns++] = w;
        }
    }
    return build(t, first->key, first->key_len, nw, ns, op);
}

lattice_status lt_txx_prepared(lt_txx *x, size_t i, const lattice_op_result *r)
{
    if (i >= x->n) return LATTICE_ERR_INVAL;
    lattice_status st;
    if (r->status != LATTICE_OK) st = refused(r->status) ? r->status : LATTICE_ERR_UNKNOWN;
    else if (r->flags & LATTICE_OP_R_ABORTED) st = LATTICE_ERR_ABORTED;
    else if (r->flags & LATTICE_OP_R_LOST) st = LATTICE_OK; /* applied once: prepared */
    else {
        lattice_txn_buf b;
        lattice_txn_sub_result s;
        st = lattice_txn_result_begin(&b, r->value, r->value_len) >= 1 && lattice_txn_result_next(&b, &s) &&
                     s.status == LATTICE_OK
                 ? LATTICE_OK
                 : LATTICE_ERR_UNKNOWN;
    }
    x->state[i] = st == LATTICE_OK ? TXX_PREPARED : st == LATTICE_ERR_UNKNOWN ? TXX_UNKNOWN : TXX_REFUSED;
    return st;
}

bool lt_txx_all_prepared(const lt_txx *x)
{
    for (size_t i = 0; i < x->n; i++)
        if (x->state[i] != TXX_PREPARED) return false;
    return true;
}

/* A request of one sub (DECIDE or FINISH) on the internal key x->key. */
static lattice_status lt_txx_one(lt_txx *x, int kind, size_t kl, lattice_op *op)
{
    lt_txc *t = x->t;
    if (!scratch(t, 1, 0, 0)) return LATTICE_ERR_NOMEM;
    t->ops[0] = (lattice_op){.kind = (lattice_op_kind)kind, .cache = t->cache, .key = (const char *)x->key,
                             .key_len = kl, .value = (const char *)&x->byte, .value_len = 1};
    return build(t, x->key, kl, 0, 1, op);
}

lattice_status lt_txx_decide_op(lt_txx *x, bool commit, lattice_op *op)
{
    size_t kl = lt_txp_key(x->partitions, x->home, LT_TXP_DECISION, x->id, x->key);
    x->byte = commit ? LATTICE_TXN_COMMIT : LATTICE_TXN_ABORT;
    return lt_txx_one(x, LATTICE_TXN_DECIDE, kl, op);
}

lattice_status lt_txx_forget_op(lt_txx *x, lattice_op *op)
{
    size_t kl = lt_txp_key(x->partitions, x->home, LT_TXP_DECISION, x->id, x->key);
    x->byte = LATTICE_TXN_FORGET;
    return lt_txx_one(x, LATTICE_TXN_DECIDE, kl, op);
}

lattice_status lt_txx_decided(lt_txx *x, const lattice_op_result *r, bool *commit)
{
    (void)x;
    if (r->status != LATTICE_OK) return r->status;
    if (r->flags & (LATTICE_OP_R_ABORTED | LATTICE_OP_R_LOST)) return LATTICE_ERR_UNKNOWN; /* ask again */
    lattice_txn_buf b;
    lattice_txn_sub_result s;
    if (lattice_txn_result_begin(&b, r->value, r->value_len) != 1 || !lattice_txn_result_next(&b, &s) ||
        s.status != LATTICE_OK || (s.num != LATTICE_TXN_COMMIT && s.num != LATTICE_TXN_ABORT))
        return LATTICE_ERR_PROTO;
    *commit = s.num == LATTICE_TXN_COMMIT;
    return LATTICE_OK;
}

lattice_status lt_txx_finish_op(lt_txx *x, size_t i, bool commit, lattice_op *op)
{
    if (i >= x->n) return LATTICE_ERR_INVAL;
    size_t kl = lt_txp_key(x->partitions, x->part[i], LT_TXP_PREPARED, x->id, x->key);
    x->byte = commit ? LATTICE_TXN_COMMIT : LATTICE_TXN_ABORT;
    return lt_txx_one(x, LATTICE_TXN_FINISH, kl, op);
}

lattice_status lt_txx_finished(lt_txx *x, size_t i, const lattice_op_result *r)
{
    if (i >= x->n) return LATTICE_ERR_INVAL;
    if (r->status != LATTICE_OK) return r->status;
    return r->flags & LATTICE_OP_R_ABORTED ? LATTICE_ERR_PROTO : LATTICE_OK;
}
