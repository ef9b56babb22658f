/*
 * resp_codec.h: the RESP (Redis protocol) codec, INTERNAL to resp/ (the
 * server's files include it; so do its unit tests, fuzzers and bench_resp,
 * which put resp/ on their include path).  Everything the RESP endpoint needs
 * that does not touch a socket or a cache.  The module's public header is
 * resp.h (the server).
 *
 *   - an incremental request parser (multibulk and inline commands, pipelining,
 *     Redis's limits and Redis's exact protocol error texts);
 *   - a reply encoder for RESP2 and RESP3 into an output buffer that counts its
 *     size against a client output limit and hands out iovecs for writev;
 *   - the command table (name, arity, flags, key positions) with Redis's error
 *     wording for unknown commands and wrong arity, and COMMAND replies;
 *   - pure helpers: Redis's string2ll and the SET, EXPIRE and HELLO option
 *     parsers.
 *
 * Every error text is Redis 7's, byte for byte (test_resp_vs_redis compares
 * them with a real redis-server); docs/RESP.md describes states and limits.
 *
 * Threading: nothing here is shared.  A parser or an output buffer belongs to
 * one connection and is used by one thread at a time; the command table is
 * immutable and may be read from any thread.
 *
 * Allocation goes through lt_malloc & co (lattice/alloc.h); an allocation
 * failure is reported (LATTICE_ERR_NOMEM), never a crash.
 */
#ifndef LATTICE_RESP_CODEC_H
#define LATTICE_RESP_CODEC_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "lattice/status.h"

/* ------------------------------------------------------------------------ */
/* Limits (Redis's names and defaults)                                       */

#define LATTICE_RESP_DEFAULT_MAX_BULK       (512ULL * 1024 * 1024) /* proto-max-bulk-len */
#define LATTICE_RESP_DEFAULT_MAX_MULTIBULK  (1024LL * 1024)        /* elements per command */
#define LATTICE_RESP_DEFAULT_MAX_INLINE     (64 * 1024)            /* PROTO_INLINE_MAX_SIZE */
#define LATTICE_RESP_DEFAULT_MAX_QUERYBUF   (1024ULL * 1024 * 1024)/* client-query-buffer-limit */
/* Before AUTH (when a password is required), as Redis 7.2: */
#define LATTICE_RESP_UNAUTH_MAX_MULTIBULK   10
#define LATTICE_RESP_UNAUTH_MAX_BULK        16384

typedef struct lattice_resp_limits {
    uint64_t max_bulk_len;       /* a `$N` above this is "invalid bulk length" */
    int64_t max_multibulk_len;   /* a `*N` above this is "invalid multibulk length" */
    size_t max_inline_len;       /* a header or inline line longer than this is "too big ..." */
    uint64_t max_query_buf;      /* bytes the parser may hold for one unfinished command */
} lattice_resp_limits;

/* Redis's defaults, as above. */
lattice_resp_limits lattice_resp_default_limits(void);

/* ------------------------------------------------------------------------ */
/* Request parser                                                            */

typedef struct lattice_resp_parser lattice_resp_parser;

/* One argument: bytes [ptr, ptr+len).  Not NUL-terminated. */
typedef struct lattice_resp_arg {
    const char *ptr;
    size_t len;
} lattice_resp_arg;

/* A complete command.  argv[0] is the command name.  argc >= 1. */
typedef struct lattice_resp_command {
    size_t argc;
    const lattice_resp_arg *argv;
    int is_inline;               /* 1 when it came as an inline (telnet) line */
} lattice_resp_command;

typedef enum lattice_resp_result {
    LATTICE_RESP_ERROR = -1,     /* protocol error or resource failure; sticky */
    LATTICE_RESP_NEED_MORE = 0,  /* every input byte consumed; no complete command yet */
    LATTICE_RESP_COMMAND = 1,    /* *cmd is a complete command */
} lattice_resp_result;

/* NULL limits = defaults.  Returns NULL when out of memory. */
lattice_resp_parser *lattice_resp_parser_new(const lattice_resp_limits *limits);
void lattice_resp_parser_free(lattice_resp_parser *p);
/* Forget any partial command and any error; keeps limits and auth flag. */
void lattice_resp_parser_reset(lattice_resp_parser *p);

/*
 * When set (a password is configured and this connection has not yet
 * authenticated), headers parsed from now on also obey Redis's pre-AUTH
 * limits: at most 10 elements ("unauthenticated multibulk length") and bulks
 * of at most 16384 bytes ("unauthenticated bulk length").  The server clears
 * it after a successful AUTH/HELLO, before parsing the next command.
 */
void lattice_resp_parser_set_auth_required(lattice_resp_parser *p, int required);

/*
 * Parse the next command from buf[0, len).
 *
 * LATTICE_RESP_COMMAND: *consumed bytes were used (the command's end); call
 *   again with buf + *consumed for the next pipelined command.
 * LATTICE_RESP_NEED_MORE: *consumed == len.  The bytes of an unfinished
 *   command were copied into the parser, so the caller may reuse buf.
 * LATTICE_RESP_ERROR: the connection's stream is broken.  The error is sticky
 *   (every later call returns it, consuming nothing) until reset.  Send
 *   "-" + lattice_resp_parser_error_reply() + "\r\n" when that is non-NULL,
 *   then close the connection.
 *
 * Lifetime of cmd->argv: until the next call on this parser (or reset/free).
 * An argument points into buf (zero copy) when its whole command arrived in
 * this buf, else into the parser's own storage; so buf must also stay
 * unchanged while cmd is used.  A caller that keeps commands longer (to batch
 * a pipeline per destination) copies them.
 *
 * Empty commands ("*0", "*-1", a blank inline line) are skipped, as Redis does.
 * Memory held never exceeds about twice the bytes actually received for the
 * unfinished command: a declared `$536870912` allocates nothing up front.
 */
lattice_resp_result lattice_resp_parse(lattice_resp_parser *p, const char *buf, size_t len,
                                       size_t *consumed, lattice_resp_command *cmd);

/* LATTICE_OK, or why the last parse failed: LATTICE_ERR_PROTO (malformed),
 * LATTICE_ERR_TOO_LARGE (query buffer limit), LATTICE_ERR_NOMEM. */
lattice_status lattice_resp_parser_status(const lattice_resp_parser *p);
/* The error text Redis would send, without "-" and CRLF, e.g.
 * "ERR Protocol error: invalid bulk length"; NULL when no error or when Redis
 * closes without a reply (query buffer limit, out of memory). */
const char *lattice_resp_parser_error_reply(const lattice_resp_parser *p);
/* Bytes of heap the parser holds now (stashed lines, argument copies, arrays). */
size_t lattice_resp_parser_memory(const lattice_resp_parser *p);

/* ------------------------------------------------------------------------ */
/* Output buffer and reply encoder                                           */

typedef struct lattice_resp_out lattice_resp_out;

/* limit = most bytes pending (appended, not yet consumed); 0 = unlimited, which
 * is Redis's default for normal clients.  proto = 2 or 3. */
lattice_resp_out *lattice_resp_out_new(size_t limit, int proto);
void lattice_resp_out_free(lattice_resp_out *o);
void lattice_resp_out_set_proto(lattice_resp_out *o, int proto);
int lattice_resp_out_proto(const lattice_resp_out *o);
void lattice_resp_out_set_limit(lattice_resp_out *o, size_t limit);
size_t lattice_resp_out_pending(const lattice_resp_out *o);
/* Set once an append was refused by the limit; the server closes the client
 * then (Redis's client-output-buffer-limit).  Cleared only by consuming below
 * the limit and calling lattice_resp_out_clear_overflow. */
int lattice_resp_out_overflowed(const lattice_resp_out *o);
void lattice_resp_out_clear_overflow(lattice_resp_out *o);
/* While muted (Redis's CLIENT REPLY OFF / SKIP), every appender returns
 * LATTICE_OK and appends nothing. */
void lattice_resp_out_set_muted(lattice_resp_out *o, int muted);
/* Fill up to max iovecs with the pending bytes, oldest first; returns the
 * count.  Valid until the next append or consume. */
int lattice_resp_out_iov(const lattice_resp_out *o, struct iovec *iov, int max);
/* n bytes were written (n <= pending). */
void lattice_resp_out_consume(lattice_resp_out *o, size_t n);
/* Copy up to cap pending bytes into dst without consuming; returns the count
 * (for tests and for callers that want one contiguous block). */
size_t lattice_resp_out_peek(const lattice_resp_out *o, void *dst, size_t cap);

/*
 * Appenders.  Each appends one complete RESP element in the buffer's protocol
 * or nothing at all, and returns LATTICE_OK, LATTICE_ERR_TOO_LARGE (the limit
 * would be crossed; overflowed is set) or LATTICE_ERR_NOMEM.
 */
lattice_status lattice_resp_add_raw(lattice_resp_out *o, const void *p, size_t n);
/* "+s"; CR and LF in s become spaces (a status line cannot hold them). */
lattice_status lattice_resp_add_simple(lattice_resp_out *o, const char *s, size_t n);
/* "-msg"; msg starts with its code ("ERR syntax error", "NOAUTH ..."), as the
 * texts this header defines.  CR and LF become spaces. */
lattice_status lattice_resp_add_error(lattice_resp_out *o, const char *msg, size_t n);
lattice_status lattice_resp_add_int(lattice_resp_out *o, long long v);
lattice_status lattice_resp_add_bulk(lattice_resp_out *o, const void *p, size_t n);
/* RESP2 "$-1", RESP3 "_". */
lattice_status lattice_resp_add_null(lattice_resp_out *o);
/* RESP2 "*-1", RESP3 "_". */
lattice_status lattice_resp_add_null_array(lattice_resp_out *o);
/* Headers; the caller appends the elements. Map: RESP3 "%n", RESP2 "*2n". */
lattice_status lattice_resp_add_array(lattice_resp_out *o, size_t n);
lattice_status lattice_resp_add_map(lattice_resp_out *o, size_t pairs);
lattice_status lattice_resp_add_set(lattice_resp_out *o, size_t n);
/* RESP3 ",%.17g" (",inf", ",-inf"); RESP2 a bulk string of the same text. */
lattice_status lattice_resp_add_double(lattice_resp_out *o, double d);
/* RESP3 "#t"/"#f"; RESP2 ":1"/":0". */
lattice_status lattice_resp_add_bool(lattice_resp_out *o, int b);
/* RESP3 "=len\r\nfmt:text" (fmt is three characters, "txt" for INFO);
 * RESP2 a plain bulk string of text. */
lattice_status lattice_resp_add_verbatim(lattice_resp_out *o, const char *fmt, const void *p, size_t n);

/* A command as a multibulk request ("*N" then N bulks), whole or not at all:
 * for forwarding parsed commands (their argv dies at the next parse). */
lattice_status lattice_resp_add_command(lattice_resp_out *o, size_t argc, const lattice_resp_arg *argv);

/* ------------------------------------------------------------------------ */
/* Command table                                                             */

typedef enum lattice_resp_cmd_id {
    LATTICE_RESP_CMD_GET = 1, LATTICE_RESP_CMD_SET, LATTICE_RESP_CMD_DEL,
    LATTICE_RESP_CMD_EXISTS, LATTICE_RESP_CMD_MGET, LATTICE_RESP_CMD_MSET,
    LATTICE_RESP_CMD_INCR, LATTICE_RESP_CMD_DECR, LATTICE_RESP_CMD_INCRBY,
    LATTICE_RESP_CMD_DECRBY, LATTICE_RESP_CMD_APPEND, LATTICE_RESP_CMD_STRLEN,
    LATTICE_RESP_CMD_GETDEL, LATTICE_RESP_CMD_EXPIRE, LATTICE_RESP_CMD_PEXPIRE,
    LATTICE_RESP_CMD_TTL, LATTICE_RESP_CMD_PTTL, LATTICE_RESP_CMD_PERSIST,
    LATTICE_RESP_CMD_SETEX, LATTICE_RESP_CMD_PSETEX, LATTICE_RESP_CMD_SETNX, LATTICE_RESP_CMD_GETSET,
    LATTICE_RESP_CMD_GETEX, LATTICE_RESP_CMD_UNLINK, LATTICE_RESP_CMD_TOUCH, LATTICE_RESP_CMD_TYPE,
    LATTICE_RESP_CMD_EXPIREAT, LATTICE_RESP_CMD_PEXPIREAT, LATTICE_RESP_CMD_EXPIRETIME,
    LATTICE_RESP_CMD_PEXPIRETIME, LATTICE_RESP_CMD_GETRANGE, LATTICE_RESP_CMD_SUBSTR,
    LATTICE_RESP_CMD_GETBIT, LATTICE_RESP_CMD_BITCOUNT, LATTICE_RESP_CMD_BITPOS,
    LATTICE_RESP_CMD_LCS, /* last key command of this block */
    LATTICE_RESP_CMD_PING, LATTICE_RESP_CMD_ECHO, LATTICE_RESP_CMD_AUTH,
    LATTICE_RESP_CMD_HELLO, LATTICE_RESP_CMD_SELECT, LATTICE_RESP_CMD_DBSIZE,
    LATTICE_RESP_CMD_INFO, LATTICE_RESP_CMD_QUIT, LATTICE_RESP_CMD_TIME,
    LATTICE_RESP_CMD_COMMAND, LATTICE_RESP_CMD_COMMAND_COUNT, LATTICE_RESP_CMD_COMMAND_INFO,
    LATTICE_RESP_CMD_COMMAND_DOCS, LATTICE_RESP_CMD_COMMAND_LIST, LATTICE_RESP_CMD_COMMAND_GETKEYS,
    LATTICE_RESP_CMD_CLIENT, LATTICE_RESP_CMD_CLIENT_SETNAME, LATTICE_RESP_CMD_CLIENT_GETNAME,
    LATTICE_RESP_CMD_CLIENT_SETINFO, LATTICE_RESP_CMD_CLIENT_ID, LATTICE_RESP_CMD_CLIENT_INFO,
    LATTICE_RESP_CMD_CLIENT_NO_EVICT, LATTICE_RESP_CMD_CLIENT_REPLY,
    LATTICE_RESP_CMD_CLUSTER, LATTICE_RESP_CMD_CLUSTER_INFO, LATTICE_RESP_CMD_CLUSTER_SLOTS,
    LATTICE_RESP_CMD_CLUSTER_SHARDS, LATTICE_RESP_CMD_CLUSTER_NODES,
    LATTICE_RESP_CMD_CLUSTER_KEYSLOT, LATTICE_RESP_CMD_CLUSTER_MYID,
    LATTICE_RESP_CMD_READONLY, LATTICE_RESP_CMD_READWRITE, LATTICE_RESP_CMD_ASKING,
    LATTICE_RESP_CMD_SUB_HELP,   /* COMMAND/CLIENT/CLUSTER/OBJECT/SLOWLOG HELP */
    /* read-modify-write and object commands (respd_rmw.c), keys first */
    LATTICE_RESP_CMD_SETRANGE, LATTICE_RESP_CMD_SETBIT, LATTICE_RESP_CMD_INCRBYFLOAT,
    LATTICE_RESP_CMD_DUMP, LATTICE_RESP_CMD_RESTORE, LATTICE_RESP_CMD_OBJECT_ENCODING,
    LATTICE_RESP_CMD_OBJECT_REFCOUNT, LATTICE_RESP_CMD_OBJECT_IDLETIME, LATTICE_RESP_CMD_OBJECT_FREQ,
    LATTICE_RESP_CMD_MEMORY_USAGE, /* respd_rmw.c's last */
    LATTICE_RESP_CMD_OBJECT, LATTICE_RESP_CMD_MEMORY,
    LATTICE_RESP_CMD_CLIENT_LIST, LATTICE_RESP_CMD_CLIENT_KILL, LATTICE_RESP_CMD_SLOWLOG, LATTICE_RESP_CMD_SLOWLOG_GET,
    LATTICE_RESP_CMD_SLOWLOG_LEN, LATTICE_RESP_CMD_SLOWLOG_RESET, LATTICE_RESP_CMD_MONITOR, LATTICE_RESP_CMD_RESET, /* respd_intro.c */
    LATTICE_RESP_CMD_SCAN, LATTICE_RESP_CMD_KEYS, LATTICE_RESP_CMD_RANDOMKEY, /* keyspace walks (respd_walk.c) */
    LATTICE_RESP_CMD_FLUSHDB, LATTICE_RESP_CMD_FLUSHALL,
    /* transactions and same-slot multi-key commands (respd_tx.c) */
    LATTICE_RESP_CMD_MULTI, LATTICE_RESP_CMD_EXEC, LATTICE_RESP_CMD_DISCARD, LATTICE_RESP_CMD_WATCH,
    LATTICE_RESP_CMD_UNWATCH, LATTICE_RESP_CMD_RENAME, LATTICE_RESP_CMD_RENAMENX, LATTICE_RESP_CMD_COPY,
    LATTICE_RESP_CMD_MSETNX, LATTICE_RESP_CMD_LMOVE, LATTICE_RESP_CMD_RPOPLPUSH,
    /* blocking pops (respd_tx.c): one LATTICE_TXN_BPOP / LMOVE step that waits at the primary */
    LATTICE_RESP_CMD_BLPOP, LATTICE_RESP_CMD_BRPOP, LATTICE_RESP_CMD_BZPOPMIN, LATTICE_RESP_CMD_BZPOPMAX,
    LATTICE_RESP_CMD_LMPOP, LATTICE_RESP_CMD_ZMPOP, LATTICE_RESP_CMD_BLMPOP, LATTICE_RESP_CMD_BZMPOP,
    LATTICE_RESP_CMD_BLMOVE, LATTICE_RESP_CMD_BRPOPLPUSH,
    /* over several sets or sorted sets (respd_tx.c): one LATTICE_TXN_SETOP step */
    LATTICE_RESP_CMD_SINTER, LATTICE_RESP_CMD_SINTERSTORE, LATTICE_RESP_CMD_SINTERCARD, LATTICE_RESP_CMD_SUNION,
    LATTICE_RESP_CMD_SUNIONSTORE, LATTICE_RESP_CMD_SDIFF, LATTICE_RESP_CMD_SDIFFSTORE, LATTICE_RESP_CMD_SMOVE,
    LATTICE_RESP_CMD_ZUNION, LATTICE_RESP_CMD_ZUNIONSTORE, LATTICE_RESP_CMD_ZINTER, LATTICE_RESP_CMD_ZINTERSTORE,
    LATTICE_RESP_CMD_ZINTERCARD, LATTICE_RESP_CMD_ZDIFF, LATTICE_RESP_CMD_ZDIFFSTORE,
    LATTICE_RESP_CMD_ZRANGESTORE, LATTICE_RESP_CMD_GEOSEARCHSTORE, /* respd_tx.c's last */
    /* hashes, lists, sets (respd_coll.c; LATTICE_OP_COLL_*, lattice/coll.h) */
    LATTICE_RESP_CMD_HSET, LATTICE_RESP_CMD_HSETNX, LATTICE_RESP_CMD_HMSET, LATTICE_RESP_CMD_HDEL,
    LATTICE_RESP_CMD_HINCRBY, LATTICE_RESP_CMD_HINCRBYFLOAT, LATTICE_RESP_CMD_HGET, LATTICE_RESP_CMD_HMGET,
    LATTICE_RESP_CMD_HLEN, LATTICE_RESP_CMD_HSTRLEN, LATTICE_RESP_CMD_HEXISTS, LATTICE_RESP_CMD_HKEYS,
    LATTICE_RESP_CMD_HVALS, LATTICE_RESP_CMD_HGETALL, LATTICE_RESP_CMD_HRANDFIELD, LATTICE_RESP_CMD_HSCAN,
    LATTICE_RESP_CMD_LLEN, LATTICE_RESP_CMD_LRANGE, LATTICE_RESP_CMD_LINDEX, LATTICE_RESP_CMD_LPOS,
    LATTICE_RESP_CMD_LPUSH, LATTICE_RESP_CMD_RPUSH, LATTICE_RESP_CMD_LPUSHX, LATTICE_RESP_CMD_RPUSHX,
    LATTICE_RESP_CMD_LPOP, LATTICE_RESP_CMD_RPOP, LATTICE_RESP_CMD_LSET, LATTICE_RESP_CMD_LINSERT,
    LATTICE_RESP_CMD_LREM, LATTICE_RESP_CMD_LTRIM,
    LATTICE_RESP_CMD_SISMEMBER, LATTICE_RESP_CMD_SMISMEMBER, LATTICE_RESP_CMD_SCARD, LATTICE_RESP_CMD_SMEMBERS,
    LATTICE_RESP_CMD_SRANDMEMBER, LATTICE_RESP_CMD_SSCAN, LATTICE_RESP_CMD_SADD, LATTICE_RESP_CMD_SREM,
    LATTICE_RESP_CMD_SPOP,
    LATTICE_RESP_CMD_ZADD, LATTICE_RESP_CMD_ZINCRBY, LATTICE_RESP_CMD_ZREM, LATTICE_RESP_CMD_ZREMRANGEBYRANK,
    LATTICE_RESP_CMD_ZREMRANGEBYSCORE, LATTICE_RESP_CMD_ZREMRANGEBYLEX, LATTICE_RESP_CMD_ZPOPMIN, LATTICE_RESP_CMD_ZPOPMAX,
    LATTICE_RESP_CMD_ZCARD, LATTICE_RESP_CMD_ZSCORE, LATTICE_RESP_CMD_ZMSCORE, LATTICE_RESP_CMD_ZRANK,
    LATTICE_RESP_CMD_ZREVRANK, LATTICE_RESP_CMD_ZCOUNT, LATTICE_RESP_CMD_ZLEXCOUNT, LATTICE_RESP_CMD_ZRANGE,
    LATTICE_RESP_CMD_ZREVRANGE, LATTICE_RESP_CMD_ZRANGEBYSCORE, LATTICE_RESP_CMD_ZREVRANGEBYSCORE, LATTICE_RESP_CMD_ZRANGEBYLEX,
    LATTICE_RESP_CMD_ZREVRANGEBYLEX, LATTICE_RESP_CMD_ZRANDMEMBER, LATTICE_RESP_CMD_ZSCAN,
    /* GEO, on sorted sets (respd_coll.c; GEORADIUS ... STORE goes as GEOSEARCHSTORE does) */
    LATTICE_RESP_CMD_GEOADD, LATTICE_RESP_CMD_GEOPOS, LATTICE_RESP_CMD_GEODIST, LATTICE_RESP_CMD_GEOHASH,
    LATTICE_RESP_CMD_GEORADIUS, LATTICE_RESP_CMD_GEORADIUS_RO, LATTICE_RESP_CMD_GEORADIUSBYMEMBER,
    LATTICE_RESP_CMD_GEORADIUSBYMEMBER_RO, LATTICE_RESP_CMD_GEOSEARCH, /* last of respd_coll.c's */
    LATTICE_RESP_CMD_ID_COUNT_
} lattice_resp_cmd_id;

/* Flags, with Redis's meaning. */
#define LATTICE_RESP_F_WRITE     (1u << 0) /* may modify the keyspace */
#define LATTICE_RESP_F_READONLY  (1u << 1) /* reads keys, never writes */
#define LATTICE_RESP_F_FAST      (1u << 2) /* O(1) or O(log n) */
#define LATTICE_RESP_F_NO_AUTH   (1u << 3) /* allowed before AUTH */
#define LATTICE_RESP_F_DENYOOM   (1u << 4) /* may grow memory */
#define LATTICE_RESP_F_CONTAINER (1u << 5) /* has subcommands (argv[1]) */
#define LATTICE_RESP_F_ADMIN     (1u << 6) /* cluster/topology introspection */
/* numkeys then the keys (LMPOP ...): argv[first_key - 1] counts them; the
 * table's first_key..last_key name the first key only (what routes it) */
#define LATTICE_RESP_F_KEYNUM    (1u << 7)
/* a key after STORE or STOREDIST too (GEORADIUS): two keyword key specs
 * after the first, searched from the argument -arity on */
#define LATTICE_RESP_F_STOREKEY  (1u << 8)

typedef struct lattice_resp_cmd lattice_resp_cmd; /* immutable table entry */

/* Top-level command by name, case-insensitive; NULL when unknown. */
const lattice_resp_cmd *lattice_resp_cmd_lookup(const char *name, size_t len);
/* Subcommand of a container ("slots" of CLUSTER); NULL when unknown. */
const lattice_resp_cmd *lattice_resp_cmd_lookup_sub(const lattice_resp_cmd *parent,
                                                    const char *name, size_t len);

/*
 * Resolve argv to a command (a container's subcommand when it has one) and
 * check its arity, as Redis's processCommand.  Returns the entry, or NULL and
 * writes Redis's error reply text (without "-" and CRLF) into err:
 *   "ERR unknown command 'foo', with args beginning with: 'a' 'b' "
 *   "ERR unknown subcommand 'x'. Try CLUSTER HELP."
 *   "ERR wrong number of arguments for 'get' command" (also MSET without
 *   complete pairs, which Redis checks in the command with the same text)
 * err needs LATTICE_RESP_ERR_MAX bytes.
 */
#define LATTICE_RESP_ERR_MAX 512
const lattice_resp_cmd *lattice_resp_cmd_resolve(size_t argc, const lattice_resp_arg *argv,
                                                 char *err);

const char *lattice_resp_cmd_name(const lattice_resp_cmd *c); /* "get", "cluster|slots" */
lattice_resp_cmd_id lattice_resp_cmd_id_of(const lattice_resp_cmd *c);
int lattice_resp_cmd_arity(const lattice_resp_cmd *c);  /* Redis: -N = at least N */
uint32_t lattice_resp_cmd_flags(const lattice_resp_cmd *c);
/* Redis's ACL categories of the command, space separated ("@read @string @fast"). */
const char *lattice_resp_cmd_acl(const lattice_resp_cmd *c);
/* Key spec as Redis's (first, last, step); last < 0 counts from the end
 * (-1 = last argument); first == 0 = no keys. */
void lattice_resp_cmd_key_spec(const lattice_resp_cmd *c, int *first, int *last, int *step);
/* Indexes into argv of the keys of this call; returns how many were written
 * (at most max).  argc must have passed resolve.  MSET with an odd number of
 * pairs yields only the complete pairs' keys. */
size_t lattice_resp_cmd_keys(const lattice_resp_cmd *c, size_t argc, size_t *idx, size_t max);
/* Number of entries in the table (top level and subcommands), and entry i;
 * for COMMAND COUNT / COMMAND replies. */
size_t lattice_resp_cmd_count(void);
const lattice_resp_cmd *lattice_resp_cmd_at(size_t i);

/*
 * COMMAND replies in Redis 7's shape, for clients that learn key positions
 * from the server (redis-py's cluster client, redis-cli hints):
 * [name, arity, flags (set), first key, last key, step, ACL categories (set),
 *  tips (set), key specs (array of maps), subcommands (array of entries)].
 * A NULL command gives a null (COMMAND INFO of an unknown name).  These are
 * several elements: on a failure part of the reply may already be queued, so
 * the server closes the connection then.
 */
lattice_status lattice_resp_add_command_info(lattice_resp_out *o, const lattice_resp_cmd *c);
/* COMMAND: an array of every top-level command's entry. */
lattice_status lattice_resp_add_command_table(lattice_resp_out *o);
/* HELLO's reply as Redis 7: {server: "redis", version, proto (the buffer's),
 * id, mode: "cluster"|"standalone", role: "master", modules: []}.  Call after
 * switching the buffer to the protocol HELLO asked for.  "redis" because
 * clients (redis-py, redis-cli) branch on it; version is what the server
 * claims to speak (e.g. "7.0.0"). */
lattice_status lattice_resp_add_hello(lattice_resp_out *o, const char *version, long long id,
                                      int cluster_mode);
/* Top-level commands only (COMMAND COUNT). */
size_t lattice_resp_cmd_top_count(void);

/* Redis's error replies (without "-" and CRLF). */
#define LATTICE_RESP_ERR_SYNTAX      "ERR syntax error"
#define LATTICE_RESP_ERR_NOT_INTEGER "ERR value is not an integer or out of range"
#define LATTICE_RESP_ERR_NOAUTH      "NOAUTH Authentication required."
#define LATTICE_RESP_ERR_WRONGPASS   "WRONGPASS invalid username-password pair or user is disabled."
#define LATTICE_RESP_ERR_WRONGTYPE   "WRONGTYPE Operation against a key holding the wrong kind of value"
#define LATTICE_RESP_ERR_NOPASS      "ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?"
#define LATTICE_RESP_ERR_OVERFLOW    "ERR increment or decrement would overflow"
#define LATTICE_RESP_ERR_DB_INDEX    "ERR DB index is out of range"
#define LATTICE_RESP_ERR_NOPROTO     "NOPROTO unsupported protocol version"
#define LATTICE_RESP_ERR_CLIENT_NAME "ERR Client names cannot contain spaces, newlines or special characters."
#define LATTICE_RESP_ERR_BIT_OFFSET  "ERR bit offset is not an integer or out of range"
#define LATTICE_RESP_ERR_CROSSSLOT   "CROSSSLOT Keys in request don't hash to the same slot"
#define LATTICE_RESP_ERR_HELLO_NOAUTH "NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time"

/* "ERR unknown command '<name>', with args beginning with: '<a>' '<b>' " */
void lattice_resp_err_unknown_command(size_t argc, const lattice_resp_arg *argv, char *err);
/* "ERR wrong number of arguments for '<name>' command" */
void lattice_resp_err_arity(const char *name, char *err);
/* "ERR invalid expire time in '<name>' command" */
void lattice_resp_err_expire(const char *name, char *err);

/* ------------------------------------------------------------------------ */
/* Pure helpers                                                              */

/* Redis's string2ll: an optional '-', then digits with no leading zero (except
 * "0" itself), nothing else (no '+', no spaces, not "-0"), within long long,
 * at most 20 characters.  Returns 1 and sets *out, or 0. */
int lattice_resp_string2ll(const char *s, size_t len, long long *out);
/* The shortest decimal text of v into buf (>= 21 bytes); returns its length. */
size_t lattice_resp_ll2string(char *buf, long long v);

/* SET key value [NX|XX] [GET] [EX s|PX ms|EXAT ts|PXAT ms-ts|KEEPTTL] */
#define LATTICE_RESP_SET_NX      (1u << 0)
#define LATTICE_RESP_SET_XX      (1u << 1)
#define LATTICE_RESP_SET_EX      (1u << 2)
#define LATTICE_RESP_SET_PX      (1u << 3)
#define LATTICE_RESP_SET_KEEPTTL (1u << 4)
#define LATTICE_RESP_SET_GET     (1u << 5)
#define LATTICE_RESP_SET_EXAT    (1u << 6)
#define LATTICE_RESP_SET_PXAT    (1u << 7)

typedef struct lattice_resp_set_opts {
    uint32_t flags;
    int64_t expire_at_ms;  /* absolute Unix ms when an expiry option was given, else 0 */
} lattice_resp_set_opts;

/*
 * Parse SET's options from argv[3..argc) (argv[0..2] = SET key value) with
 * Redis 7's rules: NX/XX exclude each other, the four expiry forms and
 * KEEPTTL exclude each other (repeating the same one is allowed; the last
 * value wins), an expiry option needs its value; a bad value is "not an
 * integer", a value <= 0 or one that overflows is "invalid expire time".
 * now_ms is the current Unix time in ms (EX/PX are relative to it).
 * Returns LATTICE_OK, or LATTICE_ERR_INVAL with Redis's reply text in err
 * (LATTICE_RESP_ERR_MAX bytes).
 */
lattice_status lattice_resp_parse_set(size_t argc, const lattice_resp_arg *argv, int64_t now_ms,
                                      lattice_resp_set_opts *opts, char *err);

/* EXPIRE/PEXPIRE key value [NX|XX|GT|LT] */
#define LATTICE_RESP_EXPIRE_NX (1u << 0)
#define LATTICE_RESP_EXPIRE_XX (1u << 1)
#define LATTICE_RESP_EXPIRE_GT (1u << 2)
#define LATTICE_RESP_EXPIRE_LT (1u << 3)

typedef struct lattice_resp_expire_opts {
    uint32_t flags;
    int64_t when_ms;       /* absolute Unix ms; at or before now = delete the key */
} lattice_resp_expire_opts;

/*
 * Parse EXPIRE (unit_ms 1000) or PEXPIRE (unit_ms 1) as Redis 7: options
 * first ("ERR Unsupported option x", "ERR NX and XX, GT or LT options at the
 * same time are not compatible", "ERR GT and LT options at the same time are
 * not compatible"), then the value ("not an integer"; negative allowed;
 * overflow = "ERR invalid expire time in 'expire' command").
 */
lattice_status lattice_resp_parse_expire(size_t argc, const lattice_resp_arg *argv, int unit_ms,
                                         int64_t now_ms, lattice_resp_expire_opts *opts, char *err);

/* HELLO [protover [AUTH username password] [SETNAME clientname]] */
typedef struct lattice_resp_hello_opts {
    int proto;                          /* 2 or 3; 0 = not given (keep current) */
    const lattice_resp_arg *username;   /* AUTH given: both set (point into argv) */
    const lattice_resp_arg *password;
    const lattice_resp_arg *client_name;/* SETNAME given */
} lattice_resp_hello_opts;

/*
 * Parse HELLO's arguments as Redis 7 (authentication itself is the server's):
 * "ERR Protocol version is not an integer or out of range",
 * "NOPROTO unsupported protocol version", "ERR Syntax error in HELLO option
 * 'x'", and the client-name error.  The last AUTH/SETNAME given wins.
 */
lattice_status lattice_resp_parse_hello(size_t argc, const lattice_resp_arg *argv,
                                        lattice_resp_hello_opts *opts, char *err);

/* Redis's client-name rule: only '!'..'~'; empty is allowed. */
int lattice_resp_client_name_ok(const char *name, size_t len);

#endif
