/* Network namespaces for partition schedules; see netns.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "netns.h"

static void must(int rc, const char *what)
{
    if (rc == 0) return;
    fprintf(stderr, "netns: %s failed (exit %d)\n", what, rc);
    exit(1);
}

bool fnet_setup(fnet *f, int nodes)
{
    f->n = nodes;
    f->tag = getpid() % 100000;
    /* 10.X/16 no route of the root namespace uses yet: a previous run's
     * namespaces may still be on their way out (the guardian deletes them
     * after its test ended), and their client routes with them. */
    f->x = 100 + getpid() % 100;
    for (int k = 0; k < 100 && it_sh("ip route show | grep -q '^10\\.%d\\.'", f->x) == 0; k++)
        f->x = 100 + (f->x - 100 + 1) % 100;
    snprintf(f->sw, sizeof f->sw, "lqsw%d", f->tag);
    snprintf(f->ctl, sizeof f->ctl, "lqctl%d", f->tag);
    it_guard_netns(f->sw);
    if (geteuid() != 0 || it_sh("ip netns add %s", f->sw) != 0) {
        fprintf(stderr, "netns: cannot create network namespaces here (needs root)\n");
        return false;
    }
    must(it_sh("ip -n %s link add br0 type bridge && ip -n %s link set br0 up && "
               "ip -n %s link add br1 type bridge && ip -n %s link set br1 up",
               f->sw, f->sw, f->sw, f->sw),
         "bridges");
    f->finder[0] = 0;
    for (int i = 0; i < nodes; i++) {
        snprintf(f->ns[i], sizeof f->ns[i], "lqn%d%c", f->tag, 'a' + i);
        snprintf(f->host[i], sizeof f->host[i], "10.%d.0.%d", f->x, i + 1);
        it_guard_netns(f->ns[i]);
        must(it_sh("ip netns add %s && ip -n %s link set lo up", f->ns[i], f->ns[i]), "node namespace");
        must(it_sh("ip -n %s link add p%d type veth peer name b%d netns %s && "
                   "ip -n %s link set b%d master br0 && ip -n %s link set b%d up && "
                   "ip -n %s addr add %s/24 dev p%d && ip -n %s link set p%d up",
                   f->ns[i], i, i, f->sw, f->sw, i, f->sw, i, f->ns[i], f->host[i], i, f->ns[i], i),
             "peer link");
        must(it_sh("ip link add lq%dc%d type veth peer name c%d netns %s && "
                   "ip addr add 10.%d.%d.1/30 dev lq%dc%d && ip link set lq%dc%d up && "
                   "ip -n %s addr add 10.%d.%d.2/30 dev c%d && ip -n %s link set c%d up && "
                   "ip route add %s/32 dev lq%dc%d src 10.%d.%d.1",
                   f->tag, i, i, f->ns[i], f->x, i + 1, f->tag, i, f->tag, i, f->ns[i], f->x, i + 1, i, f->ns[i],
                   i, f->host[i], f->tag, i, f->x, i + 1),
             "client link");
        char one[48];
        snprintf(one, sizeof one, "%s%s:47500", i ? "," : "", f->host[i]);
        snprintf(f->finder + strlen(f->finder), sizeof f->finder - strlen(f->finder), "%s", one);
    }
    snprintf(f->ctl_host, sizeof f->ctl_host, "10.%d.0.100", f->x);
    it_guard_netns(f->ctl);
    must(it_sh("ip netns add %s && ip -n %s link set lo up && "
               "ip -n %s link add pc type veth peer name bc netns %s && "
               "ip -n %s link set bc master br0 && ip -n %s link set bc up && "
               "ip -n %s addr add %s/24 dev pc && ip -n %s link set pc up",
               f->ctl, f->ctl, f->ctl, f->sw, f->sw, f->sw, f->ctl, f->ctl_host, f->ctl),
         "ctl namespace");
    return true;
}

void fnet_isolate(fnet *f, const int *nodes, int k)
{
    for (int j = 0; j < k; j++) must(it_sh("ip -n %s link set b%d master br1", f->sw, nodes[j]), "isolate");
}

void fnet_heal(fnet *f)
{
    for (int i = 0; i < f->n; i++)
        must(it_sh("ip -n %s link set b%d master br0 && ip -n %s link set b%d up", f->sw, i, f->sw, i), "heal");
}

void fnet_link(fnet *f, int i, bool up)
{
    must(it_sh("ip -n %s link set b%d %s", f->sw, i, up ? "up" : "down"), "link");
}

void fnet_cut_pair(fnet *f, int a, int b, bool cut)
{
    /* A blackhole route to the other's address, in each of the two: a
     * host route beats the bridge's /24, and a packet already in a socket's
     * queue meets it at its next (re)transmission. */
    const char *op = cut ? "add" : "del";
    must(it_sh("ip -n %s route %s blackhole %s/32 && ip -n %s route %s blackhole %s/32", f->ns[a], op, f->host[b],
               f->ns[b], op, f->host[a]),
         cut ? "cut a pair" : "heal a pair");
}
