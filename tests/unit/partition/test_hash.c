/* Key -> partition must agree with Redis Cluster byte for byte: RESP clients
 * compute slots themselves and CLUSTER SLOTS/SHARDS describe our partitions. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "partition/partition.h"
#include "partition_tests.h"

/* Bit-at-a-time CRC16-XMODEM straight from the definition, to check the
 * table-driven (slicing-by-8) version against. */
static uint16_t crc16_bitwise(const uint8_t *p, size_t n)
{
    uint16_t crc = 0;
    for (size_t i = 0; i < n; i++) {
        crc ^= (uint16_t)(p[i] << 8);
        for (int b = 0; b < 8; b++)
            crc = (uint16_t)((crc & 0x8000u) ? ((unsigned)crc << 1) ^ 0x1021u : (unsigned)crc << 1);
    }
    return crc;
}

static uint16_t slot_of(const char *s) { return lattice_partition_key_slot(s, strlen(s)); }

START_TEST(crc16_check_value_and_empty)
{
    ck_assert_uint_eq(lattice_partition_crc16("123456789", 9), 0x31C3);
    ck_assert_uint_eq(lattice_partition_crc16("", 0), 0);
    ck_assert_uint_eq(lattice_partition_crc16(NULL, 0), 0);
    ck_assert_uint_eq(lattice_partition_key_slot("", 0), 0);
}
END_TEST

START_TEST(crc16_table_matches_bitwise_definition_on_binary_data)
{
    uint8_t buf[300];
    srand(12345);
    for (size_t len = 0; len <= sizeof buf; len++) {
        for (size_t i = 0; i < len; i++) buf[i] = (uint8_t)rand();
        /* every start offset mod 8 runs the 8-byte loop at another alignment */
        for (size_t off = 0; off < 8 && off <= len; off++)
            ck_assert_uint_eq(lattice_partition_crc16(buf + off, len - off),
                              crc16_bitwise(buf + off, len - off));
    }
    memset(buf, 0xff, sizeof buf);
    ck_assert_uint_eq(lattice_partition_crc16(buf, sizeof buf), crc16_bitwise(buf, sizeof buf));
}
END_TEST

/* Slots reported by a real redis-server 7.0 (Debian 12, cluster-enabled) for
 * CLUSTER KEYSLOT, including Redis's documented examples (somekey -> 11058,
 * foo{hash_tag} and {hash_tag} -> 2515) and the hash-tag cases of the
 * cluster specification. */
START_TEST(key_slots_match_redis)
{
    ck_assert_uint_eq(slot_of("somekey"), 11058);
    ck_assert_uint_eq(slot_of("foo{hash_tag}"), 2515);
    ck_assert_uint_eq(slot_of("{hash_tag}"), 2515);
    ck_assert_uint_eq(slot_of("foo"), 12182);
    ck_assert_uint_eq(slot_of("bar"), 5061);
    ck_assert_uint_eq(slot_of("hello"), 866);
    ck_assert_uint_eq(slot_of("123456789"), 12739);
    ck_assert_uint_eq(slot_of("a{b}"), 3300);
    ck_assert_uint_eq(slot_of("abcdefghijklmnopqrstuvwxyz0123456789"), 3038);
    ck_assert_uint_eq(lattice_partition_key_slot("a\0b\0c", 5), 6723);
    ck_assert_uint_eq(lattice_partition_key_slot("\0", 1), 0);
    ck_assert_uint_eq(lattice_partition_key_slot("{\0}x", 4), 0);
    ck_assert_uint_eq(lattice_partition_key_slot("a\x01\xff\x7f", 4), 5329);
    uint8_t ff[20], all[256];
    memset(ff, 0xff, sizeof ff);
    for (int i = 0; i < 256; i++) all[i] = (uint8_t)i;
    ck_assert_uint_eq(lattice_partition_key_slot(ff, sizeof ff), 13138);
    ck_assert_uint_eq(lattice_partition_key_slot(all, sizeof all), 16155);
}
END_TEST

START_TEST(hash_tags_follow_the_redis_rule)
{
    /* same tag, same slot */
    ck_assert_uint_eq(slot_of("{user1000}.following"), 3443);
    ck_assert_uint_eq(slot_of("{user1000}.followers"), 3443);
    ck_assert_uint_eq(slot_of("{user1000}.a"), slot_of("{user1000}.b"));
    ck_assert_uint_eq(slot_of("{user1000}.a"), slot_of("user1000"));
    /* "{}" is empty: the whole key is hashed */
    ck_assert_uint_eq(slot_of("foo{}{bar}"), 8363);
    ck_assert_uint_eq(slot_of("foo{}{bar}"), lattice_partition_crc16("foo{}{bar}", 10) & 16383);
    /* first '{' then first '}': the tag is "{bar" */
    ck_assert_uint_eq(slot_of("foo{{bar}}zap"), 4015);
    ck_assert_uint_eq(slot_of("foo{{bar}}zap"), slot_of("{bar"));
    /* only the first tag counts */
    ck_assert_uint_eq(slot_of("foo{bar}{zap}"), 5061);
    ck_assert_uint_eq(slot_of("foo{bar}{zap}"), slot_of("bar"));

    size_t off, n;
    lattice_partition_hash_part("ab{cd}ef", 8, &off, &n);
    ck_assert_uint_eq(off, 3);
    ck_assert_uint_eq(n, 2);
    lattice_partition_hash_part("ab{cdef", 7, &off, &n); /* no '}' */
    ck_assert_uint_eq(off, 0);
    ck_assert_uint_eq(n, 7);
    lattice_partition_hash_part("ab}c{d", 6, &off, &n); /* '}' only before '{' */
    ck_assert_uint_eq(off, 0);
    ck_assert_uint_eq(n, 6);
    /* the tag must end inside the given length, not at a '}' beyond it */
    lattice_partition_hash_part("x{ab}", 4, &off, &n);
    ck_assert_uint_eq(off, 0);
    ck_assert_uint_eq(n, 4);
    lattice_partition_hash_part("{", 1, &off, &n);
    ck_assert_uint_eq(n, 1);
    lattice_partition_hash_part(NULL, 0, &off, &n);
    ck_assert_uint_eq(n, 0);
}
END_TEST

START_TEST(partition_is_a_contiguous_slot_range_for_every_valid_count)
{
    char key[32];
    for (int k = 0; k < 2000; k++) {
        int len = snprintf(key, sizeof key, "key:%d", k * 7919);
        uint16_t slot = lattice_partition_key_slot(key, (size_t)len);
        for (uint32_t parts = 1; parts <= LATTICE_PARTITION_MAX; parts <<= 1) {
            uint32_t p = lattice_partition_of_key(key, (size_t)len, parts);
            ck_assert_uint_lt(p, parts);
            ck_assert_uint_eq(p, slot / (LATTICE_PARTITION_SLOTS / parts));
        }
    }
    /* each partition is one run of 16384 / parts slots, in slot order */
    for (uint32_t parts = 1; parts <= LATTICE_PARTITION_MAX; parts <<= 1) {
        uint32_t width = LATTICE_PARTITION_SLOTS / parts;
        for (uint32_t s = 0; s < LATTICE_PARTITION_SLOTS; s++) {
            ck_assert_uint_eq(lattice_partition_of_slot(s, parts), s / width);
            if (s) ck_assert_uint_le(lattice_partition_of_slot(s - 1, parts), lattice_partition_of_slot(s, parts));
        }
        ck_assert_uint_eq(lattice_partition_of_slot(LATTICE_PARTITION_SLOTS - 1, parts), parts - 1);
    }
    ck_assert_uint_eq(lattice_partition_of_slot(16384, 1024), 0);
    /* tagged keys stay together at every count */
    for (uint32_t parts = 1; parts <= LATTICE_PARTITION_MAX; parts <<= 1)
        ck_assert_uint_eq(lattice_partition_of_key("{user1000}.a", 12, parts),
                          lattice_partition_of_key("{user1000}.b", 12, parts));
}
END_TEST

START_TEST(partition_counts_are_validated)
{
    ck_assert(lattice_partition_count_valid(1));
    ck_assert(lattice_partition_count_valid(1024));
    ck_assert(lattice_partition_count_valid(16384));
    ck_assert(!lattice_partition_count_valid(0));
    ck_assert(!lattice_partition_count_valid(3));
    ck_assert(!lattice_partition_count_valid(1000));
    ck_assert(!lattice_partition_count_valid(32768));
    ck_assert(!lattice_partition_count_valid(UINT64_C(1) << 40));
    /* an invalid count never yields an out-of-range partition */
    ck_assert_uint_eq(lattice_partition_of_key("foo", 3, 0), 0);
    ck_assert_uint_eq(lattice_partition_of_key("foo", 3, 1000), 0);
}
END_TEST

TCase *partition_hash_tcase(void)
{
    TCase *tc = tcase_create("hash");
    tcase_set_timeout(tc, 120); /* sanitizer and valgrind runs are slow */
    tcase_add_test(tc, crc16_check_value_and_empty);
    tcase_add_test(tc, crc16_table_matches_bitwise_definition_on_binary_data);
    tcase_add_test(tc, key_slots_match_redis);
    tcase_add_test(tc, hash_tags_follow_the_redis_rule);
    tcase_add_test(tc, partition_is_a_contiguous_slot_range_for_every_valid_count);
    tcase_add_test(tc, partition_counts_are_validated);
    return tc;
}
