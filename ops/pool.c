/*
 * pool: the memory of submitted ops (opx).
 *
 * An op is allocated by the thread that submits it (an RESP IO thread) and
 * freed where it completes (the data thread, or the submitter itself when it
 * ran to completion).  With malloc that free lands in the submitter's arena
 * under the arena's lock while the submitter allocates from the same arena:
 * under SET -P 16 malloc, free and the arena lock's futex waits and wakes
 * were ~5% of a node.  So each thread keeps its own free list of
 * fixed-size blocks, and a block freed by another thread is pushed back on
 * its owner's return stack (a lock-free push; the owner takes the whole
 * stack with one exchange when its own list runs dry), so no lock is shared
 * and no block changes hands between arenas.
 *
 * Rules:
 *  - `local` and `n_local` belong to the owner thread alone; `back` is
 *    pushed by any thread and taken (exchange) by the owner only - a pop-all
 *    by a single consumer has no ABA problem.
 *  - A pool outlives its thread: at the thread's exit (a pthread key's
 *    destructor) it gives its local blocks back and is marked free; the next
 *    new thread adopts it, return stack and all.  Pools are never freed, so
 *    a block freed after its owner exited is never lost (at most one pool
 *    per thread alive at once is ever made).
 *  - Allocation failures are injected as for every allocation (lt_alloc_check
 *    counts each op allocation as one call), so NOMEM paths stay testable.
 *  - Under AddressSanitizer a block in a pool is poisoned past its link, so
 *    a use after the op completed is still reported.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>

#include "lattice/alloc.h"
#include "ops_int.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define POISON(p, n) ((void)(p), (void)(n))
#define UNPOISON(p, n) ((void)(p), (void)(n))
#endif

struct opx_pool {
    _Atomic(opx *) back;    /* freed by other threads; taken whole by the owner */
    opx *local;             /* owner only */
    size_t n_local;         /* owner only */
    atomic_bool owned;      /* a live thread has it */
    struct opx_pool *next;  /* every pool made (under pools_lock) */
};

static pthread_mutex_t pools_lock = PTHREAD_MUTEX_INITIALIZER;
static struct opx_pool *pools;
static pthread_key_t pool_key;
static pthread_once_t pool_once = PTHREAD_ONCE_INIT;
static __thread struct opx_pool *mine;

static void block_free(opx *o)
{
    UNPOISON(o, OPX_POOL_BLOCK);
    lt_free(o);
}

/* Local blocks past OPX_POOL_KEEP go back to malloc (this thread's arena). */
static void push_local(struct opx_pool *p, opx *o)
{
    if (p->n_local >= OPX_POOL_KEEP) {
        block_free(o);
        return;
    }
    o->rnext = p->local;
    /* poisoned but for its link */
    POISON(o, offsetof(opx, rnext));
    POISON((char *)o + offsetof(opx, rnext) + sizeof o->rnext, OPX_POOL_BLOCK - offsetof(opx, rnext) - sizeof o->rnext);
    p->local = o;
    p->n_local++;
}

static void thread_gone(void *arg)
{
    struct opx_pool *p = arg;
    while (p->local) {
        opx *o = p->local;
        UNPOISON(o, OPX_POOL_BLOCK);
        p->local = o->rnext;
        lt_free(o);
    }
    p->n_local = 0;
    mine = NULL; /* a free later in this thread's exit takes the return stack, as any other thread's */
    atomic_store_explicit(&p->owned, false, memory_order_release);
}

static void make_key(void) { (void)pthread_key_create(&pool_key, thread_gone); }

/* This thread's pool: adopted from an exited thread, or new; NULL without
 * memory for one (the op then comes from malloc). */
static struct opx_pool *my_pool(void)
{
    if (mine) return mine;
    pthread_once(&pool_once, make_key);
    struct opx_pool *p = NULL;
    pthread_mutex_lock(&pools_lock);
    for (struct opx_pool *q = pools; q && !p; q = q->next) {
        bool no = false;
        if (atomic_compare_exchange_strong(&q->owned, &no, true)) p = q;
    }
    if (!p && (p = calloc(1, sizeof *p))) { /* never freed: see the rules above */
        atomic_init(&p->back, NULL);
        atomic_init(&p->owned, true);
        p->next = pools;
        pools = p;
    }
    pthread_mutex_unlock(&pools_lock);
    if (p && pthread_setspecific(pool_key, p) != 0) {
        atomic_store(&p->owned, false);
        p = NULL;
    }
    mine = p;
    return p;
}

opx *opx_alloc(size_t bytes)
{
    if (bytes > OPX_POOL_BLOCK) {
        opx *o = lt_malloc(bytes);
        if (o) o->pool = NULL;
        return o;
    }
    struct opx_pool *p = my_pool();
    if (p && !p->local && atomic_load_explicit(&p->back, memory_order_relaxed)) {
        opx *got = atomic_exchange_explicit(&p->back, NULL, memory_order_acquire);
        while (got) {
            opx *next = got->rnext;
            push_local(p, got);
            got = next;
        }
    }
    if (p && p->local) {
        if (lt_alloc_check()) return NULL; /* an injected failure, as lt_malloc's */
        opx *o = p->local;
        p->local = o->rnext;
        p->n_local--;
        UNPOISON(o, OPX_POOL_BLOCK);
        o->pool = p;
        return o;
    }
    opx *o = lt_malloc(OPX_POOL_BLOCK);
    if (o) o->pool = p;
    return o;
}

void opx_free(opx *o)
{
    if (!o) return;
    struct opx_pool *p = o->pool;
    if (!p) {
        lt_free(o);
    } else if (p == mine) {
        push_local(p, o);
    } else {
        opx *head = atomic_load_explicit(&p->back, memory_order_relaxed);
        do {
            o->rnext = head;
        } while (!atomic_compare_exchange_weak_explicit(&p->back, &head, o, memory_order_release,
                                                        memory_order_relaxed));
    }
}
