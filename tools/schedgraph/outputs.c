/* outputs.c: what schedgraph prints and writes.
 *
 * The stdout summary (graph counts, then one block per simulated order,
 * bucketing, pass timings), the report JSON (docs/report-format.md: input,
 * given, scheduled metrics, per-collective rows, the bucket section, pass
 * timings), the Chrome trace, the final graph (--emit-graph, graph/write.c)
 * and the plan. Everything is built in memory
 * first; files are then written each to a temporary file in the target's
 * directory and renamed into place, and if any write fails the files this
 * run already placed are removed: a failed run leaves nothing.
 *
 * Requires: the Run filled by the pipeline (schedgraph.c).
 */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "schedgraph-private.h"
#include "textio.h"

void
run_clear (Run *r)
{
  if (r->have_given)
    sg_sim_result_clear (&r->given);
  cJSON_Delete (r->input_metrics);
  cJSON_Delete (r->input_rows);
  cJSON_Delete (r->given_metrics);
  cJSON_Delete (r->given_rows);
  if (r->summary)
    g_string_free (r->summary, TRUE);
  sg_plan_free (r->plan);
}

/* --- summary ----------------------------------------------------------------- */

static bool
is_compute (SgOpKind kind)
{
  switch (sg_op_class (kind)) {
  case SG_CLASS_INPUT:
  case SG_CLASS_OUTPUT:
  case SG_CLASS_GETITEM:
  case SG_CLASS_VIEW:
  case SG_CLASS_COLLECTIVE:
  case SG_CLASS_WAIT: return false;
  default: return true;
  }
}

static void
append_bytes (GString *s, uint64_t b)
{
  g_string_append_printf (s, "%" G_GUINT64_FORMAT " B", b);
  if (b >= ((uint64_t)1 << 20))
    g_string_append_printf (s, " (%.1f MiB)", (double)b / (double)(1 << 20));
}

void
summary_graph (Run *r)
{
  const SgGraph *g = r->g;
  GString *s = r->summary;
  int32_t compute = 0, colls = 0, waits = 0, inputs = 0;
  uint64_t comm = 0;
  size_t ng = g->n_groups > 0 ? (size_t)g->n_groups : 1;
  g_autofree int32_t *count = g_new0 (int32_t, (size_t)SG_OP_N_KINDS * ng);
  g_autofree uint64_t *bytes = g_new0 (uint64_t, (size_t)SG_OP_N_KINDS * ng);
  for (SgNodeId i = 0; i < g->n_nodes; i++) {
    const SgNode *n = &g->nodes[i];
    compute += is_compute (n->kind);
    waits += n->kind == SG_OP_WAIT;
    inputs += sg_op_class (n->kind) == SG_CLASS_INPUT;
    if (sg_op_is_collective (n->kind) && n->group >= 0) {
      uint64_t b = sg_node_comm_bytes (g, i);
      colls++;
      comm += b;
      count[(size_t)n->kind * ng + (size_t)n->group]++;
      bytes[(size_t)n->kind * ng + (size_t)n->group] += b;
    }
  }
  g_string_append_printf (s, "graph: %s (world_size %d, rank %d, %d groups)\n", g->source,
                          g->world_size, g->rank, g->n_groups);
  g_string_append_printf (
      s, "nodes: %d (compute %d, inputs %d, collectives %d, waits %d, views/other %d)\n",
      g->n_nodes, compute, inputs, colls, waits, g->n_nodes - compute - inputs - colls - waits);
  if (colls) {
    g_string_append_printf (s, "collectives:\n  %-24s %-8s %6s %6s %16s\n", "kind", "group",
                            "ranks", "count", "bytes");
    for (int k = 0; k < SG_OP_N_KINDS; k++)
      for (size_t gr = 0; gr < (size_t)g->n_groups; gr++) {
        size_t at = (size_t)k * ng + gr;
        if (count[at])
          g_string_append_printf (s, "  %-24s %-8s %6d %6d %16" G_GUINT64_FORMAT "\n",
                                  sg_op_name ((SgOpKind)k), g->groups[gr].name,
                                  g->groups[gr].n_ranks, count[at], bytes[at]);
      }
  }
  g_string_append (s, "bytes communicated: ");
  append_bytes (s, comm);
  g_string_append (s, "\npeak live tensor bytes (input order): ");
  append_bytes (s, sg_graph_peak_bytes (g, NULL));
  g_string_append_c (s, '\n');
}

void
summary_sim (Run *r, const char *label, const SgSimResult *sim)
{
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream (&buf, &len);
  if (!f)
    return;
  sg_report_print_summary (f, label, r->g, sim);
  fclose (f);
  g_string_append_len (r->summary, buf, (gssize)len);
  free (buf);
}

void
summary_finish (Run *r)
{
  GString *s = r->summary;
  sg_decompose_summary (r->g, s);
  const SgBucketStats *bs = sg_bucket_stats (r->g);
  if (bs && bs->ran) {
    g_string_append_printf (s,
                            "bucketing: %d collectives -> %d (%d buckets, cap %" G_GUINT64_FORMAT
                            " B); exposed %.3f -> %.3f us, step %.3f -> %.3f us",
                            bs->collectives_before, bs->collectives_after, bs->buckets,
                            bs->cap_bytes, bs->exposed_before_us, bs->exposed_after_us,
                            bs->step_before_us, bs->step_after_us);
    /* Why compute grows after bucketing: the buckets' copies are compute. */
    int32_t copies = 0;
    double copy_us = 0;
    for (SgNodeId i = 0; i < r->g->n_nodes; i++)
      if (sg_op_class (r->g->nodes[i].kind) == SG_CLASS_BUCKET) {
        copies++;
        copy_us += r->g->nodes[i].est_us;
      }
    if (copies)
      g_string_append_printf (s, "; compute +%.3f us: %d pack/unpack copies into and out of "
                              "the buckets", copy_us, copies);
    g_string_append_c (s, '\n');
  }
  g_string_append (s, "passes:");
  for (size_t i = 0; i < r->n_times; i++)
    g_string_append_printf (s, "%s %s %.3f ms", i ? "," : "", r->times[i].name, r->times[i].ms);
  g_string_append_c (s, '\n');
}

/* --- report ------------------------------------------------------------------- */

static cJSON *
build_report (Run *r)
{
  const SgGraph *g = r->g;
  cJSON *o = cJSON_CreateObject ();
  cJSON_AddStringToObject (o, "format", "schedgraph.report");
  cJSON_AddNumberToObject (o, "version", 1);
  /* the file name alone, as in the plan: the same report however the path
   * was spelt */
  g_autofree char *graph_name = g_path_get_basename (r->cli->graph_path);
  cJSON_AddStringToObject (o, "graph", graph_name);
  cJSON_AddNumberToObject (o, "nodes", r->input_nodes);
  cJSON_AddNumberToObject (o, "nodes_final", g->n_nodes);
  cJSON_AddNumberToObject (o, "world_size", g->world_size);
  cJSON_AddNumberToObject (o, "rank", g->rank);
  const SgCostModel *cm = sg_graph_cost_model (g);
  cJSON_AddStringToObject (o, "cluster", cm ? sg_cost_model_cluster_name (cm) : "-");
  g_autofree char *opts = sg_codegen_options_text (&r->cli->cfg);
  cJSON_AddStringToObject (o, "options", opts);
  if (r->input_metrics)
    cJSON_AddItemReferenceToObject (o, "input", r->input_metrics);
  if (r->given_metrics)
    cJSON_AddItemReferenceToObject (o, "given", r->given_metrics);
  if (r->final) {
    cJSON_AddItemToObject (o, "scheduled", sg_report_metrics (g, r->final));
    cJSON_AddItemToObject (o, "collectives", sg_report_rows (g, r->final));
  }
  if (r->input_rows)
    cJSON_AddItemReferenceToObject (o, "input_collectives", r->input_rows);
  if (r->given_rows)
    cJSON_AddItemReferenceToObject (o, "given_collectives", r->given_rows);
  cJSON_AddItemToObject (o, "decompose", sg_decompose_report (g));
  cJSON_AddItemToObject (o, "bucket", sg_bucket_report (g, NULL));
  cJSON *passes = cJSON_AddObjectToObject (o, "passes");
  for (size_t i = 0; i < r->n_times; i++)
    cJSON_AddNumberToObject (passes, r->times[i].name, sg_report_round_us (r->times[i].ms));
  return o;
}

/* --- writing ------------------------------------------------------------------- */

char *
outputs_clash (const Cli *cli)
{
  /* inputs first, then outputs; a cluster that is a preset name is no file */
  const char *cluster = cli->cfg.cluster;
  if (cluster && !g_file_test (cluster, G_FILE_TEST_EXISTS))
    cluster = NULL;
  const char *paths[] = { cli->graph_path, cli->order, cluster, cli->cfg.profile,
                          cli->output, cli->report, cli->trace, cli->emit_graph };
  const char *what[] = { "the graph", "the --order file", "the --cluster file",
                         "the --profile file", "-o", "--report", "--trace", "--emit-graph" };
  const size_t first_output = 4;
  for (size_t i = first_output; i < G_N_ELEMENTS (paths); i++)
    for (size_t j = 0; paths[i] && j < i; j++)
      if (paths[j] && sg_same_file (paths[i], paths[j]))
        return g_strdup_printf ("%s would overwrite %s ('%s' is '%s')", what[i], what[j],
                                paths[i], paths[j]);
  return NULL;
}

typedef enum { OUT_TRACE, OUT_REPORT, OUT_GRAPH, OUT_PLAN } OutputKind;

typedef struct {
  OutputKind kind;
  const char *path;
  char *text; /* NULL for the plan */
  size_t len;
} Output;

static bool
write_text (const char *path, const char *text, size_t len, GError **error)
{
  GError *e = NULL;
  if (g_file_set_contents (path, text, (gssize)len, &e))
    return true;
  g_set_error (error, SG_GRAPH_ERROR, SG_GRAPH_ERROR_IO, "cannot write: %s", e->message);
  g_error_free (e);
  return false;
}

/* @o as text (consumed); graphs unformatted: they are large and read by
 * programs. */
static char *
json_text (cJSON *o, bool formatted, size_t *len)
{
  char *s = formatted ? cJSON_Print (o) : cJSON_PrintUnformatted (o);
  cJSON_Delete (o);
  char *t = g_strconcat (s, "\n", NULL);
  cJSON_free (s);
  *len = strlen (t);
  return t;
}

bool
write_outputs (Run *r, GError **error)
{
  const Cli *cli = r->cli;
  Output outs[4];
  size_t n = 0;
  if (cli->trace && r->final)
    outs[n++] = (Output){ OUT_TRACE, cli->trace, NULL, 0 };
  if (cli->report)
    outs[n++] = (Output){ OUT_REPORT, cli->report, NULL, 0 };
  if (cli->emit_graph)
    outs[n++] = (Output){ OUT_GRAPH, cli->emit_graph, NULL, 0 };
  if (cli->output && r->plan)
    outs[n++] = (Output){ OUT_PLAN, cli->output, NULL, 0 };
  /* Every text before any file is touched. */
  for (size_t i = 0; i < n; i++) {
    if (outs[i].kind == OUT_TRACE)
      outs[i].text = json_text (sg_trace_build (r->g, r->final), true, &outs[i].len);
    else if (outs[i].kind == OUT_REPORT)
      outs[i].text = json_text (build_report (r), true, &outs[i].len);
    else if (outs[i].kind == OUT_GRAPH)
      outs[i].text = json_text (sg_graph_to_json (r->g), false, &outs[i].len);
  }
  /* Nothing reads the graph now (the plan is built): the plan's text, the
   * largest, is made without it beside. */
  r->final = NULL;
  g_clear_pointer (&r->g, sg_graph_free);
  bool ok = true;
  size_t done = 0;
  for (; ok && done < n; done++) {
    Output *o = &outs[done];
    r->error_file = o->path;
    ok = o->text ? write_text (o->path, o->text, o->len, error)
                 : sg_codegen_write_plan (r->plan, &cli->cfg, o->path, error);
  }
  if (!ok)
    for (size_t i = 0; i + 1 < done; i++)
      unlink (outs[i].path);
  else
    r->error_file = NULL;
  for (size_t i = 0; i < n; i++)
    g_free (outs[i].text);
  return ok;
}
