/*
 * Witnesses for a register key the search rejected: the patterns that prove
 * a violation by themselves, counted, with the first instance of each. The
 * search's verdict stands alone; this only says what went wrong in terms a
 * reader of the code can chase:
 *  - stale read: a read returned the value of write A although a write B that
 *    began after A completed had itself completed before the read began;
 *  - lost write: a read returned absent although a write had completed
 *    before it began (the register is never deleted in these histories);
 *  - read inversion: read 1 completed before read 2 began, yet read 2
 *    returned an older value (its write completed before read 1's began);
 *  - future read: a read returned a value whose write began after it ended.
 */
#include "history.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

typedef struct vw {
    int64_t value;
    const fh_op *w;
} vw;

static int by_val(const void *a, const void *b)
{
    const vw *x = a, *y = b;
    return (x->value > y->value) - (x->value < y->value);
}

static int by_inv(const void *a, const void *b)
{
    const fh_op *x = *(fh_op *const *)a, *y = *(fh_op *const *)b;
    return (x->invoke > y->invoke) - (x->invoke < y->invoke);
}

static int by_cmp(const void *a, const void *b)
{
    const fh_op *x = *(fh_op *const *)a, *y = *(fh_op *const *)b;
    return (x->complete > y->complete) - (x->complete < y->complete);
}

static int64_t end_of(const fh_op *o) { return o->outcome == FH_UNKNOWN ? FH_INF : o->complete; }

static const fh_op *write_of(const vw *vals, size_t n, int64_t value)
{
    vw k = {value, NULL};
    const vw *f = bsearch(&k, vals, n, sizeof *vals, by_val);
    return f ? f->w : NULL;
}

static void show(FILE *out, const char *what, const fh_op *o)
{
    char v[24];
    if (o->value == FH_NIL) snprintf(v, sizeof v, "nil");
    else snprintf(v, sizeof v, "%" PRId64, o->value);
    fprintf(out, "    %-8s client %2d on node %d: %s %s  [%.6f, ", what, o->client, o->node, o->kind == FH_WRITE ? "SET" : "GET ->", v,
            (double)o->invoke / 1e9);
    if (o->outcome == FH_UNKNOWN) fprintf(out, "?] (outcome unknown)\n");
    else fprintf(out, "%.6f] s\n", (double)o->complete / 1e9);
}

/* The index of the first op in `by_invoke` (sorted) invoked after t. */
static size_t first_after(fh_op **sorted, size_t n, int64_t t)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (sorted[mid]->invoke <= t) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

static size_t first_not_before(fh_op **sorted, size_t n, int64_t t)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (sorted[mid]->complete < t) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

void fh_explain_register(const fh_history *h, const char *key, FILE *out)
{
    size_t n = 0, nw = 0, nr = 0;
    for (size_t i = 0; i < h->n; i++) n += !strcmp(h->ops[i].key, key);
    vw *vals = calloc(n + 1, sizeof *vals);
    fh_op **writes = calloc(n + 1, sizeof *writes), **reads = calloc(n + 1, sizeof *reads);
    const fh_op **suffix = calloc(n + 1, sizeof *suffix), **prefix = calloc(n + 1, sizeof *prefix);
    if (!vals || !writes || !reads || !suffix || !prefix) abort();
    for (size_t i = 0; i < h->n; i++) {
        fh_op *o = &h->ops[i];
        if (strcmp(o->key, key) || o->outcome == FH_FAIL) continue;
        if (o->kind == FH_WRITE) {
            vals[nw] = (vw){o->value, o};
            writes[nw++] = o;
        } else if (o->kind == FH_READ && o->outcome == FH_OK) {
            reads[nr++] = o;
        }
    }
    qsort(vals, nw, sizeof *vals, by_val);
    qsort(writes, nw, sizeof *writes, by_inv);
    /* suffix[i]: the write among writes[i..] that completed first. */
    for (size_t i = nw; i-- > 0;)
        suffix[i] = i + 1 < nw && end_of(suffix[i + 1]) < end_of(writes[i]) ? suffix[i + 1] : writes[i];
    size_t stale = 0, lost = 0, inverted = 0, future = 0;
    for (size_t i = 0; i < nr; i++) {
        const fh_op *r = reads[i], *w = r->value == FH_NIL ? NULL : write_of(vals, nw, r->value);
        if (r->value != FH_NIL && !w) continue; /* never written: the checker said so */
        if (w && w->invoke > r->complete && !future++) {
            fprintf(out, "  future read: a read returned a value whose write began after it ended\n");
            show(out, "read", r);
            show(out, "write", w);
        }
        size_t k = w ? first_after(writes, nw, end_of(w)) : 0;
        const fh_op *b = k < nw ? suffix[k] : NULL;
        if (b && end_of(b) < r->invoke) {
            if (w && !stale++) {
                fprintf(out, "  stale read: it returned A's value though B, begun after A completed, had completed "
                             "before the read began\n");
                show(out, "A", w);
                show(out, "B", b);
                show(out, "read", r);
            } else if (!w && !lost++) {
                fprintf(out, "  lost write: a read returned absent after a write had completed\n");
                show(out, "write", b);
                show(out, "read", r);
            }
        }
    }
    /* Inversions: prefix[i] = among reads[0..i] by completion, the one whose
     * write began last. */
    qsort(reads, nr, sizeof *reads, by_cmp);
    for (size_t i = 0; i < nr; i++) {
        const fh_op *w = reads[i]->value == FH_NIL ? NULL : write_of(vals, nw, reads[i]->value);
        const fh_op *best = i ? prefix[i - 1] : NULL;
        const fh_op *bw = best && best->value != FH_NIL ? write_of(vals, nw, best->value) : NULL;
        prefix[i] = w && (!bw || w->invoke > bw->invoke) ? reads[i] : best;
    }
    for (size_t i = 0; i < nr; i++) {
        const fh_op *r2 = reads[i], *w2 = r2->value == FH_NIL ? NULL : write_of(vals, nw, r2->value);
        size_t k = first_not_before(reads, nr, r2->invoke);
        const fh_op *r1 = k ? prefix[k - 1] : NULL;
        const fh_op *w1 = r1 ? write_of(vals, nw, r1->value) : NULL;
        bool older = w1 && (!w2 ? true : end_of(w2) < w1->invoke);
        if (older && !inverted++) {
            fprintf(out, "  read inversion: read 2 began after read 1 ended, yet returned an older value\n");
            if (w2) show(out, "write 2", w2);
            show(out, "write 1", w1);
            show(out, "read 1", r1);
            show(out, "read 2", r2);
        }
    }
    fprintf(out, "  register %s: %zu stale reads, %zu reads of absent after a write, %zu read inversions, %zu future reads\n",
            key, stale, lost, inverted, future);
    free(vals);
    free(writes);
    free(reads);
    free(suffix);
    free(prefix);
}
