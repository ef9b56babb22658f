/*
 * geo: Redis 7.0's GEO commands (geo.c, geohash.c, geohash_helper.c) on a
 * sorted set, in coll.c's frame: GEOADD, GEOPOS, GEODIST, GEOHASH,
 * GEOSEARCH, GEORADIUS, GEORADIUSBYMEMBER and their _RO forms, and the
 * searches GEOSEARCHSTORE and GEORADIUS ... STORE read (setop.c stores what
 * they find).
 *
 * A position is a member's score: the 52-bit interleaving of its latitude
 * and longitude, each a 26-bit fixed-point fraction of its range (latitude
 * -85.05112878 .. 85.05112878, longitude -180 .. 180), latitude in the even
 * bits - exactly Redis's, so a sorted set GEOADD fills here is the one Redis
 * fills, score for score.  Decoding gives the centre of the member's cell,
 * as Redis's; distances are Redis's haversine on a sphere of 6372797.560856
 * m.  GEOADD is ZADD of the encoded scores (zset.c).
 *
 * A search reads the whole sorted set and keeps the members in the shape
 * (Redis's own tests: within the radius, or within half the box's width and
 * height of the centre), in the set's order; ASC/DESC sort by distance, COUNT
 * without ANY sorts ascending and keeps the first COUNT, ANY stops at COUNT
 * in the set's order.  Redis visits the 9 geohash cells around the centre
 * instead, so where a search neither sorts nor counts, its members can come
 * in another order than Redis's (the same members).
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll_int.h"
#include "lattice/alloc.h"

#define GEO_STEP 26
#define GEO_LAT_MIN -85.05112878
#define GEO_LAT_MAX 85.05112878
#define GEO_LONG_MIN -180.0
#define GEO_LONG_MAX 180.0
#define EARTH_RADIUS_M 6372797.560856
#define DEG_RAD (M_PI / 180.0)

#define ERR_MEMBER "ERR could not decode requested zset member"
#define ERR_UNIT "ERR unsupported unit provided. please use M, KM, FT, MI"

/* ---- the geohash ---- */

/* Bit i of x to bit 2i, of y to bit 2i+1. */
static uint64_t interleave(uint32_t x, uint32_t y)
{
    uint64_t r = 0;
    for (int i = 0; i < 32; i++) r |= ((uint64_t)(x >> i & 1) << (2 * i)) | ((uint64_t)(y >> i & 1) << (2 * i + 1));
    return r;
}

static void deinterleave(uint64_t v, uint32_t *x, uint32_t *y)
{
    *x = *y = 0;
    for (int i = 0; i < 32; i++) {
        *x |= (uint32_t)(v >> (2 * i) & 1) << i;
        *y |= (uint32_t)(v >> (2 * i + 1) & 1) << i;
    }
}

/* geohashEncode of (lon, lat) within the ranges, GEO_STEP bits each. */
static uint64_t encode(double lon, double lat, double lat_min, double lat_max)
{
    double lat_off = (lat - lat_min) / (lat_max - lat_min) * (double)(1ULL << GEO_STEP);
    double lon_off = (lon - GEO_LONG_MIN) / (GEO_LONG_MAX - GEO_LONG_MIN) * (double)(1ULL << GEO_STEP);
    return interleave((uint32_t)lat_off, (uint32_t)lon_off);
}

/* The centre of a score's cell: xy[0] longitude, xy[1] latitude. */
static void decode(double score, double *xy)
{
    uint32_t ilat, ilon;
    deinterleave((uint64_t)score, &ilat, &ilon);
    double cells = (double)(1ULL << GEO_STEP), lat_scale = GEO_LAT_MAX - GEO_LAT_MIN;
    double lat_lo = GEO_LAT_MIN + (ilat * 1.0 / cells) * lat_scale;
    double lat_hi = GEO_LAT_MIN + ((ilat + 1) * 1.0 / cells) * lat_scale;
    double lon_lo = GEO_LONG_MIN + (ilon * 1.0 / cells) * (GEO_LONG_MAX - GEO_LONG_MIN);
    double lon_hi = GEO_LONG_MIN + ((ilon + 1) * 1.0 / cells) * (GEO_LONG_MAX - GEO_LONG_MIN);
    xy[0] = (lon_lo + lon_hi) / 2;
    xy[0] = xy[0] > GEO_LONG_MAX ? GEO_LONG_MAX : xy[0] < GEO_LONG_MIN ? GEO_LONG_MIN : xy[0];
    xy[1] = (lat_lo + lat_hi) / 2;
    xy[1] = xy[1] > GEO_LAT_MAX ? GEO_LAT_MAX : xy[1] < GEO_LAT_MIN ? GEO_LAT_MIN : xy[1];
}

static double lat_distance(double lat1, double lat2) { return EARTH_RADIUS_M * fabs(lat2 * DEG_RAD - lat1 * DEG_RAD); }

/* geohashGetDistance: haversine (a meridian's arc when the longitudes match). */
static double distance(double lon1, double lat1, double lon2, double lat2)
{
    double v = sin((lon2 * DEG_RAD - lon1 * DEG_RAD) / 2);
    if (v == 0.0) return lat_distance(lat1, lat2);
    double lat1r = lat1 * DEG_RAD, lat2r = lat2 * DEG_RAD, u = sin((lat2r - lat1r) / 2);
    return 2.0 * EARTH_RADIUS_M * asin(sqrt(u * u + cos(lat1r) * cos(lat2r) * v * v));
}

/* ---- arguments ---- */

/* getDoubleFromObject; false with msg (or Redis's "not a valid float") replied. */
static bool arg_double(coll_ctx *x, const lattice_coll_arg *a, double *d, const char *msg)
{
    int ok = coll_parse_double(a, d);
    if (ok < 0) x->r->status = LATTICE_ERR_NOMEM;
    else if (!ok) coll_error(x, msg ? msg : "ERR value is not a valid float");
    return ok == 1;
}

/* extractLongLatOrReply: two floats within the geohash's ranges. */
static bool lon_lat(coll_ctx *x, const lattice_coll_arg *a, double *xy)
{
    if (!arg_double(x, &a[0], &xy[0], NULL) || !arg_double(x, &a[1], &xy[1], NULL)) return false;
    if (xy[0] < GEO_LONG_MIN || xy[0] > GEO_LONG_MAX || xy[1] < GEO_LAT_MIN || xy[1] > GEO_LAT_MAX) {
        char m[160];
        snprintf(m, sizeof m, "ERR invalid longitude,latitude pair %f,%f", xy[0], xy[1]);
        coll_error(x, m);
        return false;
    }
    return true;
}

/* extractUnitOrReply: meters per unit, or -1 (replied). */
static double unit(coll_ctx *x, const lattice_coll_arg *a)
{
    double u = coll_is(a, "m") ? 1 : coll_is(a, "km") ? 1000 : coll_is(a, "ft") ? 0.3048 : coll_is(a, "mi") ? 1609.34 : -1;
    if (u < 0) coll_error(x, ERR_UNIT);
    return u;
}

/* ---- replies ---- */

/* addReplyHumanLongDouble: RESP3's double, RESP2's bulk string (the
 * framing of lattice/coll.h carries it as a double). */
static void human(coll_ctx *x, double d)
{
    char t[EXEC_LD_TEXT_MAX];
    t[0] = ',';
    size_t n = exec_format_ld(t + 1, sizeof t - 3, (long double)d);
    memcpy(t + 1 + n, "\r\n", 2);
    coll_raw(x, t, n + 3);
}

/* addReplyDoubleDistance: 4 digits after the point, a bulk string. */
static void dist_reply(coll_ctx *x, double d)
{
    char t[64];
    int n = snprintf(t, sizeof t, "%.4f", d);
    coll_bulk(x, t, (size_t)n);
}

/* ---- the commands ---- */

static const zent *member_of(const zent *v, size_t n, const lattice_coll_arg *m)
{
    for (size_t i = 0; i < n; i++)
        if (v[i].ml == m->len && (!m->len || !memcmp(v[i].m, m->ptr, m->len))) return &v[i];
    return NULL;
}

/* GEOADD key [NX|XX] [CH] lon lat member ...: ZADD of the encoded scores. */
static void geoadd(coll_ctx *x)
{
    size_t at = 0;
    bool nx = false, xx = false;
    for (; at < x->argc; at++) {
        if (coll_is(&x->argv[at], "nx")) nx = true;
        else if (coll_is(&x->argv[at], "xx")) xx = true;
        else if (!coll_is(&x->argv[at], "ch")) break;
    }
    if ((x->argc - at) % 3 || (nx && xx) || at == x->argc) {
        coll_error(x, COLL_ERR_SYNTAX);
        return;
    }
    size_t n = (x->argc - at) / 3, argc = at + 2 * n;
    char (*num)[24] = lt_malloc(n * sizeof *num);
    lattice_coll_arg *a = num ? lt_malloc(argc * sizeof *a) : NULL;
    if (!a) {
        lt_free(num);
        x->r->status = LATTICE_ERR_NOMEM;
        return;
    }
    memcpy(a, x->argv, at * sizeof *a);
    for (size_t i = 0; i < n; i++) {
        double xy[2];
        if (!lon_lat(x, &x->argv[at + 3 * i], xy)) {
            lt_free(a);
            lt_free(num);
            return;
        }
        uint64_t bits = encode(xy[0], xy[1], GEO_LAT_MIN, GEO_LAT_MAX);
        a[at + 2 * i] = (lattice_coll_arg){num[i], (size_t)snprintf(num[i], sizeof num[i], "%llu", (unsigned long long)bits)};
        a[at + 2 * i + 1] = x->argv[at + 3 * i + 2];
    }
    /* The arguments become ZADD's (in front of the items, where zadd reads them). */
    x->argc = argc;
    if (coll_items(x, 0, 1)) {
        memcpy(x->argv, a, argc * sizeof *a);
        x->cmd = LATTICE_COLL_ZADD;
        zset_run(x);
    }
    lt_free(a);
    lt_free(num);
}

/* GEOPOS key member ... (positions, a null array for a missing member)
 * and GEOHASH key member ... (11 characters of the standard geohash -
 * latitude -90 .. 90 - of the decoded position, the last always '0'; nil). */
static void positions(coll_ctx *x, bool hash)
{
    static const char alphabet[] = "0123456789bcdefghjkmnpqrstuvwxyz";
    size_t n;
    const zent *v = zset_members(x, &n);
    if (!v) return;
    coll_array(x, x->argc);
    for (size_t i = 0; i < x->argc; i++) {
        const zent *e = member_of(v, n, &x->argv[i]);
        double xy[2];
        if (e) decode(e->score, xy);
        if (!e && hash) {
            coll_null(x);
        } else if (!e) {
            coll_null_array(x);
        } else if (hash) {
            uint64_t bits = encode(xy[0], xy[1], -90, 90);
            char buf[11];
            for (int k = 0; k < 11; k++) buf[k] = alphabet[k == 10 ? 0 : (bits >> (52 - (k + 1) * 5)) & 0x1f];
            coll_bulk(x, buf, 11);
        } else {
            coll_array(x, 2);
            human(x, xy[0]);
            human(x, xy[1]);
        }
    }
}

/* GEODIST key member1 member2 [unit] */
static void geodist(coll_ctx *x)
{
    double to_m = 1;
    if (x->argc == 3 && (to_m = unit(x, &x->argv[2])) < 0) return;
    if (x->argc > 3) {
        coll_error(x, COLL_ERR_SYNTAX);
        return;
    }
    size_t n;
    const zent *v = zset_members(x, &n);
    if (!v) return;
    const zent *a = x->found ? member_of(v, n, &x->argv[0]) : NULL, *b = a ? member_of(v, n, &x->argv[1]) : NULL;
    if (!a || !b) {
        coll_null(x);
        return;
    }
    double p[2], q[2];
    decode(a->score, p);
    decode(b->score, q);
    dist_reply(x, distance(p[0], p[1], q[0], q[1]) / to_m);
}

enum { RADIUS_COORDS = 1, RADIUS_MEMBER = 2, NOSTORE = 4, SEARCH = 8, SEARCHSTORE = 16 };

typedef struct found {
    const zent *e;
    double dist, xy[2];
} found;

static int by_dist(const void *pa, const void *pb)
{
    double a = ((const found *)pa)->dist, b = ((const found *)pb)->dist;
    return a > b ? 1 : a == b ? 0 : -1;
}

/* georadiusGeneric: the key's type first, then the centre, the shape and
 * the options in Redis's order.  With a store key (GEORADIUS ... STORE,
 * GEOSEARCHSTORE) the reply is what to store: pairs of member and score
 * (the position, or the distance with STOREDIST). */
static void search(coll_ctx *x, int flags)
{
    size_t n;
    const zent *v = zset_members(x, &n);
    if (!v) return;
    bool radius = true;
    double xy[2] = {0, 0}, conv = 1, r = 0, w = 0, h = 0;
    size_t base = flags & SEARCH ? 1 : 0; /* GEOSEARCH(STORE): its name as the client sent it, first */
    const lattice_coll_arg *a = x->argv;
    if (flags & (RADIUS_COORDS | RADIUS_MEMBER)) {
        base = flags & RADIUS_COORDS ? 4 : 3;
        if (flags & RADIUS_COORDS) {
            if (!lon_lat(x, a, xy)) return;
        } else if (x->found) {
            const zent *e = member_of(v, n, &a[0]);
            if (!e) {
                coll_error(x, ERR_MEMBER);
                return;
            }
            decode(e->score, xy);
        }
        if ((flags & RADIUS_COORDS) || x->found) {
            if (!arg_double(x, &a[base - 2], &r, "ERR need numeric radius")) return;
            if (r < 0) {
                coll_error(x, "ERR radius cannot be negative");
                return;
            }
            if ((conv = unit(x, &a[base - 1])) < 0) return;
        }
    }
    bool withdist = false, withhash = false, withcoord = false, any = false, store = flags & SEARCHSTORE;
    bool storedist = false, frommember = false, fromloc = false, byradius = false, bybox = false;
    int sort = 0; /* 1 ASC, 2 DESC */
    long long count = 0;
    for (size_t i = base; i < x->argc; i++) {
        size_t left = x->argc - i - 1;
        const lattice_coll_arg *o = &a[i];
        if (coll_is(o, "withdist")) withdist = true;
        else if (coll_is(o, "withhash")) withhash = true;
        else if (coll_is(o, "withcoord")) withcoord = true;
        else if (coll_is(o, "any")) any = true;
        else if (coll_is(o, "asc")) sort = 1;
        else if (coll_is(o, "desc")) sort = 2;
        else if (coll_is(o, "count") && left >= 1) {
            if (!coll_arg_ll(&a[++i], &count)) {
                coll_error(x, COLL_ERR_NOT_INT);
                return;
            }
            if (count <= 0) {
                coll_error(x, "ERR COUNT must be > 0");
                return;
            }
        } else if ((coll_is(o, "store") || coll_is(o, "storedist")) && left >= 1 && !(flags & (NOSTORE | SEARCH))) {
            store = true;
            storedist = coll_is(o, "storedist");
            i++;
        } else if (coll_is(o, "storedist") && (flags & SEARCHSTORE)) {
            storedist = true;
        } else if (coll_is(o, "frommember") && left >= 1 && (flags & SEARCH) && !fromloc) {
            frommember = true;
            i++;
            if (!x->found) continue;
            const zent *e = member_of(v, n, &a[i]);
            if (!e) {
                coll_error(x, ERR_MEMBER);
                return;
            }
            decode(e->score, xy);
        } else if (coll_is(o, "fromlonlat") && left >= 2 && (flags & SEARCH) && !frommember) {
            if (!lon_lat(x, &a[i + 1], xy)) return;
            fromloc = true;
            i += 2;
        } else if (coll_is(o, "byradius") && left >= 2 && (flags & SEARCH) && !bybox) {
            if (!arg_double(x, &a[i + 1], &r, "ERR need numeric radius")) return;
            if (r < 0) {
                coll_error(x, "ERR radius cannot be negative");
                return;
            }
            if ((conv = unit(x, &a[i + 2])) < 0) return;
            byradius = true, radius = true;
            i += 2;
        } else if (coll_is(o, "bybox") && left >= 3 && (flags & SEARCH) && !byradius) {
            if (!arg_double(x, &a[i + 1], &w, "ERR need numeric width") ||
                !arg_double(x, &a[i + 2], &h, "ERR need numeric height"))
                return;
            if (h < 0 || w < 0) {
                coll_error(x, "ERR height or width cannot be negative");
                return;
            }
            if ((conv = unit(x, &a[i + 3])) < 0) return;
            bybox = true, radius = false;
            i += 3;
        } else {
            coll_error(x, COLL_ERR_SYNTAX);
            return;
        }
    }
    char m[128];
    if (store && (withdist || withhash || withcoord)) {
        snprintf(m, sizeof m, "ERR %s is not compatible with WITHDIST, WITHHASH and WITHCOORD options",
                 flags & SEARCHSTORE ? "GEOSEARCHSTORE" : "STORE option in GEORADIUS");
        coll_error(x, m);
        return;
    }
    if ((flags & SEARCH) && !(frommember || fromloc)) {
        snprintf(m, sizeof m, "ERR exactly one of FROMMEMBER or FROMLONLAT can be specified for %.*s", (int)a[0].len,
                 (const char *)a[0].ptr);
        coll_error(x, m);
        return;
    }
    if ((flags & SEARCH) && !(byradius || bybox)) {
        snprintf(m, sizeof m, "ERR exactly one of BYRADIUS and BYBOX can be specified for %.*s", (int)a[0].len,
                 (const char *)a[0].ptr);
        coll_error(x, m);
        return;
    }
    if (any && !count) {
        coll_error(x, "ERR the ANY argument requires COUNT argument");
        return;
    }
    if (!x->found) {
        if (store) coll_pairs(x, 0); /* nothing to store: the destination goes */
        else coll_array(x, 0);
        return;
    }
    if (count && !sort && !any) sort = 1;
    /* The members' table is the first thing after the arguments (zset.c):
     * the found ones go after it, in the same (perhaps moved) items. */
    char *items = coll_items(x, n * sizeof *v + (n ? n : 1) * sizeof(found), 1);
    if (!items) {
        x->r->status = LATTICE_ERR_NOMEM;
        return;
    }
    v = (const zent *)items;
    found *f = (found *)(items + n * sizeof *v);
    size_t k = 0;
    for (size_t i = 0; i < n && !(any && (long long)k >= count); i++) {
        double p[2], d;
        decode(v[i].score, p);
        if (radius) {
            d = distance(xy[0], xy[1], p[0], p[1]);
            if (d > r * conv) continue;
        } else { /* geohashGetDistanceIfInRectangle */
            if (lat_distance(p[1], xy[1]) > h * conv / 2) continue;
            if (distance(p[0], p[1], xy[0], p[1]) > w * conv / 2) continue;
            d = distance(xy[0], xy[1], p[0], p[1]);
        }
        f[k++] = (found){&v[i], d, {p[0], p[1]}};
    }
    if (sort) {
        if (k > 1) qsort(f, k, sizeof *f, by_dist);
        if (sort == 2)
            for (size_t i = 0; i < k / 2; i++) {
                found t = f[i];
                f[i] = f[k - 1 - i];
                f[k - 1 - i] = t;
            }
    }
    size_t out = count && (long long)k > count ? (size_t)count : k;
    if (store) {
        coll_pairs(x, out);
        for (size_t i = 0; i < out; i++) {
            coll_bulk(x, f[i].e->m, f[i].e->ml);
            coll_double(x, storedist ? f[i].dist / conv : f[i].e->score);
        }
        return;
    }
    size_t opts = (size_t)withdist + withhash + withcoord;
    coll_array(x, out);
    for (size_t i = 0; i < out; i++) {
        if (opts) coll_array(x, opts + 1);
        coll_bulk(x, f[i].e->m, f[i].e->ml);
        if (withdist) dist_reply(x, f[i].dist / conv);
        if (withhash) coll_int(x, (long long)f[i].e->score);
        if (withcoord) {
            coll_array(x, 2);
            human(x, f[i].xy[0]);
            human(x, f[i].xy[1]);
        }
    }
}

void geo_run(coll_ctx *x)
{
    switch (x->cmd) {
    case LATTICE_COLL_GEOADD: geoadd(x); break;
    case LATTICE_COLL_GEOPOS: positions(x, false); break;
    case LATTICE_COLL_GEOHASH: positions(x, true); break;
    case LATTICE_COLL_GEODIST: geodist(x); break;
    case LATTICE_COLL_GEORADIUS: search(x, RADIUS_COORDS); break;
    case LATTICE_COLL_GEORADIUS_RO: search(x, RADIUS_COORDS | NOSTORE); break;
    case LATTICE_COLL_GEORADIUSBYMEMBER: search(x, RADIUS_MEMBER); break;
    case LATTICE_COLL_GEORADIUSBYMEMBER_RO: search(x, RADIUS_MEMBER | NOSTORE); break;
    case LATTICE_COLL_GEOSEARCH: search(x, SEARCH); break;
    case LATTICE_COLL_GEOSEARCHSTORE: search(x, SEARCH | SEARCHSTORE); break;
    default: x->r->status = LATTICE_ERR_INVAL; break;
    }
}
