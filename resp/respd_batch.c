/*
 * respd batches: a batch's storage (entries, ops, the arena their keys and
 * values are copied to), the first set of key commands made into its ops
 * (GET ... PERSIST, DBSIZE; the later ones are respd_str.c's, respd_rmw.c's,
 * respd_tx.c's and respd_walk.c's), the data thread's callbacks that store
 * each result, and every entry's reply, encoded on the IO thread when the
 * batch returns; then the batch emptied for reuse, or freed.  Who owns a
 * batch when: respd_int.h.
 */
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "lattice/alloc.h"
#include "lattice/clock.h"
#include "respd_int.h"

#define SET_F_EXPIRED 0x100       /* SET whose expiry already passed: a remove */

/* ---- batch storage ---- */

static bool grow(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap) return true;
    size_t nc = *cap ? *cap * 2 : 16;
    while (nc < need) nc *= 2;
    void *q = lt_realloc(*p, nc * elem);
    if (!q) return false;
    *p = q;
    *cap = nc;
    return true;
}

/* Copies bytes into the arena; returns offset + 1 (0 = out of memory).  The
 * ops keep these offsets in their pointer fields until submit resolves them
 * (the arena may move while it grows). */
static uintptr_t arena_put(batch *b, const void *p, size_t n)
{
    if (!b->arena_cap && n < 4096) { /* a typical pipeline's keys and values fit at once */
        b->arena = lt_malloc(4096);
        if (!b->arena) return 0;
        b->arena_cap = 4096;
    }
    if (!grow((void **)&b->arena, &b->arena_cap, b->arena_len + n + 1, 1)) return 0;
    uintptr_t off = b->arena_len;
    if (n) memcpy(b->arena + off, p, n);
    b->arena_len += n;
    return off + 1;
}

ent *respd_ent_new(batch *b, lattice_resp_cmd_id cmd)
{
    if (!grow((void **)&b->ents, &b->cap_ents, b->n_ents + 1, sizeof *b->ents)) return NULL;
    ent *e = &b->ents[b->n_ents++];
    memset(e, 0, sizeof *e);
    e->cmd = (uint16_t)cmd;
    e->first = (uint32_t)b->n_ops;
    return e;
}

bool respd_op_add(batch *b, ent *e, lattice_op_kind kind, unsigned flags, const lattice_resp_arg *key,
                  const lattice_resp_arg *val, int64_t delta, uint64_t ttl)
{
    if (!grow((void **)&b->ops, &b->cap_ops, b->n_ops + 1, sizeof *b->ops)) return false;
    if (!grow((void **)&b->res, &b->cap_res, b->n_ops + 1, sizeof *b->res)) return false;
    lattice_op *o = &b->ops[b->n_ops];
    memset(o, 0, sizeof *o);
    memset(&b->res[b->n_ops], 0, sizeof b->res[0]);
    b->res[b->n_ops].ent = (uint32_t)(e - b->ents);
    o->kind = kind;
    o->flags = flags;
    o->delta = delta;
    o->ttl_ms = ttl;
    if (key) {
        uintptr_t k = arena_put(b, key->ptr, key->len);
        if (!k) return false;
        o->key = (const void *)k;
        o->key_len = key->len;
    }
    if (val) {
        uintptr_t v = arena_put(b, val->ptr, val->len);
        if (!v) return false;
        o->value = (const void *)v;
        o->value_len = val->len;
    }
    b->n_ops++;
    e->n++;
    return true;
}

ent *respd_ent_bytes(batch *b, lattice_resp_cmd_id cmd, const void *p, size_t n)
{
    ent *e = respd_ent_new(b, cmd);
    uintptr_t off = e ? arena_put(b, p, n) : 0;
    if (!off) return NULL;
    e->first = (uint32_t)(off - 1);
    e->n = (uint32_t)n;
    return e;
}

cmd_outcome respd_ent_error(batch *b, const char *msg)
{
    if (!respd_ent_bytes(b, ENT_ERROR, msg, strlen(msg)))
        return b->n_ents ? CMD_BATCHED : CMD_DONE; /* out of memory: the batch fails as a whole */
    return CMD_BATCHED;
}

/* ---- key commands -> ops ---- */

cmd_outcome respd_key_command(lattice_respd *r, batch *b, lattice_resp_cmd_id id, size_t argc,
                              const lattice_resp_arg *argv)
{
    (void)r;
    if (respd_is_str_command(id)) return respd_str_command(b, id, argc, argv);
    if (id == LATTICE_RESP_CMD_OBJECT_IDLETIME) return respd_tx_idle_command(b, argv, false);
    if (respd_is_rmw_command(id)) return respd_rmw_command(b, id, argc, argv);
    if (respd_is_coll_command(id)) return respd_coll_command(b, id, argc, argv);
    if (respd_is_tx_key_command(id)) return respd_tx_key_command(b, id, argc, argv, false);
    char err[LATTICE_RESP_ERR_MAX];
    ent *e = respd_ent_new(b, id);
    if (!e) return CMD_DONE;
    bool ok = true;
    switch (id) {
    case LATTICE_RESP_CMD_GET:
    case LATTICE_RESP_CMD_STRLEN:
        ok = respd_op_add(b, e, LATTICE_OP_GET, 0, &argv[1], NULL, 0, 0);
        break;
    case LATTICE_RESP_CMD_SET: {
        lattice_resp_set_opts so;
        int64_t now = (int64_t)lt_wall_ms();
        if (lattice_resp_parse_set(argc, argv, now, &so, err) != LATTICE_OK) {
            b->n_ents--;
            return respd_ent_error(b, err);
        }
        unsigned f = 0;
        if (so.flags & LATTICE_RESP_SET_NX) f |= LATTICE_OP_NX;
        if (so.flags & LATTICE_RESP_SET_XX) f |= LATTICE_OP_XX;
        if (so.flags & LATTICE_RESP_SET_GET) f |= LATTICE_OP_RETURN_OLD;
        if (so.flags & LATTICE_RESP_SET_KEEPTTL) f |= LATTICE_OP_KEEP_TTL;
        e->sflags = (uint16_t)so.flags;
        if (so.expire_at_ms && so.expire_at_ms <= now) {
            /* Already expired: Redis stores and expires it at once. */
            e->sflags |= SET_F_EXPIRED;
            ok = respd_op_add(b, e, LATTICE_OP_REMOVE, f & LATTICE_OP_RETURN_OLD, &argv[1], NULL, 0, 0);
        } else {
            uint64_t ttl = so.expire_at_ms ? (uint64_t)(so.expire_at_ms - now) : 0;
            ok = respd_op_add(b, e, LATTICE_OP_PUT, f, &argv[1], &argv[2], 0, ttl);
        }
        break;
    }
    case LATTICE_RESP_CMD_DEL:
    case LATTICE_RESP_CMD_EXISTS:
    case LATTICE_RESP_CMD_MGET:
        for (size_t i = 1; ok && i < argc; i++)
            ok = respd_op_add(b, e,
                        id == LATTICE_RESP_CMD_DEL      ? LATTICE_OP_REMOVE
                        : id == LATTICE_RESP_CMD_EXISTS ? LATTICE_OP_CONTAINS
                                                        : LATTICE_OP_GET,
                        0, &argv[i], NULL, 0, 0);
        break;
    case LATTICE_RESP_CMD_MSET:
        for (size_t i = 1; ok && i + 1 < argc; i += 2) ok = respd_op_add(b, e, LATTICE_OP_PUT, 0, &argv[i], &argv[i + 1], 0, 0);
        break;
    case LATTICE_RESP_CMD_INCR:
    case LATTICE_RESP_CMD_DECR:
    case LATTICE_RESP_CMD_INCRBY:
    case LATTICE_RESP_CMD_DECRBY: {
        long long d = 1;
        if ((id == LATTICE_RESP_CMD_INCRBY || id == LATTICE_RESP_CMD_DECRBY) &&
            !lattice_resp_string2ll(argv[2].ptr, argv[2].len, &d)) {
            b->n_ents--;
            return respd_ent_error(b, LATTICE_RESP_ERR_NOT_INTEGER);
        }
        if (id == LATTICE_RESP_CMD_DECRBY && d == LLONG_MIN) {
            b->n_ents--;
            return respd_ent_error(b, "ERR decrement would overflow");
        }
        if (id == LATTICE_RESP_CMD_DECR || id == LATTICE_RESP_CMD_DECRBY) d = -d;
        ok = respd_op_add(b, e, LATTICE_OP_INCREMENT, 0, &argv[1], NULL, d, 0);
        break;
    }
    case LATTICE_RESP_CMD_APPEND:
        ok = respd_op_add(b, e, LATTICE_OP_APPEND, 0, &argv[1], &argv[2], 0, 0);
        break;
    case LATTICE_RESP_CMD_GETDEL:
        ok = respd_op_add(b, e, LATTICE_OP_REMOVE, LATTICE_OP_RETURN_OLD, &argv[1], NULL, 0, 0);
        break;
    case LATTICE_RESP_CMD_EXPIRE:
    case LATTICE_RESP_CMD_PEXPIRE: {
        lattice_resp_expire_opts xo;
        int64_t now = (int64_t)lt_wall_ms();
        if (lattice_resp_parse_expire(argc, argv, id == LATTICE_RESP_CMD_EXPIRE ? 1000 : 1, now, &xo, err) !=
            LATTICE_OK) {
            b->n_ents--;
            return respd_ent_error(b, err);
        }
        e->sflags = (uint16_t)xo.flags;
        e->when_ms = xo.when_ms;
        if (xo.flags) { /* NX/XX/GT/LT: read the TTL first; respd_op_done goes on */
            ok = respd_op_add(b, e, LATTICE_OP_TTL, 0, &argv[1], NULL, 0, 0);
            if (ok) b->res[e->first].cond_expire = true;
        }
        else if (xo.when_ms <= now)
            ok = respd_op_add(b, e, LATTICE_OP_REMOVE, 0, &argv[1], NULL, 0, 0);
        else
            ok = respd_op_add(b, e, LATTICE_OP_EXPIRE, 0, &argv[1], NULL, 0, (uint64_t)(xo.when_ms - now));
        break;
    }
    case LATTICE_RESP_CMD_TTL:
    case LATTICE_RESP_CMD_PTTL:
        ok = respd_op_add(b, e, LATTICE_OP_TTL, 0, &argv[1], NULL, 0, 0);
        break;
    case LATTICE_RESP_CMD_PERSIST:
        /* Both go to the key's primary in one message, in this order. */
        ok = respd_op_add(b, e, LATTICE_OP_TTL, 0, &argv[1], NULL, 0, 0) &&
             respd_op_add(b, e, LATTICE_OP_EXPIRE, 0, &argv[1], NULL, 0, 0);
        break;
    case LATTICE_RESP_CMD_DBSIZE:
        /* As Redis Cluster: the keys this node holds (as primary); the grid
         * total is `lattice caches` and INFO keyspace. */
        ok = respd_op_add(b, e, LATTICE_OP_SIZE, LATTICE_OP_LOCAL, NULL, NULL, 0, 0);
        break;
    default:
        ok = false;
    }
    if (!ok) {
        b->n_ops = e->first;
        b->n_ents--;
        return respd_ent_error(b, "OOM command not allowed when used memory > 'maxmemory'.");
    }
    return CMD_BATCHED;
}

bool respd_is_key_command(lattice_resp_cmd_id id)
{
    return (id >= LATTICE_RESP_CMD_GET && id <= LATTICE_RESP_CMD_PERSIST) || id == LATTICE_RESP_CMD_DBSIZE ||
           respd_is_str_command(id) || respd_is_rmw_command(id) || respd_is_walk_command(id) ||
           respd_is_tx_key_command(id) || respd_is_coll_command(id);
}

/* ---- data thread ---- */

static void store_result(batch *b, size_t i, const lattice_op_result *res)
{
    opres *x = &b->res[i];
    x->status = res->status;
    x->flags = res->flags;
    x->num = res->num;
    x->has_value = false;
    if (res->value_len || (res->status == LATTICE_OK && res->value)) {
        if (grow((void **)&b->vals, &b->vals_cap, b->vals_len + res->value_len + 1, 1)) {
            if (res->value_len) memcpy(b->vals + b->vals_len, res->value, res->value_len);
            x->voff = b->vals_len;
            x->vlen = res->value_len;
            x->has_value = true;
            b->vals_len += res->value_len;
        } else {
            x->status = LATTICE_ERR_NOMEM;
        }
    }
}

void respd_batch_release(batch *b)
{
    if (atomic_fetch_sub(&b->remaining, 1) == 1) respd_batch_return(b);
}

static void phase2_done(void *arg, size_t i, const lattice_op_result *res)
{
    (void)i;
    batch *b = *(batch **)arg;
    size_t idx = ((size_t *)arg)[1];
    store_result(b, idx, res);
    lt_free(arg);
    respd_batch_release(b);
}

/* Conditional EXPIRE: the TTL came back; decide and maybe expire. */
static void expire_phase2(batch *b, size_t i, const lattice_op_result *res)
{
    opres *x = &b->res[i];
    const ent *e = &b->ents[x->ent];
    if (res->status != LATTICE_OK) {
        store_result(b, i, res);
        return;
    }
    int64_t now = (int64_t)lt_wall_ms();
    bool has = res->num >= 0;
    int64_t cur = has ? now + res->num : 0;
    /* Every given condition must hold: XX LT on a key without a TTL is 0. */
    bool go = true;
    if (e->sflags & LATTICE_RESP_EXPIRE_NX) go &= !has;
    if (e->sflags & LATTICE_RESP_EXPIRE_XX) go &= has;
    if (e->sflags & LATTICE_RESP_EXPIRE_GT) go &= has && e->when_ms > cur;
    if (e->sflags & LATTICE_RESP_EXPIRE_LT) go &= !has || e->when_ms < cur;
    x->status = LATTICE_ERR_NOT_FOUND; /* "not set": reply 0 */
    if (!go) return;
    size_t *ctx = lt_malloc(2 * sizeof(size_t));
    if (!ctx) {
        x->status = LATTICE_ERR_NOMEM;
        return;
    }
    ((batch **)ctx)[0] = b;
    ctx[1] = i;
    lattice_op op = b->ops[i];
    op.kind = e->when_ms <= now ? LATTICE_OP_REMOVE : LATTICE_OP_EXPIRE;
    op.ttl_ms = e->when_ms <= now ? 0 : (uint64_t)(e->when_ms - now);
    atomic_fetch_add(&b->remaining, 1);
    if (lattice_op_submit(b->r->node, &op, 1, phase2_done, ctx) != LATTICE_OK) {
        lt_free(ctx);
        x->status = LATTICE_ERR_STOPPED;
        atomic_fetch_sub(&b->remaining, 1);
    }
}

void respd_op_done(void *arg, size_t i, const lattice_op_result *res)
{
    batch *b = arg;
    if (res) {
        if (b->res[i].cond_expire) expire_phase2(b, i, res);
        else if (b->res[i].walk) respd_walk_first(b, i, res);
        else store_result(b, i, res);
    }
    respd_batch_release(b);
}

/* ---- replies of a returned batch (IO thread) ---- */

void respd_add_status_error(lattice_resp_out *o, lattice_status st)
{
    char m[160];
    switch (st) {
    case LATTICE_ERR_INVAL: snprintf(m, sizeof m, "%s", LATTICE_RESP_ERR_NOT_INTEGER); break;
    case LATTICE_ERR_TOO_LARGE: snprintf(m, sizeof m, "ERR string exceeds maximum allowed size (proto-max-bulk-len)"); break;
    case LATTICE_ERR_REGION_FULL: snprintf(m, sizeof m, "OOM command not allowed when used memory > 'maxmemory'."); break;
    case LATTICE_ERR_NOMEM: snprintf(m, sizeof m, "OOM command not allowed when used memory > 'maxmemory'."); break;
    case LATTICE_ERR_PARTITION_LOST: snprintf(m, sizeof m, "CLUSTERDOWN Hash slot not served"); break;
    case LATTICE_ERR_NO_QUORUM: snprintf(m, sizeof m, "CLUSTERDOWN no quorum"); break;
    case LATTICE_ERR_DISK_FULL:
        snprintf(m, sizeof m, "ERR disk full: the node's data directory (--data-dir) cannot take the write; writes are refused, reads served");
        break;
    case LATTICE_ERR_NO_CACHE: snprintf(m, sizeof m, "ERR no such cache"); break;
    case LATTICE_ERR_RESTARTING:
        snprintf(m, sizeof m, "TRYAGAIN restarting: the grid waits for every baseline server's data directory (--restart-wait-ms)");
        break;
    case LATTICE_ERR_TIMEOUT: snprintf(m, sizeof m, "TRYAGAIN the grid did not answer in time"); break;
    case LATTICE_ERR_WRONGTYPE: snprintf(m, sizeof m, "%s", LATTICE_RESP_ERR_WRONGTYPE); break;
    default: snprintf(m, sizeof m, "ERR %s", lattice_strerror(st)); break;
    }
    lattice_resp_add_error(o, m, strlen(m));
}

/* An op's failure: as respd_add_status_error, with what only the result
 * carries (NO_QUORUM: how many baseline nodes the grid side reaches). */
void respd_add_result_error(lattice_resp_out *o, const opres *x)
{
    char m[256];
    if (x->status == LATTICE_ERR_PARTITION_LOST) {
        /* Which partition, so an operator can find it (`lattice partitions`)
         * and decide (`lattice cache reset-lost`); Redis's prefix first. */
        snprintf(m, sizeof m, "CLUSTERDOWN Hash slot not served: partition %lld is LOST (no live copy)",
                 (long long)x->num);
        lattice_resp_add_error(o, m, strlen(m));
        return;
    }
    if (x->status != LATTICE_ERR_NO_QUORUM) {
        respd_add_status_error(o, x->status);
        return;
    }
    snprintf(m, sizeof m, "CLUSTERDOWN no quorum: %zu of %zu baseline nodes reachable",
             LATTICE_OPS_QUORUM_REACHABLE(x->num), LATTICE_OPS_QUORUM_BASELINE(x->num));
    lattice_resp_add_error(o, m, strlen(m));
}

void respd_add_value(lattice_resp_out *o, const batch *b, const opres *x)
{
    lattice_resp_add_bulk(o, b->vals + x->voff, x->vlen);
}

/* First failure among ops [first, first+n) other than the expected misses
 * (MGET: a key of another type is one too - nil, as Redis's). */
static const opres *first_error(const batch *b, const ent *e)
{
    for (uint32_t k = 0; k < e->n; k++) {
        const opres *x = &b->res[e->first + k];
        if (x->status == LATTICE_ERR_WRONGTYPE && e->cmd == LATTICE_RESP_CMD_MGET) continue;
        if (x->status != LATTICE_OK && x->status != LATTICE_ERR_NOT_FOUND) return x;
    }
    return NULL;
}

static void set_reply(lattice_resp_out *o, const batch *b, const ent *e, const opres *x)
{
    bool get = e->sflags & LATTICE_RESP_SET_GET;
    bool done = x->status == LATTICE_OK || ((e->sflags & SET_F_EXPIRED) && x->status == LATTICE_ERR_NOT_FOUND);
    if (!done && x->status != LATTICE_ERR_EXISTS && x->status != LATTICE_ERR_NOT_FOUND) {
        respd_add_result_error(o, x);
    } else if (get) {
        if ((x->flags & LATTICE_OP_R_FOUND) && x->has_value) respd_add_value(o, b, x);
        else lattice_resp_add_null(o);
    } else if (done) {
        lattice_resp_add_simple(o, "OK", 2);
    } else {
        lattice_resp_add_null(o); /* NX/XX condition not met */
    }
}

void respd_entry_reply(lattice_resp_out *o, const batch *b, const ent *e, bool in_exec)
{
    if (e->cmd == ENT_ERROR) {
        lattice_resp_add_error(o, b->arena + e->first, e->n);
        return;
    }
    if (e->across) {
        respd_tx_across_reply(o, b, e);
        return;
    }
    bool stored = (e->cmd == LATTICE_RESP_CMD_GEORADIUS || e->cmd == LATTICE_RESP_CMD_GEORADIUSBYMEMBER) && e->n &&
                  b->ops[e->first].kind != LATTICE_OP_COLL_READ; /* with STORE: a step of two keys */
    if (respd_is_tx_command((lattice_resp_cmd_id)e->cmd) || e->cmd == LATTICE_RESP_CMD_OBJECT_IDLETIME || stored) {
        respd_tx_entry_reply(o, b, e, in_exec);
        return;
    }
    if (respd_is_str_command((lattice_resp_cmd_id)e->cmd)) {
        respd_str_reply(o, b, e);
        return;
    }
    if (respd_is_rmw_command((lattice_resp_cmd_id)e->cmd)) {
        respd_rmw_reply(o, b, e);
        return;
    }
    if (respd_is_coll_command((lattice_resp_cmd_id)e->cmd)) {
        respd_coll_reply(o, b, e);
        return;
    }
    if (e->cmd == LATTICE_RESP_CMD_CLIENT_LIST || e->cmd == LATTICE_RESP_CMD_CLIENT_KILL) {
        respd_intro_reply(o, b, e);
        return;
    }
    if (respd_is_walk_command((lattice_resp_cmd_id)e->cmd)) {
        respd_walk_reply(o, b, e);
        return;
    }
    const opres *x = &b->res[e->first];
    const opres *bad = first_error(b, e);
    if (bad && e->cmd != LATTICE_RESP_CMD_SET) {
        respd_add_result_error(o, bad);
        return;
    }
    bool ok = x->status == LATTICE_OK;
    long long cnt = 0;
    switch (e->cmd) {
    case LATTICE_RESP_CMD_GET:
        if (ok && x->has_value) respd_add_value(o, b, x);
        else lattice_resp_add_null(o);
        break;
    case LATTICE_RESP_CMD_GETDEL:
        if (ok && x->has_value && (x->flags & LATTICE_OP_R_FOUND)) respd_add_value(o, b, x);
        else lattice_resp_add_null(o);
        break;
    case LATTICE_RESP_CMD_STRLEN: lattice_resp_add_int(o, ok ? (long long)x->vlen : 0); break;
    case LATTICE_RESP_CMD_SET: set_reply(o, b, e, x); break;
    case LATTICE_RESP_CMD_DEL:
    case LATTICE_RESP_CMD_EXISTS:
        for (uint32_t k = 0; k < e->n; k++) {
            const opres *y = &b->res[e->first + k];
            cnt += e->cmd == LATTICE_RESP_CMD_DEL ? y->status == LATTICE_OK : y->num > 0;
        }
        lattice_resp_add_int(o, cnt);
        break;
    case LATTICE_RESP_CMD_MGET:
        lattice_resp_add_array(o, e->n);
        for (uint32_t k = 0; k < e->n; k++) {
            const opres *y = &b->res[e->first + k];
            if (y->status == LATTICE_OK && y->has_value) respd_add_value(o, b, y);
            else lattice_resp_add_null(o);
        }
        break;
    case LATTICE_RESP_CMD_MSET: lattice_resp_add_simple(o, "OK", 2); break;
    case LATTICE_RESP_CMD_INCR:
    case LATTICE_RESP_CMD_DECR:
    case LATTICE_RESP_CMD_INCRBY:
    case LATTICE_RESP_CMD_DECRBY:
    case LATTICE_RESP_CMD_APPEND:
    case LATTICE_RESP_CMD_DBSIZE: lattice_resp_add_int(o, x->num); break;
    case LATTICE_RESP_CMD_EXPIRE:
    case LATTICE_RESP_CMD_PEXPIRE: lattice_resp_add_int(o, ok); break;
    case LATTICE_RESP_CMD_TTL:
        lattice_resp_add_int(o, !ok ? -2 : x->num < 0 ? -1 : (x->num + 500) / 1000);
        break;
    case LATTICE_RESP_CMD_PTTL: lattice_resp_add_int(o, !ok ? -2 : x->num < 0 ? -1 : x->num); break;
    case LATTICE_RESP_CMD_PERSIST:
        lattice_resp_add_int(o, ok && x->num >= 0 && b->res[e->first + 1].status == LATTICE_OK);
        break;
    default: lattice_resp_add_error(o, "ERR internal", 12); break;
    }
}

uint64_t respd_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

void respd_batch_replies(lattice_respd *r, conn *c, batch *b)
{
    uint64_t took = respd_now_us() - b->start_us;
    for (size_t i = 0; i < b->n_ents; i++) {
        lattice_resp_out_set_muted(c->out, b->ents[i].mute);
        uint16_t cmd = b->ents[i].cmd;
        if (cmd == LATTICE_RESP_CMD_WATCH || cmd == LATTICE_RESP_CMD_EXEC) respd_tx_reply(c, b, &b->ents[i]);
        else respd_entry_reply(c->out, b, &b->ents[i], false);
        lattice_resp_out_set_muted(c->out, 0);
        uint16_t id = b->ents[i].cmd;
        if (id != ENT_ERROR && id < LATTICE_RESP_CMD_ID_COUNT_) atomic_fetch_add(&r->cmd_usec[id], took);
        if (b->ents[i].slow) respd_slowlog_add_kept(r, c, b, &b->ents[i], took);
    }
}

/* What the entries and CLIENT LIST/KILL hold (not the arrays). */
static void batch_drop_refs(batch *b)
{
    for (size_t i = 0; i < b->n_ents; i++) {
        respd_walk_free(b->ents[i].walk);
        respd_batch_free(b->ents[i].sub);
    }
    respd_intro_free(b->xreq);
}

/* A reused batch keeps its arrays, and the SLOWLOG argv buffer with them:
 * every key command packs its argv there (its time is known only at the
 * reply), and growing it again per batch was a realloc per SET (2% of a
 * node under SET -P 16). */
bool respd_batch_reset(batch *b)
{
    if (b->cap_ents > BATCH_KEEP_ENTS || b->cap_ops > BATCH_KEEP_ENTS || b->cap_res > BATCH_KEEP_ENTS ||
        b->arena_cap > BATCH_KEEP_BYTES || b->vals_cap > BATCH_KEEP_BYTES || b->slow_cap > BATCH_KEEP_BYTES)
        return false;
    batch_drop_refs(b);
    batch keep = *b;
    memset(b, 0, sizeof *b);
    b->ents = keep.ents, b->cap_ents = keep.cap_ents;
    b->ops = keep.ops, b->cap_ops = keep.cap_ops;
    b->res = keep.res, b->cap_res = keep.cap_res;
    b->arena = keep.arena, b->arena_cap = keep.arena_cap;
    b->vals = keep.vals, b->vals_cap = keep.vals_cap;
    b->slow = keep.slow, b->slow_cap = keep.slow_cap;
    return true;
}

void respd_batch_free(batch *b)
{
    if (!b) return;
    batch_drop_refs(b);
    lt_free(b->slow);
    lt_free(b->ents);
    lt_free(b->ops);
    lt_free(b->res);
    lt_free(b->arena);
    lt_free(b->vals);
    lt_free(b);
}
