/* test_parallel.c: the scheduling and polish passes on the worker pool
 * (graph/pool.c) give what they give on one thread. The variants run as
 * tasks and are chosen in variant order (scheduler.c); the polish
 * searches a batch of windows side by side, each from a copy of the
 * walk's engine (snap.c, sg_eng_copy_state), and takes their results in
 * order up to the first window that changed the order (polish.c). Orders,
 * statistics and simulations must be the same for pools of 1, 2, 3 and 8
 * threads and none, on the samples, graphgen graphs and random graphs;
 * an engine copy must go on exactly as the engine it copies, across
 * rewinds; the simulation the pass keeps (the winning variant's run)
 * must be a fresh one's; the radix sorts of the problem (problem.c) must
 * order as qsort by (key, id).
 */
#include <stdlib.h>

#include "builder.h"
#include "graphgen.h"
#include "randgraph.h"
#include "sched-test.h"
#include "schedule-private.h"

static const int32_t pool_sizes[] = { 0, 1, 2, 3, 8 };

static SgGraph *
load_sample (const char *name)
{
  g_autofree char *path = g_build_filename (SG_TEST_DATA, name, NULL);
  g_autofree char *text = NULL;
  gsize len;
  ck_assert (g_file_get_contents (path, &text, &len, NULL));
  return st_load (text, name);
}

static SgGraph *
generated (int layers, int dp, int tp)
{
  GgConfig gc;
  gg_config_init (&gc);
  gc.layers = layers;
  gc.hidden = 1024;
  gc.ffn = 2816;
  gc.heads = 8;
  gc.dp = dp;
  gc.tp = tp;
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream (&buf, &len);
  GError *err = NULL;
  ck_assert_msg (gg_write (&gc, f, NULL, &err), "%s", err ? err->message : "");
  fclose (f);
  SgGraph *g = st_load (buf, "graphgen");
  free (buf);
  return g;
}

/* Collectives issued one after another between GEMMs and waited for at
 * the end: a long queue on one group. */
static SgGraph *
queued (void)
{
  SgGraph *g = tb_new (2);
  tb_group (g, "0", 2, 0, 1);
  tb_input (g, "x", "bfloat16", 2, 512, 512);
  tb_input (g, "y", "bfloat16", 2, 512, 8192);
  char prev[16] = "x";
  for (int i = 0; i < 12; i++) {
    char w[16], ag[16], mm[16];
    g_snprintf (w, sizeof w, "w%d", i);
    g_snprintf (ag, sizeof ag, "ag%d", i);
    g_snprintf (mm, sizeof mm, "mm%d", i);
    tb_input (g, w, "bfloat16", 2, 4096, 512);
    tb_all_gather (g, ag, w, "0");
    tb_mm (g, mm, prev, "x");
    g_strlcpy (prev, mm, sizeof prev);
  }
  tb_mm (g, "z", prev, "y");
  char acc[16] = "";
  for (int i = 0; i < 12; i++) {
    char ag[16], wt[16], mm[16], sum[16];
    g_snprintf (ag, sizeof ag, "ag%d", i);
    g_snprintf (wt, sizeof wt, "wt%d", i);
    g_snprintf (mm, sizeof mm, "u%d", i);
    g_snprintf (sum, sizeof sum, "s%d", i);
    tb_wait (g, wt, ag);
    tb_mm (g, mm, wt, "x");
    if (i == 0)
      g_strlcpy (acc, mm, sizeof acc);
    else {
      tb_pointwise (g, sum, "aten.add.Tensor", acc, mm);
      g_strlcpy (acc, sum, sizeof acc);
    }
  }
  tb_output (g, 2, acc, "z");
  st_estimate (g, 0.0, 1.2, 1.3);
  return g;
}

/* The graphs every comparison runs on (transfer full, @n of them). */
static SgGraph **
test_graphs (int *n)
{
  static const char *samples[] = { "w2_fsdp2_L2_h1024.json", "w2_tp2_L2_h1024.json",
                                   "dev_fsdp8_L2_h1024.json", "dev_fsdp2_tp4_L2_h1024.json" };
  SgGraph **gs = g_new0 (SgGraph *, 16);
  int k = 0;
  for (size_t i = 0; i < G_N_ELEMENTS (samples); i++)
    gs[k++] = load_sample (samples[i]);
  gs[k++] = queued ();
  gs[k++] = generated (12, 2, 4);
  gs[k++] = generated (16, 8, 1);
  for (guint32 seed = 1; seed <= 4; seed++) {
    g_autofree char *json = rg_graph_json (seed, 40 + (int)seed * 7, 8 + (int)seed, 2,
                                           (RgCluster)(seed % RG_N_CLUSTERS));
    gs[k++] = st_load (json, "random");
  }
  *n = k;
  return gs;
}

static void
free_graphs (SgGraph **gs, int n)
{
  for (int i = 0; i < n; i++)
    sg_graph_free (gs[i]);
  g_free (gs);
}

START_TEST (variants_on_any_pool_choose_the_same_order)
{
  int ng;
  SgGraph **gs = test_graphs (&ng);
  for (int i = 0; i < ng; i++) {
    const SgGraph *g = gs[i];
    SgNodeId *ref = NULL;
    SgScheduleStats ref_st;
    for (size_t p = 0; p < G_N_ELEMENTS (pool_sizes); p++) {
      SgConfig cfg;
      sg_config_init (&cfg);
      cfg.pool = pool_sizes[p] ? sg_pool_new (pool_sizes[p]) : NULL;
      SgScheduleStats st;
      GError *err = NULL;
      SgNodeId *o = sg_schedule_compute (g, &cfg, &st, &err);
      ck_assert_msg (o != NULL, "%s", err ? err->message : "");
      if (!ref) {
        ref = o;
        ref_st = st;
        continue;
      }
      ck_assert_msg (memcmp (o, ref, sizeof (SgNodeId) * (size_t)g->n_nodes) == 0,
                     "graph %d: the order with %d threads differs", i, pool_sizes[p]);
      ck_assert_msg (memcmp (&st, &ref_st, sizeof st) == 0,
                     "graph %d: the statistics with %d threads differ", i, pool_sizes[p]);
      g_free (o);
      sg_pool_free (cfg.pool);
    }
    g_free (ref);
  }
  free_graphs (gs, ng);
}
END_TEST

/* Polishes @g's input order with a pool of @threads (0: none). */
static int32_t
polish_with (const SgGraph *g, int32_t threads, SgNodeId *order, SgSimResult *res)
{
  SgSimResult in;
  ck_assert (sg_simulate (g, NULL, &in, NULL));
  *res = (SgSimResult){ .step_us = in.step_us, .peak_bytes = in.peak_bytes };
  sg_sim_result_clear (&in);
  for (SgNodeId i = 0; i < g->n_nodes; i++)
    order[i] = i;
  SgPool *pool = threads ? sg_pool_new (threads) : NULL;
  SgSchedProblem P;
  sg_sched_problem_init_basic (&P, g, NULL);
  int32_t k = sg_polish (&P, pool, order, res);
  sg_sched_problem_clear (&P);
  sg_pool_free (pool);
  return k;
}

START_TEST (windows_searched_side_by_side_polish_as_one_at_a_time)
{
  int ng;
  SgGraph **gs = test_graphs (&ng);
  int32_t improved = 0;
  for (int i = 0; i < ng; i++) {
    const SgGraph *g = gs[i];
    g_autofree SgNodeId *ref = g_new (SgNodeId, (size_t)g->n_nodes);
    g_autofree SgNodeId *o = g_new (SgNodeId, (size_t)g->n_nodes);
    SgSimResult rr, r;
    int32_t kr = polish_with (g, 0, ref, &rr);
    improved += kr;
    for (size_t p = 1; p < G_N_ELEMENTS (pool_sizes); p++) {
      int32_t k = polish_with (g, pool_sizes[p], o, &r);
      ck_assert_msg (k == kr, "graph %d: %d windows improved with %d threads, %d with none", i,
                     k, pool_sizes[p], kr);
      ck_assert_msg (memcmp (o, ref, sizeof (SgNodeId) * (size_t)g->n_nodes) == 0,
                     "graph %d: the polished order with %d threads differs", i, pool_sizes[p]);
      ck_assert (r.step_us == rr.step_us && r.exposed_us == rr.exposed_us);
      ck_assert (r.peak_bytes == rr.peak_bytes && r.n_rows == rr.n_rows);
      if (k > 0)
        ck_assert (memcmp (r.rows, rr.rows, sizeof (SgCollRow) * (size_t)r.n_rows) == 0);
      sg_sim_result_clear (&r);
    }
    sg_sim_result_clear (&rr);
  }
  /* the batches were cut short by windows that changed the order */
  ck_assert_int_gt (improved, 10);
  free_graphs (gs, ng);
}
END_TEST

/* Everything of @a's state that decides its future equals @b's. */
static void
same_engine (const SgSimEngine *a, const SgSimEngine *b)
{
  ck_assert (a->now == b->now && a->busy_us == b->busy_us && a->n_rows == b->n_rows);
  ck_assert (a->n_active == b->n_active && a->n_held == b->n_held && a->n_kheld == b->n_kheld);
  for (int32_t grp = 0; grp < a->n_groups; grp++) {
    ck_assert (a->ghead[grp] == b->ghead[grp] && a->gtail[grp] == b->gtail[grp]);
    ck_assert (a->hold[grp] == b->hold[grp]);
    if (a->hold[grp])
      ck_assert (a->hold_at[grp] == b->hold_at[grp]);
  }
  for (int32_t r = 0; r < a->n_rows; r++) {
    ck_assert (a->rows[r].node == b->rows[r].node && a->fin[r] == b->fin[r]);
    ck_assert (a->row_of[a->rows[r].node] == r && b->row_of[b->rows[r].node] == r);
    if (a->fin[r])
      continue;
    ck_assert (a->rem[r] == b->rem[r] && a->rnext[r] == b->rnext[r]);
    ck_assert (a->rows[r].start_us == b->rows[r].start_us);
    ck_assert (a->rows[r].overlap_us == b->rows[r].overlap_us);
  }
  for (SgNodeId x = 0; x < a->g->n_nodes; x++)
    ck_assert ((a->row_of[x] >= 0) == (b->row_of[x] >= 0));
  for (int32_t r = 0; r < a->n_rows; r++)
    ck_assert (memcmp (sg_eng_row_rates (a, r), sg_eng_row_rates (b, r),
                       sizeof (SgPairRates) * (size_t)a->n_slots)
               == 0);
}

/* An engine for @g whose rates memo numbers the collectives' rates in
 * reverse id order (not as an engine walking an order does): a copy into
 * it must take each row's rates by what they are, not by their number. */
static void
init_reversed (SgSimEngine *e, const SgGraph *g)
{
  sg_eng_init (e, g, NULL, false);
  for (SgNodeId x = g->n_nodes - 1; x >= 0; x--)
    if (sg_sched_role (&g->nodes[x]) == SG_ROLE_COLL)
      sg_eng_rates_entry (e, x, NULL);
}

/* Swaps ord[p] and ord[p + 1] when neither reads the other. */
static void
swap_if_free (const SgGraph *g, SgNodeId *ord, int32_t p)
{
  uint32_t k;
  const SgNodeId *in = sg_node_inputs (g, ord[p + 1], &k);
  for (uint32_t j = 0; j < k; j++)
    if (in[j] == ord[p])
      return;
  SgNodeId t = ord[p];
  ord[p] = ord[p + 1];
  ord[p + 1] = t;
}

/* An engine walks an order; now and then a copy takes its state (copies
 * go on by themselves, then return), and now and then the walk goes back
 * to an earlier save and on along another order (adjacent nodes swapped):
 * the copy always goes on as the walk, its rows with the walk's rates
 * (its rates memo numbered otherwise). */
START_TEST (an_engine_copy_goes_on_as_the_engine)
{
  int ng;
  SgGraph **gs = test_graphs (&ng);
  for (int i = 0; i < ng; i++) {
    const SgGraph *g = gs[i];
    int32_t n = g->n_nodes;
    GRand *rng = g_rand_new_with_seed ((guint32)i + 1);
    g_autofree SgNodeId *ord = g_new (SgNodeId, (size_t)n);
    for (SgNodeId x = 0; x < n; x++)
      ord[x] = x;
    SgSimEngine walk, copy, check;
    sg_eng_init (&walk, g, NULL, false);
    init_reversed (&copy, g);
    int32_t lo = 0;
    SgEngSnap back = { 0 }, at = { 0 };
    int32_t back_pos = -1;
    for (int32_t p = 0; p < n; p++) {
      if (g_rand_int_range (rng, 0, 8) == 0) {
        sg_eng_copy_state (&copy, &walk, &lo);
        same_engine (&copy, &walk);
        /* the copy goes on a while on its own, and comes back */
        sg_eng_save (&copy, &at);
        init_reversed (&check, g);
        int32_t clo = 0;
        sg_eng_copy_state (&check, &walk, &clo);
        for (int32_t q = p; q < MIN (n, p + 40); q++) {
          sg_eng_place (&copy, ord[q]);
          sg_eng_place (&check, ord[q]);
        }
        same_engine (&copy, &check);
        sg_eng_clear (&check);
        sg_eng_restore (&copy, &at);
      }
      if (back_pos < 0 && g_rand_int_range (rng, 0, 16) == 0) {
        sg_eng_save (&walk, &back);
        back_pos = p;
      } else if (back_pos >= 0 && g_rand_int_range (rng, 0, 16) == 0) {
        /* the walk goes back, and on along another order */
        sg_eng_restore (&walk, &back);
        lo = MIN (lo, walk.n_rows);
        if (g_rand_int_range (rng, 0, 2) == 0) {
          sg_eng_copy_state (&copy, &walk, &lo); /* back with the walk */
          same_engine (&copy, &walk);
        }
        for (int32_t q = back_pos; q + 1 < p; q++)
          if (g_rand_int_range (rng, 0, 2) == 0)
            swap_if_free (g, ord, q);
        for (int32_t q = back_pos; q < p; q++)
          sg_eng_place (&walk, ord[q]);
        back_pos = -1;
      }
      sg_eng_place (&walk, ord[p]);
    }
    sg_eng_copy_state (&copy, &walk, &lo);
    same_engine (&copy, &walk);
    sg_eng_snap_clear (&back);
    sg_eng_snap_clear (&at);
    sg_eng_clear (&walk);
    sg_eng_clear (&copy);
    g_rand_free (rng);
  }
  free_graphs (gs, ng);
}
END_TEST

/* The scheduling pass keeps the winning variant's run (or the polish's
 * simulation) as the graph's simulation, renumbered to the new ids (the
 * bound's terms beside the ids on the pool): what a fresh simulation of
 * the new order gives, with and without the polish in the pass, on pools
 * of every size. */
START_TEST (the_winning_run_is_kept_as_the_graph_s_simulation)
{
  int ng;
  SgGraph **gs = test_graphs (&ng);
  int32_t kept = 0;
  for (int i = 0; i < ng; i++)
    for (int bucket = 0; bucket < 2; bucket++)
      for (size_t p = 0; p < G_N_ELEMENTS (pool_sizes); p++) {
        SgGraph *g = sg_graph_copy (gs[i]);
        SgConfig cfg;
        sg_config_init (&cfg);
        cfg.bucket = bucket;
        cfg.pool = pool_sizes[p] ? sg_pool_new (pool_sizes[p]) : NULL;
        GError *err = NULL;
        ck_assert_msg (sg_schedule_reorder (g, &cfg, &err), "%s", err ? err->message : "");
        const SgSimResult *k = sg_graph_simulation_kept (g);
        ck_assert (k != NULL);
        SgSimResult f;
        ck_assert (sg_simulate (g, NULL, &f, NULL));
        ck_assert (k->step_us == f.step_us && k->compute_us == f.compute_us
                   && k->comm_us == f.comm_us && k->exposed_us == f.exposed_us);
        ck_assert (k->hidden == f.hidden && k->partial == f.partial && k->exposed == f.exposed);
        ck_assert_msg (k->peak_bytes == f.peak_bytes, "graph %d: peak", i);
        ck_assert (k->compute_busy_us == f.compute_busy_us);
        ck_assert (k->critical_path_us == f.critical_path_us);
        ck_assert (k->bound.lower_bound_us == f.bound.lower_bound_us);
        ck_assert (k->n_rows == f.n_rows && k->n_nodes == f.n_nodes);
        ck_assert (memcmp (k->rows, f.rows, sizeof (SgCollRow) * (size_t)f.n_rows) == 0);
        ck_assert (memcmp (k->node_start, f.node_start, sizeof (double) * (size_t)f.n_nodes)
                   == 0);
        ck_assert (memcmp (k->node_end, f.node_end, sizeof (double) * (size_t)f.n_nodes) == 0);
        kept++;
        sg_sim_result_clear (&f);
        sg_graph_free (g);
        if (cfg.pool)
          sg_pool_free (cfg.pool);
      }
  ck_assert_int_gt (kept, 0);
  free_graphs (gs, ng);
}
END_TEST

typedef struct {
  double key;
  SgNodeId id;
} Ref;

static int
by_key (const void *a, const void *b)
{
  const Ref *x = a, *y = b;
  if (x->key != y->key)
    return x->key < y->key ? -1 : 1;
  return (x->id > y->id) - (x->id < y->id);
}

/* The critical-path ranks and each group's collectives by due: as qsort
 * by (key, id) orders them. */
START_TEST (problem_orders_sort_as_qsort_by_key_and_id)
{
  int ng;
  SgGraph **gs = test_graphs (&ng);
  for (int i = 0; i < ng; i++) {
    const SgGraph *g = gs[i];
    SgSchedProblem P;
    sg_sched_problem_init (&P, g, NULL, false);
    int32_t n = P.n;
    g_autofree Ref *r = g_new (Ref, (size_t)n);
    for (SgNodeId x = 0; x < n; x++)
      r[x] = (Ref){ -P.cp_us[x], x };
    qsort (r, (size_t)n, sizeof *r, by_key);
    for (int32_t k = 0; k < n; k++)
      ck_assert_int_eq (P.cp_rank[r[k].id], k);
    for (int32_t grp = 0; grp < P.n_groups; grp++) {
      int32_t m = 0;
      for (SgNodeId c = 0; c < n; c++)
        if (P.role[c] == SG_ROLE_COLL && g->nodes[c].group == grp)
          r[m++] = (Ref){ P.due_us[c], c };
      qsort (r, (size_t)m, sizeof *r, by_key);
      ck_assert_int_eq (m, P.gfirst[grp + 1] - P.gfirst[grp]);
      for (int32_t k = 0; k < m; k++)
        ck_assert_int_eq (P.gorder[P.gfirst[grp] + k], r[k].id);
    }
    sg_sched_problem_clear (&P);
  }
  free_graphs (gs, ng);
}
END_TEST

#define SAME_ARRAY(f, m) ck_assert (memcmp (a->f, b->f, sizeof *a->f * (size_t)(m)) == 0)

/* The problem made on a pool (its parts side by side) is the one made on
 * one thread. */
static void
same_problem (const SgSchedProblem *a, const SgSchedProblem *b)
{
  int32_t n = a->n;
  SAME_ARRAY (role, n);
  SAME_ARRAY (cost, n);
  SAME_ARRAY (kslot, n);
  SAME_ARRAY (alloc, n);
  SAME_ARRAY (base_us, n + 1);
  SAME_ARRAY (profile, n);
  SAME_ARRAY (root, n);
  SAME_ARRAY (comm, n);
  SAME_ARRAY (in_bytes, n);
  SAME_ARRAY (wait_of, n);
  SAME_ARRAY (coll_of, n);
  SAME_ARRAY (deadline, n);
  SAME_ARRAY (near_coll, n);
  SAME_ARRAY (near_dead, n);
  SAME_ARRAY (feeds_coll, n);
  SAME_ARRAY (reads_wait, n);
  SAME_ARRAY (rates_at, n);
  ck_assert_int_eq (a->n_rates, b->n_rates);
  SAME_ARRAY (rates_first, a->n_rates);
  SAME_ARRAY (free_feed, n);
  SAME_ARRAY (due_us, n);
  SAME_ARRAY (ready_us, n);
  SAME_ARRAY (due_rank, n);
  SAME_ARRAY (cp_rank, n);
  SAME_ARRAY (in_end, n);
  SAME_ARRAY (in_root, n);
  SAME_ARRAY (wait_idx, n);
  SAME_ARRAY (ufirst, n + 1);
  SAME_ARRAY (users, a->ufirst[n]);
  SAME_ARRAY (ifirst, n + 1);
  SAME_ARRAY (ins, a->ifirst[n]);
  SAME_ARRAY (group, n);
  SAME_ARRAY (gorder, a->n_colls);
  ck_assert ((a->store_bytes == NULL) == (b->store_bytes == NULL));
  if (a->store_bytes)
    SAME_ARRAY (store_bytes, n);
  ck_assert (a->peak_in == b->peak_in && a->limit == b->limit);
  ck_assert (a->n_colls == b->n_colls && a->n_waits == b->n_waits && a->n_roots == b->n_roots);
}

START_TEST (the_problem_made_on_a_pool_is_the_same)
{
  int ng;
  SgGraph **gs = test_graphs (&ng);
  for (int i = 0; i < ng; i++) {
    SgSchedProblem ref;
    sg_sched_problem_init (&ref, gs[i], NULL, true);
    for (size_t p = 1; p < G_N_ELEMENTS (pool_sizes); p++) {
      SgConfig cfg;
      sg_config_init (&cfg);
      cfg.pool = sg_pool_new (pool_sizes[p]);
      SgSchedProblem P;
      sg_sched_problem_init (&P, gs[i], &cfg, true);
      same_problem (&ref, &P);
      sg_sched_problem_clear (&P);
      sg_pool_free (cfg.pool);
    }
    sg_sched_problem_clear (&ref);
  }
  free_graphs (gs, ng);
}
END_TEST

/* The peak a simulation gives, from the problem's storage bytes, is
 * sg_graph_peak_bytes's, for the input order and the scheduled one. */
START_TEST (the_problem_s_simulated_peak_is_sg_graph_peak_bytes)
{
  int ng;
  SgGraph **gs = test_graphs (&ng);
  for (int i = 0; i < ng; i++) {
    const SgGraph *g = gs[i];
    SgSchedProblem P;
    sg_sched_problem_init (&P, g, NULL, true);
    g_autofree SgNodeId *sched = sg_schedule_order (g, NULL, NULL);
    ck_assert_ptr_nonnull (sched);
    const SgNodeId *orders[] = { NULL, sched };
    for (size_t k = 0; k < G_N_ELEMENTS (orders); k++) {
      g_autofree int32_t *pos = sg_sched_positions (g, orders[k]);
      ck_assert_uint_eq (sg_sched_sim_peak (&P, pos), sg_graph_peak_bytes (g, orders[k]));
    }
    sg_sched_problem_clear (&P);
  }
  free_graphs (gs, ng);
}
END_TEST

/* The problem numbers the collectives' pair rates by their first
 * collective: equal keys, equal numbers; a variant's engine numbers them
 * alike (sg_sched_run_variant asserts it). And it marks the nodes that
 * read a collective's wait. */
START_TEST (collectives_share_a_rates_number_when_their_keys_match)
{
  int ng;
  SgGraph **gs = test_graphs (&ng);
  for (int i = 0; i < ng; i++) {
    const SgGraph *g = gs[i];
    const SgCostModel *cm = sg_graph_cost_model (g);
    SgSchedProblem P;
    sg_sched_problem_init (&P, g, NULL, false);
    for (int32_t a = 0; a < P.n_rates; a++) {
      ck_assert (a == 0 || P.rates_first[a - 1] < P.rates_first[a]);
      ck_assert_int_eq (P.rates_at[P.rates_first[a]], a);
    }
    for (SgNodeId c = 0; c < P.n; c++) {
      uint32_t k;
      const SgNodeId *in = sg_node_inputs (g, c, &k);
      bool reads = false;
      for (uint32_t j = 0; j < k; j++)
        reads |= P.coll_of[in[j]] != SG_NO_NODE;
      ck_assert_int_eq (P.reads_wait[c], reads);
      if (P.role[c] != SG_ROLE_COLL) {
        ck_assert_int_eq (P.rates_at[c], -1);
        continue;
      }
      int32_t at = P.rates_at[c];
      ck_assert (at >= 0 && at < P.n_rates && P.rates_first[at] <= c);
      SgRatesKey kc = sg_rates_key_of (g, c, cm), kf = sg_rates_key_of (g, P.rates_first[at], cm);
      ck_assert (!cm || sg_rates_key_equal (&kc, &kf));
      /* a key seen first here: c is its first collective */
      bool seen = false;
      for (int32_t a = 0; a < P.n_rates && cm && !seen; a++) {
        SgRatesKey ka = sg_rates_key_of (g, P.rates_first[a], cm);
        seen = P.rates_first[a] < c && sg_rates_key_equal (&kc, &ka);
      }
      ck_assert (seen || P.rates_first[at] == c || !cm);
    }
    sg_sched_problem_clear (&P);
  }
  free_graphs (gs, ng);
}
END_TEST

int
main (void)
{
  const TTest *tests[] = {
    variants_on_any_pool_choose_the_same_order,
    windows_searched_side_by_side_polish_as_one_at_a_time,
    an_engine_copy_goes_on_as_the_engine,
    the_winning_run_is_kept_as_the_graph_s_simulation,
    problem_orders_sort_as_qsort_by_key_and_id,
    the_problem_made_on_a_pool_is_the_same,
    the_problem_s_simulated_peak_is_sg_graph_peak_bytes,
    collectives_share_a_rates_number_when_their_keys_match,
  };
  return st_run ("parallel", 300, tests, G_N_ELEMENTS (tests));
}
