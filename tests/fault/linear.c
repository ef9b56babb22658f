/*
 * Linearizability of single-key registers: Wing & Gong's search with Lowe's
 * memoization, the algorithm of Knossos and Porcupine.
 *
 * Per key (linearizability is compositional, so keys are checked apart):
 *  - failed operations and unknown reads are dropped (they constrain
 *    nothing); an unknown write that no read returned is dropped too: with
 *    unique values, a linearization that places it can drop it and still
 *    explain every read. Every other unknown write happened: it may take
 *    effect at any moment after its invoke, and before the first read that
 *    returned its value completed - that completion serves as its return.
 *  - the key's history is cut where no operation is in flight; each segment
 *    is searched from every value the previous segment can end with (so a
 *    long history costs the sum of its segments, and a violation is placed
 *    in the segment where it happened).
 *  - within a segment, the call and return events, sorted by time (a call
 *    before a return at the same instant, so touching operations count as
 *    concurrent), form a doubly linked list. The search walks it: at a call
 *    it tries to apply that operation to the register (a read must see the
 *    current value); on success it lifts the operation's call and return out
 *    of the list and starts again from the head; at a return whose operation
 *    is still in the list nothing more can precede it, so it backtracks.
 *    When the list is empty every operation is linearized: the value is a
 *    possible ending, and the search backtracks for the others.
 *  - Lowe's cache: a (set of linearized operations, register value) pair
 *    reached once is never explored again. Operations are numbered in invoke
 *    order, so a reached set is a full prefix plus a few operations beyond
 *    it; the cache stores the set from its first unlinearized word on.
 */
#include "history.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

typedef struct event {
    struct event *prev, *next, *match; /* match: a call's return, NULL for a return */
    size_t op;                         /* index into the key's ops */
    int64_t time;
    bool call;
} event;

typedef struct centry {
    uint64_t hash;
    int64_t state;
    size_t off; /* into the word arena */
    uint32_t lo, n;
} centry;

typedef struct cache {
    centry *slots;
    size_t cap, used;
    uint64_t *arena;
    size_t arena_len, arena_cap;
} cache;

typedef struct bitset {
    uint64_t *w;
    size_t words;
    size_t lo; /* every word below lo is all ones */
    size_t hi; /* every word from hi on is zero */
} bitset;

static uint64_t mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

static void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size);
    if (!p) {
        perror("linear");
        abort();
    }
    return p;
}

static void bit_set(bitset *b, size_t i)
{
    b->w[i / 64] |= 1ULL << (i % 64);
    if (i / 64 >= b->hi) b->hi = i / 64 + 1;
    while (b->lo < b->words && b->w[b->lo] == ~0ULL) b->lo++;
}

static void bit_clear(bitset *b, size_t i)
{
    b->w[i / 64] &= ~(1ULL << (i % 64));
    if (i / 64 < b->lo) b->lo = i / 64;
    while (b->hi > 0 && b->w[b->hi - 1] == 0) b->hi--;
}

static bool cache_same(const cache *c, const centry *e, uint64_t hash, int64_t state, const bitset *b)
{
    size_t n = b->hi > b->lo ? b->hi - b->lo : 0;
    return e->hash == hash && e->state == state && e->lo == b->lo && e->n == n &&
           !memcmp(c->arena + e->off, b->w + b->lo, n * sizeof *b->w);
}

static void cache_grow(cache *c)
{
    size_t cap = c->cap ? c->cap * 2 : 64;
    centry *slots = xcalloc(cap, sizeof *slots);
    for (size_t i = 0; i < c->cap; i++) {
        if (!c->slots[i].hash) continue;
        size_t k = c->slots[i].hash & (cap - 1);
        while (slots[k].hash) k = (k + 1) & (cap - 1);
        slots[k] = c->slots[i];
    }
    free(c->slots);
    c->slots = slots;
    c->cap = cap;
}

/* Adds (b, state); false when it was there already. */
static bool cache_add(cache *c, uint64_t zobrist, int64_t state, const bitset *b)
{
    if (2 * (c->used + 1) > c->cap) cache_grow(c);
    uint64_t hash = (zobrist ^ mix64((uint64_t)state)) | 1; /* 0 marks a free slot */
    size_t k = hash & (c->cap - 1);
    for (; c->slots[k].hash; k = (k + 1) & (c->cap - 1))
        if (cache_same(c, &c->slots[k], hash, state, b)) return false;
    size_t n = b->hi > b->lo ? b->hi - b->lo : 0;
    if (c->arena_len + n > c->arena_cap) {
        c->arena_cap = (c->arena_cap + n) * 2;
        c->arena = realloc(c->arena, c->arena_cap * sizeof *c->arena);
        if (!c->arena) abort();
    }
    memcpy(c->arena + c->arena_len, b->w + b->lo, n * sizeof *b->w);
    c->slots[k] = (centry){.hash = hash, .state = state, .off = c->arena_len, .lo = (uint32_t)b->lo, .n = (uint32_t)n};
    c->arena_len += n;
    c->used++;
    return true;
}

static int by_time(const void *a, const void *b)
{
    const event *x = a, *y = b;
    if (x->time != y->time) return (x->time > y->time) - (x->time < y->time);
    if (x->call != y->call) return x->call ? -1 : 1;
    return (x->op > y->op) - (x->op < y->op);
}

static void lift(event *e)
{
    e->prev->next = e->next;
    if (e->next) e->next->prev = e->prev;
    event *m = e->match;
    m->prev->next = m->next;
    if (m->next) m->next->prev = m->prev;
}

static void unlift(event *e)
{
    event *m = e->match;
    m->prev->next = m;
    if (m->next) m->next->prev = m;
    e->prev->next = e;
    if (e->next) e->next->prev = e;
}

static const char *op_text(const fh_op *o, char *buf, size_t len)
{
    char v[24];
    if (o->value == FH_NIL) snprintf(v, sizeof v, "nil");
    else snprintf(v, sizeof v, "%" PRId64, o->value);
    char c[24];
    if (o->outcome == FH_UNKNOWN) snprintf(c, sizeof c, "?");
    else snprintf(c, sizeof c, "%.6f", (double)o->complete / 1e9);
    snprintf(buf, len, "client %d on node %d %s %s [%.6f, %s]%s", o->client, o->node,
             o->kind == FH_WRITE ? "SET" : "GET returned", v, (double)o->invoke / 1e9, c,
             o->outcome == FH_UNKNOWN ? " (outcome unknown)" : "");
    return buf;
}

/* An operation of the search: `ret` is when it must have taken effect by -
 * its completion, or for an unknown write the earliest completion of a read
 * that returned its value. */
typedef struct lop {
    const fh_op *o;
    int64_t ret;
} lop;

typedef struct search {
    lop *ops; /* one segment, in invoke order */
    size_t n;
    size_t budget, steps; /* steps: over every segment of the key */
    /* deepest point reached, for the report */
    size_t best_depth, best_op;
    int64_t best_state;
    int64_t *ends; /* register values the segment can end with */
    size_t n_ends;
} search;

static void add_end(search *s, int64_t state)
{
    for (size_t i = 0; i < s->n_ends; i++)
        if (s->ends[i] == state) return;
    s->ends[s->n_ends++] = state;
}

static event *build_events(const search *s)
{
    event *ev = xcalloc(2 * s->n + 1, sizeof *ev);
    for (size_t i = 0; i < s->n; i++) {
        ev[2 * i] = (event){.op = i, .time = s->ops[i].o->invoke, .call = true};
        ev[2 * i + 1] = (event){.op = i, .time = s->ops[i].ret, .call = false};
    }
    qsort(ev, 2 * s->n, sizeof *ev, by_time);
    event *head = &ev[2 * s->n];
    *head = (event){0};
    size_t *ret_of = xcalloc(s->n, sizeof *ret_of);
    for (size_t i = 0; i < 2 * s->n; i++)
        if (!ev[i].call) ret_of[ev[i].op] = i;
    event *prev = head;
    for (size_t i = 0; i < 2 * s->n; i++) {
        if (ev[i].call) ev[i].match = &ev[ret_of[ev[i].op]];
        ev[i].prev = prev;
        prev->next = &ev[i];
        prev = &ev[i];
    }
    free(ret_of);
    return ev;
}

/* Explores every linearization of the segment from each start value (the
 * cache prunes repeats) and collects the values it can end with.
 * 1: some linearization exists, 0: none, -1: budget exhausted. */
static int wing_gong(search *s, const int64_t *starts, size_t n_starts)
{
    event *ev = build_events(s), *head = &ev[2 * s->n];
    bitset b = {.w = xcalloc(s->n / 64 + 1, sizeof(uint64_t)), .words = s->n / 64 + 1};
    uint64_t *zob = xcalloc(s->n, sizeof *zob);
    for (size_t i = 0; i < s->n; i++) zob[i] = mix64(i * 0x2545f4914f6cdd1dULL + 7);
    struct frame {
        event *e;
        int64_t state;
        bool read; /* a read linearized where it was legal: the one placement tried */
    } *stack = xcalloc(s->n + 1, sizeof *stack);
    cache c = {0};
    int verdict = 0;
    for (size_t k = 0; k < n_starts && verdict >= 0; k++) {
        size_t depth = 0;
        int64_t state = starts[k];
        uint64_t zh = 0;
        event *e = head->next;
        for (;;) {
            if (++s->steps > s->budget) {
                verdict = -1;
                break;
            }
            if (head->next && e->call) {
                const fh_op *o = s->ops[e->op].o;
                bool read = o->kind == FH_READ;
                bool legal = !read || o->value == state;
                int64_t next = read ? state : o->value;
                bit_set(&b, e->op);
                if (legal && cache_add(&c, zh ^ zob[e->op], next, &b)) {
                    stack[depth++] = (struct frame){e, state, read};
                    state = next;
                    zh ^= zob[e->op];
                    lift(e);
                    e = head->next;
                    continue;
                }
                bit_clear(&b, e->op);
                if (!(legal && read)) {
                    e = e->next;
                    continue;
                }
                /* A read that may take effect here, from a point explored
                 * before: as below, nothing else is left to try here. */
            }
            if (!head->next) {
                add_end(s, state); /* all linearized: note it, look for other endings */
                verdict = 1;
            } else if (!e->call && depth >= s->best_depth) {
                s->best_depth = depth; /* a return nothing can precede: a dead end */
                s->best_op = e->op;
                s->best_state = state;
            }
            /* Back to the last choice.  A read linearized at the first point
             * where it was legal was no choice: a read changes nothing, so
             * any linearization that places it later - its predecessors all
             * placed already, the register holding its value here - gives
             * the same order of the rest with it moved here, and the same
             * ending.  Trying it later would only repeat this subtree (a
             * 52-operation segment of concurrent reads took more than 20
             * million steps that way), so the search backs out past it. */
            struct frame f = {0};
            do {
                if (!depth) break;
                f = stack[--depth];
                e = f.e;
                state = f.state;
                bit_clear(&b, e->op);
                zh ^= zob[e->op];
                unlift(e);
            } while (f.read);
            if (!f.e || f.read) break; /* nothing left to try from this start */
            e = e->next;
        }
    }
    free(stack);
    free(zob);
    free(b.w);
    free(c.slots);
    free(c.arena);
    free(ev);
    return verdict;
}

static void describe(const search *s, const char *key, size_t n_starts, FILE *out)
{
    char buf[200];
    const fh_op *o = s->ops[s->best_op].o;
    fprintf(out,
            "register %s: not linearizable in [%.6f, %.6f] s (%zu operations, %zu possible values before): at "
            "best %zu linearize; then %s cannot\n",
            key, (double)s->ops[0].o->invoke / 1e9, (double)s->ops[s->n - 1].ret / 1e9, s->n, n_starts, s->best_depth,
            op_text(o, buf, sizeof buf));
    if (s->best_state == FH_NIL) fprintf(out, "  the register was still absent there\n");
    for (size_t i = 0; s->best_state != FH_NIL && i < s->n; i++)
        if (s->ops[i].o->kind == FH_WRITE && s->ops[i].o->value == s->best_state)
            fprintf(out, "  the register held the value of %s\n", op_text(s->ops[i].o, buf, sizeof buf));
    /* What it overlapped, and the last write acknowledged before it began. */
    const fh_op *last = NULL;
    size_t shown = 0;
    for (size_t i = 0; i < s->n; i++) {
        const fh_op *w = s->ops[i].o;
        if (w->kind == FH_WRITE && s->ops[i].ret < o->invoke && (!last || s->ops[i].ret > last->complete)) last = w;
        if (i != s->best_op && w->invoke <= s->ops[s->best_op].ret && s->ops[i].ret >= o->invoke && shown++ < 12)
            fprintf(out, "  concurrent: %s\n", op_text(w, buf, sizeof buf));
        if (w->kind == FH_WRITE && o->kind == FH_READ && w->value == o->value)
            fprintf(out, "  the value read: %s\n", op_text(w, buf, sizeof buf));
    }
    if (last) fprintf(out, "  the last write acknowledged before it began: %s\n", op_text(last, buf, sizeof buf));
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static bool in_sorted(const int64_t *v, size_t n, int64_t x) { return bsearch(&x, v, n, sizeof *v, cmp_i64) != NULL; }

static int by_lop_invoke(const void *a, const void *b)
{
    const lop *x = a, *y = b;
    return (x->o->invoke > y->o->invoke) - (x->o->invoke < y->o->invoke);
}

/* (value, completion) of every ok read, sorted by value then completion. */
typedef struct seen {
    int64_t value, at;
} seen;

static int by_seen(const void *a, const void *b)
{
    const seen *x = a, *y = b;
    if (x->value != y->value) return (x->value > y->value) - (x->value < y->value);
    return (x->at > y->at) - (x->at < y->at);
}

/* The first completion of a read that returned v, or -1. */
static int64_t first_seen(const seen *r, size_t n, int64_t v)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (r[mid].value < v) lo = mid + 1;
        else hi = mid;
    }
    return lo < n && r[lo].value == v ? r[lo].at : -1;
}

/* The key's operations the search needs, each with its effective return;
 * 0 with a message when the history is malformed or reads a never-written
 * value (nothing else to search then). */
static int collect(const fh_history *h, const char *key, FILE *out, lop *ops, size_t *n_out)
{
    int64_t *written = xcalloc(h->n, sizeof *written);
    seen *reads = xcalloc(h->n, sizeof *reads);
    size_t nw = 0, nr = 0, n = 0;
    for (size_t i = 0; i < h->n; i++) {
        const fh_op *o = &h->ops[i];
        if (strcmp(o->key, key)) continue;
        if (o->kind == FH_WRITE && o->outcome != FH_FAIL) written[nw++] = o->value;
        if (o->kind == FH_READ && o->outcome == FH_OK && o->value != FH_NIL) reads[nr++] = (seen){o->value, o->complete};
    }
    qsort(written, nw, sizeof *written, cmp_i64);
    qsort(reads, nr, sizeof *reads, by_seen);
    int verdict = 1;
    for (size_t i = 1; i < nw && verdict; i++)
        if (written[i] == written[i - 1]) {
            if (out) fprintf(out, "register %s: two writes carry %" PRId64 ": values must be unique\n", key, written[i]);
            verdict = 0;
        }
    for (size_t i = 0; i < h->n && verdict; i++) {
        const fh_op *o = &h->ops[i];
        if (strcmp(o->key, key) || o->outcome == FH_FAIL || (o->kind == FH_READ && o->outcome == FH_UNKNOWN)) continue;
        int64_t ret = o->complete;
        if (o->kind == FH_WRITE && o->outcome == FH_UNKNOWN) {
            ret = first_seen(reads, nr, o->value);
            if (ret < 0) continue; /* nobody saw it: a linearization may leave it out */
            if (ret < o->invoke) ret = o->invoke; /* read before it began: the search rejects that */
        }
        if (o->kind == FH_READ && o->value != FH_NIL && !in_sorted(written, nw, o->value)) {
            char buf[200];
            if (out)
                fprintf(out, "register %s: %s, a value no write of this key carries\n", key, op_text(o, buf, sizeof buf));
            verdict = 0;
        }
        ops[n++] = (lop){o, ret};
    }
    free(written);
    free(reads);
    *n_out = n;
    return verdict;
}

/* Every value a write of the key invoked before t may have left: where the
 * search restarts after a violation, so that a later segment fails only for
 * a violation of its own. */
static size_t values_before(const lop *ops, size_t n, int64_t t, int64_t *out)
{
    size_t k = 0;
    out[k++] = FH_NIL;
    for (size_t i = 0; i < n && ops[i].o->invoke < t; i++)
        if (ops[i].o->kind == FH_WRITE) out[k++] = ops[i].o->value;
    return k;
}

#define DESCRIBED_PER_KEY 3

/* Checks one register key: the number of segments that cannot be
 * linearized (0: valid), or -1 when the search ran out of budget. The key's
 * history is cut where no operation is in flight; each segment is searched
 * from every value the previous one can end with. */
static long check_register(const fh_history *h, const char *key, size_t budget, FILE *out, size_t *checked)
{
    lop *ops = xcalloc(h->n + 1, sizeof *ops);
    size_t n = 0;
    long bad = collect(h, key, out, ops, &n) ? 0 : 1;
    *checked += n;
    qsort(ops, n, sizeof *ops, by_lop_invoke);
    int64_t *starts = xcalloc(n + 1, sizeof *starts), *ends = xcalloc(n + 1, sizeof *ends);
    size_t n_starts = 1, steps = 0;
    starts[0] = FH_NIL;
    for (size_t i = 0; i < n && bad >= 0;) {
        size_t j = i + 1;
        int64_t reach = ops[i].ret;
        while (j < n && ops[j].o->invoke <= reach) {
            if (ops[j].ret > reach) reach = ops[j].ret;
            j++;
        }
        search s = {.ops = ops + i, .n = j - i, .budget = budget, .steps = steps, .ends = ends};
        int v = wing_gong(&s, starts, n_starts);
        steps = s.steps;
        if (v < 0) {
            if (out) fprintf(out, "register %s: inconclusive: the search took more than %zu steps\n", key, budget);
            bad = -1;
            break;
        }
        if (v == 0) {
            if (out && bad < DESCRIBED_PER_KEY) describe(&s, key, n_starts, out);
            bad++;
            n_starts = values_before(ops, n, j < n ? ops[j].o->invoke : FH_INF, starts);
        } else {
            memcpy(starts, ends, s.n_ends * sizeof *ends);
            n_starts = s.n_ends;
        }
        i = j;
    }
    if (bad > 0 && out) {
        if (bad > DESCRIBED_PER_KEY) fprintf(out, "register %s: %ld segments cannot be linearized\n", key, bad);
        fh_explain_register(h, key, out);
    }
    free(starts);
    free(ends);
    free(ops);
    return bad;
}

void fh_check_registers(const fh_history *h, size_t budget, FILE *out, fh_report *r)
{
    const char **keys;
    size_t nk = fh_distinct_keys(h, &keys);
    for (size_t k = 0; k < nk; k++) {
        if (fh_is_counter(h, keys[k])) continue;
        r->keys++;
        long v = check_register(h, keys[k], budget ? budget : 20000000, out, &r->ops_checked);
        r->violations += v > 0;
        r->anomalies += v > 0 ? (size_t)v : 0;
        r->inconclusive += v < 0;
    }
    free(keys);
}
