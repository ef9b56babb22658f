/*
 * Bad input to the collection commands never brings a node down: a peer's
 * request carries any command number, any kind and any packed bytes, and a
 * row may hold any bytes (a bug, a disk).  Seeded random commands of every
 * collection type with arguments drawn from the values that matter (numbers
 * at their limits, inf, "", options' names), interleaved with garbage rows
 * of every collection type and garbage packings; every answer must be a
 * status the API names with, when OK, a reply lattice_coll_reply_next reads
 * to its end - and every written row must read back.  ASan and UBSan (the
 * sanitizer stage of CI) watch every byte of it.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <urcu.h>

#include "cache.pb-c.h"
#include "lattice/alloc.h"
#include "lattice/coll.h"
#include "run_suite.h"
#include "types/types.h"

#include "one_cache.h"

static uint64_t seed = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void)
{
    seed ^= seed << 13;
    seed ^= seed >> 7;
    seed ^= seed << 17;
    return seed;
}

static const char xy[] = "x\0y";
static const char *const words[] = {
    xy, "0", "1", "-1", "2", "5", "-5", "100", "9223372036854775807", "-9223372036854775808", "99999999999999999999",
    "1.5", "-0.0", "inf", "-inf", "+inf", "nan", "abc", "", "a", "b", "c", "(1", "[a", "-", "+", "(", "[",
    "LEFT", "RIGHT", "BEFORE", "AFTER", "WITHVALUES", "WITHSCORES", "COUNT", "MATCH", "*", "a*", "RANK", "MAXLEN",
    "NX", "XX", "GT", "LT", "CH", "INCR", "BYSCORE", "BYLEX", "REV", "LIMIT", "0x10", " 1", "1e400",
};

static const char *const keys[] = {"k0", "k1", "k2", "k3"};

static uint32_t part(const char *key) { return lattice_partition_of_key(key, strlen(key), 16); }

/* Every element of a reply, to its end. */
static void reads_whole(const lattice_op_result *r)
{
    size_t off = 0;
    lattice_coll_elem e;
    int k;
    while ((k = lattice_coll_reply_next(r->value, r->value_len, &off, &e)) == 1) {}
    ck_assert_msg(k == 0, "a reply of %zu bytes does not read to its end", r->value_len);
}

static void garbage_row(const char *key)
{
    uint8_t v[48];
    size_t n = rnd() % sizeof v;
    for (size_t i = 0; i < n; i++) v[i] = (uint8_t)rnd();
    if (n && rnd() % 2) v[0] = 1; /* a right format byte, the rest wrong */
    uint32_t p = part(key);
    lattice_store_entry e = {p, key, strlen(key), v, n, 0, cache.counter[p] + 1, (uint8_t)(1 + rnd() % 4)};
    if (lattice_store_put(cache.store, &e, 0) == LATTICE_OK) cache.counter[p]++;
}

START_TEST(random_commands_and_rows)
{
    char packed[1024];
    for (int it = 0; it < 60000; it++) {
        const char *key = keys[rnd() % 4];
        if (rnd() % 500 == 0) {
            garbage_row(key);
            continue;
        }
        int cmd = (int)(rnd() % (LATTICE_COLL_CMD_MAX_ + 3));
        lattice_coll_arg a[8];
        size_t n = rnd() % 8;
        for (size_t i = 0; i < n; i++) {
            const char *w = words[rnd() % (sizeof words / sizeof words[0])];
            a[i] = (lattice_coll_arg){w, w == xy ? sizeof xy - 1 : strlen(w)};
        }
        size_t len = lattice_coll_pack(packed, sizeof packed, a, n);
        ck_assert_uint_gt(len, 0);
        if (rnd() % 50 == 0) len = rnd() % len; /* cut short */
        int kind = rnd() % 20 == 0 ? (int)(1 + rnd() % LATTICE_OP_KIND_MAX_)
                                   : lattice_coll_is_write(cmd) ? LATTICE_OP_COLL_WRITE : LATTICE_OP_COLL_READ;
        if (kind == LATTICE_OP_TXN || kind == LATTICE_OP_WALK || kind == LATTICE_OP_CLEAR || kind == LATTICE_OP_SIZE)
            kind = LATTICE_OP_COLL_READ; /* not exec_local's */
        exec_in in = {kind, 0, part(key), key, strlen(key), packed, len, cmd, 0};
        lattice_op_result r;
        repl_out w;
        exec_local(&cache, &in, &scratch, &r, &w);
        ck_assert_msg(r.status >= LATTICE_OK && r.status < LATTICE_STATUS_COUNT_, "status %d", r.status);
        if ((kind == LATTICE_OP_COLL_READ || kind == LATTICE_OP_COLL_WRITE) && r.status == LATTICE_OK && r.value_len)
            reads_whole(&r);
        if (w.needed && !w.remove) {
            /* what a write stored reads back as a collection of its type */
            lattice_store_meta m = {0};
            int g = lattice_store_get(cache.store, part(key), key, strlen(key), NULL, 0, &m);
            ck_assert(g == LATTICE_OK || g == LATTICE_ERR_TOO_LARGE);
            ck_assert_uint_eq(m.type, w.type);
        }
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("types_coll_garbage");
    TCase *t = tcase_create("garbage");
    tcase_add_checked_fixture(t, setup, teardown);
    tcase_set_timeout(t, 120);
    tcase_add_test(t, random_commands_and_rows);
    suite_add_tcase(s, t);
    return lt_run_suite(s);
}
