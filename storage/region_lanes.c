/*
 * Region lanes: the lane a writer thread takes and the lane locks, a lane's
 * page lists (buckets by free space, the reuse list), and where a lane gets
 * empty pages (a chunk mapped from the OS, another lane's reuse list).  The
 * region's design - lanes, buckets, page states, the order in which a
 * writer looks for a page - is drawn in region.c's header; struct lane and
 * its lock rules are in region_int.h.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "lattice/alloc.h"
#include "region_int.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

/* Writer threads are numbered the first time they write to any region;
 * thread n writes through lane n % nlanes, so two writers get lanes of their
 * own (their own open pages, lists and lock) whatever partitions they write. */
static uint32_t writers_seen; /* atomic */
static __thread uint32_t writer_no = UINT32_MAX;

struct lane *region_lock_writer(lattice_region *r)
{
    if (writer_no == UINT32_MAX) writer_no = __atomic_fetch_add(&writers_seen, 1, __ATOMIC_RELAXED);
    struct lane *l = &r->lanes[writer_no % r->nlanes];
    pthread_mutex_lock(&l->lock);
    return l;
}

struct lane *region_lock_page(lattice_region *r, uint64_t link)
{
    const struct page_hdr *h = page_hdr(r, LATTICE_LINK_PAGE(link));
    /* The page holds a row, so its lane cannot change; the re-check only
     * guards a caller that passes a link whose row is already gone. */
    for (;;) {
        struct lane *l = &r->lanes[__atomic_load_n(&h->lane, __ATOMIC_RELAXED)];
        pthread_mutex_lock(&l->lock);
        if (h->lane == l->idx) return l;
        pthread_mutex_unlock(&l->lock);
    }
}

void region_unlock(struct lane *l) { pthread_mutex_unlock(&l->lock); }

void region_lock_all(lattice_region *r)
{
    for (int i = 0; i < REGION_LANES; i++) pthread_mutex_lock(&r->lanes[i].lock);
}

void region_unlock_all(lattice_region *r)
{
    for (int i = REGION_LANES; i-- > 0;) pthread_mutex_unlock(&r->lanes[i].lock);
}

/* ---------------------------------------------------------------- lists */

static void list_push(lattice_region *r, uint32_t *head, uint32_t pid)
{
    struct page_hdr *h = hdr_w(r, pid);
    h->prev = NO_PAGE;
    h->next = *head;
    if (*head != NO_PAGE) hdr_w(r, *head)->prev = pid;
    /* Atomic (relaxed, a plain store on x86): region_steal_reuse peeks at
     * another lane's reuse_head without that lane's lock. */
    __atomic_store_n(head, pid, __ATOMIC_RELAXED);
}

void region_list_unlink(lattice_region *r, uint32_t *head, uint32_t pid)
{
    struct page_hdr *h = hdr_w(r, pid);
    if (h->prev != NO_PAGE) hdr_w(r, h->prev)->next = h->next;
    else __atomic_store_n(head, h->next, __ATOMIC_RELAXED); /* as in list_push */
    if (h->next != NO_PAGE) hdr_w(r, h->next)->prev = h->prev;
    h->prev = h->next = NO_PAGE;
}

static int bucket_of(const lattice_region *r, uint32_t free)
{
    uint32_t b = free / r->step;
    if (b == 0) return BUCKET_NONE;
    return b >= LATTICE_REGION_BUCKETS ? LATTICE_REGION_BUCKETS - 1 : (int)b;
}

/* Takes a data page out of whatever list of its lane holds it. */
void region_lane_detach(lattice_region *r, struct lane *l, uint32_t pid)
{
    struct page_hdr *h = hdr_w(r, pid);
    if (h->bucket < LATTICE_REGION_BUCKETS) {
        region_list_unlink(r, &l->bucket_head[h->bucket], pid);
        if (--l->bucket_count[h->bucket] == 0) l->bucket_mask &= ~(1u << h->bucket);
    } else if (h->bucket == BUCKET_NONE) {
        l->pages_full--;
    }
    __atomic_store_n(&h->bucket, BUCKET_DETACHED, __ATOMIC_RELAXED); /* evict_candidate peeks */
}

/* Puts a detached data page where its free space says; empties go to reuse. */
void region_lane_place(lattice_region *r, struct lane *l, uint32_t pid)
{
    struct page_hdr *h = hdr_w(r, pid);
    if (h->live == 0) {
        page_write_begin(h);
        page_init_empty(h, r->page_size);
        page_write_end(h);
        __atomic_store_n(&h->kind, KIND_REUSE, __ATOMIC_RELAXED); /* evict_candidate peeks */
        __atomic_store_n(&h->bucket, BUCKET_REUSE, __ATOMIC_RELAXED);
        l->pages_data--;
        l->pages_reuse++;
        list_push(r, &l->reuse_head, pid);
        return;
    }
    int b = bucket_of(r, h->free);
    __atomic_store_n(&h->bucket, (uint8_t)b, __ATOMIC_RELAXED); /* evict_candidate peeks */
    if (b == BUCKET_NONE) {
        l->pages_full++;
        return;
    }
    list_push(r, &l->bucket_head[b], pid);
    l->bucket_count[b]++;
    l->bucket_mask |= 1u << b;
}

void region_lane_rebucket(lattice_region *r, struct lane *l, uint32_t pid)
{
    struct page_hdr *h = hdr_w(r, pid);
    if (h->live && h->bucket == bucket_of(r, h->free)) return;
    region_lane_detach(r, l, pid);
    region_lane_place(r, l, pid);
}

/* ---------------------------------------------------------------- memory */

/* Maps one chunk onto lane l's reuse list.  Lane l is locked on entry and
 * on return, but released while the chunk is mapped and faulted in (~3 ms
 * for 1 MiB here), so neither this lane's other writers nor other lanes'
 * writers that need memory wait for the faults: several chunks may be in
 * flight at once, each counted in pages_inflight against the bound.  A
 * chunk gets its place (chunk slot, page ids) only when it is published,
 * so pages_mapped always covers published chunks only.  Returns OK when the
 * caller should look at its lists again (memory arrived, or another
 * writer's chunk it waited for was published), REGION_FULL at the bound,
 * NOMEM when the OS refused. */
int region_map_chunk(lattice_region *r, struct lane *l)
{
    /* Memory given back earlier is taken again before the bound is looked
     * at: released pages count as mapped. */
    if (region_take_released(r, l)) return LATTICE_OK;
    pthread_mutex_lock(&r->map_lock);
    if (r->pages_mapped + r->pages_inflight + r->chunk_pages > r->max_pages) {
        int wait = r->pages_inflight != 0;
        if (wait) {
            /* The bound is taken by chunks still being faulted in: wait for
             * them rather than report a full region (or evict). */
            pthread_mutex_unlock(&l->lock);
            while (r->pages_inflight) pthread_cond_wait(&r->map_cond, &r->map_lock);
        }
        pthread_mutex_unlock(&r->map_lock);
        if (wait) pthread_mutex_lock(&l->lock);
        return wait ? LATTICE_OK : LATTICE_ERR_REGION_FULL;
    }
    r->pages_inflight += r->chunk_pages;
    pthread_mutex_unlock(&r->map_lock);
    pthread_mutex_unlock(&l->lock);

    uint8_t *c = lt_map(LATTICE_REGION_CHUNK);
    if (c) {
        if (madvise(c, LATTICE_REGION_CHUNK, MADV_POPULATE_WRITE) != 0)
            memset(c, 0, LATTICE_REGION_CHUNK);
        for (uint32_t i = 0; i < r->chunk_pages; i++) {
            struct page_hdr *h = (struct page_hdr *)(c + ((size_t)i << r->page_shift));
            page_init_empty(h, r->page_size);
            h->kind = KIND_REUSE;
            h->bucket = BUCKET_REUSE;
            h->lane = (uint8_t)l->idx;
        }
    }

    /* Lane, then map_lock (the lock order): the pages go on the list in the
     * same critical section that makes them visible, so a check or an
     * evictor never sees a mapped page that is in no list. */
    pthread_mutex_lock(&l->lock);
    pthread_mutex_lock(&r->map_lock);
    r->pages_inflight -= r->chunk_pages;
    if (c) {
        uint32_t first = r->pages_mapped;
        __atomic_store_n(&r->chunks[first >> r->chunk_shift], c, __ATOMIC_RELEASE);
        /* Pushed in reverse so the lowest page id is handed out first. */
        for (uint32_t i = r->chunk_pages; i-- > 0;) list_push(r, &l->reuse_head, first + i);
        l->pages_reuse += r->chunk_pages;
        __atomic_store_n(&r->pages_mapped, first + r->chunk_pages, __ATOMIC_RELEASE);
    }
    pthread_cond_broadcast(&r->map_cond);
    pthread_mutex_unlock(&r->map_lock);
    return c ? LATTICE_OK : LATTICE_ERR_NOMEM;
}

/* Moves one empty page from another lane's reuse list to l's.  Lane l
 * locked; the others are only try-locked.  Returns 1 when it moved one. */
int region_steal_reuse(lattice_region *r, struct lane *l)
{
    for (uint32_t k = 1; k < r->nlanes; k++) {
        struct lane *o = &r->lanes[(l->idx + k) % r->nlanes];
        if (__atomic_load_n(&o->reuse_head, __ATOMIC_RELAXED) == NO_PAGE) continue;
        if (pthread_mutex_trylock(&o->lock) != 0) continue;
        uint32_t pid = o->reuse_head;
        if (pid != NO_PAGE) {
            region_list_unlink(r, &o->reuse_head, pid);
            o->pages_reuse--;
            /* evict_locked and region_lock_page peek at it unlocked */
            __atomic_store_n(&hdr_w(r, pid)->lane, (uint8_t)l->idx, __ATOMIC_RELAXED);
            list_push(r, &l->reuse_head, pid);
            l->pages_reuse++;
        }
        pthread_mutex_unlock(&o->lock);
        if (pid != NO_PAGE) return 1;
    }
    return 0;
}

/* ---------------------------------------------------------------- giving memory back */

/* A region holds the most it ever held: pages emptied when entries go (a
 * partition moving away, a flush, deletes) stay on the reuse lists.  Beyond
 * a slack of empty pages, lattice_region_release gives their memory back to
 * the OS with madvise(MADV_DONTNEED) and parks their ids on r->released; a
 * lane that runs out of pages takes them back (region_take_released) before
 * it maps a new chunk.  The chunk stays mapped, so a lock-free reader
 * holding an old link still reads valid memory: zeros, whose seq differs from
 * the one it started with or whose item table is empty (region_read_entry
 * then retries or reports the entry gone, as for any emptied page). */

#define RELEASE_MIN 64

int region_take_released(lattice_region *r, struct lane *l)
{
    struct released_page got[RELEASE_TAKE];
    uint32_t n = 0;
    pthread_mutex_lock(&r->map_lock);
    while (n < RELEASE_TAKE && r->nreleased) got[n++] = r->released[--r->nreleased];
    pthread_mutex_unlock(&r->map_lock);
    for (uint32_t i = 0; i < n; i++) {
        struct page_hdr *h = hdr_w(r, got[i].pid);
        /* The first store faults a zeroed page in.  Odd above the old seq,
         * then even above it: no reader ever sees a seq it saw before the
         * page was released. */
        __atomic_store_n(&h->seq, got[i].seq + 1, __ATOMIC_RELAXED);
        __atomic_thread_fence(__ATOMIC_RELEASE);
        page_init_empty(h, r->page_size);
        h->access = 0;
        __atomic_store_n(&h->kind, KIND_REUSE, __ATOMIC_RELAXED);
        __atomic_store_n(&h->bucket, BUCKET_REUSE, __ATOMIC_RELAXED);
        __atomic_store_n(&h->lane, (uint8_t)l->idx, __ATOMIC_RELAXED);
        __atomic_store_n(&h->seq, got[i].seq + 2, __ATOMIC_RELEASE);
        list_push(r, &l->reuse_head, got[i].pid);
        l->pages_reuse++;
    }
    return n != 0;
}

static int cmp_pid(const void *a, const void *b)
{
    uint32_t x = ((const struct released_page *)a)->pid, y = ((const struct released_page *)b)->pid;
    return x < y ? -1 : x > y;
}

/* Releases up to want empty pages of lane l (locked); returns how many. */
static uint32_t release_lane(lattice_region *r, struct lane *l, uint32_t want)
{
    struct released_page pg[256];
    uint32_t n = 0;
    while (n < want && n < 256 && l->reuse_head != NO_PAGE) {
        uint32_t pid = l->reuse_head;
        region_list_unlink(r, &l->reuse_head, pid);
        l->pages_reuse--;
        struct page_hdr *h = hdr_w(r, pid);
        pg[n].pid = pid;
        pg[n].seq = __atomic_load_n(&h->seq, __ATOMIC_RELAXED);
        __atomic_store_n(&h->kind, KIND_UNMAPPED, __ATOMIC_RELAXED); /* evictors peek */
        n++;
    }
    if (!n) return 0;
    /* Neighbouring ids of one chunk are neighbouring memory: one call each run. */
    qsort(pg, n, sizeof pg[0], cmp_pid);
    uint32_t done = 0;
    for (uint32_t i = 0; i < n;) {
        uint32_t j = i + 1;
        while (j < n && pg[j].pid == pg[j - 1].pid + 1 && (pg[j].pid >> r->chunk_shift) == (pg[i].pid >> r->chunk_shift))
            j++;
        if (madvise(hdr_w(r, pg[i].pid), (size_t)(j - i) << r->page_shift, MADV_DONTNEED) == 0) {
            for (uint32_t k = i; k < j; k++) pg[done++] = pg[k];
        } else {
            /* Not given back (the pages are intact): onto the reuse list again. */
            for (uint32_t k = i; k < j; k++) {
                __atomic_store_n(&hdr_w(r, pg[k].pid)->kind, KIND_REUSE, __ATOMIC_RELAXED);
                list_push(r, &l->reuse_head, pg[k].pid);
                l->pages_reuse++;
            }
        }
        i = j;
    }
    pthread_mutex_lock(&r->map_lock);
    memcpy(r->released + r->nreleased, pg, done * sizeof pg[0]);
    r->nreleased += done;
    pthread_mutex_unlock(&r->map_lock);
    return done;
}

uint32_t lattice_region_release(lattice_region *r, uint32_t max_pages, uint32_t slack_pages)
{
    /* A page smaller than the OS's shares its memory with others. */
    long os_page = sysconf(_SC_PAGESIZE);
    if (!r->released || os_page <= 0 || r->page_size % (uint32_t)os_page) return 0;
    uint64_t data = 0, reuse = 0;
    for (uint32_t i = 0; i < r->nlanes; i++) {
        struct lane *l = &r->lanes[i];
        pthread_mutex_lock(&l->lock);
        data += l->pages_data;
        reuse += l->pages_reuse;
        pthread_mutex_unlock(&l->lock);
    }
    pthread_mutex_lock(&r->map_lock);
    uint64_t resident = r->pages_mapped - r->nreleased;
    pthread_mutex_unlock(&r->map_lock);
    /* Slack kept resident: a chunk, or a 32nd of the data pages, so a
     * region that shrinks a little and grows again pays no page faults. */
    uint64_t slack = data / 32 > r->chunk_pages ? data / 32 : r->chunk_pages;
    if (slack_pages != LATTICE_REGION_SLACK_AUTO) slack = slack_pages;
    if (reuse <= slack) return 0;
    uint64_t want = reuse - slack;
    /* The automatic slack also waits for a batch worth a call: pages that
     * empty and fill again under a steady load never leave. */
    if (slack_pages == LATTICE_REGION_SLACK_AUTO && want < RELEASE_MIN) return 0;
    if (resident <= r->keep_pages) return 0;
    if (want > resident - r->keep_pages) want = resident - r->keep_pages;
    if (want > max_pages) want = max_pages;
    uint64_t done = 0;
    for (uint32_t i = 0; i < r->nlanes && done < want; i++) {
        struct lane *l = &r->lanes[i];
        pthread_mutex_lock(&l->lock);
        for (uint32_t got = 1; got && done < want;) {
            got = release_lane(r, l, (uint32_t)(want - done));
            done += got;
        }
        pthread_mutex_unlock(&l->lock);
    }
    return (uint32_t)done;
}
