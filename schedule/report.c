/* report.c: what the simulator found, as report JSON (docs/report-format.md),
 * a readable summary and a Chrome trace (ui.perfetto.dev, chrome://tracing).
 *
 * Every microsecond is rounded to 0.001 and every byte count is an integer,
 * so the same input gives byte-identical output. Names are looked up from
 * the graph at call time (ids change when a later pass permutes).
 * Requires: an SgSimResult of the graph as it is now. Invalidates: nothing.
 */
#include <string.h>

#include "schedule-private.h"

double
sg_report_round_us (double us)
{
  if (!isfinite (us))
    return 0.0;
  double r = round (us * 1000.0) / 1000.0;
  return r == 0.0 ? 0.0 : r; /* no "-0" */
}

void
sg_report_add_us (cJSON *o, const char *key, double us)
{
  cJSON_AddNumberToObject (o, key, sg_report_round_us (us));
}

cJSON *
sg_report_metrics (const SgGraph *g, const SgSimResult *r)
{
  g_return_val_if_fail (g && r, NULL);
  cJSON *m = cJSON_CreateObject ();
  cJSON_AddNumberToObject (m, "collectives", r->n_rows);
  cJSON_AddNumberToObject (m, "hidden", r->hidden);
  cJSON_AddNumberToObject (m, "partial", r->partial);
  cJSON_AddNumberToObject (m, "exposed", r->exposed);
  sg_report_add_us (m, "exposed_us", r->exposed_us);
  sg_report_add_us (m, "comm_us", r->comm_us);
  sg_report_add_us (m, "compute_us", r->compute_us);
  sg_report_add_us (m, "step_us", r->step_us);
  sg_report_add_us (m, "lower_bound_us", r->lower_bound_us);
  cJSON_AddNumberToObject (m, "peak_bytes", (double)r->peak_bytes);
  const SgLowerBound *b = &r->bound;
  cJSON *lb = cJSON_AddObjectToObject (m, "lower_bound");
  sg_report_add_us (lb, "compute_us", b->compute_us);
  sg_report_add_us (lb, "comm_stream_us", b->comm_stream_us);
  sg_report_add_us (lb, "critical_path_us", b->critical_path_us);
  sg_report_add_us (lb, "overlap_us", b->overlap_us);
  if (b->refined)
    sg_report_add_us (lb, "window_us", b->window_us);
  else
    cJSON_AddNullToObject (lb, "window_us");
  cJSON_AddStringToObject (lb, "binding", sg_lower_bound_binding (b));
  cJSON_AddNumberToObject (m, "gap", sg_report_gap (r));
  return m;
}

const char *
sg_lower_bound_binding (const SgLowerBound *b)
{
  /* the first term, in this order, that reaches the bound */
  const struct {
    const char *name;
    double us;
  } terms[] = {
    { "compute", b->compute_us },   { "comm_stream", b->comm_stream_us },
    { "critical_path", b->critical_path_us }, { "overlap", b->overlap_us },
    { "window", b->window_us },
  };
  for (size_t i = 0; i < G_N_ELEMENTS (terms); i++)
    if (terms[i].us >= b->lower_bound_us)
      return terms[i].name;
  return "compute";
}

double
sg_report_gap (const SgSimResult *r)
{
  if (!(r->lower_bound_us > 0.0))
    return 1.0;
  return round (r->step_us / r->lower_bound_us * 10000.0) / 10000.0;
}

static const char *
group_name (const SgGraph *g, int32_t grp)
{
  return grp >= 0 && grp < g->n_groups ? g->groups[grp].name : "";
}

cJSON *
sg_report_rows (const SgGraph *g, const SgSimResult *r)
{
  g_return_val_if_fail (g && r, NULL);
  cJSON *rows = cJSON_CreateArray ();
  for (int32_t i = 0; i < r->n_rows; i++) {
    const SgCollRow *row = &r->rows[i];
    const SgNode *n = &g->nodes[row->node];
    cJSON *o = cJSON_CreateObject ();
    cJSON_AddStringToObject (o, "name", n->name);
    cJSON_AddStringToObject (o, "kind", sg_op_name (n->kind));
    cJSON_AddStringToObject (o, "group", group_name (g, n->group));
    cJSON_AddNumberToObject (o, "bytes", (double)sg_node_comm_bytes (g, row->node));
    sg_report_add_us (o, "estimated_us", row->est_us);
    sg_report_add_us (o, "exposed_us", row->exposed_us);
    cJSON_AddStringToObject (o, "status", sg_exposure_name (row->status));
    cJSON_AddStringToObject (o, "source", sg_cost_source_name (n->est_src));
    sg_report_add_us (o, "start_us", row->start_us);
    sg_report_add_us (o, "end_us", row->end_us);
    if (row->hidden_by != SG_NO_NODE)
      cJSON_AddStringToObject (o, "hidden_by", g->nodes[row->hidden_by].name);
    else
      cJSON_AddNullToObject (o, "hidden_by");
    cJSON_AddNumberToObject (o, "n_hiding", row->n_hiding);
    if (row->wait != SG_NO_NODE)
      cJSON_AddStringToObject (o, "wait", g->nodes[row->wait].name);
    else
      cJSON_AddNullToObject (o, "wait");
    /* how long before its wait it ended (negative: the stall) */
    if (row->wait != SG_NO_NODE && r->node_start)
      sg_report_add_us (o, "slack_us", r->node_start[row->wait] - row->end_us);
    else
      cJSON_AddNullToObject (o, "slack_us");
    cJSON_AddItemToArray (rows, o);
  }
  return rows;
}

static void
fmt_bytes (char *buf, size_t len, uint64_t b)
{
  if (b >= (1ull << 30))
    g_snprintf (buf, len, "%.2f GiB", (double)b / (double)(1ull << 30));
  else if (b >= (1ull << 20))
    g_snprintf (buf, len, "%.2f MiB", (double)b / (double)(1ull << 20));
  else if (b >= (1ull << 10))
    g_snprintf (buf, len, "%.2f KiB", (double)b / (double)(1ull << 10));
  else
    g_snprintf (buf, len, "%" G_GUINT64_FORMAT " B", b);
}

void
sg_report_print_summary (FILE *out, const char *label, const SgGraph *g, const SgSimResult *r)
{
  g_return_if_fail (out && g && r);
  char peak[32];
  fmt_bytes (peak, sizeof peak, r->peak_bytes);
  double eff = r->step_us > 0.0 ? 100.0 * r->lower_bound_us / r->step_us : 100.0;
  fprintf (out, "%s:\n", label ? label : "order");
  fprintf (out, "  step %.3f us (lower bound %.3f us, %.1f%%), compute %.3f us, comm %.3f us\n",
           r->step_us, r->lower_bound_us, eff, r->compute_us, r->comm_us);
  fprintf (out, "  gap %.4fx over the lower bound (binding term: %s)\n", sg_report_gap (r),
           sg_lower_bound_binding (&r->bound));
  fprintf (out, "  collectives %d: %d hidden, %d partial, %d exposed; exposed %.3f us\n",
           r->n_rows, r->hidden, r->partial, r->exposed, r->exposed_us);
  fprintf (out, "  peak memory %s\n", peak);
  /* The five worst offenders, largest exposure first (ties: issue order):
   * five linear selections, so the summary stays O(n) on huge graphs. */
  enum { SHOW = 5 };
  int32_t picked[SHOW];
  for (int32_t shown = 0; shown < SHOW; shown++) {
    int32_t best = -1;
    for (int32_t i = 0; i < r->n_rows; i++) {
      bool taken = false;
      for (int32_t k = 0; k < shown; k++)
        taken |= picked[k] == i;
      if (!taken && r->rows[i].status != SG_EXPOSURE_HIDDEN
          && (best < 0 || r->rows[i].exposed_us > r->rows[best].exposed_us))
        best = i;
    }
    if (best < 0)
      break;
    picked[shown] = best;
    const SgCollRow *row = &r->rows[best];
    const SgNode *n = &g->nodes[row->node];
    fprintf (out, "  %-8s %-32s %-14s group %-4s est %10.3f us exposed %10.3f us\n",
             sg_exposure_name (row->status), n->name, sg_op_name (n->kind),
             group_name (g, n->group), row->est_us, row->exposed_us);
  }
}

static void
trace_event (cJSON *ev, const char *name, const char *cat, int tid, double ts, double dur,
             cJSON *args)
{
  cJSON *e = cJSON_CreateObject ();
  cJSON_AddStringToObject (e, "name", name);
  cJSON_AddStringToObject (e, "cat", cat);
  cJSON_AddStringToObject (e, "ph", "X");
  cJSON_AddNumberToObject (e, "pid", 0);
  cJSON_AddNumberToObject (e, "tid", tid);
  sg_report_add_us (e, "ts", ts);
  sg_report_add_us (e, "dur", dur);
  cJSON_AddItemToObject (e, "args", args);
  cJSON_AddItemToArray (ev, e);
}

static void
thread_name (cJSON *ev, int tid, const char *name)
{
  cJSON *e = cJSON_CreateObject ();
  cJSON_AddStringToObject (e, "name", "thread_name");
  cJSON_AddStringToObject (e, "ph", "M");
  cJSON_AddNumberToObject (e, "pid", 0);
  cJSON_AddNumberToObject (e, "tid", tid);
  cJSON *a = cJSON_AddObjectToObject (e, "args");
  cJSON_AddStringToObject (a, "name", name);
  cJSON_AddItemToArray (ev, e);
  e = cJSON_CreateObject ();
  cJSON_AddStringToObject (e, "name", "thread_sort_index");
  cJSON_AddStringToObject (e, "ph", "M");
  cJSON_AddNumberToObject (e, "pid", 0);
  cJSON_AddNumberToObject (e, "tid", tid);
  a = cJSON_AddObjectToObject (e, "args");
  cJSON_AddNumberToObject (a, "sort_index", tid);
  cJSON_AddItemToArray (ev, e);
}

cJSON *
sg_trace_build (const SgGraph *g, const SgSimResult *r)
{
  g_return_val_if_fail (g && r && r->node_start && r->n_nodes == g->n_nodes, NULL);
  cJSON *root = cJSON_CreateObject ();
  cJSON *ev = cJSON_AddArrayToObject (root, "traceEvents");
  cJSON *pm = cJSON_CreateObject ();
  cJSON_AddStringToObject (pm, "name", "process_name");
  cJSON_AddStringToObject (pm, "ph", "M");
  cJSON_AddNumberToObject (pm, "pid", 0);
  cJSON_AddNumberToObject (pm, "tid", 0);
  cJSON *pa = cJSON_AddObjectToObject (pm, "args");
  /* the file name alone: the same trace however the path was spelt */
  g_autofree char *file = g_path_get_basename (g->source);
  g_autofree char *pname = g_strdup_printf ("schedgraph (predicted) %s rank %d", file,
                                            g->rank);
  cJSON_AddStringToObject (pa, "name", pname);
  cJSON_AddItemToArray (ev, pm);
  thread_name (ev, 0, "compute");
  for (int32_t i = 0; i < g->n_groups; i++) {
    g_autofree char *t = g_strdup_printf ("comm group %s", g->groups[i].name);
    thread_name (ev, 1 + i, t);
  }
  /* Compute and stalls in id order, then collectives in issue order; the
   * times come from the result, so any order's result draws correctly. */
  for (SgNodeId x = 0; x < g->n_nodes; x++) {
    const SgNode *n = &g->nodes[x];
    SgRole role = sg_sched_role (n);
    if (role == SG_ROLE_COLL)
      continue;
    double dur = r->node_end[x] - r->node_start[x];
    if (role == SG_ROLE_COMPUTE && sg_sched_cost (n) <= 0.0)
      continue;
    if (role == SG_ROLE_WAIT && dur <= 0.0)
      continue;
    cJSON *args = cJSON_CreateObject ();
    cJSON_AddStringToObject (args, "op", sg_op_name (n->kind));
    sg_report_add_us (args, "est_us", sg_sched_cost (n));
    cJSON_AddStringToObject (args, "source", sg_cost_source_name (n->est_src));
    trace_event (ev, n->name, role == SG_ROLE_WAIT ? "stall" : "compute", 0, r->node_start[x],
                 dur, args);
  }
  for (int32_t i = 0; i < r->n_rows; i++) {
    const SgCollRow *row = &r->rows[i];
    const SgNode *n = &g->nodes[row->node];
    cJSON *args = cJSON_CreateObject ();
    cJSON_AddStringToObject (args, "op", sg_op_name (n->kind));
    sg_report_add_us (args, "est_us", row->est_us);
    cJSON_AddStringToObject (args, "source", sg_cost_source_name (n->est_src));
    cJSON_AddNumberToObject (args, "bytes", (double)sg_node_comm_bytes (g, row->node));
    sg_report_add_us (args, "exposed_us", row->exposed_us);
    cJSON_AddStringToObject (args, "status", sg_exposure_name (row->status));
    if (row->hidden_by != SG_NO_NODE)
      cJSON_AddStringToObject (args, "hidden_by", g->nodes[row->hidden_by].name);
    trace_event (ev, n->name, "comm", 1 + n->group, row->start_us, row->end_us - row->start_us,
                 args);
  }
  cJSON_AddStringToObject (root, "displayTimeUnit", "ns");
  return root;
}
