/*
 * httpd: the listening socket, libmicrohttpd's daemon, routing, and /health.
 *
 * Every page is built into an open_memstream buffer, then handed to
 * libmicrohttpd, which frees it after sending (MHD_RESPMEM_MUST_FREE).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "http/http.h"
#include "http_int.h"
#include "lattice/alloc.h"
#include "lattice/log.h"

#define MAX_EXTRA 4
#define MAX_CONNECTIONS 64

struct lattice_httpd {
    int fd;                     /* listening socket; libmicrohttpd owns it once started */
    int port;
    char cluster[128];
    lattice_node *node;
    struct MHD_Daemon *mhd;
    struct {
        lattice_httpd_metrics_fn fn;
        void *ctx;
    } extra[MAX_EXTRA];
    size_t n_extra;
    lattice_httpd_slowlog_fn slowlog; /* set before start, read-only after */
    void *slowlog_ctx;
};

lattice_status lattice_httpd_bind(const lattice_httpd_config *c, lattice_httpd **out)
{
    *out = NULL;
    if (!c || c->port < 1 || c->port > 65535) return LATTICE_ERR_INVAL;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)c->port)};
    const char *host = c->host ? c->host : "127.0.0.1";
    if (inet_pton(AF_INET, host, &a.sin_addr) != 1) {
        LT_LOG(LT_ERROR, "http", "--host %s is not an IPv4 address", host);
        return LATTICE_ERR_INVAL;
    }
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return LATTICE_ERR_IO;
    /* SO_REUSEADDR: bind over a TIME-WAIT of a stopped node; never
     * SO_REUSEPORT, which would let two live processes share the port. */
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(fd, 64) != 0) {
        LT_LOG(LT_ERROR, "http", "cannot listen on %s:%d: %s%s", host, c->port, strerror(errno),
               errno == EADDRINUSE ? " (another process serves that port; pick another --http-port)" : "");
        close(fd);
        return LATTICE_ERR_IO;
    }
    lattice_httpd *h = lt_calloc(1, sizeof *h);
    if (!h) {
        close(fd);
        return LATTICE_ERR_NOMEM;
    }
    h->fd = fd;
    h->port = c->port;
    snprintf(h->cluster, sizeof h->cluster, "%s", c->cluster ? c->cluster : "");
    *out = h;
    return LATTICE_OK;
}

void lattice_httpd_add_metrics(lattice_httpd *h, lattice_httpd_metrics_fn fn, void *ctx)
{
    if (h->n_extra == MAX_EXTRA) return;
    h->extra[h->n_extra].fn = fn;
    h->extra[h->n_extra].ctx = ctx;
    h->n_extra++;
}

void lattice_httpd_set_slowlog(lattice_httpd *h, lattice_httpd_slowlog_fn fn, void *ctx)
{
    h->slowlog = fn;
    h->slowlog_ctx = ctx;
}

/* The node serves when it is a member of a topology it sees, holds quorum,
 * and every partition of every cache has a serving (OWNING) copy. */
int http_health(lattice_node *n, FILE *out)
{
    lattice_topology *t = lattice_node_topology(n);
    if (!t) {
        /* A refusal (secret, cluster name, protocol) is the likely reason:
         * wait_joined names it once peers refused for a second. */
        lattice_status why = lattice_node_wait_joined(n, 1);
        if (why == LATTICE_ERR_AUTH || why == LATTICE_ERR_CLUSTER || why == LATTICE_ERR_PROTO)
            fprintf(out, "not in a grid: joins refused: %s\n", lattice_strerror(why));
        else
            fputs("not in a grid yet: still joining\n", out);
        return MHD_HTTP_SERVICE_UNAVAILABLE;
    }
    char self[64];
    lattice_node_id(n, self, sizeof self);
    bool member = lattice_topology_find(t, self) != NULL;
    lattice_topology_release(t);
    if (!member) {
        fputs("not a member of the current topology: rejoining\n", out);
        return MHD_HTTP_SERVICE_UNAVAILABLE;
    }
    /* A server cut off from the majority of the baseline refuses every
     * operation (NO_QUORUM): it does not serve. */
    lattice_quorum q;
    lattice_node_quorum(n, &q);
    if (!q.has_quorum) {
        fprintf(out, "no quorum: %zu of %zu baseline servers reachable\n", q.reachable, q.baseline);
        return MHD_HTTP_SERVICE_UNAVAILABLE;
    }
    lattice_cache_info *ci = NULL;
    size_t nc = 0;
    lattice_status st = lattice_caches_info(n, &ci, &nc);
    if (st != LATTICE_OK) {
        fprintf(out, "cannot read the caches: %s\n", lattice_strerror(st));
        return MHD_HTTP_SERVICE_UNAVAILABLE;
    }
    int code = MHD_HTTP_OK;
    for (size_t i = 0; i < nc; i++) {
        lattice_partitions_info *p = NULL;
        if (lattice_cache_partitions(n, ci[i].name, &p) != LATTICE_OK) continue; /* destroyed meanwhile */
        uint32_t lost = 0;
        for (uint32_t k = 0; k < p->partitions; k++)
            lost += p->n_owners[k] == 0 || strcmp(p->owners[(size_t)k * p->max_owners].state, "OWNING") != 0;
        if (lost) {
            fprintf(out, "cache %s: %u of %u partitions have no serving copy\n", ci[i].name, lost, p->partitions);
            code = MHD_HTTP_SERVICE_UNAVAILABLE;
        }
        lattice_partitions_info_free(p);
    }
    lattice_caches_info_free(ci, nc);
    if (code == MHD_HTTP_OK) fputs("ok\n", out);
    return code;
}

static enum MHD_Result reply(struct MHD_Connection *c, int code, const char *type, char *body, size_t len)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    /* Every page is of now: a console polling it must never see a cached one. */
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    enum MHD_Result ok = MHD_queue_response(c, (unsigned)code, r);
    MHD_destroy_response(r);
    return ok;
}

/* The console's own assets are all the page may load or ask: the browser
 * refuses anything from another host, inline scripts, eval. */
#define CONSOLE_CSP                                                                                            \
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " \
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

static enum MHD_Result reply_asset(struct MHD_Connection *c, const http_asset *a)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(a->len, (void *)a->data, MHD_RESPMEM_PERSISTENT);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, a->type);
    /* Revalidated on every load: a node upgraded in place serves its own
     * console, never the previous binary's. */
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    MHD_add_response_header(r, "Content-Security-Policy", CONSOLE_CSP);
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    enum MHD_Result ok = MHD_queue_response(c, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return ok;
}

/* GET /health?format=json: the verdict as data, 200 whenever the node
 * answers - {"serving":bool,"status":200|503,"reasons":[...]} - for pages
 * and scripts that show the verdict rather than act on the status code. */
static int health_json(lattice_node *n, FILE *out)
{
    char *text = NULL;
    size_t len = 0;
    FILE *t = open_memstream(&text, &len);
    if (!t) return MHD_HTTP_INTERNAL_SERVER_ERROR;
    int code = http_health(n, t);
    fclose(t);
    fprintf(out, "{\"serving\":%s,\"status\":%d,\"reasons\":[", code == MHD_HTTP_OK ? "true" : "false", code);
    /* One reason a line; the texts are ours (cache names are [A-Za-z0-9_.-]),
     * but escape quotes and backslashes all the same. */
    bool first = true;
    for (char *line = text, *end; code != MHD_HTTP_OK && line && *line; line = end ? end + 1 : NULL) {
        end = strchr(line, '\n');
        size_t n_line = end ? (size_t)(end - line) : strlen(line);
        if (!n_line) continue;
        fputs(first ? "\"" : ",\"", out);
        for (size_t i = 0; i < n_line; i++) {
            unsigned char ch = (unsigned char)line[i];
            if (ch == '"' || ch == '\\') fputc('\\', out), fputc(ch, out);
            else if (ch < 0x20) fprintf(out, "\\u%04x", ch);
            else fputc(ch, out);
        }
        fputc('"', out);
        first = false;
    }
    fputs("]}\n", out);
    free(text);
    return MHD_HTTP_OK;
}

static const char *arg(struct MHD_Connection *c, const char *key)
{
    return MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, key);
}

#define SLOWLOG_DEFAULT 128
#define SLOWLOG_MAX 1024

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_len, void **state)
{
    (void)version;
    (void)upload;
    lattice_httpd *h = cls;
    /* libmicrohttpd calls twice: first with the headers only. */
    if (!*state) {
        *state = h;
        return MHD_YES;
    }
    if (*upload_len) {
        *upload_len = 0; /* every page is a GET: a body is read and ignored */
        return MHD_YES;
    }
    bool get = !strcmp(method, "GET") || !strcmp(method, "HEAD");
    http_asset a;
    if (get && http_console_asset(url, &a)) return reply_asset(c, &a);
    char *body = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&body, &len);
    if (!out) return MHD_NO;
    int code;
    const char *type = "application/json";
    if (!get) {
        fprintf(out, "%s is not served: every page is a GET\n", method);
        code = MHD_HTTP_METHOD_NOT_ALLOWED;
        type = "text/plain; charset=utf-8";
    } else if (!strcmp(url, "/metrics")) {
        code = http_metrics(h->node, out);
        for (size_t i = 0; i < h->n_extra; i++) h->extra[i].fn(h->extra[i].ctx, out);
        type = "text/plain; version=0.0.4; charset=utf-8";
    } else if (!strcmp(url, "/health")) {
        const char *f = arg(c, "format");
        if (f && !strcmp(f, "json")) {
            code = health_json(h->node, out);
        } else {
            code = http_health(h->node, out);
            type = "text/plain; charset=utf-8";
        }
    } else if (!strcmp(url, "/topology")) {
        code = http_topology(h->node, h->cluster, out);
    } else if (!strcmp(url, "/caches")) {
        code = http_caches(h->node, out);
    } else if (!strcmp(url, "/partitions")) {
        const char *cache = arg(c, "cache");
        if (cache && !*cache) {
            fputs("{\"error\":\"cache wants a name (GET /caches lists them); none means default\"}\n", out);
            code = MHD_HTTP_BAD_REQUEST;
        } else {
            code = http_partitions(h->node, cache, out);
        }
    } else if (!strcmp(url, "/rebalance")) {
        code = http_rebalance(h->node, out);
    } else if (!strcmp(url, "/slowlog")) {
        const char *cs = arg(c, "count");
        char *end = NULL;
        long count = cs ? strtol(cs, &end, 10) : SLOWLOG_DEFAULT;
        if (cs && (!*cs || *end || count < 0)) {
            fputs("{\"error\":\"count wants a number, 0 or more\"}\n", out);
            code = MHD_HTTP_BAD_REQUEST;
        } else {
            code = http_slowlog(h->slowlog, h->slowlog_ctx, count > SLOWLOG_MAX ? SLOWLOG_MAX : (size_t)count, out);
        }
    } else {
        fprintf(out, "no page %s: try / (the console), /metrics, /health, /topology, /caches, /partitions, "
                     "/rebalance or /slowlog\n", url);
        code = MHD_HTTP_NOT_FOUND;
        type = "text/plain; charset=utf-8";
    }
    fclose(out);
    return reply(c, code, type, body, len);
}

lattice_status lattice_httpd_start(lattice_httpd *h, lattice_node *n)
{
    h->node = n;
    h->mhd = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_ERROR_LOG, 0,
                              NULL, NULL, on_request, h, MHD_OPTION_LISTEN_SOCKET, (MHD_socket)h->fd,
                              MHD_OPTION_CONNECTION_LIMIT, (unsigned)MAX_CONNECTIONS, MHD_OPTION_CONNECTION_TIMEOUT,
                              (unsigned)30, MHD_OPTION_END);
    if (!h->mhd) {
        LT_LOG(LT_ERROR, "http", "cannot start serving port %d", h->port);
        return LATTICE_ERR_IO;
    }
    h->fd = -1; /* closed by MHD_stop_daemon from now on */
    LT_LOG(LT_INFO, "http", "serving the console at / and /metrics /health /topology /caches /partitions "
           "/rebalance /slowlog on port %d", h->port);
    return LATTICE_OK;
}

void lattice_httpd_stop(lattice_httpd *h)
{
    if (!h || !h->mhd) return;
    MHD_stop_daemon(h->mhd);
    h->mhd = NULL;
}

void lattice_httpd_destroy(lattice_httpd *h)
{
    if (!h) return;
    lattice_httpd_stop(h);
    if (h->fd >= 0) close(h->fd);
    lt_free(h);
}
