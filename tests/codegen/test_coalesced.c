/* test_coalesced.c: coalesced collectives (PyTorch's *_coalesced ops,
 * docs/graph-format.md) from the IR to the plan: members read through
 * getitem, one NCCL group's cost, one stall for the whole call, inputs live
 * to its first wait, one collective instruction with an operand pair per
 * member and one wait, the plan's text round trip and the validator's
 * rules for such an instruction.
 *
 * The graph: tests/graphs/accept-coalesced.json (an all_gather, a
 * reduce_scatter and an all_reduce, each of two members, over 2 ranks).
 */
#include <check.h>
#include <string.h>

#include "codegen.h"
#include "estimate.h"
#include "plan.h"
#include "schedule.h"

#ifndef SG_TEST_GRAPHS
#error "SG_TEST_GRAPHS must name tests/graphs"
#endif

static SgGraph *
load_costed (void)
{
  g_autoptr (GError) e = NULL;
  SgGraph *g = sg_graph_load (SG_TEST_GRAPHS "/accept-coalesced.json", &e);
  ck_assert_msg (g, "%s", e ? e->message : "");
  SgConfig cfg;
  sg_config_init (&cfg);
  ck_assert_msg (sg_estimate_costs (g, &cfg, &e), "%s", e ? e->message : "");
  return g;
}

static SgPlan *
plan_of (SgGraph *g)
{
  SgSimResult r;
  g_autoptr (GError) e = NULL;
  ck_assert_msg (sg_simulate (g, NULL, &r, &e), "%s", e ? e->message : "");
  SgPlan *p = NULL;
  ck_assert_msg (sg_codegen_plan (g, NULL, &r, "test", "reorder=1", &p, &e), "%s",
                 e ? e->message : "");
  sg_sim_result_clear (&r);
  return p;
}

START_TEST (members_are_the_list_items_and_the_tuple_elements)
{
  g_autoptr (SgGraph) g = load_costed ();
  SgNodeId agc = sg_graph_lookup (g, "agc"), rsc = sg_graph_lookup (g, "rsc");
  ck_assert_int_eq (g->nodes[agc].kind, SG_OP_ALL_GATHER_COALESCED);
  ck_assert_int_eq (sg_op_member_kind (g->nodes[rsc].kind), SG_OP_REDUCE_SCATTER);
  ck_assert_int_eq (sg_node_coll_members (g, agc), 2);
  ck_assert_int_eq (sg_node_coll_input (g, agc, 1), sg_graph_lookup (g, "w2s"));
  ck_assert_int_eq (sg_meta_numel (g, sg_node_coll_output (g, agc, 0)), 256);
  /* bytes moved: all_gather outputs, reduce_scatter inputs (float32) */
  ck_assert_uint_eq (sg_node_comm_bytes (g, agc), 2 * 256 * 4);
  ck_assert_uint_eq (sg_node_comm_bytes (g, rsc), 2 * 128 * 4);
  /* both waits wait on the one call, through their getitems */
  ck_assert_int_eq (sg_node_wait_target (g, sg_graph_lookup (g, "w1")), agc);
  ck_assert_int_eq (sg_node_wait_target (g, sg_graph_lookup (g, "w2")), agc);
  ck_assert_int_eq (sg_node_coalesced_of (g, sg_graph_lookup (g, "g1")), agc);
}
END_TEST

START_TEST (a_coalesced_call_pays_the_overhead_once_and_each_member_its_own_algorithm)
{
  g_autoptr (SgGraph) g = load_costed ();
  const SgCostModel *cm = sg_graph_cost_model (g);
  SgNodeId agc = sg_graph_lookup (g, "agc");
  SgCostSource src;
  double one = sg_cost_collective_us (cm, SG_OP_ALL_GATHER, SG_DTYPE_F32, 1024, 2, 1, &src);
  double flat = sg_cost_collective_us (cm, SG_OP_ALL_GATHER, SG_DTYPE_F32, 2048, 2, 1, &src);
  uint64_t bytes[2] = { 1024, 1024 };
  double grouped = sg_cost_coalesced_us (cm, SG_OP_ALL_GATHER, SG_DTYPE_F32, bytes, 2, 2, 1, &src);
  /* cheaper than two calls, dearer than one call over both: each member
   * keeps its NCCL latency, only the per-call overhead (18 us) is shared */
  ck_assert (grouped < 2 * one);
  ck_assert (grouped > flat);
  ck_assert_double_eq_tol (2 * one - grouped, 18.0, 1e-9);
  ck_assert_double_eq_tol (g->nodes[agc].est_us, grouped, 1e-9);
  ck_assert_double_eq_tol (sg_cost_coalesced_us (cm, SG_OP_ALL_GATHER, SG_DTYPE_F32, bytes, 1, 2,
                                                 1, &src),
                           one, 1e-9);
}
END_TEST

START_TEST (the_first_wait_stalls_for_the_whole_call_and_later_waits_are_free)
{
  g_autoptr (SgGraph) g = load_costed ();
  SgSimResult r;
  g_autoptr (GError) e = NULL;
  ck_assert_msg (sg_simulate (g, NULL, &r, &e), "%s", e ? e->message : "");
  ck_assert_int_eq (r.n_rows, 3); /* one row per call, not per member */
  SgNodeId agc = sg_graph_lookup (g, "agc"), w1 = sg_graph_lookup (g, "w1"),
           w2 = sg_graph_lookup (g, "w2");
  for (int32_t i = 0; i < r.n_rows; i++)
    if (r.rows[i].node == agc) {
      ck_assert_int_eq (r.rows[i].wait, w1);
      ck_assert_double_eq_tol (r.node_end[w1], r.rows[i].end_us, 1e-9);
    }
  ck_assert_double_eq (r.node_start[w2], r.node_end[w2]);
  sg_sim_result_clear (&r);
}
END_TEST

START_TEST (inputs_of_a_coalesced_call_live_to_its_first_wait)
{
  g_autoptr (SgGraph) g = load_costed ();
  g_autofree int32_t *pos = g_new (int32_t, (size_t)g->n_nodes);
  for (SgNodeId i = 0; i < g->n_nodes; i++)
    pos[i] = i;
  g_autofree SgNodeId *root = sg_graph_storage_roots (g);
  g_autofree int32_t *last = g_new (int32_t, (size_t)g->n_nodes);
  sg_graph_last_use (g, pos, root, last);
  /* h and y feed rsc, waited first by r0w and then by r1w */
  SgNodeId h = sg_graph_lookup (g, "h"), y = sg_graph_lookup (g, "y");
  ck_assert_int_eq (last[h], sg_graph_lookup (g, "r0w"));
  ck_assert_int_ge (last[y], sg_graph_lookup (g, "r0w"));
}
END_TEST

START_TEST (a_coalesced_call_is_one_instruction_with_an_operand_pair_per_member)
{
  g_autoptr (SgGraph) g = load_costed ();
  g_autoptr (SgPlan) p = plan_of (g);
  int32_t colls = 0;
  const int64_t want[3] = { 256, 128, 128 }; /* NCCL counts summed over the members */
  for (int32_t i = 0; i < p->n_ins; i++) {
    const SgPlanIns *x = &p->ins[i];
    if (x->kind != SG_INS_COLLECTIVE)
      continue;
    ck_assert (sg_op_is_coalesced (x->op));
    ck_assert_int_eq (x->n_in, 2);
    ck_assert_int_eq (x->n_out, 2);
    ck_assert_int_eq (x->count, want[colls]);
    int32_t waits = 0;
    for (int32_t j = 0; j < p->n_ins; j++)
      waits += p->ins[j].kind == SG_INS_WAIT_EVENT && p->ins[j].coll == i;
    ck_assert_int_eq (waits, 1); /* one event for the group's end */
    colls++;
  }
  ck_assert_int_eq (colls, 3);
  g_autoptr (GError) e = NULL;
  ck_assert_msg (sg_plan_validate (p, &e), "%s", e ? e->message : "");
}
END_TEST

START_TEST (a_coalesced_plan_round_trips_byte_identical)
{
  g_autoptr (SgGraph) g = load_costed ();
  g_autoptr (SgPlan) p = plan_of (g);
  size_t n1, n2;
  g_autofree char *t1 = sg_plan_to_json (p, &n1);
  g_autoptr (GError) e = NULL;
  g_autoptr (SgPlan) q = sg_plan_load_data (t1, n1, "p.json", &e);
  ck_assert_msg (q, "%s", e ? e->message : "");
  g_autofree char *t2 = sg_plan_to_json (q, &n2);
  ck_assert_uint_eq (n1, n2);
  ck_assert (memcmp (t1, t2, n1) == 0);
  ck_assert (strstr (t1, "\"op\":\"reduce_scatter_coalesced\",\"in\":[") != NULL);
}
END_TEST

/* The first coalesced collective instruction of @p. */
static SgPlanIns *
first_coalesced (SgPlan *p)
{
  for (int32_t i = 0; i < p->n_ins; i++)
    if (p->ins[i].kind == SG_INS_COLLECTIVE)
      return &p->ins[i];
  return NULL;
}

static void
assert_rejected (SgPlan *p, const char *what)
{
  g_autoptr (GError) e = NULL;
  ck_assert (!sg_plan_validate (p, &e));
  ck_assert_msg (strstr (e->message, what), "'%s' lacks '%s'", e->message, what);
}

START_TEST (malformed_coalesced_instructions_are_rejected_naming_the_rule)
{
  g_autoptr (SgGraph) g = load_costed ();
  {
    g_autoptr (SgPlan) p = plan_of (g);
    first_coalesced (p)->n_out = 1;
    assert_rejected (p, "\"agc\": a collective takes one input and one output value per member");
  }
  {
    g_autoptr (SgPlan) p = plan_of (g);
    first_coalesced (p)->count += 1;
    assert_rejected (p, "\"agc\".count 257: the members' counts sum to 256");
  }
  {
    g_autoptr (SgPlan) p = plan_of (g);
    SgPlanIns *c = first_coalesced (p);
    int32_t t = c->out[1]; /* member 1 gathers into member 0's input */
    c->out[1] = c->in[0];
    c->in[0] = t;
    assert_rejected (p, "does not match all_gather_coalesced of 256 -> 256 elements over 2 "
                        "ranks (a member)");
  }
  {
    g_autoptr (SgPlan) p = plan_of (g);
    SgPlanIns *c = first_coalesced (p);
    p->values[c->out[1]].buffer = p->values[c->out[0]].buffer;
    p->values[c->out[1]].offset = p->values[c->out[0]].offset;
    assert_rejected (p, "member 0's output \"agc.0\" overlaps \"agc.1\" of member 1");
  }
}
END_TEST

static Suite *
suite (void)
{
  Suite *s = suite_create ("coalesced");
  TCase *tc = tcase_create ("core");
  tcase_add_test (tc, members_are_the_list_items_and_the_tuple_elements);
  tcase_add_test (tc, a_coalesced_call_pays_the_overhead_once_and_each_member_its_own_algorithm);
  tcase_add_test (tc, the_first_wait_stalls_for_the_whole_call_and_later_waits_are_free);
  tcase_add_test (tc, inputs_of_a_coalesced_call_live_to_its_first_wait);
  tcase_add_test (tc, a_coalesced_call_is_one_instruction_with_an_operand_pair_per_member);
  tcase_add_test (tc, a_coalesced_plan_round_trips_byte_identical);
  tcase_add_test (tc, malformed_coalesced_instructions_are_rejected_naming_the_rule);
  suite_add_tcase (s, tc);
  return s;
}

int
main (void)
{
  SRunner *sr = srunner_create (suite ());
  srunner_run_all (sr, CK_NORMAL);
  int failed = srunner_ntests_failed (sr);
  srunner_free (sr);
  return failed ? 1 : 0;
}
