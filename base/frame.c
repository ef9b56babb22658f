/*
 * The frame layer (base.h) and the protobuf-c allocator: one copy for every
 * channel, so the control plane and the data channel cannot drift apart in
 * what they accept.
 */
#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "lattice/alloc.h"

/* protobuf-c asks for 0 bytes for empty repeated fields; lt_malloc(0) may
 * return NULL, which protobuf-c takes for a failure. */
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

ProtobufCAllocator lt_pb_allocator = {.alloc = pb_alloc, .free = pb_free, .allocator_data = NULL};

bool lt_pb_no_unknown_fields(const ProtobufCMessage *m)
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
                if (!lt_pb_no_unknown_fields(arr[k])) return false;
            continue;
        }
        /* An unset oneof member's slot holds another member's value. */
        if ((f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) && *(const uint32_t *)(base + f->quantifier_offset) != f->id)
            continue;
        if (!lt_pb_no_unknown_fields(*(ProtobufCMessage *const *)(base + f->offset))) return false;
    }
    return true;
}

void lt_frame_derive_key(const uint8_t *secret, size_t len, const char *context, uint8_t key[LT_FRAME_KEY_BYTES])
{
    if (sodium_init() < 0) abort(); /* libsodium cannot work at all: a broken install */
    crypto_generichash(key, LT_FRAME_KEY_BYTES, secret, len, (const uint8_t *)context, strlen(context));
}

lt_frame_verdict lt_frame_unpack(const ProtobufCMessageDescriptor *desc, const uint8_t *buf, size_t len,
                                 const uint8_t *mac, size_t mac_len, const uint8_t *key, size_t max_bytes,
                                 ProtobufCMessage **out)
{
    *out = NULL;
    if (len > max_bytes) return LT_FRAME_OVERSIZED;
    if (key) {
        if (!mac || mac_len != LT_FRAME_MAC_BYTES) return LT_FRAME_AUTH;
        if (crypto_auth_hmacsha256_verify(mac, buf, len, key) != 0) return LT_FRAME_AUTH;
    } else if (mac) {
        return LT_FRAME_AUTH; /* the sender authenticates with a secret we do not have */
    }
    if (len == 0) return LT_FRAME_MALFORMED;
    ProtobufCMessage *m = protobuf_c_message_unpack(desc, &lt_pb_allocator, len, buf);
    if (!m) return LT_FRAME_MALFORMED;
    if (!lt_pb_no_unknown_fields(m)) {
        protobuf_c_message_free_unpacked(m, &lt_pb_allocator);
        return LT_FRAME_MALFORMED;
    }
    *out = m;
    return LT_FRAME_OK;
}

void lt_frame_free(ProtobufCMessage *m)
{
    if (m) protobuf_c_message_free_unpacked(m, &lt_pb_allocator);
}

lattice_status lt_frame_pack(const ProtobufCMessage *m, const uint8_t *key, uint8_t **buf, size_t *len,
                             uint8_t mac[LT_FRAME_MAC_BYTES])
{
    size_t n = protobuf_c_message_get_packed_size(m);
    uint8_t *b = lt_malloc(n ? n : 1);
    if (!b) return LATTICE_ERR_NOMEM;
    protobuf_c_message_pack(m, b);
    if (key) crypto_auth_hmacsha256(mac, b, n, key);
    *buf = b;
    *len = n;
    return LATTICE_OK;
}
