/* test_rolled.c: rank-dependent placements (graph/elide.c, plan values'
 * `roll`): the ring decomposition's reassembly (rank_roll of a cat of one
 * block per rank) and its static row-block slices of a rank_roll lower to
 * no kernel, with each value at the block rank_roll's semantics give it on
 * every rank (checked against sg_rank_roll_block, the op's definition);
 * what stays a copy says why; the cost model prices the elided nodes at
 * zero; the text round-trips; the validator and the race proof check the
 * rule for every rank (docs/plan-format.md "roll").
 */
#include <check.h>
#include <string.h>

#include "builder.h"
#include "codegen.h"
#include "estimate.h"
#include "plan-test.h"

#define I(x) ((int64_t)(x))

static void
estimate (SgGraph *g)
{
  SgConfig cfg;
  sg_config_init (&cfg);
  g_autoptr (GError) e = NULL;
  ck_assert_msg (sg_estimate_costs (g, &cfg, &e), "%s", e ? e->message : "");
  ck_assert_msg (sg_graph_validate (g, &e), "%s", e ? e->message : "");
}

static void
add_group (SgGraph *g, int k)
{
  if (k == 2)
    tb_group (g, "tp", 2, 0, 1);
  else
    tb_group (g, "tp", 4, 0, 1, 2, 3);
}

/* m_t = mm(a_t, w) for t < @k ([2, 3] @ [3, 5] in float32), y = cat(m_0
 * .. m_{k-1}), r = rank_roll(y, @shift, @sign, "tp"), out = relu(r). */
static SgGraph *
reassembly_graph (int k, int64_t shift, int64_t sign)
{
  SgGraph *g = tb_new (k);
  add_group (g, k);
  tb_input (g, "w", "float32", 2, I (3), I (5));
  GString *list = g_string_new ("");
  for (int t = 0; t < k; t++) {
    g_autofree char *a = g_strdup_printf ("a%d", t), *m = g_strdup_printf ("m%d", t);
    tb_input (g, a, "float32", 2, I (2), I (3));
    tb_mm (g, m, a, "w");
    g_string_append_printf (list, "%s{\"node\":\"%s\"}", t ? "," : "", m);
  }
  tb_node (g,
           "{\"name\":\"y\",\"op\":\"call_function\",\"target\":\"aten.cat.default\","
           "\"args\":[[%s],0],\"kwargs\":{},\"meta\":{\"shape\":[%d,5],\"dtype\":\"float32\"}}",
           list->str, 2 * k);
  g_string_free (list, TRUE);
  tb_rank_roll (g, "r", "y", "tp", shift, sign);
  tb_pointwise (g, "out", "aten.relu.default", "r", NULL);
  tb_output (g, 1, "out");
  return g;
}

/* Group position @r of every group (one group here). */
static uint64_t
offset_at (const SgPlan *p, const SgPlanValue *v, int32_t r)
{
  int32_t pos[1] = { r };
  ck_assert_int_eq (p->n_groups, 1);
  return sg_plan_value_offset (p, v, pos);
}

START_TEST (ring_chunks_are_written_at_their_rank_dependent_blocks)
{
  const struct {
    int k;
    int64_t shift, sign;
  } cases[] = { { 2, 0, -1 }, { 4, 0, -1 }, { 4, 1, 1 }, { 4, -1, 1 }, { 4, 2, -1 } };
  for (size_t c = 0; c < G_N_ELEMENTS (cases); c++) {
    const int k = cases[c].k;
    g_autoptr (SgGraph) g = reassembly_graph (k, cases[c].shift, cases[c].sign);
    estimate (g);
    ck_assert_int_eq (pt_reason_of (g, "y"), SG_COPY_ELIDED);
    ck_assert_int_eq (pt_reason_of (g, "r"), SG_COPY_ELIDED);
    ck_assert (g->nodes[sg_graph_lookup (g, "y")].est_us == 0.0);
    ck_assert (g->nodes[sg_graph_lookup (g, "r")].est_us == 0.0);
    g_autoptr (SgPlan) p = pt_lower (g);
    ck_assert (!pt_has_kernel (p, "y") && !pt_has_kernel (p, "r"));
    ck_assert (!pt_has_value (p, "y"));
    const SgPlanValue *r = pt_value (p, "r");
    ck_assert_int_eq (r->roll_block, 0);
    const uint64_t block = 2 * 5 * sizeof (float);
    ck_assert_int_eq (p->buffers[r->buffer].bytes, (uint64_t)k * block);
    for (int t = 0; t < k; t++) {
      g_autofree char *name = g_strdup_printf ("m%d", t);
      const SgPlanValue *m = pt_value (p, name);
      ck_assert_int_eq (m->buffer, r->buffer);
      ck_assert_int_eq (m->roll_block, block);
      /* on every rank, the roll's block b holding m_t is what rank_roll's
       * definition puts there: the cat's block t */
      for (int32_t rank = 0; rank < k; rank++) {
        const uint64_t at = offset_at (p, m, rank);
        ck_assert_int_eq (at % block, 0);
        const int64_t b = (int64_t)(at / block);
        ck_assert_int_eq (sg_rank_roll_block (b, k, cases[c].shift, cases[c].sign, rank), t);
      }
    }
    /* the rule round-trips through the text */
    g_autofree char *text = sg_plan_to_json (p, NULL);
    g_autofree char *want = g_strdup_printf ("\"name\":\"m1\",\"buffer\":%d,\"offset\":0,"
                                             "\"roll\":{\"group\":0,\"shift\":%" G_GINT64_FORMAT
                                             ",\"sign\":%" G_GINT64_FORMAT ",\"block\":40}",
                                             r->buffer, 1 - cases[c].shift, -cases[c].sign);
    ck_assert_msg (strstr (text, want), "no %s", want);
    g_autoptr (GError) e = NULL;
    g_autoptr (SgPlan) back = sg_plan_load_data (text, strlen (text), "p.json", &e);
    ck_assert_msg (back, "%s", e ? e->message : "");
    g_autofree char *again = sg_plan_to_json (back, NULL);
    ck_assert_str_eq (text, again);
  }
}
END_TEST

/* a [8, 3] = relu(x); R = rank_roll(a, @shift, @sign, "tp") over 4 ranks;
 * s_t = R[2 t : 2 t + 2] and m_t = mm(s_t, w) for every block t; with
 * @whole_user, relu(R) reads it whole too. */
static SgGraph *
slices_graph (int64_t shift, int64_t sign, bool whole_user)
{
  SgGraph *g = tb_new (4);
  add_group (g, 4);
  tb_input (g, "x", "float32", 2, I (8), I (3));
  tb_input (g, "w", "float32", 2, I (3), I (5));
  tb_pointwise (g, "a", "aten.relu.default", "x", NULL);
  tb_rank_roll (g, "R", "a", "tp", shift, sign);
  for (int t = 0; t < 4; t++) {
    tb_node (g,
             "{\"name\":\"s%d\",\"op\":\"call_function\",\"target\":\"aten.slice.Tensor\","
             "\"args\":[{\"node\":\"R\"},0,%d,%d],\"kwargs\":{},"
             "\"meta\":{\"shape\":[2,3],\"stride\":[3,1],\"dtype\":\"float32\"}}",
             t, 2 * t, 2 * t + 2);
    g_autofree char *s = g_strdup_printf ("s%d", t), *m = g_strdup_printf ("m%d", t);
    tb_mm (g, m, s, "w");
  }
  if (whole_user)
    tb_pointwise (g, "whole", "aten.relu.default", "R", NULL);
  if (whole_user)
    tb_output (g, 5, "m0", "m1", "m2", "m3", "whole");
  else
    tb_output (g, 4, "m0", "m1", "m2", "m3");
  return g;
}

START_TEST (row_block_slices_of_a_rank_roll_view_its_input)
{
  const int64_t cases[][2] = { { -1, 1 }, { 0, -1 }, { 2, 1 } };
  for (size_t c = 0; c < G_N_ELEMENTS (cases); c++) {
    g_autoptr (SgGraph) g = slices_graph (cases[c][0], cases[c][1], false);
    estimate (g);
    ck_assert_int_eq (pt_reason_of (g, "R"), SG_COPY_ELIDED);
    ck_assert (g->nodes[sg_graph_lookup (g, "R")].est_us == 0.0);
    g_autoptr (SgPlan) p = pt_lower (g);
    ck_assert (!pt_has_kernel (p, "R") && !pt_has_value (p, "R"));
    const SgPlanValue *a = pt_value (p, "a");
    const uint64_t block = 2 * 3 * sizeof (float);
    for (int t = 0; t < 4; t++) {
      g_autofree char *name = g_strdup_printf ("s%d", t);
      const SgPlanValue *s = pt_value (p, name);
      ck_assert_int_eq (s->buffer, a->buffer);
      ck_assert_int_eq (s->roll_block, block);
      /* R's block t is a's block rank_roll's definition names */
      for (int32_t rank = 0; rank < 4; rank++) {
        const uint64_t at = offset_at (p, s, rank) - a->offset;
        ck_assert_int_eq ((int64_t)(at / block),
                          sg_rank_roll_block (t, 4, cases[c][0], cases[c][1], rank));
      }
    }
  }
}
END_TEST

START_TEST (copies_that_stay_say_why)
{
  /* a rank_roll read whole */
  g_autoptr (SgGraph) g = slices_graph (-1, 1, true);
  estimate (g);
  ck_assert_int_eq (pt_reason_of (g, "R"), SG_COPY_ROLL_USERS);
  ck_assert (g->nodes[sg_graph_lookup (g, "R")].est_us > 0.0);
  g_autoptr (SgPlan) p = pt_lower (g);
  ck_assert (pt_has_kernel (p, "R"));
  ck_assert_int_eq (pt_value (p, "s1")->roll_block, 0);
  /* the ring's whole tensor: the permute writes its chunk in place too;
   * a cat along the columns stays a copy */
  g_autoptr (SgGraph) h = tb_new (2);
  add_group (h, 2);
  tb_input (h, "x", "float32", 2, I (2), I (3));
  tb_permute (h, "p", "x", "tp", "[[0,1],[1,0]]", "nccl");
  tb_wait (h, "p_w", "p");
  tb_pointwise (h, "x2", "aten.relu.default", "x", NULL);
  tb_node (h, "{\"name\":\"y\",\"op\":\"call_function\",\"target\":\"aten.cat.default\","
              "\"args\":[[{\"node\":\"x2\"},{\"node\":\"p_w\"}],0],\"kwargs\":{},"
              "\"meta\":{\"shape\":[4,3],\"dtype\":\"float32\"}}");
  tb_rank_roll (h, "r", "y", "tp", 0, -1);
  tb_node (h, "{\"name\":\"z\",\"op\":\"call_function\",\"target\":\"aten.cat.default\","
              "\"args\":[[{\"node\":\"x2\"},{\"node\":\"x\"}],1],\"kwargs\":{},"
              "\"meta\":{\"shape\":[2,6],\"dtype\":\"float32\"}}");
  tb_output (h, 2, "r", "z");
  estimate (h);
  ck_assert_int_eq (pt_reason_of (h, "y"), SG_COPY_ELIDED);
  ck_assert_int_eq (pt_reason_of (h, "r"), SG_COPY_ELIDED);
  ck_assert_int_eq (pt_reason_of (h, "z"), SG_COPY_CAT_DIM);
  g_autoptr (SgPlan) q = pt_lower (h);
  ck_assert (!pt_has_kernel (q, "y") && !pt_has_kernel (q, "r") && pt_has_kernel (q, "z"));
  ck_assert_int_eq (pt_value (q, "p")->buffer, pt_value (q, "r")->buffer);
  ck_assert_int_eq (pt_value (q, "p")->roll_block, 2 * 3 * sizeof (float));
}
END_TEST

START_TEST (the_validator_checks_every_block)
{
  g_autoptr (SgGraph) g = reassembly_graph (4, 0, -1);
  estimate (g);
  g_autoptr (SgPlan) p = pt_lower (g);
  SgPlanValue *m = (SgPlanValue *)pt_value (p, "m2");
  m->offset = 8;
  pt_assert_rejected (p, "values[");
  pt_assert_rejected (p, "\"m2\": bytes [8, 168) reach past buffers[");
  pt_assert_rejected (p, "at its last rank-dependent block");
  m->offset = 0;
  m->roll_group = 1;
  pt_assert_rejected (p, "\"m2\".roll.group 1: out of range (1 groups)");
}
END_TEST

/* x [4, 4] f32; p = permute(x) over group "tp" of 2 and @transport; its
 * wait feeds an mm. */
static SgPlan *
permute_plan (const char *transport)
{
  g_autoptr (SgGraph) g = tb_new (2);
  add_group (g, 2);
  tb_input (g, "x", "float32", 2, I (4), I (4));
  tb_input (g, "w", "float32", 2, I (4), I (4));
  tb_permute (g, "p", "x", "tp", "[[0,1],[1,0]]", transport);
  tb_wait (g, "p_w", "p");
  tb_mm (g, "mm", "p_w", "w");
  tb_output (g, 1, "mm");
  return pt_lower (g);
}

static int32_t
collective (const SgPlan *p)
{
  for (int32_t i = 0; i < p->n_ins; i++)
    if (p->ins[i].kind == SG_INS_COLLECTIVE)
      return i;
  ck_abort_msg ("no collective");
  return -1;
}

START_TEST (the_race_proof_holds_for_every_rank)
{
  /* input and output in one buffer, apart on rank 0, the same bytes on
   * rank 1 */
  g_autoptr (SgPlan) p = permute_plan ("nccl");
  const SgPlanIns *x = &p->ins[collective (p)];
  SgPlanValue *in = &p->values[x->in[0]], *out = &p->values[x->out[0]];
  out->buffer = in->buffer;
  out->offset = 64;
  p->buffers[in->buffer].bytes *= 2;
  in->roll_group = 0, in->roll_shift = 0, in->roll_sign = 1, in->roll_block = 64;
  pt_assert_rejected (p, "race: ins[2] \"p\" (collective_permute over nccl): its output \"p\"");
  pt_assert_rejected (p, "bytes [64, 128)) overlaps its input \"x\" (bytes [64, 128))");
  /* apart on every rank: accepted */
  out->offset = 0;
  out->roll_group = 0, out->roll_shift = 1, out->roll_sign = 1, out->roll_block = 64;
  g_autoptr (GError) e = NULL;
  ck_assert_msg (sg_plan_validate (p, &e), "%s", e ? e->message : "");
  /* the copy engine too: its source writes at the offset the target
   * resolves (runtime/cuda/p2p.c) */
  g_autoptr (SgPlan) c = permute_plan ("ce");
  SgPlanValue *o = &c->values[c->ins[collective (c)].out[0]];
  c->buffers[o->buffer].bytes *= 2;
  o->roll_group = 0, o->roll_shift = 0, o->roll_sign = 1, o->roll_block = 64;
  g_autoptr (GError) e2 = NULL;
  ck_assert_msg (sg_plan_validate (c, &e2), "%s", e2 ? e2->message : "");
}
END_TEST

/* p = permute(x) over "tp"; y = relu(w) runs while p is in flight; then
 * its wait and mm(p_w, y). */
static SgPlan *
beside_plan (void)
{
  g_autoptr (SgGraph) g = tb_new (2);
  add_group (g, 2);
  tb_input (g, "x", "float32", 2, I (4), I (4));
  tb_input (g, "w", "float32", 2, I (4), I (4));
  tb_permute (g, "p", "x", "tp", "[[0,1],[1,0]]", "nccl");
  tb_pointwise (g, "y", "aten.relu.default", "w", NULL);
  tb_wait (g, "p_w", "p");
  tb_mm (g, "mm", "p_w", "y");
  tb_output (g, 1, "mm");
  return pt_lower (g);
}

/* Writes into one buffer from two streams are tracked per value: the
 * kernel's result beside the permute's in one buffer is fine; over the
 * bytes the permute is still writing it is a race. */
START_TEST (writes_from_two_streams_are_checked_per_value)
{
  g_autoptr (SgPlan) p = beside_plan ();
  SgPlanValue *y = (SgPlanValue *)pt_value (p, "y"), *pv = (SgPlanValue *)pt_value (p, "p");
  const int32_t yb = y->buffer;
  p->buffers[pv->buffer].bytes += 64;
  y->buffer = pv->buffer;
  y->offset = 64;
  p->buffers[yb].bytes = 0; /* unused now */
  g_autoptr (GError) e = NULL;
  ck_assert_msg (sg_plan_validate (p, &e), "%s", e ? e->message : "");
  y->offset = 32;
  pt_assert_rejected (p, "writes value \"y\" over \"p\" (buffers[");
  pt_assert_rejected (p, "before that write (stream 1 step 2) is ordered by an event");
  /* at a rank-dependent block: apart on rank 0, over it on rank 1 */
  y->offset = 0;
  y->roll_group = 0, y->roll_shift = 1, y->roll_sign = -1, y->roll_block = 64;
  pt_assert_rejected (p, "writes value \"y\" over \"p\"");
}
END_TEST

static Suite *
rolled_suite (void)
{
  Suite *s = suite_create ("rolled");
  TCase *tc = tcase_create ("core");
  tcase_add_test (tc, ring_chunks_are_written_at_their_rank_dependent_blocks);
  tcase_add_test (tc, row_block_slices_of_a_rank_roll_view_its_input);
  tcase_add_test (tc, copies_that_stay_say_why);
  tcase_add_test (tc, the_validator_checks_every_block);
  tcase_add_test (tc, the_race_proof_holds_for_every_rank);
  tcase_add_test (tc, writes_from_two_streams_are_checked_per_value);
  suite_add_tcase (s, tc);
  return s;
}

int
main (void)
{
  SRunner *sr = srunner_create (rolled_suite ());
  srunner_run_all (sr, CK_NORMAL);
  int failed = srunner_ntests_failed (sr);
  srunner_free (sr);
  return failed ? 1 : 0;
}
