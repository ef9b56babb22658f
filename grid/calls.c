/*
 * calls: the node API's internal calls on the data thread (lattice_grid_call)
 * - stats, partitions, digests, cache create/destroy and reset-lost (the
 * coordinator writes the metadata; another node asks it), and the handover
 * count a graceful stop waits on.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "lattice/alloc.h"
#include "lattice/log.h"
#include "grid_int.h"
#include "ops/ops_int.h"
#include "rebal_exec.h"

lattice_status calls_coord_write(lattice_ops *d, int call, const char *arg, int64_t *num)
{
    if (ops_no_quorum(d, NULL)) return LATTICE_ERR_NO_QUORUM; /* the registry is the quorum side's */
    uint32_t lost = 0;
    lattice_status st = call == LATTICE_GRID_CALL_CREATE    ? lattice_meta_add(d->meta, arg)
                        : call == LATTICE_GRID_CALL_DESTROY ? lattice_meta_remove(d->meta, arg)
                                                           : lattice_meta_reset_lost(d->meta, arg, &lost);
    if (num) *num = lost;
    if (st == LATTICE_OK) {
        wal_attach(d); /* a new cache's store is logged from its first write */
        control_push_meta(d);
        if (lost) rebal_on_change(d); /* this node may be an owner-to-be too */
    }
    return st;
}

static int ctl_of_call(int call)
{
    return call == LATTICE_GRID_CALL_CREATE ? CTL_CREATE : call == LATTICE_GRID_CALL_DESTROY ? CTL_DESTROY : CTL_RESET_LOST;
}

int calls_of_ctl(int kind)
{
    return kind == CTL_CREATE ? LATTICE_GRID_CALL_CREATE : kind == CTL_DESTROY ? LATTICE_GRID_CALL_DESTROY
                                                                                  : LATTICE_GRID_CALL_RESET_LOST;
}

lattice_status control_partitions_info(const lattice_meta *meta, const char *cache, uint32_t live,
                                      uint64_t major, uint64_t minor, lattice_partitions_info **out)
{
    *out = NULL;
    lattice_meta_cache *c = lattice_meta_cache_of(meta, cache);
    if (!c) return lattice_meta_valid(meta) ? LATTICE_ERR_NO_CACHE : LATTICE_ERR_AGAIN;
    lattice_partitions_info *pi = lt_calloc(1, sizeof *pi);
    uint32_t copies = c->aff ? lattice_affinity_copies(c->aff) : 0;
    if (c->ideal && lattice_affinity_copies(c->ideal) > copies) copies = lattice_affinity_copies(c->ideal);
    if (copies > LATTICE_CACHE_MAX_BACKUPS + 1) copies = LATTICE_CACHE_MAX_BACKUPS + 1;
    uint32_t maxo = 2 * copies; /* serving owners, then MOVING ones */
    if (pi) {
        pi->n_owners = lt_calloc(c->cfg.partitions, sizeof *pi->n_owners);
        pi->owners = lt_calloc((size_t)c->cfg.partitions * (maxo ? maxo : 1), sizeof *pi->owners);
    }
    if (!pi || !pi->n_owners || !pi->owners) {
        if (pi) {
            lt_free(pi->n_owners);
            lt_free(pi->owners);
            lt_free(pi);
        }
        return LATTICE_ERR_NOMEM;
    }
    snprintf(pi->cache, sizeof pi->cache, "%s", c->cfg.name);
    pi->major = major;
    pi->minor = minor;
    pi->partitions = c->cfg.partitions;
    pi->max_owners = maxo;
    uint32_t wanted = c->cfg.mode == LATTICE_CACHE_REPLICATED ? live : c->cfg.backups + 1;
    pi->copies_wanted = wanted < live ? wanted : live;
    for (uint32_t p = 0; p < c->cfg.partitions; p++) {
        lattice_meta_member *own[2 * (LATTICE_CACHE_MAX_BACKUPS + 1)];
        size_t ns = lattice_meta_serving_owners(c, p, own, copies);
        size_t n = ns + lattice_meta_moving_owners(c, p, own + ns, copies);
        pi->n_owners[p] = (uint32_t)n;
        for (size_t i = 0; i < n; i++) {
            lattice_partition_owner *po = &pi->owners[(size_t)p * maxo + i];
            snprintf(po->node, sizeof po->node, "%s", own[i]->id);
            snprintf(po->consistent_id, sizeof po->consistent_id, "%s", own[i]->cid);
            po->primary = i == 0 && ns > 0;
            po->state = lattice_partition_state_name(i < ns ? LATTICE_PART_OWNING : LATTICE_PART_MOVING);
        }
    }
    *out = pi;
    return LATTICE_OK;
}

static void partitions_call(lattice_ops *d, opx *o)
{
    lattice_op_result r = {0};
    lattice_partitions_info *pi = NULL;
    r.status = control_partitions_info(d->meta, o->data, (uint32_t)base_live_servers(d), d->major, d->minor, &pi);
    if (r.status == LATTICE_ERR_AGAIN) {
        retry_later(d, o, LATTICE_ERR_TIMEOUT);
        return;
    }
    r.value = pi;
    r.value_len = pi ? sizeof *pi : 0;
    chan_complete_local(d, o, &r);
}

/* The partitions whose only serving copy is this node's while another live
 * server holds a MOVING copy: a rebalance towards it is under way or done
 * and waits for the base switch.  Leaving now would leave them LOST though
 * a copy is (almost) complete elsewhere; a graceful stop waits for the
 * switch instead (node/main.c).  A partition nobody else loads is not
 * counted: waiting would not save it. */
static int64_t handover_pending(lattice_ops *d)
{
    int64_t n = 0;
    for (size_t i = 0; lattice_meta_valid(d->meta) && i < lattice_meta_cache_count(d->meta); i++) {
        const lattice_meta_cache *c = lattice_meta_cache_at(d->meta, i);
        for (uint32_t p = 0; c->store && p < c->cfg.partitions; p++) {
            lattice_meta_member *own[LATTICE_CACHE_MAX_BACKUPS + 1], *mov[LATTICE_CACHE_MAX_BACKUPS + 1];
            if (lattice_meta_serving_owners(c, p, own, LATTICE_CACHE_MAX_BACKUPS + 1) != 1 || !own[0]->self) continue;
            size_t nm = lattice_meta_moving_owners(c, p, mov, LATTICE_CACHE_MAX_BACKUPS + 1);
            bool elsewhere = false;
            for (size_t k = 0; k < nm && !elsewhere; k++) elsewhere = !mov[k]->self && mov[k]->server;
            n += elsewhere;
        }
    }
    return n;
}

void control_run_call(lattice_ops *d, opx *o)
{
    lattice_op_result r = {0};
    if (o->call == LATTICE_GRID_CALL_HANDOVER) {
        r.num = handover_pending(d);
        chan_complete_local(d, o, &r);
        return;
    }
    if (!lattice_meta_valid(d->meta)) {
        retry_later(d, o, LATTICE_ERR_TIMEOUT);
        return;
    }
    switch (o->call) {
    case LATTICE_GRID_CALL_STATS: report_start_stats(d, o); return;
    case LATTICE_GRID_CALL_PARTITIONS: partitions_call(d, o); return;
    case LATTICE_GRID_CALL_DIGESTS: rebal_start_digests(d, o); return;
    case LATTICE_GRID_CALL_CREATE:
    case LATTICE_GRID_CALL_DESTROY:
    case LATTICE_GRID_CALL_RESET_LOST:
        if (lattice_meta_is_coordinator(d->meta)) {
            r.status = calls_coord_write(d, o->call, o->data, &r.num);
            chan_complete_local(d, o, &r);
        } else {
            control_send_ctl(d, ctl_of_call(o->call), NULL, o->data, o);
        }
        return;
    default: r.status = LATTICE_ERR_INVAL; chan_complete_local(d, o, &r);
    }
}

lattice_status lattice_grid_call(lattice_ops *d, lattice_grid_call_kind call, const char *arg, lattice_op_fn fn,
                                 void *farg)
{
    size_t al = arg ? strlen(arg) : 0;
    opx *o = lt_calloc(1, sizeof *o + al + 1);
    if (!o) return LATTICE_ERR_NOMEM;
    if (al) memcpy(o->data, arg, al);
    o->call = (int)call;
    o->fn = fn;
    o->arg = farg;
    o->deadline_ms = lt_mono_ms() + (uint64_t)d->op_timeout_ms;
    lattice_status st = chan_enqueue(d, o);
    if (st != LATTICE_OK) opx_free(o);
    return st;
}
