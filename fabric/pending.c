/*
 * pending: requests waiting for their answer (fabric.h).  A hash by id
 * for the answers, and one list, newest first, for the sweeps (deadlines,
 * a target that left).  Nodes are kept on a free list:
 * a request in flight costs no allocation here once the table has seen as
 * many at once.
 */
#include <stdint.h>

#include "lattice/alloc.h"
#include "fabric.h"

struct fab_pend_node {
    uint64_t id, deadline_ms;
    void *item;
    fab_pend_node *hnext;         /* the bucket's chain; the free list */
    fab_pend_node *next, *prev;   /* every entry, newest first */
};

struct fab_pending {
    fab_pend_node **buckets;
    size_t mask;
    fab_pend_node *all, *spare;
    size_t n;
    uint64_t next_id;
};

fab_pending *fab_pending_new(size_t buckets)
{
    if (!buckets || (buckets & (buckets - 1))) return NULL;
    fab_pending *t = lt_calloc(1, sizeof *t);
    if (!t) return NULL;
    t->buckets = lt_calloc(buckets, sizeof *t->buckets);
    if (!t->buckets) {
        lt_free(t);
        return NULL;
    }
    t->mask = buckets - 1;
    return t;
}

void fab_pending_free(fab_pending *t)
{
    if (!t) return;
    for (fab_pend_node *n = t->all, *next; n; n = next) {
        next = n->next;
        lt_free(n);
    }
    for (fab_pend_node *n = t->spare, *next; n; n = next) {
        next = n->hnext;
        lt_free(n);
    }
    lt_free(t->buckets);
    lt_free(t);
}

uint64_t fab_pending_add(fab_pending *t, void *item, uint64_t deadline_ms)
{
    fab_pend_node *n = t->spare;
    if (n) t->spare = n->hnext;
    else if (!(n = lt_malloc(sizeof *n))) return 0;
    n->id = ++t->next_id;
    n->deadline_ms = deadline_ms;
    n->item = item;
    fab_pend_node **b = &t->buckets[n->id & t->mask];
    n->hnext = *b;
    *b = n;
    n->next = t->all;
    n->prev = NULL;
    if (t->all) t->all->prev = n;
    t->all = n;
    t->n++;
    return n->id;
}

static fab_pend_node *find(const fab_pending *t, uint64_t id)
{
    for (fab_pend_node *n = t->buckets[id & t->mask]; n; n = n->hnext)
        if (n->id == id) return n;
    return NULL;
}

void *fab_pending_find(const fab_pending *t, uint64_t id)
{
    fab_pend_node *n = find(t, id);
    return n ? n->item : NULL;
}

void *fab_pending_take(fab_pending *t, uint64_t id)
{
    for (fab_pend_node **pp = &t->buckets[id & t->mask]; *pp; pp = &(*pp)->hnext) {
        if ((*pp)->id != id) continue;
        fab_pend_node *n = *pp;
        *pp = n->hnext;
        if (n->prev) n->prev->next = n->next;
        else t->all = n->next;
        if (n->next) n->next->prev = n->prev;
        t->n--;
        void *item = n->item;
        n->item = NULL;
        n->hnext = t->spare;
        t->spare = n;
        return item;
    }
    return NULL;
}

bool fab_pending_set_deadline(fab_pending *t, uint64_t id, uint64_t deadline_ms)
{
    fab_pend_node *n = find(t, id);
    if (!n) return false;
    n->deadline_ms = deadline_ms;
    return true;
}

size_t fab_pending_count(const fab_pending *t) { return t->n; }
const fab_pend_node *fab_pending_first(const fab_pending *t) { return t->all; }
const fab_pend_node *fab_pending_after(const fab_pend_node *n) { return n->next; }
void *fab_pend_item(const fab_pend_node *n) { return n->item; }

void fab_pending_expire(fab_pending *t, uint64_t now, fab_pend_gone_fn gone, fab_pend_end_fn end, void *arg)
{
    fab_pend_node *n = t->all;
    while (n) {
        fab_pend_node *next = n->next;
        if (now >= n->deadline_ms || (gone && gone(arg, n->item))) {
            void *item = fab_pending_take(t, n->id);
            end(arg, item);
        }
        n = next;
    }
}
