/*
 * tx: lattice/transaction.h - the interactive transaction API over txn/'s
 * coordinator (txn/txn.h): it asks the coordinator for each op, submits it
 * (lattice_op_submit) and hands the answer back.  The blocking calls wait
 * for the asynchronous ones on a condition variable.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "base/base.h"
#include "lattice/alloc.h"
#include "lattice/clock.h"
#include "lattice/log.h"
#include "lattice/transaction.h"
#include "node_int.h"
#include "node_tx.h"
#include "ops/ops.h"
#include "partition/partition.h"
#include "txn/txn.h"

struct lattice_tx {
    lattice_node *node;
    lt_txc *c;
    uint64_t deadline; /* lt_mono_ms */
    uint64_t stamp;    /* its start on the wall clock: wait-die's age */
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
    tx->deadline = deadline;
    tx->stamp = lt_wall_ms();
    lt_txc_across(tx->c); /* keys of any slot: a commit across partitions */
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
typedef node_tx_each_fn each_fn;

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
 * op (keys of one slot).  OK: fn runs once per key; an error: for none. */
static lattice_status read_group(lattice_tx *tx, const lt_txc_key *keys, size_t n, each_fn fn, void *arg)
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

/* A read over keys of several slots: one op per slot (an op reaches one
 * partition), every op built before any is sent and all sent in one
 * submit - so from then on only the data thread, one answer at a time,
 * touches the transaction (it is not safe against two threads). */
typedef struct multi_read {
    size_t n, left;
    read_ctx **g;      /* per op */
    uint8_t **payload; /* per op: its request, copied out of the transaction's scratch */
} multi_read;

static void multi_free(multi_read *m)
{
    for (size_t i = 0; i < m->n; i++) {
        if (m->g[i]) read_ctx_free(m->g[i]);
        lt_free(m->payload[i]);
    }
    lt_free(m->g);
    lt_free(m->payload);
    lt_free(m);
}

static void multi_answered(void *arg, size_t op_i, const lattice_op_result *r)
{
    multi_read *m = arg;
    read_answered(m->g[op_i], 0, r); /* frees it */
    m->g[op_i] = NULL;
    if (!--m->left) multi_free(m);
}

static lattice_status read_keys(lattice_tx *tx, const lt_txc_key *keys, size_t n, each_fn fn, void *arg)
{
    bool one = true;
    for (size_t i = 1; i < n && one; i++)
        one = lattice_partition_key_slot(keys[i].key, keys[i].len) == lattice_partition_key_slot(keys[0].key, keys[0].len);
    if (one) return read_group(tx, keys, n, fn, arg);
    if (!tx || !fn || !keys) return LATTICE_ERR_INVAL;
    lattice_status st = lt_txc_check(tx->c, lt_mono_ms());
    if (st == LATTICE_OK) st = lt_txc_can_join(tx->c, keys, n);
    if (st != LATTICE_OK) return st;
    /* The slots of the keys the transaction cannot answer itself. */
    uint16_t *slot = lt_calloc(n, sizeof *slot);
    bool *local = lt_calloc(n, sizeof *local);
    multi_read *m = lt_calloc(1, sizeof *m);
    lattice_op *ops = lt_calloc(n, sizeof *ops);
    if (m) {
        m->g = lt_calloc(n, sizeof *m->g);
        m->payload = lt_calloc(n, sizeof *m->payload);
    }
    st = slot && local && m && ops && m->g && m->payload ? LATTICE_OK : LATTICE_ERR_NOMEM;
    for (size_t i = 0; st == LATTICE_OK && i < n; i++) {
        bool found;
        const void *v;
        size_t vl;
        if (!keys[i].key && keys[i].len) st = LATTICE_ERR_INVAL;
        local[i] = lt_txc_local_get(tx->c, keys[i].key, keys[i].len, &found, &v, &vl);
        slot[i] = lattice_partition_key_slot(keys[i].key, keys[i].len);
    }
    /* One read_ctx and one op per slot, built now. */
    bool *taken = st == LATTICE_OK ? lt_calloc(n, sizeof *taken) : NULL;
    if (st == LATTICE_OK && !taken) st = LATTICE_ERR_NOMEM;
    for (size_t i = 0; st == LATTICE_OK && i < n; i++) {
        if (local[i] || taken[i]) continue;
        read_ctx *g = lt_calloc(1, sizeof *g);
        if (!g || !(g->index = lt_calloc(n, sizeof *g->index)) || !(g->keys = lt_calloc(n, sizeof *g->keys)) ||
            !(g->each = lt_calloc(n, sizeof *g->each))) {
            if (g) read_ctx_free(g);
            st = LATTICE_ERR_NOMEM;
            break;
        }
        g->tx = tx;
        g->fn = fn;
        g->arg = arg;
        m->g[m->n] = g;
        for (size_t j = i; st == LATTICE_OK && j < n; j++) {
            if (local[j] || taken[j] || slot[j] != slot[i]) continue;
            void *k = lt_malloc(keys[j].len ? keys[j].len : 1);
            if (!k) {
                st = LATTICE_ERR_NOMEM;
                break;
            }
            if (keys[j].len) memcpy(k, keys[j].key, keys[j].len);
            taken[j] = true;
            g->keys[g->n] = (lt_txc_key){k, keys[j].len};
            g->index[g->n++] = j;
        }
        lattice_op op;
        if (st == LATTICE_OK) st = lt_txc_read_op(tx->c, g->keys, g->n, &op);
        if (st == LATTICE_OK && !(m->payload[m->n] = lt_malloc(op.value_len ? op.value_len : 1))) st = LATTICE_ERR_NOMEM;
        if (st == LATTICE_OK) {
            memcpy(m->payload[m->n], op.value, op.value_len);
            op.value = (const char *)m->payload[m->n];
            op.key = g->keys[0].key; /* the op's key pointed into the transaction's scratch */
            ops[m->n] = op;
        }
        m->n++;
    }
    lt_free(taken);
    if (st != LATTICE_OK) {
        if (m && m->g) multi_free(m);
        else lt_free(m);
        lt_free(slot);
        lt_free(local);
        lt_free(ops);
        return st;
    }
    /* Nothing can fail from here on but the submit: the local answers first. */
    for (size_t i = 0; i < n; i++) {
        if (!local[i]) continue;
        bool found = false;
        const void *v = NULL;
        size_t vl = 0;
        lt_txc_local_get(tx->c, keys[i].key, keys[i].len, &found, &v, &vl);
        fn(arg, i, found ? LATTICE_OK : LATTICE_ERR_NOT_FOUND, v, vl);
    }
    lt_free(slot);
    lt_free(local);
    m->left = m->n;
    size_t nops = m->n;
    st = nops ? lattice_op_submit(tx->node, ops, nops, multi_answered, m) : LATTICE_OK;
    lt_free(ops);
    if (!nops) multi_free(m);
    else if (st != LATTICE_OK) {
        /* Not sent: every key read answers the error (fn runs once per key). */
        for (size_t o = 0; o < m->n; o++)
            for (size_t i = 0; i < m->g[o]->n; i++) fn(arg, m->g[o]->index[i], st, NULL, 0);
        multi_free(m);
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

/* ---- the commit across partitions (docs/TRANSACTIONS.md) ----
 * Every participant's PREPARE at once; once all answered, the DECIDE at the
 * home partition (commit only if all prepared), asked again while its
 * answer is lost (it is idempotent: the decision that stands comes back);
 * the caller's answer follows the decision; then each participant's
 * FINISH, asked again a few times (a participant's own sweep finishes
 * what is left once the deadline passed).  Callbacks run on the data
 * thread, one at a time. */

#define DECIDE_TRIES 8
#define FINISH_TRIES 4

typedef struct xcommit {
    node_metrics *m;
    lattice_node *node;
    lt_txc *c;
    lt_txx *x;
    lattice_tx_done_fn fn;
    void *arg;
    size_t n, answered, finishing;
    lattice_status outcome; /* the caller's answer, given once every finish was answered */
    lattice_status refusal; /* the first prepare refused as it stood */
    bool commit;
    bool finish_lost; /* a FINISH given up on: its participant's sweep needs the decision */
    int decide_tries;
    uint8_t *finish_tries;
    /* lt_mono_ms of its steps, for the slow log: sent, the last prepare
     * answered (and by which participant), decided */
    uint64_t t0, t_prepared, t_decided;
    size_t last_prepared;
} xcommit;

static void xcommit_free(xcommit *k)
{
    lt_txx_free(k->x);
    lt_txc_free(k->c);
    lt_free(k->finish_tries);
    lt_free(k);
}

static void x_decide(xcommit *k);
static void x_finish(xcommit *k, size_t i);
static void x_end(xcommit *k, lattice_status st);

/* One finish answered (or given up on: the participant's sweep finishes
 * it); after the last, the caller's answer. */
static void forgotten(void *arg, size_t i, const lattice_op_result *r)
{
    (void)arg;
    (void)i;
    (void)r; /* lost: the decision expires */
}

static void finish_done(xcommit *k)
{
    if (--k->finishing) return;
    lattice_op op;
    if (!k->finish_lost && lt_txx_forget_op(k->x, &op) == LATTICE_OK)
        (void)lattice_op_submit(k->node, &op, 1, forgotten, NULL);
    x_end(k, k->outcome);
    xcommit_free(k);
}

static void x_finished(void *arg, size_t i, const lattice_op_result *r);

typedef struct xpart {
    xcommit *k;
    size_t i;
} xpart;

static void x_prepared(void *arg, size_t i, const lattice_op_result *r)
{
    xcommit *k = arg;
    lattice_status st = lt_txx_prepared(k->x, i, r);
    if (st != LATTICE_OK && st != LATTICE_ERR_ABORTED && st != LATTICE_ERR_UNKNOWN && k->refusal == LATTICE_OK)
        k->refusal = st;
    if (++k->answered == k->n) {
        k->t_prepared = lt_mono_ms();
        k->last_prepared = i;
        x_decide(k);
    }
}

#define X_SLOW_MS 1000 /* a commit this long is logged with its steps */

static void x_end(xcommit *k, lattice_status st)
{
    node_metrics_tx(k->m, st);
    uint64_t now = lt_mono_ms();
    if (now - k->t0 >= X_SLOW_MS)
        LT_LOG(LT_WARN, "tx", "cache %s: a commit across %zu partitions took %llu ms (prepares %llu ms, the last from "
               "partition %u; decision %llu ms; finishes %llu ms): %s", lt_txc_cache(k->c), k->n,
               (unsigned long long)(now - k->t0), (unsigned long long)(k->t_prepared ? k->t_prepared - k->t0 : 0),
               lt_txx_part(k->x, k->last_prepared),
               (unsigned long long)(k->t_decided && k->t_prepared ? k->t_decided - k->t_prepared : 0),
               (unsigned long long)(k->t_decided ? now - k->t_decided : 0), lattice_strerror(st));
    if (st == LATTICE_ERR_UNKNOWN)
        LT_LOG(LT_WARN, "tx", "cache %s: transaction '%s' across %zu partitions: its decision's answer was lost: it "
               "applied everywhere or nowhere", lt_txc_cache(k->c), lt_txc_label(k->c), k->n);
    k->fn(k->arg, st);
}

static void x_decided(void *arg, size_t op_i, const lattice_op_result *r)
{
    (void)op_i;
    xcommit *k = arg;
    bool commit = false;
    lattice_status st = lt_txx_decided(k->x, r, &commit);
    if (st != LATTICE_OK) {
        if (++k->decide_tries < DECIDE_TRIES) {
            x_decide(k);
            return;
        }
        x_end(k, LATTICE_ERR_UNKNOWN); /* the participants settle it by the decision row */
        xcommit_free(k);
        return;
    }
    k->commit = commit;
    k->t_decided = lt_mono_ms();
    /* The caller hears once every finish was answered (or given up on):
     * then every write is in place - a DBSIZE, a SCAN or a walk after the
     * answer counts it - and a transaction it starts from the answer (a
     * retry of the same keys, above all) finds the locks released instead
     * of dying on its own predecessor's rows (wait-die). */
    k->outcome = commit ? LATTICE_OK : k->refusal != LATTICE_OK ? k->refusal : LATTICE_ERR_ABORTED;
    k->finishing = k->n + 1; /* + the hold released below */
    for (size_t i = 0; i < k->n; i++) x_finish(k, i);
    finish_done(k);
}

static void x_decide(xcommit *k)
{
    lattice_op op;
    lattice_status st = lt_txx_decide_op(k->x, lt_txx_all_prepared(k->x), &op);
    if (st == LATTICE_OK) st = lattice_op_submit(k->node, &op, 1, x_decided, k);
    if (st != LATTICE_OK) {
        lattice_op_result r = {.status = st};
        x_decided(k, 0, &r); /* counted as a try */
    }
}

static void x_finish(xcommit *k, size_t i)
{
    lattice_op op;
    xpart *xp = lt_malloc(sizeof *xp);
    lattice_status st = xp ? lt_txx_finish_op(k->x, i, k->commit, &op) : LATTICE_ERR_NOMEM;
    if (st == LATTICE_OK) {
        *xp = (xpart){k, i};
        st = lattice_op_submit(k->node, &op, 1, x_finished, xp);
    }
    if (st != LATTICE_OK) {
        lt_free(xp);
        k->finish_lost = true;
        finish_done(k); /* the participant's sweep finishes it */
    }
}

static void x_finished(void *arg, size_t op_i, const lattice_op_result *r)
{
    (void)op_i;
    xpart *xp = arg;
    xcommit *k = xp->k;
    size_t i = xp->i;
    lt_free(xp);
    if (lt_txx_finished(k->x, i, r) != LATTICE_OK) {
        if (++k->finish_tries[i] < FINISH_TRIES) {
            x_finish(k, i);
            return;
        }
        k->finish_lost = true;
    }
    finish_done(k);
}

static atomic_uint_fast64_t tx_seq;

/* The commit of tx's keys over several partitions; st the outcome of the
 * start (OK: fn will be called). */
static lattice_status commit_across(lattice_tx *tx, uint32_t partitions, lattice_tx_done_fn fn, void *arg)
{
    xcommit *k = lt_calloc(1, sizeof *k);
    if (!k) return LATTICE_ERR_NOMEM;
    char id[64];
    lattice_node_id(tx->node, id, sizeof id);
    uint64_t node = lt_fnv1a(id, strlen(id)) | 1;
    lt_txid txid = {node, atomic_fetch_add(&tx_seq, 1) + 1};
    uint64_t now = lt_wall_ms(), mono = lt_mono_ms();
    uint64_t left = tx->deadline > mono ? tx->deadline - mono : 0;
    lattice_status st = lt_txx_new(tx->c, partitions, txid, tx->stamp, now + left, &k->x);
    if (st != LATTICE_OK) {
        lt_free(k);
        tx_free(tx);
        return st;
    }
    k->m = lattice_node_metrics_of(tx->node);
    k->node = tx->node;
    k->c = tx->c;
    k->fn = fn;
    k->arg = arg;
    k->n = lt_txx_parts(k->x);
    k->finish_tries = lt_calloc(k->n, 1);
    k->t0 = lt_mono_ms();
    lt_free(tx); /* the coordinator lives on in k */
    if (!k->finish_tries) {
        xcommit_free(k);
        return LATTICE_ERR_NOMEM;
    }
    /* Every prepare built first, then all sent in one submit: from then on
     * only the data thread, one answer at a time, touches k and the
     * transaction. */
    size_t n = k->n;
    lattice_op *ops = lt_calloc(n, sizeof *ops);
    uint8_t **req = lt_calloc(n, sizeof *req);
    st = ops && req ? LATTICE_OK : LATTICE_ERR_NOMEM;
    for (size_t i = 0; st == LATTICE_OK && i < n; i++) {
        lattice_op op;
        st = lt_txx_prepare_op(k->x, i, &op);
        if (st == LATTICE_OK && !(req[i] = lt_malloc(op.value_len + op.key_len + 1))) st = LATTICE_ERR_NOMEM;
        if (st != LATTICE_OK) break;
        memcpy(req[i], op.value, op.value_len);
        memcpy(req[i] + op.value_len, op.key, op.key_len);
        op.value = (const char *)req[i];
        op.key = (const char *)req[i] + op.value_len;
        ops[i] = op;
    }
    if (st == LATTICE_OK) st = lattice_op_submit(k->node, ops, n, x_prepared, k);
    for (size_t i = 0; req && i < n; i++) lt_free(req[i]);
    lt_free(req);
    lt_free(ops);
    if (st != LATTICE_OK) {
        xcommit_free(k); /* nothing was sent: nothing to settle */
        return st;
    }
    return LATTICE_OK;
}

lattice_status node_tx_commit_in(lattice_tx *tx, uint32_t partitions, lattice_tx_done_fn fn, void *arg)
{
    lattice_status st = lt_txc_check(tx->c, lt_mono_ms());
    if (st == LATTICE_OK && lt_txc_partitions(tx->c, partitions) > 1) {
        lattice_node *node = tx->node;
        st = commit_across(tx, partitions, fn, arg);
        if (st != LATTICE_OK) node_metrics_tx(lattice_node_metrics_of(node), st);
        return st;
    }
    if (st != LATTICE_OK) node_metrics_tx(lattice_node_metrics_of(tx->node), st);
    tx_free(tx);
    return st == LATTICE_OK ? LATTICE_ERR_INVAL : st; /* one partition: not for this path */
}

lattice_status node_tx_read_all(lattice_tx *tx, const lt_txc_key *keys, size_t n, node_tx_each_fn fn, void *arg)
{
    return read_keys(tx, keys, n, fn, arg);
}

lt_txc *node_tx_coord(lattice_tx *tx) { return tx->c; }

uint64_t lattice_tx_age(const lattice_tx *tx) { return tx ? tx->stamp : 0; }

void lattice_tx_keep_age(lattice_tx *tx, uint64_t age)
{
    if (tx && age && age < tx->stamp) tx->stamp = age;
}

lattice_status lattice_tx_commit_async(lattice_tx *tx, lattice_tx_done_fn fn, void *arg)
{
    if (!tx || !fn) {
        if (tx) tx_free(tx);
        return LATTICE_ERR_INVAL;
    }
    lattice_status st = lt_txc_check(tx->c, lt_mono_ms());
    if (st == LATTICE_OK && !lt_txc_one_slot(tx->c)) {
        uint32_t partitions = 0;
        lattice_cache_info *ci = NULL;
        size_t nc = 0;
        /* A commit from a callback (the data thread's role) reads the count
         * itself: a grid call would wait for the thread it runs on. */
        if (lattice_ops_cache_partitions(lattice_node_ops(tx->node), lt_txc_cache(tx->c), &partitions))
            st = partitions ? LATTICE_OK : LATTICE_ERR_NO_CACHE;
        else if ((st = lattice_caches_info(tx->node, &ci, &nc)) == LATTICE_OK) {
            st = LATTICE_ERR_NO_CACHE;
            for (size_t i = 0; i < nc; i++)
                if (!strcmp(ci[i].name, lt_txc_cache(tx->c))) {
                    partitions = ci[i].partitions;
                    st = LATTICE_OK;
                }
            lattice_caches_info_free(ci, nc);
        }
        if (st == LATTICE_OK && lt_txc_partitions(tx->c, partitions) > 1) {
            lattice_node *node = tx->node;
            st = commit_across(tx, partitions, fn, arg);
            if (st != LATTICE_OK) node_metrics_tx(lattice_node_metrics_of(node), st);
            return st;
        }
    }
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
