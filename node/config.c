/*
 * latticed configuration: one table of keys shared by the command line and
 * the config file (libinih: a well-kept Debian parser for key = value files),
 * so a key and its flag can never drift apart.  Flags win over the file.
 */
#include <errno.h>
#include <getopt.h>
#include <ini.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "discovery/discovery.h"
#include "lattice/alloc.h"
#include "lattice/log.h"
#include "node.h"
#include "partition/partition.h"

void latticed_options_init(latticed_options *o)
{
    memset(o, 0, sizeof *o);
    lattice_config_init(&o->node);
    o->log_level = LT_INFO;
}

void latticed_options_free(latticed_options *o)
{
    for (size_t i = 0; i < o->n_store; i++) lt_free(o->store[i]);
    o->n_store = 0;
}

static const char *keep(latticed_options *o, const char *s)
{
    if (o->n_store == sizeof o->store / sizeof o->store[0]) return NULL;
    char *c = lt_strdup(s);
    if (c) o->store[o->n_store++] = c;
    return c;
}

static bool parse_int(const char *s, long lo, long hi, int *out)
{
    if (!s || !*s) return false;
    errno = 0;
    char *end;
    long v = strtol(s, &end, 10);
    if (errno || *end || v < lo || v > hi) return false;
    *out = (int)v;
    return true;
}

static bool parse_ll(const char *s, long long lo, long long hi, long long *out)
{
    if (!s || !*s) return false;
    errno = 0;
    char *end;
    long long v = strtoll(s, &end, 10);
    if (errno || *end || v < lo || v > hi) return false;
    *out = v;
    return true;
}

static bool parse_bool(const char *s, bool *out)
{
    if (!s || !*s || !strcmp(s, "true") || !strcmp(s, "yes") || !strcmp(s, "1") || !strcmp(s, "on")) {
        *out = true;
        return true;
    }
    if (!strcmp(s, "false") || !strcmp(s, "no") || !strcmp(s, "0") || !strcmp(s, "off")) {
        *out = false;
        return true;
    }
    return false;
}

/* --cache NAME[:k=v,...]: parsed now with the partition module's parser
 * (every cache option, docs/CACHES.md) so a typo fails at start; err gets
 * the parser's sentence. */
static bool valid_cache_spec(const char *s, char *why, size_t len)
{
    lattice_cache_config cfg;
    return lattice_cache_config_parse_spec(&cfg, s, why, len) == LATTICE_OK;
}

/* One --ip-finder spec of any kind parses (a static one resolves). */
static bool finder_ok(const char *v, lattice_finder_addr *tmp, size_t max, size_t *n)
{
    char name[256];
    int port;
    if (lattice_finder_is_multicast(v)) return lattice_finder_parse_multicast(v, name, &port) == LATTICE_OK;
    if (lattice_finder_is_dns(v)) return lattice_finder_parse_dns(v, name, &port) == LATTICE_OK;
    return lattice_finder_parse_static(v, LATTICE_DEFAULT_PORT, 10, tmp, max, n) == LATTICE_OK;
}

lattice_status latticed_option_set(latticed_options *o, const char *key, const char *v, char *err, size_t errlen)
{
    char k[64];
    snprintf(k, sizeof k, "%s", key);
    for (char *p = k; *p; p++)
        if (*p == '_') *p = '-';
    lattice_config *c = &o->node;
    lattice_respd_config *r = &o->resp;
    const char *s;
    bool b;
#define BAD(...) do { snprintf(err, errlen, __VA_ARGS__); return LATTICE_ERR_INVAL; } while (0)
#define STR(field) do { if (!v || !*v) BAD("%s needs a value", k); if (!(s = keep(o, v))) return LATTICE_ERR_NOMEM; field = s; } while (0)
    if (!strcmp(k, "cluster")) STR(c->cluster);
    else if (!strcmp(k, "host")) STR(c->host);
    else if (!strcmp(k, "secret-file")) STR(c->secret_file);
    else if (!strcmp(k, "data-dir")) STR(c->data_dir);
    else if (!strcmp(k, "restart-wait-ms")) { if (!parse_int(v, -1, 86400000, &c->restart_wait_ms)) BAD("--restart-wait-ms wants -1 (no end) or 0..86400000, not '%s'", v ? v : ""); }
    else if (!strcmp(k, "checkpoint-mb")) { if (!parse_int(v, 1, 1 << 20, &c->checkpoint_mb)) BAD("--checkpoint-mb wants 1..1048576"); }
    else if (!strcmp(k, "wal-fsync")) {
        if (!v || (strcmp(v, "always") && strcmp(v, "group") && strcmp(v, "off"))) BAD("--wal-fsync wants always, group or off");
        STR(c->wal_fsync);
    }
    else if (!strcmp(k, "port")) { if (!parse_int(v, 0, 65535, &c->port)) BAD("--port wants 0 (any free port) or 1..65535, not '%s'", v ? v : ""); }
    else if (!strcmp(k, "port-range")) { if (!parse_int(v, 1, 10000, &c->port_range)) BAD("--port-range wants 1..10000, not '%s'", v ? v : ""); }
    else if (!strcmp(k, "failure-detection-ms")) { if (!parse_int(v, 100, 3600000, &c->failure_detection_ms)) BAD("--failure-detection-ms wants 100..3600000, not '%s'", v ? v : ""); }
    else if (!strcmp(k, "baseline-auto-adjust-ms")) { if (!parse_int(v, -1, 86400000, &c->baseline_auto_adjust_ms)) BAD("--baseline-auto-adjust-ms wants -1 (never) or 0..86400000, not '%s'", v ? v : ""); }
    else if (!strcmp(k, "max-message-bytes")) { if (!parse_int(v, 1024, 256 << 20, &c->max_message_bytes)) BAD("--max-message-bytes wants 1024..268435456, not '%s'", v ? v : ""); }
    else if (!strcmp(k, "multicast-attempts")) { if (!parse_int(v, 1, 100, &c->multicast_attempts)) BAD("--multicast-attempts wants 1..100"); }
    else if (!strcmp(k, "multicast-wait-ms")) { if (!parse_int(v, 10, 60000, &c->multicast_wait_ms)) BAD("--multicast-wait-ms wants 10..60000"); }
    else if (!strcmp(k, "client")) { if (!parse_bool(v, &b)) BAD("--client wants true or false"); c->client = b; }
    else if (!strcmp(k, "ip-finder")) {
        if (c->n_finders == LATTICE_MAX_FINDERS) BAD("at most %d --ip-finder", LATTICE_MAX_FINDERS);
        STR(c->finders[c->n_finders]);
        static lattice_finder_addr tmp[512]; /* parse-time scratch, main thread only */
        size_t n;
        if (!finder_ok(v, tmp, 512, &n))
            BAD("bad --ip-finder '%s' (want HOST[:PORT[..PORT]][,...], multicast://GROUP[:PORT] or dns://NAME[:PORT])", v);
        c->n_finders++;
    } else if (!strcmp(k, "attr")) {
        if (c->n_attrs == LATTICE_MAX_ATTRS) BAD("at most %d --attr", LATTICE_MAX_ATTRS);
        if (!v || !strchr(v, '=') || v[0] == '=') BAD("--attr wants key=value");
        STR(c->attrs[c->n_attrs]);
        c->n_attrs++;
    } else if (!strcmp(k, "log-level")) {
        int l = lattice_log_parse_level(v);
        if (l < 0) BAD("--log-level wants error, warn, info, debug or trace");
        o->log_level = l;
    } else if (!strcmp(k, "cache")) {
        if (o->n_caches == LATTICED_MAX_CACHES) BAD("at most %d --cache", LATTICED_MAX_CACHES);
        char why[256] = "";
        if (!v || !valid_cache_spec(v, why, sizeof why)) BAD("bad --cache '%s': %s", v ? v : "", why);
        STR(o->caches[o->n_caches]);
        o->node.caches[o->node.n_caches++] = o->caches[o->n_caches];
        o->n_caches++;
    } else if (!strcmp(k, "region-mb")) {
        if (!parse_int(v, 1, 1 << 20, &o->region_mb)) BAD("--region-mb wants 1..1048576");
        o->node.region_mb = o->region_mb;
    } else if (!strcmp(k, "region-policy")) {
        if (!v || (strcmp(v, "evict") && strcmp(v, "reject"))) BAD("--region-policy wants evict or reject");
        o->node.region_evict = !strcmp(v, "evict");
    }
    else if (!strcmp(k, "resp-port")) { if (!parse_int(v, 1, 65535, &r->port)) BAD("--resp-port wants 1..65535"); }
    else if (!strcmp(k, "requirepass")) STR(r->password);
    else if (!strcmp(k, "resp-cache")) STR(r->cache);
    else if (!strcmp(k, "resp-io-threads")) { if (!parse_int(v, 1, 8, &r->io_threads)) BAD("--resp-io-threads wants 1..8"); }
    else if (!strcmp(k, "resp-poll-us")) {
        int us;
        if (!parse_int(v, 0, 1000000, &us)) BAD("--resp-poll-us wants 0..1000000 microseconds");
        r->poll_us = us ? us : -1; /* 0: never poll (the library's 0 is its default) */
    }
    else if (!strcmp(k, "resp-max-clients")) { if (!parse_int(v, 1, 1000000, &r->max_clients)) BAD("--resp-max-clients wants 1..1000000"); }
    else if (!strcmp(k, "resp-timeout")) { if (!parse_int(v, 0, 31536000, &r->idle_timeout_s)) BAD("--resp-timeout wants 0..31536000 seconds"); }
    else if (!strcmp(k, "resp-max-bulk")) { if (!parse_ll(v, 1, 1LL << 40, &r->max_bulk)) BAD("--resp-max-bulk wants 1..1099511627776 bytes"); }
    else if (!strcmp(k, "resp-max-multibulk")) { if (!parse_ll(v, 1, INT32_MAX, &r->max_multibulk)) BAD("--resp-max-multibulk wants 1..2147483647"); }
    else if (!strcmp(k, "resp-max-inline")) { if (!parse_ll(v, 16, 1LL << 30, &r->max_inline)) BAD("--resp-max-inline wants 16..1073741824 bytes"); }
    else if (!strcmp(k, "resp-moved")) {
        if (!strcmp(v, "aware")) r->moved = LATTICE_RESPD_MOVED_AWARE;
        else if (!strcmp(v, "always")) r->moved = LATTICE_RESPD_MOVED_ALWAYS;
        else if (!strcmp(v, "never")) r->moved = LATTICE_RESPD_MOVED_NEVER;
        else BAD("--resp-moved wants aware, always or never");
    }
    else if (!strcmp(k, "resp-cross-slot")) {
        if (!strcmp(v, "aware")) r->cross_slot = LATTICE_RESPD_CROSS_AWARE;
        else if (!strcmp(v, "allow")) r->cross_slot = LATTICE_RESPD_CROSS_ALLOW;
        else BAD("--resp-cross-slot wants aware or allow");
    }
    else if (!strcmp(k, "resp-output-limit")) { if (!parse_ll(v, 0, 1LL << 40, &r->output_limit)) BAD("--resp-output-limit wants 0 (unlimited)..1099511627776 bytes"); }
    else if (!strcmp(k, "http-port")) { if (!parse_int(v, 1, 65535, &o->http_port)) BAD("--http-port wants 1..65535"); }
    else BAD("unknown option '%s'", key);
#undef STR
#undef BAD
    return LATTICE_OK;
}

typedef struct ini_ctx {
    latticed_options *o;
    char *err;
    size_t errlen;
    bool failed;
} ini_ctx;

static int on_ini_line(void *user, const char *section, const char *name, const char *value)
{
    (void)section;
    ini_ctx *x = user;
    if (x->failed) return 0;
    if (latticed_option_set(x->o, name, value, x->err, x->errlen) != LATTICE_OK) {
        x->failed = true;
        return 0;
    }
    return 1;
}

lattice_status latticed_options_load_file(latticed_options *o, const char *path, char *err, size_t errlen)
{
    ini_ctx x = {o, err, errlen, false};
    int rc = ini_parse(path, on_ini_line, &x);
    if (rc == -1) {
        snprintf(err, errlen, "cannot open config file %s: %s", path, strerror(errno));
        return LATTICE_ERR_INVAL;
    }
    if (rc != 0) {
        char inner[256];
        snprintf(inner, sizeof inner, "%s", x.failed ? err : "syntax error");
        snprintf(err, errlen, "%s line %d: %s", path, rc, inner);
        return LATTICE_ERR_INVAL;
    }
    return LATTICE_OK;
}

static const struct option long_opts[] = {
    {"config", required_argument, 0, 'f'},   {"cluster", required_argument, 0, 1},
    {"host", required_argument, 0, 1},       {"port", required_argument, 0, 1},
    {"port-range", required_argument, 0, 1}, {"ip-finder", required_argument, 0, 1},
    {"client", no_argument, 0, 1},           {"cache", required_argument, 0, 1},
    {"region-mb", required_argument, 0, 1},  {"failure-detection-ms", required_argument, 0, 1},
    {"baseline-auto-adjust-ms", required_argument, 0, 1},
    {"region-policy", required_argument, 0, 1},
    {"data-dir", required_argument, 0, 1},   {"wal-fsync", required_argument, 0, 1},
    {"checkpoint-mb", required_argument, 0, 1},
    {"restart-wait-ms", required_argument, 0, 1},
    {"secret-file", required_argument, 0, 1}, {"resp-port", required_argument, 0, 1},
    {"http-port", required_argument, 0, 1},  {"log-level", required_argument, 0, 1},
    {"max-message-bytes", required_argument, 0, 1}, {"multicast-attempts", required_argument, 0, 1},
    {"multicast-wait-ms", required_argument, 0, 1}, {"attr", required_argument, 0, 1},
    {"requirepass", required_argument, 0, 1}, {"resp-cache", required_argument, 0, 1},
    {"resp-io-threads", required_argument, 0, 1}, {"resp-poll-us", required_argument, 0, 1}, {"resp-max-clients", required_argument, 0, 1},
    {"resp-timeout", required_argument, 0, 1}, {"resp-max-bulk", required_argument, 0, 1},
    {"resp-max-multibulk", required_argument, 0, 1}, {"resp-max-inline", required_argument, 0, 1},
    {"resp-output-limit", required_argument, 0, 1}, {"resp-moved", required_argument, 0, 1},
    {"resp-cross-slot", required_argument, 0, 1},
    {"help", no_argument, 0, 'h'},           {"version", no_argument, 0, 'V'},
    {0, 0, 0, 0}};

static void usage(FILE *f)
{
    fputs("usage: latticed [OPTIONS]\n"
          "Run one Lattice node.  Every option is also a key in --config FILE (key = value);\n"
          "flags win over the file.  SIGTERM/SIGINT stop the node gracefully (announced as left).\n\n"
          "  --config FILE             read key = value lines (same keys as the flags)\n"
          "  --cluster NAME            cluster name (default lattice); other names are refused\n"
          "  --host ADDR               IPv4 address to bind and advertise (default 127.0.0.1)\n"
          "  --port N                  peer port (default 47500; 0 = any free port, handy for --client)\n"
          "  --port-range K            when the port is taken try the next, up to K ports (default 100)\n"
          "  --ip-finder SPEC          repeatable: HOST[:PORT[..PORT]][,...] (Ignite format; no port =\n"
          "                            47500..47509), multicast://GROUP[:PORT] (228.1.2.4:47400) or\n"
          "                            dns://NAME[:PORT] (every A record, resolved again every 5 s);\n"
          "                            none given: --host's 47500..47509, where bare nodes bind\n"
          "  --client                  client mode: listed as client, never coordinator, holds no data\n"
          "  --failure-detection-ms N  remove a node silent this long (default 10000)\n"
          "  --baseline-auto-adjust-ms N  a baseline server gone this long stops counting for quorum\n"
          "                            (default 60000: well above a restart; -1 = only `lattice baseline`)\n"
          "  --secret-file FILE        cluster secret: every peer frame carries an HMAC keyed by it\n"
          "  --max-message-bytes N     drop control frames above N bytes (default 1048576)\n"
          "  --multicast-attempts N    probes before a lone server starts a grid (default 2)\n"
          "  --multicast-wait-ms N     wait between probes (default 300)\n"
          "  --attr KEY=VALUE          repeatable: a string attribute advertised in the topology\n"
          "  --log-level L             error|warn|info|debug|trace (default info)\n"
          "  --cache NAME[:k=v,...]    repeatable: a cache this node declares (docs/CACHES.md)\n"
          "  --region-mb N             data region bound in MiB (default 256)\n"
          "  --region-policy P         when the region is full: reject (default) fails writes with\n"
          "                            REGION_FULL (RESP -OOM); evict evicts least recently used\n"
          "                            entries, chosen by each partition's primary and removed on\n"
          "                            every copy\n"
          "  --data-dir DIR            persistence (docs/PERSISTENCE.md): a write-ahead log and\n"
          "                            checkpoints in DIR; a restart reloads them (default: memory only)\n"
          "  --wal-fsync M             when a write is acknowledged: group (default: after the fsync\n"
          "                            of its batch, batches gather for <= 1 ms), always (each batch\n"
          "                            fsynced at once), off (written, never fsynced: survives kill -9,\n"
          "                            not a power cut)\n"
          "  --checkpoint-mb N         write a checkpoint (and drop the log it covers) once the log\n"
          "                            holds N MiB since the last (default 256); also at a graceful stop\n"
          "  --restart-wait-ms N       whole-grid restart: the coordinator waits this long for every\n"
          "                            baseline server's data directory before it serves without the\n"
          "                            missing ones (default 300000; -1 no end)\n"
          "  --resp-port N             serve the Redis protocol (RESP2/3) on this port (docs/RESP.md)\n"
          "  --requirepass PASS        RESP clients must AUTH with PASS first\n"
          "  --resp-cache NAME         cache the RESP commands use (default: default)\n"
          "  --resp-io-threads N       RESP IO threads, 1..8 (default 1)\n"
          "  --resp-poll-us N          an IO thread that just had requests polls N us for\n"
          "                            more before it sleeps; 0 = always sleep (default 50)\n"
          "  --resp-max-clients N      refuse connections beyond N (default 10000)\n"
          "  --resp-timeout S          close RESP clients idle S seconds (default 0 = never)\n"
          "  --resp-max-bulk N         largest bulk string in bytes (default 536870912)\n"
          "  --resp-max-multibulk N    most arguments of one command (default 1048576)\n"
          "  --resp-max-inline N       longest inline command / header line (default 65536)\n"
          "  --resp-output-limit N     close a client with more than N reply bytes pending (default 0 = none)\n"
          "  --resp-moved M            MOVED for: aware (clients that route by the slot map; default),\n"
          "                            always (every client, as Redis Cluster: redis-cli -c), never\n"
          "  --resp-cross-slot M       keys of several slots in one command or MULTI/EXEC run as one\n"
          "                            transaction for: aware (plain clients; cluster-aware ones get\n"
          "                            CROSSSLOT, as Redis Cluster; default), allow (every client)\n"
          "  --http-port N             serve the web console (/), /metrics, /health and the JSON pages\n"
          "                            (/topology /caches /partitions /rebalance /slowlog) on this port\n"
          "  --help, --version\n",
          f);
}

int latticed_options_parse(latticed_options *o, int argc, char **argv)
{
    char err[512];
    /* --config first, so every flag wins over the file whatever the order. */
    for (int i = 1; i < argc; i++) {
        const char *path = NULL;
        if (!strcmp(argv[i], "--config") && i + 1 < argc) path = argv[i + 1];
        else if (!strncmp(argv[i], "--config=", 9)) path = argv[i] + 9;
        if (path && latticed_options_load_file(o, path, err, sizeof err) != LATTICE_OK) {
            fprintf(stderr, "latticed: %s\n", err);
            return 2;
        }
    }
    optind = 1;
    opterr = 0;
    int idx, ch;
    while ((ch = getopt_long(argc, argv, "", long_opts, &idx)) != -1) {
        switch (ch) {
        case 'f': break;
        case 'h': usage(stdout); return 1;
        case 'V': printf("latticed %s (protocol %d.%d)\n", LATTICE_VERSION, LATTICE_PROTO_MAJOR, LATTICE_PROTO_MINOR); return 1;
        case 1:
            if (latticed_option_set(o, long_opts[idx].name, optarg, err, sizeof err) != LATTICE_OK) {
                fprintf(stderr, "latticed: %s\n", err);
                return 2;
            }
            break;
        default:
            fprintf(stderr, "latticed: unknown or incomplete option '%s' (see --help)\n", argv[optind - 1]);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "latticed: unexpected argument '%s' (see --help)\n", argv[optind]);
        return 2;
    }
    return 0;
}
