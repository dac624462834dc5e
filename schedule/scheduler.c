/* scheduler.c: the scheduling pass (sg_schedule_reorder): runs the list
 * scheduler's variants (listsched.c), keeps the best by the simulator and
 * records the hiding relation as implicit edges.
 *
 * Mirrors: PyTorch Inductor's schedule_overlap_bucketing (compute order
 * kept, collectives pulled forward, waits deferred, bytes in flight capped)
 * and XLA's latency-hiding scheduler (a clock-driven list scheduler that
 * fills a stall with independent work). Ours differs where those are weak:
 * the clock is the simulator's own engine (one stream per group, so two
 * collectives on one communicator serialise, and overlap contention is
 * counted); memory is checked against the input order's whole live-bytes
 * profile with a range-add/range-max tree rather than a running total;
 * several deterministic variants are tried and the simulator keeps the
 * best, never worse than the input order. docs/scheduler.md has the rules.
 *
 * Requires: est_us (estimate/). Invalidates: the id order (permutes),
 * users (rebuilt), implicit edges of kind hide_start / hide_wait
 * (re-recorded). Keeps the simulation of the order it chooses with the
 * graph (kept.c): the polish's, renumbered, when the polish improved it.
 */
#include <string.h>

#include "schedule-private.h"

/* The variants tried: (stall-fill window, priority boost; a negative boost
 * ranks compute by the deadline of the collective it feeds, a positive one
 * by that collective's position; shield: run a ready non-GEMM node between
 * a collective's issue and a GEMM that would hold it, docs/scheduler.md).
 * An unshielded variant is run only when some pair of the cost model has a
 * start wait (else it is its shielded twin). keep-compute-order comes first: moving
 * compute must beat it by more than the tie band. The others were chosen
 * on the sample graphs and graphgen graphs of 8 to 80 layers
 * (docs/scheduler.md): for every one of them the best of the grid is in
 * this set. */
#define ANY_DISTANCE (INT32_MAX / 2)
static const struct {
  int32_t window, boost;
  bool shield;
  const char *name;
} variants[] = {
  { 0, 0, true, "keep-compute-order" },
  { ANY_DISTANCE, -64, true, "pull/deadline-64" },
  { ANY_DISTANCE, 16, true, "pull/feed-16" },
  { 1024, -64, true, "pull-1024/deadline-64" },
  { 128, -64, true, "pull-128/deadline-64" },
  { ANY_DISTANCE, -64, false, "pull/deadline-64/unshielded" },
  { 1024, SG_BOOST_CRITICAL_PATH, true, "critical-path" },
};

/* Steps within this fraction of each other count as a tie (the order
 * tried first, keep-compute-order, wins those); ties go to less exposed
 * time, then to fewer fully exposed collectives. */
#define STEP_TIE 0.0005

/* The live-bytes peak of a variant's @order. */
static uint64_t
order_peak (const SgSchedProblem *P, const SgNodeId *order)
{
  g_autofree int32_t *pos = sg_sched_positions (P->g, order);
  return sg_graph_liveness (P->g, pos, NULL, P->root, P->alloc);
}

/* Is variant result @r (of @order) better than @best? Its peak is
 * computed (into @r) only when its times would make it so. */
static bool
better_result (const SgSchedProblem *P, SgSimResult *r, const SgNodeId *order,
               uint64_t input_peak, double input_step, const SgSimResult *best)
{
  if (r->step_us > input_step + 1e-6)
    return false;
  double tie = STEP_TIE * MIN (r->step_us, best->step_us) + 1e-6;
  bool better;
  if (fabs (r->step_us - best->step_us) > tie)
    better = r->step_us < best->step_us;
  else if (fabs (r->exposed_us - best->exposed_us) > 1e-6)
    better = r->exposed_us < best->exposed_us;
  else
    better = r->exposed < best->exposed;
  if (!better)
    return false;
  r->peak_bytes = order_peak (P, order);
  return r->peak_bytes <= MAX (P->limit, input_peak);
}

/* Below this many nodes the variants run one after the other (threads
 * would cost more than they save). */
#define PARALLEL_MIN_NODES 20000

typedef struct {
  const SgSchedProblem *P;
  int32_t v;
  SgScheduleStats st;
  SgSimResult res;
  SgNodeId *order;
} VariantJob;

typedef struct {
  VariantJob *jobs;
  int32_t n;
  gint next; /* atomic: the next job to take */
} JobQueue;

static void
run_job (VariantJob *j)
{
  memset (&j->st, 0, sizeof j->st);
  j->order = sg_sched_run_variant (j->P, variants[j->v].window, variants[j->v].boost,
                                   variants[j->v].shield, &j->st, &j->res);
}

/* Takes jobs until none is left (thread body, also run by the caller). */
static gpointer
run_jobs (gpointer data)
{
  JobQueue *q = data;
  for (;;) {
    int32_t i = g_atomic_int_add (&q->next, 1);
    if (i >= q->n)
      return NULL;
    run_job (&q->jobs[i]);
  }
}

SgNodeId *
sg_schedule_compute (const SgGraph *g, const SgConfig *cfg, SgScheduleStats *stats,
                     GError **error)
{
  if (cfg && cfg->exact && cfg->reorder)
    return sg_schedule_exact (g, cfg, stats, error);
  return sg_schedule_list (g, cfg, true, NULL, stats, NULL, error);
}

SgNodeId *
sg_schedule_list (const SgGraph *g, const SgConfig *cfg, bool polish, const SgSimResult *base,
                  SgScheduleStats *stats, SgSimResult *polished, GError **error)
{
  g_return_val_if_fail (g != NULL && g->n_nodes > 0, NULL);
  SgScheduleStats dummy;
  SgScheduleStats *st = stats ? stats : &dummy;
  memset (st, 0, sizeof *st);
  if (polished)
    memset (polished, 0, sizeof *polished);
  if (cfg && (!(cfg->max_peak_increase >= 0.0) || cfg->prefetch_limit < 0)) {
    g_set_error (error, SG_SCHEDULE_ERROR, SG_SCHEDULE_ERROR_CONFIG,
                 "schedule: max_peak_increase must be >= 0 and prefetch_limit >= 0 "
                 "(got %g and %d)",
                 cfg->max_peak_increase, cfg->prefetch_limit);
    return NULL;
  }
  SgSimResult own = { 0 };
  if (!base && !sg_simulate (g, NULL, &own, error))
    return NULL;
  if (!base)
    base = &own;
  st->variant = -1;
  st->variant_name = "input";
  st->input_exposed_us = st->scheduled_exposed_us = base->exposed_us;
  st->input_peak_bytes = st->scheduled_peak_bytes = base->peak_bytes;
  /* the best so far: totals only (the rows are not needed) */
  SgSimResult best_res = { .step_us = base->step_us, .exposed_us = base->exposed_us,
                           .exposed = base->exposed };
  double input_step = base->step_us;
  sg_sim_result_clear (&own);
  SgNodeId *best = g_new (SgNodeId, (size_t)g->n_nodes);
  for (SgNodeId i = 0; i < g->n_nodes; i++)
    best[i] = i;
  if (cfg && !cfg->reorder)
    return best;
  SgSchedProblem P;
  sg_sched_problem_init (&P, g, cfg);
  st->peak_limit_bytes = P.limit;
  /* Variants are independent (the problem is read-only): on large graphs
   * they run on a thread pool; the choice below is made in variant order
   * either way, so the result does not depend on timing. */
  enum { NV = G_N_ELEMENTS (variants) };
  const SgCostModel *cm = sg_graph_cost_model (g);
  bool start_wait = sg_cost_model_has_start_wait (cm);
  VariantJob jobs[NV];
  int32_t nj = 0;
  for (int32_t v = 0; v < NV; v++)
    if (variants[v].shield || start_wait)
      jobs[nj++] = (VariantJob){ .P = &P, .v = v };
  JobQueue q = { jobs, nj, 0 };
  int helpers = g->n_nodes >= PARALLEL_MIN_NODES
                    ? MIN (nj, (int)g_get_num_processors ()) - 1 : 0;
  GThread *th[NV];
  int started = 0;
  for (int i = 0; i < helpers; i++) {
    th[started] = g_thread_try_new ("sg-schedule", run_jobs, &q, NULL);
    started += th[started] != NULL;
  }
  run_jobs (&q);
  for (int i = 0; i < started; i++)
    g_thread_join (th[i]);
  for (int32_t i = 0; i < nj; i++) {
    VariantJob *j = &jobs[i];
    int32_t v = j->v;
    st->n_variants++;
    if (better_result (&P, &j->res, j->order, st->input_peak_bytes, input_step, &best_res)) {
      best_res.step_us = j->res.step_us;
      best_res.exposed_us = j->res.exposed_us;
      best_res.exposed = j->res.exposed;
      memcpy (best, j->order, sizeof (SgNodeId) * (size_t)g->n_nodes);
      st->variant = v;
      st->variant_name = variants[v].name;
      st->scheduled_exposed_us = j->res.exposed_us;
      st->scheduled_peak_bytes = j->res.peak_bytes;
      st->n_pulled = j->st.n_pulled;
      st->n_early_waits = j->st.n_early_waits;
      st->n_forced = j->st.n_forced;
      st->n_forced_waits = j->st.n_forced_waits;
      st->n_boosted = j->st.n_boosted;
    }
    g_free (j->order);
    sg_sim_result_clear (&j->res);
  }
  /* windows of the winner improved by exact search (polish.c) */
  SgSimResult pr = best_res;
  pr.peak_bytes = st->scheduled_peak_bytes;
  st->n_polished = polish ? sg_polish (&P, best, &pr) : 0;
  if (st->n_polished > 0) {
    st->scheduled_exposed_us = pr.exposed_us;
    st->scheduled_peak_bytes = pr.peak_bytes;
    if (polished)
      *polished = pr;
    else
      sg_sim_result_clear (&pr);
  }
  sg_sched_problem_clear (&P);
  return best;
}

/* Records the hiding relation of the graph's order as implicit edges
 * (hide_start, hide_wait; the others are kept), from the simulation kept
 * with the graph. */
static bool
record_hiding (SgGraph *g, GError **error)
{
  const SgSimResult *r = sg_graph_simulation (g, error);
  if (!r)
    return false;
  sg_implicit_edges_clear (g, SG_EDGE_HIDE_START);
  sg_implicit_edges_clear (g, SG_EDGE_HIDE_WAIT);
  for (int32_t i = 0; i < r->n_rows; i++) {
    const SgCollRow *row = &r->rows[i];
    if (row->hidden_by == SG_NO_NODE)
      continue;
    sg_implicit_edge_add (g, row->node, row->hidden_by, SG_EDGE_HIDE_START);
    if (row->wait != SG_NO_NODE)
      sg_implicit_edge_add (g, row->last_hiding, row->wait, SG_EDGE_HIDE_WAIT);
  }
  return true;
}

/* Puts the graph in @order, keeping @sim (the simulation of @order, when it
 * has one: n_nodes > 0) as the simulation of the new ids; nothing changes
 * for the id order. */
static bool
take_order (SgGraph *g, const SgNodeId *order, SgSimResult *sim, GError **error)
{
  bool same = true;
  for (SgNodeId i = 0; i < g->n_nodes && same; i++)
    same = order[i] == i;
  if (!same && !sg_graph_permute (g, order, error)) {
    sg_sim_result_clear (sim);
    return false;
  }
  if (sim->n_nodes > 0 && !same) {
    sg_sim_result_renumber (g, order, sim);
    sg_graph_keep_simulation (g, sim);
  }
  sg_sim_result_clear (sim);
  return true;
}

/* sg_schedule_order, from @base (the simulation of @g's id order, or
 * NULL); @polished (may be NULL) gets the polish's simulation of the order
 * when it polished (sg_schedule_list). */
static SgNodeId *
schedule_order (const SgGraph *g, const SgConfig *cfg, const SgSimResult *base,
                SgSimResult *polished, GError **error)
{
  /* When bucketing follows, the polish waits for it (sg_schedule_polish_pass):
   * bucketing re-times the collectives it merges, and what it merges
   * depends on the order it is given (polishing before it made a sample's
   * plan worse). */
  bool bucket_next = cfg && cfg->bucket && !cfg->exact;
  if (polished)
    memset (polished, 0, sizeof *polished);
  return cfg && cfg->exact && cfg->reorder
             ? sg_schedule_exact (g, cfg, NULL, error)
             : sg_schedule_list (g, cfg, !bucket_next, base, NULL, polished, error);
}

SgNodeId *
sg_schedule_order (const SgGraph *g, const SgConfig *cfg, GError **error)
{
  return schedule_order (g, cfg, sg_graph_simulation_kept (g), NULL, error);
}

bool
sg_schedule_reorder (SgGraph *g, const SgConfig *cfg, GError **error)
{
  g_return_val_if_fail (g != NULL, false);
  if (g->n_nodes == 0)
    return true;
  const SgSimResult *base = sg_graph_simulation (g, error);
  if (!base)
    return false;
  SgSimResult polished;
  g_autofree SgNodeId *order = schedule_order (g, cfg, base, &polished, error);
  if (!order || !take_order (g, order, &polished, error))
    return false;
  return record_hiding (g, error);
}

bool
sg_schedule_polish_pass (SgGraph *g, const SgConfig *cfg, GError **error)
{
  g_return_val_if_fail (g != NULL, false);
  /* without bucketing (or with --exact) the schedule pass polished */
  if (g->n_nodes == 0 || !cfg || !cfg->reorder || !cfg->bucket || cfg->exact)
    return true;
  const SgSimResult *full = sg_graph_simulation (g, error);
  if (!full)
    return false;
  /* sg_polish wants the totals only (it replaces them by the simulation of
   * the order it takes, when it improves) */
  SgSimResult r = { .step_us = full->step_us, .peak_bytes = full->peak_bytes };
  SgSchedProblem P;
  sg_sched_problem_init_basic (&P, g, cfg);
  g_autofree SgNodeId *order = g_new (SgNodeId, (size_t)g->n_nodes);
  for (SgNodeId i = 0; i < g->n_nodes; i++)
    order[i] = i;
  int32_t improved = sg_polish (&P, order, &r);
  sg_sched_problem_clear (&P);
  if (improved == 0)
    return true;
  if (!take_order (g, order, &r, error))
    return false;
  return record_hiding (g, error);
}
