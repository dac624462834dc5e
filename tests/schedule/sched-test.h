/* sched-test.h: what the schedule tests share: a cluster (and a
 * contention profile) set on a built graph, a graph loaded from JSON
 * text, and the Check runner. */
#pragma once

#include <check.h>
#include <glib/gstdio.h>
#include <string.h>

#include "schedule.h"

/* Estimates @g with the given start wait and contention (reductions slow
 * as much as other collectives). */
static inline void
st_estimate (SgGraph *g, double start_wait, double compute_slowdown, double comm_slowdown)
{
  g->cluster_json = g_strdup_printf ("{\"comm_start_wait\": %g, \"compute_slowdown\": %g, "
                                     "\"comm_slowdown\": %g, \"reduce_slowdown\": %g}",
                                     start_wait, compute_slowdown, comm_slowdown, comm_slowdown);
  SgConfig cfg;
  sg_config_init (&cfg);
  GError *err = NULL;
  ck_assert_msg (sg_estimate_costs (g, &cfg, &err), "%s", err ? err->message : "");
}

/* Estimates @g with @cluster_json as its cluster and, when @contention is
 * not NULL, a version-2 profile (world size 2) whose contention section
 * holds the entries @contention. */
static inline void
st_estimate_with_pairs (SgGraph *g, const char *cluster_json, const char *contention)
{
  g->cluster_json = g_strdup (cluster_json);
  g_autofree char *dir = NULL, *path = NULL;
  if (contention) {
    dir = g_dir_make_tmp ("sg-pairs-XXXXXX", NULL);
    path = g_build_filename (dir, "p.json", NULL);
    g_autofree char *text = g_strdup_printf (
      "{\"format\":\"schedgraph.profile\",\"version\":2,\"world_size\":2,\"contention\":[%s]}",
      contention);
    ck_assert (g_file_set_contents (path, text, -1, NULL));
  }
  SgConfig cfg;
  sg_config_init (&cfg);
  cfg.profile = path;
  GError *err = NULL;
  ck_assert_msg (sg_estimate_costs (g, &cfg, &err), "%s", err ? err->message : "");
  if (path) {
    g_remove (path);
    g_rmdir (dir);
  }
}

/* (transfer full) A graph from JSON text, estimated with its own cluster. */
static inline SgGraph *
st_load (const char *json, const char *name)
{
  GError *err = NULL;
  SgGraph *g = sg_graph_load_data (json, strlen (json), name, &err);
  ck_assert_msg (g != NULL, "%s: %s", name, err ? err->message : "");
  SgConfig cfg;
  sg_config_init (&cfg);
  ck_assert_msg (sg_estimate_costs (g, &cfg, &err), "%s: %s", name, err ? err->message : "");
  return g;
}

/* Runs one test case's tests; the exit status of main. */
static inline int
st_run (const char *name, int timeout_s, const TTest *const *tests, size_t n_tests)
{
  Suite *s = suite_create (name);
  TCase *tc = tcase_create (name);
  tcase_set_timeout (tc, timeout_s);
  for (size_t i = 0; i < n_tests; i++)
    tcase_add_test (tc, tests[i]);
  suite_add_tcase (s, tc);
  SRunner *sr = srunner_create (s);
  srunner_run_all (sr, CK_NORMAL);
  int failed = srunner_ntests_failed (sr);
  srunner_free (sr);
  return failed ? 1 : 0;
}
