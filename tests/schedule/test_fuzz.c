/* test_fuzz.c: the scheduler on random graphs. Properties, whatever the
 * graph: the result is a topological order with the output last, it passes
 * the validator, it exposes no more than the input order, its peak stays
 * within the limit (or the input order's), the simulator's invariants hold,
 * and the same graph gives the same order twice. */
#include <check.h>
#include <string.h>

#include "builder.h"
#include "schedule.h"

/* A random step: square activations flowing through mm / pointwise nodes,
 * weights all-gathered before use, gradients reduce-scattered or
 * all-reduced, on two or three groups; collectives read by later
 * collectives (chains) now and then. */
static SgGraph *
random_graph (GRand *rng, int n_ops)
{
  SgGraph *g = tb_new (8);
  tb_group (g, "a", 2, 0, 1);
  tb_group (g, "b", 4, 0, 2, 4, 6);
  tb_group (g, "c", 2, 0, 4);
  const char *groups[] = { "a", "b", "c" };
  const int gsize[] = { 2, 4, 2 };
  int dim = 64 * g_rand_int_range (rng, 1, 5);
  tb_input (g, "x", "bfloat16", 2, dim, dim);
  GPtrArray *acts = g_ptr_array_new_with_free_func (g_free); /* [dim, dim] values */
  g_ptr_array_add (acts, g_strdup ("x"));
  GPtrArray *outs = g_ptr_array_new_with_free_func (g_free);
  for (int i = 0; i < n_ops; i++) {
    char name[32], w[32], c[32], wt[32];
    g_snprintf (name, sizeof name, "n%d", i);
    const char *a = g_ptr_array_index (acts, g_rand_int_range (rng, MAX (0, (int)acts->len - 6),
                                                               (int)acts->len));
    int kind = g_rand_int_range (rng, 0, 10);
    int gi = g_rand_int_range (rng, 0, 3);
    if (kind < 3) { /* gathered weight, then mm */
      g_snprintf (w, sizeof w, "w%d", i);
      g_snprintf (c, sizeof c, "ag%d", i);
      g_snprintf (wt, sizeof wt, "agw%d", i);
      tb_input (g, w, "bfloat16", 2, dim / gsize[gi], dim);
      tb_all_gather (g, c, w, groups[gi]);
      tb_wait (g, wt, c);
      tb_mm (g, name, a, wt);
      g->nodes[sg_graph_lookup (g, c)].est_us = g_rand_double_range (rng, 5, 80);
      g->nodes[sg_graph_lookup (g, name)].est_us = g_rand_double_range (rng, 1, 60);
      g_ptr_array_add (acts, g_strdup (name));
    } else if (kind < 5) { /* gradient-like reduction of an activation */
      g_snprintf (c, sizeof c, "rs%d", i);
      g_snprintf (wt, sizeof wt, "rsw%d", i);
      if (g_rand_boolean (rng))
        tb_reduce_scatter (g, c, a, groups[gi]);
      else
        tb_all_reduce (g, c, a, groups[gi]);
      tb_wait (g, wt, c);
      g->nodes[sg_graph_lookup (g, c)].est_us = g_rand_double_range (rng, 5, 80);
      if (g_rand_int_range (rng, 0, 4) == 0) { /* chained: all_reduce its result */
        char c2[32], wt2[32];
        g_snprintf (c2, sizeof c2, "ar%d", i);
        g_snprintf (wt2, sizeof wt2, "arw%d", i);
        tb_all_reduce (g, c2, wt, groups[(gi + 1) % 3]);
        tb_wait (g, wt2, c2);
        g->nodes[sg_graph_lookup (g, c2)].est_us = g_rand_double_range (rng, 5, 40);
        g_ptr_array_add (outs, g_strdup (wt2));
      } else {
        g_ptr_array_add (outs, g_strdup (wt));
      }
    } else if (kind < 8) {
      const char *b = g_ptr_array_index (acts, g_rand_int_range (rng, 0, (int)acts->len));
      tb_pointwise (g, name, "aten.add.Tensor", a, b);
      g->nodes[sg_graph_lookup (g, name)].est_us = g_rand_double_range (rng, 0.5, 10);
      g_ptr_array_add (acts, g_strdup (name));
    } else {
      tb_mm (g, name, a, a);
      g->nodes[sg_graph_lookup (g, name)].est_us = g_rand_double_range (rng, 1, 60);
      g_ptr_array_add (acts, g_strdup (name));
    }
  }
  GString *o = g_string_new ("{\"name\":\"output\",\"op\":\"output\",\"target\":\"output\","
                             "\"args\":[[");
  g_string_append_printf (o, "{\"node\":\"%s\"}",
                          (const char *)g_ptr_array_index (acts, acts->len - 1));
  for (guint i = 0; i < outs->len; i++)
    g_string_append_printf (o, ",{\"node\":\"%s\"}", (const char *)g_ptr_array_index (outs, i));
  g_string_append (o, "]],\"kwargs\":{}}");
  g_assert (sg_graph_append_json (g, o->str, NULL) != SG_NO_NODE);
  g_string_free (o, TRUE);
  g_ptr_array_unref (acts);
  g_ptr_array_unref (outs);
  return g;
}

START_TEST (random_graphs_keep_every_property)
{
  GRand *rng = g_rand_new_with_seed (4242 + (guint32)_i);
  int n_ops = g_rand_int_range (rng, 5, 120);
  g_autoptr (SgGraph) g = random_graph (rng, n_ops);
  ck_assert (sg_graph_validate (g, NULL));
  SgConfig cfg;
  sg_config_init (&cfg);
  /* a third of the runs with tight budgets */
  if (_i % 3 == 1) {
    cfg.prefetch_limit = 1;
    cfg.max_in_flight_bytes = 64 * 1024;
  } else if (_i % 3 == 2) {
    cfg.max_peak_increase = 0.0;
  }
  SgSimResult in;
  GError *err = NULL;
  ck_assert (sg_simulate (g, NULL, &in, &err));
  SgScheduleStats st1, st2;
  g_autofree SgNodeId *o1 = sg_schedule_compute (g, &cfg, &st1, &err);
  ck_assert_msg (o1 != NULL, "%s", err ? err->message : "");
  g_autofree SgNodeId *o2 = sg_schedule_compute (g, &cfg, &st2, NULL);
  ck_assert (memcmp (o1, o2, sizeof (SgNodeId) * (size_t)g->n_nodes) == 0);
  ck_assert_msg (sg_order_check (g, o1, &err), "%s", err ? err->message : "");
  ck_assert_int_eq (o1[g->n_nodes - 1], g->output);

  SgSimResult out;
  ck_assert (sg_simulate (g, o1, &out, NULL));
  ck_assert_msg (out.exposed_us <= in.exposed_us + 1e-6, "seed %d: %g > %g", _i, out.exposed_us,
                 in.exposed_us);
  ck_assert_double_eq_tol (out.exposed_us, st1.scheduled_exposed_us, 1e-6);
  ck_assert_uint_eq (out.peak_bytes, st1.scheduled_peak_bytes);
  ck_assert_uint_eq (out.peak_bytes, sg_graph_peak_bytes (g, o1));
  ck_assert (out.peak_bytes <= MAX (st1.peak_limit_bytes, in.peak_bytes));
  ck_assert (out.step_us >= out.lower_bound_us - 1e-6);
  ck_assert_int_eq (out.n_rows, in.n_rows);
  ck_assert_int_eq (out.hidden + out.partial + out.exposed, out.n_rows);
  for (int32_t r = 0; r < out.n_rows; r++) {
    const SgCollRow *row = &out.rows[r];
    ck_assert (row->start_us >= row->issue_us - 1e-9);
    ck_assert (row->end_us >= row->start_us + row->est_us - 1e-6);
    ck_assert (row->exposed_us >= 0.0);
    if (row->status == SG_EXPOSURE_EXPOSED)
      ck_assert_int_eq (row->n_hiding, 0);
  }

  /* the pass applies the same order and leaves a valid graph whose hiding
   * edges agree with it */
  ck_assert (sg_schedule_reorder (g, &cfg, NULL));
  ck_assert (sg_graph_validate (g, NULL));
  SgAug *aug = sg_aug_new (g);
  ck_assert_int_eq (sg_aug_n_implicit (aug), g->implicit_edges ? (int)g->implicit_edges->len : 0);
  const SgNodeId *ao = sg_aug_order (aug);
  for (SgNodeId i = 0; i < g->n_nodes; i++)
    ck_assert_int_eq (ao[i], i); /* recorded edges agree with the new id order */
  sg_aug_free (aug);
  sg_sim_result_clear (&in);
  sg_sim_result_clear (&out);
  g_rand_free (rng);
}
END_TEST

static Suite *
fuzz_suite (void)
{
  Suite *s = suite_create ("fuzz");
  TCase *tc = tcase_create ("core");
  tcase_add_loop_test (tc, random_graphs_keep_every_property, 0, 60);
  tcase_set_timeout (tc, 120);
  suite_add_tcase (s, tc);
  return s;
}

int
main (void)
{
  SRunner *sr = srunner_create (fuzz_suite ());
  srunner_run_all (sr, CK_NORMAL);
  int failed = srunner_ntests_failed (sr);
  srunner_free (sr);
  return failed ? 1 : 0;
}
