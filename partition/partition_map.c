/*
 * The node's partition map: per cache, per partition, a state and an update
 * counter.
 *
 * Publication (RCU, memb flavour):
 *   writer: lock m->lock -> build a full copy of the current snapshot with the
 *           change -> rcu_xchg_pointer(&m->cur, copy) -> call_rcu(old,
 *           free_snapshot) -> unlock
 *   reader: rcu_read_lock -> rcu_dereference(m->cur) -> read -> rcu_read_unlock
 * A snapshot is never changed after it is published, so a reader sees one
 * consistent set of states.  Snapshots are small (one byte per partition), so
 * copying the whole map per change is cheaper than anything finer-grained for
 * how rarely states change (rebalance steps, topology changes).
 *
 * Update counters change on every write, so they live outside the snapshots
 * in one `struct counters` per cache, shared by every snapshot that lists the
 * cache and reference-counted by them: a snapshot takes a reference when it is
 * built and drops it in its RCU callback, so the counters outlive every reader
 * that could have reached them.
 */
#include "partition/partition.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <urcu.h>

#include "lattice/alloc.h"
#include "lattice/log.h"

struct counters {
    uint32_t refs;        /* snapshots that list it; atomic */
    uint32_t partitions;
    uint64_t v[];         /* atomic; relaxed is enough: each is a standalone value */
};

struct snap_cache {
    char name[LATTICE_CACHE_NAME_MAX + 1];
    uint32_t partitions;
    uint8_t *states;          /* [partitions], inside the snapshot's block */
    struct counters *ctr;
};

struct lattice_partition_snapshot {
    struct rcu_head rcu;
    uint64_t version;
    uint32_t ncaches;
    struct snap_cache c[];    /* sorted by name; then the states bytes */
};

struct lattice_partition_map {
    pthread_mutex_t lock;                  /* serialises writers */
    lattice_partition_snapshot *cur;       /* RCU-published; never NULL */
};

static const char *const state_names[LATTICE_PART_STATE_COUNT_] = {
    "MOVING", "OWNING", "RENTING", "EVICTED", "LOST",
};

const char *lattice_partition_state_name(lattice_partition_state s)
{
    return (unsigned)s < LATTICE_PART_STATE_COUNT_ ? state_names[s] : "UNKNOWN";
}

int lattice_partition_state_parse(const char *name)
{
    for (int i = 0; name && i < LATTICE_PART_STATE_COUNT_; i++)
        if (strcasecmp(name, state_names[i]) == 0) return i;
    return -1;
}

bool lattice_partition_state_transition_ok(lattice_partition_state from,
                                           lattice_partition_state to)
{
    /* allowed[from] is a bit set of the states `from` may move to. */
#define B(s) (1u << LATTICE_PART_##s)
    static const unsigned allowed[LATTICE_PART_STATE_COUNT_] = {
        [LATTICE_PART_MOVING] = B(MOVING) | B(OWNING) | B(RENTING) | B(LOST),
        [LATTICE_PART_OWNING] = B(OWNING) | B(RENTING) | B(LOST),
        [LATTICE_PART_RENTING] = B(RENTING) | B(EVICTED),
        [LATTICE_PART_EVICTED] = B(EVICTED) | B(MOVING) | B(OWNING),
        [LATTICE_PART_LOST] = B(LOST) | B(OWNING) | B(EVICTED),
    };
#undef B
    if ((unsigned)from >= LATTICE_PART_STATE_COUNT_ || (unsigned)to >= LATTICE_PART_STATE_COUNT_)
        return false;
    return (allowed[from] >> to) & 1u;
}

static void counters_put(struct counters *c)
{
    if (__atomic_sub_fetch(&c->refs, 1, __ATOMIC_ACQ_REL) == 0) lt_free(c);
}

static void free_snapshot_now(lattice_partition_snapshot *s)
{
    for (uint32_t i = 0; i < s->ncaches; i++) counters_put(s->c[i].ctr);
    lt_free(s);
}

static void free_snapshot_rcu(struct rcu_head *h)
{
    free_snapshot_now(caa_container_of(h, lattice_partition_snapshot, rcu));
}

/*
 * A copy of old without cache `skip` (-1: none) and with `add` inserted in
 * name order (NULL: none; its states start EVICTED).  Takes a counters
 * reference for each listed cache.  NULL when out of memory.
 */
static lattice_partition_snapshot *build(const lattice_partition_snapshot *old, int32_t skip,
                                         const struct snap_cache *add)
{
    uint32_t n = 0;
    size_t bytes = 0;
    for (uint32_t i = 0; old && i < old->ncaches; i++) {
        if ((int32_t)i == skip) continue;
        n++, bytes += old->c[i].partitions;
    }
    if (add) n++, bytes += add->partitions;
    lattice_partition_snapshot *s = lt_malloc(sizeof *s + n * sizeof(struct snap_cache) + bytes);
    if (!s) return NULL;
    s->version = old ? old->version + 1 : 1;
    s->ncaches = n;
    uint8_t *st = (uint8_t *)&s->c[n];
    uint32_t j = 0;
    bool added = add == NULL;
    for (uint32_t i = 0; old && i <= old->ncaches; i++) {
        if (!added && (i == old->ncaches || strcmp(add->name, old->c[i].name) < 0)) {
            s->c[j] = *add;
            s->c[j].states = st;
            memset(st, LATTICE_PART_EVICTED, add->partitions);
            st += add->partitions, j++;
            added = true;
        }
        if (i == old->ncaches || (int32_t)i == skip) continue;
        s->c[j] = old->c[i];
        s->c[j].states = st;
        memcpy(st, old->c[i].states, old->c[i].partitions);
        st += old->c[i].partitions, j++;
    }
    for (uint32_t i = 0; i < n; i++) __atomic_add_fetch(&s->c[i].ctr->refs, 1, __ATOMIC_RELAXED);
    return s;
}

/* Call with m->lock held.  Publishes s and frees the previous snapshot after
 * a grace period. */
static void publish(lattice_partition_map *m, lattice_partition_snapshot *s)
{
    lattice_partition_snapshot *old = rcu_xchg_pointer(&m->cur, s);
    call_rcu(&old->rcu, free_snapshot_rcu);
}

lattice_status lattice_partition_map_create(lattice_partition_map **out)
{
    if (!out) return LATTICE_ERR_INVAL;
    lattice_partition_map *m = lt_calloc(1, sizeof *m);
    if (!m) return LATTICE_ERR_NOMEM;
    m->cur = build(NULL, -1, NULL);
    if (!m->cur) {
        lt_free(m);
        return LATTICE_ERR_NOMEM;
    }
    m->cur->version = 0;
    pthread_mutex_init(&m->lock, NULL);
    *out = m;
    return LATTICE_OK;
}

void lattice_partition_map_destroy(lattice_partition_map *m)
{
    if (!m) return;
    /* No reader may be left (contract), so the last snapshot goes at once;
     * the barrier lets earlier callbacks finish so nothing outlives us. */
    free_snapshot_now(m->cur);
    rcu_barrier();
    pthread_mutex_destroy(&m->lock);
    lt_free(m);
}

static int32_t find_cache(const lattice_partition_snapshot *s, const char *name)
{
    if (!name) return -1;
    uint32_t lo = 0, hi = s->ncaches;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        int c = strcmp(s->c[mid].name, name);
        if (c == 0) return (int32_t)mid;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -1;
}

lattice_status lattice_partition_map_add_cache(lattice_partition_map *m, const char *cache,
                                               uint32_t partitions)
{
    if (!m || !lattice_cache_config_name_valid(cache, NULL, 0) ||
        !lattice_partition_count_valid(partitions))
        return LATTICE_ERR_INVAL;
    struct counters *ctr = lt_calloc(1, sizeof *ctr + partitions * sizeof(uint64_t));
    if (!ctr) return LATTICE_ERR_NOMEM;
    ctr->partitions = partitions;
    struct snap_cache add = {.partitions = partitions, .ctr = ctr};
    memcpy(add.name, cache, strlen(cache) + 1);

    lattice_status st = LATTICE_OK;
    pthread_mutex_lock(&m->lock);
    lattice_partition_snapshot *s = NULL;
    if (find_cache(m->cur, cache) >= 0)
        st = LATTICE_ERR_EXISTS;
    else if (!(s = build(m->cur, -1, &add)))
        st = LATTICE_ERR_NOMEM;
    else
        publish(m, s);
    pthread_mutex_unlock(&m->lock);
    if (st != LATTICE_OK) lt_free(ctr); /* no snapshot took a reference */
    return st;
}

lattice_status lattice_partition_map_remove_cache(lattice_partition_map *m, const char *cache)
{
    if (!m) return LATTICE_ERR_INVAL;
    lattice_status st = LATTICE_OK;
    pthread_mutex_lock(&m->lock);
    int32_t ci = find_cache(m->cur, cache);
    lattice_partition_snapshot *s = NULL;
    if (ci < 0)
        st = LATTICE_ERR_NO_CACHE;
    else if (!(s = build(m->cur, ci, NULL)))
        st = LATTICE_ERR_NOMEM;
    else
        publish(m, s);
    pthread_mutex_unlock(&m->lock);
    return st;
}

/* Checks every requested transition against the current snapshot. */
static lattice_status check_moves(const struct snap_cache *c, const uint32_t *parts, size_t n,
                                  lattice_partition_state to)
{
    for (size_t i = 0; i < n; i++) {
        if (parts[i] >= c->partitions) {
            LT_LOG(LT_WARN, "partition", "cache %s: partition %u out of range (%u)", c->name,
                   parts[i], c->partitions);
            return LATTICE_ERR_INVAL;
        }
        lattice_partition_state from = c->states[parts[i]];
        if (!lattice_partition_state_transition_ok(from, to)) {
            LT_LOG(LT_WARN, "partition", "cache %s: partition %u cannot go %s -> %s", c->name,
                   parts[i], lattice_partition_state_name(from), lattice_partition_state_name(to));
            return LATTICE_ERR_INVAL;
        }
    }
    return LATTICE_OK;
}

lattice_status lattice_partition_map_set_states(lattice_partition_map *m, const char *cache,
                                                const uint32_t *parts, size_t n,
                                                lattice_partition_state to)
{
    if (!m || (n > 0 && !parts) || (unsigned)to >= LATTICE_PART_STATE_COUNT_)
        return LATTICE_ERR_INVAL;
    pthread_mutex_lock(&m->lock);
    lattice_status st;
    int32_t ci = find_cache(m->cur, cache);
    lattice_partition_snapshot *s = NULL;
    if (ci < 0) {
        st = LATTICE_ERR_NO_CACHE;
    } else if ((st = check_moves(&m->cur->c[ci], parts, n, to)) != LATTICE_OK || n == 0) {
        /* refused (st says why), or nothing to change: publish nothing */
    } else if (!(s = build(m->cur, -1, NULL))) {
        st = LATTICE_ERR_NOMEM;
    } else {
        struct snap_cache *c = &s->c[ci];
        for (size_t i = 0; i < n; i++) {
            c->states[parts[i]] = (uint8_t)to;
            if (to == LATTICE_PART_EVICTED)
                __atomic_store_n(&c->ctr->v[parts[i]], 0, __ATOMIC_RELAXED);
        }
        publish(m, s);
    }
    pthread_mutex_unlock(&m->lock);
    return st;
}

lattice_status lattice_partition_map_set_state(lattice_partition_map *m, const char *cache,
                                               uint32_t part, lattice_partition_state to)
{
    return lattice_partition_map_set_states(m, cache, &part, 1, to);
}

lattice_status lattice_partition_map_state(lattice_partition_map *m, const char *cache,
                                           uint32_t part, lattice_partition_state *out)
{
    if (!m || !out) return LATTICE_ERR_INVAL;
    lattice_status st = LATTICE_OK;
    rcu_read_lock();
    const lattice_partition_snapshot *s = rcu_dereference(m->cur);
    int32_t ci = find_cache(s, cache);
    if (ci < 0)
        st = LATTICE_ERR_NO_CACHE;
    else if (part >= s->c[ci].partitions)
        st = LATTICE_ERR_INVAL;
    else
        *out = s->c[ci].states[part];
    rcu_read_unlock();
    return st;
}

enum ctr_op { CTR_READ, CTR_NEXT, CTR_ADVANCE };

static uint64_t counter_op(lattice_partition_map *m, const char *cache, uint32_t part,
                           enum ctr_op op, uint64_t v, lattice_status *status)
{
    lattice_status st = LATTICE_OK;
    uint64_t r = 0;
    if (!m) {
        if (status) *status = LATTICE_ERR_INVAL;
        return 0;
    }
    rcu_read_lock();
    const lattice_partition_snapshot *s = rcu_dereference(m->cur);
    int32_t ci = find_cache(s, cache);
    if (ci < 0) {
        st = LATTICE_ERR_NO_CACHE;
    } else if (part >= s->c[ci].partitions) {
        st = LATTICE_ERR_INVAL;
    } else {
        uint64_t *c = &s->c[ci].ctr->v[part];
        if (op == CTR_NEXT) {
            r = __atomic_add_fetch(c, 1, __ATOMIC_RELAXED);
        } else if (op == CTR_ADVANCE) {
            r = __atomic_load_n(c, __ATOMIC_RELAXED);
            while (r < v &&
                   !__atomic_compare_exchange_n(c, &r, v, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
            }
            if (r < v) r = v;
        } else {
            r = __atomic_load_n(c, __ATOMIC_RELAXED);
        }
    }
    rcu_read_unlock();
    if (status) *status = st;
    return r;
}

uint64_t lattice_partition_map_next_counter(lattice_partition_map *m, const char *cache,
                                            uint32_t part, lattice_status *status)
{
    return counter_op(m, cache, part, CTR_NEXT, 0, status);
}

uint64_t lattice_partition_map_advance_counter(lattice_partition_map *m, const char *cache,
                                               uint32_t part, uint64_t v,
                                               lattice_status *status)
{
    return counter_op(m, cache, part, CTR_ADVANCE, v, status);
}

uint64_t lattice_partition_map_counter(lattice_partition_map *m, const char *cache,
                                       uint32_t part, lattice_status *status)
{
    return counter_op(m, cache, part, CTR_READ, 0, status);
}

const lattice_partition_snapshot *lattice_partition_map_snapshot(lattice_partition_map *m)
{
    return rcu_dereference(m->cur);
}

uint64_t lattice_partition_snapshot_version(const lattice_partition_snapshot *s)
{
    return s->version;
}

uint32_t lattice_partition_snapshot_cache_count(const lattice_partition_snapshot *s)
{
    return s->ncaches;
}

int32_t lattice_partition_snapshot_cache_index(const lattice_partition_snapshot *s,
                                               const char *cache)
{
    return find_cache(s, cache);
}

const char *lattice_partition_snapshot_cache_name(const lattice_partition_snapshot *s,
                                                  uint32_t ci)
{
    return ci < s->ncaches ? s->c[ci].name : NULL;
}

uint32_t lattice_partition_snapshot_partitions(const lattice_partition_snapshot *s, uint32_t ci)
{
    return ci < s->ncaches ? s->c[ci].partitions : 0;
}

lattice_partition_state lattice_partition_snapshot_state(const lattice_partition_snapshot *s,
                                                         uint32_t ci, uint32_t part)
{
    if (ci >= s->ncaches || part >= s->c[ci].partitions) return LATTICE_PART_EVICTED;
    return s->c[ci].states[part];
}

uint64_t lattice_partition_snapshot_counter(const lattice_partition_snapshot *s, uint32_t ci,
                                            uint32_t part)
{
    if (ci >= s->ncaches || part >= s->c[ci].partitions) return 0;
    return __atomic_load_n(&s->c[ci].ctr->v[part], __ATOMIC_RELAXED);
}

void lattice_partition_snapshot_count_states(const lattice_partition_snapshot *s, uint32_t ci,
                                             uint32_t *counts)
{
    memset(counts, 0, LATTICE_PART_STATE_COUNT_ * sizeof *counts);
    if (ci >= s->ncaches) return;
    for (uint32_t p = 0; p < s->c[ci].partitions; p++) counts[s->c[ci].states[p]]++;
}
