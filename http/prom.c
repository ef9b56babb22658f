/*
 * prom: GET /metrics in the Prometheus text exposition format 0.0.4.
 *
 * Each family is one HELP line, one TYPE line and its samples, every name
 * lattice_*; counters end in _total; label values are escaped (\\, \", \n).
 * Per node: topology version, members, this node's heartbeat stats, the
 * operations it issued (by kind and result, latency histograms), its data
 * region.  Per cache: this node's entries and partitions (primary, backup,
 * moving), reads/writes/hits/misses, its rows' bytes and pages in the
 * region (exact, kept by the store), its rebalance progress, and the
 * cache's size over the grid.
 */
#include <microhttpd.h>
#include <string.h>

#include "http_int.h"
#include "lattice/clock.h"
#include "lattice/metrics.h"

/* Writes s as a label value. */
static void esc(FILE *o, const char *s)
{
    for (; *s; s++) {
        if (*s == '\\' || *s == '"') fputc('\\', o), fputc(*s, o);
        else if (*s == '\n') fputs("\\n", o);
        else fputc(*s, o);
    }
}

static void family(FILE *o, const char *name, const char *type, const char *help)
{
    fprintf(o, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void sample(FILE *o, const char *name, unsigned long long v)
{
    fprintf(o, "%s %llu\n", name, v);
}

static void node_part(lattice_node *n, FILE *o, const char *self)
{
    lattice_topology *t = lattice_node_topology(n);
    family(o, "lattice_up", "gauge", "1 while the node process runs");
    sample(o, "lattice_up", 1);
    family(o, "lattice_joined", "gauge", "1 when this node is a member of the topology it sees");
    sample(o, "lattice_joined", t && lattice_topology_find(t, self) ? 1 : 0);
    family(o, "lattice_topology_version_major", "gauge", "topology version, major part (joins, leaves, failures)");
    sample(o, "lattice_topology_version_major", t ? lattice_topology_major(t) : 0);
    family(o, "lattice_topology_version_minor", "gauge", "topology version, minor part (affinity switches)");
    sample(o, "lattice_topology_version_minor", t ? lattice_topology_minor(t) : 0);
    size_t servers = 0, clients = 0;
    const lattice_member *me = NULL;
    for (size_t i = 0; t && i < lattice_topology_size(t); i++) {
        const lattice_member *m = lattice_topology_member(t, i);
        if (!strcmp(m->id, self)) me = m;
        if (m->role == LATTICE_ROLE_CLIENT) clients++;
        else servers++;
    }
    family(o, "lattice_nodes", "gauge", "members of the topology by role");
    fprintf(o, "lattice_nodes{role=\"server\"} %zu\nlattice_nodes{role=\"client\"} %zu\n", servers, clients);
    family(o, "lattice_peers", "gauge", "other members of the topology");
    sample(o, "lattice_peers", servers + clients > 0 && me ? servers + clients - 1 : servers + clients);
    family(o, "lattice_coordinator", "gauge", "1 when this node is the coordinator");
    sample(o, "lattice_coordinator", t && !strcmp(lattice_topology_coordinator(t), self));
    lattice_quorum q;
    lattice_node_quorum(n, &q);
    family(o, "lattice_quorum", "gauge", "1 while this node holds quorum (a strict majority of the baseline)");
    sample(o, "lattice_quorum", q.has_quorum);
    family(o, "lattice_baseline_servers", "gauge", "baseline servers: all of them, and those this node reaches");
    fprintf(o, "lattice_baseline_servers{state=\"baseline\"} %zu\nlattice_baseline_servers{state=\"reachable\"} %zu\n",
            q.baseline, q.reachable);
    family(o, "lattice_node_info", "gauge", "this node: id, consistent id, role and version (value 1)");
    fputs("lattice_node_info{id=\"", o);
    esc(o, self);
    fputs("\",consistent_id=\"", o);
    esc(o, me ? me->consistent_id : "");
    fprintf(o, "\",role=\"%s\",version=\"%s\"} 1\n", me && me->role == LATTICE_ROLE_CLIENT ? "client" : "server",
            LATTICE_VERSION);
    if (t) lattice_topology_release(t);

    lattice_node_stats s;
    if (lattice_node_stats_of(n, self, &s) != LATTICE_OK) return;
    family(o, "lattice_uptime_seconds", "gauge", "time since this node started");
    fprintf(o, "lattice_uptime_seconds %.3f\n", (double)s.uptime_ms / 1000.0);
    family(o, "lattice_cpu_load", "gauge", "process CPU, 1.0 = one core busy");
    fprintf(o, "lattice_cpu_load %.3f\n", s.cpu_load);
    family(o, "lattice_memory_rss_bytes", "gauge", "resident memory of the process");
    sample(o, "lattice_memory_rss_bytes", s.rss_bytes);
    family(o, "lattice_peer_frames_received_total", "counter", "control frames received from peers");
    sample(o, "lattice_peer_frames_received_total", s.frames_in);
    family(o, "lattice_peer_frames_dropped_total", "counter", "control frames dropped, by reason");
    fprintf(o,
            "lattice_peer_frames_dropped_total{reason=\"malformed\"} %llu\n"
            "lattice_peer_frames_dropped_total{reason=\"oversized\"} %llu\n"
            "lattice_peer_frames_dropped_total{reason=\"auth_failed\"} %llu\n"
            "lattice_peer_frames_dropped_total{reason=\"refused\"} %llu\n"
            "lattice_peer_frames_dropped_total{reason=\"handshake_failed\"} %llu\n",
            (unsigned long long)s.malformed, (unsigned long long)s.oversized, (unsigned long long)s.auth_failed,
            (unsigned long long)s.refused, (unsigned long long)s.handshake_failed);
}

static void ops_part(const lattice_node_metrics *m, FILE *o)
{
    family(o, "lattice_operations_total", "counter", "cache operations this node issued, by kind and result");
    for (int k = 1; k <= LATTICE_OP_KIND_MAX_; k++)
        for (int s = 0; s < LATTICE_STATUS_COUNT_; s++)
            if (m->ops[k][s] || s == LATTICE_OK)
                fprintf(o, "lattice_operations_total{kind=\"%s\",result=\"%s\"} %llu\n", lattice_op_kind_name(k),
                        lattice_status_name(s), (unsigned long long)m->ops[k][s]);
    family(o, "lattice_operation_duration_seconds", "histogram", "time from submit to result, by kind");
    for (int k = 1; k <= LATTICE_OP_KIND_MAX_; k++) {
        unsigned long long cum = 0;
        const char *kn = lattice_op_kind_name(k);
        for (unsigned b = 0; b < LATTICE_METRICS_BUCKETS; b++) {
            cum += m->latency[k][b];
            if (b + 1 < LATTICE_METRICS_BUCKETS)
                fprintf(o, "lattice_operation_duration_seconds_bucket{kind=\"%s\",le=\"%g\"} %llu\n", kn,
                        (double)lattice_metrics_bucket_us(b) / 1e6, cum);
            else
                fprintf(o, "lattice_operation_duration_seconds_bucket{kind=\"%s\",le=\"+Inf\"} %llu\n", kn, cum);
        }
        fprintf(o, "lattice_operation_duration_seconds_sum{kind=\"%s\"} %.6f\n", kn, (double)m->latency_sum_us[k] / 1e6);
        fprintf(o, "lattice_operation_duration_seconds_count{kind=\"%s\"} %llu\n", kn, cum);
    }
    family(o, "lattice_transactions_total", "counter",
           "interactive transactions this node coordinated, by how their commit ended");
    for (int s = 0; s < LATTICE_STATUS_COUNT_; s++)
        if (m->tx[s] || s == LATTICE_OK || s == LATTICE_ERR_ABORTED || s == LATTICE_ERR_UNKNOWN)
            fprintf(o, "lattice_transactions_total{result=\"%s\"} %llu\n", lattice_status_name(s),
                    (unsigned long long)m->tx[s]);
    family(o, "lattice_operations_in_flight", "gauge", "operations this node submitted that have no result yet");
    sample(o, "lattice_operations_in_flight", m->ops_in_flight);
    family(o, "lattice_reads_inline_total", "counter",
           "reads answered on the thread that read the request, without the data thread");
    sample(o, "lattice_reads_inline_total", m->reads_inline);
    family(o, "lattice_ops_run_here_total", "counter",
           "other operations run to completion on the thread that read the request, while the data thread was idle");
    sample(o, "lattice_ops_run_here_total", m->ops_run_here);
    family(o, "lattice_wal_log_releases_total", "counter",
           "with --data-dir: times the log's thread sent the replies its fsync freed itself, the data thread idle");
    sample(o, "lattice_wal_log_releases_total", m->log_releases);
    family(o, "lattice_heap_bytes", "gauge",
           "the C library's heap: bytes in use (allocated, not freed) and free inside it (mallinfo2)");
    fprintf(o, "lattice_heap_bytes{state=\"in_use\"} %llu\nlattice_heap_bytes{state=\"free\"} %llu\n",
            (unsigned long long)m->heap_in_use, (unsigned long long)m->heap_free);
    if (!m->pages_max) return;
    family(o, "lattice_region_page_size_bytes", "gauge", "data region page size");
    sample(o, "lattice_region_page_size_bytes", m->page_size);
    family(o, "lattice_region_pages", "gauge",
           "data region pages: the bound, mapped from the OS, holding rows, mapped but given back to the OS");
    fprintf(o, "lattice_region_pages{state=\"max\"} %llu\nlattice_region_pages{state=\"mapped\"} %llu\n"
               "lattice_region_pages{state=\"data\"} %llu\nlattice_region_pages{state=\"released\"} %llu\n",
            (unsigned long long)m->pages_max, (unsigned long long)m->pages_mapped, (unsigned long long)m->pages_data,
            (unsigned long long)m->pages_released);
    family(o, "lattice_region_rows", "gauge", "row pieces stored in the data region");
    sample(o, "lattice_region_rows", m->rows);
    family(o, "lattice_region_row_bytes", "gauge", "bytes of the stored rows, headers included");
    sample(o, "lattice_region_row_bytes", m->row_bytes);
    family(o, "lattice_region_evictions_total", "counter", "entries evicted because the data region was full");
    sample(o, "lattice_region_evictions_total", m->evictions);
}

/* The per-cache families, each with this node's entry of every cache. */
#define CACHE_FAMILIES(X)                                                                                      \
    X("lattice_cache_entries", "gauge", "entries this node holds, by copy")                                  \
    X("lattice_cache_partitions", "gauge", "partitions this node holds, by copy")                            \
    X("lattice_cache_reads_total", "counter", "reads this node served as owner")                              \
    X("lattice_cache_writes_total", "counter", "writes this node applied as owner")                          \
    X("lattice_cache_hits_total", "counter", "reads that found the key")                                     \
    X("lattice_cache_misses_total", "counter", "reads that did not find the key")                            \
    X("lattice_cache_evictions_total", "counter", "entries this node evicted as primary (removed on every copy)") \
    X("lattice_cache_expirations_total", "counter", "expired entries this node's copy reclaimed")            \
    X("lattice_cache_index_bytes", "gauge", "memory of this node's index of the cache")                      \
    X("lattice_cache_bytes", "gauge", "bytes of this node's rows of the cache in the data region, row headers included") \
    X("lattice_cache_rows", "gauge", "row pieces of this node's copy of the cache (an entry over a page is several)") \
    X("lattice_cache_pages", "gauge", "data pages this node's rows of the cache fill packed (pages are shared by caches)") \
    X("lattice_cache_replication_in_flight", "gauge", "full_sync writes applied here as primary, waiting for their copies") \
    X("lattice_cache_size", "gauge", "entries of the cache over every server (primary copies)")             \
    X("lattice_rebalance_active", "gauge", "1 while a rebalance of the cache runs or is scheduled here")    \
    X("lattice_rebalance_partitions", "gauge", "partitions the current rebalance loads here: total, left")  \
    X("lattice_rebalance_received_entries", "gauge", "entries the current or last rebalance received here") \
    X("lattice_rebalance_received_bytes", "gauge", "key+value bytes the current or last rebalance received")

static void cache_sample(FILE *o, const char *fam, const lattice_cache_info *c, const lattice_cache_node_info *x)
{
    const char *labels[3] = {NULL};
    unsigned long long v[3] = {0};
    if (!strcmp(fam, "lattice_cache_entries")) {
        labels[0] = "copy=\"primary\"", v[0] = x->primary_entries;
        labels[1] = "copy=\"backup\"", v[1] = x->backup_entries;
    } else if (!strcmp(fam, "lattice_cache_partitions")) {
        labels[0] = "copy=\"primary\"", v[0] = x->primary_partitions;
        labels[1] = "copy=\"backup\"", v[1] = x->backup_partitions;
        labels[2] = "copy=\"moving\"", v[2] = x->moving_partitions;
    } else if (!strcmp(fam, "lattice_rebalance_partitions")) {
        labels[0] = "state=\"total\"", v[0] = x->rebalance_total;
        labels[1] = "state=\"left\"", v[1] = x->rebalance_left;
    } else {
        labels[0] = "";
        v[0] = !strcmp(fam, "lattice_cache_reads_total")            ? x->reads
               : !strcmp(fam, "lattice_cache_writes_total")         ? x->writes
               : !strcmp(fam, "lattice_cache_hits_total")           ? x->hits
               : !strcmp(fam, "lattice_cache_misses_total")         ? x->misses
               : !strcmp(fam, "lattice_cache_evictions_total")      ? x->evictions
               : !strcmp(fam, "lattice_cache_expirations_total")    ? x->expirations
               : !strcmp(fam, "lattice_cache_index_bytes")          ? x->index_bytes
               : !strcmp(fam, "lattice_cache_bytes")                ? x->row_bytes
               : !strcmp(fam, "lattice_cache_rows")                 ? x->rows
               : !strcmp(fam, "lattice_cache_pages")                ? x->pages
               : !strcmp(fam, "lattice_cache_replication_in_flight") ? x->writes_in_flight
               : !strcmp(fam, "lattice_cache_size")                 ? c->size
               : !strcmp(fam, "lattice_rebalance_active")           ? x->rebalance_active
               : !strcmp(fam, "lattice_rebalance_received_entries") ? x->rebalance_entries
                                                                    : x->rebalance_bytes;
    }
    for (int i = 0; i < 3 && labels[i]; i++) {
        fprintf(o, "%s{cache=\"", fam);
        esc(o, c->name);
        fprintf(o, "\"%s%s} %llu\n", *labels[i] ? "," : "", labels[i], v[i]);
    }
}

static void caches_part(lattice_node *n, FILE *o, const char *self)
{
    /* Not in a grid yet: no cache to show, and asking would wait out the
     * operation timeout (a scrape, or the console, would hang for it). */
    lattice_topology *t = lattice_node_topology(n);
    if (!t) return;
    lattice_topology_release(t);
    lattice_cache_info *ci = NULL;
    size_t nc = 0;
    if (lattice_caches_info(n, &ci, &nc) != LATTICE_OK) return;
    static const lattice_cache_node_info none;
#define FAM(name, type, help)                                                                    \
    family(o, name, type, help);                                                                     \
    for (size_t i = 0; i < nc; i++) {                                                                \
        const lattice_cache_node_info *x = &none;                                                    \
        for (size_t j = 0; j < ci[i].n_nodes; j++)                                                   \
            if (!strcmp(ci[i].nodes[j].id, self)) x = &ci[i].nodes[j];                               \
        cache_sample(o, name, &ci[i], x);                                                            \
    }
    CACHE_FAMILIES(FAM)
#undef FAM
    lattice_caches_info_free(ci, nc);
}

int http_metrics(lattice_node *n, FILE *o)
{
    char self[64];
    lattice_node_id(n, self, sizeof self);
    node_part(n, o, self);
    lattice_node_metrics m;
    if (lattice_node_metrics_get(n, &m) == LATTICE_OK) ops_part(&m, o);
    caches_part(n, o, self);
    return MHD_HTTP_OK;
}
