/*
 * One logging macro for the whole project:
 *
 *     LT_LOG(LT_WARN, "discovery", "dropped %zu-byte frame from %s", n, peer);
 *
 * The level is checked before the arguments are evaluated, so a disabled
 * DEBUG line costs one load and one compare.  Lines go to stderr as
 *
 *     2026-11-30T02:40:01.123Z WARN  [node 1a2b3c4d] discovery: ...
 *
 * (the node id appears once lattice_log_set_node() was called).  Thread-safe:
 * one write(2) per line, so lines from threads never interleave.
 */
#ifndef LATTICE_LOG_H
#define LATTICE_LOG_H

#include <stdarg.h>

enum lt_log_level { LT_ERROR = 0, LT_WARN = 1, LT_INFO = 2, LT_DEBUG = 3, LT_TRACE = 4 };

extern int lt_log_threshold; /* read with relaxed atomics; set via lattice_log_set_level */

#define LT_LOG(level, module, ...)                                                 \
    do {                                                                           \
        if ((int)(level) <= __atomic_load_n(&lt_log_threshold, __ATOMIC_RELAXED)) \
            lattice_log_write((level), (module), __VA_ARGS__);                     \
    } while (0)

void lattice_log_write(int level, const char *module, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void lattice_log_set_level(int level);
/* Parse "error|warn|info|debug|trace"; returns -1 when unknown. */
int lattice_log_parse_level(const char *name);
/* Tag every later line with this node id (first 8 chars are shown); NULL clears. */
void lattice_log_set_node(const char *node_id);
/* Redirect output (default 2 = stderr). */
void lattice_log_set_fd(int fd);

#endif
