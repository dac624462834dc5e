/* test_bound.c: the lower bound (bound.c) by term on hand-computed graphs,
 * never above the optimum on random small graphs; its ancestor and
 * descendant sums against a depth-first search, with and without budget. */
#include "builder.h"
#include "randgraph.h"
#include "sched-test.h"
#include "schedule-private.h"

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
static SgGraph *
two_users_graph (void)
{
  SgGraph *g = tb_new (2);
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
  return g;
}

START_TEST (window_term_counts_the_compute_that_must_follow_a_collective)
{
  g_autoptr (SgGraph) g = two_users_graph ();
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

/* Compute work of the nodes reachable from @c through @adj (lists per
 * node, @c excluded), by depth-first search. */
static double
dfs_sum (const SgGraph *g, GPtrArray *const *adj, SgNodeId c, guint8 *seen)
{
  memset (seen, 0, (size_t)g->n_nodes);
  g_autoptr (GArray) stack = g_array_new (FALSE, FALSE, sizeof (SgNodeId));
  g_array_append_val (stack, c);
  seen[c] = 1;
  double sum = 0.0;
  while (stack->len > 0) {
    SgNodeId x = g_array_index (stack, SgNodeId, stack->len - 1);
    g_array_set_size (stack, stack->len - 1);
    const SgNode *nd = &g->nodes[x];
    if (x != c && sg_sched_role (nd) == SG_ROLE_COMPUTE)
      sum += sg_sched_cost (nd);
    for (guint k = 0; k < adj[x]->len; k++) {
      SgNodeId y = GPOINTER_TO_INT (g_ptr_array_index (adj[x], k));
      if (!seen[y]) {
        seen[y] = 1;
        g_array_append_val (stack, y);
      }
    }
  }
  return sum;
}

/* The reach sums of @colls (@nc, ascending) within @budget on one
 * thread, as the refine makes them (reach.c's passes in order over the
 * graph's CSR); how many collectives got sums. */
static int32_t
reach_sums (const SgGraph *g, const SgNodeId *colls, int32_t nc, int64_t budget, double *head,
            double *tail)
{
  int32_t n = g->n_nodes;
  SgReachCsr c = { .n = n, .first = g_new (uint32_t, (size_t)n + 1),
                   .work = g_new (double, (size_t)MAX (n, 1)) };
  c.first[0] = 0;
  for (SgNodeId x = 0; x < n; x++) {
    const SgNode *nd = &g->nodes[x];
    c.first[x + 1] = c.first[x] + nd->n_in;
    c.work[x] = sg_sched_role (nd) == SG_ROLE_COMPUTE ? sg_sched_cost (nd) : 0.0;
  }
  c.adj = g_new (SgNodeId, (size_t)c.first[n] + 1);
  for (SgNodeId x = 0; x < n; x++) {
    uint32_t k;
    const SgNodeId *ins = sg_node_inputs (g, x, &k);
    memcpy (&c.adj[c.first[x]], ins, sizeof (SgNodeId) * k);
  }
  g_autofree SgReachMask *mask = g_new (SgReachMask, (size_t)MAX (n, 1));
  SgReach r;
  sg_reach_begin (&r, &c, colls, nc, budget, head, tail);
  for (int32_t p = 0; p < 2 * r.n_chunks; p++)
    sg_reach_pass (&r, p, mask);
  int32_t done = sg_reach_end (&r);
  sg_reach_csr_clear (&c);
  return done;
}

/* Checks reach_sums (@budget) on @members (@n, ascending) against
 * the search: the first `done` (returned) equal it up to rounding, the
 * rest are -1. */
static int32_t
check_reach_sums (const SgGraph *g, const SgNodeId *members, int32_t n, int64_t budget)
{
  int32_t nn = g->n_nodes;
  g_autofree GPtrArray **up = g_new (GPtrArray *, (size_t)nn);
  g_autofree GPtrArray **down = g_new (GPtrArray *, (size_t)nn);
  for (SgNodeId x = 0; x < nn; x++) {
    up[x] = g_ptr_array_new ();
    down[x] = g_ptr_array_new ();
  }
  for (SgNodeId x = 0; x < nn; x++) {
    uint32_t k;
    const SgNodeId *in = sg_node_inputs (g, x, &k);
    for (uint32_t j = 0; j < k; j++) {
      g_ptr_array_add (up[x], GINT_TO_POINTER (in[j]));
      g_ptr_array_add (down[in[j]], GINT_TO_POINTER (x));
    }
  }
  g_autofree double *head = g_new (double, (size_t)MAX (n, 1));
  g_autofree double *tail = g_new (double, (size_t)MAX (n, 1));
  g_autofree guint8 *seen = g_new (guint8, (size_t)nn);
  int32_t done = reach_sums (g, members, n, budget, head, tail);
  ck_assert (done == n || (done >= 0 && done < n && done % SG_BOUND_REACH_BITS == 0));
  for (int32_t i = 0; i < n; i++) {
    if (i >= done) {
      ck_assert (head[i] == -1.0 && tail[i] == -1.0);
      continue;
    }
    double h = dfs_sum (g, up, members[i], seen), t = dfs_sum (g, down, members[i], seen);
    ck_assert_msg (fabs (head[i] - h) <= 1e-9 * MAX (1.0, h), "node %d: head %.17g, search %.17g",
                   members[i], head[i], h);
    ck_assert_msg (fabs (tail[i] - t) <= 1e-9 * MAX (1.0, t), "node %d: tail %.17g, search %.17g",
                   members[i], tail[i], t);
  }
  for (SgNodeId x = 0; x < nn; x++) {
    g_ptr_array_unref (up[x]);
    g_ptr_array_unref (down[x]);
  }
  return done;
}

/* The bound's collectives of @g (role collective, with a group). */
static SgNodeId *
bound_collectives (const SgGraph *g, int32_t *n)
{
  SgNodeId *c = g_new (SgNodeId, (size_t)MAX (g->n_nodes, 1));
  *n = 0;
  for (SgNodeId x = 0; x < g->n_nodes; x++)
    if (sg_bound_coll (&g->nodes[x], sg_sched_role (&g->nodes[x])))
      c[(*n)++] = x;
  return c;
}

/* A random graph of a few hundred nodes from @seed, estimated. */
static SgGraph *
random_graph (guint32 seed, int n_compute, int n_coll)
{
  g_autofree char *json = rg_graph_json (seed, n_compute, n_coll, 1 + (int)(seed % 3),
                                         (RgCluster)(seed % RG_N_CLUSTERS));
  return st_load (json, "random");
}

/* The chunked sums equal a depth-first search's for the collectives and
 * for every other node (compute nodes among them: a node is not its own
 * ancestor), over more than one chunk. */
START_TEST (reach_sums_equal_a_depth_first_search_on_random_graphs)
{
  int several_chunks = 0;
  for (guint32 seed = 1; seed <= 12; seed++) {
    g_autoptr (SgGraph) g = random_graph (seed, 150 + 25 * (int)seed, 10 + 15 * (int)seed);
    int32_t nc;
    g_autofree SgNodeId *colls = bound_collectives (g, &nc);
    ck_assert_int_gt (nc, 0);
    ck_assert_int_eq (check_reach_sums (g, colls, nc, INT64_MAX), nc);
    g_autofree SgNodeId *every = g_new (SgNodeId, (size_t)g->n_nodes);
    int32_t ne = 0;
    for (SgNodeId x = seed % 2; x < g->n_nodes; x += 2)
      every[ne++] = x;
    ck_assert_int_eq (check_reach_sums (g, every, ne, INT64_MAX), ne);
    several_chunks += ne > SG_BOUND_REACH_BITS;
  }
  ck_assert_int_gt (several_chunks, 0);
}
END_TEST

/* With the sums in, the bound stays at most the input order's simulated
 * step on the same graphs. */
START_TEST (refined_bound_never_exceeds_the_input_orders_step)
{
  for (guint32 seed = 1; seed <= 40; seed++) {
    g_autoptr (SgGraph) g = random_graph (seed, 100 + 10 * (int)seed, 5 + 5 * (int)seed);
    SgSimResult r;
    bound_of (g, &r);
    ck_assert (r.bound.refined);
    ck_assert_msg (r.lower_bound_us <= r.step_us * (1 + 1e-12),
                   "seed %u: bound %.6f above the step %.6f", seed, r.lower_bound_us, r.step_us);
    sg_sim_result_clear (&r);
  }
}
END_TEST

/* A budget that covers only some chunks gives sums to those (equal to the
 * search's) and -1 to the rest; the bound keeps their path heads and
 * tails: still at most the step. With no budget at all, the all_gather
 * of two_users_graph keeps its path tail (100 us, one user), and the
 * window (0, 100) gives 100 + max(110, 50) = 210 us, not 250. */
START_TEST (budget_limited_sums_keep_the_path_heads_for_the_rest)
{
  g_autoptr (SgGraph) g = random_graph (7, 500, 400);
  int32_t nc;
  g_autofree SgNodeId *colls = bound_collectives (g, &nc);
  ck_assert_int_gt (nc, SG_BOUND_REACH_BITS);
  ck_assert_int_eq (check_reach_sums (g, colls, nc, 0), 0);
  int64_t partial = -1;
  for (int64_t budget = 1000; budget < INT64_MAX / 4; budget *= 2) {
    int32_t done = check_reach_sums (g, colls, nc, budget);
    if (done == nc)
      break;
    if (done > 0 && partial < 0)
      partial = budget;
  }
  ck_assert_msg (partial > 0, "no budget gave part of the sums");
  int64_t budgets[] = { 0, partial };
  for (size_t k = 0; k < G_N_ELEMENTS (budgets); k++) {
    SgSimResult r;
    ck_assert (sg_simulate (g, NULL, &r, NULL));
    sg_bound_refine_within (g, &r, budgets[k], NULL);
    ck_assert (r.bound.refined);
    ck_assert_msg (r.lower_bound_us <= r.step_us * (1 + 1e-12), "budget %" G_GINT64_FORMAT
                   ": bound %.6f above the step %.6f", budgets[k], r.lower_bound_us, r.step_us);
    sg_sim_result_clear (&r);
  }
  g_autoptr (SgGraph) h = two_users_graph ();
  SgSimResult none, full;
  ck_assert (sg_simulate (h, NULL, &none, NULL));
  ck_assert (sg_simulate (h, NULL, &full, NULL));
  sg_bound_refine_within (h, &none, 0, NULL);
  sg_lower_bound_refine (h, &full);
  ck_assert_double_eq_tol (none.bound.window_us, 210, 1e-9);
  ck_assert_double_eq_tol (full.bound.window_us, 250, 1e-9);
  sg_sim_result_clear (&none);
  sg_sim_result_clear (&full);
}
END_TEST

/* Bit for bit: two doubles. */
static bool
same_double (double a, double b)
{
  return memcmp (&a, &b, sizeof a) == 0;
}

/* The window term of @g within @budget by parts, on this thread: paths,
 * reach_sums (one chunk after the other while the budget lasts),
 * the rates of an engine without rows, sg_bound_windows. */
static double
window_by_parts (const SgGraph *g, double compute_us, int64_t budget)
{
  int32_t n = g->n_nodes, nc;
  g_autofree SgNodeId *colls = bound_collectives (g, &nc);
  g_autofree double *fwd = g_new0 (double, (size_t)n), *after = g_new0 (double, (size_t)n);
  for (SgNodeId x = 0; x < n; x++) {
    uint32_t k;
    const SgNodeId *in = sg_node_inputs (g, x, &k);
    for (uint32_t j = 0; j < k; j++)
      fwd[x] = MAX (fwd[x], fwd[in[j]]);
    fwd[x] += sg_sched_cost (&g->nodes[x]);
  }
  for (SgNodeId x = n - 1; x >= 0; x--) {
    uint32_t k;
    const SgNodeId *in = sg_node_inputs (g, x, &k);
    double b = after[x] + sg_sched_cost (&g->nodes[x]);
    for (uint32_t j = 0; j < k; j++)
      after[in[j]] = MAX (after[in[j]], b);
  }
  g_autofree double *head = g_new (double, (size_t)MAX (nc, 1));
  g_autofree double *tail = g_new (double, (size_t)MAX (nc, 1));
  reach_sums (g, colls, nc, budget, head, tail);
  g_autofree SgBoundJob *jobs = g_new (SgBoundJob, (size_t)MAX (nc, 1));
  for (int32_t i = 0; i < nc; i++) {
    const SgNode *nd = &g->nodes[colls[i]];
    double c = sg_sched_cost (nd);
    jobs[i] = (SgBoundJob){ MAX (fwd[colls[i]] - c, head[i]), MAX (after[colls[i]], tail[i]), c,
                            sg_bound_slot (nd) };
  }
  SgSimEngine e;
  sg_eng_init (&e, g, NULL, false);
  SgBoundRates R;
  sg_bound_rates_init (&R, &e, colls, nc);
  sg_eng_clear (&e);
  SgBoundScratch s = { 0 };
  double w = sg_bound_windows (&R, compute_us, jobs, nc, &s);
  sg_bound_scratch_clear (&s);
  sg_bound_rates_clear (&R);
  return w;
}

/* The refine with no pool and on pools of 1, 2, 3 and 8 threads gives the
 * window term its parts give on one thread, bit for bit: with every chunk,
 * with budgets that stop the chunks part way (before or after the set bits
 * they flush: the same chunks count) and with none. */
START_TEST (refine_on_pools_equals_the_sequential_refine)
{
  static const int32_t sizes[] = { 0, 1, 2, 3, 8 };
  SgPool *pools[G_N_ELEMENTS (sizes)];
  for (size_t k = 0; k < G_N_ELEMENTS (sizes); k++)
    pools[k] = sizes[k] ? sg_pool_new (sizes[k]) : NULL;
  int partial = 0;
  for (guint32 seed = 1; seed <= 8; seed++) {
    g_autoptr (SgGraph) g = random_graph (seed, 300 + 60 * (int)seed, 100 + 60 * (int)seed);
    int32_t nc;
    g_autofree SgNodeId *colls = bound_collectives (g, &nc);
    g_autofree double *head = g_new (double, (size_t)nc), *tail = g_new (double, (size_t)nc);
    SgSimResult r;
    ck_assert (sg_simulate (g, NULL, &r, NULL));
    for (int64_t budget = 0;; budget = MAX (1000, budget + budget / 8)) {
      int32_t done = reach_sums (g, colls, nc, budget, head, tail);
      partial += done > 0 && done < nc;
      double want = window_by_parts (g, r.bound.compute_us, budget);
      for (size_t k = 0; k < G_N_ELEMENTS (sizes); k++) {
        r.bound.refined = false;
        sg_bound_refine_within (g, &r, budget, pools[k]);
        ck_assert_msg (same_double (r.bound.window_us, want),
                       "seed %u, budget %" G_GINT64_FORMAT ", %d threads: %.17g, not %.17g", seed,
                       budget, sizes[k], r.bound.window_us, want);
      }
      if (done == nc)
        break;
    }
    sg_sim_result_clear (&r);
  }
  ck_assert_int_gt (partial, 0);
  for (size_t k = 0; k < G_N_ELEMENTS (sizes); k++)
    sg_pool_free (pools[k]);
}
END_TEST

/* The kept simulation with its window term, made on a pool (the
 * simulation beside the term's work), is sg_simulate's with
 * sg_lower_bound_refine's term. */
START_TEST (simulation_refined_on_a_pool_is_simulate_then_refine)
{
  static const int32_t sizes[] = { 1, 2, 3, 8 };
  for (guint32 seed = 11; seed <= 16; seed++)
    for (size_t k = 0; k < G_N_ELEMENTS (sizes); k++) {
      g_autoptr (SgGraph) g = random_graph (seed, 200 + 40 * (int)seed, 50 + 30 * (int)seed);
      SgSimResult want;
      ck_assert (sg_simulate (g, NULL, &want, NULL));
      sg_lower_bound_refine (g, &want);
      SgPool *pool = sg_pool_new (sizes[k]);
      GError *err = NULL;
      const SgSimResult *r = sg_graph_simulation_refined (g, pool, &err);
      ck_assert_msg (r != NULL, "%s", err ? err->message : "");
      ck_assert (r == sg_graph_simulation_kept (g));
      ck_assert (r->bound.refined);
      ck_assert (memcmp (&r->bound, &want.bound, sizeof want.bound) == 0);
      ck_assert (same_double (r->lower_bound_us, want.lower_bound_us));
      ck_assert (same_double (r->step_us, want.step_us));
      ck_assert_int_eq (r->n_rows, want.n_rows);
      /* kept: asked again, the same result */
      ck_assert (sg_graph_simulation_refined (g, pool, &err) == r);
      sg_pool_free (pool);
      sg_sim_result_clear (&want);
    }
}
END_TEST

/* The window term is the graph's: once a refined simulation is kept with
 * the graph, another simulation's refine takes its term, bit for bit the
 * term made without it (the CLI's --order refines the given order so). */
START_TEST (refine_takes_the_kept_simulations_term)
{
  for (guint32 seed = 21; seed <= 24; seed++) {
    g_autoptr (SgGraph) g = random_graph (seed, 200 + 40 * (int)seed, 50 + 30 * (int)seed);
    SgSimResult want, other;
    ck_assert (sg_simulate (g, NULL, &want, NULL));
    sg_lower_bound_refine (g, &want);
    SgPool *pool = sg_pool_new (3);
    ck_assert (sg_graph_simulation_refined (g, pool, NULL) != NULL);
    ck_assert (sg_simulate (g, NULL, &other, NULL));
    sg_lower_bound_refine_pool (g, &other, pool);
    ck_assert (other.bound.refined);
    ck_assert (memcmp (&other.bound, &want.bound, sizeof want.bound) == 0);
    ck_assert (same_double (other.lower_bound_us, want.lower_bound_us));
    sg_pool_free (pool);
    sg_sim_result_clear (&want);
    sg_sim_result_clear (&other);
  }
}
END_TEST

/* A cost the simulator refuses (infinite, NaN) gives the simulation's
 * error through sg_graph_simulation_refined on any pool, though the
 * window term's work beside it sees the same cost; nothing is kept. */
START_TEST (a_refused_cost_gives_the_simulations_error_beside_the_term)
{
  static const int32_t sizes[] = { 0, 1, 2, 3, 8 };
  const double costs[] = { INFINITY, NAN, -1.0 };
  for (size_t c = 0; c < G_N_ELEMENTS (costs); c++)
    for (size_t k = 0; k < G_N_ELEMENTS (sizes); k++) {
      g_autoptr (SgGraph) g = random_graph (3, 400, 300);
      for (SgNodeId x = 0; x < g->n_nodes; x++)
        if (x % 50 == 7 && sg_sched_role (&g->nodes[x]) != SG_ROLE_WAIT)
          g->nodes[x].est_us = costs[c];
      SgSimResult fresh;
      GError *want = NULL, *err = NULL;
      ck_assert (!sg_simulate (g, NULL, &fresh, &want));
      SgPool *pool = sizes[k] ? sg_pool_new (sizes[k]) : NULL;
      ck_assert (sg_graph_simulation_refined (g, pool, &err) == NULL);
      ck_assert (err != NULL);
      ck_assert_str_eq (err->message, want->message);
      ck_assert (sg_graph_simulation_kept (g) == NULL);
      sg_pool_free (pool);
      g_error_free (err);
      g_error_free (want);
    }
}
END_TEST

/* sg_bound_windows with the sweeps sorted by qsort and the tail ranks
 * found by binary search (what it did before its radix sort, ranks taken
 * from the tail order and windows skipped below the best). */
static double
windows_by_qsort (const SgBoundRates *R, double compute, const SgBoundJob *jobs, int32_t n);

/* Random jobs, many with equal heads or tails (zeros and -0 among them):
 * sg_bound_windows equals the qsort sweeps bit for bit, below and above
 * the size where it sorts by radix. */
START_TEST (windows_equal_the_qsort_sweeps_bit_for_bit)
{
  GRand *rnd = g_rand_new_with_seed (7);
  SgBoundScratch s = { 0 };
  for (int iter = 0; iter < 300; iter++) {
    int32_t n = iter < 100 ? 1 + iter : g_rand_int_range (rnd, 200, 3000);
    int32_t ng = g_rand_int_range (rnd, 1, 4);
    SgBoundRates R = { .cs = g_rand_double_range (rnd, 1.0, 1.5), .n_groups = ng,
                       .monotone = true };
    R.slot = g_new (double, (size_t)(2 * ng));
    for (int32_t k = 0; k < 2 * ng; k++)
      R.slot[k] = g_rand_double_range (rnd, 1.0, 2.0);
    g_autofree SgBoundJob *jobs = g_new (SgBoundJob, (size_t)n);
    int32_t levels = g_rand_int_range (rnd, 1, 40);
    double total = 0.0;
    for (int32_t i = 0; i < n; i++) {
      double h = 10.0 * g_rand_int_range (rnd, 0, levels);
      double t = 7.0 * g_rand_int_range (rnd, 0, levels);
      if (g_rand_int_range (rnd, 0, 4) == 0)
        h = g_rand_double_range (rnd, 0.0, 500.0);
      if (g_rand_int_range (rnd, 0, 8) == 0)
        t = -0.0;
      jobs[i] = (SgBoundJob){ h, t, g_rand_double_range (rnd, 0.0, 50.0),
                              g_rand_int_range (rnd, 0, 2 * ng) };
      total += jobs[i].work;
    }
    double compute = g_rand_double_range (rnd, 0.0, 2.0) * total;
    double got = sg_bound_windows (&R, compute, jobs, n, &s);
    double want = windows_by_qsort (&R, compute, jobs, n);
    ck_assert_msg (same_double (got, want), "iter %d (n %d): %.17g, not %.17g", iter, n, got, want);
    sg_bound_rates_clear (&R);
  }
  sg_bound_scratch_clear (&s);
  g_rand_free (rnd);
}
END_TEST

typedef SgBoundKeyed Keyed;

static int
keyed_desc (const void *a, const void *b)
{
  const Keyed *x = a, *y = b;
  if (x->key != y->key)
    return x->key > y->key ? -1 : 1;
  return (x->idx > y->idx) - (x->idx < y->idx);
}

static int
double_asc (const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double
window_at (const SgBoundRates *R, double compute, double h, double t, const double *w)
{
  return h + t + sg_bound_overlap (R, compute - h - t, w);
}

static double
windows_by_qsort (const SgBoundRates *R, double compute, const SgBoundJob *jobs, int32_t n)
{
  int32_t ns = 2 * R->n_groups;
  g_autofree Keyed *order = g_new (Keyed, (size_t)n);
  g_autofree double *tails = g_new (double, (size_t)n);
  g_autofree int32_t *rank = g_new (int32_t, (size_t)n);
  g_autofree double *fen = g_new0 (double, (size_t)(n + 1) * (size_t)ns);
  g_autofree double *total = g_new0 (double, (size_t)ns), *pre = g_new (double, (size_t)ns);
  double best = 0.0;
  for (int32_t i = 0; i < n; i++)
    order[i] = (Keyed){ jobs[i].tail, i };
  qsort (order, (size_t)n, sizeof *order, keyed_desc);
  for (int32_t i = 0; i < n; i++) {
    const SgBoundJob *j = &jobs[order[i].idx];
    total[j->slot] += j->work;
    if (i + 1 == n || order[i + 1].key < order[i].key)
      best = MAX (best, window_at (R, compute, 0.0, j->tail, total));
  }
  for (int32_t i = 0; i < n; i++)
    tails[i] = jobs[i].tail;
  qsort (tails, (size_t)n, sizeof (double), double_asc);
  int32_t nt = 0;
  for (int32_t i = 0; i < n; i++)
    if (nt == 0 || tails[i] > tails[nt - 1])
      tails[nt++] = tails[i];
  for (int32_t i = 0; i < n; i++) {
    int32_t lo = 0, hi = nt - 1;
    while (lo < hi) {
      int32_t mid = (lo + hi) / 2;
      if (tails[mid] < jobs[i].tail)
        lo = mid + 1;
      else
        hi = mid;
    }
    rank[i] = lo + 1;
  }
  for (int32_t i = 0; i < n; i++)
    order[i] = (Keyed){ jobs[i].head, i };
  qsort (order, (size_t)n, sizeof *order, keyed_desc);
  memset (total, 0, sizeof (double) * (size_t)ns);
  for (int32_t i = 0; i < n;) {
    int32_t e = i;
    while (e < n && order[e].key == order[i].key) {
      const SgBoundJob *j = &jobs[order[e].idx];
      total[j->slot] += j->work;
      for (int32_t q = rank[order[e].idx]; q <= nt; q += q & -q)
        fen[(size_t)q * (size_t)ns + (size_t)j->slot] += j->work;
      e++;
    }
    double h = order[i].key;
    best = MAX (best, window_at (R, compute, h, 0.0, total));
    for (int32_t k = i; k < e; k++) {
      const SgBoundJob *j = &jobs[order[k].idx];
      if (j->tail <= 0.0)
        continue;
      memset (pre, 0, sizeof (double) * (size_t)ns);
      for (int32_t q = rank[order[k].idx] - 1; q > 0; q -= q & -q)
        for (int32_t z = 0; z < ns; z++)
          pre[z] += fen[(size_t)q * (size_t)ns + (size_t)z];
      for (int32_t z = 0; z < ns; z++)
        pre[z] = MAX (0.0, total[z] - pre[z]);
      best = MAX (best, window_at (R, compute, h, j->tail, pre));
    }
    i = e;
  }
  return best;
}

int
main (void)
{
  const TTest *tests[] = {
    overlap_term_prices_contention_beside_compute,
    window_term_counts_the_compute_that_must_follow_a_collective,
    lower_bound_is_never_above_the_optimum,
    reach_sums_equal_a_depth_first_search_on_random_graphs,
    refined_bound_never_exceeds_the_input_orders_step,
    budget_limited_sums_keep_the_path_heads_for_the_rest,
    refine_on_pools_equals_the_sequential_refine,
    simulation_refined_on_a_pool_is_simulate_then_refine,
    refine_takes_the_kept_simulations_term,
    a_refused_cost_gives_the_simulations_error_beside_the_term,
    windows_equal_the_qsort_sweeps_bit_for_bit,
  };
  return st_run ("bound", 300, tests, G_N_ELEMENTS (tests));
}
