/* The it_resp* tests' grid: see resp_grid.h. */
#include "resp_grid.h"

#include <check.h>
#include <jansson.h>
#include <string.h>
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

/* The node index (0..) of slot's primary and first replica in node i's CLUSTER SLOTS, -1 when none. */
void rg_owners_of(int i, int slot, int *primary, int *replica)
{
    *primary = *replica = -1;
    redisContext *c = try_conn(i);
    if (!c) return;
    redisReply *r = redisCommand(c, "CLUSTER SLOTS");
    for (size_t k = 0; r && r->type == REDIS_REPLY_ARRAY && k < r->elements; k++) {
        redisReply *e = r->element[k];
        if (e->elements < 3 || slot < e->element[0]->integer || slot > e->element[1]->integer) continue;
        *primary = (int)e->element[2]->element[1]->integer - resp_base;
        if (e->elements > 3) *replica = (int)e->element[3]->element[1]->integer - resp_base;
    }
    if (r) freeReplyObject(r);
    redisFree(c);
}

/* Every live node names the same live primary of the slot, and (with every
 * node up) the same replica.  After a kill the baseline keeps the dead node
 * for a while, so the slot may have no replica yet. */
bool rg_settled(void *p)
{
    rg_spread *x = p;
    int prim = -2, rep = -2;
    for (int i = 0; i < x->nodes; i++) {
        if (i == x->absent) continue;
        int a, b;
        rg_owners_of(i, x->slot, &a, &b);
        if (x->absent < 0 ? b < 0 : b == x->absent) b = -1;
        if (a < 0 || a == x->absent || (x->absent < 0 && b < 0) || (prim != -2 && (a != prim || b != rep))) return false;
        prim = a;
        rep = b;
    }
    return true;
}

/* The baseline counts the three servers (it grows one at a time after the
 * grid forms: a kill before that leaves the survivors without quorum). */
bool rg_baseline_of_three(void *ctx)
{
    (void)ctx;
    json_t *top = it_top(finder, NULL, NULL);
    bool ok = top && json_integer_value(json_object_get(json_object_get(top, "quorum"), "baseline_nodes")) == 3;
    json_decref(top);
    return ok;
}

int rg_slot_of(const char *k)
{
    const char *o = strchr(k, '{'), *e = o ? strchr(o + 1, '}') : NULL;
    const char *p = k, *end = k + strlen(k);
    if (o && e && e > o + 1) p = o + 1, end = e;
    unsigned crc = 0;
    for (; p < end; p++) {
        crc ^= (unsigned)(unsigned char)*p << 8;
        for (int j = 0; j < 8; j++) crc = (crc & 0x8000) ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
    }
    return (int)(crc & 16383);
}
