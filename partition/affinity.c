/*
 * Rendezvous (highest random weight) affinity: for partition p every server
 * node gets the score mix(hash(consistent id) ^ key(p)); the highest score is
 * the primary, the next ones are the backups.  A node's score for p does not
 * depend on the other nodes, so a joiner only takes partitions it now wins and
 * a leaver only gives up its own - the property rebalance relies on.
 *
 * Contract (every node must compute the same table, across versions):
 *   id_hash(id)  = fmix64(fnv1a64(id bytes))
 *   key(p)       = fmix64(p * 0x9E3779B97F4A7C15 + 0x632BE59BD9B4E019)
 *   score(id, p) = fmix64(id_hash(id) ^ key(p))
 *   rank: higher score first; equal scores -> smaller consistent id first
 * fmix64 is MurmurHash3's 64-bit finalizer (a bijection with full avalanche).
 *
 * Nodes are indexed in consistent-id order (strcmp), which makes the input
 * order irrelevant and turns the tie-break into "smaller index first".
 */
#include "partition/partition.h"

#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "lattice/alloc.h"
#include "lattice/log.h"

struct lattice_affinity {
    uint32_t partitions;
    uint32_t copies;       /* owners per partition */
    uint32_t nnodes;
    char **ids;            /* [nnodes], sorted; point into strings */
    char **hosts;          /* [nnodes]; "" when none given */
    char *strings;         /* one block for every id and host */
    uint16_t *owners;      /* [partitions * copies], primary first */
};

struct cand {
    uint64_t score;
    uint32_t node;
};

static inline uint64_t fmix64(uint64_t k)
{
    k ^= k >> 33;
    k *= UINT64_C(0xff51afd7ed558ccd);
    k ^= k >> 33;
    k *= UINT64_C(0xc4ceb9fe1a85ec53);
    k ^= k >> 33;
    return k;
}

static uint64_t id_hash(const char *s)
{
    return fmix64(lt_fnv1a(s, strlen(s)));
}

static inline uint64_t part_key(uint32_t p)
{
    return fmix64((uint64_t)p * UINT64_C(0x9E3779B97F4A7C15) + UINT64_C(0x632BE59BD9B4E019));
}

/* a ranks before b */
static inline bool before(const struct cand *a, const struct cand *b)
{
    return a->score > b->score || (a->score == b->score && a->node < b->node);
}

static int cand_cmp(const void *x, const void *y)
{
    const struct cand *a = x, *b = y;
    if (before(a, b)) return -1;
    return before(b, a) ? 1 : 0;
}

static int node_cmp(const void *x, const void *y)
{
    const lattice_affinity_node *a = x, *b = y;
    return strcmp(a->consistent_id, b->consistent_id);
}

/* Sorts the nodes by consistent id and copies ids/hosts into one block.
 * INVAL on a missing or duplicate id. */
static lattice_status copy_nodes(lattice_affinity *a, const lattice_affinity_node *nodes,
                                 size_t n)
{
    size_t bytes = 0;
    for (size_t i = 0; i < n; i++) {
        if (!nodes[i].consistent_id || !nodes[i].consistent_id[0]) {
            LT_LOG(LT_WARN, "partition", "affinity: node %zu has no consistent id", i);
            return LATTICE_ERR_INVAL;
        }
        bytes += strlen(nodes[i].consistent_id) + 1;
        bytes += (nodes[i].host ? strlen(nodes[i].host) : 0) + 1;
    }
    lattice_affinity_node *sorted = lt_malloc((n ? n : 1) * sizeof *sorted);
    a->ids = lt_calloc(n ? n : 1, sizeof *a->ids);
    a->hosts = lt_calloc(n ? n : 1, sizeof *a->hosts);
    a->strings = lt_malloc(bytes ? bytes : 1);
    if (!sorted || !a->ids || !a->hosts || !a->strings) {
        lt_free(sorted);
        return LATTICE_ERR_NOMEM;
    }
    if (n) memcpy(sorted, nodes, n * sizeof *sorted);
    qsort(sorted, n, sizeof *sorted, node_cmp);
    char *w = a->strings;
    for (uint32_t i = 0; i < n; i++) {
        const lattice_affinity_node *nd = &sorted[i];
        if (i > 0 && strcmp(nd->consistent_id, a->ids[i - 1]) == 0) {
            LT_LOG(LT_WARN, "partition", "affinity: duplicate consistent id '%s'",
                   nd->consistent_id);
            lt_free(sorted);
            return LATTICE_ERR_INVAL;
        }
        size_t l = strlen(nd->consistent_id) + 1;
        a->ids[i] = memcpy(w, nd->consistent_id, l);
        w += l;
        const char *h = nd->host ? nd->host : "";
        l = strlen(h) + 1;
        a->hosts[i] = memcpy(w, h, l);
        w += l;
    }
    lt_free(sorted);
    return LATTICE_OK;
}

static int host_cmp(const void *x, const void *y, void *hosts)
{
    char **h = hosts;
    return strcmp(h[*(const uint32_t *)x], h[*(const uint32_t *)y]);
}

/* Small integer per distinct host; a node without a host is its own host.
 * Sorts node indexes by host (order is scratch space of n entries). */
static void host_groups(const lattice_affinity *a, uint32_t *group, uint32_t *order)
{
    uint32_t n = a->nnodes, next = 0;
    for (uint32_t i = 0; i < n; i++) order[i] = i;
    qsort_r(order, n, sizeof *order, host_cmp, a->hosts);
    for (uint32_t i = 0; i < n; i++) {
        const char *h = a->hosts[order[i]];
        bool same = i > 0 && h[0] && strcmp(h, a->hosts[order[i - 1]]) == 0;
        group[order[i]] = same ? group[order[i - 1]] : next++;
    }
}

/* The k best-ranked nodes of partition key pk into own (rank order), scoring
 * and selecting in one pass without storing the scores; ts is k scratch
 * words.  Nodes come in index order, so a later node ranks before an earlier
 * one only with a strictly higher score - the tie rule for free.  After the
 * first few nodes the "not in the top k" branch is almost always taken; it
 * still mispredicts about k*ln(n) times per partition (see top_2). */
static void top_k(const uint64_t *h, uint32_t n, uint64_t pk, uint32_t k, uint64_t *ts,
                  uint16_t *own)
{
    uint32_t have = 0;
    for (uint32_t i = 0; i < n; i++) {
        uint64_t s = fmix64(h[i] ^ pk);
        if (have == k && s <= ts[k - 1]) continue;
        uint32_t j = have < k ? have++ : k - 1;
        while (j > 0 && s > ts[j - 1]) {
            ts[j] = ts[j - 1];
            own[j] = own[j - 1];
            j--;
        }
        ts[j] = s;
        own[j] = (uint16_t)i;
    }
}

/* The one or two best nodes (the common backups=0 and backups=1 cases).
 * Written as selects so gcc emits conditional moves for most of it: the
 * "enters the top k" branch mispredicts about 2*ln(n) times per partition,
 * as costly as the hashing.  (Fully branch-free mask arithmetic was measured
 * slower: its dependency chain through s1/s2 is longer than the misses.)
 * Ties as in top_k: a later node needs a strictly higher score. */
static void top_1(const uint64_t *h, uint32_t n, uint64_t pk, uint16_t *own)
{
    uint64_t s1 = fmix64(h[0] ^ pk);
    uint32_t n1 = 0;
    for (uint32_t i = 1; i < n; i++) {
        uint64_t s = fmix64(h[i] ^ pk);
        bool gt = s > s1;
        s1 = gt ? s : s1;
        n1 = gt ? i : n1;
    }
    own[0] = (uint16_t)n1;
}

static void top_2(const uint64_t *h, uint32_t n, uint64_t pk, uint16_t *own)
{
    uint64_t a = fmix64(h[0] ^ pk), b = fmix64(h[1] ^ pk);
    bool swap = b > a;
    uint64_t s1 = swap ? b : a, s2 = swap ? a : b;
    uint32_t n1 = swap, n2 = !swap;
    for (uint32_t i = 2; i < n; i++) {
        uint64_t s = fmix64(h[i] ^ pk);
        bool gt1 = s > s1, gt2 = s > s2;
        s2 = gt1 ? s1 : (gt2 ? s : s2);
        n2 = gt1 ? n1 : (gt2 ? i : n2);
        s1 = gt1 ? s : s1;
        n1 = gt1 ? i : n1;
    }
    own[0] = (uint16_t)n1;
    own[1] = (uint16_t)n2;
}

/* Index in c of the best-ranked candidate whose stamp is not `mark` - the
 * stamp of its host when group is given, else of the node itself - or
 * UINT32_MAX if none is left. */
static uint32_t best_unmarked(const struct cand *c, uint32_t n, const uint32_t *stamp,
                              const uint32_t *group, uint32_t mark)
{
    uint32_t best = UINT32_MAX;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t key = group ? group[c[i].node] : c[i].node;
        if (stamp[key] == mark) continue;
        if (best == UINT32_MAX || before(&c[i], &c[best])) best = i;
    }
    return best;
}

/*
 * exclude_neighbors for one partition: first, in rank order, the best node on
 * a host that holds no copy yet, until k copies or no such host is left;
 * then (hosts ran out) the best remaining nodes in rank order.  Each pick is
 * one scan, so O(n * k) per partition whatever the host layout.  The stamps
 * mark used hosts/nodes for this partition (mark = partition + 1), so they
 * need no clearing between partitions.
 */
static void pick_neighbors_apart(const struct cand *c, uint32_t n, uint32_t k,
                                 const uint32_t *group, uint32_t *host_stamp,
                                 uint32_t *node_stamp, uint32_t mark, uint16_t *own)
{
    uint32_t got = 0;
    while (got < k) {
        uint32_t b = best_unmarked(c, n, host_stamp, group, mark);
        if (b == UINT32_MAX) break;
        host_stamp[group[c[b].node]] = mark;
        node_stamp[c[b].node] = mark;
        own[got++] = (uint16_t)c[b].node;
    }
    while (got < k) {
        uint32_t b = best_unmarked(c, n, node_stamp, NULL, mark);
        node_stamp[c[b].node] = mark;
        own[got++] = (uint16_t)c[b].node;
    }
}

/* Full rank order of c[0..n): insertion sort for the small node counts
 * replicated caches have, qsort beyond. */
static void rank_all(struct cand *c, uint32_t n)
{
    if (n > 64) {
        qsort(c, n, sizeof *c, cand_cmp);
        return;
    }
    for (uint32_t i = 1; i < n; i++) {
        struct cand x = c[i];
        uint32_t j = i;
        while (j > 0 && before(&x, &c[j - 1])) {
            c[j] = c[j - 1];
            j--;
        }
        c[j] = x;
    }
}

struct scratch {
    uint64_t *h;          /* [n] id hashes */
    uint32_t *group;      /* [n] host group per node */
    struct cand *c;       /* [n] scores */
    uint64_t *ts;         /* [copies] top-k scores */
    uint32_t *stamps;     /* [2n] host stamps, then node stamps */
};

/*
 * Four ways to the same ranking, by what is needed:
 *  - replicated: every node, so rank them all (exclude_neighbors does not
 *    apply: every host holds a copy anyway);
 *  - exclude_neighbors: pick by scans, skipping used hosts;
 *  - up to 8 copies: one fused score-and-select pass;
 *  - more copies: rank all, take the first k.
 */
static void assign(lattice_affinity *a, const lattice_cache_config *cfg, struct scratch *x)
{
    uint32_t n = a->nnodes, k = a->copies;
    bool replicated = cfg->mode == LATTICE_CACHE_REPLICATED;
    bool apart = !replicated && cfg->exclude_neighbors;
    bool fused = !replicated && !apart && k <= 8;
    for (uint32_t p = 0; p < a->partitions; p++) {
        uint64_t pk = part_key(p);
        uint16_t *own = &a->owners[(size_t)p * k];
        if (fused) {
            if (k == 1)
                top_1(x->h, n, pk, own);
            else if (k == 2)
                top_2(x->h, n, pk, own);
            else
                top_k(x->h, n, pk, k, x->ts, own);
            continue;
        }
        for (uint32_t i = 0; i < n; i++) {
            x->c[i].score = fmix64(x->h[i] ^ pk);
            x->c[i].node = i;
        }
        if (apart) {
            pick_neighbors_apart(x->c, n, k, x->group, x->stamps, x->stamps + n, p + 1, own);
            continue;
        }
        rank_all(x->c, n);
        for (uint32_t j = 0; j < k; j++) own[j] = (uint16_t)x->c[j].node;
    }
}

lattice_status lattice_affinity_compute(const lattice_affinity_node *nodes, size_t n,
                                        const lattice_cache_config *cfg,
                                        lattice_affinity **out)
{
    if (!out || !cfg || (n > 0 && !nodes)) return LATTICE_ERR_INVAL;
    /* Only what the assignment depends on: a config that is otherwise
     * incomplete (no name yet, say) still has a well-defined table. */
    if (!lattice_partition_count_valid(cfg->partitions) ||
        cfg->backups > LATTICE_CACHE_MAX_BACKUPS ||
        (cfg->mode != LATTICE_CACHE_PARTITIONED && cfg->mode != LATTICE_CACHE_REPLICATED)) {
        LT_LOG(LT_WARN, "partition", "affinity: bad config (partitions %u, backups %u, mode %d)",
               cfg->partitions, cfg->backups, (int)cfg->mode);
        return LATTICE_ERR_INVAL;
    }
    if (n > LATTICE_AFFINITY_MAX_NODES) {
        LT_LOG(LT_WARN, "partition", "affinity: %zu nodes, at most %u", n,
               LATTICE_AFFINITY_MAX_NODES);
        return LATTICE_ERR_INVAL;
    }
    lattice_affinity *a = lt_calloc(1, sizeof *a);
    if (!a) return LATTICE_ERR_NOMEM;
    a->partitions = cfg->partitions;
    a->nnodes = (uint32_t)n;
    if (cfg->mode == LATTICE_CACHE_REPLICATED)
        a->copies = (uint32_t)n;
    else
        a->copies = cfg->backups + 1 < n ? cfg->backups + 1 : (uint32_t)n;
    lattice_status st = copy_nodes(a, nodes, n);
    if (st != LATTICE_OK) goto fail;
    size_t slots = (size_t)a->partitions * a->copies;
    a->owners = lt_malloc(slots ? slots * sizeof *a->owners : 1);
    size_t n1 = n ? n : 1;
    struct scratch x = {
        .h = lt_malloc(n1 * sizeof *x.h),
        .group = lt_malloc(n1 * sizeof *x.group),
        .c = lt_malloc(n1 * sizeof *x.c),
        .ts = lt_malloc((a->copies ? a->copies : 1) * sizeof *x.ts),
        .stamps = lt_calloc(2 * n1, sizeof *x.stamps),
    };
    st = LATTICE_ERR_NOMEM;
    if (a->owners && x.h && x.group && x.c && x.ts && x.stamps) {
        for (uint32_t i = 0; i < n; i++) x.h[i] = id_hash(a->ids[i]);
        /* x.c is free until assign: borrow it as the host sort's scratch */
        if (cfg->exclude_neighbors) host_groups(a, x.group, (uint32_t *)x.c);
        if (a->copies > 0) assign(a, cfg, &x);
        st = LATTICE_OK;
    }
    lt_free(x.h), lt_free(x.group), lt_free(x.c), lt_free(x.ts), lt_free(x.stamps);
    if (st != LATTICE_OK) goto fail;
    *out = a;
    return LATTICE_OK;
fail:
    lattice_affinity_free(a);
    return st;
}

void lattice_affinity_free(lattice_affinity *a)
{
    if (!a) return;
    lt_free(a->ids), lt_free(a->hosts), lt_free(a->strings);
    lt_free(a->owners);
    lt_free(a);
}

uint32_t lattice_affinity_partitions(const lattice_affinity *a) { return a->partitions; }
uint32_t lattice_affinity_copies(const lattice_affinity *a) { return a->copies; }
uint32_t lattice_affinity_node_count(const lattice_affinity *a) { return a->nnodes; }

const char *lattice_affinity_node_id(const lattice_affinity *a, uint32_t node)
{
    return node < a->nnodes ? a->ids[node] : NULL;
}

int32_t lattice_affinity_node_index(const lattice_affinity *a, const char *id)
{
    if (!id) return -1;
    uint32_t lo = 0, hi = a->nnodes;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        int c = strcmp(a->ids[mid], id);
        if (c == 0) return (int32_t)mid;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -1;
}

const uint16_t *lattice_affinity_owners(const lattice_affinity *a, uint32_t p, uint32_t *count)
{
    if (p >= a->partitions || a->copies == 0) {
        if (count) *count = 0;
        return NULL;
    }
    if (count) *count = a->copies;
    return &a->owners[(size_t)p * a->copies];
}

int32_t lattice_affinity_primary(const lattice_affinity *a, uint32_t p)
{
    uint32_t n;
    const uint16_t *o = lattice_affinity_owners(a, p, &n);
    return n ? o[0] : -1;
}

int lattice_affinity_role(const lattice_affinity *a, uint32_t p, uint32_t node)
{
    uint32_t n;
    const uint16_t *o = lattice_affinity_owners(a, p, &n);
    for (uint32_t j = 0; j < n; j++)
        if (o[j] == node) return (int)j;
    return -1;
}
