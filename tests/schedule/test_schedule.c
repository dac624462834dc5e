/* test_schedule.c: the list scheduler, one behaviour per test, and the
 * quality bar on the sample graphs (ours vs the input order and vs PyTorch
 * Inductor's order, same cost model). */
#include <check.h>
#include <string.h>

#include "builder.h"
#include "schedule-private.h"

static SgNodeId
id_of (const SgGraph *g, const char *name)
{
  SgNodeId id = sg_graph_lookup (g, name);
  ck_assert_msg (id != SG_NO_NODE, "no node %s", name);
  return id;
}

static void
cost (SgGraph *g, const char *name, double us)
{
  SgNodeId id = id_of (g, name);
  g->nodes[id].est_us = us;
  g->nodes[id].est_src = SG_COST_GRAPH;
}

/* Input order: ag, its wait, mm1 (reads it), then mm0 (independent). The
 * activations dominate memory, so moving mm0 up stays within 5%. */
static SgGraph *
hide_graph (void)
{
  SgGraph *g = tb_new (2);
  tb_group (g, "0", 2, 0, 1);
  tb_input (g, "x", "bfloat16", 2, 512, 512);
  tb_input (g, "y", "bfloat16", 2, 512, 8);
  tb_input (g, "w", "bfloat16", 2, 8, 512);
  tb_all_gather (g, "ag", "w", "0");
  tb_wait (g, "wt", "ag");
  tb_t (g, "t", "wt");
  tb_mm (g, "mm1", "x", "t");
  tb_mm (g, "mm0", "x", "y");
  tb_output (g, 2, "mm0", "mm1");
  cost (g, "ag", 50);
  cost (g, "mm0", 100);
  cost (g, "mm1", 30);
  return g;
}

static SgConfig
config (void)
{
  SgConfig cfg;
  sg_config_init (&cfg);
  return cfg;
}

static bool
has_edge (const SgGraph *g, const char *from, const char *to, SgEdgeKind kind)
{
  if (!g->implicit_edges)
    return false;
  for (guint i = 0; i < g->implicit_edges->len; i++) {
    const SgImplicitEdge *e = &g_array_index (g->implicit_edges, SgImplicitEdge, i);
    if (strcmp (g->nodes[e->from].name, from) == 0 && strcmp (g->nodes[e->to].name, to) == 0
        && e->kind == (int32_t)kind)
      return true;
  }
  return false;
}

START_TEST (independent_mm_hides_all_gather)
{
  g_autoptr (SgGraph) g = hide_graph ();
  SgConfig cfg = config ();
  SgSimResult before;
  ck_assert (sg_simulate (g, NULL, &before, NULL));
  ck_assert_double_eq_tol (before.exposed_us, 50, 1e-9);
  GError *err = NULL;
  ck_assert_msg (sg_schedule_reorder (g, &cfg, &err), "%s", err ? err->message : "");
  ck_assert (sg_graph_validate (g, NULL));
  SgSimResult r;
  ck_assert (sg_simulate (g, NULL, &r, NULL));
  ck_assert_int_eq (r.n_rows, 1);
  ck_assert_double_eq_tol (r.exposed_us, 0, 1e-9);
  ck_assert_int_eq (r.rows[0].status, SG_EXPOSURE_HIDDEN);
  ck_assert_int_eq (r.rows[0].hidden_by, id_of (g, "mm0"));
  ck_assert_double_eq_tol (r.step_us, 130, 1e-9);
  /* the hiding relation is recorded as implicit edges */
  ck_assert (has_edge (g, "ag", "mm0", SG_EDGE_HIDE_START));
  ck_assert (has_edge (g, "mm0", "wt", SG_EDGE_HIDE_WAIT));
  sg_sim_result_clear (&before);
  sg_sim_result_clear (&r);
}
END_TEST

/* ag (50 us) -> wt -> t -> mm1 (30 us); then an independent GEMM k
 * (100 us) and pointwise p (40 us). With comm_start_wait 1 an all_gather
 * issued right before k waits for k's end (and is exposed 10 us even with p
 * after k); issued before p it starts at once and is hidden. */
static SgGraph *
shield_graph (void)
{
  SgGraph *g = tb_new (2);
  tb_group (g, "0", 2, 0, 1);
  tb_input (g, "x", "bfloat16", 2, 512, 512);
  tb_input (g, "w", "bfloat16", 2, 8, 512);
  tb_cost (g, tb_all_gather (g, "ag", "w", "0"), 50);
  tb_wait (g, "wt", "ag");
  tb_t (g, "t", "wt");
  tb_cost (g, tb_mm (g, "mm1", "x", "t"), 30);
  tb_cost (g, tb_mm (g, "k", "x", "x"), 100);
  tb_cost (g, tb_pointwise (g, "p", "aten.relu.default", "x", NULL), 40);
  tb_output (g, 3, "mm1", "k", "p");
  g->cluster_json = g_strdup (
      "{\"comm_start_wait\": 1, \"comm_slowdown\": 1, \"compute_slowdown\": 1}");
  SgConfig cfg = config ();
  GError *err = NULL;
  ck_assert_msg (sg_estimate_costs (g, &cfg, &err), "%s", err ? err->message : "");
  return g;
}

START_TEST (collective_is_issued_before_pointwise_work_rather_than_a_gemm)
{
  g_autoptr (SgGraph) g = shield_graph ();
  SgSimResult before;
  ck_assert (sg_simulate (g, NULL, &before, NULL));
  ck_assert_double_eq_tol (before.exposed_us, 50, 1e-9);
  /* the GEMM first (the old best order) holds the all_gather */
  const char *gemm_first[] = { "x", "w", "ag", "k", "p", "wt", "t", "mm1", "output" };
  SgNodeId o[9];
  for (int i = 0; i < 9; i++)
    o[i] = id_of (g, gemm_first[i]);
  SgSimResult held;
  ck_assert (sg_simulate (g, o, &held, NULL));
  ck_assert_double_eq_tol (held.rows[0].start_us, 100, 1e-9);
  ck_assert_double_eq_tol (held.exposed_us, 10, 1e-9);
  SgConfig cfg = config ();
  GError *err = NULL;
  ck_assert_msg (sg_schedule_reorder (g, &cfg, &err), "%s", err ? err->message : "");
  ck_assert (sg_graph_validate (g, NULL));
  SgSimResult r;
  ck_assert (sg_simulate (g, NULL, &r, NULL));
  ck_assert_double_eq_tol (r.exposed_us, 0, 1e-9);
  ck_assert_double_eq_tol (r.rows[0].start_us, 0, 1e-9);
  ck_assert_int_eq (r.rows[0].hidden_by, id_of (g, "p"));
  /* p runs right after the issue, before the GEMM */
  ck_assert_int_lt (id_of (g, "ag"), id_of (g, "p"));
  ck_assert_int_lt (id_of (g, "p"), id_of (g, "k"));
  ck_assert_double_eq_tol (r.node_start[id_of (g, "p")], 0, 1e-9);
  ck_assert_double_eq_tol (r.step_us, 170, 1e-9);
  sg_sim_result_clear (&before);
  sg_sim_result_clear (&held);
  sg_sim_result_clear (&r);
}
END_TEST

START_TEST (wait_stays_after_its_collective_and_before_its_consumer)
{
  g_autoptr (SgGraph) g = hide_graph ();
  SgConfig cfg = config ();
  ck_assert (sg_schedule_reorder (g, &cfg, NULL));
  SgNodeId ag = id_of (g, "ag"), wt = id_of (g, "wt"), mm0 = id_of (g, "mm0");
  SgNodeId mm1 = id_of (g, "mm1");
  /* ids are the new order */
  ck_assert_int_lt (ag, mm0);
  ck_assert_int_lt (mm0, wt); /* deferred past the compute that hides it */
  ck_assert_int_lt (wt, mm1); /* and placed right before its consumer */
  ck_assert_int_eq (wt + 1, id_of (g, "t"));
  ck_assert_int_eq (g->output, g->n_nodes - 1);
}
END_TEST

START_TEST (no_reorder_keeps_the_input_order)
{
  g_autoptr (SgGraph) g = hide_graph ();
  SgConfig cfg = config ();
  cfg.reorder = false;
  ck_assert (sg_schedule_reorder (g, &cfg, NULL));
  ck_assert_int_eq (id_of (g, "ag"), 3);
  ck_assert_int_eq (id_of (g, "wt"), 4);
  ck_assert_int_eq (id_of (g, "mm0"), 7);
}
END_TEST

/* Two all_gathers on one group, both ready at the start; a long
 * independent mm0 first in the input order. */
static SgGraph *
budget_graph (void)
{
  SgGraph *g = tb_new (2);
  tb_group (g, "0", 2, 0, 1);
  tb_input (g, "x", "bfloat16", 2, 256, 256);
  tb_input (g, "w1", "bfloat16", 2, 8, 256);
  tb_input (g, "w2", "bfloat16", 2, 8, 256);
  tb_mm (g, "mm0", "x", "x");
  tb_all_gather (g, "ag1", "w1", "0");
  tb_wait (g, "wt1", "ag1");
  tb_t (g, "t1", "wt1");
  tb_mm (g, "mm1", "x", "t1");
  tb_all_gather (g, "ag2", "w2", "0");
  tb_wait (g, "wt2", "ag2");
  tb_t (g, "t2", "wt2");
  tb_mm (g, "mm2", "x", "t2");
  tb_output (g, 3, "mm0", "mm1", "mm2");
  cost (g, "mm0", 200);
  cost (g, "ag1", 50);
  cost (g, "ag2", 50);
  cost (g, "mm1", 100);
  cost (g, "mm2", 100);
  return g;
}

START_TEST (unlimited_budget_prefetches_both_collectives)
{
  g_autoptr (SgGraph) g = budget_graph ();
  SgConfig cfg = config ();
  ck_assert (sg_schedule_reorder (g, &cfg, NULL));
  ck_assert_int_lt (id_of (g, "ag2"), id_of (g, "wt1"));
  ck_assert_int_lt (id_of (g, "ag2"), id_of (g, "mm0"));
  SgSimResult r;
  ck_assert (sg_simulate (g, NULL, &r, NULL));
  ck_assert_double_eq_tol (r.exposed_us, 0, 1e-9);
  sg_sim_result_clear (&r);
}
END_TEST

START_TEST (bytes_in_flight_budget_forces_an_early_wait)
{
  g_autoptr (SgGraph) g = budget_graph ();
  SgConfig cfg = config ();
  cfg.max_in_flight_bytes = sg_node_comm_bytes (g, id_of (g, "ag1"));
  ck_assert (sg_schedule_reorder (g, &cfg, NULL));
  /* ag2 waits for budget: wt1 is placed as soon as ag1 is done (behind
   * mm0, no stall), then ag2 is issued, still ahead of mm1 */
  ck_assert_int_lt (id_of (g, "ag1"), id_of (g, "mm0"));
  ck_assert_int_lt (id_of (g, "wt1"), id_of (g, "ag2"));
  ck_assert_int_lt (id_of (g, "mm0"), id_of (g, "wt1"));
  ck_assert_int_lt (id_of (g, "ag2"), id_of (g, "mm1"));
  SgSimResult r;
  ck_assert (sg_simulate (g, NULL, &r, NULL));
  ck_assert_double_eq_tol (r.exposed_us, 0, 1e-9);
  sg_sim_result_clear (&r);
}
END_TEST

START_TEST (prefetch_limit_caps_collectives_in_flight)
{
  g_autoptr (SgGraph) g = budget_graph ();
  SgConfig cfg = config ();
  cfg.prefetch_limit = 1;
  ck_assert (sg_schedule_reorder (g, &cfg, NULL));
  ck_assert_int_lt (id_of (g, "wt1"), id_of (g, "ag2"));
}
END_TEST

START_TEST (zero_peak_allowance_never_raises_the_peak)
{
  /* a zero allowance: nothing may be allocated earlier than the input
   * order does, so the all_gathers are not prefetched ahead of mm0 */
  g_autoptr (SgGraph) g = budget_graph ();
  SgConfig cfg = config ();
  cfg.max_peak_increase = 0.0;
  SgScheduleStats st;
  g_autofree SgNodeId *order = sg_schedule_compute (g, &cfg, &st, NULL);
  ck_assert (order != NULL);
  ck_assert_uint_le (st.scheduled_peak_bytes, st.input_peak_bytes);
  ck_assert_uint_eq (sg_graph_peak_bytes (g, order), st.scheduled_peak_bytes);
  SgConfig bad = config ();
  bad.max_peak_increase = -1;
  GError *err = NULL;
  ck_assert (sg_schedule_compute (g, &bad, NULL, &err) == NULL);
  ck_assert (g_error_matches (err, SG_SCHEDULE_ERROR, SG_SCHEDULE_ERROR_CONFIG));
  ck_assert (strstr (err->message, "max_peak_increase"));
  g_error_free (err);
}
END_TEST

static SgGraph *
layered_graph (int layers)
{
  SgGraph *g = tb_new (4);
  tb_group (g, "dp", 2, 0, 1);
  tb_group (g, "tp", 2, 0, 2);
  tb_input (g, "x", "bfloat16", 2, 128, 128);
  char prev[32] = "x";
  for (int l = 0; l < layers; l++) {
    char w[32], ag[32], wt[32], mm[32], act[32], rs[32], rw[32], t[32];
    g_snprintf (w, sizeof w, "w%d", l);
    g_snprintf (ag, sizeof ag, "ag%d", l);
    g_snprintf (wt, sizeof wt, "agw%d", l);
    g_snprintf (t, sizeof t, "t%d", l);
    g_snprintf (mm, sizeof mm, "mm%d", l);
    g_snprintf (act, sizeof act, "act%d", l);
    g_snprintf (rs, sizeof rs, "rs%d", l);
    g_snprintf (rw, sizeof rw, "rsw%d", l);
    tb_input (g, w, "bfloat16", 2, 64, 128);
    tb_all_gather (g, ag, w, "dp");
    tb_wait (g, wt, ag);
    tb_t (g, t, wt);
    tb_mm (g, mm, prev, t);
    tb_pointwise (g, act, "aten.silu.default", mm, NULL);
    tb_reduce_scatter (g, rs, act, l % 2 ? "tp" : "dp");
    tb_wait (g, rw, rs);
    SgNodeId id = id_of (g, mm);
    g->nodes[id].est_us = 40 + 7 * (l % 3);
    g->nodes[id_of (g, act)].est_us = 5;
    g->nodes[id_of (g, ag)].est_us = 30;
    g->nodes[id_of (g, rs)].est_us = 25;
    g_strlcpy (prev, act, sizeof prev);
  }
  GString *out = g_string_new ("{\"name\":\"output\",\"op\":\"output\",\"target\":\"output\","
                               "\"args\":[[");
  for (int l = 0; l < layers; l++)
    g_string_append_printf (out, "%s{\"node\":\"rsw%d\"}", l ? "," : "", l);
  g_string_append (out, "]],\"kwargs\":{}}");
  g_assert (sg_graph_append_json (g, out->str, NULL) != SG_NO_NODE);
  g_string_free (out, TRUE);
  g->output = g->n_nodes - 1;
  return g;
}

START_TEST (same_input_gives_the_same_order_every_run)
{
  SgConfig cfg = config ();
  g_autoptr (SgGraph) a = layered_graph (6);
  g_autoptr (SgGraph) b = layered_graph (6);
  ck_assert (sg_schedule_reorder (a, &cfg, NULL));
  ck_assert (sg_schedule_reorder (b, &cfg, NULL));
  ck_assert_int_eq (a->n_nodes, b->n_nodes);
  for (SgNodeId i = 0; i < a->n_nodes; i++)
    ck_assert_str_eq (a->nodes[i].name, b->nodes[i].name);
  ck_assert (sg_graph_validate (a, NULL));
  /* scheduling again from the scheduled order changes nothing for the worse */
  SgSimResult r1, r2;
  ck_assert (sg_simulate (a, NULL, &r1, NULL));
  ck_assert (sg_schedule_reorder (a, &cfg, NULL));
  ck_assert (sg_simulate (a, NULL, &r2, NULL));
  ck_assert (r2.exposed_us <= r1.exposed_us + 1e-9);
  sg_sim_result_clear (&r1);
  sg_sim_result_clear (&r2);
}
END_TEST

/* Large enough for the variants to run on several threads: the order must
 * still be the same on every run. */
START_TEST (large_graph_gives_the_same_order_every_run)
{
  SgConfig cfg = config ();
  g_autoptr (SgGraph) g = layered_graph (2500);
  ck_assert_int_ge (g->n_nodes, 20000);
  SgScheduleStats s1, s2;
  g_autofree SgNodeId *o1 = sg_schedule_compute (g, &cfg, &s1, NULL);
  g_autofree SgNodeId *o2 = sg_schedule_compute (g, &cfg, &s2, NULL);
  ck_assert (memcmp (o1, o2, sizeof (SgNodeId) * (size_t)g->n_nodes) == 0);
  ck_assert_int_eq (s1.variant, s2.variant);
  ck_assert_int_eq (s1.n_variants, s2.n_variants);
  ck_assert_double_eq (s1.scheduled_exposed_us, s2.scheduled_exposed_us);
  ck_assert (s1.scheduled_exposed_us < s1.input_exposed_us);
}
END_TEST

START_TEST (schedule_never_exposes_more_than_the_input_order)
{
  SgConfig cfg = config ();
  for (int layers = 1; layers <= 8; layers++) {
    g_autoptr (SgGraph) g = layered_graph (layers);
    SgSimResult in, out;
    ck_assert (sg_simulate (g, NULL, &in, NULL));
    ck_assert (sg_schedule_reorder (g, &cfg, NULL));
    ck_assert (sg_graph_validate (g, NULL));
    ck_assert (sg_simulate (g, NULL, &out, NULL));
    ck_assert_msg (out.exposed_us <= in.exposed_us + 1e-9, "%d layers: %g > %g", layers,
                   out.exposed_us, in.exposed_us);
    ck_assert (out.peak_bytes <= (uint64_t)((double)in.peak_bytes * 1.05));
    /* the layered graph has plenty of independent work: prefetching must pay */
    if (layers >= 3)
      ck_assert (out.exposed_us < in.exposed_us);
    sg_sim_result_clear (&in);
    sg_sim_result_clear (&out);
  }
}
END_TEST

/* HSDP-style chain: reduce_scatter -> wait -> all_reduce (another group) ->
 * wait, with a long independent mm after it in the input order. */
START_TEST (chained_collective_starts_when_its_input_collective_ends)
{
  g_autoptr (SgGraph) g = tb_new (4);
  tb_group (g, "dp", 2, 0, 1);
  tb_group (g, "rep", 2, 0, 2);
  tb_input (g, "x", "bfloat16", 2, 512, 512);
  tb_input (g, "gr", "bfloat16", 2, 64, 512);
  tb_reduce_scatter (g, "rs", "gr", "dp");
  tb_wait (g, "rsw", "rs");
  tb_all_reduce (g, "ar", "rsw", "rep");
  tb_wait (g, "arw", "ar");
  tb_mm (g, "mm0", "x", "x");
  tb_mm (g, "mm1", "mm0", "x");
  tb_output (g, 3, "arw", "mm0", "mm1");
  cost (g, "rs", 40);
  cost (g, "ar", 40);
  cost (g, "mm0", 100);
  cost (g, "mm1", 100);
  SgConfig cfg = config ();
  ck_assert (sg_schedule_reorder (g, &cfg, NULL));
  ck_assert (sg_graph_validate (g, NULL));
  /* rs is hidden by mm0; its wait is placed once rs is done (after mm0,
   * no stall) and ar goes out at once, hidden by mm1 */
  ck_assert_int_lt (id_of (g, "rs"), id_of (g, "mm0"));
  ck_assert_int_lt (id_of (g, "rsw"), id_of (g, "mm1"));
  ck_assert_int_lt (id_of (g, "ar"), id_of (g, "mm1"));
  SgSimResult r;
  ck_assert (sg_simulate (g, NULL, &r, NULL));
  ck_assert_double_eq_tol (r.exposed_us, 0, 1e-9);
  ck_assert_int_eq (r.hidden, 2);
  sg_sim_result_clear (&r);
}
END_TEST

/* all_to_all and broadcast go through the same machinery as the others
 * (x is large so that holding tok across mm0 fits in 5% more memory). */
START_TEST (all_to_all_and_broadcast_are_hidden_like_any_collective)
{
  g_autoptr (SgGraph) g = tb_new (2);
  tb_group (g, "0", 2, 0, 1);
  tb_input (g, "x", "bfloat16", 2, 1024, 1024);
  tb_input (g, "y", "bfloat16", 2, 1024, 8);
  tb_input (g, "tok", "bfloat16", 2, 64, 512);
  tb_node (g, "{\"name\":\"a2a\",\"op\":\"call_function\","
              "\"target\":\"_c10d_functional.all_to_all_single.default\","
              "\"args\":[{\"node\":\"tok\"},[32,32],[32,32],\"0\"],\"kwargs\":{},"
              "\"meta\":{\"shape\":[64,512],\"stride\":[512,1],\"dtype\":\"bfloat16\"}}");
  tb_wait (g, "a2aw", "a2a");
  tb_node (g, "{\"name\":\"bc\",\"op\":\"call_function\","
              "\"target\":\"_c10d_functional.broadcast.default\","
              "\"args\":[{\"node\":\"tok\"},0,\"0\"],\"kwargs\":{},"
              "\"meta\":{\"shape\":[64,512],\"stride\":[512,1],\"dtype\":\"bfloat16\"}}");
  tb_wait (g, "bcw", "bc");
  tb_pointwise (g, "sum", "aten.add.Tensor", "a2aw", "bcw");
  tb_mm (g, "mm0", "x", "y");
  tb_output (g, 2, "sum", "mm0");
  cost (g, "a2a", 30);
  cost (g, "bc", 30);
  cost (g, "sum", 1);
  cost (g, "mm0", 100);
  SgSimResult in;
  ck_assert (sg_simulate (g, NULL, &in, NULL));
  ck_assert_int_eq (in.n_rows, 2);
  ck_assert_double_eq_tol (in.exposed_us, 60, 1e-9);
  SgConfig cfg = config ();
  ck_assert (sg_schedule_reorder (g, &cfg, NULL));
  SgSimResult r;
  ck_assert (sg_simulate (g, NULL, &r, NULL));
  /* both serialise on group 0 behind mm0 (0..30, 30..60 < 100) */
  ck_assert_double_eq_tol (r.exposed_us, 0, 1e-9);
  ck_assert_int_eq (r.hidden, 2);
  ck_assert_int_lt (id_of (g, "mm0"), id_of (g, "sum"));
  sg_sim_result_clear (&in);
  sg_sim_result_clear (&r);
}
END_TEST

START_TEST (graph_without_collectives_keeps_its_order)
{
  g_autoptr (SgGraph) g = tb_new (1);
  tb_input (g, "x", "float32", 2, 32, 32);
  tb_mm (g, "a", "x", "x");
  tb_pointwise (g, "b", "aten.neg.default", "x", NULL);
  tb_mm (g, "c", "a", "b");
  tb_output (g, 1, "c");
  cost (g, "a", 10);
  cost (g, "b", 1);
  cost (g, "c", 10);
  SgConfig cfg = config ();
  SgScheduleStats st;
  g_autofree SgNodeId *order = sg_schedule_compute (g, &cfg, &st, NULL);
  for (SgNodeId i = 0; i < g->n_nodes; i++)
    ck_assert_int_eq (order[i], i);
  ck_assert_int_eq (st.variant, -1);
  ck_assert_str_eq (st.variant_name, "input");
  ck_assert (sg_schedule_reorder (g, &cfg, NULL));
  ck_assert (g->implicit_edges == NULL || g->implicit_edges->len == 0);
}
END_TEST

static const char *const samples[] = {
  "dev_fsdp8_L2_h1024",    "dev_fsdp2_tp4_L2_h1024", "w2_fsdp2_L2_h1024",
  "w2_tiny_fsdp2_L2_h256", "w2_tiny_tp2_L2_h256",    "w2_tp2_L2_h1024",
};

/* The quality bar, with one cost model for all three orders. */
START_TEST (sample_graph_meets_the_quality_bar)
{
  g_autofree char *path = g_strdup_printf ("%s/%s.json", SG_TEST_DATA, samples[_i]);
  g_autofree char *opath
      = g_strdup_printf ("%s/%s.peer_order_plain.json", SG_TEST_DATA, samples[_i]);
  GError *err = NULL;
  g_autoptr (SgGraph) g = sg_graph_load (path, &err);
  ck_assert_msg (g != NULL, "%s", err ? err->message : "");
  SgConfig cfg = config ();
  ck_assert (sg_estimate_costs (g, &cfg, NULL));
  g_autofree SgNodeId *peer = sg_order_load (g, opath, &err);
  ck_assert_msg (peer != NULL, "%s", err ? err->message : "");
  SgSimResult in, pr, ours;
  ck_assert (sg_simulate (g, NULL, &in, NULL));
  ck_assert (sg_simulate (g, peer, &pr, NULL));
  ck_assert (sg_schedule_reorder (g, &cfg, &err));
  ck_assert (sg_graph_validate (g, NULL));
  ck_assert (sg_simulate (g, NULL, &ours, NULL));
  ck_assert_msg (ours.exposed_us <= in.exposed_us + 1e-6, "%s: %g vs input %g", samples[_i],
                 ours.exposed_us, in.exposed_us);
  ck_assert_msg (ours.exposed_us <= pr.exposed_us + 1e-6, "%s: %g vs peer %g", samples[_i],
                 ours.exposed_us, pr.exposed_us);
  ck_assert_msg (ours.exposed <= pr.exposed, "%s: %d fully exposed vs peer %d", samples[_i],
                 ours.exposed, pr.exposed);
  ck_assert_msg ((double)ours.peak_bytes <= 1.05 * (double)pr.peak_bytes, "%s: peak %lu vs %lu",
                 samples[_i], (unsigned long)ours.peak_bytes, (unsigned long)pr.peak_bytes);
  ck_assert_int_eq (ours.n_rows, in.n_rows);
  sg_sim_result_clear (&in);
  sg_sim_result_clear (&pr);
  sg_sim_result_clear (&ours);
}
END_TEST

/* The scheduler's memory profile: range adds (of either sign), point sets,
 * range maxima (with a position holding the maximum) and first positions
 * above a value against a plain array, over many operations so that adds
 * pend at every level and ranges start and end inside and on the edges
 * of the tree's blocks. */
static void
memory_tree_check_max (SgMemTree *t, const int64_t *plain, int a, int b)
{
  int64_t m = INT64_MIN;
  for (int i = a; i < b; i++)
    m = MAX (m, plain[i]);
  int32_t at = -1;
  ck_assert_int_eq (sg_memtree_max (t, a, b, &at), m);
  ck_assert (at >= a && at < b);
  ck_assert_int_eq (plain[at], m);
  ck_assert_int_eq (sg_memtree_max (t, a, b, NULL), m);
}

static void
memory_tree_check_first_above (SgMemTree *t, const int64_t *plain, int n, int a, int64_t x)
{
  int want = -1;
  for (int i = a; i < n && want < 0; i++)
    if (plain[i] > x)
      want = i;
  ck_assert_int_eq (sg_memtree_first_above (t, a, x), want);
}

START_TEST (memory_tree_matches_a_plain_array)
{
  GRand *rng = g_rand_new_with_seed (99);
  for (int trial = 0; trial < 230; trial++) {
    int n = g_rand_int_range (rng, 1, trial < 100 ? 70 : trial < 200 ? 300 : 3000);
    g_autofree uint64_t *v = g_new (uint64_t, (size_t)n);
    g_autofree int64_t *plain = g_new (int64_t, (size_t)n);
    for (int i = 0; i < n; i++)
      plain[i] = (int64_t)(v[i] = (uint64_t)g_rand_int_range (rng, 0, 1000));
    SgMemTree t;
    sg_memtree_init (&t, n, v);
    for (int op = 0; op < 300; op++) {
      int a = g_rand_int_range (rng, 0, n), b = g_rand_int_range (rng, a + 1, n + 1);
      switch (g_rand_int_range (rng, 0, 5)) {
      case 0:
      case 1: {
        int64_t d = g_rand_int_range (rng, -300, 500);
        sg_memtree_add (&t, a, b, d);
        for (int i = a; i < b; i++)
          plain[i] += d;
        break;
      }
      case 2:
        plain[a] = g_rand_int_range (rng, -1000, 2000);
        sg_memtree_set (&t, a, plain[a]);
        break;
      case 3:
        memory_tree_check_first_above (&t, plain, n, a, g_rand_int_range (rng, -500, 2500));
        break;
      default:
        memory_tree_check_max (&t, plain, a, b);
      }
    }
    for (int a = 0; a < n; a++)
      memory_tree_check_max (&t, plain, a, n);
    sg_memtree_clear (&t);
  }
  g_rand_free (rng);
}
END_TEST

static Suite *
schedule_suite (void)
{
  Suite *s = suite_create ("schedule");
  TCase *tc = tcase_create ("core");
  tcase_add_test (tc, memory_tree_matches_a_plain_array);
  tcase_add_test (tc, independent_mm_hides_all_gather);
  tcase_add_test (tc, wait_stays_after_its_collective_and_before_its_consumer);
  tcase_add_test (tc, collective_is_issued_before_pointwise_work_rather_than_a_gemm);
  tcase_add_test (tc, no_reorder_keeps_the_input_order);
  tcase_add_test (tc, unlimited_budget_prefetches_both_collectives);
  tcase_add_test (tc, bytes_in_flight_budget_forces_an_early_wait);
  tcase_add_test (tc, prefetch_limit_caps_collectives_in_flight);
  tcase_add_test (tc, zero_peak_allowance_never_raises_the_peak);
  tcase_add_test (tc, same_input_gives_the_same_order_every_run);
  tcase_add_test (tc, chained_collective_starts_when_its_input_collective_ends);
  tcase_add_test (tc, all_to_all_and_broadcast_are_hidden_like_any_collective);
  tcase_add_test (tc, graph_without_collectives_keeps_its_order);
  tcase_add_test (tc, schedule_never_exposes_more_than_the_input_order);
  tcase_add_test (tc, large_graph_gives_the_same_order_every_run);
  tcase_add_loop_test (tc, sample_graph_meets_the_quality_bar, 0, G_N_ELEMENTS (samples));
  tcase_set_timeout (tc, 120);
  suite_add_tcase (s, tc);
  return s;
}

int
main (void)
{
  SRunner *sr = srunner_create (schedule_suite ());
  srunner_run_all (sr, CK_NORMAL);
  int failed = srunner_ntests_failed (sr);
  srunner_free (sr);
  return failed ? 1 : 0;
}
