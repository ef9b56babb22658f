/*
 * txexec: a LATTICE_OP_TXN with LATTICE_OP_ACROSS - sub-operations on keys
 * of any partitions, run as one strictly serializable transaction
 * (docs/TRANSACTIONS.md, "Sub-operations across partitions").  RESP's
 * MULTI/EXEC, MSET, DEL, ... over keys of several slots come this way.
 *
 *  1. read: an interactive transaction (tx.c) reads every key the request
 *     names - each key's value, expiry, type and version at its primary;
 *  2. the request's watches (WATCH) are checked against those reads: one
 *     changed, the answer is R_ABORTED and nothing is written;
 *  3. worked out: the ops path runs the sub-operations on exactly the
 *     entries read (lattice_ops_txn_eval: the primary's own value
 *     semantics), which gives the answer and each written key's final
 *     state; those become the transaction's writes;
 *  4. commit across partitions (tx.c): every read is validated at its
 *     primary by the prepare, so the answer stands only if no key read
 *     changed since; an abort (a conflict, wait-die) starts again at 1 with
 *     the same age, until the deadline.
 * When every key turns out to lie in one partition, the request goes to
 * that primary as it is, in one step.  Everything after the first submit
 * runs on the data thread, one callback at a time.
 */
#include <string.h>

#include "lattice/alloc.h"
#include "lattice/clock.h"
#include "lattice/log.h"
#include "lattice/txn.h"
#include "node_int.h"
#include "node_tx.h"
#include "ops/ops.h"
#include "partition/partition.h"

#define TRIES_MAX 1000 /* attempts of one request; the 10 s deadline ends it sooner */

typedef struct xop {
    lattice_node *node;
    lattice_op_fn fn;
    void *arg;
    size_t index;         /* of the op in its submit */
    lattice_op op;        /* the request (pointers into buf) */
    uint8_t *buf;         /* cache name, key, request */
    lt_txc_key *keys;     /* every key it names (pointers into buf), repeats kept */
    size_t n_keys;
    lattice_txn_watch *w; /* its watches (pointers into buf) */
    size_t n_w;
    lattice_tx *tx;
    size_t left;          /* reads not answered yet */
    lattice_status read_st;
    uint64_t deadline;    /* lt_mono_ms */
    uint64_t stamp;       /* the first attempt's */
    uint64_t began;       /* lt_mono_ms of the request */
    lattice_status last;  /* the last attempt's end (ABORTED, AGAIN ...), for the slow log */
    void *result;
    size_t result_len;
    int tries;
} xop;

static void xop_free(xop *x)
{
    if (x->tx) lattice_tx_rollback(x->tx);
    lt_free(x->result);
    lt_free(x->keys);
    lt_free(x->w);
    lt_free(x->buf);
    lt_free(x);
}

#define SLOW_MS 1000 /* a request this long is logged */

static void answer(xop *x, const lattice_op_result *r)
{
    uint64_t took = lt_mono_ms() - x->began;
    if (took >= SLOW_MS)
        LT_LOG(LT_WARN, "tx", "cache %s: a request over %zu keys across partitions took %llu ms in %d tries (the last "
               "ended %s; answered %s)", x->op.cache ? x->op.cache : "default", x->n_keys, (unsigned long long)took,
               x->tries + 1, lattice_strerror(x->last), lattice_strerror(r->status));
    x->fn(x->arg, x->index, r);
    xop_free(x);
}

static void answer_status(xop *x, lattice_status st)
{
    lattice_op_result r = {.status = st};
    answer(x, &r);
}

bool node_txexec_wants(const lattice_op *ops, size_t n)
{
    for (size_t i = 0; ops && i < n; i++)
        if (ops[i].kind == LATTICE_OP_TXN && (ops[i].flags & LATTICE_OP_ACROSS)) return true;
    return false;
}

/* The keys and watches of the request in x->op.value (lattice/txn.h). */
static lattice_status parse(xop *x)
{
    lattice_txn_buf b = {(uint8_t *)(uintptr_t)x->op.value, 0, x->op.value_len, false};
    if (lattice_txn_get_u(&b, 1) != LATTICE_TXN_FORMAT) return LATTICE_ERR_INVAL;
    size_t nw = (size_t)lattice_txn_get_u(&b, 4);
    if (b.failed || nw > x->op.value_len / 21) return LATTICE_ERR_INVAL;
    x->w = lt_calloc(nw ? nw : 1, sizeof *x->w);
    if (!x->w) return LATTICE_ERR_NOMEM;
    for (size_t i = 0; i < nw; i++) {
        lattice_txn_watch *w = &x->w[i];
        w->key = lattice_txn_get_bytes(&b, &w->key_len);
        w->mode = (uint8_t)lattice_txn_get_u(&b, 1);
        w->version = lattice_txn_get_u(&b, 8);
        w->epoch = lattice_txn_get_u(&b, 8);
    }
    x->n_w = nw;
    size_t n = (size_t)lattice_txn_get_u(&b, 4);
    if (b.failed || n > x->op.value_len / 25) return LATTICE_ERR_INVAL;
    size_t cap = nw + 2 * n + 1;
    x->keys = lt_calloc(cap, sizeof *x->keys);
    if (!x->keys) return LATTICE_ERR_NOMEM;
    for (size_t i = 0; i < nw; i++) x->keys[x->n_keys++] = (lt_txc_key){x->w[i].key, x->w[i].key_len};
    for (size_t i = 0; i < n; i++) {
        lattice_op sub;
        if (!lattice_txn_request_next(&b, &sub)) return LATTICE_ERR_INVAL;
        int kind = (int)sub.kind;
        if (kind == LATTICE_TXN_PREPARE || kind == LATTICE_TXN_FINISH || kind == LATTICE_TXN_DECIDE)
            return LATTICE_ERR_INVAL; /* the coordinator's own */
        lattice_txn_keys it = lattice_txn_keys_of(&sub); /* BPOP's and SETOP's keys too */
        const void *k;
        size_t kl;
        while (lattice_txn_keys_next(&it, &k, &kl)) {
            if (x->n_keys == cap) {
                lt_txc_key *p = lt_realloc(x->keys, 2 * cap * sizeof *p);
                if (!p) return LATTICE_ERR_NOMEM;
                x->keys = p;
                cap *= 2;
            }
            x->keys[x->n_keys++] = (lt_txc_key){k, kl};
        }
    }
    return b.len == b.cap ? LATTICE_OK : LATTICE_ERR_INVAL;
}

static void attempt(xop *x);
static void recheck(xop *x);

/* ---- one key at its primary, as it is: every key in one partition ---- */

static void plain_answered(void *arg, size_t i, const lattice_op_result *r)
{
    (void)i;
    answer(arg, r);
}

static void run_plain(xop *x)
{
    lattice_op op = x->op;
    op.flags &= ~LATTICE_OP_ACROSS;
    lattice_status st = lattice_op_submit(x->node, &op, 1, plain_answered, x);
    if (st != LATTICE_OK) answer_status(x, st);
}

/* ---- 4. the commit ---- */

static void committed(void *arg, lattice_status st)
{
    xop *x = arg;
    x->tx = NULL; /* the commit took it */
    x->last = st;
    if (st == LATTICE_OK) {
        lattice_op_result r = {.status = LATTICE_OK, .value = x->result, .value_len = x->result_len};
        answer(x, &r);
        return;
    }
    if (st == LATTICE_ERR_ABORTED && ++x->tries < TRIES_MAX && lt_mono_ms() < x->deadline) {
        lt_free(x->result);
        x->result = NULL;
        attempt(x); /* a conflict: again, older than anyone who began since */
        return;
    }
    answer_status(x, st);
}

static lattice_status final_state(void *arg, const void *key, size_t key_len, bool live, const void *value,
                                  size_t value_len, uint64_t expire_ms, uint8_t type)
{
    xop *x = arg;
    return lt_txc_write_as(node_tx_coord(x->tx), key, key_len, value, value_len, !live, expire_ms, type);
}

/* ---- 4'. a read-only request: the reads looked at again ----
 * Every key's version read once more, all at once, after every first read
 * was answered.  Unchanged: each key held the value read from its first
 * read to its second, so all of them at once at any instant between the
 * two rounds - the request's point, between its invocation and its answer
 * (a read never answers while a prepared transaction holds the key for
 * writing, so no instant falls inside one's finish).  Changed: again from
 * the reads.  No locks, no rows: writers never wait for a reader. */

typedef struct recheck_ctx {
    xop *x;
    size_t left;
    bool same, failed;
    lattice_status st;
    uint8_t **req; /* per op: its request ... */
    size_t *req_len; /* ... and its length */
    size_t n;
} recheck_ctx;

static void recheck_free(recheck_ctx *k)
{
    for (size_t i = 0; k->req && i < k->n; i++) lt_free(k->req[i]);
    lt_free(k->req);
    lt_free(k->req_len);
    lt_free(k);
}

static void rechecked(void *arg, size_t i, const lattice_op_result *r)
{
    recheck_ctx *k = arg;
    xop *x = k->x;
    lt_txc *c = node_tx_coord(x->tx);
    lattice_txn_buf rb = {0}, qb;
    long n = r->status == LATTICE_OK ? lattice_txn_result_begin(&rb, r->value, r->value_len) : -1;
    long nq = lattice_txn_request_begin(&qb, k->req[i], k->req_len[i]);
    if (n < 0 || n != nq) {
        k->failed = true;
        if (r->status != LATTICE_OK && k->st == LATTICE_OK) k->st = r->status;
    }
    for (long j = 0; !k->failed && j < n; j++) {
        lattice_txn_sub_result v;
        lattice_op sub;
        lt_txc_read was;
        uint8_t mode;
        uint64_t version, epoch;
        if (!lattice_txn_request_next(&qb, &sub) || !lattice_txn_result_next(&rb, &v) ||
            !lattice_txn_version_watch(&v, &mode, &version, &epoch) || !lt_txc_read_of(c, sub.key, sub.key_len, &was)) {
            k->failed = true;
            break;
        }
        if (mode != was.mode || version != was.version || epoch != was.epoch) k->same = false;
    }
    if (--k->left) return;
    bool same = k->same, failed = k->failed;
    lattice_status st = k->st;
    recheck_free(k);
    if (!failed && same) {
        lattice_op_result ok = {.status = LATTICE_OK, .value = x->result, .value_len = x->result_len};
        answer(x, &ok);
        return;
    }
    lattice_tx_rollback(x->tx);
    x->tx = NULL;
    lt_free(x->result);
    x->result = NULL;
    x->last = failed ? (st != LATTICE_OK ? st : LATTICE_ERR_PROTO) : LATTICE_ERR_ABORTED;
    if (++x->tries < TRIES_MAX && lt_mono_ms() < x->deadline && (!failed || st == LATTICE_OK || st == LATTICE_ERR_AGAIN)) {
        attempt(x);
        return;
    }
    answer_status(x, failed ? (st != LATTICE_OK ? st : LATTICE_ERR_PROTO) : LATTICE_ERR_ABORTED);
}

static void recheck(xop *x)
{
    recheck_ctx *k = lt_calloc(1, sizeof *k);
    lattice_op *ops = lt_calloc(x->n_keys, sizeof *ops);
    lattice_op *subs = lt_calloc(x->n_keys, sizeof *subs);
    bool *taken = lt_calloc(x->n_keys, sizeof *taken);
    if (k) {
        k->req = lt_calloc(x->n_keys, sizeof *k->req);
        k->req_len = lt_calloc(x->n_keys, sizeof *k->req_len);
    }
    lattice_status st = k && ops && subs && taken && k->req && k->req_len ? LATTICE_OK : LATTICE_ERR_NOMEM;
    /* One op of VERSION reads per slot (an op reaches one partition). */
    for (size_t i = 0; st == LATTICE_OK && i < x->n_keys; i++) {
        if (taken[i]) continue;
        uint16_t slot = lattice_partition_key_slot(x->keys[i].key, x->keys[i].len);
        size_t m = 0;
        for (size_t j = i; j < x->n_keys; j++) {
            if (taken[j] || lattice_partition_key_slot(x->keys[j].key, x->keys[j].len) != slot) continue;
            taken[j] = true;
            subs[m++] = (lattice_op){.kind = (lattice_op_kind)LATTICE_TXN_VERSION, .cache = x->op.cache,
                                     .key = x->keys[j].key, .key_len = x->keys[j].len};
        }
        size_t cap = lattice_txn_request_size(NULL, 0, subs, m);
        uint8_t *req = lt_malloc(cap);
        if (!req || !lattice_txn_request_encode(NULL, 0, subs, m, req, cap)) {
            lt_free(req);
            st = LATTICE_ERR_NOMEM;
            break;
        }
        k->req[k->n] = req;
        k->req_len[k->n] = cap;
        ops[k->n++] = (lattice_op){.kind = LATTICE_OP_TXN, .cache = x->op.cache, .key = subs[0].key,
                                   .key_len = subs[0].key_len, .value = (const char *)req, .value_len = cap};
    }
    lt_free(subs);
    lt_free(taken);
    if (st == LATTICE_OK) {
        k->x = x;
        k->same = true;
        k->left = k->n;
        st = lattice_op_submit(x->node, ops, k->n, rechecked, k);
    }
    lt_free(ops);
    if (st != LATTICE_OK) {
        if (k) recheck_free(k);
        answer_status(x, st);
    }
}

static bool watch_holds(lt_txc *c, const lattice_txn_watch *w)
{
    lt_txc_read r;
    if (!lt_txc_read_of(c, w->key, w->key_len, &r)) return false;
    if (w->mode == LATTICE_TXN_W_ABSENT) return !r.live;
    return r.mode == w->mode && r.version == w->version && r.epoch == w->epoch;
}

/* ---- 2., 3. every read answered ---- */

static void worked_out(xop *x)
{
    if (x->read_st != LATTICE_OK) {
        x->last = x->read_st;
        if (x->read_st == LATTICE_ERR_AGAIN && ++x->tries < TRIES_MAX && lt_mono_ms() < x->deadline) {
            lattice_tx_rollback(x->tx);
            x->tx = NULL;
            attempt(x);
            return;
        }
        answer_status(x, x->read_st);
        return;
    }
    lt_txc *c = node_tx_coord(x->tx);
    for (size_t i = 0; i < x->n_w; i++)
        if (!watch_holds(c, &x->w[i])) {
            static const uint8_t none[5] = {LATTICE_TXN_FORMAT, 0, 0, 0, 0};
            lattice_op_result r = {.status = LATTICE_OK, .value = none, .value_len = sizeof none,
                                   .flags = LATTICE_OP_R_ABORTED};
            answer(x, &r);
            return;
        }
    struct lattice_ops *ops = lattice_node_ops(x->node);
    uint32_t parts = 0;
    if (!ops || !lattice_ops_cache_partitions(ops, x->op.cache, &parts) || !parts) {
        answer_status(x, ops ? LATTICE_ERR_NO_CACHE : LATTICE_ERR_STOPPED);
        return;
    }
    if (lt_txc_partitions(c, parts) <= 1) { /* one primary does it in one step */
        lattice_tx_rollback(x->tx);
        x->tx = NULL;
        run_plain(x);
        return;
    }
    lattice_ops_txn_entry *e = lt_calloc(x->n_keys, sizeof *e);
    if (!e) {
        answer_status(x, LATTICE_ERR_NOMEM);
        return;
    }
    for (size_t i = 0; i < x->n_keys; i++) {
        lt_txc_read r = {0};
        lt_txc_read_of(c, x->keys[i].key, x->keys[i].len, &r);
        e[i] = (lattice_ops_txn_entry){x->keys[i].key, x->keys[i].len, r.live, r.value, r.value_len, r.expire_ms,
                                       r.type};
    }
    /* Only the request's subs: its watches were just checked. */
    lattice_status st = lattice_ops_txn_eval(ops, x->op.cache, e, x->n_keys, x->op.value, x->op.value_len,
                                             &x->result, &x->result_len, final_state, x);
    lt_free(e);
    if (st != LATTICE_OK) {
        answer_status(x, st);
        return;
    }
    /* Read-only: a second look instead of a commit.  (Falling back to the
     * commit's read locks after a few failed looks was tried: readers then
     * form wait cycles with writers, each broken only by wait-die's
     * patience, and a bank of 3 writers and 2 readers on 8 keys took two
     * minutes instead of two seconds.) */
    if (lt_txc_writes(c) == 0) {
        recheck(x);
        return;
    }
    lattice_tx *tx = x->tx;
    st = node_tx_commit_in(tx, parts, committed, x);
    if (st != LATTICE_OK) {
        x->tx = NULL; /* freed by the call */
        answer_status(x, st);
    }
}

static void read_one(void *arg, size_t i, lattice_status st, const void *value, size_t value_len)
{
    (void)i;
    (void)value;
    (void)value_len;
    xop *x = arg;
    if (st != LATTICE_OK && st != LATTICE_ERR_NOT_FOUND && x->read_st == LATTICE_OK) x->read_st = st;
    if (--x->left == 0) worked_out(x);
}

/* ---- 1. the reads ---- */

static void attempt(xop *x)
{
    uint64_t now = lt_mono_ms();
    int left = x->deadline > now ? (int)(x->deadline - now) : 0;
    if (!left) {
        answer_status(x, LATTICE_ERR_TIMEOUT);
        return;
    }
    lattice_status st = lattice_tx_begin(x->node, x->op.cache, left, "across", &x->tx);
    if (st != LATTICE_OK) {
        answer_status(x, st);
        return;
    }
    lt_txc_any_type(node_tx_coord(x->tx)); /* a hash or a list is read as stored, for EXISTS, TYPE, DEL ... */
    if (x->stamp) lattice_tx_keep_age(x->tx, x->stamp);
    else x->stamp = lattice_tx_age(x->tx);
    x->left = x->n_keys;
    x->read_st = LATTICE_OK;
    st = node_tx_read_all(x->tx, x->keys, x->n_keys, read_one, x);
    if (st != LATTICE_OK) answer_status(x, st);
}

static lattice_status start(lattice_node *node, const lattice_op *op, size_t index, lattice_op_fn fn, void *arg)
{
    if (!op->key || !op->value || !op->value_len) return LATTICE_ERR_INVAL;
    size_t cl = op->cache ? strlen(op->cache) + 1 : 0;
    xop *x = lt_calloc(1, sizeof *x);
    uint8_t *buf = x ? lt_malloc(cl + op->key_len + op->value_len + 1) : NULL;
    if (!buf) {
        lt_free(x);
        return LATTICE_ERR_NOMEM;
    }
    x->buf = buf;
    if (cl) memcpy(buf, op->cache, cl);
    memcpy(buf + cl, op->key, op->key_len);
    memcpy(buf + cl + op->key_len, op->value, op->value_len);
    x->op = *op;
    x->op.cache = cl ? (const char *)buf : NULL;
    x->op.key = (const char *)buf + cl;
    x->op.value = (const char *)buf + cl + op->key_len;
    x->node = node;
    x->fn = fn;
    x->arg = arg;
    x->index = index;
    lattice_status st = parse(x);
    if (st == LATTICE_OK && !x->n_keys) st = LATTICE_ERR_INVAL;
    if (st != LATTICE_OK) {
        xop_free(x);
        return st;
    }
    x->began = lt_mono_ms();
    x->deadline = x->began + LATTICE_TX_TIMEOUT_MS;
    attempt(x); /* from here on, answered through fn */
    return LATTICE_OK;
}

/* The other ops of a mixed submit: their indexes in the caller's. */
typedef struct rest {
    lattice_op_fn fn;
    void *arg;
    size_t n, left;
    size_t *index;
} rest;

static void rest_answered(void *arg, size_t i, const lattice_op_result *r)
{
    rest *m = arg;
    m->fn(m->arg, m->index[i], r);
    if (--m->left == 0) {
        lt_free(m->index);
        lt_free(m);
    }
}

lattice_status node_txexec_submit(lattice_node *node, const lattice_op *ops, size_t n, lattice_op_fn fn, void *arg,
                                  bool inline_reads)
{
    if (!node || !ops || !n || !fn) return LATTICE_ERR_INVAL;
    size_t others = 0;
    for (size_t i = 0; i < n; i++) others += !(ops[i].kind == LATTICE_OP_TXN && (ops[i].flags & LATTICE_OP_ACROSS));
    if (others) {
        rest *m = lt_calloc(1, sizeof *m);
        lattice_op *o = lt_calloc(others, sizeof *o);
        size_t *ix = lt_calloc(others, sizeof *ix);
        if (!m || !o || !ix) {
            lt_free(m);
            lt_free(o);
            lt_free(ix);
            return LATTICE_ERR_NOMEM;
        }
        for (size_t i = 0, j = 0; i < n; i++)
            if (!(ops[i].kind == LATTICE_OP_TXN && (ops[i].flags & LATTICE_OP_ACROSS))) {
                o[j] = ops[i];
                ix[j++] = i;
            }
        *m = (rest){fn, arg, others, others, ix};
        lattice_status st = node_metrics_submit(lattice_node_metrics_of(node), lattice_node_ops(node), o, others,
                                                rest_answered, m, inline_reads);
        lt_free(o);
        if (st != LATTICE_OK) {
            lt_free(ix);
            lt_free(m);
            return st;
        }
    }
    for (size_t i = 0; i < n; i++) {
        if (!(ops[i].kind == LATTICE_OP_TXN && (ops[i].flags & LATTICE_OP_ACROSS))) continue;
        lattice_status st = start(node, &ops[i], i, fn, arg);
        if (st != LATTICE_OK) {
            lattice_op_result r = {.status = st};
            fn(arg, i, &r); /* a bad op: answered through fn, as lattice_op_submit's */
        }
    }
    return LATTICE_OK;
}
