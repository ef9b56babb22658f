/*
 * discovery without a network: the static and multicast finder parsers,
 * frame decoding (size, MAC, unknown fields, protocol version, truncation),
 * topology snapshots; then two in-process nodes through the public API
 * (join, events, graceful leave) on loopback.
 */
#include <arpa/inet.h>
#include <check.h>
#include <stdio.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "run_suite.h"
#include "discovery/discovery.h"
#include "internal.h"
#include "lattice/alloc.h"
#include "lattice/lattice.h"
#include "lattice/log.h"

static lattice_finder_addr fa[256];

START_TEST(static_finder_accepts_ignite_formats)
{
    size_t n;
    ck_assert_int_eq(lattice_finder_parse_static("127.0.0.1", 47500, 10, fa, 256, &n), LATTICE_OK);
    ck_assert_uint_eq(n, 10);
    ck_assert_str_eq(fa[0].host, "127.0.0.1");
    ck_assert_int_eq(fa[0].port, 47500);
    ck_assert_int_eq(fa[9].port, 47509);
    ck_assert_int_eq(lattice_finder_parse_static("10.0.0.1:5000", 47500, 10, fa, 256, &n), LATTICE_OK);
    ck_assert_uint_eq(n, 1);
    ck_assert_int_eq(fa[0].port, 5000);
    ck_assert_int_eq(lattice_finder_parse_static("127.0.0.1:47500..47502, 10.1.2.3:7 ,localhost:9", 47500, 10, fa,
                                                 256, &n), LATTICE_OK);
    ck_assert_uint_eq(n, 5);
    ck_assert_int_eq(fa[2].port, 47502);
    ck_assert_str_eq(fa[3].host, "10.1.2.3");
    ck_assert_int_eq(fa[3].port, 7);
    ck_assert_str_eq(fa[4].host, "127.0.0.1"); /* host names resolve */
    ck_assert_int_eq(lattice_finder_parse_static("1.2.3.4:65535..65535", 1, 1, fa, 256, &n), LATTICE_OK);
    ck_assert_uint_eq(n, 1);
}
END_TEST

START_TEST(static_finder_rejects_bad_specs)
{
    static const char *bad[] = {"", ",", "127.0.0.1,", ",127.0.0.1", "127.0.0.1:", ":47500", "127.0.0.1:0",
                                "127.0.0.1:65536", "127.0.0.1:99999999999", "127.0.0.1:5..3", "127.0.0.1:a",
                                "127.0.0.1:1..", "127.0.0.1:..5", "127.0.0.1:1...5", "127.0.0.1:-1", "127.0.0.1:1..2..3",
                                "no-such-host.invalid", "127.0.0.1:47500 47501",
                                "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa:1", NULL};
    size_t n;
    for (int i = 0; bad[i]; i++)
        ck_assert_msg(lattice_finder_parse_static(bad[i], 47500, 10, fa, 256, &n) == LATTICE_ERR_INVAL,
                      "accepted '%s'", bad[i]);
    ck_assert_int_eq(lattice_finder_parse_static(NULL, 47500, 10, fa, 256, &n), LATTICE_ERR_INVAL);
    /* More addresses than room: an error, not a silent cut. */
    ck_assert_int_eq(lattice_finder_parse_static("127.0.0.1:1..65535", 47500, 10, fa, 256, &n), LATTICE_ERR_TOO_LARGE);
    ck_assert_int_eq(lattice_finder_parse_static("127.0.0.1", 47500, 10, fa, 5, &n), LATTICE_ERR_TOO_LARGE);
}
END_TEST

START_TEST(multicast_finder_parses_group_and_port)
{
    char g[64];
    int p;
    ck_assert(lattice_finder_is_multicast("multicast://228.1.2.4:47400"));
    ck_assert(!lattice_finder_is_multicast("127.0.0.1:47400"));
    ck_assert_int_eq(lattice_finder_parse_multicast("multicast://228.1.2.4:47401", g, &p), LATTICE_OK);
    ck_assert_str_eq(g, "228.1.2.4");
    ck_assert_int_eq(p, 47401);
    ck_assert_int_eq(lattice_finder_parse_multicast("multicast://239.0.0.1", g, &p), LATTICE_OK);
    ck_assert_int_eq(p, LATTICE_MCAST_DEFAULT_PORT);
    static const char *bad[] = {"multicast://", "multicast://10.0.0.1:5", "multicast://228.1.2.4:",
                                "multicast://228.1.2.4:0", "multicast://228.1.2.4:x", "multicast://nothost:1",
                                "multicast:/228.1.2.4", "228.1.2.4:47400", NULL};
    for (int i = 0; bad[i]; i++)
        ck_assert_msg(lattice_finder_parse_multicast(bad[i], g, &p) == LATTICE_ERR_INVAL, "accepted '%s'", bad[i]);
}
END_TEST

/* ---- wire ---- */

static uint8_t *pack_heartbeat(uint32_t major, const char *cluster, const uint8_t *key, size_t *len, uint8_t mac[32])
{
    Latdisc__Envelope e = LATDISC__ENVELOPE__INIT;
    Latdisc__Heartbeat h = LATDISC__HEARTBEAT__INIT;
    Latdisc__Stats s = LATDISC__STATS__INIT;
    s.rss_bytes = 12345;
    h.major = 7;
    h.stats = &s;
    e.proto_major = major;
    e.cluster = (char *)cluster;
    e.sender = "abc";
    e.sender_addr = "tcp://127.0.0.1:1";
    e.body_case = LATDISC__ENVELOPE__BODY_HEARTBEAT;
    e.heartbeat = &h;
    uint8_t *buf;
    ck_assert_int_eq(wire_encode(&e, key, &buf, len, mac), LATTICE_OK);
    return buf;
}

START_TEST(wire_round_trips_with_and_without_a_key)
{
    uint8_t key[32], other[32], mac[32];
    wire_derive_key((const uint8_t *)"s3cret", 6, key);
    wire_derive_key((const uint8_t *)"s3cres", 6, other);
    ck_assert(memcmp(key, other, 32) != 0);
    size_t len;
    uint8_t *b = pack_heartbeat(LATTICE_PROTO_MAJOR, "c", NULL, &len, mac);
    Latdisc__Envelope *e;
    ck_assert_int_eq(wire_decode(b, len, NULL, 0, NULL, 4096, &e), WIRE_OK);
    ck_assert_uint_eq(e->heartbeat->stats->rss_bytes, 12345);
    ck_assert_str_eq(e->cluster, "c");
    wire_free(e);
    lt_free(b);
    b = pack_heartbeat(LATTICE_PROTO_MAJOR, "c", key, &len, mac);
    ck_assert_int_eq(wire_decode(b, len, mac, 32, key, 4096, &e), WIRE_OK);
    wire_free(e);
    /* wrong key, missing MAC, short MAC, MAC but no key of ours, flipped byte */
    ck_assert_int_eq(wire_decode(b, len, mac, 32, other, 4096, &e), WIRE_AUTH);
    ck_assert_ptr_null(e);
    ck_assert_int_eq(wire_decode(b, len, NULL, 0, key, 4096, &e), WIRE_AUTH);
    ck_assert_int_eq(wire_decode(b, len, mac, 31, key, 4096, &e), WIRE_AUTH);
    ck_assert_int_eq(wire_decode(b, len, mac, 32, NULL, 4096, &e), WIRE_AUTH);
    b[len - 1] ^= 1;
    ck_assert_int_eq(wire_decode(b, len, mac, 32, key, 4096, &e), WIRE_AUTH);
    lt_free(b);
}
END_TEST

START_TEST(wire_drops_oversized_truncated_unknown_and_other_versions)
{
    uint8_t mac[32];
    size_t len;
    uint8_t *b = pack_heartbeat(LATTICE_PROTO_MAJOR, "c", NULL, &len, mac);
    Latdisc__Envelope *e;
    ck_assert_int_eq(wire_decode(b, len, NULL, 0, NULL, len - 1, &e), WIRE_OVERSIZED);
    ck_assert_int_eq(wire_decode(b, 0, NULL, 0, NULL, 4096, &e), WIRE_MALFORMED);
    /* Every truncation is rejected or decodes to something checked; none crashes. */
    for (size_t cut = 1; cut < len; cut++) {
        enum wire_verdict v = wire_decode(b, cut, NULL, 0, NULL, 4096, &e);
        ck_assert(v == WIRE_MALFORMED || v == WIRE_OK || v == WIRE_PROTO_MAJOR);
        wire_free(e);
    }
    /* An unknown top-level field (9, varint). */
    uint8_t u[512];
    memcpy(u, b, len);
    u[len] = (9 << 3) | 0; /* field 9: unused in Envelope */
    u[len + 1] = 5;
    ck_assert_int_eq(wire_decode(u, len + 2, NULL, 0, NULL, 4096, &e), WIRE_MALFORMED);
    /* protobuf-c keeps an overlong tag for field 0 as an unknown field. */
    const uint8_t odd[] = {0x0a, 0x00, 0x80, 0x00, 0x00};
    ck_assert_int_eq(wire_decode(odd, sizeof odd, NULL, 0, NULL, 4096, &e), WIRE_MALFORMED);
    lt_free(b);
    b = pack_heartbeat(LATTICE_PROTO_MAJOR + 1, "c", NULL, &len, mac);
    ck_assert_int_eq(wire_decode(b, len, NULL, 0, NULL, 4096, &e), WIRE_PROTO_MAJOR);
    ck_assert_uint_eq(e->proto_major, LATTICE_PROTO_MAJOR + 1);
    wire_free(e);
    lt_free(b);
    /* A message with no body. */
    Latdisc__Envelope empty = LATDISC__ENVELOPE__INIT;
    empty.proto_major = LATTICE_PROTO_MAJOR;
    empty.cluster = "c";
    ck_assert_int_eq(wire_encode(&empty, NULL, &b, &len, mac), LATTICE_OK);
    ck_assert_int_eq(wire_decode(b, len, NULL, 0, NULL, 4096, &e), WIRE_MALFORMED);
    lt_free(b);
}
END_TEST

START_TEST(wire_rejects_unknown_fields_nested_in_sub_messages)
{
    /* A Member carrying an unknown field 50, inside a JoinRequest. */
    Latdisc__Envelope e = LATDISC__ENVELOPE__INIT;
    Latdisc__JoinRequest j = LATDISC__JOIN_REQUEST__INIT;
    Latdisc__Member m = LATDISC__MEMBER__INIT;
    ProtobufCMessageUnknownField uf = {.tag = 50, .wire_type = PROTOBUF_C_WIRE_TYPE_VARINT, .len = 1,
                                       .data = (uint8_t[]){1}};
    m.id = "x";
    m.base.n_unknown_fields = 1;
    m.base.unknown_fields = &uf;
    j.self = &m;
    e.proto_major = LATTICE_PROTO_MAJOR;
    e.body_case = LATDISC__ENVELOPE__BODY_JOIN;
    e.join = &j;
    uint8_t *b, mac[32];
    size_t len;
    ck_assert_int_eq(wire_encode(&e, NULL, &b, &len, mac), LATTICE_OK);
    Latdisc__Envelope *out;
    ck_assert_int_eq(wire_decode(b, len, NULL, 0, NULL, 4096, &out), WIRE_MALFORMED);
    lt_free(b);
}
END_TEST

START_TEST(wire_survives_random_bytes)
{
    srand(42);
    uint8_t buf[256];
    for (int i = 0; i < 20000; i++) {
        size_t n = (size_t)(rand() % (int)sizeof buf);
        for (size_t k = 0; k < n; k++) buf[k] = (uint8_t)rand();
        Latdisc__Envelope *e;
        enum wire_verdict v = wire_decode(buf, n, NULL, 0, NULL, 4096, &e);
        if (v == WIRE_OK || v == WIRE_PROTO_MAJOR) ck_assert_ptr_nonnull(e);
        else ck_assert_ptr_null(e);
        wire_free(e);
    }
}
END_TEST

/* ---- topology ---- */

START_TEST(topology_sorts_by_order_and_round_trips_through_the_wire)
{
    lattice_attr a[] = {{"data_addr", "tcp://127.0.0.1:9"}, {"resp_port", "6379"}};
    lattice_member m1 = {.id = "id-1", .consistent_id = "h:1", .order = 5, .role = LATTICE_ROLE_SERVER,
                         .addr = "tcp://h:1", .host = "h", .start_time_ms = 10, .n_attrs = 2, .attrs = a};
    lattice_member m2 = {.id = "id-2", .consistent_id = "h:2", .order = 2, .role = LATTICE_ROLE_CLIENT,
                         .addr = "tcp://h:2", .host = "h"};
    const lattice_member *ms[] = {&m1, &m2};
    lattice_topology *t = topo_build(3, 1, 6, 1000, "id-2", ms, 2);
    ck_assert_ptr_nonnull(t);
    /* The baseline is kept sorted and without duplicates, and may name a
     * server that is not in the topology (down or cut off). */
    const char *bl[] = {"h:9", "h:1", "h:9"};
    ck_assert(topo_set_baseline(t, bl, 3, 7));
    ck_assert(topo_in_baseline(t, "h:1") && topo_in_baseline(t, "h:9") && !topo_in_baseline(t, "h:2"));
    ck_assert_uint_eq(lattice_topology_size(t), 2);
    ck_assert_str_eq(lattice_topology_member(t, 0)->id, "id-2");
    ck_assert_ptr_null(lattice_topology_member(t, 2));
    ck_assert_str_eq(lattice_member_attr(lattice_topology_find(t, "id-1"), "resp_port"), "6379");
    ck_assert_ptr_null(lattice_member_attr(lattice_topology_find(t, "id-1"), "nope"));
    ck_assert_ptr_null(lattice_topology_find(t, "id-3"));
    Latdisc__Topology p;
    ck_assert_int_eq(topo_to_proto(t, &p), LATTICE_OK);
    size_t n = latdisc__topology__get_packed_size(&p);
    uint8_t *buf = malloc(n);
    latdisc__topology__pack(&p, buf);
    topo_proto_release(&p);
    Latdisc__Topology *q = latdisc__topology__unpack(NULL, n, buf);
    ck_assert_ptr_nonnull(q);
    lattice_topology *u = topo_from_proto(q);
    latdisc__topology__free_unpacked(q, NULL);
    free(buf);
    ck_assert_ptr_nonnull(u);
    ck_assert_uint_eq(lattice_topology_major(u), 3);
    ck_assert_uint_eq(lattice_topology_minor(u), 1);
    ck_assert_str_eq(lattice_topology_coordinator(u), "id-2");
    ck_assert_int_eq(lattice_topology_member(u, 0)->role, LATTICE_ROLE_CLIENT);
    ck_assert_uint_eq(lattice_topology_member(u, 1)->order, 5);
    ck_assert_str_eq(lattice_member_attr(lattice_topology_member(u, 1), "data_addr"), "tcp://127.0.0.1:9");
    ck_assert_uint_eq(lattice_topology_baseline_size(u), 2);
    ck_assert_str_eq(lattice_topology_baseline_at(u, 0), "h:1");
    ck_assert_str_eq(lattice_topology_baseline_at(u, 1), "h:9");
    ck_assert_ptr_null(lattice_topology_baseline_at(u, 2));
    ck_assert_uint_eq(lattice_topology_baseline_version(u), 7);
    /* References: a copy outlives the original's release. */
    topo_get(u);
    topo_put(u);
    ck_assert_str_eq(lattice_topology_member(u, 1)->consistent_id, "h:1");
    topo_put(u);
    topo_put(t);
}
END_TEST

START_TEST(topology_build_fails_cleanly_on_every_allocation_failure)
{
    lattice_attr a[] = {{"k", "v"}};
    lattice_member m1 = {.id = "a", .consistent_id = "b", .order = 1, .addr = "c", .host = "d", .n_attrs = 1, .attrs = a};
    const lattice_member *ms[] = {&m1, &m1};
    for (uint64_t k = 1; k < 40; k++) {
        lattice_alloc_fail_nth(k);
        lattice_topology *t = topo_build(1, 0, 2, 1000, "a", ms, 2);
        lattice_alloc_fail_nth(0);
        if (t) ck_assert_uint_eq(lattice_topology_size(t), 2);
        topo_put(t);
    }
}
END_TEST

START_TEST(the_smaller_grid_yields_and_exactly_one_side_does)
{
    ck_assert(merge_yields(false, 1, "10.0.0.3:47500", false, 2, "10.0.0.1:47500"));
    ck_assert(!merge_yields(false, 2, "10.0.0.1:47500", false, 1, "10.0.0.3:47500"));
    /* More servers wins even against a smaller host:port. */
    ck_assert(!merge_yields(false, 3, "10.0.0.9:47500", false, 2, "10.0.0.1:47500"));
    /* A tie: the larger coordinator host:port yields, and only it. */
    ck_assert(merge_yields(false, 2, "10.0.0.2:47500", false, 2, "10.0.0.1:47500"));
    ck_assert(!merge_yields(false, 2, "10.0.0.1:47500", false, 2, "10.0.0.2:47500"));
    for (size_t a = 1; a < 4; a++)
        for (size_t b = 1; b < 4; b++)
            ck_assert(merge_yields(false, a, "h:1", false, b, "h:2") != merge_yields(false, b, "h:2", false, a, "h:1"));
}
END_TEST

/* The side that held quorum is the only one that acknowledged writes while
 * apart: it never dissolves into a side without quorum, however many
 * servers joined there. */
START_TEST(a_grid_without_quorum_yields_to_one_with_it_whatever_its_size)
{
    ck_assert(merge_yields(false, 3, "10.0.0.1:47500", true, 2, "10.0.0.9:47500"));
    ck_assert(!merge_yields(true, 2, "10.0.0.9:47500", false, 3, "10.0.0.1:47500"));
    ck_assert(!merge_yields(true, 1, "10.0.0.9:47500", false, 5, "10.0.0.1:47500"));
    /* Both with (a forced baseline) or both without: the size rule. */
    ck_assert(merge_yields(true, 1, "h:1", true, 2, "h:2"));
    for (int qa = 0; qa < 2; qa++)
        for (int qb = 0; qb < 2; qb++)
            for (size_t a = 1; a < 4; a++)
                for (size_t b = 1; b < 4; b++)
                    ck_assert(merge_yields(qa, a, "h:1", qb, b, "h:2") != merge_yields(qb, b, "h:2", qa, a, "h:1"));
}
END_TEST

START_TEST(discovery_init_rejects_bad_configuration)
{
    const char *bad_finders[] = {"127.0.0.1:0"};
    const char *mc_bad[] = {"multicast://10.0.0.1:5"};
    lattice_discovery_config c = {.cluster = "x", .host = "127.0.0.1", .port = 40000, .port_range = 1,
                                  .failure_detection_ms = 1000, .max_message_bytes = 4096};
    lattice_discovery *d;
    ck_assert_int_eq(lattice_discovery_init(&c, &d), LATTICE_OK);
    lattice_discovery_destroy(d);
    c.finders = bad_finders;
    c.n_finders = 1;
    ck_assert_int_eq(lattice_discovery_init(&c, &d), LATTICE_ERR_INVAL);
    ck_assert_ptr_null(d);
    c.finders = mc_bad;
    ck_assert_int_eq(lattice_discovery_init(&c, &d), LATTICE_ERR_INVAL);
    c.n_finders = 0;
    c.host = "localhost";
    ck_assert_int_eq(lattice_discovery_init(&c, &d), LATTICE_ERR_INVAL);
    c.host = "0.0.0.0"; /* advertised to peers: must be dialable */
    ck_assert_int_eq(lattice_discovery_init(&c, &d), LATTICE_ERR_INVAL);
    c.host = "127.0.0.1";
    c.cluster = "";
    ck_assert_int_eq(lattice_discovery_init(&c, &d), LATTICE_ERR_INVAL);
    c.cluster = "x";
    c.failure_detection_ms = 5;
    ck_assert_int_eq(lattice_discovery_init(&c, &d), LATTICE_ERR_INVAL);
    c.failure_detection_ms = 1000;
    const char *bad_attr[] = {"novalue"};
    c.attrs = bad_attr;
    c.n_attrs = 1;
    ck_assert_int_eq(lattice_discovery_init(&c, &d), LATTICE_ERR_INVAL);
}
END_TEST

/* ---- two nodes in one process, through lattice.h ---- */

typedef struct seen {
    int joined, left, failed;
} seen;

static void on_event(void *ctx, int kind, const lattice_member *m, const lattice_topology *t)
{
    seen *s = ctx;
    ck_assert_ptr_nonnull(m);
    ck_assert_ptr_nonnull(t);
    if (kind == LATTICE_EVENT_JOINED) __atomic_add_fetch(&s->joined, 1, __ATOMIC_SEQ_CST);
    if (kind == LATTICE_EVENT_LEFT) __atomic_add_fetch(&s->left, 1, __ATOMIC_SEQ_CST);
    if (kind == LATTICE_EVENT_FAILED) __atomic_add_fetch(&s->failed, 1, __ATOMIC_SEQ_CST);
}

static int free_base(int n)
{
    for (int tries = 0; tries < 500; tries++) {
        int b = 20000 + rand() % (32768 - 20000 - n), ok = 1; /* below the ephemeral range */
        for (int i = 0; i < n && ok; i++) {
            int fd = socket(AF_INET, SOCK_STREAM, 0);
            struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)(b + i))};
            inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
            ok = bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0;
            close(fd);
        }
        if (ok) return b;
    }
    return 0;
}

START_TEST(two_nodes_join_see_events_and_leave_through_the_api)
{
    lattice_log_set_level(LT_WARN);
    srand((unsigned)getpid());
    int b = free_base(2);
    ck_assert_int_gt(b, 0);
    char finder[64];
    snprintf(finder, sizeof finder, "127.0.0.1:%d..%d", b, b + 1);
    lattice_config c;
    lattice_config_init(&c);
    c.cluster = "unit";
    c.port = b;
    c.port_range = 1;
    c.failure_detection_ms = 1000;
    c.finders[c.n_finders++] = finder;
    c.attrs[c.n_attrs++] = "resp_port=6379";
    lattice_node *n1, *n2;
    ck_assert_int_eq(lattice_node_start(&c, &n1), LATTICE_OK);
    seen s1 = {0};
    ck_assert_int_eq(lattice_node_subscribe(n1, on_event, &s1), LATTICE_OK);
    ck_assert_int_eq(lattice_node_wait_joined(n1, 10000), LATTICE_OK);
    c.port = b + 1;
    ck_assert_int_eq(lattice_node_start(&c, &n2), LATTICE_OK);
    ck_assert_int_eq(lattice_node_wait_joined(n2, 10000), LATTICE_OK);
    ck_assert_int_eq(lattice_node_port(n2), b + 1);
    /* n1 saw itself (its first view) and then n2 join - nothing more. */
    for (int i = 0; i < 100 && __atomic_load_n(&s1.joined, __ATOMIC_SEQ_CST) < 2; i++) usleep(50000);
    ck_assert_int_eq(s1.joined, 2);
    lattice_topology *t = lattice_node_topology(n2);
    ck_assert_ptr_nonnull(t);
    ck_assert_uint_eq(lattice_topology_size(t), 2);
    char id1[64];
    lattice_node_id(n1, id1, sizeof id1);
    ck_assert_str_eq(lattice_topology_coordinator(t), id1);
    ck_assert_str_eq(lattice_member_attr(lattice_topology_member(t, 1), "resp_port"), "6379");
    /* The same port is taken: a third node with range 1 cannot start. */
    lattice_node *n3;
    ck_assert_int_eq(lattice_node_start(&c, &n3), LATTICE_ERR_IO);
    /* Another cluster name: waiting returns the refusal, not a timeout. */
    lattice_config o = c;
    o.cluster = "other";
    o.port = 0;
    o.client = true;
    ck_assert_int_eq(lattice_node_start(&o, &n3), LATTICE_OK);
    ck_assert_int_eq(lattice_node_wait_joined(n3, 30000), LATTICE_ERR_CLUSTER);
    lattice_node_stop(n3);
    lattice_node_stop(n2);
    for (int i = 0; i < 100 && __atomic_load_n(&s1.left, __ATOMIC_SEQ_CST) < 1; i++) usleep(50000);
    ck_assert_int_eq(s1.left, 1);
    ck_assert_int_eq(s1.failed, 0);
    /* The old snapshot stays valid while held. */
    ck_assert_uint_eq(lattice_topology_size(t), 2);
    lattice_topology_release(t);
    t = lattice_node_topology(n1);
    ck_assert_uint_eq(lattice_topology_size(t), 1);
    lattice_topology_release(t);
    lattice_node_stats st;
    ck_assert_int_eq(lattice_node_stats_of(n1, id1, &st), LATTICE_OK);
    ck_assert_uint_gt(st.rss_bytes, 0);
    ck_assert_int_eq(lattice_node_stats_of(n1, "nobody", &st), LATTICE_ERR_NOT_FOUND);
    lattice_node_stop(n1);
}
END_TEST

START_TEST(a_missing_secret_file_fails_start)
{
    lattice_config c;
    lattice_config_init(&c);
    c.port = 0;
    c.secret_file = "/nonexistent/secret";
    lattice_node *n;
    ck_assert_int_eq(lattice_node_start(&c, &n), LATTICE_ERR_INVAL);
    ck_assert_ptr_null(n);
    ck_assert_int_eq(lattice_node_start(NULL, &n), LATTICE_ERR_INVAL);
}
END_TEST


/* A lease needs the coordinator's echo and a strict majority of the
 * servers counting us, and runs lease_ms from the deciding echo. */
START_TEST(lease_needs_the_coordinator_and_a_majority)
{
    int64_t acks[4] = {1000, 900, 0, 0};
    /* Alone: no one to ask. */
    ck_assert(lattice_lease_until(NULL, 0, 1, true, -1, 500) == INT64_MAX);
    /* 3 servers, we coordinate: one more echo is a majority; the newest counts. */
    ck_assert_int_eq(lattice_lease_until(acks, 2, 3, true, -1, 500), 1500);
    /* Not the coordinator: its echo bounds the lease too. */
    ck_assert_int_eq(lattice_lease_until(acks, 2, 3, true, 900, 500), 1400);
    ck_assert_int_eq(lattice_lease_until(acks, 2, 3, true, 0, 500), 0); /* never heard */
    /* 5 servers: we need 2 others; the second-newest echo decides. */
    ck_assert_int_eq(lattice_lease_until(acks, 4, 5, true, -1, 500), 1400);
    /* 5 servers with only one echo: no majority, no lease. */
    int64_t one[4] = {0, 1000, 0, 0};
    ck_assert_int_eq(lattice_lease_until(one, 4, 5, true, -1, 500), 0);
    /* 2 servers: the other one is the majority. */
    ck_assert_int_eq(lattice_lease_until(one, 1, 2, true, -1, 500), 0);
    ck_assert_int_eq(lattice_lease_until(acks, 1, 2, true, 1000, 500), 1500);
    /* Fewer echo slots than a majority needs. */
    ck_assert_int_eq(lattice_lease_until(acks, 1, 5, true, -1, 500), 0);
    ck_assert_int_eq(lattice_lease_until(acks, 0, 0, true, -1, 500), 0);
}
END_TEST

/* The lease counts the baseline, not the topology: a side that removed the
 * others (a topology of one) still needs a majority of the baseline, and a
 * server outside the baseline counts only the baseline's echoes. */
START_TEST(lease_needs_a_majority_of_the_baseline_not_of_the_topology)
{
    int64_t acks[2] = {1000, 900};
    /* Cut off alone, coordinator of itself, baseline of 3: no lease. */
    ck_assert_int_eq(lattice_lease_until(NULL, 0, 3, true, -1, 500), 0);
    /* Outside a baseline of 3: two baseline echoes are its majority. */
    ck_assert_int_eq(lattice_lease_until(acks, 2, 3, false, -1, 500), 1400);
    ck_assert_int_eq(lattice_lease_until(acks, 1, 3, false, -1, 500), 0);
    /* Baseline of 1 (a first server), us in it: the coordinator's echo only. */
    ck_assert(lattice_lease_until(NULL, 0, 1, true, -1, 500) == INT64_MAX);
    /* Reachable: us plus every echo younger than the lease. */
    ck_assert_uint_eq(lattice_quorum_reachable(acks, 2, true, 1200, 500), 3);
    ck_assert_uint_eq(lattice_quorum_reachable(acks, 2, true, 1450, 500), 2);
    ck_assert_uint_eq(lattice_quorum_reachable(acks, 2, false, 1600, 500), 0);
    int64_t never[1] = {0};
    ck_assert_uint_eq(lattice_quorum_reachable(never, 1, true, 10, 500), 1);
}
END_TEST

int main(void)
{
    lattice_log_set_level(LT_ERROR);
    Suite *s = suite_create("discovery");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, static_finder_accepts_ignite_formats);
    tcase_add_test(tc, lease_needs_the_coordinator_and_a_majority);
    tcase_add_test(tc, lease_needs_a_majority_of_the_baseline_not_of_the_topology);
    tcase_add_test(tc, a_grid_without_quorum_yields_to_one_with_it_whatever_its_size);
    tcase_add_test(tc, static_finder_rejects_bad_specs);
    tcase_add_test(tc, multicast_finder_parses_group_and_port);
    tcase_add_test(tc, wire_round_trips_with_and_without_a_key);
    tcase_add_test(tc, wire_drops_oversized_truncated_unknown_and_other_versions);
    tcase_add_test(tc, wire_rejects_unknown_fields_nested_in_sub_messages);
    tcase_add_test(tc, wire_survives_random_bytes);
    tcase_add_test(tc, topology_sorts_by_order_and_round_trips_through_the_wire);
    tcase_add_test(tc, topology_build_fails_cleanly_on_every_allocation_failure);
    tcase_add_test(tc, the_smaller_grid_yields_and_exactly_one_side_does);
    tcase_add_test(tc, discovery_init_rejects_bad_configuration);
    tcase_add_test(tc, two_nodes_join_see_events_and_leave_through_the_api);
    tcase_add_test(tc, a_missing_secret_file_fails_start);
    suite_add_tcase(s, tc);
    return lt_run_suite(s);
}
