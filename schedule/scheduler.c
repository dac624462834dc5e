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
 * The variants run side by side on the worker pool (cfg->pool); each
 * result is weighed, in variant order, once the variants before it are,
 * and the orders that lose are dropped then, so the choice does not depend
 * on timing and few orders are held at once.
 *
 * Requires: est_us (estimate/). Invalidates: the id order (permutes),
 * users (rebuilt), implicit edges of kind hide_start / hide_wait
 * (re-recorded). Keeps the simulation of the order it chooses with the
 * graph (kept.c), renumbered: the winning variant's run (it drove the
 * simulator's engine through that order) or, when it improved it, the
 * polish's.
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

/* Node times the variants running at once may keep (16 bytes a node
 * each) for the winner's run to be kept as the graph's simulation: past
 * it the chosen order is simulated again instead (1M nodes: 16 MB a
 * variant, which would raise the run's peak RSS from 2 threads on). */
#define TRACKED_BYTES_MAX ((size_t)16 << 20)

/* Steps within this fraction of each other count as a tie (the order
 * tried first, keep-compute-order, wins those); ties go to less exposed
 * time, then to fewer fully exposed collectives. */
#define STEP_TIE 0.0005

/* The live-bytes peak of a variant's @order, and with @sim_peak (not
 * NULL: P->full_sims) the one its simulation gives (sg_sched_sim_peak). */
static uint64_t
order_peak (const SgSchedProblem *P, const SgNodeId *order, uint64_t *sim_peak)
{
  g_autofree int32_t *pos = sg_sched_positions (P->g, order);
  if (sim_peak)
    *sim_peak = sg_sched_sim_peak (P, pos);
  return sg_graph_liveness (P->g, pos, NULL, P->root, P->alloc);
}

/* Are variant result @r's times better than @best's (and its step no
 * longer than the input order's)? */
static bool
better_times (const SgSimResult *r, double input_step, const SgSimResult *best)
{
  if (r->step_us > input_step + 1e-6)
    return false;
  double tie = STEP_TIE * MIN (r->step_us, best->step_us) + 1e-6;
  if (fabs (r->step_us - best->step_us) > tie)
    return r->step_us < best->step_us;
  if (fabs (r->exposed_us - best->exposed_us) > 1e-6)
    return r->exposed_us < best->exposed_us;
  return r->exposed < best->exposed;
}

/* Is variant result @r (of @order) better than @best? Its peak is
 * computed (into @r) only when its times would make it so, and @has_peak
 * (r->peak_bytes is computed) is false. */
static bool
better_result (const SgSchedProblem *P, SgSimResult *r, const SgNodeId *order, bool has_peak,
               uint64_t input_peak, double input_step, const SgSimResult *best)
{
  if (!better_times (r, input_step, best))
    return false;
  if (!has_peak)
    r->peak_bytes = order_peak (P, order, NULL);
  return r->peak_bytes <= MAX (P->limit, input_peak);
}

/* One variant's run, and the choice among the runs so far. */
typedef struct {
  int32_t v;
  SgScheduleStats st;
  SgSimResult res;
  SgNodeId *order;
  bool done; /* run (under Choice.lock) */
  /* P->full_sims: the peak sg_simulate gives for the order (its own
   * storage analysis, not the problem's), when its peaks are computed
   * early (peaks_early) */
  uint64_t sim_peak;
} VariantJob;

/* The variants are tasks of the worker pool; each result is taken (the
 * choice, in variant order) as soon as every earlier variant's is, so
 * the losers' orders go at once and the choice does not depend on timing. */
typedef struct {
  const SgSchedProblem *P;
  VariantJob *jobs;
  int32_t n, next; /* next: the first job not taken (under lock) */
  GMutex lock;
  /* Each variant has a thread: a candidate's peak is computed beside the
   * others' runs instead of in the choice. */
  bool early_peaks;
  uint64_t input_peak;
  double input_step;
  SgSimResult best_res; /* the best so far: its totals */
  SgNodeId *best;
  SgSimResult best_sim; /* with P->full_sims: its whole simulation (its peak below) */
  uint64_t best_sim_peak;
  SgScheduleStats *st;
} Choice;

/* Are the peaks of the run that gave @r computed beside the other runs
 * (variant_task)? Those of a run within the input order's step, when each
 * variant has a thread. */
static bool
peaks_early (const Choice *C, const SgSimResult *r)
{
  return C->early_peaks && r->step_us <= C->input_step + 1e-6;
}

/* Takes job @j's result (the next in variant order). */
static void
take_result (Choice *C, VariantJob *j)
{
  SgScheduleStats *st = C->st;
  st->n_variants++;
  if (better_result (C->P, &j->res, j->order, peaks_early (C, &j->res), C->input_peak,
                     C->input_step, &C->best_res)) {
    C->best_res.step_us = j->res.step_us;
    C->best_res.exposed_us = j->res.exposed_us;
    C->best_res.exposed = j->res.exposed;
    g_free (C->best);
    C->best = g_steal_pointer (&j->order);
    st->variant = j->v;
    st->variant_name = variants[j->v].name;
    st->scheduled_exposed_us = j->res.exposed_us;
    st->scheduled_peak_bytes = j->res.peak_bytes;
    st->n_pulled = j->st.n_pulled;
    st->n_early_waits = j->st.n_early_waits;
    st->n_forced = j->st.n_forced;
    st->n_forced_waits = j->st.n_forced_waits;
    st->n_boosted = j->st.n_boosted;
    sg_sim_result_clear (&C->best_sim);
    C->best_sim = j->res;
    memset (&j->res, 0, sizeof j->res);
    C->best_sim_peak = j->sim_peak;
  }
  g_clear_pointer (&j->order, g_free);
  sg_sim_result_clear (&j->res);
}

static void
variant_task (gpointer data, int32_t task, int32_t worker)
{
  (void)worker;
  Choice *C = data;
  VariantJob *j = &C->jobs[task];
  int32_t v = j->v;
  memset (&j->st, 0, sizeof j->st);
  j->order = sg_sched_run_variant (C->P, variants[v].window, variants[v].boost,
                                   variants[v].shield, &j->st, &j->res);
  if (peaks_early (C, &j->res))
    j->res.peak_bytes = order_peak (C->P, j->order, C->P->full_sims ? &j->sim_peak : NULL);
  g_mutex_lock (&C->lock);
  j->done = true;
  while (C->next < C->n && C->jobs[C->next].done)
    take_result (C, &C->jobs[C->next++]);
  g_mutex_unlock (&C->lock);
}

/* Moves @r's arrays to new blocks: made while the variants ran, they would
 * keep the heap's top up once the variants' arrays are freed (the
 * simulation outlives the pass). */
static void
sim_move_down (SgSimResult *r)
{
  size_t n = (size_t)r->n_nodes;
  SgCollRow *rows = g_memdup2 (r->rows, sizeof *rows * (size_t)MAX (r->n_rows, 1));
  double *start = g_memdup2 (r->node_start, sizeof (double) * n);
  double *end = g_memdup2 (r->node_end, sizeof (double) * n);
  g_free (r->rows);
  g_free (r->node_start);
  g_free (r->node_end);
  r->rows = rows;
  r->node_start = start;
  r->node_end = end;
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
                  SgScheduleStats *stats, SgSimResult *sim, GError **error)
{
  g_return_val_if_fail (g != NULL && g->n_nodes > 0, NULL);
  SgScheduleStats dummy;
  SgScheduleStats *st = stats ? stats : &dummy;
  memset (st, 0, sizeof *st);
  if (sim)
    memset (sim, 0, sizeof *sim);
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
  SgNodeId *ident = g_new (SgNodeId, (size_t)g->n_nodes);
  for (SgNodeId i = 0; i < g->n_nodes; i++)
    ident[i] = i;
  if (cfg && !cfg->reorder) {
    sg_sim_result_clear (&own);
    return ident;
  }
  /* Variants are independent (the problem is read-only): they run on the
   * worker pool, and the choice is made in variant order (variant_task),
   * so the result does not depend on timing. */
  enum { NV = G_N_ELEMENTS (variants) };
  const SgCostModel *cm = sg_graph_cost_model (g);
  bool start_wait = sg_cost_model_has_start_wait (cm);
  VariantJob jobs[NV];
  int32_t nj = 0;
  for (int32_t v = 0; v < NV; v++)
    if (variants[v].shield || start_wait)
      jobs[nj++] = (VariantJob){ .v = v };
  SgPool *pool = cfg ? cfg->pool : NULL;
  /* The winner's run is its simulation, not made again, when the node
   * times every variant running at once then keeps are few. */
  bool full_sims = sim != NULL
                   && (size_t)g->n_nodes * 2 * sizeof (double)
                              * (size_t)MIN (sg_pool_size (pool), nj)
                          <= TRACKED_BYTES_MAX;
  /* Each variant has a thread: its simulation's peak is computed beside
   * the others' runs (peaks_early), from the problem's storage bytes. */
  bool early_peaks = sg_pool_size (pool) >= nj;
  SgSchedProblem P;
  sg_sched_problem_init (&P, g, cfg, full_sims && early_peaks);
  P.full_sims = full_sims;
  st->peak_limit_bytes = P.limit;
  /* the best so far: totals only (the rows are not needed) */
  Choice C = { .P = &P, .jobs = jobs, .n = nj, .early_peaks = early_peaks,
               .input_peak = st->input_peak_bytes, .input_step = base->step_us,
               .best_res = { .step_us = base->step_us, .exposed_us = base->exposed_us,
                             .exposed = base->exposed },
               .best = ident, .st = st };
  sg_sim_result_clear (&own);
  g_mutex_init (&C.lock);
  sg_pool_run (pool, nj, variant_task, &C);
  g_mutex_clear (&C.lock);
  g_assert (C.next == nj);
  sg_pool_trim (pool);
  SgNodeId *best = C.best;
  SgSimResult best_res = C.best_res;
  /* windows of the winner improved by exact search (polish.c) */
  SgSimResult pr = best_res;
  pr.peak_bytes = st->scheduled_peak_bytes;
  st->n_polished = polish ? sg_polish (&P, pool, best, &pr) : 0;
  if (st->n_polished > 0) {
    st->scheduled_exposed_us = pr.exposed_us;
    st->scheduled_peak_bytes = pr.peak_bytes;
    sg_sim_result_clear (&C.best_sim);
    C.best_sim = pr;
  }
  if (sim) {
    *sim = C.best_sim;
    if (st->variant >= 0 && st->n_polished == 0 && P.full_sims)
      sim->peak_bytes = peaks_early (&C, &C.best_res) ? C.best_sim_peak
                                                      : sg_graph_peak_bytes (g, best);
  } else {
    sg_sim_result_clear (&C.best_sim);
  }
  sg_sched_problem_clear (&P);
  if (sim && sim->n_nodes > 0)
    sim_move_down (sim);
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
 * has one: n_nodes > 0) as the simulation of the new ids (renumbered on
 * @pool); nothing changes for the id order. */
static bool
take_order (SgGraph *g, const SgNodeId *order, SgSimResult *sim, SgPool *pool, GError **error)
{
  bool same = true;
  for (SgNodeId i = 0; i < g->n_nodes && same; i++)
    same = order[i] == i;
  if (!same && !sg_graph_permute (g, order, error)) {
    sg_sim_result_clear (sim);
    return false;
  }
  if (sim->n_nodes > 0 && !same) {
    sg_sim_result_renumber (g, order, sim, pool);
    sg_graph_keep_simulation (g, sim);
  }
  sg_sim_result_clear (sim);
  return true;
}

/* sg_schedule_order, from @base (the simulation of @g's id order, or
 * NULL); @sim (may be NULL) gets the simulation of the order when one was
 * made (sg_schedule_list). */
static SgNodeId *
schedule_order (const SgGraph *g, const SgConfig *cfg, const SgSimResult *base,
                SgSimResult *sim, GError **error)
{
  /* When bucketing follows, the polish waits for it (sg_schedule_polish_pass):
   * bucketing re-times the collectives it merges, and what it merges
   * depends on the order it is given (polishing before it made a sample's
   * plan worse). */
  bool bucket_next = cfg && cfg->bucket && !cfg->exact;
  if (sim)
    memset (sim, 0, sizeof *sim);
  return cfg && cfg->exact && cfg->reorder
             ? sg_schedule_exact (g, cfg, NULL, error)
             : sg_schedule_list (g, cfg, !bucket_next, base, NULL, sim, error);
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
  SgSimResult sim;
  g_autofree SgNodeId *order = schedule_order (g, cfg, base, &sim, error);
  if (!order || !take_order (g, order, &sim, cfg ? cfg->pool : NULL, error))
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
  int32_t improved = sg_polish (&P, cfg->pool, order, &r);
  sg_sched_problem_clear (&P);
  if (improved == 0)
    return true;
  if (!take_order (g, order, &r, cfg->pool, error))
    return false;
  return record_hiding (g, error);
}
