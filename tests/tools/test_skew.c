/* test_skew.c: sgfit --skew (tools/sgfit/skew.c) on synthetic schedrun
 * reports and profiles with per-rank data: the launch skew and the last
 * rank of each collective, the spreads, each rank's compute against the
 * fastest, a profile's per-rank kernel time ratios; files without per-rank
 * data refused naming the file and field, the command line writing nothing
 * then. */
#include <check.h>
#include <glib/gstdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "fit.h"

static char *dir;

/* Writes @text to @dir/@name; the path (transfer full). */
static char *
put (const char *name, const char *text)
{
  char *path = g_build_filename (dir, name, NULL);
  ck_assert (g_file_set_contents (path, text, -1, NULL));
  return path;
}

/* Two ranks, two collectives: rank 1 computes 5% more, launches the
 * all_gather 20 us late (rank 0 waits for it: 70 us against 50) and the
 * reduce_scatter 5 us early. */
static const char *report_text =
  "{\"format\":\"schedgraph.runtime-report\",\"world_size\":2,"
  "\"plan\":{\"graph\":\"g.json\"},\"measured\":{\"step_us\":1050},"
  "\"by_rank\":{\"iteration\":1,\"step_us\":[1000,1050],\"compute_us\":[800,840]},"
  "\"collectives\":["
  "{\"name\":\"ag\",\"kind\":\"all_gather\",\"by_rank\":{\"launch_us\":[10,30],"
  "\"end_us\":[80,80],\"exposed_us\":[0,0],\"compute_before_us\":[10,30]}},"
  "{\"name\":\"rs\",\"kind\":\"reduce_scatter\",\"by_rank\":{\"launch_us\":[600,595],"
  "\"end_us\":[700,690],\"exposed_us\":[40,35],\"compute_before_us\":[500,525]}}]}";

static const cJSON *
item (const cJSON *o, const char *path)
{
  g_auto (GStrv) parts = g_strsplit (path, ".", -1);
  for (int i = 0; parts[i] && o; i++)
    o = g_ascii_isdigit (parts[i][0]) ? cJSON_GetArrayItem (o, atoi (parts[i]))
                                      : cJSON_GetObjectItem (o, parts[i]);
  ck_assert_msg (o != NULL, "no %s", path);
  return o;
}

static double
num (const cJSON *o, const char *path)
{
  return item (o, path)->valuedouble;
}

START_TEST (skew_names_the_last_rank_and_the_spreads)
{
  g_autofree char *rep = put ("r.json", report_text);
  const char *reports[] = { rep };
  GError *error = NULL;
  cJSON *s = sg_skew_report (reports, 1, NULL, 0, &error);
  ck_assert_msg (s != NULL, "%s", error ? error->message : "");
  const cJSON *run = item (s, "runs.0");
  ck_assert_int_eq ((int)num (run, "iteration"), 1);
  ck_assert_double_eq_tol (num (run, "ranks.0.compute_vs_fastest"), 1.0, 1e-9);
  ck_assert_double_eq_tol (num (run, "ranks.1.compute_vs_fastest"), 1.05, 1e-9);
  /* the all_gather: rank 1 last by 20 us; rank 0's waited 20 us longer */
  ck_assert_str_eq (item (run, "collectives.0.name")->valuestring, "ag");
  ck_assert_double_eq_tol (num (run, "collectives.0.launch_skew_us"), 20, 1e-9);
  ck_assert_int_eq ((int)num (run, "collectives.0.last_rank"), 1);
  ck_assert_double_eq_tol (num (run, "collectives.0.end_skew_us"), 0, 1e-9);
  ck_assert_double_eq_tol (num (run, "collectives.0.duration_spread_us"), 20, 1e-9);
  ck_assert_double_eq_tol (num (run, "collectives.0.compute_before_spread_us"), 20, 1e-9);
  /* the reduce_scatter: rank 0 last by 5 us */
  ck_assert_double_eq_tol (num (run, "collectives.1.launch_skew_us"), 5, 1e-9);
  ck_assert_int_eq ((int)num (run, "collectives.1.last_rank"), 0);
  ck_assert_double_eq_tol (num (run, "collectives.1.end_skew_us"), 10, 1e-9);
  ck_assert_double_eq_tol (num (run, "collectives.1.exposed_spread_us"), 5, 1e-9);
  ck_assert_double_eq_tol (num (run, "collectives.1.compute_before_spread_us"), 25, 1e-9);
  ck_assert_double_eq_tol (num (run, "launch_skew_us.max"), 20, 1e-9);
  ck_assert_str_eq (item (run, "launch_skew_us.max_at")->valuestring, "ag");
  ck_assert_double_eq_tol (num (run, "launch_skew_us.median"), 12.5, 1e-9);
  ck_assert_double_eq_tol (num (run, "launch_skew_us.last"), 5, 1e-9);
  cJSON_Delete (s);
}
END_TEST

START_TEST (profile_rates_are_each_ranks_sum_over_the_medians)
{
  g_autofree char *prof = put (
    "p.json", "{\"format\":\"schedgraph.profile\",\"version\":1,\"world_size\":2,"
              "\"gemm\":[{\"op\":\"mm\",\"m\":8,\"n\":8,\"k\":8,\"us\":100,"
              "\"us_by_rank\":[99,101]},{\"op\":\"mm\",\"m\":4,\"n\":4,\"k\":4,\"us\":7}],"
              "\"ops\":[{\"target\":\"aten.add.Tensor\",\"bytes\":64,\"us\":10,"
              "\"us_by_rank\":[10,12]}],"
              "\"collectives\":[{\"kind\":\"all_gather\",\"bytes\":64,\"group_size\":2,"
              "\"us\":30}]}");
  const char *profiles[] = { prof };
  GError *error = NULL;
  cJSON *s = sg_skew_report (NULL, 0, profiles, 1, &error);
  ck_assert_msg (s != NULL, "%s", error ? error->message : "");
  const cJSON *p = item (s, "profiles.0");
  ck_assert_int_eq ((int)num (p, "kernels"), 2); /* the entry without us_by_rank is left out */
  ck_assert_double_eq_tol (num (p, "families.gemm.ratio_by_rank.1"), 1.01, 1e-9);
  ck_assert_double_eq_tol (num (p, "families.ops.ratio_by_rank.1"), 1.2, 1e-9);
  ck_assert_double_eq_tol (num (p, "ratio_by_rank.0"), round (1e4 * 109.0 / 110) / 1e4, 1e-9);
  ck_assert_double_eq_tol (num (p, "ratio_by_rank.1"), round (1e4 * 113.0 / 110) / 1e4, 1e-9);
  ck_assert_double_eq_tol (num (p, "spread_pct"), round (1e4 * (113.0 / 109 - 1)) / 1e2, 1e-9);
  cJSON_Delete (s);
}
END_TEST

static void
expect_refused (const char *name, const char *text, bool profile, const char *needle)
{
  g_autofree char *path = put (name, text);
  const char *files[] = { path };
  GError *error = NULL;
  cJSON *s = profile ? sg_skew_report (NULL, 0, files, 1, &error)
                     : sg_skew_report (files, 1, NULL, 0, &error);
  ck_assert_msg (s == NULL, "%s accepted", name);
  ck_assert_msg (strstr (error->message, path) && strstr (error->message, needle),
                 "'%s' lacks the path or '%s'", error->message, needle);
  g_error_free (error);
}

START_TEST (files_without_per_rank_data_are_refused_naming_the_field)
{
  expect_refused ("old.json",
                  "{\"world_size\":2,\"measured\":{},\"collectives\":[{\"name\":\"ag\"}]}", false,
                  "no by_rank");
  g_autofree char *short_end = g_strdup (report_text);
  memcpy (strstr (short_end, "[700,690]"), "[700]    ", 9);
  expect_refused ("short.json", short_end, false, "collectives[1].by_rank.end_us");
  g_autofree char *neg = g_strdup (report_text);
  memcpy (strstr (neg, "[1000,1050]"), "[-1,1050]  ", 11);
  expect_refused ("neg.json", neg, false, "by_rank: step_us");
  expect_refused ("p-none.json",
                  "{\"world_size\":2,\"gemm\":[{\"op\":\"mm\",\"us\":5}]}", true,
                  "no gemm, attention or ops entry has us_by_rank");
  expect_refused ("p-bad.json",
                  "{\"world_size\":2,\"ops\":[{\"us\":5,\"us_by_rank\":[5,0]}]}", true,
                  "ops[0].us_by_rank");
}
END_TEST

/* sgfit --skew: tables on stdout and -o written; a bad file: exit 1, one
 * message, nothing written. */
START_TEST (command_line_writes_nothing_on_a_bad_file)
{
  g_autofree char *rep = put ("r.json", report_text);
  g_autofree char *bad = put ("bad.json", "{\"world_size\":2,\"collectives\":[]}");
  g_autofree char *out = g_build_filename (dir, "skew.json", NULL);
  g_autofree char *out2 = g_build_filename (dir, "skew2.json", NULL);
  char *ok_argv[] = { SGFIT_EXE, "--skew", rep, "-o", out, NULL };
  char *bad_argv[] = { SGFIT_EXE, "--skew", rep, bad, "-o", out2, NULL };
  g_autofree char *so = NULL, *se = NULL;
  int status = 0;
  ck_assert (g_spawn_sync (NULL, ok_argv, NULL, 0, NULL, NULL, &so, &se, &status, NULL));
  ck_assert_msg (g_spawn_check_wait_status (status, NULL), "%s", se);
  ck_assert_ptr_nonnull (strstr (so, "launch skew: median 12.5 us, max 20.0 us (ag)"));
  ck_assert (g_file_test (out, G_FILE_TEST_EXISTS));
  g_clear_pointer (&so, g_free);
  g_clear_pointer (&se, g_free);
  ck_assert (g_spawn_sync (NULL, bad_argv, NULL, 0, NULL, NULL, &so, &se, &status, NULL));
  ck_assert (WIFEXITED (status) && WEXITSTATUS (status) == 1);
  ck_assert_ptr_nonnull (strstr (se, "no by_rank"));
  ck_assert (!g_file_test (out2, G_FILE_TEST_EXISTS));
}
END_TEST

int
main (void)
{
  dir = g_dir_make_tmp ("sg-skew-XXXXXX", NULL);
  if (!dir)
    return 1;
  Suite *s = suite_create ("skew");
  TCase *tc = tcase_create ("skew");
  tcase_add_test (tc, skew_names_the_last_rank_and_the_spreads);
  tcase_add_test (tc, profile_rates_are_each_ranks_sum_over_the_medians);
  tcase_add_test (tc, files_without_per_rank_data_are_refused_naming_the_field);
  tcase_add_test (tc, command_line_writes_nothing_on_a_bad_file);
  suite_add_tcase (s, tc);
  SRunner *sr = srunner_create (s);
  srunner_run_all (sr, CK_NORMAL);
  const int failed = srunner_ntests_failed (sr);
  srunner_free (sr);
  GDir *d = g_dir_open (dir, 0, NULL);
  for (const char *f; d && (f = g_dir_read_name (d));) {
    g_autofree char *p = g_build_filename (dir, f, NULL);
    g_remove (p);
  }
  if (d)
    g_dir_close (d);
  g_rmdir (dir);
  g_free (dir);
  return failed ? 1 : 0;
}
