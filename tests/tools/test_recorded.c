/* test_recorded.c: the contention model on the first 2x H200 data
 * (tests/data/h200x2-contention, README there): every recorded pair is
 * reproduced by the simulator with the rates derived from it, and sgfit
 * fits the fit set and scores the judge set within the bounds
 * docs/cost-model.md ("What the first GPU data shows") documents; and the
 * copy-engine constants on session 8's split TP sample
 * (tests/data/h200x2-tp-split). The
 * graphgen graphs of the data are generated here (byte-identical to the
 * ones that ran); the samples come from tests/data. */
#include <check.h>
#include <glib/gstdio.h>
#include <math.h>
#include <string.h>

#include "builder.h"
#include "fit.h"
#include "graphgen.h"
#include "schedule.h"

static const char *data = SG_TEST_DATA;
#define REC SG_TEST_DATA "/h200x2-contention"

static const char *const profiles[] = {
  "w2_fsdp2_L2_h1024", "w2_tp2_L2_h1024", "gg_fsdp2_L4_h2048", "gg_judge_fsdp2_L8_h4096",
  "gg_judge_tp2_L8_h4096",
};

/* --- pairs ------------------------------------------------------------------ */

/* One comm_first entry replayed: x -> the collective (its solo time, its
 * bytes), then the chain of the entry's kernel (n_reps x runs_per_rep nodes
 * of the solo run time), then the wait. The collective's end (us off, and
 * relative) and the chain's (relative), against the measurement. */
static void
replay (const char *profile, const cJSON *e, double *comm_off, double *comm_err, double *chain_err)
{
  const char *kind = cJSON_GetObjectItem (e, "kind")->valuestring;
  const char *klass = cJSON_GetObjectItem (e, "kernel")->valuestring;
  const double bytes = cJSON_GetObjectItem (e, "bytes")->valuedouble;
  const int runs = cJSON_GetObjectItem (e, "runs_per_rep")->valueint;
  const double rep = cJSON_GetObjectItem (e, "rep_solo_us")->valuedouble;
  const double tc = cJSON_GetObjectItem (e, "comm_solo_us")->valuedouble;
  const double end = cJSON_GetObjectItem (e, "lag_us")->valuedouble
                     + cJSON_GetObjectItem (e, "comm_us")->valuedouble;
  const cJSON *reps = cJSON_GetObjectItem (e, "reps_us"), *r;
  double chain = 0.0;
  cJSON_ArrayForEach (r, reps)
  chain += r->valuedouble;
  const bool ag = strcmp (kind, "all_gather") == 0;
  SgGraph *g = tb_new (2);
  tb_group (g, "0", 2, 0, 1);
  /* bf16: an all_gather's bytes are its output (2 x the input) */
  tb_input (g, "x", "bfloat16", 1, (int64_t)(bytes / (ag ? 4.0 : 2.0)));
  tb_input (g, "a", "bfloat16", 2, (int64_t)64, (int64_t)64);
  tb_cost (g, ag ? tb_all_gather (g, "c", "x", "0") : tb_reduce_scatter (g, "c", "x", "0"), tc);
  const int n = cJSON_GetArraySize (reps) * runs;
  for (int i = 0; i < n; i++) {
    g_autofree char *name = g_strdup_printf ("k%d", i);
    SgNodeId k = strcmp (klass, "gemm") == 0  ? tb_mm (g, name, "a", "a")
                 : strcmp (klass, "map") == 0 ? tb_pointwise (g, name, "aten.relu.default", "a", NULL)
                                              : tb_pointwise (g, name, "aten.mean.default", "a", NULL);
    tb_cost (g, k, rep / runs);
  }
  tb_wait (g, "w", "c");
  g_autofree char *last = g_strdup_printf ("k%d", n - 1);
  tb_output (g, 2, "w", last);
  /* aligned ranks, as the profiler runs them: a held collective is not
   * resident anywhere */
  g->cluster_json = g_strdup ("{\"gpu\": \"H200\", \"contention_held_scale\": 0}");
  SgConfig cfg;
  sg_config_init (&cfg);
  cfg.profile = profile;
  GError *err = NULL;
  ck_assert_msg (sg_estimate_costs (g, &cfg, &err), "%s", err ? err->message : "");
  SgSimResult s;
  ck_assert (sg_simulate (g, NULL, &s, NULL));
  const SgNodeId k0 = sg_graph_lookup (g, "k0"), kn = sg_graph_lookup (g, last);
  *comm_off = s.rows[0].end_us - s.node_start[k0] - end;
  *comm_err = *comm_off / end;
  *chain_err = (s.node_end[kn] - s.node_start[k0]) / chain - 1.0;
  sg_sim_result_clear (&s);
  sg_graph_free (g);
}

/* How far the replays may land from the measurement (docs/cost-model.md
 * "What the first GPU data shows": the worst of the 5 profiles' runs; a
 * pair's rates merge both orders and interpolate in bytes, so one run is
 * not met exactly). */
#define PAIR_COMM_BOUND 0.16
#define PAIR_COMM_ABS_US 12.0
#define PAIR_CHAIN_BOUND 0.04

START_TEST (recorded_pairs_are_reproduced_by_their_rates)
{
  int n = 0;
  double worst_off = 0.0, worst_chain = 0.0;
  for (size_t p = 0; p < G_N_ELEMENTS (profiles); p++) {
    g_autofree char *path = g_strdup_printf ("%s/p.%s.json", REC, profiles[p]);
    g_autofree char *text = NULL;
    ck_assert (g_file_get_contents (path, &text, NULL, NULL));
    cJSON *j = cJSON_Parse (text);
    const cJSON *e;
    cJSON_ArrayForEach (e, cJSON_GetObjectItem (j, "contention"))
    {
      const char *klass = cJSON_GetObjectItem (e, "kernel")->valuestring;
      if (strcmp (cJSON_GetObjectItem (e, "order")->valuestring, "comm_first") != 0
          || strncmp (klass, "attention", 9) == 0)
        continue; /* a kernel_first run starts mid-kernel; attention has no builder */
      double off, ce, ke;
      replay (path, e, &off, &ce, &ke);
      if (fabs (off) > fabs (worst_off))
        worst_off = off;
      if (fabs (ke) > fabs (worst_chain))
        worst_chain = ke;
      ck_assert_msg ((fabs (ce) <= PAIR_COMM_BOUND || fabs (off) <= PAIR_COMM_ABS_US)
                       && fabs (ke) <= PAIR_CHAIN_BOUND,
                     "%s: %s %g B beside %s: collective end %+.1f%%, chain end %+.1f%%",
                     profiles[p], cJSON_GetObjectItem (e, "kind")->valuestring,
                     cJSON_GetObjectItem (e, "bytes")->valuedouble, klass, 100 * ce, 100 * ke);
      n++;
    }
    cJSON_Delete (j);
  }
  ck_assert_int_eq (n, 70);
  fprintf (stderr, "recorded pairs: %d replayed, worst collective end %+.1f us, chain %+.1f%%\n",
           n, worst_off, 100 * worst_chain);
}
END_TEST

/* --- the fit ------------------------------------------------------------------ */

static char *
copy_into (const char *dir, const char *from, const char *name)
{
  g_autofree char *src = g_build_filename (from, name, NULL);
  g_autofree char *text = NULL;
  gsize len = 0;
  ck_assert_msg (g_file_get_contents (src, &text, &len, NULL), "%s", src);
  char *dst = g_build_filename (dir, name, NULL);
  ck_assert (g_file_set_contents (dst, text, (gssize)len, NULL));
  return dst;
}

/* tools/device/contention.sh's graphgen graphs */
static void
generate (const char *dir, const char *name, int64_t layers, int64_t hidden, int64_t ffn,
          int64_t heads, int64_t seq, int64_t dp, int64_t tp)
{
  GgConfig c;
  gg_config_init (&c);
  c.layers = layers;
  c.hidden = hidden;
  c.ffn = ffn;
  c.heads = heads;
  c.seq = seq;
  c.dp = dp;
  c.tp = tp;
  g_autofree char *path = g_strdup_printf ("%s/%s.json", dir, name);
  FILE *f = fopen (path, "w");
  ck_assert (f != NULL);
  GError *err = NULL;
  ck_assert_msg (gg_write (&c, f, NULL, &err), "%s", err ? err->message : "");
  fclose (f);
}

/* The manifest's folder @rec in a temporary one, with the samples. */
static char *
stage_from (const char *rec)
{
  char *dir = g_dir_make_tmp ("sg-recorded-XXXXXX", NULL);
  GDir *d = g_dir_open (rec, 0, NULL);
  const char *name;
  while ((name = g_dir_read_name (d)))
    if (g_str_has_suffix (name, ".json"))
      g_free (copy_into (dir, rec, name));
  g_dir_close (d);
  g_free (copy_into (dir, data, "w2_fsdp2_L2_h1024.json"));
  g_free (copy_into (dir, data, "w2_tp2_L2_h1024.json"));
  return dir;
}

/* The first data's folder, with its graphgen graphs. */
static char *
stage (void)
{
  char *dir = stage_from (REC);
  generate (dir, "gg_fsdp2_L4_h2048", 4, 2048, 5632, 16, 2048, 2, 1);
  generate (dir, "gg_judge_fsdp2_L8_h4096", 8, 4096, 14336, 32, 8192, 2, 1);
  generate (dir, "gg_judge_tp2_L8_h4096", 8, 4096, 14336, 32, 8192, 1, 2);
  return dir;
}

static void
unstage (char *dir)
{
  GDir *d = g_dir_open (dir, 0, NULL);
  const char *name;
  while ((name = g_dir_read_name (d))) {
    g_autofree char *p = g_build_filename (dir, name, NULL);
    g_remove (p);
  }
  g_dir_close (d);
  g_rmdir (dir);
  g_free (dir);
}

/* The manifest of the staged folder @dir, loaded. */
static SgFit *
load_staged (const char *dir)
{
  g_autofree char *manifest = g_build_filename (dir, "manifest.json", NULL);
  GError *e = NULL;
  SgFit *f = sg_fit_load (manifest, &e);
  ck_assert_msg (f != NULL, "%s", e ? e->message : "");
  return f;
}

/* The run @name of @rep's "runs". */
static const cJSON *
run_named (const cJSON *rep, const char *name)
{
  const cJSON *r;
  cJSON_ArrayForEach (r, cJSON_GetObjectItem (rep, "runs"))
  if (strcmp (cJSON_GetObjectItem (r, "name")->valuestring, name) == 0)
    return r;
  ck_abort_msg ("no run %s", name);
  return NULL;
}

static double
num (const cJSON *o, const char *key)
{
  return cJSON_GetObjectItem (o, key)->valuedouble;
}

START_TEST (the_fit_set_fits_and_the_judge_set_stays_within_its_bounds)
{
  char *dir = stage ();
  GError *e = NULL;
  g_autoptr (SgFit) f = load_staged (dir);
  SgFitAxis axes[8];
  const int n = sg_fit_default_axes (f, axes);
  ck_assert_int_eq (n, 3); /* the pair scales: the fit runs' profiles have pairs */
  double v[8], start_fit, start_judge, fit, judge;
  ck_assert (sg_fit_start (f, axes, v, n, &e));
  ck_assert (sg_fit_loss (f, axes, v, n, "fit", &start_fit, &e));
  ck_assert (sg_fit_loss (f, axes, v, n, "judge", &start_judge, &e));
  /* the defaults (scales 1): every fit run's exposed time within the bar */
  cJSON *rep = sg_fit_report (f, axes, v, n, &e);
  ck_assert (rep != NULL);
  ck_assert_int_eq (cJSON_GetObjectItem (cJSON_GetObjectItem (rep, "fit"), "exposed_within_bar")
                      ->valueint, 11);
  /* the judge set: within the bar but for our two orders of the FSDP
   * graph, which measured 852 and 1,857 us exposed (ranks drifting apart
   * at tight waits, docs/cost-model.md) where the model says < 250 */
  const cJSON *j = cJSON_GetObjectItem (rep, "judge");
  ck_assert_int_eq (cJSON_GetObjectItem (j, "exposed_within_bar")->valueint, 4);
  ck_assert_int_eq (cJSON_GetObjectItem (j, "order_pairs_ranked_right")->valueint,
                    cJSON_GetObjectItem (j, "order_pairs")->valueint);
  for (int k = 0; k < 2; k++) {
    const cJSON *r = run_named (rep, k ? "gg_judge_fsdp2_L8_h4096 sched_cont"
                                       : "gg_judge_fsdp2_L8_h4096 sched_plain");
    ck_assert_double_lt (num (r, "predicted_exposed_us"), 250.0);
  }
  /* steps: the judge graphs' kernels run 5-8% slower in a 100-200 ms
   * step than timed alone, so every judge step is predicted 5-15% short */
  const cJSON *r;
  cJSON_ArrayForEach (r, cJSON_GetObjectItem (rep, "runs"))
  {
    const double err = num (r, "predicted_step_us") / num (r, "measured_step_us") - 1.0;
    if (strcmp (cJSON_GetObjectItem (r, "set")->valuestring, "judge") == 0)
      ck_assert_msg (err > -0.15 && err < -0.05, "%s: step %+.1f%%",
                     cJSON_GetObjectItem (r, "name")->valuestring, 100 * err);
    else
      ck_assert_msg (fabs (err) < 0.15, "%s: step %+.1f%%",
                     cJSON_GetObjectItem (r, "name")->valuestring, 100 * err);
  }
  cJSON_Delete (rep);
  /* in sample, the fit improves the fit set; out of sample it does not
   * carry over to the judge set (so the defaults stay 1) */
  ck_assert_msg (sg_fit_search (f, axes, v, n, 8, &fit, &e), "%s", e ? e->message : "");
  ck_assert (sg_fit_loss (f, axes, v, n, "judge", &judge, &e));
  ck_assert_msg (fit < 0.75 * start_fit, "fit %g from %g", fit, start_fit);
  ck_assert_msg (judge > start_judge, "judge %g from %g at %g %g %g", judge, start_judge, v[0],
                 v[1], v[2]);
  unstage (dir);
}
END_TEST

/* tests/data/h200x2-tp-split: the small TP sample split into copy-engine
 * ring steps measured 1,335 us against 1,263 us whole; with the ring
 * steps' constants measured alone (ce_latency_us 36, ce_GBps 296, not
 * fitted to these runs) the model ranks the two the same way and every
 * run's step within 5% (with the unmeasured 8 us and 324 GB/s it put the
 * split at 1,196 us, -10.4%, and chose it) */
START_TEST (the_measured_split_of_the_tp_sample_is_predicted_slower_than_whole)
{
  char *dir = stage_from (SG_TEST_DATA "/h200x2-tp-split");
  GError *e = NULL;
  g_autoptr (SgFit) f = load_staged (dir);
  SgFitAxis axes[8];
  const int n = sg_fit_default_axes (f, axes);
  double v[8];
  ck_assert (sg_fit_start (f, axes, v, n, &e));
  cJSON *rep = sg_fit_report (f, axes, v, n, &e);
  ck_assert_msg (rep != NULL, "%s", e ? e->message : "");
  const cJSON *split = run_named (rep, "w2_tp2_L2_h1024 split");
  const cJSON *whole = run_named (rep, "w2_tp2_L2_h1024 whole");
  ck_assert_double_gt (num (split, "measured_step_us"), num (whole, "measured_step_us"));
  ck_assert_double_gt (num (split, "predicted_step_us"), num (whole, "predicted_step_us"));
  const cJSON *r;
  cJSON_ArrayForEach (r, cJSON_GetObjectItem (rep, "runs"))
  {
    const double err = num (r, "predicted_step_us") / num (r, "measured_step_us") - 1.0;
    ck_assert_msg (fabs (err) < 0.05, "%s: step %+.1f%%", cJSON_GetObjectItem (r, "name")->valuestring,
                   100 * err);
  }
  const cJSON *j = cJSON_GetObjectItem (rep, "judge");
  ck_assert_int_eq (cJSON_GetObjectItem (j, "exposed_within_bar")->valueint, 4);
  cJSON_Delete (rep);
  unstage (dir);
}
END_TEST

static Suite *
suite (void)
{
  Suite *s = suite_create ("recorded");
  TCase *tc = tcase_create ("recorded");
  tcase_set_timeout (tc, 600);
  tcase_add_test (tc, recorded_pairs_are_reproduced_by_their_rates);
  tcase_add_test (tc, the_fit_set_fits_and_the_judge_set_stays_within_its_bounds);
  tcase_add_test (tc, the_measured_split_of_the_tp_sample_is_predicted_slower_than_whole);
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
