/*
 * respd's commands answered at once, into the connection's output on its IO
 * thread: PING, ECHO, AUTH, HELLO, SELECT, QUIT, RESET, TIME, the HELP
 * subcommands, COMMAND, CLIENT's subcommands about the connection itself
 * (and CLIENT INFO's line, which CLIENT LIST shows too), CONFIG,
 * READONLY/READWRITE/ASKING; INFO and CLUSTER go on to respd_cluster.c.
 * Semantics and error texts are Redis 7's.
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

#define REDIS_VERSION "7.0.0"

static bool eq(const lattice_resp_arg *a, const char *s)
{
    size_t n = strlen(s);
    return a->len == n && strncasecmp(a->ptr, s, n) == 0;
}

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
    static const char *const memory_help[] = {
        "MEMORY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:", "USAGE <key> [SAMPLES <count>]",
        "    Return memory in bytes used by <key> and its value. Nested values are",
        "    all counted (SAMPLES is accepted and not needed).", "HELP", "    Prints this help.", NULL};
    add_lines(c->out, eq(parent, "command") ? command_help
                      : eq(parent, "memory") ? memory_help
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

/* Redis 7.0's encoding thresholds: name, its older alias, default, range. */
static const struct enc_param {
    const char *name, *alias;
    long long def, min, max;
    bool memory; /* a memory value: 64, 1kb, 2m (Redis's memtoull) */
} enc_params[] = {
    {"hash-max-listpack-entries", "hash-max-ziplist-entries", 128, 0, LLONG_MAX, false},
    {"hash-max-listpack-value", "hash-max-ziplist-value", 64, 0, LLONG_MAX, true},
    {"list-max-listpack-size", "list-max-ziplist-size", -2, INT_MIN, INT_MAX, false},
    {"list-compress-depth", NULL, 0, 0, INT_MAX, false},
    {"set-max-intset-entries", NULL, 512, 0, LLONG_MAX, false},
    {"zset-max-listpack-entries", "zset-max-ziplist-entries", 128, 0, LLONG_MAX, false},
    {"zset-max-listpack-value", "zset-max-ziplist-value", 64, 0, LLONG_MAX, true},
};

/* Redis's memtoull: digits and an optional unit (b, k, kb, m, mb, g, gb;
 * k = 1000, kb = 1024), no sign. */
static bool mem_value(const lattice_resp_arg *a, long long *v)
{
    size_t i = 0;
    unsigned long long x = 0;
    while (i < a->len && a->ptr[i] >= '0' && a->ptr[i] <= '9') {
        if (x > (ULLONG_MAX - 9) / 10) return false;
        x = x * 10 + (unsigned)(a->ptr[i++] - '0');
    }
    if (i == 0) return false;
    static const struct { const char *u; unsigned long long m; } units[] = {
        {"", 1}, {"b", 1}, {"k", 1000}, {"kb", 1024}, {"m", 1000000}, {"mb", 1048576},
        {"g", 1000000000}, {"gb", 1073741824},
    };
    lattice_resp_arg unit = {a->ptr + i, a->len - i};
    for (size_t k = 0; k < sizeof units / sizeof units[0]; k++) {
        if (!eq(&unit, units[k].u)) continue;
        if (x > LLONG_MAX / units[k].m) return false;
        *v = (long long)(x * units[k].m);
        return true;
    }
    return false;
}
#define N_ENC (sizeof enc_params / sizeof enc_params[0])

void respd_enc_init(lattice_respd *r)
{
    for (size_t k = 0; k < N_ENC; k++) atomic_init(&r->enc[k], enc_params[k].def);
}

/* The threshold argument names (its name or alias), or -1. */
static int enc_of(const lattice_resp_arg *a)
{
    for (size_t k = 0; k < N_ENC; k++)
        if (eq(a, enc_params[k].name) || (enc_params[k].alias && eq(a, enc_params[k].alias))) return (int)k;
    return -1;
}

/* CONFIG SET param value [param value ...] as Redis 7: only `timeout` (the
 * idle timeout), slowlog-log-slower-than, slowlog-max-len and the encoding
 * thresholds (enc_params) change at run time; the other parameters CONFIG GET shows
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
    long long timeout = -1, slower = LLONG_MIN, maxlen = -1, enc[N_ENC];
    bool enc_set[N_ENC] = {false};
    for (size_t i = 2; i + 1 < argc; i += 2) {
        int n = (int)(argv[i].len > 128 ? 128 : argv[i].len);
        int k = enc_of(&argv[i]);
        if (k >= 0) {
            const struct enc_param *e = &enc_params[k];
            long long v;
            if (e->memory && !mem_value(&argv[i + 1], &v)) {
                snprintf(err, LATTICE_RESP_ERR_MAX,
                         "ERR CONFIG SET failed (possibly related to argument '%.*s') - argument must be a memory value", n,
                         argv[i].ptr);
                return false;
            }
            if (!e->memory && !lattice_resp_string2ll(argv[i + 1].ptr, argv[i + 1].len, &v)) {
                snprintf(err, LATTICE_RESP_ERR_MAX,
                         "ERR CONFIG SET failed (possibly related to argument '%.*s') - argument couldn't be parsed into an integer",
                         n, argv[i].ptr);
                return false;
            }
            if (v < e->min || v > e->max) {
                snprintf(err, LATTICE_RESP_ERR_MAX,
                         "ERR CONFIG SET failed (possibly related to argument '%.*s') - argument must be between %lld and %lld inclusive",
                         n, argv[i].ptr, e->min, e->max);
                return false;
            }
            enc[k] = v;
            enc_set[k] = true;
            continue;
        }
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
        /* What CONFIG GET shows for these is what they are here (no RDB
         * snapshots, no AOF: the grid's own persistence is --data-dir), so
         * setting them to it changes nothing and is OK - harnesses and
         * frameworks send CONFIG SET save "" and appendonly no. */
        if ((eq(&argv[i], "save") && !argv[i + 1].len) || (eq(&argv[i], "appendonly") && eq(&argv[i + 1], "no")))
            continue;
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
    for (size_t k = 0; k < N_ENC; k++)
        if (enc_set[k]) atomic_store(&r->enc[k], enc[k]);
    if (timeout >= 0) atomic_store(&r->idle_timeout_s, (int)timeout);
    if (slower != LLONG_MIN) atomic_store(&r->slow_slower_than, slower);
    if (maxlen >= 0) atomic_store(&r->slow_max_len, maxlen);
    return true;
}

void respd_config_command(lattice_respd *r, conn *c, size_t argc, const lattice_resp_arg *argv)
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
        /* and the encoding thresholds, by either name */
        char encv[N_ENC][24];
        const char *ekv[2 * N_ENC][2];
        size_t nekv = 0;
        for (size_t k = 0; k < N_ENC; k++) {
            snprintf(encv[k], sizeof encv[k], "%lld", (long long)atomic_load(&r->enc[k]));
            ekv[nekv][0] = enc_params[k].name;
            ekv[nekv++][1] = encv[k];
            if (enc_params[k].alias) {
                ekv[nekv][0] = enc_params[k].alias;
                ekv[nekv++][1] = encv[k];
            }
        }
        size_t nkv = sizeof kv / sizeof kv[0];
        const char *hit[16 + 2 * N_ENC][2];
        size_t n = 0;
        for (size_t k = 0; k < nkv + nekv; k++) {
            const char *const *pair = k < nkv ? kv[k] : ekv[k - nkv];
            bool m = false;
            for (size_t i = 2; i < argc && !m; i++) {
                char pat[128];
                snprintf(pat, sizeof pat, "%.*s", (int)(argv[i].len > 127 ? 127 : argv[i].len), argv[i].ptr);
                m = fnmatch(pat, pair[0], FNM_CASEFOLD) == 0;
            }
            if (m) {
                hit[n][0] = pair[0];
                hit[n++][1] = pair[1];
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

void respd_immediate_command(lattice_respd *r, conn *c, lattice_resp_cmd_id id, size_t argc,
                             const lattice_resp_arg *argv)
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
