/* bucket_bench.c: runs load -> estimate -> schedule -> bucket on graph files
 * and prints one table row per graph (collectives before/after, buckets,
 * predicted exposed_us and step_us without and with bucketing, pass time).
 * Used by bench/bench_bucket.sh; not a unit test.
 *
 * usage: bucket_bench [--no-reorder] [--cap BYTES] [--mode auto|per-layer] [--peer PEER.json]
 *                     [--json] GRAPH.json...
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <time.h>

#include "bucket.h"

/* CPU time of this process: the bench machine is shared, wall time is not. */
static double
cpu_ms (void)
{
  struct timespec ts;
  clock_gettime (CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* collectives_after of the peer for graph @name, or -1. */
static int
peer_after (const cJSON *peer, const char *name)
{
  const cJSON *e;
  cJSON_ArrayForEach (e, peer)
  {
    const cJSON *n = cJSON_GetObjectItemCaseSensitive (e, "name");
    if (cJSON_IsString (n) && strcmp (n->valuestring, name) == 0) {
      const cJSON *b = cJSON_GetObjectItemCaseSensitive (e, "bucketed");
      const cJSON *a = cJSON_GetObjectItemCaseSensitive (b, "collectives_after");
      return cJSON_IsNumber (a) ? a->valueint : -1;
    }
  }
  return -1;
}

int
main (int argc, char **argv)
{
  SgConfig cfg;
  sg_config_init (&cfg);
  cJSON *peer = NULL;
  bool json = false;
  int first = 1;
  for (; first < argc && argv[first][0] == '-'; first++) {
    if (strcmp (argv[first], "--no-reorder") == 0) {
      cfg.reorder = false;
    } else if (strcmp (argv[first], "--json") == 0) {
      json = true;
    } else if (strcmp (argv[first], "--mode") == 0 && first + 1 < argc) {
      if (!sg_bucket_mode_from_name (argv[++first], &cfg.bucket_mode)) {
        fprintf (stderr, "bucket_bench: --mode: auto or per-layer\n");
        return 2;
      }
    } else if (strcmp (argv[first], "--cap") == 0 && first + 1 < argc) {
      cfg.bucket_cap_bytes = g_ascii_strtoull (argv[++first], NULL, 10);
    } else if (strcmp (argv[first], "--peer") == 0 && first + 1 < argc) {
      g_autofree char *text = NULL;
      if (!g_file_get_contents (argv[++first], &text, NULL, NULL)
          || !(peer = cJSON_Parse (text))) {
        fprintf (stderr, "bucket_bench: cannot read %s\n", argv[first]);
        return 2;
      }
    } else {
      fprintf (stderr, "usage: bucket_bench [--no-reorder] [--cap BYTES] [--mode auto|per-layer] "
                       "[--peer PEER.json] [--json] GRAPH.json...\n");
      return 2;
    }
  }
  if (!json)
    printf ("| graph | collectives | ours after | peer after | buckets | layers | chosen | "
            "exposed_us unbucketed | exposed_us bucketed | step_us unbucketed | step_us greedy | "
            "step_us per-layer | step_us bucketed | bar | simulations | bucket ms (cpu) | "
            "bucket ms (wall) |\n"
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  int rc = 0;
  for (int i = first; i < argc; i++) {
    GError *error = NULL;
    g_autoptr (SgGraph) g = sg_graph_load (argv[i], &error);
    if (!g || !sg_estimate_costs (g, &cfg, &error) || !sg_schedule_reorder (g, &cfg, &error)) {
      fprintf (stderr, "bucket_bench: %s: %s\n", argv[i], error->message);
      g_clear_error (&error);
      rc = 1;
      continue;
    }
    gint64 t0 = g_get_monotonic_time ();
    double c0 = cpu_ms ();
    bool ok = sg_bucket_pass (g, &cfg, &error);
    double ms = (double)(g_get_monotonic_time () - t0) / 1000.0, cms = cpu_ms () - c0;
    if (!ok || !sg_graph_validate (g, &error)) {
      fprintf (stderr, "bucket_bench: %s: %s\n", argv[i], error->message);
      g_clear_error (&error);
      rc = 1;
      continue;
    }
    const SgBucketStats *st = sg_bucket_stats (g);
    g_autofree char *base = g_path_get_basename (argv[i]);
    char *dot = strrchr (base, '.');
    if (dot)
      *dot = '\0';
    if (json) {
      cJSON *rep = sg_bucket_report (g, NULL);
      char *s = cJSON_Print (rep);
      printf ("%s\n", s);
      cJSON_free (s);
      cJSON_Delete (rep);
      continue;
    }
    int pa = peer ? peer_after (peer, base) : -1;
    g_autofree char *pa_s = pa < 0 ? g_strdup ("n/a") : g_strdup_printf ("%d", pa);
    static const char *const from[] = { "none", "greedy", "per-layer" };
    /* issue 14's bar: step <= unbucketed and <= per-layer (within the
     * tie); FSDP-only (one group, layers found): <= 2 per layer + 4 */
    bool step_ok = st->step_after_us <= st->step_before_us + 1e-3
                   && (isnan (st->per_layer_step_us)
                       || st->step_after_us <= st->per_layer_step_us + 1e-3);
    bool fsdp_only = g->n_groups == 1 && st->layers > 0;
    bool count_ok = !fsdp_only || st->collectives_after <= 2 * st->layers + 4;
    bool peer_ok = pa < 0 || st->collectives_after <= pa;
    g_autofree char *bar = g_strdup_printf (
      "%s%s%s", step_ok ? "step ok" : "STEP", fsdp_only ? (count_ok ? ", <=2L+4" : ", >2L+4") : "",
      pa < 0 ? "" : (peer_ok ? ", <=peer" : ", >PEER"));
    printf ("| %s | %d | %d | %s | %d | %d | %s | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f | %s | "
            "%d | %.1f | %.1f |\n",
            base, st->collectives_before, st->collectives_after, pa_s, st->buckets, st->layers,
            from[st->source], st->exposed_before_us, st->exposed_after_us, st->step_before_us,
            st->greedy_step_us, st->per_layer_step_us, st->step_after_us, bar, st->simulations,
            cms, ms);
  }
  cJSON_Delete (peer);
  return rc;
}
