/* test_rewrite.c: the bucket graph rewrite (sg_bucket_apply) on builder
 * graphs: node shapes and arguments per docs/ops.md, rewiring, placement,
 * implicit edges, refusals, and the validator afterwards.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "bucket.h"
#include "builder.h"

/* every bucket of these tests is flat (pack / unpack) */
#define FLAT SG_BUCKET_LOWERING_FLAT

#define I(x) ((int64_t)(x))

static void
assert_valid (SgGraph *g)
{
  GError *error = NULL;
  ck_assert_msg (sg_graph_validate (g, &error), "%s", error ? error->message : "");
}

static SgNodeId
id_of (SgGraph *g, const char *name)
{
  SgNodeId id = sg_graph_lookup (g, name);
  ck_assert_msg (id != SG_NO_NODE, "no node '%s'", name);
  return id;
}

static cJSON *
args_of (SgGraph *g, const char *name)
{
  cJSON *a = sg_node_args_json (g, id_of (g, name), false, NULL, NULL);
  ck_assert (cJSON_IsArray (a));
  return a;
}

static int64_t
arg_int (const cJSON *a, int i)
{
  const cJSON *v = cJSON_GetArrayItem (a, i);
  ck_assert (cJSON_IsNumber (v));
  return (int64_t)v->valuedouble;
}

static const char *
arg_ref (const cJSON *a, int i)
{
  const cJSON *r = cJSON_GetObjectItemCaseSensitive (cJSON_GetArrayItem (a, i), "node");
  ck_assert (cJSON_IsString (r));
  return r->valuestring;
}

/* FSDP-like: two weight all_gathers over 4 ranks, each used by one mm. */
static SgGraph *
fsdp_graph (void)
{
  SgGraph *g = tb_new (4);
  tb_group (g, "0", 4, 0, 1, 2, 3);
  tb_input (g, "x", "float32", 2, I (32), I (64));
  tb_input (g, "w1", "float32", 2, I (16), I (8)); /* gathered: [64, 8] */
  tb_input (g, "w2", "float32", 2, I (2), I (8));  /* gathered: [8, 8] */
  tb_all_gather (g, "ag1", "w1", "0");
  tb_wait (g, "ag1_w", "ag1");
  tb_all_gather (g, "ag2", "w2", "0");
  tb_wait (g, "ag2_w", "ag2");
  tb_mm (g, "mm1", "x", "ag1_w");
  tb_mm (g, "mm2", "mm1", "ag2_w");
  tb_output (g, 1, "mm2");
  return g;
}

static void
apply_one (SgGraph *g, const char *a, const char *b)
{
  SgNodeId m[2] = { id_of (g, a), id_of (g, b) };
  SgBucketSpec spec = { m, 2, FLAT };
  GError *error = NULL;
  ck_assert_msg (sg_bucket_apply (g, &spec, 1, &error), "%s", error ? error->message : "");
}

/* Applies the bucket {@a, @b}, which must be refused; returns the error
 * (transfer full). */
static GError *
refuse_one (SgGraph *g, const char *a, const char *b)
{
  SgNodeId m[2] = { id_of (g, a), id_of (g, b) };
  SgBucketSpec spec = { m, 2, FLAT };
  GError *error = NULL;
  ck_assert_msg (!sg_bucket_apply (g, &spec, 1, &error), "{%s, %s} was not refused", a, b);
  ck_assert (error != NULL);
  return error;
}

START_TEST (all_gather_bucket_packs_gathers_and_unpacks_rank_major)
{
  g_autoptr (SgGraph) g = fsdp_graph ();
  int32_t before = g->n_nodes;
  apply_one (g, "ag1", "ag2");
  assert_valid (g);
  /* 2 collectives + 2 waits out; pack, collective, wait, 2 unpacks in */
  ck_assert_int_eq (g->n_nodes, before - 4 + 5);
  ck_assert_int_eq (sg_graph_lookup (g, "ag1"), SG_NO_NODE);
  ck_assert_int_eq (sg_graph_lookup (g, "ag2_w"), SG_NO_NODE);

  SgNodeId p = id_of (g, "bucket_pack_ag1"), c = id_of (g, "bucket_ag1");
  SgNodeId w = id_of (g, "bucket_wait_ag1");
  SgNodeId u1 = id_of (g, "bucket_unpack_ag1"), u2 = id_of (g, "bucket_unpack_ag2");
  ck_assert_int_eq (g->nodes[p].kind, SG_OP_BUCKET_PACK);
  ck_assert_int_eq (g->nodes[c].kind, SG_OP_ALL_GATHER);
  ck_assert_int_eq (g->nodes[w].kind, SG_OP_WAIT);
  ck_assert_int_eq (g->nodes[u1].kind, SG_OP_BUCKET_UNPACK);
  /* pack: 128 + 16 elements, concatenated */
  ck_assert_uint_eq (sg_meta_numel (g, &g->nodes[p].meta), 144);
  cJSON *pa = args_of (g, "bucket_pack_ag1");
  const cJSON *list = cJSON_GetArrayItem (pa, 0);
  ck_assert_int_eq (cJSON_GetArraySize (list), 2);
  ck_assert_str_eq (arg_ref (list, 0), "w1");
  ck_assert_str_eq (arg_ref (list, 1), "w2");
  ck_assert_int_eq (arg_int (pa, 1), 4);
  ck_assert (cJSON_IsFalse (cJSON_GetArrayItem (pa, 2)));
  cJSON_Delete (pa);
  /* collective: all_gather(P, 4, "0") with the member list */
  ck_assert_uint_eq (sg_meta_numel (g, &g->nodes[c].meta), 576);
  cJSON *ca = args_of (g, "bucket_ag1");
  ck_assert_str_eq (arg_ref (ca, 0), "bucket_pack_ag1");
  ck_assert_int_eq (arg_int (ca, 1), 4);
  ck_assert_str_eq (cJSON_GetArrayItem (ca, 2)->valuestring, "0");
  cJSON_Delete (ca);
  cJSON *kw = sg_node_args_json (g, c, true, NULL, NULL);
  const cJSON *mem = cJSON_GetObjectItemCaseSensitive (kw, "schedgraph_bucket");
  ck_assert_int_eq (cJSON_GetArraySize (mem), 2);
  ck_assert_str_eq (cJSON_GetArrayItem (mem, 0)->valuestring, "ag1");
  ck_assert_str_eq (cJSON_GetArrayItem (mem, 1)->valuestring, "ag2");
  cJSON_Delete (kw);
  /* unpacks: k = 4, offsets 0 and 128, numel = shard numel; shapes kept */
  cJSON *ua = args_of (g, "bucket_unpack_ag2");
  ck_assert_str_eq (arg_ref (ua, 0), "bucket_wait_ag1");
  ck_assert_int_eq (arg_int (ua, 1), 4);
  ck_assert_int_eq (arg_int (ua, 2), 128);
  ck_assert_int_eq (arg_int (ua, 3), 16);
  cJSON_Delete (ua);
  ck_assert_int_eq (g->nodes[u2].meta.ndim, 2);
  ck_assert_int_eq (sg_meta_shape (g, &g->nodes[u2].meta)[0], 8);
  ck_assert_int_eq (sg_meta_shape (g, &g->nodes[u2].meta)[1], 8);
  ck_assert_int_eq (sg_meta_stride (g, &g->nodes[u2].meta)[0], 8);
  /* users rewired */
  cJSON *m2 = args_of (g, "mm2");
  ck_assert_str_eq (arg_ref (m2, 1), "bucket_unpack_ag2");
  cJSON_Delete (m2);
  /* placement: P, C where ag1 was (after the placeholders), W and the
   * unpacks right before mm1, the first consumer */
  SgNodeId mm1 = id_of (g, "mm1");
  ck_assert_int_eq (p, 3);
  ck_assert_int_eq (c, p + 1);
  ck_assert_int_eq (w, mm1 - 3);
  ck_assert_int_eq (u1, w + 1);
  ck_assert_int_eq (u2, w + 2);
}
END_TEST

START_TEST (reduce_scatter_bucket_interleaves_and_slices_per_rank)
{
  g_autoptr (SgGraph) g = tb_new (4);
  tb_group (g, "0", 4, 0, 1, 2, 3);
  tb_input (g, "g1", "bfloat16", 2, I (64), I (8));
  tb_input (g, "g2", "bfloat16", 1, I (12));
  tb_pointwise (g, "d1", "aten.neg.default", "g1", NULL);
  tb_reduce_scatter (g, "rs1", "d1", "0");
  tb_wait (g, "rs1_w", "rs1");
  tb_pointwise (g, "d2", "aten.neg.default", "g2", NULL);
  tb_reduce_scatter (g, "rs2", "d2", "0");
  tb_wait (g, "rs2_w", "rs2");
  tb_output (g, 2, "rs1_w", "rs2_w");
  apply_one (g, "rs1", "rs2");
  assert_valid (g);
  cJSON *pa = args_of (g, "bucket_pack_rs1");
  ck_assert (cJSON_IsTrue (cJSON_GetArrayItem (pa, 2)));
  cJSON_Delete (pa);
  SgNodeId c = id_of (g, "bucket_rs1");
  ck_assert_int_eq (g->nodes[c].kind, SG_OP_REDUCE_SCATTER);
  ck_assert_int_eq (g->nodes[c].reduce, SG_REDUCE_SUM);
  ck_assert_uint_eq (sg_meta_numel (g, &g->nodes[c].meta), (512 + 12) / 4);
  cJSON *u2 = args_of (g, "bucket_unpack_rs2");
  ck_assert_int_eq (arg_int (u2, 1), 1);
  ck_assert_int_eq (arg_int (u2, 2), 128);
  ck_assert_int_eq (arg_int (u2, 3), 3);
  cJSON_Delete (u2);
  /* the pack waits for the later input: P right after d2 */
  ck_assert_int_eq (id_of (g, "bucket_pack_rs1"), id_of (g, "d2") + 1);
  /* the output reads the unpacks */
  cJSON *out = args_of (g, "output");
  const cJSON *l = cJSON_GetArrayItem (out, 0);
  ck_assert_str_eq (arg_ref (l, 0), "bucket_unpack_rs1");
  ck_assert_str_eq (arg_ref (l, 1), "bucket_unpack_rs2");
  cJSON_Delete (out);
}
END_TEST

START_TEST (all_reduce_bucket_concatenates_and_slices)
{
  g_autoptr (SgGraph) g = tb_new (2);
  tb_group (g, "tp", 2, 0, 1);
  tb_input (g, "a", "float32", 2, I (3), I (5));
  tb_input (g, "b", "float32", 1, I (7));
  tb_all_reduce (g, "ar1", "a", "tp");
  tb_wait (g, "ar1_w", "ar1");
  tb_all_reduce (g, "ar2", "b", "tp");
  tb_wait (g, "ar2_w", "ar2");
  tb_output (g, 2, "ar1_w", "ar2_w");
  apply_one (g, "ar1", "ar2");
  assert_valid (g);
  ck_assert_uint_eq (sg_meta_numel (g, &g->nodes[id_of (g, "bucket_ar1")].meta), 22);
  cJSON *u2 = args_of (g, "bucket_unpack_ar2");
  ck_assert_int_eq (arg_int (u2, 1), 1);
  ck_assert_int_eq (arg_int (u2, 2), 15);
  ck_assert_int_eq (arg_int (u2, 3), 7);
  cJSON_Delete (u2);
}
END_TEST

START_TEST (bucket_whose_input_needs_a_members_wait_is_a_cycle)
{
  g_autoptr (SgGraph) g = tb_new (4);
  tb_group (g, "0", 4, 0, 1, 2, 3);
  tb_input (g, "w1", "float32", 2, I (8), I (8));
  tb_all_gather (g, "ag1", "w1", "0");
  tb_wait (g, "ag1_w", "ag1");
  tb_pointwise (g, "h", "aten.neg.default", "ag1_w", NULL); /* [32, 8] */
  tb_all_gather (g, "ag2", "h", "0");
  tb_wait (g, "ag2_w", "ag2");
  tb_output (g, 1, "ag2_w");
  GError *error = refuse_one (g, "ag1", "ag2");
  ck_assert (g_error_matches (error, SG_BUCKET_ERROR, SG_BUCKET_ERROR_CYCLE));
  g_error_free (error);
}
END_TEST

START_TEST (members_of_different_groups_are_refused)
{
  g_autoptr (SgGraph) g = tb_new (4);
  tb_group (g, "a", 2, 0, 1);
  tb_group (g, "b", 2, 0, 2);
  tb_input (g, "x", "float32", 1, I (4));
  tb_all_reduce (g, "ar1", "x", "a");
  tb_wait (g, "ar1_w", "ar1");
  tb_all_reduce (g, "ar2", "x", "b");
  tb_wait (g, "ar2_w", "ar2");
  tb_output (g, 2, "ar1_w", "ar2_w");
  GError *error = refuse_one (g, "ar1", "ar2");
  ck_assert (g_error_matches (error, SG_BUCKET_ERROR, SG_BUCKET_ERROR_LAYOUT));
  ck_assert_ptr_nonnull (strstr (error->message, "'ar2'"));
  g_error_free (error);
}
END_TEST

START_TEST (member_read_by_more_than_its_wait_is_refused)
{
  g_autoptr (SgGraph) g = fsdp_graph ();
  g_autoptr (SgGraph) h = tb_new (4);
  tb_group (h, "0", 4, 0, 1, 2, 3);
  tb_input (h, "w1", "float32", 1, I (4));
  tb_all_gather (h, "ag1", "w1", "0");
  tb_wait (h, "ag1_w", "ag1");
  tb_wait (h, "ag1_w2", "ag1");
  tb_all_gather (h, "ag2", "w1", "0");
  tb_wait (h, "ag2_w", "ag2");
  tb_output (h, 3, "ag1_w", "ag1_w2", "ag2_w");
  GError *error = refuse_one (h, "ag1", "ag2");
  ck_assert_ptr_nonnull (strstr (error->message, "'ag1'"));
  g_clear_error (&error);
  /* a single-member bucket is refused too */
  SgNodeId one = id_of (g, "ag1");
  SgBucketSpec s1 = { &one, 1, FLAT };
  ck_assert (!sg_bucket_apply (g, &s1, 1, &error));
  g_error_free (error);
}
END_TEST

START_TEST (implicit_edges_of_members_move_to_the_bucket)
{
  g_autoptr (SgGraph) g = fsdp_graph ();
  g->implicit_edges = g_array_new (FALSE, FALSE, sizeof (SgImplicitEdge));
  SgImplicitEdge e[] = {
    { id_of (g, "ag2"), id_of (g, "mm1"), SG_EDGE_OTHER },
    { id_of (g, "mm1"), id_of (g, "ag2_w"), SG_EDGE_OTHER },
    { id_of (g, "ag1"), id_of (g, "ag2"), SG_EDGE_OTHER },
    { id_of (g, "ag2"), id_of (g, "mm1"), SG_EDGE_HIDE_START },
    { id_of (g, "mm1"), id_of (g, "ag2_w"), SG_EDGE_HIDE_WAIT },
  };
  g_array_append_vals (g->implicit_edges, e, G_N_ELEMENTS (e));
  /* mm1 -> ag2_w is a constraint and mm1 needs ag1_w: merging the waits
   * closes a cycle */
  g_autoptr (SgGraph) copy = sg_graph_copy (g);
  ck_assert_uint_eq (copy->implicit_edges->len, G_N_ELEMENTS (e));
  GError *error = refuse_one (copy, "ag1", "ag2");
  ck_assert (g_error_matches (error, SG_BUCKET_ERROR, SG_BUCKET_ERROR_CYCLE));
  g_clear_error (&error);
  /* without it the merge is fine: the other edge moves to the bucket, the
   * self edge and the members' stale hiding edges go */
  g_array_remove_index (g->implicit_edges, 1);
  apply_one (g, "ag1", "ag2");
  assert_valid (g);
  ck_assert_uint_eq (g->implicit_edges->len, 1);
  SgImplicitEdge got = g_array_index (g->implicit_edges, SgImplicitEdge, 0);
  ck_assert_str_eq (g->nodes[got.from].name, "bucket_ag1");
  ck_assert_str_eq (g->nodes[got.to].name, "mm1");
  ck_assert_int_eq (got.kind, SG_EDGE_OTHER);
}
END_TEST

START_TEST (two_buckets_apply_at_once_and_keep_other_nodes_in_order)
{
  g_autoptr (SgGraph) g = tb_new (2);
  tb_group (g, "0", 2, 0, 1);
  tb_input (g, "x", "float32", 2, I (4), I (4));
  const char *w[] = { "w0", "w1", "w2", "w3" };
  for (int i = 0; i < 4; i++)
    tb_input (g, w[i], "float32", 2, I (2), I (4));
  char name[32], wn[32], mn[32], prev[32] = "x";
  for (int i = 0; i < 4; i++) {
    g_snprintf (name, sizeof name, "ag%d", i);
    g_snprintf (wn, sizeof wn, "ag%d_w", i);
    g_snprintf (mn, sizeof mn, "mm%d", i);
    tb_all_gather (g, name, w[i], "0");
    tb_wait (g, wn, name);
    tb_mm (g, mn, prev, wn);
    g_strlcpy (prev, mn, sizeof prev);
  }
  tb_output (g, 1, prev);
  SgNodeId b0[2] = { id_of (g, "ag0"), id_of (g, "ag1") };
  SgNodeId b1[2] = { id_of (g, "ag2"), id_of (g, "ag3") };
  SgBucketSpec specs[2] = { { b0, 2, FLAT }, { b1, 2, FLAT } };
  g_autoptr (SgGraph) copy = sg_graph_copy (g);
  GError *error = NULL;
  ck_assert_msg (sg_bucket_apply (g, specs, 2, &error), "%s", error ? error->message : "");
  assert_valid (g);
  for (int i = 1; i < 4; i++) {
    g_snprintf (mn, sizeof mn, "mm%d", i);
    g_snprintf (prev, sizeof prev, "mm%d", i - 1);
    ck_assert_int_lt (id_of (g, prev), id_of (g, mn));
  }
  /* the second bucket's wait sits right before mm2, after mm1 */
  ck_assert_int_eq (id_of (g, "bucket_wait_ag2"), id_of (g, "mm2") - 3);
  ck_assert_int_gt (id_of (g, "bucket_wait_ag2"), id_of (g, "mm1"));
  /* the copy is untouched and independent */
  ck_assert_int_ne (sg_graph_lookup (copy, "ag0"), SG_NO_NODE);
  assert_valid (copy);
}
END_TEST

START_TEST (compact_refuses_to_remove_a_node_still_read)
{
  g_autoptr (SgGraph) g = fsdp_graph ();
  g_autofree bool *keep = g_new (bool, (size_t)g->n_nodes);
  for (int32_t i = 0; i < g->n_nodes; i++)
    keep[i] = true;
  keep[id_of (g, "ag1_w")] = false;
  GError *error = NULL;
  ck_assert (!sg_graph_compact (g, keep, &error));
  ck_assert_ptr_nonnull (strstr (error->message, "'mm1'"));
  g_error_free (error);
  assert_valid (g);
}
END_TEST

START_TEST (select_keeps_listed_nodes_in_order_and_refuses_bad_orders)
{
  g_autoptr (SgGraph) g = fsdp_graph ();
  /* x w1 w2 ag1 ag1_w ag2 ag2_w mm1 mm2 output: swap the two gathers */
  const char *names[] = { "x", "w1", "w2", "ag2", "ag2_w", "ag1", "ag1_w", "mm1", "mm2",
                          "output" };
  SgNodeId order[10];
  for (int i = 0; i < 10; i++)
    order[i] = id_of (g, names[i]);
  GError *error = NULL;
  /* dropping ag1_w, which mm1 reads, is refused and changes nothing */
  SgNodeId dropped[9] = { order[0], order[1], order[2], order[3], order[4], order[5],
                          order[7], order[8], order[9] };
  ck_assert (!sg_graph_select (g, dropped, 9, &error));
  ck_assert_ptr_nonnull (strstr (error->message, "'mm1'"));
  g_clear_error (&error);
  ck_assert_int_eq (g->n_nodes, 10);
  /* an input after its user is refused */
  SgNodeId bad[10];
  memcpy (bad, order, sizeof bad);
  bad[3] = order[4], bad[4] = order[3];
  ck_assert (!sg_graph_select (g, bad, 10, &error));
  g_clear_error (&error);
  ck_assert (sg_graph_select (g, order, 10, &error));
  assert_valid (g);
  for (int i = 0; i < 10; i++)
    ck_assert_str_eq (g->nodes[i].name, names[i]);
  ck_assert_int_eq (g->output, 9);
}
END_TEST

static Suite *
rewrite_suite (void)
{
  Suite *s = suite_create ("bucket_rewrite");
  TCase *tc = tcase_create ("rewrite");
  tcase_add_test (tc, all_gather_bucket_packs_gathers_and_unpacks_rank_major);
  tcase_add_test (tc, reduce_scatter_bucket_interleaves_and_slices_per_rank);
  tcase_add_test (tc, all_reduce_bucket_concatenates_and_slices);
  tcase_add_test (tc, bucket_whose_input_needs_a_members_wait_is_a_cycle);
  tcase_add_test (tc, members_of_different_groups_are_refused);
  tcase_add_test (tc, member_read_by_more_than_its_wait_is_refused);
  tcase_add_test (tc, implicit_edges_of_members_move_to_the_bucket);
  tcase_add_test (tc, two_buckets_apply_at_once_and_keep_other_nodes_in_order);
  tcase_add_test (tc, compact_refuses_to_remove_a_node_still_read);
  tcase_add_test (tc, select_keeps_listed_nodes_in_order_and_refuses_bad_orders);
  suite_add_tcase (s, tc);
  return s;
}

int
main (void)
{
  SRunner *sr = srunner_create (rewrite_suite ());
  srunner_run_all (sr, CK_NORMAL);
  int failed = srunner_ntests_failed (sr);
  srunner_free (sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
