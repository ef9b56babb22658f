/*
 * Outgoing batches without a network (fabric/batch.c): what is queued for
 * one place leaves in frames of about the chunk size, each holding at
 * least one whole message, and comes out of the frames in the order it
 * was queued - also after packing and unpacking each frame; answers are
 * kept per asker until the flush.
 */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "run_suite.h"
#include "base/base.h"
#include "lattice/alloc.h"
#include "fabric/fabric.h"

#define CHUNK 1000
#define N 40

static uint8_t payload[5000];

/* What the receiving side got, frame by frame. */
typedef struct got {
    int frames, with_meta;
    uint64_t ids[2 * N];
    int n_ids;
    size_t biggest_frame;
    char to[32];
} got;

/* The send callback: pack the frame as a link would, unpack it as the
 * receiver does, and note what it carried. */
static void receive(void *arg, const Latdata__Batch *b)
{
    got *g = arg;
    uint8_t *buf = NULL, mac[LT_FRAME_MAC_BYTES];
    size_t len = 0;
    ck_assert_int_eq(lt_frame_pack(&b->base, NULL, &buf, &len, mac), LATTICE_OK);
    ProtobufCMessage *m = NULL;
    ck_assert_int_eq(lt_frame_unpack(&latdata__batch__descriptor, buf, len, NULL, 0, NULL, 1u << 20, &m), LT_FRAME_OK);
    Latdata__Batch *r = (Latdata__Batch *)m;
    ck_assert_uint_eq(r->proto, 7);
    g->frames++;
    if (r->meta) g->with_meta++;
    if (r->meta) ck_assert_int_eq(g->frames, 1); /* only the first carries it */
    if (r->to) snprintf(g->to, sizeof g->to, "%s", r->to);
    for (size_t i = 0; i < r->n_reqs; i++) g->ids[g->n_ids++] = r->reqs[i]->id;
    for (size_t i = 0; i < r->n_resps; i++) g->ids[g->n_ids++] = r->resps[i]->id;
    /* A frame of several messages stays near the chunk; one message alone may exceed it. */
    size_t msgs = r->n_reqs + r->n_resps;
    if (msgs > 1) ck_assert_uint_le(len, CHUNK + 64);
    if (len > g->biggest_frame) g->biggest_frame = len;
    lt_frame_free(m);
    lt_free(buf);
}

static Latdata__Req *req(uint64_t id, size_t vlen)
{
    Latdata__Req *r = lt_malloc(sizeof *r);
    latdata__req__init(r);
    r->id = id;
    r->key.data = (uint8_t *)"k";
    r->key.len = 1;
    r->value.data = payload;
    r->value.len = vlen;
    return r;
}

/* Sizes: small ones that share a frame, and one larger than the chunk. */
static size_t size_of(int i) { return i == 17 ? 3000 : (size_t)(i * 37 % 300); }

START_TEST(requests_split_at_the_chunk_size_and_come_out_in_order)
{
    fab_reqs q = {0};
    for (int i = 0; i < N; i++) ck_assert_int_eq(fab_reqs_push(&q, req((uint64_t)i + 1, size_of(i))), LATTICE_OK);
    ck_assert_uint_eq(q.n, N);
    Latdata__Meta meta = LATDATA__META__INIT;
    got g = {0};
    fab_reqs_flush(&q, "node-b", 7, &meta, false, CHUNK, receive, &g);
    ck_assert_uint_eq(q.n, 0); /* sent and freed */
    ck_assert_int_gt(g.frames, 5);
    ck_assert_int_eq(g.with_meta, 1);
    ck_assert_str_eq(g.to, "node-b");
    ck_assert_int_eq(g.n_ids, N);
    for (int i = 0; i < N; i++) ck_assert_uint_eq(g.ids[i], (uint64_t)i + 1);
    ck_assert_uint_gt(g.biggest_frame, 3000); /* the large one went whole, alone */
    fab_reqs_free(&q);
}
END_TEST

START_TEST(chunks_hold_at_least_one_message)
{
    Latdata__Req *r[3] = {req(1, 5000), req(2, 10), req(3, 10)};
    ck_assert_uint_eq(fab_chunk_reqs(r, 3, CHUNK), 1);     /* too big alone: still one */
    ck_assert_uint_eq(fab_chunk_reqs(r + 1, 2, CHUNK), 2);
    ck_assert_uint_eq(fab_chunk_reqs(r + 1, 2, 80), 1);     /* 75 bytes each by the estimate */
    ck_assert_uint_eq(fab_chunk_reqs(r, 0, CHUNK), 0);
    for (int i = 0; i < 3; i++) lt_free(r[i]);
}
END_TEST

START_TEST(meta_alone_goes_in_one_frame)
{
    fab_reqs q = {0};
    Latdata__Meta meta = LATDATA__META__INIT;
    got g = {0};
    fab_reqs_flush(&q, "node-b", 7, &meta, false, CHUNK, receive, &g);
    ck_assert_int_eq(g.frames, 0); /* nothing queued, nothing asked for */
    fab_reqs_flush(&q, "node-b", 7, &meta, true, CHUNK, receive, &g);
    ck_assert_int_eq(g.frames, 1);
    ck_assert_int_eq(g.with_meta, 1);
    fab_reqs_free(&q);
}
END_TEST

START_TEST(responses_split_and_come_out_in_order)
{
    Latdata__Resp *r[N];
    for (int i = 0; i < N; i++) {
        r[i] = lt_malloc(sizeof *r[i]);
        latdata__resp__init(r[i]);
        r[i]->id = (uint64_t)i + 100;
        r[i]->value.data = payload;
        r[i]->value.len = size_of(i);
    }
    Latdata__Meta meta = LATDATA__META__INIT;
    got g = {0};
    fab_resps_flush(r, N, 7, &meta, CHUNK, receive, &g);
    ck_assert_int_gt(g.frames, 5);
    ck_assert_int_eq(g.with_meta, 1);
    ck_assert_int_eq(g.n_ids, N);
    for (int i = 0; i < N; i++) ck_assert_uint_eq(g.ids[i], (uint64_t)i + 100);
    memset(&g, 0, sizeof g);
    fab_resps_flush(r, 0, 7, NULL, CHUNK, receive, &g); /* nothing: still one frame (the caller's push) */
    ck_assert_int_eq(g.frames, 1);
    ck_assert_int_eq(g.with_meta, 0);
    for (int i = 0; i < N; i++) lt_free(r[i]); /* responses stay the caller's */
}
END_TEST

static Latdata__Resp *resp(uint64_t id, size_t n_stats)
{
    Latdata__Resp *r = lt_malloc(sizeof *r);
    latdata__resp__init(r);
    r->id = id;
    if (n_stats) {
        r->stats = lt_malloc(n_stats * sizeof *r->stats);
        for (size_t i = 0; i < n_stats; i++) {
            r->stats[i] = lt_malloc(sizeof *r->stats[i]);
            latdata__node_cache_stats__init(r->stats[i]);
        }
        r->n_stats = n_stats;
    }
    return r;
}

/* One box per asker, its answers in order; a flush whose askers' connections
 * are gone counts each box once and frees everything. */
START_TEST(replies_are_boxed_per_asker_in_order)
{
    fab_replies r = {0};
    uint8_t a[8] = {1, 0, 0, 0, 1, 0, 0, 0}, b[8] = {2, 0, 0, 0, 1, 0, 0, 0};
    for (uint64_t i = 1; i <= 100; i++)
        ck_assert_int_eq(fab_replies_add(&r, i % 3 ? a : b, 8, resp(i, i == 50 ? 2 : 0), false), LATTICE_OK);
    ck_assert_int_eq(fab_replies_meta(&r, b, 8), LATTICE_OK);
    ck_assert_uint_eq(r.n, 2);
    ck_assert_mem_eq(r.boxes[0].ident, a, 8);
    ck_assert(!r.boxes[0].with_meta);
    ck_assert(r.boxes[1].with_meta);
    uint64_t last = 0;
    for (size_t k = 0; k < r.boxes[0].n; k++) { /* in the order added */
        ck_assert_uint_gt(r.boxes[0].out[k]->id, last);
        ck_assert_uint_ne(r.boxes[0].out[k]->id % 3, 0);
        last = r.boxes[0].out[k]->id;
    }
    ck_assert_uint_eq(r.boxes[0].n + r.boxes[1].n, 100);
    uint64_t send_failed = 0;
    fab_frames f = {.proto = 7, .count = {[FAB_DROP_SEND] = &send_failed}};
    fab_replies_flush(&r, NULL, NULL, &f); /* no listener: both askers are gone */
    ck_assert_uint_eq(send_failed, 2);
    ck_assert_uint_eq(r.n, 0);
    fab_replies_flush(&r, NULL, NULL, &f); /* nothing left: nothing counted */
    ck_assert_uint_eq(send_failed, 2);
    ck_assert_int_eq(fab_replies_meta(&r, a, 8), LATTICE_OK); /* a push alone is a box to send */
    fab_replies_flush(&r, NULL, NULL, &f);
    ck_assert_uint_eq(send_failed, 3);
    fab_replies_free(&r);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("fabric: batch");
    TCase *tc = tcase_create("batch");
    tcase_add_test(tc, requests_split_at_the_chunk_size_and_come_out_in_order);
    tcase_add_test(tc, chunks_hold_at_least_one_message);
    tcase_add_test(tc, meta_alone_goes_in_one_frame);
    tcase_add_test(tc, responses_split_and_come_out_in_order);
    tcase_add_test(tc, replies_are_boxed_per_asker_in_order);
    suite_add_tcase(s, tc);
    return lt_run_suite(s);
}
