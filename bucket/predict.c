/* predict.c: a local screen for merges on large graphs.
 *
 * Before a proposal costs a share of a whole-graph simulation, predict
 * from the unbucketed timeline whether the merged collective can still be
 * hidden: it is issued where its earliest member was (or when its last
 * input is ready, if later), runs for the model's solo time of the merged
 * size beside the unbucketed timeline's compute, priced as the simulator
 * prices it (schedule/'s sg_beside_end: the pair rates of each kernel beside
 * it; queueing is left to the simulator; lowered flat or grouped by the
 * local rule, lower.c), and must end before the
 * compute stream reaches the first consumer of any member's wait (where the
 * rewrite puts W); the stall may not exceed what the members already
 * stalled. This mirrors the interval
 * test of PyTorch's overlap-preserving bucketer; the simulator still judges
 * every proposal that passes (docs/bucketing.md).
 * Requires: est_us, a topological order. Invalidates: nothing.
 */
#include "bucket-private.h"

struct SgBucketPredict {
  const SgGraph *g;
  const SgCostModel *cm;
  const SgSimResult *r; /* the timeline: kept with the graph, or own */
  SgSimResult own;
  int32_t *row_of; /* node id -> row, -1 */
  SgBeside *beside; /* the timeline's compute, to price a merge beside it */
};

SgBucketPredict *
sg_bucket_predict_new (const SgGraph *g, GError **error)
{
  const SgCostModel *cm = sg_graph_cost_model (g);
  g_return_val_if_fail (cm != NULL, NULL);
  SgBucketPredict *p = g_new0 (SgBucketPredict, 1);
  p->g = g;
  p->cm = cm;
  p->r = sg_graph_simulation_kept (g);
  if (!p->r && !sg_simulate (g, NULL, &p->own, error)) {
    g_free (p);
    return NULL;
  }
  if (!p->r)
    p->r = &p->own;
  p->row_of = g_new (int32_t, (size_t)g->n_nodes + 1);
  for (SgNodeId i = 0; i < g->n_nodes; i++)
    p->row_of[i] = -1;
  for (int32_t i = 0; i < p->r->n_rows; i++)
    p->row_of[p->r->rows[i].node] = i;
  p->beside = sg_beside_new (g, p->r);
  return p;
}

void
sg_bucket_predict_free (SgBucketPredict *p)
{
  if (!p)
    return;
  sg_beside_free (p->beside);
  sg_sim_result_clear (&p->own);
  g_free (p->row_of);
  g_free (p);
}

bool
sg_bucket_predict_ok (const SgBucketPredict *p, const SgNodeId *colls, const SgNodeId *waits,
                      const uint64_t *sizes, int32_t n, uint64_t bytes, SgBucketLowering lowering,
                      uint64_t cap)
{
  g_return_val_if_fail (p && n >= 1, true);
  const SgGraph *g = p->g;
  double start = INFINITY, ready = 0.0, need = INFINITY, stalled = 0.0;
  for (int32_t i = 0; i < n; i++) {
    int32_t r = p->row_of[colls[i]];
    if (r < 0)
      return true; /* not simulated: no opinion */
    const SgCollRow *row = &p->r->rows[r];
    start = MIN (start, row->issue_us);
    uint32_t k;
    SgNodeId in = sg_node_inputs (g, colls[i], &k)[0];
    ready = MAX (ready, p->r->node_end[in]);
    /* W goes right before the first consumer of any member's wait */
    uint32_t nu;
    const SgNodeId *u = sg_node_users (g, waits[i], &nu);
    need = MIN (need, p->r->node_start[nu ? u[0] : waits[i]]);
    stalled += row->exposed_us;
  }
  double us;
  sg_bucket_lower_rule_sized (g, lowering, cap, colls, sizes, n, &us);
  double end = sg_beside_end (p->beside, colls[0], bytes, MAX (start, ready), us);
  return MAX (0.0, end - need) <= stalled + 1e-6;
}
