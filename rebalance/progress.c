/*
 * Progress reporting (`lattice rebalance`, --json and --watch) and the
 * verification digests behind `lattice verify CACHE`.
 *
 * The digest of a partition copy is the sum (mod 2^64) of one 64-bit hash
 * per entry over (key, value, expire time, version): addition commutes, so
 * two copies holding the same entries agree whatever order their indexes
 * walk them in, and a changed value, a missing or extra key or a changed
 * version changes the sum (up to a 2^-64 collision).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "lattice/alloc.h"
#include "rebalance/rebalance.h"

/* --------------------------------------------------------------- progress */

void lattice_rebalance_progress_init(lattice_rebalance_progress *p, const char *cache,
                                     uint32_t partitions_total, uint64_t now_ms)
{
    memset(p, 0, sizeof *p);
    if (cache) snprintf(p->cache, sizeof p->cache, "%s", cache);
    p->partitions_total = partitions_total;
    p->started_ms = p->updated_ms = now_ms;
}

void lattice_rebalance_progress_rate(const lattice_rebalance_progress *p, uint64_t now_ms,
                                     lattice_rebalance_rate *r)
{
    double secs = now_ms > p->started_ms ? (double)(now_ms - p->started_ms) / 1000.0 : 0.0;
    r->bytes_per_s = secs > 0 ? (double)p->bytes_received / secs : 0.0;
    r->entries_per_s = secs > 0 ? (double)p->entries_received / secs : 0.0;
    uint32_t left = p->partitions_total > p->partitions_done
                        ? p->partitions_total - p->partitions_done : 0;
    r->percent = p->partitions_total ? 100.0 * (double)(p->partitions_total - left) /
                                           (double)p->partitions_total
                                     : 100.0;
    if (left == 0) r->eta_s = 0.0;
    else if (p->partitions_done == 0 || secs <= 0) r->eta_s = -1.0;
    else r->eta_s = secs * (double)left / (double)p->partitions_done;
}

/* Appends with the snprintf contract: *used counts what the full text needs. */
static void put(char *buf, size_t len, size_t *used, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void put(char *buf, size_t len, size_t *used, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    size_t room = *used < len ? len - *used : 0;
    int n = vsnprintf(room ? buf + *used : NULL, room, fmt, ap);
    va_end(ap);
    if (n > 0) *used += (size_t)n;
}

size_t lattice_rebalance_progress_json(const lattice_rebalance_progress *p, size_t n,
                                       uint64_t now_ms, char *buf, size_t len)
{
    size_t used = 0;
    bool busy = false;
    for (size_t i = 0; i < n; i++)
        if (p[i].partitions_done < p[i].partitions_total) busy = true;
    if (len) buf[0] = 0;
    put(buf, len, &used, "{\"in_progress\":%s,\"caches\":[", busy ? "true" : "false");
    for (size_t i = 0; i < n; i++) {
        lattice_rebalance_rate r;
        lattice_rebalance_progress_rate(&p[i], now_ms, &r);
        uint32_t left = p[i].partitions_total - (p[i].partitions_done < p[i].partitions_total
                                                     ? p[i].partitions_done
                                                     : p[i].partitions_total);
        /* Cache names are [A-Za-z0-9_.-] (validated), so they need no escaping. */
        put(buf, len, &used,
            "%s{\"name\":\"%s\",\"partitions_moving\":%u,\"partitions_left\":%u,"
            "\"partitions_total\":%u,\"entries_received\":%llu,\"bytes_received\":%llu,"
            "\"bytes_per_s\":%.0f,\"entries_per_s\":%.0f,\"eta_s\":%.1f}",
            i ? "," : "", p[i].cache, p[i].partitions_moving, left, p[i].partitions_total,
            (unsigned long long)p[i].entries_received, (unsigned long long)p[i].bytes_received,
            r.bytes_per_s, r.entries_per_s, r.eta_s);
    }
    put(buf, len, &used, "]}");
    return used;
}

/* 1234 -> "1234", 1234567 -> "1.2M" */
static void human(double v, const char *unit, char *out, size_t len)
{
    static const char *sfx[] = {"", "k", "M", "G", "T"};
    int i = 0;
    while (v >= 1000.0 && i < 4) {
        v /= 1000.0;
        i++;
    }
    if (i == 0) snprintf(out, len, "%.0f%s%s", v, *unit ? " " : "", unit);
    else snprintf(out, len, "%.1f%s%s%s", v, sfx[i], *unit ? " " : "", unit);
}

size_t lattice_rebalance_progress_bar(const lattice_rebalance_progress *p, uint64_t now_ms,
                                      unsigned width, char *buf, size_t len)
{
    if (width == 0) width = 1;
    if (width > 200) width = 200;
    lattice_rebalance_rate r;
    lattice_rebalance_progress_rate(p, now_ms, &r);
    char bar[201];
    unsigned full = (unsigned)(r.percent * width / 100.0);
    if (full > width) full = width;
    memset(bar, '#', full);
    memset(bar + full, '-', width - full);
    bar[width] = 0;
    uint32_t left = p->partitions_total > p->partitions_done
                        ? p->partitions_total - p->partitions_done : 0;
    char ent[32], bytes[32], rate[32], eta[32];
    human((double)p->entries_received, "entries", ent, sizeof ent);
    human((double)p->bytes_received, "B", bytes, sizeof bytes);
    human(r.bytes_per_s, "B/s", rate, sizeof rate);
    if (r.eta_s < 0) snprintf(eta, sizeof eta, "eta ?");
    else snprintf(eta, sizeof eta, "eta %.0fs", r.eta_s);
    size_t used = 0;
    if (len) buf[0] = 0;
    put(buf, len, &used, "%s [%s] %3.0f%% %u/%u left %s %s %s %s", p->cache, bar, r.percent, left,
        p->partitions_total, ent, bytes, rate, eta);
    return used;
}

/* ----------------------------------------------------------------- digest */

struct dig {
    uint64_t hash, size;
};

static int digest_visit(void *arg, const lattice_store_item *it)
{
    struct dig *d = arg;
    uint64_t hk = XXH3_64bits_withSeed(it->key, it->key_len, 0x6c61747469636501ull);
    /* The key length seeds the value hash, so moving bytes between key and
     * value changes the result. */
    uint64_t hv = XXH3_64bits_withSeed(it->value, it->value_len, it->key_len);
    /* A value's type counts too (a string's digest is what it was). */
    if (it->type) hv ^= XXH3_64bits_withSeed(&it->type, 1, hv);
    uint64_t meta[4] = {hk, hv, it->expire_ms, it->version};
    d->hash += XXH3_64bits(meta, sizeof meta);
    d->size++;
    return 0;
}

lattice_status lattice_rebalance_digest_partition(lattice_store *s, uint32_t partition,
                                                  uint64_t counter, lattice_rebalance_digest *d)
{
    if (!s || !d || partition >= lattice_store_partitions(s)) return LATTICE_ERR_INVAL;
    lattice_store_cursor *c;
    int rc = lattice_store_cursor_open(s, partition, &c);
    if (rc != LATTICE_OK) return (lattice_status)rc;
    struct dig acc = {0, 0};
    int done = 0;
    while (!done) {
        rc = lattice_store_cursor_next(c, 4096, 1u << 20, digest_visit, &acc, &done);
        if (rc != LATTICE_OK) {
            lattice_store_cursor_close(c);
            return (lattice_status)rc;
        }
    }
    lattice_store_cursor_close(c);
    d->partition = partition;
    d->hash = acc.hash;
    d->size = acc.size;
    d->counter = counter;
    return LATTICE_OK;
}

static int cmp_digest(const void *a, const void *b)
{
    const lattice_rebalance_digest *x = *(const lattice_rebalance_digest *const *)a;
    const lattice_rebalance_digest *y = *(const lattice_rebalance_digest *const *)b;
    if (x->partition != y->partition) return x->partition < y->partition ? -1 : 1;
    return (x->node > y->node) - (x->node < y->node);
}

lattice_status lattice_rebalance_verify(const lattice_rebalance_digest *d, size_t n,
                                        lattice_rebalance_conflict **out, size_t *count)
{
    if ((!d && n) || !out || !count) return LATTICE_ERR_INVAL;
    *out = NULL;
    *count = 0;
    if (n == 0) return LATTICE_OK;
    const lattice_rebalance_digest **v = lt_malloc(n * sizeof *v);
    lattice_rebalance_conflict *c = lt_malloc(n * sizeof *c);
    if (!v || !c) {
        lt_free(v);
        lt_free(c);
        return LATTICE_ERR_NOMEM;
    }
    for (size_t i = 0; i < n; i++) v[i] = &d[i];
    qsort(v, n, sizeof *v, cmp_digest);
    size_t nc = 0;
    for (size_t i = 0; i < n;) {
        size_t j = i;
        const lattice_rebalance_digest *ref = v[i];
        while (j < n && v[j]->partition == v[i]->partition) {
            if (v[j]->counter > ref->counter) ref = v[j];
            j++;
        }
        for (size_t k = i; k < j; k++) {
            if (v[k] == ref) continue;
            unsigned what = 0;
            if (v[k]->hash != ref->hash) what |= LATTICE_REBALANCE_CONFLICT_HASH;
            if (v[k]->size != ref->size) what |= LATTICE_REBALANCE_CONFLICT_SIZE;
            if (v[k]->counter != ref->counter) what |= LATTICE_REBALANCE_CONFLICT_COUNTER;
            if (what)
                c[nc++] = (lattice_rebalance_conflict){v[k]->partition, ref->node, v[k]->node,
                                                       what};
        }
        i = j;
    }
    lt_free(v);
    if (nc == 0) {
        lt_free(c);
        return LATTICE_OK;
    }
    *out = c;
    *count = nc;
    return LATTICE_OK;
}
