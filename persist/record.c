/*
 * record: the one framing the log and the checkpoints share.
 *
 *   u32 crc32c   of everything after it (the length and the body)
 *   u32 len      of the body
 *   body         u8 kind, u8 cache_len, u8 type, u8 0, u32 partition, u64 lsn,
 *                u64 version, u64 expire_ms, u32 key_len, u32 value_len,
 *                then cache, key, value bytes
 *
 * type is a PUT's value type (0..LATTICE_STORE_TYPE_MAX, 0 = a string) and
 * 0 in every other kind.  It was a reserved 0 before types existed, so a
 * string's record is byte for byte what it was, and an older log or
 * checkpoint reads as strings.
 *
 * All integers little-endian.  A decoder trusts nothing: the length is
 * bounded before anything is read, the CRC is checked before a field is,
 * and every field is checked against the kind (a record the CRC accepts but
 * no writer makes is BAD, not applied).
 */
#include <string.h>

#include "persist.h"

static uint32_t crc_table[256];
static int have_sse42 = -1;

static void crc_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        crc_table[i] = c;
    }
    have_sse42 = __builtin_cpu_supports("sse4.2") ? 1 : 0;
}

__attribute__((target("sse4.2"))) static uint32_t crc_hw(uint32_t c, const uint8_t *p, size_t n)
{
    uint64_t c64 = c;
    while (n >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        c64 = __builtin_ia32_crc32di(c64, v);
        p += 8;
        n -= 8;
    }
    c = (uint32_t)c64;
    while (n--) c = __builtin_ia32_crc32qi(c, *p++);
    return c;
}

uint32_t lt_crc32c(uint32_t crc, const void *buf, size_t n)
{
    if (have_sse42 < 0) crc_init();
    const uint8_t *p = buf;
    uint32_t c = ~crc;
    if (have_sse42) c = crc_hw(c, p, n);
    else
        while (n--) c = crc_table[(c ^ *p++) & 0xff] ^ (c >> 8);
    return ~c;
}

static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static void put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static uint32_t get32(const uint8_t *p)
{
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--) v = v << 8 | p[i];
    return v;
}
static uint64_t get64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

size_t lt_rec_size(const lt_rec *r) { return LT_REC_HEAD + LT_REC_FIXED + r->cache_len + r->key_len + r->value_len; }

void lt_rec_encode(const lt_rec *r, uint8_t *out)
{
    size_t body = LT_REC_FIXED + r->cache_len + r->key_len + r->value_len;
    uint8_t *b = out + LT_REC_HEAD;
    put32(out + 4, (uint32_t)body);
    b[0] = r->kind;
    b[1] = (uint8_t)r->cache_len;
    b[2] = r->kind == LT_REC_PUT ? r->type : 0;
    b[3] = 0;
    put32(b + 4, r->partition);
    put64(b + 8, r->lsn);
    put64(b + 16, r->version);
    put64(b + 24, r->expire_ms);
    put32(b + 32, (uint32_t)r->key_len);
    put32(b + 36, (uint32_t)r->value_len);
    uint8_t *q = b + LT_REC_FIXED;
    if (r->cache_len) memcpy(q, r->cache, r->cache_len);
    q += r->cache_len;
    if (r->key_len) memcpy(q, r->key, r->key_len);
    q += r->key_len;
    if (r->value_len) memcpy(q, r->value, r->value_len);
    put32(out, lt_crc32c(0, out + 4, 4 + body));
}

#define BAD(w)                                                                                                         \
    do {                                                                                                               \
        *why = (w);                                                                                                    \
        return LT_REC_BAD;                                                                                             \
    } while (0)

int lt_rec_decode(const uint8_t *buf, size_t avail, lt_rec *r, size_t *used, const char **why)
{
    static const char *none = "";
    const char *dummy;
    if (!why) why = &dummy;
    *why = none;
    if (avail < LT_REC_HEAD) {
        *why = "the log ends inside a record header";
        return LT_REC_TORN;
    }
    uint32_t body = get32(buf + 4);
    if (body < LT_REC_FIXED || body > LT_REC_MAX_BODY) BAD("a record length out of bounds");
    if (avail - LT_REC_HEAD < body) {
        *why = "the log ends inside a record";
        return LT_REC_TORN;
    }
    if (lt_crc32c(0, buf + 4, 4 + (size_t)body) != get32(buf)) BAD("a record whose CRC does not match");
    const uint8_t *b = buf + LT_REC_HEAD;
    memset(r, 0, sizeof *r);
    r->kind = b[0];
    r->cache_len = b[1];
    r->partition = get32(b + 4);
    r->lsn = get64(b + 8);
    r->version = get64(b + 16);
    r->expire_ms = get64(b + 24);
    r->key_len = get32(b + 32);
    r->value_len = get32(b + 36);
    r->type = b[2];
    if (b[3] || (b[2] && r->kind != LT_REC_PUT)) BAD("a record with reserved bits set");
    if (r->type > LATTICE_STORE_TYPE_MAX) BAD("a record of a value type out of bounds");
    if (r->kind < LT_REC_PUT || r->kind > LT_REC_KIND_MAX_) BAD("a record of an unknown kind");
    if ((uint64_t)LT_REC_FIXED + r->cache_len + r->key_len + r->value_len != body)
        BAD("a record whose field lengths do not add up");
    if (r->partition >= LATTICE_STORE_MAX_PARTITIONS) BAD("a record with a partition out of bounds");
    bool keyed = r->kind == LT_REC_PUT || r->kind == LT_REC_REMOVE;
    bool cached = r->kind != LT_REC_END;
    if (cached && r->cache_len == 0) BAD("a record without a cache name");
    if (keyed ? (r->key_len == 0 || r->key_len > LATTICE_STORE_MAX_KEY) : r->key_len != 0)
        BAD("a record with a key length its kind does not allow");
    if (r->kind != LT_REC_PUT && r->kind != LT_REC_CACHE && r->kind != LT_REC_COUNTERS && r->kind != LT_REC_MARKS &&
        r->value_len)
        BAD("a record with a value its kind does not allow");
    if (r->kind == LT_REC_PUT && r->value_len > LATTICE_STORE_MAX_VALUE) BAD("a record value too large");
    if (r->kind == LT_REC_CACHE && (r->value_len == 0 || r->version == 0 || r->version > LATTICE_STORE_MAX_PARTITIONS))
        BAD("a cache record without a spec or partitions");
    if ((r->kind == LT_REC_COUNTERS || r->kind == LT_REC_MARKS) && r->value_len % 8)
        BAD("a counters record of a length not a multiple of 8");
    const uint8_t *q = b + LT_REC_FIXED;
    r->cache = (const char *)q;
    q += r->cache_len;
    r->key = q;
    q += r->key_len;
    r->value = q;
    for (size_t i = 0; i < r->cache_len; i++)
        if (r->cache[i] == 0) BAD("a record whose cache name holds a NUL");
    *used = LT_REC_HEAD + body;
    return LATTICE_OK;
}
