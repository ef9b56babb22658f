/*
 * wal: the log's writer thread and the append path (docs/PERSISTENCE.md).
 *
 * Appends encode the record into the pending buffer under the log's mutex
 * and return; they never touch the file.  The writer thread takes the whole
 * pending buffer as one batch (group: once the round of appends under way
 * ends, lt_persist_hold - at most LT_WAL_GROUP_US or LT_WAL_GROUP_BYTES;
 * always: at once), writes it to the
 * current segment, fdatasyncs it (not with off), then publishes the durable
 * LSN and writes the notify eventfd.  A batch is whole records, so a
 * segment ends on a record boundary: the writer opens the next segment
 * before a batch once the current one passed its size.
 *
 * A write or fsync that fails (ENOSPC, EIO) cuts the segment back to the
 * end of the last durable batch (ftruncate: no torn bytes stay behind), marks
 * the log failed - the data thread refuses writes and answers every write
 * still waiting with DISK_FULL - and retries the same batch every 200 ms; the
 * first success clears the failure.
 *
 * The two batch buffers grow to the largest batch (a burst of held writes
 * during a rejoin doubles one to several MiB) and would keep that size for
 * the process's life: one grown past LT_WAL_KEEP_BYTES is freed once
 * written, and the next append starts a small one again.
 */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <urcu.h>

#include "lattice/alloc.h"
#include "lattice/clock.h"
#include "lattice/log.h"
#include "persist_int.h"

int lt_wal_fsync_parse(const char *s, lt_wal_fsync *out)
{
    if (!s) return LATTICE_ERR_INVAL;
    if (!strcmp(s, "group")) *out = LT_WAL_GROUP;
    else if (!strcmp(s, "always")) *out = LT_WAL_ALWAYS;
    else if (!strcmp(s, "off")) *out = LT_WAL_OFF;
    else return LATTICE_ERR_INVAL;
    return LATTICE_OK;
}

const char *lt_wal_fsync_name(lt_wal_fsync m)
{
    return m == LT_WAL_ALWAYS ? "always" : m == LT_WAL_OFF ? "off" : "group";
}

void persist_notify(lt_persist *p)
{
    if (p->notify_fd < 0) return;
    uint64_t one = 1;
    if (write(p->notify_fd, &one, sizeof one) < 0 && errno != EAGAIN)
        LT_LOG(LT_WARN, "persist", "notify: %s", strerror(errno));
}

int persist_fsync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return -1;
    int rc = fsync(fd);
    close(fd);
    return rc;
}

uint64_t lt_persist_append(lt_persist *p, const lt_rec *r)
{
    size_t n = lt_rec_size(r);
    pthread_mutex_lock(&p->mu);
    if (p->len + n > p->cap) {
        size_t cap = p->cap ? p->cap : 1u << 16;
        while (cap < p->len + n) cap *= 2;
        uint8_t *b = lt_realloc(p->buf, cap);
        if (!b) {
            if (!p->lost++) LT_LOG(LT_ERROR, "persist", "%s: out of memory for the log: records are lost until the next checkpoint", p->dir);
            atomic_store(&p->failed, true);
            pthread_mutex_unlock(&p->mu);
            return 0;
        }
        p->buf = b;
        p->cap = cap;
    }
    lt_rec x = *r;
    x.lsn = p->appended;
    lt_rec_encode(&x, p->buf + p->len);
    bool wake = p->len == 0 || (p->len < LT_WAL_GROUP_BYTES && p->len + n >= LT_WAL_GROUP_BYTES);
    p->len += n;
    p->appended += n;
    uint64_t end = p->appended;
    pthread_mutex_unlock(&p->mu);
    if (wake) pthread_cond_signal(&p->cv);
    return end;
}

void lt_persist_hold(lt_persist *p)
{
    pthread_mutex_lock(&p->mu);
    p->held++;
    pthread_mutex_unlock(&p->mu);
}

void lt_persist_unhold(lt_persist *p)
{
    pthread_mutex_lock(&p->mu);
    bool wake = p->held && --p->held == 0 && p->len;
    pthread_mutex_unlock(&p->mu);
    if (wake) pthread_cond_signal(&p->cv);
}

uint64_t lt_persist_appended(lt_persist *p)
{
    pthread_mutex_lock(&p->mu);
    uint64_t a = p->appended;
    pthread_mutex_unlock(&p->mu);
    return a;
}

uint64_t lt_persist_durable(lt_persist *p) { return atomic_load_explicit(&p->durable, memory_order_acquire); }

bool lt_persist_failed(lt_persist *p, const char **msg)
{
    bool f = atomic_load(&p->failed);
    if (f && msg) *msg = p->failmsg;
    return f;
}

uint64_t lt_persist_log_bytes(lt_persist *p) { return lt_persist_appended(p) - p->ckpt_lsn; }
bool lt_persist_checkpoint_due(lt_persist *p) { return lt_persist_log_bytes(p) >= p->ckpt_bytes; }

/* ------------------------------------------------------ the writer thread */

static void fail(lt_persist *p, const char *what, int err)
{
    bool was = atomic_load(&p->failed);
    pthread_mutex_lock(&p->mu);
    snprintf(p->failmsg, sizeof p->failmsg, "data dir %s: %s: %s", p->dir, what, strerror(err));
    pthread_mutex_unlock(&p->mu);
    atomic_store(&p->failed, true);
    if (!was) LT_LOG(LT_ERROR, "persist", "%s: writes are refused until it succeeds (retried every 200 ms)", p->failmsg);
    persist_notify(p);
}

static bool open_segment(lt_persist *p, uint64_t start)
{
    if (p->fd >= 0) close(p->fd);
    char path[PERSIST_PATH];
    snprintf(path, sizeof path, "%s/wal-%016" PRIx64 ".log", p->dir, start);
    p->fd = open(path, O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0644);
    if (p->fd < 0) {
        fail(p, "cannot create a log segment", errno);
        return false;
    }
    if (persist_fsync_dir(p->dir) != 0) {
        int e = errno;
        close(p->fd);
        p->fd = -1;
        unlink(path);
        fail(p, "cannot sync the directory", e);
        return false;
    }
    p->seg_start = start;
    p->seg_len = 0;
    p->prefilled = 0;
    return true;
}

/* Zeroes the segment ahead of the records (LT_WAL_PREFILL_BYTES at a time):
 * an fdatasync of bytes inside the file's size writes data only, where one
 * that grows the file also commits the file system's journal (about 3x the
 * time here).  Readers take a zeroed tail for the end of the log.  Without
 * room for it (ENOSPC) the records are written without it. */
static void prefill(lt_persist *p, size_t n)
{
    static const uint8_t zeros[65536];
    if (p->seg_len + n <= p->prefilled) return;
    uint64_t to = p->seg_len + n + LT_WAL_PREFILL_BYTES;
    for (uint64_t at = p->prefilled > p->seg_len ? p->prefilled : p->seg_len; at < to;) {
        size_t k = to - at < sizeof zeros ? (size_t)(to - at) : sizeof zeros;
        ssize_t w = pwrite(p->fd, zeros, k, (off_t)at);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            if (ftruncate(p->fd, (off_t)p->seg_len) != 0) { /* the reader takes zeros for the end */ }
            p->prefilled = p->seg_len;
            return;
        }
        at += (size_t)w;
        p->prefilled = at;
    }
}

/* Writes one batch starting at LSN start; false (failure noted) leaves
 * the segment as it was before. */
static bool write_batch(lt_persist *p, const uint8_t *b, size_t n, uint64_t start)
{
    if (p->fd < 0 || p->seg_len >= p->seg_max || atomic_load(&p->roll)) {
        if (!open_segment(p, start)) return false;
        atomic_store(&p->roll, false);
    }
    prefill(p, n);
    size_t done = 0;
    while (done < n) {
        ssize_t w = pwrite(p->fd, b + done, n - done, (off_t)(p->seg_len + done));
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            int e = w < 0 ? errno : ENOSPC;
            if (ftruncate(p->fd, (off_t)p->seg_len) != 0) { /* the reader cuts what is left */ }
            p->prefilled = p->seg_len;
            fail(p, "cannot write the log", e);
            return false;
        }
        done += (size_t)w;
    }
    if (p->mode != LT_WAL_OFF && fdatasync(p->fd) != 0) {
        int e = errno;
        if (ftruncate(p->fd, (off_t)p->seg_len) != 0) { /* as above */ }
        p->prefilled = p->seg_len;
        fail(p, "cannot fsync the log", e);
        return false;
    }
    p->seg_len += n;
    p->batches++;
    return true;
}

static void deadline_in(struct timespec *ts, long us)
{
    clock_gettime(CLOCK_MONOTONIC, ts);
    ts->tv_sec += us / 1000000;
    ts->tv_nsec += us % 1000000 * 1000;
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000L;
    }
}

void *persist_writer_main(void *arg)
{
    lt_persist *p = arg;
    uint8_t *wb = NULL;
    size_t wcap = 0;
    /* group's waits are a few microseconds: without this the kernel may
     * stretch each by its default 50 us slack. */
    prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
    if (p->on_durable) rcu_register_thread(); /* the hook may read stores */
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->len && !p->stop) pthread_cond_wait(&p->cv, &p->mu);
        if (!p->len) break; /* stopping, everything written */
        /* group: the batch gathers until the round of appends under way
         * ends (its unhold signals), LT_WAL_GROUP_US at most.  Records
         * that come while a batch is written go into the next one, so a
         * closed loop of clients gathers itself; a timed poll for a quiet
         * gap (5 us waits, tried first) woke this thread on the appending
         * thread's CPU every few requests and cost ~10% of the SETs. */
        if (p->mode == LT_WAL_GROUP && p->held && !p->stop && p->len < LT_WAL_GROUP_BYTES) {
            struct timespec ts;
            deadline_in(&ts, p->group_us);
            while (p->held && !p->stop && p->len < LT_WAL_GROUP_BYTES)
                if (pthread_cond_timedwait(&p->cv, &p->mu, &ts) == ETIMEDOUT) break;
        }
        /* Swap buffers: appends go on into the other one. */
        uint8_t *b = p->buf;
        size_t n = p->len, cap = p->cap;
        p->buf = wb;
        p->cap = wcap;
        p->len = 0;
        wb = b;
        wcap = cap;
        uint64_t start = p->appended - n;
        pthread_mutex_unlock(&p->mu);
        bool ok = write_batch(p, wb, n, start);
        while (!ok) {
            pthread_mutex_lock(&p->mu);
            bool stopping = p->stop;
            pthread_mutex_unlock(&p->mu);
            if (stopping) {
                LT_LOG(LT_ERROR, "persist", "%s: stopping with %zu bytes of the log unwritten", p->dir, n);
                goto out;
            }
            struct timespec d = {0, 200 * 1000000L};
            nanosleep(&d, NULL);
            ok = write_batch(p, wb, n, start);
            if (ok) LT_LOG(LT_INFO, "persist", "data dir %s: the log writes again", p->dir);
        }
        if (wcap > LT_WAL_KEEP_BYTES) {
            lt_free(wb);
            wb = NULL;
            wcap = 0;
        }
        if (atomic_load(&p->failed) && !p->lost) atomic_store(&p->failed, false);
        atomic_store_explicit(&p->durable, start + n, memory_order_release);
        if (!p->on_durable || !p->on_durable(p->on_durable_arg)) persist_notify(p);
        pthread_mutex_lock(&p->mu);
    }
    pthread_mutex_unlock(&p->mu);
out:
    if (p->on_durable) rcu_unregister_thread();
    lt_free(wb);
    return NULL;
}

/* Segment files in the directory, by start LSN. */
size_t persist_list(const char *dir, const char *prefix, const char *suffix, uint64_t **out)
{
    *out = NULL;
    DIR *dp = opendir(dir);
    if (!dp) return 0;
    size_t n = 0, cap = 0;
    uint64_t *v = NULL;
    size_t pl = strlen(prefix), sl = strlen(suffix);
    for (struct dirent *e; (e = readdir(dp));) {
        size_t l = strlen(e->d_name);
        if (l != pl + 16 + sl || strncmp(e->d_name, prefix, pl) || strcmp(e->d_name + pl + 16, suffix)) continue;
        char hex[17];
        memcpy(hex, e->d_name + pl, 16);
        hex[16] = 0;
        char *end;
        uint64_t x = strtoull(hex, &end, 16);
        if (*end) continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 16;
            uint64_t *nv = lt_realloc(v, cap * sizeof *nv);
            if (!nv) break;
            v = nv;
        }
        v[n++] = x;
    }
    closedir(dp);
    for (size_t i = 1; i < n; i++)
        for (size_t j = i; j > 0 && v[j - 1] > v[j]; j--) {
            uint64_t t = v[j];
            v[j] = v[j - 1];
            v[j - 1] = t;
        }
    *out = v;
    return n;
}
