/* ranks.c: every rank's times in one measured step, for the report's
 * "by_rank" (docs/runtime.md "Report": per rank data).
 *
 * The rest of the report keeps, per iteration, the slowest rank (MPI max),
 * then the median over iterations: that hides how far the ranks drift
 * apart, which docs/cost-model.md "Rank skew" needs measured. Here the
 * step is one real step, the same on every rank: the one whose time on the
 * slowest rank is the median (the step --trace shows). For it each rank
 * gives its step and compute time and, per collective, its launch, its
 * end, its stall at the wait and the compute stream's busy time before the
 * launch, all on its own clock from its step's start. The ranks start each
 * step after a barrier (cuda: after synchronising the device), so these
 * clocks agree to within the barrier's exit skew (microseconds).
 * Mirrors: the per-rank breakdown of Holistic Trace Analysis (HTA) over
 * PyTorch profiler traces, kept in schedrun's own report.
 * Requires: run_step done for every iteration. Invalidates: nothing.
 */
#include <math.h>
#include <string.h>

#include "runtime-private.h"
#include "runtime.h"

int32_t
sg_rt_median_iteration (const SgRtContext *ctx, const SgRtStepTimes *iters, int32_t n,
                        double *step_us)
{
  double *step = g_new (double, MAX (n, 1));
  for (int32_t i = 0; i < n; i++)
    step[i] = iters[i].step_us;
  MPI_OR_ABORT (MPI_Allreduce (MPI_IN_PLACE, step, n, MPI_DOUBLE, MPI_MAX, ctx->world_comm));
  int32_t best = 0;
  for (int32_t i = 0; i < n; i++) { /* the lower median: fewer above it than below */
    int32_t below = 0, above = 0;
    for (int32_t j = 0; j < n; j++) {
      below += step[j] < step[i] || (step[j] == step[i] && j < i);
      above += step[j] > step[i] || (step[j] == step[i] && j > i);
    }
    if (below == (n - 1) / 2 && above == n - 1 - below) {
      best = i;
      break;
    }
  }
  *step_us = n > 0 ? step[best] : 0;
  g_free (step);
  return best;
}

/* The compute stream's busy time in [0, @t) of @it's spans. */
static double
busy_before (const SgRtStepTimes *it, double t)
{
  double b = 0;
  for (int32_t k = 0; k < it->n_busy; k++)
    if (it->busy_start[k] < t)
      b += MIN (it->busy_end[k], t) - it->busy_start[k];
  return b;
}

static double
r3 (double us)
{
  return round (us * 1000.0) / 1000.0;
}

/* @key: the @world values at @all[r * width + col], rounded to 0.001 us. */
static void
add_by_rank (cJSON *obj, const char *key, const double *all, int32_t world, int32_t width,
             int32_t col)
{
  cJSON *a = cJSON_AddArrayToObject (obj, key);
  for (int32_t r = 0; r < world; r++)
    cJSON_AddItemToArray (a, cJSON_CreateNumber (r3 (all[(size_t)r * width + col])));
}

/* Per rank: step, compute, then per collective launch, end, exposed and
 * the compute stream's busy time before the launch. */
enum { STEP, COMPUTE, HEAD };
enum { LAUNCH, END, EXPOSED, BUSY, PER_COLL };

void
sg_rt_report_add_ranks (const SgRtContext *ctx, const SgRtStepTimes *iters, int32_t n_iters,
                        cJSON *root, cJSON *rows)
{
  g_return_if_fail (n_iters >= 1);
  double slowest = 0;
  const int32_t it = sg_rt_median_iteration (ctx, iters, n_iters, &slowest);
  const SgRtStepTimes *t = &iters[it];
  const int32_t nc = t->n_coll, width = HEAD + PER_COLL * nc;
  double *mine = g_new (double, (size_t)width);
  mine[STEP] = t->step_us;
  mine[COMPUTE] = t->compute_us;
  for (int32_t c = 0; c < nc; c++) {
    double *v = mine + HEAD + PER_COLL * c;
    v[LAUNCH] = t->launch_us[c];
    v[END] = t->end_us[c];
    v[EXPOSED] = t->exposed_us[c];
    v[BUSY] = busy_before (t, t->launch_us[c]);
  }
  const int32_t world = ctx->world;
  double *all = g_new (double, (size_t)width * world);
  MPI_OR_ABORT (MPI_Allgather (mine, width, MPI_DOUBLE, all, width, MPI_DOUBLE, ctx->world_comm));

  cJSON *step = cJSON_AddObjectToObject (root, "by_rank");
  cJSON_AddNumberToObject (step, "iteration", it);
  add_by_rank (step, "step_us", all, world, width, STEP);
  add_by_rank (step, "compute_us", all, world, width, COMPUTE);
  int32_t c = 0;
  cJSON *row;
  cJSON_ArrayForEach (row, rows)
  {
    if (c >= nc)
      break;
    cJSON *o = cJSON_AddObjectToObject (row, "by_rank");
    const int32_t col = HEAD + PER_COLL * c;
    add_by_rank (o, "launch_us", all, world, width, col + LAUNCH);
    add_by_rank (o, "end_us", all, world, width, col + END);
    add_by_rank (o, "exposed_us", all, world, width, col + EXPOSED);
    add_by_rank (o, "compute_before_us", all, world, width, col + BUSY);
    c++;
  }
  g_free (mine);
  g_free (all);
}
