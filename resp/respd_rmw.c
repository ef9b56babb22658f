/*
 * respd: SETRANGE, SETBIT, INCRBYFLOAT (one op of the kind of the same name,
 * run atomically at the key's primary), DUMP and RESTORE of string values
 * (a GET / a PUT, with Redis's DUMP payload made and checked here: rdb.h),
 * OBJECT ENCODING|REFCOUNT|IDLETIME|FREQ|HELP and MEMORY USAGE (OBJECT
 * ENCODING and MEMORY USAGE: LATTICE_COLL_OBJECT, which the key's primary
 * answers for a value of any type).  Argument checks and
 * error texts follow Redis 7.0's t_string.c, bitops.c, cluster.c
 * (restoreCommand) and object.c, in their order; where Redis looks the key
 * up before it rejects an argument (RESTORE's BUSYKEY before its TTL and
 * payload), the rejection is kept in the entry and decided on the reply.
 */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "lattice/alloc.h"
#include "lattice/clock.h"
#include "lattice/coll.h"
#include "lattice/txn.h"
#include "rdb.h"
#include "respd_int.h"

#define ERR_TOO_BIG "ERR string exceeds maximum allowed size (proto-max-bulk-len)"
#define ERR_BIT "ERR bit is not an integer or out of range"
#define ERR_FLOAT "ERR value is not a valid float"
#define ERR_NAN "ERR increment would produce NaN or Infinity"
#define ERR_BUSYKEY "BUSYKEY Target key name already exists."
#define ERR_OOM "OOM command not allowed when used memory > 'maxmemory'."
#define ERR_NO_LFU "ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust."
#define ERR_NO_RESULT "ERR INCRBYFLOAT's result did not come back (a full_async cache, or a resend after a failover): read the key"
#define SHARED_INTEGERS 10000 /* Redis's OBJ_SHARED_INTEGERS */

/* RESTORE: what the reply is once the key's state is known (ent.sflags,
 * low byte); the payload's RDB type above it for RS_NOT_STRING. */
enum {
    RS_PUT = 0,     /* a PUT (NX unless REPLACE): OK, or BUSYKEY */
    RS_EXPIRED,     /* its TTL already passed: OK (REPLACE: removed) unless BUSYKEY */
    RS_NOT_INT,     /* the deferred errors: BUSYKEY first when the key exists */
    RS_BAD_TTL,
    RS_BAD_PAYLOAD,
    RS_BAD_FORMAT,
    RS_NOT_STRING,  /* a type Lattice holds no value of (a stream, a module's) */
    RS_COLL,        /* a collection: a transaction of its key (restore_coll) */
};
#define RS_CODE_MASK 0x7fu
#define RS_REPLACE 0x80u
#define RS_TYPE_SHIFT 8

bool respd_is_rmw_command(lattice_resp_cmd_id id)
{
    return id >= LATTICE_RESP_CMD_SETRANGE && id <= LATTICE_RESP_CMD_MEMORY_USAGE;
}

static bool eq(const lattice_resp_arg *a, const char *s)
{
    size_t n = strlen(s);
    return a->len == n && strncasecmp(a->ptr, s, n) == 0;
}

static bool ll_arg(const lattice_resp_arg *a, long long *v) { return lattice_resp_string2ll(a->ptr, a->len, v); }

static bool fail(char *err, const char *msg)
{
    snprintf(err, LATTICE_RESP_ERR_MAX, "%s", msg);
    return false;
}

static bool added(bool ok, char *err) { return ok || fail(err, ERR_OOM); }

static void restore_error(unsigned sflags, char *err)
{
    static const char *const text[] = {
        [RS_NOT_INT] = LATTICE_RESP_ERR_NOT_INTEGER,
        [RS_BAD_TTL] = "ERR Invalid TTL value, must be >= 0",
        [RS_BAD_PAYLOAD] = "ERR DUMP payload version or checksum are wrong",
        [RS_BAD_FORMAT] = "ERR Bad data format",
    };
    unsigned code = sflags & RS_CODE_MASK;
    if (code == RS_NOT_STRING)
        snprintf(err, LATTICE_RESP_ERR_MAX,
                 "ERR Bad data format: the payload holds a value of RDB type %u, which Lattice does not hold",
                 sflags >> RS_TYPE_SHIFT);
    else
        snprintf(err, LATTICE_RESP_ERR_MAX, "%s", text[code]);
}

/* RESTORE of a collection: the key's steps in one transaction of its
 * partition (in MULTI, subs of EXEC's) - the key absent (IF_ABSENT guards
 * the rest: BUSYKEY) or removed (REPLACE), the elements written by the
 * type's own command (HSET, RPUSH, SADD, ZADD: the row those build), then
 * the expiry (ttl ms from now; 0 none). */
static bool restore_coll(batch *b, ent *e, const lattice_resp_arg *key, const rdb_value *v, bool replace, uint64_t ttl)
{
    static const int cmd_of[] = {0, LATTICE_COLL_HSET, LATTICE_COLL_RPUSH, LATTICE_COLL_SADD, LATTICE_COLL_ZADD};
    bool zset = v->type == 4;
    size_t n = zset ? 2 * v->n : v->n;
    lattice_coll_arg *a = lt_malloc(n * sizeof *a);
    char (*sc)[32] = zset ? lt_malloc(v->n * sizeof *sc) : NULL;
    if (!a || (zset && !sc)) {
        lt_free(a);
        lt_free(sc);
        return false;
    }
    for (size_t i = 0; i < v->n; i++) {
        if (!zset) {
            a[i] = (lattice_coll_arg){v->v[i].p, v->v[i].len};
            continue;
        }
        double d = v->v[i].score;
        int k = isinf(d) ? snprintf(sc[i], sizeof sc[i], "%s", d > 0 ? "inf" : "-inf")
                         : snprintf(sc[i], sizeof sc[i], "%.17g", d);
        a[2 * i] = (lattice_coll_arg){sc[i], (size_t)k};
        a[2 * i + 1] = (lattice_coll_arg){v->v[i].p, v->v[i].len};
    }
    size_t len = lattice_coll_packed_len(a, n);
    char *packed = lt_malloc(len);
    bool ok = packed && lattice_coll_pack(packed, len, a, n) == len;
    lt_free(a);
    lt_free(sc);
    if (!ok) {
        lt_free(packed);
        return false;
    }
    lattice_op subs[3];
    size_t ns = 0;
    if (replace) subs[ns++] = (lattice_op){LATTICE_OP_REMOVE, 0, NULL, key->ptr, key->len, NULL, 0, 0, 0, 0};
    else subs[ns++] = (lattice_op){(lattice_op_kind)LATTICE_TXN_IF_ABSENT, 0, NULL, key->ptr, key->len, NULL, 0, ttl ? 2 : 1, 0, 0};
    subs[ns++] = (lattice_op){LATTICE_OP_COLL_WRITE, 0, NULL, key->ptr, key->len, packed, len, cmd_of[v->type], 0, 0};
    if (ttl) subs[ns++] = (lattice_op){LATTICE_OP_EXPIRE, 0, NULL, key->ptr, key->len, NULL, 0, 0, ttl, 0};
    if (b->queue) { /* in MULTI: each a sub of EXEC's transaction */
        for (size_t i = 0; ok && i < ns; i++) {
            lattice_resp_arg val = {subs[i].value, subs[i].value_len};
            ok = respd_op_add(b, e, subs[i].kind, 0, key, subs[i].value ? &val : NULL, subs[i].delta, subs[i].ttl_ms);
        }
    } else {
        ok = respd_tx_add_op(b, e, 0, NULL, 0, subs, ns);
    }
    lt_free(packed);
    return ok;
}

/* RESTORE key ttl payload [REPLACE] [ABSTTL] [IDLETIME s] [FREQ f]
 * (restoreCommand).  IDLETIME and FREQ are checked as Redis does, then
 * ignored: Lattice keeps neither per key (docs/RESP.md). */
static bool restore(batch *b, ent *e, size_t argc, const lattice_resp_arg *argv, char *err)
{
    bool replace = false, absttl = false;
    long long idle = -1, freq = -1, ttl = 0;
    for (size_t j = 4; j < argc; j++) {
        bool more = j + 1 < argc;
        if (eq(&argv[j], "replace")) {
            replace = true;
        } else if (eq(&argv[j], "absttl")) {
            absttl = true;
        } else if (eq(&argv[j], "idletime") && more && freq == -1) {
            if (!ll_arg(&argv[++j], &idle)) return fail(err, LATTICE_RESP_ERR_NOT_INTEGER);
            if (idle < 0) return fail(err, "ERR Invalid IDLETIME value, must be >= 0");
        } else if (eq(&argv[j], "freq") && more && idle == -1) {
            if (!ll_arg(&argv[++j], &freq)) return fail(err, LATTICE_RESP_ERR_NOT_INTEGER);
            if (freq < 0 || freq > 255) return fail(err, "ERR Invalid FREQ value, must be >= 0 and <= 255");
        } else {
            return fail(err, LATTICE_RESP_ERR_SYNTAX);
        }
    }
    unsigned rs = RS_PUT;
    rdb_value val = {0};
    int type = -1;
    int64_t now = (int64_t)lt_wall_ms();
    if (!ll_arg(&argv[2], &ttl)) {
        rs = RS_NOT_INT;
    } else if (ttl < 0) {
        rs = RS_BAD_TTL;
    } else {
        switch (rdb_load_value(argv[3].ptr, argv[3].len, &val, &type)) {
        case RDB_LOAD_OK: rs = val.type == 0 ? RS_PUT : RS_COLL; break;
        case RDB_LOAD_BAD_CHECKSUM: rs = RS_BAD_PAYLOAD; break;
        case RDB_LOAD_NOT_STRING:
        case RDB_LOAD_UNSUPPORTED: rs = RS_NOT_STRING | (unsigned)type << RS_TYPE_SHIFT; break;
        case RDB_LOAD_NOMEM: return fail(err, ERR_OOM);
        default: rs = RS_BAD_FORMAT; break;
        }
    }
    bool value = rs == RS_PUT || rs == RS_COLL;
    if (value && ttl && !absttl) ttl = ttl > LLONG_MAX - now ? LLONG_MAX : ttl + now;
    if (value && ttl && ttl <= now) rs = RS_EXPIRED;
    e->sflags = (uint16_t)(rs | (replace ? RS_REPLACE : 0));
    unsigned code = rs & RS_CODE_MASK;
    if (code >= RS_NOT_INT && code <= RS_NOT_STRING && replace) { /* REPLACE looks nothing up: the error at once */
        restore_error(rs, err);
        return false;
    }
    bool ok;
    if (rs == RS_PUT) {
        lattice_resp_arg v = {val.v[0].p, val.v[0].len};
        ok = respd_op_add(b, e, LATTICE_OP_PUT, replace ? 0 : LATTICE_OP_NX, &argv[1], &v, 0,
                          ttl ? (uint64_t)(ttl - now) : 0);
    } else if (rs == RS_COLL) {
        ok = restore_coll(b, e, &argv[1], &val, replace, ttl ? (uint64_t)(ttl - now) : 0);
    } else if (rs == RS_EXPIRED && replace) {
        ok = respd_op_add(b, e, LATTICE_OP_REMOVE, 0, &argv[1], NULL, 0, 0);
    } else {
        ok = respd_op_add(b, e, LATTICE_OP_CONTAINS, 0, &argv[1], NULL, 0, 0);
    }
    rdb_value_free(&val);
    return added(ok, err);
}

/* SETRANGE key offset value (setrangeCommand): the offset first; a value
 * past 512 MiB is refused before the key is read unless it is empty (then
 * Redis answers the length as it is). */
static bool setrange(batch *b, ent *e, const lattice_resp_arg *argv, char *err)
{
    long long off;
    if (!ll_arg(&argv[2], &off)) return fail(err, LATTICE_RESP_ERR_NOT_INTEGER);
    if (off < 0) return fail(err, "ERR offset is out of range");
    if (argv[3].len && (unsigned long long)off + argv[3].len > LATTICE_RESP_DEFAULT_MAX_BULK) return fail(err, ERR_TOO_BIG);
    return added(respd_op_add(b, e, LATTICE_OP_SETRANGE, 0, &argv[1], &argv[3], off, 0), err);
}

/* SETBIT key offset 0|1 (setbitCommand, getBitOffsetFromArgument). */
static bool setbit(batch *b, ent *e, const lattice_resp_arg *argv, char *err)
{
    long long off, on;
    if (!ll_arg(&argv[2], &off) || off < 0 || (off >> 3) >= (long long)LATTICE_RESP_DEFAULT_MAX_BULK)
        return fail(err, LATTICE_RESP_ERR_BIT_OFFSET);
    if (!ll_arg(&argv[3], &on) || (on & ~1)) return fail(err, ERR_BIT);
    lattice_resp_arg bit = {on ? "1" : "0", 1};
    return added(respd_op_add(b, e, LATTICE_OP_SETBIT, 0, &argv[1], &bit, off, 0), err);
}

/* OBJECT ENCODING key: the thresholds CONFIG SET keeps on this endpoint go
 * with it (respd_immediate.c's enc_params: hash entries, hash value, zset
 * entries, zset value), for the primary to decide by. */
static bool object_encoding(batch *b, ent *e, const lattice_resp_arg *argv, char *err)
{
    static const int which[] = {0, 1, 5, 6};
    char num[4][24];
    lattice_resp_arg a[5] = {{"encoding", 8}};
    for (size_t k = 0; k < 4; k++) {
        long long v = atomic_load_explicit(&b->r->enc[which[k]], memory_order_relaxed);
        a[k + 1] = (lattice_resp_arg){num[k], lattice_resp_ll2string(num[k], v)};
    }
    return added(respd_coll_op(b, e, LATTICE_COLL_OBJECT, &argv[2], a, 5), err);
}

/* MEMORY USAGE key [SAMPLES count] (memoryCommand): the key's bytes as its
 * primary holds them, every element counted (SAMPLES is checked, not
 * needed). */
static bool memory_usage(batch *b, ent *e, size_t argc, const lattice_resp_arg *argv, char *err)
{
    for (size_t j = 3; j < argc; j += 2) { /* SAMPLES n, as often as given; the last counts */
        long long samples;
        if (!eq(&argv[j], "samples") || j + 1 >= argc) return fail(err, "ERR syntax error");
        if (!ll_arg(&argv[j + 1], &samples)) return fail(err, LATTICE_RESP_ERR_NOT_INTEGER);
        if (samples < 0) return fail(err, "ERR syntax error");
    }
    lattice_resp_arg a = {"memory", 6};
    return added(respd_coll_op(b, e, LATTICE_COLL_OBJECT, &argv[2], &a, 1), err);
}

cmd_outcome respd_rmw_command(batch *b, lattice_resp_cmd_id id, size_t argc, const lattice_resp_arg *argv)
{
    ent *e = respd_ent_new(b, id);
    if (!e) return b->n_ents ? CMD_BATCHED : CMD_DONE; /* out of memory: the batch fails as a whole */
    size_t ops_before = b->n_ops;
    char err[LATTICE_RESP_ERR_MAX];
    bool ok;
    switch (id) {
    case LATTICE_RESP_CMD_SETRANGE: ok = setrange(b, e, argv, err); break;
    case LATTICE_RESP_CMD_SETBIT: ok = setbit(b, e, argv, err); break;
    case LATTICE_RESP_CMD_INCRBYFLOAT:
        ok = added(respd_op_add(b, e, LATTICE_OP_INCRBYFLOAT, 0, &argv[1], &argv[2], 0, 0), err);
        break;
    case LATTICE_RESP_CMD_RESTORE: ok = restore(b, e, argc, argv, err); break;
    case LATTICE_RESP_CMD_OBJECT_FREQ:
        ok = added(respd_op_add(b, e, LATTICE_OP_CONTAINS, 0, &argv[2], NULL, 0, 0), err);
        break;
    case LATTICE_RESP_CMD_OBJECT_ENCODING: ok = object_encoding(b, e, argv, err); break;
    case LATTICE_RESP_CMD_MEMORY_USAGE: ok = memory_usage(b, e, argc, argv, err); break;
    case LATTICE_RESP_CMD_OBJECT_REFCOUNT:
        ok = added(respd_op_add(b, e, LATTICE_OP_GET, 0, &argv[2], NULL, 0, 0), err);
        break;
    default: { /* DUMP: the value of any type in one read (OBJECT's "elements") */
        lattice_resp_arg a = {"elements", 8};
        ok = added(respd_coll_op(b, e, LATTICE_COLL_OBJECT, &argv[1], &a, 1), err);
        break;
    }
    }
    if (ok) return CMD_BATCHED;
    b->n_ops = ops_before;
    b->n_ents--;
    return respd_ent_error(b, err);
}

/* ---- replies ---- */

static void add_err(lattice_resp_out *o, const char *msg) { lattice_resp_add_error(o, msg, strlen(msg)); }

/* OBJECT REFCOUNT of a string as Redis decides it (tryObjectEncoding, the
 * default maxmemory-policy): a canonical integer 0..9999 is one of the
 * shared objects (INT_MAX), any other value 1. */
static void reply_refcount(lattice_resp_out *o, const char *v, size_t n)
{
    long long x;
    bool shared = n <= 20 && lattice_resp_string2ll(v, n, &x) && x >= 0 && x < SHARED_INTEGERS;
    lattice_resp_add_int(o, shared ? INT_MAX : 1);
}

static void reply_dump(lattice_resp_out *o, const batch *b, const opres *x)
{
    /* The key's value as OBJECT "elements" answers it: a bulk string, a
     * hash's map, a list's array, a set's set, a sorted set's pairs. */
    const char *v = x->has_value ? b->vals + x->voff : "";
    size_t off = 0;
    lattice_coll_elem h;
    if (x->status == LATTICE_ERR_NOT_FOUND || lattice_coll_reply_next(v, x->vlen, &off, &h) != 1 || h.type == '_') {
        lattice_resp_add_null(o);
        return;
    }
    static const char kinds[] = "$%*~&"; /* in types/types.h's order: string, hash, list, set, sorted set */
    const char *k = strchr(kinds, h.type);
    size_t n = h.type == '$' ? 1 : (size_t)h.num, per = h.type == '%' ? 2 : 1;
    rdb_value rv = {k ? (int)(k - kinds) : -1, NULL, 0, NULL, 0};
    size_t cap = n * per;
    if (!cap) cap = 1;
    if (!k || h.num < 0 || !(rv.v = lt_malloc(cap * sizeof *rv.v))) {
        add_err(o, k && h.num >= 0 ? ERR_OOM : "ERR DUMP: the value came back malformed");
        lt_free(rv.v);
        return;
    }
    if (h.type == '$') rv.v[rv.n++] = (rdb_elem){h.ptr, h.len, 0};
    bool ok = true;
    for (size_t i = 0; ok && h.type != '$' && i < n * per; i++) {
        lattice_coll_elem m, sc;
        ok = lattice_coll_reply_next(v, x->vlen, &off, &m) == 1 && m.type == '$';
        rdb_elem el = {m.ptr, m.len, 0};
        if (ok && h.type == '&') { /* the member's score: "%.17g", inf, -inf */
            char t[64];
            ok = lattice_coll_reply_next(v, x->vlen, &off, &sc) == 1 && sc.type == ',' && sc.len < sizeof t;
            if (ok) {
                memcpy(t, sc.ptr, sc.len);
                t[sc.len] = 0;
                el.score = strtod(t, NULL);
            }
        }
        if (ok) rv.v[rv.n++] = el;
    }
    char *p = NULL;
    size_t pn;
    lattice_status st = ok ? rdb_dump_value(&rv, &p, &pn) : LATTICE_ERR_PROTO;
    lt_free(rv.v);
    if (st == LATTICE_OK) lattice_resp_add_bulk(o, p, pn);
    else add_err(o, st == LATTICE_ERR_NOMEM ? ERR_OOM : "ERR DUMP: the value came back malformed");
    lt_free(p);
}

/* A collection's RESTORE: its steps' results (in MULTI each its own op's,
 * else the transaction's): the guard's EXISTS is BUSYKEY, any other
 * failure its error, else OK. */
static void reply_restore_coll(lattice_resp_out *o, const batch *b, const ent *e)
{
    const opres *x = &b->res[e->first];
    lattice_txn_sub_result sr[3];
    size_t n = 0;
    if (e->n > 1) { /* in MULTI */
        for (size_t i = 0; i < e->n && n < 3; i++, n++) {
            const opres *y = &b->res[e->first + i];
            sr[n] = (lattice_txn_sub_result){y->status, y->flags, y->num, NULL, 0};
        }
    } else if (x->status != LATTICE_OK) {
        respd_add_result_error(o, x);
        return;
    } else if (x->flags & LATTICE_OP_R_LOST) {
        add_err(o, "ERR the RESTORE was applied; its reply was lost in a failover");
        return;
    } else {
        lattice_txn_buf rb;
        long k = lattice_txn_result_begin(&rb, b->vals + x->voff, x->vlen);
        for (long i = 0; i < k && n < 3 && lattice_txn_result_next(&rb, &sr[n]); i++) n++;
    }
    for (size_t i = 0; i < n; i++) {
        if (sr[i].status == LATTICE_OK || (i == 0 && sr[i].status == LATTICE_ERR_NOT_FOUND)) continue; /* REPLACE of no key */
        if (i == 0 && sr[i].status == LATTICE_ERR_EXISTS) {
            add_err(o, ERR_BUSYKEY);
        } else {
            opres y = {0};
            y.status = sr[i].status;
            y.flags = sr[i].flags;
            respd_add_result_error(o, &y);
        }
        return;
    }
    lattice_resp_add_simple(o, "OK", 2);
}

/* RESTORE's answer once its op came back: the PUT (NX: EXISTS is BUSYKEY),
 * the REMOVE of REPLACE with an expired TTL (OK either way), or the CONTAINS
 * of the other cases (a key there is BUSYKEY, else OK or the kept error). */
static void reply_restore(lattice_resp_out *o, const batch *b, const ent *e, const opres *x)
{
    unsigned code = e->sflags & RS_CODE_MASK;
    if (code == RS_COLL) {
        reply_restore_coll(o, b, e);
        return;
    }
    if (code == RS_PUT && x->status == LATTICE_ERR_EXISTS) {
        add_err(o, ERR_BUSYKEY);
    } else if (x->status != LATTICE_OK && x->status != LATTICE_ERR_NOT_FOUND) {
        respd_add_result_error(o, x);
    } else if (code == RS_PUT || (e->sflags & RS_REPLACE)) {
        lattice_resp_add_simple(o, "OK", 2);
    } else if (x->num > 0) {
        add_err(o, ERR_BUSYKEY);
    } else if (code == RS_EXPIRED) {
        lattice_resp_add_simple(o, "OK", 2);
    } else {
        char err[LATTICE_RESP_ERR_MAX];
        restore_error(e->sflags, err);
        add_err(o, err);
    }
}

void respd_rmw_reply(lattice_resp_out *o, const batch *b, const ent *e)
{
    const opres *x = &b->res[e->first];
    lattice_resp_cmd_id id = (lattice_resp_cmd_id)e->cmd;
    if (id == LATTICE_RESP_CMD_RESTORE) {
        reply_restore(o, b, e, x);
        return;
    }
    if (id == LATTICE_RESP_CMD_INCRBYFLOAT && x->status == LATTICE_ERR_INVAL) {
        add_err(o, x->num ? ERR_NAN : ERR_FLOAT);
        return;
    }
    if (id == LATTICE_RESP_CMD_OBJECT_ENCODING || id == LATTICE_RESP_CMD_MEMORY_USAGE) {
        if (x->status != LATTICE_OK) respd_add_result_error(o, x);
        else if (x->has_value) respd_coll_add_reply(o, b->vals + x->voff, x->vlen);
        else lattice_resp_add_null(o);
        return;
    }
    if (x->status == LATTICE_ERR_WRONGTYPE && id == LATTICE_RESP_CMD_OBJECT_REFCOUNT) {
        lattice_resp_add_int(o, 1); /* a value of another type than a string */
        return;
    }
    if (x->status != LATTICE_OK && x->status != LATTICE_ERR_NOT_FOUND && !(id == LATTICE_RESP_CMD_DUMP && x->status == LATTICE_ERR_WRONGTYPE)) {
        respd_add_result_error(o, x);
        return;
    }
    bool found = x->status == LATTICE_OK;
    switch (id) {
    case LATTICE_RESP_CMD_SETRANGE:
    case LATTICE_RESP_CMD_SETBIT: lattice_resp_add_int(o, x->num); break;
    case LATTICE_RESP_CMD_INCRBYFLOAT:
        /* No value came back: a full_async cache reports no outcome, and a
         * resend the primary answers from its de-duplication record (after
         * a failover) finds its text in the entry only while no later
         * write replaced it - the increment counted once either way. */
        if (x->has_value) respd_add_value(o, b, x);
        else add_err(o, ERR_NO_RESULT);
        break;
    case LATTICE_RESP_CMD_DUMP: reply_dump(o, b, x); break;
    case LATTICE_RESP_CMD_OBJECT_FREQ:
        if (x->num <= 0) lattice_resp_add_null(o);
        else add_err(o, ERR_NO_LFU);
        break;
    default: /* OBJECT REFCOUNT */
        if (!found) lattice_resp_add_null(o);
        else reply_refcount(o, x->has_value ? b->vals + x->voff : "", x->has_value ? x->vlen : 0);
        break;
    }
}

void respd_object_help(lattice_resp_out *o)
{
    static const char *const lines[] = {
        "OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "ENCODING <key>",
        "    Return the kind of internal representation used in order to store the value",
        "    associated with a <key>.",
        "FREQ <key>",
        "    Return the access frequency index of the <key>. The returned integer is",
        "    proportional to the logarithm of the recent access frequency of the key.",
        "IDLETIME <key>",
        "    Return the idle time of the <key>, that is the approximated number of",
        "    seconds elapsed since the last access to the key.",
        "REFCOUNT <key>",
        "    Return the number of references of the value associated with the specified",
        "    <key>.",
        "HELP",
        "    Prints this help.",
    };
    size_t n = sizeof lines / sizeof lines[0];
    lattice_resp_add_array(o, n);
    for (size_t i = 0; i < n; i++) lattice_resp_add_simple(o, lines[i], strlen(lines[i]));
}
