/*
 * Routing on a hand-built data-thread state (no sockets, no thread): where
 * each op goes, that ops bound for one node share one outgoing message, and
 * the errors an issuer gives without asking anyone.
 */
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <urcu.h>

#include "run_suite.h"
#include "lattice/alloc.h"
#include "fabric/fabric.h"
#include "ops_int.h"

static lattice_ops *d;

/* Every pending request, newest first (the table is fabric/pending.c's). */
#define EACH_PEND(x)                                                                                          \
    for (const fab_pend_node *e_##x = fab_pending_first(d->pending); e_##x; e_##x = fab_pending_after(e_##x)) \
        for (pend *x = fab_pend_item(e_##x); x; x = NULL)
static lattice_meta_cache *c;
static peer peers[4]; /* 0..2 servers, 3 = self */
static lattice_region *region;
static link_conn dummy_conn; /* never connected: nothing is flushed */

typedef struct seen {
    int calls;
    lattice_status last;
} seen;

static void cb(void *arg, size_t i, const lattice_op_result *r)
{
    (void)i;
    seen *s = arg;
    s->calls++;
    s->last = r->status;
}

/* A grid of three servers a, b, c; this node is `self` (a client, or the
 * server a when self_server). */
static void build(bool self_server, lattice_cache_config *cfg)
{
    rcu_register_thread();
    d = lt_calloc(1, sizeof *d);
    d->pending = fab_pending_new(65536);
    d->dirty = lt_calloc(DATA_MAX_PEERS, sizeof *d->dirty);
    d->op_timeout_ms = 1000;
    d->running = true;
    memset(peers, 0, sizeof peers);
    const char *cids[3] = {"a:1", "b:1", "c:1"};
    for (int i = 0; i < 3; i++) {
        snprintf(peers[i].m.id, sizeof peers[i].m.id, "id-%d", i);
        snprintf(peers[i].m.cid, sizeof peers[i].m.cid, "%s", cids[i]);
        peers[i].m.server = true;
        peers[i].dealer = &dummy_conn;
        d->peers[d->n_peers++] = &peers[i];
    }
    if (self_server) {
        peers[0].m.self = true;
        peers[0].dealer = NULL;
        d->self = &peers[0];
        lattice_region_config rc = {"t", 0, 8, 0, LATTICE_REGION_REJECT};
        ck_assert_int_eq(lattice_region_create(&rc, &region), LATTICE_OK);
    } else {
        snprintf(peers[3].m.id, sizeof peers[3].m.id, "client");
        peers[3].m.self = true;
        d->peers[d->n_peers++] = &peers[3];
        d->self = &peers[3];
    }
    snprintf(d->self_id, sizeof d->self_id, "%s", d->self->m.id);
    /* The metadata as the coordinator a would start it: base = a, b, c. */
    lattice_meta_config mc = {!self_server, region, NULL, NULL};
    ck_assert_int_eq(lattice_meta_create(&mc, &d->meta), LATTICE_OK);
    lattice_meta_member *members[4];
    for (size_t i = 0; i < d->n_peers; i++) members[i] = &d->peers[i]->m;
    lattice_meta_set_members(d->meta, members, d->n_peers, "id-0");
    lattice_meta_start(d->meta, cfg, 1);
    c = lattice_meta_cache_of(d->meta, cfg->name);
    ck_assert_ptr_nonnull(c);
}

static void teardown(void)
{
    fast_free(d); /* before the caches: their fast words hang on them */
    for (size_t i = 0; i < d->n_peers; i++) {
        for (size_t k = 0; k < d->peers[i]->out.n; k++) lt_free(d->peers[i]->out.v[k]);
        lt_free(d->peers[i]->out.v);
    }
    EACH_PEND(p) { /* the items only: the table goes with d */
        lt_free(p->op);
        lt_free(p->resend);
        lt_free(p);
    }
    while (d->retry) {
        opx *o = d->retry;
        d->retry = o->rnext;
        lt_free(o);
    }
    for (size_t i = 0; i < lattice_meta_cache_count(d->meta); i++) clean_cache_gone(lattice_meta_cache_at(d->meta, i));
    lattice_meta_destroy(d->meta);
    if (region) lattice_region_destroy(region);
    region = NULL;
    exec_scratch_free(&d->scratch);
    lt_free(d->dedup);
    fab_pending_free(d->pending);
    lt_free(d->dirty);
    lt_free(d);
    rcu_unregister_thread();
}

static opx *op(int kind, const char *cache, const char *key, size_t vlen, seen *s)
{
    size_t kl = strlen(key);
    opx *o = lt_calloc(1, sizeof *o + kl + vlen + 1);
    memcpy(o->data, key, kl);
    memset(o->data + kl, 'v', vlen);
    snprintf(o->cache, sizeof o->cache, "%s", cache);
    o->op = (lattice_op){(lattice_op_kind)kind, 0, o->cache, o->data, kl, o->data + kl, vlen, 0, 0, 0};
    o->fn = cb;
    o->arg = s;
    o->deadline_ms = lt_mono_ms() + 1000;
    return o;
}

START_TEST(each_op_goes_to_its_primary_in_one_message_per_node)
{
    lattice_cache_config cfg;
    lattice_cache_config_init(&cfg, "default");
    build(false, &cfg);
    seen s = {0};
    for (int i = 0; i < 300; i++) {
        char key[32];
        snprintf(key, sizeof key, "key-%d", i);
        issue_route(d, op(i % 2 ? LATTICE_OP_PUT : LATTICE_OP_GET, "default", key, 10, &s));
    }
    ck_assert_int_eq(s.calls, 0);          /* full_sync, nothing answered yet */
    ck_assert_uint_eq(fab_pending_count(d->pending), 300);
    ck_assert_uint_eq(d->n_dirty, 3);      /* one outgoing message per server */
    size_t total = 0;
    for (int i = 0; i < 3; i++) {
        total += peers[i].out.n;
        for (size_t k = 0; k < peers[i].out.n; k++) {
            Latdata__Req *r = peers[i].out.v[k];
            uint32_t p = lattice_partition_of_key(r->key.data, r->key.len, 1024);
            ck_assert_uint_eq(r->partition, p);
            lattice_meta_member *own[2];
            ck_assert_uint_eq(lattice_meta_serving_owners(c, p, own, 2), 2);
            ck_assert_ptr_eq(own[0], &peers[i].m); /* sent to the primary */
        }
    }
    ck_assert_uint_eq(total, 300);
    teardown();
}
END_TEST

/* Stands for the metadata exchange's pull_soon hook: counts the pulls asked for. */
static int pulls_asked;
static uint64_t ask_pull(lattice_ops *x)
{
    (void)x;
    pulls_asked++;
    return 1;
}

START_TEST(issuer_errors_without_a_round_trip)
{
    lattice_cache_config cfg;
    lattice_cache_config_init(&cfg, "default");
    cfg.max_key_bytes = 8;
    cfg.max_value_bytes = 16;
    build(false, &cfg);
    seen s = {0};
    /* An unknown cache: first a metadata pull and another look (it may have
     * been created elsewhere a moment ago), then NO_CACHE. */
    d->grid_hooks.pull_soon = ask_pull; /* the metadata exchange's (grid/control.c) */
    pulls_asked = 0;
    issue_route(d, op(LATTICE_OP_GET, "nope", "k", 0, &s));
    ck_assert_int_eq(s.calls, 0);
    ck_assert_ptr_nonnull(d->retry);
    ck_assert_int_eq(pulls_asked, 1); /* pull at the next tick */
    opx *again = d->retry;
    d->retry = NULL;
    again->no_cache_until = lt_mono_ms() - 1;
    issue_route(d, again);
    ck_assert_int_eq(s.calls, 1);
    ck_assert_int_eq(s.last, LATTICE_ERR_NO_CACHE);
    issue_route(d, op(LATTICE_OP_GET, "default", "", 0, &s));
    ck_assert_int_eq(s.last, LATTICE_ERR_INVAL);
    issue_route(d, op(LATTICE_OP_GET, "default", "123456789", 0, &s));
    ck_assert_int_eq(s.last, LATTICE_ERR_TOO_LARGE);
    issue_route(d, op(LATTICE_OP_PUT, "default", "k", 17, &s));
    ck_assert_int_eq(s.last, LATTICE_ERR_TOO_LARGE);
    issue_route(d, op(LATTICE_OP_KIND_MAX_ + 1, "default", "k", 0, &s));
    ck_assert_int_eq(s.last, LATTICE_ERR_INVAL);
    ck_assert_int_eq(s.calls, 5);
    /* Every owner gone: LOST at once, no retry. */
    lattice_meta_member *alone = &peers[3].m; /* the servers left the topology */
    lattice_meta_set_members(d->meta, &alone, 1, "");
    issue_route(d, op(LATTICE_OP_GET, "default", "k", 0, &s));
    ck_assert_int_eq(s.last, LATTICE_ERR_PARTITION_LOST);
    ck_assert_int_eq(s.calls, 6);
    ck_assert_uint_eq(fab_pending_count(d->pending), 0);
    ck_assert_uint_eq(d->n_dirty, 0);
    /* Before any metadata: the op waits (retry list), nothing fails. */
    lattice_meta *known = d->meta;
    lattice_meta_config mc = {true, NULL, NULL, NULL};
    ck_assert_int_eq(lattice_meta_create(&mc, &d->meta), LATTICE_OK);
    ck_assert(!lattice_meta_valid(d->meta));
    issue_route(d, op(LATTICE_OP_GET, "default", "k", 0, &s));
    ck_assert_int_eq(s.calls, 6);
    ck_assert_ptr_nonnull(d->retry);
    lattice_meta_destroy(d->meta);
    d->meta = known;
    teardown();
}
END_TEST

START_TEST(full_async_acks_when_sent)
{
    lattice_cache_config cfg;
    lattice_cache_config_init(&cfg, "default");
    cfg.sync = LATTICE_SYNC_ASYNC;
    build(false, &cfg);
    seen s = {0};
    issue_route(d, op(LATTICE_OP_PUT, "default", "k", 3, &s));
    ck_assert_int_eq(s.calls, 1);
    ck_assert_int_eq(s.last, LATTICE_OK);
    ck_assert_uint_eq(fab_pending_count(d->pending), 0);
    ck_assert_uint_eq(d->n_dirty, 1);   /* but it did leave */
    /* A read is never "acked when sent". */
    issue_route(d, op(LATTICE_OP_GET, "default", "k", 0, &s));
    ck_assert_int_eq(s.calls, 1);
    ck_assert_uint_eq(fab_pending_count(d->pending), 1);
    teardown();
}
END_TEST

START_TEST(reads_from_a_local_backup_copy_and_writes_as_primary)
{
    lattice_cache_config cfg;
    lattice_cache_config_init(&cfg, "default");
    cfg.partitions = 64;
    build(true, &cfg);
    /* Find keys where self (a) is the backup, and where it is the primary. */
    int backup_reads = 0, primary_writes = 0;
    for (int i = 0; i < 2000 && (backup_reads < 5 || primary_writes < 5); i++) {
        char key[32];
        snprintf(key, sizeof key, "k%d", i);
        uint32_t p = lattice_partition_of_key(key, strlen(key), 64);
        lattice_meta_member *own[2];
        ck_assert_uint_eq(lattice_meta_serving_owners(c, p, own, 2), 2);
        seen s = {0};
        size_t before = d->n_dirty;
        if (own[1]->self) {
            issue_route(d, op(LATTICE_OP_GET, "default", key, 0, &s));
            ck_assert_int_eq(s.calls, 1); /* answered here, from the local copy */
            ck_assert_int_eq(s.last, LATTICE_ERR_NOT_FOUND);
            ck_assert_uint_eq(d->n_dirty, before);
            backup_reads++;
        } else if (own[0]->self) {
            /* full_sync primary: applied here, replicated to the backup, acked later.
             * (Earlier keys may share the partition.) */
            uint64_t stored = lattice_store_count(c->store, p);
            issue_route(d, op(LATTICE_OP_PUT, "default", key, 4, &s));
            ck_assert_int_eq(s.calls, 0);
            ck_assert_uint_eq(lattice_store_count(c->store, p), stored + 1);
            peer *backup = peer_of(own[1]);
            ck_assert(backup->out.n > 0);
            ck_assert_uint_eq(backup->out.v[backup->out.n - 1]->kind, CTL_REPLICATE);
            primary_writes++;
        }
    }
    ck_assert_int_ge(backup_reads, 5);
    ck_assert_int_ge(primary_writes, 5);
    /* With read_from_backup off, the same backup read goes to the primary. */
    c->cfg.read_from_backup = false;
    for (int i = 0; i < 2000; i++) {
        char key[32];
        snprintf(key, sizeof key, "k%d", i);
        uint32_t p = lattice_partition_of_key(key, strlen(key), 64);
        lattice_meta_member *own[2];
        lattice_meta_serving_owners(c, p, own, 2);
        if (!own[1]->self) continue;
        seen s = {0};
        size_t n_out = peer_of(own[0])->out.n;
        issue_route(d, op(LATTICE_OP_GET, "default", key, 0, &s));
        ck_assert_int_eq(s.calls, 0);
        ck_assert_uint_eq(peer_of(own[0])->out.n, n_out + 1);
        break;
    }
    /* The wait structures of the unacknowledged writes are the test's to
     * drop (first out of the partitions' in-flight lists). */
    clean_cache_gone(c);
    EACH_PEND(p)
        if (p->settle == sync_wait_settle && p->w && --p->w->remaining == 0) {
            lt_free(p->w->org.local);
            lt_free(p->w->value);
            lt_free(p->w->undo);
            lt_free(p->w);
        }
    EACH_PEND(p)
        if (p->settle == sync_wait_settle) p->op = NULL;
    teardown();
}
END_TEST

/* A primary_sync grid (its replies are answered at once: they are what the
 * resend tests check) with resend records, and a key (prefix + number) whose
 * partition this node is primary of; returns the partition. */
static uint32_t primary_sync_key_here(const char *prefix, char *key, size_t cap)
{
    lattice_cache_config cfg;
    lattice_cache_config_init(&cfg, "default");
    cfg.partitions = 64;
    cfg.sync = LATTICE_SYNC_PRIMARY;
    build(true, &cfg);
    d->dedup = lt_calloc(DEDUP_SLOTS, sizeof *d->dedup);
    uint32_t p = 0;
    for (int i = 0; i < 1000; i++) {
        snprintf(key, cap, "%s%d", prefix, i);
        p = lattice_partition_of_key(key, strlen(key), 64);
        lattice_meta_member *own[2];
        lattice_meta_serving_owners(c, p, own, 2);
        if (own[0]->self) break;
    }
    return p;
}

/* A write resent after a failover (same origin and op sequence) gets its
 * first result and is not applied again - here or on a copy that received
 * it replicated and then became primary. */
START_TEST(resent_writes_are_not_applied_twice)
{
    char key[32];
    uint32_t p = primary_sync_key_here("ctr", key, sizeof key);
    Latdata__Req q = LATDATA__REQ__INIT;
    q.kind = LATTICE_OP_INCREMENT;
    q.cache = "default";
    q.partition = p;
    q.key.data = (uint8_t *)key;
    q.key.len = strlen(key);
    q.delta = 1;
    q.origin = "issuer-1";
    q.op_seq = 9;
    origin org = {0};
    org.ident_len = 1;
    for (int round = 0; round < 3; round++) {
        org.rid = (uint64_t)round + 1;
        primary_serve(d, &q, &org);
    }
    q.op_seq = 10; /* a new op of the same issuer applies */
    org.rid = 4;
    primary_serve(d, &q, &org);
    ck_assert_uint_eq(d->replies.n, 1);
    fab_reply_box *b = &d->replies.boxes[0];
    ck_assert_uint_eq(b->n, 4);
    ck_assert_int_eq(b->out[0]->num, 1);
    ck_assert_int_eq(b->out[1]->num, 1); /* resends: the first result */
    ck_assert_int_eq(b->out[2]->num, 1);
    ck_assert_int_eq(b->out[3]->num, 2);
    void *v = NULL;
    lattice_store_meta m;
    ck_assert_int_eq(lattice_store_get_copy(c->store, p, key, strlen(key), &v, &m), LATTICE_OK);
    ck_assert_int_eq(memcmp(v, "2", 1), 0);
    lt_free(v);

    /* Replicated here with its result, then resent to us as the new primary. */
    Latdata__Req r = LATDATA__REQ__INIT;
    r.kind = CTL_REPLICATE;
    r.id = 77; /* answered */
    r.cache = "default";
    r.partition = p;
    r.key = q.key;
    r.value.data = (uint8_t *)"42";
    r.value.len = 2;
    r.version = 1000;
    r.origin = "issuer-2";
    r.op_seq = 3;
    r.res_status = LATTICE_OK;
    r.res_num = 42;
    org.rid = 5;
    backup_apply(d, &r, &org); /* CTL_REPLICATE goes to the backup stage */
    q.origin = "issuer-2";
    q.op_seq = 3;
    org.rid = 6;
    primary_serve(d, &q, &org);
    ck_assert_uint_eq(b->n, 6);
    ck_assert_int_eq(b->out[4]->status, LATTICE_OK);
    ck_assert_int_eq(b->out[5]->num, 42);
    ck_assert_int_eq(lattice_store_get_copy(c->store, p, key, strlen(key), &v, &m), LATTICE_OK);
    ck_assert_int_eq(m.value_len, 2);
    ck_assert_int_eq(memcmp(v, "42", 2), 0); /* not 43 */
    lt_free(v);
    for (size_t k = 0; k < b->n; k++) lt_free(b->out[k]);
    lt_free(b->out);
    lt_free(d->replies.boxes);
    teardown();
}
END_TEST

/* INCRBYFLOAT replicated here, then resent to us as the new primary: the
 * resend answers the float it wrote while the entry still holds that
 * version; after a later write, only the status (the reply is gone). */
START_TEST(resent_incrbyfloat_answers_its_float)
{
    char key[32];
    uint32_t p = primary_sync_key_here("f", key, sizeof key);
    Latdata__Req r = LATDATA__REQ__INIT;
    r.kind = CTL_REPLICATE;
    r.cache = "default";
    r.partition = p;
    r.key.data = (uint8_t *)key;
    r.key.len = strlen(key);
    r.value.data = (uint8_t *)"3.5";
    r.value.len = 3;
    r.version = 1000;
    r.origin = "issuer-3";
    r.op_seq = 5;
    r.res_status = LATTICE_OK;
    r.res_num = 1000; /* what the primary's INCRBYFLOAT recorded: the version it wrote */
    origin org = {0};
    org.ident_len = 1;
    org.rid = 1;
    backup_apply(d, &r, &org);
    Latdata__Req q = LATDATA__REQ__INIT;
    q.kind = LATTICE_OP_INCRBYFLOAT;
    q.cache = "default";
    q.partition = p;
    q.key = r.key;
    q.value.data = (uint8_t *)"1";
    q.value.len = 1;
    q.origin = "issuer-3";
    q.op_seq = 5;
    org.rid = 2;
    primary_serve(d, &q, &org); /* the resend */
    q.op_seq = 6; /* a new increment applies: 4.5, a new version */
    org.rid = 3;
    primary_serve(d, &q, &org);
    q.op_seq = 5; /* the first again: its reply is no longer in the entry */
    org.rid = 4;
    primary_serve(d, &q, &org);
    ck_assert_uint_eq(d->replies.n, 1);
    fab_reply_box *b = &d->replies.boxes[0];
    ck_assert_uint_eq(b->n, 3);
    ck_assert_int_eq(b->out[0]->status, LATTICE_OK);
    ck_assert_uint_eq(b->out[0]->value.len, 3);
    ck_assert_int_eq(memcmp(b->out[0]->value.data, "3.5", 3), 0);
    ck_assert_uint_eq(b->out[1]->value.len, 3);
    ck_assert_int_eq(memcmp(b->out[1]->value.data, "4.5", 3), 0);
    ck_assert_int_eq(b->out[2]->status, LATTICE_OK);
    ck_assert_uint_eq(b->out[2]->value.len, 0);
    void *v = NULL;
    lattice_store_meta m;
    ck_assert_int_eq(lattice_store_get_copy(c->store, p, key, strlen(key), &v, &m), LATTICE_OK);
    ck_assert_int_eq(memcmp(v, "4.5", 3), 0); /* each increment once */
    lt_free(v);
    for (size_t k = 0; k < b->n; k++) lt_free(b->out[k]);
    lt_free(b->out);
    lt_free(d->replies.boxes);
    teardown();
}
END_TEST

/* Finds a key of the 64-partition cache whose serving owners put self at
 * `role` (0 primary, 1 backup). */
static void key_where_self_is(int role, char *key, size_t len, uint32_t *part, lattice_meta_member **own)
{
    for (int i = 0; i < 2000; i++) {
        snprintf(key, len, "k%d", i);
        *part = lattice_partition_of_key(key, strlen(key), 64);
        if (lattice_meta_serving_owners(c, *part, own, 2) == 2 && own[role]->self) return;
    }
    ck_abort_msg("no key with self at role %d", role);
}

/* A replicated write of "new" (version 7, the primary's watermark 6) of key
 * in partition p, from the primary `from`, in this node's view. */
static Latdata__Req replicate_req(const char *key, uint32_t p, const lattice_meta_member *from)
{
    Latdata__Req q = LATDATA__REQ__INIT;
    q.kind = CTL_REPLICATE;
    q.cache = "default";
    q.partition = p;
    q.key.data = (uint8_t *)key;
    q.key.len = strlen(key);
    q.value.data = (uint8_t *)"new";
    q.value.len = 3;
    q.version = 7;
    q.committed = 6;
    q.sender = (char *)from->id;
    q.topo_major = d->major;
    q.meta_version = lattice_meta_version(d->meta);
    return q;
}

/* A joiner's data thread may first see a later topology than the one its
 * primary saw it join in: a replicated write routed by that view but
 * addressed to this incarnation is applied, with its resend record (else
 * the write went unacknowledged and its retry ran twice: fault_two_joins);
 * one addressed to an earlier incarnation, or unaddressed and routed by a
 * view older than this incarnation, is refused and changes nothing. */
START_TEST(a_joiner_applies_writes_addressed_to_it_from_an_older_view)
{
    lattice_cache_config cfg;
    lattice_cache_config_init(&cfg, "default");
    cfg.partitions = 64;
    build(true, &cfg);
    char key[32];
    uint32_t p;
    lattice_meta_member *own[2];
    key_where_self_is(1, key, sizeof key, &p, own);
    d->dedup = lt_calloc(DEDUP_SLOTS, sizeof *d->dedup);
    d->major = 5;
    d->self_since_major = 5; /* the first topology this data thread saw */
    ck_assert_int_eq(ops_addressed(d, d->self_id), ADDRESSED_HERE);
    ck_assert_int_eq(ops_addressed(d, "id-of-an-earlier-start"), ADDRESSED_ELSEWHERE);
    ck_assert_int_eq(ops_addressed(d, ""), ADDRESSED_UNSAID);
    ck_assert_int_eq(ops_addressed(d, NULL), ADDRESSED_UNSAID);

    Latdata__Req q = replicate_req(key, p, own[0]);
    q.topo_major = 4; /* the view its primary saw this node join in */
    q.origin = "issuer-9";
    q.op_seq = 77;
    q.res_status = LATTICE_OK;
    q.res_num = 5965;
    origin to_other = {0}, unsaid = {0}, here = {0};
    to_other.to = ADDRESSED_ELSEWHERE;
    unsaid.to = ADDRESSED_UNSAID;
    here.to = ADDRESSED_HERE;
    backup_apply(d, &q, &to_other);
    ck_assert_uint_eq(lattice_store_count(c->store, p), 0);
    backup_apply(d, &q, &unsaid);
    ck_assert_uint_eq(lattice_store_count(c->store, p), 0);
    ck_assert_ptr_null(dedup_get(d, dedup_origin_hash("issuer-9"), 77));
    backup_apply(d, &q, &here);
    ck_assert_uint_eq(lattice_store_count(c->store, p), 1);
    const dedup_entry *e = dedup_get(d, dedup_origin_hash("issuer-9"), 77);
    ck_assert_ptr_nonnull(e); /* a retry routed here gets 5965, not a second increment */
    ck_assert_int_eq(e->num, 5965);
    teardown();
}
END_TEST

/* A backup answers a read itself only while it applied nothing its primary
 * has not acknowledged; the primary holds a read of a key back until the
 * write in flight on it is acknowledged; a fenced node serves nothing. */
START_TEST(reads_see_only_acknowledged_writes)
{
    lattice_cache_config cfg;
    lattice_cache_config_init(&cfg, "default");
    cfg.partitions = 64;
    build(true, &cfg);
    char key[32];
    uint32_t p;
    lattice_meta_member *own[2];

    /* Backup side: a replicated write (version 7) whose commit is unknown. */
    key_where_self_is(1, key, sizeof key, &p, own);
    Latdata__Req q = replicate_req(key, p, own[0]);
    origin none = {0};
    backup_apply(d, &q, &none);
    ck_assert_uint_eq(lattice_store_count(c->store, p), 1);
    seen s = {0};
    size_t n_out = peer_of(own[0])->out.n;
    issue_route(d, op(LATTICE_OP_GET, "default", key, 0, &s));
    ck_assert_int_eq(s.calls, 0); /* dirty: asked the primary */
    ck_assert_uint_eq(peer_of(own[0])->out.n, n_out + 1);
    /* The primary says version 7 is acknowledged: the copy is clean. */
    Latdata__Req cl = LATDATA__REQ__INIT;
    cl.kind = CTL_CLEAN;
    cl.cache = "default";
    cl.partition = p;
    cl.committed = 7;
    backup_clean(d, &cl);
    seen s2 = {0};
    issue_route(d, op(LATTICE_OP_GET, "default", key, 0, &s2));
    ck_assert_int_eq(s2.calls, 1);
    ck_assert_int_eq(s2.last, LATTICE_OK);
    /* A write from a deposed primary (an older view naming another primary)
     * is refused and changes nothing. */
    d->major = 5;
    q.topo_major = 4;
    q.sender = strcmp(own[0]->id, "id-2") == 0 ? "id-1" : "id-2"; /* not the primary of our view */
    q.version = 9;
    q.value.data = (uint8_t *)"old";
    backup_apply(d, &q, &none);
    void *v = NULL;
    lattice_store_meta meta;
    ck_assert_int_eq(lattice_store_get_copy(c->store, p, key, strlen(key), &v, &meta), LATTICE_OK);
    ck_assert_int_eq(memcmp(v, "new", 3), 0);
    lt_free(v);

    /* Primary side: a PUT in flight holds a GET of its key back. */
    char pk[32];
    key_where_self_is(0, pk, sizeof pk, &p, own);
    seen w = {0}, r = {0};
    issue_route(d, op(LATTICE_OP_PUT, "default", pk, 4, &w));
    ck_assert_int_eq(w.calls, 0);
    issue_route(d, op(LATTICE_OP_GET, "default", pk, 0, &r));
    ck_assert_int_eq(r.calls, 0); /* waits for the write */
    pend *pw = NULL;
    EACH_PEND(x)
        if (x->settle == sync_wait_settle) pw = x;
    ck_assert_ptr_nonnull(pw);
    Latdata__Resp ok = LATDATA__RESP__INIT;
    pend *taken = chan_pend_take(d, pw->id);
    ck_assert_ptr_eq(taken, pw);
    taken->settle(d, taken, &ok);
    lt_free(taken);
    ck_assert_int_eq(w.calls, 1);
    ck_assert_int_eq(w.last, LATTICE_OK);
    ck_assert_int_eq(r.calls, 1); /* ran once the write was acknowledged */
    ck_assert_int_eq(r.last, LATTICE_OK);

    /* Fenced (leaving): nothing is served; the op waits to be retried. */
    lattice_ops_fence(d);
    seen f = {0};
    issue_route(d, op(LATTICE_OP_GET, "default", pk, 0, &f));
    ck_assert_int_eq(f.calls, 0);
    ck_assert_ptr_nonnull(d->retry);
    teardown();
}
END_TEST

/* Answers the newest full_sync replication this node sent with `status`. */
static void answer_replication(lattice_status status)
{
    pend *pw = NULL;
    EACH_PEND(x)
        if (x->settle == sync_wait_settle) pw = x;
    ck_assert_ptr_nonnull(pw);
    Latdata__Resp rs = LATDATA__RESP__INIT;
    rs.status = status;
    pend *taken = chan_pend_take(d, pw->id);
    ck_assert_ptr_eq(taken, pw);
    taken->settle(d, taken, &rs);
    lt_free(taken);
}

static size_t stored_len(uint32_t p, const char *key)
{
    void *v = NULL;
    lattice_store_meta meta = {0};
    int st = lattice_store_get_copy(c->store, p, key, strlen(key), &v, &meta);
    lt_free(v);
    return st == LATTICE_OK ? meta.value_len : 0;
}

/* A backup without room for a full_sync write: the write is not
 * acknowledged; the primary writes the previous value back and sends it to
 * the copies, and only once they have it does the issuer get REGION_FULL
 * (a read meanwhile waits, then sees the previous value).  A new key
 * refused that way is removed again. */
START_TEST(a_write_a_copy_has_no_room_for_is_undone)
{
    lattice_cache_config cfg;
    lattice_cache_config_init(&cfg, "default");
    cfg.partitions = 64;
    build(true, &cfg);
    char pk[32];
    uint32_t p;
    lattice_meta_member *own[2];
    key_where_self_is(0, pk, sizeof pk, &p, own);
    seen w1 = {0};
    issue_route(d, op(LATTICE_OP_PUT, "default", pk, 4, &w1));
    answer_replication(LATTICE_OK);
    ck_assert_int_eq(w1.last, LATTICE_OK);
    ck_assert_uint_eq(stored_len(p, pk), 4);

    seen w2 = {0}, r = {0};
    size_t out = peer_of(own[1])->out.n;
    issue_route(d, op(LATTICE_OP_PUT, "default", pk, 9, &w2));
    ck_assert_uint_eq(stored_len(p, pk), 9);
    answer_replication(LATTICE_ERR_REGION_FULL);
    ck_assert_int_eq(w2.calls, 0); /* not acknowledged: the undo is on its way */
    ck_assert_uint_eq(stored_len(p, pk), 4);
    ck_assert_uint_gt(peer_of(own[1])->out.n, out);
    issue_route(d, op(LATTICE_OP_GET, "default", pk, 0, &r));
    ck_assert_int_eq(r.calls, 0); /* the key is still in flight */
    answer_replication(LATTICE_OK);
    ck_assert_int_eq(w2.calls, 1);
    ck_assert_int_eq(w2.last, LATTICE_ERR_REGION_FULL);
    ck_assert_int_eq(r.calls, 1);
    ck_assert_int_eq(r.last, LATTICE_OK);

    /* A new key refused that way is absent again (on this copy at once). */
    char nk[32];
    uint32_t np = 0;
    lattice_meta_member *nown[2];
    for (int i = 0;; i++) {
        ck_assert_int_lt(i, 2000);
        snprintf(nk, sizeof nk, "n%d", i);
        np = lattice_partition_of_key(nk, strlen(nk), 64);
        if (lattice_meta_serving_owners(c, np, nown, 2) == 2 && nown[0]->self) break;
    }
    seen w3 = {0};
    issue_route(d, op(LATTICE_OP_PUT, "default", nk, 5, &w3));
    ck_assert_uint_eq(stored_len(np, nk), 5);
    answer_replication(LATTICE_ERR_REGION_FULL);
    void *v = NULL;
    ck_assert_int_eq(lattice_store_get_copy(c->store, np, nk, strlen(nk), &v, NULL), LATTICE_ERR_NOT_FOUND);
    answer_replication(LATTICE_OK);
    ck_assert_int_eq(w3.last, LATTICE_ERR_REGION_FULL);
    teardown();
}
END_TEST

/* A full_sync write a copy refused (NOT_OWNER: that copy follows a newer
 * primary) is not acknowledged, and its resend - same op sequence, routed
 * again to this node while it still thinks it is the primary - must not
 * find the first attempt's resend record and be answered OK from it: the
 * copy never applied it.  Nor is it applied again here (an INCR would
 * count twice): its outcome is unknown, and the answer says so. */
START_TEST(a_refused_write_is_not_acknowledged_by_its_resend)
{
    lattice_cache_config cfg;
    lattice_cache_config_init(&cfg, "default");
    cfg.partitions = 64;
    build(true, &cfg);
    d->dedup = lt_calloc(DEDUP_SLOTS, sizeof *d->dedup); /* the resend records, as a server has them */
    char pk[32];
    uint32_t p;
    lattice_meta_member *own[2];
    key_where_self_is(0, pk, sizeof pk, &p, own);
    seen w = {0};
    issue_route(d, op(LATTICE_OP_PUT, "default", pk, 4, &w));
    size_t out = peer_of(own[1])->out.n;
    answer_replication(LATTICE_ERR_NOT_OWNER);
    ck_assert_int_eq(w.calls, 0); /* not acknowledged: retried */
    ck_assert_ptr_nonnull(d->retry);
    for (opx *o = retry_take_due(d, UINT64_MAX), *next; o; o = next) {
        next = o->rnext;
        issue_route(d, o);
    }
    /* Back here, it is answered from the refusal: its outcome is unknown
     * (applied here, not on the copy), and it is not applied a second time. */
    ck_assert_int_eq(w.calls, 1);
    ck_assert_int_eq(w.last, LATTICE_ERR_TIMEOUT);
    for (size_t k = out; k < peer_of(own[1])->out.n; k++) /* no new replication (a watermark may go) */
        ck_assert_uint_ne(peer_of(own[1])->out.v[k]->kind, CTL_REPLICATE);
    teardown();
}
END_TEST

/* A full_sync replication its copy's connection may have lost (the
 * connection closed, or refused a frame while reconnecting) goes again -
 * once per loss, until the copy answers - so the write neither waits
 * forever nor is acknowledged without the copy. */
/* This node the primary of a 64-partition full_sync cache: a PUT of a key
 * of its (into pk) is issued and replicated to the backup, returned. */
static peer *put_replicated(char *pk, size_t cap, seen *w)
{
    lattice_cache_config cfg;
    lattice_cache_config_init(&cfg, "default");
    cfg.partitions = 64;
    build(true, &cfg);
    uint32_t p;
    lattice_meta_member *own[2];
    key_where_self_is(0, pk, cap, &p, own);
    peer *b = peer_of(own[1]);
    issue_route(d, op(LATTICE_OP_PUT, "default", pk, 4, w));
    ck_assert_uint_eq(b->out.n, 1);
    ck_assert_uint_eq(b->out.v[0]->kind, CTL_REPLICATE);
    return b;
}

START_TEST(a_replication_a_lost_connection_dropped_goes_again)
{
    char pk[32];
    seen w = {0};
    peer *b = put_replicated(pk, sizeof pk, &w);
    sync_wait_resend(d);
    ck_assert_uint_eq(b->out.n, 1); /* nothing lost: nothing again */
    b->dealer->losses++;
    sync_wait_resend(d);
    ck_assert_uint_eq(b->out.n, 2);
    ck_assert_uint_eq(b->out.v[1]->kind, CTL_REPLICATE);
    ck_assert_uint_eq(b->out.v[1]->id, b->out.v[0]->id); /* the same request: one answer settles it */
    ck_assert_uint_eq(b->out.v[1]->version, b->out.v[0]->version);
    ck_assert_mem_eq(b->out.v[1]->key.data, pk, strlen(pk));
    ck_assert_uint_eq(b->out.v[1]->value.len, 4);
    sync_wait_resend(d);
    ck_assert_uint_eq(b->out.n, 2); /* once per loss */
    ck_assert_int_eq(w.calls, 0);
    answer_replication(LATTICE_OK);
    ck_assert_int_eq(w.calls, 1);
    ck_assert_int_eq(w.last, LATTICE_OK);
    b->dealer->losses++;
    sync_wait_resend(d);
    for (size_t k = 2; k < b->out.n; k++) /* answered: never again (its watermark may go) */
        ck_assert_uint_ne(b->out.v[k]->kind, CTL_REPLICATE);
    teardown();
}
END_TEST

/* A copy whose metadata lags (a cache just created) answers a full_sync
 * replication NO_CACHE: it applied nothing, so the write is not
 * acknowledged on that answer; it goes to the copy again at the next sweep
 * and is acknowledged once the copy applied it. */
START_TEST(a_copy_without_the_cache_yet_gets_the_write_again)
{
    char pk[32];
    seen w = {0};
    peer *b = put_replicated(pk, sizeof pk, &w);
    answer_replication(LATTICE_ERR_NO_CACHE);
    ck_assert_int_eq(w.calls, 0); /* not acknowledged without that copy */
    ck_assert_uint_eq(d->repl_no_cache, 1);
    sync_wait_resend(d);
    ck_assert_uint_eq(b->out.n, 2);
    ck_assert_uint_eq(b->out.v[1]->kind, CTL_REPLICATE);
    ck_assert_uint_ne(b->out.v[1]->id, b->out.v[0]->id); /* a new request: the old answer is spent */
    ck_assert_mem_eq(b->out.v[1]->key.data, pk, strlen(pk));
    sync_wait_resend(d);
    ck_assert_uint_eq(b->out.n, 2); /* once per sweep that finds it unanswered and unsent */
    answer_replication(LATTICE_ERR_NO_CACHE);
    sync_wait_resend(d);
    ck_assert_uint_eq(b->out.n, 3);
    ck_assert_int_eq(w.calls, 0);
    answer_replication(LATTICE_OK);
    ck_assert_int_eq(w.calls, 1);
    ck_assert_int_eq(w.last, LATTICE_OK);
    teardown();
}
END_TEST

/* A server that has no topology yet (starting, or restarted and not yet
 * admitted) knows no baseline: its ops wait for the join, they are not
 * refused as "no quorum: 0 of 0 baseline nodes reachable" - a final answer
 * a client would take for the grid's. */
START_TEST(a_server_not_yet_joined_waits_instead_of_refusing)
{
    lattice_cache_config cfg;
    lattice_cache_config_init(&cfg, "default");
    build(true, &cfg);
    const char *finders[] = {"127.0.0.1:1"};
    lattice_discovery_config dc = {.cluster = "t", .host = "127.0.0.1", .port = 0, .port_range = 1,
                                   .finders = finders, .n_finders = 1, .failure_detection_ms = 1000,
                                   .max_message_bytes = 1 << 20, .baseline_auto_adjust_ms = -1};
    ck_assert_int_eq(lattice_discovery_init(&dc, &d->disc), LATTICE_OK); /* never started: no topology */
    int64_t num = 0;
    ck_assert(!ops_no_quorum(d, &num));
    ck_assert_int_eq(ops_refusal(d, &num), LATTICE_ERR_AGAIN);
    seen s = {0};
    for (int i = 0; i < 50; i++) {
        char key[32];
        snprintf(key, sizeof key, "key-%d", i);
        issue_route(d, op(i % 2 ? LATTICE_OP_PUT : LATTICE_OP_GET, "default", key, 10, &s));
    }
    /* Every op waits here for the join: none answered, none sent by a
     * member set the node has not got from a topology of its own. */
    ck_assert_msg(s.calls == 0, "%d ops answered, the last %s", s.calls, lattice_strerror(s.last));
    ck_assert_uint_eq(fab_pending_count(d->pending), 0);
    int waiting = 0;
    for (opx *o = d->retry; o; o = o->rnext) waiting++;
    ck_assert_int_eq(waiting, 50);
    lattice_discovery_destroy(d->disc);
    d->disc = NULL;
    teardown();
}
END_TEST

/* A remove arriving after a newer write of its key (resent after a lost
 * connection) leaves that write alone, as an older put does. */
START_TEST(an_older_remove_leaves_a_newer_write)
{
    lattice_cache_config cfg;
    lattice_cache_config_init(&cfg, "default");
    cfg.partitions = 64;
    build(true, &cfg);
    char key[32];
    uint32_t p;
    lattice_meta_member *own[2];
    key_where_self_is(1, key, sizeof key, &p, own);
    Latdata__Req q = replicate_req(key, p, own[0]); /* version 7 */
    origin none = {0};
    backup_apply(d, &q, &none);
    ck_assert_uint_eq(stored_len(p, key), 3);
    q.remove = true;
    q.version = 5;
    backup_apply(d, &q, &none);
    ck_assert_uint_eq(stored_len(p, key), 3);
    q.version = 9;
    backup_apply(d, &q, &none);
    ck_assert_uint_eq(stored_len(p, key), 0);
    teardown();
}
END_TEST

/* A pipeline SET k / INCR k (one submission) turned back with AGAIN by a
 * base check's write freeze goes out again in the order it was submitted:
 * routed INCR-first, the INCR counted from an absent key (it_resp's
 * thousand_connections saw INCR = 1 after SET 3). */
START_TEST(retried_ops_keep_their_order)
{
    lattice_cache_config cfg;
    lattice_cache_config_init(&cfg, "default");
    build(false, &cfg);
    seen s = {0};
    opx *set = op(LATTICE_OP_PUT, "default", "k", 1, &s);
    opx *incr = op(LATTICE_OP_INCREMENT, "default", "k", 0, &s);
    issue_route(d, set);
    issue_route(d, incr);
    ck_assert_uint_eq(fab_pending_count(d->pending), 2);
    lattice_meta_member *own[2];
    lattice_meta_serving_owners(c, lattice_partition_of_key("k", 1, cfg.partitions), own, 2);
    peer *prim = peer_of(own[0]);
    ck_assert_uint_eq(prim->out.n, 2);
    /* The primary answers both with AGAIN, in order. */
    for (size_t k = 0; k < 2; k++) {
        Latdata__Resp rs = LATDATA__RESP__INIT;
        rs.id = prim->out.v[k]->id;
        rs.status = LATTICE_ERR_AGAIN;
        pend *p = chan_pend_take(d, rs.id);
        ck_assert_ptr_nonnull(p);
        p->settle(d, p, &rs);
        lt_free(p);
        lt_free(prim->out.v[k]);
    }
    prim->out.n = 0;
    ck_assert_int_eq(s.calls, 0);
    ck_assert_ptr_null(retry_take_due(d, 0)); /* not due yet */
    for (opx *o = retry_take_due(d, UINT64_MAX), *next; o; o = next) {
        next = o->rnext;
        issue_route(d, o);
    }
    ck_assert_uint_eq(prim->out.n, 2);
    ck_assert_uint_eq(prim->out.v[0]->kind, LATTICE_OP_PUT);
    ck_assert_uint_eq(prim->out.v[1]->kind, LATTICE_OP_INCREMENT);
    teardown();
}
END_TEST

/* ---------------------------------------------- reads on the calling thread */

/* What the IO thread gets for a GET of key: true and the value, or false
 * (the data thread must answer). */
static bool inline_get(const char *key, char *out, size_t cap)
{
    lattice_op o = lattice_op_get("default", key, strlen(key));
    fast_slot sl;
    if (!fast_read(d, &o, &sl)) return false;
    if (out) snprintf(out, cap, "%.*s", sl.r.status == LATTICE_OK ? (int)sl.r.value_len : 3,
                      sl.r.status == LATTICE_OK ? (const char *)sl.r.value : "nil");
    lt_free(sl.heap);
    return true;
}

/* The primary's partition is readable on another thread only once nothing
 * applied there waits for its copies: a PUT in flight closes it, its
 * acknowledgement (and the settle before the flush) opens it again; a
 * backup copy opens only while clean; inline reads are counted in the
 * cache's stats. */
START_TEST(fast_words_follow_writes_in_flight_and_clean_copies)
{
    lattice_cache_config cfg;
    lattice_cache_config_init(&cfg, "default");
    cfg.partitions = 64;
    build(true, &cfg);
    char pk[32], bk[32], v[16];
    uint32_t pp, bp;
    lattice_meta_member *own[2];
    key_where_self_is(0, pk, sizeof pk, &pp, own);
    ck_assert(!inline_get(pk, v, sizeof v)); /* nothing published before the first settle */
    fast_settle(d);
    ck_assert(inline_get(pk, v, sizeof v));
    ck_assert_str_eq(v, "nil");

    seen w = {0};
    issue_route(d, op(LATTICE_OP_PUT, "default", pk, 4, &w));
    ck_assert_int_eq(w.calls, 0);             /* waits for its copy */
    ck_assert(!inline_get(pk, NULL, 0));      /* applied here, not acknowledged */
    fast_settle(d);
    ck_assert(!inline_get(pk, NULL, 0));      /* still in flight at the settle */
    answer_replication(LATTICE_OK);
    ck_assert_int_eq(w.calls, 1);
    ck_assert(!inline_get(pk, NULL, 0));      /* acknowledged: open at the next settle only */
    fast_settle(d);
    ck_assert(inline_get(pk, v, sizeof v));
    ck_assert_str_eq(v, "vvvv");

    /* Backup side: a replicated write above the watermark it heard. */
    key_where_self_is(1, bk, sizeof bk, &bp, own);
    fast_settle(d);
    ck_assert(inline_get(bk, v, sizeof v));   /* a clean copy with read_from_backup */
    Latdata__Req q = replicate_req(bk, bp, own[0]);
    origin none = {0};
    backup_apply(d, &q, &none);
    fast_settle(d);
    ck_assert(!inline_get(bk, NULL, 0));      /* dirty copy: its primary answers */
    Latdata__Req cl = LATDATA__REQ__INIT;
    cl.kind = CTL_CLEAN;
    cl.cache = "default";
    cl.partition = bp;
    cl.committed = 7;
    backup_clean(d, &cl);
    fast_settle(d);
    ck_assert(inline_get(bk, v, sizeof v));
    ck_assert_str_eq(v, "new");

    uint64_t reads, hits, misses;
    fast_stats(c, &reads, &hits, &misses);
    ck_assert_uint_eq(reads, 4);
    ck_assert_uint_eq(hits, 2);
    ck_assert_uint_eq(misses, 2);
    ck_assert_uint_eq(lattice_ops_reads_inline(d), 4);
    teardown();
}
END_TEST

/* The gate: a base switch's freeze, a topology in which this node no longer
 * owns the partition, a fence, and a cache that goes each close the fast
 * path at once or at the next settle - before anything of that loop
 * iteration (a prepare's answer) leaves the node. */
START_TEST(fast_path_closes_on_freeze_role_change_fence_and_cache_gone)
{
    lattice_cache_config cfg;
    lattice_cache_config_init(&cfg, "default");
    cfg.partitions = 64;
    build(true, &cfg);
    char pk[32];
    uint32_t pp;
    lattice_meta_member *own[2];
    key_where_self_is(0, pk, sizeof pk, &pp, own);
    fast_settle(d);
    ck_assert(inline_get(pk, NULL, 0));
    ck_assert_int_eq(lattice_meta_freeze(d->meta, "default", lattice_meta_version(d->meta), "id-0"), LATTICE_OK);
    fast_settle(d);
    ck_assert(!inline_get(pk, NULL, 0));
    ck_assert(!fast_readable(d, c, pp));

    /* Thawed by a newer version, then the other servers leave: this node
     * is alone in the topology but the base still names them, so it
     * serves only what it owned. */
    lattice_meta_bump(d->meta);
    fast_settle(d);
    ck_assert(!lattice_meta_frozen(c));
    ck_assert(inline_get(pk, NULL, 0));
    char ok_key[32];
    uint32_t bp;
    key_where_self_is(1, ok_key, sizeof ok_key, &bp, own);
    ck_assert(inline_get(ok_key, NULL, 0));
    lattice_meta_member *only[2] = {&peers[0].m, own[0] == &peers[1].m ? &peers[2].m : &peers[1].m};
    lattice_meta_set_members(d->meta, only, 2, "id-0");
    d->minor++;
    fast_settle(d);
    /* ok_key's primary left: this node is its primary now (nothing in
     * flight), so it stays readable; a key none of whose owners is here is not. */
    for (int i = 0; i < 2000; i++) {
        char k[32];
        snprintf(k, sizeof k, "k%d", i);
        uint32_t p = lattice_partition_of_key(k, strlen(k), 64);
        lattice_meta_member *o[2];
        size_t n = lattice_meta_serving_owners(c, p, o, 2);
        bool mine = false;
        for (size_t j = 0; j < n; j++) mine = mine || o[j]->self;
        ck_assert_int_eq(inline_get(k, NULL, 0), mine);
    }

    lattice_ops_fence(d);
    ck_assert(!inline_get(pk, NULL, 0));
    atomic_store(&d->fenced, false);
    ck_assert(inline_get(pk, NULL, 0));
    fast_cache_gone(d, c);
    ck_assert_ptr_null(c->fast);
    ck_assert(!inline_get(pk, NULL, 0));
    fast_settle(d); /* published again: the cache is still there */
    ck_assert(inline_get(pk, NULL, 0));
    teardown();
}
END_TEST

/* The seqlock under a writer thread: the data thread's role (mark, apply,
 * then "commit" and settle) against a reader on another thread, reading one
 * key at a time and in batches of FAST_BATCH (as a pipeline does).  A value
 * the reader gets inline must have been committed before the read ended:
 * never one that was only applied. */
typedef struct race {
    atomic_bool stop;
    atomic_uint_fast64_t committed; /* the writer's last committed value */
    uint64_t inline_reads, violations;
    char key[32];
} race;

static void *race_reader(void *arg)
{
    race *rc = arg;
    rcu_register_thread();
    static fast_slot sl[FAST_BATCH];
    lattice_op ops[FAST_BATCH];
    for (int i = 0; i < FAST_BATCH; i++) ops[i] = lattice_op_get("default", rc->key, strlen(rc->key));
    for (uint64_t turn = 0; !atomic_load(&rc->stop); turn++) {
        char v[32];
        if (turn % 2) { /* a pipeline's batch: prefetched, one gate after all its reads */
            size_t got = fast_read_n(d, ops, FAST_BATCH, sl);
            uint64_t committed = atomic_load(&rc->committed);
            for (int i = 0; i < FAST_BATCH && got; i++) {
                if (!sl[i].done) continue;
                uint64_t seen_v = 0;
                if (sl[i].r.status == LATTICE_OK) {
                    snprintf(v, sizeof v, "%.*s", (int)sl[i].r.value_len, (const char *)sl[i].r.value);
                    seen_v = strtoull(v, NULL, 10);
                }
                if (seen_v > committed) rc->violations++;
                rc->inline_reads++;
                lt_free(sl[i].heap);
            }
            continue;
        }
        if (!inline_get(rc->key, v, sizeof v)) continue;
        uint64_t seen_v = strcmp(v, "nil") == 0 ? 0 : strtoull(v, NULL, 10);
        if (seen_v > atomic_load(&rc->committed)) rc->violations++;
        rc->inline_reads++;
    }
    rcu_unregister_thread();
    return NULL;
}

START_TEST(inline_reads_never_see_an_applied_uncommitted_value)
{
    lattice_cache_config cfg;
    lattice_cache_config_init(&cfg, "default");
    cfg.partitions = 64;
    build(true, &cfg);
    static race rc;
    memset(&rc, 0, sizeof rc);
    uint32_t p;
    lattice_meta_member *own[2];
    key_where_self_is(0, rc.key, sizeof rc.key, &p, own);
    fast_settle(d);
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, race_reader, &rc), 0);
    uint64_t until = lt_mono_ms() + 20000;
    for (uint64_t i = 1; i <= 200000 && lt_mono_ms() < until; i++) {
        char v[24];
        int n = snprintf(v, sizeof v, "%llu", (unsigned long long)i);
        exec_in in = {LATTICE_OP_PUT, 0, p, rc.key, strlen(rc.key), v, (size_t)n, 0, 0};
        repl_out repl;
        ck_assert_int_eq(exec_write_entry(c, &in, v, (size_t)n, 0, &repl), LATTICE_OK); /* marks, applies */
        for (volatile int k = 0; k < 50; k++) {} /* applied, not committed: a window for the reader */
        atomic_store(&rc.committed, i);
        fast_settle(d); /* readable again */
    }
    atomic_store(&rc.stop, true);
    pthread_join(th, NULL);
    ck_assert_uint_eq(rc.violations, 0);
    ck_assert_uint_gt(rc.inline_reads, 0);
    teardown();
}
END_TEST

/* The resend records keep the last DEDUP_SLOTS writes of an origin, every
 * one of them, whatever the origin's hash; the next write lets only the
 * oldest go.  Two origins each find their own records. */
START_TEST(resend_records_keep_an_origins_last_writes)
{
    lattice_ops *x = lt_calloc(1, sizeof *x);
    x->dedup = lt_calloc(DEDUP_SLOTS, sizeof *x->dedup);
    const char *ids[] = {"node-a", "7f0c1e52-93b4-4c0e-a1d2-3f9e6b7a8c10"};
    for (size_t k = 0; k < 2; k++) {
        memset(x->dedup, 0, DEDUP_SLOTS * sizeof *x->dedup);
        uint64_t oh = dedup_origin_hash(ids[k]);
        for (uint64_t seq = 1; seq <= DEDUP_SLOTS; seq++) {
            lattice_op_result r = {.status = LATTICE_OK, .num = (int64_t)seq};
            dedup_put(x, oh, seq, &r);
        }
        for (uint64_t seq = 1; seq <= DEDUP_SLOTS; seq++) {
            const dedup_entry *e = dedup_get(x, oh, seq);
            ck_assert_msg(e && e->num == (int64_t)seq, "origin %s: write %llu lost", ids[k], (unsigned long long)seq);
        }
        lattice_op_result r = {.status = LATTICE_OK, .num = -1};
        dedup_put(x, oh, DEDUP_SLOTS + 1, &r);
        ck_assert_ptr_null(dedup_get(x, oh, 1));
        ck_assert_ptr_nonnull(dedup_get(x, oh, 2));
        ck_assert_ptr_nonnull(dedup_get(x, oh, DEDUP_SLOTS + 1));
        ck_assert_ptr_null(dedup_get(x, dedup_origin_hash("another"), 2)); /* not another origin's */
    }
    /* Two origins writing a little each: both kept. */
    memset(x->dedup, 0, DEDUP_SLOTS * sizeof *x->dedup);
    uint64_t a = dedup_origin_hash(ids[0]), b = dedup_origin_hash(ids[1]);
    for (uint64_t seq = 1; seq <= 100; seq++) {
        lattice_op_result r = {.status = LATTICE_OK, .num = (int64_t)seq};
        dedup_put(x, a, seq, &r);
        dedup_put(x, b, seq, &r);
    }
    for (uint64_t seq = 1; seq <= 100; seq++) {
        ck_assert_ptr_nonnull(dedup_get(x, a, seq));
        ck_assert_ptr_nonnull(dedup_get(x, b, seq));
    }
    lt_free(x->dedup);
    lt_free(x);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("route");
    TCase *t = tcase_create("route");
    tcase_add_test(t, each_op_goes_to_its_primary_in_one_message_per_node);
    tcase_add_test(t, issuer_errors_without_a_round_trip);
    tcase_add_test(t, a_server_not_yet_joined_waits_instead_of_refusing);
    tcase_add_test(t, full_async_acks_when_sent);
    tcase_add_test(t, reads_from_a_local_backup_copy_and_writes_as_primary);
    tcase_add_test(t, resent_writes_are_not_applied_twice);
    tcase_add_test(t, resent_incrbyfloat_answers_its_float);
    tcase_add_test(t, retried_ops_keep_their_order);
    tcase_add_test(t, reads_see_only_acknowledged_writes);
    tcase_add_test(t, a_write_a_copy_has_no_room_for_is_undone);
    tcase_add_test(t, a_refused_write_is_not_acknowledged_by_its_resend);
    tcase_add_test(t, a_replication_a_lost_connection_dropped_goes_again);
    tcase_add_test(t, a_copy_without_the_cache_yet_gets_the_write_again);
    tcase_add_test(t, an_older_remove_leaves_a_newer_write);
    tcase_add_test(t, resend_records_keep_an_origins_last_writes);
    tcase_add_test(t, a_joiner_applies_writes_addressed_to_it_from_an_older_view);
    suite_add_tcase(s, t);
    TCase *f = tcase_create("fast");
    tcase_set_timeout(f, 60);
    tcase_add_test(f, fast_words_follow_writes_in_flight_and_clean_copies);
    tcase_add_test(f, fast_path_closes_on_freeze_role_change_fence_and_cache_gone);
    tcase_add_test(f, inline_reads_never_see_an_applied_uncommitted_value);
    suite_add_tcase(s, f);
    return lt_run_suite(s);
}
