/* Views of an assignment for tests and the partition benchmark (affinity_view.h). */
#include "affinity_view.h"

#include <string.h>

#include "lattice/alloc.h"

uint32_t av_node_partitions(const lattice_affinity *a, uint32_t node,
                                          unsigned roles, uint32_t *out)
{
    uint32_t n = 0;
    for (uint32_t p = 0; node < lattice_affinity_node_count(a) && p < lattice_affinity_partitions(a); p++) {
        int r = lattice_affinity_role(a, p, node);
        if (r < 0) continue;
        if (!(roles & (r == 0 ? AV_ROLE_PRIMARY : AV_ROLE_BACKUP)))
            continue;
        if (out) out[n] = p;
        n++;
    }
    return n;
}

static bool same_owners(const lattice_affinity *a, uint32_t p, uint32_t q)
{
    uint32_t n;
    const uint16_t *op = lattice_affinity_owners(a, p, &n), *oq = lattice_affinity_owners(a, q, NULL);
    return p == q || n == 0 || memcmp(op, oq, n * sizeof *op) == 0;
}

lattice_status av_slot_ranges(const lattice_affinity *a, av_slot_range **ranges,
                                            size_t *count)
{
    if (!a || !ranges || !count) return LATTICE_ERR_INVAL;
    *ranges = NULL;
    *count = 0;
    uint32_t parts = lattice_affinity_partitions(a);
#define P(s) lattice_partition_of_slot((s), parts)
    /* first pass counts the runs, so one allocation of the exact size */
    size_t n = 1;
    for (uint32_t s = 1; s < LATTICE_PARTITION_SLOTS; s++)
        n += !same_owners(a, P(s - 1), P(s));
    av_slot_range *r = lt_malloc(n * sizeof *r);
    if (!r) return LATTICE_ERR_NOMEM;
    size_t k = 0;
    r[0] = (av_slot_range){0, 0, 0};
    for (uint32_t s = 1; s < LATTICE_PARTITION_SLOTS; s++) {
        if (same_owners(a, P(s - 1), P(s))) {
            r[k].last = (uint16_t)s;
        } else {
            k++;
            r[k] = (av_slot_range){(uint16_t)s, (uint16_t)s, P(s)};
        }
    }
#undef P
    *ranges = r;
    *count = n;
    return LATTICE_OK;
}

/* map[i] = index in `to` of from's node i, or -1.  Both lists are sorted. */
static void map_nodes(const lattice_affinity *from, const lattice_affinity *to, int32_t *map)
{
    uint32_t j = 0;
    for (uint32_t i = 0; i < lattice_affinity_node_count(from); i++) {
        while (j < lattice_affinity_node_count(to) && strcmp(lattice_affinity_node_id(to, j), lattice_affinity_node_id(from, i)) < 0) j++;
        map[i] = j < lattice_affinity_node_count(to) && strcmp(lattice_affinity_node_id(to, j), lattice_affinity_node_id(from, i)) == 0 ? (int32_t)j : -1;
    }
}

static uint32_t compare_owners(const lattice_affinity *from, const lattice_affinity *to,
                               const int32_t *map, uint32_t p)
{
    uint32_t nf, nt;
    const uint16_t *of = lattice_affinity_owners(from, p, &nf);
    const uint16_t *ot = lattice_affinity_owners(to, p, &nt);
    uint32_t flags = 0;
    int32_t pf = nf ? map[of[0]] : -1, pt = nt ? (int32_t)ot[0] : -1;
    if (pf != pt || (nf == 0) != (nt == 0)) flags |= AV_PRIMARY_CHANGED;
    bool same_set = nf == nt, same_seq = nf == nt;
    for (uint32_t i = 0; i < nf && same_set; i++) {
        bool found = false;
        for (uint32_t j = 0; j < nt && !found; j++) found = map[of[i]] == (int32_t)ot[j];
        same_set = found;
        if (same_seq) same_seq = map[of[i]] == (int32_t)ot[i];
    }
    if (!same_set)
        flags |= AV_OWNERS_CHANGED;
    else if (!same_seq && !(flags & AV_PRIMARY_CHANGED))
        flags |= AV_ORDER_CHANGED;
    return flags;
}

lattice_status av_diff(const lattice_affinity *from, const lattice_affinity *to,
                                     av_change **changes, size_t *count)
{
    if (!from || !to || !changes || !count) return LATTICE_ERR_INVAL;
    *changes = NULL;
    *count = 0;
    if (lattice_affinity_partitions(from) != lattice_affinity_partitions(to)) return LATTICE_ERR_INVAL;
    int32_t *map = lt_malloc((lattice_affinity_node_count(from) ? lattice_affinity_node_count(from) : 1) * sizeof *map);
    if (!map) return LATTICE_ERR_NOMEM;
    map_nodes(from, to, map);
    size_t n = 0, cap = 0;
    av_change *out = NULL;
    for (uint32_t p = 0; p < lattice_affinity_partitions(from); p++) {
        uint32_t f = compare_owners(from, to, map, p);
        if (!f) continue;
        if (n == cap) {
            size_t nc = cap ? cap * 2 : 64;
            av_change *g = lt_realloc(out, nc * sizeof *g);
            if (!g) {
                lt_free(out), lt_free(map);
                return LATTICE_ERR_NOMEM;
            }
            out = g, cap = nc;
        }
        out[n].partition = p;
        out[n].flags = f;
        n++;
    }
    lt_free(map);
    *changes = out;
    *count = n;
    return LATTICE_OK;
}

/* Copies node holds in role 0 (primary) or in roles 1.. (backups). */
static uint32_t count_role(const lattice_affinity *a, uint32_t node, bool primary)
{
    uint32_t n = 0;
    for (uint32_t p = 0; p < lattice_affinity_partitions(a); p++) {
        int r = lattice_affinity_role(a, p, node);
        n += primary ? r == 0 : r > 0;
    }
    return n;
}

uint32_t av_primaries_of(const lattice_affinity *a, uint32_t node) { return count_role(a, node, true); }
uint32_t av_backups_of(const lattice_affinity *a, uint32_t node) { return count_role(a, node, false); }

void av_balance_of(const lattice_affinity *a, av_balance *out)
{
    memset(out, 0, sizeof *out);
    out->nodes = lattice_affinity_node_count(a);
    if (out->nodes == 0) return;
    uint64_t ps = 0, bs = 0;
    out->primary_min = out->backup_min = UINT32_MAX;
    for (uint32_t i = 0; i < out->nodes; i++) {
        uint32_t p = av_primaries_of(a, i), b = av_backups_of(a, i);
        ps += p, bs += b;
        if (p < out->primary_min) out->primary_min = p;
        if (p > out->primary_max) out->primary_max = p;
        if (b < out->backup_min) out->backup_min = b;
        if (b > out->backup_max) out->backup_max = b;
    }
    out->primary_avg = (double)ps / out->nodes;
    out->backup_avg = (double)bs / out->nodes;
}

const char *av_redundancy_name(av_redundancy r)
{
    switch (r) {
    case AV_REDUNDANCY_FULL: return "full";
    case AV_REDUNDANCY_UNDER: return "under";
    case AV_REDUNDANCY_LOST: return "lost";
    }
    return "unknown";
}

uint32_t av_live_mask(const lattice_affinity *a, const char *const *live,
                                    size_t n, uint8_t *mask)
{
    memset(mask, 0, lattice_affinity_node_count(a));
    uint32_t given = 0;
    for (size_t i = 0; live && i < n; i++) {
        if (!live[i]) continue;
        given++;
        int32_t x = lattice_affinity_node_index(a, live[i]);
        if (x >= 0) mask[x] = 1;
    }
    return given;
}

av_redundancy av_classify(const lattice_affinity *a, uint32_t p,
                                             const uint8_t *mask, uint32_t live_servers)
{
    uint32_t n;
    const uint16_t *o = lattice_affinity_owners(a, p, &n);
    uint32_t alive = 0;
    for (uint32_t j = 0; j < n; j++) alive += mask[o[j]] != 0;
    if (alive == 0) return AV_REDUNDANCY_LOST;
    uint32_t want = n < live_servers ? n : live_servers;
    return alive < want ? AV_REDUNDANCY_UNDER : AV_REDUNDANCY_FULL;
}

lattice_status av_health_of(const lattice_affinity *a, const char *const *live,
                                          size_t n, av_redundancy *per_partition,
                                          av_health *sum)
{
    if (!a || !sum) return LATTICE_ERR_INVAL;
    memset(sum, 0, sizeof *sum);
    uint8_t *mask = lt_malloc(lattice_affinity_node_count(a) ? lattice_affinity_node_count(a) : 1);
    if (!mask) return LATTICE_ERR_NOMEM;
    uint32_t servers = av_live_mask(a, live, n, mask);
    for (uint32_t p = 0; p < lattice_affinity_partitions(a); p++) {
        av_redundancy r = av_classify(a, p, mask, servers);
        if (per_partition) per_partition[p] = r;
        if (r == AV_REDUNDANCY_FULL) sum->full++;
        else if (r == AV_REDUNDANCY_UNDER) sum->under++;
        else sum->lost++;
    }
    lt_free(mask);
    return LATTICE_OK;
}
