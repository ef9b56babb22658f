/*
 * txlock: the locks of the transactions prepared in this node's partitions
 * (data thread; docs/TRANSACTIONS.md, "Across partitions").
 *
 * A transaction across partitions holds its keys from its prepare to its
 * finish by a prepared row in each partition it touches (txn/txn.h: an
 * internal key, the record of its reads and writes).  The locks are not
 * state of their own: they are read off those rows.  The store lists each
 * partition's reserved keys with a generation that moves with every change
 * to one of them (storage.h), whichever path made it - this node's primary
 * writing the row, a backup applying it, a rebalance loading it, a log
 * replay, a clear - so a partition's table is rebuilt from its rows when
 * the generation moved since it was built, and a new primary holds exactly
 * the locks its rows say, with nothing to hand over.
 *
 * A partition that never held a reserved key costs one atomic load a check.
 */
#include <stdio.h>
#include <string.h>

#include "base/base.h"
#include "lattice/alloc.h"
#include "lattice/clock.h"
#include "lattice/log.h"
#include "lattice/txn.h"
#include "ops_int.h"
#include "txn/txn.h"

/* A younger prepare that met an older holder (wait-die's "die"), waiting
 * a little first: since when. */
typedef struct patient {
    lt_txid id;
    uint32_t partition;
    uint64_t since_ms; /* lt_mono_ms */
} patient;

typedef struct txlocks {
    lattice_store *store; /* the tables below were read off this store */
    uint32_t parts;
    lt_txp_locks **t; /* per partition: NULL until first needed */
    uint64_t *gen;    /* the store's reserved generation t[p] was built at */
    bool *bad;        /* t[p] could not be built (no memory): everything in p waits */
    patient *pat;     /* txlock_patience */
    size_t n_pat, cap_pat;
} txlocks;

static void txlocks_free(txlocks *x)
{
    if (!x) return;
    lt_free(x->pat);
    for (uint32_t p = 0; x->t && p < x->parts; p++) lt_txp_locks_free(x->t[p]);
    lt_free(x->t);
    lt_free(x->gen);
    lt_free(x->bad);
    lt_free(x);
}

void txlock_cache_gone(lattice_meta_cache *c)
{
    txlocks_free(c->txlocks);
    c->txlocks = NULL;
}

static txlocks *txlocks_of(lattice_meta_cache *c)
{
    txlocks *x = c->txlocks;
    if (x && x->store == c->store && x->parts == c->cfg.partitions) return x;
    txlocks_free(x); /* the store was replaced (a restart's recovered copy, a rejoin): read it afresh */
    c->txlocks = NULL;
    x = lt_calloc(1, sizeof *x);
    if (!x) return NULL;
    x->store = c->store;
    x->parts = c->cfg.partitions;
    x->t = lt_calloc(x->parts, sizeof *x->t);
    x->gen = lt_calloc(x->parts, sizeof *x->gen);
    x->bad = lt_calloc(x->parts, sizeof *x->bad);
    if (!x->t || !x->gen || !x->bad) {
        txlocks_free(x);
        return NULL;
    }
    c->txlocks = x;
    return x;
}

static int add_row(void *arg, const lattice_store_item *it)
{
    lt_txp_locks *t = arg;
    lt_txp_kind kind;
    lt_txid id;
    if (!lt_txp_key_parse(it->key, it->key_len, &kind, &id) || kind != LT_TXP_PREPARED) return 0; /* a decision */
    lt_txp_rec r;
    lattice_status st = lt_txp_rec_decode(it->value, it->value_len, &r);
    if (st == LATTICE_ERR_INVAL) {
        LT_LOG(LT_ERROR, "data", "partition %u: a prepared transaction's record does not decode: its keys are not locked",
               it->partition);
        return 0;
    }
    if (st == LATTICE_OK) st = lt_txp_locks_add(t, &r);
    lt_txp_rec_free(&r);
    return st == LATTICE_OK ? 0 : 1;
}

lt_txp_locks *txlock_table(lattice_meta_cache *c, uint32_t p, bool *unknown)
{
    *unknown = false;
    if (!c->store || p >= c->cfg.partitions) return NULL;
    uint64_t g = lattice_store_reserved_gen(c->store, p, NULL);
    txlocks *x = c->txlocks;
    if (!g && (!x || x->store == c->store)) return NULL; /* never held a reserved key */
    if (!(x = txlocks_of(c))) {
        *unknown = true;
        return NULL;
    }
    if (x->t[p] && x->gen[p] == g && !x->bad[p]) return x->t[p];
    uint8_t pre[4];
    size_t pl = lt_txp_key_prefix(LT_TXP_PREPARED, pre);
    if (!lattice_store_reserved_held(c->store, p, pre, pl)) return NULL; /* no prepared row: nothing to read */
    lt_txp_locks *t = lt_txp_locks_new();
    uint64_t built = 0;
    if (!t || lattice_store_reserved_each(c->store, p, add_row, t, &built) != 0) {
        lt_txp_locks_free(t);
        if (!x->bad[p]) LT_LOG(LT_ERROR, "data", "cache %s: partition %u: out of memory reading its prepared "
                               "transactions: its operations wait", c->cfg.name, p);
        x->bad[p] = true;
        *unknown = true;
        return NULL;
    }
    lt_txp_locks_free(x->t[p]);
    x->t[p] = t;
    x->gen[p] = built;
    x->bad[p] = false;
    return t;
}

void txlock_wrote(lattice_meta_cache *c, uint32_t p, uint64_t g0, const lt_txp_rec *added, const lt_txid *released)
{
    txlocks *x = c->txlocks;
    if (!x || x->store != c->store || p >= x->parts || !x->t[p] || x->bad[p] || x->gen[p] != g0) return;
    uint64_t g1 = lattice_store_reserved_gen(c->store, p, NULL);
    if (g1 != g0 + 1) return; /* another change besides: read off the rows when asked */
    if (added && lt_txp_locks_add(x->t[p], added) != LATTICE_OK) return; /* as it was: stale, rebuilt when asked */
    if (released) lt_txp_locks_release(x->t[p], *released);
    x->gen[p] = g1;
}

bool txlock_blocks(lattice_meta_cache *c, uint32_t p, const void *key, size_t key_len, bool write)
{
    bool unknown;
    lt_txp_locks *t = txlock_table(c, p, &unknown);
    if (unknown) return true;
    return t && lt_txp_locks_count(t) && lt_txp_locks_holders(t, key, key_len, write, NULL, NULL) > 0;
}

/* ---- operations waiting for a lock ----
 *
 * An operation on a locked key waits here, whole (its key and value
 * copied), until the partition's prepared rows change - the transaction
 * finished, or another prepared - or the view moves; then it runs again
 * through primary_rerun, which routes it elsewhere if this node no longer
 * leads the partition, or parks it again if the key is still locked.  The
 * rows change on any path (a finish applied here or replicated here), so
 * the check is the partition's reserved generation, polled at each tick:
 * a waiter costs one atomic load every TICK_MS. */

typedef struct txwait {
    struct txwait *next;
    uint64_t cache_serial, gen, major, meta;
    uint32_t partition;
    deferred_read *op;
    uint64_t due_ms; /* lt_mono_ms: run again then at the latest (0: only on a change) */
} txwait;

/* ---- wait-die, with patience ----
 * Wait-die kills a younger prepare at once when an older transaction holds
 * one of its keys.  Most holders finish within a few round trips, so the
 * younger one first waits TXLOCK_PATIENCE_MS for them (parked like any
 * waiter, run again as rows change) and dies only if the key is still held
 * then.  Deadlock stays impossible to wait out: a cycle needs a younger
 * transaction waiting, and that wait is bounded. */

/* 200, not 50: with 64 putAll transactions of 100 keys in flight a
 * holder's commit outlasted 50 ms, and most retries died again. */
#define TXLOCK_PATIENCE_MS 200
#define TXLOCK_PATIENT_MAX 4096 /* remembered prepares; more die at once */

bool txlock_patience(lattice_meta_cache *c, uint32_t p, uint64_t id_node, uint64_t id_seq, uint64_t now, uint64_t *due)
{
    lt_txid id = {id_node, id_seq};
    txlocks *x = txlocks_of(c);
    if (!x) return true;
    for (size_t i = 0; i < x->n_pat; i++) {
        patient *t = &x->pat[i];
        if (t->partition != p || !lt_txid_eq(t->id, id)) continue;
        if (now >= t->since_ms + TXLOCK_PATIENCE_MS) {
            x->pat[i] = x->pat[--x->n_pat];
            return true;
        }
        *due = t->since_ms + TXLOCK_PATIENCE_MS;
        return false;
    }
    /* Forget those that never came back (their coordinator gave up, or
     * they were granted): older than a few patiences. */
    for (size_t i = 0; i < x->n_pat;)
        if (now >= x->pat[i].since_ms + 4 * TXLOCK_PATIENCE_MS) x->pat[i] = x->pat[--x->n_pat];
        else i++;
    if (x->n_pat == x->cap_pat) {
        size_t nc = x->cap_pat ? 2 * x->cap_pat : 16;
        patient *np = nc <= TXLOCK_PATIENT_MAX ? lt_realloc(x->pat, nc * sizeof *np) : NULL;
        if (!np) return true;
        x->pat = np;
        x->cap_pat = nc;
    }
    x->pat[x->n_pat++] = (patient){id, p, now};
    *due = now + TXLOCK_PATIENCE_MS;
    return false;
}

void txlock_patience_end(lattice_meta_cache *c, uint32_t p, uint64_t id_node, uint64_t id_seq)
{
    lt_txid id = {id_node, id_seq};
    txlocks *x = c->txlocks;
    for (size_t i = 0; x && i < x->n_pat; i++)
        if (x->pat[i].partition == p && lt_txid_eq(x->pat[i].id, id)) {
            x->pat[i] = x->pat[--x->n_pat];
            return;
        }
}

lattice_status txlock_park(lattice_ops *d, lattice_meta_cache *c, const exec_in *in, const origin *org,
                           const char *origin_id, uint64_t seq)
{
    return txlock_park_until(d, c, in, org, origin_id, seq, 0);
}

lattice_status txlock_park_until(lattice_ops *d, lattice_meta_cache *c, const exec_in *in, const origin *org,
                                 const char *origin_id, uint64_t seq, uint64_t due_ms)
{
    txwait *w = lt_malloc(sizeof *w);
    deferred_read *op = w ? deferred_new(in, org, origin_id, seq) : NULL;
    if (!op) {
        lt_free(w);
        return LATTICE_ERR_NOMEM;
    }
    *w = (txwait){d->txwaits, c->serial, lattice_store_reserved_gen(c->store, in->partition, NULL), d->major,
                  lattice_meta_version(d->meta), in->partition, op, due_ms};
    d->txwaits = w;
    d->txwaiting++;
    return LATTICE_OK;
}

static void end_wait(lattice_ops *d, txwait *w, lattice_status st)
{
    lattice_meta_cache *c = st == LATTICE_OK ? lattice_meta_cache_by_serial(d->meta, w->cache_serial) : NULL;
    if (c) {
        primary_rerun(d, c, w->op); /* may park it again */
    } else if (w->op->org.local) {
        retry_later(d, w->op->org.local, st == LATTICE_OK ? LATTICE_ERR_NOT_OWNER : st);
    } else {
        lattice_op_result r = {.status = st == LATTICE_OK ? LATTICE_ERR_NOT_OWNER : st};
        chan_complete(d, &w->op->org, &r);
    }
    lt_free(w->op);
    lt_free(w);
    d->txwaiting--;
}

void txlock_tick(lattice_ops *d)
{
    if (!d->txwaits) return;
    uint64_t meta = lattice_meta_version(d->meta), now = lt_mono_ms();
    txwait *ready = NULL, **pp = &d->txwaits;
    while (*pp) {
        txwait *w = *pp;
        lattice_meta_cache *c = lattice_meta_cache_by_serial(d->meta, w->cache_serial);
        bool moved = !c || !c->store || w->major != d->major || w->meta != meta || (w->due_ms && now >= w->due_ms) ||
                     lattice_store_reserved_gen(c->store, w->partition, NULL) != w->gen;
        if (!moved) {
            pp = &w->next;
            continue;
        }
        *pp = w->next; /* out of the list before any rerun parks again */
        w->next = ready;
        ready = w;
    }
    while (ready) {
        txwait *next = ready->next;
        end_wait(d, ready, LATTICE_OK);
        ready = next;
    }
}

void txlock_stop(lattice_ops *d)
{
    while (d->txwaits) {
        txwait *w = d->txwaits;
        d->txwaits = w->next;
        end_wait(d, w, LATTICE_ERR_STOPPED);
    }
}

/* ---- orphans ----
 *
 * A prepared row outlives its coordinator when the coordinator died, was
 * cut off or paused before it finished the row.  Past the row's deadline
 * (the coordinator's wall clock, plus TXLOCK_GRACE_MS for clocks and the
 * last messages), the partition's primary asks the home partition to
 * record an abort - written only if no decision stands, so a commit the
 * coordinator recorded in time wins and one it records later is refused -
 * and then finishes the row by the decision that stands.  Never a local
 * guess. */

#define TXLOCK_SWEEP_MS 500
#define TXLOCK_GRACE_MS 2000

typedef struct txsettle {
    struct txsettle *next;
    lattice_ops *d;
    uint64_t cache_serial;
    uint32_t partition, home;
    lt_txid id;
    char cache[LATTICE_CACHE_NAME_MAX + 1];
    uint8_t key[LT_TXP_KEY_MAX];
    size_t key_len;
    uint8_t byte;
    uint8_t req[64 + LT_TXP_KEY_MAX];
} txsettle;

/* Whether the row of transaction id in partition p is being settled.  Per
 * row, not per transaction: a transaction holds rows in several partitions
 * of one primary, and settling one of them per sweep released a killed
 * coordinator's 8 transactions' keys over 4 s of sweeps instead of one. */
static bool settling(const lattice_ops *d, uint64_t serial, uint32_t p, lt_txid id)
{
    for (const txsettle *s = d->txsettles; s; s = s->next)
        if (s->cache_serial == serial && s->partition == p && lt_txid_eq(s->id, id)) return true;
    return false;
}

static void settle_end(txsettle *s)
{
    lattice_ops *d = s->d;
    for (txsettle **pp = &d->txsettles; *pp; pp = &(*pp)->next)
        if (*pp == s) {
            *pp = s->next;
            break;
        }
    lt_free(s);
}

/* One sub (DECIDE or FINISH) on s->key, issued from the data thread. */
static lattice_status settle_send(txsettle *s, int kind, lattice_op_fn fn)
{
    lattice_op sub = {(lattice_op_kind)kind, 0, s->cache, (const char *)s->key, s->key_len, (const char *)&s->byte, 1,
                      0, 0, 0};
    size_t need = lattice_txn_request_size(NULL, 0, &sub, 1);
    if (need > sizeof s->req || !lattice_txn_request_encode(NULL, 0, &sub, 1, s->req, sizeof s->req))
        return LATTICE_ERR_TOO_LARGE;
    lattice_op op = {LATTICE_OP_TXN, 0, s->cache, (const char *)s->key, s->key_len, (const char *)s->req, need, 0, 0, 0};
    return issue_here(s->d, &op, fn, s);
}

static void settle_finished(void *arg, size_t i, const lattice_op_result *r)
{
    (void)i;
    txsettle *s = arg;
    if (r->status == LATTICE_OK) s->d->txsettled++;
    settle_end(s); /* an error: the next sweep tries again */
}

static void settle_decided(void *arg, size_t i, const lattice_op_result *r)
{
    (void)i;
    txsettle *s = arg;
    lattice_txn_buf b;
    lattice_txn_sub_result sub;
    if (r->status != LATTICE_OK || lattice_txn_result_begin(&b, r->value, r->value_len) != 1 ||
        !lattice_txn_result_next(&b, &sub) || sub.status != LATTICE_OK ||
        (sub.num != LATTICE_TXN_COMMIT && sub.num != LATTICE_TXN_ABORT)) {
        settle_end(s); /* the next sweep asks again */
        return;
    }
    lattice_meta_cache *c = lattice_meta_cache_by_serial(s->d->meta, s->cache_serial);
    if (!c) {
        settle_end(s);
        return;
    }
    LT_LOG(LT_INFO, "data", "cache %s: partition %u: a transaction prepared here outlived its coordinator or its deadline: %s stands "
           "at its home partition %u, finishing it so", c->cfg.name, s->partition,
           sub.num == LATTICE_TXN_COMMIT ? "commit" : "abort", s->home);
    s->key_len = lt_txp_key(c->cfg.partitions, s->partition, LT_TXP_PREPARED, s->id, s->key);
    s->byte = (uint8_t)sub.num;
    if (settle_send(s, LATTICE_TXN_FINISH, settle_finished) != LATTICE_OK) settle_end(s);
}

typedef struct sweep_ctx {
    lattice_ops *d;
    lattice_meta_cache *c;
    uint32_t p;
    uint64_t wall;
    const uint64_t *live; /* the transaction ids' node part of every member of the topology */
    size_t n_live;
    lt_txp_held *orphans; /* found by sweep_one, settled after the walk */
    size_t n_orphans, cap_orphans;
} sweep_ctx;

/* Whether the coordinator of a transaction with this id is still a member:
 * a transaction id's node part is the hash of its coordinator's node id
 * (node/tx.c), and a member's id changes with every incarnation. */
static bool coordinator_live(const sweep_ctx *x, uint64_t node)
{
    if (!x->live) return true; /* not every member known here: the deadline decides */
    for (size_t i = 0; i < x->n_live; i++)
        if (x->live[i] == node) return true;
    return false;
}

static void sweep_one(void *arg, const lt_txp_held *h)
{
    sweep_ctx *x = arg;
    /* An orphan once its deadline (and the grace) passed - or at once when
     * its coordinator left the topology (killed, cut off, paused past the
     * failure detection, or rejoined under a new id): it will never finish
     * the row, and the home's decision settles it either way - a commit it
     * recorded before it went stands, else the abort written now does.
     * Waiting for the deadline kept the keys locked for up to the 10 s
     * transaction timeout after the failure detection. */
    bool orphan = x->wall >= h->deadline_ms + TXLOCK_GRACE_MS || !coordinator_live(x, h->id.node);
    if (!orphan || settling(x->d, x->c->serial, x->p, h->id)) return;
    if (h->home >= x->c->cfg.partitions) return;
    /* Settled after the walk: a settle can run to its finish at once (the
     * home partition and this one led here), and the finish changes the
     * very table being walked. */
    if (x->n_orphans == x->cap_orphans) {
        size_t nc = x->cap_orphans ? 2 * x->cap_orphans : 8;
        lt_txp_held *no = lt_realloc(x->orphans, nc * sizeof *no);
        if (!no) return; /* the next sweep */
        x->orphans = no;
        x->cap_orphans = nc;
    }
    x->orphans[x->n_orphans++] = *h;
}

static void settle_orphan(sweep_ctx *x, const lt_txp_held *h)
{
    if (settling(x->d, x->c->serial, x->p, h->id)) return;
    txsettle *s = lt_calloc(1, sizeof *s);
    if (!s) return;
    s->d = x->d;
    s->cache_serial = x->c->serial;
    s->partition = x->p;
    s->home = h->home;
    s->id = h->id;
    snprintf(s->cache, sizeof s->cache, "%s", x->c->cfg.name);
    s->key_len = lt_txp_key(x->c->cfg.partitions, h->home, LT_TXP_DECISION, h->id, s->key);
    s->byte = LATTICE_TXN_ABORT;
    s->next = x->d->txsettles;
    x->d->txsettles = s;
    if (settle_send(s, LATTICE_TXN_DECIDE, settle_decided) != LATTICE_OK) settle_end(s);
}

void txlock_sweep(lattice_ops *d, uint64_t now)
{
    if (now - d->txsweep_ms < TXLOCK_SWEEP_MS || !lattice_meta_valid(d->meta)) return;
    d->txsweep_ms = now;
    uint64_t wall = lt_wall_ms();
    uint64_t live[DATA_MAX_PEERS];
    size_t n_live = 0;
    for (size_t i = 0; i < d->n_peers && n_live < DATA_MAX_PEERS; i++)
        live[n_live++] = lt_fnv1a(d->peers[i]->m.id, strlen(d->peers[i]->m.id)) | 1;
    for (size_t i = 0, nc = lattice_meta_cache_count(d->meta); i < nc; i++) {
        lattice_meta_cache *c = lattice_meta_cache_at(d->meta, i);
        if (!c || !c->store || !ops_serving(d, c)) continue;
        for (uint32_t p = 0; p < c->cfg.partitions; p++) {
            /* Every partition with reserved rows, read or not since it
             * came here (a rebalance, a replay, a failover). */
            if (!lattice_store_reserved_gen(c->store, p, NULL)) continue;
            lattice_meta_member *own[1];
            if (lattice_meta_serving_owners(c, p, own, 1) != 1 || !own[0]->self) continue;
            bool unknown;
            lt_txp_locks *t = txlock_table(c, p, &unknown); /* current */
            if (!t || !lt_txp_locks_count(t)) continue;
            sweep_ctx sc = {d, c, p, wall, n_live && d->n_peers < DATA_MAX_PEERS ? live : NULL, n_live, NULL, 0, 0};
            lt_txp_locks_each(t, sweep_one, &sc);
            for (size_t k = 0; k < sc.n_orphans; k++) settle_orphan(&sc, &sc.orphans[k]);
            lt_free(sc.orphans);
        }
    }
}
