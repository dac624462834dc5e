/* nccl.c: solo time of one collective, following NCCL's own tuning model.
 *
 * Mirrors NCCL's src/graph/tuning.cc (ncclTopoTuneModel: per algorithm x
 * protocol latency and bus bandwidth, per-channel caps, bus -> algorithm
 * bandwidth) and src/enqueue.cc (time = latency + bytes / bandwidth, tree
 * correction factor, ring plateau; the minimum over the enabled
 * combinations is what NCCL picks). Written from the model, not the code;
 * the tables are NCCL 2.18+'s values for Volta/Ampere/Hopper.
 * Algorithms: ring (every kind), tree (all_reduce), NVLS (all_reduce inside
 * one NVSwitch node, when the cluster enables it); all_to_all and send/recv
 * are point-to-point. Two measured corrections to NCCL's numbers: each kind
 * reaches a fraction of the bus bandwidth NCCL's table promises
 * (efficiency_<kind>), and every time includes the per-collective overhead
 * (launch + stream synchronisation).
 *
 * Requires: a valid SgCluster. Invalidates: nothing (pure functions).
 */
#include "estimate-private.h"

#include <math.h>

enum { TREE = 0, RING = 1 };
enum { HW_NVLINK = 0, HW_NET = 1 };

/* Latencies in us, bandwidths in GB/s. baseLat[algo][proto]. */
static const double base_lat[2][3] = { { 6.8, 14.0, 0.0 }, { 6.6, 14.0, 8.4 } };
/* hwLat[hw][algo][proto] for NVLink and the network. */
static const double hw_lat[2][2][3] = {
  { { 0.6, 1.25, 4.0 }, { 0.6, 1.9, 3.4 } },
  { { 5.0, 8.5, 14.0 }, { 2.7, 4.0, 14.0 } },
};
/* [arch][node bucket: 1 node, 2 nodes, more]. */
static const double ll_max_bw[SG_NCCL_N_ARCH][3] = {
  { 39.0, 39.0, 20.4 }, { 87.7, 22.5, 19.0 }, { 141.0, 45.0, 35.0 }
};
static const double per_ch_max_ring_ll128_bw[SG_NCCL_N_ARCH][3] = {
  { 20.0, 20.0, 20.0 }, { 20.0, 20.0, 20.0 }, { 36.7, 36.7, 36.7 }
};
static const double per_ch_max_tree_ll128_bw[SG_NCCL_N_ARCH][3] = {
  { 20.0, 20.0, 20.0 }, { 20.0, 20.0, 20.0 }, { 36.7, 36.7, 29.0 }
};
static const double per_ch_max_tree_bw[SG_NCCL_N_ARCH][3] = {
  { 26.5, 18.5, 10.0 }, { 24.0, 23.6, 17.8 }, { 38.7, 41.4, 36.0 }
};
/* Trees do not follow the model at medium sizes: NCCL's static correction,
 * indexed by log2(bytes / 64), 64 B to 256 MiB. */
static const double tree_correction[3][23] = {
  { 1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0,
    1.0 },
  { 1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0,
    1.0 },
  { .9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9 },
};

const char *
sg_nccl_algo_name (SgNcclAlgo a)
{
  static const char *const names[] = { "ring", "tree", "nvls", "p2p" };
  return names[a];
}

const char *
sg_nccl_proto_name (SgNcclProto p)
{
  static const char *const names[] = { "LL", "LL128", "Simple" };
  return names[p];
}

static int
log2i (uint64_t v)
{
  int l = -1;
  while (v) {
    v >>= 1;
    l++;
  }
  return l;
}

/* Bus bandwidth of the slowest link a ring/tree over this group crosses:
 * NVLink channels inside a node; across nodes, the NICs the group's ranks on
 * one node can drive (one NIC per GPU, at most nics_per_node). */
static double
raw_bus_bw (const SgCluster *c, int32_t ppn, int32_t n_nodes)
{
  double bw = c->nvlink_channels * c->nvlink_channel_GBps;
  if (n_nodes > 1) {
    int32_t nics = MIN (ppn, c->nics_per_node);
    bw = MIN (bw, nics * c->net_nic_GBps);
  }
  return bw;
}

/* The fraction of the model's bus bandwidth each kind reaches (measured:
 * NCCL's table over-promises for rings that send and receive at once). */
static double
kind_efficiency (const SgCluster *c, SgOpKind kind)
{
  switch (kind) {
  case SG_OP_ALL_GATHER:
    return c->efficiency_all_gather;
  case SG_OP_REDUCE_SCATTER:
    return c->efficiency_reduce_scatter;
  case SG_OP_ALL_REDUCE:
    return c->efficiency_all_reduce;
  case SG_OP_BROADCAST:
    return c->efficiency_broadcast;
  default:
    return c->efficiency_p2p;
  }
}

SgNcclChoice
sg_nccl_time (const SgCluster *c, SgOpKind kind, uint64_t bytes, int32_t n, int32_t n_nodes)
{
  SgNcclChoice best = { 0.0, SG_ALGO_RING, SG_PROTO_SIMPLE };
  if (n <= 1) {
    /* NCCL runs a single-rank collective as a local copy. */
    best.us = bytes ? sg_compute_bytes_us (c, 2.0 * (double)bytes) : 0.0;
    return best;
  }
  n_nodes = CLAMP (n_nodes, 1, n);
  const int32_t ppn = MAX (1, n / n_nodes);
  const int bucket = n_nodes == 1 ? 0 : n_nodes == 2 ? 1 : 2;
  const int arch = c->nccl_arch;
  const double nch = c->nvlink_channels;
  const double bus0 = raw_bus_bw (c, ppn, n_nodes) * kind_efficiency (c, kind);
  const double overhead = c->collective_overhead_us;
  const double b = (double)bytes;

  if (kind == SG_OP_ALL_TO_ALL) {
    best.algo = SG_ALGO_P2P;
    const double e = c->efficiency_p2p;
    double intra = b * (ppn - 1) / n / (nch * c->nvlink_channel_GBps * e);
    double inter = 0.0;
    if (n_nodes > 1) {
      double per_gpu_net = MIN (ppn, c->nics_per_node) * c->net_nic_GBps / ppn;
      inter = b * (n - ppn) / n / (per_gpu_net * e);
    }
    double lat = base_lat[RING][SG_PROTO_SIMPLE] +
                 hw_lat[n_nodes > 1 ? HW_NET : HW_NVLINK][RING][SG_PROTO_SIMPLE];
    best.us = overhead + lat + MAX (intra, inter) / 1000.0;
    return best;
  }

  const bool ar = kind == SG_OP_ALL_REDUCE;
  const bool bcast = kind == SG_OP_BROADCAST;
  const int nsteps = ar ? 2 * (n - 1) : bcast ? n : n - 1;
  const int ninter = ar ? 2 * (n_nodes - 1) : bcast ? n_nodes : n_nodes - 1;
  best.us = INFINITY;

  for (int a = TREE; a <= RING; a++) {
    if (a == TREE && !ar)
      continue;
    for (int p = SG_PROTO_LL; p <= SG_PROTO_SIMPLE; p++) {
      if (p == SG_PROTO_LL128 && !c->ll128)
        continue;
      double bus = bus0;
      if (a == RING && p == SG_PROTO_LL)
        bus = MIN (ll_max_bw[arch][bucket], bus * ((n_nodes > 1 || ar) ? 1.0 / 4.0 : 1.0 / 3.0));
      if (a == RING && p == SG_PROTO_LL128)
        bus = MIN (bus * (ppn < 2 ? 0.7 : 0.92), nch * per_ch_max_ring_ll128_bw[arch][bucket]);
      if (a == TREE)
        bus = MIN (bus * 0.92, nch * per_ch_max_tree_bw[arch][bucket]);
      if (a == TREE && p == SG_PROTO_LL)
        bus = MIN (bus / 3.8, ll_max_bw[arch][bucket]);
      if (a == TREE && p == SG_PROTO_LL128)
        bus = MIN (bus * (n_nodes == 1 ? 7.0 / 9.0 : 120.0 / 128.0),
                   nch * per_ch_max_tree_ll128_bw[arch][bucket]);
      /* bus -> algorithm bandwidth */
      double alg = a == RING ? bus * n / nsteps : bus * 0.5;

      double intra_lat = hw_lat[HW_NVLINK][a][p];
      double inter_lat = hw_lat[HW_NET][a][p];
      if (n_nodes > 1 && p == SG_PROTO_LL)
        intra_lat *= 1.8;
      double lat = base_lat[a][p];
      if (a == RING && bcast) /* one pipeline through the ring: NCCL's sameChannels case */
        lat += n_nodes > 1 ? inter_lat : intra_lat;
      else if (a == RING)
        lat += (nsteps - ninter) * intra_lat + ninter * inter_lat;
      else
        lat += 2.0 * ((ppn - 1) * intra_lat + log2i ((uint64_t)n_nodes) * inter_lat);

      if (a == TREE) {
        int ls = log2i (bytes >> 6);
        if (ls >= 0 && ls < 23)
          alg *= tree_correction[p][ls];
      }
      if (a == RING && p == SG_PROTO_SIMPLE && n_nodes > 1 && ar && b / (nch * n) >= 64.0)
        lat *= arch == SG_NCCL_VOLTA ? 1.9 : 1.4; /* ring plateau */
      double t = lat + b / (1000.0 * alg);
      if (t < best.us) {
        best.us = t;
        best.algo = a == RING ? SG_ALGO_RING : SG_ALGO_TREE;
        best.proto = (SgNcclProto)p;
      }
    }
  }
  /* NVLink SHARP: the switch reduces; each GPU sends and receives the
   * tensor once whatever the group size (NVLS's nccl-tests bus bandwidth). */
  if (ar && c->nvls && n_nodes == 1) {
    double alg = c->nvls_busbw_GBps * n / (2.0 * (n - 1));
    double t = c->nvls_latency_us + b / (1000.0 * alg);
    if (t < best.us) {
      best.us = t;
      best.algo = SG_ALGO_NVLS;
      best.proto = SG_PROTO_SIMPLE;
    }
  }
  best.us += overhead;
  return best;
}

double
sg_nccl_p2p_time (const SgCluster *c, uint64_t bytes, bool same_node)
{
  double bw = (same_node ? c->nvlink_channels * c->nvlink_channel_GBps : c->net_nic_GBps) *
              c->efficiency_p2p;
  double lat = base_lat[RING][SG_PROTO_SIMPLE] +
               hw_lat[same_node ? HW_NVLINK : HW_NET][RING][SG_PROTO_SIMPLE];
  return c->collective_overhead_us + lat + (double)bytes / (1000.0 * bw);
}
