/*
 * ops/txn.c without a network: a transaction's sub-operations on a real
 * store (txn_run_local), its watches, RENAME/COPY, malformed requests, and
 * the write list a copy applies (txn_apply_writes) leaving it equal to the
 * primary.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <urcu.h>

#include "run_suite.h"
#include "lattice/alloc.h"
#include "lattice/txn.h"
#include "ops_int.h"
#include "txn/txn.h"

#define PARTS 4
static lattice_region *region;
static lattice_meta_cache prim, copy;
static exec_scratch scratch;
static const uint64_t EPOCH = 77;

static void cache_init(lattice_meta_cache *c)
{
    memset(c, 0, sizeof *c);
    lattice_cache_config_init(&c->cfg, "t");
    c->cfg.partitions = PARTS;
    c->cfg.max_value_bytes = 64;
    lattice_store_config sc = {"t", PARTS, region, NULL, NULL};
    ck_assert_int_eq(lattice_store_create(&sc, &c->store), LATTICE_OK);
    c->counter = lt_calloc(PARTS, sizeof *c->counter);
}

static void setup(void)
{
    rcu_register_thread();
    lattice_region_config rc = {"t", 0, 8, 0, LATTICE_REGION_REJECT};
    ck_assert_int_eq(lattice_region_create(&rc, &region), LATTICE_OK);
    cache_init(&prim);
    cache_init(&copy);
}

static void teardown(void)
{
    exec_scratch_free(&scratch);
    lattice_store_destroy(prim.store);
    lattice_store_destroy(copy.store);
    lt_free(prim.counter);
    lt_free(copy.counter);
    lattice_region_destroy(region);
    rcu_unregister_thread();
}

static uint32_t part(const char *k) { return lattice_partition_of_key(k, strlen(k), PARTS); }

static lattice_op sub(int kind, unsigned flags, const char *k, const char *v, int64_t delta)
{
    lattice_op o = {(lattice_op_kind)kind, flags, NULL, k, strlen(k), v, v ? strlen(v) : 0, delta, 0, 0};
    return o;
}

/* Runs the transaction on prim; results into res[] (values copied into vals). */
static lattice_status run(const lattice_txn_watch *w, size_t nw, const lattice_op *ops, size_t n, uint32_t p,
                          txn_local_out *out, lattice_txn_sub_result *res, size_t max)
{
    size_t cap = lattice_txn_request_size(w, nw, ops, n);
    void *req = malloc(cap);
    ck_assert_uint_eq(lattice_txn_request_encode(w, nw, ops, n, req, cap), cap);
    lattice_status st = txn_run_local(&prim, p, req, cap, EPOCH, &scratch, out);
    free(req);
    if (st != LATTICE_OK) return st;
    lattice_txn_buf b;
    long cnt = lattice_txn_result_begin(&b, out->result, out->result_len);
    ck_assert_int_eq(cnt, out->aborted ? 0 : (long)n);
    for (long i = 0; i < cnt && (size_t)i < max; i++) ck_assert(lattice_txn_result_next(&b, &res[i]));
    return st;
}

static void assert_get(lattice_meta_cache *c, const char *k, const char *want)
{
    void *v = NULL;
    lattice_store_meta m = {0};
    int st = lattice_store_get_copy(c->store, part(k), k, strlen(k), &v, &m);
    if (!want) {
        ck_assert_int_eq(st, LATTICE_ERR_NOT_FOUND);
        return;
    }
    ck_assert_int_eq(st, LATTICE_OK);
    ck_assert_uint_eq(m.value_len, strlen(want));
    ck_assert_int_eq(memcmp(v, want, m.value_len), 0);
    lt_free(v);
}

static void free_out(txn_local_out *o)
{
    lt_free(o->result);
    lt_free(o->writes);
}

START_TEST(subs_run_in_order_and_a_copy_gets_them_all)
{
    /* {t}a and {t}b share a slot, hence a partition. */
    uint32_t p = part("{t}a");
    lattice_op ops[] = {sub(LATTICE_OP_PUT, 0, "{t}a", "1", 0), sub(LATTICE_OP_INCREMENT, 0, "{t}a", NULL, 5),
                        sub(LATTICE_OP_INCREMENT, 0, "{t}b", NULL, 2), sub(LATTICE_OP_GET, 0, "{t}a", NULL, 0),
                        sub(LATTICE_OP_APPEND, 0, "{t}x", "no", 0), sub(LATTICE_OP_INCREMENT, 0, "{t}x", NULL, 1)};
    txn_local_out o;
    lattice_txn_sub_result r[6];
    ck_assert_int_eq(run(NULL, 0, ops, 6, p, &o, r, 6), LATTICE_OK);
    ck_assert(!o.aborted);
    ck_assert_int_eq(r[0].status, LATTICE_OK);
    ck_assert_int_eq(r[1].num, 6);
    ck_assert_int_eq(r[2].num, 2);
    ck_assert_uint_eq(r[3].value_len, 1);
    ck_assert_int_eq(memcmp(r[3].value, "6", 1), 0);
    ck_assert_int_eq(r[4].num, 2);
    ck_assert_int_eq(r[5].status, LATTICE_ERR_INVAL); /* INCR of "no": this sub fails, the others stand */
    ck_assert_uint_eq(o.n_writes, 4);
    ck_assert_uint_eq(prim.counter[p], 4);
    /* The copy applies the one write list and holds what the primary holds. */
    ck_assert_int_eq(txn_apply_writes(&copy, p, o.writes, o.writes_len), LATTICE_OK);
    assert_get(&copy, "{t}a", "6");
    assert_get(&copy, "{t}b", "2");
    assert_get(&copy, "{t}x", "no");
    ck_assert_uint_eq(copy.counter[p], 4);
    free_out(&o);
}
END_TEST

/* A copy keeps the results of the transactions it applied for their
 * resends - in count and in bytes: results of a MiB each stop being kept at
 * the byte budget (their resends learn R_LOST), and the oldest make room
 * only as their slots are taken. */
START_TEST(kept_results_are_bounded_in_bytes)
{
    lattice_ops *d = lt_calloc(1, sizeof *d);
    ck_assert_ptr_nonnull(d);
    size_t big = LATTICE_TXN_RESULT_KEEP_MAX - 64;
    uint8_t *value = lt_calloc(1, 4 + big); /* an empty write list (u32 0), then the result */
    ck_assert_ptr_nonnull(value);
    for (uint64_t seq = 1; seq <= 40; seq++) {
        Latdata__Req q = LATDATA__REQ__INIT;
        q.kind = CTL_REPLICATE_TXN;
        q.partition = part("{t}a");
        q.value.data = value;
        q.value.len = 4 + big;
        q.origin = "issuer";
        q.op_seq = seq;
        ck_assert_int_eq(txn_apply_copy(d, &copy, &q), LATTICE_OK);
        ck_assert_uint_le(txn_kept_bytes(d), LATTICE_TXN_RESULTS_KEPT_BYTES);
    }
    ck_assert_uint_eq(txn_kept_bytes(d), (LATTICE_TXN_RESULTS_KEPT_BYTES / big) * big);
    txn_free(d);
    ck_assert_uint_eq(txn_kept_bytes(d), 0);
    lt_free(value);
    lt_free(d);
}
END_TEST

START_TEST(watch_versions_abort_on_any_change)
{
    uint32_t p = part("{w}k");
    lattice_op put = sub(LATTICE_OP_PUT, 0, "{w}k", "v", 0);
    txn_local_out o;
    lattice_txn_sub_result r[2];
    ck_assert_int_eq(run(NULL, 0, &put, 1, p, &o, r, 1), LATTICE_OK);
    free_out(&o);
    /* WATCH's read: version of the live key, the counter for an absent one, the epoch. */
    lattice_op vers[] = {sub(LATTICE_TXN_VERSION, 0, "{w}k", NULL, 0), sub(LATTICE_TXN_VERSION, 0, "{w}none", NULL, 0)};
    ck_assert_int_eq(run(NULL, 0, vers, 2, p, &o, r, 2), LATTICE_OK);
    ck_assert(r[0].flags & LATTICE_OP_R_FOUND);
    ck_assert(!(r[1].flags & LATTICE_OP_R_FOUND));
    ck_assert_uint_eq(r[0].value_len, 8);
    ck_assert_uint_eq(o.n_writes, 0);
    lattice_txn_watch w[2] = {{"{w}k", 4, LATTICE_TXN_W_VERSION, (uint64_t)r[0].num, EPOCH},
                              {"{w}none", 7, LATTICE_TXN_W_COUNTER, (uint64_t)r[1].num, EPOCH}};
    free_out(&o);
    lattice_op inc = sub(LATTICE_OP_INCREMENT, 0, "{w}n", NULL, 1);
    /* Unchanged: runs. */
    ck_assert_int_eq(run(w, 2, &inc, 1, p, &o, r, 1), LATTICE_OK);
    ck_assert(!o.aborted);
    free_out(&o);
    /* That write moved the partition's counter: the absent key's watch fails (a false abort, documented). */
    ck_assert_int_eq(run(w, 2, &inc, 1, p, &o, r, 1), LATTICE_OK);
    ck_assert(o.aborted);
    ck_assert_uint_eq(o.n_writes, 0);
    free_out(&o);
    assert_get(&prim, "{w}n", "1");
    /* The live key rewritten with the same value: a new version, aborts. */
    ck_assert_int_eq(run(w, 1, &put, 1, p, &o, r, 1), LATTICE_OK);
    ck_assert(!o.aborted);
    free_out(&o);
    ck_assert_int_eq(run(w, 1, &inc, 1, p, &o, r, 1), LATTICE_OK);
    ck_assert(o.aborted);
    free_out(&o);
    /* Another primary (epoch) since the watch: aborts. */
    lattice_op v1 = sub(LATTICE_TXN_VERSION, 0, "{w}k", NULL, 0);
    ck_assert_int_eq(run(NULL, 0, &v1, 1, p, &o, r, 1), LATTICE_OK);
    lattice_txn_watch w2 = {"{w}k", 4, LATTICE_TXN_W_VERSION, (uint64_t)r[0].num, EPOCH + 1};
    free_out(&o);
    ck_assert_int_eq(run(&w2, 1, &inc, 1, p, &o, r, 1), LATTICE_OK);
    ck_assert(o.aborted);
    free_out(&o);
    /* MSETNX's watch: must be absent. */
    lattice_txn_watch abs = {"{w}k", 4, LATTICE_TXN_W_ABSENT, 0, 0};
    ck_assert_int_eq(run(&abs, 1, &inc, 1, p, &o, r, 1), LATTICE_OK);
    ck_assert(o.aborted);
    free_out(&o);
}
END_TEST

START_TEST(rename_and_copy_keep_the_expiry)
{
    uint32_t p = part("{r}src");
    lattice_op put = sub(LATTICE_OP_PUT, 0, "{r}src", "val", 0);
    put.ttl_ms = 100000;
    txn_local_out o;
    lattice_txn_sub_result r[2];
    ck_assert_int_eq(run(NULL, 0, &put, 1, p, &o, r, 1), LATTICE_OK);
    free_out(&o);
    lattice_store_meta m0 = {0}, m1 = {0};
    void *v = NULL;
    ck_assert_int_eq(lattice_store_get_copy(prim.store, p, "{r}src", 6, &v, &m0), LATTICE_OK);
    lt_free(v);
    lattice_op cp = sub(LATTICE_TXN_COPY, 0, "{r}src", "{r}cp", 0);
    ck_assert_int_eq(run(NULL, 0, &cp, 1, p, &o, r, 1), LATTICE_OK);
    ck_assert_int_eq(r[0].status, LATTICE_OK);
    free_out(&o);
    ck_assert_int_eq(run(NULL, 0, &cp, 1, p, &o, r, 1), LATTICE_OK);
    ck_assert_int_eq(r[0].status, LATTICE_ERR_EXISTS); /* no REPLACE */
    free_out(&o);
    lattice_op rn = sub(LATTICE_TXN_RENAME, LATTICE_OP_NX, "{r}src", "{r}cp", 0);
    ck_assert_int_eq(run(NULL, 0, &rn, 1, p, &o, r, 1), LATTICE_OK);
    ck_assert_int_eq(r[0].status, LATTICE_ERR_EXISTS);
    free_out(&o);
    rn.flags = 0;
    rn.value = "{r}dst";
    rn.value_len = 6;
    ck_assert_int_eq(run(NULL, 0, &rn, 1, p, &o, r, 1), LATTICE_OK);
    ck_assert_int_eq(r[0].status, LATTICE_OK);
    ck_assert_uint_eq(o.n_writes, 2);
    ck_assert_int_eq(txn_apply_writes(&copy, p, o.writes, o.writes_len), LATTICE_OK);
    free_out(&o);
    assert_get(&prim, "{r}src", NULL);
    assert_get(&copy, "{r}dst", "val");
    ck_assert_int_eq(lattice_store_get_copy(prim.store, p, "{r}dst", 6, &v, &m1), LATTICE_OK);
    lt_free(v);
    ck_assert_uint_eq(m1.expire_ms, m0.expire_ms);
    ck_assert_int_eq(run(NULL, 0, &rn, 1, p, &o, r, 1), LATTICE_OK);
    ck_assert_int_eq(r[0].status, LATTICE_ERR_NOT_FOUND);
    free_out(&o);
}
END_TEST

START_TEST(bad_requests_change_nothing)
{
    uint32_t p = part("{b}a");
    txn_local_out o;
    /* A key of another partition: INVAL, nothing written. */
    const char *other = NULL;
    char buf[16];
    for (int i = 0; i < 100 && !other; i++) {
        snprintf(buf, sizeof buf, "o%d", i);
        if (part(buf) != p) other = buf;
    }
    lattice_op ops[] = {sub(LATTICE_OP_PUT, 0, "{b}a", "1", 0), sub(LATTICE_OP_PUT, 0, other, "1", 0)};
    ck_assert_int_eq(run(NULL, 0, ops, 2, p, &o, NULL, 0), LATTICE_ERR_INVAL);
    free_out(&o);
    assert_get(&prim, "{b}a", NULL);
    /* Truncated, trailing bytes, a bad kind. */
    size_t cap = lattice_txn_request_size(NULL, 0, ops, 1);
    uint8_t *req = malloc(cap + 1);
    lattice_txn_request_encode(NULL, 0, ops, 1, req, cap);
    for (size_t n = 0; n < cap; n++) {
        ck_assert_int_ne(txn_run_local(&prim, p, req, n, EPOCH, &scratch, &o), LATTICE_OK);
        free_out(&o);
    }
    req[cap] = 0;
    ck_assert_int_eq(txn_run_local(&prim, p, req, cap + 1, EPOCH, &scratch, &o), LATTICE_ERR_INVAL);
    free_out(&o);
    req[9] = LATTICE_OP_SIZE;
    ck_assert_int_eq(txn_run_local(&prim, p, req, cap, EPOCH, &scratch, &o), LATTICE_ERR_INVAL);
    free_out(&o);
    free(req);
    assert_get(&prim, "{b}a", NULL);
    ck_assert_uint_eq(prim.counter[p], 0);
}
END_TEST

/* Seeded random mutations of valid requests and write lists: never a
 * crash or an out-of-bounds read (run it under ASan with LATTICE_SANITIZE),
 * always OK or a clear error. */
START_TEST(mutated_requests_are_refused_or_run)
{
    uint32_t p = part("{m}a");
    lattice_txn_watch w = {"{m}a", 4, LATTICE_TXN_W_COUNTER, 0, EPOCH};
    lattice_op ops[] = {sub(LATTICE_OP_PUT, 0, "{m}a", "1", 0), sub(LATTICE_OP_INCREMENT, 0, "{m}b", NULL, 3),
                        sub(LATTICE_TXN_RENAME, 0, "{m}a", "{m}c", 0), sub(LATTICE_OP_GET, 0, "{m}c", NULL, 0)};
    size_t cap = lattice_txn_request_size(&w, 1, ops, 4);
    uint8_t *good = malloc(cap), *req = malloc(cap);
    lattice_txn_request_encode(&w, 1, ops, 4, good, cap);
    txn_local_out o;
    ck_assert_int_eq(txn_run_local(&prim, p, good, cap, EPOCH, &scratch, &o), LATTICE_OK);
    uint8_t *wl = malloc(o.writes_len ? o.writes_len : 1);
    size_t wlen = o.writes_len;
    memcpy(wl, o.writes, wlen);
    free_out(&o);
    uint8_t *wm = malloc(wlen ? wlen : 1);
    unsigned seed = 12345;
    for (int it = 0; it < 20000; it++) {
        memcpy(req, good, cap);
        int flips = 1 + rand_r(&seed) % 4;
        for (int f = 0; f < flips; f++) req[(size_t)rand_r(&seed) % cap] = (uint8_t)rand_r(&seed);
        size_t n = (size_t)rand_r(&seed) % 8 == 0 ? (size_t)rand_r(&seed) % cap : cap;
        lattice_status st = txn_run_local(&prim, p, req, n, EPOCH, &scratch, &o);
        ck_assert(st == LATTICE_OK || st == LATTICE_ERR_INVAL || st == LATTICE_ERR_TOO_LARGE || st == LATTICE_ERR_RESERVED_KEY);
        if (st == LATTICE_OK) {
            lattice_txn_buf b;
            long k = lattice_txn_result_begin(&b, o.result, o.result_len);
            ck_assert_int_ge(k, 0);
        }
        free_out(&o);
        if (wlen) {
            memcpy(wm, wl, wlen);
            wm[(size_t)rand_r(&seed) % wlen] = (uint8_t)rand_r(&seed);
            txn_apply_writes(&copy, p, wm, (size_t)rand_r(&seed) % (wlen + 1));
        }
    }
    free(good);
    free(req);
    free(wl);
    free(wm);
}
END_TEST

/* ---- txlock.c: locks read off prepared rows ---- */

/* Writes the prepared row of transaction `seq` in the partition of `w` (its
 * one write), reading `r`. */
static void prepare_row(lattice_meta_cache *c, uint64_t seq, const char *r, const char *w, uint64_t version)
{
    uint32_t p = part(w);
    lt_txp_key_ref rr = {r, strlen(r)};
    lt_txp_write ww = {w, "new", strlen(w), 3, false, 0, 0};
    lt_txp_rec rec = {{42, seq}, seq, 0, 1000, 1, 1, &rr, &ww};
    uint8_t *v, k[LT_TXP_KEY_MAX];
    size_t vl, kl = lt_txp_key(PARTS, p, LT_TXP_PREPARED, rec.id, k);
    ck_assert_int_eq(lt_txp_rec_encode(&rec, &v, &vl), LATTICE_OK);
    lattice_store_entry e = {p, k, kl, v, vl, 0, version, 0};
    ck_assert_int_eq(lattice_store_put(c->store, &e, 0), LATTICE_OK);
    lt_free(v);
}

static void finish_row(lattice_meta_cache *c, uint64_t seq, uint32_t p, uint64_t version)
{
    uint8_t k[LT_TXP_KEY_MAX];
    size_t kl = lt_txp_key(PARTS, p, LT_TXP_PREPARED, (lt_txid){42, seq}, k);
    ck_assert_int_eq(lattice_store_remove_v(c->store, p, k, kl, version), LATTICE_OK);
}

/* The locks follow the rows: a prepared row locks what it writes against
 * reads and writes and what it reads against writes; its removal frees
 * them; a store replaced (a restart's recovered copy) is read afresh. */
START_TEST(locks_are_read_off_the_prepared_rows)
{
    /* Two keys of one partition. */
    char w[16] = "w", r[16] = "r";
    for (int i = 0; part(r) != part(w); i++) snprintf(r, sizeof r, "r%d", i);
    uint32_t p = part(w);
    ck_assert(!txlock_blocks(&prim, p, w, 1, true));
    prepare_row(&prim, 1, r, w, 10);
    ck_assert(txlock_blocks(&prim, p, w, strlen(w), false));
    ck_assert(txlock_blocks(&prim, p, w, strlen(w), true));
    ck_assert(!txlock_blocks(&prim, p, r, strlen(r), false)); /* readers share */
    ck_assert(txlock_blocks(&prim, p, r, strlen(r), true));
    ck_assert(!txlock_blocks(&prim, p, "other", 5, true));
    bool unknown;
    ck_assert_uint_eq(lt_txp_locks_count(txlock_table(&prim, p, &unknown)), 1);
    prepare_row(&prim, 2, r, w, 11); /* a second one (the table does not judge: the prepare did) */
    ck_assert_uint_eq(lt_txp_locks_count(txlock_table(&prim, p, &unknown)), 2);
    finish_row(&prim, 1, p, 12);
    ck_assert(txlock_blocks(&prim, p, w, strlen(w), false)); /* 2 still holds it */
    finish_row(&prim, 2, p, 13);
    ck_assert(!txlock_blocks(&prim, p, w, strlen(w), false));
    ck_assert(!txlock_blocks(&prim, p, r, strlen(r), true));
    /* The copy applied the same row by another path: it holds the lock too. */
    prepare_row(&copy, 3, r, w, 10);
    ck_assert(txlock_blocks(&copy, p, w, strlen(w), true));
    /* A replaced store is read afresh. */
    lattice_store *old = copy.store;
    lattice_store_config sc = {"t2", PARTS, region, NULL, NULL};
    ck_assert_int_eq(lattice_store_create(&sc, &copy.store), LATTICE_OK);
    ck_assert(!txlock_blocks(&copy, p, w, strlen(w), true));
    lattice_store_destroy(copy.store);
    copy.store = old;
    ck_assert(txlock_blocks(&copy, p, w, strlen(w), true));
    /* A clear drops it. */
    ck_assert_int_eq(lattice_store_clear(copy.store, p), LATTICE_OK);
    ck_assert(!txlock_blocks(&copy, p, w, strlen(w), true));
    txlock_cache_gone(&prim);
    txlock_cache_gone(&copy);
}
END_TEST

/* PREPARE, FINISH and DECIDE run on a real store: the prepared row holds
 * the writes back and locks the keys, on the primary and on a copy that
 * applied the write list; FINISH applies them (commit) or not (abort) and
 * frees the locks; a watch that changed aborts the prepare; the first
 * decision stands. */
static void put_le(uint8_t *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static lattice_status run_cross(const lattice_txn_watch *w, size_t nw, const lattice_op *ops, size_t n, uint32_t p,
                                txn_local_out *out, lattice_txn_sub_result *res)
{
    lattice_status st = run(w, nw, ops, n, p, out, res, n);
    if (st == LATTICE_OK && out->writes_len)
        ck_assert_int_eq(txn_apply_writes(&copy, p, out->writes, out->writes_len), LATTICE_OK);
    return st;
}

/* Which of keys[0..n) txlock_blocks for a read and for a write: bits. */
static unsigned blocked(lattice_meta_cache *c, uint32_t p, const char *const *keys, size_t n)
{
    unsigned bits = 0;
    for (size_t i = 0; i < n; i++) {
        if (txlock_blocks(c, p, keys[i], strlen(keys[i]), false)) bits |= 1u << (2 * i);
        if (txlock_blocks(c, p, keys[i], strlen(keys[i]), true)) bits |= 2u << (2 * i);
    }
    return bits;
}

/* What the table says now is what a table read afresh off the rows says. */
static unsigned same_as_read_afresh(lattice_meta_cache *c, uint32_t p, const char *const *keys, size_t n)
{
    unsigned kept = blocked(c, p, keys, n);
    txlock_cache_gone(c);
    ck_assert_uint_eq(blocked(c, p, keys, n), kept);
    return kept;
}

/* The primary keeps its lock table up as its own PREPAREs write rows and
 * its FINISHes remove them (instead of reading it off the rows again at
 * every change): after each step, the table it kept blocks exactly what a
 * table read afresh off the rows blocks. */
START_TEST(a_primarys_lock_table_follows_its_own_prepares_and_finishes)
{
    char a[16] = "a", b[16] = "b", c[16] = "c";
    for (int i = 0; part(b) != part(a); i++) snprintf(b, sizeof b, "b%d", i);
    for (int i = 0; part(c) != part(a); i++) snprintf(c, sizeof c, "c%d", i);
    const char *keys[] = {a, b, c};
    uint32_t p = part(a);
    txn_local_out out;
    lattice_txn_sub_result res[4];
    uint8_t hdr[LATTICE_TXN_PREP_BYTES], k[LT_TXP_KEY_MAX], commit = LATTICE_TXN_COMMIT, abort = LATTICE_TXN_ABORT;
    /* 1 writes a (b stays free throughout). */
    put_le(hdr, 77, 8), put_le(hdr + 8, 1, 8), put_le(hdr + 16, 1000, 8), put_le(hdr + 24, p, 4), put_le(hdr + 28, 5000, 8);
    lattice_op prep[2] = {{(lattice_op_kind)LATTICE_TXN_PREPARE, 0, NULL, a, strlen(a), (const char *)hdr, sizeof hdr, 0, 0, 0},
                          sub(LATTICE_OP_PUT, 0, a, "1", 0)};
    ck_assert_int_eq(run_cross(NULL, 0, prep, 2, p, &out, res), LATTICE_OK);
    free_out(&out);
    ck_assert_uint_eq(same_as_read_afresh(&prim, p, keys, 3), 3u); /* a: both */
    /* 2 writes c: added to the table just read. */
    put_le(hdr + 8, 2, 8), put_le(hdr + 16, 1001, 8);
    prep[0].key = c, prep[0].key_len = strlen(c);
    prep[1] = sub(LATTICE_OP_PUT, 0, c, "2", 0);
    ck_assert_int_eq(run_cross(NULL, 0, prep, 2, p, &out, res), LATTICE_OK);
    ck_assert(!out.aborted);
    free_out(&out);
    ck_assert_uint_eq(same_as_read_afresh(&prim, p, keys, 3), 3u | 3u << 4);
    /* 1 commits: a is free, c still held. */
    size_t kl = lt_txp_key(PARTS, p, LT_TXP_PREPARED, (lt_txid){77, 1}, k);
    lattice_op fin = {(lattice_op_kind)LATTICE_TXN_FINISH, 0, NULL, (const char *)k, kl, (const char *)&commit, 1, 0, 0, 0};
    ck_assert_int_eq(run_cross(NULL, 0, &fin, 1, p, &out, res), LATTICE_OK);
    free_out(&out);
    ck_assert_uint_eq(same_as_read_afresh(&prim, p, keys, 3), 3u << 4);
    assert_get(&prim, a, "1");
    /* 2 aborts: nothing held, c never written. */
    kl = lt_txp_key(PARTS, p, LT_TXP_PREPARED, (lt_txid){77, 2}, k);
    fin.key_len = kl;
    fin.value = (const char *)&abort;
    ck_assert_int_eq(run_cross(NULL, 0, &fin, 1, p, &out, res), LATTICE_OK);
    free_out(&out);
    ck_assert_uint_eq(same_as_read_afresh(&prim, p, keys, 3), 0u);
    assert_get(&prim, c, NULL);
    txlock_cache_gone(&prim);
    txlock_cache_gone(&copy);
}
END_TEST

START_TEST(prepare_finish_and_decide)
{
    char a[16] = "a", b[16] = "b";
    for (int i = 0; part(b) != part(a); i++) snprintf(b, sizeof b, "b%d", i);
    uint32_t p = part(a);
    txn_local_out out;
    lattice_txn_sub_result res[4];
    lattice_op put = sub(LATTICE_OP_PUT, 0, b, "old", 0);
    ck_assert_int_eq(run_cross(NULL, 0, &put, 1, p, &out, res), LATTICE_OK);
    free_out(&out);
    /* Transaction 7 read b (version as it is) and writes a. */
    lattice_store_meta m = {0};
    ck_assert_int_eq(lattice_store_get(prim.store, p, b, strlen(b), NULL, 0, &m), LATTICE_ERR_TOO_LARGE);
    lattice_txn_watch w = {b, strlen(b), LATTICE_TXN_W_VERSION, m.version, EPOCH};
    uint8_t hdr[LATTICE_TXN_PREP_BYTES];
    put_le(hdr, 99, 8), put_le(hdr + 8, 7, 8), put_le(hdr + 16, 1000, 8), put_le(hdr + 24, 3, 4), put_le(hdr + 28, 5000, 8);
    lattice_op prep[2] = {{(lattice_op_kind)LATTICE_TXN_PREPARE, 0, NULL, a, strlen(a), (const char *)hdr, sizeof hdr, 0, 0, 0},
                          sub(LATTICE_OP_PUT, 0, a, "new", 0)};
    ck_assert_int_eq(run_cross(&w, 1, prep, 2, p, &out, res), LATTICE_OK);
    ck_assert(!out.aborted);
    ck_assert_int_eq(res[0].status, LATTICE_OK);
    ck_assert_int_eq(res[0].num, 1);
    free_out(&out);
    assert_get(&prim, a, NULL); /* not applied yet */
    for (lattice_meta_cache *c = &prim; c; c = c == &prim ? &copy : NULL) {
        ck_assert(txlock_blocks(c, p, a, strlen(a), false));
        ck_assert(txlock_blocks(c, p, b, strlen(b), true));
        ck_assert(!txlock_blocks(c, p, b, strlen(b), false));
    }
    /* Again: prepared already, nothing written. */
    ck_assert_int_eq(run_cross(&w, 1, prep, 2, p, &out, res), LATTICE_OK);
    ck_assert_int_eq(res[0].num, 0);
    ck_assert_uint_eq(out.n_writes, 0);
    free_out(&out);
    /* Commit. */
    uint8_t k[LT_TXP_KEY_MAX], commit = LATTICE_TXN_COMMIT;
    size_t kl = lt_txp_key(PARTS, p, LT_TXP_PREPARED, (lt_txid){99, 7}, k);
    lattice_op fin = {(lattice_op_kind)LATTICE_TXN_FINISH, 0, NULL, (const char *)k, kl, (const char *)&commit, 1, 0, 0, 0};
    ck_assert_int_eq(run_cross(NULL, 0, &fin, 1, p, &out, res), LATTICE_OK);
    ck_assert_int_eq(res[0].num, 1);
    free_out(&out);
    assert_get(&prim, a, "new");
    assert_get(&copy, a, "new");
    for (lattice_meta_cache *c = &prim; c; c = c == &prim ? &copy : NULL) {
        ck_assert(!txlock_blocks(c, p, a, strlen(a), true));
        ck_assert(!txlock_blocks(c, p, b, strlen(b), true));
    }
    ck_assert_int_eq(run_cross(NULL, 0, &fin, 1, p, &out, res), LATTICE_OK);
    ck_assert_int_eq(res[0].num, 0); /* finished already */
    free_out(&out);
    /* A prepare whose read changed since aborts and holds nothing. */
    put_le(hdr + 8, 8, 8);
    ck_assert_int_eq(run_cross(&w, 1, prep, 2, p, &out, res), LATTICE_OK);
    ck_assert(!out.aborted); /* b did not change: prepared */
    free_out(&out);
    uint8_t abort = LATTICE_TXN_ABORT;
    kl = lt_txp_key(PARTS, p, LT_TXP_PREPARED, (lt_txid){99, 8}, k);
    lattice_op fin8 = {(lattice_op_kind)LATTICE_TXN_FINISH, 0, NULL, (const char *)k, kl, (const char *)&abort, 1, 0, 0, 0};
    ck_assert_int_eq(run_cross(NULL, 0, &fin8, 1, p, &out, res), LATTICE_OK);
    free_out(&out);
    assert_get(&prim, a, "new"); /* aborted: not applied */
    ck_assert(!txlock_blocks(&prim, p, a, strlen(a), true));
    w.version += 1000; /* as if b had changed */
    put_le(hdr + 8, 9, 8);
    ck_assert_int_eq(run_cross(&w, 1, prep, 2, p, &out, res), LATTICE_OK);
    ck_assert(out.aborted);
    free_out(&out);
    ck_assert(!txlock_blocks(&prim, p, a, strlen(a), true));
    /* The first decision stands. */
    kl = lt_txp_key(PARTS, p, LT_TXP_DECISION, (lt_txid){99, 7}, k);
    lattice_op dec = {(lattice_op_kind)LATTICE_TXN_DECIDE, 0, NULL, (const char *)k, kl, (const char *)&commit, 1, 0, 0, 0};
    ck_assert_int_eq(run_cross(NULL, 0, &dec, 1, p, &out, res), LATTICE_OK);
    ck_assert_int_eq(res[0].num, LATTICE_TXN_COMMIT);
    free_out(&out);
    dec.value = (const char *)&abort;
    ck_assert_int_eq(run_cross(NULL, 0, &dec, 1, p, &out, res), LATTICE_OK);
    ck_assert_int_eq(res[0].num, LATTICE_TXN_COMMIT);
    free_out(&out);
    /* A decision alone holds no lock: the read path asks for prepared rows. */
    uint8_t pre[4];
    size_t pl = lt_txp_key_prefix(LT_TXP_PREPARED, pre);
    ck_assert(lattice_store_reserved_held(prim.store, p, NULL, 0));
    ck_assert(!lattice_store_reserved_held(prim.store, p, pre, pl));
    /* Every participant finished: FORGET removes the decision on every
     * copy (answering what stood), and the partition holds no internal
     * row any more; a second FORGET finds none. */
    uint8_t forget = LATTICE_TXN_FORGET;
    dec.value = (const char *)&forget;
    ck_assert_int_eq(run_cross(NULL, 0, &dec, 1, p, &out, res), LATTICE_OK);
    ck_assert_int_eq(res[0].num, LATTICE_TXN_COMMIT);
    free_out(&out);
    for (lattice_meta_cache *c = &prim; c; c = c == &prim ? &copy : NULL) {
        ck_assert_int_eq(lattice_store_get(c->store, p, k, kl, NULL, 0, &m), LATTICE_ERR_NOT_FOUND);
        ck_assert(!lattice_store_reserved_held(c->store, p, NULL, 0));
    }
    ck_assert_int_eq(run_cross(NULL, 0, &dec, 1, p, &out, res), LATTICE_OK);
    ck_assert_int_eq(res[0].num, 0);
    free_out(&out);
    /* FORGET is a decision's word only: a FINISH with it is refused. */
    kl = lt_txp_key(PARTS, p, LT_TXP_PREPARED, (lt_txid){99, 7}, k);
    fin.value = (const char *)&forget;
    ck_assert_int_eq(run_cross(NULL, 0, &fin, 1, p, &out, res), LATTICE_ERR_INVAL);
    free_out(&out); /* what the refused request had begun */
    txlock_cache_gone(&prim);
    txlock_cache_gone(&copy);
}
END_TEST

/* A prepared write keeps the absolute expiry and the type it was prepared
 * with (a transaction across slots over RESP: INCR of a key with a TTL). */
START_TEST(a_prepared_write_keeps_its_expiry_and_type)
{
    const char *a = "a";
    uint32_t p = part(a);
    uint64_t exp = lt_wall_ms() + 100000;
    uint8_t hdr[LATTICE_TXN_PREP_BYTES];
    put_le(hdr, 5, 8), put_le(hdr + 8, 1, 8), put_le(hdr + 16, 1000, 8), put_le(hdr + 24, p, 4), put_le(hdr + 28, 5000, 8);
    lattice_op w = sub(LATTICE_OP_PUT, 0, a, "v", 0);
    w.ttl_ms = exp;
    w.delta = LATTICE_TYPE_HASH;
    lattice_op prep[2] = {{(lattice_op_kind)LATTICE_TXN_PREPARE, 0, NULL, a, 1, (const char *)hdr, sizeof hdr, 0, 0, 0}, w};
    txn_local_out out;
    lattice_txn_sub_result res[2];
    ck_assert_int_eq(run_cross(NULL, 0, prep, 2, p, &out, res), LATTICE_OK);
    free_out(&out);
    uint8_t k[LT_TXP_KEY_MAX], commit = LATTICE_TXN_COMMIT;
    size_t kl = lt_txp_key(PARTS, p, LT_TXP_PREPARED, (lt_txid){5, 1}, k);
    lattice_op fin = {(lattice_op_kind)LATTICE_TXN_FINISH, 0, NULL, (const char *)k, kl, (const char *)&commit, 1, 0, 0, 0};
    ck_assert_int_eq(run_cross(NULL, 0, &fin, 1, p, &out, res), LATTICE_OK);
    free_out(&out);
    for (lattice_meta_cache *c = &prim; c; c = c == &prim ? &copy : NULL) {
        lattice_store_meta m = {0};
        char v[4];
        ck_assert_int_eq(lattice_store_get(c->store, p, a, 1, v, sizeof v, &m), LATTICE_OK);
        ck_assert_uint_eq(m.expire_ms, exp);
        ck_assert_uint_eq(m.type, LATTICE_TYPE_HASH);
    }
    /* A type past the last one is refused, nothing prepared. */
    w.delta = 99;
    prep[1] = w;
    put_le(hdr + 8, 2, 8);
    ck_assert_int_ne(run_cross(NULL, 0, prep, 2, p, &out, res), LATTICE_OK);
    free_out(&out);
    txlock_cache_gone(&prim);
    txlock_cache_gone(&copy);
}
END_TEST

/* Wait-die's "die" waits a little first: the first meeting parks until
 * due, a meeting past due dies, and a prepare granted meanwhile is forgotten. */
START_TEST(a_younger_prepare_is_patient_before_it_dies)
{
    uint64_t due = 0, now = 1000000;
    ck_assert(!txlock_patience(&prim, 1, 5, 7, now, &due));
    ck_assert_uint_gt(due, now);
    uint64_t first_due = due;
    ck_assert(!txlock_patience(&prim, 1, 5, 7, now + 1, &due)); /* again, before due: same due */
    ck_assert_uint_eq(due, first_due);
    ck_assert(!txlock_patience(&prim, 2, 5, 7, now + 1, &due)); /* another partition: its own patience */
    ck_assert(txlock_patience(&prim, 1, 5, 7, first_due, &due)); /* due: dies */
    ck_assert(!txlock_patience(&prim, 1, 5, 7, first_due, &due)); /* a new meeting starts anew */
    txlock_patience_end(&prim, 1, 5, 7);
    ck_assert(!txlock_patience(&prim, 1, 5, 7, first_due + 1, &due)); /* forgotten: patient again */
    ck_assert_uint_eq(due, first_due + 1 + (first_due - now));
    txlock_cache_gone(&prim);
}
END_TEST

/* ---- txn_eval: a request worked out on given entries alone ---- */

typedef struct final {
    char key[16], value[32];
    bool live;
    uint64_t expire;
} final;

static final finals[16];
static size_t n_finals;

static lattice_status take_final(void *arg, const void *key, size_t key_len, bool live, const void *value,
                                 size_t value_len, uint64_t expire_ms, uint8_t type)
{
    (void)arg;
    ck_assert_uint_eq(type, 0);
    ck_assert_uint_lt(n_finals, 16);
    final *f = &finals[n_finals++];
    snprintf(f->key, sizeof f->key, "%.*s", (int)key_len, (const char *)key);
    snprintf(f->value, sizeof f->value, "%.*s", (int)value_len, live ? (const char *)value : "");
    f->live = live;
    f->expire = expire_ms;
    return LATTICE_OK;
}

static const final *final_of(const char *k)
{
    const final *f = NULL;
    for (size_t i = 0; i < n_finals; i++)
        if (!strcmp(finals[i].key, k)) f = &finals[i]; /* the last one: a key may come more than once */
    return f;
}

START_TEST(eval_works_a_request_out_on_the_entries_alone)
{
    struct txn_sandbox *sb = NULL;
    uint64_t exp = lt_wall_ms() + 100000;
    /* Keys of any partitions: the private store has one. */
    lattice_ops_txn_entry e[] = {{"a", 1, true, "10", 2, exp, 0}, {"b", 1, true, "x", 1, 0, 0},
                                 {"c", 1, false, NULL, 0, 0, 0}, {"d", 1, false, NULL, 0, 0, 0},
                                 {"n", 1, true, "abc", 3, 0, 0}};
    lattice_op ops[] = {sub(LATTICE_OP_INCREMENT, 0, "a", NULL, 1),
                        sub(LATTICE_OP_APPEND, 0, "b", "yz", 0),
                        sub(LATTICE_OP_GET, 0, "a", NULL, 0),
                        sub(LATTICE_OP_REMOVE, 0, "c", NULL, 0),
                        sub(LATTICE_OP_PUT, 0, "c", "5", 0),
                        sub(LATTICE_TXN_RENAME, 0, "b", "d", 0),
                        sub(LATTICE_OP_INCREMENT, 0, "n", NULL, 1)};
    size_t n = sizeof ops / sizeof ops[0];
    lattice_txn_watch w = {"a", 1, LATTICE_TXN_W_VERSION, 12345, 1}; /* ignored: the caller checks them */
    size_t cap = lattice_txn_request_size(&w, 1, ops, n);
    void *req = malloc(cap);
    ck_assert_uint_eq(lattice_txn_request_encode(&w, 1, ops, n, req, cap), cap);
    void *result = NULL;
    size_t rlen = 0;
    n_finals = 0;
    ck_assert_int_eq(txn_eval(&sb, &prim.cfg, e, 5, req, cap, &result, &rlen, take_final, NULL), LATTICE_OK);
    lattice_txn_buf b;
    ck_assert_int_eq(lattice_txn_result_begin(&b, result, rlen), (long)n);
    lattice_txn_sub_result r[8];
    for (size_t i = 0; i < n; i++) ck_assert(lattice_txn_result_next(&b, &r[i]));
    ck_assert_int_eq(r[0].num, 11);
    ck_assert_int_eq(r[1].num, 3);
    ck_assert_uint_eq(r[2].value_len, 2);
    ck_assert_int_eq(memcmp(r[2].value, "11", 2), 0);
    ck_assert_int_eq(r[3].status, LATTICE_ERR_NOT_FOUND);
    ck_assert_int_eq(r[4].status, LATTICE_OK);
    ck_assert_int_eq(r[5].status, LATTICE_OK);
    ck_assert_int_eq(r[6].status, LATTICE_ERR_INVAL); /* INCR of a non-integer: that command's error */
    lt_free(result);
    const final *fa = final_of("a"), *fb = final_of("b"), *fc = final_of("c"), *fd = final_of("d");
    ck_assert(fa && fa->live && !strcmp(fa->value, "11"));
    ck_assert_uint_eq(fa->expire, exp); /* INCR keeps the expiry */
    ck_assert(fb && !fb->live);         /* renamed away */
    ck_assert(fc && fc->live && !strcmp(fc->value, "5") && fc->expire == 0);
    ck_assert(fd && fd->live && !strcmp(fd->value, "xyz"));
    ck_assert_ptr_null(final_of("n")); /* nothing written: no final state */
    /* The store is empty again: the same request on no entries. */
    n_finals = 0;
    ck_assert_int_eq(txn_eval(&sb, &prim.cfg, e + 2, 2, req, cap, &result, &rlen, take_final, NULL), LATTICE_OK);
    ck_assert_int_eq(lattice_txn_result_begin(&b, result, rlen), (long)n);
    ck_assert(lattice_txn_result_next(&b, &r[0]));
    ck_assert_int_eq(r[0].num, 1); /* a was not there */
    lt_free(result);
    free(req);
    /* The coordinator's own kinds and reserved keys are refused. */
    uint8_t hdr[LATTICE_TXN_PREP_BYTES] = {1};
    lattice_op prep = {(lattice_op_kind)LATTICE_TXN_PREPARE, 0, NULL, "a", 1, (const char *)hdr, sizeof hdr, 0, 0, 0};
    lattice_op rsv = sub(LATTICE_OP_PUT, 0, "\xff" "x", "v", 0);
    for (int t = 0; t < 2; t++) {
        const lattice_op *o = t ? &rsv : &prep;
        cap = lattice_txn_request_size(NULL, 0, o, 1);
        req = malloc(cap);
        lattice_txn_request_encode(NULL, 0, o, 1, req, cap);
        ck_assert_int_ne(txn_eval(&sb, &prim.cfg, NULL, 0, req, cap, &result, &rlen, take_final, NULL), LATTICE_OK);
        ck_assert_ptr_null(result);
        free(req);
    }
    /* Entries that do not fit the private store: TOO_LARGE. */
    size_t big = 1u << 20;
    char *v = calloc(1, big);
    lattice_ops_txn_entry many[80];
    char keys[80][8];
    for (int i = 0; i < 80; i++) {
        snprintf(keys[i], sizeof keys[i], "k%d", i);
        many[i] = (lattice_ops_txn_entry){keys[i], strlen(keys[i]), true, v, big, 0, 0};
    }
    lattice_op g = sub(LATTICE_OP_GET, 0, "k0", NULL, 0);
    cap = lattice_txn_request_size(NULL, 0, &g, 1);
    req = malloc(cap);
    lattice_txn_request_encode(NULL, 0, &g, 1, req, cap);
    lattice_cache_config cfg = prim.cfg;
    cfg.max_value_bytes = 0;
    ck_assert_int_eq(txn_eval(&sb, &cfg, many, 80, req, cap, &result, &rlen, take_final, NULL), LATTICE_ERR_TOO_LARGE);
    free(req);
    free(v);
    txn_sandbox_free(&sb);
    ck_assert_ptr_null(sb);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("txn");
    TCase *t = tcase_create("txn");
    tcase_add_checked_fixture(t, setup, teardown);
    tcase_add_test(t, subs_run_in_order_and_a_copy_gets_them_all);
    tcase_add_test(t, watch_versions_abort_on_any_change);
    tcase_add_test(t, kept_results_are_bounded_in_bytes);
    tcase_add_test(t, rename_and_copy_keep_the_expiry);
    tcase_add_test(t, bad_requests_change_nothing);
    tcase_add_test(t, mutated_requests_are_refused_or_run);
    tcase_add_test(t, locks_are_read_off_the_prepared_rows);
    tcase_add_test(t, prepare_finish_and_decide);
    tcase_add_test(t, a_primarys_lock_table_follows_its_own_prepares_and_finishes);
    tcase_add_test(t, a_prepared_write_keeps_its_expiry_and_type);
    tcase_add_test(t, eval_works_a_request_out_on_the_entries_alone);
    tcase_add_test(t, a_younger_prepare_is_patient_before_it_dies);
    suite_add_tcase(s, t);
    return lt_run_suite(s);
}
