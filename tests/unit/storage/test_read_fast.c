/* The get's inline path (storage/region_read.h, lattice_store_get): the
 * short-key hash it computes is XXH3's; every head-row shape it checks with
 * its 8-byte compare (1- and 2-byte partition varints, 1-, 2- and 3-byte key
 * length varints, long versions, expire times, values of every small size
 * and fragmented rows it must hand to the general reader) reads back what
 * was written; two stores sharing a region never see each other's rows; and
 * a churn of puts, overwrites of every size and removes agrees with a
 * reference map after every step, while a reader thread checks every value
 * it gets. */
#include <pthread.h>

#include "run_suite.h"
#include "helpers.h"
#include "store_int.h"

/* ---- the hash ---- */

START_TEST(the_short_key_hash_is_xxh3_for_every_length)
{
    uint8_t k[64];
    for (size_t i = 0; i < sizeof k; i++) k[i] = (uint8_t)mix64(i);
    for (size_t len = 0; len <= sizeof k; len++) {
        ck_assert_uint_eq(key_hash(k, len), XXH3_64bits(k, len));
        ck_assert_uint_eq(key_tag(k, len), ix_tag(XXH3_64bits(k, len)));
    }
}
END_TEST

/* ---- every head shape ---- */

static void check_get(lattice_store *s, const lattice_store_entry *e, struct fake_clock *clk)
{
    (void)clk;
    size_t cap = e->value_len + 8;
    uint8_t *buf = malloc(cap);
    lattice_store_meta m;
    ck_assert_int_eq(lattice_store_get(s, e->partition, e->key, e->key_len, buf, cap, &m), LATTICE_OK);
    ck_assert_uint_eq(m.value_len, e->value_len);
    ck_assert_uint_eq(m.version, e->version);
    ck_assert_uint_eq(m.expire_ms, e->expire_ms);
    ck_assert(memcmp(buf, e->value, e->value_len) == 0);
    if (e->value_len) {
        /* One byte short: TOO_LARGE, and the size needed. */
        ck_assert_int_eq(lattice_store_get(s, e->partition, e->key, e->key_len, buf,
                                           e->value_len - 1, &m),
                         LATTICE_ERR_TOO_LARGE);
        ck_assert_uint_eq(m.value_len, e->value_len);
    }
    /* Without a buffer or meta: found, nothing copied. */
    ck_assert_int_eq(lattice_store_get(s, e->partition, e->key, e->key_len, NULL, 0, NULL),
                     e->value_len ? LATTICE_ERR_TOO_LARGE : LATTICE_OK);
    /* The same key with its last byte changed, and the same key in the next
     * partition, are absent. */
    uint8_t *other = malloc(e->key_len);
    memcpy(other, e->key, e->key_len);
    other[e->key_len - 1] ^= 0x5a;
    ck_assert_int_eq(lattice_store_get(s, e->partition, other, e->key_len, buf, cap, NULL),
                     LATTICE_ERR_NOT_FOUND);
    ck_assert_int_eq(lattice_store_get(s, (e->partition + 1) % 16384, e->key, e->key_len, buf, cap,
                                       NULL),
                     LATTICE_ERR_NOT_FOUND);
    free(other);
    free(buf);
}

START_TEST(every_head_shape_reads_back)
{
    static const uint32_t parts[] = {0, 1, 127, 128, 129, 1000, 16383};
    static const size_t klens[] = {1, 2, 3, 4, 7, 8, 9, 15, 16, 17, 100, 127, 128, 129, 1000,
                                   16383, 16384, 16385, 65535};
    static const size_t vlens[] = {0, 1, 3, 8, 16, 17, 200, 5000};
    static const uint64_t versions[] = {1, 127, 128, 1ull << 40};
    struct fake_clock clk = {1000};
    lattice_region *r = new_region(4096, 512, LATTICE_REGION_REJECT);
    lattice_store *s = new_store(r, 16384, &clk);
    enum { NP = sizeof parts / sizeof *parts, NK = sizeof klens / sizeof *klens,
           NV = sizeof vlens / sizeof *vlens, NVER = sizeof versions / sizeof *versions };
    static lattice_store_entry e[NP * NK * 2];
    uint8_t *v = malloc(5000);
    size_t n = 0;
    for (size_t pi = 0; pi < NP; pi++)
        for (size_t ki = 0; ki < NK; ki++)
            for (int ex = 0; ex < 2; ex++, n++) {
                uint8_t *k = malloc(klens[ki]);
                for (size_t i = 0; i < klens[ki]; i++) k[i] = (uint8_t)mix64(n * 131 + i);
                e[n] = (lattice_store_entry){.partition = parts[pi], .key = k, .key_len = klens[ki],
                                             .expire_ms = ex ? 5000 + n : 0};
            }
    /* Each key takes every value size and version in turn (overwrites in
     * place, into the gap, relocated), read back after each. */
    for (size_t vi = 0; vi < NV; vi++)
        for (size_t ri = 0; ri < NVER; ri++)
            for (size_t i = 0; i < n; i++) {
                e[i].value = v, e[i].value_len = vlens[vi], e[i].version = versions[ri];
                fill_value(v, vlens[vi], i, vi * NVER + ri);
                ck_assert_int_eq(lattice_store_put(s, &e[i], 0), LATTICE_OK);
                check_get(s, &e[i], &clk);
            }
    ck_assert_int_eq(lattice_region_check(r), LATTICE_OK);
    /* Expired entries are absent; the others still read. */
    clk.now = 5000 + n / 2;
    for (size_t i = 0; i < n; i++) {
        int gone = e[i].expire_ms && e[i].expire_ms <= clk.now;
        ck_assert_int_eq(lattice_store_get(s, e[i].partition, e[i].key, e[i].key_len, NULL, 0, NULL),
                         gone ? LATTICE_ERR_NOT_FOUND : LATTICE_ERR_TOO_LARGE);
    }
    for (size_t i = 0; i < n; i++) free((void *)e[i].key);
    free(v);
    lattice_store_destroy(s);
    lattice_region_destroy(r);
}
END_TEST

/* ---- two stores, one region ---- */

START_TEST(two_stores_in_one_region_never_see_each_others_rows)
{
    enum { N = 3000 };
    lattice_region *r = new_region(4096, 64, LATTICE_REGION_REJECT);
    lattice_store *a = new_store(r, 64, NULL), *b = new_store(r, 64, NULL);
    char k[32];
    uint8_t v[16], got[16];
    for (uint64_t id = 0; id < N; id++) {
        int kl = key_of(k, sizeof k, id);
        for (int w = 0; w < 2; w++) {
            fill_value(v, 8, id, (uint64_t)w + 1);
            lattice_store_entry e = {(uint32_t)(id % 64), k, (size_t)kl, v, 8, 0, (uint64_t)w + 1, 0};
            ck_assert_int_eq(lattice_store_put(w ? b : a, &e, 0), LATTICE_OK);
        }
    }
    /* a loses every other key; its rows' places are taken by b's new rows. */
    for (uint64_t id = 0; id < N; id += 2) {
        int kl = key_of(k, sizeof k, id);
        ck_assert_int_eq(lattice_store_remove(a, (uint32_t)(id % 64), k, (size_t)kl), LATTICE_OK);
    }
    for (uint64_t id = N; id < 2 * N; id++) {
        int kl = key_of(k, sizeof k, id);
        fill_value(v, 8, id, 2);
        lattice_store_entry e = {(uint32_t)(id % 64), k, (size_t)kl, v, 8, 0, 2, 0};
        ck_assert_int_eq(lattice_store_put(b, &e, 0), LATTICE_OK);
    }
    for (uint64_t id = 0; id < 2 * N; id++) {
        int kl = key_of(k, sizeof k, id);
        lattice_store_meta m;
        int in_a = id < N && id % 2;
        int st = lattice_store_get(a, (uint32_t)(id % 64), k, (size_t)kl, got, sizeof got, &m);
        ck_assert_int_eq(st, in_a ? LATTICE_OK : LATTICE_ERR_NOT_FOUND);
        if (in_a) ck_assert(m.version == 1 && value_ok(got, 8, id, 1));
        st = lattice_store_get(b, (uint32_t)(id % 64), k, (size_t)kl, got, sizeof got, &m);
        ck_assert_int_eq(st, LATTICE_OK);
        ck_assert(m.version == 2 && value_ok(got, 8, id, 2));
    }
    lattice_store_destroy(a);
    lattice_store_destroy(b);
    lattice_region_destroy(r);
}
END_TEST

/* ---- churn against a reference map, with a reader ---- */

enum { KEYS = 2000, STEPS = 200000 };

struct churn {
    lattice_store *s;
    int stop;      /* atomic */
    uint64_t bad, hits; /* atomics (reader) */
};

/* Value length of (id, version): 0..40 bytes, so rows shrink and grow. */
static size_t clen(uint64_t id, uint64_t version) { return (size_t)(mix64(id ^ (version << 20)) % 41); }

static int ckey(char *k, uint64_t id)
{
    /* 2..24-byte keys (the first two bytes are the id): several head
     * shapes in one run. */
    int n = (int)(2 + id % 23);
    for (int i = 0; i < n; i++) k[i] = (char)('a' + (mix64(id + (uint64_t)i * 7919) % 26));
    memcpy(k, &id, 2); /* distinct keys: KEYS < 2^16 */
    return n;
}

static void *churn_reader(void *arg)
{
    struct churn *c = arg;
    rcu_register_thread();
    char k[32];
    uint8_t v[64];
    uint64_t x = 1;
    while (!__atomic_load_n(&c->stop, __ATOMIC_RELAXED)) {
        uint64_t id = (x = mix64(x)) % KEYS;
        int kl = ckey(k, id);
        lattice_store_meta m;
        int st = lattice_store_get(c->s, (uint32_t)(id % 16), k, (size_t)kl, v, sizeof v, &m);
        if (st == LATTICE_OK) {
            __atomic_add_fetch(&c->hits, 1, __ATOMIC_RELAXED);
            if (m.value_len != clen(id, m.version) || !value_ok(v, m.value_len, id, m.version))
                __atomic_add_fetch(&c->bad, 1, __ATOMIC_RELAXED);
        } else if (st != LATTICE_ERR_NOT_FOUND) {
            __atomic_add_fetch(&c->bad, 1, __ATOMIC_RELAXED);
        }
    }
    rcu_unregister_thread();
    return NULL;
}

START_TEST(churn_agrees_with_a_reference_map_while_a_reader_checks_values)
{
    lattice_region *r = new_region(1024, 8, LATTICE_REGION_REJECT);
    struct churn c = {.s = new_store(r, 16, NULL)};
    static uint64_t ref[KEYS]; /* version present, 0 = absent */
    memset(ref, 0, sizeof ref);
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, churn_reader, &c), 0);
    char k[32];
    uint8_t v[64], got[64];
    uint64_t x = 99;
    for (uint64_t step = 1; step <= STEPS; step++) {
        uint64_t id = (x = mix64(x)) % KEYS;
        int kl = ckey(k, id);
        uint32_t p = (uint32_t)(id % 16);
        if (x % 5 == 0) {
            ck_assert_int_eq(lattice_store_remove(c.s, p, k, (size_t)kl),
                             ref[id] ? LATTICE_OK : LATTICE_ERR_NOT_FOUND);
            ref[id] = 0;
        } else {
            size_t vl = clen(id, step);
            fill_value(v, vl, id, step);
            lattice_store_entry e = {p, k, (size_t)kl, v, vl, 0, step, 0};
            ck_assert_int_eq(lattice_store_put(c.s, &e, 0), LATTICE_OK);
            ref[id] = step;
        }
        /* Another key, checked against the map. */
        uint64_t q = mix64(x + 1) % KEYS;
        kl = ckey(k, q);
        lattice_store_meta m;
        int st = lattice_store_get(c.s, (uint32_t)(q % 16), k, (size_t)kl, got, sizeof got, &m);
        ck_assert_int_eq(st, ref[q] ? LATTICE_OK : LATTICE_ERR_NOT_FOUND);
        if (ref[q]) {
            ck_assert_uint_eq(m.version, ref[q]);
            ck_assert_uint_eq(m.value_len, clen(q, ref[q]));
            ck_assert(value_ok(got, m.value_len, q, ref[q]));
        }
    }
    __atomic_store_n(&c.stop, 1, __ATOMIC_RELAXED);
    pthread_join(th, NULL);
    ck_assert_uint_eq(c.bad, 0);
    ck_assert_uint_gt(c.hits, 0);
    ck_assert_int_eq(lattice_region_check(r), LATTICE_OK);
    lattice_store_destroy(c.s);
    lattice_region_destroy(r);
}
END_TEST

static void setup(void) { rcu_register_thread(); }
static void teardown(void) { rcu_unregister_thread(); }

int main(void)
{
    Suite *s = suite_create("storage_read_fast");
    TCase *tc = tcase_create("read_fast");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 240);
    tcase_add_test(tc, the_short_key_hash_is_xxh3_for_every_length);
    tcase_add_test(tc, every_head_shape_reads_back);
    tcase_add_test(tc, two_stores_in_one_region_never_see_each_others_rows);
    tcase_add_test(tc, churn_agrees_with_a_reference_map_while_a_reader_checks_values);
    suite_add_tcase(s, tc);
    return lt_run_suite(s);
}
