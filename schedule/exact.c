/* exact.c: the exact scheduler for small graphs (schedgraph --exact).
 *
 * An order of least predicted step (sg_simulate's step_us, no memory
 * limit): the search of search.c over every node of the graph from an idle
 * timeline, starting from the list scheduler's order (or the input order
 * when that is better) as the best so far. Refuses graphs beyond
 * SG_EXACT_MAX_COMPUTE compute nodes with a cost or
 * SG_EXACT_MAX_COLLECTIVES collectives, and a search that outgrows its
 * state budget (both errors name the counts and limits).
 * Mirrors: exact schedulers used to judge heuristics (e.g. the ILP
 * baselines of XLA's latency-hiding scheduler studies).
 * Requires: est_us (estimate/). Invalidates: nothing (returns an order).
 */
#include <string.h>

#include "schedule-private.h"

/* States the search may expand before it gives up (deterministic). */
#define STATE_BUDGET (4 * 1000 * 1000)
#define EPS 1e-9

/* Refuses graphs beyond the limits, naming the counts. */
static bool
check_size (const SgGraph *g, GError **error)
{
  int32_t nc = 0, nk = 0;
  for (SgNodeId x = 0; x < g->n_nodes; x++) {
    const SgNode *nd = &g->nodes[x];
    SgRole r = sg_sched_role (nd);
    nc += r == SG_ROLE_COMPUTE && sg_sched_cost (nd) > 0.0;
    nk += r == SG_ROLE_COLL;
  }
  if (nc <= SG_EXACT_MAX_COMPUTE && nk <= SG_EXACT_MAX_COLLECTIVES)
    return true;
  g_set_error (error, SG_SCHEDULE_ERROR, SG_SCHEDULE_ERROR_LIMIT,
               "exact scheduler: the graph has %d compute nodes with a cost and %d "
               "collectives; the limits are %d and %d (drop --exact to use the list scheduler)",
               nc, nk, SG_EXACT_MAX_COMPUTE, SG_EXACT_MAX_COLLECTIVES);
  return false;
}

/* Step of @order by the judge. */
static bool
judge (const SgGraph *g, const SgNodeId *order, double *step, GError **error)
{
  SgSimResult r;
  if (!sg_simulate (g, order, &r, error))
    return false;
  *step = r.step_us;
  sg_sim_result_clear (&r);
  return true;
}

SgNodeId *
sg_schedule_exact (const SgGraph *g, const SgConfig *cfg, SgScheduleStats *stats,
                   GError **error)
{
  g_return_val_if_fail (g != NULL && g->n_nodes > 0, NULL);
  SgScheduleStats dummy;
  SgScheduleStats *st = stats ? stats : &dummy;
  if (!check_size (g, error))
    return NULL;
  /* the first best: the list scheduler's order, or the input order */
  g_autofree SgNodeId *best = sg_schedule_list (g, cfg, true, NULL, st, NULL, error);
  if (!best)
    return NULL;
  double list_step, input_step;
  if (!judge (g, best, &list_step, error) || !judge (g, NULL, &input_step, error))
    return NULL;
  double best_step = list_step;
  if (input_step < list_step - EPS * (1.0 + list_step)) {
    best_step = input_step;
    for (SgNodeId i = 0; i < g->n_nodes; i++)
      best[i] = i;
  }
  SgSimEngine e;
  sg_eng_init (&e, g, NULL, false); /* the judge's rates: the model's pairs */
  g_autofree SgNodeId *all = g_new (SgNodeId, (size_t)g->n_nodes);
  g_autofree int32_t *local = g_new (int32_t, (size_t)g->n_nodes);
  for (SgNodeId i = 0; i < g->n_nodes; i++) {
    all[i] = i;
    local[i] = -1;
  }
  SgSearch *S = sg_search_new (g, &e, all, g->n_nodes, local, SG_SEARCH_STEP, STATE_BUDGET);
  if (sg_search_run (S, best_step)) {
    sg_search_result (S, best);
    best_step = sg_search_value (S);
  }
  bool gave_up = sg_search_gave_up (S);
  st->exact_states = sg_search_expanded (S);
  sg_search_free (S);
  sg_eng_clear (&e);
  st->list_step_us = list_step;
  st->step_us = best_step;
  st->variant = -1;
  st->variant_name = "exact";
  if (gave_up) {
    g_set_error (error, SG_SCHEDULE_ERROR, SG_SCHEDULE_ERROR_LIMIT,
                 "exact scheduler: no proof of optimality within %d search states; "
                 "drop --exact",
                 STATE_BUDGET);
    return NULL;
  }
  double check;
  if (!judge (g, best, &check, error))
    return NULL;
  g_assert (fabs (check - best_step) <= 1e-6 * (1.0 + check));
  return g_steal_pointer (&best);
}
