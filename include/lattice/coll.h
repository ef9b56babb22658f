/*
 * lattice/coll.h: commands on collection values - the op kinds
 * LATTICE_OP_COLL_READ and LATTICE_OP_COLL_WRITE of lattice/ops.h (prefix
 * lattice_coll_).  Hashes so far; lists, sets and sorted sets come next
 * (docs/TYPES.md).
 *
 * An op names one command of Redis 7.0 (lattice_coll_cmd) in op.delta and
 * carries the command's arguments after the key, as the client sent them,
 * packed in op.value:
 *
 *     u32 count, then count times (u32 length, the bytes)   (little-endian)
 *
 * The key's primary parses them (with Redis's checks and error texts, in
 * Redis's order), executes the command atomically on the key's value and
 * answers the command's reply as Redis would in RESP3, in the result's
 * value - a subset of RESP3's framing:
 *
 *     +text\r\n  -error text\r\n  :integer\r\n  $len\r\nbytes\r\n  _\r\n (nil)
 *     *n\r\n (array of n replies; *-1 the null array of RESP2, RESP3's nil)
 *     %n\r\n (map of n key, value pairs)  ~n\r\n (set of n: RESP2's array)
 *     &n\r\n (n pairs, 2 x n replies: RESP3 shows them as n arrays of
 *            two, RESP2 as one flat array - HRANDFIELD ... WITHVALUES)
 *     ,text\r\n (a double as Redis prints it, "%.17g" or inf/-inf: RESP3's
 *            double, a bulk string in RESP2 - a sorted set's scores)
 *
 * (lattice_coll_reply_next reads it).  An argument error is such an error
 * reply with status LATTICE_OK; a value of another type is status
 * LATTICE_ERR_WRONGTYPE (its type in the result's flags, as a GET's).  A
 * write whose reply is an integer also sets the result's num to it: a
 * resend of a write the primary already applied (a retry after a failover)
 * is answered from its record, which keeps num but not the value.
 *
 *     lattice_coll_arg a[] = {{"name", 4}, {"ann", 3}};
 *     char buf[64];
 *     size_t n = lattice_coll_pack(buf, sizeof buf, a, 2);
 *     lattice_op op = lattice_op_coll(NULL, LATTICE_COLL_HSET, "user:1", 6, buf, n);
 */
#ifndef LATTICE_COLL_H
#define LATTICE_COLL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "lattice/ops.h"

/* The numbers are on the wire: stable.  Reads below LATTICE_COLL_WRITES_,
 * writes from it. */
typedef enum lattice_coll_cmd {
    LATTICE_COLL_HGET = 1,
    LATTICE_COLL_HMGET = 2,
    LATTICE_COLL_HLEN = 3,
    LATTICE_COLL_HSTRLEN = 4,
    LATTICE_COLL_HEXISTS = 5,
    LATTICE_COLL_HKEYS = 6,
    LATTICE_COLL_HVALS = 7,
    LATTICE_COLL_HGETALL = 8,
    LATTICE_COLL_HRANDFIELD = 9,  /* [count [WITHVALUES]] */
    LATTICE_COLL_HSCAN = 10,      /* cursor [MATCH pattern] [COUNT n]: see docs/TYPES.md */
    LATTICE_COLL_LLEN = 11,
    LATTICE_COLL_LRANGE = 12,
    LATTICE_COLL_LINDEX = 13,
    LATTICE_COLL_LPOS = 14,
    LATTICE_COLL_SISMEMBER = 15,
    LATTICE_COLL_SMISMEMBER = 16,
    LATTICE_COLL_SCARD = 17,
    LATTICE_COLL_SMEMBERS = 18,
    LATTICE_COLL_SRANDMEMBER = 19,
    LATTICE_COLL_SSCAN = 20,
    LATTICE_COLL_ZCARD = 21,
    LATTICE_COLL_ZSCORE = 22,
    LATTICE_COLL_ZMSCORE = 23,
    LATTICE_COLL_ZRANK = 24,
    LATTICE_COLL_ZREVRANK = 25,
    LATTICE_COLL_ZCOUNT = 26,
    LATTICE_COLL_ZLEXCOUNT = 27,
    LATTICE_COLL_ZRANGE = 28,
    LATTICE_COLL_ZREVRANGE = 29,
    LATTICE_COLL_ZRANGEBYSCORE = 30,
    LATTICE_COLL_ZREVRANGEBYSCORE = 31,
    LATTICE_COLL_ZRANGEBYLEX = 32,
    LATTICE_COLL_ZREVRANGEBYLEX = 33,
    LATTICE_COLL_ZRANDMEMBER = 34,
    LATTICE_COLL_ZSCAN = 35,
    /* A key of any type, strings too: "encoding" hash-entries hash-value
     * zset-entries zset-value (OBJECT ENCODING, by Redis 7.0's rules and
     * these thresholds), "memory" (MEMORY USAGE: the bytes it takes), or
     * "elements" (DUMP's read: a string's value as a bulk string, a hash's
     * fields and values as HGETALL, a list's as LRANGE 0 -1, a set's as
     * SMEMBERS, a sorted set's members and scores as pairs). */
    LATTICE_COLL_OBJECT = 36,
    /* min max [BYSCORE|BYLEX] [REV] [LIMIT offset count]: ZRANGE as
     * ZRANGESTORE reads its source (no WITHSCORES; every member with its
     * score, BYLEX too) - what ZRANGESTORE stores. */
    LATTICE_COLL_ZRANGESTORE = 37,
    /* GEO (on sorted sets): the arguments after the key as Redis 7.0 takes
     * them (GEOSEARCH and GEOSEARCHSTORE: the command's name as the client
     * sent it first, for the errors that quote it).  GEORADIUS/GEORADIUSBYMEMBER with STORE or STOREDIST, and
     * GEOSEARCHSTORE (its arguments after the source key), answer what to
     * store: pairs of member and score, not a reply (LATTICE_TXN_SETOP
     * stores them). */
    LATTICE_COLL_GEOPOS = 38,
    LATTICE_COLL_GEODIST = 39,
    LATTICE_COLL_GEOHASH = 40,
    LATTICE_COLL_GEORADIUS = 41,
    LATTICE_COLL_GEORADIUS_RO = 42,
    LATTICE_COLL_GEORADIUSBYMEMBER = 43,
    LATTICE_COLL_GEORADIUSBYMEMBER_RO = 44,
    LATTICE_COLL_GEOSEARCH = 45,
    LATTICE_COLL_GEOSEARCHSTORE = 46,
    LATTICE_COLL_WRITES_ = 64,
    LATTICE_COLL_HSET = 64,
    LATTICE_COLL_HSETNX = 65,
    LATTICE_COLL_HMSET = 66,
    LATTICE_COLL_HDEL = 67,
    LATTICE_COLL_HINCRBY = 68,
    LATTICE_COLL_HINCRBYFLOAT = 69,
    LATTICE_COLL_LPUSH = 70,
    LATTICE_COLL_RPUSH = 71,
    LATTICE_COLL_LPUSHX = 72,
    LATTICE_COLL_RPUSHX = 73,
    LATTICE_COLL_LPOP = 74,       /* [count] */
    LATTICE_COLL_RPOP = 75,
    LATTICE_COLL_LSET = 76,
    LATTICE_COLL_LINSERT = 77,
    LATTICE_COLL_LREM = 78,
    LATTICE_COLL_LTRIM = 79,
    LATTICE_COLL_SADD = 80,
    LATTICE_COLL_SREM = 81,
    LATTICE_COLL_SPOP = 82,       /* [count]: what it removed travels as the new value */
    LATTICE_COLL_ZADD = 83,
    LATTICE_COLL_ZINCRBY = 84,
    LATTICE_COLL_ZREM = 85,
    LATTICE_COLL_ZREMRANGEBYRANK = 86,
    LATTICE_COLL_ZREMRANGEBYSCORE = 87,
    LATTICE_COLL_ZREMRANGEBYLEX = 88,
    LATTICE_COLL_ZPOPMIN = 89,
    LATTICE_COLL_ZPOPMAX = 90,
    LATTICE_COLL_GEOADD = 91,     /* [NX|XX] [CH] lon lat member ...: ZADD of their geohashes */
    LATTICE_COLL_CMD_MAX_ = 91,
} lattice_coll_cmd;

/* The commands over several keys of one partition (LATTICE_TXN_SETOP of
 * lattice/txn.h runs them; docs/TYPES.md).  On the wire: stable. */
typedef enum lattice_setop {
    LATTICE_SETOP_SINTER = 1,
    LATTICE_SETOP_SINTERSTORE = 2,
    LATTICE_SETOP_SINTERCARD = 3,
    LATTICE_SETOP_SUNION = 4,
    LATTICE_SETOP_SUNIONSTORE = 5,
    LATTICE_SETOP_SDIFF = 6,
    LATTICE_SETOP_SDIFFSTORE = 7,
    LATTICE_SETOP_SMOVE = 8,
    LATTICE_SETOP_ZUNION = 9,
    LATTICE_SETOP_ZUNIONSTORE = 10,
    LATTICE_SETOP_ZINTER = 11,
    LATTICE_SETOP_ZINTERSTORE = 12,
    LATTICE_SETOP_ZINTERCARD = 13,
    LATTICE_SETOP_ZDIFF = 14,
    LATTICE_SETOP_ZDIFFSTORE = 15,
    LATTICE_SETOP_ZRANGESTORE = 16,
    LATTICE_SETOP_GEORADIUS = 17,         /* GEORADIUS ... STORE|STOREDIST k: args[0] the store key, then GEORADIUS's */
    LATTICE_SETOP_GEORADIUSBYMEMBER = 18, /* the same for GEORADIUSBYMEMBER */
    LATTICE_SETOP_GEOSEARCHSTORE = 19,
    LATTICE_SETOP_MAX_ = 19,
} lattice_setop;

typedef struct lattice_coll_arg {
    const void *ptr;
    size_t len;
} lattice_coll_arg;

static inline bool lattice_coll_is_write(int cmd) { return cmd >= LATTICE_COLL_WRITES_; }

static inline void lattice_coll_put_u32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)v;
    p[1] = (unsigned char)(v >> 8);
    p[2] = (unsigned char)(v >> 16);
    p[3] = (unsigned char)(v >> 24);
}
static inline uint32_t lattice_coll_get_u32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Bytes the packed form of a[0..n) takes. */
static inline size_t lattice_coll_packed_len(const lattice_coll_arg *a, size_t n)
{
    size_t t = 4;
    for (size_t i = 0; i < n; i++) t += 4 + a[i].len;
    return t;
}

/* Packs a[0..n) into buf; its length, or 0 when cap is too small. */
static inline size_t lattice_coll_pack(void *buf, size_t cap, const lattice_coll_arg *a, size_t n)
{
    size_t need = lattice_coll_packed_len(a, n), off = 4;
    if (need > cap || n > UINT32_MAX) return 0;
    unsigned char *p = (unsigned char *)buf;
    lattice_coll_put_u32(p, (uint32_t)n);
    for (size_t i = 0; i < n; i++) {
        lattice_coll_put_u32(p + off, (uint32_t)a[i].len);
        if (a[i].len) memcpy(p + off + 4, a[i].ptr, a[i].len);
        off += 4 + a[i].len;
    }
    return need;
}

/* The argument count of a packed value; false when it is malformed (short,
 * a length past its end, bytes left over). */
static inline bool lattice_coll_unpacked_count(const void *buf, size_t len, size_t *n)
{
    const unsigned char *p = (const unsigned char *)buf;
    if (len < 4) return false;
    uint32_t c = lattice_coll_get_u32(p);
    size_t off = 4;
    for (uint32_t i = 0; i < c; i++) {
        if (len - off < 4) return false;
        uint32_t l = lattice_coll_get_u32(p + off);
        if (len - off - 4 < l) return false;
        off += 4 + (size_t)l;
    }
    if (off != len) return false;
    *n = c;
    return true;
}

/* The next argument at *off (start at 4) of a value lattice_coll_unpacked_count accepted. */
static inline lattice_coll_arg lattice_coll_unpack_next(const void *buf, size_t *off)
{
    const unsigned char *p = (const unsigned char *)buf + *off;
    lattice_coll_arg a = {p + 4, lattice_coll_get_u32(p)};
    *off += 4 + a.len;
    return a;
}

static inline lattice_op lattice_op_coll(const char *cache, lattice_coll_cmd cmd, const void *key, size_t key_len,
                                         const void *packed, size_t packed_len)
{
    lattice_op o = {lattice_coll_is_write(cmd) ? LATTICE_OP_COLL_WRITE : LATTICE_OP_COLL_READ, 0, cache, key,
                    key_len, packed, packed_len, cmd, 0, 0};
    return o;
}

/* One element of a reply: its type byte ('+', '-', ':', '$', ',', '*',
 * '%', '~', '&', '_'), for '+', '-', '$', ',' the bytes, for ':' the
 * integer, for '*', '%', '~' and '&' the count (the elements follow: 2 x count for '%' and '&'). */
typedef struct lattice_coll_elem {
    char type;
    const char *ptr;
    size_t len;
    long long num;
} lattice_coll_elem;

/* Reads the element at *off of a reply of len bytes: 1 and *off past it,
 * 0 at the end, -1 when malformed. */
static inline int lattice_coll_reply_next(const void *reply, size_t len, size_t *off, lattice_coll_elem *e)
{
    const char *p = (const char *)reply, *end = p + len, *q = p + *off;
    if (q >= end) return 0;
    const char *nl = (const char *)memchr(q, '\n', (size_t)(end - q));
    if (!nl || nl == q + 1 || nl[-1] != '\r') return -1;
    e->type = *q;
    e->ptr = q + 1;
    e->len = (size_t)(nl - 1 - (q + 1));
    e->num = 0;
    const char *after = nl + 1;
    switch (e->type) {
    case '+':
    case '-':
    case ',':
    case '_': break;
    case ':':
    case '$':
    case '*':
    case '%':
    case '~':
    case '&': {
        unsigned long long v = 0;
        bool neg = false;
        const char *d = q + 1;
        if (d < nl - 1 && *d == '-') {
            neg = true;
            d++;
        }
        if (d >= nl - 1) return -1;
        for (; d < nl - 1; d++) {
            if (*d < '0' || *d > '9' || v > (~0ull - 9) / 10) return -1;
            v = v * 10 + (unsigned)(*d - '0');
        }
        if (v > (neg ? 1ull << 63 : (1ull << 63) - 1)) return -1;
        e->num = neg ? (long long)(0ull - v) : (long long)v;
        if (e->type == '$') {
            if (e->num < 0 || (size_t)(end - after) < (size_t)e->num + 2) return -1;
            e->ptr = after;
            e->len = (size_t)e->num;
            after += e->len + 2;
        } else if (e->type != ':' && e->num < 0 && !(e->type == '*' && e->num == -1)) {
            return -1;
        }
        break;
    }
    default: return -1;
    }
    *off = (size_t)(after - p);
    return 1;
}

#endif
