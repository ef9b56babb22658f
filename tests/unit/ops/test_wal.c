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
#include "grid_int.h" /* whole-grid restart's reload (grid/restart_restore.c) */
#include "ops_int.h"

typedef struct answer {
    int calls;
    int early; /* answered while the log was not durable past the write */
    lattice_status last;
    lattice_ops *d;
} answer;

/* A data layer of one server ("id-0", consistent id "a:1") with an 8 MiB
 * region and no sockets: what the log needs around it. */
static lattice_ops *one_node(void)
{
    static peer self;
    lattice_ops *d = lt_calloc(1, sizeof *d);
    ck_assert_ptr_nonnull(d);
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
    return d;
}

static void node_free(lattice_ops *d, const char *dir)
{
    wal_free(d);
    lattice_meta_destroy(d->meta);
    lattice_region_destroy(d->region);
    close(d->efd);
    lt_free(d);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    ck_assert_int_eq(system(cmd), 0);
}

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
    lattice_ops *d = one_node();
    /* group commit: every batch waits for its fdatasync */
    ck_assert_int_eq(wal_init(d, dir, "group", 0), LATTICE_OK); /* registers with RCU for its recovery */
    rcu_register_thread(); /* the stores need it, as on the data thread */
    lattice_meta_config mc = {false, d->region, NULL, NULL};
    ck_assert_int_eq(lattice_meta_create(&mc, &d->meta), LATTICE_OK);
    lattice_meta_member *members[1] = {&d->self->m};
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
        lattice_store_entry e = {0, key, strlen(key), "value", 5, 0, (uint64_t)tries + 1, 0};
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

    node_free(d, dir);
    rcu_unregister_thread();
}
END_TEST

/* A restoring cache (a whole-grid restart) takes a reload slice as a
 * replacement of the partition; any bytes in a slice leave the node up and
 * the partition cleared (the next round sends it again); DIR/reloading names
 * the partition until the reload is durable. */
START_TEST(reload_slices_apply_whole_and_survive_any_bytes)
{
    char dir[] = "/tmp/test_wal_XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    lattice_ops *d = one_node();
    ck_assert_int_eq(wal_init(d, dir, "group", 0), LATTICE_OK);
    ck_assert_int_eq(lattice_grid_attach(d, 0), LATTICE_OK); /* restart's state and its hooks in wal.c */
    rcu_register_thread();
    lattice_meta_config mc = {false, d->region, NULL, NULL};
    ck_assert_int_eq(lattice_meta_create(&mc, &d->meta), LATTICE_OK);
    lattice_meta_member *members[1] = {&d->self->m};
    lattice_meta_set_members(d->meta, members, 1, "id-0");
    lattice_cache_config cfg;
    lattice_cache_config_init(&cfg, "default");
    char *ent[1] = {"a:1 id-0"};
    lattice_meta_restart_base b = {"default", ent, 1, 4, NULL, 0};
    lattice_meta_start_restart(d->meta, &cfg, 1, &b, 1);
    wal_attach(d);
    lattice_meta_cache *c = lattice_meta_cache_of(d->meta, "default");
    ck_assert_ptr_nonnull(c);
    ck_assert(c->restoring);
    ck_assert_uint_eq(c->base_version, 5);
    for (int i = 0; i < 10; i++) { /* what the slice must replace */
        char key[16];
        snprintf(key, sizeof key, "old%d", i);
        lattice_store_entry e = {3, key, strlen(key), "x", 1, 0, 1, 0};
        ck_assert_int_eq(lattice_store_put(c->store, &e, 0), LATTICE_OK);
    }
    /* A well-formed slice: two entries, first and last. */
    uint8_t buf[256];
    size_t n = 0;
    const char *keys[2] = {"k1", "k2"};
    for (int i = 0; i < 2; i++) {
        uint64_t f[4] = {2, 1, 0, 40 + (uint64_t)i};
        for (int k = 0; k < 4; k++)
            for (int b8 = 0; b8 < 8; b8++) buf[n++] = (uint8_t)(f[k] >> (8 * b8));
        memcpy(buf + n, keys[i], 2);
        n += 2;
        buf[n++] = 'v';
    }
    Latdata__Req q = LATDATA__REQ__INIT;
    q.cache = "default";
    q.partition = 3;
    q.remove = true;
    q.delta = 1;
    q.version = 77;
    q.value.data = buf;
    q.value.len = n;
    restart_serve_load(d, &q);
    ck_assert_uint_eq(lattice_store_count(c->store, 3), 2);
    ck_assert_uint_eq(c->counter[3], 77);
    char path[300], text[256] = "";
    snprintf(path, sizeof path, "%s/reloading", dir);
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    ck_assert_ptr_nonnull(fgets(text, sizeof text, f));
    fclose(f);
    ck_assert_str_eq(text, "default 3\n");
    /* Any bytes: never a crash; a slice that does not parse leaves the
     * partition empty. */
    unsigned seed = 1;
    for (int round = 0; round < 20000; round++) {
        size_t len = (size_t)(rand_r(&seed) % sizeof buf);
        for (size_t i = 0; i < len; i++) buf[i] = (uint8_t)rand_r(&seed);
        if (round % 3 == 0 && n <= sizeof buf) { /* a valid slice with one byte flipped or cut */
            len = n;
            buf[rand_r(&seed) % len] ^= (uint8_t)(1u << (rand_r(&seed) % 8));
        }
        q.value.len = len;
        q.partition = (uint32_t)(rand_r(&seed) % 2000); /* out of bounds too */
        q.remove = rand_r(&seed) % 2;
        restart_serve_load(d, &q);
    }
    /* The end of restoring (the coordinator's metadata): DIR/reloading is
     * emptied once the log is durable. */
    lattice_meta_end_restoring(c);
    wal_attach(d);
    for (int i = 0; i < 10000 && !wal_durable(d); i++) usleep(100);
    wal_tick(d);
    f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    ck_assert_ptr_null(fgets(text, sizeof text, f));
    fclose(f);

    d->grid_hooks.free(d); /* what lattice_grid_attach took: restart's state and the grid's */
    node_free(d, dir);
    rcu_unregister_thread();
}
END_TEST

int main(void)
{
    Suite *s = suite_create("wal");
    TCase *t = tcase_create("hold");
    tcase_set_timeout(t, 120);
    tcase_add_test(t, a_reply_that_cannot_be_held_still_waits_for_the_log);
    tcase_add_test(t, reload_slices_apply_whole_and_survive_any_bytes);
    suite_add_tcase(s, t);
    return lt_run_suite(s);
}
