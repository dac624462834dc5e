/* window.c: the window term of the lower bound (sg_lower_bound_refine),
 * on the pool.
 *
 * Per collective, the compute that must run before it can start (head:
 * the work of its ancestors, reach.c, or its longest input path) and after
 * it ends (tail: its descendants', or its longest output path); bound.c's
 * windows (sg_bound_windows) over them give the term. A refine spends at
 * most SUM_BUDGET word operations on the reach sums.
 *
 * The refine runs as stages, each one job of the pool (graph/pool.c; a
 * job started inside a task spreads over the idle workers too, kept.c's
 * simulation beside the term among them): per range of nodes their costs
 * and counts; per range the inputs' CSR and the collectives; the longest
 * paths (one task each way), the rates (each distinct key's made once, on
 * an engine of rates alone) and the chunks' passes (two per chunk, heads
 * and tails, each on its worker's masks); then the jobs, and the windows'
 * two sorts and their two sweeps side by side (bound.c). The budget is spent as one thread spends it: the chunks
 * whose passes alone could fit are taken in turn (a chunk is skipped once
 * the chunks done before it show that one thread would have stopped),
 * each pass counts the set bits it flushes, and the jobs replay the budget
 * in chunk order and drop the chunks past the first that one thread would
 * not have started. Results never depend on the thread count.
 * Requires: est_us (estimate/). Invalidates: nothing.
 */
#include <string.h>

#include "schedule-private.h"

/* Word operations the reach sums may take per refine. Every collective of
 * the 36K graph fits (12.4M for the input order); at 1M nodes the first
 * two chunks do (about 8M each). */
#define SUM_BUDGET ((int64_t)16 * 1000 * 1000)

/* Nodes per range of the first tasks (the last may hold fewer). */
#define RANGE_NODES 16384

typedef struct {
  const SgGraph *g;
  int32_t n_ranges;
  /* per range: inputs and collectives counted (by the scans; after them,
   * the first of each it holds), a cost the simulator refuses
   * (sg_sim_cost_ok) seen */
  uint32_t *range_in;
  int32_t *range_colls;
  bool *range_bad;
  bool bad_costs; /* the simulation fails: no windows (they need finite paths) */
  SgReachCsr c;
  uint32_t adj_cap;
  double *cost, *fwd, *after;
  SgNodeId *colls;
  int32_t nc;
  double compute_us; /* compute work summed in id order, as sg_bound_basic sums it */
  SgBoundRates R;
  SgReach reach;      /* the chunks' passes */
  SgReachMask **mask; /* per worker */
  double *head, *tail;
  SgBoundJob *jobs;
  SgBoundScratch ws;
  double seed; /* a window's value (sg_bound_windows_seed) */
  double best[2]; /* the tail and head sweeps' maxima */
} Refine;

static void
scan_range (Refine *f, int32_t r)
{
  SgNodeId a, b;
  sg_range_of (r, RANGE_NODES, f->c.n, &a, &b);
  uint32_t ins = 0;
  int32_t colls = 0;
  bool bad = false;
  for (SgNodeId x = a; x < b; x++) {
    const SgNode *nd = &f->g->nodes[x];
    bad |= !sg_sim_cost_ok (nd->est_us);
    SgRole role = sg_sched_role (nd);
    double c = sg_sched_cost (nd);
    f->cost[x] = c;
    f->c.work[x] = role == SG_ROLE_COMPUTE ? c : 0.0;
    /* the sweeps' arrays first touched here, by ranges on the pool (the
     * kernel zeroes a page at its first touch); the backward sweep starts
     * from zero */
    f->fwd[x] = f->after[x] = 0.0;
    ins += nd->n_in;
    colls += sg_bound_coll (nd, role);
  }
  f->range_in[r] = ins;
  f->range_colls[r] = colls;
  f->range_bad[r] = bad;
}

static void
fill_range (Refine *f, int32_t r)
{
  SgNodeId a, b;
  sg_range_of (r, RANGE_NODES, f->c.n, &a, &b);
  uint32_t at = f->range_in[r];
  int32_t k = f->range_colls[r];
  const SgGraph *g = f->g;
  if (r == 0)
    f->c.first[0] = 0;
  for (SgNodeId x = a; x < b; x++) {
    uint32_t n_in;
    const SgNodeId *ins = sg_node_inputs (g, x, &n_in);
    memcpy (&f->c.adj[at], ins, sizeof (SgNodeId) * n_in);
    at += n_in;
    f->c.first[x + 1] = at;
    const SgNode *nd = &g->nodes[x];
    if (sg_bound_coll (nd, sg_sched_role (nd)))
      f->colls[k++] = x;
  }
}

static void
fwd_paths (Refine *f)
{
  const SgReachCsr *c = &f->c;
  double compute = 0.0;
  for (SgNodeId x = 0; x < c->n; x++) {
    double t = 0.0;
    for (uint32_t a = c->first[x]; a < c->first[x + 1]; a++)
      t = MAX (t, f->fwd[c->adj[a]]);
    f->fwd[x] = t + f->cost[x];
    if (c->work[x] != 0.0)
      compute += c->work[x];
  }
  f->compute_us = compute;
}

static void
bwd_paths (Refine *f)
{
  const SgReachCsr *c = &f->c;
  for (SgNodeId x = c->n - 1; x >= 0; x--) {
    double bwd = f->after[x] + f->cost[x];
    for (uint32_t a = c->first[x]; a < c->first[x + 1]; a++)
      f->after[c->adj[a]] = MAX (f->after[c->adj[a]], bwd);
  }
}

/* The chunks one thread would have run (the budget replayed) and the
 * jobs of the windows. */
static void
jobs (Refine *f)
{
  sg_reach_end (&f->reach);
  for (int32_t i = 0; i < f->nc; i++) {
    SgNodeId c = f->colls[i];
    /* a sum past the budget is -1: the path's head or tail stays */
    f->jobs[i] = (SgBoundJob){ MAX (f->fwd[c] - f->cost[c], f->head[i]),
                               MAX (f->after[c], f->tail[i]), f->cost[c],
                               sg_bound_slot (&f->g->nodes[c]) };
  }
}

/* The ranges' counts summed, each range's turned into where its own
 * start. */
static void
after_scan (Refine *f)
{
  uint32_t ins = 0;
  int32_t nc = 0;
  for (int32_t r = 0; r < f->n_ranges; r++) {
    uint32_t r_in = f->range_in[r];
    int32_t r_colls = f->range_colls[r];
    f->range_in[r] = ins;
    f->range_colls[r] = nc;
    ins += r_in;
    nc += r_colls;
    f->bad_costs |= f->range_bad[r];
  }
  f->nc = nc;
  if (ins > f->adj_cap) /* the graph's inputs array bounds them (never here) */
    f->c.adj = g_renew (SgNodeId, f->c.adj, (size_t)ins + 1);
}

/* The stages, one pool job each (tasks in index order on one thread). */

/* Per range: its costs, work, input counts and collectives counted. */
static void
scan_task (gpointer data, int32_t task, int32_t worker)
{
  (void)worker;
  scan_range (data, task);
}

/* Per range: its inputs' CSR and its collectives. */
static void
fill_task (gpointer data, int32_t task, int32_t worker)
{
  (void)worker;
  fill_range (data, task);
}

/* The longest paths to each node's end (with the compute summed) and from
 * each node's start, the bound's rates, then the chunks' passes. */
static void
parts_task (gpointer data, int32_t task, int32_t worker)
{
  Refine *f = data;
  switch (task) {
  case 0: fwd_paths (f); break;
  case 1: bwd_paths (f); break;
  case 2: { /* on an engine of rates alone: each distinct key's made once */
    SgSimEngine e;
    sg_eng_init_rates (&e, f->g, NULL);
    sg_bound_rates_init (&f->R, &e, f->colls, f->nc);
    sg_eng_clear (&e);
    break;
  }
  default: sg_reach_pass (&f->reach, task - 3, f->mask[worker]); break;
  }
}

/* The jobs by tail (with the tail ranks and the seed) and by head. */
static void
sort_task (gpointer data, int32_t task, int32_t worker)
{
  (void)worker;
  Refine *f = data;
  sg_bound_windows_sort (f->jobs, f->nc, task == 1, &f->ws);
  if (task == 1)
    return;
  sg_bound_windows_ranks (f->nc, &f->ws);
  f->seed = sg_bound_windows_seed (&f->R, f->compute_us, f->jobs, f->nc, &f->ws);
}

/* The (0, t) windows and the (h, *) windows (apart parts of the scratch). */
static void
sweep_task (gpointer data, int32_t task, int32_t worker)
{
  (void)worker;
  Refine *f = data;
  f->best[task] = task == 0
                  ? sg_bound_tail_windows (&f->R, f->compute_us, f->jobs, f->nc, &f->ws, f->seed)
                  : sg_bound_head_windows (&f->R, f->compute_us, f->jobs, f->nc, &f->ws, f->seed);
}

/* The window term of @g on @pool (NULL: this thread) within @budget, its
 * windows taking the graph's compute, summed in id order as sg_bound_basic
 * sums it (a simulation's bound.compute_us). */
static double
window_term (const SgGraph *g, SgPool *pool, int64_t budget)
{
  int32_t n = g->n_nodes;
  Refine f = { .g = g };
  f.n_ranges = sg_ranges (n, RANGE_NODES);
  int32_t n_workers = sg_pool_size (pool);
  f.c = (SgReachCsr){ .n = n, .first = g_new (uint32_t, (size_t)n + 1),
                      .work = g_new (double, (size_t)MAX (n, 1)) };
  f.cost = g_new (double, (size_t)MAX (n, 1));
  f.fwd = g_new (double, (size_t)MAX (n, 1));
  f.after = g_new (double, (size_t)MAX (n, 1));
  f.range_in = g_new (uint32_t, (size_t)f.n_ranges);
  f.range_colls = g_new (int32_t, (size_t)f.n_ranges);
  f.range_bad = g_new (bool, (size_t)f.n_ranges);
  /* What the tasks fill, sized here by what bounds it (a collective per
   * node at most; pages never written cost nothing): made by this thread,
   * nothing stays in a worker thread's malloc arena. */
  f.adj_cap = g->inputs ? g->inputs->len : 0;
  f.c.adj = g_new (SgNodeId, (size_t)f.adj_cap + 1);
  f.colls = g_new (SgNodeId, (size_t)MAX (n, 1));
  f.head = g_new (double, (size_t)MAX (n, 1));
  f.tail = g_new (double, (size_t)MAX (n, 1));
  f.jobs = g_new (SgBoundJob, (size_t)MAX (n, 1));
  sg_bound_windows_reserve (&f.ws, MAX (n, 1), 2 * MAX (g->n_groups, 1));
  f.mask = g_new (SgReachMask *, (size_t)n_workers);
  for (int32_t w = 0; w < n_workers; w++)
    f.mask[w] = g_new (SgReachMask, (size_t)MAX (n, 1));
  sg_pool_run (pool, f.n_ranges, scan_task, &f);
  after_scan (&f); /* sizes what the fills write */
  sg_pool_run (pool, f.n_ranges, fill_task, &f);
  sg_reach_begin (&f.reach, &f.c, f.colls, f.nc, budget, f.head, f.tail);
  sg_pool_run (pool, 3 + 2 * f.reach.n_chunks, parts_task, &f);
  jobs (&f);
  if (f.nc > 0 && f.R.n_groups > 0 && !f.bad_costs) {
    sg_pool_run (pool, 2, sort_task, &f);
    sg_pool_run (pool, 2, sweep_task, &f);
  }
  for (int32_t w = 0; w < n_workers; w++)
    g_free (f.mask[w]);
  g_free (f.mask);
  sg_reach_csr_clear (&f.c);
  g_free (f.cost);
  g_free (f.fwd);
  g_free (f.after);
  g_free (f.range_in);
  g_free (f.range_colls);
  g_free (f.range_bad);
  g_free (f.colls);
  g_free (f.head);
  g_free (f.tail);
  g_free (f.jobs);
  sg_bound_rates_clear (&f.R);
  sg_bound_scratch_clear (&f.ws);
  /* the larger of the two sweeps' maxima: sg_bound_windows's value */
  return MAX (f.best[0], f.best[1]);
}

double
sg_bound_window_term (const SgGraph *g, SgPool *pool)
{
  return window_term (g, pool, SUM_BUDGET);
}

void
sg_bound_set_window (SgSimResult *r, double window_us)
{
  SgLowerBound *b = &r->bound;
  b->window_us = window_us;
  b->refined = true;
  sg_bound_finish (b);
  r->lower_bound_us = b->lower_bound_us;
}

void
sg_bound_refine_within (const SgGraph *g, SgSimResult *r, int64_t budget, SgPool *pool)
{
  g_return_if_fail (g != NULL && r != NULL);
  if (!r->bound.refined)
    sg_bound_set_window (r, window_term (g, pool, budget));
}

void
sg_lower_bound_refine_pool (const SgGraph *g, SgSimResult *r, SgPool *pool)
{
  g_return_if_fail (g != NULL && r != NULL);
  /* The term is the graph's, whatever the order simulated: the kept
   * simulation's (refined only here and by sg_graph_simulation_refined,
   * within SUM_BUDGET) serves every other. */
  const SgSimResult *kept = sg_graph_simulation_kept (g);
  if (!r->bound.refined && kept && kept->bound.refined)
    sg_bound_set_window (r, kept->bound.window_us);
  else
    sg_bound_refine_within (g, r, SUM_BUDGET, pool);
}

void
sg_lower_bound_refine (const SgGraph *g, SgSimResult *r)
{
  sg_lower_bound_refine_pool (g, r, NULL);
}
