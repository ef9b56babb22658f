/*
 * What the suites of the collection types (test_hash.c, test_list.c,
 * test_set.c) share on top of one_cache.h: a command run on the fixture's
 * store with its arguments packed as lattice/coll.h says, and its reply
 * shown as text to compare ("*2 $a $1": each element its type byte and its
 * bytes or number, blank-separated).
 */
#ifndef LATTICE_TESTS_COLL_FIXTURE_H
#define LATTICE_TESTS_COLL_FIXTURE_H

#include <check.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "lattice/coll.h"
#include "one_cache.h"
#include "partition/partition.h"

static uint32_t part(const char *key) { return lattice_partition_of_key(key, strlen(key), 16); }

/* The reply as text: elements separated by blanks, each its type byte and
 * its bytes or number ("*2 $a $1", ":3", "_", "-ERR ..."). */
static char shown[8192];

static const char *show(const lattice_op_result *r)
{
    size_t off = 0, w = 0;
    lattice_coll_elem e;
    shown[0] = 0;
    int k;
    while ((k = lattice_coll_reply_next(r->value, r->value_len, &off, &e)) == 1) {
        int n = e.type == '$' || e.type == '+' || e.type == '-' || e.type == ','
                    ? snprintf(shown + w, sizeof shown - w, "%s%c%.*s", w ? " " : "", e.type, (int)e.len, e.ptr)
                : e.type == '_' ? snprintf(shown + w, sizeof shown - w, "%s_", w ? " " : "")
                                : snprintf(shown + w, sizeof shown - w, "%s%c%lld", w ? " " : "", e.type, e.num);
        w += (size_t)n;
    }
    ck_assert_int_eq(k, 0);
    return shown;
}

static repl_out last_repl;

/* Runs cmd on key with the NULL-ended arguments after it. */
static lattice_op_result run(int cmd, const char *key, ...)
{
    lattice_coll_arg a[16];
    size_t n = 0;
    va_list ap;
    va_start(ap, key);
    for (const char *s; (s = va_arg(ap, const char *));) a[n++] = (lattice_coll_arg){s, strlen(s)};
    va_end(ap);
    static char buf[1024];
    size_t len = lattice_coll_pack(buf, sizeof buf, a, n);
    ck_assert_uint_gt(len, 0);
    lattice_op op = lattice_op_coll(NULL, cmd, key, strlen(key), buf, len);
    exec_in in = {op.kind, 0, part(key), key, strlen(key), op.value, op.value_len, op.delta, 0};
    lattice_op_result r;
    exec_local(&cache, &in, &scratch, &r, &last_repl);
    return r;
}

#define SHOWS(r, want)                                                                                                 \
    do {                                                                                                               \
        lattice_op_result r_ = (r);                                                                                    \
        ck_assert_int_eq(r_.status, LATTICE_OK);                                                                       \
        ck_assert_str_eq(show(&r_), want);                                                                             \
    } while (0)

#endif
