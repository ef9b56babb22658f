/*
 * Redis's DUMP payload of a string (rdb.h): CRC-64, RDB lengths and string
 * encodings, LZF.
 */
#include "rdb.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "lattice/alloc.h"
#include "resp_codec.h"

#define RDB_TYPE_STRING 0
#define RDB_TYPE_MAX_KNOWN 21    /* the last object type Redis 7.x writes (set listpack: 20) */
#define ENC_INT8 0xC0
#define ENC_INT16 0xC1
#define ENC_INT32 0xC2
#define ENC_LZF 0xC3
#define LEN_32 0x80
#define LEN_64 0x81

/* ---- CRC-64/Jones ---- */

static uint64_t crc_table[256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void crc_init(void)
{
    const uint64_t poly = 0x95ac9329ac4bc9b5ull; /* 0xad93d23594c935a9 reflected */
    for (unsigned i = 0; i < 256; i++) {
        uint64_t c = i;
        for (int k = 0; k < 8; k++) c = (c & 1) ? (c >> 1) ^ poly : c >> 1;
        crc_table[i] = c;
    }
}

uint64_t rdb_crc64(uint64_t crc, const void *p, size_t n)
{
    pthread_once(&crc_once, crc_init);
    const unsigned char *s = p;
    for (size_t i = 0; i < n; i++) crc = crc_table[(uint8_t)(crc ^ s[i])] ^ (crc >> 8);
    return crc;
}

/* ---- LZF (liblzf 3.6's format and, for the compressor, its algorithm) ---- */

#define LZF_HLOG 16
#define LZF_HSIZE (1u << LZF_HLOG)
#define LZF_MAX_LIT 32
#define LZF_MAX_OFF 8192
#define LZF_MAX_REF 264

static unsigned lzf_idx(uint32_t h) { return ((h >> (24 - LZF_HLOG)) - h * 5) & (LZF_HSIZE - 1); }

size_t rdb_lzf_compress(const void *in, size_t in_len, void *out, size_t cap)
{
    if (!in_len || !cap || in_len > UINT32_MAX) return 0;
    uint32_t *htab = lt_calloc(LZF_HSIZE, sizeof *htab); /* offsets + 1; 0 = none */
    if (!htab) return 0;
    const unsigned char *base = in, *ip = base, *end = base + in_len;
    unsigned char *op = out, *oend = op + cap;
    size_t written = 0;
    int lit = 0;
    op++; /* the first literal run's header */
    uint32_t h = in_len >= 2 ? (uint32_t)ip[0] << 8 | ip[1] : 0;
    while (in_len >= 3 && ip < end - 2) {
        h = h << 8 | ip[2];
        uint32_t *slot = &htab[lzf_idx(h)];
        const unsigned char *ref = base + *slot;
        *slot = (uint32_t)(ip - base);
        size_t off = (size_t)(ip - ref) - 1;
        if (ref < ip && off < LZF_MAX_OFF && ref > base && ref[2] == ip[2] && ref[0] == ip[0] && ref[1] == ip[1]) {
            size_t len = 2, maxlen = (size_t)(end - ip) - 2;
            if (maxlen > LZF_MAX_REF) maxlen = LZF_MAX_REF;
            if (op + 4 >= oend && op - !lit + 4 >= oend) goto full;
            op[-lit - 1] = (unsigned char)(lit - 1); /* close the literal run */
            op -= !lit;
            /* liblzf compares up to 16 bytes before it looks at maxlen */
            bool stopped = false;
            if (maxlen > 16)
                for (int k = 0; k < 16 && !stopped; k++) {
                    len++;
                    stopped = ref[len] != ip[len];
                }
            if (!stopped) {
                do len++;
                while (len < maxlen && ref[len] == ip[len]);
            }
            len -= 2;
            ip++;
            if (len < 7) {
                *op++ = (unsigned char)((off >> 8) + (len << 5));
            } else {
                *op++ = (unsigned char)((off >> 8) + (7 << 5));
                *op++ = (unsigned char)(len - 7);
            }
            *op++ = (unsigned char)off;
            lit = 0;
            op++;
            ip += len + 1;
            if (ip >= end - 2) break;
            ip -= 2; /* VERY_FAST: hash the two positions before the next */
            h = (uint32_t)ip[0] << 8 | ip[1];
            for (int k = 0; k < 2; k++) {
                h = h << 8 | ip[2];
                htab[lzf_idx(h)] = (uint32_t)(ip - base);
                ip++;
            }
        } else {
            if (op >= oend) goto full;
            lit++;
            *op++ = *ip++;
            if (lit == LZF_MAX_LIT) {
                op[-lit - 1] = (unsigned char)(lit - 1);
                lit = 0;
                op++;
            }
        }
    }
    if (op + 3 > oend) goto full;
    while (ip < end) {
        lit++;
        *op++ = *ip++;
        if (lit == LZF_MAX_LIT) {
            op[-lit - 1] = (unsigned char)(lit - 1);
            lit = 0;
            op++;
        }
    }
    op[-lit - 1] = (unsigned char)(lit - 1);
    op -= !lit;
    written = (size_t)(op - (unsigned char *)out);
full:
    lt_free(htab);
    return written;
}

size_t rdb_lzf_decompress(const void *in, size_t in_len, void *out, size_t cap)
{
    const unsigned char *ip = in, *end = ip + in_len;
    unsigned char *op = out, *oend = op + cap;
    while (ip < end) {
        unsigned ctrl = *ip++;
        if (ctrl < 32) { /* a literal run of ctrl + 1 bytes */
            size_t n = ctrl + 1;
            if ((size_t)(oend - op) < n || (size_t)(end - ip) < n) return 0;
            memcpy(op, ip, n);
            op += n;
            ip += n;
            continue;
        }
        size_t len = ctrl >> 5;
        if (len == 7) {
            if (ip >= end) return 0;
            len += *ip++;
        }
        if (ip >= end) return 0;
        size_t back = ((size_t)(ctrl & 0x1f) << 8 | *ip++) + 1;
        len += 2;
        if ((size_t)(op - (unsigned char *)out) < back || (size_t)(oend - op) < len) return 0;
        const unsigned char *ref = op - back;
        for (size_t k = 0; k < len; k++) op[k] = ref[k]; /* may overlap: byte by byte */
        op += len;
    }
    return (size_t)(op - (unsigned char *)out);
}

/* ---- DUMP ---- */

static size_t put_len(unsigned char *p, uint64_t len)
{
    if (len < 64) {
        p[0] = (unsigned char)len;
        return 1;
    }
    if (len < 16384) {
        p[0] = (unsigned char)(0x40 | len >> 8);
        p[1] = (unsigned char)len;
        return 2;
    }
    int n = len <= UINT32_MAX ? 4 : 8;
    p[0] = n == 4 ? LEN_32 : LEN_64;
    for (int k = 0; k < n; k++) p[1 + k] = (unsigned char)(len >> (8 * (n - 1 - k)));
    return (size_t)n + 1;
}

/* rdbTryIntegerEncoding: a canonical decimal of at most 11 characters
 * that fits int32; returns the encoded length or 0. */
static size_t int_encoding(const char *s, size_t n, unsigned char *p)
{
    long long v;
    if (n > 11 || !lattice_resp_string2ll(s, n, &v)) return 0;
    int bytes = v >= -128 && v <= 127 ? 1 : v >= -32768 && v <= 32767 ? 2 : v >= INT32_MIN && v <= INT32_MAX ? 4 : 0;
    if (!bytes) return 0;
    p[0] = bytes == 1 ? ENC_INT8 : bytes == 2 ? ENC_INT16 : ENC_INT32;
    for (int k = 0; k < bytes; k++) p[1 + k] = (unsigned char)((unsigned long long)v >> (8 * k));
    return (size_t)bytes + 1;
}

int rdb_type_of_value(unsigned t)
{
    /* Indexed by types/types.h's numbers (string, hash, list, set, zset). */
    static const int rdb[] = {RDB_TYPE_STRING, 16 /* HASH_LISTPACK */, 18 /* LIST_QUICKLIST_2 */, 2 /* SET */,
                              17 /* ZSET_LISTPACK */};
    return t < sizeof rdb / sizeof rdb[0] ? rdb[t] : -1;
}

lattice_status rdb_dump_value(unsigned t, const void *value, size_t len, char **out, size_t *out_len)
{
    if (rdb_type_of_value(t) != RDB_TYPE_STRING) return LATTICE_ERR_UNSUPPORTED;
    return rdb_dump_string(value, len, out, out_len);
}

lattice_status rdb_dump_string(const void *value, size_t len, char **out, size_t *out_len)
{
    /* type + at most 1 + 9 + 9 bytes of header + the value + footer */
    unsigned char *p = lt_malloc(len + 32);
    if (!p) return LATTICE_ERR_NOMEM;
    size_t k = 0;
    p[k++] = RDB_TYPE_STRING;
    size_t enc = int_encoding(value, len, p + k);
    if (enc) {
        k += enc;
    } else {
        size_t clen = 0;
        unsigned char *z = NULL;
        if (len > 20) { /* rdbSaveLzfStringObject: worth it only when 4 bytes shorter */
            z = lt_malloc(len - 4 + 1);
            if (!z) {
                lt_free(p);
                return LATTICE_ERR_NOMEM;
            }
            clen = rdb_lzf_compress(value, len, z, len - 4);
        }
        if (clen) {
            p[k++] = ENC_LZF;
            k += put_len(p + k, clen);
            k += put_len(p + k, len);
            memcpy(p + k, z, clen);
            k += clen;
        } else {
            k += put_len(p + k, len);
            if (len) memcpy(p + k, value, len);
            k += len;
        }
        lt_free(z);
    }
    p[k++] = RDB_DUMP_VERSION & 0xff;
    p[k++] = RDB_DUMP_VERSION >> 8;
    uint64_t crc = rdb_crc64(0, p, k);
    for (int i = 0; i < 8; i++) p[k++] = (unsigned char)(crc >> (8 * i));
    *out = (char *)p;
    *out_len = k;
    return LATTICE_OK;
}

/* ---- RESTORE ---- */

typedef struct reader {
    const unsigned char *p;
    size_t left;
} reader;

/* rdbLoadLenByRef: a length, or (*enc) an encoding byte's low 6 bits. */
static bool get_len(reader *r, uint64_t *len, bool *enc)
{
    *enc = false;
    if (!r->left) return false;
    unsigned b = *r->p++;
    r->left--;
    switch (b >> 6) {
    case 0: *len = b & 0x3f; return true;
    case 1:
        if (!r->left) return false;
        *len = (uint64_t)(b & 0x3f) << 8 | *r->p++;
        r->left--;
        return true;
    case 3:
        *enc = true;
        *len = b & 0x3f;
        return true;
    default: {
        int n = b == LEN_32 ? 4 : b == LEN_64 ? 8 : 0;
        if (!n || r->left < (size_t)n) return false;
        uint64_t v = 0;
        for (int k = 0; k < n; k++) v = v << 8 | r->p[k];
        r->p += n;
        r->left -= (size_t)n;
        *len = v;
        return true;
    }
    }
}

static rdb_load_result load_int(reader *r, uint64_t enc, char **out, size_t *out_len)
{
    size_t n = enc == 0 ? 1 : enc == 1 ? 2 : 4;
    if (r->left < n) return RDB_LOAD_BAD_FORMAT;
    uint32_t u = 0;
    for (size_t k = 0; k < n; k++) u |= (uint32_t)r->p[k] << (8 * k);
    r->p += n;
    r->left -= n;
    long long v = n == 1 ? (int8_t)u : n == 2 ? (int16_t)u : (int32_t)u;
    char *s = lt_malloc(24);
    if (!s) return RDB_LOAD_NOMEM;
    *out_len = lattice_resp_ll2string(s, v);
    *out = s;
    return RDB_LOAD_OK;
}

static rdb_load_result load_lzf(reader *r, char **out, size_t *out_len)
{
    uint64_t clen, len;
    bool enc;
    if (!get_len(r, &clen, &enc) || enc || !get_len(r, &len, &enc) || enc || clen > r->left) return RDB_LOAD_BAD_FORMAT;
    /* No LZF stream expands more than 264 bytes per 3 (a back reference):
     * a length beyond that is malformed, refused before it is allocated. */
    if (len > LATTICE_RESP_DEFAULT_MAX_BULK || len / LZF_MAX_REF > clen) return RDB_LOAD_BAD_FORMAT;
    char *s = lt_malloc(len ? len : 1);
    if (!s) return RDB_LOAD_NOMEM;
    /* Redis's rule: the stream must expand to exactly the length it gives */
    if (len == 0 || rdb_lzf_decompress(r->p, clen, s, len) != len) {
        lt_free(s);
        return RDB_LOAD_BAD_FORMAT;
    }
    r->p += clen;
    r->left -= clen;
    *out = s;
    *out_len = len;
    return RDB_LOAD_OK;
}

rdb_load_result rdb_load_string(const void *payload, size_t len, char **out, size_t *out_len, int *type)
{
    const unsigned char *p = payload;
    *type = -1;
    if (len < 10) return RDB_LOAD_BAD_CHECKSUM;
    const unsigned char *footer = p + len - 10;
    unsigned ver = footer[0] | footer[1] << 8;
    uint64_t want = 0;
    for (int k = 0; k < 8; k++) want |= (uint64_t)footer[2 + k] << (8 * k);
    if (ver > RDB_DUMP_VERSION || rdb_crc64(0, p, len - 8) != want) return RDB_LOAD_BAD_CHECKSUM;
    /* As Redis, the object is read from the whole payload (footer included). */
    reader r = {p + 1, len - 1};
    *type = p[0];
    if (p[0] != RDB_TYPE_STRING) return p[0] <= RDB_TYPE_MAX_KNOWN ? RDB_LOAD_NOT_STRING : RDB_LOAD_BAD_FORMAT;
    uint64_t n;
    bool enc;
    if (!get_len(&r, &n, &enc)) return RDB_LOAD_BAD_FORMAT;
    if (enc) {
        if (n <= 2) return load_int(&r, n, out, out_len);
        if (n == 3) return load_lzf(&r, out, out_len);
        return RDB_LOAD_BAD_FORMAT;
    }
    if (n > r.left) return RDB_LOAD_BAD_FORMAT;
    char *s = lt_malloc(n ? n : 1);
    if (!s) return RDB_LOAD_NOMEM;
    if (n) memcpy(s, r.p, n);
    *out = s;
    *out_len = n;
    return RDB_LOAD_OK;
}
