/* fuzz_order.c: the --order reader (schedule/order.c) on arbitrary bytes,
 * against a sample graph, then the simulation of the order it accepted.
 *
 * Properties: a rejection carries a message; an accepted order passes
 * sg_order_check and simulates to a finite step time, as schedgraph
 * --order does with it.
 */
#include <math.h>

#include "fuzz.h"
#include "schedule.h"

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  SgGraph *g = fuzz_sample_graph ("w2_tiny_fsdp2_L2_h256.json");
  GError *e = NULL;
  SgNodeId *order = sg_order_load (g, fuzz_file (data, size), &e);
  if (!order) {
    fuzz_rejected (e);
    return 0;
  }
  if (!sg_order_check (g, order, &e))
    fuzz_bug ("an accepted order fails sg_order_check: %s", e->message);
  SgSimResult r;
  if (!sg_simulate (g, order, &r, &e))
    fuzz_bug ("an accepted order does not simulate: %s", e->message);
  if (!isfinite (r.step_us))
    fuzz_bug ("step %g us", r.step_us);
  sg_sim_result_clear (&r);
  g_free (order);
  return 0;
}
