#include "grid_client.h"

#include <check.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "lattice/alloc.h"

size_t servers_of(lattice_node *n)
{
    lattice_topology *t = lattice_node_topology(n);
    size_t s = 0;
    for (size_t i = 0; t && i < lattice_topology_size(t); i++)
        s += lattice_topology_member(t, i)->role == LATTICE_ROLE_SERVER;
    if (t) lattice_topology_release(t);
    return s;
}

typedef struct wait_servers {
    lattice_node *n;
    size_t want;
} wait_servers;

static bool has_servers(void *ctx)
{
    wait_servers *w = ctx;
    return servers_of(w->n) == w->want;
}

void wait_grid(lattice_node *n, size_t servers)
{
    wait_servers w = {n, servers};
    ck_assert_msg(it_wait_for(has_servers, &w, 20000), "grid never reached %zu servers", servers);
}

void key_of(char *buf, size_t cap, const char *prefix, long i) { snprintf(buf, cap, "%s-%08ld", prefix, i); }

/* Reads keys [0, count) through node n in batches of 500 and returns how
 * many are present with the expected value "v<i>". */
long count_present(lattice_node *n, const char *cache, const char *prefix, long count, const uint8_t *only)
{
    long present = 0;
    enum { B = 500 };
    static char keys[B][48];
    lattice_kv kv[B];
    for (long i = 0; i < count; i += B) {
        size_t m = 0;
        for (long k = i; k < count && k < i + B; k++) {
            if (only && !only[k]) continue;
            key_of(keys[m], sizeof keys[m], prefix, k);
            kv[m] = (lattice_kv){keys[m], strlen(keys[m]), NULL, 0, 0};
            m++;
        }
        if (!m) continue;
        lattice_status st = lattice_cache_get_all(n, cache, kv, m);
        ck_assert_msg(st == LATTICE_OK, "get_all: %s", lattice_strerror(st));
        for (size_t k = 0; k < m; k++) {
            if (kv[k].status == LATTICE_OK) {
                char want[64];
                snprintf(want, sizeof want, "v%s", keys[k] + strlen(prefix) + 1);
                if (kv[k].value_len == strlen(want) && memcmp(kv[k].value, want, kv[k].value_len) == 0) present++;
            }
            lt_free(kv[k].value);
        }
    }
    return present;
}
