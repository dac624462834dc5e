/* bucket.h: overlap-preserving bucketing of collectives.
 *
 * Merges collectives of the same kind (all_gather, reduce_scatter,
 * all_reduce), group, dtype and reduce op into one collective over a flat
 * buffer: schedgraph.bucket_pack -> the c10d collective (kwargs
 * "schedgraph_bucket": member names) -> wait_tensor -> one
 * schedgraph.bucket_unpack per member (docs/ops.md has the exact semantics,
 * docs/bucketing.md the algorithm), or into one coalesced collective over
 * the members' own tensors whose elements their waits read (grouped:
 * no copy, one NCCL group), per bucket whichever predicts the shorter
 * step. The objective is the simulator's
 * step_us: a bucket is kept only where the augmented graph stays acyclic,
 * the predicted step does not lengthen and the predicted peak stays within
 * --max-peak-increase; the automatic mode takes the better of a greedy
 * search and FSDP2's per-layer buckets.
 */
#pragma once

#include "graph.h"
#include "ops.h"
#include "schedule.h"

G_BEGIN_DECLS

/* Default bucket byte cap (--bucket-cap): bytes a bucket's collective moves
 * per rank, as sg_node_comm_bytes() counts them. */
#define SG_BUCKET_DEFAULT_CAP_BYTES ((uint64_t)256 << 20)

#define SG_BUCKET_ERROR (sg_bucket_error_quark ())
GQuark sg_bucket_error_quark (void);
typedef enum {
  SG_BUCKET_ERROR_LAYOUT, /* members that cannot share a bucket (kind, sizes) */
  SG_BUCKET_ERROR_CYCLE,  /* a bucket that would close a cycle */
  SG_BUCKET_ERROR_SIM,    /* the simulator refused the bucketed graph */
} SgBucketError;

/* --- layout arithmetic (layout.c): pure functions, no graph ---------------- */

/* Where each member of a bucket lives in the flat buffers. For member i with
 * in_numel[i] input elements:
 *   all_gather:     pack concatenates the shards (interleave false); the
 *                   output is rank-major [r0: a0 b0 ..][r1: a1 b1 ..]...;
 *                   offset[i] = prefix sum of shard numels; unpack with k.
 *   reduce_scatter: pack interleaves chunk r of every input for r < k
 *                   (interleave true); each rank's output is [a_r b_r ..];
 *                   offset[i] = prefix sum of output numels (in/k); unpack
 *                   with k = 1.
 *   all_reduce:     concatenation; offset = prefix sum; unpack with k = 1. */
typedef struct {
  SgOpKind kind;
  int32_t k;            /* group size */
  bool interleave;      /* bucket_pack's third argument */
  int32_t unpack_k;     /* bucket_unpack's k argument */
  uint64_t pack_numel;  /* elements of the packed input buffer */
  uint64_t out_numel;   /* elements of the bucket collective's output */
} SgBucketLayout;

/* Computes the layout of @n members (@in_numel: flattened input element
 * counts) of a @kind bucket over @k ranks and each member's offset into
 * @offsets (n entries) and output element count into @out_numel (n entries:
 * what bucket_unpack's numel argument is; the unpack returns unpack_k x that).
 * False with @error when @kind cannot be bucketed or a reduce_scatter input
 * is not divisible by @k. */
bool sg_bucket_layout (SgOpKind kind, int32_t k, const uint64_t *in_numel, int32_t n,
                       uint64_t *offsets, uint64_t *out_numel, SgBucketLayout *layout,
                       GError **error);

/* Index in the packed buffer of element @e of member @i's flattened input
 * (bucket_pack's semantics, docs/ops.md). */
uint64_t sg_bucket_pack_index (const SgBucketLayout *l, const uint64_t *offsets,
                               const uint64_t *in_numel, int32_t i, uint64_t e);

/* Index in the collective's flat output of element @e of member @i's
 * unpacked value (bucket_unpack's semantics: out[r*numel + j] =
 * flat[r*(flat_numel/k) + offset + j]). */
uint64_t sg_bucket_unpack_index (const SgBucketLayout *l, const uint64_t *offsets,
                                 const uint64_t *out_numel, int32_t i, uint64_t e);

/* --- the graph rewrite (rewrite.c) ----------------------------------------- */

/* One bucket: the member collectives by id in the graph it is applied to,
 * and how it is lowered: FLAT (pack -> collective -> wait -> unpacks) or
 * GROUPED (one coalesced collective over the members' own tensors, each
 * member's wait reading its element; docs/bucketing.md "Grouped
 * buckets"); AUTO: not decided yet (the pass decides before it applies a
 * bucket; sg_bucket_apply lowers it flat). */
typedef struct {
  SgNodeId *members;
  int32_t n_members;
  SgBucketLowering lowering;
} SgBucketSpec;

/* Rewrites @g so that each of @specs (n_specs buckets, members given as
 * collective ids of @g, at least 2 each, pairwise distinct, each waited on by
 * exactly one wait_tensor that is its only user) becomes pack -> collective
 * -> wait -> unpacks, removes the members and their waits, rewires their
 * users to the unpacks and renumbers the graph into a topological order that
 * keeps everything else in its current relative order (docs/bucketing.md).
 * A GROUPED spec becomes one coalesced collective over the members' inputs
 * and one getitem per member, which the member's wait (kept in place)
 * reads; the members are removed.
 * Members' hide_start / hide_wait implicit edges are dropped (they describe
 * the unbucketed overlap); their other implicit edges move to the bucket's
 * collective and wait and stay constraints of the new order.
 * New nodes have est_src SG_COST_NONE (the pass costs them). It is one
 * rewrite of the graph rewrite API (graph.h), committed at once.
 * False with @error, and @g unchanged, when a bucket is ill-formed or
 * closes a cycle. */
bool sg_bucket_apply (SgGraph *g, const SgBucketSpec *specs, int32_t n_specs, GError **error);

/* --- the pass (bucket.c, predict.c) and its report (report.c) ------------- */

typedef struct {
  char *name;      /* the bucket collective */
  SgOpKind kind;
  char *group;     /* group name */
  SgDtype dtype;
  SgReduceOp reduce;
  uint64_t bytes;  /* as sg_node_comm_bytes counts them */
  char **members;  /* member collective names, in issue order */
  int32_t n_members;
  /* zero-copy (graph/elide.c): SgCopyReason of its pack and of its
   * unpacks (SG_COPY_ELIDED: lowered to views), unpacks elided; a grouped
   * bucket has neither */
  SgCopyReason pack_copy, unpack_copy;
  int32_t unpacks_elided;
  bool grouped; /* one coalesced collective */
} SgBucketInfo;

/* Where the buckets of a run came from. */
typedef enum {
  SG_BUCKET_FROM_NONE = 0,  /* no bucket: the unbucketed graph was best */
  SG_BUCKET_FROM_GREEDY,    /* the greedy search (bucket.c) */
  SG_BUCKET_FROM_PER_LAYER, /* the per-layer buckets (layers.c) */
} SgBucketSource;

typedef struct {
  bool ran;                  /* false for --no-bucket */
  SgBucketMode mode;
  uint64_t cap_bytes;
  int32_t collectives_before, collectives_after;
  int32_t buckets;           /* buckets formed (>= 2 members) */
  int32_t merges_accepted;   /* members the greedy joined to a bucket */
  int32_t refused_cycle, refused_cap, refused_memory;
  int32_t refused_step;      /* would have lengthened the predicted step */
  int32_t refused_budget;    /* undecided when the simulation budget ran out */
  int32_t refused_predicted; /* screened out before simulating (large graphs) */
  int32_t simulations;
  SgBucketLowering lowering; /* cfg->bucket_lowering */
  int32_t grouped;           /* buckets lowered grouped */
  int32_t lowering_flips;    /* buckets whose local lowering choice a simulation reversed */
  int32_t layers;            /* layers the per-layer analysis found (0: none) */
  SgBucketSource source;     /* the buckets applied */
  double greedy_step_us;     /* the greedy's (refined) predicted step, NAN when not run */
  double per_layer_step_us;  /* the per-layer buckets' step, NAN when none */
  double per_layer_refined_step_us; /* after refine.c's moves (auto mode), or NAN */
  uint64_t per_layer_peak_bytes;
  double exposed_before_us, step_before_us; /* the unbucketed graph */
  double exposed_after_us, step_after_us;   /* the bucketed graph */
  uint64_t peak_before_bytes, peak_after_bytes; /* predicted peak live bytes */
  SgBucketInfo *infos;       /* buckets in issue order */
  int32_t n_infos;
} SgBucketStats;

/* The pass: merges collectives as described above (cfg->bucket false: only
 * counts them; cfg->bucket_cap_bytes 0: the default cap). cfg->bucket_mode
 * AUTO applies the buckets of the greedy or of the per-layer analysis,
 * whichever predicts the shorter step (neither if no bucket shortens it),
 * within (1 + cfg->max_peak_increase) x the unbucketed predicted peak;
 * PER_LAYER applies the per-layer buckets as they are. Needs the cost
 * model (sg_estimate_costs) and a topological id order (normally the
 * scheduler's). Its statistics stay attached to @g (sg_bucket_stats). */
bool sg_bucket_pass (SgGraph *g, const SgConfig *cfg, GError **error);

/* Same, with the statistics written to @stats (clear with
 * sg_bucket_stats_clear) instead of the graph. */
bool sg_bucket_run (SgGraph *g, const SgConfig *cfg, SgBucketStats *stats, GError **error);
void sg_bucket_stats_clear (SgBucketStats *stats);

/* (transfer none) The statistics of the last sg_bucket_pass on @g, or NULL. */
const SgBucketStats *sg_bucket_stats (const SgGraph *g);

/* (transfer full) The report's "bucket" section: cap, collectives before and
 * after, buckets formed with their members, exposed_us and step_us with and
 * without bucketing (predicted by the simulator). @stats NULL: those of @g. */
cJSON *sg_bucket_report (const SgGraph *g, const SgBucketStats *stats);

G_END_DECLS
