/*
 * verify: `lattice verify` on the data thread - every server's digest of
 * each OWNING copy it holds (rebalance/'s lattice_rebalance_digest_partition:
 * an order-free hash of the entries, their count and the partition's update
 * counter), gathered by LATTICE_GRID_CALL_DIGESTS with CTL_DIGEST, and
 * compared by the caller (copies of one partition must agree).  The wire
 * form of one digest is DIGEST_WIRE bytes, little-endian.
 */
#include <stdio.h>
#include <string.h>

#include "lattice/alloc.h"
#include "ops/ops_int.h"
#include "rebal_exec.h"
#include "rebalance/rebalance.h"

#define MAX_OWNERS (LATTICE_CACHE_MAX_BACKUPS + 1)

static bool self_among(lattice_meta_member *const *own, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (own[i] && own[i]->self) return true;
    return false;
}


#define DIGEST_WIRE 28u /* partition u32, hash u64, size u64, counter u64, little-endian */

static void put_le(uint8_t *b, uint64_t v, int n)
{
    for (int i = 0; i < n; i++) b[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_le(const uint8_t *b, int n)
{
    uint64_t v = 0;
    for (int i = 0; i < n; i++) v |= (uint64_t)b[i] << (8 * i);
    return v;
}

static bool digest_add(lattice_grid_digests *dr, const char *node, uint32_t p, uint64_t hash, uint64_t size, uint64_t counter)
{
    if (dr->n == dr->cap) {
        size_t cap = dr->cap ? dr->cap * 2 : 1024;
        lattice_partition_digest *x = lt_realloc(dr->d, cap * sizeof *x);
        if (!x) return false;
        dr->d = x;
        dr->cap = cap;
    }
    lattice_partition_digest *g = &dr->d[dr->n++];
    memset(g, 0, sizeof *g);
    snprintf(g->node, sizeof g->node, "%s", node ? node : "");
    g->partition = p;
    g->hash = hash;
    g->size = size;
    g->counter = counter;
    return true;
}

/* This node's OWNING copies of c, packed (lt_malloc'd) into *buf. */
static lattice_status own_digests(lattice_meta_cache *c, uint8_t **buf, size_t *len)
{
    *buf = lt_malloc((size_t)c->cfg.partitions * DIGEST_WIRE + 1);
    *len = 0;
    if (!*buf) return LATTICE_ERR_NOMEM;
    for (uint32_t p = 0; p < c->cfg.partitions; p++) {
        lattice_meta_member *own[MAX_OWNERS];
        size_t n = lattice_meta_serving_owners(c, p, own, MAX_OWNERS);
        if (!self_among(own, n)) continue;
        lattice_rebalance_digest g;
        lattice_status st = lattice_rebalance_digest_partition(c->store, p, c->counter[p], &g);
        if (st != LATTICE_OK) {
            lt_free(*buf);
            *buf = NULL;
            return st;
        }
        uint8_t *w = *buf + *len;
        put_le(w, p, 4);
        put_le(w + 4, g.hash, 8);
        put_le(w + 12, g.size, 8);
        put_le(w + 20, g.counter, 8);
        *len += DIGEST_WIRE;
    }
    return LATTICE_OK;
}

bool rebal_unpack_digests(lattice_grid_digests *dr, const char *node, const uint8_t *b, size_t len)
{
    if (len % DIGEST_WIRE) return false;
    for (size_t i = 0; i < len; i += DIGEST_WIRE)
        if (!digest_add(dr, node, (uint32_t)get_le(b + i, 4), get_le(b + i + 4, 8), get_le(b + i + 12, 8),
                        get_le(b + i + 20, 8)))
            return false;
    return true;
}

void rebal_serve_digest(lattice_ops *d, const Latdata__Req *q, const origin *o)
{
    lattice_op_result r = {0};
    lattice_meta_cache *c = lattice_meta_valid(d->meta) ? lattice_meta_cache_of(d->meta, q->cache) : NULL;
    uint8_t *buf = NULL;
    size_t len = 0;
    r.status = c && c->store ? own_digests(c, &buf, &len) : LATTICE_ERR_NO_CACHE;
    r.value = buf;
    r.value_len = len;
    chan_reply(d, o, &r, NULL, 0, false); /* copies the value */
    lt_free(buf);
}

static void digests_finish(lattice_ops *d, bcast *b)
{
    lattice_op_result r = {0};
    if (b->sum < 0) {
        r.status = LATTICE_ERR_TIMEOUT;
        lt_free(b->digests->d);
        lt_free(b->digests);
    } else {
        r.value = b->digests;
        r.value_len = sizeof *b->digests; /* the caller owns it now */
    }
    chan_complete_local(d, b->op, &r);
    lt_free(b);
}

static void digest_settle(lattice_ops *d, pend *p, const Latdata__Resp *rs)
{
    bcast *b = p->b;
    if (!rs || rs->status != LATTICE_OK ||
        !rebal_unpack_digests(b->digests, rs->node, rs->value.data, rs->value.len))
        b->sum = -1;
    if (--b->remaining == 0) digests_finish(d, b);
}

void rebal_start_digests(lattice_ops *d, opx *o)
{
    lattice_op_result r = {0};
    lattice_meta_cache *c = lattice_meta_cache_of(d->meta, o->data);
    bcast *b = c ? lt_calloc(1, sizeof *b) : NULL;
    lattice_grid_digests *dr = b ? lt_calloc(1, sizeof *dr) : NULL;
    if (!dr) {
        lt_free(b);
        r.status = c ? LATTICE_ERR_NOMEM : LATTICE_ERR_NO_CACHE;
        chan_complete_local(d, o, &r);
        return;
    }
    b->kind = CTL_DIGEST;
    b->op = o;
    b->digests = dr;
    b->remaining = 1;
    for (size_t i = 0; i < d->n_peers; i++) {
        peer *p = d->peers[i];
        if (!p->m.server) continue;
        if (p->m.self) {
            uint8_t *buf = NULL;
            size_t len = 0;
            if (!c->store || own_digests(c, &buf, &len) != LATTICE_OK || !rebal_unpack_digests(dr, d->self_id, buf, len))
                b->sum = -1;
            lt_free(buf);
            continue;
        }
        if (!p->dealer) {
            b->sum = -1;
            continue;
        }
        pend *pe = chan_pend_new(d, digest_settle, p);
        Latdata__Req *q = pe ? chan_req_new(CTL_DIGEST, c->cfg.name, NULL, 0, NULL, 0) : NULL;
        if (!q) {
            b->sum = -1;
            continue;
        }
        pe->b = b;
        q->id = pe->id;
        b->remaining++;
        chan_send(d, p, q);
    }
    if (--b->remaining == 0) digests_finish(d, b);
}
