/*
 * console: the web console's assets (http/console/: index.html, the style
 * sheet and the ES modules), compiled into the binary by console/embed.cmake,
 * so a node serves its console with nothing to install and nothing fetched
 * from anywhere else.  The page reads the node's own JSON pages and
 * /metrics; docs/OPERATIONS.md, "Web console", describes it.
 */
#include <string.h>

#include "http_int.h"

/* Written by console/embed.cmake (console_assets.c in the build tree). */
extern const size_t http_console_count;
extern const char *const http_console_names[];
extern const unsigned char *const http_console_data[];
extern const size_t http_console_sizes[];

static const char *type_of(const char *name)
{
    const char *dot = strrchr(name, '.');
    if (!dot) return "application/octet-stream";
    if (!strcmp(dot, ".html")) return "text/html; charset=utf-8";
    if (!strcmp(dot, ".css")) return "text/css; charset=utf-8";
    if (!strcmp(dot, ".mjs") || !strcmp(dot, ".js")) return "text/javascript; charset=utf-8";
    if (!strcmp(dot, ".svg")) return "image/svg+xml";
    return "application/octet-stream";
}

bool http_console_asset(const char *url, http_asset *out)
{
    if (!url || url[0] != '/') return false;
    const char *name = !strcmp(url, "/") ? "index.html" : url + 1;
    for (size_t i = 0; i < http_console_count; i++) {
        if (strcmp(http_console_names[i], name) != 0) continue;
        *out = (http_asset){http_console_names[i], type_of(name), http_console_data[i], http_console_sizes[i]};
        return true;
    }
    return false;
}
