/*
 * rmw: the read-modify-write kinds SETRANGE, SETBIT and INCRBYFLOAT at the
 * primary.  Like INCREMENT and APPEND (exec.c) each reads
 * the live entry, builds the new value and writes it with the partition's
 * next update counter: atomic, because the data thread is the one writer of
 * every partition this node is primary of.  Semantics are Redis 7.0's
 * (t_string.c setrangeCommand and incrbyfloatCommand, bitops.c
 * setbitCommand; util.c string2ld and ld2string): an absent key reads as
 * empty (0 for INCRBYFLOAT), the entry's expiry is kept, a new entry takes
 * the cache's expiry_ms.
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "types.h"

#define MAX_LONG_DOUBLE_CHARS EXEC_LD_TEXT_MAX /* Redis's: the longest number text it parses or prints */

/* Reads the live entry: OK (s->old, *len, *expire), NOT_FOUND (*len 0), or
 * an error, which goes into r. */
static bool read_entry(lattice_meta_cache *c, const exec_in *in, exec_scratch *s, lattice_op_result *r, size_t *len,
                       uint64_t *expire)
{
    lattice_store_meta meta = {0};
    int st = exec_read_old(c, in, s, &meta);
    if (exec_wrong_type(st, &meta, r)) return false;
    if (st != LATTICE_OK && st != LATTICE_ERR_NOT_FOUND) {
        r->status = st;
        return false;
    }
    if (st == LATTICE_OK) r->flags |= LATTICE_OP_R_FOUND;
    *len = st == LATTICE_OK ? meta.value_len : 0;
    *expire = st == LATTICE_OK ? meta.expire_ms : exec_expiry_for(c, 0);
    return true;
}

/* The old value, grown with zero bytes to n (>= old_len), in s->buf. */
static bool build_grown(const lattice_meta_cache *c, exec_scratch *s, size_t old_len, size_t n, lattice_op_result *r)
{
    if (n > c->cfg.max_value_bytes) {
        r->status = LATTICE_ERR_TOO_LARGE;
        return false;
    }
    if (!exec_scratch_reserve(s, n)) {
        r->status = LATTICE_ERR_NOMEM;
        return false;
    }
    if (old_len) memcpy(s->buf, s->old, old_len);
    if (n > old_len) memset((char *)s->buf + old_len, 0, n - old_len);
    return true;
}

void exec_setrange(lattice_meta_cache *c, const exec_in *in, exec_scratch *s, lattice_op_result *r, repl_out *repl)
{
    size_t old_len;
    uint64_t expire;
    if (in->delta < 0) {
        r->status = LATTICE_ERR_INVAL;
        return;
    }
    if (!read_entry(c, in, s, r, &old_len, &expire)) return;
    r->num = (int64_t)old_len;
    if (in->value_len == 0) return; /* Redis: nothing to write, the length as it is (an absent key stays absent) */
    uint64_t off = (uint64_t)in->delta;
    if (off > c->cfg.max_value_bytes || in->value_len > c->cfg.max_value_bytes - off) {
        r->status = LATTICE_ERR_TOO_LARGE;
        return;
    }
    size_t end = (size_t)off + in->value_len, n = end > old_len ? end : old_len;
    if (!build_grown(c, s, old_len, n, r)) return;
    memcpy((char *)s->buf + off, in->value, in->value_len);
    r->status = exec_write_entry(c, in, s->buf, n, expire, repl);
    r->num = (int64_t)n;
}

void exec_setbit(lattice_meta_cache *c, const exec_in *in, exec_scratch *s, lattice_op_result *r, repl_out *repl)
{
    size_t old_len;
    uint64_t expire;
    const char *v = in->value;
    if (in->delta < 0 || in->value_len != 1 || (v[0] != '0' && v[0] != '1')) {
        r->status = LATTICE_ERR_INVAL;
        return;
    }
    if (!read_entry(c, in, s, r, &old_len, &expire)) return;
    uint64_t byte = (uint64_t)in->delta >> 3;
    unsigned shift = 7 - (unsigned)(in->delta & 7);
    int old_bit = byte < old_len ? (((const unsigned char *)s->old)[byte] >> shift) & 1 : 0;
    int on = v[0] == '1';
    r->num = old_bit;
    /* An existing value that neither grows nor changes is not written
     * (Redis does not propagate it either). */
    if ((r->flags & LATTICE_OP_R_FOUND) && byte < old_len && old_bit == on) return;
    if (byte >= c->cfg.max_value_bytes) {
        r->status = LATTICE_ERR_TOO_LARGE;
        return;
    }
    size_t n = byte + 1 > old_len ? (size_t)byte + 1 : old_len;
    if (!build_grown(c, s, old_len, n, r)) return;
    unsigned char *p = (unsigned char *)s->buf + byte;
    *p = (unsigned char)((*p & ~(1u << shift)) | ((unsigned)on << shift));
    r->status = exec_write_entry(c, in, s->buf, n, expire, repl);
}

/* Redis's string2ld: strtold over the whole text, no leading blank, no
 * overflow or underflow to zero, not NaN. */
bool exec_parse_ld(const char *s, size_t n, long double *out)
{
    char buf[MAX_LONG_DOUBLE_CHARS];
    if (n == 0 || n >= sizeof buf) return false;
    memcpy(buf, s, n);
    buf[n] = 0;
    char *end;
    errno = 0;
    long double v = strtold(buf, &end);
    if (isspace((unsigned char)buf[0]) || *end || (size_t)(end - buf) != n ||
        (errno == ERANGE && (v == HUGE_VALL || v == -HUGE_VALL || fpclassify(v) == FP_ZERO)) || errno == EINVAL ||
        isnan(v))
        return false;
    *out = v;
    return true;
}

size_t exec_format_ld(char *buf, size_t cap, long double v)
{
    /* Redis's ld2string(LD_STR_HUMAN): 17 digits after the point, then
     * the trailing zeros (and a bare point) cut, "-0" as "0". */
    int l = snprintf(buf, cap, "%.17Lf", v);
    if (l < 0 || (size_t)l + 1 > cap) return 0;
    if (strchr(buf, '.')) {
        char *p = buf + l - 1;
        while (*p == '0') {
            p--;
            l--;
        }
        if (*p == '.') l--;
    }
    if (l == 2 && buf[0] == '-' && buf[1] == '0') {
        buf[0] = '0';
        l = 1;
    }
    return (size_t)l;
}

void exec_incrbyfloat(lattice_meta_cache *c, const exec_in *in, exec_scratch *s, lattice_op_result *r, repl_out *repl)
{
    size_t old_len;
    uint64_t expire;
    if (!read_entry(c, in, s, r, &old_len, &expire)) return;
    long double cur = 0, incr;
    if (((r->flags & LATTICE_OP_R_FOUND) && !exec_parse_ld(s->old, old_len, &cur)) ||
        !exec_parse_ld(in->value, in->value_len, &incr)) {
        r->status = LATTICE_ERR_INVAL; /* num 0: "value is not a valid float" */
        return;
    }
    cur += incr;
    if (isnan(cur) || isinf(cur)) {
        r->status = LATTICE_ERR_INVAL;
        r->num = 1; /* "increment would produce NaN or Infinity" */
        return;
    }
    if (!exec_scratch_reserve(s, MAX_LONG_DOUBLE_CHARS)) {
        r->status = LATTICE_ERR_NOMEM;
        return;
    }
    size_t n = exec_format_ld(s->buf, MAX_LONG_DOUBLE_CHARS, cur);
    if (n > c->cfg.max_value_bytes) {
        r->status = LATTICE_ERR_TOO_LARGE;
        return;
    }
    r->status = exec_write_entry(c, in, s->buf, n, expire, repl);
    if (r->status != LATTICE_OK) return;
    r->value = s->buf;
    r->value_len = n;
    /* The version written: the resend records (dedup.c, here and on every
     * copy) keep it, so a resend finds its reply in the entry while no
     * later write replaced it (primary.c). */
    r->num = (int64_t)repl->version;
}
