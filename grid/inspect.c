/*
 * inspect: the data channel asked from outside the topology - what
 * `lattice caches`, `partitions`, `rebalance` and `verify` read without
 * joining, so they never move the topology version (docs/CACHES.md,
 * "Inspection").
 *
 * The asker holds an inspection's topology (discovery/inspect.c), which
 * names every server's data_addr.  It opens one data-channel connection
 * (fabric/fabric.h) per server and sends
 * the requests a client node would send, with the same MAC: META_GET to
 * every server (the coordinator's answer, or else the newest of them, is
 * the metadata), and STATS or DIGEST to every server.  The servers answer
 * as they answer any peer - the data channel never asks who is a member -
 * so nothing on them changes.  The answers are turned into the results of
 * the calls a client node makes (control.c builds the partition map from
 * the metadata exactly as for LATTICE_GRID_CALL_PARTITIONS), with no data
 * thread: the caller's thread polls until every server answered or the
 * deadline passed.  A frame failing the checks of the frame layer is
 * dropped, as on the data thread.
 */
#include <poll.h>
#include <stdio.h>
#include <string.h>

#include "base/base.h"
#include "lattice/alloc.h"
#include "lattice/clock.h"
#include "fabric/fabric.h"
#include "grid_int.h"
#include "rebal_exec.h"

#define RID_META 1     /* request ids: one connection per server, so two fixed ids do */
#define RID_ASK 2
#define AGAIN_MS 100   /* a server without metadata yet (it just started): ask again */

typedef struct server {
    lattice_meta_member *m;
    link_conn *conn;
    bool coordinator;
    bool silent;                  /* not waited for (lattice_grid_inspect.silent) */
    bool meta_ok;                 /* answered META_GET with its metadata */
    uint64_t meta_again_at;       /* answered AGAIN: resend then (0: not due) */
    Latdata__Batch *answer;       /* the batch holding the RID_ASK answer (kept until the end) */
    const Latdata__Resp *resp;
} server;

typedef struct asker {
    const lattice_grid_inspect *in;
    uint8_t key[LT_FRAME_KEY_BYTES];
    bool have_key;
    lattice_meta *meta;
    lattice_meta_member *members; /* every member of the topology */
    lattice_meta_member **mp;
    size_t n_members;
    server *s;                    /* the servers with a data address */
    size_t n;
    int kind;                     /* CTL_STATS, CTL_DIGEST or 0 (metadata only) */
    const char *cache;
} asker;

static lattice_status send_req(asker *a, server *sv, int kind, uint64_t id)
{
    Latdata__Req *q = chan_req_new(kind, a->cache, NULL, 0, NULL, 0);
    if (!q) return LATTICE_ERR_NOMEM;
    q->id = id;
    Latdata__Batch b = LATDATA__BATCH__INIT;
    b.proto = LATTICE_DATA_PROTO;
    b.reqs = &q;
    b.n_reqs = 1;
    /* Queued until the connection is up; a send it refuses all the same
     * leaves that server unanswered at the deadline. */
    lattice_status st = link_send(sv->conn, a->have_key ? a->key : NULL, &b, lt_mono_ms());
    lt_free(q);
    return st == LATTICE_ERR_NOMEM ? st : LATTICE_OK;
}

static lattice_status open_asker(asker *a, const lattice_grid_inspect *in, int kind, const char *cache)
{
    memset(a, 0, sizeof *a);
    a->in = in;
    a->kind = kind;
    a->cache = cache;
    if (in->secret) {
        lt_frame_derive_key(in->secret, in->secret_len, DATA_KEY_CONTEXT, a->key);
        a->have_key = true;
    }
    size_t nt = lattice_topology_size(in->topology);
    a->members = lt_calloc(nt ? nt : 1, sizeof *a->members);
    a->mp = lt_calloc(nt ? nt : 1, sizeof *a->mp);
    a->s = lt_calloc(nt ? nt : 1, sizeof *a->s);
    lattice_meta_config mc = {.client = true};
    if (!a->members || !a->mp || !a->s || lattice_meta_create(&mc, &a->meta) != LATTICE_OK) return LATTICE_ERR_NOMEM;
    const char *coord = lattice_topology_coordinator(in->topology);
    for (size_t i = 0; i < nt; i++) {
        const lattice_member *t = lattice_topology_member(in->topology, i);
        lattice_meta_member *m = &a->members[a->n_members];
        snprintf(m->id, sizeof m->id, "%s", t->id);
        snprintf(m->cid, sizeof m->cid, "%s", t->consistent_id);
        m->server = t->role == LATTICE_ROLE_SERVER;
        a->mp[a->n_members++] = m;
        const char *addr = lattice_member_attr(t, "data_addr");
        if (!m->server || !addr) continue;
        server *sv = &a->s[a->n];
        sv->m = m;
        sv->coordinator = coord && !strcmp(coord, t->id);
        for (size_t k = 0; k < in->n_silent; k++) sv->silent |= !strcmp(in->silent[k], t->id);
        sv->conn = link_dial(addr);
        a->n++;
        if (!sv->conn) continue; /* never answers: the deadline settles it */
        send_req(a, sv, CTL_META_GET, RID_META);
        if (kind) send_req(a, sv, kind, RID_ASK);
    }
    lattice_meta_set_members(a->meta, a->mp, a->n_members, coord);
    return a->n ? LATTICE_OK : LATTICE_ERR_TIMEOUT;
}

static void close_asker(asker *a)
{
    for (size_t i = 0; a->s && i < a->n; i++) {
        if (a->s[i].answer) chan_batch_free(a->s[i].answer);
        link_free(a->s[i].conn);
    }
    if (a->meta) lattice_meta_destroy(a->meta);
    lt_free(a->s);
    lt_free(a->mp);
    lt_free(a->members);
}

typedef struct reading {
    asker *a;
    server *sv;
} reading;

/* One frame from sv: its metadata applied, its answers noted.  A frame the
 * frame layer refuses closes the connection (that server then stays
 * unanswered). */
static bool read_one(void *arg, link_conn *c, const uint8_t *msg, size_t len, const uint8_t *mac, size_t mac_len)
{
    (void)c;
    asker *a = ((reading *)arg)->a;
    server *sv = ((reading *)arg)->sv;
    ProtobufCMessage *pm = NULL;
    lt_frame_unpack(&latdata__batch__descriptor, msg, len, mac, mac_len, a->have_key ? a->key : NULL, DATA_MAX_FRAME,
                    &pm);
    Latdata__Batch *b = (Latdata__Batch *)pm;
    if (!b) return false;
    if (b->proto != LATTICE_DATA_PROTO) {
        chan_batch_free(b);
        return false;
    }
    if (b->meta) lattice_meta_apply(a->meta, b->meta);
    bool keep = false;
    for (size_t i = 0; i < b->n_resps; i++) {
        const Latdata__Resp *rs = b->resps[i];
        if (rs->id == RID_META && rs->status == LATTICE_OK) {
            sv->meta_ok = true;
            sv->meta_again_at = 0;
        } else if (rs->id == RID_META) {
            sv->meta_again_at = lt_mono_ms() + AGAIN_MS;
        } else if (rs->id == RID_ASK && !sv->resp) {
            sv->resp = rs;
            sv->answer = b;
            keep = true;
        }
    }
    if (!keep) chan_batch_free(b);
    return true;
}

/* The metadata is known once the coordinator (its only writer) gave it, or
 * every server did; the question once every server answered it.  Silent
 * servers are not waited for: one that answers all the same counts. */
static bool done(const asker *a)
{
    bool meta = false, all_meta = true, any_meta = false, all = true;
    for (size_t i = 0; i < a->n; i++) {
        const server *sv = &a->s[i];
        meta |= sv->coordinator && sv->meta_ok;
        any_meta |= sv->meta_ok;
        all_meta &= sv->meta_ok || sv->silent;
        all &= !a->kind || sv->resp != NULL || sv->silent;
    }
    return (meta || (all_meta && any_meta)) && all;
}

/* Asks and waits until done() or the deadline. */
static void run(asker *a)
{
    struct pollfd *fds = lt_calloc(a->n, sizeof *fds);
    size_t *which = lt_calloc(a->n, sizeof *which);
    if (!fds || !which) goto out;
    uint64_t until = lt_mono_ms() + (uint64_t)(a->in->timeout_ms > 0 ? a->in->timeout_ms : 1);
    while (!done(a) && lt_mono_ms() < until) {
        uint64_t now = lt_mono_ms();
        nfds_t n = 0;
        for (size_t i = 0; i < a->n; i++) {
            server *sv = &a->s[i];
            if (!sv->conn) continue;
            if (sv->meta_again_at && now >= sv->meta_again_at) {
                sv->meta_again_at = 0;
                send_req(a, sv, CTL_META_GET, RID_META);
            }
            short ev = link_events(sv->conn);
            if (!ev) continue;
            fds[n] = (struct pollfd){sv->conn->fd, ev, 0};
            which[n++] = i;
        }
        if (poll(fds, n, 20) <= 0) continue;
        for (nfds_t k = 0; k < n; k++) {
            if (!fds[k].revents) continue;
            reading r = {a, &a->s[which[k]]};
            link_service(r.sv->conn, fds[k].revents, DATA_MAX_FRAME, 64, read_one, &r, lt_mono_ms());
        }
    }
out:
    lt_free(fds);
    lt_free(which);
}

lattice_status lattice_grid_inspect_stats(const lattice_grid_inspect *in, lattice_grid_stats **out)
{
    *out = NULL;
    asker a;
    lattice_status st = open_asker(&a, in, CTL_STATS, NULL);
    if (st == LATTICE_OK) run(&a);
    lattice_grid_stats *sr = st == LATTICE_OK ? lt_calloc(1, sizeof *sr) : NULL;
    if (st == LATTICE_OK && !lattice_meta_valid(a.meta)) st = LATTICE_ERR_TIMEOUT;
    else if (st == LATTICE_OK && !sr) st = LATTICE_ERR_NOMEM;
    if (st == LATTICE_OK) {
        size_t nc = lattice_meta_cache_count(a.meta);
        sr->cfgs = lt_calloc(nc ? nc : 1, sizeof *sr->cfgs);
        for (size_t i = 0; sr->cfgs && i < nc; i++) sr->cfgs[sr->n_caches++] = lattice_meta_cache_at(a.meta, i)->cfg;
        /* In topology order; a server that did not answer in time is left
         * out, as a client node leaves out one that left. */
        for (size_t i = 0; i < a.n; i++) {
            const Latdata__Resp *rs = a.s[i].resp;
            if (rs && rs->status == LATTICE_OK) control_stats_add(sr, a.s[i].m->id, rs->stats, rs->n_stats);
        }
        *out = sr;
    } else {
        lt_free(sr);
    }
    close_asker(&a);
    return st;
}

lattice_status lattice_grid_inspect_partitions(const lattice_grid_inspect *in, const char *cache,
                                               lattice_partitions_info **out)
{
    *out = NULL;
    asker a;
    lattice_status st = open_asker(&a, in, 0, NULL);
    if (st == LATTICE_OK) {
        run(&a);
        const lattice_topology *t = in->topology;
        st = control_partitions_info(a.meta, cache, (uint32_t)a.n, lattice_topology_major(t),
                                     lattice_topology_minor(t), out);
        if (st == LATTICE_ERR_AGAIN) st = LATTICE_ERR_TIMEOUT; /* no server gave its metadata */
    }
    close_asker(&a);
    return st;
}

lattice_status lattice_grid_inspect_digests(const lattice_grid_inspect *in, const char *cache,
                                            lattice_grid_digests **out)
{
    *out = NULL;
    asker a;
    lattice_status st = open_asker(&a, in, CTL_DIGEST, cache);
    if (st == LATTICE_OK) run(&a);
    if (st == LATTICE_OK && !lattice_meta_valid(a.meta)) st = LATTICE_ERR_TIMEOUT;
    else if (st == LATTICE_OK && !lattice_meta_cache_of(a.meta, cache)) st = LATTICE_ERR_NO_CACHE;
    lattice_grid_digests *dr = st == LATTICE_OK ? lt_calloc(1, sizeof *dr) : NULL;
    if (st == LATTICE_OK && !dr) st = LATTICE_ERR_NOMEM;
    /* Every server's copies, or no answer: a missing one would hide its
     * conflicts (as for a client node, TIMEOUT). */
    for (size_t i = 0; st == LATTICE_OK && i < a.n; i++) {
        const Latdata__Resp *rs = a.s[i].resp;
        if (!rs || rs->status != LATTICE_OK) st = LATTICE_ERR_TIMEOUT;
        else if (!rebal_unpack_digests(dr, a.s[i].m->id, rs->value.data, rs->value.len)) st = LATTICE_ERR_TIMEOUT;
    }
    if (st == LATTICE_OK) {
        *out = dr;
    } else if (dr) {
        lt_free(dr->d);
        lt_free(dr);
    }
    close_asker(&a);
    return st;
}
