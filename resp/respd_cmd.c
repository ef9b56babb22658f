/*
 * respd commands: key commands become lattice_op's of a batch (their
 * replies are encoded when the batch returns), the others are answered at
 * once.  Semantics and error texts are Redis 7's; docs/RESP.md lists how
 * each command maps onto the ops API.
 */
#include <fnmatch.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "lattice/alloc.h"
#include "lattice/clock.h"
#include "respd_int.h"

#define ENT_ERROR 0               /* ent.cmd of an error reply kept in order (arena bytes) */
#define SET_F_EXPIRED 0x100       /* SET whose expiry already passed: a remove */
#define REDIS_VERSION "7.0.0"

static bool eq(const lattice_resp_arg *a, const char *s)
{
    size_t n = strlen(s);
    return a->len == n && strncasecmp(a->ptr, s, n) == 0;
}

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
           respd_is_tx_key_command(id);
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

/* First failure among ops [first, first+n) other than the expected misses. */
static const opres *first_error(const batch *b, const ent *e)
{
    for (uint32_t k = 0; k < e->n; k++) {
        const opres *x = &b->res[e->first + k];
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
    if (respd_is_tx_command((lattice_resp_cmd_id)e->cmd) || e->cmd == LATTICE_RESP_CMD_OBJECT_IDLETIME) {
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

/* ---- commands answered at once ---- */

static bool password_ok(const lattice_respd *r, const lattice_resp_arg *user, const lattice_resp_arg *pass)
{
    if (user && !eq(user, "default")) return false;
    if (!r->need_auth) return true; /* the default user is "nopass" */
    size_t n = strlen(r->password);
    return pass->len == n && memcmp(pass->ptr, r->password, n) == 0;
}

static void set_authed(lattice_respd *r, conn *c, bool authed)
{
    c->authed = authed || !r->need_auth;
    lattice_resp_parser_set_auth_required(c->parser, !c->authed);
}

static void cmd_auth(lattice_respd *r, conn *c, size_t argc, const lattice_resp_arg *argv)
{
    lattice_resp_out *o = c->out;
    if (argc > 3) {
        lattice_resp_add_error(o, LATTICE_RESP_ERR_SYNTAX, strlen(LATTICE_RESP_ERR_SYNTAX));
        return;
    }
    if (argc == 2 && !r->need_auth) {
        lattice_resp_add_error(o, LATTICE_RESP_ERR_NOPASS, strlen(LATTICE_RESP_ERR_NOPASS));
        return;
    }
    if (!password_ok(r, argc == 3 ? &argv[1] : NULL, &argv[argc - 1])) {
        lattice_resp_add_error(o, LATTICE_RESP_ERR_WRONGPASS, strlen(LATTICE_RESP_ERR_WRONGPASS));
        return;
    }
    set_authed(r, c, true);
    lattice_resp_add_simple(o, "OK", 2);
}

static void cmd_hello(lattice_respd *r, conn *c, size_t argc, const lattice_resp_arg *argv)
{
    lattice_resp_out *o = c->out;
    char err[LATTICE_RESP_ERR_MAX];
    lattice_resp_hello_opts h;
    if (lattice_resp_parse_hello(argc, argv, &h, err) != LATTICE_OK) {
        lattice_resp_add_error(o, err, strlen(err));
        return;
    }
    if (h.username) {
        if (!password_ok(r, h.username, h.password)) {
            lattice_resp_add_error(o, LATTICE_RESP_ERR_WRONGPASS, strlen(LATTICE_RESP_ERR_WRONGPASS));
            return;
        }
        set_authed(r, c, true);
    }
    if (!c->authed) {
        lattice_resp_add_error(o, LATTICE_RESP_ERR_HELLO_NOAUTH, strlen(LATTICE_RESP_ERR_HELLO_NOAUTH));
        return;
    }
    if (h.client_name) snprintf(c->name, sizeof c->name, "%.*s", (int)h.client_name->len, h.client_name->ptr);
    if (h.proto) lattice_resp_out_set_proto(o, h.proto);
    lattice_resp_add_hello(o, REDIS_VERSION, c->id, 1);
}

static void add_lines(lattice_resp_out *o, const char *const *lines)
{
    size_t n = 0;
    while (lines[n]) n++;
    lattice_resp_add_array(o, n);
    for (size_t i = 0; i < n; i++) lattice_resp_add_simple(o, lines[i], strlen(lines[i]));
}

static void cmd_help(conn *c, const lattice_resp_arg *parent)
{
    static const char *const command_help[] = {
        "COMMAND <subcommand> [<arg> [value] [opt] ...]. Subcommands are:", "(no subcommand)",
        "    Return details about all Redis commands.", "COUNT", "    Return the total number of commands in this Redis server.",
        "INFO [<command-name> ...]", "    Return details about multiple Redis commands.", "DOCS [<command-name> ...]",
        "    Return documentation details about multiple Redis commands.", "LIST", "    Return a list of all commands.",
        "HELP", "    Print this help.", NULL};
    static const char *const client_help[] = {
        "CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:", "GETNAME", "    Return the name of the current connection.",
        "ID", "    Return the ID of the current connection.", "INFO", "    Return information about the current client connection.",
        "KILL <ip:port>", "    Kill connection made from <ip:port>.", "KILL <option> <value> [<option> <value> [...]]",
        "    Kill connections. Options are:", "    * ADDR (<ip:port>|<unixsocket>:0)",
        "      Kill connections made from the specified address", "    * LADDR (<ip:port>|<unixsocket>:0)",
        "      Kill connections made to specified local address", "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
        "      Kill connections by type.", "    * USER <username>", "      Kill connections authenticated by <username>.",
        "    * SKIPME (YES|NO)", "      Skip killing current connection (default: yes).", "LIST [options ...]",
        "    Return information about client connections. Options:", "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
        "      Return clients of specified type.",
        "NO-EVICT (ON|OFF)", "    Protect current client connection from eviction.",
        "REPLY (ON|OFF|SKIP)", "    Control the replies sent to the current connection.",
        "SETINFO <option> <value>", "    Set client meta attr. Options are LIB-NAME and LIB-VER.", "SETNAME <name>",
        "    Assign the name <name> to the current connection.", "HELP", "    Print this help.", NULL};
    static const char *const cluster_help[] = {
        "CLUSTER <subcommand> [<arg> [value] [opt] ...]. Subcommands are:", "INFO",
        "    Return information about the cluster.", "KEYSLOT <key>", "    Return the hash slot for <key>.", "MYID",
        "    Return the node id.", "NODES", "    Return cluster configuration seen by node.", "SHARDS",
        "    Return information about slot range mappings and the nodes associated with them.", "SLOTS",
        "    Return information about slots range mappings.", "HELP", "    Print this help.", NULL};
    if (eq(parent, "object")) {
        respd_object_help(c->out);
        return;
    }
    static const char *const slowlog_help[] = {
        "SLOWLOG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:", "GET [<count>]",
        "    Return top <count> entries from the slowlog (default: 10, -1 mean all).", "    Entries are made of:",
        "    id, timestamp, time in microseconds, arguments array, client IP and port,", "    client name", "LEN",
        "    Return the length of the slowlog.", "RESET", "    Reset the slowlog.", "HELP", "    Prints this help.", NULL};
    add_lines(c->out, eq(parent, "command") ? command_help
                      : eq(parent, "client") ? client_help
                      : eq(parent, "slowlog") ? slowlog_help
                                              : cluster_help);
}

/* COMMAND LIST [FILTERBY MODULE name | ACLCAT cat | PATTERN pat]: every
 * command and subcommand (Redis 7.0 lists both), filtered. */
static void command_list(lattice_resp_out *o, size_t argc, const lattice_resp_arg *argv)
{
    int kind = 0; /* 0 all, 1 module, 2 aclcat, 3 pattern */
    char what[130] = "";
    if (argc > 2) {
        if (argc != 5 || !eq(&argv[2], "filterby")) {
            lattice_resp_add_error(o, LATTICE_RESP_ERR_SYNTAX, strlen(LATTICE_RESP_ERR_SYNTAX));
            return;
        }
        kind = eq(&argv[3], "module") ? 1 : eq(&argv[3], "aclcat") ? 2 : eq(&argv[3], "pattern") ? 3 : -1;
        if (kind < 0) {
            lattice_resp_add_error(o, LATTICE_RESP_ERR_SYNTAX, strlen(LATTICE_RESP_ERR_SYNTAX));
            return;
        }
        snprintf(what, sizeof what, "%s%.*s", kind == 2 ? "@" : "", (int)(argv[4].len > 127 ? 127 : argv[4].len),
                 argv[4].ptr);
    }
    size_t n = 0, total = lattice_resp_cmd_count();
    bool *hit = lt_calloc(total ? total : 1, sizeof *hit);
    if (!hit) {
        respd_add_status_error(o, LATTICE_ERR_NOMEM);
        return;
    }
    for (size_t i = 0; i < total; i++) {
        const lattice_resp_cmd *rc = lattice_resp_cmd_at(i);
        const char *name = lattice_resp_cmd_name(rc), *acl = lattice_resp_cmd_acl(rc);
        bool in = kind == 0;
        if (kind == 2) { /* the category as a whole word of the command's list */
            size_t wl = strlen(what);
            for (const char *p = acl; !in && (p = strcasestr(p, what)); p += wl)
                in = (p == acl || p[-1] == ' ') && (p[wl] == ' ' || p[wl] == '\0');
        }
        if (kind == 3) in = fnmatch(what, name, FNM_CASEFOLD) == 0;
        hit[i] = in; /* kind 1: no modules, nothing */
        n += in;
    }
    lattice_resp_add_array(o, n);
    for (size_t i = 0; i < total; i++) {
        if (!hit[i]) continue;
        const char *name = lattice_resp_cmd_name(lattice_resp_cmd_at(i));
        lattice_resp_add_bulk(o, name, strlen(name));
    }
    lt_free(hit);
}

/* COMMAND GETKEYS command arg...: the key positions as Redis 7.0 finds them. */
static void command_getkeys(lattice_resp_out *o, size_t argc, const lattice_resp_arg *argv)
{
    const char *err = NULL;
    const lattice_resp_cmd *rc = lattice_resp_cmd_lookup(argv[2].ptr, argv[2].len);
    if (rc && (lattice_resp_cmd_flags(rc) & LATTICE_RESP_F_CONTAINER) && argc > 3)
        rc = lattice_resp_cmd_lookup_sub(rc, argv[3].ptr, argv[3].len);
    int first = 0, last, step, arity = rc ? lattice_resp_cmd_arity(rc) : 0;
    if (rc) lattice_resp_cmd_key_spec(rc, &first, &last, &step);
    size_t n = argc - 2;
    if (!rc) err = "ERR Invalid command specified";
    else if (first <= 0) err = "ERR The command has no key arguments";
    else if ((arity > 0 && (size_t)arity != n) || n < (size_t)(arity < 0 ? -arity : 0))
        err = "ERR Invalid number of arguments specified for command";
    size_t idx[256], k = 0;
    if (!err && !(k = lattice_resp_cmd_keys(rc, n, idx, 256))) err = "ERR Invalid arguments specified for command";
    if (err) {
        lattice_resp_add_error(o, err, strlen(err));
        return;
    }
    lattice_resp_add_array(o, k);
    for (size_t i = 0; i < k; i++) lattice_resp_add_bulk(o, argv[2 + idx[i]].ptr, argv[2 + idx[i]].len);
}

static void cmd_command(conn *c, lattice_resp_cmd_id id, size_t argc, const lattice_resp_arg *argv)
{
    lattice_resp_out *o = c->out;
    lattice_status st = LATTICE_OK;
    if (id == LATTICE_RESP_CMD_COMMAND) {
        st = lattice_resp_add_command_table(o);
    } else if (id == LATTICE_RESP_CMD_COMMAND_COUNT) {
        st = lattice_resp_add_int(o, (long long)lattice_resp_cmd_top_count());
    } else if (id == LATTICE_RESP_CMD_COMMAND_INFO) {
        if (argc == 2) return (void)lattice_resp_add_command_table(o);
        lattice_resp_add_array(o, argc - 2);
        for (size_t i = 2; i < argc && st == LATTICE_OK; i++)
            st = lattice_resp_add_command_info(o, lattice_resp_cmd_lookup(argv[i].ptr, argv[i].len));
    } else if (id == LATTICE_RESP_CMD_COMMAND_DOCS) {
        /* No documentation is served; clients fall back to their own. */
        st = lattice_resp_add_map(o, 0);
    } else if (id == LATTICE_RESP_CMD_COMMAND_GETKEYS) {
        command_getkeys(o, argc, argv);
    } else {
        command_list(o, argc, argv);
    }
    if (st != LATTICE_OK || lattice_resp_out_overflowed(o)) c->closing = true; /* a partial multi-element reply */
}

static void cmd_client(lattice_respd *r, conn *c, lattice_resp_cmd_id id, const lattice_resp_arg *argv)
{
    lattice_resp_out *o = c->out;
    (void)r;
    char line[1024];
    switch (id) {
    case LATTICE_RESP_CMD_CLIENT_SETNAME:
        if (!lattice_resp_client_name_ok(argv[2].ptr, argv[2].len) || argv[2].len >= sizeof c->name) {
            lattice_resp_add_error(o, LATTICE_RESP_ERR_CLIENT_NAME, strlen(LATTICE_RESP_ERR_CLIENT_NAME));
            return;
        }
        snprintf(c->name, sizeof c->name, "%.*s", (int)argv[2].len, argv[2].ptr);
        lattice_resp_add_simple(o, "OK", 2);
        return;
    case LATTICE_RESP_CMD_CLIENT_GETNAME:
        if (c->name[0]) lattice_resp_add_bulk(o, c->name, strlen(c->name));
        else lattice_resp_add_null(o);
        return;
    case LATTICE_RESP_CMD_CLIENT_SETINFO:
        if (!eq(&argv[2], "lib-name") && !eq(&argv[2], "lib-ver")) {
            snprintf(line, sizeof line, "ERR Unrecognized option '%.*s'", (int)(argv[2].len > 200 ? 200 : argv[2].len), argv[2].ptr);
            lattice_resp_add_error(o, line, strlen(line));
            return;
        }
        if (!lattice_resp_client_name_ok(argv[3].ptr, argv[3].len)) {
            snprintf(line, sizeof line, "ERR %.*s cannot contain spaces, newlines or special characters.", (int)argv[2].len, argv[2].ptr);
            lattice_resp_add_error(o, line, strlen(line));
            return;
        }
        lattice_resp_add_simple(o, "OK", 2);
        return;
    case LATTICE_RESP_CMD_CLIENT_ID: lattice_resp_add_int(o, c->id); return;
    case LATTICE_RESP_CMD_CLIENT_REPLY: /* Redis's CLIENT REPLY: ON answers, OFF and SKIP cannot */
        if (eq(&argv[2], "on")) {
            c->reply_off = c->reply_skip = false;
            lattice_resp_out_set_muted(o, 0);
            lattice_resp_add_simple(o, "OK", 2);
        } else if (eq(&argv[2], "off")) {
            c->reply_off = true;
        } else if (eq(&argv[2], "skip")) {
            if (!c->reply_off) c->reply_skip_next = true;
        } else {
            lattice_resp_add_error(o, LATTICE_RESP_ERR_SYNTAX, strlen(LATTICE_RESP_ERR_SYNTAX));
        }
        return;
    case LATTICE_RESP_CMD_CLIENT_NO_EVICT:
        /* No client is ever evicted here (no maxmemory-clients): on/off are both true. */
        if (eq(&argv[2], "on") || eq(&argv[2], "off")) lattice_resp_add_simple(o, "OK", 2);
        else lattice_resp_add_error(o, LATTICE_RESP_ERR_SYNTAX, strlen(LATTICE_RESP_ERR_SYNTAX));
        return;
    default: /* CLIENT INFO */
        lattice_resp_add_verbatim(o, "txt", line, respd_client_line(r, c, line, sizeof line));
        return;
    }
}

/* Redis 7.0's fields (no pub/sub: its counters are 0); flags O: a
 * monitor, x: in MULTI (multi= the commands queued, -1 outside MULTI). */
size_t respd_client_line(lattice_respd *r, conn *c, char *buf, size_t cap)
{
    uint64_t now = lt_mono_ms();
    size_t qbuf = c->rlen - c->roff, pending = lattice_resp_out_pending(c->out);
    int n = snprintf(buf, cap,
             "id=%lld addr=%s laddr=%s:%d fd=%d name=%s age=%llu idle=%llu flags=%s db=0 sub=0 psub=0 ssub=0 multi=%ld "
             "qbuf=%zu qbuf-free=%zu argv-mem=0 multi-mem=0 rbs=%d rbp=%zu obl=0 oll=0 omem=%zu tot-mem=%zu events=r "
             "cmd=%s user=default redir=-1 resp=%d\n",
             c->id, c->addr, r->host, r->port, c->fd, c->name, (unsigned long long)((now - c->since_ms) / 1000),
             (unsigned long long)((now - c->last_ms) / 1000), c->mon ? "O" : respd_tx_in_multi(c) ? "x" : "N",
             respd_tx_queued(c), qbuf, (size_t)RBUF_SIZE - c->rlen,
             RBUF_SIZE, c->rlen, pending, RBUF_SIZE + pending + lattice_resp_parser_memory(c->parser),
             c->last_cmd ? c->last_cmd : "NULL", lattice_resp_out_proto(c->out));
    return n < 0 ? 0 : (size_t)n >= cap ? cap - 1 : (size_t)n;
}

/* CONFIG RESETSTAT: the counters INFO stats and commandstats show. */
void respd_reset_stats(lattice_respd *r)
{
    atomic_store(&r->total_conns, 0);
    atomic_store(&r->total_cmds, 0);
    atomic_store(&r->rejected_conns, 0);
    for (size_t i = 0; i < LATTICE_RESP_CMD_ID_COUNT_; i++) {
        atomic_store(&r->cmd_calls[i], 0);
        atomic_store(&r->cmd_usec[i], 0);
    }
}

/* CONFIG SET param value [param value ...] as Redis 7: only `timeout` (the
 * idle timeout), slowlog-log-slower-than and slowlog-max-len change at run
 * time; the other parameters CONFIG GET shows
 * are immutable here, anything else unknown.  Every pair is checked before
 * any is applied. */
static bool config_set(lattice_respd *r, size_t argc, const lattice_resp_arg *argv, char *err)
{
    static const char *const fixed[] = {"save", "appendonly", "databases", "cluster-enabled", "port",
                                        "maxclients", "maxmemory", "maxmemory-policy"};
    if (argc < 4) {
        lattice_resp_err_arity("config|set", err);
        return false;
    }
    if (argc % 2) {
        snprintf(err, LATTICE_RESP_ERR_MAX, "%s", LATTICE_RESP_ERR_SYNTAX);
        return false;
    }
    long long timeout = -1, slower = LLONG_MIN, maxlen = -1;
    for (size_t i = 2; i + 1 < argc; i += 2) {
        int n = (int)(argv[i].len > 128 ? 128 : argv[i].len);
        bool sl = eq(&argv[i], "slowlog-log-slower-than");
        if (sl || eq(&argv[i], "slowlog-max-len")) { /* Redis 7.0: long longs, -1 / 0 up */
            long long v;
            const char *why = NULL;
            if (!lattice_resp_string2ll(argv[i + 1].ptr, argv[i + 1].len, &v)) why = "argument couldn't be parsed into an integer";
            else if (v < (sl ? -1 : 0)) why = sl ? "argument must be between -1 and 9223372036854775807 inclusive"
                                                 : "argument must be between 0 and 9223372036854775807 inclusive";
            if (why) {
                snprintf(err, LATTICE_RESP_ERR_MAX, "ERR CONFIG SET failed (possibly related to argument '%.*s') - %s", n,
                         argv[i].ptr, why);
                return false;
            }
            *(sl ? &slower : &maxlen) = v;
            continue;
        }
        if (eq(&argv[i], "timeout")) {
            if (!lattice_resp_string2ll(argv[i + 1].ptr, argv[i + 1].len, &timeout) || timeout < 0 || timeout > INT_MAX) {
                snprintf(err, LATTICE_RESP_ERR_MAX,
                         "ERR CONFIG SET failed (possibly related to argument '%.*s') - argument couldn't be parsed into an integer",
                         n, argv[i].ptr);
                return false;
            }
            continue;
        }
        bool known = false;
        for (size_t k = 0; k < sizeof fixed / sizeof fixed[0]; k++) known |= eq(&argv[i], fixed[k]);
        if (known)
            snprintf(err, LATTICE_RESP_ERR_MAX,
                     "ERR CONFIG SET failed (possibly related to argument '%.*s') - can't set immutable config", n,
                     argv[i].ptr);
        else
            snprintf(err, LATTICE_RESP_ERR_MAX, "ERR Unknown option or number of arguments for CONFIG SET - '%.*s'", n,
                     argv[i].ptr);
        return false;
    }
    if (timeout >= 0) atomic_store(&r->idle_timeout_s, (int)timeout);
    if (slower != LLONG_MIN) atomic_store(&r->slow_slower_than, slower);
    if (maxlen >= 0) atomic_store(&r->slow_max_len, maxlen);
    return true;
}

static void cmd_config(lattice_respd *r, conn *c, size_t argc, const lattice_resp_arg *argv)
{
    lattice_resp_out *o = c->out;
    if (argc >= 2 && eq(&argv[1], "get") && argc >= 3) {
        char port[16], clients[16], maxmem[24], timeout[16], slower[24], maxlen[24];
        snprintf(timeout, sizeof timeout, "%d", atomic_load(&r->idle_timeout_s));
        snprintf(slower, sizeof slower, "%lld", (long long)atomic_load(&r->slow_slower_than));
        snprintf(maxlen, sizeof maxlen, "%lld", (long long)atomic_load(&r->slow_max_len));
        snprintf(port, sizeof port, "%d", r->port);
        snprintf(clients, sizeof clients, "%d", r->cfg.max_clients);
        snprintf(maxmem, sizeof maxmem, "%lld", r->cfg.maxmemory);
        /* The region's policy in Redis's names: evict is an approximated
         * LRU over every key (allkeys-lru), reject is noeviction. */
        const char *kv[][2] = {{"save", ""}, {"appendonly", "no"}, {"databases", "1"},
                               {"cluster-enabled", "yes"}, {"port", port}, {"maxclients", clients},
                               {"maxmemory", maxmem}, {"timeout", timeout},
                               {"maxmemory-policy", r->cfg.maxmemory_evicts ? "allkeys-lru" : "noeviction"},
                               {"slowlog-log-slower-than", slower}, {"slowlog-max-len", maxlen}};
        size_t nkv = sizeof kv / sizeof kv[0];
        const char *hit[16][2];
        size_t n = 0;
        for (size_t k = 0; k < nkv; k++) {
            bool m = false;
            for (size_t i = 2; i < argc && !m; i++) {
                char pat[128];
                snprintf(pat, sizeof pat, "%.*s", (int)(argv[i].len > 127 ? 127 : argv[i].len), argv[i].ptr);
                m = fnmatch(pat, kv[k][0], FNM_CASEFOLD) == 0;
            }
            if (m) {
                hit[n][0] = kv[k][0];
                hit[n++][1] = kv[k][1];
            }
        }
        lattice_resp_add_map(o, n);
        for (size_t i = 0; i < n; i++) {
            lattice_resp_add_bulk(o, hit[i][0], strlen(hit[i][0]));
            lattice_resp_add_bulk(o, hit[i][1], strlen(hit[i][1]));
        }
        return;
    }
    char err[LATTICE_RESP_ERR_MAX];
    if (argc >= 2 && eq(&argv[1], "get")) {
        lattice_resp_err_arity("config|get", err);
    } else if (argc >= 2 && eq(&argv[1], "resetstat")) {
        if (argc != 2) {
            lattice_resp_err_arity("config|resetstat", err);
        } else {
            respd_reset_stats(r);
            lattice_resp_add_simple(o, "OK", 2);
            return;
        }
    } else if (argc >= 2 && eq(&argv[1], "set")) {
        if (config_set(r, argc, argv, err)) {
            lattice_resp_add_simple(o, "OK", 2);
            return;
        }
    } else {
        snprintf(err, sizeof err, "ERR unknown subcommand '%.*s'. Try CONFIG HELP.",
                 (int)(argc >= 2 ? (argv[1].len > 128 ? 128 : argv[1].len) : 0), argc >= 2 ? argv[1].ptr : "");
    }
    lattice_resp_add_error(o, err, strlen(err));
}

static void cmd_cluster_mode(conn *c, lattice_resp_cmd_id id)
{
    /* READONLY/READWRITE/ASKING come only from cluster clients.  Reads of
     * replicated slots run here either way (misrouted); after READONLY even
     * those of a partition this node was the primary of (as Redis). */
    c->aware = AWARE_YES;
    if (id == LATTICE_RESP_CMD_READONLY) c->readonly = true;
    else if (id == LATTICE_RESP_CMD_READWRITE) c->readonly = false;
    lattice_resp_add_simple(c->out, "OK", 2);
}

static void immediate(lattice_respd *r, conn *c, lattice_resp_cmd_id id, size_t argc, const lattice_resp_arg *argv)
{
    lattice_resp_out *o = c->out;
    switch (id) {
    case LATTICE_RESP_CMD_PING:
        if (argc == 1) lattice_resp_add_simple(o, "PONG", 4);
        else if (argc == 2) lattice_resp_add_bulk(o, argv[1].ptr, argv[1].len);
        else lattice_resp_add_error(o, "ERR wrong number of arguments for 'ping' command", 48);
        break;
    case LATTICE_RESP_CMD_ECHO: lattice_resp_add_bulk(o, argv[1].ptr, argv[1].len); break;
    case LATTICE_RESP_CMD_AUTH: cmd_auth(r, c, argc, argv); break;
    case LATTICE_RESP_CMD_HELLO: cmd_hello(r, c, argc, argv); break;
    case LATTICE_RESP_CMD_SELECT: {
        long long db;
        if (!lattice_resp_string2ll(argv[1].ptr, argv[1].len, &db))
            lattice_resp_add_error(o, LATTICE_RESP_ERR_NOT_INTEGER, strlen(LATTICE_RESP_ERR_NOT_INTEGER));
        else if (db != 0)
            lattice_resp_add_error(o, LATTICE_RESP_ERR_DB_INDEX, strlen(LATTICE_RESP_ERR_DB_INDEX));
        else
            lattice_resp_add_simple(o, "OK", 2);
        break;
    }
    case LATTICE_RESP_CMD_QUIT:
        lattice_resp_add_simple(o, "OK", 2);
        c->closing = true;
        break;
    case LATTICE_RESP_CMD_RESET: /* Redis's clearClientConnectionState: the state this endpoint keeps */
        respd_tx_free(c); /* MULTI discarded, keys unwatched */
        c->reply_off = c->reply_skip = c->reply_skip_next = false;
        c->name[0] = '\0';
        c->readonly = false; /* as Redis's READWRITE */
        if (c->mon) respd_mon_detach(c);
        lattice_resp_out_set_proto(o, 2);
        set_authed(r, c, false);
        lattice_resp_add_simple(o, "RESET", 5);
        break;
    case LATTICE_RESP_CMD_INFO: respd_info(r, c, argc, argv); break;
    case LATTICE_RESP_CMD_TIME: {
        char sec[24], usec[24];
        struct timespec ts; /* Redis's TIME has microseconds; lt_wall_ms only ms */
        clock_gettime(CLOCK_REALTIME, &ts);
        size_t ns = lattice_resp_ll2string(sec, (long long)ts.tv_sec);
        size_t nu = lattice_resp_ll2string(usec, (long long)(ts.tv_nsec / 1000));
        lattice_resp_add_array(o, 2);
        lattice_resp_add_bulk(o, sec, ns);
        lattice_resp_add_bulk(o, usec, nu);
        break;
    }
    case LATTICE_RESP_CMD_SUB_HELP: cmd_help(c, &argv[0]); break;
    case LATTICE_RESP_CMD_COMMAND:
    case LATTICE_RESP_CMD_COMMAND_COUNT:
    case LATTICE_RESP_CMD_COMMAND_INFO:
    case LATTICE_RESP_CMD_COMMAND_DOCS:
    case LATTICE_RESP_CMD_COMMAND_LIST:
    case LATTICE_RESP_CMD_COMMAND_GETKEYS: cmd_command(c, id, argc, argv); break;
    case LATTICE_RESP_CMD_CLIENT_SETNAME:
    case LATTICE_RESP_CMD_CLIENT_GETNAME:
    case LATTICE_RESP_CMD_CLIENT_SETINFO:
    case LATTICE_RESP_CMD_CLIENT_ID:
    case LATTICE_RESP_CMD_CLIENT_INFO:
    case LATTICE_RESP_CMD_CLIENT_NO_EVICT:
    case LATTICE_RESP_CMD_CLIENT_REPLY: cmd_client(r, c, id, argv); break;
    case LATTICE_RESP_CMD_READONLY:
    case LATTICE_RESP_CMD_READWRITE:
    case LATTICE_RESP_CMD_ASKING: cmd_cluster_mode(c, id); break;
    default: respd_cluster(r, c, id, argc, argv); break;
    }
}

/* Commands of one batch run concurrently (one submit), so a command whose
 * key an earlier entry of the batch touches waits for the next batch: a
 * pipelined SET k then INCR k must run in that order, whatever retries the
 * first one meets.  A false hit of the filter only splits a batch early. */
static bool touches_batch_key(batch *b, const lattice_resp_cmd *rc, size_t argc, const lattice_resp_arg *argv)
{
    int first, last, step;
    lattice_resp_cmd_key_spec(rc, &first, &last, &step);
    if (first <= 0 || step <= 0 || argc <= (size_t)first) return false;
    long end = last >= 0 ? last : (long)argc + last;
    if (end >= (long)argc) end = (long)argc - 1;
    bool hit = false;
    for (long i = first; i <= end; i += step) {
        uint64_t h = 1469598103934665603ull;
        for (size_t k = 0; k < argv[i].len; k++) h = (h ^ (uint8_t)argv[i].ptr[k]) * 1099511628211ull;
        uint64_t bit = 1ull << (h & 63), *w = &b->keybits[(h >> 6) & 63];
        hit |= b->n_ents && (*w & bit);
        *w |= bit;
    }
    return hit;
}

/* A connection still learning whether it routes by the slot map saw a key
 * command on `slot` that this node serves. */
static void learn_slot(conn *c, uint16_t slot)
{
    for (uint8_t i = 0; i < c->n_seen; i++)
        if (c->seen[i] == slot) return;
    c->seen[c->n_seen++] = slot;
    if (c->n_seen == AWARE_SLOTS) c->aware = AWARE_YES;
}

/* A cluster-aware connection read `slot` here, where this node is now a
 * replica of a partition it was the primary of (demotion generation gen):
 * true the first time this connection does so since the last demotion - a
 * client routing by a map from before learns the new primary (MOVED); one
 * that reads replicas on purpose comes back, and is served from then on. */
static bool first_stale_read(conn *c, uint16_t slot, uint32_t gen)
{
    if (!c->told) {
        c->told = lt_calloc(LATTICE_KEY_SLOTS / 8, 1);
        if (!c->told) return false; /* served: only the hint is lost */
        c->told_gen = gen;
    } else if (c->told_gen != gen) { /* newer demotions: tell every slot again */
        memset(c->told, 0, LATTICE_KEY_SLOTS / 8);
        c->told_gen = gen;
    }
    uint8_t bit = (uint8_t)(1u << (slot & 7));
    if (c->told[slot >> 3] & bit) return false;
    c->told[slot >> 3] |= bit;
    return true;
}

/* Redis Cluster's manners for a key command (docs/RESP.md, "Redirection"):
 * true with err = CROSSSLOT or MOVED when a cluster-aware connection sent
 * it to the wrong node; false when it runs here (proxied if need be).  A
 * connection that has not shown yet whether it routes by the slot map is
 * cluster-aware once AWARE_SLOTS distinct slots it used were all served
 * here as their primary, and plain for good at its first key this node
 * does not serve, or serves only as a replica.  A read this node serves as a replica of a
 * partition it was the primary of is answered MOVED once per slot and
 * connection (first_stale_read), unless the connection sent READONLY. */
bool respd_misrouted(lattice_respd *r, conn *c, const lattice_resp_cmd *rc, size_t argc,
                     const lattice_resp_arg *argv, char *err)
{
    if (r->cfg.moved == LATTICE_RESPD_MOVED_NEVER || c->aware == AWARE_NO) return false;
    bool aware = r->cfg.moved == LATTICE_RESPD_MOVED_ALWAYS || c->aware == AWARE_YES;
    int first, last, step;
    lattice_resp_cmd_key_spec(rc, &first, &last, &step);
    if (first <= 0 || step <= 0 || argc <= (size_t)first) return false;
    long end = last >= 0 ? last : (long)argc + last;
    if (end >= (long)argc) end = (long)argc - 1;
    uint16_t slot = lattice_key_slot(argv[first].ptr, argv[first].len);
    for (long i = first + step; i <= end; i += step) {
        if (lattice_key_slot(argv[i].ptr, argv[i].len) == slot) continue;
        if (aware) {
            snprintf(err, LATTICE_RESP_ERR_MAX, "%s", LATTICE_RESP_ERR_CROSSSLOT);
            return true;
        }
        c->aware = AWARE_NO; /* a cluster client never sends this */
        return false;
    }
    /* A read of a slot this node replicates runs here on any connection,
     * not only after READONLY (Redis answers MOVED without it): a backup
     * answers only clean reads (docs/CONSISTENCY.md), so it is as current as
     * the primary, and clients that keep one connection per node (ioredis)
     * cannot send READONLY to a node that is also a primary. */
    bool ro = lattice_resp_cmd_flags(rc) & LATTICE_RESP_F_READONLY;
    uint32_t gen = 0;
    respd_where w = respd_route(r, slot, ro, err, &gen);
    if (aware) return w == RESPD_MOVED || (w == RESPD_HERE_DEMOTED && !c->readonly && first_stale_read(c, slot, gen));
    /* Learning: only slots this node is the primary of count.  A read of
     * a slot it serves as a replica is what a plain client does (it sends
     * keys of every slot; a node of a two-server grid serves them all) and
     * a cluster client reading primaries does not: such a connection is
     * plain for good, so it never meets the MOVED of a demoted slot
     * (fault_kill_primary's final reads got it).  A cluster client that
     * reads replicas without READONLY is served as plain: proxied, never
     * redirected. */
    if (w == RESPD_MOVED || w == RESPD_HERE_REPLICA || w == RESPD_HERE_DEMOTED) c->aware = AWARE_NO;
    else if (w == RESPD_HERE) learn_slot(c, slot); /* HERE_ALL: every client looks aware */
    return false;
}

static cmd_outcome run_command(lattice_respd *r, conn *c, batch *b, size_t argc, const lattice_resp_arg *argv,
                               bool in_exec)
{
    char err[LATTICE_RESP_ERR_MAX];
    bool queue = !in_exec && respd_tx_in_multi(c);
    if (eq(&argv[0], "config") && !queue) { /* not a command of the table: CONFIG GET for tools only */
        if (b->n_ents) return CMD_DEFER;
        uint64_t t0 = respd_now_us();
        if (argc >= 2 && !in_exec) /* CLIENT LIST's cmd= */
            c->last_cmd = eq(&argv[1], "get") ? "config|get" : eq(&argv[1], "set") ? "config|set"
                        : eq(&argv[1], "resetstat") ? "config|resetstat" : "config";
        if (!c->authed) lattice_resp_add_error(c->out, LATTICE_RESP_ERR_NOAUTH, strlen(LATTICE_RESP_ERR_NOAUTH));
        else cmd_config(r, c, argc, argv);
        if (c->authed && respd_slowlog_wants(r)) respd_slowlog_add(r, c, argc, argv, respd_now_us() - t0);
        return CMD_DONE;
    }
    if (b->sealed) return CMD_DEFER; /* after WATCH / EXEC: the next batch */
    const lattice_resp_cmd *rc = lattice_resp_cmd_resolve(argc, argv, err);
    if (queue && !(rc && (lattice_resp_cmd_id_of(rc) == LATTICE_RESP_CMD_QUIT || lattice_resp_cmd_id_of(rc) == LATTICE_RESP_CMD_RESET)))
        return respd_tx_command(r, c, b, rc, argc, argv, err); /* queued, or MULTI's own commands */
    if (rc && respd_is_tx_command(lattice_resp_cmd_id_of(rc)) && !respd_is_tx_key_command(lattice_resp_cmd_id_of(rc)))
        return respd_tx_command(r, c, b, rc, argc, argv, err);
    if (!rc) {
        if (b->n_ents) return respd_ent_error(b, err);
        lattice_resp_add_error(c->out, err, strlen(err));
        return CMD_DONE;
    }
    lattice_resp_cmd_id id = lattice_resp_cmd_id_of(rc);
    if (!c->authed && !(lattice_resp_cmd_flags(rc) & LATTICE_RESP_F_NO_AUTH)) {
        if (b->n_ents) return respd_ent_error(b, LATTICE_RESP_ERR_NOAUTH);
        lattice_resp_add_error(c->out, LATTICE_RESP_ERR_NOAUTH, strlen(LATTICE_RESP_ERR_NOAUTH));
        return CMD_DONE;
    }
    if (in_exec && id == LATTICE_RESP_CMD_MONITOR) /* as Redis: EXEC expects one reply per command */
        return respd_ent_error(b, "ERR MONITOR isn't allowed for DENY BLOCKING client");
    if (respd_is_key_command(id)) {
        if (c->mon) return respd_ent_error(b, "ERR Replica can't interact with the keyspace"); /* as Redis */
        if (b->sealed || (respd_is_walk_command(id) && b->n_ents)) return CMD_DEFER;
        if (touches_batch_key(b, rc, argc, argv)) return CMD_DEFER;
        atomic_fetch_add(&r->cmd_calls[id], 1);
        bool walk = respd_is_walk_command(id); /* no key: never misrouted */
        if (!walk && respd_misrouted(r, c, rc, argc, argv, err)) return respd_ent_error(b, err);
        if (!in_exec) c->last_cmd = lattice_resp_cmd_name(rc); /* in EXEC: cmd=exec, as Redis */
        if (!in_exec && atomic_load_explicit(&r->n_mons, memory_order_relaxed)) respd_monitor_feed(r, c, rc, argc, argv);
        size_t n_before = b->n_ents;
        cmd_outcome oc = walk ? respd_walk_command(r, c, b, id, argc, argv) : respd_key_command(r, b, id, argc, argv);
        if (b->n_ents > n_before && b->ents[b->n_ents - 1].cmd != ENT_ERROR && respd_slowlog_wants(r))
            respd_slowlog_keep(b, &b->ents[b->n_ents - 1], argc, argv);
        return oc;
    }
    if (b->n_ents) return CMD_DEFER;
    if (!in_exec) c->last_cmd = lattice_resp_cmd_name(rc);
    if (!in_exec && atomic_load_explicit(&r->n_mons, memory_order_relaxed)) /* in EXEC: shown when queued */
        respd_monitor_feed(r, c, rc, argc, argv);
    if (id == LATTICE_RESP_CMD_CLIENT_LIST || id == LATTICE_RESP_CMD_CLIENT_KILL) {
        /* Its legs go to every IO thread; time, like a key command's, is
         * counted until the reply (respd_batch_replies). */
        atomic_fetch_add(&r->cmd_calls[id], 1);
        cmd_outcome oc = respd_intro_command(r, c, b, id, argc, argv);
        if (b->xreq && respd_slowlog_wants(r)) respd_slowlog_keep(b, &b->ents[b->n_ents - 1], argc, argv);
        return oc;
    }
    uint64_t t0 = respd_now_us();
    if (id >= LATTICE_RESP_CMD_SLOWLOG && id <= LATTICE_RESP_CMD_MONITOR) respd_intro_command(r, c, b, id, argc, argv);
    else immediate(r, c, id, argc, argv);
    uint64_t took = respd_now_us() - t0;
    atomic_fetch_add(&r->cmd_calls[id], 1);
    atomic_fetch_add(&r->cmd_usec[id], took);
    if (respd_slowlog_wants(r)) respd_slowlog_add(r, c, argc, argv, took);
    return CMD_DONE;
}

cmd_outcome respd_command(lattice_respd *r, conn *c, batch *b, const lattice_resp_command *cmd)
{
    return run_command(r, c, b, cmd->argc, cmd->argv, false);
}

cmd_outcome respd_command_in_exec(lattice_respd *r, conn *c, batch *b, size_t argc, const lattice_resp_arg *argv)
{
    return run_command(r, c, b, argc, argv, true);
}
