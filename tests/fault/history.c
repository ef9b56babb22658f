/*
 * History storage (memory and the text file), the counter check and the
 * figures the fault driver prints. The register search is in linear.c.
 */
#include "history.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

void fh_init(fh_history *h) { memset(h, 0, sizeof *h); }

void fh_free(fh_history *h)
{
    free(h->ops);
    fh_init(h);
}

void fh_add(fh_history *h, const fh_op *op)
{
    if (h->n == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 1024;
        fh_op *ops = realloc(h->ops, cap * sizeof *ops);
        if (!ops) {
            perror("fh_add");
            abort();
        }
        h->ops = ops;
        h->cap = cap;
    }
    h->ops[h->n++] = *op;
}

void fh_append_all(fh_history *dst, const fh_history *src)
{
    for (size_t i = 0; i < src->n; i++) fh_add(dst, &src->ops[i]);
}

static const char kind_char[] = "wri";
static const char *const outcome_name[] = {"ok", "fail", "unknown"};

bool fh_save(const fh_history *h, const char *path, const char *comment)
{
    FILE *f = fopen(path, "w");
    if (!f) return false;
    fprintf(f, "# lattice fault history: CLIENT NODE KIND KEY VALUE INVOKE_NS COMPLETE_NS OUTCOME\n");
    if (comment) fprintf(f, "# %s\n", comment);
    for (size_t i = 0; i < h->n; i++) {
        const fh_op *o = &h->ops[i];
        char v[24], c[24];
        if (o->value == FH_NIL) snprintf(v, sizeof v, "nil");
        else snprintf(v, sizeof v, "%" PRId64, o->value);
        if (o->outcome == FH_UNKNOWN) snprintf(c, sizeof c, "-");
        else snprintf(c, sizeof c, "%" PRId64, o->complete);
        fprintf(f, "%d %d %c %s %s %" PRId64 " %s %s\n", o->client, o->node, kind_char[o->kind], o->key, v, o->invoke, c,
                outcome_name[o->outcome]);
    }
    bool ok = !ferror(f);
    return fclose(f) == 0 && ok;
}

static bool parse_i64(const char *s, int64_t *v)
{
    char *end;
    errno = 0;
    long long x = strtoll(s, &end, 10);
    if (errno || end == s || *end) return false;
    *v = x;
    return true;
}

static bool parse_line(char *line, fh_op *o)
{
    char kind[4], key[FH_KEY_MAX], val[32], inv[32], cmp[32], out[16];
    memset(o, 0, sizeof *o);
    if (sscanf(line, "%d %d %3s %47s %31s %31s %31s %15s", &o->client, &o->node, kind, key, val, inv, cmp, out) != 8)
        return false;
    const char *k = strchr(kind_char, kind[0]);
    if (!k || kind[1] || !kind[0]) return false;
    o->kind = (fh_kind)(k - kind_char);
    snprintf(o->key, sizeof o->key, "%s", key);
    if (!strcmp(val, "nil")) o->value = FH_NIL;
    else if (!parse_i64(val, &o->value)) return false;
    if (!parse_i64(inv, &o->invoke)) return false;
    int oc = -1;
    for (int i = 0; i < 3; i++)
        if (!strcmp(out, outcome_name[i])) oc = i;
    if (oc < 0) return false;
    o->outcome = (fh_outcome)oc;
    if (o->outcome == FH_UNKNOWN) o->complete = FH_INF;
    else if (!parse_i64(cmp, &o->complete) || o->complete < o->invoke) return false;
    return true;
}

bool fh_load(fh_history *h, const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "%s: %s\n", path, strerror(errno));
        return false;
    }
    char line[512];
    bool ok = true;
    for (size_t no = 1; ok && fgets(line, sizeof line, f); no++) {
        if (line[0] == '#' || line[0] == '\n') continue;
        fh_op o;
        if (!parse_line(line, &o)) {
            fprintf(stderr, "%s:%zu: malformed operation: %s", path, no, line);
            ok = false;
        } else {
            fh_add(h, &o);
        }
    }
    fclose(f);
    return ok;
}

/* ---- counters ---- */

static int by_complete(const void *a, const void *b)
{
    const fh_op *x = *(fh_op *const *)a, *y = *(fh_op *const *)b;
    return (x->complete > y->complete) - (x->complete < y->complete);
}

static int by_value(const void *a, const void *b)
{
    const fh_op *x = *(fh_op *const *)a, *y = *(fh_op *const *)b;
    return (x->value > y->value) - (x->value < y->value);
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* The largest value among acknowledged increments that completed before t
 * (sorted by completion, with prefix maxima). */
static int64_t acked_before(fh_op **acked, const int64_t *prefix_max, size_t n, int64_t t)
{
    size_t lo = 0, hi = n; /* first with complete >= t */
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (acked[mid]->complete < t) lo = mid + 1;
        else hi = mid;
    }
    return lo ? prefix_max[lo - 1] : 0;
}

static size_t count_below(const int64_t *sorted, size_t n, int64_t t)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (sorted[mid] < t) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* Checks one counter key; returns the number of problems found (each
 * described on out), counting at most one per kind. */
static size_t check_counter(const fh_history *h, const char *key, FILE *out, size_t *checked)
{
    size_t n = 0, na = 0;
    fh_op **acked = malloc((h->n + 1) * sizeof *acked);
    int64_t *invokes = malloc((h->n + 1) * sizeof *invokes);
    int64_t *prefix = malloc((h->n + 1) * sizeof *prefix);
    if (!acked || !invokes || !prefix) abort();
    for (size_t i = 0; i < h->n; i++) {
        const fh_op *o = &h->ops[i];
        if (strcmp(o->key, key) || o->kind != FH_INCR || o->outcome == FH_FAIL) continue;
        invokes[n++] = o->invoke;
        if (o->outcome == FH_OK) acked[na++] = (fh_op *)o;
    }
    qsort(invokes, n, sizeof *invokes, cmp_i64);
    size_t bad_range = 0, bad_dup = 0, bad_order = 0, bad_read = 0;
    qsort(acked, na, sizeof *acked, by_value);
    for (size_t i = 0; i < na; i++) {
        if ((acked[i]->value < 1 || acked[i]->value > (int64_t)n) && !bad_range++ && out)
            fprintf(out, "counter %s: client %d's INCR returned %" PRId64 " but only %zu increments were attempted\n",
                    key, acked[i]->client, acked[i]->value, n);
        if (i && acked[i]->value == acked[i - 1]->value && !bad_dup++ && out)
            fprintf(out,
                    "counter %s: clients %d and %d both got %" PRId64
                    " from INCR: an acknowledged increment was lost or applied twice\n",
                    key, acked[i - 1]->client, acked[i]->client, acked[i]->value);
    }
    qsort(acked, na, sizeof *acked, by_complete);
    for (size_t i = 0; i < na; i++) prefix[i] = i && prefix[i - 1] > acked[i]->value ? prefix[i - 1] : acked[i]->value;
    for (size_t i = 0; i < na; i++) {
        int64_t before = acked_before(acked, prefix, na, acked[i]->invoke);
        if (before >= acked[i]->value && !bad_order++ && out)
            fprintf(out,
                    "counter %s: client %d's INCR returned %" PRId64 " after an INCR had already returned %" PRId64
                    " (invoked at %" PRId64 ")\n",
                    key, acked[i]->client, acked[i]->value, before, acked[i]->invoke);
    }
    size_t reads = 0;
    for (size_t i = 0; i < h->n; i++) {
        const fh_op *o = &h->ops[i];
        if (strcmp(o->key, key) || o->kind != FH_READ || o->outcome != FH_OK) continue;
        reads++;
        int64_t v = o->value == FH_NIL ? 0 : o->value;
        int64_t low = acked_before(acked, prefix, na, o->invoke);
        int64_t high = (int64_t)count_below(invokes, n, o->complete);
        if ((v < low || v > high) && !bad_read++ && out)
            fprintf(out,
                    "counter %s: client %d read %" PRId64 " in [%" PRId64 ", %" PRId64 "] ns, but it must lie in [%" PRId64
                    ", %" PRId64 "] (%s)\n",
                    key, o->client, v, o->invoke, o->complete, low, high,
                    v < low ? "an acknowledged increment is missing" : "more increments than were attempted");
    }
    *checked += n + reads;
    free(acked);
    free(invokes);
    free(prefix);
    return (bad_range > 0) + (bad_dup > 0) + (bad_order > 0) + (bad_read > 0);
}

size_t fh_distinct_keys(const fh_history *h, const char ***keys)
{
    size_t n = 0;
    const char **k = malloc((h->n + 1) * sizeof *k);
    if (!k) abort();
    for (size_t i = 0; i < h->n; i++) {
        bool seen = false;
        for (size_t j = n; j-- > 0 && !seen;) seen = !strcmp(k[j], h->ops[i].key);
        if (!seen) k[n++] = h->ops[i].key;
    }
    *keys = k;
    return n;
}

bool fh_is_counter(const fh_history *h, const char *key)
{
    for (size_t i = 0; i < h->n; i++)
        if (h->ops[i].kind == FH_INCR && !strcmp(h->ops[i].key, key)) return true;
    return false;
}

void fh_check_counters(const fh_history *h, FILE *out, fh_report *r)
{
    const char **keys;
    size_t n = fh_distinct_keys(h, &keys);
    for (size_t i = 0; i < n; i++) {
        if (!fh_is_counter(h, keys[i])) continue;
        r->keys++;
        size_t bad = check_counter(h, keys[i], out, &r->ops_checked);
        r->violations += bad > 0;
        r->anomalies += bad;
    }
    free(keys);
}

bool fh_check(const fh_history *h, FILE *out, fh_report *r)
{
    memset(r, 0, sizeof *r);
    fh_check_registers(h, 0, out, r);
    fh_check_counters(h, out, r);
    return r->violations == 0 && r->inconclusive == 0;
}

int64_t fh_longest_gap(const fh_history *h, int64_t from, int64_t to)
{
    int64_t *t = malloc((h->n + 2) * sizeof *t);
    if (!t) abort();
    size_t n = 0;
    t[n++] = from;
    for (size_t i = 0; i < h->n; i++)
        if (h->ops[i].outcome == FH_OK && h->ops[i].complete > from && h->ops[i].complete < to)
            t[n++] = h->ops[i].complete;
    t[n++] = to;
    qsort(t, n, sizeof *t, cmp_i64);
    int64_t gap = 0;
    for (size_t i = 1; i < n; i++)
        if (t[i] - t[i - 1] > gap) gap = t[i] - t[i - 1];
    free(t);
    return gap;
}

size_t fh_count_ok(const fh_history *h, int64_t after)
{
    size_t n = 0;
    for (size_t i = 0; i < h->n; i++) n += h->ops[i].outcome == FH_OK && h->ops[i].invoke >= after;
    return n;
}
