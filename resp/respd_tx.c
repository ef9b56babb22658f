/*
 * respd_tx: MULTI / EXEC / DISCARD / WATCH / UNWATCH, and RENAME, RENAMENX,
 * COPY, MSETNX - each one LATTICE_OP_TXN (lattice/txn.h) on keys of one
 * slot, run by the slot's primary in one step (docs/RESP.md,
 * "Transactions").
 *
 * MULTI queues each command as the entries and ops it would make in a
 * batch of its own (c->tx->sub), built at queue time by the same code as
 * outside MULTI, so its reply inside EXEC's array is the one it would get
 * alone; a command without a key of the slot (DBSIZE, a walk, PING, INFO,
 * CONFIG ...) is kept as its argv (ent.later).  A command refused at queue
 * time (unknown, wrong arity, CROSSSLOT, MOVED) marks the transaction
 * dirty: EXEC answers EXECABORT, as Redis.  EXEC runs the queue in order,
 * in parts (cmd_exec): each maximal run of keyed entries as ONE txn op (the
 * first part with the watches), decoded into the queued batch's results;
 * each kept command in its place, as it would run alone; the replies form
 * one array.
 *
 * WATCH reads, at the key's primary, each key's version (a live key) or
 * its partition's update counter (an absent one), with the primary's
 * epoch; EXEC's op carries them and the primary aborts (nil reply) when
 * one changed.  A batch ends after WATCH and after EXEC (b->sealed): a
 * later command of the pipeline must not run concurrently with them.
 */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "lattice/alloc.h"
#include "lattice/clock.h"
#include "lattice/coll.h"
#include "lattice/log.h"
#include "lattice/txn.h"
#include "respd_int.h"

#define ERR_NESTED "ERR MULTI calls can not be nested"
#define ERR_EXEC_NO_MULTI "ERR EXEC without MULTI"
#define ERR_DISCARD_NO_MULTI "ERR DISCARD without MULTI"
#define ERR_WATCH_IN_MULTI "ERR WATCH inside MULTI is not allowed"
#define ERR_EXECABORT "EXECABORT Transaction discarded because of previous errors."
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
    /* EXEC (cmd_exec): it runs run's entries from pos on in parts, and is
     * parsed again after each part's batch; run is kept until the last
     * part's reply is out (freed by the next MULTI or the connection). */
    batch *run;
    size_t pos;
    bool running;        /* EXEC has begun */
    bool header;         /* its array's header is out */
    bool stopped;        /* its first part failed as a whole (or a watch did): that was the reply */
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

/* MULTI ends (EXEC sent its last part, or DISCARD): the watches go. */
static void finish(struct respd_tx *t)
{
    t->multi = t->dirty = t->running = false;
    unwatch(t);
    t->slot = -1;
    t->cross = false;
}

static void discard(struct respd_tx *t)
{
    respd_batch_free(t->sub);
    respd_batch_free(t->run);
    t->sub = t->run = NULL;
    finish(t);
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

long respd_tx_queued(const conn *c)
{
    const struct respd_tx *t = c->tx;
    if (!t || !t->multi) return -1;
    const batch *q = t->running ? t->run : t->sub;
    return q ? (long)q->n_ents : 0;
}

bool respd_is_tx_command(lattice_resp_cmd_id id)
{
    return id >= LATTICE_RESP_CMD_MULTI && id <= LATTICE_RESP_CMD_GEOSEARCHSTORE;
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
bool respd_tx_add_op(batch *b, ent *e, unsigned flags, const lattice_txn_watch *w, size_t nw, const lattice_op *subs,
                     size_t n)
{
    size_t cap = lattice_txn_request_size(w, nw, subs, n);
    char *p = lt_malloc(cap);
    if (!p) return false;
    lattice_txn_request_encode(w, nw, subs, n, p, cap);
    lattice_resp_arg key = n ? (lattice_resp_arg){(char *)subs[0].key, subs[0].key_len}
                             : (lattice_resp_arg){(char *)w[0].key, w[0].key_len};
    lattice_resp_arg val = {p, cap};
    bool ok = respd_op_add(b, e, LATTICE_OP_TXN, flags, &key, &val, 0, 0);
    lt_free(p);
    return ok;
}

static bool add_txn_op(batch *b, ent *e, const lattice_txn_watch *w, size_t nw, const lattice_op *subs, size_t n)
{
    return respd_tx_add_op(b, e, 0, w, nw, subs, n);
}

/* Keys of several slots run as one transaction across partitions on this
 * connection (docs/RESP.md, "Transactions across slots"): a plain client's
 * always, a cluster-aware one's with --resp-cross-slot allow (else
 * CROSSSLOT, as Redis Cluster). */
bool respd_cross_slot_ok(const lattice_respd *r, const conn *c)
{
    if (r->cfg.cross_slot == LATTICE_RESPD_CROSS_ALLOW || r->cfg.moved == LATTICE_RESPD_MOVED_NEVER) return true;
    return !(c->aware == AWARE_YES || r->cfg.moved == LATTICE_RESPD_MOVED_ALWAYS);
}

static bool same_slot(size_t argc, const lattice_resp_arg *argv, size_t first, size_t step)
{
    int s = lattice_key_slot(argv[first].ptr, argv[first].len);
    for (size_t i = first + step; i < argc; i += step)
        if (lattice_key_slot(argv[i].ptr, argv[i].len) != s) return false;
    return true;
}

/* A blocking command's timeout as Redis 7.0 reads one in seconds
 * (getTimeoutFromObjectOrReply): a float, not negative, in ms;
 * *deadline the wall-clock ms it ends at (0: none).  NULL, or the error. */
static const char *block_timeout(const lattice_resp_arg *a, uint64_t *deadline)
{
    static const char bad[] = "ERR timeout is not a float or out of range";
    char t[128];
    if (!a->len || a->len >= sizeof t || isspace((unsigned char)a->ptr[0]) || memchr(a->ptr, 0, a->len)) return bad;
    memcpy(t, a->ptr, a->len);
    t[a->len] = 0;
    char *end;
    errno = 0;
    long double v = strtold(t, &end);
    if (*end || errno == ERANGE || isnan(v)) return bad;
    /* Redis 7.0 converts v * 1000 to a long long as it is: past the
     * range that is LLONG_MIN on x86, so "negative"; a fraction of a ms is
     * rounded up here (7.0 truncated it to 0, waiting for ever; 7.2 rounds
     * up). */
    v *= 1000.0L;
    if (v >= 0x1p63L || v < 0) return "ERR timeout is negative";
    long long ms = (long long)ceill(v);
    uint64_t now = lt_wall_ms();
    if (ms > 0 && (unsigned long long)ms > (unsigned long long)LLONG_MAX - now) return "ERR timeout is out of range";
    *deadline = ms > 0 ? now + (uint64_t)ms : 0;
    return NULL;
}

/* The one step of a blocking command (LMOVE or BPOP with LATTICE_TXN_BLOCK,
 * lattice/txn.h) as a txn op that waits at the primary until deadline:
 * LATTICE_OP_BLOCKING tells the issuing node to wait as long. */
static bool add_blocking_op(batch *b, ent *e, lattice_op *s, uint64_t deadline)
{
    s->delta |= LATTICE_TXN_BLOCK;
    s->ttl_ms = deadline;
    size_t cap = lattice_txn_request_size(NULL, 0, s, 1);
    char *p = lt_malloc(cap);
    if (!p) return false;
    lattice_txn_request_encode(NULL, 0, s, 1, p, cap);
    lattice_resp_arg key = {(char *)s->key, s->key_len}, val = {p, cap};
    bool ok = respd_op_add(b, e, LATTICE_OP_TXN, LATTICE_OP_BLOCKING, &key, &val, 0, deadline);
    lt_free(p);
    if (ok) {
        e->blocking = true;
        b->sealed = true; /* the connection waits: nothing after it joins the batch */
        if (b->c && !b->c->blocked) { /* INFO blocked_clients: until it is answered or leaves */
            b->c->blocked = true;
            atomic_fetch_add(&b->r->n_blocked, 1);
        }
    }
    return ok;
}

/* The LATTICE_TXN_BPOP step of keys[0..n) (n >= 1, one slot) with delta
 * `which`: in MULTI a queued sub, which does not wait; else one txn op,
 * waiting at the primary until deadline when blocking. */
static cmd_outcome add_bpop(batch *b, lattice_resp_cmd_id id, const lattice_resp_arg *keys, size_t n, int64_t which,
                            bool in_multi, bool blocking, uint64_t deadline)
{
    lattice_coll_arg *a = lt_malloc(n * sizeof *a); /* the keys after the first, packed */
    for (size_t i = 1; a && i < n; i++) a[i - 1] = (lattice_coll_arg){keys[i].ptr, keys[i].len};
    size_t len = a ? lattice_coll_packed_len(a, n - 1) : 0;
    char *packed = a ? lt_malloc(len) : NULL;
    ent *e = packed && lattice_coll_pack(packed, len, a, n - 1) == len ? respd_ent_new(b, id) : NULL;
    bool ok = false;
    if (e) {
        e->sflags = (uint16_t)(which & 0xffff); /* the side, for respd_tx_give_back */
        lattice_op s = {(lattice_op_kind)LATTICE_TXN_BPOP, 0, NULL, keys[0].ptr, keys[0].len, packed, len, which, 0, 0};
        lattice_resp_arg others = {packed, len};
        if (in_multi) ok = respd_op_add(b, e, (lattice_op_kind)LATTICE_TXN_BPOP, 0, &keys[0], &others, which, 0);
        else ok = blocking ? add_blocking_op(b, e, &s, deadline) : add_txn_op(b, e, NULL, 0, &s, 1);
        if (!ok) {
            b->n_ops = e->first;
            b->n_ents--;
        }
    }
    lt_free(packed);
    lt_free(a);
    return ok ? CMD_BATCHED : respd_ent_error(b, "OOM command not allowed when used memory > 'maxmemory'.");
}

/* BLPOP / BRPOP / BZPOPMIN / BZPOPMAX key [key ...] timeout: one
 * LATTICE_TXN_BPOP step, its keys of one slot (CROSSSLOT otherwise, as Redis
 * Cluster); in MULTI it does not block (Redis: nil at once). */
static cmd_outcome bpop_command(batch *b, lattice_resp_cmd_id id, size_t argc, const lattice_resp_arg *argv,
                                bool in_multi)
{
    uint64_t deadline = 0;
    const char *err = block_timeout(&argv[argc - 1], &deadline);
    if (err) return respd_ent_error(b, err);
    if (!same_slot(argc - 1, argv, 1, 1)) return respd_ent_error(b, LATTICE_RESP_ERR_CROSSSLOT);
    int64_t which = id == LATTICE_RESP_CMD_BRPOP ? LATTICE_TXN_BPOP_RIGHT
                    : id == LATTICE_RESP_CMD_BZPOPMIN ? LATTICE_TXN_BPOP_ZSET
                    : id == LATTICE_RESP_CMD_BZPOPMAX ? LATTICE_TXN_BPOP_ZSET | LATTICE_TXN_BPOP_RIGHT
                                                      : 0;
    return add_bpop(b, id, &argv[1], argc - 2, which, in_multi, true, deadline);
}

/* LMPOP / ZMPOP numkeys key [key ...] LEFT|RIGHT / MIN|MAX [COUNT n] and
 * BLMPOP / BZMPOP timeout numkeys ...: one LATTICE_TXN_BPOP step with the
 * count, checked in Redis 7.0's order (lmpopGenericCommand: numkeys, the
 * side, COUNT, then the timeout), keys of one slot. */
static cmd_outcome mpop_command(batch *b, lattice_resp_cmd_id id, size_t argc, const lattice_resp_arg *argv,
                                bool in_multi)
{
    bool blocking = id == LATTICE_RESP_CMD_BLMPOP || id == LATTICE_RESP_CMD_BZMPOP;
    bool zset = id == LATTICE_RESP_CMD_ZMPOP || id == LATTICE_RESP_CMD_BZMPOP;
    size_t at = blocking ? 2 : 1;
    long long numkeys, count = -1;
    if (!lattice_resp_string2ll(argv[at].ptr, argv[at].len, &numkeys) || numkeys < 1)
        return respd_ent_error(b, "ERR numkeys should be greater than 0");
    if ((unsigned long long)numkeys >= argc - at - 1) return respd_ent_error(b, LATTICE_RESP_ERR_SYNTAX);
    size_t side = at + (size_t)numkeys + 1;
    int64_t which = zset ? LATTICE_TXN_BPOP_ZSET : 0;
    if (eq(&argv[side], zset ? "max" : "right")) which |= LATTICE_TXN_BPOP_RIGHT;
    else if (!eq(&argv[side], zset ? "min" : "left")) return respd_ent_error(b, LATTICE_RESP_ERR_SYNTAX);
    for (size_t j = side + 1; j < argc; j++) {
        if (count == -1 && eq(&argv[j], "count") && j + 1 < argc) {
            j++;
            if (!lattice_resp_string2ll(argv[j].ptr, argv[j].len, &count) || count < 1)
                return respd_ent_error(b, "ERR count should be greater than 0");
        } else {
            return respd_ent_error(b, LATTICE_RESP_ERR_SYNTAX);
        }
    }
    if (count == -1) count = 1;
    if (count > 0x7fffffff) count = 0x7fffffff; /* more than any collection holds */
    uint64_t deadline = 0;
    if (blocking) {
        const char *err = block_timeout(&argv[1], &deadline);
        if (err) return respd_ent_error(b, err);
    }
    const lattice_resp_arg *keys = &argv[at + 1];
    size_t nk = (size_t)numkeys;
    if (!same_slot(nk, keys, 0, 1)) return respd_ent_error(b, LATTICE_RESP_ERR_CROSSSLOT);
    which |= (int64_t)((uint64_t)count << LATTICE_TXN_BPOP_COUNT_SHIFT);
    return add_bpop(b, id, keys, nk, which, in_multi, blocking, deadline);
}

/* LMOVE src dst LEFT|RIGHT LEFT|RIGHT, RPOPLPUSH src dst: one txn op of
 * one LATTICE_TXN_LMOVE sub (its directions checked first, as Redis); their
 * blocking forms BLMOVE and BRPOPLPUSH (a timeout after them) the same
 * step waiting for an element, its keys of one slot. */
static cmd_outcome lmove_command(batch *b, lattice_resp_cmd_id id, size_t argc, const lattice_resp_arg *argv,
                                 bool in_multi)
{
    bool blocking = id == LATTICE_RESP_CMD_BLMOVE || id == LATTICE_RESP_CMD_BRPOPLPUSH;
    int64_t where = LATTICE_TXN_LMOVE_FROM_RIGHT; /* RPOPLPUSH: RIGHT LEFT */
    if (id == LATTICE_RESP_CMD_LMOVE || id == LATTICE_RESP_CMD_BLMOVE) {
        bool fr = eq(&argv[3], "right"), tr = eq(&argv[4], "right");
        if ((!fr && !eq(&argv[3], "left")) || (!tr && !eq(&argv[4], "left")))
            return respd_ent_error(b, LATTICE_RESP_ERR_SYNTAX);
        where = (fr ? LATTICE_TXN_LMOVE_FROM_RIGHT : 0) | (tr ? LATTICE_TXN_LMOVE_TO_RIGHT : 0);
    }
    uint64_t deadline = 0;
    if (blocking) {
        const char *err = block_timeout(&argv[argc - 1], &deadline);
        if (err) return respd_ent_error(b, err);
        if (!same_slot(3, argv, 1, 1)) return respd_ent_error(b, LATTICE_RESP_ERR_CROSSSLOT);
    }
    unsigned across = 0;
    if (!same_slot(3, argv, 1, 1) && !in_multi) {
        if (!b->c || !respd_cross_slot_ok(b->r, b->c)) return respd_ent_error(b, LATTICE_RESP_ERR_CROSSSLOT);
        across = LATTICE_OP_ACROSS;
    }
    ent *e = respd_ent_new(b, id);
    if (!e) return CMD_DONE;
    bool ok;
    if (in_multi) {
        ok = respd_op_add(b, e, (lattice_op_kind)LATTICE_TXN_LMOVE, 0, &argv[1], &argv[2], where, 0);
    } else {
        lattice_op s = {(lattice_op_kind)LATTICE_TXN_LMOVE, 0, NULL, argv[1].ptr, argv[1].len, argv[2].ptr, argv[2].len,
                        where, 0, 0};
        ok = blocking ? add_blocking_op(b, e, &s, deadline) : respd_tx_add_op(b, e, across, NULL, 0, &s, 1);
        if (ok && across) b->sealed = true;
    }
    return ok ? CMD_BATCHED : respd_ent_error(b, "OOM command not allowed when used memory > 'maxmemory'.");
}

/* The LATTICE_TXN_SETOP step of op over arguments a[0..n) (after the
 * command's name), its keys a[0] when dest and a run of nk from first: one
 * txn op (a transaction across partitions when they lie in several slots
 * and the connection allows it), or in MULTI a queued sub. */
static cmd_outcome setop_add(batch *b, lattice_resp_cmd_id id, int op, const lattice_resp_arg *a, size_t n, bool dest,
                             size_t first, size_t nk, bool in_multi)
{
    if (first > 0xffff || nk > 0xffffffffu) return respd_ent_error(b, LATTICE_RESP_ERR_SYNTAX);
    const lattice_resp_arg *key = dest ? &a[0] : &a[first];
    bool one = true;
    int s0 = lattice_key_slot(key->ptr, key->len);
    for (size_t i = first; i < first + nk && one; i++) one = lattice_key_slot(a[i].ptr, a[i].len) == s0;
    unsigned across = 0;
    if (!one && !in_multi) {
        if (!b->c || !respd_cross_slot_ok(b->r, b->c)) return respd_ent_error(b, LATTICE_RESP_ERR_CROSSSLOT);
        across = LATTICE_OP_ACROSS;
    }
    lattice_coll_arg *pa = lt_malloc((n ? n : 1) * sizeof *pa);
    for (size_t i = 0; pa && i < n; i++) pa[i] = (lattice_coll_arg){a[i].ptr, a[i].len};
    size_t len = pa ? lattice_coll_packed_len(pa, n) : 0;
    char *packed = pa ? lt_malloc(len) : NULL;
    ent *e = packed && lattice_coll_pack(packed, len, pa, n) == len ? respd_ent_new(b, id) : NULL;
    int64_t delta = LATTICE_TXN_SETOP_DELTA(op, dest, first, nk);
    bool ok = false;
    if (e) {
        lattice_resp_arg value = {packed, len};
        lattice_op s = {(lattice_op_kind)LATTICE_TXN_SETOP, 0, NULL, key->ptr, key->len, packed, len, delta, 0, 0};
        ok = in_multi ? respd_op_add(b, e, (lattice_op_kind)LATTICE_TXN_SETOP, 0, key, &value, delta, 0)
                      : respd_tx_add_op(b, e, across, NULL, 0, &s, 1);
        if (ok && across) b->sealed = true;
        if (!ok) {
            b->n_ops = e->first;
            b->n_ents--;
        }
    }
    lt_free(packed);
    lt_free(pa);
    return ok ? CMD_BATCHED : respd_ent_error(b, "OOM command not allowed when used memory > 'maxmemory'.");
}

cmd_outcome respd_tx_geo_store(batch *b, lattice_resp_cmd_id id, size_t argc, const lattice_resp_arg *argv,
                               size_t store_at)
{
    /* [the store key, the command's arguments from the source on] */
    lattice_resp_arg *a = lt_malloc(argc * sizeof *a);
    if (!a) return respd_ent_error(b, "OOM command not allowed when used memory > 'maxmemory'.");
    a[0] = argv[store_at];
    memcpy(a + 1, argv + 1, (argc - 1) * sizeof *a);
    int op = id == LATTICE_RESP_CMD_GEORADIUS ? LATTICE_SETOP_GEORADIUS : LATTICE_SETOP_GEORADIUSBYMEMBER;
    cmd_outcome oc = setop_add(b, id, op, a, argc, true, 1, 1, b->queue);
    lt_free(a);
    return oc;
}

/* SINTER ... ZRANGESTORE, SMOVE: one LATTICE_TXN_SETOP step (lattice/txn.h)
 * of their arguments.  Here only what says which arguments are keys, in
 * Redis 7.0's words (numkeys: sinterCardCommand's, or
 * zunionInterDiffGenericCommand's); the primary checks the rest in
 * Redis's order.  Keys of several slots: one transaction across
 * partitions, as RENAME's (CROSSSLOT on a cluster-aware connection); in
 * MULTI, EXEC decides. */
static cmd_outcome setop_command(batch *b, lattice_resp_cmd_id id, size_t argc, const lattice_resp_arg *argv,
                                 bool in_multi)
{
    static const struct {
        lattice_resp_cmd_id id;
        uint8_t op;
        bool dest;
        int8_t numkeys; /* the argument that counts the keys (after the name), or -1 */
        const char *name;
    } defs[] = {
        {LATTICE_RESP_CMD_SINTER, LATTICE_SETOP_SINTER, false, -1, "sinter"},
        {LATTICE_RESP_CMD_SINTERSTORE, LATTICE_SETOP_SINTERSTORE, true, -1, "sinterstore"},
        {LATTICE_RESP_CMD_SINTERCARD, LATTICE_SETOP_SINTERCARD, false, 0, "sintercard"},
        {LATTICE_RESP_CMD_SUNION, LATTICE_SETOP_SUNION, false, -1, "sunion"},
        {LATTICE_RESP_CMD_SUNIONSTORE, LATTICE_SETOP_SUNIONSTORE, true, -1, "sunionstore"},
        {LATTICE_RESP_CMD_SDIFF, LATTICE_SETOP_SDIFF, false, -1, "sdiff"},
        {LATTICE_RESP_CMD_SDIFFSTORE, LATTICE_SETOP_SDIFFSTORE, true, -1, "sdiffstore"},
        {LATTICE_RESP_CMD_SMOVE, LATTICE_SETOP_SMOVE, false, -1, "smove"},
        {LATTICE_RESP_CMD_ZUNION, LATTICE_SETOP_ZUNION, false, 0, "zunion"},
        {LATTICE_RESP_CMD_ZUNIONSTORE, LATTICE_SETOP_ZUNIONSTORE, true, 1, "zunionstore"},
        {LATTICE_RESP_CMD_ZINTER, LATTICE_SETOP_ZINTER, false, 0, "zinter"},
        {LATTICE_RESP_CMD_ZINTERSTORE, LATTICE_SETOP_ZINTERSTORE, true, 1, "zinterstore"},
        {LATTICE_RESP_CMD_ZINTERCARD, LATTICE_SETOP_ZINTERCARD, false, 0, "zintercard"},
        {LATTICE_RESP_CMD_ZDIFF, LATTICE_SETOP_ZDIFF, false, 0, "zdiff"},
        {LATTICE_RESP_CMD_ZDIFFSTORE, LATTICE_SETOP_ZDIFFSTORE, true, 1, "zdiffstore"},
        {LATTICE_RESP_CMD_ZRANGESTORE, LATTICE_SETOP_ZRANGESTORE, true, -1, "zrangestore"},
        {LATTICE_RESP_CMD_GEOSEARCHSTORE, LATTICE_SETOP_GEOSEARCHSTORE, true, -1, "geosearchstore"},
    };
    size_t d = 0;
    while (defs[d].id != id) d++;
    const lattice_resp_arg *a = argv + 1; /* the arguments after the name */
    size_t n = argc - 1, first = defs[d].dest ? 1 : 0, nk = n - first;
    lattice_resp_arg *named = NULL;
    if (id == LATTICE_RESP_CMD_GEOSEARCHSTORE) { /* dst src, its name as sent (Redis's errors quote it), the rest */
        if (!(named = lt_malloc((n + 1) * sizeof *named)))
            return respd_ent_error(b, "OOM command not allowed when used memory > 'maxmemory'.");
        named[0] = argv[1], named[1] = argv[2], named[2] = argv[0];
        memcpy(named + 3, argv + 3, (argc - 3) * sizeof *named);
        cmd_outcome oc = setop_add(b, id, defs[d].op, named, n + 1, true, 1, 1, in_multi);
        lt_free(named);
        return oc;
    }
    if (id == LATTICE_RESP_CMD_SMOVE) nk = 2;
    else if (id == LATTICE_RESP_CMD_ZRANGESTORE || id == LATTICE_RESP_CMD_GEOSEARCHSTORE) nk = 1;
    if (defs[d].numkeys >= 0) {
        const lattice_resp_arg *na = &a[defs[d].numkeys];
        long long v;
        bool num = lattice_resp_string2ll(na->ptr, na->len, &v);
        first = (size_t)defs[d].numkeys + 1;
        if (id == LATTICE_RESP_CMD_SINTERCARD) {
            if (!num || v < 1) return respd_ent_error(b, "ERR numkeys should be greater than 0");
            if ((unsigned long long)v > n - first) return respd_ent_error(b, "ERR Number of keys can't be greater than number of args");
        } else {
            char m[96];
            snprintf(m, sizeof m, "ERR at least 1 input key is needed for '%s' command", defs[d].name);
            if (!num) return respd_ent_error(b, LATTICE_RESP_ERR_NOT_INTEGER);
            if (v < 1) return respd_ent_error(b, m);
            if ((unsigned long long)v > n - first) return respd_ent_error(b, LATTICE_RESP_ERR_SYNTAX);
        }
        nk = (size_t)v;
    }
    return setop_add(b, id, defs[d].op, a, n, defs[d].dest, first, nk, in_multi);
}

bool respd_is_tx_key_command(lattice_resp_cmd_id id)
{
    return id >= LATTICE_RESP_CMD_RENAME && id <= LATTICE_RESP_CMD_GEOSEARCHSTORE;
}

cmd_outcome respd_tx_key_command(batch *b, lattice_resp_cmd_id id, size_t argc, const lattice_resp_arg *argv,
                                 bool in_multi)
{
    if (id == LATTICE_RESP_CMD_MSETNX) {
        if (argc % 2 == 0) return respd_ent_error(b, "ERR wrong number of arguments for 'msetnx' command");
        unsigned across = 0;
        if (!same_slot(argc, argv, 1, 2) && !in_multi) { /* in MULTI: EXEC decides */
            if (!b->c || !respd_cross_slot_ok(b->r, b->c)) return respd_ent_error(b, LATTICE_RESP_ERR_CROSSSLOT);
            across = LATTICE_OP_ACROSS;
        }
        size_t n = (argc - 1) / 2;
        if (in_multi) { /* the guard, then the puts it guards, as subs of EXEC's transaction */
            ent *e = respd_ent_new(b, id);
            bool ok = e && respd_op_add(b, e, (lattice_op_kind)LATTICE_TXN_IF_ABSENT, 0, &argv[1], NULL, (int64_t)n, 0);
            for (size_t i = 0; ok && i < n; i++)
                ok = respd_op_add(b, e, LATTICE_OP_PUT, 0, &argv[1 + 2 * i], &argv[2 + 2 * i], 0, 0);
            if (ok || !e) return CMD_BATCHED;
            b->n_ops = e->first;
            b->n_ents--;
            return respd_ent_error(b, "OOM command not allowed when used memory > 'maxmemory'.");
        }
        lattice_op *subs = lt_calloc(n, sizeof *subs);
        lattice_txn_watch *w = lt_calloc(n, sizeof *w);
        ent *e = subs && w ? respd_ent_new(b, id) : NULL;
        for (size_t i = 0; e && i < n; i++) {
            subs[i] = lattice_op_put(NULL, argv[1 + 2 * i].ptr, argv[1 + 2 * i].len, argv[2 + 2 * i].ptr,
                                     argv[2 + 2 * i].len);
            w[i] = (lattice_txn_watch){argv[1 + 2 * i].ptr, argv[1 + 2 * i].len, LATTICE_TXN_W_ABSENT, 0, 0};
        }
        bool ok = e && respd_tx_add_op(b, e, across, w, n, subs, n);
        if (ok && across) b->sealed = true; /* a later command on one of its keys runs after it */
        lt_free(subs);
        lt_free(w);
        return ok ? CMD_BATCHED : respd_ent_error(b, "OOM command not allowed when used memory > 'maxmemory'.");
    }
    if (id == LATTICE_RESP_CMD_LMOVE || id == LATTICE_RESP_CMD_RPOPLPUSH || id == LATTICE_RESP_CMD_BLMOVE ||
        id == LATTICE_RESP_CMD_BRPOPLPUSH)
        return lmove_command(b, id, argc, argv, in_multi);
    if (id >= LATTICE_RESP_CMD_BLPOP && id <= LATTICE_RESP_CMD_BZPOPMAX) return bpop_command(b, id, argc, argv, in_multi);
    if (id >= LATTICE_RESP_CMD_LMPOP && id <= LATTICE_RESP_CMD_BZMPOP) return mpop_command(b, id, argc, argv, in_multi);
    if (id >= LATTICE_RESP_CMD_SINTER && id <= LATTICE_RESP_CMD_GEOSEARCHSTORE) return setop_command(b, id, argc, argv, in_multi);
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
    unsigned across = 0;
    if (!same_slot(3, argv, 1, 1) && !in_multi) {
        if (!b->c || !respd_cross_slot_ok(b->r, b->c)) return respd_ent_error(b, LATTICE_RESP_ERR_CROSSSLOT);
        across = LATTICE_OP_ACROSS;
    }
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
        ok = respd_tx_add_op(b, e, across, NULL, 0, &s, 1);
        if (ok && across) b->sealed = true;
    }
    return ok ? CMD_BATCHED : respd_ent_error(b, "OOM command not allowed when used memory > 'maxmemory'.");
}

/* OBJECT IDLETIME: the key's storage page's idle time, at its primary. */
cmd_outcome respd_tx_idle_command(batch *b, const lattice_resp_arg *argv, bool in_multi)
{
    ent *e = respd_ent_new(b, LATTICE_RESP_CMD_OBJECT_IDLETIME);
    if (!e) return CMD_DONE;
    lattice_op s = {(lattice_op_kind)LATTICE_TXN_IDLE, 0, NULL, argv[2].ptr, argv[2].len, NULL, 0, 0, 0, 0};
    bool ok = in_multi ? respd_op_add(b, e, s.kind, 0, &argv[2], NULL, 0, 0) : add_txn_op(b, e, NULL, 0, &s, 1);
    if (ok) return CMD_BATCHED;
    b->n_ops = e->first;
    b->n_ents--;
    return respd_ent_error(b, "OOM command not allowed when used memory > 'maxmemory'.");
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

static void gave_back(void *arg, size_t i, const lattice_op_result *res)
{
    (void)arg, (void)i;
    if (res->status != LATTICE_OK)
        LT_LOG(LT_WARN, "resp", "an element popped for a client that left could not be put back: %s",
               lattice_strerror(res->status));
}

void respd_tx_give_back(lattice_respd *r, const batch *b)
{
    for (size_t i = 0; i < b->n_ents; i++) {
        const ent *e = &b->ents[i];
        if (!e->blocking || e->cmd == LATTICE_RESP_CMD_BLMOVE || e->cmd == LATTICE_RESP_CMD_BRPOPLPUSH) continue;
        batch tmp = {0};
        opres x;
        first_sub(b, e, &x, &tmp);
        /* [key, element], [key, member, score], [key, [elements]] or
         * [key, [[member, score] ...]]: the elements go back in the reverse
         * order of their pop (LPUSH for a head, RPUSH for a tail), members
         * with their scores unless they came back meanwhile (ZADD NX). */
        const char *v = tmp.vals ? tmp.vals + x.voff : NULL;
        size_t off = 0, n = 0;
        lattice_coll_elem top, key, el;
        bool zset = e->cmd == LATTICE_RESP_CMD_BZPOPMIN || e->cmd == LATTICE_RESP_CMD_BZPOPMAX ||
                    e->cmd == LATTICE_RESP_CMD_BZMPOP;
        bool counted = e->cmd == LATTICE_RESP_CMD_BLMPOP || e->cmd == LATTICE_RESP_CMD_BZMPOP;
        if (x.status != LATTICE_OK || !x.has_value || (x.flags & LATTICE_OP_R_LOST) ||
            lattice_coll_reply_next(v, x.vlen, &off, &top) != 1 || top.type != '*' ||
            lattice_coll_reply_next(v, x.vlen, &off, &key) != 1 || key.type != '$') {
            lt_free(tmp.vals);
            continue; /* nothing popped (nil), or nothing to read */
        }
        size_t items = 1;
        if (counted && (lattice_coll_reply_next(v, x.vlen, &off, &el) != 1 || el.type != '*' || el.num < 0)) items = 0;
        else if (counted) items = (size_t)el.num;
        lattice_coll_arg *a = items ? lt_calloc(2 * items + 1, sizeof *a) : NULL;
        if (a && zset) a[n++] = (lattice_coll_arg){"NX", 2};
        char (*scores)[64] = a && zset ? lt_calloc(items, sizeof *scores) : NULL;
        bool ok = a && (!zset || scores);
        for (size_t k = 0; ok && k < items; k++) {
            lattice_coll_elem m, sc;
            if (zset && counted && lattice_coll_reply_next(v, x.vlen, &off, &el) != 1) ok = false; /* the pair's header */
            if (ok && lattice_coll_reply_next(v, x.vlen, &off, &m) != 1) ok = false;
            if (ok && zset && lattice_coll_reply_next(v, x.vlen, &off, &sc) != 1) ok = false;
            if (!ok) break;
            if (zset) {
                snprintf(scores[k], sizeof scores[k], "%.*s", (int)(sc.len < 63 ? sc.len : 63), sc.ptr);
                a[n++] = (lattice_coll_arg){scores[k], strlen(scores[k])};
                a[n++] = (lattice_coll_arg){m.ptr, m.len};
            } else {
                a[items - 1 - k] = (lattice_coll_arg){m.ptr, m.len}; /* reversed */
                n++;
            }
        }
        int cmd = zset ? LATTICE_COLL_ZADD : e->sflags & LATTICE_TXN_BPOP_RIGHT ? LATTICE_COLL_RPUSH : LATTICE_COLL_LPUSH;
        size_t len = ok ? lattice_coll_packed_len(a, n) : 0;
        char *p = ok ? lt_malloc(len) : NULL;
        if (p && lattice_coll_pack(p, len, a, n) == len) {
            lattice_op op = lattice_op_coll(r->cache, (lattice_coll_cmd)cmd, key.ptr, key.len, p, len);
            if (lattice_op_submit(r->node, &op, 1, gave_back, NULL) != LATTICE_OK)
                gave_back(NULL, 0, &(lattice_op_result){.status = LATTICE_ERR_NOMEM});
        } else if (items) {
            gave_back(NULL, 0, &(lattice_op_result){.status = LATTICE_ERR_NOMEM});
        }
        lt_free(p);
        lt_free(scores);
        lt_free(a);
        lt_free(tmp.vals);
    }
}

/* ---- multi-key commands across slots (DEL, UNLINK, EXISTS, TOUCH, MGET, MSET) ---- */

static bool wrappable(lattice_resp_cmd_id id)
{
    return id == LATTICE_RESP_CMD_DEL || id == LATTICE_RESP_CMD_UNLINK || id == LATTICE_RESP_CMD_EXISTS ||
           id == LATTICE_RESP_CMD_TOUCH || id == LATTICE_RESP_CMD_MGET || id == LATTICE_RESP_CMD_MSET;
}

/* The last entry of b, just built as one op per key: when its keys lie in
 * several slots, its ops become the subs of ONE transaction across
 * partitions (all or nothing, one instant), answered as before
 * (respd_tx_across_reply).  The batch ends after it, so a later command of
 * the pipeline on one of its keys runs after it. */
void respd_tx_wrap_across(lattice_respd *r, conn *c, batch *b)
{
    ent *e = b->n_ents ? &b->ents[b->n_ents - 1] : NULL;
    if (!e || e->n < 2 || e->later || !wrappable((lattice_resp_cmd_id)e->cmd) || !respd_cross_slot_ok(r, c)) return;
    if (e->first + e->n != b->n_ops) return;
    const lattice_op *o = &b->ops[e->first];
    int s0 = lattice_key_slot(at(b, o[0].key), o[0].key_len);
    bool cross = false;
    for (size_t i = 1; i < e->n && !cross; i++) cross = lattice_key_slot(at(b, o[i].key), o[i].key_len) != s0;
    if (!cross) return;
    /* The subs point at a copy: the arena moves as the new op is added. */
    size_t n = e->n, bytes = 0;
    for (size_t i = 0; i < n; i++) bytes += o[i].key_len + o[i].value_len;
    lattice_op *subs = lt_calloc(n, sizeof *subs);
    char *copy = lt_malloc(bytes ? bytes : 1);
    if (!subs || !copy) {
        lt_free(subs);
        lt_free(copy);
        return; /* left as it was: one op per key */
    }
    char *p = copy;
    for (size_t i = 0; i < n; i++) {
        subs[i] = o[i];
        subs[i].key = p;
        memcpy(p, at(b, o[i].key), o[i].key_len);
        p += o[i].key_len;
        if (o[i].value) {
            subs[i].value = p;
            memcpy(p, at(b, o[i].value), o[i].value_len);
            p += o[i].value_len;
        }
    }
    uint32_t first = e->first;
    b->n_ops = first;
    e->n = 0;
    if (respd_tx_add_op(b, e, LATTICE_OP_ACROSS, NULL, 0, subs, n)) {
        e->across = true;
        b->sealed = true;
    } else { /* no memory: the entry answers OOM */
        b->n_ops = first;
        b->n_ents--;
        respd_ent_error(b, "OOM command not allowed when used memory > 'maxmemory'.");
    }
    lt_free(subs);
    lt_free(copy);
}

/* The reply of a wrapped entry: its subs' results unpacked into one result
 * per key, then answered as the command is outside a transaction. */
void respd_tx_across_reply(lattice_resp_out *o, const batch *b, const ent *e)
{
    const opres *x = &b->res[e->first];
    if (x->status != LATTICE_OK) {
        respd_add_result_error(o, x);
        return;
    }
    if (x->flags & LATTICE_OP_R_LOST) {
        lattice_resp_add_error(o, ERR_LOST, strlen(ERR_LOST));
        return;
    }
    lattice_txn_buf rb;
    long n = lattice_txn_result_begin(&rb, b->vals + x->voff, x->vlen);
    batch tmp = {0};
    tmp.res = n > 0 ? lt_calloc((size_t)n, sizeof *tmp.res) : NULL;
    bool ok = tmp.res != NULL;
    for (long i = 0; ok && i < n; i++) {
        lattice_txn_sub_result sr;
        ok = lattice_txn_result_next(&rb, &sr) && store_sub(&tmp, &tmp.res[i], &sr);
    }
    if (ok) {
        ent one = *e;
        one.across = false;
        one.first = 0;
        one.n = (uint32_t)n;
        respd_entry_reply(o, &tmp, &one, false);
    } else {
        lattice_resp_add_error(o, "ERR internal", 12);
    }
    lt_free(tmp.res);
    lt_free(tmp.vals);
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
    case LATTICE_RESP_CMD_UNWATCH: lattice_resp_add_simple(o, "OK", 2); return;
    case LATTICE_RESP_CMD_MSETNX: {
        const opres *t = &b->res[e->first]; /* in EXEC: its guard's result */
        if (in_exec && (t->status == LATTICE_OK || t->status == LATTICE_ERR_EXISTS))
            lattice_resp_add_int(o, t->status == LATTICE_OK);
        else if (t->status != LATTICE_OK) respd_add_result_error(o, t);
        else if (t->flags & LATTICE_OP_R_LOST) lattice_resp_add_error(o, ERR_LOST, strlen(ERR_LOST));
        else lattice_resp_add_int(o, !(t->flags & LATTICE_OP_R_ABORTED));
        return;
    }
    default: break;
    }
    batch tmp = {0};
    opres x;
    if (in_exec) x = b->res[e->first]; /* queued: the sub's own result */
    else first_sub(b, e, &x, &tmp);
    if (e->cmd == LATTICE_RESP_CMD_LMOVE || e->cmd == LATTICE_RESP_CMD_RPOPLPUSH ||
        (e->cmd >= LATTICE_RESP_CMD_BLPOP && e->cmd <= LATTICE_RESP_CMD_GEOSEARCHSTORE) ||
        e->cmd == LATTICE_RESP_CMD_GEORADIUS || e->cmd == LATTICE_RESP_CMD_GEORADIUSBYMEMBER) {
        if (x.flags & LATTICE_OP_R_LOST) lattice_resp_add_error(o, ERR_LOST, strlen(ERR_LOST));
        else if (x.status != LATTICE_OK || !x.has_value) respd_add_result_error(o, &x);
        else if (e->blocking && x.vlen == 3 && !memcmp((in_exec ? b->vals : tmp.vals) + x.voff, "_\r\n", 3))
            lattice_resp_add_null_array(o); /* BLMOVE's timeout: a null array, as Redis's blocked clients get */
        else respd_coll_add_reply(o, (in_exec ? b->vals : tmp.vals) + x.voff, x.vlen);
    } else if (e->cmd == LATTICE_RESP_CMD_OBJECT_IDLETIME) {
        if (x.flags & LATTICE_OP_R_LOST) lattice_resp_add_error(o, ERR_LOST, strlen(ERR_LOST));
        else if (x.status == LATTICE_ERR_NOT_FOUND) lattice_resp_add_null(o);
        else if (x.status != LATTICE_OK) respd_add_result_error(o, &x);
        else lattice_resp_add_int(o, x.num / 1000); /* seconds, as Redis */
    } else {
        move_reply(o, (lattice_resp_cmd_id)e->cmd, &x);
    }
    lt_free(tmp.vals);
}

/* The watches one read op of a WATCH answered (its keys: the request's
 * subs, the op's value resolved at submit).  False: the watch is broken
 * (EXEC must fail rather than miss a change); *failed when the op failed
 * as a whole (the reply is then an error: *err, or internal). */
static bool watch_note(struct respd_tx *t, const batch *b, size_t op_i, bool *failed, const opres **err)
{
    const opres *x = &b->res[op_i];
    lattice_txn_buf rb = {0};
    long n = x->status == LATTICE_OK ? lattice_txn_result_begin(&rb, b->vals + x->voff, x->vlen) : -1;
    const lattice_op *op = &b->ops[op_i];
    lattice_txn_buf qb;
    long nq = lattice_txn_request_begin(&qb, op->value, op->value_len);
    if (n < 0 || n != nq) {
        if (x->status != LATTICE_OK) *err = x;
        *failed = true;
        return false;
    }
    bool ok = true;
    for (long i = 0; i < n; i++) {
        lattice_txn_sub_result s;
        lattice_op sub;
        uint8_t mode;
        uint64_t version, epoch;
        if (!lattice_txn_request_next(&qb, &sub) || !lattice_txn_result_next(&rb, &s) ||
            !lattice_txn_version_watch(&s, &mode, &version, &epoch)) {
            ok = false;
            continue;
        }
        const void *k = sub.key;
        size_t kl = sub.key_len;
        if (t->n_w == t->cap_w) {
            size_t nc = t->cap_w ? 2 * t->cap_w : 8;
            tx_watch *p = lt_realloc(t->w, nc * sizeof *p);
            if (!p) {
                ok = false;
                continue;
            }
            t->w = p;
            t->cap_w = nc;
        }
        char *kc = lt_malloc(kl ? kl : 1);
        if (!kc) {
            ok = false;
            continue;
        }
        memcpy(kc, k, kl);
        t->w[t->n_w++] = (tx_watch){kc, kl, mode, version, epoch};
        note_slot(t, kc, kl);
    }
    return ok;
}

static void watch_reply(conn *c, const batch *b, const ent *e)
{
    struct respd_tx *t = tx_of(c);
    if (!t) return;
    const opres *err = NULL;
    bool ok = true, failed = false;
    for (size_t i = 0; i < e->n; i++) ok = watch_note(t, b, e->first + i, &failed, &err) && ok;
    if (!ok) t->watch_broken = true;
    if (err) respd_add_result_error(c->out, err);
    else if (failed) lattice_resp_add_error(c->out, "ERR internal", 12);
    else lattice_resp_add_simple(c->out, "OK", 2);
}

/* The ops of run's entries [lo, hi) are [ops_from(lo), ops_from(hi)). */
static size_t ops_from(const batch *q, size_t ent)
{
    size_t i = 0;
    while (i < q->n_ops && q->res[i].ent < ent) i++;
    return i;
}

/* A part of EXEC came back: entries [when_ms, arg2) of the queued batch. */
static void exec_reply(conn *c, const batch *b, const ent *e)
{
    struct respd_tx *t = c->tx;
    batch *q = t ? t->run : NULL;
    lattice_resp_out *o = c->out;
    if (!q) {
        lattice_resp_add_error(o, "ERR internal", 12);
        return;
    }
    size_t lo = (size_t)e->when_ms, hi = (size_t)e->arg2, o0 = ops_from(q, lo), o1 = ops_from(q, hi);
    if (e->n) {
        const opres *x = &b->res[e->first];
        bool lost = x->status == LATTICE_OK && (x->flags & LATTICE_OP_R_LOST);
        if (x->status != LATTICE_OK || lost) {
            /* The part failed as a whole: before anything was answered,
             * that is EXEC's reply; later, each of its commands'. */
            size_t n = t->header ? hi - lo : 1;
            for (size_t i = 0; i < n; i++) {
                if (lost) lattice_resp_add_error(o, ERR_LOST, strlen(ERR_LOST));
                else respd_add_result_error(o, x);
            }
            t->stopped = !t->header;
            return;
        }
        if (x->flags & LATTICE_OP_R_ABORTED) { /* only the first part carries the watches */
            lattice_resp_add_null_array(o);
            t->stopped = true;
            return;
        }
        lattice_txn_buf rb;
        long n = lattice_txn_result_begin(&rb, b->vals + x->voff, x->vlen);
        bool ok = n == (long)(o1 - o0);
        for (long i = 0; ok && i < n; i++) {
            lattice_txn_sub_result s;
            ok = lattice_txn_result_next(&rb, &s) && store_sub(q, &q->res[o0 + (size_t)i], &s);
        }
        if (!ok) {
            for (size_t i = 0; i < (t->header ? hi - lo : 1); i++) lattice_resp_add_error(o, "ERR internal", 12);
            t->stopped = !t->header;
            return;
        }
    }
    if (!t->header) lattice_resp_add_array(o, q->n_ents);
    t->header = true;
    for (size_t i = lo; i < hi; i++) respd_entry_reply(o, q, &q->ents[i], true);
}

void respd_tx_reply(conn *c, const batch *b, const ent *e)
{
    if (e->cmd == LATTICE_RESP_CMD_WATCH) watch_reply(c, b, e);
    else exec_reply(c, b, e);
}

/* ---- MULTI, EXEC, DISCARD, WATCH, UNWATCH ---- */

static cmd_outcome cmd_watch(lattice_respd *r, conn *c, batch *b, size_t argc, const lattice_resp_arg *argv)
{
    if (!same_slot(argc, argv, 1, 1) && !respd_cross_slot_ok(r, c))
        return respd_ent_error(b, LATTICE_RESP_ERR_CROSSSLOT);
    if (!tx_of(c)) return respd_ent_error(b, "OOM command not allowed when used memory > 'maxmemory'.");
    size_t n = argc - 1;
    lattice_op *subs = lt_calloc(n, sizeof *subs);
    bool *taken = lt_calloc(n, sizeof *taken);
    ent *e = subs && taken ? respd_ent_new(b, LATTICE_RESP_CMD_WATCH) : NULL;
    bool ok = e != NULL;
    /* One read op per slot (an op reaches one partition), in one entry. */
    for (size_t i = 0; ok && i < n; i++) {
        if (taken[i]) continue;
        int slot = lattice_key_slot(argv[1 + i].ptr, argv[1 + i].len);
        size_t m = 0;
        for (size_t j = i; j < n; j++) {
            if (taken[j] || lattice_key_slot(argv[1 + j].ptr, argv[1 + j].len) != slot) continue;
            taken[j] = true;
            subs[m++] = (lattice_op){(lattice_op_kind)LATTICE_TXN_VERSION, 0, NULL, argv[1 + j].ptr,
                                     argv[1 + j].len, NULL, 0, 0, 0, 0};
        }
        ok = add_txn_op(b, e, NULL, 0, subs, m);
    }
    lt_free(subs);
    lt_free(taken);
    if (!ok) return respd_ent_error(b, "OOM command not allowed when used memory > 'maxmemory'.");
    b->sealed = true;
    return CMD_BATCHED;
}

/* Entries [lo, hi) of the queued batch - commands with keys of one slot -
 * as ONE txn op in b, with the watches when nothing was answered yet. */
static cmd_outcome exec_part(lattice_respd *r, conn *c, batch *b, size_t lo, size_t hi)
{
    struct respd_tx *t = c->tx;
    batch *q = t->run;
    size_t o0 = ops_from(q, lo), o1 = ops_from(q, hi), nw = t->header ? 0 : t->n_w;
    lattice_op *ops = lt_calloc(o1 > o0 ? o1 - o0 : 1, sizeof *ops);
    lattice_txn_watch *w = lt_calloc(nw ? nw : 1, sizeof *w);
    ent *e = ops && w ? respd_ent_new(b, LATTICE_RESP_CMD_EXEC) : NULL;
    bool ok = e != NULL;
    for (size_t i = o0; ok && i < o1; i++) { /* the keys and values as pointers */
        lattice_op *op = &ops[i - o0];
        *op = q->ops[i];
        if (op->key) op->key = at(q, op->key);
        if (op->value) op->value = at(q, op->value);
    }
    for (size_t i = 0; ok && i < nw; i++)
        w[i] = (lattice_txn_watch){t->w[i].key, t->w[i].len, t->w[i].mode, t->w[i].version, t->w[i].epoch};
    if (ok && (o1 > o0 || nw)) ok = respd_tx_add_op(b, e, t->cross ? LATTICE_OP_ACROSS : 0, w, nw, ops, o1 - o0);
    lt_free(ops);
    lt_free(w);
    if (!ok) {
        if (e) b->n_ents--;
        bool header = t->header;
        discard(t);
        if (!header) return respd_ent_error(b, "OOM command not allowed when used memory > 'maxmemory'.");
        c->closing = true; /* a partial array cannot be completed */
        return CMD_DONE;
    }
    e->when_ms = (int64_t)lo;
    e->arg2 = (int64_t)hi;
    for (size_t i = lo; i < hi; i++) /* INFO commandstats: queued commands count as they run */
        if (q->ents[i].cmd && q->ents[i].cmd < LATTICE_RESP_CMD_ID_COUNT_) atomic_fetch_add(&r->cmd_calls[q->ents[i].cmd], 1);
    t->pos = hi;
    b->sealed = true;
    if (hi < q->n_ents) return CMD_DEFER; /* EXEC is parsed again once this part is answered */
    finish(t);
    return CMD_BATCHED;
}

/* The argv of a command run at EXEC in its place (u32 argc, (u32 len, bytes)*). */
static bool queue_later(batch *q, lattice_resp_cmd_id id, size_t argc, const lattice_resp_arg *argv)
{
    size_t n = 4;
    for (size_t i = 0; i < argc; i++) n += 4 + argv[i].len;
    char *p = lt_malloc(n);
    if (!p) return false;
    lattice_txn_buf w = {(uint8_t *)p, 0, n, false};
    lattice_txn_put_u(&w, argc, 4);
    for (size_t i = 0; i < argc; i++) lattice_txn_put_bytes(&w, argv[i].ptr, argv[i].len);
    ent *e = respd_ent_bytes(q, id, p, n);
    lt_free(p);
    if (e) e->later = true;
    return e != NULL;
}

/* Runs queued entry t->pos (a command without keys of the slot, or one
 * over the whole keyspace) as it would run alone. */
static cmd_outcome exec_later(lattice_respd *r, conn *c, batch *b)
{
    struct respd_tx *t = c->tx;
    const ent *e = &t->run->ents[t->pos++];
    lattice_txn_buf rb = {(uint8_t *)t->run->arena + e->first, 0, e->n, false};
    size_t argc = (size_t)lattice_txn_get_u(&rb, 4);
    lattice_resp_arg *argv = lt_calloc(argc ? argc : 1, sizeof *argv);
    if (!argv) {
        reply_err(c, "OOM command not allowed when used memory > 'maxmemory'.");
        return CMD_DONE;
    }
    for (size_t i = 0; i < argc; i++) {
        size_t n;
        argv[i].ptr = (const char *)lattice_txn_get_bytes(&rb, &n);
        argv[i].len = n;
    }
    cmd_outcome oc = respd_command_in_exec(r, c, b, argc, argv);
    lt_free(argv);
    return oc;
}

/* EXEC: the queue in order, in parts (docs/RESP.md, "Transactions"): each
 * maximal run of commands on keys of the slot is one txn op (atomic), each
 * other command runs in its place between them; the first part carries the
 * watches.  A part that needs the grid ends the batch (CMD_DEFER: EXEC is
 * parsed again when it is answered), so the replies form one array in
 * queue order. */
static cmd_outcome cmd_exec(lattice_respd *r, conn *c, batch *b, char *err)
{
    struct respd_tx *t = c->tx;
    if (!t || !t->running) atomic_fetch_add(&r->cmd_calls[LATTICE_RESP_CMD_EXEC], 1); /* once, failed or not, as Redis */
    if (!t || !t->multi) {
        reply_err(c, ERR_EXEC_NO_MULTI);
        return CMD_DONE;
    }
    if (!t->running) {
        if (t->dirty) {
            discard(t);
            reply_err(c, ERR_EXECABORT);
            return CMD_DONE;
        }
        if (t->cross && !respd_cross_slot_ok(r, c)) {
            discard(t);
            reply_err(c, LATTICE_RESP_ERR_CROSSSLOT);
            return CMD_DONE;
        }
        if (t->watch_broken) {
            discard(t);
            lattice_resp_add_null_array(c->out);
            return CMD_DONE;
        }
        if (t->slot >= 0 && !t->cross && (c->aware == AWARE_YES || r->cfg.moved == LATTICE_RESPD_MOVED_ALWAYS) &&
            r->cfg.moved != LATTICE_RESPD_MOVED_NEVER && respd_route(r, (uint16_t)t->slot, false, err, NULL) == RESPD_MOVED) {
            discard(t);
            reply_err(c, err);
            return CMD_DONE;
        }
        respd_batch_free(t->run);
        t->run = t->sub;
        t->sub = NULL;
        t->pos = 0;
        t->running = true;
        t->header = t->stopped = false;
        if (t->n_w && (!t->run->n_ents || t->run->ents[0].later)) return exec_part(r, c, b, 0, 0); /* the watches first */
    } else if (t->stopped) {
        finish(t);
        return CMD_DONE;
    }
    batch *q = t->run;
    while (t->pos < q->n_ents) {
        if (!q->ents[t->pos].later) {
            size_t end = t->pos;
            while (end < q->n_ents && !q->ents[end].later) end++;
            return exec_part(r, c, b, t->pos, end);
        }
        if (!t->header) lattice_resp_add_array(c->out, q->n_ents);
        t->header = true;
        cmd_outcome oc = exec_later(r, c, b);
        if (b->n_ents) b->sealed = true; /* what follows EXEC in the pipeline runs after it */
        if (t->pos == q->n_ents) {
            finish(t);
            return oc == CMD_DEFER ? CMD_DONE : oc;
        }
        if (b->n_ents || b->xreq) return CMD_DEFER;
    }
    if (!t->header) lattice_resp_add_array(c->out, 0);
    finish(t);
    return CMD_DONE;
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
    if (id == LATTICE_RESP_CMD_UNWATCH) {
        respd_ent_new(sub, LATTICE_RESP_CMD_UNWATCH);
    } else if (respd_is_tx_key_command(id)) {
        respd_tx_key_command(sub, id, argc, argv, true);
    } else if (id == LATTICE_RESP_CMD_OBJECT_IDLETIME) {
        respd_tx_idle_command(sub, argv, true);
    } else if (respd_is_key_command(id) && id != LATTICE_RESP_CMD_DBSIZE && !respd_is_walk_command(id)) {
        respd_key_command(r, sub, id, argc, argv);
    } else { /* no key of the slot (DBSIZE and the walks span partitions): run in its place */
        queue_later(sub, id, argc, argv);
    }
    if (sub->n_ents == ents0) { /* out of memory */
        t->dirty = true;
        reply_err(c, "OOM command not allowed when used memory > 'maxmemory'.");
        return CMD_DONE;
    }
    for (size_t i = ops0; i < sub->n_ops; i++) {
        lattice_op *o = &sub->ops[i];
        if (sub->res[i].cond_expire) { /* EXPIRE NX/XX/GT/LT: decided at the primary, in the step */
            const ent *qe = &sub->ents[sub->res[i].ent];
            int64_t now = (int64_t)lt_wall_ms();
            unsigned f = qe->sflags, cond = 0;
            if (f & LATTICE_RESP_EXPIRE_NX) cond |= LATTICE_TXN_EXP_NX;
            if (f & LATTICE_RESP_EXPIRE_XX) cond |= LATTICE_TXN_EXP_XX;
            if (f & LATTICE_RESP_EXPIRE_GT) cond |= LATTICE_TXN_EXP_GT;
            if (f & LATTICE_RESP_EXPIRE_LT) cond |= LATTICE_TXN_EXP_LT;
            if (qe->when_ms <= now) cond |= LATTICE_TXN_EXP_PAST;
            o->kind = (lattice_op_kind)LATTICE_TXN_EXPIRE_IF;
            o->delta = (int64_t)cond;
            o->ttl_ms = qe->when_ms <= now ? 0 : (uint64_t)(qe->when_ms - now);
            sub->res[i].cond_expire = false;
        }
        lattice_op view = *o; /* its key and value as pointers */
        view.key = at(sub, o->key);
        view.value = o->value ? at(sub, o->value) : NULL;
        lattice_txn_keys it = lattice_txn_keys_of(&view);
        const void *k;
        size_t kl;
        while (lattice_txn_keys_next(&it, &k, &kl)) note_slot(t, k, kl);
    }
    if (atomic_load_explicit(&r->n_mons, memory_order_relaxed)) respd_monitor_feed(r, c, rc, argc, argv);
    lattice_resp_add_simple(c->out, "QUEUED", 6);
    return CMD_DONE;
}

cmd_outcome respd_tx_command(lattice_respd *r, conn *c, batch *b, const lattice_resp_cmd *rc, size_t argc,
                             const lattice_resp_arg *argv, char *err)
{
    bool multi = respd_tx_in_multi(c);
    lattice_resp_cmd_id id = rc ? lattice_resp_cmd_id_of(rc) : (lattice_resp_cmd_id)0;
    if (b->n_ents) return CMD_DEFER;
    bool mon = rc && atomic_load_explicit(&r->n_mons, memory_order_relaxed);
    if (id == LATTICE_RESP_CMD_WATCH && !multi) {
        if (!c->authed) return respd_ent_error(b, LATTICE_RESP_ERR_NOAUTH);
        atomic_fetch_add(&r->cmd_calls[id], 1);
        if (mon) respd_monitor_feed(r, c, rc, argc, argv);
        return cmd_watch(r, c, b, argc, argv);
    }
    if (!rc && multi && eq(&argv[0], "config") && argc >= 2 && c->authed) { /* not in the table: no key, runs in its place */
        if (!queue_later(c->tx->sub, LATTICE_RESP_CMD_ID_COUNT_, argc, argv)) {
            c->tx->dirty = true;
            reply_err(c, "OOM command not allowed when used memory > 'maxmemory'.");
            return CMD_DONE;
        }
        lattice_resp_add_simple(c->out, "QUEUED", 6);
        return CMD_DONE;
    }
    if (!rc && multi && eq(&argv[0], "config")) lattice_resp_err_arity("config", err);
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
    c->last_cmd = lattice_resp_cmd_name(rc); /* CLIENT LIST's cmd=: the command queued, or MULTI's own */
    /* MONITOR, as Redis: MULTI's own commands as they run (EXEC once), a
     * queued one when it is queued (Redis: when EXEC runs it - same order). */
    bool own = id == LATTICE_RESP_CMD_MULTI || id == LATTICE_RESP_CMD_DISCARD || id == LATTICE_RESP_CMD_WATCH ||
               (id == LATTICE_RESP_CMD_UNWATCH && !multi) || (id == LATTICE_RESP_CMD_EXEC && !(c->tx && c->tx->running));
    if (mon && own) respd_monitor_feed(r, c, rc, argc, argv);
    struct respd_tx *t = tx_of(c);
    if (!t) {
        reply_err(c, "OOM command not allowed when used memory > 'maxmemory'.");
        return CMD_DONE;
    }
    switch (id) {
    case LATTICE_RESP_CMD_MULTI:
        atomic_fetch_add(&r->cmd_calls[id], 1); /* a nested one too, as Redis */
        if (multi) {
            reply_err(c, ERR_NESTED);
            return CMD_DONE;
        }
        respd_batch_free(t->run); /* the last EXEC's queue */
        t->run = NULL;
        t->sub = lt_calloc(1, sizeof *t->sub);
        if (!t->sub) {
            reply_err(c, "OOM command not allowed when used memory > 'maxmemory'.");
            return CMD_DONE;
        }
        t->sub->queue = true;
        t->sub->r = r;
        t->multi = true;
        lattice_resp_add_simple(c->out, "OK", 2);
        return CMD_DONE;
    case LATTICE_RESP_CMD_EXEC: return cmd_exec(r, c, b, err);
    case LATTICE_RESP_CMD_DISCARD:
        atomic_fetch_add(&r->cmd_calls[id], 1);
        if (!multi) reply_err(c, ERR_DISCARD_NO_MULTI);
        else lattice_resp_add_simple(c->out, "OK", 2);
        if (multi) discard(t);
        return CMD_DONE;
    case LATTICE_RESP_CMD_WATCH:
        atomic_fetch_add(&r->cmd_calls[id], 1);
        reply_err(c, ERR_WATCH_IN_MULTI);
        return CMD_DONE;
    case LATTICE_RESP_CMD_UNWATCH:
        if (!multi) {
            atomic_fetch_add(&r->cmd_calls[id], 1);
            unwatch(t);
            lattice_resp_add_simple(c->out, "OK", 2);
            return CMD_DONE;
        }
        break;
    default: break;
    }
    return queue(r, c, rc, argc, argv, err);
}
