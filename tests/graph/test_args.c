/* test_args.c: typed arguments (graph/args.c): what each JSON value parses
 * to, the op table's parameter positions, references that survive
 * renumbering, and the JSON written back being the input's text. */
#include <check.h>
#include <string.h>

#include "common.h"

/* The compact JSON of node @id's args and kwargs, "ARGS KWARGS". */
static void
assert_echo (const SgGraph *g, SgNodeId id, const char *want)
{
  g_autofree char *text = tb_args_text (g, id);
  ck_assert_str_eq (text, want);
}

START_TEST (json_values_parse_to_their_types)
{
  g_autoptr (SgGraph) g = tb_new (1);
  tb_input (g, "x", "float32", 1, (int64_t)4);
  SgNodeId id = tb_node (
      g, "{\"name\":\"f\",\"op\":\"call_function\",\"target\":\"my.op\",\"args\":"
         "[{\"node\":\"x\"},3,2.5,-0.0,1e300,true,null,\"s\",[1,[2,{\"node\":\"x\"}]],{\"a\":1}],"
         "\"kwargs\":{\"dtype\":\"torch.bfloat16\",\"device\":\"cuda:3\",\"layout\":"
         "\"torch.strided\",\"memory_format\":\"torch.preserve_format\",\"other\":\"float32\"}}");
  ck_assert_uint_eq (g->nodes[id].n_args, 10);
  ck_assert_uint_eq (g->nodes[id].n_in, 1); /* x, referenced twice */
  ck_assert_int_eq (sg_arg_node (g, id, sg_node_arg (g, id, 0)), 0);
  int64_t i;
  double f;
  bool b;
  ck_assert (sg_arg_int (sg_node_arg (g, id, 1), &i) && i == 3);
  ck_assert (!sg_arg_int (sg_node_arg (g, id, 2), &i));
  ck_assert (sg_arg_float (sg_node_arg (g, id, 2), &f) && f == 2.5);
  ck_assert (sg_arg_float (sg_node_arg (g, id, 1), &f) && f == 3.0); /* ints read as floats */
  ck_assert_int_eq (sg_node_arg (g, id, 3)->type, SG_ARG_INT);      /* -0.0 is integral */
  ck_assert_int_eq (sg_node_arg (g, id, 4)->type, SG_ARG_FLOAT);    /* beyond int64 */
  ck_assert (sg_arg_bool (sg_node_arg (g, id, 5), &b) && b);
  ck_assert (sg_arg_is_none (sg_node_arg (g, id, 6)) && sg_arg_is_none (sg_node_arg (g, id, 10)));
  ck_assert_str_eq (sg_arg_str (sg_node_arg (g, id, 7)), "s");
  uint32_t n;
  const SgArg *l = sg_arg_items (g, sg_node_arg (g, id, 8), &n);
  ck_assert_uint_eq (n, 2);
  const SgArg *inner = sg_arg_items (g, &l[1], &n);
  ck_assert_uint_eq (n, 2);
  ck_assert_int_eq (sg_arg_node (g, id, &inner[1]), 0);
  const SgArg *d = sg_arg_items (g, sg_node_arg (g, id, 9), &n);
  ck_assert_uint_eq (n, 1);
  ck_assert_str_eq (sg_arg_str (&d[0]), "a");
  const SgArg *dt = sg_node_kwarg (g, id, "dtype");
  ck_assert_int_eq (dt->type, SG_ARG_DTYPE);
  ck_assert_int_eq (dt->tag, SG_DTYPE_BF16);
  const SgArg *dev = sg_node_kwarg (g, id, "device");
  ck_assert_int_eq (dev->type, SG_ARG_DEVICE);
  ck_assert_int_eq (dev->tag, SG_DEVICE_CUDA);
  ck_assert_int_eq ((int32_t)dev->n, 3);
  ck_assert_int_eq (sg_node_kwarg (g, id, "layout")->tag, SG_LAYOUT_STRIDED);
  ck_assert_int_eq (sg_node_kwarg (g, id, "memory_format")->tag, SG_MEMORY_FORMAT_PRESERVE);
  /* a dtype's spelling at another keyword stays a string */
  ck_assert_int_eq (sg_node_kwarg (g, id, "other")->type, SG_ARG_STR);
  ck_assert_ptr_null (sg_node_kwarg (g, id, "missing"));
  /* written back: the input's compact text (cJSON's number printing) */
  assert_echo (g, id,
               "[{\"node\":\"x\"},3,2.5,0,1e+300,true,null,\"s\",[1,[2,{\"node\":\"x\"}]],{\"a\":1}] "
               "{\"dtype\":\"torch.bfloat16\",\"device\":\"cuda:3\",\"layout\":\"torch.strided\","
               "\"memory_format\":\"torch.preserve_format\",\"other\":\"float32\"}");
}
END_TEST

START_TEST (parameters_are_read_by_keyword_first_then_by_position)
{
  g_autoptr (SgGraph) g = tb_new (1);
  tb_input (g, "q", "bfloat16", 4, (int64_t)1, (int64_t)2, (int64_t)8, (int64_t)4);
  const char *t = "aten._scaled_dot_product_flash_attention.default";
  SgNodeId pos = tb_node (g, "{\"name\":\"a\",\"op\":\"call_function\",\"target\":\"%s\","
                             "\"args\":[{\"node\":\"q\"},{\"node\":\"q\"},{\"node\":\"q\"},0.0,"
                             "true],\"kwargs\":{\"scale\":0.5}}", t);
  SgNodeId kw = tb_node (g, "{\"name\":\"b\",\"op\":\"call_function\",\"target\":\"%s\","
                            "\"args\":[{\"node\":\"q\"},{\"node\":\"q\"},{\"node\":\"q\"},0.0,"
                            "true],\"kwargs\":{\"is_causal\":false}}", t);
  bool causal;
  double scale;
  ck_assert (sg_arg_bool (sg_node_param (g, pos, SG_PARAM_IS_CAUSAL), &causal) && causal);
  ck_assert (sg_arg_bool (sg_node_param (g, kw, SG_PARAM_IS_CAUSAL), &causal) && !causal);
  /* scale is keyword-only: no position */
  ck_assert_int_eq (sg_op_param_pos (SG_OP_SDPA_FLASH, SG_PARAM_SCALE), -1);
  ck_assert (sg_arg_float (sg_node_param (g, pos, SG_PARAM_SCALE), &scale) && scale == 0.5);
  ck_assert_ptr_null (sg_node_param (g, kw, SG_PARAM_SCALE));
  ck_assert_int_eq (sg_node_param_node (g, pos, SG_PARAM_VALUE), 0);
  ck_assert_ptr_nonnull (sg_node_param_meta (g, pos, SG_PARAM_QUERY));
  /* the backward's positions */
  ck_assert_int_eq (sg_op_param_pos (SG_OP_SDPA_CUDNN_BWD, SG_PARAM_IS_CAUSAL), 14);
  ck_assert_int_eq (sg_op_param_pos (SG_OP_SDPA_EFFICIENT_BWD, SG_PARAM_LOGSUMEXP), 6);
  ck_assert_int_eq (sg_op_param_pos (SG_OP_SDPA_FLASH_BWD, SG_PARAM_PHILOX_OFFSET), 13);
  ck_assert_str_eq (sg_param_name (SG_PARAM_GROUP_NAME), "group_name");
  SgParam a, b;
  ck_assert (sg_op_matmul_params (SG_OP_ADDMM, &a, &b) && a == SG_PARAM_MAT1 && b == SG_PARAM_MAT2);
  ck_assert (!sg_op_matmul_params (SG_OP_RELU, &a, &b));
}
END_TEST

START_TEST (references_survive_permute_select_and_copy)
{
  g_autoptr (SgGraph) g = small_graph ();
  /* ids: x 0, w 1, ag 2, ag_w 3, t 4, mm 5, relu 6, out 7 */
  SgNodeId mm = sg_graph_lookup (g, "mm");
  SgNodeId order[] = { 1, 2, 3, 4, 0, 5, 6, 7 };
  ck_assert (sg_graph_permute (g, order, NULL));
  mm = sg_graph_lookup (g, "mm");
  ck_assert_int_eq (sg_arg_node (g, mm, sg_node_arg (g, mm, 0)), sg_graph_lookup (g, "x"));
  ck_assert_int_eq (sg_arg_node (g, mm, sg_node_arg (g, mm, 1)), sg_graph_lookup (g, "wt"));
  g_autoptr (SgGraph) c = sg_graph_copy (g);
  g_autofree char *before = tb_args_text (g, mm);
  g_autofree char *copied = tb_args_text (c, mm);
  ck_assert_str_eq (before, copied);
  ck_assert_ptr_ne (sg_arg_str (sg_node_arg (c, 1, 2)), sg_arg_str (sg_node_arg (g, 1, 2)));
  SgNodeId keep[] = { 0, 1, 2, 3, 4, 5, 7 }; /* relu dropped: out reads it */
  ck_assert (!sg_graph_select (g, keep, 7, NULL));
  SgNodeId all[] = { 4, 0, 1, 2, 3, 5, 6, 7 };
  ck_assert (sg_graph_select (g, all, 8, NULL));
  mm = sg_graph_lookup (g, "mm");
  g_autofree char *after = tb_args_text (g, mm);
  ck_assert_str_eq (before, after);
  assert_valid (g);
}
END_TEST

START_TEST (validator_catches_a_reference_outside_the_inputs)
{
  g_autoptr (SgGraph) g = small_graph ();
  SgNodeId mm = sg_graph_lookup (g, "mm");
  SgArg *a = &g_array_index (g->args, SgArg, g->nodes[mm].args_first + 1);
  a->input = 7;
  assert_invalid (g, SG_GRAPH_ERROR_REF, "reference to input #7 of 2");
}
END_TEST

static Suite *
suite (void)
{
  Suite *s = suite_create ("args");
  TCase *tc = tcase_create ("args");
  tcase_add_test (tc, json_values_parse_to_their_types);
  tcase_add_test (tc, parameters_are_read_by_keyword_first_then_by_position);
  tcase_add_test (tc, references_survive_permute_select_and_copy);
  tcase_add_test (tc, validator_catches_a_reference_outside_the_inputs);
  suite_add_tcase (s, tc);
  return s;
}

int
main (void)
{
  return run_suite (suite ());
}
