/* fuzz_cluster.c: the cluster file reader (estimate/cluster.c, --cluster
 * FILE) on arbitrary bytes, then the cost model built from it.
 *
 * Properties: a rejection carries a message; a cluster that loads gives
 * every node of a sample graph a finite cost >= 0, and the simulation of
 * its input order a finite step time.
 */
#include <math.h>

#include "estimate.h"
#include "fuzz.h"
#include "schedule.h"

int
LLVMFuzzerInitialize (int *argc, char ***argv)
{
  (void)argc, (void)argv;
  fuzz_init ();
  return 0;
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  SgGraph *g = fuzz_sample_graph ("w2_tiny_tp2_L2_h256.json");
  SgConfig cfg;
  sg_config_init (&cfg);
  cfg.cluster = fuzz_file (data, size);
  GError *e = NULL;
  if (!sg_estimate_costs (g, &cfg, &e)) {
    if (!e || !e->message[0])
      fuzz_bug ("rejected without a message");
    g_error_free (e);
    return 0;
  }
  for (SgNodeId i = 0; i < g->n_nodes; i++)
    if (!(isfinite (g->nodes[i].est_us) && g->nodes[i].est_us >= 0))
      fuzz_bug ("node '%s': cost %g from an accepted cluster", g->nodes[i].name,
                g->nodes[i].est_us);
  SgSimResult r;
  if (!sg_simulate (g, NULL, &r, &e))
    fuzz_bug ("simulation failed: %s", e->message);
  if (!isfinite (r.step_us))
    fuzz_bug ("step %g us from an accepted cluster", r.step_us);
  sg_sim_result_clear (&r);
  return 0;
}
