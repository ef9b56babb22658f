/*
 * lattice/cache_spec.h: cache specs as text - "NAME[:k=v,...]", the form
 * lattice_cache_create() takes and lattice_cache_info.spec reports (keys and
 * defaults: docs/CACHES.md).  Part of the public C API; implemented by the
 * partition module, which owns the cache configuration.
 */
#ifndef LATTICE_CACHE_SPEC_H
#define LATTICE_CACHE_SPEC_H

#include <stddef.h>

#include "lattice/status.h"

#define LATTICE_CACHE_NAME_MAX 64 /* bytes of a cache name, without the NUL */
#define LATTICE_CACHE_SPEC_MAX 1024 /* bytes of a full spec, with the NUL */

/* The full spec (every key, in the documented order) of the cache NAME with
 * the options argv[0..argc) ("k=v" each, the form `lattice cache create NAME
 * k=v ...` takes) applied to the defaults, into spec[0..len).  On a bad name,
 * key or value (or a key given twice): LATTICE_ERR_INVAL and a sentence in err
 * naming the key and the accepted values; LATTICE_ERR_TOO_LARGE when len is
 * too small.  spec is written only on LATTICE_OK. */
lattice_status lattice_cache_spec_from_args(const char *name, int argc, const char *const *argv, char *spec,
                                            size_t len, char *err, size_t errlen);

#endif
