/* Cache config: what `--cache NAME[:k=v,...]` and `lattice cache create NAME
 * k=v...` accept, the defaults users rely on, the text it prints back, and a
 * clear error - with nothing changed - for every bad key or value. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "partition/partition.h"
#include "partition_tests.h"

START_TEST(defaults_are_the_documented_ones)
{
    lattice_cache_config c;
    lattice_cache_config_init(&c, "default");
    ck_assert_str_eq(c.name, "default");
    ck_assert_int_eq(c.mode, LATTICE_CACHE_PARTITIONED);
    ck_assert_uint_eq(c.partitions, 1024);
    ck_assert_uint_eq(c.backups, 1);
    ck_assert_int_eq(c.sync, LATTICE_SYNC_FULL);
    ck_assert(c.read_from_backup);
    ck_assert_uint_eq(c.expiry_ms, 0);
    ck_assert_str_eq(c.region, "default");
    ck_assert(!c.exclude_neighbors);
    ck_assert_int_eq(c.rebalance_mode, LATTICE_REBALANCE_ASYNC);
    ck_assert_uint_eq(c.rebalance_batch_bytes, 524288);
    ck_assert_uint_eq(c.rebalance_prefetch, 3);
    ck_assert_uint_eq(c.rebalance_throttle_ms, 0);
    ck_assert_uint_eq(c.rebalance_delay_ms, 0);
    ck_assert_uint_eq(c.max_key_bytes, 65536);
    ck_assert_uint_eq(c.max_value_bytes, 536870912);
    ck_assert_str_eq(lattice_cache_mode_name(c.mode), "partitioned");
    ck_assert_str_eq(lattice_cache_sync_name(c.sync), "full_sync");
    ck_assert_str_eq(lattice_cache_sync_name((lattice_cache_sync)9), "unknown");

    char buf[1024];
    lattice_cache_config_format(&c, LATTICE_CACHE_FORMAT_CHANGED, buf, sizeof buf);
    ck_assert_str_eq(buf, "default");
    lattice_cache_config_format(&c, LATTICE_CACHE_FORMAT_ALL, buf, sizeof buf);
    ck_assert_str_eq(buf,
                     "default:mode=partitioned,partitions=1024,backups=1,sync=full_sync,"
                     "read_from_backup=true,expiry_ms=none,region=default,"
                     "exclude_neighbors=false,rebalance_mode=async,rebalance_batch_bytes=524288,"
                     "rebalance_prefetch=3,rebalance_throttle_ms=0,rebalance_delay_ms=0,"
                     "history=1024,history_bytes=65536,max_key_bytes=65536,max_value_bytes=536870912");
}
END_TEST

START_TEST(design_example_spec_parses)
{
    lattice_cache_config c;
    char err[256] = "";
    ck_assert_int_eq(lattice_cache_config_parse_spec(
                         &c, "default:backups=1,sync=full_sync,partitions=1024", err, sizeof err),
                     LATTICE_OK);
    lattice_cache_config d;
    lattice_cache_config_init(&d, "default");
    ck_assert(lattice_cache_config_equal(&c, &d));

    ck_assert_int_eq(lattice_cache_config_parse_spec(
                         &c,
                         "orders:mode=replicated,partitions=64,backups=0,sync=primary_sync,"
                         "read_from_backup=no,expiry_ms=60000,region=hot,exclude_neighbors=on,"
                         "rebalance_mode=none,rebalance_batch_bytes=4096,rebalance_prefetch=8,"
                         "rebalance_throttle_ms=10,rebalance_delay_ms=5000,max_key_bytes=100,"
                         "max_value_bytes=2000",
                         err, sizeof err),
                     LATTICE_OK);
    ck_assert_str_eq(c.name, "orders");
    ck_assert_int_eq(c.mode, LATTICE_CACHE_REPLICATED);
    ck_assert_uint_eq(c.partitions, 64);
    ck_assert_uint_eq(c.backups, 0);
    ck_assert_int_eq(c.sync, LATTICE_SYNC_PRIMARY);
    ck_assert(!c.read_from_backup);
    ck_assert_uint_eq(c.expiry_ms, 60000);
    ck_assert_str_eq(c.region, "hot");
    ck_assert(c.exclude_neighbors);
    ck_assert_int_eq(c.rebalance_mode, LATTICE_REBALANCE_NONE);
    ck_assert_uint_eq(c.rebalance_batch_bytes, 4096);
    ck_assert_uint_eq(c.rebalance_prefetch, 8);
    ck_assert_uint_eq(c.rebalance_throttle_ms, 10);
    ck_assert_uint_eq(c.rebalance_delay_ms, 5000);
    ck_assert_uint_eq(c.max_key_bytes, 100);
    ck_assert_uint_eq(c.max_value_bytes, 2000);

    /* a bare name is every default */
    ck_assert_int_eq(lattice_cache_config_parse_spec(&c, "plain", err, sizeof err), LATTICE_OK);
    lattice_cache_config_init(&d, "plain");
    ck_assert(lattice_cache_config_equal(&c, &d));
}
END_TEST

/* A varied set of configs: each field moved away from its default by i. */
static void varied(lattice_cache_config *c, int i)
{
    char name[32];
    snprintf(name, sizeof name, "cache-%d", i);
    lattice_cache_config_init(c, name);
    c->mode = (lattice_cache_mode)(i % 2);
    c->partitions = 1u << (i % 15);
    c->backups = (uint32_t)(i % 65);
    c->sync = (lattice_cache_sync)(i % 3);
    c->read_from_backup = i % 4 != 0;
    c->expiry_ms = (uint64_t)(i % 5) * 1000003u;
    snprintf(c->region, sizeof c->region, "r%d.x_y", i % 7);
    c->exclude_neighbors = i % 3 == 1;
    c->rebalance_mode = (lattice_rebalance_mode)(i % 3);
    c->rebalance_batch_bytes = 4096 + (uint64_t)i * 1000;
    c->rebalance_prefetch = 1 + (uint32_t)(i % 64);
    c->rebalance_throttle_ms = (uint64_t)i * 3;
    c->rebalance_delay_ms = (uint64_t)i * 11;
    c->max_key_bytes = 1 + (uint64_t)i;
    c->max_value_bytes = 536870912 - (uint64_t)i;
}

START_TEST(format_then_parse_round_trips)
{
    for (int i = 0; i < 200; i++) {
        lattice_cache_config c, back;
        varied(&c, i);
        for (int flags = 0; flags < 2; flags++) {
            char text[1024], again[1024], err[256] = "";
            size_t need = lattice_cache_config_format(&c, flags, text, sizeof text);
            ck_assert_uint_eq(need, strlen(text));
            ck_assert_msg(lattice_cache_config_parse_spec(&back, text, err, sizeof err) == LATTICE_OK,
                          "%s: %s", text, err);
            ck_assert_msg(lattice_cache_config_equal(&c, &back), "%s", text);
            lattice_cache_config_format(&back, flags, again, sizeof again);
            ck_assert_str_eq(text, again);
        }
    }
}
END_TEST

START_TEST(canonical_text_formats_to_itself)
{
    const char *specs[] = {
        "default",
        "default:backups=2",
        "users:mode=replicated,sync=full_async",
        "sessions:partitions=16384,backups=0,expiry_ms=1800000,region=ram2",
        ("x:rebalance_mode=sync,rebalance_batch_bytes=1048576,rebalance_prefetch=1,"
         "rebalance_throttle_ms=100,rebalance_delay_ms=2000,max_key_bytes=512,max_value_bytes=4096"),
    };
    for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
        lattice_cache_config c;
        char out[1024], err[256] = "";
        ck_assert_msg(lattice_cache_config_parse_spec(&c, specs[i], err, sizeof err) == LATTICE_OK,
                      "%s: %s", specs[i], err);
        lattice_cache_config_format(&c, LATTICE_CACHE_FORMAT_CHANGED, out, sizeof out);
        ck_assert_str_eq(out, specs[i]);
    }
}
END_TEST

START_TEST(format_follows_snprintf_contract)
{
    lattice_cache_config c;
    lattice_cache_config_init(&c, "abc");
    char full[1024], small[10];
    size_t need = lattice_cache_config_format(&c, LATTICE_CACHE_FORMAT_ALL, full, sizeof full);
    ck_assert_uint_eq(lattice_cache_config_format(&c, LATTICE_CACHE_FORMAT_ALL, NULL, 0), need);
    memset(small, 'Z', sizeof small);
    ck_assert_uint_eq(lattice_cache_config_format(&c, LATTICE_CACHE_FORMAT_ALL, small, sizeof small),
                      need);
    ck_assert_uint_eq(strlen(small), sizeof small - 1);
    ck_assert_int_eq(strncmp(small, full, sizeof small - 1), 0);
}
END_TEST

START_TEST(cli_args_parse_like_a_spec)
{
    const char *argv[] = {"backups=2", "sync=primary_sync", "partitions=256"};
    lattice_cache_config a, b;
    char err[256] = "";
    ck_assert_int_eq(lattice_cache_config_parse_args(&a, "people", 3, argv, err, sizeof err),
                     LATTICE_OK);
    ck_assert_int_eq(lattice_cache_config_parse_spec(
                         &b, "people:backups=2,sync=primary_sync,partitions=256", err, sizeof err),
                     LATTICE_OK);
    ck_assert(lattice_cache_config_equal(&a, &b));
    ck_assert_int_eq(lattice_cache_config_parse_args(&a, "people", 0, NULL, err, sizeof err),
                     LATTICE_OK);
    ck_assert_uint_eq(a.backups, 1);
    /* a value may contain ',' only in the list form's separator role: as an
     * argument it is part of the value and rejected as such */
    const char *comma[] = {"backups=1,sync=full_sync"};
    ck_assert_int_eq(lattice_cache_config_parse_args(&a, "people", 1, comma, err, sizeof err),
                     LATTICE_ERR_INVAL);
    ck_assert_ptr_nonnull(strstr(err, "backups"));
    const char *dup[] = {"backups=1", "backups=2"};
    ck_assert_int_eq(lattice_cache_config_parse_args(&a, "people", 2, dup, err, sizeof err),
                     LATTICE_ERR_INVAL);
    ck_assert_ptr_nonnull(strstr(err, "twice"));
    const char *nul[] = {"backups=1", NULL};
    ck_assert_int_eq(lattice_cache_config_parse_args(&a, "people", 2, nul, err, sizeof err),
                     LATTICE_ERR_INVAL);
    ck_assert_int_eq(lattice_cache_config_parse_args(&a, "bad name", 0, NULL, err, sizeof err),
                     LATTICE_ERR_INVAL);
    ck_assert_int_eq(lattice_cache_config_parse_args(&a, "ok", -1, NULL, err, sizeof err),
                     LATTICE_ERR_INVAL);
}
END_TEST

/* Each bad spec must fail with INVAL, say something containing `want`, and
 * leave the config exactly as it was. */
static const struct bad {
    const char *spec, *want;
} bad_specs[] = {
    {"c:colour=red", "unknown cache option 'colour'"},
    {"c:Backups=1", "unknown cache option 'Backups'"},
    {"c:partitions=3", "not a power of two"},
    {"c:partitions=1000", "not a power of two"},
    {"c:partitions=0", "partitions=0"},
    {"c:partitions=32768", "1 to 16384"},
    {"c:partitions=-4", "negative"},
    {"c:backups=-1", "must not be negative"},
    {"c:backups=65", "0 to 64"},
    {"c:backups=1.5", "backups=1.5"},
    {"c:backups=0x2", "backups=0x2"},
    {"c:backups= 1", "backups= 1"},
    {"c:backups=99999999999999999999999", "0 to 64"},
    {"c:mode=sharded", "partitioned or replicated"},
    {"c:mode=REPLICATED", "partitioned or replicated"},
    {"c:sync=fast", "full_sync, primary_sync or full_async"},
    {"c:rebalance_mode=later", "async, sync or none"},
    {"c:read_from_backup=maybe", "true or false"},
    {"c:exclude_neighbors=2", "true or false"},
    {"c:expiry_ms=soon", "none or milliseconds"},
    {"c:expiry_ms=-5", "negative"},
    {"c:region=", "has no value"},
    {"c:region=a b", "region"},
    {"c:region=-x", "must not start"},
    {"c:rebalance_batch_bytes=100", "4096 to 67108864"},
    {"c:rebalance_prefetch=0", "1 to 64"},
    {"c:rebalance_throttle_ms=3600001", "0 to 3600000"},
    {"c:rebalance_delay_ms=86400001", "0 to 86400000"},
    {"c:max_key_bytes=0", "1 to 16777216"},
    {"c:max_value_bytes=0", "1 to 536870912"},
    {"c:backups", "has no '=value'"},
    {"c:backups=", "has no value"},
    {"c:=1", "unknown cache option ''"},
    {"c:backups=1,", "empty cache option"},
    {"c:,backups=1", "empty cache option"},
    {"c:backups=1,,sync=full_sync", "empty cache option"},
    {"c:backups=1,backups=2", "given twice"},
    {"c:", "no options"},
    {"", "cache name is empty"},
    {":backups=1", "cache name is empty"},
    {"bad name:backups=1", "character 0x20"},
    {"caché", "character 0xc3"},
    {".hidden", "must not start"},
    {"-x", "must not start"},
    {"a123456789012345678901234567890123456789012345678901234567890123456789",
     "longer than 64"},
};

/* The public form the CLI uses: args in, the full spec out, which parses
 * back to the same config. */
START_TEST(spec_from_args_is_the_full_spec)
{
    const char *argv[] = {"backups=2", "sync=primary_sync"};
    char spec[LATTICE_CACHE_SPEC_MAX], want[LATTICE_CACHE_SPEC_MAX], err[256] = "";
    ck_assert_int_eq(lattice_cache_spec_from_args("people", 2, argv, spec, sizeof spec, err, sizeof err), LATTICE_OK);
    lattice_cache_config a, b;
    ck_assert_int_eq(lattice_cache_config_parse_spec(&a, spec, err, sizeof err), LATTICE_OK);
    ck_assert_int_eq(lattice_cache_config_parse_args(&b, "people", 2, argv, err, sizeof err), LATTICE_OK);
    ck_assert(lattice_cache_config_equal(&a, &b));
    lattice_cache_config_format(&b, LATTICE_CACHE_FORMAT_ALL, want, sizeof want);
    ck_assert_str_eq(spec, want);
    ck_assert_ptr_nonnull(strstr(spec, "read_from_backup=")); /* every key, not only those given */
    strcpy(spec, "untouched");
    const char *bad[] = {"backups=lots"};
    ck_assert_int_eq(lattice_cache_spec_from_args("people", 1, bad, spec, sizeof spec, err, sizeof err),
                     LATTICE_ERR_INVAL);
    ck_assert_ptr_nonnull(strstr(err, "backups"));
    ck_assert_str_eq(spec, "untouched");
    ck_assert_int_eq(lattice_cache_spec_from_args("people", 2, argv, spec, 16, err, sizeof err),
                     LATTICE_ERR_TOO_LARGE);
    ck_assert_str_eq(spec, "untouched");
}
END_TEST

START_TEST(every_bad_spec_is_a_clear_error_and_changes_nothing)
{
    const struct bad *b = &bad_specs[_i];
    lattice_cache_config c, before;
    lattice_cache_config_init(&c, "keep");
    c.backups = 3;
    before = c;
    char err[512] = "";
    ck_assert_int_eq(lattice_cache_config_parse_spec(&c, b->spec, err, sizeof err),
                     LATTICE_ERR_INVAL);
    ck_assert_msg(strstr(err, b->want), "spec '%s': error '%s' lacks '%s'", b->spec, err, b->want);
    ck_assert_int_eq(memcmp(&c, &before, sizeof c), 0);
    /* the list form gives the same answer for the options after "c:" */
    if (strncmp(b->spec, "c:", 2) == 0 && b->spec[2]) {
        const char *colon = b->spec + 1;
        char err2[512] = "";
        ck_assert_int_eq(lattice_cache_config_parse_list(&c, colon + 1, err2, sizeof err2),
                         LATTICE_ERR_INVAL);
        ck_assert_str_eq(err, err2);
        ck_assert_int_eq(memcmp(&c, &before, sizeof c), 0);
    }
}
END_TEST

START_TEST(one_option_is_checked_and_keeps_config_on_error)
{
    lattice_cache_config c, before;
    lattice_cache_config_init(&c, "s");
    char err[512] = "";
    ck_assert_int_eq(lattice_cache_config_parse_list(&c, "backups=2", err, sizeof err), LATTICE_OK);
    ck_assert_uint_eq(c.backups, 2);
    ck_assert_int_eq(lattice_cache_config_parse_list(&c, "expiry_ms=none", err, sizeof err), LATTICE_OK);
    ck_assert_uint_eq(c.expiry_ms, 0);
    ck_assert_int_eq(lattice_cache_config_parse_list(&c, "expiry_ms=0", err, sizeof err), LATTICE_OK);
    ck_assert_uint_eq(c.expiry_ms, 0);
    ck_assert_int_eq(lattice_cache_config_parse_list(&c, "read_from_backup=OFF", err, sizeof err),
                     LATTICE_OK);
    ck_assert(!c.read_from_backup);
    before = c;
    ck_assert_int_eq(lattice_cache_config_parse_list(&c, "nope=1", err, sizeof err), LATTICE_ERR_INVAL);
    ck_assert_ptr_nonnull(strstr(err, "known: mode, partitions"));
    ck_assert_int_eq(lattice_cache_config_parse_list(&c, "backups=", err, sizeof err), LATTICE_ERR_INVAL);
    ck_assert_int_eq(lattice_cache_config_parse_list(&c, "partitions=12", err, sizeof err),
                     LATTICE_ERR_INVAL);
    ck_assert_int_eq(memcmp(&c, &before, sizeof c), 0);
    /* errors without an error buffer are still errors */
    ck_assert_int_eq(lattice_cache_config_parse_list(&c, "backups=x", NULL, 0), LATTICE_ERR_INVAL);
    ck_assert_int_eq(lattice_cache_config_parse_spec(&c, NULL, err, sizeof err), LATTICE_ERR_INVAL);
    ck_assert_int_eq(lattice_cache_config_parse_list(&c, NULL, err, sizeof err), LATTICE_ERR_INVAL);
    ck_assert_int_eq(lattice_cache_config_parse_list(&c, "", err, sizeof err), LATTICE_OK);
    ck_assert_int_eq(memcmp(&c, &before, sizeof c), 0);
    /* a long value is refused, not truncated into something valid */
    char longv[300];
    memset(longv, '1', sizeof longv - 1);
    longv[sizeof longv - 1] = 0;
    char spec[400];
    snprintf(spec, sizeof spec, "c:max_key_bytes=%s", longv);
    ck_assert_int_eq(lattice_cache_config_parse_spec(&c, spec, err, sizeof err), LATTICE_ERR_INVAL);
    ck_assert_ptr_nonnull(strstr(err, "longer than"));
}
END_TEST

START_TEST(init_refuses_a_bad_name)
{
    lattice_cache_config c;
    lattice_cache_config_init(&c, "bad name");
    ck_assert_str_eq(c.name, "");
}
END_TEST

START_TEST(cache_names)
{
    char err[256];
    ck_assert(lattice_cache_config_name_valid("default", err, sizeof err));
    ck_assert(lattice_cache_config_name_valid("a.b-c_D9", err, sizeof err));
    ck_assert(lattice_cache_config_name_valid("x", err, sizeof err));
    char n64[65];
    memset(n64, 'n', 64);
    n64[64] = 0;
    ck_assert(lattice_cache_config_name_valid(n64, err, sizeof err));
    ck_assert(!lattice_cache_config_name_valid(NULL, err, sizeof err));
    ck_assert(!lattice_cache_config_name_valid("", err, sizeof err));
    ck_assert(!lattice_cache_config_name_valid("a/b", err, sizeof err));
    ck_assert(!lattice_cache_config_name_valid("a:b", err, sizeof err));
    ck_assert(!lattice_cache_config_name_valid("a,b", err, sizeof err));
    ck_assert(!lattice_cache_config_name_valid("tab\t", err, sizeof err));
    ck_assert_ptr_nonnull(strstr(err, "0x09"));
}
END_TEST

/* Mangled specs (bytes flipped, inserted, deleted from valid ones) never
 * crash: each is either refused with a message and no change, or accepted as
 * a valid config that formats and parses back to itself. */
START_TEST(mangled_specs_are_refused_or_round_trip)
{
    static const char alphabet[] = "abcdeinopsty_=,:-.0123456789{}\x80\xff ";
    srand(4242);
    int accepted = 0, refused = 0;
    for (int i = 0; i < 20000; i++) {
        lattice_cache_config base, c;
        varied(&base, i % 50);
        char spec[1100];
        size_t len = lattice_cache_config_format(&base, i % 2, spec, sizeof spec);
        for (int m = 1 + rand() % 3; m > 0 && len > 0; m--) {
            size_t at = (size_t)rand() % len;
            char ch = alphabet[(size_t)rand() % (sizeof alphabet - 1)];
            switch (rand() % 3) {
            case 0: spec[at] = ch; break;
            case 1: memmove(spec + at, spec + at + 1, len - at), len--; break;
            default:
                if (len + 1 < sizeof spec) memmove(spec + at + 1, spec + at, len - at + 1), spec[at] = ch, len++;
            }
        }
        spec[len] = 0;
        lattice_cache_config_init(&c, "keep");
        lattice_cache_config before = c;
        char err[512] = "";
        lattice_status st = lattice_cache_config_parse_spec(&c, spec, err, sizeof err);
        if (st != LATTICE_OK) {
            ck_assert_int_eq(st, LATTICE_ERR_INVAL);
            ck_assert_msg(err[0] != 0, "no message for '%s'", spec);
            ck_assert_int_eq(memcmp(&c, &before, sizeof c), 0);
            refused++;
            continue;
        }
        accepted++;
        char text[1100];
        lattice_cache_config back;
        lattice_cache_config_format(&c, LATTICE_CACHE_FORMAT_ALL, text, sizeof text);
        ck_assert_int_eq(lattice_cache_config_parse_spec(&back, text, err, sizeof err), LATTICE_OK);
        ck_assert(lattice_cache_config_equal(&c, &back));
    }
    ck_assert_int_gt(accepted, 0);
    ck_assert_int_gt(refused, 0);
}
END_TEST

TCase *partition_config_tcase(void)
{
    TCase *tc = tcase_create("config");
    tcase_set_timeout(tc, 120); /* sanitizer and valgrind runs are slow */
    tcase_add_test(tc, defaults_are_the_documented_ones);
    tcase_add_test(tc, design_example_spec_parses);
    tcase_add_test(tc, format_then_parse_round_trips);
    tcase_add_test(tc, canonical_text_formats_to_itself);
    tcase_add_test(tc, format_follows_snprintf_contract);
    tcase_add_test(tc, cli_args_parse_like_a_spec);
    tcase_add_test(tc, spec_from_args_is_the_full_spec);
    tcase_add_loop_test(tc, every_bad_spec_is_a_clear_error_and_changes_nothing, 0,
                        (int)(sizeof bad_specs / sizeof bad_specs[0]));
    tcase_add_test(tc, one_option_is_checked_and_keeps_config_on_error);
    tcase_add_test(tc, init_refuses_a_bad_name);
    tcase_add_test(tc, cache_names);
    tcase_add_test(tc, mangled_specs_are_refused_or_round_trip);
    return tc;
}
