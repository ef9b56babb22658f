/* Planner: join, leave, failure, several changes at once, a demander dying
 * mid-plan, stale copies, backups 0/1/2, determinism and bad input. */
#include "affinity_view.h"
#include "rebalance_tests.h"
#include "rebalance_view.h"

#define MAXN 8
#define PARTS 64u

struct world {
    const char *ids[MAXN];
    size_t n;
    uint8_t live[MAXN];
    lattice_rebalance_copy copies[MAXN * PARTS];
};

static lattice_affinity *aff(const char *const *ids, size_t n, uint32_t backups)
{
    lattice_affinity_node nodes[MAXN];
    for (size_t i = 0; i < n; i++) nodes[i] = (lattice_affinity_node){ids[i], ids[i], i + 1};
    lattice_cache_config cfg;
    lattice_cache_config_init(&cfg, "c");
    cfg.partitions = PARTS;
    cfg.backups = backups;
    lattice_affinity *a = NULL;
    ck_assert_int_eq(lattice_affinity_compute(nodes, n, &cfg, &a), LATTICE_OK);
    return a;
}

static void world_init(struct world *w, const char *const *ids, size_t n)
{
    memset(w, 0, sizeof *w);
    for (size_t i = 0; i < n; i++) {
        w->ids[i] = ids[i];
        w->live[i] = 1;
        for (uint32_t p = 0; p < PARTS; p++)
            w->copies[i * PARTS + p] = (lattice_rebalance_copy){LATTICE_PART_EVICTED, 0};
    }
    w->n = n;
}

static lattice_rebalance_copy *cp(struct world *w, size_t node, uint32_t p)
{
    return &w->copies[node * PARTS + p];
}

/* Every owner in a holds its partitions OWNING at counter 100 + p. */
static void own_from(struct world *w, const lattice_affinity *a)
{
    for (size_t i = 0; i < w->n; i++) {
        int32_t ai = lattice_affinity_node_index(a, w->ids[i]);
        for (uint32_t p = 0; p < PARTS; p++)
            if (ai >= 0 && lattice_affinity_role(a, p, (uint32_t)ai) >= 0)
                *cp(w, i, p) = (lattice_rebalance_copy){LATTICE_PART_OWNING, 100 + p};
    }
}

static lattice_rebalance_plan *plan(struct world *w, const lattice_affinity *serving,
                                    const lattice_affinity *ideal, lattice_rebalance_policy pol)
{
    lattice_rebalance_plan_input in = {.serving = serving, .ideal = ideal, .nodes = w->ids,
                                       .node_count = w->n, .live = w->live,
                                       .copies = w->copies, .policy = pol};
    lattice_rebalance_plan *p = NULL;
    ck_assert_int_eq(lattice_rebalance_plan_compute(&in, &p), LATTICE_OK);
    return p;
}

static int is_ideal_owner(const lattice_affinity *ideal, const char *id, uint32_t p)
{
    int32_t i = lattice_affinity_node_index(ideal, id);
    return i >= 0 && lattice_affinity_role(ideal, p, (uint32_t)i) >= 0;
}

/* What must hold for any plan: after the tasks, every live ideal owner holds
 * the best copy; suppliers are live OWNING copies at the best counter; copies
 * outside the ideal owners get no task. */
static void check_plan(struct world *w, const lattice_affinity *ideal,
                       const lattice_rebalance_plan *pl)
{
    size_t nt, ns, nl;
    const lattice_rebalance_task *t = rv_plan_tasks(pl, &nt);
    const uint32_t *sup = lattice_rebalance_plan_suppliers(pl, &ns);
    const uint32_t *lost = lattice_rebalance_plan_lost(pl, &nl);
    size_t want_tasks = 0, want_lost = 0;
    for (uint32_t p = 0; p < PARTS; p++) {
        int any = 0;
        uint64_t best = 0;
        for (size_t i = 0; i < w->n; i++)
            if (w->live[i] && cp(w, i, p)->state == LATTICE_PART_OWNING &&
                (!any || cp(w, i, p)->counter > best))
                best = cp(w, i, p)->counter, any = 1;
        if (!any) {
            int found = 0;
            for (size_t k = 0; k < nl; k++) found |= lost[k] == p;
            ck_assert_msg(found, "partition %u has no live OWNING copy but is not LOST", p);
            want_lost++;
            continue;
        }
        for (size_t i = 0; i < w->n; i++) {
            if (!w->live[i]) continue;
            int owner = is_ideal_owner(ideal, w->ids[i], p);
            const lattice_rebalance_copy *c = cp(w, i, p);
            int has_task = 0;
            for (size_t k = 0; k < nt; k++) {
                if (t[k].partition != p || t[k].demander != i) continue;
                has_task++;
                ck_assert_uint_eq(t[k].counter, best);
                ck_assert_uint_ge(t[k].supplier_count, 1);
                ck_assert_uint_eq(sup[t[k].supplier_first], t[k].supplier);
                for (uint32_t s = 0; s < t[k].supplier_count; s++) {
                    uint32_t sn = sup[t[k].supplier_first + s];
                    ck_assert(w->live[sn]);
                    ck_assert_int_eq(cp(w, sn, p)->state, LATTICE_PART_OWNING);
                    ck_assert_uint_eq(cp(w, sn, p)->counter, best);
                    ck_assert_uint_ne(sn, i);
                }
            }
            int complete = c->state == LATTICE_PART_OWNING && c->counter == best;
            if (owner && !complete) {
                ck_assert_msg(has_task == 1, "owner %s of %u: %d tasks", w->ids[i], p, has_task);
                want_tasks++;
            } else {
                ck_assert_msg(has_task == 0, "%s needs no task for %u", w->ids[i], p);
            }
        }
    }
    ck_assert_uint_eq(nt, want_tasks);
    ck_assert_uint_eq(nl, want_lost);
}

static const char *ABCD[] = {"10.0.0.1:47500", "10.0.0.2:47500", "10.0.0.3:47500",
                             "10.0.0.4:47500", "10.0.0.5:47500", "10.0.0.6:47500"};

START_TEST(plan_join_backups_0_1_2)
{
    for (uint32_t backups = 0; backups <= 2; backups++) {
        struct world w;
        world_init(&w, ABCD, 4);
        lattice_affinity *old = aff(ABCD, 3, backups), *neu = aff(ABCD, 4, backups);
        own_from(&w, old);
        lattice_rebalance_plan *pl = plan(&w, old, neu, LATTICE_REBALANCE_PREFER_PRIMARY);
        check_plan(&w, neu, pl);
        size_t nt, nl;
        const lattice_rebalance_task *t = rv_plan_tasks(pl, &nt);
        lattice_rebalance_plan_lost(pl, &nl);
        ck_assert_uint_eq(nl, 0);
        /* Only the joiner loads, exactly the partitions it now owns. */
        int32_t d = lattice_affinity_node_index(neu, ABCD[3]);
        uint32_t owned = av_node_partitions(
            neu, (uint32_t)d, AV_ROLE_PRIMARY | AV_ROLE_BACKUP, NULL);
        ck_assert_uint_gt(owned, 0);
        ck_assert_uint_eq(nt, owned);
        for (size_t k = 0; k < nt; k++) {
            ck_assert_uint_eq(t[k].demander, 3);
            /* The serving primary supplies. */
            int32_t prim = lattice_affinity_primary(old, t[k].partition);
            ck_assert_str_eq(lattice_affinity_node_id(old, (uint32_t)prim), ABCD[t[k].supplier]);
            ck_assert_uint_eq(t[k].supplier_count, backups + 1);
        }
        lattice_rebalance_plan_free(pl);
        lattice_affinity_free(old);
        lattice_affinity_free(neu);
    }
}
END_TEST

START_TEST(plan_graceful_leave_leaver_supplies)
{
    /* D leaves gracefully: it is still alive and serving until the switch. */
    for (uint32_t backups = 0; backups <= 2; backups++) {
        struct world w;
        world_init(&w, ABCD, 4);
        lattice_affinity *old = aff(ABCD, 4, backups), *neu = aff(ABCD, 3, backups);
        own_from(&w, old);
        lattice_rebalance_plan *pl = plan(&w, old, neu, LATTICE_REBALANCE_PREFER_PRIMARY);
        check_plan(&w, neu, pl);
        size_t nt;
        const lattice_rebalance_task *t = rv_plan_tasks(pl, &nt);
        ck_assert_uint_gt(nt, 0);
        int leaver_supplies = 0;
        for (size_t k = 0; k < nt; k++) {
            ck_assert_uint_ne(t[k].demander, 3);
            leaver_supplies |= t[k].supplier == 3;
        }
        /* With no backups the leaver holds the only copy: it must supply. */
        if (backups == 0) ck_assert(leaver_supplies);
        lattice_rebalance_plan_free(pl);
        lattice_affinity_free(old);
        lattice_affinity_free(neu);
    }
}
END_TEST

START_TEST(plan_failure_restores_redundancy_or_loses)
{
    for (uint32_t backups = 0; backups <= 2; backups++) {
        struct world w;
        world_init(&w, ABCD, 4);
        lattice_affinity *old = aff(ABCD, 4, backups), *neu = aff(ABCD, 3, backups);
        own_from(&w, old);
        w.live[3] = 0; /* D failed */
        lattice_rebalance_plan *pl = plan(&w, old, neu, LATTICE_REBALANCE_PREFER_PRIMARY);
        check_plan(&w, neu, pl);
        size_t nt, nl;
        const lattice_rebalance_task *t = rv_plan_tasks(pl, &nt);
        const uint32_t *lost = lattice_rebalance_plan_lost(pl, &nl);
        int32_t dd = lattice_affinity_node_index(old, ABCD[3]);
        uint32_t d_parts = av_node_partitions(
            old, (uint32_t)dd, AV_ROLE_PRIMARY | AV_ROLE_BACKUP, NULL);
        if (backups == 0) {
            /* D's partitions had one copy: LOST, nothing to load. */
            ck_assert_uint_eq(nl, d_parts);
            ck_assert_uint_eq(nt, 0);
            for (size_t k = 0; k < nl; k++)
                ck_assert_int_ge(lattice_affinity_role(old, lost[k], (uint32_t)dd), 0);
        } else {
            /* Every copy D held is rebuilt elsewhere: redundancy restored. */
            ck_assert_uint_eq(nl, 0);
            ck_assert_uint_eq(nt, d_parts);
            for (size_t k = 0; k < nt; k++) ck_assert_uint_ne(t[k].supplier, 3);
        }
        lattice_rebalance_plan_free(pl);
        lattice_affinity_free(old);
        lattice_affinity_free(neu);
    }
}
END_TEST

START_TEST(plan_several_changes_at_once)
{
    /* A..D serving; D fails while E and F join, backups 1. */
    struct world w;
    world_init(&w, ABCD, 6);
    lattice_affinity *old = aff(ABCD, 4, 1);
    const char *now_ids[] = {ABCD[0], ABCD[1], ABCD[2], ABCD[4], ABCD[5]};
    lattice_affinity *neu = aff(now_ids, 5, 1);
    own_from(&w, old);
    w.live[3] = 0;
    lattice_rebalance_plan *pl = plan(&w, old, neu, LATTICE_REBALANCE_PREFER_PRIMARY);
    check_plan(&w, neu, pl);
    size_t nt;
    const lattice_rebalance_task *t = rv_plan_tasks(pl, &nt);
    int e = 0, f = 0;
    for (size_t k = 0; k < nt; k++) {
        e |= t[k].demander == 4;
        f |= t[k].demander == 5;
        ck_assert_uint_ne(t[k].supplier, 3);
    }
    ck_assert(e && f);
    lattice_rebalance_plan_free(pl);
    lattice_affinity_free(old);
    lattice_affinity_free(neu);
}
END_TEST

START_TEST(plan_sessions_group_tasks)
{
    /* D fails while E and F join, backups 2: sessions cover every task once,
     * and a session's tasks share demander and supplier list. */
    struct world w;
    world_init(&w, ABCD, 6);
    lattice_affinity *old = aff(ABCD, 4, 2);
    const char *now_ids[] = {ABCD[0], ABCD[1], ABCD[2], ABCD[4], ABCD[5]};
    lattice_affinity *neu = aff(now_ids, 5, 2);
    own_from(&w, old);
    w.live[3] = 0;
    for (int pol = 0; pol < 2; pol++) {
        lattice_rebalance_plan *pl = plan(&w, old, neu, (lattice_rebalance_policy)pol);
        size_t nt, ns, nss;
        const lattice_rebalance_task *t = rv_plan_tasks(pl, &nt);
        const uint32_t *sup = lattice_rebalance_plan_suppliers(pl, &ns);
        lattice_rebalance_session_spec *ss;
        uint32_t *parts;
        ck_assert_int_eq(lattice_rebalance_plan_sessions(pl, &ss, &nss, &parts), LATTICE_OK);
        ck_assert_uint_gt(nss, 1);
        int *covered = calloc(nt, sizeof *covered);
        size_t total = 0;
        for (size_t k = 0; k < nss; k++) {
            ck_assert_uint_gt(ss[k].partition_count, 0);
            total += ss[k].partition_count;
            for (uint32_t i = 0; i < ss[k].partition_count; i++) {
                uint32_t p = parts[ss[k].partition_first + i];
                if (i) ck_assert_uint_gt(p, parts[ss[k].partition_first + i - 1]);
                size_t hit = nt;
                for (size_t j = 0; j < nt; j++)
                    if (t[j].partition == p && t[j].demander == ss[k].demander) hit = j;
                ck_assert_uint_lt(hit, nt);
                covered[hit]++;
                ck_assert_uint_eq(t[hit].supplier_count, ss[k].supplier_count);
                ck_assert_mem_eq(sup + t[hit].supplier_first, sup + ss[k].supplier_first,
                                 ss[k].supplier_count * sizeof *sup);
            }
            /* Distinct sessions never share demander and supplier list. */
            for (size_t j = 0; j < k; j++)
                ck_assert(ss[j].demander != ss[k].demander ||
                          ss[j].supplier_count != ss[k].supplier_count ||
                          memcmp(sup + ss[j].supplier_first, sup + ss[k].supplier_first,
                                 ss[k].supplier_count * sizeof *sup));
        }
        ck_assert_uint_eq(total, nt);
        for (size_t j = 0; j < nt; j++) ck_assert_int_eq(covered[j], 1);
        free(covered);
        lt_free(ss);
        lt_free(parts);
        lattice_rebalance_plan_free(pl);
    }
    lattice_affinity_free(old);
    lattice_affinity_free(neu);
}
END_TEST

START_TEST(plan_demander_dies_mid_plan_replans)
{
    struct world w;
    world_init(&w, ABCD, 4);
    lattice_affinity *old = aff(ABCD, 3, 1), *neu = aff(ABCD, 4, 1);
    own_from(&w, old);
    lattice_rebalance_plan *pl = plan(&w, old, neu, LATTICE_REBALANCE_PREFER_PRIMARY);
    size_t nt;
    const lattice_rebalance_task *t = rv_plan_tasks(pl, &nt);
    /* D starts loading: its copies are MOVING, half of them finished. */
    for (size_t k = 0; k < nt; k++)
        *cp(&w, 3, t[k].partition) = (lattice_rebalance_copy){
            k % 2 ? LATTICE_PART_OWNING : LATTICE_PART_MOVING, k % 2 ? t[k].counter : 0};
    lattice_rebalance_plan_free(pl);
    /* D dies; the new ideal is the old one again. */
    w.live[3] = 0;
    lattice_affinity *back = aff(ABCD, 3, 1);
    pl = plan(&w, old, back, LATTICE_REBALANCE_PREFER_PRIMARY);
    check_plan(&w, back, pl);
    size_t nl;
    rv_plan_tasks(pl, &nt);
    lattice_rebalance_plan_lost(pl, &nl);
    /* The old owners never stopped owning (late affinity): nothing to move. */
    ck_assert_uint_eq(nt, 0);
    ck_assert_uint_eq(nl, 0);
    lattice_rebalance_plan_free(pl);
    lattice_affinity_free(old);
    lattice_affinity_free(neu);
    lattice_affinity_free(back);
}
END_TEST

START_TEST(plan_never_supplies_from_a_copy_behind)
{
    struct world w;
    world_init(&w, ABCD, 4);
    lattice_affinity *old = aff(ABCD, 3, 1), *neu = aff(ABCD, 4, 1);
    own_from(&w, old);
    /* For every partition: the serving primary is 5 updates behind its backup. */
    for (uint32_t p = 0; p < PARTS; p++) {
        int32_t prim = lattice_affinity_primary(old, p);
        for (size_t i = 0; i < 3; i++)
            if (!strcmp(ABCD[i], lattice_affinity_node_id(old, (uint32_t)prim)))
                cp(&w, i, p)->counter -= 5;
    }
    lattice_rebalance_plan *pl = plan(&w, old, neu, LATTICE_REBALANCE_PREFER_PRIMARY);
    check_plan(&w, neu, pl);
    size_t nt;
    const lattice_rebalance_task *t = rv_plan_tasks(pl, &nt);
    ck_assert_uint_gt(nt, 0);
    for (size_t k = 0; k < nt; k++) {
        int32_t prim = lattice_affinity_primary(old, t[k].partition);
        if (t[k].demander == 3) {
            ck_assert_str_ne(ABCD[t[k].supplier], lattice_affinity_node_id(old, (uint32_t)prim));
            ck_assert_uint_eq(t[k].counter, 100 + t[k].partition);
            ck_assert_uint_eq(t[k].supplier_count, 1);
        }
    }
    lattice_rebalance_plan_free(pl);
    lattice_affinity_free(old);
    lattice_affinity_free(neu);
}
END_TEST

START_TEST(plan_holder_at_best_counter_needs_no_load)
{
    /* Same assignment: nobody moves. Then one backup falls behind. */
    struct world w;
    world_init(&w, ABCD, 3);
    lattice_affinity *a = aff(ABCD, 3, 2);
    own_from(&w, a);
    lattice_rebalance_plan *pl = plan(&w, a, a, LATTICE_REBALANCE_PREFER_PRIMARY);
    size_t nt;
    rv_plan_tasks(pl, &nt);
    ck_assert_uint_eq(nt, 0);
    lattice_rebalance_plan_free(pl);
    cp(&w, 1, 7)->counter -= 1;
    pl = plan(&w, a, a, LATTICE_REBALANCE_PREFER_PRIMARY);
    check_plan(&w, a, pl);
    const lattice_rebalance_task *t = rv_plan_tasks(pl, &nt);
    ck_assert_uint_eq(nt, 1);
    ck_assert_uint_eq(t[0].partition, 7);
    ck_assert_uint_eq(t[0].demander, 1);
    lattice_rebalance_plan_free(pl);
    lattice_affinity_free(a);
}
END_TEST

START_TEST(plan_same_for_any_node_order)
{
    struct world w, r;
    world_init(&w, ABCD, 6);
    const char *rev[6];
    for (int i = 0; i < 6; i++) rev[i] = ABCD[5 - i];
    world_init(&r, rev, 6);
    lattice_affinity *old = aff(ABCD, 4, 1), *neu = aff(ABCD, 6, 1);
    own_from(&w, old);
    own_from(&r, old);
    for (int pol = 0; pol < 2; pol++) {
        lattice_rebalance_plan *p1 = plan(&w, old, neu, (lattice_rebalance_policy)pol);
        lattice_rebalance_plan *p2 = plan(&r, old, neu, (lattice_rebalance_policy)pol);
        check_plan(&w, neu, p1);
        check_plan(&r, neu, p2);
        size_t n1, n2;
        const lattice_rebalance_task *t1 = rv_plan_tasks(p1, &n1);
        const lattice_rebalance_task *t2 = rv_plan_tasks(p2, &n2);
        ck_assert_uint_eq(n1, n2);
        for (size_t k = 0; k < n1; k++) {
            ck_assert_uint_eq(t1[k].partition, t2[k].partition);
            ck_assert_str_eq(w.ids[t1[k].demander], r.ids[t2[k].demander]);
            ck_assert_str_eq(w.ids[t1[k].supplier], r.ids[t2[k].supplier]);
        }
        lattice_rebalance_plan_free(p1);
        lattice_rebalance_plan_free(p2);
    }
    lattice_affinity_free(old);
    lattice_affinity_free(neu);
}
END_TEST

START_TEST(plan_spread_shares_suppliers)
{
    /* A node joins a grid with backups 2: every partition has 3 equal copies.
     * SPREAD should use more than one supplier and none above its share. */
    struct world w;
    world_init(&w, ABCD, 4);
    lattice_affinity *old = aff(ABCD, 3, 2), *neu = aff(ABCD, 4, 2);
    own_from(&w, old);
    lattice_rebalance_plan *pl = plan(&w, old, neu, LATTICE_REBALANCE_SPREAD);
    check_plan(&w, neu, pl);
    size_t nt;
    const lattice_rebalance_task *t = rv_plan_tasks(pl, &nt);
    uint32_t load[4] = {0};
    for (size_t k = 0; k < nt; k++) load[t[k].supplier]++;
    for (int i = 0; i < 3; i++) {
        ck_assert_uint_ge(load[i] + 1, (uint32_t)(nt / 3));
        ck_assert_uint_le(load[i], (uint32_t)(nt / 3) + 1);
    }
    lattice_rebalance_plan_free(pl);
    lattice_affinity_free(old);
    lattice_affinity_free(neu);
}
END_TEST

START_TEST(plan_replicated_join_loads_every_partition)
{
    /* Replicated cache: every node owns every partition, so a joiner loads
     * them all. */
    struct world w;
    world_init(&w, ABCD, 4);
    lattice_affinity_node nodes[4];
    for (int i = 0; i < 4; i++) nodes[i] = (lattice_affinity_node){ABCD[i], ABCD[i], (uint64_t)i + 1};
    lattice_cache_config cfg;
    lattice_cache_config_init(&cfg, "r");
    cfg.partitions = PARTS;
    cfg.mode = LATTICE_CACHE_REPLICATED;
    lattice_affinity *old, *neu;
    ck_assert_int_eq(lattice_affinity_compute(nodes, 3, &cfg, &old), LATTICE_OK);
    ck_assert_int_eq(lattice_affinity_compute(nodes, 4, &cfg, &neu), LATTICE_OK);
    own_from(&w, old);
    lattice_rebalance_plan *pl = plan(&w, old, neu, LATTICE_REBALANCE_SPREAD);
    check_plan(&w, neu, pl);
    size_t nt;
    const lattice_rebalance_task *t = rv_plan_tasks(pl, &nt);
    ck_assert_uint_eq(nt, PARTS);
    uint32_t load[3] = {0};
    for (size_t k = 0; k < nt; k++) {
        ck_assert_uint_eq(t[k].demander, 3);
        ck_assert_uint_eq(t[k].supplier_count, 3);
        load[t[k].supplier]++;
    }
    for (int i = 0; i < 3; i++) ck_assert_uint_ge(load[i], PARTS / 3 - 1);
    lattice_rebalance_plan_free(pl);
    lattice_affinity_free(old);
    lattice_affinity_free(neu);
}
END_TEST

START_TEST(plan_bad_input)
{
    struct world w;
    world_init(&w, ABCD, 3);
    lattice_affinity *a = aff(ABCD, 3, 1);
    lattice_rebalance_plan *pl = NULL;
    lattice_rebalance_plan_input in = {.ideal = a, .nodes = w.ids, .node_count = 3,
                                       .live = w.live, .copies = w.copies};
    ck_assert_int_eq(lattice_rebalance_plan_compute(NULL, &pl), LATTICE_ERR_INVAL);
    ck_assert_int_eq(lattice_rebalance_plan_compute(&in, NULL), LATTICE_ERR_INVAL);
    lattice_rebalance_plan_input bad = in;
    bad.ideal = NULL;
    ck_assert_int_eq(lattice_rebalance_plan_compute(&bad, &pl), LATTICE_ERR_INVAL);
    bad = in;
    bad.copies = NULL;
    ck_assert_int_eq(lattice_rebalance_plan_compute(&bad, &pl), LATTICE_ERR_INVAL);
    const char *dup[] = {ABCD[0], ABCD[1], ABCD[0]};
    bad = in;
    bad.nodes = dup;
    ck_assert_int_eq(lattice_rebalance_plan_compute(&bad, &pl), LATTICE_ERR_INVAL);
    const char *empty[] = {ABCD[0], "", ABCD[2]};
    bad.nodes = empty;
    ck_assert_int_eq(lattice_rebalance_plan_compute(&bad, &pl), LATTICE_ERR_INVAL);
    /* Serving assignment with another partition count. */
    lattice_affinity_node nodes[1] = {{ABCD[0], NULL, 1}};
    lattice_cache_config cfg;
    lattice_cache_config_init(&cfg, "c");
    cfg.partitions = 32;
    lattice_affinity *other;
    ck_assert_int_eq(lattice_affinity_compute(nodes, 1, &cfg, &other), LATTICE_OK);
    bad = in;
    bad.serving = other;
    ck_assert_int_eq(lattice_rebalance_plan_compute(&bad, &pl), LATTICE_ERR_INVAL);
    ck_assert_ptr_null(pl);
    /* Allocation failures: NOMEM, never a crash or a half plan. */
    own_from(&w, a);
    for (uint64_t nth = 1; nth < 12; nth++) {
        lattice_alloc_fail_nth(nth);
        lattice_status st = lattice_rebalance_plan_compute(&in, &pl);
        lattice_alloc_fail_nth(0);
        ck_assert(st == LATTICE_OK || st == LATTICE_ERR_NOMEM);
        if (st == LATTICE_OK) lattice_rebalance_plan_free(pl);
    }
    lattice_affinity_free(other);
    lattice_affinity_free(a);
}
END_TEST

TCase *rebalance_plan_tcase(void)
{
    TCase *tc = tcase_create("plan");
    tcase_add_test(tc, plan_join_backups_0_1_2);
    tcase_add_test(tc, plan_graceful_leave_leaver_supplies);
    tcase_add_test(tc, plan_failure_restores_redundancy_or_loses);
    tcase_add_test(tc, plan_several_changes_at_once);
    tcase_add_test(tc, plan_sessions_group_tasks);
    tcase_add_test(tc, plan_demander_dies_mid_plan_replans);
    tcase_add_test(tc, plan_never_supplies_from_a_copy_behind);
    tcase_add_test(tc, plan_holder_at_best_counter_needs_no_load);
    tcase_add_test(tc, plan_same_for_any_node_order);
    tcase_add_test(tc, plan_spread_shares_suppliers);
    tcase_add_test(tc, plan_replicated_join_loads_every_partition);
    tcase_add_test(tc, plan_bad_input);
    return tc;
}
