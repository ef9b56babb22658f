/*
 * json: GET /topology and GET /caches, the JSON shapes `lattice --json top`
 * and `lattice --json caches` print (docs/OPERATIONS.md): the same keys, so
 * a script reads either.  Built with jansson for correct escaping.
 */
#include <jansson.h>
#include <microhttpd.h>
#include <stdlib.h>
#include <string.h>

#include "http_int.h"
#include "lattice/clock.h"

static int emit(json_t *root, FILE *out)
{
    char *s = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    if (!s) return MHD_HTTP_INTERNAL_SERVER_ERROR;
    fputs(s, out);
    fputc('\n', out);
    free(s);
    return MHD_HTTP_OK;
}

static json_t *member_json(lattice_node *n, const lattice_member *m, const char *self)
{
    lattice_node_stats s;
    bool have = lattice_node_stats_of(n, m->id, &s) == LATTICE_OK;
    uint64_t now = lt_wall_ms();
    json_t *o = json_pack("{s:s, s:s, s:I, s:s, s:s, s:s, s:I, s:b}", "id", m->id, "consistent_id", m->consistent_id,
                          "order", (json_int_t)m->order, "role", m->role == LATTICE_ROLE_CLIENT ? "client" : "server",
                          "addr", m->addr, "host", m->host, "uptime_ms",
                          (json_int_t)(have ? s.uptime_ms : now > m->start_time_ms ? now - m->start_time_ms : 0),
                          "self", strcmp(m->id, self) == 0);
    json_t *attrs = json_object();
    for (size_t i = 0; i < m->n_attrs; i++) json_object_set_new(attrs, m->attrs[i].key, json_string(m->attrs[i].value));
    json_object_set_new(o, "attrs", attrs);
    if (have) {
        json_object_set_new(o, "cpu_load", json_real(s.cpu_load));
        json_object_set_new(o, "memory_rss_bytes", json_integer((json_int_t)s.rss_bytes));
    }
    return o;
}

int http_topology(lattice_node *n, FILE *out)
{
    lattice_topology *t = lattice_node_topology(n);
    if (!t) {
        fputs("{\"error\":\"not in a grid yet\"}\n", out);
        return MHD_HTTP_SERVICE_UNAVAILABLE;
    }
    char self[64];
    lattice_node_id(n, self, sizeof self);
    json_t *nodes = json_array();
    for (size_t i = 0; i < lattice_topology_size(t); i++)
        json_array_append_new(nodes, member_json(n, lattice_topology_member(t, i), self));
    json_t *root = json_pack("{s:[I,I], s:s, s:s, s:o}", "topology_version", (json_int_t)lattice_topology_major(t),
                             (json_int_t)lattice_topology_minor(t), "coordinator", lattice_topology_coordinator(t),
                             "self", self, "nodes", nodes);
    lattice_topology_release(t);
    return emit(root, out);
}

/* A cache node entry names its node by consistent id too, as the CLI's
 * does; the node id when the node already left the topology. */
static json_t *cache_node_json(const lattice_cache_node_info *x, const lattice_topology *t)
{
    json_t *o = json_pack("{s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "id", x->id, "primary_entries",
                     (json_int_t)x->primary_entries, "backup_entries", (json_int_t)x->backup_entries,
                     "primary_partitions", (json_int_t)x->primary_partitions, "backup_partitions",
                     (json_int_t)x->backup_partitions, "reads", (json_int_t)x->reads, "writes", (json_int_t)x->writes,
                     "hits", (json_int_t)x->hits, "misses", (json_int_t)x->misses, "moving_partitions",
                     (json_int_t)x->moving_partitions, "moving_entries", (json_int_t)x->moving_entries);
    if (o) {
        json_object_set_new(o, "bytes", json_integer((json_int_t)x->row_bytes));
        json_object_set_new(o, "pages", json_integer((json_int_t)x->pages));
        const lattice_member *m = t ? lattice_topology_find(t, x->id) : NULL;
        json_object_set_new(o, "consistent_id", json_string(m ? m->consistent_id : x->id));
    }
    return o;
}

int http_caches(lattice_node *n, FILE *out)
{
    lattice_cache_info *ci = NULL;
    size_t nc = 0;
    lattice_status st = lattice_caches_info(n, &ci, &nc);
    if (st != LATTICE_OK) {
        json_t *e = json_pack("{s:s}", "error", lattice_strerror(st));
        emit(e, out);
        return MHD_HTTP_SERVICE_UNAVAILABLE;
    }
    lattice_topology *t = lattice_node_topology(n);
    json_t *arr = json_array();
    for (size_t i = 0; i < nc; i++) {
        json_t *nodes = json_array();
        for (size_t k = 0; k < ci[i].n_nodes; k++) json_array_append_new(nodes, cache_node_json(&ci[i].nodes[k], t));
        json_array_append_new(arr, json_pack("{s:s, s:s, s:I, s:I, s:s, s:b, s:I, s:s, s:o}", "name", ci[i].name,
                                             "mode", ci[i].mode, "partitions", (json_int_t)ci[i].partitions,
                                             "backups", (json_int_t)ci[i].backups, "sync", ci[i].sync,
                                             "read_from_backup", ci[i].read_from_backup, "size",
                                             (json_int_t)ci[i].size, "spec", ci[i].spec, "nodes", nodes));
    }
    if (t) lattice_topology_release(t);
    lattice_caches_info_free(ci, nc);
    return emit(json_pack("{s:o}", "caches", arr), out);
}
