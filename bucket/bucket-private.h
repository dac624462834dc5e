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

/* A topological order of the nodes of @g that @keep marks (NULL: all; no
 * kept node may read a dropped one), data and implicit edges, that picks
 * among ready nodes the smallest @key (ties on id); *n_order nodes. False,
 * naming a node on it, when the edges have a cycle. */
bool sg_bucket_stable_order (SgGraph *g, const int64_t *key, const bool *keep, SgNodeId *order,
                             int32_t *n_order, GError **error);

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
