/* test_permute.c: schedgraph's ring ops in the IR (docs/ops.md):
 * collective_permute's pairs, transport and wait, rank_roll's arguments
 * and block map, and the matmul `sm_count` key, as the loader and the
 * validator check them. */
#include <string.h>

#include "common.h"

/* x [8, 4] f32 on a world of 4 in one group "tp". */
static SgGraph *
ring_base (void)
{
  SgGraph *g = tb_new (4);
  tb_group (g, "tp", 4, 0, 1, 2, 3);
  tb_input (g, "x", "float32", 2, (int64_t)8, (int64_t)4);
  return g;
}

/* Appends a permute node from raw JSON and returns the loader's error. */
static GError *
append_error (SgGraph *g, const char *json)
{
  GError *error = NULL;
  ck_assert (sg_graph_append_json (g, json, &error) == SG_NO_NODE);
  return error;
}

#define PERMUTE(pairs, group, kwargs, shape)                                                     \
  "{\"name\":\"p\",\"op\":\"call_function\",\"target\":\"schedgraph.collective_permute\","    \
  "\"args\":[{\"node\":\"x\"}," pairs ",\"" group "\"],\"kwargs\":" kwargs                     \
  ",\"meta\":{\"shape\":" shape ",\"dtype\":\"float32\"}}"

START_TEST (ring_permute_with_its_wait_is_valid)
{
  g_autoptr (SgGraph) g = ring_base ();
  SgNodeId p = tb_permute (g, "p", "x", "tp", "[[0,1],[1,2],[2,3],[3,0]]", "ce");
  tb_wait (g, "p_w", "p");
  tb_output (g, 1, "p_w");
  assert_valid (g);
  ck_assert (sg_op_is_collective (g->nodes[p].kind));
  SgPermute perm;
  ck_assert (sg_node_permute (g, p, &perm, NULL));
  ck_assert_int_eq (perm.n_pairs, 4);
  ck_assert_int_eq (perm.transport, SG_TRANSPORT_CE);
  for (int r = 0; r < 4; r++) {
    ck_assert_int_eq (perm.target[r], (r + 1) % 4);
    ck_assert_int_eq (perm.source[r], (r + 3) % 4);
  }
  sg_permute_clear (&perm);
}
END_TEST

START_TEST (partial_permutation_leaves_ranks_out)
{
  g_autoptr (SgGraph) g = ring_base ();
  SgNodeId p = tb_permute (g, "p", "x", "tp", "[[2,0]]", NULL);
  tb_wait (g, "p_w", "p");
  tb_output (g, 1, "p_w");
  assert_valid (g);
  SgPermute perm;
  ck_assert (sg_node_permute (g, p, &perm, NULL));
  ck_assert_int_eq (perm.transport, SG_TRANSPORT_NCCL);
  ck_assert_int_eq (perm.source[0], 2);
  ck_assert_int_eq (perm.target[2], 0);
  ck_assert_int_eq (perm.source[1], -1);
  ck_assert_int_eq (perm.target[1], -1);
  sg_permute_clear (&perm);
}
END_TEST

/* What the loader refuses: the pairs (a partial permutation of the
 * group's ranks), the group, the sizes, the transport. */
START_TEST (permute_arguments_are_checked_at_load)
{
  static const struct {
    const char *json;
    int code;
    const char *msg;
  } bad[] = {
    { PERMUTE ("[[0,1],[2,1]]", "tp", "{}", "[8,4]"), SG_GRAPH_ERROR_GROUP,
      "node 'p': args[1][1]: rank 1 receives twice (also from 0)" },
    { PERMUTE ("[[0,1],[0,2]]", "tp", "{}", "[8,4]"), SG_GRAPH_ERROR_GROUP,
      "node 'p': args[1][1]: rank 0 sends twice (also to 1)" },
    { PERMUTE ("[[0,4]]", "tp", "{}", "[8,4]"), SG_GRAPH_ERROR_GROUP,
      "args[1][0]: a pair of ranks outside group 'tp' (0 .. 3)" },
    { PERMUTE ("[[0]]", "tp", "{}", "[8,4]"), SG_GRAPH_ERROR_FORMAT,
      "args[1][0]: expected [source, target]" },
    { PERMUTE ("7", "tp", "{}", "[8,4]"), SG_GRAPH_ERROR_FORMAT,
      "args[1]: expected the source->target pairs" },
    { PERMUTE ("[[0,1]]", "dp", "{}", "[8,4]"), SG_GRAPH_ERROR_GROUP,
      "node 'p': args[2]: group 'dp' is not in `groups`" },
    { PERMUTE ("[[0,1]]", "tp", "{}", "[16,4]"), SG_GRAPH_ERROR_GROUP,
      "64 elements out for 32 in" },
    { PERMUTE ("[[0,1]]", "tp", "{\"transport\":\"nvshmem\"}", "[8,4]"), SG_GRAPH_ERROR_FORMAT,
      "node 'p': kwargs.transport: expected \"nccl\" or \"ce\"" },
  };
  g_autoptr (SgGraph) g = ring_base ();
  for (size_t i = 0; i < G_N_ELEMENTS (bad); i++)
    assert_error (append_error (g, bad[i].json), bad[i].code, bad[i].msg);
}
END_TEST

START_TEST (validator_catches_permute_without_wait)
{
  g_autoptr (SgGraph) g = ring_base ();
  tb_permute (g, "p", "x", "tp", "[[0,1],[1,0]]", NULL);
  tb_output (g, 1, "p");
  assert_invalid (g, SG_GRAPH_ERROR_INVALID,
                  "node 'p': no wait_tensor waits on this collective_permute");
}
END_TEST

START_TEST (validator_catches_pairs_a_pass_broke)
{
  g_autoptr (SgGraph) g = ring_base ();
  SgNodeId p = tb_permute (g, "p", "x", "tp", "[[0,1],[1,0]]", NULL);
  tb_wait (g, "p_w", "p");
  tb_output (g, 1, "p_w");
  /* the pairs' typed arguments as a pass could leave them */
  SgArg *pairs = &g_array_index (g->args, SgArg, g->nodes[p].args_first + 1);
  uint32_t np, two;
  const SgArg *pr = sg_arg_items (g, pairs, &np);
  SgArg *second = (SgArg *)sg_arg_items (g, &pr[1], &two);
  second[0].i = 3, second[1].i = 1; /* [[0,1],[3,1]] */
  assert_invalid (g, SG_GRAPH_ERROR_GROUP, "node 'p': args[1][1]: rank 1 receives twice");
  pairs->n = 1; /* [[0,1]] */
  g->nodes[p].meta.dtype = SG_DTYPE_BF16;
  assert_invalid (g, SG_GRAPH_ERROR_SHAPE, "node 'p': meta.dtype: bfloat16, but its input 'x'");
}
END_TEST

START_TEST (rank_roll_maps_blocks_by_group_rank)
{
  /* out block b = in block (b + shift + sign * r) mod k */
  ck_assert_int_eq (sg_rank_roll_block (0, 4, 0, 1, 3), 3);
  ck_assert_int_eq (sg_rank_roll_block (1, 4, 0, 1, 3), 0);
  ck_assert_int_eq (sg_rank_roll_block (0, 4, 0, -1, 1), 3);
  ck_assert_int_eq (sg_rank_roll_block (3, 4, -5, -1, 2), 0);
  for (int64_t r = 0; r < 8; r++)
    for (int64_t s = -9; s <= 9; s++) {
      bool seen[8] = { false };
      for (int64_t b = 0; b < 8; b++) {
        int64_t x = sg_rank_roll_block (b, 8, s, -1, r);
        ck_assert (x >= 0 && x < 8 && !seen[x]);
        seen[x] = true;
      }
    }
  g_autoptr (SgGraph) g = ring_base ();
  SgNodeId id = tb_rank_roll (g, "rr", "x", "tp", 1, -1);
  tb_output (g, 1, "rr");
  assert_valid (g);
  SgRankRoll rr;
  ck_assert (sg_node_rank_roll (g, id, &rr, NULL));
  ck_assert_int_eq (rr.group, 0);
  ck_assert_int_eq (rr.shift, 1);
  ck_assert_int_eq (rr.sign, -1);
}
END_TEST

#define ROLL(args, shape)                                                                       \
  "{\"name\":\"rr\",\"op\":\"call_function\",\"target\":\"schedgraph.rank_roll\",\"args\":" args \
  ",\"kwargs\":{},\"meta\":{\"shape\":" shape ",\"dtype\":\"float32\"}}"

START_TEST (rank_roll_rejects_bad_arguments)
{
  g_autoptr (SgGraph) g = ring_base ();
  tb_input (g, "y", "float32", 2, (int64_t)6, (int64_t)4);
  assert_error (append_error (g, ROLL ("[{\"node\":\"x\"},0,2,\"tp\"]", "[8,4]")),
                SG_GRAPH_ERROR_FORMAT, "node 'rr': args[2]: expected the sign (1 or -1)");
  assert_error (append_error (g, ROLL ("[{\"node\":\"x\"},0,1,\"dp\"]", "[8,4]")),
                SG_GRAPH_ERROR_GROUP, "node 'rr': args[3]: group 'dp' is not in `groups`");
  assert_error (append_error (g, ROLL ("[{\"node\":\"y\"},0,1,\"tp\"]", "[6,4]")),
                SG_GRAPH_ERROR_SHAPE, "dim 0 of 'y' (6) is not divisible into the 4 blocks");
  assert_error (append_error (g, ROLL ("[{\"node\":\"x\"},0,1,\"tp\"]", "[4,8]")),
                SG_GRAPH_ERROR_SHAPE, "a rank_roll keeps its input's shape and dtype");
}
END_TEST

START_TEST (sm_count_is_a_matmul_option)
{
  g_autoptr (SgGraph) g = ring_base ();
  tb_input (g, "w", "float32", 2, (int64_t)4, (int64_t)4);
  SgNodeId mm = tb_node (g, "{\"name\":\"mm\",\"op\":\"call_function\",\"target\":"
                            "\"aten.mm.default\",\"args\":[{\"node\":\"x\"},{\"node\":\"w\"}],"
                            "\"sm_count\":112,\"meta\":{\"shape\":[8,4],\"dtype\":\"float32\"}}");
  SgNodeId relu = tb_pointwise (g, "relu", "aten.relu.default", "mm", NULL);
  tb_output (g, 1, "relu");
  assert_valid (g);
  ck_assert_int_eq (g->nodes[mm].sm_count, 112);
  ck_assert (!sg_node_holds_sms (&g->nodes[mm]));
  g->nodes[mm].sm_count = 0;
  ck_assert (sg_node_holds_sms (&g->nodes[mm]));
  g->nodes[relu].sm_count = 8;
  assert_invalid (g, SG_GRAPH_ERROR_FORMAT, "node 'relu': sm_count: only matmuls");
  assert_error (append_error (g, "{\"name\":\"m2\",\"op\":\"call_function\",\"target\":"
                                 "\"aten.mm.default\",\"args\":[{\"node\":\"x\"},{\"node\":\"w\"}],"
                                 "\"sm_count\":-3,\"meta\":{\"shape\":[8,4],\"dtype\":"
                                 "\"float32\"}}"),
                SG_GRAPH_ERROR_FORMAT, "node 'm2': field 'sm_count': expected an integer");
}
END_TEST

static Suite *
permute_suite (void)
{
  Suite *s = suite_create ("permute");
  TCase *t = tcase_create ("permute");
  tcase_add_test (t, ring_permute_with_its_wait_is_valid);
  tcase_add_test (t, partial_permutation_leaves_ranks_out);
  tcase_add_test (t, permute_arguments_are_checked_at_load);
  tcase_add_test (t, validator_catches_permute_without_wait);
  tcase_add_test (t, validator_catches_pairs_a_pass_broke);
  tcase_add_test (t, rank_roll_maps_blocks_by_group_rank);
  tcase_add_test (t, rank_roll_rejects_bad_arguments);
  tcase_add_test (t, sm_count_is_a_matmul_option);
  suite_add_tcase (s, t);
  return s;
}

int
main (void)
{
  SRunner *sr = srunner_create (permute_suite ());
  srunner_run_all (sr, CK_NORMAL);
  int failed = srunner_ntests_failed (sr);
  srunner_free (sr);
  return failed ? 1 : 0;
}
