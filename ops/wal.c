/*
 * wal: the operation path on a node with --data-dir (data thread;
 * docs/PERSISTENCE.md).
 *
 *  wal_init     opens the data directory (persist/): recovery rebuilds each
 *               cache it held into a store of this node's region, and
 *               those caches join the ones this node declares (--cache).
 *  wal_attach   each store the metadata creates here gets persist's change
 *               hook, so every change of it - primary writes, backup
 *               applies, transactions, CLEAR, evictions, rebalance loads,
 *               undo writes, salvage restores - becomes a log record.  At a
 *               cache's first appearance the recovered copy is adopted (the
 *               store is swapped in before anything else uses it) only when
 *               this node is the coordinator of a grid of one: the grid
 *               was gone and this node's copy is all there is.  A node that
 *               joins other live servers does not serve its copies - they
 *               may hold keys the grid removed while it was away: one whose
 *               checkpoint holds delta marks is kept aside as delta bases
 *               (keep_aside, salvage.c), the others are dropped (logged);
 *               its partitions come by rebalance.
 *  wal_hold     a reply (chan_complete) while records are not yet durable
 *               waits, in order, until the log's durable LSN passes what was
 *               appended when the reply was made; the log thread writes the
 *               data thread's eventfd when it moves, and wal_release (every
 *               loop turn) sends what is due.  So no client, and no primary
 *               waiting on this copy, hears of a write before it is on
 *               disk by the --wal-fsync mode, and no read returns a value
 *               that a crash could take back.
 *               A reply that cannot be held (no memory) waits for the log
 *               on the data thread instead: never sent early.
 *  wal_refuses  while the log cannot write (a full disk), writes are
 *               refused with DISK_FULL; reads go on.  Replies held when it
 *               failed get DISK_FULL.
 *  wal_tick     a checkpoint once the log passed its size bound; wal_stop
 *               one more at a graceful stop, after every held reply went.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <urcu.h>

#include "lattice/alloc.h"
#include "lattice/clock.h"
#include "lattice/log.h"
#include "ops_int.h"
#include "persist/persist.h"

typedef struct held {
    uint64_t lsn;
    origin org;
    lattice_op_result r;
    void *value;
} held;

typedef struct attached {
    lattice_meta_cache *c;
    lt_persist_cache *pc;
    bool restoring; /* as last seen: its end is this node's cue (end_restoring) */
} attached;

struct ops_wal {
    lt_persist *p;
    held *q;
    size_t head, n, cap;
    attached att[LATTICE_META_MAX_CACHES];
    size_t n_att;
    bool decided;
    bool cid_saved;
    uint64_t adopted_entries;
    uint64_t ckpt_after_ms; /* a failed checkpoint is tried again from then on */
    uint64_t nomem_waits;   /* replies that could not be held and waited for the log instead */
    char *bases;            /* DIR/base as last written (restart.c reads it) */
    uint64_t bases_meta;    /* ... at this metadata version */
    char lineage_saved[OPS_LINEAGE_BYTES]; /* DIR/incarnations as last written */
};

lattice_status wal_init(lattice_ops *d, const char *dir, const char *mode, int checkpoint_mb)
{
    lt_wal_fsync m = LT_WAL_GROUP;
    if (mode && lt_wal_fsync_parse(mode, &m) != LATTICE_OK) {
        LT_LOG(LT_ERROR, "data", "--wal-fsync %s: wants always, group or off", mode);
        return LATTICE_ERR_INVAL;
    }
    struct ops_wal *w = lt_calloc(1, sizeof *w);
    if (!w) return LATTICE_ERR_NOMEM;
    lt_persist_config pc = {.dir = dir,
                            .fsync = m,
                            .region = d->region,
                            .notify_fd = d->efd,
                            .checkpoint_bytes = checkpoint_mb > 0 ? (uint64_t)checkpoint_mb << 20 : 0,
                            .on_durable = loop_release_durable,
                            .on_durable_arg = d};
    rcu_register_thread();
    lattice_status st = lt_persist_open(&pc, &w->p);
    rcu_unregister_thread();
    if (st != LATTICE_OK) {
        lt_free(w);
        return st;
    }
    d->wal = w;
    /* The caches it held are declared like --cache ones (the flag's
     * config wins for a name both give). */
    for (size_t i = 0; i < lt_persist_recovered_count(w->p); i++) {
        const char *spec = lt_persist_recovered_spec(w->p, i);
        lattice_cache_config cfg;
        char err[256];
        if (!spec || d->n_local_cfgs == LATTICE_MAX_CACHES ||
            lattice_cache_config_parse_spec(&cfg, spec, err, sizeof err) != LATTICE_OK)
            continue;
        bool have = false;
        for (size_t k = 0; k < d->n_local_cfgs && !have; k++) have = !strcmp(d->local_cfgs[k].name, cfg.name);
        if (!have) d->local_cfgs[d->n_local_cfgs++] = cfg;
    }
    return LATTICE_OK;
}

void wal_free(lattice_ops *d)
{
    struct ops_wal *w = d->wal;
    if (!w) return;
    d->wal = NULL; /* before the metadata goes: a store freed at exit is no DROP */
    for (size_t i = 0; i < w->n; i++) lt_free(w->q[(w->head + i) % w->cap].value);
    lt_free(w->q);
    lt_free(w->bases);
    lt_persist_close(w->p);
    lt_free(w);
}

static attached *att_of(struct ops_wal *w, const lattice_meta_cache *c)
{
    for (size_t i = 0; i < w->n_att; i++)
        if (w->att[i].c == c) return &w->att[i];
    return NULL;
}

static size_t servers(const lattice_ops *d)
{
    size_t n = 0;
    for (size_t i = 0; i < d->n_peers; i++) n += d->peers[i]->m.server;
    return n;
}

static void spec_of(const lattice_meta_cache *c, char *buf, size_t cap)
{
    lattice_cache_config_format(&c->cfg, 0, buf, cap);
}

struct lt_persist *wal_persist(const lattice_ops *d) { return d->wal ? d->wal->p : NULL; }

lt_persist *wal_round_begin(lattice_ops *d)
{
    lt_persist *p = d->wal ? d->wal->p : NULL;
    if (p) lt_persist_hold(p);
    return p;
}

void wal_round_end(lt_persist *p)
{
    if (p) lt_persist_unhold(p);
}

bool wal_has_recovered(const lattice_ops *d)
{
    if (!d->wal || d->wal->decided) return false;
    for (size_t i = 0; i < lt_persist_recovered_count(d->wal->p); i++)
        if (lt_persist_recovered_spec(d->wal->p, i)) return true;
    return false;
}

/* Whether this node keeps the copy of c it recovered - the one place that
 * decides it (at the first metadata this node holds):
 *   - a whole-grid restart (restart.c): the coordinator started c on the
 *     base the data directories kept, listing this node under its node id
 *     now (it reported its copies before): kept, and made equal to the
 *     copy the coordinator picked per partition while c is restoring;
 *   - the same, but the base lists this node under an earlier node id: it
 *     reported, was killed while the grid restores and is back - the
 *     decision may keep its copy, which the coordinator has it send to the
 *     owners from here (it is no owner under its new id; end_restoring
 *     drops what it does not own);
 *   - the coordinator of a grid of one: the grid was gone, and this copy
 *     is all there is;
 *   - otherwise the node joined a live grid: not served (kept aside as delta
 *     bases by keep_aside when it has marks, else dropped), *why says so - it
 *     may hold keys the grid removed or overwrote while it was away, and
 *     it gets its partitions by rebalance as an empty node does. */
static bool keep_recovered(lattice_ops *d, const lattice_meta_cache *c, const char **why)
{
    if (c->restoring && d->self) {
        char me[sizeof d->self->m.cid + sizeof d->self_id + 1];
        snprintf(me, sizeof me, "%s %s", d->self->m.cid, d->self_id);
        size_t cid_len = strlen(d->self->m.cid);
        for (size_t i = 0; i < c->n_base; i++)
            if (!strcmp(c->base[i], me) || (!strncmp(c->base[i], me, cid_len + 1) && strcmp(c->base[i] + cid_len + 1, "-")))
                return true;
        *why = "the grid restarted without this node's report: its copy may be stale, it gets its partitions by "
               "rebalance";
        return false;
    }
    if (lattice_meta_is_coordinator(d->meta) && servers(d) <= 1) return true;
    *why = "other servers are up: this node's copy may be stale, it gets its partitions by rebalance";
    return false;
}

/* DIR/base: every cache's base as applied here, rewritten when it changed
 * (restart.c reads it at the next start). */
static void save_bases(lattice_ops *d)
{
    struct ops_wal *w = d->wal;
    if (!lattice_meta_valid(d->meta) || w->bases_meta == lattice_meta_version(d->meta)) return;
    /* Not while a cache restores: the kept base still ranks this node's
     * copies if the grid goes down again before the copies are equal (an
     * old data directory's must not rank as new as the others). */
    for (size_t i = 0; i < lattice_meta_cache_count(d->meta); i++)
        if (lattice_meta_cache_at(d->meta, i)->restoring) return;
    w->bases_meta = lattice_meta_version(d->meta);
    size_t cap = 256;
    for (size_t i = 0; i < lattice_meta_cache_count(d->meta); i++)
        cap += 96 + lattice_meta_cache_at(d->meta, i)->n_base * 162;
    char *t = lt_malloc(cap);
    if (!t) return;
    size_t at = 0;
    for (size_t i = 0; i < lattice_meta_cache_count(d->meta); i++) {
        const lattice_meta_cache *c = lattice_meta_cache_at(d->meta, i);
        at += (size_t)snprintf(t + at, cap - at, "%s %" PRIu64, c->cfg.name, c->base_version);
        for (size_t k = 0; k < c->n_base; k++) {
            size_t len = strcspn(c->base[k], " ");
            at += (size_t)snprintf(t + at, cap - at, " %.*s", (int)len, c->base[k]);
        }
        at += (size_t)snprintf(t + at, cap - at, "\n");
    }
    if (w->bases && !strcmp(w->bases, t)) {
        lt_free(t);
        return;
    }
    if (lt_persist_save_bases(w->p, t) != LATTICE_OK) {
        LT_LOG(LT_WARN, "data", "%s: cannot write the base file: a whole-grid restart would not know this node's base",
               lt_persist_dir(w->p));
        lt_free(t);
        return;
    }
    lt_free(w->bases);
    w->bases = t;
}

/* c ended restoring (a whole-grid restart): readers look again, and
 * partitions this node neither serves nor will load - copies its data
 * directory kept from an older base - go (logged), so no later restart
 * counts them. */
static void end_restoring(lattice_ops *d, lattice_meta_cache *c)
{
    uint32_t cleared = 0;
    for (uint32_t p = 0; c->store && p < c->cfg.partitions; p++) {
        fast_mark(c, p);
        lattice_meta_member *own[2 * (LATTICE_CACHE_MAX_BACKUPS + 1)];
        size_t n = lattice_meta_serving_owners(c, p, own, LATTICE_CACHE_MAX_BACKUPS + 1);
        n += lattice_meta_moving_owners(c, p, own + n, LATTICE_CACHE_MAX_BACKUPS + 1);
        bool mine = false;
        for (size_t i = 0; i < n && !mine; i++) mine = own[i]->self;
        if (mine || !lattice_store_count(c->store, p)) continue;
        lattice_store_clear(c->store, p);
        cleared++;
    }
    if (d->grid_hooks.reloads_end) d->grid_hooks.reloads_end(d);
    LT_LOG(LT_INFO, "data", "cache %s: restored from the data directories; serving%s", c->cfg.name,
           cleared ? " (copies of partitions this node does not own dropped)" : "");
}

/* Swaps the recovered store and counters in for the empty ones the
 * metadata just made. */
static bool adopt(lattice_ops *d, lattice_meta_cache *c, const char *spec)
{
    lattice_store *s = NULL;
    uint64_t *counter = NULL;
    if (lt_persist_take(d->wal->p, c->cfg.name, spec, &s, &counter, c->cfg.partitions) != LATTICE_OK) return false;
    fast_cache_gone(d, c); /* no inline reader holds the old store after this (fast.c) */
    lattice_store_destroy(c->store);
    lt_free(c->counter);
    c->store = s;
    c->counter = counter;
    lattice_store_sweeper_start(s, 1000);
    uint64_t n = 0;
    for (uint32_t p = 0; p < c->cfg.partitions; p++) n += lattice_store_count(s, p);
    d->wal->adopted_entries += n;
    LT_LOG(LT_INFO, "data", "cache %s: %" PRIu64 " entries restored from %s", c->cfg.name, n, lt_persist_dir(d->wal->p));
    return true;
}

/* Whether a lost record of c names one of ids. */
static bool lost_names(const lattice_meta_cache *c, const char *ids)
{
    for (size_t i = 0; ids[0] && i < c->n_lost; i++)
        if (lattice_meta_lost_names(&c->lost[i], ids)) return true;
    return false;
}

/* A recovered copy this node does not serve (it joins a live grid): kept
 * aside (grid/salvage.c) - with the delta marks its last checkpoint wrote,
 * as delta bases, so its partitions come back as only what it missed
 * (docs/PERSISTENCE.md, "Delta rejoin"); and where a lost record names one
 * of the incarnations that wrote it (`prev`), for that record: two servers
 * of a backups=1 cache killed together and restarted hold the only copies
 * of their shared partitions.  Otherwise it is dropped. */
static void keep_aside(lattice_ops *d, lattice_meta_cache *c, const char *spec, const char *prev)
{
    lt_persist *p = d->wal->p;
    for (size_t i = 0; i < lt_persist_recovered_count(p); i++) {
        const char *rs = lt_persist_recovered_spec(p, i), *name;
        lattice_store *s;
        const uint64_t *counter;
        uint32_t parts;
        if (!rs || strcmp(rs, spec) || !lt_persist_recovered_copy(p, i, &name, &s, &counter, &parts) ||
            strcmp(name, c->cfg.name) || parts != c->cfg.partitions)
            continue;
        bool delta = lt_persist_recovered_marks(p, i) && c->cfg.sync == LATTICE_SYNC_FULL && c->cfg.history;
        if (!delta && !lost_names(c, prev)) continue;
        uint64_t *cnt = NULL, *marks = NULL;
        if (!d->grid_hooks.keep_recovered || lt_persist_take_aside(p, i, &s, &cnt, &marks) != LATTICE_OK) return;
        if (!delta) {
            lt_free(marks);
            marks = NULL;
        }
        d->grid_hooks.keep_recovered(d, &c->cfg, s, cnt, marks, prev);
        return;
    }
}

/* The incarnations that wrote the data directory (DIR/incarnations, oldest
 * first), into out; "" when it has none (a new or older directory). */
static void prev_lineage(struct ops_wal *w, char *out, size_t cap)
{
    char *t = lt_persist_read_text(w->p, "incarnations");
    snprintf(out, cap, "%s", t ? t : "");
    out[strcspn(out, "\r\n")] = 0;
    lt_free(t);
}

/* d->lineage after the decision: the directory's writers and this
 * incarnation when it adopted their copies, else this incarnation alone
 * (at most OPS_LINEAGE_IDS, the oldest dropped). */
static void set_lineage(lattice_ops *d, const char *prev, bool adopted)
{
    char t[OPS_LINEAGE_BYTES * 2];
    snprintf(t, sizeof t, "%s%s%s", adopted ? prev : "", adopted && prev[0] ? " " : "", d->self_id);
    size_t words = 1;
    for (const char *q = t; (q = strchr(q, ' ')); q++) words++;
    const char *from = t;
    for (; words > OPS_LINEAGE_IDS; words--) from = strchr(from, ' ') + 1;
    size_t len = strlen(from);
    if (len >= sizeof d->lineage) { /* ids longer than a node's: a damaged file, not a lineage */
        from = d->self_id;
        len = strlen(from);
    }
    memcpy(d->lineage, from, len + 1);
}

/* DIR/incarnations := the lineage of the stores this node logs now. */
static void save_lineage(lattice_ops *d)
{
    struct ops_wal *w = d->wal;
    const char *now = d->lineage[0] ? d->lineage : d->self_id;
    if (!now[0] || !strcmp(w->lineage_saved, now)) return;
    char line[OPS_LINEAGE_BYTES + 2];
    snprintf(line, sizeof line, "%s\n", now);
    if (lt_persist_save_text(w->p, "incarnations", line) != LATTICE_OK) {
        LT_LOG(LT_WARN, "data", "%s: cannot write the incarnations file: after a kill its copies would not answer a "
               "lost record", lt_persist_dir(w->p));
        return;
    }
    snprintf(w->lineage_saved, sizeof w->lineage_saved, "%s", now);
}

void wal_attach(lattice_ops *d)
{
    struct ops_wal *w = d->wal;
    if (!w || !lattice_meta_valid(d->meta)) return;
    /* The coordinator pushes the metadata on the data port, and it may come
     * before this node's own topology: without d->self keep_recovered would
     * not find this node in a restoring base and drop the copy the restore
     * decided to keep (it_restart an_old_data_dir_and_the_coordinator_dies:
     * the returned coordinator held counter 0 where it was to send its
     * copy).  So nothing is decided or attached before the topology;
     * control_on_topology calls again. */
    if (!w->decided && !d->self) return;
    if (!w->cid_saved && d->self) {
        const char *prev = lt_persist_prev_cid(w->p);
        if (prev[0] && strcmp(prev, d->self->m.cid))
            LT_LOG(LT_WARN, "data", "%s was written by %s; this node is %s", lt_persist_dir(w->p), prev, d->self->m.cid);
        w->cid_saved = lt_persist_save_cid(w->p, d->self->m.cid) == LATTICE_OK;
    }
    if (!w->decided) {
        /* Adopt what keep_recovered keeps, then drop the rest - DROP records
         * before any store's CACHE record, so a later restart replays the
         * new stores and not the dropped copies. */
        w->decided = true;
        const char *why = "the grid has no cache of that name and config";
        char prev[OPS_LINEAGE_BYTES];
        prev_lineage(w, prev, sizeof prev);
        bool adopted = false;
        for (size_t i = 0; i < lattice_meta_cache_count(d->meta); i++) {
            lattice_meta_cache *c = lattice_meta_cache_at(d->meta, i);
            char spec[1024];
            spec_of(c, spec, sizeof spec);
            if (c->store && !att_of(w, c) && keep_recovered(d, c, &why)) adopted |= adopt(d, c, spec);
            else if (c->store && !att_of(w, c)) keep_aside(d, c, spec, prev);
        }
        set_lineage(d, prev, adopted);
        lt_persist_discard(w->p, why);
        d->heap_freed = true; /* the copies not adopted went with it */
    }
    save_lineage(d);
    for (size_t i = 0; i < lattice_meta_cache_count(d->meta); i++) {
        lattice_meta_cache *c = lattice_meta_cache_at(d->meta, i);
        if (!c->store || att_of(w, c) || w->n_att == LATTICE_META_MAX_CACHES) continue;
        char spec[1024];
        spec_of(c, spec, sizeof spec);
        lt_persist_cache *pc = lt_persist_cache_attach(w->p, c->store, c->cfg.name, spec, c->cfg.partitions);
        if (!pc) {
            LT_LOG(LT_ERROR, "data", "cache %s: out of memory: its writes are not logged", c->cfg.name);
            continue;
        }
        lt_persist_cache_counters(pc, c->counter);
        w->att[w->n_att++] = (attached){c, pc, c->restoring};
    }
    for (size_t i = 0; i < w->n_att; i++) {
        attached *a = &w->att[i];
        if (a->restoring && !a->c->restoring) end_restoring(d, a->c);
        a->restoring = a->c->restoring;
    }
    save_bases(d);
}

void wal_cache_gone(lattice_ops *d, lattice_meta_cache *c)
{
    struct ops_wal *w = d->wal;
    if (!w) return;
    attached *a = att_of(w, c);
    if (!a) return;
    lt_persist_cache_drop(a->pc);
    *a = w->att[--w->n_att];
}

bool wal_refuses(lattice_ops *d) { return d->wal && lt_persist_failed(d->wal->p, NULL); }

bool wal_durable(lattice_ops *d)
{
    struct ops_wal *w = d->wal;
    return !w || (!lt_persist_failed(w->p, NULL) && lt_persist_appended(w->p) <= lt_persist_durable(w->p));
}

/* No room to hold a reply (an allocation failed): it is not sent before
 * its records are durable either.  The data thread waits here for the log
 * (one batch: the log thread never needs the data thread to move on),
 * sends the held replies ahead of it - all due by then - and then this
 * one; should the log fail meanwhile, its issuer hears DISK_FULL, as a
 * held reply would. */
static void answer_when_durable(lattice_ops *d, uint64_t lsn, const origin *org, const lattice_op_result *r)
{
    struct ops_wal *w = d->wal;
    while (lt_persist_durable(w->p) < lsn && !lt_persist_failed(w->p, NULL)) {
        struct timespec t = {0, 100000L};
        nanosleep(&t, NULL);
    }
    w->nomem_waits++;
    wal_release(d);
    if (lt_persist_durable(w->p) < lsn) {
        lattice_op_result no = {.status = LATTICE_ERR_DISK_FULL};
        chan_complete_now(d, org, &no);
    } else {
        chan_complete_now(d, org, r);
    }
}

bool wal_hold(lattice_ops *d, const origin *org, const lattice_op_result *r)
{
    struct ops_wal *w = d->wal;
    if (!w || (!org->local && !org->ident_len)) return false;
    uint64_t a = lt_persist_appended(w->p);
    if (a <= lt_persist_durable(w->p) && !w->n) return false;
    if (lt_persist_failed(w->p, NULL)) return false;
    if (w->n == w->cap) {
        size_t cap = w->cap ? w->cap * 2 : 256;
        held *q = lt_malloc(cap * sizeof *q);
        if (!q) {
            answer_when_durable(d, a, org, r);
            return true;
        }
        for (size_t i = 0; i < w->n; i++) q[i] = w->q[(w->head + i) % w->cap];
        lt_free(w->q);
        w->q = q;
        w->cap = cap;
        w->head = 0;
    }
    void *value = NULL;
    if (r->value_len) {
        value = lt_malloc(r->value_len);
        if (!value) {
            answer_when_durable(d, a, org, r);
            return true;
        }
        memcpy(value, r->value, r->value_len);
    }
    held *h = &w->q[(w->head + w->n) % w->cap];
    h->lsn = a;
    h->org = *org;
    h->r = *r;
    h->value = value;
    w->n++;
    return true;
}

uint64_t wal_nomem_waits(const lattice_ops *d) { return d->wal ? d->wal->nomem_waits : 0; }

void wal_release(lattice_ops *d)
{
    struct ops_wal *w = d->wal;
    if (!w || !w->n) return;
    uint64_t dur = lt_persist_durable(w->p);
    bool failed = lt_persist_failed(w->p, NULL);
    while (w->n) {
        held h = w->q[w->head];
        if (h.lsn > dur && !failed) break;
        w->head = (w->head + 1) % w->cap;
        w->n--;
        lattice_op_result r = h.r;
        r.value = h.value;
        if (h.lsn > dur) r = (lattice_op_result){.status = LATTICE_ERR_DISK_FULL};
        chan_complete_now(d, &h.org, &r);
        lt_free(h.value);
    }
}

static lattice_status checkpoint(lattice_ops *d)
{
    struct ops_wal *w = d->wal;
    lt_persist_ckpt_cache cc[LATTICE_META_MAX_CACHES];
    char specs[LATTICE_META_MAX_CACHES][1024];
    uint64_t *marks[LATTICE_META_MAX_CACHES];
    memset(cc, 0, sizeof cc);
    size_t n = 0;
    for (size_t i = 0; i < w->n_att; i++) {
        lattice_meta_cache *c = w->att[i].c;
        if (!c->store) continue;
        spec_of(c, specs[n], sizeof specs[n]);
        /* The delta marks (clean_delta_mark): after a restart into a live
         * grid the recovered copy receives only what it missed above them. */
        uint64_t *m = lt_malloc((size_t)c->cfg.partitions * sizeof *m);
        bool any = false;
        for (uint32_t p = 0; m && p < c->cfg.partitions; p++) {
            if (!clean_delta_mark(c, p, &m[p])) m[p] = LT_MARK_NONE;
            any |= m[p] != LT_MARK_NONE;
        }
        if (!any) lt_free(m), m = NULL;
        marks[n] = m;
        cc[n] = (lt_persist_ckpt_cache){c->cfg.name, specs[n], c->store, c->counter, c->cfg.partitions, m};
        n++;
    }
    lattice_status st = lt_persist_checkpoint(w->p, cc, n);
    for (size_t i = 0; i < n; i++) lt_free(marks[i]);
    return st;
}

void wal_tick(lattice_ops *d)
{
    struct ops_wal *w = d->wal;
    if (w && w->decided) save_bases(d); /* the coordinator's own base switches too */
    if (w && d->grid_hooks.durable_tick) d->grid_hooks.durable_tick(d);
    /* Not before the recovered copies were adopted or dropped: a checkpoint
     * without them would let their log go. */
    if (!w || !w->decided || !lt_persist_checkpoint_due(w->p) || lt_persist_failed(w->p, NULL) ||
        lt_mono_ms() < w->ckpt_after_ms)
        return;
    if (checkpoint(d) != LATTICE_OK) w->ckpt_after_ms = lt_mono_ms() + 10000; /* logged; the log keeps it all */
}

void wal_stop(lattice_ops *d)
{
    struct ops_wal *w = d->wal;
    if (!w) return;
    /* Every record durable (bounded: a failed disk gives up), every held
     * reply sent, then a checkpoint so the next start reads little log. */
    uint64_t want = lt_persist_appended(w->p);
    for (int i = 0; i < 10000 && lt_persist_durable(w->p) < want && !lt_persist_failed(w->p, NULL); i++) {
        struct timespec t = {0, 1000000L};
        nanosleep(&t, NULL);
    }
    wal_release(d);
    while (w->n) { /* the log never caught up: the issuers hear STOPPED (not acknowledged) */
        held h = w->q[w->head];
        w->head = (w->head + 1) % w->cap;
        w->n--;
        lattice_op_result r = {.status = LATTICE_ERR_STOPPED};
        chan_complete_now(d, &h.org, &r);
        lt_free(h.value);
    }
    if (w->decided && !lt_persist_failed(w->p, NULL)) (void)checkpoint(d); /* logged when it fails */
}
