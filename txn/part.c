/*
 * part: internal keys, the prepared record and the lock table of the
 * participant's side of a transaction across partitions (part.h).
 */
#include "txn.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "lattice/alloc.h"
#include "lattice/txn.h"
#include "partition/partition.h"

/* ---- internal keys ----
 *
 *   0xff 'l' 't' kind '{' tag '}' node(8, little-endian) seq(8)
 *
 * The tag is the smallest decimal number whose CRC16 lands in the wanted
 * slot (Redis's hash tag rule: what lies between the first '{' and the
 * first '}' after it is hashed), found once for every slot. */

static uint32_t slot_tag[LATTICE_PARTITION_SLOTS];
static pthread_once_t tags_once = PTHREAD_ONCE_INIT;

static void tags_init(void)
{
    size_t left = LATTICE_PARTITION_SLOTS;
    static bool have[LATTICE_PARTITION_SLOTS];
    for (uint32_t i = 0; left; i++) {
        char b[16];
        int n = snprintf(b, sizeof b, "%u", i);
        uint16_t s = (uint16_t)(lattice_partition_crc16(b, (size_t)n) & (LATTICE_PARTITION_SLOTS - 1));
        if (!have[s]) {
            have[s] = true;
            slot_tag[s] = i;
            left--;
        }
    }
}

bool lt_txp_key_reserved(const void *key, size_t len)
{
    return len && ((const uint8_t *)key)[0] == LT_TXP_KEY_BYTE;
}

static void put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

size_t lt_txp_key(uint32_t partitions, uint32_t p, lt_txp_kind kind, lt_txid id, uint8_t *out)
{
    pthread_once(&tags_once, tags_init);
    if (!lattice_partition_count_valid(partitions) || p >= partitions) p = 0, partitions = 1;
    uint32_t slot = p * (LATTICE_PARTITION_SLOTS / partitions); /* the partition's first slot */
    size_t n = 0;
    out[n++] = LT_TXP_KEY_BYTE;
    out[n++] = 'l';
    out[n++] = 't';
    out[n++] = (uint8_t)kind;
    n += (size_t)snprintf((char *)out + n, 16, "{%u}", slot_tag[slot]);
    put64(out + n, id.node);
    put64(out + n + 8, id.seq);
    return n + 16;
}

size_t lt_txp_key_prefix(lt_txp_kind kind, uint8_t *out)
{
    out[0] = LT_TXP_KEY_BYTE;
    out[1] = 'l';
    out[2] = 't';
    out[3] = (uint8_t)kind;
    return 4;
}

int lt_txp_key_parse(const void *key, size_t len, lt_txp_kind *kind, lt_txid *id)
{
    const uint8_t *k = key;
    if (len < 4 + 3 + 16 || len > LT_TXP_KEY_MAX || k[0] != LT_TXP_KEY_BYTE || k[1] != 'l' || k[2] != 't') return 0;
    if (k[3] != LT_TXP_PREPARED && k[3] != LT_TXP_DECISION) return 0;
    if (k[4] != '{') return 0;
    const uint8_t *close = memchr(k + 5, '}', len - 5);
    if (!close || close == k + 5 || (size_t)(k + len - (close + 1)) != 16) return 0;
    *kind = (lt_txp_kind)k[3];
    id->node = get64(close + 1);
    id->seq = get64(close + 9);
    return 1;
}

/* ---- the prepared record ----
 *
 *   u8 1, u64 node, u64 seq, u64 stamp, u32 home, u64 deadline_ms,
 *   u32 n_reads, (u32 klen, key)*,
 *   u32 n_writes, (u8 remove, u8 type, u64 expire_ms, u32 klen, key, u32 vlen, value)* */

#define REC_FORMAT 1

/* Written and read with lattice/txn.h's buffer, as a transaction's request. */
static size_t rec_size(const lt_txp_rec *r)
{
    size_t n = 1 + 8 + 8 + 8 + 4 + 8 + 4 + 4;
    for (size_t i = 0; i < r->n_reads; i++) n += 4 + r->reads[i].len;
    for (size_t i = 0; i < r->n_writes; i++)
        n += 1 + 1 + 8 + 4 + r->writes[i].key_len + 4 + (r->writes[i].remove ? 0 : r->writes[i].value_len);
    return n;
}

lattice_status lt_txp_rec_encode(const lt_txp_rec *r, uint8_t **out, size_t *len)
{
    if (r->n_reads > UINT32_MAX || r->n_writes > UINT32_MAX) return LATTICE_ERR_TOO_LARGE;
    size_t cap = rec_size(r);
    lattice_txn_buf b = {lt_malloc(cap), 0, cap, false};
    if (!b.p) return LATTICE_ERR_NOMEM;
    lattice_txn_put_u(&b, REC_FORMAT, 1);
    lattice_txn_put_u(&b, r->id.node, 8);
    lattice_txn_put_u(&b, r->id.seq, 8);
    lattice_txn_put_u(&b, r->stamp, 8);
    lattice_txn_put_u(&b, r->home, 4);
    lattice_txn_put_u(&b, r->deadline_ms, 8);
    lattice_txn_put_u(&b, r->n_reads, 4);
    for (size_t i = 0; i < r->n_reads; i++) lattice_txn_put_bytes(&b, r->reads[i].key, r->reads[i].len);
    lattice_txn_put_u(&b, r->n_writes, 4);
    for (size_t i = 0; i < r->n_writes; i++) {
        const lt_txp_write *w = &r->writes[i];
        lattice_txn_put_u(&b, w->remove, 1);
        lattice_txn_put_u(&b, w->type, 1);
        lattice_txn_put_u(&b, w->expire_ms, 8);
        lattice_txn_put_bytes(&b, w->key, w->key_len);
        lattice_txn_put_bytes(&b, w->remove ? NULL : w->value, w->remove ? 0 : w->value_len);
    }
    *out = b.p;
    *len = b.len;
    return LATTICE_OK;
}

lattice_status lt_txp_rec_decode(const void *buf, size_t len, lt_txp_rec *r)
{
    memset(r, 0, sizeof *r);
    lattice_txn_buf b = {(uint8_t *)(uintptr_t)buf, 0, len, false};
    if (lattice_txn_get_u(&b, 1) != REC_FORMAT) return LATTICE_ERR_INVAL;
    r->id.node = lattice_txn_get_u(&b, 8);
    r->id.seq = lattice_txn_get_u(&b, 8);
    r->stamp = lattice_txn_get_u(&b, 8);
    r->home = (uint32_t)lattice_txn_get_u(&b, 4);
    r->deadline_ms = lattice_txn_get_u(&b, 8);
    uint64_t nr = lattice_txn_get_u(&b, 4);
    if (b.failed || nr > (len - b.len) / 4) return LATTICE_ERR_INVAL; /* each read takes >= 4 bytes */
    r->reads = lt_calloc(nr ? nr : 1, sizeof *r->reads);
    if (!r->reads) return LATTICE_ERR_NOMEM;
    r->n_reads = (size_t)nr;
    for (size_t i = 0; i < r->n_reads; i++) r->reads[i].key = lattice_txn_get_bytes(&b, &r->reads[i].len);
    uint64_t nw = lattice_txn_get_u(&b, 4);
    if (b.failed || nw > (len - b.len) / 18) { /* each write takes >= 18 bytes */
        lt_txp_rec_free(r);
        return LATTICE_ERR_INVAL;
    }
    r->writes = lt_calloc(nw ? nw : 1, sizeof *r->writes);
    if (!r->writes) {
        lt_txp_rec_free(r);
        return LATTICE_ERR_NOMEM;
    }
    r->n_writes = (size_t)nw;
    for (size_t i = 0; i < r->n_writes; i++) {
        lt_txp_write *w = &r->writes[i];
        w->remove = lattice_txn_get_u(&b, 1) != 0;
        w->type = (uint8_t)lattice_txn_get_u(&b, 1);
        w->expire_ms = lattice_txn_get_u(&b, 8);
        w->key = lattice_txn_get_bytes(&b, &w->key_len);
        w->value = lattice_txn_get_bytes(&b, &w->value_len);
    }
    if (b.failed || b.len != len || lt_txid_none(r->id)) {
        lt_txp_rec_free(r);
        return LATTICE_ERR_INVAL;
    }
    return LATTICE_OK;
}

void lt_txp_rec_free(lt_txp_rec *r)
{
    lt_free(r->reads);
    lt_free(r->writes);
    memset(r, 0, sizeof *r);
}

/* ---- the lock table ----
 *
 * Two small chained hash tables: keys (each with the transactions that
 * hold it and how) and transactions (each with its keys, to release them).
 * A partition holds few prepared transactions at a time; both tables grow
 * by doubling. */

typedef struct holder {
    lt_txid id;
    uint64_t stamp;
    bool write;
} holder;

typedef struct lkey {
    struct lkey *next;
    uint64_t hash;
    uint8_t *key;
    size_t len;
    holder *h;
    size_t n, cap;
} lkey;

typedef struct ltx {
    struct ltx *next;
    lt_txid id;
    uint64_t stamp, deadline_ms;
    uint32_t home;
    lkey **keys; /* the keys it holds */
    size_t n;
} ltx;

struct lt_txp_locks {
    lkey **kb;
    size_t kcap, kn;
    ltx **tb;
    size_t tcap, tn;
};

static uint64_t hash_bytes(const void *p, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ ((const uint8_t *)p)[i]) * 1099511628211ull;
    return h;
}

static uint64_t hash_id(lt_txid id) { return (id.node * 0x9e3779b97f4a7c15ull) ^ id.seq; }

lt_txp_locks *lt_txp_locks_new(void)
{
    lt_txp_locks *t = lt_calloc(1, sizeof *t);
    if (!t) return NULL;
    t->kcap = t->tcap = 16;
    t->kb = lt_calloc(t->kcap, sizeof *t->kb);
    t->tb = lt_calloc(t->tcap, sizeof *t->tb);
    if (!t->kb || !t->tb) {
        lt_free(t->kb);
        lt_free(t->tb);
        lt_free(t);
        return NULL;
    }
    return t;
}

static void lkey_free(lkey *k)
{
    lt_free(k->key);
    lt_free(k->h);
    lt_free(k);
}

void lt_txp_locks_free(lt_txp_locks *t)
{
    if (!t) return;
    for (size_t i = 0; i < t->kcap; i++)
        for (lkey *k = t->kb[i], *next; k; k = next) {
            next = k->next;
            lkey_free(k);
        }
    for (size_t i = 0; i < t->tcap; i++)
        for (ltx *x = t->tb[i], *next; x; x = next) {
            next = x->next;
            lt_free(x->keys);
            lt_free(x);
        }
    lt_free(t->kb);
    lt_free(t->tb);
    lt_free(t);
}

static lkey *key_find(const lt_txp_locks *t, const void *key, size_t len, uint64_t h)
{
    for (lkey *k = t->kb[h & (t->kcap - 1)]; k; k = k->next)
        if (k->hash == h && k->len == len && !memcmp(k->key, key, len)) return k;
    return NULL;
}

static ltx *tx_find(const lt_txp_locks *t, lt_txid id)
{
    for (ltx *x = t->tb[hash_id(id) & (t->tcap - 1)]; x; x = x->next)
        if (lt_txid_eq(x->id, id)) return x;
    return NULL;
}

/* Doubles a chained table when it holds more entries than buckets; a
 * failed allocation only keeps the chains longer. */
static void key_grow(lt_txp_locks *t)
{
    if (t->kn < t->kcap) return;
    size_t cap = t->kcap * 2;
    lkey **nb = lt_calloc(cap, sizeof *nb);
    if (!nb) return;
    for (size_t i = 0; i < t->kcap; i++)
        for (lkey *k = t->kb[i], *next; k; k = next) {
            next = k->next;
            k->next = nb[k->hash & (cap - 1)];
            nb[k->hash & (cap - 1)] = k;
        }
    lt_free(t->kb);
    t->kb = nb;
    t->kcap = cap;
}

static void tx_grow(lt_txp_locks *t)
{
    if (t->tn < t->tcap) return;
    size_t cap = t->tcap * 2;
    ltx **nb = lt_calloc(cap, sizeof *nb);
    if (!nb) return;
    for (size_t i = 0; i < t->tcap; i++)
        for (ltx *x = t->tb[i], *next; x; x = next) {
            next = x->next;
            size_t b = hash_id(x->id) & (cap - 1);
            x->next = nb[b];
            nb[b] = x;
        }
    lt_free(t->tb);
    t->tb = nb;
    t->tcap = cap;
}

static void key_unlink(lt_txp_locks *t, lkey *k)
{
    lkey **pp = &t->kb[k->hash & (t->kcap - 1)];
    while (*pp != k) pp = &(*pp)->next;
    *pp = k->next;
    t->kn--;
    lkey_free(k);
}

/* Drops id's hold on k (and k when nobody holds it any more). */
static void key_drop(lt_txp_locks *t, lkey *k, lt_txid id)
{
    for (size_t i = 0; i < k->n; i++)
        if (lt_txid_eq(k->h[i].id, id)) {
            k->h[i] = k->h[--k->n];
            break;
        }
    if (!k->n) key_unlink(t, k);
}

/* id's hold on key (write wins over read); NULL on NOMEM. */
static lkey *key_hold(lt_txp_locks *t, const void *key, size_t len, lt_txid id, uint64_t stamp, bool write,
                      bool *added)
{
    uint64_t h = hash_bytes(key, len);
    lkey *k = key_find(t, key, len, h);
    *added = false;
    if (!k) {
        k = lt_calloc(1, sizeof *k);
        if (!k || !(k->key = lt_malloc(len ? len : 1))) {
            lt_free(k);
            return NULL;
        }
        if (len) memcpy(k->key, key, len);
        k->len = len;
        k->hash = h;
        key_grow(t);
        k->next = t->kb[h & (t->kcap - 1)];
        t->kb[h & (t->kcap - 1)] = k;
        t->kn++;
    }
    for (size_t i = 0; i < k->n; i++)
        if (lt_txid_eq(k->h[i].id, id)) {
            k->h[i].write |= write;
            return k; /* held already (read and written: one hold) */
        }
    if (k->n == k->cap) {
        size_t cap = k->cap ? 2 * k->cap : 2;
        holder *nh = lt_realloc(k->h, cap * sizeof *nh);
        if (!nh) {
            if (!k->n) key_unlink(t, k);
            return NULL;
        }
        k->h = nh;
        k->cap = cap;
    }
    k->h[k->n++] = (holder){id, stamp, write};
    *added = true;
    return k;
}

lattice_status lt_txp_locks_add(lt_txp_locks *t, const lt_txp_rec *r)
{
    if (tx_find(t, r->id)) return LATTICE_OK;
    ltx *x = lt_calloc(1, sizeof *x);
    size_t most = r->n_reads + r->n_writes;
    if (x) x->keys = lt_calloc(most ? most : 1, sizeof *x->keys);
    if (!x || !x->keys) {
        lt_free(x);
        return LATTICE_ERR_NOMEM;
    }
    x->id = r->id;
    x->stamp = r->stamp;
    x->deadline_ms = r->deadline_ms;
    x->home = r->home;
    for (size_t i = 0; i < most; i++) {
        bool write = i < r->n_writes;
        const void *key = write ? r->writes[i].key : r->reads[i - r->n_writes].key;
        size_t len = write ? r->writes[i].key_len : r->reads[i - r->n_writes].len;
        bool added;
        lkey *k = key_hold(t, key, len, r->id, r->stamp, write, &added);
        if (!k) {
            for (size_t j = 0; j < x->n; j++) key_drop(t, x->keys[j], r->id);
            lt_free(x->keys);
            lt_free(x);
            return LATTICE_ERR_NOMEM;
        }
        if (added) x->keys[x->n++] = k;
    }
    tx_grow(t);
    size_t b = hash_id(x->id) & (t->tcap - 1);
    x->next = t->tb[b];
    t->tb[b] = x;
    t->tn++;
    return LATTICE_OK;
}

bool lt_txp_locks_release(lt_txp_locks *t, lt_txid id)
{
    ltx **pp = &t->tb[hash_id(id) & (t->tcap - 1)];
    while (*pp && !lt_txid_eq((*pp)->id, id)) pp = &(*pp)->next;
    ltx *x = *pp;
    if (!x) return false;
    *pp = x->next;
    t->tn--;
    for (size_t i = 0; i < x->n; i++) key_drop(t, x->keys[i], id);
    lt_free(x->keys);
    lt_free(x);
    return true;
}

size_t lt_txp_locks_count(const lt_txp_locks *t) { return t->tn; }

/* Holders of key that conflict with an access (a write: any; a read: a
 * writer), and the oldest of them. */
static size_t conflicts(const lt_txp_locks *t, const void *key, size_t len, bool write, lt_txid *oldest,
                        uint64_t *oldest_stamp)
{
    lkey *k = key_find(t, key, len, hash_bytes(key, len));
    size_t n = 0;
    for (size_t i = 0; k && i < k->n; i++) {
        const holder *h = &k->h[i];
        if (!write && !h->write) continue; /* readers share */
        if (!n++ || h->stamp < *oldest_stamp) {
            *oldest = h->id;
            *oldest_stamp = h->stamp;
        }
    }
    return n;
}

size_t lt_txp_locks_holders(const lt_txp_locks *t, const void *key, size_t len, bool write, lt_txid *oldest,
                            uint64_t *oldest_stamp)
{
    lt_txid o = {0, 0};
    uint64_t s = 0;
    size_t n = conflicts(t, key, len, write, &o, &s);
    if (oldest) *oldest = o;
    if (oldest_stamp) *oldest_stamp = s;
    return n;
}

/* Age order: the lower stamp is older; equal stamps fall back on the id,
 * so two transactions never both wait for each other. */
static bool older(uint64_t sa, lt_txid a, uint64_t sb, lt_txid b)
{
    if (sa != sb) return sa < sb;
    if (a.node != b.node) return a.node < b.node;
    return a.seq < b.seq;
}

lt_txp_verdict lt_txp_locks_verdict(const lt_txp_locks *t, const lt_txp_rec *r)
{
    lt_txp_verdict v = LT_TXP_GRANT;
    size_t most = r->n_reads + r->n_writes;
    for (size_t i = 0; i < most; i++) {
        bool write = i < r->n_writes;
        const void *key = write ? r->writes[i].key : r->reads[i - r->n_writes].key;
        size_t len = write ? r->writes[i].key_len : r->reads[i - r->n_writes].len;
        lkey *k = key_find(t, key, len, hash_bytes(key, len));
        for (size_t j = 0; k && j < k->n; j++) {
            const holder *h = &k->h[j];
            if (lt_txid_eq(h->id, r->id) || (!write && !h->write)) continue;
            if (older(h->stamp, h->id, r->stamp, r->id)) return LT_TXP_DIE;
            v = LT_TXP_WAIT;
        }
    }
    return v;
}

void lt_txp_locks_each(const lt_txp_locks *t, void (*fn)(void *arg, const lt_txp_held *h), void *arg)
{
    for (size_t i = 0; i < t->tcap; i++)
        for (ltx *x = t->tb[i]; x; x = x->next) {
            lt_txp_held h = {x->id, x->stamp, x->deadline_ms, x->home};
            fn(arg, &h);
        }
}
