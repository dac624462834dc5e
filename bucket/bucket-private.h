/* bucket-private.h: helpers shared by the files of bucket/ (not public). */
#pragma once

#include "bucket.h"
#include "estimate.h" /* IWYU: bucket.c costs new nodes */

/* kwargs key of a bucket collective listing its members' names. */
#define SG_BUCKET_KWARG "schedgraph_bucket"

/* True when collective @c can join a bucket: all_gather, reduce_scatter or
 * all_reduce with one tensor input and exactly one user, its wait (stored
 * in *wait). Users must be fresh (sg_graph_fill_users). */
bool sg_bucket_member_check (const SgGraph *g, SgNodeId c, SgNodeId *wait, GError **error);

/* bucket.c: costs every node of @g without a cost source (the new nodes
 * of a rewrite) with the graph's cost model. */
void sg_bucket_cost_new_nodes (SgGraph *g);

/* predict.c: a screen of merges from the unbucketed timeline (large
 * graphs). NULL with @error when the graph cannot be simulated. */
typedef struct SgBucketPredict SgBucketPredict;
SgBucketPredict *sg_bucket_predict_new (const SgGraph *g, GError **error);
void sg_bucket_predict_free (SgBucketPredict *p);
/* True unless the merged collective of @colls (with their @waits, @n
 * members, @bytes in all) is predicted to stall the compute stream longer
 * than the members did. */
bool sg_bucket_predict_ok (const SgBucketPredict *p, const SgNodeId *colls,
                           const SgNodeId *waits, int32_t n, uint64_t bytes);

/* report.c: fills st->infos (and n_infos) from the bucket collectives of
 * @g, in id order, reading their schedgraph_bucket kwargs. */
void sg_bucket_collect_infos (const SgGraph *g, SgBucketStats *st);

/* rewrite.c: what a bucket's new nodes hold, from its members alone. */
typedef struct {
  int32_t n;            /* members */
  SgOpKind kind;
  int32_t group, k;     /* group index and size */
  SgReduceOp reduce;
  SgDtype dtype;
  SgBucketLayout l;
  uint64_t *in_numel, *offsets, *out_numel; /* n each (sg_bucket_layout) */
  SgNodeId *inputs;     /* each member's input, n */
} SgBucketPlan;

/* Fills @p for @spec (members with their @waits): the layout and the
 * checks the rewrite makes before it appends anything. False with @error
 * (and @p cleared) when the members cannot share a bucket. */
bool sg_bucket_plan_make (const SgGraph *g, const SgBucketSpec *spec, const SgNodeId *waits,
                          SgBucketPlan *p, GError **error);
void sg_bucket_plan_clear (SgBucketPlan *p);

/* sg_bucket_apply's checks of @specs on @g (users refreshed): at least two
 * members each, ids in range, no member twice (@taken, n_nodes entries,
 * zeroed by the caller, marks them), each member bucketable. Fills @waits
 * (one per member, in spec order) and per spec the earliest member id
 * (@start_pos) and the first consumer of any member's wait (@use_pos). */
bool sg_bucket_specs_check (SgGraph *g, const SgBucketSpec *specs, int32_t n_specs, bool *taken,
                            SgNodeId *waits, int64_t *start_pos, int64_t *use_pos,
                            GError **error);

/* rewrite.c: the graph sg_bucket_apply would make from @rw's graph and
 * @specs, as a trial graph of the rewrite API (sg_rewrite_trial: the same
 * code as the commit, nothing of the graph copied or changed). @rw is
 * reset first: a pass keeps one for all its trials (sg_rewrite_new of the
 * graph). New nodes have est_src SG_COST_NONE. Free it with
 * sg_graph_free() before the next trial or before the graph changes. NULL
 * with @error where sg_bucket_apply fails (an ill-formed bucket, a cycle). */
SgGraph *sg_bucket_trial (SgRewrite *rw, const SgBucketSpec *specs, int32_t n_specs,
                          GError **error);
