/*
 * lattice/metrics.h: what one node measures about itself - the cache
 * operations it issued (by kind and result, with latency histograms) and its
 * data region.  Part of the public C API, implemented by the node library;
 * the HTTP endpoint's /metrics prints it in Prometheus text format.
 *
 * Every figure is a counter since the node started or a gauge of now; a
 * reader takes a copy (lattice_node_metrics_get) from any thread.
 */
#ifndef LATTICE_METRICS_H
#define LATTICE_METRICS_H

#include <stdint.h>

#include "lattice/lattice.h"
#include "lattice/ops.h"

/* Latency buckets: bucket i counts operations that took at most
 * lattice_metrics_bucket_us(i) microseconds (100 us doubling up to 1.6 s);
 * the last bucket counts the rest (+Inf). */
#define LATTICE_METRICS_BUCKETS 16

typedef struct lattice_node_metrics {
    /* Operations this node issued (API, RESP, CLI), counted when their
     * result arrived: ops[kind][status]. */
    uint64_t ops[LATTICE_OP_KIND_MAX_ + 1][LATTICE_STATUS_COUNT_];
    /* Per kind: the latency histogram (not cumulative) and the sum in us. */
    uint64_t latency[LATTICE_OP_KIND_MAX_ + 1][LATTICE_METRICS_BUCKETS];
    uint64_t latency_sum_us[LATTICE_OP_KIND_MAX_ + 1];
    uint64_t ops_in_flight;       /* submitted, no result yet */
    /* Interactive transactions this node coordinated (lattice/transaction.h),
     * by how their commit ended: tx[LATTICE_OK] committed, tx[LATTICE_ERR_ABORTED]
     * aborted, tx[LATTICE_ERR_UNKNOWN] outcome unknown, tx[LATTICE_ERR_TIMEOUT]
     * timed out before the commit, ...  Rollbacks are not counted. */
    uint64_t tx[LATTICE_STATUS_COUNT_];
    /* Reads answered on the thread that submitted them (lattice_op_submit_inline:
     * RESP's IO threads), without the data thread; counted in ops[] too. */
    uint64_t reads_inline;
    /* Other ops the thread that submitted them ran to completion there,
     * while the data thread was idle (docs/ARCHITECTURE.md, "Run to
     * completion"); counted in ops[] too. */
    uint64_t ops_run_here;
    /* With --data-dir: the times the log's thread, its fsync done, sent the
     * replies that waited for it itself (no data-thread wake-up between). */
    uint64_t log_releases;
    /* The data region (servers; zero on a client). */
    uint64_t page_size, pages_max, pages_mapped, pages_data, row_bytes, rows, evictions;
    uint64_t pages_released; /* mapped pages whose memory went back to the OS */
    /* The C library's heap (mallinfo2): bytes handed out and not freed
     * (small blocks and mmapped large ones), and bytes free inside it. */
    uint64_t heap_in_use, heap_free;
} lattice_node_metrics;

/* Upper bound of bucket i in microseconds; UINT64_MAX for the last one. */
uint64_t lattice_metrics_bucket_us(unsigned i);
/* A short lower-case name of a kind ("get", "put", ...); "unknown" outside
 * the enum. */
const char *lattice_op_kind_name(int kind);
/* A short lower-case name of a status ("ok", "not_found", ...). */
const char *lattice_status_name(int status);

/* Copies this node's figures; LATTICE_ERR_INVAL on NULL arguments. */
lattice_status lattice_node_metrics_get(lattice_node *n, lattice_node_metrics *out);

#endif
