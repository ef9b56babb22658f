/* persist: internals shared by its files. */
#ifndef LATTICE_PERSIST_INT_H
#define LATTICE_PERSIST_INT_H

#include <pthread.h>
#include <stdatomic.h>

#include "persist.h"

#define PERSIST_PATH 4352

/* A cache as recovery rebuilt it, until the node takes or discards it. */
typedef struct rcache {
    char name[LT_REC_MAX_CACHE + 1];
    char *spec;
    lattice_store *store;
    uint64_t *counter;
    uint64_t *marks; /* the newest checkpoint's MARKS, or NULL */
    uint32_t partitions;
} rcache;

struct lt_persist_cache {
    lt_persist *p;
    char name[LT_REC_MAX_CACHE + 1];
    size_t name_len;
    lattice_store *store; /* NULL once dropped */
    const uint64_t *counter; /* the partitions' update counters (lt_persist_cache_counters), or NULL */
    lt_persist_cache *next;
};

struct lt_persist {
    char dir[4096];
    lt_wal_fsync mode;
    lattice_region *region;
    int notify_fd, lock_fd;
    bool (*on_durable)(void *arg);
    void *on_durable_arg;
    uint64_t seg_max, ckpt_bytes;
    char prev_cid[160];

    /* recovery */
    rcache *rc;
    size_t n_rc, cap_rc;
    uint64_t fig_ckpt_entries, fig_log_records, fig_cut, fig_ms;

    /* the log: appends (any thread) under mu */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint8_t *buf;
    size_t len, cap;
    uint64_t appended; /* LSN past the last appended record */
    uint64_t lost;     /* records that could not be kept (no memory) */
    unsigned held;     /* rounds of appends under way (lt_persist_hold) */
    uint32_t group_us; /* the longest a held batch waits */
    bool stop;
    char failmsg[4400];
    _Atomic uint64_t durable;
    atomic_bool failed, roll;
    uint64_t ckpt_lsn; /* the newest checkpoint's (data thread) */
    pthread_t th;
    bool th_started;

    /* writer thread */
    int fd;
    uint64_t seg_start, seg_len, batches;
    uint64_t prefilled; /* the segment's zeroed length: fdatasync within it has no size to journal */

    lt_persist_cache *caches;
};

void persist_notify(lt_persist *p);
int persist_fsync_dir(const char *dir);
void *persist_writer_main(void *arg);
size_t persist_list(const char *dir, const char *prefix, const char *suffix, uint64_t **out);

#endif
