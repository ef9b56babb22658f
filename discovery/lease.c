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
 * strict majority of the topology's servers, counting ourselves: a
 * coordinator, which nobody else removes, loses its lease as soon as most
 * of the grid stops hearing it, and a new coordinator takes over only after
 * failure_detection_ms of silence.
 */
#include <stdlib.h>
#include <string.h>

#include "state.h"

static int by_time_desc(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

int64_t lattice_lease_until(const int64_t *acks, size_t n_acks, size_t n_servers, int64_t coord_ack, int lease_ms)
{
    if (n_servers == 0) return 0;
    int64_t until = INT64_MAX;
    if (coord_ack >= 0) until = coord_ack > 0 ? coord_ack + lease_ms : 0;
    size_t need = n_servers / 2; /* others needed for a strict majority with us */
    if (need == 0) return until;
    if (n_acks < need || n_acks > LATTICE_LEASE_MAX_PEERS) return 0;
    int64_t sorted[LATTICE_LEASE_MAX_PEERS];
    for (size_t i = 0; i < n_acks; i++) sorted[i] = acks[i];
    qsort(sorted, n_acks, sizeof *sorted, by_time_desc);
    int64_t maj = sorted[need - 1] > 0 ? sorted[need - 1] + lease_ms : 0;
    return maj < until ? maj : until;
}

int ld_lease_ms(const lattice_discovery *d)
{
    return ld_cfd(d) / 2;
}

void ld_update_lease(lattice_discovery *d)
{
    int64_t until = 0;
    const lattice_topology *t = d->cur;
    if (d->client) {
        until = INT64_MAX; /* holds no data: nothing to fence */
    } else if (d->state == ST_JOINED && t) {
        int64_t acks[LATTICE_LEASE_MAX_PEERS];
        size_t n_acks = 0, n_servers = 0;
        int64_t coord = strcmp(t->coordinator, d->id) == 0 ? -1 : 0;
        for (size_t i = 0; i < t->n; i++) {
            const lattice_member *m = &t->members[i];
            if (m->role != LATTICE_ROLE_SERVER) continue;
            n_servers++;
            if (strcmp(m->id, d->id) == 0) continue;
            const peer *p = find_peer(d, m->id);
            int64_t a = p ? p->ack_ms : 0;
            if (n_acks < LATTICE_LEASE_MAX_PEERS) acks[n_acks++] = a;
            if (coord == 0 && strcmp(m->id, t->coordinator) == 0) coord = a;
        }
        /* A coordinator that never echoed (or is missing from the servers
         * while a takeover is in flight) leaves coord at 0: no lease. */
        until = lattice_lease_until(acks, n_acks, n_servers, coord, ld_lease_ms(d));
    }
    atomic_store_explicit(&d->lease_until, until, memory_order_release);
}
