/* fuzz_cluster.c: the cluster file reader (estimate/cluster.c, --cluster
 * FILE) on arbitrary bytes, then the cost model built from it.
 *
 * Properties: a rejection carries a message; a cluster that loads gives
 * every node of a sample graph a finite cost >= 0, and the simulation of
 * its input order a finite step time.
 */
#include "fuzz.h"

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  SgConfig cfg;
  sg_config_init (&cfg);
  cfg.cluster = fuzz_file (data, size);
  fuzz_estimate ("w2_tiny_tp2_L2_h256.json", &cfg, "cluster");
  return 0;
}
