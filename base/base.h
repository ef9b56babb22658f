/*
 * base: the project-internal basics below every module - the protobuf-c
 * allocator and the frame layer every peer channel (discovery's control
 * plane, the data channel) receives and sends through.  What an embedding
 * application also sees lives in the public headers lattice/status.h,
 * lattice/log.h, lattice/alloc.h and lattice/clock.h; this header is for the
 * modules of the project only (include it as "base/base.h").
 *
 * A frame is one protobuf message, optionally followed by its 32-byte
 * HMAC-SHA256 (libsodium) under a key derived from the cluster secret - on
 * discovery's control plane two ZeroMQ frames, on the data channel the
 * message and the MAC after ops/link.c's 8-byte header.  Receiving checks, in this order, and
 * stops at the first failure (each failure is its own verdict, so a channel
 * can count it; none of them is an error of ours - the peer's input is
 * dropped and the node keeps serving):
 *   1. size:   at most max_bytes (checked before anything is parsed);
 *   2. MAC:    present and right exactly when we have a key (a MAC we cannot
 *              check means the sender has a secret we lack: also refused);
 *   3. decode: a non-empty buffer protobuf-c unpacks;
 *   4. unknown fields at every depth - the message and every sub-message,
 *      repeated or set oneof (protobuf-c keeps odd encodings, e.g. an
 *      overlong tag for field 0, as unknown fields and then cannot re-pack
 *      them; and a newer peer must bump its protocol, not slip fields by).
 * What the message then means (protocol numbers, string lengths, ...) is the
 * channel's to check.
 */
#ifndef LATTICE_BASE_H
#define LATTICE_BASE_H

#include <protobuf-c/protobuf-c.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lattice/status.h"

/* protobuf-c's allocations go through lt_malloc/lt_free (counted, failure
 * injectable).  Pass it to every *__unpack and *__free_unpacked. */
extern ProtobufCAllocator lt_pb_allocator;

/* True when m and all its sub-messages (any depth) carry no unknown field. */
bool lt_pb_no_unknown_fields(const ProtobufCMessage *m);

#define LT_FRAME_MAC_BYTES 32
#define LT_FRAME_KEY_BYTES 32

typedef enum lt_frame_verdict {
    LT_FRAME_OK = 0,
    LT_FRAME_OVERSIZED, /* longer than max_bytes: never parsed */
    LT_FRAME_AUTH,      /* MAC missing, wrong, or sent to a node without a key */
    LT_FRAME_MALFORMED, /* empty, not decodable, or an unknown field at any depth */
} lt_frame_verdict;

/* A channel's HMAC key from the cluster secret (the secret file's bytes):
 * BLAKE2b-256 of the secret, keyed with the channel's context string, so
 * each channel has a key of its own.  Aborts only when libsodium cannot
 * initialise at all (a broken install). */
void lt_frame_derive_key(const uint8_t *secret, size_t len, const char *context,
                         uint8_t key[LT_FRAME_KEY_BYTES]);

/* Check and decode one received frame: buf[0..len) is the message, mac (NULL
 * = no MAC) with mac_len bytes the MAC, key NULL when we have no
 * secret.  On LT_FRAME_OK *out is the unpacked message of type desc, to free
 * with lt_frame_free; otherwise *out is NULL. */
lt_frame_verdict lt_frame_unpack(const ProtobufCMessageDescriptor *desc, const uint8_t *buf, size_t len,
                                 const uint8_t *mac, size_t mac_len, const uint8_t *key, size_t max_bytes,
                                 ProtobufCMessage **out);
void lt_frame_free(ProtobufCMessage *m);

/* Pack m into a new buffer (*buf, lt_malloc'd, the caller frees it with
 * lt_free) and, when key != NULL, its MAC into mac.  LATTICE_ERR_NOMEM on
 * allocation failure (nothing to free then). */
lattice_status lt_frame_pack(const ProtobufCMessage *m, const uint8_t *key, uint8_t **buf, size_t *len,
                             uint8_t mac[LT_FRAME_MAC_BYTES]);

/* 64-bit FNV-1a: the project's one small-key hash (key shards of the
 * clean-read and dedup tables, the live-server view, node-id hashes).
 * Stable: nodes compare values of it, so it never changes between builds.
 * lt_fnv1a_add continues a hash (start from LT_FNV1A_BASIS). */
#define LT_FNV1A_BASIS UINT64_C(0xcbf29ce484222325)
static inline uint64_t lt_fnv1a_add(uint64_t h, const void *p, size_t n)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * UINT64_C(0x100000001b3);
    return h;
}
static inline uint64_t lt_fnv1a(const void *p, size_t n) { return lt_fnv1a_add(LT_FNV1A_BASIS, p, n); }

/* Redis 7.0's glob match (stringmatchlen; base/match.c), for KEYS, SCAN
 * and HSCAN's MATCH: 1 when s matches.  pattern[plen] must be a readable
 * NUL (Redis reads one byte past a class or a trailing `*`, its strings
 * being NUL-terminated). */
int lt_glob_match(const char *pattern, size_t plen, const char *s, size_t slen, int nocase);

#endif
