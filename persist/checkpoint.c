/*
 * checkpoint: every live entry of every store, written sequentially.
 *
 *   "LTCKPT01", u64 LSN (little-endian)
 *   per cache: CACHE (spec, partitions), COUNTERS (the partitions' update
 *              counters), MARKS (their delta marks, when the node keeps
 *              them), then a PUT per live entry, partition by partition
 *   END (version: how many records came before it)
 *
 * Written to checkpoint-<LSN>.ckpt.tmp, fsynced, renamed into place, the
 * directory fsynced: a checkpoint file is whole or absent.  Then the older
 * checkpoints go, and every segment whose records all lie before LSN (the
 * next segment starts at or before it); the current segment is closed at its
 * next batch so that the next checkpoint can delete it too.
 */

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "lattice/alloc.h"
#include "lattice/clock.h"
#include "lattice/log.h"
#include "persist_int.h"

typedef struct ckw {
    FILE *f;
    uint8_t *buf;
    size_t cap;
    uint64_t records;
    const char *name;
    bool failed;
} ckw;

static bool emit(ckw *w, const lt_rec *r)
{
    size_t n = lt_rec_size(r);
    if (n > w->cap) {
        size_t cap = w->cap ? w->cap : 4096;
        while (cap < n) cap *= 2;
        uint8_t *b = lt_realloc(w->buf, cap);
        if (!b) return false;
        w->buf = b;
        w->cap = cap;
    }
    lt_rec_encode(r, w->buf);
    if (fwrite(w->buf, 1, n, w->f) != n) return false;
    w->records++;
    return true;
}

static int visit(void *arg, const lattice_store_item *it)
{
    ckw *w = arg;
    lt_rec r = {.kind = LT_REC_PUT, .cache = w->name, .cache_len = strlen(w->name), .partition = it->partition,
                .version = it->version, .expire_ms = it->expire_ms, .key = it->key, .key_len = it->key_len,
                .value = it->value, .value_len = it->value_len, .type = it->type};
    if (!emit(w, &r)) {
        w->failed = true;
        return 1;
    }
    return 0;
}

static bool write_cache(ckw *w, const lt_persist_ckpt_cache *c)
{
    size_t nl = strlen(c->name);
    w->name = c->name;
    lt_rec r = {.kind = LT_REC_CACHE, .cache = c->name, .cache_len = nl, .version = c->partitions,
                .value = c->spec, .value_len = strlen(c->spec)};
    if (!emit(w, &r)) return false;
    uint8_t *cv = lt_malloc((size_t)c->partitions * 8);
    if (!cv) return false;
    for (uint32_t i = 0; i < c->partitions; i++)
        for (int k = 0; k < 8; k++) cv[8 * i + k] = (uint8_t)(c->counter[i] >> (8 * k));
    r = (lt_rec){.kind = LT_REC_COUNTERS, .cache = c->name, .cache_len = nl, .value = cv,
                 .value_len = (size_t)c->partitions * 8};
    bool ok = emit(w, &r);
    if (ok && c->marks) {
        for (uint32_t i = 0; i < c->partitions; i++)
            for (int k = 0; k < 8; k++) cv[8 * i + k] = (uint8_t)(c->marks[i] >> (8 * k));
        r.kind = LT_REC_MARKS;
        ok = emit(w, &r);
    }
    lt_free(cv);
    for (uint32_t p = 0; ok && p < c->partitions; p++) {
        if (!lattice_store_count(c->store, p)) continue;
        lattice_store_cursor *cur;
        if (lattice_store_cursor_open(c->store, p, &cur) != LATTICE_OK) return false;
        for (int done = 0; !done && ok;) {
            int st = lattice_store_cursor_next(cur, 1024, 4u << 20, visit, w, &done);
            ok = st == LATTICE_OK && !w->failed;
        }
        lattice_store_cursor_close(cur);
    }
    return ok;
}

lattice_status lt_checkpoint_write(const char *path, uint64_t lsn, const lt_persist_ckpt_cache *c, size_t n)
{
    char tmp[PERSIST_PATH + 8];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    ckw w = {0};
    w.f = fopen(tmp, "we");
    if (!w.f) {
        LT_LOG(LT_ERROR, "persist", "%s: cannot create: %s", tmp, strerror(errno));
        return LATTICE_ERR_IO;
    }
    setvbuf(w.f, NULL, _IOFBF, 1u << 20);
    uint8_t head[16];
    memcpy(head, "LTCKPT01", 8);
    for (int k = 0; k < 8; k++) head[8 + k] = (uint8_t)(lsn >> (8 * k));
    bool ok = fwrite(head, 1, sizeof head, w.f) == sizeof head;
    for (size_t i = 0; ok && i < n; i++) ok = write_cache(&w, &c[i]);
    if (ok) {
        lt_rec end = {.kind = LT_REC_END, .version = w.records};
        ok = emit(&w, &end);
    }
    ok = ok && fflush(w.f) == 0 && fsync(fileno(w.f)) == 0;
    int err = errno;
    ok &= fclose(w.f) == 0;
    lt_free(w.buf);
    if (ok && rename(tmp, path) != 0) {
        err = errno;
        ok = false;
    }
    if (!ok) {
        LT_LOG(LT_ERROR, "persist", "%s: cannot write the checkpoint: %s", path, strerror(err ? err : EIO));
        unlink(tmp);
        return LATTICE_ERR_IO;
    }
    return LATTICE_OK;
}

lattice_status lt_persist_checkpoint(lt_persist *p, const lt_persist_ckpt_cache *c, size_t n)
{
    uint64_t t0 = lt_mono_ms();
    uint64_t lsn = lt_persist_appended(p);
    char path[PERSIST_PATH];
    snprintf(path, sizeof path, "%s/checkpoint-%016" PRIx64 ".ckpt", p->dir, lsn);
    lattice_status st = lt_checkpoint_write(path, lsn, c, n);
    if (st != LATTICE_OK) return st;
    persist_fsync_dir(p->dir);
    uint64_t old = p->ckpt_lsn;
    p->ckpt_lsn = lsn;
    atomic_store(&p->roll, true);
    uint64_t *v;
    size_t k = persist_list(p->dir, "checkpoint-", ".ckpt", &v);
    for (size_t i = 0; i < k; i++) {
        if (v[i] >= lsn) continue;
        snprintf(path, sizeof path, "%s/checkpoint-%016" PRIx64 ".ckpt", p->dir, v[i]);
        unlink(path);
    }
    lt_free(v);
    size_t deleted = 0;
    k = persist_list(p->dir, "wal-", ".log", &v);
    for (size_t i = 0; i + 1 < k; i++) {
        if (v[i + 1] > lsn) break;
        snprintf(path, sizeof path, "%s/wal-%016" PRIx64 ".log", p->dir, v[i]);
        if (unlink(path) == 0) deleted++;
    }
    lt_free(v);
    persist_fsync_dir(p->dir);
    LT_LOG(LT_INFO, "persist", "%s: checkpoint at LSN %" PRIu64 " (%zu caches, %" PRIu64 " log bytes since the last) in %"
           PRIu64 " ms; %zu log segments deleted", p->dir, lsn, n, lsn - old, lt_mono_ms() - t0, deleted);
    return LATTICE_OK;
}
