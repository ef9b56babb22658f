/* A node joins a 3-node grid, in process: plan, sessions, applier, while a
 * write load (puts and removes) keeps reaching every OWNING and MOVING copy.
 * Afterwards every copy of every partition holds exactly what an oracle of
 * the acknowledged writes says, verify finds no conflict, and the copies
 * outside the new owners are evicted at the switch, as the executor does. */
#include "affinity_view.h"
#include "rebalance_tests.h"
#include "rebalance_view.h"

#define NODES 4
#define PARTS 64u
#define KEYS 6000u

static const char *IDS4[NODES] = {"127.0.0.1:47500", "127.0.0.1:47501", "127.0.0.1:47502",
                                  "127.0.0.1:47503"};

struct grid {
    struct t_env env[NODES];
    lattice_rebalance_copy copies[NODES * PARTS];
    uint8_t live[NODES];
    uint64_t counter[PARTS];        /* the primary's update counter */
    uint64_t version[KEYS];         /* oracle: last acknowledged write (0 = never) */
    uint8_t removed[KEYS];
    uint64_t seed;
    /* the load in progress at the joiner: */
    lattice_rebalance_applier *applier;
    int loading_node;
    int64_t loading_part;           /* half the writes go here while set (-1: none) */
};

static lattice_affinity *aff4(size_t n)
{
    lattice_affinity_node nodes[NODES];
    for (size_t i = 0; i < n; i++) nodes[i] = (lattice_affinity_node){IDS4[i], "h", i + 1};
    lattice_cache_config cfg;
    lattice_cache_config_init(&cfg, "c");
    cfg.partitions = PARTS;
    cfg.backups = 1;
    lattice_affinity *a;
    ck_assert_int_eq(lattice_affinity_compute(nodes, n, &cfg, &a), LATTICE_OK);
    return a;
}

static int key_of(uint64_t id, char *buf)
{
    return snprintf(buf, 32, "k%llu", (unsigned long long)id);
}

static uint32_t part_of(uint64_t id)
{
    char key[32];
    int kl = key_of(id, key);
    return lattice_partition_of_key(key, (size_t)kl, PARTS);
}

/* One acknowledged write: the primary's counter moves on and every OWNING or
 * MOVING copy applies it (what full_sync promises). */
static void write_one(struct grid *g)
{
    g->seed = t_mix64(g->seed + 1);
    uint64_t id = g->seed % KEYS;
    int remove = (g->seed >> 32) % 4 == 0;
    if (g->loading_part >= 0 && (g->seed >> 40) & 1)
        while (part_of(id) != (uint32_t)g->loading_part) id = (id + 1) % KEYS;
    uint32_t p = part_of(id);
    uint64_t v = ++g->counter[p];
    char key[32];
    int kl = key_of(id, key);
    for (int n = 0; n < NODES; n++) {
        lattice_rebalance_copy *c = &g->copies[n * PARTS + p];
        if (!g->live[n] || (c->state != LATTICE_PART_OWNING && c->state != LATTICE_PART_MOVING))
            continue;
        if (remove) {
            lattice_store_remove(g->env[n].store, p, key, (size_t)kl);
            if (c->state == LATTICE_PART_MOVING && n == g->loading_node)
                ck_assert_int_eq(lattice_rebalance_applier_note_remove(g->applier, p, key,
                                                                       (size_t)kl, v),
                                 LATTICE_OK);
        } else {
            t_put(g->env[n].store, p, id, 20 + id % 90, v, 0);
        }
        if (v > c->counter) c->counter = v;
    }
    g->version[id] = v;
    g->removed[id] = (uint8_t)remove;
}

static lattice_status counter_of(void *arg, uint32_t partition, uint64_t *counter)
{
    const lattice_rebalance_copy *c = arg; /* the supplier's copies */
    if (c[partition].state != LATTICE_PART_OWNING) return LATTICE_ERR_NOT_OWNER;
    *counter = c[partition].counter;
    return LATTICE_OK;
}

/* Runs one session (one demander, several partitions, one supplier list)
 * to the end, with writes between messages. */
static void run_session(struct grid *g, const lattice_rebalance_session_spec *ss,
                        const uint32_t *parts, const uint32_t *sup, uint64_t rebalance_id)
{
    lattice_rebalance_ids ids = {2, 0, rebalance_id, 1};
    lattice_rebalance_flow_config cfg = {.prefetch = 3, .timeout_ms = 10000, .batch_bytes = 2048};
    int d = (int)ss->demander;
    ck_assert_int_eq(lattice_rebalance_applier_create(g->env[d].store, "c", &ids, NULL, &g->applier),
                     LATTICE_OK);
    g->loading_node = d;
    for (uint32_t i = 0; i < ss->partition_count; i++) {
        lattice_rebalance_copy *dc = &g->copies[d * PARTS + parts[i]];
        ck_assert_int_eq(lattice_rebalance_applier_begin(g->applier, parts[i], true), LATTICE_OK);
        dc->state = LATTICE_PART_MOVING; /* from here on writes reach it */
        dc->counter = 0;
    }
    lattice_rebalance_demander *dm;
    ck_assert_int_eq(lattice_rebalance_demander_create("c", &ids, parts, ss->partition_count,
                                                       ss->supplier_count, &cfg, &dm),
                     LATTICE_OK);
    lattice_rebalance_supplier *sp = NULL;
    lattice_rebalance_out to_sup, to_dem;
    lattice_rebalance_out_init(&to_sup);
    lattice_rebalance_out_init(&to_dem);
    ck_assert_int_eq(lattice_rebalance_demander_start(dm, 0, &to_sup), LATTICE_OK);
    while (to_sup.count) {
        g->loading_part = rv_demander_current(dm);
        for (size_t i = 0; i < to_sup.count; i++) {
            uint32_t s = sup[to_sup.msgs[i].to];
            lattice_rebalance_demand dd;
            ck_assert_int_eq(lattice_rebalance_demand_decode(to_sup.msgs[i].buf, to_sup.msgs[i].len,
                                                             0, &dd),
                             LATTICE_OK);
            if (!sp)
                ck_assert_int_eq(lattice_rebalance_supplier_create(g->env[s].store, &dd, &cfg,
                                                                   counter_of,
                                                                   &g->copies[s * PARTS], &sp),
                                 LATTICE_OK);
            ck_assert_int_eq(lattice_rebalance_supplier_on_demand(sp, &dd, 0, &to_dem), LATTICE_OK);
            lattice_rebalance_demand_clear(&dd);
            for (int w = 0; w < 3; w++) write_one(g);
        }
        lattice_rebalance_out_clear(&to_sup);
        for (size_t i = 0; i < to_dem.count; i++) {
            lattice_rebalance_supply *s;
            ck_assert_int_eq(lattice_rebalance_supply_decode(to_dem.msgs[i].buf, to_dem.msgs[i].len,
                                                             0, &s),
                             LATTICE_OK);
            lattice_rebalance_demander_event ev;
            ck_assert_int_eq(lattice_rebalance_demander_on_supply(dm, 0, s, 0, &to_sup, &ev),
                             LATTICE_OK);
            ck_assert_int_eq(ev, LATTICE_REBALANCE_ACCEPT);
            lattice_rebalance_apply_result r;
            ck_assert_int_eq(lattice_rebalance_applier_apply(g->applier, s, &r), LATTICE_OK);
            if (r.partition_done) {
                /* MOVING -> OWNING with the counter raised to the supplier's. */
                lattice_rebalance_supply_info in;
                lattice_rebalance_supply_info_of(s, &in);
                lattice_rebalance_copy *dc = &g->copies[d * PARTS + in.partition];
                dc->state = LATTICE_PART_OWNING;
                if (r.update_counter > dc->counter) dc->counter = r.update_counter;
            }
            lattice_rebalance_supply_free(s);
            for (int w = 0; w < 3; w++) write_one(g);
        }
        lattice_rebalance_out_clear(&to_dem);
    }
    ck_assert_int_eq(lattice_rebalance_demander_state_of(dm), LATTICE_REBALANCE_DEMANDER_DONE);
    ck_assert(lattice_rebalance_supplier_done(sp));
    ck_assert_uint_eq(rv_applier_pending(g->applier), 0);
    lattice_rebalance_supplier_free(sp);
    lattice_rebalance_demander_free(dm);
    lattice_rebalance_applier_free(g->applier);
    g->applier = NULL;
    g->loading_node = -1;
    g->loading_part = -1;
}

START_TEST(join_under_load_loses_nothing_and_verifies)
{
    rcu_register_thread();
    struct grid *g = calloc(1, sizeof *g);
    g->seed = 2024;
    g->loading_node = -1;
    g->loading_part = -1;
    lattice_affinity *old = aff4(3), *neu = aff4(4);
    for (int n = 0; n < NODES; n++) {
        t_env_open(&g->env[n], PARTS, 64);
        g->live[n] = 1;
        for (uint32_t p = 0; p < PARTS; p++) {
            int32_t ai = lattice_affinity_node_index(old, IDS4[n]);
            int owner = ai >= 0 && lattice_affinity_role(old, p, (uint32_t)ai) >= 0;
            g->copies[n * PARTS + p] = (lattice_rebalance_copy){
                owner ? LATTICE_PART_OWNING : LATTICE_PART_EVICTED, 0};
        }
    }
    for (int i = 0; i < 20000; i++) write_one(g);
    lattice_rebalance_plan_input in = {.serving = old, .ideal = neu, .nodes = IDS4,
                                       .node_count = NODES, .live = g->live,
                                       .copies = g->copies, .policy = LATTICE_REBALANCE_SPREAD};
    lattice_rebalance_plan *pl;
    ck_assert_int_eq(lattice_rebalance_plan_compute(&in, &pl), LATTICE_OK);
    size_t nt, ns;
    const lattice_rebalance_task *t = rv_plan_tasks(pl, &nt);
    const uint32_t *sup = lattice_rebalance_plan_suppliers(pl, &ns);
    ck_assert_uint_gt(nt, 0);
    for (size_t k = 0; k < nt; k++) ck_assert_uint_eq(t[k].demander, 3);
    lattice_rebalance_session_spec *ss;
    size_t nss;
    uint32_t *sparts;
    ck_assert_int_eq(lattice_rebalance_plan_sessions(pl, &ss, &nss, &sparts), LATTICE_OK);
    ck_assert_uint_lt(nss, nt); /* partitions share sessions */
    for (size_t k = 0; k < nss; k++)
        run_session(g, &ss[k], sparts + ss[k].partition_first, sup + ss[k].supplier_first, 1 + k);
    lt_free(ss);
    lt_free(sparts);
    /* The switch, as the executor does it: a copy outside the new owners is
     * evicted (RENTING -> EVICTED). */
    for (int n = 0; n < NODES; n++)
        for (uint32_t p = 0; p < PARTS; p++) {
            int32_t ai = lattice_affinity_node_index(neu, IDS4[n]);
            lattice_rebalance_copy *c = &g->copies[n * PARTS + p];
            if ((ai >= 0 && lattice_affinity_role(neu, p, (uint32_t)ai) >= 0) || c->state == LATTICE_PART_EVICTED)
                continue;
            c->state = LATTICE_PART_EVICTED;
            c->counter = 0;
            ck_assert_int_eq(lattice_store_clear(g->env[n].store, p), LATTICE_OK);
        }
    for (int i = 0; i < 2000; i++) write_one(g); /* writes go on after the switch */
    /* Every partition: exactly its ideal owners hold it, OWNING, equal. */
    lattice_rebalance_digest dg[NODES * PARTS];
    size_t nd = 0;
    for (uint32_t p = 0; p < PARTS; p++) {
        int owners = 0;
        for (int n = 0; n < NODES; n++) {
            int32_t ai = lattice_affinity_node_index(neu, IDS4[n]);
            int owner = lattice_affinity_role(neu, p, (uint32_t)ai) >= 0;
            const lattice_rebalance_copy *c = &g->copies[n * PARTS + p];
            ck_assert_int_eq(c->state, owner ? LATTICE_PART_OWNING : LATTICE_PART_EVICTED);
            if (!owner) {
                ck_assert_uint_eq(lattice_store_count(g->env[n].store, p), 0);
                continue;
            }
            owners++;
            ck_assert_int_eq(lattice_rebalance_digest_partition(g->env[n].store, p, c->counter,
                                                                &dg[nd]),
                             LATTICE_OK);
            dg[nd++].node = (uint32_t)n;
        }
        ck_assert_int_eq(owners, 2);
    }
    lattice_rebalance_conflict *cf;
    size_t ncf;
    ck_assert_int_eq(lattice_rebalance_verify(dg, nd, &cf, &ncf), LATTICE_OK);
    ck_assert_uint_eq(ncf, 0);
    /* No acknowledged write lost, on any copy. */
    for (uint64_t id = 0; id < KEYS; id++) {
        uint32_t p = part_of(id);
        char key[32];
        int kl = key_of(id, key);
        for (int n = 0; n < NODES; n++) {
            if (g->copies[n * PARTS + p].state != LATTICE_PART_OWNING) continue;
            lattice_store_meta m;
            uint8_t v[128];
            int rc = lattice_store_get(g->env[n].store, p, key, (size_t)kl, v, sizeof v, &m);
            if (g->version[id] == 0 || g->removed[id]) {
                ck_assert_msg(rc == LATTICE_ERR_NOT_FOUND, "k%llu on node %d: removed, found",
                              (unsigned long long)id, n);
            } else {
                ck_assert_int_eq(rc, LATTICE_OK);
                ck_assert_uint_eq(m.version, g->version[id]);
            }
        }
    }
    /* The joiner took about a quarter of the primaries. */
    uint32_t prim = av_primaries_of(neu, (uint32_t)lattice_affinity_node_index(neu, IDS4[3]));
    ck_assert_uint_ge(prim, PARTS / 8);
    ck_assert_uint_le(prim, PARTS * 3 / 8);
    lattice_rebalance_plan_free(pl);
    lattice_affinity_free(old);
    lattice_affinity_free(neu);
    for (int n = 0; n < NODES; n++) t_env_close(&g->env[n]);
    free(g);
    rcu_unregister_thread();
}
END_TEST

TCase *rebalance_join_tcase(void)
{
    TCase *tc = tcase_create("join");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, join_under_load_loses_nothing_and_verifies);
    return tc;
}
