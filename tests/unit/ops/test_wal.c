/*
 * The log's hold on replies (ops/wal.c) on a hand-built data-thread state
 * with a real data directory: a reply is never sent before the records
 * appended when it was made are durable - also when holding it finds no
 * memory (the failing-allocation hook, lattice/alloc.h).
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>
#include <urcu.h>

#include "run_suite.h"
#include "lattice/alloc.h"
#include "ops_int.h"

typedef struct answer {
    int calls;
    int early; /* answered while the log was not durable past the write */
    lattice_status last;
    lattice_ops *d;
} answer;

static void cb(void *arg, size_t i, const lattice_op_result *r)
{
    (void)i;
    answer *a = arg;
    a->calls++;
    a->last = r->status;
    if (!wal_durable(a->d)) a->early++; /* nothing is appended between the hold and here */
}

START_TEST(a_reply_that_cannot_be_held_still_waits_for_the_log)
{
    char dir[] = "/tmp/test_wal_XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    lattice_ops *d = lt_calloc(1, sizeof *d);
    static peer self;
    memset(&self, 0, sizeof self);
    snprintf(self.m.id, sizeof self.m.id, "id-0");
    snprintf(self.m.cid, sizeof self.m.cid, "a:1");
    self.m.server = self.m.self = true;
    d->peers[d->n_peers++] = &self;
    d->self = &self;
    snprintf(d->self_id, sizeof d->self_id, "id-0");
    d->running = true;
    d->efd = eventfd(0, EFD_NONBLOCK);
    ck_assert_int_ge(d->efd, 0);
    lattice_region_config rc = {"t", 0, 8, 0, LATTICE_REGION_REJECT};
    ck_assert_int_eq(lattice_region_create(&rc, &d->region), LATTICE_OK);
    /* group commit: every batch waits for its fdatasync */
    ck_assert_int_eq(wal_init(d, dir, "group", 0), LATTICE_OK); /* registers with RCU for its recovery */
    rcu_register_thread(); /* the stores need it, as on the data thread */
    lattice_meta_config mc = {false, d->region, NULL, NULL};
    ck_assert_int_eq(lattice_meta_create(&mc, &d->meta), LATTICE_OK);
    lattice_meta_member *members[1] = {&self.m};
    lattice_meta_set_members(d->meta, members, 1, "id-0");
    lattice_cache_config cfg;
    lattice_cache_config_init(&cfg, "default");
    lattice_meta_start(d->meta, &cfg, 1);
    wal_attach(d); /* the store's changes are logged from here on */
    lattice_meta_cache *c = lattice_meta_cache_of(d->meta, "default");
    ck_assert_ptr_nonnull(c);

    answer a = {0, 0, LATTICE_OK, d};
    int tries = 0, answered_now = 0;
    for (; tries < 2000 && wal_nomem_waits(d) < 20; tries++) {
        char key[32];
        snprintf(key, sizeof key, "k%d", tries);
        lattice_store_entry e = {0, key, strlen(key), "value", 5, 0, (uint64_t)tries + 1};
        ck_assert_int_eq(lattice_store_put(c->store, &e, 0), LATTICE_OK); /* a record appended, not yet durable */
        opx *o = lt_calloc(1, sizeof *o);
        ck_assert_ptr_nonnull(o);
        o->fn = cb;
        o->arg = &a;
        origin org = {.local = o};
        lattice_op_result r = {.status = LATTICE_OK, .value = "reply", .value_len = 5};
        int before = a.calls;
        uint64_t waits = wal_nomem_waits(d);
        /* The next allocation fails: the queue's growth or the reply's copy
         * (the log's thread may take the failure instead: then nothing here
         * failed and the reply is held as usual). */
        lattice_alloc_fail_nth(1);
        bool taken = wal_hold(d, &org, &r);
        lattice_alloc_fail_nth(0);
        if (!taken) { /* nothing to wait for: the log caught up already */
            cb(&a, 0, &r);
            lt_free(o);
        }
        if (wal_nomem_waits(d) > waits) {
            ck_assert_int_eq(a.calls, before + 1); /* answered in the call, after the log */
            answered_now++;
        }
        /* The held ones go as the log moves. */
        for (int i = 0; i < 10000 && !wal_durable(d); i++) usleep(100);
        wal_release(d);
    }
    printf("%d writes, %d replies could not be held and waited for the log, %d answers\n", tries, answered_now,
           a.calls);
    ck_assert_int_ge(answered_now, 1);
    ck_assert_int_eq(a.calls, tries);
    ck_assert_int_eq(a.early, 0);
    ck_assert_int_eq(a.last, LATTICE_OK);

    wal_free(d);
    lattice_meta_destroy(d->meta);
    lattice_region_destroy(d->region);
    close(d->efd);
    lt_free(d);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    ck_assert_int_eq(system(cmd), 0);
    rcu_unregister_thread();
}
END_TEST

int main(void)
{
    Suite *s = suite_create("wal");
    TCase *t = tcase_create("hold");
    tcase_set_timeout(t, 120);
    tcase_add_test(t, a_reply_that_cannot_be_held_still_waits_for_the_log);
    suite_add_tcase(s, t);
    return lt_run_suite(s);
}
