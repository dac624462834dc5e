/* test_zerocopy.c: zero-copy buckets (graph/elide.c) through the cost
 * model, the liveness rule and codegen.
 *
 * Tiny builder graphs, bucketed with bucket/'s rewrite: which pack and
 * unpack nodes are elided and why the others stay, that elided nodes cost
 * nothing and lower to no instruction, that the members live inside the
 * bucket's buffer at their concatenation offsets, that the liveness rule
 * counts that buffer once, and that every plan passes the validator
 * (bounds, lifetimes, the race proof).
 */
#include <check.h>
#include <string.h>

#include "bucket.h"
#include "builder.h"
#include "codegen.h"
#include "estimate.h"
#include "plan-test.h"

/* every bucket of these tests is flat (pack / unpack) */
#define FLAT SG_BUCKET_LOWERING_FLAT

#define I(x) ((int64_t)(x))

/* Buckets the collectives named in @names (one bucket) and estimates. */
static void
bucket (SgGraph *g, const char *const *names, int32_t n)
{
  SgNodeId ids[8];
  for (int32_t i = 0; i < n; i++) {
    ids[i] = sg_graph_lookup (g, names[i]);
    ck_assert_int_ne (ids[i], SG_NO_NODE);
  }
  SgBucketSpec spec = { ids, n, FLAT };
  GError *e = NULL;
  ck_assert_msg (sg_bucket_apply (g, &spec, 1, &e), "%s", e ? e->message : "");
  SgConfig cfg;
  sg_config_init (&cfg);
  ck_assert_msg (sg_estimate_costs (g, &cfg, &e), "%s", e ? e->message : "");
  ck_assert_msg (sg_graph_validate (g, &e), "%s", e ? e->message : "");
}

/* Three parameter shards gathered and used by one matmul chain. */
static SgGraph *
three_gathers (void)
{
  SgGraph *g = tb_new (2);
  tb_group (g, "0", 2, 0, 1);
  tb_input (g, "x", "float32", 2, I (8), I (8));
  const char *w[] = { "w0", "w1", "w2" }, *ag[] = { "ag0", "ag1", "ag2" },
             *wt[] = { "ag0_w", "ag1_w", "ag2_w" }, *mm[] = { "m0", "m1", "m2" };
  for (int i = 0; i < 3; i++) {
    tb_input (g, w[i], "float32", 2, I (4), I (8));
    tb_all_gather (g, ag[i], w[i], "0");
    tb_wait (g, wt[i], ag[i]);
  }
  tb_mm (g, mm[0], "x", wt[0]);
  tb_mm (g, mm[1], mm[0], wt[1]);
  tb_mm (g, mm[2], mm[1], wt[2]);
  tb_output (g, 1, "m2");
  return g;
}

START_TEST (gathered_parameter_shards_are_seeded_into_the_bucket)
{
  g_autoptr (SgGraph) g = three_gathers ();
  const char *const names[] = { "ag0", "ag1", "ag2" };
  bucket (g, names, 3);
  ck_assert_int_eq (pt_reason_of (g, "bucket_pack_ag0"), SG_COPY_ELIDED);
  ck_assert_int_eq (pt_reason_of (g, "bucket_unpack_ag1"), SG_COPY_RANK_MAJOR);
  SgNodeId p = sg_graph_lookup (g, "bucket_pack_ag0");
  ck_assert_int_eq (g->nodes[p].est_src, SG_COST_FREE);
  ck_assert_double_eq (g->nodes[p].est_us, 0.0);
  g_autoptr (SgPlan) plan = pt_lower (g);
  ck_assert (!pt_has_kernel (plan, "bucket_pack_ag0"));
  ck_assert (pt_has_kernel (plan, "bucket_unpack_ag0"));
  /* one whole-step buffer: the three shards at 0, 32, 64 floats, the
   * bucket input over all of them */
  const SgPlanValue *w0 = pt_value (plan, "w0"), *w1 = pt_value (plan, "w1"), *w2 = pt_value (plan, "w2");
  const SgPlanValue *pk = pt_value (plan, "bucket_pack_ag0");
  ck_assert_int_eq (w0->buffer, pk->buffer);
  ck_assert_int_eq (w1->buffer, pk->buffer);
  ck_assert_int_eq (w2->buffer, pk->buffer);
  ck_assert_uint_eq (w0->offset, 0);
  ck_assert_uint_eq (w1->offset, 32 * 4);
  ck_assert_uint_eq (w2->offset, 64 * 4);
  ck_assert_int_eq (w1->init, SG_INIT_INPUT);
  ck_assert_uint_eq (plan->buffers[pk->buffer].bytes, 96 * 4);
  ck_assert_int_eq (plan->buffers[pk->buffer].first_ins, 0);
  ck_assert_int_eq (plan->buffers[pk->buffer].last_ins, plan->n_ins - 1);
  /* the kept unpacks say why */
  for (int32_t i = 0; i < plan->n_ins; i++)
    if (plan->ins[i].kind == SG_INS_KERNEL && plan->ins[i].op == SG_OP_BUCKET_UNPACK)
      ck_assert_str_eq (
        cJSON_GetStringValue (cJSON_GetObjectItem (plan->ins[i].kwargs, "schedgraph_copy")),
        sg_copy_reason_text (SG_COPY_RANK_MAJOR));
}
END_TEST

/* Gradients produced by matmuls and reduced (@kind: reduce_scatter or
 * all_reduce) in one bucket; the output returns the results. @transposed:
 * the second gradient is a transposed view (as autograd's t(mm)). */
static SgGraph *
gradients (bool reduce_scatter, bool transposed)
{
  SgGraph *g = tb_new (2);
  tb_group (g, "0", 2, 0, 1);
  tb_input (g, "x", "float32", 2, I (8), I (8));
  tb_mm (g, "g0", "x", "x");
  tb_mm (g, "g1", "g0", "x");
  if (transposed)
    tb_t (g, "g1t", "g1");
  const char *in1 = transposed ? "g1t" : "g1";
  if (reduce_scatter) {
    tb_reduce_scatter (g, "r0", "g0", "0");
    tb_reduce_scatter (g, "r1", in1, "0");
  } else {
    tb_all_reduce (g, "r0", "g0", "0");
    tb_all_reduce (g, "r1", in1, "0");
  }
  tb_wait (g, "r0_w", "r0");
  tb_wait (g, "r1_w", "r1");
  tb_output (g, 2, "r0_w", "r1_w");
  return g;
}

START_TEST (reduce_scatter_results_are_views_of_the_bucket)
{
  g_autoptr (SgGraph) g = gradients (true, false);
  const char *const names[] = { "r0", "r1" };
  bucket (g, names, 2);
  ck_assert_int_eq (pt_reason_of (g, "bucket_pack_r0"), SG_COPY_INTERLEAVED);
  ck_assert_int_eq (pt_reason_of (g, "bucket_unpack_r0"), SG_COPY_ELIDED);
  ck_assert_int_eq (pt_reason_of (g, "bucket_unpack_r1"), SG_COPY_ELIDED);
  g_autoptr (SgPlan) plan = pt_lower (g);
  ck_assert (pt_has_kernel (plan, "bucket_pack_r0"));
  ck_assert (!pt_has_kernel (plan, "bucket_unpack_r0"));
  const SgPlanValue *c = pt_value (plan, "bucket_r0"), *u1 = pt_value (plan, "bucket_unpack_r1");
  ck_assert_int_eq (u1->buffer, c->buffer);
  ck_assert_uint_eq (u1->offset, 32 * 4); /* after r0's 32 output floats */
}
END_TEST

START_TEST (all_reduce_of_computed_gradients_copies_nothing)
{
  g_autoptr (SgGraph) g = gradients (false, false);
  const char *const names[] = { "r0", "r1" };
  bucket (g, names, 2);
  ck_assert_int_eq (pt_reason_of (g, "bucket_pack_r0"), SG_COPY_ELIDED);
  ck_assert_int_eq (pt_reason_of (g, "bucket_unpack_r1"), SG_COPY_ELIDED);
  g_autoptr (SgPlan) plan = pt_lower (g);
  for (int32_t i = 0; i < plan->n_ins; i++)
    ck_assert (plan->ins[i].kind != SG_INS_KERNEL
               || sg_op_class (plan->ins[i].op) != SG_CLASS_BUCKET);
  /* the matmuls write straight into the bucket's input */
  const SgPlanValue *g0 = pt_value (plan, "g0"), *g1 = pt_value (plan, "g1");
  const SgPlanValue *pk = pt_value (plan, "bucket_pack_r0");
  ck_assert_int_eq (g0->buffer, pk->buffer);
  ck_assert_int_eq (g1->buffer, pk->buffer);
  ck_assert_uint_eq (g1->offset, 64 * 4);
  ck_assert_int_eq (g0->init, SG_INIT_NONE);
  /* liveness: the shared buffer is one storage of the pack's bytes; the
   * graph's peak never counts the elided nodes again */
  SgElision el;
  sg_graph_elision (g, &el);
  SgNodeId ig0 = sg_graph_lookup (g, "g0"), ig1 = sg_graph_lookup (g, "g1");
  ck_assert_int_eq (el.root[ig1], ig0);
  ck_assert_int_eq (el.root[sg_graph_lookup (g, "bucket_pack_r0")], ig0);
  ck_assert_int_eq (el.root[sg_graph_lookup (g, "bucket_unpack_r1")],
                    el.root[sg_graph_lookup (g, "bucket_r0")]);
  sg_elision_clear (&el);
  /* x (256) + gradients 2 x 256 + result 512 bytes: live together at most */
  ck_assert_uint_le (sg_graph_peak_bytes (g, NULL), 256 + 512 + 512);
}
END_TEST

START_TEST (a_transposed_member_keeps_its_copy)
{
  g_autoptr (SgGraph) g = gradients (false, true);
  const char *const names[] = { "r0", "r1" };
  bucket (g, names, 2);
  ck_assert_int_eq (pt_reason_of (g, "bucket_pack_r0"), SG_COPY_STRIDED_INPUT);
  SgNodeId p = sg_graph_lookup (g, "bucket_pack_r0");
  ck_assert_int_eq (g->nodes[p].est_src, SG_COST_MODEL);
  ck_assert (g->nodes[p].est_us > 0);
  g_autoptr (SgPlan) plan = pt_lower (g);
  ck_assert (pt_has_kernel (plan, "bucket_pack_r0"));
}
END_TEST

/* A member input the graph returns, itself or through a view of it
 * (@through_view: t(g1), whose storage is g1's), keeps its copy. */
static void
assert_returned_member_keeps_its_copy (bool through_view)
{
  g_autoptr (SgGraph) g = tb_new (2);
  tb_group (g, "0", 2, 0, 1);
  tb_input (g, "x", "float32", 2, I (8), I (8));
  tb_mm (g, "g0", "x", "x");
  tb_mm (g, "g1", "g0", "x");
  if (through_view)
    tb_t (g, "g1t", "g1");
  tb_all_reduce (g, "r0", "g0", "0");
  tb_all_reduce (g, "r1", "g1", "0");
  tb_wait (g, "r0_w", "r0");
  tb_wait (g, "r1_w", "r1");
  tb_output (g, 3, "r0_w", "r1_w", through_view ? "g1t" : "g1");
  const char *const names[] = { "r0", "r1" };
  bucket (g, names, 2);
  ck_assert_int_eq (pt_reason_of (g, "bucket_pack_r0"), SG_COPY_OUTPUT_INPUT);
  g_autoptr (SgPlan) plan = pt_lower (g);
  ck_assert (pt_has_kernel (plan, "bucket_pack_r0"));
}

START_TEST (a_member_returned_by_the_graph_keeps_its_copy)
{
  assert_returned_member_keeps_its_copy (false);
  assert_returned_member_keeps_its_copy (true);
}
END_TEST

START_TEST (buckets_of_the_same_shards_share_their_layout)
{
  /* FSDP with resharding gathers each shard twice (forward, backward):
   * the second bucket of the same members is a view of the first's input;
   * in another order it keeps its copy */
  for (int swap = 0; swap < 2; swap++) {
    g_autoptr (SgGraph) g = tb_new (2);
    tb_group (g, "0", 2, 0, 1);
    tb_input (g, "x", "float32", 2, I (8), I (8));
    tb_input (g, "w0", "float32", 2, I (4), I (8));
    tb_input (g, "w1", "float32", 2, I (4), I (8));
    tb_all_gather (g, "a0", "w0", "0");
    tb_all_gather (g, "a1", "w1", "0");
    tb_wait (g, "a0_w", "a0");
    tb_wait (g, "a1_w", "a1");
    tb_mm (g, "m0", "x", "a0_w");
    tb_mm (g, "m1", "m0", "a1_w");
    tb_all_gather (g, "b0", swap ? "w1" : "w0", "0");
    tb_all_gather (g, "b1", swap ? "w0" : "w1", "0");
    tb_wait (g, "b0_w", "b0");
    tb_wait (g, "b1_w", "b1");
    tb_mm (g, "m2", "m1", "b0_w");
    tb_mm (g, "m3", "m2", "b1_w");
    tb_output (g, 1, "m3");
    SgNodeId first[2] = { sg_graph_lookup (g, "a0"), sg_graph_lookup (g, "a1") };
    SgNodeId second[2] = { sg_graph_lookup (g, "b0"), sg_graph_lookup (g, "b1") };
    SgBucketSpec specs[2] = { { first, 2, FLAT }, { second, 2, FLAT } };
    GError *e = NULL;
    ck_assert_msg (sg_bucket_apply (g, specs, 2, &e), "%s", e ? e->message : "");
    ck_assert_int_eq (pt_reason_of (g, "bucket_pack_a0"), SG_COPY_ELIDED);
    ck_assert_int_eq (pt_reason_of (g, "bucket_pack_b0"),
                      swap ? SG_COPY_SHARED_INPUT : SG_COPY_ELIDED);
    g_autoptr (SgPlan) plan = pt_lower (g);
    bool shared = pt_value (plan, "bucket_pack_b0")->buffer == pt_value (plan, "bucket_pack_a0")->buffer;
    ck_assert (shared == !swap);
  }
}
END_TEST

static Suite *
zerocopy_suite (void)
{
  Suite *s = suite_create ("zerocopy");
  TCase *tc = tcase_create ("zerocopy");
  tcase_add_test (tc, gathered_parameter_shards_are_seeded_into_the_bucket);
  tcase_add_test (tc, reduce_scatter_results_are_views_of_the_bucket);
  tcase_add_test (tc, all_reduce_of_computed_gradients_copies_nothing);
  tcase_add_test (tc, a_transposed_member_keeps_its_copy);
  tcase_add_test (tc, a_member_returned_by_the_graph_keeps_its_copy);
  tcase_add_test (tc, buckets_of_the_same_shards_share_their_layout);
  suite_add_tcase (s, tc);
  return s;
}

int
main (void)
{
  SRunner *sr = srunner_create (zerocopy_suite ());
  srunner_run_all (sr, CK_NORMAL);
  int failed = srunner_ntests_failed (sr);
  srunner_free (sr);
  return failed ? 1 : 0;
}
