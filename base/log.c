#include "lattice/log.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

int lt_log_threshold = LT_INFO;

static int log_fd = 2;
/* First 8 chars of the node id packed into one word, so a rejoin (new id)
 * can change it while other threads log: one atomic store, one atomic load,
 * never a torn tag.  0 = no tag. */
static uint64_t node_tag;

static const char *const level_names[] = {"ERROR", "WARN", "INFO", "DEBUG", "TRACE"};

void lattice_log_set_level(int level)
{
    if (level < LT_ERROR) level = LT_ERROR;
    if (level > LT_TRACE) level = LT_TRACE;
    __atomic_store_n(&lt_log_threshold, level, __ATOMIC_RELAXED);
}

int lattice_log_parse_level(const char *name)
{
    for (int i = 0; i <= LT_TRACE; i++)
        if (name && strcasecmp(name, level_names[i]) == 0) return i;
    if (name && strcasecmp(name, "warning") == 0) return LT_WARN;
    return -1;
}

void lattice_log_set_node(const char *node_id)
{
    uint64_t tag = 0;
    if (node_id) memcpy(&tag, node_id, strnlen(node_id, sizeof tag));
    __atomic_store_n(&node_tag, tag, __ATOMIC_RELAXED);
}

void lattice_log_set_fd(int fd) { __atomic_store_n(&log_fd, fd, __ATOMIC_RELAXED); }

void lattice_log_write(int level, const char *module, const char *fmt, ...)
{
    char line[2048];
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    if (level < LT_ERROR) level = LT_ERROR;
    if (level > LT_TRACE) level = LT_TRACE;

    int n = snprintf(line, sizeof line, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %-5s ",
                     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
                     tm.tm_sec, ts.tv_nsec / 1000000, level_names[level]);
    uint64_t tag = __atomic_load_n(&node_tag, __ATOMIC_RELAXED);
    if (tag) n += snprintf(line + n, sizeof line - n, "[node %.8s] ", (const char *)&tag);
    n += snprintf(line + n, sizeof line - n, "%s: ", module ? module : "-");

    va_list ap;
    va_start(ap, fmt);
    if (n < (int)sizeof line) n += vsnprintf(line + n, sizeof line - n, fmt, ap);
    va_end(ap);
    if (n > (int)sizeof line - 2) n = (int)sizeof line - 2; /* truncated line */
    line[n++] = '\n';
    /* One write per line: lines from different threads never interleave. */
    ssize_t w = write(__atomic_load_n(&log_fd, __ATOMIC_RELAXED), line, (size_t)n);
    (void)w;
}
