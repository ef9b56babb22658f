/*
 * The submitted ops' memory (ops/pool.c): a block freed by another thread
 * goes back to the thread that allocated it and is reused there; blocks too
 * large for the pool are plain allocations; a pool left by an exited thread
 * is adopted, return stack and all; injected allocation failures still
 * reach op allocations served from a pool.
 */
#include <check.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "run_suite.h"
#include "lattice/alloc.h"
#include "ops_int.h"

#define N 64

/* Frees every op of the array on another thread, as the data thread does. */
static void *free_all(void *arg)
{
    opx **v = arg;
    for (int i = 0; i < N; i++) opx_free(v[i]);
    return NULL;
}

static void free_elsewhere(opx **v)
{
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, free_all, v), 0);
    pthread_join(t, NULL);
}

static bool in(opx *o, opx **v, int n)
{
    for (int i = 0; i < n; i++)
        if (v[i] == o) return true;
    return false;
}

START_TEST(blocks_freed_elsewhere_come_back_to_their_thread)
{
    opx *a[N], *b[N];
    for (int i = 0; i < N; i++) {
        a[i] = opx_alloc(sizeof(opx) + 100);
        ck_assert_ptr_nonnull(a[i]);
        ck_assert_ptr_nonnull(a[i]->pool);
        memset(a[i]->data, 0xab, 100); /* the whole requested size is usable */
    }
    free_elsewhere(a);
    /* every block comes back to this thread, none from malloc */
    for (int i = 0; i < N; i++) {
        b[i] = opx_alloc(sizeof(opx) + 50);
        ck_assert_msg(in(b[i], a, N), "op %d was not one of the blocks freed on the other thread", i);
        ck_assert_ptr_eq(b[i]->pool, a[0]->pool);
    }
    free_elsewhere(b);
}
END_TEST

START_TEST(a_block_freed_on_its_own_thread_is_the_next_one_out)
{
    opx *o = opx_alloc(sizeof(opx) + 10);
    ck_assert_ptr_nonnull(o);
    opx_free(o);
    opx *again = opx_alloc(sizeof(opx) + 10);
    ck_assert_ptr_eq(again, o);
    opx_free(again);
}
END_TEST

START_TEST(large_ops_are_plain_allocations)
{
    size_t big = OPX_POOL_BLOCK + 1000;
    opx *o = opx_alloc(big);
    ck_assert_ptr_nonnull(o);
    ck_assert_ptr_null(o->pool);
    memset(o->data, 1, big - sizeof(opx)); /* a block of the asked size */
    opx_free(o);
    /* one calloc'd elsewhere (control.c's calls) has no pool either */
    opx *c = lt_calloc(1, sizeof *c + 8);
    opx_free(c);
}
END_TEST

START_TEST(injected_failures_reach_pooled_ops)
{
    opx *o = opx_alloc(sizeof(opx));
    opx_free(o); /* the pool now holds a block */
    lattice_alloc_fail_nth(1);
    ck_assert_ptr_null(opx_alloc(sizeof(opx)));
    lattice_alloc_fail_nth(0);
    o = opx_alloc(sizeof(opx));
    ck_assert_ptr_nonnull(o);
    opx_free(o);
}
END_TEST

/* A thread allocates, exits; its ops are freed after it is gone; the next
 * thread takes its pool over and gets those blocks back. */
static opx *orphans[N];
static struct opx_pool *orphan_pool;

static void *alloc_and_exit(void *arg)
{
    (void)arg;
    for (int i = 0; i < N; i++) orphans[i] = opx_alloc(sizeof(opx) + 8);
    orphan_pool = orphans[0]->pool;
    return NULL;
}

static void *adopt(void *arg)
{
    opx **out = arg;
    for (int i = 0; i < N; i++) out[i] = opx_alloc(sizeof(opx) + 8);
    for (int i = 0; i < N; i++) opx_free(out[i]);
    return NULL;
}

START_TEST(an_exited_threads_pool_is_adopted_with_its_returns)
{
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, alloc_and_exit, NULL), 0);
    pthread_join(t, NULL);
    for (int i = 0; i < N; i++) opx_free(orphans[i]); /* on this thread: back to the exited one's pool */
    opx *got[N];
    ck_assert_int_eq(pthread_create(&t, NULL, adopt, got), 0);
    pthread_join(t, NULL);
    int reused = 0;
    for (int i = 0; i < N; i++) reused += in(got[i], orphans, N);
    ck_assert_int_eq(reused, N);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("ops: pool");
    TCase *tc = tcase_create("pool");
    tcase_add_test(tc, blocks_freed_elsewhere_come_back_to_their_thread);
    tcase_add_test(tc, a_block_freed_on_its_own_thread_is_the_next_one_out);
    tcase_add_test(tc, large_ops_are_plain_allocations);
    tcase_add_test(tc, injected_failures_reach_pooled_ops);
    tcase_add_test(tc, an_exited_threads_pool_is_adopted_with_its_returns);
    suite_add_tcase(s, tc);
    return lt_run_suite(s);
}
