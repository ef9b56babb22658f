/* A long random churn (insert, update, conditional put, batch, remove,
 * expiry, sweeps; 1.2M operations, fixed seed) checked operation by operation
 * against a plain reference array. */
#include "run_suite.h"
#include "helpers.h"

enum { KEYS = 10000, PARTS = 8, OPS = 1200000 };

struct ref {
    uint8_t present[KEYS];
    uint64_t version[KEYS], expire[KEYS];
    uint32_t vlen[KEYS];
};

static uint64_t rng = 42;
static uint64_t rnd(void)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return rng;
}

static int live(const struct ref *rf, uint64_t id, uint64_t now)
{
    return rf->present[id] && !(rf->expire[id] && rf->expire[id] <= now);
}

static size_t pick_len(void)
{
    uint64_t x = rnd() % 100;
    if (x < 90) return rnd() % 200;
    if (x < 99) return 200 + rnd() % 2800;
    return 3000 + rnd() % 9000;
}

static void verify(lattice_store *s, const struct ref *rf, uint64_t id, uint64_t now, uint8_t *buf)
{
    char k[32];
    int kl = key_of(k, sizeof k, id);
    lattice_store_meta m;
    int st = lattice_store_get(s, (uint32_t)(id % PARTS), k, (size_t)kl, buf, 16384, &m);
    if (!live(rf, id, now)) {
        ck_assert_msg(st == LATTICE_ERR_NOT_FOUND, "key %llu should be absent: %s",
                      (unsigned long long)id, lattice_strerror(st));
        return;
    }
    ck_assert_msg(st == LATTICE_OK, "key %llu: %s", (unsigned long long)id, lattice_strerror(st));
    ck_assert_uint_eq(m.version, rf->version[id]);
    ck_assert_uint_eq(m.value_len, rf->vlen[id]);
    ck_assert_uint_eq(m.expire_ms, rf->expire[id]);
    ck_assert_msg(value_ok(buf, m.value_len, id, m.version), "key %llu value", (unsigned long long)id);
}

/* Applies one write to the reference as the store must: returns the status
 * the store has to give. */
static int ref_put(struct ref *rf, uint64_t id, uint64_t now, unsigned flags, uint64_t version,
                   size_t vlen, uint64_t expire)
{
    int l = live(rf, id, now);
    if ((flags & LATTICE_STORE_IF_ABSENT) && l) return LATTICE_ERR_EXISTS;
    if ((flags & LATTICE_STORE_IF_NEWER) && l && version <= rf->version[id]) return LATTICE_ERR_EXISTS;
    rf->present[id] = 1, rf->version[id] = version, rf->vlen[id] = (uint32_t)vlen;
    rf->expire[id] = expire;
    return LATTICE_OK;
}

START_TEST(random_churn_matches_a_reference_map)
{
    rcu_register_thread();
    struct fake_clock clk = {1000000};
    lattice_region *r = new_region(4096, 128, LATTICE_REGION_REJECT);
    lattice_store *s = new_store(r, PARTS, &clk);
    static struct ref rf;
    memset(&rf, 0, sizeof rf);
    uint8_t *val = malloc(16384), *buf = malloc(16384);
    uint8_t bvals[8][16384];
    char k[32], bk[8][32];
    uint64_t ver = 1;
    size_t counts[10] = {0};
    for (uint64_t op = 0; op < OPS; op++) {
        uint64_t now = clk.now, id = rnd() % KEYS, x = rnd() % 100;
        if (x < 45) {
            /* put: plain, IF_NEWER around the stored version, or IF_ABSENT */
            unsigned flags = x < 30 ? 0 : x < 40 ? LATTICE_STORE_IF_NEWER : LATTICE_STORE_IF_ABSENT;
            uint64_t v = flags == LATTICE_STORE_IF_NEWER ? rf.version[id] + rnd() % 5 - 2 : ++ver;
            if (flags == LATTICE_STORE_IF_NEWER && rf.version[id] < 3) v = ++ver;
            size_t len = pick_len();
            uint64_t exp = rnd() % 5 == 0 ? now + 1 + rnd() % 100 : 0;
            int kl = key_of(k, sizeof k, id);
            fill_value(val, len, id, v);
            lattice_store_entry e = {(uint32_t)(id % PARTS), k, (size_t)kl, val, len, exp, v, 0};
            int want = ref_put(&rf, id, now, flags, v, len, exp);
            ck_assert_int_eq(lattice_store_put(s, &e, flags), want);
            counts[0]++;
        } else if (x < 65) {
            verify(s, &rf, id, now, buf);
            counts[1]++;
        } else if (x < 80) {
            int kl = key_of(k, sizeof k, id);
            int want = live(&rf, id, now) ? LATTICE_OK : LATTICE_ERR_NOT_FOUND;
            ck_assert_int_eq(lattice_store_remove(s, (uint32_t)(id % PARTS), k, (size_t)kl), want);
            rf.present[id] = 0;
            counts[2]++;
        } else if (x < 88) {
            /* batch into one partition, maybe with repeated keys */
            uint32_t part = (uint32_t)(id % PARTS);
            size_t n = 1 + rnd() % 8, want_applied = 0;
            unsigned flags = rnd() % 2 ? LATTICE_STORE_IF_NEWER : 0;
            lattice_store_entry e[8];
            for (size_t i = 0; i < n; i++) {
                uint64_t bid = ((rnd() % (KEYS / PARTS)) * PARTS + part) % KEYS;
                if (i && rnd() % 4 == 0) bid = ((rnd() % 3) * PARTS + part); /* repeats */
                size_t len = rnd() % 10 == 0 ? pick_len() : rnd() % 120;
                uint64_t v = flags && rnd() % 3 == 0 ? rf.version[bid] : ++ver;
                int kl = key_of(bk[i], 32, bid);
                fill_value(bvals[i], len, bid, v);
                e[i] = (lattice_store_entry){part, bk[i], (size_t)kl, bvals[i], len, 0, v, 0};
                want_applied += ref_put(&rf, bid, now, flags, v, len, 0) == LATTICE_OK;
            }
            size_t applied = 0;
            ck_assert_int_eq(lattice_store_insert_batch(s, part, e, n, flags, &applied), LATTICE_OK);
            ck_assert_uint_eq(applied, want_applied);
            counts[3]++;
        } else if (x < 99 || rnd() % 16) {
            clk.now += rnd() % 4;
            counts[4]++;
        } else {
            /* a bounded sweep walks whole partitions: keep it rare */
            size_t got = lattice_store_expire(s, 1 + rnd() % 40);
            (void)got;
            counts[5]++;
        }
        if (op % 200000 == 199999) {
            now = clk.now;
            lattice_store_expire(s, 0);
            uint64_t nlive = 0;
            for (uint64_t i = 0; i < KEYS; i++) {
                verify(s, &rf, i, now, buf);
                if (live(&rf, i, now)) nlive++;
                else rf.present[i] = 0;
            }
            uint64_t c = 0;
            for (uint32_t p = 0; p < PARTS; p++) c += lattice_store_count(s, p);
            ck_assert_uint_eq(c, nlive);
            ck_assert_int_eq(lattice_region_check(r), LATTICE_OK);
        }
    }
    for (int i = 0; i < 6; i++) ck_assert_uint_gt(counts[i], 500);
    lattice_store_metrics m;
    lattice_store_metrics_get(s, &m);
    ck_assert_uint_gt(m.expirations, 1000);
    free(val), free(buf);
    lattice_store_destroy(s);
    lattice_region_metrics rm;
    lattice_region_metrics_get(r, &rm);
    ck_assert_uint_eq(rm.rows, 0);
    ck_assert_uint_eq(rm.pages_data, 0);
    lattice_region_destroy(r);
    rcu_unregister_thread();
}
END_TEST

int main(void)
{
    Suite *s = suite_create("storage_churn");
    TCase *tc = tcase_create("churn");
    tcase_set_timeout(tc, 280);
    tcase_add_test(tc, random_churn_matches_a_reference_map);
    suite_add_tcase(s, tc);
    return lt_run_suite(s);
}
