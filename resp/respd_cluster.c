/*
 * respd: CLUSTER, INFO and the redirection of cluster-aware clients.  The
 * CLUSTER replies describe the live affinity of the endpoint's cache: Redis
 * slot s lives in partition lattice_slot_partition(s) - one contiguous slot
 * range per partition - whose serving owners (primary first, as this node
 * sees them: lattice_cache_partitions) are described by their RESP address
 * (the node's host and its "resp_port" attribute).  Neighbouring partitions
 * with the same owner list form one range.  A view is built at most every
 * SLOTS_CACHE_MS and whenever the topology version changed, so cluster-aware
 * clients follow joins and failures; respd_moved reads the same view.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <unistd.h>

#include "lattice/alloc.h"
#include "lattice/clock.h"
#include "lattice/metrics.h"
#include "respd_int.h"

typedef struct vnode {
    char id[64];
    char name[41];
    char ip[64];
    int port;
    int cport;                   /* its peer port (Redis's cluster bus port) */
    bool self;
} vnode;

typedef struct vrange {
    uint16_t first, last;
    uint32_t off, n;             /* owners[off .. off+n): vnode indexes, primary first */
} vrange;

struct respd_view {
    uint64_t major, minor, made_ms;
    vnode *nodes;
    size_t n_nodes;
    vrange *ranges;
    size_t n_ranges;
    uint32_t *owners;
    size_t n_owners;
    size_t slots_ok;
    int self;                    /* index in nodes, or -1 */
    uint32_t partitions;         /* 0: no partition table (then nothing is redirected) */
    int32_t *primary;            /* per partition: index in nodes of its primary, or -1 */
    uint8_t *self_role;          /* per partition: ROLE_* of this node's serving copy */
    bool primary_of_all;         /* this node is every partition's primary */
};

#define ROLE_NONE 0
#define ROLE_PRIMARY 1
#define ROLE_REPLICA 2

void respd_node_name(const char *id, char out[41])
{
    size_t n = 0;
    for (const char *p = id; *p && n < 40; p++)
        if ((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')) out[n++] = *p;
    uint64_t h = 1469598103934665603ULL;
    for (const char *p = id; *p; p++) h = (h ^ (uint8_t)*p) * 1099511628211ULL;
    while (n < 40) {
        out[n++] = "0123456789abcdef"[h & 15];
        h = (h >> 4) | (h << 60);
    }
    out[40] = 0;
}

void respd_view_free(struct respd_view *v)
{
    if (!v) return;
    lt_free(v->nodes);
    lt_free(v->ranges);
    lt_free(v->owners);
    lt_free(v->primary);
    lt_free(v->self_role);
    lt_free(v);
}

static int node_index(const struct respd_view *v, const char *id)
{
    for (size_t i = 0; i < v->n_nodes; i++)
        if (!strcmp(v->nodes[i].id, id)) return (int)i;
    return -1;
}

static void view_nodes(lattice_respd *r, struct respd_view *v, lattice_topology *t)
{
    char self[64] = "";
    lattice_node_id(r->node, self, sizeof self);
    v->self = -1;
    size_t n = t ? lattice_topology_size(t) : 0;
    v->nodes = lt_calloc(n ? n : 1, sizeof *v->nodes);
    if (!v->nodes) return;
    for (size_t i = 0; i < n; i++) {
        const lattice_member *m = lattice_topology_member(t, i);
        const char *rp = lattice_member_attr(m, "resp_port");
        if (m->role != LATTICE_ROLE_SERVER || !rp) continue;
        vnode *x = &v->nodes[v->n_nodes];
        snprintf(x->id, sizeof x->id, "%s", m->id);
        respd_node_name(m->id, x->name);
        snprintf(x->ip, sizeof x->ip, "%s", m->host ? m->host : "127.0.0.1");
        x->port = atoi(rp);
        const char *colon = m->addr ? strrchr(m->addr, ':') : NULL;
        x->cport = colon ? atoi(colon + 1) : 0;
        x->self = !strcmp(m->id, self);
        if (x->self) v->self = (int)v->n_nodes;
        v->n_nodes++;
    }
}

static void view_ranges(lattice_respd *r, struct respd_view *v)
{
    lattice_partitions_info *pi = NULL;
    if (lattice_cache_partitions(r->node, r->cache, &pi) != LATTICE_OK || !pi || !pi->partitions ||
        pi->partitions > LATTICE_KEY_SLOTS) {
        lattice_partitions_info_free(pi);
        return;
    }
    uint32_t np = pi->partitions, width = LATTICE_KEY_SLOTS / np;
    v->ranges = lt_malloc(np * sizeof *v->ranges);
    v->owners = lt_malloc((size_t)np * (pi->max_owners ? pi->max_owners : 1) * sizeof *v->owners);
    v->primary = lt_malloc(np * sizeof *v->primary);
    v->self_role = lt_calloc(np, sizeof *v->self_role);
    if (!v->ranges || !v->owners || !v->primary || !v->self_role) {
        lattice_partitions_info_free(pi);
        return;
    }
    uint32_t cur[64];
    for (uint32_t p = 0; p < np; p++) {
        uint32_t n = 0;
        v->primary[p] = -1;
        for (uint32_t k = 0; k < pi->n_owners[p] && n < 64; k++) {
            const lattice_partition_owner *ow = &pi->owners[(size_t)p * pi->max_owners + k];
            /* Serving (OWNING) owners come first; MOVING copies take no
             * reads, so they are no slot's master or replica yet, and a
             * partition with no OWNING owner is LOST (slot not served). */
            if (strcmp(ow->state, "OWNING") != 0) break;
            int ix = node_index(v, ow->node);
            if (ix >= 0) cur[n++] = (uint32_t)ix;
            else if (k == 0) break; /* the primary has no RESP address: not served here */
        }
        if (n == 0) continue;
        v->primary[p] = (int32_t)cur[0];
        for (uint32_t k = 0; k < n; k++)
            if ((int)cur[k] == v->self) v->self_role[p] = k == 0 ? ROLE_PRIMARY : ROLE_REPLICA;
        uint16_t first = (uint16_t)(p * width), last = (uint16_t)(p * width + width - 1);
        vrange *prev = v->n_ranges ? &v->ranges[v->n_ranges - 1] : NULL;
        if (prev && prev->last + 1u == first && prev->n == n && !memcmp(&v->owners[prev->off], cur, n * sizeof *cur)) {
            prev->last = last;
        } else {
            vrange *x = &v->ranges[v->n_ranges++];
            x->first = first;
            x->last = last;
            x->off = (uint32_t)v->n_owners;
            x->n = n;
            memcpy(&v->owners[v->n_owners], cur, n * sizeof *cur);
            v->n_owners += n;
        }
        v->slots_ok += width;
    }
    v->partitions = np;
    v->primary_of_all = true;
    for (uint32_t p = 0; p < np; p++) v->primary_of_all &= v->self_role[p] == ROLE_PRIMARY;
    lattice_partitions_info_free(pi);
}

/* Partitions this node was the primary of in the last view and is not in
 * the new one: its clients may route them here from a map read before, and
 * a read it serves as a replica would never tell them (respd_misrouted). */
static void note_demotions(lattice_respd *r, const struct respd_view *old, const struct respd_view *nv)
{
    if (!nv->partitions) return;
    if (r->n_demoted != nv->partitions) { /* a new partition table: nothing known about it */
        lt_free(r->demoted);
        r->demoted = lt_calloc(nv->partitions, 1);
        r->n_demoted = r->demoted ? nv->partitions : 0;
        if (!r->demoted) return;
    }
    if (!old || old->partitions != nv->partitions || !old->self_role) return;
    bool fresh = false;
    for (uint32_t p = 0; p < nv->partitions; p++) {
        if (old->self_role[p] != ROLE_PRIMARY || nv->self_role[p] == ROLE_PRIMARY) continue;
        fresh = true;
        r->demoted[p] = 1;
    }
    if (fresh) r->demote_gen++;
}

/* The current view, under view_lock (the caller unlocks). */
static struct respd_view *view_get(lattice_respd *r)
{
    pthread_mutex_lock(&r->view_lock);
    lattice_topology *t = lattice_node_topology(r->node);
    uint64_t major = t ? lattice_topology_major(t) : 0, minor = t ? lattice_topology_minor(t) : 0;
    /* On an IO thread, the clock it read after its epoll_wait (a view lives
     * SLOTS_CACHE_MS; a clock read per key command was ~1% of a node). */
    uint64_t now = respd_io_now_ms();
    struct respd_view *v = r->view;
    if (v && v->major == major && v->minor == minor && now - v->made_ms < SLOTS_CACHE_MS) {
        if (t) lattice_topology_release(t);
        return v;
    }
    struct respd_view *nv = lt_calloc(1, sizeof *nv);
    if (nv) {
        nv->major = major;
        nv->minor = minor;
        nv->made_ms = now;
        view_nodes(r, nv, t);
        if (nv->nodes) view_ranges(r, nv);
        note_demotions(r, v, nv);
        respd_view_free(r->view);
        r->view = v = nv;
    }
    if (t) lattice_topology_release(t);
    return v;
}

respd_where respd_route(lattice_respd *r, uint16_t slot, bool replica_ok, char *moved, uint32_t *gen)
{
    /* One view lookup a wake-up while this node is primary of everything
     * (one node, or one holding every slot): a topology change shows from
     * the next wake-up, and a command run here meanwhile is still routed
     * by the ops API - only a MOVED comes a wake-up late. */
    if (respd_io_all_here()) return RESPD_HERE_ALL;
    respd_where w = RESPD_HERE_UNKNOWN;
    struct respd_view *v = view_get(r);
    if (v && v->partitions && v->self >= 0 && v->primary_of_all) {
        w = RESPD_HERE_ALL;
        respd_io_note_all_here();
    } else if (v && v->partitions && v->self >= 0) {
        uint32_t p = lattice_slot_partition(slot, v->partitions);
        uint8_t role = v->self_role[p];
        if (role == ROLE_PRIMARY) {
            w = RESPD_HERE;
        } else if (role == ROLE_REPLICA && replica_ok &&
                   !(p < r->n_demoted && r->demoted[p] && v->primary[p] >= 0)) {
            w = RESPD_HERE_REPLICA;
        } else if (v->primary[p] >= 0) {
            const vnode *nd = &v->nodes[v->primary[p]];
            snprintf(moved, LATTICE_RESP_ERR_MAX, "MOVED %u %s:%d", slot, nd->ip, nd->port);
            w = role == ROLE_REPLICA && replica_ok ? RESPD_HERE_DEMOTED : RESPD_MOVED;
            if (gen) *gen = r->demote_gen;
        }
        /* No primary with an address: run here, the ops API answers
         * (CLUSTERDOWN when the partition is lost). */
    }
    pthread_mutex_unlock(&r->view_lock);
    return w;
}

uint32_t respd_partitions(lattice_respd *r)
{
    struct respd_view *v = view_get(r);
    uint32_t n = v ? v->partitions : 0;
    pthread_mutex_unlock(&r->view_lock);
    return n;
}

static void add_str(lattice_resp_out *o, const char *s) { lattice_resp_add_bulk(o, s, strlen(s)); }

static void cluster_slots(lattice_resp_out *o, const struct respd_view *v)
{
    lattice_resp_add_array(o, v->n_ranges);
    for (size_t i = 0; i < v->n_ranges; i++) {
        const vrange *x = &v->ranges[i];
        lattice_resp_add_array(o, 2 + x->n);
        lattice_resp_add_int(o, x->first);
        lattice_resp_add_int(o, x->last);
        for (uint32_t k = 0; k < x->n; k++) {
            const vnode *nd = &v->nodes[v->owners[x->off + k]];
            lattice_resp_add_array(o, 3);
            add_str(o, nd->ip);
            lattice_resp_add_int(o, nd->port);
            add_str(o, nd->name);
        }
    }
}

/* Runs of slots whose primary is node ix (merged across owner lists). */
typedef void (*run_fn)(void *ctx, uint16_t first, uint16_t last);
static size_t primary_runs(const struct respd_view *v, uint32_t ix, run_fn fn, void *ctx)
{
    size_t cnt = 0;
    for (size_t i = 0; i < v->n_ranges; i++) {
        if (v->owners[v->ranges[i].off] != ix) continue;
        uint16_t first = v->ranges[i].first, last = v->ranges[i].last;
        while (i + 1 < v->n_ranges && v->owners[v->ranges[i + 1].off] == ix && v->ranges[i + 1].first == last + 1)
            last = v->ranges[++i].last;
        if (fn) fn(ctx, first, last);
        cnt++;
    }
    return cnt;
}

typedef struct sbuf {
    char *p;
    size_t len, cap;
    bool nomem;
} sbuf;

static void sb_add(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_add(sbuf *b, const char *fmt, ...)
{
    va_list ap;
    for (;;) {
        if (b->nomem) return;
        va_start(ap, fmt);
        int n = vsnprintf(b->p ? b->p + b->len : NULL, b->p ? b->cap - b->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) return;
        if (b->p && b->len + (size_t)n < b->cap) {
            b->len += (size_t)n;
            return;
        }
        size_t nc = b->cap ? b->cap * 2 : 4096;
        while (nc < b->len + (size_t)n + 1) nc *= 2;
        char *q = lt_realloc(b->p, nc);
        if (!q) {
            b->nomem = true;
            return;
        }
        b->p = q;
        b->cap = nc;
    }
}

static void run_text(void *ctx, uint16_t first, uint16_t last)
{
    if (first == last) sb_add(ctx, " %u", first);
    else sb_add(ctx, " %u-%u", first, last);
}

static void cluster_nodes(lattice_resp_out *o, const struct respd_view *v)
{
    sbuf b = {0};
    for (size_t i = 0; i < v->n_nodes; i++) {
        const vnode *nd = &v->nodes[i];
        sb_add(&b, "%s %s:%d@%d %s - 0 0 %llu connected", nd->name, nd->ip, nd->port, nd->cport,
               nd->self ? "myself,master" : "master", (unsigned long long)v->major);
        primary_runs(v, (uint32_t)i, run_text, &b);
        sb_add(&b, "\n");
    }
    if (b.nomem) lattice_resp_add_error(o, "OOM command not allowed when used memory > 'maxmemory'.", 55);
    else lattice_resp_add_verbatim(o, "txt", b.p ? b.p : "", b.len);
    lt_free(b.p);
}

typedef struct shard_ctx {
    lattice_resp_out *o;
} shard_ctx;

static void run_ints(void *ctx, uint16_t first, uint16_t last)
{
    shard_ctx *s = ctx;
    lattice_resp_add_int(s->o, first);
    lattice_resp_add_int(s->o, last);
}

static void cluster_shards(lattice_resp_out *o, const struct respd_view *v)
{
    size_t shards = 0;
    for (size_t i = 0; i < v->n_nodes; i++) shards += primary_runs(v, (uint32_t)i, NULL, NULL) > 0;
    lattice_resp_add_array(o, shards);
    for (size_t i = 0; i < v->n_nodes; i++) {
        size_t runs = primary_runs(v, (uint32_t)i, NULL, NULL);
        if (!runs) continue;
        const vnode *nd = &v->nodes[i];
        shard_ctx sc = {o};
        lattice_resp_add_map(o, 2);
        add_str(o, "slots");
        lattice_resp_add_array(o, runs * 2);
        primary_runs(v, (uint32_t)i, run_ints, &sc);
        add_str(o, "nodes");
        lattice_resp_add_array(o, 1);
        lattice_resp_add_map(o, 7);
        add_str(o, "id");
        add_str(o, nd->name);
        add_str(o, "port");
        lattice_resp_add_int(o, nd->port);
        add_str(o, "ip");
        add_str(o, nd->ip);
        add_str(o, "endpoint");
        add_str(o, nd->ip);
        add_str(o, "role");
        add_str(o, "master");
        add_str(o, "replication-offset");
        lattice_resp_add_int(o, 0);
        add_str(o, "health");
        add_str(o, "online");
    }
}

static void cluster_info(lattice_resp_out *o, const struct respd_view *v)
{
    size_t size = 0;
    for (size_t i = 0; i < v->n_nodes; i++) size += primary_runs(v, (uint32_t)i, NULL, NULL) > 0;
    char t[1024];
    int n = snprintf(t, sizeof t,
                     "cluster_state:%s\r\ncluster_slots_assigned:%zu\r\ncluster_slots_ok:%zu\r\n"
                     "cluster_slots_pfail:0\r\ncluster_slots_fail:%zu\r\ncluster_known_nodes:%zu\r\n"
                     "cluster_size:%zu\r\ncluster_current_epoch:%llu\r\ncluster_my_epoch:%llu\r\n"
                     "cluster_stats_messages_sent:0\r\ncluster_stats_messages_received:0\r\n"
                     "total_cluster_links_buffer_limit_exceeded:0\r\n",
                     v->slots_ok == LATTICE_KEY_SLOTS ? "ok" : "fail", v->slots_ok, v->slots_ok,
                     (size_t)LATTICE_KEY_SLOTS - v->slots_ok, v->n_nodes, size, (unsigned long long)v->major,
                     (unsigned long long)v->major);
    lattice_resp_add_verbatim(o, "txt", t, (size_t)n);
}

void respd_cluster(lattice_respd *r, conn *c, lattice_resp_cmd_id id, size_t argc, const lattice_resp_arg *argv)
{
    lattice_resp_out *o = c->out;
    (void)argc;
    if (id == LATTICE_RESP_CMD_CLUSTER_KEYSLOT) {
        lattice_resp_add_int(o, lattice_key_slot(argv[2].ptr, argv[2].len));
        return;
    }
    if (id == LATTICE_RESP_CMD_CLUSTER_MYID) {
        char self[64] = "", name[41];
        lattice_node_id(r->node, self, sizeof self);
        respd_node_name(self, name);
        add_str(o, name);
        return;
    }
    struct respd_view *v = view_get(r);
    if (!v) {
        pthread_mutex_unlock(&r->view_lock);
        respd_add_status_error(o, LATTICE_ERR_NOMEM);
        return;
    }
    size_t before = lattice_resp_out_pending(o);
    switch (id) {
    case LATTICE_RESP_CMD_CLUSTER_SLOTS: cluster_slots(o, v); break;
    case LATTICE_RESP_CMD_CLUSTER_SHARDS: cluster_shards(o, v); break;
    case LATTICE_RESP_CMD_CLUSTER_NODES: cluster_nodes(o, v); break;
    case LATTICE_RESP_CMD_CLUSTER_INFO: cluster_info(o, v); break;
    default: lattice_resp_add_error(o, LATTICE_RESP_ERR_SYNTAX, strlen(LATTICE_RESP_ERR_SYNTAX)); break;
    }
    pthread_mutex_unlock(&r->view_lock);
    /* A client that reads the slot map routes by it: from now on its
     * misrouted keys get MOVED instead of being proxied. */
    if (id != LATTICE_RESP_CMD_CLUSTER_INFO) c->aware = AWARE_YES;
    (void)before;
    if (lattice_resp_out_overflowed(o)) c->closing = true;
}

static bool want(size_t argc, const lattice_resp_arg *argv, const char *section, bool dflt)
{
    if (argc < 2) return dflt;
    for (size_t i = 1; i < argc; i++) {
        size_t n = strlen(section);
        if ((argv[i].len == n && !strncasecmp(argv[i].ptr, section, n)) ||
            (argv[i].len == 3 && !strncasecmp(argv[i].ptr, "all", 3)) ||
            (argv[i].len == 8 && !strncasecmp(argv[i].ptr, "everything", 8)) ||
            (argv[i].len == 7 && !strncasecmp(argv[i].ptr, "default", 7) && dflt))
            return true;
    }
    return false;
}

static void human(char *buf, size_t len, double v)
{
    const char *u = "B";
    if (v >= 1024 * 1024 * 1024.0) v /= 1024 * 1024 * 1024.0, u = "G";
    else if (v >= 1024 * 1024.0) v /= 1024 * 1024.0, u = "M";
    else if (v >= 1024.0) v /= 1024.0, u = "K";
    snprintf(buf, len, "%.2f%s", v, u);
}

static void info_memory(lattice_respd *r, sbuf *b)
{
    /* The process's resident size is what the node reports; the data
     * region's bound is maxmemory. */
    char self[64] = "", used[32], maxh[32];
    lattice_node_stats st = {0};
    lattice_node_id(r->node, self, sizeof self);
    lattice_node_stats_of(r->node, self, &st);
    human(used, sizeof used, (double)st.rss_bytes);
    human(maxh, sizeof maxh, (double)r->cfg.maxmemory);
    sb_add(b,
           "# Memory\r\nused_memory:%llu\r\nused_memory_human:%s\r\nused_memory_rss:%llu\r\n"
           "used_memory_rss_human:%s\r\nmaxmemory:%lld\r\nmaxmemory_human:%s\r\nmaxmemory_policy:%s\r\n"
           "mem_allocator:libc\r\n\r\n",
           (unsigned long long)st.rss_bytes, used, (unsigned long long)st.rss_bytes, used, r->cfg.maxmemory, maxh,
           r->cfg.maxmemory_evicts ? "allkeys-lru" : "noeviction");
}

static void info_cpu(sbuf *b)
{
    struct rusage self, kids;
    getrusage(RUSAGE_SELF, &self);
    getrusage(RUSAGE_CHILDREN, &kids);
    sb_add(b,
           "# CPU\r\nused_cpu_sys:%ld.%06ld\r\nused_cpu_user:%ld.%06ld\r\nused_cpu_sys_children:%ld.%06ld\r\n"
           "used_cpu_user_children:%ld.%06ld\r\n\r\n",
           (long)self.ru_stime.tv_sec, (long)self.ru_stime.tv_usec, (long)self.ru_utime.tv_sec,
           (long)self.ru_utime.tv_usec, (long)kids.ru_stime.tv_sec, (long)kids.ru_stime.tv_usec,
           (long)kids.ru_utime.tv_sec, (long)kids.ru_utime.tv_usec);
}

static void info_replication(lattice_respd *r, sbuf *b)
{
    /* Every node is a primary of some partitions and a backup of others;
     * Redis has no word for that, so each says master (as CLUSTER NODES). */
    char self[64] = "", name[41];
    lattice_node_id(r->node, self, sizeof self);
    respd_node_name(self, name);
    sb_add(b,
           "# Replication\r\nrole:master\r\nconnected_slaves:0\r\nmaster_failover_state:no-failover\r\n"
           "master_replid:%s\r\nmaster_replid2:0000000000000000000000000000000000000000\r\n"
           "master_repl_offset:0\r\nsecond_repl_offset:-1\r\nrepl_backlog_active:0\r\n"
           "repl_backlog_size:1048576\r\nrepl_backlog_first_byte_offset:0\r\nrepl_backlog_histlen:0\r\n\r\n",
           name);
}

static void info_commandstats(lattice_respd *r, sbuf *b)
{
    sb_add(b, "# Commandstats\r\n");
    bool done[LATTICE_RESP_CMD_ID_COUNT_] = {false};
    for (size_t i = 0; i < lattice_resp_cmd_count(); i++) {
        const lattice_resp_cmd *rc = lattice_resp_cmd_at(i);
        lattice_resp_cmd_id id = lattice_resp_cmd_id_of(rc);
        if (id >= LATTICE_RESP_CMD_ID_COUNT_ || done[id]) continue; /* HELP: counted under the first */
        done[id] = true;
        unsigned long long calls = atomic_load(&r->cmd_calls[id]), usec = atomic_load(&r->cmd_usec[id]);
        if (!calls) continue;
        sb_add(b, "cmdstat_%s:calls=%llu,usec=%llu,usec_per_call=%.2f,rejected_calls=0,failed_calls=0\r\n",
               lattice_resp_cmd_name(rc), calls, usec, (double)usec / (double)calls);
    }
    sb_add(b, "\r\n");
}

void respd_info(lattice_respd *r, conn *c, size_t argc, const lattice_resp_arg *argv)
{
    sbuf b = {0};
    uint64_t up = (lt_mono_ms() - r->start_ms) / 1000;
    if (want(argc, argv, "server", true))
        sb_add(&b,
               "# Server\r\nredis_version:7.0.0\r\nlattice_version:%s\r\nredis_mode:cluster\r\nos:Linux\r\n"
               "process_id:%d\r\ntcp_port:%d\r\nuptime_in_seconds:%llu\r\nuptime_in_days:%llu\r\n"
               "io_threads_active:%d\r\n\r\n",
               LATTICE_VERSION, (int)getpid(), r->port, (unsigned long long)up, (unsigned long long)(up / 86400),
               r->n_io);
    if (want(argc, argv, "clients", true))
        sb_add(&b, "# Clients\r\nconnected_clients:%d\r\nmaxclients:%d\r\nblocked_clients:%d\r\n\r\n",
               atomic_load(&r->n_clients), r->cfg.max_clients, atomic_load(&r->n_blocked));
    if (want(argc, argv, "memory", true)) info_memory(r, &b);
    if (want(argc, argv, "persistence", true))
        sb_add(&b,
               "# Persistence\r\nloading:0\r\nasync_loading:0\r\nrdb_changes_since_last_save:0\r\n"
               "rdb_bgsave_in_progress:0\r\nrdb_last_bgsave_status:ok\r\naof_enabled:0\r\n"
               "aof_rewrite_in_progress:0\r\naof_last_write_status:ok\r\n\r\n");
    if (want(argc, argv, "stats", true)) {
        lattice_node_metrics *nm = lt_malloc(sizeof *nm); /* large: not on the stack */
        bool got = nm && lattice_node_metrics_get(r->node, nm) == LATTICE_OK;
        uint64_t inl = got ? nm->reads_inline : 0, here = got ? nm->ops_run_here : 0, rel = got ? nm->log_releases : 0;
        lt_free(nm);
        sb_add(&b,
               "# Stats\r\ntotal_connections_received:%llu\r\ntotal_commands_processed:%llu\r\nrejected_connections:%llu\r\n"
               "lattice_reads_inline:%llu\r\nlattice_ops_run_here:%llu\r\nlattice_wal_log_releases:%llu\r\n\r\n",
               (unsigned long long)atomic_load(&r->total_conns), (unsigned long long)atomic_load(&r->total_cmds),
               (unsigned long long)atomic_load(&r->rejected_conns), (unsigned long long)inl, (unsigned long long)here,
               (unsigned long long)rel);
    }
    if (want(argc, argv, "replication", true)) info_replication(r, &b);
    if (want(argc, argv, "cpu", true)) info_cpu(&b);
    if (want(argc, argv, "commandstats", false)) info_commandstats(r, &b);
    if (want(argc, argv, "cluster", true)) sb_add(&b, "# Cluster\r\ncluster_enabled:1\r\n\r\n");
    if (want(argc, argv, "keyspace", true)) {
        uint64_t size = 0;
        sb_add(&b, "# Keyspace\r\n");
        if (lattice_cache_size(r->node, r->cache, &size) == LATTICE_OK && size)
            sb_add(&b, "db0:keys=%llu,expires=0,avg_ttl=0\r\n", (unsigned long long)size);
        sb_add(&b, "\r\n");
    }
    if (b.nomem) respd_add_status_error(c->out, LATTICE_ERR_NOMEM);
    else lattice_resp_add_verbatim(c->out, "txt", b.p ? b.p : "", b.len >= 2 ? b.len - 2 : b.len);
    lt_free(b.p);
}
