/*
 * latticed and lattice as programs: flags, --config FILE (flags win), bad
 * flags and files rejected with exit status 2 and a message, the CLI's
 * global options and errors, and the grid launcher end to end.
 */
#include <check.h>
#include <stdarg.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"


static char out[65536];

START_TEST(latticed_help_version_and_bad_flags)
{
    it_begin("flags");
    ck_assert_int_eq(it_capture(out, sizeof out, "%s --help", LATTICED_PATH), 0);
    ck_assert_ptr_nonnull(strstr(out, "--failure-detection-ms"));
    ck_assert_ptr_nonnull(strstr(out, "--secret-file"));
    ck_assert_int_eq(it_capture(out, sizeof out, "%s --version", LATTICED_PATH), 0);
    ck_assert_ptr_nonnull(strstr(out, "latticed 0.1.0"));
    static const char *bad[] = {"--port -1", "--port 70000", "--port abc", "--port-range 0", "--failure-detection-ms 5",
                                "--ip-finder 127.0.0.1:5..3", "--ip-finder multicast://10.0.0.1", "--log-level loud",
                                "--cache ''", "--cache 'c:bogus=1'", "--cache 'c:backups'", "--region-mb -1",
                                "--resp-port 0", "--no-such-flag", "stray-argument", "--attr novalue",
                                "--max-message-bytes 10", "--region-policy lru", "--resp-poll-us -1", "--resp-poll-us 2000000", NULL};
    for (int i = 0; bad[i]; i++) {
        ck_assert_msg(it_capture(out, sizeof out, "%s %s", LATTICED_PATH, bad[i]) == 2, "accepted %s", bad[i]);
        ck_assert_msg(strstr(out, "latticed: ") != NULL, "no message for %s: %s", bad[i], out);
    }
    /* A secret file that cannot be read: a clear start failure. */
    ck_assert_int_eq(it_capture(out, sizeof out, "%s --port %d --secret-file /nonexistent/s", LATTICED_PATH, it_free_ports(1)), 1);
    ck_assert_ptr_nonnull(strstr(out, "cannot read --secret-file"));
    it_end();
}
END_TEST

START_TEST(config_file_keys_apply_and_flags_win)
{
    it_begin("config");
    int b = it_free_ports(3);
    char cfg[512];
    snprintf(cfg, sizeof cfg,
             "# a latticed config file\n"
             "cluster = from-file\n"
             "port = %d\n"
             "port_range = 1\n"
             "ip-finder = 127.0.0.1:%d..%d\n"
             "failure-detection-ms = 1000\n"
             "attr = zone=a\n"
             "cache = default:backups=1,sync=full_sync\n",
             b, b, b + 2);
    const char *path = it_write_file("node.conf", cfg);
    char port[16];
    snprintf(port, sizeof port, "%d", b + 2);
    /* The flag --port wins over the file's port. */
    const char *args[] = {"--config", path, "--port", port, NULL};
    it_proc *p = it_latticed("node", args);
    ck_assert(it_wait_log(p, " ready: ", 20000));
    char finder[64], cid[32];
    snprintf(finder, sizeof finder, "127.0.0.1:%d..%d", b, b + 2);
    /* The file's cache is served with the file's options. */
    ck_assert_int_eq(it_capture(out, sizeof out, "%s --ip-finder %s --cluster from-file --json caches", LATTICE_CLI_PATH, finder), 0);
    ck_assert_ptr_nonnull(strstr(out, "\"name\":\"default\""));
    ck_assert_ptr_nonnull(strstr(out, "\"backups\":1"));
    ck_assert_ptr_nonnull(strstr(out, "\"sync\":\"full_sync\""));
    snprintf(cid, sizeof cid, "127.0.0.1:%d", b + 2);
    const char *cl[] = {"--cluster", "from-file", NULL};
    json_t *top = it_top(finder, cl, NULL);
    ck_assert_ptr_nonnull(top);
    json_t *n = it_node_by_cid(top, cid);
    ck_assert_ptr_nonnull(n);
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(n, "attrs"), "zone")), "a");
    json_decref(top);
    /* Bad files: unknown key, bad value, syntax error, missing file. */
    const char *unknown = it_write_file("unknown.conf", "cluster = x\nportt = 5\n");
    ck_assert_int_eq(it_capture(out, sizeof out, "%s --config %s", LATTICED_PATH, unknown), 2);
    ck_assert_ptr_nonnull(strstr(out, "line 2"));
    ck_assert_ptr_nonnull(strstr(out, "unknown option 'portt'"));
    const char *badval = it_write_file("badval.conf", "port = -3\n");
    ck_assert_int_eq(it_capture(out, sizeof out, "%s --config %s", LATTICED_PATH, badval), 2);
    const char *syntax = it_write_file("syntax.conf", "this line has no equals sign\n");
    ck_assert_int_eq(it_capture(out, sizeof out, "%s --config %s", LATTICED_PATH, syntax), 2);
    ck_assert_int_eq(it_capture(out, sizeof out, "%s --config /nonexistent.conf", LATTICED_PATH), 2);
    ck_assert_ptr_nonnull(strstr(out, "cannot open config file"));
    it_end();
}
END_TEST

START_TEST(lattice_cli_options_and_errors)
{
    it_begin("cli");
    ck_assert_int_eq(it_capture(out, sizeof out, "%s --help", LATTICE_CLI_PATH), 0);
    ck_assert_ptr_nonnull(strstr(out, "--connect HOST:PORT"));
    ck_assert_ptr_nonnull(strstr(out, "top"));
    ck_assert_int_eq(it_capture(out, sizeof out, "%s top --help", LATTICE_CLI_PATH), 0);
    ck_assert_ptr_nonnull(strstr(out, "topology_version"));
    ck_assert_int_eq(it_capture(out, sizeof out, "%s", LATTICE_CLI_PATH), 2);
    ck_assert_int_eq(it_capture(out, sizeof out, "%s frobnicate", LATTICE_CLI_PATH), 2);
    ck_assert_ptr_nonnull(strstr(out, "unknown command 'frobnicate'"));
    ck_assert_int_eq(it_capture(out, sizeof out, "%s --connect nohostport top", LATTICE_CLI_PATH), 2);
    ck_assert_int_eq(it_capture(out, sizeof out, "%s --timeout-ms 5 top", LATTICE_CLI_PATH), 2);
    ck_assert_int_eq(it_capture(out, sizeof out, "%s top extra", LATTICE_CLI_PATH), 2);
    ck_assert_int_eq(it_capture(out, sizeof out, "%s --ip-finder 127.0.0.1:5..3 top", LATTICE_CLI_PATH), 1);
    /* No grid there: a clear message, exit 1, within the timeout. */
    int b = it_free_ports(2);
    ck_assert_int_eq(it_capture(out, sizeof out, "%s --timeout-ms 800 --ip-finder 127.0.0.1:%d..%d top", LATTICE_CLI_PATH, b,
                         b + 1), 1);
    ck_assert_ptr_nonnull(strstr(out, "no grid of cluster 'lattice' answered within 800 ms"));
    it_end();
}
END_TEST

START_TEST(grid_launcher_forms_a_grid_prints_top_and_stops_every_node)
{
    it_begin("gridrun");
    int b = it_free_ports(3), r = it_free_ports(3);
    ck_assert_int_eq(it_capture(out, sizeof out, "BUILD_DIR=%s %s/scripts/grid-run --no-wait --port %d --dir %s/grid "
                         "--failure-detection-ms 1000 --resp-port %d", LATTICE_BUILD_DIR, LATTICE_SOURCE_DIR, b,
                         it_dir(), r), 0);
    ck_assert_msg(strstr(out, "3/3 nodes joined...") != NULL, "%s", out);
    ck_assert_ptr_nonnull(strstr(out, "Topology "));
    ck_assert_ptr_nonnull(strstr(out, "3 servers"));
    ck_assert_ptr_nonnull(strstr(out, "grid: all nodes stopped"));
    /* Nothing is left listening on the grid's ports. */
    char cmd[256];
    snprintf(cmd, sizeof cmd, "ss -ltn | grep -q ':%d '", b);
    ck_assert_int_ne(it_sh("%s", cmd), 0);
    snprintf(cmd, sizeof cmd, "ss -ltn | grep -q ':%d '", r); /* nor its RESP port */
    ck_assert_int_ne(it_sh("%s", cmd), 0);
    /* Each node served RESP on its own port while the grid ran. */
    for (int i = 0; i < 3; i++) {
        snprintf(cmd, sizeof cmd, "grep -q 'RESP endpoint on 127.0.0.1:%d ' %s/grid/node%d.log", r + i, it_dir(), i);
        ck_assert_msg(it_sh("%s", cmd) == 0, "node%d never logged its RESP port %d", i, r + i);
    }
    ck_assert_int_eq(it_capture(out, sizeof out, "%s/scripts/grid-run --help", LATTICE_SOURCE_DIR), 0);
    ck_assert_ptr_nonnull(strstr(out, "--nodes N"));
    ck_assert_int_eq(it_capture(out, sizeof out, "%s/scripts/grid-run --nodes x", LATTICE_SOURCE_DIR), 2);
    it_end();
}
END_TEST

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    Suite *s = suite_create("integration: programs");
    TCase *tc = tcase_create("programs");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, latticed_help_version_and_bad_flags);
    tcase_add_test(tc, config_file_keys_apply_and_flags_win);
    tcase_add_test(tc, lattice_cli_options_and_errors);
    tcase_add_test(tc, grid_launcher_forms_a_grid_prints_top_and_stops_every_node);
    suite_add_tcase(s, tc);
    return it_run_suite(s);
}
