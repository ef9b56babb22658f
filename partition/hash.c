/*
 * Key -> partition: CRC16-XMODEM with Redis Cluster's hash-tag rule.
 *
 * The CRC is table-driven, slicing-by-8: tab[k][b] is the CRC register after
 * feeding byte b followed by k zero bytes, so eight input bytes cost eight
 * independent table loads instead of a chain of eight dependent steps.  Keys
 * shorter than 8 bytes (and the tail) use tab[0], which is exactly Redis's
 * crc16tab.  The tables are filled once at load time by a constructor, so the
 * hot path has no "initialised yet?" branch.
 */
#include "partition/partition.h"

#include <string.h>

#define POLY 0x1021u

static uint16_t tab[8][256];

__attribute__((constructor)) static void crc16_tables_init(void)
{
    for (unsigned b = 0; b < 256; b++) {
        uint16_t crc = (uint16_t)(b << 8);
        for (int i = 0; i < 8; i++)
            crc = (uint16_t)((crc & 0x8000u) ? ((unsigned)crc << 1) ^ POLY : (unsigned)crc << 1);
        tab[0][b] = crc;
    }
    for (unsigned b = 0; b < 256; b++)
        for (int k = 1; k < 8; k++)
            tab[k][b] = (uint16_t)((tab[k - 1][b] << 8) ^ tab[0][tab[k - 1][b] >> 8]);
}

uint16_t lattice_partition_crc16(const void *data, size_t len)
{
    const uint8_t *p = data;
    uint16_t crc = 0;
    while (len >= 8) {
        crc = (uint16_t)(tab[7][p[0] ^ (crc >> 8)] ^ tab[6][p[1] ^ (crc & 0xff)] ^
                         tab[5][p[2]] ^ tab[4][p[3]] ^ tab[3][p[4]] ^ tab[2][p[5]] ^
                         tab[1][p[6]] ^ tab[0][p[7]]);
        p += 8;
        len -= 8;
    }
    while (len--) crc = (uint16_t)((crc << 8) ^ tab[0][((crc >> 8) ^ *p++) & 0xff]);
    return crc;
}

void lattice_partition_hash_part(const void *key, size_t len, size_t *off, size_t *part_len)
{
    const char *k = key;
    *off = 0;
    *part_len = len;
    if (len == 0) return;
    /* As Redis's keyHashSlot: the first '{', then the first '}' after it. */
    const char *open = memchr(k, '{', len);
    if (!open) return;
    size_t s = (size_t)(open - k) + 1;
    const char *close = memchr(k + s, '}', len - s);
    if (!close || close == k + s) return; /* no '}' or "{}": hash the whole key */
    *off = s;
    *part_len = (size_t)(close - (k + s));
}

static uint16_t key_crc(const void *key, size_t len)
{
    size_t off, n;
    lattice_partition_hash_part(key, len, &off, &n);
    return lattice_partition_crc16((const char *)key + off, n);
}

uint16_t lattice_partition_key_slot(const void *key, size_t len)
{
    return key_crc(key, len) & (LATTICE_PARTITION_SLOTS - 1);
}

uint32_t lattice_partition_of_slot(uint32_t slot, uint32_t partitions)
{
    /* An invalid count would index out of range in every caller's table; map
     * it to partition 0 rather than trusting it (callers validate anyway). */
    if (!lattice_partition_count_valid(partitions) || slot >= LATTICE_PARTITION_SLOTS) return 0;
    /* The high bits of the slot: partitions divides 16384, so each
     * partition is one contiguous run of 16384 / partitions slots. */
    return slot / (LATTICE_PARTITION_SLOTS / partitions);
}

uint32_t lattice_partition_of_key(const void *key, size_t len, uint32_t partitions)
{
    return lattice_partition_of_slot(lattice_partition_key_slot(key, len), partitions);
}

bool lattice_partition_count_valid(uint64_t partitions)
{
    return partitions >= 1 && partitions <= LATTICE_PARTITION_MAX &&
           (partitions & (partitions - 1)) == 0;
}
