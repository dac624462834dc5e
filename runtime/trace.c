/* trace.c: `schedrun --trace FILE`: the measured timeline as a Chrome trace.
 *
 * One measured step, the same on every rank: the one whose time on the
 * slowest rank is the median (a real step, not a mix of medians). Each
 * rank's spans (SgRtStepTimes.span_*, filled by the backend) are gathered
 * on rank 0: pid = rank; tid = plan stream for kernels and collectives,
 * 100 + stream for the time a stream stood still at a collective's wait.
 * The layout follows schedgraph's predicted trace (schedule/report.c), so
 * both open side by side in ui.perfetto.dev.
 * Requires: run_step done with opt.timeline. Invalidates: nothing.
 */
#include <stdlib.h>
#include <string.h>

#include "runtime-private.h"
#include "runtime.h"

#define STALL_TID 100

static void
add_event (cJSON *ev, const char *name, const char *cat, int rank, int tid, double ts,
           double dur, int32_t ins, int32_t kernels)
{
  cJSON *e = cJSON_CreateObject ();
  cJSON_AddStringToObject (e, "name", name);
  cJSON_AddStringToObject (e, "cat", cat);
  cJSON_AddStringToObject (e, "ph", "X");
  cJSON_AddNumberToObject (e, "pid", rank);
  cJSON_AddNumberToObject (e, "tid", tid);
  cJSON_AddNumberToObject (e, "ts", ts);
  cJSON_AddNumberToObject (e, "dur", dur > 0 ? dur : 0);
  cJSON *args = cJSON_AddObjectToObject (e, "args");
  cJSON_AddNumberToObject (args, "ins", ins);
  if (kernels > 1)
    cJSON_AddNumberToObject (args, "kernels", kernels);
  cJSON_AddItemToArray (ev, e);
}

static void
add_meta (cJSON *ev, const char *what, int rank, int tid, const char *name)
{
  cJSON *e = cJSON_CreateObject ();
  cJSON_AddStringToObject (e, "name", what);
  cJSON_AddStringToObject (e, "ph", "M");
  cJSON_AddNumberToObject (e, "pid", rank);
  if (tid >= 0)
    cJSON_AddNumberToObject (e, "tid", tid);
  cJSON_AddStringToObject (cJSON_AddObjectToObject (e, "args"), "name", name);
  cJSON_AddItemToArray (ev, e);
}

/* Kernels a span starting at KERNEL @i covers: it and the kernels after it
 * on its stream up to the next one with its own span or a wait there. */
static int32_t
kernels_in_span (const SgPlan *p, const double *start, int32_t i)
{
  int32_t n = 1;
  for (int32_t k = i + 1; k < p->n_ins; k++) {
    const SgPlanIns *x = &p->ins[k];
    if (x->stream != p->ins[i].stream)
      continue;
    if (x->kind == SG_INS_WAIT_EVENT || (x->kind == SG_INS_KERNEL && start[k] >= 0))
      break;
    n += x->kind == SG_INS_KERNEL;
  }
  return n;
}

cJSON *
sg_rt_trace_new (const SgRtContext *ctx, const SgRtStepTimes *iters, int32_t n_iters)
{
  const SgPlan *p = ctx->plan;
  g_return_val_if_fail (n_iters >= 1 && iters[0].span_start != NULL, NULL);
  double step_us = 0;
  const int32_t it = sg_rt_median_iteration (ctx, iters, n_iters, &step_us);
  const int32_t n = p->n_ins;
  double *mine = g_new (double, 2 * (size_t)MAX (n, 1));
  memcpy (mine, iters[it].span_start, sizeof (double) * (size_t)n);
  memcpy (mine + n, iters[it].span_end, sizeof (double) * (size_t)n);
  double *all = ctx->rank == 0 ? g_new (double, 2 * (size_t)MAX (n, 1) * ctx->world) : NULL;
  MPI_OR_ABORT (MPI_Gather (mine, 2 * n, MPI_DOUBLE, all, 2 * n, MPI_DOUBLE, 0, ctx->world_comm));
  g_free (mine);
  if (ctx->rank != 0)
    return NULL;

  cJSON *root = cJSON_CreateObject ();
  cJSON *ev = cJSON_AddArrayToObject (root, "traceEvents");
  cJSON_AddStringToObject (root, "displayTimeUnit", "ns");
  cJSON *meta = cJSON_AddObjectToObject (root, "metadata");
  cJSON_AddStringToObject (meta, "source", "schedrun (measured)");
  cJSON_AddStringToObject (meta, "backend", ctx->backend ? ctx->backend->name : "?");
  cJSON_AddNumberToObject (meta, "iteration", it);
  cJSON_AddNumberToObject (meta, "step_us", step_us); /* the slowest rank's */
  cJSON_AddStringToObject (meta, "graph", p->graph ? p->graph : "");
  for (int32_t r = 0; r < ctx->world; r++) {
    const double *start = all + 2 * (size_t)n * r, *end = start + n;
    char label[64];
    g_snprintf (label, sizeof label, "rank %d", r);
    add_meta (ev, "process_name", r, -1, label);
    for (int32_t s = 0; s < p->n_streams; s++) {
      g_snprintf (label, sizeof label, s == 0 ? "stream 0 (compute)" : "stream %d", s);
      add_meta (ev, "thread_name", r, s, label);
      g_snprintf (label, sizeof label, "stream %d: stalled at waits", s);
      add_meta (ev, "thread_name", r, STALL_TID + s, label);
    }
    for (int32_t i = 0; i < n; i++) {
      const SgPlanIns *x = &p->ins[i];
      if (start[i] < 0 || end[i] < 0)
        continue;
      const char *name = x->name ? x->name : sg_op_name (x->op);
      switch (x->kind) {
      case SG_INS_KERNEL:
        add_event (ev, name, "compute", r, x->stream, start[i], end[i] - start[i], i,
                   kernels_in_span (p, start, i));
        break;
      case SG_INS_COLLECTIVE:
        add_event (ev, name, "comm", r, x->stream, start[i], end[i] - start[i], i, 0);
        break;
      case SG_INS_WAIT_EVENT:
        add_event (ev, x->coll >= 0 && p->ins[x->coll].name ? p->ins[x->coll].name : name,
                   "stall", r, STALL_TID + x->stream, start[i], end[i] - start[i], i, 0);
        break;
      default:
        break;
      }
    }
  }
  g_free (all);
  return root;
}
