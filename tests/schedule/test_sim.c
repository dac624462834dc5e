/* test_sim.c: the timeline simulator against hand-computed timelines, the
 * liveness rule against graph/'s, order checking and loading. */
#include <check.h>
#include <string.h>

#include "builder.h"
#include "schedule.h"
#include "sim-test.h"

static const SgContention no_contention = { 1.0, 1.0, 1.0 };

static void
cost (SgGraph *g, const char *name, double us)
{
  SgNodeId id = sg_graph_lookup (g, name);
  ck_assert_int_ne (id, SG_NO_NODE);
  g->nodes[id].est_us = us;
  g->nodes[id].est_src = SG_COST_GRAPH;
}

/* x, w -> ag(w) -> wt; mm0 = x.x (independent); mm1 = x.wt. Input order
 * issues ag and waits on it at once. */
static SgGraph *
hide_graph (double ag_us, double mm0_us, double mm1_us)
{
  SgGraph *g = tb_new (2);
  tb_group (g, "0", 2, 0, 1);
  tb_input (g, "x", "bfloat16", 2, 64, 64);
  tb_input (g, "w", "bfloat16", 2, 32, 64);
  tb_all_gather (g, "ag", "w", "0");
  tb_wait (g, "wt", "ag");
  tb_mm (g, "mm1", "x", "wt");
  tb_mm (g, "mm0", "x", "x");
  tb_output (g, 2, "mm0", "mm1");
  cost (g, "ag", ag_us);
  cost (g, "mm0", mm0_us);
  cost (g, "mm1", mm1_us);
  return g;
}

static SgNodeId *
order_of (const SgGraph *g, int n, ...)
{
  SgNodeId *o = g_new (SgNodeId, (size_t)n);
  va_list ap;
  va_start (ap, n);
  for (int i = 0; i < n; i++)
    o[i] = id_of (g, va_arg (ap, const char *));
  va_end (ap);
  return o;
}

START_TEST (wait_right_after_collective_is_fully_exposed)
{
  g_autoptr (SgGraph) g = hide_graph (50, 100, 30);
  SgSimResult r;
  GError *err = NULL;
  ck_assert (sg_simulate_with (g, NULL, &no_contention, &r, &err));
  ck_assert_int_eq (r.n_rows, 1);
  const SgCollRow *ag = row_of (&r, g, "ag");
  ck_assert_double_eq_tol (ag->start_us, 0, 1e-9);
  ck_assert_double_eq_tol (ag->end_us, 50, 1e-9);
  ck_assert_double_eq_tol (ag->exposed_us, 50, 1e-9);
  ck_assert_int_eq (ag->status, SG_EXPOSURE_EXPOSED);
  ck_assert_int_eq (ag->hidden_by, SG_NO_NODE);
  ck_assert_int_eq (ag->wait, id_of (g, "wt"));
  /* mm1 50..80, mm0 80..180 */
  ck_assert_double_eq_tol (r.node_start[id_of (g, "mm1")], 50, 1e-9);
  ck_assert_double_eq_tol (r.node_end[id_of (g, "mm0")], 180, 1e-9);
  ck_assert_double_eq_tol (r.step_us, 180, 1e-9);
  ck_assert_double_eq_tol (r.compute_us, 130, 1e-9);
  ck_assert_double_eq_tol (r.comm_us, 50, 1e-9);
  ck_assert_double_eq_tol (r.exposed_us, 50, 1e-9);
  /* max(compute 130, comm 50, critical path max(50 + 30, 100)) */
  ck_assert_double_eq_tol (r.lower_bound_us, 130, 1e-9);
  ck_assert_int_eq (r.exposed, 1);
  sg_sim_result_clear (&r);
}
END_TEST

/* sg_span_run: a fragment on an idle timeline, the same engine; fragments
 * do not see each other, and a wait on a collective outside the fragment
 * costs nothing. */
START_TEST (a_fragment_runs_on_an_idle_timeline)
{
  g_autoptr (SgGraph) g = hide_graph (50, 100, 30);
  SgSpan *sp = sg_span_new (g);
  const SgNodeId hidden[] = { id_of (g, "ag"), id_of (g, "mm0"), id_of (g, "wt") };
  const SgNodeId exposed[] = { id_of (g, "ag"), id_of (g, "wt"), id_of (g, "mm1") };
  const SgNodeId alone[] = { id_of (g, "wt"), id_of (g, "mm1") };
  ck_assert_double_eq_tol (sg_span_run (sp, hidden, 3), 100, 1e-9); /* max (50, 100) */
  ck_assert_double_eq_tol (sg_span_run (sp, exposed, 3), 80, 1e-9); /* 50 + 30 */
  ck_assert_double_eq_tol (sg_span_run (sp, hidden, 3), 100, 1e-9);
  ck_assert_double_eq_tol (sg_span_run (sp, alone, 2), 30, 1e-9);
  sg_span_free (sp);
}
END_TEST

START_TEST (independent_mm_before_wait_hides_collective)
{
  g_autoptr (SgGraph) g = hide_graph (50, 100, 30);
  g_autofree SgNodeId *o = order_of (g, 7, "x", "w", "ag", "mm0", "wt", "mm1", "output");
  SgSimResult r;
  ck_assert (sg_simulate_with (g, o, &no_contention, &r, NULL));
  const SgCollRow *ag = row_of (&r, g, "ag");
  ck_assert_double_eq_tol (ag->exposed_us, 0, 1e-9);
  ck_assert_int_eq (ag->status, SG_EXPOSURE_HIDDEN);
  ck_assert_int_eq (ag->hidden_by, id_of (g, "mm0"));
  ck_assert_int_eq (ag->last_hiding, id_of (g, "mm0"));
  ck_assert_int_eq (ag->n_hiding, 1);
  ck_assert_double_eq_tol (r.step_us, 130, 1e-9);
  ck_assert_int_eq (r.hidden, 1);
  sg_sim_result_clear (&r);
}
END_TEST

START_TEST (short_compute_leaves_collective_partial)
{
  g_autoptr (SgGraph) g = hide_graph (150, 100, 30);
  g_autofree SgNodeId *o = order_of (g, 7, "x", "w", "ag", "mm0", "wt", "mm1", "output");
  SgSimResult r;
  ck_assert (sg_simulate_with (g, o, &no_contention, &r, NULL));
  const SgCollRow *ag = row_of (&r, g, "ag");
  ck_assert_double_eq_tol (ag->exposed_us, 50, 1e-9);
  ck_assert_int_eq (ag->status, SG_EXPOSURE_PARTIAL);
  ck_assert_double_eq_tol (ag->overlap_us, 100, 1e-9);
  ck_assert_double_eq_tol (r.step_us, 180, 1e-9);
  ck_assert_int_eq (r.partial, 1);
  sg_sim_result_clear (&r);
}
END_TEST

START_TEST (contention_is_integrated_piecewise)
{
  /* comm and compute both at half speed while they overlap: ag (50 solo)
   * ends at 100; mm0 has done 50 of its 100 by then and finishes at 150. */
  g_autoptr (SgGraph) g = hide_graph (50, 100, 30);
  g_autofree SgNodeId *o = order_of (g, 7, "x", "w", "ag", "mm0", "wt", "mm1", "output");
  SgContention c = { 2.0, 2.0, 2.0 };
  SgSimResult r;
  ck_assert (sg_simulate_with (g, o, &c, &r, NULL));
  const SgCollRow *ag = row_of (&r, g, "ag");
  ck_assert_double_eq_tol (ag->end_us, 100, 1e-9);
  ck_assert_double_eq_tol (r.node_end[id_of (g, "mm0")], 150, 1e-9);
  ck_assert_double_eq_tol (r.step_us, 180, 1e-9);
  ck_assert_double_eq_tol (r.exposed_us, 0, 1e-9);
  ck_assert_double_eq_tol (r.compute_busy_us, 180, 1e-9);
  /* solo work is what the bound counts */
  ck_assert_double_eq_tol (r.compute_us, 130, 1e-9);
  sg_sim_result_clear (&r);
}
END_TEST

START_TEST (reducing_collectives_slow_by_reduce_slowdown)
{
  /* an all_gather and a reduce_scatter (own groups, 40 us solo each) beside
   * a 100 us matmul: only the reduce_scatter runs at 1/reduce_slowdown */
  g_autoptr (SgGraph) g = tb_new (2);
  tb_group (g, "0", 2, 0, 1);
  tb_group (g, "1", 2, 0, 1);
  tb_input (g, "x", "bfloat16", 2, 64, 64);
  tb_input (g, "w", "bfloat16", 2, 32, 64);
  tb_input (g, "d", "bfloat16", 2, 64, 64);
  tb_all_gather (g, "ag", "w", "0");
  tb_reduce_scatter (g, "rs", "d", "1");
  tb_mm (g, "mm0", "x", "x");
  tb_wait (g, "wa", "ag");
  tb_wait (g, "wr", "rs");
  tb_output (g, 3, "mm0", "wa", "wr");
  cost (g, "ag", 40);
  cost (g, "rs", 40);
  cost (g, "mm0", 100);
  g_autofree SgNodeId *o = order_of (g, 9, "x", "w", "d", "ag", "rs", "mm0", "wa", "wr", "output");
  SgContention c = { 1.0, 1.0, 2.0 };
  SgSimResult r;
  ck_assert (sg_simulate_with (g, o, &c, &r, NULL));
  ck_assert_double_eq_tol (row_of (&r, g, "ag")->end_us, 40, 1e-9);
  ck_assert_double_eq_tol (row_of (&r, g, "rs")->end_us, 80, 1e-9);
  ck_assert_double_eq_tol (r.exposed_us, 0, 1e-9);
  sg_sim_result_clear (&r);
  /* past the matmul the compute stream is idle: full speed again */
  cost (g, "rs", 70); /* 50 us of work by t=100 at half speed, the last 20 alone */
  ck_assert (sg_simulate_with (g, o, &c, &r, NULL));
  ck_assert_double_eq_tol (row_of (&r, g, "rs")->end_us, 120, 1e-9);
  ck_assert_double_eq_tol (r.exposed_us, 20, 1e-9);
  sg_sim_result_clear (&r);
}
END_TEST

/* Two all_gathers issued together, then both waits. */
static SgGraph *
two_ag_graph (bool two_groups)
{
  SgGraph *g = tb_new (4);
  tb_group (g, "a", 2, 0, 1);
  tb_group (g, "b", 2, 0, 2);
  tb_input (g, "w1", "bfloat16", 2, 32, 64);
  tb_input (g, "w2", "bfloat16", 2, 32, 64);
  tb_all_gather (g, "ag1", "w1", "a");
  tb_all_gather (g, "ag2", "w2", two_groups ? "b" : "a");
  tb_wait (g, "wt1", "ag1");
  tb_wait (g, "wt2", "ag2");
  tb_pointwise (g, "sum", "aten.add.Tensor", "wt1", "wt2");
  tb_output (g, 1, "sum");
  cost (g, "ag1", 10);
  cost (g, "ag2", 10);
  cost (g, "sum", 5);
  return g;
}

START_TEST (collectives_on_one_group_serialise)
{
  g_autoptr (SgGraph) g = two_ag_graph (false);
  SgSimResult r;
  ck_assert (sg_simulate_with (g, NULL, &no_contention, &r, NULL));
  ck_assert_double_eq_tol (row_of (&r, g, "ag1")->end_us, 10, 1e-9);
  ck_assert_double_eq_tol (row_of (&r, g, "ag2")->start_us, 10, 1e-9);
  ck_assert_double_eq_tol (row_of (&r, g, "ag2")->end_us, 20, 1e-9);
  ck_assert_double_eq_tol (r.exposed_us, 20, 1e-9);
  ck_assert_double_eq_tol (r.step_us, 25, 1e-9);
  ck_assert_double_eq_tol (r.lower_bound_us, 20, 1e-9); /* group a's work */
  sg_sim_result_clear (&r);
}
END_TEST

START_TEST (collectives_on_two_groups_overlap)
{
  g_autoptr (SgGraph) g = two_ag_graph (true);
  SgSimResult r;
  ck_assert (sg_simulate_with (g, NULL, &no_contention, &r, NULL));
  ck_assert_double_eq_tol (row_of (&r, g, "ag2")->start_us, 0, 1e-9);
  ck_assert_double_eq_tol (row_of (&r, g, "ag2")->end_us, 10, 1e-9);
  /* the first wait takes the whole stall; the second finds ag2 done */
  ck_assert_double_eq_tol (row_of (&r, g, "ag1")->exposed_us, 10, 1e-9);
  ck_assert_double_eq_tol (row_of (&r, g, "ag2")->exposed_us, 0, 1e-9);
  ck_assert_int_eq (row_of (&r, g, "ag2")->status, SG_EXPOSURE_HIDDEN);
  ck_assert_double_eq_tol (r.step_us, 15, 1e-9);
  sg_sim_result_clear (&r);
}
END_TEST

/* --- start wait (comm_start_wait) ----------------------------------------- */

/* x, w -> ag(w, 50 us) -> wt; "k" = x.x (a GEMM) or x+x (pointwise), 100
 * us; mm1 = x.wt, 30 us. Costs are cost_us overrides; the estimate pass
 * runs with a graph cluster that sets comm_start_wait to @sw. */
static SgGraph *
start_wait_graph (double sw, bool gemm)
{
  SgGraph *g = tb_new (2);
  tb_group (g, "0", 2, 0, 1);
  tb_input (g, "x", "bfloat16", 2, 64, 64);
  tb_input (g, "w", "bfloat16", 2, 32, 64);
  tb_cost (g, tb_all_gather (g, "ag", "w", "0"), 50);
  tb_wait (g, "wt", "ag");
  tb_cost (g, tb_mm (g, "mm1", "x", "wt"), 30);
  tb_cost (g, gemm ? tb_mm (g, "k", "x", "x") : tb_pointwise (g, "k", "aten.add.Tensor", "x", "x"),
           100);
  tb_output (g, 2, "k", "mm1");
  g->cluster_json = g_strdup_printf ("{\"comm_start_wait\": %g}", sw);
  SgConfig cfg;
  sg_config_init (&cfg);
  GError *err = NULL;
  ck_assert_msg (sg_estimate_costs (g, &cfg, &err), "%s", err ? err->message : "");
  ck_assert_double_eq (sg_cost_model_comm_start_wait (sg_graph_cost_model (g)), sw);
  return g;
}

START_TEST (collective_issued_before_a_gemm_waits_for_its_end)
{
  g_autoptr (SgGraph) g = start_wait_graph (1.0, true);
  g_autofree SgNodeId *o = order_of (g, 7, "x", "w", "ag", "k", "wt", "mm1", "output");
  SgSimResult r;
  ck_assert (sg_simulate_with (g, o, &no_contention, &r, NULL));
  /* k 0..100 holds the SMs: ag 100..150, wt stalls 50, mm1 150..180 */
  const SgCollRow *ag = row_of (&r, g, "ag");
  ck_assert_double_eq_tol (ag->issue_us, 0, 1e-9);
  ck_assert_double_eq_tol (ag->start_us, 100, 1e-9);
  ck_assert_double_eq_tol (ag->end_us, 150, 1e-9);
  ck_assert_double_eq_tol (ag->exposed_us, 50, 1e-9);
  ck_assert_double_eq_tol (ag->overlap_us, 0, 1e-9);
  ck_assert_int_eq (ag->status, SG_EXPOSURE_EXPOSED);
  ck_assert_double_eq_tol (r.node_start[id_of (g, "ag")], 100, 1e-9);
  ck_assert_double_eq_tol (r.node_start[id_of (g, "mm1")], 150, 1e-9);
  ck_assert_double_eq_tol (r.step_us, 180, 1e-9);
  ck_assert_double_eq_tol (r.compute_busy_us, 130, 1e-9);
  sg_sim_result_clear (&r);
}
END_TEST

/* The all_gather starts at once beside k, which holds no SM: hidden by it. */
static void
assert_ag_starts_at_once (SgGraph *g)
{
  g_autofree SgNodeId *o = order_of (g, 7, "x", "w", "ag", "k", "wt", "mm1", "output");
  SgSimResult r;
  ck_assert (sg_simulate_with (g, o, &no_contention, &r, NULL));
  const SgCollRow *ag = row_of (&r, g, "ag");
  ck_assert_double_eq_tol (ag->start_us, 0, 1e-9);
  ck_assert_double_eq_tol (ag->end_us, 50, 1e-9);
  ck_assert_double_eq_tol (ag->exposed_us, 0, 1e-9);
  ck_assert_int_eq (ag->status, SG_EXPOSURE_HIDDEN);
  ck_assert_int_eq (ag->hidden_by, id_of (g, "k"));
  ck_assert_double_eq_tol (r.step_us, 130, 1e-9);
  sg_sim_result_clear (&r);
}

START_TEST (collective_issued_before_a_pointwise_op_starts_at_once)
{
  g_autoptr (SgGraph) g = start_wait_graph (1.0, false);
  assert_ag_starts_at_once (g);
}
END_TEST

START_TEST (collective_beside_an_sm_limited_gemm_starts_at_once)
{
  /* the GEMM k runs on fewer SMs (sm_count): it does not hold the
   * all_gather, which runs beside it as beside a pointwise op */
  g_autoptr (SgGraph) g = start_wait_graph (1.0, true);
  g->nodes[id_of (g, "k")].sm_count = 112;
  assert_ag_starts_at_once (g);
}
END_TEST

START_TEST (partial_start_wait_delays_by_that_fraction_of_the_gemm)
{
  g_autoptr (SgGraph) g = start_wait_graph (0.25, true);
  g_autofree SgNodeId *o = order_of (g, 7, "x", "w", "ag", "k", "wt", "mm1", "output");
  SgSimResult r;
  ck_assert (sg_simulate_with (g, o, &no_contention, &r, NULL));
  /* starts after 25 of k's 100 us, ends at 75 beside k: hidden */
  const SgCollRow *ag = row_of (&r, g, "ag");
  ck_assert_double_eq_tol (ag->start_us, 25, 1e-9);
  ck_assert_double_eq_tol (ag->end_us, 75, 1e-9);
  ck_assert_double_eq_tol (ag->overlap_us, 50, 1e-9);
  ck_assert_int_eq (ag->status, SG_EXPOSURE_HIDDEN);
  ck_assert_double_eq_tol (r.step_us, 130, 1e-9);
  sg_sim_result_clear (&r);
}
END_TEST

START_TEST (zero_start_wait_gives_the_old_timeline)
{
  /* the timeline of independent_mm_before_wait_hides_collective and of
   * contention_is_integrated_piecewise, with the cost model attached */
  g_autoptr (SgGraph) g = start_wait_graph (0.0, true);
  g_autofree SgNodeId *o = order_of (g, 7, "x", "w", "ag", "k", "wt", "mm1", "output");
  SgSimResult r;
  ck_assert (sg_simulate_with (g, o, &no_contention, &r, NULL));
  const SgCollRow *ag = row_of (&r, g, "ag");
  ck_assert_double_eq_tol (ag->start_us, 0, 1e-9);
  ck_assert_double_eq_tol (ag->end_us, 50, 1e-9);
  ck_assert_double_eq_tol (ag->exposed_us, 0, 1e-9);
  ck_assert_int_eq (ag->hidden_by, id_of (g, "k"));
  ck_assert_double_eq_tol (r.step_us, 130, 1e-9);
  sg_sim_result_clear (&r);
  SgContention c = { 2.0, 2.0, 2.0 };
  ck_assert (sg_simulate_with (g, o, &c, &r, NULL));
  ck_assert_double_eq_tol (row_of (&r, g, "ag")->end_us, 100, 1e-9);
  ck_assert_double_eq_tol (r.node_end[id_of (g, "k")], 150, 1e-9);
  ck_assert_double_eq_tol (r.step_us, 180, 1e-9);
  ck_assert_double_eq_tol (r.compute_busy_us, 180, 1e-9);
  sg_sim_result_clear (&r);
  /* and the same timeline, node by node, as a graph without a cost model */
  g_autoptr (SgGraph) bare = hide_graph (50, 100, 30);
  g_autofree SgNodeId *ob = order_of (bare, 7, "x", "w", "ag", "mm0", "wt", "mm1", "output");
  SgSimResult a, b;
  ck_assert (sg_simulate_with (g, o, &c, &a, NULL));
  ck_assert (sg_simulate_with (bare, ob, &c, &b, NULL));
  for (int32_t p = 0; p < 7; p++) {
    ck_assert_double_eq (a.node_start[o[p]], b.node_start[ob[p]]);
    ck_assert_double_eq (a.node_end[o[p]], b.node_end[ob[p]]);
  }
  ck_assert_double_eq (a.step_us, b.step_us);
  sg_sim_result_clear (&a);
  sg_sim_result_clear (&b);
}
END_TEST

/* ag1, ag2 on one group (10 us each), then pointwise p (5 us) and GEMM mm
 * (100 us): ag1 runs 0..10 beside p and mm; ag2 becomes startable at 10
 * while mm runs with 95 us left. */
static SgGraph *
queued_graph (double sw)
{
  SgGraph *g = tb_new (2);
  tb_group (g, "a", 2, 0, 1);
  tb_input (g, "x", "bfloat16", 2, 64, 64);
  tb_input (g, "w1", "bfloat16", 2, 32, 64);
  tb_input (g, "w2", "bfloat16", 2, 32, 64);
  tb_cost (g, tb_all_gather (g, "ag1", "w1", "a"), 10);
  tb_cost (g, tb_all_gather (g, "ag2", "w2", "a"), 10);
  tb_cost (g, tb_pointwise (g, "p", "aten.relu.default", "x", NULL), 5);
  tb_cost (g, tb_mm (g, "mm", "x", "x"), 100);
  tb_wait (g, "wt1", "ag1");
  tb_wait (g, "wt2", "ag2");
  tb_cost (g, tb_pointwise (g, "sum", "aten.add.Tensor", "wt1", "wt2"), 5);
  tb_output (g, 3, "p", "mm", "sum");
  g->cluster_json = g_strdup_printf ("{\"comm_start_wait\": %g}", sw);
  SgConfig cfg;
  sg_config_init (&cfg);
  ck_assert (sg_estimate_costs (g, &cfg, NULL));
  return g;
}

START_TEST (collective_queued_behind_another_waits_for_the_running_gemm)
{
  const double sw[] = { 1.0, 0.5, 0.0 };
  const double start[] = { 105, 57.5, 10 }; /* 10 + sw x 95 */
  for (int i = 0; i < 3; i++) {
    g_autoptr (SgGraph) g = queued_graph (sw[i]);
    SgSimResult r;
    ck_assert (sg_simulate_with (g, NULL, &no_contention, &r, NULL));
    ck_assert_double_eq_tol (row_of (&r, g, "ag1")->start_us, 0, 1e-9);
    ck_assert_double_eq_tol (row_of (&r, g, "ag1")->end_us, 10, 1e-9);
    ck_assert_double_eq_tol (row_of (&r, g, "ag2")->start_us, start[i], 1e-9);
    ck_assert_double_eq_tol (row_of (&r, g, "ag2")->end_us, start[i] + 10, 1e-9);
    ck_assert_double_eq_tol (r.node_end[id_of (g, "mm")], 105, 1e-9);
    /* the wait on ag2 stalls only when it ends after mm */
    ck_assert_double_eq_tol (r.step_us, MAX (105, start[i] + 10) + 5, 1e-9);
    sg_sim_result_clear (&r);
  }
}
END_TEST

START_TEST (held_collective_starts_when_the_compute_stream_stalls)
{
  /* issued, then waited on at once: the stall frees the SMs, no delay */
  g_autoptr (SgGraph) g = start_wait_graph (1.0, true);
  SgSimResult r;
  ck_assert (sg_simulate_with (g, NULL, &no_contention, &r, NULL));
  ck_assert_double_eq_tol (row_of (&r, g, "ag")->start_us, 0, 1e-9);
  ck_assert_double_eq_tol (row_of (&r, g, "ag")->exposed_us, 50, 1e-9);
  ck_assert_double_eq_tol (r.step_us, 180, 1e-9);
  sg_sim_result_clear (&r);
}
END_TEST

START_TEST (order_with_input_after_user_is_rejected_naming_it)
{
  g_autoptr (SgGraph) g = hide_graph (50, 100, 30);
  g_autofree SgNodeId *o = order_of (g, 7, "x", "w", "wt", "ag", "mm0", "mm1", "output");
  SgSimResult r;
  GError *err = NULL;
  ck_assert (!sg_simulate (g, o, &r, &err));
  ck_assert (g_error_matches (err, SG_SCHEDULE_ERROR, SG_SCHEDULE_ERROR_ORDER));
  ck_assert_msg (strstr (err->message, "'wt'") && strstr (err->message, "'ag'"), "%s",
                 err->message);
  g_error_free (err);
}
END_TEST

START_TEST (missing_costs_are_an_error)
{
  g_autoptr (SgGraph) g = hide_graph (50, 100, 30);
  g->nodes[id_of (g, "mm1")].est_us = NAN;
  SgSimResult r;
  GError *err = NULL;
  ck_assert (!sg_simulate (g, NULL, &r, &err));
  ck_assert (g_error_matches (err, SG_SCHEDULE_ERROR, SG_SCHEDULE_ERROR_COST));
  ck_assert (strstr (err->message, "'mm1'"));
  g_error_free (err);
}
END_TEST

static void
expect_order_error (const SgGraph *g, const char *json, const char *needle)
{
  cJSON *arr = cJSON_Parse (json);
  ck_assert (arr);
  GError *err = NULL;
  SgNodeId *o = sg_order_from_json (g, arr, "test", &err);
  cJSON_Delete (arr);
  ck_assert_msg (o == NULL, "accepted %s", json);
  ck_assert_msg (strstr (err->message, needle), "'%s' not in: %s", needle, err->message);
  g_error_free (err);
}

START_TEST (order_files_name_the_first_bad_node)
{
  g_autoptr (SgGraph) g = hide_graph (50, 100, 30);
  expect_order_error (g, "[\"x\",\"w\",\"ag\",\"wt\",\"mm1\",\"nope\",\"output\"]",
                      "unknown node 'nope'");
  expect_order_error (g, "[\"x\",\"w\",\"ag\",\"wt\",\"mm1\",\"x\",\"output\"]",
                      "'x' is repeated");
  expect_order_error (g, "[\"x\",\"w\",\"ag\",\"wt\",\"mm1\",\"output\"]", "'mm0' is missing");
  expect_order_error (g, "[\"x\",\"w\",\"ag\",\"mm1\",\"wt\",\"mm0\",\"output\"]",
                      "'mm1' comes before its input 'wt'");
  expect_order_error (g, "[\"x\",\"w\",\"ag\",\"wt\",\"mm0\",\"output\",\"mm1\"]",
                      "the output node 'output' must come last");
  expect_order_error (g, "{\"x\": 1}", "JSON array");
  cJSON *ok = cJSON_Parse ("[\"x\",\"w\",\"mm0\",\"ag\",\"wt\",\"mm1\",\"output\"]");
  g_autofree SgNodeId *o = sg_order_from_json (g, ok, "test", NULL);
  cJSON_Delete (ok);
  ck_assert (o != NULL);
  ck_assert_int_eq (o[2], id_of (g, "mm0"));
  GError *err = NULL;
  ck_assert (sg_order_load (g, "/nonexistent/order.json", &err) == NULL);
  ck_assert (g_error_matches (err, SG_SCHEDULE_ERROR, SG_SCHEDULE_ERROR_IO));
  g_error_free (err);
}
END_TEST

static const char *const samples[] = {
  "dev_fsdp8_L2_h1024",    "dev_fsdp2_tp4_L2_h1024", "w2_fsdp2_L2_h1024",
  "w2_tiny_fsdp2_L2_h256", "w2_tiny_tp2_L2_h256",    "w2_tp2_L2_h1024",
};

START_TEST (peak_bytes_agree_with_graph_liveness)
{
  g_autofree char *path = g_strdup_printf ("%s/%s.json", SG_TEST_DATA, samples[_i]);
  g_autofree char *opath
      = g_strdup_printf ("%s/%s.peer_order_plain.json", SG_TEST_DATA, samples[_i]);
  GError *err = NULL;
  g_autoptr (SgGraph) g = sg_graph_load (path, &err);
  ck_assert_msg (g != NULL, "%s", err ? err->message : "");
  SgConfig cfg;
  sg_config_init (&cfg);
  ck_assert (sg_estimate_costs (g, &cfg, NULL));
  g_autofree SgNodeId *peer = sg_order_load (g, opath, &err);
  ck_assert_msg (peer != NULL, "%s", err ? err->message : "");
  SgSimResult a, b;
  ck_assert (sg_simulate (g, NULL, &a, NULL));
  ck_assert (sg_simulate (g, peer, &b, NULL));
  ck_assert_uint_eq (a.peak_bytes, sg_graph_peak_bytes (g, NULL));
  ck_assert_uint_eq (b.peak_bytes, sg_graph_peak_bytes (g, peer));
  /* every row has a wait, a start no earlier than its issue, and the
   * totals add up */
  double sum = 0.0;
  for (int32_t i = 0; i < b.n_rows; i++) {
    ck_assert_int_ne (b.rows[i].wait, SG_NO_NODE);
    ck_assert (b.rows[i].start_us >= b.rows[i].issue_us - 1e-9);
    ck_assert (b.rows[i].end_us >= b.rows[i].start_us + b.rows[i].est_us - 1e-6);
    sum += b.rows[i].exposed_us;
  }
  ck_assert_double_eq_tol (sum, b.exposed_us, 1e-6);
  ck_assert_int_eq (b.hidden + b.partial + b.exposed, b.n_rows);
  ck_assert (b.step_us >= b.lower_bound_us - 1e-6);
  ck_assert (a.step_us >= a.lower_bound_us - 1e-6);
  sg_sim_result_clear (&a);
  sg_sim_result_clear (&b);
}
END_TEST

static Suite *
sim_suite (void)
{
  Suite *s = suite_create ("sim");
  TCase *tc = tcase_create ("core");
  tcase_add_test (tc, wait_right_after_collective_is_fully_exposed);
  tcase_add_test (tc, independent_mm_before_wait_hides_collective);
  tcase_add_test (tc, a_fragment_runs_on_an_idle_timeline);
  tcase_add_test (tc, short_compute_leaves_collective_partial);
  tcase_add_test (tc, contention_is_integrated_piecewise);
  tcase_add_test (tc, reducing_collectives_slow_by_reduce_slowdown);
  tcase_add_test (tc, collectives_on_one_group_serialise);
  tcase_add_test (tc, collectives_on_two_groups_overlap);
  tcase_add_test (tc, collective_issued_before_a_gemm_waits_for_its_end);
  tcase_add_test (tc, collective_issued_before_a_pointwise_op_starts_at_once);
  tcase_add_test (tc, collective_beside_an_sm_limited_gemm_starts_at_once);
  tcase_add_test (tc, partial_start_wait_delays_by_that_fraction_of_the_gemm);
  tcase_add_test (tc, zero_start_wait_gives_the_old_timeline);
  tcase_add_test (tc, collective_queued_behind_another_waits_for_the_running_gemm);
  tcase_add_test (tc, held_collective_starts_when_the_compute_stream_stalls);
  tcase_add_test (tc, order_with_input_after_user_is_rejected_naming_it);
  tcase_add_test (tc, missing_costs_are_an_error);
  tcase_add_test (tc, order_files_name_the_first_bad_node);
  tcase_add_loop_test (tc, peak_bytes_agree_with_graph_liveness, 0, G_N_ELEMENTS (samples));
  tcase_set_timeout (tc, 60);
  suite_add_tcase (s, tc);
  return s;
}

int
main (void)
{
  SRunner *sr = srunner_create (sim_suite ());
  srunner_run_all (sr, CK_NORMAL);
  int failed = srunner_ntests_failed (sr);
  srunner_free (sr);
  return failed ? 1 : 0;
}
