/* test_threads.c: codegen/ and plan/ on pools of 1, 2, 3 and 8 threads.
 *
 * The lowering fills its instructions in chunks on the pool (emit.c), the
 * validator checks in stages (plan-validate.c, the buffers placed beside
 * its sweeps), the file's text is made and hashed in pieces
 * (plan-write.c): whatever the thread count, the plan's text, its hash and
 * the file are the same bytes, on every sample graph of tests/data (its
 * input order with the simulator's predictions) and a graphgen step; and
 * a graph that cannot be lowered fails with the same error, the first
 * failing node in id order.
 */
#include <check.h>
#include <glib/gstdio.h>
#include <string.h>

#include "builder.h"
#include "codegen.h"
#include "plan-private.h"
#include "estimate.h"
#include "schedule.h"
#ifdef HAVE_GRAPHGEN
#include "graphgen.h"
#endif

#ifndef SG_TEST_DATA
#error "SG_TEST_DATA must name tests/data"
#endif

static const int32_t threads[] = { 1, 2, 3, 8 };

static const char *const samples[] = {
  "w2_tiny_fsdp2_L2_h256.json", "w2_tiny_tp2_L2_h256.json", "w2_fsdp2_L2_h1024.json",
  "w2_tp2_L2_h1024.json",       "dev_fsdp8_L2_h1024.json",  "dev_fsdp2_tp4_L2_h1024.json",
};

/* @g (estimated) lowered and written on each pool: the same text, hash
 * and file bytes as on one thread. */
static void
same_plan_on_every_pool (SgGraph *g, const char *what)
{
  g_autoptr (GError) e = NULL;
  SgSimResult sim = { 0 };
  ck_assert_msg (sg_simulate (g, NULL, &sim, &e), "%s: %s", what, e ? e->message : "");
  g_autofree char *dir = g_dir_make_tmp ("sgthreads-XXXXXX", &e);
  g_autofree char *path = g_build_filename (dir, "plan.json", NULL);
  g_autofree char *want = NULL;
  size_t want_len = 0;
  uint64_t want_hash = 0;
  for (size_t t = 0; t < G_N_ELEMENTS (threads); t++) {
    SgConfig cfg;
    sg_config_init (&cfg);
    cfg.pool = threads[t] > 1 ? sg_pool_new (threads[t]) : NULL;
    SgPlan *p = NULL;
    ck_assert_msg (sg_codegen_plan (g, &cfg, &sim, what, "opts", &p, &e), "%s, %d threads: %s",
                   what, threads[t], e ? e->message : "");
    ck_assert_msg (sg_codegen_write_plan (p, &cfg, path, &e), "%s", e ? e->message : "");
    g_autofree char *file = NULL;
    size_t file_len;
    ck_assert (g_file_get_contents (path, &file, &file_len, NULL));
    size_t len;
    g_autofree char *text = sg_plan_to_json (p, &len);
    ck_assert (file_len == len && memcmp (file, text, len) == 0);
    if (!want) {
      want = g_steal_pointer (&text);
      want_len = len;
      want_hash = p->hash;
    } else {
      ck_assert_msg (len == want_len && memcmp (text, want, len) == 0,
                     "%s: the plan on %d threads differs", what, threads[t]);
      ck_assert_uint_eq (p->hash, want_hash);
    }
    sg_plan_free (p);
    sg_pool_free (cfg.pool);
  }
  g_unlink (path);
  g_rmdir (dir);
  sg_sim_result_clear (&sim);
}

START_TEST (sample_plans_are_the_same_bytes_on_every_pool)
{
  g_autofree char *path = g_build_filename (SG_TEST_DATA, samples[_i], NULL);
  g_autoptr (GError) e = NULL;
  g_autoptr (SgGraph) g = sg_graph_load (path, &e);
  ck_assert_msg (g != NULL, "%s: %s", samples[_i], e ? e->message : "");
  SgConfig cfg;
  sg_config_init (&cfg);
  ck_assert_msg (sg_estimate_costs (g, &cfg, &e), "%s", e ? e->message : "");
  same_plan_on_every_pool (g, samples[_i]);
}
END_TEST

#ifdef HAVE_GRAPHGEN
/* A graphgen step of about 20K nodes: many chunks of instructions, pieces
 * of text and rounds of the writer. */
START_TEST (a_generated_plan_is_the_same_bytes_on_every_pool)
{
  GgConfig gc;
  gg_config_init (&gc);
  gc.dp = 2, gc.tp = 4, gc.world = 8;
  gc.layers = gg_layers_for_nodes (&gc, 20000);
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream (&text, &len);
  g_autoptr (GError) e = NULL;
  ck_assert_msg (gg_write (&gc, f, NULL, &e), "%s", e ? e->message : "");
  fclose (f);
  g_autoptr (SgGraph) g = sg_graph_load_data (text, len, "graphgen", &e);
  free (text);
  ck_assert_msg (g != NULL, "%s", e ? e->message : "");
  ck_assert_int_gt (g->n_nodes, 10000);
  SgConfig cfg;
  sg_config_init (&cfg);
  ck_assert_msg (sg_estimate_costs (g, &cfg, &e), "%s", e ? e->message : "");
  same_plan_on_every_pool (g, "graphgen");
}
END_TEST
#endif

/* A collective of a value that is no tensor (the error of emit.c's second
 * pass), named @name, after @before kernels. */
static void
bad_collective (SgGraph *g, const char *name, int before, int *k)
{
  for (int i = 0; i < before; i++, (*k)++) {
    g_autofree char *nm = g_strdup_printf ("k%d", *k);
    g_autofree char *prev = *k ? g_strdup_printf ("k%d", *k - 1) : g_strdup ("x");
    tb_pointwise (g, nm, "aten.relu.default", prev, NULL);
  }
  g_autofree char *tup = g_strconcat (name, "_tup", NULL), *none = g_strconcat (name, "_none", NULL),
                  *w = g_strconcat (name, "_w", NULL);
  tb_node (g, "{\"name\":\"%s\",\"op\":\"call_function\",\"target\":\"my.op\","
              "\"args\":[{\"node\":\"x\"}],\"kwargs\":{},\"meta\":{\"tuple\":[null,"
              "{\"shape\":[8],\"stride\":[1],\"dtype\":\"float32\"}]}}", tup);
  tb_node (g, "{\"name\":\"%s\",\"op\":\"call_function\",\"target\":\"<built-in "
              "function getitem>\",\"args\":[{\"node\":\"%s\"},0],\"kwargs\":{}}", none, tup);
  tb_node (g, "{\"name\":\"%s\",\"op\":\"call_function\","
              "\"target\":\"_c10d_functional.all_reduce.default\","
              "\"args\":[{\"node\":\"%s\"},\"sum\",\"0\"],\"kwargs\":{},"
              "\"meta\":{\"shape\":[8],\"stride\":[1],\"dtype\":\"float32\"}}", name, none);
  tb_wait (g, w, name);
}

/* Codegen of @g fails on every pool of `threads`, without a plan and with
 * the same message on each: that message (transfer full). */
static char *
error_on_every_pool (SgGraph *g)
{
  char *first = NULL;
  for (size_t t = 0; t < G_N_ELEMENTS (threads); t++) {
    SgConfig cfg;
    sg_config_init (&cfg);
    cfg.pool = threads[t] > 1 ? sg_pool_new (threads[t]) : NULL;
    SgPlan *p = NULL;
    g_autoptr (GError) e = NULL;
    ck_assert (!sg_codegen_plan (g, &cfg, NULL, "t", "", &p, &e));
    ck_assert_ptr_null (p);
    if (!first)
      first = g_strdup (e->message);
    ck_assert_msg (strcmp (e->message, first) == 0, "%d threads: %s; before: %s", threads[t],
                   e->message, first);
    sg_pool_free (cfg.pool);
  }
  return first;
}

/* Failing collectives in different chunks of the second pass (or one):
 * on every pool the error names the first of them in id order, as one
 * pass did. */
START_TEST (the_first_node_that_cannot_be_lowered_names_the_error_on_every_pool)
{
  static const int firsts[][2] = { { 30, 1500 }, { 1100, 600 }, { 700, 2500 }, { 2000, 10 } };
  for (size_t c = 0; c < G_N_ELEMENTS (firsts); c++) {
    g_autoptr (SgGraph) g = tb_new (2);
    tb_group (g, "0", 2, 0, 1);
    tb_input (g, "x", "float32", 1, 8);
    int k = 0;
    bad_collective (g, "ar_a", firsts[c][0], &k);
    bad_collective (g, "ar_b", firsts[c][1], &k);
    tb_output (g, 1, "k0");
    g_autofree char *msg = error_on_every_pool (g);
    ck_assert_msg (strstr (msg, "\"ar_a\"") && strstr (msg, "args[0]"), "%s", msg);
  }
}
END_TEST

/* A collective (@name, after @before kernels) whose group is none of the
 * graph's: the layout's error, found before any instruction is written. */
static void
bad_group (SgGraph *g, const char *name, int before, int *k)
{
  for (int i = 0; i < before; i++, (*k)++) {
    g_autofree char *nm = g_strdup_printf ("k%d", *k);
    g_autofree char *prev = *k ? g_strdup_printf ("k%d", *k - 1) : g_strdup ("x");
    tb_pointwise (g, nm, "aten.relu.default", prev, NULL);
  }
  g_autofree char *prev = g_strdup_printf ("k%d", *k - 1), *w = g_strconcat (name, "_w", NULL);
  SgNodeId c = tb_all_gather (g, name, prev, "0");
  tb_wait (g, w, name);
  g->nodes[c].group = g->n_groups; /* after the builder's checks */
}

/* A collective that cannot be laid out and one that cannot be filled:
 * whichever comes first in id order names the error, on every pool (the
 * layout stops at its failing node; the nodes before it are still
 * written and filled at their final indices, FREEs among them). */
START_TEST (a_layout_error_and_a_fill_error_name_the_first_in_id_order)
{
  for (int wait_first = 0; wait_first < 2; wait_first++) {
    g_autoptr (SgGraph) g = tb_new (2);
    tb_group (g, "0", 2, 0, 1);
    tb_input (g, "x", "float32", 1, 8);
    int k = 0;
    if (wait_first) {
      bad_group (g, "ag_bad", 1200, &k);
      bad_collective (g, "ar_a", 900, &k);
    } else {
      bad_collective (g, "ar_a", 1200, &k);
      bad_group (g, "ag_bad", 900, &k);
    }
    tb_output (g, 1, "k0");
    g_autofree char *msg = error_on_every_pool (g);
    ck_assert_msg (strstr (msg, wait_first ? "\"ag_bad\": group: no group" : "\"ar_a\""), "%s",
                   msg);
  }
}
END_TEST

/* One random edit of @p (a field of an instruction, buffer or value, or
 * two instructions swapped), undone by calling it again with @undo. */
typedef struct {
  int what;
  int32_t i, j, k;
  int64_t was;
  SgPlanIns ins;
} Edit;

static void
edit (SgPlan *p, GRand *r, Edit *e, bool undo)
{
  if (!undo) {
    e->what = g_rand_int_range (r, 0, 10);
    e->i = g_rand_int_range (r, 0, p->n_ins);
    e->j = g_rand_int_range (r, 0, p->n_ins);
    e->k = g_rand_int_range (r, 0, MAX (p->n_buffers, 1));
  }
  SgPlanIns *x = &p->ins[e->i];
  int32_t *field = NULL;
  int64_t to = 0;
  switch (e->what) {
  case 0: field = &x->stream, to = g_rand_int_range (r, -1, p->n_streams + 1); break;
  case 1: field = &x->event, to = g_rand_int_range (r, -1, p->n_events + 1); break;
  case 2: field = &x->coll, to = g_rand_int_range (r, -2, p->n_ins + 1); break;
  case 3: field = &x->buffer, to = g_rand_int_range (r, -1, p->n_buffers + 1); break;
  case 4:
    if (x->n_in)
      field = &x->in[e->k % x->n_in], to = g_rand_int_range (r, -2, p->n_values + 1);
    break;
  case 5:
    if (x->n_out)
      field = &x->out[e->k % x->n_out], to = g_rand_int_range (r, -2, p->n_values + 1);
    break;
  case 6:
    if (p->n_buffers)
      field = &p->buffers[e->k].first_ins, to = g_rand_int_range (r, 0, p->n_ins);
    break;
  case 7:
    if (p->n_buffers)
      field = &p->buffers[e->k].last_ins, to = g_rand_int_range (r, 0, p->n_ins);
    break;
  case 8:
    if (p->n_values)
      field = &p->values[e->k % p->n_values].buffer, to = g_rand_int_range (r, -1, p->n_buffers);
    break;
  default: /* two instructions swapped */
    e->ins = p->ins[e->i];
    p->ins[e->i] = p->ins[e->j];
    p->ins[e->j] = e->ins;
    return;
  }
  if (!field)
    return;
  if (undo) {
    *field = (int32_t)e->was;
  } else {
    e->was = *field;
    *field = (int32_t)to;
  }
}

/* The validator's stages on a pool (plan-parallel.c) give the one pass's
 * verdict on edited plans of a sample graph, and its message on a broken
 * rule. */
START_TEST (the_validator_on_a_pool_judges_edited_plans_as_on_one_thread)
{
  g_autofree char *path = g_build_filename (SG_TEST_DATA, samples[5], NULL);
  g_autoptr (GError) e = NULL;
  g_autoptr (SgGraph) g = sg_graph_load (path, &e);
  ck_assert_msg (g != NULL, "%s", e ? e->message : "");
  SgPlan *p = NULL;
  ck_assert_msg (sg_codegen_plan (g, NULL, NULL, "t", "", &p, &e), "%s", e ? e->message : "");
  SgConfig cfg;
  sg_config_init (&cfg);
  cfg.pool = sg_pool_new (3);
  SgPlanRunner runner;
  sg_codegen_plan_runner (&cfg, &runner);
  ck_assert (sg_plan_validate_stages (p, &runner));
  GRand *r = g_rand_new_with_seed (11);
  int broken = 0;
  for (int trial = 0; trial < 3000; trial++) {
    Edit ed;
    edit (p, r, &ed, false);
    g_autoptr (GError) one = NULL, many = NULL;
    const bool valid = sg_plan_validate (p, &one);
    ck_assert_msg (sg_plan_validate_stages (p, &runner) == valid, "trial %d (edit %d): %s", trial,
                   ed.what, valid ? "valid" : one->message);
    ck_assert (sg_plan_validate_with (p, &runner, NULL, NULL, &many) == valid);
    if (!valid) {
      ck_assert_str_eq (many->message, one->message);
      broken++;
    }
    edit (p, r, &ed, true);
  }
  ck_assert (sg_plan_validate_stages (p, &runner));
  ck_assert_int_gt (broken, 1500);
  g_rand_free (r);
  sg_pool_free (cfg.pool);
  sg_plan_free (p);
}
END_TEST

static Suite *
threads_suite (void)
{
  Suite *s = suite_create ("codegen-threads");
  TCase *tc = tcase_create ("threads");
  tcase_set_timeout (tc, 300);
  tcase_add_loop_test (tc, sample_plans_are_the_same_bytes_on_every_pool, 0,
                       (int)G_N_ELEMENTS (samples));
#ifdef HAVE_GRAPHGEN
  tcase_add_test (tc, a_generated_plan_is_the_same_bytes_on_every_pool);
#endif
  tcase_add_test (tc, the_first_node_that_cannot_be_lowered_names_the_error_on_every_pool);
  tcase_add_test (tc, a_layout_error_and_a_fill_error_name_the_first_in_id_order);
  tcase_add_test (tc, the_validator_on_a_pool_judges_edited_plans_as_on_one_thread);
  suite_add_tcase (s, tc);
  return s;
}

int
main (void)
{
  SRunner *sr = srunner_create (threads_suite ());
  srunner_run_all (sr, CK_NORMAL);
  int failed = srunner_ntests_failed (sr);
  srunner_free (sr);
  return failed ? 1 : 0;
}
