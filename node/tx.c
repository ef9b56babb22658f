/*
 * tx: lattice/transaction.h - the interactive transaction API over txn/'s
 * coordinator (txn/txn.h): it asks the coordinator for each op, submits it
 * (lattice_op_submit) and hands the answer back.  The blocking calls wait
 * for the asynchronous ones on a condition variable.
 */
#include <pthread.h>
#include <string.h>

#include "lattice/alloc.h"
#include "lattice/clock.h"
#include "lattice/log.h"
#include "lattice/transaction.h"
#include "node_int.h"
#include "txn/txn.h"

struct lattice_tx {
    lattice_node *node;
    lt_txc *c;
};

lattice_status lattice_tx_begin(lattice_node *n, const char *cache, int timeout_ms, const char *label,
                                lattice_tx **out)
{
    if (!out) return LATTICE_ERR_INVAL;
    *out = NULL;
    if (!n || timeout_ms < 0) return LATTICE_ERR_INVAL;
    lattice_tx *tx = lt_calloc(1, sizeof *tx);
    if (!tx) return LATTICE_ERR_NOMEM;
    uint64_t deadline = lt_mono_ms() + (uint64_t)(timeout_ms ? timeout_ms : LATTICE_TX_TIMEOUT_MS);
    lattice_status st = lt_txc_new(cache, deadline, label, &tx->c);
    if (st != LATTICE_OK) {
        lt_free(tx);
        return st;
    }
    tx->node = n;
    *out = tx;
    return LATTICE_OK;
}

static void tx_free(lattice_tx *tx)
{
    lt_txc_free(tx->c);
    lt_free(tx);
}

void lattice_tx_rollback(lattice_tx *tx)
{
    if (!tx) return;
    lt_txc_rollback(tx->c);
    tx_free(tx);
}

/* ------------------------------------------------------------- async */

/* Reads of keys[0..n) in flight: each answer goes to fn(arg, i, ...). */
typedef void (*each_fn)(void *arg, size_t i, lattice_status st, const void *value, size_t value_len);

typedef struct read_ctx {
    lattice_tx *tx;
    each_fn fn;
    void *arg;
    size_t n;
    size_t *index; /* the caller's index of each key read */
    lt_txc_key *keys;
    lattice_status *each;
} read_ctx;

static void read_ctx_free(read_ctx *g)
{
    for (size_t i = 0; i < g->n; i++) lt_free((void *)g->keys[i].key);
    lt_free(g->keys);
    lt_free(g->index);
    lt_free(g->each);
    lt_free(g);
}

static void read_answered(void *arg, size_t op_i, const lattice_op_result *r)
{
    (void)op_i;
    read_ctx *g = arg;
    lattice_status st = lt_txc_read_done(g->tx->c, g->keys, g->n, r, g->each);
    for (size_t i = 0; i < g->n; i++) {
        bool found = false;
        const void *v = NULL;
        size_t vl = 0;
        lattice_status x = st != LATTICE_OK ? st : g->each[i];
        /* Looked up right before each callback, not kept from read_done: a
         * callback may write a key of this read, which frees the value the
         * transaction held for it. */
        if (x == LATTICE_OK) lt_txc_local_get(g->tx->c, g->keys[i].key, g->keys[i].len, &found, &v, &vl);
        g->fn(g->arg, g->index[i], x, v, vl);
    }
    read_ctx_free(g);
}

/* Answers what the transaction knows itself at once, reads the rest in one
 * op.  OK: fn runs once per key; an error: for none. */
static lattice_status read_keys(lattice_tx *tx, const lt_txc_key *keys, size_t n, each_fn fn, void *arg)
{
    if (!tx || !fn || (!keys && n)) return LATTICE_ERR_INVAL;
    lattice_status st = lt_txc_check(tx->c, lt_mono_ms());
    if (st == LATTICE_OK) st = lt_txc_can_join(tx->c, keys, n);
    if (st != LATTICE_OK) return st;
    read_ctx *g = lt_calloc(1, sizeof *g);
    if (!g) return LATTICE_ERR_NOMEM;
    *g = (read_ctx){tx, fn, arg, 0, lt_calloc(n ? n : 1, sizeof *g->index), lt_calloc(n ? n : 1, sizeof *g->keys),
                    lt_calloc(n ? n : 1, sizeof *g->each)};
    if (!g->index || !g->keys || !g->each) {
        read_ctx_free(g);
        return LATTICE_ERR_NOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        bool found;
        const void *v;
        size_t vl;
        if (!keys[i].key && keys[i].len) {
            read_ctx_free(g);
            return LATTICE_ERR_INVAL;
        }
        if (lt_txc_local_get(tx->c, keys[i].key, keys[i].len, &found, &v, &vl)) continue;
        void *k = lt_malloc(keys[i].len ? keys[i].len : 1);
        if (!k) {
            read_ctx_free(g);
            return LATTICE_ERR_NOMEM;
        }
        if (keys[i].len) memcpy(k, keys[i].key, keys[i].len);
        g->keys[g->n] = (lt_txc_key){k, keys[i].len};
        g->index[g->n++] = i;
    }
    lattice_op op;
    if (g->n && (st = lt_txc_read_op(tx->c, g->keys, g->n, &op)) != LATTICE_OK) {
        read_ctx_free(g);
        return st;
    }
    /* Nothing can fail from here on: the local answers first. */
    size_t j = 0;
    for (size_t i = 0; i < n; i++) {
        if (j < g->n && g->index[j] == i) {
            j++;
            continue;
        }
        bool found = false;
        const void *v = NULL;
        size_t vl = 0;
        lt_txc_local_get(tx->c, keys[i].key, keys[i].len, &found, &v, &vl);
        fn(arg, i, found ? LATTICE_OK : LATTICE_ERR_NOT_FOUND, v, vl);
    }
    if (!g->n) {
        read_ctx_free(g);
        return LATTICE_OK;
    }
    st = lattice_op_submit(tx->node, &op, 1, read_answered, g);
    if (st != LATTICE_OK) { /* the local answers went out: the rest answer the error */
        for (size_t i = 0; i < g->n; i++) fn(arg, g->index[i], st, NULL, 0);
        read_ctx_free(g);
    }
    return LATTICE_OK;
}

typedef struct one_fn {
    lattice_tx_get_fn fn;
    void *arg;
} one_fn;

static void one_answered(void *arg, size_t i, lattice_status st, const void *value, size_t value_len)
{
    (void)i;
    one_fn *o = arg;
    o->fn(o->arg, st, value, value_len);
    lt_free(o);
}

lattice_status lattice_tx_get_async(lattice_tx *tx, const void *key, size_t key_len, lattice_tx_get_fn fn, void *arg)
{
    if (!fn) return LATTICE_ERR_INVAL;
    one_fn *o = lt_malloc(sizeof *o);
    if (!o) return LATTICE_ERR_NOMEM;
    *o = (one_fn){fn, arg};
    lt_txc_key k = {key, key_len};
    lattice_status st = read_keys(tx, &k, 1, one_answered, o);
    if (st != LATTICE_OK) lt_free(o);
    return st;
}

typedef struct commit_ctx {
    node_metrics *m;
    lt_txc *c;
    lattice_tx_done_fn fn;
    void *arg;
} commit_ctx;

static void commit_answered(void *arg, size_t i, const lattice_op_result *r)
{
    (void)i;
    commit_ctx *k = arg;
    lattice_status st = lt_txc_commit_done(k->c, r);
    node_metrics_tx(k->m, st);
    if (st == LATTICE_ERR_UNKNOWN)
        LT_LOG(LT_WARN, "tx",
               "cache %s: transaction '%s' (%zu keys read, %zu written): the commit's answer was lost (%s): it "
               "applied once or not at all",
               lt_txc_cache(k->c), lt_txc_label(k->c), lt_txc_reads(k->c), lt_txc_writes(k->c),
               lattice_strerror(r->status));
    k->fn(k->arg, st);
    lt_txc_free(k->c);
    lt_free(k);
}

lattice_status lattice_tx_commit_async(lattice_tx *tx, lattice_tx_done_fn fn, void *arg)
{
    if (!tx || !fn) {
        if (tx) tx_free(tx);
        return LATTICE_ERR_INVAL;
    }
    lattice_status st = lt_txc_check(tx->c, lt_mono_ms());
    lattice_op op;
    bool none = false;
    if (st == LATTICE_OK) st = lt_txc_commit_op(tx->c, &op, &none);
    commit_ctx *k = st == LATTICE_OK && !none ? lt_malloc(sizeof *k) : NULL;
    if (st == LATTICE_OK && !none && !k) st = LATTICE_ERR_NOMEM;
    if (st != LATTICE_OK || none) {
        node_metrics_tx(lattice_node_metrics_of(tx->node), st);
        tx_free(tx);
        if (none) fn(arg, LATTICE_OK);
        return st;
    }
    *k = (commit_ctx){lattice_node_metrics_of(tx->node), tx->c, fn, arg};
    lattice_node *n = tx->node;
    lt_free(tx); /* the coordinator lives on in k until the answer */
    st = lattice_op_submit(n, &op, 1, commit_answered, k);
    if (st != LATTICE_OK) {
        node_metrics_tx(k->m, st);
        lt_txc_free(k->c);
        lt_free(k);
    }
    return st;
}

/* ------------------------------------------------------------- blocking */

typedef struct waiter {
    node_latch latch;
    lattice_kv *kvs; /* get_all's entries */
    lattice_status st;
    void *value;
    size_t value_len;
} waiter;

static void got(void *arg, lattice_status st, const void *value, size_t value_len)
{
    waiter *w = arg;
    w->st = st;
    if (st == LATTICE_OK) {
        w->value = lt_malloc(value_len ? value_len : 1);
        if (!w->value) w->st = LATTICE_ERR_NOMEM;
        else {
            if (value_len) memcpy(w->value, value, value_len);
            w->value_len = value_len;
        }
    }
    node_latch_count_down(&w->latch);
}

lattice_status lattice_tx_get(lattice_tx *tx, const void *key, size_t key_len, void **value, size_t *value_len)
{
    if (!value || !value_len) return LATTICE_ERR_INVAL;
    *value = NULL;
    *value_len = 0;
    waiter w = {.latch = NODE_LATCH(1)};
    lattice_status st = lattice_tx_get_async(tx, key, key_len, got, &w);
    if (st != LATTICE_OK) return st;
    node_latch_wait(&w.latch);
    *value = w.value;
    *value_len = w.value_len;
    return w.st;
}

lattice_status lattice_tx_put(lattice_tx *tx, const void *key, size_t key_len, const void *value, size_t value_len)
{
    if (!tx || (!key && key_len) || (!value && value_len)) return LATTICE_ERR_INVAL;
    lattice_status st = lt_txc_check(tx->c, lt_mono_ms());
    return st != LATTICE_OK ? st : lt_txc_write(tx->c, key, key_len, value, value_len, false);
}

lattice_status lattice_tx_remove(lattice_tx *tx, const void *key, size_t key_len)
{
    if (!tx || (!key && key_len)) return LATTICE_ERR_INVAL;
    lattice_status st = lt_txc_check(tx->c, lt_mono_ms());
    return st != LATTICE_OK ? st : lt_txc_write(tx->c, key, key_len, NULL, 0, true);
}

lattice_status lattice_tx_get_and_put(lattice_tx *tx, const void *key, size_t key_len, const void *value,
                                      size_t value_len, void **old, size_t *old_len)
{
    if (!old || !old_len || (!value && value_len)) return LATTICE_ERR_INVAL;
    lattice_status st = lattice_tx_get(tx, key, key_len, old, old_len);
    if (st != LATTICE_OK && st != LATTICE_ERR_NOT_FOUND) return st;
    lattice_status wst = lt_txc_write(tx->c, key, key_len, value, value_len, false);
    if (wst != LATTICE_OK) {
        lt_free(*old);
        *old = NULL;
        *old_len = 0;
        return wst;
    }
    return st;
}

lattice_status lattice_tx_put_all(lattice_tx *tx, const lattice_kv *kvs, size_t count)
{
    if (!tx || (!kvs && count)) return LATTICE_ERR_INVAL;
    lattice_status st = lt_txc_check(tx->c, lt_mono_ms());
    if (st != LATTICE_OK) return st;
    /* All or none: every key must be able to join before any is buffered. */
    lt_txc_key *keys = lt_calloc(count ? count : 1, sizeof *keys);
    if (!keys) return LATTICE_ERR_NOMEM;
    for (size_t i = 0; i < count; i++) {
        if ((!kvs[i].key && kvs[i].key_len) || (!kvs[i].value && kvs[i].value_len)) st = LATTICE_ERR_INVAL;
        keys[i] = (lt_txc_key){kvs[i].key, kvs[i].key_len};
    }
    if (st == LATTICE_OK) st = lt_txc_can_join(tx->c, keys, count);
    lt_free(keys);
    if (st != LATTICE_OK) return st;
    for (size_t i = 0; i < count; i++)
        if ((st = lt_txc_write(tx->c, kvs[i].key, kvs[i].key_len, kvs[i].value, kvs[i].value_len, false)) !=
            LATTICE_OK)
            return st; /* no memory: the transaction can only be rolled back usefully */
    return LATTICE_OK;
}

static void got_one(void *arg, size_t i, lattice_status st, const void *value, size_t value_len)
{
    waiter *w = arg;
    lattice_kv *kv = &w->kvs[i];
    kv->status = st;
    if (st == LATTICE_OK) {
        kv->value = lt_malloc(value_len ? value_len : 1);
        if (!kv->value) kv->status = LATTICE_ERR_NOMEM;
        else {
            if (value_len) memcpy(kv->value, value, value_len);
            kv->value_len = value_len;
        }
    }
    node_latch_count_down(&w->latch);
}

lattice_status lattice_tx_get_all(lattice_tx *tx, lattice_kv *kvs, size_t count)
{
    if (!tx || (!kvs && count)) return LATTICE_ERR_INVAL;
    lt_txc_key *keys = lt_calloc(count ? count : 1, sizeof *keys);
    if (!keys) return LATTICE_ERR_NOMEM;
    for (size_t i = 0; i < count; i++) {
        keys[i] = (lt_txc_key){kvs[i].key, kvs[i].key_len};
        kvs[i].value = NULL;
        kvs[i].value_len = 0;
        kvs[i].status = LATTICE_ERR_STOPPED;
    }
    waiter w = {.latch = NODE_LATCH(count), .kvs = kvs};
    lattice_status st = count ? read_keys(tx, keys, count, got_one, &w) : LATTICE_OK;
    lt_free(keys);
    if (st != LATTICE_OK) return st;
    node_latch_wait(&w.latch);
    for (size_t i = 0; i < count; i++)
        if (kvs[i].status != LATTICE_OK && kvs[i].status != LATTICE_ERR_NOT_FOUND) return kvs[i].status;
    return LATTICE_OK;
}

static void committed(void *arg, lattice_status st)
{
    waiter *w = arg;
    w->st = st;
    node_latch_count_down(&w->latch);
}

lattice_status lattice_tx_commit(lattice_tx *tx)
{
    waiter w = {.latch = NODE_LATCH(1)};
    lattice_status st = lattice_tx_commit_async(tx, committed, &w);
    if (st != LATTICE_OK) return st;
    node_latch_wait(&w.latch);
    return w.st;
}
