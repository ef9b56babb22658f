/* Value type tags in store rows (storage/region_int.h, F_TYPE_MASK): every
 * tag 0..LATTICE_STORE_TYPE_MAX comes back with its entry through every
 * way a row is written (put, update in place, into the page's gap, moved,
 * fragmented, batch insert of small and large rows, put_all, the region's
 * own insert) and every way it is read (get, get_copy, get_all, cursors,
 * region_read); a tag above the maximum is refused; a string's row is byte
 * for byte the row written before tags existed (its flag byte has no type
 * bits), and a row with type bits reads back that type. */
#include "run_suite.h"
#include "helpers.h"
#include "store_int.h"

#define NTYPES (LATTICE_STORE_TYPE_MAX + 1)

static uint8_t got_type(lattice_store *s, uint32_t p, const char *k)
{
    lattice_store_meta m;
    memset(&m, 0xee, sizeof m);
    uint8_t buf[64];
    int st = lattice_store_get(s, p, k, strlen(k), buf, sizeof buf, &m);
    ck_assert(st == LATTICE_OK || st == LATTICE_ERR_TOO_LARGE);
    void *v = NULL;
    lattice_store_meta m2;
    ck_assert_int_eq(lattice_store_get_copy(s, p, k, strlen(k), &v, &m2), LATTICE_OK);
    lt_free(v);
    ck_assert_uint_eq(m.type, m2.type);
    return m.type;
}

START_TEST(every_tag_round_trips_through_put_and_updates)
{
    struct fake_clock clk = {1000};
    lattice_region *r = new_region(4096, 8, LATTICE_REGION_REJECT);
    lattice_store *s = new_store(r, 4, &clk);
    static uint8_t big[10000];
    fill_value(big, sizeof big, 7, 1);
    for (uint8_t t = 0; t < NTYPES; t++) {
        char k[16];
        snprintf(k, sizeof k, "k%u", t);
        uint32_t p = t % 4;
        lattice_store_entry e = {p, k, strlen(k), "value-1", 7, 0, 1, t};
        ck_assert_int_eq(lattice_store_put(s, &e, 0), LATTICE_OK);
        ck_assert_uint_eq(got_type(s, p, k), t);
        /* the same size over the old row, with an expiry and another tag */
        e.type = (uint8_t)(NTYPES - 1 - t), e.version = 2, e.expire_ms = 1u << 30;
        e.value = "value-2";
        ck_assert_int_eq(lattice_store_put(s, &e, 0), LATTICE_OK);
        ck_assert_uint_eq(got_type(s, p, k), NTYPES - 1 - t);
        /* longer: the page's gap or elsewhere */
        e.type = t, e.version = 3, e.value = big, e.value_len = 300;
        ck_assert_int_eq(lattice_store_put(s, &e, 0), LATTICE_OK);
        ck_assert_uint_eq(got_type(s, p, k), t);
        /* fragmented: larger than a page */
        e.version = 4, e.value_len = sizeof big;
        ck_assert_int_eq(lattice_store_put(s, &e, 0), LATTICE_OK);
        ck_assert_uint_eq(got_type(s, p, k), t);
        void *v = NULL;
        lattice_store_meta m;
        ck_assert_int_eq(lattice_store_get_copy(s, p, k, strlen(k), &v, &m), LATTICE_OK);
        ck_assert_uint_eq(m.value_len, sizeof big);
        ck_assert_mem_eq(v, big, sizeof big);
        lt_free(v);
        /* and back to a string, which a put does by default */
        lattice_store_entry str = {.partition = p, .key = k, .key_len = strlen(k), .value = "s", .value_len = 1,
                                   .version = 5};
        ck_assert_int_eq(lattice_store_put(s, &str, 0), LATTICE_OK);
        ck_assert_uint_eq(got_type(s, p, k), 0);
        e.version = 6, e.value_len = 5;
        ck_assert_int_eq(lattice_store_put(s, &e, 0), LATTICE_OK);
        ck_assert_uint_eq(got_type(s, p, k), t);
    }
    ck_assert_int_eq(lattice_region_check(r), LATTICE_OK);
    lattice_store_destroy(s);
    lattice_region_destroy(r);
}
END_TEST

START_TEST(a_tag_above_the_maximum_is_refused)
{
    lattice_region *r = new_region(4096, 8, LATTICE_REGION_REJECT);
    lattice_store *s = new_store(r, 1, NULL);
    lattice_store_entry e = {0, "k", 1, "v", 1, 0, 1, LATTICE_STORE_TYPE_MAX + 1};
    ck_assert_int_eq(lattice_store_put(s, &e, 0), LATTICE_ERR_INVAL);
    size_t applied = 9;
    ck_assert_int_eq(lattice_store_insert_batch(s, 0, &e, 1, 0, &applied), LATTICE_ERR_INVAL);
    ck_assert_int_eq(lattice_store_put_all(s, &e, 1, 0, &applied), LATTICE_ERR_INVAL);
    ck_assert_uint_eq(lattice_store_count(s, 0), 0);
    lattice_store_destroy(s);
    lattice_region_destroy(r);
}
END_TEST

struct seen {
    uint8_t type[64];
    int n;
};

static int note(void *arg, const lattice_store_item *it)
{
    struct seen *x = arg;
    char k[16] = {0};
    ck_assert_uint_lt(it->key_len, sizeof k);
    memcpy(k, it->key, it->key_len); /* keys are not NUL-terminated */
    int id = atoi(k + 1);
    ck_assert_int_lt(id, 64);
    x->type[id] = it->type;
    x->n++;
    return 0;
}

START_TEST(batches_cursors_and_get_all_carry_the_tag)
{
    lattice_region *r = new_region(4096, 8, LATTICE_REGION_REJECT);
    lattice_store *s = new_store(r, 1, NULL);
    char keys[48][8];
    static uint8_t big[5000];
    fill_value(big, sizeof big, 3, 3);
    lattice_store_entry e[48];
    for (int i = 0; i < 48; i++) {
        snprintf(keys[i], sizeof keys[i], "k%d", i);
        /* small rows (the batch's short header), rows with an expiry or a
         * long value (its general header), and fragmented ones */
        size_t vl = i % 3 == 0 ? 5 : i % 3 == 1 ? 200 : sizeof big;
        e[i] = (lattice_store_entry){.partition = 0, .key = keys[i], .key_len = strlen(keys[i]), .value = big,
                                     .value_len = vl, .expire_ms = i % 4 == 1 ? 1ull << 41 : 0,
                                     .version = (uint64_t)i + 1, .type = (uint8_t)(i % NTYPES)};
    }
    size_t applied = 0;
    ck_assert_int_eq(lattice_store_insert_batch(s, 0, e, 24, 0, &applied), LATTICE_OK);
    ck_assert_uint_eq(applied, 24);
    ck_assert_int_eq(lattice_store_put_all(s, e + 24, 24, 0, &applied), LATTICE_OK);
    for (int i = 0; i < 48; i++) ck_assert_uint_eq(got_type(s, 0, keys[i]), i % NTYPES);

    struct seen x = {{0}, 0};
    lattice_store_cursor *c;
    ck_assert_int_eq(lattice_store_cursor_open(s, 0, &c), LATTICE_OK);
    int done = 0;
    while (!done) ck_assert_int_eq(lattice_store_cursor_next(c, 5, 1u << 20, note, &x, &done), LATTICE_OK);
    lattice_store_cursor_close(c);
    ck_assert_int_eq(x.n, 48);
    for (int i = 0; i < 48; i++) ck_assert_uint_eq(x.type[i], i % NTYPES);

    memset(&x, 0, sizeof x);
    ck_assert_int_eq(lattice_store_get_all(s, e, 48, note, &x), LATTICE_OK);
    ck_assert_int_eq(x.n, 48);
    for (int i = 0; i < 48; i++) ck_assert_uint_eq(x.type[i], i % NTYPES);
    ck_assert_int_eq(lattice_region_check(r), LATTICE_OK);
    lattice_store_destroy(s);
    lattice_region_destroy(r);
}
END_TEST

/* The change hook (persistence) hears the tag of every put. */
struct heard {
    int puts;
    uint8_t last;
};

static void changed(void *arg, int kind, const lattice_store_entry *e)
{
    struct heard *h = arg;
    if (kind != LATTICE_STORE_CHANGE_PUT) return;
    h->puts++;
    h->last = e->type;
}

START_TEST(the_change_hook_hears_the_tag)
{
    lattice_region *r = new_region(4096, 8, LATTICE_REGION_REJECT);
    lattice_store *s = new_store(r, 1, NULL);
    struct heard h = {0, 0};
    lattice_store_change_hook hook = {changed, &h};
    lattice_store_set_change_hook(s, &hook);
    for (uint8_t t = 0; t < NTYPES; t++) {
        lattice_store_entry e = {0, "k", 1, "v", 1, 0, (uint64_t)t + 1, t};
        ck_assert_int_eq(lattice_store_put(s, &e, 0), LATTICE_OK);
        ck_assert_uint_eq(h.last, t);
    }
    ck_assert_int_eq(h.puts, NTYPES);
    lattice_store_set_change_hook(s, NULL);
    lattice_store_destroy(s);
    lattice_region_destroy(r);
}
END_TEST

static uint8_t item_type;
static int region_item(void *arg, const lattice_store_item *it)
{
    (void)arg;
    item_type = it->type;
    return 0;
}

/* The row codec itself: a string's head row has no type bits (the bytes
 * written before types), and a row with type bits parses back the type. */
START_TEST(the_row_codec_keeps_strings_as_they_were)
{
    uint8_t page[4096] = {0};
    for (uint8_t t = 0; t < NTYPES; t++) {
        for (int exp = 0; exp < 2; exp++) {
            lattice_store_entry e = {3, "key", 3, "value", 5, exp ? 123456789 : 0, 77, t};
            uint32_t off = 1024;
            head_encode(page + off, &e, 1, 0, 0, 0);
            ck_assert_uint_eq(page[off] & 0x80, 0);            /* bit 7 stays spare */
            ck_assert_uint_eq(ROW_TYPE(page[off]), t);
            ck_assert_uint_eq(page[off] & ~F_TYPE_MASK, F_HEAD | (exp ? F_EXPIRE : 0));
            if (t == 0) ck_assert_uint_eq(page[off], F_HEAD | (exp ? F_EXPIRE : 0)); /* the old flag byte */
            struct rowv v;
            ck_assert_int_eq(row_parse(page, sizeof page, off, &v), 0);
            ck_assert_uint_eq(ROW_TYPE(v.flags), t);
            ck_assert_uint_eq(v.version, 77);
            ck_assert_uint_eq(v.klen, 3);
            ck_assert_uint_eq(v.vlen, 5);
            ck_assert_uint_eq(v.expire, exp ? 123456789 : 0);
            ck_assert_uint_eq(v.len, head_hdr_len(&e, 0) + 8);
        }
    }
    /* The region's own rows: every tag through insert and read. */
    lattice_region *r = new_region(4096, 8, LATTICE_REGION_REJECT);
    for (uint8_t t = 0; t < NTYPES; t++) {
        lattice_store_entry e = {0, "k", 1, "v", 1, 0, 1, t};
        uint64_t link;
        ck_assert_int_eq(lattice_region_insert(r, &e, &link), LATTICE_OK);
        item_type = 0xff;
        ck_assert_int_eq(lattice_region_read(r, link, region_item, NULL), LATTICE_OK);
        ck_assert_uint_eq(item_type, t);
        ck_assert_int_eq(lattice_region_remove(r, link), LATTICE_OK);
    }
    lattice_region_destroy(r);
}
END_TEST

static void setup(void) { rcu_register_thread(); }
static void teardown(void) { rcu_unregister_thread(); }

int main(void)
{
    Suite *s = suite_create("storage_types");
    TCase *tc = tcase_create("types");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, every_tag_round_trips_through_put_and_updates);
    tcase_add_test(tc, a_tag_above_the_maximum_is_refused);
    tcase_add_test(tc, batches_cursors_and_get_all_carry_the_tag);
    tcase_add_test(tc, the_change_hook_hears_the_tag);
    tcase_add_test(tc, the_row_codec_keeps_strings_as_they_were);
    suite_add_tcase(s, tc);
    return lt_run_suite(s);
}
