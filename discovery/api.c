/*
 * discovery's lifecycle (init, start, stop, destroy) and the queries any
 * thread may make (topology references, stats, events).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "state.h"
#include "lattice/alloc.h"
#include "lattice/log.h"

/* ------------------------------------------------------------- lifecycle */

static lattice_status parse_finders(lattice_discovery *d, const lattice_discovery_config *c)
{
    for (size_t i = 0; i < c->n_finders; i++) {
        const char *f = c->finders[i];
        if (lattice_finder_is_multicast(f)) {
            if (lattice_finder_parse_multicast(f, d->mgroup, &d->mport) != LATTICE_OK) {
                LT_LOG(LT_ERROR, MOD, "bad multicast finder '%s' (want multicast://GROUP[:PORT], GROUP in 224.0.0.0/4)", f);
                return LATTICE_ERR_INVAL;
            }
            d->mcast = true;
            continue;
        }
        if (lattice_finder_is_dns(f)) {
            if (d->n_dns == LD_MAX_DNS ||
                lattice_finder_parse_dns(f, d->dns[d->n_dns].name, &d->dns[d->n_dns].port) != LATTICE_OK) {
                LT_LOG(LT_ERROR, MOD, "bad dns finder '%s' (want dns://NAME[:PORT], at most %d)", f, LD_MAX_DNS);
                return LATTICE_ERR_INVAL;
            }
            d->n_dns++;
            continue;
        }
        size_t n = 0;
        /* Without a port, Ignite's rule: the first 10 ports from ours (47500). */
        int dport = d->port ? d->port : LATTICE_DEFAULT_PORT;
        lattice_status st = lattice_finder_parse_static(f, dport, 10, d->statics + d->n_statics,
                                                        MAX_STATIC - d->n_statics, &n);
        if (st != LATTICE_OK) {
            LT_LOG(LT_ERROR, MOD, "bad ip finder '%s': %s (want HOST[:PORT[..PORT]][,...] or multicast://GROUP:PORT)",
                   f, st == LATTICE_ERR_TOO_LARGE ? "too many addresses" : "malformed or unresolvable");
            return st;
        }
        d->n_statics += n;
    }
    d->n_fixed = d->n_statics;
    return LATTICE_OK;
}

lattice_status lattice_discovery_init(const lattice_discovery_config *c, lattice_discovery **out)
{
    *out = NULL;
    if (!c || !c->cluster || !*c->cluster || strlen(c->cluster) >= 256 || !c->host || strlen(c->host) >= 64 ||
        c->port < 0 || c->port > 65535 || c->port_range < 1 || c->failure_detection_ms < 100 ||
        c->max_message_bytes < 1024 || c->n_attrs > LATTICE_MAX_ATTRS)
        return LATTICE_ERR_INVAL;
    struct in_addr a;
    if (inet_pton(AF_INET, c->host, &a) != 1 || a.s_addr == htonl(INADDR_ANY)) {
        /* The host is advertised to peers: a wildcard cannot be dialled. */
        LT_LOG(LT_ERROR, MOD, "--host '%s' is not a concrete IPv4 address", c->host);
        return LATTICE_ERR_INVAL;
    }
    if (sodium_init() < 0) return LATTICE_ERR_IO;
    lattice_discovery *d = lt_calloc(1, sizeof *d);
    if (!d) return LATTICE_ERR_NOMEM;
    snprintf(d->cluster, sizeof d->cluster, "%s", c->cluster);
    snprintf(d->host, sizeof d->host, "%s", c->host);
    d->port = c->port;
    d->port_range = c->port_range;
    d->fd_ms = c->failure_detection_ms;
    d->max_msg = c->max_message_bytes;
    d->client = c->client;
    d->m_attempts = c->multicast_attempts > 0 ? c->multicast_attempts : 2;
    d->m_wait_ms = c->multicast_wait_ms > 0 ? c->multicast_wait_ms : 300;
    d->wake_fd = d->mc_listen_fd = d->mc_send_fd = -1;
    if (c->secret) {
        wire_derive_key(c->secret, c->secret_len, d->key);
        d->has_key = true;
    }
    lattice_status st = parse_finders(d, c);
    for (size_t i = 0; st == LATTICE_OK && i < c->n_attrs; i++) {
        const char *eq = strchr(c->attrs[i], '=');
        if (!eq || eq == c->attrs[i]) {
            st = LATTICE_ERR_INVAL;
            break;
        }
        char *k = lt_strdup(c->attrs[i]);
        char *v = lt_strdup(eq + 1);
        if (!k || !v) {
            lt_free(k);
            lt_free(v);
            st = LATTICE_ERR_NOMEM;
            break;
        }
        k[eq - c->attrs[i]] = 0;
        d->attrs[d->n_attrs].key = k;
        d->attrs[d->n_attrs++].value = v;
    }
    pthread_mutex_init(&d->pub_lock, NULL);
    pthread_mutex_init(&d->stats_lock, NULL);
    pthread_cond_init(&d->joined_cv, NULL);
    pthread_mutex_init(&d->bl_lock, NULL);
    pthread_cond_init(&d->bl_cv, NULL);
    d->auto_adjust_ms = c->baseline_auto_adjust_ms;
    new_uuid(d->id);
    *out = d;
    if (st != LATTICE_OK) {
        lattice_discovery_destroy(d);
        *out = NULL;
    }
    return st;
}


lattice_status lattice_discovery_start(lattice_discovery *d)
{
    if (d->thread_started || d->state != ST_IDLE) return LATTICE_ERR_INVAL;
    d->start_wall_ms = lt_wall_ms();
    lattice_status st = ld_open_sockets(d);
    if (st != LATTICE_OK) {
        ld_close_sockets(d);
        return st;
    }
    lattice_log_set_node(d->id); /* before the thread exists: no race on the tag */
    st = ld_dns_start(d);
    if (st != LATTICE_OK) {
        ld_close_sockets(d);
        return st;
    }
    if (pthread_create(&d->thr, NULL, ld_thread_main, d) != 0) {
        ld_dns_stop(d);
        ld_close_sockets(d);
        return LATTICE_ERR_IO;
    }
    d->thread_started = true;
    return LATTICE_OK;
}

void lattice_discovery_stop(lattice_discovery *d)
{
    if (!d || !d->thread_started) return;
    atomic_store(&d->stop_req, true);
    uint64_t one = 1;
    ssize_t w = write(d->wake_fd, &one, sizeof one);
    (void)w;
    pthread_join(d->thr, NULL);
    ld_dns_stop(d);
    d->thread_started = false;
    ld_close_sockets(d);
}

void lattice_discovery_destroy(lattice_discovery *d)
{
    if (!d) return;
    lattice_discovery_stop(d);
    topo_put(d->cur); /* only set if the thread never ran its exit path */
    topo_put(d->view);
    for (size_t i = 0; i < d->n_pending; i++) member_free_fields(&d->pending[i]);
    for (size_t i = 0; i < d->n_attrs; i++) {
        lt_free((char *)d->attrs[i].key);
        lt_free((char *)d->attrs[i].value);
    }
    pthread_mutex_destroy(&d->pub_lock);
    pthread_mutex_destroy(&d->stats_lock);
    pthread_cond_destroy(&d->joined_cv);
    pthread_mutex_destroy(&d->bl_lock);
    pthread_cond_destroy(&d->bl_cv);
    sodium_memzero(d->key, sizeof d->key);
    lt_free(d);
}

/* --------------------------------------------------------------- queries */

lattice_topology *lattice_discovery_topology(lattice_discovery *d)
{
    pthread_mutex_lock(&d->pub_lock);
    lattice_topology *t = d->cur;
    if (t) topo_get(t);
    pthread_mutex_unlock(&d->pub_lock);
    return t;
}

const lattice_topology *lattice_discovery_topology_rcu(lattice_discovery *d) { return rcu_dereference(d->cur); }

#define REFUSAL_GRACE_MS 1000

lattice_status lattice_discovery_wait_joined(lattice_discovery *d, int timeout_ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += timeout_ms / 1000;
    ts.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    /* A refusal is reported once it stood for a second without an
     * admission: another node may refuse us while the grid admits us. */
    pthread_mutex_lock(&d->pub_lock);
    int rc = 0;
    for (;;) {
        if (d->joined || rc != 0) break;
        if (d->refused != LATTICE_OK && lt_mono_ms() - d->refused_at_ms >= REFUSAL_GRACE_MS) break;
        struct timespec slice;
        clock_gettime(CLOCK_REALTIME, &slice);
        slice.tv_nsec += 100 * 1000000L;
        if (slice.tv_nsec >= 1000000000L) {
            slice.tv_sec++;
            slice.tv_nsec -= 1000000000L;
        }
        bool last = slice.tv_sec > ts.tv_sec || (slice.tv_sec == ts.tv_sec && slice.tv_nsec >= ts.tv_nsec);
        int r = pthread_cond_timedwait(&d->joined_cv, &d->pub_lock, last ? &ts : &slice);
        if (last) rc = r;
    }
    lattice_status st = d->joined ? LATTICE_OK
                        : d->refused != LATTICE_OK && lt_mono_ms() - d->refused_at_ms >= REFUSAL_GRACE_MS ? d->refused
                                                                                                  : LATTICE_ERR_TIMEOUT;
    pthread_mutex_unlock(&d->pub_lock);
    return st;
}

lattice_status lattice_discovery_subscribe(lattice_discovery *d, lattice_event_fn fn, void *ctx)
{
    if (!fn) return LATTICE_ERR_INVAL;
    pthread_mutex_lock(&d->pub_lock);
    lattice_status st = LATTICE_ERR_TOO_LARGE;
    if (d->n_subs < MAX_SUBS) {
        d->subs[d->n_subs++] = (sub){fn, ctx};
        st = LATTICE_OK;
    }
    pthread_mutex_unlock(&d->pub_lock);
    return st;
}

void lattice_discovery_local_id(lattice_discovery *d, char *buf, size_t len)
{
    pthread_mutex_lock(&d->pub_lock);
    snprintf(buf, len, "%s", d->id);
    pthread_mutex_unlock(&d->pub_lock);
}

int lattice_discovery_port(lattice_discovery *d) { return d->bound_port; }

lattice_status lattice_discovery_stats(lattice_discovery *d, const char *id, lattice_node_stats *out)
{
    char me[64];
    lattice_discovery_local_id(d, me, sizeof me);
    if (id && strcmp(id, me) == 0) {
        memset(out, 0, sizeof *out);
        out->uptime_ms = lt_wall_ms() - d->start_wall_ms;
        out->frames_in = rd(&d->c_frames);
        out->malformed = rd(&d->c_malformed);
        out->oversized = rd(&d->c_oversized);
        out->auth_failed = rd(&d->c_auth);
        out->refused = rd(&d->c_refused);
        out->handshake_failed = rd(&d->c_handshake);
        proc_sampler ps = {0};
        proc_sample(&ps, &out->rss_bytes);
        pthread_mutex_lock(&d->stats_lock);
        out->cpu_load = d->self_load;
        pthread_mutex_unlock(&d->stats_lock);
        return LATTICE_OK;
    }
    lattice_status st = LATTICE_ERR_NOT_FOUND;
    pthread_mutex_lock(&d->stats_lock);
    peer *p = id ? find_peer(d, id) : NULL;
    if (p && p->have_stats) {
        *out = p->stats;
        st = LATTICE_OK;
    }
    pthread_mutex_unlock(&d->stats_lock);
    return st;
}

/* ---------------------------------------------------------------- leases */

int64_t lattice_discovery_lease_until(lattice_discovery *d)
{
    return atomic_load_explicit(&d->lease_until, memory_order_acquire);
}

uint64_t lattice_discovery_incarnation(lattice_discovery *d)
{
    return atomic_load_explicit(&d->incarnation, memory_order_acquire);
}

bool lattice_discovery_serving(lattice_discovery *d, uint64_t incarnation)
{
    if (lattice_discovery_incarnation(d) != incarnation) return false;
    return (int64_t)lt_mono_ms() < lattice_discovery_lease_until(d);
}
