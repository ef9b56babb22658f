/*
 * respd commands: running one parsed command - the AUTH gate, MULTI's
 * queue, whether it joins the batch being filled or waits for the next,
 * Redis Cluster's manners (CROSSSLOT, MOVED) - after which a key command
 * becomes lattice_op's of the batch (respd_batch.c and the command files;
 * the replies are encoded when the batch returns) and the others are
 * answered at once (respd_immediate.c, respd_intro.c, respd_cluster.c).
 * Semantics and error texts are Redis 7's; docs/RESP.md lists how each
 * command maps onto the ops API.
 */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "lattice/alloc.h"
#include "respd_int.h"

static bool eq(const lattice_resp_arg *a, const char *s)
{
    size_t n = strlen(s);
    return a->len == n && strncasecmp(a->ptr, s, n) == 0;
}

/* Commands of one batch run concurrently (one submit), so a command whose
 * key an earlier entry of the batch touches waits for the next batch: a
 * pipelined SET k then INCR k must run in that order, whatever retries the
 * first one meets.  A false hit of the filter only splits a batch early. */
static bool touches_batch_key(batch *b, const lattice_resp_cmd *rc, size_t argc, const lattice_resp_arg *argv)
{
    int first, last, step;
    lattice_resp_cmd_key_spec(rc, &first, &last, &step);
    if (first <= 0 || step <= 0 || argc <= (size_t)first) return false;
    long end = last >= 0 ? last : (long)argc + last;
    if (end >= (long)argc) end = (long)argc - 1;
    bool hit = false;
    for (long i = first; i <= end; i += step) {
        uint64_t h = 1469598103934665603ull;
        for (size_t k = 0; k < argv[i].len; k++) h = (h ^ (uint8_t)argv[i].ptr[k]) * 1099511628211ull;
        uint64_t bit = 1ull << (h & 63), *w = &b->keybits[(h >> 6) & 63];
        hit |= b->n_ents && (*w & bit);
        *w |= bit;
    }
    return hit;
}

/* A connection still learning whether it routes by the slot map saw a key
 * command on `slot` that this node serves. */
static void learn_slot(conn *c, uint16_t slot)
{
    for (uint8_t i = 0; i < c->n_seen; i++)
        if (c->seen[i] == slot) return;
    c->seen[c->n_seen++] = slot;
    if (c->n_seen == AWARE_SLOTS) c->aware = AWARE_YES;
}

/* A cluster-aware connection read `slot` here, where this node is now a
 * replica of a partition it was the primary of (demotion generation gen):
 * true the first time this connection does so since the last demotion - a
 * client routing by a map from before learns the new primary (MOVED); one
 * that reads replicas on purpose comes back, and is served from then on. */
static bool first_stale_read(conn *c, uint16_t slot, uint32_t gen)
{
    if (!c->told) {
        c->told = lt_calloc(LATTICE_KEY_SLOTS / 8, 1);
        if (!c->told) return false; /* served: only the hint is lost */
        c->told_gen = gen;
    } else if (c->told_gen != gen) { /* newer demotions: tell every slot again */
        memset(c->told, 0, LATTICE_KEY_SLOTS / 8);
        c->told_gen = gen;
    }
    uint8_t bit = (uint8_t)(1u << (slot & 7));
    if (c->told[slot >> 3] & bit) return false;
    c->told[slot >> 3] |= bit;
    return true;
}

/* Redis Cluster's manners for a key command (docs/RESP.md, "Redirection"):
 * true with err = CROSSSLOT or MOVED when a cluster-aware connection sent
 * it to the wrong node; false when it runs here (proxied if need be).  A
 * connection that has not shown yet whether it routes by the slot map is
 * cluster-aware once AWARE_SLOTS distinct slots it used were all served
 * here as their primary, and plain for good at its first key this node
 * does not serve, or serves only as a replica.  A read this node serves as a replica of a
 * partition it was the primary of is answered MOVED once per slot and
 * connection (first_stale_read), unless the connection sent READONLY. */
bool respd_misrouted(lattice_respd *r, conn *c, const lattice_resp_cmd *rc, size_t argc,
                     const lattice_resp_arg *argv, char *err)
{
    if (r->cfg.moved == LATTICE_RESPD_MOVED_NEVER || c->aware == AWARE_NO) return false;
    bool aware = r->cfg.moved == LATTICE_RESPD_MOVED_ALWAYS || c->aware == AWARE_YES;
    int first, last, step;
    lattice_resp_cmd_key_spec(rc, &first, &last, &step);
    if (first <= 0 || step <= 0 || argc <= (size_t)first) return false;
    long end = last >= 0 ? last : (long)argc + last;
    if (end >= (long)argc) end = (long)argc - 1;
    uint16_t slot = lattice_key_slot(argv[first].ptr, argv[first].len);
    for (long i = first + step; i <= end; i += step) {
        if (lattice_key_slot(argv[i].ptr, argv[i].len) == slot) continue;
        if (aware && r->cfg.cross_slot == LATTICE_RESPD_CROSS_ALLOW) return false; /* runs here, across slots */
        if (aware) {
            snprintf(err, LATTICE_RESP_ERR_MAX, "%s", LATTICE_RESP_ERR_CROSSSLOT);
            return true;
        }
        c->aware = AWARE_NO; /* a cluster client never sends this */
        return false;
    }
    /* A read of a slot this node replicates runs here on any connection,
     * not only after READONLY (Redis answers MOVED without it): a backup
     * answers only clean reads (docs/CONSISTENCY.md), so it is as current as
     * the primary, and clients that keep one connection per node (ioredis)
     * cannot send READONLY to a node that is also a primary. */
    bool ro = lattice_resp_cmd_flags(rc) & LATTICE_RESP_F_READONLY;
    uint32_t gen = 0;
    respd_where w = respd_route(r, slot, ro, err, &gen);
    if (aware) return w == RESPD_MOVED || (w == RESPD_HERE_DEMOTED && !c->readonly && first_stale_read(c, slot, gen));
    /* Learning: only slots this node is the primary of count.  A read of
     * a slot it serves as a replica is what a plain client does (it sends
     * keys of every slot; a node of a two-server grid serves them all) and
     * a cluster client reading primaries does not: such a connection is
     * plain for good, so it never meets the MOVED of a demoted slot
     * (fault_kill_primary's final reads got it).  A cluster client that
     * reads replicas without READONLY is served as plain: proxied, never
     * redirected. */
    if (w == RESPD_MOVED || w == RESPD_HERE_REPLICA || w == RESPD_HERE_DEMOTED) c->aware = AWARE_NO;
    else if (w == RESPD_HERE) learn_slot(c, slot);
    /* HERE_ALL: every client looks aware.  HERE_UNKNOWN: no serving primary
     * in this node's view (a lost partition, a node alone after a stall,
     * one not yet in its own view) - a plain client's keys land there as
     * often as a cluster client's; counted, they made the harness's plain
     * read-back connection aware on a node that had just rejoined, and it
     * got MOVED (fault_stop_all_one_wakes beside a build loop). */
    return false;
}

static cmd_outcome run_command(lattice_respd *r, conn *c, batch *b, size_t argc, const lattice_resp_arg *argv,
                               bool in_exec)
{
    char err[LATTICE_RESP_ERR_MAX];
    bool queue = !in_exec && respd_tx_in_multi(c);
    if (eq(&argv[0], "config") && !queue) { /* not a command of the table: CONFIG GET for tools only */
        if (b->n_ents) return CMD_DEFER;
        uint64_t t0 = respd_now_us();
        if (argc >= 2 && !in_exec) /* CLIENT LIST's cmd= */
            c->last_cmd = eq(&argv[1], "get") ? "config|get" : eq(&argv[1], "set") ? "config|set"
                        : eq(&argv[1], "resetstat") ? "config|resetstat" : "config";
        if (!c->authed) lattice_resp_add_error(c->out, LATTICE_RESP_ERR_NOAUTH, strlen(LATTICE_RESP_ERR_NOAUTH));
        else respd_config_command(r, c, argc, argv);
        if (c->authed && respd_slowlog_wants(r)) respd_slowlog_add(r, c, argc, argv, respd_now_us() - t0);
        return CMD_DONE;
    }
    if (b->sealed) return CMD_DEFER; /* after WATCH / EXEC: the next batch */
    const lattice_resp_cmd *rc = lattice_resp_cmd_resolve(argc, argv, err);
    if (queue && !(rc && (lattice_resp_cmd_id_of(rc) == LATTICE_RESP_CMD_QUIT || lattice_resp_cmd_id_of(rc) == LATTICE_RESP_CMD_RESET)))
        return respd_tx_command(r, c, b, rc, argc, argv, err); /* queued, or MULTI's own commands */
    if (rc && respd_is_tx_command(lattice_resp_cmd_id_of(rc)) && !respd_is_tx_key_command(lattice_resp_cmd_id_of(rc)))
        return respd_tx_command(r, c, b, rc, argc, argv, err);
    if (!rc) {
        if (b->n_ents) return respd_ent_error(b, err);
        lattice_resp_add_error(c->out, err, strlen(err));
        return CMD_DONE;
    }
    lattice_resp_cmd_id id = lattice_resp_cmd_id_of(rc);
    if (!c->authed && !(lattice_resp_cmd_flags(rc) & LATTICE_RESP_F_NO_AUTH)) {
        if (b->n_ents) return respd_ent_error(b, LATTICE_RESP_ERR_NOAUTH);
        lattice_resp_add_error(c->out, LATTICE_RESP_ERR_NOAUTH, strlen(LATTICE_RESP_ERR_NOAUTH));
        return CMD_DONE;
    }
    if (in_exec && id == LATTICE_RESP_CMD_MONITOR) /* as Redis: EXEC expects one reply per command */
        return respd_ent_error(b, "ERR MONITOR isn't allowed for DENY BLOCKING client");
    if (respd_is_key_command(id)) {
        if (c->mon) return respd_ent_error(b, "ERR Replica can't interact with the keyspace"); /* as Redis */
        if (b->sealed || (respd_is_walk_command(id) && b->n_ents)) return CMD_DEFER;
        if (touches_batch_key(b, rc, argc, argv)) return CMD_DEFER;
        atomic_fetch_add(&r->cmd_calls[id], 1);
        bool walk = respd_is_walk_command(id); /* no key: never misrouted */
        if (!walk && respd_misrouted(r, c, rc, argc, argv, err)) return respd_ent_error(b, err);
        if (!in_exec) c->last_cmd = lattice_resp_cmd_name(rc); /* in EXEC: cmd=exec, as Redis */
        if (!in_exec && atomic_load_explicit(&r->n_mons, memory_order_relaxed)) respd_monitor_feed(r, c, rc, argc, argv);
        size_t n_before = b->n_ents;
        b->c = c; /* the batch's connection (queue_batch sets it too): respd_tx_key_command asks it */
        cmd_outcome oc = walk ? respd_walk_command(r, c, b, id, argc, argv) : respd_key_command(r, b, id, argc, argv);
        if (!walk && oc == CMD_BATCHED && b->n_ents > n_before) respd_tx_wrap_across(r, c, b);
        if (b->n_ents > n_before && b->ents[b->n_ents - 1].cmd != ENT_ERROR && respd_slowlog_wants(r))
            respd_slowlog_keep(b, &b->ents[b->n_ents - 1], argc, argv);
        return oc;
    }
    if (b->n_ents) return CMD_DEFER;
    if (!in_exec) c->last_cmd = lattice_resp_cmd_name(rc);
    if (!in_exec && atomic_load_explicit(&r->n_mons, memory_order_relaxed)) /* in EXEC: shown when queued */
        respd_monitor_feed(r, c, rc, argc, argv);
    if (id == LATTICE_RESP_CMD_CLIENT_LIST || id == LATTICE_RESP_CMD_CLIENT_KILL) {
        /* Its legs go to every IO thread; time, like a key command's, is
         * counted until the reply (respd_batch_replies). */
        atomic_fetch_add(&r->cmd_calls[id], 1);
        cmd_outcome oc = respd_intro_command(r, c, b, id, argc, argv);
        if (b->xreq && respd_slowlog_wants(r)) respd_slowlog_keep(b, &b->ents[b->n_ents - 1], argc, argv);
        return oc;
    }
    uint64_t t0 = respd_now_us();
    if (id >= LATTICE_RESP_CMD_SLOWLOG && id <= LATTICE_RESP_CMD_MONITOR) respd_intro_command(r, c, b, id, argc, argv);
    else respd_immediate_command(r, c, id, argc, argv);
    uint64_t took = respd_now_us() - t0;
    atomic_fetch_add(&r->cmd_calls[id], 1);
    atomic_fetch_add(&r->cmd_usec[id], took);
    if (respd_slowlog_wants(r)) respd_slowlog_add(r, c, argc, argv, took);
    return CMD_DONE;
}

cmd_outcome respd_command(lattice_respd *r, conn *c, batch *b, const lattice_resp_command *cmd)
{
    return run_command(r, c, b, cmd->argc, cmd->argv, false);
}

cmd_outcome respd_command_in_exec(lattice_respd *r, conn *c, batch *b, size_t argc, const lattice_resp_arg *argv)
{
    return run_command(r, c, b, argc, argv, true);
}
