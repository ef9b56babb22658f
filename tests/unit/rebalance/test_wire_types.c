/* Rebalance and value type tags: a supplied entry carries its value's type
 * (Entry field 7, absent for a string), through the batcher, the
 * hand-written decoder (and protobuf-c's, which reads the same), the
 * applier's batch insert, and a delta; a string's Supply is byte for byte
 * the one sent before types; a type the store cannot keep is refused with
 * the message; the partition digest (`lattice verify`) tells types apart. */
#include "rebalance.pb-c.h"
#include "rebalance_tests.h"
#include "run_suite.h"

#define NTYPES (LATTICE_STORE_TYPE_MAX + 1)

static const lattice_rebalance_ids IDS = {7, 1, 42, 1};

static void put_typed(lattice_store *s, uint32_t part, uint64_t id, uint64_t version, uint8_t type)
{
    char key[32];
    int kl = snprintf(key, sizeof key, "k%llu", (unsigned long long)id);
    uint8_t v[40];
    t_fill(v, sizeof v, id, version);
    lattice_store_entry e = {.partition = part, .key = key, .key_len = (size_t)kl, .value = v,
                             .value_len = sizeof v, .version = version, .type = type};
    ck_assert_int_eq(lattice_store_put(s, &e, 0), LATTICE_OK);
}

static uint8_t type_of(lattice_store *s, uint32_t part, uint64_t id)
{
    char key[32];
    int kl = snprintf(key, sizeof key, "k%llu", (unsigned long long)id);
    lattice_store_meta m;
    ck_assert_int_eq(lattice_store_get(s, part, key, (size_t)kl, NULL, 0, &m), LATTICE_ERR_TOO_LARGE);
    return m.type;
}

/* Streams partition part of src into dst; returns the batches. */
static int stream(struct t_env *src, struct t_env *dst, uint32_t part)
{
    lattice_rebalance_applier *a;
    ck_assert_int_eq(lattice_rebalance_applier_create(dst->store, "orders", &IDS, NULL, &a), LATTICE_OK);
    ck_assert_int_eq(lattice_rebalance_applier_begin(a, part, true), LATTICE_OK);
    lattice_rebalance_batcher *b;
    ck_assert_int_eq(lattice_rebalance_batcher_create(src->store, "orders", &IDS, part, 2048, &b), LATTICE_OK);
    bool last = false;
    int batches = 0;
    for (uint64_t batch = 1; !last; batch++) {
        void *buf;
        size_t len;
        ck_assert_int_eq(lattice_rebalance_batcher_next(b, batch, 1, &buf, &len, &last, NULL), LATTICE_OK);
        lattice_rebalance_supply *s;
        ck_assert_int_eq(lattice_rebalance_supply_decode(buf, len, 0, &s), LATTICE_OK);
        /* protobuf-c reads the same types */
        Latreb__Supply *m = latreb__supply__unpack(NULL, len, buf);
        ck_assert_ptr_nonnull(m);
        ck_assert_uint_eq(m->base.n_unknown_fields, 0);
        for (size_t i = 0; i < m->n_entries; i++) {
            lattice_store_entry e;
            lattice_rebalance_supply_entry(s, i, &e);
            ck_assert_uint_eq(m->entries[i]->type, e.type);
            ck_assert_uint_eq(e.type, t_key_id(&e) % NTYPES);
        }
        latreb__supply__free_unpacked(m, NULL);
        lattice_rebalance_apply_result r;
        ck_assert_int_eq(lattice_rebalance_applier_apply(a, s, &r), LATTICE_OK);
        lattice_rebalance_supply_free(s);
        lt_free(buf);
        batches++;
    }
    lattice_rebalance_batcher_free(b);
    lattice_rebalance_applier_free(a);
    return batches;
}

START_TEST(supplied_entries_keep_their_type)
{
    rcu_register_thread();
    struct t_env src, dst;
    t_env_open(&src, 2, 16);
    t_env_open(&dst, 2, 16);
    enum { N = 300 };
    for (uint64_t i = 0; i < N; i++) put_typed(src.store, 1, i, 10 + i, (uint8_t)(i % NTYPES));
    ck_assert_int_gt(stream(&src, &dst, 1), 1);
    ck_assert_uint_eq(lattice_store_count(dst.store, 1), N);
    for (uint64_t i = 0; i < N; i++) ck_assert_uint_eq(type_of(dst.store, 1, i), i % NTYPES);
    ck_assert_uint_eq(t_digest(src.store, 1), t_digest(dst.store, 1));
    t_env_close(&src);
    t_env_close(&dst);
    rcu_unregister_thread();
}
END_TEST

START_TEST(a_delta_keeps_the_type)
{
    rcu_register_thread();
    struct t_env src;
    t_env_open(&src, 1, 16);
    lattice_store_history_configure(src.store, 1024, 1u << 20);
    lattice_store_history_valid_from(src.store, 0, 0);
    for (uint64_t i = 0; i < 20; i++) put_typed(src.store, 0, i, 1 + i, (uint8_t)(i % NTYPES));
    lattice_rebalance_delta_base base = {.partition = 0, .mark = 5};
    lattice_rebalance_batcher *b;
    ck_assert_int_eq(lattice_rebalance_batcher_create_delta(src.store, "orders", &IDS, 0, 1 << 20, 20, &base, &b),
                     LATTICE_OK);
    void *buf;
    size_t len;
    bool last;
    ck_assert_int_eq(lattice_rebalance_batcher_next(b, 1, 20, &buf, &len, &last, NULL), LATTICE_OK);
    ck_assert(last);
    lattice_rebalance_supply *s;
    ck_assert_int_eq(lattice_rebalance_supply_decode(buf, len, 0, &s), LATTICE_OK);
    lattice_rebalance_supply_info in;
    lattice_rebalance_supply_info_of(s, &in);
    ck_assert(in.delta);
    ck_assert_uint_eq(in.entries, 15); /* versions 6..20 */
    for (size_t i = 0; i < in.entries; i++) {
        lattice_store_entry e;
        lattice_rebalance_supply_entry(s, i, &e);
        ck_assert_uint_eq(e.type, t_key_id(&e) % NTYPES);
    }
    lattice_rebalance_supply_free(s);
    lt_free(buf);
    lattice_rebalance_batcher_free(b);
    t_env_close(&src);
    rcu_unregister_thread();
}
END_TEST

START_TEST(a_string_supply_is_what_it_was_and_a_bad_type_is_refused)
{
    rcu_register_thread();
    struct t_env e;
    t_env_open(&e, 1, 16);
    put_typed(e.store, 0, 1, 3, 0);
    lattice_rebalance_batcher *b;
    ck_assert_int_eq(lattice_rebalance_batcher_create(e.store, "c", &IDS, 0, 1 << 20, &b), LATTICE_OK);
    void *buf;
    size_t len;
    bool last;
    ck_assert_int_eq(lattice_rebalance_batcher_next(b, 1, 3, &buf, &len, &last, NULL), LATTICE_OK);
    lattice_rebalance_batcher_free(b);
    /* The entry as protobuf-c packs it without the field: the same bytes. */
    Latreb__Supply *m = latreb__supply__unpack(NULL, len, buf);
    ck_assert_ptr_nonnull(m);
    ck_assert_uint_eq(m->n_entries, 1);
    ck_assert_uint_eq(m->entries[0]->type, 0);
    size_t plen = latreb__supply__get_packed_size(m);
    ck_assert_uint_eq(plen, len);
    uint8_t *again = malloc(plen);
    latreb__supply__pack(m, again);
    ck_assert_mem_eq(again, buf, len);
    /* With a type the store cannot keep: refused by the decoder. */
    m->entries[0]->type = LATTICE_STORE_TYPE_MAX + 1;
    plen = latreb__supply__get_packed_size(m);
    uint8_t *bad = malloc(plen);
    latreb__supply__pack(m, bad);
    lattice_rebalance_supply *s;
    ck_assert_int_eq(lattice_rebalance_supply_decode(bad, plen, 0, &s), LATTICE_ERR_PROTO);
    /* ... and the largest one taken */
    m->entries[0]->type = LATTICE_STORE_TYPE_MAX;
    plen = latreb__supply__get_packed_size(m);
    latreb__supply__pack(m, bad);
    ck_assert_uint_eq(plen, len + 2);
    ck_assert_int_eq(lattice_rebalance_supply_decode(bad, plen, 0, &s), LATTICE_OK);
    lattice_store_entry en;
    lattice_rebalance_supply_entry(s, 0, &en);
    ck_assert_uint_eq(en.type, LATTICE_STORE_TYPE_MAX);
    lattice_rebalance_supply_free(s);
    free(bad);
    free(again);
    latreb__supply__free_unpacked(m, NULL);
    lt_free(buf);
    t_env_close(&e);
    rcu_unregister_thread();
}
END_TEST

START_TEST(the_digest_tells_types_apart)
{
    rcu_register_thread();
    struct t_env a, b;
    t_env_open(&a, 1, 16);
    t_env_open(&b, 1, 16);
    put_typed(a.store, 0, 1, 3, 0);
    put_typed(b.store, 0, 1, 3, 0);
    ck_assert_uint_eq(t_digest(a.store, 0), t_digest(b.store, 0));
    put_typed(b.store, 0, 1, 3, 2);
    ck_assert_uint_ne(t_digest(a.store, 0), t_digest(b.store, 0));
    t_env_close(&a);
    t_env_close(&b);
    rcu_unregister_thread();
}
END_TEST

int main(void)
{
    Suite *s = suite_create("rebalance_types");
    TCase *tc = tcase_create("types");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, supplied_entries_keep_their_type);
    tcase_add_test(tc, a_delta_keeps_the_type);
    tcase_add_test(tc, a_string_supply_is_what_it_was_and_a_bad_type_is_refused);
    tcase_add_test(tc, the_digest_tells_types_apart);
    suite_add_tcase(s, tc);
    return lt_run_suite(s);
}
