/*
 * takeover: a copy that becomes its partition's primary levels the other
 * copies first (data thread).
 *
 * A full_sync primary sends each write to every copy at once, but the
 * copies receive it over separate connections: a primary killed or cut off
 * mid-send leaves one copy with the write and another without it.  Nobody
 * acknowledged such a write (it lacks a copy), yet the copy that has it may
 * be the next primary, which counts everything it holds as committed -
 * its watermark covers the write, so the copy that lacks it serves reads
 * without it, and a resend of the write is answered OK from the resend
 * record the new primary kept (dedup.c).  fault_partition_two_of_five lost
 * an acknowledged SET that way: the copy that missed it read the key
 * absent through the heal and for good.  (Raft's new leader brings its
 * followers' logs level for the same reason.)
 *
 * So when the view changes, each partition this node now leads after it
 * was its copy, and in which it applied writes above the last watermark
 * its old primary sent (clean_take_over: those are the only writes a copy
 * can be missing), has each key those writes touched sent again to every
 * copy - its current value, or its removal, under the version it has here
 * (copies apply only newer versions, so one that has it changes nothing).
 * The keys come from the partition's update history (storage/history.c)
 * or, should it not reach back that far, from a walk of the partition's
 * entries above the watermark (a removal is then not found: logged).
 * Each send is an ordinary full_sync wait in the partition's in-flight
 * list under the version just above the old watermark, so until every copy
 * answered the watermark stays there, reads of those keys at this node wait
 * (clean.c), and so does a resend answered from its record (primary.c).
 */
#include <string.h>

#include "lattice/alloc.h"
#include "lattice/clock.h"
#include "lattice/log.h"
#include "ops_int.h"

typedef struct lv_key {
    void *key;
    size_t key_len;
    uint64_t counter; /* the key's newest change above the watermark */
    bool removed;
} lv_key;

typedef struct lv_keys {
    lv_key *k;
    size_t n, cap;
    uint64_t from;
    bool nomem;
} lv_keys;

static int add_key(lv_keys *ks, const void *key, size_t key_len, uint64_t counter, bool removed)
{
    for (size_t i = 0; i < ks->n; i++) /* oldest first: a later change of a key wins */
        if (ks->k[i].key_len == key_len && !memcmp(ks->k[i].key, key, key_len)) {
            ks->k[i].counter = counter;
            ks->k[i].removed = removed;
            return 0;
        }
    if (ks->n == ks->cap) {
        size_t cap = ks->cap ? 2 * ks->cap : 16;
        lv_key *k = lt_realloc(ks->k, cap * sizeof *k);
        if (!k) {
            ks->nomem = true;
            return 1;
        }
        ks->k = k;
        ks->cap = cap;
    }
    void *copy = lt_malloc(key_len ? key_len : 1);
    if (!copy) {
        ks->nomem = true;
        return 1;
    }
    if (key_len) memcpy(copy, key, key_len);
    ks->k[ks->n++] = (lv_key){copy, key_len, counter, removed};
    return 0;
}

static void keys_free(lv_keys *ks)
{
    for (size_t i = 0; i < ks->n; i++) lt_free(ks->k[i].key);
    lt_free(ks->k);
    *ks = (lv_keys){.from = ks->from};
}

static int from_history(void *arg, const void *key, size_t key_len, uint64_t counter, bool removed)
{
    return add_key(arg, key, key_len, counter, removed);
}

static int from_entry(void *arg, const lattice_store_item *it)
{
    lv_keys *ks = arg;
    return it->version > ks->from ? add_key(ks, it->key, it->key_len, it->version, false) : 0;
}

/* Every key changed above ks->from; false when even the walk failed. */
static bool changed_keys(lattice_meta_cache *c, uint32_t p, lv_keys *ks, bool *walked)
{
    *walked = false;
    if (lattice_store_history_above(c->store, p, ks->from, false, from_history, ks) == LATTICE_OK && !ks->nomem)
        return true;
    keys_free(ks);
    *walked = true;
    lattice_store_cursor *cur = NULL;
    if (lattice_store_cursor_open(c->store, p, &cur) != LATTICE_OK) return false;
    int done = 0;
    while (!done && !ks->nomem)
        if (lattice_store_cursor_next(cur, 256, 1 << 20, from_entry, ks, &done) != LATTICE_OK) break;
    lattice_store_cursor_close(cur);
    return done && !ks->nomem;
}

/* One key's current state, sent again to every copy on a wait of its own. */
static void level_key(lattice_ops *d, lattice_meta_cache *c, uint32_t p, uint64_t from, const lv_key *k)
{
    void *v = NULL;
    lattice_store_meta m = {0};
    repl_out repl = {.needed = true};
    if (lattice_store_get_copy(c->store, p, k->key, k->key_len, &v, &m) == LATTICE_OK) {
        repl.value = v;
        repl.value_len = m.value_len;
        repl.expire_ms = m.expire_ms;
        repl.version = m.version;
        repl.type = m.type;
    } else {
        repl.remove = true; /* removed, or expired since: a removal under its counter */
        repl.version = k->counter;
    }
    lattice_op_result r = {.status = LATTICE_OK};
    origin none = {0}; /* no issuer: chan_complete drops the result */
    waitw *w = primary_wait_begin(d, c, &none, &r, NULL, NULL, primary_after_write, p, from + 1, k->key, k->key_len);
    primary_send_copies(d, c, CTL_REPLICATE, p, k->key, k->key_len, &repl, NULL, 0, &r, w);
    if (w) sync_wait_release(d, w);
    lt_free(v);
}

static void level_partition(lattice_ops *d, lattice_meta_cache *c, uint32_t p, uint64_t from)
{
    lattice_meta_member *owners[2 * (LATTICE_CACHE_MAX_BACKUPS + 1)];
    size_t n = lattice_meta_serving_owners(c, p, owners, LATTICE_CACHE_MAX_BACKUPS + 1);
    n += lattice_meta_moving_owners(c, p, owners + n, LATTICE_CACHE_MAX_BACKUPS + 1);
    if (n < 2) return; /* no other copy to level */
    lv_keys ks = {.from = from};
    bool walked;
    bool ok = changed_keys(c, p, &ks, &walked);
    for (size_t i = 0; i < ks.n; i++) level_key(d, c, p, from, &ks.k[i]);
    fast_mark(c, p); /* not readable on the calling thread while they are in flight */
    d->takeovers++;
    d->takeover_keys += ks.n;
    if (!ok || walked)
        LT_LOG(LT_WARN, "data",
               "cache %s: partition %u taken over with writes above watermark %llu: %s; %zu keys sent to the copies "
               "again",
               c->cfg.name, p, (unsigned long long)from,
               !ok ? "neither its history nor a walk of it could list them all (no memory), the copies may differ "
                     "(lattice verify)"
                   : "its history does not reach back that far, so a key removed meanwhile may stay on a copy",
               ks.n);
    keys_free(&ks);
}

void takeover_check(lattice_ops *d)
{
    if (!lattice_meta_valid(d->meta)) return;
    uint64_t mv = lattice_meta_version(d->meta);
    if (d->takeover_major == d->major && d->takeover_meta == mv) return;
    d->takeover_major = d->major;
    d->takeover_meta = mv;
    uint64_t before = d->takeovers, keys = d->takeover_keys;
    for (size_t i = 0, nc = lattice_meta_cache_count(d->meta); i < nc; i++) {
        lattice_meta_cache *c = lattice_meta_cache_at(d->meta, i);
        if (!c || !c->store || !c->clean || c->cfg.sync != LATTICE_SYNC_FULL) continue;
        for (uint32_t p = 0; p < c->cfg.partitions; p++) {
            lattice_meta_member *own[1];
            if (lattice_meta_serving_owners(c, p, own, 1) != 1 || !own[0]->self) continue;
            uint64_t from;
            if (clean_take_over(c, p, &from)) level_partition(d, c, p, from);
        }
    }
    if (d->takeovers != before)
        LT_LOG(LT_INFO, "data", "took over %llu partitions with writes their copies may lack: %llu keys sent to them again",
               (unsigned long long)(d->takeovers - before), (unsigned long long)(d->takeover_keys - keys));
}

/* ---- the other half: a copy that holds more than its new primary ----
 *
 * The copies of a killed or cut-off primary each hold a prefix of its
 * stream of writes (one connection each, in order); the new primary may
 * hold the shorter one.  Then another copy keeps writes nobody
 * acknowledged under counters the new primary numbers its own writes
 * with, and its watermark would soon cover them: that copy would answer
 * reads with a value the primary does not have, and differ from it for
 * good.  Such a copy notices as the new primary's first replicate or
 * watermark reaches it (clean_note_sender) and asks it to rewrite each key
 * it holds above its old watermark: the primary raises its counter to the
 * copy's version, writes the key's state as it holds it (its value, or
 * its absence) under the next counter, and replicates that to every copy
 * like any write; the copy applies it (newer) and answers reads of the
 * partition itself again once every key it asked for was rewritten. */

static void level_answered(lattice_ops *d, pend *p, const Latdata__Resp *rs);

/* Sends q (owned) to `to` as a CTL_LEVEL of c's partition; false when it
 * could not (no memory). */
static bool level_send(lattice_ops *d, peer *to, lattice_meta_cache *c, uint32_t partition, Latdata__Req *q,
                       uint8_t attempts)
{
    pend *p = q ? chan_pend_new(d, level_answered, to) : NULL;
    if (!p) {
        lt_free(q);
        return false;
    }
    p->cache_serial = c->serial;
    p->partition = partition;
    p->ctl = CTL_LEVEL;
    p->attempts = attempts;
    q->id = p->id;
    /* Kept for another attempt (NULL: none), and sent again with the same
     * id should the connection lose frames (sync_wait_resend). */
    p->resend = chan_req_dup(q);
    p->sent_losses = to->dealer->losses;
    chan_send(d, to, q);
    return true;
}

static void level_answered(lattice_ops *d, pend *p, const Latdata__Resp *rs)
{
    lattice_meta_cache *c = lattice_meta_cache_by_serial(d->meta, p->cache_serial);
    Latdata__Req *again = p->resend;
    p->resend = NULL;
    /* Refused or unanswered (the view moved on meanwhile, a lost
     * connection): asked again of the same primary while it still leads
     * the partition, a few times. */
    lattice_meta_member *own[1];
    peer *to = chan_peer_by_id(d, p->target);
    if ((!rs || rs->status != LATTICE_OK) && again && c && to && to->dealer && p->attempts < 4 &&
        lattice_meta_serving_owners(c, p->partition, own, 1) == 1 && !strcmp(own[0]->id, p->target)) {
        again->topo_major = d->major;
        again->meta_version = lattice_meta_version(d->meta);
        if (level_send(d, to, c, p->partition, again, (uint8_t)(p->attempts + 1))) return; /* still levelling */
        again = NULL;
    }
    lt_free(again);
    if (c) {
        clean_level_end(c, p->partition);
        fast_mark(c, p->partition); /* may answer reads itself again */
    }
    if ((!rs || rs->status != LATTICE_OK) && d->level_failed++ % 100 == 0)
        LT_LOG(LT_WARN, "data",
               "cache %s: partition %u: a key this copy holds above its old primary's last watermark was not "
               "rewritten by the new primary (%s; %llu so far): this copy may differ from it (lattice verify)",
               c ? c->cfg.name : "(gone)", p->partition, rs ? lattice_strerror((lattice_status)rs->status) : "no answer",
               (unsigned long long)d->level_failed);
}

void takeover_ask(lattice_ops *d, lattice_meta_cache *c, uint32_t partition, uint64_t from, const char *sender)
{
    peer *to = chan_peer_by_id(d, sender);
    if (!to || to->m.self || !to->dealer || !c->store) return;
    lv_keys ks = {.from = from};
    bool walked;
    bool ok = changed_keys(c, partition, &ks, &walked);
    for (size_t i = 0; i < ks.n; i++) {
        /* The copy's own version of the key may be above the change the
         * history names (a later one it took from a takeover's resend). */
        lattice_store_meta m = {0};
        int g = lattice_store_get(c->store, partition, ks.k[i].key, ks.k[i].key_len, NULL, 0, &m);
        uint64_t version = (g == LATTICE_OK || g == LATTICE_ERR_TOO_LARGE) && m.version > ks.k[i].counter
                               ? m.version
                               : ks.k[i].counter;
        Latdata__Req *q = chan_req_new_from(CTL_LEVEL, c->cfg.name, ks.k[i].key, ks.k[i].key_len, NULL, 0, NULL);
        if (q) {
            q->partition = partition;
            q->version = version;
            q->sender = d->self_id;
            q->topo_major = d->major;
            q->meta_version = lattice_meta_version(d->meta);
        }
        if (!level_send(d, to, c, partition, q, 0)) {
            ok = false;
            continue;
        }
        clean_level_begin(c, partition);
    }
    d->levels_asked += ks.n;
    uint64_t now = lt_mono_ms();
    if (ks.n && now - d->level_logged_ms >= 1000) { /* at most once a second */
        d->level_logged_ms = now;
        LT_LOG(LT_INFO, "data",
               "cache %s: partition %u: a new primary leads it while this copy holds writes above the old one's last "
               "watermark %llu: asked it to rewrite %zu keys (%llu keys of any partition so far)",
               c->cfg.name, partition, (unsigned long long)from, ks.n, (unsigned long long)d->levels_asked);
    }
    if (!ok || walked)
        LT_LOG(LT_WARN, "data",
               "cache %s: partition %u: this copy holds writes above its old primary's last watermark %llu; %s; "
               "%zu keys sent to the new primary to rewrite",
               c->cfg.name, partition, (unsigned long long)from,
               !ok ? "not all of them could be listed or sent (no memory): it may differ from its primary (lattice "
                     "verify)"
                   : "its history does not reach back that far, so a key it removed meanwhile is not among them",
               ks.n);
    keys_free(&ks);
}

void takeover_level_serve(void *arg, const Latdata__Req *q, const void *from)
{
    lattice_ops *d = arg;
    const origin *o = from;
    lattice_op_result r = {.status = LATTICE_OK};
    lattice_meta_cache *c = lattice_meta_valid(d->meta) ? lattice_meta_cache_of(d->meta, q->cache) : NULL;
    lattice_meta_member *owners[2 * (LATTICE_CACHE_MAX_BACKUPS + 1)];
    size_t n = c && q->partition < c->cfg.partitions
                   ? lattice_meta_serving_owners(c, q->partition, owners, LATTICE_CACHE_MAX_BACKUPS + 1)
                   : 0;
    if (!c || !c->store) r.status = LATTICE_ERR_NO_CACHE;
    else if (!n || !owners[0]->self || ops_not_meant_here(d, o, q->topo_major)) r.status = LATTICE_ERR_NOT_OWNER;
    else if (!ops_serving(d, c)) r.status = ops_refusal(d, &r.num);
    if (r.status != LATTICE_OK) {
        chan_reply(d, o, &r, NULL, 0, false);
        return;
    }
    uint32_t p = q->partition;
    n += lattice_meta_moving_owners(c, p, owners + n, LATTICE_CACHE_MAX_BACKUPS + 1);
    /* Above the copy's version, so that every copy applies it: the value
     * as any write of it (exec_write_typed: the next counter), or - absent
     * here, or no room to write it again - its removal under that counter. */
    if (c->counter[p] < q->version) c->counter[p] = q->version;
    void *v = NULL;
    lattice_store_meta m = {0};
    repl_out repl;
    exec_in in = {LATTICE_OP_PUT, 0, p, q->key.data, q->key.len, NULL, 0, 0, 0};
    if (lattice_store_get_copy(c->store, p, q->key.data, q->key.len, &v, &m) != LATTICE_OK ||
        exec_write_typed(c, &in, v, m.value_len, m.expire_ms, m.type, &repl) != LATTICE_OK) {
        uint64_t version = ++c->counter[p];
        if (c->before_change) c->before_change(c, p); /* before the rows change: inline readers (fast.c) */
        if (lattice_store_remove_v(c->store, p, q->key.data, q->key.len, version) != LATTICE_OK)
            lattice_store_history_note(c->store, p, q->key.data, q->key.len, version, true);
        c->writes++;
        repl = (repl_out){true, true, NULL, 0, 0, version, 0};
    }
    fast_mark(c, p);
    uint64_t version = repl.version;
    waitw *w = n > 1 && c->cfg.sync == LATTICE_SYNC_FULL
                   ? primary_wait_begin(d, c, o, &r, NULL, NULL, primary_after_write, p, version, q->key.data,
                                        q->key.len)
                   : NULL;
    primary_send_copies(d, c, CTL_REPLICATE, p, q->key.data, q->key.len, &repl, NULL, 0, &r, w);
    if (w) sync_wait_release(d, w);
    else chan_complete(d, o, &r);
    lt_free(v);
}
