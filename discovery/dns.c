/*
 * The dns:// finders' resolver: a thread of its own, so a slow or hanging
 * name server never holds up the discovery thread (whose heartbeats and
 * failure detection a blocked getaddrinfo would stop: a peer would declare
 * this node failed after failure_detection_ms).
 *
 * HAND-OVER
 *   ld_dns_shared is owned by two parties, the discovery context and the
 *   resolver thread, each holding one reference (refs, under lock).  The
 *   resolver resolves every name in turn, then sleeps LD_DNS_REFRESH_MS or
 *   until stopped.  It publishes each answer under lock (gen counts the
 *   answers of a name; busy_since_ms says a lookup is running) and never
 *   holds the lock across getaddrinfo.  The discovery thread looks each tick
 *   (ld_dns_poll: one lock, a copy only when gen moved) and keeps, per name,
 *   the last good set of addresses: a failed or slow lookup changes nothing.
 *   Stopping does not wait for the thread: getaddrinfo cannot be cancelled,
 *   and a stop must not hang on a name server.  The thread notices `stop`
 *   after its current lookup and frees the block if it is the last owner.
 *
 * ADDRESSES
 *   A and AAAA records are both asked for (AF_UNSPEC).  A Lattice node
 *   listens on its --host, an IPv4 address, so an AAAA record can never
 *   reach a peer: IPv4 answers become join targets and IPv6 answers are
 *   counted and named in the log (an AAAA-only name gives no usable peer).
 *
 * LOGS: once per change of a name's outcome (a new address set, a failure
 *   with a new reason, AAAA-only, a lookup slower than LD_DNS_SLOW_MS), never
 *   once per tick.
 */
#include <errno.h>
#include <netdb.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "lattice/alloc.h"
#include "lattice/log.h"
#include "state.h"

typedef struct dns_answer {
    uint64_t gen;            /* answers so far (0: the first lookup runs) */
    int64_t busy_since_ms;   /* monotonic start of the running lookup; 0 when idle */
    lattice_status st;       /* of the latest answer */
    int gai_err;             /* getaddrinfo's code when st is not OK */
    size_t n, n_v6;
    char v6_first[64];
    lattice_finder_addr addrs[LD_DNS_MAX_ADDRS];
} dns_answer;

struct ld_dns_shared {
    pthread_mutex_t lock; /* guards everything below after init */
    pthread_cond_t cv;    /* signalled by stop */
    int refs;
    bool stop;
    size_t n;
    char names[LD_MAX_DNS][256];
    int ports[LD_MAX_DNS];
    dns_answer ans[LD_MAX_DNS];
    dns_answer scratch; /* not shared: the discovery thread's copy (ld_dns_poll) */
    dns_answer work;    /* not shared: the answer the resolver builds outside the lock */
};

static void shared_put(ld_dns_shared *s)
{
    pthread_mutex_lock(&s->lock);
    bool last = --s->refs == 0;
    pthread_mutex_unlock(&s->lock);
    if (!last) return;
    pthread_mutex_destroy(&s->lock);
    pthread_cond_destroy(&s->cv);
    lt_free(s);
}

static void *resolver_main(void *arg)
{
    ld_dns_shared *s = arg;
    dns_answer *a = &s->work;
    pthread_mutex_lock(&s->lock);
    while (!s->stop) {
        for (size_t i = 0; i < s->n && !s->stop; i++) {
            s->ans[i].busy_since_ms = lt_mono_ms();
            char name[256];
            int port = s->ports[i];
            memcpy(name, s->names[i], sizeof name);
            pthread_mutex_unlock(&s->lock);
            a->st = lattice_finder_resolve_dns(name, port, a->addrs, LD_DNS_MAX_ADDRS, &a->n, &a->n_v6, a->v6_first,
                                               &a->gai_err);
            pthread_mutex_lock(&s->lock);
            uint64_t gen = s->ans[i].gen + 1;
            s->ans[i] = *a;
            s->ans[i].gen = gen;
            s->ans[i].busy_since_ms = 0;
        }
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        until.tv_sec += LD_DNS_REFRESH_MS / 1000;
        int rc = 0;
        while (!s->stop && rc != ETIMEDOUT) rc = pthread_cond_timedwait(&s->cv, &s->lock, &until);
    }
    pthread_mutex_unlock(&s->lock);
    shared_put(s);
    return NULL;
}

lattice_status ld_dns_start(lattice_discovery *d)
{
    if (!d->n_dns) return LATTICE_OK;
    ld_dns_shared *s = lt_calloc(1, sizeof *s);
    if (!s) return LATTICE_ERR_NOMEM;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&s->cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&s->lock, NULL);
    s->refs = 2;
    s->n = d->n_dns;
    for (size_t i = 0; i < d->n_dns; i++) {
        memcpy(s->names[i], d->dns[i].name, sizeof s->names[i]);
        s->ports[i] = d->dns[i].port;
    }
    /* No signal is for this thread (latticed takes its stop signals with sigwait). */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_t t;
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    int rc = pthread_create(&t, &at, resolver_main, s);
    pthread_attr_destroy(&at);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        s->refs = 1;
        shared_put(s);
        return LATTICE_ERR_IO;
    }
    d->dns_shared = s;
    return LATTICE_OK;
}

void ld_dns_stop(lattice_discovery *d)
{
    ld_dns_shared *s = d->dns_shared;
    if (!s) return;
    d->dns_shared = NULL;
    pthread_mutex_lock(&s->lock);
    s->stop = true;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->lock);
    shared_put(s);
}

bool ld_dns_answered(const lattice_discovery *d)
{
    for (size_t i = 0; i < d->n_dns; i++)
        if (!d->dns[i].seen_gen) return false;
    return true;
}

static bool same_set(const ld_dns_name *k, const dns_answer *a)
{
    if (k->n_good != a->n) return false;
    for (size_t i = 0; i < a->n; i++) {
        bool found = false;
        for (size_t j = 0; j < k->n_good && !found; j++)
            found = !strcmp(k->good[j].host, a->addrs[i].host) && k->good[j].port == a->addrs[i].port;
        if (!found) return false;
    }
    return true;
}

static void list_hosts(const lattice_finder_addr *v, size_t n, char *out, size_t cap)
{
    size_t o = 0;
    out[0] = 0;
    for (size_t i = 0; i < n && o + 1 < cap; i++) {
        int w = snprintf(out + o, cap - o, "%s%s", i ? ", " : "", v[i].host);
        if (w < 0 || (size_t)w >= cap - o) {
            snprintf(out + (o > cap - 5 ? cap - 5 : o), 5, " ...");
            return;
        }
        o += (size_t)w;
    }
}

/* One new answer for finder k: true when its usable addresses changed. */
static bool take_answer(ld_dns_name *k, const dns_answer *a)
{
    if (a->st != LATTICE_OK) {
        /* Failed: the last good addresses stay join targets. */
        int key = a->gai_err ? a->gai_err : 1; /* getaddrinfo's codes are non-zero */
        if (k->logged_err != key) {
            LT_LOG(LT_WARN, MOD, "dns://%s: no A record (yet): %s; keeping the last %zu address%s, asking again every %d s",
                   k->name, a->gai_err ? gai_strerror(a->gai_err) : "no address", k->n_good,
                   k->n_good == 1 ? "" : "es", LD_DNS_REFRESH_MS / 1000);
            k->logged_err = key;
            k->logged_ok = false;
        }
        return false;
    }
    bool set_changed = !same_set(k, a);
    if (!set_changed && k->logged_ok && k->n_v6_logged == a->n_v6) return false;
    k->n_good = a->n;
    memcpy(k->good, a->addrs, a->n * sizeof a->addrs[0]);
    k->logged_ok = true;
    k->logged_err = 0;
    k->n_v6_logged = a->n_v6;
    char hosts[512];
    list_hosts(a->addrs, a->n, hosts, sizeof hosts);
    if (!a->n)
        LT_LOG(LT_WARN, MOD, "dns://%s: only AAAA records (%zu, e.g. %s): Lattice peers speak IPv4 (--host is an IPv4 "
               "address), so this name gives no usable peer", k->name, a->n_v6, a->v6_first);
    else if (a->n_v6)
        LT_LOG(LT_INFO, MOD, "dns://%s resolves to %zu IPv4 address%s (%s), the join targets; %zu AAAA "
               "record%s (e.g. %s) skipped: Lattice peers speak IPv4", k->name, a->n, a->n == 1 ? "" : "es", hosts, a->n_v6,
               a->n_v6 == 1 ? "" : "s", a->v6_first);
    else
        LT_LOG(LT_INFO, MOD, "dns://%s resolves to %zu address%s (%s), the join targets", k->name, a->n,
               a->n == 1 ? "" : "es", hosts);
    return set_changed;
}

/* Rebuild statics[n_fixed..] from every finder's last good addresses; new
 * ones become join targets at once (and Hello targets of a coordinator);
 * ones that went away are just no longer asked. */
static void rebuild_statics(lattice_discovery *d)
{
    size_t n = d->n_fixed;
    for (size_t i = 0; i < d->n_dns; i++) {
        const ld_dns_name *k = &d->dns[i];
        for (size_t j = 0; j < k->n_good && n < MAX_STATIC; j++) {
            bool dup = false;
            for (size_t m = 0; m < n && !dup; m++)
                dup = !strcmp(d->statics[m].host, k->good[j].host) && d->statics[m].port == k->good[j].port;
            if (!dup) d->statics[n++] = k->good[j];
        }
    }
    d->n_statics = n;
    for (size_t i = d->n_fixed; i < n; i++) {
        char a[128];
        snprintf(a, sizeof a, "tcp://%s:%d", d->statics[i].host, d->statics[i].port);
        if (strcmp(a, d->my_addr) != 0) ld_ensure_conn(d, a, true);
    }
}

void ld_dns_poll(lattice_discovery *d, int64_t now)
{
    ld_dns_shared *s = d->dns_shared;
    if (!s) return;
    bool changed = false;
    for (size_t i = 0; i < d->n_dns; i++) {
        ld_dns_name *k = &d->dns[i];
        pthread_mutex_lock(&s->lock);
        uint64_t gen = s->ans[i].gen;
        int64_t busy = s->ans[i].busy_since_ms;
        if (gen != k->seen_gen) s->scratch = s->ans[i];
        pthread_mutex_unlock(&s->lock);
        if (gen != k->seen_gen) {
            k->seen_gen = gen;
            k->slow_logged = false;
            changed |= take_answer(k, &s->scratch);
        }
        if (busy && now - busy >= LD_DNS_SLOW_MS && !k->slow_logged) {
            LT_LOG(LT_WARN, MOD, "dns://%s: lookup running for %d s; keeping the last %zu address%s meanwhile", k->name,
                   LD_DNS_SLOW_MS / 1000, k->n_good, k->n_good == 1 ? "" : "es");
            k->slow_logged = true;
        }
    }
    if (changed) rebuild_statics(d);
}
