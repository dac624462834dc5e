/* sched_eval.c: evaluation driver for the scheduler (bench/bench_schedule.sh).
 *
 * Loads a graph, estimates, simulates the input order, an optional given
 * order (another tool's, --order FILE) and our scheduled order, and prints
 * one JSON object: {"graph", "nodes", "input": M, "given": M, "scheduled": M,
 * "variant", "ms": {"load", "estimate", "schedule", "simulate", "report"}}.
 * Independent of the schedgraph CLI so the scheduler can be measured alone.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "schedule.h"

static double
now_ms (void)
{
  return (double)g_get_monotonic_time () / 1000.0;
}

/* CPU time of the process: the machine is shared, wall time is noisy. */
static double
cpu_ms (void)
{
  struct timespec ts;
  clock_gettime (CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int
fail (GError *err)
{
  fprintf (stderr, "sched_eval: %s\n", err->message);
  g_error_free (err);
  return 1;
}

int
main (int argc, char **argv)
{
  g_autofree char *order_path = NULL, *trace_path = NULL, *dump_path = NULL;
  gboolean no_reorder = FALSE, rows = FALSE, aug_bench = FALSE, exact = FALSE;
  double peak_increase = SG_SCHEDULE_DEFAULT_MAX_PEAK_INCREASE;
  GOptionEntry entries[] = {
    { "order", 0, 0, G_OPTION_ARG_FILENAME, &order_path, "Evaluate this order too", "FILE" },
    { "no-reorder", 0, 0, G_OPTION_ARG_NONE, &no_reorder, "Keep the input order", NULL },
    { "rows", 0, 0, G_OPTION_ARG_NONE, &rows, "Include per-collective rows", NULL },
    { "exact", 0, 0, G_OPTION_ARG_NONE, &exact, "The exact scheduler (small graphs)", NULL },
    { "max-peak-increase", 0, 0, G_OPTION_ARG_DOUBLE, &peak_increase,
      "Allowed peak-memory growth (fraction)", "F" },
    { "aug-bench", 0, 0, G_OPTION_ARG_NONE, &aug_bench,
      "Time reachability queries between nearby collectives of one group", NULL },
    { "dump-order", 0, 0, G_OPTION_ARG_FILENAME, &dump_path, "Write our order (names)", "FILE" },
    { "trace", 0, 0, G_OPTION_ARG_FILENAME, &trace_path, "Write the scheduled trace", "FILE" },
    { NULL, 0, 0, 0, NULL, NULL, NULL },
  };
  GError *err = NULL;
  g_autoptr (GOptionContext) ctx = g_option_context_new ("GRAPH.json");
  g_option_context_add_main_entries (ctx, entries, NULL);
  if (!g_option_context_parse (ctx, &argc, &argv, &err))
    return fail (err);
  if (argc != 2) {
    fprintf (stderr, "usage: sched_eval [--order FILE] [--no-reorder] GRAPH.json\n");
    return 2;
  }
  double t0 = now_ms (), c0 = cpu_ms ();
  g_autoptr (SgGraph) g = sg_graph_load (argv[1], &err);
  if (!g)
    return fail (err);
  double t1 = now_ms (), c1 = cpu_ms ();
  SgConfig cfg;
  sg_config_init (&cfg);
  cfg.reorder = !no_reorder;
  cfg.exact = exact;
  cfg.max_peak_increase = peak_increase;
  if (!sg_estimate_costs (g, &cfg, &err))
    return fail (err);
  double t2 = now_ms (), c2 = cpu_ms ();
  SgSimResult in_r, given_r, sched_r;
  memset (&given_r, 0, sizeof given_r);
  if (!sg_simulate (g, NULL, &in_r, &err))
    return fail (err);
  cJSON *out = cJSON_CreateObject ();
  cJSON_AddStringToObject (out, "graph", argv[1]);
  cJSON_AddNumberToObject (out, "nodes", g->n_nodes);
  sg_lower_bound_refine (g, &in_r);
  cJSON_AddItemToObject (out, "input", sg_report_metrics (g, &in_r));
  if (order_path) {
    g_autofree SgNodeId *order = sg_order_load (g, order_path, &err);
    if (!order)
      return fail (err);
    if (!sg_simulate (g, order, &given_r, &err))
      return fail (err);
    sg_lower_bound_refine (g, &given_r);
    cJSON_AddItemToObject (out, "given", sg_report_metrics (g, &given_r));
    if (rows)
      cJSON_AddItemToObject (out, "given_collectives", sg_report_rows (g, &given_r));
  }
  double t3 = now_ms (), c3 = cpu_ms ();
  SgScheduleStats st;
  g_autofree SgNodeId *order = sg_schedule_compute (g, &cfg, &st, &err);
  if (!order)
    return fail (err);
  if (!sg_graph_permute (g, order, &err))
    return fail (err);
  double t4 = now_ms (), c4 = cpu_ms ();
  if (!sg_simulate (g, NULL, &sched_r, &err))
    return fail (err);
  double t5 = now_ms (), c5 = cpu_ms ();
  sg_lower_bound_refine (g, &sched_r);
  double t5b = now_ms ();
  cJSON_AddItemToObject (out, "scheduled", sg_report_metrics (g, &sched_r));
  if (rows)
    cJSON_AddItemToObject (out, "collectives", sg_report_rows (g, &sched_r));
  cJSON_AddStringToObject (out, "variant", st.variant_name);
  cJSON_AddNumberToObject (out, "pulled", st.n_pulled);
  cJSON_AddNumberToObject (out, "polished", st.n_polished);
  cJSON_AddNumberToObject (out, "early_waits", st.n_early_waits);
  cJSON_AddNumberToObject (out, "peak_limit_bytes", (double)st.peak_limit_bytes);
  if (dump_path) {
    cJSON *arr = cJSON_CreateArray ();
    for (SgNodeId i = 0; i < g->n_nodes; i++)
      cJSON_AddItemToArray (arr, cJSON_CreateString (g->nodes[i].name));
    char *s = cJSON_Print (arr);
    if (!g_file_set_contents (dump_path, s, -1, &err))
      return fail (err);
    cJSON_free (s);
    cJSON_Delete (arr);
  }
  if (trace_path) {
    cJSON *tr = sg_trace_build (g, &sched_r);
    char *s = cJSON_PrintUnformatted (tr);
    if (!g_file_set_contents (trace_path, s, -1, &err))
      return fail (err);
    cJSON_free (s);
    cJSON_Delete (tr);
  }
  double t6 = now_ms (), c6 = cpu_ms ();
  if (aug_bench) {
    /* What bucket/ asks: does collective a reach b (or b reach a), for each
     * collective and the next four of its group, in the scheduled order. */
    double a0 = now_ms ();
    SgAug *aug = sg_aug_new (g);
    double a1 = now_ms ();
    g_autofree SgNodeId *colls = g_new (SgNodeId, (size_t)g->n_nodes);
    int32_t nc = 0;
    for (SgNodeId i = 0; i < g->n_nodes; i++)
      if (sg_op_is_collective (g->nodes[i].kind))
        colls[nc++] = i;
    int64_t queries = 0, yes = 0;
    for (int32_t i = 0; i < nc; i++)
      for (int32_t j = i + 1, seen = 0; j < nc && seen < 4; j++) {
        if (g->nodes[colls[j]].group != g->nodes[colls[i]].group)
          continue;
        seen++;
        yes += sg_aug_reaches (aug, colls[i], colls[j]);
        yes += sg_aug_reaches (aug, colls[j], colls[i]);
        queries += 2;
      }
    double a2 = now_ms ();
    sg_aug_free (aug);
    cJSON *ab = cJSON_AddObjectToObject (out, "aug");
    cJSON_AddNumberToObject (ab, "build_ms", sg_report_round_us (a1 - a0));
    cJSON_AddNumberToObject (ab, "queries", (double)queries);
    cJSON_AddNumberToObject (ab, "reachable", (double)yes);
    cJSON_AddNumberToObject (ab, "query_us",
                             sg_report_round_us (queries ? 1000.0 * (a2 - a1) / (double)queries : 0));
  }
  cJSON *ms = cJSON_AddObjectToObject (out, "ms");
  cJSON_AddNumberToObject (ms, "load", sg_report_round_us (t1 - t0));
  cJSON_AddNumberToObject (ms, "estimate", sg_report_round_us (t2 - t1));
  cJSON_AddNumberToObject (ms, "simulate_input", sg_report_round_us (t3 - t2));
  cJSON_AddNumberToObject (ms, "schedule", sg_report_round_us (t4 - t3));
  cJSON_AddNumberToObject (ms, "simulate", sg_report_round_us (t5 - t4));
  cJSON_AddNumberToObject (ms, "report", sg_report_round_us (t6 - t5));
  cJSON_AddNumberToObject (ms, "bound", sg_report_round_us (t5b - t5));
  cJSON_AddNumberToObject (ms, "total", sg_report_round_us (t6 - t0));
  cJSON *cms = cJSON_AddObjectToObject (out, "cpu_ms");
  cJSON_AddNumberToObject (cms, "load", sg_report_round_us (c1 - c0));
  cJSON_AddNumberToObject (cms, "estimate", sg_report_round_us (c2 - c1));
  cJSON_AddNumberToObject (cms, "simulate_input", sg_report_round_us (c3 - c2));
  cJSON_AddNumberToObject (cms, "schedule", sg_report_round_us (c4 - c3));
  cJSON_AddNumberToObject (cms, "simulate", sg_report_round_us (c5 - c4));
  cJSON_AddNumberToObject (cms, "report", sg_report_round_us (c6 - c5));
  cJSON_AddNumberToObject (cms, "total", sg_report_round_us (c6 - c0));
  char *s = cJSON_Print (out);
  printf ("%s\n", s);
  cJSON_free (s);
  cJSON_Delete (out);
  sg_sim_result_clear (&in_r);
  sg_sim_result_clear (&given_r);
  sg_sim_result_clear (&sched_r);
  return 0;
}
