/* test_write.c: sg_graph_to_json (graph/write.c): what it writes loads back
 * into the same graph, for the samples, for a hand-built graph with every
 * optional field, and for a graph the bucketing pass rewrote. */
#include <check.h>
#include <string.h>

#include "bucket.h"
#include "common.h"
#include "estimate.h"

#ifndef SG_TEST_DATA
#error "SG_TEST_DATA must name tests/data"
#endif

static char *
to_text (const SgGraph *g)
{
  cJSON *o = sg_graph_to_json (g);
  char *s = cJSON_PrintUnformatted (o);
  cJSON_Delete (o);
  char *t = g_strdup (s);
  cJSON_free (s);
  return t;
}

/* Writes @g, loads the text (validator included), writes that again: the
 * two texts are equal and the nodes keep their names, order and kinds.
 * Returns the first text. */
static char *
assert_round_trip (const SgGraph *g)
{
  char *text = to_text (g);
  GError *error = NULL;
  g_autoptr (SgGraph) back = sg_graph_load_data (text, strlen (text), "<written>", &error);
  ck_assert_msg (back != NULL, "written graph does not load: %s", error ? error->message : "?");
  g_autofree char *again = to_text (back);
  ck_assert_str_eq (text, again);
  ck_assert_int_eq (back->n_nodes, g->n_nodes);
  for (SgNodeId i = 0; i < g->n_nodes; i++) {
    ck_assert_str_eq (back->nodes[i].name, g->nodes[i].name);
    ck_assert_int_eq (back->nodes[i].kind, g->nodes[i].kind);
    ck_assert_int_eq (back->nodes[i].n_tuple, g->nodes[i].n_tuple);
  }
  return text;
}

/* Every graph of tests/data (the samples; not their peer orders, results or
 * limits files), loaded. */
static GPtrArray *
sample_graphs (void)
{
  GPtrArray *graphs = g_ptr_array_new_with_free_func ((GDestroyNotify)sg_graph_free);
  g_autoptr (GDir) dir = g_dir_open (SG_TEST_DATA, 0, NULL);
  ck_assert_ptr_nonnull (dir);
  g_autoptr (GPtrArray) names = g_ptr_array_new_with_free_func (g_free);
  for (const char *f; (f = g_dir_read_name (dir));)
    if ((g_str_has_prefix (f, "w2_") || g_str_has_prefix (f, "dev_")) && !strstr (f, "peer"))
      g_ptr_array_add (names, g_build_filename (SG_TEST_DATA, f, NULL));
  for (guint i = 0; i < names->len; i++) {
    GError *error = NULL;
    SgGraph *g = sg_graph_load (names->pdata[i], &error);
    ck_assert_msg (g != NULL, "%s", error ? error->message : "?");
    g_ptr_array_add (graphs, g);
  }
  return graphs;
}

START_TEST (written_samples_load_back_the_same)
{
  g_autoptr (GPtrArray) graphs = sample_graphs ();
  ck_assert_uint_ge (graphs->len, 6);
  for (guint i = 0; i < graphs->len; i++) {
    g_autofree char *text = assert_round_trip (graphs->pdata[i]);
    /* groups come with the partition the loader inferred */
    ck_assert_ptr_nonnull (strstr (text, "\"partition\":[["));
    ck_assert_ptr_nonnull (strstr (text, "\"cluster\":{"));
  }
}
END_TEST

START_TEST (written_graph_keeps_tuples_costs_sm_counts_partition_and_big_ints)
{
  const char *text =
      "{\"format\":\"schedgraph.graph\",\"version\":1,\"world_size\":4,\"rank\":1,"
      "\"groups\":{\"g\":{\"ranks\":[1,2],\"partition\":[[0,3],[1,2]]}},"
      "\"description\":\"hand-made\",\"nodes\":["
      "{\"name\":\"x\",\"op\":\"placeholder\",\"target\":\"x\","
      "\"meta\":{\"shape\":[4503599627370497],\"stride\":[1],\"dtype\":\"int8\"}},"
      "{\"name\":\"y\",\"op\":\"placeholder\",\"target\":\"y\","
      "\"meta\":{\"shape\":[4,8],\"stride\":[8,1],\"dtype\":\"float32\"}},"
      "{\"name\":\"ag\",\"op\":\"call_function\","
      "\"target\":\"_c10d_functional.all_gather_into_tensor.default\","
      "\"args\":[{\"node\":\"y\"},2,\"g\"],\"kwargs\":{},"
      "\"meta\":{\"shape\":[8,8],\"dtype\":\"float32\"},\"cost_us\":12.5},"
      "{\"name\":\"w\",\"op\":\"call_function\",\"target\":\"_c10d_functional.wait_tensor.default\","
      "\"args\":[{\"node\":\"ag\"}],\"meta\":{\"shape\":[8,8],\"dtype\":\"float32\"}},"
      "{\"name\":\"mm\",\"op\":\"call_function\",\"target\":\"aten.mm.default\","
      "\"args\":[{\"node\":\"w\"},{\"node\":\"w\"}],\"sm_count\":66,"
      "\"meta\":{\"shape\":[8,8],\"dtype\":\"float32\"}},"
      "{\"name\":\"tu\",\"op\":\"call_function\",\"target\":\"my.op\","
      "\"args\":[{\"node\":\"w\"},[1,{\"k\":null}]],\"kwargs\":{\"f\":0.25},"
      "\"meta\":{\"tuple\":[{\"shape\":[8],\"dtype\":\"bfloat16\"},null]}},"
      "{\"name\":\"gi\",\"op\":\"call_function\",\"target\":\"<built-in function getitem>\","
      "\"args\":[{\"node\":\"tu\"},0],\"meta\":{\"shape\":[8],\"dtype\":\"bfloat16\"}},"
      "{\"name\":\"output\",\"op\":\"output\",\"target\":\"output\","
      "\"args\":[[{\"node\":\"gi\"},{\"node\":\"x\"}]]}]}";
  GError *error = NULL;
  g_autoptr (SgGraph) g = sg_graph_load_data (text, strlen (text), "<test>", &error);
  ck_assert_msg (g != NULL, "%s", error ? error->message : "?");
  g_autofree char *out = assert_round_trip (g);
  ck_assert_ptr_nonnull (strstr (out, "\"rank\":1,"));
  ck_assert_ptr_nonnull (strstr (out, "\"partition\":[[0,3],[1,2]]"));
  ck_assert_ptr_nonnull (strstr (out, "\"shape\":[4503599627370497],\"stride\":[1]"));
  ck_assert_ptr_nonnull (strstr (out, "\"cost_us\":12.5"));
  ck_assert_ptr_nonnull (strstr (out, "\"sm_count\":66"));
  ck_assert_ptr_nonnull (strstr (out, "\"tuple\":[{\"shape\":[8],\"stride\":[1],"
                                      "\"dtype\":\"bfloat16\"},null]"));
  ck_assert_ptr_nonnull (strstr (out, "\"args\":[{\"node\":\"w\"},[1,{\"k\":null}]],"
                                      "\"kwargs\":{\"f\":0.25}"));
  ck_assert_ptr_nonnull (strstr (out, "\"description\":\"hand-made\""));
  ck_assert_ptr_null (strstr (out, "\"cluster\""));
}
END_TEST

START_TEST (ring_ops_load_back_with_their_pairs_and_transport)
{
  g_autoptr (SgGraph) g = tb_new (4);
  tb_group (g, "tp", 4, 0, 1, 2, 3);
  tb_input (g, "x", "float32", 2, (int64_t)8, (int64_t)4);
  tb_permute (g, "p", "x", "tp", "[[0,1],[1,2],[2,3],[3,0]]", "ce");
  tb_wait (g, "p_w", "p");
  tb_rank_roll (g, "roll", "p_w", "tp", 1, -1);
  tb_output (g, 1, "roll");
  assert_valid (g);
  g_autofree char *out = assert_round_trip (g);
  ck_assert_ptr_nonnull (strstr (out, "[[0,1],[1,2],[2,3],[3,0]]"));
  ck_assert_ptr_nonnull (strstr (out, "\"transport\":\"ce\""));
  ck_assert_ptr_nonnull (strstr (out, "\"target\":\"schedgraph.rank_roll\""));
}
END_TEST

START_TEST (bucketed_graph_writes_its_bucket_ops_and_loads_back)
{
  g_autofree char *path = g_build_filename (SG_TEST_DATA, "w2_tiny_fsdp2_L2_h256.json", NULL);
  g_autoptr (SgGraph) g = sg_graph_load (path, NULL);
  ck_assert_ptr_nonnull (g);
  SgConfig cfg;
  sg_config_init (&cfg);
  GError *error = NULL;
  ck_assert_msg (sg_estimate_costs (g, &cfg, &error), "%s", error ? error->message : "?");
  ck_assert_msg (sg_bucket_pass (g, &cfg, &error), "%s", error ? error->message : "?");
  ck_assert_int_lt (sg_bucket_stats (g)->collectives_after, sg_bucket_stats (g)->collectives_before);
  g_autofree char *out = assert_round_trip (g);
  ck_assert_ptr_nonnull (strstr (out, "\"target\":\"schedgraph.bucket_pack\""));
  ck_assert_ptr_nonnull (strstr (out, "\"target\":\"schedgraph.bucket_unpack\""));
  ck_assert_ptr_nonnull (strstr (out, "\"kwargs\":{\"schedgraph_bucket\":["));
}
END_TEST

static Suite *
write_suite (void)
{
  Suite *s = suite_create ("graph-write");
  TCase *t = tcase_create ("write");
  tcase_set_timeout (t, 60);
  tcase_add_test (t, written_samples_load_back_the_same);
  tcase_add_test (t, written_graph_keeps_tuples_costs_sm_counts_partition_and_big_ints);
  tcase_add_test (t, ring_ops_load_back_with_their_pairs_and_transport);
  tcase_add_test (t, bucketed_graph_writes_its_bucket_ops_and_loads_back);
  suite_add_tcase (s, t);
  return s;
}

int
main (void)
{
  SRunner *sr = srunner_create (write_suite ());
  srunner_run_all (sr, CK_NORMAL);
  int failed = srunner_ntests_failed (sr);
  srunner_free (sr);
  return failed ? 1 : 0;
}
