/* test_bound.c: the lower bound (bound.c) by term on hand-computed graphs,
 * and never above the optimum on random small graphs. */
#include "builder.h"
#include "randgraph.h"
#include "sched-test.h"

static void
bound_of (const SgGraph *g, SgSimResult *r)
{
  ck_assert (sg_simulate (g, NULL, r, NULL));
  sg_lower_bound_refine (g, r);
}

/* A 100 us all_gather nobody needs before the end, beside 1000 us of
 * compute: hiding it costs compute_slowdown over its comm_slowdown-long
 * run, exposing it costs 100 us; the bound takes the cheaper. */
START_TEST (overlap_term_prices_contention_beside_compute)
{
  g_autoptr (SgGraph) g = tb_new (2);
  tb_group (g, "0", 2, 0, 1);
  tb_input (g, "x", "bfloat16", 2, 64, 64);
  tb_input (g, "w", "bfloat16", 2, 32, 64);
  tb_cost (g, tb_all_gather (g, "ag", "w", "0"), 100);
  tb_wait (g, "wt", "ag");
  tb_cost (g, tb_pointwise (g, "a", "aten.relu.default", "x", NULL), 500);
  tb_cost (g, tb_pointwise (g, "b", "aten.relu.default", "a", NULL), 500);
  tb_output (g, 2, "b", "wt");
  st_estimate (g, 0, 1.22, 1.05);
  SgSimResult r;
  bound_of (g, &r);
  double hidden = 1000 + 100 * 1.05 * (1 - 1 / 1.22);
  ck_assert_double_eq_tol (r.bound.compute_us, 1000, 1e-9);
  ck_assert_double_eq_tol (r.bound.overlap_us, hidden, 1e-9);
  ck_assert_double_eq_tol (r.lower_bound_us, hidden, 1e-9);
  ck_assert_str_eq (sg_lower_bound_binding (&r.bound), "overlap");
  sg_sim_result_clear (&r);
}
END_TEST

/* The all_gather feeds two parallel 100 us ops; only 10 us of compute is
 * independent of it. The critical path (150 us) and the work (210 us)
 * miss that 200 us of compute must follow its end: the window with that
 * tail gives 200 + max(10, 50) = 250 us, the optimum. */
START_TEST (window_term_counts_the_compute_that_must_follow_a_collective)
{
  g_autoptr (SgGraph) g = tb_new (2);
  tb_group (g, "0", 2, 0, 1);
  tb_input (g, "x", "bfloat16", 2, 64, 64);
  tb_input (g, "w", "bfloat16", 2, 32, 64);
  tb_cost (g, tb_all_gather (g, "ag", "w", "0"), 50);
  tb_wait (g, "wt", "ag");
  tb_cost (g, tb_pointwise (g, "c1", "aten.add.Tensor", "wt", "x"), 100);
  tb_cost (g, tb_pointwise (g, "c2", "aten.mul.Tensor", "wt", "x"), 100);
  tb_cost (g, tb_pointwise (g, "d", "aten.relu.default", "x", NULL), 10);
  tb_output (g, 3, "c1", "c2", "d");
  st_estimate (g, 0, 1, 1);
  SgSimResult r;
  bound_of (g, &r);
  ck_assert_double_eq_tol (r.bound.critical_path_us, 150, 1e-9);
  ck_assert_double_eq_tol (r.bound.overlap_us, 210, 1e-9);
  ck_assert_double_eq_tol (r.bound.window_us, 250, 1e-9);
  ck_assert_str_eq (sg_lower_bound_binding (&r.bound), "window");
  SgConfig cfg;
  sg_config_init (&cfg);
  cfg.exact = true;
  SgScheduleStats st;
  g_autofree SgNodeId *o = sg_schedule_compute (g, &cfg, &st, NULL);
  ck_assert_double_eq_tol (st.step_us, 250, 1e-9);
  sg_sim_result_clear (&r);
}
END_TEST

/* The bound, refined, is at most the exact optimum on random graphs of
 * every cluster (and so at most the step of every order). */
START_TEST (lower_bound_is_never_above_the_optimum)
{
  int tight = 0;
  for (guint32 seed = 500; seed < 700; seed++) {
    RgCluster cl = (RgCluster)(seed % RG_N_CLUSTERS);
    g_autofree char *json = rg_graph_json (seed, 3 + (int)(seed % 8), 1 + (int)(seed % 5),
                                           1 + (int)(seed % 3), cl);
    g_autoptr (SgGraph) g = st_load (json, "random");
    GError *err = NULL;
    SgConfig cfg;
    sg_config_init (&cfg);
    SgSimResult r;
    bound_of (g, &r);
    cfg.exact = true;
    SgScheduleStats st;
    g_autofree SgNodeId *o = sg_schedule_compute (g, &cfg, &st, &err);
    ck_assert_msg (o != NULL, "%s", err ? err->message : "");
    ck_assert_msg (r.lower_bound_us <= st.step_us + 1e-6,
                   "seed %u (%s): bound %.6f above the optimum %.6f", seed,
                   rg_cluster_name (cl), r.lower_bound_us, st.step_us);
    tight += r.lower_bound_us >= st.step_us - 1e-6;
    sg_sim_result_clear (&r);
  }
  ck_assert_int_gt (tight, 0); /* and it is reached now and then */
}
END_TEST

int
main (void)
{
  const TTest *tests[] = {
    overlap_term_prices_contention_beside_compute,
    window_term_counts_the_compute_that_must_follow_a_collective,
    lower_bound_is_never_above_the_optimum,
  };
  return st_run ("bound", 300, tests, G_N_ELEMENTS (tests));
}
