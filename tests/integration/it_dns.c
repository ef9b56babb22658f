/*
 * The DNS IP finder, dns://NAME[:PORT]: every A record of NAME is a join
 * target, and the name is resolved again while the node runs.  The test
 * makes its names resolve through /etc/hosts (glibc's files source, "multi
 * on": every line of a name is one address): it appends lines marked
 * "# lattice-it-dns" and removes every such line when it ends (and any a
 * crashed run left).  Every node runs in a mount namespace of its own whose
 * /etc/resolv.conf names a loopback name server of the test's: nothing
 * listens there (a name outside /etc/hosts fails at once, and no query
 * leaves the machine), or a UDP socket that never answers (a hanging name
 * server).  Needs root, as the CI has.
 */
#include <arpa/inet.h>
#include <check.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

#define MARK "# lattice-it-dns"

static void hosts_clean(void)
{
    /* Rewritten in place (cat >), not renamed: /etc/hosts may be a bind mount. */
    ck_assert_int_eq(it_sh("grep -v '%s' /etc/hosts > %s/hosts.new; cat %s/hosts.new > /etc/hosts", MARK, it_dir(),
                           it_dir()),
                     0);
}

static void hosts_add(const char *addr, const char *name)
{
    ck_assert_int_eq(it_sh("echo '%s %s %s' >> /etc/hosts", addr, name, MARK), 0);
}

static int net; /* 127.<net>.<sub>.x: addresses no other test uses */
static int sub;
static void pick_net(void)
{
    srand((unsigned)time(NULL) ^ (unsigned)getpid());
    net = 100 + rand() % 100;
    sub = 1 + rand() % 250;
}

static const char *addr(int x)
{
    static char a[8][32];
    static int k;
    char *s = a[k++ % 8];
    snprintf(s, 32, "127.%d.%d.%d", net, sub, x);
    return s;
}

/* A resolv.conf naming 127.<net>.<sub>.<x>:53 as the only name server. */
static const char *resolv_conf(int x, int timeout_s, int attempts)
{
    char file[32], body[200];
    snprintf(file, sizeof file, "resolv-%d.conf", x);
    snprintf(body, sizeof body, "nameserver %s\noptions timeout:%d attempts:%d\n", addr(x), timeout_s, attempts);
    return it_write_file(file, body);
}

/* latticed with resolv as its /etc/resolv.conf (a private mount namespace:
 * unshare makes the mounts private, so the host's file is untouched). */
static it_proc *dns_latticed(const char *name, const char *resolv, const char *const *args)
{
    const char *argv[64] = {"/usr/bin/unshare", "-m", "/bin/sh", "-c", "mount --bind \"$0\" /etc/resolv.conf && exec \"$@\"",
                            resolv, LATTICED_PATH};
    int k = 7;
    for (int i = 0; args[i] && k < 63; i++) argv[k++] = args[i];
    argv[k] = NULL;
    return it_spawn(name, NULL, argv);
}

/* The quiet resolver: a name server address nothing listens on. */
static const char *no_dns(void) { return resolv_conf(54, 1, 1); }

static int log_count(const it_proc *p, const char *needle)
{
    char out[32];
    it_capture_stdout(out, sizeof out, "grep -cF -- '%s' '%s'", needle, p->log);
    return atoi(out);
}

typedef struct want {
    char finder[300];
    size_t servers;
} want;

static bool grid_of(void *ctx)
{
    want *w = ctx;
    json_t *t = it_top(w->finder, NULL, NULL);
    bool ok = t && it_servers(t) == w->servers;
    json_decref(t);
    return ok;
}

START_TEST(every_a_record_of_the_name_is_a_join_target)
{
    it_begin("dns_records");
    pick_net();
    hosts_clean();
    char name[64], finder[128], port[16];
    snprintf(name, sizeof name, "grid-%d.lattice-it.test", (int)getpid());
    int p = it_free_ports(1);
    snprintf(port, sizeof port, "%d", p);
    snprintf(finder, sizeof finder, "dns://%s:%d", name, p);
    /* Three nodes on three addresses, one port, one name for all. */
    for (int i = 1; i <= 3; i++) hosts_add(addr(i), name);
    it_proc *n[3];
    for (int i = 0; i < 3; i++) {
        char nm[16];
        snprintf(nm, sizeof nm, "n%d", i);
        const char *args[] = {"--host", addr(i + 1), "--port", port, "--port-range", "1", "--ip-finder", finder,
                              "--failure-detection-ms", "1000", NULL};
        n[i] = dns_latticed(nm, no_dns(), args);
        ck_assert(it_wait_log(n[i], " ready: ", 20000));
    }
    /* One grid (the CLI finds it through the name too). */
    want w;
    snprintf(w.finder, sizeof w.finder, "%s", finder);
    w.servers = 3;
    ck_assert_msg(it_wait_for(grid_of, &w, 20000), "no grid of 3 through %s", finder);
    for (int i = 1; i < 3; i++) ck_assert_msg(!it_log_has(n[i], "starting cluster"), "n%d seeded a grid of its own", i);
    hosts_clean();
    it_end();
}
END_TEST

START_TEST(the_name_is_resolved_again_while_the_node_runs)
{
    it_begin("dns_refresh");
    pick_net();
    hosts_clean();
    char name[64], finder[128], port[16];
    snprintf(name, sizeof name, "late-%d.lattice-it.test", (int)getpid());
    int p = it_free_ports(1);
    snprintf(port, sizeof port, "%d", p);
    snprintf(finder, sizeof finder, "dns://%s:%d", name, p);
    /* A client whose name has no record yet: it waits (clients never seed). */
    const char *cargs[] = {"--client", "--host", addr(9), "--port", "0", "--ip-finder", finder, NULL};
    it_proc *c = dns_latticed("client", no_dns(), cargs);
    ck_assert(it_wait_log(c, "no A record", 20000));
    /* A server appears, and so does its record. */
    char self[64];
    snprintf(self, sizeof self, "%s:%d", addr(5), p);
    const char *sargs[] = {"--host", addr(5), "--port", port, "--port-range", "1", "--ip-finder", self, NULL};
    it_proc *s = it_latticed("server", sargs);
    ck_assert(it_wait_log(s, " ready: ", 20000));
    ck_assert(!it_log_has(c, " ready: "));
    hosts_add(addr(5), name);
    ck_assert_msg(it_wait_log(c, " ready: ", 30000), "the client never re-resolved %s", name);
    hosts_clean();
    it_end();
}
END_TEST

/* A name server that never answers: the lookup hangs (glibc: timeout 30 s,
 * 5 attempts), and the node must go on heartbeating meanwhile - a lookup on
 * the discovery thread stopped heartbeats, and the grid declared the node
 * failed after failure-detection-ms. */
START_TEST(a_hanging_name_server_does_not_stop_heartbeats)
{
    it_begin("dns_hang");
    pick_net();
    hosts_clean();
    int ns = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0); /* read by nobody */
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(53)};
    inet_pton(AF_INET, addr(53), &sa.sin_addr);
    ck_assert_int_eq(bind(ns, (struct sockaddr *)&sa, sizeof sa), 0);
    const char *hang = resolv_conf(53, 30, 5);
    int p = it_free_ports(1);
    char port[16], seed[64], finder[128];
    snprintf(port, sizeof port, "%d", p);
    snprintf(seed, sizeof seed, "%s:%d", addr(1), p);
    snprintf(finder, sizeof finder, "dns://hang-%d.lattice-it.test:%d", (int)getpid(), p);
    const char *aargs[] = {"--host", addr(1), "--port", port, "--port-range", "1", "--ip-finder", seed,
                           "--failure-detection-ms", "1000", NULL};
    it_proc *a = dns_latticed("a", no_dns(), aargs);
    ck_assert(it_wait_log(a, " ready: ", 20000));
    /* b finds a through the static address; its dns:// name hangs. */
    const char *bargs[] = {"--host", addr(2), "--port", port, "--port-range", "1", "--ip-finder", seed,
                           "--ip-finder", finder, "--failure-detection-ms", "1000", NULL};
    it_proc *b = dns_latticed("b", hang, bargs);
    ck_assert_msg(it_wait_log(b, " ready: ", 20000), "b did not join while its name server hung");
    /* The lookup has hung for five failure detection periods by then. */
    ck_assert(it_wait_log(b, "lookup running for", 30000));
    char failed[96];
    snprintf(failed, sizeof failed, "(%s:%d, server) failed", addr(2), p);
    ck_assert_msg(!it_log_has(a, failed), "a declared b failed while b's name server hung");
    ck_assert(!it_log_has(b, "stalled"));
    ck_assert(!it_log_has(b, "rejoining"));
    want w;
    snprintf(w.finder, sizeof w.finder, "%s", seed);
    w.servers = 2;
    ck_assert(grid_of(&w));
    /* A stop does not wait for the hanging lookup. */
    it_signal(b, SIGTERM);
    ck_assert_msg(it_wait_exit(b, 10000), "b's stop waited for its name server");
    ck_assert(it_log_has(b, "stopped"));
    close(ns);
    it_end();
}
END_TEST

/* AAAA records: Lattice peers listen on their IPv4 --host, so an IPv6
 * address is no join target; a name with A and AAAA records gives its A
 * records, an AAAA-only name says it gives no usable peer - each once per
 * change, not once per lookup. */
START_TEST(aaaa_records_are_named_and_skipped)
{
    it_begin("dns_aaaa");
    pick_net();
    hosts_clean();
    char mixed[64], v6only[64], pulse[64], fm[128], f6[128], fp[128], port[16];
    int pid = (int)getpid();
    snprintf(mixed, sizeof mixed, "mixed-%d.lattice-it.test", pid);
    snprintf(v6only, sizeof v6only, "v6only-%d.lattice-it.test", pid);
    snprintf(pulse, sizeof pulse, "pulse-%d.lattice-it.test", pid);
    int p = it_free_ports(1);
    snprintf(port, sizeof port, "%d", p);
    snprintf(fm, sizeof fm, "dns://%s:%d", mixed, p);
    snprintf(f6, sizeof f6, "dns://%s:%d", v6only, p);
    snprintf(fp, sizeof fp, "dns://%s:%d", pulse, p);
    hosts_add(addr(1), mixed);
    hosts_add(addr(2), mixed);
    hosts_add("::1", mixed);
    hosts_add("::1", v6only);
    it_proc *n[2];
    for (int i = 0; i < 2; i++) {
        char nm[16];
        snprintf(nm, sizeof nm, "n%d", i);
        /* The resolver asks the names in this order, every round. */
        const char *args[] = {"--host", addr(i + 1), "--port", port, "--port-range", "1", "--ip-finder", fm,
                              "--ip-finder", f6, "--ip-finder", fp, "--failure-detection-ms", "1000", NULL};
        n[i] = dns_latticed(nm, no_dns(), args);
        ck_assert(it_wait_log(n[i], " ready: ", 20000));
    }
    want w;
    snprintf(w.finder, sizeof w.finder, "%s:%d", addr(1), p);
    w.servers = 2;
    ck_assert_msg(it_wait_for(grid_of, &w, 20000), "the A records of %s made no grid of 2", mixed);
    ck_assert(!it_log_has(n[1], "starting cluster"));
    ck_assert(it_wait_log(n[0], "AAAA record (e.g. ::1) skipped", 10000));
    ck_assert(it_wait_log(n[0], "only AAAA records (1, e.g. ::1)", 10000));
    ck_assert(it_wait_log(n[0], "gives no usable peer", 10000));
    ck_assert(it_wait_log(n[0], "no A record", 10000)); /* pulse, not in /etc/hosts yet */
    /* pulse gets a record: the round that sees it asked the other two names
     * first and got the same answers, which must not be logged again. */
    hosts_add(addr(7), pulse);
    char seen[128];
    snprintf(seen, sizeof seen, "dns://%s resolves to 1 address (%s)", pulse, addr(7));
    ck_assert_msg(it_wait_log(n[0], seen, 30000), "no round saw %s's new record", pulse);
    ck_assert_int_eq(log_count(n[0], "only AAAA records"), 1);
    ck_assert_int_eq(log_count(n[0], "AAAA record (e.g. ::1) skipped"), 1);
    ck_assert_int_eq(log_count(n[0], "no A record"), 1);
    hosts_clean();
    it_end();
}
END_TEST

START_TEST(a_bad_dns_finder_is_refused_with_its_format)
{
    it_begin("dns_bad");
    ck_assert_int_eq(it_sh("%s --ip-finder 'dns://' --help >/dev/null 2>&1", LATTICED_PATH), 2);
    ck_assert_int_eq(it_sh("%s --ip-finder 'dns://a b:1' --help >/dev/null 2>&1", LATTICED_PATH), 2);
    ck_assert_int_eq(it_sh("%s --ip-finder 'dns://name:99999' --help >/dev/null 2>&1", LATTICED_PATH), 2);
    ck_assert_int_eq(it_sh("%s --ip-finder 'dns://x' --help 2>&1 | grep -q 'dns://NAME'", LATTICED_PATH), 0);
    it_end();
}
END_TEST

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    Suite *s = suite_create("integration: dns finder");
    TCase *tc = tcase_create("dns");
    tcase_set_timeout(tc, 180);
    tcase_add_test(tc, every_a_record_of_the_name_is_a_join_target);
    tcase_add_test(tc, the_name_is_resolved_again_while_the_node_runs);
    tcase_add_test(tc, a_hanging_name_server_does_not_stop_heartbeats);
    tcase_add_test(tc, aaaa_records_are_named_and_skipped);
    tcase_add_test(tc, a_bad_dns_finder_is_refused_with_its_format);
    suite_add_tcase(s, tc);
    return it_run_suite(s);
}
