/*
 * shapes: the JSON of the inspection views, shared by the CLI's --json and
 * the HTTP endpoint (http/shapes.h).  Built with jansson for correct
 * escaping; the CLI sets jansson's allocator to lt_malloc, the endpoint
 * leaves libc's, and nothing here frees what jansson did not allocate.
 */
#include "http/shapes.h"

#include <string.h>

#include "lattice/alloc.h"

/* ------------------------------------------------------------------ top */

static const char *role_name(int r) { return r == LATTICE_ROLE_CLIENT ? "client" : "server"; }

static json_t *member_json(const lattice_member *m, const lattice_member_state *s, bool heard, uint64_t now)
{
    uint64_t up = s->have_stats ? s->stats.uptime_ms : now > m->start_time_ms ? now - m->start_time_ms : 0;
    json_t *o = json_pack("{s:s, s:s, s:I, s:s, s:s, s:s, s:I, s:s, s:I}", "id", m->id, "consistent_id",
                          m->consistent_id, "order", (json_int_t)m->order, "role", role_name(m->role), "addr", m->addr,
                          "host", m->host, "uptime_ms", (json_int_t)up, "state", heard ? s->state : "unknown",
                          "silent_ms", (json_int_t)s->silent_ms);
    if (!o) return NULL;
    json_t *attrs = json_object();
    for (size_t i = 0; i < m->n_attrs; i++) json_object_set_new(attrs, m->attrs[i].key, json_string(m->attrs[i].value));
    json_object_set_new(o, "attrs", attrs);
    if (s->have_stats) {
        const lattice_node_stats *x = &s->stats;
        json_object_set_new(o, "cpu_load", json_real(x->cpu_load));
        json_object_set_new(o, "memory_rss_bytes", json_integer((json_int_t)x->rss_bytes));
        json_object_set_new(o, "dropped",
                            json_pack("{s:I, s:I, s:I, s:I, s:I, s:I}", "malformed", (json_int_t)x->malformed,
                                      "oversized", (json_int_t)x->oversized, "auth_failed", (json_int_t)x->auth_failed,
                                      "refused", (json_int_t)x->refused, "handshake_failed",
                                      (json_int_t)x->handshake_failed, "frames_in", (json_int_t)x->frames_in));
    }
    return o;
}

/* The baseline member's server in t, NULL when it is not in the topology. */
static const lattice_member *online(const lattice_topology *t, const char *cid)
{
    for (size_t i = 0; i < lattice_topology_size(t); i++) {
        const lattice_member *m = lattice_topology_member(t, i);
        if (m->role == LATTICE_ROLE_SERVER && strcmp(m->consistent_id, cid) == 0) return m;
    }
    return NULL;
}

size_t lattice_shapes_baseline_present(const lattice_topology *t)
{
    size_t n = 0;
    for (size_t i = 0; i < lattice_topology_baseline_size(t); i++) n += online(t, lattice_topology_baseline_at(t, i)) != NULL;
    return n;
}

json_t *lattice_shapes_quorum(const lattice_topology *t)
{
    size_t size = lattice_topology_baseline_size(t), p = lattice_shapes_baseline_present(t);
    return json_pack("{s:I, s:I, s:I, s:b}", "baseline_version", (json_int_t)lattice_topology_baseline_version(t),
                     "baseline_nodes", (json_int_t)size, "baseline_in_topology", (json_int_t)p, "has_quorum",
                     p > size / 2);
}

json_t *lattice_shapes_top(const lattice_topology *t, lattice_shapes_member_fn fn, void *ctx, uint64_t now_wall_ms)
{
    json_t *nodes = json_array();
    for (size_t i = 0; i < lattice_topology_size(t); i++) {
        const lattice_member *m = lattice_topology_member(t, i);
        lattice_member_state s;
        memset(&s, 0, sizeof s);
        bool heard = fn(ctx, m, &s);
        if (!heard) memset(&s, 0, sizeof s);
        json_array_append_new(nodes, member_json(m, &s, heard, now_wall_ms));
    }
    json_t *root = json_pack("{s:[I,I], s:s, s:o}", "topology_version", (json_int_t)lattice_topology_major(t),
                             (json_int_t)lattice_topology_minor(t), "coordinator", lattice_topology_coordinator(t),
                             "nodes", nodes);
    if (root) json_object_set_new(root, "quorum", lattice_shapes_quorum(t));
    return root;
}

/* --------------------------------------------------------------- caches */

/* Nodes are named by consistent id (host:port) everywhere; the id (a UUID
 * per start) when the node already left. */
static const char *node_name(const lattice_topology *t, const char *id)
{
    const lattice_member *m = t ? lattice_topology_find(t, id) : NULL;
    return m ? m->consistent_id : id;
}

static json_t *cache_node_json(const lattice_cache_node_info *x, const lattice_topology *t)
{
    json_t *o = json_pack("{s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "id", x->id, "primary_entries",
                          (json_int_t)x->primary_entries, "backup_entries", (json_int_t)x->backup_entries,
                          "primary_partitions", (json_int_t)x->primary_partitions, "backup_partitions",
                          (json_int_t)x->backup_partitions, "reads", (json_int_t)x->reads, "writes",
                          (json_int_t)x->writes, "hits", (json_int_t)x->hits, "misses", (json_int_t)x->misses);
    if (!o) return NULL;
    json_object_set_new(o, "moving_partitions", json_integer((json_int_t)x->moving_partitions));
    json_object_set_new(o, "evictions", json_integer((json_int_t)x->evictions));
    json_object_set_new(o, "moving_entries", json_integer((json_int_t)x->moving_entries));
    json_object_set_new(o, "bytes", json_integer((json_int_t)x->row_bytes));
    json_object_set_new(o, "pages", json_integer((json_int_t)x->pages));
    json_object_set_new(o, "consistent_id", json_string(node_name(t, x->id)));
    return o;
}

json_t *lattice_shapes_caches(const lattice_cache_info *ci, size_t nc, const lattice_topology *t)
{
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
    return json_pack("{s:o}", "caches", arr);
}

/* ----------------------------------------------------------- partitions */

static void tally(json_t *counts, const char *cid)
{
    json_t *c = json_object_get(counts, cid);
    json_object_set_new(counts, cid, json_integer(c ? json_integer_value(c) + 1 : 1));
}

json_t *lattice_shapes_partitions(const lattice_partitions_info *pi)
{
    /* primaries and backups per node (consistent id), for the balance */
    json_t *primaries = json_object(), *backups = json_object();
    uint32_t lost = 0, under = 0;
    json_t *parts = json_array();
    for (uint32_t p = 0; p < pi->partitions; p++) {
        const lattice_partition_owner *own = &pi->owners[(size_t)p * pi->max_owners];
        json_t *owners = json_array();
        bool owning = pi->n_owners[p] && own[0].primary;
        uint32_t serving = 0;
        for (uint32_t i = 0; i < pi->n_owners[p]; i++) {
            const lattice_partition_owner *o = &own[i];
            json_array_append_new(owners, json_pack("{s:s, s:s, s:s, s:s}", "node", o->node, "consistent_id",
                                                    o->consistent_id, "role", o->primary ? "primary" : "backup",
                                                    "state", o->state));
            tally(o->primary ? primaries : backups, o->consistent_id);
            serving += !strcmp(o->state, "OWNING");
        }
        const char *red = !owning ? "lost" : serving < pi->copies_wanted ? "under" : "full";
        lost += !owning;
        under += owning && serving < pi->copies_wanted;
        json_array_append_new(parts, json_pack("{s:I, s:o, s:s, s:s}", "id", (json_int_t)p, "owners", owners, "state",
                                               owning ? "OWNING" : "LOST", "redundancy", red));
    }
    long mn = -1, mx = 0, sum = 0, nn = 0;
    const char *k;
    json_t *v, *nodes = json_array();
    json_object_foreach(primaries, k, v) {
        long x = (long)json_integer_value(v);
        mn = mn < 0 || x < mn ? x : mn;
        mx = x > mx ? x : mx;
        sum += x;
        nn++;
        json_t *b = json_object_get(backups, k);
        json_array_append_new(nodes, json_pack("{s:s, s:I, s:I}", "consistent_id", k, "primaries", (json_int_t)x,
                                               "backups", (json_int_t)(b ? json_integer_value(b) : 0)));
    }
    json_object_foreach(backups, k, v)
        if (!json_object_get(primaries, k))
            json_array_append_new(nodes, json_pack("{s:s, s:I, s:I}", "consistent_id", k, "primaries", (json_int_t)0,
                                                   "backups", (json_int_t)json_integer_value(v)));
    json_decref(primaries);
    json_decref(backups);
    double avg = nn ? (double)sum / (double)nn : 0;
    return json_pack("{s:s, s:[I,I], s:o, s:{s:I, s:f, s:I, s:I}, s:o, s:I, s:I, s:I}", "cache", pi->cache,
                     "topology_version", (json_int_t)pi->major, (json_int_t)pi->minor, "partitions", parts, "balance",
                     "primary_min", (json_int_t)(mn < 0 ? 0 : mn), "primary_avg", avg, "primary_max", (json_int_t)mx,
                     "nodes", (json_int_t)nn, "nodes", nodes, "lost", (json_int_t)lost, "under_replicated",
                     (json_int_t)under, "copies_wanted", (json_int_t)pi->copies_wanted);
}

/* ------------------------------------------------------------ rebalance */

static lattice_shapes_rebalance_node *node_of(lattice_shapes_rebalance *r, size_t cap, const lattice_topology *t,
                                              const char *id)
{
    for (size_t i = 0; i < r->n_nodes; i++)
        if (!strcmp(r->nodes[i].id, id)) return &r->nodes[i];
    if (r->n_nodes == cap) return NULL;
    lattice_shapes_rebalance_node *x = &r->nodes[r->n_nodes++];
    memset(x, 0, sizeof *x);
    snprintf(x->id, sizeof x->id, "%s", id);
    const lattice_member *m = t ? lattice_topology_find(t, id) : NULL;
    if (m) snprintf(x->consistent_id, sizeof x->consistent_id, "%s", m->consistent_id);
    return x;
}

lattice_status lattice_shapes_rebalance_gather(const lattice_cache_info *ci, size_t nc, const lattice_topology *t,
                                               uint64_t now_ms, lattice_shapes_rebalance *out)
{
    memset(out, 0, sizeof *out);
    size_t cap = 0;
    for (size_t i = 0; i < nc; i++) cap += ci[i].n_nodes;
    out->caches = lt_calloc(nc ? nc : 1, sizeof *out->caches);
    out->nodes = lt_calloc(cap ? cap : 1, sizeof *out->nodes);
    if (!out->caches || !out->nodes) {
        lattice_shapes_rebalance_free(out);
        return LATTICE_ERR_NOMEM;
    }
    for (size_t i = 0; i < nc; i++) {
        lattice_rebalance_progress *p = &out->caches[i];
        uint32_t total = 0, left = 0;
        uint64_t elapsed = 0;
        lattice_rebalance_progress_init(p, ci[i].name, 0, now_ms);
        for (size_t k = 0; k < ci[i].n_nodes; k++) {
            const lattice_cache_node_info *x = &ci[i].nodes[k];
            total += x->rebalance_total;
            left += x->rebalance_left < x->rebalance_total ? x->rebalance_left : x->rebalance_total;
            p->entries_received += x->rebalance_entries;
            p->bytes_received += x->rebalance_bytes;
            if (x->rebalance_elapsed_ms > elapsed) elapsed = x->rebalance_elapsed_ms;
            if (x->rebalance_active || x->moving_partitions) out->in_progress = true;
            lattice_shapes_rebalance_node *f = node_of(out, cap, t, x->id);
            if (f) {
                f->entries += x->rebalance_entries;
                f->bytes += x->rebalance_bytes;
                f->done += x->rebalance_done;
                f->delta += x->rebalance_delta < x->rebalance_done ? x->rebalance_delta : x->rebalance_done;
            }
        }
        p->partitions_total = total;
        p->partitions_done = total - left;
        p->partitions_moving = left;
        p->started_ms = now_ms - (elapsed < now_ms ? elapsed : 0);
        p->updated_ms = now_ms;
    }
    out->n_caches = nc;
    return LATTICE_OK;
}

void lattice_shapes_rebalance_free(lattice_shapes_rebalance *r)
{
    if (!r) return;
    lt_free(r->caches);
    lt_free(r->nodes);
    memset(r, 0, sizeof *r);
}

const char *lattice_shapes_rebalance_mode(const lattice_shapes_rebalance_node *x) { return x->delta ? "delta" : "full"; }

json_t *lattice_shapes_rebalance_json(const lattice_shapes_rebalance *r, uint64_t now_ms)
{
    size_t need = lattice_rebalance_progress_json(r->caches, r->n_caches, now_ms, NULL, 0) + 1;
    char *buf = lt_malloc(need);
    if (!buf) return NULL;
    lattice_rebalance_progress_json(r->caches, r->n_caches, now_ms, buf, need);
    json_t *j = json_loads(buf, 0, NULL);
    lt_free(buf);
    if (!j) return NULL;
    /* Busy by what the servers report (a plan, or a partition MOVING not
     * switched yet), not only by partitions left to load. */
    json_object_set_new(j, "in_progress", json_boolean(r->in_progress));
    json_t *nodes = json_array();
    for (size_t i = 0; i < r->n_nodes; i++) {
        const lattice_shapes_rebalance_node *x = &r->nodes[i];
        json_array_append_new(nodes, json_pack("{s:s,s:s,s:I,s:I,s:s,s:i,s:i}", "id", x->id, "consistent_id",
                                               x->consistent_id, "entries_received", (json_int_t)x->entries,
                                               "bytes_received", (json_int_t)x->bytes, "mode",
                                               lattice_shapes_rebalance_mode(x), "partitions_full",
                                               (int)(x->done - x->delta), "partitions_delta", (int)x->delta));
    }
    json_object_set_new(j, "nodes", nodes);
    return j;
}
