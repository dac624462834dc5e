/* test_rewrite.c: the graph rewrite API (graph/rewrite.c, rewrite-order.c):
 * a pass that replaces one node by two, placement and the stable order,
 * unique names, merged inputs, implicit edges, the refusals (a removed
 * node still read, the output removed, a cycle), and trial graphs equal to
 * the committed graph while the base graph stays as it was, and parts of
 * a description replayed from a stash (rewrite-stash.c) equal to the same
 * parts described again. */
#include <check.h>
#include <math.h>
#include <string.h>

#include "common.h"
#include "graph-private.h"

static SgNodeId
id_of (const SgGraph *g, const char *name)
{
  SgNodeId id = sg_graph_lookup (g, name);
  ck_assert_msg (id != SG_NO_NODE, "no node '%s'", name);
  return id;
}

static void
assert_order (const SgGraph *g, const char *const *names, int32_t n)
{
  ck_assert_int_eq (g->n_nodes, n);
  for (int32_t i = 0; i < n; i++)
    ck_assert_str_eq (g->nodes[i].name, names[i]);
}

/* The example of docs/ir.md: relu(mm) becomes tanh(sigmoid(mm)). */
static SgRewrite *
relu_to_two (SgGraph *g)
{
  SgRewrite *rw = sg_rewrite_new (g);
  SgNodeId relu = id_of (g, "relu"), mm = id_of (g, "mm");
  const SgMeta *m = &g->nodes[relu].meta;
  SgArg a1[] = { sg_arg_ref (mm) };
  SgNodeSpec s1 = { .name = "sig", .kind = SG_OP_SIGMOID, .args = a1, .n_args = 1,
                    .meta = sg_rewrite_meta (rw, sg_meta_shape (g, m), NULL, m->ndim, m->dtype),
                    .cost_us = NAN };
  SgNodeId sig = sg_rewrite_add (rw, &s1, NULL);
  SgArg a2[] = { sg_arg_ref (sig) };
  SgNodeSpec s2 = s1;
  s2.name = "tanh";
  s2.kind = SG_OP_TANH;
  s2.args = a2;
  SgNodeId th = sg_rewrite_add (rw, &s2, NULL);
  ck_assert_int_eq (sig, g->n_nodes);
  ck_assert_int_eq (th, g->n_nodes + 1);
  sg_rewrite_place (rw, sig, relu, SG_PLACE_BEFORE);
  sg_rewrite_place (rw, th, relu, SG_PLACE_BEFORE);
  sg_rewrite_replace_uses (rw, relu, th);
  sg_rewrite_remove (rw, relu);
  return rw;
}

START_TEST (pass_replaces_one_node_by_two)
{
  g_autoptr (SgGraph) g = small_graph ();
  g_autoptr (SgRewrite) rw = relu_to_two (g);
  ck_assert (sg_rewrite_commit (rw, NULL));
  static const char *const want[] = { "x", "w", "ag", "ag_w", "wt", "mm", "sig", "tanh", "output" };
  assert_order (g, want, G_N_ELEMENTS (want));
  ck_assert_int_eq (g->nodes[6].kind, SG_OP_SIGMOID);
  ck_assert_str_eq (g->nodes[6].target, "aten.sigmoid.default");
  ck_assert_int_eq (g->nodes[7].est_src, SG_COST_NONE);
  g_autofree char *out = tb_args_text (g, g->output);
  ck_assert_str_eq (out, "[[{\"node\":\"tanh\"}]] {}");
  ck_assert_int_eq (sg_graph_lookup (g, "relu"), SG_NO_NODE);
  assert_valid (g);
}
END_TEST

START_TEST (trial_graph_is_the_commit_and_leaves_the_base_alone)
{
  g_autoptr (SgGraph) g = small_graph ();
  g->implicit_edges = g_array_new (FALSE, FALSE, sizeof (SgImplicitEdge));
  SgImplicitEdge e = { id_of (g, "ag"), id_of (g, "relu"), 4 };
  g_array_append_val (g->implicit_edges, e);
  guint args_len = g->args->len, dims_len = g->dims->len;
  g_autoptr (SgGraph) c = sg_graph_copy (g);
  g_autoptr (SgRewrite) trw = relu_to_two (g);
  SgGraph *t = sg_rewrite_trial (trw, NULL);
  ck_assert_ptr_nonnull (t);
  g_autoptr (SgRewrite) rw = relu_to_two (c);
  sg_rewrite_move_edges (rw, id_of (c, "relu"), c->n_nodes + 1, 0);
  ck_assert (sg_rewrite_commit (rw, NULL));
  ck_assert_int_eq (t->n_nodes, c->n_nodes);
  for (SgNodeId i = 0; i < c->n_nodes; i++) {
    ck_assert_str_eq (t->nodes[i].name, c->nodes[i].name);
    g_autofree char *ta = tb_args_text (t, i), *tc = tb_args_text (c, i);
    ck_assert_str_eq (ta, tc);
  }
  /* the trial had no move: the edge to the removed relu is dropped */
  ck_assert_uint_eq (t->implicit_edges->len, 0);
  ck_assert_uint_eq (c->implicit_edges->len, 1);
  ck_assert_str_eq (c->nodes[g_array_index (c->implicit_edges, SgImplicitEdge, 0).to].name, "tanh");
  sg_graph_free (t);
  /* a second trial of the same rewrite, and a reset one, reuse its memory */
  t = sg_rewrite_trial (trw, NULL);
  ck_assert_str_eq (t->nodes[7].name, "tanh");
  sg_graph_free (t);
  sg_rewrite_reset (trw);
  t = sg_rewrite_trial (trw, NULL);
  ck_assert_int_eq (t->n_nodes, 8);
  ck_assert_str_eq (t->nodes[6].name, "relu");
  sg_graph_free (t);
  g_clear_pointer (&trw, sg_rewrite_free);
  ck_assert_int_eq (g->n_nodes, 8);
  ck_assert_uint_eq (g->args->len, args_len);
  ck_assert_uint_eq (g->dims->len, dims_len);
  ck_assert_int_eq (id_of (g, "relu"), 6);
  assert_valid (g);
  assert_valid (c);
}
END_TEST

/* sg_rewrite_result_id: where each node of the rewrite went, in a trial
 * and in the commit (removed ones nowhere). */
START_TEST (result_ids_follow_the_nodes)
{
  g_autoptr (SgGraph) g = small_graph ();
  const SgNodeId relu = id_of (g, "relu"), mm = id_of (g, "mm"), n0 = g->n_nodes;
  g_autoptr (SgRewrite) rw = relu_to_two (g);
  SgGraph *t = sg_rewrite_trial (rw, NULL);
  ck_assert_ptr_nonnull (t);
  ck_assert_int_eq (sg_rewrite_result_id (rw, relu), SG_NO_NODE);
  ck_assert_str_eq (t->nodes[sg_rewrite_result_id (rw, mm)].name, "mm");
  ck_assert_str_eq (t->nodes[sg_rewrite_result_id (rw, n0)].name, "sig");
  ck_assert_str_eq (t->nodes[sg_rewrite_result_id (rw, n0 + 1)].name, "tanh");
  sg_graph_free (t);
  ck_assert (sg_rewrite_commit (rw, NULL));
  ck_assert_str_eq (g->nodes[sg_rewrite_result_id (rw, n0 + 1)].name, "tanh");
  ck_assert_int_eq (sg_rewrite_result_id (rw, mm), id_of (g, "mm"));
}
END_TEST

/* (transfer full) The node names of @g in id order, space-separated. */
static char *
names_of (const SgGraph *g)
{
  GString *o = g_string_new (NULL);
  for (SgNodeId i = 0; i < g->n_nodes; i++)
    g_string_append_printf (o, "%s ", g->nodes[i].name);
  return g_string_free (o, FALSE);
}

/* A trial's origins name the base node each of its nodes copies; after a
 * rollback to a mark the rewrite is what it was at the mark: the edits
 * since are gone from the trial, the graph's pools are back to their
 * length at the mark, and describing the same edits again gives the same
 * trial graph as before. */
START_TEST (rollback_returns_to_the_mark)
{
  g_autoptr (SgGraph) g = small_graph ();
  const SgNodeId relu = id_of (g, "relu"), mm = id_of (g, "mm");
  guint args_len = g->args->len, dims_len = g->dims->len;
  SgRewrite *rw = sg_rewrite_new (g);
  SgRewriteMark start, mid;
  sg_rewrite_mark (rw, &start);
  /* first edit: exp(mm) added after mm, read by nobody */
  const SgMeta *m = &g->nodes[mm].meta;
  SgArg a1[] = { sg_arg_ref (mm) };
  SgNodeSpec s1 = { .name = "e", .kind = SG_OP_EXP, .args = a1, .n_args = 1,
                    .meta = sg_rewrite_meta (rw, sg_meta_shape (g, m), NULL, m->ndim, m->dtype),
                    .cost_us = NAN };
  SgNodeId e = sg_rewrite_add (rw, &s1, NULL);
  sg_rewrite_place (rw, e, mm, SG_PLACE_AFTER);
  sg_rewrite_mark (rw, &mid);
  guint mid_args = g->args->len;
  /* second edit: relu removed, its users read mm */
  sg_rewrite_replace_uses (rw, relu, mm);
  sg_rewrite_remove (rw, relu);
  SgGraph *t1 = sg_rewrite_trial (rw, NULL);
  ck_assert_ptr_nonnull (t1);
  ck_assert_int_eq (t1->n_nodes, g->n_nodes);
  const SgNodeId *orig = sg_graph_trial_origins (t1);
  for (SgNodeId i = 0; i < t1->n_nodes; i++)
    ck_assert_int_eq (orig[i], strcmp (t1->nodes[i].name, "e") == 0
                                 ? SG_NO_NODE : id_of (g, t1->nodes[i].name));
  g_autofree char *first = names_of (t1);
  sg_graph_free (t1);
  sg_rewrite_rollback (rw, &mid);
  ck_assert_uint_eq (g->args->len, mid_args);
  SgGraph *t2 = sg_rewrite_trial (rw, NULL); /* exp added, relu kept */
  ck_assert_int_eq (t2->n_nodes, g->n_nodes + 1);
  ck_assert_int_ne (sg_rewrite_result_id (rw, relu), SG_NO_NODE);
  sg_graph_free (t2);
  sg_rewrite_rollback (rw, &mid);
  sg_rewrite_replace_uses (rw, relu, mm);
  sg_rewrite_remove (rw, relu);
  SgGraph *t3 = sg_rewrite_trial (rw, NULL);
  g_autofree char *again = names_of (t3);
  ck_assert_str_eq (again, first);
  sg_graph_free (t3);
  sg_rewrite_rollback (rw, &start);
  SgGraph *t4 = sg_rewrite_trial (rw, NULL); /* nothing described: the graph */
  ck_assert_int_eq (t4->n_nodes, g->n_nodes);
  sg_graph_free (t4);
  sg_rewrite_free (rw);
  ck_assert_uint_eq (g->args->len, args_len);
  ck_assert_uint_eq (g->dims->len, dims_len);
  ck_assert_ptr_null (sg_graph_trial_origins (g));
}
END_TEST

/* Trials that grow by a node each: each gets a node array that holds it
 * (the spare of the last trial, too small, is freed first), with every
 * node, and the commit after them too; names resolve in the trials and
 * in the committed graph (the table built again after the commit). */
START_TEST (growing_trials_hold_every_node)
{
  g_autoptr (SgGraph) g = small_graph ();
  const SgNodeId mm = id_of (g, "mm");
  const int32_t n0 = g->n_nodes;
  SgRewrite *rw = sg_rewrite_new (g);
  SgRewriteMark start;
  sg_rewrite_mark (rw, &start);
  const SgMeta *m = &g->nodes[mm].meta;
  for (int k = 1; k <= 5; k++) {
    sg_rewrite_rollback (rw, &start);
    for (int i = 0; i < k; i++) {
      g_autofree char *name = g_strdup_printf ("e%d", i);
      SgArg a[] = { sg_arg_ref (mm) };
      SgNodeSpec s = { .name = name, .kind = SG_OP_EXP, .args = a, .n_args = 1,
                       .meta = sg_rewrite_meta (rw, sg_meta_shape (g, m), NULL, m->ndim,
                                                m->dtype),
                       .cost_us = NAN };
      SgNodeId e = sg_rewrite_add (rw, &s, NULL);
      sg_rewrite_place (rw, e, mm, SG_PLACE_AFTER);
    }
    SgGraph *t = sg_rewrite_trial (rw, NULL);
    ck_assert_ptr_nonnull (t);
    ck_assert_int_eq (t->n_nodes, n0 + k);
    ck_assert_int_ge (t->nodes_cap, t->n_nodes);
    g_autofree char *names = names_of (t);
    g_autofree char *last = g_strdup_printf ("e%d", k - 1);
    ck_assert_msg (strstr (names, last) != NULL, "%s", names);
    ck_assert_str_eq (t->nodes[t->n_nodes - 1].name, "output");
    ck_assert_int_eq (sg_graph_lookup (t, last), id_of (g, "mm") + k);
    sg_graph_free (t);
  }
  ck_assert (sg_rewrite_commit (rw, NULL));
  sg_rewrite_free (rw);
  ck_assert_int_eq (g->n_nodes, n0 + 5);
  for (SgNodeId i = 0; i < g->n_nodes; i++)
    ck_assert_int_eq (sg_graph_lookup (g, g->nodes[i].name), i);
  assert_valid (g);
}
END_TEST

/* sg_graph_order_by_key: the smallest key among ready nodes, data and
 * implicit edges respected; a cycle of implicit edges gives NULL. */
START_TEST (order_by_key_is_a_stable_topological_sort)
{
  g_autoptr (SgGraph) g = small_graph ();
  /* x w ag ag_w wt mm relu output: w's branch first, x as late as it can */
  const int64_t key[] = { 9, 0, 1, 2, 3, 4, 5, 6 };
  g_autofree SgNodeId *o = sg_graph_order_by_key (g, key);
  static const char *const want[] = { "w", "ag", "ag_w", "wt", "x", "mm", "relu", "output" };
  for (int32_t i = 0; i < g->n_nodes; i++)
    ck_assert_str_eq (g->nodes[o[i]].name, want[i]);
  /* an implicit edge x -> w puts x first; relu -> ag closes a cycle */
  g->implicit_edges = g_array_new (FALSE, FALSE, sizeof (SgImplicitEdge));
  SgImplicitEdge e = { id_of (g, "x"), id_of (g, "w"), 4 };
  g_array_append_val (g->implicit_edges, e);
  g_autofree SgNodeId *o2 = sg_graph_order_by_key (g, key);
  ck_assert_str_eq (g->nodes[o2[0]].name, "x");
  ck_assert_str_eq (g->nodes[o2[1]].name, "w");
  SgImplicitEdge back = { id_of (g, "relu"), id_of (g, "ag"), 4 };
  g_array_append_val (g->implicit_edges, back);
  ck_assert_ptr_null (sg_graph_order_by_key (g, key));
}
END_TEST

START_TEST (added_names_are_made_unique_and_nodes_placed)
{
  g_autoptr (SgGraph) g = small_graph ();
  g_autoptr (SgRewrite) rw = sg_rewrite_new (g);
  SgNodeId x = id_of (g, "x");
  const SgMeta *m = &g->nodes[x].meta;
  SgArg a[] = { sg_arg_ref (x) };
  SgNodeSpec s = { .name = "mm", .kind = SG_OP_NEG, .args = a, .n_args = 1,
                   .meta = sg_rewrite_meta (rw, sg_meta_shape (g, m), NULL, 2, m->dtype),
                   .cost_us = NAN };
  SgNodeId n1 = sg_rewrite_add (rw, &s, NULL);
  SgNodeId n2 = sg_rewrite_add (rw, &s, NULL); /* default: just after x */
  sg_rewrite_place (rw, n1, id_of (g, "ag_w"), SG_PLACE_AFTER);
  ck_assert (sg_rewrite_commit (rw, NULL));
  static const char *const want[] = { "x", "mm_2", "w", "ag", "ag_w", "mm_1", "wt", "mm", "relu",
                                      "output" };
  assert_order (g, want, G_N_ELEMENTS (want));
  (void)n2;
  assert_valid (g);
}
END_TEST

/* An added node skips the base names of the form name_<digits> as well
 * as the name itself: with base nodes mm, mm_1, mm_3 and mm_x_2 (and one
 * named "_2"), three added mm become mm_2, mm_4 and mm_5, two added mm_x
 * become mm_x and mm_x_1. */
START_TEST (added_names_skip_base_names_with_a_number)
{
  g_autoptr (SgGraph) g = tb_new (1);
  tb_input (g, "x", "float32", 1, (int64_t)4);
  static const char *const base[] = { "mm", "mm_1", "mm_3", "mm_x_2", "_2" };
  for (guint i = 0; i < G_N_ELEMENTS (base); i++)
    tb_pointwise (g, base[i], "aten.relu.default", i ? base[i - 1] : "x", NULL);
  tb_output (g, 1, "_2");
  g_autoptr (SgRewrite) rw = sg_rewrite_new (g);
  SgNodeId x = id_of (g, "x");
  const SgMeta *m = &g->nodes[x].meta;
  SgArg a[] = { sg_arg_ref (x) };
  static const char *const add[] = { "mm", "mm_x", "mm", "mm_x", "mm" };
  SgNodeId ids[G_N_ELEMENTS (add)];
  for (guint i = 0; i < G_N_ELEMENTS (add); i++) {
    SgNodeSpec s = { .name = add[i], .kind = SG_OP_NEG, .args = a, .n_args = 1,
                     .meta = sg_rewrite_meta (rw, sg_meta_shape (g, m), NULL, 1, m->dtype),
                     .cost_us = NAN };
    ids[i] = sg_rewrite_add (rw, &s, NULL);
    ck_assert_int_ne (ids[i], SG_NO_NODE);
    sg_rewrite_place (rw, ids[i], g->output, SG_PLACE_BEFORE);
  }
  ck_assert (sg_rewrite_commit (rw, NULL));
  static const char *const want[] = { "x", "mm", "mm_1", "mm_3", "mm_x_2", "_2",
                                      "mm_2", "mm_x", "mm_4", "mm_x_1", "mm_5",
                                      "output" };
  assert_order (g, want, G_N_ELEMENTS (want));
  assert_valid (g);
}
END_TEST

/* Adds neg(x) named "late", placed after the output. */
static void
add_after_output (SgGraph *g, SgRewrite *rw)
{
  SgNodeId x = id_of (g, "x");
  const SgMeta *m = &g->nodes[x].meta;
  SgArg a[] = { sg_arg_ref (x) };
  SgNodeSpec s = { .name = "late", .kind = SG_OP_NEG, .args = a, .n_args = 1,
                   .meta = sg_rewrite_meta (rw, sg_meta_shape (g, m), NULL, 2, m->dtype),
                   .cost_us = NAN };
  sg_rewrite_place (rw, sg_rewrite_add (rw, &s, NULL), g->output, SG_PLACE_AFTER);
}

/* The output stays last: an added node placed after it goes just before,
 * in a trial graph and on commit. */
START_TEST (a_node_placed_after_the_output_goes_before_it)
{
  g_autoptr (SgGraph) g = small_graph ();
  g_autoptr (SgRewrite) rw = sg_rewrite_new (g);
  add_after_output (g, rw);
  SgGraph *t = sg_rewrite_trial (rw, NULL);
  ck_assert_str_eq (t->nodes[t->n_nodes - 1].name, "output");
  ck_assert_str_eq (t->nodes[t->n_nodes - 2].name, "late");
  ck_assert_int_eq (t->output, t->n_nodes - 1);
  sg_graph_free (t);
  sg_rewrite_reset (rw);
  add_after_output (g, rw);
  ck_assert (sg_rewrite_commit (rw, NULL));
  static const char *const want[] = { "x", "w", "ag", "ag_w", "wt", "mm", "relu", "late",
                                      "output" };
  assert_order (g, want, G_N_ELEMENTS (want));
  assert_valid (g);
}
END_TEST

START_TEST (merged_inputs_reindex_the_arguments)
{
  g_autoptr (SgGraph) g = tb_new (1);
  tb_input (g, "p", "float32", 1, (int64_t)4);
  tb_input (g, "q", "float32", 1, (int64_t)4);
  tb_pointwise (g, "add", "aten.add.Tensor", "q", "p");
  tb_output (g, 1, "add");
  g_autoptr (SgRewrite) rw = sg_rewrite_new (g);
  sg_rewrite_replace_uses (rw, id_of (g, "q"), id_of (g, "p"));
  sg_rewrite_remove (rw, id_of (g, "q"));
  ck_assert (sg_rewrite_commit (rw, NULL));
  SgNodeId add = id_of (g, "add");
  ck_assert_uint_eq (g->nodes[add].n_in, 1);
  g_autofree char *text = tb_args_text (g, add);
  ck_assert_str_eq (text, "[{\"node\":\"p\"},{\"node\":\"p\"}] {}");
  assert_valid (g);
}
END_TEST

START_TEST (refusals_name_the_node_and_leave_the_graph)
{
  g_autoptr (SgGraph) g = small_graph ();
  GError *error = NULL;
  /* a removed node still read */
  SgRewrite *rw = sg_rewrite_new (g);
  sg_rewrite_remove (rw, id_of (g, "mm"));
  ck_assert (!sg_rewrite_commit (rw, &error));
  assert_error (error, SG_GRAPH_ERROR_REF, "node 'relu' reads 'mm', which is being removed");
  error = NULL;
  sg_rewrite_free (rw);
  /* the output */
  rw = sg_rewrite_new (g);
  sg_rewrite_remove (rw, g->output);
  ck_assert_ptr_null (sg_rewrite_trial (rw, &error));
  assert_error (error, SG_GRAPH_ERROR_REF, "the output node cannot be removed");
  error = NULL;
  sg_rewrite_free (rw);
  /* a cycle: mm reads a node computed from relu, which reads mm */
  rw = sg_rewrite_new (g);
  SgNodeId relu = id_of (g, "relu"), x = id_of (g, "x");
  SgArg a[] = { sg_arg_ref (relu) };
  SgNodeSpec s = { .name = "back", .kind = SG_OP_NEG, .args = a, .n_args = 1,
                   .meta = g->nodes[x].meta, .cost_us = NAN };
  sg_rewrite_add (rw, &s, NULL);
  sg_rewrite_replace_uses (rw, x, g->n_nodes);
  ck_assert (!sg_rewrite_commit (rw, &error));
  assert_error (error, SG_GRAPH_ERROR_CYCLE, "the edits close a cycle");
  error = NULL;
  sg_rewrite_free (rw);
  /* a bad spec: a collective without its group */
  rw = sg_rewrite_new (g);
  SgArg ag[] = { sg_arg_ref (x), sg_arg_i (2), sg_rewrite_str (rw, "nope") };
  SgNodeSpec cs = { .name = "ag2", .kind = SG_OP_ALL_GATHER, .args = ag, .n_args = 3,
                    .meta = g->nodes[x].meta, .cost_us = NAN };
  ck_assert_int_eq (sg_rewrite_add (rw, &cs, &error), SG_NO_NODE);
  assert_error (error, SG_GRAPH_ERROR_GROUP, "group 'nope' is not in `groups`");
  error = NULL;
  sg_rewrite_free (rw);
  ck_assert_int_eq (g->n_nodes, 8);
  assert_valid (g);
}
END_TEST

START_TEST (a_node_like_another_copies_its_arguments)
{
  g_autoptr (SgGraph) g = small_graph ();
  g_autoptr (SgRewrite) rw = sg_rewrite_new (g);
  SgNodeId ag = id_of (g, "ag");
  SgArg args[4];
  SgKwarg kw[2];
  ck_assert_uint_eq (sg_rewrite_args_of (rw, ag, args, 4), 3);
  ck_assert_uint_eq (sg_rewrite_kwargs_of (rw, ag, kw, 2), 0);
  ck_assert_int_eq (args[0].ref, id_of (g, "w"));
  SgKwarg extra = { "note", sg_rewrite_list (rw, args + 1, 2) };
  SgNodeSpec s = { .name = "ag", .kind = SG_OP_ALL_GATHER, .args = args, .n_args = 3,
                   .kwargs = &extra, .n_kwargs = 1, .meta = g->nodes[ag].meta, .cost_us = NAN };
  SgNodeId c = sg_rewrite_add (rw, &s, NULL);
  ck_assert_int_eq (sg_rewrite_node (rw, c)->group, 0);
  SgGraph *base = sg_rewrite_graph (rw);
  const SgArg *stored = &g_array_index (base->args, SgArg, sg_rewrite_node (rw, c)->args_first);
  ck_assert_int_eq (sg_rewrite_arg_node (rw, c, stored), id_of (g, "w"));
  SgArg wa[] = { sg_arg_ref (c) };
  SgNodeSpec ws = { .name = "ag_w", .kind = SG_OP_WAIT, .args = wa, .n_args = 1,
                    .meta = g->nodes[ag].meta, .cost_us = NAN };
  SgNodeId w = sg_rewrite_add (rw, &ws, NULL);
  sg_rewrite_replace_uses (rw, id_of (g, "ag_w"), w);
  sg_rewrite_remove (rw, ag);
  sg_rewrite_remove (rw, id_of (g, "ag_w"));
  ck_assert (sg_rewrite_commit (rw, NULL));
  g_autofree char *text = tb_args_text (g, id_of (g, "ag_1"));
  ck_assert_str_eq (text, "[{\"node\":\"w\"},2,\"0\"] {\"note\":[2,\"0\"]}");
  assert_valid (g);
}
END_TEST


/* Two chains, p0..p{n-1} (relu, from x) and q0..q{n-1} (sigmoid, from y),
 * interleaved in id order, a leaf z = relu(x) before them and implicit
 * edges p3 -> q5 and z -> q{n-10}. */
static SgGraph *
two_chains (int n)
{
  SgGraph *g = tb_new (1);
  tb_input (g, "x", "float32", 2, (int64_t)4, (int64_t)8);
  tb_input (g, "y", "float32", 2, (int64_t)4, (int64_t)8);
  tb_pointwise (g, "z", "aten.relu.default", "x", NULL);
  for (int i = 0; i < n; i++) {
    g_autofree char *p = g_strdup_printf ("p%d", i), *q = g_strdup_printf ("q%d", i);
    g_autofree char *pp = g_strdup_printf ("p%d", i - 1), *qq = g_strdup_printf ("q%d", i - 1);
    tb_pointwise (g, p, "aten.relu.default", i ? pp : "x", NULL);
    tb_pointwise (g, q, "aten.sigmoid.default", i ? qq : "y", NULL);
  }
  g_autofree char *pl = g_strdup_printf ("p%d", n - 1), *ql = g_strdup_printf ("q%d", n - 1);
  tb_output (g, 2, pl, ql);
  g->implicit_edges = g_array_new (FALSE, FALSE, sizeof (SgImplicitEdge));
  g_autofree char *qe = g_strdup_printf ("q%d", n - 10);
  SgImplicitEdge e[] = { { id_of (g, "p3"), id_of (g, "q5"), 4 }, { id_of (g, "z"), id_of (g, qe), 4 } };
  g_array_append_vals (g->implicit_edges, e, 2);
  return g;
}

/* An edit of two_chains: p@i (z when @i < 0) becomes tanh of its input,
 * placed before it or, with @at, after p@at, its implicit edges moved to
 * the tanh when @move (@late < 0); or a node reading p@late is placed
 * before p@i (it can only come after p@late). */
typedef struct {
  int i, late, at;
  bool move;
} Edit;

static void
edit (SgRewrite *rw, Edit e)
{
  const SgGraph *g = sg_rewrite_graph (rw);
  g_autofree char *name = e.i < 0 ? g_strdup ("z") : g_strdup_printf ("p%d", e.i);
  g_autofree char *src = g_strdup_printf ("p%d", e.late >= 0 ? e.late : e.i - 1);
  SgNodeId p = id_of (g, name);
  const SgMeta *m = &g->nodes[p].meta;
  SgArg a[] = { sg_arg_ref (e.late < 0 && e.i <= 0 ? id_of (g, "x") : id_of (g, src)) };
  SgNodeSpec sp = { .name = e.late >= 0 ? "late" : "t", .kind = SG_OP_TANH, .args = a,
                    .n_args = 1, .cost_us = NAN,
                    .meta = sg_rewrite_meta (rw, sg_meta_shape (g, m), NULL, m->ndim, m->dtype) };
  SgNodeId t = sg_rewrite_add (rw, &sp, NULL);
  ck_assert_int_ne (t, SG_NO_NODE);
  g_autofree char *at = g_strdup_printf ("p%d", e.at);
  if (e.late >= 0)
    sg_rewrite_place (rw, t, p, SG_PLACE_BEFORE_EARLY);
  else if (e.at)
    sg_rewrite_place (rw, t, id_of (g, at), SG_PLACE_AFTER);
  else
    sg_rewrite_place (rw, t, p, SG_PLACE_BEFORE);
  if (e.late >= 0)
    return;
  sg_rewrite_replace_uses (rw, p, t);
  sg_rewrite_remove (rw, p);
  if (e.move)
    sg_rewrite_move_edges (rw, p, t, 0);
}

/* @t and @f have the same nodes: names, inputs and args. */
static void
assert_same_nodes (const SgGraph *t, const SgGraph *f)
{
  ck_assert_int_eq (t->n_nodes, f->n_nodes);
  for (SgNodeId i = 0; i < f->n_nodes; i++) {
    ck_assert_str_eq (t->nodes[i].name, f->nodes[i].name);
    uint32_t na, nb;
    const SgNodeId *ia = sg_node_inputs (t, i, &na), *ib = sg_node_inputs (f, i, &nb);
    ck_assert_int_eq (na, nb);
    for (uint32_t k = 0; k < na; k++)
      ck_assert_int_eq (ia[k], ib[k]);
    g_autofree char *ta = tb_args_text (t, i), *fa = tb_args_text (f, i);
    ck_assert_str_eq (ta, fa);
  }
}

/* A trial of @rw equals a trial of a fresh rewrite with the same @edits. */
static void
assert_trial_fresh (SgRewrite *rw, const Edit *edits, int n, bool reused)
{
  SgGraph *g = sg_rewrite_graph (rw);
  SgGraph *t = sg_rewrite_trial (rw, NULL);
  ck_assert_ptr_nonnull (t);
  ck_assert (reused == (sg_rewrite_last_reused (rw) > 0));
  g_autoptr (SgRewrite) fresh = sg_rewrite_new (g);
  for (int i = 0; i < n; i++)
    edit (fresh, edits[i]);
  SgGraph *f = sg_rewrite_trial (fresh, NULL);
  ck_assert_int_eq (sg_rewrite_last_reused (fresh), 0);
  assert_same_nodes (t, f);
  ck_assert_uint_eq (t->implicit_edges->len, f->implicit_edges->len);
  sg_graph_free (f);
  sg_graph_free (t);
}

/* Trial after trial of one rewrite reuse the last one's order outside what
 * changed: a change at the very start, at the very end, in the middle, a
 * trial after one that was rolled back (a rejected set), one with nothing
 * changed, one whose new node can only come much later than its key,
 * one that moves an implicit edge (its end, not changed otherwise, now
 * comes later); each equals a fresh rewrite's trial. */
START_TEST (trials_reuse_the_last_order_where_nothing_changed)
{
  g_autoptr (SgGraph) g = two_chains (40);
  g_autoptr (SgRewrite) rw = sg_rewrite_new (g);
  sg_rewrite_set_verify (rw, true);
  SgRewriteMark m0, m1;
  sg_rewrite_mark (rw, &m0);
  static const Edit mid = { 20, -1, 0, false }, start = { 0, -1, 0, false },
                    end = { 39, -1, 0, false }, early = { 8, -1, 0, false },
                    late = { 2, 30, 0, false }, moved = { -1, -1, 35, true };
  Edit e[3] = { mid };
  edit (rw, mid);
  assert_trial_fresh (rw, e, 1, false);
  sg_rewrite_rollback (rw, &m0);
  edit (rw, start);
  e[0] = start;
  assert_trial_fresh (rw, e, 1, true);
  sg_rewrite_rollback (rw, &m0);
  edit (rw, end);
  e[0] = end;
  assert_trial_fresh (rw, e, 1, true);
  sg_rewrite_rollback (rw, &m0);
  edit (rw, mid);
  sg_rewrite_mark (rw, &m1);
  edit (rw, early);
  e[0] = mid, e[1] = early;
  assert_trial_fresh (rw, e, 2, true);
  sg_rewrite_rollback (rw, &m1); /* early rejected */
  edit (rw, end);
  e[1] = end;
  assert_trial_fresh (rw, e, 2, true);
  assert_trial_fresh (rw, e, 2, true); /* nothing changed */
  sg_rewrite_rollback (rw, &m1);
  edit (rw, late);
  e[1] = late;
  assert_trial_fresh (rw, e, 2, true);
  edit (rw, moved);
  e[2] = moved;
  assert_trial_fresh (rw, e, 3, true);
  sg_rewrite_rollback (rw, &m0);
  assert_trial_fresh (rw, e, 0, true);
  sg_rewrite_reset (rw);
  assert_trial_fresh (rw, e, 0, false);
}
END_TEST

/* Windows ordered side by side on a pool (rw->windows_min lowered to one
 * node) give the order of one window after the other: trials with edits
 * spread over two long chains (many windows), then a few of them changed,
 * one whose new node can only come much later than its key (its window
 * grows over the rest: the whole order) and one that moves an implicit
 * edge, with pools of 1, 2, 3 and 8
 * threads; each equals a fresh rewrite's trial and, verified, the whole
 * order. */
START_TEST (windows_ordered_side_by_side_equal_one_after_another)
{
  static const int threads[] = { 1, 2, 3, 8 };
  for (guint p = 0; p < G_N_ELEMENTS (threads); p++) {
    g_autoptr (SgGraph) g = two_chains (200);
    SgPool *pool = sg_pool_new (threads[p]);
    SgRewrite *rw = sg_rewrite_new (g);
    sg_rewrite_set_verify (rw, true);
    sg_rewrite_set_pool (rw, pool);
    rw->windows_min = 1;
    SgRewriteMark m0, m1;
    sg_rewrite_mark (rw, &m0);
    Edit e[10];
    int n = 0;
    for (int i = 20; i < 190; i += 24) {
      e[n] = (Edit){ i, -1, 0, false };
      edit (rw, e[n++]);
    }
    assert_trial_fresh (rw, e, n, false);
    sg_rewrite_rollback (rw, &m0);
    n = 0;
    for (int i = 20; i < 190; i += 24) {
      e[n] = (Edit){ i % 48 == 20 ? i + 3 : i, -1, 0, false };
      edit (rw, e[n++]);
    }
    assert_trial_fresh (rw, e, n, true);
    sg_rewrite_mark (rw, &m1);
    e[n] = (Edit){ 2, 30, 0, false };
    edit (rw, e[n++]);
    assert_trial_fresh (rw, e, n, false); /* its window grows over the rest */
    e[n] = (Edit){ -1, -1, 35, true };
    edit (rw, e[n++]);
    assert_trial_fresh (rw, e, n, true);
    sg_rewrite_rollback (rw, &m1);
    assert_trial_fresh (rw, e, n - 2, true);
    sg_rewrite_rollback (rw, &m0);
    e[0] = (Edit){ 20, -1, 0, false };
    edit (rw, e[0]);
    sg_rewrite_mark (rw, &m1);
    e[1] = (Edit){ 199, -1, 0, false };
    edit (rw, e[1]);
    assert_trial_fresh (rw, e, 2, true);
    sg_rewrite_rollback (rw, &m1);
    e[1] = (Edit){ 2, 30, 0, false };
    edit (rw, e[1]);
    assert_trial_fresh (rw, e, 2, true); /* its window grows */
    sg_rewrite_free (rw);
    sg_pool_free (pool);
  }
}
END_TEST

/* A trial of @rw equals a fresh rewrite's with @edits, costs (est_src)
 * included, and kept the last trial's first nodes (rw->laid_kept) when
 * @kept; then its added nodes are costed, as the bucket pass does, before
 * it goes back to the rewrite. */
static void
assert_trial_kept (SgRewrite *rw, const Edit *edits, int n, bool kept)
{
  SgGraph *g = sg_rewrite_graph (rw);
  SgGraph *t = sg_rewrite_trial (rw, NULL);
  ck_assert_ptr_nonnull (t);
  ck_assert (kept == (rw->laid_kept > 0));
  g_autoptr (SgRewrite) fresh = sg_rewrite_new (g);
  for (int i = 0; i < n; i++)
    edit (fresh, edits[i]);
  SgGraph *f = sg_rewrite_trial (fresh, NULL);
  assert_same_nodes (t, f);
  for (SgNodeId i = 0; i < t->n_nodes; i++) {
    ck_assert_int_eq (t->nodes[i].est_src, f->nodes[i].est_src);
    if (t->nodes[i].est_src == SG_COST_NONE)
      t->nodes[i].est_src = SG_COST_MODEL, t->nodes[i].est_us = 7.0;
  }
  sg_graph_free (f);
  sg_graph_free (t);
}

/* Trial after trial of one rewrite, of a costed graph large enough for its
 * copies to go on the pool, keep the last trial graph's nodes before the
 * first change: an added node there (costed by the last trial's user) is
 * copied again; with pools of 1 and 3 threads, each trial equals a fresh
 * rewrite's and, verified, a fresh copy. */
START_TEST (trials_keep_the_last_trials_nodes_before_what_changed)
{
  static const int threads[] = { 1, 3 };
  for (guint p = 0; p < G_N_ELEMENTS (threads); p++) {
    g_autoptr (SgGraph) g = two_chains (9000);
    for (SgNodeId v = 0; v < g->n_nodes; v++)
      g->nodes[v].est_src = SG_COST_MODEL, g->nodes[v].est_us = 1.0;
    SgPool *pool = sg_pool_new (threads[p]);
    SgRewrite *rw = sg_rewrite_new (g);
    sg_rewrite_set_verify (rw, true);
    sg_rewrite_set_pool (rw, pool);
    SgRewriteMark m0, m1;
    sg_rewrite_mark (rw, &m0);
    Edit e[2] = { { 5000, -1, 0, false }, { 8990, -1, 0, false } };
    edit (rw, e[0]);
    sg_rewrite_mark (rw, &m1);
    edit (rw, e[1]);
    assert_trial_kept (rw, e, 2, false);
    sg_rewrite_rollback (rw, &m1);
    e[1] = (Edit){ 8995, -1, 0, false };
    edit (rw, e[1]);
    assert_trial_kept (rw, e, 2, true); /* p5000's tanh among the kept */
    assert_trial_kept (rw, e, 2, true); /* nothing changed */
    sg_rewrite_rollback (rw, &m0);
    e[0] = (Edit){ 8000, -1, 0, false };
    edit (rw, e[0]);
    assert_trial_kept (rw, e, 1, true);
    sg_rewrite_free (rw);
    sg_pool_free (pool);
  }
}
END_TEST

/* c@i of merged_chain becomes tanh of c@{i-1}, placed before it. */
static void
tanh_for (SgRewrite *rw, int i)
{
  const SgGraph *g = sg_rewrite_graph (rw);
  g_autofree char *name = g_strdup_printf ("c%d", i), *src = g_strdup_printf ("c%d", i - 1);
  SgNodeId c = id_of (g, name);
  const SgMeta *m = &g->nodes[c].meta;
  SgArg a[] = { sg_arg_ref (id_of (g, src)) };
  SgNodeSpec sp = { .name = "t", .kind = SG_OP_TANH, .args = a, .n_args = 1, .cost_us = NAN,
                    .meta = sg_rewrite_meta (rw, sg_meta_shape (g, m), NULL, m->ndim, m->dtype) };
  SgNodeId t = sg_rewrite_add (rw, &sp, NULL);
  ck_assert_int_ne (t, SG_NO_NODE);
  sg_rewrite_place (rw, t, c, SG_PLACE_BEFORE);
  sg_rewrite_replace_uses (rw, c, t);
  sg_rewrite_remove (rw, c);
}

/* A user whose two inputs became one (its args re-indexed by each layout)
 * before what changed since the last trial is copied again: add(q, p)
 * with q replaced by p, then a chain c0..c19 from it, costed; trials with
 * c18, c16 and c14, then c17 and c15 replaced, verified against a fresh
 * copy. */
START_TEST (a_kept_prefix_copies_re_indexed_users_again)
{
  g_autoptr (SgGraph) g = tb_new (1);
  tb_input (g, "p", "float32", 1, (int64_t)4);
  tb_input (g, "q", "float32", 1, (int64_t)4);
  tb_pointwise (g, "add", "aten.add.Tensor", "q", "p");
  for (int i = 0; i < 20; i++) {
    g_autofree char *c = g_strdup_printf ("c%d", i), *b = g_strdup_printf ("c%d", i - 1);
    tb_pointwise (g, c, "aten.relu.default", i ? b : "add", NULL);
  }
  tb_output (g, 1, "c19");
  for (SgNodeId v = 0; v < g->n_nodes; v++)
    g->nodes[v].est_src = SG_COST_MODEL;
  g_autoptr (SgRewrite) rw = sg_rewrite_new (g);
  sg_rewrite_set_verify (rw, true);
  sg_rewrite_replace_uses (rw, id_of (g, "q"), id_of (g, "p"));
  sg_rewrite_remove (rw, id_of (g, "q"));
  SgRewriteMark m;
  sg_rewrite_mark (rw, &m);
  tanh_for (rw, 18);
  tanh_for (rw, 16);
  tanh_for (rw, 14);
  SgGraph *t = sg_rewrite_trial (rw, NULL);
  ck_assert_ptr_nonnull (t);
  sg_graph_free (t);
  sg_rewrite_rollback (rw, &m);
  tanh_for (rw, 17);
  tanh_for (rw, 15); /* fewer args before the re-indexed ones: elsewhere */
  t = sg_rewrite_trial (rw, NULL);
  ck_assert_ptr_nonnull (t);
  ck_assert_int_gt (rw->laid_kept, id_of (t, "add"));
  g_autofree char *text = tb_args_text (t, id_of (t, "add"));
  ck_assert_str_eq (text, "[{\"node\":\"p\"},{\"node\":\"p\"}] {}");
  sg_graph_free (t);
}
END_TEST

/* --- redirects in ranges (rewrite-redirect.c) --------------------------- */

/* Whether r@i's uses go to a q (or, i % 10 == 7, to r@{i+1}, itself
 * redirected), and to which. */
static bool
redirected (int i)
{
  return i % 3 != 2 || i % 10 == 2 || i % 10 == 8;
}

static const char *
target_of (int i, char *buf, size_t len)
{
  g_snprintf (buf, len, i % 10 == 7 ? "r%d" : "q%d", i % 10 == 0 || i % 10 == 7 ? i + 1 + (i % 10 == 0) : i);
  return buf;
}

/* The redirects of @n users' inputs, over @g of redirect_graph (@n r's). */
static void
redirect_all (SgRewrite *rw, int n)
{
  const SgGraph *g = sg_rewrite_graph (rw);
  char name[32], to[32];
  for (int i = 0; i < n; i++)
    if (redirected (i)) {
      g_snprintf (name, sizeof name, "r%d", i);
      sg_rewrite_replace_uses (rw, id_of (g, name), id_of (g, target_of (i, to, sizeof to)));
    }
}

/* q@i = relu(x) and r@i = sigmoid(x), read by a@i = r@i + r@{i+1} (two
 * replaced inputs: redirected once), s@i = r@i + r@{i+2} (both replaced by
 * q@{i+2} where i % 10 == 0: its inputs merge and its args are
 * re-indexed) and one stack of the first 40 r's (more inputs than a range
 * lists). */
static SgGraph *
redirect_graph (int n)
{
  SgGraph *g = tb_new (1);
  tb_input (g, "x", "float32", 1, (int64_t)4);
  char a[32], b[32], c[32];
  for (int i = 0; i < n; i++) {
    g_snprintf (a, sizeof a, "q%d", i);
    tb_pointwise (g, a, "aten.relu.default", "x", NULL);
    g_snprintf (a, sizeof a, "r%d", i);
    tb_pointwise (g, a, "aten.sigmoid.default", "x", NULL);
  }
  for (int i = 0; i + 2 < n; i++) {
    g_snprintf (a, sizeof a, "a%d", i);
    g_snprintf (b, sizeof b, "r%d", i);
    g_snprintf (c, sizeof c, "r%d", i + 1);
    tb_pointwise (g, a, "aten.add.Tensor", b, c);
    g_snprintf (a, sizeof a, "s%d", i);
    g_snprintf (c, sizeof c, "r%d", i + 2);
    tb_pointwise (g, a, "aten.add.Tensor", b, c);
  }
  GString *refs = g_string_new (NULL);
  for (int i = 0; i < 40; i++)
    g_string_append_printf (refs, "%s{\"node\":\"r%d\"}", i ? "," : "", i);
  tb_node (g, "{\"name\":\"stack\",\"op\":\"call_function\",\"target\":"
              "\"aten.stack.default\",\"args\":[[%s]],\"kwargs\":{}}", refs->str);
  g_string_free (refs, TRUE);
  tb_output (g, 2, "stack", "s0");
  return g;
}

/* The users of replaced nodes redirected in ranges on pools of 1, 2, 3
 * and 8 threads (the rewrite's minimum lowered to one node) get what one
 * range gives them: the same inputs, and the same re-indexed args where
 * two inputs became one (s0: both q2). */
START_TEST (redirects_in_ranges_equal_redirects_in_one_range)
{
  static const int threads[] = { 1, 2, 3, 8 };
  g_autoptr (SgGraph) g = redirect_graph (300);
  g_autoptr (SgRewrite) one = sg_rewrite_new (g);
  redirect_all (one, 300);
  SgGraph *f = sg_rewrite_trial (one, NULL);
  ck_assert_ptr_nonnull (f);
  SgNodeId s0 = id_of (f, "s0");
  ck_assert_uint_eq (f->nodes[s0].n_in, 1);
  g_autofree char *s0_args = tb_args_text (f, s0);
  ck_assert_str_eq (s0_args, "[{\"node\":\"q2\"},{\"node\":\"q2\"}] {}");
  for (guint p = 0; p < G_N_ELEMENTS (threads); p++) {
    SgPool *pool = sg_pool_new (threads[p]);
    SgRewrite *rw = sg_rewrite_new (g);
    sg_rewrite_set_pool (rw, pool);
    rw->windows_min = 1;
    redirect_all (rw, 300);
    SgGraph *t = sg_rewrite_trial (rw, NULL);
    ck_assert_ptr_nonnull (t);
    assert_same_nodes (t, f);
    /* each redirected user listed once (the layout's, kept for the next) */
    ck_assert_uint_eq (rw->last_touched->len, one->last_touched->len);
    sg_graph_free (t);
    sg_rewrite_free (rw);
    sg_pool_free (pool);
  }
  sg_graph_free (f);
}
END_TEST

/* --- replaying parts of a description (rewrite-stash.c) ----------------- */

/* @k nodes e0..e{k-1} = exp(mm) after mm. */
static void
exps (SgRewrite *rw, int k)
{
  const SgGraph *g = sg_rewrite_graph (rw);
  SgNodeId mm = id_of (g, "mm");
  const SgMeta *m = &g->nodes[mm].meta;
  for (int i = 0; i < k; i++) {
    g_autofree char *name = g_strdup_printf ("e%d", i);
    SgArg a[] = { sg_arg_ref (mm) };
    SgNodeSpec s = { .name = name, .kind = SG_OP_EXP, .args = a, .n_args = 1, .cost_us = NAN,
                     .meta = sg_rewrite_meta (rw, sg_meta_shape (g, m), NULL, m->ndim, m->dtype) };
    SgNodeId e = sg_rewrite_add (rw, &s, NULL);
    ck_assert_int_ne (e, SG_NO_NODE);
    sg_rewrite_place (rw, e, mm, SG_PLACE_AFTER);
  }
}

/* ag and its wait described again: ag2 = all_gather(w) with ag's args and
 * a kwarg list [@tag, "0"], ag2_w = wait(ag2) read by ag_w's users; ag and
 * ag_w removed, their implicit edges moved. Reads base nodes and its own. */
static void
ag_again (SgRewrite *rw, int64_t tag)
{
  SgGraph *g = sg_rewrite_graph (rw);
  SgNodeId ag = id_of (g, "ag"), agw = id_of (g, "ag_w");
  const SgMeta *m = &g->nodes[ag].meta;
  SgArg args[4];
  ck_assert_uint_eq (sg_rewrite_args_of (rw, ag, args, 4), 3);
  SgArg items[] = { sg_arg_i (tag), sg_rewrite_str (rw, "0") };
  SgKwarg note = { "note", sg_rewrite_list (rw, items, 2) };
  SgNodeSpec cs = { .name = "ag2", .kind = SG_OP_ALL_GATHER, .args = args, .n_args = 3,
                    .kwargs = &note, .n_kwargs = 1, .cost_us = NAN,
                    .meta = sg_rewrite_meta (rw, sg_meta_shape (g, m), NULL, m->ndim, m->dtype) };
  SgNodeId c = sg_rewrite_add (rw, &cs, NULL);
  ck_assert_int_ne (c, SG_NO_NODE);
  SgArg wa[] = { sg_arg_ref (c) };
  SgNodeSpec ws = { .name = "ag2_w", .kind = SG_OP_WAIT, .args = wa, .n_args = 1, .cost_us = NAN,
                    .meta = sg_rewrite_meta (rw, sg_meta_shape (g, m), NULL, m->ndim, m->dtype) };
  SgNodeId w = sg_rewrite_add (rw, &ws, NULL);
  ck_assert_int_ne (w, SG_NO_NODE);
  sg_rewrite_place (rw, c, ag, SG_PLACE_BEFORE);
  sg_rewrite_place (rw, w, agw, SG_PLACE_BEFORE);
  sg_rewrite_replace_uses (rw, agw, w);
  sg_rewrite_remove (rw, ag);
  sg_rewrite_remove (rw, agw);
  sg_rewrite_move_edges (rw, ag, c, 0);
  sg_rewrite_move_edges (rw, agw, w, 0);
}

/* (transfer full) A trial of @rw as text: per node its name, inputs,
 * args and meta. */
static char *
trial_text (SgRewrite *rw)
{
  SgGraph *t = sg_rewrite_trial (rw, NULL);
  ck_assert_ptr_nonnull (t);
  GString *o = g_string_new (NULL);
  for (SgNodeId i = 0; i < t->n_nodes; i++) {
    uint32_t k;
    const SgNodeId *in = sg_node_inputs (t, i, &k);
    g_autofree char *args = tb_args_text (t, i);
    g_string_append_printf (o, "%s %s [", t->nodes[i].name, args);
    for (uint32_t j = 0; j < k; j++)
      g_string_append_printf (o, " %d", in[j]);
    const SgMeta *m = &t->nodes[i].meta;
    g_string_append_printf (o, " ] %d:", m->ndim);
    for (int32_t d = 0; d < m->ndim; d++)
      g_string_append_printf (o, " %" G_GINT64_FORMAT, sg_meta_shape (t, m)[d]);
    g_string_append_c (o, '\n');
  }
  sg_graph_free (t);
  return g_string_free (o, FALSE);
}

/* Describes exps (1) and ag_again (7) from @m0 (marks @m1 between them
 * and @m2 after), makes a trial of it and frees it (the memory a stash
 * lives in), and stashes [@m0, @m2). */
static void
describe_and_stash (SgRewrite *rw, const SgRewriteMark *m0, SgRewriteMark *m1, SgRewriteMark *m2)
{
  sg_rewrite_rollback (rw, m0);
  exps (rw, 1);
  sg_rewrite_mark (rw, m1);
  ag_again (rw, 7);
  sg_rewrite_mark (rw, m2);
  g_free (trial_text (rw));
  ck_assert (sg_rewrite_stash (rw, m0, m2));
}

/* A part of a description replayed from a stash after a first part of
 * another length (0 to 3 added nodes where it had 1: its added nodes,
 * pool offsets, lists, metas, redirects, removals and moves shift) is the
 * part described afresh there, and its trial a fresh rewrite's; the whole
 * stash replays too; a part that reads a node of an earlier part of the
 * stash is refused with nothing added; parts that differ in one value are
 * not the same; a rewrite that made no trial has no memory to stash in;
 * the graph's pools are as they were after the rewrite. */
START_TEST (replayed_parts_equal_parts_described_again)
{
  g_autoptr (SgGraph) g = small_graph ();
  guint args_len = g->args->len, dims_len = g->dims->len;
  SgRewrite *rw = sg_rewrite_new (g);
  SgRewriteMark m0, m1, m2, m3, m4;
  sg_rewrite_mark (rw, &m0);
  exps (rw, 1);
  sg_rewrite_mark (rw, &m1);
  ck_assert (!sg_rewrite_stash (rw, &m0, &m1)); /* no trial yet */
  for (int k = 0; k <= 3; k++) {
    describe_and_stash (rw, &m0, &m1, &m2);
    sg_rewrite_rollback (rw, &m0);
    exps (rw, k);
    sg_rewrite_mark (rw, &m3);
    ck_assert (sg_rewrite_replay (rw, &m1, &m2));
    sg_rewrite_mark (rw, &m4);
    ck_assert_uint_eq (m4.nodes - m3.nodes, 2);
    ag_again (rw, 7);
    ck_assert_msg (sg_rewrite_parts_same (rw, &m3, &m4), "after %d nodes", k);
    sg_rewrite_rollback (rw, &m4);
    g_autofree char *replayed = trial_text (rw);
    SgRewrite *fresh = sg_rewrite_new (g);
    exps (fresh, k);
    ag_again (fresh, 7);
    g_autofree char *described = trial_text (fresh);
    sg_rewrite_free (fresh);
    ck_assert_str_eq (replayed, described);
  }
  describe_and_stash (rw, &m0, &m1, &m2);
  sg_rewrite_rollback (rw, &m0);
  exps (rw, 2);
  ck_assert (sg_rewrite_replay (rw, &m0, &m2));
  g_autofree char *whole = trial_text (rw);
  ck_assert_ptr_nonnull (strstr (whole, "e0 ")); /* e0 of the stash, after e0, e1 */
  SgRewrite *fresh = sg_rewrite_new (g);
  exps (fresh, 2);
  exps (fresh, 1);
  ag_again (fresh, 7);
  g_autofree char *described = trial_text (fresh);
  sg_rewrite_free (fresh);
  ck_assert_str_eq (whole, described);
  /* one value apart */
  sg_rewrite_rollback (rw, &m0);
  sg_rewrite_mark (rw, &m3);
  ag_again (rw, 7);
  sg_rewrite_mark (rw, &m4);
  ag_again (rw, 8);
  ck_assert (!sg_rewrite_parts_same (rw, &m3, &m4));
  /* a part reading e0 of the part before it */
  sg_rewrite_rollback (rw, &m0);
  exps (rw, 1);
  sg_rewrite_mark (rw, &m1);
  SgArg a[] = { sg_arg_ref (g->n_nodes) };
  SgNodeSpec s = { .name = "f", .kind = SG_OP_EXP, .args = a, .n_args = 1, .cost_us = NAN,
                   .meta = g->nodes[id_of (g, "mm")].meta };
  ck_assert_int_ne (sg_rewrite_add (rw, &s, NULL), SG_NO_NODE);
  sg_rewrite_mark (rw, &m2);
  g_free (trial_text (rw));
  ck_assert (sg_rewrite_stash (rw, &m0, &m2));
  sg_rewrite_rollback (rw, &m0);
  exps (rw, 2);
  sg_rewrite_mark (rw, &m3);
  ck_assert (!sg_rewrite_replay (rw, &m1, &m2));
  sg_rewrite_mark (rw, &m4);
  ck_assert (memcmp (&m3, &m4, sizeof m3) == 0);
  ck_assert (sg_rewrite_replay (rw, &m0, &m2)); /* with the node it reads */
  sg_rewrite_free (rw);
  ck_assert_uint_eq (g->args->len, args_len);
  ck_assert_uint_eq (g->dims->len, dims_len);
}
END_TEST

static Suite *
suite (void)
{
  Suite *s = suite_create ("rewrite");
  TCase *tc = tcase_create ("rewrite");
  tcase_add_test (tc, pass_replaces_one_node_by_two);
  tcase_add_test (tc, trial_graph_is_the_commit_and_leaves_the_base_alone);
  tcase_add_test (tc, result_ids_follow_the_nodes);
  tcase_add_test (tc, rollback_returns_to_the_mark);
  tcase_add_test (tc, growing_trials_hold_every_node);
  tcase_add_test (tc, order_by_key_is_a_stable_topological_sort);
  tcase_add_test (tc, added_names_are_made_unique_and_nodes_placed);
  tcase_add_test (tc, added_names_skip_base_names_with_a_number);
  tcase_add_test (tc, a_node_placed_after_the_output_goes_before_it);
  tcase_add_test (tc, merged_inputs_reindex_the_arguments);
  tcase_add_test (tc, refusals_name_the_node_and_leave_the_graph);
  tcase_add_test (tc, a_node_like_another_copies_its_arguments);
  tcase_add_test (tc, trials_reuse_the_last_order_where_nothing_changed);
  tcase_add_test (tc, windows_ordered_side_by_side_equal_one_after_another);
  tcase_add_test (tc, replayed_parts_equal_parts_described_again);
  tcase_add_test (tc, redirects_in_ranges_equal_redirects_in_one_range);
  tcase_add_test (tc, trials_keep_the_last_trials_nodes_before_what_changed);
  tcase_add_test (tc, a_kept_prefix_copies_re_indexed_users_again);
  suite_add_tcase (s, tc);
  return s;
}

int
main (void)
{
  return run_suite (suite ());
}
