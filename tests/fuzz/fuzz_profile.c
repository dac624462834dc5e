/* fuzz_profile.c: the profile reader (estimate/profile.c, --profile FILE)
 * on arbitrary bytes, then the cost model's lookups in it.
 *
 * Properties: a rejection carries a message; a profile that loads gives
 * every node of a sample graph (GEMMs, attention, pointwise ops,
 * collectives: the lookups and their interpolation) a finite cost >= 0,
 * and the simulation of its input order a finite step time.
 */
#include "fuzz.h"

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  SgConfig cfg;
  sg_config_init (&cfg);
  cfg.profile = fuzz_file (data, size);
  fuzz_estimate ("w2_tiny_fsdp2_L2_h256.json", &cfg, "profile");
  return 0;
}
