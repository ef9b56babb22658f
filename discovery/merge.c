/*
 * Merging grids that formed apart (a partition that healed, a seed that
 * never heard of us).  Now and then each coordinator sends its view (Hello)
 * to the finder addresses outside its topology.  Two views with no member in
 * common are two grids, and so are two that give a member they share
 * another order each (grids that admitted each other's first nodes:
 * ld_views_conflict; such a topology is judged here, never applied); the
 * one without a quorum of its baseline present
 * dissolves into one with it - else the one with fewer servers (a tie: the
 * larger coordinator host:port) - and its members rejoin the other as new
 * nodes: the dissolved side's ids and copies, like a restarted node's, do
 * not survive.  Quorum comes first because the side holding it is the only
 * one that acknowledged writes while apart; a side that grew by joins
 * without quorum could otherwise outnumber it and make it drop them.
 * Discovery thread only.
 */

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include "state.h"
#include "lattice/log.h"

bool merge_yields(bool my_quorum, size_t my_servers, const char *my_coord_cid, bool their_quorum,
                  size_t their_servers, const char *their_coord_cid)
{
    /* Both coordinators apply this to the same facts, so exactly one side
     * yields (equal counts and equal host:port cannot both be live). */
    if (my_quorum != their_quorum) return their_quorum;
    if (their_servers != my_servers) return their_servers > my_servers;
    return strcmp(their_coord_cid, my_coord_cid) < 0;
}

static bool addr_in(const lattice_topology *t, const char *addr)
{
    for (size_t i = 0; t && i < t->n; i++)
        if (strcmp(t->members[i].addr, addr) == 0) return true;
    return false;
}

void ld_note_candidate(lattice_discovery *d, const char *addr)
{
    if (strncmp(addr, "tcp://", 6) != 0 || strlen(addr) >= sizeof d->cands[0] || addr_in(d->cur, addr)) return;
    for (size_t i = 0; i < d->n_cands; i++)
        if (strcmp(d->cands[i], addr) == 0) return;
    if (d->n_cands < sizeof d->cands / sizeof d->cands[0]) snprintf(d->cands[d->n_cands++], sizeof d->cands[0], "%s", addr);
}

static void fill_hello(lattice_discovery *d, Latdisc__Envelope *e, Latdisc__Hello *h, Latdisc__Topology *p)
{
    ld_env_init(d, e);
    latdisc__hello__init(h);
    h->view = p;
    e->body_case = LATDISC__ENVELOPE__BODY_HELLO;
    e->hello = h;
}

void ld_send_hellos(lattice_discovery *d, int64_t now)
{
    int every = ld_cfd(d) > 1000 ? ld_cfd(d) : 1000;
    if (now - d->last_hello_ms < every) return;
    d->last_hello_ms = now;
    const lattice_topology *t = d->cur;
    /* The previous round's DEALERs to non-members had a round to carry the
     * answers; drop them so a long-dead address costs nothing meanwhile. */
    for (size_t i = 0; i < d->n_conns;)
        if (!addr_in(t, d->conns[i].addr)) ld_close_conn_at(d, i);
        else i++;
    const char *addrs[MAX_STATIC + 16];
    char statics[MAX_STATIC][128];
    size_t n = 0;
    for (size_t i = 0; i < d->n_statics; i++) {
        snprintf(statics[i], sizeof statics[i], "tcp://%s:%d", d->statics[i].host, d->statics[i].port);
        if (strcmp(statics[i], d->my_addr) != 0 && !addr_in(t, statics[i])) addrs[n++] = statics[i];
    }
    for (size_t i = 0; i < d->n_cands; i++)
        if (!addr_in(t, d->cands[i])) addrs[n++] = d->cands[i];
    d->n_cands = 0;
    Latdisc__Envelope e;
    Latdisc__Hello h;
    Latdisc__Topology p;
    if (n && topo_to_proto(t, &p) == LATTICE_OK) {
        fill_hello(d, &e, &h, &p);
        ld_send_many(d, addrs, n, &e);
        topo_proto_release(&p);
    }
    if (d->mcast && d->mc_send_fd >= 0) {
        ld_send_probe(d);
    }
}

static size_t servers_in_proto(const Latdisc__Topology *p)
{
    size_t n = 0;
    for (size_t i = 0; i < p->n_members; i++) n += !p->members[i]->client;
    return n;
}

static const char *coordinator_cid_proto(const Latdisc__Topology *p)
{
    for (size_t i = 0; i < p->n_members; i++)
        if (strcmp(p->members[i]->id, p->coordinator) == 0) return p->members[i]->consistent_id;
    return NULL;
}

static void dissolve(lattice_discovery *d, const char *join_addr, const char *why)
{
    Latdisc__Envelope e;
    Latdisc__Dissolve ds;
    ld_env_init(d, &e);
    latdisc__dissolve__init(&ds);
    ds.join_addr = (char *)join_addr;
    e.body_case = LATDISC__ENVELOPE__BODY_DISSOLVE;
    e.dissolve = &ds;
    ld_send_members(d, d->cur, NULL, &e);
    char target[128];
    snprintf(target, sizeof target, "%s", join_addr);
    ld_begin_join(d, why);
    ld_join_into(d, target);
}

/* A member both views list, with another order in each.  A grid's
 * coordinators hand an id its order once, when they admit it, and a
 * coordinator that takes over continues the sequence: two views of one grid
 * agree on the order of every member they share, at any versions.  So this
 * is two grids that admitted the same nodes: servers that started grids of
 * their own at the same moment (a stall of the whole machine while they
 * joined) while the joins they had sent a moment before were still on the
 * way, and admitted each other - each the first node, order 1, of its own. */
bool ld_views_conflict(const lattice_topology *t, const Latdisc__Topology *f)
{
    for (size_t i = 0; t && i < f->n_members; i++) {
        const lattice_member *m = lattice_topology_find(t, f->members[i]->id);
        if (m && m->order != f->members[i]->order) return true;
    }
    return false;
}

void ld_on_hello(lattice_discovery *d, const Latdisc__Envelope *e, const zmq_msg_t *route)
{
    const Latdisc__Topology *f = e->hello->view;
    if (d->state != ST_JOINED || !f || !f->n_members || strcmp(e->sender, f->coordinator) != 0) return;
    const lattice_topology *t = d->cur;
    /* Any member in common: the same grid seen at another version, not two
     * - unless they disagree on its order (ld_views_conflict). */
    if (!ld_views_conflict(t, f))
        for (size_t i = 0; i < f->n_members; i++)
            if (lattice_topology_find(t, f->members[i]->id)) return;
    ld_judge_grid(d, f, route);
}

/* f, its coordinator's view, is of another grid: answer with our view (the
 * other coordinator judges the same two views), and if ours yields,
 * dissolve it into f's. */
void ld_judge_grid(lattice_discovery *d, const Latdisc__Topology *f, const zmq_msg_t *route)
{
    const lattice_topology *t = d->cur;
    const char *fcid = coordinator_cid_proto(f);
    const lattice_member *me = lattice_topology_find(t, t->coordinator);
    if (!fcid || !me) return;
    if (route) { /* answer with our view so the other coordinator can judge too */
        Latdisc__Envelope r;
        Latdisc__Hello h;
        Latdisc__Topology p;
        if (topo_to_proto(t, &p) == LATTICE_OK) {
            fill_hello(d, &r, &h, &p);
            ld_send_env(d, d->router, route, &r, false);
            topo_proto_release(&p);
        }
    }
    if (strcmp(t->coordinator, d->id) != 0 || d->client) return; /* our coordinator decides */
    size_t mine = 0;
    for (size_t i = 0; i < t->n; i++) mine += t->members[i].role == LATTICE_ROLE_SERVER;
    size_t theirs = servers_in_proto(f);
    bool my_q = ld_present_quorum(t), their_q = ld_present_quorum_proto(f);
    bool yield = merge_yields(my_q, mine, me->consistent_id, their_q, theirs, fcid);
    if (!yield) return;
    char why[512], who[128];
    snprintf(why, sizeof why, "found another grid of cluster '%.64s' (%zu servers%s, coordinator %s) while this one has %zu%s; merging into it",
             d->cluster, theirs, their_q ? ", quorum" : "", printable(fcid, who, sizeof who), mine,
             my_q ? "" : " and no quorum of its baseline");
    const char *join_addr = NULL;
    for (size_t i = 0; i < f->n_members; i++)
        if (strcmp(f->members[i]->id, f->coordinator) == 0) join_addr = f->members[i]->addr;
    if (join_addr && strncmp(join_addr, "tcp://", 6) == 0 && strlen(join_addr) < 128) dissolve(d, join_addr, why);
}

void ld_on_dissolve(lattice_discovery *d, const Latdisc__Envelope *e)
{
    if (d->state != ST_JOINED || strcmp(e->sender, d->cur->coordinator) != 0) return;
    const char *a = e->dissolve->join_addr;
    if (strncmp(a, "tcp://", 6) != 0 || strlen(a) >= 128) return;
    char target[128];
    snprintf(target, sizeof target, "%s", a);
    ld_begin_join(d, "the coordinator merges this grid into a larger one");
    ld_join_into(d, target);
}

/* A merge joins the grid it merges into, not whichever answers first: the
 * members of the dissolving grid are join targets too (begin_join keeps
 * them), and one of them may still coordinate that grid for a moment and
 * admit us into it - a second rejoin moments later, when it dissolves in
 * turn, and an incarnation in between that held copies of nothing.  So for
 * a few failure-detection periods the join asks only the merge target;
 * after that (it never answered), every known address again. */
void ld_join_into(lattice_discovery *d, const char *addr)
{
    ld_ensure_conn(d, addr, true);
    snprintf(d->merge_to, sizeof d->merge_to, "%s", addr);
    d->merge_until_ms = lt_mono_ms() + 3 * (int64_t)(ld_cfd(d) > 1000 ? ld_cfd(d) : 1000);
}

