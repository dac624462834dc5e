/* mkplan.c: test helper: graph -> plan through codegen directly, in the
 * graph's order or in a given order (a JSON array of node names, e.g. a
 * peer tool's order), without the schedgraph CLI's passes.
 *
 *   mkplan GRAPH.json PLAN.json [ORDER.json | --shuffle SEED]
 *
 * --shuffle: a random topological order (Kahn's algorithm picking a random
 * ready node, the output node last): another legal order of the same
 * graph, so the runtime tests can check that outputs do not depend on it.
 * Lets the runtime tests run plans of two different orders of one graph
 * on their own; the end-to-end script also uses schedgraph -o when it can.
 */
#include <stdio.h>

#include "codegen.h"
#include "graph.h"
#include "schedule.h"

static SgNodeId *
shuffled_order (SgGraph *g, guint32 seed)
{
  sg_graph_fill_users (g);
  GRand *rng = g_rand_new_with_seed (seed);
  uint32_t *pending = g_new0 (uint32_t, (size_t)g->n_nodes);
  SgNodeId *ready = g_new (SgNodeId, (size_t)g->n_nodes), *order = g_new (SgNodeId, (size_t)g->n_nodes);
  int32_t n_ready = 0, n_order = 0;
  for (SgNodeId id = 0; id < g->n_nodes; id++) {
    sg_node_inputs (g, id, &pending[id]);
    if (pending[id] == 0 && id != g->output)
      ready[n_ready++] = id;
  }
  while (n_ready > 0) {
    int32_t pick = g_rand_int_range (rng, 0, n_ready);
    SgNodeId id = ready[pick];
    ready[pick] = ready[--n_ready];
    order[n_order++] = id;
    uint32_t nu;
    const SgNodeId *users = sg_node_users (g, id, &nu);
    for (uint32_t i = 0; i < nu; i++)
      if (--pending[users[i]] == 0 && users[i] != g->output)
        ready[n_ready++] = users[i];
  }
  order[n_order++] = g->output;
  g_rand_free (rng);
  g_free (pending);
  g_free (ready);
  return order;
}

int
main (int argc, char **argv)
{
  bool shuffle = argc == 5 && g_strcmp0 (argv[3], "--shuffle") == 0;
  if (argc != 3 && argc != 4 && !shuffle) {
    fprintf (stderr, "usage: mkplan GRAPH.json PLAN.json [ORDER.json | --shuffle SEED]\n");
    return 2;
  }
  GError *error = NULL;
  SgGraph *g = sg_graph_load (argv[1], &error);
  SgPlan *plan = NULL;
  bool ok = g != NULL;
  if (ok && (argc == 4 || shuffle)) {
    SgNodeId *order = shuffle ? shuffled_order (g, (guint32)g_ascii_strtoull (argv[4], NULL, 10))
                              : sg_order_load (g, argv[3], &error);
    ok = order != NULL && sg_graph_permute (g, order, &error);
    g_free (order);
  }
  SgConfig cfg;
  sg_config_init (&cfg);
  ok = ok && sg_codegen_plan (g, &cfg, NULL, argv[1], argc >= 4 ? "order" : "input-order",
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
