/*
 * lattice: inspect and drive a grid.  Global options come before the
 * command:  lattice --ip-finder 127.0.0.1:47500..47502 --json top
 */
#include <getopt.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "lattice/alloc.h"
#include "lattice/log.h"

static const cli_command commands[] = {
    {"top", "topology version, coordinator and every node with its state (without joining the grid)", cli_top},
    {"get", "get CACHE KEY: print a value", cli_kv},
    {"put", "put CACHE KEY VALUE|-|--file FILE: store a value (argument, standard input or file)", cli_kv},
    {"del", "del CACHE KEY: remove a key", cli_kv},
    {"cache", "cache create NAME [k=v...] | cache destroy NAME | cache reset-lost NAME", cli_cache},
    {"caches", "every cache: mode, partitions, backups, sync, size; per node entries and partitions, reads/writes/hits/misses", cli_caches},
    {"bench", "load generator: get, put, putget, putall; ops/s every second, p50/p99/p99.9 latency", cli_bench},
    {"partitions", "partitions CACHE [--detail]: lost/under-replicated partitions, primaries and backups per node, balance", cli_partitions},
    {"rebalance", "rebalance [--watch]: partitions left, entries/bytes moved, rate, estimate per cache", cli_rebalance},
    {"verify", "verify CACHE: compare every copy's content hash, size and counter; exit 3 on conflict", cli_verify},
    {"baseline", "baseline [show] | set|add|remove [--force] CONSISTENT_ID...: the servers that count for quorum", cli_baseline},
};
#define N_COMMANDS (sizeof commands / sizeof commands[0])

static void usage(FILE *f)
{
    fputs("usage: lattice [GLOBAL OPTIONS] COMMAND [ARGS]   (lattice COMMAND --help for a command)\n\n"
          "Global options (before the command):\n"
          "  --ip-finder SPEC     repeatable: HOST[:PORT[..PORT]][,...] or multicast://GROUP[:PORT]\n"
          "  --connect HOST:PORT  repeatable: one node to attach through (same as --ip-finder HOST:PORT)\n"
          "                       (neither given: 127.0.0.1:47500..47509)\n"
          "  --cluster NAME       cluster name (default lattice)\n"
          "  --secret-file FILE   the cluster secret, as given to latticed\n"
          "  --host ADDR          local address to attach from (default: the one that routes to the grid)\n"
          "  --timeout-ms N       how long to wait for the grid (default 10000)\n"
          "  --json               machine-readable output (one JSON object)\n"
          "  --log-level L        error|warn|info|debug (default error)\n"
          "  --help, --version\n\nCommands:\n",
          f);
    for (size_t i = 0; i < N_COMMANDS; i++) fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fputs("\ntop, caches, partitions, rebalance, verify and baseline (show) inspect the grid without joining it\n"
          "(the topology version does not move); the other commands attach as a client node for the call.\n",
          f);
}

static const struct option opts[] = {
    {"ip-finder", required_argument, 0, 'i'}, {"connect", required_argument, 0, 'c'},
    {"cluster", required_argument, 0, 'n'},   {"secret-file", required_argument, 0, 's'},
    {"host", required_argument, 0, 'H'},      {"timeout-ms", required_argument, 0, 't'},
    {"json", no_argument, 0, 'j'},            {"log-level", required_argument, 0, 'l'},
    {"help", no_argument, 0, 'h'},            {"version", no_argument, 0, 'V'},
    {0, 0, 0, 0}};

void cli_print_json(json_t *o)
{
    char *s = json_dumps(o, JSON_COMPACT);
    if (s) puts(s);
    lt_free(s); /* jansson allocates through lt_malloc (set in main) */
    json_decref(o);
}

bool cli_wants_help(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) return true;
    return false;
}

int main(int argc, char **argv)
{
    cli_globals g;
    memset(&g, 0, sizeof g);
    lattice_config_init(&g.node);
    g.node.host = NULL; /* --host, else cli_pick_host's choice */
    g.node.client = true;
    g.node.port = 0; /* an ephemeral peer port: never takes a server's */
    g.timeout_ms = 10000;
    lattice_log_set_level(LT_ERROR);
    json_set_alloc_funcs(lt_malloc, lt_free); /* every allocation through the lattice wrapper */
    signal(SIGPIPE, SIG_IGN);
    int ch;
    while ((ch = getopt_long(argc, argv, "+", opts, NULL)) != -1) {
        switch (ch) {
        case 'i':
        case 'c':
            if (g.node.n_finders == LATTICE_MAX_FINDERS) {
                fprintf(stderr, "lattice: at most %d finders\n", LATTICE_MAX_FINDERS);
                return 2;
            }
            if (ch == 'c' && !strchr(optarg, ':')) {
                fprintf(stderr, "lattice: --connect wants HOST:PORT, not '%s'\n", optarg);
                return 2;
            }
            g.node.finders[g.node.n_finders++] = optarg;
            break;
        case 'n': g.node.cluster = optarg; break;
        case 's': g.node.secret_file = optarg; break;
        case 'H': g.node.host = optarg; break;
        case 't': {
            char *end;
            long v = strtol(optarg, &end, 10);
            if (*end || v < 100 || v > 600000) {
                fprintf(stderr, "lattice: --timeout-ms wants 100..600000\n");
                return 2;
            }
            g.timeout_ms = (int)v;
            break;
        }
        case 'j': g.json = true; break;
        case 'l': {
            int l = lattice_log_parse_level(optarg);
            if (l < 0) {
                fprintf(stderr, "lattice: --log-level wants error, warn, info or debug\n");
                return 2;
            }
            lattice_log_set_level(l);
            break;
        }
        case 'h': usage(stdout); return 0;
        case 'V': printf("lattice %s\n", LATTICE_VERSION); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind >= argc) {
        usage(stderr);
        return 2;
    }
    if (!g.node.n_finders) g.node.finders[g.node.n_finders++] = "127.0.0.1:47500..47509";
    cli_pick_host(&g);
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (strcmp(argv[optind], commands[i].name) == 0) return commands[i].run(&g, argc - optind, argv + optind);
    fprintf(stderr, "lattice: unknown command '%s'\n", argv[optind]);
    usage(stderr);
    return 2;
}
