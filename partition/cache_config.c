/*
 * Cache configuration: defaults, `k=v` parsing with clear errors, validation,
 * and formatting back to text that parses to the same config.
 *
 * One table (`keys`) names every option with its kind and bounds; set, format
 * and validate all walk it, so an option added there is parsed, printed and
 * checked the same way.
 */
#include "partition/partition.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define DEFAULT_REGION "default"

enum kind { K_ENUM, K_BOOL, K_U32, K_U64, K_U64_NONE, K_NAME };

struct key {
    const char *name;
    enum kind kind;
    size_t off;                 /* offset of the field in lattice_cache_config */
    uint64_t min, max;          /* numbers: inclusive bounds */
    const char *const *names;   /* enums: value names, index = enum value */
    const char *help;           /* accepted values, for error text */
};

static const char *const mode_names[] = {"partitioned", "replicated", NULL};
static const char *const sync_names[] = {"full_sync", "primary_sync", "full_async", NULL};
static const char *const rebal_names[] = {"async", "sync", "none", NULL};

#define OFF(f) offsetof(lattice_cache_config, f)
static const struct key keys[] = {
    {"mode", K_ENUM, OFF(mode), 0, 0, mode_names, "partitioned or replicated"},
    {"partitions", K_U32, OFF(partitions), 1, LATTICE_PARTITION_MAX, NULL,
     "a power of two from 1 to 16384"},
    {"backups", K_U32, OFF(backups), 0, LATTICE_CACHE_MAX_BACKUPS, NULL,
     "an integer from 0 to 64"},
    {"sync", K_ENUM, OFF(sync), 0, 0, sync_names, "full_sync, primary_sync or full_async"},
    {"read_from_backup", K_BOOL, OFF(read_from_backup), 0, 0, NULL, "true or false"},
    {"expiry_ms", K_U64_NONE, OFF(expiry_ms), 0, UINT64_C(3153600000000), NULL,
     "none or milliseconds up to 3153600000000 (100 years)"},
    {"region", K_NAME, OFF(region), 0, 0, NULL,
     "1-64 characters of A-Z a-z 0-9 _ . - not starting with . or -"},
    {"exclude_neighbors", K_BOOL, OFF(exclude_neighbors), 0, 0, NULL, "true or false"},
    {"rebalance_mode", K_ENUM, OFF(rebalance_mode), 0, 0, rebal_names, "async, sync or none"},
    {"rebalance_batch_bytes", K_U64, OFF(rebalance_batch_bytes), 4096, UINT64_C(67108864), NULL,
     "bytes from 4096 to 67108864"},
    {"rebalance_prefetch", K_U32, OFF(rebalance_prefetch), 1, 64, NULL,
     "an integer from 1 to 64"},
    {"rebalance_throttle_ms", K_U64, OFF(rebalance_throttle_ms), 0, 3600000, NULL,
     "milliseconds from 0 to 3600000"},
    {"rebalance_delay_ms", K_U64, OFF(rebalance_delay_ms), 0, 86400000, NULL,
     "milliseconds from 0 to 86400000"},
    {"history", K_U32, OFF(history), 0, 1048576, NULL, "records per partition from 0 to 1048576"},
    {"history_bytes", K_U64, OFF(history_bytes), 1024, UINT64_C(1073741824), NULL,
     "bytes per partition from 1024 to 1073741824"},
    {"max_key_bytes", K_U64, OFF(max_key_bytes), 1, UINT64_C(16777216), NULL,
     "bytes from 1 to 16777216"},
    {"max_value_bytes", K_U64, OFF(max_value_bytes), 1, UINT64_C(536870912), NULL,
     "bytes from 1 to 536870912"},
};
#define NKEYS (sizeof keys / sizeof keys[0])

/* set_one/validate move enum values as int. */
_Static_assert(sizeof(lattice_cache_mode) == sizeof(int) && sizeof(lattice_cache_sync) == sizeof(int) &&
                   sizeof(lattice_rebalance_mode) == sizeof(int),
               "cache config enums must be int-sized");

static void say(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void say(char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || errlen == 0) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

void lattice_cache_config_init(lattice_cache_config *c, const char *name)
{
    memset(c, 0, sizeof *c);
    if (name && lattice_cache_config_name_valid(name, NULL, 0))
        memcpy(c->name, name, strlen(name) + 1);
    c->mode = LATTICE_CACHE_PARTITIONED;
    c->partitions = LATTICE_PARTITION_DEFAULT;
    c->backups = 1;
    c->sync = LATTICE_SYNC_FULL;
    c->read_from_backup = true;
    c->expiry_ms = 0;
    memcpy(c->region, DEFAULT_REGION, sizeof DEFAULT_REGION);
    c->exclude_neighbors = false;
    c->rebalance_mode = LATTICE_REBALANCE_ASYNC;
    c->rebalance_batch_bytes = 524288;
    c->rebalance_prefetch = 3;
    c->rebalance_throttle_ms = 0;
    c->rebalance_delay_ms = 0;
    c->history = 1024;
    c->history_bytes = 65536;
    c->max_key_bytes = 65536;
    /* Redis's proto-max-bulk-len: what a Redis user may store; the region
     * bound (--region-mb) still refuses what does not fit (REGION_FULL). */
    c->max_value_bytes = 536870912;
}

/* Shared by cache and region names: they end up in file names, metric labels
 * and JSON, so keep them to a safe, printable set. */
static bool name_ok(const char *what, const char *s, size_t max, char *err, size_t errlen)
{
    if (!s || !*s) {
        say(err, errlen, "%s name is empty", what);
        return false;
    }
    size_t n = strnlen(s, max + 1);
    if (n > max) {
        say(err, errlen, "%s name is longer than %zu characters", what, max);
        return false;
    }
    if (s[0] == '.' || s[0] == '-') {
        say(err, errlen, "%s name '%s' must not start with '%c'", what, s, s[0]);
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (!isalnum(ch) && ch != '_' && ch != '.' && ch != '-') {
            say(err, errlen,
                "%s name '%s' has character 0x%02x; use A-Z a-z 0-9 _ . -", what, s, ch);
            return false;
        }
    }
    return true;
}

bool lattice_cache_config_name_valid(const char *name, char *err, size_t errlen)
{
    return name_ok("cache", name, LATTICE_CACHE_NAME_MAX, err, errlen);
}

static const struct key *find_key(const char *name, size_t len)
{
    for (size_t i = 0; i < NKEYS; i++)
        if (strlen(keys[i].name) == len && memcmp(keys[i].name, name, len) == 0) return &keys[i];
    return NULL;
}

/* Strict unsigned decimal: digits only, no sign, no spaces, no overflow. */
static bool parse_u64(const char *v, uint64_t *out)
{
    if (!*v) return false;
    for (const char *p = v; *p; p++)
        if (*p < '0' || *p > '9') return false;
    errno = 0;
    char *end;
    unsigned long long x = strtoull(v, &end, 10);
    if (errno || *end) return false;
    *out = x;
    return true;
}

static bool parse_bool(const char *v, bool *out)
{
    static const char *const yes[] = {"true", "yes", "on", "1"};
    static const char *const no[] = {"false", "no", "off", "0"};
    for (size_t i = 0; i < 4; i++) {
        if (strcasecmp(v, yes[i]) == 0) return *out = true, true;
        if (strcasecmp(v, no[i]) == 0) return *out = false, true;
    }
    return false;
}

static void store_u64(lattice_cache_config *c, const struct key *k, uint64_t x)
{
    char *f = (char *)c + k->off;
    if (k->kind == K_U32) {
        uint32_t v = (uint32_t)x;
        memcpy(f, &v, sizeof v);
    } else {
        memcpy(f, &x, sizeof x);
    }
}

static uint64_t load_u64(const lattice_cache_config *c, const struct key *k)
{
    const char *f = (const char *)c + k->off;
    if (k->kind == K_U32) {
        uint32_t v;
        memcpy(&v, f, sizeof v);
        return v;
    }
    uint64_t v;
    memcpy(&v, f, sizeof v);
    return v;
}

static lattice_status set_number(lattice_cache_config *c, const struct key *k, const char *v,
                                 char *err, size_t errlen)
{
    uint64_t x;
    if (k->kind == K_U64_NONE && strcasecmp(v, "none") == 0) {
        store_u64(c, k, 0);
        return LATTICE_OK;
    }
    if (v[0] == '-' && parse_u64(v + 1, &x)) {
        say(err, errlen, "%s=%s: must not be negative; expected %s", k->name, v, k->help);
        return LATTICE_ERR_INVAL;
    }
    if (!parse_u64(v, &x) || x < k->min || x > k->max) {
        say(err, errlen, "%s=%s: expected %s", k->name, v, k->help);
        return LATTICE_ERR_INVAL;
    }
    if (k->off == OFF(partitions) && !lattice_partition_count_valid(x)) {
        say(err, errlen, "partitions=%s: not a power of two; expected %s", v, k->help);
        return LATTICE_ERR_INVAL;
    }
    store_u64(c, k, x);
    return LATTICE_OK;
}

static lattice_status set_one(lattice_cache_config *c, const struct key *k, const char *v,
                              char *err, size_t errlen)
{
    char *f = (char *)c + k->off;
    switch (k->kind) {
    case K_ENUM:
        for (int i = 0; k->names[i]; i++) {
            if (strcmp(v, k->names[i]) == 0) {
                memcpy(f, &i, sizeof i); /* enums here are int-sized */
                return LATTICE_OK;
            }
        }
        say(err, errlen, "%s=%s: expected %s", k->name, v, k->help);
        return LATTICE_ERR_INVAL;
    case K_BOOL: {
        bool b;
        if (!parse_bool(v, &b)) {
            say(err, errlen, "%s=%s: expected %s", k->name, v, k->help);
            return LATTICE_ERR_INVAL;
        }
        *(bool *)f = b;
        return LATTICE_OK;
    }
    case K_NAME: {
        char why[160];
        if (!name_ok(k->name, v, LATTICE_REGION_NAME_MAX, why, sizeof why)) {
            say(err, errlen, "%s: %s", k->name, why);
            return LATTICE_ERR_INVAL;
        }
        memcpy(f, v, strlen(v) + 1);
        return LATTICE_OK;
    }
    default:
        return set_number(c, k, v, err, errlen);
    }
}

static void unknown_key(const char *key, size_t len, char *err, size_t errlen)
{
    char list[512];
    size_t used = 0;
    for (size_t i = 0; i < NKEYS && used < sizeof list; i++)
        used += (size_t)snprintf(list + used, sizeof list - used, "%s%s", i ? ", " : "",
                                 keys[i].name);
    say(err, errlen, "unknown cache option '%.*s'; known: %s", (int)(len > 64 ? 64 : len), key,
        list);
}

/* Applies one "k=v" item of length len; seen[] catches a key given twice. */
static lattice_status apply_item(lattice_cache_config *c, const char *item, size_t len,
                                 bool *seen, char *err, size_t errlen)
{
    if (len == 0) {
        say(err, errlen, "empty cache option (stray ',')");
        return LATTICE_ERR_INVAL;
    }
    const char *eq = memchr(item, '=', len);
    if (!eq) {
        say(err, errlen, "cache option '%.*s' has no '=value'", (int)(len > 64 ? 64 : len), item);
        return LATTICE_ERR_INVAL;
    }
    size_t klen = (size_t)(eq - item);
    const struct key *k = find_key(item, klen);
    if (!k) {
        unknown_key(item, klen, err, errlen);
        return LATTICE_ERR_INVAL;
    }
    if (seen[k - keys]) {
        say(err, errlen, "cache option '%s' given twice", k->name);
        return LATTICE_ERR_INVAL;
    }
    seen[k - keys] = true;
    char value[128];
    size_t vlen = len - klen - 1;
    if (vlen >= sizeof value) {
        say(err, errlen, "%s: value longer than %zu characters", k->name, sizeof value - 1);
        return LATTICE_ERR_INVAL;
    }
    memcpy(value, eq + 1, vlen);
    value[vlen] = 0;
    if (strlen(value) != vlen) {
        say(err, errlen, "%s: value contains a NUL byte", k->name);
        return LATTICE_ERR_INVAL;
    }
    if (vlen == 0) {
        say(err, errlen, "%s has no value; expected %s", k->name, k->help);
        return LATTICE_ERR_INVAL;
    }
    return set_one(c, k, value, err, errlen);
}

lattice_status lattice_cache_config_parse_list(lattice_cache_config *c, const char *list,
                                               char *err, size_t errlen)
{
    if (!c || !list) {
        say(err, errlen, "missing cache option list");
        return LATTICE_ERR_INVAL;
    }
    lattice_cache_config tmp = *c;
    bool seen[NKEYS] = {0};
    if (*list) {
        const char *p = list;
        for (;;) {
            const char *comma = strchr(p, ',');
            size_t len = comma ? (size_t)(comma - p) : strlen(p);
            lattice_status st = apply_item(&tmp, p, len, seen, err, errlen);
            if (st != LATTICE_OK) return st;
            if (!comma) break;
            p = comma + 1;
        }
    }
    *c = tmp;
    return LATTICE_OK;
}

lattice_status lattice_cache_config_parse_spec(lattice_cache_config *c, const char *spec,
                                               char *err, size_t errlen)
{
    if (!c || !spec) {
        say(err, errlen, "missing cache spec");
        return LATTICE_ERR_INVAL;
    }
    const char *colon = strchr(spec, ':');
    size_t nlen = colon ? (size_t)(colon - spec) : strlen(spec);
    char name[LATTICE_CACHE_NAME_MAX + 2];
    if (nlen > LATTICE_CACHE_NAME_MAX) nlen = LATTICE_CACHE_NAME_MAX + 1; /* reported as too long */
    memcpy(name, spec, nlen);
    name[nlen] = 0;
    if (!lattice_cache_config_name_valid(name, err, errlen)) return LATTICE_ERR_INVAL;
    if (colon && colon[1] == 0) {
        say(err, errlen, "cache spec '%s' has ':' but no options", name);
        return LATTICE_ERR_INVAL;
    }
    lattice_cache_config tmp;
    lattice_cache_config_init(&tmp, name);
    if (colon) {
        lattice_status st = lattice_cache_config_parse_list(&tmp, colon + 1, err, errlen);
        if (st != LATTICE_OK) return st;
    }
    *c = tmp;
    return LATTICE_OK;
}

lattice_status lattice_cache_config_parse_args(lattice_cache_config *c, const char *name,
                                               int argc, const char *const *argv,
                                               char *err, size_t errlen)
{
    if (!c || (argc > 0 && !argv) || argc < 0) {
        say(err, errlen, "missing cache options");
        return LATTICE_ERR_INVAL;
    }
    if (!lattice_cache_config_name_valid(name, err, errlen)) return LATTICE_ERR_INVAL;
    lattice_cache_config tmp;
    lattice_cache_config_init(&tmp, name);
    bool seen[NKEYS] = {0};
    for (int i = 0; i < argc; i++) {
        if (!argv[i]) {
            say(err, errlen, "missing cache option");
            return LATTICE_ERR_INVAL;
        }
        lattice_status st = apply_item(&tmp, argv[i], strlen(argv[i]), seen, err, errlen);
        if (st != LATTICE_OK) return st;
    }
    *c = tmp;
    return LATTICE_OK;
}

lattice_status lattice_cache_spec_from_args(const char *name, int argc, const char *const *argv, char *spec,
                                            size_t len, char *err, size_t errlen)
{
    lattice_cache_config c;
    lattice_status st = lattice_cache_config_parse_args(&c, name, argc, argv, err, errlen);
    if (st != LATTICE_OK) return st;
    char full[LATTICE_CACHE_SPEC_MAX];
    size_t n = lattice_cache_config_format(&c, LATTICE_CACHE_FORMAT_ALL, full, sizeof full);
    if (n >= sizeof full || n >= len) {
        say(err, errlen, "the cache spec does not fit %zu bytes", len < sizeof full ? len : sizeof full);
        return LATTICE_ERR_TOO_LARGE;
    }
    memcpy(spec, full, n + 1);
    return LATTICE_OK;
}

/* Writes key k's value as text into v (at least 32 bytes, or region size). */
static void value_text(const lattice_cache_config *c, const struct key *k, char *v, size_t vlen)
{
    const char *f = (const char *)c + k->off;
    switch (k->kind) {
    case K_ENUM: {
        int e;
        memcpy(&e, f, sizeof e);
        int n = 0;
        while (k->names[n]) n++;
        snprintf(v, vlen, "%s", e >= 0 && e < n ? k->names[e] : "invalid");
        break;
    }
    case K_BOOL: snprintf(v, vlen, "%s", *(const bool *)f ? "true" : "false"); break;
    case K_NAME: snprintf(v, vlen, "%.*s", LATTICE_REGION_NAME_MAX, f); break;
    case K_U64_NONE:
        if (load_u64(c, k) == 0) {
            snprintf(v, vlen, "none");
            break;
        }
        /* fall through */
    default: snprintf(v, vlen, "%llu", (unsigned long long)load_u64(c, k)); break;
    }
}

size_t lattice_cache_config_format(const lattice_cache_config *c, int flags, char *buf,
                                   size_t len)
{
    lattice_cache_config def;
    lattice_cache_config_init(&def, NULL);
    char tmp[1024];
    size_t used = (size_t)snprintf(tmp, sizeof tmp, "%.*s", LATTICE_CACHE_NAME_MAX, c->name);
    bool first = true;
    for (size_t i = 0; i < NKEYS; i++) {
        char v[LATTICE_REGION_NAME_MAX + 32], dv[LATTICE_REGION_NAME_MAX + 32];
        value_text(c, &keys[i], v, sizeof v);
        if (flags == LATTICE_CACHE_FORMAT_CHANGED) {
            value_text(&def, &keys[i], dv, sizeof dv);
            if (strcmp(v, dv) == 0) continue;
        }
        if (used >= sizeof tmp) break; /* cannot happen: see the bound below */
        used += (size_t)snprintf(tmp + used, sizeof tmp - used, "%c%s=%s", first ? ':' : ',',
                                 keys[i].name, v);
        first = false;
    }
    /* tmp is large enough for every key at its longest value (~700 bytes). */
    if (buf && len) snprintf(buf, len, "%s", tmp);
    return used;
}

bool lattice_cache_config_equal(const lattice_cache_config *a, const lattice_cache_config *b)
{
    if (strncmp(a->name, b->name, sizeof a->name) != 0) return false;
    for (size_t i = 0; i < NKEYS; i++) {
        char va[LATTICE_REGION_NAME_MAX + 32], vb[LATTICE_REGION_NAME_MAX + 32];
        value_text(a, &keys[i], va, sizeof va);
        value_text(b, &keys[i], vb, sizeof vb);
        if (strcmp(va, vb) != 0) return false;
    }
    return true;
}

static const char *enum_name(const char *const *names, int n, int v)
{
    return v >= 0 && v < n ? names[v] : "unknown";
}

const char *lattice_cache_mode_name(lattice_cache_mode m) { return enum_name(mode_names, 2, (int)m); }
const char *lattice_cache_sync_name(lattice_cache_sync s) { return enum_name(sync_names, 3, (int)s); }
