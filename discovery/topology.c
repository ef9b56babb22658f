/*
 * Topology snapshots: immutable, reference counted, converted to and from the
 * wire.  A snapshot is one allocation for the struct plus one per string, all
 * through the lattice allocator; it is never modified after topo_build().
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "lattice/alloc.h"

void member_free_fields(lattice_member *m)
{
    lt_free((char *)m->id);
    lt_free((char *)m->consistent_id);
    lt_free((char *)m->addr);
    lt_free((char *)m->host);
    for (size_t i = 0; i < m->n_attrs; i++) {
        lt_free((char *)m->attrs[i].key);
        lt_free((char *)m->attrs[i].value);
    }
    lt_free((void *)m->attrs);
}

static void topo_free(lattice_topology *t)
{
    if (!t) return;
    for (size_t i = 0; i < t->n; i++) member_free_fields(&t->members[i]);
    lt_free(t->members);
    lt_free(t->coordinator);
    for (size_t i = 0; i < t->n_baseline; i++) lt_free(t->baseline[i]);
    lt_free(t->baseline);
    lt_free(t);
}

static char *dup_or_empty(const char *s) { return lt_strdup(s ? s : ""); }

/* Deep copy src into dst; false on allocation failure (dst then holds what
 * was copied so far, freed by member_free_fields). */
bool member_copy(lattice_member *dst, const lattice_member *src)
{
    memset(dst, 0, sizeof *dst);
    dst->order = src->order;
    dst->role = src->role;
    dst->start_time_ms = src->start_time_ms;
    dst->id = dup_or_empty(src->id);
    dst->consistent_id = dup_or_empty(src->consistent_id);
    dst->addr = dup_or_empty(src->addr);
    dst->host = dup_or_empty(src->host);
    if (!dst->id || !dst->consistent_id || !dst->addr || !dst->host) return false;
    if (src->n_attrs) {
        lattice_attr *a = lt_calloc(src->n_attrs, sizeof *a);
        if (!a) return false;
        dst->attrs = a;
        for (size_t i = 0; i < src->n_attrs; i++) {
            a[i].key = dup_or_empty(src->attrs[i].key);
            a[i].value = dup_or_empty(src->attrs[i].value);
            dst->n_attrs = i + 1;
            if (!a[i].key || !a[i].value) return false;
        }
    }
    return true;
}

static int by_order(const void *a, const void *b)
{
    const lattice_member *x = a, *y = b;
    return x->order < y->order ? -1 : x->order > y->order;
}

lattice_topology *topo_build(uint64_t major, uint64_t minor, uint64_t next_order, uint32_t fd_ms,
                             const char *coordinator, const lattice_member *const *members, size_t n)
{
    lattice_topology *t = lt_calloc(1, sizeof *t);
    if (!t) return NULL;
    atomic_init(&t->refs, 1);
    t->major = major;
    t->minor = minor;
    t->next_order = next_order;
    t->fd_ms = fd_ms;
    t->coordinator = dup_or_empty(coordinator);
    t->members = n ? lt_calloc(n, sizeof *t->members) : NULL;
    if (!t->coordinator || (n && !t->members)) {
        topo_free(t);
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        t->n = i + 1;
        if (!member_copy(&t->members[i], members[i])) {
            topo_free(t);
            return NULL;
        }
    }
    qsort(t->members, t->n, sizeof *t->members, by_order);
    return t;
}

static int by_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

bool topo_set_baseline(lattice_topology *t, const char *const *cids, size_t n, uint64_t version)
{
    char **b = n ? lt_calloc(n, sizeof *b) : NULL;
    if (n && !b) return false;
    for (size_t i = 0; i < n; i++)
        if (!(b[i] = dup_or_empty(cids[i]))) {
            for (size_t k = 0; k < i; k++) lt_free(b[k]);
            lt_free(b);
            return false;
        }
    qsort(b, n, sizeof *b, by_str);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (k && strcmp(b[k - 1], b[i]) == 0) lt_free(b[i]);
        else b[k++] = b[i];
    }
    for (size_t i = 0; i < t->n_baseline; i++) lt_free(t->baseline[i]);
    lt_free(t->baseline);
    t->baseline = b;
    t->n_baseline = k;
    t->baseline_version = version;
    return true;
}

bool topo_in_baseline(const lattice_topology *t, const char *cid)
{
    if (!t || !cid) return false;
    return t->n_baseline && bsearch(&cid, t->baseline, t->n_baseline, sizeof *t->baseline, by_str) != NULL;
}

void member_from_proto_view(const Latdisc__Member *p, lattice_member *m, lattice_attr *attrs,
                            size_t max_attrs)
{
    memset(m, 0, sizeof *m);
    m->id = p->id;
    m->consistent_id = p->consistent_id;
    m->order = p->order;
    m->role = p->client ? LATTICE_ROLE_CLIENT : LATTICE_ROLE_SERVER;
    m->addr = p->addr;
    m->host = p->host;
    m->start_time_ms = p->start_time_ms;
    size_t k = p->n_attrs < max_attrs ? p->n_attrs : max_attrs;
    for (size_t i = 0; i < k; i++) {
        attrs[i].key = p->attrs[i]->key;
        attrs[i].value = p->attrs[i]->value;
    }
    m->attrs = attrs;
    m->n_attrs = k;
}

lattice_topology *topo_from_proto(const Latdisc__Topology *p)
{
    size_t n = p->n_members;
    lattice_member *views = n ? lt_calloc(n, sizeof *views) : NULL;
    const lattice_member **ptrs = n ? lt_calloc(n, sizeof *ptrs) : NULL;
    lattice_attr *attrs = n ? lt_calloc(n * LATTICE_MAX_ATTRS, sizeof *attrs) : NULL;
    lattice_topology *t = NULL;
    if (n && (!views || !ptrs || !attrs)) goto out;
    for (size_t i = 0; i < n; i++) {
        member_from_proto_view(p->members[i], &views[i], attrs + i * LATTICE_MAX_ATTRS,
                               LATTICE_MAX_ATTRS);
        ptrs[i] = &views[i];
    }
    t = topo_build(p->major, p->minor, p->next_order, p->failure_detection_ms, p->coordinator, ptrs, n);
    if (t && !topo_set_baseline(t, (const char *const *)p->baseline, p->n_baseline, p->baseline_version)) {
        topo_put(t);
        t = NULL;
    }
out:
    lt_free(views);
    lt_free(ptrs);
    lt_free(attrs);
    return t;
}

void topo_get(lattice_topology *t) { atomic_fetch_add_explicit(&t->refs, 1, memory_order_relaxed); }

void topo_put(lattice_topology *t)
{
    /* acq_rel: every access through earlier references happens before the
     * free by whoever drops the last one. */
    if (t && atomic_fetch_sub_explicit(&t->refs, 1, memory_order_acq_rel) == 1) topo_free(t);
}

lattice_status member_to_proto(const lattice_member *m, Latdisc__Member *p)
{
    latdisc__member__init(p);
    p->id = (char *)m->id;
    p->consistent_id = (char *)m->consistent_id;
    p->order = m->order;
    p->client = m->role == LATTICE_ROLE_CLIENT;
    p->addr = (char *)m->addr;
    p->host = (char *)m->host;
    p->start_time_ms = m->start_time_ms;
    if (m->n_attrs) {
        /* One block: the pointer array followed by the Attr structs. */
        void *blk = lt_calloc(m->n_attrs, sizeof(Latdisc__Attr *) + sizeof(Latdisc__Attr));
        if (!blk) return LATTICE_ERR_NOMEM;
        Latdisc__Attr **pp = blk;
        Latdisc__Attr *as = (Latdisc__Attr *)(pp + m->n_attrs);
        for (size_t i = 0; i < m->n_attrs; i++) {
            latdisc__attr__init(&as[i]);
            as[i].key = (char *)m->attrs[i].key;
            as[i].value = (char *)m->attrs[i].value;
            pp[i] = &as[i];
        }
        p->attrs = pp;
        p->n_attrs = m->n_attrs;
    }
    return LATTICE_OK;
}

void member_proto_release(Latdisc__Member *p)
{
    lt_free(p->attrs);
    p->attrs = NULL;
    p->n_attrs = 0;
}

lattice_status topo_to_proto(const lattice_topology *t, Latdisc__Topology *p)
{
    latdisc__topology__init(p);
    p->major = t->major;
    p->minor = t->minor;
    p->next_order = t->next_order;
    p->failure_detection_ms = t->fd_ms;
    p->coordinator = t->coordinator;
    p->baseline = t->baseline; /* borrowed, like the strings */
    p->n_baseline = t->n_baseline;
    p->baseline_version = t->baseline_version;
    if (!t->n) return LATTICE_OK;
    void *blk = lt_calloc(t->n, sizeof(Latdisc__Member *) + sizeof(Latdisc__Member));
    if (!blk) return LATTICE_ERR_NOMEM;
    Latdisc__Member **pp = blk;
    Latdisc__Member *ms = (Latdisc__Member *)(pp + t->n);
    p->members = pp;
    for (size_t i = 0; i < t->n; i++) {
        pp[i] = &ms[i];
        p->n_members = i + 1;
        if (member_to_proto(&t->members[i], &ms[i]) != LATTICE_OK) {
            topo_proto_release(p);
            return LATTICE_ERR_NOMEM;
        }
    }
    return LATTICE_OK;
}

void topo_proto_release(Latdisc__Topology *p)
{
    for (size_t i = 0; i < p->n_members; i++) member_proto_release(p->members[i]);
    lt_free(p->members);
    p->members = NULL;
    p->n_members = 0;
}

/* ---- public accessors (lattice.h) ---- */

void lattice_topology_release(lattice_topology *t) { topo_put(t); }
uint64_t lattice_topology_major(const lattice_topology *t) { return t->major; }
uint64_t lattice_topology_minor(const lattice_topology *t) { return t->minor; }
const char *lattice_topology_coordinator(const lattice_topology *t) { return t->coordinator; }
size_t lattice_topology_size(const lattice_topology *t) { return t->n; }

const lattice_member *lattice_topology_member(const lattice_topology *t, size_t i)
{
    return i < t->n ? &t->members[i] : NULL;
}

const lattice_member *lattice_topology_find(const lattice_topology *t, const char *id)
{
    for (size_t i = 0; t && id && i < t->n; i++)
        if (strcmp(t->members[i].id, id) == 0) return &t->members[i];
    return NULL;
}

size_t lattice_topology_baseline_size(const lattice_topology *t) { return t->n_baseline; }
uint64_t lattice_topology_baseline_version(const lattice_topology *t) { return t->baseline_version; }

const char *lattice_topology_baseline_at(const lattice_topology *t, size_t i)
{
    return i < t->n_baseline ? t->baseline[i] : NULL;
}

const char *lattice_member_attr(const lattice_member *m, const char *key)
{
    for (size_t i = 0; m && key && i < m->n_attrs; i++)
        if (strcmp(m->attrs[i].key, key) == 0) return m->attrs[i].value;
    return NULL;
}
