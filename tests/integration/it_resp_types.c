/*
 * Value type tags end to end, against a real redis-server in the same test.
 * The first test puts values of every type in below the commands (sorted
 * sets had no command when it was written; it stays a test of the log's
 * typed records): latticed runs with --data-dir, stops,
 * and this test appends PUT records of each type to the end of its log
 * (persist/record.c's encoder, the store API's entry as the change hook
 * logs it); the restarted node replays them into its store.  redis-server
 * holds the same keys (HSET, RPUSH, SADD, ZADD).  Then both answer the same
 * bytes to TYPE, to every string command on them (WRONGTYPE, MGET's nil,
 * LCS's own error), to the commands any type takes (EXISTS, TTL, EXPIRE,
 * PERSIST, DEL) and to SET over them; OBJECT ENCODING names Redis's small
 * encodings; DUMP answers an error rather than a payload it cannot write.
 */
#include <arpa/inet.h>
#include <check.h>
#include <dirent.h>
#include <fcntl.h>
#include <hiredis.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "partition/partition.h"
#include "persist/persist.h"

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

static size_t read_reply(int fd, char *out, size_t cap, const char *what)
{
    redisReader *rd = redisReaderCreate();
    size_t len = 0;
    void *reply = NULL;
    while (!reply) {
        ssize_t k = read(fd, out + len, cap - len - 1);
        ck_assert_msg(k > 0, "no reply to '%s'", what);
        ck_assert_int_eq(redisReaderFeed(rd, out + len, (size_t)k), REDIS_OK);
        len += (size_t)k;
        ck_assert_int_eq(redisReaderGetReply(rd, &reply), REDIS_OK);
    }
    freeReplyObject(reply);
    redisReaderFree(rd);
    out[len] = 0;
    return len;
}

static size_t ask(int fd, const char *line, char *out, size_t cap)
{
    char req[1024];
    int n = snprintf(req, sizeof req, "%s\r\n", line);
    ck_assert_int_eq(write(fd, req, (size_t)n), n);
    return read_reply(fd, out, cap, line);
}

/* Until the node serves writes (a restart from the data directory waits
 * for its copies first). */
static void wait_writes(int fd)
{
    static char got[256];
    for (int t = 0; t < 300; t++) {
        ask(fd, "SET __probe 1", got, sizeof got);
        if (!strcmp(got, "+OK\r\n")) break;
        usleep(100 * 1000);
    }
    ck_assert_str_eq(got, "+OK\r\n");
    ask(fd, "DEL __probe", got, sizeof got);
}

static it_proc *start_node(const char *name, const char *dd, int peer, int lport)
{
    char port[16], lp[16], finder[64];
    snprintf(port, sizeof port, "%d", peer);
    snprintf(lp, sizeof lp, "%d", lport);
    snprintf(finder, sizeof finder, "127.0.0.1:%d", peer);
    const char *args[] = {"--port", port, "--port-range", "1", "--ip-finder", finder, "--resp-port", lp,
                          "--data-dir", dd, "--wal-fsync", "always", NULL};
    it_proc *p = it_latticed(name, args);
    ck_assert_ptr_nonnull(p);
    port_ctx lc = {lport};
    ck_assert_msg(it_wait_for(answers_ping, &lc, 30000), "latticed never answered");
    return p;
}

/* The newest log segment of dd (its start LSN in *start). */
static void last_segment(const char *dd, char *path, size_t cap, uint64_t *start)
{
    DIR *d = opendir(dd);
    ck_assert_ptr_nonnull(d);
    struct dirent *e;
    bool found = false;
    *start = 0;
    while ((e = readdir(d))) {
        uint64_t s;
        if (sscanf(e->d_name, "wal-%16" SCNx64 ".log", &s) != 1) continue;
        if (!found || s > *start) *start = s;
        found = true;
    }
    closedir(d);
    ck_assert_msg(found, "no log segment in %s", dd);
    snprintf(path, cap, "%s/wal-%016" PRIx64 ".log", dd, *start);
}

/* Each key's row as the command redis-server gets would write it (HSET h f
 * v, RPUSH l a, SADD s m, ZADD z 1 m: docs/TYPES.md's layouts), so OBJECT
 * ENCODING, which reads the row, names what Redis names. */
static const struct {
    const char *key;
    uint8_t type;
    const char *row;
    size_t row_len;
} typed[] = {
    {"h", 1, "\001\001\001f\001v", 6}, /* octal: "\x01f" would be one byte */
    {"l", 2, "\001\001\001a", 4},
    {"s", 3, "\002\001\001m", 4},
    {"z", 4, "\001\001\000\000\000\000\000\000\360\077\001m", 12},
    {"{k}a", 1, "\001\001\001f\001v", 6},
};

/* Appends a PUT of each typed key after the last record of the newest
 * segment (over the zeroed room the writer keeps ahead), as the store's
 * change hook logs a put. */
static void append_typed(const char *dd)
{
    char path[1024];
    uint64_t start;
    last_segment(dd, path, sizeof path, &start);
    int fd = open(path, O_RDWR);
    ck_assert_int_ge(fd, 0);
    struct stat st;
    ck_assert_int_eq(fstat(fd, &st), 0);
    uint8_t *buf = malloc((size_t)st.st_size + 1);
    ck_assert_int_eq(pread(fd, buf, (size_t)st.st_size, 0), st.st_size);
    size_t off = 0;
    uint32_t partitions = 0;
    uint64_t top = 0;
    for (;;) {
        lt_rec r;
        size_t used;
        if (lt_rec_decode(buf + off, (size_t)st.st_size - off, &r, &used, NULL) != LATTICE_OK) break;
        if (r.kind == LT_REC_CACHE && r.cache_len == 7 && !memcmp(r.cache, "default", 7))
            partitions = (uint32_t)r.version;
        if (r.version > top) top = r.version;
        off += used;
    }
    free(buf);
    if (!partitions) partitions = 1024; /* the CACHE record is in a checkpoint: the default's count */
    for (size_t i = 0; i < sizeof typed / sizeof typed[0]; i++) {
        const char *k = typed[i].key;
        lt_rec r = {.kind = LT_REC_PUT, .lsn = start + off, .cache = "default", .cache_len = 7,
                    .partition = lattice_partition_of_key(k, strlen(k), partitions), .version = top + 1000 + i,
                    .key = k, .key_len = strlen(k), .value = typed[i].row, .value_len = typed[i].row_len,
                    .type = typed[i].type};
        uint8_t rec[256];
        ck_assert_uint_le(lt_rec_size(&r), sizeof rec);
        size_t n = lt_rec_size(&r);
        lt_rec_encode(&r, rec);
        ck_assert_int_eq(pwrite(fd, rec, n, (off_t)off), (ssize_t)n);
        off += n;
    }
    fsync(fd);
    close(fd);
}

static const char *const script[] = {
    "TYPE h", "TYPE l", "TYPE s", "TYPE z", "TYPE nokey", "EXISTS h l s z nokey",
    /* every string command on another type */
    "GET h", "GET l", "GET s", "GET z", "STRLEN h", "APPEND l x", "INCR s", "DECRBY z 3", "INCRBYFLOAT h 1.5",
    "SETRANGE l 0 x", "GETRANGE s 0 1", "SETBIT z 1 1", "GETBIT h 1", "BITCOUNT l",
    "BITPOS s 1", "GETSET h v", "GETDEL l", "GETEX s", "SET z v GET", "MGET h nokey l s z", "LCS h l",
    "SETNX h v", "SET h v NX",
    /* nothing changed */
    "TYPE h", "TYPE l", "TYPE s", "TYPE z", "OBJECT ENCODING h", "OBJECT ENCODING l", "OBJECT ENCODING s",
    "OBJECT ENCODING z", "OBJECT REFCOUNT h",
};

static const char *const script2[] = {
    /* what any type takes */
    "TTL h", "PTTL h", "EXPIRE h 1000", "TTL h", "TYPE h", "PERSIST h", "TTL h", "TOUCH h l", "DEL l", "TYPE l",
    "UNLINK s", "TYPE s",
    /* a value moves with its type (RENAME, COPY: one transaction op), and
     * MULTI/EXEC runs the same checks */
    "RENAME {k}a {k}b", "TYPE {k}a", "TYPE {k}b", "COPY {k}b {k}c", "TYPE {k}c", "GET {k}c", "MULTI",
    "GET {k}b", "TYPE {k}b", "APPEND {k}b x", "SET {k}x 1", "EXEC", "TYPE {k}b", "GET {k}x",
    /* SET replaces it with a string */
    "SET z str", "TYPE z", "GET z", "SET h str XX", "TYPE h", "GET h", "APPEND h !", "GET h",
};

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* SCAN to the end with TYPE type: the keys found, sorted, comma-separated. */
static void scan_keys(redisContext *c, const char *type, char *out, size_t cap)
{
    char *keys[256];
    size_t n = 0;
    char cursor[64] = "0";
    do {
        redisReply *r = redisCommand(c, "SCAN %s COUNT 100 TYPE %s", cursor, type);
        ck_assert_ptr_nonnull(r);
        ck_assert_int_eq(r->type, REDIS_REPLY_ARRAY);
        ck_assert_uint_eq(r->elements, 2);
        snprintf(cursor, sizeof cursor, "%s", r->element[0]->str);
        for (size_t i = 0; i < r->element[1]->elements && n < 256; i++) keys[n++] = strdup(r->element[1]->element[i]->str);
        freeReplyObject(r);
    } while (strcmp(cursor, "0"));
    qsort(keys, n, sizeof keys[0], cmp_str);
    out[0] = 0;
    for (size_t i = 0; i < n; i++) {
        strncat(out, keys[i], cap - strlen(out) - 2);
        strncat(out, ",", cap - strlen(out) - 1);
        free(keys[i]);
    }
}

/* Each line to both sides: the replies must be the same bytes. */
static void same(int rfd, int lfd, const char *const *lines, size_t n, char *want, char *got, size_t cap)
{
    for (size_t i = 0; i < n; i++) {
        size_t nw = ask(rfd, lines[i], want, cap);
        size_t ng = ask(lfd, lines[i], got, cap);
        ck_assert_msg(nw == ng && !memcmp(want, got, nw), "'%s': redis-server answered\n%s\nlattice answered\n%s",
                      lines[i], want, got);
    }
}

START_TEST(types_put_below_the_commands_answer_as_redis)
{
    it_begin("resp_types");
    int rport = it_free_ports(1);
    char rp[16];
    snprintf(rp, sizeof rp, "%d", rport);
    const char *rargv[] = {"/usr/bin/redis-server", "--port", rp, "--bind", "127.0.0.1", "--save", "",
                           "--appendonly", "no", NULL};
    ck_assert_ptr_nonnull(it_spawn("redis", NULL, rargv));
    port_ctx rc = {rport};
    ck_assert_msg(it_wait_for(answers_ping, &rc, 20000), "redis-server never answered");
    int rfd = connect_port(rport);
    ck_assert_int_ge(rfd, 0);
    static char want[1 << 16], got[1 << 16];
    static const char *const fill[] = {"HSET h f v", "RPUSH l a", "SADD s m", "ZADD z 1 m", "HSET {k}a f v", "SET before 1"};
    for (size_t i = 0; i < sizeof fill / sizeof fill[0]; i++) ask(rfd, fill[i], want, sizeof want);

    char dd[600];
    snprintf(dd, sizeof dd, "%s/data", it_dir());
    int peer = it_free_ports(1), lport = it_free_ports(1);
    it_proc *p = start_node("s0", dd, peer, lport);
    int lfd = connect_port(lport);
    ck_assert_int_ge(lfd, 0);
    wait_writes(lfd);
    ask(lfd, "SET before 1", got, sizeof got);
    ck_assert_str_eq(got, "+OK\r\n");
    close(lfd);
    it_signal(p, SIGTERM);
    ck_assert(it_wait_exit(p, 30000));

    append_typed(dd);
    p = start_node("s0b", dd, peer, lport);
    lfd = connect_port(lport);
    ck_assert_int_ge(lfd, 0);
    wait_writes(lfd);
    ask(lfd, "GET before", got, sizeof got);
    ck_assert_str_eq(got, "$1\r\n1\r\n");

    same(rfd, lfd, script, sizeof script / sizeof script[0], want, got, sizeof want);
    /* SCAN ... TYPE: WALK's answer carries each key's type */
    redisContext *rs = redisConnect("127.0.0.1", rport), *ls = redisConnect("127.0.0.1", lport);
    ck_assert(rs && !rs->err && ls && !ls->err);
    static const char *const types[] = {"string", "hash", "list", "set", "zset", "HASH", "stream"};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        char rk[1024], lk[1024];
        scan_keys(rs, types[i], rk, sizeof rk);
        scan_keys(ls, types[i], lk, sizeof lk);
        ck_assert_msg(!strcmp(rk, lk), "SCAN TYPE %s: redis-server found %s, lattice %s", types[i], rk, lk);
    }
    redisFree(rs);
    redisFree(ls);
    /* DUMP of a hash put below the commands: Redis's plain HASH payload
     * (type 4); Redis's own payload of it (HASH_LISTPACK, 16) RESTOREs
     * here, and the two hold the same fields. */
    ask(lfd, "DUMP h", got, sizeof got);
    ck_assert_msg(!strncmp(got, "$", 1) && strstr(got, "\r\n")[2] == 4, "DUMP h: %s", got);
    redisContext *rc2 = redisConnect("127.0.0.1", rport);
    ck_assert(rc2 && !rc2->err);
    redisReply *d = redisCommand(rc2, "DUMP h");
    ck_assert_int_eq(d->type, REDIS_REPLY_STRING);
    ck_assert_uint_eq((uint8_t)d->str[0], 16);
    char line[2048];
    int n = snprintf(line, sizeof line, "*4\r\n$7\r\nRESTORE\r\n$2\r\nh2\r\n$1\r\n0\r\n$%zu\r\n", d->len);
    ck_assert_int_eq(write(lfd, line, (size_t)n), n);
    ck_assert_int_eq(write(lfd, d->str, d->len), (ssize_t)d->len);
    ck_assert_int_eq(write(lfd, "\r\n", 2), 2);
    read_reply(lfd, got, sizeof got, "RESTORE h2");
    ck_assert_msg(!strcmp(got, "+OK\r\n"), "RESTORE of a hash: %s", got);
    ask(lfd, "HGETALL h2", got, sizeof got);
    ask(rfd, "HGETALL h", want, sizeof want);
    ck_assert_msg(!strcmp(got, want), "HGETALL of the restored hash: lattice %s, redis-server %s", got, want);
    freeReplyObject(d);
    redisFree(rc2);
    same(rfd, lfd, script2, sizeof script2 / sizeof script2[0], want, got, sizeof want);
    close(lfd);
    close(rfd);
    it_end();
}
END_TEST

/* Collections written by commands (HSET, RPUSH, LMOVE, SADD, SPOP and the
 * writes that remove: HDEL, LPOP, SREM, the last member's) with --data-dir
 * and --wal-fsync always: after a kill -9 and a restart from the data
 * directory every read answers the bytes it answered before the kill. */
static const char *const coll_writes[] = {
    "HSET c:h a 1 b 2 c 3", "HDEL c:h b", "HINCRBY c:h n 5", "HSET c:gone f v", "HDEL c:gone f",
    "RPUSH {c}l a b c d", "LPOP {c}l", "LMOVE {c}l {c}m RIGHT LEFT", "LSET {c}l 0 B",
    "SADD c:s 3 1 2 x", "SREM c:s 2", "SADD c:i 5 4 6", "SPOP c:i 3",
};
static const char *const coll_reads[] = {
    "HGETALL c:h", "EXISTS c:gone", "LRANGE {c}l 0 -1", "LRANGE {c}m 0 -1", "SMEMBERS c:s", "SCARD c:s",
    "EXISTS c:i", "TYPE c:h", "TYPE {c}l", "TYPE c:s", "DBSIZE",
};

START_TEST(collections_survive_a_kill_and_a_restart)
{
    it_begin("resp_types_restart");
    char dd[600];
    snprintf(dd, sizeof dd, "%s/data", it_dir());
    int peer = it_free_ports(1), lport = it_free_ports(1);
    it_proc *p = start_node("s0", dd, peer, lport);
    int lfd = connect_port(lport);
    ck_assert_int_ge(lfd, 0);
    wait_writes(lfd);
    static char got[1 << 14], before[sizeof coll_reads / sizeof coll_reads[0]][1 << 12];
    for (size_t i = 0; i < sizeof coll_writes / sizeof coll_writes[0]; i++) {
        ask(lfd, coll_writes[i], got, sizeof got);
        ck_assert_msg(got[0] != '-', "'%s' answered %s", coll_writes[i], got);
    }
    for (size_t i = 0; i < sizeof coll_reads / sizeof coll_reads[0]; i++)
        ask(lfd, coll_reads[i], before[i], sizeof before[i]);
    ck_assert_str_eq(before[0], "*6\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\nc\r\n$1\r\n3\r\n$1\r\nn\r\n$1\r\n5\r\n");
    ck_assert_str_eq(before[3], "*1\r\n$1\r\nd\r\n");
    close(lfd);
    it_signal(p, SIGKILL);
    ck_assert(it_wait_exit(p, 30000));
    p = start_node("s0b", dd, peer, lport);
    lfd = connect_port(lport);
    ck_assert_int_ge(lfd, 0);
    wait_writes(lfd);
    for (size_t i = 0; i < sizeof coll_reads / sizeof coll_reads[0]; i++) {
        ask(lfd, coll_reads[i], got, sizeof got);
        ck_assert_msg(!strcmp(got, before[i]), "'%s' after the restart:\n%s\nbefore the kill:\n%s", coll_reads[i], got,
                      before[i]);
    }
    close(lfd);
    it_end();
}
END_TEST

int main(int argc, char **argv)
{
    static const it_named tests[] = {
        {"types_put_below_the_commands_answer_as_redis", &types_put_below_the_commands_answer_as_redis},
        {"collections_survive_a_kill_and_a_restart", &collections_survive_a_kill_and_a_restart},
    };
    Suite *s = suite_create("resp_types");
    TCase *tc = tcase_create("grid");
    tcase_set_timeout(tc, 180);
    it_add_named(tc, tests, sizeof tests / sizeof tests[0], argc, argv);
    suite_add_tcase(s, tc);
    return it_run_suite(s);
}
