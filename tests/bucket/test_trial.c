/* test_trial.c: the pass's trial graphs (sg_bucket_trial, a trial graph of
 * the graph rewrite API) are the graphs sg_bucket_apply commits, node for
 * node: order, names, kinds, args, metas, inputs, groups, costs, implicit
 * edges and the simulator's verdict, and the base graph is left as it was;
 * on builder graphs (implicit edges, refusals) and on every sample graph
 * after estimate and schedule, for many bucket sets, including ones that
 * close cycles, and as trials of one rewrite in sequence (each layout
 * reusing the working arrays the last one cleared where it wrote them, each
 * zero-copy analysis the last one's memory: sg_graph_elision_again equals
 * a new analysis); the search's verdicts kept by lowered specs equal fresh
 * evaluations.
 */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bucket-private.h"
#include "bucket-test.h"
#include "builder.h"

/* every bucket of these tests is flat (pack / unpack) */
#define FLAT SG_BUCKET_LOWERING_FLAT

#define I(x) ((int64_t)(x))

static const char *data_dir = "tests/data"; /* argv[1] overrides */

static void
assert_meta_eq (const SgGraph *a, const SgMeta *ma, const SgGraph *b, const SgMeta *mb,
                SgNodeId i)
{
  ck_assert_int_eq (ma->ndim, mb->ndim);
  ck_assert_int_eq (ma->dtype, mb->dtype);
  for (int32_t d = 0; d < ma->ndim; d++) {
    ck_assert_msg (sg_meta_shape (a, ma)[d] == sg_meta_shape (b, mb)[d], "node %d: shape", i);
    ck_assert_msg (sg_meta_stride (a, ma)[d] == sg_meta_stride (b, mb)[d], "node %d: stride", i);
  }
}

/* The zero-copy analysis of @g into @again, which holds the analysis of
 * another graph (sg_graph_elision_again, on the pool @again may have), is
 * a new analysis's, and so are the storage sizes of it (the nodes' own
 * sizes given, as bucket/ gives them: on that pool) those of the new
 * one without a pool. */
static void
assert_elision_again_matches (const SgGraph *g, SgElision *again)
{
  SgElision fresh;
  sg_graph_elision (g, &fresh);
  sg_graph_elision_again (g, again);
  ck_assert_int_eq (fresh.n_elided, again->n_elided);
  ck_assert (!fresh.roll == !again->roll);
  for (SgNodeId i = 0; i < g->n_nodes; i++) {
    ck_assert_msg (fresh.reason[i] == again->reason[i], "node %d: reason", i);
    ck_assert_msg (fresh.view_of[i] == again->view_of[i], "node %d: view_of", i);
    ck_assert_msg (fresh.view_off[i] == again->view_off[i], "node %d: view_off", i);
    ck_assert_msg (fresh.root[i] == again->root[i], "node %d: root", i);
    ck_assert (!fresh.roll || memcmp (&fresh.roll[i], &again->roll[i], sizeof (SgRollPlace)) == 0);
  }
  size_t n = (size_t)MAX (g->n_nodes, 1);
  g_autofree uint64_t *node_alloc = g_new0 (uint64_t, n);
  for (SgNodeId i = 0; i < g->n_nodes; i++)
    node_alloc[i] = sg_node_alloc_bytes (g, i);
  g_autofree uint64_t *want = sg_elision_storage_bytes (g, &fresh, NULL, NULL);
  g_autofree uint64_t *got = g_new (uint64_t, n);
  memset (got, 0xab, sizeof *got * n); /* every entry written */
  ck_assert_ptr_eq (sg_elision_storage_bytes (g, again, node_alloc, got), got);
  for (SgNodeId i = 0; i < g->n_nodes; i++)
    ck_assert_msg (want[i] == got[i], "node %d: storage %" G_GUINT64_FORMAT " vs %" G_GUINT64_FORMAT,
                   i, want[i], got[i]);
  sg_elision_clear (&fresh);
}

static void assert_same_graph (const SgGraph *full, const SgGraph *tg);

/* Applies @specs with sg_bucket_apply to a copy of @g and with the trial
 * builder (@shared, trials of @g that made other trials before, or fresh
 * ones when NULL); both must agree on success and, when they succeed, on
 * every field the simulator and the cost model read, and on the
 * simulation; with @again, the trial graph's zero-copy analysis reusing
 * @again's memory is a new one's. */
static void
assert_trial_matches_again (SgGraph *g, SgBucketTrials *shared, const SgBucketSpec *specs,
                            int32_t n_specs, SgElision *again)
{
  SgGraph *full = sg_graph_copy (g);
  full->cost_model_free = g->cost_model_free; /* borrowed model, see bucket.c */
  g_autoptr (GError) e1 = NULL, e2 = NULL;
  bool ok_full = sg_bucket_apply (full, specs, n_specs, &e1);
  const SgCostModel *cm = sg_graph_cost_model (full);
  if (ok_full && cm)
    sg_cost_new_nodes (cm, full, NULL, 0, NULL);
  guint args_len = g->args->len, dims_len = g->dims->len;
  int32_t n_nodes = g->n_nodes;
  SgBucketTrials *trials = shared ? shared : sg_bucket_trials_new (g, true, NULL);
  SgGraph *tg = sg_bucket_trial (trials, specs, n_specs, &e2);
  if (tg && cm)
    sg_cost_new_nodes (cm, tg, NULL, 0, NULL);
  if (tg && again)
    assert_elision_again_matches (tg, again);
  ck_assert_msg (ok_full == (tg != NULL), "apply: %s; trial: %s", e1 ? e1->message : "ok",
                 e2 ? e2->message : "ok");
  if (ok_full) {
    assert_same_graph (full, tg);
    SgSimResult ra, rb;
    GError *error = NULL;
    ck_assert_msg (sg_simulate (full, NULL, &ra, &error), "%s", error ? error->message : "");
    ck_assert_msg (sg_simulate (tg, NULL, &rb, &error), "%s", error ? error->message : "");
    ck_assert (ra.exposed_us == rb.exposed_us);
    ck_assert (ra.step_us == rb.step_us);
    ck_assert (ra.peak_bytes == rb.peak_bytes);
    ck_assert_int_eq (ra.n_rows, rb.n_rows);
    sg_sim_result_clear (&ra);
    sg_sim_result_clear (&rb);
  }
  sg_graph_free (tg);
  if (!shared) {
    sg_bucket_trials_free (trials);
    /* the base graph is as it was */
    ck_assert_int_eq (g->n_nodes, n_nodes);
    ck_assert_uint_eq (g->args->len, args_len);
    ck_assert_uint_eq (g->dims->len, dims_len);
  }
  full->cost_model = NULL;
  sg_graph_free (full);
}

/* @tg is @full: every field the simulator and the cost model read, the
 * inputs, the output and the implicit edges. */
static void
assert_same_graph (const SgGraph *full, const SgGraph *tg)
{
  ck_assert_int_eq (full->n_nodes, tg->n_nodes);
  ck_assert_int_eq (full->output, tg->output);
  for (SgNodeId i = 0; i < full->n_nodes; i++) {
    const SgNode *a = &full->nodes[i], *b = &tg->nodes[i];
    ck_assert_str_eq (a->name, b->name);
    g_autofree char *ta = tb_args_text (full, i), *tb = tb_args_text (tg, i);
    ck_assert_str_eq (ta, tb);
    ck_assert_str_eq (a->target, b->target);
    ck_assert_int_eq (a->op, b->op);
    ck_assert_int_eq (a->kind, b->kind);
    assert_meta_eq (full, &a->meta, tg, &b->meta, i);
    ck_assert_int_eq (a->n_tuple, b->n_tuple);
    for (uint32_t k = 0; k < a->n_tuple; k++)
      assert_meta_eq (full, sg_node_tuple_meta (full, i, k), tg, sg_node_tuple_meta (tg, i, k),
                      i);
    uint32_t na, nb;
    const SgNodeId *ia = sg_node_inputs (full, i, &na), *ib = sg_node_inputs (tg, i, &nb);
    ck_assert_int_eq (na, nb);
    for (uint32_t k = 0; k < na; k++)
      ck_assert_int_eq (ia[k], ib[k]);
    ck_assert_int_eq (a->group, b->group);
    ck_assert_int_eq (a->group_size, b->group_size);
    ck_assert_int_eq (a->reduce, b->reduce);
    ck_assert_int_eq (a->getitem_index, b->getitem_index);
    ck_assert (isnan (a->cost_us) == isnan (b->cost_us));
    ck_assert_msg (a->est_us == b->est_us, "node %d (%s): est_us %.17g vs %.17g", i, a->name,
                   a->est_us, b->est_us);
    ck_assert_int_eq (a->est_src, b->est_src);
  }
  guint ne = full->implicit_edges ? full->implicit_edges->len : 0;
  ck_assert_uint_eq (ne, tg->implicit_edges ? tg->implicit_edges->len : 0);
  for (guint k = 0; k < ne; k++)
    ck_assert (memcmp (&g_array_index (full->implicit_edges, SgImplicitEdge, k),
                       &g_array_index (tg->implicit_edges, SgImplicitEdge, k),
                       sizeof (SgImplicitEdge)) == 0);
}

/* Trials of a copy of @g judge the @n sets of @seq (specs, counts), then
 * the trials commit @specs to that copy (sg_bucket_trials_commit, as the
 * pass applies its choice): the graph sg_bucket_apply makes of @g, though
 * the commit's layout starts from the last trial's memory and order. */
static void
assert_commit_after_trials_matches_apply (SgGraph *g, const SgBucketSpec *const *seq,
                                          const int32_t *n_seq, int n, const SgBucketSpec *specs,
                                          int32_t n_specs)
{
  SgGraph *full = sg_graph_copy (g), *work = sg_graph_copy (g);
  full->cost_model_free = work->cost_model_free = g->cost_model_free; /* borrowed model */
  g_autoptr (GError) e1 = NULL, e2 = NULL;
  bool ok_full = sg_bucket_apply (full, specs, n_specs, &e1);
  SgBucketTrials *t = sg_bucket_trials_new (work, false, NULL);
  for (int i = 0; i < n; i++) {
    g_autoptr (GError) e = NULL;
    sg_graph_free (sg_bucket_trial (t, seq[i], n_seq[i], &e));
  }
  bool ok = sg_bucket_trials_commit (t, specs, n_specs, &e2);
  sg_bucket_trials_free (t);
  ck_assert_msg (ok_full == ok, "apply: %s; commit: %s", e1 ? e1->message : "ok",
                 e2 ? e2->message : "ok");
  if (ok) {
    const SgCostModel *cm = sg_graph_cost_model (full);
    if (cm) {
      sg_cost_new_nodes (cm, full, NULL, 0, NULL);
      sg_cost_new_nodes (cm, work, NULL, 0, NULL);
    }
    assert_same_graph (full, work);
    ck_assert_uint_eq (full->args->len, work->args->len);
    ck_assert_uint_eq (full->dims->len, work->dims->len);
  }
  full->cost_model = work->cost_model = NULL;
  sg_graph_free (full);
  sg_graph_free (work);
}

static void
assert_trial_matches (SgGraph *g, SgBucketTrials *shared, const SgBucketSpec *specs,
                      int32_t n_specs)
{
  assert_trial_matches_again (g, shared, specs, n_specs, NULL);
}

static void
assert_trial_matches_apply (SgGraph *g, const SgBucketSpec *specs, int32_t n_specs)
{
  assert_trial_matches (g, NULL, specs, n_specs);
}

static void
prepare (SgGraph *g, bool reorder)
{
  SgConfig cfg;
  sg_config_init (&cfg);
  cfg.reorder = reorder;
  GError *error = NULL;
  ck_assert_msg (sg_estimate_costs (g, &cfg, &error), "%s", error ? error->message : "");
  ck_assert_msg (sg_schedule_reorder (g, &cfg, &error), "%s", error ? error->message : "");
}

/* Three gathers and a reduce_scatter with a non-hiding implicit edge from
 * a member to compute and one into a member's wait. */
static SgGraph *
edges_graph (void)
{
  SgGraph *g = tb_new (2);
  tb_group (g, "0", 2, 0, 1);
  tb_input (g, "x", "bfloat16", 2, I (64), I (64));
  tb_input (g, "w1", "bfloat16", 2, I (32), I (64));
  tb_input (g, "w2", "bfloat16", 2, I (32), I (64));
  tb_input (g, "w3", "bfloat16", 1, I (100));
  tb_all_gather (g, "ag1", "w1", "0");
  tb_all_gather (g, "ag2", "w2", "0");
  tb_mm (g, "busy", "x", "x");
  tb_all_gather (g, "ag3", "w3", "0");
  tb_wait (g, "ag1_w", "ag1");
  tb_wait (g, "ag2_w", "ag2");
  tb_wait (g, "ag3_w", "ag3");
  tb_mm (g, "mm1", "busy", "ag1_w");
  tb_mm (g, "mm2", "mm1", "ag2_w");
  tb_reduce_scatter (g, "rs1", "mm2", "0");
  tb_wait (g, "rs1_w", "rs1");
  tb_output (g, 3, "rs1_w", "ag3_w", "mm1");
  return g;
}

/* One implicit edge of each kind the rewrite moves or keeps on
 * edges_graph (): plain, bucket and hide-start. */
static void
add_edges (SgGraph *g)
{
  sg_implicit_edge_add (g, sg_graph_lookup (g, "ag2"), sg_graph_lookup (g, "busy"),
                        SG_EDGE_OTHER);
  sg_implicit_edge_add (g, sg_graph_lookup (g, "busy"), sg_graph_lookup (g, "ag1_w"),
                        SG_EDGE_BUCKET);
  sg_implicit_edge_add (g, sg_graph_lookup (g, "ag1"), sg_graph_lookup (g, "busy"),
                        SG_EDGE_HIDE_START);
}

START_TEST (trial_matches_apply_with_implicit_edges)
{
  g_autoptr (SgGraph) g = edges_graph ();
  prepare (g, false);
  add_edges (g);
  sg_implicit_edge_add (g, sg_graph_lookup (g, "x"), sg_graph_lookup (g, "ag3"),
                        SG_EDGE_HIDE_START);
  SgNodeId m12[2] = { sg_graph_lookup (g, "ag1"), sg_graph_lookup (g, "ag2") };
  SgNodeId m123[3] = { m12[0], m12[1], sg_graph_lookup (g, "ag3") };
  SgNodeId m13[2] = { m12[0], m123[2] };
  SgBucketSpec s12 = { m12, 2, FLAT }, s123 = { m123, 3, FLAT }, s13 = { m13, 2, FLAT };
  assert_trial_matches_apply (g, &s12, 1);
  assert_trial_matches_apply (g, &s123, 1);
  assert_trial_matches_apply (g, &s13, 1);
  assert_trial_matches_apply (g, NULL, 0);
}
END_TEST

/* The same sets as trials of one rewrite, one after another: each layout
 * reuses the working arrays the last one cleared where it wrote them
 * (moved edges, redirects, touched users), so what one trial moved or
 * redirected must not stay in the next. */
START_TEST (trials_in_sequence_forget_the_last_trials_moves_and_redirects)
{
  g_autoptr (SgGraph) g = edges_graph ();
  prepare (g, false);
  add_edges (g);
  SgNodeId m12[2] = { sg_graph_lookup (g, "ag1"), sg_graph_lookup (g, "ag2") };
  SgNodeId m123[3] = { m12[0], m12[1], sg_graph_lookup (g, "ag3") };
  SgNodeId m13[2] = { m12[0], m123[2] }, m23[2] = { m12[1], m123[2] };
  SgBucketSpec s12 = { m12, 2, FLAT }, s123 = { m123, 3, FLAT }, s13 = { m13, 2, FLAT };
  SgBucketSpec s23 = { m23, 2, SG_BUCKET_LOWERING_GROUPED };
  const SgBucketSpec *seq[] = { &s123, &s12, NULL, &s13, &s23, &s123, NULL, &s12, &s23 };
  SgBucketTrials *t = sg_bucket_trials_new (g, true, NULL);
  SgElision again = { 0 };
  for (guint i = 0; i < G_N_ELEMENTS (seq); i++)
    assert_trial_matches_again (g, t, seq[i], seq[i] ? 1 : 0, &again);
  sg_elision_clear (&again);
  sg_bucket_trials_free (t);
}
END_TEST

START_TEST (trial_refuses_what_apply_refuses)
{
  g_autoptr (SgGraph) g = edges_graph ();
  prepare (g, false);
  SgNodeId ag1 = sg_graph_lookup (g, "ag1"), ag2 = sg_graph_lookup (g, "ag2");
  SgNodeId rs1 = sg_graph_lookup (g, "rs1"), mm1 = sg_graph_lookup (g, "mm1");
  SgNodeId one[1] = { ag1 }, twice[2] = { ag1, ag1 }, mixed[2] = { ag1, rs1 };
  SgNodeId not_coll[2] = { ag1, mm1 }, ok[2] = { ag1, ag2 };
  SgBucketSpec s_one = { one, 1, FLAT }, s_twice = { twice, 2, FLAT }, s_mixed = { mixed, 2, FLAT };
  SgBucketSpec s_not = { not_coll, 2, FLAT }, s_two[2] = { { ok, 2, FLAT }, { ok, 2, FLAT } };
  assert_trial_matches_apply (g, &s_one, 1);
  assert_trial_matches_apply (g, &s_twice, 1);
  assert_trial_matches_apply (g, &s_mixed, 1);
  assert_trial_matches_apply (g, &s_not, 1);
  assert_trial_matches_apply (g, s_two, 2);
  /* a gather fed by the reduce_scatter's result closes a cycle with it */
  SgGraph *h = tb_new (2);
  tb_group (h, "0", 2, 0, 1);
  tb_input (h, "w", "bfloat16", 1, I (64));
  tb_all_reduce (h, "ar1", "w", "0");
  tb_wait (h, "ar1_w", "ar1");
  tb_all_reduce (h, "ar2", "ar1_w", "0");
  tb_wait (h, "ar2_w", "ar2");
  tb_output (h, 1, "ar2_w");
  prepare (h, false);
  SgNodeId cyc[2] = { sg_graph_lookup (h, "ar1"), sg_graph_lookup (h, "ar2") };
  SgBucketSpec s_cyc = { cyc, 2, FLAT };
  assert_trial_matches_apply (h, &s_cyc, 1);
  sg_graph_free (h);
}
END_TEST

/* Bucket sets over the candidates of @g (estimated and scheduled), grouped
 * by key like the pass: runs of 2 to 5 consecutive candidates all at once,
 * and each of the first adjacent pairs alone. */
/* With @fork_pool, only the sequences below, their trials built on a fork
 * of the graph (sg_rewrite_fork) and laid out on that pool, and their
 * zero-copy analyses made on it. */
static void
check_bucket_sets_with (SgGraph *g, SgPool *fork_pool)
{
  sg_graph_fill_users (g);
  g_autoptr (GArray) keys = g_array_new (FALSE, FALSE, sizeof (SgBucketKey));
  g_autoptr (GPtrArray) lists = g_ptr_array_new_with_free_func ((GDestroyNotify)g_array_unref);
  for (SgNodeId i = 0; i < g->n_nodes; i++) {
    SgNodeId w;
    const SgNode *n = &g->nodes[i];
    if (!sg_op_is_collective (n->kind) || !sg_bucket_member_check (g, i, &w, NULL)
        || sg_node_comm_bytes (g, i) == 0)
      continue;
    SgBucketKey k = { n->kind, n->group, n->meta.dtype, n->reduce };
    guint ki = 0;
    while (ki < keys->len && memcmp (&g_array_index (keys, SgBucketKey, ki), &k, sizeof k) != 0)
      ki++;
    if (ki == keys->len) {
      g_array_append_val (keys, k);
      g_ptr_array_add (lists, g_array_new (FALSE, FALSE, sizeof (SgNodeId)));
    }
    g_array_append_val (g_ptr_array_index (lists, ki), i);
  }
  ck_assert_uint_gt (keys->len, 0);
  for (int run = 2; run <= (fork_pool ? 2 : 5); run++) {
    g_autoptr (GArray) specs = g_array_new (FALSE, FALSE, sizeof (SgBucketSpec));
    for (guint k = 0; k < lists->len; k++) {
      GArray *l = g_ptr_array_index (lists, k);
      for (guint i = 0; i + (guint)run <= l->len; i += (guint)run) {
        SgBucketSpec s = { &g_array_index (l, SgNodeId, i), run, FLAT };
        g_array_append_val (specs, s);
      }
    }
    if (!fork_pool)
      assert_trial_matches_apply (g, (SgBucketSpec *)(void *)specs->data, (int32_t)specs->len);
    /* trials of one rewrite after another: a growing, then a shrinking
     * first part of the set, a bucket changed in the middle; each equals
     * a fresh trial's and the base graph is left as it was */
    guint args_len = g->args->len, dims_len = g->dims->len;
    SgGraph *fork = fork_pool ? sg_rewrite_fork (g) : NULL;
    SgBucketTrials *t = sg_bucket_trials_new (fork ? fork : g, true, fork_pool);
    SgBucketSpec *all = (SgBucketSpec *)(void *)specs->data;
    SgElision again = { 0 }; /* each trial's analysis in the last one's memory */
    sg_elision_set_pool (&again, fork_pool);
    for (guint i = 0; i <= 6; i++)
      assert_trial_matches_again (g, t, all, (int32_t)(specs->len * i / 6), &again);
    for (guint i = 6; i-- > 0;)
      assert_trial_matches_again (g, t, all, (int32_t)(specs->len * i / 6), &again);
    if (specs->len >= 2 && all[specs->len / 2].n_members > 2) {
      g_autofree SgBucketSpec *cut = g_memdup2 (all, sizeof *all * specs->len);
      cut[specs->len / 2].n_members--;
      assert_trial_matches_again (g, t, cut, (int32_t)specs->len, &again);
      assert_trial_matches_again (g, t, all, (int32_t)specs->len, &again);
      if (!fork_pool) { /* the pass's commit after such trials, of either set */
        const SgBucketSpec *seq[] = { all, cut, all };
        const int32_t len = (int32_t)specs->len, n_seq[] = { len / 2, len, len };
        assert_commit_after_trials_matches_apply (g, seq, n_seq, 3, cut, len);
        assert_commit_after_trials_matches_apply (g, seq, n_seq, 3, all, len);
        assert_commit_after_trials_matches_apply (g, seq, n_seq, 2, all, len / 3);
      }
    }
    sg_elision_clear (&again);
    sg_bucket_trials_free (t);
    sg_graph_free (fork);
    ck_assert_uint_eq (g->args->len, args_len);
    ck_assert_uint_eq (g->dims->len, dims_len);
  }
  for (guint k = 0; k < lists->len && !fork_pool; k++) {
    GArray *l = g_ptr_array_index (lists, k);
    for (guint i = 0; i + 2 <= l->len && i < 6; i++) {
      SgBucketSpec s = { &g_array_index (l, SgNodeId, i), 2, FLAT };
      assert_trial_matches_apply (g, &s, 1);
    }
  }
}

static void
check_bucket_sets (SgGraph *g)
{
  check_bucket_sets_with (g, NULL);
}

static void
check_sample (const char *file)
{
  g_autofree char *path = g_build_filename (data_dir, file, NULL);
  GError *error = NULL;
  g_autoptr (SgGraph) g = sg_graph_load (path, &error);
  ck_assert_msg (g, "%s", error ? error->message : "");
  prepare (g, true);
  check_bucket_sets (g);
}

START_TEST (trial_matches_apply_on_samples)
{
  static const char *const files[] = {
    "dev_fsdp2_tp4_L2_h1024.json", "dev_fsdp8_L2_h1024.json", "w2_fsdp2_L2_h1024.json",
    "w2_tiny_fsdp2_L2_h256.json",  "w2_tiny_tp2_L2_h256.json", "w2_tp2_L2_h1024.json",
  };
  check_sample (files[_i]);
}
END_TEST

static bool
evals_equal (const SgBucketEval *a, const SgBucketEval *b)
{
  return memcmp (&a->step_us, &b->step_us, sizeof (double)) == 0
         && memcmp (&a->exposed_us, &b->exposed_us, sizeof (double)) == 0
         && a->peak_bytes == b->peak_bytes;
}

/* The search's verdicts kept by lowered specs (run.c's memo) are those of
 * a search without the memo, asked in the same order: sets asked again,
 * the same members lowered the other way (a memo that ignored the
 * lowering would answer with the other's verdict), sets that differ in
 * one member. */
START_TEST (kept_verdicts_equal_fresh_evaluations)
{
  g_autofree char *path = g_build_filename (data_dir, "w2_fsdp2_L2_h1024.json", NULL);
  GError *error = NULL;
  g_autoptr (SgGraph) g = sg_graph_load (path, &error);
  ck_assert_msg (g, "%s", error ? error->message : "");
  prepare (g, true);
  const SgSimResult *r = sg_graph_simulation (g, &error);
  ck_assert_msg (r, "%s", error ? error->message : "");
  SgBucketEval base = { r->exposed_us, r->step_us, r->peak_bytes };
  SgConfig cfg;
  sg_config_init (&cfg);
  SgBucketStats st_memo = { .cap_bytes = SG_BUCKET_DEFAULT_CAP_BYTES,
                            .lowering = SG_BUCKET_LOWERING_AUTO };
  SgBucketStats st_fresh = st_memo;
  SgBucketSearch memo, fresh;
  sg_bucket_search_init (&memo, g, &cfg, &st_memo, &base);
  sg_bucket_search_init (&fresh, g, &cfg, &st_fresh, &base);
  g_clear_pointer (&fresh.eval_memo, g_hash_table_unref);
  /* sets of one bucket: runs of 2 and 3 candidates of one key */
  SgNodeId members[64][3];
  SgBucketSpec specs[64];
  int32_t n_specs = 0;
  for (int32_t i = 0; i < memo.n_cands && n_specs < 64; i++)
    for (int32_t len = 2; len <= 3 && n_specs < 64; len++) {
      int32_t got = 0;
      for (int32_t j = i; j < memo.n_cands && got < len; j++)
        if (memo.cands[j].key == memo.cands[i].key)
          members[n_specs][got++] = memo.cands[j].c;
      if (got == len)
        specs[n_specs] = (SgBucketSpec){ members[n_specs], len, FLAT }, n_specs++;
    }
  ck_assert_int_ge (n_specs, 4);
  int32_t asked = 0, differ = 0;
  for (int round = 0; round < 2; round++)
    for (int32_t i = 0; i < n_specs; i++) {
      SgBucketEval by_lowering[2];
      bool ok_by_lowering[2];
      for (int l = 0; l < 2; l++) {
        SgBucketSpec one = specs[i];
        one.lowering = l ? SG_BUCKET_LOWERING_GROUPED : FLAT;
        SgBucketEval a = { 0 }, b = { 0 };
        bool ok_a = sg_bucket_evaluate (&memo, &one, 1, &a);
        bool ok_b = sg_bucket_evaluate (&fresh, &one, 1, &b);
        asked++;
        ck_assert_int_eq (ok_a, ok_b);
        ck_assert_msg (!ok_a || evals_equal (&a, &b), "set %d lowering %d round %d", i, l,
                       round);
        by_lowering[l] = a, ok_by_lowering[l] = ok_a;
      }
      differ += ok_by_lowering[0] && ok_by_lowering[1]
                && !evals_equal (&by_lowering[0], &by_lowering[1]);
    }
  ck_assert_int_gt (differ, 0); /* the lowering is part of the verdict */
  /* every ask counts; the second round came from the memo */
  ck_assert_int_eq (st_memo.simulations, asked);
  ck_assert_uint_eq (g_hash_table_size (memo.eval_memo), (guint)asked / 2);
  sg_bucket_search_clear (&memo);
  sg_bucket_search_clear (&fresh);
}
END_TEST

#ifdef HAVE_GRAPHGEN
/* The one-layer HSDP step's 9 reduce_scatters into @rs and 9 all_reduces
 * into @ar, in id order (users filled). */
static void
hsdp_collectives (SgGraph *g, SgNodeId *rs, SgNodeId *ar)
{
  sg_graph_fill_users (g);
  int32_t nr = 0, na = 0;
  for (SgNodeId i = 0; i < g->n_nodes; i++) {
    if (g->nodes[i].kind == SG_OP_REDUCE_SCATTER && nr++ < 9)
      rs[nr - 1] = i;
    if (g->nodes[i].kind == SG_OP_ALL_REDUCE && na++ < 9)
      ar[na - 1] = i;
  }
  ck_assert_int_eq (nr, 9);
  ck_assert_int_eq (na, 9);
}

/* HSDP: the all_reduces over replicas read the reduce_scatters' results,
 * so a bucket of all_reduces reads the unpacks of the reduce_scatters'
 * bucket (in either order of the specs), and its pack is a view of that
 * bucket's result. */
START_TEST (chained_buckets_read_the_unpacks)
{
  GgConfig gc;
  gg_config_init (&gc);
  gc.layers = 1, gc.dp = 2, gc.world = 4;
  g_autoptr (SgGraph) g = bt_generated (&gc);
  prepare (g, true);
  SgNodeId rs[9], ar[9];
  hsdp_collectives (g, rs, ar);
  SgBucketSpec both[2] = { { rs, 9, FLAT }, { ar, 9, FLAT } };
  SgBucketSpec swapped[2] = { { ar, 9, FLAT }, { rs, 9, FLAT } };
  assert_trial_matches_apply (g, both, 2);
  assert_trial_matches_apply (g, swapped, 2);
  GError *error = NULL;
  ck_assert_msg (sg_bucket_apply (g, both, 2, &error), "%s", error ? error->message : "");
  ck_assert_msg (sg_graph_validate (g, &error), "%s", error ? error->message : "");
  SgElision el;
  sg_graph_elision (g, &el);
  int32_t views = 0;
  for (SgNodeId i = 0; i < g->n_nodes; i++)
    views += g->nodes[i].kind == SG_OP_BUCKET_PACK && el.reason[i] == SG_COPY_ELIDED
             && el.view_of[i] >= 0;
  sg_elision_clear (&el);
  ck_assert_int_eq (views, 1);
}
END_TEST

/* Trials in sequence whose first bucket changes (dropped, back, cut by a
 * member, the list in another order, one in the middle dropped): the
 * buckets the last trial had too are taken from it as they were
 * (sg_bucket_trials_replayed), under other ids, flat and grouped, a
 * bucket of all_reduces reading another bucket's unpacks (HSDP) among
 * them; each trial equals sg_bucket_apply, with and without the check of
 * every replayed bucket against one built afresh (@verify). */
static void
check_replays (SgGraph *g, bool verify)
{
  SgNodeId rs[9], ar[9];
  hsdp_collectives (g, rs, ar);
  const SgBucketLowering GROUPED = SG_BUCKET_LOWERING_GROUPED;
  SgBucketSpec all[6] = { { rs, 3, FLAT }, { rs + 3, 3, GROUPED }, { ar, 3, FLAT },
                          { rs + 6, 3, FLAT }, { ar + 3, 3, FLAT }, { ar + 6, 3, GROUPED } };
  SgBucketSpec cut[6], swapped[6], holed[5];
  memcpy (cut, all, sizeof all);
  cut[0].n_members = 2;
  for (int i = 0; i < 6; i++)
    swapped[i] = all[(i + 3) % 6];
  memcpy (holed, cut, 2 * sizeof *all);
  memcpy (holed + 2, cut + 3, 3 * sizeof *all);
  struct {
    const SgBucketSpec *specs;
    int32_t n, replayed;
  } seq[] = { { all, 6, 0 },     { all + 1, 5, 5 }, { all, 6, 5 },    { cut, 6, 5 },
              { swapped, 6, 5 }, { cut, 6, 5 },     { holed, 5, 3 }, { all, 6, 4 } };
  SgBucketTrials *t = sg_bucket_trials_new (g, verify, NULL);
  for (size_t i = 0; i < G_N_ELEMENTS (seq); i++) {
    assert_trial_matches_again (g, t, seq[i].specs, seq[i].n, NULL);
    ck_assert_msg (sg_bucket_trials_replayed (t) == seq[i].replayed, "trial %zu: %d replayed",
                   i, sg_bucket_trials_replayed (t));
  }
  sg_bucket_trials_free (t);
  ck_assert_msg (sg_bucket_apply (g, all, 6, NULL), "the set is valid");
}

START_TEST (buckets_the_last_trial_had_are_replayed_exactly)
{
  GgConfig gc;
  gg_config_init (&gc);
  gc.layers = 1, gc.dp = 2, gc.world = 4;
  for (int verify = 0; verify < 2; verify++) {
    g_autoptr (SgGraph) g = bt_generated (&gc);
    prepare (g, true);
    check_replays (g, verify);
  }
}
END_TEST

/* A generated FSDP-8 step of ~10k nodes: hundreds of buckets at once, as
 * in the pass's late trials on large graphs. */
START_TEST (trial_matches_apply_on_a_generated_step)
{
  g_autoptr (SgGraph) g = bt_generated_fsdp8 (10000);
  prepare (g, true);
  check_bucket_sets (g);
}
END_TEST

/* Trials of a fork of the graph (another thread's base: its own pools,
 * the rest borrowed) laid out on a pool (a graph large enough for the
 * layout's chunks) equal sg_bucket_apply on the graph itself, and leave
 * it as it was. */
START_TEST (trials_of_a_fork_laid_out_on_a_pool_match_apply)
{
  g_autoptr (SgGraph) g = bt_generated_fsdp8 (20000);
  prepare (g, true);
  SgPool *pool = sg_pool_new (3);
  check_bucket_sets_with (g, pool);
  sg_pool_free (pool);
}
END_TEST

/* The zero-copy analyses of trials in sequence and their storage sizes,
 * their passes over every node split into ranges on pools of 1, 2, 3 and
 * 8 threads (a graph of several ranges), equal the sequential ones. */
START_TEST (trial_analyses_on_pools_equal_the_sequential_ones)
{
  g_autoptr (SgGraph) g = bt_generated_fsdp8 (12000);
  prepare (g, true);
  static const int32_t threads[] = { 1, 2, 3, 8 };
  for (guint t = 0; t < G_N_ELEMENTS (threads); t++) {
    SgPool *pool = sg_pool_new (threads[t]);
    check_bucket_sets_with (g, pool);
    sg_pool_free (pool);
  }
}
END_TEST
#endif

static Suite *
trial_suite (void)
{
  Suite *s = suite_create ("bucket_trial");
  TCase *tc = tcase_create ("trial");
  tcase_set_timeout (tc, 300); /* the sanitizer build on 2 loaded cores: ~110 s for the whole suite */
  tcase_add_test (tc, trial_matches_apply_with_implicit_edges);
  tcase_add_test (tc, trials_in_sequence_forget_the_last_trials_moves_and_redirects);
  tcase_add_test (tc, trial_refuses_what_apply_refuses);
  tcase_add_loop_test (tc, trial_matches_apply_on_samples, 0, 6);
  tcase_add_test (tc, kept_verdicts_equal_fresh_evaluations);
#ifdef HAVE_GRAPHGEN
  tcase_add_test (tc, chained_buckets_read_the_unpacks);
  tcase_add_test (tc, buckets_the_last_trial_had_are_replayed_exactly);
  tcase_add_test (tc, trial_matches_apply_on_a_generated_step);
  tcase_add_test (tc, trials_of_a_fork_laid_out_on_a_pool_match_apply);
  tcase_add_test (tc, trial_analyses_on_pools_equal_the_sequential_ones);
#endif
  suite_add_tcase (s, tc);
  return s;
}

int
main (int argc, char **argv)
{
  return bt_main (argc, argv, &data_dir, trial_suite ());
}
