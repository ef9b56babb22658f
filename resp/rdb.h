/*
 * rdb.h: Redis's DUMP payload of a string value, INTERNAL to resp/ (pure
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

/* The RDB type byte a DUMP payload starts with for a value of Lattice's
 * type t (LATTICE_OP_R_TYPE, types/types.h's numbers): a string 0
 * (RDB_TYPE_STRING); a hash 16 (HASH_LISTPACK), a list 18
 * (LIST_QUICKLIST_2), a set 2 (SET), a sorted set 17 (ZSET_LISTPACK) - the
 * types Redis 7.0 writes for them (the small encodings; the collection
 * types choose when they land); -1 for a number that names no type. */
int rdb_type_of_value(unsigned t);
/* The DUMP payload of a value of type t: a string as rdb_dump_string;
 * LATTICE_ERR_UNSUPPORTED for a type whose RDB encoding this build does not
 * write yet (the collection types). */
lattice_status rdb_dump_value(unsigned t, const void *value, size_t len, char **out, size_t *out_len);

typedef enum rdb_load_result {
    RDB_LOAD_OK = 0,
    RDB_LOAD_BAD_CHECKSUM,   /* "DUMP payload version or checksum are wrong" */
    RDB_LOAD_BAD_FORMAT,     /* "Bad data format" */
    RDB_LOAD_NOT_STRING,     /* a valid payload of another type; *type says which */
    RDB_LOAD_NOMEM,
} rdb_load_result;

/* Checks the payload's version and checksum, then decodes the string;
 * *out is lt_malloc'd (the caller frees it) on RDB_LOAD_OK. */
rdb_load_result rdb_load_string(const void *payload, size_t len, char **out, size_t *out_len, int *type);

/* LZF (exposed for the unit tests).  Compress: the output length, 0 when it
 * would not fit in cap.  Decompress: the output length, 0 on a malformed
 * stream or one that does not fit in cap. */
size_t rdb_lzf_compress(const void *in, size_t in_len, void *out, size_t cap);
size_t rdb_lzf_decompress(const void *in, size_t in_len, void *out, size_t cap);

#endif
