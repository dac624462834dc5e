/* test_validate.c: the validator catches every broken invariant. Each test
 * builds a valid graph with the test builder, corrupts one field the way a
 * buggy pass could, and checks the error code and that the message names
 * the node and the field. */
#include <string.h>

#include "common.h"

START_TEST (validator_accepts_builder_graphs)
{
  g_autoptr (SgGraph) g = small_graph ();
  assert_valid (g);
  g_autoptr (SgGraph) c = tb_new (4);
  tb_group (c, "dp", 2, 0, 2);
  tb_input (c, "a", "bfloat16", 2, (int64_t)8, (int64_t)4);
  tb_reduce_scatter (c, "rs", "a", "dp");
  tb_wait (c, "rs_w", "rs");
  tb_all_reduce (c, "ar", "rs_w", "dp");
  tb_wait (c, "ar_w", "ar");
  tb_output (c, 1, "ar_w");
  assert_valid (c);
  ck_assert_int_eq (c->groups[0].n_instances, 2);
}
END_TEST

START_TEST (validator_catches_forward_input)
{
  g_autoptr (SgGraph) g = small_graph ();
  SgNodeId mm = sg_graph_lookup (g, "mm");
  g_array_index (g->inputs, SgNodeId, g->nodes[mm].in_first) = sg_graph_lookup (g, "relu");
  assert_invalid (g, SG_GRAPH_ERROR_CYCLE, "node 'mm' (#5): args: input 'relu' (#6) comes after it");
}
END_TEST

START_TEST (validator_catches_self_reference)
{
  g_autoptr (SgGraph) g = small_graph ();
  SgNodeId mm = sg_graph_lookup (g, "mm");
  g_array_index (g->inputs, SgNodeId, g->nodes[mm].in_first) = mm;
  assert_invalid (g, SG_GRAPH_ERROR_CYCLE, "node 'mm': args: refers to itself");
}
END_TEST

START_TEST (validator_catches_duplicate_name)
{
  g_autoptr (SgGraph) g = small_graph ();
  g->nodes[1].name = g->nodes[0].name;
  assert_invalid (g, SG_GRAPH_ERROR_REF, "node 'x' (#1): name: duplicate name");
}
END_TEST

START_TEST (validator_catches_output_not_last)
{
  g_autoptr (SgGraph) g = small_graph ();
  SgNodeId order[] = { 0, 1, 2, 3, 4, 5, 7, 6 };
  /* permute would refuse (relu feeds output); swap the records directly */
  (void)order;
  SgNode tmp = g->nodes[6];
  g->nodes[6] = g->nodes[7];
  g->nodes[7] = tmp;
  g->output = 6;
  assert_invalid (g, SG_GRAPH_ERROR_INVALID, "node 'output' (#6): the graph's output must be the last node");
}
END_TEST

START_TEST (validator_catches_missing_output)
{
  g_autoptr (SgGraph) g = small_graph ();
  g->output = SG_NO_NODE;
  assert_invalid (g, SG_GRAPH_ERROR_INVALID, "no node has op 'output'");
}
END_TEST

START_TEST (validator_catches_collective_without_group)
{
  g_autoptr (SgGraph) g = small_graph ();
  g->nodes[sg_graph_lookup (g, "ag")].group = 3;
  assert_invalid (g, SG_GRAPH_ERROR_GROUP, "node 'ag': args[2]: group index 3 is not in `groups`");
}
END_TEST

START_TEST (validator_catches_group_size_mismatch)
{
  g_autoptr (SgGraph) g = small_graph ();
  g->nodes[sg_graph_lookup (g, "ag")].group_size = 4;
  assert_invalid (g, SG_GRAPH_ERROR_GROUP, "node 'ag': args[1]: group size 4 disagrees with group '0'");
}
END_TEST

START_TEST (validator_catches_collective_shape_mismatch)
{
  g_autoptr (SgGraph) g = small_graph ();
  SgNodeId ag = sg_graph_lookup (g, "ag");
  g_array_index (g->dims, int64_t, g->nodes[ag].meta.first) = 3; /* [3,8] from [2,8] x 2 */
  assert_invalid (g, SG_GRAPH_ERROR_GROUP, "node 'ag': meta.shape: 24 elements out for 16 in");
}
END_TEST

START_TEST (validator_catches_wait_on_non_collective)
{
  g_autoptr (SgGraph) g = small_graph ();
  SgNodeId w = sg_graph_lookup (g, "ag_w");
  g_array_index (g->inputs, SgNodeId, g->nodes[w].in_first) = sg_graph_lookup (g, "w");
  assert_invalid (g, SG_GRAPH_ERROR_INVALID, "node 'ag_w': args[0]: wait_tensor must wait on a collective ('w' is not one)");
}
END_TEST

START_TEST (validator_catches_negative_extent)
{
  g_autoptr (SgGraph) g = small_graph ();
  SgNodeId x = sg_graph_lookup (g, "x");
  g_array_index (g->dims, int64_t, g->nodes[x].meta.first + 1) = -8;
  assert_invalid (g, SG_GRAPH_ERROR_SHAPE, "node 'x': meta.shape[1]: negative extent -8");
}
END_TEST

START_TEST (validator_catches_overflowing_shape)
{
  g_autoptr (SgGraph) g = small_graph ();
  SgNodeId x = sg_graph_lookup (g, "x");
  g_array_index (g->dims, int64_t, g->nodes[x].meta.first) = (int64_t)1 << 40;
  g_array_index (g->dims, int64_t, g->nodes[x].meta.first + 1) = (int64_t)1 << 40;
  assert_invalid (g, SG_GRAPH_ERROR_SHAPE, "node 'x': meta.shape: element count overflows");
}
END_TEST

START_TEST (validator_catches_view_beyond_its_input)
{
  g_autoptr (SgGraph) g = small_graph ();
  SgNodeId wt = sg_graph_lookup (g, "wt"); /* t of [4,8]: [8,4] stride [1,8] */
  g_array_index (g->dims, int64_t, g->nodes[wt].meta.first) = 9;
  assert_invalid (g, SG_GRAPH_ERROR_SHAPE, "node 'wt': meta.shape/stride: the t reaches 33 "
                  "elements, but its input 'ag_w' spans only 32");
}
END_TEST

START_TEST (validator_catches_matmul_shape_mismatch)
{
  g_autoptr (SgGraph) g = small_graph (); /* mm: x [4,8] x wt [8,4] -> [4,4] */
  SgNodeId x = sg_graph_lookup (g, "x");
  g_array_index (g->dims, int64_t, g->nodes[x].meta.first + 1) = 6;
  g_array_index (g->dims, int64_t, g->nodes[x].meta.first + 2) = 6; /* stride [6,1] */
  assert_invalid (g, SG_GRAPH_ERROR_SHAPE,
                  "node 'mm': meta.shape: mm of 'x' [4, 6] and 'wt' [8, 4] cannot give [4, 4]");
}
END_TEST

START_TEST (validator_catches_pointwise_shape_mismatch)
{
  g_autoptr (SgGraph) g = small_graph (); /* relu of mm [4,4] */
  SgNodeId r = sg_graph_lookup (g, "relu");
  g_array_index (g->dims, int64_t, g->nodes[r].meta.first + 1) = 1;
  g_array_index (g->dims, int64_t, g->nodes[r].meta.first + 2) = 1; /* [4,1] stride [1,1] */
  assert_invalid (g, SG_GRAPH_ERROR_SHAPE, "node 'relu': meta.shape: input 'mm' (dim 1 of 4) "
                  "does not broadcast to the relu result");
  g_array_index (g->dims, int64_t, g->nodes[r].meta.first + 1) = 4;
  g_array_index (g->dims, int64_t, g->nodes[r].meta.first + 2) = 4;
  assert_valid (g);
}
END_TEST

START_TEST (validator_catches_strides_past_a_fresh_value)
{
  g_autoptr (SgGraph) g = small_graph ();
  SgNodeId x = sg_graph_lookup (g, "x"); /* [4,8] stride [8,1] */
  g_array_index (g->dims, int64_t, g->nodes[x].meta.first + 2) = 9;
  assert_invalid (g, SG_GRAPH_ERROR_SHAPE,
                  "node 'x': meta.stride: reaches 35 elements, but the value holds 32");
  g_array_index (g->dims, int64_t, g->nodes[x].meta.first + 2) = 1; /* column-major: dense */
  g_array_index (g->dims, int64_t, g->nodes[x].meta.first + 3) = 4;
  assert_valid (g);
}
END_TEST

static SgNodeId
add_sum (SgGraph *g, const char *name, const char *dims_keep, const char *shape)
{
  return tb_node (g,
                  "{\"name\":\"%s\",\"op\":\"call_function\",\"target\":\"aten.sum.dim_IntList\","
                  "\"args\":[{\"node\":\"mm\"},%s],\"meta\":{\"shape\":%s,\"dtype\":\"float32\"}}",
                  name, dims_keep, shape);
}

START_TEST (validator_checks_reduction_shapes)
{
  g_autoptr (SgGraph) g = tb_new (2);
  tb_group (g, "0", 2, 0, 1);
  tb_input (g, "x", "float32", 2, (int64_t)4, (int64_t)8);
  tb_input (g, "y", "float32", 2, (int64_t)8, (int64_t)3);
  tb_mm (g, "mm", "x", "y"); /* [4,3] */
  add_sum (g, "s1", "[1]", "[4]");
  add_sum (g, "s2", "[-1],true", "[4,1]");
  add_sum (g, "s3", "0", "[3]");
  add_sum (g, "s4", "[]", "[]");
  SgNodeId bad = add_sum (g, "s5", "[0]", "[4]");
  tb_output (g, 1, "s1");
  /* s1..s4 are right; s5 reduces dim 0 of [4,3] but claims [4] */
  assert_invalid (g, SG_GRAPH_ERROR_SHAPE, "node 's5': meta.shape: the sum_dim of 'mm' has shape [3]");
  g_array_index (g->dims, int64_t, g->nodes[bad].meta.first) = 3;
  assert_valid (g);
}
END_TEST

START_TEST (validator_catches_negative_cost)
{
  g_autoptr (SgGraph) g = small_graph ();
  tb_cost (g, sg_graph_lookup (g, "mm"), -1.0);
  assert_invalid (g, SG_GRAPH_ERROR_FORMAT, "node 'mm': cost_us: -1 is not a time");
}
END_TEST

START_TEST (validator_catches_group_without_own_rank)
{
  g_autoptr (SgGraph) g = small_graph ();
  g->rank = 1;
  g->groups[0].ranks[1] = 0; /* [0, 0]: neither ascending nor holding rank 1 */
  assert_invalid (g, SG_GRAPH_ERROR_GROUP, "groups.0.ranks[1]");
}
END_TEST

START_TEST (validator_catches_two_waits_on_one_collective)
{
  g_autoptr (SgGraph) g = small_graph ();
  /* make relu a second wait on ag */
  SgNodeId r = sg_graph_lookup (g, "relu");
  g->nodes[r].kind = SG_OP_WAIT;
  g_array_index (g->inputs, SgNodeId, g->nodes[r].in_first) = sg_graph_lookup (g, "ag");
  assert_invalid (g, SG_GRAPH_ERROR_INVALID, "node 'relu': args[0]: collective 'ag' is already waited on by 'ag_w'");
}
END_TEST

START_TEST (validator_catches_structural_kind_mismatch)
{
  g_autoptr (SgGraph) g = small_graph ();
  g->nodes[sg_graph_lookup (g, "x")].kind = SG_OP_MM;
  assert_invalid (g, SG_GRAPH_ERROR_FORMAT, "node 'x': op: 'placeholder/get_attr' node has kind 'mm'");
}
END_TEST

static Suite *
validate_suite (void)
{
  Suite *s = suite_create ("validate");
  TCase *v = tcase_create ("validate");
  tcase_add_test (v, validator_accepts_builder_graphs);
  tcase_add_test (v, validator_catches_forward_input);
  tcase_add_test (v, validator_catches_self_reference);
  tcase_add_test (v, validator_catches_duplicate_name);
  tcase_add_test (v, validator_catches_output_not_last);
  tcase_add_test (v, validator_catches_missing_output);
  tcase_add_test (v, validator_catches_collective_without_group);
  tcase_add_test (v, validator_catches_group_size_mismatch);
  tcase_add_test (v, validator_catches_collective_shape_mismatch);
  tcase_add_test (v, validator_catches_wait_on_non_collective);
  tcase_add_test (v, validator_catches_negative_extent);
  tcase_add_test (v, validator_catches_overflowing_shape);
  tcase_add_test (v, validator_catches_negative_cost);
  tcase_add_test (v, validator_checks_reduction_shapes);
  tcase_add_test (v, validator_catches_strides_past_a_fresh_value);
  tcase_add_test (v, validator_catches_pointwise_shape_mismatch);
  tcase_add_test (v, validator_catches_matmul_shape_mismatch);
  tcase_add_test (v, validator_catches_view_beyond_its_input);
  tcase_add_test (v, validator_catches_group_without_own_rank);
  tcase_add_test (v, validator_catches_two_waits_on_one_collective);
  tcase_add_test (v, validator_catches_structural_kind_mismatch);
  suite_add_tcase (s, v);
  return s;
}

int
main (void)
{
  SRunner *sr = srunner_create (validate_suite ());
  srunner_run_all (sr, CK_NORMAL);
  int failed = srunner_ntests_failed (sr);
  srunner_free (sr);
  return failed ? 1 : 0;
}
