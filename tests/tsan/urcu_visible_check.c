/*
 * What tests/tsan/urcu_visible.h must do, checked in a TSan build
 * (tests/tsan/CMakeLists.txt): `urcu_visible_check CASE` runs one case.
 *
 * Correct uses, which TSan must not report (without the header each of them
 * is reported: TSan does not see liburcu's ordering):
 *   synchronize_rcu   readers under rcu_read_lock, a writer that swaps the
 *                     pointer, waits for a grace period and frees
 *   call_rcu          the same, freeing in a call_rcu callback
 *   wfcq              a request written, queued (cds_wfcq), dequeued and
 *                     read on another thread
 * Misuses, which TSan must still report (the header orders only what
 * liburcu orders):
 *   free_without_grace_period   the writer frees without synchronize_rcu
 *   write_after_call_rcu        the writer writes the object after call_rcu
 *   write_after_enqueue         the producer writes a request it queued
 */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <urcu.h>
#include <urcu/wfcqueue.h>

#define ROUNDS 2000

struct obj {
    struct rcu_head rh;
    int v[8];
};

static struct obj *cur;
static int stop; /* atomic */
static long sink;  /* atomic */
static long reads; /* atomic, relaxed only: it must not order anything */

/* Counts the objects it read into *arg: a case where the readers read
 * nothing would pass without checking anything. */
static void *reader(void *arg)
{
    long sum = 0, seen = 0;
    rcu_register_thread();
    while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
        rcu_read_lock();
        const struct obj *o = rcu_dereference(cur);
        if (o) {
            for (int i = 0; i < 8; i++) sum += o->v[i];
            seen++;
            __atomic_add_fetch(&reads, 1, __ATOMIC_RELAXED);
        }
        rcu_read_unlock();
    }
    rcu_unregister_thread();
    __atomic_add_fetch(&sink, sum, __ATOMIC_RELAXED); /* keeps the loads */
    *(long *)arg = seen;
    return NULL;
}

static void free_cb(struct rcu_head *h) { free(caa_container_of(h, struct obj, rh)); }

/* Readers on one side, a writer replacing cur ROUNDS times on the other. */
static void rcu_case(const char *name)
{
    pthread_t t[2];
    long seen[2];
    for (int i = 0; i < 2; i++) pthread_create(&t[i], NULL, reader, &seen[i]);
    for (int n = 0; n < ROUNDS; n++) {
        struct obj *o = malloc(sizeof *o);
        if (!o) abort();
        for (int i = 0; i < 8; i++) o->v[i] = n;
        struct obj *old = rcu_xchg_pointer(&cur, o);
        /* A reader reads o before it is replaced (and old freed): without
         * this the writer can finish before the readers start. */
        long r = __atomic_load_n(&reads, __ATOMIC_RELAXED);
        while (__atomic_load_n(&reads, __ATOMIC_RELAXED) == r) sched_yield();
        if (!old) continue;
        if (!strcmp(name, "synchronize_rcu")) {
            synchronize_rcu();
            free(old);
        } else if (!strcmp(name, "call_rcu")) {
            call_rcu(&old->rh, free_cb);
        } else if (!strcmp(name, "free_without_grace_period")) {
            free(old);
        } else { /* write_after_call_rcu */
            call_rcu(&old->rh, free_cb);
            old->v[0] = -1;
        }
    }
    __atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    rcu_barrier();
    free(cur);
    if (seen[0] + seen[1] == 0) {
        fprintf(stderr, "urcu_visible_check: the readers read nothing\n");
        exit(3);
    }
}

struct req {
    struct cds_wfcq_node node;
    int payload[8];
};

static struct cds_wfcq_head qhead;
static struct cds_wfcq_tail qtail;

static void *consumer(void *arg)
{
    long sum = 0;
    for (int got = 0; got < ROUNDS;) {
        struct cds_wfcq_node *n = cds_wfcq_dequeue_blocking(&qhead, &qtail);
        if (!n) continue;
        struct req *r = caa_container_of(n, struct req, node);
        for (int i = 0; i < 8; i++) sum += r->payload[i];
        got++;
    }
    __atomic_add_fetch(&sink, sum, __ATOMIC_RELAXED);
    (void)arg;
    return NULL;
}

/* Requests are kept until the end, so a late write races with the read
 * and not with a free. */
static void wfcq_case(int write_late)
{
    static struct req reqs[ROUNDS];
    pthread_t t;
    cds_wfcq_init(&qhead, &qtail);
    pthread_create(&t, NULL, consumer, NULL);
    for (int n = 0; n < ROUNDS; n++) {
        struct req *r = &reqs[n];
        cds_wfcq_node_init(&r->node);
        for (int i = 0; i < 8; i++) r->payload[i] = n;
        cds_wfcq_enqueue(&qhead, &qtail, &r->node);
        if (write_late) r->payload[7] = -1;
    }
    pthread_join(t, NULL);
    cds_wfcq_destroy(&qhead, &qtail);
}

int main(int argc, char **argv)
{
    const char *name = argc > 1 ? argv[1] : "";
    rcu_register_thread();
    if (!strcmp(name, "synchronize_rcu") || !strcmp(name, "call_rcu") ||
        !strcmp(name, "free_without_grace_period") || !strcmp(name, "write_after_call_rcu")) {
        rcu_case(name);
    } else if (!strcmp(name, "wfcq") || !strcmp(name, "write_after_enqueue")) {
        wfcq_case(!strcmp(name, "write_after_enqueue"));
    } else {
        fprintf(stderr, "urcu_visible_check: unknown case '%s'\n", name);
        return 2;
    }
    rcu_unregister_thread();
    return 0;
}
