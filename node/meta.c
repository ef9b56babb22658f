/*
 * meta: the cluster's cache metadata, this node's caches (stores, live
 * owners), stats and the internal calls of api.c (data thread only).
 *
 * Metadata = every cache's config plus its affinity base (consistent id and
 * node id of each server at the last assignment switch), versioned.  The coordinator
 * is its only writer: it starts it from its own --cache list (or a cache
 * "default"), applies CREATE/DESTROY sent by any node, pushes each new
 * version to every server and answers META_GET, which every node sends on
 * each topology change and every second.  A node applies a version only if
 * newer than its own.  Base switch: while the live servers differ from a
 * cache's base, the coordinator asks every server for its stats (on each
 * topology change and every BASE_CHECK_MS) and switches the base to the live
 * servers when the cache holds no entry anywhere, or when every live server
 * reports its MOVING partitions loaded on the same server set and base
 * (late affinity, node/rebal.c).  Otherwise serving owners are the base's owners that are alive: a
 * dead primary's first live backup serves, and a partition with none is LOST.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lattice/alloc.h"
#include "lattice/log.h"
#include "data_int.h"
#include "rebal_int.h"

bool data_is_coordinator(const lattice_data *d)
{
    return !d->client && d->self && d->coordinator[0] && strcmp(d->coordinator, d->self_id) == 0;
}

cache_def *data_cache(lattice_data *d, const char *name)
{
    if (!name || !*name) name = "default";
    for (size_t i = 0; i < d->n_caches; i++)
        if (strcmp(d->caches[i]->cfg.name, name) == 0) return d->caches[i];
    return NULL;
}

bool data_cache_frozen(const cache_def *c) { return c->frozen_until && lt_mono_ms() < c->frozen_until; }

static void freeze_all(lattice_data *d, bool on)
{
    uint64_t until = on ? lt_mono_ms() + FREEZE_MS : 0;
    for (size_t i = 0; i < d->n_caches; i++) d->caches[i]->frozen_until = until;
}

static void cache_free(cache_def *c)
{
    if (!c) return;
    rebal_cache_free(c->rb); /* before the store: supplier cursors read it */
    if (c->store) lattice_store_destroy(c->store);
    for (size_t i = 0; i < c->n_base; i++) lt_free(c->base[i]);
    lt_free(c->base);
    lattice_affinity_free(c->aff);
    lt_free(c->live);
    lattice_affinity_free(c->ideal);
    lt_free(c->ideal_live);
    lt_free(c->counter);
    lt_free(c);
}

void data_caches_free(lattice_data *d)
{
    rebal_node_free(d);
    for (size_t i = 0; i < d->n_caches; i++) cache_free(d->caches[i]);
    d->n_caches = 0;
    if (d->meta_msg) {
        for (size_t i = 0; i < d->meta_msg->n_caches; i++) lt_free(d->meta_msg->caches[i]);
        lt_free(d->meta_msg->caches);
        lt_free(d->meta_msg);
        d->meta_msg = NULL;
    }
    exec_scratch_free(&d->scratch);
    lt_free(d->live_buf);
    lt_free(d->check_buf);
    d->live_buf = d->check_buf = NULL;
}

static bool base_is_live_set(lattice_data *d, const cache_def *c);

/* A base entry is "CONSISTENT_ID NODE_ID": affinity ranks by the consistent
 * id (stable across restarts), liveness is by node id (new at every start),
 * so a server restarted on the same address holds nothing of the old base:
 * it is no serving owner until rebalance fills it (it is MOVING meanwhile),
 * and its partitions stay with the live backups that have the data. */
#define BASE_ENTRY_MAX 240
typedef char base_entry[BASE_ENTRY_MAX];

static void entry_cid(const char *e, char *cid, size_t len)
{
    const char *sp = strchr(e, ' ');
    size_t n = sp ? (size_t)(sp - e) : strlen(e);
    if (n >= len) n = len - 1;
    memcpy(cid, e, n);
    cid[n] = 0;
}

static const char *entry_node(const char *e)
{
    const char *sp = strchr(e, ' ');
    return sp ? sp + 1 : NULL;
}

/* A consistent id is the advertised "host:port": its host part, for
 * exclude_neighbors (every node computes the same from the id alone). */
static void host_of(const char *cid, char *buf, size_t len)
{
    const char *colon = strrchr(cid, ':');
    size_t n = colon ? (size_t)(colon - cid) : strlen(cid);
    if (n >= len) n = len - 1;
    memcpy(buf, cid, n);
    buf[n] = 0;
}

static size_t live_servers(lattice_data *d, base_entry *buf, char **out);

/* The ideal assignment (over the live servers) when it differs from the
 * base: its owners that do not serve a partition hold it MOVING. */
static void cache_reideal(lattice_data *d, cache_def *c)
{
    lattice_affinity_free(c->ideal);
    lt_free(c->ideal_live);
    c->ideal = NULL;
    c->ideal_live = NULL;
    if (base_is_live_set(d, c)) return;
    lattice_affinity_node an[DATA_MAX_PEERS];
    char hosts[DATA_MAX_PEERS][160];
    size_t n = 0;
    for (size_t i = 0; i < d->n_peers; i++) {
        if (!d->peers[i]->server) continue;
        host_of(d->peers[i]->cid, hosts[n], sizeof hosts[n]);
        an[n] = (lattice_affinity_node){d->peers[i]->cid, hosts[n], 0};
        n++;
    }
    lattice_affinity *a = NULL;
    peer **pl = lt_calloc(n ? n : 1, sizeof *pl);
    if (!pl || lattice_affinity_compute(an, n, &c->cfg, &a) != LATTICE_OK) {
        lt_free(pl);
        return; /* no MOVING copies this time: writes still reach every serving owner */
    }
    for (uint32_t i = 0; i < lattice_affinity_node_count(a); i++)
        pl[i] = data_peer_by_cid(d, lattice_affinity_node_id(a, i));
    c->ideal = a;
    c->ideal_live = pl;
}

/* Recomputes which affinity nodes are alive (peers of the current topology). */
static void cache_relive(lattice_data *d, cache_def *c)
{
    cache_reideal(d, c);
    uint32_t n = c->aff ? lattice_affinity_node_count(c->aff) : 0;
    for (uint32_t i = 0; i < n; i++) {
        const char *cid = lattice_affinity_node_id(c->aff, i);
        const char *node = NULL;
        for (size_t k = 0; k < c->n_base; k++) {
            char bc[160];
            entry_cid(c->base[k], bc, sizeof bc);
            if (strcmp(bc, cid) == 0) node = entry_node(c->base[k]);
        }
        peer *p = node ? data_peer_by_id(d, node) : data_peer_by_cid(d, cid);
        c->live[i] = p && p->server && strcmp(p->cid, cid) == 0 ? p : NULL;
    }
}

static lattice_status cache_set_base(lattice_data *d, cache_def *c, char *const *base, size_t n, uint64_t version)
{
    lattice_affinity_node *an = lt_calloc(n ? n : 1, sizeof *an);
    char **copy = lt_calloc(n ? n : 1, sizeof *copy);
    char (*hosts)[160] = lt_calloc(n ? n : 1, sizeof *hosts);
    char (*cids)[160] = lt_calloc(n ? n : 1, sizeof *cids);
    if (!an || !copy || !hosts || !cids) goto nomem;
    for (size_t i = 0; i < n; i++) {
        copy[i] = lt_strdup(base[i]);
        if (!copy[i]) goto nomem;
        entry_cid(copy[i], cids[i], sizeof cids[i]);
        an[i].consistent_id = cids[i];
        host_of(cids[i], hosts[i], sizeof hosts[i]);
        an[i].host = hosts[i];
    }
    lattice_affinity *aff = NULL;
    lattice_status st = lattice_affinity_compute(an, n, &c->cfg, &aff);
    lt_free(hosts);
    lt_free(cids);
    hosts = NULL;
    cids = NULL;
    if (st != LATTICE_OK) {
        for (size_t i = 0; i < n; i++) lt_free(copy[i]);
        lt_free(copy);
        lt_free(an);
        return st;
    }
    peer **live = lt_calloc(n ? n : 1, sizeof *live);
    if (!live) {
        lattice_affinity_free(aff);
        goto nomem;
    }
    for (size_t i = 0; i < c->n_base; i++) lt_free(c->base[i]);
    lt_free(c->base);
    lattice_affinity_free(c->aff);
    lt_free(c->live);
    c->base = copy;
    c->n_base = n;
    c->aff = aff;
    c->live = live;
    c->base_version = version;
    lt_free(an);
    cache_relive(d, c);
    return LATTICE_OK;
nomem:
    if (copy)
        for (size_t i = 0; i < n; i++) lt_free(copy[i]);
    lt_free(copy);
    lt_free(hosts);
    lt_free(cids);
    lt_free(an);
    return LATTICE_ERR_NOMEM;
}

static cache_def *cache_new(lattice_data *d, const lattice_cache_config *cfg)
{
    cache_def *c = lt_calloc(1, sizeof *c);
    if (!c) return NULL;
    c->cfg = *cfg;
    c->counter = lt_calloc(cfg->partitions, sizeof *c->counter);
    if (!c->counter) goto fail;
    if (!d->client) {
        lattice_store_config sc = {c->cfg.name, cfg->partitions, d->region, NULL, NULL};
        if (lattice_store_create(&sc, &c->store) != LATTICE_OK) goto fail;
        lattice_store_sweeper_start(c->store, 1000);
    }
    return c;
fail:
    cache_free(c);
    return NULL;
}

/* The live servers as base entries ("cid id") in buf (NULL: d->live_buf);
 * out[i] = buf[i].  Returns 0 when the scratch cannot be allocated. */
static size_t live_servers(lattice_data *d, base_entry *buf, char **out)
{
    if (!buf && !d->live_buf && !(d->live_buf = lt_calloc(DATA_MAX_PEERS, sizeof *d->live_buf))) return 0;
    if (!buf) buf = d->live_buf;
    size_t n = 0;
    for (size_t i = 0; i < d->n_peers; i++) {
        if (!d->peers[i]->server) continue;
        snprintf(buf[n], sizeof buf[n], "%s %s", d->peers[i]->cid, d->peers[i]->id);
        out[n] = buf[n];
        n++;
    }
    return n;
}

static bool base_is_live_set(lattice_data *d, const cache_def *c)
{
    char *srv[DATA_MAX_PEERS];
    if (!d->check_buf && !(d->check_buf = lt_calloc(DATA_MAX_PEERS, sizeof *d->check_buf))) return true;
    size_t n = live_servers(d, d->check_buf, srv);
    if (n != c->n_base) return false;
    for (size_t i = 0; i < n; i++) {
        bool found = false;
        for (size_t k = 0; k < c->n_base && !found; k++) found = strcmp(c->base[k], srv[i]) == 0;
        if (!found) return false;
    }
    return true;
}

/* Rebuilds the metadata message from the caches (after any change). */
static void meta_rebuild(lattice_data *d)
{
    if (d->meta_msg) {
        for (size_t i = 0; i < d->meta_msg->n_caches; i++) lt_free(d->meta_msg->caches[i]);
        lt_free(d->meta_msg->caches);
        lt_free(d->meta_msg);
        d->meta_msg = NULL;
    }
    Latdata__Meta *m = lt_calloc(1, sizeof *m);
    if (!m) return;
    latdata__meta__init(m);
    m->version = d->meta_version;
    m->valid = true;
    m->caches = lt_calloc(d->n_caches ? d->n_caches : 1, sizeof *m->caches);
    if (!m->caches) {
        lt_free(m);
        return;
    }
    for (size_t i = 0; i < d->n_caches; i++) {
        cache_def *c = d->caches[i];
        size_t need = lattice_cache_config_format(&c->cfg, LATTICE_CACHE_FORMAT_ALL, NULL, 0) + 1;
        Latdata__CacheDef *cd = lt_calloc(1, sizeof *cd + need);
        if (!cd) break;
        latdata__cache_def__init(cd);
        cd->spec = (char *)(cd + 1);
        lattice_cache_config_format(&c->cfg, LATTICE_CACHE_FORMAT_ALL, cd->spec, need);
        cd->base_ids = c->base;
        cd->n_base_ids = c->n_base;
        cd->base_version = c->base_version;
        m->caches[m->n_caches++] = cd;
    }
    d->meta_msg = m;
}

static void push_meta(lattice_data *d)
{
    meta_rebuild(d);
    for (size_t i = 0; i < d->n_peers; i++) {
        peer *p = d->peers[i];
        if (!p->dealer) continue;
        p->push_meta = true;
        if (!p->dirty) {
            p->dirty = true;
            d->dirty[d->n_dirty++] = p;
        }
    }
}

static lattice_status add_cache(lattice_data *d, const lattice_cache_config *cfg, char *const *base, size_t n,
                                uint64_t bv)
{
    if (d->n_caches == LATTICE_MAX_CACHES) return LATTICE_ERR_TOO_LARGE;
    cache_def *c = cache_new(d, cfg);
    if (!c) return LATTICE_ERR_NOMEM;
    lattice_status st = cache_set_base(d, c, base, n, bv);
    if (st != LATTICE_OK) {
        cache_free(c);
        return st;
    }
    d->caches[d->n_caches++] = c;
    return LATTICE_OK;
}

static void remove_cache(lattice_data *d, size_t i)
{
    cache_free(d->caches[i]);
    d->caches[i] = d->caches[--d->n_caches];
}

void data_meta_apply(lattice_data *d, const Latdata__Meta *m)
{
    if (!m->valid || (d->meta_valid && m->version <= d->meta_version)) return;
    if (data_is_coordinator(d) && d->meta_valid) return; /* we are the writer; ours is the truth */
    bool keep[LATTICE_MAX_CACHES] = {0};
    for (size_t i = 0; i < m->n_caches; i++) {
        const Latdata__CacheDef *cd = m->caches[i];
        lattice_cache_config cfg;
        char err[200];
        if (lattice_cache_config_parse_spec(&cfg, cd->spec, err, sizeof err) != LATTICE_OK) {
            LT_LOG(LT_WARN, "data", "metadata: bad cache spec '%s': %s", cd->spec, err);
            continue;
        }
        cache_def *c = data_cache(d, cfg.name);
        if (c && !lattice_cache_config_equal(&c->cfg, &cfg)) {
            for (size_t k = 0; k < d->n_caches; k++)
                if (d->caches[k] == c) remove_cache(d, k);
            c = NULL;
        }
        if (!c) {
            if (add_cache(d, &cfg, cd->base_ids, cd->n_base_ids, cd->base_version) != LATTICE_OK) continue;
            c = d->caches[d->n_caches - 1];
        } else if (c->base_version != cd->base_version) {
            cache_set_base(d, c, cd->base_ids, cd->n_base_ids, cd->base_version);
        }
        for (size_t k = 0; k < d->n_caches; k++)
            if (d->caches[k] == c) keep[k] = true;
    }
    for (size_t k = d->n_caches; k-- > 0;) {
        if (keep[k]) continue;
        LT_LOG(LT_INFO, "data", "cache %s destroyed", d->caches[k]->cfg.name);
        keep[k] = keep[d->n_caches - 1];
        remove_cache(d, k);
    }
    d->meta_version = m->version;
    d->meta_valid = true;
    freeze_all(d, false);
    meta_rebuild(d);
    LT_LOG(LT_INFO, "data", "cache metadata version %llu: %zu caches", (unsigned long long)d->meta_version,
           d->n_caches);
    rebal_on_change(d);
}

static void start_base_check(lattice_data *d);
#define BASE_CHECK_MS 300

void data_meta_on_topology(lattice_data *d)
{
    for (size_t i = 0; i < d->n_caches; i++) cache_relive(d, d->caches[i]);
    if (data_is_coordinator(d)) {
        if (!d->meta_valid) {
            char *srv[DATA_MAX_PEERS];
            size_t n = live_servers(d, NULL, srv);
            lattice_cache_config def;
            lattice_cache_config_init(&def, "default");
            const lattice_cache_config *cfgs = d->n_local_cfgs ? d->local_cfgs : &def;
            size_t nc = d->n_local_cfgs ? d->n_local_cfgs : 1;
            for (size_t i = 0; i < nc; i++) add_cache(d, &cfgs[i], srv, n, 1);
            d->meta_version = 1;
            d->meta_valid = true;
            LT_LOG(LT_INFO, "data", "coordinator: cache metadata started with %zu caches", d->n_caches);
        }
        push_meta(d);
        start_base_check(d);
    } else {
        d->last_meta_pull = 0; /* pull now */
    }
    rebal_on_change(d);
}

static void send_ctl(lattice_data *d, int kind, const char *cache, const char *value, opx *op)
{
    peer *coord = data_peer_by_id(d, d->coordinator);
    if (!coord || !coord->dealer) {
        if (op) data_retry(d, op, LATTICE_ERR_TIMEOUT);
        return;
    }
    pend *p = data_pend_new(d, P_CTL, coord);
    Latdata__Req *q = p ? data_req_new(kind, cache, NULL, 0, value, value ? strlen(value) : 0) : NULL;
    if (!q) {
        if (op) data_retry(d, op, LATTICE_ERR_TIMEOUT);
        return;
    }
    p->ctl = kind;
    p->op = op;
    q->id = p->id;
    data_send_req(d, coord, q);
}

void data_meta_tick(lattice_data *d, uint64_t now)
{
    if (d->seen_topology && data_is_coordinator(d) && d->meta_valid && now - d->last_meta_pull >= BASE_CHECK_MS) {
        /* The coordinator pulls nothing: last_meta_pull paces its base
         * checks instead (a rebalance ends long after the topology change). */
        d->last_meta_pull = now;
        start_base_check(d);
    }
    if (!d->seen_topology || data_is_coordinator(d)) return;
    if (now - d->last_meta_pull >= META_PULL_INTERVAL_MS) {
        d->last_meta_pull = now;
        send_ctl(d, CTL_META_GET, NULL, NULL, NULL);
    }
    if (d->meta_valid && !d->creates_sent && !d->client) {
        d->creates_sent = true;
        for (size_t i = 0; i < d->n_local_cfgs; i++) {
            cache_def *c = data_cache(d, d->local_cfgs[i].name);
            if (c && lattice_cache_config_equal(&c->cfg, &d->local_cfgs[i])) continue;
            if (c) {
                LT_LOG(LT_ERROR, "data", "--cache %s differs from the grid's cache of that name; the grid's is used",
                       d->local_cfgs[i].name);
                continue;
            }
            char spec[1024];
            lattice_cache_config_format(&d->local_cfgs[i], LATTICE_CACHE_FORMAT_ALL, spec, sizeof spec);
            send_ctl(d, CTL_CREATE, NULL, spec, NULL);
        }
    }
}

/* ------------------------------------------------------------- create etc. */

static lattice_status coord_create(lattice_data *d, const char *spec)
{
    lattice_cache_config cfg;
    char err[256];
    if (lattice_cache_config_parse_spec(&cfg, spec, err, sizeof err) != LATTICE_OK) return LATTICE_ERR_INVAL;
    cache_def *c = data_cache(d, cfg.name);
    if (c) return lattice_cache_config_equal(&c->cfg, &cfg) ? LATTICE_OK : LATTICE_ERR_EXISTS;
    char *srv[DATA_MAX_PEERS];
    size_t n = live_servers(d, NULL, srv);
    lattice_status st = add_cache(d, &cfg, srv, n, 1);
    if (st != LATTICE_OK) return st;
    d->meta_version++;
    push_meta(d);
    LT_LOG(LT_INFO, "data", "cache %s created (metadata version %llu)", cfg.name, (unsigned long long)d->meta_version);
    return LATTICE_OK;
}

static lattice_status coord_destroy(lattice_data *d, const char *name)
{
    for (size_t i = 0; i < d->n_caches; i++) {
        if (strcmp(d->caches[i]->cfg.name, name) != 0) continue;
        remove_cache(d, i);
        d->meta_version++;
        push_meta(d);
        LT_LOG(LT_INFO, "data", "cache %s destroyed (metadata version %llu)", name, (unsigned long long)d->meta_version);
        return LATTICE_OK;
    }
    return LATTICE_ERR_NO_CACHE;
}

/* ------------------------------------------------------------------- stats */

static Latdata__NodeCacheStats *node_stats(lattice_data *d, cache_def *c)
{
    Latdata__NodeCacheStats *s = lt_calloc(1, sizeof *s);
    if (!s) return NULL;
    latdata__node_cache_stats__init(s);
    s->name = c->cfg.name;
    for (uint32_t p = 0; c->store && p < c->cfg.partitions; p++) {
        peer *own[LATTICE_CACHE_MAX_BACKUPS + 1];
        size_t n = cache_serving_owners(c, p, own, LATTICE_CACHE_MAX_BACKUPS + 1);
        peer *mov[LATTICE_CACHE_MAX_BACKUPS + 1];
        size_t nm = cache_moving_owners(c, p, mov, LATTICE_CACHE_MAX_BACKUPS + 1);
        for (size_t i = 0; i < nm; i++) {
            if (!mov[i]->self) continue;
            s->moving_partitions++;
            s->moving_entries += lattice_store_count(c->store, p);
        }
        for (size_t i = 0; i < n; i++) {
            if (!own[i]->self) continue;
            uint64_t cnt = lattice_store_count(c->store, p);
            if (i == 0) {
                s->primary_partitions++;
                s->primary_entries += cnt;
            } else {
                s->backup_partitions++;
                s->backup_entries += cnt;
            }
        }
    }
    s->reads = c->reads;
    s->writes = c->writes;
    s->hits = c->hits;
    s->misses = c->misses;
    rebal_figures f;
    rebal_figures_of(d, c, &f);
    s->rebalance_left = f.left;
    s->rebalance_view_major = f.view;
    s->rebalance_base_version = c->base_version;
    s->rebalance_total = f.total;
    s->rebalance_entries = f.entries;
    s->rebalance_bytes = f.bytes;
    s->rebalance_elapsed_ms = f.elapsed_ms;
    s->rebalance_active = f.active;
    return s;
}

static void stats_add(stats_result *sr, const char *node, Latdata__NodeCacheStats *const *st, size_t n)
{
    stats_node *x = lt_realloc(sr->nodes, (sr->n_nodes + 1) * sizeof *x);
    if (!x) return;
    sr->nodes = x;
    stats_node *sn = &x[sr->n_nodes];
    memset(sn, 0, sizeof *sn);
    snprintf(sn->id, sizeof sn->id, "%s", node ? node : "");
    sn->caches = lt_calloc(n ? n : 1, sizeof *sn->caches);
    sn->names = lt_calloc(n ? n : 1, sizeof *sn->names);
    sn->view_major = lt_calloc(n ? n : 1, sizeof *sn->view_major);
    sn->base_version = lt_calloc(n ? n : 1, sizeof *sn->base_version);
    if (!sn->caches || !sn->names || !sn->view_major || !sn->base_version) {
        lt_free(sn->caches);
        lt_free(sn->names);
        lt_free(sn->view_major);
        lt_free(sn->base_version);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        lattice_cache_node_info *ci = &sn->caches[i];
        snprintf(ci->id, sizeof ci->id, "%s", sn->id);
        snprintf(sn->names[i], sizeof sn->names[i], "%s", st[i]->name);
        ci->primary_entries = st[i]->primary_entries;
        ci->backup_entries = st[i]->backup_entries;
        ci->primary_partitions = st[i]->primary_partitions;
        ci->backup_partitions = st[i]->backup_partitions;
        ci->reads = st[i]->reads;
        ci->writes = st[i]->writes;
        ci->hits = st[i]->hits;
        ci->misses = st[i]->misses;
        ci->moving_partitions = st[i]->moving_partitions;
        ci->moving_entries = st[i]->moving_entries;
        ci->rebalance_left = st[i]->rebalance_left;
        ci->rebalance_total = st[i]->rebalance_total;
        ci->rebalance_entries = st[i]->rebalance_entries;
        ci->rebalance_bytes = st[i]->rebalance_bytes;
        ci->rebalance_elapsed_ms = st[i]->rebalance_elapsed_ms;
        ci->rebalance_active = st[i]->rebalance_active;
        sn->view_major[i] = st[i]->rebalance_view_major;
        sn->base_version[i] = st[i]->rebalance_base_version;
    }
    sn->n = n;
    sr->n_nodes++;
}

static void finish_base_check(lattice_data *d, bcast *b)
{
    d->base_check_running = false;
    stats_result *sr = b->stats;
    bool changed = false;
    for (size_t i = 0; sr && b->sum == 0 && i < d->n_caches; i++) {
        cache_def *c = d->caches[i];
        if (base_is_live_set(d, c)) continue;
        uint64_t total = 0;
        size_t ready = 0;
        for (size_t k = 0; k < sr->n_nodes; k++)
            for (size_t j = 0; j < sr->nodes[k].n; j++) {
                const lattice_cache_node_info *ci = &sr->nodes[k].caches[j];
                if (strcmp(sr->nodes[k].names[j], c->cfg.name) != 0) continue;
                total += ci->primary_entries + ci->backup_entries;
                /* Late affinity: this server loaded every partition it
                 * holds MOVING, on the same topology and base as ours. */
                ready += ci->rebalance_left == 0 && sr->nodes[k].view_major[j] == rebal_server_view(d) &&
                         sr->nodes[k].base_version[j] == c->base_version;
            }
        char *srv[DATA_MAX_PEERS];
        size_t n = live_servers(d, NULL, srv);
        if (total && !(c->cfg.rebalance_mode != LATTICE_REBALANCE_NONE && ready == n)) continue;
        if (cache_set_base(d, c, srv, n, c->base_version + 1) == LATTICE_OK) changed = true;
    }
    /* Always a new version: its push releases every server's frozen writes. */
    freeze_all(d, false);
    d->meta_version++;
    push_meta(d);
    if (changed) {
        LT_LOG(LT_INFO, "data", "affinity base switched to the %zu live servers (metadata version %llu)",
               d->n_peers, (unsigned long long)d->meta_version);
        rebal_on_change(d);
    }
    start_base_check(d); /* the servers changed again while we counted */
    /* A cache still off the live set waits for its new owners to finish
     * loading (late affinity): let the next periodic tick (BASE_CHECK_MS)
     * check again although the server set has not changed - never at once,
     * or checks (and their write freezes) would run back to back. */
    for (size_t i = 0; i < d->n_caches && !d->base_check_running; i++)
        if (!base_is_live_set(d, d->caches[i])) d->checked_servers = 0;
}

static void stats_free(stats_result *sr)
{
    if (!sr) return;
    for (size_t i = 0; i < sr->n_nodes; i++) {
        lt_free(sr->nodes[i].caches);
        lt_free(sr->nodes[i].names);
        lt_free(sr->nodes[i].view_major);
        lt_free(sr->nodes[i].base_version);
    }
    lt_free(sr->nodes);
    lt_free(sr->cfgs);
    lt_free(sr);
}

void data_stats_result_free(stats_result *sr) { stats_free(sr); }

/* One part of a broadcast answered (rs) or gave up (rs NULL). */
void data_bcast_part(lattice_data *d, bcast *b, const Latdata__Resp *rs)
{
    if (b->kind == CTL_DIGEST) {
        rebal_digest_part(d, b, rs);
        return;
    }
    if (rs && b->kind == CTL_PART_SIZE) b->sum += rs->num;
    if (rs && b->kind == CTL_STATS && b->stats) stats_add(b->stats, rs->node, rs->stats, rs->n_stats);
    if (!rs && !b->op) b->sum = -1; /* base check: a server did not answer: do not switch */
    if (--b->remaining > 0) return;
    if (!b->op) {
        finish_base_check(d, b);
        stats_free(b->stats);
    } else {
        lattice_op_result r = {0};
        r.num = b->sum;
        if (b->kind == CTL_STATS) {
            r.value = b->stats;
            r.value_len = sizeof *b->stats;
        }
        data_complete_local(d, b->op, &r); /* the caller owns b->stats now */
    }
    lt_free(b);
}

/* Sends CTL_STATS to every server; self answers at once. */
static void start_stats(lattice_data *d, opx *op)
{
    bcast *b = lt_calloc(1, sizeof *b);
    stats_result *sr = lt_calloc(1, sizeof *sr);
    if (!b || !sr) {
        lt_free(b);
        lt_free(sr);
        if (op) {
            lattice_op_result r = {.status = LATTICE_ERR_NOMEM};
            data_complete_local(d, op, &r);
        }
        return;
    }
    b->kind = CTL_STATS;
    b->op = op;
    b->stats = sr;
    sr->cfgs = lt_calloc(d->n_caches ? d->n_caches : 1, sizeof *sr->cfgs);
    for (size_t i = 0; sr->cfgs && i < d->n_caches; i++) sr->cfgs[sr->n_caches++] = d->caches[i]->cfg;
    b->remaining = 1;
    if (!op) freeze_all(d, true);
    for (size_t i = 0; i < d->n_peers; i++) {
        peer *p = d->peers[i];
        if (!p->server) continue;
        if (p->self) {
            Latdata__NodeCacheStats *st[LATTICE_MAX_CACHES];
            size_t n = 0;
            for (size_t k = 0; k < d->n_caches; k++)
                if ((st[n] = node_stats(d, d->caches[k]))) n++;
            stats_add(sr, d->self_id, st, n);
            for (size_t k = 0; k < n; k++) lt_free(st[k]);
            continue;
        }
        if (!p->dealer) continue;
        pend *pe = data_pend_new(d, P_BCAST, p);
        Latdata__Req *q = pe ? data_req_new(CTL_STATS, NULL, NULL, 0, NULL, 0) : NULL;
        if (!q) continue;
        pe->b = b;
        q->id = pe->id;
        if (!op) q->flags = STATS_FREEZE;
        b->remaining++;
        data_send_req(d, p, q);
    }
    data_bcast_part(d, b, (const Latdata__Resp *)&(Latdata__Resp)LATDATA__RESP__INIT);
}

/* FNV-1a over the live servers' node ids (topology order). */
static uint64_t servers_hash(const lattice_data *d)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < d->n_peers; i++) {
        if (!d->peers[i]->server) continue;
        for (const char *c = d->peers[i]->id; *c; c++) h = (h ^ (uint8_t)*c) * 1099511628211ull;
        h = (h ^ 0xff) * 1099511628211ull;
    }
    return h;
}

/* Only when the set of live servers changed since the last check (a client
 * joining or leaving changes nothing an assignment depends on). */
static void start_base_check(lattice_data *d)
{
    if (d->base_check_running) return;
    uint64_t h = servers_hash(d);
    if (h == d->checked_servers) return;
    bool any = false;
    for (size_t i = 0; i < d->n_caches; i++) any |= !base_is_live_set(d, d->caches[i]);
    if (!any) return;
    d->checked_servers = h;
    d->base_check_running = true;
    start_stats(d, NULL);
}

/* ------------------------------------------------------------ serve / call */

void data_serve_ctl(lattice_data *d, const Latdata__Req *q, const origin *o)
{
    lattice_op_result r = {0};
    switch (q->kind) {
    case CTL_REPLICATE: {
        cache_def *c = d->meta_valid ? data_cache(d, q->cache) : NULL;
        r.status = c ? exec_replicate(c, q->partition, q->key.data, q->key.len, q->value.data, q->value.len,
                                      q->expire_ms, q->version, q->remove)
                     : LATTICE_ERR_NO_CACHE;
        if (r.status == LATTICE_OK && q->op_seq) {
            /* Should we become primary, a resend of this write gets this result. */
            lattice_op_result first = {(lattice_status)q->res_status, NULL, 0, q->res_num, q->res_flags};
            data_dedup_put(d, data_origin_hash(q->origin), q->op_seq, &first);
        }
        /* This copy now lacks a write its primary acknowledged (full region,
         * say): say so, without flooding the log. */
        if (r.status != LATTICE_OK && d->repl_failed++ % 1000 == 0)
            LT_LOG(LT_WARN, "data", "cache %s: a replicated write was not applied here: %s (%llu so far)", q->cache,
                   lattice_strerror(r.status), (unsigned long long)d->repl_failed);
        if (c && q->remove && r.status == LATTICE_OK)
            rebal_note_remove(c, q->partition, q->key.data, q->key.len, q->version);
        if (q->id) data_reply(d, o, &r, NULL, 0, false);
        return;
    }
    case CTL_DEMAND:
        rebal_on_demand(d, q);
        return;
    case CTL_SUPPLY:
        rebal_on_supply(d, q);
        return;
    case CTL_DIGEST:
        rebal_serve_digest(d, q, o);
        return;
    case CTL_STATS: {
        /* A base check: no write may land after we count, until the
         * coordinator's next metadata (or FREEZE_MS) releases the caches. */
        if (q->flags & STATS_FREEZE) freeze_all(d, true);
        Latdata__NodeCacheStats **st = lt_calloc(d->n_caches ? d->n_caches : 1, sizeof *st);
        size_t n = 0;
        for (size_t k = 0; st && k < d->n_caches; k++)
            if ((st[n] = node_stats(d, d->caches[k]))) n++;
        data_reply(d, o, &r, st, n, false); /* the box frees st */
        return;
    }
    case CTL_PART_SIZE: {
        cache_def *c = data_cache(d, q->cache);
        for (uint32_t k = 0; c && c->store && k < c->cfg.partitions; k++) {
            peer *own[1];
            if (cache_serving_owners(c, k, own, 1) == 1 && own[0]->self) r.num += (int64_t)lattice_store_count(c->store, k);
        }
        data_reply(d, o, &r, NULL, 0, false);
        return;
    }
    case CTL_META_GET:
        r.status = d->meta_valid ? LATTICE_OK : LATTICE_ERR_AGAIN;
        data_reply(d, o, &r, NULL, 0, d->meta_valid);
        return;
    case CTL_CREATE:
    case CTL_DESTROY: {
        if (!data_is_coordinator(d) || !d->meta_valid) {
            r.status = LATTICE_ERR_AGAIN;
        } else {
            char spec[1100];
            size_t n = q->value.len < sizeof spec - 1 ? q->value.len : sizeof spec - 1;
            memcpy(spec, q->value.data, n);
            spec[n] = 0;
            r.status = q->kind == CTL_CREATE ? coord_create(d, spec) : coord_destroy(d, spec);
        }
        data_reply(d, o, &r, NULL, 0, true);
        return;
    }
    default:
        r.status = LATTICE_ERR_INVAL;
        data_reply(d, o, &r, NULL, 0, false);
    }
}

void data_ctl_response(lattice_data *d, pend *p, const Latdata__Resp *rs)
{
    if (!p->op) return;
    if (!rs || rs->status == LATTICE_ERR_AGAIN) {
        data_retry(d, p->op, LATTICE_ERR_TIMEOUT);
        return;
    }
    lattice_op_result r = {0};
    r.status = (lattice_status)rs->status;
    data_complete_local(d, p->op, &r);
}

static void partitions_call(lattice_data *d, opx *o)
{
    lattice_op_result r = {0};
    cache_def *c = data_cache(d, o->data);
    if (!c) {
        r.status = d->meta_valid ? LATTICE_ERR_NO_CACHE : LATTICE_ERR_AGAIN;
        if (r.status == LATTICE_ERR_AGAIN) data_retry(d, o, LATTICE_ERR_TIMEOUT);
        else data_complete_local(d, o, &r);
        return;
    }
    lattice_partitions_info *pi = lt_calloc(1, sizeof *pi);
    uint32_t copies = c->aff ? lattice_affinity_copies(c->aff) : 0;
    if (c->ideal && lattice_affinity_copies(c->ideal) > copies) copies = lattice_affinity_copies(c->ideal);
    if (copies > LATTICE_CACHE_MAX_BACKUPS + 1) copies = LATTICE_CACHE_MAX_BACKUPS + 1;
    uint32_t maxo = 2 * copies; /* serving owners, then MOVING ones */
    if (pi) {
        pi->n_owners = lt_calloc(c->cfg.partitions, sizeof *pi->n_owners);
        pi->owners = lt_calloc((size_t)c->cfg.partitions * (maxo ? maxo : 1), sizeof *pi->owners);
    }
    if (!pi || !pi->n_owners || !pi->owners) {
        lattice_partitions_info_free(pi);
        r.status = LATTICE_ERR_NOMEM;
        data_complete_local(d, o, &r);
        return;
    }
    snprintf(pi->cache, sizeof pi->cache, "%s", c->cfg.name);
    pi->major = d->major;
    pi->minor = d->minor;
    pi->partitions = c->cfg.partitions;
    pi->max_owners = maxo;
    uint32_t live = 0;
    for (size_t i = 0; i < d->n_peers; i++) live += d->peers[i]->server;
    uint32_t wanted = c->cfg.mode == LATTICE_CACHE_REPLICATED ? live : c->cfg.backups + 1;
    pi->copies_wanted = wanted < live ? wanted : live;
    for (uint32_t p = 0; p < c->cfg.partitions; p++) {
        peer *own[2 * (LATTICE_CACHE_MAX_BACKUPS + 1)];
        size_t ns = cache_serving_owners(c, p, own, copies);
        size_t n = ns + cache_moving_owners(c, p, own + ns, copies);
        pi->n_owners[p] = (uint32_t)n;
        for (size_t i = 0; i < n; i++) {
            lattice_partition_owner *po = &pi->owners[(size_t)p * maxo + i];
            snprintf(po->node, sizeof po->node, "%s", own[i]->id);
            snprintf(po->consistent_id, sizeof po->consistent_id, "%s", own[i]->cid);
            po->primary = i == 0 && ns > 0;
            po->state = lattice_partition_state_name(i < ns ? LATTICE_PART_OWNING : LATTICE_PART_MOVING);
        }
    }
    r.value = pi;
    r.value_len = sizeof *pi;
    data_complete_local(d, o, &r);
}

void data_run_call(lattice_data *d, opx *o)
{
    lattice_op_result r = {0};
    if (!d->meta_valid) {
        data_retry(d, o, LATTICE_ERR_TIMEOUT);
        return;
    }
    switch (o->call) {
    case CALL_STATS: start_stats(d, o); return;
    case CALL_PARTITIONS: partitions_call(d, o); return;
    case CALL_DIGESTS: rebal_start_digests(d, o); return;
    case CALL_CREATE:
    case CALL_DESTROY:
        if (data_is_coordinator(d)) {
            r.status = o->call == CALL_CREATE ? coord_create(d, o->data) : coord_destroy(d, o->data);
            data_complete_local(d, o, &r);
        } else {
            send_ctl(d, o->call == CALL_CREATE ? CTL_CREATE : CTL_DESTROY, NULL, o->data, o);
        }
        return;
    default: r.status = LATTICE_ERR_INVAL; data_complete_local(d, o, &r);
    }
}
