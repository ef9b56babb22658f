/*
 * Integration harness: real latticed processes on loopback.
 *  - it_spawn() starts a process with its output in a log file under the
 *    test's temp dir; a guardian process kills every one (SIGKILL) when the
 *    test process ends, pass, fail or timeout; on failure every log is
 *    printed (tail) to stderr.
 *  - it_wait_for(cond, ctx, timeout_ms) polls a condition; tests never
 *    assert on elapsed time.
 *  - it_top(finder, extra) runs `lattice --json top` and parses it (jansson).
 */
#ifndef LATTICE_IT_HARNESS_H
#define LATTICE_IT_HARNESS_H

#include <check.h>
#include <jansson.h>
#include <stdbool.h>
#include <sys/types.h>

#define IT_MAX_PROCS 64

typedef struct it_proc {
    pid_t pid;
    char name[64];
    char log[400];
    bool running;
} it_proc;

/* Call first in every test: makes the temp dir and forks the guardian,
 * which kills every spawned process, removes the test's namespaces and
 * prints the logs (or deletes them) however the test process ends. */
void it_begin(const char *test_name);
/* Call last in every test: it passed (the guardian deletes the temp dir). */
void it_end(void);
/* Have the guardian delete this network namespace at the end. */
void it_guard_netns(const char *ns);
const char *it_dir(void);
/* A base port with `n` consecutive free TCP ports on 127.0.0.1, none of them
 * in a range an earlier call of this process returned. */
int it_free_ports(int n);
/* Start latticed with these arguments (NULL-terminated), log to <name>.log. */
it_proc *it_latticed(const char *name, const char *const *args);
/* Start any program (argv[0] = path). `ns` != NULL runs it inside that netns. */
it_proc *it_spawn(const char *name, const char *ns, const char *const *argv);
void it_signal(it_proc *p, int sig);
/* Wait up to timeout_ms for p to exit; true when it did. */
bool it_wait_exit(it_proc *p, int timeout_ms);
bool it_wait_for(bool (*cond)(void *ctx), void *ctx, int timeout_ms);
/* Does p's log contain `needle`? */
bool it_log_has(const it_proc *p, const char *needle);
bool it_wait_log(const it_proc *p, const char *needle, int timeout_ms);
/* The topology versions p's log reports ("topology M.m") never go back.
 * Fills *last_major (the last one) when not NULL. */
bool it_log_versions_monotonic(const it_proc *p, unsigned long long *last_major);
/* `lattice [extra...] --json top` through finder; NULL when it failed.
 * extra may be NULL; ns != NULL runs it inside a namespace. */
json_t *it_top(const char *finder, const char *const *extra, const char *ns);
/* Wait up to timeout_ms until `lattice baseline` counts `servers` servers.
 * A baseline grows by one server at a time after joins, and a node stopped
 * or killed before it holds the others may take its majority away
 * (CLUSTERDOWN): tests that fault a node they just started wait for this. */
bool it_wait_baseline(const char *finder, int servers, int timeout_ms);
/* Wait up to timeout_ms until `lattice partitions CACHE` shows the cache
 * settled on `servers` servers: none LOST, none under-replicated (every
 * backup copy OWNING), the base spanning them all.  Right after a grid forms
 * the base is its first server until the rebalance to the others is done:
 * a fault before that hits the only copy. */
bool it_wait_settled(const char *finder, const char *cache, int servers, int timeout_ms);
/* Helpers on a top JSON. */
size_t it_servers(json_t *top);
size_t it_clients(json_t *top);
json_t *it_node_by_cid(json_t *top, const char *consistent_id);
bool it_orders_unique(json_t *top);
/* Write a file under the temp dir; returns its path (static buffer per call slot). */
const char *it_write_file(const char *name, const char *content);
/* Run a shell command (for ip netns ...); returns exit status. */
int it_sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Runs a shell command and captures its output (at most cap - 1 bytes, NUL
 * terminated): stdout and stderr, or (it_capture_stdout) stdout alone, for
 * JSON.  Returns its exit status, -1 when it could not run. */
int it_capture(char *out, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int it_capture_stdout(char *out, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* `lattice verify CACHE` over finder: the test fails unless it answers and
 * finds no conflicting copies. */
void it_verify_clean(const char *finder, const char *cache);

/* The data channel as a peer speaks it (docs/PROTOCOL.md, "Data channel
 * transport"), written here from that text: a blocking TCP connection to a
 * data_addr ("tcp://host:port"), or -1.  it_data_send writes the 8-byte
 * header and msg then mac (mac_len 0: none); false when the write failed.
 * it_data_recv reads one frame's message into buf (at most cap; its MAC is
 * skipped): its length, 0 when the node closed the connection, -1 when
 * nothing came within ms. */
int it_data_connect(const char *addr);
bool it_data_send(int fd, const void *msg, size_t len, const void *mac, size_t mac_len);
long it_data_recv(int fd, void *buf, size_t cap, int ms);

/* A test a program runs by name: `it_x [NAME...]` runs only the named ones. */
typedef struct it_named {
    const char *name;
    const TTest *const *test;
} it_named;
/* Adds to tc the tests of list named on the command line (all without names). */
void it_add_named(TCase *tc, const it_named *list, size_t n, int argc, char **argv);
/* Runs the suite; the exit status of the test program (0: every test passed). */
int it_run_suite(Suite *s);

#endif
