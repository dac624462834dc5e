/* sim.c: the timeline simulator, the single judge of an order.
 *
 * One compute stream and one comm stream per process group (NCCL
 * serialises the collectives of one communicator). Walking the order:
 * compute nodes run back to back on the compute stream; a collective is
 * queued on its group's stream at the compute stream's current time and
 * starts when the stream is free; a wait stalls the compute stream until
 * its collective ends (that stall is the collective's exposed time).
 * Contention is integrated piecewise, event by event: while the compute
 * stream is busy, running collectives progress at 1/comm_slowdown (those
 * that reduce at 1/reduce_slowdown); while
 * any collective runs, compute progresses at 1/compute_slowdown.
 * Start wait: a collective that becomes startable beside a running
 * matmul/attention kernel, or right before one starts (the kernel issued
 * after it), starts only after comm_start_wait x that kernel's remaining
 * time (Hopper GEMMs hold every SM; docs/cost-model.md section 3); a
 * matmul with an SM-count target leaves SMs free and holds nothing
 * (sg_node_holds_sms).
 * Mirrors: the runtime estimate of Inductor's overlap scheduler and XLA's
 * latency-hiding scheduler's async tracker, with contention added.
 * Requires: est_us (estimate/); comm_start_wait from the graph's cost model
 * (0 without one). Invalidates: nothing (read-only).
 */
#include <string.h>

#include "schedule-private.h"

G_DEFINE_QUARK (sg-schedule-error-quark, sg_schedule_error)

/* Below this much work left, a collective counts as finished (rounding). */
#define REM_EPS 1e-9

const char *
sg_exposure_name (SgExposure e)
{
  switch (e) {
  case SG_EXPOSURE_HIDDEN:
    return "hidden";
  case SG_EXPOSURE_PARTIAL:
    return "partial";
  case SG_EXPOSURE_EXPOSED:
    return "exposed";
  }
  return "exposed";
}

/* --- engine --------------------------------------------------------------- */

void
sg_eng_init (SgSimEngine *e, const SgGraph *g, const SgContention *cont, bool track_nodes)
{
  memset (e, 0, sizeof *e);
  e->g = g;
  e->cs = cont && cont->compute_slowdown >= 1.0 ? cont->compute_slowdown : 1.0;
  e->ms = cont && cont->comm_slowdown >= 1.0 ? cont->comm_slowdown : 1.0;
  e->mr = cont && cont->reduce_slowdown >= 1.0 ? cont->reduce_slowdown : e->ms;
  const SgCostModel *cm = sg_graph_cost_model (g);
  double sw = cm ? sg_cost_model_comm_start_wait (cm) : 0.0;
  e->sw = isfinite (sw) ? CLAMP (sw, 0.0, 1.0) : 0.0;
  e->n_groups = g->n_groups;
  int32_t ng = MAX (g->n_groups, 1);
  e->hold = g_new0 (uint8_t, (size_t)ng);
  e->hold_at = g_new0 (double, (size_t)ng);
  e->ghead = g_new (int32_t, (size_t)ng);
  e->gtail = g_new (int32_t, (size_t)ng);
  for (int32_t i = 0; i < ng; i++)
    e->ghead[i] = e->gtail[i] = -1;
  int32_t nc = 0;
  for (SgNodeId i = 0; i < g->n_nodes; i++)
    nc += sg_sched_role (&g->nodes[i]) == SG_ROLE_COLL;
  e->cap_rows = MAX (nc, 1);
  e->rows = g_new0 (SgCollRow, (size_t)e->cap_rows);
  e->rnext = g_new (int32_t, (size_t)e->cap_rows);
  e->rem = g_new0 (double, (size_t)e->cap_rows);
  e->rslow = g_new0 (double, (size_t)e->cap_rows);
  e->fin = g_new0 (uint8_t, (size_t)e->cap_rows);
  e->row_of = g_new (int32_t, (size_t)MAX (g->n_nodes, 1));
  for (SgNodeId i = 0; i < g->n_nodes; i++)
    e->row_of[i] = -1;
  if (track_nodes) {
    e->node_start = g_new0 (double, (size_t)MAX (g->n_nodes, 1));
    e->node_end = g_new0 (double, (size_t)MAX (g->n_nodes, 1));
  }
}

void
sg_eng_clear (SgSimEngine *e)
{
  g_free (e->ghead);
  g_free (e->gtail);
  g_free (e->hold);
  g_free (e->hold_at);
  g_free (e->rows);
  g_free (e->rnext);
  g_free (e->rem);
  g_free (e->rslow);
  g_free (e->fin);
  g_free (e->row_of);
  g_free (e->node_start);
  g_free (e->node_end);
  memset (e, 0, sizeof *e);
}

static void
start_head (SgSimEngine *e, int32_t grp)
{
  int32_t r = e->ghead[grp];
  e->rows[r].start_us = e->now;
  if (e->node_start)
    e->node_start[e->rows[r].node] = e->now;
}

/* The head of @grp became startable now: starts it, or holds it (the start
 * wait rule, schedule-private.h). */
static void
head_ready (SgSimEngine *e, int32_t grp)
{
  if (e->sw > 0.0 && !e->in_kernel) {
    e->hold[grp] = SG_HOLD_NEXT;
    e->n_held++;
  } else if (e->sw > 0.0 && e->kbig && e->kleft > 0.0) {
    e->hold[grp] = SG_HOLD_KERNEL;
    e->hold_at[grp] = e->kleft * (1.0 - e->sw);
    e->n_held++;
    e->n_kheld++;
  } else {
    start_head (e, grp);
  }
}

static void
release (SgSimEngine *e, int32_t grp)
{
  e->n_held--;
  e->n_kheld -= e->hold[grp] == SG_HOLD_KERNEL;
  e->hold[grp] = SG_HOLD_NONE;
  start_head (e, grp);
}

/* Releases every head held with @kind. */
static void
release_all (SgSimEngine *e, uint8_t kind)
{
  for (int32_t grp = 0; grp < e->n_groups && e->n_held > 0; grp++)
    if (e->hold[grp] == kind)
      release (e, grp);
}

static void
finish_head (SgSimEngine *e, int32_t grp)
{
  int32_t r = e->ghead[grp];
  e->rem[r] = 0.0;
  e->fin[r] = 1;
  e->rows[r].end_us = e->now;
  if (e->node_end)
    e->node_end[e->rows[r].node] = e->now;
  e->ghead[grp] = e->rnext[r];
  if (e->ghead[grp] < 0) {
    e->gtail[grp] = -1;
    e->n_active--;
  } else {
    head_ready (e, grp);
  }
  if (e->on_finish)
    e->on_finish (e->ud, e->rows[r].node);
}

/* Finishes every running collective with no work left. */
static void
settle (SgSimEngine *e)
{
  for (int32_t grp = 0; grp < e->n_groups; grp++)
    while (e->ghead[grp] >= 0 && !e->hold[grp] && e->rem[e->ghead[grp]] <= REM_EPS)
      finish_head (e, grp);
}

/* Advances time by at most @max_dt (INFINITY: to the next collective end).
 * @busy: the compute stream runs kernel @hider meanwhile (then @max_dt is
 * the kernel's end, kleft x its rate, and kleft goes down). Sets *dt;
 * returns true when the step ended because @max_dt ran out (not on a
 * collective end or a held collective's start). */
static bool
step (SgSimEngine *e, bool busy, double max_dt, SgNodeId hider, double *dt)
{
  settle (e);
  if (!busy && e->n_held > 0) {
    /* time passes with the compute stream idle: nothing holds the SMs */
    release_all (e, SG_HOLD_NEXT);
    release_all (e, SG_HOLD_KERNEL);
    settle (e);
  }
  int32_t running = e->n_active - e->n_held;
  if (running == 0 && !(busy && e->n_kheld > 0)) {
    *dt = max_dt;
    e->now += isfinite (max_dt) ? max_dt : 0.0;
    if (busy)
      e->kleft = 0.0;
    return true;
  }
  double crate = running > 0 ? e->cs : 1.0; /* wall time per unit of kernel work */
  double best = max_dt;
  int32_t who = -1;
  for (int32_t grp = 0; grp < e->n_groups; grp++) {
    int32_t h = e->ghead[grp];
    if (h < 0 || e->hold[grp])
      continue;
    double t = e->rem[h] * (busy ? e->rslow[h] : 1.0);
    if (t < best) {
      best = t;
      who = grp;
    }
  }
  int32_t rel = -1;
  if (busy && e->n_kheld > 0) {
    for (int32_t grp = 0; grp < e->n_groups; grp++) {
      if (e->hold[grp] != SG_HOLD_KERNEL)
        continue;
      double t = MAX (e->kleft - e->hold_at[grp], 0.0) * crate;
      if (t < best) {
        best = t;
        who = -1;
        rel = grp;
      }
    }
  }
  bool hides = busy && best > 0.0 && hider != SG_NO_NODE;
  for (int32_t grp = 0; grp < e->n_groups; grp++) {
    int32_t h = e->ghead[grp];
    if (h < 0 || e->hold[grp])
      continue;
    e->rem[h] = grp == who ? 0.0 : e->rem[h] - best / (busy ? e->rslow[h] : 1.0);
    if (hides) {
      SgCollRow *row = &e->rows[h];
      row->overlap_us += best;
      if (row->last_hiding != hider) {
        row->n_hiding++;
        row->last_hiding = hider;
        if (row->hidden_by == SG_NO_NODE)
          row->hidden_by = hider;
      }
    }
  }
  e->now += best;
  *dt = best;
  if (busy)
    e->kleft -= best / crate;
  if (rel >= 0) {
    /* that head and every other whose point is reached (ties) start now */
    for (int32_t grp = 0; grp < e->n_groups; grp++)
      if (e->hold[grp] == SG_HOLD_KERNEL
          && (grp == rel || e->kleft - e->hold_at[grp] <= REM_EPS * (1.0 + e->kleft)))
        release (e, grp);
    settle (e);
    return false;
  }
  if (who >= 0) {
    finish_head (e, who);
    settle (e);
    return false;
  }
  return true;
}

int32_t
sg_eng_issue (SgSimEngine *e, SgNodeId c)
{
  const SgNode *n = &e->g->nodes[c];
  g_return_val_if_fail (e->n_rows < e->cap_rows && n->group >= 0 && n->group < e->n_groups, -1);
  int32_t r = e->n_rows++;
  SgCollRow *row = &e->rows[r];
  row->node = c;
  row->wait = SG_NO_NODE;
  row->est_us = sg_sched_cost (n);
  row->issue_us = e->now;
  row->hidden_by = row->last_hiding = SG_NO_NODE;
  row->status = SG_EXPOSURE_HIDDEN;
  e->rem[r] = row->est_us;
  e->rslow[r] = n->kind == SG_OP_REDUCE_SCATTER || n->kind == SG_OP_ALL_REDUCE ? e->mr : e->ms;
  e->rnext[r] = -1;
  e->row_of[c] = r;
  int32_t grp = n->group;
  if (e->gtail[grp] < 0) {
    e->ghead[grp] = e->gtail[grp] = r;
    e->n_active++;
    head_ready (e, grp);
  } else {
    e->rnext[e->gtail[grp]] = r;
    e->gtail[grp] = r;
  }
  settle (e);
  return r;
}

void
sg_eng_compute (SgSimEngine *e, SgNodeId x, double work)
{
  double t0 = e->now;
  if (e->node_start)
    e->node_start[x] = t0;
  bool big = sg_node_holds_sms (&e->g->nodes[x]);
  if (work > 0.0 && e->n_held > 0) {
    /* heads held for the next kernel: this one */
    for (int32_t grp = 0; grp < e->n_groups; grp++) {
      if (e->hold[grp] != SG_HOLD_NEXT)
        continue;
      if (big) {
        e->hold[grp] = SG_HOLD_KERNEL;
        e->hold_at[grp] = work * (1.0 - e->sw);
        e->n_kheld++;
      } else {
        release (e, grp);
      }
    }
  }
  e->in_kernel = true;
  e->kbig = big;
  e->kleft = work;
  while (e->kleft > 0.0) {
    settle (e);
    if (e->n_active - e->n_held == 0 && e->n_kheld == 0) {
      e->now += e->kleft;
      break;
    }
    double dt;
    double crate = e->n_active - e->n_held > 0 ? e->cs : 1.0;
    if (step (e, true, e->kleft * crate, x, &dt))
      break;
    if (e->kleft <= REM_EPS * work)
      break;
  }
  e->in_kernel = false;
  e->kleft = 0.0;
  /* the kernel ended: what it held starts now */
  if (e->n_kheld > 0) {
    release_all (e, SG_HOLD_KERNEL);
    settle (e);
  }
  e->busy_us += e->now - t0;
  if (e->node_end)
    e->node_end[x] = e->now;
}

double
sg_eng_wait (SgSimEngine *e, SgNodeId w, SgNodeId c)
{
  int32_t r = e->row_of[c];
  g_return_val_if_fail (r >= 0, 0.0);
  double t0 = e->now;
  if (e->node_start)
    e->node_start[w] = t0;
  while (!e->fin[r]) {
    double dt;
    step (e, false, INFINITY, SG_NO_NODE, &dt);
  }
  double stall = e->now - t0;
  e->rows[r].exposed_us += stall;
  if (e->rows[r].wait == SG_NO_NODE)
    e->rows[r].wait = w;
  if (e->node_end)
    e->node_end[w] = e->now;
  return stall;
}

void
sg_eng_drain (SgSimEngine *e)
{
  while (e->n_active > 0) {
    double dt;
    step (e, false, INFINITY, SG_NO_NODE, &dt);
  }
}

/* --- liveness ------------------------------------------------------------- */

int32_t *
sg_sched_positions (const SgGraph *g, const SgNodeId *order)
{
  int32_t *pos = g_new (int32_t, (size_t)MAX (g->n_nodes, 1));
  for (int32_t p = 0; p < g->n_nodes; p++)
    pos[order ? order[p] : p] = p;
  return pos;
}

/* --- sg_simulate ------------------------------------------------------------ */

void
sg_sim_classify (SgCollRow *rows, int32_t n_rows, SgSimResult *out)
{
  out->hidden = out->partial = out->exposed = 0;
  out->exposed_us = 0.0;
  for (int32_t r = 0; r < n_rows; r++) {
    SgCollRow *row = &rows[r];
    double thr = MAX (0.005 * row->est_us, 0.01);
    if (row->exposed_us < thr)
      row->status = SG_EXPOSURE_HIDDEN;
    else if (row->overlap_us <= 0.0)
      row->status = SG_EXPOSURE_EXPOSED;
    else
      row->status = SG_EXPOSURE_PARTIAL;
    out->hidden += row->status == SG_EXPOSURE_HIDDEN;
    out->partial += row->status == SG_EXPOSURE_PARTIAL;
    out->exposed += row->status == SG_EXPOSURE_EXPOSED;
    out->exposed_us += row->exposed_us;
  }
}

void
sg_sim_result_clear (SgSimResult *r)
{
  if (!r)
    return;
  g_free (r->rows);
  g_free (r->node_start);
  g_free (r->node_end);
  memset (r, 0, sizeof *r);
}

static bool
check_costs (const SgGraph *g, GError **error)
{
  for (SgNodeId i = 0; i < g->n_nodes; i++) {
    double c = g->nodes[i].est_us;
    if (!isfinite (c) || c < 0.0) {
      g_set_error (error, SG_SCHEDULE_ERROR, SG_SCHEDULE_ERROR_COST,
                   "node '%s': est_us is %g, not a finite cost >= 0 (run the estimate pass)",
                   g->nodes[i].name, c);
      return false;
    }
  }
  return true;
}

static double
critical_path (const SgGraph *g)
{
  g_autofree double *fin = g_new0 (double, (size_t)MAX (g->n_nodes, 1));
  double best = 0.0;
  for (SgNodeId i = 0; i < g->n_nodes; i++) {
    uint32_t k;
    const SgNodeId *in = sg_node_inputs (g, i, &k);
    double t = 0.0;
    for (uint32_t j = 0; j < k; j++)
      t = MAX (t, fin[in[j]]);
    fin[i] = t + sg_sched_cost (&g->nodes[i]);
    best = MAX (best, fin[i]);
  }
  return best;
}

bool
sg_simulate_with (const SgGraph *g, const SgNodeId *order, const SgContention *cont,
                  SgSimResult *out, GError **error)
{
  g_return_val_if_fail (g != NULL && out != NULL, false);
  memset (out, 0, sizeof *out);
  if (order && !sg_order_check (g, order, error))
    return false;
  if (!check_costs (g, error))
    return false;
  SgContention none = { 1.0, 1.0, 1.0 };
  if (!cont) {
    const SgCostModel *cm = sg_graph_cost_model (g);
    cont = cm ? sg_cost_model_contention (cm) : &none;
  }
  SgSimEngine e;
  sg_eng_init (&e, g, cont, true);
  g_autofree double *group_work = g_new0 (double, (size_t)MAX (g->n_groups, 1));
  double compute_us = 0.0, comm_us = 0.0;
  for (int32_t p = 0; p < g->n_nodes; p++) {
    SgNodeId x = order ? order[p] : p;
    const SgNode *n = &g->nodes[x];
    switch (sg_sched_role (n)) {
    case SG_ROLE_COLL:
      sg_eng_issue (&e, x);
      comm_us += sg_sched_cost (n);
      group_work[n->group] += sg_sched_cost (n);
      break;
    case SG_ROLE_WAIT: {
      SgNodeId c = sg_node_wait_target (g, x);
      if (c != SG_NO_NODE && e.row_of[c] >= 0) {
        sg_eng_wait (&e, x, c);
      } else {
        e.node_start[x] = e.node_end[x] = e.now;
      }
      break;
    }
    case SG_ROLE_COMPUTE:
      compute_us += sg_sched_cost (n);
      sg_eng_compute (&e, x, sg_sched_cost (n));
      break;
    }
  }
  double compute_end = e.now;
  sg_eng_drain (&e);
  out->step_us = MAX (compute_end, e.now);
  out->compute_us = compute_us;
  out->comm_us = comm_us;
  out->compute_busy_us = e.busy_us;
  out->critical_path_us = critical_path (g);
  double lb = MAX (compute_us, out->critical_path_us);
  for (int32_t i = 0; i < g->n_groups; i++)
    lb = MAX (lb, group_work[i]);
  out->lower_bound_us = lb;
  sg_sim_classify (e.rows, e.n_rows, out);
  g_autofree int32_t *pos = sg_sched_positions (g, order);
  out->peak_bytes = sg_graph_liveness (g, pos, NULL, NULL, NULL);
  out->n_rows = e.n_rows;
  out->rows = e.rows;
  out->node_start = e.node_start;
  out->node_end = e.node_end;
  out->n_nodes = g->n_nodes;
  e.rows = NULL;
  e.node_start = e.node_end = NULL;
  sg_eng_clear (&e);
  return true;
}

bool
sg_simulate (const SgGraph *g, const SgNodeId *order, SgSimResult *out, GError **error)
{
  return sg_simulate_with (g, order, NULL, out, error);
}
