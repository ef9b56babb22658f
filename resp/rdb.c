/*
 * Redis's DUMP payload of a string (rdb.h): CRC-64, RDB lengths and string
 * encodings, LZF.
 */
#include "rdb.h"

#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lattice/alloc.h"
#include "resp_codec.h"

#define RDB_TYPE_STRING 0
#define RDB_TYPE_LIST 1
#define RDB_TYPE_SET 2
#define RDB_TYPE_ZSET 3
#define RDB_TYPE_HASH 4
#define RDB_TYPE_ZSET_2 5
#define RDB_TYPE_SET_INTSET 11
#define RDB_TYPE_HASH_LISTPACK 16
#define RDB_TYPE_ZSET_LISTPACK 17
#define RDB_TYPE_LIST_QUICKLIST_2 18
#define QUICKLIST_PLAIN 1  /* a node of one element */
#define QUICKLIST_PACKED 2 /* a node of a listpack */
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

/* A payload being written; failed once memory was short. */
typedef struct wbuf {
    unsigned char *p;
    size_t len, cap;
    bool failed;
} wbuf;

static unsigned char *w_room(wbuf *w, size_t n)
{
    if (w->failed) return NULL;
    if (w->len + n > w->cap) {
        size_t nc = w->cap ? w->cap : 256;
        while (nc < w->len + n) nc *= 2;
        unsigned char *q = lt_realloc(w->p, nc);
        if (!q) {
            w->failed = true;
            return NULL;
        }
        w->p = q;
        w->cap = nc;
    }
    return w->p + w->len;
}

static void w_bytes(wbuf *w, const void *b, size_t n)
{
    unsigned char *q = w_room(w, n);
    if (!q) return;
    if (n) memcpy(q, b, n);
    w->len += n;
}

static void w_len(wbuf *w, uint64_t len)
{
    unsigned char *q = w_room(w, 9);
    if (q) w->len += put_len(q, len);
}

/* rdbSaveRawString: an integer encoding, LZF when it saves 4 bytes of a
 * string over 20, or the length and the bytes. */
static void w_string(wbuf *w, const void *value, size_t len)
{
    unsigned char *q = w_room(w, 16);
    size_t enc = q ? int_encoding(value, len, q) : 0;
    if (enc) {
        w->len += enc;
        return;
    }
    size_t clen = 0;
    unsigned char *z = NULL;
    if (len > 20) { /* rdbSaveLzfStringObject: worth it only when 4 bytes shorter */
        if (!(z = lt_malloc(len - 4 + 1))) {
            w->failed = true;
            return;
        }
        clen = rdb_lzf_compress(value, len, z, len - 4);
    }
    if (clen) {
        unsigned char c = ENC_LZF;
        w_bytes(w, &c, 1);
        w_len(w, clen);
        w_len(w, len);
        w_bytes(w, z, clen);
    } else {
        w_len(w, len);
        w_bytes(w, value, len);
    }
    lt_free(z);
}

/* The version and the CRC-64 after everything: the payload is done. */
static lattice_status w_finish(wbuf *w, char **out, size_t *out_len)
{
    unsigned char v[2] = {RDB_DUMP_VERSION & 0xff, RDB_DUMP_VERSION >> 8};
    w_bytes(w, v, 2);
    unsigned char c[8];
    uint64_t crc = w->failed ? 0 : rdb_crc64(0, w->p, w->len);
    for (int i = 0; i < 8; i++) c[i] = (unsigned char)(crc >> (8 * i));
    w_bytes(w, c, 8);
    if (w->failed) {
        lt_free(w->p);
        return LATTICE_ERR_NOMEM;
    }
    *out = (char *)w->p;
    *out_len = w->len;
    return LATTICE_OK;
}

int rdb_type_of_value(unsigned t)
{
    /* Indexed by types/types.h's numbers (string, hash, list, set, zset). */
    static const int rdb[] = {RDB_TYPE_STRING, RDB_TYPE_HASH, RDB_TYPE_LIST, RDB_TYPE_SET, RDB_TYPE_ZSET_2};
    return t < sizeof rdb / sizeof rdb[0] ? rdb[t] : -1;
}

lattice_status rdb_dump_string(const void *value, size_t len, char **out, size_t *out_len)
{
    rdb_elem e = {value, len, 0};
    rdb_value v = {0, &e, 1, NULL, 0};
    return rdb_dump_value(&v, out, out_len);
}

lattice_status rdb_dump_value(const rdb_value *v, char **out, size_t *out_len)
{
    int t = v->type >= 0 ? rdb_type_of_value((unsigned)v->type) : -1;
    if (t < 0 || (t == RDB_TYPE_STRING && v->n != 1) || (t == RDB_TYPE_HASH && v->n % 2)) return LATTICE_ERR_INVAL;
    wbuf w = {0};
    unsigned char tb = (unsigned char)t;
    w_bytes(&w, &tb, 1);
    if (t != RDB_TYPE_STRING) w_len(&w, t == RDB_TYPE_HASH ? v->n / 2 : v->n);
    for (size_t i = 0; i < v->n; i++) {
        w_string(&w, v->v[i].p, v->v[i].len);
        if (t == RDB_TYPE_ZSET_2) { /* the score: a binary double, little endian */
            uint64_t u;
            memcpy(&u, &v->v[i].score, 8);
            unsigned char d[8];
            for (int k = 0; k < 8; k++) d[k] = (unsigned char)(u >> (8 * k));
            w_bytes(&w, d, 8);
        }
    }
    return w_finish(&w, out, out_len);
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

/* A string as rdbGenericLoadStringObject reads one: an integer encoding,
 * LZF, or a length and the bytes.  *p its bytes (in the payload, or in
 * *heap to lt_free). */
static rdb_load_result get_string(reader *r, char **heap, const char **p, size_t *n)
{
    uint64_t len;
    bool enc;
    *heap = NULL;
    if (!get_len(r, &len, &enc)) return RDB_LOAD_BAD_FORMAT;
    if (enc) {
        rdb_load_result lr = len <= 2 ? load_int(r, len, heap, n) : len == 3 ? load_lzf(r, heap, n) : RDB_LOAD_BAD_FORMAT;
        *p = *heap;
        return lr;
    }
    if (len > r->left) return RDB_LOAD_BAD_FORMAT;
    *p = (const char *)r->p;
    *n = (size_t)len;
    r->p += len;
    r->left -= (size_t)len;
    return RDB_LOAD_OK;
}

/* The elements being read: their bytes in one arena, at offsets until the
 * load is done (the arena moves as it grows). */
typedef struct loading {
    rdb_value *v;
    size_t cap;
    size_t acap;
} loading;

static rdb_load_result add_elem(loading *l, const void *b, size_t n, double score)
{
    rdb_value *v = l->v;
    if (v->n == l->cap) {
        size_t nc = l->cap ? 2 * l->cap : 16;
        rdb_elem *q = lt_realloc(v->v, nc * sizeof *q);
        if (!q) return RDB_LOAD_NOMEM;
        v->v = q;
        l->cap = nc;
    }
    /* What a payload expands to stays within one bulk string's limit: a
     * few bytes of LZF or integers could otherwise ask for gigabytes. */
    if (n > LATTICE_RESP_DEFAULT_MAX_BULK - v->arena_len) return RDB_LOAD_BAD_FORMAT;
    if (v->arena_len + n > l->acap) {
        size_t nc = l->acap ? l->acap : 256;
        while (nc < v->arena_len + n) nc *= 2;
        char *q = lt_realloc(v->arena, nc);
        if (!q) return RDB_LOAD_NOMEM;
        v->arena = q;
        l->acap = nc;
    }
    if (n) memcpy(v->arena + v->arena_len, b, n);
    v->v[v->n++] = (rdb_elem){(const char *)(uintptr_t)v->arena_len, n, score};
    v->arena_len += n;
    return RDB_LOAD_OK;
}

static rdb_load_result add_int(loading *l, long long x)
{
    char t[24];
    return add_elem(l, t, lattice_resp_ll2string(t, x), 0);
}

/* The text of a score (a listpack's, or RDB_TYPE_ZSET's): strtod of it. */
static bool score_of(const char *p, size_t n, double *d)
{
    char t[128];
    if (n >= sizeof t) return false;
    memcpy(t, p, n);
    t[n] = 0;
    char *end;
    *d = strtod(t, &end);
    return end != t && !isnan(*d);
}

static uint64_t le(const unsigned char *p, int n)
{
    uint64_t v = 0;
    for (int k = 0; k < n; k++) v |= (uint64_t)p[k] << (8 * k);
    return v;
}

/* The elements of a listpack (Redis 7's listpack.c): each entry an integer
 * or a string, then its length backwards; scored: every second entry is
 * the score of the member before it. */
static rdb_load_result listpack(loading *l, const unsigned char *p, size_t n, bool scored)
{
    if (n < 7 || le(p, 4) != n || p[n - 1] != 0xff) return RDB_LOAD_BAD_FORMAT;
    size_t off = 6, k = 0;
    while (off < n - 1) {
        unsigned b = p[off];
        size_t enc = 1, data = 0, left = n - 1 - off;
        long long iv = 0;
        bool num = true;
        if (!(b & 0x80)) {
            iv = b & 0x7f;
        } else if ((b & 0xc0) == 0x80) {
            num = false, data = b & 0x3f;
        } else if ((b & 0xe0) == 0xc0) {
            enc = 2;
            if (left < 2) return RDB_LOAD_BAD_FORMAT;
            iv = (long long)((b & 0x1f) << 8 | p[off + 1]);
            if (iv >= 1 << 12) iv -= 1 << 13;
        } else if ((b & 0xf0) == 0xe0) {
            enc = 2, num = false;
            if (left < 2) return RDB_LOAD_BAD_FORMAT;
            data = (size_t)((b & 0x0f) << 8 | p[off + 1]);
        } else if (b == 0xf0) {
            enc = 5, num = false;
            if (left < 5) return RDB_LOAD_BAD_FORMAT;
            data = (size_t)le(p + off + 1, 4);
        } else if (b >= 0xf1 && b <= 0xf4) {
            int bytes = b == 0xf1 ? 2 : b == 0xf2 ? 3 : b == 0xf3 ? 4 : 8;
            enc = 1 + (size_t)bytes;
            if (left < enc) return RDB_LOAD_BAD_FORMAT;
            uint64_t u = le(p + off + 1, bytes);
            if (bytes < 8 && (u >> (8 * bytes - 1)) & 1) u |= ~0ull << (8 * bytes); /* sign */
            iv = (long long)u;
        } else {
            return RDB_LOAD_BAD_FORMAT;
        }
        size_t len = enc + data;
        if (data > left || len > left) return RDB_LOAD_BAD_FORMAT;
        size_t back = len < 128 ? 1 : len < 16384 ? 2 : len < 2097152 ? 3 : len < 268435456 ? 4 : 5;
        if (back > left - len) return RDB_LOAD_BAD_FORMAT;
        rdb_load_result lr;
        if (scored && k % 2) { /* the score of the member before */
            double d = (double)iv;
            if (!num && !score_of((const char *)p + off + enc, data, &d)) return RDB_LOAD_BAD_FORMAT;
            l->v->v[l->v->n - 1].score = d;
            lr = RDB_LOAD_OK;
        } else {
            lr = num ? add_int(l, iv) : add_elem(l, p + off + enc, data, 0);
        }
        if (lr != RDB_LOAD_OK) return lr;
        off += len + back;
        k++;
    }
    return off == n - 1 && !(scored && k % 2) ? RDB_LOAD_OK : RDB_LOAD_BAD_FORMAT;
}

/* An intset (Redis's intset.c): u32 encoding (2, 4 or 8 bytes an
 * integer), u32 count, the integers little endian. */
static rdb_load_result intset(loading *l, const unsigned char *p, size_t n)
{
    if (n < 8) return RDB_LOAD_BAD_FORMAT;
    uint64_t w = le(p, 4), c = le(p + 4, 4);
    if ((w != 2 && w != 4 && w != 8) || c == 0 || n - 8 != c * w) return RDB_LOAD_BAD_FORMAT;
    for (uint64_t i = 0; i < c; i++) {
        uint64_t u = le(p + 8 + i * w, (int)w);
        if (w < 8 && (u >> (8 * w - 1)) & 1) u |= ~0ull << (8 * w);
        rdb_load_result lr = add_int(l, (long long)u);
        if (lr != RDB_LOAD_OK) return lr;
    }
    return RDB_LOAD_OK;
}

/* One string of the payload as an element (scored: a score follows it,
 * binary for ZSET_2, text for ZSET). */
static rdb_load_result string_elem(reader *r, loading *l, int type)
{
    char *heap;
    const char *p;
    size_t n;
    rdb_load_result lr = get_string(r, &heap, &p, &n);
    if (lr == RDB_LOAD_OK) lr = add_elem(l, p, n, 0);
    lt_free(heap);
    if (lr != RDB_LOAD_OK || (type != RDB_TYPE_ZSET_2 && type != RDB_TYPE_ZSET)) return lr;
    double d;
    if (type == RDB_TYPE_ZSET_2) {
        if (r->left < 8) return RDB_LOAD_BAD_FORMAT;
        uint64_t u = le(r->p, 8);
        memcpy(&d, &u, 8);
        r->p += 8, r->left -= 8;
    } else { /* rdbLoadDoubleValue: a length byte (253 nan, 254 inf, 255 -inf), the text */
        if (!r->left) return RDB_LOAD_BAD_FORMAT;
        unsigned b = *r->p++;
        r->left--;
        if (b == 254 || b == 255) {
            d = b == 254 ? INFINITY : -INFINITY;
        } else if (b == 253 || b > r->left || !score_of((const char *)r->p, b, &d)) {
            return RDB_LOAD_BAD_FORMAT;
        } else {
            r->p += b, r->left -= b;
        }
    }
    if (isnan(d)) return RDB_LOAD_BAD_FORMAT;
    l->v->v[l->v->n - 1].score = d;
    return RDB_LOAD_OK;
}

/* The object after the type byte. */
static rdb_load_result load_object(reader *r, loading *l, int type)
{
    uint64_t n;
    bool enc;
    rdb_load_result lr = RDB_LOAD_OK;
    switch (type) {
    case RDB_TYPE_STRING: return string_elem(r, l, type);
    case RDB_TYPE_LIST:
    case RDB_TYPE_SET:
    case RDB_TYPE_ZSET:
    case RDB_TYPE_ZSET_2:
    case RDB_TYPE_HASH:
        if (!get_len(r, &n, &enc) || enc || n == 0 || n > r->left) return RDB_LOAD_BAD_FORMAT;
        for (uint64_t i = 0; i < n * (type == RDB_TYPE_HASH ? 2 : 1) && lr == RDB_LOAD_OK; i++)
            lr = string_elem(r, l, type);
        return lr;
    case RDB_TYPE_LIST_QUICKLIST_2:
        if (!get_len(r, &n, &enc) || enc || n == 0 || n > r->left) return RDB_LOAD_BAD_FORMAT;
        for (uint64_t i = 0; i < n && lr == RDB_LOAD_OK; i++) {
            uint64_t container;
            char *heap;
            const char *p;
            size_t len;
            if (!get_len(r, &container, &enc) || enc || (container != QUICKLIST_PLAIN && container != QUICKLIST_PACKED))
                return RDB_LOAD_BAD_FORMAT;
            if ((lr = get_string(r, &heap, &p, &len)) != RDB_LOAD_OK) return lr;
            lr = container == QUICKLIST_PLAIN ? add_elem(l, p, len, 0)
                                              : listpack(l, (const unsigned char *)p, len, false);
            lt_free(heap);
        }
        return lr;
    case RDB_TYPE_SET_INTSET:
    case RDB_TYPE_HASH_LISTPACK:
    case RDB_TYPE_ZSET_LISTPACK: {
        char *heap;
        const char *p;
        size_t len;
        if ((lr = get_string(r, &heap, &p, &len)) != RDB_LOAD_OK) return lr;
        lr = type == RDB_TYPE_SET_INTSET ? intset(l, (const unsigned char *)p, len)
                                         : listpack(l, (const unsigned char *)p, len, type == RDB_TYPE_ZSET_LISTPACK);
        lt_free(heap);
        if (lr == RDB_LOAD_OK && (l->v->n == 0 || (type == RDB_TYPE_HASH_LISTPACK && l->v->n % 2)))
            lr = RDB_LOAD_BAD_FORMAT;
        return lr;
    }
    default: return RDB_LOAD_BAD_FORMAT;
    }
}

void rdb_value_free(rdb_value *v)
{
    lt_free(v->v);
    lt_free(v->arena);
    memset(v, 0, sizeof *v);
}

rdb_load_result rdb_load_value(const void *payload, size_t len, rdb_value *v, int *rdb_type)
{
    const unsigned char *p = payload;
    memset(v, 0, sizeof *v);
    *rdb_type = -1;
    if (len < 10) return RDB_LOAD_BAD_CHECKSUM;
    const unsigned char *footer = p + len - 10;
    unsigned ver = footer[0] | footer[1] << 8;
    uint64_t want = 0;
    for (int k = 0; k < 8; k++) want |= (uint64_t)footer[2 + k] << (8 * k);
    if (ver > RDB_DUMP_VERSION || rdb_crc64(0, p, len - 8) != want) return RDB_LOAD_BAD_CHECKSUM;
    /* As Redis, the object is read from the whole payload (footer included). */
    reader r = {p + 1, len - 1};
    *rdb_type = p[0];
    static const signed char ours[] = {
        [RDB_TYPE_STRING] = 0 + 1, [RDB_TYPE_LIST] = 2 + 1, [RDB_TYPE_SET] = 3 + 1, [RDB_TYPE_ZSET] = 4 + 1,
        [RDB_TYPE_HASH] = 1 + 1, [RDB_TYPE_ZSET_2] = 4 + 1, [RDB_TYPE_SET_INTSET] = 3 + 1,
        [RDB_TYPE_HASH_LISTPACK] = 1 + 1, [RDB_TYPE_ZSET_LISTPACK] = 4 + 1, [RDB_TYPE_LIST_QUICKLIST_2] = 2 + 1,
    };
    if (p[0] >= sizeof ours || !ours[p[0]]) return p[0] <= RDB_TYPE_MAX_KNOWN ? RDB_LOAD_UNSUPPORTED : RDB_LOAD_BAD_FORMAT;
    v->type = ours[p[0]] - 1;
    loading l = {v, 0, 0};
    rdb_load_result lr = load_object(&r, &l, p[0]);
    if (lr != RDB_LOAD_OK) {
        rdb_value_free(v);
        return lr;
    }
    for (size_t i = 0; i < v->n; i++) v->v[i].p = v->arena + (uintptr_t)v->v[i].p;
    return RDB_LOAD_OK;
}

rdb_load_result rdb_load_string(const void *payload, size_t len, char **out, size_t *out_len, int *type)
{
    rdb_value v;
    rdb_load_result lr = rdb_load_value(payload, len, &v, type);
    if (lr == RDB_LOAD_UNSUPPORTED || (lr == RDB_LOAD_OK && v.type != 0)) {
        rdb_value_free(&v);
        return RDB_LOAD_NOT_STRING;
    }
    if (lr != RDB_LOAD_OK) return lr;
    char *s = lt_malloc(v.v[0].len ? v.v[0].len : 1);
    if (s && v.v[0].len) memcpy(s, v.v[0].p, v.v[0].len);
    *out = s;
    *out_len = v.v[0].len;
    rdb_value_free(&v);
    return s ? RDB_LOAD_OK : RDB_LOAD_NOMEM;
}
