/*
 * respd_tx: MULTI / EXEC / DISCARD / WATCH / UNWATCH, and RENAME, RENAMENX,
 * COPY, MSETNX - each one LATTICE_OP_TXN (lattice/txn.h) on keys of one
 * slot, run by the slot's primary in one step (docs/RESP.md,
 * "Transactions").
 *
 * MULTI queues each command as the entries and ops it would make in a
 * batch of its own (c->tx->sub), built at queue time by the same code as
 * outside MULTI, so its reply inside EXEC's array is the one it would get
 * alone.  A command refused at queue time (unknown, wrong arity, CROSSSLOT,
 * MOVED, not allowed in a transaction) marks the transaction dirty: EXEC
 * answers EXECABORT, as Redis.  EXEC sends the queued ops and the watches
 * as ONE txn op, then decodes its results into the queued batch's results
 * and writes the queued entries' replies as an array.
 *
 * WATCH reads, at the key's primary, each key's version (a live key) or
 * its partition's update counter (an absent one), with the primary's
 * epoch; EXEC's op carries them and the primary aborts (nil reply) when
 * one changed.  A batch ends after WATCH and after EXEC (b->sealed): a
 * later command of the pipeline must not run concurrently with them.
 */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "lattice/alloc.h"
#include "lattice/txn.h"
#include "respd_int.h"

#define ERR_NESTED "ERR MULTI calls can not be nested"
#define ERR_EXEC_NO_MULTI "ERR EXEC without MULTI"
#define ERR_DISCARD_NO_MULTI "ERR DISCARD without MULTI"
#define ERR_WATCH_IN_MULTI "ERR WATCH inside MULTI is not allowed"
#define ERR_EXECABORT "EXECABORT Transaction discarded because of previous errors."
#define ERR_NOT_IN_MULTI "ERR Command not allowed inside a transaction"
#define ERR_NO_SUCH_KEY "ERR no such key"
#define ERR_SAME_OBJECT "ERR source and destination objects are the same"
#define ERR_LOST "ERR the transaction was applied; its replies were lost in a failover"

typedef struct tx_watch {
    char *key;
    size_t len;
    uint8_t mode;
    uint64_t version, epoch;
} tx_watch;

struct respd_tx {
    bool multi, dirty;
    batch *sub;          /* the queued commands */
    int slot;            /* of every key queued or watched; -1: none yet */
    bool cross;          /* keys of several slots */
    bool watch_broken;   /* a WATCH read failed: EXEC must not run */
    tx_watch *w;
    size_t n_w, cap_w;
};

static bool eq(const lattice_resp_arg *a, const char *s)
{
    size_t n = strlen(s);
    return a->len == n && strncasecmp(a->ptr, s, n) == 0;
}

static void reply_err(conn *c, const char *m)
{
    lattice_resp_add_error(c->out, m, strlen(m));
}

static struct respd_tx *tx_of(conn *c)
{
    if (!c->tx) {
        c->tx = lt_calloc(1, sizeof *c->tx);
        if (c->tx) c->tx->slot = -1;
    }
    return c->tx;
}

static void unwatch(struct respd_tx *t)
{
    for (size_t i = 0; i < t->n_w; i++) lt_free(t->w[i].key);
    t->n_w = 0;
    t->watch_broken = false;
    if (!t->multi) t->slot = -1, t->cross = false;
}

static void discard(struct respd_tx *t)
{
    respd_batch_free(t->sub);
    t->sub = NULL;
    t->multi = t->dirty = false;
    unwatch(t);
    t->slot = -1;
    t->cross = false;
}

void respd_tx_free(conn *c)
{
    if (!c->tx) return;
    discard(c->tx);
    lt_free(c->tx->w);
    lt_free(c->tx);
    c->tx = NULL;
}

bool respd_tx_in_multi(const conn *c)
{
    return c->tx && c->tx->multi;
}

bool respd_is_tx_command(lattice_resp_cmd_id id)
{
    return id >= LATTICE_RESP_CMD_MULTI && id <= LATTICE_RESP_CMD_MSETNX;
}

static void note_slot(struct respd_tx *t, const void *key, size_t len)
{
    int s = lattice_key_slot(key, len);
    if (t->slot < 0) t->slot = s;
    else if (t->slot != s) t->cross = true;
}

/* The op's key and value as pointers (they are arena offsets until submit). */
static const char *at(const batch *b, const void *off)
{
    return b->arena + (uintptr_t)off - 1;
}

/* ---- RENAME, RENAMENX, COPY, MSETNX ---- */

/* One txn op in e holding subs[0..n) and watches (outside MULTI). */
static bool add_txn_op(batch *b, ent *e, const lattice_txn_watch *w, size_t nw, const lattice_op *subs, size_t n)
{
    size_t cap = lattice_txn_request_size(w, nw, subs, n);
    char *p = lt_malloc(cap);
    if (!p) return false;
    lattice_txn_request_encode(w, nw, subs, n, p, cap);
    lattice_resp_arg key = n ? (lattice_resp_arg){(char *)subs[0].key, subs[0].key_len}
                             : (lattice_resp_arg){(char *)w[0].key, w[0].key_len};
    lattice_resp_arg val = {p, cap};
    bool ok = respd_op_add(b, e, LATTICE_OP_TXN, 0, &key, &val, 0, 0);
    lt_free(p);
    return ok;
}

static bool same_slot(size_t argc, const lattice_resp_arg *argv, size_t first, size_t step)
{
    int s = lattice_key_slot(argv[first].ptr, argv[first].len);
    for (size_t i = first + step; i < argc; i += step)
        if (lattice_key_slot(argv[i].ptr, argv[i].len) != s) return false;
    return true;
}

bool respd_is_tx_key_command(lattice_resp_cmd_id id)
{
    return id >= LATTICE_RESP_CMD_RENAME && id <= LATTICE_RESP_CMD_MSETNX;
}

cmd_outcome respd_tx_key_command(batch *b, lattice_resp_cmd_id id, size_t argc, const lattice_resp_arg *argv,
                                 bool in_multi)
{
    if (id == LATTICE_RESP_CMD_MSETNX) {
        if (argc % 2 == 0) return respd_ent_error(b, "ERR wrong number of arguments for 'msetnx' command");
        if (!same_slot(argc, argv, 1, 2)) return respd_ent_error(b, LATTICE_RESP_ERR_CROSSSLOT);
        if (in_multi) return respd_ent_error(b, ERR_NOT_IN_MULTI);
        size_t n = (argc - 1) / 2;
        lattice_op *subs = lt_calloc(n, sizeof *subs);
        lattice_txn_watch *w = lt_calloc(n, sizeof *w);
        ent *e = subs && w ? respd_ent_new(b, id) : NULL;
        for (size_t i = 0; e && i < n; i++) {
            subs[i] = lattice_op_put(NULL, argv[1 + 2 * i].ptr, argv[1 + 2 * i].len, argv[2 + 2 * i].ptr,
                                     argv[2 + 2 * i].len);
            w[i] = (lattice_txn_watch){argv[1 + 2 * i].ptr, argv[1 + 2 * i].len, LATTICE_TXN_W_ABSENT, 0, 0};
        }
        bool ok = e && add_txn_op(b, e, w, n, subs, n);
        lt_free(subs);
        lt_free(w);
        return ok ? CMD_BATCHED : respd_ent_error(b, "OOM command not allowed when used memory > 'maxmemory'.");
    }
    /* RENAME / RENAMENX / COPY src dst [DB 0] [REPLACE] */
    unsigned flags = id == LATTICE_RESP_CMD_RENAMENX ? LATTICE_OP_NX : 0;
    if (id == LATTICE_RESP_CMD_COPY) {
        for (size_t i = 3; i < argc; i++) {
            if (eq(&argv[i], "replace")) {
                flags |= LATTICE_OP_XX;
            } else if (eq(&argv[i], "db") && i + 1 < argc) {
                long long db;
                if (!lattice_resp_string2ll(argv[i + 1].ptr, argv[i + 1].len, &db))
                    return respd_ent_error(b, LATTICE_RESP_ERR_NOT_INTEGER);
                if (db != 0) return respd_ent_error(b, LATTICE_RESP_ERR_DB_INDEX);
                i++;
            } else {
                return respd_ent_error(b, LATTICE_RESP_ERR_SYNTAX);
            }
        }
    }
    if (!same_slot(3, argv, 1, 1)) return respd_ent_error(b, LATTICE_RESP_ERR_CROSSSLOT);
    bool same = argv[1].len == argv[2].len && memcmp(argv[1].ptr, argv[2].ptr, argv[1].len) == 0;
    if (id == LATTICE_RESP_CMD_COPY && same) return respd_ent_error(b, ERR_SAME_OBJECT);
    int kind = id == LATTICE_RESP_CMD_COPY ? LATTICE_TXN_COPY : LATTICE_TXN_RENAME;
    ent *e = respd_ent_new(b, id);
    if (!e) return CMD_DONE;
    bool ok;
    if (in_multi) {
        ok = respd_op_add(b, e, (lattice_op_kind)kind, flags, &argv[1], &argv[2], 0, 0);
    } else {
        lattice_op s = {(lattice_op_kind)kind, flags, NULL, argv[1].ptr, argv[1].len, argv[2].ptr, argv[2].len, 0, 0, 0};
        ok = add_txn_op(b, e, NULL, 0, &s, 1);
    }
    return ok ? CMD_BATCHED : respd_ent_error(b, "OOM command not allowed when used memory > 'maxmemory'.");
}

/* ---- replies ---- */

/* Puts the result of sub i of a txn result into x (value into b->vals). */
static bool store_sub(batch *b, opres *x, const lattice_txn_sub_result *s)
{
    x->status = s->status;
    x->flags = s->flags;
    x->num = s->num;
    x->has_value = s->status == LATTICE_OK || s->value_len;
    x->voff = b->vals_len;
    x->vlen = s->value_len;
    size_t need = b->vals_len + s->value_len + 1;
    if (need > b->vals_cap) {
        size_t nc = b->vals_cap ? b->vals_cap : 256;
        while (nc < need) nc *= 2;
        char *p = lt_realloc(b->vals, nc);
        if (!p) return false;
        b->vals = p;
        b->vals_cap = nc;
    }
    if (s->value_len) memcpy(b->vals + b->vals_len, s->value, s->value_len);
    b->vals_len += s->value_len;
    return true;
}

/* The single sub's result of a txn op of b (outside MULTI), into *x. */
static bool first_sub(const batch *b, const ent *e, opres *x, batch *tmp)
{
    const opres *t = &b->res[e->first];
    if (t->status != LATTICE_OK) {
        *x = *t;
        return true;
    }
    *x = (opres){0};
    if (t->flags & (LATTICE_OP_R_ABORTED | LATTICE_OP_R_LOST)) {
        x->status = LATTICE_OK;
        x->flags = t->flags;
        return true;
    }
    lattice_txn_buf rb = {0};
    lattice_txn_sub_result s;
    if (lattice_txn_result_begin(&rb, b->vals + t->voff, t->vlen) < 1 || !lattice_txn_result_next(&rb, &s)) {
        x->status = LATTICE_ERR_INVAL;
        return false;
    }
    return store_sub(tmp, x, &s);
}

static void move_reply(lattice_resp_out *o, lattice_resp_cmd_id cmd, const opres *x)
{
    if (x->flags & LATTICE_OP_R_LOST) {
        lattice_resp_add_error(o, ERR_LOST, strlen(ERR_LOST));
        return;
    }
    bool ok = x->status == LATTICE_OK;
    if (!ok && x->status != LATTICE_ERR_NOT_FOUND && x->status != LATTICE_ERR_EXISTS) {
        respd_add_result_error(o, x);
    } else if (cmd == LATTICE_RESP_CMD_COPY) {
        lattice_resp_add_int(o, ok);
    } else if (x->status == LATTICE_ERR_NOT_FOUND) {
        lattice_resp_add_error(o, ERR_NO_SUCH_KEY, strlen(ERR_NO_SUCH_KEY));
    } else if (cmd == LATTICE_RESP_CMD_RENAMENX) {
        lattice_resp_add_int(o, ok);
    } else {
        lattice_resp_add_simple(o, "OK", 2);
    }
}

/* An entry of a tx command other than WATCH and EXEC (entry_reply). */
void respd_tx_entry_reply(lattice_resp_out *o, const batch *b, const ent *e, bool in_exec)
{
    switch (e->cmd) {
    case LATTICE_RESP_CMD_PING: /* queued PING / ECHO / SELECT: the reply's bytes in the arena */
        if (e->sflags == 2) lattice_resp_add_simple(o, b->arena + e->first, e->n);
        else if (e->sflags) lattice_resp_add_bulk(o, b->arena + e->first, e->n);
        else lattice_resp_add_simple(o, "PONG", 4);
        return;
    case LATTICE_RESP_CMD_UNWATCH: lattice_resp_add_simple(o, "OK", 2); return;
    case LATTICE_RESP_CMD_MSETNX: {
        const opres *t = &b->res[e->first];
        if (t->status != LATTICE_OK) respd_add_result_error(o, t);
        else if (t->flags & LATTICE_OP_R_LOST) lattice_resp_add_error(o, ERR_LOST, strlen(ERR_LOST));
        else lattice_resp_add_int(o, !(t->flags & LATTICE_OP_R_ABORTED));
        return;
    }
    default: break;
    }
    if (in_exec) { /* queued: the sub's own result */
        move_reply(o, (lattice_resp_cmd_id)e->cmd, &b->res[e->first]);
        return;
    }
    batch tmp = {0};
    opres x;
    first_sub(b, e, &x, &tmp);
    tmp.vals_len = 0;
    move_reply(o, (lattice_resp_cmd_id)e->cmd, &x);
    lt_free(tmp.vals);
}

static void watch_reply(conn *c, const batch *b, const ent *e)
{
    struct respd_tx *t = tx_of(c);
    const opres *x = &b->res[e->first];
    if (!t) return;
    lattice_txn_buf rb = {0};
    long n = x->status == LATTICE_OK ? lattice_txn_result_begin(&rb, b->vals + x->voff, x->vlen) : -1;
    /* The keys: the request's subs (the op's value, resolved at submit). */
    const lattice_op *op = &b->ops[e->first];
    lattice_txn_buf qb = {(uint8_t *)(uintptr_t)op->value, 0, op->value_len, false};
    lattice_txn_get_u(&qb, 1);
    lattice_txn_get_u(&qb, 4);
    long nq = (long)lattice_txn_get_u(&qb, 4);
    if (n < 0 || n != nq) {
        t->watch_broken = true; /* EXEC must fail rather than miss a change */
        if (x->status != LATTICE_OK) respd_add_result_error(c->out, x);
        else lattice_resp_add_error(c->out, "ERR internal", 12);
        return;
    }
    for (long i = 0; i < n; i++) {
        lattice_txn_sub_result s;
        size_t kl, vl;
        lattice_txn_get_u(&qb, 1);
        lattice_txn_get_u(&qb, 4);
        const void *k = lattice_txn_get_bytes(&qb, &kl);
        lattice_txn_get_bytes(&qb, &vl);
        lattice_txn_get_u(&qb, 8);
        lattice_txn_get_u(&qb, 8);
        if (!lattice_txn_result_next(&rb, &s) || s.status != LATTICE_OK || s.value_len != 8 || qb.failed) {
            t->watch_broken = true;
            continue;
        }
        uint64_t epoch = 0;
        for (int j = 0; j < 8; j++) epoch |= (uint64_t)((const uint8_t *)s.value)[j] << (8 * j);
        if (t->n_w == t->cap_w) {
            size_t nc = t->cap_w ? 2 * t->cap_w : 8;
            tx_watch *p = lt_realloc(t->w, nc * sizeof *p);
            if (!p) {
                t->watch_broken = true;
                continue;
            }
            t->w = p;
            t->cap_w = nc;
        }
        char *kc = lt_malloc(kl ? kl : 1);
        if (!kc) {
            t->watch_broken = true;
            continue;
        }
        memcpy(kc, k, kl);
        t->w[t->n_w++] = (tx_watch){kc, kl, (s.flags & LATTICE_OP_R_FOUND) ? LATTICE_TXN_W_VERSION : LATTICE_TXN_W_COUNTER,
                                    (uint64_t)s.num, epoch};
        note_slot(t, kc, kl);
    }
    lattice_resp_add_simple(c->out, "OK", 2);
}

static void exec_reply(conn *c, const batch *b, const ent *e)
{
    batch *sub = e->sub;
    lattice_resp_out *o = c->out;
    if (e->n) {
        const opres *x = &b->res[e->first];
        if (x->status != LATTICE_OK) {
            respd_add_result_error(o, x);
            return;
        }
        if (x->flags & LATTICE_OP_R_ABORTED) {
            lattice_resp_add_null_array(o);
            return;
        }
        if (x->flags & LATTICE_OP_R_LOST) {
            lattice_resp_add_error(o, ERR_LOST, strlen(ERR_LOST));
            return;
        }
        lattice_txn_buf rb;
        long n = lattice_txn_result_begin(&rb, b->vals + x->voff, x->vlen);
        if (n != (long)sub->n_ops) {
            lattice_resp_add_error(o, "ERR internal", 12);
            return;
        }
        for (long i = 0; i < n; i++) {
            lattice_txn_sub_result s;
            if (!lattice_txn_result_next(&rb, &s) || !store_sub(sub, &sub->res[i], &s)) {
                lattice_resp_add_error(o, "ERR internal", 12);
                return;
            }
        }
    }
    lattice_resp_add_array(o, sub->n_ents);
    for (size_t i = 0; i < sub->n_ents; i++) respd_entry_reply(o, sub, &sub->ents[i], true);
}

void respd_tx_reply(conn *c, const batch *b, const ent *e)
{
    if (e->cmd == LATTICE_RESP_CMD_WATCH) watch_reply(c, b, e);
    else exec_reply(c, b, e);
}

/* ---- MULTI, EXEC, DISCARD, WATCH, UNWATCH ---- */

static cmd_outcome cmd_watch(lattice_respd *r, conn *c, batch *b, size_t argc, const lattice_resp_arg *argv)
{
    (void)r;
    if (!same_slot(argc, argv, 1, 1)) return respd_ent_error(b, LATTICE_RESP_ERR_CROSSSLOT);
    if (!tx_of(c)) return respd_ent_error(b, "OOM command not allowed when used memory > 'maxmemory'.");
    size_t n = argc - 1;
    lattice_op *subs = lt_calloc(n, sizeof *subs);
    ent *e = subs ? respd_ent_new(b, LATTICE_RESP_CMD_WATCH) : NULL;
    for (size_t i = 0; e && i < n; i++)
        subs[i] = (lattice_op){(lattice_op_kind)LATTICE_TXN_VERSION, 0, NULL, argv[1 + i].ptr, argv[1 + i].len,
                               NULL, 0, 0, 0, 0};
    bool ok = e && add_txn_op(b, e, NULL, 0, subs, n);
    lt_free(subs);
    if (!ok) return respd_ent_error(b, "OOM command not allowed when used memory > 'maxmemory'.");
    b->sealed = true;
    return CMD_BATCHED;
}

static cmd_outcome cmd_exec(lattice_respd *r, conn *c, batch *b, char *err)
{
    struct respd_tx *t = c->tx;
    if (!t || !t->multi) {
        reply_err(c, ERR_EXEC_NO_MULTI);
        return CMD_DONE;
    }
    if (t->dirty) {
        discard(t);
        reply_err(c, ERR_EXECABORT);
        return CMD_DONE;
    }
    if (t->cross) {
        discard(t);
        reply_err(c, LATTICE_RESP_ERR_CROSSSLOT);
        return CMD_DONE;
    }
    if (t->watch_broken) {
        discard(t);
        lattice_resp_add_null_array(c->out);
        return CMD_DONE;
    }
    batch *sub = t->sub;
    if (t->slot >= 0 && (c->aware == AWARE_YES || r->cfg.moved == LATTICE_RESPD_MOVED_ALWAYS) &&
        r->cfg.moved != LATTICE_RESPD_MOVED_NEVER && respd_route(r, (uint16_t)t->slot, false, err) == RESPD_MOVED) {
        discard(t);
        reply_err(c, err);
        return CMD_DONE;
    }
    /* The queued ops' keys and values as pointers, then one txn op. */
    lattice_op *ops = lt_calloc(sub->n_ops ? sub->n_ops : 1, sizeof *ops);
    lattice_txn_watch *w = lt_calloc(t->n_w ? t->n_w : 1, sizeof *w);
    ent *e = ops && w ? respd_ent_new(b, LATTICE_RESP_CMD_EXEC) : NULL;
    bool ok = e != NULL;
    for (size_t i = 0; ok && i < sub->n_ops; i++) {
        ops[i] = sub->ops[i];
        if (ops[i].key) ops[i].key = at(sub, ops[i].key);
        if (ops[i].value) ops[i].value = at(sub, ops[i].value);
    }
    for (size_t i = 0; ok && i < t->n_w; i++)
        w[i] = (lattice_txn_watch){t->w[i].key, t->w[i].len, t->w[i].mode, t->w[i].version, t->w[i].epoch};
    if (ok && (sub->n_ops || t->n_w)) ok = add_txn_op(b, e, w, t->n_w, ops, sub->n_ops);
    lt_free(ops);
    lt_free(w);
    if (!ok) {
        discard(t);
        if (e) b->n_ents--;
        return respd_ent_error(b, "OOM command not allowed when used memory > 'maxmemory'.");
    }
    e->sub = sub;
    t->sub = NULL;
    discard(t);
    b->sealed = true;
    return CMD_BATCHED;
}

/* A command while MULTI is open: queued (+QUEUED) or refused (dirty). */
static cmd_outcome queue(lattice_respd *r, conn *c, const lattice_resp_cmd *rc, size_t argc,
                         const lattice_resp_arg *argv, char *err)
{
    struct respd_tx *t = c->tx;
    lattice_resp_cmd_id id = lattice_resp_cmd_id_of(rc);
    const char *refuse = NULL;
    if (!c->authed && !(lattice_resp_cmd_flags(rc) & LATTICE_RESP_F_NO_AUTH)) refuse = LATTICE_RESP_ERR_NOAUTH;
    else if (respd_misrouted(r, c, rc, argc, argv, err)) refuse = err;
    if (refuse) {
        t->dirty = true;
        reply_err(c, refuse);
        return CMD_DONE;
    }
    batch *sub = t->sub;
    size_t ents0 = sub->n_ents, ops0 = sub->n_ops;
    ent *e;
    if (id == LATTICE_RESP_CMD_PING || id == LATTICE_RESP_CMD_ECHO) {
        bool arg = argc > 1;
        if (id == LATTICE_RESP_CMD_PING && argc > 2) {
            t->dirty = true;
            reply_err(c, "ERR wrong number of arguments for 'ping' command");
            return CMD_DONE;
        }
        e = respd_ent_bytes(sub, LATTICE_RESP_CMD_PING, arg ? argv[1].ptr : "", arg ? argv[1].len : 0);
        if (e) e->sflags = arg;
    } else if (id == LATTICE_RESP_CMD_SELECT) { /* its reply is known now: kept for the array */
        long long db;
        if (!lattice_resp_string2ll(argv[1].ptr, argv[1].len, &db)) respd_ent_error(sub, LATTICE_RESP_ERR_NOT_INTEGER);
        else if (db != 0) respd_ent_error(sub, LATTICE_RESP_ERR_DB_INDEX);
        else if ((e = respd_ent_bytes(sub, LATTICE_RESP_CMD_PING, "OK", 2))) e->sflags = 2;
    } else if (id == LATTICE_RESP_CMD_UNWATCH) {
        respd_ent_new(sub, LATTICE_RESP_CMD_UNWATCH);
    } else if (respd_is_tx_key_command(id)) {
        respd_tx_key_command(sub, id, argc, argv, true);
    } else if (respd_is_key_command(id) && id != LATTICE_RESP_CMD_DBSIZE && !respd_is_walk_command(id)) {
        /* (a walk - SCAN, KEYS, FLUSHALL... - spans partitions: not one step) */
        respd_key_command(r, sub, id, argc, argv);
    } else {
        t->dirty = true;
        reply_err(c, ERR_NOT_IN_MULTI);
        return CMD_DONE;
    }
    if (sub->n_ents == ents0) { /* out of memory */
        t->dirty = true;
        reply_err(c, "OOM command not allowed when used memory > 'maxmemory'.");
        return CMD_DONE;
    }
    for (size_t i = ops0; i < sub->n_ops; i++) {
        if (sub->res[i].cond_expire) {
            /* EXPIRE NX/XX/GT/LT reads the TTL first, then decides: not one step. */
            sub->n_ops = ops0;
            sub->n_ents = ents0;
            t->dirty = true;
            reply_err(c, ERR_NOT_IN_MULTI);
            return CMD_DONE;
        }
        const lattice_op *o = &sub->ops[i];
        note_slot(t, at(sub, o->key), o->key_len);
        if (o->kind == (lattice_op_kind)LATTICE_TXN_RENAME || o->kind == (lattice_op_kind)LATTICE_TXN_COPY)
            note_slot(t, at(sub, o->value), o->value_len);
    }
    lattice_resp_add_simple(c->out, "QUEUED", 6);
    return CMD_DONE;
}

cmd_outcome respd_tx_command(lattice_respd *r, conn *c, batch *b, const lattice_resp_cmd *rc, size_t argc,
                             const lattice_resp_arg *argv, char *err)
{
    bool multi = respd_tx_in_multi(c);
    lattice_resp_cmd_id id = rc ? lattice_resp_cmd_id_of(rc) : (lattice_resp_cmd_id)0;
    if (b->n_ents) return CMD_DEFER;
    if (id == LATTICE_RESP_CMD_WATCH && !multi) {
        if (!c->authed) return respd_ent_error(b, LATTICE_RESP_ERR_NOAUTH);
        return cmd_watch(r, c, b, argc, argv);
    }
    if (!rc) { /* unknown command, wrong arity: inside MULTI it aborts EXEC */
        if (eq(&argv[0], "exec")) {
            /* EXEC itself refused: Redis discards at once, naming why. */
            char m[LATTICE_RESP_ERR_MAX + 64];
            snprintf(m, sizeof m, "EXECABORT Transaction discarded because of: %s",
                     strncmp(err, "ERR ", 4) == 0 ? err + 4 : err);
            discard(c->tx);
            reply_err(c, m);
            return CMD_DONE;
        }
        c->tx->dirty = true;
        reply_err(c, err);
        return CMD_DONE;
    }
    if (!c->authed && !(lattice_resp_cmd_flags(rc) & LATTICE_RESP_F_NO_AUTH)) {
        if (multi) c->tx->dirty = true;
        reply_err(c, LATTICE_RESP_ERR_NOAUTH);
        return CMD_DONE;
    }
    struct respd_tx *t = tx_of(c);
    if (!t) {
        reply_err(c, "OOM command not allowed when used memory > 'maxmemory'.");
        return CMD_DONE;
    }
    switch (id) {
    case LATTICE_RESP_CMD_MULTI:
        if (multi) {
            reply_err(c, ERR_NESTED);
            return CMD_DONE;
        }
        t->sub = lt_calloc(1, sizeof *t->sub);
        if (!t->sub) {
            reply_err(c, "OOM command not allowed when used memory > 'maxmemory'.");
            return CMD_DONE;
        }
        t->sub->r = r;
        t->multi = true;
        lattice_resp_add_simple(c->out, "OK", 2);
        return CMD_DONE;
    case LATTICE_RESP_CMD_EXEC: return cmd_exec(r, c, b, err);
    case LATTICE_RESP_CMD_DISCARD:
        if (!multi) reply_err(c, ERR_DISCARD_NO_MULTI);
        else lattice_resp_add_simple(c->out, "OK", 2);
        if (multi) discard(t);
        return CMD_DONE;
    case LATTICE_RESP_CMD_WATCH:
        reply_err(c, ERR_WATCH_IN_MULTI);
        return CMD_DONE;
    case LATTICE_RESP_CMD_UNWATCH:
        if (!multi) {
            unwatch(t);
            lattice_resp_add_simple(c->out, "OK", 2);
            return CMD_DONE;
        }
        break;
    default: break;
    }
    return queue(r, c, rc, argc, argv, err);
}
