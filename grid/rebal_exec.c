/*
 * rebal_exec: the rebalance executor of the running grid (data thread only).
 *
 * Demander side, per cache (lattice_meta_cache.rb): after every topology or metadata
 * change this node's MOVING partitions are the ideal owners' partitions it
 * does not serve (lattice_meta_moving_owners).  After rebalance_delay_ms it loads
 * every MOVING partition not loaded yet: partitions are grouped by their
 * supplier list (the live serving owners, primary first - the primary applied
 * every acknowledged write before replicating it, so it supplies nothing a
 * remove already took away) and each group is one demand session with its
 * own applier and demander machine.  A partition whose last batch is stored
 * is "loaded": it stays MOVING (writes keep reaching it) until the
 * coordinator, seeing every server report no partition left for the cache on
 * the current topology and base, switches the affinity base; then this node
 * serves it and the old owners evict theirs.  A change mid-rebalance drops
 * the sessions (loaded partitions stay loaded) and plans again.
 *
 * Supplier side (lattice_ops.rb_sups): one supplier machine per incoming
 * demand session, keyed by (demander node, cache, rebalance id, session
 * group); dropped when done, when its demander leaves, or after a minute of
 * silence.  Demands and supplies travel as CTL_DEMAND / CTL_SUPPLY requests
 * on the data channel (key = sender node id, value = the encoded message);
 * flow control (prefetch window, acks, throttle) bounds what is in flight.
 * A demand from a server this data thread has no peer for yet (a newcomer
 * that learnt the grid from discovery first) is kept until a tick knows it
 * (rb_parked, PARK_MS), not dropped.
 */
#include <stdio.h>
#include <string.h>

#include "lattice/alloc.h"
#include "lattice/log.h"
#include "rebal_exec.h"
#include "rebalance/rebalance.h"

#define SESSION_SHIFT 16u        /* session = (group + 1) << 16, + 1 per supplier switch */
#define SUPPLIER_IDLE_MS 60000u  /* a supplier session with no demand for this long ends */
#define REPLAN_MS 1000u          /* a failed session: plan again after this */
#define PARK_MS 5000u            /* a demand from a server not in our topology yet: kept this long */
#define PARK_MAX 64u             /* ... this many at most (a stranger's demands cannot grow it) */
#define MAX_OWNERS (LATTICE_CACHE_MAX_BACKUPS + 1)

typedef struct rsess {
    lattice_rebalance_demander *dm;
    lattice_rebalance_applier *ap;
    char (*sup)[64];             /* supplier node ids, preference order */
    uint32_t nsup;
    uint32_t *parts;
    size_t nparts;
    uint64_t deadline;
    bool done;
    lattice_rebalance_delta_base *bases; /* delta bases offered (kept copies), nbases */
    size_t nbases;
} rsess;

struct rebal_cache {
    lattice_ops *d;
    lattice_meta_cache *c;
    uint32_t parts;
    /* This node's MOVING copy of each partition: MOVING while it is to be
     * loaded, OWNING once loaded (complete; still MOVING to the grid until the
     * base switch), LOST when no live copy could supply it, EVICTED when p is
     * not in this node's MOVING set (it serves p, or holds no copy). */
    lattice_partition_state *copy;
    uint64_t view, base_version;         /* server view and base the MOVING set is for */
    uint64_t rebalance_id;
    uint64_t plan_at;            /* 0: none scheduled */
    rsess *s;
    size_t ns;
    lattice_rebalance_progress prog;
    uint64_t started, finished;
    unsigned logged_quarter;
    bool active;
    uint64_t stale;              /* supplies ignored as stale */
    uint64_t since_creation_checked; /* the base since_first_write last ran for */
};

typedef struct rebal_sup {
    struct rebal_sup *next;
    char dem[64];
    lattice_meta_cache *c;
    lattice_rebalance_ids ids;
    lattice_rebalance_supplier *sp;
    uint64_t deadline, last_ms;
} rsup;

/* ------------------------------------------------------------------ helpers */

static void sender_of(const Latdata__Req *q, char *id)
{
    size_t n = q->key.len < 63 ? q->key.len : 63;
    memcpy(id, q->key.data, n);
    id[n] = 0;
}

static bool self_among(lattice_meta_member *const *own, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (own[i] && own[i]->self) return true;
    return false;
}

/* The live server restoring lost partition p from a kept copy (salvage.c),
 * or NULL. */
static peer *restorer_of(lattice_ops *d, const lattice_meta_cache *c, uint32_t p)
{
    const lattice_meta_lost *l = c->n_lost ? lattice_meta_lost_of(c, p) : NULL;
    peer *r = l && l->restorer[0] ? chan_peer_by_id(d, l->restorer) : NULL;
    return r && r->m.server ? r : NULL;
}

/* Lost partitions this node holds MOVING whose restorer the coordinator
 * named: this node, which moves its kept copy in (the copy is loaded), or
 * another, which supplies it (a LOST copy can be planned again).  True
 * when a copy changed state. */
static bool take_restores(lattice_ops *d, lattice_meta_cache *c, struct rebal_cache *rc)
{
    bool changed = false;
    uint32_t restored = 0;
    uint64_t entries = 0;
    bool quorum = ops_quorum(d);
    for (size_t i = 0; i < c->n_lost; i++) {
        uint32_t p = c->lost[i].partition;
        if (p >= rc->parts || rc->copy[p] == LATTICE_PART_OWNING) continue;
        peer *r = restorer_of(d, c, p);
        if (!r) continue;
        /* The restorer need not be an owner-to-be (EVICTED here): it then
         * holds the copy only to supply it (recompute keeps it). */
        if (r->m.self) {
            if (!salvage_restore(d, c, p, quorum, &entries)) continue;
            rc->copy[p] = LATTICE_PART_OWNING;
            restored++;
            changed = true;
        } else if (rc->copy[p] == LATTICE_PART_LOST) {
            rc->copy[p] = LATTICE_PART_MOVING;
            changed = true;
        }
    }
    if (restored)
        LT_LOG(LT_INFO, "rebalance", "cache %s: %u lost partitions restored from the copies kept by incarnation %s (%llu entries)",
               c->cfg.name, restored, d->grid->salvage_id, (unsigned long long)entries);
    return changed;
}

/* `lattice cache reset-lost` at this base: a LOST copy is taken as loaded,
 * empty (the operator gave its data up), so the base can switch. */
static bool reset_applies(const lattice_meta_cache *c) { return c->lost_reset && c->lost_reset == c->base_version; }

/* The update counter a given-up partition's numbering starts again from:
 * above every counter its lost copies held (a copy some node kept through
 * the loss - a data directory, a paused process - has a delta mark in the
 * old numbering, and a new write must never fall below it: a delta from
 * that mark would skip it).  Every owner-to-be applies the same floor, so
 * the copies' counters agree; a numbering reaches 2^40 in no partition. */
static uint64_t reset_floor(const lattice_meta_cache *c) { return c->lost_reset << 40; }

static uint32_t give_up_lost(lattice_meta_cache *c, struct rebal_cache *rc)
{
    uint32_t n = 0;
    for (uint32_t p = 0; reset_applies(c) && p < rc->parts; p++) {
        if (rc->copy[p] != LATTICE_PART_LOST) continue;
        fast_mark(c, p);
        lattice_store_clear(c->store, p);
        if (c->counter[p] < reset_floor(c)) c->counter[p] = reset_floor(c);
        rc->copy[p] = LATTICE_PART_OWNING;
        n++;
    }
    if (n) LT_LOG(LT_WARN, "rebalance", "cache %s: %u LOST partitions taken as empty (reset-lost)", c->cfg.name, n);
    return n;
}

static void send_msgs(lattice_ops *d, int kind, const char *cache, peer *const *to_peer,
                      lattice_rebalance_out *out)
{
    for (size_t i = 0; i < out->count; i++) {
        peer *p = to_peer[out->msgs[i].to];
        if (!p || !p->dealer) continue;
        Latdata__Req *q = chan_req_new(kind, cache, d->self_id, strlen(d->self_id), out->msgs[i].buf,
                                       out->msgs[i].len);
        if (q) chan_send(d, p, q);
    }
    lattice_rebalance_out_clear(out);
}

static void bases_free(rsess *s)
{
    lattice_rebalance_demand m = {.deltas = s->bases, .delta_count = s->nbases};
    lattice_rebalance_demand_clear(&m);
    s->bases = NULL;
    s->nbases = 0;
}

static void sess_free(rsess *s)
{
    bases_free(s);
    lattice_rebalance_demander_free(s->dm);
    lattice_rebalance_applier_free(s->ap);
    lt_free(s->sup);
    lt_free(s->parts);
    memset(s, 0, sizeof *s);
}

static void drop_sessions(struct rebal_cache *rc)
{
    for (size_t i = 0; i < rc->ns; i++) sess_free(&rc->s[i]);
    lt_free(rc->s);
    rc->s = NULL;
    rc->ns = 0;
    rc->active = false;
}

static void sup_free(rsup *r)
{
    lattice_rebalance_supplier_free(r->sp);
    lt_free(r);
}

/* Drops supplier sessions matching pred (cache c, or every one when c is NULL). */
static void drop_sups_of(lattice_ops *d, const lattice_meta_cache *c)
{
    for (rsup **pp = &d->grid->rb_sups; *pp;) {
        rsup *r = *pp;
        if (c && r->c != c) {
            pp = &r->next;
            continue;
        }
        *pp = r->next;
        sup_free(r);
    }
}

void rebal_cache_free(struct rebal_cache *rc)
{
    if (!rc) return;
    drop_sessions(rc);
    drop_sups_of(rc->d, rc->c); /* their batchers read this cache's store */
    lt_free(rc->copy);
    lt_free(rc);
}

void rebal_cache_gone(void *arg, lattice_meta_cache *c)
{
    (void)arg;
    rebal_cache_free(c->rb);
    c->rb = NULL;
}

/* A demand whose sender this data thread does not know yet: its topology
 * check runs every tick, and a newcomer's first demand can arrive before
 * it (the newcomer learnt the grid from discovery first).  Dropped, the
 * demander would hear nothing for its whole timeout (10 s) and its first
 * rebalance would make no progress; kept, it is served at the first tick
 * that knows the sender. */
typedef struct rebal_parked {
    struct rebal_parked *next;
    Latdata__Req *q;             /* own copy (chan_req_new) */
    uint64_t until;
} rebal_parked;

static void park_demand(lattice_ops *d, const Latdata__Req *q, const char *from_id)
{
    if (d->grid->n_rb_parked >= PARK_MAX) return;
    rebal_parked *k = lt_calloc(1, sizeof *k);
    if (!k) return;
    k->q = chan_req_new(CTL_DEMAND, q->cache, from_id, strlen(from_id), q->value.data, q->value.len);
    if (!k->q) {
        lt_free(k);
        return;
    }
    k->until = lt_mono_ms() + PARK_MS;
    rebal_parked **tail = &d->grid->rb_parked; /* arrival order: a session's demands keep theirs */
    while (*tail) tail = &(*tail)->next;
    *tail = k;
    d->grid->n_rb_parked++;
}

/* Serves the parked demands whose sender is known now (in arrival order);
 * drops expired ones; keeps the rest. */
static void unpark_demands(lattice_ops *d, uint64_t now)
{
    rebal_parked *all = d->grid->rb_parked, **keep = &d->grid->rb_parked;
    d->grid->rb_parked = NULL;
    d->grid->n_rb_parked = 0;
    for (rebal_parked *k = all, *next; k; k = next) {
        next = k->next;
        char from_id[64];
        sender_of(k->q, from_id);
        if (now < k->until && !chan_peer_by_id(d, from_id)) {
            k->next = NULL;
            *keep = k;
            keep = &k->next;
            d->grid->n_rb_parked++;
            continue;
        }
        if (now < k->until) {
            LT_LOG(LT_INFO, "rebalance", "cache %s: a demand from %s served once the topology named it (%llu ms later)",
                   k->q->cache, from_id, (unsigned long long)(now + PARK_MS - k->until));
            rebal_on_demand(d, k->q); /* the sender is known: it cannot park again */
        }
        lt_free(k->q);
        lt_free(k);
    }
}

void rebal_node_free(lattice_ops *d)
{
    drop_sups_of(d, NULL);
    for (rebal_parked *k = d->grid->rb_parked, *next; k; k = next) {
        next = k->next;
        lt_free(k->q);
        lt_free(k);
    }
    d->grid->rb_parked = NULL;
    d->grid->n_rb_parked = 0;
}

static struct rebal_cache *ensure(lattice_ops *d, lattice_meta_cache *c)
{
    if (c->rb) return c->rb;
    struct rebal_cache *rc = lt_calloc(1, sizeof *rc);
    if (!rc) return NULL;
    rc->d = d;
    rc->c = c;
    rc->parts = c->cfg.partitions;
    rc->copy = lt_malloc(rc->parts * sizeof *rc->copy);
    if (!rc->copy) {
        lt_free(rc);
        return NULL;
    }
    for (uint32_t p = 0; p < rc->parts; p++) rc->copy[p] = LATTICE_PART_EVICTED;
    c->rb = rc;
    return rc;
}

static uint32_t left_of(const struct rebal_cache *rc)
{
    uint32_t n = 0;
    for (uint32_t p = 0; p < rc->parts; p++) n += rc->copy[p] == LATTICE_PART_MOVING || rc->copy[p] == LATTICE_PART_LOST;
    return n;
}

/* MOVING partitions a plan can still load (not loaded, not LOST). */
static uint32_t loadable_of(const struct rebal_cache *rc)
{
    uint32_t n = 0;
    for (uint32_t p = 0; p < rc->parts; p++) n += rc->copy[p] == LATTICE_PART_MOVING;
    return n;
}

/* ------------------------------------------------------------ on change */

/* Recomputes the MOVING set; evicts copies neither served nor owned next.
 * Returns true when the MOVING set changed. */
static bool recompute(lattice_meta_cache *c, struct rebal_cache *rc)
{
    bool changed = false;
    uint32_t evicted = 0;
    for (uint32_t p = 0; p < rc->parts; p++) {
        lattice_meta_member *own[MAX_OWNERS];
        size_t ns = lattice_meta_serving_owners(c, p, own, MAX_OWNERS);
        if (self_among(own, ns)) {
            rc->copy[p] = LATTICE_PART_EVICTED; /* served: not ours to load */
            continue;
        }
        size_t nm = lattice_meta_moving_owners(c, p, own, MAX_OWNERS);
        if (self_among(own, nm)) {
            if (rc->copy[p] == LATTICE_PART_EVICTED) {
                changed = true;
                rc->copy[p] = LATTICE_PART_MOVING;
            }
            continue;
        }
        /* The restorer of a lost partition that is none of its owners-to-be
         * holds the restored copy until the record ends: the one copy its
         * owners-to-be load from (take_restores). */
        if (rc->copy[p] == LATTICE_PART_OWNING && restorer_of(rc->d, c, p) && restorer_of(rc->d, c, p)->m.self) continue;
        /* Neither serving nor becoming an owner: RENTING -> EVICTED. */
        if (rc->copy[p] != LATTICE_PART_EVICTED) changed = true;
        rc->copy[p] = LATTICE_PART_EVICTED;
        /* A whole-grid restart keeps every copy until the copies are equal:
         * the kept one may be here on a node that owns nothing now (back
         * under a new id) or owns it in no base (restart.c); end_restoring
         * drops them. */
        if (c->restoring) continue;
        fast_mark(c, p);
        if (lattice_store_count(c->store, p) && lattice_store_clear(c->store, p) == LATTICE_OK) evicted++;
    }
    if (evicted) {
        LT_LOG(LT_INFO, "rebalance", "cache %s: %u partitions evicted (pages freed)", c->cfg.name, evicted);
        rc->d->heap_freed = true; /* their indexes and histories */
    }
    return changed;
}

/* A copy this node serves that has had every write of its partition - it
 * served the partition before its first write - has a history complete
 * from 0 (docs/REBALANCE.md §9); other copies become complete by a load.
 * Served with no write applied and nothing stored: every write the grid
 * acknowledged reached every serving copy (full_sync), so none was.  Not
 * only under the cache's first base: servers that form a grid together
 * join the base of an empty cache at a switch, without a load, and a
 * paused one must still come back as a delta (docs/PERSISTENCE.md). */
static void since_first_write(lattice_meta_cache *c, struct rebal_cache *rc)
{
    for (uint32_t p = 0; p < rc->parts; p++) {
        if (c->counter[p] != 0 || lattice_store_count(c->store, p)) continue;
        lattice_meta_member *own[MAX_OWNERS];
        size_t ns = lattice_meta_serving_owners(c, p, own, MAX_OWNERS);
        if (!self_among(own, ns)) continue;
        lattice_store_history_stat hs;
        lattice_store_history_info(c->store, p, &hs);
        if (!hs.valid) lattice_store_history_valid_from(c->store, p, 0);
    }
}

void rebal_on_change(lattice_ops *d)
{
    if (d->client) return;
    uint64_t now = lt_mono_ms();
    for (size_t i = 0; i < lattice_meta_cache_count(d->meta); i++) {
        lattice_meta_cache *c = lattice_meta_cache_at(d->meta, i);
        if (!c->store) continue;
        struct rebal_cache *rc = ensure(d, c);
        if (!rc) continue;
        if (lattice_meta_valid(d->meta) && rc->since_creation_checked != c->base_version) {
            rc->since_creation_checked = c->base_version;
            since_first_write(c, rc);
        }
        bool changed = recompute(c, rc);
        changed |= take_restores(d, c, rc);
        changed |= give_up_lost(c, rc) > 0;
        uint64_t view = lattice_meta_server_view(d->meta);
        bool new_view = rc->view != view || rc->base_version != c->base_version;
        rc->view = view;
        rc->base_version = c->base_version;
        if (new_view)
            for (uint32_t p = 0; p < rc->parts; p++)
                if (rc->copy[p] == LATTICE_PART_LOST) rc->copy[p] = LATTICE_PART_MOVING; /* a new server set may hold a copy */
        uint32_t left = loadable_of(rc);
        if (!changed && !new_view && (rc->active || rc->plan_at)) continue;
        if (rc->active) {
            LT_LOG(LT_INFO, "rebalance", "cache %s: topology changed mid-rebalance; planning again (%u partitions left)",
                   c->cfg.name, left);
            drop_sessions(rc);
        }
        rc->plan_at = 0;
        if (!left || c->cfg.rebalance_mode == LATTICE_REBALANCE_NONE) continue;
        rc->rebalance_id++;
        rc->plan_at = now + c->cfg.rebalance_delay_ms + 1;
    }
}

/* ------------------------------------------------------------ demander */

static peer *peers_of(lattice_ops *d, const rsess *s, peer **out)
{
    for (uint32_t i = 0; i < s->nsup; i++) out[i] = chan_peer_by_id(d, s->sup[i]);
    return out[0];
}

static void sess_send(lattice_ops *d, lattice_meta_cache *c, rsess *s, lattice_rebalance_out *out)
{
    peer *to[MAX_OWNERS];
    peers_of(d, s, to);
    s->deadline = out->deadline;
    send_msgs(d, CTL_DEMAND, c->cfg.name, to, out);
}

static rsess *session_new(struct rebal_cache *rc, peer *const *srv, const uint32_t *sup, uint32_t n)
{
    rsess *x = lt_realloc(rc->s, (rc->ns + 1) * sizeof *x);
    if (!x) return NULL;
    rc->s = x;
    rsess *s = &x[rc->ns];
    memset(s, 0, sizeof *s);
    s->sup = lt_calloc(n ? n : 1, sizeof *s->sup);
    s->parts = lt_calloc(rc->parts, sizeof *s->parts);
    if (!s->sup || !s->parts) {
        lt_free(s->sup);
        lt_free(s->parts);
        return NULL;
    }
    for (uint32_t i = 0; i < n; i++) snprintf(s->sup[i], sizeof s->sup[i], "%s", srv[sup[i]]->m.id);
    s->nsup = n;
    rc->ns++;
    return s;
}

/* The planner's facts as this node knows them from the metadata: every live
 * server's copy of every partition - serving owners OWNING, moving owners
 * MOVING, this node's loaded copies OWNING, the rest EVICTED.  Update
 * counters are not exchanged, so every OWNING copy counts as current and
 * the serving primary is the preferred supplier (it applied every
 * acknowledged write before replicating it: what it supplies never brings
 * back a key a remove already took away).  Every node computes the plan of
 * the whole grid from the same metadata and executes only its own tasks, so
 * no plan has to be exchanged.  *self is this node's index in srv. */
static lattice_rebalance_plan *plan_of(lattice_ops *d, lattice_meta_cache *c, struct rebal_cache *rc, peer **srv,
                                       size_t *n_srv, uint32_t *self)
{
    const char *ids[DATA_MAX_PEERS];
    uint8_t live[DATA_MAX_PEERS];
    size_t n = 0;
    *self = UINT32_MAX;
    for (size_t i = 0; i < d->n_peers; i++) {
        if (!d->peers[i]->m.server) continue;
        if (d->peers[i]->m.self) *self = (uint32_t)n;
        srv[n] = d->peers[i];
        ids[n] = d->peers[i]->m.cid;
        live[n++] = 1;
    }
    *n_srv = n;
    if (*self == UINT32_MAX || !c->ideal) return NULL;
    lattice_rebalance_copy *copies = lt_malloc(n * rc->parts * sizeof *copies);
    if (!copies) return NULL;
    for (size_t i = 0; i < n * rc->parts; i++) copies[i] = (lattice_rebalance_copy){LATTICE_PART_EVICTED, 0};
    for (uint32_t p = 0; p < rc->parts; p++) {
        lattice_meta_member *own[2 * MAX_OWNERS];
        size_t ns = lattice_meta_serving_owners(c, p, own, MAX_OWNERS);
        size_t nm = lattice_meta_moving_owners(c, p, own + ns, MAX_OWNERS);
        for (size_t i = 0; i < ns + nm; i++)
            for (size_t k = 0; k < n; k++)
                if (&srv[k]->m == own[i])
                    copies[k * rc->parts + p].state = i < ns ? LATTICE_PART_OWNING : LATTICE_PART_MOVING;
        if (rc->copy[p] == LATTICE_PART_OWNING) copies[*self * rc->parts + p].state = LATTICE_PART_OWNING;
        /* A lost partition's restorer holds its one current copy. */
        peer *r = restorer_of(d, c, p);
        for (size_t k = 0; r && k < n; k++)
            if (srv[k] == r) copies[k * rc->parts + p].state = LATTICE_PART_OWNING;
    }
    lattice_rebalance_plan_input in = {c->aff, c->ideal, ids, n, live, copies, LATTICE_REBALANCE_PREFER_PRIMARY};
    lattice_rebalance_plan *pl = NULL;
    if (lattice_rebalance_plan_compute(&in, &pl) != LATTICE_OK) pl = NULL;
    lt_free(copies);
    return pl;
}

/* This node's tasks of the plan as demand sessions (plan_sessions groups
 * them by supplier list); its MOVING partitions the plan finds LOST are
 * marked so.  Returns the partitions to load, or -1 (out of memory). */
static int64_t sessions_of(lattice_meta_cache *c, struct rebal_cache *rc, const lattice_rebalance_plan *pl,
                           peer *const *srv, uint32_t self, uint32_t *lost)
{
    size_t nlost = 0, nsup = 0, nspec = 0;
    const uint32_t *lp = lattice_rebalance_plan_lost(pl, &nlost);
    for (size_t i = 0; i < nlost; i++) {
        if (rc->copy[lp[i]] != LATTICE_PART_MOVING) continue;
        /* LOST: no live copy to load from.  It stays not loaded, so the base
         * does not switch and the partition keeps answering PARTITION_LOST
         * instead of coming back empty. */
        rc->copy[lp[i]] = LATTICE_PART_LOST;
        (*lost)++;
    }
    if (*lost && give_up_lost(c, rc) == *lost) *lost = 0;
    const uint32_t *sup = lattice_rebalance_plan_suppliers(pl, &nsup);
    lattice_rebalance_session_spec *spec = NULL;
    uint32_t *parts = NULL;
    if (lattice_rebalance_plan_sessions(pl, &spec, &nspec, &parts) != LATTICE_OK) return -1;
    int64_t total = 0;
    for (size_t k = 0; k < nspec && total >= 0; k++) {
        if (spec[k].demander != self) continue;
        rsess *s = NULL;
        for (uint32_t i = 0; i < spec[k].partition_count; i++) {
            uint32_t p = parts[spec[k].partition_first + i];
            if (rc->copy[p] != LATTICE_PART_MOVING) continue; /* planned from older facts than ours */
            if (!s && !(s = session_new(rc, srv, sup + spec[k].supplier_first, spec[k].supplier_count))) {
                total = -1;
                break;
            }
            s->parts[s->nparts++] = p;
            total++;
        }
    }
    (void)c;
    lt_free(spec);
    lt_free(parts);
    return total;
}

/* Begins p as a delta of the copy this node kept from before it was dropped
 * (salvage.c), when there is one with a mark and every change above the mark
 * is in its history; false: begin it as a plain load. */
static bool begin_with_base(lattice_ops *d, lattice_meta_cache *c, rsess *s, uint32_t p)
{
    uint64_t mark = 0;
    lattice_store *base = salvage_delta_base(d, c, p, &mark);
    lattice_rebalance_delta_base b;
    if (!base || lattice_rebalance_delta_base_of(base, p, mark, &b) != LATTICE_OK) return false;
    lattice_rebalance_delta_base *x = lt_realloc(s->bases, (s->nbases + 1) * sizeof *x);
    if (x) s->bases = x;
    if (!x || lattice_rebalance_applier_begin_delta(s->ap, p, base, mark) != LATTICE_OK) {
        for (size_t i = 0; i < b.key_count; i++) lt_free(b.keys[i].data);
        lt_free(b.keys);
        return false;
    }
    s->bases[s->nbases++] = b;
    return true;
}

static bool start_session(lattice_ops *d, lattice_meta_cache *c, struct rebal_cache *rc, size_t k, uint64_t now)
{
    rsess *s = &rc->s[k];
    lattice_rebalance_ids ids = {d->major, d->minor, rc->rebalance_id, (uint32_t)(k + 1) << SESSION_SHIFT};
    lattice_rebalance_flow_config f;
    lattice_rebalance_flow_config_of(&c->cfg, &f);
    if (lattice_rebalance_applier_create(c->store, c->cfg.name, &ids, &rc->prog, &s->ap) != LATTICE_OK) return false;
    bases_free(s);
    for (size_t i = 0; i < s->nparts; i++) {
        uint32_t p = s->parts[i];
        if (begin_with_base(d, c, s, p)) continue;
        if (lattice_rebalance_applier_begin(s->ap, p, false) != LATTICE_OK) return false;
    }
    if (lattice_rebalance_demander_create(c->cfg.name, &ids, s->parts, s->nparts, s->nsup, &f, &s->dm) != LATTICE_OK)
        return false;
    lattice_rebalance_demander_set_bases(s->dm, s->bases, s->nbases);
    lattice_rebalance_out out;
    lattice_rebalance_out_init(&out);
    if (lattice_rebalance_demander_start(s->dm, now, &out) != LATTICE_OK) {
        lattice_rebalance_out_clear(&out);
        return false;
    }
    sess_send(d, c, s, &out);
    return true;
}

static void start_plan(lattice_ops *d, lattice_meta_cache *c, struct rebal_cache *rc, uint64_t now)
{
    drop_sessions(rc);
    peer *srv[DATA_MAX_PEERS];
    size_t n_srv = 0;
    uint32_t self = 0, lost = 0;
    lattice_rebalance_plan *pl = plan_of(d, c, rc, srv, &n_srv, &self);
    int64_t total = pl ? sessions_of(c, rc, pl, srv, self, &lost) : 0;
    bool planned = pl || self == UINT32_MAX || !c->ideal;
    lattice_rebalance_plan_free(pl);
    if (total < 0 || !planned) {
        drop_sessions(rc);
        rc->plan_at = now + REPLAN_MS; /* out of memory: try again */
        return;
    }
    if (lost) LT_LOG(LT_WARN, "rebalance", "cache %s: %u partitions LOST (no live copy to load from)", c->cfg.name, lost);
    if (!total) return;
    lattice_rebalance_progress_init(&rc->prog, c->cfg.name, (uint32_t)total, now);
    rc->started = now;
    rc->finished = 0;
    rc->logged_quarter = 0;
    rc->active = true;
    for (size_t k = 0; k < rc->ns; k++) {
        if (!start_session(d, c, rc, k, now)) {
            LT_LOG(LT_WARN, "rebalance", "cache %s: cannot start a demand session (out of memory); retrying",
                   c->cfg.name);
            drop_sessions(rc);
            rc->plan_at = now + REPLAN_MS;
            return;
        }
    }
    LT_LOG(LT_INFO, "rebalance", "cache %s: rebalance %llu started: %lld partitions in %zu sessions (data thread's view %llu.%llu)",
           c->cfg.name, (unsigned long long)rc->rebalance_id, (long long)total, rc->ns, (unsigned long long)d->major,
           (unsigned long long)d->minor);
}

static void log_progress(lattice_meta_cache *c, struct rebal_cache *rc, uint64_t now)
{
    const lattice_rebalance_progress *p = &rc->prog;
    unsigned quarter = p->partitions_total ? 4u * p->partitions_done / p->partitions_total : 4;
    while (rc->logged_quarter < quarter && rc->logged_quarter < 3) {
        rc->logged_quarter++;
        LT_LOG(LT_INFO, "rebalance", "cache %s: %u%% done (%u/%u partitions, %llu entries)", c->cfg.name,
               rc->logged_quarter * 25, p->partitions_done, p->partitions_total,
               (unsigned long long)p->entries_received);
    }
    for (size_t k = 0; k < rc->ns; k++)
        if (!rc->s[k].done) return;
    if (!rc->active) return;
    rc->active = false;
    rc->finished = now;
    double secs = (double)(now - rc->started) / 1000.0;
    if (secs <= 0) secs = 0.001;
    LT_LOG(LT_INFO, "rebalance",
           "cache %s: rebalance %llu finished: %u partitions, %llu entries, %llu bytes in %.2f s (%.1f MB/s, %.0f entries/s)",
           c->cfg.name, (unsigned long long)rc->rebalance_id, p->partitions_done,
           (unsigned long long)p->entries_received, (unsigned long long)p->bytes_received, secs,
           (double)p->bytes_received / secs / 1e6, (double)p->entries_received / secs);
    if (loadable_of(rc)) rc->plan_at = now + REPLAN_MS; /* refused partitions: try again */
}

/* After every call into a demander: follow its session, notice the end. */
static void after_call(lattice_meta_cache *c, struct rebal_cache *rc, rsess *s, uint64_t now)
{
    lattice_rebalance_ids ids;
    lattice_rebalance_demander_ids(s->dm, &ids);
    lattice_rebalance_applier_set_ids(s->ap, &ids);
    lattice_rebalance_demander_state st = lattice_rebalance_demander_state_of(s->dm);
    if (st == LATTICE_REBALANCE_DEMANDER_FAILED && !s->done) {
        LT_LOG(LT_WARN, "rebalance", "cache %s: every supplier of a session failed; planning again", c->cfg.name);
        s->done = true;
    } else if (st == LATTICE_REBALANCE_DEMANDER_DONE) {
        s->done = true;
    }
    /* A done session demands nothing more: the key lists of its delta
     * bases (1-2 MiB after a restart) would otherwise stay until the next
     * rebalance, which may never come. */
    if (s->done && s->nbases) {
        lattice_rebalance_demander_set_bases(s->dm, NULL, 0);
        bases_free(s);
    }
    log_progress(c, rc, now);
}

void rebal_on_supply(lattice_ops *d, const Latdata__Req *q)
{
    char from_id[64];
    sender_of(q, from_id);
    lattice_meta_cache *c = lattice_meta_valid(d->meta) ? lattice_meta_cache_of(d->meta, q->cache) : NULL;
    struct rebal_cache *rc = c ? c->rb : NULL;
    if (!rc || !c->store) return;
    lattice_rebalance_supply *s = NULL;
    if (lattice_rebalance_supply_decode(q->value.data, q->value.len, lattice_rebalance_max_supply_bytes(&c->cfg),
                                        &s) != LATTICE_OK) {
        d->malformed++;
        return;
    }
    lattice_rebalance_supply_info in;
    lattice_rebalance_supply_info_of(s, &in);
    size_t k = (in.ids.session >> SESSION_SHIFT) - 1;
    rsess *ss = rc->active && in.ids.rebalance_id == rc->rebalance_id && k < rc->ns ? &rc->s[k] : NULL;
    uint32_t from = ss ? ss->nsup : 0;
    for (uint32_t i = 0; ss && i < ss->nsup; i++)
        if (strcmp(ss->sup[i], from_id) == 0) from = i;
    if (!ss || ss->done || from == ss->nsup) {
        rc->stale++;
        lattice_rebalance_supply_free(s);
        return;
    }
    uint64_t now = lt_mono_ms();
    lattice_rebalance_out out;
    lattice_rebalance_out_init(&out);
    lattice_rebalance_demander_event ev = LATTICE_REBALANCE_IGNORE;
    lattice_rebalance_demander_on_supply(ss->dm, from, s, now, &out, &ev);
    if (ev == LATTICE_REBALANCE_ACCEPT) {
        lattice_rebalance_apply_result r;
        lattice_status st = lattice_rebalance_applier_apply(ss->ap, s, &r);
        if (st != LATTICE_OK) {
            /* Not stored: no ack; the timeout asks again. */
            LT_LOG(LT_WARN, "rebalance", "cache %s: storing a batch of partition %u failed: %s", c->cfg.name,
                   in.partition, lattice_strerror(st));
            lattice_rebalance_out_clear(&out);
        } else if (r.verdict == LATTICE_REBALANCE_APPLIED && r.partition_done && in.partition < rc->parts) {
            rc->copy[in.partition] = LATTICE_PART_OWNING;
            if (c->counter[in.partition] < r.update_counter) c->counter[in.partition] = r.update_counter;
            /* Complete up to the supplier's counter; every later change is
             * in the history (as far as it reaches). */
            lattice_store_history_valid_from(c->store, in.partition, r.update_counter);
            salvage_done(d, c, in.partition, ops_quorum(d));
        }
    } else if (ev == LATTICE_REBALANCE_IGNORE) {
        rc->stale++;
    }
    sess_send(d, c, ss, &out);
    after_call(c, rc, ss, now);
    lattice_rebalance_supply_free(s);
}

void rebal_note_remove(lattice_meta_cache *c, uint32_t partition, const void *key, size_t key_len, uint64_t version)
{
    struct rebal_cache *rc = c->rb;
    if (!rc || !rc->active || partition >= rc->parts || rc->copy[partition] == LATTICE_PART_EVICTED) return;
    for (size_t k = 0; k < rc->ns; k++)
        if (rc->s[k].ap) lattice_rebalance_applier_note_remove(rc->s[k].ap, partition, key, key_len, version);
}

/* ------------------------------------------------------------ supplier */

static lattice_status supply_counter(void *arg, uint32_t partition, uint64_t *counter)
{
    rsup *r = arg;
    lattice_meta_cache *c = r->c;
    if (partition >= c->cfg.partitions) return LATTICE_ERR_INVAL;
    lattice_meta_member *own[MAX_OWNERS];
    size_t n = lattice_meta_serving_owners(c, partition, own, MAX_OWNERS);
    /* Or the restorer of a lost partition, once its kept copy is in. */
    const struct rebal_cache *rc = c->rb;
    peer *rs = n || !rc ? NULL : restorer_of(rc->d, c, partition);
    bool restored = rs && rs->m.self && rc && rc->copy[partition] == LATTICE_PART_OWNING;
    if (!self_among(own, n) && !restored) return LATTICE_ERR_NOT_OWNER;
    /* Not before this node sends the demander the partition's writes: what
     * it supplies is taken now (a delta at once), and a write after it that
     * did not reach the demander would be missing there.  The demander asks
     * another supplier, or plans again. */
    size_t nm = lattice_meta_moving_owners(c, partition, own, MAX_OWNERS);
    bool moving = false;
    for (size_t i = 0; i < nm && !moving; i++) moving = strcmp(own[i]->id, r->dem) == 0;
    if (!moving) return LATTICE_ERR_AGAIN;
    *counter = c->counter[partition];
    return LATTICE_OK;
}

static bool same_ids(const lattice_rebalance_ids *a, const lattice_rebalance_ids *b)
{
    return a->topology_major == b->topology_major && a->topology_minor == b->topology_minor &&
           a->rebalance_id == b->rebalance_id && a->session == b->session;
}

void rebal_on_demand(lattice_ops *d, const Latdata__Req *q)
{
    char from_id[64];
    sender_of(q, from_id);
    lattice_meta_cache *c = lattice_meta_valid(d->meta) ? lattice_meta_cache_of(d->meta, q->cache) : NULL;
    peer *to = chan_peer_by_id(d, from_id);
    if (c && c->store && !to) {
        park_demand(d, q, from_id);
        return;
    }
    if (!c || !c->store || !to || !to->dealer || !ensure(d, c)) return;
    lattice_rebalance_demand dm;
    if (lattice_rebalance_demand_decode(q->value.data, q->value.len, 0, &dm) != LATTICE_OK) {
        d->malformed++;
        return;
    }
    uint64_t now = lt_mono_ms();
    rsup *r = NULL;
    for (rsup **pp = &d->grid->rb_sups; *pp;) {
        rsup *x = *pp;
        if (x->c == c && strcmp(x->dem, from_id) == 0) {
            if (same_ids(&x->ids, &dm.ids)) {
                r = x;
            } else if (x->ids.rebalance_id != dm.ids.rebalance_id ||
                       x->ids.session >> SESSION_SHIFT == dm.ids.session >> SESSION_SHIFT) {
                *pp = x->next; /* an older plan's, or this group's previous supplier switch */
                sup_free(x);
                continue;
            }
        }
        pp = &x->next;
    }
    if (!r) {
        /* A delta is taken at once, so only from the serving primary: it
         * applied every write before sending it to the demander, so a write
         * the demander missed (a copy that answered before it knew the
         * cache still counts as having answered) is in the delta.  As a
         * backup this node sends those partitions in full. */
        for (size_t i = 0; i < dm.delta_count; i++) {
            lattice_meta_member *own[1];
            uint32_t p = dm.deltas[i].partition;
            if (p >= c->cfg.partitions || lattice_meta_serving_owners(c, p, own, 1) != 1 || !own[0]->self)
                dm.deltas[i].partition = UINT32_MAX; /* no base */
        }
        r = lt_calloc(1, sizeof *r);
        lattice_rebalance_flow_config f;
        lattice_rebalance_flow_config_of(&c->cfg, &f);
        if (!r || lattice_rebalance_supplier_create(c->store, &dm, &f, supply_counter, r, &r->sp) != LATTICE_OK) {
            if (r) lt_free(r);
            lattice_rebalance_demand_clear(&dm);
            return;
        }
        snprintf(r->dem, sizeof r->dem, "%s", from_id);
        r->c = c;
        r->ids = dm.ids;
        r->next = d->grid->rb_sups;
        d->grid->rb_sups = r;
    }
    r->last_ms = now;
    lattice_rebalance_out out;
    lattice_rebalance_out_init(&out);
    lattice_rebalance_supplier_on_demand(r->sp, &dm, now, &out);
    r->deadline = out.deadline;
    send_msgs(d, CTL_SUPPLY, c->cfg.name, &to, &out);
    lattice_rebalance_demand_clear(&dm);
}

/* ------------------------------------------------------------ tick */

static void tick_suppliers(lattice_ops *d, uint64_t now)
{
    for (rsup **pp = &d->grid->rb_sups; *pp;) {
        rsup *r = *pp;
        peer *to = chan_peer_by_id(d, r->dem);
        bool idle = now > r->last_ms && now - r->last_ms > SUPPLIER_IDLE_MS; /* a stamp newer than now is not idle */
        if (!to || !to->dealer || lattice_rebalance_supplier_done(r->sp) || idle) {
            *pp = r->next;
            sup_free(r);
            continue;
        }
        if (now >= r->deadline) {
            lattice_rebalance_out out;
            lattice_rebalance_out_init(&out);
            lattice_rebalance_supplier_on_tick(r->sp, now, &out);
            r->deadline = out.deadline;
            send_msgs(d, CTL_SUPPLY, r->c->cfg.name, &to, &out);
        }
        pp = &r->next;
    }
}

void rebal_tick(lattice_ops *d, uint64_t now)
{
    if (d->client) return;
    if (d->grid->rb_parked) unpark_demands(d, now);
    for (size_t i = 0; i < lattice_meta_cache_count(d->meta); i++) {
        lattice_meta_cache *c = lattice_meta_cache_at(d->meta, i);
        struct rebal_cache *rc = c->rb;
        if (!rc) continue;
        if (rc->plan_at && now >= rc->plan_at) {
            rc->plan_at = 0;
            start_plan(d, c, rc, now);
        }
        for (size_t k = 0; rc->active && k < rc->ns; k++) {
            rsess *s = &rc->s[k];
            if (s->done || now < s->deadline) continue;
            lattice_rebalance_out out;
            lattice_rebalance_out_init(&out);
            lattice_rebalance_demander_on_tick(s->dm, now, &out);
            sess_send(d, c, s, &out);
            after_call(c, rc, s, now);
        }
    }
    tick_suppliers(d, now);
}

void rebal_figures_of(const lattice_ops *d, const lattice_meta_cache *c, rebal_figures *f)
{
    memset(f, 0, sizeof *f);
    const struct rebal_cache *rc = c->rb;
    if (!rc) {
        f->left = c->store ? c->cfg.partitions : 0; /* not computed yet: not ready for a switch */
        return;
    }
    f->left = left_of(rc);
    f->total = rc->prog.partitions_total;
    f->entries = rc->prog.entries_received;
    f->bytes = rc->prog.bytes_received;
    f->delta = rc->prog.partitions_delta;
    f->done = rc->prog.partitions_done;
    f->active = rc->active || rc->plan_at;
    uint64_t end = rc->active ? lt_mono_ms() : rc->finished;
    f->elapsed_ms = rc->started && end >= rc->started ? end - rc->started : 0;
    f->view = rc->view == lattice_meta_server_view(d->meta) ? rc->view : 0;
}
