/*
 * The lattice_node context (no global server struct: every module gets the
 * node) and its lifecycle.  Each module is one row of `modules`: init (no
 * sockets, no threads), start, stop, destroy; started in table order and
 * stopped in reverse.  Later modules (caches, rebalance, HTTP) add rows; the
 * RESP endpoint (resp/) is not one: latticed's main starts it on the node.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "discovery/discovery.h"
#include "lattice/alloc.h"
#include "lattice/lattice.h"
#include "lattice/log.h"
#include "node_int.h"
#include "grid/grid.h"
#include "ops/ops.h"
#include "persist/persist.h"

#define MAX_SECRET_BYTES (64 * 1024)

struct lattice_node {
    lattice_config cfg;     /* strings borrowed from the caller during start only */
    uint8_t *secret;        /* secret file contents, or NULL */
    size_t secret_len;
    lattice_discovery *discovery;
    lattice_ops *data;
    node_metrics *metrics;  /* from the first module on: every submit counts */
    size_t started;         /* modules started so far (stop unwinds these) */
    size_t inited;
};

typedef struct module {
    const char *name;
    lattice_status (*init)(lattice_node *n);
    lattice_status (*start)(lattice_node *n);
    void (*stop)(lattice_node *n);
    void (*destroy)(lattice_node *n);
} module;

/* A server with --data-dir keeps its consistent id ("host:port", the key of
 * its partitions' affinity) across restarts: when the port it had is in the
 * range it may bind, it tries that one first. */
static void keep_port(const lattice_config *c, int *port, int *range)
{
    char cid[160];
    if (!c->data_dir || c->client || c->port <= 0 || !lt_persist_peek_cid(c->data_dir, cid, sizeof cid)) return;
    const char *colon = strrchr(cid, ':');
    const char *host = c->host ? c->host : "127.0.0.1";
    if (!colon || (size_t)(colon - cid) != strlen(host) || strncmp(cid, host, strlen(host))) return;
    int p = atoi(colon + 1);
    if (p <= c->port || p >= c->port + c->port_range) return;
    LT_LOG(LT_INFO, "node", "%s was written by %s: trying port %d first", c->data_dir, cid, p);
    *range = c->port + c->port_range - p;
    *port = p;
}

static lattice_status disc_init(lattice_node *n)
{
    const lattice_config *c = &n->cfg;
    int port = c->port, range = c->port_range;
    keep_port(c, &port, &range);
    lattice_discovery_config dc = {
        .cluster = c->cluster,
        .host = c->host,
        .port = port,
        .port_range = range,
        .finders = c->finders,
        .n_finders = c->n_finders,
        .client = c->client,
        .failure_detection_ms = c->failure_detection_ms,
        .secret = n->secret,
        .secret_len = n->secret_len,
        .max_message_bytes = c->max_message_bytes,
        .multicast_attempts = c->multicast_attempts,
        .multicast_wait_ms = c->multicast_wait_ms,
        .attrs = c->attrs,
        .n_attrs = c->n_attrs,
        .baseline_auto_adjust_ms = c->baseline_auto_adjust_ms,
    };
    return lattice_discovery_init(&dc, &n->discovery);
}

static lattice_status disc_start(lattice_node *n) { return lattice_discovery_start(n->discovery); }
static void disc_stop(lattice_node *n) { lattice_discovery_stop(n->discovery); }
static void disc_destroy(lattice_node *n)
{
    lattice_discovery_destroy(n->discovery);
    n->discovery = NULL;
}

/* The operation path (ops/) comes first: its init binds the data
 * ROUTER - the one socket bound at init, not start - because discovery's
 * init copies the attributes it advertises, and data_addr must be among
 * them.  Stopped in reverse: discovery leaves first, then the data thread
 * ends every op still in flight with STOPPED. */
static lattice_status data_init(lattice_node *n)
{
    const lattice_config *c = &n->cfg;
    lattice_ops_config dc = {
        .client = c->client,
        .host = c->host,
        .secret = n->secret,
        .secret_len = n->secret_len,
        .caches = c->caches,
        .n_caches = c->n_caches,
        .region_mb = c->region_mb,
        .region_evict = c->region_evict,
        .op_timeout_ms = c->op_timeout_ms,
        .data_dir = c->data_dir,
        .wal_fsync = c->wal_fsync,
        .checkpoint_mb = c->checkpoint_mb,
    };
    const char *attr = NULL;
    lattice_status st = lattice_ops_init(&dc, &n->data, &attr);
    /* The grid's machines (grid/) ride on the data thread: attached before it starts. */
    if (st == LATTICE_OK && (st = lattice_grid_attach(n->data, c->restart_wait_ms)) != LATTICE_OK) {
        lattice_ops_destroy(n->data);
        n->data = NULL;
    }
    if (st == LATTICE_OK && attr) {
        if (n->cfg.n_attrs == LATTICE_MAX_ATTRS) return LATTICE_ERR_TOO_LARGE;
        n->cfg.attrs[n->cfg.n_attrs++] = attr;
    }
    return st;
}
static lattice_status data_start(lattice_node *n) { return lattice_ops_start(n->data, n->discovery); }
static void data_stop(lattice_node *n) { lattice_ops_stop(n->data); }
static void data_destroy(lattice_node *n)
{
    lattice_ops_destroy(n->data);
    n->data = NULL;
}

static lattice_status metrics_init(lattice_node *n)
{
    n->metrics = node_metrics_new();
    return n->metrics ? LATTICE_OK : LATTICE_ERR_NOMEM;
}
static lattice_status metrics_start(lattice_node *n) { (void)n; return LATTICE_OK; }
static void metrics_stop(lattice_node *n) { (void)n; }
static void metrics_destroy(lattice_node *n)
{
    node_metrics_free(n->metrics);
    n->metrics = NULL;
}

static const module modules[] = {
    {"metrics", metrics_init, metrics_start, metrics_stop, metrics_destroy},
    {"data", data_init, data_start, data_stop, data_destroy},
    {"discovery", disc_init, disc_start, disc_stop, disc_destroy},
};
#define N_MODULES (sizeof modules / sizeof modules[0])

void lattice_config_init(lattice_config *c)
{
    memset(c, 0, sizeof *c);
    c->cluster = "lattice";
    c->host = "127.0.0.1";
    c->port = LATTICE_DEFAULT_PORT;
    c->port_range = LATTICE_DEFAULT_PORT_RANGE;
    c->failure_detection_ms = LATTICE_DEFAULT_FAILURE_DETECTION_MS;
    c->max_message_bytes = LATTICE_DEFAULT_MAX_MESSAGE_BYTES;
    c->multicast_attempts = 2;
    c->multicast_wait_ms = 300;
    c->baseline_auto_adjust_ms = LATTICE_DEFAULT_BASELINE_AUTO_ADJUST_MS;
    c->restart_wait_ms = LATTICE_DEFAULT_RESTART_WAIT_MS;
}

lattice_status node_read_secret(const char *path, uint8_t **out, size_t *out_len)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        LT_LOG(LT_ERROR, "node", "cannot read --secret-file %s: %s", path, strerror(errno));
        return LATTICE_ERR_INVAL;
    }
    uint8_t *secret = lt_malloc(MAX_SECRET_BYTES);
    if (!secret) {
        fclose(f);
        return LATTICE_ERR_NOMEM;
    }
    size_t len = fread(secret, 1, MAX_SECRET_BYTES, f);
    bool more = fgetc(f) != EOF;
    fclose(f);
    /* A trailing newline is not part of the secret (echo secret > file). */
    while (len && (secret[len - 1] == '\n' || secret[len - 1] == '\r')) len--;
    if (len == 0 || more) {
        LT_LOG(LT_ERROR, "node", "--secret-file %s must hold 1..%d bytes", path, MAX_SECRET_BYTES);
        lt_free(secret);
        return LATTICE_ERR_INVAL;
    }
    *out = secret;
    *out_len = len;
    return LATTICE_OK;
}

void node_forget_secret(uint8_t *secret, size_t len)
{
    if (!secret) return;
    memset(secret, 0, len);
    lt_free(secret);
}

static void unwind(lattice_node *n)
{
    while (n->started) modules[--n->started].stop(n);
    while (n->inited) modules[--n->inited].destroy(n);
    node_forget_secret(n->secret, n->secret_len);
    lt_free(n);
}

lattice_status lattice_node_start(const lattice_config *c, lattice_node **out)
{
    *out = NULL;
    if (!c) return LATTICE_ERR_INVAL;
    lattice_node *n = lt_calloc(1, sizeof *n);
    if (!n) return LATTICE_ERR_NOMEM;
    n->cfg = *c;
    lattice_status st = c->secret_file ? node_read_secret(c->secret_file, &n->secret, &n->secret_len) : LATTICE_OK;
    for (; st == LATTICE_OK && n->inited < N_MODULES; n->inited++) {
        st = modules[n->inited].init(n);
        if (st != LATTICE_OK) LT_LOG(LT_ERROR, "node", "%s: init failed: %s", modules[n->inited].name, lattice_strerror(st));
        if (st != LATTICE_OK) break;
    }
    for (; st == LATTICE_OK && n->started < N_MODULES; n->started++) {
        st = modules[n->started].start(n);
        if (st != LATTICE_OK) LT_LOG(LT_ERROR, "node", "%s: start failed: %s", modules[n->started].name, lattice_strerror(st));
        if (st != LATTICE_OK) break;
    }
    if (st != LATTICE_OK) {
        unwind(n);
        return st;
    }
    *out = n;
    return LATTICE_OK;
}

void lattice_node_stop(lattice_node *n)
{
    if (!n) return;
    /* Serve nothing from here on: once the leave is announced, the backups
     * take over, and this node must not go on acknowledging meanwhile. */
    if (n->data) lattice_ops_fence(n->data);
    unwind(n);
}

lattice_status lattice_node_wait_joined(lattice_node *n, int timeout_ms)
{
    return lattice_discovery_wait_joined(n->discovery, timeout_ms);
}

lattice_topology *lattice_node_topology(lattice_node *n) { return lattice_discovery_topology(n->discovery); }

lattice_status lattice_node_subscribe(lattice_node *n, lattice_event_fn fn, void *ctx)
{
    return lattice_discovery_subscribe(n->discovery, fn, ctx);
}

void lattice_node_id(lattice_node *n, char *buf, size_t len) { lattice_discovery_local_id(n->discovery, buf, len); }
lattice_ops *lattice_node_ops(lattice_node *n) { return n->data; }
node_metrics *lattice_node_metrics_of(lattice_node *n) { return n->metrics; }
int lattice_node_port(lattice_node *n) { return lattice_discovery_port(n->discovery); }
void lattice_node_quorum(lattice_node *n, lattice_quorum *out) { lattice_discovery_quorum(n->discovery, out); }

lattice_status lattice_node_baseline_change(lattice_node *n, int op, const char *const *cids, size_t count,
                                            bool force, int timeout_ms, uint64_t *version, char *why,
                                            size_t why_len)
{
    return lattice_discovery_baseline_change(n->discovery, op, cids, count, force, timeout_ms, version, why,
                                             why_len);
}

lattice_status lattice_node_stats_of(lattice_node *n, const char *id, lattice_node_stats *out)
{
    return lattice_discovery_stats(n->discovery, id, out);
}

lattice_status lattice_node_member_state(lattice_node *n, const char *id, lattice_member_state *out)
{
    if (!n || !out) return LATTICE_ERR_INVAL;
    return lattice_discovery_member_state(n->discovery, id, out);
}

lattice_status lattice_inspect(const lattice_config *c, int timeout_ms, lattice_inspection **out)
{
    if (!c || !out) return LATTICE_ERR_INVAL;
    *out = NULL;
    uint8_t *secret = NULL;
    size_t len = 0;
    lattice_status st = c->secret_file ? node_read_secret(c->secret_file, &secret, &len) : LATTICE_OK;
    if (st != LATTICE_OK) return st;
    lattice_discovery_config dc = {
        .cluster = c->cluster,
        .finders = c->finders,
        .n_finders = c->n_finders,
        .secret = secret,
        .secret_len = len,
    };
    st = lattice_discovery_inspect(&dc, timeout_ms, out);
    node_forget_secret(secret, len);
    return st;
}
