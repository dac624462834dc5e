/* report.c: schedrun's report JSON and the output dumps.
 *
 * The report mirrors schedgraph's report keys (docs/report-format.md):
 * "measured" and "predicted" are M objects (step_us, compute_us, comm_us,
 * exposed_us, collectives, hidden, partial, exposed), "collectives" ROWs
 * (name, kind, group, bytes, estimated_us, exposed_us, status) with the
 * measured and predicted numbers side by side, and
 * says which clock measured ("clock": "cpu-wall" for the CPU backend) and
 * how the measured steps were issued ("launch"). Where the backend timed a
 * step also without its measurement events (cuda, timing mode), that time
 * is step_us and the instrumented one instrumented_step_us.
 * Per iteration the slowest rank counts (MPI max), then medians over the
 * measured iterations; "by_rank" keeps every rank's times of the median
 * step beside them (ranks.c). Dumps: raw little-endian values per output, in its
 * dtype, row-major, plus outputs.json; written by one rank (default 0).
 * Requires: a context after run_step. Invalidates: nothing.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "runtime-private.h"
#include "runtime.h"

static int
cmp_double (const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double
median (double *v, int32_t n)
{
  if (n <= 0)
    return 0;
  qsort (v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static double
r3 (double us)
{
  return round (us * 1000.0) / 1000.0;
}

/* 100 * (measured - predicted) / predicted, null without a prediction. */
static void
add_err (cJSON *obj, const char *key, double measured, double predicted)
{
  if (predicted > 0 && !isnan (predicted))
    cJSON_AddNumberToObject (obj, key, round (1000.0 * (measured - predicted) / predicted) / 10.0);
  else
    cJSON_AddNullToObject (obj, key);
}

/* A prediction: null where the plan has none (negative). */
static void
add_pred (cJSON *obj, const char *key, double us)
{
  if (us < 0 || isnan (us))
    cJSON_AddNullToObject (obj, key);
  else
    cJSON_AddNumberToObject (obj, key, r3 (us));
}

/* Max over ranks of @n doubles, in place (every rank gets the result). */
static void
max_over_ranks (const SgRtContext *ctx, double *v, int n)
{
  if (n > 0)
    MPI_OR_ABORT (MPI_Allreduce (MPI_IN_PLACE, v, n, MPI_DOUBLE, MPI_MAX, ctx->world_comm));
}

static const char *
status_of (double measured, double exposed)
{
  if (exposed <= 0.05 * measured)
    return "hidden";
  if (exposed >= 0.95 * measured)
    return "exposed";
  return "partial";
}

cJSON *
sg_rt_report_new (const SgRtContext *ctx, const SgRtStepTimes *iters, int32_t n_iters,
                  const char *clock, const cJSON *outputs)
{
  const SgPlan *p = ctx->plan;
  int32_t nc = n_iters > 0 ? iters[0].n_coll : 0;
  /* per iteration: step, compute, this rank's total exposed, the step
   * without measurement events (0 when not run), then measured[nc],
   * exposed[nc] */
  int width = 4 + 2 * nc;
  double *all = g_new0 (double, (size_t)MAX (width * n_iters, 1));
  for (int32_t it = 0; it < n_iters; it++) {
    double *row = all + (size_t)it * width;
    row[0] = iters[it].step_us;
    row[1] = iters[it].compute_us;
    row[2] = 0;
    for (int32_t c = 0; c < nc; c++)
      row[2] += iters[it].exposed_us[c];
    row[3] = iters[it].bare_step_us;
    memcpy (row + 4, iters[it].measured_us, sizeof (double) * (size_t)nc);
    memcpy (row + 4 + nc, iters[it].exposed_us, sizeof (double) * (size_t)nc);
  }
  max_over_ranks (ctx, all, width * n_iters);
  double *col = g_new (double, (size_t)MAX (n_iters, 1));
  double *med = g_new (double, (size_t)width);
  for (int w = 0; w < width; w++) {
    for (int32_t it = 0; it < n_iters; it++)
      col[it] = all[(size_t)it * width + w];
    med[w] = median (col, n_iters);
  }

  cJSON *root = cJSON_CreateObject ();
  cJSON_AddStringToObject (root, "format", "schedgraph.runtime-report");
  cJSON_AddNumberToObject (root, "version", 1);
  cJSON_AddStringToObject (root, "clock", clock);
  cJSON_AddStringToObject (root, "backend", ctx->backend ? ctx->backend->name : "?");
  if (ctx->info)
    cJSON_AddStringToObject (root, "kernels", ctx->info);
  cJSON_AddStringToObject (root, "mode", ctx->opt.mode == SG_RT_MODE_EXACT ? "exact" : "timing");
  int32_t n_graph = 0;
  for (int32_t it = 0; it < n_iters; it++)
    n_graph += iters[it].graph_launch;
  /* what the measured steps were: a graph run's first step is eager */
  cJSON_AddStringToObject (root, "launch",
                           n_graph == 0 ? "eager" : n_graph == n_iters ? "graph" : "mixed");
  cJSON_AddNumberToObject (root, "world_size", ctx->world);
  cJSON_AddNumberToObject (root, "iters", n_iters);
  cJSON_AddNumberToObject (root, "warmup", ctx->opt.warmup);
  cJSON_AddNumberToObject (root, "seed", (double)ctx->opt.seed);
  char hash[17];
  g_snprintf (hash, sizeof hash, "%016" PRIx64, p->hash);
  cJSON *plan = cJSON_AddObjectToObject (root, "plan");
  cJSON_AddStringToObject (plan, "graph", p->graph ? p->graph : "");
  cJSON_AddStringToObject (plan, "options", p->options ? p->options : "");
  cJSON_AddStringToObject (plan, "hash", hash);
  cJSON_AddNumberToObject (plan, "arena_bytes", (double)p->arena_bytes);

  double comm = 0;
  int hidden = 0, partial = 0, n_exposed = 0;
  cJSON *rows = cJSON_CreateArray ();
  for (int32_t c = 0; c < nc; c++) {
    const SgPlanIns *ins = &p->ins[iters[0].coll_ins[c]];
    double m = med[4 + c], e = med[4 + nc + c];
    const char *st = status_of (m, e);
    hidden += strcmp (st, "hidden") == 0;
    partial += strcmp (st, "partial") == 0;
    n_exposed += strcmp (st, "exposed") == 0;
    comm += m;
    cJSON *r = cJSON_CreateObject ();
    cJSON_AddStringToObject (r, "name", ins->name ? ins->name : "");
    cJSON_AddStringToObject (r, "kind", sg_op_name (ins->op));
    cJSON_AddStringToObject (r, "group", p->groups[ins->group].name);
    uint64_t bytes = 0; /* the inputs', every member's of a coalesced one */
    for (int32_t j = 0; j < ins->n_in; j++) {
      const SgPlanValue *v = &p->values[ins->in[j]];
      bytes += sg_rt_value_numel (v) * sg_dtype_size (v->dtype);
    }
    cJSON_AddNumberToObject (r, "bytes", (double)bytes);
    if (ins->n_members > 0) {
      cJSON *mem = cJSON_AddArrayToObject (r, "members");
      for (int32_t j = 0; j < ins->n_members; j++)
        cJSON_AddItemToArray (mem, cJSON_CreateString (ins->members[j]));
    }
    add_pred (r, "estimated_us", ins->est_us);
    add_pred (r, "predicted_exposed_us", ins->pred_exposed_us);
    add_pred (r, "predicted_start_us", ins->pred_start_us);
    add_pred (r, "predicted_end_us", ins->pred_end_us);
    cJSON_AddNumberToObject (r, "measured_us", r3 (m));
    cJSON_AddNumberToObject (r, "exposed_us", r3 (e));
    cJSON_AddStringToObject (r, "status", st);
    cJSON_AddItemToArray (rows, r);
  }
  /* The step is timed without measurement events where the backend ran it
   * so (cuda, timing mode): their event nodes would lengthen it. */
  const double step = med[3] > 0 ? med[3] : med[0];
  cJSON *sum = cJSON_AddObjectToObject (root, "measured");
  cJSON_AddNumberToObject (sum, "step_us", r3 (step));
  if (med[3] > 0)
    cJSON_AddNumberToObject (sum, "instrumented_step_us", r3 (med[0]));
  cJSON_AddNumberToObject (sum, "compute_us", r3 (med[1]));
  cJSON_AddNumberToObject (sum, "comm_us", r3 (comm));
  /* the slowest rank's total: per-collective maxima may come from
   * different ranks and would overstate it */
  cJSON_AddNumberToObject (sum, "exposed_us", r3 (med[2]));
  cJSON_AddNumberToObject (sum, "collectives", nc);
  cJSON_AddNumberToObject (sum, "hidden", hidden);
  cJSON_AddNumberToObject (sum, "partial", partial);
  cJSON_AddNumberToObject (sum, "exposed", n_exposed);
  cJSON *pred = cJSON_AddObjectToObject (root, "predicted");
  add_pred (pred, "step_us", p->pred.step_us);
  add_pred (pred, "compute_us", p->pred.compute_us);
  add_pred (pred, "comm_us", p->pred.comm_us);
  add_pred (pred, "exposed_us", p->pred.exposed_us);
  cJSON_AddNumberToObject (pred, "collectives", p->pred.collectives);
  cJSON_AddNumberToObject (pred, "hidden", p->pred.hidden);
  cJSON_AddNumberToObject (pred, "partial", p->pred.partial);
  cJSON_AddNumberToObject (pred, "exposed", p->pred.exposed);
  add_pred (pred, "lower_bound_us", p->pred.lower_bound_us);
  cJSON_AddNumberToObject (pred, "peak_bytes", (double)p->pred.peak_bytes);
  /* Measured vs predicted, only where both are about the same machine: a
   * CPU wall-clock run is not a measurement of the GPUs the plan models. */
  if (strcmp (clock, "cpu-wall") != 0) {
    cJSON *err = cJSON_AddObjectToObject (root, "error_pct");
    add_err (err, "step_us", step, p->pred.step_us);
    add_err (err, "exposed_us", med[2], p->pred.exposed_us);
    add_err (err, "compute_us", med[1], p->pred.compute_us);
    cJSON *row;
    int32_t c = 0;
    cJSON_ArrayForEach (row, rows) {
      const SgPlanIns *ins = &p->ins[iters[0].coll_ins[c]];
      add_err (row, "duration_error_pct", med[4 + c], ins->est_us);
      c++;
    }
  }
  sg_rt_report_add_ranks (ctx, iters, n_iters, root, rows);
  cJSON_AddItemToObject (root, "collectives", rows);
  if (outputs != NULL)
    cJSON_AddItemToObject (root, "outputs", cJSON_Duplicate (outputs, true));
  g_free (all);
  g_free (col);
  g_free (med);
  return root;
}

static bool
write_file (const char *path, const void *data, size_t len, GError **error)
{
  GError *e = NULL;
  if (!g_file_set_contents (path, data, (gssize)len, &e)) {
    g_set_error (error, SG_RT_ERROR, SG_RT_ERROR_IO, "cannot write %s: %s", path, e->message);
    g_error_free (e);
    return false;
  }
  return true;
}

bool
sg_rt_collect_outputs (SgRtContext *ctx, const char *dump_dir, cJSON **checksums,
                       GError **error)
{
  const SgPlan *p = ctx->plan;
  bool ok = true;
  int32_t n = p->n_outputs;
  uint64_t *mine = g_new0 (uint64_t, (size_t)MAX (n, 1));
  double *sums = g_new0 (double, (size_t)MAX (n, 1));
  int64_t *nans = g_new0 (int64_t, (size_t)MAX (n, 1));
  bool write = dump_dir != NULL && ctx->rank == ctx->opt.dump_rank;
  if (write && g_mkdir_with_parents (dump_dir, 0755) != 0) {
    g_set_error (error, SG_RT_ERROR, SG_RT_ERROR_IO, "cannot create %s: %s", dump_dir,
                 g_strerror (errno));
    ok = false;
  }
  cJSON *list = cJSON_CreateArray ();
  for (int32_t i = 0; i < n && ok; i++) {
    int32_t id = p->outputs[i];
    cJSON *e = cJSON_CreateObject ();
    cJSON_AddNumberToObject (e, "index", i);
    cJSON_AddItemToArray (list, e);
    if (id < 0 || p->values[id].buffer < 0) {
      cJSON_AddNullToObject (e, "name");
      continue;
    }
    const SgPlanValue *v = &p->values[id];
    size_t bytes = sg_rt_value_numel (v) * sg_dtype_size (v->dtype);
    void *host = g_malloc (bytes + 1);
    ok = ctx->backend->read_value (ctx, id, host, error);
    if (ok) {
      mine[i] = sg_rt_fnv1a64 (host, bytes);
      if (sg_dtype_is_float (v->dtype) || v->dtype == SG_DTYPE_I64 || v->dtype == SG_DTYPE_I32)
        for (uint64_t k = 0; k < sg_rt_value_numel (v); k++) {
          double x = 0;
          switch (v->dtype) {
          case SG_DTYPE_F32: x = ((float *)host)[k]; break;
          case SG_DTYPE_F64: x = ((double *)host)[k]; break;
          case SG_DTYPE_I64: x = (double)((int64_t *)host)[k]; break;
          case SG_DTYPE_I32: x = ((int32_t *)host)[k]; break;
          case SG_DTYPE_BF16: {
            uint32_t u = (uint32_t)((uint16_t *)host)[k] << 16;
            float f;
            memcpy (&f, &u, sizeof f);
            x = f;
            break;
          }
          case SG_DTYPE_F16: x = (double)((_Float16 *)host)[k]; break;
          default: break;
          }
          sums[i] += x;
          nans[i] += isnan (x);
        }
      cJSON_AddStringToObject (e, "name", v->name);
      cJSON *shape = cJSON_AddArrayToObject (e, "shape");
      for (int32_t d = 0; d < v->ndim; d++)
        cJSON_AddItemToArray (shape, cJSON_CreateNumber ((double)v->shape[d]));
      cJSON_AddStringToObject (e, "dtype", sg_dtype_name (v->dtype));
      if (write) {
        char *fn = g_strdup_printf ("%s/%d.bin", dump_dir, i);
        ok = write_file (fn, host, bytes, error);
        g_free (fn);
        char file[32];
        g_snprintf (file, sizeof file, "%d.bin", i);
        cJSON_AddStringToObject (e, "file", file);
      }
    }
    g_free (host);
  }
  /* Every rank reaches this point (errors travel with ok). */
  if (!sg_rt_all_ok (ctx, ok)) {
    if (ok)
      g_set_error (error, SG_RT_ERROR, SG_RT_ERROR_IO, "another rank failed to read its outputs");
    cJSON_Delete (list);
    g_free (mine);
    g_free (sums);
    g_free (nans);
    return false;
  }
  uint64_t *all = g_new0 (uint64_t, (size_t)MAX (n, 1) * (size_t)ctx->world);
  MPI_OR_ABORT (MPI_Allgather (mine, n, MPI_UINT64_T, all, n, MPI_UINT64_T, ctx->world_comm));
  if (n > 0)
    MPI_OR_ABORT (MPI_Allreduce (MPI_IN_PLACE, nans, n, MPI_INT64_T, MPI_SUM, ctx->world_comm));
  if (write) {
    char *text = cJSON_Print (list);
    char *fn = g_build_filename (dump_dir, "outputs.json", NULL);
    ok = write_file (fn, text, strlen (text), error);
    g_free (fn);
    cJSON_free (text);
  }
  for (int32_t i = 0; i < n; i++) {
    cJSON *e = cJSON_GetArrayItem (list, i);
    if (cJSON_IsNull (cJSON_GetObjectItem (e, "name")))
      continue;
    cJSON *fnv = cJSON_AddArrayToObject (e, "fnv1a64_by_rank");
    for (int32_t r = 0; r < ctx->world; r++) {
      char h[17];
      g_snprintf (h, sizeof h, "%016" PRIx64, all[(size_t)r * (size_t)n + (size_t)i]);
      cJSON_AddItemToArray (fnv, cJSON_CreateString (h));
    }
    cJSON_AddNumberToObject (e, "sum_rank0", sums[i]);
    /* NaNs over all ranks. In exact mode unwritten and freed memory reads
     * as NaN, so a memory-planning bug shows up here. */
    cJSON_AddNumberToObject (e, "nan_count", (double)nans[i]);
    if (nans[i] > 0 && ctx->rank == 0)
      fprintf (stderr, "schedrun: warning: output %d (%s) holds %" PRId64 " NaN values%s\n", i,
               cJSON_GetObjectItem (e, "name")->valuestring, nans[i],
               ctx->opt.mode == SG_RT_MODE_EXACT
                   ? " (in exact mode, memory read before it is written or after it is freed "
                     "reads as NaN)"
                   : "");
  }
  g_free (all);
  g_free (mine);
  g_free (sums);
  g_free (nans);
  if (checksums != NULL)
    *checksums = list;
  else
    cJSON_Delete (list);
  return ok;
}
