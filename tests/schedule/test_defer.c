/* test_defer.c: the deferred waits' memory rule (schedule/defer.c). The
 * slot tree must decide exactly as the wait-by-wait loop it replaces
 * (SgSchedProblem.defer_each): same order, same forced waits, for every
 * variant, on the samples and graphgen graphs, under memory limits from
 * none to tight (tight limits force waits, which the tree finds by
 * descent). */
#include "builder.h"
#include "graphgen.h"
#include "randgraph.h"
#include "sched-test.h"
#include "schedule-private.h"

#define ANY (INT32_MAX / 2)
static const struct {
  int32_t window, boost;
} variants[] = { { 0, 0 }, { ANY, -64 }, { ANY, 16 }, { 128, -64 }, { 1024, SG_BOOST_CRITICAL_PATH } };
static const double increases[] = { 0.0, 0.01, 0.05, 0.5 };

static SgNodeId *
run (const SgGraph *g, double increase, int v, bool each, SgScheduleStats *st)
{
  SgConfig cfg;
  sg_config_init (&cfg);
  cfg.max_peak_increase = increase;
  SgSchedProblem P;
  sg_sched_problem_init (&P, g, &cfg, false);
  P.defer_each = each;
  SgSimResult r;
  memset (st, 0, sizeof *st);
  SgNodeId *o = sg_sched_run_variant (&P, variants[v].window, variants[v].boost, true, st, &r);
  sg_sched_problem_clear (&P);
  sg_sim_result_clear (&r);
  return o;
}

/* Compares the two rules on @g over every variant and limit; returns the
 * forced waits seen. */
static int64_t
same_decisions (const SgGraph *g, const char *name)
{
  int64_t forced = 0;
  for (size_t l = 0; l < G_N_ELEMENTS (increases); l++)
    for (int v = 0; v < (int)G_N_ELEMENTS (variants); v++) {
      SgScheduleStats a, b;
      g_autofree SgNodeId *fast = run (g, increases[l], v, false, &a);
      g_autofree SgNodeId *each = run (g, increases[l], v, true, &b);
      ck_assert_msg (memcmp (fast, each, sizeof (SgNodeId) * (size_t)g->n_nodes) == 0,
                     "%s: variant %d, increase %g: the orders differ", name, v, increases[l]);
      ck_assert_int_eq (a.n_forced_waits, b.n_forced_waits);
      forced += a.n_forced_waits;
    }
  return forced;
}

static SgGraph *
load_file (const char *path)
{
  g_autofree char *text = NULL;
  gsize len;
  ck_assert (g_file_get_contents (path, &text, &len, NULL));
  return st_load (text, path);
}

static SgGraph *
generated (const GgConfig *gc)
{
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream (&buf, &len);
  GError *err = NULL;
  ck_assert_msg (gg_write (gc, f, NULL, &err), "%s", err ? err->message : "");
  fclose (f);
  SgGraph *g = st_load (buf, "graphgen");
  free (buf);
  return g;
}

START_TEST (slot_tree_decides_as_wait_by_wait_on_the_samples)
{
  static const char *samples[] = { "w2_fsdp2_L2_h1024.json", "w2_tp2_L2_h1024.json",
                                   "dev_fsdp8_L2_h1024.json", "dev_fsdp2_tp4_L2_h1024.json" };
  int64_t forced = 0;
  for (size_t i = 0; i < G_N_ELEMENTS (samples); i++) {
    g_autofree char *path = g_build_filename (SG_TEST_DATA, samples[i], NULL);
    SgGraph *g = load_file (path);
    forced += same_decisions (g, samples[i]);
    sg_graph_free (g);
  }
  ck_assert_int_gt (forced, 0);
}
END_TEST

START_TEST (slot_tree_decides_as_wait_by_wait_on_graphgen_meshes)
{
  GgConfig base;
  gg_config_init (&base);
  base.layers = 6;
  base.hidden = 512;
  base.ffn = 1376;
  base.heads = 8;
  GgConfig cases[4] = { base, base, base, base };
  cases[0].dp = 8;
  cases[1].dp = 2, cases[1].tp = 4;
  cases[2].dp = 2, cases[2].tp = 2, cases[2].tp_mode = GG_TP_ALLREDUCE, cases[2].world = 8;
  cases[3].dp = 4, cases[3].tp = 2, cases[3].sp_norm_allreduce = true;
  int64_t forced = 0;
  for (size_t i = 0; i < G_N_ELEMENTS (cases); i++) {
    SgGraph *g = generated (&cases[i]);
    g_autofree char *name = g_strdup_printf ("graphgen case %zu", i);
    forced += same_decisions (g, name);
    sg_graph_free (g);
  }
  ck_assert_int_gt (forced, 0);
}
END_TEST

/* Random graphs read a collective's input after its wait now and then (a
 * reservation that starts past the frontier: the wait-by-wait steps) and
 * read one storage from several collectives (leaders handed on). */
START_TEST (slot_tree_decides_as_wait_by_wait_on_random_graphs)
{
  int64_t forced = 0;
  for (guint32 seed = 1; seed <= 400; seed++) {
    g_autofree char *json = rg_graph_json (seed, 30 + (int)(seed % 20), 6 + (int)(seed % 7),
                                           1 + (int)(seed % 3), (RgCluster)(seed % RG_N_CLUSTERS));
    g_autofree char *name = g_strdup_printf ("random graph %u", seed);
    SgGraph *g = st_load (json, name);
    forced += same_decisions (g, name);
    sg_graph_free (g);
  }
  ck_assert_int_gt (forced, 0);
}
END_TEST

int
main (void)
{
  const TTest *tests[] = {
    slot_tree_decides_as_wait_by_wait_on_the_samples,
    slot_tree_decides_as_wait_by_wait_on_graphgen_meshes,
    slot_tree_decides_as_wait_by_wait_on_random_graphs,
  };
  return st_run ("defer", 300, tests, G_N_ELEMENTS (tests));
}
