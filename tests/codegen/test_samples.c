/* test_samples.c: every sample graph in tests/data lowered to a plan.
 *
 * For each graph: the input order (pred NULL and simulated), the
 * scheduler's order, and a bucketed graph (pairs of collectives merged
 * through bucket/'s rewrite). Checks: the plan validates; each compute node
 * is one KERNEL, each collective one COLLECTIVE, each wait one WAIT_EVENT,
 * in the graph's id order (bucket copies that graph/elide.c elides are
 * none, the others name why in kwargs.schedgraph_copy); no kernel argument still names a node; no two
 * buffers whose lifetimes overlap share a byte (every pair); arena between
 * the live peak and the sum of sizes; byte-identical text when lowered
 * twice and after a load/write round trip; predictions copied from the
 * simulator. Prints arena vs sum per graph (bench/RESULTS.md quotes it).
 */
#include <check.h>
#include <glib/gstdio.h>
#include <string.h>

#include "bucket.h"
#include "codegen.h"
#include "estimate.h"
#include "schedule.h"

/* every bucket of these tests is flat (pack / unpack) */
#define FLAT SG_BUCKET_LOWERING_FLAT

#ifndef SG_TEST_DATA
#error "SG_TEST_DATA must name tests/data"
#endif

static const char *const samples[] = {
  "w2_tiny_fsdp2_L2_h256.json", "w2_tiny_tp2_L2_h256.json", "w2_fsdp2_L2_h1024.json",
  "w2_tp2_L2_h1024.json",       "dev_fsdp8_L2_h1024.json",  "dev_fsdp2_tp4_L2_h1024.json",
};

/* FSDP graphs: their parameter all_gathers / gradient reduce_scatters can be
 * merged pairwise without a cycle (TP activations' collectives cannot). */
static const char *const fsdp_samples[] = {
  "w2_tiny_fsdp2_L2_h256.json", "w2_fsdp2_L2_h1024.json", "dev_fsdp8_L2_h1024.json",
  "dev_fsdp2_tp4_L2_h1024.json",
};

static SgGraph *
load_estimated (const char *file)
{
  g_autofree char *path = g_build_filename (SG_TEST_DATA, file, NULL);
  g_autoptr (GError) e = NULL;
  SgGraph *g = sg_graph_load (path, &e);
  ck_assert_msg (g != NULL, "%s: %s", file, e ? e->message : "");
  SgConfig cfg;
  sg_config_init (&cfg);
  ck_assert_msg (sg_estimate_costs (g, &cfg, &e), "%s: %s", file, e ? e->message : "");
  return g;
}

static bool
has_node_ref (const cJSON *v)
{
  if (cJSON_IsObject (v) && cJSON_GetObjectItemCaseSensitive (v, "node"))
    return true;
  const cJSON *e;
  cJSON_ArrayForEach (e, v)
  if (has_node_ref (e))
    return true;
  return false;
}

/* Structure: the plan mirrors the graph node for node, in id order. */
static void
check_structure (const SgGraph *g, const SgPlan *p, const char *what)
{
  int32_t i = 0;
  int32_t n_kernels = 0, n_coll = 0, n_waits = 0;
  SgElision el;
  sg_graph_elision (g, &el);
  for (SgNodeId id = 0; id < g->n_nodes; id++) {
    const SgNode *n = &g->nodes[id];
    SgOpClass c = sg_op_class (n->kind);
    SgInsKind want;
    if (n->op != SG_NODE_CALL || c == SG_CLASS_VIEW || c == SG_CLASS_GETITEM)
      continue;
    if (c == SG_CLASS_BUCKET && el.reason[id] == SG_COPY_ELIDED) {
      for (int32_t j = 0; j < p->n_ins; j++)
        ck_assert_msg (!p->ins[j].name || strcmp (p->ins[j].name, n->name) != 0,
                       "%s: elided copy %s has an instruction", what, n->name);
      continue;
    }
    want = sg_op_is_collective (n->kind) ? SG_INS_COLLECTIVE
           : c == SG_CLASS_WAIT          ? SG_INS_WAIT_EVENT
                                         : SG_INS_KERNEL;
    while (i < p->n_ins && !(p->ins[i].kind == want && p->ins[i].name &&
                             strcmp (p->ins[i].name, n->name) == 0))
      i++;
    ck_assert_msg (i < p->n_ins, "%s: node %s (%s) missing or out of order", what, n->name,
                   sg_op_name (n->kind));
    const SgPlanIns *x = &p->ins[i];
    ck_assert_int_eq (x->op, want == SG_INS_WAIT_EVENT ? x->op : n->kind);
    if (want == SG_INS_KERNEL) {
      n_kernels++;
      ck_assert_int_eq (x->stream, 0);
      ck_assert_str_eq (x->target, n->target);
      ck_assert_msg (!has_node_ref (x->args) && !has_node_ref (x->kwargs),
                     "%s: kernel %s still names a node", what, n->name);
      const cJSON *why = cJSON_GetObjectItemCaseSensitive (x->kwargs, "schedgraph_copy");
      if (c == SG_CLASS_BUCKET)
        ck_assert_str_eq (cJSON_GetStringValue (why),
                          sg_copy_reason_text ((SgCopyReason)el.reason[id]));
      else
        ck_assert_ptr_null (why);
    } else if (want == SG_INS_COLLECTIVE) {
      n_coll++;
      ck_assert_int_eq (x->stream, 1 + n->group);
      ck_assert_int_eq (x->group, n->group);
      ck_assert (p->ins[i - 2].kind == SG_INS_RECORD && p->ins[i - 2].stream == 0);
      ck_assert (p->ins[i - 1].kind == SG_INS_WAIT_EVENT &&
                 p->ins[i - 1].event == p->ins[i - 2].event);
      ck_assert (p->ins[i + 1].kind == SG_INS_RECORD && p->ins[i + 1].stream == x->stream);
    } else {
      n_waits++;
      ck_assert_int_eq (x->stream, 0);
      ck_assert_int_ge (x->coll, 0);
      ck_assert_str_eq (p->ins[x->coll].name, g->nodes[sg_node_wait_target (g, id)].name);
    }
    i++;
  }
  int32_t k2 = 0, c2 = 0, w2 = 0;
  for (int32_t j = 0; j < p->n_ins; j++) {
    k2 += p->ins[j].kind == SG_INS_KERNEL;
    c2 += p->ins[j].kind == SG_INS_COLLECTIVE;
    w2 += p->ins[j].kind == SG_INS_WAIT_EVENT && p->ins[j].stream == 0;
  }
  sg_elision_clear (&el);
  ck_assert_int_eq (k2, n_kernels);
  ck_assert_int_eq (c2, n_coll);
  ck_assert_int_eq (w2, n_waits);
  ck_assert_int_eq (p->n_streams, 1 + g->n_groups);
  ck_assert_int_eq (p->world_size, g->world_size);
}

/* Memory: every pair of buffers; the validator's sweep is checked against
 * this brute force. */
static void
check_memory (const SgPlan *p, const char *what)
{
  for (int32_t a = 0; a < p->n_buffers; a++) {
    const SgPlanBuffer *x = &p->buffers[a];
    ck_assert_uint_le (x->offset + x->bytes, p->arena_bytes);
    for (int32_t b = a + 1; b < p->n_buffers; b++) {
      const SgPlanBuffer *y = &p->buffers[b];
      if (!x->bytes || !y->bytes || x->last_ins < y->first_ins || y->last_ins < x->first_ins)
        continue;
      ck_assert_msg (x->offset + x->bytes <= y->offset || y->offset + y->bytes <= x->offset,
                     "%s: buffers %d and %d overlap in time and memory", what, a, b);
    }
  }
  /* every use of a value lies inside its buffer's lifetime */
  for (int32_t i = 0; i < p->n_ins; i++)
    for (int32_t k = 0; k < p->ins[i].n_in + p->ins[i].n_out; k++) {
      int32_t v = k < p->ins[i].n_in ? p->ins[i].in[k] : p->ins[i].out[k - p->ins[i].n_in];
      if (v < 0 || p->values[v].buffer < 0)
        continue;
      const SgPlanBuffer *bf = &p->buffers[p->values[v].buffer];
      ck_assert (bf->first_ins <= i && i <= bf->last_ins);
    }
  SgMemStats st;
  sg_codegen_mem_stats (p, &st);
  ck_assert_uint_le (st.arena_bytes, st.sum_bytes);
  ck_assert_uint_ge (st.arena_bytes, st.live_peak_bytes);
  printf ("%-44s buffers %5d  arena %10" G_GUINT64_FORMAT "  live peak %10" G_GUINT64_FORMAT
          "  sum %10" G_GUINT64_FORMAT "  arena/sum %.3f  arena/peak %.3f\n",
          what, st.n_buffers, st.arena_bytes, st.live_peak_bytes, st.sum_bytes,
          (double)st.arena_bytes / (double)st.sum_bytes,
          (double)st.arena_bytes / (double)st.live_peak_bytes);
}

static void
check_plan (const SgGraph *g, const SgSimResult *pred, const char *what)
{
  SgPlan *p = NULL, *q = NULL;
  g_autoptr (GError) e = NULL;
  ck_assert_msg (sg_codegen_plan (g, NULL, pred, what, "opts", &p, &e), "%s: %s", what,
                 e ? e->message : "");
  ck_assert_msg (sg_plan_validate (p, &e), "%s: %s", what, e ? e->message : "");
  check_structure (g, p, what);
  check_memory (p, what);
  /* determinism: lowered twice -> the same bytes */
  ck_assert (sg_codegen_plan (g, NULL, pred, what, "opts", &q, &e));
  size_t la, lb, lc;
  g_autofree char *a = sg_plan_to_json (p, &la);
  g_autofree char *b = sg_plan_to_json (q, &lb);
  ck_assert_uint_eq (la, lb);
  ck_assert_msg (memcmp (a, b, la) == 0, "%s: two lowerings differ", what);
  /* round trip: load -> write gives the same bytes */
  g_autoptr (SgPlan) r = sg_plan_load_data (a, la, what, &e);
  ck_assert_msg (r != NULL, "%s: %s", what, e ? e->message : "");
  g_autofree char *c = sg_plan_to_json (r, &lc);
  ck_assert_uint_eq (la, lc);
  ck_assert_msg (memcmp (a, c, la) == 0, "%s: round trip differs", what);
  if (pred) {
    ck_assert (p->pred.step_us == pred->step_us);
    ck_assert_int_eq (p->pred.collectives, pred->n_rows);
    for (int32_t i = 0; i < p->n_ins; i++)
      if (p->ins[i].kind == SG_INS_COLLECTIVE) {
        ck_assert (p->ins[i].est_us > 0);
        ck_assert (p->ins[i].pred_end_us >= p->ins[i].pred_start_us);
        ck_assert (p->ins[i].pred_exposed_us >= 0);
      }
  } else {
    ck_assert (p->pred.step_us == -1);
  }
  sg_plan_free (p);
  sg_plan_free (q);
}

/* Simulates @g in its current order and checks the plan lowered with
 * those predictions. */
static void
check_simulated_plan (const SgGraph *g, const char *what)
{
  SgSimResult sim = { 0 };
  g_autoptr (GError) e = NULL;
  ck_assert_msg (sg_simulate (g, NULL, &sim, &e), "%s: %s", what, e ? e->message : "");
  check_plan (g, &sim, what);
  sg_sim_result_clear (&sim);
}

START_TEST (sample_plans_in_input_order)
{
  g_autoptr (SgGraph) g = load_estimated (samples[_i]);
  g_autofree char *nopred = g_strdup_printf ("%s input-order no-pred", samples[_i]);
  check_plan (g, NULL, nopred);
  g_autofree char *what = g_strdup_printf ("%s input-order", samples[_i]);
  check_simulated_plan (g, what);
}
END_TEST

START_TEST (sample_plans_after_scheduling)
{
  g_autoptr (SgGraph) g = load_estimated (samples[_i]);
  SgConfig cfg;
  sg_config_init (&cfg);
  g_autoptr (GError) e = NULL;
  ck_assert_msg (sg_schedule_reorder (g, &cfg, &e), "%s", e ? e->message : "");
  g_autofree char *what = g_strdup_printf ("%s scheduled", samples[_i]);
  check_simulated_plan (g, what);
}
END_TEST

/* Merges consecutive pairs of same-kind collectives of one group and dtype,
 * each waited on by one wait that is its only user. */
START_TEST (sample_plans_after_bucketing)
{
  g_autoptr (SgGraph) g = load_estimated (fsdp_samples[_i]);
  sg_graph_fill_users (g);
  GArray *members = g_array_new (FALSE, FALSE, sizeof (SgNodeId));
  SgNodeId pending = SG_NO_NODE;
  for (SgNodeId id = 0; id < g->n_nodes; id++) {
    const SgNode *n = &g->nodes[id];
    uint32_t nu;
    const SgNodeId *u = sg_node_users (g, id, &nu);
    if (!sg_op_is_collective (n->kind) || n->kind == SG_OP_ALL_TO_ALL || nu != 1 ||
        g->nodes[u[0]].kind != SG_OP_WAIT)
      continue;
    const SgNode *o = pending != SG_NO_NODE ? &g->nodes[pending] : NULL;
    if (o && o->kind == n->kind && o->group == n->group && o->meta.dtype == n->meta.dtype &&
        o->reduce == n->reduce) {
      g_array_append_val (members, pending);
      g_array_append_val (members, id);
      pending = SG_NO_NODE;
    } else
      pending = id;
  }
  int32_t n_specs = (int32_t)members->len / 2;
  ck_assert_int_gt (n_specs, 0);
  g_autofree SgBucketSpec *specs = g_new (SgBucketSpec, (size_t)n_specs);
  for (int32_t s = 0; s < n_specs; s++)
    specs[s] = (SgBucketSpec){ &g_array_index (members, SgNodeId, 2 * s), 2, FLAT };
  g_autoptr (GError) e = NULL;
  ck_assert_msg (sg_bucket_apply (g, specs, n_specs, &e), "%s", e ? e->message : "");
  g_array_free (members, TRUE);
  g_autofree char *what = g_strdup_printf ("%s bucketed", fsdp_samples[_i]);
  check_plan (g, NULL, what);
  /* the merged collectives name their members; a reduce_scatter's pack
   * interleaves (a kernel), an all_gather's pack of parameter shards is
   * their common buffer (no kernel) */
  SgPlan *p = NULL;
  ck_assert (sg_codegen_plan (g, NULL, NULL, what, "", &p, &e));
  int32_t merged = 0, packs = 0, rs = 0, ag = 0;
  for (int32_t i = 0; i < p->n_ins; i++) {
    merged += p->ins[i].kind == SG_INS_COLLECTIVE && p->ins[i].n_members == 2;
    rs += p->ins[i].kind == SG_INS_COLLECTIVE && p->ins[i].n_members == 2
          && p->ins[i].op == SG_OP_REDUCE_SCATTER;
    packs += p->ins[i].kind == SG_INS_KERNEL && p->ins[i].op == SG_OP_BUCKET_PACK;
  }
  for (int32_t v = 0; v < p->n_values; v++)
    ag += p->values[v].init == SG_INIT_INPUT && p->values[v].offset > 0; /* seeded in a bucket */
  ck_assert_int_eq (merged, n_specs);
  ck_assert_int_eq (packs, rs);
  ck_assert_int_gt (ag, 0);
  sg_plan_free (p);
}
END_TEST

START_TEST (lowering_does_not_change_the_graph)
{
  g_autoptr (SgGraph) g = load_estimated (samples[0]);
  int32_t n = g->n_nodes;
  g_autofree SgNode *before = g_memdup2 (g->nodes, sizeof (SgNode) * (size_t)n);
  guint args_len = g->args->len;
  SgPlan *p = NULL;
  g_autoptr (GError) e = NULL;
  ck_assert (sg_codegen_plan (g, NULL, NULL, "x", "", &p, &e));
  ck_assert_int_eq (g->n_nodes, n);
  ck_assert (memcmp (g->nodes, before, sizeof (SgNode) * (size_t)n) == 0);
  ck_assert_uint_eq (g->args->len, args_len);
  /* options reach the plan and its hash; the graph's name only the plan */
  SgPlan *q = NULL, *r = NULL;
  ck_assert (sg_codegen_plan (g, NULL, NULL, "x", "bucket=0", &q, &e));
  ck_assert (sg_codegen_plan (g, NULL, NULL, "y", "", &r, &e));
  g_free (sg_plan_to_json (p, NULL));
  g_free (sg_plan_to_json (q, NULL));
  g_free (sg_plan_to_json (r, NULL));
  ck_assert_uint_ne (p->hash, q->hash);
  ck_assert_str_eq (q->options, "bucket=0");
  ck_assert_uint_eq (p->hash, r->hash);
  ck_assert_str_eq (r->graph, "y");
  sg_plan_free (p);
  sg_plan_free (q);
  sg_plan_free (r);
}
END_TEST

START_TEST (write_puts_a_loadable_plan_at_the_path_or_nothing)
{
  g_autoptr (SgGraph) g = load_estimated (samples[1]);
  SgConfig cfg;
  sg_config_init (&cfg);
  g_autoptr (GError) e = NULL;
  g_autofree char *dir = g_dir_make_tmp ("sgcodegen-XXXXXX", &e);
  g_autofree char *path = g_build_filename (dir, "plan.json", NULL);
  SgPlan *p = NULL;
  ck_assert_msg (sg_codegen_write (g, &cfg, samples[1], path, &p, &e), "%s",
                 e ? e->message : "");
  g_autoptr (SgPlan) q = sg_plan_load (path, &e);
  ck_assert_msg (q != NULL, "%s", e ? e->message : "");
  ck_assert_uint_eq (q->hash, p->hash);
  ck_assert (q->pred.step_us > 0); /* the cost model was there: predictions */
  ck_assert_ptr_nonnull (strstr (q->options, "reorder=1"));
  ck_assert_ptr_nonnull (strstr (q->options, "bucket=1"));
  cfg.reorder = false;
  g_autofree char *opts = sg_codegen_options_text (&cfg);
  ck_assert_ptr_nonnull (strstr (opts, "reorder=0"));
  /* files by their last component (any spelling, any directory), presets as named */
  cfg.cluster = "./some/../dir/lab.json";
  cfg.profile = "/abs/prof.json";
  g_autofree char *files = sg_codegen_options_text (&cfg);
  ck_assert_msg (g_str_has_prefix (files, "cluster=lab.json profile=prof.json "), "%s", files);
  cfg.cluster = "h100-sxm";
  cfg.profile = NULL;
  g_autofree char *preset = sg_codegen_options_text (&cfg);
  ck_assert_msg (g_str_has_prefix (preset, "cluster=h100-sxm profile=- "), "%s", preset);
  g_autofree char *bad = g_build_filename (dir, "no", "plan.json", NULL);
  ck_assert (!sg_codegen_write (g, &cfg, samples[1], bad, NULL, &e));
  ck_assert (!g_file_test (bad, G_FILE_TEST_EXISTS));
  sg_plan_free (p);
  g_unlink (path);
  g_rmdir (dir);
}
END_TEST

/* Every byte position class of a real plan, changed: the loader either
 * rejects the text with a plan error or (a change that leaves the content
 * equal, e.g. in whitespace) accepts exactly the original plan. Never a
 * crash, never a different plan. */
START_TEST (changed_bytes_are_rejected_or_harmless)
{
  g_autoptr (SgGraph) g = load_estimated (samples[1]);
  SgPlan *p = NULL;
  g_autoptr (GError) e = NULL;
  ck_assert (sg_codegen_plan (g, NULL, NULL, "x", "", &p, &e));
  size_t len;
  g_autofree char *a = sg_plan_to_json (p, &len);
  static const char repl[] = { '0', '7', '-', '"', ',', ']', '}', ' ', 'x', '\n' };
  int rejected = 0, harmless = 0;
  for (size_t pos = 0; pos < len; pos += 1 + pos % 97) {
    char *b = g_memdup2 (a, len);
    b[pos] = repl[pos % sizeof repl] != a[pos] ? repl[pos % sizeof repl] : '9';
    GError *le = NULL;
    SgPlan *q = sg_plan_load_data (b, len, "fuzz", &le);
    if (q) {
      size_t lq;
      g_autofree char *c = sg_plan_to_json (q, &lq);
      ck_assert_msg (lq == len && memcmp (a, c, len) == 0,
                     "byte %zu changed to '%c' gave another plan", pos, b[pos]);
      harmless++;
      sg_plan_free (q);
    } else {
      ck_assert (le && le->domain == SG_PLAN_ERROR && strstr (le->message, "fuzz"));
      g_error_free (le);
      rejected++;
    }
    g_free (b);
  }
  ck_assert_int_gt (rejected, 100);
  printf ("changed bytes: %d rejected, %d harmless (same content)\n", rejected, harmless);
  sg_plan_free (p);
}
END_TEST

static Suite *
samples_suite (void)
{
  Suite *s = suite_create ("codegen-samples");
  TCase *tc = tcase_create ("samples");
  tcase_set_timeout (tc, 120);
  int n = (int)G_N_ELEMENTS (samples);
  tcase_add_loop_test (tc, sample_plans_in_input_order, 0, n);
  tcase_add_loop_test (tc, sample_plans_after_scheduling, 0, n);
  tcase_add_loop_test (tc, sample_plans_after_bucketing, 0, (int)G_N_ELEMENTS (fsdp_samples));
  tcase_add_test (tc, lowering_does_not_change_the_graph);
  tcase_add_test (tc, write_puts_a_loadable_plan_at_the_path_or_nothing);
  tcase_add_test (tc, changed_bytes_are_rejected_or_harmless);
  suite_add_tcase (s, tc);
  return s;
}

int
main (void)
{
  SRunner *sr = srunner_create (samples_suite ());
  srunner_run_all (sr, CK_NORMAL);
  int failed = srunner_ntests_failed (sr);
  srunner_free (sr);
  return failed ? 1 : 0;
}
