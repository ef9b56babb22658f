/* One fuzz case for the log reader (persist/): the input is a log segment.
 *  - lt_rec_decode walked over it never reads past the input (ASan) and
 *    accepts only records whose sizes add up inside it;
 *  - recovery from a data directory holding it as its one segment never
 *    fails or crashes, cuts the file to a prefix of itself, and a second
 *    recovery finds nothing more to cut and replays the same records (a
 *    cut log is a good log).
 * Aborts when an invariant does not hold.  Shared by fuzz_wal (libFuzzer)
 * and replay_wal (the corpus, in ctest). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <urcu.h>

#include "lattice/log.h"
#include "persist/persist.h"

void wal_fuzz_one(const uint8_t *data, size_t size);

static char dir[128];
static lattice_region *region;

static void check(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "wal_fuzz: invariant failed: %s\n", what);
        abort();
    }
}

static uint64_t recover(uint64_t *cut)
{
    lt_persist_config c = {.dir = dir, .fsync = LT_WAL_OFF, .region = region, .notify_fd = -1};
    lt_persist *p = NULL;
    check(lt_persist_open(&c, &p) == LATTICE_OK, "recovery opens any log");
    uint64_t ce, lr, ms;
    lt_persist_recovery_figures(p, &ce, &lr, cut, &ms);
    lt_persist_close(p);
    return lr;
}

static void cleanup(void)
{
    char lock[160];
    snprintf(lock, sizeof lock, "%s/LOCK", dir);
    unlink(lock);
    rmdir(dir);
}

void wal_fuzz_one(const uint8_t *data, size_t size)
{
    if (!region) {
        atexit(cleanup);
        lt_log_threshold = -1;
        rcu_register_thread();
        snprintf(dir, sizeof dir, "/tmp/lt_wal_fuzz.%d", (int)getpid());
        mkdir(dir, 0755);
        lattice_region_config rc = {"fuzz", 0, 16, 0, LATTICE_REGION_REJECT};
        check(lattice_region_create(&rc, &region) == LATTICE_OK, "region");
    }
    /* The codec alone. */
    size_t off = 0;
    while (off < size) {
        lt_rec r;
        size_t used;
        if (lt_rec_decode(data + off, size - off, &r, &used, NULL) != LATTICE_OK) break;
        check(used >= LT_REC_HEAD + LT_REC_FIXED && used <= size - off, "a record's size lies inside the input");
        check(r.cache_len + r.key_len + r.value_len + LT_REC_HEAD + LT_REC_FIXED == used, "fields add up");
        off += used;
    }
    /* Recovery from it. */
    char path[256], ck[256];
    snprintf(path, sizeof path, "%s/wal-0000000000000000.log", dir);
    FILE *f = fopen(path, "wb");
    check(f != NULL, "write the segment");
    check(fwrite(data, 1, size, f) == size, "write the segment");
    fclose(f);
    uint64_t c1, c2;
    uint64_t r1 = recover(&c1);
    struct stat st;
    off_t after = stat(path, &st) == 0 ? st.st_size : 0;
    check(after <= (off_t)size, "the cut log is a prefix");
    /* Cut bytes are counted; a zeroed tail (the writer's room ahead) goes quietly. */
    bool zeros = true;
    for (size_t i = (size_t)after; i < size && zeros; i++) zeros = data[i] == 0;
    check(c1 == (uint64_t)size - (uint64_t)after || (c1 == 0 && zeros), "what was cut is what was dropped");
    uint64_t r2 = recover(&c2);
    check(c2 == 0 && r2 == r1, "a second recovery cuts nothing and replays the same records");
    /* Leave the directory as found: no segment, no checkpoint. */
    unlink(path);
    snprintf(ck, sizeof ck, "%s/node.id", dir);
    unlink(ck);
    char seg[256];
    snprintf(seg, sizeof seg, "%s/wal-%016llx.log", dir, (unsigned long long)after);
    unlink(seg);
}
