/* test_graph.c: unit tests of graph/: loading the sample graphs, groups and
 * partitions, permute, users, storage roots, peak bytes (with a pool too)
 * and the pass runner (the validator: test_validate.c). Graphs come from
 * tests/builder.h or from JSON text. */
#include <check.h>
#include <string.h>

#include "common.h"

#ifndef SG_TEST_DATA
#error "SG_TEST_DATA must name tests/data"
#endif

/* --- helpers ----------------------------------------------------------------- */

static SgGraph *
load_sample (const char *file)
{
  g_autofree char *path = g_build_filename (SG_TEST_DATA, file, NULL);
  GError *error = NULL;
  SgGraph *g = sg_graph_load (path, &error);
  ck_assert_msg (g != NULL, "%s: %s", file, error ? error->message : "?");
  return g;
}

static GError *
load_text_error (const char *text)
{
  GError *error = NULL;
  SgGraph *g = sg_graph_load_data (text, strlen (text), "<test>", &error);
  ck_assert_msg (g == NULL, "loaded a bad graph: %s", text);
  ck_assert (error != NULL);
  return error;
}

/* --- loading ------------------------------------------------------------------ */

static const struct {
  const char *file;
  int32_t nodes, collectives, world, groups;
} samples[] = {
  { "dev_fsdp8_L2_h1024.json", 382, 36, 8, 1 },
  { "dev_fsdp2_tp4_L2_h1024.json", 414, 52, 8, 2 },
  { "w2_fsdp2_L2_h1024.json", 382, 36, 2, 1 },
  { "w2_tp2_L2_h1024.json", 342, 16, 2, 1 },
  { "w2_tiny_fsdp2_L2_h256.json", 382, 36, 2, 1 },
  { "w2_tiny_tp2_L2_h256.json", 342, 16, 2, 1 },
};

START_TEST (sample_graph_loads_with_its_counts)
{
  g_autoptr (SgGraph) g = load_sample (samples[_i].file);
  ck_assert_int_eq (g->n_nodes, samples[_i].nodes);
  ck_assert_int_eq (g->world_size, samples[_i].world);
  ck_assert_int_eq (g->n_groups, samples[_i].groups);
  int32_t colls = 0, waits = 0;
  for (SgNodeId i = 0; i < g->n_nodes; i++) {
    colls += sg_op_is_collective (g->nodes[i].kind);
    waits += g->nodes[i].kind == SG_OP_WAIT;
    ck_assert (g->nodes[i].kind != SG_OP_UNKNOWN || g->nodes[i].op != SG_NODE_CALL
               || strstr (g->nodes[i].target, "aten.") != NULL);
  }
  ck_assert_int_eq (colls, samples[_i].collectives);
  ck_assert_int_eq (waits, samples[_i].collectives);
  ck_assert_int_eq (g->output, g->n_nodes - 1);
  ck_assert_str_eq (g->nodes[g->output].name, "output");
  assert_valid (g);
}
END_TEST

START_TEST (sample_graph_keeps_args_tuples_and_dtypes)
{
  g_autoptr (SgGraph) g = load_sample ("w2_fsdp2_L2_h1024.json");
  SgNodeId ag = sg_graph_lookup (g, "all_gather_into_tensor");
  ck_assert_int_ge (ag, 0);
  ck_assert_int_eq (g->nodes[ag].kind, SG_OP_ALL_GATHER);
  ck_assert_uint_eq (g->nodes[ag].n_args, 3);
  ck_assert_int_eq (sg_arg_node (g, ag, sg_node_arg (g, ag, 0)), sg_graph_lookup (g, "arg1_1"));
  int64_t size;
  ck_assert (sg_arg_int (sg_node_param (g, ag, SG_PARAM_GROUP_SIZE), &size) && size == 2);
  ck_assert_str_eq (sg_arg_str (sg_node_param (g, ag, SG_PARAM_GROUP_NAME)), "0");
  cJSON *echo = sg_node_args_json (g, ag, false, NULL, NULL);
  char *text = cJSON_PrintUnformatted (echo);
  ck_assert_str_eq (text, "[{\"node\":\"arg1_1\"},2,\"0\"]");
  cJSON_free (text);
  cJSON_Delete (echo);
  ck_assert_int_eq (g->nodes[ag].group, 0);
  ck_assert_int_eq (g->nodes[ag].group_size, 2);
  ck_assert_int_eq (g->nodes[ag].meta.dtype, SG_DTYPE_BF16);
  SgNodeId att = sg_graph_lookup (g, "_scaled_dot_product_cudnn_attention");
  ck_assert_int_eq (g->nodes[att].kind, SG_OP_SDPA_CUDNN);
  ck_assert_uint_eq (g->nodes[att].n_tuple, 9);
  ck_assert_int_eq (g->nodes[att].meta.ndim, -1);
  SgNodeId gi = sg_graph_lookup (g, "getitem");
  ck_assert_int_eq (g->nodes[gi].kind, SG_OP_GETITEM);
  ck_assert_int_eq (g->nodes[gi].getitem_index, 0);
  ck_assert_int_eq (sg_node_storage_root (g, gi), att);
  /* Same interned target string for every node of a kind. */
  SgNodeId ag2 = sg_graph_lookup (g, "all_gather_into_tensor_1");
  ck_assert_ptr_eq (g->nodes[ag].target, g->nodes[ag2].target);
  ck_assert (g->cluster_json == NULL || g->cluster_json[0] == '{');
}
END_TEST

START_TEST (two_d_mesh_groups_infer_their_partitions)
{
  g_autoptr (SgGraph) g = load_sample ("dev_fsdp2_tp4_L2_h1024.json");
  int32_t tp = sg_graph_find_group (g, "1"), dp = sg_graph_find_group (g, "2");
  ck_assert_int_ge (tp, 0);
  ck_assert_int_ge (dp, 0);
  ck_assert_int_eq (g->groups[tp].n_instances, 2);
  ck_assert_int_eq (g->groups[dp].n_instances, 4);
  const int32_t *i5 = sg_group_instance_of (&g->groups[dp], 5);
  ck_assert_int_eq (i5[0], 1);
  ck_assert_int_eq (i5[1], 5);
  const int32_t *t6 = sg_group_instance_of (&g->groups[tp], 6);
  ck_assert_int_eq (t6[0], 4);
  ck_assert_int_eq (t6[3], 7);
  ck_assert_str_eq (g->description ? "yes" : "no", "yes");
  ck_assert_str_eq (g->cluster_json, "{\"gpus_per_node\":8,\"nodes\":1,\"gpu\":\"H100\"}");
}
END_TEST

START_TEST (group_partition_inference_block_stride_and_refusal)
{
  g_autoptr (SgGraph) g = sg_graph_new (8, 0);
  GError *error = NULL;
  int32_t block[] = { 0, 1, 2, 3 }, stride[] = { 0, 2, 4, 6 }, odd[] = { 0, 1, 3 };
  ck_assert_int_eq (sg_graph_add_group (g, "b", block, 4, NULL, 0, &error), 0);
  ck_assert_int_eq (g->groups[0].n_instances, 2);
  ck_assert_int_eq (sg_group_instance_of (&g->groups[0], 6)[0], 4);
  ck_assert_int_eq (sg_graph_add_group (g, "s", stride, 4, NULL, 0, &error), 1);
  ck_assert_int_eq (g->groups[1].n_instances, 2);
  const int32_t *s3 = sg_group_instance_of (&g->groups[1], 3);
  ck_assert_int_eq (s3[0], 1);
  ck_assert_int_eq (s3[3], 7);
  ck_assert_int_eq (sg_graph_add_group (g, "odd", odd, 3, NULL, 0, &error), -1);
  assert_error (error, SG_GRAPH_ERROR_GROUP, "groups.odd.ranks: cannot infer");
  error = NULL;
  int32_t part[] = { 0, 1, 3, 2, 4, 5, 6, 7 }; /* given explicitly, uneven: refused */
  ck_assert_int_eq (sg_graph_add_group (g, "p", odd, 3, part, 2, &error), -1);
  assert_error (error, SG_GRAPH_ERROR_GROUP, "groups.p.partition");
}
END_TEST

static const char explicit_partition[] =
  "{\"format\":\"schedgraph.graph\",\"version\":1,\"world_size\":4,\"rank\":0,"
  "\"groups\":{\"g\":{\"ranks\":[0,3],\"partition\":[[1,2],[0,3]]}},"
  "\"nodes\":[{\"name\":\"a\",\"op\":\"placeholder\",\"target\":\"a\",\"args\":[],\"kwargs\":{},"
  "\"meta\":{\"shape\":[2],\"stride\":[1],\"dtype\":\"float32\"}},"
  "{\"name\":\"output\",\"op\":\"output\",\"target\":\"output\",\"args\":[[{\"node\":\"a\"}]],"
  "\"kwargs\":{}}]}";

START_TEST (explicit_partition_is_read)
{
  GError *error = NULL;
  g_autoptr (SgGraph) g
      = sg_graph_load_data (explicit_partition, strlen (explicit_partition), "<t>", &error);
  ck_assert_msg (g != NULL, "%s", error ? error->message : "?");
  ck_assert_int_eq (g->groups[0].n_instances, 2);
  ck_assert_int_eq (sg_group_instance_of (&g->groups[0], 2)[0], 1);
  ck_assert_int_eq (sg_group_instance_of (&g->groups[0], 3)[0], 0);
}
END_TEST

/* nodes before groups and format; unknown keys ignored. */
static const char nodes_first[] =
  "{\"nodes\":[{\"name\":\"a\",\"op\":\"placeholder\",\"target\":\"a\",\"args\":[],"
  "\"kwargs\":{},\"meta\":{\"shape\":[4],\"dtype\":\"float32\"}},"
  "{\"name\":\"ar\",\"op\":\"call_function\",\"target\":\"_c10d_functional.all_reduce.default\","
  "\"args\":[{\"node\":\"a\"},\"sum\",\"0\"],\"kwargs\":{},\"cost_us\":12.5,"
  "\"meta\":{\"shape\":[4],\"dtype\":\"float32\"}},"
  "{\"name\":\"w\",\"op\":\"call_function\",\"target\":\"_c10d_functional.wait_tensor.default\","
  "\"args\":[{\"node\":\"ar\"}],\"kwargs\":{},\"meta\":{\"shape\":[4],\"dtype\":\"float32\"}},"
  "{\"name\":\"output\",\"op\":\"output\",\"target\":\"output\",\"args\":[[{\"node\":\"w\"}]],"
  "\"kwargs\":{}}],"
  "\"x-note\":[1,{\"y\":null}],\"groups\":{\"0\":{\"ranks\":[0,1]}},\"world_size\":2,"
  "\"rank\":1,\"version\":1,\"format\":\"schedgraph.graph\",\"description\":\"d\"}";

START_TEST (keys_in_any_order_and_unknown_keys_ignored)
{
  GError *error = NULL;
  g_autoptr (SgGraph) g = sg_graph_load_data (nodes_first, strlen (nodes_first), "<t>", &error);
  ck_assert_msg (g != NULL, "%s", error ? error->message : "?");
  ck_assert_int_eq (g->n_nodes, 4);
  ck_assert_int_eq (g->rank, 1);
  ck_assert_str_eq (g->description, "d");
  ck_assert_str_eq (g->source, "<t>");
  SgNodeId ar = sg_graph_lookup (g, "ar");
  ck_assert_int_eq (g->nodes[ar].reduce, SG_REDUCE_SUM);
  ck_assert (g->nodes[ar].cost_us == 12.5);
  /* default stride of a meta without one: contiguous */
  ck_assert_int_eq (sg_meta_stride (g, &g->nodes[0].meta)[0], 1);
}
END_TEST

START_TEST (reference_errors_tell_forward_dangling_and_cycle)
{
  static const char head[] =
    "{\"format\":\"schedgraph.graph\",\"version\":1,\"world_size\":1,\"groups\":{},\"nodes\":[";
  static const char *const cases[][3] = {
    { "{\"name\":\"a\",\"op\":\"call_function\",\"target\":\"aten.relu.default\",\"args\":[{\"node\":\"b\"}]},"
      "{\"name\":\"b\",\"op\":\"placeholder\",\"target\":\"b\"},",
      "forward reference to 'b' (node #1", "ref" },
    { "{\"name\":\"a\",\"op\":\"call_function\",\"target\":\"aten.relu.default\",\"kwargs\":{\"k\":[{\"node\":\"zz\"}]}},",
      "kwargs.k[0]: dangling reference to 'zz'", "ref" },
    { "{\"name\":\"a\",\"op\":\"call_function\",\"target\":\"aten.relu.default\",\"args\":[{\"node\":\"b\"}]},"
      "{\"name\":\"b\",\"op\":\"call_function\",\"target\":\"aten.relu.default\",\"args\":[{\"node\":\"a\"}]},",
      "cycle: a -> b -> a", "cycle" },
  };
  for (size_t i = 0; i < G_N_ELEMENTS (cases); i++) {
    g_autofree char *text = g_strconcat (
        head, cases[i][0],
        "{\"name\":\"output\",\"op\":\"output\",\"target\":\"output\",\"args\":[[]]}]}", NULL);
    GError *error = load_text_error (text);
    assert_error (error, strcmp (cases[i][2], "cycle") == 0 ? SG_GRAPH_ERROR_CYCLE
                                                            : SG_GRAPH_ERROR_REF,
                  cases[i][1]);
  }
}
END_TEST

START_TEST (syntax_errors_name_their_position)
{
  assert_error (load_text_error ("{\n  \"format\": \"schedgraph.graph\",\n  \"version\": 1,,\n}"),
                SG_GRAPH_ERROR_PARSE, "line 3, column 16");
  assert_error (load_text_error ("{\"format\": \"schedgraph.gr"), SG_GRAPH_ERROR_PARSE,
                "truncated file");
  assert_error (load_text_error ("  \n "), SG_GRAPH_ERROR_IO, "empty file");
  assert_error (load_text_error ("{\"format\": \"schedgraph.graph\", \"version\": 1, "
                                 "\"world_size\": 1, \"groups\": {}, \"nodes\": []}"),
                SG_GRAPH_ERROR_FORMAT, "nodes: the list is empty");
}
END_TEST

/* A tuple far longer than any stack frame must not crash the loader. */
START_TEST (long_tuple_meta_loads)
{
  GString *s = g_string_new ("{\"format\":\"schedgraph.graph\",\"version\":1,\"world_size\":1,"
                             "\"groups\":{},\"nodes\":[{\"name\":\"t\",\"op\":\"placeholder\","
                             "\"target\":\"t\",\"meta\":{\"tuple\":[");
  for (int i = 0; i < 1000000; i++)
    g_string_append (s, i ? ",null" : "{\"shape\":[2],\"dtype\":\"float32\"}");
  g_string_append (s, "]}},{\"name\":\"output\",\"op\":\"output\",\"target\":\"output\","
                      "\"args\":[[{\"node\":\"t\"}]]}]}");
  GError *error = NULL;
  g_autoptr (SgGraph) g = sg_graph_load_data (s->str, s->len, "<t>", &error);
  g_string_free (s, TRUE);
  ck_assert_msg (g != NULL, "%s", error ? error->message : "?");
  ck_assert_uint_eq (g->nodes[0].n_tuple, 1000000);
  ck_assert_uint_eq (sg_node_alloc_bytes (g, 0), 8);
}
END_TEST

/* --- IR operations ------------------------------------------------------------- */

START_TEST (permute_renumbers_inputs_and_names)
{
  g_autoptr (SgGraph) g = small_graph ();
  /* x w ag ag_w wt mm relu output -> w ag x ag_w wt mm relu output */
  SgNodeId order[] = { 1, 2, 0, 3, 4, 5, 6, 7 };
  GError *error = NULL;
  ck_assert (sg_graph_permute (g, order, &error));
  ck_assert_str_eq (g->nodes[0].name, "w");
  ck_assert_str_eq (g->nodes[2].name, "x");
  ck_assert_int_eq (sg_graph_lookup (g, "x"), 2);
  uint32_t k;
  const SgNodeId *in = sg_node_inputs (g, sg_graph_lookup (g, "mm"), &k);
  ck_assert_uint_eq (k, 2);
  ck_assert_int_eq (in[0], 2);
  ck_assert_int_eq (in[1], 4);
  ck_assert_int_eq (g->output, 7);
  assert_valid (g);
}
END_TEST

/* Every node's name resolves to its id after a reorder: the table is
 * dropped by the reorder (no million names reinserted, no 32 MB held
 * through the passes that look none up) and built by the next lookup. */
static void
assert_names_resolve (const SgGraph *g)
{
  for (SgNodeId i = 0; i < g->n_nodes; i++)
    ck_assert_int_eq (sg_graph_lookup (g, g->nodes[i].name), i);
}

START_TEST (names_resolve_to_the_new_ids_after_every_reorder)
{
  g_autoptr (SgGraph) g = small_graph ();
  SgNodeId order[] = { 1, 2, 0, 3, 4, 5, 6, 7 };
  ck_assert (sg_graph_permute (g, order, NULL));
  ck_assert_ptr_null (g->by_name);
  assert_names_resolve (g);
  ck_assert_ptr_nonnull (g->by_name);
  SgNodeId back[] = { 2, 0, 1, 3, 4, 5, 6, 7 }; /* x w ag ... again */
  ck_assert (sg_graph_select (g, back, 8, NULL));
  ck_assert_ptr_null (g->by_name);
  ck_assert_int_eq (sg_graph_lookup (g, "x"), 0);
  assert_names_resolve (g);
  /* a copy and a graph validated without a table built first */
  ck_assert (sg_graph_permute (g, order, NULL));
  g_autoptr (SgGraph) c = sg_graph_copy (g);
  assert_names_resolve (c);
  assert_valid (g);
  ck_assert_int_eq (sg_graph_lookup (g, "no_such_node"), SG_NO_NODE);
}
END_TEST

START_TEST (permute_refuses_a_non_topological_order_and_keeps_the_graph)
{
  g_autoptr (SgGraph) g = small_graph ();
  SgNodeId order[] = { 0, 1, 3, 2, 4, 5, 6, 7 }; /* wait before its collective */
  GError *error = NULL;
  ck_assert (!sg_graph_permute (g, order, &error));
  assert_error (error, SG_GRAPH_ERROR_CYCLE, "node 'ag_w' comes before its input 'ag'");
  ck_assert_str_eq (g->nodes[2].name, "ag");
  ck_assert_int_eq (sg_graph_lookup (g, "ag_w"), 3);
  assert_valid (g);
}
END_TEST

/* sg_graph_check_order is the one check every reorder applies: the output
 * node comes last even when nothing forces it there (it reads nothing). */
START_TEST (orders_keep_the_output_last)
{
  g_autoptr (SgGraph) g = tb_new (2);
  tb_input (g, "x", "float32", 2, (int64_t)4, (int64_t)8);
  tb_pointwise (g, "relu", "aten.relu.default", "x", NULL);
  tb_output (g, 0);
  SgNodeId early[] = { 0, 2, 1 };
  GError *error = NULL;
  ck_assert (!sg_graph_check_order (g, early, 3, NULL, &error));
  assert_error (error, SG_GRAPH_ERROR_CYCLE,
                "order position 1: the output node 'output' must come last (position 2)");
  error = NULL;
  ck_assert (!sg_graph_permute (g, early, &error));
  assert_error (error, SG_GRAPH_ERROR_CYCLE, "the output node 'output' must come last");
  error = NULL;
  ck_assert_str_eq (g->nodes[2].name, "output");
  SgNodeId dropped[] = { 0, 1 };
  ck_assert (!sg_graph_select (g, dropped, 2, &error));
  assert_error (error, SG_GRAPH_ERROR_REF, "node 'output': the output node cannot be removed");
  error = NULL;
  SgNodeId no_input[] = { 1, 2 };
  ck_assert (!sg_graph_check_order (g, no_input, 2, NULL, &error));
  assert_error (error, SG_GRAPH_ERROR_REF,
                "order position 0: node 'relu' reads 'x', which the order leaves out");
  SgNodeId ok[] = { 0, 1, 2 }, pos[3];
  ck_assert (sg_graph_check_order (g, ok, 3, pos, NULL));
  ck_assert_int_eq (pos[2], 2);
  assert_valid (g);
}
END_TEST

START_TEST (users_are_listed_in_id_order)
{
  g_autoptr (SgGraph) g = small_graph ();
  sg_graph_fill_users (g);
  uint32_t k;
  const SgNodeId *u = sg_node_users (g, sg_graph_lookup (g, "x"), &k);
  ck_assert_uint_eq (k, 1);
  ck_assert_int_eq (u[0], sg_graph_lookup (g, "mm"));
  u = sg_node_users (g, sg_graph_lookup (g, "relu"), &k);
  ck_assert_uint_eq (k, 1);
  ck_assert_int_eq (u[0], g->output);
  u = sg_node_users (g, g->output, &k);
  ck_assert_uint_eq (k, 0);
}
END_TEST

START_TEST (storage_root_follows_views_and_waits)
{
  g_autoptr (SgGraph) g = small_graph ();
  SgNodeId ag = sg_graph_lookup (g, "ag");
  ck_assert_int_eq (sg_node_storage_root (g, sg_graph_lookup (g, "wt")), ag);
  ck_assert_int_eq (sg_node_storage_root (g, sg_graph_lookup (g, "ag_w")), ag);
  ck_assert_int_eq (sg_node_storage_root (g, sg_graph_lookup (g, "mm")), sg_graph_lookup (g, "mm"));
  ck_assert_uint_eq (sg_node_alloc_bytes (g, sg_graph_lookup (g, "wt")), 0);
  ck_assert_uint_eq (sg_node_alloc_bytes (g, ag), 4 * 8 * 4);
  ck_assert_uint_eq (sg_node_comm_bytes (g, ag), 4 * 8 * 4);
}
END_TEST

/* p[2,4] f32 32 B, x[8,8] f32 256 B, ag = all_gather(p) 64 B, y = relu(x)
 * 256 B, w = wait(ag), s = add(w, w) 64 B, output(s, y). */
static SgGraph *
peak_graph (void)
{
  SgGraph *g = tb_new (2);
  tb_group (g, "0", 2, 0, 1);
  tb_input (g, "p", "float32", 2, (int64_t)2, (int64_t)4);
  tb_input (g, "x", "float32", 2, (int64_t)8, (int64_t)8);
  tb_all_gather (g, "ag", "p", "0");
  tb_pointwise (g, "y", "aten.relu.default", "x", NULL);
  tb_wait (g, "w", "ag");
  tb_pointwise (g, "s", "aten.add.Tensor", "w", "w");
  tb_output (g, 2, "s", "y");
  return g;
}

START_TEST (peak_bytes_matches_hand_count)
{
  g_autoptr (SgGraph) g = peak_graph ();
  /* Id order: p 0..4 (the all_gather reads it until its wait at 4), x 0..3,
   * ag 2..5, y 3..6, s 5..6. At step 3: 32 + 256 + 64 + 256 = 608. */
  ck_assert_uint_eq (sg_graph_peak_bytes (g, NULL), 608);
  /* p x y ag w s out: x ends at 2 (y), y 2..6, ag 3..5; at step 2:
   * p 32 + x 256 + y 256 = 544; at 3: p + y + ag = 352. */
  SgNodeId order[] = { 0, 1, 3, 2, 4, 5, 6 };
  ck_assert_uint_eq (sg_graph_peak_bytes (g, order), 544);
}
END_TEST

/* One scratch serves graphs of different sizes in turn (a bucket search's
 * trial graphs): the working arrays grow and are reused, the counts stay
 * the hand counts, and a saturated graph between them leaves no trace. */
START_TEST (liveness_scratch_reused_across_graphs_keeps_the_counts)
{
  g_autoptr (SgGraph) small = tb_new (1);
  tb_input (small, "a", "float32", 1, (int64_t)4);
  tb_output (small, 1, "a");
  g_autoptr (SgGraph) big = peak_graph ();
  g_autoptr (SgGraph) huge = tb_new (1);
  tb_input (huge, "a", "float32", 2, (int64_t)1 << 30, (int64_t)1 << 30);
  tb_input (huge, "b", "float32", 1, (int64_t)4);
  tb_output (huge, 2, "a", "b");
  SgLiveScratch w = { 0 };
  SgGraph *gs[] = { small, big, huge, big, small };
  uint64_t want[] = { 16, 608, G_MAXUINT64, 608, 16 };
  for (size_t i = 0; i < G_N_ELEMENTS (gs); i++) {
    SgGraph *g = gs[i];
    g_autofree SgNodeId *root = sg_graph_storage_roots (g);
    SgElision e;
    sg_graph_elision (g, &e);
    g_autofree uint64_t *alloc = sg_elision_storage_bytes (g, &e, NULL, NULL);
    sg_elision_clear (&e);
    g_autofree int32_t *pos = g_new (int32_t, (size_t)g->n_nodes);
    for (int32_t t = 0; t < g->n_nodes; t++)
      pos[t] = t;
    g_autofree uint64_t *profile = g_new (uint64_t, (size_t)g->n_nodes);
    g_autofree uint64_t *fresh = g_new (uint64_t, (size_t)g->n_nodes);
    ck_assert_uint_eq (sg_graph_liveness_in (g, pos, profile, root, alloc, &w), want[i]);
    ck_assert_uint_eq (sg_graph_liveness (g, pos, fresh, NULL, NULL), want[i]);
    ck_assert_mem_eq (profile, fresh, sizeof (uint64_t) * (size_t)g->n_nodes);
  }
  sg_live_scratch_clear (&w);
  ck_assert_ptr_null (w.last);
}
END_TEST

/* A graph of @n_blocks blocks (6 nodes each): an input gathered, waited
 * for, transposed (a view), multiplied and activated; the first and the
 * last activation returned. */
static SgGraph *
blocks_graph (int n_blocks)
{
  SgGraph *g = tb_new (2);
  tb_group (g, "0", 2, 0, 1);
  tb_input (g, "x", "float32", 2, (int64_t)4, (int64_t)8);
  for (int b = 0; b < n_blocks; b++) {
    g_autofree char *w = g_strdup_printf ("w%d", b), *ag = g_strdup_printf ("ag%d", b);
    g_autofree char *wt = g_strdup_printf ("wait%d", b), *t = g_strdup_printf ("t%d", b);
    g_autofree char *mm = g_strdup_printf ("mm%d", b), *r = g_strdup_printf ("r%d", b);
    tb_input (g, w, "float32", 2, (int64_t)2 + b % 3, (int64_t)8);
    tb_all_gather (g, ag, w, "0");
    tb_wait (g, wt, ag);
    tb_t (g, t, wt);
    tb_mm (g, mm, "x", t);
    tb_pointwise (g, r, "aten.relu.default", mm, NULL);
  }
  g_autofree char *last = g_strdup_printf ("r%d", n_blocks - 1);
  tb_output (g, 2, "r0", last);
  return g;
}

/* The storage sizes of the roots are one rule whatever the caller has:
 * the analysis's memory (sg_graph_elision_again, on pools of 1, 2, 3 and
 * 8 threads) or not (sg_graph_elision), the nodes' sizes or not; each is
 * the sum of the bytes of the nodes that are not elided copies
 * (tests/bucket/test_trial.c compares the paths on graphs with elided
 * copies). */
START_TEST (storage_bytes_are_the_same_with_or_without_the_analysis_memory)
{
  g_autoptr (SgGraph) g = blocks_graph (1400);
  const int32_t n = g->n_nodes;
  SgElision e;
  sg_graph_elision (g, &e);
  g_autofree uint64_t *node_alloc = g_new (uint64_t, (size_t)n);
  g_autofree uint64_t *want = g_new0 (uint64_t, (size_t)n);
  for (SgNodeId i = 0; i < n; i++) {
    node_alloc[i] = sg_node_alloc_bytes (g, i);
    if (!sg_elision_elided (g, &e, i))
      want[e.root[i]] += node_alloc[i];
  }
  g_autofree uint64_t *a = sg_elision_storage_bytes (g, &e, NULL, NULL);
  ck_assert_mem_eq (a, want, sizeof (uint64_t) * (size_t)n);
  g_autofree uint64_t *b = sg_elision_storage_bytes (g, &e, node_alloc, NULL);
  ck_assert_mem_eq (b, want, sizeof (uint64_t) * (size_t)n);
  sg_elision_clear (&e);
  const int32_t threads[] = { 1, 2, 3, 8 };
  for (size_t k = 0; k < G_N_ELEMENTS (threads); k++) {
    SgPool *pool = sg_pool_new (threads[k]);
    SgElision again = { 0 };
    sg_elision_set_pool (&again, pool);
    sg_graph_elision_again (g, &again);
    g_autofree uint64_t *c = sg_elision_storage_bytes (g, &again, node_alloc, NULL);
    ck_assert_mem_eq (c, want, sizeof (uint64_t) * (size_t)n);
    g_autofree uint64_t *d = sg_elision_storage_bytes (g, &again, NULL, NULL);
    ck_assert_mem_eq (d, want, sizeof (uint64_t) * (size_t)n);
    sg_elision_clear (&again);
    sg_pool_free (pool);
  }
}
END_TEST

/* @g's storage roots (*@root, transfer full) and bytes after its zero-copy
 * analysis (returned, transfer full); with @a, @a's storage set to 2^61
 * bytes and @b's to 2^62 (their sum past 2^63: the peak saturates). */
static uint64_t *
live_storages (SgGraph *g, const char *a, const char *b, SgNodeId **root)
{
  *root = sg_graph_storage_roots (g);
  SgElision e;
  sg_graph_elision (g, &e);
  uint64_t *alloc = sg_elision_storage_bytes (g, &e, NULL, NULL);
  sg_elision_clear (&e);
  if (a)
    alloc[(*root)[sg_graph_lookup (g, a)]] = (uint64_t)1 << 61,
    alloc[(*root)[sg_graph_lookup (g, b)]] = (uint64_t)1 << 62;
  return alloc;
}

/* With a pool (of 4 threads or more), the liveness runs in ranges of
 * nodes: the same peak as without one, with pools of 1, 2, 3, 4 and 8
 * threads, for the id order and random orders, storages above 2^62 bytes
 * in all included; with a profile it gives the same profile too. */
START_TEST (liveness_in_ranges_on_a_pool_gives_the_same_peak)
{
  const int32_t threads[] = { 1, 2, 3, 4, 8 };
  for (int huge = 0; huge < 2; huge++) {
    g_autoptr (SgGraph) g = blocks_graph (1400);
    const int32_t n = g->n_nodes;
    g_autofree SgNodeId *root = NULL;
    g_autofree uint64_t *alloc = live_storages (g, huge ? "ag100" : NULL, "ag1200", &root);
    g_autofree int32_t *pos = g_new (int32_t, (size_t)n);
    g_autofree uint64_t *profile = g_new (uint64_t, (size_t)n);
    g_autofree uint64_t *want_profile = g_new (uint64_t, (size_t)n);
    GRand *rnd = g_rand_new_with_seed (7 + (guint32)huge);
    for (int order = 0; order < 4; order++) {
      for (int32_t t = 0; t < n; t++)
        pos[t] = t;
      for (int32_t t = n - 1; order > 0 && t > 0; t--) {
        int32_t o = g_rand_int_range (rnd, 0, t + 1), x = pos[t];
        pos[t] = pos[o], pos[o] = x;
      }
      SgLiveScratch seq = { 0 };
      const uint64_t want = sg_graph_liveness_in (g, pos, want_profile, root, alloc, &seq);
      ck_assert_uint_eq (sg_graph_liveness_in (g, pos, NULL, root, alloc, &seq), want);
      ck_assert (huge ? want == G_MAXUINT64 : want < G_MAXUINT64);
      for (size_t k = 0; k < G_N_ELEMENTS (threads); k++) {
        SgPool *pool = sg_pool_new (threads[k]);
        SgLiveScratch w = { .pool = pool };
        for (int again = 0; again < 2; again++) /* delta left zero */
          ck_assert_uint_eq (sg_graph_liveness_in (g, pos, NULL, root, alloc, &w), want);
        ck_assert_uint_eq (sg_graph_liveness_in (g, pos, profile, root, alloc, &w), want);
        ck_assert_mem_eq (profile, want_profile, sizeof (uint64_t) * (size_t)n);
        sg_live_scratch_clear (&w);
        sg_pool_free (pool);
      }
      sg_live_scratch_clear (&seq);
    }
    g_rand_free (rnd);
  }
}
END_TEST

/* Without positions (the id order, as the bucket trials' judge asks) the
 * liveness is one reverse pass that adds each storage where it reaches
 * its root: the same peak and profile as with the identity positions, on
 * one thread and in ranges on pools of 4 and 8, storages above 2^62
 * bytes in all included, the scratch shared with calls at positions. */
START_TEST (liveness_in_id_order_without_positions_is_that_of_the_identity)
{
  const int32_t threads[] = { 1, 4, 8 };
  for (int huge = 0; huge < 2; huge++) {
    g_autoptr (SgGraph) g = blocks_graph (1400);
    const int32_t n = g->n_nodes;
    g_autofree SgNodeId *root = NULL;
    g_autofree uint64_t *alloc = live_storages (g, huge ? "ag900" : NULL, "ag700", &root);
    g_autofree int32_t *pos = g_new (int32_t, (size_t)n);
    for (int32_t t = 0; t < n; t++)
      pos[t] = t;
    g_autofree uint64_t *want_profile = g_new (uint64_t, (size_t)n);
    g_autofree uint64_t *profile = g_new (uint64_t, (size_t)n);
    SgLiveScratch seq = { 0 };
    const uint64_t want = sg_graph_liveness_in (g, pos, want_profile, root, alloc, &seq);
    ck_assert (huge ? want == G_MAXUINT64 : want > 0 && want < G_MAXUINT64);
    for (size_t k = 0; k < G_N_ELEMENTS (threads); k++) {
      SgPool *pool = threads[k] > 1 ? sg_pool_new (threads[k]) : NULL;
      SgLiveScratch w = { .pool = pool };
      for (int again = 0; again < 2; again++) {
        ck_assert_uint_eq (sg_graph_liveness_in (g, NULL, NULL, root, alloc, &w), want);
        ck_assert_uint_eq (sg_graph_liveness_in (g, pos, NULL, root, alloc, &w), want);
      }
      ck_assert_uint_eq (sg_graph_liveness_in (g, NULL, profile, root, alloc, &w), want);
      ck_assert_mem_eq (profile, want_profile, sizeof (uint64_t) * (size_t)n);
      ck_assert_uint_eq (sg_graph_liveness (g, NULL, NULL, NULL, huge ? alloc : NULL), want);
      sg_live_scratch_clear (&w);
      if (pool)
        sg_pool_free (pool);
    }
    sg_live_scratch_clear (&seq);
  }
}
END_TEST

/* A chain a -> b -> c -> d of 16 KiB values, the input @a read again by
 * d when @a_late. */
static SgGraph *
chain_graph (bool a_late)
{
  SgGraph *g = tb_new (1);
  tb_input (g, "a", "float32", 1, (int64_t)4096);
  tb_pointwise (g, "b", "aten.exp.default", "a", NULL);
  tb_pointwise (g, "c", "aten.exp.default", "b", NULL);
  tb_pointwise (g, "d", "aten.add.Tensor", "c", a_late ? "a" : "c");
  tb_output (g, 1, "d");
  return g;
}

/* The id order's pass leaves its scratch clean for the next graph: after a
 * graph whose input lives to the end, one where it dies early peaks at two
 * values, not three, and the same again after a liveness at positions. */
START_TEST (liveness_in_id_order_keeps_nothing_of_the_graph_before)
{
  g_autoptr (SgGraph) late = chain_graph (true);
  g_autoptr (SgGraph) early = chain_graph (false);
  SgLiveScratch w = { 0 };
  SgGraph *gs[] = { late, early, late, early };
  const uint64_t want[] = { 3 * 16384, 2 * 16384, 3 * 16384, 2 * 16384 };
  for (size_t i = 0; i < G_N_ELEMENTS (gs); i++) {
    g_autofree SgNodeId *root = sg_graph_storage_roots (gs[i]);
    SgElision e;
    sg_graph_elision (gs[i], &e);
    g_autofree uint64_t *alloc = sg_elision_storage_bytes (gs[i], &e, NULL, NULL);
    sg_elision_clear (&e);
    int32_t pos[] = { 0, 1, 2, 3, 4 };
    ck_assert_int_eq (gs[i]->n_nodes, 5);
    ck_assert_uint_eq (sg_graph_liveness_in (gs[i], NULL, NULL, root, alloc, &w), want[i]);
    if (i == 2)
      ck_assert_uint_eq (sg_graph_liveness_in (gs[i], pos, NULL, root, alloc, &w), want[i]);
  }
  sg_live_scratch_clear (&w);
}
END_TEST

START_TEST (peak_bytes_counts_a_value_without_users_at_its_step)
{
  g_autoptr (SgGraph) g = tb_new (1);
  tb_input (g, "a", "float32", 1, (int64_t)4);  /* 16 B, dead after b */
  tb_pointwise (g, "b", "aten.exp.default", "a", NULL); /* 16 B, unused */
  tb_input (g, "c", "float32", 1, (int64_t)100); /* 400 B, returned */
  tb_output (g, 1, "c");
  /* step 1: a 16 + b 16 + c 400 = 432 (placeholders live from the start) */
  ck_assert_uint_eq (sg_graph_peak_bytes (g, NULL), 432);
}
END_TEST

START_TEST (peak_bytes_saturates_beyond_2_62)
{
  g_autoptr (SgGraph) g = tb_new (1);
  tb_input (g, "a", "float32", 2, (int64_t)1 << 30, (int64_t)1 << 30); /* 2^62 B */
  tb_input (g, "b", "float32", 1, (int64_t)4);
  tb_output (g, 2, "a", "b");
  ck_assert_uint_eq (sg_graph_peak_bytes (g, NULL), G_MAXUINT64);
}
END_TEST

/* --- pass runner --------------------------------------------------------------- */

static bool
pass_ok (SgGraph *g, const SgConfig *cfg, GError **error)
{
  (void)cfg;
  (void)error;
  g->nodes[0].cost_us = 1.0;
  return true;
}

static bool
pass_breaks_ir (SgGraph *g, const SgConfig *cfg, GError **error)
{
  (void)cfg;
  (void)error;
  g->nodes[sg_graph_lookup (g, "ag")].group_size = 7;
  return true;
}

static bool
pass_fails (SgGraph *g, const SgConfig *cfg, GError **error)
{
  (void)g;
  (void)cfg;
  g_set_error (error, SG_GRAPH_ERROR, SG_GRAPH_ERROR_INVALID, "node 'x': field: broken");
  return false;
}

START_TEST (pass_runner_times_validates_and_names_the_failing_pass)
{
  SgConfig cfg;
  sg_config_init (&cfg);
  ck_assert (cfg.reorder && cfg.bucket && !cfg.validate_between);
  ck_assert_uint_eq (cfg.bucket_cap_bytes, (uint64_t)256 << 20);
  g_autoptr (SgGraph) g = small_graph ();
  SgPassTime times[2];
  GError *error = NULL;
  const SgPass good[] = { { "one", pass_ok, NULL, false }, { "two", pass_ok, NULL, false } };
  ck_assert (sg_pass_run (&g, &cfg, good, 2, NULL, times, &error));
  ck_assert_str_eq (times[1].name, "two");
  ck_assert (times[0].ms >= 0);
  const SgPass bad[] = { { "one", pass_ok, NULL, false }, { "bad", pass_fails, NULL, false } };
  ck_assert (!sg_pass_run (&g, &cfg, bad, 2, NULL, times, &error));
  assert_error (error, SG_GRAPH_ERROR_INVALID, "bad: node 'x': field: broken");
  error = NULL;
  const SgPass breaks[] = { { "breaker", pass_breaks_ir, NULL, false } };
  ck_assert (sg_pass_run (&g, &cfg, breaks, 1, NULL, times, &error)); /* not checked */
  cfg.validate_between = true;
  ck_assert (!sg_pass_run (&g, &cfg, breaks, 1, NULL, times, &error));
  assert_error (error, SG_GRAPH_ERROR_GROUP, "after pass 'breaker'");
}
END_TEST

/* A driver's steps: one makes the graph, one counts in the driver's state
 * and fails with its own message. */
static bool
step_make (SgGraph **g, const SgConfig *cfg, gpointer data, GError **error)
{
  (void)cfg;
  (void)error;
  *g = small_graph ();
  (*g)->nodes[sg_graph_lookup (*g, "ag")].group_size = 7; /* invalid until fixed */
  (*(int *)data)++;
  return true;
}

static bool
step_fix (SgGraph **g, const SgConfig *cfg, gpointer data, GError **error)
{
  (void)cfg;
  (void)error;
  (*g)->nodes[sg_graph_lookup (*g, "ag")].group_size = 2;
  (*(int *)data)++;
  return true;
}

static bool
step_fails (SgGraph **g, const SgConfig *cfg, gpointer data, GError **error)
{
  (void)g;
  (void)cfg;
  (void)data;
  g_set_error (error, SG_GRAPH_ERROR, SG_GRAPH_ERROR_IO, "order.json: cannot open");
  return false;
}

START_TEST (pass_runner_runs_steps_with_the_driver_state)
{
  SgConfig cfg;
  sg_config_init (&cfg);
  cfg.validate_between = true;
  SgGraph *g = NULL;
  int count = 0;
  SgPassTime times[4];
  GError *error = NULL;
  /* an unchecked step may leave the graph invalid; the next one fixes it */
  const SgPass list[] = { { "make", NULL, step_make, true },
                          { "fix", NULL, step_fix, false },
                          { "one", pass_ok, NULL, false },
                          { "fails", NULL, step_fails, false } };
  ck_assert (sg_pass_run (&g, &cfg, list, 3, &count, times, &error));
  ck_assert (g != NULL);
  ck_assert_int_eq (count, 2);
  ck_assert_str_eq (times[2].name, "one");
  ck_assert (!sg_pass_run (&g, &cfg, list + 3, 1, &count, times, &error));
  /* a step's error is its own: not prefixed with the step's name */
  ck_assert_str_eq (error->message, "order.json: cannot open");
  g_clear_error (&error);
  const SgPass checked[] = { { "make", NULL, step_make, false } };
  sg_graph_free (g);
  g = NULL;
  ck_assert (!sg_pass_run (&g, &cfg, checked, 1, &count, times, &error));
  assert_error (error, SG_GRAPH_ERROR_GROUP, "after step 'make'");
  sg_graph_free (g);
}
END_TEST

/* An analysis that remembers the graph's node count and first cost. */
typedef struct {
  int32_t n;
  double cost;
} Fake;

static bool
fake_check (const SgGraph *g, gconstpointer data, GError **error)
{
  const Fake *f = data;
  if (f->n == g->n_nodes && f->cost == g->nodes[0].cost_us)
    return true;
  g_set_error (error, SG_GRAPH_ERROR, SG_GRAPH_ERROR_INVALID, "fake: stale");
  return false;
}

static const SgKeptClass fake_class = { "fake", g_free, fake_check };

static void
keep_fake (SgGraph *g)
{
  Fake *f = g_new (Fake, 1);
  *f = (Fake){ g->n_nodes, g->nodes[0].cost_us };
  sg_graph_keep (g, f, &fake_class);
}

START_TEST (kept_analysis_lasts_until_the_graph_changes)
{
  g_autoptr (SgGraph) g = small_graph ();
  keep_fake (g);
  ck_assert (sg_graph_kept (g, &fake_class) != NULL);
  static const SgKeptClass other = { "other", g_free, NULL };
  ck_assert (sg_graph_kept (g, &other) == NULL);
  sg_graph_fill_users (g); /* derived data: the graph is the same */
  ck_assert (sg_graph_kept (g, &fake_class) != NULL);
  g_autofree SgNodeId *order = g_new (SgNodeId, (size_t)g->n_nodes);
  for (SgNodeId i = 0; i < g->n_nodes; i++)
    order[i] = i;
  ck_assert (sg_graph_permute (g, order, NULL));
  ck_assert (sg_graph_kept (g, &fake_class) == NULL);
  keep_fake (g);
  ck_assert (sg_graph_append_json (g, "{\"name\": \"late\", \"op\": \"placeholder\", "
                                      "\"target\": \"late\", \"args\": []}",
                                   NULL) != SG_NO_NODE);
  ck_assert (sg_graph_kept (g, &fake_class) == NULL);
}
END_TEST

START_TEST (pass_runner_finds_a_stale_kept_analysis)
{
  SgConfig cfg;
  sg_config_init (&cfg);
  g_autoptr (SgGraph) g = small_graph ();
  g->nodes[0].cost_us = 5.0;
  keep_fake (g);
  GError *error = NULL;
  /* pass_ok writes a cost without sg_graph_changed() */
  const SgPass list[] = { { "sloppy", pass_ok, NULL, false } };
  cfg.validate_between = true;
  ck_assert (!sg_pass_run (&g, &cfg, list, 1, NULL, NULL, &error));
  assert_error (error, SG_GRAPH_ERROR_INVALID, "after pass 'sloppy' (a schedgraph bug): fake: stale");
  error = NULL;
  sg_graph_changed (g);
  ck_assert (sg_graph_kept (g, &fake_class) == NULL);
  ck_assert (sg_pass_run (&g, &cfg, list, 1, NULL, NULL, &error));
}
END_TEST

START_TEST (dump_is_one_line_per_node_after_the_named_pass)
{
  SgConfig cfg;
  sg_config_init (&cfg);
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream (&buf, &len);
  cfg.dump_file = f;
  cfg.dump_pass = "one";
  g_autoptr (SgGraph) g = small_graph ();
  const SgPass good[] = { { "one", pass_ok, NULL, false }, { "two", pass_ok, NULL, false } };
  GError *error = NULL;
  ck_assert (sg_pass_run (&g, &cfg, good, 2, NULL, NULL, &error));
  fclose (f);
  ck_assert_msg (g_str_has_prefix (buf, "# after one\ngraph <builder>: world_size 2 rank 0, 8 nodes"), "%s", buf);
  ck_assert (strstr (buf, "\n2 ag = all_gather(w) : float32[4,8]/[8,1] group '0' size 2\n"));
  ck_assert (strstr (buf, "\n0 x = placeholder() : float32[4,8]/[8,1] cost_us 1.000\n"));
  ck_assert (!strstr (buf, "# after two"));
  int lines = 0;
  for (char *p = buf; *p; p++)
    lines += *p == '\n';
  ck_assert_int_eq (lines, 1 + 1 + 1 + 8);
  free (buf);
}
END_TEST

static Suite *
graph_suite (void)
{
  Suite *s = suite_create ("graph");
  TCase *load = tcase_create ("load");
  tcase_add_loop_test (load, sample_graph_loads_with_its_counts, 0, G_N_ELEMENTS (samples));
  tcase_add_test (load, sample_graph_keeps_args_tuples_and_dtypes);
  tcase_add_test (load, two_d_mesh_groups_infer_their_partitions);
  tcase_add_test (load, group_partition_inference_block_stride_and_refusal);
  tcase_add_test (load, explicit_partition_is_read);
  tcase_add_test (load, keys_in_any_order_and_unknown_keys_ignored);
  tcase_add_test (load, reference_errors_tell_forward_dangling_and_cycle);
  tcase_add_test (load, syntax_errors_name_their_position);
  tcase_add_test (load, long_tuple_meta_loads);
  suite_add_tcase (s, load);
  TCase *ir = tcase_create ("ir");
  tcase_add_test (ir, permute_renumbers_inputs_and_names);
  tcase_add_test (ir, names_resolve_to_the_new_ids_after_every_reorder);
  tcase_add_test (ir, permute_refuses_a_non_topological_order_and_keeps_the_graph);
  tcase_add_test (ir, orders_keep_the_output_last);
  tcase_add_test (ir, users_are_listed_in_id_order);
  tcase_add_test (ir, storage_root_follows_views_and_waits);
  tcase_add_test (ir, peak_bytes_matches_hand_count);
  tcase_add_test (ir, peak_bytes_counts_a_value_without_users_at_its_step);
  tcase_add_test (ir, liveness_scratch_reused_across_graphs_keeps_the_counts);
  tcase_add_test (ir, liveness_in_ranges_on_a_pool_gives_the_same_peak);
  tcase_add_test (ir, liveness_in_id_order_without_positions_is_that_of_the_identity);
  tcase_add_test (ir, liveness_in_id_order_keeps_nothing_of_the_graph_before);
  tcase_add_test (ir, storage_bytes_are_the_same_with_or_without_the_analysis_memory);
  tcase_add_test (ir, peak_bytes_saturates_beyond_2_62);
  suite_add_tcase (s, ir);
  TCase *p = tcase_create ("passes");
  tcase_add_test (p, pass_runner_times_validates_and_names_the_failing_pass);
  tcase_add_test (p, pass_runner_runs_steps_with_the_driver_state);
  tcase_add_test (p, kept_analysis_lasts_until_the_graph_changes);
  tcase_add_test (p, pass_runner_finds_a_stale_kept_analysis);
  tcase_add_test (p, dump_is_one_line_per_node_after_the_named_pass);
  suite_add_tcase (s, p);
  return s;
}

int
main (void)
{
  SRunner *sr = srunner_create (graph_suite ());
  srunner_run_all (sr, CK_NORMAL);
  int failed = srunner_ntests_failed (sr);
  srunner_free (sr);
  return failed ? 1 : 0;
}
