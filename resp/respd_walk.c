/*
 * respd walks: SCAN, KEYS, RANDOMKEY, FLUSHDB and FLUSHALL over the ops API's
 * partition-addressed kinds (lattice/ops.h: WALK, CLEAR).
 *
 * Which keys: a cluster-aware connection (docs/RESP.md, "Redirection") walks
 * the partitions this node is primary of (flag LOCAL: the data thread skips
 * the others without a message), as Redis Cluster and DBSIZE do, so cluster
 * clients that scan every primary see each key once; any other connection
 * walks every partition at its primary.  FLUSHDB/FLUSHALL clear every
 * partition, for every connection.
 *
 * SCAN's cursor is (partition << 48 | position): WALK positions are hashes
 * of the key alone, so a cursor means the same whichever node serves the
 * partition next, and a scan survives joins, leaves and failovers: a key
 * present throughout is returned at least once, and the scan ends.  One
 * SCAN call walks partitions in rounds (the cursor's partition first, then
 * 16, 32, ... up to SCAN_SPAN_MAX at once, one message per primary) until
 * it has COUNT keys or the partitions end (an empty keyspace answers cursor
 * 0 at once, as Redis); it stops inside a partition only where that
 * partition's WALK stopped, and drops the answers of later partitions of
 * that round.  MATCH and TYPE filter after the walk, as Redis does (COUNT
 * counts keys visited).
 *
 * Every command is a walker: the command's first op goes out
 * with its batch, and when it returns (respd_walk_first, data thread) the
 * walker keeps WALKER_WINDOW ops in flight from the data thread, one
 * partition (or one more round of one) each, and hands the batch back when
 * every partition is done.  Their callbacks all run on the data thread, so
 * the walker needs no lock.  FLUSH* ASYNC leaves the walker running on its
 * own and answers at once - after it handed the first CLEAR of every
 * partition to the data thread (no window then), so a later command of
 * the same connection reaches each primary after that clear began, and a
 * clear removes only what its primary held when it began (ops.h, CLEAR).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "lattice/alloc.h"
#include "lattice/clock.h"
#include "respd_int.h"
#include "base/base.h"

#define SCAN_SPAN 16             /* partitions of a SCAN call's second round (doubling after) */
#define SCAN_SPAN_MAX 256
#define WALKER_WINDOW 32         /* a walker's ops in flight */
#define WALKER_LIMIT 1024        /* keys one KEYS WALK asks */
/* RANDOMKEY gathers this many keys (or every key, in a smaller keyspace),
 * from a random partition at a random position on, the partitions after it
 * in ring order, and answers one of them at random: so in a keyspace of a
 * few keys each is as likely as the others (taking the first found would
 * answer the key of the lowest partition almost always). */
#define RANDOM_SAMPLE 16
#define POS_BITS 48

enum { W_KEYS = 1, W_RANDOM, W_FLUSH, W_SCAN };

/* SCAN: one partition's answer in the current round. */
typedef struct round_ans {
    lattice_status st;
    int64_t num;
    char *v;
    size_t vlen;
} round_ans;

struct walker {
    batch *b;                    /* NULL once detached (FLUSH ASYNC) */
    lattice_node *node;
    char cache[CACHE_NAME_MAX + 1];
    int kind;
    unsigned flags;              /* LATTICE_OP_LOCAL or 0 */
    uint32_t parts;              /* the cache's partitions (0: learnt from the first answer) */
    uint32_t next;               /* the next partition to start */
    size_t inflight;
    bool stop;
    lattice_status err;          /* the first failure: the reply */
    int64_t err_num;
    uint64_t rnd;
    char *out;                   /* KEYS, SCAN: matching keys, (u32 length, bytes) each; RANDOMKEY: one */
    size_t n_out, len, cap;
    /* SCAN */
    int type_want;               /* SCAN ... TYPE: the value type kept (LATTICE_OP_R_TYPE's numbers), -2 a
                                    name of no type (no key matches), -1 no TYPE */
    long long count, seen;
    uint32_t p0, span, n_back;   /* the current round: partitions [p0, p0 + span), answers back */
    uint64_t from0;              /* the round's first partition starts there */
    round_ans *rr;
    uint64_t cursor;             /* the reply's */
    size_t plen;                 /* KEYS: the pattern (NUL-terminated), 0 = every key */
    char pat[];
};

typedef struct step {
    struct walker *w;
    uint32_t partition;
    uint64_t from;
} step;

bool respd_is_walk_command(lattice_resp_cmd_id id)
{
    return id >= LATTICE_RESP_CMD_SCAN && id <= LATTICE_RESP_CMD_FLUSHALL;
}

static bool eq(const lattice_resp_arg *a, const char *s)
{
    size_t n = strlen(s);
    return a->len == n && strncasecmp(a->ptr, s, n) == 0;
}

/* As the walk's answers are read: the partition count, its keys. */
static uint32_t answer_parts(const lattice_op_result *res)
{
    if (res->status != LATTICE_OK || res->value_len < LATTICE_OP_WALK_HDR) return 0;
    return lattice_op_walk_u32(res->value);
}

/* A status that ends a partition without failing the walk: not this node's
 * (LOCAL), or beyond the cache's partitions. */
static bool skips(lattice_status st) { return st == LATTICE_ERR_NOT_OWNER || st == LATTICE_ERR_INVAL; }

static bool local_walk(const lattice_respd *r, const conn *c)
{
    return r->cfg.moved == LATTICE_RESPD_MOVED_ALWAYS ||
           (r->cfg.moved != LATTICE_RESPD_MOVED_NEVER && c->aware == AWARE_YES);
}

/* Redis 7.0's parseScanCursorOrReply: strtoul, nothing after the digits,
 * no leading blank, no overflow ("-1" is ULONG_MAX, "" is 0, as there). */
static bool parse_cursor(const lattice_resp_arg *a, uint64_t *out)
{
    char tmp[64];
    if (a->len >= sizeof tmp) {
        /* Longer than any unsigned long: only digits overflow, the rest is not a cursor either. */
        return false;
    }
    memcpy(tmp, a->ptr, a->len);
    tmp[a->len] = 0;
    if (strlen(tmp) != a->len) return false; /* a NUL inside: strtoul stops there, Redis sees more */
    char *end;
    errno = 0;
    unsigned long v = strtoul(tmp, &end, 10);
    if ((tmp[0] == ' ' || (tmp[0] >= '\t' && tmp[0] <= '\r')) || *end || errno == ERANGE) return false;
    *out = v;
    return true;
}

static void add_cursor(lattice_resp_out *o, uint64_t cur)
{
    char s[24];
    int n = snprintf(s, sizeof s, "%llu", (unsigned long long)cur);
    lattice_resp_add_array(o, 2);
    lattice_resp_add_bulk(o, s, (size_t)n);
}

/* SCAN's TYPE name as a value type number (Redis's names; LATTICE_OP_R_TYPE's
 * numbers), -2 for a name of none. */
static int type_number(const lattice_resp_arg *t)
{
    static const char *const names[] = {"string", "hash", "list", "set", "zset"};
    for (int i = 0; i < 5; i++)
        if (t->len == strlen(names[i]) && !strncasecmp(t->ptr, names[i], t->len)) return i;
    return -2;
}

static bool key_matches(const struct walker *w, const char *k, size_t n)
{
    return !w->plen || lt_glob_match(w->pat, w->plen, k, n, 0);
}

/* ---- walkers: KEYS, RANDOMKEY, FLUSH* ---- */

static void walker_finish(struct walker *w)
{
    batch *b = w->b;
    if (b) respd_batch_release(b);
    else respd_walk_free(w); /* detached: nobody waits for it */
}

static void step_done(void *arg, size_t i, const lattice_op_result *res);
static bool out_add(struct walker *w, const char *k, size_t n);
static void fail(struct walker *w, lattice_status st, int64_t num);

static bool submit_step(struct walker *w, uint32_t partition, uint64_t from)
{
    step *s = lt_malloc(sizeof *s);
    if (!s) return false;
    *s = (step){w, partition, from};
    lattice_op op = {0};
    op.kind = w->kind == W_FLUSH ? LATTICE_OP_CLEAR : LATTICE_OP_WALK;
    op.flags = w->flags;
    op.cache = w->cache;
    op.partition = partition;
    op.ttl_ms = from;
    op.delta = w->kind == W_RANDOM ? RANDOM_SAMPLE : w->kind == W_SCAN ? w->count : WALKER_LIMIT;
    w->inflight++;
    if (lattice_op_submit(w->node, &op, 1, step_done, s) != LATTICE_OK) {
        w->inflight--;
        lt_free(s);
        return false;
    }
    return true;
}

static bool out_add(struct walker *w, const char *k, size_t n)
{
    if (w->len + n + 4 > w->cap) {
        size_t cap = w->cap ? 2 * w->cap : 4096;
        while (cap < w->len + n + 4) cap *= 2;
        char *o = lt_realloc(w->out, cap);
        if (!o) return false;
        w->out = o;
        w->cap = cap;
    }
    unsigned char *p = (unsigned char *)w->out + w->len;
    p[0] = (unsigned char)n, p[1] = (unsigned char)(n >> 8), p[2] = (unsigned char)(n >> 16), p[3] = (unsigned char)(n >> 24);
    memcpy(w->out + w->len + 4, k, n);
    w->len += n + 4;
    w->n_out++;
    return true;
}

static void fail(struct walker *w, lattice_status st, int64_t num)
{
    if (!w->err) {
        w->err = st;
        w->err_num = num;
    }
    w->stop = true;
}

/* SCAN: a round is back - take its answers in partition order up to COUNT
 * keys or the first partition whose WALK stopped inside it; else the next
 * round, twice as wide. */
static void scan_settle(struct walker *w)
{
    bool cut = false;
    for (uint32_t k = 0; k < w->span && !cut && !w->stop; k++) {
        round_ans *x = &w->rr[k];
        uint64_t p = (uint64_t)w->p0 + k;
        if (x->st != LATTICE_OK && !skips(x->st)) {
            fail(w, x->st, x->num);
            break;
        }
        if (x->st == LATTICE_OK && x->vlen >= LATTICE_OP_WALK_HDR)
            w->seen += lattice_op_walk_u32((const unsigned char *)x->v + 4);
        const char *key;
        size_t off = LATTICE_OP_WALK_HDR, kl;
        unsigned t;
        while (x->st == LATTICE_OK && w->type_want != -2 &&
               lattice_op_walk_next_typed(x->v, x->vlen, &off, &key, &kl, &t))
            if ((w->type_want < 0 || (int)t == w->type_want) && key_matches(w, key, kl) && !out_add(w, key, kl))
                fail(w, LATTICE_ERR_NOMEM, 0);
        if (x->st == LATTICE_OK && x->num >= 0) {
            w->cursor = p << POS_BITS | ((uint64_t)x->num & LATTICE_OP_WALK_POS_MAX);
            cut = true;
        } else if (w->seen >= w->count || p + 1 >= w->parts) {
            w->cursor = p + 1 < w->parts ? (p + 1) << POS_BITS : 0;
            cut = true;
        }
    }
    for (uint32_t k = 0; k < w->span; k++) {
        lt_free(w->rr[k].v);
        w->rr[k].v = NULL;
    }
    uint32_t next = w->p0 + w->span;
    if (cut || w->stop || next >= w->parts) {
        if (!cut) w->cursor = 0;
        return;
    }
    uint32_t span = w->span < SCAN_SPAN ? SCAN_SPAN : w->span * 2 > SCAN_SPAN_MAX ? SCAN_SPAN_MAX : w->span * 2;
    if (span > w->parts - next) span = w->parts - next;
    round_ans *rr = lt_realloc(w->rr, span * sizeof *rr);
    if (!rr) {
        fail(w, LATTICE_ERR_NOMEM, 0);
        return;
    }
    w->rr = rr;
    memset(rr, 0, span * sizeof *rr);
    w->p0 = next;
    w->span = span;
    w->n_back = 0;
    for (uint32_t k = 0; k < span && !w->stop; k++)
        if (!submit_step(w, next + k, 0)) fail(w, LATTICE_ERR_NOMEM, 0);
    /* A failed submit leaves the round short: it never settles, the walk ends with the error. */
}

static void scan_answer(struct walker *w, uint32_t p, const lattice_op_result *res)
{
    if (p < w->p0 || p - w->p0 >= w->span) return;
    round_ans *x = &w->rr[p - w->p0];
    x->st = res->status;
    x->num = res->num;
    if (res->status == LATTICE_OK && res->value_len) {
        x->v = lt_malloc(res->value_len);
        if (x->v) memcpy(x->v, res->value, res->value_len), x->vlen = res->value_len;
        else x->st = LATTICE_ERR_NOMEM;
    }
    if (++w->n_back == w->span && !w->stop) scan_settle(w);
}

/* One answer of partition p's walk: take its keys, then go on - the same
 * partition again, or the next one. */
static void on_answer(struct walker *w, uint32_t p, uint64_t from, const lattice_op_result *res)
{
    if (!w->parts) w->parts = answer_parts(res);
    if (w->kind == W_SCAN) {
        if (w->parts) scan_answer(w, p, res);
        return;
    }
    bool again = false;
    uint64_t again_from = 0;
    if (res->status != LATTICE_OK && !skips(res->status)) {
        fail(w, res->status, res->num);
    } else if (res->status == LATTICE_OK && w->kind == W_FLUSH) {
        again = res->flags & LATTICE_OP_R_MORE;
        again_from = (uint64_t)res->num; /* the version bound of this partition's clear */
    } else if (res->status == LATTICE_OK) {
        const char *key;
        size_t off = LATTICE_OP_WALK_HDR, kl;
        while (!w->stop && lattice_op_walk_next(res->value, res->value_len, &off, &key, &kl)) {
            if (w->kind == W_RANDOM) {
                if (!out_add(w, key, kl)) fail(w, LATTICE_ERR_NOMEM, 0);
                else if (w->n_out >= RANDOM_SAMPLE) w->stop = true; /* enough to choose from */
            } else if (key_matches(w, key, kl) && !out_add(w, key, kl)) {
                fail(w, LATTICE_ERR_NOMEM, 0);
            }
        }
        if (w->kind == W_KEYS && res->num >= 0) again = true, again_from = (uint64_t)res->num;
        /* RANDOMKEY started at a random position: nothing at or above it, so look below. */
        if (w->kind == W_RANDOM && !w->stop && from && off == LATTICE_OP_WALK_HDR) again = true;
    }
    if (!w->stop && again && !submit_step(w, p, again_from)) fail(w, LATTICE_ERR_NOMEM, 0);
    while (!w->stop && (w->inflight < WALKER_WINDOW || !w->b) && w->next < w->parts) {
        uint32_t q = w->next++;
        if (w->kind == W_RANDOM) q = (w->p0 + q) % w->parts; /* ring order after the first */
        if (!submit_step(w, q, w->kind == W_RANDOM ? w->rnd % (LATTICE_OP_WALK_POS_MAX + 1) : 0)) fail(w, LATTICE_ERR_NOMEM, 0);
        w->rnd = w->rnd * 6364136223846793005ull + 1442695040888963407ull;
    }
}

static void step_done(void *arg, size_t i, const lattice_op_result *res)
{
    (void)i;
    step *s = arg;
    struct walker *w = s->w;
    w->inflight--;
    on_answer(w, s->partition, s->from, res);
    lt_free(s);
    if (!w->inflight) walker_finish(w);
}

void respd_walk_first(batch *b, size_t i, const lattice_op_result *res)
{
    opres *x = &b->res[i];
    struct walker *w = b->ents[x->ent].walk;
    x->status = LATTICE_OK;
    if (w->b) atomic_fetch_add(&b->remaining, 1); /* held until the walk ends */
    else b->ents[x->ent].walk = NULL;              /* detached: the walker frees itself */
    const lattice_op *op = &b->ops[i];
    w->inflight++;
    on_answer(w, op->partition, op->ttl_ms, res);
    w->inflight--;
    if (!w->parts && !w->stop) fail(w, LATTICE_ERR_TIMEOUT, 0); /* the partitions never known: try again */
    if (!w->inflight) walker_finish(w);
}

/* SCAN's arguments as Redis 7.0's scanGenericCommand reads them: the cursor,
 * then the options in order (the last MATCH, TYPE and COUNT win); NULL and
 * err set on a bad one. */
static const lattice_resp_arg *scan_args(size_t argc, const lattice_resp_arg *argv, uint64_t *cursor,
                                         long long *count, const lattice_resp_arg **type, const char **err)
{
    static const lattice_resp_arg all = {"*", 1};
    const lattice_resp_arg *pat = &all;
    *type = NULL;
    *count = 10;
    if (!parse_cursor(&argv[1], cursor)) return *err = "ERR invalid cursor", NULL;
    for (size_t i = 2; i < argc; i += 2) {
        bool pair = argc - i >= 2;
        if (pair && eq(&argv[i], "count")) {
            if (!lattice_resp_string2ll(argv[i + 1].ptr, argv[i + 1].len, count))
                return *err = LATTICE_RESP_ERR_NOT_INTEGER, NULL;
            if (*count < 1) return *err = LATTICE_RESP_ERR_SYNTAX, NULL;
        } else if (pair && eq(&argv[i], "match")) {
            pat = &argv[i + 1];
        } else if (pair && eq(&argv[i], "type")) {
            *type = &argv[i + 1];
        } else {
            return *err = LATTICE_RESP_ERR_SYNTAX, NULL;
        }
    }
    return pat;
}

static cmd_outcome walker_command(lattice_respd *r, conn *c, batch *b, lattice_resp_cmd_id id, size_t argc,
                                  const lattice_resp_arg *argv)
{
    int kind = id == LATTICE_RESP_CMD_KEYS        ? W_KEYS
               : id == LATTICE_RESP_CMD_RANDOMKEY ? W_RANDOM
               : id == LATTICE_RESP_CMD_SCAN      ? W_SCAN
                                                  : W_FLUSH;
    bool async = false;
    if (kind == W_FLUSH) { /* Redis 7.0's getFlushCommandFlags */
        if (argc == 2 && eq(&argv[1], "async")) async = true;
        else if (!(argc == 1 || (argc == 2 && eq(&argv[1], "sync")))) return respd_ent_error(b, LATTICE_RESP_ERR_SYNTAX);
    }
    uint64_t cursor = 0;
    long long count = 0;
    const lattice_resp_arg *pat = kind == W_KEYS ? &argv[1] : NULL, *type = NULL;
    if (kind == W_SCAN) {
        const char *err;
        pat = scan_args(argc, argv, &cursor, &count, &type, &err);
        if (!pat) return respd_ent_error(b, err);
    }
    uint32_t parts = respd_partitions(r);
    if (kind == W_SCAN && parts && (cursor >> POS_BITS) >= parts) {
        ent *e = respd_ent_new(b, id); /* past the last partition: the scan is over (no walk) */
        return e ? CMD_BATCHED : CMD_DONE;
    }
    size_t plen = pat ? pat->len : 0;
    struct walker *w = lt_calloc(1, sizeof *w + plen + 1);
    ent *e = w ? respd_ent_new(b, id) : NULL;
    if (!e) {
        lt_free(w);
        return respd_ent_error(b, "OOM command not allowed when used memory > 'maxmemory'.");
    }
    w->b = async ? NULL : b;
    w->node = r->node;
    snprintf(w->cache, sizeof w->cache, "%s", r->cache);
    w->kind = kind;
    w->flags = kind != W_FLUSH && local_walk(r, c) ? LATTICE_OP_LOCAL : 0;
    w->parts = parts;
    w->next = 1;
    w->rnd = lt_mono_ms() * 2654435761u + (uint64_t)(uintptr_t)w;
    w->plen = plen;
    if (plen) memcpy(w->pat, pat->ptr, plen);
    if (plen == 1 && w->pat[0] == '*') w->plen = 0; /* Redis's "no pattern" */
    /* TYPE: the keys whose value is of that type (WALK answers each key's);
     * a name of no type Lattice keeps (stream, module ...) matches none. */
    w->type_want = type ? type_number(type) : -1;
    w->count = count > (long long)LATTICE_OP_WALK_MAX ? LATTICE_OP_WALK_MAX : count;
    e->walk = w;
    /* The first op: partition 0 (RANDOMKEY: a random one, at a random
     * position; SCAN: the cursor's), a round of one for SCAN. */
    uint32_t p = kind == W_RANDOM && w->parts ? (uint32_t)(w->rnd % w->parts) : 0;
    uint64_t from = kind == W_RANDOM ? (w->rnd >> 7) % (LATTICE_OP_WALK_POS_MAX + 1) : 0;
    if (kind == W_RANDOM) w->p0 = p; /* then the partitions after p in ring order */
    if (kind == W_SCAN) {
        p = (uint32_t)(cursor >> POS_BITS);
        from = cursor & LATTICE_OP_WALK_POS_MAX;
        w->p0 = p;
        w->span = 1;
        w->from0 = from;
        w->rr = lt_calloc(1, sizeof *w->rr);
    }
    if ((kind == W_SCAN && !w->rr) ||
        !respd_op_add(b, e, kind == W_FLUSH ? LATTICE_OP_CLEAR : LATTICE_OP_WALK, w->flags, NULL, NULL,
                      kind == W_RANDOM ? 1 : kind == W_SCAN ? w->count : WALKER_LIMIT, from)) {
        b->n_ops = e->first;
        b->n_ents--;
        respd_walk_free(w);
        return respd_ent_error(b, "OOM command not allowed when used memory > 'maxmemory'.");
    }
    b->ops[b->n_ops - 1].partition = p;
    b->res[b->n_ops - 1].walk = true;
    b->sealed = true;
    return CMD_BATCHED;
}

cmd_outcome respd_walk_command(lattice_respd *r, conn *c, batch *b, lattice_resp_cmd_id id, size_t argc,
                               const lattice_resp_arg *argv)
{
    return walker_command(r, c, b, id, argc, argv);
}

void respd_walk_reply(lattice_resp_out *o, const batch *b, const ent *e)
{
    (void)b;
    const struct walker *w = e->walk;
    if (!w && e->cmd == LATTICE_RESP_CMD_SCAN) { /* a cursor past the last partition */
        add_cursor(o, 0);
        lattice_resp_add_array(o, 0);
        return;
    }
    if (!w) { /* FLUSH ASYNC: running on its own */
        lattice_resp_add_simple(o, "OK", 2);
        return;
    }
    if (w->err) {
        opres x = {.status = w->err, .num = w->err_num};
        respd_add_result_error(o, &x);
        return;
    }
    if (w->kind == W_FLUSH) {
        lattice_resp_add_simple(o, "OK", 2);
        return;
    }
    if (w->kind == W_RANDOM && !w->n_out) {
        lattice_resp_add_null(o);
        return;
    }
    if (w->kind == W_SCAN) add_cursor(o, w->cursor);
    if (w->kind != W_RANDOM) lattice_resp_add_array(o, w->n_out);
    size_t off = 0, kl;
    const char *key;
    if (w->kind == W_RANDOM) { /* one of the keys gathered, at random */
        for (uint64_t skip = (w->rnd >> 11) % w->n_out; skip && lattice_op_walk_next(w->out, w->len, &off, &key, &kl); skip--) {}
        if (lattice_op_walk_next(w->out, w->len, &off, &key, &kl)) lattice_resp_add_bulk(o, key, kl);
        return;
    }
    while (lattice_op_walk_next(w->out, w->len, &off, &key, &kl)) lattice_resp_add_bulk(o, key, kl);
}

void respd_walk_free(struct walker *w)
{
    if (!w) return;
    if (w->rr)
        for (uint32_t k = 0; k < w->span; k++) lt_free(w->rr[k].v);
    lt_free(w->rr);
    lt_free(w->out);
    lt_free(w);
}
