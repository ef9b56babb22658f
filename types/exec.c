/*
 * exec: one operation executed on a node's store - the value semantics of
 * every kind of lattice/ops.h, in one place (types/types.h).  The primary
 * runs an op here (ops/primary.c), a backup answering a read from its
 * clean copy too (ops/issue.c), a transaction each of its sub-operations
 * (ops/txn.c); a copy applies a replicated write with exec_replicate.
 *
 * The caller is a partition's one writer: a read-modify-write (increment,
 * append, NX/XX) is atomic because nothing else writes the partition
 * meanwhile (copies' replicated writes come from the one primary).  Every
 * write takes the partition's next update counter and reports the
 * replication it needs (repl_out).  Before any change of a partition's rows
 * the cache's before_change hook runs (ops/fast.c: readers on other
 * threads).  No network, no thread of its own: tests/unit/types.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lattice/alloc.h"
#include "lattice/clock.h"
#include "types.h"

void exec_scratch_free(exec_scratch *s)
{
    lt_free(s->old);
    lt_free(s->buf);
    lt_free(s->reply);
    lt_free(s->items);
    memset(s, 0, sizeof *s);
}

static bool scratch_reserve(exec_scratch *s, size_t n)
{
    if (n <= s->buf_cap && s->buf) return true;
    void *b = lt_realloc(s->buf, n ? n : 1);
    if (!b) return false;
    s->buf = b;
    s->buf_cap = n ? n : 1;
    return true;
}

/* Reads the live entry into s->old: OK, NOT_FOUND, or an error. */
static int read_old(lattice_meta_cache *c, const exec_in *in, exec_scratch *s, lattice_store_meta *meta)
{
    lt_free(s->old);
    s->old = NULL;
    return lattice_store_get_copy(c->store, in->partition, in->key, in->key_len, &s->old, meta);
}

static uint64_t expiry_for(const lattice_meta_cache *c, uint64_t ttl_ms)
{
    uint64_t ttl = ttl_ms ? ttl_ms : c->cfg.expiry_ms;
    return ttl ? lt_wall_ms() + ttl : 0;
}

/* The live entry read holds a value of another type than a string: every
 * string kind refuses it (Redis's WRONGTYPE) and changes nothing. */
static bool wrong_type(int st, const lattice_store_meta *meta, lattice_op_result *r)
{
    if (st != LATTICE_OK || meta->type == LATTICE_TYPE_STRING) return false;
    r->status = LATTICE_ERR_WRONGTYPE;
    r->flags |= LATTICE_OP_R_FOUND | LATTICE_OP_R_TYPE_FLAGS(meta->type);
    r->value = NULL;
    r->value_len = 0;
    return true;
}

bool exec_wrong_type(int st, const lattice_store_meta *meta, lattice_op_result *r) { return wrong_type(st, meta, r); }

/* Writes (key, value of type, expire) with the next counter and fills repl. */
int exec_write_typed(lattice_meta_cache *c, const exec_in *in, const void *v, size_t vlen, uint64_t expire,
                       uint8_t type, repl_out *repl)
{
    /* The counter moves only with a write that happened: a refused one
     * (a full region) is not replicated, so the copies' counters would
     * otherwise lag behind the primary's (`lattice verify` compares them). */
    uint64_t version = c->counter[in->partition] + 1;
    lattice_store_entry e = {in->partition, in->key, in->key_len, v, vlen, expire, version, type};
    if (c->before_change) c->before_change(c, in->partition); /* before the rows change: inline readers (ops/fast.c) */
    int st = lattice_store_put(c->store, &e, 0);
    if (st != LATTICE_OK) return st;
    c->counter[in->partition] = version;
    c->writes++;
    *repl = (repl_out){true, false, v, vlen, expire, version, type};
    return LATTICE_OK;
}

/* Every kind of lattice/ops.h writes a string (a PUT over a value of
 * another type replaces it, as Redis's SET), except EXPIRE (below). */
int exec_write_entry(lattice_meta_cache *c, const exec_in *in, const void *v, size_t vlen, uint64_t expire,
                     repl_out *repl)
{
    return exec_write_typed(c, in, v, vlen, expire, LATTICE_TYPE_STRING, repl);
}

/* For the read-modify-write kinds of rmw.c. */
bool exec_scratch_reserve(exec_scratch *s, size_t n) { return scratch_reserve(s, n); }
int exec_read_old(lattice_meta_cache *c, const exec_in *in, exec_scratch *s, lattice_store_meta *meta)
{
    return read_old(c, in, s, meta);
}
uint64_t exec_expiry_for(const lattice_meta_cache *c, uint64_t ttl_ms) { return expiry_for(c, ttl_ms); }

bool exec_parse_i64(const void *v, size_t n, int64_t *out)
{
    char tmp[32];
    if (n == 0 || n >= sizeof tmp || memchr(v, 0, n)) return false; /* "1\0" is no integer (Redis's string2ll) */
    memcpy(tmp, v, n);
    tmp[n] = 0;
    /* Redis's rule: the canonical decimal form only (no sign '+', blanks or
     * leading zeros), so INCR on "01" or " 1" is an error as in Redis. */
    if (!(tmp[0] == '-' || (tmp[0] >= '0' && tmp[0] <= '9')) || (tmp[0] == '0' && n > 1) || (tmp[0] == '-' && (n == 1 || tmp[1] == '0'))) return false;
    char *end;
    errno = 0;
    long long x = strtoll(tmp, &end, 10);
    if (errno || *end || end == tmp) return false;
    *out = x;
    return true;
}

static void do_put(lattice_meta_cache *c, const exec_in *in, exec_scratch *s, lattice_op_result *r, repl_out *repl)
{
    lattice_store_meta meta = {0};
    bool need_old = in->flags & (LATTICE_OP_NX | LATTICE_OP_XX | LATTICE_OP_RETURN_OLD | LATTICE_OP_KEEP_TTL);
    bool found = false;
    if (need_old) {
        int st = read_old(c, in, s, &meta);
        if (st != LATTICE_OK && st != LATTICE_ERR_NOT_FOUND) {
            r->status = st;
            return;
        }
        found = st == LATTICE_OK;
        /* SET ... GET (and GETSET) read the old value as a string. */
        if ((in->flags & LATTICE_OP_RETURN_OLD) && wrong_type(st, &meta, r)) return;
    }
    if (found) r->flags |= LATTICE_OP_R_FOUND;
    if (found && (in->flags & LATTICE_OP_RETURN_OLD)) {
        r->value = s->old;
        r->value_len = meta.value_len;
    }
    if ((in->flags & LATTICE_OP_NX) && found) {
        r->status = LATTICE_ERR_EXISTS;
        return;
    }
    if ((in->flags & LATTICE_OP_XX) && !found) {
        r->status = LATTICE_ERR_NOT_FOUND;
        return;
    }
    uint64_t expire = (in->flags & LATTICE_OP_KEEP_TTL) && found ? meta.expire_ms : expiry_for(c, in->ttl_ms);
    r->status = exec_write_entry(c, in, in->value, in->value_len, expire, repl);
}

static void do_remove(lattice_meta_cache *c, const exec_in *in, exec_scratch *s, lattice_op_result *r, repl_out *repl)
{
    if (in->flags & LATTICE_OP_RETURN_OLD) {
        lattice_store_meta meta = {0};
        int st = read_old(c, in, s, &meta);
        if (wrong_type(st, &meta, r)) return; /* GETDEL: WRONGTYPE, nothing removed */
        if (st == LATTICE_OK) {
            r->value = s->old;
            r->value_len = meta.value_len;
            r->flags |= LATTICE_OP_R_FOUND;
        }
    }
    r->status = exec_remove_entry(c, in, repl);
    if (r->status == LATTICE_OK) r->flags |= LATTICE_OP_R_FOUND;
}

int exec_remove_entry(lattice_meta_cache *c, const exec_in *in, repl_out *repl)
{
    if (c->before_change) c->before_change(c, in->partition);
    /* The counter moves before the store's remove, so the log's REMOVE
     * record and the update history carry it; back when nothing went. */
    uint64_t version = ++c->counter[in->partition];
    int st = lattice_store_remove_v(c->store, in->partition, in->key, in->key_len, version);
    if (st != LATTICE_OK) {
        c->counter[in->partition] = version - 1;
        return st;
    }
    c->writes++;
    *repl = (repl_out){true, true, NULL, 0, 0, version, 0};
    return LATTICE_OK;
}

static void do_increment(lattice_meta_cache *c, const exec_in *in, exec_scratch *s, lattice_op_result *r, repl_out *repl)
{
    lattice_store_meta meta = {0};
    int st = read_old(c, in, s, &meta);
    int64_t cur = 0;
    if (wrong_type(st, &meta, r)) return;
    if (st == LATTICE_OK) {
        if (!exec_parse_i64(s->old, meta.value_len, &cur)) {
            r->status = LATTICE_ERR_INVAL; /* not an integer: nothing changes */
            return;
        }
    } else if (st != LATTICE_ERR_NOT_FOUND) {
        r->status = st;
        return;
    }
    int64_t next;
    if (__builtin_add_overflow(cur, in->delta, &next)) {
        r->status = LATTICE_ERR_INVAL;
        return;
    }
    if (!scratch_reserve(s, 24)) {
        r->status = LATTICE_ERR_NOMEM;
        return;
    }
    int len = snprintf(s->buf, 24, "%" PRId64, next);
    r->status = exec_write_entry(c, in, s->buf, (size_t)len, st == LATTICE_OK ? meta.expire_ms : expiry_for(c, 0), repl);
    r->num = next;
}

static void do_append(lattice_meta_cache *c, const exec_in *in, exec_scratch *s, lattice_op_result *r, repl_out *repl)
{
    lattice_store_meta meta = {0};
    int st = read_old(c, in, s, &meta);
    if (wrong_type(st, &meta, r)) return;
    if (st != LATTICE_OK && st != LATTICE_ERR_NOT_FOUND) {
        r->status = st;
        return;
    }
    size_t old_len = st == LATTICE_OK ? meta.value_len : 0;
    size_t n = old_len + in->value_len;
    if (n > c->cfg.max_value_bytes) {
        r->status = LATTICE_ERR_TOO_LARGE;
        return;
    }
    if (!scratch_reserve(s, n)) {
        r->status = LATTICE_ERR_NOMEM;
        return;
    }
    if (old_len) memcpy(s->buf, s->old, old_len);
    if (in->value_len) memcpy((char *)s->buf + old_len, in->value, in->value_len);
    r->status = exec_write_entry(c, in, s->buf, n, st == LATTICE_OK ? meta.expire_ms : expiry_for(c, 0), repl);
    r->num = (int64_t)n;
}

static void do_expire(lattice_meta_cache *c, const exec_in *in, exec_scratch *s, lattice_op_result *r, repl_out *repl)
{
    lattice_store_meta meta = {0};
    int st = read_old(c, in, s, &meta);
    if (st != LATTICE_OK) {
        r->status = st;
        return;
    }
    r->flags |= LATTICE_OP_R_FOUND;
    /* Any type expires: the entry keeps its value and type. */
    r->status = exec_write_typed(c, in, s->old, meta.value_len, in->ttl_ms ? lt_wall_ms() + in->ttl_ms : 0, meta.type,
                            repl);
}

static void do_read(lattice_meta_cache *c, const exec_in *in, exec_scratch *s, lattice_op_result *r)
{
    lattice_store_meta meta = {0};
    int st = read_old(c, in, s, &meta);
    c->reads++;
    if (st == LATTICE_OK) c->hits++;
    else if (st == LATTICE_ERR_NOT_FOUND) c->misses++;
    if (in->kind == LATTICE_OP_GET && (in->flags & LATTICE_OP_ANY_TYPE) && st == LATTICE_OK) {
        uint8_t type = meta.type; /* answered as a string's would be, with its own type in the flags */
        meta.type = LATTICE_TYPE_STRING;
        exec_read_answer(in->kind, st, s->old, &meta, r);
        r->flags = (r->flags & ~LATTICE_OP_R_TYPE_MASK) | LATTICE_OP_R_TYPE_FLAGS(type);
        return;
    }
    exec_read_answer(in->kind, st, s->old, &meta, r);
}

void exec_read_answer(int kind, int st, const void *val, const lattice_store_meta *meta, lattice_op_result *r)
{
    if (st == LATTICE_OK) r->flags |= LATTICE_OP_R_TYPE_FLAGS(meta->type);
    switch (kind) {
    case LATTICE_OP_GET:
        if (wrong_type(st, meta, r)) break;
        r->status = st;
        if (st == LATTICE_OK) {
            r->value = val;
            r->value_len = meta->value_len;
            r->flags |= LATTICE_OP_R_FOUND;
            r->num = (int64_t)meta->expire_ms; /* what a transaction's read carries over (node/txexec.c) */
        }
        break;
    case LATTICE_OP_CONTAINS:
        r->status = st == LATTICE_ERR_NOT_FOUND ? LATTICE_OK : st;
        r->num = st == LATTICE_OK;
        break;
    default: /* TTL */
        r->status = st;
        if (st == LATTICE_OK) {
            uint64_t now = lt_wall_ms();
            r->num = meta->expire_ms == 0 ? -1 : meta->expire_ms > now ? (int64_t)(meta->expire_ms - now) : 0;
        }
        break;
    }
}

void exec_local(lattice_meta_cache *c, const exec_in *in, exec_scratch *s, lattice_op_result *r, repl_out *repl)
{
    memset(r, 0, sizeof *r);
    memset(repl, 0, sizeof *repl);
    if (!c->store) {
        r->status = LATTICE_ERR_NOT_OWNER;
        return;
    }
    switch (in->kind) {
    case LATTICE_OP_GET:
    case LATTICE_OP_CONTAINS:
    case LATTICE_OP_TTL: do_read(c, in, s, r); break;
    case LATTICE_OP_PUT: do_put(c, in, s, r, repl); break;
    case LATTICE_OP_REMOVE: do_remove(c, in, s, r, repl); break;
    case LATTICE_OP_INCREMENT: do_increment(c, in, s, r, repl); break;
    case LATTICE_OP_APPEND: do_append(c, in, s, r, repl); break;
    case LATTICE_OP_EXPIRE: do_expire(c, in, s, r, repl); break;
    case LATTICE_OP_SETRANGE: exec_setrange(c, in, s, r, repl); break;
    case LATTICE_OP_SETBIT: exec_setbit(c, in, s, r, repl); break;
    case LATTICE_OP_INCRBYFLOAT: exec_incrbyfloat(c, in, s, r, repl); break;
    case LATTICE_OP_COLL_READ:
    case LATTICE_OP_COLL_WRITE: exec_coll(c, in, s, r, repl); break;
    default: r->status = LATTICE_ERR_INVAL; break;
    }
}

/* ------------------------------------------------------------ a copy */

lattice_status exec_replicate(lattice_meta_cache *c, uint32_t partition, const void *key, size_t key_len,
                              const void *value, size_t value_len, uint64_t expire_ms, uint64_t version,
                              bool remove)
{
    return exec_replicate_typed(c, partition, key, key_len, value, value_len, expire_ms, version, remove,
                                LATTICE_TYPE_STRING);
}

lattice_status exec_replicate_typed(lattice_meta_cache *c, uint32_t partition, const void *key, size_t key_len,
                                    const void *value, size_t value_len, uint64_t expire_ms, uint64_t version,
                                    bool remove, uint8_t type)
{
    if (!c->store || partition >= c->cfg.partitions || key_len == 0) return LATTICE_ERR_INVAL;
    if (c->counter[partition] < version) c->counter[partition] = version;
    if (c->before_change) c->before_change(c, partition); /* before the rows change */
    if (remove) {
        /* As a put, a remove changes nothing over a newer write: one that
         * arrives again (resent after a lost connection, sync_wait.c)
         * after a later put of its key must not delete that put.  The
         * history still counts its counter as applied (the key's newer
         * state is the one a delta sends). */
        lattice_store_meta m = {0};
        int g = lattice_store_get(c->store, partition, key, key_len, NULL, 0, &m);
        if ((g == LATTICE_OK || g == LATTICE_ERR_TOO_LARGE) && m.version > version) {
            lattice_store_history_note(c->store, partition, key, key_len, version, false);
            return LATTICE_OK;
        }
        int st = lattice_store_remove_v(c->store, partition, key, key_len, version);
        /* Absent here (a loading copy): the history still hears of it, so a
         * kept copy taken in later cannot bring the key back (rebal_exec.c). */
        if (st == LATTICE_ERR_NOT_FOUND) lattice_store_history_note(c->store, partition, key, key_len, version, true);
        return st == LATTICE_ERR_NOT_FOUND ? LATTICE_OK : st;
    }
    if (type > LATTICE_STORE_TYPE_MAX) return LATTICE_ERR_INVAL;
    lattice_store_entry e = {partition, key, key_len, value, value_len, expire_ms, version, type};
    int st = lattice_store_put(c->store, &e, LATTICE_STORE_IF_NEWER);
    if (st != LATTICE_ERR_EXISTS) return st;
    /* An older write arriving late changes nothing; the history still counts
     * its counter as applied here (the key's newer state is the one a delta
     * sends), or the copy's contiguous counter would stop at it. */
    lattice_store_history_note(c->store, partition, key, key_len, version, false);
    return LATTICE_OK;
}
