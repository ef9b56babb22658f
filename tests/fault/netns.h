/*
 * Network namespaces for partition schedules (fault_run) and the partition
 * benchmark (bench/quorum): one namespace per node, their peer links on a
 * bridge in a "switch" namespace, so a partition is a bridge port moved to
 * a second bridge (a group cut: the nodes moved still reach each other) or
 * set down (one node cut), and a heal moves it back; two nodes that must not
 * reach each other (and only each other) get blackhole routes.  Clients stay in the
 * root namespace and reach each node through a link of its own that no cut
 * touches: clients on both sides of a partition go on talking to their node.
 *
 *   root ns:  lq<tag>c<i> 10.X.(i+1).1/30, route 10.X.0.(i+1)/32 via it
 *   node i:   p<i> 10.X.0.(i+1)/24 (peer traffic, on the bridge)
 *             c<i> 10.X.(i+1).2/30 (client link to the root namespace)
 *   switch:   br0 (everyone), br1 (the cut-off group), b<i> = node i's port
 *   ctl:      10.X.0.100 on br0, for the lattice CLI (a client node must
 *             reach every server and be reached by them)
 *
 * X comes from the process id, moved on past any 10.X the root namespace
 * still routes, so two runs at once (or one whose namespaces are still being
 * deleted) use other addresses.
 * Every namespace is registered with the harness guardian (it_guard_netns),
 * which deletes them - and with them every veth, the root ends included -
 * however the process ends.  Needs root.
 */
#ifndef LATTICE_FAULT_NETNS_H
#define LATTICE_FAULT_NETNS_H

#include <stdbool.h>

#define FNET_MAX 6

typedef struct fnet {
    int tag, x, n;
    char sw[32], ctl[32];
    char ns[FNET_MAX][32];
    char host[FNET_MAX][32]; /* node i's address (peer and RESP port) */
    char ctl_host[32];
    char finder[256];        /* every node's host:47500 */
} fnet;

/* False (after a message) when namespaces cannot be made here (not root);
 * a later step failing exits the process (the guardian cleans up). */
bool fnet_setup(fnet *f, int nodes);
/* Cut nodes[0..k) off from the others (they still reach each other). */
void fnet_isolate(fnet *f, const int *nodes, int k);
/* Every node back on one bridge, every port up. */
void fnet_heal(fnet *f);
/* Node i's peer link down (cut from everyone) or up again. */
void fnet_link(fnet *f, int i, bool up);
/* Nodes a and b no longer reach each other (cut) or do again; each still
 * reaches everyone else. */
void fnet_cut_pair(fnet *f, int a, int b, bool cut);

#endif
