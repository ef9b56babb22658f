/* Replays every file of the RESP seed corpus (and every crasher that was
 * added to it) through the fuzz checks, in an ordinary gcc build, so a
 * regression shows up in ctest without clang or libFuzzer.
 * Usage: replay_resp DIR...   (exit 1 when a directory holds no file) */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Built once per harness: FUZZ_ONE names its check (default the RESP one). */
#ifndef FUZZ_ONE
#include "resp_fuzz_check.h"
#define FUZZ_ONE resp_fuzz_one
#define FUZZ_NAME "replay_resp"
#else
#include <stdint.h>
void FUZZ_ONE(const uint8_t *data, size_t size);
#endif

static int replay_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    size_t cap = 4096, n = 0;
    unsigned char *buf = malloc(cap);
    size_t got;
    while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) buf = realloc(buf, cap *= 2);
    }
    fclose(f);
    if (!buf) return -1;
    FUZZ_ONE(buf, n);
    free(buf);
    return 0;
}

int main(int argc, char **argv)
{
    size_t files = 0;
    for (int i = 1; i < argc; i++) {
        DIR *d = opendir(argv[i]);
        if (!d) {
            fprintf(stderr, FUZZ_NAME ": cannot open %s\n", argv[i]);
            return 1;
        }
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            if (e->d_name[0] == '.') continue;
            char path[4096];
            snprintf(path, sizeof(path), "%s/%s", argv[i], e->d_name);
            if (replay_file(path) < 0) {
                fprintf(stderr, FUZZ_NAME ": cannot read %s\n", path);
                closedir(d);
                return 1;
            }
            files++;
        }
        closedir(d);
    }
    printf(FUZZ_NAME ": %zu inputs replayed, all invariants held\n", files);
    return files ? 0 : 1;
}
