/*
 * Linearizability of single-key registers: Wing & Gong's search with Lowe's
 * memoization, the algorithm of Knossos and Porcupine.
 *
 * Per key (linearizability is compositional, so keys are checked apart):
 *  - failed operations and unknown reads are dropped (they constrain
 *    nothing); an unknown write that no read returned is dropped too: with
 *    unique values, a linearization that places it can drop it and still
 *    explain every read. Every other unknown write gets a return event at
 *    +infinity: it may take effect at any moment after its invoke.
 *  - the call and return events, sorted by time (a call before a return at
 *    the same instant, so touching operations count as concurrent), form a
 *    doubly linked list. The search walks it: at a call it tries to apply
 *    that operation to the register (a read must see the current value);
 *    on success it lifts the operation's call and return out of the list and
 *    starts again from the head; at a return whose operation is still in the
 *    list nothing more can precede it, so it backtracks. The list empties
 *    exactly when every operation is linearized.
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
    size_t cap = c->cap ? c->cap * 2 : 4096;
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

static int by_invoke(const void *a, const void *b)
{
    const fh_op *x = *(fh_op *const *)a, *y = *(fh_op *const *)b;
    return (x->invoke > y->invoke) - (x->invoke < y->invoke);
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
    else snprintf(c, sizeof c, "%" PRId64, o->complete);
    snprintf(buf, len, "client %d %s %s [%" PRId64 ", %s]%s", o->client, o->kind == FH_WRITE ? "SET" : "GET returned", v,
             o->invoke, c, o->outcome == FH_UNKNOWN ? " (outcome unknown)" : "");
    return buf;
}

typedef struct search {
    fh_op **ops;
    size_t n;
    size_t budget, steps;
    /* deepest point reached, for the report */
    size_t best_depth, best_op;
    int64_t best_state;
} search;

/* 1: linearizable, 0: not, -1: budget exhausted. */
static int wing_gong(search *s)
{
    event *ev = xcalloc(2 * s->n + 1, sizeof *ev);
    for (size_t i = 0; i < s->n; i++) {
        ev[2 * i] = (event){.op = i, .time = s->ops[i]->invoke, .call = true};
        int64_t ret = s->ops[i]->outcome == FH_UNKNOWN ? FH_INF : s->ops[i]->complete;
        ev[2 * i + 1] = (event){.op = i, .time = ret, .call = false};
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
    bitset b = {.w = xcalloc(s->n / 64 + 1, sizeof(uint64_t)), .words = s->n / 64 + 1};
    uint64_t *zob = xcalloc(s->n, sizeof *zob);
    for (size_t i = 0; i < s->n; i++) zob[i] = mix64(i * 0x2545f4914f6cdd1dULL + 7);
    struct frame {
        event *e;
        int64_t state;
    } *stack = xcalloc(s->n + 1, sizeof *stack);
    size_t depth = 0;
    cache c = {0};
    int64_t state = FH_NIL;
    uint64_t zh = 0;
    event *e = head->next;
    int verdict = 1;
    while (head->next) {
        if (++s->steps > s->budget) {
            verdict = -1;
            break;
        }
        if (e->call) {
            const fh_op *o = s->ops[e->op];
            bool legal = o->kind == FH_WRITE || o->value == state;
            int64_t next = o->kind == FH_WRITE ? o->value : state;
            bit_set(&b, e->op);
            if (legal && cache_add(&c, zh ^ zob[e->op], next, &b)) {
                stack[depth++] = (struct frame){e, state};
                state = next;
                zh ^= zob[e->op];
                lift(e);
                e = head->next;
            } else {
                bit_clear(&b, e->op);
                e = e->next;
            }
        } else {
            if (depth >= s->best_depth) {
                s->best_depth = depth;
                s->best_op = e->op;
                s->best_state = state;
            }
            if (!depth) {
                verdict = 0;
                break;
            }
            struct frame f = stack[--depth];
            e = f.e;
            state = f.state;
            bit_clear(&b, e->op);
            zh ^= zob[e->op];
            unlift(e);
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

static void describe(const search *s, const char *key, FILE *out)
{
    char buf[160];
    const fh_op *o = s->ops[s->best_op];
    fprintf(out, "register %s: not linearizable: at best %zu of %zu operations linearize; then %s cannot\n", key,
            s->best_depth, s->n, op_text(o, buf, sizeof buf));
    if (s->best_state == FH_NIL) {
        fprintf(out, "  the register was still absent there\n");
    } else {
        for (size_t i = 0; i < s->n; i++)
            if (s->ops[i]->kind == FH_WRITE && s->ops[i]->value == s->best_state)
                fprintf(out, "  the register held the value of %s\n", op_text(s->ops[i], buf, sizeof buf));
    }
    /* What it overlapped, and the last write acknowledged before it began. */
    int64_t end = o->outcome == FH_UNKNOWN ? FH_INF : o->complete;
    const fh_op *last = NULL;
    size_t shown = 0;
    for (size_t i = 0; i < s->n; i++) {
        const fh_op *w = s->ops[i];
        int64_t wend = w->outcome == FH_UNKNOWN ? FH_INF : w->complete;
        if (w->kind == FH_WRITE && wend < o->invoke && (!last || wend > last->complete)) last = w;
        if (i != s->best_op && w->invoke <= end && wend >= o->invoke && shown++ < 12)
            fprintf(out, "  concurrent: %s\n", op_text(w, buf, sizeof buf));
        if (w->kind == FH_WRITE && o->kind == FH_READ && w->value == o->value)
            fprintf(out, "  the value read: %s\n", op_text(w, buf, sizeof buf));
    }
    if (last) fprintf(out, "  the last write acknowledged before it began: %s\n", op_text(last, buf, sizeof buf));
}

/* A read of a value that no write of this key carries. */
static bool never_written(const fh_op *r, const int64_t *written, size_t nw)
{
    if (r->value == FH_NIL) return false;
    size_t lo = 0, hi = nw;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (written[mid] < r->value) lo = mid + 1;
        else hi = mid;
    }
    return lo == nw || written[lo] != r->value;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Checks one register key: 1 valid, 0 violation, -1 inconclusive. */
static int check_register(const fh_history *h, const char *key, size_t budget, FILE *out, size_t *checked)
{
    fh_op **ops = xcalloc(h->n, sizeof *ops);
    int64_t *written = xcalloc(h->n, sizeof *written), *read = xcalloc(h->n, sizeof *read);
    size_t nw = 0, nr = 0, n = 0;
    for (size_t i = 0; i < h->n; i++) {
        const fh_op *o = &h->ops[i];
        if (strcmp(o->key, key)) continue;
        if (o->kind == FH_WRITE && o->outcome != FH_FAIL) written[nw++] = o->value;
        if (o->kind == FH_READ && o->outcome == FH_OK && o->value != FH_NIL) read[nr++] = o->value;
    }
    qsort(written, nw, sizeof *written, cmp_i64);
    qsort(read, nr, sizeof *read, cmp_i64);
    int verdict = 1;
    for (size_t i = 1; i < nw; i++)
        if (written[i] == written[i - 1] && verdict) {
            if (out) fprintf(out, "register %s: two writes carry %" PRId64 ": values must be unique\n", key, written[i]);
            verdict = 0;
        }
    for (size_t i = 0; i < h->n && verdict; i++) {
        fh_op *o = &h->ops[i];
        if (strcmp(o->key, key) || o->outcome == FH_FAIL) continue;
        if (o->kind == FH_READ && o->outcome == FH_UNKNOWN) continue;
        if (o->kind == FH_WRITE && o->outcome == FH_UNKNOWN && !bsearch(&o->value, read, nr, sizeof *read, cmp_i64))
            continue;
        if (o->kind == FH_READ && never_written(o, written, nw)) {
            char buf[160];
            if (out)
                fprintf(out, "register %s: %s, a value no write of this key carries\n", key,
                        op_text(o, buf, sizeof buf));
            verdict = 0;
        }
        ops[n++] = o;
    }
    *checked += n;
    if (verdict) {
        qsort(ops, n, sizeof *ops, by_invoke);
        search s = {.ops = ops, .n = n, .budget = budget};
        verdict = wing_gong(&s);
        if (verdict == 0 && out) {
            describe(&s, key, out);
            fh_explain_register(h, key, out);
        }
        if (verdict < 0 && out)
            fprintf(out, "register %s: inconclusive: %zu operations still unsettled after %zu search steps\n", key, n,
                    s.steps);
    }
    free(ops);
    free(written);
    free(read);
    return verdict;
}

static bool has_incr(const fh_history *h, const char *key)
{
    for (size_t i = 0; i < h->n; i++)
        if (h->ops[i].kind == FH_INCR && !strcmp(h->ops[i].key, key)) return true;
    return false;
}

void fh_check_registers(const fh_history *h, size_t budget, FILE *out, fh_report *r)
{
    const char **keys = xcalloc(h->n, sizeof *keys);
    size_t nk = 0;
    for (size_t i = 0; i < h->n; i++) {
        bool seen = false;
        for (size_t j = 0; j < nk && !seen; j++) seen = !strcmp(keys[j], h->ops[i].key);
        if (!seen) keys[nk++] = h->ops[i].key;
    }
    for (size_t k = 0; k < nk; k++) {
        if (has_incr(h, keys[k])) continue;
        r->keys++;
        int v = check_register(h, keys[k], budget ? budget : 20000000, out, &r->ops_checked);
        r->violations += v == 0;
        r->inconclusive += v < 0;
    }
    free(keys);
}
