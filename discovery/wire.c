/*
 * Frames on the peer port: base's frame layer (size cap, HMAC-SHA256 with
 * the cluster key, decoding that refuses unknown fields at any depth), then
 * what an Envelope must hold: a body, bounded strings, our protocol major.
 * Also the small process sampler reported in heartbeats.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "lattice/alloc.h"

void wire_derive_key(const uint8_t *secret, size_t len, uint8_t key[LT_FRAME_KEY_BYTES])
{
    lt_frame_derive_key(secret, len, "lattice cluster secret v1", key);
}

enum wire_verdict wire_decode(const uint8_t *buf, size_t len, const uint8_t *mac, size_t mac_len,
                              const uint8_t *key, size_t max_bytes, Latdisc__Envelope **out)
{
    *out = NULL;
    ProtobufCMessage *m = NULL;
    switch (lt_frame_unpack(&latdisc__envelope__descriptor, buf, len, mac, mac_len, key, max_bytes, &m)) {
    case LT_FRAME_OK: break;
    case LT_FRAME_OVERSIZED: return WIRE_OVERSIZED;
    case LT_FRAME_AUTH: return WIRE_AUTH;
    case LT_FRAME_MALFORMED: return WIRE_MALFORMED;
    }
    Latdisc__Envelope *e = (Latdisc__Envelope *)m;
    if (e->body_case == LATDISC__ENVELOPE__BODY__NOT_SET || strlen(e->sender) > 64 ||
        strlen(e->sender_addr) > 128 || strlen(e->cluster) > 256) {
        wire_free(e);
        return WIRE_MALFORMED;
    }
    *out = e;
    return e->proto_major == LATTICE_PROTO_MAJOR ? WIRE_OK : WIRE_PROTO_MAJOR;
}

void wire_free(Latdisc__Envelope *e)
{
    if (e) lt_frame_free(&e->base);
}

lattice_status wire_encode(const Latdisc__Envelope *e, const uint8_t *key, uint8_t **buf, size_t *len,
                           uint8_t mac[LT_FRAME_MAC_BYTES])
{
    return lt_frame_pack(&e->base, key, buf, len, mac);
}

static double now_s(clockid_t c)
{
    struct timespec ts;
    clock_gettime(c, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void proc_sample(proc_sampler *s, uint64_t *rss_bytes)
{
    double cpu = now_s(CLOCK_PROCESS_CPUTIME_ID), wall = now_s(CLOCK_MONOTONIC);
    if (s->last_wall_s > 0 && wall - s->last_wall_s > 0.01)
        s->load = (cpu - s->last_cpu_s) / (wall - s->last_wall_s);
    s->last_cpu_s = cpu;
    s->last_wall_s = wall;
    *rss_bytes = lt_rss_bytes();
}
