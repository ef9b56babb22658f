/*
 * The list-append transaction checker (see txn.h): the history, its text
 * form, and the Elle-style inference of dependencies and their cycles.
 *
 * Real-time order is not added as an edge per pair (quadratic): every ok
 * completion gets a barrier node, barriers form a chain in time order, a
 * transaction points to its own completion's barrier and the last barrier
 * before a transaction's invoke points to it.  A path T1 -> ... -> T2 over
 * barriers exists exactly when T1 completed before T2 was invoked, with
 * O(n) edges; witnesses print such a path as one "rt" edge.
 */
#include "txn.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

static void *xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (!q) abort();
    return q;
}

#define GROW(arr, cnt, cap)                                                                                            \
    do {                                                                                                               \
        if ((cnt) == (cap)) {                                                                                          \
            (cap) = (cap) ? (cap) * 2 : 64;                                                                            \
            (arr) = xrealloc((arr), (cap) * sizeof *(arr));                                                            \
        }                                                                                                              \
    } while (0)

void tx_init(tx_history *h) { memset(h, 0, sizeof *h); }

void tx_free(tx_history *h)
{
    free(h->ops);
    free(h->mops);
    free(h->elems);
    tx_init(h);
}

void tx_begin(tx_history *h, int client, int node, int64_t invoke)
{
    GROW(h->ops, h->n, h->cap);
    h->ops[h->n] = (tx_op){.invoke = invoke, .complete = FH_INF, .client = client, .node = node,
                           .outcome = FH_UNKNOWN, .mop0 = h->nmops};
}

static tx_mop *new_mop(tx_history *h)
{
    GROW(h->mops, h->nmops, h->mops_cap);
    h->ops[h->n].nmops++;
    return memset(&h->mops[h->nmops++], 0, sizeof(tx_mop));
}

void tx_append(tx_history *h, uint32_t key, int64_t value)
{
    tx_mop *m = new_mop(h);
    m->kind = TX_APPEND;
    m->key = key;
    m->value = value;
}

void tx_read_unknown(tx_history *h, uint32_t key)
{
    tx_mop *m = new_mop(h);
    m->kind = TX_READ;
    m->key = key;
}

void tx_read(tx_history *h, uint32_t key, const int64_t *list, size_t n)
{
    tx_mop *m = new_mop(h);
    m->kind = TX_READ;
    m->key = key;
    m->known = true;
    m->list0 = h->nelems;
    m->n = n;
    for (size_t i = 0; i < n; i++) {
        GROW(h->elems, h->nelems, h->elems_cap);
        h->elems[h->nelems++] = list[i];
    }
}

void tx_end(tx_history *h, fh_outcome outcome, int64_t complete)
{
    tx_op *o = &h->ops[h->n++];
    o->outcome = outcome;
    o->complete = outcome == FH_UNKNOWN ? FH_INF : complete;
}

void tx_append_all(tx_history *dst, const tx_history *src)
{
    for (size_t i = 0; i < src->n; i++) {
        const tx_op *o = &src->ops[i];
        tx_begin(dst, o->client, o->node, o->invoke);
        for (size_t j = 0; j < o->nmops; j++) {
            const tx_mop *m = &src->mops[o->mop0 + j];
            if (m->kind == TX_APPEND) tx_append(dst, m->key, m->value);
            else if (m->known) tx_read(dst, m->key, m->n ? src->elems + m->list0 : NULL, m->n);
            else tx_read_unknown(dst, m->key);
        }
        tx_end(dst, o->outcome, o->complete);
    }
}

/* ---- text form */

static const char *const outcome_name[] = {"ok", "fail", "unknown"};

bool tx_save(const tx_history *h, const char *path, const char *comment)
{
    FILE *f = fopen(path, "w");
    if (!f) return false;
    fprintf(f, "# lattice list-append history: CLIENT NODE INVOKE_NS COMPLETE_NS OUTCOME a KEY VALUE;r KEY V1,V2...\n");
    if (comment) fprintf(f, "# %s\n", comment);
    for (size_t i = 0; i < h->n; i++) {
        const tx_op *o = &h->ops[i];
        fprintf(f, "%d %d %" PRId64 " ", o->client, o->node, o->invoke);
        if (o->outcome == FH_UNKNOWN) fputs("-", f);
        else fprintf(f, "%" PRId64, o->complete);
        fprintf(f, " %s ", outcome_name[o->outcome]);
        for (size_t j = 0; j < o->nmops; j++) {
            const tx_mop *m = &h->mops[o->mop0 + j];
            if (j) fputc(';', f);
            if (m->kind == TX_APPEND) {
                fprintf(f, "a %" PRIu32 " %" PRId64, m->key, m->value);
                continue;
            }
            fprintf(f, "r %" PRIu32 " ", m->key);
            if (!m->known) fputc('?', f);
            else if (!m->n) fputc('-', f);
            for (size_t e = 0; m->known && e < m->n; e++)
                fprintf(f, "%s%" PRId64, e ? "," : "", h->elems[m->list0 + e]);
        }
        fputc('\n', f);
    }
    bool ok = !ferror(f);
    return fclose(f) == 0 && ok;
}

static bool parse_i64(const char *s, char **end, int64_t *v)
{
    errno = 0;
    long long x = strtoll(s, end, 10);
    if (errno || *end == s) return false;
    *v = x;
    return true;
}

/* One micro-operation of a line ("a K V" or "r K LIST"). */
static bool parse_mop(tx_history *h, char *s, int64_t **list, size_t *cap)
{
    char kind = s[0];
    char *end;
    int64_t key, v;
    if ((kind != 'a' && kind != 'r') || s[1] != ' ' || !parse_i64(s + 2, &end, &key) || key < 0 || key > UINT32_MAX ||
        *end != ' ')
        return false;
    s = end + 1;
    if (kind == 'a') {
        if (!parse_i64(s, &end, &v) || *end) return false;
        tx_append(h, (uint32_t)key, v);
        return true;
    }
    if (!strcmp(s, "?")) {
        tx_read_unknown(h, (uint32_t)key);
        return true;
    }
    size_t n = 0;
    if (strcmp(s, "-")) {
        for (;;) {
            if (!parse_i64(s, &end, &v)) return false;
            GROW(*list, n, *cap);
            (*list)[n++] = v;
            if (!*end) break;
            if (*end != ',') return false;
            s = end + 1;
        }
    }
    tx_read(h, (uint32_t)key, *list, n);
    return true;
}

static bool parse_line(tx_history *h, char *line, int64_t **list, size_t *cap)
{
    char *f[6];
    int nf = 0;
    char *save = NULL, *t;
    while (nf < 5 && (t = strtok_r(nf ? NULL : line, " ", &save))) f[nf++] = t;
    f[5] = save; /* the micro-operations, spaces included */
    if (nf != 5 || !f[5] || !*f[5]) return false;
    char *end;
    int64_t client, node, inv, cmp = FH_INF;
    if (!parse_i64(f[0], &end, &client) || *end || !parse_i64(f[1], &end, &node) || *end ||
        !parse_i64(f[2], &end, &inv) || *end)
        return false;
    if (strcmp(f[3], "-") && (!parse_i64(f[3], &end, &cmp) || *end)) return false;
    int oc = -1;
    for (int i = 0; i < 3; i++)
        if (!strcmp(f[4], outcome_name[i])) oc = i;
    if (oc < 0 || (oc != FH_UNKNOWN && cmp == FH_INF)) return false;
    tx_begin(h, (int)client, (int)node, inv);
    char *ms = NULL;
    for (char *m = strtok_r(f[5], ";", &ms); m; m = strtok_r(NULL, ";", &ms))
        if (!parse_mop(h, m, list, cap)) {
            /* drop the half-built transaction */
            h->nmops = h->ops[h->n].mop0;
            return false;
        }
    tx_end(h, (fh_outcome)oc, cmp);
    return true;
}

bool tx_load(tx_history *h, const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "%s: %s\n", path, strerror(errno));
        return false;
    }
    char *line = NULL;
    size_t lcap = 0, lineno = 0, cap = 0;
    int64_t *list = NULL;
    bool ok = true;
    ssize_t len;
    while ((len = getline(&line, &lcap, f)) >= 0) {
        lineno++;
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r')) line[--len] = 0;
        if (!len || line[0] == '#') continue;
        if (!parse_line(h, line, &list, &cap)) {
            fprintf(stderr, "%s:%zu: not a transaction line\n", path, lineno);
            ok = false;
            break;
        }
    }
    free(line);
    free(list);
    fclose(f);
    return ok;
}

/* ---- the checker */

static const char *const anomaly_names[TXA_KINDS_] = {
    [TXA_G0] = "G0",
    [TXA_G1A] = "G1a",
    [TXA_G1B] = "G1b",
    [TXA_G1C] = "G1c",
    [TXA_G_SINGLE] = "G-single",
    [TXA_G2] = "G2",
    [TXA_G0_RT] = "G0-realtime",
    [TXA_G1C_RT] = "G1c-realtime",
    [TXA_G_SINGLE_RT] = "G-single-realtime",
    [TXA_G2_RT] = "G2-realtime",
    [TXA_LOST] = "lost-append",
    [TXA_INCOMPATIBLE] = "incompatible-order",
    [TXA_DUPLICATE] = "duplicate",
    [TXA_GARBAGE] = "garbage",
    [TXA_INTERNAL] = "internal",
};

const char *tx_anomaly_name(tx_anomaly a) { return a < TXA_KINDS_ ? anomaly_names[a] : "?"; }

enum { E_WW = 1, E_WR = 2, E_RW = 4, E_RT = 8 };
#define NONE SIZE_MAX

/* Who appended (key, value): the transaction, whether it was that
 * transaction's last append to the key, and the value's place in the key's
 * version order (NONE until a read shows it). */
typedef struct writer {
    int64_t value;
    uint32_t key; /* dense key index + 1; 0 = empty slot */
    bool final;
    size_t txn, pos, seen; /* seen: the last read that held it, for duplicates */
} writer;

typedef struct keyinfo {
    uint32_t id;
    size_t longest; /* the mop with the longest ok read, NONE if none */
    bool broken;    /* reads not prefixes of one another: no edges */
    size_t last_read_mop; /* the ok read invoked last (for lost appends) */
    int64_t last_read_invoke;
} keyinfo;

typedef struct edge {
    size_t to;
    uint32_t key; /* the key it came from (dense index), for witnesses */
    uint8_t type;
} edge;

typedef struct checker {
    const tx_history *h;
    FILE *out;
    tx_report *r;
    size_t nkeys;
    keyinfo *keys;
    writer *w;
    size_t wcap; /* a power of two */
    size_t *mop_txn;
    /* the graph: nodes 0..h->n-1 transactions, then barriers */
    size_t nodes;
    size_t *barrier_of; /* ok transaction -> its completion's barrier */
    size_t ne, ecap;
    struct {
        size_t from;
        edge e;
    } *el;
    size_t *off; /* CSR */
    edge *adj;
    /* BFS scratch */
    size_t *parent_edge, *parent, *queue, *stamp, cur_stamp;
    size_t *comp, *sub;
} checker;

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

static uint32_t key_index(const checker *c, uint32_t id)
{
    size_t lo = 0, hi = c->nkeys;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (c->keys[mid].id < id) lo = mid + 1;
        else hi = mid;
    }
    return (uint32_t)lo;
}

static size_t hash_kv(uint32_t k, int64_t v)
{
    uint64_t x = (uint64_t)v * 0x9E3779B97F4A7C15ull ^ ((uint64_t)k << 32 | k);
    x ^= x >> 29;
    x *= 0xBF58476D1CE4E5B9ull;
    return (size_t)(x ^ x >> 32);
}

/* The slot of (dense key k, v): its entry, or the empty slot to take. */
static writer *writer_slot(checker *c, uint32_t k, int64_t v)
{
    size_t i = hash_kv(k, v) & (c->wcap - 1);
    while (c->w[i].key && !(c->w[i].key == k + 1 && c->w[i].value == v)) i = (i + 1) & (c->wcap - 1);
    return &c->w[i];
}

static writer *writer_of(checker *c, uint32_t k, int64_t v)
{
    writer *w = writer_slot(c, k, v);
    return w->key ? w : NULL;
}

static const char *oc_name(fh_outcome o) { return outcome_name[o]; }

/* One transaction, briefly: who, when, and its micro-operations (long
 * lists shortened to their length and last elements). */
static void show_txn(const checker *c, size_t t)
{
    if (!c->out) return;
    const tx_history *h = c->h;
    const tx_op *o = &h->ops[t];
    fprintf(c->out, "    T%zu client %d node %d %s, %.3f", t, o->client, o->node, oc_name(o->outcome), o->invoke / 1e9);
    if (o->outcome != FH_UNKNOWN) fprintf(c->out, "-%.3f s:", o->complete / 1e9);
    else fprintf(c->out, " s-?:");
    for (size_t j = 0; j < o->nmops; j++) {
        const tx_mop *m = &h->mops[o->mop0 + j];
        if (m->kind == TX_APPEND) {
            fprintf(c->out, " [append %" PRIu32 " %" PRId64 "]", m->key, m->value);
            continue;
        }
        fprintf(c->out, " [read %" PRIu32 " ", m->key);
        if (!m->known) fputc('?', c->out);
        else {
            size_t from = m->n > 6 ? m->n - 4 : 0;
            fputc('[', c->out);
            if (from) fprintf(c->out, "(%zu) ... ", m->n);
            for (size_t e = from; e < m->n; e++) fprintf(c->out, "%s%" PRId64, e > from ? " " : "", h->elems[m->list0 + e]);
            fputc(']', c->out);
        }
        fputc(']', c->out);
    }
    fputc('\n', c->out);
}

/* Counts one anomaly; the first of its kind is described (the caller then
 * shows its witnesses when this returns true). */
static bool found(checker *c, tx_anomaly a, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static bool found(checker *c, tx_anomaly a, const char *fmt, ...)
{
    bool first = c->r->found[a]++ == 0;
    c->r->anomalies++;
    if (!first || !c->out) return false;
    va_list ap;
    va_start(ap, fmt);
    fprintf(c->out, "  %s: ", anomaly_names[a]);
    vfprintf(c->out, fmt, ap);
    fputc('\n', c->out);
    va_end(ap);
    return true;
}

/* A read's list (NULL when empty: the history may have no elements at all). */
static const int64_t *list_of(const checker *c, const tx_mop *m) { return m->n ? c->h->elems + m->list0 : NULL; }

/* The first n elements of a and b are equal. */
static bool same_start(const int64_t *a, const int64_t *b, size_t n) { return !n || !memcmp(a, b, n * sizeof *a); }

/* Keys, writers and the last append of each transaction to each key. */
static bool index_appends(checker *c)
{
    const tx_history *h = c->h;
    uint32_t *ids = xrealloc(NULL, (h->nmops + 1) * sizeof *ids);
    size_t n = 0, appends = 0;
    for (size_t i = 0; i < h->nmops; i++) {
        ids[n++] = h->mops[i].key;
        appends += h->mops[i].kind == TX_APPEND;
    }
    qsort(ids, n, sizeof *ids, cmp_u32);
    c->keys = xrealloc(NULL, (n + 1) * sizeof *c->keys);
    for (size_t i = 0; i < n; i++)
        if (!i || ids[i] != ids[i - 1])
            c->keys[c->nkeys++] = (keyinfo){.id = ids[i], .longest = NONE, .last_read_mop = NONE,
                                            .last_read_invoke = INT64_MIN};
    free(ids);
    c->r->keys = c->nkeys;
    c->wcap = 64;
    while (c->wcap < appends * 2) c->wcap *= 2;
    c->w = xrealloc(NULL, c->wcap * sizeof *c->w);
    memset(c->w, 0, c->wcap * sizeof *c->w);
    c->mop_txn = xrealloc(NULL, (h->nmops + 1) * sizeof *c->mop_txn);
    bool ok = true;
    for (size_t t = 0; t < h->n; t++) {
        const tx_op *o = &h->ops[t];
        for (size_t j = 0; j < o->nmops; j++) {
            size_t mi = o->mop0 + j;
            const tx_mop *m = &h->mops[mi];
            c->mop_txn[mi] = t;
            if (m->kind != TX_APPEND) continue;
            uint32_t k = key_index(c, m->key);
            writer *w = writer_slot(c, k, m->value);
            if (w->key) {
                /* the driver broke its own rule: no verdict is possible */
                if (c->out)
                    fprintf(c->out, "  malformed history: value %" PRId64 " appended to key %" PRIu32 " by T%zu and T%zu\n",
                            m->value, m->key, w->txn, t);
                ok = false;
                continue;
            }
            bool final = true;
            for (size_t l = j + 1; l < o->nmops && final; l++)
                if (h->mops[o->mop0 + l].kind == TX_APPEND && h->mops[o->mop0 + l].key == m->key) final = false;
            *w = (writer){.value = m->value, .key = k + 1, .final = final, .txn = t, .pos = NONE, .seen = NONE};
        }
    }
    return ok;
}

/* A transaction sees its own writes: each read of a key it appended to ends
 * with those appends, on top of what it read before them. */
static void check_internal(checker *c, size_t t)
{
    const tx_history *h = c->h;
    const tx_op *o = &h->ops[t];
    for (size_t j = 0; j < o->nmops; j++) {
        const tx_mop *m = &h->mops[o->mop0 + j];
        if (m->kind != TX_READ || !m->known) continue;
        /* what this read must end with: the txn's appends to the key since
         * its previous read of it (or since its start) */
        size_t prev = NONE;
        for (size_t l = j; l-- > 0;) {
            const tx_mop *p = &h->mops[o->mop0 + l];
            if (p->kind == TX_READ && p->key == m->key && p->known) {
                prev = l;
                break;
            }
        }
        size_t need = 0;
        for (size_t l = prev == NONE ? 0 : prev + 1; l < j; l++)
            need += h->mops[o->mop0 + l].kind == TX_APPEND && h->mops[o->mop0 + l].key == m->key;
        bool bad = m->n < need;
        if (!bad && prev != NONE) {
            const tx_mop *p = &h->mops[o->mop0 + prev];
            bad = m->n != p->n + need || !same_start(list_of(c, m), list_of(c, p), p->n);
        }
        size_t e = m->n - need;
        for (size_t l = prev == NONE ? 0 : prev + 1; !bad && l < j; l++) {
            const tx_mop *a = &h->mops[o->mop0 + l];
            if (a->kind == TX_APPEND && a->key == m->key && list_of(c, m)[e++] != a->value) bad = true;
        }
        if (bad) {
            if (found(c, TXA_INTERNAL, "T%zu's read of key %" PRIu32 " does not show its own earlier operations", t,
                      m->key))
                show_txn(c, t);
        }
    }
}

/* Per key: the longest ok read (the version order) and every read a prefix
 * of it; garbage, duplicates, aborted and intermediate reads. */
static void check_reads(checker *c)
{
    const tx_history *h = c->h;
    for (size_t mi = 0; mi < h->nmops; mi++) {
        const tx_mop *m = &h->mops[mi];
        size_t t = c->mop_txn[mi];
        if (m->kind != TX_READ || !m->known || h->ops[t].outcome != FH_OK) continue;
        keyinfo *k = &c->keys[key_index(c, m->key)];
        if (k->longest == NONE || m->n > h->mops[k->longest].n) k->longest = mi;
        if (h->ops[t].invoke > k->last_read_invoke) {
            k->last_read_invoke = h->ops[t].invoke;
            k->last_read_mop = mi;
        }
    }
    for (size_t mi = 0; mi < h->nmops; mi++) {
        const tx_mop *m = &h->mops[mi];
        size_t t = c->mop_txn[mi];
        if (m->kind != TX_READ || !m->known || h->ops[t].outcome != FH_OK) continue;
        uint32_t ki = key_index(c, m->key);
        keyinfo *k = &c->keys[ki];
        const tx_mop *lm = &h->mops[k->longest];
        if (!same_start(list_of(c, m), list_of(c, lm), m->n)) {
            k->broken = true;
            if (found(c, TXA_INCOMPATIBLE, "key %" PRIu32 ": T%zu read a list that is not a prefix of T%zu's", m->key, t,
                      c->mop_txn[k->longest])) {
                show_txn(c, t);
                show_txn(c, c->mop_txn[k->longest]);
            }
        }
        for (size_t e = 0; e < m->n; e++) {
            int64_t v = list_of(c, m)[e];
            writer *w = writer_of(c, ki, v);
            if (!w) {
                if (found(c, TXA_GARBAGE, "T%zu read %" PRId64 " in key %" PRIu32 ", which nobody appended", t, v, m->key))
                    show_txn(c, t);
                continue;
            }
            if (w->seen == mi) {
                if (found(c, TXA_DUPLICATE, "T%zu read %" PRId64 " twice in key %" PRIu32, t, v, m->key)) show_txn(c, t);
                continue;
            }
            w->seen = mi;
            if (h->ops[w->txn].outcome == FH_FAIL &&
                found(c, TXA_G1A, "T%zu read %" PRId64 " in key %" PRIu32 ", appended by T%zu, which failed", t, v,
                      m->key, w->txn)) {
                show_txn(c, w->txn);
                show_txn(c, t);
            }
            if (e + 1 == m->n && !w->final && w->txn != t &&
                found(c, TXA_G1B, "T%zu read key %" PRIu32 " ending in %" PRId64 ", which T%zu appended to further", t,
                      m->key, v, w->txn)) {
                show_txn(c, w->txn);
                show_txn(c, t);
            }
        }
    }
    for (size_t ki = 0; ki < c->nkeys; ki++) {
        const keyinfo *k = &c->keys[ki];
        if (k->longest == NONE || k->broken) continue;
        const tx_mop *lm = &h->mops[k->longest];
        for (size_t e = 0; e < lm->n; e++) {
            writer *w = writer_of(c, (uint32_t)ki, list_of(c, lm)[e]);
            if (w && w->pos == NONE) w->pos = e;
        }
    }
}

/* An acknowledged append never read, though a read of its key began after
 * it completed. */
static void check_lost(checker *c)
{
    const tx_history *h = c->h;
    for (size_t i = 0; i < c->wcap; i++) {
        const writer *w = &c->w[i];
        if (!w->key || w->pos != NONE || h->ops[w->txn].outcome != FH_OK) continue;
        const keyinfo *k = &c->keys[w->key - 1];
        if (k->broken || k->last_read_mop == NONE || k->last_read_invoke <= h->ops[w->txn].complete) continue;
        size_t reader = c->mop_txn[k->last_read_mop];
        if (found(c, TXA_LOST, "T%zu's acknowledged append of %" PRId64 " to key %" PRIu32
                  " is in no read, not even T%zu's, invoked %.3f s after it completed", w->txn, w->value, k->id, reader,
                  (k->last_read_invoke - h->ops[w->txn].complete) / 1e9)) {
            show_txn(c, w->txn);
            show_txn(c, reader);
        }
    }
}

static void add_edge(checker *c, size_t from, size_t to, uint8_t type, uint32_t key)
{
    if (from == to) return;
    GROW(c->el, c->ne, c->ecap);
    c->el[c->ne].from = from;
    c->el[c->ne].e = (edge){.to = to, .key = key, .type = type};
    c->ne++;
    if (type != E_RT) c->r->edges++;
}

static bool in_graph(const checker *c, size_t t) { return c->h->ops[t].outcome != FH_FAIL; }

/* The element after position pos of key ki's version order, and its writer. */
static const writer *next_writer(checker *c, uint32_t ki, size_t pos)
{
    const keyinfo *k = &c->keys[ki];
    const tx_mop *lm = &c->h->mops[k->longest];
    if (pos >= lm->n) return NULL;
    return writer_of(c, ki, list_of(c, lm)[pos]);
}

static int cmp_time(const void *a, const void *b)
{
    const int64_t *x = a, *y = b;
    return x[0] < y[0] ? -1 : x[0] > y[0] ? 1 : (x[1] > y[1]) - (x[1] < y[1]);
}

static void build_graph(checker *c)
{
    const tx_history *h = c->h;
    for (size_t ki = 0; ki < c->nkeys; ki++) {
        const keyinfo *k = &c->keys[ki];
        if (k->longest == NONE || k->broken) continue;
        const tx_mop *lm = &h->mops[k->longest];
        for (size_t e = 0; e + 1 < lm->n; e++) {
            const writer *a = writer_of(c, (uint32_t)ki, list_of(c, lm)[e]), *b = next_writer(c, (uint32_t)ki, e + 1);
            if (a && b && in_graph(c, a->txn) && in_graph(c, b->txn)) add_edge(c, a->txn, b->txn, E_WW, (uint32_t)ki);
        }
    }
    for (size_t t = 0; t < h->n; t++) {
        const tx_op *o = &h->ops[t];
        if (o->outcome != FH_OK) continue;
        for (size_t j = 0; j < o->nmops; j++) {
            const tx_mop *m = &h->mops[o->mop0 + j];
            if (m->kind != TX_READ || !m->known) continue;
            uint32_t ki = key_index(c, m->key);
            if (c->keys[ki].broken) continue;
            if (m->n) {
                const writer *w = writer_of(c, ki, list_of(c, m)[m->n - 1]);
                if (w && in_graph(c, w->txn)) add_edge(c, w->txn, t, E_WR, ki);
            }
            /* rw only from external reads: before the txn's own appends */
            bool external = true;
            for (size_t l = 0; l < j && external; l++)
                if (h->mops[o->mop0 + l].kind == TX_APPEND && h->mops[o->mop0 + l].key == m->key) external = false;
            const writer *nx = external ? next_writer(c, ki, m->n) : NULL;
            if (nx && in_graph(c, nx->txn)) add_edge(c, t, nx->txn, E_RW, ki);
        }
    }
    /* real time, through barriers: one per ok completion, in time order */
    int64_t (*ev)[2] = xrealloc(NULL, (h->n + 1) * sizeof *ev);
    size_t nb = 0;
    for (size_t t = 0; t < h->n; t++)
        if (h->ops[t].outcome == FH_OK) {
            ev[nb][0] = h->ops[t].complete;
            ev[nb][1] = (int64_t)t;
            nb++;
        }
    qsort(ev, nb, sizeof *ev, cmp_time);
    c->nodes = h->n + nb;
    for (size_t b = 0; b < nb; b++) {
        add_edge(c, (size_t)ev[b][1], h->n + b, E_RT, 0);
        if (b + 1 < nb) add_edge(c, h->n + b, h->n + b + 1, E_RT, 0);
    }
    for (size_t t = 0; t < h->n; t++) {
        if (!in_graph(c, t)) continue;
        /* the last completion strictly before t's invoke */
        size_t lo = 0, hi = nb;
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            if (ev[mid][0] < h->ops[t].invoke) lo = mid + 1;
            else hi = mid;
        }
        if (lo) add_edge(c, h->n + lo - 1, t, E_RT, 0);
    }
    free(ev);
    /* CSR */
    c->off = xrealloc(NULL, (c->nodes + 1) * sizeof *c->off);
    memset(c->off, 0, (c->nodes + 1) * sizeof *c->off);
    for (size_t i = 0; i < c->ne; i++) c->off[c->el[i].from + 1]++;
    for (size_t i = 0; i < c->nodes; i++) c->off[i + 1] += c->off[i];
    c->adj = xrealloc(NULL, (c->ne + 1) * sizeof *c->adj);
    size_t *fill = xrealloc(NULL, (c->nodes + 1) * sizeof *fill);
    memcpy(fill, c->off, c->nodes * sizeof *fill);
    for (size_t i = 0; i < c->ne; i++) c->adj[fill[c->el[i].from]++] = c->el[i].e;
    free(fill);
    size_t n = c->nodes + 1;
    c->parent_edge = xrealloc(NULL, n * sizeof(size_t));
    c->parent = xrealloc(NULL, n * sizeof(size_t));
    c->queue = xrealloc(NULL, n * sizeof(size_t));
    c->stamp = xrealloc(NULL, n * sizeof(size_t));
    memset(c->stamp, 0, n * sizeof(size_t));
    c->comp = xrealloc(NULL, n * sizeof(size_t));
    c->sub = xrealloc(NULL, n * sizeof(size_t));
}

/* Tarjan's strongly connected components over the edges in mask, among the
 * nodes whose within[] equals want (within NULL: all nodes), iteratively.
 * Writes a component number to out[node] (NONE for the nodes left out). */
static void scc(checker *c, unsigned mask, const size_t *within, size_t want, size_t *out)
{
    size_t n = c->nodes;
    size_t *index = xrealloc(NULL, n * sizeof *index), *low = xrealloc(NULL, n * sizeof *low);
    size_t *stack = xrealloc(NULL, n * sizeof *stack), *call = xrealloc(NULL, n * sizeof *call);
    size_t *it = xrealloc(NULL, n * sizeof *it);
    bool *on = xrealloc(NULL, n * sizeof *on);
    for (size_t i = 0; i < n; i++) {
        index[i] = NONE;
        out[i] = NONE;
        on[i] = false;
    }
    size_t next = 0, sp = 0, ncomp = 0;
    for (size_t root = 0; root < n; root++) {
        if (index[root] != NONE || (within && within[root] != want)) continue;
        size_t cp = 0;
        call[cp++] = root;
        index[root] = low[root] = next++;
        it[root] = c->off[root];
        stack[sp++] = root;
        on[root] = true;
        while (cp) {
            size_t v = call[cp - 1];
            if (it[v] < c->off[v + 1]) {
                const edge *e = &c->adj[it[v]++];
                size_t u = e->to;
                if (!(e->type & mask) || (within && within[u] != want)) continue;
                if (index[u] == NONE) {
                    index[u] = low[u] = next++;
                    it[u] = c->off[u];
                    stack[sp++] = u;
                    on[u] = true;
                    call[cp++] = u;
                } else if (on[u] && index[u] < low[v]) {
                    low[v] = index[u];
                }
                continue;
            }
            cp--;
            if (cp && low[v] < low[call[cp - 1]]) low[call[cp - 1]] = low[v];
            if (low[v] == index[v]) {
                size_t u;
                do {
                    u = stack[--sp];
                    on[u] = false;
                    out[u] = ncomp;
                } while (u != v);
                ncomp++;
            }
        }
    }
    free(index);
    free(low);
    free(stack);
    free(call);
    free(it);
    free(on);
}

/* Shortest path from `from` to `to` over edges in mask, inside component
 * want of within[] (from == to: a cycle through it).  The path's edges go to
 * path[] (as indexes into adj), last first; returns their number, 0 if none. */
static size_t bfs(checker *c, size_t from, size_t to, unsigned mask, const size_t *within, size_t want, size_t *path,
                  size_t max)
{
    size_t s = ++c->cur_stamp, qh = 0, qt = 0;
    c->queue[qt++] = from;
    if (from != to) c->stamp[from] = s;
    while (qh < qt) {
        size_t v = c->queue[qh++];
        for (size_t i = c->off[v]; i < c->off[v + 1]; i++) {
            const edge *e = &c->adj[i];
            size_t u = e->to;
            if (!(e->type & mask) || within[u] != want || c->stamp[u] == s) continue;
            c->stamp[u] = s;
            c->parent[u] = v;
            c->parent_edge[u] = i;
            if (u == to) {
                size_t n = 0;
                for (size_t x = to; n < max;) {
                    path[n++] = c->parent_edge[x];
                    x = c->parent[x];
                    if (x == from) break;
                }
                return n;
            }
            c->queue[qt++] = u;
        }
    }
    return 0;
}

static const char *edge_name(uint8_t t) { return t == E_WW ? "ww" : t == E_WR ? "wr" : t == E_RW ? "rw" : "rt"; }

/* A cycle (edges last first), transactions only: barrier hops print as rt. */
static void show_cycle(checker *c, const size_t *path, size_t n, size_t start)
{
    if (!c->out) return;
    const tx_history *h = c->h;
    size_t v = start;
    fprintf(c->out, "    cycle:");
    for (size_t i = n; i-- > 0;) {
        const edge *e = &c->adj[path[i]];
        if (e->to >= h->n) continue; /* into a barrier: shown at its exit */
        if (e->type == E_RT) fprintf(c->out, " T%zu -rt->", v);
        else fprintf(c->out, " T%zu -%s %" PRIu32 "->", v, edge_name(e->type), c->keys[e->key].id);
        v = e->to;
    }
    fprintf(c->out, " T%zu\n", v);
    show_txn(c, start);
    for (size_t i = n; i-- > 1;)
        if (c->adj[path[i]].to < h->n) show_txn(c, c->adj[path[i]].to);
}

static bool cycle_in(checker *c, unsigned mask, size_t comp, tx_anomaly a, const char *what)
{
    scc(c, mask, c->comp, comp, c->sub);
    /* the biggest sub-component's first transaction lies on a cycle */
    size_t n = c->nodes;
    size_t *size = xrealloc(NULL, (n + 1) * sizeof *size);
    memset(size, 0, (n + 1) * sizeof *size);
    for (size_t i = 0; i < n; i++)
        if (c->sub[i] != NONE) size[c->sub[i]]++;
    size_t best = NONE;
    for (size_t i = 0; i < c->h->n; i++)
        if (c->sub[i] != NONE && size[c->sub[i]] > 1) {
            best = i;
            break;
        }
    free(size);
    if (best == NONE) return false;
    size_t *path = xrealloc(NULL, (n + 1) * sizeof *path);
    size_t len = bfs(c, best, best, mask, c->sub, c->sub[best], path, n);
    if (len && found(c, a, "%s", what)) show_cycle(c, path, len, best);
    free(path);
    return len > 0;
}

/* A cycle with exactly one rw edge: an rw edge a -> b and a path b -> a
 * over mask (which has no rw).  Tarjan numbers a component only after every
 * component it reaches, so b can reach a (in another component of mask)
 * only when b's number is the larger: the other rw edges - nearly all, in a
 * valid stretch of history - need no search. */
#define RW_TRIES 500
static bool single_rw_cycle(checker *c, unsigned mask, size_t comp, tx_anomaly a, const char *what)
{
    size_t n = c->nodes, tries = 0;
    size_t *path = xrealloc(NULL, (n + 2) * sizeof *path);
    bool hit = false;
    scc(c, mask, c->comp, comp, c->sub);
    for (size_t v = 0; v < c->h->n && !hit && tries < RW_TRIES; v++) {
        if (c->comp[v] != comp) continue;
        for (size_t i = c->off[v]; i < c->off[v + 1] && !hit && tries < RW_TRIES; i++) {
            if (c->adj[i].type != E_RW || c->comp[c->adj[i].to] != comp) continue;
            if (c->sub[c->adj[i].to] <= c->sub[v]) continue;
            tries++;
            size_t len = bfs(c, c->adj[i].to, v, mask, c->comp, comp, path, n);
            if (!len) continue;
            hit = true;
            path[len++] = i; /* the rw edge first (path runs last first) */
            if (found(c, a, "%s", what)) show_cycle(c, path, len, v);
        }
    }
    free(path);
    return hit;
}

/* Each component costs O(nodes) a kind: a broken history stops at this many. */
#define MAX_CLASSIFIED 100
static void check_cycles(checker *c)
{
    scc(c, E_WW | E_WR | E_RW | E_RT, NULL, 0, c->comp);
    size_t n = c->nodes;
    size_t *size = xrealloc(NULL, (n + 1) * sizeof *size), *done = xrealloc(NULL, (n + 1) * sizeof *done);
    memset(size, 0, (n + 1) * sizeof *size);
    memset(done, 0, (n + 1) * sizeof *done);
    for (size_t i = 0; i < n; i++) size[c->comp[i]]++;
    size_t classified = 0;
    for (size_t t = 0; t < c->h->n; t++) {
        size_t k = c->comp[t];
        if (size[k] < 2 || done[k]) continue;
        done[k] = 1;
        if (classified++ == MAX_CLASSIFIED) {
            /* a history this broken says enough; count the rest */
            for (size_t u = t; u < c->h->n; u++)
                if (size[c->comp[u]] > 1 && !done[c->comp[u]]++) c->r->unclassified++, c->r->anomalies++;
            if (c->out) fprintf(c->out, "  %zu further cycles not classified\n", c->r->unclassified);
            break;
        }
        /* the most telling kind each component shows */
        if (cycle_in(c, E_WW, k, TXA_G0, "a cycle of write-write dependencies")) continue;
        if (cycle_in(c, E_WW | E_WR, k, TXA_G1C, "a cycle of write and read dependencies")) continue;
        if (single_rw_cycle(c, E_WW | E_WR, k, TXA_G_SINGLE, "a cycle with one anti-dependency (read skew)")) continue;
        if (cycle_in(c, E_WW | E_WR | E_RW, k, TXA_G2, "a cycle with anti-dependencies")) continue;
        if (cycle_in(c, E_WW | E_RT, k, TXA_G0_RT, "write-write dependencies against real time")) continue;
        if (cycle_in(c, E_WW | E_WR | E_RT, k, TXA_G1C_RT, "write and read dependencies against real time")) continue;
        if (single_rw_cycle(c, E_WW | E_WR | E_RT, k, TXA_G_SINGLE_RT,
                            "one anti-dependency against real time (a stale read)"))
            continue;
        cycle_in(c, E_WW | E_WR | E_RW | E_RT, k, TXA_G2_RT, "anti-dependencies against real time");
    }
    free(size);
    free(done);
}

bool tx_check(const tx_history *h, FILE *out, tx_report *r)
{
    memset(r, 0, sizeof *r);
    checker c = {.h = h, .out = out, .r = r};
    for (size_t t = 0; t < h->n; t++) {
        if (h->ops[t].outcome == FH_OK) r->ok++;
        else if (h->ops[t].outcome == FH_FAIL) r->failed++;
        else r->unknown++;
    }
    bool wellformed = index_appends(&c);
    for (size_t t = 0; t < h->n; t++)
        if (h->ops[t].outcome == FH_OK) check_internal(&c, t);
    check_reads(&c);
    check_lost(&c);
    build_graph(&c);
    check_cycles(&c);
    free(c.keys);
    free(c.w);
    free(c.mop_txn);
    free(c.el);
    free(c.off);
    free(c.adj);
    free(c.parent_edge);
    free(c.parent);
    free(c.queue);
    free(c.stamp);
    free(c.comp);
    free(c.sub);
    return wellformed && r->anomalies == 0;
}
