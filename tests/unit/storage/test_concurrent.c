/* Many readers and several writers at once.  Writers store values that are a
 * function of (key, version), with lengths that also follow from the version
 * (some fragmented); readers and cursor walkers check that every value they
 * see is exactly the one for the version it claims: a torn, recycled or
 * half-written row cannot pass. */
#include <pthread.h>
#include <sched.h>

#include "run_suite.h"
#include "helpers.h"
#include "lattice/clock.h"

enum { KEYS = 2048, PARTS = 8, WRITER_OPS = 150000 };

struct shared {
    lattice_store *s;
    lattice_region *r;
    uint64_t version;  /* atomic */
    int writers_left;  /* atomic */
    uint64_t hits, reads, walked, bad; /* atomics */
    uint64_t released;                 /* pages given back to the OS meanwhile */
    int evict;
};

static size_t len_of(uint64_t version)
{
    uint64_t x = mix64(version);
    return x % 23 == 0 ? 3000 + x % 6000 : x % 300;
}

static lattice_store_entry make(struct shared *sh, uint64_t id, char *k, uint8_t *v)
{
    uint64_t ver = __atomic_add_fetch(&sh->version, 1, __ATOMIC_RELAXED);
    size_t len = len_of(ver);
    fill_value(v, len, id, ver);
    int kl = key_of(k, 32, id);
    return (lattice_store_entry){(uint32_t)(id % PARTS), k, (size_t)kl, v, len, 0, ver, 0};
}

static void *writer(void *arg)
{
    struct shared *sh = arg;
    rcu_register_thread();
    uint64_t seed = (uint64_t)(uintptr_t)&seed;
    uint8_t *v = malloc(4 * 9100);
    char k[4][32];
    for (int op = 0; op < WRITER_OPS; op++) {
        seed = mix64(seed + (uint64_t)op);
        uint64_t id = seed % KEYS, x = (seed >> 20) % 100;
        int st;
        if (x < 70) {
            lattice_store_entry e = make(sh, id, k[0], v);
            st = lattice_store_put(sh->s, &e, x < 10 ? LATTICE_STORE_IF_NEWER : 0);
            if (st != LATTICE_OK && st != LATTICE_ERR_EXISTS) __atomic_add_fetch(&sh->bad, 1, __ATOMIC_RELAXED);
        } else if (x < 85) {
            int kl = key_of(k[0], 32, id);
            st = lattice_store_remove(sh->s, (uint32_t)(id % PARTS), k[0], (size_t)kl);
            if (st != LATTICE_OK && st != LATTICE_ERR_NOT_FOUND) __atomic_add_fetch(&sh->bad, 1, __ATOMIC_RELAXED);
        } else {
            lattice_store_entry e[4];
            for (int i = 0; i < 4; i++) {
                uint64_t bid = ((id / PARTS + (uint64_t)i * 17) * PARTS + id % PARTS) % KEYS;
                e[i] = make(sh, bid, k[i], v + i * 9100);
            }
            size_t applied;
            st = lattice_store_insert_batch(sh->s, (uint32_t)(id % PARTS), e, 4, 0, &applied);
            if (st != LATTICE_OK) __atomic_add_fetch(&sh->bad, 1, __ATOMIC_RELAXED);
        }
    }
    free(v);
    __atomic_sub_fetch(&sh->writers_left, 1, __ATOMIC_RELEASE);
    rcu_unregister_thread();
    return NULL;
}

static void *reader(void *arg)
{
    struct shared *sh = arg;
    rcu_register_thread();
    uint8_t *buf = malloc(10000);
    uint64_t seed = (uint64_t)(uintptr_t)&buf, hits = 0, reads = 0, bad = 0;
    while (__atomic_load_n(&sh->writers_left, __ATOMIC_ACQUIRE) > 0) {
        seed = mix64(seed + reads);
        uint64_t id = seed % KEYS;
        char k[32];
        int kl = key_of(k, sizeof k, id);
        lattice_store_meta m;
        int st = lattice_store_get(sh->s, (uint32_t)(id % PARTS), k, (size_t)kl, buf, 10000, &m);
        reads++;
        if (st == LATTICE_OK) {
            hits++;
            if (m.value_len != len_of(m.version) || !value_ok(buf, m.value_len, id, m.version)) bad++;
        } else if (st != LATTICE_ERR_NOT_FOUND) {
            bad++;
        }
    }
    free(buf);
    __atomic_add_fetch(&sh->hits, hits, __ATOMIC_RELAXED);
    __atomic_add_fetch(&sh->reads, reads, __ATOMIC_RELAXED);
    __atomic_add_fetch(&sh->bad, bad, __ATOMIC_RELAXED);
    rcu_unregister_thread();
    return NULL;
}

struct walk {
    struct shared *sh;
    uint8_t seen[KEYS];
    uint32_t part;
    uint64_t bad, items;
};

static int walk_item(void *arg, const lattice_store_item *it)
{
    struct walk *w = arg;
    unsigned long long id;
    w->items++;
    /* A key removed and written again during the walk is a new entry and may
     * be returned again; every value must still be well formed. */
    if (sscanf((const char *)it->key, "key:%8llu", &id) != 1 || id >= KEYS || id % PARTS != w->part ||
        it->value_len != len_of(it->version) ||
        !value_ok(it->value, it->value_len, id, it->version))
        w->bad++;
    else
        w->seen[id]++;
    return 0;
}

static void *walker(void *arg)
{
    struct shared *sh = arg;
    rcu_register_thread();
    struct walk *w = calloc(1, sizeof *w);
    w->sh = sh;
    for (uint32_t round = 0; __atomic_load_n(&sh->writers_left, __ATOMIC_ACQUIRE) > 0; round++) {
        memset(w->seen, 0, sizeof w->seen);
        w->part = round % PARTS;
        lattice_store_cursor *c;
        if (lattice_store_cursor_open(sh->s, w->part, &c) != LATTICE_OK) {
            w->bad++;
            break;
        }
        int done = 0;
        while (!done)
            if (lattice_store_cursor_next(c, 16, 0, walk_item, w, &done) != LATTICE_OK) w->bad++, done = 1;
        lattice_store_cursor_close(c);
    }
    __atomic_add_fetch(&sh->bad, w->bad, __ATOMIC_RELAXED);
    __atomic_add_fetch(&sh->walked, w->items, __ATOMIC_RELAXED);
    free(w);
    rcu_unregister_thread();
    return NULL;
}

/* Gives every empty page's memory back to the OS as soon as it is empty,
 * while writers take them back and readers hold links into them. */
static void *releaser(void *arg)
{
    struct shared *sh = arg;
    while (__atomic_load_n(&sh->writers_left, __ATOMIC_ACQUIRE) > 0) {
        sh->released += lattice_region_release(sh->r, UINT32_MAX, 0);
        sched_yield();
    }
    return NULL;
}

/* Writer threads write new rows through lanes of their own and update or
 * free each other's rows under the rows' lanes; mb picks how many lanes
 * (one per 8 MiB) and writers how many threads share them. */
static void run(int evict, uint64_t mb, int writers, int release)
{
    rcu_register_thread();
    struct shared sh = {0};
    sh.r = new_region(4096, mb, evict ? LATTICE_REGION_EVICT : LATTICE_REGION_REJECT);
    sh.s = new_store(sh.r, PARTS, NULL);
    /* With eviction, a second store on the region fills it first: the
     * writers then evict its entries and their own. */
    lattice_store *filler = evict ? new_store(sh.r, 4, NULL) : NULL;
    for (uint64_t id = 0; evict && id < (mb == 1 ? 4000 : 6000 * mb); id++) {
        char k[32];
        static uint8_t v[9100];
        lattice_store_entry e = make(&sh, id, k, v);
        e.value_len = e.value_len > 300 ? 300 : e.value_len;
        e.partition %= 4;
        ck_assert_int_eq(lattice_store_put(filler, &e, 0), LATTICE_OK);
    }
    sh.writers_left = writers;
    pthread_t w[4], rd[2], wk, rl;
    for (int i = 0; i < writers; i++) ck_assert_int_eq(pthread_create(&w[i], NULL, writer, &sh), 0);
    for (int i = 0; i < 2; i++) ck_assert_int_eq(pthread_create(&rd[i], NULL, reader, &sh), 0);
    ck_assert_int_eq(pthread_create(&wk, NULL, walker, &sh), 0);
    if (release) ck_assert_int_eq(pthread_create(&rl, NULL, releaser, &sh), 0);
    for (int i = 0; i < writers; i++) pthread_join(w[i], NULL);
    for (int i = 0; i < 2; i++) pthread_join(rd[i], NULL);
    pthread_join(wk, NULL);
    if (release) {
        pthread_join(rl, NULL);
        ck_assert_uint_gt(sh.released, 0);
    }
    ck_assert_uint_eq(sh.bad, 0);
    ck_assert_uint_gt(sh.reads, 1000);
    ck_assert_uint_gt(sh.hits, 100);
    ck_assert_int_eq(lattice_region_check(sh.r), LATTICE_OK);
    /* Quiet now: every entry is well formed and counts agree with a walk. */
    uint64_t total = 0, walked = 0;
    struct walk *wl = calloc(1, sizeof *wl);
    for (uint32_t p = 0; p < PARTS; p++) {
        total += lattice_store_count(sh.s, p);
        wl->part = p;
        lattice_store_cursor *c;
        ck_assert_int_eq(lattice_store_cursor_open(sh.s, p, &c), LATTICE_OK);
        int done = 0;
        while (!done) ck_assert_int_eq(lattice_store_cursor_next(c, 100, 0, walk_item, wl, &done), LATTICE_OK);
        lattice_store_cursor_close(c);
    }
    walked = wl->items;
    ck_assert_uint_eq(wl->bad, 0);
    for (uint64_t id = 0; id < KEYS; id++) ck_assert_uint_le(wl->seen[id], 1);
    ck_assert_uint_eq(walked, total);
    free(wl);
    lattice_store_metrics m;
    lattice_store_metrics_get(sh.s, &m);
    if (evict) ck_assert_uint_gt(m.region.evictions, 0);
    lattice_store_destroy(sh.s);
    lattice_store_destroy(filler);
    lattice_region_destroy(sh.r);
    rcu_unregister_thread();
}

START_TEST(readers_and_writers_at_once) { run(0, 64, 2, 0); }
END_TEST

START_TEST(readers_and_writers_while_evicting) { run(1, 1, 2, 0); }
END_TEST

/* Three writers on two lanes: a lane shared by two writers, evictions that
 * take entries from the other lane's pages. */
START_TEST(more_writers_than_lanes_while_evicting) { run(1, 16, 3, 0); }
END_TEST

/* ---- memory mapped while writers run ---- */

struct filler {
    lattice_store *s;
    lattice_region *r;
    uint32_t partition;
    uint64_t stored, mapped_at_full, max_pages;
};

static void *fill_region(void *arg)
{
    struct filler *f = arg;
    rcu_register_thread();
    uint8_t v[500];
    char k[32];
    for (uint64_t id = f->partition;; id += 2) {
        fill_value(v, sizeof v, id, 1);
        int kl = key_of(k, sizeof k, id);
        lattice_store_entry e = {f->partition, k, (size_t)kl, v, sizeof v, 0, 1, 0};
        int st = lattice_store_put(f->s, &e, 0);
        if (st == LATTICE_ERR_REGION_FULL) break;
        ck_assert_int_eq(st, LATTICE_OK);
        f->stored++;
    }
    lattice_region_metrics m;
    lattice_region_metrics_get(f->r, &m);
    f->mapped_at_full = m.pages_mapped;
    f->max_pages = m.pages_max;
    rcu_unregister_thread();
    return NULL;
}

/* Pages given back to the OS the moment they empty, taken back by writers,
 * with readers and walkers on links into them: no torn or recycled row. */
START_TEST(readers_and_writers_while_pages_go_back_to_the_os) { run(0, 16, 2, 1); }
END_TEST

/* ... and with eviction: released pages are taken back before anything is evicted. */
START_TEST(readers_and_writers_while_evicting_and_giving_memory_back) { run(1, 8, 2, 1); }
END_TEST

START_TEST(a_writer_is_not_refused_while_memory_is_still_being_mapped)
{
    /* Chunks are faulted in outside every lock, several at once.  Two writers
     * fill an 8 MiB region (one lane) from empty: when one of them is told
     * the region is full, every chunk must already be mapped - not still in
     * flight for the other writer, which would make "full" a lie and (with
     * policy evict) evict entries for room that was on its way. */
    for (int round = 0; round < 5; round++) {
        lattice_region *r = new_region(4096, 8, LATTICE_REGION_REJECT);
        lattice_store *s = new_store(r, 2, NULL);
        struct filler f[2] = {{s, r, 0, 0, 0, 0}, {s, r, 1, 0, 0, 0}};
        pthread_t th[2];
        for (int i = 0; i < 2; i++) ck_assert_int_eq(pthread_create(&th[i], NULL, fill_region, &f[i]), 0);
        for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
        for (int i = 0; i < 2; i++) ck_assert_uint_eq(f[i].mapped_at_full, f[i].max_pages);
        ck_assert_uint_gt(f[0].stored + f[1].stored, 8u * 1024 * 1024 / 600);
        ck_assert_int_eq(lattice_region_check(r), LATTICE_OK);
        lattice_store_destroy(s);
        lattice_region_destroy(r);
    }
}
END_TEST

/* ---- small rows read at their position hint while they move ---- */

/* Gets of small entries are answered from the row at the link's position
 * hint (page header, item slot and row loaded at once).  One writer keeps
 * those rows moving under two readers: same-size, shorter and longer
 * overwrites (in place, into the page's gap, relocated), removes and puts
 * again, on 1 KiB pages so pages compact often; some entries carry an
 * expire time, partitions go past 127 (two-byte varints).  A reader must
 * only ever see the value of the version it is told. */
enum { SMALL_KEYS = 600, SMALL_PARTS = 256, SMALL_OPS = 300000 };

static size_t small_len(uint64_t version)
{
    uint64_t x = mix64(version + 5);
    return x % 5 == 0 ? 40 + x % 30 : x % 24;
}

struct small_shared {
    lattice_store *s;
    int done;                  /* atomic */
    uint64_t hits, bad;        /* atomics */
};

static int small_key(char *k, uint64_t id)
{
    /* Keys of 1..20 bytes. */
    int n = 1 + (int)(id % 20);
    memset(k, 'a' + (int)(id % 26), (size_t)n);
    memcpy(k, &id, n < 8 ? (size_t)n : 8);
    return n;
}

static void *small_writer(void *arg)
{
    struct small_shared *sh = arg;
    rcu_register_thread();
    uint8_t v[80];
    char k[24];
    uint64_t seed = 3, version = 0;
    for (int op = 0; op < SMALL_OPS; op++) {
        seed = mix64(seed + (uint64_t)op);
        uint64_t id = seed % SMALL_KEYS;
        int kl = small_key(k, id);
        uint32_t part = (uint32_t)(id * 7 % SMALL_PARTS);
        if ((seed >> 30) % 10 == 0) {
            int st = lattice_store_remove(sh->s, part, k, (size_t)kl);
            if (st != LATTICE_OK && st != LATTICE_ERR_NOT_FOUND) __atomic_add_fetch(&sh->bad, 1, __ATOMIC_RELAXED);
            continue;
        }
        uint64_t ver = ++version;
        size_t len = small_len(ver);
        fill_value(v, len, id, ver);
        lattice_store_entry e = {part, k, (size_t)kl, v, len, id % 3 ? 0 : lt_wall_ms() + 3600000, ver, 0};
        if (lattice_store_put(sh->s, &e, 0) != LATTICE_OK) __atomic_add_fetch(&sh->bad, 1, __ATOMIC_RELAXED);
    }
    __atomic_store_n(&sh->done, 1, __ATOMIC_RELEASE);
    rcu_unregister_thread();
    return NULL;
}

static void *small_reader(void *arg)
{
    struct small_shared *sh = arg;
    rcu_register_thread();
    uint64_t seed = (uint64_t)(uintptr_t)&seed, hits = 0, bad = 0;
    uint8_t buf[80];
    char k[24];
    while (!__atomic_load_n(&sh->done, __ATOMIC_ACQUIRE)) {
        seed = mix64(seed + 1);
        uint64_t id = seed % SMALL_KEYS;
        int kl = small_key(k, id);
        lattice_store_meta m;
        int st = lattice_store_get(sh->s, (uint32_t)(id * 7 % SMALL_PARTS), k, (size_t)kl, buf,
                                   sizeof buf, &m);
        if (st == LATTICE_OK) {
            hits++;
            if (m.value_len != small_len(m.version) || !value_ok(buf, m.value_len, id, m.version) ||
                (m.expire_ms != 0) != (id % 3 == 0))
                bad++;
        } else if (st != LATTICE_ERR_NOT_FOUND) {
            bad++;
        }
    }
    __atomic_add_fetch(&sh->hits, hits, __ATOMIC_RELAXED);
    __atomic_add_fetch(&sh->bad, bad, __ATOMIC_RELAXED);
    rcu_unregister_thread();
    return NULL;
}

START_TEST(small_rows_read_at_their_hint_while_they_move)
{
    rcu_register_thread();
    struct small_shared sh = {0};
    lattice_region *r = new_region(1024, 16, LATTICE_REGION_REJECT);
    sh.s = new_store(r, SMALL_PARTS, NULL);
    pthread_t w, rd[2];
    ck_assert_int_eq(pthread_create(&w, NULL, small_writer, &sh), 0);
    for (int i = 0; i < 2; i++) ck_assert_int_eq(pthread_create(&rd[i], NULL, small_reader, &sh), 0);
    pthread_join(w, NULL);
    for (int i = 0; i < 2; i++) pthread_join(rd[i], NULL);
    ck_assert_uint_eq(sh.bad, 0);
    ck_assert_uint_gt(sh.hits, 1000);
    ck_assert_int_eq(lattice_region_check(r), LATTICE_OK);
    lattice_store_destroy(sh.s);
    lattice_region_destroy(r);
    rcu_unregister_thread();
}
END_TEST

int main(void)
{
    Suite *s = suite_create("storage_concurrent");
    TCase *tc = tcase_create("concurrent");
    tcase_set_timeout(tc, 240);
    tcase_add_test(tc, readers_and_writers_at_once);
    tcase_add_test(tc, readers_and_writers_while_evicting);
    tcase_add_test(tc, more_writers_than_lanes_while_evicting);
    tcase_add_test(tc, readers_and_writers_while_pages_go_back_to_the_os);
    tcase_add_test(tc, readers_and_writers_while_evicting_and_giving_memory_back);
    tcase_add_test(tc, a_writer_is_not_refused_while_memory_is_still_being_mapped);
    tcase_add_test(tc, small_rows_read_at_their_hint_while_they_move);
    suite_add_tcase(s, tc);
    return lt_run_suite(s);
}
