/* Flow control: a whole session driven in memory (no sockets) with a
 * simulated clock: prefetch window, ack sequence, throttle, timeouts and
 * refusals switching supplier, stale batches from an old supplier, resume. */
#include "rebalance_tests.h"
#include "rebalance_view.h"

#define NSUP 3
#define QMAX 4096

struct qmsg {
    int to_demander; /* else to supplier `peer` */
    uint32_t peer;
    void *buf;
    size_t len;
};

struct net {
    struct t_env src[NSUP], dst;
    lattice_rebalance_demander *d;
    lattice_rebalance_applier *a;
    lattice_rebalance_supplier *s[NSUP];
    lattice_rebalance_flow_config cfg;
    int dead[NSUP];       /* drops everything to and from it */
    int dies_after[NSUP]; /* > 0: dead after sending this many batches */
    int sent[NSUP];
    lattice_status refuse[NSUP];
    struct qmsg q[QMAX];
    size_t qh, qt;
    uint64_t now;
    uint32_t max_in_flight;
    uint64_t acks[QMAX];
    size_t nacks;
    size_t batches_applied;
    struct qmsg late;     /* a batch kept back to deliver late */
    int keep_late;
};

static lattice_status counter_fn(void *arg, uint32_t partition, uint64_t *counter)
{
    lattice_status *why = arg;
    *counter = 500 + partition;
    return *why;
}

static void enqueue(struct net *n, int to_dem, uint32_t peer, lattice_rebalance_out *o)
{
    for (size_t i = 0; i < o->count; i++) {
        ck_assert_uint_lt(n->qt - n->qh, QMAX);
        n->q[n->qt++ % QMAX] = (struct qmsg){to_dem, to_dem ? peer : o->msgs[i].to,
                                             o->msgs[i].buf, o->msgs[i].len};
        o->msgs[i].buf = NULL;
    }
    o->count = 0;
}

static void to_supplier(struct net *n, struct qmsg *m)
{
    uint32_t i = m->peer;
    lattice_rebalance_demand dm;
    ck_assert_int_eq(lattice_rebalance_demand_decode(m->buf, m->len, 0, &dm), LATTICE_OK);
    if (dm.ack) n->acks[n->nacks++] = dm.ack;
    lattice_rebalance_out o;
    lattice_rebalance_out_init(&o);
    if (!n->s[i] || lattice_rebalance_supplier_on_demand(n->s[i], &dm, n->now, &o) ==
                        LATTICE_ERR_INVAL) {
        /* A new session (or the first): what a node does when ids change. */
        lattice_rebalance_supplier_free(n->s[i]);
        ck_assert_int_eq(lattice_rebalance_supplier_create(n->src[i].store, &dm, &n->cfg,
                                                           counter_fn, &n->refuse[i], &n->s[i]),
                         LATTICE_OK);
        ck_assert_int_eq(lattice_rebalance_supplier_on_demand(n->s[i], &dm, n->now, &o), LATTICE_OK);
    }
    uint32_t fl = rv_supplier_in_flight(n->s[i]);
    if (fl > n->max_in_flight) n->max_in_flight = fl;
    ck_assert_uint_le(fl, n->cfg.prefetch);
    n->sent[i] += (int)o.count;
    enqueue(n, 1, i, &o);
    lattice_rebalance_out_clear(&o);
    lattice_rebalance_demand_clear(&dm);
    if (n->dies_after[i] && n->sent[i] >= n->dies_after[i]) n->dead[i] = 1;
}

static void sync_ids(struct net *n)
{
    lattice_rebalance_ids ids;
    lattice_rebalance_demander_ids(n->d, &ids);
    lattice_rebalance_applier_set_ids(n->a, &ids);
}

static lattice_rebalance_demander_event to_demander(struct net *n, struct qmsg *m)
{
    lattice_rebalance_supply *s;
    ck_assert_int_eq(lattice_rebalance_supply_decode(m->buf, m->len, 0, &s), LATTICE_OK);
    lattice_rebalance_out o;
    lattice_rebalance_out_init(&o);
    lattice_rebalance_demander_event ev;
    ck_assert_int_eq(lattice_rebalance_demander_on_supply(n->d, m->peer, s, n->now, &o, &ev),
                     LATTICE_OK);
    if (ev == LATTICE_REBALANCE_ACCEPT) {
        lattice_rebalance_apply_result r;
        ck_assert_int_eq(lattice_rebalance_applier_apply(n->a, s, &r), LATTICE_OK);
        ck_assert_int_eq(r.verdict, LATTICE_REBALANCE_APPLIED);
        n->batches_applied++;
    }
    sync_ids(n);
    enqueue(n, 0, 0, &o);
    lattice_rebalance_out_clear(&o);
    lattice_rebalance_supply_free(s);
    return ev;
}

static void net_open(struct net *n, uint32_t parts, size_t entries, uint32_t prefetch,
                     uint64_t throttle, uint64_t batch_bytes)
{
    memset(n, 0, sizeof *n);
    for (int i = 0; i < NSUP; i++) t_env_open(&n->src[i], 8, 32);
    t_env_open(&n->dst, 8, 64);
    /* Every supplier holds the same data (copies of one partition). */
    for (uint32_t p = 0; p < parts; p++)
        for (uint64_t k = 0; k < entries; k++)
            for (int i = 0; i < NSUP; i++) t_put(n->src[i].store, p, p * 100000 + k, 150, 1 + k, 0);
    n->cfg = (lattice_rebalance_flow_config){.prefetch = prefetch, .throttle_ms = throttle,
                                             .timeout_ms = 10000, .batch_bytes = batch_bytes};
    lattice_rebalance_ids ids = {3, 0, 11, 1};
    uint32_t list[8];
    for (uint32_t p = 0; p < parts; p++) list[p] = p;
    ck_assert_int_eq(lattice_rebalance_demander_create("c", &ids, list, parts, NSUP, &n->cfg, &n->d),
                     LATTICE_OK);
    ck_assert_int_eq(lattice_rebalance_applier_create(n->dst.store, "c", &ids, NULL, &n->a),
                     LATTICE_OK);
    for (uint32_t p = 0; p < parts; p++)
        ck_assert_int_eq(lattice_rebalance_applier_begin(n->a, p, true), LATTICE_OK);
    n->now = 1000000;
}

static void net_close(struct net *n)
{
    while (n->qh < n->qt) lt_free(n->q[n->qh++ % QMAX].buf);
    lt_free(n->late.buf);
    for (int i = 0; i < NSUP; i++) {
        lattice_rebalance_supplier_free(n->s[i]);
        t_env_close(&n->src[i]);
    }
    lattice_rebalance_demander_free(n->d);
    lattice_rebalance_applier_free(n->a);
    t_env_close(&n->dst);
}

/* Delivers messages until the demander is done or failed; when nothing is in
 * flight, jumps the clock to the earliest deadline. */
static lattice_rebalance_demander_state run(struct net *n)
{
    lattice_rebalance_out o;
    lattice_rebalance_out_init(&o);
    ck_assert_int_eq(lattice_rebalance_demander_start(n->d, n->now, &o), LATTICE_OK);
    enqueue(n, 0, 0, &o);
    lattice_rebalance_out_clear(&o);
    for (int guard = 0; guard < 1000000; guard++) {
        lattice_rebalance_demander_state st = lattice_rebalance_demander_state_of(n->d);
        /* Finished: deliver what is still queued (the final ack), then stop. */
        if ((st == LATTICE_REBALANCE_DEMANDER_DONE || st == LATTICE_REBALANCE_DEMANDER_FAILED) &&
            n->qh == n->qt)
            return st;
        if (n->qh < n->qt) {
            struct qmsg m = n->q[n->qh++ % QMAX];
            if (m.to_demander && n->keep_late && !n->late.buf && m.peer == 0) {
                n->late = m; /* hold one batch of supplier 0 back */
                continue;
            }
            if (n->dead[m.peer]) {
                lt_free(m.buf);
                continue;
            }
            if (m.to_demander) to_demander(n, &m);
            else to_supplier(n, &m);
            lt_free(m.buf);
            continue;
        }
        uint64_t next = UINT64_MAX;
        lattice_rebalance_out_init(&o);
        ck_assert_int_eq(lattice_rebalance_demander_on_tick(n->d, n->now, &o), LATTICE_OK);
        if (o.deadline < next) next = o.deadline;
        enqueue(n, 0, 0, &o);
        sync_ids(n);
        for (uint32_t i = 0; i < NSUP; i++) {
            if (!n->s[i] || n->dead[i]) continue;
            ck_assert_int_eq(lattice_rebalance_supplier_on_tick(n->s[i], n->now, &o), LATTICE_OK);
            if (o.deadline < next) next = o.deadline;
            enqueue(n, 1, i, &o);
        }
        lattice_rebalance_out_clear(&o);
        if (n->qh == n->qt) {
            ck_assert_uint_ne(next, UINT64_MAX);
            ck_assert_uint_gt(next, n->now);
            n->now = next;
        }
    }
    ck_abort_msg("session did not finish");
    return LATTICE_REBALANCE_DEMANDER_FAILED;
}

static void check_copied(struct net *n, uint32_t parts, int from)
{
    for (uint32_t p = 0; p < parts; p++) {
        ck_assert_uint_eq(lattice_store_count(n->dst.store, p), lattice_store_count(n->src[from].store, p));
        ck_assert_uint_eq(t_digest(n->dst.store, p), t_digest(n->src[from].store, p));
    }
}

START_TEST(flow_session_moves_partitions_acks_in_order)
{
    rcu_register_thread();
    struct net n;
    net_open(&n, 4, 300, 3, 0, 4096);
    ck_assert_int_eq(run(&n), LATTICE_REBALANCE_DEMANDER_DONE);
    check_copied(&n, 4, 0);
    ck_assert_uint_eq(rv_demander_supplier(n.d), 0);
    ck_assert_int_eq(rv_demander_current(n.d), -1);
    /* Every batch acknowledged once, in order, by the next demand. */
    ck_assert_uint_eq(n.nacks, n.batches_applied);
    for (size_t i = 0; i < n.nacks; i++) ck_assert_uint_eq(n.acks[i], i + 1);
    ck_assert_uint_gt(n.batches_applied, 40);
    /* The window was used, never exceeded (checked on every step). */
    ck_assert_uint_eq(n.max_in_flight, 3);
    ck_assert(lattice_rebalance_supplier_done(n.s[0]));
    ck_assert_int_eq(n.sent[1] + n.sent[2], 0);
    net_close(&n);
    rcu_unregister_thread();
}
END_TEST

START_TEST(flow_window_follows_prefetch)
{
    rcu_register_thread();
    for (uint32_t prefetch = 1; prefetch <= 5; prefetch += 2) {
        struct net n;
        net_open(&n, 2, 200, prefetch, 0, 2048);
        ck_assert_int_eq(run(&n), LATTICE_REBALANCE_DEMANDER_DONE);
        check_copied(&n, 2, 0);
        ck_assert_uint_eq(n.max_in_flight, prefetch);
        net_close(&n);
    }
    rcu_unregister_thread();
}
END_TEST

START_TEST(flow_timeout_switches_supplier)
{
    rcu_register_thread();
    struct net n;
    net_open(&n, 3, 300, 3, 0, 4096);
    uint64_t t0 = n.now;
    n.dead[0] = 1; /* silent from the start */
    ck_assert_int_eq(run(&n), LATTICE_REBALANCE_DEMANDER_DONE);
    check_copied(&n, 3, 1);
    ck_assert_uint_eq(rv_demander_supplier(n.d), 1);
    lattice_rebalance_ids ids;
    lattice_rebalance_demander_ids(n.d, &ids);
    ck_assert_uint_eq(ids.session, 2);
    ck_assert_uint_ge(n.now - t0, 10000);
    net_close(&n);
    rcu_unregister_thread();
}
END_TEST

START_TEST(flow_supplier_dies_mid_stream)
{
    rcu_register_thread();
    struct net n;
    net_open(&n, 3, 300, 3, 0, 4096);
    n.dies_after[0] = 20;
    n.dies_after[1] = 15;
    ck_assert_int_eq(run(&n), LATTICE_REBALANCE_DEMANDER_DONE);
    check_copied(&n, 3, 2);
    ck_assert_uint_eq(rv_demander_supplier(n.d), 2);
    lattice_rebalance_ids ids;
    lattice_rebalance_demander_ids(n.d, &ids);
    ck_assert_uint_eq(ids.session, 3);
    net_close(&n);
    rcu_unregister_thread();
}
END_TEST

START_TEST(flow_lone_supplier_is_asked_again)
{
    /* One supplier whose first batch is lost: after the timeout the same
     * supplier is asked again in a new session, and the load completes. */
    rcu_register_thread();
    struct net n;
    net_open(&n, 2, 200, 3, 0, 4096);
    lattice_rebalance_demander_free(n.d);
    lattice_rebalance_ids ids = {3, 0, 11, 1};
    uint32_t list[] = {0, 1};
    ck_assert_int_eq(lattice_rebalance_demander_create("c", &ids, list, 2, 1, &n.cfg, &n.d),
                     LATTICE_OK);
    n.keep_late = 1;
    ck_assert_int_eq(run(&n), LATTICE_REBALANCE_DEMANDER_DONE);
    check_copied(&n, 2, 0);
    lattice_rebalance_demander_ids(n.d, &ids);
    ck_assert_uint_eq(ids.session, 2);
    ck_assert_uint_eq(rv_demander_supplier(n.d), 0);
    net_close(&n);
    rcu_unregister_thread();
}
END_TEST

START_TEST(flow_refusal_switches_at_once)
{
    rcu_register_thread();
    struct net n;
    net_open(&n, 2, 100, 3, 0, 4096);
    n.refuse[0] = LATTICE_ERR_NOT_OWNER;
    uint64_t t0 = n.now;
    ck_assert_int_eq(run(&n), LATTICE_REBALANCE_DEMANDER_DONE);
    check_copied(&n, 2, 1);
    ck_assert_uint_eq(n.now, t0); /* no timeout was needed */
    ck_assert(lattice_rebalance_supplier_done(n.s[0])); /* the refuser has nothing pending */
    ck_assert_uint_eq(rv_supplier_in_flight(n.s[0]), 0);
    net_close(&n);
    rcu_unregister_thread();
}
END_TEST

START_TEST(flow_fails_when_every_supplier_fails)
{
    rcu_register_thread();
    struct net n;
    net_open(&n, 2, 100, 3, 0, 4096);
    n.dead[0] = n.dead[1] = 1;
    n.refuse[2] = LATTICE_ERR_NOT_OWNER;
    ck_assert_int_eq(run(&n), LATTICE_REBALANCE_DEMANDER_FAILED);
    lattice_rebalance_out o;
    lattice_rebalance_out_init(&o);
    ck_assert_int_eq(lattice_rebalance_demander_on_tick(n.d, n.now + 100000, &o), LATTICE_OK);
    ck_assert_uint_eq(o.count, 0);
    ck_assert_uint_eq(o.deadline, LATTICE_REBALANCE_NO_DEADLINE);
    net_close(&n);
    rcu_unregister_thread();
}
END_TEST

START_TEST(flow_throttle_spaces_batches)
{
    rcu_register_thread();
    struct net n;
    net_open(&n, 1, 200, 3, 50, 4096);
    uint64_t t0 = n.now;
    ck_assert_int_eq(run(&n), LATTICE_REBALANCE_DEMANDER_DONE);
    check_copied(&n, 1, 0);
    /* Simulated time: one batch per 50 ms. */
    ck_assert_uint_gt(n.batches_applied, 5);
    ck_assert_uint_ge(n.now - t0, (n.batches_applied - 1) * 50);
    net_close(&n);
    rcu_unregister_thread();
}
END_TEST

START_TEST(flow_late_batch_of_old_supplier_ignored)
{
    rcu_register_thread();
    struct net n;
    net_open(&n, 1, 300, 3, 0, 4096);
    n.keep_late = 1; /* supplier 0's first batch is held back: the demander times out */
    ck_assert_int_eq(run(&n), LATTICE_REBALANCE_DEMANDER_DONE);
    ck_assert_ptr_nonnull(n.late.buf);
    /* Now it arrives, from the old session: ignored, store unchanged. */
    uint64_t before = t_digest(n.dst.store, 0);
    lattice_rebalance_demander_event ev = to_demander(&n, &n.late);
    ck_assert_int_eq(ev, LATTICE_REBALANCE_IGNORE);
    lattice_rebalance_supply *s;
    ck_assert_int_eq(lattice_rebalance_supply_decode(n.late.buf, n.late.len, 0, &s), LATTICE_OK);
    lattice_rebalance_apply_result r;
    ck_assert_int_eq(lattice_rebalance_applier_apply(n.a, s, &r), LATTICE_OK);
    ck_assert_int_eq(r.verdict, LATTICE_REBALANCE_STALE);
    lattice_rebalance_supply_free(s);
    ck_assert_uint_eq(t_digest(n.dst.store, 0), before);
    check_copied(&n, 1, 1);
    net_close(&n);
    rcu_unregister_thread();
}
END_TEST

START_TEST(supplier_resume_resends_unacked)
{
    rcu_register_thread();
    struct t_env e;
    t_env_open(&e, 2, 16);
    for (uint64_t k = 0; k < 200; k++) t_put(e.store, 0, k, 150, 1, 0);
    uint32_t parts[] = {0};
    lattice_rebalance_demand dm = {.ids = {1, 0, 1, 1}, .partitions = parts,
                                   .partition_count = 1, .window = 3};
    strcpy(dm.cache, "c");
    lattice_rebalance_flow_config cfg = {.prefetch = 3, .timeout_ms = 1000, .batch_bytes = 1024};
    lattice_status ok = LATTICE_OK;
    lattice_rebalance_supplier *s;
    ck_assert_int_eq(lattice_rebalance_supplier_create(e.store, &dm, &cfg, counter_fn, &ok, &s),
                     LATTICE_OK);
    lattice_rebalance_out o;
    lattice_rebalance_out_init(&o);
    ck_assert_int_eq(lattice_rebalance_supplier_on_demand(s, &dm, 0, &o), LATTICE_OK);
    ck_assert_uint_eq(o.count, 3);
    lattice_rebalance_out_clear(&o);
    /* Ack 1 and ask to resume: batches 2, 3 again, then 4. */
    dm.ack = 1;
    dm.resume = true;
    ck_assert_int_eq(lattice_rebalance_supplier_on_demand(s, &dm, 1, &o), LATTICE_OK);
    ck_assert_uint_eq(o.count, 3);
    const uint64_t want[] = {2, 3, 4};
    for (size_t i = 0; i < 3; i++) {
        lattice_rebalance_supply *sp;
        ck_assert_int_eq(lattice_rebalance_supply_decode(o.msgs[i].buf, o.msgs[i].len, 0, &sp),
                         LATTICE_OK);
        lattice_rebalance_supply_info in;
        lattice_rebalance_supply_info_of(sp, &in);
        ck_assert_uint_eq(in.batch, want[i]);
        lattice_rebalance_supply_free(sp);
    }
    lattice_rebalance_out_clear(&o);
    ck_assert_uint_eq(rv_supplier_in_flight(s), 3);
    /* An ack beyond what was sent, or another session: refused, no change. */
    dm.resume = false;
    dm.ack = 99;
    ck_assert_int_eq(lattice_rebalance_supplier_on_demand(s, &dm, 2, &o), LATTICE_ERR_INVAL);
    dm.ack = 2;
    dm.ids.session = 2;
    ck_assert_int_eq(lattice_rebalance_supplier_on_demand(s, &dm, 2, &o), LATTICE_ERR_INVAL);
    ck_assert_uint_eq(o.count, 0);
    ck_assert_uint_eq(rv_supplier_in_flight(s), 3);
    lattice_rebalance_supplier_free(s);
    t_env_close(&e);
    rcu_unregister_thread();
}
END_TEST

/* Random supplies (right and wrong ids, sessions, senders, partitions,
 * batch numbers, refusals) thrown at a demander: it accepts only the next
 * batch of its current partition from its current supplier and session,
 * and its state only moves forward. */
START_TEST(flow_random_supplies_keep_the_contract)
{
    rcu_register_thread();
    struct t_env e;
    t_env_open(&e, 8, 16);
    for (uint32_t p = 0; p < 8; p++) t_put(e.store, p, p, 10, 1, 0);
    lattice_rebalance_flow_config cfg = {.prefetch = 3, .timeout_ms = 100, .batch_bytes = 4096};
    uint32_t parts[] = {2, 5, 7};
    uint64_t seed = 5, total_accepts = 0;
    int done = 0, failed = 0;
    for (int trial = 0; trial < 200; trial++) {
        lattice_rebalance_ids ids = {4, 1, 9, 1};
        lattice_rebalance_demander *d;
        ck_assert_int_eq(lattice_rebalance_demander_create("c", &ids, parts, 3, 2, &cfg, &d),
                         LATTICE_OK);
        lattice_rebalance_out o;
        lattice_rebalance_out_init(&o);
        uint64_t now = 0;
        ck_assert_int_eq(lattice_rebalance_demander_start(d, now, &o), LATTICE_OK);
        uint64_t accepted_in_session = 0;
        uint32_t session = 1;
        for (int step = 0; step < 300; step++) {
            lattice_rebalance_out_clear(&o);
            seed = t_mix64(seed + (uint64_t)step);
            lattice_rebalance_ids cur;
            lattice_rebalance_demander_ids(d, &cur);
            lattice_rebalance_ids sid = cur;
            if (seed % 7 == 0) sid.session += (uint32_t)(seed >> 8) % 3;
            if (seed % 11 == 0) sid.rebalance_id--;
            if (seed % 13 == 0) sid.topology_major++;
            int64_t curp = rv_demander_current(d);
            uint32_t p = (seed >> 16) % 3 ? (curp >= 0 ? (uint32_t)curp : 0) : (uint32_t)(seed >> 20) % 8;
            uint64_t batch = accepted_in_session + ((seed >> 24) % 4 ? 1 : (seed >> 28) % 4);
            if (batch == 0) batch = 1;
            uint32_t from = (seed >> 32) % 5 ? rv_demander_supplier(d) : (uint32_t)(seed >> 36) % 2;
            void *buf;
            size_t len;
            if ((seed >> 40) % 17 == 0) {
                ck_assert_int_eq(lattice_rebalance_supply_encode_refusal("c", &sid, p, batch,
                                                                         LATTICE_ERR_NOT_OWNER,
                                                                         &buf, &len),
                                 LATTICE_OK);
            } else {
                lattice_rebalance_batcher *b;
                bool last;
                ck_assert_int_eq(lattice_rebalance_batcher_create(e.store, "c", &sid, p, 4096, &b),
                                 LATTICE_OK);
                ck_assert_int_eq(lattice_rebalance_batcher_next(b, batch, 3, &buf, &len, &last, NULL),
                                 LATTICE_OK);
                lattice_rebalance_batcher_free(b);
            }
            lattice_rebalance_supply *s;
            ck_assert_int_eq(lattice_rebalance_supply_decode(buf, len, 0, &s), LATTICE_OK);
            lattice_rebalance_demander_state before = lattice_rebalance_demander_state_of(d);
            lattice_rebalance_demander_event ev;
            now += (seed >> 44) % 40;
            ck_assert_int_eq(lattice_rebalance_demander_on_supply(d, from, s, now, &o, &ev), LATTICE_OK);
            if (ev == LATTICE_REBALANCE_ACCEPT) {
                ck_assert_int_eq(before, LATTICE_REBALANCE_DEMANDER_WAITING);
                ck_assert_uint_eq(from, rv_demander_supplier(d));
                ck_assert_mem_eq(&sid, &cur, sizeof sid);
                ck_assert_int_eq((int64_t)p, curp);
                ck_assert_uint_eq(batch, accepted_in_session + 1);
                accepted_in_session++;
                total_accepts++;
                ck_assert_uint_eq(o.count, 1); /* the ack */
            }
            lattice_rebalance_out_clear(&o);
            ck_assert_int_eq(lattice_rebalance_demander_on_tick(d, now, &o), LATTICE_OK);
            lattice_rebalance_demander_ids(d, &cur);
            if (cur.session != session) {
                ck_assert_uint_gt(cur.session, session);
                session = cur.session;
                accepted_in_session = 0;
            }
            lattice_rebalance_demander_state after = lattice_rebalance_demander_state_of(d);
            ck_assert_int_ge(after, before);
            lattice_rebalance_supply_free(s);
            lt_free(buf);
        }
        done += lattice_rebalance_demander_state_of(d) == LATTICE_REBALANCE_DEMANDER_DONE;
        failed += lattice_rebalance_demander_state_of(d) == LATTICE_REBALANCE_DEMANDER_FAILED;
        lattice_rebalance_out_clear(&o);
        lattice_rebalance_demander_free(d);
    }
    /* The random walk reached every outcome (else it tests nothing). */
    ck_assert_uint_gt(total_accepts, 200);
    ck_assert_int_gt(done, 0);
    ck_assert_int_gt(failed, 0);
    t_env_close(&e);
    rcu_unregister_thread();
}
END_TEST

START_TEST(flow_bad_arguments)
{
    lattice_rebalance_flow_config cfg = {.prefetch = 3, .timeout_ms = 10, .batch_bytes = 4096};
    lattice_rebalance_ids ids = {1, 0, 1, 1};
    uint32_t parts[] = {1, LATTICE_PARTITION_MAX};
    lattice_rebalance_demander *d;
    ck_assert_int_eq(lattice_rebalance_demander_create("c", &ids, parts, 0, 1, &cfg, &d),
                     LATTICE_ERR_INVAL);
    ck_assert_int_eq(lattice_rebalance_demander_create("c", &ids, parts, 2, 1, &cfg, &d),
                     LATTICE_ERR_INVAL);
    ck_assert_int_eq(lattice_rebalance_demander_create("c", &ids, parts, 1, 0, &cfg, &d),
                     LATTICE_ERR_INVAL);
    ck_assert_int_eq(lattice_rebalance_demander_create("", &ids, parts, 1, 1, &cfg, &d),
                     LATTICE_ERR_INVAL);
    cfg.prefetch = 0;
    ck_assert_int_eq(lattice_rebalance_demander_create("c", &ids, parts, 1, 1, &cfg, &d),
                     LATTICE_ERR_INVAL);
    cfg.prefetch = 2;
    ck_assert_int_eq(lattice_rebalance_demander_create("c", &ids, parts, 1, 1, &cfg, &d),
                     LATTICE_OK);
    lattice_rebalance_out o;
    lattice_rebalance_out_init(&o);
    ck_assert_int_eq(lattice_rebalance_demander_start(d, 0, &o), LATTICE_OK);
    ck_assert_uint_eq(o.count, 1);
    ck_assert_uint_eq(o.deadline, 10);
    ck_assert_int_eq(lattice_rebalance_demander_start(d, 0, &o), LATTICE_ERR_INVAL);
    lattice_rebalance_out_clear(&o);
    lattice_rebalance_demander_free(d);
    /* Defaults from a cache config. */
    lattice_cache_config cc;
    lattice_cache_config_init(&cc, "c");
    lattice_rebalance_flow_config_of(&cc, &cfg);
    ck_assert_uint_eq(cfg.prefetch, 3);
    ck_assert_uint_eq(cfg.batch_bytes, 512 * 1024);
    ck_assert_uint_eq(cfg.timeout_ms, 10000);
    ck_assert_uint_eq(cfg.throttle_ms, 0);
    /* A lone largest entry fits the decode limit a demander uses. */
    ck_assert_uint_ge(lattice_rebalance_max_supply_bytes(&cc), cc.max_value_bytes + cc.max_key_bytes);
    ck_assert_uint_ge(lattice_rebalance_max_supply_bytes(&cc), cc.rebalance_batch_bytes);
}
END_TEST

TCase *rebalance_flow_tcase(void)
{
    TCase *tc = tcase_create("flow");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, flow_session_moves_partitions_acks_in_order);
    tcase_add_test(tc, flow_window_follows_prefetch);
    tcase_add_test(tc, flow_timeout_switches_supplier);
    tcase_add_test(tc, flow_supplier_dies_mid_stream);
    tcase_add_test(tc, flow_lone_supplier_is_asked_again);
    tcase_add_test(tc, flow_refusal_switches_at_once);
    tcase_add_test(tc, flow_fails_when_every_supplier_fails);
    tcase_add_test(tc, flow_throttle_spaces_batches);
    tcase_add_test(tc, flow_late_batch_of_old_supplier_ignored);
    tcase_add_test(tc, supplier_resume_resends_unacked);
    tcase_add_test(tc, flow_random_supplies_keep_the_contract);
    tcase_add_test(tc, flow_bad_arguments);
    return tc;
}
