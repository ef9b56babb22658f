/*
 * Frames on the peer port: size cap, HMAC-SHA256 (libsodium) with the
 * cluster key, protobuf-c decoding that refuses unknown fields at any depth
 * (PITFALLS: protobuf-c keeps odd encodings as unknown fields), protocol
 * version.  Also the small process sampler reported in heartbeats.
 */
#include <sodium.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "discovery/internal.h"
#include "lattice/alloc.h"

static void *pb_alloc(void *ctx, size_t n)
{
    (void)ctx;
    return lt_malloc(n ? n : 1);
}

static void pb_free(void *ctx, void *p)
{
    (void)ctx;
    lt_free(p);
}

ProtobufCAllocator wire_allocator = {.alloc = pb_alloc, .free = pb_free, .allocator_data = NULL};

bool wire_no_unknown_fields(const ProtobufCMessage *m)
{
    if (!m) return true;
    if (m->n_unknown_fields) return false;
    const ProtobufCMessageDescriptor *d = m->descriptor;
    const char *base = (const char *)m;
    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[i];
        if (f->type != PROTOBUF_C_TYPE_MESSAGE) continue;
        if (f->label == PROTOBUF_C_LABEL_REPEATED) {
            size_t n = *(const size_t *)(base + f->quantifier_offset);
            ProtobufCMessage *const *arr = *(ProtobufCMessage *const *const *)(base + f->offset);
            for (size_t k = 0; k < n; k++)
                if (!wire_no_unknown_fields(arr[k])) return false;
            continue;
        }
        if ((f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) &&
            *(const uint32_t *)(base + f->quantifier_offset) != f->id)
            continue;
        const ProtobufCMessage *sub = *(ProtobufCMessage *const *)(base + f->offset);
        if (!wire_no_unknown_fields(sub)) return false;
    }
    return true;
}

void wire_derive_key(const uint8_t *secret, size_t len, uint8_t key[WIRE_KEY_BYTES])
{
    static const uint8_t ctx[] = "lattice cluster secret v1";
    if (sodium_init() < 0) abort(); /* libsodium cannot work at all: a broken install */
    crypto_generichash(key, WIRE_KEY_BYTES, secret, len, ctx, sizeof ctx - 1);
}

enum wire_verdict wire_decode(const uint8_t *buf, size_t len, const uint8_t *mac, size_t mac_len,
                              const uint8_t *key, size_t max_bytes, Latdisc__Envelope **out)
{
    *out = NULL;
    if (len > max_bytes) return WIRE_OVERSIZED;
    if (key) {
        if (!mac || mac_len != WIRE_MAC_BYTES) return WIRE_AUTH;
        if (crypto_auth_hmacsha256_verify(mac, buf, len, key) != 0) return WIRE_AUTH;
    } else if (mac) {
        /* The sender authenticates with a secret we do not have. */
        return WIRE_AUTH;
    }
    if (len == 0) return WIRE_MALFORMED;
    Latdisc__Envelope *e = latdisc__envelope__unpack(&wire_allocator, len, buf);
    if (!e) return WIRE_MALFORMED;
    if (!wire_no_unknown_fields(&e->base) || e->body_case == LATDISC__ENVELOPE__BODY__NOT_SET ||
        strlen(e->sender) > 64 || strlen(e->sender_addr) > 128 || strlen(e->cluster) > 256) {
        latdisc__envelope__free_unpacked(e, &wire_allocator);
        return WIRE_MALFORMED;
    }
    *out = e;
    return e->proto_major == LATTICE_PROTO_MAJOR ? WIRE_OK : WIRE_PROTO_MAJOR;
}

void wire_free(Latdisc__Envelope *e)
{
    if (e) latdisc__envelope__free_unpacked(e, &wire_allocator);
}

lattice_status wire_encode(const Latdisc__Envelope *e, const uint8_t *key, uint8_t **buf, size_t *len,
                           uint8_t mac[32])
{
    size_t n = latdisc__envelope__get_packed_size(e);
    uint8_t *b = lt_malloc(n ? n : 1);
    if (!b) return LATTICE_ERR_NOMEM;
    latdisc__envelope__pack(e, b);
    if (key) crypto_auth_hmacsha256(mac, b, n, key);
    *buf = b;
    *len = n;
    return LATTICE_OK;
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
    *rss_bytes = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f) {
        unsigned long size, res;
        if (fscanf(f, "%lu %lu", &size, &res) == 2) *rss_bytes = (uint64_t)res * (uint64_t)sysconf(_SC_PAGESIZE);
        fclose(f);
    }
}
