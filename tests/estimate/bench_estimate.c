/* bench_estimate.c: times the estimate pass on a graph file (driver of
 * bench/bench_estimate.sh) and can print the cost table.
 *
 * Usage: bench_estimate GRAPH.json [--cluster NAME|FILE] [--profile FILE]
 *                       [--repeat N] [--costs]
 * Prints: nodes, best and median pass time over N runs (ms), best CPU time
 * of the process during a run (ms), ns per node (best wall),
 * nodes per source. Load time is not counted (graph/'s benchmark has it).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "estimate.h"

static double
cpu_ms (void)
{
  struct timespec ts;
  clock_gettime (CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int
cmp_double (const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int
main (int argc, char **argv)
{
  const char *path = NULL;
  SgConfig cfg;
  memset (&cfg, 0, sizeof cfg);
  int repeat = 5;
  bool costs = false;
  for (int i = 1; i < argc; i++) {
    if (strcmp (argv[i], "--cluster") == 0 && i + 1 < argc)
      cfg.cluster = argv[++i];
    else if (strcmp (argv[i], "--profile") == 0 && i + 1 < argc)
      cfg.profile = argv[++i];
    else if (strcmp (argv[i], "--repeat") == 0 && i + 1 < argc)
      repeat = atoi (argv[++i]);
    else if (strcmp (argv[i], "--costs") == 0)
      costs = true;
    else if (argv[i][0] != '-' && !path)
      path = argv[i];
    else {
      fprintf (stderr, "usage: %s GRAPH.json [--cluster C] [--profile P] [--repeat N] [--costs]\n",
               argv[0]);
      return 2;
    }
  }
  if (!path || repeat < 1) {
    fprintf (stderr, "usage: %s GRAPH.json [--cluster C] [--profile P] [--repeat N] [--costs]\n",
             argv[0]);
    return 2;
  }
  GError *error = NULL;
  SgGraph *g = sg_graph_load (path, &error);
  if (!g) {
    fprintf (stderr, "bench_estimate: %s\n", error->message);
    g_error_free (error);
    return 1;
  }
  double *ms = g_new (double, repeat), *cpu = g_new (double, repeat);
  for (int r = 0; r < repeat; r++) {
    gint64 t0 = g_get_monotonic_time ();
    double c0 = cpu_ms ();
    if (!sg_estimate_costs (g, &cfg, &error)) {
      fprintf (stderr, "bench_estimate: %s\n", error->message);
      g_error_free (error);
      sg_graph_free (g);
      g_free (ms);
      g_free (cpu);
      return 1;
    }
    ms[r] = (double)(g_get_monotonic_time () - t0) / 1000.0;
    cpu[r] = cpu_ms () - c0;
  }
  qsort (ms, (size_t)repeat, sizeof *ms, cmp_double);
  qsort (cpu, (size_t)repeat, sizeof *cpu, cmp_double);
  int64_t by_src[SG_COST_MODEL + 1] = { 0 };
  for (SgNodeId i = 0; i < g->n_nodes; i++)
    by_src[g->nodes[i].est_src]++;
  if (costs) {
    sg_estimate_print_costs (g, stdout);
  } else {
    printf ("nodes %d best_ms %.2f median_ms %.2f cpu_ms %.2f ns_per_node %.1f", g->n_nodes,
            ms[0], ms[repeat / 2], cpu[0], ms[0] * 1e6 / g->n_nodes);
    for (int s = SG_COST_FREE; s <= SG_COST_MODEL; s++)
      printf (" %s %" G_GINT64_FORMAT, sg_cost_source_name ((SgCostSource)s), by_src[s]);
    printf ("\n");
  }
  g_free (ms);
  g_free (cpu);
  sg_graph_free (g);
  return 0;
}
