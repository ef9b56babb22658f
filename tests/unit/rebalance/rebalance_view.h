/*
 * What the rebalance suite inspects inside rebalance/'s handles: a plan's
 * tasks, an applier's pending partitions, a demander's
 * supplier and current partition, a supplier's unacknowledged batches.  The
 * running node reads none of it (it executes plan_sessions and reacts to the
 * machines' outputs), so these views live with the tests.
 */
#ifndef REBALANCE_VIEW_H
#define REBALANCE_VIEW_H

#include "rebalance/rebalance.h"

const lattice_rebalance_task *rv_plan_tasks(const lattice_rebalance_plan *p, size_t *count);

/* Partitions begun and not yet complete. */
uint32_t rv_applier_pending(const lattice_rebalance_applier *a);
/* Current supplier index. */
uint32_t rv_demander_supplier(const lattice_rebalance_demander *d);
/* Partition now loading (the next to begin in the applier), or -1 when done. */
int64_t rv_demander_current(const lattice_rebalance_demander *d);
/* Batches sent and not yet acknowledged. */
uint32_t rv_supplier_in_flight(const lattice_rebalance_supplier *s);

#endif
