/* The suite's views of rebalance/'s handles (rebalance_view.h). */
#include "rebalance_view.h"

#include "rebalance_int.h"

const lattice_rebalance_task *rv_plan_tasks(const lattice_rebalance_plan *p, size_t *count)
{
    *count = p->ntasks;
    return p->tasks;
}

uint32_t rv_applier_pending(const lattice_rebalance_applier *a) { return a->pending; }

uint32_t rv_demander_supplier(const lattice_rebalance_demander *d) { return d->sup; }

int64_t rv_demander_current(const lattice_rebalance_demander *d)
{
    return d->cur < d->n ? (int64_t)d->parts[d->cur] : -1;
}

uint32_t rv_supplier_in_flight(const lattice_rebalance_supplier *s) { return s->nkept; }
