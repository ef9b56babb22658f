/*
 * fabric/fabric.h: the data channel's transport.  Plain non-blocking TCP
 * connections (prefix link_) that the thread owning them drives itself (no
 * I/O thread of its own): the data thread (ops/) and an inspection's asker
 * (grid/).  Above them (prefix fab_, "above the links" below) what every
 * channel on them needs.  docs/PROTOCOL.md, "Data channel transport", is
 * the contract; this is how it is kept.
 *
 * A stream carries frames, each an 8-byte header and then exactly the
 * bytes base/'s frame layer produced (lt_frame_pack): the message, then its
 * MAC when there is one.
 *
 *   0  'L'  1  'T'  2  version (1)  3  MAC length (0 or 32)
 *   4..7    message length, big-endian, 1 .. the receiver's cap
 *
 * The header is checked as it arrives (a stream that does not start a
 * frame with it, a length over the cap or a zero length is refused at
 * once: nothing else of it is read); the frame layer then checks MAC,
 * decoding and unknown fields as on every channel.
 *
 * Output: each connection has one FIFO queue of packed frames, written
 * with sendmsg as far as the kernel takes it, the rest when the socket is
 * writable again (partial writes resume mid-frame).  A frame that finds
 * LINK_QUEUE_BYTES or more already queued is dropped (the caller counts
 * it; the pending table's deadline and the retry layer resend), as a
 * ZeroMQ high-water mark would.
 *
 * A connection is used by one thread; none of this is thread-safe.
 */
#ifndef LATTICE_FABRIC_FABRIC_H
#define LATTICE_FABRIC_FABRIC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "cache.pb-c.h"
#include "lattice/status.h"

/* The data channel's protocol number, in every Batch. */
#define LATTICE_DATA_PROTO 1
/* A data frame above this is dropped and counted.  One value of the largest
 * max_value_bytes (512 MiB) plus its key (<= 16 MiB) and framing must fit:
 * a frame holds at least one whole request (fab_chunk_reqs). */
#define DATA_MAX_FRAME (544u << 20)

#define LINK_HDR_BYTES 8
#define LINK_VERSION 1
#define LINK_QUEUE_BYTES (256u << 20) /* per connection: a frame finding this much queued is dropped */
#define LINK_MAX_IN 1024              /* accepted connections at once (see link_srv.max_in): more are closed at accept */
#define LINK_HELLO_MS 10000           /* an accepted connection must deliver a valid frame by then */
#define LINK_STALL_MS 30000           /* a frame begun, and no byte of it for this long: closed */
#define LINK_BACKOFF_MIN_MS 50        /* after a failed or lost connection: no new one before then, */
#define LINK_BACKOFF_MAX_MS 1000      /* doubling on each failure up to this */

/* ------------------------------------------------------------ frame reader */

/* Cuts a byte stream into frames: fed any pieces, it returns each frame
 * once complete.  The buffer grows with what arrives (a header announcing
 * a large frame reserves nothing). */
typedef struct link_reader {
    uint8_t *buf;                 /* header, then message and MAC */
    size_t cap, have;
    size_t want;                  /* the whole frame's size once the header is in (0: not yet) */
    bool done;                    /* the last result was a frame: start over at the next feed */
} link_reader;

typedef enum link_rd {
    LINK_RD_MORE,                 /* every byte used; the frame is not complete */
    LINK_RD_FRAME,                /* a frame is complete (link_reader_frame); *used says how far */
    LINK_RD_GARBAGE,              /* not a frame header (magic, version, MAC length) */
    LINK_RD_EMPTY,                /* a frame of no message */
    LINK_RD_OVERSIZED,            /* a message longer than max_body */
    LINK_RD_NOMEM,
} link_rd;

/* Feeds in[0..n): stops after one complete frame (*used = bytes taken).
 * After any result but MORE and FRAME the stream is broken: close it. */
link_rd link_reader_feed(link_reader *r, const uint8_t *in, size_t n, size_t max_body, size_t *used);
/* The frame last returned: message and MAC (mac NULL when it had none).
 * Valid until the next feed. */
void link_reader_frame(const link_reader *r, const uint8_t **msg, size_t *len, const uint8_t **mac,
                       size_t *mac_len);
/* True between frames: no byte of a frame is held. */
bool link_reader_idle(const link_reader *r);
void link_reader_reset(link_reader *r);
void link_reader_free(link_reader *r);
/* The header of a frame of len message bytes and mac_len MAC bytes. */
void link_header(uint8_t hdr[LINK_HDR_BYTES], size_t len, size_t mac_len);

/* ------------------------------------------------------------- connections */

typedef struct link_out link_out;

typedef struct link_conn {
    int fd;                       /* -1: not connected */
    bool dial;                    /* ours: connects to addr (lazily, again after a loss) */
    bool connecting;              /* a non-blocking connect in progress */
    bool proven;                  /* delivered at least one frame its owner accepted */
    link_reader rd;
    link_rd rd_refused;           /* what closed it as LINK_BAD: the reader's verdict, or FRAME (the owner's) */
    link_out *qhead, *qtail;      /* frames to write, oldest first */
    size_t q_bytes, q_off;        /* queued bytes; bytes of qhead already written */
    size_t lost_frames;           /* frames still queued (unsent or partly sent) at the last link_close */
    uint32_t losses;              /* bumped by each close and each frame link_send refused: a frame
                                   * queued when it had another value may never have arrived */
    uint64_t opened_ms, partial_ms; /* when connected; the last byte of an unfinished frame (0: none) */
    uint64_t retry_ms;            /* dial: no connect before then */
    uint32_t backoff_ms;
    struct sockaddr_storage sa;
    socklen_t sa_len;
    char addr[160];               /* dial: tcp://host:port */
    uint32_t slot, gen;           /* accepted: where link_srv holds it (its reply identity) */
} link_conn;

/* Why a connection was closed (link_close_reason). */
typedef enum link_why {
    LINK_OK,                      /* open */
    LINK_EOF,                     /* the other side closed it */
    LINK_IOERR,                   /* a read, write or connect failed */
    LINK_BAD,                     /* its input was refused (the frame callback or the reader) */
    LINK_TIMEOUT,                 /* a frame stalled, or a stranger never spoke */
} link_why;

/* What the owner does with one complete frame: return false to close the
 * connection (its input was refused). */
typedef bool (*link_frame_fn)(void *arg, link_conn *c, const uint8_t *msg, size_t len, const uint8_t *mac,
                              size_t mac_len);

/* A connection to addr ("tcp://host:port"), opened at the first send.
 * NULL: not such an address, or NOMEM. */
link_conn *link_dial(const char *addr);
/* Closes c (if open), freeing its queue. */
void link_free(link_conn *c);
/* Closes c and drops what it queued; a dial connection may connect again
 * after its backoff. */
void link_close(link_conn *c, uint64_t now);
/* Packs b with the frame layer (MAC under key when key is not NULL) and
 * queues it, connecting first if needed, then writes what the socket
 * takes.  NOMEM; IO: dropped (queue full, in backoff, no connection, or
 * the connection failed - then it is closed); OK. */
lattice_status link_send(link_conn *c, const uint8_t *key, const Latdata__Batch *b, uint64_t now);
/* The poll events c waits for (0: not open). */
short link_events(const link_conn *c);
/* Handles revents on c: completes a connect, writes, reads and hands each
 * frame (at most max_frames) to fn.  Returns LINK_OK, or why c was closed. */
link_why link_service(link_conn *c, short revents, size_t max_body, size_t max_frames, link_frame_fn fn,
                      void *arg, uint64_t now);
/* LINK_TIMEOUT when c must be closed for lack of progress (link_close it). */
link_why link_check_stall(const link_conn *c, uint64_t now);
/* Writes what is queued and what the socket takes now (after a batch of
 * link_send calls made while output was pending). */
link_why link_write(link_conn *c, uint64_t now);

/* ------------------------------------------------------------- the listener */

/* Accepted connections, identified by (slot, generation): the identity a
 * reply names, so an answer meant for a connection that closed meanwhile
 * finds nothing instead of a newer connection. */
typedef struct link_srv {
    int lfd;
    link_conn *in[LINK_MAX_IN];
    uint32_t gen[LINK_MAX_IN];
    size_t n_in;                  /* open slots */
    size_t max_in;                /* LINK_MAX_IN, or a quarter of the file descriptor limit if lower */
    uint64_t accept_paused_until; /* out of file descriptors: do not poll the listener before then */
    uint64_t refused;             /* connections closed at accept (over max_in, or no fd) */
    uint64_t refused_logged, refused_log_ms; /* the owner's: what it logged of refused, and when */
} link_srv;

/* Binds host on a port the kernel picks (TCP_NODELAY, SO_REUSEADDR, non-
 * blocking) and writes "tcp://host:port" to bound. */
lattice_status link_srv_open(link_srv *s, const char *host, char *bound, size_t bound_len);
void link_srv_close(link_srv *s);
/* Accepts what is waiting (up to 64); the new connections are in s->in. */
void link_srv_accept(link_srv *s, uint64_t now);
/* Frees accepted connection c (closed by link_service or to be closed). */
void link_srv_drop(link_srv *s, link_conn *c);
/* The reply identity of accepted connection c: 8 bytes. */
size_t link_srv_ident(const link_conn *c, uint8_t *ident);
/* The accepted connection ident names, or NULL when it closed meanwhile. */
link_conn *link_srv_find(link_srv *s, const uint8_t *ident, size_t len);

/* ============================================================ above the links
 * What every channel on these links needs, whoever its messages are for:
 * the checks a received frame passes, the outgoing batches and their
 * frames, the table of requests waiting for an answer, and the registry of
 * message kinds.  None of it knows what an op is (ops/ keeps that); only
 * fab_send and fab_replies_flush hand frames to a link (its queue), so each
 * piece is unit-tested without a network (tests/unit/fabric/).  Data
 * thread only, like the links. */

/* ------------------------------------------------------ frame checks (frames.c) */

/* Why a frame was dropped: each counted and logged apart. */
typedef enum fab_drop {
    FAB_DROP_MALFORMED,           /* not decodable, unknown fields, another protocol number, a broken stream */
    FAB_DROP_OVERSIZED,           /* above the frame cap */
    FAB_DROP_AUTH,                /* MAC missing or wrong (a cluster secret is set), or a MAC we cannot check */
    FAB_DROP_SEND,                /* an outgoing frame the link refused (queue full, no connection) */
    FAB_DROP_REASONS
} fab_drop;

/* One channel's frame rules and what they refused.  The counters are the
 * owner's (count[] points at them, each may be NULL): the node's counters
 * are read and bumped elsewhere too (stats, the grid's decoders). */
typedef struct fab_frames {
    const uint8_t *key;           /* HMAC key (LT_FRAME_KEY_BYTES; NULL: no cluster secret) */
    size_t max_frame;             /* a message longer than this is refused unread (DATA_MAX_FRAME) */
    uint32_t proto;               /* the protocol number every Batch must carry (LATTICE_DATA_PROTO) */
    uint64_t *count[FAB_DROP_REASONS];
    uint64_t logged_ms[FAB_DROP_REASONS]; /* when each reason was last logged (0: never) */
} fab_frames;

/* One received frame through base/'s frame layer - size, MAC, decoding,
 * unknown fields at any depth - and then the protocol number: the checked
 * batch (free with fab_batch_free), or NULL: dropped, counted and logged;
 * the connection it came on is to be closed. */
Latdata__Batch *fab_unpack_batch(fab_frames *f, const uint8_t *msg, size_t len, const uint8_t *mac, size_t mac_len);
void fab_batch_free(Latdata__Batch *b);
/* Counts a dropped frame under reason and logs why, at most once a second
 * per reason: repeated bad input must not flood the log, but its first
 * occurrence is always there. */
void fab_dropped(fab_frames *f, fab_drop reason, const char *why);
/* Packs b under f's key onto c's queue; a frame the link refuses is counted
 * (FAB_DROP_SEND) and logged at most once a second - the sender's deadlines
 * and retries resend what it carried. */
void fab_send(fab_frames *f, link_conn *c, const Latdata__Batch *b);

/* ------------------------------------------------- outgoing batches (batch.c) */

/* Everything bound for one place within one loop iteration leaves as one
 * Batch, split into frames of about FAB_CHUNK_BYTES so that none nears the
 * receiver's cap (DATA_MAX_FRAME): a frame holds at least one whole
 * message, however large. */
#define FAB_CHUNK_BYTES (4u << 20)

/* How many of r[0..n) fit one frame of about chunk bytes (at least 1 when n > 0). */
size_t fab_chunk_reqs(Latdata__Req *const *r, size_t n, size_t chunk);
size_t fab_chunk_resps(Latdata__Resp *const *r, size_t n, size_t chunk);

/* Requests queued for one peer until the next flush; owns them. */
typedef struct fab_reqs {
    Latdata__Req **v;
    size_t n, cap;
} fab_reqs;

/* What a flush does with each frame's batch (valid during the call only). */
typedef void (*fab_frame_fn)(void *arg, const Latdata__Batch *b);

/* Queues r (owned: lt_free'd with the queue, or at once on NOMEM). */
lattice_status fab_reqs_push(fab_reqs *q, Latdata__Req *r);
/* The queued requests, in order, as batches of at most chunk bytes each
 * (fab_chunk_reqs) handed to send: each names `to` and carries proto; the
 * first carries meta when it is not NULL.  With `one`, at least one batch
 * goes even with nothing queued (to carry meta).  Then frees them all. */
void fab_reqs_flush(fab_reqs *q, const char *to, uint32_t proto, const Latdata__Meta *meta, bool one,
                    size_t chunk, fab_frame_fn send, void *arg);
/* Frees what is queued, unsent. */
void fab_reqs_clear(fab_reqs *q);
void fab_reqs_free(fab_reqs *q);
/* Responses r[0..n) as batches of at most chunk bytes each, in order, at
 * least one (meta, when not NULL, on the first); they stay the caller's. */
void fab_resps_flush(Latdata__Resp *const *r, size_t n, uint32_t proto, const Latdata__Meta *meta, size_t chunk,
                     fab_frame_fn send, void *arg);

/* Responses owed to each asker - a connection the listener accepted, named
 * by its reply identity (link_srv_ident) - until the next flush: one box
 * per identity, its responses in the order they were added. */
typedef struct fab_reply_box {
    uint8_t ident[256];
    size_t ident_len;
    Latdata__Resp **out;          /* owned: lt_malloc'd, each with its stats */
    size_t n, cap;
    bool with_meta;               /* the first frame carries the metadata message */
} fab_reply_box;

typedef struct fab_replies {
    fab_reply_box *boxes;         /* [0, n) in use this iteration; [n, cap) keep their arrays */
    size_t n, cap;
} fab_replies;

/* Adds resp (owned; with its stats array and each stat, all lt_malloc'd)
 * to ident's box; with_meta: that box's first frame carries the metadata.
 * NOMEM: resp freed, nothing queued. */
lattice_status fab_replies_add(fab_replies *r, const uint8_t *ident, size_t len, Latdata__Resp *resp, bool with_meta);
/* ident's box carries the metadata at the next flush, alone if nothing else. */
lattice_status fab_replies_meta(fab_replies *r, const uint8_t *ident, size_t len);
/* Sends each box with something in it on its connection in srv (frames
 * as fab_resps_flush; meta on the first when the box asked for it) through
 * f, then frees the responses and empties every box.  A box whose
 * connection closed meanwhile is counted as FAB_DROP_SEND, not logged (a
 * peer that left, an asker that gave up: its deadlines resend). */
void fab_replies_flush(fab_replies *r, link_srv *srv, const Latdata__Meta *meta, fab_frames *f);
/* Frees the boxes and anything still queued in them. */
void fab_replies_free(fab_replies *r);

/* --------------------------------------------------- pending table (pending.c) */

/* Requests sent and waiting for their answer, by request id, each with a
 * deadline.  The table holds an opaque pointer per request (the sender's
 * own record) and hands it back when the answer comes, the deadline
 * passes or the sender gives up; it never frees one. */
typedef struct fab_pending fab_pending;
typedef struct fab_pend_node fab_pend_node;

/* buckets: a power of two (the hash table's width; it does not limit the count). */
fab_pending *fab_pending_new(size_t buckets);
/* Frees the table (the items are the caller's: take them first). */
void fab_pending_free(fab_pending *t);
/* Adds item under a new id (1, 2, ... in order), answered by deadline_ms
 * (UINT64_MAX: never expires).  0: NOMEM (nothing added). */
uint64_t fab_pending_add(fab_pending *t, void *item, uint64_t deadline_ms);
void *fab_pending_find(const fab_pending *t, uint64_t id);
/* Removes id and returns its item (NULL: not there - answered, expired or never sent). */
void *fab_pending_take(fab_pending *t, uint64_t id);
/* false when id is not there. */
bool fab_pending_set_deadline(fab_pending *t, uint64_t id, uint64_t deadline_ms);
size_t fab_pending_count(const fab_pending *t);
/* Every entry, newest first: for (n = first(t); n; n = after(n)).  Do not
 * take entries while walking (fab_pending_expire does). */
const fab_pend_node *fab_pending_first(const fab_pending *t);
const fab_pend_node *fab_pending_after(const fab_pend_node *n);
void *fab_pend_item(const fab_pend_node *n);
/* Takes every entry whose deadline is at or before now, or for which gone
 * (may be NULL) says its answer will never come, newest first, and hands
 * each to end after it left the table.  end may add entries (not visited)
 * but must take no other. */
typedef bool (*fab_pend_gone_fn)(void *arg, void *item);
typedef void (*fab_pend_end_fn)(void *arg, void *item);
void fab_pending_expire(fab_pending *t, uint64_t now, fab_pend_gone_fn gone, fab_pend_end_fn end, void *arg);

/* ----------------------------------------------------- message kinds (kinds.c) */

/* Who serves a request of each kind: subsystems register their kinds
 * (ops/ the copies' kinds, grid/ the grid's) instead of a switch that names
 * them all.  A handler gets the owner's context and where the request came
 * from (the owner's own reply address), both opaque here. */
#define FAB_KINDS 64
typedef void (*fab_kind_fn)(void *ctx, const Latdata__Req *q, const void *from);
typedef struct fab_kinds {
    uint32_t base;                /* the kinds base .. base + FAB_KINDS - 1 may be registered */
    fab_kind_fn fn[FAB_KINDS];
    uint64_t refused;             /* requests of a kind nobody registered */
} fab_kinds;

void fab_kinds_init(fab_kinds *k, uint32_t base);
/* INVAL: kind outside the range; a kind registered again takes the new handler. */
lattice_status fab_kinds_on(fab_kinds *k, uint32_t kind, fab_kind_fn fn);
/* Hands q to its kind's handler: false (counted in refused) when nobody
 * registered q->kind - the caller answers it as refused. */
bool fab_kinds_dispatch(fab_kinds *k, void *ctx, const Latdata__Req *q, const void *from);

#endif
