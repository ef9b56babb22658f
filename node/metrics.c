/*
 * metrics: the operations a node issued, by kind and result, with latency
 * histograms (lattice/metrics.h), and the copy readers take.
 *
 * Every lattice_op_submit goes through node_metrics_submit, which wraps the
 * caller's callback: one small allocation per submit (not per op) holds the
 * callback, the start time and the kinds.  Completions run on the data
 * thread, and reads of lattice_op_submit_inline on the submitter's thread
 * (ops/fast.c), so every counter is an atomic add (relaxed: a figure may
 * lag by an operation, never tear nor lose one).
 */
#include <malloc.h>
#include <stdatomic.h>
#include <string.h>

#include "lattice/alloc.h"
#include "lattice/clock.h"
#include "lattice/metrics.h"
#include "node_int.h"
#include "ops/ops.h"
#include "storage/storage.h"

struct node_metrics {
    uint64_t ops[LATTICE_OP_KIND_MAX_ + 1][LATTICE_STATUS_COUNT_];
    uint64_t latency[LATTICE_OP_KIND_MAX_ + 1][LATTICE_METRICS_BUCKETS];
    uint64_t latency_sum_us[LATTICE_OP_KIND_MAX_ + 1];
    uint64_t in_flight;
    uint64_t tx[LATTICE_STATUS_COUNT_];
};

/* One submit call: the caller's callback, and what each op was. */
typedef struct wrap {
    lattice_op_fn fn;
    void *arg;
    node_metrics *m;
    uint64_t start_us;
    size_t left;          /* atomic: completions of one submit may run on two threads */
    uint8_t kinds[];      /* per op; 0 when outside the enum */
} wrap;

node_metrics *node_metrics_new(void) { return lt_calloc(1, sizeof(node_metrics)); }

void node_metrics_tx(node_metrics *m, lattice_status st)
{
    unsigned s = st >= 0 && st < LATTICE_STATUS_COUNT_ ? (unsigned)st : LATTICE_ERR_PROTO;
    __atomic_fetch_add(&m->tx[s], 1, __ATOMIC_RELAXED);
}
void node_metrics_free(node_metrics *m) { lt_free(m); }

uint64_t lattice_metrics_bucket_us(unsigned i)
{
    if (i + 1 >= LATTICE_METRICS_BUCKETS) return UINT64_MAX;
    return 100ull << i;
}

static unsigned bucket_of(uint64_t us)
{
    unsigned i = 0;
    while (i + 1 < LATTICE_METRICS_BUCKETS && us > lattice_metrics_bucket_us(i)) i++;
    return i;
}

static void add(uint64_t *p, uint64_t v) { __atomic_fetch_add(p, v, __ATOMIC_RELAXED); }

static void wrapped(void *arg, size_t i, const lattice_op_result *r)
{
    wrap *w = arg;
    node_metrics *m = w->m;
    unsigned k = w->kinds[i];
    unsigned st = r->status >= 0 && r->status < LATTICE_STATUS_COUNT_ ? (unsigned)r->status : LATTICE_ERR_PROTO;
    uint64_t took = lt_mono_us() - w->start_us;
    add(&m->ops[k][st], 1);
    add(&m->latency[k][bucket_of(took)], 1);
    add(&m->latency_sum_us[k], took);
    __atomic_fetch_sub(&m->in_flight, 1, __ATOMIC_RELAXED);
    lattice_op_fn fn = w->fn;
    void *farg = w->arg;
    bool last = __atomic_sub_fetch(&w->left, 1, __ATOMIC_ACQ_REL) == 0;
    if (last) lt_free(w);
    fn(farg, i, r);
}

lattice_status node_metrics_submit(node_metrics *m, lattice_ops *ops, const lattice_op *o, size_t n, lattice_op_fn fn,
                                   void *arg, bool inline_reads)
{
    if (!o || !n || !fn) return LATTICE_ERR_INVAL;
    wrap *w = lt_malloc(sizeof *w + n);
    if (!w) return LATTICE_ERR_NOMEM;
    w->fn = fn;
    w->arg = arg;
    w->m = m;
    w->left = n;
    for (size_t i = 0; i < n; i++)
        w->kinds[i] = o[i].kind >= 1 && o[i].kind <= LATTICE_OP_KIND_MAX_ ? (uint8_t)o[i].kind : 0;
    w->start_us = lt_mono_us();
    __atomic_fetch_add(&m->in_flight, n, __ATOMIC_RELAXED);
    lattice_status st = inline_reads ? lattice_ops_submit_inline(ops, o, n, wrapped, w)
                                     : lattice_ops_submit(ops, o, n, wrapped, w);
    if (st != LATTICE_OK) {
        __atomic_fetch_sub(&m->in_flight, n, __ATOMIC_RELAXED);
        lt_free(w);
    }
    return st;
}

lattice_status lattice_node_metrics_get(lattice_node *n, lattice_node_metrics *out)
{
    if (!n || !out) return LATTICE_ERR_INVAL;
    memset(out, 0, sizeof *out);
    node_metrics *m = lattice_node_metrics_of(n);
    for (size_t k = 0; k <= LATTICE_OP_KIND_MAX_; k++) {
        for (size_t s = 0; s < LATTICE_STATUS_COUNT_; s++) out->ops[k][s] = __atomic_load_n(&m->ops[k][s], __ATOMIC_RELAXED);
        for (size_t b = 0; b < LATTICE_METRICS_BUCKETS; b++)
            out->latency[k][b] = __atomic_load_n(&m->latency[k][b], __ATOMIC_RELAXED);
        out->latency_sum_us[k] = __atomic_load_n(&m->latency_sum_us[k], __ATOMIC_RELAXED);
    }
    out->ops_in_flight = __atomic_load_n(&m->in_flight, __ATOMIC_RELAXED);
    for (size_t st = 0; st < LATTICE_STATUS_COUNT_; st++) out->tx[st] = __atomic_load_n(&m->tx[st], __ATOMIC_RELAXED);
    out->reads_inline = lattice_ops_reads_inline(lattice_node_ops(n));
    out->ops_run_here = lattice_ops_run_here(lattice_node_ops(n));
    out->log_releases = lattice_ops_log_releases(lattice_node_ops(n));
    lattice_region *region = lattice_ops_region(lattice_node_ops(n));
    lattice_region_metrics rm;
    if (region) {
        lattice_region_metrics_get(region, &rm); /* takes the region's lane locks: safe beside the data thread */
        out->page_size = rm.page_size;
        out->pages_max = rm.pages_max;
        out->pages_mapped = rm.pages_mapped;
        out->pages_released = rm.pages_released;
        out->pages_data = rm.pages_data;
        out->row_bytes = rm.row_bytes;
        out->rows = rm.rows;
        out->evictions = rm.evictions;
    }
    /* Walks the heap's arenas under their locks: fine for a scrape, not
     * for a hot path.  With the region's resident pages it splits the
     * process's RSS into data and everything else (bench/soak). */
    struct mallinfo2 mi = mallinfo2();
    out->heap_in_use = (uint64_t)mi.uordblks + (uint64_t)mi.hblkhd;
    out->heap_free = (uint64_t)mi.fordblks;
    return LATTICE_OK;
}

const char *lattice_op_kind_name(int kind)
{
    static const char *const names[LATTICE_OP_KIND_MAX_ + 1] = {
        [LATTICE_OP_GET] = "get",       [LATTICE_OP_PUT] = "put",       [LATTICE_OP_REMOVE] = "remove",
        [LATTICE_OP_INCREMENT] = "increment", [LATTICE_OP_APPEND] = "append", [LATTICE_OP_EXPIRE] = "expire",
        [LATTICE_OP_TTL] = "ttl",       [LATTICE_OP_CONTAINS] = "contains", [LATTICE_OP_SIZE] = "size",
        [LATTICE_OP_SETRANGE] = "setrange", [LATTICE_OP_SETBIT] = "setbit", [LATTICE_OP_INCRBYFLOAT] = "incrbyfloat",
        [LATTICE_OP_TXN] = "txn",       [LATTICE_OP_COLL_READ] = "coll_read", [LATTICE_OP_COLL_WRITE] = "coll_write",
    };
    return kind >= 1 && kind <= LATTICE_OP_KIND_MAX_ ? names[kind] : "unknown";
}

const char *lattice_status_name(int status)
{
    static const char *const names[LATTICE_STATUS_COUNT_] = {
        [LATTICE_OK] = "ok", [LATTICE_ERR_NOMEM] = "nomem", [LATTICE_ERR_INVAL] = "inval",
        [LATTICE_ERR_NOT_FOUND] = "not_found", [LATTICE_ERR_EXISTS] = "exists",
        [LATTICE_ERR_REGION_FULL] = "region_full", [LATTICE_ERR_TOO_LARGE] = "too_large",
        [LATTICE_ERR_AGAIN] = "again", [LATTICE_ERR_NOT_OWNER] = "not_owner", [LATTICE_ERR_TIMEOUT] = "timeout",
        [LATTICE_ERR_IO] = "io", [LATTICE_ERR_PROTO] = "proto", [LATTICE_ERR_AUTH] = "auth",
        [LATTICE_ERR_CLUSTER] = "cluster", [LATTICE_ERR_PARTITION_LOST] = "partition_lost",
        [LATTICE_ERR_NO_CACHE] = "no_cache", [LATTICE_ERR_STOPPED] = "stopped",
        [LATTICE_ERR_UNSUPPORTED] = "unsupported", [LATTICE_ERR_EXPIRED] = "expired",
        [LATTICE_ERR_NO_QUORUM] = "no_quorum", [LATTICE_ERR_DISK_FULL] = "disk_full",
        [LATTICE_ERR_RESTARTING] = "restarting", [LATTICE_ERR_WRONGTYPE] = "wrongtype",
        [LATTICE_ERR_ABORTED] = "aborted", [LATTICE_ERR_UNKNOWN] = "unknown_outcome",
        [LATTICE_ERR_RESERVED_KEY] = "reserved_key",
    };
    return status >= 0 && status < LATTICE_STATUS_COUNT_ && names[status] ? names[status] : "unknown";
}
