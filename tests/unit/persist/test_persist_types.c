/* persist/ and value type tags: a PUT record carries its value's type in
 * the body's third byte (persist/record.c), which was a reserved 0 before
 * types: a string's record is byte for byte the old one, a log written
 * before types (records built here by hand, as the old encoder wrote them)
 * replays as strings, and a tagged put comes back with its type through
 * the log and through a checkpoint. */
#include <check.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <urcu.h>

#include "lattice/alloc.h"
#include "lattice/log.h"
#include "persist/persist.h"
#include "run_suite.h"

#define SPEC "c:partitions=8"
#define PARTS 8
#define NTYPES (LATTICE_STORE_TYPE_MAX + 1)

static char dir[256];
static lattice_region *region;

static void setup(void)
{
    rcu_register_thread();
    lt_log_threshold = LT_ERROR;
    snprintf(dir, sizeof dir, "/tmp/lt_persist_types_test.%d", (int)getpid());
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

static lt_persist *open_dir(void)
{
    lt_persist_config c = {.dir = dir, .fsync = LT_WAL_ALWAYS, .region = region, .notify_fd = -1};
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

static lattice_store *take(lt_persist *p, uint64_t **counter)
{
    lattice_store *s = NULL;
    uint64_t *cnt = NULL;
    if (lt_persist_take(p, "c", SPEC, &s, &cnt, PARTS) != LATTICE_OK) return NULL;
    if (counter) *counter = cnt;
    else lt_free(cnt);
    return s;
}

static void key_of(int i, char *k, size_t cap) { snprintf(k, cap, "key-%d", i); }

static int type_of(lattice_store *s, int i, char *val, size_t cap)
{
    char k[32];
    key_of(i, k, sizeof k);
    lattice_store_meta m;
    memset(val, 0, cap);
    int st = lattice_store_get(s, (uint32_t)i % PARTS, k, strlen(k), val, cap - 1, &m);
    return st == LATTICE_OK ? m.type : -1;
}

/* ---- the old format, by hand (persist/record.c before types) ---- */

static uint8_t *le(uint8_t *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++) p[i] = (uint8_t)(v >> (8 * i));
    return p + n;
}

/* u32 crc32c | u32 len | u8 kind, u8 cache_len, u16 0, u32 partition, u64
 * lsn, u64 version, u64 expire_ms, u32 key_len, u32 value_len | cache,
 * key, value.  Returns the record's size. */
static size_t old_record(uint8_t *out, uint8_t kind, uint64_t lsn, uint32_t partition, uint64_t version,
                         const char *key, const char *value)
{
    size_t kl = key ? strlen(key) : 0, vl = strlen(value);
    size_t body = 40 + 1 + kl + vl;
    uint8_t *b = out + 8;
    b[0] = kind, b[1] = 1, b[2] = 0, b[3] = 0;
    uint8_t *q = le(b + 4, partition, 4);
    q = le(q, lsn, 8);
    q = le(q, version, 8);
    q = le(q, 0, 8);
    q = le(q, kl, 4);
    q = le(q, vl, 4);
    *q++ = 'c';
    memcpy(q, key ? key : "", kl);
    memcpy(q + kl, value, vl);
    le(out + 4, body, 4);
    le(out, lt_crc32c(0, out + 4, 4 + body), 4);
    return 8 + body;
}

START_TEST(a_string_record_is_the_old_record)
{
    uint8_t old[256], now[256];
    size_t n = old_record(old, LT_REC_PUT, 4096, 3, 17, "k", "value");
    lt_rec r = {.kind = LT_REC_PUT, .lsn = 4096, .cache = "c", .cache_len = 1, .partition = 3, .version = 17,
                .key = "k", .key_len = 1, .value = "value", .value_len = 5};
    ck_assert_uint_eq(lt_rec_size(&r), n);
    lt_rec_encode(&r, now);
    ck_assert_mem_eq(old, now, n);
    lt_rec d;
    size_t used;
    ck_assert_int_eq(lt_rec_decode(old, n, &d, &used, NULL), LATTICE_OK);
    ck_assert_uint_eq(d.type, 0);
}
END_TEST

START_TEST(every_type_round_trips_and_is_checked)
{
    for (uint8_t t = 0; t < NTYPES; t++) {
        lt_rec r = {.kind = LT_REC_PUT, .cache = "c", .cache_len = 1, .partition = 1, .version = 2, .key = "k",
                    .key_len = 1, .value = "v", .value_len = 1, .type = t};
        uint8_t b[128];
        size_t n = lt_rec_size(&r);
        lt_rec_encode(&r, b);
        ck_assert_uint_eq(b[LT_REC_HEAD + 2], t);
        lt_rec d;
        size_t used;
        ck_assert_int_eq(lt_rec_decode(b, n, &d, &used, NULL), LATTICE_OK);
        ck_assert_uint_eq(d.type, t);
        /* a type the store cannot keep, or on a kind without a value type:
         * refused behind a good CRC */
        b[LT_REC_HEAD + 2] = LATTICE_STORE_TYPE_MAX + 1;
        le(b, lt_crc32c(0, b + 4, n - 4), 4);
        ck_assert_int_eq(lt_rec_decode(b, n, &d, &used, NULL), LT_REC_BAD);
    }
    /* only a PUT carries one: the encoder writes 0 for the others, and the
     * decoder refuses anything else */
    lt_rec rm = {.kind = LT_REC_REMOVE, .cache = "c", .cache_len = 1, .key = "k", .key_len = 1, .type = 3};
    uint8_t b[128];
    size_t n = lt_rec_size(&rm);
    lt_rec_encode(&rm, b);
    ck_assert_uint_eq(b[LT_REC_HEAD + 2], 0);
    b[LT_REC_HEAD + 2] = 3;
    le(b, lt_crc32c(0, b + 4, n - 4), 4);
    lt_rec d;
    size_t used;
    ck_assert_int_eq(lt_rec_decode(b, n, &d, &used, NULL), LT_REC_BAD);
}
END_TEST

START_TEST(an_old_log_replays_as_strings)
{
    ck_assert_int_eq(mkdir(dir, 0755), 0);
    uint8_t buf[4096];
    size_t off = 0;
    /* the cache, then puts of keys 0..9 and a remove of key 4 */
    uint8_t *b = buf;
    size_t kl = 0, vl = strlen(SPEC), body = 40 + 1 + kl + vl;
    b[8] = LT_REC_CACHE, b[9] = 1, b[10] = 0, b[11] = 0;
    uint8_t *q = le(b + 12, 0, 4);
    q = le(q, 0, 8);
    q = le(q, PARTS, 8);
    q = le(q, 0, 8);
    q = le(q, 0, 4);
    q = le(q, vl, 4);
    *q++ = 'c';
    memcpy(q, SPEC, vl);
    le(b + 4, body, 4);
    le(b, lt_crc32c(0, b + 4, 4 + body), 4);
    off = 8 + body;
    for (int i = 0; i < 10; i++) {
        char k[32], v[32];
        key_of(i, k, sizeof k);
        snprintf(v, sizeof v, "old-%d", i);
        off += old_record(buf + off, LT_REC_PUT, off, (uint32_t)i % PARTS, (uint64_t)i + 1, k, v);
    }
    off += old_record(buf + off, LT_REC_REMOVE, off, 4, 20, "key-4", "");
    char path[512];
    snprintf(path, sizeof path, "%s/wal-%016" PRIx64 ".log", dir, (uint64_t)0);
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(buf, 1, off, f), off);
    fclose(f);

    lt_persist *p = open_dir();
    uint64_t ce, lr, cut, ms;
    lt_persist_recovery_figures(p, &ce, &lr, &cut, &ms);
    ck_assert_uint_eq(lr, 12);
    ck_assert_uint_eq(cut, 0);
    lattice_store *s = take(p, NULL);
    ck_assert_ptr_nonnull(s);
    char v[64];
    for (int i = 0; i < 10; i++) {
        if (i == 4) {
            ck_assert_int_eq(type_of(s, i, v, sizeof v), -1);
            continue;
        }
        ck_assert_int_eq(type_of(s, i, v, sizeof v), 0);
        char want[32];
        snprintf(want, sizeof want, "old-%d", i);
        ck_assert_str_eq(v, want);
    }
    lt_persist_close(p);
    lattice_store_destroy(s);
}
END_TEST

START_TEST(tagged_puts_come_back_through_the_log_and_a_checkpoint)
{
    lt_persist *p = open_dir();
    lattice_store *s = new_store();
    uint64_t counter[PARTS] = {0};
    lt_persist_cache_attach(p, s, "c", SPEC, PARTS);
    for (int i = 0; i < 32; i++) {
        char k[32];
        key_of(i, k, sizeof k);
        uint32_t part = (uint32_t)i % PARTS;
        lattice_store_entry e = {.partition = part, .key = k, .key_len = strlen(k), .value = "v", .value_len = 1,
                                 .version = ++counter[part], .type = (uint8_t)(i % NTYPES)};
        ck_assert_int_eq(lattice_store_put(s, &e, 0), LATTICE_OK);
        if (i == 15) { /* the first half goes into a checkpoint, the rest stays in the log */
            lt_persist_ckpt_cache cc = {"c", SPEC, s, counter, PARTS, NULL};
            ck_assert_int_eq(lt_persist_checkpoint(p, &cc, 1), LATTICE_OK);
        }
    }
    wait_durable(p);
    lt_persist_close(p);
    lattice_store_destroy(s);

    p = open_dir();
    uint64_t ce, lr, cut, ms;
    lt_persist_recovery_figures(p, &ce, &lr, &cut, &ms);
    ck_assert_uint_eq(ce, 16);
    ck_assert_uint_ge(lr, 16);
    s = take(p, NULL);
    ck_assert_ptr_nonnull(s);
    char v[64];
    for (int i = 0; i < 32; i++) ck_assert_int_eq(type_of(s, i, v, sizeof v), i % NTYPES);
    lt_persist_close(p);
    lattice_store_destroy(s);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("persist_types");
    TCase *tc = tcase_create("types");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, a_string_record_is_the_old_record);
    tcase_add_test(tc, every_type_round_trips_and_is_checked);
    tcase_add_test(tc, an_old_log_replays_as_strings);
    tcase_add_test(tc, tagged_puts_come_back_through_the_log_and_a_checkpoint);
    suite_add_tcase(s, tc);
    return lt_run_suite(s);
}
