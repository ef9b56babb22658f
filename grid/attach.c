/*
 * attach: the grid's machines onto a node's data thread (lattice_grid_attach).
 * ops/ calls none of grid/ by name; it offers registration points
 * (ops/ops_int.h) - a table of the control kinds a peer may send, a list
 * of what runs every tick, hooks for the data thread's events - and this
 * file is the one place that fills them.
 */
#include "grid_int.h"
#include "lattice/alloc.h"
#include "rebal_exec.h"

/* The control kinds grid/ serves (control.c dispatches them further);
 * ops/ serves CTL_REPLICATE, CTL_REPLICATE_TXN and CTL_CLEAN itself. */
static const int grid_kinds[] = {
    CTL_STATS,  CTL_META_GET,   CTL_CREATE,         CTL_DESTROY,      CTL_PART_SIZE,    CTL_DEMAND,
    CTL_SUPPLY, CTL_DIGEST,     CTL_RESET_LOST,     CTL_RESTART_REPORT, CTL_RESTART_PUSH, CTL_RESTART_LOAD,
};

/* control_serve as the kinds registry calls it (ops_kind_fn: the ops, the
 * request, its origin). */
static void serve_kind(void *d, const Latdata__Req *q, const void *o) { control_serve(d, q, o); }

/* lattice_ops_destroy, once the stores went: what the grid held besides,
 * and its state itself. */
static void grid_free(lattice_ops *d)
{
    if (!d->grid) return;
    restart_free(d);
    salvage_free(d);
    lt_free(d->grid);
    d->grid = NULL;
}

lattice_status lattice_grid_attach(lattice_ops *d, int64_t restart_wait_ms)
{
    d->grid = lt_calloc(1, sizeof *d->grid);
    if (!d->grid) return LATTICE_ERR_NOMEM;
    /* Every server: one without a data directory may coordinate a
     * restoring grid too (restart.c). */
    if (!d->client && restart_create(d, restart_wait_ms) != LATTICE_OK) {
        lt_free(d->grid);
        d->grid = NULL;
        return LATTICE_ERR_NOMEM;
    }
    for (size_t i = 0; i < sizeof grid_kinds / sizeof *grid_kinds; i++) ops_on_kind(d, grid_kinds[i], serve_kind);
    ops_on_tick(d, control_tick); /* the metadata exchange first, then rebalance */
    ops_on_tick(d, rebal_tick);
    d->grid_hooks = (ops_grid_hooks){
        .on_meta = control_meta_apply,
        .on_topology = control_on_topology,
        .run_call = control_run_call,
        .start_size = control_start_size,
        .refuses = restart_refuses,
        .keep_old = salvage_keep,
        .rejoined = restart_rejoined,
        .meta_fresh = control_meta_fresh,
        .pull_soon = control_pull_soon,
        .pulls_ended = control_pulls_ended,
        .cache_gone = rebal_cache_gone,
        .note_remove = rebal_note_remove,
        .keep_recovered = salvage_keep_recovered,
        .reloads_end = restart_reloads_end,
        .durable_tick = restart_tick_durable,
        .free_sessions = rebal_node_free,
        .free = grid_free,
    };
    return LATTICE_OK;
}
