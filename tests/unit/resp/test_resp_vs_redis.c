/*
 * The codec against the reference: a real redis-server (Debian's, installed
 * by scripts/bootstrap) on a free loopback port answers the same inputs, and
 * our texts must equal its bytes - protocol errors, unknown command / arity /
 * option errors, and COMMAND INFO for every command in our table.
 *
 * Known, deliberate differences are not sent here: Redis 7.0 accepts up to
 * INT_MAX multibulk elements where we keep 1024*1024 (docs/RESP.md).
 */
#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "run_suite.h"
#include "resp_codec.h"

static pid_t redis_pid = -1;
static int redis_port;

static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) < 0) {
        if (fd >= 0) close(fd);
        return -1;
    }
    close(fd);
    return ntohs(a.sin_port);
}

static int connect_redis(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)redis_port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0) return fd;
    if (fd >= 0) close(fd);
    return -1;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void start_redis(void)
{
    char port[16];
    for (int attempt = 0; attempt < 5 && redis_pid < 0; attempt++) {
        redis_port = free_port();
        ck_assert_int_gt(redis_port, 0);
        snprintf(port, sizeof(port), "%d", redis_port);
        pid_t pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
            /* A failed assertion ends this test process without stop_redis();
             * the server must not outlive it. */
            prctl(PR_SET_PDEATHSIG, SIGTERM);
            int null = open("/dev/null", O_WRONLY);
            if (null >= 0) dup2(null, 1), dup2(null, 2);
            execlp("redis-server", "redis-server", "--port", port, "--bind", "127.0.0.1",
                   "--save", "", "--appendonly", "no", "--daemonize", "no", (char *)NULL);
            _exit(127);
        }
        /* wait_for(connectable, 10 s); a lost port race shows as an early exit */
        double deadline = now_s() + 10;
        while (now_s() < deadline) {
            int fd = connect_redis();
            if (fd >= 0) {
                close(fd);
                redis_pid = pid;
                return;
            }
            int status;
            if (waitpid(pid, &status, WNOHANG) == pid) {
                ck_assert_msg(!(WIFEXITED(status) && WEXITSTATUS(status) == 127),
                              "redis-server not found (scripts/bootstrap installs it)");
                break;
            }
            usleep(20000);
        }
        if (redis_pid < 0) kill(pid, SIGKILL), waitpid(pid, NULL, 0);
    }
    ck_assert_msg(redis_pid > 0, "redis-server did not start");
}

static void stop_redis(void)
{
    if (redis_pid > 0) {
        kill(redis_pid, SIGTERM);
        waitpid(redis_pid, NULL, 0);
        redis_pid = -1;
    }
}

/* Send bytes on a fresh connection; read the first reply line (errors and
 * statuses are one line), or when want > 0 exactly want bytes, or when want
 * is UNTIL_IDLE whatever arrives until the connection is quiet for 200 ms. */
#define UNTIL_IDLE ((size_t)-1)
static size_t ask(const char *in, size_t n, char *out, size_t cap, size_t want)
{
    int fd = connect_redis();
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, in, n), (ssize_t)n);
    size_t got = 0;
    double deadline = now_s() + 5;
    while (got < cap - 1 && now_s() < deadline) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, want == UNTIL_IDLE ? 200 : 100) <= 0) {
            if (want == UNTIL_IDLE && got) break;
            continue;
        }
        ssize_t r = read(fd, out + got, cap - 1 - got);
        if (r <= 0) break;
        got += (size_t)r;
        if (want == UNTIL_IDLE) continue;
        if (want ? got >= want : memchr(out, '\n', got) != NULL) break;
    }
    out[got] = '\0';
    close(fd);
    return got;
}

/* What our codec answers first for these bytes: a protocol error, or the
 * error of the first command that fails resolve / its option parser. */
static void ours(const char *in, size_t n, char *out)
{
    lattice_resp_parser *p = lattice_resp_parser_new(NULL);
    size_t pos = 0, used;
    lattice_resp_command c;
    char err[LATTICE_RESP_ERR_MAX];
    out[0] = '\0';
    for (;;) {
        lattice_resp_result r = lattice_resp_parse(p, in + pos, n - pos, &used, &c);
        if (r == LATTICE_RESP_ERROR) {
            sprintf(out, "-%s\r\n", lattice_resp_parser_error_reply(p));
            break;
        }
        if (r == LATTICE_RESP_NEED_MORE) break;
        pos += used;
        const lattice_resp_cmd *cmd = lattice_resp_cmd_resolve(c.argc, c.argv, err);
        lattice_status st = cmd ? LATTICE_OK : LATTICE_ERR_INVAL;
        if (cmd && lattice_resp_cmd_id_of(cmd) == LATTICE_RESP_CMD_SET) {
            lattice_resp_set_opts so;
            st = lattice_resp_parse_set(c.argc, c.argv, 1700000000000LL, &so, err);
        } else if (cmd && (lattice_resp_cmd_id_of(cmd) == LATTICE_RESP_CMD_EXPIRE ||
                           lattice_resp_cmd_id_of(cmd) == LATTICE_RESP_CMD_PEXPIRE)) {
            lattice_resp_expire_opts eo;
            st = lattice_resp_parse_expire(c.argc, c.argv,
                                           lattice_resp_cmd_id_of(cmd) == LATTICE_RESP_CMD_EXPIRE ? 1000 : 1,
                                           1700000000000LL, &eo, err);
        } else if (cmd && lattice_resp_cmd_id_of(cmd) == LATTICE_RESP_CMD_HELLO) {
            lattice_resp_hello_opts ho;
            st = lattice_resp_parse_hello(c.argc, c.argv, &ho, err);
        }
        if (st != LATTICE_OK) {
            sprintf(out, "-%s\r\n", err);
            break;
        }
    }
    lattice_resp_parser_free(p);
}

static const char *const CASES[] = {
    /* protocol errors */
    "*abc\r\n", "*+1\r\n", "* 1\r\n", "*\r\n", "*3000000000\r\n", "*99999999999999999999\r\n",
    "*1\r\n$-1\r\n", "*1\r\n$x\r\n", "*1\r\n$\r\n", "*1\r\n$536870913\r\n", "*1\r\n$01\r\n",
    "*1\r\nx\r\n", "*3\r\n$3\r\nSET\r\n$1\r\nx\r\nfooz\r\n", "*1\r\n\r\n", "*1\r\n:1\r\n",
    "SET \"abc\r\n", "SET 'abc\r\n", "SET \"a\"b\r\n", "SET 'a'b\r\n", "get \"a\\\r\n",
    /* command errors */
    "foo a b\r\n", "nope\r\n", "*1\r\n$0\r\n\r\n", "GET\r\n", "get a b\r\n", "SET k\r\n",
    "MSET a b c\r\n", "dbsize x\r\n", "CLUSTER bogus\r\n", "cluster\r\n", "CLUSTER KEYSLOT\r\n",
    "CLIENT SETNAME\r\n", "COMMAND COUNT x\r\n", "client bogus x\r\n",
    "*3\r\n$3\r\nfoo\r\n$4\r\na\r\nb\r\n$3\r\nx\0y\r\n",
    /* SET options */
    "SET k v NX XX\r\n", "SET k v EX 10 PX 10\r\n", "SET k v EX 10 KEEPTTL\r\n", "SET k v EX\r\n",
    "SET k v NXX\r\n", "SET k v EX abc bogus\r\n", "SET k v EX abc\r\n", "SET k v PX +5\r\n",
    "SET k v EX 0\r\n", "SET k v PX -5\r\n", "SET k v EX 9223372036854775\r\n",
    "SET k v PX 9223372036854775807\r\n", "SET k v EXAT 9223372036854776\r\n",
    /* EXPIRE options */
    "EXPIRE k 10 NX GT\r\n", "EXPIRE k 10 GT LT\r\n", "EXPIRE k 10 bogus\r\n", "EXPIRE k ten\r\n",
    "EXPIRE k 9223372036854776\r\n", "PEXPIRE k 9223372036854775807\r\n",
    /* HELLO */
    "HELLO 4\r\n", "HELLO three\r\n", "HELLO 2 AUTH onlyuser\r\n", "HELLO 3 SETNAME \"a b\"\r\n",
    "HELLO 3 bogus\r\n",
};

START_TEST(error_replies_equal_redis_bytes)
{
    start_redis();
    char theirs[4096], mine[4096];
    for (size_t i = 0; i < sizeof(CASES) / sizeof(CASES[0]); i++) {
        /* The one case with a NUL needs its real length. */
        size_t n = strlen(CASES[i]);
        if (strncmp(CASES[i], "*3\r\n$3\r\nfoo", 11) == 0) n += 4;
        ask(CASES[i], n, theirs, sizeof(theirs), 0);
        ck_assert_msg(theirs[0] == '-', "input %zu: redis gave no error line", i); /* never vacuous */
        ours(CASES[i], n, mine);
        ck_assert_msg(strcmp(theirs, mine) == 0, "input %zu %.40s: redis '%s' ours '%s'", i, CASES[i],
                      theirs, mine);
    }
    stop_redis();
}
END_TEST

START_TEST(command_info_equals_redis_bytes)
{
    start_redis();
    size_t n = lattice_resp_cmd_count();
    char *theirs = malloc(1 << 16), *mine = malloc(1 << 16);
    for (size_t i = 0; i < n; i++) {
        const lattice_resp_cmd *c = lattice_resp_cmd_at(i);
        const char *name = lattice_resp_cmd_name(c);
        /* Redis's containers have more subcommands than ours: compare those
         * one by one instead; CLIENT SETINFO is Redis 7.2, newer than the server here. */
        if (lattice_resp_cmd_flags(c) & LATTICE_RESP_F_CONTAINER) continue;
        if (strcmp(name, "client|setinfo") == 0) continue;
        lattice_resp_out *o = lattice_resp_out_new(0, 2);
        lattice_resp_add_array(o, 1);
        ck_assert_int_eq(lattice_resp_add_command_info(o, c), LATTICE_OK);
        size_t want = lattice_resp_out_peek(o, mine, (1 << 16) - 1);
        mine[want] = '\0';
        lattice_resp_out_free(o);
        char req[128];
        int rl = snprintf(req, sizeof(req), "*3\r\n$7\r\nCOMMAND\r\n$4\r\nINFO\r\n$%zu\r\n%s\r\n", strlen(name), name);
        size_t got = ask(req, (size_t)rl, theirs, 1 << 16, want);
        ck_assert_msg(got == want && memcmp(theirs, mine, want) == 0, "%s:\nredis %s\nours  %s", name, theirs,
                      mine);
    }
    free(theirs), free(mine);
    stop_redis();
}
END_TEST


/* ECHO of an argument: Redis's reply shows how it split and unescaped the
 * line; ours is the parsed argv[1] encoded as a bulk string. */
static const char *const ECHOES[] = {
    "ECHO plain\r\n", "ECHO \"a b\"\r\n", "ECHO 'c\\'d'\r\n", "ECHO \"\\x41\\x4a\\xzz\"\r\n",
    "ECHO \"tab\\there\\n\\r\\b\\a\\q\\\\\"\r\n", "ECHO 'a\\nb'\r\n", "ECHO a\"b\"\r\n",
    "ECHO \"\"\r\n", "  ECHO    spaced   \r\n", "ECHO x\n", "ECHO a\rb\r\n", "ECHO \"\\\"q\\\"\"\r\n",
    "ECHO \"\\x00\\xff\"\r\n", "*2\r\n$4\r\nECHO\r\n$3\r\nfooXY", "*2\r\n$4\r\nECHO\r\n$0\r\n\r\n",
    "*2\rZ$4\r\nECHO\r\n$2\r\nhi\r\n", "ECHO 'it''s'\r\n",
};

START_TEST(inline_splitting_equals_redis)
{
    start_redis();
    char theirs[1024], mine[1024];
    for (size_t i = 0; i < sizeof(ECHOES) / sizeof(ECHOES[0]); i++) {
        size_t n = strlen(ECHOES[i]);
        lattice_resp_parser *p = lattice_resp_parser_new(NULL);
        size_t used;
        lattice_resp_command c;
        lattice_resp_result r = lattice_resp_parse(p, ECHOES[i], n, &used, &c);
        lattice_resp_out *o = lattice_resp_out_new(0, 2);
        if (r == LATTICE_RESP_COMMAND && c.argc == 2) {
            lattice_resp_add_bulk(o, c.argv[1].ptr, c.argv[1].len);
        } else if (r == LATTICE_RESP_ERROR) {
            const char *e = lattice_resp_parser_error_reply(p);
            lattice_resp_add_error(o, e, strlen(e));
        } else {
            char err[LATTICE_RESP_ERR_MAX];
            ck_assert_int_eq(r, LATTICE_RESP_COMMAND);
            ck_assert_ptr_null(lattice_resp_cmd_resolve(c.argc, c.argv, err));
            lattice_resp_add_error(o, err, strlen(err));
        }
        size_t want = lattice_resp_out_peek(o, mine, sizeof(mine) - 1);
        mine[want] = '\0';
        lattice_resp_out_free(o);
        lattice_resp_parser_free(p);
        size_t got = ask(ECHOES[i], n, theirs, sizeof(theirs), want);
        ck_assert_msg(got == want && memcmp(theirs, mine, want) == 0, "input %zu %s: redis '%s' ours '%s'", i,
                      ECHOES[i], theirs, mine);
    }
    stop_redis();
}
END_TEST


/* HELLO's reply: ours, given Redis's version and connection id, must equal
 * Redis's bytes in RESP2 and RESP3. */
START_TEST(hello_reply_equals_redis)
{
    start_redis();
    char theirs[1024], mine[1024];
    for (int proto = 2; proto <= 3; proto++) {
        char req[32];
        int rl = snprintf(req, sizeof(req), "HELLO %d\r\n", proto);
        size_t got = ask(req, (size_t)rl, theirs, sizeof(theirs), UNTIL_IDLE);
        const char *v = strstr(theirs, "$7\r\nversion\r\n$");
        const char *idp = strstr(theirs, "$2\r\nid\r\n:");
        ck_assert_ptr_nonnull(v);
        ck_assert_ptr_nonnull(idp);
        char version[32];
        int vl = atoi(v + 14);
        const char *vs = strchr(v + 14, '\n') + 1;
        snprintf(version, sizeof(version), "%.*s", vl, vs);
        long long id = atoll(idp + 9);
        lattice_resp_out *o = lattice_resp_out_new(0, proto);
        ck_assert_int_eq(lattice_resp_add_hello(o, version, id, 0), LATTICE_OK);
        size_t want = lattice_resp_out_peek(o, mine, sizeof(mine) - 1);
        mine[want] = '\0';
        lattice_resp_out_free(o);
        ck_assert_msg(got == want && memcmp(theirs, mine, want) == 0,
                      "HELLO %d:\nredis %s\nours  %s", proto, theirs, mine);
    }
    stop_redis();
}
END_TEST

int main(void)
{
    Suite *s = suite_create("resp_vs_redis");
    TCase *t = tcase_create("redis-server");
    tcase_add_test(t, error_replies_equal_redis_bytes);
    tcase_add_test(t, command_info_equals_redis_bytes);
    tcase_add_test(t, inline_splitting_equals_redis);
    tcase_add_test(t, hello_reply_equals_redis);
    tcase_set_timeout(t, 60);
    suite_add_tcase(s, t);
    return lt_run_suite(s);
}
