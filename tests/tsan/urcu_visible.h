/*
 * ThreadSanitizer builds only (LATTICE_TSAN=ON): CMake force-includes this
 * header into every C file, before the file's own includes.  It makes the
 * ordering that liburcu 0.13 gives our code visible to TSan, so that a TSan
 * report means a race and no suppression has to name our functions.
 *
 * Why it is needed.  liburcu's inline parts (compiled into our code with
 * _LGPL_SOURCE) order memory with x86 asm and volatile accesses, which TSan
 * does not understand: rcu_assign_pointer is a volatile store after a
 * compiler barrier, rcu_xchg_pointer and the cds_wfcq enqueue are `lock
 * xchg` in asm, a cds_wfcq node's `next` is a volatile store and load.  So
 * TSan sees the bytes of every published snapshot (tables, topologies, views)
 * and of every queued request as written by one thread and read by another
 * with nothing between.  And the grace period itself (membarrier and futexes
 * inside the uninstrumented liburcu.so) is invisible: every free after
 * synchronize_rcu or in a call_rcu callback looks like it races with the
 * readers that finished before it.
 *
 * What it does, without changing what the code means:
 *   - liburcu's shared loads/stores and its xchg/cmpxchg become the compiler's
 *     __atomic builtins (acquire loads, release stores, seq_cst RMW) - the
 *     same ordering x86 gives the asm, now in a form TSan models.  This covers
 *     rcu_dereference/rcu_assign_pointer/rcu_xchg_pointer and the cds_wfcq
 *     queues (the RESP IO threads' and the data thread's inboxes).
 *   - The grace period as happens-before edges: every rcu_read_unlock
 *     releases a token that synchronize_rcu acquires when it returns, and a
 *     call_rcu callback acquires both the token and what its caller released
 *     at call_rcu (through a small trampoline); rcu_barrier acquires what the
 *     finished callbacks released.  This is RCU's guarantee - a read-side
 *     section that ended before the grace period happens before what follows
 *     it - and no more: a reader still inside its section when the object is
 *     freed (an unregistered thread, a pointer kept past the unlock) is
 *     still reported.
 * liburcu's own threads and allocations stay uninstrumented; what TSan
 * reports from inside liburcu.so is in tests/tsan/tsan.supp, with reasons.
 *
 * Written against liburcu 0.13 (Debian 12); a later liburcu configured with
 * --enable-compiler-atomic-builtins makes the first part unnecessary.
 */
#ifndef LATTICE_TESTS_TSAN_URCU_VISIBLE_H
#define LATTICE_TESTS_TSAN_URCU_VISIBLE_H

#ifndef _LGPL_SOURCE
#error "urcu_visible.h expects _LGPL_SOURCE (liburcu's inline read side)"
#endif

#include <stdlib.h>
#include <urcu/compiler.h>
#include <urcu/system.h>
#include <urcu/uatomic.h>

/* ---- liburcu's memory accesses as compiler atomics ----
 * Redefined before the headers whose inline functions use them are read
 * (urcu.h, wfcqueue.h, pointer.h below): macros expand where a function
 * body is parsed. */
#undef _CMM_LOAD_SHARED
#define _CMM_LOAD_SHARED(p) __atomic_load_n(&(p), __ATOMIC_ACQUIRE)
#undef _CMM_STORE_SHARED
#define _CMM_STORE_SHARED(x, v)                                                                    \
    __extension__({                                                                                \
        __typeof__(x) _lt_tsan_v = (v);                                                            \
        __atomic_store_n(&(x), _lt_tsan_v, __ATOMIC_RELEASE);                                      \
        _lt_tsan_v;                                                                                \
    })
#undef uatomic_xchg
#define uatomic_xchg(addr, v) __atomic_exchange_n((addr), (v), __ATOMIC_SEQ_CST)
#undef uatomic_cmpxchg
#define uatomic_cmpxchg(addr, old, _new)                                                           \
    __extension__({                                                                                \
        __typeof__(*(addr)) _lt_tsan_old = (old);                                                  \
        __atomic_compare_exchange_n((addr), &_lt_tsan_old, (_new), 0, __ATOMIC_SEQ_CST,            \
                                    __ATOMIC_SEQ_CST);                                             \
        _lt_tsan_old;                                                                              \
    })
#undef uatomic_add_return
#define uatomic_add_return(addr, v) __atomic_add_fetch((addr), (v), __ATOMIC_SEQ_CST)
#undef uatomic_add
#define uatomic_add(addr, v) ((void)__atomic_add_fetch((addr), (v), __ATOMIC_SEQ_CST))
#undef uatomic_inc
#define uatomic_inc(addr) uatomic_add((addr), 1)
#undef uatomic_dec
#define uatomic_dec(addr) uatomic_add((addr), -1)
#undef uatomic_and
#define uatomic_and(addr, v) ((void)__atomic_and_fetch((addr), (v), __ATOMIC_SEQ_CST))
#undef uatomic_or
#define uatomic_or(addr, v) ((void)__atomic_or_fetch((addr), (v), __ATOMIC_SEQ_CST))

#include <urcu.h>
#include <urcu/pointer.h>
#include <urcu/wfcqueue.h>

/* rcu_dereference is already an __atomic_load (consume) under C11. */
#undef _rcu_set_pointer
#define _rcu_set_pointer(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)
#undef _rcu_xchg_pointer
#define _rcu_xchg_pointer(p, v) __atomic_exchange_n((p), (v), __ATOMIC_ACQ_REL)

/* ---- the grace period as happens-before edges ---- */
void __tsan_acquire(void *addr);
void __tsan_release(void *addr);

/* The tokens: one definition per program (weak), their addresses are all
 * that matters.  lt_tsan_rcu_gp: what readers did before rcu_read_unlock;
 * lt_tsan_rcu_cb: what call_rcu callbacks did, for rcu_barrier. */
__attribute__((weak)) char lt_tsan_rcu_gp, lt_tsan_rcu_cb;

static inline void lt_tsan_rcu_read_unlock(void)
{
    __tsan_release(&lt_tsan_rcu_gp);
    urcu_memb_read_unlock();
}

static inline void lt_tsan_synchronize_rcu(void)
{
    urcu_memb_synchronize_rcu();
    __tsan_acquire(&lt_tsan_rcu_gp);
}

/* call_rcu's callback runs on liburcu's thread after a grace period; the
 * trampoline gives it the edges from its caller and from the readers. */
struct lt_tsan_rcu_cb {
    struct rcu_head rh;
    struct rcu_head *head;
    void (*fn)(struct rcu_head *);
};

static inline void lt_tsan_rcu_trampoline(struct rcu_head *rh)
{
    struct lt_tsan_rcu_cb *c = caa_container_of(rh, struct lt_tsan_rcu_cb, rh);
    __tsan_acquire(c);
    __tsan_acquire(&lt_tsan_rcu_gp);
    c->fn(c->head);
    free(c);
    __tsan_release(&lt_tsan_rcu_cb);
}

static inline void lt_tsan_call_rcu(struct rcu_head *head, void (*fn)(struct rcu_head *))
{
    /* Plain malloc: not counted by lt_alloc's test hooks.  A TSan build has
     * no other way to carry fn to the trampoline. */
    struct lt_tsan_rcu_cb *c = malloc(sizeof *c);
    if (!c) abort();
    c->head = head;
    c->fn = fn;
    __tsan_release(c); /* all the caller did before call_rcu, c's fields too */
    urcu_memb_call_rcu(&c->rh, lt_tsan_rcu_trampoline);
}

static inline void lt_tsan_rcu_barrier(void)
{
    urcu_memb_barrier();
    __tsan_acquire(&lt_tsan_rcu_cb);
}

#undef rcu_read_unlock
#define rcu_read_unlock lt_tsan_rcu_read_unlock
#undef synchronize_rcu
#define synchronize_rcu lt_tsan_synchronize_rcu
#undef call_rcu
#define call_rcu lt_tsan_call_rcu
#undef rcu_barrier
#define rcu_barrier lt_tsan_rcu_barrier

#endif
