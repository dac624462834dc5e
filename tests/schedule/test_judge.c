/* test_judge.c: the judge of many similar graphs (judge.c) gives exactly
 * sg_simulate_totals' totals for every graph of a sequence of trial graphs
 * that each differ a little from the one before (nodes added in the
 * middle, costs changed, none changed), on random graphs with and without
 * contention and start waits, and it does skip most of the runs; what it
 * keeps of the base nodes across trials (kernel slots, collective rates)
 * is not reused once their costs or inputs differ (a reduce_scatter that
 * reads another base node: its rates differ while its event's cost does
 * not, so a reused entry would go unnoticed), nor is a base wait's or
 * collective's event once its collective or its cost differs; a node
 * without a cost fails
 * it with its name, and the graphs after it are judged exactly; with
 * pools of several sizes (the events in ranges of nodes) the totals and
 * skipped runs are those of a judge without one.
 */
#include <check.h>
#include <math.h>
#include <string.h>

#include "builder.h"
#include "randgraph.h"
#include "sched-test.h"

/* Judges @t and checks it against a full simulation. */
static void
assert_judged_exactly (SgSimJudge *j, const SgGraph *t, guint32 seed, int trial)
{
  SgSimTotals got;
  SgSimResult want;
  GError *err = NULL;
  ck_assert_msg (sg_sim_judge_totals (j, t, NULL, NULL, &got, &err), "%s", err ? err->message : "");
  ck_assert (sg_simulate_totals (t, &want, NULL));
  ck_assert_msg (got.step_us == want.step_us && got.exposed_us == want.exposed_us,
                 "seed %u trial %d: judge step %.17g exposed %.17g, simulation %.17g %.17g", seed,
                 trial, got.step_us, got.exposed_us, want.step_us, want.exposed_us);
  ck_assert_msg (got.peak_bytes == want.peak_bytes && got.compute_us == want.compute_us
                   && got.comm_us == want.comm_us,
                 "seed %u trial %d: peak, compute or comm differs", seed, trial);
  sg_sim_result_clear (&want);
}

/* The trial graph @rw describes, priced and judged against a full
 * simulation. */
static void
judge_trial (SgSimJudge *j, SgRewrite *rw, guint32 seed, int trial)
{
  GError *err = NULL;
  SgGraph *t = sg_rewrite_trial (rw, &err);
  ck_assert_msg (t != NULL, "%s", err ? err->message : "");
  sg_cost_new_nodes (sg_graph_cost_model (t), t, NULL, 0, NULL);
  assert_judged_exactly (j, t, seed, trial);
  sg_graph_free (t);
}

/* A random compute node of @g with a tensor value, at or after @from. */
static SgNodeId
pick_compute (const SgGraph *g, GRand *rnd, SgNodeId from)
{
  for (int tries = 0; tries < 1000; tries++) {
    SgNodeId v = g_rand_int_range (rnd, from, g->n_nodes - 1);
    const SgNode *n = &g->nodes[v];
    if ((n->kind == SG_OP_MM || sg_op_class (n->kind) == SG_CLASS_POINTWISE) && n->meta.ndim >= 0)
      return v;
  }
  return SG_NO_NODE;
}

/* Adds sigmoid(v) after @v, read by @v's users from then on. */
static void
add_after (SgRewrite *rw, SgNodeId v, int k)
{
  const SgGraph *g = sg_rewrite_graph (rw);
  const SgMeta *m = &g->nodes[v].meta;
  SgArg a[] = { sg_arg_ref (v) };
  g_autofree char *name = g_strdup_printf ("judge_test_%d", k);
  SgNodeSpec s = { .name = name, .kind = SG_OP_SIGMOID, .args = a, .n_args = 1,
                   .meta = sg_rewrite_meta (rw, sg_meta_shape (g, m), NULL, m->ndim, m->dtype),
                   .cost_us = NAN };
  GError *err = NULL;
  SgNodeId x = sg_rewrite_add (rw, &s, &err);
  ck_assert_msg (x != SG_NO_NODE, "%s", err ? err->message : "");
  sg_rewrite_place (rw, x, v, SG_PLACE_AFTER);
  sg_rewrite_replace_uses (rw, v, x);
}

START_TEST (judge_equals_full_simulation_on_similar_graphs)
{
  int64_t nodes = 0, skipped = 0, joins = 0, differed = 0;
  for (guint32 seed = 1; seed <= 24; seed++) {
    RgCluster cl = (RgCluster)(seed % RG_N_CLUSTERS);
    g_autofree char *json = rg_graph_json (seed, 300 + 20 * (int)(seed % 5), 40 + (int)(seed % 7),
                                           1 + (int)(seed % 3), cl);
    g_autoptr (SgGraph) g = st_load (json, "random");
    g_autoptr (SgSimJudge) j = sg_sim_judge_new ();
    SgRewrite *rw = sg_rewrite_new (g);
    GRand *rnd = g_rand_new_with_seed (seed);
    for (int trial = 0; trial < 16; trial++) {
      sg_rewrite_reset (rw);
      /* nothing (the same graph again), or one or two nodes added from
       * the middle on */
      int adds = trial % 4 == 3 ? 0 : 1 + trial % 2;
      SgNodeId from = g->n_nodes / 3;
      for (int k = 0; k < adds; k++) {
        SgNodeId v = pick_compute (g, rnd, from);
        if (v != SG_NO_NODE)
          add_after (rw, v, k);
        from = g->n_nodes / 2;
      }
      judge_trial (j, rw, seed, trial);
    }
    /* the base graph with the cost of a compute node or of a collective
     * in the middle changed, and back */
    for (int c = 0; c < 8; c++) {
      SgNodeId v = c % 2 ? pick_compute (g, rnd, g->n_nodes / 3) : SG_NO_NODE;
      for (SgNodeId x = g->n_nodes / 3 + g_rand_int_range (rnd, 0, g->n_nodes / 3);
           v == SG_NO_NODE && x < g->n_nodes; x++)
        if (sg_op_is_collective (g->nodes[x].kind))
          v = x;
      if (v == SG_NO_NODE)
        continue;
      double was = g->nodes[v].est_us;
      g->nodes[v].est_us = was * (c < 4 ? 1.5 : 0.75) + 1.0;
      sg_graph_changed (g);
      assert_judged_exactly (j, g, seed, 100 + 2 * c);
      g->nodes[v].est_us = was;
      sg_graph_changed (g);
      assert_judged_exactly (j, g, seed, 101 + 2 * c);
    }
    const SgSimJudgeStats *js = sg_sim_judge_stats (j);
    nodes += js->nodes;
    skipped += js->nodes_skipped;
    joins += js->joins;
    differed += js->differed;
    g_rand_free (rnd);
    sg_rewrite_free (rw);
  }
  /* most of each run is the previous one's; runs rejoin the previous one,
   * and some only after checkpoints where the states still differ */
  ck_assert_msg (skipped * 2 > nodes, "skipped %" G_GINT64_FORMAT " of %" G_GINT64_FORMAT,
                 skipped, nodes);
  ck_assert (joins > 0 && differed > 0);
}
END_TEST

START_TEST (judge_stays_exact_when_base_costs_change_between_trials)
{
  for (guint32 seed = 60; seed < 72; seed++) {
    RgCluster cl = seed % 2 ? RG_CONTENTION : RG_BOTH;
    g_autofree char *json = rg_graph_json (seed, 320, 48, 2, cl);
    g_autoptr (SgGraph) g = st_load (json, "random");
    g_autoptr (SgSimJudge) j = sg_sim_judge_new ();
    SgRewrite *rw = sg_rewrite_new (g);
    GRand *rnd = g_rand_new_with_seed (seed);
    for (int trial = 0; trial < 12; trial++) {
      /* every third trial: the base graph's compute and collective costs
       * scaled (the trials copy them), so a base node's kept slot or
       * rates entry no longer holds */
      if (trial % 3 == 2) {
        double f = trial % 2 ? 0.5 : 3.0;
        for (SgNodeId x = 0; x < g->n_nodes; x++)
          if (g->nodes[x].est_us > 0.0)
            g->nodes[x].est_us = g->nodes[x].est_us * f + 0.25;
        sg_graph_changed (g);
      }
      sg_rewrite_reset (rw);
      /* a node added in front of a random node's users: collectives
       * reading it read a new node */
      SgNodeId v = pick_compute (g, rnd, g->n_nodes / 4);
      if (v != SG_NO_NODE && trial % 2)
        add_after (rw, v, trial);
      judge_trial (j, rw, seed, trial);
    }
    g_rand_free (rnd);
    sg_rewrite_free (rw);
  }
}
END_TEST

/* Estimates @g with a version-2 profile in which a reduce_scatter of 1 KiB
 * runs beside a GEMM at its solo speed and one of 4 KiB at half speed:
 * its rates depend on its bytes, which are its input's. */
static void
estimate_with_two_sizes (SgGraph *g)
{
  st_estimate_with_pairs (
    g, "{\"comm_start_wait\": 0, \"comm_slowdown\": 1, \"reduce_slowdown\": 1, "
       "\"compute_slowdown\": 1}",
    "{\"kind\":\"reduce_scatter\",\"bytes\":1024,\"group_size\":2,\"kernel\":\"gemm\","
    "\"kernel_key\":\"g\",\"order\":\"comm_first\",\"comm_solo_us\":30,\"rep_solo_us\":100,"
    "\"comm_us\":30,\"reps_us\":[100,100]},"
    "{\"kind\":\"reduce_scatter\",\"bytes\":4096,\"group_size\":2,\"kernel\":\"gemm\","
    "\"kernel_key\":\"g\",\"order\":\"comm_first\",\"comm_solo_us\":30,\"rep_solo_us\":100,"
    "\"comm_us\":60,\"reps_us\":[100,100]}");
}

/* The judge keeps a base reduce_scatter's rates entry by origin, with its
 * input's origin; a trial whose reduce_scatter reads another base node
 * (4 KiB instead of 1 KiB: other rates, the same cost) looks the entry up
 * again. A kept entry reused would make that trial's events equal to the
 * last trial's, and the judge would answer with the last trial's run. */
START_TEST (a_kept_rates_entry_is_not_reused_once_the_input_changes)
{
  g_autoptr (SgGraph) g = tb_new (2);
  tb_group (g, "0", 2, 0, 1);
  tb_input (g, "small", "bfloat16", 2, 32, 16);
  tb_input (g, "big", "bfloat16", 2, 64, 32);
  tb_input (g, "y", "bfloat16", 2, 32, 16);
  tb_cost (g, tb_reduce_scatter (g, "rs", "small", "0"), 300);
  tb_cost (g, tb_mm (g, "mm", "y", "y"), 100);
  tb_wait (g, "w", "rs");
  /* a tail past the judge's next checkpoint: a trial whose events all
   * equal the last one's is resumed there */
  char prev[16] = "w", name[16];
  for (int i = 0; i < 100; i++) {
    g_snprintf (name, sizeof name, "r%d", i);
    tb_cost (g, tb_pointwise (g, name, "aten.relu.default", prev, NULL), 1);
    memcpy (prev, name, sizeof prev);
  }
  tb_output (g, 3, "mm", prev, "big");
  estimate_with_two_sizes (g);
  const SgNodeId small = sg_graph_lookup (g, "small"), big = sg_graph_lookup (g, "big");
  g_autoptr (SgSimJudge) j = sg_sim_judge_new ();
  SgRewrite *rw = sg_rewrite_new (g);
  double steps[4];
  for (int t = 0; t < 4; t++) {
    sg_rewrite_reset (rw);
    if (t % 2)
      sg_rewrite_replace_uses (rw, small, big); /* rs (and nothing else) reads big */
    SgGraph *tg = sg_rewrite_trial (rw, NULL);
    ck_assert_ptr_nonnull (tg);
    assert_judged_exactly (j, tg, 0, t);
    SgSimTotals got;
    ck_assert (sg_sim_judge_totals (j, tg, NULL, NULL, &got, NULL));
    steps[t] = got.step_us;
    sg_graph_free (tg);
  }
  /* the input's bytes matter here: beside the GEMM the 4 KiB one runs at
   * half speed */
  ck_assert_double_ne (steps[0], steps[1]);
  sg_rewrite_free (rw);
}
END_TEST

/* Trial graphs that each differ from the one before near a third and
 * near two thirds of the graph (a node added after a different node in
 * each place): the judge's runs are exact, and they rejoin the previous
 * run between the two differences (its segment there replayed, the run
 * resumed at its end) instead of running all the way from the first
 * difference past the second. */
START_TEST (a_run_rejoins_the_previous_one_between_two_differences)
{
  int64_t placed = 0, between = 0;
  for (guint32 seed = 60; seed < 76; seed++) {
    RgCluster cl = (RgCluster)(seed % RG_N_CLUSTERS);
    g_autofree char *json = rg_graph_json (seed, 900, 300, 1 + (int)(seed % 2), cl);
    g_autoptr (SgGraph) g = st_load (json, "random");
    /* collectives long enough to queue behind one another */
    for (SgNodeId v = 0; v < g->n_nodes; v++)
      if (sg_op_is_collective (g->nodes[v].kind))
        g->nodes[v].est_us *= 3.0;
    sg_graph_changed (g);
    g_autoptr (SgSimJudge) j = sg_sim_judge_new ();
    SgRewrite *rw = sg_rewrite_new (g);
    GRand *rnd = g_rand_new_with_seed (seed);
    const int32_t n = g->n_nodes;
    SgNodeId was_early = SG_NO_NODE, was_late = SG_NO_NODE;
    for (int trial = 0; trial < 12; trial++) {
      sg_rewrite_reset (rw);
      SgNodeId early = SG_NO_NODE, late = pick_compute (g, rnd, 2 * n / 3);
      for (int tries = 0; tries < 100 && (early == SG_NO_NODE || early >= n / 3); tries++)
        early = pick_compute (g, rnd, n / 4);
      if (early == SG_NO_NODE || late == SG_NO_NODE || early >= n / 3)
        continue;
      add_after (rw, early, 0);
      add_after (rw, late, 1);
      const SgSimJudgeStats before = *sg_sim_judge_stats (j);
      /* the added nodes take long enough to change the queues' progress */
      g_autoptr (GError) err = NULL;
      g_autoptr (SgGraph) t = sg_rewrite_trial (rw, &err);
      ck_assert_msg (t != NULL, "%s", err ? err->message : "");
      const SgNodeId *orig = sg_graph_trial_origins (t);
      for (SgNodeId x = 0; x < t->n_nodes; x++)
        if (orig[x] == SG_NO_NODE)
          t->nodes[x].est_us = 20.0 + g_rand_int_range (rnd, 0, 40);
      assert_judged_exactly (j, t, seed, trial);
      const SgSimJudgeStats *js = sg_sim_judge_stats (j);
      if (was_early != SG_NO_NODE) {
        /* what a run from the first difference past the last would place */
        between += MAX (0, MIN (late, was_late) - MAX (early, was_early) - 2);
        placed += (js->nodes - before.nodes) - (js->nodes_skipped - before.nodes_skipped);
      }
      was_early = early, was_late = late;
    }
    g_rand_free (rnd);
    sg_rewrite_free (rw);
  }
  ck_assert_msg (between > 0 && placed * 2 < between,
                 "placed %" G_GINT64_FORMAT ", %" G_GINT64_FORMAT " between the differences", placed,
                 between);
}
END_TEST

START_TEST (judge_of_unrelated_graphs_runs_each_whole)
{
  g_autoptr (SgSimJudge) j = sg_sim_judge_new ();
  for (guint32 seed = 40; seed < 46; seed++) {
    g_autofree char *json = rg_graph_json (seed, 200, 30, 2, RG_BOTH);
    g_autoptr (SgGraph) g = st_load (json, "random");
    assert_judged_exactly (j, g, seed, 0);
  }
  /* each graph has its own cost model: nothing is carried over */
  ck_assert_int_eq (sg_sim_judge_stats (j)->nodes_skipped, 0);
}
END_TEST

/* A node without a finite cost >= 0 fails the judge with an error naming
 * it, wherever it is (checked while the events are made), and the judge
 * stays exact for the graphs after it. */
START_TEST (a_node_without_a_cost_fails_the_judge_which_stays_exact)
{
  g_autofree char *json = rg_graph_json (7, 260, 40, 2, RG_BOTH);
  g_autoptr (SgGraph) g = st_load (json, "random");
  g_autoptr (SgSimJudge) j = sg_sim_judge_new ();
  assert_judged_exactly (j, g, 7, 0);
  const double bad[] = { NAN, INFINITY, -1.0 };
  for (size_t b = 0; b < G_N_ELEMENTS (bad); b++) {
    SgNodeId v = b == 0 ? 0 : b == 1 ? g->n_nodes / 2 : g->n_nodes - 1;
    double was = g->nodes[v].est_us;
    g->nodes[v].est_us = bad[b];
    sg_graph_changed (g);
    SgSimTotals got;
    GError *err = NULL;
    ck_assert (!sg_sim_judge_totals (j, g, NULL, NULL, &got, &err));
    ck_assert_ptr_nonnull (err);
    ck_assert_msg (strstr (err->message, g->nodes[v].name) != NULL, "%s", err->message);
    g_clear_error (&err);
    g->nodes[v].est_us = was;
    sg_graph_changed (g);
    assert_judged_exactly (j, g, 7, 1 + (int)b);
  }
}
END_TEST

/* With a pool, on graphs below the ranges' minimum, the peak is computed
 * beside the events and the run: the same totals as a judge without one,
 * and as a full simulation, trial after trial, and the same failure for a
 * node without a cost. */
START_TEST (a_judge_with_a_pool_gives_the_same_totals)
{
  SgPool *pool = sg_pool_new (3);
  for (guint32 seed = 50; seed < 56; seed++) {
    g_autofree char *json = rg_graph_json (seed, 280, 40, 2, (RgCluster)(seed % RG_N_CLUSTERS));
    g_autoptr (SgGraph) g = st_load (json, "random");
    g_autoptr (SgSimJudge) with = sg_sim_judge_new ();
    g_autoptr (SgSimJudge) without = sg_sim_judge_new ();
    sg_sim_judge_set_pool (with, pool, SG_SIM_JUDGE_RANGES_MIN);
    SgRewrite *rw = sg_rewrite_new (g);
    GRand *rnd = g_rand_new_with_seed (seed);
    for (int trial = 0; trial < 10; trial++) {
      sg_rewrite_reset (rw);
      SgNodeId v = pick_compute (g, rnd, g->n_nodes / 3);
      if (v != SG_NO_NODE && trial % 3 != 2)
        add_after (rw, v, 0);
      GError *err = NULL;
      SgGraph *t = sg_rewrite_trial (rw, &err);
      ck_assert_msg (t != NULL, "%s", err ? err->message : "");
      sg_cost_new_nodes (sg_graph_cost_model (t), t, NULL, 0, NULL);
      g_autofree SgNodeId *roots = sg_graph_storage_roots (t);
      SgElision el;
      sg_graph_elision (t, &el);
      g_autofree uint64_t *alloc = sg_elision_storage_bytes (t, &el, NULL, NULL);
      sg_elision_clear (&el);
      SgSimTotals a, b;
      ck_assert (sg_sim_judge_totals (with, t, roots, alloc, &a, NULL));
      ck_assert (sg_sim_judge_totals (without, t, roots, alloc, &b, NULL));
      ck_assert_msg (memcmp (&a, &b, sizeof a) == 0, "seed %u trial %d", seed, trial);
      assert_judged_exactly (without, t, seed, trial);
      sg_graph_free (t);
    }
    /* a node without a cost: the same failure, then exact again */
    SgNodeId v = g->n_nodes / 2;
    double was = g->nodes[v].est_us;
    g->nodes[v].est_us = NAN;
    sg_graph_changed (g);
    SgElision el;
    sg_graph_elision (g, &el);
    g_autofree uint64_t *alloc = sg_elision_storage_bytes (g, &el, NULL, NULL);
    g_autofree SgNodeId *roots = g_steal_pointer (&el.root);
    sg_elision_clear (&el);
    SgSimTotals a;
    GError *err = NULL;
    ck_assert (!sg_sim_judge_totals (with, g, roots, alloc, &a, &err));
    ck_assert_msg (err && strstr (err->message, g->nodes[v].name), "%s",
                   err ? err->message : "no error");
    g_clear_error (&err);
    g->nodes[v].est_us = was;
    sg_graph_changed (g);
    assert_judged_exactly (with, g, seed, 99);
    g_rand_free (rnd);
    sg_rewrite_free (rw);
  }
  sg_pool_free (pool);
}
END_TEST

/* With pools of 1, 2, 3 and 8 threads, the events are made in ranges of
 * nodes (graph/'s tests check the liveness in ranges, on larger graphs):
 * the same totals and the same skipped runs
 * (common prefixes, joins) as a judge without a pool, trial after trial
 * on graphs of several thousand nodes, and the same failure for a node
 * without a cost in a late range. */
START_TEST (the_judge_in_ranges_gives_the_same_totals_with_pools_of_1_2_3_8)
{
  const int32_t threads[] = { 1, 2, 3, 8 };
  enum { N_POOLS = G_N_ELEMENTS (threads) };
  SgPool *pools[N_POOLS];
  for (size_t k = 0; k < N_POOLS; k++)
    pools[k] = sg_pool_new (threads[k]);
  for (guint32 seed = 60; seed < 63; seed++) {
    g_autofree char *json = rg_graph_json (seed, 2000, 150, 1 + (int)(seed % 3),
                                           (RgCluster)(seed % RG_N_CLUSTERS));
    g_autoptr (SgGraph) g = st_load (json, "random");
    SgSimJudge *without = sg_sim_judge_new ();
    SgSimJudge *with[N_POOLS];
    for (size_t k = 0; k < N_POOLS; k++) {
      with[k] = sg_sim_judge_new ();
      sg_sim_judge_set_pool (with[k], pools[k], 0); /* ranges whatever the size */
    }
    SgRewrite *rw = sg_rewrite_new (g);
    GRand *rnd = g_rand_new_with_seed (seed);
    for (int trial = 0; trial < 8; trial++) {
      sg_rewrite_reset (rw);
      for (int a = 0; a < trial % 3; a++) {
        SgNodeId v = pick_compute (g, rnd, g->n_nodes / (2 + a));
        if (v != SG_NO_NODE)
          add_after (rw, v, a);
      }
      GError *err = NULL;
      SgGraph *t = sg_rewrite_trial (rw, &err);
      ck_assert_msg (t != NULL, "%s", err ? err->message : "");
      ck_assert_int_ge (t->n_nodes, 2500);
      sg_cost_new_nodes (sg_graph_cost_model (t), t, NULL, 0, NULL);
      g_autofree SgNodeId *roots = sg_graph_storage_roots (t);
      SgElision el;
      sg_graph_elision (t, &el);
      g_autofree uint64_t *alloc = sg_elision_storage_bytes (t, &el, NULL, NULL);
      sg_elision_clear (&el);
      SgSimTotals want, got;
      ck_assert (sg_sim_judge_totals (without, t, roots, alloc, &want, NULL));
      for (size_t k = 0; k < N_POOLS; k++) {
        ck_assert (sg_sim_judge_totals (with[k], t, roots, alloc, &got, NULL));
        ck_assert_msg (memcmp (&got, &want, sizeof got) == 0, "seed %u trial %d, %d threads", seed,
                       trial, threads[k]);
        ck_assert_mem_eq (sg_sim_judge_stats (with[k]), sg_sim_judge_stats (without),
                          sizeof (SgSimJudgeStats));
      }
      if (trial == 0) {
        g_autoptr (SgSimJudge) fresh = sg_sim_judge_new ();
        assert_judged_exactly (fresh, t, seed, trial);
      }
      sg_graph_free (t);
    }
    /* a node without a cost near the end: the same failure, then exact */
    SgNodeId v = g->n_nodes - 3;
    double was = g->nodes[v].est_us;
    g->nodes[v].est_us = NAN;
    sg_graph_changed (g);
    for (size_t k = 0; k < N_POOLS; k++) {
      SgSimTotals a;
      GError *err = NULL;
      ck_assert (!sg_sim_judge_totals (with[k], g, NULL, NULL, &a, &err));
      ck_assert_msg (err && strstr (err->message, g->nodes[v].name), "%s",
                     err ? err->message : "no error");
      g_clear_error (&err);
    }
    g->nodes[v].est_us = was;
    sg_graph_changed (g);
    for (size_t k = 0; k < N_POOLS; k++) {
      assert_judged_exactly (with[k], g, seed, 99);
      sg_sim_judge_free (with[k]);
    }
    sg_sim_judge_free (without);
    g_rand_free (rnd);
    sg_rewrite_free (rw);
  }
  for (size_t k = 0; k < N_POOLS; k++)
    sg_pool_free (pools[k]);
}
END_TEST

/* A trial's caller may price base nodes itself: the judge takes a base
 * compute node's event from the previous graph's (where its origin was,
 * shifted by the nodes added before it) only while its cost is the same
 * bit for bit. Trials that each add nodes at random places and set random
 * base compute nodes' costs in the trial graph (scaled, 0, -0, or back to
 * the base's) are judged exactly, by a judge kept across them with and
 * without a pool (its events in ranges) and by a fresh one. */
START_TEST (a_base_node_event_is_reused_only_while_its_cost_is_the_same)
{
  SgPool *pool = sg_pool_new (3);
  for (guint32 seed = 80; seed < 92; seed++) {
    g_autofree char *json = rg_graph_json (seed, 360, 48, 1 + (int)(seed % 3),
                                           (RgCluster)(seed % RG_N_CLUSTERS));
    g_autoptr (SgGraph) g = st_load (json, "random");
    g_autoptr (SgSimJudge) j = sg_sim_judge_new ();
    g_autoptr (SgSimJudge) ranged = sg_sim_judge_new ();
    sg_sim_judge_set_pool (ranged, pool, 0);
    SgRewrite *rw = sg_rewrite_new (g);
    GRand *rnd = g_rand_new_with_seed (seed);
    for (int trial = 0; trial < 14; trial++) {
      sg_rewrite_reset (rw);
      for (int a = 0; a < trial % 3; a++) {
        SgNodeId v = pick_compute (g, rnd, g->n_nodes / (2 + 2 * a));
        if (v != SG_NO_NODE)
          add_after (rw, v, a);
      }
      GError *err = NULL;
      SgGraph *t = sg_rewrite_trial (rw, &err);
      ck_assert_msg (t != NULL, "%s", err ? err->message : "");
      sg_cost_new_nodes (sg_graph_cost_model (t), t, NULL, 0, NULL);
      const SgNodeId *orig = sg_graph_trial_origins (t);
      for (int k = 0; k < 6 && trial % 4 != 3; k++) {
        SgNodeId x = pick_compute (t, rnd, 0);
        if (x == SG_NO_NODE || orig[x] == SG_NO_NODE)
          continue;
        const double base = g->nodes[orig[x]].est_us, set[] = { base * 2.0 + 1.0, 0.0, -0.0, base };
        t->nodes[x].est_us = set[g_rand_int_range (rnd, 0, G_N_ELEMENTS (set))];
      }
      assert_judged_exactly (j, t, seed, trial);
      assert_judged_exactly (ranged, t, seed, trial);
      g_autoptr (SgSimJudge) fresh = sg_sim_judge_new ();
      assert_judged_exactly (fresh, t, seed, trial);
      sg_graph_free (t);
    }
    g_rand_free (rnd);
    sg_rewrite_free (rw);
  }
  sg_pool_free (pool);
}
END_TEST

/* A base wait's or collective's event is the previous trial's for its
 * origin (judge-events.c) only while it is the same: a trial whose wait
 * waits for another collective (a short one issued first instead of a
 * long one: the compute behind the wait starts earlier), whose collective
 * costs more, or whose wait has no cost (the judge fails, naming it),
 * each after a trial of the base graph, is judged exactly. A copied
 * event would equal the last trial's, and the judge would answer with the
 * last trial's run. */
START_TEST (a_base_wait_or_collective_event_is_copied_only_while_the_same)
{
  g_autoptr (SgGraph) g = tb_new (2);
  tb_group (g, "0", 2, 0, 1);
  tb_input (g, "x", "bfloat16", 2, 32, 16);
  tb_input (g, "y", "bfloat16", 2, 32, 16);
  tb_cost (g, tb_all_reduce (g, "short", "y", "0"), 50);
  tb_cost (g, tb_all_reduce (g, "long", "x", "0"), 300);
  tb_wait (g, "w", "long");
  tb_cost (g, tb_mm (g, "mm", "w", "w"), 100);
  tb_wait (g, "w2", "short");
  char prev[16] = "mm", name[16];
  for (int i = 0; i < 100; i++) {
    g_snprintf (name, sizeof name, "r%d", i);
    tb_cost (g, tb_pointwise (g, name, "aten.relu.default", prev, NULL), 1);
    memcpy (prev, name, sizeof prev);
  }
  tb_output (g, 2, prev, "w2");
  st_estimate (g, 0.0, 1.0, 1.0);
  const SgNodeId lng = sg_graph_lookup (g, "long"), shrt = sg_graph_lookup (g, "short");
  g_autoptr (SgSimJudge) j = sg_sim_judge_new ();
  SgRewrite *rw = sg_rewrite_new (g);
  double steps[6];
  for (int t = 0; t < 6; t++) {
    sg_rewrite_reset (rw);
    if (t == 1)
      sg_rewrite_replace_uses (rw, lng, shrt); /* w waits for the short one */
    SgGraph *tg = sg_rewrite_trial (rw, NULL);
    ck_assert_ptr_nonnull (tg);
    const SgNodeId tl = sg_graph_lookup (tg, "long"), tw = sg_graph_lookup (tg, "w");
    if (t == 3)
      tg->nodes[tl].est_us *= 2.0;
    if (t == 5)
      tg->nodes[tw].est_us = NAN;
    SgSimTotals got;
    GError *err = NULL;
    if (t == 5) {
      ck_assert (!sg_sim_judge_totals (j, tg, NULL, NULL, &got, &err));
      ck_assert (err && strstr (err->message, "w"));
      g_error_free (err);
      sg_graph_free (tg);
      continue;
    }
    assert_judged_exactly (j, tg, 0, t);
    ck_assert (sg_sim_judge_totals (j, tg, NULL, NULL, &got, NULL));
    steps[t] = got.step_us;
    sg_graph_free (tg);
  }
  /* the wait's collective and the collective's cost matter here */
  ck_assert_double_ne (steps[0], steps[1]);
  ck_assert_double_ne (steps[2], steps[3]);
  sg_rewrite_free (rw);
}
END_TEST

int
main (void)
{
  const TTest *tests[] = { judge_equals_full_simulation_on_similar_graphs,
                           judge_stays_exact_when_base_costs_change_between_trials,
                           a_kept_rates_entry_is_not_reused_once_the_input_changes,
                           a_run_rejoins_the_previous_one_between_two_differences,
                           judge_of_unrelated_graphs_runs_each_whole,
                           a_node_without_a_cost_fails_the_judge_which_stays_exact,
                           a_judge_with_a_pool_gives_the_same_totals,
                           the_judge_in_ranges_gives_the_same_totals_with_pools_of_1_2_3_8,
                           a_base_node_event_is_reused_only_while_its_cost_is_the_same,
                           a_base_wait_or_collective_event_is_copied_only_while_the_same };
  return st_run ("judge", 300, tests, G_N_ELEMENTS (tests));
}
