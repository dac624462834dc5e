/* p2p.c: point-to-point steps (schedgraph.collective_permute) in the cost model.
 *
 * A permute moves one tensor per pair, all pairs at once: each GPU sends at
 * most one message and receives at most one (a partial permutation), and
 * NVLink (through NVSwitch) and the NICs are full duplex, so the step takes
 * as long as its slowest pair. Per transport:
 *  - nccl: NCCL's send/recv (nccl.c's p2p formula: the collective overhead,
 *    ring Simple latency with one NVLink or network hop, bytes over the
 *    node's NVLink bus bandwidth or one NIC at efficiency_p2p);
 *  - ce: a cudaMemcpyAsync by the copy engine into the peer's memory over
 *    CUDA IPC, inside one node only: ce_latency_us (the copy's issue and
 *    the two flag handshakes of the runtime's protocol, docs/gpu.md) plus
 *    bytes over ce_GBps; no SMs, so no collective overhead.
 * Mirrors: XLA's collective-permute cost (latency + bytes / link
 * bandwidth), nvFuser's and Transformer Engine's copy-engine p2p.
 * Requires: a valid graph (the pairs were checked) and its cluster.
 * Invalidates: nothing.
 */
#include "estimate-private.h"

#include <math.h>

double
sg_p2p_time (const SgCluster *c, SgTransport transport, uint64_t bytes, bool same_node)
{
  if (transport == SG_TRANSPORT_CE)
    return same_node ? c->ce_latency_us + (double)bytes / (c->ce_GBps * 1e3) : INFINITY;
  return sg_nccl_p2p_time (c, bytes, same_node);
}

/* The machine of group rank @r of @id's group, as the graph's rank sees it. */
static int32_t
node_of (const SgCluster *c, const SgGraph *g, SgNodeId id, int32_t r)
{
  return g->groups[g->nodes[id].group].ranks[r] / MAX (c->gpus_per_node, 1);
}

double
sg_p2p_permute_us (const SgCluster *c, const SgGraph *g, SgNodeId id)
{
  SgPermute p;
  double us = 0.0;
  if (sg_node_permute (g, id, &p, NULL)) {
    const uint64_t bytes = sg_node_comm_bytes (g, id);
    for (int32_t i = 0; i < p.n_pairs; i++) {
      const int32_t s = p.pairs[2 * i], t = p.pairs[2 * i + 1];
      const double step = s == t ? sg_compute_bytes_us (c, 2.0 * (double)bytes)
                                 : sg_p2p_time (c, p.transport, bytes,
                                                node_of (c, g, id, s) == node_of (c, g, id, t));
      us = MAX (us, step);
    }
  }
  sg_permute_clear (&p);
  return us;
}

bool
sg_p2p_check (const SgCluster *c, const SgGraph *g, SgNodeId id, GError **error)
{
  SgPermute p;
  bool ok = sg_node_permute (g, id, &p, error);
  for (int32_t i = 0; ok && i < p.n_pairs && p.transport == SG_TRANSPORT_CE; i++) {
    const int32_t s = p.pairs[2 * i], t = p.pairs[2 * i + 1];
    const int32_t ns = node_of (c, g, id, s), nt = node_of (c, g, id, t);
    if (ns != nt) {
      g_set_error (error, SG_ESTIMATE_ERROR, SG_ESTIMATE_ERROR_CLUSTER,
                   "node '%s': kwargs.transport: ce copies between GPUs of one node, but pair "
                   "[%d, %d] joins ranks %d and %d on nodes %d and %d (gpus_per_node %d)",
                   g->nodes[id].name, s, t, g->groups[g->nodes[id].group].ranks[s],
                   g->groups[g->nodes[id].group].ranks[t], ns, nt, c->gpus_per_node);
      ok = false;
    }
  }
  sg_permute_clear (&p);
  return ok;
}
