/* fit.c: the contention model fitted to schedrun's measurements.
 *
 * Each run is re-simulated (schedule/'s simulator, the judge) in the order
 * that ran, rebuilt from its plan (the host issue order of its kernels,
 * collectives and waits; free nodes right after their inputs) or read from
 * an order file, with the candidate cluster fields set on the graph's
 * `cluster`. The loss compares the simulator's exposed time, step time and
 * collective durations (from when each could start, as schedrun's events
 * time them) with the report's. Search: coordinate descent over a grid per
 * field, deterministic. Only fit runs enter the search; judge runs are
 * scored after it.
 * Mirrors: the calibration of tests/estimate/test_measured.c
 * (reduce_slowdown), done for any field over any set of runs.
 * Requires: graphs, profiles, plans and reports on disk. Invalidates:
 * nothing.
 */
#include "fit.h"

#include <math.h>
#include <string.h>

#include "estimate.h"
#include "graph.h"
#include "plan.h"
#include "schedule.h"
#include "sgfit-private.h"
#include "textio.h"

G_DEFINE_QUARK (sg-fit-error-quark, sg_fit_error)

#define MIN_BYTES (1u << 20) /* collectives below this are latency, not contention */
#define BAR_REL 0.25
#define BAR_ABS_US 200.0
#define STEP_SCALE 0.10

typedef struct {
  char *name, *profile, *cluster, *graph_path;
  bool judge;
  SgGraph *g;
  char *graph_cluster; /* the graph's own `cluster` JSON, or NULL */
  SgNodeId *order;
  /* measured, per collective node (NaN: not in the report) */
  double *meas_us, *meas_exposed;
  double meas_step, meas_exposed_total;
} Run;

struct SgFit {
  GPtrArray *runs; /* Run * */
};

static void
run_free (gpointer p)
{
  Run *r = p;
  g_free (r->name);
  g_free (r->profile);
  g_free (r->cluster);
  g_free (r->graph_path);
  g_free (r->graph_cluster);
  g_free (r->order);
  g_free (r->meas_us);
  g_free (r->meas_exposed);
  if (r->g)
    sg_graph_free (r->g);
  g_free (r);
}

void
sg_fit_free (SgFit *f)
{
  if (!f)
    return;
  g_ptr_array_unref (f->runs);
  g_free (f);
}

cJSON *
sg_fit_read_json (const char *path, const char *what, GError **error)
{
  g_autofree char *text = NULL;
  gsize len = 0;
  GError *io = NULL;
  if (!g_file_get_contents (path, &text, &len, &io)) {
    g_set_error (error, SG_FIT_ERROR, SG_FIT_ERROR_RUN, "%s %s: %s", what, path, io->message);
    g_error_free (io);
    return NULL;
  }
  GError *je = NULL;
  cJSON *j = sg_json_parse (text, len, &je); /* the rules of every reader (textio.h) */
  if (!j) {
    g_set_error (error, SG_FIT_ERROR, SG_FIT_ERROR_RUN, "%s %s: %s", what, path, je->message);
    g_error_free (je);
  }
  return j;
}

/* A binary min-heap of (key, node). */
typedef struct {
  int64_t key;
  SgNodeId id;
} HeapItem;
typedef struct {
  HeapItem *a;
  int32_t n;
} Heap;

static bool
heap_less (const HeapItem *x, const HeapItem *y)
{
  return x->key < y->key || (x->key == y->key && x->id < y->id);
}

static void
heap_push (Heap *h, int64_t key, SgNodeId id)
{
  int32_t i = h->n++;
  h->a[i] = (HeapItem){ key, id };
  while (i > 0 && heap_less (&h->a[i], &h->a[(i - 1) / 2])) {
    const HeapItem t = h->a[i];
    h->a[i] = h->a[(i - 1) / 2];
    h->a[(i - 1) / 2] = t;
    i = (i - 1) / 2;
  }
}

static SgNodeId
heap_pop (Heap *h)
{
  const SgNodeId top = h->a[0].id;
  h->a[0] = h->a[--h->n];
  for (int32_t i = 0;;) {
    int32_t m = i;
    for (int32_t c = 2 * i + 1; c <= 2 * i + 2; c++)
      if (c < h->n && heap_less (&h->a[c], &h->a[m]))
        m = c;
    if (m == i)
      break;
    const HeapItem t = h->a[i];
    h->a[i] = h->a[m];
    h->a[m] = t;
    i = m;
  }
  return top;
}

/* The order a plan ran: its kernels, collectives and named waits in issue
 * order; every other node (views, placeholders, getitems) right after the
 * last of its inputs. */
static SgNodeId *
order_from_plan (SgGraph *g, const char *path, GError **error)
{
  g_autoptr (SgPlan) plan = sg_plan_load (path, error);
  if (!plan)
    return NULL;
  sg_graph_fill_users (g);
  const int32_t n = g->n_nodes;
  g_autofree int64_t *key = g_new (int64_t, (size_t)MAX (n, 1));
  for (SgNodeId i = 0; i < n; i++)
    key[i] = INT64_MIN;
  for (int32_t p = 0; p < plan->n_ins; p++) {
    const SgPlanIns *ins = &plan->ins[p];
    if (!ins->name || (ins->kind != SG_INS_KERNEL && ins->kind != SG_INS_COLLECTIVE
                       && ins->kind != SG_INS_WAIT_EVENT))
      continue;
    const SgNodeId id = sg_graph_lookup (g, ins->name);
    if (id == SG_NO_NODE) {
      g_set_error (error, SG_FIT_ERROR, SG_FIT_ERROR_RUN,
                   "%s: instruction %d names %s, which the graph does not have (a bucketed "
                   "or decomposed plan? fit on plans made with --no-bucket, and name the "
                   "graph schedgraph --emit-graph wrote for the plan)", path, p, ins->name);
      return NULL;
    }
    key[id] = 2 * (int64_t)p;
  }
  /* Kahn's algorithm, smallest key first (ties by id): free nodes take
   * 2 x (their latest input's position) + 1 */
  g_autofree uint32_t *need = g_new0 (uint32_t, (size_t)MAX (n, 1));
  g_autofree int64_t *at = g_new (int64_t, (size_t)MAX (n, 1)); /* position of the latest input */
  Heap h = { g_new (HeapItem, (size_t)MAX (n, 1)), 0 };
  for (SgNodeId i = 0; i < n; i++) {
    sg_node_inputs (g, i, &need[i]);
    at[i] = -1;
    if (need[i] == 0)
      heap_push (&h, key[i] != INT64_MIN ? key[i] : -1, i);
  }
  SgNodeId *order = g_new (SgNodeId, (size_t)MAX (n, 1));
  int32_t done = 0;
  while (h.n > 0) {
    const SgNodeId best = heap_pop (&h);
    order[done++] = best;
    const int64_t pos = key[best] != INT64_MIN ? key[best] / 2 : at[best];
    uint32_t nu;
    const SgNodeId *u = sg_node_users (g, best, &nu);
    for (uint32_t j = 0; j < nu; j++) {
      at[u[j]] = MAX (at[u[j]], pos);
      if (--need[u[j]] == 0)
        heap_push (&h, key[u[j]] != INT64_MIN ? key[u[j]] : 2 * at[u[j]] + 1, u[j]);
    }
  }
  g_free (h.a);
  g_assert (done == n);
  if (!sg_order_check (g, order, error)) {
    g_prefix_error (error, "%s: ", path);
    g_free (order);
    return NULL;
  }
  return order;
}

static bool
read_report (Run *r, const char *path, GError **error)
{
  cJSON *j = sg_fit_read_json (path, "report", error);
  if (!j)
    return false;
  const cJSON *m = cJSON_GetObjectItem (j, "measured");
  const cJSON *rows = cJSON_GetObjectItem (j, "collectives"), *c;
  bool ok = cJSON_IsObject (m) && cJSON_IsArray (rows)
            && cJSON_IsNumber (cJSON_GetObjectItem (m, "step_us"))
            && cJSON_IsNumber (cJSON_GetObjectItem (m, "exposed_us"));
  if (ok) {
    r->meas_step = cJSON_GetObjectItem (m, "step_us")->valuedouble;
    r->meas_exposed_total = cJSON_GetObjectItem (m, "exposed_us")->valuedouble;
    r->meas_us = g_new (double, (size_t)MAX (r->g->n_nodes, 1));
    r->meas_exposed = g_new (double, (size_t)MAX (r->g->n_nodes, 1));
    for (SgNodeId i = 0; i < r->g->n_nodes; i++)
      r->meas_us[i] = r->meas_exposed[i] = NAN;
    cJSON_ArrayForEach (c, rows)
    {
      const cJSON *nm = cJSON_GetObjectItem (c, "name");
      const cJSON *us = cJSON_GetObjectItem (c, "measured_us");
      const cJSON *ex = cJSON_GetObjectItem (c, "exposed_us");
      const SgNodeId id = cJSON_IsString (nm) ? sg_graph_lookup (r->g, nm->valuestring)
                                              : SG_NO_NODE;
      if (id == SG_NO_NODE || !cJSON_IsNumber (us) || !cJSON_IsNumber (ex)) {
        ok = false;
        break;
      }
      r->meas_us[id] = us->valuedouble;
      r->meas_exposed[id] = ex->valuedouble;
    }
  }
  if (!ok)
    g_set_error (error, SG_FIT_ERROR, SG_FIT_ERROR_RUN,
                 "report %s: not a schedrun report of this graph (measured step_us and "
                 "exposed_us, collectives by name with measured_us and exposed_us)", path);
  cJSON_Delete (j);
  return ok;
}

static bool estimate (Run *r, const SgFitAxis *axes, const double *values, int n, GError **error);

static char *
rel_path (const char *dir, const cJSON *run, const char *key)
{
  const cJSON *v = cJSON_GetObjectItem (run, key);
  if (!cJSON_IsString (v))
    return NULL;
  return g_path_is_absolute (v->valuestring) ? g_strdup (v->valuestring)
                                             : g_build_filename (dir, v->valuestring, NULL);
}

static Run *
load_run (const char *dir, const cJSON *jr, int index, GError **error)
{
  Run *r = g_new0 (Run, 1);
  const cJSON *nm = cJSON_GetObjectItem (jr, "name"), *set = cJSON_GetObjectItem (jr, "set");
  r->name = cJSON_IsString (nm) ? g_strdup (nm->valuestring) : g_strdup_printf ("run %d", index);
  r->graph_path = rel_path (dir, jr, "graph");
  r->profile = rel_path (dir, jr, "profile");
  r->cluster = rel_path (dir, jr, "cluster");
  g_autofree char *plan = rel_path (dir, jr, "plan"), *order = rel_path (dir, jr, "order");
  g_autofree char *report = rel_path (dir, jr, "report");
  if (!r->graph_path || !report || !(plan || order) || !cJSON_IsString (set)
      || (strcmp (set->valuestring, "fit") != 0 && strcmp (set->valuestring, "judge") != 0)) {
    g_set_error (error, SG_FIT_ERROR, SG_FIT_ERROR_MANIFEST,
                 "runs[%d] (%s): needs graph, plan or order, report and set (fit or judge)",
                 index, r->name);
    goto fail;
  }
  r->judge = strcmp (set->valuestring, "judge") == 0;
  if (!(r->g = sg_graph_load (r->graph_path, error)))
    goto fail;
  r->graph_cluster = g_strdup (r->g->cluster_json);
  r->order = plan ? order_from_plan (r->g, plan, error) : sg_order_load (r->g, order, error);
  /* the graph's own cluster, and the profile checked once */
  if (!r->order || !read_report (r, report, error) || !estimate (r, NULL, NULL, 0, error))
    goto fail;
  return r;
fail:
  g_prefix_error (error, "%s: ", r->name);
  run_free (r);
  return NULL;
}

SgFit *
sg_fit_load (const char *path, GError **error)
{
  cJSON *j = sg_fit_read_json (path, "manifest", error);
  if (!j)
    return NULL;
  g_autofree char *dir = g_path_get_dirname (path);
  SgFit *f = g_new0 (SgFit, 1);
  f->runs = g_ptr_array_new_with_free_func (run_free);
  const cJSON *runs = cJSON_GetObjectItem (j, "runs"), *jr;
  bool ok = cJSON_IsArray (runs) && cJSON_GetArraySize (runs) > 0;
  if (!ok)
    g_set_error (error, SG_FIT_ERROR, SG_FIT_ERROR_MANIFEST, "%s: expected {\"runs\": [...]}",
                 path);
  int i = 0;
  cJSON_ArrayForEach (jr, runs)
  {
    Run *r = ok ? load_run (dir, jr, i++, error) : NULL;
    if (!r) {
      ok = false;
      break;
    }
    g_ptr_array_add (f->runs, r);
  }
  cJSON_Delete (j);
  if (!ok) {
    sg_fit_free (f);
    return NULL;
  }
  return f;
}

/* --- one candidate -------------------------------------------------------------- */

/* Estimates @r's graph with the candidate fields set on its `cluster`. */
static bool
estimate (Run *r, const SgFitAxis *axes, const double *values, int n, GError **error)
{
  cJSON *c = r->graph_cluster ? cJSON_Parse (r->graph_cluster) : cJSON_CreateObject ();
  for (int i = 0; i < n; i++) {
    cJSON_DeleteItemFromObjectCaseSensitive (c, axes[i].field);
    cJSON_AddNumberToObject (c, axes[i].field, values[i]);
  }
  g_free (r->g->cluster_json);
  r->g->cluster_json = cJSON_PrintUnformatted (c);
  cJSON_Delete (c);
  SgConfig cfg;
  sg_config_init (&cfg);
  cfg.profile = r->profile;
  cfg.cluster = r->cluster;
  return sg_estimate_costs (r->g, &cfg, error);
}

typedef struct {
  double pred_exposed, pred_step, dur_sq;
  int32_t n_dur;
} Score;

static bool
score_run (Run *r, const SgFitAxis *axes, const double *values, int n, Score *s, GError **error)
{
  if (!estimate (r, axes, values, n, error))
    return false;
  SgSimResult res;
  if (!sg_simulate (r->g, r->order, &res, error))
    return false;
  memset (s, 0, sizeof *s);
  s->pred_exposed = res.exposed_us;
  s->pred_step = res.step_us;
  /* a collective's duration from when it could start (its group's stream
   * free), as schedrun's events on that stream time it */
  g_autofree double *group_free = g_new0 (double, (size_t)MAX (r->g->n_groups, 1));
  for (int32_t i = 0; i < res.n_rows; i++) {
    const SgCollRow *row = &res.rows[i];
    const SgNode *node = &r->g->nodes[row->node];
    const double from = MAX (row->issue_us, group_free[node->group]);
    group_free[node->group] = row->end_us;
    const double m = r->meas_us[row->node], p = row->end_us - from;
    if (!(m > 0) || !(p > 0) || sg_node_comm_bytes (r->g, row->node) < MIN_BYTES)
      continue;
    s->dur_sq += pow (log (p / m), 2);
    s->n_dur++;
  }
  sg_sim_result_clear (&res);
  return true;
}

static double
exposed_err (double pred, double meas)
{
  return (pred - meas) / MAX (BAR_REL * meas, BAR_ABS_US);
}

static double
run_loss (const Run *r, const Score *s)
{
  const double e = exposed_err (s->pred_exposed, r->meas_exposed_total);
  const double st = r->meas_step > 0 ? (s->pred_step / r->meas_step - 1.0) / STEP_SCALE : 0.0;
  return e * e + st * st + (s->n_dur ? s->dur_sq / s->n_dur : 0.0);
}

bool
sg_fit_loss (SgFit *f, const SgFitAxis *axes, const double *values, int n_axes, const char *set,
             double *loss, GError **error)
{
  const bool judge = strcmp (set, "judge") == 0;
  double sum = 0;
  int32_t k = 0;
  for (guint i = 0; i < f->runs->len; i++) {
    Run *r = f->runs->pdata[i];
    if (r->judge != judge)
      continue;
    Score s;
    if (!score_run (r, axes, values, n_axes, &s, error)) {
      g_prefix_error (error, "%s: ", r->name);
      return false;
    }
    sum += run_loss (r, &s);
    k++;
  }
  *loss = k ? sum / k : 0.0;
  return true;
}

/* Points of the axes' grid (0 when there are more than @cap). */
static int64_t
grid_points (const SgFitAxis *axes, int n_axes, int64_t cap)
{
  int64_t n = 1;
  for (int a = 0; a < n_axes && n <= cap; a++)
    n *= (int64_t)floor ((axes[a].hi - axes[a].lo) / axes[a].step + 1e-9) + 1;
  return n <= cap ? n : 0;
}

/* The best point of the whole grid into @values (ties: the first in order,
 * the last axis fastest), when it is small enough to walk: the result is a
 * grid point even when the start value is not on the grid. */
static bool
grid_start (SgFit *f, const SgFitAxis *axes, double *values, int n_axes, double *loss,
            GError **error)
{
  const int64_t n = grid_points (axes, n_axes, SG_FIT_GRID_MAX);
  if (n > 0)
    *loss = INFINITY;
  double v[16];
  for (int64_t k = 0; k < n; k++) {
    int64_t rest = k;
    for (int a = n_axes - 1; a >= 0; a--) {
      const int64_t m = (int64_t)floor ((axes[a].hi - axes[a].lo) / axes[a].step + 1e-9) + 1;
      v[a] = axes[a].lo + (double)(rest % m) * axes[a].step;
      rest /= m;
    }
    double l;
    if (!sg_fit_loss (f, axes, v, n_axes, "fit", &l, error))
      return false;
    if (l < *loss - 1e-12) {
      *loss = l;
      memcpy (values, v, sizeof *v * (size_t)n_axes);
    }
  }
  return true;
}

bool
sg_fit_search (SgFit *f, const SgFitAxis *axes, double *values, int n_axes, int rounds,
               double *loss, GError **error)
{
  g_return_val_if_fail (n_axes <= 16, false);
  if (!sg_fit_loss (f, axes, values, n_axes, "fit", loss, error)
      || !grid_start (f, axes, values, n_axes, loss, error))
    return false;
  for (int round = 0; round < rounds; round++) {
    bool moved = false;
    for (int a = 0; a < n_axes; a++) {
      const double keep = values[a];
      double best = keep;
      for (double v = axes[a].lo; v <= axes[a].hi + 1e-9; v += axes[a].step) {
        values[a] = v;
        double l;
        if (!sg_fit_loss (f, axes, values, n_axes, "fit", &l, error))
          return false;
        if (l < *loss - 1e-12) { /* strictly better: ties keep the earlier value */
          *loss = l;
          best = v;
        }
      }
      values[a] = best;
      moved |= best != keep;
    }
    if (!moved)
      break;
  }
  return true;
}

bool
sg_fit_write_orders (SgFit *f, const char *dir, GError **error)
{
  for (guint i = 0; i < f->runs->len; i++) {
    const Run *r = f->runs->pdata[i];
    g_autofree char *base = g_strdup (r->name);
    for (char *c = base; *c; c++)
      if (!g_ascii_isalnum (*c) && *c != '-' && *c != '_')
        *c = '.';
    g_autofree char *file = g_strconcat (base, ".order.json", NULL);
    g_autofree char *path = g_build_filename (dir, file, NULL);
    GString *s = g_string_new ("[");
    for (SgNodeId p = 0; p < r->g->n_nodes; p++)
      g_string_append_printf (s, "%s\"%s\"", p ? "," : "", r->g->nodes[r->order[p]].name);
    g_string_append (s, "]\n");
    const bool ok = g_file_set_contents (path, s->str, (gssize)s->len, error);
    g_string_free (s, TRUE);
    if (!ok)
      return false;
  }
  return true;
}

/* --- axes and report ------------------------------------------------------------ */

bool
sg_fit_parse_axis (const char *text, SgFitAxis *out, GError **error)
{
  memset (out, 0, sizeof *out);
  const char *eq = strchr (text, '=');
  if (eq && (size_t)(eq - text) < sizeof out->field) {
    memcpy (out->field, text, (size_t)(eq - text));
    if (sscanf (eq + 1, "%lf:%lf:%lf", &out->lo, &out->hi, &out->step) == 3 && out->step > 0
        && out->hi >= out->lo && (out->hi - out->lo) / out->step <= 1000)
      return true;
  }
  g_set_error (error, SG_FIT_ERROR, SG_FIT_ERROR_ARGS,
               "axis \"%s\": expected FIELD=LO:HI:STEP with LO <= HI, STEP > 0, at most 1000 "
               "values", text);
  return false;
}

int
sg_fit_default_axes (const SgFit *f, SgFitAxis *axes)
{
  bool pairs = false;
  for (guint i = 0; i < f->runs->len; i++) {
    const Run *r = f->runs->pdata[i];
    pairs |= !r->judge && sg_cost_contention_pairs (sg_graph_cost_model (r->g)) > 0;
  }
  static const SgFitAxis scales[] = {
    { "contention_comm_scale", 0, 3, 0.25 },
    { "contention_compute_scale", 0, 3, 0.25 },
    { "contention_wait_scale", 0, 1.5, 0.25 },
  };
  static const SgFitAxis global[] = {
    { "comm_slowdown", 1, 2, 0.05 },
    { "reduce_slowdown", 1, 3, 0.05 },
    { "compute_slowdown", 1, 2, 0.05 },
    { "comm_start_wait", 0, 1, 0.125 },
  };
  const SgFitAxis *src = pairs ? scales : global;
  const int n = pairs ? (int)G_N_ELEMENTS (scales) : (int)G_N_ELEMENTS (global);
  memcpy (axes, src, sizeof *axes * (size_t)n);
  return n;
}

bool
sg_fit_start (SgFit *f, const SgFitAxis *axes, double *values, int n_axes, GError **error)
{
  Run *r = f->runs->pdata[0];
  if (!estimate (r, axes, values, 0, error))
    return false;
  const SgCostModel *cm = sg_graph_cost_model (r->g);
  const SgContention *c = sg_cost_model_contention (cm);
  for (int i = 0; i < n_axes; i++) {
    const char *k = axes[i].field;
    values[i] = strcmp (k, "comm_slowdown") == 0     ? c->comm_slowdown
                : strcmp (k, "reduce_slowdown") == 0  ? c->reduce_slowdown
                : strcmp (k, "compute_slowdown") == 0 ? c->compute_slowdown
                : strcmp (k, "comm_start_wait") == 0  ? sg_cost_model_comm_start_wait (cm)
                                                      : 1.0;
  }
  return true;
}

cJSON *
sg_fit_report (SgFit *f, const SgFitAxis *axes, const double *values, int n_axes, GError **error)
{
  cJSON *root = cJSON_CreateObject ();
  cJSON *fitted = cJSON_AddObjectToObject (root, "fitted");
  for (int i = 0; i < n_axes; i++)
    cJSON_AddNumberToObject (fitted, axes[i].field, values[i]);
  cJSON *jruns = cJSON_AddArrayToObject (root, "runs");
  int32_t within[2] = { 0 }, count[2] = { 0 }, agree[2] = { 0 }, pairs[2] = { 0 };
  double loss[2] = { 0 };
  g_autofree double *pe = g_new0 (double, MAX (f->runs->len, 1));
  for (guint i = 0; i < f->runs->len; i++) {
    Run *r = f->runs->pdata[i];
    Score s;
    if (!score_run (r, axes, values, n_axes, &s, error)) {
      cJSON_Delete (root);
      return NULL;
    }
    pe[i] = s.pred_exposed;
    const bool ok = fabs (exposed_err (s.pred_exposed, r->meas_exposed_total)) <= 1.0;
    within[r->judge] += ok;
    count[r->judge]++;
    loss[r->judge] += run_loss (r, &s);
    cJSON *o = cJSON_CreateObject ();
    cJSON_AddStringToObject (o, "name", r->name);
    cJSON_AddStringToObject (o, "set", r->judge ? "judge" : "fit");
    cJSON_AddNumberToObject (o, "predicted_exposed_us", round (s.pred_exposed * 1e3) / 1e3);
    cJSON_AddNumberToObject (o, "measured_exposed_us", r->meas_exposed_total);
    cJSON_AddNumberToObject (o, "predicted_step_us", round (s.pred_step * 1e3) / 1e3);
    cJSON_AddNumberToObject (o, "measured_step_us", r->meas_step);
    cJSON_AddNumberToObject (o, "duration_rms_log",
                             s.n_dur ? round (sqrt (s.dur_sq / s.n_dur) * 1e4) / 1e4 : 0.0);
    cJSON_AddBoolToObject (o, "exposed_within_bar", ok);
    cJSON_AddItemToArray (jruns, o);
  }
  /* orders of one graph in one set: does the prediction rank them as measured? */
  for (guint i = 0; i < f->runs->len; i++)
    for (guint j = i + 1; j < f->runs->len; j++) {
      const Run *a = f->runs->pdata[i], *b = f->runs->pdata[j];
      if (a->judge != b->judge || strcmp (a->graph_path, b->graph_path) != 0
          || a->meas_exposed_total == b->meas_exposed_total)
        continue;
      pairs[a->judge]++;
      agree[a->judge] += (pe[i] < pe[j]) == (a->meas_exposed_total < b->meas_exposed_total);
    }
  static const char *const sets[2] = { "fit", "judge" };
  for (int k = 0; k < 2; k++) {
    cJSON *o = cJSON_AddObjectToObject (root, sets[k]);
    cJSON_AddNumberToObject (o, "runs", count[k]);
    cJSON_AddNumberToObject (o, "loss", count[k] ? round (loss[k] / count[k] * 1e4) / 1e4 : 0.0);
    cJSON_AddNumberToObject (o, "exposed_within_bar", within[k]);
    cJSON_AddNumberToObject (o, "order_pairs", pairs[k]);
    cJSON_AddNumberToObject (o, "order_pairs_ranked_right", agree[k]);
  }
  return root;
}
