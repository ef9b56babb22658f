/*
 * fault_run SCENARIO: a real latticed grid on loopback (default cache:
 * backups=1, sync=full_sync, read_from_backup=true; --failure-detection-ms
 * 1000) under a RESP load from clients on every node, through one fault
 * schedule; the recorded history goes to the checker (history.h), whose
 * verdict is the test's: no timed assertion anywhere.
 *
 * Load: CLIENTS_PER_NODE connections per node. Half of them are "sticky"
 * (they stay on their node, with a reply timeout longer than any pause, so a
 * node that wakes from SIGSTOP answers them from whatever view it has); the
 * others "roam" to the next node when theirs stops answering, as a client
 * that knows several addresses does. Each does SET with a value no other
 * write carries and GET on REGISTERS keys, INCR and GET on COUNTERS keys, one
 * operation at a time, recording invoke and completion (monotonic ns). A
 * write or INCR without an answer, or answered with an error, is recorded as
 * unknown: it may have happened. Beside them, SET_CLIENTS_PER_NODE set
 * clients per node (sticky and roaming too) run Jepsen's set test: pipelined
 * SETs, each of a key never written before with its own value. And
 * TXN_CLIENTS_PER_NODE transaction clients per node run Elle's list-append
 * workload (txn.h): MULTI, one to four appends of unique tokens and reads of
 * keys of one slot - every other key a string (APPEND, GET), the others a
 * list (RPUSH, LRANGE: no element lost or twice, reads in one order) - or,
 * every other transaction, of keys of several slots (a commit
 * across partitions) - EXEC; the keys rotate every TXN_EPOCH_S so the lists
 * stay short.  And BANK_CLIENTS_PER_NODE bank clients per node move money
 * between BANK_ACCOUNTS accounts of their own slots (MULTI DECRBY INCRBY
 * EXEC) and audit them (MGET of all): every audit that answers, and the
 * final one through every live node, must see the whole total.
 * After the schedule the load goes on until MIN_OK_AFTER_FAULT operations
 * succeeded after the last fault (bounded), then stops; the grid must settle
 * (every partition one primary and its backups, all OWNING), then every key
 * is read through every live node - the registers and counters, every
 * set key, which must read back through every node if it was acknowledged,
 * and every list-append key (a read-only transaction a slot); the
 * transactions' history must be strictly serializable (tx_check).
 * FAULT_SELFTEST_LOSE=1 deletes one acknowledged set key and the first
 * list-append key, and takes one unit from a bank account, before that
 * read: a self-test of the set check, the transaction check and the bank
 * check (the run must fail on all three).
 *
 * Scenarios: steady (no fault), kill_primary, kill_coordinator, restart_loop,
 * join_leave, two_joins, stop_primary, stop_coordinator, kill_during_rebalance
 * (which also reads back every acknowledged preloaded entry).
 * FAULT_SEED=n fixes the schedule's random choices (which node, how long),
 * the clients' operation mix and values; thread timing is never reproducible,
 * so a replay repeats the schedule, not the interleaving. FAULT_CACHE=SPEC
 * runs the schedule on another cache config; FAULT_FIGURES=FILE appends the
 * summary line to FILE. A failing run keeps its history file and the nodes'
 * logs and prints how to re-check and replay.
 */
#include <hiredis.h>
#include <inttypes.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "history.h"
#include "netns.h"
#include "txn.h"

#define MAX_NODES 6
#define CLIENTS_PER_NODE 4
#define MAX_CLIENTS (MAX_NODES * CLIENTS_PER_NODE)
#define REGISTERS 5
#define COUNTERS 2
#define FD_MS 1000
#define MAX_OPS_PER_CLIENT 200000
#define MIN_OK_OPS 1000      /* fewer: the verdict would mean little */
#define MIN_OK_AFTER_FAULT 100
#define AFTER_FAULT_MAX_MS 120000 /* run_until_enough's bound */
/* The set workload: per node a sticky and a roaming client, each sending
 * pipelined batches of SET_BATCH writes of new keys, a pause between them. */
#define SET_CLIENTS_PER_NODE 2
#define MAX_SET_CLIENTS (MAX_NODES * SET_CLIENTS_PER_NODE)
#define SET_BATCH 16
#define SET_PAUSE_MS 20 /* unpaced, 6 clients wrote 13,000 keys/s and hit their bound in 20 s */
#define SET_MAX_PER_CLIENT 40000
#define SET_READ_BATCH 1000 /* GETs pipelined at a time by the final set read */
/* The list-append transactions: keys {la<epoch><group>}k<k>, TXN_GROUPS
 * slots of TXN_KEYS keys an epoch, a new epoch every TXN_EPOCH_S. */
#define TXN_CLIENTS_PER_NODE 1
#define MAX_TXN_CLIENTS (MAX_NODES * TXN_CLIENTS_PER_NODE)
#define TXN_GROUPS 4
#define TXN_KEYS 3
#define TXN_EPOCH_S 5
#define TXN_MAX_MOPS 4
#define TXN_PAUSE_MS 5
/* The bank: BANK_ACCOUNTS accounts of their own slots, transfers between
 * them (MULTI DECRBY INCRBY EXEC: a commit across partitions) and audits
 * (an MGET of all: a read across partitions), BANK_CLIENTS_PER_NODE clients
 * per node. */
#define BANK_ACCOUNTS 8
#define BANK_START 1000
#define BANK_CLIENTS_PER_NODE 1
#define BANK_PAUSE_MS 5
#define MAX_BANK_CLIENTS (MAX_NODES * BANK_CLIENTS_PER_NODE)
#define MIN_BANK_TRANSFERS 20
#define MIN_OK_TXNS 200

/* The defaults, spelled out; FAULT_CACHE=SPEC runs the same schedules on
 * another configuration (to tell what read_from_backup or a sync mode
 * changes), and the verdict still decides. */
static const char *const DEFAULT_CACHE = "default:backups=1,sync=full_sync,read_from_backup=true";
/* Two nodes cut off at once are two failures for the majority: with one
 * backup, the partitions whose both copies were on the cut-off side would
 * have no copy there (docs/CONSISTENCY.md, "Network partitions"). */
static const char *const TWO_BACKUPS_CACHE = "default:backups=2,sync=full_sync,read_from_backup=true";
static const char *cache_spec, *own_cache;

typedef struct grid {
    int peer_base, resp_base, capacity;
    char finder[256];
    bool net;  /* in network namespaces (partition schedules): nodes at f.host[i], RESP port 6379 */
    fnet f;
    it_proc *proc[MAX_NODES];
    int incarnation[MAX_NODES];
    _Atomic bool up[MAX_NODES]; /* read by roaming clients */
} grid;

static grid g;
static const char *scenario;
static uint64_t seed, sched_rng;
static _Atomic bool load_stop;
static _Atomic int64_t load_deadline;
static int64_t last_fault_ns; /* when the last fault was undone or taken */
/* Partition schedules: when the cut began, which nodes it cut off, and
 * the "no quorum" refusals each node's clients received after it. */
static _Atomic int64_t cut_ns;
static bool cut_off[MAX_NODES];
static _Atomic long no_quorum[MAX_NODES];

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static uint64_t rnd(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("fault %s: [%.1f s] ", scenario, (double)now_ns() / 1e9);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    fflush(stdout);
}

static void msleep(int ms) { usleep((useconds_t)ms * 1000); }

/* ---- the grid ---- */

#define NET_RESP_PORT 6379

static void start_net_node(int i, const char *name)
{
    char fd[16];
    snprintf(fd, sizeof fd, "%d", FD_MS);
    const char *argv[] = {LATTICED_PATH, "--host", g.f.host[i], "--port", "47500", "--port-range", "1", "--ip-finder",
                          g.f.finder, "--failure-detection-ms", fd, "--resp-port", "6379", "--cache", cache_spec, NULL};
    g.proc[i] = it_spawn(name, g.f.ns[i], argv);
}

static bool persist_dirs; /* the scenario's servers run with --data-dir (one per node, kept over restarts) */

static void start_node(int i)
{
    char port[16], rport[16], fd[16], name[32];
    snprintf(port, sizeof port, "%d", g.peer_base + i);
    snprintf(rport, sizeof rport, "%d", g.resp_base + i);
    snprintf(fd, sizeof fd, "%d", FD_MS);
    snprintf(name, sizeof name, "s%d-%d", i, g.incarnation[i]++);
    if (g.net) {
        start_net_node(i, name);
        if (!g.proc[i]) exit(1);
        atomic_store(&g.up[i], true);
        return;
    }
    char dir[600];
    snprintf(dir, sizeof dir, "%s/data%d", it_dir(), i);
    const char *args[] = {"--port", port, "--port-range", "1", "--ip-finder", g.finder, "--failure-detection-ms", fd,
                          "--resp-port", rport, "--cache", cache_spec, persist_dirs ? "--data-dir" : NULL, dir, NULL};
    g.proc[i] = it_latticed(name, args);
    if (!g.proc[i]) {
        fprintf(stderr, "cannot start node %d\n", i);
        exit(1);
    }
    atomic_store(&g.up[i], true);
}

static void kill_node(int i, int sig)
{
    const char *name = sig == SIGKILL ? "kill -9" : sig == SIGTERM ? "SIGTERM" : sig == SIGSTOP ? "SIGSTOP" : "SIGCONT";
    say("%s node %d (pid %d)", name, i, (int)g.proc[i]->pid);
    if (sig == SIGKILL || sig == SIGTERM) atomic_store(&g.up[i], false);
    it_signal(g.proc[i], sig);
    if (sig == SIGKILL || sig == SIGTERM) it_wait_exit(g.proc[i], 30000);
}

static redisContext *connect_node(int i, int timeout_ms)
{
    struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};
    redisContext *c = g.net ? redisConnectWithTimeout(g.f.host[i], NET_RESP_PORT, tv)
                            : redisConnectWithTimeout("127.0.0.1", g.resp_base + i, tv);
    if (!c || c->err) {
        if (c) redisFree(c);
        return NULL;
    }
    redisSetTimeout(c, tv);
    return c;
}

static bool serving(void *ctx)
{
    redisContext *c = connect_node(*(int *)ctx, 2000);
    if (!c) return false;
    redisReply *r = redisCommand(c, "SET __ready 1");
    bool ok = r && r->type == REDIS_REPLY_STATUS;
    if (r) freeReplyObject(r);
    redisFree(c);
    return ok;
}

static bool wait_serving(int i)
{
    if (it_wait_for(serving, &i, 60000)) return true;
    say("node %d never served a SET", i);
    return false;
}

/* The CLI's JSON answer; NULL when it failed.  An exit status of ok_status
 * (besides 0) still counts as an answer: `verify` exits 3 with its
 * conflicts. */
static json_t *cli_json_st(const char *what, int ok_status)
{
    char cmd[1024], where[128] = "";
    /* In namespaces the CLI runs in the ctl one: a client node must reach
     * every server, and they it. */
    if (g.net) snprintf(where, sizeof where, "ip netns exec %s ", g.f.ctl);
    snprintf(cmd, sizeof cmd, "%s%s%s%s --timeout-ms 5000 --ip-finder '%s' --json %s 2>>%s/cli-errors.log", where,
             LATTICE_CLI_PATH, g.net ? " --host " : "", g.net ? g.f.ctl_host : "", g.finder, what, it_dir());
    FILE *f = popen(cmd, "r");
    if (!f) return NULL;
    static char buf[1 << 21];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    int st = pclose(f);
    if (!WIFEXITED(st) || (WEXITSTATUS(st) != 0 && WEXITSTATUS(st) != ok_status)) return NULL;
    return json_loads(buf, 0, NULL);
}

static json_t *cli_json(const char *what)
{
    return cli_json_st(what, 0);
}

/* The cache's backups (from its spec; 1 when it names none). */
static long spec_backups(void)
{
    const char *b = strstr(cache_spec, "backups=");
    return b ? strtol(b + 8, NULL, 10) : 1;
}

/* Every partition of `default`: one primary and min(backups, servers-1)
 * backups, all OWNING, over `*(int *)ctx` servers. */
static bool balanced(void *ctx)
{
    long servers = *(int *)ctx, copies = spec_backups() + 1 < servers ? spec_backups() + 1 : servers;
    json_t *pj = cli_json("partitions default");
    if (!pj) return false;
    bool ok = json_integer_value(json_object_get(pj, "lost")) == 0 &&
              json_integer_value(json_object_get(pj, "under_replicated")) == 0 &&
              json_integer_value(json_object_get(json_object_get(pj, "balance"), "nodes")) == servers;
    json_t *p, *o;
    size_t i, k;
    json_array_foreach(json_object_get(pj, "partitions"), i, p) {
        long prim = 0, n = 0;
        json_array_foreach(json_object_get(p, "owners"), k, o) {
            n++;
            ok &= !strcmp(json_string_value(json_object_get(o, "state")), "OWNING");
            prim += !strcmp(json_string_value(json_object_get(o, "role")), "primary");
        }
        ok &= prim == 1 && n == copies;
    }
    json_decref(pj);
    return ok;
}

static bool settled = true; /* false once a wait for balance timed out */

static void wait_balanced(int servers)
{
    int64_t t0 = now_ns();
    if (it_wait_for(balanced, &servers, 90000)) {
        say("balanced over %d servers after %.2f s", servers, (double)(now_ns() - t0) / 1e9);
    } else {
        say("NOT balanced over %d servers within 90 s", servers);
        settled = false;
    }
}

static bool rebalancing(void *ctx)
{
    (void)ctx;
    json_t *j = cli_json("rebalance");
    bool busy = j && json_is_true(json_object_get(j, "in_progress"));
    if (j) json_decref(j);
    return busy;
}

/* The node index of a RESP or peer port (on loopback) or address (in
 * namespaces), -1 if none. */
static int node_of(const char *ip, int port, int base)
{
    if (!g.net) return port >= base && port < base + g.capacity ? port - base : -1;
    for (int i = 0; ip && i < g.capacity; i++)
        if (!strcmp(ip, g.f.host[i])) return i;
    return -1;
}

static int coordinator(void)
{
    const char *extra[] = {"--host", g.f.ctl_host, NULL};
    json_t *top = g.net ? it_top(g.finder, extra, g.f.ctl) : it_top(g.finder, NULL, NULL);
    if (!top) return -1;
    const char *id = json_string_value(json_object_get(top, "coordinator"));
    int idx = -1;
    json_t *n;
    size_t i;
    json_array_foreach(json_object_get(top, "nodes"), i, n) {
        const char *nid = json_string_value(json_object_get(n, "id"));
        const char *cid = json_string_value(json_object_get(n, "consistent_id"));
        const char *colon = cid ? strrchr(cid, ':') : NULL;
        char ip[64];
        snprintf(ip, sizeof ip, "%.*s", colon ? (int)(colon - cid) : 0, cid ? cid : "");
        if (id && nid && colon && !strcmp(id, nid)) idx = node_of(ip, atoi(colon + 1), g.peer_base);
    }
    json_decref(top);
    return idx;
}

/* The nodes that serve `key` - primary, then its first backup - as node
 * `via` sees them (-1 if unknown). */
static void owners_of(const char *key, int via, int *primary, int *backup)
{
    *primary = *backup = -1;
    redisContext *c = connect_node(via, 5000);
    if (!c) return;
    redisReply *s = redisCommand(c, "CLUSTER KEYSLOT %s", key);
    redisReply *r = s && s->type == REDIS_REPLY_INTEGER ? redisCommand(c, "CLUSTER SLOTS") : NULL;
    for (size_t i = 0; r && r->type == REDIS_REPLY_ARRAY && i < r->elements; i++) {
        redisReply *e = r->element[i];
        if (e->elements < 3 || s->integer < e->element[0]->integer || s->integer > e->element[1]->integer) continue;
        if (e->element[2]->elements >= 2)
            *primary = node_of(e->element[2]->element[0]->str, (int)e->element[2]->element[1]->integer, g.resp_base);
        if (e->elements >= 4 && e->element[3]->elements >= 2)
            *backup = node_of(e->element[3]->element[0]->str, (int)e->element[3]->element[1]->integer, g.resp_base);
    }
    if (r) freeReplyObject(r);
    if (s) freeReplyObject(s);
    redisFree(c);
}

/* The node that serves `key` as primary, as node `via` sees it; -1 if unknown. */
static int primary_of(const char *key, int via)
{
    int p, b;
    owners_of(key, via, &p, &b);
    return p;
}

/* A server that is primary of some register key and is not the coordinator. */
static int primary_not_coordinator(int coord)
{
    for (int k = 0; k < REGISTERS; k++) {
        char key[16];
        snprintf(key, sizeof key, "reg%d", k);
        int p = primary_of(key, coord >= 0 ? coord : 0);
        if (p >= 0 && p != coord) {
            say("node %d is primary of %s (coordinator: node %d)", p, key, coord);
            return p;
        }
    }
    return coord == 1 ? 2 : 1;
}

/* ---- the load ---- */

/* One SET of the set workload (Jepsen's set test): key set:<client>:<seq>,
 * written once, with a value no other write carries. */
typedef struct set_op {
    int64_t invoke, complete; /* complete: 0 unless acknowledged */
    int8_t node;              /* the node the client sent it to */
    uint8_t state;            /* SET_ACKED, SET_UNKNOWN */
} set_op;

enum { SET_UNKNOWN, SET_ACKED };

typedef struct client {
    int id, home;
    int node; /* where its connection goes */
    bool sticky;
    uint64_t rng;
    int64_t seq;
    fh_history h;
    /* h is appended by the client's thread and counted by the main thread
     * while the load runs (run_until_enough). */
    pthread_mutex_t lock;
    pthread_t thread;
    set_op *sops; /* a set client's writes, index = seq (NULL: a register/counter client) */
    int n_sops;
    bool txn;       /* a list-append transaction client: its history is th */
    tx_history th;
    bool bank;      /* a bank client (transfers and audits) */
} client;

static client clients[MAX_CLIENTS];
static int n_clients;
static client set_clients[MAX_SET_CLIENTS];
static int n_set_clients;
static client txn_clients[MAX_TXN_CLIENTS];
static int n_txn_clients;
static client bank_clients[MAX_BANK_CLIENTS];
static int n_bank_clients;
static int64_t txn_t0;
static _Atomic uint32_t txn_last_epoch;
static int n_nodes_max; /* nodes a roaming client may try */

static void record(client *c, fh_kind kind, const char *key, int64_t value, int64_t inv, fh_outcome oc)
{
    fh_op o = {.invoke = inv, .complete = oc == FH_UNKNOWN ? FH_INF : now_ns(), .value = value, .client = c->id,
               .node = c->node, .kind = kind, .outcome = oc};
    snprintf(o.key, sizeof o.key, "%s", key);
    pthread_mutex_lock(&c->lock);
    fh_add(&c->h, &o);
    pthread_mutex_unlock(&c->lock);
}

/* One operation on c's connection; false when the connection broke. */
static bool one_op(client *c, redisContext *rc)
{
    char key[16];
    uint64_t pick = rnd(&c->rng) % 100;
    fh_kind kind;
    int64_t value = FH_NIL;
    redisReply *r;
    int64_t inv = now_ns();
    if (pick < 15) {
        kind = FH_INCR;
        snprintf(key, sizeof key, "ctr%d", (int)(rnd(&c->rng) % COUNTERS));
        r = redisCommand(rc, "INCR %s", key);
    } else if (pick < 55) {
        kind = FH_WRITE;
        snprintf(key, sizeof key, "reg%d", (int)(rnd(&c->rng) % REGISTERS));
        value = (int64_t)(c->id + 1) * 1000000000LL + ++c->seq;
        r = redisCommand(rc, "SET %s %" PRId64, key, value);
    } else {
        kind = FH_READ;
        bool ctr = pick >= 95;
        snprintf(key, sizeof key, ctr ? "ctr%d" : "reg%d",
                 (int)(rnd(&c->rng) % (uint64_t)(ctr ? COUNTERS : REGISTERS)));
        r = redisCommand(rc, "GET %s", key);
    }
    if (!r) {
        record(c, kind, key, value, inv, FH_UNKNOWN);
        return false;
    }
    fh_outcome oc = FH_OK;
    if (r->type == REDIS_REPLY_ERROR) {
        oc = kind == FH_READ ? FH_FAIL : FH_UNKNOWN;
        int64_t cut = atomic_load(&cut_ns);
        if (cut && inv > cut && strstr(r->str, "no quorum")) atomic_fetch_add(&no_quorum[c->node], 1);
    } else if (kind == FH_INCR) {
        oc = r->type == REDIS_REPLY_INTEGER ? FH_OK : FH_UNKNOWN;
        value = r->integer;
    } else if (kind == FH_READ) {
        if (r->type == REDIS_REPLY_STRING) value = strtoll(r->str, NULL, 10);
        else if (r->type != REDIS_REPLY_NIL) oc = FH_FAIL;
    } else if (r->type != REDIS_REPLY_STATUS) {
        oc = FH_UNKNOWN;
    }
    record(c, kind, key, value, inv, oc);
    freeReplyObject(r);
    return true;
}

static void set_key(char *buf, size_t cap, int client, int seq) { snprintf(buf, cap, "set:%d:%d", client, seq); }
static void set_value(char *buf, size_t cap, int client, int seq) { snprintf(buf, cap, "v:%d:%d", client, seq); }

/* One pipelined batch of SET_BATCH set writes, each of a key never written
 * before; false when the connection broke.  Only +OK acknowledges one: an
 * error reply, a missing reply or a broken connection leaves it unknown
 * (with this grid an error does not prove the write was not applied). */
static bool set_batch(client *c, redisContext *rc)
{
    int first = c->n_sops, n = SET_BATCH < SET_MAX_PER_CLIENT - first ? SET_BATCH : SET_MAX_PER_CLIENT - first;
    int64_t inv = now_ns();
    for (int k = first; k < first + n; k++) {
        char key[32], val[32];
        set_key(key, sizeof key, c->id, k);
        set_value(val, sizeof val, c->id, k);
        c->sops[k] = (set_op){.invoke = inv, .node = (int8_t)c->node, .state = SET_UNKNOWN};
        redisAppendCommand(rc, "SET %s %s", key, val);
    }
    c->n_sops = first + n; /* appended: from here on each may have been applied */
    for (int k = first; k < first + n; k++) {
        redisReply *r;
        if (redisGetReply(rc, (void **)&r) != REDIS_OK || !r) return false;
        if (r->type == REDIS_REPLY_STATUS && !strcmp(r->str, "OK")) {
            c->sops[k].state = SET_ACKED;
            c->sops[k].complete = now_ns();
        }
        freeReplyObject(r);
    }
    return true;
}

/* ---- the list-append transactions ---- */

static uint32_t txn_key_id(uint32_t epoch, int group, int k) { return epoch * 100 + (uint32_t)group * 10 + (uint32_t)k; }

static void txn_key_name(char *buf, size_t cap, uint32_t id)
{
    snprintf(buf, cap, "{la%u}k%u", id / 10, id % 10); /* one slot per epoch and group */
}

/* Every other key of the list-append workload is a Redis list (RPUSH of the
 * token, LRANGE 0 -1 to read it: the collection workload of issue 35), the
 * others a string (APPEND of "token,", GET). */
static bool txn_is_list(uint32_t id) { return id % 2 == 0; }

static void txn_append_read(redisContext *rc, uint32_t id, const int64_t *value)
{
    char key[32];
    txn_key_name(key, sizeof key, id);
    if (value && txn_is_list(id)) redisAppendCommand(rc, "RPUSH %s %" PRId64, key, *value);
    else if (value) redisAppendCommand(rc, "APPEND %s %" PRId64 ",", key, *value);
    else if (txn_is_list(id)) redisAppendCommand(rc, "LRANGE %s 0 -1", key);
    else redisAppendCommand(rc, "GET %s", key);
}

static void list_push(int64_t **list, size_t *n, size_t *cap, int64_t v)
{
    if (*n == *cap) {
        *cap = *cap ? *cap * 2 : 256;
        *list = realloc(*list, *cap * sizeof **list);
        if (!*list) exit(1);
    }
    (*list)[(*n)++] = v;
}

/* A read of the list-append workload as a list - a GET's ("v1,v2,...," or
 * nil) or an LRANGE's (an array of the tokens); false if it is neither. */
static bool txn_parse_list(const redisReply *r, int64_t **list, size_t *n, size_t *cap)
{
    *n = 0;
    if (r->type == REDIS_REPLY_NIL) return true;
    if (r->type == REDIS_REPLY_ARRAY) {
        for (size_t i = 0; i < r->elements; i++) {
            const redisReply *e = r->element[i];
            char *end;
            if (e->type != REDIS_REPLY_STRING || !e->len) return false;
            long long v = strtoll(e->str, &end, 10);
            if (*end) return false;
            list_push(list, n, cap, v);
        }
        return true;
    }
    if (r->type != REDIS_REPLY_STRING) return false;
    const char *p = r->str, *end = r->str + r->len;
    while (p < end) {
        char *e;
        long long v = strtoll(p, &e, 10);
        if (e == p || e >= end || *e != ',') return false;
        list_push(list, n, cap, v);
        p = e + 1;
    }
    return true;
}

/* The replies of a pipelined MULTI, n commands and EXEC: *exec gets EXEC's
 * (NULL when none came); false when the connection broke. */
static bool txn_replies(redisContext *rc, int n, redisReply **exec)
{
    redisReply *r = NULL;
    *exec = NULL;
    for (int i = 0; i <= n; i++) { /* MULTI's and the QUEUED replies */
        if (redisGetReply(rc, (void **)&r) != REDIS_OK || !r) return false;
        freeReplyObject(r);
    }
    return redisGetReply(rc, (void **)exec) == REDIS_OK && *exec;
}

typedef struct txn_mop {
    bool append;
    uint32_t key;
    int64_t value;
} txn_mop;

/* One read-only or read-write transaction of keys of one slot on c's
 * connection, pipelined (MULTI, the commands, EXEC); false when the
 * connection broke.  EXEC's array commits it (its GETs are the reads);
 * EXECABORT or a nil (nothing watched here) means it was not applied; any
 * other error or no reply leaves it unknown - the grid may have applied it
 * ("its replies were lost in a failover"). */
static _Atomic long txn_across_ok; /* committed transactions whose keys spanned slots */

static bool txn_one(client *c, redisContext *rc)
{
    uint32_t epoch = (uint32_t)((now_ns() - txn_t0) / (TXN_EPOCH_S * 1000000000LL));
    uint32_t last = atomic_load(&txn_last_epoch);
    while (epoch > last && !atomic_compare_exchange_weak(&txn_last_epoch, &last, epoch)) {}
    int group = (int)(rnd(&c->rng) % TXN_GROUPS), n = 1 + (int)(rnd(&c->rng) % TXN_MAX_MOPS);
    /* Half of them across slots: each key of its own random group, so the
     * node the client talks to runs a commit across partitions (docs/
     * TRANSACTIONS.md) and every schedule kills, pauses or cuts off its
     * coordinators and participants too. */
    bool across = rnd(&c->rng) % 2;
    txn_mop m[TXN_MAX_MOPS];
    bool writes = false;
    redisAppendCommand(rc, "MULTI");
    for (int i = 0; i < n; i++) {
        if (across) group = (int)(rnd(&c->rng) % TXN_GROUPS);
        m[i].key = txn_key_id(epoch, group, (int)(rnd(&c->rng) % TXN_KEYS));
        m[i].append = rnd(&c->rng) % 2;
        if (m[i].append) {
            m[i].value = (int64_t)(c->id + 1) * 10000000LL + ++c->seq;
            writes = true;
        }
        txn_append_read(rc, m[i].key, m[i].append ? &m[i].value : NULL);
    }
    redisAppendCommand(rc, "EXEC");
    int64_t inv = now_ns();
    redisReply *r;
    bool alive = txn_replies(rc, n, &r);
    fh_outcome oc = FH_UNKNOWN;
    if (r && r->type == REDIS_REPLY_ARRAY && r->elements == (size_t)n) {
        oc = FH_OK;
        for (size_t i = 0; i < r->elements; i++)
            if (r->element[i]->type == REDIS_REPLY_ERROR) oc = FH_UNKNOWN;
    } else if (r && (r->type == REDIS_REPLY_NIL || (r->type == REDIS_REPLY_ERROR && !strncmp(r->str, "EXECABORT", 9)))) {
        oc = FH_FAIL;
    } else if (r && r->type == REDIS_REPLY_ERROR && !writes) {
        oc = FH_FAIL; /* a read-only transaction has no effect to be unsure of */
    }
    /* The first few answers that leave a transaction unknown, for the log. */
    static _Atomic int told;
    if (oc == FH_UNKNOWN && atomic_fetch_add(&told, 1) < 5) {
        const redisReply *e = r && r->type == REDIS_REPLY_ERROR ? r : NULL;
        for (size_t i = 0; !e && r && r->type == REDIS_REPLY_ARRAY && i < r->elements; i++)
            if (r->element[i]->type == REDIS_REPLY_ERROR) e = r->element[i];
        say("a transaction%s through node %d is unknown: %s", across ? " across slots" : "", c->node,
            e ? e->str : r ? "an unexpected reply" : "no reply");
    }
    if (r && r->type == REDIS_REPLY_ERROR) {
        int64_t cut = atomic_load(&cut_ns);
        if (cut && inv > cut && strstr(r->str, "no quorum")) atomic_fetch_add(&no_quorum[c->node], 1);
    }
    int64_t done = now_ns();
    bool spans = false;
    for (int i = 1; i < n; i++) spans |= m[i].key / 10 != m[0].key / 10;
    if (oc == FH_OK && spans) atomic_fetch_add(&txn_across_ok, 1);
    int64_t *list = NULL;
    size_t ln = 0, lcap = 0;
    pthread_mutex_lock(&c->lock);
    tx_begin(&c->th, c->id, c->node, inv);
    for (int i = 0; i < n; i++) {
        if (m[i].append) tx_append(&c->th, m[i].key, m[i].value);
        else if (oc == FH_OK && txn_parse_list(r->element[i], &list, &ln, &lcap)) tx_read(&c->th, m[i].key, list, ln);
        else tx_read_unknown(&c->th, m[i].key);
    }
    tx_end(&c->th, oc, done);
    pthread_mutex_unlock(&c->lock);
    free(list);
    if (r) freeReplyObject(r);
    return alive;
}

/* ---- the bank ---- */

static _Atomic long bank_transfers, bank_refused, bank_unknown, bank_audits, bank_bad_audits;
static char bank_first_bad[200];
static char bank_line[600]; /* the bank's figures, for FAULT_FIGURES too */
static pthread_mutex_t bank_mu = PTHREAD_MUTEX_INITIALIZER;

static void bank_key(char *k, size_t cap, int i) { snprintf(k, cap, "{bank%d}acct", i); }

/* The sum of an MGET of every account; false when it is no such answer
 * (an error, a missing account). */
static bool bank_sum(const redisReply *r, long long *sum)
{
    if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != BANK_ACCOUNTS) return false;
    *sum = 0;
    for (size_t i = 0; i < r->elements; i++) {
        if (r->element[i]->type != REDIS_REPLY_STRING) return false;
        *sum += atoll(r->element[i]->str);
    }
    return true;
}

static void bank_append_mget(redisContext *rc)
{
    const char *argv[BANK_ACCOUNTS + 1];
    char keys[BANK_ACCOUNTS][24];
    argv[0] = "MGET";
    for (int i = 0; i < BANK_ACCOUNTS; i++) {
        bank_key(keys[i], sizeof keys[i], i);
        argv[i + 1] = keys[i];
    }
    redisAppendCommandArgv(rc, BANK_ACCOUNTS + 1, argv, NULL);
}

/* One transfer or (one in four) one audit; false when the connection broke. */
static bool bank_one(client *c, redisContext *rc)
{
    if (rnd(&c->rng) % 4 == 0) {
        bank_append_mget(rc);
        redisReply *r = NULL;
        bool alive = redisGetReply(rc, (void **)&r) == REDIS_OK && r;
        long long sum;
        if (bank_sum(r, &sum)) {
            atomic_fetch_add(&bank_audits, 1);
            if (sum != (long long)BANK_ACCOUNTS * BANK_START && atomic_fetch_add(&bank_bad_audits, 1) == 0) {
                pthread_mutex_lock(&bank_mu);
                snprintf(bank_first_bad, sizeof bank_first_bad, "an audit through node %d saw a total of %lld",
                         c->node, sum);
                pthread_mutex_unlock(&bank_mu);
            }
        }
        if (r) freeReplyObject(r);
        return alive;
    }
    int from = (int)(rnd(&c->rng) % BANK_ACCOUNTS);
    int to = (from + 1 + (int)(rnd(&c->rng) % (BANK_ACCOUNTS - 1))) % BANK_ACCOUNTS;
    int amt = 1 + (int)(rnd(&c->rng) % 10);
    char kf[24], kt[24];
    bank_key(kf, sizeof kf, from);
    bank_key(kt, sizeof kt, to);
    redisAppendCommand(rc, "MULTI");
    redisAppendCommand(rc, "DECRBY %s %d", kf, amt);
    redisAppendCommand(rc, "INCRBY %s %d", kt, amt);
    redisAppendCommand(rc, "EXEC");
    redisReply *r = NULL;
    bool alive = true;
    for (int i = 0; i < 4 && alive; i++) {
        if (r) freeReplyObject(r);
        r = NULL;
        alive = redisGetReply(rc, (void **)&r) == REDIS_OK && r;
    }
    if (alive && r->type == REDIS_REPLY_ARRAY && r->elements == 2 && r->element[0]->type == REDIS_REPLY_INTEGER &&
        r->element[1]->type == REDIS_REPLY_INTEGER)
        atomic_fetch_add(&bank_transfers, 1);
    else if (alive && r->type == REDIS_REPLY_ERROR && !strncmp(r->str, "EXECABORT", 9))
        atomic_fetch_add(&bank_refused, 1);
    else
        atomic_fetch_add(&bank_unknown, 1); /* all or nothing either way: the total holds */
    if (r) freeReplyObject(r);
    return alive;
}

/* Every account at BANK_START, written through node 0 before the load. */
static void bank_setup(void)
{
    redisContext *rc = connect_node(0, 10000);
    for (int i = 0; rc && i < BANK_ACCOUNTS; i++) {
        char k[24];
        bank_key(k, sizeof k, i);
        redisReply *r = redisCommand(rc, "SET %s %d", k, BANK_START);
        bool ok = r && r->type == REDIS_REPLY_STATUS;
        if (r) freeReplyObject(r);
        if (!ok) {
            say("the bank's account %s could not be opened", k);
            exit(1);
        }
    }
    if (!rc) {
        say("no connection to node 0 for the bank");
        exit(1);
    }
    redisFree(rc);
}

/* After the load: every live node's audit sees the whole total. */
static bool bank_check(void)
{
    int read = 0;
    bool ok = true;
    for (int i = 0; i < g.capacity; i++) {
        if (!atomic_load(&g.up[i])) continue;
        redisContext *rc = connect_node(i, 10000);
        if (!rc) continue;
        bank_append_mget(rc);
        redisReply *r = NULL;
        long long sum = 0;
        bool got = redisGetReply(rc, (void **)&r) == REDIS_OK && bank_sum(r, &sum);
        if (r) freeReplyObject(r);
        redisFree(rc);
        read++;
        if (!got || sum != (long long)BANK_ACCOUNTS * BANK_START) {
            printf("fault %s: bank: the final audit through node %d %s %lld\n", scenario, i,
                   got ? "saw a total of" : "failed; want", got ? sum : (long long)BANK_ACCOUNTS * BANK_START);
            ok = false;
        }
    }
    long t = atomic_load(&bank_transfers);
    snprintf(bank_line, sizeof bank_line,
             "fault %s: bank: %ld transfers across slots committed, %ld refused, %ld unknown; %ld audits, %ld saw "
             "another total%s%s; the final audit through %d nodes %s\n",
             scenario, t, atomic_load(&bank_refused), atomic_load(&bank_unknown), atomic_load(&bank_audits),
             atomic_load(&bank_bad_audits), bank_first_bad[0] ? ": " : "", bank_first_bad, read,
             ok ? "saw the total" : "did NOT");
    fputs(bank_line, stdout);
    if (t < MIN_BANK_TRANSFERS) printf("fault %s: bank: too few transfers committed\n", scenario);
    return ok && read > 0 && !atomic_load(&bank_bad_audits) && t >= MIN_BANK_TRANSFERS;
}

static void *client_main(void *arg)
{
    client *c = arg;
    c->node = c->home;
    redisContext *rc = NULL;
    size_t ops = 0;
    while (!atomic_load(&load_stop) && now_ns() < atomic_load(&load_deadline) && ops < MAX_OPS_PER_CLIENT &&
           (!c->sops || c->n_sops < SET_MAX_PER_CLIENT)) {
        if (!rc && (c->sticky || atomic_load(&g.up[c->node]))) rc = connect_node(c->node, c->sticky ? 10000 : 2000);
        if (!rc) {
            if (!c->sticky) c->node = (c->node + 1) % n_nodes_max;
            msleep(20);
            continue;
        }
        ops++;
        bool alive = c->sops ? set_batch(c, rc) : c->txn ? txn_one(c, rc) : c->bank ? bank_one(c, rc) : one_op(c, rc);
        /* A set or transaction client paces itself: the register histories
         * must stay dense, and the machine is shared. */
        if (alive && c->sops) msleep(SET_PAUSE_MS);
        if (alive && c->txn) msleep(TXN_PAUSE_MS);
        if (alive && c->bank) msleep(BANK_PAUSE_MS);
        if (!alive) {
            redisFree(rc);
            rc = NULL;
            if (!c->sticky) c->node = (c->node + 1) % n_nodes_max;
        }
    }
    if (rc) redisFree(rc);
    return NULL;
}

/* Starts CLIENTS_PER_NODE clients on each of nodes [0, nodes); roaming
 * clients may also use nodes up to `roam` (nodes that join later). */
static void start_load(int nodes, int roam)
{
    n_nodes_max = roam;
    atomic_store(&load_stop, false);
    atomic_store(&load_deadline, now_ns() + 400 * 1000000000LL);
    for (int n = 0; n < nodes; n++)
        for (int k = 0; k < CLIENTS_PER_NODE; k++) {
            client *c = &clients[n_clients];
            c->id = n_clients++;
            c->home = n;
            c->sticky = k % 2 == 0;
            c->rng = seed * 0x9e3779b97f4a7c15ULL + (uint64_t)c->id * 7919 + 1;
            fh_init(&c->h);
            pthread_mutex_init(&c->lock, NULL);
            pthread_create(&c->thread, NULL, client_main, c);
        }
    /* The set workload's clients: on every node, sticky and roaming like
     * the others. */
    for (int n = 0; n < nodes; n++)
        for (int k = 0; k < SET_CLIENTS_PER_NODE; k++) {
            client *c = &set_clients[n_set_clients];
            c->id = n_set_clients++;
            c->home = n;
            c->sticky = k % 2 == 0;
            c->sops = calloc(SET_MAX_PER_CLIENT, sizeof *c->sops);
            if (!c->sops) exit(1);
            fh_init(&c->h);
            pthread_mutex_init(&c->lock, NULL);
            pthread_create(&c->thread, NULL, client_main, c);
        }
    /* The list-append transaction clients, likewise. */
    txn_t0 = now_ns();
    for (int n = 0; n < nodes; n++)
        for (int k = 0; k < TXN_CLIENTS_PER_NODE; k++) {
            client *c = &txn_clients[n_txn_clients];
            c->id = 100 + n_txn_clients++;
            c->home = n;
            c->sticky = (n + k) % 2 == 0;
            c->txn = true;
            c->rng = seed * 0x9e3779b97f4a7c15ULL + (uint64_t)c->id * 104729 + 7;
            fh_init(&c->h);
            tx_init(&c->th);
            pthread_mutex_init(&c->lock, NULL);
            pthread_create(&c->thread, NULL, client_main, c);
        }
    /* The bank's clients, likewise. */
    for (int n = 0; n < nodes; n++)
        for (int k = 0; k < BANK_CLIENTS_PER_NODE; k++) {
            client *c = &bank_clients[n_bank_clients];
            c->id = 200 + n_bank_clients++;
            c->home = n;
            c->sticky = (n + k) % 2 == 1;
            c->bank = true;
            c->rng = seed * 0x9e3779b97f4a7c15ULL + (uint64_t)c->id * 15485863 + 11;
            fh_init(&c->h);
            pthread_mutex_init(&c->lock, NULL);
            pthread_create(&c->thread, NULL, client_main, c);
        }
}

/* The register and counter operations that succeeded after `after` (as the
 * verdict counts them: invoked at or after it), while the load runs.  Each
 * client's operations are in invoke order, so only its tail is walked. */
static size_t ok_since(int64_t after)
{
    size_t n = 0;
    for (int i = 0; i < n_clients; i++) {
        client *c = &clients[i];
        pthread_mutex_lock(&c->lock);
        for (size_t k = c->h.n; k > 0 && c->h.ops[k - 1].invoke >= after; k--) n += c->h.ops[k - 1].outcome == FH_OK;
        pthread_mutex_unlock(&c->lock);
    }
    return n;
}

/* After every schedule, before the load stops: the load goes on until
 * MIN_OK_AFTER_FAULT operations succeeded after the last fault (and the
 * bank, where it runs, committed MIN_BANK_TRANSFERS in all), or
 * AFTER_FAULT_MAX_MS passed.  A fixed time was not enough on a loaded machine
 * (a grid that had just woken from SIGSTOP answered 34 in it), and the verdict
 * would then be "too few operations" rather than the checker's. */
static void run_until_enough(void)
{
    int64_t t0 = now_ns(), end = t0 + AFTER_FAULT_MAX_MS * 1000000LL;
    size_t n;
    /* The bank's minimum the same way: under a schedule that cuts links,
     * a transfer whose reply was lost waits out its timeout, and a busy
     * machine (a build beside it) left 13 of 20 committed when the
     * schedule ended - a verdict on the machine, not on the grid. */
    while (((n = ok_since(last_fault_ns)) < MIN_OK_AFTER_FAULT ||
            (n_bank_clients && atomic_load(&bank_transfers) < MIN_BANK_TRANSFERS)) &&
           now_ns() < end)
        msleep(50);
    double since = (double)(now_ns() - last_fault_ns) / 1e9;
    if (!last_fault_ns)
        say("no fault: %zu operations succeeded", n);
    else if (n >= MIN_OK_AFTER_FAULT)
        say("%zu operations succeeded after the last fault, %.2f s after it (waited %.2f s more for them)", n, since,
            (double)(now_ns() - t0) / 1e9);
    else
        say("only %zu operations succeeded after the last fault in %.2f s after it (gave up after %d s more)", n,
            since, AFTER_FAULT_MAX_MS / 1000);
}

static void stop_load(void)
{
    atomic_store(&load_stop, true);
    for (int i = 0; i < n_clients; i++) pthread_join(clients[i].thread, NULL);
    for (int i = 0; i < n_set_clients; i++) pthread_join(set_clients[i].thread, NULL);
    for (int i = 0; i < n_txn_clients; i++) pthread_join(txn_clients[i].thread, NULL);
    for (int i = 0; i < n_bank_clients; i++) pthread_join(bank_clients[i].thread, NULL);
}

static int final_read_failures; /* final reads answered with an error or not at all */
static long cuts_made;          /* cut_data_links: connections ss -K aborted */

/* Every key read once through every live node, after the load stopped. */
static void final_reads(fh_history *h)
{
    final_read_failures = 0;
    for (int n = 0; n < g.capacity; n++) {
        if (!atomic_load(&g.up[n])) continue;
        redisContext *rc = connect_node(n, 10000);
        if (!rc) continue;
        client c = {.id = 1000 + n, .node = n};
        fh_init(&c.h);
        for (int k = 0; k < REGISTERS + COUNTERS; k++) {
            char key[16];
            snprintf(key, sizeof key, k < REGISTERS ? "reg%d" : "ctr%d", k < REGISTERS ? k : k - REGISTERS);
            int64_t inv = now_ns();
            redisReply *r = redisCommand(rc, "GET %s", key);
            if (r && r->type == REDIS_REPLY_STRING) record(&c, FH_READ, key, strtoll(r->str, NULL, 10), inv, FH_OK);
            else if (r && r->type == REDIS_REPLY_NIL) record(&c, FH_READ, key, FH_NIL, inv, FH_OK);
            else {
                record(&c, FH_READ, key, FH_NIL, inv, FH_FAIL);
                final_read_failures++;
            }
            if (r) freeReplyObject(r);
        }
        fh_append_all(h, &c.h);
        fh_free(&c.h);
        redisFree(rc);
    }
}

static int txn_final_failures; /* final list reads answered with an error or not at all */

/* Every list-append key read through every live node after the load
 * stopped: a read-only transaction of each slot's keys. */
static void txn_final_reads(tx_history *h)
{
    uint32_t epochs = atomic_load(&txn_last_epoch) + 1;
    int64_t *list = NULL;
    size_t ln = 0, lcap = 0;
    for (int n = 0; n < g.capacity; n++) {
        if (!atomic_load(&g.up[n])) continue;
        redisContext *rc = connect_node(n, 10000);
        if (!rc) continue;
        for (uint32_t e = 0; e < epochs; e++)
            for (int grp = 0; grp < TXN_GROUPS; grp++) {
                redisAppendCommand(rc, "MULTI");
                for (int k = 0; k < TXN_KEYS; k++) txn_append_read(rc, txn_key_id(e, grp, k), NULL);
                redisAppendCommand(rc, "EXEC");
                int64_t inv = now_ns();
                redisReply *r;
                bool alive = txn_replies(rc, TXN_KEYS, &r);
                bool ok = r && r->type == REDIS_REPLY_ARRAY && r->elements == TXN_KEYS;
                tx_begin(h, 1100 + n, n, inv);
                for (int k = 0; k < TXN_KEYS; k++) {
                    uint32_t id = txn_key_id(e, grp, k);
                    if (ok && txn_parse_list(r->element[k], &list, &ln, &lcap)) tx_read(h, id, list, ln);
                    else tx_read_unknown(h, id);
                }
                tx_end(h, ok ? FH_OK : FH_FAIL, now_ns());
                txn_final_failures += !ok;
                if (r) freeReplyObject(r);
                if (!alive) {
                    e = epochs;
                    break;
                }
            }
        redisFree(rc);
    }
    free(list);
}

/* ---- the set workload's check ----
 *
 * After the load stopped and the grid settled, every set key written (the
 * acknowledged and the unknown) is read through every live node, pipelined.
 * An acknowledged key must read back with its value through every node; an
 * unknown one may be present or absent, but once read present it must stay
 * so (the nodes are read one after the other), and no key may hold a value
 * other than its own. */

typedef struct set_result {
    size_t acked, unknown, unknown_present;
    size_t lost;       /* keys: acknowledged and missing or different through some node, or unknown and gone */
    size_t lost_reads; /* (key, node) reads that showed it */
    size_t unreadable; /* (key, node) reads answered with an error or not at all */
    char line[300];
} set_result;

static set_result setr;

#define SET_LOST_SHOWN 20

typedef struct set_loss {
    int client, seq, node;
    char seen[48];
} set_loss;

/* The slot of key (CLUSTER KEYSLOT, asked of node via), -1 if unknown. */
static long keyslot(const char *key, int via)
{
    redisContext *c = connect_node(via, 5000);
    redisReply *r = c ? redisCommand(c, "CLUSTER KEYSLOT %s", key) : NULL;
    long slot = r && r->type == REDIS_REPLY_INTEGER ? (long)r->integer : -1;
    if (r) freeReplyObject(r);
    if (c) redisFree(c);
    return slot;
}

static void show_losses(const set_loss *loss, size_t n)
{
    json_t *pj = cli_json("partitions default");
    size_t parts = pj ? json_array_size(json_object_get(pj, "partitions")) : 0;
    if (pj) json_decref(pj);
    for (size_t i = 0; i < n; i++) {
        const set_loss *l = &loss[i];
        const set_op *o = &set_clients[l->client].sops[l->seq];
        char key[32];
        set_key(key, sizeof key, l->client, l->seq);
        long slot = keyslot(key, l->node);
        int p, b;
        owners_of(key, l->node, &p, &b);
        printf("fault %s:   %s (%s, sent to node %d at %.3f s%s) read %s through node %d; slot %ld, partition %ld of "
               "%zu, primary node %d, backup node %d\n",
               scenario, key, o->state == SET_ACKED ? "acknowledged" : "unknown", o->node, (double)o->invoke / 1e9,
               o->state == SET_ACKED ? "" : ", read present through an earlier node", l->seen, l->node, slot,
               slot >= 0 && parts ? slot / (long)(16384 / parts) : -1L, parts, p, b);
    }
}

/* FAULT_SELFTEST_LOSE=1, a self-test of this check: one acknowledged key is
 * deleted before the final read, which must then fail the run. */
static void selftest_lose(void)
{
    const char *e = getenv("FAULT_SELFTEST_LOSE");
    if (!e || strcmp(e, "1")) return;
    for (int i = 0; i < n_set_clients; i++)
        for (int k = 0; k < set_clients[i].n_sops; k++) {
            if (set_clients[i].sops[k].state != SET_ACKED) continue;
            for (int n = 0; n < g.capacity; n++) {
                redisContext *c = atomic_load(&g.up[n]) ? connect_node(n, 10000) : NULL;
                if (!c) continue;
                char key[32], list[32];
                set_key(key, sizeof key, i, k);
                /* and the first list key of the transactions: the final
                 * reads then see it empty after reads saw its tokens */
                txn_key_name(list, sizeof list, txn_key_id(0, 0, 0));
                redisReply *r = redisCommand(c, "DEL %s %s", key, list);
                say("self-test (FAULT_SELFTEST_LOSE=1): DEL %s %s through node %d: %lld", key, list, n,
                    r && r->type == REDIS_REPLY_INTEGER ? r->integer : -1LL);
                if (r) freeReplyObject(r);
                /* and one unit of the bank's money, outside any transfer */
                char acct[24];
                bank_key(acct, sizeof acct, 0);
                r = redisCommand(c, "DECR %s", acct);
                if (r) freeReplyObject(r);
                redisFree(c);
                return;
            }
        }
}

/* Every set write, for a failing run's directory: KEY NODE INVOKE_NS COMPLETE_NS OUTCOME. */
static void save_set_writes(void)
{
    char path[400];
    snprintf(path, sizeof path, "%s/set.txt", it_dir());
    FILE *f = fopen(path, "w");
    if (!f) return;
    fprintf(f, "# set workload: KEY NODE INVOKE_NS COMPLETE_NS OUTCOME (value v:CLIENT:SEQ)\n");
    for (int i = 0; i < n_set_clients; i++)
        for (int k = 0; k < set_clients[i].n_sops; k++) {
            const set_op *o = &set_clients[i].sops[k];
            char key[32];
            set_key(key, sizeof key, i, k);
            if (o->state == SET_ACKED)
                fprintf(f, "%s %d %" PRId64 " %" PRId64 " ok\n", key, o->node, o->invoke, o->complete);
            else
                fprintf(f, "%s %d %" PRId64 " - unknown\n", key, o->node, o->invoke);
        }
    fclose(f);
}

/* Reads keys [from, to) of set client ci through rc (pipelined) and judges
 * each reply; false when the connection broke (the rest are unreadable). */
static bool set_read_batch(redisContext *rc, int node, int ci, int from, int to, uint8_t *present, set_loss *loss,
                           size_t *n_loss, uint8_t *lost)
{
    client *c = &set_clients[ci];
    for (int k = from; k < to; k++) {
        char key[32];
        set_key(key, sizeof key, ci, k);
        redisAppendCommand(rc, "GET %s", key);
    }
    for (int k = from; k < to; k++) {
        redisReply *r;
        if (redisGetReply(rc, (void **)&r) != REDIS_OK || !r) {
            if (!setr.unreadable) say("a set read through node %d broke: %s", node, rc->errstr);
            setr.unreadable += (size_t)(to - k);
            return false;
        }
        char val[32], seen[48] = "";
        set_value(val, sizeof val, ci, k);
        bool acked = c->sops[k].state == SET_ACKED;
        if (r->type == REDIS_REPLY_STRING && !strcmp(r->str, val)) {
            present[k] = 1;
        } else if (r->type == REDIS_REPLY_NIL) {
            if (acked || present[k]) snprintf(seen, sizeof seen, "absent");
        } else if (r->type == REDIS_REPLY_STRING) {
            snprintf(seen, sizeof seen, "\"%.30s\"", r->str); /* a value never written to it */
        } else {
            if (!setr.unreadable)
                say("a set read through node %d answered %s", node,
                    r->type == REDIS_REPLY_ERROR && r->str ? r->str : "a reply of another type");
            setr.unreadable++;
        }
        freeReplyObject(r);
        if (!*seen) continue;
        setr.lost_reads++;
        if (!lost[k]) setr.lost++;
        lost[k] = 1;
        if (*n_loss < SET_LOST_SHOWN) {
            loss[*n_loss] = (set_loss){.client = ci, .seq = k, .node = node};
            snprintf(loss[*n_loss].seen, sizeof loss[*n_loss].seen, "%s", seen);
            ++*n_loss;
        }
    }
    return true;
}

/* The set check; true when nothing acknowledged was lost and every read was
 * answered. */
static bool set_check(void)
{
    int64_t t0 = now_ns();
    save_set_writes();
    selftest_lose();
    set_loss loss[SET_LOST_SHOWN];
    size_t n_loss = 0;
    memset(&setr, 0, sizeof setr);
    for (int ci = 0; ci < n_set_clients; ci++) {
        client *c = &set_clients[ci];
        uint8_t *present = calloc((size_t)c->n_sops + 1, 1), *lost = calloc((size_t)c->n_sops + 1, 1);
        if (!present || !lost) exit(1);
        for (int k = 0; k < c->n_sops; k++) *(c->sops[k].state == SET_ACKED ? &setr.acked : &setr.unknown) += 1;
        for (int n = 0; n < g.capacity; n++) {
            if (!atomic_load(&g.up[n])) continue;
            redisContext *rc = connect_node(n, 30000);
            for (int k = 0; k < c->n_sops; k += SET_READ_BATCH) {
                int to = k + SET_READ_BATCH < c->n_sops ? k + SET_READ_BATCH : c->n_sops;
                if (!rc) rc = connect_node(n, 30000); /* once per batch: bounded */
                if (!rc) {
                    if (!setr.unreadable) say("cannot connect to node %d for the set read", n);
                    setr.unreadable += (size_t)(to - k);
                    continue;
                }
                if (!set_read_batch(rc, n, ci, k, to, present, loss, &n_loss, lost)) {
                    redisFree(rc);
                    rc = NULL;
                }
            }
            if (rc) redisFree(rc);
        }
        for (int k = 0; k < c->n_sops; k++) setr.unknown_present += c->sops[k].state != SET_ACKED && present[k];
        free(present);
        free(lost);
    }
    say("set workload read back through every live node in %.2f s", (double)(now_ns() - t0) / 1e9);
    snprintf(setr.line, sizeof setr.line,
             "fault %s: set workload: %zu acknowledged, %zu unknown (%zu of them present), %zu lost (%zu reads), %zu "
             "reads failed\n",
             scenario, setr.acked, setr.unknown, setr.unknown_present, setr.lost, setr.lost_reads, setr.unreadable);
    if (n_loss) {
        printf("fault %s: set keys lost (the first %zu):\n", scenario, n_loss);
        show_losses(loss, n_loss);
    }
    return setr.lost == 0 && setr.unreadable == 0;
}

/* ---- scenarios ---- */

#define SKIPPED 77 /* CTest's SKIP_RETURN_CODE: no network namespaces here (not root) */

static void form_grid(int nodes, int capacity)
{
    g.capacity = capacity;
    if (g.net) {
        if (!fnet_setup(&g.f, capacity)) {
            say("SKIPPED: the partition schedules need network namespaces (root)");
            exit(SKIPPED);
        }
        snprintf(g.finder, sizeof g.finder, "%s", g.f.finder);
    } else {
        g.peer_base = it_free_ports(capacity);
        g.resp_base = it_free_ports(capacity);
        snprintf(g.finder, sizeof g.finder, "127.0.0.1:%d..%d", g.peer_base, g.peer_base + capacity - 1);
    }
    /* The first node alone first: it is the coordinator. */
    start_node(0);
    if (!wait_serving(0)) exit(1);
    for (int i = 1; i < nodes; i++) start_node(i);
    for (int i = 1; i < nodes; i++)
        if (!wait_serving(i)) exit(1);
    say("%d nodes serving", nodes);
}

static int jitter(int lo_ms, int hi_ms) { return lo_ms + (int)(rnd(&sched_rng) % (uint64_t)(hi_ms - lo_ms + 1)); }

static void mark_fault(void) { last_fault_ns = now_ns(); }

static void kill_one(bool the_coordinator)
{
    msleep(jitter(3000, 5000));
    int coord = coordinator();
    int victim = the_coordinator ? (coord >= 0 ? coord : 0) : primary_not_coordinator(coord);
    kill_node(victim, SIGKILL);
    mark_fault();
    msleep(jitter(3000, 5000));
    wait_balanced(2);
}

/* The primary of a bank account's partition killed -9 (not the
 * coordinator): the partition is a participant of every transfer that
 * moves that account's money and the home - the one that records the
 * decision - of those whose first participant it is, so transfers die
 * there in every phase: prepared, deciding, finishing.  The copy that takes
 * over holds the prepared and decision rows (replicated like any write),
 * so each transfer ends all or nothing: the bank's audits and total say. */
static void kill_home_primary(void)
{
    msleep(jitter(3000, 5000));
    int coord = coordinator();
    int victim = -1;
    char key[24];
    for (int i = 0; i < BANK_ACCOUNTS && victim < 0; i++) {
        int p, b;
        bank_key(key, sizeof key, i);
        owners_of(key, coord >= 0 ? coord : 0, &p, &b);
        if (p >= 0 && p != coord) victim = p;
    }
    if (victim < 0) victim = primary_not_coordinator(coord);
    say("node %d is the primary of bank account %s", victim, key);
    kill_node(victim, SIGKILL);
    mark_fault();
    msleep(jitter(3000, 5000));
    wait_balanced(2);
}

/* Paused for 3x the failure-detection timeout, then resumed. */
static void stop_one(bool the_coordinator)
{
    msleep(jitter(3000, 5000));
    int coord = coordinator();
    int victim = the_coordinator ? (coord >= 0 ? coord : 0) : primary_not_coordinator(coord);
    kill_node(victim, SIGSTOP);
    msleep(3 * FD_MS);
    kill_node(victim, SIGCONT);
    mark_fault();
    msleep(jitter(2000, 4000));
    wait_balanced(3);
}

/* The whole machine stands still (every node paused for 3x the timeout)
 * and one node that is not the coordinator wakes first, long enough to
 * find every other server silent and remove them in its own view - a view
 * with no majority of the baseline.  When the others wake, that view must
 * not win: the majority keeps its own and removes the early riser, which
 * rejoins; nothing acknowledged is lost.  Before, the others adopted the
 * early riser's view, rejoined as new nodes and dropped their copies
 * (partitions LOST, acknowledged writes gone), as seen on a loaded
 * machine. */
static void stop_all_one_wakes(void)
{
    msleep(jitter(3000, 5000));
    int coord = coordinator();
    int early = primary_not_coordinator(coord);
    for (int i = 0; i < 3; i++) kill_node(i, SIGSTOP);
    msleep(3 * FD_MS);
    kill_node(early, SIGCONT);
    msleep(3 * FD_MS);
    for (int i = 0; i < 3; i++)
        if (i != early) kill_node(i, SIGCONT);
    mark_fault();
    msleep(jitter(2000, 4000));
    wait_balanced(3);
}

/* No fault: what the load alone shows. */
static void steady(void) { msleep(10000); }

static void kill_primary(void) { kill_one(false); }
static void kill_coordinator(void) { kill_one(true); }
static void stop_primary(void) { stop_one(false); }
static void stop_coordinator(void) { stop_one(true); }

static void restart_loop(void)
{
    int64_t end = now_ns() + 60 * 1000000000LL;
    int cycles = 0;
    msleep(jitter(2000, 3000));
    while (now_ns() < end && settled) {
        int victim = (int)(rnd(&sched_rng) % 3);
        kill_node(victim, SIGKILL);
        msleep(jitter(500, 2500));
        start_node(victim);
        wait_serving(victim);
        wait_balanced(3);
        mark_fault();
        cycles++;
        msleep(jitter(500, 2000));
    }
    say("%d kill/restart cycles", cycles);
    msleep(2000);
}

static void join_leave(void)
{
    msleep(jitter(2000, 4000));
    say("node 3 joins");
    start_node(3);
    wait_serving(3);
    wait_balanced(4);
    msleep(jitter(1000, 3000));
    int leaver = 1 + (int)(rnd(&sched_rng) % 3);
    say("node %d leaves (SIGTERM)", leaver);
    kill_node(leaver, SIGTERM);
    mark_fault();
    wait_balanced(3);
    msleep(2000);
}

static void two_joins(void)
{
    msleep(jitter(2000, 4000));
    say("nodes 3 and 4 join at once");
    start_node(3);
    start_node(4);
    wait_serving(3);
    wait_serving(4);
    mark_fault();
    wait_balanced(5);
    msleep(2000);
}

/* Enough entries that moving a quarter of them takes a while; which ones
 * were acknowledged, so that the end can check that none was lost. */
static uint8_t *preload_acked;
static int preload_n, preload_n_acked;
static char preload_value[101];

static void preload(int keys)
{
    redisContext *rc = connect_node(0, 30000);
    preload_acked = calloc((size_t)keys, 1);
    if (!rc || !preload_acked) exit(1);
    preload_n = keys;
    memset(preload_value, 'x', 100);
    for (int i = 0; i < keys; i += 1000) {
        for (int k = i; k < i + 1000 && k < keys; k++) redisAppendCommand(rc, "SET fill:%d %s", k, preload_value);
        for (int k = i; k < i + 1000 && k < keys; k++) {
            redisReply *r;
            if (redisGetReply(rc, (void **)&r) != REDIS_OK) exit(1);
            preload_acked[k] = r->type == REDIS_REPLY_STATUS;
            preload_n_acked += preload_acked[k];
            freeReplyObject(r);
        }
    }
    redisFree(rc);
    say("preloaded %d entries", keys);
}

/* Acknowledged preloaded entries that no longer read back (through the first
 * live node), after the faults and the settling. */
static int preload_missing(void)
{
    int node = 0;
    while (node < g.capacity && !atomic_load(&g.up[node])) node++;
    redisContext *rc = node < g.capacity ? connect_node(node, 30000) : NULL;
    if (!rc) return preload_n;
    int missing = 0;
    for (int i = 0; i < preload_n; i += 1000) {
        for (int k = i; k < i + 1000 && k < preload_n; k++) redisAppendCommand(rc, "GET fill:%d", k);
        for (int k = i; k < i + 1000 && k < preload_n; k++) {
            redisReply *r;
            if (redisGetReply(rc, (void **)&r) != REDIS_OK) {
                redisFree(rc);
                return preload_n;
            }
            bool same = r->type == REDIS_REPLY_STRING && !strcmp(r->str, preload_value);
            missing += preload_acked[k] && !same;
            freeReplyObject(r);
        }
    }
    redisFree(rc);
    return missing;
}

static void kill_during_rebalance(void)
{
    msleep(jitter(1000, 2000));
    say("node 3 joins");
    start_node(3);
    bool seen = it_wait_for(rebalancing, NULL, 20000);
    msleep(jitter(0, 300));
    int coord = coordinator();
    int victim = primary_not_coordinator(coord);
    say("rebalance %s; killing a supplier", seen ? "in progress" : "not observed in progress");
    kill_node(victim, SIGKILL);
    mark_fault();
    wait_balanced(3);
    msleep(2000);
}

/* ---- partitions (network namespaces) ----
 *
 * Each cuts nodes off with their clients still attached on both sides (the
 * client links cross no cut), holds the cut for 5 x the failure-detection
 * timeout - long enough for both sides to remove each other and for the
 * cut-off side to make itself coordinator - heals, and waits until one
 * topology holds every node with every partition balanced.  The checker
 * judges every history; besides, the cut-off side must have refused with
 * "no quorum" (a minority that only timed out would prove nothing), and
 * `lattice verify` must find every copy equal once the load stopped. */

#define CUT_MS (5 * FD_MS)

static void cut(const int *nodes, int k)
{
    char who[64] = "";
    for (int j = 0; j < k; j++) {
        snprintf(who + strlen(who), sizeof who - strlen(who), "%s%d", j ? ", " : "", nodes[j]);
        cut_off[nodes[j]] = true;
    }
    say("cutting off node%s %s from the other %d", k > 1 ? "s" : "", who, g.f.n - k);
    fnet_isolate(&g.f, nodes, k);
    atomic_store(&cut_ns, now_ns());
    mark_fault();
}

static void heal_and_settle(void)
{
    fnet_heal(&g.f);
    say("healed");
    mark_fault();
    wait_balanced(g.f.n);
}

static void partition_one_of_three(void)
{
    msleep(jitter(3000, 5000));
    int victim = primary_not_coordinator(coordinator());
    cut(&victim, 1);
    msleep(CUT_MS);
    heal_and_settle();
    msleep(2000);
}

static void partition_two_of_five(void)
{
    msleep(jitter(3000, 5000));
    int coord = coordinator(), side[2];
    side[0] = primary_not_coordinator(coord);
    side[1] = (side[0] + 1) % 5 == coord ? (side[0] + 2) % 5 : (side[0] + 1) % 5;
    cut(side, 2);
    msleep(CUT_MS);
    heal_and_settle();
    msleep(2000);
}

/* A primary killed while its writes reached one copy and not the other
 * (backups=2, 3 servers): the links between the primary and the third
 * server are cut (each still reaches the coordinator), so every write of the
 * primary's partitions is applied on the coordinator's copy and waits for
 * the third's; then the primary dies.  The new primary of each such
 * partition holds writes one copy lacks - or lacks writes a copy holds -
 * and the issuers resend what was in flight.  The copies must be levelled
 * before any of it counts (ops/takeover.c): every acknowledged key reads back
 * through both survivors, and `lattice verify` finds the copies equal. */
static void kill_primary_mid_copy(void)
{
    msleep(jitter(3000, 5000));
    int coord = coordinator();
    int victim = primary_not_coordinator(coord), third = 3 - victim - (coord >= 0 ? coord : 0);
    say("cutting node %d (primary) from node %d, then killing node %d", victim, third, victim);
    fnet_cut_pair(&g.f, victim, third, true);
    mark_fault();
    msleep(jitter(300, 600)); /* within the lease: nobody is removed for it */
    kill_node(victim, SIGKILL);
    mark_fault();
    /* The pair's routes stay until the survivors removed the dead node: a
     * replication its socket still held may reach the third only once it
     * follows the new primary (and refuses it). */
    msleep(3 * FD_MS);
    fnet_cut_pair(&g.f, victim, third, false);
    msleep(jitter(1000, 2000));
    wait_balanced(2);
}

/* Two servers cut from each other only, for 3 x the timeout; both still
 * reach the coordinator, so nobody is removed.  A transaction one of them
 * coordinates (the node its client talks to) with a participant on the
 * other cannot reach that participant: its prepares there go unanswered or
 * its finishes do, and the rows it left are settled by their primary past
 * their deadline through the home partition's decision (docs/
 * TRANSACTIONS.md, "Orphans").  Every history must hold, and the bank. */
static void cut_pair_a_while(void)
{
    msleep(jitter(3000, 5000));
    int coord = coordinator();
    if (coord < 0) coord = 0;
    int a = (coord + 1) % 3, b = (coord + 2) % 3;
    say("cutting node %d from node %d only for %d ms (both still reach node %d, the coordinator)", a, b, 3 * FD_MS,
        coord);
    fnet_cut_pair(&g.f, a, b, true);
    mark_fault();
    msleep(3 * FD_MS);
    fnet_cut_pair(&g.f, a, b, false);
    mark_fault();
    say("nodes %d and %d reach each other again", a, b);
    msleep(jitter(1000, 2000));
    wait_balanced(3);
}

/* Both copies of a register's partition cut off together (backups=1, 2 of
 * 5): the majority has no copy of it and refuses it (PARTITION_LOST) while
 * the cut lasts; at the heal the cut-off owners rejoin as new nodes and
 * bring their kept copies back (grid/salvage.c).  The register's history and
 * every preloaded entry of those partitions must come through. */
static void partition_every_copy(void)
{
    msleep(jitter(3000, 5000));
    int coord = coordinator(), side[2] = {-1, -1};
    for (int k = 0; k < REGISTERS && side[1] < 0; k++) {
        char key[16];
        snprintf(key, sizeof key, "reg%d", k);
        int p, b;
        owners_of(key, coord >= 0 ? coord : 0, &p, &b);
        if (p < 0 || b < 0 || p == coord || b == coord) continue;
        say("nodes %d and %d hold every copy of %s (coordinator: node %d)", p, b, key, coord);
        side[0] = p;
        side[1] = b;
    }
    if (side[1] < 0) { /* no register clear of the coordinator: any two others */
        side[0] = (coord + 1) % 5;
        side[1] = (coord + 2) % 5;
    }
    cut(side, 2);
    msleep(CUT_MS);
    heal_and_settle();
    msleep(2000);
}

/* Two of three servers (backups=1, each with a data directory) killed -9
 * together and restarted: the partitions both of them owned had no copy
 * left in the grid (LOST on the survivor, which alone holds no quorum
 * anyway); the only copies are in the two data directories.  The restarted
 * servers join the live grid, so they do not serve what they recovered -
 * but the survivor's lost records wait for those copies, named by the
 * killed incarnations' ids, which the directories remember
 * (DIR/incarnations; grid/salvage.c).  Every acknowledged preloaded entry
 * and every register's history must come through. */
static void kill_two_restart(void)
{
    msleep(jitter(3000, 5000));
    int coord = coordinator();
    if (coord < 0) coord = 0;
    int a = (coord + 1) % 3, b = (coord + 2) % 3;
    say("kill -9 nodes %d and %d together (pids %d, %d); node %d (the coordinator) stays", a, b, (int)g.proc[a]->pid,
        (int)g.proc[b]->pid, coord);
    atomic_store(&g.up[a], false);
    atomic_store(&g.up[b], false);
    it_signal(g.proc[a], SIGKILL);
    it_signal(g.proc[b], SIGKILL);
    it_wait_exit(g.proc[a], 30000);
    it_wait_exit(g.proc[b], 30000);
    mark_fault();
    msleep(3 * FD_MS); /* the survivor removes them and records their shared partitions LOST */
    say("restarting nodes %d and %d from their data directories", a, b);
    start_node(a);
    start_node(b);
    wait_serving(a);
    wait_serving(b);
    wait_balanced(3);
    mark_fault();
    msleep(2000);
}

static void partition_coordinator(void)
{
    msleep(jitter(3000, 5000));
    int coord = coordinator();
    if (coord < 0) coord = 0;
    say("node %d is the coordinator", coord);
    cut(&coord, 1);
    msleep(CUT_MS);
    heal_and_settle();
    msleep(2000);
}

/* A link that flaps: down, up, every second for 10 s. */
static void partition_flap(void)
{
    msleep(jitter(3000, 5000));
    int victim = primary_not_coordinator(coordinator());
    cut_off[victim] = true;
    atomic_store(&cut_ns, now_ns());
    say("node %d's link flaps: down/up every second for 10 s", victim);
    for (int k = 0; k < 5; k++) {
        fnet_link(&g.f, victim, false);
        mark_fault();
        msleep(1000);
        fnet_link(&g.f, victim, true);
        mark_fault();
        msleep(1000);
    }
    wait_balanced(g.f.n);
    msleep(2000);
}

/* The data port node i logged ("data port tcp://HOST:PORT"), 0 if none. */
static int data_port(int i)
{
    FILE *f = fopen(g.proc[i]->log, "r");
    char line[1024];
    int port = 0;
    while (f && fgets(line, sizeof line, f)) {
        const char *at = strstr(line, "data port tcp://");
        const char *colon = at ? strrchr(at, ':') : NULL;
        if (colon) port = atoi(colon + 1);
    }
    if (f) fclose(f);
    return port;
}


/* The nodes' data connections (the operations' transport) are cut, again
 * and again, while the load runs: each `ss -K` aborts every established
 * connection to one node's data port, at both ends.  Writes in flight on a
 * cut connection, and those sent while it reconnects, must neither be lost
 * (the history) nor wait forever for a copy that never got them (every key
 * must be readable afterwards: final_read_failures). */
static void cut_data_links(void)
{
    int ports[MAX_NODES];
    for (int i = 0; i < g.capacity; i++) ports[i] = data_port(i);
    for (int k = 0; k < 25; k++) {
        int victim = (int)(rnd(&sched_rng) % (uint64_t)g.capacity);
        if (!ports[victim]) {
            say("node %d logged no data port", victim);
            return;
        }
        char cmd[160], line[512];
        snprintf(cmd, sizeof cmd, "ss -K -H -t state established dst 127.0.0.1 dport = :%d 2>/dev/null", ports[victim]);
        FILE *p = popen(cmd, "r");
        while (p && fgets(line, sizeof line, p))
            if (strstr(line, "127.0.0.1")) cuts_made++; /* one line per connection it aborted */
        if (p) pclose(p);
        mark_fault();
        msleep(jitter(150, 600));
    }
    say("25 rounds of ss -K aborted %ld data connections", cuts_made);
    msleep(3000);
}

/* `lattice verify default` after the load stopped: every copy the same. */
static bool copies_verified(void)
{
    json_t *v = cli_json_st("verify default", 3); /* 3: it found conflicts */
    json_t *c = v ? json_object_get(v, "conflicts") : NULL;
    bool ok = json_is_array(c) && json_array_size(c) == 0 && json_integer_value(json_object_get(v, "copies")) > 0;
    say("lattice verify default: %s", !v ? "failed to run" : ok ? "every copy the same" : "CONFLICTS");
    /* Which copies differ, so a failed run's logs can be read for them. */
    for (size_t i = 0; !ok && json_is_array(c) && i < json_array_size(c) && i < 20; i++) {
        json_t *e = json_array_get(c, i);
        say("  partition %lld: %s differs from %s in%s%s%s", (long long)json_integer_value(json_object_get(e, "partition")),
            json_string_value(json_object_get(e, "node")), json_string_value(json_object_get(e, "against")),
            json_is_true(json_object_get(e, "hash")) ? " content" : "", json_is_true(json_object_get(e, "size")) ? " size" : "",
            json_is_true(json_object_get(e, "counter")) ? " counter" : "");
    }
    if (v) json_decref(v);
    return ok;
}

/* ---- main ---- */

static const struct {
    const char *name;
    int nodes, capacity, preload;
    void (*run)(void);
    bool net, refusal; /* in namespaces; the cut-off side must refuse with "no quorum" */
    const char *cache; /* NULL: DEFAULT_CACHE (FAULT_CACHE overrides either) */
    bool persist;      /* every server with --data-dir */
} scenarios[] = {
    {"steady", 3, 3, 0, steady, false, false, NULL, false},
    {"kill_primary", 3, 3, 0, kill_primary, false, false, NULL, false},
    {"kill_coordinator", 3, 3, 0, kill_coordinator, false, false, NULL, false},
    {"restart_loop", 3, 3, 0, restart_loop, false, false, NULL, false},
    {"join_leave", 3, 4, 0, join_leave, false, false, NULL, false},
    {"two_joins", 3, 5, 0, two_joins, false, false, NULL, false},
    {"stop_primary", 3, 3, 0, stop_primary, false, false, NULL, false},
    {"stop_coordinator", 3, 3, 0, stop_coordinator, false, false, NULL, false},
    {"stop_all_one_wakes", 3, 3, 0, stop_all_one_wakes, false, false, NULL, false},
    {"kill_during_rebalance", 3, 4, 200000, kill_during_rebalance, false, false, NULL, false},
    {"cut_data_links", 3, 3, 0, cut_data_links, false, false, NULL, false},
    {"partition_one_of_three", 3, 3, 0, partition_one_of_three, true, true, NULL, false},
    {"partition_two_of_five", 5, 5, 0, partition_two_of_five, true, true, TWO_BACKUPS_CACHE, false},
    {"partition_every_copy", 5, 5, 20000, partition_every_copy, true, true, NULL, false},
    {"partition_coordinator", 3, 3, 0, partition_coordinator, true, true, NULL, false},
    {"partition_flap", 3, 3, 0, partition_flap, true, false, NULL, false},
    {"kill_primary_mid_copy", 3, 3, 0, kill_primary_mid_copy, true, false, TWO_BACKUPS_CACHE, false},
    {"kill_two_restart", 3, 3, 20000, kill_two_restart, false, false, NULL, true},
    {"cut_pair", 3, 3, 0, cut_pair_a_while, true, false, NULL, false},
    {"kill_home_primary", 3, 3, 0, kill_home_primary, false, false, NULL, false},
};
static int which = -1;

static int usage(void)
{
    fprintf(stderr, "usage: fault_run SCENARIO   (FAULT_SEED=n fixes the schedule)\nscenarios:");
    for (size_t i = 0; i < sizeof scenarios / sizeof scenarios[0]; i++) fprintf(stderr, " %s", scenarios[i].name);
    fprintf(stderr, "\n");
    return 2;
}

/* The reads the live nodes answered on their IO threads (INFO stats'
 * lattice_reads_inline; a restarted node counts from its restart): so a
 * green run shows the fast path was exercised.  -1: no node answered. */
static long long inline_reads(void)
{
    long long sum = -1;
    for (int i = 0; i < g.capacity; i++) {
        redisContext *c = connect_node(i, 2000);
        if (!c) continue;
        redisReply *r = redisCommand(c, "INFO stats");
        const char *s = r && r->type != REDIS_REPLY_ERROR && r->str ? strstr(r->str, "lattice_reads_inline:") : NULL;
        if (s) sum = (sum < 0 ? 0 : sum) + atoll(s + strlen("lattice_reads_inline:"));
        if (r) freeReplyObject(r);
        redisFree(c);
    }
    return sum;
}

static bool set_ok, bank_ok;

/* The list-append transactions' verdict: strictly serializable (txn.h),
 * with enough of them committed to mean something.  Saves the history. */
static bool txn_verdict(tx_history *th, char *line, size_t cap, char *path, size_t pcap)
{
    snprintf(path, pcap, "%s/txn.txt", it_dir());
    char comment[400];
    snprintf(comment, sizeof comment, "scenario %s seed %" PRIu64 " cache %s", scenario, seed, cache_spec);
    tx_save(th, path, comment);
    tx_report r;
    bool valid = tx_check(th, stdout, &r);
    snprintf(line, cap,
             "fault %s: %zu list-append transactions (%zu committed, %ld of them across slots, %zu failed, %zu "
             "unknown) on %zu keys, %zu dependencies: %zu anomalies; %d final list reads failed\n",
             scenario, r.ok + r.failed + r.unknown, r.ok, atomic_load(&txn_across_ok), r.failed, r.unknown, r.keys,
             r.edges, r.anomalies, txn_final_failures);
    fputs(line, stdout);
    if (r.ok < MIN_OK_TXNS) printf("fault %s: too few transactions committed for a meaningful verdict\n", scenario);
    return valid && r.ok >= MIN_OK_TXNS;
}

static int verdict(fh_history *h, tx_history *th, int64_t t0, int64_t t1)
{
    char path[400], comment[400];
    snprintf(path, sizeof path, "%s/history.txt", it_dir());
    snprintf(comment, sizeof comment, "scenario %s seed %" PRIu64 " cache %s", scenario, seed, cache_spec);
    fh_save(h, path, comment);
    fh_report r;
    bool valid = fh_check(h, stdout, &r);
    size_t ok = fh_count_ok(h, 0), after = fh_count_ok(h, last_fault_ns);
    double gap = (double)fh_longest_gap(h, t0, t1) / 1e9;
    char line[400];
    snprintf(line, sizeof line,
             "fault %s: %zu operations checked (%zu ok, %zu ok after the last fault) on %zu keys: %zu violations on %zu "
             "keys%s, longest unavailability %.2f s, %lld reads answered inline, seed %" PRIu64 "\n",
             scenario, r.ops_checked, ok, after, r.keys, r.anomalies, r.violations,
             r.inconclusive ? " (some inconclusive)" : "", gap, inline_reads(), seed);
    fputs(line, stdout);
    fputs(setr.line, stdout);
    char tline[400], tpath[400];
    bool txn_ok = txn_verdict(th, tline, sizeof tline, tpath, sizeof tpath);
    /* FAULT_FIGURES=FILE collects every schedule's lines (CTest shows the
     * output of failed tests only). */
    const char *fig = getenv("FAULT_FIGURES");
    FILE *ff = fig && *fig ? fopen(fig, "a") : NULL;
    if (ff) {
        fprintf(ff, "%s%s%s%s", line, setr.line, tline, bank_line);
        fclose(ff);
    }
    int missing = preload_n ? preload_missing() : 0;
    if (preload_n)
        printf("fault %s: %d of %d acknowledged preloaded entries missing afterwards\n", scenario, missing,
               preload_n_acked);
    bool enough = ok >= MIN_OK_OPS && after >= MIN_OK_AFTER_FAULT && setr.acked >= MIN_OK_OPS;
    if (!enough) printf("fault %s: too few operations succeeded for a meaningful verdict\n", scenario);
    if (!settled) printf("fault %s: the grid did not settle after the faults\n", scenario);
    bool refused = true, verified = true;
    if (scenarios[which].net) {
        long minority = 0, majority = 0;
        for (int i = 0; i < g.capacity; i++) *(cut_off[i] ? &minority : &majority) += atomic_load(&no_quorum[i]);
        printf("fault %s: %ld \"no quorum\" refusals on the cut-off side, %ld on the other\n", scenario, minority,
               majority);
        refused = !scenarios[which].refusal || minority > 0;
        if (!refused) printf("fault %s: the cut-off side never refused for lack of quorum\n", scenario);
    }
    if (scenarios[which].net || scenarios[which].persist) verified = copies_verified();
    bool live = true;
    if (scenarios[which].run == cut_data_links) {
        printf("fault %s: %ld data connections cut; %d final reads failed\n", scenario, cuts_made,
               final_read_failures);
        if (!cuts_made) printf("fault %s: ss -K cut nothing (needs root and a kernel with sock_destroy)\n", scenario);
        live = cuts_made > 0 && final_read_failures == 0;
    }
    if (!set_ok)
        printf("fault %s: the set workload lost acknowledged writes or could not read them back\n", scenario);
    if (!txn_ok) printf("fault %s: the list-append transactions are not strictly serializable\n", scenario);
    if (!bank_ok) printf("fault %s: the bank lost or made money, or moved too little\n", scenario);
    if (valid && enough && settled && !missing && refused && verified && live && set_ok && txn_ok && bank_ok) return 0;
    printf("fault %s: FAILED. The history and the nodes' logs are kept in %s\n"
           "  re-check:  %s/tests/fault/fault_check %s\n"
           "  re-check the transactions:  %s/tests/fault/fault_check --txn %s\n"
           "  the set workload's writes:  %s/set.txt\n"
           "  replay the schedule:  FAULT_SEED=%" PRIu64 "%s%s %s/tests/fault/fault_run %s\n",
           scenario, it_dir(), LATTICE_BUILD_DIR, path, LATTICE_BUILD_DIR, tpath, it_dir(), seed, cache_spec == own_cache ? "" : " FAULT_CACHE=",
           cache_spec == own_cache ? "" : cache_spec, LATTICE_BUILD_DIR, scenario);
    return 1;
}

int main(int argc, char **argv)
{
    if (argc != 2) return usage();
    for (size_t i = 0; i < sizeof scenarios / sizeof scenarios[0]; i++)
        if (!strcmp(argv[1], scenarios[i].name)) which = (int)i;
    if (which < 0) return usage();
    scenario = scenarios[which].name;
    const char *s = getenv("FAULT_SEED");
    seed = s && *s ? strtoull(s, NULL, 10) : ((uint64_t)time(NULL) ^ ((uint64_t)getpid() << 20));
    sched_rng = seed * 2654435761ULL + 1;
    own_cache = scenarios[which].cache ? scenarios[which].cache : DEFAULT_CACHE;
    cache_spec = getenv("FAULT_CACHE") && *getenv("FAULT_CACHE") ? getenv("FAULT_CACHE") : own_cache;
    setvbuf(stdout, NULL, _IOLBF, 0);
    char name[64];
    snprintf(name, sizeof name, "fault_%s", scenario);
    it_begin(name);
    g.net = scenarios[which].net;
    persist_dirs = scenarios[which].persist;
    say("seed %" PRIu64 " (FAULT_SEED=%" PRIu64 " repeats this schedule), cache %s", seed, seed, cache_spec);
    form_grid(scenarios[which].nodes, scenarios[which].capacity);
    if (scenarios[which].preload) preload(scenarios[which].preload);
    bank_setup();
    int64_t t0 = now_ns();
    start_load(scenarios[which].nodes, scenarios[which].capacity);
    scenarios[which].run();
    run_until_enough();
    stop_load();
    int64_t t1 = now_ns();
    fh_history all;
    fh_init(&all);
    for (int i = 0; i < n_clients; i++) {
        fh_append_all(&all, &clients[i].h);
        fh_free(&clients[i].h);
    }
    final_reads(&all);
    set_ok = set_check();
    bank_ok = bank_check();
    tx_history txs;
    tx_init(&txs);
    for (int i = 0; i < n_txn_clients; i++) {
        tx_append_all(&txs, &txn_clients[i].th);
        tx_free(&txn_clients[i].th);
    }
    txn_final_reads(&txs);
    int rc = verdict(&all, &txs, t0, t1);
    fh_free(&all);
    tx_free(&txs);
    if (rc == 0) it_end();
    return rc;
}
