/*
 * Flow control of one demand/supply session, as two pure state machines.
 *
 *   demander                          supplier
 *   Demand(ack=0, window=W) ───────►  builds batches 1..W (one per throttle
 *                                     interval), keeps them until acked
 *           ◄─────── Supply 1..W
 *   applies 1, Demand(ack=1) ──────►  drops 1, builds W+1
 *   ...                               ...
 *   last batch of last partition      every batch acked -> done
 *
 * The supplier never has more than W batches unacked (W = min(the
 * demander's window, its own prefetch)).  The demander accepts only the
 * batch it expects next from its current supplier and session; after
 * timeout_ms without one (or a refusal) it moves to the next supplier with
 * session+1, restarting the partition it was loading from batch 1 (the
 * applier's IF_NEWER rule makes re-sent entries harmless), and fails when
 * every supplier failed it LATTICE_REBALANCE_ROUNDS times (cycling through
 * the list, so a lone supplier that lost one message is asked again).
 * Neither machine reads a clock or a socket.
 */
#include <string.h>

#include "lattice/alloc.h"
#include "lattice/log.h"
#include "rebalance/rebalance.h"
#include "rebalance_int.h"

void lattice_rebalance_flow_config_of(const lattice_cache_config *c,
                                      lattice_rebalance_flow_config *f)
{
    f->prefetch = c->rebalance_prefetch ? c->rebalance_prefetch : 1;
    f->throttle_ms = c->rebalance_throttle_ms;
    f->timeout_ms = LATTICE_REBALANCE_DEFAULT_TIMEOUT_MS;
    f->batch_bytes = c->rebalance_batch_bytes;
}

void lattice_rebalance_out_init(lattice_rebalance_out *o)
{
    memset(o, 0, sizeof *o);
    o->deadline = LATTICE_REBALANCE_NO_DEADLINE;
}

void lattice_rebalance_out_clear(lattice_rebalance_out *o)
{
    for (size_t i = 0; i < o->count; i++) lt_free(o->msgs[i].buf);
    lt_free(o->msgs);
    lattice_rebalance_out_init(o);
}

/* Takes ownership of buf (freed on failure). */
static lattice_status push(lattice_rebalance_out *o, uint32_t to, void *buf, size_t len)
{
    if (o->count == o->cap) {
        size_t nc = o->cap ? o->cap * 2 : 8;
        lattice_rebalance_msg *m = lt_realloc(o->msgs, nc * sizeof *m);
        if (!m) {
            lt_free(buf);
            return LATTICE_ERR_NOMEM;
        }
        o->msgs = m;
        o->cap = nc;
    }
    o->msgs[o->count++] = (lattice_rebalance_msg){to, buf, len};
    return LATTICE_OK;
}

static int ids_equal(const lattice_rebalance_ids *x, const lattice_rebalance_ids *y)
{
    return x->topology_major == y->topology_major && x->topology_minor == y->topology_minor &&
           x->rebalance_id == y->rebalance_id && x->session == y->session;
}

/* --------------------------------------------------------------- demander */


lattice_status lattice_rebalance_demander_create(const char *cache,
                                                 const lattice_rebalance_ids *ids,
                                                 const uint32_t *partitions, size_t n,
                                                 uint32_t supplier_count,
                                                 const lattice_rebalance_flow_config *cfg,
                                                 lattice_rebalance_demander **out)
{
    if (!cache || !lattice_cache_config_name_valid(cache, NULL, 0) || !ids || !partitions ||
        !n || n > LATTICE_PARTITION_MAX || !supplier_count || !cfg || !cfg->prefetch || !out)
        return LATTICE_ERR_INVAL;
    for (size_t i = 0; i < n; i++)
        if (partitions[i] >= LATTICE_PARTITION_MAX) return LATTICE_ERR_INVAL;
    lattice_rebalance_demander *d = lt_calloc(1, sizeof *d);
    if (!d) return LATTICE_ERR_NOMEM;
    d->parts = lt_malloc(n * sizeof *d->parts);
    if (!d->parts) {
        lt_free(d);
        return LATTICE_ERR_NOMEM;
    }
    memcpy(d->parts, partitions, n * sizeof *d->parts);
    strcpy(d->cache, cache);
    d->ids = *ids;
    d->cfg = *cfg;
    d->n = n;
    d->nsup = supplier_count;
    d->deadline = LATTICE_REBALANCE_NO_DEADLINE;
    *out = d;
    return LATTICE_OK;
}

static lattice_status send_demand(lattice_rebalance_demander *d, uint64_t ack, bool resume,
                                  lattice_rebalance_out *out)
{
    lattice_rebalance_demand m = {.ids = d->ids, .partitions = d->parts + d->first,
                                  .partition_count = d->n - d->first, .ack = ack,
                                  .resume = resume, .window = d->cfg.prefetch};
    if (ack == 0 && !resume) {
        /* A supplier learns the bases from the first demand of its session. */
        m.deltas = (lattice_rebalance_delta_base *)d->bases;
        m.delta_count = d->nbases;
    }
    strcpy(m.cache, d->cache);
    void *buf;
    size_t len;
    lattice_status st = lattice_rebalance_demand_encode(&m, &buf, &len);
    if (st != LATTICE_OK) return st;
    return push(out, d->sup, buf, len);
}

void lattice_rebalance_demander_set_bases(lattice_rebalance_demander *d, const lattice_rebalance_delta_base *bases,
                                          size_t n)
{
    d->bases = bases;
    d->nbases = n;
}

void lattice_rebalance_supplier_modes(const lattice_rebalance_supplier *s, uint32_t *delta, uint32_t *full)
{
    *delta = s->delta_parts;
    *full = s->full_parts;
}

lattice_status lattice_rebalance_demander_start(lattice_rebalance_demander *d, uint64_t now_ms,
                                                lattice_rebalance_out *out)
{
    if (!d || !out || d->state != LATTICE_REBALANCE_DEMANDER_IDLE) return LATTICE_ERR_INVAL;
    d->expected = 1;
    d->first = d->cur;
    lattice_status st = send_demand(d, 0, false, out);
    if (st != LATTICE_OK) return st;
    d->state = LATTICE_REBALANCE_DEMANDER_WAITING;
    d->deadline = now_ms + d->cfg.timeout_ms;
    out->deadline = d->deadline;
    return LATTICE_OK;
}

/* The current supplier failed us: the next one, or FAILED. */
static lattice_status switch_supplier(lattice_rebalance_demander *d, uint64_t now_ms,
                                      lattice_rebalance_out *out)
{
    d->tried++;
    if (d->tried >= d->nsup * LATTICE_REBALANCE_ROUNDS) {
        LT_LOG(LT_WARN, "rebalance", "cache %s: every supplier (%u) failed %u times; re-plan needed",
               d->cache, d->nsup, LATTICE_REBALANCE_ROUNDS);
        d->state = LATTICE_REBALANCE_DEMANDER_FAILED;
        d->deadline = out->deadline = LATTICE_REBALANCE_NO_DEADLINE;
        return LATTICE_OK;
    }
    d->sup = (d->sup + 1) % d->nsup;
    d->ids.session++;
    d->expected = 1;
    d->first = d->cur;
    LT_LOG(LT_INFO, "rebalance", "cache %s: switching to supplier %u (session %u) at partition %u",
           d->cache, d->sup, d->ids.session, d->parts[d->cur]);
    lattice_status st = send_demand(d, 0, false, out);
    d->deadline = out->deadline = now_ms + d->cfg.timeout_ms;
    return st;
}

lattice_status lattice_rebalance_demander_on_supply(lattice_rebalance_demander *d, uint32_t from,
                                                    const lattice_rebalance_supply *s,
                                                    uint64_t now_ms, lattice_rebalance_out *out,
                                                    lattice_rebalance_demander_event *ev)
{
    if (!d || !s || !out || !ev) return LATTICE_ERR_INVAL;
    *ev = LATTICE_REBALANCE_IGNORE;
    out->deadline = d->deadline;
    lattice_rebalance_supply_info in;
    lattice_rebalance_supply_info_of(s, &in);
    if (d->state != LATTICE_REBALANCE_DEMANDER_WAITING || from != d->sup ||
        strcmp(in.cache, d->cache) || !ids_equal(&in.ids, &d->ids))
        return LATTICE_OK;
    if (in.status != LATTICE_OK) {
        *ev = LATTICE_REBALANCE_SWITCHED;
        return switch_supplier(d, now_ms, out);
    }
    if (in.batch != d->expected || in.partition != d->parts[d->cur]) return LATTICE_OK;
    *ev = LATTICE_REBALANCE_ACCEPT;
    d->expected++;
    if (in.last && ++d->cur == d->n) {
        d->state = LATTICE_REBALANCE_DEMANDER_DONE;
        d->deadline = LATTICE_REBALANCE_NO_DEADLINE;
    } else {
        d->deadline = now_ms + d->cfg.timeout_ms;
    }
    out->deadline = d->deadline;
    /* The final ack too: it lets the supplier end its session. */
    return send_demand(d, in.batch, false, out);
}

lattice_status lattice_rebalance_demander_on_tick(lattice_rebalance_demander *d, uint64_t now_ms,
                                                  lattice_rebalance_out *out)
{
    if (!d || !out) return LATTICE_ERR_INVAL;
    out->deadline = d->deadline;
    if (d->state != LATTICE_REBALANCE_DEMANDER_WAITING || now_ms < d->deadline)
        return LATTICE_OK;
    LT_LOG(LT_WARN, "rebalance", "cache %s: supplier %u silent for %llu ms", d->cache, d->sup,
           (unsigned long long)d->cfg.timeout_ms);
    return switch_supplier(d, now_ms, out);
}

lattice_rebalance_demander_state lattice_rebalance_demander_state_of(
    const lattice_rebalance_demander *d)
{
    return d->state;
}

void lattice_rebalance_demander_ids(const lattice_rebalance_demander *d, lattice_rebalance_ids *ids)
{
    *ids = d->ids;
}

void lattice_rebalance_demander_free(lattice_rebalance_demander *d)
{
    if (!d) return;
    lt_free(d->parts);
    lt_free(d);
}

/* --------------------------------------------------------------- supplier */



lattice_status lattice_rebalance_supplier_create(lattice_store *store,
                                                 const lattice_rebalance_demand *first,
                                                 const lattice_rebalance_flow_config *cfg,
                                                 lattice_rebalance_counter_fn counter_fn,
                                                 void *counter_arg,
                                                 lattice_rebalance_supplier **out)
{
    if (!store || !first || !first->partitions || !first->partition_count || !cfg ||
        !cfg->prefetch || cfg->batch_bytes < LATTICE_REBALANCE_MIN_BATCH || !counter_fn || !out)
        return LATTICE_ERR_INVAL;
    lattice_rebalance_supplier *s = lt_calloc(1, sizeof *s);
    if (!s) return LATTICE_ERR_NOMEM;
    s->window = first->window ? first->window : 1;
    if (s->window > cfg->prefetch) s->window = cfg->prefetch;
    s->parts = lt_malloc(first->partition_count * sizeof *s->parts);
    s->kept = lt_calloc(s->window, sizeof *s->kept);
    if (!s->parts || !s->kept) {
        lt_free(s->parts);
        lt_free(s->kept);
        lt_free(s);
        return LATTICE_ERR_NOMEM;
    }
    memcpy(s->parts, first->partitions, first->partition_count * sizeof *s->parts);
    s->n = first->partition_count;
    if (first->delta_count) {
        /* A deep copy: the caller clears its demand. */
        s->bases.deltas = lt_calloc(first->delta_count, sizeof *s->bases.deltas);
        for (size_t i = 0; s->bases.deltas && i < first->delta_count; i++) {
            const lattice_rebalance_delta_base *x = &first->deltas[i];
            lattice_rebalance_delta_base *y = &s->bases.deltas[s->bases.delta_count];
            *y = (lattice_rebalance_delta_base){x->partition, x->mark, NULL, 0};
            y->keys = x->key_count ? lt_calloc(x->key_count, sizeof *y->keys) : NULL;
            if (x->key_count && !y->keys) break;
            s->bases.delta_count++;
            for (size_t k = 0; k < x->key_count; k++) {
                y->keys[k].data = lt_malloc(x->keys[k].len);
                if (!y->keys[k].data) break;
                memcpy(y->keys[k].data, x->keys[k].data, x->keys[k].len);
                y->keys[k].len = x->keys[k].len;
                y->key_count++;
            }
            if (y->key_count != x->key_count) break;
        }
        /* Out of memory: a base missing a key is no base (the partition goes in full). */
        if (s->bases.delta_count && s->bases.deltas[s->bases.delta_count - 1].key_count !=
                                        first->deltas[s->bases.delta_count - 1].key_count)
            s->bases.deltas[s->bases.delta_count - 1].partition = UINT32_MAX;
    }
    s->store = store;
    strcpy(s->cache, first->cache);
    s->ids = first->ids;
    s->cfg = *cfg;
    s->counter_fn = counter_fn;
    s->counter_arg = counter_arg;
    s->next_batch = 1;
    *out = s;
    return LATTICE_OK;
}

/* Builds batch next_batch (a refusal when this node may not supply). */
static lattice_status build(lattice_rebalance_supplier *s, void **buf, size_t *len, bool *refused)
{
    uint32_t p = s->parts[s->cur];
    uint64_t counter = 0;
    lattice_status why = s->counter_fn(s->counter_arg, p, &counter);
    if (why != LATTICE_OK) {
        LT_LOG(LT_INFO, "rebalance", "cache %s: refusing partition %u: %s", s->cache, p,
               lattice_strerror(why));
        lattice_status st = lattice_rebalance_supply_encode_refusal(s->cache, &s->ids, p,
                                                                    s->next_batch, why, buf, len);
        if (st == LATTICE_OK) {
            s->all_built = true; /* the demander moves on to another supplier */
            *refused = true;
        }
        return st;
    }
    if (!s->b) {
        /* A delta when the demander has a base and this copy's history
         * reaches back to its mark; otherwise (NOT_FOUND) the full copy. */
        const lattice_rebalance_delta_base *base = lattice_rebalance_demand_delta(&s->bases, p);
        lattice_status st = base ? lattice_rebalance_batcher_create_delta(s->store, s->cache, &s->ids, p,
                                                                          s->cfg.batch_bytes, counter, base, &s->b)
                                 : LATTICE_ERR_NOT_FOUND;
        if (st == LATTICE_OK) s->delta_parts++;
        if (base && st == LATTICE_ERR_NOT_FOUND) {
            lattice_store_history_stat hs;
            lattice_store_history_info(s->store, p, &hs);
            LT_LOG(LT_INFO, "rebalance",
                   "cache %s: partition %u in full: the history does not reach back to the demander's mark %llu "
                   "(counter %llu; history %s, complete from %llu, %u records, dropped up to %llu)",
                   s->cache, p, (unsigned long long)base->mark, (unsigned long long)counter,
                   hs.lost ? "lost" : hs.valid ? "valid" : "not declared complete", (unsigned long long)hs.base,
                   hs.records, (unsigned long long)hs.dropped);
        }
        if (st == LATTICE_ERR_NOT_FOUND) {
            st = lattice_rebalance_batcher_create(s->store, s->cache, &s->ids, p, s->cfg.batch_bytes, &s->b);
            if (st == LATTICE_OK) s->full_parts++;
        }
        if (st != LATTICE_OK) return st;
    }
    bool last;
    lattice_status st = lattice_rebalance_batcher_next(s->b, s->next_batch, counter, buf, len,
                                                       &last, NULL);
    if (st != LATTICE_OK) return st;
    if (last) {
        lattice_rebalance_batcher_free(s->b);
        s->b = NULL;
        if (++s->cur == s->n) s->all_built = true;
    }
    return LATTICE_OK;
}

static lattice_status fill(lattice_rebalance_supplier *s, uint64_t now_ms,
                           lattice_rebalance_out *out)
{
    out->deadline = LATTICE_REBALANCE_NO_DEADLINE;
    while (!s->all_built && s->nkept < s->window) {
        if (s->cfg.throttle_ms && s->sent_any && now_ms < s->last_send_ms + s->cfg.throttle_ms) {
            out->deadline = s->last_send_ms + s->cfg.throttle_ms;
            break;
        }
        void *buf, *copy;
        size_t len;
        bool refused = false;
        lattice_status st = build(s, &buf, &len, &refused);
        if (st != LATTICE_OK) return st;
        if (refused) {
            /* Not kept: the demander does not ack a refusal, it moves on. */
            s->next_batch++;
            return push(out, 0, buf, len);
        }
        copy = lt_malloc(len);
        if (!copy) {
            lt_free(buf);
            return LATTICE_ERR_NOMEM;
        }
        memcpy(copy, buf, len);
        s->kept[s->nkept++] = (struct kept){s->next_batch++, copy, len};
        s->sent_any = true;
        s->last_send_ms = now_ms;
        st = push(out, 0, buf, len);
        if (st != LATTICE_OK) return st;
    }
    return LATTICE_OK;
}

lattice_status lattice_rebalance_supplier_on_demand(lattice_rebalance_supplier *s,
                                                    const lattice_rebalance_demand *d,
                                                    uint64_t now_ms, lattice_rebalance_out *out)
{
    if (!s || !d || !out || strcmp(d->cache, s->cache) || !ids_equal(&d->ids, &s->ids) ||
        d->ack >= s->next_batch)
        return LATTICE_ERR_INVAL;
    if (d->ack > s->acked) {
        uint32_t drop = 0;
        while (drop < s->nkept && s->kept[drop].batch <= d->ack) lt_free(s->kept[drop++].buf);
        memmove(s->kept, s->kept + drop, (s->nkept - drop) * sizeof *s->kept);
        s->nkept -= drop;
        s->acked = d->ack;
    }
    if (d->resume) {
        for (uint32_t i = 0; i < s->nkept; i++) {
            void *copy = lt_malloc(s->kept[i].len);
            if (!copy) return LATTICE_ERR_NOMEM;
            memcpy(copy, s->kept[i].buf, s->kept[i].len);
            lattice_status st = push(out, 0, copy, s->kept[i].len);
            if (st != LATTICE_OK) return st;
        }
    }
    return fill(s, now_ms, out);
}

lattice_status lattice_rebalance_supplier_on_tick(lattice_rebalance_supplier *s, uint64_t now_ms,
                                                  lattice_rebalance_out *out)
{
    if (!s || !out) return LATTICE_ERR_INVAL;
    return fill(s, now_ms, out);
}

bool lattice_rebalance_supplier_done(const lattice_rebalance_supplier *s)
{
    return s->all_built && s->nkept == 0;
}

void lattice_rebalance_supplier_free(lattice_rebalance_supplier *s)
{
    if (!s) return;
    for (uint32_t i = 0; i < s->nkept; i++) lt_free(s->kept[i].buf);
    lattice_rebalance_batcher_free(s->b);
    lattice_rebalance_demand_clear(&s->bases);
    lt_free(s->kept);
    lt_free(s->parts);
    lt_free(s);
}
