/*
 * meta/ without a network: who serves a partition given the affinity base
 * and the live nodes, liveness by node id through the registry's own API,
 * the base switch's freeze (by version, never by time) and its predicate.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <urcu.h>

#include "run_suite.h"
#include "lattice/alloc.h"
#include "meta/meta.h"

START_TEST(serving_owners_follow_base_and_live_set)
{
    lattice_cache_config cfg;
    lattice_cache_config_init(&cfg, "o");
    cfg.partitions = 64;
    cfg.backups = 1;
    lattice_affinity_node nodes[3] = {{"a:1", NULL, 1}, {"b:1", NULL, 2}, {"c:1", NULL, 3}};
    lattice_meta_cache c;
    memset(&c, 0, sizeof c);
    c.cfg = cfg;
    ck_assert_int_eq(lattice_affinity_compute(nodes, 3, &cfg, &c.aff), LATTICE_OK);
    lattice_meta_member peers[3];
    memset(peers, 0, sizeof peers);
    lattice_meta_member *live[3] = {&peers[0], &peers[1], &peers[2]};
    c.live = live;
    int lost = 0;
    for (uint32_t p = 0; p < 64; p++) {
        uint32_t cnt;
        const uint16_t *own = lattice_affinity_owners(c.aff, p, &cnt);
        lattice_meta_member *out[4];
        ck_assert_uint_eq(lattice_meta_serving_owners(&c, p, out, 4), 2);
        ck_assert_ptr_eq(out[0], live[own[0]]);
        ck_assert_ptr_eq(out[1], live[own[1]]);
        /* The primary dies: its first live backup is primary, alone (under-replicated). */
        lattice_meta_member *saved = live[own[0]];
        live[own[0]] = NULL;
        ck_assert_uint_eq(lattice_meta_serving_owners(&c, p, out, 4), 1);
        ck_assert_ptr_eq(out[0], live[own[1]]);
        /* Both die: no owner left: LOST - the third node never serves it. */
        lattice_meta_member *saved2 = live[own[1]];
        live[own[1]] = NULL;
        if (lattice_meta_serving_owners(&c, p, out, 4) == 0) lost++;
        live[own[0]] = saved;
        live[own[1]] = saved2;
    }
    ck_assert_int_eq(lost, 64);
    lattice_affinity_free(c.aff);
}
END_TEST


/* Three servers a, b, c (this node is a), through the registry's API. */
static lattice_meta_member mem[4];
static lattice_meta *meta;
static lattice_region *region;

static void grid(size_t n, const char *const *ids)
{
    lattice_meta_member *list[4];
    for (size_t i = 0; i < n; i++) {
        memset(&mem[i], 0, sizeof mem[i]);
        snprintf(mem[i].id, sizeof mem[i].id, "%s", ids[i]);
        snprintf(mem[i].cid, sizeof mem[i].cid, "%c:1", 'a' + (int)i);
        mem[i].server = true;
        mem[i].self = i == 0;
        list[i] = &mem[i];
    }
    lattice_meta_set_members(meta, list, n, ids[0]);
}

static void meta_setup(void)
{
    rcu_register_thread();
    lattice_region_config rc = {"t", 0, 8, 0, LATTICE_REGION_REJECT};
    ck_assert_int_eq(lattice_region_create(&rc, &region), LATTICE_OK);
    lattice_meta_config mc = {false, region, NULL, NULL};
    ck_assert_int_eq(lattice_meta_create(&mc, &meta), LATTICE_OK);
}

static void meta_teardown(void)
{
    lattice_meta_destroy(meta);
    lattice_region_destroy(region);
    rcu_unregister_thread();
}

START_TEST(a_restarted_server_serves_nothing_until_the_base_switches)
{
    static const char *first[] = {"id-a", "id-b", "id-c"};
    grid(3, first);
    ck_assert(lattice_meta_is_coordinator(meta));
    ck_assert(!lattice_meta_valid(meta));
    lattice_cache_config cfg;
    lattice_cache_config_init(&cfg, "default");
    cfg.partitions = 64;
    lattice_meta_start(meta, &cfg, 1);
    ck_assert(lattice_meta_valid(meta));
    ck_assert_uint_eq(lattice_meta_version(meta), 1);
    lattice_meta_cache *c = lattice_meta_cache_of(meta, NULL);
    ck_assert_ptr_nonnull(c);
    ck_assert(lattice_meta_base_is_live(meta, c));
    ck_assert_ptr_null(c->ideal); /* nothing MOVING */
    uint64_t view = lattice_meta_server_view(meta);
    /* c restarts on its old address: same consistent id, new node id. */
    static const char *again[] = {"id-a", "id-b", "id-c2"};
    grid(3, again);
    ck_assert(!lattice_meta_base_is_live(meta, c));
    ck_assert(lattice_meta_server_view(meta) != view);
    int moving = 0;
    for (uint32_t p = 0; p < 64; p++) {
        lattice_meta_member *own[4], *mov[4];
        size_t n = lattice_meta_serving_owners(c, p, own, 4);
        ck_assert(n >= 1); /* backups = 1: every partition keeps a live copy */
        for (size_t i = 0; i < n; i++) ck_assert_ptr_ne(own[i], &mem[2]); /* not the empty restarted copy */
        size_t nm = lattice_meta_moving_owners(c, p, mov, 4);
        for (size_t i = 0; i < nm; i++) moving += mov[i] == &mem[2];
    }
    ck_assert_int_gt(moving, 0); /* it holds its partitions MOVING */
    /* The switch makes it a serving owner again. */
    ck_assert_int_eq(lattice_meta_switch_base(meta, c), LATTICE_OK);
    ck_assert_uint_eq(c->base_version, 2);
    ck_assert(lattice_meta_base_is_live(meta, c));
    int serving = 0;
    for (uint32_t p = 0; p < 64; p++) {
        lattice_meta_member *own[4];
        size_t n = lattice_meta_serving_owners(c, p, own, 4);
        for (size_t i = 0; i < n; i++) serving += own[i] == &mem[2];
    }
    ck_assert_int_gt(serving, 0);
}
END_TEST

START_TEST(a_newer_version_is_applied_and_an_older_one_is_not)
{
    static const char *ids[] = {"id-a", "id-b", "id-c"};
    grid(3, ids);
    lattice_meta_start(meta, NULL, 0);
    ck_assert_ptr_nonnull(lattice_meta_cache_of(meta, "default"));
    ck_assert_int_eq(lattice_meta_add(meta, "x:partitions=16"), LATTICE_OK);
    ck_assert_int_eq(lattice_meta_add(meta, "x:partitions=16"), LATTICE_OK);
    ck_assert_int_eq(lattice_meta_add(meta, "x:partitions=32"), LATTICE_ERR_EXISTS);
    ck_assert_uint_eq(lattice_meta_version(meta), 2);
    const Latdata__Meta *msg = lattice_meta_message(meta);
    ck_assert_ptr_nonnull(msg);
    ck_assert_uint_eq(msg->n_caches, 2);
    /* Another node (b) learns it from the message. */
    lattice_meta *other = NULL;
    lattice_meta_config mc = {true, NULL, NULL, NULL};
    ck_assert_int_eq(lattice_meta_create(&mc, &other), LATTICE_OK);
    lattice_meta_member list[3];
    lattice_meta_member *lp[3];
    for (int i = 0; i < 3; i++) {
        list[i] = mem[i];
        list[i].self = i == 1;
        lp[i] = &list[i];
    }
    lattice_meta_set_members(other, lp, 3, "id-a");
    ck_assert(!lattice_meta_is_coordinator(other));
    ck_assert(lattice_meta_apply(other, msg));
    ck_assert_ptr_nonnull(lattice_meta_cache_of(other, "x"));
    ck_assert(!lattice_meta_apply(other, msg)); /* not newer */
    ck_assert_int_eq(lattice_meta_remove(meta, "x"), LATTICE_OK);
    ck_assert_int_eq(lattice_meta_remove(meta, "x"), LATTICE_ERR_NO_CACHE);
    ck_assert(lattice_meta_apply(other, lattice_meta_message(meta)));
    ck_assert_ptr_null(lattice_meta_cache_of(other, "x"));
    ck_assert(!lattice_meta_apply(meta, lattice_meta_message(other))); /* the writer keeps its own */
    lattice_meta_destroy(other);
}
END_TEST

/* The base switch's freeze on a non-coordinator (b) of the grid a, b, c:
 * held by metadata version, never by time. */
static lattice_meta *follower(lattice_meta_member *list, const char *coordinator)
{
    lattice_meta *other = NULL;
    lattice_meta_config mc = {false, region, NULL, NULL};
    ck_assert_int_eq(lattice_meta_create(&mc, &other), LATTICE_OK);
    lattice_meta_member *lp[3];
    for (int i = 0; i < 3; i++) {
        list[i] = mem[i];
        list[i].self = i == 1;
        lp[i] = &list[i];
    }
    lattice_meta_set_members(other, lp, 3, coordinator);
    ck_assert(lattice_meta_apply(other, lattice_meta_message(meta)));
    return other;
}

START_TEST(a_prepare_freezes_until_a_newer_version_arrives)
{
    static const char *ids[] = {"id-a", "id-b", "id-c"};
    grid(3, ids);
    lattice_meta_start(meta, NULL, 0);
    ck_assert_int_eq(lattice_meta_add(meta, "x:partitions=16"), LATTICE_OK);
    lattice_meta_member list[3];
    lattice_meta *b = follower(list, "id-a");
    uint64_t v = lattice_meta_version(meta);
    lattice_meta_cache *c = lattice_meta_cache_of(b, NULL), *x = lattice_meta_cache_of(b, "x");
    ck_assert(!lattice_meta_frozen(c));
    ck_assert_int_eq(lattice_meta_freeze(b, "default", v, "id-a"), LATTICE_OK);
    ck_assert(lattice_meta_frozen(c));
    ck_assert(!lattice_meta_frozen(x)); /* only the prepared cache */
    ck_assert_int_eq(lattice_meta_freeze(b, "default", v, "id-a"), LATTICE_OK); /* again: still frozen */
    /* The same version again changes nothing (not newer): still frozen. */
    ck_assert(!lattice_meta_apply(b, lattice_meta_message(meta)));
    ck_assert(lattice_meta_frozen(c));
    /* The coordinator's next version (the switch, or its release) thaws it. */
    lattice_meta_bump(meta);
    ck_assert(lattice_meta_apply(b, lattice_meta_message(meta)));
    ck_assert(!lattice_meta_frozen(lattice_meta_cache_of(b, NULL)));
    lattice_meta_destroy(b);
}
END_TEST

START_TEST(a_node_behind_stays_frozen_until_past_the_prepared_version)
{
    static const char *ids[] = {"id-a", "id-b", "id-c"};
    grid(3, ids);
    lattice_meta_start(meta, NULL, 0);
    lattice_meta_member list[3];
    lattice_meta *b = follower(list, "id-a"); /* b holds version 1 */
    ck_assert_int_eq(lattice_meta_add(meta, "x:partitions=16"), LATTICE_OK); /* 2: not at b yet */
    uint64_t v = lattice_meta_version(meta);
    ck_assert_int_eq(lattice_meta_freeze(b, "default", v, "id-a"), LATTICE_OK);
    ck_assert_int_eq(lattice_meta_freeze(b, "x", v, "id-a"), LATTICE_ERR_NO_CACHE); /* unknown: not prepared */
    /* Version 2 arrives late: it is not newer than the prepare's. */
    ck_assert(lattice_meta_apply(b, lattice_meta_message(meta)));
    ck_assert(lattice_meta_frozen(lattice_meta_cache_of(b, NULL)));
    lattice_meta_bump(meta);
    ck_assert(lattice_meta_apply(b, lattice_meta_message(meta)));
    ck_assert(!lattice_meta_frozen(lattice_meta_cache_of(b, NULL)));
    /* A prepare older than what b holds is stale: no freeze. */
    ck_assert_int_eq(lattice_meta_freeze(b, "default", v, "id-a"), LATTICE_ERR_AGAIN);
    ck_assert(!lattice_meta_frozen(lattice_meta_cache_of(b, NULL)));
    lattice_meta_destroy(b);
}
END_TEST

START_TEST(a_coordinator_change_releases_and_others_cannot_freeze)
{
    static const char *ids[] = {"id-a", "id-b", "id-c"};
    grid(3, ids);
    lattice_meta_start(meta, NULL, 0);
    lattice_meta_member list[3];
    lattice_meta *b = follower(list, "id-a");
    uint64_t v = lattice_meta_version(meta);
    lattice_meta_cache *c = lattice_meta_cache_of(b, NULL);
    ck_assert_int_eq(lattice_meta_freeze(b, "default", v, "id-c"), LATTICE_ERR_AGAIN); /* not our coordinator */
    ck_assert_int_eq(lattice_meta_freeze(b, "default", v, ""), LATTICE_ERR_AGAIN);
    ck_assert(!lattice_meta_frozen(c));
    ck_assert_int_eq(lattice_meta_freeze(b, "default", v, "id-a"), LATTICE_OK);
    /* A topology change with the same coordinator keeps the freeze ... */
    lattice_meta_member *lp[3] = {&list[0], &list[1], &list[2]};
    lattice_meta_set_members(b, lp, 3, "id-a");
    ck_assert(lattice_meta_frozen(c));
    /* ... a new coordinator (a died) releases it: that one runs its own check. */
    lattice_meta_set_members(b, lp + 1, 2, "id-b");
    ck_assert(!lattice_meta_frozen(c));
    lattice_meta_destroy(b);
}
END_TEST

START_TEST(the_coordinator_thaws_on_its_own_next_version)
{
    static const char *ids[] = {"id-a", "id-b", "id-c"};
    grid(3, ids);
    lattice_meta_start(meta, NULL, 0);
    lattice_meta_cache *c = lattice_meta_cache_of(meta, NULL);
    ck_assert_int_eq(lattice_meta_freeze(meta, "default", lattice_meta_version(meta), "id-a"), LATTICE_OK);
    ck_assert(lattice_meta_frozen(c));
    ck_assert_int_eq(lattice_meta_add(meta, "x:partitions=16"), LATTICE_OK); /* any write of a version */
    ck_assert(!lattice_meta_frozen(c));
    ck_assert_int_eq(lattice_meta_freeze(meta, "default", lattice_meta_version(meta), "id-a"), LATTICE_OK);
    lattice_meta_bump(meta);
    ck_assert(!lattice_meta_frozen(c));
    /* Serials name caches for late completions: gone with the cache. */
    uint64_t sx = lattice_meta_cache_of(meta, "x")->serial;
    ck_assert_ptr_eq(lattice_meta_cache_by_serial(meta, sx), lattice_meta_cache_of(meta, "x"));
    ck_assert_int_eq(lattice_meta_remove(meta, "x"), LATTICE_OK);
    ck_assert_ptr_null(lattice_meta_cache_by_serial(meta, sx));
    ck_assert_int_eq(lattice_meta_add(meta, "x:partitions=16"), LATTICE_OK);
    ck_assert_ptr_null(lattice_meta_cache_by_serial(meta, sx)); /* a new x is another cache */
    /* A node that rejoins as a new one starts a new registry while waits of
     * the old one still settle: its caches never reuse an old serial. */
    uint64_t sd = lattice_meta_cache_of(meta, "default")->serial;
    lattice_meta *again = NULL;
    lattice_meta_config mc = {false, region, NULL, NULL};
    ck_assert_int_eq(lattice_meta_create(&mc, &again), LATTICE_OK);
    lattice_meta_member *lp[1] = {&mem[0]};
    lattice_meta_set_members(again, lp, 1, mem[0].id);
    lattice_meta_start(again, NULL, 0);
    ck_assert_ptr_nonnull(lattice_meta_cache_of(again, "default"));
    ck_assert_ptr_null(lattice_meta_cache_by_serial(again, sd));
    ck_assert_ptr_null(lattice_meta_cache_by_serial(again, sx));
    lattice_meta_destroy(again);
}
END_TEST

/* Two of three servers leave in one change (cut off together): every
 * partition both of them owned is recorded with them - only by a recording
 * coordinator - travels in the metadata, takes a restorer, and ends at the
 * base switch. */
START_TEST(a_partition_that_loses_every_owner_at_once_is_recorded_until_the_switch)
{
    static lattice_meta_member all[3], alone[1];
    lattice_meta_member *lp[3];
    for (int i = 0; i < 3; i++) {
        memset(&all[i], 0, sizeof all[i]);
        snprintf(all[i].id, sizeof all[i].id, "id-%c", 'a' + i);
        snprintf(all[i].cid, sizeof all[i].cid, "%c:1", 'a' + i);
        all[i].server = true;
        all[i].self = i == 0;
        lp[i] = &all[i];
    }
    alone[0] = all[0];
    lattice_meta_member *la = &alone[0];
    ck_assert(!lattice_meta_set_members(meta, lp, 3, "id-a"));
    lattice_cache_config cfg;
    lattice_cache_config_init(&cfg, "default");
    cfg.partitions = 64;
    cfg.backups = 1;
    lattice_meta_start(meta, &cfg, 1);
    lattice_meta_cache *c = lattice_meta_cache_of(meta, NULL);
    /* The partitions b and c own together, primary first. */
    int both = 0;
    char want[64][160];
    for (uint32_t p = 0; p < 64; p++) {
        lattice_meta_member *own[4];
        size_t n = lattice_meta_serving_owners(c, p, own, 4);
        want[p][0] = 0;
        if (n == 2 && own[0] != &all[0] && own[1] != &all[0]) {
            snprintf(want[p], sizeof want[p], "%s %s", own[0]->id, own[1]->id);
            both++;
        }
    }
    ck_assert_int_gt(both, 0);
    ck_assert(lattice_meta_set_members(meta, &la, 1, "id-a"));
    ck_assert_uint_eq(c->n_lost, (size_t)both);
    for (uint32_t p = 0; p < 64; p++) {
        const lattice_meta_lost *l = lattice_meta_lost_of(c, p);
        ck_assert(!want[p][0] == !l);
        if (!l) continue;
        ck_assert_str_eq(l->owners, want[p]);
        ck_assert_uint_eq(lattice_meta_lost_owner_count(l), 2);
        ck_assert(lattice_meta_lost_names(l, "id-b") && lattice_meta_lost_names(l, "id-c"));
        ck_assert(!lattice_meta_lost_names(l, "id-a") && !lattice_meta_lost_names(l, "id-"));
        ck_assert_str_eq(l->restorer, "");
    }
    /* Leaving again records nothing new. */
    ck_assert(!lattice_meta_set_members(meta, &la, 1, "id-a"));
    uint32_t first = c->lost[0].partition;
    ck_assert(lattice_meta_set_restorer(c, first, "id-b2"));
    ck_assert(!lattice_meta_set_restorer(c, first, "id-b2"));
    lattice_meta_bump(meta);
    /* A follower gets every record, restorer included. */
    lattice_meta *other = NULL;
    lattice_meta_config mc = {true, NULL, NULL, NULL};
    ck_assert_int_eq(lattice_meta_create(&mc, &other), LATTICE_OK);
    static lattice_meta_member fol[1];
    fol[0] = all[1];
    fol[0].self = true;
    lattice_meta_member *lf = &fol[0];
    lattice_meta_set_members(other, &lf, 1, "id-a");
    ck_assert(lattice_meta_apply(other, lattice_meta_message(meta)));
    lattice_meta_cache *oc = lattice_meta_cache_of(other, NULL);
    ck_assert_uint_eq(oc->n_lost, (size_t)both);
    ck_assert_str_eq(lattice_meta_lost_of(oc, first)->restorer, "id-b2");
    ck_assert_str_eq(lattice_meta_lost_of(oc, first)->owners, want[first]);
    ck_assert_str_eq(lattice_meta_lost_of(oc, c->lost[1 % both].partition)->restorer, "");
    /* An operator gives them up instead: the records end, and every node
     * learns at which base version the LOST partitions count as empty. */
    uint32_t given = 0;
    ck_assert_int_eq(lattice_meta_reset_lost(meta, "nope", &given), LATTICE_ERR_NO_CACHE);
    ck_assert_int_eq(lattice_meta_reset_lost(meta, "default", &given), LATTICE_OK);
    ck_assert_uint_eq(given, (uint32_t)both);
    ck_assert_uint_eq(c->n_lost, 0);
    ck_assert_uint_eq(c->lost_reset, c->base_version);
    ck_assert(lattice_meta_apply(other, lattice_meta_message(meta)));
    ck_assert_uint_eq(lattice_meta_cache_of(other, NULL)->lost_reset, c->base_version);
    ck_assert_uint_eq(lattice_meta_cache_of(other, NULL)->n_lost, 0);
    /* The switch ends them, and so does the next version at the follower. */
    ck_assert_int_eq(lattice_meta_switch_base(meta, c), LATTICE_OK);
    ck_assert_uint_eq(c->n_lost, 0);
    lattice_meta_bump(meta);
    ck_assert(lattice_meta_apply(other, lattice_meta_message(meta)));
    ck_assert_uint_eq(lattice_meta_cache_of(other, NULL)->n_lost, 0);
    lattice_meta_destroy(other);
}
END_TEST

/* ---- the base switch predicate ---- */

static lattice_meta_switch_report rep[3];

static lattice_meta_switch_input input(lattice_rebalance_mode mode)
{
    for (int i = 0; i < 3; i++) rep[i] = (lattice_meta_switch_report){100, 0, 7, 4};
    lattice_meta_switch_input in = {false, true, mode, 7, 4, 3, 0, rep, 3, 0};
    return in;
}

START_TEST(switch_when_every_new_owner_has_loaded)
{
    lattice_meta_switch_input in = input(LATTICE_REBALANCE_ASYNC);
    ck_assert(lattice_meta_switch_due(&in));
    in = input(LATTICE_REBALANCE_SYNC);
    ck_assert(lattice_meta_switch_due(&in));
}
END_TEST

START_TEST(no_switch_while_a_server_is_still_loading_or_stale)
{
    lattice_meta_switch_input in = input(LATTICE_REBALANCE_ASYNC);
    rep[1].rebalance_left = 1;
    ck_assert(!lattice_meta_switch_due(&in));
    in = input(LATTICE_REBALANCE_ASYNC);
    rep[2].view = 6; /* loaded, but for another server set */
    ck_assert(!lattice_meta_switch_due(&in));
    in = input(LATTICE_REBALANCE_ASYNC);
    rep[0].base_version = 3; /* ... or against another base */
    ck_assert(!lattice_meta_switch_due(&in));
    in = input(LATTICE_REBALANCE_ASYNC);
    in.n_reports = 2; /* a live server reported nothing for this cache */
    ck_assert(!lattice_meta_switch_due(&in));
    in = input(LATTICE_REBALANCE_NONE); /* rebalancing off: data never moves by itself */
    ck_assert(!lattice_meta_switch_due(&in));
}
END_TEST

START_TEST(an_empty_cache_switches_at_once_and_a_silent_server_cancels)
{
    lattice_meta_switch_input in = input(LATTICE_REBALANCE_NONE);
    for (int i = 0; i < 3; i++) rep[i] = (lattice_meta_switch_report){0, 64, 0, 0};
    ck_assert(lattice_meta_switch_due(&in)); /* no entry anywhere: nothing to move */
    in.kept_entries = 1; /* ... but a lost partition's kept copy is coming back */
    ck_assert(!lattice_meta_switch_due(&in));
    in.kept_entries = 0;
    in.lost_partitions = 3; /* ... or every owner of some partition died: its data is unknown, not empty */
    ck_assert(!lattice_meta_switch_due(&in));
    in.lost_partitions = 0;
    in.all_answered = false;
    ck_assert(!lattice_meta_switch_due(&in));
    in = input(LATTICE_REBALANCE_ASYNC);
    in.base_is_live = true; /* nothing to switch */
    ck_assert(!lattice_meta_switch_due(&in));
}
END_TEST

/* A whole-grid restart's decision travels with the metadata while the cache
 * restores (a coordinator that takes over keeps the same copies) and is
 * gone once restoring ends. */
START_TEST(the_restore_decision_travels_until_restoring_ends)
{
    static const char *ids[] = {"id-a", "id-b", "id-c"};
    grid(3, ids);
    lattice_cache_config cfg;
    lattice_cache_config_init(&cfg, "default");
    char *ent[3] = {"a:1 id-a", "b:1 id-b", "c:1 -"};
    static const uint8_t keep[] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    lattice_meta_restart_base b = {"default", ent, 3, 7, keep, sizeof keep};
    lattice_meta_start_restart(meta, &cfg, 1, &b, 1);
    lattice_meta_cache *c = lattice_meta_cache_of(meta, "default");
    ck_assert(c->restoring);
    ck_assert_uint_eq(c->base_version, 8);
    lattice_meta_member list[3];
    lattice_meta *other = follower(list, "id-a");
    lattice_meta_cache *o = lattice_meta_cache_of(other, "default");
    ck_assert(o->restoring);
    ck_assert_uint_eq(o->n_restore_keep, sizeof keep);
    ck_assert_mem_eq(o->restore_keep, keep, sizeof keep);
    lattice_meta_end_restoring(c);
    lattice_meta_bump(meta);
    ck_assert_uint_eq(c->n_restore_keep, 0);
    ck_assert(lattice_meta_apply(other, lattice_meta_message(meta)));
    ck_assert(!o->restoring);
    ck_assert_uint_eq(o->n_restore_keep, 0);
    ck_assert_ptr_null(o->restore_keep);
    lattice_meta_destroy(other);
}
END_TEST

/* Node `self` of ids[0..n) (servers "a:1", "b:1", ... by position) sees
 * them in topology `major` with `coord` coordinating. */
static void view_of(lattice_meta *x, lattice_meta_member *list, const char *const *ids, size_t n, size_t self,
                    const char *coord, uint64_t major)
{
    lattice_meta_member *lp[4];
    for (size_t i = 0; i < n; i++) {
        memset(&list[i], 0, sizeof list[i]);
        snprintf(list[i].id, sizeof list[i].id, "%s", ids[i]);
        snprintf(list[i].cid, sizeof list[i].cid, "%c:1", ids[i][3]);
        list[i].server = true;
        list[i].self = i == self;
        lp[i] = &list[i];
    }
    lattice_meta_set_epoch(x, major);
    lattice_meta_set_members(x, lp, n, coord);
}

static lattice_meta *server_meta(void)
{
    lattice_meta *x = NULL;
    lattice_meta_config mc = {false, region, NULL, NULL};
    ck_assert_int_eq(lattice_meta_create(&mc, &x), LATTICE_OK);
    return x;
}

/* The coordinator a dies right after two metadata changes that b (next
 * oldest, lagging) missed and c applied.  b takes over in a newer topology:
 * its first write must pass what c holds - before, b counted on from its
 * own version, c dropped every push of b's until b's count passed a's, and
 * b's version 2 was not a's version 2 (two contents under one number). */
START_TEST(a_lagging_coordinator_takes_over_above_every_version)
{
    static const char *ids[] = {"id-a", "id-b", "id-c"};
    lattice_meta_member la[3], lb[3], lc[3];
    lattice_meta *b = server_meta(), *c = server_meta();
    view_of(meta, la, ids, 3, 0, "id-a", 1);
    view_of(b, lb, ids, 3, 1, "id-a", 1);
    view_of(c, lc, ids, 3, 2, "id-a", 1);
    lattice_meta_start(meta, NULL, 0);
    ck_assert(lattice_meta_apply(b, lattice_meta_message(meta)));
    ck_assert(lattice_meta_apply(c, lattice_meta_message(meta)));
    ck_assert_int_eq(lattice_meta_add(meta, "x:partitions=16"), LATTICE_OK);
    ck_assert(lattice_meta_apply(c, lattice_meta_message(meta)));
    ck_assert_int_eq(lattice_meta_add(meta, "y:partitions=16"), LATTICE_OK);
    ck_assert(lattice_meta_apply(c, lattice_meta_message(meta))); /* b got neither */
    uint64_t last_a = lattice_meta_version(meta);
    ck_assert_uint_lt(lattice_meta_version(b), last_a);
    /* a is gone: b coordinates topology 2. */
    static const char *rest[] = {"id-b", "id-c"};
    view_of(b, lb, rest, 2, 0, "id-b", 2);
    view_of(c, lc, rest, 2, 1, "id-b", 2);
    ck_assert(lattice_meta_is_coordinator(b));
    ck_assert_int_eq(lattice_meta_add(b, "z:partitions=16"), LATTICE_OK);
    ck_assert_uint_gt(lattice_meta_version(b), last_a);
    ck_assert(lattice_meta_apply(c, lattice_meta_message(b)));
    ck_assert_ptr_nonnull(lattice_meta_cache_of(c, "z"));
    ck_assert_ptr_null(lattice_meta_cache_of(c, "x")); /* b's registry is the truth now */
    ck_assert_uint_eq(lattice_meta_version(c), lattice_meta_version(b));
    lattice_meta_destroy(b);
    lattice_meta_destroy(c);
}
END_TEST

/* A takeover whose topology lagged its predecessor's (the same major): the
 * members' pulls name their versions, and the coordinator's jumps past the
 * highest. */
START_TEST(a_coordinator_jumps_past_a_version_a_member_reports)
{
    static const char *ids[] = {"id-a", "id-b", "id-c"};
    lattice_meta_member la[3], lb[3], lc[3];
    lattice_meta *b = server_meta(), *c = server_meta();
    view_of(meta, la, ids, 3, 0, "id-a", 3);
    view_of(b, lb, ids, 3, 1, "id-a", 3);
    view_of(c, lc, ids, 3, 2, "id-a", 3);
    lattice_meta_start(meta, NULL, 0);
    ck_assert(lattice_meta_apply(b, lattice_meta_message(meta)));
    ck_assert(lattice_meta_apply(c, lattice_meta_message(meta)));
    view_of(meta, la, ids, 3, 0, "id-a", 5); /* b's view stays at 4 */
    view_of(b, lb, ids, 3, 1, "id-a", 4);
    view_of(c, lc, ids, 3, 2, "id-a", 5);
    ck_assert_int_eq(lattice_meta_add(meta, "x:partitions=16"), LATTICE_OK);
    ck_assert(lattice_meta_apply(c, lattice_meta_message(meta)));
    static const char *rest[] = {"id-b", "id-c"};
    view_of(b, lb, rest, 2, 0, "id-b", 5); /* b's own view was 4: its takeover is 5 too */
    view_of(c, lc, rest, 2, 1, "id-b", 5);
    ck_assert(!lattice_meta_seen_version(c, lattice_meta_version(b) + 9, "id-a")); /* not c's to write */
    ck_assert(!lattice_meta_seen_version(b, lattice_meta_version(b), ""));          /* not above, no writer */
    ck_assert_int_eq(lattice_meta_add(b, "z:partitions=16"), LATTICE_OK);
    /* b wrote the version c holds from a: same number, other contents -
     * not applied, and c's pull names a as the writer. */
    ck_assert_uint_eq(lattice_meta_version(b), lattice_meta_version(c));
    ck_assert(!lattice_meta_apply(c, lattice_meta_message(b)));
    ck_assert_str_eq(lattice_meta_writer(c), "id-a");
    ck_assert(!lattice_meta_seen_version(b, lattice_meta_version(b), "id-b")); /* its own */
    ck_assert(lattice_meta_seen_version(b, lattice_meta_version(c), lattice_meta_writer(c)));
    ck_assert_uint_gt(lattice_meta_version(b), lattice_meta_version(c));
    ck_assert(lattice_meta_apply(c, lattice_meta_message(b)));
    ck_assert_ptr_nonnull(lattice_meta_cache_of(c, "z"));
    lattice_meta_destroy(b);
    lattice_meta_destroy(c);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("meta");
    TCase *o = tcase_create("owners");
    tcase_add_test(o, serving_owners_follow_base_and_live_set);
    suite_add_tcase(s, o);
    TCase *r = tcase_create("registry");
    tcase_add_checked_fixture(r, meta_setup, meta_teardown);
    tcase_add_test(r, a_restarted_server_serves_nothing_until_the_base_switches);
    tcase_add_test(r, a_newer_version_is_applied_and_an_older_one_is_not);
    tcase_add_test(r, a_prepare_freezes_until_a_newer_version_arrives);
    tcase_add_test(r, a_node_behind_stays_frozen_until_past_the_prepared_version);
    tcase_add_test(r, a_coordinator_change_releases_and_others_cannot_freeze);
    tcase_add_test(r, the_coordinator_thaws_on_its_own_next_version);
    tcase_add_test(r, a_partition_that_loses_every_owner_at_once_is_recorded_until_the_switch);
    tcase_add_test(r, the_restore_decision_travels_until_restoring_ends);
    tcase_add_test(r, a_lagging_coordinator_takes_over_above_every_version);
    tcase_add_test(r, a_coordinator_jumps_past_a_version_a_member_reports);
    suite_add_tcase(s, r);
    TCase *w = tcase_create("switch");
    tcase_add_test(w, switch_when_every_new_owner_has_loaded);
    tcase_add_test(w, no_switch_while_a_server_is_still_loading_or_stale);
    tcase_add_test(w, an_empty_cache_switches_at_once_and_a_silent_server_cancels);
    suite_add_tcase(s, w);
    return lt_run_suite(s);
}
