/*
 * lattice get/put/del CACHE KEY [VALUE | - | --file FILE]: one operation
 * through a client node (routed to the key's primary like any
 * application's).  A value too large for the command line comes from
 * standard input ("-") or a file.
 * Exit status: 0 done, 1 not found (get/del) or failed, 2 usage.
 */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "lattice/alloc.h"

static int usage(const char *cmd, FILE *f, int rc)
{
    if (!strcmp(cmd, "put"))
        fprintf(f, "usage: lattice [GLOBAL OPTIONS] put CACHE KEY VALUE | - | --file FILE\n"
                   "  store VALUE (or standard input, or the file's bytes) under KEY in cache CACHE\n");
    else
        fprintf(f, "usage: lattice [GLOBAL OPTIONS] %s CACHE KEY\n  %s KEY of cache CACHE (exit 1 when absent)\n", cmd,
                !strcmp(cmd, "get") ? "print the value of" : "remove");
    return rc;
}

/* The whole of f into *buf (lt_malloc'd). */
static bool slurp(FILE *f, char **buf, size_t *len)
{
    size_t cap = 1 << 16, n = 0;
    char *b = lt_malloc(cap);
    while (b) {
        n += fread(b + n, 1, cap - n, f);
        if (n < cap) break;
        char *nb = lt_realloc(b, cap * 2);
        if (!nb) break;
        b = nb;
        cap *= 2;
    }
    if (!b || ferror(f) || (n == cap)) {
        lt_free(b);
        return false;
    }
    *buf = b;
    *len = n;
    return true;
}

/* put's value: the argument, standard input ("-") or a file; 0 or an exit
 * status (printed why). */
static int put_value(int argc, char **argv, char **v, size_t *vl, bool *owned)
{
    *owned = false;
    if (argc == 4 && strcmp(argv[3], "-") != 0) {
        *v = argv[3];
        *vl = strlen(argv[3]);
        return 0;
    }
    FILE *f = stdin;
    const char *what = "standard input";
    if (argc == 5 && !strcmp(argv[3], "--file")) {
        what = argv[4];
        f = fopen(argv[4], "rb");
        if (!f) {
            fprintf(stderr, "lattice put: cannot read %s: %m\n", argv[4]);
            return 2;
        }
    } else if (argc != 4) {
        return usage("put", stderr, 2);
    }
    bool ok = slurp(f, v, vl);
    if (f != stdin) fclose(f);
    if (!ok) {
        fprintf(stderr, "lattice put: cannot read the value from %s\n", what);
        return 1;
    }
    *owned = true;
    return 0;
}

int cli_kv(cli_globals *g, int argc, char **argv)
{
    const char *cmd = argv[0];
    bool put = !strcmp(cmd, "put");
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) return usage(cmd, stdout, 0);
    if (put ? argc != 4 && argc != 5 : argc != 3) return usage(cmd, stderr, 2);
    char *pv = NULL;
    size_t pvl = 0;
    bool owned = false;
    if (put) {
        int rc = put_value(argc, argv, &pv, &pvl, &owned);
        if (rc) return rc;
    }
    lattice_node *n = cli_attach(g);
    if (!n) {
        if (owned) lt_free(pv);
        return 1;
    }
    const char *cache = argv[1], *key = argv[2];
    lattice_status st;
    void *v = NULL;
    size_t vl = 0;
    if (!strcmp(cmd, "get")) st = lattice_cache_get(n, cache, key, strlen(key), &v, &vl);
    else if (put) st = lattice_cache_put(n, cache, key, strlen(key), pv, pvl);
    else st = lattice_cache_remove(n, cache, key, strlen(key));
    int rc = st == LATTICE_OK ? 0 : 1;
    if (g->json) {
        json_t *o = json_pack("{s:s, s:s, s:s, s:b}", "op", cmd, "cache", cache, "key", key, "ok", st == LATTICE_OK);
        if (st != LATTICE_OK) json_object_set_new(o, "error", json_string(lattice_strerror(st)));
        if (v || (st == LATTICE_OK && !strcmp(cmd, "get"))) json_object_set_new(o, "value", json_stringn(v ? v : "", vl));
        cli_print_json(o);
    } else if (st == LATTICE_OK && !strcmp(cmd, "get")) {
        fwrite(v, 1, vl, stdout);
        putchar('\n');
    } else if (st == LATTICE_ERR_NOT_FOUND) {
        fprintf(stderr, "(not found)\n");
    } else if (st == LATTICE_ERR_NO_CACHE) {
        fprintf(stderr, "lattice %s: no cache named '%s' (lattice caches lists them)\n", cmd, cache);
    } else if (st == LATTICE_ERR_TOO_LARGE) {
        fprintf(stderr, "lattice %s: key or value above the limits of cache '%s' (max_key_bytes, max_value_bytes; value %zu bytes)\n",
                cmd, cache, pvl);
    } else if (st != LATTICE_OK) {
        fprintf(stderr, "lattice %s %s %s: %s\n", cmd, cache, key, lattice_strerror(st));
    }
    lt_free(v);
    if (owned) lt_free(pv);
    fflush(stdout);
    lattice_node_stop(n);
    return rc;
}
