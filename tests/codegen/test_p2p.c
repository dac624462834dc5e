/* test_p2p.c: collective_permute and sm_count through codegen and the plan
 * (plan/): the lowered instruction states its pairs and transport, the
 * text round-trips, and the validator's pair rules and the race proof's
 * cross-rank rules (input and output of a step never share bytes; the copy
 * engine needs dense operands) reject plans that break them, naming the
 * instruction and the buffer (docs/plan-format.md). */
#include <check.h>
#include <string.h>

#include "builder.h"
#include "codegen.h"
#include "plan-test.h"

/* x [8, 4] f32 over group "0" of 2 ranks; p = permute(@src) over
 * @transport; wait; mm(p_w, w) with an SM-count target; output. */
static SgGraph *
ring_graph (const char *transport, bool transposed)
{
  SgGraph *g = tb_new (2);
  tb_group (g, "0", 2, 0, 1);
  tb_input (g, "x", "float32", 2, (int64_t)4, (int64_t)4);
  tb_input (g, "w", "float32", 2, (int64_t)4, (int64_t)4);
  if (transposed)
    tb_t (g, "xt", "x");
  tb_permute (g, "p", transposed ? "xt" : "x", "0", "[[0,1],[1,0]]", transport);
  tb_wait (g, "p_w", "p");
  tb_node (g, "{\"name\":\"mm\",\"op\":\"call_function\",\"target\":\"aten.mm.default\","
              "\"args\":[{\"node\":\"p_w\"},{\"node\":\"w\"}],\"sm_count\":112,"
              "\"meta\":{\"shape\":[4,4],\"dtype\":\"float32\"}}");
  tb_output (g, 1, "mm");
  return g;
}

static SgPlan *
lower (SgGraph *g)
{
  SgPlan *p = NULL;
  g_autoptr (GError) e = NULL;
  ck_assert_msg (sg_codegen_plan (g, NULL, NULL, "test", "t", &p, &e), "%s", e ? e->message : "");
  return p;
}

static int32_t
find (const SgPlan *p, SgInsKind kind, const char *name)
{
  for (int32_t i = 0; i < p->n_ins; i++)
    if (p->ins[i].kind == kind && p->ins[i].name && strcmp (p->ins[i].name, name) == 0)
      return i;
  return -1;
}

START_TEST (permute_lowers_with_its_pairs_and_transport)
{
  g_autoptr (SgGraph) g = ring_graph ("ce", false);
  g_autoptr (SgPlan) p = lower (g);
  const int32_t c = find (p, SG_INS_COLLECTIVE, "p");
  ck_assert_int_ge (c, 0);
  const SgPlanIns *x = &p->ins[c];
  ck_assert_int_eq (x->op, SG_OP_COLLECTIVE_PERMUTE);
  ck_assert_int_eq (x->transport, SG_TRANSPORT_CE);
  ck_assert_int_eq (x->n_pairs, 2);
  ck_assert_int_eq (x->pairs[0], 0);
  ck_assert_int_eq (x->pairs[1], 1);
  ck_assert_int_eq (x->count, 16);
  ck_assert_int_eq (x->stream, 1);
  ck_assert_int_eq (p->ins[find (p, SG_INS_KERNEL, "mm")].sm_count, 112);
  g_autofree char *text = sg_plan_to_json (p, NULL);
  ck_assert (strstr (text, "\"members\":[],\"transport\":\"ce\",\"pairs\":[[0,1],[1,0]],"));
  ck_assert (strstr (text, "\"kwargs\":{},\"sm_count\":112,\"est_us\""));
  /* the loader reads back exactly what was written (hash checked) */
  g_autoptr (GError) e = NULL;
  g_autoptr (SgPlan) back = sg_plan_load_data (text, strlen (text), "p.json", &e);
  ck_assert_msg (back, "%s", e ? e->message : "");
  g_autofree char *again = sg_plan_to_json (back, NULL);
  ck_assert_str_eq (text, again);
}
END_TEST

START_TEST (plan_validator_checks_the_pairs)
{
  g_autoptr (SgGraph) g = ring_graph ("nccl", false);
  g_autoptr (SgPlan) p = lower (g);
  SgPlanIns *x = &p->ins[find (p, SG_INS_COLLECTIVE, "p")];
  x->pairs[3] = 1;
  pt_assert_rejected (p, "ins[2] \"p\".pairs[1]: [1, 1] receives twice on one rank");
  x->pairs[3] = 2;
  pt_assert_rejected (p, "ins[2] \"p\".pairs[1]: [1, 2] is not a pair of the group's ranks");
  x->pairs[3] = 0;
  x->count = 8;
  pt_assert_rejected (p, "ins[2] \"p\".count 8: does not match collective_permute of 16 -> 16");
}
END_TEST

START_TEST (race_proof_rejects_a_step_whose_output_overlaps_its_input)
{
  g_autoptr (SgGraph) g = ring_graph ("nccl", false);
  g_autoptr (SgPlan) p = lower (g);
  const SgPlanIns *x = &p->ins[find (p, SG_INS_COLLECTIVE, "p")];
  SgPlanValue *in = &p->values[x->in[0]], *out = &p->values[x->out[0]];
  out->buffer = in->buffer;
  out->offset = in->offset + 32;
  p->buffers[in->buffer].bytes += 32;
  pt_assert_rejected (p, "race: ins[2] \"p\" (collective_permute over nccl): its output \"p\"");
  pt_assert_rejected (p, "overlaps its input \"x\" (bytes [0, 64)): a peer writes the output");
}
END_TEST

START_TEST (copy_engine_step_needs_dense_operands)
{
  /* the transposed view lowers over nccl, which stages it, not over ce */
  g_autoptr (SgGraph) ok = ring_graph ("nccl", true);
  g_autoptr (SgPlan) p = lower (ok);
  ck_assert (sg_plan_validate (p, NULL));
  p->ins[find (p, SG_INS_COLLECTIVE, "p")].transport = SG_TRANSPORT_CE;
  pt_assert_rejected (p, "(collective_permute over ce): input \"xt\" (buffers[0]) is not dense");
  g_autoptr (SgGraph) g = ring_graph ("ce", true);
  SgPlan *none = NULL;
  g_autoptr (GError) e = NULL;
  ck_assert (!sg_codegen_plan (g, NULL, NULL, "test", "t", &none, &e));
  ck_assert_msg (strstr (e->message, "the lowered plan is invalid: race:"), "%s", e->message);
}
END_TEST

START_TEST (sm_count_is_only_for_matmul_kernels)
{
  g_autoptr (SgGraph) g = ring_graph ("nccl", false);
  g_autoptr (SgPlan) p = lower (g);
  SgPlanIns *x = &p->ins[find (p, SG_INS_KERNEL, "mm")];
  x->op = SG_OP_RELU;
  pt_assert_rejected (p, "kernel \"mm\".sm_count 112: only a matmul takes an SM-count target");
}
END_TEST

static Suite *
p2p_suite (void)
{
  Suite *s = suite_create ("plan-p2p");
  TCase *t = tcase_create ("p2p");
  tcase_add_test (t, permute_lowers_with_its_pairs_and_transport);
  tcase_add_test (t, plan_validator_checks_the_pairs);
  tcase_add_test (t, race_proof_rejects_a_step_whose_output_overlaps_its_input);
  tcase_add_test (t, copy_engine_step_needs_dense_operands);
  tcase_add_test (t, sm_count_is_only_for_matmul_kernels);
  suite_add_tcase (s, t);
  return s;
}

int
main (void)
{
  SRunner *sr = srunner_create (p2p_suite ());
  srunner_run_all (sr, CK_NORMAL);
  int failed = srunner_ntests_failed (sr);
  srunner_free (sr);
  return failed ? 1 : 0;
}
