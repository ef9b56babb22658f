/*
 * The RESP endpoint's commands against a real redis-server in the same
 * test: every line of a script goes to both, and the reply bytes must be
 * identical (values, nils, integers, and every error text).
 *
 *   strings_and_keys   SETEX, PSETEX, SETNX, GETSET, GETEX, UNLINK, TOUCH,
 *                      TYPE, EXPIREAT, PEXPIREAT, EXPIRETIME, PEXPIRETIME,
 *                      GETRANGE/SUBSTR, GETBIT, BITCOUNT, EXPIRE's NX/XX/
 *                      GT/LT combinations, and the older commands beside
 *                      them; COMMAND GETKEYS and LIST FILTERBY, CONFIG SET
 *                      and RESETSTAT; TIME's shape
 *
 * The script avoids what differs by nature: a TTL read right after it was
 * set is the same second on both; PEXPIRETIME is compared only for keys
 * without an expiry.  `it_resp_vs_redis NAME...` runs some.
 */
#include <arpa/inet.h>
#include <check.h>
#include <hiredis.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.h"

static int connect_port(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    struct timeval tv = {10, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    return fd;
}

typedef struct port_ctx {
    int port;
} port_ctx;

static bool answers_ping(void *p)
{
    int fd = connect_port(((port_ctx *)p)->port);
    if (fd < 0) return false;
    char buf[64];
    bool ok = write(fd, "PING\r\n", 6) == 6 && read(fd, buf, sizeof buf) > 0 && !strncmp(buf, "+PONG", 5);
    close(fd);
    return ok;
}

/* One request line (inline form) on fd; the complete reply's bytes. */
static size_t ask(int fd, const char *line, char *out, size_t cap)
{
    char req[1024];
    int n = snprintf(req, sizeof req, "%s\r\n", line);
    ck_assert_int_eq(write(fd, req, (size_t)n), n);
    redisReader *rd = redisReaderCreate();
    size_t len = 0;
    void *reply = NULL;
    while (!reply) {
        ssize_t k = read(fd, out + len, cap - len - 1);
        ck_assert_msg(k > 0, "no reply to '%s'", line);
        ck_assert_int_eq(redisReaderFeed(rd, out + len, (size_t)k), REDIS_OK);
        len += (size_t)k;
        ck_assert_int_eq(redisReaderGetReply(rd, &reply), REDIS_OK);
    }
    freeReplyObject(reply);
    redisReaderFree(rd);
    out[len] = 0;
    return len;
}

/* A pipeline sent in one write, its replies read until the final ECHO's:
 * for commands that answer nothing (CLIENT REPLY OFF/SKIP). */
static size_t ask_pipeline(int fd, const char *block, char *out, size_t cap)
{
    static const char tail[] = "ECHO end-marker\r\n", marker[] = "$10\r\nend-marker\r\n";
    size_t n = strlen(block);
    ck_assert_int_eq(write(fd, block, n), (ssize_t)n);
    ck_assert_int_eq(write(fd, tail, sizeof tail - 1), (ssize_t)(sizeof tail - 1));
    size_t len = 0;
    while (len < sizeof marker - 1 || memcmp(out + len - (sizeof marker - 1), marker, sizeof marker - 1)) {
        ssize_t k = read(fd, out + len, cap - len - 1);
        ck_assert_msg(k > 0, "no end to the pipeline's replies");
        len += (size_t)k;
    }
    out[len] = 0;
    return len;
}

static const char *const script[] = {
    /* SETEX / PSETEX / SETNX / GETSET */
    "SET s1 hello", "SETEX s2 100 v", "TTL s2", "GET s2", "SETEX s2 0 v", "SETEX s2 -5 v", "SETEX s2 x v",
    "SETEX s2 9223372036854775807 v", "SETEX s2 100", "PSETEX s3 100000 v", "PTTL nokey", "PSETEX s3 0 v",
    "PSETEX s3 abc v", "SETNX s1 x", "SETNX s4 x", "GET s4", "GETSET s1 world", "GETSET nokey x", "GET nokey",
    "DEL nokey", "GETSET s1",
    /* GETEX */
    "GETEX s1", "GETEX s1 PERSIST", "TTL s1", "GETEX s1 EX 100", "TTL s1", "GETEX s1 PERSIST", "TTL s1",
    "GETEX s1 PX 100000", "GETEX s1 PERSIST PERSIST", "GETEX s1 PX 0", "GETEX s1 EX -1", "GETEX s1 EX 10 PX 10",
    "GETEX s1 EX 10 EX 20", "TTL s1", "GETEX s1 PERSIST EX 10", "GETEX s1 EX 10 PERSIST", "GETEX s1 EX",
    "GETEX s1 EX abc", "GETEX s1 NX", "GETEX s1 KEEPTTL", "GETEX s1 GET", "GETEX nokey EX 10", "GETEX nokey",
    "GETEX s1 EXAT 1", "GET s1", "EXISTS s1", "GETEX s4 PXAT 99999999999999", "PERSIST s4", "GETEX",
    /* UNLINK / TOUCH / TYPE */
    "SET u1 a", "SET u2 b", "UNLINK u1 u2 nokey u1", "EXISTS u1 u2", "SET t1 a", "TOUCH t1 t1 nokey", "TOUCH nokey",
    "TYPE t1", "TYPE nokey", "TYPE", "UNLINK",
    /* EXPIREAT / PEXPIREAT / EXPIRETIME / PEXPIRETIME */
    "SET e1 v", "EXPIREAT e1 4102444800", "EXPIRETIME e1", "TTL nokey", "EXPIRETIME nokey", "PEXPIRETIME nokey",
    "SET e2 v", "EXPIRETIME e2", "PEXPIRETIME e2", "EXPIREAT e2 1", "GET e2", "EXPIREAT nokey 4102444800",
    "EXPIREAT e1 abc", "EXPIREAT e1 9223372036854775807", "PEXPIREAT e1 9223372036854775807",
    "EXPIREAT e1 4102444900 NX", "EXPIREAT e1 4102444900 XX", "EXPIRETIME e1", "EXPIREAT e1 4102444800 GT",
    "EXPIREAT e1 4102444000 LT", "EXPIRETIME e1", "PEXPIREAT e1 4102444800000 GT", "EXPIRETIME e1",
    "EXPIREAT e1 1 NX XX", "EXPIREAT e1 1 GT LT", "EXPIREAT e1 1 BOGUS", "PEXPIREAT e1", "EXPIRETIME",
    /* EXPIRE's option combinations on a key without a TTL (XX LT is 0) */
    "SET x1 v", "EXPIRE x1 200 LT XX", "TTL x1", "EXPIRE x1 200 XX", "EXPIRE x1 200 GT", "TTL x1",
    "EXPIRE x1 200 LT", "TTL x1", "EXPIRE x1 100 LT XX", "TTL x1", "EXPIRE x1 300 GT XX", "TTL x1",
    "EXPIRE x1 50 NX", "PERSIST x1", "EXPIRE x1 50 NX", "TTL x1",
    /* GETRANGE / SUBSTR */
    "SET r \"This is a string\"", "GETRANGE r 0 3", "GETRANGE r -3 -1", "GETRANGE r 0 -1", "GETRANGE r 10 100",
    "GETRANGE r 5 3", "GETRANGE r -1 -5", "GETRANGE r -100 2", "GETRANGE r 0 -100", "GETRANGE r x 1",
    "GETRANGE r 1 9223372036854775807", "SUBSTR r 0 3", "GETRANGE nokey 0 1", "GETRANGE r 0", "SET empty \"\"",
    "GETRANGE empty 0 -1",
    /* GETBIT / BITCOUNT */
    "SET bits foobar", "BITCOUNT bits", "BITCOUNT bits 0 0", "BITCOUNT bits 1 1", "BITCOUNT bits 1 1 BYTE",
    "BITCOUNT bits 5 30 BIT", "BITCOUNT bits -1 -1", "BITCOUNT bits -1 -5", "BITCOUNT bits 0 -1 BIT",
    "BITCOUNT bits 0 1 BOO", "BITCOUNT bits x 1", "BITCOUNT bits 0", "BITCOUNT nokey", "BITCOUNT nokey 0 1",
    "BITCOUNT bits 1 100", "BITCOUNT bits -100 -99", "BITCOUNT empty", "BITCOUNT bits 3 17 BIT",
    "GETBIT bits 1", "GETBIT bits 7", "GETBIT bits 100", "GETBIT bits -1", "GETBIT bits x",
    "GETBIT bits 4294967296", "GETBIT bits 4294967295", "GETBIT nokey 0", "GETBIT bits",
    /* BITPOS: the bit is checked before the key is read, the range after */
    "SET bp \"\\xff\\xf0\\x00\"", "BITPOS bp 0", "BITPOS bp 1", "BITPOS bp 1 1", "BITPOS bp 0 1", "BITPOS bp 0 0 0",
    "BITPOS bp 1 2", "BITPOS bp 1 2 -1", "BITPOS bp 0 2 -1", "BITPOS bp 1 7 15 BIT", "BITPOS bp 0 7 15 BIT",
    "BITPOS bp 0 3 11 BIT", "BITPOS bp 1 12 23 BIT", "BITPOS bp 0 0 7 BIT", "BITPOS bp 0 0 -1 BIT",
    "BITPOS bp 1 -3 -1 BIT", "BITPOS bp 1 5 2", "BITPOS bp 1 -1 -5", "BITPOS bp 2", "BITPOS bp x", "BITPOS bp 1 x",
    "BITPOS bp 1 0 x", "BITPOS bp 1 0 1 BOO", "BITPOS bp 1 x 1 BOO", "BITPOS bp 1 0 1 BIT extra", "BITPOS bp 1 0 1 BYTE",
    "BITPOS nokey 1", "BITPOS nokey 0", "BITPOS nokey 0 x", "BITPOS nokey 1 0 1 BOO", "BITPOS nokey 1 0 1 BIT extra",
    "BITPOS nokey 2", "SET ones \"\\xff\\xff\"", "BITPOS ones 0", "BITPOS ones 0 0", "BITPOS ones 0 0 -1", "BITPOS ones 0 1",
    "BITPOS ones 0 0 15 BIT", "BITPOS ones 1 100", "BITPOS ones 0 100", "SET zeros \"\\x00\\x00\"", "BITPOS zeros 1",
    "BITPOS zeros 0", "BITPOS zeros 1 0 -1 BIT", "BITPOS empty 0", "BITPOS empty 1", "BITPOS empty 0 0",
    "BITPOS empty 0 0 0 BIT", "BITPOS bp",
    /* LCS (its keys in one slot: {foo}) */
    "SET {foo}a ohmytext", "SET {foo}b mynewtext", "LCS {foo}a {foo}b", "LCS {foo}a {foo}b LEN", "LCS {foo}a {foo}b IDX",
    "LCS {foo}a {foo}b IDX MINMATCHLEN 4", "LCS {foo}a {foo}b IDX MINMATCHLEN 4 WITHMATCHLEN",
    "LCS {foo}a {foo}b IDX WITHMATCHLEN", "LCS {foo}a {foo}b IDX MINMATCHLEN -5", "LCS {foo}a {foo}b IDX LEN",
    "LCS {foo}a {foo}b LEN IDX", "LCS {foo}a {foo}b MINMATCHLEN", "LCS {foo}a {foo}b MINMATCHLEN x",
    "LCS {foo}a {foo}b BOGUS", "LCS {foo}a {foo}nokey", "LCS {foo}n1 {foo}n2 IDX", "LCS {foo}n1 {foo}a LEN", "LCS {foo}a",
    "LCS {foo}a {foo}a IDX WITHMATCHLEN", "SET {l}1 abcabcabcxyzxyz", "SET {l}2 xyzabcxyzaaabc", "LCS {l}1 {l}2",
    "LCS {l}1 {l}2 IDX WITHMATCHLEN", "LCS {l}2 {l}1 IDX WITHMATCHLEN MINMATCHLEN 2", "LCS {l}1 {l}2 len",
    "LCS {l}1 {l}2 idx minmatchlen 3 withmatchlen",
    /* introspection with deterministic answers */
    "COMMAND GETKEYS set a b", "COMMAND GETKEYS ping x", "COMMAND GETKEYS nosuch x", "COMMAND GETKEYS get a b",
    "COMMAND GETKEYS mset a", "COMMAND GETKEYS mset a b c d", "COMMAND GETKEYS del a b", "COMMAND GETKEYS set a",
    "COMMAND GETKEYS cluster keyslot", "COMMAND GETKEYS get", "COMMAND LIST x", "COMMAND LIST FILTERBY bogus x",
    "COMMAND LIST FILTERBY MODULE x", "COMMAND LIST FILTERBY PATTERN getb*", "COMMAND LIST FILTERBY PATTERN",
    "CONFIG SET foo bar", "CONFIG SET maxclients", "CONFIG SET timeout 5 foo", "CONFIG SET databases 3",
    "CONFIG SET timeout abc", "CONFIG SET timeout 7", "CONFIG GET timeout", "CONFIG SET timeout 0",
    "CONFIG RESETSTAT x", "CONFIG RESETSTAT", "CONFIG GET", "CLIENT NO-EVICT on", "CLIENT NO-EVICT OFF",
    "CLIENT NO-EVICT x", "CLIENT NO-EVICT",
    /* the first set, beside them */
    "INCR n", "INCRBY n 10", "APPEND n 5", "STRLEN n", "GETDEL n", "GETDEL n", "MSET a 1 b 2", "MGET a b nokey",
    "EXISTS a b nokey a", "DEL a b nokey", "SET k v NX", "SET k v XX GET", "SET k w GET", "SET k v EX 0",
    "TTL k", "PTTL nokey", "PERSIST k",
};

START_TEST(strings_and_keys)
{
    it_begin("resp_vs_redis");
    int rport = it_free_ports(1);
    char rp[16];
    snprintf(rp, sizeof rp, "%d", rport);
    const char *rargv[] = {"/usr/bin/redis-server", "--port", rp, "--bind", "127.0.0.1", "--save", "",
                           "--appendonly", "no", NULL};
    ck_assert_ptr_nonnull(it_spawn("redis", NULL, rargv));
    int peer = it_free_ports(1), lport = it_free_ports(1);
    char port[16], lp[16], finder[64];
    snprintf(port, sizeof port, "%d", peer);
    snprintf(lp, sizeof lp, "%d", lport);
    snprintf(finder, sizeof finder, "127.0.0.1:%d", peer);
    const char *largs[] = {"--port", port, "--port-range", "1", "--ip-finder", finder, "--resp-port", lp, NULL};
    ck_assert_ptr_nonnull(it_latticed("s0", largs));
    port_ctx rc = {rport}, lc = {lport};
    ck_assert_msg(it_wait_for(answers_ping, &rc, 20000), "redis-server never answered");
    ck_assert_msg(it_wait_for(answers_ping, &lc, 20000), "latticed never answered");
    int rfd = connect_port(rport), lfd = connect_port(lport);
    ck_assert(rfd >= 0 && lfd >= 0);
    /* Wait until the grid serves writes (its cache exists). */
    static char want[1 << 16], got[1 << 16];
    for (int t = 0; t < 200; t++) {
        ask(lfd, "SET __probe 1", got, sizeof got);
        if (!strcmp(got, "+OK\r\n")) break;
        usleep(100 * 1000);
    }
    ask(lfd, "DEL __probe", got, sizeof got);
    for (size_t i = 0; i < sizeof script / sizeof script[0]; i++) {
        size_t nw = ask(rfd, script[i], want, sizeof want);
        size_t ng = ask(lfd, script[i], got, sizeof got);
        ck_assert_msg(nw == ng && !memcmp(want, got, nw), "'%s': redis-server answered\n%s\nlattice answered\n%s",
                      script[i], want, got);
    }
    /* CLIENT REPLY: what is dropped, key commands (answered later) and
     * others mixed in one pipeline. */
    static const char reply_block[] =
        "CLIENT REPLY OFF\r\nSET a 1\r\nGET a\r\nBOGUS\r\nCLIENT REPLY SKIP\r\nCLIENT REPLY ON\r\nGET a\r\n"
        "CLIENT REPLY SKIP\r\nGET a\r\nGET a\r\nCLIENT REPLY SKIP\r\nCLIENT REPLY SKIP\r\nINCR a\r\nINCR a\r\n"
        "CLIENT REPLY bogus\r\nCLIENT REPLY\r\nCLIENT REPLY OFF\r\nCLIENT REPLY SKIP\r\nPING\r\nCLIENT REPLY ON\r\n"
        "CLIENT REPLY SKIP\r\nMSET b 1 c 2\r\nMGET b c\r\nCLIENT REPLY SKIP\r\nPING\r\nDEL a b c\r\n";
    size_t nw = ask_pipeline(rfd, reply_block, want, sizeof want);
    size_t ng = ask_pipeline(lfd, reply_block, got, sizeof got);
    ck_assert_msg(nw == ng && !memcmp(want, got, nw), "CLIENT REPLY: redis-server answered\n%s\nlattice answered\n%s", want, got);
    /* CLIENT INFO: Redis 7.0's fields, in its order (the values differ). */
    ask(rfd, "CLIENT INFO", want, sizeof want);
    ask(lfd, "CLIENT INFO", got, sizeof got);
    char wk[2048] = "", gk[2048] = "";
    for (int side = 0; side < 2; side++) {
        char *src = side ? got : want, *dst = side ? gk : wk, *save = NULL;
        char *body = strstr(src, "\r\n");
        ck_assert_ptr_nonnull(body);
        for (char *t = strtok_r(body + 2, " \r\n", &save); t; t = strtok_r(NULL, " \r\n", &save)) {
            char *eqs = strchr(t, '=');
            if (eqs) strncat(dst, t, (size_t)(eqs - t + 1));
        }
    }
    ck_assert_msg(!strcmp(wk, gk), "CLIENT INFO fields: redis %s, lattice %s", wk, gk);
    /* TIME: two bulk strings, seconds near redis-server's, microseconds < 10^6. */
    ask(rfd, "TIME", want, sizeof want);
    ask(lfd, "TIME", got, sizeof got);
    long long rs, ls, lu;
    ck_assert_msg(sscanf(want, "*2\r\n$%*d\r\n%lld", &rs) == 1, "redis TIME %s", want);
    ck_assert_msg(sscanf(got, "*2\r\n$%*d\r\n%lld\r\n$%*d\r\n%lld", &ls, &lu) == 2, "lattice TIME %s", got);
    ck_assert(llabs(ls - rs) <= 2 && lu >= 0 && lu < 1000000);
    close(rfd);
    close(lfd);
    it_end();
}
END_TEST

int main(int argc, char **argv)
{
    static const it_named tests[] = {
        {"strings_and_keys", &strings_and_keys},
    };
    Suite *s = suite_create("resp_vs_redis");
    TCase *tc = tcase_create("grid");
    tcase_set_timeout(tc, 120);
    it_add_named(tc, tests, sizeof tests / sizeof tests[0], argc, argv);
    suite_add_tcase(s, tc);
    return it_run_suite(s);
}
