/*
 * Value type tags in types/ without a network: a value of another type than
 * a string, put in through the store API, is reported by every read
 * (LATTICE_OP_R_TYPE), refused with WRONGTYPE by every string kind that
 * reads it (nothing changes, nothing is replicated), replaced by a plain
 * PUT and removed by a plain REMOVE; EXPIRE keeps its type and replicates
 * it; a copy keeps the type a replicated write carries.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <urcu.h>

#include "cache.pb-c.h"
#include "run_suite.h"
#include "lattice/alloc.h"
#include "lattice/clock.h"
#include "types/types.h"

#include "one_cache.h"

static uint32_t part(const char *key) { return lattice_partition_of_key(key, strlen(key), 16); }

static lattice_op_result run(int kind, unsigned flags, const char *key, const char *value, int64_t delta,
                             uint64_t ttl, repl_out *repl)
{
    exec_in in = {kind, flags, part(key), key, strlen(key), value, value ? strlen(value) : 0, delta, ttl};
    lattice_op_result r;
    repl_out tmp;
    exec_local(&cache, &in, &scratch, &r, repl ? repl : &tmp);
    return r;
}

/* A value of type t, as the collection types will store one. */
static void put_typed(const char *key, uint8_t t, uint64_t version)
{
    lattice_store_entry e = {.partition = part(key), .key = key, .key_len = strlen(key), .value = "\x01\x02",
                             .value_len = 2, .version = version, .type = t};
    ck_assert_int_eq(lattice_store_put(cache.store, &e, 0), LATTICE_OK);
    if (cache.counter[e.partition] < version) cache.counter[e.partition] = version;
}

static lattice_store_meta stored(const char *key)
{
    lattice_store_meta m = {0};
    ck_assert_int_eq(lattice_store_get(cache.store, part(key), key, strlen(key), NULL, 0, &m),
                     LATTICE_ERR_TOO_LARGE);
    return m;
}

START_TEST(the_numbers_are_fixed)
{
    ck_assert_int_eq(LATTICE_TYPE_STRING, 0);
    ck_assert_int_eq(LATTICE_TYPE_HASH, 1);
    ck_assert_int_eq(LATTICE_TYPE_LIST, 2);
    ck_assert_int_eq(LATTICE_TYPE_SET, 3);
    ck_assert_int_eq(LATTICE_TYPE_ZSET, 4);
    ck_assert_int_le(LATTICE_TYPE_MAX_, LATTICE_STORE_TYPE_MAX);
    ck_assert_uint_le(LATTICE_OP_R_TYPE_FLAGS(LATTICE_STORE_TYPE_MAX), LATTICE_OP_R_TYPE_MASK);
}
END_TEST

START_TEST(reads_report_the_type_and_get_is_wrongtype)
{
    lattice_op_result r = run(LATTICE_OP_PUT, 0, "s", "v", 0, 0, NULL);
    ck_assert_int_eq(r.status, LATTICE_OK);
    r = run(LATTICE_OP_GET, 0, "s", NULL, 0, 0, NULL);
    ck_assert_int_eq(r.status, LATTICE_OK);
    ck_assert_uint_eq(LATTICE_OP_R_TYPE(r.flags), LATTICE_TYPE_STRING);
    for (uint8_t t = LATTICE_TYPE_HASH; t <= LATTICE_TYPE_MAX_; t++) {
        put_typed("h", t, 10 + t);
        r = run(LATTICE_OP_GET, 0, "h", NULL, 0, 0, NULL);
        ck_assert_int_eq(r.status, LATTICE_ERR_WRONGTYPE);
        ck_assert_uint_eq(LATTICE_OP_R_TYPE(r.flags), t);
        ck_assert_uint_eq(r.value_len, 0);
        r = run(LATTICE_OP_CONTAINS, 0, "h", NULL, 0, 0, NULL);
        ck_assert_int_eq(r.status, LATTICE_OK);
        ck_assert_int_eq(r.num, 1);
        ck_assert_uint_eq(LATTICE_OP_R_TYPE(r.flags), t);
        r = run(LATTICE_OP_TTL, 0, "h", NULL, 0, 0, NULL);
        ck_assert_int_eq(r.status, LATTICE_OK);
        ck_assert_int_eq(r.num, -1);
        /* the answer on the calling thread is the same function's */
        lattice_store_meta m = stored("h");
        lattice_op_result f;
        memset(&f, 0, sizeof f);
        exec_read_answer(LATTICE_OP_GET, LATTICE_OK, "x", &m, &f);
        ck_assert_int_eq(f.status, LATTICE_ERR_WRONGTYPE);
        ck_assert_uint_eq(LATTICE_OP_R_TYPE(f.flags), t);
    }
    r = run(LATTICE_OP_CONTAINS, 0, "absent", NULL, 0, 0, NULL);
    ck_assert_int_eq(r.num, 0);
    ck_assert_uint_eq(r.flags, 0);
}
END_TEST

START_TEST(string_kinds_refuse_another_type_and_change_nothing)
{
    static const struct {
        int kind;
        unsigned flags;
        const char *value;
        int64_t delta;
    } k[] = {
        {LATTICE_OP_INCREMENT, 0, NULL, 1},       {LATTICE_OP_APPEND, 0, "x", 0},
        {LATTICE_OP_SETRANGE, 0, "x", 1},          {LATTICE_OP_SETRANGE, 0, "", 1},
        {LATTICE_OP_SETBIT, 0, "1", 3},            {LATTICE_OP_INCRBYFLOAT, 0, "1.5", 0},
        {LATTICE_OP_PUT, LATTICE_OP_RETURN_OLD, "x", 0},
        {LATTICE_OP_REMOVE, LATTICE_OP_RETURN_OLD, NULL, 0},
    };
    put_typed("h", LATTICE_TYPE_LIST, 5);
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        repl_out rp;
        lattice_op_result r = run(k[i].kind, k[i].flags, "h", k[i].value, k[i].delta, 0, &rp);
        ck_assert_msg(r.status == LATTICE_ERR_WRONGTYPE, "kind %d: status %d", k[i].kind, r.status);
        ck_assert_uint_eq(LATTICE_OP_R_TYPE(r.flags), LATTICE_TYPE_LIST);
        ck_assert(!rp.needed);
        lattice_store_meta m = stored("h");
        ck_assert_uint_eq(m.type, LATTICE_TYPE_LIST);
        ck_assert_uint_eq(m.version, 5);
        ck_assert_uint_eq(m.value_len, 2);
    }
    ck_assert_uint_eq(cache.counter[part("h")], 5);
}
END_TEST

START_TEST(put_replaces_remove_removes_expire_keeps_the_type)
{
    repl_out rp;
    put_typed("a", LATTICE_TYPE_HASH, 3);
    lattice_op_result r = run(LATTICE_OP_EXPIRE, 0, "a", NULL, 0, 60000, &rp);
    ck_assert_int_eq(r.status, LATTICE_OK);
    ck_assert(rp.needed && !rp.remove);
    ck_assert_uint_eq(rp.type, LATTICE_TYPE_HASH);
    lattice_store_meta m = stored("a");
    ck_assert_uint_eq(m.type, LATTICE_TYPE_HASH);
    ck_assert_uint_ne(m.expire_ms, 0);
    /* SET over it: a string (and NX sees it as present) */
    r = run(LATTICE_OP_PUT, LATTICE_OP_NX, "a", "s", 0, 0, &rp);
    ck_assert_int_eq(r.status, LATTICE_ERR_EXISTS);
    r = run(LATTICE_OP_PUT, LATTICE_OP_KEEP_TTL, "a", "s", 0, 0, &rp);
    ck_assert_int_eq(r.status, LATTICE_OK);
    ck_assert_uint_eq(rp.type, LATTICE_TYPE_STRING);
    m = stored("a");
    ck_assert_uint_eq(m.type, LATTICE_TYPE_STRING);
    ck_assert_uint_ne(m.expire_ms, 0);
    r = run(LATTICE_OP_GET, 0, "a", NULL, 0, 0, NULL);
    ck_assert_int_eq(r.status, LATTICE_OK);
    put_typed("b", LATTICE_TYPE_ZSET, 9);
    r = run(LATTICE_OP_REMOVE, 0, "b", NULL, 0, 0, &rp);
    ck_assert_int_eq(r.status, LATTICE_OK);
    ck_assert(rp.needed && rp.remove);
    r = run(LATTICE_OP_CONTAINS, 0, "b", NULL, 0, 0, NULL);
    ck_assert_int_eq(r.num, 0);
}
END_TEST

START_TEST(a_copy_keeps_the_replicated_type)
{
    const char *k = "c";
    uint32_t p = part(k);
    ck_assert_int_eq(exec_replicate_typed(&cache, p, k, 1, "v", 1, 0, 4, false, LATTICE_TYPE_SET), LATTICE_OK);
    ck_assert_uint_eq(stored(k).type, LATTICE_TYPE_SET);
    /* older: nothing changes; newer string: a string */
    ck_assert_int_eq(exec_replicate_typed(&cache, p, k, 1, "w", 1, 0, 3, false, LATTICE_TYPE_STRING), LATTICE_OK);
    ck_assert_uint_eq(stored(k).type, LATTICE_TYPE_SET);
    ck_assert_int_eq(exec_replicate(&cache, p, k, 1, "w", 1, 0, 6, false), LATTICE_OK);
    ck_assert_uint_eq(stored(k).type, LATTICE_TYPE_STRING);
    ck_assert_int_eq(exec_replicate_typed(&cache, p, k, 1, "w", 1, 0, 7, false, LATTICE_STORE_TYPE_MAX + 1),
                     LATTICE_ERR_INVAL);
}
END_TEST

/* The replication message: value_type absent for a string (the bytes sent
 * before types), and carried for another type. */
START_TEST(a_replicated_write_carries_the_type)
{
    Latdata__Req q = LATDATA__REQ__INIT;
    q.kind = 100;
    q.cache = "c";
    q.key.data = (uint8_t *)"k", q.key.len = 1;
    q.value.data = (uint8_t *)"v", q.value.len = 1;
    q.version = 9;
    size_t n = latdata__req__get_packed_size(&q);
    uint8_t a[64], b[64];
    latdata__req__pack(&q, a);
    q.value_type = LATTICE_TYPE_STRING;
    ck_assert_uint_eq(latdata__req__get_packed_size(&q), n);
    latdata__req__pack(&q, b);
    ck_assert_mem_eq(a, b, n);
    q.value_type = LATTICE_TYPE_ZSET;
    size_t m = latdata__req__get_packed_size(&q);
    ck_assert_uint_eq(m, n + 3); /* field 22: a two-byte tag and the value */
    latdata__req__pack(&q, b);
    Latdata__Req *u = latdata__req__unpack(NULL, m, b);
    ck_assert_ptr_nonnull(u);
    ck_assert_uint_eq(u->base.n_unknown_fields, 0);
    ck_assert_uint_eq(u->value_type, LATTICE_TYPE_ZSET);
    /* what backup.c applies with it */
    const char *k = "r";
    ck_assert_int_eq(exec_replicate_typed(&cache, part(k), k, 1, u->value.data, u->value.len, 0, u->version, false,
                                          (uint8_t)u->value_type),
                     LATTICE_OK);
    ck_assert_uint_eq(stored(k).type, LATTICE_TYPE_ZSET);
    latdata__req__free_unpacked(u, NULL);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("types_typed");
    TCase *tc = tcase_create("typed");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, the_numbers_are_fixed);
    tcase_add_test(tc, reads_report_the_type_and_get_is_wrongtype);
    tcase_add_test(tc, string_kinds_refuse_another_type_and_change_nothing);
    tcase_add_test(tc, put_replaces_remove_removes_expire_keeps_the_type);
    tcase_add_test(tc, a_copy_keeps_the_replicated_type);
    tcase_add_test(tc, a_replicated_write_carries_the_type);
    suite_add_tcase(s, tc);
    return lt_run_suite(s);
}
