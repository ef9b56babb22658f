/*
 * Leases: how long this node may go on serving from its view.
 *
 * A server serves data only while its lease is valid.  Every heartbeat
 * carries the sender's monotonic send time; a member of the sender's
 * topology answers at once with a HeartbeatAck echoing it.  An echo e from
 * peer Y proves that Y heard us at (our clock) e or later, so Y - and in
 * particular the coordinator, the only node that removes members - judges
 * us silent no earlier than e + failure_detection_ms.  The lease runs to
 * e + lease_ms with lease_ms < failure_detection_ms, so a node that was
 * paused (SIGSTOP), starved or cut off stops serving strictly before the
 * rest of the grid can remove it and hand its partitions to others.  Acks
 * queued while we were paused echo times from before the pause and cannot
 * extend the lease past it.
 *
 * The lease needs the echo of the coordinator (unless we are it) and of a
 * strict majority of the BASELINE (baseline.c), counting ourselves when we
 * are in it: a side of a partition shrinks its topology as it removes the
 * others, so a majority of the current topology would let every side serve;
 * a majority of the baseline, which only a side holding quorum may change,
 * exists on one side at most.  Only baseline servers of our topology count:
 * a server that joined but is not in the baseline yet adds nothing.  A
 * coordinator, which nobody else removes, loses its lease as soon as most
 * of the baseline stops hearing it, and a new coordinator takes over only
 * after failure_detection_ms of silence.
 */
#include <stdlib.h>
#include <string.h>

#include "state.h"

static int by_time_desc(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

int64_t lattice_lease_until(const int64_t *acks, size_t n_acks, size_t n_baseline, bool self_counts,
                            int64_t coord_ack, int lease_ms)
{
    if (n_baseline == 0) return 0;
    int64_t until = INT64_MAX;
    if (coord_ack >= 0) until = coord_ack > 0 ? coord_ack + lease_ms : 0;
    size_t need = n_baseline / 2 + 1 - (self_counts ? 1 : 0); /* others for a strict majority */
    if (need == 0) return until;
    if (n_acks < need || n_acks > LATTICE_LEASE_MAX_PEERS) return 0;
    int64_t sorted[LATTICE_LEASE_MAX_PEERS];
    for (size_t i = 0; i < n_acks; i++) sorted[i] = acks[i];
    qsort(sorted, n_acks, sizeof *sorted, by_time_desc);
    int64_t maj = sorted[need - 1] > 0 ? sorted[need - 1] + lease_ms : 0;
    return maj < until ? maj : until;
}

size_t lattice_quorum_reachable(const int64_t *acks, size_t n_acks, bool self_counts, int64_t now, int lease_ms)
{
    size_t n = self_counts ? 1 : 0;
    for (size_t i = 0; i < n_acks; i++) n += acks[i] > 0 && acks[i] + lease_ms > now;
    return n;
}

int ld_lease_ms(const lattice_discovery *d)
{
    return ld_cfd(d) / 2;
}

size_t ld_baseline_acks(lattice_discovery *d, const lattice_topology *t, const char *self_id,
                        int64_t *acks, size_t *n_baseline, bool *self_counts, int64_t *coord_ack)
{
    size_t n_acks = 0, n_servers = 0;
    bool legacy = t->n_baseline == 0; /* no baseline recorded: every server of the topology counts */
    *self_counts = false;
    *coord_ack = strcmp(t->coordinator, self_id) == 0 ? -1 : 0;
    for (size_t i = 0; i < t->n; i++) {
        const lattice_member *m = &t->members[i];
        if (m->role != LATTICE_ROLE_SERVER) continue;
        n_servers++;
        const peer *p = strcmp(m->id, self_id) == 0 ? NULL : find_peer(d, m->id);
        int64_t a = p ? p->ack_ms : 0;
        /* A coordinator that never echoed (or is missing from the servers
         * while a takeover is in flight) leaves coord_ack at 0: no lease. */
        if (*coord_ack == 0 && strcmp(m->id, t->coordinator) == 0) *coord_ack = a;
        if (!legacy && !topo_in_baseline(t, m->consistent_id)) continue;
        if (strcmp(m->id, self_id) == 0) *self_counts = true;
        else if (n_acks < LATTICE_LEASE_MAX_PEERS) acks[n_acks++] = a;
    }
    *n_baseline = legacy ? n_servers : t->n_baseline;
    return n_acks;
}

void ld_update_lease(lattice_discovery *d)
{
    int64_t until = 0;
    const lattice_topology *t = d->cur;
    if (d->client) {
        until = INT64_MAX; /* holds no data: nothing to fence */
    } else if (d->state == ST_JOINED && t) {
        int64_t acks[LATTICE_LEASE_MAX_PEERS], coord;
        size_t n_baseline;
        bool self_counts;
        size_t n_acks = ld_baseline_acks(d, t, d->id, acks, &n_baseline, &self_counts, &coord);
        until = lattice_lease_until(acks, n_acks, n_baseline, self_counts, coord, ld_lease_ms(d));
    }
    atomic_store_explicit(&d->lease_until, until, memory_order_release);
}
