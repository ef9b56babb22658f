/*
 * api: lattice_op_submit (the entry of the operation path: ops/issue.c takes
 * it from there) and the blocking cache calls of lattice.h built on it: each
 * waits on a condition variable until the data thread's callback filled the
 * result.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "lattice/alloc.h"
#include "node_int.h"
#include "node_tx.h"
#include "grid/grid.h"
#include "ops/ops.h"

lattice_status lattice_op_submit(lattice_node *node, const lattice_op *ops, size_t n, lattice_op_fn fn, void *arg)
{
    if (!node) return LATTICE_ERR_INVAL;
    if (node_txexec_wants(ops, n)) return node_txexec_submit(node, ops, n, fn, arg, false);
    return node_metrics_submit(lattice_node_metrics_of(node), lattice_node_ops(node), ops, n, fn, arg, false);
}

lattice_status lattice_op_submit_inline(lattice_node *node, const lattice_op *ops, size_t n, lattice_op_fn fn,
                                        void *arg)
{
    if (!node) return LATTICE_ERR_INVAL;
    if (node_txexec_wants(ops, n)) return node_txexec_submit(node, ops, n, fn, arg, true);
    return node_metrics_submit(lattice_node_metrics_of(node), lattice_node_ops(node), ops, n, fn, arg, true);
}

void lattice_op_thread_enter(void) { lattice_ops_thread_enter(); }
void lattice_op_thread_exit(void) { lattice_ops_thread_exit(); }

/* ------------------------------------------------------------- blocking */

typedef struct waiter {
    node_latch latch;
    lattice_op_result *res; /* per op; values copied into vals */
    void **vals;
    void *ptr;              /* internal calls: the result struct */
} waiter;

static void waiter_fn(void *arg, size_t i, const lattice_op_result *r)
{
    waiter *w = arg;
    void *copy = NULL;
    if (r->value_len && w->vals) {
        copy = lt_malloc(r->value_len);
        if (copy) memcpy(copy, r->value, r->value_len);
    }
    /* Each callback owns its slot i; the latch's mutex orders the writes
     * before the waiter's reads. */
    w->res[i] = *r;
    if (w->vals) {
        w->vals[i] = copy;
        if (r->value_len && !copy) w->res[i].status = LATTICE_ERR_NOMEM;
    } else {
        w->ptr = (void *)r->value;
    }
    node_latch_count_down(&w->latch);
}

/* Runs ops[0..n) and waits; res/vals have n entries (vals may be NULL). */
static lattice_status run_ops(lattice_node *node, const lattice_op *ops, size_t n, lattice_op_result *res, void **vals)
{
    waiter w = {NODE_LATCH(n), res, vals, NULL};
    if (vals) memset(vals, 0, n * sizeof *vals);
    lattice_status st = lattice_op_submit(node, ops, n, waiter_fn, &w);
    if (st != LATTICE_OK) return st;
    node_latch_wait(&w.latch);
    return LATTICE_OK;
}

static lattice_status one(lattice_node *node, const lattice_op *op, void **value, size_t *value_len, int64_t *num,
                          unsigned *flags)
{
    lattice_op_result r;
    void *v = NULL;
    lattice_status st = run_ops(node, op, 1, &r, &v);
    if (st != LATTICE_OK) return st;
    if (value) *value = v;
    else lt_free(v);
    if (value_len) *value_len = r.value_len;
    if (num) *num = r.num;
    if (flags) *flags = r.flags;
    return r.status;
}

lattice_status lattice_cache_get(lattice_node *n, const char *cache, const void *key, size_t key_len, void **value,
                                 size_t *value_len)
{
    if (!value || !value_len) return LATTICE_ERR_INVAL;
    *value = NULL;
    *value_len = 0;
    lattice_op op = lattice_op_get(cache, key, key_len);
    lattice_status st = one(n, &op, value, value_len, NULL, NULL);
    if (st != LATTICE_OK) {
        lt_free(*value);
        *value = NULL;
        *value_len = 0;
    }
    return st;
}

lattice_status lattice_cache_put(lattice_node *n, const char *cache, const void *key, size_t key_len,
                                 const void *value, size_t value_len)
{
    lattice_op op = lattice_op_put(cache, key, key_len, value, value_len);
    return one(n, &op, NULL, NULL, NULL, NULL);
}

lattice_status lattice_cache_remove(lattice_node *n, const char *cache, const void *key, size_t key_len)
{
    lattice_op op = lattice_op_remove(cache, key, key_len);
    return one(n, &op, NULL, NULL, NULL, NULL);
}

lattice_status lattice_cache_put_if_absent(lattice_node *n, const char *cache, const void *key, size_t key_len,
                                           const void *value, size_t value_len)
{
    lattice_op op = lattice_op_put(cache, key, key_len, value, value_len);
    op.flags = LATTICE_OP_NX;
    return one(n, &op, NULL, NULL, NULL, NULL);
}

lattice_status lattice_cache_get_and_put(lattice_node *n, const char *cache, const void *key, size_t key_len,
                                         const void *value, size_t value_len, void **old, size_t *old_len)
{
    if (!old || !old_len) return LATTICE_ERR_INVAL;
    lattice_op op = lattice_op_put(cache, key, key_len, value, value_len);
    op.flags = LATTICE_OP_RETURN_OLD;
    unsigned fl = 0;
    void *v = NULL;
    size_t vl = 0;
    lattice_status st = one(n, &op, &v, &vl, NULL, &fl);
    if (!(fl & LATTICE_OP_R_FOUND) || st != LATTICE_OK) {
        lt_free(v);
        v = NULL;
        vl = 0;
    } else if (!v) {
        v = lt_malloc(1); /* an empty previous value is still a value */
        if (!v) st = LATTICE_ERR_NOMEM;
    }
    *old = v;
    *old_len = vl;
    return st;
}

lattice_status lattice_cache_replace(lattice_node *n, const char *cache, const void *key, size_t key_len,
                                     const void *value, size_t value_len)
{
    lattice_op op = lattice_op_put(cache, key, key_len, value, value_len);
    op.flags = LATTICE_OP_XX;
    return one(n, &op, NULL, NULL, NULL, NULL);
}

lattice_status lattice_cache_increment(lattice_node *n, const char *cache, const void *key, size_t key_len,
                                       int64_t delta, int64_t *result)
{
    lattice_op op = {LATTICE_OP_INCREMENT, 0, cache, key, key_len, NULL, 0, delta, 0, 0};
    int64_t v = 0;
    lattice_status st = one(n, &op, NULL, NULL, &v, NULL);
    if (result) *result = v;
    return st;
}

lattice_status lattice_cache_size(lattice_node *n, const char *cache, uint64_t *size)
{
    lattice_op op = {LATTICE_OP_SIZE, 0, cache, NULL, 0, NULL, 0, 0, 0, 0};
    int64_t v = 0;
    lattice_status st = one(n, &op, NULL, NULL, &v, NULL);
    if (size) *size = v > 0 ? (uint64_t)v : 0;
    return st;
}

static lattice_status batch(lattice_node *n, const char *cache, lattice_kv *kvs, size_t count, bool put)
{
    if (!kvs || !count) return LATTICE_ERR_INVAL;
    lattice_op *ops = lt_malloc(count * sizeof *ops);
    lattice_op_result *res = lt_malloc(count * sizeof *res);
    void **vals = put ? NULL : lt_malloc(count * sizeof *vals);
    lattice_status st = ops && res && (put || vals) ? LATTICE_OK : LATTICE_ERR_NOMEM;
    for (size_t i = 0; st == LATTICE_OK && i < count; i++)
        ops[i] = put ? lattice_op_put(cache, kvs[i].key, kvs[i].key_len, kvs[i].value, kvs[i].value_len)
                     : lattice_op_get(cache, kvs[i].key, kvs[i].key_len);
    if (st == LATTICE_OK) st = run_ops(n, ops, count, res, vals);
    lattice_status first = LATTICE_OK;
    for (size_t i = 0; st == LATTICE_OK && i < count; i++) {
        kvs[i].status = res[i].status;
        if (!put) {
            kvs[i].value = res[i].status == LATTICE_OK ? (vals[i] ? vals[i] : lt_malloc(1)) : NULL;
            kvs[i].value_len = res[i].status == LATTICE_OK ? res[i].value_len : 0;
            if (res[i].status != LATTICE_OK) lt_free(vals[i]);
        }
        if (first == LATTICE_OK && res[i].status != LATTICE_OK && !(!put && res[i].status == LATTICE_ERR_NOT_FOUND))
            first = res[i].status;
    }
    lt_free(ops);
    lt_free(res);
    lt_free(vals);
    return st != LATTICE_OK ? st : first;
}

lattice_status lattice_cache_put_all(lattice_node *n, const char *cache, lattice_kv *kvs, size_t count)
{
    return batch(n, cache, kvs, count, true);
}

lattice_status lattice_cache_get_all(lattice_node *n, const char *cache, lattice_kv *kvs, size_t count)
{
    return batch(n, cache, kvs, count, false);
}

static lattice_status call_num(lattice_node *n, lattice_grid_call_kind c, const char *arg, void **ptr, int64_t *num)
{
    lattice_ops *d = n ? lattice_node_ops(n) : NULL;
    if (!d) return LATTICE_ERR_STOPPED;
    lattice_op_result r;
    waiter w = {NODE_LATCH(1), &r, NULL, NULL};
    lattice_status st = lattice_grid_call(d, c, arg, waiter_fn, &w);
    if (st != LATTICE_OK) return st;
    node_latch_wait(&w.latch);
    if (ptr) *ptr = r.status == LATTICE_OK ? w.ptr : NULL;
    if (num) *num = r.num;
    return r.status;
}

static lattice_status call(lattice_node *n, lattice_grid_call_kind c, const char *arg, void **ptr)
{
    return call_num(n, c, arg, ptr, NULL);
}

lattice_status lattice_node_handover_pending(lattice_node *n, uint32_t *partitions)
{
    int64_t num = 0;
    lattice_status st = call_num(n, LATTICE_GRID_CALL_HANDOVER, NULL, NULL, &num);
    if (partitions) *partitions = st == LATTICE_OK && num > 0 ? (uint32_t)num : 0;
    return st;
}

lattice_status lattice_cache_create(lattice_node *n, const char *spec)
{
    lattice_cache_config cfg;
    char err[256];
    if (!spec || lattice_cache_config_parse_spec(&cfg, spec, err, sizeof err) != LATTICE_OK) return LATTICE_ERR_INVAL;
    char full[1100];
    lattice_cache_config_format(&cfg, LATTICE_CACHE_FORMAT_ALL, full, sizeof full);
    return call(n, LATTICE_GRID_CALL_CREATE, full, NULL);
}

lattice_status lattice_cache_destroy(lattice_node *n, const char *name)
{
    if (!name || !lattice_cache_config_name_valid(name, NULL, 0)) return LATTICE_ERR_INVAL;
    return call(n, LATTICE_GRID_CALL_DESTROY, name, NULL);
}

lattice_status lattice_cache_reset_lost(lattice_node *n, const char *name, uint32_t *partitions)
{
    if (partitions) *partitions = 0;
    if (!name || !lattice_cache_config_name_valid(name, NULL, 0)) return LATTICE_ERR_INVAL;
    int64_t num = 0;
    lattice_status st = call_num(n, LATTICE_GRID_CALL_RESET_LOST, name, NULL, &num);
    if (partitions && st == LATTICE_OK) *partitions = (uint32_t)num;
    return st;
}

/* The caches of sr (freed here) with every server's figures, as
 * lattice_caches_info returns them. */
static lattice_status caches_from_stats(lattice_grid_stats *sr, lattice_cache_info **out, size_t *count)
{
    lattice_cache_info *ci = lt_calloc(sr->n_caches ? sr->n_caches : 1, sizeof *ci);
    if (!ci) {
        lattice_grid_stats_free(sr);
        return LATTICE_ERR_NOMEM;
    }
    for (size_t i = 0; i < sr->n_caches; i++) {
        const lattice_cache_config *c = &sr->cfgs[i];
        lattice_cache_info *x = &ci[i];
        snprintf(x->name, sizeof x->name, "%s", c->name);
        lattice_cache_config_format(c, LATTICE_CACHE_FORMAT_ALL, x->spec, sizeof x->spec);
        snprintf(x->mode, sizeof x->mode, "%s", lattice_cache_mode_name(c->mode));
        snprintf(x->sync, sizeof x->sync, "%s", lattice_cache_sync_name(c->sync));
        x->partitions = c->partitions;
        x->backups = c->backups;
        x->read_from_backup = c->read_from_backup;
        x->nodes = lt_calloc(sr->n_nodes ? sr->n_nodes : 1, sizeof *x->nodes);
        for (size_t k = 0; x->nodes && k < sr->n_nodes; k++)
            for (size_t j = 0; j < sr->nodes[k].n; j++) {
                if (strcmp(sr->nodes[k].names[j], c->name) != 0) continue;
                x->nodes[x->n_nodes++] = sr->nodes[k].caches[j];
                x->size += sr->nodes[k].caches[j].primary_entries;
            }
    }
    *count = sr->n_caches;
    *out = ci;
    lattice_grid_stats_free(sr);
    return LATTICE_OK;
}

lattice_status lattice_caches_info(lattice_node *n, lattice_cache_info **out, size_t *count)
{
    if (!out || !count) return LATTICE_ERR_INVAL;
    *out = NULL;
    *count = 0;
    lattice_grid_stats *sr = NULL;
    lattice_status st = call(n, LATTICE_GRID_CALL_STATS, NULL, (void **)&sr);
    if (st != LATTICE_OK || !sr) return st != LATTICE_OK ? st : LATTICE_ERR_NOMEM;
    return caches_from_stats(sr, out, count);
}

void lattice_caches_info_free(lattice_cache_info *c, size_t count)
{
    for (size_t i = 0; c && i < count; i++) lt_free(c[i].nodes);
    lt_free(c);
}

lattice_status lattice_cache_partitions(lattice_node *n, const char *cache, lattice_partitions_info **out)
{
    if (!out) return LATTICE_ERR_INVAL;
    *out = NULL;
    return call(n, LATTICE_GRID_CALL_PARTITIONS, cache ? cache : "default", (void **)out);
}

static lattice_status digests_out(lattice_grid_digests *dr, lattice_partition_digest **out, size_t *count)
{
    *out = dr->d;
    *count = dr->n;
    lt_free(dr);
    return LATTICE_OK;
}

lattice_status lattice_cache_digests(lattice_node *n, const char *cache, lattice_partition_digest **out,
                                     size_t *count)
{
    if (!out || !count) return LATTICE_ERR_INVAL;
    *out = NULL;
    *count = 0;
    lattice_grid_digests *dr = NULL;
    lattice_status st = call(n, LATTICE_GRID_CALL_DIGESTS, cache ? cache : "default", (void **)&dr);
    if (st != LATTICE_OK || !dr) return st != LATTICE_OK ? st : LATTICE_ERR_NOMEM;
    return digests_out(dr, out, count);
}

/* ------------------------------------------- the same, by inspection */

#define INSPECT_MAX_SILENT 64

/* What the inspection calls ask with: x's topology, the members x saw
 * silent (ids into silent[], borrowed from x) and c's secret (read into
 * *secret, node_forget_secret it after). */
static lattice_status inspect_setup(const lattice_config *c, const lattice_inspection *x, int timeout_ms,
                                    lattice_grid_inspect *in, const char **silent, uint8_t **secret)
{
    memset(in, 0, sizeof *in);
    *secret = NULL;
    if (!c || !x) return LATTICE_ERR_INVAL;
    in->topology = lattice_inspection_topology(x);
    in->timeout_ms = timeout_ms;
    in->silent = silent;
    for (size_t i = 0; i < lattice_topology_size(in->topology) && in->n_silent < INSPECT_MAX_SILENT; i++) {
        const lattice_member *m = lattice_topology_member(in->topology, i);
        lattice_member_state ms;
        if (lattice_inspection_member(x, m->id, &ms) == LATTICE_OK && !strcmp(ms.state, "silent"))
            silent[in->n_silent++] = m->id;
    }
    lattice_status st = c->secret_file ? node_read_secret(c->secret_file, secret, &in->secret_len) : LATTICE_OK;
    in->secret = *secret;
    return st;
}

lattice_status lattice_inspect_caches_info(const lattice_config *c, const lattice_inspection *x, int timeout_ms,
                                           lattice_cache_info **out, size_t *count)
{
    if (!out || !count) return LATTICE_ERR_INVAL;
    *out = NULL;
    *count = 0;
    lattice_grid_inspect in = {0};
    const char *silent[INSPECT_MAX_SILENT];
    uint8_t *secret;
    lattice_status st = inspect_setup(c, x, timeout_ms, &in, silent, &secret);
    lattice_grid_stats *sr = NULL;
    if (st == LATTICE_OK) st = lattice_grid_inspect_stats(&in, &sr);
    node_forget_secret(secret, in.secret_len);
    return st == LATTICE_OK ? caches_from_stats(sr, out, count) : st;
}

lattice_status lattice_inspect_partitions(const lattice_config *c, const lattice_inspection *x, const char *cache,
                                          int timeout_ms, lattice_partitions_info **out)
{
    if (!out) return LATTICE_ERR_INVAL;
    *out = NULL;
    lattice_grid_inspect in = {0};
    const char *silent[INSPECT_MAX_SILENT];
    uint8_t *secret;
    lattice_status st = inspect_setup(c, x, timeout_ms, &in, silent, &secret);
    if (st == LATTICE_OK) st = lattice_grid_inspect_partitions(&in, cache ? cache : "default", out);
    node_forget_secret(secret, in.secret_len);
    return st;
}

lattice_status lattice_inspect_digests(const lattice_config *c, const lattice_inspection *x, const char *cache,
                                       int timeout_ms, lattice_partition_digest **out, size_t *count)
{
    if (!out || !count) return LATTICE_ERR_INVAL;
    *out = NULL;
    *count = 0;
    lattice_grid_inspect in = {0};
    const char *silent[INSPECT_MAX_SILENT];
    uint8_t *secret;
    lattice_status st = inspect_setup(c, x, timeout_ms, &in, silent, &secret);
    lattice_grid_digests *dr = NULL;
    if (st == LATTICE_OK) st = lattice_grid_inspect_digests(&in, cache ? cache : "default", &dr);
    node_forget_secret(secret, in.secret_len);
    return st == LATTICE_OK ? digests_out(dr, out, count) : st;
}

void lattice_partition_digests_free(lattice_partition_digest *d) { lt_free(d); }

void lattice_partitions_info_free(lattice_partitions_info *p)
{
    if (!p) return;
    lt_free(p->n_owners);
    lt_free(p->owners);
    lt_free(p);
}

/* CLUSTER KEYSLOT and the RESP endpoint's slot map use partition/'s hash:
 * the public slot count must be partition/'s. */
_Static_assert(LATTICE_KEY_SLOTS == LATTICE_PARTITION_SLOTS, "lattice.h's slot count is partition/'s");

uint16_t lattice_key_slot(const void *key, size_t len) { return lattice_partition_key_slot(key, len); }

uint32_t lattice_slot_partition(uint32_t slot, uint32_t partitions)
{
    return lattice_partition_of_slot(slot, partitions);
}
