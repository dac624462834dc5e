/* test_decompose.c: the decomposition pass (decompose/, issue 13): sites
 * found through views and sums of mms, refusals with their reason, every
 * form rewriting a graph the validator accepts, the choice following the
 * simulator, determinism, and the shared TP samples and generated TP
 * graphs valid after the pass in every mode; the scheduler then runs the
 * ring steps beside the chunk GEMMs.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "builder.h"
#include "bucket.h"
#include "decompose-private.h"
#ifdef HAVE_GRAPHGEN
#include "graphgen.h"
#endif

static const char *data_dir = "tests/data"; /* argv[1] overrides */

#define I(x) ((int64_t)(x))

static void
estimate (SgGraph *g)
{
  GError *error = NULL;
  SgConfig cfg;
  sg_config_init (&cfg);
  ck_assert_msg (sg_estimate_costs (g, &cfg, &error), "%s", error ? error->message : "");
}

static void
validate (const SgGraph *g, const char *what)
{
  GError *error = NULL;
  ck_assert_msg (sg_graph_validate (g, &error), "%s: %s", what, error ? error->message : "");
}

static const SgDecomposeStats *
run_pass (SgGraph *g, SgDecomposeMode mode)
{
  SgConfig cfg;
  sg_config_init (&cfg);
  cfg.decompose = mode;
  GError *error = NULL;
  ck_assert_msg (sg_decompose_pass (g, &cfg, &error), "%s", error ? error->message : "");
  validate (g, "after the pass");
  return sg_decompose_stats (g);
}

static int32_t
count_kind (const SgGraph *g, SgOpKind k)
{
  int32_t n = 0;
  for (SgNodeId i = 0; i < g->n_nodes; i++)
    n += g->nodes[i].kind == k;
  return n;
}

static char *
dump_text (const SgGraph *g)
{
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream (&buf, &len);
  sg_graph_dump (g, f);
  fclose (f);
  return buf;
}

/* x [4, 6] gathered over "tp" (2 ranks) -> [8, 6]; mm(wait, w) and
 * mm(view(wait, [16, 3]), w2) read its rows, t(wait) @ a needs it whole. */
static SgGraph *
gather_graph (void)
{
  SgGraph *g = tb_new (2);
  tb_group (g, "tp", 2, 0, 1);
  tb_input (g, "x", "float32", 2, I (4), I (6));
  tb_input (g, "w", "float32", 2, I (6), I (5));
  tb_input (g, "w2", "float32", 2, I (3), I (7));
  tb_input (g, "a", "float32", 2, I (8), I (5));
  tb_all_gather (g, "ag", "x", "tp");
  tb_wait (g, "ag_w", "ag");
  tb_mm (g, "y1", "ag_w", "w");
  tb_node (g, "{\"name\":\"v\",\"op\":\"call_function\",\"target\":\"aten.view.default\","
              "\"args\":[{\"node\":\"ag_w\"},[16,3]],\"kwargs\":{},"
              "\"meta\":{\"shape\":[16,3],\"dtype\":\"float32\"}}");
  tb_mm (g, "y2", "v", "w2");
  tb_t (g, "xt", "ag_w");
  tb_mm (g, "y3", "xt", "a");
  tb_output (g, 3, "y1", "y2", "y3");
  return g;
}

/* reduce_scatter(add(mm(a, b), mm(c, d))) over "tp" of @k ranks, rows @m,
 * dtype @dt; its result feeds a relu. A large input ("state", 4 GiB in
 * bfloat16 at m = 8192: what a step holds besides) is also an output. */
static SgGraph *
reduce_graph (int k, int64_t m, int64_t kk, int64_t n, const char *dt)
{
  SgGraph *g = tb_new (k);
  if (k == 2)
    tb_group (g, "tp", 2, 0, 1);
  else
    tb_group (g, "tp", 4, 0, 1, 2, 3);
  tb_input (g, "state", dt, 2, m * 4, m * 8);
  tb_input (g, "a", dt, 2, m, kk);
  tb_input (g, "b", dt, 2, kk, n);
  tb_input (g, "c", dt, 2, m, kk);
  tb_input (g, "d", dt, 2, kk, n);
  tb_mm (g, "p", "a", "b");
  tb_mm (g, "q", "c", "d");
  tb_pointwise (g, "pq", "aten.add.Tensor", "p", "q");
  tb_reduce_scatter (g, "rs", "pq", "tp");
  tb_wait (g, "rs_w", "rs");
  tb_pointwise (g, "out", "aten.relu.default", "rs_w", NULL);
  tb_output (g, 2, "out", "state");
  return g;
}

/* all_reduce(mm(a, b)) over "tp" (2 ranks), a of @rows rows. */
static SgGraph *
all_reduce_graph (int64_t rows)
{
  SgGraph *g = tb_new (2);
  tb_group (g, "tp", 2, 0, 1);
  tb_input (g, "a", "float32", 2, rows, I (6));
  tb_input (g, "b", "float32", 2, I (6), I (4));
  tb_mm (g, "p", "a", "b");
  tb_all_reduce (g, "c", "p", "tp");
  tb_wait (g, "y", "c");
  tb_output (g, 1, "y");
  return g;
}

static const SgSite *
only_site (SgSite *sites, int32_t n)
{
  ck_assert_int_eq (n, 1);
  return &sites[0];
}

START_TEST (all_gather_sites_are_found_through_views)
{
  SgGraph *g = gather_graph ();
  sg_graph_fill_users (g);
  int32_t n;
  SgSite *sites = sg_sites_find (g, &n);
  const SgSite *s = only_site (sites, n);
  ck_assert_int_eq (s->reason, SG_SITE_DECOMPOSED);
  ck_assert_int_eq (s->kind, SG_SITE_ALL_GATHER_MM);
  ck_assert_int_eq (s->n_mm, 2);
  ck_assert_int_eq (s->mm[0], sg_graph_lookup (g, "y1"));
  ck_assert_int_eq (s->view[0], SG_NO_NODE);
  ck_assert_int_eq (s->mm[1], sg_graph_lookup (g, "y2"));
  ck_assert_int_eq (s->view[1], sg_graph_lookup (g, "v"));
  ck_assert_int_eq (s->n_whole, 1); /* t(wait) @ a: the gathered dim is K there */
  sg_sites_free (sites, n);
  sg_graph_free (g);
}
END_TEST

START_TEST (sums_of_mms_are_reduce_scatter_sites)
{
  SgGraph *g = reduce_graph (2, 8, 6, 5, "float32");
  sg_graph_fill_users (g);
  int32_t n;
  SgSite *sites = sg_sites_find (g, &n);
  const SgSite *s = only_site (sites, n);
  ck_assert_int_eq (s->reason, SG_SITE_DECOMPOSED);
  ck_assert_int_eq (s->kind, SG_SITE_MM_REDUCE_SCATTER);
  ck_assert_int_eq (s->n_leaves, 2);
  ck_assert_int_eq (s->n_terms, 3);
  ck_assert_int_eq (s->terms[2].node, sg_graph_lookup (g, "pq")); /* the root last */
  ck_assert_int_eq (s->rows, 8);
  sg_sites_free (sites, n);
  sg_graph_free (g);
}
END_TEST

/* One refusal per rule: the graph's one collective is not a site, and why. */
static SgSiteReason
refusal_of (SgGraph *g)
{
  sg_graph_fill_users (g);
  int32_t n;
  SgSite *sites = sg_sites_find (g, &n);
  SgSiteReason r = only_site (sites, n)->reason;
  sg_sites_free (sites, n);
  sg_graph_free (g);
  return r;
}

static SgGraph *
refused_graph (int rule)
{
  SgGraph *g = tb_new (2);
  tb_group (g, "tp", 2, 0, 1);
  tb_input (g, "a", "float32", 2, I (8), I (6));
  tb_input (g, "b", "float32", 2, I (6), I (4));
  switch (rule) {
  case SG_SITE_PRODUCER: /* relu(mm) is not a sum of mms */
    tb_mm (g, "p", "a", "b");
    tb_pointwise (g, "r", "aten.relu.default", "p", NULL);
    tb_reduce_scatter (g, "c", "r", "tp");
    tb_wait (g, "y", "c");
    break;
  case SG_SITE_SHARED: /* the mm is also read elsewhere */
    tb_mm (g, "p", "a", "b");
    tb_reduce_scatter (g, "c", "p", "tp");
    tb_wait (g, "cw", "c");
    tb_pointwise (g, "y", "aten.add.Tensor", "p", NULL);
    break;
  case SG_SITE_REDUCE_OP: /* max is not a sum */
    tb_mm (g, "p", "a", "b");
    tb_node (g, "{\"name\":\"c\",\"op\":\"call_function\",\"target\":"
                "\"_c10d_functional.reduce_scatter_tensor.default\",\"args\":[{\"node\":\"p\"},"
                "\"max\",2,\"tp\"],\"kwargs\":{},\"meta\":{\"shape\":[4,4],\"dtype\":\"float32\"}}");
    tb_wait (g, "y", "c");
    break;
  default:
    g_assert_not_reached ();
  }
  return g;
}

START_TEST (sites_are_refused_with_their_reason)
{
  /* K-only all_gather: rows of t(wait) are x's columns */
  SgGraph *g = tb_new (2);
  tb_group (g, "tp", 2, 0, 1);
  tb_input (g, "x", "float32", 2, I (3), I (4));
  tb_input (g, "a", "float32", 2, I (6), I (5));
  tb_all_gather (g, "ag", "x", "tp");
  tb_wait (g, "ag_w", "ag");
  tb_t (g, "xt", "ag_w");
  tb_mm (g, "y", "xt", "a");
  tb_output (g, 1, "y");
  ck_assert_int_eq (refusal_of (g), SG_SITE_NO_ROWS);

  int rules[] = { SG_SITE_PRODUCER, SG_SITE_SHARED, SG_SITE_REDUCE_OP };
  for (size_t i = 0; i < G_N_ELEMENTS (rules); i++) {
    g = refused_graph (rules[i]);
    tb_output (g, 1, "y");
    ck_assert_int_eq (refusal_of (g), rules[i]);
  }

  /* an all_reduce of 3 rows: no two equal row chunks */
  ck_assert_int_eq (refusal_of (all_reduce_graph (3)), SG_SITE_INDIVISIBLE);
}
END_TEST

/* The names in the first permute's (or chunk all_reduce's)
 * schedgraph_replaces, joined by spaces. */
static char *
replaced (const SgGraph *g)
{
  GString *s = g_string_new (NULL);
  for (SgNodeId i = 0; i < g->n_nodes; i++) {
    const SgArg *r = sg_node_kwarg (g, i, "schedgraph_replaces");
    uint32_t n;
    const SgArg *items = sg_arg_items (g, r, &n);
    for (uint32_t j = 0; j < n; j++)
      g_string_append_printf (s, "%s%s", s->len ? " " : "", sg_arg_str (&items[j]));
  }
  return g_string_free (s, FALSE);
}

/* Writes site 0 of @g in form @f and commits. */
static void
rewrite_one (SgGraph *g, const SgSiteForm *f)
{
  sg_graph_fill_users (g);
  int32_t n;
  SgSite *sites = sg_sites_find (g, &n);
  SgSiteChoice c = { .form = *f, .chosen = true };
  GError *error = NULL;
  SgRewrite *rw = sg_rewrite_new (g);
  ck_assert_msg (sg_decompose_rewrite (rw, sites, 1, &c, NULL, &error) && sg_rewrite_commit (rw, &error),
                 "%s", error ? error->message : "");
  sg_rewrite_free (rw);
  sg_sites_free (sites, n);
  validate (g, "after the rewrite");
}

START_TEST (every_form_rewrites_a_valid_graph)
{
  const SgSiteForm forms[] = {
    { 2, SG_TRANSPORT_NCCL, 0, false, false }, { 2, SG_TRANSPORT_CE, 100, false, false },
    { 2, SG_TRANSPORT_NCCL, 0, true, false },  { 2, SG_TRANSPORT_CE, 0, true, false },
  };
  for (size_t i = 0; i < G_N_ELEMENTS (forms); i++) {
    SgGraph *g = gather_graph ();
    rewrite_one (g, &forms[i]);
    ck_assert_int_eq (count_kind (g, SG_OP_COLLECTIVE_PERMUTE), 1);
    /* the ring's chunks reassembled (regather keeps the all_gather) */
    ck_assert_int_eq (count_kind (g, SG_OP_ALL_GATHER), forms[i].regather ? 1 : 0);
    ck_assert_int_eq (count_kind (g, SG_OP_RANK_ROLL), forms[i].regather ? 2 : 3);
    ck_assert_int_eq (count_kind (g, SG_OP_MM), 2 * 2 + 1);
    g_autofree char *r = replaced (g);
    ck_assert_str_eq (r, forms[i].regather ? "y1 v y2" : "ag ag_w y1 v y2");
    for (SgNodeId v = 0; v < g->n_nodes; v++)
      if (g->nodes[v].kind == SG_OP_MM && g->nodes[v].sm_count)
        ck_assert_int_eq (g->nodes[v].sm_count, forms[i].sm_count);
    sg_graph_free (g);
  }
  /* a reduce_scatter of k - 1 steps, one mm per leaf and step, summed
   * around the ring or where each partial arrives (shift s at step s) */
  for (int k = 2; k <= 4; k += 2)
    for (int direct = 0; direct < 2; direct++) {
      SgGraph *g = reduce_graph (k, 8, 6, 5, "float32");
      const SgSiteForm f = { k, SG_TRANSPORT_NCCL, 0, false, direct };
      rewrite_one (g, &f);
      ck_assert_int_eq (count_kind (g, SG_OP_COLLECTIVE_PERMUTE), k - 1);
      ck_assert_int_eq (count_kind (g, SG_OP_REDUCE_SCATTER), 0);
      ck_assert_int_eq (count_kind (g, SG_OP_MM), 2 * k);
      ck_assert_int_eq (count_kind (g, SG_OP_RANK_ROLL), 2);
      g_autofree char *r = replaced (g);
      ck_assert_str_eq (r, "rs rs_w p q pq");
      for (SgNodeId v = 0; v < g->n_nodes; v++) {
        SgPermute pm;
        if (g->nodes[v].kind != SG_OP_COLLECTIVE_PERMUTE)
          continue;
        ck_assert (sg_node_permute (g, v, &pm, NULL));
        const int32_t step = g->nodes[v].name[strlen (g->nodes[v].name) - 1] - '0';
        ck_assert_int_eq (pm.pairs[1], direct ? step % k : 1); /* rank 0 sends to */
        sg_permute_clear (&pm);
      }
      sg_graph_free (g);
    }
}
END_TEST

START_TEST (all_reduce_becomes_row_chunks)
{
  SgGraph *g = all_reduce_graph (8);
  const SgSiteForm f = { 4, SG_TRANSPORT_NCCL, 0, false, false };
  rewrite_one (g, &f);
  ck_assert_int_eq (count_kind (g, SG_OP_ALL_REDUCE), 4);
  ck_assert_int_eq (count_kind (g, SG_OP_MM), 4);
  ck_assert_int_eq (count_kind (g, SG_OP_CAT), 1);
  ck_assert_int_eq (count_kind (g, SG_OP_COLLECTIVE_PERMUTE), 0);
  sg_graph_free (g);
}
END_TEST

/* The bucket pass would merge an all_reduce site's row chunks back into
 * one collective (small chunks: each pays NCCL's latency); a chunk
 * (SG_CHUNK_KWARG, naming its site) is no bucket member. */
START_TEST (bucketing_leaves_the_chunks_apart)
{
  SgGraph *g = all_reduce_graph (8);
  estimate (g);
  run_pass (g, SG_DECOMPOSE_ALL);
  const int32_t chunks = count_kind (g, SG_OP_ALL_REDUCE);
  ck_assert_int_ge (chunks, 2);
  for (SgNodeId v = 0; v < g->n_nodes; v++)
    if (g->nodes[v].kind == SG_OP_ALL_REDUCE) {
      const SgArg *site = sg_node_kwarg (g, v, SG_CHUNK_KWARG);
      ck_assert (site && sg_arg_str (site));
      ck_assert_str_eq (sg_arg_str (site), "c");
    }
  SgConfig cfg;
  sg_config_init (&cfg);
  GError *error = NULL;
  ck_assert_msg (sg_schedule_reorder (g, &cfg, &error), "%s", error ? error->message : "");
  ck_assert_msg (sg_bucket_pass (g, &cfg, &error), "%s", error ? error->message : "");
  validate (g, "after bucketing");
  ck_assert_int_eq (count_kind (g, SG_OP_ALL_REDUCE), chunks);
  ck_assert_int_eq (count_kind (g, SG_OP_BUCKET_PACK), 0);
  sg_graph_free (g);
}
END_TEST

START_TEST (mode_off_leaves_the_graph_as_it_was)
{
  SgGraph *g = reduce_graph (2, 8192, 4096, 4096, "bfloat16");
  estimate (g);
  g_autofree char *before = dump_text (g);
  const SgDecomposeStats *st = run_pass (g, SG_DECOMPOSE_OFF);
  g_autofree char *after = dump_text (g);
  ck_assert_str_eq (before, after);
  ck_assert_int_eq (st->decomposed, 0);
  ck_assert_int_eq (st->sites[0].reason, SG_SITE_OFF);
  ck_assert (!st->judged);
  sg_graph_free (g);
}
END_TEST

/* A lone reduce_scatter of a large GEMM is exposed whole: the ring hides
 * it behind the second chunk (the model says so, and the whole graph
 * confirms); at tiny sizes every chunk GEMM pays the launch floor and the
 * site is left. */
START_TEST (choice_follows_the_simulator)
{
  SgGraph *g = reduce_graph (2, 8192, 4096, 4096, "bfloat16");
  estimate (g);
  const SgDecomposeStats *st = run_pass (g, SG_DECOMPOSE_AUTO);
  ck_assert_int_eq (st->decomposed, 1);
  ck_assert_int_eq (st->sites[0].reason, SG_SITE_DECOMPOSED);
  ck_assert (st->sites[0].gain_us > 1.0);
  ck_assert (st->step_after_us < st->step_before_us);
  ck_assert (st->exposed_after_us < st->exposed_before_us);
  ck_assert_int_eq (count_kind (g, SG_OP_REDUCE_SCATTER), 0);
  sg_graph_free (g);

  g = reduce_graph (2, 64, 64, 64, "bfloat16");
  estimate (g);
  g_autofree char *before = dump_text (g);
  st = run_pass (g, SG_DECOMPOSE_AUTO);
  ck_assert_int_eq (st->decomposed, 0);
  ck_assert_int_eq (st->sites[0].reason, SG_SITE_NO_GAIN);
  ck_assert (st->sites[0].gain_us <= 1.0);
  g_autofree char *after = dump_text (g);
  ck_assert_str_eq (before, after);
  /* all takes it anyway, and the report says what that predicts */
  st = run_pass (g, SG_DECOMPOSE_ALL);
  ck_assert_int_eq (st->decomposed, 1);
  ck_assert (st->step_after_us > st->step_before_us);
  sg_graph_free (g);
}
END_TEST

static SgGraph *
load_sample (const char *name)
{
  g_autofree char *path = g_build_filename (data_dir, name, NULL);
  GError *error = NULL;
  SgGraph *g = sg_graph_load (path, &error);
  ck_assert_msg (g, "%s", error ? error->message : "");
  return g;
}

static char *
report_text (const SgGraph *g)
{
  cJSON *o = sg_decompose_report (g);
  char *s = cJSON_PrintUnformatted (o);
  cJSON_Delete (o);
  return s;
}

START_TEST (the_pass_is_deterministic)
{
  for (int mode = SG_DECOMPOSE_AUTO; mode <= SG_DECOMPOSE_ALL_GATHER; mode++) {
    if (mode == SG_DECOMPOSE_OFF)
      continue;
    SgGraph *a = load_sample ("w2_tp2_L2_h1024.json"), *b = load_sample ("w2_tp2_L2_h1024.json");
    estimate (a);
    estimate (b);
    run_pass (a, mode);
    run_pass (b, mode);
    g_autofree char *da = dump_text (a), *db = dump_text (b);
    ck_assert_str_eq (da, db);
    char *ra = report_text (a), *rb = report_text (b);
    ck_assert_str_eq (ra, rb);
    free (ra);
    free (rb);
    sg_graph_free (a);
    sg_graph_free (b);
  }
}
END_TEST

/* The pass in @mode, then the scheduler, the validator and the graph
 * format's round trip; returns the sites decomposed. */
static int32_t
pass_schedule_roundtrip (SgGraph *g, SgDecomposeMode mode, const char *what)
{
  estimate (g);
  const SgDecomposeStats *st = run_pass (g, mode);
  SgConfig cfg;
  sg_config_init (&cfg);
  GError *error = NULL;
  ck_assert_msg (sg_schedule_reorder (g, &cfg, &error), "%s: %s", what,
                 error ? error->message : "");
  validate (g, what);
  cJSON *j = sg_graph_to_json (g);
  char *text = cJSON_PrintUnformatted (j);
  cJSON_Delete (j);
  SgGraph *back = sg_graph_load_data (text, strlen (text), what, &error);
  ck_assert_msg (back, "%s: the written graph does not load: %s", what,
                 error ? error->message : "");
  ck_assert_int_eq (back->n_nodes, g->n_nodes);
  sg_graph_free (back);
  free (text);
  return st->decomposed;
}

START_TEST (samples_stay_valid_after_the_pass)
{
  const char *samples[] = { "w2_tp2_L2_h1024.json", "w2_tiny_tp2_L2_h256.json",
                            "dev_fsdp2_tp4_L2_h1024.json" };
  for (size_t i = 0; i < G_N_ELEMENTS (samples); i++)
    for (int mode = SG_DECOMPOSE_AUTO; mode <= SG_DECOMPOSE_ALL_GATHER; mode++) {
      SgGraph *g = load_sample (samples[i]);
      g_autofree char *what = g_strdup_printf ("%s, mode %s", samples[i],
                                               sg_decompose_mode_name (mode));
      int32_t d = pass_schedule_roundtrip (g, mode, what);
      if (mode == SG_DECOMPOSE_ALL || mode == SG_DECOMPOSE_ALL_GATHER)
        ck_assert_msg (d > 0, "%s: nothing decomposed", what);
      sg_graph_free (g);
    }
}
END_TEST

#ifdef HAVE_GRAPHGEN
static SgGraph *
generated_layers (int64_t layers, int64_t dp, int64_t tp, GgTpMode mode, int64_t hidden,
                  int64_t seq)
{
  GgConfig gc;
  gg_config_init (&gc);
  gc.layers = layers, gc.dp = dp, gc.tp = tp, gc.world = 0, gc.tp_mode = mode;
  gc.hidden = hidden, gc.ffn = 4 * hidden, gc.heads = 8, gc.seq = seq;
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream (&text, &len);
  GError *error = NULL;
  ck_assert_msg (gg_write (&gc, f, NULL, &error), "%s", error ? error->message : "");
  fclose (f);
  SgGraph *g = sg_graph_load_data (text, len, "graphgen", &error);
  free (text);
  ck_assert_msg (g, "%s", error ? error->message : "");
  return g;
}

static SgGraph *
generated (int64_t dp, int64_t tp, GgTpMode mode, int64_t hidden, int64_t seq)
{
  return generated_layers (2, dp, tp, mode, hidden, seq);
}

/* Every layer's sites fall in the classes of the first (the judge prices
 * a class once): more layers, as many classes; each class's sites the
 * same collective kind. */
START_TEST (sites_of_every_layer_share_their_classes)
{
  int32_t classes[2];
  for (int i = 0; i < 2; i++) {
    SgGraph *g = generated_layers (i ? 6 : 3, 2, 4, GG_TP_SP, 512, 512);
    sg_graph_fill_users (g);
    int32_t n = 0;
    SgSite *sites = sg_sites_find (g, &n);
    g_autofree int32_t *cls = sg_sites_classes (g, sites, n, &classes[i]);
    g_autofree int32_t *kind = g_new (int32_t, (size_t)n + 1);
    for (int32_t c = 0; c < classes[i]; c++)
      kind[c] = -1;
    for (int32_t k = 0; k < n; k++) {
      if (cls[k] < 0) {
        ck_assert_int_ne (sites[k].reason, SG_SITE_DECOMPOSED);
        continue;
      }
      ck_assert (kind[cls[k]] < 0 || kind[cls[k]] == (int32_t)sites[k].kind);
      kind[cls[k]] = sites[k].kind;
    }
    sg_sites_free (sites, n);
    sg_graph_free (g);
  }
  ck_assert_int_gt (classes[0], 0);
  ck_assert_int_eq (classes[0], classes[1]);
}
END_TEST

START_TEST (generated_tp_graphs_stay_valid_after_the_pass)
{
  const struct {
    int64_t dp, tp;
    GgTpMode mode;
  } cases[] = { { 1, 2, GG_TP_SP }, { 1, 4, GG_TP_SP }, { 2, 4, GG_TP_SP },
                { 1, 2, GG_TP_ALLREDUCE }, { 2, 4, GG_TP_ALLREDUCE } };
  for (size_t i = 0; i < G_N_ELEMENTS (cases); i++)
    for (int mode = SG_DECOMPOSE_AUTO; mode <= SG_DECOMPOSE_ALL_GATHER; mode++) {
      SgGraph *g = generated (cases[i].dp, cases[i].tp, cases[i].mode, 256, 256);
      g_autofree char *what = g_strdup_printf ("graphgen dp %d tp %d %s, mode %s",
                                               (int)cases[i].dp, (int)cases[i].tp,
                                               cases[i].mode == GG_TP_SP ? "sp" : "allreduce",
                                               sg_decompose_mode_name (mode));
      int32_t d = pass_schedule_roundtrip (g, mode, what);
      if (mode == SG_DECOMPOSE_ALL || (mode == SG_DECOMPOSE_ALL_GATHER && cases[i].mode == GG_TP_SP))
        ck_assert_msg (d > 0, "%s: nothing decomposed", what);
      sg_graph_free (g);
    }
}
END_TEST

/* In auto mode every candidate gets a bound on what a form could save,
 * from the cost model alone; no priced form ever saves more than its
 * site's bound, and where no bound passes 1 us nothing is priced or
 * simulated. */
START_TEST (the_gain_bound_holds_and_spares_the_simulation)
{
  const struct {
    int64_t dp, tp;
    GgTpMode mode;
    int64_t hidden, seq;
  } cases[] = { { 1, 2, GG_TP_SP, 4096, 8192 }, { 2, 4, GG_TP_SP, 4096, 8192 },
                { 1, 2, GG_TP_ALLREDUCE, 2048, 4096 }, { 1, 2, GG_TP_SP, 1024, 2048 } };
  for (size_t i = 0; i < G_N_ELEMENTS (cases); i++) {
    SgGraph *g = generated (cases[i].dp, cases[i].tp, cases[i].mode, cases[i].hidden,
                            cases[i].seq);
    estimate (g);
    const SgDecomposeStats *st = run_pass (g, SG_DECOMPOSE_AUTO);
    int32_t priced = 0;
    for (int32_t k = 0; k < st->n_sites; k++) {
      const SgSiteInfo *x = &st->sites[k];
      if (x->reason != SG_SITE_DECOMPOSED && x->reason < SG_SITE_OFF)
        continue; /* not a site */
      ck_assert (isfinite (x->bound_us));
      if (x->form.chunks == 0) {
        ck_assert_int_eq (x->reason, SG_SITE_NO_GAIN);
        ck_assert (x->bound_us <= 1.0);
        continue;
      }
      priced++;
      ck_assert_msg (x->gain_us <= x->bound_us + 1e-6, "case %zu, %s: gain %.3f over bound %.3f",
                     i, x->name, x->gain_us, x->bound_us);
    }
    ck_assert_msg (priced > 0, "case %zu: nothing priced", i);
    sg_graph_free (g);
  }
  /* a small site: the chunk GEMMs' launch floors exceed all it could hide */
  SgGraph *g = reduce_graph (2, 64, 64, 64, "bfloat16");
  estimate (g);
  const SgDecomposeStats *st = run_pass (g, SG_DECOMPOSE_AUTO);
  ck_assert_int_eq (st->sites[0].reason, SG_SITE_NO_GAIN);
  ck_assert_int_eq (st->sites[0].form.chunks, 0);
  ck_assert (st->sites[0].bound_us <= 1.0);
  ck_assert (!st->judged);
  ck_assert_int_eq (st->confirm_rounds, 0);
  sg_graph_free (g);
}
END_TEST

/* The pass on pools of 1, 2, 3 and 8 threads finds, judges and rewrites
 * as on the calling thread alone: the same graph and the same report, on
 * a graph of several ranges of nodes and tasks of sites, in every mode. */
START_TEST (the_pass_is_the_same_on_pools_of_any_size)
{
  static const int32_t sizes[] = { 1, 2, 3, 8 };
  for (int mode = SG_DECOMPOSE_AUTO; mode <= SG_DECOMPOSE_ALL_GATHER; mode++) {
    if (mode == SG_DECOMPOSE_OFF)
      continue;
    SgGraph *a = generated_layers (200, 2, 4, GG_TP_SP, 1024, 1024);
    ck_assert_int_gt (a->n_nodes, 2 * 16384);
    estimate (a);
    run_pass (a, mode);
    const SgDecomposeStats *st = sg_decompose_stats (a);
    ck_assert_int_gt (st->n_sites, 2 * 1024);
    ck_assert (mode == SG_DECOMPOSE_AUTO || st->decomposed > 0);
    g_autofree char *da = dump_text (a);
    char *ra = report_text (a);
    for (size_t k = 0; k < G_N_ELEMENTS (sizes); k++) {
      SgGraph *b = generated_layers (200, 2, 4, GG_TP_SP, 1024, 1024);
      estimate (b);
      SgConfig cfg;
      sg_config_init (&cfg);
      cfg.decompose = mode;
      cfg.pool = sg_pool_new (sizes[k]);
      GError *error = NULL;
      ck_assert_msg (sg_decompose_pass (b, &cfg, &error), "%s", error ? error->message : "");
      sg_pool_free (cfg.pool);
      g_autofree char *db = dump_text (b);
      char *rb = report_text (b);
      ck_assert_msg (strcmp (da, db) == 0, "mode %d, %d threads: another graph", mode, sizes[k]);
      ck_assert_str_eq (ra, rb);
      free (rb);
      sg_graph_free (b);
    }
    free (ra);
    sg_graph_free (a);
  }
}
END_TEST

/* At H = 4096 and S = 8192 over TP 2 the model decomposes reduce_scatter
 * and all_gather sites; after scheduling, each ring step runs beside the
 * chunk GEMMs of the step before: no permute is fully exposed, and the
 * exposure left is a fraction of the undecomposed graph's. */
START_TEST (ring_steps_run_beside_the_chunk_gemms)
{
  SgGraph *g = generated (1, 2, GG_TP_SP, 4096, 8192);
  estimate (g);
  const SgDecomposeStats *st = run_pass (g, SG_DECOMPOSE_AUTO);
  ck_assert_int_gt (st->decomposed, 0);
  SgConfig cfg;
  sg_config_init (&cfg);
  GError *error = NULL;
  ck_assert (sg_schedule_reorder (g, &cfg, &error));
  SgSimResult r;
  ck_assert (sg_simulate (g, NULL, &r, &error));
  int32_t permutes = 0;
  for (int32_t i = 0; i < r.n_rows; i++) {
    if (g->nodes[r.rows[i].node].kind != SG_OP_COLLECTIVE_PERMUTE)
      continue;
    permutes++;
    ck_assert_msg (r.rows[i].status != SG_EXPOSURE_EXPOSED, "%s fully exposed",
                   g->nodes[r.rows[i].node].name);
    ck_assert_msg (r.rows[i].overlap_us > 0.5 * r.rows[i].est_us, "%s: overlap %.1f of %.1f us",
                   g->nodes[r.rows[i].node].name, r.rows[i].overlap_us, r.rows[i].est_us);
  }
  ck_assert_int_gt (permutes, 0);
  ck_assert (r.exposed_us < 0.5 * st->exposed_before_us);
  ck_assert (r.step_us < st->step_before_us);
  sg_sim_result_clear (&r);
  sg_graph_free (g);
}
END_TEST
#endif

static Suite *
decompose_suite (void)
{
  Suite *s = suite_create ("decompose");
  TCase *tc = tcase_create ("core");
  tcase_set_timeout (tc, 240);
  tcase_add_test (tc, all_gather_sites_are_found_through_views);
  tcase_add_test (tc, sums_of_mms_are_reduce_scatter_sites);
  tcase_add_test (tc, sites_are_refused_with_their_reason);
  tcase_add_test (tc, every_form_rewrites_a_valid_graph);
  tcase_add_test (tc, all_reduce_becomes_row_chunks);
  tcase_add_test (tc, bucketing_leaves_the_chunks_apart);
  tcase_add_test (tc, mode_off_leaves_the_graph_as_it_was);
  tcase_add_test (tc, choice_follows_the_simulator);
  tcase_add_test (tc, the_pass_is_deterministic);
  tcase_add_test (tc, samples_stay_valid_after_the_pass);
#ifdef HAVE_GRAPHGEN
  tcase_add_test (tc, generated_tp_graphs_stay_valid_after_the_pass);
  tcase_add_test (tc, ring_steps_run_beside_the_chunk_gemms);
  tcase_add_test (tc, the_gain_bound_holds_and_spares_the_simulation);
  tcase_add_test (tc, sites_of_every_layer_share_their_classes);
  tcase_add_test (tc, the_pass_is_the_same_on_pools_of_any_size);
#endif
  suite_add_tcase (s, tc);
  return s;
}

int
main (int argc, char **argv)
{
  if (argc > 1)
    data_dir = argv[1];
  SRunner *sr = srunner_create (decompose_suite ());
  srunner_run_all (sr, CK_NORMAL);
  const int failed = srunner_ntests_failed (sr);
  srunner_free (sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
