/*
 * bench_resp: RESP request parsing throughput on a pipelined GET/SET stream
 * (redis-benchmark's shape: SET key:<n> <value>, GET key:<n>), against a
 * reference measured in the same run on the same bytes: a plain memchr scan
 * for the CRLFs, the floor any RESP parser pays.
 *
 * Three figures, each the best of --rounds passes over the whole stream:
 *   memchr   - count CRs with memchr (reference)
 *   parse-1  - lattice_resp_parse over the stream as one buffer (zero copy)
 *   parse-r  - the same, fed in --read-size reads (Redis reads 16 KiB), so
 *              commands cut by a read go through the copying path
 * Printed as commands/s, MB/s and the ratio parser/reference.
 *
 * And the replies to that stream (+OK for SET, the value as a bulk for GET)
 * through the encoder, drained every 64 replies as a server would after a
 * writev, against its own same-run reference: memcpy of the same reply
 * bytes in the same pieces.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "resp/resp.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: bench_resp [--commands N] [--value-size B] [--read-size B] [--rounds R] [--json]\n"
            "  Parse a pipelined SET/GET stream with the RESP parser and compare it with a\n"
            "  memchr scan for CRLF over the same bytes; encode its replies and compare\n"
            "  with memcpy of the same reply bytes (both references in the same run).\n"
            "  --commands N    commands in the stream, half SET half GET (default 200000, max 5000000)\n"
            "  --value-size B  SET value bytes (default 100, max 65536)\n"
            "  --read-size B   bytes per simulated socket read for parse-r (default 16384)\n"
            "  --rounds R      passes per figure, best one counts (default 7, max 50)\n"
            "  --json          print one JSON object instead of a table\n");
}

/* The stream: SET key:<i> <value> then GET key:<i>, as multibulk. */
static char *make_stream(size_t ncmd, size_t vsize, size_t *len)
{
    size_t cap = ncmd * (vsize + 64) + 64, n = 0;
    char *s = malloc(cap), *val = malloc(vsize + 1);
    if (!s || !val) return NULL;
    for (size_t i = 0; i < vsize; i++) val[i] = (char)('a' + i % 26);
    val[vsize] = '\0';
    for (size_t i = 0; i < ncmd; i++) {
        char key[32];
        int kl = snprintf(key, sizeof(key), "key:%012zu", i / 2);
        if (i % 2 == 0)
            n += (size_t)snprintf(s + n, cap - n, "*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%zu\r\n%s\r\n", kl, key,
                                  vsize, val);
        else
            n += (size_t)snprintf(s + n, cap - n, "*2\r\n$3\r\nGET\r\n$%d\r\n%s\r\n", kl, key);
    }
    free(val);
    *len = n;
    return s;
}

static volatile size_t sink;

static size_t scan_memchr(const char *s, size_t n)
{
    size_t lines = 0;
    const char *p = s, *end = s + n;
    while ((p = memchr(p, '\r', (size_t)(end - p))) != NULL) {
        lines++;
        p++;
    }
    return lines;
}

/* Parse the stream in reads of `step` bytes; returns commands seen. */
static size_t parse_stream(lattice_resp_parser *p, const char *s, size_t n, size_t step)
{
    size_t cmds = 0, sum = 0;
    for (size_t from = 0; from < n; from += step) {
        size_t len = n - from < step ? n - from : step, pos = 0, used;
        lattice_resp_command c;
        lattice_resp_result r;
        while ((r = lattice_resp_parse(p, s + from + pos, len - pos, &used, &c)) == LATTICE_RESP_COMMAND) {
            cmds++;
            sum += c.argv[c.argc - 1].len;
            pos += used;
        }
        if (r == LATTICE_RESP_ERROR) return 0;
    }
    sink += sum;
    return cmds;
}

typedef struct {
    double secs;
    size_t count;
} figure;

#define BATCH 64 /* replies per simulated writev */

/* Encode the replies of the SET/GET stream; returns the bytes produced. */
static size_t encode_replies(lattice_resp_out *o, size_t ncmd, const char *val, size_t vsize)
{
    size_t bytes = 0;
    struct iovec iov[16];
    for (size_t i = 0; i < ncmd; i++) {
        if (i % 2 == 0) lattice_resp_add_simple(o, "OK", 2);
        else lattice_resp_add_bulk(o, val, vsize);
        if (i % BATCH == BATCH - 1 || i == ncmd - 1) {
            int k = lattice_resp_out_iov(o, iov, 16);
            size_t n = 0;
            for (int j = 0; j < k; j++) n += iov[j].iov_len;
            bytes += n;
            lattice_resp_out_consume(o, n);
        }
    }
    return bytes;
}

/* The reference: copy the pre-encoded replies in the same BATCH pieces. */
static size_t copy_replies(const char *replies, const size_t *piece, size_t npieces, char *dst)
{
    size_t off = 0;
    for (size_t i = 0; i < npieces; i++) {
        memcpy(dst, replies + off, piece[i]);
        off += piece[i];
        sink += (unsigned char)dst[piece[i] - 1];
    }
    return off;
}

int main(int argc, char **argv)
{
    size_t ncmd = 200000, vsize = 100, step = 16384;
    int rounds = 7, json = 0;
    static const struct option opts[] = {
        {"commands", required_argument, NULL, 'n'}, {"value-size", required_argument, NULL, 'v'},
        {"read-size", required_argument, NULL, 'r'}, {"rounds", required_argument, NULL, 'R'},
        {"json", no_argument, NULL, 'j'},           {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    int o;
    while ((o = getopt_long(argc, argv, "n:v:r:R:jh", opts, NULL)) != -1) {
        switch (o) {
        case 'n': ncmd = strtoul(optarg, NULL, 10); break;
        case 'v': vsize = strtoul(optarg, NULL, 10); break;
        case 'r': step = strtoul(optarg, NULL, 10); break;
        case 'R': rounds = atoi(optarg); break;
        case 'j': json = 1; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (ncmd < 2 || ncmd > 5000000 || vsize > 65536 || step == 0 || rounds < 1 || rounds > 50) {
        usage(stderr);
        return 2;
    }
    ncmd &= ~(size_t)1;
    size_t n;
    char *s = make_stream(ncmd, vsize, &n);
    if (!s) {
        fprintf(stderr, "bench_resp: out of memory\n");
        return 1;
    }
    lattice_resp_parser *p = lattice_resp_parser_new(NULL);
    figure ref = {1e9, 0}, one = {1e9, 0}, rd = {1e9, 0}, enc = {1e9, 0}, cpy = {1e9, 0};

    /* The replies, pre-encoded for the memcpy reference, cut in BATCH pieces. */
    char *val = malloc(vsize + 1);
    lattice_resp_out *out = lattice_resp_out_new(0, 2);
    size_t npieces = (ncmd + BATCH - 1) / BATCH;
    size_t *piece = calloc(npieces, sizeof(*piece));
    size_t rlen = ncmd / 2 * (5 + vsize + 32);
    char *replies = malloc(rlen), *dst = malloc(64 * (vsize + 40));
    if (!val || !out || !piece || !replies || !dst) {
        fprintf(stderr, "bench_resp: out of memory\n");
        return 1;
    }
    for (size_t i = 0; i < vsize; i++) val[i] = (char)('a' + i % 26);
    rlen = 0;
    for (size_t b = 0; b < npieces; b++) {
        for (size_t i = b * BATCH; i < ncmd && i < (b + 1) * BATCH; i++) {
            if (i % 2 == 0) lattice_resp_add_simple(out, "OK", 2);
            else lattice_resp_add_bulk(out, val, vsize);
        }
        piece[b] = lattice_resp_out_peek(out, replies + rlen, lattice_resp_out_pending(out));
        lattice_resp_out_consume(out, piece[b]);
        rlen += piece[b];
    }
    /* Interleave the three so drift on a shared machine hits all alike. */
    for (int r = 0; r < rounds; r++) {
        double t0 = now_s();
        size_t lines = scan_memchr(s, n);
        double t1 = now_s();
        size_t c1 = parse_stream(p, s, n, n);
        double t2 = now_s();
        size_t c2 = parse_stream(p, s, n, step);
        double t3 = now_s();
        if (c1 != ncmd || c2 != ncmd) {
            fprintf(stderr, "bench_resp: parsed %zu / %zu commands, expected %zu\n", c1, c2, ncmd);
            return 1;
        }
        size_t eb = encode_replies(out, ncmd, val, vsize);
        double t4 = now_s();
        size_t cb = copy_replies(replies, piece, npieces, dst);
        double t5 = now_s();
        if (eb != rlen || cb != rlen) {
            fprintf(stderr, "bench_resp: encoded %zu / copied %zu reply bytes, expected %zu\n", eb, cb, rlen);
            return 1;
        }
        if (t4 - t3 < enc.secs) enc = (figure){t4 - t3, eb};
        if (t5 - t4 < cpy.secs) cpy = (figure){t5 - t4, cb};
        if (t1 - t0 < ref.secs) ref = (figure){t1 - t0, lines};
        if (t2 - t1 < one.secs) one = (figure){t2 - t1, c1};
        if (t3 - t2 < rd.secs) rd = (figure){t3 - t2, c2};
    }
    double mb = (double)n / 1e6, rmb = (double)rlen / 1e6;
    double ref_cmds = (double)ncmd / ref.secs, one_cmds = (double)ncmd / one.secs,
           rd_cmds = (double)ncmd / rd.secs;
    if (json) {
        printf("{\"bench\":\"resp_parse\",\"commands\":%zu,\"value_size\":%zu,\"bytes\":%zu,"
               "\"read_size\":%zu,\"rounds\":%d,"
               "\"memchr\":{\"cmds_per_s\":%.0f,\"mb_per_s\":%.1f},"
               "\"parse_one_buffer\":{\"cmds_per_s\":%.0f,\"mb_per_s\":%.1f,\"ratio_vs_memchr\":%.3f},"
               "\"parse_reads\":{\"cmds_per_s\":%.0f,\"mb_per_s\":%.1f,\"ratio_vs_memchr\":%.3f},"
               "\"reply_memcpy\":{\"replies_per_s\":%.0f,\"mb_per_s\":%.1f},"
               "\"reply_encode\":{\"replies_per_s\":%.0f,\"mb_per_s\":%.1f,\"ratio_vs_memcpy\":%.3f}}\n",
               ncmd, vsize, n, step, rounds, ref_cmds, mb / ref.secs, one_cmds, mb / one.secs,
               one_cmds / ref_cmds, rd_cmds, mb / rd.secs, rd_cmds / ref_cmds, (double)ncmd / cpy.secs,
               rmb / cpy.secs, (double)ncmd / enc.secs, rmb / enc.secs, cpy.secs / enc.secs);
    } else {
        printf("stream: %zu commands (SET/GET, %zu-byte values), %.1f MB; best of %d\n", ncmd, vsize, mb,
               rounds);
        printf("%-28s %14s %10s %10s\n", "", "commands/s", "MB/s", "vs memchr");
        printf("%-28s %14.0f %10.1f %10s\n", "memchr CR scan (reference)", ref_cmds, mb / ref.secs, "1.000");
        printf("%-28s %14.0f %10.1f %10.3f\n", "parse, one buffer", one_cmds, mb / one.secs,
               one_cmds / ref_cmds);
        char label[40];
        snprintf(label, sizeof(label), "parse, %zu-byte reads", step);
        printf("%-28s %14.0f %10.1f %10.3f\n", label, rd_cmds, mb / rd.secs, rd_cmds / ref_cmds);
        printf("replies: %.1f MB, drained every %d\n", rmb, BATCH);
        printf("%-28s %14s %10s %10s\n", "", "replies/s", "MB/s", "vs memcpy");
        printf("%-28s %14.0f %10.1f %10s\n", "memcpy of replies (ref.)", (double)ncmd / cpy.secs,
               rmb / cpy.secs, "1.000");
        printf("%-28s %14.0f %10.1f %10.3f\n", "encode +OK / bulk replies", (double)ncmd / enc.secs,
               rmb / enc.secs, cpy.secs / enc.secs);
    }
    lattice_resp_parser_free(p);
    lattice_resp_out_free(out);
    free(s), free(val), free(piece), free(replies), free(dst);
    return 0;
}
