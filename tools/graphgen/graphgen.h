/* graphgen.h: writes the graph JSON (graph-format.md) of one llama-like
 * training step, forward and backward in one joint graph, as PyTorch's
 * make_fx traces it (python/schedgraph/testing.py, Step): rmsnorm, q/k/v/o
 * projections, cuDNN SDPA, SiLU MLP, residuals, loss = h.float().pow(2).mean(),
 * then the autograd backward. Parallelism: FSDP over dp ranks (all_gather
 * each weight shard before use, reduce_scatter each weight gradient), tensor
 * parallelism over tp ranks with sequence parallelism (all_gather /
 * reduce_scatter of activations) or with all_reduce, a 2-D mesh of both, and
 * replicas of the mesh (world > dp * tp: all_reduce of every gradient shard,
 * as HSDP does).
 *
 * The output is streamed: memory is O(layers) small records, never a tree of
 * the graph, so 1,000,000-node graphs take seconds. Identical
 * configurations give byte-identical output.
 *
 * Mesh: rank = (replica * dp + dp_index) * tp + tp_index. Group names: "0"
 * when exactly one dimension is parallel; otherwise "1" = tp, "2" = dp,
 * "3" = replicas. The groups listed are the ones @rank belongs to.
 */
#pragma once

#include <glib.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

G_BEGIN_DECLS

#define GG_ERROR (gg_error_quark ())
GQuark gg_error_quark (void);
typedef enum {
  GG_ERROR_ARGS, /* a configuration that cannot describe a valid model */
  GG_ERROR_IO,   /* the output could not be written */
} GgError;

typedef enum {
  GG_TP_SP,        /* sequence parallel: all_gather in, reduce_scatter out */
  GG_TP_ALLREDUCE, /* Megatron without SP: all_reduce after row-parallel mm */
} GgTpMode;

typedef struct {
  int64_t layers, hidden, ffn, heads, seq;
  int64_t dp, tp;
  int64_t world; /* 0: dp * tp */
  int64_t rank;
  GgTpMode tp_mode;
  /* sp only: all_reduce the norm-weight gradients over tp (each tp rank's
   * copy only sees its sequence shard), as Megatron-SP does. Off in the
   * traced samples. */
  bool sp_norm_allreduce;
  const char *dtype;       /* "bfloat16", "float16" or "float32" */
  const char *cluster_gpu; /* "H200", "H100", "A100"; NULL: no "cluster" key */
} GgConfig;

/* The documented defaults: the tiny FSDP sample (L=2 H=256 F=688 heads=4
 * S=256 dp=2 tp=1, sp, bfloat16, H200). */
void gg_config_init (GgConfig *cfg);

/* Checks every constraint (divisibility of heads, shards and sequence by
 * tp/dp, world a multiple of dp * tp, rank inside the world, sizes in
 * range, dtype and GPU names). False with @error (GG_ERROR_ARGS) naming the
 * option. */
bool gg_config_check (const GgConfig *cfg, GError **error);

/* Collective kinds and mesh dimensions counted in GgStats. */
typedef enum { GG_COLL_AG, GG_COLL_RS, GG_COLL_AR, GG_COLL_N } GgColl;
typedef enum { GG_DIM_TP, GG_DIM_DP, GG_DIM_REP, GG_DIM_N } GgDim;

typedef struct {
  int64_t nodes;
  int64_t placeholders;
  int64_t collectives[GG_COLL_N][GG_DIM_N];
} GgStats;

/* Writes the graph for @cfg (checked first) to @out; @out NULL only counts.
 * @stats (may be NULL) receives the counts. False with @error on a bad
 * configuration or a write error. */
bool gg_write (const GgConfig *cfg, FILE *out, GgStats *stats, GError **error);

/* The collective counts the model implies, from closed formulas (tests
 * compare them with what gg_write() emits). @cfg must be valid. */
void gg_expected_collectives (const GgConfig *cfg, int64_t out[GG_COLL_N][GG_DIM_N]);

/* Node count of @cfg's graph (counting pass, no output). */
int64_t gg_count_nodes (const GgConfig *cfg);

/* The layer count whose graph has the node count nearest to @target_nodes
 * (at least 1) for @cfg's other parameters. Node counts are affine in the
 * layer count; two counting passes find the line. */
int64_t gg_layers_for_nodes (const GgConfig *cfg, int64_t target_nodes);

/* Group name of a mesh dimension under @cfg ("0", "1", "2", "3"), or NULL
 * when that dimension has size 1. */
const char *gg_group_name (const GgConfig *cfg, GgDim dim);

G_END_DECLS
