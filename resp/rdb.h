/*
 * rdb.h: Redis's DUMP payload of a value, INTERNAL to resp/ (pure
 * functions, no state: any thread).  The format (Redis 7.0, rdb.c and
 * cluster.c's createDumpPayload/verifyDumpPayload):
 *
 *   type (1 byte, 0 = string) | the string as RDB saves it | RDB version
 *   (2 bytes little endian, 10) | CRC-64/Jones of everything before
 *   (8 bytes little endian)
 *
 * The string is one of: a canonical decimal of at most 11 characters within
 * int32 as an int8/16/32 (0xC0/0xC1/0xC2 then little endian), a string of
 * more than 20 bytes that LZF shrinks by at least 4 bytes as 0xC3 |
 * compressed length | length | LZF data, or a length then the bytes.
 * Lengths are RDB's: 6 bits, 14 bits, 0x80 + 32 bits or 0x81 + 64 bits (big
 * endian).  The LZF compressor is liblzf 3.6's algorithm (HLOG 16,
 * VERY_FAST) with a zeroed hash table, so it matches Redis's output on the
 * inputs the tests try; any valid LZF stream is accepted on RESTORE.
 */
#ifndef LATTICE_RESP_RDB_H
#define LATTICE_RESP_RDB_H

#include <stddef.h>
#include <stdint.h>

#include "lattice/status.h"

#define RDB_DUMP_VERSION 10 /* Redis 7.0's RDB_VERSION */

/* CRC-64/Jones (reflected, init 0, no final xor), as Redis's crc64(). */
uint64_t rdb_crc64(uint64_t crc, const void *p, size_t n);

/* The DUMP payload of value; *out is lt_malloc'd (the caller frees it).
 * LATTICE_OK or LATTICE_ERR_NOMEM. */
lattice_status rdb_dump_string(const void *value, size_t len, char **out, size_t *out_len);

/* A value of any type as DUMP writes it and RESTORE reads it: its type
 * (types/types.h's numbers: 0 string, 1 hash, 2 list, 3 set, 4 sorted
 * set) and its elements - a string's one, a hash's field, value, field ...,
 * a list's head first, a set's, a sorted set's members each with its
 * score.  Loaded, the elements' bytes are in arena. */
typedef struct rdb_elem {
    const char *p;
    size_t len;
    double score;
} rdb_elem;
typedef struct rdb_value {
    int type;
    rdb_elem *v;
    size_t n;
    char *arena;
    size_t arena_len;
} rdb_value;

/* The RDB type byte a DUMP payload of a value of Lattice's type t starts
 * with: a string 0 (RDB_TYPE_STRING), a hash 4 (HASH), a list 1 (LIST), a
 * set 2 (SET), a sorted set 5 (ZSET_2) - the plain encodings every Redis
 * since 2.8 loads (Redis converts them to its small encodings as it loads
 * them); -1 for a number that names no type. */
int rdb_type_of_value(unsigned t);
/* The DUMP payload of v (*out lt_malloc'd): OK, NOMEM, or INVAL (a
 * string of other than one element, a hash of an odd count). */
lattice_status rdb_dump_value(const rdb_value *v, char **out, size_t *out_len);

typedef enum rdb_load_result {
    RDB_LOAD_OK = 0,
    RDB_LOAD_BAD_CHECKSUM,   /* "DUMP payload version or checksum are wrong" */
    RDB_LOAD_BAD_FORMAT,     /* "Bad data format" */
    RDB_LOAD_NOT_STRING,     /* a valid payload of another type; *type says which */
    RDB_LOAD_UNSUPPORTED,    /* a type Redis writes that Lattice does not hold (a stream, a module's) */
    RDB_LOAD_NOMEM,
} rdb_load_result;

/* Checks the payload's version and checksum, then decodes the value: a
 * string, or a collection in any encoding Redis 7.0 writes (HASH,
 * HASH_LISTPACK, LIST, LIST_QUICKLIST_2, SET, SET_INTSET, ZSET, ZSET_2,
 * ZSET_LISTPACK); *rdb_type the payload's type byte.  On RDB_LOAD_OK free
 * v with rdb_value_free.  An empty collection is BAD_FORMAT (as Redis). */
rdb_load_result rdb_load_value(const void *payload, size_t len, rdb_value *v, int *rdb_type);
void rdb_value_free(rdb_value *v);
/* Checks the payload's version and checksum, then decodes the string;
 * *out is lt_malloc'd (the caller frees it) on RDB_LOAD_OK. */
rdb_load_result rdb_load_string(const void *payload, size_t len, char **out, size_t *out_len, int *type);

/* LZF (exposed for the unit tests).  Compress: the output length, 0 when it
 * would not fit in cap.  Decompress: the output length, 0 on a malformed
 * stream or one that does not fit in cap. */
size_t rdb_lzf_compress(const void *in, size_t in_len, void *out, size_t cap);
size_t rdb_lzf_decompress(const void *in, size_t in_len, void *out, size_t cap);

#endif
