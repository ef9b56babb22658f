/*
 * The rebalance planner: a pure function of the facts every node has after
 * a topology exchange (assignments, reported copy states and counters, live
 * nodes).  Everything that could depend on input order is decided by
 * consistent id, so every node computes the same plan.  Rules: rebalance.h.
 */
#include <stdlib.h>
#include <string.h>

#include "lattice/alloc.h"
#include "rebalance/rebalance.h"
#include "rebalance_int.h"


struct ctx {
    const lattice_rebalance_plan_input *in;
    uint32_t parts;
    uint32_t *by_id;     /* node indexes sorted by consistent id */
    uint32_t *rank;      /* rank[node] = position in by_id */
    int32_t *ideal_map;  /* ideal node index -> input node index, -1 unknown */
    int32_t *serv_map;   /* serving node index -> input node index */
    uint32_t *load;      /* tasks per supplier so far (SPREAD) */
};

static int cmp_idx(const void *a, const void *b, void *ids)
{
    const char *const *id = ids;
    return strcmp(id[*(const uint32_t *)a], id[*(const uint32_t *)b]);
}

static int grow(void **arr, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap) return 0;
    size_t nc = *cap ? *cap * 2 : 64;
    while (nc < need) nc *= 2;
    void *p = lt_realloc(*arr, nc * elem);
    if (!p) return -1;
    *arr = p;
    *cap = nc;
    return 0;
}

static int32_t find_id(const struct ctx *c, const char *id)
{
    size_t lo = 0, hi = c->in->node_count;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int r = strcmp(c->in->nodes[c->by_id[mid]], id);
        if (r == 0) return (int32_t)c->by_id[mid];
        if (r < 0) lo = mid + 1;
        else hi = mid;
    }
    return -1;
}

static int32_t *map_nodes(const struct ctx *c, const lattice_affinity *a)
{
    uint32_t n = lattice_affinity_node_count(a);
    int32_t *m = lt_malloc((n ? n : 1) * sizeof *m);
    if (!m) return NULL;
    for (uint32_t i = 0; i < n; i++) m[i] = find_id(c, lattice_affinity_node_id(a, i));
    return m;
}

static const lattice_rebalance_copy *copy_of(const struct ctx *c, uint32_t node, uint32_t p)
{
    return &c->in->copies[(size_t)node * c->parts + p];
}

static int validate(const lattice_rebalance_plan_input *in)
{
    if (!in || !in->ideal || !in->nodes || !in->live || !in->copies) return -1;
    if (in->node_count > LATTICE_AFFINITY_MAX_NODES * 4u) return -1;
    if (in->serving &&
        lattice_affinity_partitions(in->serving) != lattice_affinity_partitions(in->ideal))
        return -1;
    for (size_t i = 0; i < in->node_count; i++)
        if (!in->nodes[i] || !in->nodes[i][0]) return -1;
    return 0;
}

/* Orders the best copies of p (already in consistent-id order) by policy. */
static void order_suppliers(struct ctx *c, uint32_t p, uint32_t *cand, uint32_t n)
{
    uint32_t pick = 0;
    if (c->in->policy == LATTICE_REBALANCE_SPREAD) {
        for (uint32_t i = 1; i < n; i++)
            if (c->load[cand[i]] < c->load[cand[pick]]) pick = i;
    } else if (c->in->serving) {
        int32_t prim = lattice_affinity_primary(c->in->serving, p);
        int32_t node = prim >= 0 ? c->serv_map[prim] : -1;
        for (uint32_t i = 0; i < n; i++)
            if ((int32_t)cand[i] == node) pick = i;
    }
    uint32_t chosen = cand[pick];
    memmove(cand + 1, cand, pick * sizeof *cand);
    cand[0] = chosen;
}

static int plan_partition(struct ctx *c, lattice_rebalance_plan *pl, uint32_t p, uint32_t *cand)
{
    const lattice_rebalance_plan_input *in = c->in;
    uint64_t best = 0;
    int any = 0;
    for (size_t i = 0; i < in->node_count; i++) {
        const lattice_rebalance_copy *cp = copy_of(c, (uint32_t)i, p);
        if (in->live[i] && cp->state == LATTICE_PART_OWNING && (!any || cp->counter > best)) {
            best = cp->counter;
            any = 1;
        }
    }
    if (!any) {
        if (grow((void **)&pl->lost, &pl->cap_lost, pl->nlost + 1, sizeof *pl->lost)) return -1;
        pl->lost[pl->nlost++] = p;
        return 0;
    }
    uint32_t ncand = 0;
    for (size_t r = 0; r < in->node_count; r++) {
        uint32_t i = c->by_id[r];
        const lattice_rebalance_copy *cp = copy_of(c, i, p);
        if (in->live[i] && cp->state == LATTICE_PART_OWNING && cp->counter == best)
            cand[ncand++] = i;
    }
    order_suppliers(c, p, cand, ncand);

    uint32_t nown;
    const uint16_t *own = lattice_affinity_owners(in->ideal, p, &nown);
    /* Demanders in consistent-id order so the task list is input-order free. */
    uint32_t dem[nown ? nown : 1], ndem = 0;
    for (uint32_t k = 0; k < nown; k++) {
        int32_t d = c->ideal_map[own[k]];
        if (d < 0 || !in->live[d]) continue;
        const lattice_rebalance_copy *cp = copy_of(c, (uint32_t)d, p);
        if (cp->state == LATTICE_PART_OWNING && cp->counter == best) continue;
        uint32_t j = ndem++;
        while (j > 0 && c->rank[dem[j - 1]] > c->rank[d]) {
            dem[j] = dem[j - 1];
            j--;
        }
        dem[j] = (uint32_t)d;
    }
    for (uint32_t k = 0; k < ndem; k++) {
        if (grow((void **)&pl->tasks, &pl->cap_tasks, pl->ntasks + 1, sizeof *pl->tasks) ||
            grow((void **)&pl->suppliers, &pl->cap_sup, pl->nsup + ncand, sizeof *pl->suppliers))
            return -1;
        lattice_rebalance_task *t = &pl->tasks[pl->ntasks++];
        *t = (lattice_rebalance_task){.partition = p, .demander = dem[k], .supplier = cand[0],
                                      .counter = best, .supplier_first = (uint32_t)pl->nsup,
                                      .supplier_count = ncand};
        memcpy(pl->suppliers + pl->nsup, cand, ncand * sizeof *cand);
        pl->nsup += ncand;
        c->load[cand[0]]++;
    }
    return 0;
}

static void ctx_free(struct ctx *c)
{
    lt_free(c->by_id);
    lt_free(c->rank);
    lt_free(c->ideal_map);
    lt_free(c->serv_map);
    lt_free(c->load);
}

lattice_status lattice_rebalance_plan_compute(const lattice_rebalance_plan_input *in,
                                              lattice_rebalance_plan **out)
{
    if (!out || validate(in)) return LATTICE_ERR_INVAL;
    struct ctx c = {.in = in, .parts = lattice_affinity_partitions(in->ideal)};
    size_t nn = in->node_count ? in->node_count : 1;
    c.by_id = lt_malloc(nn * sizeof *c.by_id);
    c.rank = lt_malloc(nn * sizeof *c.rank);
    c.load = lt_calloc(nn, sizeof *c.load);
    if (!c.by_id || !c.rank || !c.load) goto nomem;
    for (size_t i = 0; i < in->node_count; i++) c.by_id[i] = (uint32_t)i;
    qsort_r(c.by_id, in->node_count, sizeof *c.by_id, cmp_idx, (void *)in->nodes);
    for (size_t i = 0; i < in->node_count; i++) {
        if (i > 0 && !strcmp(in->nodes[c.by_id[i]], in->nodes[c.by_id[i - 1]])) {
            ctx_free(&c);
            return LATTICE_ERR_INVAL;
        }
        c.rank[c.by_id[i]] = (uint32_t)i;
    }
    c.ideal_map = map_nodes(&c, in->ideal);
    if (!c.ideal_map) goto nomem;
    if (in->serving && !(c.serv_map = map_nodes(&c, in->serving))) goto nomem;

    lattice_rebalance_plan *pl = lt_calloc(1, sizeof *pl);
    uint32_t *cand = lt_malloc(nn * sizeof *cand);
    if (!pl || !cand) {
        lt_free(pl);
        lt_free(cand);
        goto nomem;
    }
    for (uint32_t p = 0; p < c.parts; p++) {
        if (plan_partition(&c, pl, p, cand)) {
            lt_free(cand);
            lattice_rebalance_plan_free(pl);
            goto nomem;
        }
    }
    lt_free(cand);
    pl->rank = c.rank; /* kept: sessions order demanders by consistent id */
    pl->nnodes = in->node_count;
    c.rank = NULL;
    ctx_free(&c);
    *out = pl;
    return LATTICE_OK;
nomem:
    ctx_free(&c);
    return LATTICE_ERR_NOMEM;
}

void lattice_rebalance_plan_free(lattice_rebalance_plan *p)
{
    if (!p) return;
    lt_free(p->rank);
    lt_free(p->tasks);
    lt_free(p->suppliers);
    lt_free(p->lost);
    lt_free(p);
}

const uint32_t *lattice_rebalance_plan_suppliers(const lattice_rebalance_plan *p, size_t *count)
{
    *count = p->nsup;
    return p->suppliers;
}

const uint32_t *lattice_rebalance_plan_lost(const lattice_rebalance_plan *p, size_t *count)
{
    *count = p->nlost;
    return p->lost;
}

/* Orders task indexes by (demander rank, supplier list, partition). */
static int cmp_task(const void *a, const void *b, void *arg)
{
    const lattice_rebalance_plan *p = arg;
    const lattice_rebalance_task *x = &p->tasks[*(const uint32_t *)a];
    const lattice_rebalance_task *y = &p->tasks[*(const uint32_t *)b];
    if (x->demander != y->demander)
        return p->rank[x->demander] < p->rank[y->demander] ? -1 : 1;
    uint32_t n = x->supplier_count < y->supplier_count ? x->supplier_count : y->supplier_count;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t sx = p->suppliers[x->supplier_first + i], sy = p->suppliers[y->supplier_first + i];
        if (sx != sy) return p->rank[sx] < p->rank[sy] ? -1 : 1;
    }
    if (x->supplier_count != y->supplier_count) return x->supplier_count < y->supplier_count ? -1 : 1;
    return (x->partition > y->partition) - (x->partition < y->partition);
}

static int same_session(const lattice_rebalance_plan *p, const lattice_rebalance_task *x,
                        const lattice_rebalance_task *y)
{
    return x->demander == y->demander && x->supplier_count == y->supplier_count &&
           !memcmp(p->suppliers + x->supplier_first, p->suppliers + y->supplier_first,
                   x->supplier_count * sizeof *p->suppliers);
}

lattice_status lattice_rebalance_plan_sessions(const lattice_rebalance_plan *p,
                                               lattice_rebalance_session_spec **specs,
                                               size_t *count, uint32_t **partitions)
{
    if (!p || !specs || !count || !partitions) return LATTICE_ERR_INVAL;
    *specs = NULL;
    *partitions = NULL;
    *count = 0;
    if (p->ntasks == 0) return LATTICE_OK;
    uint32_t *idx = lt_malloc(p->ntasks * sizeof *idx);
    uint32_t *parts = lt_malloc(p->ntasks * sizeof *parts);
    lattice_rebalance_session_spec *sp = lt_malloc(p->ntasks * sizeof *sp);
    if (!idx || !parts || !sp) {
        lt_free(idx);
        lt_free(parts);
        lt_free(sp);
        return LATTICE_ERR_NOMEM;
    }
    for (size_t i = 0; i < p->ntasks; i++) idx[i] = (uint32_t)i;
    qsort_r(idx, p->ntasks, sizeof *idx, cmp_task, (void *)p);
    size_t n = 0;
    for (size_t i = 0; i < p->ntasks; i++) {
        const lattice_rebalance_task *t = &p->tasks[idx[i]];
        if (i == 0 || !same_session(p, &p->tasks[idx[i - 1]], t))
            sp[n++] = (lattice_rebalance_session_spec){t->demander, t->supplier_first,
                                                       t->supplier_count, (uint32_t)i, 0};
        sp[n - 1].partition_count++;
        parts[i] = t->partition;
    }
    lt_free(idx);
    *specs = sp;
    *count = n;
    *partitions = parts;
    return LATTICE_OK;
}
