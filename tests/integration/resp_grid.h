/*
 * A grid of latticed servers with RESP ports, for the it_resp* tests:
 * server i has peer port peer_base+i and RESP port resp_base+i; the finder
 * covers the grid's capacity.  Test code only.
 */
#ifndef LATTICE_IT_RESP_GRID_H
#define LATTICE_IT_RESP_GRID_H

#include <hiredis.h>

#include "harness.h"

#define RG_MAX 4

extern char finder[64];
extern int peer_base, resp_base;
extern it_proc *srv[RG_MAX];

/* Starts server i ("s<i>") with these extra arguments (NULL-terminated). */
void start_node(int i, const char *const *extra);
/* Ports for `capacity` servers; starts the first n. */
void start_grid(int n, int capacity, const char *const *extra);
/* A connection to server i's RESP port (10 s timeouts), NULL when refused. */
redisContext *try_conn(int i);
/* The same; the test fails when it cannot connect. */
redisContext *conn_to(int i);
/* Waits until server i acknowledges a SET (it:probe); the test fails after timeout_ms. */
void wait_serving(int i, int timeout_ms);
/* A command's reply; the test fails when there is none. */
redisReply *cmd(redisContext *c, const char *fmt, ...);
/* A counter of server i's INFO stats ("name:"; -1: no answer). */
long long info_stat(int i, const char *name);
/* Runs a shell command (stderr with stdout); its output in out_buf. */
extern char out_buf[1 << 20];
int run(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Redis's hash slot of a key (its {tag} when it has one). */
int rg_slot_of(const char *k);
/* The node index (0..) of slot's primary and first replica in node i's
 * CLUSTER SLOTS, -1 when none. */
void rg_owners_of(int i, int slot, int *primary, int *replica);
/* it_wait_for's test that every live node of `nodes` (but `absent`, -1
 * none) names the same live primary and replica of `slot`. */
typedef struct rg_spread {
    int slot, absent;
    int nodes;
} rg_spread;
bool rg_settled(void *rg_spread_ctx);
/* it_wait_for's test that the baseline counts three servers. */
bool rg_baseline_of_three(void *unused);

#endif
