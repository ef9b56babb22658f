/*
 * frames: what a received frame must pass before anything reads it, and
 * the count of what was refused or could not be sent (fabric.h).  The one
 * place a channel's frames are opened and sealed - where encryption goes.
 */
#include <stdio.h>

#include "base/base.h"
#include "lattice/clock.h"
#include "lattice/log.h"
#include "fabric.h"

static uint64_t bump(fab_frames *f, fab_drop reason)
{
    uint64_t *c = f->count[reason];
    return c ? ++*c : 0;
}

/* Whether a drop of reason may be logged now (at most once a second). */
static bool log_now(fab_frames *f, fab_drop reason, uint64_t now)
{
    if (f->logged_ms[reason] && now - f->logged_ms[reason] < 1000) return false;
    f->logged_ms[reason] = now;
    return true;
}

void fab_dropped(fab_frames *f, fab_drop reason, const char *why)
{
    uint64_t n = bump(f, reason);
    if (!log_now(f, reason, lt_mono_ms())) return;
    LT_LOG(LT_WARN, "data", "dropped %s and closed its data connection (%llu so far)", why, (unsigned long long)n);
}

Latdata__Batch *fab_unpack_batch(fab_frames *f, const uint8_t *msg, size_t len, const uint8_t *mac, size_t mac_len)
{
    ProtobufCMessage *m = NULL;
    Latdata__Batch *b = NULL;
    switch (lt_frame_unpack(&latdata__batch__descriptor, msg, len, mac, mac_len, f->key, f->max_frame, &m)) {
    case LT_FRAME_OK: b = (Latdata__Batch *)m; break;
    case LT_FRAME_OVERSIZED: fab_dropped(f, FAB_DROP_OVERSIZED, "a data-channel frame above the frame cap"); break;
    case LT_FRAME_AUTH: fab_dropped(f, FAB_DROP_AUTH, "a data-channel frame that failed authentication (check --secret-file)"); break;
    case LT_FRAME_MALFORMED: fab_dropped(f, FAB_DROP_MALFORMED, "a data-channel frame that does not decode"); break;
    }
    if (b && b->proto != f->proto) {
        lt_frame_free(m);
        b = NULL;
        fab_dropped(f, FAB_DROP_MALFORMED, "a data-channel frame of another data protocol version");
    }
    return b;
}

void fab_batch_free(Latdata__Batch *b)
{
    if (b) lt_frame_free(&b->base);
}

void fab_send(fab_frames *f, link_conn *c, const Latdata__Batch *b)
{
    uint64_t now = lt_mono_ms();
    if (link_send(c, f->key, b, now) == LATTICE_OK) return;
    uint64_t n = bump(f, FAB_DROP_SEND);
    if (!log_now(f, FAB_DROP_SEND, now)) return;
    if (c->fd < 0)
        LT_LOG(LT_WARN, "data", "dropped an outgoing data-channel frame to %s: not connected (connecting again after a backoff) (%llu so far)",
               c->addr, (unsigned long long)n);
    else
        LT_LOG(LT_WARN, "data", "dropped an outgoing data-channel frame%s%s: its connection has %u MiB queued, the bound (%llu so far)",
               c->dial ? " to " : "", c->dial ? c->addr : "", LINK_QUEUE_BYTES >> 20, (unsigned long long)n);
}
