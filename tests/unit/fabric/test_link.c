/*
 * The data channel's transport without a network (fabric/fabric.h): the frame
 * reader on every split of a stream of frames and on every kind of bad
 * header, and a connection over a socketpair whose kernel buffer is too
 * small for what is sent (partial writes resumed, the queue bound).
 */
#include <check.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "run_suite.h"
#include "base/base.h"
#include "lattice/alloc.h"
#include "fabric/fabric.h"

#define MAX_BODY 1000

/* A stream of three frames: a small one with a MAC, one without, one of
 * 700 bytes with a MAC. */
static size_t sizes[3] = {5, 1, 700};
static size_t macs[3] = {32, 0, 32};

static size_t make_stream(uint8_t *out)
{
    size_t n = 0;
    for (int f = 0; f < 3; f++) {
        link_header(out + n, sizes[f], macs[f]);
        n += LINK_HDR_BYTES;
        for (size_t i = 0; i < sizes[f] + macs[f]; i++) out[n++] = (uint8_t)(f * 50 + i);
    }
    return n;
}

/* Feeds the pieces in order; checks every frame comes out whole and right. */
static void feed_pieces(const uint8_t *s, size_t n, const size_t *cuts, size_t n_cuts)
{
    link_reader r = {0};
    int got = 0;
    size_t from = 0;
    for (size_t c = 0; c <= n_cuts; c++) {
        size_t to = c < n_cuts ? cuts[c] : n;
        const uint8_t *p = s + from;
        size_t left = to - from;
        while (left) {
            size_t used = 0;
            link_rd v = link_reader_feed(&r, p, left, MAX_BODY, &used);
            ck_assert_uint_le(used, left);
            p += used;
            left -= used;
            if (v == LINK_RD_MORE) {
                ck_assert_uint_eq(left, 0);
                break;
            }
            ck_assert_int_eq(v, LINK_RD_FRAME);
            const uint8_t *msg, *mac;
            size_t len, ml;
            link_reader_frame(&r, &msg, &len, &mac, &ml);
            ck_assert_int_lt(got, 3);
            ck_assert_uint_eq(len, sizes[got]);
            ck_assert_uint_eq(ml, macs[got]);
            ck_assert(ml ? mac != NULL : mac == NULL);
            for (size_t i = 0; i < len; i++) ck_assert_uint_eq(msg[i], (uint8_t)(got * 50 + i));
            for (size_t i = 0; i < ml; i++) ck_assert_uint_eq(mac[i], (uint8_t)(got * 50 + len + i));
            got++;
        }
        from = to;
    }
    ck_assert_int_eq(got, 3);
    ck_assert(link_reader_idle(&r));
    link_reader_free(&r);
}

START_TEST(every_split_point_of_a_stream_gives_the_same_frames)
{
    uint8_t s[2048];
    size_t n = make_stream(s);
    feed_pieces(s, n, NULL, 0);
    for (size_t a = 1; a < n; a++) feed_pieces(s, n, &a, 1);
    /* ... and every pair of split points within the first two frames and into the third. */
    for (size_t a = 1; a < 60; a++)
        for (size_t b = a + 1; b < 80; b++) {
            size_t cuts[2] = {a, b};
            feed_pieces(s, n, cuts, 2);
        }
    /* ... and one byte at a time. */
    size_t cuts[2048];
    for (size_t i = 0; i + 1 < n; i++) cuts[i] = i + 1;
    feed_pieces(s, n, cuts, n - 1);
}
END_TEST

static link_rd feed_all(link_reader *r, const uint8_t *s, size_t n, size_t *taken)
{
    size_t at = 0, used = 0;
    link_rd v = LINK_RD_MORE;
    while (at < n) {
        v = link_reader_feed(r, s + at, n - at, MAX_BODY, &used);
        if (v != LINK_RD_MORE && v != LINK_RD_FRAME) break;
        at += used;
    }
    if (taken) *taken = at;
    return v;
}

START_TEST(an_oversized_length_is_refused_at_the_header)
{
    uint8_t h[LINK_HDR_BYTES];
    link_header(h, MAX_BODY + 1, 0);
    link_reader r = {0};
    ck_assert_int_eq(feed_all(&r, h, sizeof h, NULL), LINK_RD_OVERSIZED);
    link_reader_free(&r);
    /* The largest allowed length is not refused, and nothing of its size is reserved up front. */
    link_header(h, MAX_BODY, 32);
    ck_assert_int_eq(feed_all(&r, h, sizeof h, NULL), LINK_RD_MORE);
    ck_assert_uint_lt(r.cap, MAX_BODY);
    link_reader_free(&r);
    /* 4 GiB - 1 announced: refused too, and nothing reserved. */
    uint8_t big[LINK_HDR_BYTES] = {'L', 'T', LINK_VERSION, 0, 0xff, 0xff, 0xff, 0xff};
    ck_assert_int_eq(feed_all(&r, big, sizeof big, NULL), LINK_RD_OVERSIZED);
    ck_assert_uint_le(r.cap, 256);
    link_reader_free(&r);
}
END_TEST

START_TEST(a_zero_length_frame_is_refused)
{
    uint8_t h[LINK_HDR_BYTES];
    link_header(h, 0, 0);
    link_reader r = {0};
    ck_assert_int_eq(feed_all(&r, h, sizeof h, NULL), LINK_RD_EMPTY);
    link_reader_free(&r);
    link_header(h, 0, 32);
    ck_assert_int_eq(feed_all(&r, h, sizeof h, NULL), LINK_RD_EMPTY);
    link_reader_free(&r);
}
END_TEST

START_TEST(garbage_is_refused_as_soon_as_a_byte_shows_it)
{
    link_reader r = {0};
    size_t used;
    /* A wrong first byte: refused on that byte alone (an HTTP request, a ZMTP greeting). */
    ck_assert_int_eq(link_reader_feed(&r, (const uint8_t *)"G", 1, MAX_BODY, &used), LINK_RD_GARBAGE);
    link_reader_free(&r);
    const uint8_t zmtp[] = {0xff, 0, 0, 0, 0, 0, 0, 0, 1, 0x7f};
    ck_assert_int_eq(feed_all(&r, zmtp, sizeof zmtp, NULL), LINK_RD_GARBAGE);
    link_reader_free(&r);
    const uint8_t version[] = {'L', 'T', 2};
    ck_assert_int_eq(feed_all(&r, version, sizeof version, NULL), LINK_RD_GARBAGE);
    link_reader_free(&r);
    const uint8_t maclen[] = {'L', 'T', LINK_VERSION, 16, 0, 0, 0, 4};
    ck_assert_int_eq(feed_all(&r, maclen, sizeof maclen, NULL), LINK_RD_GARBAGE);
    link_reader_free(&r);
    /* Random bytes after a good frame: the frame comes out, then the refusal. */
    uint8_t s[64];
    link_header(s, 3, 0);
    memcpy(s + LINK_HDR_BYTES, "abc", 3);
    for (size_t i = LINK_HDR_BYTES + 3; i < sizeof s; i++) s[i] = (uint8_t)(0x80 + i);
    size_t at = 0;
    ck_assert_int_eq(link_reader_feed(&r, s, sizeof s, MAX_BODY, &at), LINK_RD_FRAME);
    ck_assert_uint_eq(at, LINK_HDR_BYTES + 3);
    ck_assert_int_eq(link_reader_feed(&r, s + at, sizeof s - at, MAX_BODY, &used), LINK_RD_GARBAGE);
    link_reader_free(&r);
}
END_TEST

/* ------------------------------------------------------------- connections */

typedef struct got {
    size_t frames;
    size_t bytes;
    bool refuse;
} got;

static bool count_frame(void *arg, link_conn *c, const uint8_t *msg, size_t len, const uint8_t *mac, size_t ml)
{
    (void)c;
    (void)mac;
    (void)ml;
    got *g = arg;
    ProtobufCMessage *m = NULL;
    ck_assert_int_eq(lt_frame_unpack(&latdata__batch__descriptor, msg, len, NULL, 0, NULL, DATA_MAX_FRAME, &m),
                     LT_FRAME_OK);
    lt_frame_free(m);
    g->frames++;
    g->bytes += len;
    return !g->refuse;
}

static link_conn *conn_on(int fd)
{
    link_conn *c = lt_calloc(1, sizeof *c);
    c->fd = fd;
    fcntl(fd, F_SETFL, O_NONBLOCK);
    return c;
}

/* One batch with a value of vlen bytes. */
static Latdata__Batch *batch_of(size_t vlen, Latdata__Req **req)
{
    static Latdata__Batch b;
    static Latdata__Req *reqs[1];
    void *v = lt_malloc(vlen);
    memset(v, 0x33, vlen);
    Latdata__Req *r = lt_malloc(sizeof *r);
    latdata__req__init(r);
    r->kind = 1;
    r->cache = "c";
    r->key.data = (uint8_t *)"k";
    r->key.len = 1;
    r->value.data = v; /* freed with the request by the test: one block each */
    r->value.len = vlen;
    *req = r;
    latdata__batch__init(&b);
    b.proto = LATTICE_DATA_PROTO;
    reqs[0] = *req;
    b.reqs = reqs;
    b.n_reqs = 1;
    return &b;
}

START_TEST(partial_writes_resume_and_the_queue_is_bounded)
{
    int sv[2];
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    int small = 4096;
    setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
    setsockopt(sv[1], SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    link_conn *a = conn_on(sv[0]), *b = conn_on(sv[1]);
    Latdata__Req *req;
    Latdata__Batch *batch = batch_of(1 << 20, &req); /* 1 MiB: far more than the socket holds */
    size_t sent = 0;
    while (link_send(a, NULL, batch, 0) == LATTICE_OK) sent++;
    /* Refused once the queue holds LINK_QUEUE_BYTES: the bound, not the memory, stops it. */
    ck_assert_uint_ge(a->q_bytes, LINK_QUEUE_BYTES);
    ck_assert_uint_lt(a->q_bytes, LINK_QUEUE_BYTES + (2u << 20));
    ck_assert_uint_ge(sent, LINK_QUEUE_BYTES / (1u << 20));
    ck_assert_int_ge(a->fd, 0); /* a full queue drops the frame, not the connection */
    /* Drain: the writer resumes mid-frame whenever the socket is writable. */
    got g = {0};
    for (int spins = 0; g.frames < sent && spins < 200000; spins++) {
        struct pollfd p[2] = {{a->fd, link_events(a), 0}, {b->fd, link_events(b), 0}};
        ck_assert_int_ge(poll(p, 2, 1000), 0);
        ck_assert_int_eq(link_service(a, p[0].revents, DATA_MAX_FRAME, 64, count_frame, &g, 0), LINK_OK);
        ck_assert_int_eq(link_service(b, p[1].revents, DATA_MAX_FRAME, 64, count_frame, &g, 0), LINK_OK);
    }
    ck_assert_uint_eq(g.frames, sent);
    ck_assert_uint_eq(a->q_bytes, 0);
    ck_assert_ptr_null(a->qhead);
    /* A frame its owner refuses closes the connection. */
    g.refuse = true;
    ck_assert_int_eq(link_send(a, NULL, batch, 0), LATTICE_OK);
    link_why why = LINK_OK;
    for (int spins = 0; why == LINK_OK && spins < 100000; spins++) {
        struct pollfd p[2] = {{a->fd, link_events(a), 0}, {b->fd, link_events(b), 0}};
        ck_assert_int_ge(poll(p, 2, 1000), 0);
        link_service(a, p[0].revents, DATA_MAX_FRAME, 64, count_frame, &g, 0);
        why = link_service(b, p[1].revents, DATA_MAX_FRAME, 64, count_frame, &g, 0);
    }
    ck_assert_int_eq(why, LINK_BAD);
    ck_assert_int_eq(b->rd_refused, LINK_RD_FRAME);
    ck_assert_int_eq(b->fd, -1);
    lt_free(req->value.data);
    lt_free(req);
    link_free(a);
    link_free(b);
}
END_TEST

START_TEST(a_stalled_half_frame_and_a_silent_stranger_time_out)
{
    int sv[2];
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    link_conn *b = conn_on(sv[1]);
    b->opened_ms = 1000;
    ck_assert_int_eq(link_check_stall(b, 1000 + LINK_HELLO_MS - 1), LINK_OK);
    ck_assert_int_eq(link_check_stall(b, 1000 + LINK_HELLO_MS), LINK_TIMEOUT);
    /* Proven, then half a frame: timed out LINK_STALL_MS after that frame began. */
    b->proven = true;
    uint8_t h[LINK_HDR_BYTES];
    link_header(h, 100, 0);
    ck_assert_int_eq(write(sv[0], h, sizeof h), (ssize_t)sizeof h);
    got g = {0};
    ck_assert_int_eq(link_service(b, POLLIN, DATA_MAX_FRAME, 64, count_frame, &g, 5000), LINK_OK);
    ck_assert_int_eq(link_check_stall(b, 5000 + LINK_STALL_MS - 1), LINK_OK);
    ck_assert_int_eq(link_check_stall(b, 5000 + LINK_STALL_MS), LINK_TIMEOUT);
    /* The other side going away is an end of stream. */
    close(sv[0]);
    ck_assert_int_eq(link_service(b, POLLIN, DATA_MAX_FRAME, 64, count_frame, &g, 6000), LINK_EOF);
    link_free(b);
}
END_TEST

START_TEST(a_dial_connection_backs_off_after_a_failure)
{
    /* A listener we close again: nothing listens on its port afterwards. */
    link_srv s;
    char bound[160];
    ck_assert_int_eq(link_srv_open(&s, "127.0.0.1", bound, sizeof bound), LATTICE_OK);
    ck_assert(!strncmp(bound, "tcp://127.0.0.1:", 16));
    link_srv_close(&s);
    link_conn *c = link_dial(bound);
    ck_assert_ptr_nonnull(c);
    Latdata__Req *req;
    Latdata__Batch *batch = batch_of(10, &req);
    lattice_status st = link_send(c, NULL, batch, 100);
    /* Refused at once, or pending; either way the connect fails. */
    for (int spins = 0; c->fd >= 0 && spins < 1000; spins++) {
        struct pollfd p = {c->fd, link_events(c), 0};
        poll(&p, 1, 100);
        link_service(c, p.revents, DATA_MAX_FRAME, 64, count_frame, NULL, 100);
    }
    (void)st;
    ck_assert_int_eq(c->fd, -1);
    ck_assert_uint_eq(c->retry_ms, 100 + LINK_BACKOFF_MIN_MS);
    ck_assert_int_eq(link_send(c, NULL, batch, 100 + LINK_BACKOFF_MIN_MS - 1), LATTICE_ERR_IO); /* in backoff */
    ck_assert_int_eq(c->fd, -1);
    lt_free(req->value.data);
    lt_free(req);
    link_free(c);
    ck_assert_ptr_null(link_dial("127.0.0.1:5"));  /* no scheme */
    ck_assert_ptr_null(link_dial("tcp://nohostport"));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("fabric: link");
    TCase *tc = tcase_create("link");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, every_split_point_of_a_stream_gives_the_same_frames);
    tcase_add_test(tc, an_oversized_length_is_refused_at_the_header);
    tcase_add_test(tc, a_zero_length_frame_is_refused);
    tcase_add_test(tc, garbage_is_refused_as_soon_as_a_byte_shows_it);
    tcase_add_test(tc, partial_writes_resume_and_the_queue_is_bounded);
    tcase_add_test(tc, a_stalled_half_frame_and_a_silent_stranger_time_out);
    tcase_add_test(tc, a_dial_connection_backs_off_after_a_failure);
    suite_add_tcase(s, tc);
    return lt_run_suite(s);
}
