/* test_rules.c: the list scheduler's rules beyond the input order, one
 * behaviour per test (issue 15): a ready collective is hidden by any
 * compute with a cost and raised ahead of independent work, waits are
 * sunk (the whole pass); one list variant alone: a collective reading an
 * input listed late is issued at once, an urgent collective is not queued
 * behind a long one, a stall waits first for the collective that ends
 * first; and a start-wait case the list alone misses reaches the optimum
 * through the polish pass; a finished collective's wait sinks while
 * memory allows. Costs are `cost_us`; the cluster is set per test. */
#include "builder.h"
#include "sched-test.h"
#include "schedule-private.h"

static SgNodeId
id_of (const SgGraph *g, const char *name)
{
  SgNodeId id = sg_graph_lookup (g, name);
  ck_assert_msg (id != SG_NO_NODE, "no node %s", name);
  return id;
}

/* Schedules (no memory limit, no bucketing after it: the pass polishes)
 * and simulates the result into @r. */
static void
schedule (SgGraph *g, SgSimResult *r)
{
  SgConfig cfg;
  sg_config_init (&cfg);
  cfg.max_peak_increase = 100.0;
  cfg.bucket = false;
  GError *err = NULL;
  ck_assert_msg (sg_schedule_reorder (g, &cfg, &err), "%s", err ? err->message : "");
  ck_assert (sg_graph_validate (g, NULL));
  ck_assert (sg_simulate (g, NULL, r, NULL));
}

/* One variant of the list scheduler alone (no choice among variants, no
 * polish), shielded: stall-fill @window, priority @boost; the step of its
 * order. */
#define ANY (INT32_MAX / 2)
static double
list_variant_step (const SgGraph *g, int32_t window, int32_t boost, SgNodeId **order)
{
  SgConfig cfg;
  sg_config_init (&cfg);
  cfg.max_peak_increase = 100.0;
  SgSchedProblem P;
  sg_sched_problem_init (&P, g, &cfg, false);
  SgScheduleStats st = { 0 };
  SgSimResult r;
  SgNodeId *o = sg_sched_run_variant (&P, window, boost, true, &st, &r);
  sg_sched_problem_clear (&P);
  double step = r.step_us;
  sg_sim_result_clear (&r);
  if (order)
    *order = o;
  else
    g_free (o);
  return step;
}

/* Position of @name in @order. */
static int32_t
pos_in (const SgGraph *g, const SgNodeId *order, const char *name)
{
  SgNodeId x = id_of (g, name);
  for (int32_t i = 0; i < g->n_nodes; i++)
    if (order[i] == x)
      return i;
  return -1;
}

static double
optimum (const SgGraph *g)
{
  SgConfig cfg;
  sg_config_init (&cfg);
  cfg.exact = true;
  SgScheduleStats st;
  GError *err = NULL;
  g_autofree SgNodeId *o = sg_schedule_compute (g, &cfg, &st, &err);
  ck_assert_msg (o != NULL, "%s", err ? err->message : "");
  return st.step_us;
}

/* The first case: an all_reduce whose input is ready before an
 * independent 1 ms elementwise op; its wait must sink past that op. */
START_TEST (ready_all_reduce_is_hidden_by_independent_pointwise_work)
{
  g_autoptr (SgGraph) g = tb_new (2);
  tb_group (g, "0", 2, 0, 1);
  tb_input (g, "x", "bfloat16", 2, 64, 64);
  tb_cost (g, tb_pointwise (g, "p", "aten.relu.default", "x", NULL), 10);
  tb_cost (g, tb_all_reduce (g, "ar", "p", "0"), 200);
  tb_wait (g, "wt", "ar");
  tb_cost (g, tb_pointwise (g, "c", "aten.relu.default", "wt", NULL), 5);
  tb_cost (g, tb_pointwise (g, "e", "aten.add.Tensor", "x", "x"), 1000);
  tb_output (g, 2, "c", "e");
  st_estimate (g, 0, 1, 1);
  SgSimResult r;
  schedule (g, &r);
  ck_assert_double_eq_tol (r.exposed_us, 0, 1e-9);
  ck_assert_int_eq (r.rows[0].hidden_by, id_of (g, "e"));
  ck_assert_int_lt (id_of (g, "e"), id_of (g, "wt")); /* the wait sank past it */
  ck_assert_double_eq_tol (r.step_us, 1015, 1e-9);
  sg_sim_result_clear (&r);
}
END_TEST

/* The second case: the all_gather's input is ready before an
 * independent matmul listed first; it is issued ahead of the matmul. */
START_TEST (ready_collective_is_raised_ahead_of_an_independent_matmul)
{
  g_autoptr (SgGraph) g = tb_new (2);
  tb_group (g, "0", 2, 0, 1);
  tb_input (g, "x", "bfloat16", 2, 512, 512);
  tb_input (g, "w", "bfloat16", 2, 8, 512);
  tb_cost (g, tb_mm (g, "mm0", "x", "x"), 100);
  tb_cost (g, tb_all_gather (g, "ag", "w", "0"), 50);
  tb_wait (g, "wt", "ag");
  tb_t (g, "t", "wt");
  tb_cost (g, tb_mm (g, "mm1", "x", "t"), 30);
  tb_output (g, 2, "mm0", "mm1");
  st_estimate (g, 0, 1, 1);
  SgSimResult r;
  schedule (g, &r);
  ck_assert_int_lt (id_of (g, "ag"), id_of (g, "mm0"));
  ck_assert_double_eq_tol (r.exposed_us, 0, 1e-9);
  ck_assert_double_eq_tol (r.step_us, 130, 1e-9);
  sg_sim_result_clear (&r);
}
END_TEST

/* An input listed after the compute that could hide its all_gather: the
 * input (free to move) goes first and the all_gather is issued at 0. */
START_TEST (collective_reading_an_input_listed_late_is_issued_at_once)
{
  g_autoptr (SgGraph) g = tb_new (2);
  tb_group (g, "0", 2, 0, 1);
  tb_input (g, "x", "bfloat16", 2, 512, 512);
  tb_cost (g, tb_mm (g, "mm0", "x", "x"), 100);
  tb_input (g, "w", "bfloat16", 2, 8, 512);
  tb_cost (g, tb_all_gather (g, "ag", "w", "0"), 50);
  tb_wait (g, "wt", "ag");
  tb_t (g, "t", "wt");
  tb_cost (g, tb_mm (g, "mm1", "x", "t"), 30);
  tb_output (g, 2, "mm0", "mm1");
  st_estimate (g, 0, 1, 1);
  g_autofree SgNodeId *o = NULL;
  /* keep-compute-order: nothing is boosted or pulled, the input moves */
  ck_assert_double_eq_tol (list_variant_step (g, 0, 0, &o), 130, 1e-9);
  ck_assert_int_lt (pos_in (g, o, "ag"), pos_in (g, o, "mm0"));
}
END_TEST

/* kl (100 us) is ready at once but nothing needs it before the end; ku
 * (20 us) is ready after p and feeds a chain c -> d. Issued first, kl
 * would hold ku back (one stream per group) and the chain would wait. */
START_TEST (urgent_collective_is_not_queued_behind_a_long_one)
{
  g_autoptr (SgGraph) g = tb_new (2);
  tb_group (g, "0", 2, 0, 1);
  tb_input (g, "x", "bfloat16", 2, 64, 64);
  tb_cost (g, tb_all_reduce (g, "kl", "x", "0"), 100);
  tb_wait (g, "wl", "kl");
  tb_cost (g, tb_pointwise (g, "p", "aten.relu.default", "x", NULL), 5);
  tb_cost (g, tb_all_reduce (g, "ku", "p", "0"), 20);
  tb_wait (g, "wu", "ku");
  tb_cost (g, tb_pointwise (g, "c", "aten.relu.default", "wu", NULL), 5);
  tb_cost (g, tb_pointwise (g, "d", "aten.relu.default", "c", NULL), 200);
  tb_output (g, 2, "d", "wl");
  st_estimate (g, 0, 1, 1);
  g_autofree SgNodeId *o = NULL;
  ck_assert_double_eq_tol (list_variant_step (g, ANY, -64, &o), 230, 1e-9);
  ck_assert_double_eq_tol (optimum (g), 230, 1e-9);
  ck_assert_int_lt (pos_in (g, o, "ku"), pos_in (g, o, "kl"));
}
END_TEST

/* c1 needs k1 (100 us, group a), c2 needs k2 (20 us, group b): rather
 * than stall 100 us for k1, wait for k2, run c2 while k1 goes on. */
START_TEST (stall_waits_first_for_the_collective_that_ends_first)
{
  g_autoptr (SgGraph) g = tb_new (4);
  tb_group (g, "a", 2, 0, 1);
  tb_group (g, "b", 2, 0, 2);
  tb_input (g, "x", "bfloat16", 2, 64, 64);
  tb_input (g, "w1", "bfloat16", 2, 32, 64);
  tb_input (g, "w2", "bfloat16", 2, 32, 64);
  tb_cost (g, tb_all_gather (g, "k1", "w1", "a"), 100);
  tb_cost (g, tb_all_gather (g, "k2", "w2", "b"), 20);
  tb_wait (g, "wt1", "k1");
  tb_cost (g, tb_pointwise (g, "c1", "aten.add.Tensor", "wt1", "x"), 10);
  tb_wait (g, "wt2", "k2");
  tb_cost (g, tb_pointwise (g, "c2", "aten.add.Tensor", "wt2", "x"), 50);
  tb_output (g, 2, "c1", "c2");
  st_estimate (g, 0, 1, 1);
  g_autofree SgNodeId *o = NULL;
  ck_assert_double_eq_tol (list_variant_step (g, ANY, -64, &o), 110, 1e-9);
  ck_assert_int_lt (pos_in (g, o, "wt2"), pos_in (g, o, "wt1"));
  ck_assert_int_lt (pos_in (g, o, "c2"), pos_in (g, o, "c1"));
}
END_TEST

/* Start wait 1: a collective that becomes startable during a stall is held
 * by the GEMM after it. Two all_gathers queued on one group, three GEMMs;
 * the polished order matches the exact scheduler's step. */
START_TEST (start_wait_case_reaches_the_optimum)
{
  g_autoptr (SgGraph) g = tb_new (2);
  tb_group (g, "0", 2, 0, 1);
  tb_input (g, "x", "bfloat16", 2, 512, 512);
  tb_input (g, "w0", "bfloat16", 2, 256, 512);
  tb_input (g, "w1", "bfloat16", 2, 256, 512);
  tb_cost (g, tb_all_gather (g, "k0", "w0", "0"), 10);
  tb_cost (g, tb_all_gather (g, "k1", "w1", "0"), 30);
  tb_cost (g, tb_mm (g, "g1", "x", "x"), 80);
  tb_wait (g, "wt0", "k0");
  tb_t (g, "t0", "wt0");
  tb_cost (g, tb_mm (g, "g2", "g1", "t0"), 30);
  tb_wait (g, "wt1", "k1");
  tb_t (g, "t1", "wt1");
  tb_cost (g, tb_mm (g, "g3", "g2", "t1"), 30);
  tb_output (g, 1, "g3");
  st_estimate (g, 1, 1, 1);
  double best = optimum (g);
  SgSimResult in, r;
  ck_assert (sg_simulate (g, NULL, &in, NULL));
  schedule (g, &r);
  ck_assert_double_lt (best, in.step_us); /* there is something to gain */
  ck_assert_double_gt (list_variant_step (g, ANY, -64, NULL), best + 1.0); /* the list alone misses it */
  ck_assert_double_eq_tol (r.step_us, best, 1e-9);
  sg_sim_result_clear (&in);
  sg_sim_result_clear (&r);
}
END_TEST

/* The polish takes a window order whose only gain where it ends is less
 * work left on a collective (same clock, same queues): k0 (50 us) and its
 * wait stall everything else; k (500 us, another group) is issued after
 * the GEMM in the given order and first in the better one; its wait lies
 * past the catch-up horizon (a chain of 130 pointwise nodes), so only the
 * work left tells the orders apart there. */
START_TEST (polish_takes_an_order_that_leaves_less_work_on_a_collective)
{
  g_autoptr (SgGraph) g = tb_new (2);
  tb_group (g, "0", 2, 0, 1);
  tb_group (g, "1", 2, 0, 1);
  tb_input (g, "x", "bfloat16", 2, 64, 64);
  tb_input (g, "w0", "bfloat16", 2, 32, 64);
  tb_input (g, "w1", "bfloat16", 2, 32, 64);
  tb_cost (g, tb_all_gather (g, "k0", "w0", "0"), 50);
  tb_wait (g, "wt0", "k0");
  tb_cost (g, tb_mm (g, "g1", "wt0", "x"), 80);
  tb_cost (g, tb_all_gather (g, "k", "w1", "1"), 500);
  const char *prev = "g1";
  char name[2][16];
  for (int i = 0; i < 130; i++) {
    g_snprintf (name[i % 2], sizeof name[0], "p%d", i);
    tb_cost (g, tb_pointwise (g, name[i % 2], "aten.relu.default", prev, NULL), 1);
    prev = name[i % 2];
  }
  tb_wait (g, "wk", "k");
  tb_output (g, 2, prev, "wk");
  st_estimate (g, 0, 1, 1);
  int32_t n = g->n_nodes;
  g_autofree SgNodeId *order = g_new (SgNodeId, (size_t)n);
  for (SgNodeId i = 0; i < n; i++)
    order[i] = i;
  SgSimResult in;
  ck_assert (sg_simulate (g, order, &in, NULL));
  ck_assert_double_eq_tol (in.step_us, 50 + 80 + 500, 1e-6); /* k issued after g1 */
  /* sg_polish replaces the totals when it takes an order */
  SgSimResult r = { .step_us = in.step_us, .peak_bytes = in.peak_bytes };
  sg_sim_result_clear (&in);
  SgConfig cfg;
  sg_config_init (&cfg);
  cfg.max_peak_increase = 100.0;
  SgSchedProblem P;
  sg_sched_problem_init_basic (&P, g, &cfg);
  ck_assert_int_gt (sg_polish (&P, NULL, order, &r), 0);
  sg_sched_problem_clear (&P);
  ck_assert_double_eq_tol (r.step_us, 500, 1e-6); /* k at once, beside k0 */
  ck_assert_int_lt (pos_in (g, order, "k"), pos_in (g, order, "g1"));
  sg_sim_result_clear (&r);
}
END_TEST

/* x -> p -> ar (20 us) -> wt, then e1 and e2 (100 us each) that do not
 * need it; wt feeds only the output. @p_out: p is an output too (it lives
 * to the end whatever the order). Returns the order of one list variant. */
static SgNodeId *
finished_wait_order (SgGraph **out, bool p_out)
{
  SgGraph *g = tb_new (2);
  tb_group (g, "0", 2, 0, 1);
  tb_input (g, "x", "bfloat16", 2, 64, 64);
  tb_cost (g, tb_pointwise (g, "p", "aten.relu.default", "x", NULL), 10);
  tb_cost (g, tb_all_reduce (g, "ar", "p", "0"), 20);
  tb_wait (g, "wt", "ar");
  tb_cost (g, tb_pointwise (g, "e1", "aten.add.Tensor", "x", "x"), 100);
  tb_cost (g, tb_pointwise (g, "e2", "aten.add.Tensor", "x", "x"), 100);
  if (p_out)
    tb_output (g, 4, "wt", "e1", "e2", "p");
  else
    tb_output (g, 3, "wt", "e1", "e2");
  st_estimate (g, 0, 1, 1);
  SgNodeId *o = NULL;
  ck_assert_double_eq_tol (list_variant_step (g, ANY, -64, &o), 210, 1e-9);
  *out = g;
  return o;
}

/* The all_reduce ends beside e1; its wait costs nothing anywhere after
 * that, and placed last it leaves the most slack for what the model does
 * not see (docs/scheduler.md "Waits"). */
START_TEST (finished_collective_wait_sinks_while_memory_allows)
{
  SgGraph *g;
  g_autofree SgNodeId *o = finished_wait_order (&g, true);
  ck_assert_int_gt (pos_in (g, o, "wt"), pos_in (g, o, "e2"));
  sg_graph_free (g);
}
END_TEST

/* The same, but holding p (the all_reduce's input, live until the wait)
 * past e1 would raise the input order's peak: the wait goes in once the
 * all_reduce is done. */
START_TEST (finished_collective_wait_does_not_raise_the_peak_for_slack)
{
  SgGraph *g;
  g_autofree SgNodeId *o = finished_wait_order (&g, false);
  ck_assert_int_lt (pos_in (g, o, "wt"), pos_in (g, o, "e2"));
  ck_assert_int_gt (pos_in (g, o, "wt"), pos_in (g, o, "e1"));
  sg_graph_free (g);
}
END_TEST

/* The output is the last node of every order, whatever it reads. An
 * output that reads nothing (or only early nodes) is ready at once;
 * every list variant and the whole pass must still place it after
 * everything else, nodes that nothing reads included (the fuzz finding
 * tests/fuzz/regress/writers/accept-output-reading-nothing.json). */
static void
assert_output_last (SgGraph *g)
{
  static const int32_t variants[][2] = { { 0, 0 },      { ANY, -64 }, { ANY, 16 },
                                         { 1024, -64 }, { 128, -64 },
                                         { 1024, SG_BOOST_CRITICAL_PATH } };
  for (size_t v = 0; v < G_N_ELEMENTS (variants); v++) {
    g_autofree SgNodeId *o = NULL;
    list_variant_step (g, variants[v][0], variants[v][1], &o);
    ck_assert_msg (o[g->n_nodes - 1] == g->output, "variant %zu put the output at %d of %d", v,
                   pos_in (g, o, "output"), g->n_nodes);
  }
  SgSimResult r;
  schedule (g, &r); /* validates: the output is last */
  ck_assert_int_eq (g->output, g->n_nodes - 1);
  sg_sim_result_clear (&r);
}

START_TEST (output_stays_last_when_it_reads_nothing_or_early_nodes)
{
  g_autoptr (SgGraph) a = tb_new (2);
  tb_group (a, "0", 2, 0, 1);
  tb_input (a, "x", "bfloat16", 2, 64, 64);
  tb_cost (a, tb_all_reduce (a, "ar", "x", "0"), 100);
  tb_wait (a, "wt", "ar");
  tb_cost (a, tb_pointwise (a, "c", "aten.relu.default", "wt", NULL), 5);
  tb_output (a, 0);
  st_estimate (a, 0, 1, 1);
  assert_output_last (a);

  g_autoptr (SgGraph) b = tb_new (2);
  tb_group (b, "0", 2, 0, 1);
  tb_input (b, "x", "bfloat16", 2, 64, 64);
  tb_cost (b, tb_pointwise (b, "p", "aten.relu.default", "x", NULL), 10);
  tb_cost (b, tb_all_reduce (b, "ar", "p", "0"), 100);
  tb_wait (b, "wt", "ar");
  tb_cost (b, tb_pointwise (b, "c", "aten.relu.default", "wt", NULL), 5);
  tb_cost (b, tb_pointwise (b, "d", "aten.add.Tensor", "c", "x"), 50);
  tb_output (b, 1, "p");
  st_estimate (b, 0, 1, 1);
  assert_output_last (b);
}
END_TEST

int
main (void)
{
  const TTest *tests[] = {
    ready_all_reduce_is_hidden_by_independent_pointwise_work,
    ready_collective_is_raised_ahead_of_an_independent_matmul,
    collective_reading_an_input_listed_late_is_issued_at_once,
    urgent_collective_is_not_queued_behind_a_long_one,
    stall_waits_first_for_the_collective_that_ends_first,
    start_wait_case_reaches_the_optimum,
    polish_takes_an_order_that_leaves_less_work_on_a_collective,
    finished_collective_wait_sinks_while_memory_allows,
    finished_collective_wait_does_not_raise_the_peak_for_slack,
    output_stays_last_when_it_reads_nothing_or_early_nodes,
  };
  return st_run ("rules", 120, tests, G_N_ELEMENTS (tests));
}
