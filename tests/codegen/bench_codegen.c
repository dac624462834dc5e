/* bench_codegen.c: speed of codegen/ and plan/ on one graph (bench/bench_codegen.sh).
 *
 * Usage: bench_codegen GRAPH.json [REPEATS [THREADS [PLAN]]]
 * Loads and estimates the graph (input order, as --no-reorder --no-bucket),
 * simulates it, then times (best of REPEATS) sg_codegen_plan, the memory
 * planner alone (re-run on the lowered plan), sg_plan_to_json, and
 * sg_plan_load_data of that text (parse + hash + validate), and writing
 * the plan file (sg_codegen_write_plan, to PLAN, default a file in the
 * temporary directory, removed after). Codegen and the write run on a pool
 * of THREADS (default 1: none). Prints one line of key=value pairs; sizes
 * and arena statistics are exact.
 */
#include <stdio.h>
#include <stdlib.h>
#include <glib/gstdio.h>

#include "codegen-private.h"
#include "estimate.h"

static double
now_ms (void)
{
  return (double)g_get_monotonic_time () / 1000.0;
}

int
main (int argc, char **argv)
{
  if (argc < 2) {
    fprintf (stderr, "usage: bench_codegen GRAPH.json [REPEATS]\n");
    return 2;
  }
  int reps = argc > 2 ? atoi (argv[2]) : 3;
  int threads = argc > 3 ? atoi (argv[3]) : 1;
  g_autofree char *tmp_plan = g_build_filename (g_get_tmp_dir (), "bench_codegen_plan.json", NULL);
  const char *plan_path = argc > 4 ? argv[4] : tmp_plan;
  GError *e = NULL;
  g_autoptr (SgGraph) g = sg_graph_load (argv[1], &e);
  SgConfig cfg;
  sg_config_init (&cfg);
  cfg.pool = threads > 1 ? sg_pool_new (threads) : NULL;
  SgSimResult sim = { 0 };
  if (!g || !sg_estimate_costs (g, &cfg, &e) || !sg_simulate (g, NULL, &sim, &e)) {
    fprintf (stderr, "bench_codegen: %s\n", e->message);
    return 1;
  }
  double best_cg = 1e30, best_mp = 1e30, best_js = 1e30, best_ld = 1e30, best_wr = 1e30;
  SgPlan *p = NULL;
  size_t len = 0;
  for (int r = 0; r < reps; r++) {
    sg_plan_free (p);
    double t0 = now_ms ();
    if (!sg_codegen_plan (g, &cfg, &sim, argv[1], "bench", &p, &e)) {
      fprintf (stderr, "bench_codegen: %s\n", e->message);
      return 1;
    }
    best_cg = MIN (best_cg, now_ms () - t0);
    g_autofree bool *pinned = g_new0 (bool, (size_t)p->n_buffers + 1);
    for (int32_t v = 0; v < p->n_values; v++)
      if (p->values[v].init == SG_INIT_INPUT)
        pinned[p->values[v].buffer] = true;
    t0 = now_ms ();
    sg_codegen_pack_buffers (p, pinned);
    best_mp = MIN (best_mp, now_ms () - t0);
    t0 = now_ms ();
    g_autofree char *text = sg_plan_to_json (p, &len);
    best_js = MIN (best_js, now_ms () - t0);
    t0 = now_ms ();
    SgPlan *q = sg_plan_load_data (text, len, "bench", &e);
    best_ld = MIN (best_ld, now_ms () - t0);
    if (!q) {
      fprintf (stderr, "bench_codegen: %s\n", e->message);
      return 1;
    }
    sg_plan_free (q);
    t0 = now_ms ();
    if (!sg_codegen_write_plan (p, &cfg, plan_path, &e)) {
      fprintf (stderr, "bench_codegen: %s\n", e->message);
      return 1;
    }
    best_wr = MIN (best_wr, now_ms () - t0);
  }
  if (argc <= 4)
    g_unlink (plan_path);
  SgMemStats st;
  sg_codegen_mem_stats (p, &st);
  printf ("nodes=%d ins=%d values=%d buffers=%d plan_MB=%.1f codegen_ms=%.1f memplan_ms=%.1f "
          "to_json_ms=%.1f load_ms=%.1f write_ms=%.1f arena_MiB=%.1f live_peak_MiB=%.1f "
          "sum_MiB=%.1f arena/peak=%.3f arena/sum=%.3f\n",
          g->n_nodes, p->n_ins, p->n_values, p->n_buffers, (double)len / 1e6, best_cg, best_mp,
          best_js, best_ld, best_wr, (double)st.arena_bytes / 1048576.0,
          (double)st.live_peak_bytes / 1048576.0, (double)st.sum_bytes / 1048576.0,
          (double)st.arena_bytes / (double)st.live_peak_bytes,
          (double)st.arena_bytes / (double)st.sum_bytes);
  sg_plan_free (p);
  sg_sim_result_clear (&sim);
  sg_pool_free (cfg.pool);
  return 0;
}
