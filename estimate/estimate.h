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

/* Cost of one node as the model sees it. Sets *src. A bucket copy runs
 * the zero-copy analysis of the whole graph (O(n)): cost many new nodes
 * with sg_cost_new_nodes(). */
double sg_cost_node_us (const SgCostModel *cm, const SgGraph *g, SgNodeId id, SgCostSource *src);

/* Costs the nodes @ids (n_ids; ids NULL: every node) of @g whose est_src
 * is SG_COST_NONE (nodes a pass added), with one zero-copy analysis
 * (graph/elide.c) for all of them: bucket copies codegen elides are free.
 * Ids may be SG_NO_NODE (skipped). The analysis and the costs run in
 * ranges on @pool (NULL: in order; the costs are the same). */
void sg_cost_new_nodes (const SgCostModel *cm, SgGraph *g, const SgNodeId *ids, int32_t n_ids,
                        SgPool *pool);
/* The same with the zero-copy analysis @e of @g given (NULL: @g has no
 * bucket copies), the nodes in ranges on @pool (NULL: in order; the costs
 * are the same). */
void sg_cost_new_nodes_elided (const SgCostModel *cm, SgGraph *g, const SgNodeId *ids,
                               int32_t n_ids, const SgElision *e, SgPool *pool);

/* Solo time of aten.mm of (@m x @k) @ (@k x @n) in @dtype on every SM: what
 * the model (or the profile) gives such a node (decompose/ bounds its
 * chunk GEMMs with it before building them). */
double sg_cost_mm_us (const SgCostModel *cm, SgDtype dtype, int64_t m, int64_t k, int64_t n);

/* Solo time of a collective: @kind in SG_CLASS_COLLECTIVE, @bytes as
 * sg_node_comm_bytes() counts them, over a group of @group_size ranks that
 * spans @n_nodes machines. */
double sg_cost_collective_us (const SgCostModel *cm, SgOpKind kind, SgDtype dtype, uint64_t bytes,
                              int32_t group_size, int32_t n_nodes, SgCostSource *src);

/* Solo time of a coalesced collective: one NCCL group (ncclGroupStart /
 * ncclGroupEnd) of @n members of @member_kind over the same group, member
 * i moving @bytes[i]. The group pays the per-call overhead
 * (collective_overhead_us: launch and stream synchronisation) once; each
 * member runs its own NCCL algorithm at its own size (latency and
 * bandwidth, sg_cost_collective_us less that overhead), plus the cluster's
 * coalesced_member_us for every member after the first
 * (docs/cost-model.md "Coalesced collectives"). n = 1 is the member's
 * sg_cost_collective_us. *@src: the first member's source. */
double sg_cost_coalesced_us (const SgCostModel *cm, SgOpKind member_kind, SgDtype dtype,
                             const uint64_t *bytes, int32_t n, int32_t group_size, int32_t n_nodes,
                             SgCostSource *src);

/* Solo time of a memory-bound copy kernel that reads and writes @bytes
 * in all (what the model charges a bucket copy that stays a kernel). */
double sg_cost_copy_us (const SgCostModel *cm, uint64_t bytes);

/* (transfer none) The contention parameters in force. */
const SgContention *sg_cost_model_contention (const SgCostModel *cm);

/* Start delay of a collective issued while a compute kernel runs, as a
 * fraction of that kernel's remaining time: 1 means it starts only when the
 * kernel ends (measured on H200: cuBLAS's persistent GEMMs hold every SM,
 * so an all_gather issued behind one waits for it), 0 means at once. */
double sg_cost_model_comm_start_wait (const SgCostModel *cm);

/* With measured pairs (a contention profile): how much of a pair's kernel_x
 * applies while its collective is held by the start wait (the cluster's
 * contention_held_scale: 1 in a step, where the held collective is resident
 * on the rank that let it in first; 0 for aligned ranks); 0 without
 * measured pairs (the global factors never slow a held collective's
 * kernel). */
double sg_cost_model_held_scale (const SgCostModel *cm);

/* --- contention per pair (contention.c, docs/cost-model.md section 3) ---
 *
 * What runs beside a collective decides how both slow down. Compute nodes
 * fall in kernel classes; a profile's `contention` section (profile format
 * version 2) measures collectives beside one kernel of each class the graph
 * has (GEMMs by size), and the model derives per pair the rates below.
 * Without such data every pair gets the global factors above. */
typedef enum {
  SG_KERNEL_GEMM = 0,           /* mm, addmm, bmm, baddbmm on every SM */
  SG_KERNEL_ATTENTION,          /* SDPA forward */
  SG_KERNEL_ATTENTION_BACKWARD, /* SDPA backward */
  SG_KERNEL_MAP,                /* pointwise, copies, creation, bucket copies, unknown ops */
  SG_KERNEL_REDUCTION,
  SG_KERNEL_GEMM_SM,            /* a matmul with an SM-count target (sm_count): SMs left free */
  SG_KERNEL_N_CLASSES
} SgKernelClass;

/* The class a compute node of op @kind runs in (SG_KERNEL_MAP for anything
 * that is not a matmul, attention or reduction; matmuls are SG_KERNEL_GEMM). */
SgKernelClass sg_kernel_class (SgOpKind kind);
/* The class of node @n: as its kind, but a matmul that does not hold every
 * SM (graph/'s sg_node_holds_sms: an sm_count target) is SG_KERNEL_GEMM_SM. */
SgKernelClass sg_node_kernel_class (const SgNode *n);
/* "gemm", "attention", "attention_backward", "map", "reduction", "gemm_sm". */
const char *sg_kernel_class_name (SgKernelClass k);

/* One collective beside one kernel (a pair). Rates as SgContention reads
 * them, waits as comm_start_wait: */
typedef struct {
  double comm_x;      /* the collective's time multiplier while the kernel runs beside it */
  double kernel_x;    /* the kernel's time multiplier while the collective runs */
  double wait_before; /* issued right before the kernel (startable when it starts): the
                       * fraction of its work the collective waits before it starts */
  double wait_during; /* startable while the kernel runs: the fraction of its remaining
                       * work the collective waits */
} SgPairRates;

/* The global factors as pair rates: comm_x = reduce_slowdown for the
 * collectives that reduce (@coll reduce_scatter, all_reduce), else
 * comm_slowdown; kernel_x = compute_slowdown; both waits = @start_wait for
 * the GEMM (on every SM) and attention classes (they hold every SM), 0 for
 * the others. The fallback of every missing pair, and the whole model
 * without a profile; it does not depend on the transport. */
void sg_contention_global_rates (const SgContention *c, double start_wait, SgOpKind coll,
                                 SgKernelClass k, SgPairRates *out);

/* One in-place measurement (docs/profile-format.md `contention`): a chain
 * of @n_reps reps of one kernel (each rep @runs_per_rep runs) on the compute
 * stream, a collective that becomes startable @lag_us after the chain
 * starts and ends @comm_us later; alone, the collective takes
 * @comm_solo_us and a rep @rep_solo_us. */
typedef struct {
  double comm_solo_us, rep_solo_us, lag_us, comm_us;
  const double *reps_us; /* [n_reps]: each rep's time beside the collective */
  int32_t n_reps;
  int32_t runs_per_rep;  /* kernel runs per rep (>= 1) */
  bool kernel_first;     /* issued while the chain's first kernel ran (else with the chain) */
  double comm_x_hint;    /* the pair's comm_x from another run, or NaN (below) */
} SgContentionRun;

/* The pair rates one run shows (docs/cost-model.md "Deriving a pair"):
 * where the collective really started is read from the reps it slowed (a
 * rep it covered whole gives the kernel's slowdown, which places the start
 * inside the first slowed rep); comm_x and kernel_x from the overlap; the
 * wait (wait_during when the collective became startable while the chain
 * ran, @kernel_first, else wait_before; the other wait is NaN) from the
 * start against the kernel that held it. Returns true when the start was
 * read that way (or nothing overlapped); false when the collective ended
 * inside the rep it started in, where start and comm_x trade off: then the
 * start is placed by @comm_x_hint when finite (the other order's comm_x),
 * else at that rep's start (no wait). A field the run cannot show (no
 * overlap) is NaN. comm_x and kernel_x are clamped to [1, 100], waits to
 * [0, 1]. */
bool sg_contention_derive (const SgContentionRun *run, SgPairRates *out);

/* Kernel slots the model distinguishes: one per measured kernel of the
 * profile's contention section (by class, then solo time), and one for
 * each class the profile did not measure (every class without a profile).
 * @cm may be NULL (SG_KERNEL_N_CLASSES slots, one per class). */
int32_t sg_cost_contention_slots (const SgCostModel *cm);
/* The slot of compute node @id of @g whose solo time is @work_us: its
 * class's measured kernel nearest in log time. (The node, not only its
 * kind: a GEMM limited to fewer SMs will be a slot of its own.) */
int32_t sg_cost_contention_slot (const SgCostModel *cm, const SgGraph *g, SgNodeId id,
                                 double work_us);
/* The class of @slot. */
SgKernelClass sg_cost_contention_slot_class (const SgCostModel *cm, int32_t slot);
/* The transport collective node @id uses: a collective_permute's own
 * (nccl or ce), NCCL for the others. */
SgTransport sg_cost_collective_transport (const SgCostModel *cm, const SgGraph *g, SgNodeId id);
/* Rates of a collective (@kind, @bytes as sg_node_comm_bytes counts them,
 * @group_size ranks over @n_nodes machines, over @t) beside each slot:
 * fills @out[sg_cost_contention_slots (cm)]. Measured pairs are
 * interpolated in bytes; missing ones fall back (docs/cost-model.md
 * "Missing pairs") down to sg_contention_global_rates, without its waits
 * for a copy-engine transport (it uses no SM, so nothing holds it). */
void sg_cost_contention_rates (const SgCostModel *cm, SgTransport t, SgOpKind kind,
                               uint64_t bytes, int32_t group_size, int32_t n_nodes,
                               SgPairRates *out);
/* True when some pair may delay a collective's start (a wait > 0). */
bool sg_cost_model_has_start_wait (const SgCostModel *cm);
/* Measured pairs in the model (0 without a contention profile). */
int32_t sg_cost_contention_pairs (const SgCostModel *cm);
/* The pair table as text (the --costs section, docs/cost-model.md section
 * 5): the kernel slots, then every measured point (family, bytes, slot) with
 * the rates derived from it, before the cluster's scales. Prints nothing
 * without measured pairs. */
void sg_contention_print_pairs (const SgCostModel *cm, FILE *out);

/* Machines a group of the graph spans, from the cluster's gpus_per_node. */
int32_t sg_cost_group_nodes (const SgCostModel *cm, const SgGroup *group);

/* One point-to-point step (a pair of a collective_permute) of @bytes between
 * two ranks, on the same node (NVLink) or not (one NIC), over @transport:
 * NCCL send/recv, or the copy engine (+inf across nodes). Model source. */
double sg_cost_p2p_us (const SgCostModel *cm, SgTransport transport, uint64_t bytes,
                       bool same_node);

/* SMs of one GPU of the cluster (the full count an `sm_count` target is a
 * fraction of; a matmul given s of them costs gemm_sm_overhead x
 * (sm_count / s)^gemm_sm_exponent times more, docs/cost-model.md). */
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
