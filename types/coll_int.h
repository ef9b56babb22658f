/*
 * types/coll_int.h: what coll.c (the collection commands' frame: arguments,
 * the key's value, the reply, the write) gives the files of each type
 * (hash.c).  Internal to types/.
 */
#ifndef LATTICE_TYPES_COLL_INT_H
#define LATTICE_TYPES_COLL_INT_H

#include <string.h>

#include "lattice/coll.h"
#include "types.h"

/* One command being executed. */
typedef struct coll_ctx {
    lattice_meta_cache *c;
    const exec_in *in;
    exec_scratch *s;
    lattice_op_result *r;
    repl_out *repl;
    int cmd;                   /* lattice_coll_cmd */
    const char *name;          /* its name in Redis's error texts ("hset") */
    size_t argc;               /* arguments after the key */
    lattice_coll_arg *argv;    /* in s->items, then the decoded elements after them */
    bool found;                /* coll_load: the key holds a value of the type */
    lattice_store_meta meta;   /* ... and its meta (expiry) */
    bool nomem;                /* a reply or row could not grow: NOMEM */
} coll_ctx;

/* Reads the key's value into s->old: false (r answered: WRONGTYPE, or the
 * store's error) unless it holds a value of type or nothing (x->found). */
bool coll_load(coll_ctx *x, uint8_t type);
/* The key's type when it is live: 0 none, else its lattice_value_type + 1
 * (*st the store's error, else OK). */
int coll_live_type(lattice_meta_cache *c, uint32_t partition, const void *key, size_t len, int *st);
/* Redis's string2d (ZADD's scores, ZUNIONSTORE's weights): strtod over
 * the whole text; not "", not a blank first, not NaN, not an overflow or
 * an underflow to 0.  1 with *out, 0 not a float, -1 memory short. */
int coll_parse_double(const lattice_coll_arg *a, double *out);
/* Room for n more elements after the arguments in s->items (they may
 * move: x->argv follows); the first of them, NULL (x->nomem) without. */
void *coll_items(coll_ctx *x, size_t n, size_t elem);
/* A buffer of n bytes for the new row (s->buf), NULL (x->nomem) without. */
void *coll_row(coll_ctx *x, size_t n);
/* Writes the new row of type (s->buf, n bytes; TOO_LARGE past the cache's
 * max_value_bytes) keeping the key's expiry (a new key: the cache's); or
 * removes the key (an emptied collection).  False: r->status says why. */
bool coll_write(coll_ctx *x, size_t n, uint8_t type);
bool coll_remove(coll_ctx *x);

/* The reply (s->reply), RESP3 as lattice/coll.h describes it. */
void coll_simple(coll_ctx *x, const char *s);
/* n bytes already in the reply's framing (a reply read back, spliced in). */
void coll_raw(coll_ctx *x, const void *p, size_t n);
void coll_error(coll_ctx *x, const char *s); /* s without the leading '-' */
void coll_int(coll_ctx *x, long long v);
void coll_bulk(coll_ctx *x, const void *p, size_t n);
void coll_null(coll_ctx *x);
void coll_null_array(coll_ctx *x); /* RESP2's *-1 (RESP3 _): LPOP k n of no list */
void coll_array(coll_ctx *x, size_t n);
void coll_map(coll_ctx *x, size_t n);
void coll_set(coll_ctx *x, size_t n); /* RESP3's set of n (SMEMBERS), RESP2's array */
/* n pairs follow (2 x n replies): RESP3 shows n arrays of two, RESP2 one
 * flat array (HRANDFIELD ... WITHVALUES). */
void coll_pairs(coll_ctx *x, size_t n);
/* A double as Redis replies one (addReplyDouble: "%.17g", inf, -inf):
 * RESP3's double, RESP2's bulk string. */
void coll_double(coll_ctx *x, double d);
/* Redis's error for a wrong argument count of the command. */
void coll_arity_error(coll_ctx *x);
#define COLL_ERR_SYNTAX "ERR syntax error"
#define COLL_ERR_NOT_INT "ERR value is not an integer or out of range"
#define COLL_ERR_LONG_RANGE "ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807"

/* Little-endian base-128 integers of the rows. */
static inline size_t coll_varint_put(unsigned char *p, uint64_t v)
{
    size_t n = 0;
    while (v >= 0x80) {
        p[n++] = (unsigned char)(v | 0x80);
        v >>= 7;
    }
    p[n++] = (unsigned char)v;
    return n;
}
static inline size_t coll_varint_len(uint64_t v)
{
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}
/* Reads one at *off of len bytes; false when cut short or over 10 bytes. */
static inline bool coll_varint_get(const unsigned char *p, size_t len, size_t *off, uint64_t *v)
{
    uint64_t r = 0;
    for (unsigned shift = 0; shift < 64 && *off < len; shift += 7) {
        unsigned char b = p[(*off)++];
        r |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *v = r;
            return true;
        }
    }
    return false;
}

/* A row of a collection: a format byte, a varint count, then the items.
 * coll_row_open reads the loaded value's header (no key: an empty row);
 * coll_row_bytes the next (varint length, bytes) item, coll_row_fixed the
 * next n bytes; coll_row_close checks nothing is left over.  Each false:
 * r->status is LATTICE_ERR_PROTO (a malformed row answers, never crashes). */
typedef struct coll_reader {
    const unsigned char *p;
    size_t len, off;
    size_t count;
} coll_reader;
bool coll_row_open(coll_ctx *x, uint8_t format, coll_reader *w);
bool coll_row_bytes(coll_ctx *x, coll_reader *w, const char **p, size_t *n);
bool coll_row_fixed(coll_ctx *x, coll_reader *w, size_t n, const unsigned char **p);
bool coll_row_close(coll_ctx *x, const coll_reader *w);
/* Writing one: coll_row_start gives the buffer of a row of count items
 * whose bytes after the header take body (each (length, bytes) item
 * coll_item_len of its length), the header written, the body's first byte
 * returned (NULL: r->status NOMEM); coll_item_put writes one item and
 * returns the byte after it.  Then coll_write(x, coll_row_size(count,
 * body), type). */
static inline size_t coll_item_len(size_t n) { return coll_varint_len(n) + n; }
static inline size_t coll_row_size(size_t count, size_t body) { return 1 + coll_varint_len(count) + body; }
unsigned char *coll_row_start(coll_ctx *x, uint8_t format, size_t count, size_t body);
static inline unsigned char *coll_item_put(unsigned char *p, const void *b, size_t n)
{
    p += coll_varint_put(p, n);
    if (n) memcpy(p, b, n);
    return p + n;
}

/* A hash index of a command's table of elements (slot: i + 1, 0 empty),
 * for a command that looks many elements up in a big collection (SADD of
 * many members, HSET of many fields ...): key(tab, i) gives element i's
 * bytes.  coll_index_worth says whether lookups in a table of n pays for
 * building one; coll_index_build makes one with room for cap elements
 * (false: r->status NOMEM); coll_index_find answers the first element of
 * those bytes along its probe chain, or n (with no index: a linear scan). */
typedef struct coll_index {
    size_t *slot; /* NULL: no index */
    size_t mask;
} coll_index;
typedef struct coll_bytes {
    const char *p;
    size_t n;
} coll_bytes;
typedef coll_bytes (*coll_key_fn)(const void *tab, size_t i);
#define COLL_INDEX_WORK 256 /* lookups x elements above which lookups are hashed */
static inline bool coll_index_worth(size_t lookups, size_t n) { return lookups >= 2 && lookups * (n + 1) > COLL_INDEX_WORK; }
bool coll_index_build(coll_ctx *x, coll_index *ix, const void *tab, size_t n, size_t cap, coll_key_fn key);
void coll_index_add(coll_index *ix, const void *tab, size_t i, coll_key_fn key);
size_t coll_index_find(const coll_index *ix, const void *tab, size_t n, const void *p, size_t len, coll_key_fn key);
void coll_index_free(coll_index *ix);

/* The commands of each type: hash.c (LATTICE_COLL_H*), list.c (L*, R*),
 * set.c (S*), zset.c (Z*), geo.c (GEO*, on sorted sets). */
void hash_run(coll_ctx *x);
void list_run(coll_ctx *x);
void set_run(coll_ctx *x);
void zset_run(coll_ctx *x);
void geo_run(coll_ctx *x);

/* A sorted set's member with its score, in the set's order (zset.c). */
typedef struct zent {
    double score;
    const char *m;
    size_t ml;
    bool gone; /* ZREM: removed */
} zent;
/* The key's sorted set for another file of types/ (geo.c): its members in
 * order, the table the first thing in the items after the arguments (a
 * caller that asks coll_items for more finds it at the start of what it
 * gets); an absent key: x->found false, none.  NULL with r->status set
 * (WRONGTYPE, a malformed row, memory short). */
const zent *zset_members(coll_ctx *x, size_t *n);
/* *SCAN key cursor [MATCH pattern] [COUNT count] (x->argv[0] the cursor):
 * the cursor, checked before the key is read ("ERR invalid cursor"); an
 * absent key's answer; the options, checked after it was found, with the
 * pattern (NULL: match all) NUL-ended in *pattern (lt_free it), its
 * length (it may hold a NUL) in *plen.  False:
 * the error is the reply (or r->status NOMEM). */
bool coll_scan_cursor(coll_ctx *x);
void coll_empty_scan(coll_ctx *x);
bool coll_scan_options(coll_ctx *x, char **pattern, size_t *plen);
/* The argument is s, case-insensitively, up to a NUL it holds (an
 * option's name as Redis's strcasecmp sees it). */
bool coll_is(const lattice_coll_arg *a, const char *s);
/* An integer argument (Redis's string2ll: the canonical int64 text). */
bool coll_arg_ll(const lattice_coll_arg *a, long long *v);
/* HRANDFIELD's and ZRANDMEMBER's [count [WITHVALUES|WITHSCORES]] (with the
 * option's name), checked before the key as Redis: false when the reply is
 * the error. */
bool coll_rand_args(coll_ctx *x, const char *with, bool *counted, long long *count, bool *with_set);
/* A random 64-bit number (xorshift, per thread): HRANDFIELD, SPOP ... */
uint64_t coll_rand(void);

#endif
