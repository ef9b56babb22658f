/*
 * respd introspection: CLIENT LIST/KILL, SLOWLOG, MONITOR (Redis 7.0's
 * semantics and texts; docs/RESP.md).
 *
 * A connection belongs to its IO thread alone (respd_int.h), so a command
 * about every connection of the node asks every IO thread: CLIENT LIST and
 * CLIENT KILL become a request with one leg per IO thread, each queued on
 * that thread's xhead and answered there (lines of its connections, or the
 * connections it closed); the last leg hands the batch back to the
 * requesting connection as a batch of ops would, and its reply is encoded
 * then.  The requester reads nothing meanwhile, so replies keep their order.
 *
 * SLOWLOG is one list under slow_lock, written by every IO thread.
 *
 * MONITOR: a monitor's lines wait in its feed (under mon_lock, written by
 * any IO thread); its own IO thread moves them into the connection's output
 * when woken (mon_wake + efd).  A feed is bounded: lines move only while the
 * output holds less than MON_LIMIT bytes, and a feed past MON_LIMIT closes
 * the monitor (logged), so a monitor that does not read costs at most about
 * 3 x MON_LIMIT.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "lattice/alloc.h"
#include "lattice/log.h"
#include "respd_int.h"

#define SLOW_MAX_ARGC 32           /* Redis's SLOWLOG_ENTRY_MAX_ARGC */
#define SLOW_MAX_STRING 128        /* Redis's SLOWLOG_ENTRY_MAX_STRING */
#define MON_LIMIT (4u << 20)       /* bytes of a monitor's feed, and of its output it is moved into */

static bool eq(const lattice_resp_arg *a, const char *s)
{
    size_t n = strlen(s);
    return a->len == n && strncasecmp(a->ptr, s, n) == 0;
}

static bool grow(char **p, size_t *cap, size_t need)
{
    if (need <= *cap) return true;
    size_t nc = *cap ? *cap * 2 : 256;
    while (nc < need) nc *= 2;
    char *q = lt_realloc(*p, nc);
    if (!q) return false;
    *p = q;
    *cap = nc;
    return true;
}

static bool put(char **p, size_t *len, size_t *cap, const void *s, size_t n)
{
    if (!grow(p, cap, *len + n + 1)) return false;
    memcpy(*p + *len, s, n);
    *len += n;
    return true;
}

static void add_err(conn *c, const char *msg)
{
    lattice_resp_add_error(c->out, msg, strlen(msg));
}

/* Redis's client types by name (getClientTypeByName): every connection
 * here is "normal" (no replicas, masters or pub/sub); -1 unknown. */
enum { TYPE_ANY = -2, TYPE_NONE = 0, TYPE_NORMAL = 1 };
static int client_type(const lattice_resp_arg *a)
{
    if (eq(a, "normal")) return TYPE_NORMAL;
    if (eq(a, "slave") || eq(a, "replica") || eq(a, "master") || eq(a, "pubsub")) return TYPE_NONE;
    return -1;
}

/* AUTH's and HELLO's secrets as Redis 7.0 redacts them in MONITOR and
 * SLOWLOG ("(redacted)"): AUTH's arguments unless there are too many (a
 * syntax error, shown as sent); HELLO's two after AUTH once its protocol
 * version parsed. */
static bool redacted(size_t argc, const lattice_resp_arg *argv, size_t i)
{
    if (i == 0) return false;
    if (eq(&argv[0], "auth")) return argc <= 3;
    if (!eq(&argv[0], "hello") || argc < 2) return false;
    long long ver;
    if (!lattice_resp_string2ll(argv[1].ptr, argv[1].len, &ver) || ver < 2 || ver > 3) return false;
    for (size_t j = 2; j < argc; j++) {
        size_t more = argc - 1 - j;
        if (eq(&argv[j], "auth") && more >= 2) {
            if (i == j + 1 || i == j + 2) return true;
            j += 2;
        } else if (eq(&argv[j], "setname") && more) {
            j++;
        } else {
            return false;
        }
    }
    return false;
}

/* ---- CLIENT LIST / CLIENT KILL ---- */

typedef struct xleg {
    struct cds_wfcq_node qnode;
    struct respd_xreq *x;
    char *buf;                        /* LIST: lines of this thread's connections */
    size_t len, cap;
    long long *ids;                   /* LIST: the id of each line, and where it starts */
    size_t *offs, n, ncap;
    long long killed;                 /* KILL: connections closed (or the requester, to close) */
    bool self;                        /* KILL: the requester matched */
} xleg;

typedef struct respd_xreq {
    batch *b;
    conn *self;                       /* the requester: compared, never dereferenced by the legs */
    atomic_int remaining;
    bool kill, old_form, skipme;
    int type;                         /* TYPE_* */
    long long id;                     /* KILL ID; 0 = any */
    char *addr, *laddr;               /* KILL ADDR / LADDR, NUL-terminated copies; NULL = any */
    long long *ids;                   /* LIST ID ... */
    size_t n_ids;
    int n_legs;
    xleg legs[];
} respd_xreq;

void respd_intro_free(respd_xreq *x)
{
    if (!x) return;
    for (int i = 0; i < x->n_legs; i++) {
        lt_free(x->legs[i].buf);
        lt_free(x->legs[i].ids);
        lt_free(x->legs[i].offs);
    }
    lt_free(x->addr);
    lt_free(x->laddr);
    lt_free(x->ids);
    lt_free(x);
}

/* Redis stops a C string at its NUL: so does the comparison. */
static char *cstr_dup(const lattice_resp_arg *a)
{
    char *s = lt_malloc(a->len + 1);
    if (s) {
        memcpy(s, a->ptr, a->len);
        s[a->len] = '\0';
    }
    return s;
}

static respd_xreq *xreq_new(lattice_respd *r, conn *c, bool kill)
{
    respd_xreq *x = lt_calloc(1, sizeof *x + (size_t)r->n_io * sizeof(xleg));
    if (!x) return NULL;
    x->self = c;
    x->kill = kill;
    x->type = TYPE_ANY;
    x->skipme = true;
    x->n_legs = r->n_io;
    for (int i = 0; i < r->n_io; i++) x->legs[i].x = x;
    return x;
}

/* CLIENT KILL's arguments as Redis 7.0 reads them; NULL after an error reply. */
static respd_xreq *parse_kill(lattice_respd *r, conn *c, size_t argc, const lattice_resp_arg *argv)
{
    char err[LATTICE_RESP_ERR_MAX];
    respd_xreq *x = xreq_new(r, c, true);
    if (!x) {
        respd_add_status_error(c->out, LATTICE_ERR_NOMEM);
        return NULL;
    }
    if (argc == 3) { /* the old form: CLIENT KILL ip:port, which may be the requester */
        x->old_form = true;
        x->skipme = false;
        if (!(x->addr = cstr_dup(&argv[2]))) goto nomem;
        return x;
    }
    for (size_t i = 2; i < argc; i += 2) {
        bool more = argc > i + 1;
        const lattice_resp_arg *v = &argv[i + 1];
        if (more && eq(&argv[i], "id")) {
            long long id;
            if (!lattice_resp_string2ll(v->ptr, v->len, &id) || id < 1) {
                add_err(c, "ERR client-id should be greater than 0");
                goto fail;
            }
            x->id = id;
        } else if (more && eq(&argv[i], "type")) {
            x->type = client_type(v);
            if (x->type < 0) {
                snprintf(err, sizeof err, "ERR Unknown client type '%.*s'", (int)(v->len > 128 ? 128 : v->len), v->ptr);
                add_err(c, err);
                goto fail;
            }
        } else if (more && eq(&argv[i], "addr")) {
            lt_free(x->addr);
            if (!(x->addr = cstr_dup(v))) goto nomem;
        } else if (more && eq(&argv[i], "laddr")) {
            lt_free(x->laddr);
            if (!(x->laddr = cstr_dup(v))) goto nomem;
        } else if (more && eq(&argv[i], "user")) {
            if (!eq(v, "default")) { /* the only user: every connection's */
                snprintf(err, sizeof err, "ERR No such user '%.*s'", (int)(v->len > 128 ? 128 : v->len), v->ptr);
                add_err(c, err);
                goto fail;
            }
        } else if (more && eq(&argv[i], "skipme")) {
            if (eq(v, "yes")) x->skipme = true;
            else if (eq(v, "no")) x->skipme = false;
            else {
                add_err(c, LATTICE_RESP_ERR_SYNTAX);
                goto fail;
            }
        } else {
            add_err(c, LATTICE_RESP_ERR_SYNTAX);
            goto fail;
        }
    }
    return x;
nomem:
    respd_add_status_error(c->out, LATTICE_ERR_NOMEM);
fail:
    respd_intro_free(x);
    return NULL;
}

static respd_xreq *parse_list(lattice_respd *r, conn *c, size_t argc, const lattice_resp_arg *argv)
{
    char err[LATTICE_RESP_ERR_MAX];
    int type = TYPE_ANY;
    bool by_id = argc > 3 && eq(&argv[2], "id");
    if (argc == 4 && eq(&argv[2], "type")) {
        type = client_type(&argv[3]);
        if (type < 0) {
            snprintf(err, sizeof err, "ERR Unknown client type '%.*s'", (int)(argv[3].len > 128 ? 128 : argv[3].len),
                     argv[3].ptr);
            add_err(c, err);
            return NULL;
        }
    } else if (argc != 2 && !by_id) {
        add_err(c, LATTICE_RESP_ERR_SYNTAX);
        return NULL;
    }
    respd_xreq *x = xreq_new(r, c, false);
    if (x && by_id) {
        x->n_ids = argc - 3;
        x->ids = lt_malloc(x->n_ids * sizeof *x->ids);
    }
    if (!x || (by_id && !x->ids)) {
        respd_intro_free(x);
        respd_add_status_error(c->out, LATTICE_ERR_NOMEM);
        return NULL;
    }
    for (size_t i = 0; i < x->n_ids; i++) {
        if (!lattice_resp_string2ll(argv[3 + i].ptr, argv[3 + i].len, &x->ids[i])) {
            add_err(c, "ERR Invalid client ID");
            respd_intro_free(x);
            return NULL;
        }
    }
    x->type = type;
    return x;
}

static bool kill_matches(const lattice_respd *r, const respd_xreq *x, const conn *c)
{
    if (x->addr && strcmp(c->addr, x->addr) != 0) return false;
    if (x->laddr) {
        char la[96];
        snprintf(la, sizeof la, "%s:%d", r->host, r->port);
        if (strcmp(la, x->laddr) != 0) return false;
    }
    if (x->type == TYPE_NONE) return false;
    return !x->id || c->id == x->id;
}

static bool list_wants(const respd_xreq *x, const conn *c)
{
    if (x->type == TYPE_NONE) return false;
    if (!x->n_ids) return true;
    for (size_t i = 0; i < x->n_ids; i++)
        if (x->ids[i] == c->id) return true;
    return false;
}

static void list_line(lattice_respd *r, xleg *l, conn *c)
{
    char line[1024];
    size_t n = respd_client_line(r, c, line, sizeof line);
    if (l->n == l->ncap) {
        size_t nc = l->ncap ? l->ncap * 2 : 16;
        long long *ids = lt_realloc(l->ids, nc * sizeof *ids);
        if (ids) l->ids = ids;
        size_t *offs = ids ? lt_realloc(l->offs, nc * sizeof *offs) : NULL;
        if (offs) l->offs = offs;
        if (!ids || !offs) return; /* out of memory: the line is left out */
        l->ncap = nc;
    }
    size_t at = l->len;
    if (!put(&l->buf, &l->len, &l->cap, line, n)) return;
    l->ids[l->n] = c->id;
    l->offs[l->n++] = at;
}

/* On the leg's IO thread: its connections only. */
static void leg_run(io_thread *io, xleg *l)
{
    respd_xreq *x = l->x;
    for (conn *c = io->conns, *nx; c; c = nx) {
        nx = c->next;
        if (!x->kill) {
            if (list_wants(x, c)) list_line(io->r, l, c);
            continue;
        }
        if (!kill_matches(io->r, x, c)) continue;
        if (c == x->self) {
            if (x->skipme) continue;
            l->self = true; /* closed after its reply, as Redis's CLOSE_AFTER_REPLY */
        } else {
            respd_conn_close(c);
        }
        l->killed++;
    }
}

static void leg_done(xleg *l)
{
    if (atomic_fetch_sub(&l->x->remaining, 1) == 1) respd_batch_return(l->x->b);
}

void respd_intro_post(lattice_respd *r, conn *c, batch *b)
{
    respd_xreq *x = b->xreq;
    b->c = c;
    x->b = b;
    c->in_flight = true;
    atomic_store(&x->remaining, x->n_legs);
    for (int i = 0; i < x->n_legs; i++) {
        io_thread *io = &r->io[i];
        cds_wfcq_node_init(&x->legs[i].qnode);
        if (!cds_wfcq_enqueue(&io->xhead, &io->xtail, &x->legs[i].qnode)) {
            uint64_t one = 1;
            ssize_t w = write(io->efd, &one, sizeof one);
            (void)w;
        }
    }
}

static int cmp_ll(const void *a, const void *b)
{
    long long x = **(long long *const *)a, y = **(long long *const *)b;
    return (x > y) - (x < y);
}

/* The line of connection id among the legs' answers; NULL when none. */
static const char *find_line(const respd_xreq *x, long long id, size_t *len)
{
    for (int i = 0; i < x->n_legs; i++) {
        const xleg *l = &x->legs[i];
        for (size_t k = 0; k < l->n; k++) {
            if (l->ids[k] != id) continue;
            size_t end = k + 1 < l->n ? l->offs[k + 1] : l->len;
            *len = end - l->offs[k];
            return l->buf + l->offs[k];
        }
    }
    return NULL;
}

static void list_reply(lattice_resp_out *o, const respd_xreq *x)
{
    char *out = NULL;
    size_t len = 0, cap = 0, total = 0, ln;
    bool ok = true;
    if (x->n_ids) { /* in the order asked, as Redis (a repeated id repeats) */
        for (size_t i = 0; i < x->n_ids; i++) {
            const char *s = find_line(x, x->ids[i], &ln);
            if (s) ok &= put(&out, &len, &cap, s, ln);
        }
    } else { /* oldest first: Redis's list order */
        for (int i = 0; i < x->n_legs; i++) total += x->legs[i].n;
        long long **order = lt_malloc((total ? total : 1) * sizeof *order);
        ok = order != NULL;
        size_t k = 0;
        for (int i = 0; ok && i < x->n_legs; i++)
            for (size_t j = 0; j < x->legs[i].n; j++) order[k++] = &x->legs[i].ids[j];
        if (ok) qsort(order, total, sizeof *order, cmp_ll);
        for (size_t j = 0; ok && j < total; j++) {
            const char *s = find_line(x, *order[j], &ln);
            if (s) ok &= put(&out, &len, &cap, s, ln);
        }
        lt_free(order);
    }
    if (ok) lattice_resp_add_verbatim(o, "txt", out ? out : "", len);
    else respd_add_status_error(o, LATTICE_ERR_NOMEM);
    lt_free(out);
}

void respd_intro_reply(lattice_resp_out *o, const batch *b, const ent *e)
{
    const respd_xreq *x = b->xreq;
    (void)e;
    if (!x) {
        respd_add_status_error(o, LATTICE_ERR_NOMEM);
        return;
    }
    if (!x->kill) {
        list_reply(o, x);
        return;
    }
    long long killed = 0;
    bool self = false;
    for (int i = 0; i < x->n_legs; i++) {
        killed += x->legs[i].killed;
        self |= x->legs[i].self;
    }
    if (!x->old_form) lattice_resp_add_int(o, killed);
    else if (killed) lattice_resp_add_simple(o, "OK", 2);
    else lattice_resp_add_error(o, "ERR No such client", 18);
    if (self) b->c->closing = true;
}

/* ---- SLOWLOG ---- */

typedef struct respd_slow {
    struct respd_slow *next, *prev;   /* newest first */
    long long id, time_s, dur_us;
    char *argv;                       /* packed (pack_argv) */
    size_t argv_len;
    char addr[64];
    char name[128];
} respd_slow;

/* argv as Redis keeps it in an entry: at most 32 arguments (the last then
 * says "... (N more arguments)"), each at most 128 bytes ("... (N more
 * bytes)"), secrets redacted.  Packed as argc then (length, bytes) pairs,
 * 32-bit lengths. */
static bool pack_argv(char **p, size_t *len, size_t *cap, size_t argc, const lattice_resp_arg *argv)
{
    uint32_t n = (uint32_t)(argc > SLOW_MAX_ARGC ? SLOW_MAX_ARGC : argc);
    bool ok = put(p, len, cap, &n, sizeof n);
    for (uint32_t j = 0; ok && j < n; j++) {
        char tail[64];
        const char *s = argv[j].ptr;
        size_t sl = argv[j].len, tl = 0;
        if (n != argc && j == n - 1) {
            tl = (size_t)snprintf(tail, sizeof tail, "... (%zu more arguments)", argc - n + 1);
            sl = 0;
        } else if (redacted(argc, argv, j)) {
            s = "(redacted)";
            sl = 10;
        } else if (sl > SLOW_MAX_STRING) {
            tl = (size_t)snprintf(tail, sizeof tail, "... (%zu more bytes)", sl - SLOW_MAX_STRING);
            sl = SLOW_MAX_STRING;
        }
        uint32_t total = (uint32_t)(sl + tl);
        ok = put(p, len, cap, &total, sizeof total) && put(p, len, cap, s, sl) && put(p, len, cap, tail, tl);
    }
    return ok;
}

void respd_intro_init(lattice_respd *r)
{
    atomic_init(&r->slow_slower_than, 10000);
    atomic_init(&r->slow_max_len, 128);
    respd_enc_init(r);
    pthread_mutex_init(&r->slow_lock, NULL);
    pthread_mutex_init(&r->mon_lock, NULL);
}

bool respd_slowlog_wants(lattice_respd *r)
{
    return atomic_load_explicit(&r->slow_slower_than, memory_order_relaxed) >= 0;
}

static void slow_free_list(respd_slow *e)
{
    while (e) {
        respd_slow *nx = e->next;
        lt_free(e->argv);
        lt_free(e);
        e = nx;
    }
}

/* Takes the packed argv (freed here when not kept). */
static void slow_push(lattice_respd *r, conn *c, char *argv, size_t argv_len, uint64_t took_us)
{
    respd_slow *e = lt_calloc(1, sizeof *e);
    if (!e) {
        lt_free(argv);
        return;
    }
    e->time_s = (long long)time(NULL);
    e->dur_us = (long long)took_us;
    e->argv = argv;
    e->argv_len = argv_len;
    snprintf(e->addr, sizeof e->addr, "%s", c->addr);
    snprintf(e->name, sizeof e->name, "%s", c->name);
    pthread_mutex_lock(&r->slow_lock);
    e->id = r->slow_next_id++;
    e->next = r->slow_head;
    if (r->slow_head) r->slow_head->prev = e;
    else r->slow_tail = e;
    r->slow_head = e;
    r->slow_len++;
    long long max = atomic_load(&r->slow_max_len);
    respd_slow *drop = NULL;
    while (r->slow_len > max) { /* Redis trims at a push only */
        respd_slow *t = r->slow_tail;
        r->slow_tail = t->prev;
        if (r->slow_tail) r->slow_tail->next = NULL;
        else r->slow_head = NULL;
        r->slow_len--;
        t->next = drop;
        drop = t;
    }
    pthread_mutex_unlock(&r->slow_lock);
    slow_free_list(drop);
}

static bool slow_enough(lattice_respd *r, uint64_t took_us)
{
    long long t = atomic_load_explicit(&r->slow_slower_than, memory_order_relaxed);
    return t >= 0 && took_us >= (uint64_t)t;
}

void respd_slowlog_add(lattice_respd *r, conn *c, size_t argc, const lattice_resp_arg *argv, uint64_t took_us)
{
    if (!slow_enough(r, took_us)) return;
    char *p = NULL;
    size_t len = 0, cap = 0;
    if (pack_argv(&p, &len, &cap, argc, argv)) slow_push(r, c, p, len, took_us);
    else lt_free(p);
}

void respd_slowlog_keep(batch *b, ent *e, size_t argc, const lattice_resp_arg *argv)
{
    size_t at = b->slow_len;
    if (pack_argv(&b->slow, &b->slow_len, &b->slow_cap, argc, argv)) e->slow = (uint32_t)at + 1;
    else b->slow_len = at;
}

void respd_slowlog_add_kept(lattice_respd *r, conn *c, const batch *b, const ent *e, uint64_t took_us)
{
    if (!slow_enough(r, took_us)) return;
    const char *s = b->slow + e->slow - 1;
    uint32_t n;
    memcpy(&n, s, sizeof n);
    size_t len = sizeof n;
    for (uint32_t j = 0; j < n; j++) {
        uint32_t l;
        memcpy(&l, s + len, sizeof l);
        len += sizeof l + l;
    }
    char *p = lt_malloc(len);
    if (!p) return;
    memcpy(p, s, len);
    slow_push(r, c, p, len, took_us);
}

/* Calls fn with the newest `count` entries (count <= slow_len), newest
 * first.  Call with slow_lock held. */
static void slow_each_locked(lattice_respd *r, long long count, lattice_respd_slow_fn fn, void *ctx)
{
    respd_slow *e = r->slow_head;
    for (long long i = 0; i < count && e; i++, e = e->next) {
        const char *av[SLOW_MAX_ARGC];
        size_t al[SLOW_MAX_ARGC];
        uint32_t n;
        memcpy(&n, e->argv, sizeof n);
        size_t at = sizeof n;
        for (uint32_t j = 0; j < n; j++) { /* n <= SLOW_MAX_ARGC: pack_argv */
            uint32_t l;
            memcpy(&l, e->argv + at, sizeof l);
            av[j] = e->argv + at + sizeof l;
            al[j] = l;
            at += sizeof l + l;
        }
        lattice_respd_slow_entry x = {e->id, e->time_s, e->dur_us, n, av, al, e->addr, e->name};
        fn(ctx, &x);
    }
}

static void slow_reply(void *ctx, const lattice_respd_slow_entry *e)
{
    lattice_resp_out *o = ctx;
    lattice_resp_add_array(o, 6);
    lattice_resp_add_int(o, e->id);
    lattice_resp_add_int(o, e->time_s);
    lattice_resp_add_int(o, e->duration_us);
    lattice_resp_add_array(o, e->argc);
    for (size_t j = 0; j < e->argc; j++) lattice_resp_add_bulk(o, e->argv[j], e->argv_len[j]);
    lattice_resp_add_bulk(o, e->client, strlen(e->client));
    lattice_resp_add_bulk(o, e->client_name, strlen(e->client_name));
}

static void slowlog_get(lattice_respd *r, lattice_resp_out *o, long long count)
{
    pthread_mutex_lock(&r->slow_lock);
    if (count < 0 || count > r->slow_len) count = r->slow_len;
    lattice_resp_add_array(o, (size_t)count);
    slow_each_locked(r, count, slow_reply, o);
    pthread_mutex_unlock(&r->slow_lock);
}

void lattice_respd_slowlog_read(lattice_respd *r, size_t max, lattice_respd_slow_fn fn, void *ctx,
                                lattice_respd_slowlog_info *info)
{
    info->slower_than_us = atomic_load(&r->slow_slower_than);
    info->max_len = atomic_load(&r->slow_max_len);
    pthread_mutex_lock(&r->slow_lock);
    info->len = r->slow_len;
    slow_each_locked(r, (long long)max < r->slow_len ? (long long)max : r->slow_len, fn, ctx);
    pthread_mutex_unlock(&r->slow_lock);
}

static void slow_clear(lattice_respd *r)
{
    pthread_mutex_lock(&r->slow_lock);
    respd_slow *e = r->slow_head;
    r->slow_head = r->slow_tail = NULL;
    r->slow_len = 0;
    pthread_mutex_unlock(&r->slow_lock);
    slow_free_list(e);
}

static void cmd_slowlog(lattice_respd *r, conn *c, lattice_resp_cmd_id id, size_t argc, const lattice_resp_arg *argv)
{
    lattice_resp_out *o = c->out;
    if (id == LATTICE_RESP_CMD_SLOWLOG_LEN) {
        pthread_mutex_lock(&r->slow_lock);
        long long n = r->slow_len;
        pthread_mutex_unlock(&r->slow_lock);
        lattice_resp_add_int(o, n);
    } else if (id == LATTICE_RESP_CMD_SLOWLOG_RESET) {
        slow_clear(r);
        lattice_resp_add_simple(o, "OK", 2);
    } else if (argc <= 3) { /* GET [count] */
        long long count = 10;
        if (argc == 3 && (!lattice_resp_string2ll(argv[2].ptr, argv[2].len, &count) || count < -1)) {
            add_err(c, "ERR count should be greater than or equal to -1");
            return;
        }
        slowlog_get(r, o, count);
        if (lattice_resp_out_overflowed(o)) c->closing = true; /* a partial multi-element reply */
    } else {
        char err[LATTICE_RESP_ERR_MAX];
        snprintf(err, sizeof err, "ERR unknown subcommand or wrong number of arguments for '%.*s'. Try SLOWLOG HELP.",
                 (int)(argv[1].len > 128 ? 128 : argv[1].len), argv[1].ptr);
        add_err(c, err);
    }
}

/* ---- MONITOR ---- */

typedef struct respd_mon {
    struct respd_mon *next;           /* r->mons */
    conn *c;                          /* its IO thread moves the feed */
    char *buf;                        /* the feed: lines not yet in c->out (mon_lock) */
    size_t len, cap;
    bool held;                        /* the output is full: every append wakes the thread */
    bool over;                        /* the feed passed MON_LIMIT: close it */
} respd_mon;

static void mon_wake(respd_mon *m)
{
    io_thread *io = m->c->io;
    atomic_store(&io->mon_wake, true);
    uint64_t one = 1;
    ssize_t w = write(io->efd, &one, sizeof one);
    (void)w;
}

static void cmd_monitor(lattice_respd *r, conn *c)
{
    if (!c->mon) {
        respd_mon *m = lt_calloc(1, sizeof *m);
        if (!m) {
            respd_add_status_error(c->out, LATTICE_ERR_NOMEM);
            return;
        }
        m->c = c;
        c->mon = m;
        pthread_mutex_lock(&r->mon_lock);
        m->next = r->mons;
        r->mons = m;
        atomic_fetch_add(&r->n_mons, 1);
        pthread_mutex_unlock(&r->mon_lock);
    }
    lattice_resp_add_simple(c->out, "OK", 2);
}

void respd_mon_detach(conn *c)
{
    lattice_respd *r = c->io->r;
    respd_mon *m = c->mon;
    pthread_mutex_lock(&r->mon_lock);
    for (respd_mon **p = &r->mons; *p; p = &(*p)->next) {
        if (*p == m) {
            *p = m->next;
            break;
        }
    }
    atomic_fetch_sub(&r->n_mons, 1);
    pthread_mutex_unlock(&r->mon_lock);
    c->mon = NULL;
    lt_free(m->buf);
    lt_free(m);
}

/* sdscatrepr: a quoted argument with Redis's escapes. */
static bool repr(char **p, size_t *len, size_t *cap, const char *s, size_t n)
{
    if (!grow(p, cap, *len + 4 * n + 3)) return false;
    char *d = *p + *len;
    *d++ = '"';
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        switch (ch) {
        case '\\':
        case '"': *d++ = '\\'; *d++ = (char)ch; break;
        case '\n': *d++ = '\\'; *d++ = 'n'; break;
        case '\r': *d++ = '\\'; *d++ = 'r'; break;
        case '\t': *d++ = '\\'; *d++ = 't'; break;
        case '\a': *d++ = '\\'; *d++ = 'a'; break;
        case '\b': *d++ = '\\'; *d++ = 'b'; break;
        default:
            if (ch >= 0x20 && ch < 0x7f) *d++ = (char)ch;
            else d += sprintf(d, "\\x%02x", ch);
        }
    }
    *d++ = '"';
    *len = (size_t)(d - *p);
    return true;
}

void respd_monitor_feed(lattice_respd *r, conn *c, const lattice_resp_cmd *rc, size_t argc,
                        const lattice_resp_arg *argv)
{
    if (strstr(lattice_resp_cmd_acl(rc), "@admin")) return; /* as Redis: admin commands are not shown */
    struct timeval tv;
    gettimeofday(&tv, NULL);
    char head[128];
    int hn = snprintf(head, sizeof head, "+%ld.%06ld [0 %s] ", (long)tv.tv_sec, (long)tv.tv_usec, c->addr);
    char *line = NULL;
    size_t len = 0, cap = 0;
    bool ok = put(&line, &len, &cap, head, (size_t)hn);
    for (size_t j = 0; ok && j < argc; j++) {
        if (redacted(argc, argv, j)) ok = repr(&line, &len, &cap, "(redacted)", 10);
        else ok = repr(&line, &len, &cap, argv[j].ptr, argv[j].len);
        if (ok && j + 1 < argc) ok = put(&line, &len, &cap, " ", 1);
    }
    ok = ok && put(&line, &len, &cap, "\r\n", 2);
    pthread_mutex_lock(&r->mon_lock);
    for (respd_mon *m = r->mons; m; m = m->next) {
        if (m->over) continue;
        if (!ok || m->len + len > MON_LIMIT) {
            m->over = true;
            mon_wake(m);
            continue;
        }
        bool wake = m->len == 0 || m->held;
        if (!put(&m->buf, &m->len, &m->cap, line, len)) m->over = true;
        if (wake || m->over) mon_wake(m);
    }
    pthread_mutex_unlock(&r->mon_lock);
    lt_free(line);
}

/* The calling IO thread's monitors: move their feeds into their outputs
 * while those hold less than MON_LIMIT; close those past the bound. */
static void mon_pump(io_thread *io)
{
    lattice_respd *r = io->r;
    conn *todo[64];
    bool over[64];
    size_t n = 0;
    pthread_mutex_lock(&r->mon_lock);
    for (respd_mon *m = r->mons; m && n < 64; m = m->next) {
        if (m->c->io != io || (!m->len && !m->over)) continue;
        over[n] = m->over;
        if (!m->over && lattice_resp_out_pending(m->c->out) < MON_LIMIT) {
            if (lattice_resp_add_raw(m->c->out, m->buf, m->len) != LATTICE_OK) over[n] = true;
            m->len = 0;
            m->held = false;
        } else {
            m->held = true;
        }
        todo[n++] = m->c;
    }
    pthread_mutex_unlock(&r->mon_lock);
    for (size_t i = 0; i < n; i++) {
        if (over[i]) {
            LT_LOG(LT_WARN, "resp", "monitor %s over its %u byte bound (it does not read): closed", todo[i]->addr,
                   MON_LIMIT);
            respd_conn_close(todo[i]);
        } else {
            respd_conn_flush(todo[i]);
        }
    }
    if (n == 64) { /* more than a round's worth: the next wake-up does the rest */
        atomic_store(&io->mon_wake, true);
        uint64_t one = 1;
        ssize_t w = write(io->efd, &one, sizeof one);
        (void)w;
    }
}

void respd_intro_drain(io_thread *io)
{
    struct cds_wfcq_node *n;
    while ((n = __cds_wfcq_dequeue_blocking(&io->xhead, &io->xtail))) {
        xleg *l = caa_container_of(n, xleg, qnode);
        leg_run(io, l);
        leg_done(l);
    }
    if (atomic_exchange(&io->mon_wake, false)) mon_pump(io);
}

void respd_intro_destroy(lattice_respd *r)
{
    for (int i = 0; i < r->n_io; i++) {
        io_thread *io = &r->io[i];
        if (io->r != r) continue; /* bind failed before this one */
        struct cds_wfcq_node *n;
        while ((n = __cds_wfcq_dequeue_nonblocking(&io->xhead, &io->xtail)) && n != CDS_WFCQ_WOULDBLOCK)
            leg_done(caa_container_of(n, xleg, qnode)); /* unanswered: its batch is freed with the others */
        cds_wfcq_destroy(&io->xhead, &io->xtail);
    }
    slow_clear(r);
}

cmd_outcome respd_intro_command(lattice_respd *r, conn *c, batch *b, lattice_resp_cmd_id id, size_t argc,
                                const lattice_resp_arg *argv)
{
    if (id == LATTICE_RESP_CMD_MONITOR) {
        cmd_monitor(r, c);
        return CMD_DONE;
    }
    if (id != LATTICE_RESP_CMD_CLIENT_LIST && id != LATTICE_RESP_CMD_CLIENT_KILL) {
        cmd_slowlog(r, c, id, argc, argv);
        return CMD_DONE;
    }
    respd_xreq *x = id == LATTICE_RESP_CMD_CLIENT_LIST ? parse_list(r, c, argc, argv) : parse_kill(r, c, argc, argv);
    if (!x) return CMD_DONE; /* an error reply was written */
    if (!respd_ent_new(b, id)) {
        respd_intro_free(x);
        respd_add_status_error(c->out, LATTICE_ERR_NOMEM);
        return CMD_DONE;
    }
    b->xreq = x;
    return CMD_BATCHED;
}
