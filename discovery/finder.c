/*
 * IP finders.  Static: Ignite's address format, resolved once when parsed
 * (IPv4; host names through getaddrinfo).  DNS: `dns://NAME[:PORT]`, every
 * A record of NAME, resolved again every LD_DNS_REFRESH_MS on the discovery
 * thread (a Kubernetes headless service lists its ready pods so).  Multicast: the UDP sockets of
 * `multicast://GROUP:PORT`; the interface is always the node's own --host
 * address, never the kernel's choice (on the root namespace without
 * a 224.0.0.0/4 route the kernel sends multicast to eth0).
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "internal.h"
#include "lattice/log.h"
#include "state.h"

static bool parse_port(const char *s, size_t len, int *out)
{
    if (len == 0 || len > 5) return false;
    int v = 0;
    for (size_t i = 0; i < len; i++) {
        if (!isdigit((unsigned char)s[i])) return false;
        v = v * 10 + (s[i] - '0');
    }
    if (v < 1 || v > 65535) return false;
    *out = v;
    return true;
}

static bool resolve_ipv4(const char *name, char out[64])
{
    struct in_addr a;
    if (inet_pton(AF_INET, name, &a) == 1) {
        inet_ntop(AF_INET, &a, out, 64);
        return true;
    }
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *res = NULL;
    if (getaddrinfo(name, NULL, &hints, &res) != 0 || !res) return false;
    inet_ntop(AF_INET, &((struct sockaddr_in *)res->ai_addr)->sin_addr, out, 64);
    freeaddrinfo(res);
    return true;
}

/* One comma-free item [b, e) -> entries appended to out. */
static lattice_status parse_item(const char *b, const char *e, int dport, int drange,
                                 lattice_finder_addr *out, size_t max, size_t *n)
{
    while (b < e && isspace((unsigned char)*b)) b++;
    while (e > b && isspace((unsigned char)e[-1])) e--;
    if (b == e) return LATTICE_ERR_INVAL;
    const char *colon = memchr(b, ':', (size_t)(e - b));
    const char *hend = colon ? colon : e;
    if (hend == b || hend - b >= 64) return LATTICE_ERR_INVAL;
    char host[64];
    memcpy(host, b, (size_t)(hend - b));
    host[hend - b] = 0;
    int p1 = dport, p2 = dport + drange - 1;
    if (colon) {
        const char *ps = colon + 1;
        const char *dots = NULL;
        for (const char *q = ps; q + 1 < e; q++)
            if (q[0] == '.' && q[1] == '.') {
                dots = q;
                break;
            }
        if (dots) {
            if (!parse_port(ps, (size_t)(dots - ps), &p1) || !parse_port(dots + 2, (size_t)(e - dots - 2), &p2))
                return LATTICE_ERR_INVAL;
        } else {
            if (!parse_port(ps, (size_t)(e - ps), &p1)) return LATTICE_ERR_INVAL;
            p2 = p1;
        }
    }
    if (p2 < p1 || p1 < 1 || p2 > 65535) return LATTICE_ERR_INVAL;
    char ip[64];
    if (!resolve_ipv4(host, ip)) return LATTICE_ERR_INVAL;
    for (int p = p1; p <= p2; p++) {
        if (*n >= max) return LATTICE_ERR_TOO_LARGE;
        snprintf(out[*n].host, sizeof out[*n].host, "%s", ip);
        out[*n].port = p;
        (*n)++;
    }
    return LATTICE_OK;
}

lattice_status lattice_finder_parse_static(const char *spec, int default_port, int default_range,
                                           lattice_finder_addr *out, size_t max, size_t *n)
{
    *n = 0;
    if (!spec || !*spec || default_range < 1) return LATTICE_ERR_INVAL;
    const char *b = spec;
    for (;;) {
        const char *c = strchr(b, ',');
        const char *e = c ? c : b + strlen(b);
        lattice_status st = parse_item(b, e, default_port, default_range, out, max, n);
        if (st != LATTICE_OK) return st;
        if (!c) break;
        b = c + 1;
    }
    return LATTICE_OK;
}

bool lattice_finder_is_dns(const char *spec) { return spec && strncmp(spec, "dns://", 6) == 0; }

lattice_status lattice_finder_parse_dns(const char *spec, char name[256], int *port)
{
    if (!lattice_finder_is_dns(spec)) return LATTICE_ERR_INVAL;
    const char *s = spec + 6;
    const char *colon = strchr(s, ':');
    size_t nl = colon ? (size_t)(colon - s) : strlen(s);
    if (nl == 0 || nl >= 256) return LATTICE_ERR_INVAL;
    for (size_t i = 0; i < nl; i++)
        if (!isalnum((unsigned char)s[i]) && s[i] != '-' && s[i] != '.' && s[i] != '_') return LATTICE_ERR_INVAL;
    memcpy(name, s, nl);
    name[nl] = 0;
    *port = LATTICE_DEFAULT_PORT;
    if (colon && !parse_port(colon + 1, strlen(colon + 1), port)) return LATTICE_ERR_INVAL;
    return LATTICE_OK;
}

lattice_status lattice_finder_resolve_dns(const char *name, int port, lattice_finder_addr *out, size_t max, size_t *n)
{
    *n = 0;
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *res = NULL;
    if (getaddrinfo(name, NULL, &hints, &res) != 0) return LATTICE_ERR_NOT_FOUND;
    for (struct addrinfo *a = res; a && *n < max; a = a->ai_next) {
        char h[64];
        inet_ntop(AF_INET, &((struct sockaddr_in *)a->ai_addr)->sin_addr, h, sizeof h);
        bool dup = false;
        for (size_t i = 0; i < *n && !dup; i++) dup = !strcmp(out[i].host, h);
        if (dup) continue;
        snprintf(out[*n].host, sizeof out[*n].host, "%s", h);
        out[*n].port = port;
        (*n)++;
    }
    freeaddrinfo(res);
    return *n ? LATTICE_OK : LATTICE_ERR_NOT_FOUND;
}

void ld_refresh_dns(lattice_discovery *d, int64_t now, bool force)
{
    if (!d->n_dns || (!force && now - d->last_dns_ms < LD_DNS_REFRESH_MS)) return;
    d->last_dns_ms = now;
    size_t n = d->n_fixed;
    for (size_t i = 0; i < d->n_dns; i++) {
        size_t k = 0;
        lattice_status st =
            lattice_finder_resolve_dns(d->dns[i].name, d->dns[i].port, d->statics + n, MAX_STATIC - n, &k);
        if (st != LATTICE_OK && !d->dns[i].warned) {
            LT_LOG(LT_WARN, "discovery", "dns://%s: no A record (yet); asking again every %d s", d->dns[i].name,
                   LD_DNS_REFRESH_MS / 1000);
            d->dns[i].warned = true;
        }
        if (st == LATTICE_OK) d->dns[i].warned = false;
        n += k;
    }
    d->n_statics = n;
    /* New addresses become join targets at once (and Hello targets of a
     * coordinator); ones that went away are just no longer asked. */
    for (size_t i = d->n_fixed; i < n; i++) {
        char a[128];
        snprintf(a, sizeof a, "tcp://%s:%d", d->statics[i].host, d->statics[i].port);
        if (strcmp(a, d->my_addr) != 0) ld_ensure_conn(d, a, true);
    }
}

bool lattice_finder_is_multicast(const char *spec)
{
    return spec && strncmp(spec, "multicast://", 12) == 0;
}

lattice_status lattice_finder_parse_multicast(const char *spec, char group[64], int *port)
{
    if (!lattice_finder_is_multicast(spec)) return LATTICE_ERR_INVAL;
    const char *s = spec + 12;
    const char *colon = strchr(s, ':');
    size_t hl = colon ? (size_t)(colon - s) : strlen(s);
    if (hl == 0 || hl >= 64) return LATTICE_ERR_INVAL;
    char g[64];
    memcpy(g, s, hl);
    g[hl] = 0;
    struct in_addr a;
    if (inet_pton(AF_INET, g, &a) != 1 || !IN_MULTICAST(ntohl(a.s_addr))) return LATTICE_ERR_INVAL;
    int p = LATTICE_MCAST_DEFAULT_PORT;
    if (colon && !parse_port(colon + 1, strlen(colon + 1), &p)) return LATTICE_ERR_INVAL;
    memcpy(group, g, hl + 1);
    *port = p;
    return LATTICE_OK;
}

int mcast_listen(const char *group, int port, const char *iface)
{
    struct in_addr g, ifa;
    if (inet_pton(AF_INET, group, &g) != 1 || inet_pton(AF_INET, iface, &ifa) != 1) {
        errno = EINVAL;
        return -1;
    }
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) return -1;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    /* Bound to the group address: only the group's datagrams arrive here. */
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port), .sin_addr = g};
    struct ip_mreq mr = {.imr_multiaddr = g, .imr_interface = ifa};
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 ||
        setsockopt(fd, IPPROTO_IP, IP_ADD_MEMBERSHIP, &mr, sizeof mr) < 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

int mcast_sender(const char *iface)
{
    struct in_addr ifa;
    if (inet_pton(AF_INET, iface, &ifa) != 1) {
        errno = EINVAL;
        return -1;
    }
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) return -1;
    unsigned char ttl = 1, loop = 1;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr = ifa};
    if (setsockopt(fd, IPPROTO_IP, IP_MULTICAST_IF, &ifa, sizeof ifa) < 0 ||
        setsockopt(fd, IPPROTO_IP, IP_MULTICAST_TTL, &ttl, sizeof ttl) < 0 ||
        setsockopt(fd, IPPROTO_IP, IP_MULTICAST_LOOP, &loop, sizeof loop) < 0 ||
        bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}
