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

/* A topological order of @g (data and implicit edges) that picks, among
 * ready nodes, the smallest @key (ties on id). False, naming a node on it,
 * when the edges have a cycle. */
bool sg_bucket_stable_order (SgGraph *g, const int64_t *key, SgNodeId *order, GError **error);
