/*
 * The RESP command table (every command docs/RESP.md lists, with Redis 7's arity, flags and
 * key specs), Redis's error wording for unknown commands and wrong arity,
 * and Redis's string2ll.
 *
 * The table is immutable data: safe to read from any thread (its index by
 * name is built once, under pthread_once).
 */
#include "resp_codec.h"

#include <ctype.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

struct lattice_resp_cmd {
    const char *name;       /* lower case; subcommands "parent|sub" */
    lattice_resp_cmd_id id;
    int arity;
    uint32_t flags;
    int first_key, last_key, key_step;
    const struct lattice_resp_cmd *subs; /* containers: subcommand table */
    size_t nsubs;
    struct {                /* COMMAND INFO as Redis 7 answers it; space separated */
        const char *flags, *acl, *tips, *key_flags, *notes;
    } redis;
};

#define W LATTICE_RESP_F_WRITE
#define R LATTICE_RESP_F_READONLY
#define F LATTICE_RESP_F_FAST
#define NA LATTICE_RESP_F_NO_AUTH
#define OOM LATTICE_RESP_F_DENYOOM
#define CT LATTICE_RESP_F_CONTAINER
#define AD LATTICE_RESP_F_ADMIN
#define KN LATTICE_RESP_F_KEYNUM
#define SK LATTICE_RESP_F_STOREKEY

static const struct lattice_resp_cmd command_subs[] = {
    {"command|help", LATTICE_RESP_CMD_SUB_HELP, 2, 0, 0, 0, 0, NULL, 0,
     {"loading stale", "@slow @connection", "", "", ""}},
    {"command|count", LATTICE_RESP_CMD_COMMAND_COUNT, 2, 0, 0, 0, 0, NULL, 0,
     {"loading stale", "@slow @connection", "", "", ""}},
    {"command|info", LATTICE_RESP_CMD_COMMAND_INFO, -2, 0, 0, 0, 0, NULL, 0,
     {"loading stale", "@slow @connection", "nondeterministic_output_order", "", ""}},
    {"command|docs", LATTICE_RESP_CMD_COMMAND_DOCS, -2, 0, 0, 0, 0, NULL, 0,
     {"loading stale", "@slow @connection", "nondeterministic_output_order", "", ""}},
    {"command|list", LATTICE_RESP_CMD_COMMAND_LIST, -2, 0, 0, 0, 0, NULL, 0,
     {"loading stale", "@slow @connection", "nondeterministic_output_order", "", ""}},
    {"command|getkeys", LATTICE_RESP_CMD_COMMAND_GETKEYS, -4, 0, 0, 0, 0, NULL, 0,
     {"loading stale", "@slow @connection", "", "", ""}},
};

static const struct lattice_resp_cmd client_subs[] = {
    {"client|help", LATTICE_RESP_CMD_SUB_HELP, 2, 0, 0, 0, 0, NULL, 0,
     {"loading stale", "@slow @connection", "", "", ""}},
    {"client|setname", LATTICE_RESP_CMD_CLIENT_SETNAME, 3, 0, 0, 0, 0, NULL, 0,
     {"noscript loading stale", "@slow @connection", "", "", ""}},
    {"client|getname", LATTICE_RESP_CMD_CLIENT_GETNAME, 2, 0, 0, 0, 0, NULL, 0,
     {"noscript loading stale", "@slow @connection", "", "", ""}},
    {"client|setinfo", LATTICE_RESP_CMD_CLIENT_SETINFO, 4, 0, 0, 0, 0, NULL, 0,
     {"noscript loading stale", "@slow @connection", "", "", ""}},
    {"client|id", LATTICE_RESP_CMD_CLIENT_ID, 2, 0, 0, 0, 0, NULL, 0,
     {"noscript loading stale", "@slow @connection", "", "", ""}},
    {"client|info", LATTICE_RESP_CMD_CLIENT_INFO, 2, 0, 0, 0, 0, NULL, 0,
     {"noscript loading stale", "@slow @connection", "nondeterministic_output", "", ""}},
    {"client|no-evict", LATTICE_RESP_CMD_CLIENT_NO_EVICT, 3, AD, 0, 0, 0, NULL, 0,
     {"admin noscript loading stale", "@admin @slow @dangerous @connection", "", "", ""}},
    {"client|reply", LATTICE_RESP_CMD_CLIENT_REPLY, 3, 0, 0, 0, 0, NULL, 0,
     {"noscript loading stale", "@slow @connection", "", "", ""}},
    {"client|list", LATTICE_RESP_CMD_CLIENT_LIST, -2, AD, 0, 0, 0, NULL, 0,
     {"admin noscript loading stale", "@admin @slow @dangerous @connection", "nondeterministic_output", "", ""}},
    {"client|kill", LATTICE_RESP_CMD_CLIENT_KILL, -3, AD, 0, 0, 0, NULL, 0,
     {"admin noscript loading stale", "@admin @slow @dangerous @connection", "", "", ""}},
};

static const struct lattice_resp_cmd slowlog_subs[] = {
    {"slowlog|help", LATTICE_RESP_CMD_SUB_HELP, 2, 0, 0, 0, 0, NULL, 0,
     {"loading stale", "@slow", "", "", ""}},
    {"slowlog|get", LATTICE_RESP_CMD_SLOWLOG_GET, -2, AD, 0, 0, 0, NULL, 0,
     {"admin loading stale", "@admin @slow @dangerous", "request_policy:all_nodes nondeterministic_output", "", ""}},
    {"slowlog|len", LATTICE_RESP_CMD_SLOWLOG_LEN, 2, AD, 0, 0, 0, NULL, 0,
     {"admin loading stale", "@admin @slow @dangerous",
      "request_policy:all_nodes response_policy:agg_sum nondeterministic_output", "", ""}},
    {"slowlog|reset", LATTICE_RESP_CMD_SLOWLOG_RESET, 2, AD, 0, 0, 0, NULL, 0,
     {"admin loading stale", "@admin @slow @dangerous", "request_policy:all_nodes response_policy:all_succeeded", "", ""}},
};

static const struct lattice_resp_cmd cluster_subs[] = {
    {"cluster|help", LATTICE_RESP_CMD_SUB_HELP, 2, 0, 0, 0, 0, NULL, 0,
     {"loading stale", "@slow", "", "", ""}},
    {"cluster|info", LATTICE_RESP_CMD_CLUSTER_INFO, 2, AD, 0, 0, 0, NULL, 0,
     {"stale", "@slow", "nondeterministic_output", "", ""}},
    {"cluster|slots", LATTICE_RESP_CMD_CLUSTER_SLOTS, 2, AD, 0, 0, 0, NULL, 0,
     {"stale", "@slow", "nondeterministic_output", "", ""}},
    {"cluster|shards", LATTICE_RESP_CMD_CLUSTER_SHARDS, 2, AD, 0, 0, 0, NULL, 0,
     {"stale", "@slow", "nondeterministic_output", "", ""}},
    {"cluster|nodes", LATTICE_RESP_CMD_CLUSTER_NODES, 2, AD, 0, 0, 0, NULL, 0,
     {"stale", "@slow", "nondeterministic_output", "", ""}},
    {"cluster|keyslot", LATTICE_RESP_CMD_CLUSTER_KEYSLOT, 3, AD, 0, 0, 0, NULL, 0,
     {"stale", "@slow", "", "", ""}},
    {"cluster|myid", LATTICE_RESP_CMD_CLUSTER_MYID, 2, AD, 0, 0, 0, NULL, 0,
     {"stale", "@slow", "", "", ""}},
};

static const struct lattice_resp_cmd memory_subs[] = {
    {"memory|help", LATTICE_RESP_CMD_SUB_HELP, 2, 0, 0, 0, 0, NULL, 0,
     {"loading stale", "@slow", "", "", ""}},
    {"memory|usage", LATTICE_RESP_CMD_MEMORY_USAGE, -3, R, 2, 2, 1, NULL, 0,
     {"readonly", "@read @slow", "", "RO", ""}},
};

static const struct lattice_resp_cmd object_subs[] = {
    {"object|help", LATTICE_RESP_CMD_SUB_HELP, 2, 0, 0, 0, 0, NULL, 0,
     {"loading stale", "@keyspace @slow", "", "", ""}},
    {"object|encoding", LATTICE_RESP_CMD_OBJECT_ENCODING, 3, R, 2, 2, 1, NULL, 0,
     {"readonly", "@keyspace @read @slow", "nondeterministic_output", "RO", ""}},
    {"object|freq", LATTICE_RESP_CMD_OBJECT_FREQ, 3, R, 2, 2, 1, NULL, 0,
     {"readonly", "@keyspace @read @slow", "nondeterministic_output", "RO", ""}},
    {"object|idletime", LATTICE_RESP_CMD_OBJECT_IDLETIME, 3, R, 2, 2, 1, NULL, 0,
     {"readonly", "@keyspace @read @slow", "nondeterministic_output", "RO", ""}},
    {"object|refcount", LATTICE_RESP_CMD_OBJECT_REFCOUNT, 3, R, 2, 2, 1, NULL, 0,
     {"readonly", "@keyspace @read @slow", "nondeterministic_output", "RO", ""}},
};

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

/* Arity and key specs as Redis 7's command JSON files. */
static const struct lattice_resp_cmd table[] = {
    {"get", LATTICE_RESP_CMD_GET, 2, R | F, 1, 1, 1, NULL, 0,
     {"readonly fast", "@read @string @fast", "", "RO access", ""}},
    {"set", LATTICE_RESP_CMD_SET, -3, W | OOM, 1, 1, 1, NULL, 0,
     {"write denyoom", "@write @string @slow", "", "RW access update variable_flags", "RW and ACCESS due to the optional `GET` argument"}},
    {"del", LATTICE_RESP_CMD_DEL, -2, W, 1, -1, 1, NULL, 0,
     {"write", "@keyspace @write @slow", "request_policy:multi_shard response_policy:agg_sum", "RM delete", ""}},
    {"exists", LATTICE_RESP_CMD_EXISTS, -2, R | F, 1, -1, 1, NULL, 0,
     {"readonly fast", "@keyspace @read @fast", "request_policy:multi_shard response_policy:agg_sum", "RO", ""}},
    {"mget", LATTICE_RESP_CMD_MGET, -2, R | F, 1, -1, 1, NULL, 0,
     {"readonly fast", "@read @string @fast", "request_policy:multi_shard", "RO access", ""}},
    {"mset", LATTICE_RESP_CMD_MSET, -3, W | OOM, 1, -1, 2, NULL, 0,
     {"write denyoom", "@write @string @slow", "request_policy:multi_shard response_policy:all_succeeded", "OW update", ""}},
    {"incr", LATTICE_RESP_CMD_INCR, 2, W | OOM | F, 1, 1, 1, NULL, 0,
     {"write denyoom fast", "@write @string @fast", "", "RW access update", ""}},
    {"decr", LATTICE_RESP_CMD_DECR, 2, W | OOM | F, 1, 1, 1, NULL, 0,
     {"write denyoom fast", "@write @string @fast", "", "RW access update", ""}},
    {"incrby", LATTICE_RESP_CMD_INCRBY, 3, W | OOM | F, 1, 1, 1, NULL, 0,
     {"write denyoom fast", "@write @string @fast", "", "RW access update", ""}},
    {"decrby", LATTICE_RESP_CMD_DECRBY, 3, W | OOM | F, 1, 1, 1, NULL, 0,
     {"write denyoom fast", "@write @string @fast", "", "RW access update", ""}},
    {"append", LATTICE_RESP_CMD_APPEND, 3, W | OOM | F, 1, 1, 1, NULL, 0,
     {"write denyoom fast", "@write @string @fast", "", "RW insert", ""}},
    {"strlen", LATTICE_RESP_CMD_STRLEN, 2, R | F, 1, 1, 1, NULL, 0,
     {"readonly fast", "@read @string @fast", "", "RO", ""}},
    {"getdel", LATTICE_RESP_CMD_GETDEL, 2, W | F, 1, 1, 1, NULL, 0,
     {"write fast", "@write @string @fast", "", "RW access delete", ""}},
    {"expire", LATTICE_RESP_CMD_EXPIRE, -3, W | F, 1, 1, 1, NULL, 0,
     {"write fast", "@keyspace @write @fast", "", "RW update", ""}},
    {"pexpire", LATTICE_RESP_CMD_PEXPIRE, -3, W | F, 1, 1, 1, NULL, 0,
     {"write fast", "@keyspace @write @fast", "", "RW update", ""}},
    {"ttl", LATTICE_RESP_CMD_TTL, 2, R | F, 1, 1, 1, NULL, 0,
     {"readonly fast", "@keyspace @read @fast", "nondeterministic_output", "RO access", ""}},
    {"pttl", LATTICE_RESP_CMD_PTTL, 2, R | F, 1, 1, 1, NULL, 0,
     {"readonly fast", "@keyspace @read @fast", "nondeterministic_output", "RO access", ""}},
    {"persist", LATTICE_RESP_CMD_PERSIST, 2, W | F, 1, 1, 1, NULL, 0,
     {"write fast", "@keyspace @write @fast", "", "RW update", ""}},
    {"setex", LATTICE_RESP_CMD_SETEX, 4, W | OOM, 1, 1, 1, NULL, 0,
     {"write denyoom", "@write @string @slow", "", "OW update", ""}},
    {"psetex", LATTICE_RESP_CMD_PSETEX, 4, W | OOM, 1, 1, 1, NULL, 0,
     {"write denyoom", "@write @string @slow", "", "OW update", ""}},
    {"setnx", LATTICE_RESP_CMD_SETNX, 3, W | OOM | F, 1, 1, 1, NULL, 0,
     {"write denyoom fast", "@write @string @fast", "", "OW insert", ""}},
    {"getset", LATTICE_RESP_CMD_GETSET, 3, W | OOM | F, 1, 1, 1, NULL, 0,
     {"write denyoom fast", "@write @string @fast", "", "RW access update", ""}},
    {"getex", LATTICE_RESP_CMD_GETEX, -2, W | F, 1, 1, 1, NULL, 0,
     {"write fast", "@write @string @fast", "", "RW access update", "RW and UPDATE because it changes the TTL"}},
    {"unlink", LATTICE_RESP_CMD_UNLINK, -2, W | F, 1, -1, 1, NULL, 0,
     {"write fast", "@keyspace @write @fast", "request_policy:multi_shard response_policy:agg_sum", "RM delete", ""}},
    {"touch", LATTICE_RESP_CMD_TOUCH, -2, R | F, 1, -1, 1, NULL, 0,
     {"readonly fast", "@keyspace @read @fast", "request_policy:multi_shard response_policy:agg_sum", "RO", ""}},
    {"type", LATTICE_RESP_CMD_TYPE, 2, R | F, 1, 1, 1, NULL, 0,
     {"readonly fast", "@keyspace @read @fast", "", "RO", ""}},
    {"expireat", LATTICE_RESP_CMD_EXPIREAT, -3, W | F, 1, 1, 1, NULL, 0,
     {"write fast", "@keyspace @write @fast", "", "RW update", ""}},
    {"pexpireat", LATTICE_RESP_CMD_PEXPIREAT, -3, W | F, 1, 1, 1, NULL, 0,
     {"write fast", "@keyspace @write @fast", "", "RW update", ""}},
    {"expiretime", LATTICE_RESP_CMD_EXPIRETIME, 2, R | F, 1, 1, 1, NULL, 0,
     {"readonly fast", "@keyspace @read @fast", "", "RO access", ""}},
    {"pexpiretime", LATTICE_RESP_CMD_PEXPIRETIME, 2, R | F, 1, 1, 1, NULL, 0,
     {"readonly fast", "@keyspace @read @fast", "", "RO access", ""}},
    {"getrange", LATTICE_RESP_CMD_GETRANGE, 4, R, 1, 1, 1, NULL, 0,
     {"readonly", "@read @string @slow", "", "RO access", ""}},
    {"substr", LATTICE_RESP_CMD_SUBSTR, 4, R, 1, 1, 1, NULL, 0,
     {"readonly", "@read @string @slow", "", "RO access", ""}},
    {"getbit", LATTICE_RESP_CMD_GETBIT, 3, R | F, 1, 1, 1, NULL, 0,
     {"readonly fast", "@read @bitmap @fast", "", "RO access", ""}},
    {"bitcount", LATTICE_RESP_CMD_BITCOUNT, -2, R, 1, 1, 1, NULL, 0,
     {"readonly", "@read @bitmap @slow", "", "RO access", ""}},
    {"bitpos", LATTICE_RESP_CMD_BITPOS, -3, R, 1, 1, 1, NULL, 0,
     {"readonly", "@read @bitmap @slow", "", "RO access", ""}},
    {"lcs", LATTICE_RESP_CMD_LCS, -3, R, 1, 2, 1, NULL, 0,
     {"readonly", "@read @string @slow", "", "RO access", ""}},
    {"setrange", LATTICE_RESP_CMD_SETRANGE, 4, W | OOM, 1, 1, 1, NULL, 0,
     {"write denyoom", "@write @string @slow", "", "RW update", ""}},
    {"setbit", LATTICE_RESP_CMD_SETBIT, 4, W | OOM, 1, 1, 1, NULL, 0,
     {"write denyoom", "@write @bitmap @slow", "", "RW access update", ""}},
    {"incrbyfloat", LATTICE_RESP_CMD_INCRBYFLOAT, 3, W | OOM | F, 1, 1, 1, NULL, 0,
     {"write denyoom fast", "@write @string @fast", "", "RW access update", ""}},
    {"dump", LATTICE_RESP_CMD_DUMP, 2, R, 1, 1, 1, NULL, 0,
     {"readonly", "@keyspace @read @slow", "nondeterministic_output", "RO access", ""}},
    {"restore", LATTICE_RESP_CMD_RESTORE, -4, W | OOM, 1, 1, 1, NULL, 0,
     {"write denyoom", "@keyspace @write @slow @dangerous", "", "OW update", ""}},
    {"object", LATTICE_RESP_CMD_OBJECT, -2, CT, 0, 0, 0, object_subs, N_OF(object_subs),
     {"", "@slow", "", "", ""}},
    {"memory", LATTICE_RESP_CMD_MEMORY, -2, CT, 0, 0, 0, memory_subs, N_OF(memory_subs),
     {"", "@slow", "", "", ""}},
    {"ping", LATTICE_RESP_CMD_PING, -1, F, 0, 0, 0, NULL, 0,
     {"fast", "@fast @connection", "request_policy:all_shards response_policy:all_succeeded", "", ""}},
    {"echo", LATTICE_RESP_CMD_ECHO, 2, F, 0, 0, 0, NULL, 0,
     {"loading stale fast", "@fast @connection", "", "", ""}},
    {"auth", LATTICE_RESP_CMD_AUTH, -2, F | NA, 0, 0, 0, NULL, 0,
     {"noscript loading stale fast no_auth allow_busy", "@fast @connection", "", "", ""}},
    {"hello", LATTICE_RESP_CMD_HELLO, -1, F | NA, 0, 0, 0, NULL, 0,
     {"noscript loading stale fast no_auth allow_busy", "@fast @connection", "", "", ""}},
    {"select", LATTICE_RESP_CMD_SELECT, 2, F, 0, 0, 0, NULL, 0,
     {"loading stale fast", "@fast @connection", "", "", ""}},
    {"dbsize", LATTICE_RESP_CMD_DBSIZE, 1, R | F, 0, 0, 0, NULL, 0,
     {"readonly fast", "@keyspace @read @fast", "request_policy:all_shards response_policy:agg_sum", "", ""}},
    {"info", LATTICE_RESP_CMD_INFO, -1, 0, 0, 0, 0, NULL, 0,
     {"loading stale", "@slow @dangerous", "nondeterministic_output request_policy:all_shards response_policy:special", "", ""}},
    {"time", LATTICE_RESP_CMD_TIME, 1, F, 0, 0, 0, NULL, 0,
     {"loading stale fast", "@fast", "nondeterministic_output", "", ""}},
    {"quit", LATTICE_RESP_CMD_QUIT, -1, F | NA, 0, 0, 0, NULL, 0,
     {"noscript loading stale fast no_auth allow_busy", "@fast @connection", "", "", ""}},
    {"readonly", LATTICE_RESP_CMD_READONLY, 1, F, 0, 0, 0, NULL, 0,
     {"loading stale fast", "@fast @connection", "", "", ""}},
    {"readwrite", LATTICE_RESP_CMD_READWRITE, 1, F, 0, 0, 0, NULL, 0,
     {"loading stale fast", "@fast @connection", "", "", ""}},
    {"asking", LATTICE_RESP_CMD_ASKING, 1, F, 0, 0, 0, NULL, 0,
     {"fast", "@fast @connection", "", "", ""}},
    {"scan", LATTICE_RESP_CMD_SCAN, -2, R, 0, 0, 0, NULL, 0,
     {"readonly", "@keyspace @read @slow", "nondeterministic_output request_policy:special", "", ""}},
    {"keys", LATTICE_RESP_CMD_KEYS, 2, R, 0, 0, 0, NULL, 0,
     {"readonly", "@keyspace @read @slow @dangerous", "request_policy:all_shards nondeterministic_output_order", "", ""}},
    {"randomkey", LATTICE_RESP_CMD_RANDOMKEY, 1, R, 0, 0, 0, NULL, 0,
     {"readonly", "@keyspace @read @slow", "request_policy:all_shards nondeterministic_output", "", ""}},
    {"flushdb", LATTICE_RESP_CMD_FLUSHDB, -1, W, 0, 0, 0, NULL, 0,
     {"write", "@keyspace @write @slow @dangerous", "request_policy:all_shards response_policy:all_succeeded", "", ""}},
    {"flushall", LATTICE_RESP_CMD_FLUSHALL, -1, W, 0, 0, 0, NULL, 0,
     {"write", "@keyspace @write @slow @dangerous", "request_policy:all_shards response_policy:all_succeeded", "", ""}},
    /* transactions and same-slot multi-key commands (respd_tx.c) */
    {"multi", LATTICE_RESP_CMD_MULTI, 1, F, 0, 0, 0, NULL, 0,
     {"noscript loading stale fast allow_busy", "@fast @transaction", "", "", ""}},
    {"exec", LATTICE_RESP_CMD_EXEC, 1, 0, 0, 0, 0, NULL, 0,
     {"noscript loading stale skip_slowlog", "@slow @transaction", "", "", ""}},
    {"discard", LATTICE_RESP_CMD_DISCARD, 1, F, 0, 0, 0, NULL, 0,
     {"noscript loading stale fast allow_busy", "@fast @transaction", "", "", ""}},
    {"watch", LATTICE_RESP_CMD_WATCH, -2, R | F, 1, -1, 1, NULL, 0,
     {"noscript loading stale fast allow_busy", "@fast @transaction", "", "RO", ""}},
    {"unwatch", LATTICE_RESP_CMD_UNWATCH, 1, F, 0, 0, 0, NULL, 0,
     {"noscript loading stale fast allow_busy", "@fast @transaction", "", "", ""}},
    {"rename", LATTICE_RESP_CMD_RENAME, 3, W, 1, 2, 1, NULL, 0,
     {"write", "@keyspace @write @slow", "", "RW access delete|OW update", ""}},
    {"renamenx", LATTICE_RESP_CMD_RENAMENX, 3, W | F, 1, 2, 1, NULL, 0,
     {"write fast", "@keyspace @write @fast", "", "RW access delete|OW insert", ""}},
    {"copy", LATTICE_RESP_CMD_COPY, -3, W | OOM, 1, 2, 1, NULL, 0,
     {"write denyoom", "@keyspace @write @slow", "", "RO access|OW update", ""}},
    {"msetnx", LATTICE_RESP_CMD_MSETNX, -3, W | OOM, 1, -1, 2, NULL, 0,
     {"write denyoom", "@write @string @slow", "request_policy:multi_shard response_policy:agg_min", "OW insert", ""}},
    {"lmove", LATTICE_RESP_CMD_LMOVE, 5, W | OOM, 1, 2, 1, NULL, 0,
     {"write denyoom", "@write @list @slow", "", "RW access delete|RW insert", ""}},
    {"rpoplpush", LATTICE_RESP_CMD_RPOPLPUSH, 3, W | OOM, 1, 2, 1, NULL, 0,
     {"write denyoom", "@write @list @slow", "", "RW access delete|RW insert", ""}},
    {"blpop", LATTICE_RESP_CMD_BLPOP, -3, W, 1, -2, 1, NULL, 0,
     {"write noscript blocking", "@write @list @slow @blocking", "", "RW access delete", ""}},
    {"brpop", LATTICE_RESP_CMD_BRPOP, -3, W, 1, -2, 1, NULL, 0,
     {"write noscript blocking", "@write @list @slow @blocking", "", "RW access delete", ""}},
    {"bzpopmin", LATTICE_RESP_CMD_BZPOPMIN, -3, W | F, 1, -2, 1, NULL, 0,
     {"write noscript blocking fast", "@write @sortedset @fast @blocking", "", "RW access delete", ""}},
    {"bzpopmax", LATTICE_RESP_CMD_BZPOPMAX, -3, W | F, 1, -2, 1, NULL, 0,
     {"write noscript blocking fast", "@write @sortedset @fast @blocking", "", "RW access delete", ""}},
    /* numkeys commands (KN): routed by their first key (the others must share its slot) */
    {"lmpop", LATTICE_RESP_CMD_LMPOP, -4, W | KN, 2, 2, 1, NULL, 0,
     {"write movablekeys", "@write @list @slow", "", "RW access delete", ""}},
    {"zmpop", LATTICE_RESP_CMD_ZMPOP, -4, W | KN, 2, 2, 1, NULL, 0,
     {"write movablekeys", "@write @sortedset @slow", "", "RW access delete", ""}},
    {"blmpop", LATTICE_RESP_CMD_BLMPOP, -5, W | KN, 3, 3, 1, NULL, 0,
     {"write blocking movablekeys", "@write @list @slow @blocking", "", "RW access delete", ""}},
    {"bzmpop", LATTICE_RESP_CMD_BZMPOP, -5, W | KN, 3, 3, 1, NULL, 0,
     {"write blocking movablekeys", "@write @sortedset @slow @blocking", "", "RW access delete", ""}},
    {"blmove", LATTICE_RESP_CMD_BLMOVE, 6, W | OOM, 1, 2, 1, NULL, 0,
     {"write denyoom noscript blocking", "@write @list @slow @blocking", "", "RW access delete|RW insert", ""}},
    {"brpoplpush", LATTICE_RESP_CMD_BRPOPLPUSH, 4, W | OOM, 1, 2, 1, NULL, 0,
     {"write denyoom noscript blocking", "@write @list @slow @blocking", "", "RW access delete|RW insert", ""}},
    /* over several sets or sorted sets: one LATTICE_TXN_SETOP step (respd_tx.c) */
    {"sinter", LATTICE_RESP_CMD_SINTER, -2, R, 1, -1, 1, NULL, 0,
     {"readonly", "@read @set @slow", "nondeterministic_output_order", "RO access", ""}},
    {"sinterstore", LATTICE_RESP_CMD_SINTERSTORE, -3, W | OOM, 1, -1, 1, NULL, 0,
     {"write denyoom", "@write @set @slow", "", "RW update|RO access", ""}},
    {"sintercard", LATTICE_RESP_CMD_SINTERCARD, -3, R | KN, 2, 2, 1, NULL, 0,
     {"readonly movablekeys", "@read @set @slow", "", "RO access", ""}},
    {"sunion", LATTICE_RESP_CMD_SUNION, -2, R, 1, -1, 1, NULL, 0,
     {"readonly", "@read @set @slow", "nondeterministic_output_order", "RO access", ""}},
    {"sunionstore", LATTICE_RESP_CMD_SUNIONSTORE, -3, W | OOM, 1, -1, 1, NULL, 0,
     {"write denyoom", "@write @set @slow", "", "OW update|RO access", ""}},
    {"sdiff", LATTICE_RESP_CMD_SDIFF, -2, R, 1, -1, 1, NULL, 0,
     {"readonly", "@read @set @slow", "nondeterministic_output_order", "RO access", ""}},
    {"sdiffstore", LATTICE_RESP_CMD_SDIFFSTORE, -3, W | OOM, 1, -1, 1, NULL, 0,
     {"write denyoom", "@write @set @slow", "", "OW update|RO access", ""}},
    {"smove", LATTICE_RESP_CMD_SMOVE, 4, W | F, 1, 2, 1, NULL, 0,
     {"write fast", "@write @set @fast", "", "RW access delete|RW insert", ""}},
    {"zunion", LATTICE_RESP_CMD_ZUNION, -3, R | KN, 2, 2, 1, NULL, 0,
     {"readonly movablekeys", "@read @sortedset @slow", "", "RO access", ""}},
    {"zunionstore", LATTICE_RESP_CMD_ZUNIONSTORE, -4, W | OOM | KN, 1, 1, 1, NULL, 0,
     {"write denyoom movablekeys", "@write @sortedset @slow", "", "OW update|RO access", ""}},
    {"zinter", LATTICE_RESP_CMD_ZINTER, -3, R | KN, 2, 2, 1, NULL, 0,
     {"readonly movablekeys", "@read @sortedset @slow", "", "RO access", ""}},
    {"zinterstore", LATTICE_RESP_CMD_ZINTERSTORE, -4, W | OOM | KN, 1, 1, 1, NULL, 0,
     {"write denyoom movablekeys", "@write @sortedset @slow", "", "OW update|RO access", ""}},
    {"zintercard", LATTICE_RESP_CMD_ZINTERCARD, -3, R | KN, 2, 2, 1, NULL, 0,
     {"readonly movablekeys", "@read @sortedset @slow", "", "RO access", ""}},
    {"zdiff", LATTICE_RESP_CMD_ZDIFF, -3, R | KN, 2, 2, 1, NULL, 0,
     {"readonly movablekeys", "@read @sortedset @slow", "", "RO access", ""}},
    {"zdiffstore", LATTICE_RESP_CMD_ZDIFFSTORE, -4, W | OOM | KN, 1, 1, 1, NULL, 0,
     {"write denyoom movablekeys", "@write @sortedset @slow", "", "OW update|RO access", ""}},
    {"zrangestore", LATTICE_RESP_CMD_ZRANGESTORE, -5, W | OOM, 1, 2, 1, NULL, 0,
     {"write denyoom", "@write @sortedset @slow", "", "OW update|RO access", ""}},
    {"hset", LATTICE_RESP_CMD_HSET, -4, W | OOM | F, 1, 1, 1, NULL, 0,
     {"write denyoom fast", "@write @hash @fast", "", "RW update", ""}},
    {"hsetnx", LATTICE_RESP_CMD_HSETNX, 4, W | OOM | F, 1, 1, 1, NULL, 0,
     {"write denyoom fast", "@write @hash @fast", "", "RW insert", ""}},
    {"hmset", LATTICE_RESP_CMD_HMSET, -4, W | OOM | F, 1, 1, 1, NULL, 0,
     {"write denyoom fast", "@write @hash @fast", "", "RW update", ""}},
    {"hdel", LATTICE_RESP_CMD_HDEL, -3, W | F, 1, 1, 1, NULL, 0,
     {"write fast", "@write @hash @fast", "", "RW delete", ""}},
    {"hincrby", LATTICE_RESP_CMD_HINCRBY, 4, W | OOM | F, 1, 1, 1, NULL, 0,
     {"write denyoom fast", "@write @hash @fast", "", "RW access update", ""}},
    {"hincrbyfloat", LATTICE_RESP_CMD_HINCRBYFLOAT, 4, W | OOM | F, 1, 1, 1, NULL, 0,
     {"write denyoom fast", "@write @hash @fast", "", "RW access update", ""}},
    {"hget", LATTICE_RESP_CMD_HGET, 3, R | F, 1, 1, 1, NULL, 0,
     {"readonly fast", "@read @hash @fast", "", "RO access", ""}},
    {"hmget", LATTICE_RESP_CMD_HMGET, -3, R | F, 1, 1, 1, NULL, 0,
     {"readonly fast", "@read @hash @fast", "", "RO access", ""}},
    {"hlen", LATTICE_RESP_CMD_HLEN, 2, R | F, 1, 1, 1, NULL, 0,
     {"readonly fast", "@read @hash @fast", "", "RO", ""}},
    {"hstrlen", LATTICE_RESP_CMD_HSTRLEN, 3, R | F, 1, 1, 1, NULL, 0,
     {"readonly fast", "@read @hash @fast", "", "RO", ""}},
    {"hexists", LATTICE_RESP_CMD_HEXISTS, 3, R | F, 1, 1, 1, NULL, 0,
     {"readonly fast", "@read @hash @fast", "", "RO", ""}},
    {"hkeys", LATTICE_RESP_CMD_HKEYS, 2, R, 1, 1, 1, NULL, 0,
     {"readonly", "@read @hash @slow", "nondeterministic_output_order", "RO access", ""}},
    {"hvals", LATTICE_RESP_CMD_HVALS, 2, R, 1, 1, 1, NULL, 0,
     {"readonly", "@read @hash @slow", "nondeterministic_output_order", "RO access", ""}},
    {"hgetall", LATTICE_RESP_CMD_HGETALL, 2, R, 1, 1, 1, NULL, 0,
     {"readonly", "@read @hash @slow", "nondeterministic_output_order", "RO access", ""}},
    {"hrandfield", LATTICE_RESP_CMD_HRANDFIELD, -2, R, 1, 1, 1, NULL, 0,
     {"readonly", "@read @hash @slow", "nondeterministic_output", "RO access", ""}},
    {"hscan", LATTICE_RESP_CMD_HSCAN, -3, R, 1, 1, 1, NULL, 0,
     {"readonly", "@read @hash @slow", "nondeterministic_output", "RO access", ""}},
    {"llen", LATTICE_RESP_CMD_LLEN, 2, R | F, 1, 1, 1, NULL, 0,
     {"readonly fast", "@read @list @fast", "", "RO", ""}},
    {"lrange", LATTICE_RESP_CMD_LRANGE, 4, R, 1, 1, 1, NULL, 0,
     {"readonly", "@read @list @slow", "", "RO access", ""}},
    {"lindex", LATTICE_RESP_CMD_LINDEX, 3, R, 1, 1, 1, NULL, 0,
     {"readonly", "@read @list @slow", "", "RO access", ""}},
    {"lpos", LATTICE_RESP_CMD_LPOS, -3, R, 1, 1, 1, NULL, 0,
     {"readonly", "@read @list @slow", "", "RO access", ""}},
    {"lpush", LATTICE_RESP_CMD_LPUSH, -3, W | OOM | F, 1, 1, 1, NULL, 0,
     {"write denyoom fast", "@write @list @fast", "", "RW insert", ""}},
    {"rpush", LATTICE_RESP_CMD_RPUSH, -3, W | OOM | F, 1, 1, 1, NULL, 0,
     {"write denyoom fast", "@write @list @fast", "", "RW insert", ""}},
    {"lpushx", LATTICE_RESP_CMD_LPUSHX, -3, W | OOM | F, 1, 1, 1, NULL, 0,
     {"write denyoom fast", "@write @list @fast", "", "RW insert", ""}},
    {"rpushx", LATTICE_RESP_CMD_RPUSHX, -3, W | OOM | F, 1, 1, 1, NULL, 0,
     {"write denyoom fast", "@write @list @fast", "", "RW insert", ""}},
    {"lpop", LATTICE_RESP_CMD_LPOP, -2, W | F, 1, 1, 1, NULL, 0,
     {"write fast", "@write @list @fast", "", "RW access delete", ""}},
    {"rpop", LATTICE_RESP_CMD_RPOP, -2, W | F, 1, 1, 1, NULL, 0,
     {"write fast", "@write @list @fast", "", "RW access delete", ""}},
    {"lset", LATTICE_RESP_CMD_LSET, 4, W | OOM, 1, 1, 1, NULL, 0,
     {"write denyoom", "@write @list @slow", "", "RW update", ""}},
    {"linsert", LATTICE_RESP_CMD_LINSERT, 5, W | OOM, 1, 1, 1, NULL, 0,
     {"write denyoom", "@write @list @slow", "", "RW insert", ""}},
    {"lrem", LATTICE_RESP_CMD_LREM, 4, W, 1, 1, 1, NULL, 0,
     {"write", "@write @list @slow", "", "RW delete", ""}},
    {"ltrim", LATTICE_RESP_CMD_LTRIM, 4, W, 1, 1, 1, NULL, 0,
     {"write", "@write @list @slow", "", "RW delete", ""}},
    {"sismember", LATTICE_RESP_CMD_SISMEMBER, 3, R | F, 1, 1, 1, NULL, 0,
     {"readonly fast", "@read @set @fast", "", "RO", ""}},
    {"smismember", LATTICE_RESP_CMD_SMISMEMBER, -3, R | F, 1, 1, 1, NULL, 0,
     {"readonly fast", "@read @set @fast", "", "RO access", ""}},
    {"scard", LATTICE_RESP_CMD_SCARD, 2, R | F, 1, 1, 1, NULL, 0,
     {"readonly fast", "@read @set @fast", "", "RO", ""}},
    {"smembers", LATTICE_RESP_CMD_SMEMBERS, 2, R, 1, 1, 1, NULL, 0,
     {"readonly", "@read @set @slow", "nondeterministic_output_order", "RO access", ""}},
    {"srandmember", LATTICE_RESP_CMD_SRANDMEMBER, -2, R, 1, 1, 1, NULL, 0,
     {"readonly", "@read @set @slow", "nondeterministic_output", "RO access", ""}},
    {"sscan", LATTICE_RESP_CMD_SSCAN, -3, R, 1, 1, 1, NULL, 0,
     {"readonly", "@read @set @slow", "nondeterministic_output", "RO access", ""}},
    {"sadd", LATTICE_RESP_CMD_SADD, -3, W | OOM | F, 1, 1, 1, NULL, 0,
     {"write denyoom fast", "@write @set @fast", "", "RW insert", ""}},
    {"srem", LATTICE_RESP_CMD_SREM, -3, W | F, 1, 1, 1, NULL, 0,
     {"write fast", "@write @set @fast", "", "RW delete", ""}},
    {"spop", LATTICE_RESP_CMD_SPOP, -2, W | F, 1, 1, 1, NULL, 0,
     {"write fast", "@write @set @fast", "nondeterministic_output", "RW access delete", ""}},
    {"zadd", LATTICE_RESP_CMD_ZADD, -4, W | OOM | F, 1, 1, 1, NULL, 0,
     {"write denyoom fast", "@write @sortedset @fast", "", "RW update", ""}},
    {"zincrby", LATTICE_RESP_CMD_ZINCRBY, 4, W | OOM | F, 1, 1, 1, NULL, 0,
     {"write denyoom fast", "@write @sortedset @fast", "", "RW access update", ""}},
    {"zrem", LATTICE_RESP_CMD_ZREM, -3, W | F, 1, 1, 1, NULL, 0,
     {"write fast", "@write @sortedset @fast", "", "RW delete", ""}},
    {"zremrangebyrank", LATTICE_RESP_CMD_ZREMRANGEBYRANK, 4, W, 1, 1, 1, NULL, 0,
     {"write", "@write @sortedset @slow", "", "RW delete", ""}},
    {"zremrangebyscore", LATTICE_RESP_CMD_ZREMRANGEBYSCORE, 4, W, 1, 1, 1, NULL, 0,
     {"write", "@write @sortedset @slow", "", "RW delete", ""}},
    {"zremrangebylex", LATTICE_RESP_CMD_ZREMRANGEBYLEX, 4, W, 1, 1, 1, NULL, 0,
     {"write", "@write @sortedset @slow", "", "RW delete", ""}},
    {"zpopmin", LATTICE_RESP_CMD_ZPOPMIN, -2, W | F, 1, 1, 1, NULL, 0,
     {"write fast", "@write @sortedset @fast", "", "RW access delete", ""}},
    {"zpopmax", LATTICE_RESP_CMD_ZPOPMAX, -2, W | F, 1, 1, 1, NULL, 0,
     {"write fast", "@write @sortedset @fast", "", "RW access delete", ""}},
    {"zcard", LATTICE_RESP_CMD_ZCARD, 2, R | F, 1, 1, 1, NULL, 0,
     {"readonly fast", "@read @sortedset @fast", "", "RO", ""}},
    {"zscore", LATTICE_RESP_CMD_ZSCORE, 3, R | F, 1, 1, 1, NULL, 0,
     {"readonly fast", "@read @sortedset @fast", "", "RO access", ""}},
    {"zmscore", LATTICE_RESP_CMD_ZMSCORE, -3, R | F, 1, 1, 1, NULL, 0,
     {"readonly fast", "@read @sortedset @fast", "", "RO access", ""}},
    {"zrank", LATTICE_RESP_CMD_ZRANK, 3, R | F, 1, 1, 1, NULL, 0,
     {"readonly fast", "@read @sortedset @fast", "", "RO access", ""}},
    {"zrevrank", LATTICE_RESP_CMD_ZREVRANK, 3, R | F, 1, 1, 1, NULL, 0,
     {"readonly fast", "@read @sortedset @fast", "", "RO access", ""}},
    {"zcount", LATTICE_RESP_CMD_ZCOUNT, 4, R | F, 1, 1, 1, NULL, 0,
     {"readonly fast", "@read @sortedset @fast", "", "RO access", ""}},
    {"zlexcount", LATTICE_RESP_CMD_ZLEXCOUNT, 4, R | F, 1, 1, 1, NULL, 0,
     {"readonly fast", "@read @sortedset @fast", "", "RO access", ""}},
    {"zrange", LATTICE_RESP_CMD_ZRANGE, -4, R, 1, 1, 1, NULL, 0,
     {"readonly", "@read @sortedset @slow", "", "RO access", ""}},
    {"zrevrange", LATTICE_RESP_CMD_ZREVRANGE, -4, R, 1, 1, 1, NULL, 0,
     {"readonly", "@read @sortedset @slow", "", "RO access", ""}},
    {"zrangebyscore", LATTICE_RESP_CMD_ZRANGEBYSCORE, -4, R, 1, 1, 1, NULL, 0,
     {"readonly", "@read @sortedset @slow", "", "RO access", ""}},
    {"zrevrangebyscore", LATTICE_RESP_CMD_ZREVRANGEBYSCORE, -4, R, 1, 1, 1, NULL, 0,
     {"readonly", "@read @sortedset @slow", "", "RO access", ""}},
    {"zrangebylex", LATTICE_RESP_CMD_ZRANGEBYLEX, -4, R, 1, 1, 1, NULL, 0,
     {"readonly", "@read @sortedset @slow", "", "RO access", ""}},
    {"zrevrangebylex", LATTICE_RESP_CMD_ZREVRANGEBYLEX, -4, R, 1, 1, 1, NULL, 0,
     {"readonly", "@read @sortedset @slow", "", "RO access", ""}},
    {"zrandmember", LATTICE_RESP_CMD_ZRANDMEMBER, -2, R, 1, 1, 1, NULL, 0,
     {"readonly", "@read @sortedset @slow", "nondeterministic_output", "RO access", ""}},
    {"zscan", LATTICE_RESP_CMD_ZSCAN, -3, R, 1, 1, 1, NULL, 0,
     {"readonly", "@read @sortedset @slow", "nondeterministic_output", "RO access", ""}},
    {"geoadd", LATTICE_RESP_CMD_GEOADD, -5, W | OOM, 1, 1, 1, NULL, 0,
     {"write denyoom", "@write @geo @slow", "", "RW update", ""}},
    {"geopos", LATTICE_RESP_CMD_GEOPOS, -2, R, 1, 1, 1, NULL, 0, {"readonly", "@read @geo @slow", "", "RO access", ""}},
    {"geodist", LATTICE_RESP_CMD_GEODIST, -4, R, 1, 1, 1, NULL, 0, {"readonly", "@read @geo @slow", "", "RO access", ""}},
    {"geohash", LATTICE_RESP_CMD_GEOHASH, -2, R, 1, 1, 1, NULL, 0, {"readonly", "@read @geo @slow", "", "RO access", ""}},
    {"georadius", LATTICE_RESP_CMD_GEORADIUS, -6, W | OOM | SK, 1, 1, 1, NULL, 0,
     {"write denyoom movablekeys", "@write @geo @slow", "", "RO access|OW update", ""}},
    {"georadius_ro", LATTICE_RESP_CMD_GEORADIUS_RO, -6, R, 1, 1, 1, NULL, 0,
     {"readonly", "@read @geo @slow", "", "RO access", ""}},
    {"georadiusbymember", LATTICE_RESP_CMD_GEORADIUSBYMEMBER, -5, W | OOM | SK, 1, 1, 1, NULL, 0,
     {"write denyoom movablekeys", "@write @geo @slow", "", "RO access|OW update", ""}},
    {"georadiusbymember_ro", LATTICE_RESP_CMD_GEORADIUSBYMEMBER_RO, -5, R, 1, 1, 1, NULL, 0,
     {"readonly", "@read @geo @slow", "", "RO access", ""}},
    {"geosearch", LATTICE_RESP_CMD_GEOSEARCH, -7, R, 1, 1, 1, NULL, 0,
     {"readonly", "@read @geo @slow", "", "RO access", ""}},
    {"geosearchstore", LATTICE_RESP_CMD_GEOSEARCHSTORE, -8, W | OOM, 1, 2, 1, NULL, 0,
     {"write denyoom", "@write @geo @slow", "", "OW update|RO access", ""}},
    {"command", LATTICE_RESP_CMD_COMMAND, -1, CT, 0, 0, 0, command_subs, N_OF(command_subs),
     {"loading stale", "@slow @connection", "nondeterministic_output_order", "", ""}},
    {"client", LATTICE_RESP_CMD_CLIENT, -2, CT, 0, 0, 0, client_subs, N_OF(client_subs),
     {"", "@slow", "", "", ""}},
    {"slowlog", LATTICE_RESP_CMD_SLOWLOG, -2, CT, 0, 0, 0, slowlog_subs, N_OF(slowlog_subs),
     {"", "@slow", "", "", ""}},
    {"monitor", LATTICE_RESP_CMD_MONITOR, 1, AD, 0, 0, 0, NULL, 0,
     {"admin noscript loading stale", "@admin @slow @dangerous", "", "", ""}},
    {"reset", LATTICE_RESP_CMD_RESET, 1, NA | F, 0, 0, 0, NULL, 0,
     {"noscript loading stale fast no_auth allow_busy", "@fast @connection", "", "", ""}},
    {"cluster", LATTICE_RESP_CMD_CLUSTER, -2, CT, 0, 0, 0, cluster_subs, N_OF(cluster_subs),
     {"", "@slow", "", "", ""}},
};

static const struct lattice_resp_cmd *find(const struct lattice_resp_cmd *t, size_t n,
                                           size_t skip, const char *name, size_t len)
{
    for (size_t i = 0; i < n; i++) {
        const char *nm = t[i].name + skip;
        if (strlen(nm) == len && strncasecmp(nm, name, len) == 0) return &t[i];
    }
    return NULL;
}

/* The top-level table by name: an open-addressing index of the lower-case
 * names' FNV-1a hashes (slot: table index + 1), built once - every command
 * looks its name up, and a scan of 175 names cost the last ones (GEO, the
 * sorted sets) 175 comparisons. */
#define INDEX_SLOTS 1024u
static uint16_t by_name[INDEX_SLOTS];
_Static_assert(N_OF(table) <= INDEX_SLOTS / 2, "the index by name keeps half its slots free");
static pthread_once_t by_name_once = PTHREAD_ONCE_INIT;

static uint32_t name_hash(const char *s, size_t n)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)tolower((unsigned char)s[i])) * 16777619u;
    return h;
}

static void by_name_build(void)
{
    for (size_t i = 0; i < N_OF(table); i++) {
        uint32_t k = name_hash(table[i].name, strlen(table[i].name)) & (INDEX_SLOTS - 1);
        while (by_name[k]) k = (k + 1) & (INDEX_SLOTS - 1);
        by_name[k] = (uint16_t)(i + 1);
    }
}

const lattice_resp_cmd *lattice_resp_cmd_lookup(const char *name, size_t len)
{
    /* Short names only: the longest is 20 bytes (georadiusbymember_ro); this
     * also keeps a NUL inside argv[0] from matching a prefix. */
    if (len == 0 || len > 24 || memchr(name, '\0', len)) return NULL;
    pthread_once(&by_name_once, by_name_build);
    for (uint32_t k = name_hash(name, len) & (INDEX_SLOTS - 1); by_name[k]; k = (k + 1) & (INDEX_SLOTS - 1)) {
        const struct lattice_resp_cmd *c = &table[by_name[k] - 1];
        if (strlen(c->name) == len && strncasecmp(c->name, name, len) == 0) return c;
    }
    return NULL;
}

const lattice_resp_cmd *lattice_resp_cmd_lookup_sub(const lattice_resp_cmd *parent,
                                                    const char *name, size_t len)
{
    if (!parent || !parent->subs || len == 0 || len > 16 || memchr(name, '\0', len)) return NULL;
    return find(parent->subs, parent->nsubs, strlen(parent->name) + 1, name, len);
}

/* printf's "%.*s" of an argument, Redis's way: a C string ends at NUL.  CR
 * and LF become spaces when the reply is sent (addReplyErrorFormat). */
static size_t put_cstr(char *dst, size_t room, const char *s, size_t n, size_t max)
{
    size_t k = 0;
    while (k < n && k < max && s[k] != '\0' && k + 1 < room) {
        char c = s[k];
        dst[k] = (c == '\r' || c == '\n') ? ' ' : c;
        k++;
    }
    dst[k] = '\0';
    return k;
}

void lattice_resp_err_unknown_command(size_t argc, const lattice_resp_arg *argv, char *err)
{
    /* Redis: "unknown command '%.128s', with args beginning with: " then, while
     * the args text is under 128 bytes, "'%.*s' " with 128 - its length. */
    size_t room = LATTICE_RESP_ERR_MAX, k;
    k = (size_t)snprintf(err, room, "ERR unknown command '");
    k += put_cstr(err + k, room - k, argc ? argv[0].ptr : "", argc ? argv[0].len : 0, 128);
    k += (size_t)snprintf(err + k, room - k, "', with args beginning with: ");
    size_t args = 0;
    for (size_t i = 1; i < argc && args < 128; i++) {
        size_t before = k;
        err[k++] = '\'';
        k += put_cstr(err + k, room - k, argv[i].ptr, argv[i].len, 128 - args);
        err[k++] = '\'';
        err[k++] = ' ';
        err[k] = '\0';
        args += k - before;
    }
}

void lattice_resp_err_arity(const char *name, char *err)
{
    snprintf(err, LATTICE_RESP_ERR_MAX, "ERR wrong number of arguments for '%s' command", name);
}

void lattice_resp_err_expire(const char *name, char *err)
{
    snprintf(err, LATTICE_RESP_ERR_MAX, "ERR invalid expire time in '%s' command", name);
}

static int arity_ok(const lattice_resp_cmd *c, size_t argc)
{
    if (c->arity > 0) return argc == (size_t)c->arity;
    return argc >= (size_t)-c->arity;
}

const lattice_resp_cmd *lattice_resp_cmd_resolve(size_t argc, const lattice_resp_arg *argv,
                                                 char *err)
{
    const lattice_resp_cmd *c = argc ? lattice_resp_cmd_lookup(argv[0].ptr, argv[0].len) : NULL;
    if (!c) {
        lattice_resp_err_unknown_command(argc, argv, err);
        return NULL;
    }
    /* Redis 7: a container with an argument resolves to its subcommand; an
     * unknown one is "unknown subcommand", the container alone is checked
     * for its own arity. */
    if (c->subs && argc >= 2) {
        const lattice_resp_cmd *s = lattice_resp_cmd_lookup_sub(c, argv[1].ptr, argv[1].len);
        if (!s) {
            char sub[160], up[16];
            put_cstr(sub, sizeof(sub), argv[1].ptr, argv[1].len, 128);
            size_t i = 0;
            for (; c->name[i] && i + 1 < sizeof(up); i++)
                up[i] = (char)(c->name[i] >= 'a' && c->name[i] <= 'z' ? c->name[i] - 32 : c->name[i]);
            up[i] = '\0';
            snprintf(err, LATTICE_RESP_ERR_MAX, "ERR unknown subcommand '%s'. Try %s HELP.", sub, up);
            return NULL;
        }
        c = s;
    }
    /* MSET's pairs: Redis checks this in msetGenericCommand with the same
     * arity text; doing it here keeps every arity rule in one place. */
    if (!arity_ok(c, argc) || (c->id == LATTICE_RESP_CMD_MSET && argc % 2 == 0)) {
        lattice_resp_err_arity(c->name, err);
        return NULL;
    }
    return c;
}

const char *lattice_resp_cmd_name(const lattice_resp_cmd *c) { return c->name; }
lattice_resp_cmd_id lattice_resp_cmd_id_of(const lattice_resp_cmd *c) { return c->id; }
int lattice_resp_cmd_arity(const lattice_resp_cmd *c) { return c->arity; }
uint32_t lattice_resp_cmd_flags(const lattice_resp_cmd *c) { return c->flags; }
const char *lattice_resp_cmd_acl(const lattice_resp_cmd *c) { return c->redis.acl; }

void lattice_resp_cmd_key_spec(const lattice_resp_cmd *c, int *first, int *last, int *step)
{
    *first = c->first_key, *last = c->last_key, *step = c->key_step;
}

size_t lattice_resp_cmd_keys(const lattice_resp_cmd *c, size_t argc, size_t *idx, size_t max)
{
    if (c->first_key <= 0 || argc <= (size_t)c->first_key) return 0;
    long last = c->last_key >= 0 ? c->last_key : (long)argc + c->last_key;
    if (last >= (long)argc) last = (long)argc - 1;
    size_t n = 0;
    for (long i = c->first_key; i <= last && n < max; i += c->key_step) {
        /* A key whose value slot is missing (MSET k1 v1 k2) is not a key. */
        if (c->key_step > 1 && i + c->key_step - 1 > last) break;
        idx[n++] = (size_t)i;
    }
    return n;
}

size_t lattice_resp_cmd_count(void)
{
    size_t n = N_OF(table);
    for (size_t i = 0; i < N_OF(table); i++) n += table[i].nsubs;
    return n;
}

const lattice_resp_cmd *lattice_resp_cmd_at(size_t i)
{
    for (size_t t = 0; t < N_OF(table); t++) {
        if (i == 0) return &table[t];
        i--;
        if (i < table[t].nsubs) return &table[t].subs[i];
        i -= table[t].nsubs;
    }
    return NULL;
}

/* ------------------------------------------------------------------------ */

int lattice_resp_string2ll(const char *s, size_t len, long long *out)
{
    /* Redis's util.c string2ll, same accept set: LONG_STR_SIZE is 21. */
    if (len == 0 || len >= 21) return 0;
    if (len == 1 && s[0] == '0') {
        if (out) *out = 0;
        return 1;
    }
    size_t i = 0;
    int neg = 0;
    if (s[0] == '-') {
        neg = 1;
        if (++i == len) return 0;
    }
    if (s[i] < '1' || s[i] > '9') return 0;
    unsigned long long v = (unsigned long long)(s[i++] - '0');
    for (; i < len && s[i] >= '0' && s[i] <= '9'; i++) {
        if (v > ULLONG_MAX / 10) return 0;
        v *= 10;
        unsigned d = (unsigned)(s[i] - '0');
        if (v > ULLONG_MAX - d) return 0;
        v += d;
    }
    if (i < len) return 0;
    if (neg) {
        if (v > (unsigned long long)LLONG_MAX + 1) return 0;
        if (out) *out = v == (unsigned long long)LLONG_MAX + 1 ? LLONG_MIN : -(long long)v;
    } else {
        if (v > (unsigned long long)LLONG_MAX) return 0;
        if (out) *out = (long long)v;
    }
    return 1;
}

size_t lattice_resp_ll2string(char *buf, long long v)
{
    char tmp[24];
    size_t n = 0;
    unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
    do {
        tmp[n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    size_t k = 0;
    if (v < 0) buf[k++] = '-';
    while (n) buf[k++] = tmp[--n];
    buf[k] = '\0';
    return k;
}

/* ------------------------------------------------------------------------ */
/* COMMAND / COMMAND INFO entries, byte for byte as Redis 7 answers them     */
/* (addReplyCommandInfo); the words come from the table's `redis` strings.  */

/* Accumulate the first failure of a sequence of appends. */
#define ADD(expr)                                \
    do {                                         \
        lattice_status s_ = (expr);              \
        if (s_ != LATTICE_OK && st == LATTICE_OK) st = s_; \
    } while (0)

static lattice_status add_cstr(lattice_resp_out *o, const char *s)
{
    return lattice_resp_add_bulk(o, s, strlen(s));
}

/* A set of simple strings (bulk strings when bulk) from space-separated
 * words ("" = empty set). */
static lattice_status add_words(lattice_resp_out *o, const char *words, int bulk)
{
    lattice_status st = LATTICE_OK;
    size_t n = 0;
    for (const char *p = words; *p;) {
        p += strspn(p, " ");
        if (*p) n++;
        p += strcspn(p, " ");
    }
    ADD(lattice_resp_add_set(o, n));
    for (const char *p = words; *p;) {
        p += strspn(p, " ");
        size_t k = strcspn(p, " ");
        if (k) ADD(bulk ? lattice_resp_add_bulk(o, p, k) : lattice_resp_add_simple(o, p, k));
        p += k;
    }
    return st;
}

/* find_keys' "range" and its spec (after its "type"). */
static lattice_status add_range(lattice_resp_out *o, int lastkey, int step)
{
    lattice_status st = LATTICE_OK;
    ADD(add_cstr(o, "range"));
    ADD(add_cstr(o, "spec"));
    ADD(lattice_resp_add_map(o, 3));
    ADD(add_cstr(o, "lastkey"));
    ADD(lattice_resp_add_int(o, lastkey));
    ADD(add_cstr(o, "keystep"));
    ADD(lattice_resp_add_int(o, step));
    ADD(add_cstr(o, "limit"));
    ADD(lattice_resp_add_int(o, 0));
    return st;
}

/* A key spec: {[notes,] flags, begin_search {index}, find_keys {range}}.
 * key_flags "A|B" are two specs, one key each (RENAME's source, destination). */
static lattice_status add_one_key_spec(lattice_resp_out *o, const lattice_resp_cmd *c, const char *flags, int index,
                                       int lastkey, bool keynum)
{
    lattice_status st = LATTICE_OK;
    int notes = c->redis.notes[0] != '\0';
    ADD(lattice_resp_add_map(o, 3 + (size_t)notes));
    if (notes) {
        ADD(add_cstr(o, "notes"));
        ADD(add_cstr(o, c->redis.notes));
    }
    ADD(add_cstr(o, "flags"));
    ADD(add_words(o, flags, 0));
    bool two = strchr(c->redis.key_flags, '|') != NULL; /* a keynum spec after a destination's: at its numkeys */
    ADD(add_cstr(o, "begin_search"));
    ADD(lattice_resp_add_map(o, 2));
    ADD(add_cstr(o, "type"));
    ADD(add_cstr(o, "index"));
    ADD(add_cstr(o, "spec"));
    ADD(lattice_resp_add_map(o, 1));
    ADD(add_cstr(o, "index"));
    ADD(lattice_resp_add_int(o, keynum && !two ? index - 1 : index));
    ADD(add_cstr(o, "find_keys"));
    ADD(lattice_resp_add_map(o, 2));
    ADD(add_cstr(o, "type"));
    if (keynum) { /* numkeys at the search's index, the keys after it */
        ADD(add_cstr(o, "keynum"));
        ADD(add_cstr(o, "spec"));
        ADD(lattice_resp_add_map(o, 3));
        ADD(add_cstr(o, "keynumidx"));
        ADD(lattice_resp_add_int(o, 0));
        ADD(add_cstr(o, "firstkey"));
        ADD(lattice_resp_add_int(o, 1));
        ADD(add_cstr(o, "keystep"));
        ADD(lattice_resp_add_int(o, 1));
        return st;
    }
    return add_range(o, lastkey, c->key_step);
}

static size_t n_key_specs(const lattice_resp_cmd *c)
{
    if (c->first_key <= 0) return 0;
    return c->flags & LATTICE_RESP_F_STOREKEY ? 3 : strchr(c->redis.key_flags, '|') ? 2 : 1;
}

/* A keyword spec (GEORADIUS's STORE k): the key after the keyword, searched
 * from the argument startfrom on. */
static lattice_status add_keyword_spec(lattice_resp_out *o, const char *flags, const char *keyword, int startfrom)
{
    lattice_status st = LATTICE_OK;
    ADD(lattice_resp_add_map(o, 3));
    ADD(add_cstr(o, "flags"));
    ADD(add_words(o, flags, 0));
    ADD(add_cstr(o, "begin_search"));
    ADD(lattice_resp_add_map(o, 2));
    ADD(add_cstr(o, "type"));
    ADD(add_cstr(o, "keyword"));
    ADD(add_cstr(o, "spec"));
    ADD(lattice_resp_add_map(o, 2));
    ADD(add_cstr(o, "keyword"));
    ADD(add_cstr(o, keyword));
    ADD(add_cstr(o, "startfrom"));
    ADD(lattice_resp_add_int(o, startfrom));
    ADD(add_cstr(o, "find_keys"));
    ADD(lattice_resp_add_map(o, 2));
    ADD(add_cstr(o, "type"));
    return add_range(o, 0, 1);
}

static lattice_status add_key_specs(lattice_resp_out *o, const lattice_resp_cmd *c)
{
    const char *bar = strchr(c->redis.key_flags, '|');
    if (!bar) /* lastkey relative to the first key, as Redis's key specs */
        return add_one_key_spec(o, c, c->redis.key_flags, c->first_key,
                                c->last_key >= 0 ? c->last_key - c->first_key : c->last_key,
                                c->flags & LATTICE_RESP_F_KEYNUM);
    /* Two: a destination (its one key), then the sources from the next
     * argument on (to last_key: SINTERSTORE's to the end; with
     * LATTICE_RESP_F_KEYNUM counted by that argument: ZUNIONSTORE's). */
    char first[64];
    snprintf(first, sizeof first, "%.*s", (int)(bar - c->redis.key_flags), c->redis.key_flags);
    lattice_status st = add_one_key_spec(o, c, first, c->first_key, 0, false);
    if (c->flags & LATTICE_RESP_F_STOREKEY) {
        int from = c->arity < 0 ? -c->arity : c->arity;
        if (st == LATTICE_OK) st = add_keyword_spec(o, bar + 1, "STORE", from);
        return st == LATTICE_OK ? add_keyword_spec(o, bar + 1, "STOREDIST", from) : st;
    }
    int last = c->last_key < 0 ? c->last_key : c->last_key > c->first_key ? c->last_key - c->first_key - 1 : 0;
    return st == LATTICE_OK ? add_one_key_spec(o, c, bar + 1, c->first_key + 1, last, c->flags & LATTICE_RESP_F_KEYNUM)
                            : st;
}

lattice_status lattice_resp_add_command_info(lattice_resp_out *o, const lattice_resp_cmd *c)
{
    if (!c) return lattice_resp_add_null(o);
    lattice_status st = LATTICE_OK;
    ADD(lattice_resp_add_array(o, 10));
    ADD(add_cstr(o, c->name));
    ADD(lattice_resp_add_int(o, c->arity));
    ADD(add_words(o, c->redis.flags, 0));
    /* Redis's movable keys: 0 0 0, unless a destination's spec comes first */
    bool keynum = (c->flags & LATTICE_RESP_F_KEYNUM) && !strchr(c->redis.key_flags, '|');
    ADD(lattice_resp_add_int(o, keynum ? 0 : c->first_key));
    ADD(lattice_resp_add_int(o, keynum ? 0 : c->last_key));
    ADD(lattice_resp_add_int(o, keynum ? 0 : c->key_step));
    ADD(add_words(o, c->redis.acl, 0));
    ADD(add_words(o, c->redis.tips, 1)); /* Redis sends tips as bulk strings */
    ADD(lattice_resp_add_array(o, n_key_specs(c)));
    if (c->first_key > 0) ADD(add_key_specs(o, c));
    ADD(lattice_resp_add_array(o, c->nsubs));
    for (size_t i = 0; i < c->nsubs; i++) ADD(lattice_resp_add_command_info(o, &c->subs[i]));
    return st;
}

lattice_status lattice_resp_add_command_table(lattice_resp_out *o)
{
    lattice_status st = LATTICE_OK;
    ADD(lattice_resp_add_array(o, N_OF(table)));
    for (size_t i = 0; i < N_OF(table); i++) ADD(lattice_resp_add_command_info(o, &table[i]));
    return st;
}

size_t lattice_resp_cmd_top_count(void) { return N_OF(table); }

lattice_status lattice_resp_add_hello(lattice_resp_out *o, const char *version, long long id,
                                      int cluster_mode)
{
    /* Redis 7's helloCommand reply (not sentinel): 7 pairs, in this order. */
    lattice_status st = LATTICE_OK;
    ADD(lattice_resp_add_map(o, 7));
    ADD(add_cstr(o, "server"));
    ADD(add_cstr(o, "redis"));
    ADD(add_cstr(o, "version"));
    ADD(add_cstr(o, version));
    ADD(add_cstr(o, "proto"));
    ADD(lattice_resp_add_int(o, lattice_resp_out_proto(o)));
    ADD(add_cstr(o, "id"));
    ADD(lattice_resp_add_int(o, id));
    ADD(add_cstr(o, "mode"));
    ADD(add_cstr(o, cluster_mode ? "cluster" : "standalone"));
    ADD(add_cstr(o, "role"));
    ADD(add_cstr(o, "master"));
    ADD(add_cstr(o, "modules"));
    ADD(lattice_resp_add_array(o, 0));
    return st;
}
