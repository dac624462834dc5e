/* estimate-private.h: the cost model's insides, shared by the .c files of estimate/ only.
 *
 * SgCluster: every tunable number of the model (docs/cluster-format.md
 * documents each field, docs/cost-model.md the formulas). SgProfile: the
 * measured-times table (docs/profile-format.md). SgCostModel: both, plus
 * per-graph state (group spans, unknown targets noted).
 */
#pragma once

#include "estimate.h"

G_BEGIN_DECLS

/* NCCL's tuning tables differ by GPU generation (tuning.cc indexes them by
 * compute capability). */
typedef enum {
  SG_NCCL_VOLTA = 0,
  SG_NCCL_AMPERE,
  SG_NCCL_HOPPER,
  SG_NCCL_N_ARCH
} SgNcclArch;

typedef struct {
  char name[64]; /* preset name, or the file's "name" */
  char gpu[32];  /* "H100", "H200", "A100" */
  int32_t gpus_per_node;
  int32_t nodes;

  /* compute */
  double bf16_tflops; /* dense matmul peak (also float16) */
  double fp8_tflops;
  double fp32_tflops;
  double hbm_GBps;
  double memory_efficiency;  /* achieved fraction of hbm_GBps by memory-bound kernels */
  double kernel_launch_us;   /* fixed part of a memory-bound kernel */
  double kernel_floor_us;    /* smallest time of a memory-bound op (launch-bound) */
  double gemm_launch_us;     /* fixed part of a GEMM */
  double gemm_floor_us;      /* smallest time of a matmul/attention op (launch-bound) */
  double gemm_max_efficiency;
  double gemm_half_gflops;   /* flops at which the efficiency reaches half its maximum */
  double gemm_efficiency_exponent;
  /* attention: fractions of the matmul peak over the wave-quantized work */
  double attention_flash_efficiency;
  double attention_flash_backward_efficiency;
  double attention_efficient_efficiency;
  double attention_efficient_backward_efficiency;
  double attention_cudnn_efficiency;
  double attention_cudnn_backward_efficiency;
  double attention_floor_us; /* smallest time of an SDPA op (launch-bound) */
  int32_t sm_count;          /* SMs: attention tiles run in waves of this many */
  double unknown_op_us;              /* floor of an op the model does not know */

  /* collectives (NCCL) */
  SgNcclArch nccl_arch;
  int32_t nvlink_channels;
  double nvlink_channel_GBps; /* bus bandwidth per channel inside a node */
  double net_nic_GBps;        /* one NIC, one direction */
  int32_t nics_per_node;
  bool ll128;
  bool nvls;
  double nvls_busbw_GBps;
  double nvls_latency_us;
  double collective_overhead_us; /* launch + stream sync per collective */
  /* a coalesced call (one NCCL group) pays collective_overhead_us once;
   * each member after the first adds this beyond its own NCCL time
   * (docs/cost-model.md "Coalesced collectives"; 0 until measured) */
  double coalesced_member_us;
  /* measured fraction of the NCCL-model bus bandwidth each kind reaches */
  double efficiency_all_gather;
  double efficiency_reduce_scatter;
  double efficiency_all_reduce;
  double efficiency_broadcast;
  double efficiency_p2p; /* all_to_all, send/recv */
  /* point-to-point over the copy engine (CUDA IPC, inside a node) */
  double ce_GBps;        /* one peer, one direction */
  double ce_latency_us;  /* per step: the copy's issue and the two flag handshakes */
  /* a GEMM given an SM-count target s (cuBLASLt) takes gemm_sm_overhead x
   * (sm_count / min(s, sm_count))^gemm_sm_exponent times as long as on
   * every SM (fitted on tools/device/chunked_mm.sh's measurement) */
  double gemm_sm_exponent;
  double gemm_sm_overhead;

  SgContention contention;
  double comm_start_wait; /* see sg_cost_model_comm_start_wait() */
  /* applied to the pairs a contention profile measured (not to the global
   * factors): comm_x -> 1 + s (comm_x - 1), kernel_x likewise, waits x s
   * (capped at 1); fitted from runtime reports (tools/sgfit) */
  double contention_comm_scale;
  double contention_compute_scale;
  double contention_wait_scale;
  /* the kernel_x of a measured pair applied while its collective is held
   * by the start wait: 1 in a step (resident on one rank, waiting for its
   * peer), 0 for ranks kept aligned (the profiler's runs) */
  double contention_held_scale;
} SgCluster;

/* --- cluster.c --- */
/* Fills @out with the preset @name; false when there is no such preset. */
bool sg_cluster_preset (const char *name, SgCluster *out);
/* (transfer none) NULL-terminated list of preset names. */
const char *const *sg_cluster_preset_names (void);
/* Resolves the cluster for @g: cfg_cluster (preset name or JSON file) wins
 * over the graph's `cluster`, which wins over h200-sxm. */
bool sg_cluster_resolve (const SgGraph *g, const char *cfg_cluster, SgCluster *out,
                         GError **error);
/* Applies a cluster JSON object's fields over @c. @strict: unknown keys are
 * errors (files) rather than ignored (the graph's `cluster`). @where names
 * the source in messages. */
bool sg_cluster_apply_json (SgCluster *c, const cJSON *obj, bool strict, const char *where,
                            GError **error);

/* --- nccl.c --- */
/* Which algorithm/protocol the model picked (reports, tests). */
typedef enum { SG_ALGO_RING, SG_ALGO_TREE, SG_ALGO_NVLS, SG_ALGO_P2P } SgNcclAlgo;
typedef enum { SG_PROTO_LL, SG_PROTO_LL128, SG_PROTO_SIMPLE } SgNcclProto;
typedef struct {
  double us;
  SgNcclAlgo algo;
  SgNcclProto proto;
} SgNcclChoice;

/* Solo time of one collective from NCCL's tuning model (without the
 * profile). @kind: a collective kind; @n_nodes: machines the group spans. */
SgNcclChoice sg_nccl_time (const SgCluster *c, SgOpKind kind, uint64_t bytes,
                           int32_t group_size, int32_t n_nodes);
/* One send/recv pair of @bytes between two ranks. */
double sg_nccl_p2p_time (const SgCluster *c, uint64_t bytes, bool same_node);
const char *sg_nccl_algo_name (SgNcclAlgo a);
const char *sg_nccl_proto_name (SgNcclProto p);

/* --- p2p.c --- */
/* One point-to-point step of @bytes between two ranks over @transport, on
 * the same node or not (ce across nodes: +inf, sg_p2p_check refuses it). */
double sg_p2p_time (const SgCluster *c, SgTransport transport, uint64_t bytes, bool same_node);
/* A collective_permute node's time: its slowest pair; a pair within one
 * rank is a local copy. Pairs are judged on the graph's own group instance. */
double sg_p2p_permute_us (const SgCluster *c, const SgGraph *g, SgNodeId id);
/* Fails, naming the node and the pair, when a ce permute crosses nodes. */
bool sg_p2p_check (const SgCluster *c, const SgGraph *g, SgNodeId id, GError **error);

/* --- compute.c --- */
/* The slowdown of a matmul @n given an SM-count target (1 without one). */
double sg_compute_sm_factor (const SgCluster *c, const SgNode *n);
/* GEMM of @flops and @bytes moved, operands of @dtype. */
double sg_compute_gemm_us (const SgCluster *c, SgDtype dtype, double flops, double bytes);
/* Memory-bound kernel moving @bytes. */
double sg_compute_bytes_us (const SgCluster *c, double bytes);

/* Shape summary of a matmul/attention node for profile lookup and reports. */
typedef struct {
  SgOpKind op;
  SgDtype dtype;
  int64_t batch, m, n, k;                 /* matmul */
  int64_t heads, seq_q, seq_kv, head_dim; /* attention (batch shared) */
  bool causal;
  double flops;
  double bytes;
} SgShape;

/* The shape of a matmul @op of @batch x (@m x @k) @ (@k x @n) in @dtype:
 * its flops and the bytes of its operands and result. */
void sg_compute_matmul_shape (SgShape *s, SgOpKind op, SgDtype dtype, int64_t batch, int64_t m,
                              int64_t k, int64_t n);
/* Fills @s for a matmul or attention node; false when its shapes are
 * unknown (then the node is costed by bytes). */
bool sg_compute_shape (const SgGraph *g, SgNodeId id, SgShape *s);
/* Model time of a matmul/attention shape. */
double sg_compute_shape_us (const SgCluster *c, const SgShape *s);
/* Wave-quantized flops an SDPA kernel of shape @s executes. */
double sg_compute_attention_work (const SgCluster *c, const SgShape *s);
/* Bytes a memory-bound node reads and writes. @storage_bytes (or NULL):
 * per node id below @n_storage, the bytes of its storage root
 * (sg_compute_storage_bytes_in), to avoid walking alias chains. */
double sg_compute_node_bytes (const SgGraph *g, SgNodeId id, const uint64_t *storage_bytes,
                              int32_t n_storage);
/* Per node @a .. @b-1, the allocated bytes of its storage root, into @sb
 * (ranges filled in any order give the same array). */
void sg_compute_storage_bytes_in (const SgGraph *g, SgNodeId a, SgNodeId b, uint64_t *sb);

/* --- profile.c --- */
typedef struct SgProfile SgProfile;
SgProfile *sg_profile_load (const char *path, int32_t world_size, GError **error);
SgProfile *sg_profile_load_data (const char *data, size_t len, const char *name,
                                 int32_t world_size, GError **error);
void sg_profile_free (SgProfile *p);
/* Measured (exact or interpolated) time; false when the profile has no
 * answer. */
bool sg_profile_shape_us (const SgProfile *p, const SgShape *s, double *us);
bool sg_profile_collective_us (const SgProfile *p, SgOpKind kind, uint64_t bytes,
                               int32_t group_size, int32_t n_nodes, double *us);
bool sg_profile_op_us (const SgProfile *p, const char *target, uint64_t bytes, double *us);
const char *sg_profile_device (const SgProfile *p);

/* Log-log interpolation over (size, us) points sorted by size: exact when a
 * point has @x, between neighbours, linear scaling above the largest; false
 * below the smallest. Shared by profile.c and tests. */
bool sg_interp_loglog (const double *xs, const double *ys, size_t n, double x, double *y);

/* --- contention.c (entries parsed by profile.c) --- */
/* One `contention` entry of a profile (docs/profile-format.md), raw. */
typedef struct {
  SgTransport transport;
  SgOpKind kind;
  int32_t group_size, nodes;
  uint64_t bytes;
  SgKernelClass klass;
  char *kernel_key;  /* the measured kernel (the profile's key text) */
  bool kernel_first; /* order "kernel_first" (else "comm_first") */
  int32_t runs_per_rep;
  double comm_solo_us, rep_solo_us, lag_us, comm_us;
  double *reps_us;
  int32_t n_reps;
  int index; /* position in the JSON array, for messages */
} SgContentionSample;

/* Frees what @s owns. */
void sg_contention_sample_clear (SgContentionSample *s);
/* (transfer none) The profile's contention samples (version 2), *@n of them
 * (profile.c). */
const SgContentionSample *sg_profile_contention (const SgProfile *p, size_t *n);
/* The class named @name (sg_kernel_class_name); false when none is. */
bool sg_kernel_class_from_name (const char *name, SgKernelClass *out);

/* The pair table of a cost model: slots, measured pairs, fallbacks. */
typedef struct SgContentionTable SgContentionTable;
/* From the samples of @p (NULL or none: the global factors only) and the
 * cluster's factors and scales. */
SgContentionTable *sg_contention_table_new (const SgProfile *p, const SgCluster *c);
void sg_contention_table_free (SgContentionTable *t);

/* --- estimate.c --- */
struct SgCostModel {
  SgCluster cluster;
  SgProfile *profile;    /* NULL without --profile */
  char *profile_path;
  int32_t *group_nodes;  /* per group of the graph it was built for */
  int32_t n_groups;
  GPtrArray *unknown;    /* distinct unknown targets, first-seen order; NULL-terminated */
  uint64_t *storage_bytes; /* during the pass only: storage-root bytes per node */
  int32_t n_storage;
  GHashTable *unknown_set;
  SgContentionTable *contention; /* pairs (contention.c) */
};

G_END_DECLS
