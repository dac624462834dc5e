/* estimate.h: a cost for every node, in microseconds, from one cost model.
 *
 * Collectives: an NCCL-style analytical model (ring/tree x LL/LL128/Simple,
 * latency + bandwidth, intra/inter-node); compute: a roofline (flops with a
 * size-dependent efficiency for matmul/attention, bytes over HBM bandwidth
 * for pointwise/reductions/copies, 0 for views); both overridden by a
 * measured profile (docs/profile-format.md) and by a node's `cost_us`.
 * Overlap contention: collectives slow down beside compute and compute
 * slows beside collectives (SgContention). docs/cost-model.md has the
 * formulas, sources and defaults.
 */
#pragma once

#include "graph.h"

G_BEGIN_DECLS

#define SG_ESTIMATE_ERROR (sg_estimate_error_quark ())
GQuark sg_estimate_error_quark (void);
typedef enum {
  SG_ESTIMATE_ERROR_CLUSTER, /* unknown preset, bad cluster file */
  SG_ESTIMATE_ERROR_PROFILE, /* bad or mismatched profile file */
} SgEstimateError;

/* Overlap contention: while a collective runs beside compute, the
 * collective takes comm_slowdown x its solo time and compute takes
 * compute_slowdown x its solo time (both >= 1). Read as rates: during the
 * interval where both run, the collective progresses at 1/comm_slowdown and
 * the compute at 1/compute_slowdown of their solo speed (docs/cost-model.md
 * derives the defaults from the 2x H200 interference measurement). */
typedef struct {
  double comm_slowdown;
  double compute_slowdown;
  /* comm_slowdown of the collectives that reduce (reduce_scatter,
   * all_reduce): their kernels add and stream their inputs through HBM
   * beside the compute (measured by schedrun on 2x H200) */
  double reduce_slowdown;
} SgContention;

typedef struct SgCostModel SgCostModel;

/* The estimate pass: builds the cost model from cfg->cluster (or the
 * graph's `cluster`, else the h200-sxm preset) and cfg->profile, attaches it
 * to the graph (g->cost_model) and fills est_us / est_src of every node. */
bool sg_estimate_costs (SgGraph *g, const SgConfig *cfg, GError **error);

/* (transfer none) The model the estimate pass attached, or NULL. */
const SgCostModel *sg_graph_cost_model (const SgGraph *g);

/* Cost of one node as the model sees it (bucket/ uses it for nodes it
 * creates). Sets *src. */
double sg_cost_node_us (const SgCostModel *cm, const SgGraph *g, SgNodeId id, SgCostSource *src);

/* Solo time of a collective: @kind in SG_CLASS_COLLECTIVE, @bytes as
 * sg_node_comm_bytes() counts them, over a group of @group_size ranks that
 * spans @n_nodes machines. */
double sg_cost_collective_us (const SgCostModel *cm, SgOpKind kind, SgDtype dtype, uint64_t bytes,
                              int32_t group_size, int32_t n_nodes, SgCostSource *src);

/* (transfer none) The contention parameters in force. */
const SgContention *sg_cost_model_contention (const SgCostModel *cm);

/* Start delay of a collective issued while a compute kernel runs, as a
 * fraction of that kernel's remaining time: 1 means it starts only when the
 * kernel ends (measured on H200: cuBLAS's persistent GEMMs hold every SM,
 * so an all_gather issued behind one waits for it), 0 means at once. */
double sg_cost_model_comm_start_wait (const SgCostModel *cm);

/* Machines a group of the graph spans, from the cluster's gpus_per_node. */
int32_t sg_cost_group_nodes (const SgCostModel *cm, const SgGroup *group);

/* One point-to-point step (a pair of a collective_permute) of @bytes between
 * two ranks, on the same node (NVLink) or not (one NIC), over @transport:
 * NCCL send/recv, or the copy engine (+inf across nodes). Model source. */
double sg_cost_p2p_us (const SgCostModel *cm, SgTransport transport, uint64_t bytes,
                       bool same_node);

/* SMs of one GPU of the cluster (the full count an `sm_count` target is a
 * fraction of; a matmul given s of them costs (sm_count / s)^gemm_sm_exponent
 * times more, docs/cost-model.md). */
int32_t sg_cost_model_sm_count (const SgCostModel *cm);

/* (transfer none) The cluster's name: a preset name or the cluster file. */
const char *sg_cost_model_cluster_name (const SgCostModel *cm);

/* The --costs table: one row per node that has a cost (columns name, kind,
 * shape summary, est_us, source), sorted by cost descending then id; then
 * totals by op class and by source, then the unknown targets. Needs
 * sg_estimate_costs() to have run (else prints one line saying so). */
void sg_estimate_print_costs (const SgGraph *g, FILE *out);

/* (transfer none) The distinct targets the op table does not know, in order
 * of first appearance, NULL-terminated; *@n is their count. Empty before
 * sg_estimate_costs(). Valid while the graph's cost model lives. */
const char *const *sg_estimate_unknown_targets (const SgGraph *g, size_t *n);

G_END_DECLS
