/*
 * json: GET /topology, /caches, /partitions, /rebalance and /slowlog.  The
 * first four are the JSON `lattice --json top | caches | partitions |
 * rebalance` print, built by the same code (http/shapes.h) from what this
 * node sees, so a script - or the web console - reads either.  An answer
 * the node cannot give (not in a grid yet, a cache it does not know) is a
 * JSON {"error":...} with 503 or 404.
 */
#include <jansson.h>
#include <microhttpd.h>
#include <stdlib.h>
#include <string.h>

#include "http/shapes.h"
#include "http_int.h"
#include "lattice/clock.h"

static int emit(json_t *root, FILE *out, int code)
{
    char *s = root ? json_dumps(root, JSON_COMPACT) : NULL;
    json_decref(root);
    if (!s) {
        fputs("{\"error\":\"out of memory\"}\n", out);
        return MHD_HTTP_INTERNAL_SERVER_ERROR;
    }
    fputs(s, out);
    fputc('\n', out);
    free(s);
    return code;
}

static int error(FILE *out, int code, const char *why)
{
    return emit(json_pack("{s:s}", "error", why), out, code);
}

/* The grid's pages need a grid: a node not in one yet answers at once
 * rather than after its calls time out. */
static lattice_topology *joined(lattice_node *n, FILE *out, int *code)
{
    lattice_topology *t = lattice_node_topology(n);
    if (!t) *code = error(out, MHD_HTTP_SERVICE_UNAVAILABLE, "not in a grid yet");
    return t;
}

static bool heard(void *ctx, const lattice_member *m, lattice_member_state *s)
{
    return lattice_node_member_state(ctx, m->id, s) == LATTICE_OK;
}

int http_topology(lattice_node *n, const char *cluster, FILE *out)
{
    int code;
    lattice_topology *t = joined(n, out, &code);
    if (!t) return code;
    char self[64];
    lattice_node_id(n, self, sizeof self);
    json_t *root = lattice_shapes_top(t, heard, n, lt_wall_ms());
    lattice_topology_release(t);
    /* Which member answers: the CLI says answered_by, the endpoint "self"
     * (and "self":true on its own entry). */
    json_t *x;
    size_t i;
    json_array_foreach(json_object_get(root, "nodes"), i, x)
        json_object_set_new(x, "self", json_boolean(!strcmp(json_string_value(json_object_get(x, "id")), self)));
    json_object_set_new(root, "self", json_string(self));
    json_object_set_new(root, "cluster", json_string(cluster));
    return emit(root, out, MHD_HTTP_OK);
}

int http_caches(lattice_node *n, FILE *out)
{
    int code;
    lattice_topology *t = joined(n, out, &code);
    if (!t) return code;
    lattice_cache_info *ci = NULL;
    size_t nc = 0;
    lattice_status st = lattice_caches_info(n, &ci, &nc);
    if (st != LATTICE_OK) {
        lattice_topology_release(t);
        return error(out, MHD_HTTP_SERVICE_UNAVAILABLE, lattice_strerror(st));
    }
    json_t *root = lattice_shapes_caches(ci, nc, t);
    lattice_topology_release(t);
    lattice_caches_info_free(ci, nc);
    return emit(root, out, MHD_HTTP_OK);
}

int http_partitions(lattice_node *n, const char *cache, FILE *out)
{
    int code;
    lattice_topology *t = joined(n, out, &code);
    if (!t) return code;
    lattice_topology_release(t);
    lattice_partitions_info *pi = NULL;
    lattice_status st = lattice_cache_partitions(n, cache ? cache : "default", &pi);
    if (st == LATTICE_ERR_NO_CACHE) return error(out, MHD_HTTP_NOT_FOUND, "no such cache (GET /caches lists them)");
    if (st != LATTICE_OK) return error(out, MHD_HTTP_SERVICE_UNAVAILABLE, lattice_strerror(st));
    json_t *root = lattice_shapes_partitions(pi);
    lattice_partitions_info_free(pi);
    return emit(root, out, MHD_HTTP_OK);
}

int http_rebalance(lattice_node *n, FILE *out)
{
    int code;
    lattice_topology *t = joined(n, out, &code);
    if (!t) return code;
    lattice_cache_info *ci = NULL;
    size_t nc = 0;
    lattice_status st = lattice_caches_info(n, &ci, &nc);
    if (st != LATTICE_OK) {
        lattice_topology_release(t);
        return error(out, MHD_HTTP_SERVICE_UNAVAILABLE, lattice_strerror(st));
    }
    uint64_t now = lt_mono_ms();
    lattice_shapes_rebalance r;
    st = lattice_shapes_rebalance_gather(ci, nc, t, now, &r);
    lattice_topology_release(t);
    lattice_caches_info_free(ci, nc);
    if (st != LATTICE_OK) return error(out, MHD_HTTP_INTERNAL_SERVER_ERROR, lattice_strerror(st));
    json_t *root = lattice_shapes_rebalance_json(&r, now);
    lattice_shapes_rebalance_free(&r);
    return emit(root, out, MHD_HTTP_OK);
}

/* ---------------------------------------------------------------- slowlog */

struct lattice_httpd_slowlog {
    json_t *root, *entries;
};

void lattice_httpd_slowlog_config(lattice_httpd_slowlog *s, long long slower_than_us, long long max_len, long long len)
{
    json_object_set_new(s->root, "slower_than_us", json_integer(slower_than_us));
    json_object_set_new(s->root, "max_len", json_integer(max_len));
    json_object_set_new(s->root, "len", json_integer(len));
}

/* An argument as JSON text: as it is when it is UTF-8, else with every byte
 * outside printable ASCII written \xhh (as redis-cli shows it). */
static json_t *arg_json(const char *p, size_t n)
{
    json_t *s = json_stringn(p, n);
    if (s) return s;
    char *b = malloc(n * 4 + 1);
    if (!b) return json_string("");
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        if (c >= 0x20 && c < 0x7f && c != '\\') b[k++] = (char)c;
        else k += (size_t)sprintf(b + k, "\\x%02x", c);
    }
    s = json_stringn(b, k);
    free(b);
    return s;
}

void lattice_httpd_slowlog_add(lattice_httpd_slowlog *s, const lattice_httpd_slow_entry *e)
{
    json_t *argv = json_array();
    for (size_t i = 0; i < e->argc; i++) json_array_append_new(argv, arg_json(e->argv[i], e->argv_len[i]));
    json_array_append_new(s->entries, json_pack("{s:I, s:I, s:I, s:o, s:s, s:s}", "id", (json_int_t)e->id, "time",
                                                (json_int_t)e->time_s, "duration_us", (json_int_t)e->duration_us,
                                                "argv", argv, "client", e->client ? e->client : "",
                                                "client_name", e->client_name ? e->client_name : ""));
}

int http_slowlog(lattice_httpd_slowlog_fn fn, void *ctx, size_t max, FILE *out)
{
    lattice_httpd_slowlog s = {json_object(), json_array()};
    json_object_set_new(s.root, "source", fn ? json_string("resp") : json_null());
    lattice_httpd_slowlog_config(&s, -1, 0, 0);
    if (fn) fn(ctx, max, &s);
    json_object_set_new(s.root, "entries", s.entries);
    return emit(s.root, out, MHD_HTTP_OK);
}
