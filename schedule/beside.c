/* beside.c: a collective priced beside a simulated order's compute.
 *
 * bucket/'s screen asks, for a merge, when a collective that is not in the
 * simulated order would end if it started at some time: this walks the
 * order's compute intervals with the same pair rates the simulator's engine
 * integrates (estimate/'s contention table, the global factors without a
 * profile), leaving out what only a whole simulation knows (queueing on the
 * group's stream, start waits, the compute slowing down in turn).
 * Mirrors: the interval test of PyTorch's overlap-preserving bucketer.
 * Requires: a simulated order with node times, the graph's cost model.
 * Invalidates: nothing.
 */
#include <string.h>

#include "schedule-private.h"

typedef struct {
  double start, end;
  int32_t slot;
} Span;

struct SgBeside {
  const SgGraph *g;
  const SgCostModel *cm;
  Span *spans; /* compute kernels, by start time */
  int32_t n;
  SgPairRates *rates; /* scratch: one collective's pairs */
};

static int
span_cmp (const void *x, const void *y)
{
  const Span *a = x, *b = y;
  return (a->start > b->start) - (a->start < b->start);
}

SgBeside *
sg_beside_new (const SgGraph *g, const SgSimResult *r)
{
  g_return_val_if_fail (g && r && r->node_start && r->node_end && r->n_nodes == g->n_nodes,
                        NULL);
  SgBeside *b = g_new0 (SgBeside, 1);
  b->g = g;
  b->cm = sg_graph_cost_model (g);
  b->spans = g_new (Span, (size_t)MAX (g->n_nodes, 1));
  for (SgNodeId i = 0; i < g->n_nodes; i++) {
    const double w = sg_sched_cost (&g->nodes[i]);
    if (sg_sched_role (&g->nodes[i]) != SG_ROLE_COMPUTE || !(w > 0.0))
      continue;
    b->spans[b->n++] = (Span){ r->node_start[i], r->node_end[i],
                               sg_cost_contention_slot (b->cm, g, i, w) };
  }
  /* one compute stream: spans do not overlap; equal starts only for empty ones */
  qsort (b->spans, (size_t)b->n, sizeof *b->spans, span_cmp);
  b->rates = g_new (SgPairRates, (size_t)sg_cost_contention_slots (b->cm));
  return b;
}

void
sg_beside_free (SgBeside *b)
{
  if (!b)
    return;
  g_free (b->spans);
  g_free (b->rates);
  g_free (b);
}

double
sg_beside_end (const SgBeside *b, SgNodeId like, uint64_t bytes, double t0, double us)
{
  g_return_val_if_fail (b && like >= 0 && like < b->g->n_nodes, t0 + us);
  const SgNode *n = &b->g->nodes[like];
  const int32_t ns = sg_cost_contention_slots (b->cm);
  if (b->cm) {
    sg_cost_contention_rates (b->cm, sg_cost_collective_transport (b->cm, b->g, like), n->kind,
                              bytes, n->group_size,
                              sg_cost_group_nodes (b->cm, &b->g->groups[n->group]), b->rates);
  } else {
    static const SgContention none = { 1.0, 1.0, 1.0 };
    for (int32_t s = 0; s < ns; s++)
      sg_contention_global_rates (&none, 0.0, n->kind, (SgKernelClass)s, &b->rates[s]);
  }
  bool uniform = true;
  for (int32_t s = 1; s < ns; s++)
    uniform &= b->rates[s].comm_x == b->rates[0].comm_x;
  if (uniform)
    return t0 + us * b->rates[0].comm_x;
  /* the first span that ends after t0 */
  int32_t lo = 0, hi = b->n;
  while (lo < hi) {
    const int32_t mid = (lo + hi) / 2;
    if (b->spans[mid].end <= t0)
      lo = mid + 1;
    else
      hi = mid;
  }
  double t = t0, left = us;
  for (int32_t i = lo; i < b->n; i++) {
    const Span *s = &b->spans[i];
    if (s->start > t) { /* a gap: full speed */
      if (s->start - t >= left)
        return t + left;
      left -= s->start - t;
      t = s->start;
    }
    const double x = b->rates[s->slot].comm_x;
    if (t + left * x <= s->end)
      return t + left * x;
    left -= (s->end - t) / x;
    t = s->end;
  }
  return t + left;
}
