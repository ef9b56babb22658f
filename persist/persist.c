/*
 * persist: a node's data directory - recovery at open, the stores' change
 * hook, checkpoints (docs/PERSISTENCE.md).
 *
 * Recovery: the newest checkpoint that reads whole (every CRC, its END
 * record) is loaded, then the segments are replayed in LSN order from the
 * one holding the checkpoint's LSN; records before that LSN are skipped.
 * Every record is checked (lt_rec_decode, and its LSN against its place).
 * The first one that fails ends the log: its segment is cut there, later
 * segments are deleted, the cut is logged with the file, offset and reason.
 * A record is applied whole or not at all (a store write is atomic), so a
 * cut never leaves half an entry.  The log then continues in a new segment
 * at the end of what was read.
 */

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lattice/alloc.h"
#include "lattice/clock.h"
#include "lattice/log.h"
#include "persist_int.h"

const char *lt_persist_dir(const lt_persist *p) { return p->dir; }

/* ------------------------------------------------------ recovered caches */

static rcache *rc_find(lt_persist *p, const char *name, size_t len)
{
    for (size_t i = 0; i < p->n_rc; i++)
        if (p->rc[i].store && strlen(p->rc[i].name) == len && !memcmp(p->rc[i].name, name, len)) return &p->rc[i];
    return NULL;
}

static void rc_free(rcache *r)
{
    if (r->store) lattice_store_destroy(r->store);
    lt_free(r->counter);
    lt_free(r->marks);
    lt_free(r->spec);
    memset(r, 0, sizeof *r);
}

static lattice_status rc_create(lt_persist *p, const lt_rec *r)
{
    rcache *old = rc_find(p, r->cache, r->cache_len);
    if (old) {
        if (old->partitions == r->version && strlen(old->spec) == r->value_len &&
            !memcmp(old->spec, r->value, r->value_len))
            return LATTICE_OK;
        rc_free(old); /* another config under the same name: what came before is gone */
    }
    if (p->n_rc == p->cap_rc) {
        size_t cap = p->cap_rc ? p->cap_rc * 2 : 8;
        rcache *x = lt_realloc(p->rc, cap * sizeof *x);
        if (!x) return LATTICE_ERR_NOMEM;
        p->rc = x;
        p->cap_rc = cap;
    }
    rcache *c = &p->rc[p->n_rc];
    memset(c, 0, sizeof *c);
    memcpy(c->name, r->cache, r->cache_len);
    c->partitions = (uint32_t)r->version;
    c->spec = lt_malloc(r->value_len + 1);
    c->counter = lt_calloc(c->partitions, sizeof *c->counter);
    lattice_store_config sc = {c->name, c->partitions, p->region, NULL, NULL};
    if (!c->spec || !c->counter || lattice_store_create(&sc, &c->store) != LATTICE_OK) {
        rc_free(c);
        return LATTICE_ERR_NOMEM;
    }
    memcpy(c->spec, r->value, r->value_len);
    c->spec[r->value_len] = 0;
    p->n_rc++;
    return LATTICE_OK;
}

/* Applies one record: OK, or an error that stops recovery (the data does
 * not fit the region).  A record of a cache recovery does not know (its
 * CACHE record was before a cut checkpoint) is skipped. */
static lattice_status apply(lt_persist *p, const lt_rec *r, uint64_t *skipped)
{
    if (r->kind == LT_REC_CACHE) return rc_create(p, r);
    if (r->kind == LT_REC_END) return LATTICE_OK;
    rcache *c = rc_find(p, r->cache, r->cache_len);
    if (!c || (r->kind != LT_REC_DROP && r->partition >= c->partitions)) {
        ++*skipped;
        return LATTICE_OK;
    }
    int st = LATTICE_OK;
    switch (r->kind) {
    case LT_REC_PUT: {
        lattice_store_entry e = {r->partition, r->key, r->key_len, r->value, r->value_len, r->expire_ms, r->version, r->type};
        st = lattice_store_put(c->store, &e, 0);
        break;
    }
    case LT_REC_REMOVE:
        st = lattice_store_remove_v(c->store, r->partition, r->key, r->key_len, r->version);
        if (st == LATTICE_ERR_NOT_FOUND) st = LATTICE_OK;
        break;
    case LT_REC_CLEAR:
        st = lattice_store_clear(c->store, r->partition);
        if (c->marks) c->marks[r->partition] = LT_MARK_NONE; /* emptied: its mark says nothing now */
        break;
    case LT_REC_DROP: rc_free(c); return LATTICE_OK;
    case LT_REC_COUNTERS:
        for (size_t i = 0; i < r->value_len / 8 && i < c->partitions; i++) {
            uint64_t v;
            memcpy(&v, (const uint8_t *)r->value + 8 * i, 8);
            if (v > c->counter[i]) c->counter[i] = v;
        }
        return LATTICE_OK;
    case LT_REC_MARKS:
        if (!c->marks) c->marks = lt_malloc((size_t)c->partitions * sizeof *c->marks);
        for (uint32_t i = 0; c->marks && i < c->partitions; i++) {
            uint64_t v = LT_MARK_NONE;
            if (i < r->value_len / 8) memcpy(&v, (const uint8_t *)r->value + 8 * i, 8);
            c->marks[i] = v;
        }
        return LATTICE_OK;
    }
    if (st != LATTICE_OK) {
        LT_LOG(LT_ERROR, "persist", "%s: cache %s: cannot load an entry: %s (the data dir holds more than --region-mb?)",
               p->dir, c->name, lattice_strerror(st));
        return LATTICE_ERR_IO;
    }
    if (r->version > c->counter[r->partition]) c->counter[r->partition] = r->version;
    return LATTICE_OK;
}

/* ------------------------------------------------------------ file reads */

typedef struct mapped {
    uint8_t *b;
    size_t n;
} mapped;

static int map_file(const char *path, mapped *m)
{
    m->b = NULL;
    m->n = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    struct stat st;
    if (fstat(fd, &st) != 0) {
        close(fd);
        return -1;
    }
    m->n = (size_t)st.st_size;
    if (m->n) {
        m->b = mmap(NULL, m->n, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m->b == MAP_FAILED) {
            m->b = NULL;
            close(fd);
            return -1;
        }
        madvise(m->b, m->n, MADV_SEQUENTIAL);
    }
    close(fd);
    return 0;
}

static void unmap_file(mapped *m)
{
    if (m->b) munmap(m->b, m->n);
    m->b = NULL;
}

#define CKPT_MAGIC "LTCKPT01"
#define CKPT_HEAD 16

/* Loads a checkpoint: OK with every record applied, LT_REC_BAD when the file
 * is not whole (nothing of it is kept: the caller frees the caches), IO. */
static int load_checkpoint(lt_persist *p, const char *path, uint64_t *entries)
{
    mapped m;
    if (map_file(path, &m) != 0) return LT_REC_BAD;
    int st = LT_REC_BAD;
    uint64_t n = 0, skipped = 0;
    if (m.n >= CKPT_HEAD && !memcmp(m.b, CKPT_MAGIC, 8)) {
        size_t off = CKPT_HEAD;
        for (;;) {
            lt_rec r;
            size_t used;
            const char *why;
            if (lt_rec_decode(m.b + off, m.n - off, &r, &used, &why) != LATTICE_OK) {
                LT_LOG(LT_WARN, "persist", "%s: byte %zu: %s: the checkpoint is not used", path, off, why);
                break;
            }
            off += used;
            if (r.kind == LT_REC_END) {
                st = r.version == n && off == m.n ? LATTICE_OK : LT_REC_BAD;
                if (st != LATTICE_OK) LT_LOG(LT_WARN, "persist", "%s: its END record does not match: not used", path);
                break;
            }
            n++;
            if (r.kind == LT_REC_PUT) ++*entries;
            if (apply(p, &r, &skipped) != LATTICE_OK) {
                st = LATTICE_ERR_IO;
                break;
            }
        }
    }
    unmap_file(&m);
    return st;
}

static void seg_path(const lt_persist *p, uint64_t lsn, char *out, size_t cap)
{
    snprintf(out, cap, "%s/wal-%016" PRIx64 ".log", p->dir, lsn);
}

/* Cuts the log at LSN `at` inside segment i (of segs), deleting later ones. */
static void cut_log(lt_persist *p, const uint64_t *segs, size_t n, size_t i, uint64_t at, const char *why)
{
    char path[PERSIST_PATH];
    uint64_t dropped = 0;
    for (size_t k = i; k < n; k++) {
        seg_path(p, segs[k], path, sizeof path);
        struct stat st;
        uint64_t size = stat(path, &st) == 0 ? (uint64_t)st.st_size : 0;
        if (k == i && at > segs[k]) {
            dropped += size - (at - segs[k]);
            if (truncate(path, (off_t)(at - segs[k])) != 0)
                LT_LOG(LT_ERROR, "persist", "%s: cannot cut: %s", path, strerror(errno));
        } else {
            dropped += size;
            if (unlink(path) != 0) LT_LOG(LT_ERROR, "persist", "%s: cannot delete: %s", path, strerror(errno));
        }
    }
    seg_path(p, segs[i], path, sizeof path);
    LT_LOG(LT_WARN, "persist", "%s: the log ends at byte %" PRIu64 " (LSN %" PRIu64 "): %s; %" PRIu64
           " bytes after it dropped", path, at - segs[i], at, why, dropped);
    p->fig_cut += dropped;
    persist_fsync_dir(p->dir);
}

static bool zero_tail(const uint8_t *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (b[i]) return false;
    return true;
}

/* Replays the segments from the checkpoint's LSN; returns the LSN past the
 * last good record (0 with IO on a load failure). */
static lattice_status replay(lt_persist *p, uint64_t from, uint64_t *end)
{
    uint64_t *segs;
    size_t n = persist_list(p->dir, "wal-", ".log", &segs);
    lattice_status result = LATTICE_OK;
    uint64_t skipped = 0;
    *end = from;
    /* The first segment to read: the last one starting at or before `from`. */
    size_t first = 0;
    while (first + 1 < n && segs[first + 1] <= from) first++;
    if (n && segs[first] > from) {
        LT_LOG(LT_ERROR, "persist", "%s: the log starts at LSN %" PRIu64 ", after the checkpoint's %" PRIu64
               ": records are missing; refusing to start (move the directory away to start empty)", p->dir, segs[first], from);
        lt_free(segs);
        return LATTICE_ERR_IO;
    }
    uint64_t expect = n ? segs[first] : from;
    for (size_t i = first; i < n && result == LATTICE_OK; i++) {
        char path[PERSIST_PATH];
        seg_path(p, segs[i], path, sizeof path);
        if (segs[i] != expect) {
            cut_log(p, segs, n, i, segs[i], "a segment does not start where the one before ended");
            *end = expect;
            break;
        }
        mapped m;
        if (map_file(path, &m) != 0) {
            LT_LOG(LT_ERROR, "persist", "%s: cannot read: %s", path, strerror(errno));
            result = LATTICE_ERR_IO;
            break;
        }
        size_t off = 0;
        bool cut = false;
        while (off < m.n) {
            if (zero_tail(m.b + off, m.n - off)) { /* the writer's zeroed room: this segment ends here */
                unmap_file(&m);
                if (truncate(path, (off_t)off) != 0)
                    LT_LOG(LT_WARN, "persist", "%s: cannot drop its zeroed tail: %s", path, strerror(errno));
                break;
            }
            lt_rec r;
            size_t used;
            const char *why;
            int d = lt_rec_decode(m.b + off, m.n - off, &r, &used, &why);
            if (d == LATTICE_OK && r.lsn != segs[i] + off) {
                d = LT_REC_BAD;
                why = "a record whose LSN is not its position";
            }
            if (d == LATTICE_OK && (r.kind == LT_REC_END || r.kind == LT_REC_COUNTERS || r.kind == LT_REC_MARKS)) {
                d = LT_REC_BAD;
                why = "a record of a kind only checkpoints hold";
            }
            if (d != LATTICE_OK) {
                unmap_file(&m);
                cut_log(p, segs, n, i, segs[i] + off, why);
                cut = true;
                break;
            }
            if (r.lsn >= from) {
                if (apply(p, &r, &skipped) != LATTICE_OK) {
                    result = LATTICE_ERR_IO;
                    break;
                }
                p->fig_log_records++;
            }
            off += used;
        }
        if (!cut) unmap_file(&m);
        expect = segs[i] + off;
        *end = expect;
        if (cut) break;
    }
    if (skipped)
        LT_LOG(LT_WARN, "persist", "%s: %" PRIu64 " records of caches the log does not describe were skipped", p->dir,
               skipped);
    lt_free(segs);
    return result;
}

bool lt_persist_peek_cid(const char *dir, char *out, size_t cap)
{
    char path[PERSIST_PATH];
    snprintf(path, sizeof path, "%s/node.id", dir);
    out[0] = 0;
    FILE *f = fopen(path, "r");
    if (!f) return false;
    bool ok = fgets(out, (int)cap, f) != NULL;
    if (ok) out[strcspn(out, "\r\n")] = 0;
    else out[0] = 0;
    fclose(f);
    return ok && out[0];
}

static void read_cid(lt_persist *p) { lt_persist_peek_cid(p->dir, p->prev_cid, sizeof p->prev_cid); }

const char *lt_persist_prev_cid(const lt_persist *p) { return p->prev_cid; }

/* DIR/name := text, whole or not at all (a temporary file fsynced and
 * renamed, the directory fsynced). */
lattice_status lt_persist_save_text(const lt_persist *p, const char *name, const char *text)
{
    char path[PERSIST_PATH], tmp[PERSIST_PATH + 8];
    snprintf(path, sizeof path, "%s/%s", p->dir, name);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) return LATTICE_ERR_IO;
    bool ok = fputs(text, f) >= 0 && fflush(f) == 0 && fsync(fileno(f)) == 0;
    ok &= fclose(f) == 0;
    if (!ok || rename(tmp, path) != 0) {
        unlink(tmp);
        return LATTICE_ERR_IO;
    }
    persist_fsync_dir(p->dir);
    return LATTICE_OK;
}

lattice_status lt_persist_save_cid(lt_persist *p, const char *cid)
{
    if (!strcmp(p->prev_cid, cid)) return LATTICE_OK;
    char line[sizeof p->prev_cid + 2];
    snprintf(line, sizeof line, "%s\n", cid);
    lattice_status st = lt_persist_save_text(p, "node.id", line);
    if (st == LATTICE_OK) snprintf(p->prev_cid, sizeof p->prev_cid, "%s", cid);
    return st;
}

lattice_status lt_persist_save_bases(lt_persist *p, const char *text) { return lt_persist_save_text(p, "base", text); }

char *lt_persist_read_bases(const lt_persist *p) { return lt_persist_read_text(p, "base"); }

char *lt_persist_read_text(const lt_persist *p, const char *name)
{
    char path[PERSIST_PATH];
    snprintf(path, sizeof path, "%s/%s", p->dir, name);
    FILE *f = fopen(path, "r");
    if (!f) return NULL;
    size_t cap = 4096, n = 0;
    char *buf = lt_malloc(cap);
    while (buf) {
        size_t got = fread(buf + n, 1, cap - n - 1, f);
        n += got;
        if (n < cap - 1) break;
        char *x = cap < LT_PERSIST_BASES_MAX ? lt_realloc(buf, cap * 2) : NULL;
        if (!x) {
            lt_free(buf);
            buf = NULL;
            break;
        }
        buf = x;
        cap *= 2;
    }
    fclose(f);
    if (buf) buf[n] = 0;
    return buf;
}

bool lt_persist_recovered_copy(const lt_persist *p, size_t i, const char **name, lattice_store **store,
                               const uint64_t **counter, uint32_t *partitions)
{
    if (i >= p->n_rc || !p->rc[i].store) return false;
    *name = p->rc[i].name;
    *store = p->rc[i].store;
    *counter = p->rc[i].counter;
    *partitions = p->rc[i].partitions;
    return true;
}

/* ------------------------------------------------------------ open, close */

static void remove_tmp(const lt_persist *p)
{
    uint64_t *v;
    size_t n = persist_list(p->dir, "checkpoint-", ".ckpt.tmp", &v);
    for (size_t i = 0; i < n; i++) {
        char path[PERSIST_PATH];
        snprintf(path, sizeof path, "%s/checkpoint-%016" PRIx64 ".ckpt.tmp", p->dir, v[i]);
        unlink(path);
    }
    lt_free(v);
}

static void free_all_rc(lt_persist *p)
{
    for (size_t i = 0; i < p->n_rc; i++) rc_free(&p->rc[i]);
    p->n_rc = 0;
}

lattice_status lt_persist_open(const lt_persist_config *c, lt_persist **out)
{
    *out = NULL;
    if (!c->dir || !c->dir[0] || strlen(c->dir) >= sizeof((lt_persist *)0)->dir) return LATTICE_ERR_INVAL;
    lt_persist *p = lt_calloc(1, sizeof *p);
    if (!p) return LATTICE_ERR_NOMEM;
    snprintf(p->dir, sizeof p->dir, "%s", c->dir);
    p->mode = c->fsync;
    p->region = c->region;
    p->notify_fd = c->notify_fd;
    p->on_durable = c->on_durable;
    p->on_durable_arg = c->on_durable_arg;
    p->seg_max = c->segment_bytes ? c->segment_bytes : LT_WAL_SEGMENT_BYTES;
    p->group_us = c->group_us ? c->group_us : LT_WAL_GROUP_US;
    p->ckpt_bytes = c->checkpoint_bytes ? c->checkpoint_bytes : LT_CHECKPOINT_LOG_BYTES;
    p->fd = p->lock_fd = -1;
    pthread_mutex_init(&p->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&p->cv, &ca);
    pthread_condattr_destroy(&ca);
    uint64_t t0 = lt_mono_ms();
    lattice_status st = LATTICE_ERR_IO;
    if (mkdir(p->dir, 0755) != 0 && errno != EEXIST) {
        LT_LOG(LT_ERROR, "persist", "--data-dir %s: cannot create: %s", p->dir, strerror(errno));
        goto fail;
    }
    char path[PERSIST_PATH];
    snprintf(path, sizeof path, "%s/LOCK", p->dir);
    p->lock_fd = open(path, O_CREAT | O_RDWR | O_CLOEXEC, 0644);
    if (p->lock_fd < 0) {
        LT_LOG(LT_ERROR, "persist", "--data-dir %s: cannot open %s: %s", p->dir, path, strerror(errno));
        goto fail;
    }
    if (flock(p->lock_fd, LOCK_EX | LOCK_NB) != 0) {
        LT_LOG(LT_ERROR, "persist", "--data-dir %s: in use by another process (%s is locked)", p->dir, path);
        goto fail;
    }
    read_cid(p);
    remove_tmp(p);
    /* The newest checkpoint that reads whole. */
    uint64_t *ck;
    size_t nck = persist_list(p->dir, "checkpoint-", ".ckpt", &ck);
    uint64_t from = 0;
    bool loaded = false;
    for (size_t i = nck; i-- > 0 && !loaded;) {
        snprintf(path, sizeof path, "%s/checkpoint-%016" PRIx64 ".ckpt", p->dir, ck[i]);
        uint64_t entries = 0;
        int r = load_checkpoint(p, path, &entries);
        if (r == LATTICE_OK) {
            from = ck[i];
            loaded = true;
            p->fig_ckpt_entries = entries;
        } else {
            free_all_rc(p);
            if (r == LATTICE_ERR_IO) {
                lt_free(ck);
                goto fail;
            }
        }
    }
    lt_free(ck);
    uint64_t end = 0;
    st = replay(p, from, &end);
    if (st != LATTICE_OK) goto fail;
    p->ckpt_lsn = from;
    p->appended = end;
    atomic_store(&p->durable, end);
    p->fig_ms = lt_mono_ms() - t0;
    size_t live = 0;
    for (size_t i = 0; i < p->n_rc; i++) live += p->rc[i].store != NULL;
    LT_LOG(LT_INFO, "persist", "--data-dir %s: recovered %zu caches in %" PRIu64 " ms (%" PRIu64
           " entries from the checkpoint at LSN %" PRIu64 ", %" PRIu64 " log records); the log goes on at LSN %" PRIu64
           ", --wal-fsync %s", p->dir, live, p->fig_ms, p->fig_ckpt_entries, from, p->fig_log_records, end,
           lt_wal_fsync_name(p->mode));
    if (pthread_create(&p->th, NULL, persist_writer_main, p) != 0) {
        st = LATTICE_ERR_IO;
        goto fail;
    }
    p->th_started = true;
    *out = p;
    return LATTICE_OK;
fail:
    lt_persist_close(p);
    return st == LATTICE_OK ? LATTICE_ERR_IO : st;
}

void lt_persist_close(lt_persist *p)
{
    if (!p) return;
    if (p->th_started) {
        pthread_mutex_lock(&p->mu);
        p->stop = true;
        pthread_mutex_unlock(&p->mu);
        pthread_cond_signal(&p->cv);
        pthread_join(p->th, NULL);
    }
    if (p->fd >= 0) close(p->fd);
    for (lt_persist_cache *pc = p->caches, *next; pc; pc = next) {
        next = pc->next;
        if (pc->store) lattice_store_set_change_hook(pc->store, NULL);
        lt_free(pc);
    }
    free_all_rc(p);
    lt_free(p->rc);
    lt_free(p->buf);
    if (p->lock_fd >= 0) close(p->lock_fd);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    lt_free(p);
}

void lt_persist_recovery_figures(const lt_persist *p, uint64_t *ckpt_entries, uint64_t *log_records,
                                 uint64_t *cut_bytes, uint64_t *ms)
{
    *ckpt_entries = p->fig_ckpt_entries;
    *log_records = p->fig_log_records;
    *cut_bytes = p->fig_cut;
    *ms = p->fig_ms;
}

size_t lt_persist_recovered_count(const lt_persist *p) { return p->n_rc; }
const char *lt_persist_recovered_spec(const lt_persist *p, size_t i)
{
    return i < p->n_rc && p->rc[i].store ? p->rc[i].spec : NULL;
}

lattice_status lt_persist_take(lt_persist *p, const char *name, const char *spec, lattice_store **store,
                               uint64_t **counter, uint32_t partitions)
{
    rcache *c = rc_find(p, name, strlen(name));
    if (!c || c->partitions != partitions || strcmp(c->spec, spec) != 0) return LATTICE_ERR_NOT_FOUND;
    *store = c->store;
    *counter = c->counter;
    c->store = NULL;
    c->counter = NULL;
    rc_free(c);
    return LATTICE_OK;
}

const uint64_t *lt_persist_recovered_marks(const lt_persist *p, size_t i)
{
    return i < p->n_rc && p->rc[i].store ? p->rc[i].marks : NULL;
}

lattice_status lt_persist_take_aside(lt_persist *p, size_t i, lattice_store **store, uint64_t **counter,
                                     uint64_t **marks)
{
    if (i >= p->n_rc || !p->rc[i].store) return LATTICE_ERR_NOT_FOUND;
    rcache *c = &p->rc[i];
    lt_rec r = {.kind = LT_REC_DROP, .cache = c->name, .cache_len = strlen(c->name)};
    lt_persist_append(p, &r);
    *store = c->store;
    *counter = c->counter;
    *marks = c->marks;
    c->store = NULL;
    c->counter = NULL;
    c->marks = NULL;
    rc_free(c);
    return LATTICE_OK;
}

void lt_persist_discard(lt_persist *p, const char *why)
{
    for (size_t i = 0; i < p->n_rc; i++) {
        if (!p->rc[i].store) continue;
        LT_LOG(LT_INFO, "persist", "cache %s: the copy recovered from %s is dropped: %s", p->rc[i].name, p->dir, why);
        /* In the log too: a later restart must not find it again. */
        lt_rec r = {.kind = LT_REC_DROP, .cache = p->rc[i].name, .cache_len = strlen(p->rc[i].name)};
        lt_persist_append(p, &r);
        rc_free(&p->rc[i]);
    }
    p->n_rc = 0;
}

/* ------------------------------------------------------ the change hook */

static void changed(void *arg, int kind, const lattice_store_entry *e)
{
    lt_persist_cache *pc = arg;
    lt_rec r = {0};
    r.cache = pc->name;
    r.cache_len = pc->name_len;
    r.partition = e->partition;
    r.version = e->version;
    if (kind == LATTICE_STORE_CHANGE_PUT) {
        r.kind = LT_REC_PUT;
        r.key = e->key;
        r.key_len = e->key_len;
        r.value = e->value;
        r.value_len = e->value_len;
        r.expire_ms = e->expire_ms;
        r.type = e->type;
    } else if (kind == LATTICE_STORE_CHANGE_REMOVE) {
        r.kind = LT_REC_REMOVE;
        r.key = e->key;
        r.key_len = e->key_len;
        /* The partition's counter as the remove left it (the ops layer
         * raises it before it removes), so a replay's counter counts the
         * removes too: copies compare by it (whole-grid restart). */
        if (pc->counter && pc->counter[e->partition] > r.version) r.version = pc->counter[e->partition];
    } else {
        r.kind = LT_REC_CLEAR;
        r.version = 0;
    }
    lt_persist_append(pc->p, &r);
}

void lt_persist_cache_counters(lt_persist_cache *pc, const uint64_t *counter) { pc->counter = counter; }

lt_persist_cache *lt_persist_cache_attach(lt_persist *p, lattice_store *s, const char *name, const char *spec,
                                          uint32_t partitions)
{
    size_t nl = strlen(name);
    if (nl == 0 || nl > LT_REC_MAX_CACHE) return NULL;
    lt_persist_cache *pc = lt_calloc(1, sizeof *pc);
    if (!pc) return NULL;
    pc->p = p;
    memcpy(pc->name, name, nl);
    pc->name_len = nl;
    pc->store = s;
    lt_rec r = {.kind = LT_REC_CACHE, .cache = name, .cache_len = nl, .version = partitions, .value = spec,
                .value_len = strlen(spec)};
    lt_persist_append(p, &r);
    lattice_store_change_hook h = {changed, pc};
    lattice_store_set_change_hook(s, &h);
    pc->next = p->caches;
    p->caches = pc;
    return pc;
}

void lt_persist_cache_drop(lt_persist_cache *pc)
{
    if (!pc || !pc->store) return;
    lattice_store_set_change_hook(pc->store, NULL);
    pc->store = NULL;
    lt_rec r = {.kind = LT_REC_DROP, .cache = pc->name, .cache_len = pc->name_len};
    lt_persist_append(pc->p, &r);
}
