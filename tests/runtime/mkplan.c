/* mkplan.c: test helper: graph -> plan through codegen directly, in the
 * graph's order or in a given order (a JSON array of node names, e.g. a
 * peer tool's order), without the schedgraph CLI's passes.
 *
 *   mkplan GRAPH.json PLAN.json [ORDER.json]
 *
 * Lets the runtime tests run plans of two different orders of one graph
 * on their own; the end-to-end script also uses schedgraph -o when it can.
 */
#include <stdio.h>

#include "codegen.h"
#include "graph.h"
#include "schedule.h"

int
main (int argc, char **argv)
{
  if (argc != 3 && argc != 4) {
    fprintf (stderr, "usage: mkplan GRAPH.json PLAN.json [ORDER.json]\n");
    return 2;
  }
  GError *error = NULL;
  SgGraph *g = sg_graph_load (argv[1], &error);
  SgPlan *plan = NULL;
  bool ok = g != NULL;
  if (ok && argc == 4) {
    SgNodeId *order = sg_order_load (g, argv[3], &error);
    ok = order != NULL && sg_graph_permute (g, order, &error);
    g_free (order);
  }
  SgConfig cfg;
  sg_config_init (&cfg);
  ok = ok && sg_codegen_plan (g, &cfg, NULL, argv[1], argc == 4 ? "order" : "input-order",
                              &plan, &error);
  ok = ok && sg_plan_write_file (plan, argv[2], &error);
  if (!ok)
    fprintf (stderr, "mkplan: %s\n", error->message);
  g_clear_error (&error);
  sg_plan_free (plan);
  if (g != NULL)
    sg_graph_free (g);
  return ok ? 0 : 1;
}
