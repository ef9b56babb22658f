/*
 * test_coord: txn/coord.c - the reads' and the commit's ops decoded back
 * (the watch each read leaves, the writes a commit carries), what the
 * transaction answers itself (its own writes, a repeated read), the one-slot
 * rule, the deadline, and the outcome each kind of answer means.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lattice/alloc.h"
#include "lattice/txn.h"
#include "run_suite.h"
#include "partition/partition.h"
#include "txn/txn.h"

/* ---- answers, built as a primary would ---- */

typedef struct sub {
    int32_t status;
    uint32_t flags;
    int64_t num;
    const char *value; /* NULL: none */
    size_t len;
} sub;

/* Answers live in a ring of buffers: one built as an argument survives the
 * reads a helper makes before it uses it. */
static uint8_t res_bufs[4][1 << 14];
static unsigned res_next;

static lattice_op_result answer(const sub *s, size_t n, unsigned flags)
{
    uint8_t *res_buf = res_bufs[res_next++ % 4];
    lattice_txn_buf b = {res_buf, 0, sizeof res_bufs[0], false};
    lattice_txn_put_u(&b, LATTICE_TXN_FORMAT, 1);
    lattice_txn_put_u(&b, n, 4);
    for (size_t i = 0; i < n; i++) {
        lattice_txn_put_u(&b, (uint32_t)s[i].status, 4);
        lattice_txn_put_u(&b, s[i].flags, 4);
        lattice_txn_put_u(&b, (uint64_t)s[i].num, 8);
        lattice_txn_put_bytes(&b, s[i].value, s[i].value ? s[i].len : 0);
    }
    ck_assert(!b.failed);
    return (lattice_op_result){.status = LATTICE_OK, .value = res_buf, .value_len = b.len, .flags = flags};
}

static char epoch_bytes[8];
static const char *epoch_of(uint64_t e)
{
    for (int j = 0; j < 8; j++) epoch_bytes[j] = (char)(e >> (8 * j));
    return epoch_bytes;
}

/* The answer to a read of one key: live with version v (value val), or
 * absent with the partition's counter v. */
static lattice_op_result read_answer(bool live, uint64_t v, uint64_t epoch, const char *val)
{
    static sub s[2];
    s[0] = (sub){LATTICE_OK, live ? LATTICE_OP_R_FOUND : 0, (int64_t)v, epoch_of(epoch), 8};
    s[1] = live ? (sub){LATTICE_OK, LATTICE_OP_R_FOUND, 0, val, strlen(val)} : (sub){LATTICE_ERR_NOT_FOUND, 0, 0, NULL, 0};
    return answer(s, 2, 0);
}

/* ---- requests, decoded as a primary would ---- */

typedef struct dwatch {
    char key[64];
    uint8_t mode;
    uint64_t version, epoch;
} dwatch;

typedef struct dsub {
    int kind;
    char key[64], value[64];
} dsub;

typedef struct decoded {
    size_t nw, n;
    dwatch w[16];
    dsub s[16];
} decoded;

static void copy_str(char *dst, const void *src, size_t n)
{
    ck_assert_uint_lt(n, 64);
    memcpy(dst, src, n);
    dst[n] = 0;
}

static decoded decode(const lattice_op *op)
{
    decoded d;
    memset(&d, 0, sizeof d);
    ck_assert_int_eq(op->kind, LATTICE_OP_TXN);
    lattice_txn_buf b = {(uint8_t *)(uintptr_t)op->value, 0, op->value_len, false};
    ck_assert_uint_eq(lattice_txn_get_u(&b, 1), LATTICE_TXN_FORMAT);
    d.nw = lattice_txn_get_u(&b, 4);
    ck_assert_uint_le(d.nw, 16);
    for (size_t i = 0; i < d.nw; i++) {
        size_t kl;
        const void *k = lattice_txn_get_bytes(&b, &kl);
        copy_str(d.w[i].key, k, kl);
        d.w[i].mode = (uint8_t)lattice_txn_get_u(&b, 1);
        d.w[i].version = lattice_txn_get_u(&b, 8);
        d.w[i].epoch = lattice_txn_get_u(&b, 8);
    }
    d.n = lattice_txn_get_u(&b, 4);
    ck_assert_uint_le(d.n, 16);
    for (size_t i = 0; i < d.n; i++) {
        d.s[i].kind = (int)lattice_txn_get_u(&b, 1);
        lattice_txn_get_u(&b, 4);
        size_t kl, vl;
        const void *k = lattice_txn_get_bytes(&b, &kl);
        copy_str(d.s[i].key, k, kl);
        const void *v = lattice_txn_get_bytes(&b, &vl);
        copy_str(d.s[i].value, v, vl);
        lattice_txn_get_u(&b, 8);
        lattice_txn_get_u(&b, 8);
    }
    ck_assert(!b.failed);
    ck_assert_uint_eq(b.len, op->value_len);
    return d;
}

static lt_txc *begin(void)
{
    lt_txc *t;
    ck_assert_int_eq(lt_txc_new("c", 0, "test", &t), LATTICE_OK);
    return t;
}

static lt_txc_key K(const char *k) { return (lt_txc_key){k, strlen(k)}; }

/* Reads k through op and answer; returns the key's own status. */
static lattice_status read1(lt_txc *t, const char *k, lattice_op_result r)
{
    lt_txc_key key = K(k);
    lattice_op op;
    ck_assert_int_eq(lt_txc_read_op(t, &key, 1, &op), LATTICE_OK);
    decoded d = decode(&op);
    ck_assert_uint_eq(d.nw, 0);
    ck_assert_uint_eq(d.n, 2);
    ck_assert_int_eq(d.s[0].kind, LATTICE_TXN_VERSION);
    ck_assert_int_eq(d.s[1].kind, LATTICE_OP_GET);
    ck_assert_str_eq(d.s[1].key, k);
    lattice_status each = LATTICE_ERR_STOPPED;
    ck_assert_int_eq(lt_txc_read_done(t, &key, 1, &r, &each), LATTICE_OK);
    return each;
}

START_TEST(a_commit_carries_every_read_as_a_watch_and_every_write)
{
    lt_txc *t = begin();
    ck_assert_int_eq(read1(t, "{a}x", read_answer(true, 41, 7, "old")), LATTICE_OK);
    ck_assert_int_eq(read1(t, "{a}gone", read_answer(false, 99, 7, NULL)), LATTICE_ERR_NOT_FOUND);
    ck_assert_int_eq(lt_txc_write(t, "{a}x", 4, "new", 3, false), LATTICE_OK);
    ck_assert_int_eq(lt_txc_write(t, "{a}y", 4, "y1", 2, false), LATTICE_OK);
    ck_assert_int_eq(lt_txc_write(t, "{a}z", 4, NULL, 0, true), LATTICE_OK);
    ck_assert_uint_eq(lt_txc_reads(t), 2);
    ck_assert_uint_eq(lt_txc_writes(t), 3);
    lattice_op op;
    bool none;
    ck_assert_int_eq(lt_txc_commit_op(t, &op, &none), LATTICE_OK);
    ck_assert(!none);
    ck_assert_int_eq(lt_txc_state_of(t), LT_TXC_COMMITTING);
    ck_assert_str_eq(op.cache, "c");
    decoded d = decode(&op);
    ck_assert_uint_eq(d.nw, 2);
    ck_assert_str_eq(d.w[0].key, "{a}x");
    ck_assert_int_eq(d.w[0].mode, LATTICE_TXN_W_VERSION);
    ck_assert_uint_eq(d.w[0].version, 41);
    ck_assert_uint_eq(d.w[0].epoch, 7);
    ck_assert_str_eq(d.w[1].key, "{a}gone");
    ck_assert_int_eq(d.w[1].mode, LATTICE_TXN_W_COUNTER); /* absent: the partition's counter */
    ck_assert_uint_eq(d.w[1].version, 99);
    ck_assert_uint_eq(d.n, 3);
    ck_assert_int_eq(d.s[0].kind, LATTICE_OP_PUT);
    ck_assert_str_eq(d.s[0].key, "{a}x");
    ck_assert_str_eq(d.s[0].value, "new");
    ck_assert_int_eq(d.s[1].kind, LATTICE_OP_PUT);
    ck_assert_str_eq(d.s[1].value, "y1");
    ck_assert_int_eq(d.s[2].kind, LATTICE_OP_REMOVE);
    ck_assert_str_eq(d.s[2].key, "{a}z");
    sub ok[3] = {{LATTICE_OK, 0, 0, NULL, 0}, {LATTICE_OK, 0, 0, NULL, 0}, {LATTICE_ERR_NOT_FOUND, 0, 0, NULL, 0}};
    lattice_op_result r = answer(ok, 3, 0);
    ck_assert_int_eq(lt_txc_commit_done(t, &r), LATTICE_OK); /* removing an absent key is done */
    ck_assert_int_eq(lt_txc_state_of(t), LT_TXC_ENDED);
    lt_txc_free(t);
}
END_TEST

START_TEST(it_answers_its_own_writes_and_repeated_reads)
{
    lt_txc *t = begin();
    bool found;
    const void *v;
    size_t vl;
    ck_assert_int_eq(lt_txc_local_get(t, "k", 1, &found, &v, &vl), 0); /* unknown: ask the grid */
    ck_assert_int_eq(read1(t, "k", read_answer(true, 5, 1, "first")), LATTICE_OK);
    ck_assert_int_eq(lt_txc_local_get(t, "k", 1, &found, &v, &vl), 1);
    ck_assert(found);
    ck_assert_uint_eq(vl, 5);
    ck_assert(!memcmp(v, "first", 5));
    /* a second answer (two reads raced) keeps the first read: the watch is of what was seen first */
    lt_txc_key key = K("k");
    lattice_op op;
    ck_assert_int_eq(lt_txc_read_op(t, &key, 1, &op), LATTICE_OK);
    lattice_op_result r = read_answer(true, 6, 1, "second");
    lattice_status each;
    ck_assert_int_eq(lt_txc_read_done(t, &key, 1, &r, &each), LATTICE_OK);
    ck_assert_int_eq(lt_txc_local_get(t, "k", 1, &found, &v, &vl), 1);
    ck_assert(!memcmp(v, "first", 5));
    ck_assert_int_eq(lt_txc_write(t, "k", 1, "mine", 4, false), LATTICE_OK);
    ck_assert_int_eq(lt_txc_local_get(t, "k", 1, &found, &v, &vl), 1);
    ck_assert(found && vl == 4 && !memcmp(v, "mine", 4));
    ck_assert_int_eq(lt_txc_write(t, "k", 1, NULL, 0, true), LATTICE_OK);
    ck_assert_int_eq(lt_txc_local_get(t, "k", 1, &found, &v, &vl), 1);
    ck_assert(!found);
    ck_assert_uint_eq(lt_txc_writes(t), 1); /* one key, its last write */
    bool none;
    ck_assert_int_eq(lt_txc_commit_op(t, &op, &none), LATTICE_OK);
    decoded d = decode(&op);
    ck_assert_uint_eq(d.nw, 1);
    ck_assert_uint_eq(d.w[0].version, 5);
    ck_assert_uint_eq(d.n, 1);
    ck_assert_int_eq(d.s[0].kind, LATTICE_OP_REMOVE);
    lt_txc_free(t);
}
END_TEST

START_TEST(keys_of_another_slot_are_refused_and_change_nothing)
{
    lt_txc *t = begin();
    ck_assert_int_eq(lt_txc_write(t, "{user1}a", 8, "1", 1, false), LATTICE_OK);
    ck_assert_int_eq(lt_txc_write(t, "{user1}b", 8, "2", 1, false), LATTICE_OK); /* same tag, same slot */
    ck_assert_int_eq(lt_txc_write(t, "{user2}a", 8, "3", 1, false), LATTICE_ERR_UNSUPPORTED);
    lt_txc_key other = K("{user2}a"), mixed[2] = {K("{user1}c"), K("{user2}c")};
    lattice_op op;
    ck_assert_int_eq(lt_txc_read_op(t, &other, 1, &op), LATTICE_ERR_UNSUPPORTED);
    ck_assert_int_eq(lt_txc_read_op(t, mixed, 2, &op), LATTICE_ERR_UNSUPPORTED);
    ck_assert_int_eq(lt_txc_can_join(t, mixed, 2), LATTICE_ERR_UNSUPPORTED);
    ck_assert_int_eq(lt_txc_can_join(t, mixed, 1), LATTICE_OK);
    ck_assert_uint_eq(lt_txc_writes(t), 2);
    ck_assert_int_eq(lt_txc_state_of(t), LT_TXC_ACTIVE);
    lt_txc_free(t);
    /* A fresh transaction: its keys must agree among themselves. */
    t = begin();
    ck_assert_int_eq(lt_txc_can_join(t, mixed, 2), LATTICE_ERR_UNSUPPORTED);
    lt_txc_key same[2] = {K("{u}1"), K("{u}2")};
    ck_assert_int_eq(lt_txc_can_join(t, same, 2), LATTICE_OK);
    lt_txc_free(t);
}
END_TEST

START_TEST(a_multi_key_read_is_one_op_with_each_keys_answer)
{
    lt_txc *t = begin();
    ck_assert_int_eq(lt_txc_write(t, "{g}w", 4, "written", 7, false), LATTICE_OK);
    lt_txc_key keys[2] = {K("{g}1"), K("{g}2")};
    lattice_op op;
    ck_assert_int_eq(lt_txc_read_op(t, keys, 2, &op), LATTICE_OK);
    decoded d = decode(&op);
    ck_assert_uint_eq(d.n, 4);
    ck_assert_str_eq(d.s[2].key, "{g}2");
    sub s[4] = {{LATTICE_OK, LATTICE_OP_R_FOUND, 3, epoch_of(9), 8},
                {LATTICE_OK, LATTICE_OP_R_FOUND, 0, "one", 3},
                {LATTICE_OK, 0, 0, NULL, 0}, /* a version answer without its epoch: malformed */
                {LATTICE_ERR_NOT_FOUND, 0, 0, NULL, 0}};
    s[0].value = epoch_of(9);
    lattice_op_result r = answer(s, 4, 0);
    lattice_status each[2];
    ck_assert_int_eq(lt_txc_read_done(t, keys, 2, &r, each), LATTICE_OK);
    ck_assert_int_eq(each[0], LATTICE_OK);
    ck_assert_int_eq(each[1], LATTICE_ERR_PROTO);
    ck_assert_uint_eq(lt_txc_reads(t), 1);
    /* An answer with the wrong number of subs is refused whole. */
    r = answer(s, 2, 0);
    ck_assert_int_eq(lt_txc_read_done(t, keys, 2, &r, each), LATTICE_ERR_PROTO);
    /* The op's own error: the transaction stays active, the read can be tried again. */
    lattice_op_result fail = {.status = LATTICE_ERR_NO_QUORUM};
    ck_assert_int_eq(lt_txc_read_done(t, keys, 2, &fail, each), LATTICE_ERR_NO_QUORUM);
    ck_assert_int_eq(lt_txc_state_of(t), LT_TXC_ACTIVE);
    lt_txc_free(t);
}
END_TEST

/* Commits a transaction that read and wrote one key, answered r. */
static lattice_status commit_with(lattice_op_result r)
{
    lt_txc *t = begin();
    ck_assert_int_eq(read1(t, "k", read_answer(true, 1, 1, "v")), LATTICE_OK);
    ck_assert_int_eq(lt_txc_write(t, "k", 1, "w", 1, false), LATTICE_OK);
    lattice_op op;
    bool none;
    ck_assert_int_eq(lt_txc_commit_op(t, &op, &none), LATTICE_OK);
    lattice_status st = lt_txc_commit_done(t, &r);
    ck_assert_int_eq(lt_txc_state_of(t), LT_TXC_ENDED);
    lt_txc_free(t);
    return st;
}

START_TEST(each_answer_to_a_commit_means_one_outcome)
{
    sub ok = {LATTICE_OK, 0, 0, NULL, 0}, full = {LATTICE_ERR_REGION_FULL, 0, 0, NULL, 0};
    ck_assert_int_eq(commit_with(answer(&ok, 1, 0)), LATTICE_OK);
    ck_assert_int_eq(commit_with(answer(NULL, 0, LATTICE_OP_R_ABORTED)), LATTICE_ERR_ABORTED);
    /* a resend of an applied commit whose result was not kept: applied once, but was it aborted? */
    ck_assert_int_eq(commit_with((lattice_op_result){.status = LATTICE_OK, .flags = LATTICE_OP_R_LOST}),
                     LATTICE_ERR_UNKNOWN);
    /* no answer in time: it may have applied */
    ck_assert_int_eq(commit_with((lattice_op_result){.status = LATTICE_ERR_TIMEOUT}), LATTICE_ERR_UNKNOWN);
    ck_assert_int_eq(commit_with((lattice_op_result){.status = LATTICE_ERR_NO_QUORUM}), LATTICE_ERR_UNKNOWN);
    /* refused as it stood: certainly not applied */
    ck_assert_int_eq(commit_with((lattice_op_result){.status = LATTICE_ERR_NO_CACHE}), LATTICE_ERR_NO_CACHE);
    ck_assert_int_eq(commit_with((lattice_op_result){.status = LATTICE_ERR_REGION_FULL}), LATTICE_ERR_REGION_FULL);
    ck_assert_int_eq(commit_with(answer(&full, 1, 0)), LATTICE_ERR_REGION_FULL);
    /* an answer that does not match what was sent */
    ck_assert_int_eq(commit_with(answer(&ok, 0, 0)), LATTICE_ERR_UNKNOWN);
}
END_TEST

START_TEST(the_deadline_ends_it_and_an_empty_commit_sends_nothing)
{
    lt_txc *t;
    ck_assert_int_eq(lt_txc_new(NULL, 1000, NULL, &t), LATTICE_OK);
    ck_assert_str_eq(lt_txc_cache(t), "default");
    ck_assert_str_eq(lt_txc_label(t), "");
    ck_assert_int_eq(lt_txc_check(t, 999), LATTICE_OK);
    ck_assert_int_eq(lt_txc_check(t, 1000), LATTICE_ERR_TIMEOUT);
    ck_assert_int_eq(lt_txc_state_of(t), LT_TXC_ENDED);
    ck_assert_int_eq(lt_txc_check(t, 0), LATTICE_ERR_STOPPED);
    ck_assert_int_eq(lt_txc_write(t, "k", 1, "v", 1, false), LATTICE_ERR_STOPPED);
    lattice_op op;
    bool none;
    ck_assert_int_eq(lt_txc_commit_op(t, &op, &none), LATTICE_ERR_STOPPED);
    lt_txc_free(t);

    t = begin();
    ck_assert_int_eq(lt_txc_commit_op(t, &op, &none), LATTICE_OK);
    ck_assert(none);
    ck_assert_int_eq(lt_txc_state_of(t), LT_TXC_ENDED);
    lt_txc_free(t);

    t = begin();
    ck_assert_int_eq(lt_txc_write(t, "k", 1, "v", 1, false), LATTICE_OK);
    lt_txc_rollback(t);
    ck_assert_int_eq(lt_txc_state_of(t), LT_TXC_ENDED);
    ck_assert_int_eq(lt_txc_commit_op(t, &op, &none), LATTICE_ERR_STOPPED);
    lt_txc_free(t);
}
END_TEST

START_TEST(thousands_of_keys_are_found_again)
{
    lt_txc *t = begin();
    char k[32], v[32];
    for (int i = 0; i < 5000; i++) {
        snprintf(k, sizeof k, "{big}%d", i);
        snprintf(v, sizeof v, "v%d", i);
        ck_assert_int_eq(lt_txc_write(t, k, strlen(k), v, strlen(v), false), LATTICE_OK);
    }
    for (int i = 0; i < 5000; i++) { /* overwrite every other: still 5000 keys */
        if (i % 2) continue;
        snprintf(k, sizeof k, "{big}%d", i);
        ck_assert_int_eq(lt_txc_write(t, k, strlen(k), "x", 1, false), LATTICE_OK);
    }
    ck_assert_uint_eq(lt_txc_writes(t), 5000);
    for (int i = 0; i < 5000; i++) {
        snprintf(k, sizeof k, "{big}%d", i);
        snprintf(v, sizeof v, "v%d", i);
        bool found;
        const void *got;
        size_t gl;
        ck_assert_int_eq(lt_txc_local_get(t, k, strlen(k), &found, &got, &gl), 1);
        const char *want = i % 2 ? v : "x";
        ck_assert_uint_eq(gl, strlen(want));
        ck_assert(!memcmp(got, want, gl));
    }
    ck_assert_int_eq(lt_txc_local_get(t, "{big}5000", 9, &(bool){0}, &(const void *){0}, &(size_t){0}), 0);
    lt_txc_free(t);
}
END_TEST

/* Across partitions: one PREPARE per partition with that partition's reads
 * as watches and its writes, a DECIDE at the home partition's decision
 * key, a FINISH at each prepared row's key; each answer read back. */
START_TEST(across_partitions_prepare_decide_finish)
{
    enum { PARTS = 1024 };
    lt_txc *t = begin();
    ck_assert_int_eq(lt_txc_write(t, "{b}z", 4, "v", 1, false), LATTICE_OK);
    ck_assert_int_eq(lt_txc_write(t, "{a}q", 4, "v", 1, false), LATTICE_ERR_UNSUPPORTED); /* one slot until... */
    lt_txc_across(t);
    ck_assert_int_eq(read1(t, "{a}x", read_answer(true, 41, 7, "old")), LATTICE_OK);
    ck_assert_int_eq(read1(t, "{c}y", read_answer(false, 5, 8, NULL)), LATTICE_ERR_NOT_FOUND);
    ck_assert_int_eq(lt_txc_write(t, "{a}x", 4, "new", 3, false), LATTICE_OK);
    ck_assert_int_eq(lt_txc_write(t, "{c}w", 4, NULL, 0, true), LATTICE_OK);
    uint32_t pa = lattice_partition_of_key("{a}x", 4, PARTS), pb = lattice_partition_of_key("{b}z", 4, PARTS),
             pc = lattice_partition_of_key("{c}y", 4, PARTS);
    ck_assert(pa != pb && pb != pc && pa != pc);
    ck_assert_uint_eq(lt_txc_partitions(t, PARTS), 3);
    lt_txx *x;
    ck_assert_int_eq(lt_txx_new(t, PARTS, (lt_txid){5, 6}, 100, 9999, &x), LATTICE_OK);
    ck_assert_int_eq(lt_txc_state_of(t), LT_TXC_COMMITTING);
    ck_assert_uint_eq(lt_txx_parts(x), 3);
    ck_assert_uint_eq(lt_txx_home(x), pb); /* the first key's: {b}z was written first */
    for (size_t i = 0; i < 3; i++) {
        lattice_op op;
        ck_assert_int_eq(lt_txx_prepare_op(x, i, &op), LATTICE_OK);
        uint32_t p = lt_txx_part(x, i);
        ck_assert_uint_eq(lattice_partition_of_key(op.key, op.key_len, PARTS), p);
        decoded d = decode(&op);
        ck_assert_int_eq(d.s[0].kind, LATTICE_TXN_PREPARE);
        const uint8_t *h = (const uint8_t *)d.s[0].value;
        ck_assert_uint_eq(h[0], 5);      /* node */
        ck_assert_uint_eq(h[8], 6);      /* seq */
        ck_assert_uint_eq(h[16], 100);   /* stamp */
        ck_assert_uint_eq(h[24] | h[25] << 8, pb); /* home */
        if (p == pa) {
            ck_assert_uint_eq(d.nw, 1);
            ck_assert_str_eq(d.w[0].key, "{a}x");
            ck_assert_uint_eq(d.w[0].version, 41);
            ck_assert_uint_eq(d.n, 2);
            ck_assert_int_eq(d.s[1].kind, LATTICE_OP_PUT);
            ck_assert_str_eq(d.s[1].value, "new");
        } else if (p == pc) {
            ck_assert_uint_eq(d.nw, 1);
            ck_assert_int_eq(d.w[0].mode, LATTICE_TXN_W_COUNTER);
            ck_assert_uint_eq(d.n, 2);
            ck_assert_int_eq(d.s[1].kind, LATTICE_OP_REMOVE);
            ck_assert_str_eq(d.s[1].key, "{c}w");
        } else {
            ck_assert_uint_eq(d.nw, 0);
            ck_assert_uint_eq(d.n, 2);
            ck_assert_str_eq(d.s[1].key, "{b}z");
        }
    }
    sub ok = {LATTICE_OK, 0, 1, NULL, 0};
    lattice_op_result r = answer(&ok, 1, 0);
    ck_assert_int_eq(lt_txx_prepared(x, 0, &r), LATTICE_OK);
    ck_assert(!lt_txx_all_prepared(x));
    r = answer(NULL, 0, LATTICE_OP_R_ABORTED);
    ck_assert_int_eq(lt_txx_prepared(x, 1, &r), LATTICE_ERR_ABORTED);
    r = (lattice_op_result){.status = LATTICE_ERR_TIMEOUT};
    ck_assert_int_eq(lt_txx_prepared(x, 2, &r), LATTICE_ERR_UNKNOWN);
    r = (lattice_op_result){.status = LATTICE_ERR_WRONGTYPE};
    ck_assert_int_eq(lt_txx_prepared(x, 2, &r), LATTICE_ERR_WRONGTYPE);
    r = answer(&ok, 1, 0);
    for (size_t i = 0; i < 3; i++) ck_assert_int_eq(lt_txx_prepared(x, i, &r), LATTICE_OK);
    ck_assert(lt_txx_all_prepared(x));
    /* The decision, at the home partition. */
    lattice_op op;
    ck_assert_int_eq(lt_txx_decide_op(x, true, &op), LATTICE_OK);
    ck_assert_uint_eq(lattice_partition_of_key(op.key, op.key_len, PARTS), pb);
    decoded d = decode(&op);
    ck_assert_int_eq(d.s[0].kind, LATTICE_TXN_DECIDE);
    ck_assert_uint_eq((uint8_t)d.s[0].value[0], LATTICE_TXN_COMMIT);
    lt_txp_kind kind;
    lt_txid id;
    ck_assert_int_eq(lt_txp_key_parse(op.key, op.key_len, &kind, &id), 1);
    ck_assert_int_eq(kind, LT_TXP_DECISION);
    ck_assert(lt_txid_eq(id, ((lt_txid){5, 6})));
    bool commit = false;
    sub stands = {LATTICE_OK, 0, LATTICE_TXN_ABORT, NULL, 0};
    r = answer(&stands, 1, 0);
    ck_assert_int_eq(lt_txx_decided(x, &r, &commit), LATTICE_OK);
    ck_assert(!commit); /* someone settled it first: abort stands */
    r = (lattice_op_result){.status = LATTICE_ERR_TIMEOUT};
    ck_assert_int_ne(lt_txx_decided(x, &r, &commit), LATTICE_OK);
    /* Once every row is finished, the decision is forgotten at home. */
    ck_assert_int_eq(lt_txx_forget_op(x, &op), LATTICE_OK);
    ck_assert_uint_eq(lattice_partition_of_key(op.key, op.key_len, PARTS), pb);
    d = decode(&op);
    ck_assert_int_eq(d.s[0].kind, LATTICE_TXN_DECIDE);
    ck_assert_uint_eq((uint8_t)d.s[0].value[0], LATTICE_TXN_FORGET);
    ck_assert_int_eq(lt_txp_key_parse(op.key, op.key_len, &kind, &id), 1);
    ck_assert_int_eq(kind, LT_TXP_DECISION);
    /* Each prepared row is finished at its own partition. */
    for (size_t i = 0; i < 3; i++) {
        ck_assert_int_eq(lt_txx_finish_op(x, i, false, &op), LATTICE_OK);
        ck_assert_uint_eq(lattice_partition_of_key(op.key, op.key_len, PARTS), lt_txx_part(x, i));
        d = decode(&op);
        ck_assert_int_eq(d.s[0].kind, LATTICE_TXN_FINISH);
        ck_assert_uint_eq((uint8_t)d.s[0].value[0], LATTICE_TXN_ABORT);
        ck_assert_int_eq(lt_txp_key_parse(op.key, op.key_len, &kind, &id), 1);
        ck_assert_int_eq(kind, LT_TXP_PREPARED);
        r = answer(&ok, 1, 0);
        ck_assert_int_eq(lt_txx_finished(x, i, &r), LATTICE_OK);
    }
    lt_txx_free(x);
    lt_txc_free(t);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("txn_coord");
    TCase *t = tcase_create("coord");
    tcase_add_test(t, a_commit_carries_every_read_as_a_watch_and_every_write);
    tcase_add_test(t, it_answers_its_own_writes_and_repeated_reads);
    tcase_add_test(t, keys_of_another_slot_are_refused_and_change_nothing);
    tcase_add_test(t, a_multi_key_read_is_one_op_with_each_keys_answer);
    tcase_add_test(t, each_answer_to_a_commit_means_one_outcome);
    tcase_add_test(t, the_deadline_ends_it_and_an_empty_commit_sends_nothing);
    tcase_add_test(t, thousands_of_keys_are_found_again);
    tcase_add_test(t, across_partitions_prepare_decide_finish);
    suite_add_tcase(s, t);
    return s;
}

int main(void) { return lt_run_suite(suite()); }
