/*
 * Our key -> slot against a real redis-server: RESP clients that are cluster
 * aware compute slots themselves, so ours must match Redis on every key, not
 * only on the documented examples.  Starts redis-server (installed by
 * scripts/bootstrap) in cluster mode on a free loopback port in a temporary
 * directory, asks CLUSTER KEYSLOT for thousands of random binary keys (with
 * and without hash tags, pipelined), compares, and stops it by its pid.
 */
#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "partition/partition.h"
#include "run_suite.h"

#define KEYS 6000
#define BATCH 200

static pid_t server = -1;
static char dir[64];

/* A loopback port free right now; *fd keeps it bound until the caller closes
 * it, so two calls give two different ports. */
static int free_port(int *fd)
{
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    if (s < 0 || bind(s, (struct sockaddr *)&a, sizeof a) != 0 ||
        getsockname(s, (struct sockaddr *)&a, &len) != 0) {
        if (s >= 0) close(s);
        return -1;
    }
    *fd = s;
    return ntohs(a.sin_port);
}

static int try_connect(int port)
{
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (s >= 0 && connect(s, (struct sockaddr *)&a, sizeof a) == 0) return s;
    if (s >= 0) close(s);
    return -1;
}

static void stop_server(void)
{
    if (server > 0) {
        kill(server, SIGTERM);
        waitpid(server, NULL, 0);
        server = -1;
    }
}

static void stop_redis(void)
{
    stop_server();
    if (dir[0]) {
        char path[128];
        snprintf(path, sizeof path, "%s/nodes.conf", dir);
        unlink(path);
        snprintf(path, sizeof path, "%s/redis.log", dir);
        unlink(path);
        rmdir(dir);
        dir[0] = 0;
    }
}

/* Prints the server's log (on a failure to start). */
static void show_log(void)
{
    char path[128], line[256];
    snprintf(path, sizeof path, "%s/redis.log", dir);
    FILE *f = fopen(path, "r");
    while (f && fgets(line, sizeof line, f)) fprintf(stderr, "redis-server: %s", line);
    if (f) fclose(f);
}

/* One attempt: starts redis-server on a free port; a connected socket or -1. */
static int start_once(void)
{
    /* Cluster mode also listens on a bus port, port + 10000 unless given:
     * from the ephemeral range that can exceed 65535, so pick it too. */
    int fd1 = -1, fd2 = -1;
    int port = free_port(&fd1), bus = free_port(&fd2);
    if (fd1 >= 0) close(fd1);
    if (fd2 >= 0) close(fd2);
    if (port <= 0 || bus <= 0) return -1;
    char portbuf[16], busbuf[16], conf[128], log[128];
    snprintf(portbuf, sizeof portbuf, "%d", port);
    snprintf(busbuf, sizeof busbuf, "%d", bus);
    snprintf(conf, sizeof conf, "%s/nodes.conf", dir);
    snprintf(log, sizeof log, "%s/redis.log", dir);
    unlink(conf);
    server = fork();
    if (server == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd >= 0) dup2(fd, 1), dup2(fd, 2);
        execlp("redis-server", "redis-server", "--port", portbuf, "--bind", "127.0.0.1",
               "--cluster-enabled", "yes", "--cluster-port", busbuf, "--cluster-config-file",
               conf, "--dir", dir, "--save", "", "--appendonly", "no", (char *)NULL);
        _exit(127);
    }
    if (server < 0) return -1;
    /* wait_for(connect succeeds or the server died, 10 s) */
    for (int i = 0; i < 1000; i++) {
        int s = try_connect(port);
        if (s >= 0) return s;
        int st;
        if (waitpid(server, &st, WNOHANG) == server) {
            server = -1;
            show_log();
            return -1;
        }
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    show_log();
    return -1;
}

/* The port found free may be taken before redis binds it: try a few. */
static int start_redis(void)
{
    snprintf(dir, sizeof dir, "/tmp/lattice-keyslot-%d", (int)getpid());
    if (mkdir(dir, 0700) != 0) {
        dir[0] = 0;
        return -1;
    }
    for (int attempt = 0; attempt < 3; attempt++) {
        int s = start_once();
        if (s >= 0) return s;
        stop_server();
    }
    return -1;
}

static void write_all(int s, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(s, p, n);
        ck_assert_int_gt(w, 0);
        p += w, n -= (size_t)w;
    }
}

/* Reads `count` integer replies (":N\r\n") into out. */
static void read_ints(int s, int count, long *out)
{
    static char buf[1 << 16];
    size_t have = 0, pos = 0;
    for (int i = 0; i < count; i++) {
        for (;;) {
            char *nl = memchr(buf + pos, '\n', have - pos);
            if (nl) {
                ck_assert_msg(buf[pos] == ':', "unexpected reply '%.*s'", (int)(nl - buf - pos),
                              buf + pos);
                out[i] = strtol(buf + pos + 1, NULL, 10);
                pos = (size_t)(nl - buf) + 1;
                break;
            }
            memmove(buf, buf + pos, have - pos);
            have -= pos, pos = 0;
            ssize_t r = read(s, buf + have, sizeof buf - have);
            if (r <= 0) show_log();
            ck_assert_msg(r > 0, "redis-server closed the connection: %s",
                          r < 0 ? strerror(errno) : "EOF");
            have += (size_t)r;
        }
    }
}

START_TEST(slots_match_a_live_redis_server)
{
    int s = start_redis();
    ck_assert_msg(s >= 0, "could not start redis-server (scripts/bootstrap installs it)");
    srand(2024);
    static unsigned char keys[BATCH][96];
    size_t lens[BATCH];
    static char req[BATCH * 160];
    long got[BATCH];
    int tagged = 0;
    for (int done = 0; done < KEYS; done += BATCH) {
        size_t used = 0;
        for (int i = 0; i < BATCH; i++) {
            size_t len = (size_t)rand() % 80;
            for (size_t b = 0; b < len; b++) keys[i][b] = (unsigned char)rand();
            /* a third of the keys get braces somewhere, to exercise the tag rule */
            if (len >= 2 && rand() % 3 == 0) {
                keys[i][(size_t)rand() % len] = '{';
                keys[i][(size_t)rand() % len] = '}';
                tagged++;
            }
            lens[i] = len;
            used += (size_t)snprintf(req + used, sizeof req - used,
                                     "*3\r\n$7\r\nCLUSTER\r\n$7\r\nKEYSLOT\r\n$%zu\r\n", len);
            memcpy(req + used, keys[i], len);
            used += len;
            memcpy(req + used, "\r\n", 2);
            used += 2;
        }
        write_all(s, req, used);
        read_ints(s, BATCH, got);
        for (int i = 0; i < BATCH; i++)
            ck_assert_msg(got[i] == lattice_partition_key_slot(keys[i], lens[i]),
                          "key %d (%zu bytes): redis %ld, ours %u", done + i, lens[i], got[i],
                          lattice_partition_key_slot(keys[i], lens[i]));
    }
    ck_assert_int_gt(tagged, KEYS / 5);
    close(s);
}
END_TEST

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    Suite *su = suite_create("partition_redis");
    TCase *tc = tcase_create("keyslot");
    tcase_set_timeout(tc, 120);
    tcase_add_unchecked_fixture(tc, NULL, stop_redis);
    tcase_add_test(tc, slots_match_a_live_redis_server);
    suite_add_tcase(su, tc);
    SRunner *r = srunner_create(su);
    /* no fork: the server started by the test is stopped by this process */
    srunner_set_fork_status(r, CK_NOFORK);
    int rc = lt_run_runner(r);
    stop_redis();
    return rc;
}
