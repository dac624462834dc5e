/* kept.c: the simulation of the graph's current order, kept with the graph
 * (sg_graph_keep) so that each order is simulated once: the driver's input
 * simulation is the schedule pass's base, the schedule and polish passes'
 * simulations of the order they choose record the hiding relation and are
 * the next pass's base, the last one goes to the summary, the report and
 * codegen. Any change of the graph drops it (sg_graph_changed); a
 * simulation made before sg_graph_permute is renumbered to the new ids
 * instead of being made again (the bound's terms beside the ids, on the
 * worker pool).
 * sg_graph_simulation_refined adds the bound's window term (window.c),
 * running a simulation it has to make beside the term in one pool job.
 * With the validator on, the pass runner checks after every pass that the
 * kept simulation equals a fresh one (sim_check).
 * Requires: est_us (estimate/). Invalidates: nothing.
 */
#include <string.h>

#include "schedule-private.h"

static void
sim_free (gpointer p)
{
  sg_sim_result_clear (p);
  g_free (p);
}

static bool sim_check (const SgGraph *g, gconstpointer data, GError **error);

static const SgKeptClass sim_class = { "simulation", sim_free, sim_check };

/* Which field of @a differs from @b (fresh), or NULL. Everything the
 * simulation of an order determines; the bound's window term is the
 * driver's (sg_lower_bound_refine) and is left out. */
static const char *
sim_differs (const SgSimResult *a, const SgSimResult *b)
{
  if (a->step_us != b->step_us || a->compute_us != b->compute_us || a->comm_us != b->comm_us)
    return "step, compute or comm time";
  if (a->exposed_us != b->exposed_us || a->hidden != b->hidden || a->partial != b->partial
      || a->exposed != b->exposed)
    return "exposure";
  if (a->peak_bytes != b->peak_bytes)
    return "peak bytes";
  if (a->compute_busy_us != b->compute_busy_us || a->critical_path_us != b->critical_path_us)
    return "compute busy time or critical path";
  const SgLowerBound *p = &a->bound, *q = &b->bound;
  if (p->compute_us != q->compute_us || p->comm_stream_us != q->comm_stream_us
      || p->critical_path_us != q->critical_path_us || p->overlap_us != q->overlap_us)
    return "lower bound";
  if (a->n_rows != b->n_rows || memcmp (a->rows, b->rows, sizeof (SgCollRow) * (size_t)a->n_rows))
    return "collective rows";
  if (a->n_nodes != b->n_nodes
      || memcmp (a->node_start, b->node_start, sizeof (double) * (size_t)a->n_nodes)
      || memcmp (a->node_end, b->node_end, sizeof (double) * (size_t)a->n_nodes))
    return "node times";
  return NULL;
}

static bool
sim_check (const SgGraph *g, gconstpointer data, GError **error)
{
  SgSimResult fresh;
  if (!sg_simulate (g, NULL, &fresh, error))
    return false;
  const char *what = sim_differs (data, &fresh);
  sg_sim_result_clear (&fresh);
  if (what)
    g_set_error (error, SG_SCHEDULE_ERROR, SG_SCHEDULE_ERROR_ORDER,
                 "the simulation kept with the graph is stale (%s: not what a fresh one gives)",
                 what);
  return what == NULL;
}

SgSimResult *
sg_graph_simulation (SgGraph *g, GError **error)
{
  g_return_val_if_fail (g != NULL, NULL);
  SgSimResult *r = sg_graph_kept (g, &sim_class);
  if (r)
    return r;
  r = g_new0 (SgSimResult, 1);
  if (!sg_simulate (g, NULL, r, error)) {
    g_free (r);
    return NULL;
  }
  sg_graph_keep (g, r, &sim_class);
  return r;
}

/* The window term and the simulation it does not need, in one job. */
typedef struct {
  const SgGraph *g;
  SgPool *pool;
  double window_us;
  SgSimResult *r;
  GError *error;
  bool ok;
} Refined;

/* Task 0: the window term (its stages spread over the idle workers);
 * task 1: the simulation. */
static void
refined_task (gpointer data, int32_t task, int32_t worker)
{
  (void)worker;
  Refined *s = data;
  if (task == 0)
    s->window_us = sg_bound_window_term (s->g, s->pool);
  else
    s->ok = sg_simulate (s->g, NULL, s->r, &s->error);
}

SgSimResult *
sg_graph_simulation_refined (SgGraph *g, SgPool *pool, GError **error)
{
  g_return_val_if_fail (g != NULL, NULL);
  SgSimResult *r = sg_graph_kept (g, &sim_class);
  if (r) {
    sg_lower_bound_refine_pool (g, r, pool);
    return r;
  }
  r = g_new0 (SgSimResult, 1);
  Refined s = { .g = g, .pool = pool, .r = r };
  sg_pool_run (pool, 2, refined_task, &s);
  if (!s.ok) {
    g_propagate_error (error, s.error);
    g_free (r);
    return NULL;
  }
  sg_bound_set_window (r, s.window_us);
  sg_graph_keep (g, r, &sim_class);
  return r;
}

const SgSimResult *
sg_graph_simulation_kept (const SgGraph *g)
{
  g_return_val_if_fail (g != NULL, NULL);
  return sg_graph_kept (g, &sim_class);
}

void
sg_graph_keep_simulation (SgGraph *g, SgSimResult *r)
{
  g_return_if_fail (g != NULL && r != NULL && r->n_nodes == g->n_nodes);
  SgSimResult *k = g_new (SgSimResult, 1);
  *k = *r;
  memset (r, 0, sizeof *r);
  sg_graph_keep (g, k, &sim_class);
}

static SgNodeId
renumbered (const int32_t *new_id, SgNodeId x)
{
  return x == SG_NO_NODE ? x : new_id[x];
}

/* What sg_sim_result_renumber's tasks read and write. */
typedef struct {
  const SgGraph *g;
  const SgNodeId *order;
  SgSimResult *r;
} Renumber;

/* Task 0: the bound's terms on the new ids (the rates engine is all its
 * sums read); task 1: the rows' ids and the node times renumbered. Each
 * writes its own fields of the result. */
static void
renumber_task (gpointer data, int32_t task, int32_t worker)
{
  (void)worker;
  const Renumber *x = data;
  const SgGraph *g = x->g;
  SgSimResult *r = x->r;
  if (task == 0) {
    /* The bound's sums run in id order: made again on the new ids, they
     * are what a simulation of @g itself gives. */
    SgSimEngine e;
    sg_eng_init_rates (&e, g, NULL);
    sg_bound_basic (g, &e, &r->bound);
    sg_eng_clear (&e);
    return;
  }
  int32_t n = g->n_nodes;
  g_autofree int32_t *new_id = sg_sched_positions (g, x->order);
  for (int32_t i = 0; i < r->n_rows; i++) {
    SgCollRow *row = &r->rows[i];
    row->node = renumbered (new_id, row->node);
    row->wait = renumbered (new_id, row->wait);
    row->hidden_by = renumbered (new_id, row->hidden_by);
    row->last_hiding = renumbered (new_id, row->last_hiding);
  }
  double *times[] = { r->node_start, r->node_end };
  g_autofree double *tmp = g_new (double, (size_t)MAX (n, 1));
  for (size_t k = 0; k < G_N_ELEMENTS (times); k++) {
    if (!times[k])
      continue;
    for (int32_t i = 0; i < n; i++)
      tmp[i] = times[k][x->order[i]];
    memcpy (times[k], tmp, sizeof (double) * (size_t)n);
  }
}

void
sg_sim_result_renumber (const SgGraph *g, const SgNodeId *order, SgSimResult *r, SgPool *pool)
{
  g_return_if_fail (g != NULL && order != NULL && r != NULL && r->n_nodes == g->n_nodes);
  Renumber x = { g, order, r };
  sg_pool_run (pool, 2, renumber_task, &x);
  r->critical_path_us = r->bound.critical_path_us;
  r->lower_bound_us = r->bound.lower_bound_us;
}
