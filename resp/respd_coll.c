/*
 * respd: the commands of the collection types (hashes: HSET ... HSCAN;
 * lists: LLEN ... LTRIM; sets: SISMEMBER ... SPOP; sorted sets: ZADD ...
 * ZSCAN; GEO on sorted sets: GEOADD ... GEOSEARCH, the searches that
 * store going as GEOSEARCHSTORE does, respd_tx.c).
 * Each is one op (LATTICE_OP_COLL_READ or _WRITE, lattice/coll.h) of its
 * key: the arguments after the key go packed as the client sent them, the
 * key's primary checks them and runs the command (types/hash.c), and its
 * reply comes back in RESP3's framing, which is written here in the
 * connection's protocol (a map or a list of pairs is one flat array in
 * RESP2, as Redis writes it).
 */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "lattice/alloc.h"
#include "lattice/coll.h"
#include "respd_int.h"

/* A write whose new value would not fit the cache's max_value_bytes (a
 * collection is one row: docs/TYPES.md). */
#define ERR_TOO_LARGE "ERR the value would exceed the cache's max_value_bytes"
#define ERR_NO_REPLY "ERR the reply did not come back (a full_async cache, or a resend after a failover): read the key"

bool respd_is_coll_command(lattice_resp_cmd_id id)
{
    return id >= LATTICE_RESP_CMD_HSET && id <= LATTICE_RESP_CMD_GEOSEARCH;
}

/* The command each RESP command is (lattice/coll.h). */
static const uint8_t coll_of[LATTICE_RESP_CMD_ID_COUNT_] = {
    [LATTICE_RESP_CMD_HSET] = LATTICE_COLL_HSET,
    [LATTICE_RESP_CMD_HSETNX] = LATTICE_COLL_HSETNX,
    [LATTICE_RESP_CMD_HMSET] = LATTICE_COLL_HMSET,
    [LATTICE_RESP_CMD_HDEL] = LATTICE_COLL_HDEL,
    [LATTICE_RESP_CMD_HINCRBY] = LATTICE_COLL_HINCRBY,
    [LATTICE_RESP_CMD_HINCRBYFLOAT] = LATTICE_COLL_HINCRBYFLOAT,
    [LATTICE_RESP_CMD_HGET] = LATTICE_COLL_HGET,
    [LATTICE_RESP_CMD_HMGET] = LATTICE_COLL_HMGET,
    [LATTICE_RESP_CMD_HLEN] = LATTICE_COLL_HLEN,
    [LATTICE_RESP_CMD_HSTRLEN] = LATTICE_COLL_HSTRLEN,
    [LATTICE_RESP_CMD_HEXISTS] = LATTICE_COLL_HEXISTS,
    [LATTICE_RESP_CMD_HKEYS] = LATTICE_COLL_HKEYS,
    [LATTICE_RESP_CMD_HVALS] = LATTICE_COLL_HVALS,
    [LATTICE_RESP_CMD_HGETALL] = LATTICE_COLL_HGETALL,
    [LATTICE_RESP_CMD_HRANDFIELD] = LATTICE_COLL_HRANDFIELD,
    [LATTICE_RESP_CMD_HSCAN] = LATTICE_COLL_HSCAN,
    [LATTICE_RESP_CMD_LLEN] = LATTICE_COLL_LLEN,
    [LATTICE_RESP_CMD_LRANGE] = LATTICE_COLL_LRANGE,
    [LATTICE_RESP_CMD_LINDEX] = LATTICE_COLL_LINDEX,
    [LATTICE_RESP_CMD_LPOS] = LATTICE_COLL_LPOS,
    [LATTICE_RESP_CMD_LPUSH] = LATTICE_COLL_LPUSH,
    [LATTICE_RESP_CMD_RPUSH] = LATTICE_COLL_RPUSH,
    [LATTICE_RESP_CMD_LPUSHX] = LATTICE_COLL_LPUSHX,
    [LATTICE_RESP_CMD_RPUSHX] = LATTICE_COLL_RPUSHX,
    [LATTICE_RESP_CMD_LPOP] = LATTICE_COLL_LPOP,
    [LATTICE_RESP_CMD_RPOP] = LATTICE_COLL_RPOP,
    [LATTICE_RESP_CMD_LSET] = LATTICE_COLL_LSET,
    [LATTICE_RESP_CMD_LINSERT] = LATTICE_COLL_LINSERT,
    [LATTICE_RESP_CMD_LREM] = LATTICE_COLL_LREM,
    [LATTICE_RESP_CMD_LTRIM] = LATTICE_COLL_LTRIM,
    [LATTICE_RESP_CMD_SISMEMBER] = LATTICE_COLL_SISMEMBER,
    [LATTICE_RESP_CMD_SMISMEMBER] = LATTICE_COLL_SMISMEMBER,
    [LATTICE_RESP_CMD_SCARD] = LATTICE_COLL_SCARD,
    [LATTICE_RESP_CMD_SMEMBERS] = LATTICE_COLL_SMEMBERS,
    [LATTICE_RESP_CMD_SRANDMEMBER] = LATTICE_COLL_SRANDMEMBER,
    [LATTICE_RESP_CMD_SSCAN] = LATTICE_COLL_SSCAN,
    [LATTICE_RESP_CMD_SADD] = LATTICE_COLL_SADD,
    [LATTICE_RESP_CMD_SREM] = LATTICE_COLL_SREM,
    [LATTICE_RESP_CMD_SPOP] = LATTICE_COLL_SPOP,
    [LATTICE_RESP_CMD_ZCARD] = LATTICE_COLL_ZCARD,
    [LATTICE_RESP_CMD_ZSCORE] = LATTICE_COLL_ZSCORE,
    [LATTICE_RESP_CMD_ZMSCORE] = LATTICE_COLL_ZMSCORE,
    [LATTICE_RESP_CMD_ZRANK] = LATTICE_COLL_ZRANK,
    [LATTICE_RESP_CMD_ZREVRANK] = LATTICE_COLL_ZREVRANK,
    [LATTICE_RESP_CMD_ZCOUNT] = LATTICE_COLL_ZCOUNT,
    [LATTICE_RESP_CMD_ZLEXCOUNT] = LATTICE_COLL_ZLEXCOUNT,
    [LATTICE_RESP_CMD_ZRANGE] = LATTICE_COLL_ZRANGE,
    [LATTICE_RESP_CMD_ZREVRANGE] = LATTICE_COLL_ZREVRANGE,
    [LATTICE_RESP_CMD_ZRANGEBYSCORE] = LATTICE_COLL_ZRANGEBYSCORE,
    [LATTICE_RESP_CMD_ZREVRANGEBYSCORE] = LATTICE_COLL_ZREVRANGEBYSCORE,
    [LATTICE_RESP_CMD_ZRANGEBYLEX] = LATTICE_COLL_ZRANGEBYLEX,
    [LATTICE_RESP_CMD_ZREVRANGEBYLEX] = LATTICE_COLL_ZREVRANGEBYLEX,
    [LATTICE_RESP_CMD_ZRANDMEMBER] = LATTICE_COLL_ZRANDMEMBER,
    [LATTICE_RESP_CMD_ZSCAN] = LATTICE_COLL_ZSCAN,
    [LATTICE_RESP_CMD_ZADD] = LATTICE_COLL_ZADD,
    [LATTICE_RESP_CMD_ZINCRBY] = LATTICE_COLL_ZINCRBY,
    [LATTICE_RESP_CMD_ZREM] = LATTICE_COLL_ZREM,
    [LATTICE_RESP_CMD_ZREMRANGEBYRANK] = LATTICE_COLL_ZREMRANGEBYRANK,
    [LATTICE_RESP_CMD_ZREMRANGEBYSCORE] = LATTICE_COLL_ZREMRANGEBYSCORE,
    [LATTICE_RESP_CMD_ZREMRANGEBYLEX] = LATTICE_COLL_ZREMRANGEBYLEX,
    [LATTICE_RESP_CMD_ZPOPMIN] = LATTICE_COLL_ZPOPMIN,
    [LATTICE_RESP_CMD_ZPOPMAX] = LATTICE_COLL_ZPOPMAX,
    [LATTICE_RESP_CMD_GEOADD] = LATTICE_COLL_GEOADD,
    [LATTICE_RESP_CMD_GEOPOS] = LATTICE_COLL_GEOPOS,
    [LATTICE_RESP_CMD_GEODIST] = LATTICE_COLL_GEODIST,
    [LATTICE_RESP_CMD_GEOHASH] = LATTICE_COLL_GEOHASH,
    [LATTICE_RESP_CMD_GEORADIUS] = LATTICE_COLL_GEORADIUS,
    [LATTICE_RESP_CMD_GEORADIUS_RO] = LATTICE_COLL_GEORADIUS_RO,
    [LATTICE_RESP_CMD_GEORADIUSBYMEMBER] = LATTICE_COLL_GEORADIUSBYMEMBER,
    [LATTICE_RESP_CMD_GEORADIUSBYMEMBER_RO] = LATTICE_COLL_GEORADIUSBYMEMBER_RO,
    [LATTICE_RESP_CMD_GEOSEARCH] = LATTICE_COLL_GEOSEARCH,
};

/* GEORADIUS / GEORADIUSBYMEMBER's STORE or STOREDIST key (Redis's parse:
 * COUNT takes its number, the last STORE counts), or 0 when it has none. */
static size_t geo_store_key(lattice_resp_cmd_id id, size_t argc, const lattice_resp_arg *argv)
{
    size_t at = 0;
    for (size_t j = id == LATTICE_RESP_CMD_GEORADIUS ? 6 : 5; j < argc; j++) {
        bool more = j + 1 < argc;
        const lattice_resp_arg *a = &argv[j];
        if (more && a->len == 5 && !strncasecmp(a->ptr, "count", 5)) {
            j++;
        } else if (more && ((a->len == 5 && !strncasecmp(a->ptr, "store", 5)) ||
                            (a->len == 9 && !strncasecmp(a->ptr, "storedist", 9)))) {
            at = ++j;
        }
    }
    return at;
}

bool respd_coll_op(batch *b, ent *e, int cmd, const lattice_resp_arg *key, const lattice_resp_arg *args, size_t n)
{
    lattice_coll_arg *a = lt_malloc((n ? n : 1) * sizeof *a);
    unsigned char *p = NULL;
    bool ok = a != NULL;
    for (size_t i = 0; ok && i < n; i++) a[i] = (lattice_coll_arg){args[i].ptr, args[i].len};
    size_t len = ok ? lattice_coll_packed_len(a, n) : 0;
    ok = ok && (p = lt_malloc(len)) != NULL && lattice_coll_pack(p, len, a, n) == len;
    if (ok) {
        lattice_resp_arg packed = {(const char *)p, len};
        ok = respd_op_add(b, e, lattice_coll_is_write(cmd) ? LATTICE_OP_COLL_WRITE : LATTICE_OP_COLL_READ, 0, key,
                          &packed, cmd, 0);
    }
    lt_free(p);
    lt_free(a);
    return ok;
}

cmd_outcome respd_coll_command(batch *b, lattice_resp_cmd_id id, size_t argc, const lattice_resp_arg *argv)
{
    size_t store = id == LATTICE_RESP_CMD_GEORADIUS || id == LATTICE_RESP_CMD_GEORADIUSBYMEMBER
                       ? geo_store_key(id, argc, argv)
                       : 0;
    if (store) return respd_tx_geo_store(b, id, argc, argv, store); /* a write of two keys: one step */
    ent *e = respd_ent_new(b, id);
    if (!e) return b->n_ents ? CMD_BATCHED : CMD_DONE; /* out of memory: the batch fails as a whole */
    bool ok;
    if (id == LATTICE_RESP_CMD_GEOSEARCH) { /* its name as sent first: Redis's errors quote it */
        lattice_resp_arg *a = lt_malloc((argc - 1) * sizeof *a);
        if ((ok = a != NULL)) {
            a[0] = argv[0];
            memcpy(a + 1, argv + 2, (argc - 2) * sizeof *a);
            ok = respd_coll_op(b, e, coll_of[id], &argv[1], a, argc - 1);
        }
        lt_free(a);
    } else {
        ok = respd_coll_op(b, e, coll_of[id], &argv[1], argv + 2, argc - 2);
    }
    if (ok) return CMD_BATCHED;
    b->n_ops = e->first;
    b->n_ents--;
    return respd_ent_error(b, "OOM command not allowed when used memory > 'maxmemory'.");
}

/* Writes the reply element at *off and what it holds; false when the
 * bytes are malformed (never from a primary of this build). */
static bool emit(lattice_resp_out *o, const char *p, size_t len, size_t *off, int depth)
{
    lattice_coll_elem e;
    if (depth > 8 || lattice_coll_reply_next(p, len, off, &e) != 1) return false;
    size_t kids = 0;
    switch (e.type) {
    case '+': lattice_resp_add_simple(o, e.ptr, e.len); return true;
    case '-': lattice_resp_add_error(o, e.ptr, e.len); return true;
    case ':': lattice_resp_add_int(o, e.num); return true;
    case '$': lattice_resp_add_bulk(o, e.ptr, e.len); return true;
    case '_': lattice_resp_add_null(o); return true;
    case ',':
        if (lattice_resp_out_proto(o) == 3) {
            lattice_resp_add_raw(o, ",", 1);
            lattice_resp_add_raw(o, e.ptr, e.len);
            lattice_resp_add_raw(o, "\r\n", 2);
        } else {
            lattice_resp_add_bulk(o, e.ptr, e.len);
        }
        return true;
    case '*':
        if (e.num < 0) {
            lattice_resp_add_null_array(o);
            return true;
        }
        lattice_resp_add_array(o, (size_t)e.num);
        kids = (size_t)e.num;
        break;
    case '%':
        lattice_resp_add_map(o, (size_t)e.num);
        kids = 2 * (size_t)e.num;
        break;
    case '~':
        lattice_resp_add_set(o, (size_t)e.num);
        kids = (size_t)e.num;
        break;
    default: /* '&': pairs */
        if (lattice_resp_out_proto(o) == 3) {
            lattice_resp_add_array(o, (size_t)e.num);
            for (long long i = 0; i < e.num; i++) {
                lattice_resp_add_array(o, 2);
                if (!emit(o, p, len, off, depth + 1) || !emit(o, p, len, off, depth + 1)) return false;
            }
            return true;
        }
        lattice_resp_add_array(o, 2 * (size_t)e.num);
        kids = 2 * (size_t)e.num;
        break;
    }
    for (size_t i = 0; i < kids; i++)
        if (!emit(o, p, len, off, depth + 1)) return false;
    return true;
}

/* ZADD's packed arguments name INCR (its reply is a score, not a count). */
static bool has_incr(const lattice_op *op)
{
    size_t n, off = 4;
    if (!lattice_coll_unpacked_count(op->value, op->value_len, &n)) return false;
    for (size_t i = 0; i < n; i++) {
        lattice_coll_arg a = lattice_coll_unpack_next(op->value, &off);
        if (a.len == 4 && !strncasecmp(a.ptr, "incr", 4)) return true;
    }
    return false;
}

void respd_coll_add_reply(lattice_resp_out *o, const char *p, size_t len)
{
    size_t off = 0;
    if (!emit(o, p, len, &off, 0)) {
        static const char m[] = "ERR malformed reply from the key's primary";
        lattice_resp_add_error(o, m, sizeof m - 1);
    }
}

void respd_coll_reply(lattice_resp_out *o, const batch *b, const ent *e)
{
    const opres *x = &b->res[e->first];
    if (x->status == LATTICE_ERR_TOO_LARGE) {
        lattice_resp_add_error(o, ERR_TOO_LARGE, sizeof ERR_TOO_LARGE - 1);
        return;
    }
    if (x->status != LATTICE_OK) {
        respd_add_result_error(o, x);
        return;
    }
    if (x->has_value) {
        respd_coll_add_reply(o, b->vals + x->voff, x->vlen);
        return;
    }
    /* No reply bytes: a full_async write (its outcome is not reported) or
     * a resend answered from the primary's record, which keeps num. */
    switch ((lattice_resp_cmd_id)e->cmd) {
    case LATTICE_RESP_CMD_HSET:
    case LATTICE_RESP_CMD_HSETNX:
    case LATTICE_RESP_CMD_HDEL:
    case LATTICE_RESP_CMD_HINCRBY:
    case LATTICE_RESP_CMD_LPUSH:
    case LATTICE_RESP_CMD_RPUSH:
    case LATTICE_RESP_CMD_LPUSHX:
    case LATTICE_RESP_CMD_RPUSHX:
    case LATTICE_RESP_CMD_LINSERT:
    case LATTICE_RESP_CMD_LREM:
    case LATTICE_RESP_CMD_SADD:
    case LATTICE_RESP_CMD_SREM:
    case LATTICE_RESP_CMD_ZREM:
    case LATTICE_RESP_CMD_ZREMRANGEBYRANK:
    case LATTICE_RESP_CMD_ZREMRANGEBYSCORE:
    case LATTICE_RESP_CMD_ZREMRANGEBYLEX: lattice_resp_add_int(o, x->num); break;
    case LATTICE_RESP_CMD_ZADD: /* an integer, unless INCR made it a score */
        if (has_incr(&b->ops[e->first])) lattice_resp_add_error(o, ERR_NO_REPLY, sizeof ERR_NO_REPLY - 1);
        else lattice_resp_add_int(o, x->num);
        break;
    case LATTICE_RESP_CMD_HMSET:
    case LATTICE_RESP_CMD_LSET:
    case LATTICE_RESP_CMD_LTRIM: lattice_resp_add_simple(o, "OK", 2); break;
    default: lattice_resp_add_error(o, ERR_NO_REPLY, sizeof ERR_NO_REPLY - 1); break;
    }
}
