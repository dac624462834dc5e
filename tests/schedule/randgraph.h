/* randgraph.h: random small training-step graphs as graph JSON, for the
 * exact scheduler's tests (test_exact.c).
 *
 * Shapes: every activation is [64, 64] bf16; compute nodes are mm (a GEMM:
 * it holds the SMs under the start wait) or pointwise add/relu, reading one
 * or two earlier values (mostly recent ones: chains with side branches);
 * views (t) now and then. Collectives on 1 to 3 groups: all_gathers of
 * weight shards (inputs only) whose result feeds compute, all_reduces of
 * activations whose result may feed compute, reduce_scatters of
 * activations (gradients: to the output), and now and then an all_reduce
 * chained on a reduce_scatter's result. Every cost is a `cost_us`; the
 * graph's `cluster` sets the contention and the start wait.
 */
#pragma once

#include <glib.h>

typedef enum {
  RG_PLAIN,      /* no contention, no start wait */
  RG_CONTENTION, /* the h200-sxm rates, no start wait */
  RG_START_WAIT, /* start wait 1, no contention */
  RG_BOTH,       /* the h200-sxm rates and start wait 1 */
  RG_N_CLUSTERS,
} RgCluster;

const char *rg_cluster_name (RgCluster c);

/* (transfer full) A graph JSON text with @n_compute compute nodes (mm or
 * pointwise, each with a cost) and @n_coll collectives (chained ones
 * included) over @n_groups groups (1..3), from @seed. */
char *rg_graph_json (guint32 seed, int n_compute, int n_coll, int n_groups, RgCluster cluster);
