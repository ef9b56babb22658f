/*
 * lattice get/put/del CACHE KEY [VALUE]: one operation through a client
 * node (routed to the key's primary like any application's).
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
        fprintf(f, "usage: lattice [GLOBAL OPTIONS] put CACHE KEY VALUE\n  store VALUE under KEY in cache CACHE\n");
    else
        fprintf(f, "usage: lattice [GLOBAL OPTIONS] %s CACHE KEY\n  %s KEY of cache CACHE (exit 1 when absent)\n", cmd,
                !strcmp(cmd, "get") ? "print the value of" : "remove");
    return rc;
}

int cli_kv(cli_globals *g, int argc, char **argv)
{
    const char *cmd = argv[0];
    int want = !strcmp(cmd, "put") ? 4 : 3;
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) return usage(cmd, stdout, 0);
    if (argc != want) return usage(cmd, stderr, 2);
    lattice_node *n = cli_attach(g);
    if (!n) return 1;
    const char *cache = argv[1], *key = argv[2];
    lattice_status st;
    void *v = NULL;
    size_t vl = 0;
    if (!strcmp(cmd, "get")) st = lattice_cache_get(n, cache, key, strlen(key), &v, &vl);
    else if (!strcmp(cmd, "put")) st = lattice_cache_put(n, cache, key, strlen(key), argv[3], strlen(argv[3]));
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
    } else if (st != LATTICE_OK) {
        fprintf(stderr, "lattice %s: %s\n", cmd, lattice_strerror(st));
    }
    lt_free(v);
    fflush(stdout);
    lattice_node_stop(n);
    return rc;
}
