/* test_pool.c: the estimate pass on worker pools gives what it gives on
 * the calling thread alone: every node's cost and source, the unknown
 * targets in their order, and the error of the first refused permute; so
 * does the costing of a pass's new nodes (sg_cost_new_nodes_elided). */
#include "est-test.h"

static const int32_t pool_sizes[] = { 1, 2, 3, 8 };

/* A chain of @n relus over one input (ranges of the pass's loops: 8192
 * nodes), calls of unknown targets among them, and after it (when
 * @refused) two copy-engine permutes the cluster refuses, far apart. */
static SgGraph *
chain_graph (int32_t n, bool refused)
{
  SgGraph *g = est_graph (16);
  tb_input (g, "x", "bfloat16", 2, I64 (256), I64 (512));
  char prev[32] = "x", name[32];
  for (int32_t i = 0; i < n; i++) {
    g_snprintf (name, sizeof name, "r%d", i);
    /* the first unknown of each in a range of its own */
    const char *target = i == 7 || i == 19007 ? "custom.odd"
                         : i == 12007         ? "custom.even"
                                              : "aten.relu.default";
    tb_pointwise (g, name, target, prev, NULL);
    if (refused && (i == 9000 || i == 17000)) {
      char p[32];
      g_snprintf (p, sizeof p, "p%d", i);
      tb_permute (g, p, name, "0", "[[0,1],[7,8]]", "ce");
    }
    g_strlcpy (prev, name, sizeof prev);
  }
  tb_output (g, 1, prev);
  return g;
}

/* The pass on @g with @pool; *@msg gets its error message, if any. */
static bool
estimate_with (SgGraph *g, SgPool *pool, char **msg)
{
  SgConfig cfg = est_cfg ("h200-sxm", NULL);
  cfg.pool = pool;
  GError *error = NULL;
  bool ok = sg_estimate_costs (g, &cfg, &error);
  *msg = ok ? NULL : g_strdup (error->message);
  g_clear_error (&error);
  return ok;
}

/* Every node's cost and source, as the sequential pass gave them. */
typedef struct {
  int32_t n;
  double *us;
  SgCostSource *src;
} Costs;

static Costs
costs_of (const SgGraph *g)
{
  Costs c = { g->n_nodes, g_new (double, (size_t)g->n_nodes),
              g_new (SgCostSource, (size_t)g->n_nodes) };
  for (int32_t i = 0; i < c.n; i++) {
    c.us[i] = g->nodes[i].est_us;
    c.src[i] = g->nodes[i].est_src;
  }
  return c;
}

static void
costs_clear (Costs *c)
{
  g_free (c->us);
  g_free (c->src);
}

/* @g's costs are @want's, bit for bit (@what names the run). */
static void
assert_costs (const SgGraph *g, const Costs *want, const char *what)
{
  ck_assert_int_eq (g->n_nodes, want->n);
  for (int32_t i = 0; i < want->n; i++) {
    ck_assert_msg (memcmp (&g->nodes[i].est_us, &want->us[i], sizeof want->us[i]) == 0,
                   "%s, node %d: %.17g, not %.17g", what, i, g->nodes[i].est_us, want->us[i]);
    ck_assert_int_eq (g->nodes[i].est_src, want->src[i]);
  }
}

START_TEST (costs_on_pools_equal_the_sequential_costs)
{
  g_autoptr (SgGraph) g = chain_graph (20000, false);
  char *msg;
  ck_assert (estimate_with (g, NULL, &msg));
  int32_t n = g->n_nodes;
  Costs want = costs_of (g);
  size_t n_unknown;
  const char *const *unknown = sg_estimate_unknown_targets (g, &n_unknown);
  ck_assert_int_eq (n_unknown, 2);
  ck_assert_str_eq (unknown[0], "custom.odd");
  ck_assert_str_eq (unknown[1], "custom.even");
  for (size_t p = 0; p < G_N_ELEMENTS (pool_sizes); p++) {
    SgPool *pool = sg_pool_new (pool_sizes[p]);
    for (int32_t i = 0; i < n; i++)
      g->nodes[i].est_us = -1.0;
    ck_assert (estimate_with (g, pool, &msg));
    g_autofree char *what = g_strdup_printf ("pool %d", pool_sizes[p]);
    assert_costs (g, &want, what);
    size_t m;
    unknown = sg_estimate_unknown_targets (g, &m);
    ck_assert_int_eq (m, 2);
    ck_assert_str_eq (unknown[0], "custom.odd");
    ck_assert_str_eq (unknown[1], "custom.even");
    sg_pool_free (pool);
  }
  costs_clear (&want);
}
END_TEST

START_TEST (the_first_refused_permute_names_the_error_on_any_pool)
{
  g_autoptr (SgGraph) g = chain_graph (20000, true);
  g_autofree char *want = NULL;
  ck_assert (!estimate_with (g, NULL, &want));
  ck_assert_msg (strstr (want, "node 'p9000': kwargs.transport: ce copies"), "%s", want);
  for (size_t p = 0; p < G_N_ELEMENTS (pool_sizes); p++) {
    SgPool *pool = sg_pool_new (pool_sizes[p]);
    g_autofree char *msg = NULL;
    ck_assert (!estimate_with (g, pool, &msg));
    ck_assert_str_eq (msg, want);
    sg_pool_free (pool);
  }
}
END_TEST

/* Marks every third node of @g uncosted (what a pass's new nodes are),
 * listing them in @ids between SG_NO_NODE entries; returns their count. */
static int32_t
uncost_some (SgGraph *g, SgNodeId *ids)
{
  int32_t m = 0;
  for (SgNodeId i = 0; i < g->n_nodes; i++) {
    if (i % 3 != 1)
      continue;
    g->nodes[i].est_us = -1.0;
    g->nodes[i].est_src = SG_COST_NONE;
    ids[m++] = i;
    if (i % 7 == 0)
      ids[m++] = SG_NO_NODE;
  }
  return m;
}

START_TEST (new_nodes_costed_on_pools_get_the_sequential_costs)
{
  g_autoptr (SgGraph) g = chain_graph (30000, false);
  char *msg;
  ck_assert (estimate_with (g, NULL, &msg));
  int32_t n = g->n_nodes;
  Costs want = costs_of (g);
  g_autofree SgNodeId *ids = g_new (SgNodeId, (size_t)n * 2);
  for (size_t p = 0; p <= G_N_ELEMENTS (pool_sizes); p++) {
    SgPool *pool = p < G_N_ELEMENTS (pool_sizes) ? sg_pool_new (pool_sizes[p]) : NULL;
    for (int listed = 0; listed < 2; listed++) {
      int32_t m = uncost_some (g, ids);
      sg_cost_new_nodes_elided (sg_graph_cost_model (g), g, listed ? ids : NULL, m, NULL, pool);
      g_autofree char *what = g_strdup_printf ("pool %zu, listed %d", p, listed);
      assert_costs (g, &want, what);
    }
    if (pool)
      sg_pool_free (pool);
  }
  costs_clear (&want);
}
END_TEST

int
main (void)
{
  Suite *s = suite_create ("pool");
  TCase *tc = tcase_create ("pool");
  tcase_set_timeout (tc, 120);
  tcase_add_test (tc, costs_on_pools_equal_the_sequential_costs);
  tcase_add_test (tc, the_first_refused_permute_names_the_error_on_any_pool);
  tcase_add_test (tc, new_nodes_costed_on_pools_get_the_sequential_costs);
  suite_add_tcase (s, tc);
  SRunner *sr = srunner_create (s);
  srunner_run_all (sr, CK_NORMAL);
  int failed = srunner_ntests_failed (sr);
  srunner_free (sr);
  return failed ? 1 : 0;
}
