/*
 * seed: whether a joining server may start a grid of its own (discovery
 * thread).
 *
 * When no grid answered within ELECT_WAIT_MS, the smallest joining server
 * starts one.  "No answer" can also mean a grid that is paused (SIGSTOP, a
 * stalled VM) or too busy to answer in time: a node killed and restarted
 * beside it would start a second grid with a quorum of one, acknowledge
 * writes there and lose them when the two merge (the smaller side yields).
 * A finder address that accepts a TCP connection while nothing from it was
 * heard is the sign of such a grid: while one exists seeding waits, for up
 * to SILENT_FDS failure-detection timeouts; so does a frame from a grid's
 * member (a grid that answered once and is slow to admit us).  After that a listener that
 * never answers is taken for what it then most likely is - another program
 * on a finder port - and no longer holds the node back.
 *
 * Heard: any frame this join received names its sender's address (joins of
 * other joining servers, their "joining" answers, refusals of another
 * cluster or secret), so those addresses are never "silent".  A frame of
 * this cluster from a grid's member (a coordinator's hello, a redirect)
 * holds seeding back by itself (dispatch: saw_cluster_ms): join it instead.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "lattice/log.h"
#include "state.h"

#define SILENT_FDS 5
#define PROBE_WAIT_MS 100

void ld_seed_reset(lattice_discovery *d)
{
    d->n_heard = 0;
    d->silent_since_ms = 0;
    d->last_listen_probe_ms = 0;
    d->silent_addr[0] = 0;
    d->silent_gave_up = false;
}

void ld_note_heard(lattice_discovery *d, const char *addr)
{
    if (d->state != ST_JOINING || !addr || !addr[0] || strlen(addr) >= sizeof d->heard[0]) return;
    for (size_t i = 0; i < d->n_heard; i++)
        if (strcmp(d->heard[i], addr) == 0) return;
    if (d->n_heard < MAX_CONNS) snprintf(d->heard[d->n_heard++], sizeof d->heard[0], "%s", addr);
}

static bool heard(const lattice_discovery *d, const char *addr)
{
    for (size_t i = 0; i < d->n_heard; i++)
        if (strcmp(d->heard[i], addr) == 0) return true;
    return false;
}

/* "tcp://A.B.C.D:PORT" -> sa; false for anything else (names are not probed). */
static bool parse_addr(const char *addr, struct sockaddr_in *sa)
{
    if (strncmp(addr, "tcp://", 6) != 0) return false;
    char host[64];
    const char *colon = strrchr(addr + 6, ':');
    size_t n = colon ? (size_t)(colon - (addr + 6)) : 0;
    if (!n || n >= sizeof host) return false;
    memcpy(host, addr + 6, n);
    host[n] = 0;
    int port = atoi(colon + 1);
    memset(sa, 0, sizeof *sa);
    sa->sin_family = AF_INET;
    sa->sin_port = htons((uint16_t)port);
    return port > 0 && port < 65536 && inet_pton(AF_INET, host, &sa->sin_addr) == 1;
}

/* The first finder or former member address not heard from that accepts a
 * TCP connection, into out; false when there is none.  Blocks the
 * discovery thread for at most PROBE_WAIT_MS (loopback answers at once). */
static bool find_silent_listener(lattice_discovery *d, char *out, size_t cap)
{
    struct pollfd pf[MAX_CONNS];
    size_t at[MAX_CONNS], n = 0;
    bool found = false;
    for (size_t i = 0; i < d->n_conns && !found; i++) {
        struct sockaddr_in sa;
        if (heard(d, d->conns[i].addr) || !parse_addr(d->conns[i].addr, &sa)) continue;
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0) break;
        if (connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0) {
            snprintf(out, cap, "%s", d->conns[i].addr + 6);
            found = true;
            close(fd);
        } else if (errno == EINPROGRESS) {
            pf[n] = (struct pollfd){.fd = fd, .events = POLLOUT};
            at[n++] = i;
        } else {
            close(fd); /* refused: nobody listens there */
        }
    }
    if (!found && n && poll(pf, (nfds_t)n, PROBE_WAIT_MS) > 0)
        for (size_t k = 0; k < n && !found; k++) {
            int err = -1;
            socklen_t len = sizeof err;
            if ((pf[k].revents & POLLOUT) && getsockopt(pf[k].fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && !err) {
                snprintf(out, cap, "%s", d->conns[at[k]].addr + 6);
                found = true;
            }
        }
    for (size_t k = 0; k < n; k++) close(pf[k].fd);
    return found;
}

int64_t ld_seed_hold_ms(const lattice_discovery *d)
{
    int64_t hold = (int64_t)SILENT_FDS * d->fd_ms;
    return hold > ELECT_WAIT_MS ? hold : ELECT_WAIT_MS;
}

bool ld_seed_held(lattice_discovery *d, int64_t now)
{
    int64_t limit = ld_seed_hold_ms(d);
    if (d->silent_since_ms && now - d->silent_since_ms >= limit) {
        if (!d->silent_gave_up)
            LT_LOG(LT_WARN, MOD, "%s still sent nothing after %lld ms: taking it for no grid of ours", d->silent_addr,
                   (long long)limit);
        d->silent_gave_up = true;
        return false;
    }
    if (now - d->last_listen_probe_ms < ELECT_WAIT_MS) return d->silent_since_ms != 0;
    d->last_listen_probe_ms = now;
    char addr[128];
    if (!find_silent_listener(d, addr, sizeof addr)) {
        d->silent_since_ms = 0;
        return false;
    }
    if (!d->silent_since_ms || strcmp(addr, d->silent_addr) != 0) {
        LT_LOG(LT_WARN, MOD,
               "%s accepts connections but sent nothing: waiting up to %lld ms before starting a grid of our own "
               "(a grid there may be paused or busy; a second one beside it would lose what it acknowledges)",
               addr, (long long)limit);
        snprintf(d->silent_addr, sizeof d->silent_addr, "%s", addr);
    }
    if (!d->silent_since_ms) d->silent_since_ms = now;
    return true;
}
