/* fuzz_graph.c: the graph loader and validator (graph/load*.c, graph.c,
 * validate.c) on arbitrary bytes.
 *
 * Properties: a rejection carries a message; a graph that loads passes the
 * validator again, and so does its deep copy; the queries every pass uses
 * (peak bytes, users, the IR dump) run on it.
 */
#include <stdio.h>

#include "fuzz.h"

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  static FILE *devnull;
  if (!devnull)
    devnull = fopen ("/dev/null", "w");
  GError *e = NULL;
  SgGraph *g = sg_graph_load_data ((const char *)data, size, "fuzz.json", &e);
  if (!g) {
    fuzz_rejected (e);
    return 0;
  }
  if (!sg_graph_validate (g, &e))
    fuzz_bug ("a loaded graph fails the validator: %s", e->message);
  (void)sg_graph_peak_bytes (g, NULL);
  sg_graph_fill_users (g);
  sg_graph_dump (g, devnull);
  SgGraph *c = sg_graph_copy (g);
  if (!sg_graph_validate (c, &e))
    fuzz_bug ("the copy of a loaded graph fails the validator: %s", e->message);
  sg_graph_free (c);
  sg_graph_free (g);
  return 0;
}
