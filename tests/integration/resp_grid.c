/* The it_resp* tests' grid: see resp_grid.h. */
#include "resp_grid.h"

#include <check.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/wait.h>

char finder[64];
int peer_base, resp_base;
it_proc *srv[RG_MAX];
char out_buf[1 << 20];

void start_node(int i, const char *const *extra)
{
    char port[16], rport[16], name[16];
    snprintf(port, sizeof port, "%d", peer_base + i);
    snprintf(rport, sizeof rport, "%d", resp_base + i);
    snprintf(name, sizeof name, "s%d", i);
    const char *args[40] = {"--port", port, "--port-range", "1", "--ip-finder", finder,
                            "--failure-detection-ms", "1000", "--resp-port", rport};
    int k = 10;
    for (int e = 0; extra && extra[e] && k < 38; e++) args[k++] = extra[e];
    args[k] = NULL;
    srv[i] = it_latticed(name, args);
    ck_assert_ptr_nonnull(srv[i]);
}

void start_grid(int n, int capacity, const char *const *extra)
{
    ck_assert_int_le(capacity, RG_MAX);
    peer_base = it_free_ports(capacity);
    resp_base = it_free_ports(capacity);
    snprintf(finder, sizeof finder, "127.0.0.1:%d..%d", peer_base, peer_base + capacity - 1);
    for (int i = 0; i < n; i++) start_node(i, extra);
}

redisContext *try_conn(int i)
{
    struct timeval tv = {10, 0};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", resp_base + i, tv);
    if (c && c->err) {
        redisFree(c);
        return NULL;
    }
    if (c) redisSetTimeout(c, tv);
    return c;
}

redisContext *conn_to(int i)
{
    redisContext *c = try_conn(i);
    ck_assert_msg(c != NULL, "connect to RESP port %d", resp_base + i);
    return c;
}

static bool accepts_writes(void *ctx)
{
    redisContext *c = try_conn(*(int *)ctx);
    if (!c) return false;
    redisReply *r = redisCommand(c, "SET it:probe 1");
    bool ok = r && r->type == REDIS_REPLY_STATUS;
    if (r) freeReplyObject(r);
    redisFree(c);
    return ok;
}

void wait_serving(int i, int timeout_ms)
{
    ck_assert_msg(it_wait_for(accepts_writes, &i, timeout_ms), "node %d serves", i);
}

redisReply *cmd(redisContext *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(c, fmt, ap);
    va_end(ap);
    ck_assert_msg(r != NULL, "no reply to '%s': %s", fmt, c->errstr);
    return r;
}

int run(const char *fmt, ...)
{
    char c[4096], full[4200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c, sizeof c, fmt, ap);
    va_end(ap);
    snprintf(full, sizeof full, "%s 2>&1", c);
    FILE *f = popen(full, "r");
    ck_assert_ptr_nonnull(f);
    size_t n = fread(out_buf, 1, sizeof out_buf - 1, f);
    out_buf[n] = 0;
    int st = pclose(f);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* A counter of server i's INFO stats ("name:"; -1: no answer). */
long long info_stat(int i, const char *name)
{
    redisContext *c = try_conn(i);
    if (!c) return -1;
    redisReply *r = redisCommand(c, "INFO stats");
    long long v = -1;
    const char *s = r && r->str ? strstr(r->str, name) : NULL;
    if (s) v = atoll(s + strlen(name));
    if (r) freeReplyObject(r);
    redisFree(c);
    return v;
}
