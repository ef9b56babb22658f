/* Messages, batcher and applier: round trips, bad bytes, byte bounds,
 * exactly-once delivery, version rule under racing writes, stale batches. */
#include "rebalance.pb-c.h"
#include "rebalance_tests.h"
#include "rebalance_view.h"

static const lattice_rebalance_ids IDS = {7, 1, 42, 1};

static lattice_rebalance_demand demand_of(uint32_t *parts, size_t n)
{
    lattice_rebalance_demand d = {.ids = IDS, .partitions = parts, .partition_count = n,
                                  .ack = 5, .resume = true, .window = 3};
    strcpy(d.cache, "orders");
    return d;
}

START_TEST(demand_round_trip)
{
    uint32_t parts[] = {3, 9, 1023};
    lattice_rebalance_demand d = demand_of(parts, 3), got;
    void *buf;
    size_t len;
    ck_assert_int_eq(lattice_rebalance_demand_encode(&d, &buf, &len), LATTICE_OK);
    ck_assert_int_eq(lattice_rebalance_demand_decode(buf, len, 0, &got), LATTICE_OK);
    ck_assert_str_eq(got.cache, "orders");
    ck_assert_uint_eq(got.partition_count, 3);
    ck_assert_uint_eq(got.partitions[2], 1023);
    ck_assert_uint_eq(got.ids.topology_major, 7);
    ck_assert_uint_eq(got.ids.topology_minor, 1);
    ck_assert_uint_eq(got.ids.rebalance_id, 42);
    ck_assert_uint_eq(got.ids.session, 1);
    ck_assert_uint_eq(got.ack, 5);
    ck_assert(got.resume);
    ck_assert_uint_eq(got.window, 3);
    lattice_rebalance_demand_clear(&got);
    /* Every truncation is rejected or decodes to a prefix; cutting into the
     * last field is always rejected. */
    for (size_t cut = 0; cut < len; cut++) {
        lattice_status st = lattice_rebalance_demand_decode(buf, cut, 0, &got);
        ck_assert(st == LATTICE_OK || st == LATTICE_ERR_PROTO);
        if (st == LATTICE_OK) lattice_rebalance_demand_clear(&got);
    }
    ck_assert_int_eq(lattice_rebalance_demand_decode(buf, len - 1, 0, &got), LATTICE_ERR_PROTO);
    ck_assert_int_eq(lattice_rebalance_demand_decode(buf, len, len - 1, &got),
                     LATTICE_ERR_TOO_LARGE);
    /* An unknown field (number 99, varint) appended: rejected. */
    uint8_t *ext = malloc(len + 3);
    memcpy(ext, buf, len);
    ext[len] = 0x98, ext[len + 1] = 0x06, ext[len + 2] = 0x01;
    ck_assert_int_eq(lattice_rebalance_demand_decode(ext, len + 3, 0, &got), LATTICE_ERR_PROTO);
    free(ext);
    lt_free(buf);
}
END_TEST

START_TEST(demand_bad_values_rejected)
{
    uint32_t parts[] = {1};
    lattice_rebalance_demand d = demand_of(parts, 1), got;
    void *buf;
    size_t len;
    strcpy(d.cache, "bad name");
    ck_assert_int_eq(lattice_rebalance_demand_encode(&d, &buf, &len), LATTICE_ERR_INVAL);
    d = demand_of(parts, 0);
    ck_assert_int_eq(lattice_rebalance_demand_encode(&d, &buf, &len), LATTICE_ERR_INVAL);
    uint32_t big[] = {LATTICE_PARTITION_MAX};
    d = demand_of(big, 1);
    ck_assert_int_eq(lattice_rebalance_demand_encode(&d, &buf, &len), LATTICE_ERR_INVAL);
    /* Hand-made bytes: format 2; no partitions; partition 16384; bad name;
     * an overlong field-0 tag (protobuf-c 1.4 keeps it as an
     * unknown field); garbage. */
    static const uint8_t fmt2[] = {0x08, 0x02, 0x12, 0x01, 'c', 0x3a, 0x01, 0x01};
    static const uint8_t noparts[] = {0x08, 0x01, 0x12, 0x01, 'c'};
    static const uint8_t bigpart[] = {0x08, 0x01, 0x12, 0x01, 'c', 0x3a, 0x03, 0x80, 0x80, 0x01};
    static const uint8_t badname[] = {0x08, 0x01, 0x12, 0x02, 'c', ' ', 0x3a, 0x01, 0x01};
    static const uint8_t tag0[] = {0x0a, 0x00, 0x80, 0x00, 0x00};
    static const uint8_t ok[] = {0x08, 0x01, 0x12, 0x01, 'c', 0x3a, 0x01, 0x01};
    ck_assert_int_eq(lattice_rebalance_demand_decode(fmt2, sizeof fmt2, 0, &got), LATTICE_ERR_PROTO);
    ck_assert_int_eq(lattice_rebalance_demand_decode(noparts, sizeof noparts, 0, &got),
                     LATTICE_ERR_PROTO);
    ck_assert_int_eq(lattice_rebalance_demand_decode(bigpart, sizeof bigpart, 0, &got),
                     LATTICE_ERR_PROTO);
    ck_assert_int_eq(lattice_rebalance_demand_decode(badname, sizeof badname, 0, &got),
                     LATTICE_ERR_PROTO);
    ck_assert_int_eq(lattice_rebalance_demand_decode(tag0, sizeof tag0, 0, &got), LATTICE_ERR_PROTO);
    ck_assert_int_eq(lattice_rebalance_demand_decode(ok, sizeof ok, 0, &got), LATTICE_OK);
    ck_assert_uint_eq(got.partitions[0], 1);
    lattice_rebalance_demand_clear(&got);
    ck_assert_int_eq(lattice_rebalance_demand_decode(NULL, 0, 0, &got), LATTICE_ERR_PROTO);
    uint64_t seed = 1;
    uint8_t junk[64];
    for (int round = 0; round < 2000; round++) {
        for (size_t i = 0; i < sizeof junk; i++) junk[i] = (uint8_t)(seed = t_mix64(seed + i));
        size_t n = seed % sizeof junk;
        lattice_status st = lattice_rebalance_demand_decode(junk, n, 0, &got);
        ck_assert(st == LATTICE_OK || st == LATTICE_ERR_PROTO);
        if (st == LATTICE_OK) lattice_rebalance_demand_clear(&got);
    }
}
END_TEST

/* One supply message from a store partition with n entries of vlen bytes. */
static void *one_supply(struct t_env *e, uint32_t part, size_t *len)
{
    lattice_rebalance_batcher *b;
    ck_assert_int_eq(lattice_rebalance_batcher_create(e->store, "orders", &IDS, part, 1 << 20, &b),
                     LATTICE_OK);
    void *buf;
    bool last;
    ck_assert_int_eq(lattice_rebalance_batcher_next(b, 1, 77, &buf, len, &last, NULL), LATTICE_OK);
    ck_assert(last);
    lattice_rebalance_batcher_free(b);
    return buf;
}

START_TEST(supply_bad_bytes_rejected)
{
    rcu_register_thread();
    struct t_env e;
    t_env_open(&e, 4, 16);
    for (uint64_t i = 0; i < 5; i++) t_put(e.store, 2, i, 30, 10 + i, 0);
    size_t len;
    uint8_t *buf = one_supply(&e, 2, &len);
    lattice_rebalance_supply *s;
    ck_assert_int_eq(lattice_rebalance_supply_decode(buf, len, 0, &s), LATTICE_OK);
    lattice_rebalance_supply_info in;
    lattice_rebalance_supply_info_of(s, &in);
    ck_assert_uint_eq(in.entries, 5);
    ck_assert(in.last);
    ck_assert_uint_eq(in.update_counter, 77);
    ck_assert_uint_eq(in.payload_bytes, 5 * 2 + 5 * 30);
    lattice_rebalance_supply_free(s);
    for (size_t cut = 0; cut < len; cut++) {
        lattice_status st = lattice_rebalance_supply_decode(buf, cut, 0, &s);
        ck_assert(st == LATTICE_OK || st == LATTICE_ERR_PROTO);
        if (st == LATTICE_OK) lattice_rebalance_supply_free(s);
    }
    ck_assert_int_eq(lattice_rebalance_supply_decode(buf, len - 1, 0, &s), LATTICE_ERR_PROTO);
    ck_assert_int_eq(lattice_rebalance_supply_decode(buf, len, 100, &s), LATTICE_ERR_TOO_LARGE);
    /* Flip every byte in turn: never a crash, never a leak (ASan build). */
    for (size_t i = 0; i < len; i++) {
        buf[i] ^= 0x5a;
        lattice_status st = lattice_rebalance_supply_decode(buf, len, 0, &s);
        ck_assert(st == LATTICE_OK || st == LATTICE_ERR_PROTO);
        if (st == LATTICE_OK) lattice_rebalance_supply_free(s);
        buf[i] ^= 0x5a;
    }
    lt_free(buf);
    /* Hand-made: an entry with an unknown field (6; 5 is removed); an entry with an empty key;
     * batch 0; a status out of range. */
    static const uint8_t unk_entry[] = {0x08, 0x01, 0x12, 0x01, 'c', 0x40, 0x01,
                                        0x4a, 0x05, 0x0a, 0x01, 'k', 0x30, 0x01};
    static const uint8_t empty_key[] = {0x08, 0x01, 0x12, 0x01, 'c', 0x40, 0x01,
                                        0x4a, 0x02, 0x12, 0x00};
    static const uint8_t batch0[] = {0x08, 0x01, 0x12, 0x01, 'c'};
    static const uint8_t bad_status[] = {0x08, 0x01, 0x12, 0x01, 'c', 0x40, 0x01, 0x60, 0x7f};
    static const uint8_t ok[] = {0x08, 0x01, 0x12, 0x01, 'c', 0x40, 0x01,
                                 0x4a, 0x03, 0x0a, 0x01, 'k'};
    ck_assert_int_eq(lattice_rebalance_supply_decode(unk_entry, sizeof unk_entry, 0, &s),
                     LATTICE_ERR_PROTO);
    ck_assert_int_eq(lattice_rebalance_supply_decode(empty_key, sizeof empty_key, 0, &s),
                     LATTICE_ERR_PROTO);
    ck_assert_int_eq(lattice_rebalance_supply_decode(batch0, sizeof batch0, 0, &s),
                     LATTICE_ERR_PROTO);
    ck_assert_int_eq(lattice_rebalance_supply_decode(bad_status, sizeof bad_status, 0, &s),
                     LATTICE_ERR_PROTO);
    ck_assert_int_eq(lattice_rebalance_supply_decode(ok, sizeof ok, 0, &s), LATTICE_OK);
    lattice_rebalance_supply_free(s);
    t_env_close(&e);
    rcu_unregister_thread();
}
END_TEST

/* Whatever the hand-written decoder accepts, protobuf-c's unpacker accepts
 * too and reads the same fields (the decoder is stricter, never looser). */
static void same_as_protobuf_c(const uint8_t *buf, size_t len, int *accepted)
{
    lattice_rebalance_supply *s;
    lattice_status st = lattice_rebalance_supply_decode(buf, len, 0, &s);
    ck_assert(st == LATTICE_OK || st == LATTICE_ERR_PROTO);
    if (st != LATTICE_OK) return;
    (*accepted)++;
    Latreb__Supply *m = latreb__supply__unpack(NULL, len, buf);
    ck_assert_ptr_nonnull(m);
    lattice_rebalance_supply_info in;
    lattice_rebalance_supply_info_of(s, &in);
    ck_assert_uint_eq(m->format, LATTICE_REBALANCE_FORMAT);
    ck_assert_str_eq(m->cache, in.cache);
    ck_assert_uint_eq(m->partition, in.partition);
    ck_assert_uint_eq(m->batch, in.batch);
    ck_assert_uint_eq(m->session, in.ids.session);
    ck_assert_uint_eq(m->rebalance_id, in.ids.rebalance_id);
    ck_assert_uint_eq(m->topology_major, in.ids.topology_major);
    ck_assert_uint_eq(m->topology_minor, in.ids.topology_minor);
    ck_assert(m->last == in.last);
    ck_assert_uint_eq(m->update_counter, in.update_counter);
    ck_assert_uint_eq(m->status, (uint32_t)in.status);
    ck_assert_uint_eq(m->n_entries, in.entries);
    for (size_t i = 0; i < in.entries; i++) {
        lattice_store_entry e;
        lattice_rebalance_supply_entry(s, i, &e);
        ck_assert_uint_eq(m->entries[i]->key.len, e.key_len);
        ck_assert_mem_eq(m->entries[i]->key.data, e.key, e.key_len);
        ck_assert_uint_eq(m->entries[i]->value.len, e.value_len);
        if (e.value_len) ck_assert_mem_eq(m->entries[i]->value.data, e.value, e.value_len);
        ck_assert_uint_eq(m->entries[i]->expire_ms, e.expire_ms);
        ck_assert_uint_eq(m->entries[i]->version, e.version);
    }
    latreb__supply__free_unpacked(m, NULL);
    lattice_rebalance_supply_free(s);
}

START_TEST(supply_decoder_agrees_with_protobuf_c)
{
    rcu_register_thread();
    struct t_env e;
    t_env_open(&e, 2, 16);
    for (uint64_t i = 0; i < 40; i++) t_put(e.store, 1, i, i * 7 % 300, i * 1000003, i % 2 ? 0 : i << 40);
    size_t len;
    uint8_t *orig = one_supply(&e, 1, &len);
    uint8_t *buf = malloc(len + 16);
    int accepted = 0;
    same_as_protobuf_c(orig, len, &accepted);
    ck_assert_int_eq(accepted, 1);
    uint64_t seed = 77;
    for (int round = 0; round < 20000; round++) {
        memcpy(buf, orig, len);
        size_t n = len;
        int edits = 1 + (int)((seed = t_mix64(seed)) % 3);
        for (int k = 0; k < edits; k++) {
            seed = t_mix64(seed);
            size_t at = (size_t)(seed >> 8) % n;
            switch (seed % 4) {
            case 0: buf[at] ^= (uint8_t)(1u << ((seed >> 40) % 8)); break;
            case 1: buf[at] = (uint8_t)(seed >> 32); break;
            case 2: n = at; break;                   /* truncate */
            default: buf[at] = 0x80 | buf[at]; break; /* make a varint longer */
            }
            if (n == 0) break;
        }
        same_as_protobuf_c(buf, n, &accepted);
    }
    ck_assert_int_gt(accepted, 1);
    free(buf);
    lt_free(orig);
    t_env_close(&e);
    rcu_unregister_thread();
}
END_TEST

START_TEST(out_of_memory_is_clean)
{
    /* Every allocation of decode, batcher and applier failing in turn:
     * NOMEM (or success), never a crash, and a retry after it works. */
    rcu_register_thread();
    struct t_env src, dst;
    t_env_open(&src, 2, 16);
    t_env_open(&dst, 2, 16);
    for (uint64_t i = 0; i < 300; i++) t_put(src.store, 0, i, 50, 1 + i, 0);
    size_t len;
    uint8_t *buf = one_supply(&src, 0, &len);
    for (uint64_t nth = 1; nth < 8; nth++) {
        lattice_rebalance_supply *s = NULL;
        lattice_alloc_fail_nth(nth);
        lattice_status st = lattice_rebalance_supply_decode(buf, len, 0, &s);
        lattice_alloc_fail_nth(0);
        ck_assert(st == LATTICE_OK || st == LATTICE_ERR_NOMEM);
        if (st == LATTICE_OK) lattice_rebalance_supply_free(s);
        lattice_rebalance_applier *a = NULL;
        lattice_alloc_fail_nth(nth);
        st = lattice_rebalance_applier_create(dst.store, "orders", &IDS, NULL, &a);
        lattice_alloc_fail_nth(0);
        ck_assert(st == LATTICE_OK || st == LATTICE_ERR_NOMEM);
        if (st != LATTICE_OK) continue;
        ck_assert_int_eq(lattice_rebalance_applier_begin(a, 0, true), LATTICE_OK);
        ck_assert_int_eq(lattice_rebalance_supply_decode(buf, len, 0, &s), LATTICE_OK);
        lattice_rebalance_apply_result r;
        lattice_alloc_fail_nth(nth);
        st = lattice_rebalance_applier_apply(a, s, &r);
        lattice_alloc_fail_nth(0);
        ck_assert(st == LATTICE_OK || st == LATTICE_ERR_NOMEM || st == LATTICE_ERR_REGION_FULL);
        if (st != LATTICE_OK) ck_assert_int_eq(lattice_rebalance_applier_apply(a, s, &r), LATTICE_OK);
        ck_assert_uint_eq(t_digest(dst.store, 0), t_digest(src.store, 0));
        lattice_rebalance_supply_free(s);
        lattice_rebalance_applier_free(a);
        lattice_rebalance_batcher *b = NULL;
        lattice_alloc_fail_nth(nth);
        st = lattice_rebalance_batcher_create(src.store, "orders", &IDS, 0, 4096, &b);
        if (st == LATTICE_OK) {
            void *out;
            size_t ol;
            bool last;
            st = lattice_rebalance_batcher_next(b, 1, 1, &out, &ol, &last, NULL);
            if (st == LATTICE_OK) lt_free(out);
        }
        lattice_alloc_fail_nth(0);
        ck_assert(st == LATTICE_OK || st == LATTICE_ERR_NOMEM);
        if (b && st == LATTICE_ERR_NOMEM) {
            /* Either retryable (nothing consumed) or ended; never a silent gap. */
            void *out;
            size_t ol;
            bool last;
            lattice_status again = lattice_rebalance_batcher_next(b, 1, 1, &out, &ol, &last, NULL);
            ck_assert(again == LATTICE_OK || again == LATTICE_ERR_INVAL);
            if (again == LATTICE_OK) lt_free(out);
        }
        lattice_rebalance_batcher_free(b);
    }
    lt_free(buf);
    t_env_close(&src);
    t_env_close(&dst);
    rcu_unregister_thread();
}
END_TEST

START_TEST(batcher_allocation_failure_never_loses_an_entry)
{
    /* One allocation fails somewhere in a drain: the batcher either reports
     * NOMEM and the same call succeeds when retried, or it ends (INVAL) and
     * the partition starts over.  The drain that completes has every entry
     * exactly once. */
    rcu_register_thread();
    struct t_env e;
    t_env_open(&e, 2, 32);
    enum { N = 1500 };
    for (uint64_t i = 0; i < N; i++) t_put(e.store, 0, i, 10 + i % 400, 1, 0);
    int ended = 0, retried = 0;
    for (uint64_t nth = 1; nth < 60; nth++) {
        static int seen[N];
        int armed = 1;
    restart:
        memset(seen, 0, sizeof seen);
        lattice_rebalance_batcher *b;
        ck_assert_int_eq(lattice_rebalance_batcher_create(e.store, "orders", &IDS, 0, 4096, &b),
                         LATTICE_OK);
        if (armed) lattice_alloc_fail_nth(nth);
        armed = 0;
        bool last = false;
        for (uint64_t batch = 1; !last;) {
            void *buf;
            size_t len;
            lattice_status st = lattice_rebalance_batcher_next(b, batch, 1, &buf, &len, &last, NULL);
            if (st == LATTICE_ERR_NOMEM) {
                retried++;
                continue;
            }
            if (st == LATTICE_ERR_INVAL) {
                ended++;
                lattice_rebalance_batcher_free(b);
                goto restart;
            }
            ck_assert_int_eq(st, LATTICE_OK);
            lattice_rebalance_supply *s;
            while ((st = lattice_rebalance_supply_decode(buf, len, 0, &s)) == LATTICE_ERR_NOMEM) {
            }
            ck_assert_int_eq(st, LATTICE_OK);
            lattice_rebalance_supply_info in;
            lattice_rebalance_supply_info_of(s, &in);
            for (size_t i = 0; i < in.entries; i++) {
                lattice_store_entry en;
                lattice_rebalance_supply_entry(s, i, &en);
                seen[t_key_id(&en)]++;
            }
            lattice_rebalance_supply_free(s);
            lt_free(buf);
            batch++;
        }
        lattice_alloc_fail_nth(0);
        for (uint64_t i = 0; i < N; i++) ck_assert_int_eq(seen[i], 1);
        lattice_rebalance_batcher_free(b);
    }
    /* Both outcomes happened, so both were checked. */
    ck_assert_int_gt(retried, 0);
    ck_assert_int_gt(ended, 0);
    t_env_close(&e);
    rcu_unregister_thread();
}
END_TEST

/* Drains a batcher; checks sizes; marks seen[id]. */
static size_t drain(lattice_rebalance_batcher *b, uint64_t limit, uint32_t part, int *seen,
                    size_t nseen, size_t *oversized)
{
    size_t batches = 0;
    bool last = false;
    for (uint64_t batch = 1; !last; batch++) {
        void *buf;
        size_t len, n;
        ck_assert_int_eq(lattice_rebalance_batcher_next(b, batch, 1000 + batch, &buf, &len, &last, &n),
                         LATTICE_OK);
        lattice_rebalance_supply *s;
        ck_assert_int_eq(lattice_rebalance_supply_decode(buf, len, 0, &s), LATTICE_OK);
        lattice_rebalance_supply_info in;
        lattice_rebalance_supply_info_of(s, &in);
        ck_assert_uint_eq(in.entries, n);
        ck_assert_uint_eq(in.batch, batch);
        ck_assert_uint_eq(in.partition, part);
        ck_assert(in.last == last);
        if (last) ck_assert_uint_eq(in.update_counter, 1000 + batch);
        if (len > limit) {
            ck_assert_uint_eq(n, 1); /* only a single too-large entry may exceed */
            (*oversized)++;
        }
        for (size_t i = 0; i < n; i++) {
            lattice_store_entry e;
            lattice_rebalance_supply_entry(s, i, &e);
            unsigned long id = t_key_id(&e);
            ck_assert_uint_lt(id, nseen);
            seen[id]++;
        }
        lattice_rebalance_supply_free(s);
        lt_free(buf);
        batches++;
    }
    bool l;
    void *buf;
    size_t len;
    ck_assert_int_eq(lattice_rebalance_batcher_next(b, 99, 0, &buf, &len, &l, NULL),
                     LATTICE_ERR_INVAL);
    return batches;
}

START_TEST(batcher_every_entry_once_within_limit)
{
    rcu_register_thread();
    struct t_env e;
    t_env_open(&e, 4, 64);
    enum { N = 3000 };
    uint64_t seed = 9;
    for (uint64_t i = 0; i < N; i++) {
        seed = t_mix64(seed + i);
        t_put(e.store, 1, i, (size_t)(seed % 700), i + 1, i % 3 ? 0 : 4102444800000ull);
    }
    t_put(e.store, 0, N + 1, 10, 1, 0); /* other partitions are not sent */
    const uint64_t limits[] = {LATTICE_REBALANCE_MIN_BATCH, 4096, 65536, 512 * 1024};
    for (size_t li = 0; li < sizeof limits / sizeof *limits; li++) {
        int *seen = calloc(N + 2, sizeof *seen);
        lattice_rebalance_batcher *b;
        ck_assert_int_eq(lattice_rebalance_batcher_create(e.store, "orders", &IDS, 1, limits[li], &b),
                         LATTICE_OK);
        size_t over = 0;
        size_t batches = drain(b, limits[li], 1, seen, N + 2, &over);
        for (uint64_t i = 0; i < N; i++) ck_assert_int_eq(seen[i], 1);
        ck_assert_int_eq(seen[N + 1], 0);
        if (limits[li] >= 4096) ck_assert_uint_eq(over, 0);
        if (limits[li] == 4096) ck_assert_uint_gt(batches, 100);
        lattice_rebalance_batcher_free(b);
        free(seen);
    }
    t_env_close(&e);
    rcu_unregister_thread();
}
END_TEST

START_TEST(batcher_single_large_entry_sent_alone)
{
    rcu_register_thread();
    struct t_env e;
    t_env_open(&e, 2, 16);
    for (uint64_t i = 0; i < 40; i++) t_put(e.store, 0, i, i == 17 ? 10000 : 200, 1, 0);
    int seen[40] = {0};
    lattice_rebalance_batcher *b;
    ck_assert_int_eq(lattice_rebalance_batcher_create(e.store, "orders", &IDS, 0, 4096, &b),
                     LATTICE_OK);
    size_t over = 0;
    drain(b, 4096, 0, seen, 40, &over);
    ck_assert_uint_eq(over, 1);
    for (int i = 0; i < 40; i++) ck_assert_int_eq(seen[i], 1);
    lattice_rebalance_batcher_free(b);
    /* An empty partition: one empty last batch. */
    ck_assert_int_eq(lattice_rebalance_batcher_create(e.store, "orders", &IDS, 1, 4096, &b),
                     LATTICE_OK);
    void *buf;
    size_t len, n;
    bool last;
    ck_assert_int_eq(lattice_rebalance_batcher_next(b, 1, 5, &buf, &len, &last, &n), LATTICE_OK);
    ck_assert(last);
    ck_assert_uint_eq(n, 0);
    lt_free(buf);
    lattice_rebalance_batcher_free(b);
    /* Bad arguments. */
    ck_assert_int_eq(lattice_rebalance_batcher_create(e.store, "orders", &IDS, 2, 4096, &b),
                     LATTICE_ERR_INVAL);
    ck_assert_int_eq(lattice_rebalance_batcher_create(e.store, "orders", &IDS, 0, 100, &b),
                     LATTICE_ERR_INVAL);
    ck_assert_int_eq(lattice_rebalance_batcher_create(e.store, "no way", &IDS, 0, 4096, &b),
                     LATTICE_ERR_INVAL);
    t_env_close(&e);
    rcu_unregister_thread();
}
END_TEST

START_TEST(batcher_resumes_across_writes)
{
    /* Between batches the partition changes (new keys, updates, removes of
     * keys not yet sent); entries present throughout arrive exactly once and
     * nothing arrives twice. */
    rcu_register_thread();
    struct t_env e;
    t_env_open(&e, 2, 64);
    enum { N = 2000, EXTRA = 1000 };
    for (uint64_t i = 0; i < N; i++) t_put(e.store, 0, i, 100, 1, 0);
    int *seen = calloc(N + EXTRA, sizeof *seen);
    lattice_rebalance_batcher *b;
    ck_assert_int_eq(lattice_rebalance_batcher_create(e.store, "orders", &IDS, 0, 4096, &b),
                     LATTICE_OK);
    bool last = false;
    uint64_t batch = 1, added = 0;
    while (!last) {
        void *buf;
        size_t len;
        ck_assert_int_eq(lattice_rebalance_batcher_next(b, batch++, 0, &buf, &len, &last, NULL),
                         LATTICE_OK);
        ck_assert_uint_le(len, 4096);
        lattice_rebalance_supply *s;
        ck_assert_int_eq(lattice_rebalance_supply_decode(buf, len, 0, &s), LATTICE_OK);
        lattice_rebalance_supply_info in;
        lattice_rebalance_supply_info_of(s, &in);
        for (size_t i = 0; i < in.entries; i++) {
            lattice_store_entry en;
            lattice_rebalance_supply_entry(s, i, &en);
            seen[t_key_id(&en)]++;
        }
        lattice_rebalance_supply_free(s);
        lt_free(buf);
        for (int k = 0; k < 10 && added < EXTRA; k++, added++)
            t_put(e.store, 0, N + added, 100, 2, 0);
        t_put(e.store, 0, batch % N, 120, 3, 0); /* update in place or moved */
    }
    for (uint64_t i = 0; i < N; i++) ck_assert_int_eq(seen[i], 1);
    for (uint64_t i = N; i < N + EXTRA; i++) ck_assert_int_le(seen[i], 1);
    lattice_rebalance_batcher_free(b);
    free(seen);
    t_env_close(&e);
    rcu_unregister_thread();
}
END_TEST

/* Runs a whole partition from src to dst by hand; calls race(k) after batch k. */
static void move_partition(struct t_env *src, struct t_env *dst, uint32_t part, uint64_t limit,
                           void (*race)(struct t_env *, uint64_t), lattice_rebalance_progress *pr)
{
    lattice_rebalance_applier *a;
    ck_assert_int_eq(lattice_rebalance_applier_create(dst->store, "orders", &IDS, pr, &a),
                     LATTICE_OK);
    ck_assert_int_eq(lattice_rebalance_applier_begin(a, part, true), LATTICE_OK);
    ck_assert_uint_eq(rv_applier_pending(a), 1);
    lattice_rebalance_batcher *b;
    ck_assert_int_eq(lattice_rebalance_batcher_create(src->store, "orders", &IDS, part, limit, &b),
                     LATTICE_OK);
    bool last = false;
    for (uint64_t batch = 1; !last; batch++) {
        void *buf;
        size_t len;
        ck_assert_int_eq(lattice_rebalance_batcher_next(b, batch, 555, &buf, &len, &last, NULL),
                         LATTICE_OK);
        lattice_rebalance_supply *s;
        ck_assert_int_eq(lattice_rebalance_supply_decode(buf, len, limit + 65536, &s), LATTICE_OK);
        lattice_rebalance_apply_result r;
        ck_assert_int_eq(lattice_rebalance_applier_apply(a, s, &r), LATTICE_OK);
        ck_assert_int_eq(r.verdict, LATTICE_REBALANCE_APPLIED);
        ck_assert(r.partition_done == last);
        if (last) ck_assert_uint_eq(r.update_counter, 555);
        lattice_rebalance_supply_free(s);
        lt_free(buf);
        if (race) race(dst, batch);
    }
    ck_assert_uint_eq(rv_applier_pending(a), 0);
    lattice_rebalance_batcher_free(b);
    lattice_rebalance_applier_free(a);
}

START_TEST(applier_full_load_equals_supplier)
{
    rcu_register_thread();
    struct t_env src, dst;
    t_env_open(&src, 8, 64);
    t_env_open(&dst, 8, 64);
    enum { N = 4000 };
    uint64_t seed = 3;
    for (uint64_t i = 0; i < N; i++) {
        seed = t_mix64(seed + i);
        t_put(src.store, 5, i, (size_t)(seed % 3000), 1 + seed % 1000, i % 5 ? 0 : 4102444800000ull);
    }
    /* Junk in the demander's copy that the supplier never had: the full load
     * clears it. */
    for (uint64_t i = N; i < N + 50; i++) t_put(dst.store, 5, i, 10, 999999, 0);
    t_put(dst.store, 4, 1, 10, 1, 0); /* another partition: untouched */
    lattice_rebalance_progress pr;
    lattice_rebalance_progress_init(&pr, "orders", 1, 0);
    move_partition(&src, &dst, 5, 64 * 1024, NULL, &pr);
    ck_assert_uint_eq(lattice_store_count(dst.store, 5), N);
    ck_assert_uint_eq(t_digest(dst.store, 5), t_digest(src.store, 5));
    ck_assert_uint_eq(lattice_store_count(dst.store, 4), 1);
    ck_assert_uint_eq(pr.entries_received, N);
    ck_assert_uint_eq(pr.partitions_done, 1);
    ck_assert_uint_eq(pr.partitions_moving, 0);
    t_env_close(&src);
    t_env_close(&dst);
    rcu_unregister_thread();
}
END_TEST

/* Writes that reach the MOVING copy during the load, with versions above
 * anything the supplier has (the primary's counter moved on). */
static uint8_t raced[2000];

static void racing_writes(struct t_env *dst, uint64_t batch)
{
    for (uint64_t k = 0; k < 20; k++) {
        uint64_t id = (batch * 37 + k * 101) % 2000;
        t_put(dst->store, 3, id, 64, 1000000 + id, 0);
        raced[id] = 1;
    }
}

START_TEST(applier_newer_writes_survive_racing_batches)
{
    rcu_register_thread();
    struct t_env src, dst;
    t_env_open(&src, 4, 64);
    t_env_open(&dst, 4, 64);
    for (uint64_t i = 0; i < 2000; i++) t_put(src.store, 3, i, 200, 1 + i % 500, 0);
    move_partition(&src, &dst, 3, 4096, racing_writes, NULL);
    ck_assert_uint_eq(lattice_store_count(dst.store, 3), 2000);
    int newer = 0;
    for (uint64_t i = 0; i < 2000; i++) {
        char key[32];
        int kl = snprintf(key, sizeof key, "k%llu", (unsigned long long)i);
        uint8_t v[256], want[256];
        lattice_store_meta m;
        ck_assert_int_eq(lattice_store_get(dst.store, 3, key, (size_t)kl, v, sizeof v, &m),
                         LATTICE_OK);
        if (raced[i]) {
            ck_assert_uint_eq(m.version, 1000000 + i);
            /* The racing write, never overwritten by the older supplied copy. */
            ck_assert_uint_eq(m.value_len, 64);
            t_fill(want, 64, i, 1000000 + i);
            ck_assert_mem_eq(v, want, 64);
            newer++;
        } else {
            ck_assert_uint_eq(m.version, 1 + i % 500);
            ck_assert_uint_eq(m.value_len, 200);
        }
    }
    ck_assert_int_gt(newer, 100);
    t_env_close(&src);
    t_env_close(&dst);
    rcu_unregister_thread();
}
END_TEST

START_TEST(applier_removes_during_load_stay_removed)
{
    /* The node removes keys from the MOVING copy while batches arrive (and
     * tells the applier); supplied older copies must not bring them back.
     * A key removed and then written again keeps the newer write. */
    rcu_register_thread();
    struct t_env src, dst;
    t_env_open(&src, 2, 64);
    t_env_open(&dst, 2, 64);
    enum { N = 1500 };
    for (uint64_t i = 0; i < N; i++) t_put(src.store, 1, i, 100, 10 + i % 7, 0);
    lattice_rebalance_applier *a;
    ck_assert_int_eq(lattice_rebalance_applier_create(dst.store, "orders", &IDS, NULL, &a),
                     LATTICE_OK);
    ck_assert_int_eq(lattice_rebalance_applier_begin(a, 1, true), LATTICE_OK);
    lattice_rebalance_batcher *b;
    ck_assert_int_eq(lattice_rebalance_batcher_create(src.store, "orders", &IDS, 1, 2048, &b),
                     LATTICE_OK);
    static uint8_t removed[N], rewritten[N];
    bool last = false;
    for (uint64_t batch = 1; !last; batch++) {
        void *buf;
        size_t len;
        ck_assert_int_eq(lattice_rebalance_batcher_next(b, batch, 1, &buf, &len, &last, NULL),
                         LATTICE_OK);
        lattice_rebalance_supply *s;
        ck_assert_int_eq(lattice_rebalance_supply_decode(buf, len, 0, &s), LATTICE_OK);
        lattice_rebalance_apply_result r;
        ck_assert_int_eq(lattice_rebalance_applier_apply(a, s, &r), LATTICE_OK);
        lattice_rebalance_supply_free(s);
        lt_free(buf);
        for (uint64_t k = 0; k < 15; k++) {
            uint64_t id = (batch * 53 + k * 97) % N;
            char key[32];
            int kl = snprintf(key, sizeof key, "k%llu", (unsigned long long)id);
            lattice_store_remove(dst.store, 1, key, (size_t)kl); /* may not be there yet */
            ck_assert_int_eq(lattice_rebalance_applier_note_remove(a, 1, key, (size_t)kl, 500000 + batch),
                             LATTICE_OK);
            removed[id] = 1;
            rewritten[id] = 0;
            if (k % 5 == 0) {
                t_put(dst.store, 1, id, 30, 900000 + batch, 0);
                rewritten[id] = 1;
            }
        }
    }
    int nrem = 0;
    for (uint64_t i = 0; i < N; i++) {
        char key[32];
        int kl = snprintf(key, sizeof key, "k%llu", (unsigned long long)i);
        uint8_t v[128];
        lattice_store_meta m;
        int rc = lattice_store_get(dst.store, 1, key, (size_t)kl, v, sizeof v, &m);
        if (removed[i] && !rewritten[i]) {
            ck_assert_msg(rc == LATTICE_ERR_NOT_FOUND, "removed key k%llu came back",
                          (unsigned long long)i);
            nrem++;
        } else if (rewritten[i]) {
            ck_assert_int_eq(rc, LATTICE_OK);
            ck_assert_uint_eq(m.value_len, 30);
        } else {
            ck_assert_int_eq(rc, LATTICE_OK);
            ck_assert_uint_eq(m.version, 10 + i % 7);
        }
    }
    ck_assert_int_gt(nrem, 200);
    /* After the partition completed, removes are not remembered any more. */
    ck_assert_int_eq(lattice_rebalance_applier_note_remove(a, 1, "k1", 2, 1), LATTICE_OK);
    ck_assert_int_eq(lattice_rebalance_applier_note_remove(a, 2, "k1", 2, 1), LATTICE_ERR_INVAL);
    ck_assert_int_eq(lattice_rebalance_applier_note_remove(a, 1, "", 0, 1), LATTICE_ERR_INVAL);
    lattice_rebalance_batcher_free(b);
    lattice_rebalance_applier_free(a);
    t_env_close(&src);
    t_env_close(&dst);
    rcu_unregister_thread();
}
END_TEST

START_TEST(applier_ignores_stale_and_unexpected)
{
    rcu_register_thread();
    struct t_env src, dst;
    t_env_open(&src, 4, 16);
    t_env_open(&dst, 4, 16);
    for (uint64_t i = 0; i < 10; i++) t_put(src.store, 1, i, 20, 5, 0);
    const lattice_rebalance_ids stale[] = {
        {6, 1, 42, 1}, {7, 0, 42, 1}, {7, 1, 41, 1}, {7, 1, 42, 0}};
    lattice_rebalance_applier *a;
    ck_assert_int_eq(lattice_rebalance_applier_create(dst.store, "orders", &IDS, NULL, &a),
                     LATTICE_OK);
    ck_assert_int_eq(lattice_rebalance_applier_begin(a, 1, true), LATTICE_OK);
    for (size_t k = 0; k < 4; k++) {
        lattice_rebalance_batcher *b;
        ck_assert_int_eq(lattice_rebalance_batcher_create(src.store, "orders", &stale[k], 1, 4096, &b),
                         LATTICE_OK);
        void *buf;
        size_t len;
        bool last;
        ck_assert_int_eq(lattice_rebalance_batcher_next(b, 1, 9, &buf, &len, &last, NULL), LATTICE_OK);
        lattice_rebalance_supply *s;
        ck_assert_int_eq(lattice_rebalance_supply_decode(buf, len, 0, &s), LATTICE_OK);
        lattice_rebalance_apply_result r;
        ck_assert_int_eq(lattice_rebalance_applier_apply(a, s, &r), LATTICE_OK);
        ck_assert_int_eq(r.verdict, LATTICE_REBALANCE_STALE);
        ck_assert_uint_eq(lattice_store_count(dst.store, 1), 0);
        lattice_rebalance_supply_free(s);
        lt_free(buf);
        lattice_rebalance_batcher_free(b);
    }
    ck_assert_uint_eq(rv_applier_pending(a), 1);
    /* A batch for a partition not begun, and one of another cache. */
    size_t len;
    void *buf = one_supply(&src, 2, &len);
    lattice_rebalance_supply *s;
    ck_assert_int_eq(lattice_rebalance_supply_decode(buf, len, 0, &s), LATTICE_OK);
    lattice_rebalance_apply_result r;
    ck_assert_int_eq(lattice_rebalance_applier_apply(a, s, &r), LATTICE_OK);
    ck_assert_int_eq(r.verdict, LATTICE_REBALANCE_UNEXPECTED);
    lattice_rebalance_supply_free(s);
    lt_free(buf);
    /* A refusal. */
    ck_assert_int_eq(lattice_rebalance_supply_encode_refusal("orders", &IDS, 1, 1,
                                                             LATTICE_ERR_NOT_OWNER, &buf, &len),
                     LATTICE_OK);
    ck_assert_int_eq(lattice_rebalance_supply_decode(buf, len, 0, &s), LATTICE_OK);
    ck_assert_int_eq(lattice_rebalance_applier_apply(a, s, &r), LATTICE_OK);
    ck_assert_int_eq(r.verdict, LATTICE_REBALANCE_REFUSED);
    lattice_rebalance_supply_free(s);
    lt_free(buf);
    ck_assert_int_eq(lattice_rebalance_applier_begin(a, 4, true), LATTICE_ERR_INVAL);
    lattice_rebalance_applier_free(a);
    t_env_close(&src);
    t_env_close(&dst);
    rcu_unregister_thread();
}
END_TEST

TCase *rebalance_wire_tcase(void)
{
    TCase *tc = tcase_create("wire");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, demand_round_trip);
    tcase_add_test(tc, demand_bad_values_rejected);
    tcase_add_test(tc, supply_bad_bytes_rejected);
    tcase_add_test(tc, supply_decoder_agrees_with_protobuf_c);
    tcase_add_test(tc, out_of_memory_is_clean);
    tcase_add_test(tc, batcher_allocation_failure_never_loses_an_entry);
    tcase_add_test(tc, batcher_every_entry_once_within_limit);
    tcase_add_test(tc, batcher_single_large_entry_sent_alone);
    tcase_add_test(tc, batcher_resumes_across_writes);
    tcase_add_test(tc, applier_full_load_equals_supplier);
    tcase_add_test(tc, applier_newer_writes_survive_racing_batches);
    tcase_add_test(tc, applier_removes_during_load_stay_removed);
    tcase_add_test(tc, applier_ignores_stale_and_unexpected);
    return tc;
}
