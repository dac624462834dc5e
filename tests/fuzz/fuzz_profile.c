/* fuzz_profile.c: the profile reader (estimate/profile.c, --profile FILE)
 * on arbitrary bytes, then the cost model's lookups in it.
 *
 * Properties: a rejection carries a message; a profile that loads gives
 * every node of a sample graph (GEMMs, attention, pointwise ops,
 * collectives: the lookups and their interpolation) a finite cost >= 0.
 */
#include <math.h>

#include "estimate.h"
#include "fuzz.h"

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
  SgGraph *g = fuzz_sample_graph ("w2_tiny_fsdp2_L2_h256.json");
  SgConfig cfg;
  sg_config_init (&cfg);
  cfg.profile = fuzz_file (data, size);
  GError *e = NULL;
  if (!sg_estimate_costs (g, &cfg, &e)) {
    if (!e || !e->message[0])
      fuzz_bug ("rejected without a message");
    g_error_free (e);
    return 0;
  }
  for (SgNodeId i = 0; i < g->n_nodes; i++)
    if (!(isfinite (g->nodes[i].est_us) && g->nodes[i].est_us >= 0))
      fuzz_bug ("node '%s': cost %g from an accepted profile", g->nodes[i].name,
                g->nodes[i].est_us);
  return 0;
}
