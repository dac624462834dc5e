/* test_modes.c: what the bucket pass optimises and the per-layer mode.
 *
 * The objective is the predicted step (issue 14): a merge that would
 * lengthen it is refused, one that shortens it is kept, including issue
 * 15's textbook case of three small ready all_gathers; merging pays where
 * the model prices a collective's fixed cost, more so across machines;
 * --bucket-mode per-layer finds FSDP2's buckets (one per layer and kind)
 * from the graph's structure, whatever the node names; the automatic mode
 * is never worse than it or than no bucketing on generated FSDP, FSDP x TP
 * and HSDP steps, and FSDP-only steps end with <= 2 collectives per layer
 * + 4 where communication is exposed.
 */
#include <check.h>
#include <math.h>
#include <string.h>

#include "bucket-private.h"
#include "bucket-test.h"
#include "builder.h"

#define I(x) ((int64_t)(x))

static const char *data_dir = "tests/data"; /* argv[1] overrides */

static void
estimate_with (SgGraph *g, SgConfig *cfg, const char *cluster_json)
{
  GError *error = NULL;
  sg_config_init (cfg);
  if (cluster_json) {
    g_free (g->cluster_json);
    g->cluster_json = g_strdup (cluster_json);
  }
  ck_assert_msg (sg_estimate_costs (g, cfg, &error), "%s", error ? error->message : "");
}

static const SgBucketStats *
run (SgGraph *g, const SgConfig *cfg)
{
  GError *error = NULL;
  ck_assert_msg (sg_bucket_pass (g, cfg, &error), "%s", error ? error->message : "");
  ck_assert_msg (sg_graph_validate (g, &error), "%s", error ? error->message : "");
  return sg_bucket_stats (g);
}

/* Issue 15's case: three small all_gathers of one group whose inputs are
 * ready (graph inputs), each needed by a matmul after a short compute, on
 * a contention-free cluster where copies cost nothing (no launch, no
 * floor, a very fast memory). Three calls in a row cannot all hide behind
 * the compute; one call can. */
START_TEST (three_ready_gathers_merge_when_copies_cost_nothing)
{
  g_autoptr (SgGraph) g = tb_new (2);
  tb_group (g, "0", 2, 0, 1);
  tb_input (g, "x", "bfloat16", 2, I (64), I (64));
  const char *w[] = { "w0", "w1", "w2" }, *ag[] = { "ag0", "ag1", "ag2" },
             *wt[] = { "ag0_w", "ag1_w", "ag2_w" }, *mm[] = { "m0", "m1", "m2" };
  for (int i = 0; i < 3; i++) {
    tb_input (g, w[i], "bfloat16", 2, I (32), I (64));
    tb_all_gather (g, ag[i], w[i], "0");
  }
  tb_cost (g, tb_pointwise (g, "busy", "aten.neg.default", "x", NULL), 40.0);
  const char *prev = "busy";
  for (int i = 0; i < 3; i++) {
    tb_wait (g, wt[i], ag[i]);
    tb_cost (g, tb_mm (g, mm[i], prev, wt[i]), 10.0);
    prev = mm[i];
  }
  /* live throughout: the bucket's buffer stays well within 5% of the peak */
  tb_input (g, "state", "bfloat16", 2, I (1024), I (1024));
  tb_output (g, 2, prev, "state");
  SgConfig cfg;
  estimate_with (g, &cfg,
                 "{\"comm_start_wait\": 0, \"comm_slowdown\": 1, \"compute_slowdown\": 1,"
                 " \"reduce_slowdown\": 1, \"kernel_launch_us\": 0, \"kernel_floor_us\": 0,"
                 " \"hbm_GBps\": 1e7}");
  const SgBucketStats *st = run (g, &cfg);
  ck_assert_int_eq (st->collectives_before, 3);
  ck_assert_int_eq (st->collectives_after, 1);
  ck_assert_int_eq (st->infos[0].n_members, 3);
  ck_assert_int_eq (st->infos[0].pack_copy, SG_COPY_ELIDED);
  ck_assert (st->step_after_us < st->step_before_us - 1.0);
  ck_assert (st->exposed_after_us < st->exposed_before_us);
}
END_TEST

/* Two 1 MiB shards gathered over two ranks behind 100 us of compute. On
 * one machine both calls end within it, so a flat bucket would only add
 * its unpack copies; across two machines (one NIC per call, network
 * latency) the second is exposed, and one call of both hides. (Flat
 * buckets: a grouped one adds no copy, test_pass.c.) */
START_TEST (a_cluster_of_several_machines_merges_what_one_keeps_apart)
{
  const char *one = "{\"gpus_per_node\": 2, \"comm_start_wait\": 0}";
  const char *two = "{\"gpus_per_node\": 1, \"comm_start_wait\": 0}";
  g_autoptr (SgGraph) a = bt_two_gathers (100.0);
  g_autoptr (SgGraph) b = bt_two_gathers (100.0);
  SgConfig ca, cb;
  estimate_with (a, &ca, one);
  estimate_with (b, &cb, two);
  ca.bucket_lowering = cb.bucket_lowering = SG_BUCKET_LOWERING_FLAT;
  const SgBucketStats *sa = run (a, &ca), *sb = run (b, &cb);
  ck_assert_double_eq (sa->exposed_before_us, 0.0);
  ck_assert_int_eq (sa->collectives_after, 2);
  ck_assert_int_ge (sa->refused_step, 1);
  ck_assert_double_eq (sa->step_after_us, sa->step_before_us);
  ck_assert (sb->exposed_before_us > 0.0);
  ck_assert_int_eq (sb->collectives_after, 1);
  ck_assert (sb->step_after_us < sb->step_before_us);
}
END_TEST

/* The model prices what a merge saves: the fixed cost of a call (~31 us
 * on 2x H200, more across machines) and the bus bandwidth small calls do
 * not reach. */
START_TEST (merging_gains_are_priced)
{
  g_autoptr (SgGraph) g = bt_two_gathers (100.0);
  SgConfig cfg;
  estimate_with (g, &cfg, NULL);
  const SgCostModel *cm = sg_graph_cost_model (g);
  SgCostSource src;
  uint64_t kib64 = 64 << 10, mib16 = 16 << 20, gib = (uint64_t)1 << 30;
#define T(bytes, ranks, nodes)                                                                \
  sg_cost_collective_us (cm, SG_OP_ALL_GATHER, SG_DTYPE_BF16, (bytes), (ranks), (nodes), &src)
  double small = T (2 * kib64, 2, 1);
  ck_assert (small > 25.0 && small < 40.0); /* the ~31 us floor */
  /* two small calls cost about two floors, their merge one */
  ck_assert (2 * small - T (4 * kib64, 2, 1) > 25.0);
  /* bus bandwidth (bytes x (n-1)/n over time) grows with the size */
  double bw16 = (double)mib16 / T (2 * mib16, 2, 1), bw1g = (double)gib / T (2 * gib, 2, 1);
  ck_assert (bw16 < 0.75 * bw1g);
  /* across machines (16 ranks, 2 or 8 per machine) a call costs more,
   * and so does every call a bucket saves */
  double saved1 = 2 * T (16 * kib64, 16, 2) - T (32 * kib64, 16, 2);
  double saved8 = 2 * T (16 * kib64, 16, 8) - T (32 * kib64, 16, 8);
  ck_assert (saved8 > saved1);
#undef T
}
END_TEST

#ifdef HAVE_GRAPHGEN
static GgConfig
config (int64_t layers, int64_t hidden, int64_t dp, int64_t tp, int64_t world)
{
  GgConfig gc;
  gg_config_init (&gc);
  gc.layers = layers;
  gc.hidden = hidden;
  gc.ffn = hidden * 11 / 4;
  gc.heads = MAX (hidden / 64, 1);
  gc.seq = 2 * hidden;
  gc.dp = dp, gc.tp = tp, gc.world = world;
  return gc;
}

static SgGraph *
scheduled (const GgConfig *gc, SgConfig *cfg, SgBucketMode mode)
{
  SgGraph *g = bt_generated (gc);
  estimate_with (g, cfg, NULL);
  GError *error = NULL;
  ck_assert_msg (sg_schedule_reorder (g, cfg, &error), "%s", error ? error->message : "");
  cfg->bucket_mode = mode;
  return g;
}

/* FSDP2's buckets: one all_gather and one reduce_scatter per block (HSDP:
 * plus one all_reduce), every parameter of the block in each. */
START_TEST (per_layer_mode_forms_one_bucket_per_layer_and_kind)
{
  for (int hsdp = 0; hsdp < 2; hsdp++) {
    GgConfig gc = config (3, 256, 2, 1, hsdp ? 4 : 2);
    SgConfig cfg;
    g_autoptr (SgGraph) g = scheduled (&gc, &cfg, SG_BUCKET_MODE_PER_LAYER);
    const SgBucketStats *st = run (g, &cfg);
    ck_assert_int_eq (st->layers, 3);
    ck_assert_int_eq (st->source, SG_BUCKET_FROM_PER_LAYER);
    ck_assert_int_eq (st->collectives_after, (hsdp ? 3 : 2) * 3);
    for (int32_t i = 0; i < st->n_infos; i++) {
      ck_assert_int_eq (st->infos[i].n_members, 9);
      /* parameter shards seeded into the gather's input; reduce_scatter
       * results and the all_reduce over them are views */
      if (st->infos[i].kind == SG_OP_ALL_GATHER)
        ck_assert_int_eq (st->infos[i].pack_copy, SG_COPY_ELIDED);
      if (st->infos[i].kind == SG_OP_REDUCE_SCATTER)
        ck_assert_int_eq (st->infos[i].unpack_copy, SG_COPY_ELIDED);
      if (st->infos[i].kind == SG_OP_ALL_REDUCE)
        ck_assert (st->infos[i].pack_copy == SG_COPY_ELIDED
                   && st->infos[i].unpack_copy == SG_COPY_ELIDED);
    }
  }
}
END_TEST

/* Renames every node of @text to an opaque, unrelated name ("v" + a
 * scrambled number), references included. */
static void
rename_refs (cJSON *v, GHashTable *map)
{
  if (cJSON_IsObject (v)) {
    cJSON *ref = cJSON_GetObjectItemCaseSensitive (v, "node");
    if (cJSON_IsString (ref) && cJSON_GetArraySize (v) == 1) {
      cJSON_SetValuestring (ref, g_hash_table_lookup (map, ref->valuestring));
      return;
    }
  }
  cJSON *e;
  cJSON_ArrayForEach (e, v) rename_refs (e, map);
}

static SgGraph *
renamed (const GgConfig *gc)
{
  size_t len;
  char *text = bt_generate_text (gc, &len);
  cJSON *root = cJSON_ParseWithLength (text, len);
  free (text);
  cJSON *nodes = cJSON_GetObjectItem (root, "nodes");
  g_autoptr (GHashTable) map = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  int32_t n = cJSON_GetArraySize (nodes), i = 0;
  cJSON *nd;
  cJSON_ArrayForEach (nd, nodes)
  {
    cJSON *name = cJSON_GetObjectItem (nd, "name");
    char *fresh = g_strdup_printf ("v%d", (int)(((int64_t)i++ * 7919 + 13) % (n + 101)));
    g_hash_table_insert (map, g_strdup (name->valuestring), g_strdup (fresh));
    cJSON_SetValuestring (name, fresh);
    g_free (fresh);
  }
  cJSON_ArrayForEach (nd, nodes)
  {
    rename_refs (cJSON_GetObjectItem (nd, "args"), map);
    rename_refs (cJSON_GetObjectItem (nd, "kwargs"), map);
  }
  char *out = cJSON_PrintUnformatted (root);
  cJSON_Delete (root);
  GError *error = NULL;
  SgGraph *g = sg_graph_load_data (out, strlen (out), "renamed", &error);
  cJSON_free (out);
  ck_assert_msg (g, "%s", error ? error->message : "");
  return g;
}

START_TEST (per_layer_buckets_do_not_depend_on_names)
{
  GgConfig gc = config (4, 256, 2, 2, 8); /* HSDP x TP: three groups */
  SgConfig ca, cb;
  g_autoptr (SgGraph) a = scheduled (&gc, &ca, SG_BUCKET_MODE_PER_LAYER);
  g_autoptr (SgGraph) b = renamed (&gc);
  estimate_with (b, &cb, NULL);
  GError *error = NULL;
  ck_assert (sg_schedule_reorder (b, &cb, &error));
  cb.bucket_mode = SG_BUCKET_MODE_PER_LAYER;
  const SgBucketStats *sa = run (a, &ca), *sb = run (b, &cb);
  ck_assert_int_eq (sa->layers, 4);
  ck_assert_int_eq (sb->layers, 4);
  ck_assert_int_eq (sa->n_infos, sb->n_infos);
  for (int32_t i = 0; i < sa->n_infos; i++) {
    ck_assert_int_eq (sa->infos[i].kind, sb->infos[i].kind);
    ck_assert_int_eq (sa->infos[i].n_members, sb->infos[i].n_members);
    ck_assert_uint_eq (sa->infos[i].bytes, sb->infos[i].bytes);
  }
  ck_assert_double_eq (sa->step_after_us, sb->step_after_us);
}
END_TEST

/* The bar on generated steps: auto is never worse than no bucketing nor
 * the per-layer mode; FSDP-only steps whose communication is exposed end
 * with <= 2 collectives per layer + 4. */
START_TEST (auto_mode_meets_the_bar_on_generated_steps)
{
  struct {
    int64_t layers, dp, tp, world;
  } cases[] = { { 8, 2, 1, 2 }, { 8, 8, 1, 8 }, { 8, 2, 4, 8 }, { 8, 2, 1, 8 }, { 12, 4, 2, 8 } };
  for (size_t c = 0; c < G_N_ELEMENTS (cases); c++) {
    GgConfig gc = config (cases[c].layers, 256, cases[c].dp, cases[c].tp, cases[c].world);
    SgConfig cfg;
    g_autoptr (SgGraph) g = scheduled (&gc, &cfg, SG_BUCKET_MODE_AUTO);
    const SgBucketStats *st = run (g, &cfg);
    ck_assert_int_eq (st->layers, cases[c].layers);
    ck_assert (st->step_after_us <= st->step_before_us + SG_BUCKET_TIE_US);
    ck_assert_msg (st->step_after_us <= st->per_layer_step_us + SG_BUCKET_TIE_US, "case %zu: %.3f > %.3f",
                   c, st->step_after_us, st->per_layer_step_us);
    if (cases[c].tp == 1 && cases[c].world == cases[c].dp)
      ck_assert_int_le (st->collectives_after, 2 * cases[c].layers + 4);
  }
}
END_TEST
#endif

START_TEST (samples_find_their_two_layers)
{
  const char *fsdp[] = { "w2_tiny_fsdp2_L2_h256", "w2_fsdp2_L2_h1024", "dev_fsdp8_L2_h1024",
                         "dev_fsdp2_tp4_L2_h1024" };
  for (size_t i = 0; i < G_N_ELEMENTS (fsdp); i++) {
    g_autofree char *file = g_strconcat (fsdp[i], ".json", NULL);
    g_autofree char *path = g_build_filename (data_dir, file, NULL);
    GError *error = NULL;
    g_autoptr (SgGraph) g = sg_graph_load (path, &error);
    ck_assert_msg (g, "%s", error ? error->message : "");
    SgConfig cfg;
    estimate_with (g, &cfg, NULL);
    ck_assert (sg_schedule_reorder (g, &cfg, &error));
    cfg.bucket_mode = SG_BUCKET_MODE_PER_LAYER;
    const SgBucketStats *st = run (g, &cfg);
    ck_assert_int_eq (st->layers, 2);
    /* one gather and one reduce_scatter of 9 parameters per layer */
    int32_t dp_buckets = 0;
    for (int32_t b = 0; b < st->n_infos; b++)
      dp_buckets += st->infos[b].n_members == 9;
    ck_assert_int_eq (dp_buckets, 4);
  }
}
END_TEST

static Suite *
modes_suite (void)
{
  Suite *s = suite_create ("bucket_modes");
  TCase *tc = tcase_create ("modes");
  tcase_set_timeout (tc, 120);
  tcase_add_test (tc, three_ready_gathers_merge_when_copies_cost_nothing);
  tcase_add_test (tc, a_cluster_of_several_machines_merges_what_one_keeps_apart);
  tcase_add_test (tc, merging_gains_are_priced);
  tcase_add_test (tc, samples_find_their_two_layers);
#ifdef HAVE_GRAPHGEN
  tcase_add_test (tc, per_layer_mode_forms_one_bucket_per_layer_and_kind);
  tcase_add_test (tc, per_layer_buckets_do_not_depend_on_names);
  tcase_add_test (tc, auto_mode_meets_the_bar_on_generated_steps);
#endif
  suite_add_tcase (s, tc);
  return s;
}

int
main (int argc, char **argv)
{
  return bt_main (argc, argv, &data_dir, modes_suite ());
}
