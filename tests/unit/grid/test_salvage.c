/*
 * grid/salvage.c without a network: the copies a node keeps when it rejoins
 * under a new id survive an incarnation in between on a grid without
 * quorum (the cut-off side that a merge dissolves a moment later) and a
 * second rejoin, and only a grid with quorum frees them.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <urcu.h>

#include "run_suite.h"
#include "lattice/alloc.h"
#include "grid_int.h"

#define PARTS 16

static lattice_region *region;
static lattice_ops *d;
static lattice_meta_member mem[3];

static void setup(void)
{
    rcu_register_thread();
    lattice_region_config rc = {"t", 0, 8, 0, LATTICE_REGION_REJECT};
    ck_assert_int_eq(lattice_region_create(&rc, &region), LATTICE_OK);
    d = lt_calloc(1, sizeof *d);
    ck_assert_ptr_nonnull(d);
    d->region = region;
    d->grid = lt_calloc(1, sizeof *d->grid); /* what lattice_grid_attach allocates */
    ck_assert_ptr_nonnull(d->grid);
}

static void teardown(void)
{
    salvage_free(d);
    lt_free(d->grid);
    /* The commit watermarks' state (clean.c) is the ops layer's to free. */
    for (size_t i = 0; d->meta && i < lattice_meta_cache_count(d->meta); i++)
        clean_cache_gone(lattice_meta_cache_at(d->meta, i));
    if (d->meta) lattice_meta_destroy(d->meta);
    lt_free(d);
    lattice_region_destroy(region);
    rcu_unregister_thread();
}

/* A started metadata of one cache (backups=1) on the servers ids, the
 * first of them this node and the coordinator. */
static lattice_meta *grid_of(size_t n, const char *const *ids)
{
    lattice_meta *m = NULL;
    lattice_meta_config mc = {false, region, NULL, NULL};
    ck_assert_int_eq(lattice_meta_create(&mc, &m), LATTICE_OK);
    lattice_meta_member *list[3];
    for (size_t i = 0; i < n; i++) {
        memset(&mem[i], 0, sizeof mem[i]);
        snprintf(mem[i].id, sizeof mem[i].id, "%s", ids[i]);
        snprintf(mem[i].cid, sizeof mem[i].cid, "%c:1", 'a' + (int)i);
        mem[i].server = true;
        mem[i].self = i == 0;
        list[i] = &mem[i];
    }
    lattice_meta_set_members(m, list, n, ids[0]);
    lattice_cache_config cfg;
    lattice_cache_config_init(&cfg, "default");
    cfg.partitions = PARTS;
    cfg.backups = 1;
    lattice_meta_start(m, &cfg, 1);
    ck_assert(lattice_meta_valid(m));
    return m;
}

/* The old incarnation "old-a" held entries in every partition; it rejoins
 * and keeps them. */
static void rejoin_keeping_old_copies(void)
{
    static const char *ids[] = {"old-a", "id-b", "id-c"};
    lattice_meta *old = grid_of(3, ids);
    lattice_meta_cache *c = lattice_meta_cache_of(old, "default");
    ck_assert_ptr_nonnull(c->store);
    for (uint32_t p = 0; p < PARTS; p++) {
        char key[16];
        snprintf(key, sizeof key, "k%u", p);
        lattice_store_entry e = {p, key, strlen(key), "v", 1, 0, 1, 0};
        ck_assert_int_eq(lattice_store_put(c->store, &e, 0), LATTICE_OK);
        c->counter[p] = 1;
    }
    snprintf(d->self_id, sizeof d->self_id, "old-a");
    salvage_keep(d, old);
    lattice_meta_destroy(old);
    ck_assert_uint_eq(salvage_held(d), PARTS);
}

/* The interim incarnation joined a grid without quorum: its metadata names
 * none of the kept copies, and it loads every partition - nothing kept is
 * freed, and its own rejoin keeps the first set under the first id. */
START_TEST(a_grid_without_quorum_frees_no_kept_copy)
{
    rejoin_keeping_old_copies();
    static const char *mid[] = {"mid-a", "id-b"};
    d->meta = grid_of(2, mid);
    snprintf(d->self_id, sizeof d->self_id, "mid-a");
    lattice_meta_cache *c = lattice_meta_cache_of(d->meta, "default");
    salvage_prune(d, false);
    ck_assert_uint_eq(salvage_held(d), PARTS);
    for (uint32_t p = 0; p < PARTS; p++) salvage_done(d, c, p, false);
    ck_assert_uint_eq(salvage_held(d), PARTS);
    uint64_t entries = 0;
    ck_assert(!salvage_restore(d, c, 0, false, &entries));
    /* The second rejoin: the interim's copies go, the first set stays. */
    lattice_meta *interim = d->meta;
    d->meta = NULL;
    salvage_keep(d, interim);
    lattice_meta_destroy(interim);
    ck_assert_str_eq(d->grid->salvage_id, "old-a");
    ck_assert_uint_eq(salvage_held(d), PARTS);
}
END_TEST

/* The same steps on a grid with quorum free them: a partition once loaded
 * here, then every copy no lost record asks for. */
START_TEST(a_grid_with_quorum_frees_what_no_record_asks_for)
{
    rejoin_keeping_old_copies();
    static const char *now[] = {"new-a", "id-b", "id-c"};
    d->meta = grid_of(3, now);
    snprintf(d->self_id, sizeof d->self_id, "new-a");
    lattice_meta_cache *c = lattice_meta_cache_of(d->meta, "default");
    salvage_done(d, c, 3, true);
    ck_assert_uint_eq(salvage_held(d), PARTS - 1);
    salvage_prune(d, true);
    ck_assert_uint_eq(salvage_held(d), 0);
    ck_assert_uint_eq(d->grid->n_salvage, 0);
}
END_TEST

/* Paused twice: the first rejoin loaded every partition (a grid with
 * quorum freed each kept copy as it did), then the node was dropped again.
 * The first set holds nothing a lost record could want; the copies the
 * second incarnation loaded are the ones to keep, or the second return
 * loads its whole share in full (#32). */
START_TEST(a_second_rejoin_keeps_the_copies_the_first_one_loaded)
{
    rejoin_keeping_old_copies();
    static const char *now[] = {"new-a", "id-b", "id-c"};
    d->meta = grid_of(3, now);
    snprintf(d->self_id, sizeof d->self_id, "new-a");
    lattice_meta_cache *c = lattice_meta_cache_of(d->meta, "default");
    for (uint32_t p = 0; p < PARTS; p++) salvage_done(d, c, p, true);
    ck_assert_uint_eq(salvage_held(d), 0);
    lattice_meta *second = d->meta;
    d->meta = NULL;
    salvage_keep(d, second);
    lattice_meta_destroy(second);
    ck_assert_str_eq(d->grid->salvage_id, "new-a");
    ck_assert_uint_eq(salvage_held(d), PARTS);
}
END_TEST

/* A primary cut off with writes in flight: this side removed its copies
 * and lost its lease, so those writes were refused, never acknowledged -
 * and the new primary on the other side numbers its own writes from the
 * same counters.  The kept copy's delta mark must stay below the refused
 * ones, though the partition's counter passed them and nothing is in
 * flight any more: a mark at the counter made the delta skip the new
 * primary's first writes after the failover (acknowledged writes lost at a
 * heal, 2 runs in 8 on a busy machine). */
START_TEST(a_refused_write_keeps_the_delta_mark_below_it)
{
    static const char *ids[] = {"solo"};
    d->meta = grid_of(1, ids);
    snprintf(d->self_id, sizeof d->self_id, "solo");
    lattice_meta_cache *c = lattice_meta_cache_of(d->meta, "default");
    const uint32_t p = 5;
    lattice_store_history_valid_from(c->store, p, 0);
    waitw *w[4];
    for (int i = 0; i < 4; i++) {
        char key[8];
        snprintf(key, sizeof key, "k%d", i);
        uint64_t v = ++c->counter[p];
        lattice_store_entry e = {p, key, strlen(key), "v", 1, 0, v, 0};
        ck_assert_int_eq(lattice_store_put(c->store, &e, 0), LATTICE_OK);
        w[i] = lt_calloc(1, sizeof *w[i]);
        ck_assert_ptr_nonnull(w[i]);
        clean_begin(d, c, w[i], p, v, key, strlen(key));
    }
    clean_end(d, w[0]);
    clean_end(d, w[1]);
    ck_assert_uint_eq(clean_committed(c, p), 2);
    w[2]->rejected = w[3]->rejected = true;
    clean_end(d, w[3]);
    clean_end(d, w[2]);
    ck_assert_uint_eq(c->counter[p], 4);
    ck_assert_uint_eq(clean_committed(c, p), 2);
    uint64_t mark = 0;
    ck_assert(clean_delta_mark(c, p, &mark));
    ck_assert_uint_eq(mark, 2);
    /* It hears the new primary's watermark as its copy before it rejoins
     * (the heal): the new primary's writes 3 and 4 are other writes than
     * its own, so the mark still stays below them. */
    clean_note_applied(c, p, 6);
    clean_note_committed(c, p, 6);
    ck_assert(clean_delta_mark(c, p, &mark));
    ck_assert_uint_eq(mark, 2);
    for (int i = 0; i < 4; i++) lt_free(w[i]);
}
END_TEST

/* A partition nobody wrote while this node held it, its history complete
 * from 0: its kept copy holds every write up to 0 and comes back as a delta
 * from there.  One with a counter and no watermark heard gets no mark. */
START_TEST(a_never_written_copy_has_a_delta_mark_of_zero)
{
    static const char *ids[] = {"solo"};
    d->meta = grid_of(1, ids);
    snprintf(d->self_id, sizeof d->self_id, "solo");
    lattice_meta_cache *c = lattice_meta_cache_of(d->meta, "default");
    uint64_t mark = 99;
    ck_assert(!clean_delta_mark(c, 7, &mark)); /* no history declared complete */
    lattice_store_history_valid_from(c->store, 7, 0);
    ck_assert(clean_delta_mark(c, 7, &mark));
    ck_assert_uint_eq(mark, 0);
    lattice_store_history_valid_from(c->store, 8, 0);
    c->counter[8] = 3; /* written (by rebalance, say) without a watermark heard */
    ck_assert(!clean_delta_mark(c, 8, &mark));
}
END_TEST

/* A restart from the data directory keeps every recovered cache that has a
 * marked, non-empty partition as a delta base - not only the first one
 * attached (the second cache loaded in full) - and drops one with none. */
static void keep_one_recovered(const char *name, bool with_mark)
{
    lattice_cache_config cfg;
    lattice_cache_config_init(&cfg, name);
    cfg.partitions = PARTS;
    lattice_store_config sc = {name, PARTS, region, NULL, NULL};
    lattice_store *st = NULL;
    ck_assert_int_eq(lattice_store_create(&sc, &st), LATTICE_OK);
    lattice_store_entry e = {3, "k", 1, "v", 1, 0, 4, 0};
    ck_assert_int_eq(lattice_store_put(st, &e, 0), LATTICE_OK);
    uint64_t *counter = lt_calloc(PARTS, sizeof *counter), *marks = lt_malloc(PARTS * sizeof *marks);
    ck_assert(counter && marks);
    counter[3] = 4;
    for (uint32_t p = 0; p < PARTS; p++) marks[p] = UINT64_MAX; /* persist's LT_MARK_NONE */
    if (with_mark) marks[3] = 4;
    salvage_keep_recovered(d, &cfg, st, counter, marks, d->self_id); /* takes st, counter and marks */
}

START_TEST(every_recovered_cache_with_a_mark_is_kept)
{
    snprintf(d->self_id, sizeof d->self_id, "solo");
    keep_one_recovered("one", true);
    keep_one_recovered("idle", false);
    keep_one_recovered("two", true);
    ck_assert_uint_eq(d->grid->n_salvage, 2); /* "one" and "two"; "idle" dropped */
    ck_assert_uint_eq(salvage_held(d), 2);
}
END_TEST

/* Members ids (cids by the letter after "-", "z:1" for "new-a") as seen
 * by the one at `self`, id-b coordinating. */
static void view(lattice_meta *m, lattice_meta_member *mm, const char *const *ids, size_t n, const char *self)
{
    lattice_meta_member *list[6];
    for (size_t i = 0; i < n; i++) {
        memset(&mm[i], 0, sizeof mm[i]);
        snprintf(mm[i].id, sizeof mm[i].id, "%s", ids[i]);
        snprintf(mm[i].cid, sizeof mm[i].cid, "%c:1", strcmp(ids[i], "new-a") ? ids[i][strlen(ids[i]) - 1] : 'z');
        mm[i].server = true;
        mm[i].self = strcmp(ids[i], self) == 0;
        list[i] = &mm[i];
    }
    if (lattice_meta_set_members(m, list, n, "id-b")) lattice_meta_bump(m);
}

/* The coordinator's metadata after old-a and id-c, the two owners of some
 * partitions, left at once (LOST, recorded with their ids) and the servers
 * `after` (id-b coordinating) are up, applied by new-a; d->meta is
 * replaced.  Returns the coordinator's metadata (the caller destroys it). */
static lattice_meta *lost_records_seen_by_new_a(const char *const *after, size_t n_after)
{
    lattice_meta *coord = NULL;
    lattice_meta_config mc = {false, region, NULL, NULL};
    ck_assert_int_eq(lattice_meta_create(&mc, &coord), LATTICE_OK);
    static lattice_meta_member cm0[6], cm1[6], cm2[6], dm[6]; /* one per view: meta keeps the old ones' pointers */
    static const char *before[] = {"old-a", "id-b", "id-c"};
    static const char *cut[] = {"id-b"};
    view(coord, cm0, before, 3, "id-b");
    lattice_cache_config cfg;
    lattice_cache_config_init(&cfg, "default");
    cfg.partitions = PARTS;
    cfg.backups = 1;
    lattice_meta_start(coord, &cfg, 1);
    view(coord, cm1, cut, 1, "id-b");
    view(coord, cm2, after, n_after, "id-b");
    ck_assert_uint_gt(lattice_meta_cache_of(coord, "default")->n_lost, 0);
    if (d->meta) {
        for (size_t i = 0; i < lattice_meta_cache_count(d->meta); i++) clean_cache_gone(lattice_meta_cache_at(d->meta, i));
        lattice_meta_destroy(d->meta);
    }
    d->meta = NULL;
    lattice_meta_config dc = {false, region, NULL, NULL};
    ck_assert_int_eq(lattice_meta_create(&dc, &d->meta), LATTICE_OK);
    view(d->meta, dm, after, n_after, "new-a");
    snprintf(d->self_id, sizeof d->self_id, "new-a");
    ck_assert(lattice_meta_apply(d->meta, lattice_meta_message(coord)));
    ck_assert_uint_eq(lattice_meta_cache_of(d->meta, "default")->n_lost, lattice_meta_cache_of(coord, "default")->n_lost);
    return coord;
}

static const char *const three_after[] = {"id-b", "new-a", "id-c2"};

/* salvage_report gives exactly the `named` partitions whose record names
 * `id`, each with `counter` and one entry, under a lineage the coordinator
 * matches against the record; and a prune keeps them (a record asks for each). */
static void expect_reported(const lattice_meta_cache *c, size_t named, uint64_t counter, const char *id)
{
    uint32_t parts[PARTS];
    uint64_t counters[PARTS], entries[PARTS];
    size_t n = salvage_report(d, c, parts, counters, entries, PARTS);
    ck_assert_uint_eq(n, named);
    for (size_t i = 0; i < n; i++) {
        ck_assert(lattice_meta_lost_names(lattice_meta_lost_of(c, parts[i]), id));
        ck_assert(lattice_meta_lost_names(lattice_meta_lost_of(c, parts[i]), d->grid->salvage_id));
        ck_assert_uint_eq(counters[i], counter);
        ck_assert_uint_eq(entries[i], 1);
    }
    salvage_prune(d, true);
    ck_assert_uint_eq(salvage_report(d, c, parts, counters, entries, PARTS), named);
}

/* old-a and id-c, the two owners of some partitions, left at once: those
 * are LOST, recorded with old-a's id.  old-a is back as new-a (another
 * address) while servers e and f joined: new-a is an owner-to-be of some of
 * them and not of others.  Every kept copy a record asks for is reported -
 * before, only those of the partitions new-a was to own, so the record of
 * any other waited for ever (LOST though its data was here). */
START_TEST(a_kept_copy_is_reported_whoever_owns_the_partition_next)
{
    rejoin_keeping_old_copies();
    static const char *const after[] = {"id-b", "new-a", "id-e", "id-f"};
    lattice_meta *coord = lost_records_seen_by_new_a(after, 4);
    lattice_meta_cache *c = lattice_meta_cache_of(d->meta, "default");
    size_t named = 0, not_mine = 0;
    for (size_t i = 0; i < c->n_lost; i++) {
        if (!lattice_meta_lost_names(&c->lost[i], "old-a")) continue;
        named++;
        lattice_meta_member *mov[4];
        size_t nm = lattice_meta_moving_owners(c, c->lost[i].partition, mov, 4);
        bool mine = false;
        for (size_t k = 0; k < nm; k++) mine |= mov[k]->self;
        not_mine += !mine;
    }
    ck_assert_uint_gt(named, 0);
    ck_assert_uint_gt(not_mine, 0); /* the case this test is about */
    expect_reported(c, named, 1, "old-a");
    lattice_meta_destroy(coord);
}
END_TEST

/* old-a was killed -9 together with id-c and came back as new-a from its
 * data directory, which DIR/incarnations says old-a wrote.  Its recovered
 * copy has no delta mark (no checkpoint yet) and it joins a live grid, so
 * it does not serve it - but the lost records wait for old-a's copies,
 * which are all in it: kept and reported under old-a's id, each named
 * partition and no other.  Before, the copy was dropped ("other servers are
 * up") and the records stayed LOST until reset-lost emptied them (335 of
 * 1024 partitions, 3 servers, two killed at once). */
START_TEST(a_copy_restarted_from_the_data_directory_answers_the_records_of_its_writer)
{
    lattice_meta *coord = lost_records_seen_by_new_a(three_after, 3);
    lattice_meta_cache *c = lattice_meta_cache_of(d->meta, "default");
    lattice_store_config sc = {"default", PARTS, region, NULL, NULL};
    lattice_store *st = NULL;
    ck_assert_int_eq(lattice_store_create(&sc, &st), LATTICE_OK);
    uint64_t *counter = lt_calloc(PARTS, sizeof *counter);
    ck_assert(counter);
    for (uint32_t p = 0; p < PARTS; p++) {
        char k[16];
        int n = snprintf(k, sizeof k, "k%u", p);
        lattice_store_entry e = {p, k, (size_t)n, "v", 1, 0, 7, 0};
        ck_assert_int_eq(lattice_store_put(st, &e, 0), LATTICE_OK);
        counter[p] = 7;
    }
    size_t named = 0;
    for (size_t i = 0; i < c->n_lost; i++) named += lattice_meta_lost_names(&c->lost[i], "old-a");
    ck_assert_uint_gt(named, 0);
    ck_assert_uint_lt(named, PARTS);
    salvage_keep_recovered(d, &c->cfg, st, counter, NULL, "gone-1 old-a");
    ck_assert_uint_eq(salvage_held(d), named); /* the named ones, no other */
    expect_reported(c, named, 7, "old-a");
    lattice_meta_destroy(coord);
}
END_TEST

/* Nothing of an incarnation no record names is kept without a mark. */
START_TEST(a_recovered_copy_of_an_unnamed_writer_without_marks_is_dropped)
{
    lattice_meta *coord = lost_records_seen_by_new_a(three_after, 3);
    lattice_meta_cache *c = lattice_meta_cache_of(d->meta, "default");
    lattice_store_config sc = {"default", PARTS, region, NULL, NULL};
    lattice_store *st = NULL;
    ck_assert_int_eq(lattice_store_create(&sc, &st), LATTICE_OK);
    lattice_store_entry e = {1, "k", 1, "v", 1, 0, 2, 0};
    ck_assert_int_eq(lattice_store_put(st, &e, 0), LATTICE_OK);
    uint64_t *counter = lt_calloc(PARTS, sizeof *counter);
    ck_assert(counter);
    salvage_keep_recovered(d, &c->cfg, st, counter, NULL, "somebody-else");
    ck_assert_uint_eq(salvage_held(d), 0);
    ck_assert_uint_eq(d->grid->n_salvage, 0);
    lattice_meta_destroy(coord);
}
END_TEST

/* A backup cut off with its primary (backups=2, both on the minority side)
 * applied the primary's writes 4 and 5, which the majority never got; its
 * new primary after the heal numbers other writes 4 and 5, and its
 * watermark (10) reaches this old copy before the node rejoins.  The mark
 * must stay at the old primary's last watermark (3): min(heard 10, contig
 * 5) counted the divergent 4 and 5 as the grid's, and the delta skipped
 * the majority's 4 and 5 (fault_partition_two_of_five in a CI run). */
START_TEST(another_primary_caps_a_copy_at_its_old_watermark)
{
    static const char *ids[] = {"solo"};
    d->meta = grid_of(1, ids);
    snprintf(d->self_id, sizeof d->self_id, "solo");
    lattice_meta_cache *c = lattice_meta_cache_of(d->meta, "default");
    const uint32_t p = 7;
    lattice_store_history_valid_from(c->store, p, 0);
    for (uint64_t v = 1; v <= 5; v++) {
        char key[8];
        snprintf(key, sizeof key, "k%llu", (unsigned long long)v);
        lattice_store_entry e = {p, key, strlen(key), "v", 1, 0, v, 0};
        ck_assert_int_eq(lattice_store_put(c->store, &e, 0), LATTICE_OK);
        uint64_t none;
        ck_assert(!clean_note_sender(c, p, "old-primary", &none));
        clean_note_applied(c, p, v);
        clean_note_committed(c, p, v <= 3 ? v : 3);
    }
    uint64_t mark = 0;
    ck_assert(clean_delta_mark(c, p, &mark));
    ck_assert_uint_eq(mark, 3);
    /* ... and it must have the new primary rewrite what it holds above 3
     * (takeover.c): it reads nothing itself meanwhile. */
    uint64_t from = 0;
    ck_assert(clean_note_sender(c, p, "new-primary", &from));
    ck_assert_uint_eq(from, 3);
    clean_level_begin(c, p);
    clean_note_committed(c, p, 10);
    ck_assert(!clean_copy_is_clean(c, p));
    clean_level_end(c, p);
    ck_assert(clean_copy_is_clean(c, p));
    ck_assert(clean_delta_mark(c, p, &mark));
    ck_assert_uint_eq(mark, 3);
    /* A copy whose old primary drained (everything applied was heard)
     * is not capped by the change. */
    const uint32_t q = 8;
    lattice_store_history_valid_from(c->store, q, 0);
    for (uint64_t v = 1; v <= 3; v++) {
        char key[8];
        snprintf(key, sizeof key, "q%llu", (unsigned long long)v);
        lattice_store_entry e = {q, key, strlen(key), "v", 1, 0, v, 0};
        ck_assert_int_eq(lattice_store_put(c->store, &e, 0), LATTICE_OK);
        uint64_t none;
        ck_assert(!clean_note_sender(c, q, "old-primary", &none));
        clean_note_applied(c, q, v);
        clean_note_committed(c, q, v);
    }
    ck_assert(!clean_note_sender(c, q, "new-primary", &from));
    clean_note_committed(c, q, 3);
    ck_assert(clean_delta_mark(c, q, &mark));
    ck_assert_uint_eq(mark, 3);
}
END_TEST

/* A copy that becomes primary levels its copies only when it applied
 * writes above the last watermark it heard (ops/takeover.c): those alone can
 * be missing on another copy. */
START_TEST(a_copy_taking_over_levels_only_above_its_watermark)
{
    static const char *ids[] = {"solo"};
    d->meta = grid_of(1, ids);
    lattice_meta_cache *c = lattice_meta_cache_of(d->meta, "default");
    uint64_t from = 0, none;
    ck_assert(!clean_take_over(c, 1, &from)); /* never a copy: nothing */
    ck_assert(!clean_note_sender(c, 1, "old-primary", &none));
    clean_note_applied(c, 1, 9);
    clean_note_committed(c, 1, 6);
    ck_assert(clean_take_over(c, 1, &from));
    ck_assert_uint_eq(from, 6);
    /* Taking over changes no mark by itself: a copy's is the watermark it
     * heard (its counter may count writes nobody acknowledged). */
    uint64_t mark = 0;
    ck_assert(clean_mark(c, 1, &mark));
    ck_assert_uint_eq(mark, 6);
    ck_assert(!clean_note_sender(c, 2, "old-primary", &none));
    clean_note_applied(c, 2, 9);
    clean_note_committed(c, 2, 7);
    c->counter[2] = 12; /* loaded from a supplier that had applied writes in flight */
    clean_note_committed(c, 2, 9); /* its old primary drained */
    ck_assert(!clean_take_over(c, 2, &from));
    ck_assert(clean_mark(c, 2, &mark));
    ck_assert_uint_eq(mark, 9); /* not 12 */
}
END_TEST

int main(void)
{
    Suite *s = suite_create("ops_salvage");
    TCase *tc = tcase_create("salvage");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, a_grid_without_quorum_frees_no_kept_copy);
    tcase_add_test(tc, a_copy_taking_over_levels_only_above_its_watermark);
    tcase_add_test(tc, a_grid_with_quorum_frees_what_no_record_asks_for);
    tcase_add_test(tc, a_kept_copy_is_reported_whoever_owns_the_partition_next);
    tcase_add_test(tc, a_refused_write_keeps_the_delta_mark_below_it);
    tcase_add_test(tc, a_second_rejoin_keeps_the_copies_the_first_one_loaded);
    tcase_add_test(tc, another_primary_caps_a_copy_at_its_old_watermark);
    tcase_add_test(tc, a_never_written_copy_has_a_delta_mark_of_zero);
    tcase_add_test(tc, every_recovered_cache_with_a_mark_is_kept);
    tcase_add_test(tc, a_copy_restarted_from_the_data_directory_answers_the_records_of_its_writer);
    tcase_add_test(tc, a_recovered_copy_of_an_unnamed_writer_without_marks_is_dropped);
    suite_add_tcase(s, tc);
    return lt_run_suite(s);
}
