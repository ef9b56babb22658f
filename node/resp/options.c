/*
 * Option parsers for the commands whose arguments have rules of their own:
 * SET (NX/XX/GET/EX/PX/EXAT/PXAT/KEEPTTL), EXPIRE/PEXPIRE (NX/XX/GT/LT) and
 * HELLO (protover, AUTH, SETNAME), plus Redis's client-name check.  Pure
 * functions: the server passes the clock in and gets flags, values and
 * Redis's exact error texts back.
 */
#include "resp/resp.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

static int opt_is(const lattice_resp_arg *a, const char *word)
{
    size_t n = strlen(word);
    return a->len == n && strncasecmp(a->ptr, word, n) == 0;
}

#define EXPIRY_FLAGS (LATTICE_RESP_SET_EX | LATTICE_RESP_SET_PX | LATTICE_RESP_SET_EXAT | \
                      LATTICE_RESP_SET_PXAT)

/* Which expiry option argv names, or 0. */
static uint32_t expiry_opt(const lattice_resp_arg *a)
{
    if (opt_is(a, "EX")) return LATTICE_RESP_SET_EX;
    if (opt_is(a, "PX")) return LATTICE_RESP_SET_PX;
    if (opt_is(a, "EXAT")) return LATTICE_RESP_SET_EXAT;
    if (opt_is(a, "PXAT")) return LATTICE_RESP_SET_PXAT;
    return 0;
}

/* Turn the expiry value into absolute ms, as Redis's getExpireMillisecondsOrReply. */
static lattice_status expiry_ms(uint32_t which, const lattice_resp_arg *v, int64_t now_ms,
                                int64_t *at, char *err)
{
    long long ms;
    if (!lattice_resp_string2ll(v->ptr, v->len, &ms)) {
        snprintf(err, LATTICE_RESP_ERR_MAX, "%s", LATTICE_RESP_ERR_NOT_INTEGER);
        return LATTICE_ERR_INVAL;
    }
    int secs = which == LATTICE_RESP_SET_EX || which == LATTICE_RESP_SET_EXAT;
    if (ms <= 0 || (secs && ms > LLONG_MAX / 1000)) goto invalid;
    if (secs) ms *= 1000;
    if (which == LATTICE_RESP_SET_EX || which == LATTICE_RESP_SET_PX) {
        if (ms > LLONG_MAX - now_ms) goto invalid;
        ms += now_ms;
    }
    *at = ms;
    return LATTICE_OK;
invalid:
    lattice_resp_err_expire("set", err);
    return LATTICE_ERR_INVAL;
}

lattice_status lattice_resp_parse_set(size_t argc, const lattice_resp_arg *argv, int64_t now_ms,
                                      lattice_resp_set_opts *opts, char *err)
{
    uint32_t f = 0;
    const lattice_resp_arg *expire = NULL;
    opts->flags = 0, opts->expire_at_ms = 0;
    /* Redis 7's parseExtendedStringArgumentsOrReply, for COMMAND_SET. */
    for (size_t j = 3; j < argc; j++) {
        const lattice_resp_arg *a = &argv[j];
        int has_next = j + 1 < argc;
        uint32_t e = expiry_opt(a);
        if (opt_is(a, "NX") && !(f & LATTICE_RESP_SET_XX)) {
            f |= LATTICE_RESP_SET_NX;
        } else if (opt_is(a, "XX") && !(f & LATTICE_RESP_SET_NX)) {
            f |= LATTICE_RESP_SET_XX;
        } else if (opt_is(a, "GET")) {
            f |= LATTICE_RESP_SET_GET;
        } else if (opt_is(a, "KEEPTTL") && !(f & EXPIRY_FLAGS)) {
            f |= LATTICE_RESP_SET_KEEPTTL;
        } else if (e && !(f & LATTICE_RESP_SET_KEEPTTL) && !(f & EXPIRY_FLAGS & ~e) && has_next) {
            f |= e;
            expire = &argv[++j];
        } else {
            snprintf(err, LATTICE_RESP_ERR_MAX, "%s", LATTICE_RESP_ERR_SYNTAX);
            return LATTICE_ERR_INVAL;
        }
    }
    if (expire) {
        lattice_status st = expiry_ms(f & EXPIRY_FLAGS, expire, now_ms, &opts->expire_at_ms, err);
        if (st != LATTICE_OK) return st;
    }
    opts->flags = f;
    return LATTICE_OK;
}

/* "%s" of an argument as Redis's addReplyErrorFormat prints it: up to a NUL,
 * CR/LF as spaces, cut to fit. */
static void arg_text(char *dst, size_t room, const lattice_resp_arg *a)
{
    size_t k = 0;
    while (k < a->len && a->ptr[k] != '\0' && k + 1 < room) {
        dst[k] = (a->ptr[k] == '\r' || a->ptr[k] == '\n') ? ' ' : a->ptr[k];
        k++;
    }
    dst[k] = '\0';
}

lattice_status lattice_resp_parse_expire(size_t argc, const lattice_resp_arg *argv, int unit_ms,
                                         int64_t now_ms, lattice_resp_expire_opts *opts, char *err)
{
    /* Redis 7's parseExtendedExpireArgumentsOrReply + expireGenericCommand. */
    uint32_t f = 0;
    opts->flags = 0, opts->when_ms = 0;
    for (size_t j = 3; j < argc; j++) {
        if (opt_is(&argv[j], "NX")) f |= LATTICE_RESP_EXPIRE_NX;
        else if (opt_is(&argv[j], "XX")) f |= LATTICE_RESP_EXPIRE_XX;
        else if (opt_is(&argv[j], "GT")) f |= LATTICE_RESP_EXPIRE_GT;
        else if (opt_is(&argv[j], "LT")) f |= LATTICE_RESP_EXPIRE_LT;
        else {
            char o[200];
            arg_text(o, sizeof(o), &argv[j]);
            snprintf(err, LATTICE_RESP_ERR_MAX, "ERR Unsupported option %s", o);
            return LATTICE_ERR_INVAL;
        }
    }
    if ((f & LATTICE_RESP_EXPIRE_NX) && (f & ~LATTICE_RESP_EXPIRE_NX)) {
        snprintf(err, LATTICE_RESP_ERR_MAX, "%s",
                 "ERR NX and XX, GT or LT options at the same time are not compatible");
        return LATTICE_ERR_INVAL;
    }
    if ((f & LATTICE_RESP_EXPIRE_GT) && (f & LATTICE_RESP_EXPIRE_LT)) {
        snprintf(err, LATTICE_RESP_ERR_MAX, "%s", "ERR GT and LT options at the same time are not compatible");
        return LATTICE_ERR_INVAL;
    }
    long long when;
    if (argc < 3 || !lattice_resp_string2ll(argv[2].ptr, argv[2].len, &when)) {
        snprintf(err, LATTICE_RESP_ERR_MAX, "%s", LATTICE_RESP_ERR_NOT_INTEGER);
        return LATTICE_ERR_INVAL;
    }
    /* Negative values are allowed (the key expires at once); only overflow
     * in the unit conversion or the addition is refused. */
    if (unit_ms == 1000) {
        if (when > LLONG_MAX / 1000 || when < LLONG_MIN / 1000) goto invalid;
        when *= 1000;
    }
    if ((now_ms > 0 && when > LLONG_MAX - now_ms) || (now_ms < 0 && when < LLONG_MIN - now_ms)) goto invalid;
    opts->when_ms = when + now_ms;
    opts->flags = f;
    return LATTICE_OK;
invalid:
    lattice_resp_err_expire(unit_ms == 1000 ? "expire" : "pexpire", err);
    return LATTICE_ERR_INVAL;
}

int lattice_resp_client_name_ok(const char *name, size_t len)
{
    /* Redis's validateClientName: '!'..'~' only (CLIENT LIST splits on spaces);
     * empty is allowed (it clears the name). */
    for (size_t i = 0; i < len; i++)
        if (name[i] < '!' || name[i] > '~') return 0;
    return 1;
}

lattice_status lattice_resp_parse_hello(size_t argc, const lattice_resp_arg *argv,
                                        lattice_resp_hello_opts *opts, char *err)
{
    /* Redis 7's helloCommand, up to (not including) authentication. */
    memset(opts, 0, sizeof(*opts));
    size_t j = 1;
    if (argc >= 2) {
        long long ver;
        if (!lattice_resp_string2ll(argv[1].ptr, argv[1].len, &ver)) {
            snprintf(err, LATTICE_RESP_ERR_MAX, "%s", "ERR Protocol version is not an integer or out of range");
            return LATTICE_ERR_INVAL;
        }
        if (ver < 2 || ver > 3) {
            snprintf(err, LATTICE_RESP_ERR_MAX, "%s", LATTICE_RESP_ERR_NOPROTO);
            return LATTICE_ERR_INVAL;
        }
        opts->proto = (int)ver;
        j = 2;
    }
    for (; j < argc; j++) {
        size_t more = argc - 1 - j;
        if (opt_is(&argv[j], "AUTH") && more >= 2) {
            opts->username = &argv[j + 1];
            opts->password = &argv[j + 2];
            j += 2;
        } else if (opt_is(&argv[j], "SETNAME") && more) {
            if (!lattice_resp_client_name_ok(argv[j + 1].ptr, argv[j + 1].len)) {
                snprintf(err, LATTICE_RESP_ERR_MAX, "%s", LATTICE_RESP_ERR_CLIENT_NAME);
                return LATTICE_ERR_INVAL;
            }
            opts->client_name = &argv[j + 1];
            j++;
        } else {
            char o[200];
            arg_text(o, sizeof(o), &argv[j]);
            snprintf(err, LATTICE_RESP_ERR_MAX, "ERR Syntax error in HELLO option '%s'", o);
            return LATTICE_ERR_INVAL;
        }
    }
    return LATTICE_OK;
}
