/* test_aug.c: the augmented graph: reachability over data and implicit
 * edges, cycle refusal, edges against the id order, and a randomised check
 * against a brute-force transitive closure. */
#include <check.h>
#include <string.h>

#include "builder.h"
#include "schedule.h"

static SgNodeId
id_of (const SgGraph *g, const char *name)
{
  SgNodeId id = sg_graph_lookup (g, name);
  ck_assert_msg (id != SG_NO_NODE, "no node %s", name);
  return id;
}

/* Two independent chains a0 -> a1 -> a2 and b0 -> b1 -> b2. */
static SgGraph *
chains (void)
{
  SgGraph *g = tb_new (1);
  tb_input (g, "x", "float32", 1, 16);
  tb_pointwise (g, "a0", "aten.neg.default", "x", NULL);
  tb_pointwise (g, "a1", "aten.neg.default", "a0", NULL);
  tb_pointwise (g, "a2", "aten.neg.default", "a1", NULL);
  tb_pointwise (g, "b0", "aten.exp.default", "x", NULL);
  tb_pointwise (g, "b1", "aten.exp.default", "b0", NULL);
  tb_pointwise (g, "b2", "aten.exp.default", "b1", NULL);
  tb_output (g, 2, "a2", "b2");
  return g;
}

START_TEST (reaches_follows_data_edges_only_forward)
{
  g_autoptr (SgGraph) g = chains ();
  SgAug *a = sg_aug_new (g);
  ck_assert (sg_aug_reaches (a, id_of (g, "a0"), id_of (g, "a2")));
  ck_assert (sg_aug_reaches (a, id_of (g, "x"), id_of (g, "b2")));
  ck_assert (sg_aug_reaches (a, id_of (g, "a1"), id_of (g, "a1")));
  ck_assert (!sg_aug_reaches (a, id_of (g, "a2"), id_of (g, "a0")));
  ck_assert (!sg_aug_reaches (a, id_of (g, "a0"), id_of (g, "b2")));
  ck_assert (!sg_aug_reaches (a, id_of (g, "b0"), id_of (g, "a2")));
  ck_assert_int_eq (sg_aug_n_implicit (a), 0);
  sg_aug_free (a);
}
END_TEST

START_TEST (edge_that_closes_a_cycle_is_refused_naming_both_nodes)
{
  g_autoptr (SgGraph) g = chains ();
  SgAug *a = sg_aug_new (g);
  GError *err = NULL;
  ck_assert (sg_aug_add_edge (a, id_of (g, "a1"), id_of (g, "b1"), &err));
  ck_assert (sg_aug_reaches (a, id_of (g, "a0"), id_of (g, "b2")));
  ck_assert (!sg_aug_add_edge (a, id_of (g, "b2"), id_of (g, "a0"), &err));
  ck_assert (g_error_matches (err, SG_SCHEDULE_ERROR, SG_SCHEDULE_ERROR_CYCLE));
  ck_assert_msg (strstr (err->message, "'b2'") && strstr (err->message, "'a0'"), "%s",
                 err->message);
  g_clear_error (&err);
  ck_assert (!sg_aug_add_edge (a, id_of (g, "a1"), id_of (g, "a1"), &err));
  g_clear_error (&err);
  ck_assert_int_eq (sg_aug_n_implicit (a), 1);
  sg_aug_free (a);
}
END_TEST

static void
assert_topological (const SgGraph *g, SgAug *a, const SgNodeId *from, const SgNodeId *to,
                    int n_edges)
{
  const SgNodeId *order = sg_aug_order (a);
  g_autofree int32_t *pos = g_new (int32_t, (size_t)g->n_nodes);
  for (int32_t p = 0; p < g->n_nodes; p++)
    pos[order[p]] = p;
  for (SgNodeId i = 0; i < g->n_nodes; i++) {
    uint32_t k;
    const SgNodeId *in = sg_node_inputs (g, i, &k);
    for (uint32_t j = 0; j < k; j++)
      ck_assert_int_lt (pos[in[j]], pos[i]);
  }
  for (int e = 0; e < n_edges; e++)
    ck_assert_int_lt (pos[from[e]], pos[to[e]]);
}

START_TEST (edge_against_the_id_order_reorders_only_what_it_must)
{
  g_autoptr (SgGraph) g = chains ();
  SgAug *a = sg_aug_new (g);
  /* b1 (id 5) must now run before a1 (id 2): legal, no cycle */
  SgNodeId f = id_of (g, "b1"), t = id_of (g, "a1");
  ck_assert (sg_aug_add_edge (a, f, t, NULL));
  assert_topological (g, a, &f, &t, 1);
  ck_assert (sg_aug_reaches (a, id_of (g, "b0"), id_of (g, "a2")));
  ck_assert (!sg_aug_reaches (a, id_of (g, "a0"), id_of (g, "b2")));
  /* and now a1 -> b2 would not close a cycle, but a2 -> b0 would */
  ck_assert (sg_aug_add_edge (a, id_of (g, "a1"), id_of (g, "b2"), NULL));
  ck_assert (!sg_aug_add_edge (a, id_of (g, "a2"), id_of (g, "b0"), NULL));
  ck_assert_int_eq (id_of (g, "x"), sg_aug_order (a)[0]);
  sg_aug_free (a);
}
END_TEST

START_TEST (graph_implicit_edges_survive_a_permute)
{
  g_autoptr (SgGraph) g = chains ();
  sg_implicit_edge_add (g, id_of (g, "a2"), id_of (g, "b0"), SG_EDGE_HIDE_START);
  /* permute: b chain first */
  SgNodeId order[] = { 0, 4, 5, 6, 1, 2, 3, 7 };
  ck_assert (sg_graph_permute (g, order, NULL));
  SgAug *a = sg_aug_new (g);
  ck_assert_int_eq (sg_aug_n_implicit (a), 1);
  ck_assert (sg_aug_reaches (a, id_of (g, "a0"), id_of (g, "b2")));
  ck_assert (!sg_aug_reaches (a, id_of (g, "b2"), id_of (g, "a0")));
  const SgNodeId *o = sg_aug_order (a);
  g_autofree int32_t *pos = g_new (int32_t, (size_t)g->n_nodes);
  for (int32_t p = 0; p < g->n_nodes; p++)
    pos[o[p]] = p;
  ck_assert_int_lt (pos[id_of (g, "a2")], pos[id_of (g, "b0")]);
  sg_aug_free (a);
  sg_implicit_edges_clear (g, SG_EDGE_BUCKET);
  ck_assert_uint_eq (g->implicit_edges->len, 1);
  sg_implicit_edges_clear (g, 0);
  ck_assert_uint_eq (g->implicit_edges->len, 0);
}
END_TEST

/* Random DAGs: every answer of the augmented graph matches a closure
 * recomputed from scratch after every accepted edge. */
START_TEST (random_edges_match_brute_force_closure)
{
  GRand *rng = g_rand_new_with_seed (1234 + (guint32)_i);
  g_autoptr (SgGraph) g = tb_new (1);
  tb_input (g, "n0", "float32", 1, 8);
  const int n = 40;
  for (int i = 1; i < n; i++) {
    char name[16], in1[16], in2[16];
    g_snprintf (name, sizeof name, "n%d", i);
    g_snprintf (in1, sizeof in1, "n%d", g_rand_int_range (rng, 0, i));
    g_snprintf (in2, sizeof in2, "n%d", g_rand_int_range (rng, 0, i));
    if (g_rand_boolean (rng))
      tb_pointwise (g, name, "aten.add.Tensor", in1, in2);
    else
      tb_pointwise (g, name, "aten.neg.default", in1, NULL);
  }
  /* adjacency matrix of data edges */
  g_autofree uint8_t *adj = g_new0 (uint8_t, (size_t)(n * n));
  for (SgNodeId i = 0; i < n; i++) {
    uint32_t k;
    const SgNodeId *in = sg_node_inputs (g, i, &k);
    for (uint32_t j = 0; j < k; j++)
      adj[in[j] * n + i] = 1;
  }
  SgAug *a = sg_aug_new (g);
  g_autofree uint8_t *reach = g_new0 (uint8_t, (size_t)(n * n));
  SgNodeId ef[200], et[200];
  int ne = 0;
  for (int step = 0; step < 120; step++) {
    /* closure by repeated DFS */
    for (int s = 0; s < n; s++) {
      uint8_t *r = &reach[s * n];
      memset (r, 0, (size_t)n);
      int stack[64], sp = 0;
      stack[sp++] = s;
      r[s] = 1;
      while (sp) {
        int v = stack[--sp];
        for (int w = 0; w < n; w++)
          if (adj[v * n + w] && !r[w]) {
            r[w] = 1;
            stack[sp++] = w;
          }
      }
    }
    for (int s = 0; s < n; s++)
      for (int t = 0; t < n; t++)
        ck_assert_msg (sg_aug_reaches (a, s, t) == (bool)reach[s * n + t],
                       "step %d: %d -> %d", step, s, t);
    int f = g_rand_int_range (rng, 0, n), t = g_rand_int_range (rng, 0, n);
    bool ok = sg_aug_add_edge (a, f, t, NULL);
    ck_assert_int_eq (ok, f != t && !reach[t * n + f]);
    if (ok) {
      adj[f * n + t] = 1;
      ef[ne] = f;
      et[ne++] = t;
    }
  }
  ck_assert_int_gt (ne, 10);
  assert_topological (g, a, ef, et, ne);
  sg_aug_free (a);
  g_rand_free (rng);
}
END_TEST

static Suite *
aug_suite (void)
{
  Suite *s = suite_create ("aug");
  TCase *tc = tcase_create ("core");
  tcase_add_test (tc, reaches_follows_data_edges_only_forward);
  tcase_add_test (tc, edge_that_closes_a_cycle_is_refused_naming_both_nodes);
  tcase_add_test (tc, edge_against_the_id_order_reorders_only_what_it_must);
  tcase_add_test (tc, graph_implicit_edges_survive_a_permute);
  tcase_add_loop_test (tc, random_edges_match_brute_force_closure, 0, 5);
  tcase_set_timeout (tc, 60);
  suite_add_tcase (s, tc);
  return s;
}

int
main (void)
{
  SRunner *sr = srunner_create (aug_suite ());
  srunner_run_all (sr, CK_NORMAL);
  int failed = srunner_ntests_failed (sr);
  srunner_free (sr);
  return failed ? 1 : 0;
}
