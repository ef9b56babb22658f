/*
 * The DNS IP finder, dns://NAME[:PORT]: every A record of NAME is a join
 * target, and the name is resolved again while the node runs.  The test
 * makes its names resolve through /etc/hosts (glibc's files source, "multi
 * on": every line of a name is one address): it appends lines marked
 * "# lattice-it-dns" and removes every such line when it ends (and any a
 * crashed run left).  Needs root, as the CI has.
 */
#include <check.h>
#include <signal.h>
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
        n[i] = it_latticed(nm, args);
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
    it_proc *c = it_latticed("client", cargs);
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
    tcase_add_test(tc, a_bad_dns_finder_is_refused_with_its_format);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
