/*
 * The baseline topology and the quorum (docs/CONSISTENCY.md, "Baseline and
 * quorum").
 *
 * The baseline is the set of servers, by consistent id, that counts for
 * quorum.  Every topology snapshot carries it with a version, so a node
 * always judges quorum by the baseline of the view it acts on, and a new
 * coordinator inherits the baseline of the last view it adopted.  Only the
 * coordinator changes it, always by announcing a new snapshot:
 *
 *   seed          the first server starts the grid with itself as baseline.
 *   join          a server of the topology that is not in the baseline is
 *                 added as soon as the coordinator holds quorum: a join
 *                 cannot split the grid.
 *   departure     a baseline member missing from the topology for
 *                 auto_adjust_ms (-1: never) is removed, again only with
 *                 quorum: a departure cannot be told from a partition, so
 *                 the grid waits that long before it counts without it.
 *   operator      `lattice baseline set/add/remove` (BaselineChange), which
 *                 needs quorum too unless forced: forcing is the way to go
 *                 on after most of the baseline is gone for good.
 *
 * The automatic changes go one consistent id at a time, and only once every
 * server of the topology reported the current version in a heartbeat (it
 * holds the current baseline).  With one member more or less, a strict
 * majority of the old baseline and one of the new always share a node, so
 * two sides judging by consecutive baselines cannot both hold quorum; the
 * wait keeps the baselines in use at most one change apart.  A side without
 * quorum changes nothing, so it can never vote itself a majority.
 *
 * Discovery thread, except lattice_discovery_baseline_change (any other
 * thread; it hands its request over through d->bl under bl_lock).
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "state.h"
#include "lattice/log.h"

#define BL_RESEND_MS 300

static bool present_server(const lattice_topology *t, const char *cid)
{
    for (size_t i = 0; i < t->n; i++)
        if (t->members[i].role == LATTICE_ROLE_SERVER && strcmp(t->members[i].consistent_id, cid) == 0) return true;
    return false;
}

bool ld_present_quorum(const lattice_topology *t)
{
    if (!t->n_baseline) return true;
    size_t n = 0;
    for (size_t i = 0; i < t->n_baseline; i++) n += present_server(t, t->baseline[i]);
    return n > t->n_baseline / 2;
}

bool ld_present_quorum_proto(const Latdisc__Topology *p)
{
    if (!p->n_baseline) return true;
    size_t n = 0;
    for (size_t b = 0; b < p->n_baseline; b++)
        for (size_t i = 0; i < p->n_members; i++)
            if (!p->members[i]->client && strcmp(p->members[i]->consistent_id, p->baseline[b]) == 0) {
                n++;
                break;
            }
    return n > p->n_baseline / 2;
}

bool ld_quorum_now(lattice_discovery *d, int64_t now, size_t *reachable, size_t *n)
{
    const lattice_topology *t = d->cur;
    *reachable = *n = 0;
    if (!t || d->state != ST_JOINED || d->client) return false;
    int64_t acks[LATTICE_LEASE_MAX_PEERS], coord;
    bool self_counts;
    size_t n_acks = ld_baseline_acks(d, t, d->id, acks, n, &self_counts, &coord);
    *reachable = lattice_quorum_reachable(acks, n_acks, self_counts, now, ld_lease_ms(d));
    return *reachable > *n / 2;
}

void lattice_discovery_quorum(lattice_discovery *d, lattice_quorum *q)
{
    memset(q, 0, sizeof *q);
    q->has_quorum = d->client;
    lattice_topology *t = lattice_discovery_topology(d);
    if (!t) return;
    /* Reached: a baseline server still in this node's topology.  A lease
     * lapses for a moment under load (late echoes, an overloaded node) and
     * comes back: that retries.  Quorum is lost once this side removed the
     * majority of the baseline from its view - silent for the whole
     * failure-detection timeout, as long as the other side takes to remove
     * us - and then refusing tells the client to go elsewhere. */
    q->baseline = t->n_baseline;
    for (size_t i = 0; i < t->n_baseline; i++) q->reachable += present_server(t, t->baseline[i]);
    if (!t->n_baseline) { /* a topology without a baseline: every server counts */
        for (size_t i = 0; i < t->n; i++) q->baseline += t->members[i].role == LATTICE_ROLE_SERVER;
        q->reachable = q->baseline;
    }
    q->has_quorum = d->client || q->reachable > q->baseline / 2;
    q->baseline_version = t->baseline_version;
    topo_put(t);
}

/* ---------------------------------------------------- automatic changes */

/* Every server of t reported t's version: each holds its baseline. */
static bool all_caught_up(lattice_discovery *d, const lattice_topology *t)
{
    for (size_t i = 0; i < t->n; i++) {
        const lattice_member *m = &t->members[i];
        if (m->role != LATTICE_ROLE_SERVER || strcmp(m->id, d->id) == 0) continue;
        const peer *p = find_peer(d, m->id);
        if (!p || p->hb_major != t->major || p->hb_minor != t->minor) return false;
    }
    return true;
}

static void track_absent(lattice_discovery *d, const lattice_topology *t, int64_t now)
{
    absent_cid keep[MAX_PEERS];
    size_t k = 0;
    for (size_t b = 0; b < t->n_baseline && k < MAX_PEERS; b++) {
        const char *cid = t->baseline[b];
        if (present_server(t, cid)) continue;
        int64_t since = now;
        for (size_t i = 0; i < d->n_absent; i++)
            if (strcmp(d->absent[i].cid, cid) == 0) since = d->absent[i].since_ms;
        snprintf(keep[k].cid, sizeof keep[k].cid, "%s", cid);
        keep[k++].since_ms = since;
    }
    memcpy(d->absent, keep, k * sizeof *keep);
    d->n_absent = k;
}

void ld_baseline_tick(lattice_discovery *d, int64_t now)
{
    const lattice_topology *t = d->cur;
    track_absent(d, t, now);
    size_t reach, n;
    if (!ld_quorum_now(d, now, &reach, &n) || !all_caught_up(d, t)) return;
    const char *cids[MAX_PEERS + 1];
    size_t k = 0;
    for (size_t b = 0; b < t->n_baseline && k < MAX_PEERS; b++) cids[k++] = t->baseline[b];
    for (size_t i = 0; i < t->n; i++) {
        const lattice_member *m = &t->members[i];
        if (m->role != LATTICE_ROLE_SERVER || topo_in_baseline(t, m->consistent_id)) continue;
        cids[k++] = m->consistent_id;
        LT_LOG(LT_INFO, MOD, "baseline: %s joins it (%zu servers)", m->consistent_id, k);
        ld_announce_baseline(d, cids, k);
        return;
    }
    if (d->auto_adjust_ms < 0) return;
    for (size_t i = 0; i < d->n_absent; i++) {
        if (now - d->absent[i].since_ms < d->auto_adjust_ms || k < 2) continue;
        size_t w = 0;
        for (size_t r = 0; r < k; r++)
            if (strcmp(cids[r], d->absent[i].cid) != 0) cids[w++] = cids[r];
        LT_LOG(LT_WARN, MOD, "baseline: %s has been gone for %lld ms (auto-adjust %d ms): removed, %zu servers remain",
               d->absent[i].cid, (long long)(now - d->absent[i].since_ms), d->auto_adjust_ms, w);
        ld_announce_baseline(d, cids, w);
        return;
    }
}

/* ---------------------------------------------------- operator changes */

/* The coordinator's decision on one request; *version on OK. */
static lattice_status apply_change(lattice_discovery *d, int op, char *const *req, size_t n_req, bool force,
                                   uint64_t *version, char *text, size_t text_len)
{
    const lattice_topology *t = d->cur;
    const char *cids[MAX_PEERS + BL_MAX_CIDS];
    size_t k = 0;
    text[0] = 0;
    if (op == LATTICE_BASELINE_ADD || op == LATTICE_BASELINE_REMOVE)
        for (size_t b = 0; b < t->n_baseline; b++) cids[k++] = t->baseline[b];
    for (size_t i = 0; i < n_req; i++) {
        if (op != LATTICE_BASELINE_REMOVE && !present_server(t, req[i])) {
            snprintf(text, text_len, "%.127s is not a server of the topology", req[i]);
            return LATTICE_ERR_INVAL;
        }
        if (op == LATTICE_BASELINE_REMOVE && !topo_in_baseline(t, req[i])) {
            snprintf(text, text_len, "%.127s is not in the baseline", req[i]);
            return LATTICE_ERR_INVAL;
        }
    }
    if (op == LATTICE_BASELINE_REMOVE) {
        size_t w = 0;
        for (size_t r = 0; r < k; r++) {
            bool drop = false;
            for (size_t i = 0; i < n_req && !drop; i++) drop = strcmp(cids[r], req[i]) == 0;
            if (!drop) cids[w++] = cids[r];
        }
        k = w;
    } else {
        for (size_t i = 0; i < n_req && k < MAX_PEERS + BL_MAX_CIDS; i++) cids[k++] = req[i];
    }
    if (!k) {
        snprintf(text, text_len, "the baseline cannot be empty");
        return LATTICE_ERR_INVAL;
    }
    size_t reach, n;
    if (!ld_quorum_now(d, lt_mono_ms(), &reach, &n) && !force) {
        snprintf(text, text_len, "no quorum: %zu of %zu baseline nodes reachable (force overrides: only when the "
                 "others are gone for good)", reach, n);
        return LATTICE_ERR_NO_QUORUM;
    }
    if (!ld_announce_baseline(d, cids, k)) return LATTICE_ERR_NOMEM;
    *version = d->cur->baseline_version;
    LT_LOG(LT_WARN, MOD, "baseline changed by an operator%s: %zu servers, version %llu", force ? " (forced)" : "",
           d->cur->n_baseline, (unsigned long long)*version);
    return LATTICE_OK;
}

static bool coordinating(const lattice_discovery *d)
{
    return d->state == ST_JOINED && !d->client && strcmp(d->cur->coordinator, d->id) == 0;
}

void ld_on_baseline_change(lattice_discovery *d, const Latdisc__Envelope *e, const zmq_msg_t *route)
{
    const Latdisc__BaselineChange *c = e->baseline_change;
    if (!route || d->state != ST_JOINED || !lattice_topology_find(d->cur, e->sender)) return;
    Latdisc__Envelope r;
    Latdisc__BaselineAnswer a;
    ld_env_init(d, &r);
    latdisc__baseline_answer__init(&a);
    char text[256] = "";
    a.request = c->request;
    a.text = text;
    if (!coordinating(d)) {
        a.status = LATTICE_ERR_NOT_OWNER;
        snprintf(text, sizeof text, "not the coordinator");
    } else if (c->n_consistent_ids > BL_MAX_CIDS) {
        a.status = LATTICE_ERR_TOO_LARGE;
        snprintf(text, sizeof text, "at most %d consistent ids at once", BL_MAX_CIDS);
    } else if (strcmp(d->bl_last_sender, e->sender) == 0 && d->bl_last_id == c->request) {
        a.status = LATTICE_OK; /* a resend of the change applied last */
        a.baseline_version = d->bl_last_version;
    } else {
        uint64_t v = 0;
        a.status = apply_change(d, (int)c->op, c->consistent_ids, c->n_consistent_ids, c->force, &v, text,
                                sizeof text);
        a.baseline_version = v;
        if (a.status == LATTICE_OK) {
            snprintf(d->bl_last_sender, sizeof d->bl_last_sender, "%s", e->sender);
            d->bl_last_id = c->request;
            d->bl_last_version = v;
        }
    }
    r.body_case = LATDISC__ENVELOPE__BODY_BASELINE_ANSWER;
    r.baseline_answer = &a;
    ld_send_env(d, d->router, route, &r, false);
}

static void finish(lattice_discovery *d, uint64_t id, lattice_status st, uint64_t version, const char *text)
{
    pthread_mutex_lock(&d->bl_lock);
    if (d->bl.state == BL_SENT && d->bl.id == id) {
        d->bl.state = BL_DONE;
        d->bl.status = st;
        d->bl.version = version;
        snprintf(d->bl.text, sizeof d->bl.text, "%s", text ? text : "");
        pthread_cond_broadcast(&d->bl_cv);
    }
    pthread_mutex_unlock(&d->bl_lock);
}

void ld_on_baseline_answer(lattice_discovery *d, const Latdisc__Envelope *e)
{
    const Latdisc__BaselineAnswer *a = e->baseline_answer;
    /* Another node than the coordinator answers NOT_OWNER: the request is
     * sent again to whoever coordinates then. */
    if (a->status == LATTICE_ERR_NOT_OWNER) return;
    char text[256];
    finish(d, a->request, a->status < LATTICE_STATUS_COUNT_ ? (lattice_status)a->status : LATTICE_ERR_PROTO,
           a->baseline_version, printable(a->text, text, sizeof text));
}

void ld_baseline_pump(lattice_discovery *d, int64_t now)
{
    uint64_t v;
    ssize_t rd = read(d->wake_fd, &v, sizeof v); /* the API thread's nudge (or stop's) */
    (void)rd;
    if (d->state != ST_JOINED) return;
    bl_request q;
    pthread_mutex_lock(&d->bl_lock);
    bool due = d->bl.state == BL_QUEUED || (d->bl.state == BL_SENT && now - d->bl.sent_ms >= BL_RESEND_MS);
    if (due) {
        d->bl.state = BL_SENT;
        d->bl.sent_ms = now;
        q = d->bl;
    }
    pthread_mutex_unlock(&d->bl_lock);
    if (!due) return;
    char *cids[BL_MAX_CIDS];
    for (size_t i = 0; i < q.n; i++) cids[i] = q.cids[i];
    if (coordinating(d)) {
        uint64_t version = 0;
        char text[256];
        lattice_status st = apply_change(d, q.op, cids, q.n, q.force, &version, text, sizeof text);
        finish(d, q.id, st, version, text);
        return;
    }
    const lattice_member *c = lattice_topology_find(d->cur, d->cur->coordinator);
    if (!c) return;
    Latdisc__Envelope e;
    Latdisc__BaselineChange bc;
    ld_env_init(d, &e);
    latdisc__baseline_change__init(&bc);
    bc.op = (uint32_t)q.op;
    bc.consistent_ids = cids;
    bc.n_consistent_ids = q.n;
    bc.force = q.force;
    bc.request = q.id;
    e.body_case = LATDISC__ENVELOPE__BODY_BASELINE_CHANGE;
    e.baseline_change = &bc;
    ld_send_to(d, c->addr, &e);
}

lattice_status lattice_discovery_baseline_change(lattice_discovery *d, int op, const char *const *cids, size_t n,
                                                 bool force, int timeout_ms, uint64_t *version, char *why,
                                                 size_t why_len)
{
    if (why && why_len) why[0] = 0;
    if (op < LATTICE_BASELINE_SET || op > LATTICE_BASELINE_REMOVE || (!n && op != LATTICE_BASELINE_SET) ||
        n > BL_MAX_CIDS || !d->thread_started)
        return n > BL_MAX_CIDS ? LATTICE_ERR_TOO_LARGE : LATTICE_ERR_INVAL;
    for (size_t i = 0; i < n; i++)
        if (!cids[i] || !cids[i][0] || strlen(cids[i]) >= sizeof d->bl.cids[0]) return LATTICE_ERR_INVAL;
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += timeout_ms / 1000;
    until.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&d->bl_lock);
    int rc = 0;
    while (d->bl.state != BL_IDLE && rc == 0) rc = pthread_cond_timedwait(&d->bl_cv, &d->bl_lock, &until);
    if (d->bl.state != BL_IDLE) {
        pthread_mutex_unlock(&d->bl_lock);
        return LATTICE_ERR_TIMEOUT; /* another thread's change is still in flight */
    }
    d->bl.op = op;
    d->bl.force = force;
    d->bl.id = ++d->bl_next_id ^ ((uint64_t)lt_mono_ms() << 20); /* unique across restarts of the asker */
    d->bl.n = n;
    for (size_t i = 0; i < n; i++) snprintf(d->bl.cids[i], sizeof d->bl.cids[i], "%s", cids[i]);
    d->bl.state = BL_QUEUED;
    uint64_t one = 1;
    ssize_t w = write(d->wake_fd, &one, sizeof one);
    (void)w;
    rc = 0;
    while (d->bl.state != BL_DONE && rc == 0) rc = pthread_cond_timedwait(&d->bl_cv, &d->bl_lock, &until);
    lattice_status st = d->bl.state == BL_DONE ? d->bl.status : LATTICE_ERR_TIMEOUT;
    if (st == LATTICE_OK && version) *version = d->bl.version;
    if (why && why_len) snprintf(why, why_len, "%s", d->bl.state == BL_DONE ? d->bl.text : "");
    d->bl.state = BL_IDLE;
    pthread_cond_broadcast(&d->bl_cv);
    pthread_mutex_unlock(&d->bl_lock);
    return st;
}
