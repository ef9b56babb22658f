/*
 * meta: the cache registry, owner liveness, serving and moving owners, and
 * the base switch (meta/meta.h).  One thread (the data thread); no sockets,
 * no clock.
 *
 * A base entry is "CONSISTENT_ID NODE_ID": affinity ranks by the consistent
 * id (stable across restarts), liveness is by node id (new at every start),
 * so a server restarted on the same address holds nothing of the old base:
 * it is no serving owner until rebalance fills it (it is MOVING meanwhile),
 * and its partitions stay with the live backups that have the data.
 * Rendezvous ranking keeps the others' order when one drops out, so when a
 * primary dies its first live backup is primary at the new topology.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "lattice/alloc.h"
#include "lattice/log.h"
#include "meta/meta.h"

#define MAX_MEMBERS 256
#define BASE_ENTRY_MAX 240
typedef char base_entry[BASE_ENTRY_MAX];

struct lattice_meta {
    lattice_meta_config cfg;
    lattice_meta_member *members[MAX_MEMBERS]; /* the current topology (the caller's) */
    size_t n_members;
    const lattice_meta_member *self;
    char coordinator[64];
    bool valid;
    uint64_t version;
    uint64_t epoch;                    /* the topology major this node's view has (lattice_meta_set_epoch) */
    char writer[64];                   /* node id of the coordinator that wrote `version` ("": unknown) */
    lattice_meta_cache *caches[LATTICE_META_MAX_CACHES];
    size_t n_caches;
    Latdata__Meta *msg;                /* packed form of the above */
    base_entry *live_buf;              /* the live servers as base entries (callers) */
    base_entry *check_buf;             /* scratch for lattice_meta_base_is_live only */
};

/* Cache serials are unique in the process, not only in one lattice_meta: a
 * node that rejoins as a new one starts a new lattice_meta while full_sync
 * waits of the old one's caches are still settling, and a reused serial
 * made such a wait count down the new cache's writes_in_flight (it wrapped,
 * and every base switch prepare then waited for ever). */
static atomic_uint_fast64_t next_serial;

/* The version the coordinator writes next: above its own, and at least
 * (epoch << 32) + 1 - epoch being the topology major of its view.  The
 * coordinator of topology major M is the only writer of versions M << 32
 * .. (M + 1) << 32, and a coordinator that takes over does so in a
 * topology newer than every one its predecessor wrote under: so its first
 * write passes every version the others hold (a lagging one's did not,
 * and its pushes were dropped until its count passed theirs), and two
 * coordinators never write one version with different contents.  A
 * takeover whose view lagged (same major as the predecessor's last)
 * learns the higher versions from the members' pulls
 * (lattice_meta_seen_version).  docs/CACHES.md, "Cluster metadata". */
static uint64_t next_version(const lattice_meta *m)
{
    uint64_t floor = m->epoch << 32;
    return m->version >= floor ? m->version + 1 : floor + 1;
}

/* Every version change ends the freezes it passes (lattice_meta_freeze). */
static void thaw(lattice_meta *m)
{
    for (size_t i = 0; i < m->n_caches; i++)
        if (m->caches[i]->frozen_at < m->version) m->caches[i]->frozen_at = 0;
}

/* ------------------------------------------------------------------ members */

static lattice_meta_member *member_by_id(const lattice_meta *m, const char *id)
{
    for (size_t i = 0; i < m->n_members; i++)
        if (strcmp(m->members[i]->id, id) == 0) return m->members[i];
    return NULL;
}

static lattice_meta_member *member_by_cid(const lattice_meta *m, const char *cid)
{
    for (size_t i = 0; i < m->n_members; i++)
        if (strcmp(m->members[i]->cid, cid) == 0) return m->members[i];
    return NULL;
}

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

/* The live servers as base entries ("cid id") in buf (NULL: m->live_buf);
 * out[i] = buf[i].  Returns 0 when the scratch cannot be allocated. */
static size_t live_servers(lattice_meta *m, base_entry *buf, char **out)
{
    if (!buf && !m->live_buf && !(m->live_buf = lt_calloc(MAX_MEMBERS, sizeof *m->live_buf))) return 0;
    if (!buf) buf = m->live_buf;
    size_t n = 0;
    for (size_t i = 0; i < m->n_members; i++) {
        if (!m->members[i]->server) continue;
        snprintf(buf[n], sizeof buf[n], "%s %s", m->members[i]->cid, m->members[i]->id);
        out[n] = buf[n];
        n++;
    }
    return n;
}

bool lattice_meta_base_is_live(lattice_meta *m, const lattice_meta_cache *c)
{
    char *srv[MAX_MEMBERS];
    if (!m->check_buf && !(m->check_buf = lt_calloc(MAX_MEMBERS, sizeof *m->check_buf))) return true;
    size_t n = live_servers(m, m->check_buf, srv);
    if (n != c->n_base) return false;
    for (size_t i = 0; i < n; i++) {
        bool found = false;
        for (size_t k = 0; k < c->n_base && !found; k++) found = strcmp(c->base[k], srv[i]) == 0;
        if (!found) return false;
    }
    return true;
}

uint64_t lattice_meta_server_view(const lattice_meta *m)
{
    /* Order-independent: a sum of one FNV-1a hash per live server (consistent
     * id and node id).  Clients come and go without changing it. */
    uint64_t sum = 0;
    for (size_t i = 0; i < m->n_members; i++) {
        const lattice_meta_member *x = m->members[i];
        if (!x->server) continue;
        uint64_t h = lt_fnv1a_add(lt_fnv1a(x->cid, strlen(x->cid)), " ", 1);
        sum += lt_fnv1a_add(h, x->id, strlen(x->id));
    }
    return sum ? sum : 1;
}

/* ------------------------------------------------------------------- owners */

size_t lattice_meta_serving_owners(const lattice_meta_cache *c, uint32_t p, lattice_meta_member **out, size_t max)
{
    uint32_t cnt = 0;
    const uint16_t *own = c->aff ? lattice_affinity_owners(c->aff, p, &cnt) : NULL;
    size_t n = 0;
    for (uint32_t i = 0; own && i < cnt && n < max; i++)
        if (c->live[own[i]]) out[n++] = c->live[own[i]];
    return n;
}

size_t lattice_meta_moving_owners(const lattice_meta_cache *c, uint32_t p, lattice_meta_member **out, size_t max)
{
    /* Restoring (a whole-grid restart): nothing moves until the owners'
     * copies are equal - a copy loaded now could be one that is replaced. */
    if (!c->ideal || c->restoring) return 0;
    lattice_meta_member *serving[LATTICE_CACHE_MAX_BACKUPS + 1];
    size_t ns = lattice_meta_serving_owners(c, p, serving, LATTICE_CACHE_MAX_BACKUPS + 1);
    uint32_t cnt = 0;
    const uint16_t *own = lattice_affinity_owners(c->ideal, p, &cnt);
    size_t n = 0;
    for (uint32_t i = 0; own && i < cnt && n < max; i++) {
        lattice_meta_member *q = c->ideal_live[own[i]];
        bool dup = !q;
        for (size_t k = 0; k < ns && !dup; k++) dup = serving[k] == q;
        if (!dup) out[n++] = q;
    }
    return n;
}

/* The ideal assignment (over the live servers) when it differs from the
 * base: its owners that do not serve a partition hold it MOVING. */
static void cache_reideal(lattice_meta *m, lattice_meta_cache *c)
{
    lattice_affinity_free(c->ideal);
    lt_free(c->ideal_live);
    c->ideal = NULL;
    c->ideal_live = NULL;
    if (lattice_meta_base_is_live(m, c)) return;
    lattice_affinity_node an[MAX_MEMBERS];
    char hosts[MAX_MEMBERS][160];
    size_t n = 0;
    for (size_t i = 0; i < m->n_members; i++) {
        if (!m->members[i]->server) continue;
        host_of(m->members[i]->cid, hosts[n], sizeof hosts[n]);
        an[n] = (lattice_affinity_node){m->members[i]->cid, hosts[n], 0};
        n++;
    }
    lattice_affinity *a = NULL;
    lattice_meta_member **pl = lt_calloc(n ? n : 1, sizeof *pl);
    if (!pl || lattice_affinity_compute(an, n, &c->cfg, &a) != LATTICE_OK) {
        lt_free(pl);
        return; /* no MOVING copies this time: writes still reach every serving owner */
    }
    for (uint32_t i = 0; i < lattice_affinity_node_count(a); i++)
        pl[i] = member_by_cid(m, lattice_affinity_node_id(a, i));
    c->ideal = a;
    c->ideal_live = pl;
}

/* Recomputes which affinity nodes are alive (members of the current topology). */
static void cache_relive(lattice_meta *m, lattice_meta_cache *c)
{
    cache_reideal(m, c);
    uint32_t n = c->aff ? lattice_affinity_node_count(c->aff) : 0;
    for (uint32_t i = 0; i < n; i++) {
        const char *cid = lattice_affinity_node_id(c->aff, i);
        const char *node = NULL;
        for (size_t k = 0; k < c->n_base; k++) {
            char bc[160];
            entry_cid(c->base[k], bc, sizeof bc);
            if (strcmp(bc, cid) == 0) node = entry_node(c->base[k]);
        }
        lattice_meta_member *p = node ? member_by_id(m, node) : member_by_cid(m, cid);
        c->live[i] = p && p->server && strcmp(p->cid, cid) == 0 ? p : NULL;
    }
}

/* ------------------------------------------------------------ lost partitions */

static void msg_rebuild(lattice_meta *m);

static void lost_clear(lattice_meta_cache *c)
{
    for (size_t i = 0; i < c->n_lost; i++) {
        lt_free(c->lost[i].owners);
        lt_free(c->lost[i].msg);
    }
    lt_free(c->lost);
    lt_free(c->lost_msg);
    c->lost = NULL;
    c->lost_msg = NULL;
    c->n_lost = 0;
}

/* l->msg from its fields; false: out of memory. */
static bool lost_format(lattice_meta_lost *l)
{
    size_t need = strlen(l->owners) + strlen(l->restorer) + 16;
    char *x = lt_malloc(need);
    if (!x) return false;
    snprintf(x, need, "%u %s %s", l->partition, l->restorer[0] ? l->restorer : "-", l->owners);
    lt_free(l->msg);
    l->msg = x;
    return true;
}

static void lost_reindex(lattice_meta_cache *c)
{
    lt_free(c->lost_msg);
    c->lost_msg = lt_calloc(c->n_lost ? c->n_lost : 1, sizeof *c->lost_msg);
    for (size_t i = 0; c->lost_msg && i < c->n_lost; i++) c->lost_msg[i] = c->lost[i].msg;
}

/* Inserts a record for p (kept sorted); false: out of memory or present. */
static bool lost_add(lattice_meta_cache *c, uint32_t p, const char *restorer, const char *owners)
{
    if (lattice_meta_lost_of(c, p) || p >= c->cfg.partitions) return false;
    lattice_meta_lost *x = lt_realloc(c->lost, (c->n_lost + 1) * sizeof *x);
    if (!x) return false;
    c->lost = x;
    lattice_meta_lost l = {p, "", lt_strdup(owners), NULL};
    snprintf(l.restorer, sizeof l.restorer, "%s", restorer && strcmp(restorer, "-") ? restorer : "");
    if (!l.owners || !lost_format(&l)) {
        lt_free(l.owners);
        return false;
    }
    size_t at = c->n_lost;
    while (at > 0 && c->lost[at - 1].partition > p) at--;
    memmove(&c->lost[at + 1], &c->lost[at], (c->n_lost - at) * sizeof *c->lost);
    c->lost[at] = l;
    c->n_lost++;
    lost_reindex(c);
    return true;
}

/* The records a metadata message carries ("P RESTORER|- OWNERS"). */
static void lost_parse(lattice_meta_cache *c, char *const *msg, size_t n)
{
    lost_clear(c);
    for (size_t i = 0; i < n; i++) {
        unsigned p = 0;
        char restorer[64];
        int used = 0;
        if (sscanf(msg[i], "%u %63s %n", &p, restorer, &used) != 2 || !msg[i][used]) {
            LT_LOG(LT_WARN, "data", "metadata: cache %s: bad lost record '%s' ignored", c->cfg.name, msg[i]);
            continue;
        }
        lost_add(c, p, restorer, msg[i] + used);
    }
}

const lattice_meta_lost *lattice_meta_lost_of(const lattice_meta_cache *c, uint32_t p)
{
    size_t lo = 0, hi = c->n_lost;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (c->lost[mid].partition < p) lo = mid + 1;
        else hi = mid;
    }
    return lo < c->n_lost && c->lost[lo].partition == p ? &c->lost[lo] : NULL;
}

static bool names_one(const lattice_meta_lost *l, const char *id, size_t n)
{
    for (const char *s = l->owners; n && (s = strstr(s, id)); s += n)
        if ((s == l->owners || s[-1] == ' ') && (s[n] == ' ' || !s[n])) return true;
    return false;
}

bool lattice_meta_lost_names(const lattice_meta_lost *l, const char *ids)
{
    for (const char *id = ids; *id;) {
        size_t n = strcspn(id, " ");
        char one[128];
        if (n && n < sizeof one) {
            memcpy(one, id, n);
            one[n] = 0;
            if (names_one(l, one, n)) return true;
        }
        id += n;
        id += strspn(id, " ");
    }
    return false;
}

size_t lattice_meta_lost_owner_count(const lattice_meta_lost *l)
{
    size_t n = 0;
    for (const char *s = l->owners; *s; s++)
        if (*s != ' ' && (s == l->owners || s[-1] == ' ')) n++;
    return n;
}

bool lattice_meta_set_restorer(lattice_meta_cache *c, uint32_t p, const char *id)
{
    lattice_meta_lost *l = (lattice_meta_lost *)lattice_meta_lost_of(c, p);
    if (!l || strcmp(l->restorer, id ? id : "") == 0) return false;
    char was[64];
    memcpy(was, l->restorer, sizeof was);
    snprintf(l->restorer, sizeof l->restorer, "%s", id ? id : "");
    if (!lost_format(l)) {
        memcpy(l->restorer, was, sizeof was);
        return false;
    }
    lost_reindex(c);
    return true;
}

lattice_status lattice_meta_reset_lost(lattice_meta *m, const char *name, uint32_t *n_lost)
{
    lattice_meta_cache *c = lattice_meta_cache_of(m, name);
    *n_lost = 0;
    if (!c) return LATTICE_ERR_NO_CACHE;
    for (uint32_t p = 0; p < c->cfg.partitions; p++) {
        lattice_meta_member *own[1];
        *n_lost += lattice_meta_serving_owners(c, p, own, 1) == 0;
    }
    if (!*n_lost) return LATTICE_OK;
    c->lost_reset = c->base_version;
    lost_clear(c);
    m->version = next_version(m);
    thaw(m);
    msg_rebuild(m);
    LT_LOG(LT_WARN, "data", "cache %s: %u LOST partitions given up on the operator's word: they serve again, empty "
                            "(metadata version %llu)", c->cfg.name, *n_lost, (unsigned long long)m->version);
    return LATTICE_OK;
}

/* After a topology change at the coordinator: every partition of c that
 * some serving owner served under the previous members (old_live, per
 * affinity node) and none serves now. */
static bool note_lost(lattice_meta_cache *c, lattice_meta_member *const *old_live)
{
    bool added = false;
    for (uint32_t p = 0; c->aff && p < c->cfg.partitions; p++) {
        uint32_t cnt = 0;
        const uint16_t *own = lattice_affinity_owners(c->aff, p, &cnt);
        size_t before = 0, now = 0, len = 1;
        for (uint32_t i = 0; i < cnt; i++) {
            before += old_live[own[i]] != NULL;
            now += c->live[own[i]] != NULL;
            if (old_live[own[i]]) len += strlen(old_live[own[i]]->id) + 1;
        }
        if (!before || now || lattice_meta_lost_of(c, p)) continue;
        char *owners = lt_malloc(len);
        if (!owners) continue;
        owners[0] = 0;
        for (uint32_t i = 0; i < cnt; i++) {
            if (!old_live[own[i]]) continue;
            if (owners[0]) strcat(owners, " ");
            strcat(owners, old_live[own[i]]->id);
        }
        added |= lost_add(c, p, NULL, owners);
        lt_free(owners);
    }
    if (added) {
        size_t n = 0;
        for (size_t i = 0; i < c->n_lost; i++) n += !c->lost[i].restorer[0];
        LT_LOG(LT_WARN, "data",
               "cache %s: %zu partitions lost every serving owner at once; kept until their owners' copies come back",
               c->cfg.name, n);
    }
    return added;
}

bool lattice_meta_set_members(lattice_meta *m, lattice_meta_member *const *members, size_t n,
                              const char *coordinator)
{
    /* The old live owners, for lost records: the members they point to stay
     * alive until this call returns (meta.h). */
    lattice_meta_member **old[LATTICE_META_MAX_CACHES] = {0};
    bool rec = m->valid, was = lattice_meta_is_coordinator(m);
    for (size_t i = 0; rec && i < m->n_caches; i++) {
        lattice_meta_cache *c = m->caches[i];
        size_t nb = c->aff ? lattice_affinity_node_count(c->aff) : 0;
        if (nb && (old[i] = lt_malloc(nb * sizeof *old[i]))) memcpy(old[i], c->live, nb * sizeof *old[i]);
    }
    m->n_members = 0;
    m->self = NULL;
    for (size_t i = 0; i < n && m->n_members < MAX_MEMBERS; i++) {
        m->members[m->n_members++] = members[i];
        if (members[i]->self) m->self = members[i];
    }
    if (strcmp(m->coordinator, coordinator ? coordinator : "") != 0)
        for (size_t i = 0; i < m->n_caches; i++) m->caches[i]->frozen_at = 0; /* its prepare died with it */
    snprintf(m->coordinator, sizeof m->coordinator, "%s", coordinator ? coordinator : "");
    /* A takeover writes above every epoch it has seen a version of, even
     * should its topology major not be above them (its view lagged). */
    if (!was && m->valid && lattice_meta_is_coordinator(m) && (m->version >> 32) + 1 > m->epoch)
        m->epoch = (m->version >> 32) + 1;
    for (size_t i = 0; i < m->n_caches; i++) cache_relive(m, m->caches[i]);
    bool added = false;
    for (size_t i = 0; i < m->n_caches; i++) {
        if (old[i] && lattice_meta_is_coordinator(m)) added |= note_lost(m->caches[i], old[i]);
        lt_free(old[i]);
    }
    return added;
}

void lattice_meta_set_epoch(lattice_meta *m, uint64_t topology_major)
{
    if (topology_major > m->epoch) m->epoch = topology_major;
}

const char *lattice_meta_writer(const lattice_meta *m) { return m->writer; }

bool lattice_meta_seen_version(lattice_meta *m, uint64_t version, const char *writer)
{
    if (!lattice_meta_is_coordinator(m) || !m->valid || version < m->version) return false;
    /* Ours, or one we cannot tell from ours (an older node names no writer). */
    if (version == m->version && (!writer || !*writer || strcmp(writer, m->self->id) == 0)) return false;
    uint64_t before = m->version;
    m->version = version; /* next_version: above it */
    m->version = next_version(m);
    thaw(m);
    msg_rebuild(m);
    LT_LOG(LT_WARN, "data", "coordinator: a member holds metadata version %llu of %.8s, not below ours (%llu); ours is now %llu",
           (unsigned long long)version, writer && *writer ? writer : "another coordinator", (unsigned long long)before,
           (unsigned long long)m->version);
    return true;
}

bool lattice_meta_is_coordinator(const lattice_meta *m)
{
    return !m->cfg.client && m->self && m->coordinator[0] && strcmp(m->coordinator, m->self->id) == 0;
}

const lattice_meta_member *lattice_meta_self(const lattice_meta *m) { return m->self; }

/* ----------------------------------------------------------------- caches */

static void cache_free(lattice_meta *m, lattice_meta_cache *c)
{
    if (!c) return;
    if (m->cfg.cache_gone) m->cfg.cache_gone(m->cfg.arg, c); /* before the store: it may read it */
    if (c->store) lattice_store_destroy(c->store);
    for (size_t i = 0; i < c->n_base; i++) lt_free(c->base[i]);
    lt_free(c->base);
    lattice_affinity_free(c->aff);
    lt_free(c->live);
    lattice_affinity_free(c->ideal);
    lt_free(c->ideal_live);
    lt_free(c->counter);
    lt_free(c->restore_keep);
    lost_clear(c);
    lt_free(c);
}

/* c's restore decision becomes a copy of (b, n); n 0: none. */
static void set_restore_keep(lattice_meta_cache *c, const uint8_t *b, size_t n)
{
    if (c->n_restore_keep == n && (!n || !memcmp(c->restore_keep, b, n))) return;
    lt_free(c->restore_keep);
    c->restore_keep = n ? lt_malloc(n) : NULL;
    c->n_restore_keep = c->restore_keep ? n : 0;
    if (c->restore_keep) memcpy(c->restore_keep, b, n);
}

static lattice_status cache_set_base(lattice_meta *m, lattice_meta_cache *c, char *const *base, size_t n,
                                     uint64_t version)
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
    lattice_meta_member **live = lt_calloc(n ? n : 1, sizeof *live);
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
    cache_relive(m, c);
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

static lattice_meta_cache *cache_new(lattice_meta *m, const lattice_cache_config *cfg)
{
    lattice_meta_cache *c = lt_calloc(1, sizeof *c);
    if (!c) return NULL;
    c->cfg = *cfg;
    c->serial = atomic_fetch_add_explicit(&next_serial, 1, memory_order_relaxed) + 1;
    c->counter = lt_calloc(cfg->partitions, sizeof *c->counter);
    if (!c->counter) goto fail;
    if (!m->cfg.client) {
        lattice_store_config sc = {c->cfg.name, cfg->partitions, m->cfg.region, NULL, NULL};
        if (lattice_store_create(&sc, &c->store) != LATTICE_OK) goto fail;
        lattice_store_history_configure(c->store, cfg->history, cfg->history_bytes);
        lattice_store_sweeper_start(c->store, 1000);
    }
    return c;
fail:
    cache_free(m, c);
    return NULL;
}

static lattice_status add_cache(lattice_meta *m, const lattice_cache_config *cfg, char *const *base, size_t n,
                                uint64_t bv)
{
    if (m->n_caches == LATTICE_META_MAX_CACHES) return LATTICE_ERR_TOO_LARGE;
    lattice_meta_cache *c = cache_new(m, cfg);
    if (!c) return LATTICE_ERR_NOMEM;
    lattice_status st = cache_set_base(m, c, base, n, bv);
    if (st != LATTICE_OK) {
        cache_free(m, c);
        return st;
    }
    m->caches[m->n_caches++] = c;
    return LATTICE_OK;
}

static void remove_cache(lattice_meta *m, size_t i)
{
    cache_free(m, m->caches[i]);
    m->caches[i] = m->caches[--m->n_caches];
}

/* --------------------------------------------------------------- registry */

static void msg_free(lattice_meta *m)
{
    if (!m->msg) return;
    for (size_t i = 0; i < m->msg->n_caches; i++) lt_free(m->msg->caches[i]);
    lt_free(m->msg->caches);
    lt_free(m->msg);
    m->msg = NULL;
}

/* Rebuilds the metadata message from the caches (after any change: it
 * borrows their base strings). */
static void msg_rebuild(lattice_meta *m)
{
    msg_free(m);
    Latdata__Meta *x = lt_calloc(1, sizeof *x);
    if (!x) return;
    latdata__meta__init(x);
    x->version = m->version;
    x->valid = true;
    if (lattice_meta_is_coordinator(m)) snprintf(m->writer, sizeof m->writer, "%s", m->self->id);
    x->writer = m->writer;
    x->caches = lt_calloc(m->n_caches ? m->n_caches : 1, sizeof *x->caches);
    if (!x->caches) {
        lt_free(x);
        return;
    }
    for (size_t i = 0; i < m->n_caches; i++) {
        lattice_meta_cache *c = m->caches[i];
        size_t need = lattice_cache_config_format(&c->cfg, LATTICE_CACHE_FORMAT_ALL, NULL, 0) + 1;
        Latdata__CacheDef *cd = lt_calloc(1, sizeof *cd + need);
        if (!cd) break;
        latdata__cache_def__init(cd);
        cd->spec = (char *)(cd + 1);
        lattice_cache_config_format(&c->cfg, LATTICE_CACHE_FORMAT_ALL, cd->spec, need);
        cd->base_ids = c->base;
        cd->n_base_ids = c->n_base;
        cd->base_version = c->base_version;
        cd->lost = c->lost_msg;
        cd->n_lost = c->lost_msg ? c->n_lost : 0;
        cd->lost_reset = c->lost_reset;
        cd->restoring = c->restoring;
        if (!c->restoring) set_restore_keep(c, NULL, 0); /* the old message is freed: nothing borrows it */
        cd->restore_keep = (ProtobufCBinaryData){c->n_restore_keep, c->restore_keep};
        x->caches[x->n_caches++] = cd;
    }
    m->msg = x;
}

lattice_status lattice_meta_create(const lattice_meta_config *c, lattice_meta **out)
{
    *out = lt_calloc(1, sizeof **out);
    if (!*out) return LATTICE_ERR_NOMEM;
    (*out)->cfg = *c;
    return LATTICE_OK;
}

void lattice_meta_destroy(lattice_meta *m)
{
    if (!m) return;
    for (size_t i = 0; i < m->n_caches; i++) cache_free(m, m->caches[i]);
    msg_free(m);
    lt_free(m->live_buf);
    lt_free(m->check_buf);
    lt_free(m);
}

bool lattice_meta_valid(const lattice_meta *m) { return m->valid; }
uint64_t lattice_meta_version(const lattice_meta *m) { return m->version; }
size_t lattice_meta_cache_count(const lattice_meta *m) { return m->n_caches; }
lattice_meta_cache *lattice_meta_cache_at(const lattice_meta *m, size_t i) { return i < m->n_caches ? m->caches[i] : NULL; }
const Latdata__Meta *lattice_meta_message(const lattice_meta *m) { return m->msg; }

lattice_meta_cache *lattice_meta_cache_of(const lattice_meta *m, const char *name)
{
    if (!name || !*name) name = "default";
    for (size_t i = 0; i < m->n_caches; i++)
        if (strcmp(m->caches[i]->cfg.name, name) == 0) return m->caches[i];
    return NULL;
}

lattice_meta_cache *lattice_meta_cache_by_serial(const lattice_meta *m, uint64_t serial)
{
    for (size_t i = 0; i < m->n_caches; i++)
        if (m->caches[i]->serial == serial) return m->caches[i];
    return NULL;
}

lattice_status lattice_meta_freeze(lattice_meta *m, const char *name, uint64_t version, const char *coordinator)
{
    if (!coordinator || strcmp(coordinator, m->coordinator) != 0 || version < m->version) return LATTICE_ERR_AGAIN;
    lattice_meta_cache *c = lattice_meta_cache_of(m, name);
    if (!c) return LATTICE_ERR_NO_CACHE;
    if (version > c->frozen_at) c->frozen_at = version;
    return LATTICE_OK;
}

bool lattice_meta_frozen(const lattice_meta_cache *c) { return c->frozen_at != 0; }

bool lattice_meta_apply(lattice_meta *m, const Latdata__Meta *msg)
{
    if (!msg->valid || (m->valid && msg->version <= m->version)) return false;
    if (lattice_meta_is_coordinator(m) && m->valid) return false; /* we are the writer; ours is the truth */
    bool keep[LATTICE_META_MAX_CACHES] = {0};
    for (size_t i = 0; i < msg->n_caches; i++) {
        const Latdata__CacheDef *cd = msg->caches[i];
        lattice_cache_config cfg;
        char err[200];
        if (lattice_cache_config_parse_spec(&cfg, cd->spec, err, sizeof err) != LATTICE_OK) {
            LT_LOG(LT_WARN, "data", "metadata: bad cache spec '%s': %s", cd->spec, err);
            continue;
        }
        lattice_meta_cache *c = lattice_meta_cache_of(m, cfg.name);
        uint64_t held = 0; /* a replaced cache keeps its freeze: its name was prepared */
        if (c && !lattice_cache_config_equal(&c->cfg, &cfg)) {
            held = c->frozen_at;
            for (size_t k = 0; k < m->n_caches; k++)
                if (m->caches[k] == c) remove_cache(m, k);
            c = NULL;
        }
        if (!c) {
            if (add_cache(m, &cfg, cd->base_ids, cd->n_base_ids, cd->base_version) != LATTICE_OK) continue;
            c = m->caches[m->n_caches - 1];
            c->frozen_at = held;
        } else if (c->base_version != cd->base_version) {
            cache_set_base(m, c, cd->base_ids, cd->n_base_ids, cd->base_version);
        }
        lost_parse(c, cd->lost, cd->n_lost);
        c->lost_reset = cd->lost_reset;
        c->restoring = cd->restoring;
        set_restore_keep(c, cd->restore_keep.data, cd->restoring ? cd->restore_keep.len : 0);
        for (size_t k = 0; k < m->n_caches; k++)
            if (m->caches[k] == c) keep[k] = true;
    }
    for (size_t k = m->n_caches; k-- > 0;) {
        if (keep[k]) continue;
        LT_LOG(LT_INFO, "data", "cache %s destroyed", m->caches[k]->cfg.name);
        keep[k] = keep[m->n_caches - 1];
        remove_cache(m, k);
    }
    m->version = msg->version;
    snprintf(m->writer, sizeof m->writer, "%s", msg->writer ? msg->writer : "");
    m->valid = true;
    thaw(m);
    msg_rebuild(m);
    LT_LOG(LT_INFO, "data", "cache metadata version %llu: %zu caches", (unsigned long long)m->version, m->n_caches);
    return true;
}

void lattice_meta_start(lattice_meta *m, const lattice_cache_config *cfgs, size_t n)
{
    char *srv[MAX_MEMBERS];
    size_t ns = live_servers(m, NULL, srv);
    lattice_cache_config def;
    lattice_cache_config_init(&def, "default");
    if (!n) {
        cfgs = &def;
        n = 1;
    }
    for (size_t i = 0; i < n; i++) add_cache(m, &cfgs[i], srv, ns, 1);
    m->version = next_version(m);
    m->valid = true;
    thaw(m);
    msg_rebuild(m);
    LT_LOG(LT_INFO, "data", "coordinator: cache metadata started with %zu caches", m->n_caches);
}

void lattice_meta_start_restart(lattice_meta *m, const lattice_cache_config *cfgs, size_t n,
                                const lattice_meta_restart_base *bases, size_t n_bases)
{
    lattice_meta_start(m, cfgs, n);
    for (size_t b = 0; b < n_bases; b++) {
        lattice_meta_cache *c = lattice_meta_cache_of(m, bases[b].name);
        if (!c || !bases[b].n || bases[b].n > MAX_MEMBERS) continue;
        if (cache_set_base(m, c, bases[b].entries, bases[b].n, bases[b].version + 1) == LATTICE_OK) {
            c->restoring = true;
            set_restore_keep(c, bases[b].keep, bases[b].n_keep);
            LT_LOG(LT_INFO, "data", "coordinator: cache %s restarts on the base of its data directories (%zu servers, "
                   "base version %llu); restoring", c->cfg.name, bases[b].n, (unsigned long long)c->base_version);
        }
    }
    msg_rebuild(m);
}

/* The decision goes at the next msg_rebuild: the message borrows it. */
void lattice_meta_end_restoring(lattice_meta_cache *c) { c->restoring = false; }

lattice_status lattice_meta_add(lattice_meta *m, const char *spec)
{
    lattice_cache_config cfg;
    char err[256];
    if (lattice_cache_config_parse_spec(&cfg, spec, err, sizeof err) != LATTICE_OK) return LATTICE_ERR_INVAL;
    lattice_meta_cache *c = lattice_meta_cache_of(m, cfg.name);
    if (c) return lattice_cache_config_equal(&c->cfg, &cfg) ? LATTICE_OK : LATTICE_ERR_EXISTS;
    char *srv[MAX_MEMBERS];
    size_t n = live_servers(m, NULL, srv);
    lattice_status st = add_cache(m, &cfg, srv, n, 1);
    if (st != LATTICE_OK) return st;
    m->version = next_version(m);
    thaw(m);
    msg_rebuild(m);
    LT_LOG(LT_INFO, "data", "cache %s created (metadata version %llu)", cfg.name, (unsigned long long)m->version);
    return LATTICE_OK;
}

lattice_status lattice_meta_remove(lattice_meta *m, const char *name)
{
    for (size_t i = 0; i < m->n_caches; i++) {
        if (strcmp(m->caches[i]->cfg.name, name) != 0) continue;
        remove_cache(m, i);
        m->version = next_version(m);
        thaw(m);
        msg_rebuild(m);
        LT_LOG(LT_INFO, "data", "cache %s destroyed (metadata version %llu)", name, (unsigned long long)m->version);
        return LATTICE_OK;
    }
    return LATTICE_ERR_NO_CACHE;
}

void lattice_meta_bump(lattice_meta *m)
{
    m->version = next_version(m);
    thaw(m);
    msg_rebuild(m);
}

/* ------------------------------------------------------------- base switch */

lattice_status lattice_meta_switch_base(lattice_meta *m, lattice_meta_cache *c)
{
    char *srv[MAX_MEMBERS];
    size_t n = live_servers(m, NULL, srv);
    lattice_status st = cache_set_base(m, c, srv, n, c->base_version + 1);
    if (st == LATTICE_OK) lost_clear(c); /* every partition has a serving copy again */
    msg_rebuild(m); /* the message borrowed the old base strings */
    return st;
}

bool lattice_meta_switch_due(const lattice_meta_switch_input *in)
{
    if (!in->all_answered || in->base_is_live) return false;
    uint64_t total = in->kept_entries;
    size_t ready = 0;
    for (size_t i = 0; i < in->n_reports; i++) {
        const lattice_meta_switch_report *r = &in->reports[i];
        total += r->entries;
        /* Late affinity: this server loaded every partition it holds
         * MOVING, on the same server set and base as ours. */
        ready += r->rebalance_left == 0 && r->view == in->view && r->base_version == in->base_version;
    }
    /* Nothing to move: switch at once.  Not when partitions are LOST: their
     * data died with their owners, and the survivors' copies (MOVING, partly
     * loaded, uncounted) would serve as if it never existed - reads of
     * acknowledged keys answered "absent". */
    if (total == 0 && !in->lost_partitions) return true;
    return in->rebalance_mode != LATTICE_REBALANCE_NONE && ready == in->live_servers;
}
