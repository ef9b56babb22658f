/*
 * respd: the string and keyspace commands built on the ops API beyond the
 * first set - SETEX, PSETEX, SETNX, GETSET, GETEX, UNLINK, TOUCH, TYPE,
 * EXPIREAT, PEXPIREAT, EXPIRETIME, PEXPIRETIME, GETRANGE/SUBSTR, GETBIT,
 * BITCOUNT, BITPOS, LCS.  Each becomes one or two ops of one key (several
 * ops of one key go to its primary in one message, in order) - LCS: a GET of
 * each key, of one slot for cluster clients (CROSSSLOT otherwise), so both
 * go to one primary in one message; the reading ones compute their reply
 * from the values when the batch comes back.  Argument checks and error
 * texts follow Redis 7.0's t_string.c, expire.c, bitops.c and db.c, in their
 * order: a bad integer is refused before the key is read, except where Redis
 * reads the key first (BITPOS's range: a missing key answers before it is
 * parsed), which is kept as a flag for the reply.
 */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "lattice/alloc.h"
#include "lattice/clock.h"
#include "respd_int.h"

#define RANGE_BIT 0x1u          /* BITCOUNT ... BIT */
#define RANGE_GIVEN 0x2u        /* BITCOUNT with start and end */
#define GETEX_PERSIST 0x1u
#define GETEX_EXPIRE 0x2u
#define BITPOS_ONE 0x4u         /* BITPOS looks for a set bit */
#define BITPOS_END 0x8u         /* BITPOS with an end */
#define BITPOS_BAD_INT 0x10u    /* its range is no integer: the reply if the key exists */
#define BITPOS_BAD_SYNTAX 0x20u /* its arguments are a syntax error: likewise */
#define LCS_LEN 0x1u
#define LCS_IDX 0x2u
#define LCS_WITHMATCHLEN 0x4u

bool respd_is_str_command(lattice_resp_cmd_id id)
{
    return id >= LATTICE_RESP_CMD_SETEX && id <= LATTICE_RESP_CMD_LCS;
}

static bool eq(const lattice_resp_arg *a, const char *s)
{
    size_t n = strlen(s);
    return a->len == n && strncasecmp(a->ptr, s, n) == 0;
}

#define OOM_TEXT "OOM command not allowed when used memory > 'maxmemory'."

/* The command helpers below return true when their ops are in the batch,
 * or false with the error reply in err (LATTICE_RESP_ERR_MAX bytes). */
static bool fail(char *err, const char *msg)
{
    snprintf(err, LATTICE_RESP_ERR_MAX, "%s", msg);
    return false;
}

static bool added(bool ok, char *err) { return ok || fail(err, OOM_TEXT); }

/* Redis's getExpireMillisecondsOrReply: a relative or absolute time in
 * unit_ms into absolute Unix ms; 0 = not an integer, -1 = invalid. */
static int expire_at(const lattice_resp_arg *a, int unit_ms, bool absolute, int64_t now, int64_t *at)
{
    long long v;
    if (!lattice_resp_string2ll(a->ptr, a->len, &v)) return 0;
    if (v <= 0 || (unit_ms == 1000 && v > LLONG_MAX / 1000)) return -1;
    v *= unit_ms;
    if (!absolute) {
        if (v > LLONG_MAX - now) return -1;
        v += now;
    }
    *at = v;
    return 1;
}

/* SETEX/PSETEX key time value: a PUT with that ttl. */
static bool setex(batch *b, ent *e, lattice_resp_cmd_id id, const lattice_resp_arg *argv, char *err)
{
    int64_t now = (int64_t)lt_wall_ms(), at;
    int ok = expire_at(&argv[2], id == LATTICE_RESP_CMD_SETEX ? 1000 : 1, false, now, &at);
    if (ok == 0) return fail(err, LATTICE_RESP_ERR_NOT_INTEGER);
    if (ok < 0) {
        lattice_resp_err_expire(id == LATTICE_RESP_CMD_SETEX ? "setex" : "psetex", err);
        return false;
    }
    return added(respd_op_add(b, e, LATTICE_OP_PUT, 0, &argv[1], &argv[3], 0, (uint64_t)(at - now)), err);
}

/* GETEX key [EX s | PX ms | EXAT t | PXAT ms-t | PERSIST]: Redis's
 * parseExtendedStringArgumentsOrReply for COMMAND_GET (one expiry form,
 * repeated at will, or PERSIST alone), then the value.  A GET, then the
 * expiry change, in one message to the primary. */
static bool getex(batch *b, ent *e, size_t argc, const lattice_resp_arg *argv, char *err)
{
    static const char *const forms[] = {"ex", "px", "exat", "pxat"};
    int form = -1;
    bool persist = false;
    const lattice_resp_arg *val = NULL;
    for (size_t j = 2; j < argc; j++) {
        int f = -1;
        for (int k = 0; k < 4; k++)
            if (eq(&argv[j], forms[k])) f = k;
        if (f >= 0 && j + 1 < argc && !persist && (form < 0 || form == f)) {
            form = f;
            val = &argv[++j];
        } else if (eq(&argv[j], "persist") && form < 0) {
            persist = true;
        } else {
            return fail(err, LATTICE_RESP_ERR_SYNTAX);
        }
    }
    int64_t now = (int64_t)lt_wall_ms(), at = 0;
    if (val) {
        int ok = expire_at(val, form == 0 || form == 2 ? 1000 : 1, form >= 2, now, &at);
        if (ok == 0) return fail(err, LATTICE_RESP_ERR_NOT_INTEGER);
        if (ok < 0) {
            lattice_resp_err_expire("getex", err);
            return false;
        }
    }
    bool ok = respd_op_add(b, e, LATTICE_OP_GET, 0, &argv[1], NULL, 0, 0);
    if (ok && persist) {
        ok = respd_op_add(b, e, LATTICE_OP_EXPIRE, 0, &argv[1], NULL, 0, 0);
    } else if (ok && val && at <= now) { /* an absolute time already past: Redis deletes the key */
        ok = respd_op_add(b, e, LATTICE_OP_REMOVE, 0, &argv[1], NULL, 0, 0);
    } else if (ok && val) {
        ok = respd_op_add(b, e, LATTICE_OP_EXPIRE, 0, &argv[1], NULL, 0, (uint64_t)(at - now));
    }
    return added(ok, err);
}

/* EXPIREAT/PEXPIREAT key time [NX|XX|GT|LT]: EXPIRE's parser with an
 * absolute time (now = 0), its error text named after this command. */
static bool expireat(batch *b, ent *e, lattice_resp_cmd_id id, size_t argc, const lattice_resp_arg *argv, char *err)
{
    lattice_resp_expire_opts xo;
    bool secs = id == LATTICE_RESP_CMD_EXPIREAT;
    if (lattice_resp_parse_expire(argc, argv, secs ? 1000 : 1, 0, &xo, err) != LATTICE_OK) {
        if (!strncmp(err, "ERR invalid expire time", 23)) lattice_resp_err_expire(secs ? "expireat" : "pexpireat", err);
        return false;
    }
    /* The rest is EXPIRE's: the same entry shape, replied as EXPIRE. */
    e->cmd = LATTICE_RESP_CMD_EXPIRE;
    e->sflags = (uint16_t)xo.flags;
    e->when_ms = xo.when_ms;
    int64_t now = (int64_t)lt_wall_ms();
    bool ok;
    if (xo.flags) {
        ok = respd_op_add(b, e, LATTICE_OP_TTL, 0, &argv[1], NULL, 0, 0);
        if (ok) b->res[e->first].cond_expire = true;
    } else if (xo.when_ms <= now) {
        ok = respd_op_add(b, e, LATTICE_OP_REMOVE, 0, &argv[1], NULL, 0, 0);
    } else {
        ok = respd_op_add(b, e, LATTICE_OP_EXPIRE, 0, &argv[1], NULL, 0, (uint64_t)(xo.when_ms - now));
    }
    return added(ok, err);
}

/* GETRANGE/SUBSTR key start end, BITCOUNT key [start end [BYTE|BIT]]. */
static bool ranged(batch *b, ent *e, size_t argc, const lattice_resp_arg *argv, char *err)
{
    if (argc == 4 || argc == 5) {
        long long s, t;
        if (!lattice_resp_string2ll(argv[2].ptr, argv[2].len, &s) || !lattice_resp_string2ll(argv[3].ptr, argv[3].len, &t))
            return fail(err, LATTICE_RESP_ERR_NOT_INTEGER);
        e->when_ms = s;
        e->arg2 = t;
        e->sflags = RANGE_GIVEN;
        if (argc == 5) {
            if (eq(&argv[4], "bit")) e->sflags |= RANGE_BIT;
            else if (!eq(&argv[4], "byte")) return fail(err, LATTICE_RESP_ERR_SYNTAX);
        }
    } else if (argc != 2) {
        return fail(err, LATTICE_RESP_ERR_SYNTAX); /* BITCOUNT key start */
    }
    return added(respd_op_add(b, e, LATTICE_OP_GET, 0, &argv[1], NULL, 0, 0), err);
}

static bool ll_arg(const lattice_resp_arg *a, long long *v) { return lattice_resp_string2ll(a->ptr, a->len, v); }

/* BITPOS key bit [start [end [BYTE|BIT]]]: bitposCommand's checks.  The bit
 * is checked before the key is read; the range after (kept in sflags). */
static bool bitpos(batch *b, ent *e, size_t argc, const lattice_resp_arg *argv, char *err)
{
    long long bit;
    if (!ll_arg(&argv[2], &bit)) return fail(err, LATTICE_RESP_ERR_NOT_INTEGER);
    if (bit != 0 && bit != 1) return fail(err, "ERR The bit argument must be 1 or 0.");
    unsigned f = bit ? BITPOS_ONE : 0;
    long long start = 0, end = 0;
    if (argc > 6) {
        f |= BITPOS_BAD_SYNTAX;
    } else if (argc >= 4) {
        f |= RANGE_GIVEN;
        if (!ll_arg(&argv[3], &start)) f |= BITPOS_BAD_INT;
        else if (argc == 6 && eq(&argv[5], "bit")) f |= RANGE_BIT;
        else if (argc == 6 && !eq(&argv[5], "byte")) f |= BITPOS_BAD_SYNTAX;
        if (!(f & (BITPOS_BAD_INT | BITPOS_BAD_SYNTAX)) && argc >= 5) {
            if (ll_arg(&argv[4], &end)) f |= BITPOS_END;
            else f |= BITPOS_BAD_INT;
        }
    }
    e->sflags = (uint16_t)f;
    e->when_ms = start;
    e->arg2 = end;
    return added(respd_op_add(b, e, LATTICE_OP_GET, 0, &argv[1], NULL, 0, 0), err);
}

/* LCS key1 key2 [LEN] [IDX] [MINMATCHLEN n] [WITHMATCHLEN]: lcsCommand's
 * option checks (the keys' reads cannot fail in a way Redis's would). */
static bool lcs(batch *b, ent *e, size_t argc, const lattice_resp_arg *argv, char *err)
{
    unsigned f = 0;
    long long minlen = 0;
    for (size_t j = 3; j < argc; j++) {
        if (eq(&argv[j], "idx")) {
            f |= LCS_IDX;
        } else if (eq(&argv[j], "len")) {
            f |= LCS_LEN;
        } else if (eq(&argv[j], "withmatchlen")) {
            f |= LCS_WITHMATCHLEN;
        } else if (eq(&argv[j], "minmatchlen") && j + 1 < argc) {
            if (!ll_arg(&argv[++j], &minlen)) return fail(err, LATTICE_RESP_ERR_NOT_INTEGER);
            if (minlen < 0) minlen = 0;
        } else {
            return fail(err, LATTICE_RESP_ERR_SYNTAX);
        }
    }
    if ((f & LCS_IDX) && (f & LCS_LEN)) return fail(err, "ERR If you want both the length and indexes, please just use IDX.");
    e->sflags = (uint16_t)f;
    e->when_ms = minlen;
    return added(respd_op_add(b, e, LATTICE_OP_GET, 0, &argv[1], NULL, 0, 0) &&
                     respd_op_add(b, e, LATTICE_OP_GET, 0, &argv[2], NULL, 0, 0),
                 err);
}

cmd_outcome respd_str_command(batch *b, lattice_resp_cmd_id id, size_t argc, const lattice_resp_arg *argv)
{
    ent *e = respd_ent_new(b, id);
    if (!e) return b->n_ents ? CMD_BATCHED : CMD_DONE; /* out of memory: the batch fails as a whole */
    size_t ops_before = b->n_ops;
    char err[LATTICE_RESP_ERR_MAX];
    bool ok = true;
    switch (id) {
    case LATTICE_RESP_CMD_SETEX:
    case LATTICE_RESP_CMD_PSETEX: ok = setex(b, e, id, argv, err); break;
    case LATTICE_RESP_CMD_SETNX:
        ok = added(respd_op_add(b, e, LATTICE_OP_PUT, LATTICE_OP_NX, &argv[1], &argv[2], 0, 0), err);
        break;
    case LATTICE_RESP_CMD_GETSET:
        ok = added(respd_op_add(b, e, LATTICE_OP_PUT, LATTICE_OP_RETURN_OLD, &argv[1], &argv[2], 0, 0), err);
        break;
    case LATTICE_RESP_CMD_GETEX: ok = getex(b, e, argc, argv, err); break;
    case LATTICE_RESP_CMD_UNLINK:
    case LATTICE_RESP_CMD_TOUCH:
        for (size_t i = 1; ok && i < argc; i++)
            ok = added(respd_op_add(b, e, id == LATTICE_RESP_CMD_UNLINK ? LATTICE_OP_REMOVE : LATTICE_OP_CONTAINS, 0,
                                    &argv[i], NULL, 0, 0), err);
        break;
    case LATTICE_RESP_CMD_TYPE: ok = added(respd_op_add(b, e, LATTICE_OP_CONTAINS, 0, &argv[1], NULL, 0, 0), err); break;
    case LATTICE_RESP_CMD_EXPIREAT:
    case LATTICE_RESP_CMD_PEXPIREAT: ok = expireat(b, e, id, argc, argv, err); break;
    case LATTICE_RESP_CMD_EXPIRETIME:
    case LATTICE_RESP_CMD_PEXPIRETIME: ok = added(respd_op_add(b, e, LATTICE_OP_TTL, 0, &argv[1], NULL, 0, 0), err); break;
    case LATTICE_RESP_CMD_GETBIT: {
        long long off;
        /* Redis's getBitOffsetFromArgument: the offset's byte must lie
         * within proto-max-bulk-len (512 MiB). */
        if (!lattice_resp_string2ll(argv[2].ptr, argv[2].len, &off) || off < 0 || (off >> 3) >= 512LL * 1024 * 1024) {
            ok = fail(err, LATTICE_RESP_ERR_BIT_OFFSET);
            break;
        }
        e->arg2 = off;
        ok = added(respd_op_add(b, e, LATTICE_OP_GET, 0, &argv[1], NULL, 0, 0), err);
        break;
    }
    case LATTICE_RESP_CMD_BITPOS: ok = bitpos(b, e, argc, argv, err); break;
    case LATTICE_RESP_CMD_LCS: ok = lcs(b, e, argc, argv, err); break;
    default: ok = ranged(b, e, argc, argv, err); break;
    }
    if (ok) return CMD_BATCHED;
    b->n_ops = ops_before;
    b->n_ents--;
    return respd_ent_error(b, err);
}

/* ---- replies ---- */

static void reply_range(lattice_resp_out *o, const batch *b, const ent *e, const opres *x)
{
    const char *v = x->status == LATTICE_OK && x->has_value ? b->vals + x->voff : "";
    long long len = x->status == LATTICE_OK && x->has_value ? (long long)x->vlen : 0;
    bool bitcount = e->cmd == LATTICE_RESP_CMD_BITCOUNT;
    bool found = x->status == LATTICE_OK;
    if (!found) {
        /* GETRANGE of a missing key: an empty string; BITCOUNT: 0. */
        if (bitcount) lattice_resp_add_int(o, 0);
        else lattice_resp_add_bulk(o, "", 0);
        return;
    }
    long long start = 0, end = len - 1;
    unsigned first_mask = 0, last_mask = 0;
    if (!bitcount || (e->sflags & RANGE_GIVEN)) {
        start = e->when_ms;
        end = e->arg2;
        if (start < 0 && end < 0 && start > end) {
            if (bitcount) lattice_resp_add_int(o, 0);
            else lattice_resp_add_bulk(o, "", 0);
            return;
        }
        long long tot = (e->sflags & RANGE_BIT) ? len * 8 : len;
        if (start < 0) start += tot;
        if (end < 0) end += tot;
        if (start < 0) start = 0;
        if (end < 0) end = 0;
        if (end >= tot) end = tot - 1;
        if ((e->sflags & RANGE_BIT) && start <= end) {
            first_mask = ~((1u << (8 - (start & 7))) - 1) & 0xffu;
            last_mask = (1u << (7 - (end & 7))) - 1;
            start >>= 3;
            end >>= 3;
        }
    }
    if (!bitcount) {
        if (start > end || len == 0) lattice_resp_add_bulk(o, "", 0);
        else lattice_resp_add_bulk(o, v + start, (size_t)(end - start + 1));
        return;
    }
    if (start > end) {
        lattice_resp_add_int(o, 0);
        return;
    }
    long long cnt = 0;
    for (long long i = start; i <= end; i++) cnt += __builtin_popcount((unsigned char)v[i]);
    if (first_mask) cnt -= __builtin_popcount((unsigned char)v[start] & first_mask);
    if (last_mask) cnt -= __builtin_popcount((unsigned char)v[end] & last_mask);
    lattice_resp_add_int(o, cnt);
}

/* The first bit equal to `one` in bits [from, to] of v, or -1. */
static long long first_bit(const unsigned char *v, long long from, long long to, bool one)
{
    for (long long i = from; i <= to; i++) {
        unsigned char c = one ? v[i >> 3] : (unsigned char)~v[i >> 3];
        if ((i & 7) == 0 && i + 7 <= to && c == 0) {
            i += 7; /* a whole byte without it */
            continue;
        }
        if ((c >> (7 - (i & 7))) & 1) return i;
    }
    return -1;
}

/* bitposCommand's answer: a missing key is all clear bits; an empty range
 * holds neither; looking for a clear bit past a range without an end finds
 * the first bit after the string (Redis's zero padding on the right). */
static void reply_bitpos(lattice_resp_out *o, const batch *b, const ent *e, const opres *x)
{
    bool one = e->sflags & BITPOS_ONE;
    if (x->status != LATTICE_OK) {
        lattice_resp_add_int(o, one ? -1 : 0);
        return;
    }
    if (e->sflags & BITPOS_BAD_SYNTAX) {
        lattice_resp_add_error(o, LATTICE_RESP_ERR_SYNTAX, strlen(LATTICE_RESP_ERR_SYNTAX));
        return;
    }
    if (e->sflags & BITPOS_BAD_INT) {
        lattice_resp_add_error(o, LATTICE_RESP_ERR_NOT_INTEGER, strlen(LATTICE_RESP_ERR_NOT_INTEGER));
        return;
    }
    const unsigned char *v = x->has_value ? (const unsigned char *)b->vals + x->voff : (const unsigned char *)"";
    long long len = x->has_value ? (long long)x->vlen : 0;
    bool isbit = e->sflags & RANGE_BIT;
    long long start = 0, end = len - 1;
    if (e->sflags & RANGE_GIVEN) {
        long long tot = isbit ? len * 8 : len;
        start = e->when_ms;
        end = (e->sflags & BITPOS_END) ? e->arg2 : tot - 1;
        if (start < 0) start += tot;
        if (end < 0) end += tot;
        if (start < 0) start = 0;
        if (end < 0) end = 0;
        if (end >= tot) end = tot - 1;
    }
    if (start > end) {
        lattice_resp_add_int(o, -1);
        return;
    }
    long long from = isbit ? start : start * 8, to = isbit ? end : end * 8 + 7;
    long long pos = first_bit(v, from, to, one);
    if (pos < 0 && !one && !(e->sflags & BITPOS_END)) pos = to + 1;
    lattice_resp_add_int(o, pos);
}

typedef struct lcs_range {
    uint32_t a0, a1, b0, b1;
} lcs_range;

/* lcsCommand: the dynamic-programming table, then the walk back from its
 * corner that builds the string and the matching ranges (last first), in
 * Redis's order and with its tie rule. */
static void reply_lcs(lattice_resp_out *o, const batch *b, const ent *e, const opres *x, const opres *y)
{
    const char *a = x->status == LATTICE_OK && x->has_value ? b->vals + x->voff : "";
    const char *c = y->status == LATTICE_OK && y->has_value ? b->vals + y->voff : "";
    size_t alen = x->status == LATTICE_OK && x->has_value ? x->vlen : 0;
    size_t blen = y->status == LATTICE_OK && y->has_value ? y->vlen : 0;
    static const char nomem[] = "ERR Insufficient memory, failed allocating transient memory for LCS";
    if (alen >= UINT32_MAX - 1 || blen >= UINT32_MAX - 1) {
        lattice_resp_add_error(o, "ERR String too long for LCS", strlen("ERR String too long for LCS"));
        return;
    }
    size_t cells = (alen + 1) * (blen + 1);
    uint32_t *t = cells <= SIZE_MAX / sizeof *t ? lt_malloc(cells * sizeof *t) : NULL;
    char *res = lt_malloc(alen + 1);
    lcs_range *rg = lt_malloc((alen + 1) * sizeof *rg);
    if (!t || !res || !rg) {
        lt_free(t);
        lt_free(res);
        lt_free(rg);
        lattice_resp_add_error(o, nomem, strlen(nomem));
        return;
    }
#define T(i, j) t[(j) + (i) * (blen + 1)]
    for (size_t i = 0; i <= alen; i++)
        for (size_t j = 0; j <= blen; j++) {
            if (i == 0 || j == 0) T(i, j) = 0;
            else if (a[i - 1] == c[j - 1]) T(i, j) = T(i - 1, j - 1) + 1;
            else T(i, j) = T(i - 1, j) > T(i, j - 1) ? T(i - 1, j) : T(i, j - 1);
        }
    uint32_t total = T(alen, blen), idx = total;
    size_t n_rg = 0, i = alen, j = blen;
    bool open = false;
    lcs_range cur = {0, 0, 0, 0};
    unsigned long long minlen = (unsigned long long)e->when_ms;
    while (i > 0 && j > 0) {
        bool emit = false;
        if (a[i - 1] == c[j - 1]) {
            res[--idx] = a[i - 1];
            if (!open) {
                cur = (lcs_range){(uint32_t)(i - 1), (uint32_t)(i - 1), (uint32_t)(j - 1), (uint32_t)(j - 1)};
                open = true;
            } else {
                cur.a0--; /* contiguous: a match right after a match always is */
                cur.b0--;
            }
            if (cur.a0 == 0 || cur.b0 == 0) emit = true;
            i--;
            j--;
        } else {
            if (T(i - 1, j) > T(i, j - 1)) i--;
            else j--;
            emit = open;
        }
        if (emit) {
            if (minlen == 0 || cur.a1 - cur.a0 + 1ull >= minlen) rg[n_rg++] = cur;
            open = false;
        }
    }
#undef T
    if (e->sflags & LCS_IDX) {
        bool withlen = e->sflags & LCS_WITHMATCHLEN;
        lattice_resp_add_map(o, 2);
        lattice_resp_add_bulk(o, "matches", 7);
        lattice_resp_add_array(o, n_rg);
        for (size_t k = 0; k < n_rg; k++) {
            lattice_resp_add_array(o, withlen ? 3 : 2);
            lattice_resp_add_array(o, 2);
            lattice_resp_add_int(o, rg[k].a0);
            lattice_resp_add_int(o, rg[k].a1);
            lattice_resp_add_array(o, 2);
            lattice_resp_add_int(o, rg[k].b0);
            lattice_resp_add_int(o, rg[k].b1);
            if (withlen) lattice_resp_add_int(o, rg[k].a1 - rg[k].a0 + 1);
        }
        lattice_resp_add_bulk(o, "len", 3);
        lattice_resp_add_int(o, total);
    } else if (e->sflags & LCS_LEN) {
        lattice_resp_add_int(o, total);
    } else {
        lattice_resp_add_bulk(o, res, total);
    }
    lt_free(t);
    lt_free(res);
    lt_free(rg);
}

/* lcsCommand's answer when a key holds another type than a string. */
#define ERR_LCS_TYPE "ERR The specified keys must contain string values"

/* TYPE's answer for a value type (LATTICE_OP_R_TYPE: types/types.h's
 * numbers), Redis's names. */
static const char *respd_type_name(unsigned t)
{
    static const char *const names[] = {"string", "hash", "list", "set", "zset"};
    return t < sizeof names / sizeof names[0] ? names[t] : "none";
}

void respd_str_reply(lattice_resp_out *o, const batch *b, const ent *e)
{
    const opres *x = &b->res[e->first];
    for (uint32_t k = 0; k < e->n; k++) {
        const opres *y = &b->res[e->first + k];
        if (e->cmd == LATTICE_RESP_CMD_LCS && y->status == LATTICE_ERR_WRONGTYPE) { /* lcsCommand's own words */
            lattice_resp_add_error(o, ERR_LCS_TYPE, strlen(ERR_LCS_TYPE));
            return;
        }
        if (y->status != LATTICE_OK && y->status != LATTICE_ERR_NOT_FOUND &&
            !(e->cmd == LATTICE_RESP_CMD_SETNX && y->status == LATTICE_ERR_EXISTS)) {
            respd_add_result_error(o, y);
            return;
        }
    }
    bool ok = x->status == LATTICE_OK;
    long long cnt = 0;
    switch (e->cmd) {
    case LATTICE_RESP_CMD_SETEX:
    case LATTICE_RESP_CMD_PSETEX: lattice_resp_add_simple(o, "OK", 2); break;
    case LATTICE_RESP_CMD_SETNX: lattice_resp_add_int(o, ok); break;
    case LATTICE_RESP_CMD_GETSET:
        if (ok && x->has_value && (x->flags & LATTICE_OP_R_FOUND)) respd_add_value(o, b, x);
        else lattice_resp_add_null(o);
        break;
    case LATTICE_RESP_CMD_GETEX:
        if (ok && x->has_value) respd_add_value(o, b, x);
        else lattice_resp_add_null(o);
        break;
    case LATTICE_RESP_CMD_UNLINK:
    case LATTICE_RESP_CMD_TOUCH:
        for (uint32_t k = 0; k < e->n; k++) {
            const opres *y = &b->res[e->first + k];
            cnt += e->cmd == LATTICE_RESP_CMD_UNLINK ? y->status == LATTICE_OK : y->num > 0;
        }
        lattice_resp_add_int(o, cnt);
        break;
    case LATTICE_RESP_CMD_TYPE: {
        const char *t = x->num > 0 ? respd_type_name(LATTICE_OP_R_TYPE(x->flags)) : "none";
        lattice_resp_add_simple(o, t, strlen(t));
        break;
    }
    case LATTICE_RESP_CMD_EXPIRETIME:
    case LATTICE_RESP_CMD_PEXPIRETIME: {
        /* The primary gives the ms left; the absolute time is now + that
         * (the same clock on one host; within the op's latency across hosts). */
        long long at = (long long)lt_wall_ms() + x->num;
        if (!ok) lattice_resp_add_int(o, -2);
        else if (x->num < 0) lattice_resp_add_int(o, -1);
        else lattice_resp_add_int(o, e->cmd == LATTICE_RESP_CMD_EXPIRETIME ? at / 1000 : at);
        break;
    }
    case LATTICE_RESP_CMD_GETBIT: {
        long long byte = e->arg2 >> 3;
        int bit = 0;
        if (ok && x->has_value && byte < (long long)x->vlen) bit = ((unsigned char)b->vals[x->voff + byte] >> (7 - (e->arg2 & 7))) & 1;
        lattice_resp_add_int(o, bit);
        break;
    }
    case LATTICE_RESP_CMD_BITPOS: reply_bitpos(o, b, e, x); break;
    case LATTICE_RESP_CMD_LCS: reply_lcs(o, b, e, x, &b->res[e->first + 1]); break;
    default: reply_range(o, b, e, x); break;
    }
}
