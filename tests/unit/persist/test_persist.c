/* persist/: the record codec, the log writer and reader (torn tails at every
 * byte of the last record, a flipped bit anywhere, records across segment
 * boundaries), checkpoints against a reference map. */
#include <check.h>
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdatomic.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <urcu.h>

#include "lattice/alloc.h"
#include "lattice/log.h"
#include "persist/persist.h"
#include "persist_int.h" /* the append buffer's size */
#include "run_suite.h"

#define SPEC "c:partitions=8"
#define PARTS 8

static char dir[256];
static lattice_region *region;

static void setup(void)
{
    rcu_register_thread();
    lt_log_threshold = LT_ERROR;
    snprintf(dir, sizeof dir, "/tmp/lt_persist_test.%d", (int)getpid());
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    ck_assert_int_eq(system(cmd), 0);
    lattice_region_config rc = {"t", 0, 64, 0, LATTICE_REGION_REJECT};
    ck_assert_int_eq(lattice_region_create(&rc, &region), LATTICE_OK);
}

static void teardown(void)
{
    lattice_region_destroy(region);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) { /* best effort */ }
    rcu_unregister_thread();
}

static lt_persist *open_dir(uint64_t seg)
{
    lt_persist_config c = {.dir = dir, .fsync = LT_WAL_ALWAYS, .region = region, .notify_fd = -1, .segment_bytes = seg};
    lt_persist *p = NULL;
    ck_assert_int_eq(lt_persist_open(&c, &p), LATTICE_OK);
    return p;
}

static void wait_durable(lt_persist *p)
{
    uint64_t want = lt_persist_appended(p);
    for (int i = 0; i < 20000 && lt_persist_durable(p) < want; i++) {
        struct timespec t = {0, 500000};
        nanosleep(&t, NULL);
    }
    ck_assert_uint_ge(lt_persist_durable(p), want);
}

static lattice_store *new_store(void)
{
    lattice_store_config sc = {"c", PARTS, region, NULL, NULL};
    lattice_store *s;
    ck_assert_int_eq(lattice_store_create(&sc, &s), LATTICE_OK);
    return s;
}

/* Takes the recovered store of cache "c" (NULL when recovery has none). */
static lattice_store *take(lt_persist *p, uint64_t **counter)
{
    lattice_store *s = NULL;
    uint64_t *cnt = NULL;
    if (lt_persist_take(p, "c", SPEC, &s, &cnt, PARTS) != LATTICE_OK) return NULL;
    if (counter) *counter = cnt;
    else lt_free(cnt);
    return s;
}

static void put(lattice_store *s, int i, const char *val)
{
    char k[32];
    snprintf(k, sizeof k, "key-%d", i);
    lattice_store_entry e = {(uint32_t)i % PARTS, k, strlen(k), val, strlen(val), 0, (uint64_t)i + 1, 0};
    ck_assert_int_eq(lattice_store_put(s, &e, 0), LATTICE_OK);
}

static int get(lattice_store *s, int i, char *out, size_t cap)
{
    char k[32];
    snprintf(k, sizeof k, "key-%d", i);
    lattice_store_meta m;
    memset(out, 0, cap);
    return lattice_store_get(s, (uint32_t)i % PARTS, k, strlen(k), out, cap - 1, &m);
}

static uint64_t count(lattice_store *s)
{
    uint64_t n = 0;
    for (uint32_t p = 0; p < PARTS; p++) n += lattice_store_count(s, p);
    return n;
}

/* Writes n puts through the hook; returns the log's segment paths' count. */
static void write_log(int n, uint64_t seg, const char *prefix)
{
    lt_persist *p = open_dir(seg);
    lattice_store *s = new_store();
    lt_persist_cache *pc = lt_persist_cache_attach(p, s, "c", SPEC, PARTS);
    ck_assert_ptr_nonnull(pc);
    for (int i = 0; i < n; i++) {
        char v[64];
        snprintf(v, sizeof v, "%s-%d", prefix, i);
        put(s, i, v);
        wait_durable(p); /* one batch per record: segment rolls fall between records */
    }
    lt_persist_close(p);
    lattice_store_destroy(s);
    /* A recovery drops the zeroed room the writer keeps ahead (which it
     * takes for the end of the log): the files end with the last record. */
    lt_persist_close(open_dir(seg));
}

/* The segment files, sorted; returns how many. */
static size_t segments(char out[][512], size_t max)
{
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    size_t n = 0;
    for (struct dirent *e; (e = readdir(d));)
        if (!strncmp(e->d_name, "wal-", 4) && n < max) snprintf(out[n++], 512, "%s/%s", dir, e->d_name);
    closedir(d);
    for (size_t i = 1; i < n; i++)
        for (size_t j = i; j > 0 && strcmp(out[j - 1], out[j]) > 0; j--) {
            char t[512];
            memcpy(t, out[j], 512);
            memcpy(out[j], out[j - 1], 512);
            memcpy(out[j - 1], t, 512);
        }
    return n;
}

static off_t file_size(const char *path)
{
    struct stat st;
    ck_assert_int_eq(stat(path, &st), 0);
    return st.st_size;
}

/* Recovers and checks that entries 0..n-1 are there with prefix values and
 * nothing else. */
static void expect_entries(lt_persist *p, int n, const char *prefix)
{
    lattice_store *s = take(p, NULL);
    if (n == 0) {
        if (s) ck_assert_uint_eq(count(s), 0);
    } else {
        ck_assert_ptr_nonnull(s);
        ck_assert_uint_eq(count(s), (uint64_t)n);
        for (int i = 0; i < n; i++) {
            char v[64], want[64];
            ck_assert_int_eq(get(s, i, v, sizeof v), LATTICE_OK);
            snprintf(want, sizeof want, "%s-%d", prefix, i);
            ck_assert_str_eq(v, want);
        }
    }
    if (s) lattice_store_destroy(s);
}

/* --------------------------------------------------------------- records */

START_TEST(record_roundtrip_and_every_bit)
{
    const char key[] = "a-key", val[] = "some value bytes";
    lt_rec r = {.kind = LT_REC_PUT, .lsn = 12345, .cache = "cache", .cache_len = 5, .partition = 7, .version = 99,
                .expire_ms = 1700000000000ull, .key = key, .key_len = 5, .value = val, .value_len = 16};
    size_t n = lt_rec_size(&r);
    uint8_t *b = malloc(n);
    lt_rec_encode(&r, b);
    lt_rec d;
    size_t used;
    ck_assert_int_eq(lt_rec_decode(b, n, &d, &used, NULL), LATTICE_OK);
    ck_assert_uint_eq(used, n);
    ck_assert_uint_eq(d.kind, LT_REC_PUT);
    ck_assert_uint_eq(d.lsn, 12345);
    ck_assert_uint_eq(d.partition, 7);
    ck_assert_uint_eq(d.version, 99);
    ck_assert_uint_eq(d.expire_ms, 1700000000000ull);
    ck_assert_mem_eq(d.cache, "cache", 5);
    ck_assert_mem_eq(d.key, key, 5);
    ck_assert_mem_eq(d.value, val, 16);
    /* Every prefix is torn, never accepted. */
    for (size_t k = 0; k < n; k++) ck_assert_int_ne(lt_rec_decode(b, k, &d, &used, NULL), LATTICE_OK);
    /* Every single flipped bit, in every field (CRC, length, kind, lengths,
     * partition, LSN, version, expiry, name, key, value) is refused. */
    for (size_t bit = 0; bit < n * 8; bit++) {
        b[bit / 8] ^= (uint8_t)(1u << (bit % 8));
        const char *why = NULL;
        int st = lt_rec_decode(b, n, &d, &used, &why);
        ck_assert_msg(st == LT_REC_BAD || st == LT_REC_TORN, "bit %zu accepted", bit);
        ck_assert_ptr_nonnull(why);
        b[bit / 8] ^= (uint8_t)(1u << (bit % 8));
    }
    free(b);
}
END_TEST

START_TEST(record_fields_checked_behind_the_crc)
{
    /* A record the CRC accepts but no writer makes is refused too. */
    lt_rec bad[] = {
        {.kind = 0, .cache = "c", .cache_len = 1},
        {.kind = 9, .cache = "c", .cache_len = 1},
        {.kind = LT_REC_PUT, .cache = "c", .cache_len = 1, .key_len = 0},
        {.kind = LT_REC_PUT, .cache = "", .cache_len = 0, .key = "k", .key_len = 1},
        {.kind = LT_REC_CLEAR, .cache = "c", .cache_len = 1, .key = "k", .key_len = 1},
        {.kind = LT_REC_REMOVE, .cache = "c", .cache_len = 1, .key = "k", .key_len = 1, .value = "v", .value_len = 1},
        {.kind = LT_REC_PUT, .cache = "c", .cache_len = 1, .partition = 20000, .key = "k", .key_len = 1},
        {.kind = LT_REC_CACHE, .cache = "c", .cache_len = 1, .version = 0, .value = "s", .value_len = 1},
        {.kind = LT_REC_COUNTERS, .cache = "c", .cache_len = 1, .value = "123", .value_len = 3},
        {.kind = LT_REC_PUT, .cache = "c\0", .cache_len = 2, .key = "k", .key_len = 1},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        size_t n = lt_rec_size(&bad[i]);
        uint8_t *b = malloc(n);
        lt_rec_encode(&bad[i], b);
        lt_rec d;
        size_t used;
        ck_assert_msg(lt_rec_decode(b, n, &d, &used, NULL) == LT_REC_BAD, "case %zu accepted", i);
        free(b);
    }
}
END_TEST

/* ------------------------------------------------------------ the log */

START_TEST(log_replays_puts_removes_clears_drops)
{
    lt_persist *p = open_dir(0);
    lattice_store *s = new_store();
    lt_persist_cache_attach(p, s, "c", SPEC, PARTS);
    for (int i = 0; i < 40; i++) put(s, i, "x");
    put(s, 3, "three");
    char k[32];
    snprintf(k, sizeof k, "key-%d", 5);
    ck_assert_int_eq(lattice_store_remove(s, 5 % PARTS, k, strlen(k)), LATTICE_OK);
    ck_assert_int_eq(lattice_store_clear(s, 7), LATTICE_OK); /* keys 7, 15, 23, 31, 39 */
    wait_durable(p);
    lt_persist_close(p);
    lattice_store_destroy(s);

    p = open_dir(0);
    uint64_t *cnt = NULL;
    s = take(p, &cnt);
    ck_assert_ptr_nonnull(s);
    ck_assert_uint_eq(count(s), 40 - 1 - 5);
    char v[64];
    ck_assert_int_eq(get(s, 3, v, sizeof v), LATTICE_OK);
    ck_assert_str_eq(v, "three");
    ck_assert_int_eq(get(s, 5, v, sizeof v), LATTICE_ERR_NOT_FOUND);
    ck_assert_int_eq(get(s, 15, v, sizeof v), LATTICE_ERR_NOT_FOUND);
    ck_assert_int_eq(get(s, 14, v, sizeof v), LATTICE_OK);
    ck_assert_uint_eq(cnt[3], 36); /* the largest version written to partition 3: key 35's */
    lt_free(cnt);
    /* The drop of the cache: nothing of it is recovered after. */
    lt_persist_cache *pc = lt_persist_cache_attach(p, s, "c", SPEC, PARTS);
    lt_persist_cache_drop(pc);
    wait_durable(p);
    lt_persist_close(p);
    lattice_store_destroy(s);
    p = open_dir(0);
    ck_assert_ptr_null(take(p, NULL));
    for (size_t i = 0; i < lt_persist_recovered_count(p); i++) ck_assert_ptr_null(lt_persist_recovered_spec(p, i));
    lt_persist_close(p);
}
END_TEST

START_TEST(torn_tail_at_every_byte_of_the_last_record)
{
    write_log(10, 0, "v");
    char seg[8][512];
    ck_assert_uint_eq(segments(seg, 8), 1);
    off_t full = file_size(seg[0]);
    /* Where the last record starts: the log of 9. */
    char keep[600];
    snprintf(keep, sizeof keep, "%s.full", dir);
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "cp %s %s", seg[0], keep);
    ck_assert_int_eq(system(cmd), 0);
    snprintf(cmd, sizeof cmd, "rm -rf %s && mkdir -p %s", dir, dir);
    ck_assert_int_eq(system(cmd), 0);
    write_log(9, 0, "v");
    off_t nine = file_size(seg[0]);
    ck_assert_int_lt(nine, full);
    for (off_t cut = nine; cut < full; cut++) {
        snprintf(cmd, sizeof cmd, "cp %s %s", keep, seg[0]);
        ck_assert_int_eq(system(cmd), 0);
        ck_assert_int_eq(truncate(seg[0], cut), 0);
        lt_persist *p = open_dir(0);
        expect_entries(p, 9, "v");
        lt_persist_close(p);
        /* Cut back to the last whole record. */
        ck_assert_int_eq(file_size(seg[0]), nine);
    }
    unlink(keep);
}
END_TEST

START_TEST(flipped_bit_anywhere_in_the_last_record)
{
    write_log(6, 0, "w");
    char seg[8][512];
    ck_assert_uint_eq(segments(seg, 8), 1);
    off_t full = file_size(seg[0]);
    char keep[600], cmd[1300];
    snprintf(keep, sizeof keep, "%s.full", seg[0]);
    snprintf(cmd, sizeof cmd, "cp %s %s", seg[0], keep);
    ck_assert_int_eq(system(cmd), 0);
    /* The last record is "key-5" -> "w-5": its size by the codec. */
    lt_rec r = {.kind = LT_REC_PUT, .cache = "c", .cache_len = 1, .key = "key-5", .key_len = 5, .value = "w-5",
                .value_len = 3};
    off_t start = full - (off_t)lt_rec_size(&r);
    for (off_t at = start; at < full; at++)
        for (int bit = 0; bit < 8; bit += 3) {
            snprintf(cmd, sizeof cmd, "cp %s %s", keep, seg[0]);
            ck_assert_int_eq(system(cmd), 0);
            int fd = open(seg[0], O_RDWR);
            uint8_t c;
            ck_assert_int_eq(pread(fd, &c, 1, at), 1);
            c ^= (uint8_t)(1u << bit);
            ck_assert_int_eq(pwrite(fd, &c, 1, at), 1);
            close(fd);
            lt_persist *p = open_dir(0);
            expect_entries(p, 5, "w");
            lt_persist_close(p);
            ck_assert_int_eq(file_size(seg[0]), start);
        }
    unlink(keep);
}
END_TEST

START_TEST(corrupt_middle_record_ends_the_log_there)
{
    write_log(6, 0, "m");
    char seg[8][512];
    ck_assert_uint_eq(segments(seg, 8), 1);
    off_t full = file_size(seg[0]);
    lt_rec r = {.kind = LT_REC_PUT, .cache = "c", .cache_len = 1, .key = "key-5", .key_len = 5, .value = "m-5",
                .value_len = 3};
    off_t each = (off_t)lt_rec_size(&r);
    off_t third_from_end = full - 3 * each; /* key-3's record */
    int fd = open(seg[0], O_RDWR);
    uint8_t c = 0xff;
    ck_assert_int_eq(pwrite(fd, &c, 1, third_from_end + 20), 1);
    close(fd);
    lt_persist *p = open_dir(0);
    expect_entries(p, 3, "m"); /* key-0..2; 3, 4, 5 dropped, never half */
    uint64_t a, b, cut, ms;
    lt_persist_recovery_figures(p, &a, &b, &cut, &ms);
    ck_assert_uint_eq(cut, (uint64_t)(3 * each));
    lt_persist_close(p);
}
END_TEST

START_TEST(records_across_segment_boundaries)
{
    /* Segments of 200 bytes: every record or two starts a new one. */
    write_log(30, 200, "s");
    char seg[64][512];
    size_t n = segments(seg, 64);
    ck_assert_uint_ge(n, 8);
    lt_persist *p = open_dir(200);
    expect_entries(p, 30, "s");
    lt_persist_close(p);
    /* A torn tail in the last segment and a missing middle one. */
    write_log(0, 200, "s");
    n = segments(seg, 64);
    off_t last = file_size(seg[n - 1]);
    if (last > 5) ck_assert_int_eq(truncate(seg[n - 1], last - 5), 0);
    p = open_dir(200);
    lattice_store *s = take(p, NULL);
    ck_assert_ptr_nonnull(s);
    ck_assert_uint_ge(count(s), 28);
    lattice_store_destroy(s);
    lt_persist_close(p);
    n = segments(seg, 64);
    ck_assert_int_eq(unlink(seg[n / 2]), 0);
    p = open_dir(200);
    s = take(p, NULL);
    ck_assert_ptr_nonnull(s);
    uint64_t kept = count(s);
    ck_assert_uint_lt(kept, 28);
    /* What is kept is a prefix: key i there means every key before it is. */
    char v[64];
    for (int i = 0; i < (int)kept; i++) ck_assert_int_eq(get(s, i, v, sizeof v), LATTICE_OK);
    lattice_store_destroy(s);
    lt_persist_close(p);
    ck_assert_uint_eq(segments(seg, 64), n / 2); /* the ones after the gap are gone */
}
END_TEST

typedef struct cmp_ctx {
    lattice_store *other;
    uint64_t n, bad;
} cmp_ctx;

static int same_in_other(void *arg, const lattice_store_item *it)
{
    cmp_ctx *x = arg;
    void *v = NULL;
    lattice_store_meta m;
    x->n++;
    if (lattice_store_get_copy(x->other, it->partition, it->key, it->key_len, &v, &m) != LATTICE_OK ||
        m.value_len != it->value_len || memcmp(v, it->value, it->value_len) || m.version != it->version)
        x->bad++;
    lt_free(v);
    return 0;
}

/* Walks a and checks every entry is in b with the same value and version;
 * returns a's entries. */
static uint64_t same_contents(lattice_store *a, lattice_store *b)
{
    cmp_ctx x = {b, 0, 0};
    for (uint32_t p = 0; p < PARTS; p++) {
        lattice_store_cursor *cur;
        ck_assert_int_eq(lattice_store_cursor_open(a, p, &cur), LATTICE_OK);
        for (int done = 0; !done;) ck_assert_int_eq(lattice_store_cursor_next(cur, 100, 1u << 20, same_in_other, &x, &done), LATTICE_OK);
        lattice_store_cursor_close(cur);
    }
    ck_assert_uint_eq(x.bad, 0);
    return x.n;
}

START_TEST(change_hook_logs_exactly_what_the_store_applied)
{
    /* A 1 MiB evicting region: the store's every kind of change - put_all,
     * insert_batch with IF_NEWER (older entries skipped), refused
     * conditional puts, removes of absent keys, clears and evictions - and
     * the log replayed elsewhere holds exactly what the store holds. */
    lattice_region *small;
    lattice_region_config rc = {"small", 0, 1, 0, LATTICE_REGION_EVICT};
    ck_assert_int_eq(lattice_region_create(&rc, &small), LATTICE_OK);
    lattice_store_config sc = {"c", PARTS, small, NULL, NULL};
    lattice_store *s;
    ck_assert_int_eq(lattice_store_create(&sc, &s), LATTICE_OK);
    lt_persist *p = open_dir(0);
    lt_persist_cache_attach(p, s, "c", SPEC, PARTS);
    static char keys[200][16];
    lattice_store_entry e[200];
    for (int i = 0; i < 200; i++) {
        snprintf(keys[i], sizeof keys[i], "pa-%d", i);
        e[i] = (lattice_store_entry){(uint32_t)i % PARTS, keys[i], strlen(keys[i]), "all", 3, 0, 10, 0};
    }
    ck_assert_int_eq(lattice_store_put_all(s, e, 200, 0, NULL), LATTICE_OK);
    /* Partition 0 batch: versions 5 (older: skipped) and 20 (newer: applied), and new keys. */
    lattice_store_entry b[50];
    static char bk[50][16];
    size_t nb = 0;
    for (int i = 0; i < 200 && nb < 50; i += PARTS) {
        b[nb] = (lattice_store_entry){0, keys[i], strlen(keys[i]), nb % 2 ? "newer" : "older", 5, 0, nb % 2 ? 20 : 5, 0};
        nb++;
    }
    for (int i = 0; nb < 50; i++, nb++) {
        snprintf(bk[i], sizeof bk[i], "new-%d", i);
        b[nb] = (lattice_store_entry){0, bk[i], strlen(bk[i]), "fresh", 5, 0, 7, 0};
    }
    size_t applied = 0;
    ck_assert_int_eq(lattice_store_insert_batch(s, 0, b, nb, LATTICE_STORE_IF_NEWER, &applied), LATTICE_OK);
    ck_assert_uint_lt(applied, nb);
    lattice_store_entry dup = {1, keys[1], strlen(keys[1]), "refused", 7, 0, 99, 0};
    ck_assert_int_eq(lattice_store_put(s, &dup, LATTICE_STORE_IF_ABSENT), LATTICE_ERR_EXISTS);
    ck_assert_int_eq(lattice_store_remove(s, 2, "absent", 6), LATTICE_ERR_NOT_FOUND);
    ck_assert_int_eq(lattice_store_clear(s, 3), LATTICE_OK);
    /* Fill past 1 MiB: the region evicts. */
    static char big[2000];
    memset(big, 'b', sizeof big);
    for (int i = 0; i < 2000; i++) {
        char k[32];
        snprintf(k, sizeof k, "big-%d", i);
        lattice_store_entry x = {(uint32_t)i % PARTS, k, strlen(k), big, sizeof big, 0, 100 + (uint64_t)i, 0};
        ck_assert_int_eq(lattice_store_put(s, &x, 0), LATTICE_OK);
    }
    lattice_store_metrics m;
    lattice_store_metrics_get(s, &m);
    ck_assert_uint_gt(m.evictions, 0);
    wait_durable(p);
    lt_persist_close(p);
    p = open_dir(0);
    lattice_store *r = take(p, NULL);
    ck_assert_ptr_nonnull(r);
    uint64_t n = same_contents(s, r);
    ck_assert_uint_eq(same_contents(r, s), n);
    ck_assert_uint_eq(count(r), count(s));
    lattice_store_destroy(r);
    lt_persist_close(p);
    lattice_store_destroy(s);
    lattice_region_destroy(small);
}
END_TEST

/* ---------------------------------------------------------- checkpoints */

#define NKEYS 600

START_TEST(checkpoint_and_log_against_a_reference_map)
{
    static char ref[NKEYS][40]; /* "" = absent */
    memset(ref, 0, sizeof ref);
    srand(7);
    lt_persist *p = open_dir(4096);
    lattice_store *s = new_store();
    uint64_t counter[PARTS] = {0};
    lt_persist_cache_attach(p, s, "c", SPEC, PARTS);
    for (int round = 0; round < 3; round++) {
        for (int op = 0; op < 3000; op++) {
            int i = rand() % NKEYS, what = rand() % 100;
            uint32_t part = (uint32_t)i % PARTS;
            char k[32];
            snprintf(k, sizeof k, "key-%d", i);
            if (what < 70) {
                snprintf(ref[i], sizeof ref[i], "r%d-o%d", round, op);
                lattice_store_entry e = {part, k, strlen(k), ref[i], strlen(ref[i]), 0, ++counter[part], 0};
                ck_assert_int_eq(lattice_store_put(s, &e, 0), LATTICE_OK);
            } else if (what < 99) {
                int st = lattice_store_remove(s, part, k, strlen(k));
                ck_assert_int_eq(st, ref[i][0] ? LATTICE_OK : LATTICE_ERR_NOT_FOUND);
                ref[i][0] = 0;
            } else {
                lattice_store_clear(s, part);
                for (int j = 0; j < NKEYS; j++)
                    if ((uint32_t)j % PARTS == part) ref[j][0] = 0;
            }
        }
        if (round < 2) {
            lt_persist_ckpt_cache cc = {"c", SPEC, s, counter, PARTS, NULL};
            ck_assert_int_eq(lt_persist_checkpoint(p, &cc, 1), LATTICE_OK);
        }
    }
    wait_durable(p);
    lt_persist_close(p);
    lattice_store_destroy(s);
    /* Older segments went with the checkpoints. */
    char seg[256][512];
    ck_assert_uint_lt(segments(seg, 256), 200);

    p = open_dir(4096);
    uint64_t ce, lr, cut, ms;
    lt_persist_recovery_figures(p, &ce, &lr, &cut, &ms);
    ck_assert_uint_gt(ce, 0);
    ck_assert_uint_gt(lr, 0);
    ck_assert_uint_eq(cut, 0);
    uint64_t *cnt;
    s = take(p, &cnt);
    ck_assert_ptr_nonnull(s);
    uint64_t live = 0;
    for (int i = 0; i < NKEYS; i++) {
        char v[64];
        int st = get(s, i, v, sizeof v);
        if (ref[i][0]) {
            live++;
            ck_assert_int_eq(st, LATTICE_OK);
            ck_assert_str_eq(v, ref[i]);
        } else {
            ck_assert_int_eq(st, LATTICE_ERR_NOT_FOUND);
        }
    }
    ck_assert_uint_eq(count(s), live);
    for (int i = 0; i < PARTS; i++) ck_assert_uint_ge(cnt[i], 1);
    lt_free(cnt);
    lattice_store_destroy(s);
    lt_persist_close(p);
}
END_TEST

START_TEST(checkpoint_file_whole_or_not_used)
{
    lattice_store *s = new_store();
    for (int i = 0; i < 50; i++) put(s, i, "ck");
    uint64_t counter[PARTS] = {1, 2, 3, 4, 5, 6, 7, 8};
    lt_persist_ckpt_cache cc = {"c", SPEC, s, counter, PARTS, NULL};
    mkdir(dir, 0755);
    char path[400];
    snprintf(path, sizeof path, "%s/checkpoint-%016x.ckpt", dir, 0);
    ck_assert_int_eq(lt_checkpoint_write(path, 0, &cc, 1), LATTICE_OK);
    lattice_store_destroy(s);
    lt_persist *p = open_dir(0);
    uint64_t *cnt;
    s = take(p, &cnt);
    ck_assert_ptr_nonnull(s);
    ck_assert_uint_eq(count(s), 50);
    ck_assert_uint_eq(cnt[7], 48); /* key 47's version, above the checkpoint's 8 */
    ck_assert_uint_eq(cnt[0], 49);
    lt_free(cnt);
    lattice_store_destroy(s);
    lt_persist_close(p);
    /* Cut short: not used (and nothing of it loaded). */
    off_t n = file_size(path);
    ck_assert_int_eq(truncate(path, n - 3), 0);
    p = open_dir(0);
    ck_assert_ptr_null(take(p, NULL));
    lt_persist_close(p);
}
END_TEST

START_TEST(a_discarded_copy_stays_discarded)
{
    write_log(20, 0, "d");
    lt_persist *p = open_dir(0);
    lt_persist_discard(p, "test");
    /* The node goes on with a new, empty store of the same cache. */
    lattice_store *s = new_store();
    lt_persist_cache_attach(p, s, "c", SPEC, PARTS);
    put(s, 1, "after");
    wait_durable(p);
    lt_persist_close(p);
    lattice_store_destroy(s);
    p = open_dir(0);
    s = take(p, NULL);
    ck_assert_ptr_nonnull(s);
    ck_assert_uint_eq(count(s), 1); /* key 1 only: nothing of the discarded copy */
    char v[64];
    ck_assert_int_eq(get(s, 1, v, sizeof v), LATTICE_OK);
    ck_assert_str_eq(v, "after");
    lattice_store_destroy(s);
    lt_persist_close(p);
}
END_TEST

/* A checkpoint's delta marks (MARKS) come back with the recovered copy; a
 * CLEAR in the log after it takes its partition's mark away; a copy taken
 * aside leaves a DROP behind: the next start finds nothing of it. */
START_TEST(checkpoint_marks_come_back_and_a_clear_drops_its_mark)
{
    lattice_store *s = new_store();
    for (int i = 0; i < 50; i++) put(s, i, "ck");
    uint64_t counter[PARTS] = {1, 2, 3, 4, 5, 6, 7, 8};
    uint64_t marks[PARTS] = {1, 2, LT_MARK_NONE, 4, 5, 6, 7, 8};
    lt_persist *p = open_dir(0);
    lt_persist_discard(p, "test");
    lt_persist_cache_attach(p, s, "c", SPEC, PARTS);
    lt_persist_ckpt_cache cc = {"c", SPEC, s, counter, PARTS, marks};
    ck_assert_int_eq(lt_persist_checkpoint(p, &cc, 1), LATTICE_OK);
    ck_assert_int_eq(lattice_store_clear(s, 3), LATTICE_OK);
    wait_durable(p);
    lt_persist_close(p);
    lattice_store_destroy(s);
    p = open_dir(0);
    ck_assert_uint_eq(lt_persist_recovered_count(p), 1);
    const uint64_t *m = lt_persist_recovered_marks(p, 0);
    ck_assert_ptr_nonnull(m);
    ck_assert_uint_eq(m[0], 1);
    ck_assert_uint_eq(m[2], LT_MARK_NONE);
    ck_assert_uint_eq(m[3], LT_MARK_NONE); /* cleared after the checkpoint */
    ck_assert_uint_eq(m[7], 8);
    uint64_t *cnt = NULL, *mk = NULL;
    ck_assert_int_eq(lt_persist_take_aside(p, 0, &s, &cnt, &mk), LATTICE_OK);
    ck_assert_uint_eq(mk[4], 5);
    ck_assert_uint_gt(count(s), 0);
    lt_free(cnt);
    lt_free(mk);
    lattice_store_destroy(s);
    wait_durable(p);
    lt_persist_close(p);
    p = open_dir(0);
    ck_assert_ptr_null(take(p, NULL));
    lt_persist_close(p);
}
END_TEST

/* The on_durable hook runs on the log's thread once the durable LSN moved
 * past what it wrote - so what it hands out is on disk - and the notify
 * eventfd is written only when the hook did not answer for it. */
typedef struct hook_seen {
    lt_persist *_Atomic p;
    atomic_int calls;
    _Atomic uint64_t durable_seen;
    atomic_bool answer;
} hook_seen;

static bool on_durable(void *arg)
{
    hook_seen *h = arg;
    lt_persist *p;
    while (!(p = atomic_load(&h->p))) /* set right after the open, before the first append */
        ;
    atomic_store(&h->durable_seen, lt_persist_durable(p));
    atomic_fetch_add(&h->calls, 1);
    return atomic_load(&h->answer);
}

static void wait_calls(hook_seen *h, int n)
{
    for (int i = 0; i < 20000 && atomic_load(&h->calls) < n; i++) {
        struct timespec t = {0, 500000};
        nanosleep(&t, NULL);
    }
    ck_assert_int_ge(atomic_load(&h->calls), n);
}

START_TEST(durable_hook_runs_after_the_fsync_and_stands_for_the_notify)
{
    int efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    ck_assert_int_ge(efd, 0);
    static hook_seen h;
    memset(&h, 0, sizeof h);
    atomic_store(&h.answer, true);
    lt_persist_config c = {.dir = dir, .fsync = LT_WAL_ALWAYS, .region = region, .notify_fd = efd,
                           .on_durable = on_durable, .on_durable_arg = &h};
    lt_persist *p = NULL;
    ck_assert_int_eq(lt_persist_open(&c, &p), LATTICE_OK);
    atomic_store(&h.p, p);
    uint64_t drained;
    while (read(efd, &drained, sizeof drained) == sizeof drained) /* what the open wrote, if anything */
        ;
    lattice_store *s = new_store();
    lt_persist_cache_attach(p, s, "c", SPEC, PARTS);
    put(s, 1, "one");
    uint64_t a = lt_persist_appended(p);
    wait_calls(&h, 1);
    wait_durable(p);
    ck_assert_uint_ge(atomic_load(&h.durable_seen), a); /* the record was durable when the hook ran */
    ck_assert_int_lt(read(efd, &drained, sizeof drained), 0); /* the hook answered: no notify */

    atomic_store(&h.answer, false);
    int before = atomic_load(&h.calls);
    put(s, 2, "two");
    a = lt_persist_appended(p);
    wait_calls(&h, before + 1);
    wait_durable(p);
    ck_assert_uint_ge(atomic_load(&h.durable_seen), a);
    uint64_t v = 0;
    for (int i = 0; i < 2000 && read(efd, &v, sizeof v) != sizeof v; i++) {
        struct timespec t = {0, 500000};
        nanosleep(&t, NULL);
    }
    ck_assert_uint_ge(v, 1); /* it did not: the eventfd wakes the data thread */
    lt_persist_close(p);
    lattice_store_destroy(s);
    close(efd);
}
END_TEST

/* group: a batch that starts while a round of appends is held waits for
 * the round's end, so the round's records go in one write and one fsync -
 * however slowly they come (here 1 ms apart, 200 times the old quiet gap
 * that ended a batch).  And a round held past the bound does not hold the
 * log: its records become durable anyway. */
START_TEST(group_takes_a_held_round_in_one_batch)
{
    static hook_seen h;
    memset(&h, 0, sizeof h);
    lt_persist_config c = {.dir = dir, .fsync = LT_WAL_GROUP, .region = region, .notify_fd = -1,
                           .on_durable = on_durable, .on_durable_arg = &h, .group_us = 60u * 1000 * 1000};
    lt_persist *p = NULL;
    ck_assert_int_eq(lt_persist_open(&c, &p), LATTICE_OK);
    atomic_store(&h.p, p);
    lattice_store *s = new_store();
    lt_persist_cache_attach(p, s, "c", SPEC, PARTS);
    wait_durable(p); /* whatever the attach wrote */
    int before = atomic_load(&h.calls);
    uint64_t at_hold = lt_persist_durable(p);
    lt_persist_hold(p);
    for (int i = 0; i < 20; i++) {
        put(s, i, "v");
        struct timespec t = {0, 1000000};
        nanosleep(&t, NULL);
    }
    ck_assert_uint_eq(lt_persist_durable(p), at_hold); /* nothing went while the round was held */
    ck_assert_int_eq(atomic_load(&h.calls), before);
    lt_persist_unhold(p);
    wait_durable(p);
    ck_assert_int_eq(atomic_load(&h.calls), before + 1); /* one batch for the round */
    lt_persist_close(p);
    lattice_store_destroy(s);

    /* The bound: a hold never released, 2 ms at most per batch. */
    memset(&h, 0, sizeof h);
    c.group_us = 2000;
    ck_assert_int_eq(lt_persist_open(&c, &p), LATTICE_OK);
    atomic_store(&h.p, p);
    s = take(p, NULL);
    ck_assert_ptr_nonnull(s);
    lt_persist_cache_attach(p, s, "c", SPEC, PARTS);
    wait_durable(p);
    lt_persist_hold(p);
    put(s, 100, "w");
    wait_durable(p);
    lt_persist_unhold(p);
    lt_persist_close(p);
    lattice_store_destroy(s);
}
END_TEST

/* A burst of held writes (a rejoin's) grows a batch buffer to its size;
 * once written the writer frees it, so the buffer appends go into stays
 * small for the rest of the process's life (the soak's restarted nodes
 * kept 3-4 MiB of them, #32). */
static size_t append_cap(lt_persist *p)
{
    pthread_mutex_lock(&p->mu);
    size_t c = p->cap;
    pthread_mutex_unlock(&p->mu);
    return c;
}

START_TEST(a_burst_grown_batch_buffer_is_given_back)
{
    lt_persist_config c = {.dir = dir, .fsync = LT_WAL_GROUP, .region = region, .notify_fd = -1,
                           .group_us = 60u * 1000 * 1000};
    lt_persist *p = NULL;
    ck_assert_int_eq(lt_persist_open(&c, &p), LATTICE_OK);
    lattice_store *s = new_store();
    lt_persist_cache_attach(p, s, "c", SPEC, PARTS);
    wait_durable(p);
    size_t n = 3 * LT_WAL_KEEP_BYTES / 2;
    char *big = lt_malloc(n + 1);
    memset(big, 'b', n);
    big[n] = 0;
    lt_persist_hold(p);
    put(s, 1, big); /* one record larger than the bound: its buffer grew past it */
    lt_persist_unhold(p);
    lt_free(big);
    wait_durable(p);
    for (int i = 0; i < 4; i++) { /* each swap hands the writer's buffer to the appends */
        put(s, 2000 + i, "small");
        wait_durable(p);
        ck_assert_uint_le(append_cap(p), LT_WAL_KEEP_BYTES);
    }
    lt_persist_close(p);
    lattice_store_destroy(s);
}
END_TEST

START_TEST(second_open_of_a_dir_is_refused)
{
    lt_persist *p = open_dir(0);
    lt_persist_config c = {.dir = dir, .fsync = LT_WAL_GROUP, .region = region, .notify_fd = -1};
    lt_persist *q = NULL;
    ck_assert_int_eq(lt_persist_open(&c, &q), LATTICE_ERR_IO);
    ck_assert_ptr_null(q);
    ck_assert_int_eq(lt_persist_save_cid(p, "127.0.0.1:47500"), LATTICE_OK);
    lt_persist_close(p);
    p = open_dir(0);
    ck_assert_str_eq(lt_persist_prev_cid(p), "127.0.0.1:47500");
    lt_persist_close(p);
    lt_wal_fsync m;
    ck_assert_int_eq(lt_wal_fsync_parse("always", &m), LATTICE_OK);
    ck_assert_int_eq(m, LT_WAL_ALWAYS);
    ck_assert_int_eq(lt_wal_fsync_parse("sometimes", &m), LATTICE_ERR_INVAL);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("persist");
    TCase *t = tcase_create("records");
    tcase_add_test(t, record_roundtrip_and_every_bit);
    tcase_add_test(t, record_fields_checked_behind_the_crc);
    suite_add_tcase(s, t);
    t = tcase_create("log");
    tcase_add_checked_fixture(t, setup, teardown);
    tcase_set_timeout(t, 120);
    tcase_add_test(t, log_replays_puts_removes_clears_drops);
    tcase_add_test(t, torn_tail_at_every_byte_of_the_last_record);
    tcase_add_test(t, flipped_bit_anywhere_in_the_last_record);
    tcase_add_test(t, corrupt_middle_record_ends_the_log_there);
    tcase_add_test(t, records_across_segment_boundaries);
    tcase_add_test(t, second_open_of_a_dir_is_refused);
    tcase_add_test(t, durable_hook_runs_after_the_fsync_and_stands_for_the_notify);
    tcase_add_test(t, a_discarded_copy_stays_discarded);
    tcase_add_test(t, change_hook_logs_exactly_what_the_store_applied);
    suite_add_tcase(s, t);
    t = tcase_create("checkpoint");
    tcase_add_checked_fixture(t, setup, teardown);
    tcase_set_timeout(t, 120);
    tcase_add_test(t, checkpoint_and_log_against_a_reference_map);
    tcase_add_test(t, checkpoint_file_whole_or_not_used);
    tcase_add_test(t, checkpoint_marks_come_back_and_a_clear_drops_its_mark);
    tcase_add_test(t, group_takes_a_held_round_in_one_batch);
    tcase_add_test(t, a_burst_grown_batch_buffer_is_given_back);
    suite_add_tcase(s, t);
    return lt_run_suite(s);
}
