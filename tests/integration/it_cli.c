/*
 * The mistakes users made with the CLI and the grid launcher, each with the
 * message that names the thing: --version, a bad --ip-finder, an unknown
 * cache, an unknown cache option (the whole list of known ones), a bad bench
 * option; values too large for the command line from standard input or a
 * file; partitions as a summary unless --detail; nodes named by consistent
 * id; scripts/grid reporting a dead node once and stopping its nodes when its
 * reader went away.
 */
#include <check.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"


static char out[1 << 21];

static size_t lines(const char *s)
{
    size_t n = 0;
    for (; *s; s++) n += *s == '\n';
    return n;
}

START_TEST(cli_mistakes_get_messages_that_name_the_thing)
{
    it_begin("cli_messages");
    const char *L = LATTICE_CLI_PATH;
    ck_assert_int_eq(it_capture(out, sizeof out, "%s --version", L), 0);
    ck_assert_ptr_nonnull(strstr(out, "lattice 0.1.0"));
    ck_assert_int_eq(it_capture(out, sizeof out, "%s --ip-finder garbage top", L), 1);
    ck_assert_msg(strstr(out, "bad finder") && strstr(out, "garbage") && strstr(out, "want HOST[:PORT[..PORT]]"), "%s", out);
    ck_assert_int_eq(it_capture(out, sizeof out, "%s bench --threads 0", L), 2);
    ck_assert_msg(strstr(out, "--threads wants 1..4096, not '0'"), "%s", out);
    ck_assert_int_eq(it_capture(out, sizeof out, "%s cache create x bogus=1", L), 2);
    /* The list of known options is whole: its last one is there. */
    ck_assert_msg(strstr(out, "'bogus'") && strstr(out, "max_value_bytes"), "%s", out);

    int b = it_free_ports(2);
    char finder[64], port[16];
    snprintf(finder, sizeof finder, "127.0.0.1:%d..%d", b, b + 1);
    snprintf(port, sizeof port, "%d", b);
    const char *args[] = {"--port", port, "--port-range", "1", "--ip-finder", finder, NULL};
    it_proc *p = it_latticed("node", args);
    ck_assert(it_wait_log(p, " ready: ", 20000));
    ck_assert_int_eq(it_capture(out, sizeof out, "%s --ip-finder %s get nosuch k", L, finder), 1);
    ck_assert_msg(strstr(out, "no cache named 'nosuch'"), "%s", out);
    ck_assert_int_eq(it_capture(out, sizeof out, "%s --ip-finder %s partitions nosuch", L, finder), 1);
    ck_assert_msg(strstr(out, "no cache named 'nosuch'"), "%s", out);

    /* 600 KB: more than one argument may hold (MAX_ARG_STRLEN is 128 KiB). */
    const char *big = it_write_file("big.txt", "");
    ck_assert_int_eq(it_sh("head -c 450000 /dev/urandom | base64 -w0 > %s", big), 0);
    ck_assert_int_eq(it_capture(out, sizeof out, "%s --ip-finder %s put default from-stdin - < %s", L, finder, big), 0);
    ck_assert_int_eq(it_capture(out, sizeof out, "%s --ip-finder %s put default from-file --file %s", L, finder, big), 0);
    for (int i = 0; i < 2; i++) {
        char cmd[512];
        snprintf(cmd, sizeof cmd, "%s --ip-finder %s get default %s | head -c -1 | cmp -s - %s", L, finder,
                 i ? "from-file" : "from-stdin", big);
        ck_assert_msg(it_sh("%s", cmd) == 0, "the value read back differs (%s)", i ? "file" : "stdin");
    }
    ck_assert_int_eq(it_capture(out, sizeof out, "%s --ip-finder %s put default k --file /nonexistent", L, finder), 2);
    ck_assert_msg(strstr(out, "cannot read /nonexistent"), "%s", out);

    /* partitions: a summary of a few lines; --detail every partition. */
    ck_assert_int_eq(it_capture(out, sizeof out, "%s --ip-finder %s partitions default", L, finder), 0);
    ck_assert_msg(lines(out) < 30, "the summary has %zu lines", lines(out));
    char cid[32];
    snprintf(cid, sizeof cid, "127.0.0.1:%d", b);
    ck_assert_msg(strstr(out, cid) && strstr(out, "PRIMARIES"), "%s", out);
    ck_assert_int_eq(it_capture(out, sizeof out, "%s --ip-finder %s partitions default --detail", L, finder), 0);
    ck_assert_int_ge(lines(out), 1024);
    /* caches names nodes by consistent id too. */
    ck_assert_int_eq(it_capture(out, sizeof out, "%s --ip-finder %s caches", L, finder), 0);
    ck_assert_msg(strstr(out, cid) != NULL, "%s", out);
    it_end();
}
END_TEST

START_TEST(grid_reports_a_dead_node_once_and_survives_a_closed_pipe)
{
    it_begin("cli_grid");
    int b = it_free_ports(3);
    char dir[512], log[600];
    snprintf(dir, sizeof dir, "%s/grid", it_dir());
    snprintf(log, sizeof log, "%s/grid.err", it_dir());
    /* Its stdout goes to a FIFO this test reads until the grid runs, then
     * closes; exec keeps the launcher's pid ours to signal. */
    char fifo[600], cmd[2048];
    snprintf(fifo, sizeof fifo, "%s/grid.out", it_dir());
    ck_assert_int_eq(it_sh("mkfifo %s", fifo), 0);
    int r = it_free_ports(3);
    snprintf(cmd, sizeof cmd,
             "export BUILD_DIR=%s; exec %s/scripts/grid-run --port %d --resp-port %d --dir %s --failure-detection-ms 1000 "
             "2>%s >%s",
             LATTICE_BUILD_DIR, LATTICE_SOURCE_DIR, b, r, dir, log, fifo);
    const char *argv[] = {"/bin/bash", "-c", cmd, NULL};
    it_proc *g = it_spawn("grid", NULL, argv);
    FILE *f = fopen(fifo, "r");
    ck_assert_ptr_nonnull(f);
    char line[1024];
    bool running = false;
    while (!running && fgets(line, sizeof line, f)) running = strstr(line, "press Ctrl-C") != NULL;
    fclose(f); /* the reader goes away */
    ck_assert_msg(running, "the launcher never said it runs");
    char pidfile[600];
    snprintf(pidfile, sizeof pidfile, "%s/node1.pid", dir);
    ck_assert_int_eq(it_sh("kill -9 $(cat %s)", pidfile), 0);
    /* Reported once, however long it stays dead. */
    bool seen = false;
    for (int i = 0; i < 100 && !seen; i++) {
        seen = it_sh("grep -q 'node 1 (pid' %s", log) == 0;
        if (!seen) usleep(100000);
    }
    ck_assert_msg(seen, "the dead node was never reported");
    sleep(5); /* two more rounds of the launcher's 2 s check: nothing new must appear */
    ck_assert_int_eq(it_sh("[ $(grep -c 'node 1 (pid' %s) = 1 ]", log), 0);
    /* Stopping still stops every node although nobody reads its output. */
    it_signal(g, SIGTERM);
    ck_assert(it_wait_exit(g, 20000));
    for (int i = 0; i < 3; i++)
        ck_assert_msg(it_sh("ss -ltn | grep -q ':%d '", b + i) != 0, "node %d still listens after the stop", i);
    it_end();
}
END_TEST

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    Suite *s = suite_create("integration: cli");
    TCase *tc = tcase_create("cli");
    tcase_set_timeout(tc, 180);
    tcase_add_test(tc, cli_mistakes_get_messages_that_name_the_thing);
    tcase_add_test(tc, grid_reports_a_dead_node_once_and_survives_a_closed_pipe);
    suite_add_tcase(s, tc);
    return it_run_suite(s);
}
