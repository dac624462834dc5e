/* est-test.h: helpers shared by the estimate/ unit tests. */
#pragma once

#include <check.h>
#include <glib/gstdio.h>
#include <string.h>

#include "builder.h"
#include "estimate-private.h"

#define I64(x) ((int64_t)(x))

static inline SgConfig
est_cfg (const char *cluster, const char *profile)
{
  SgConfig c;
  memset (&c, 0, sizeof c);
  c.cluster = cluster;
  c.profile = profile;
  return c;
}

/* Runs the estimate pass; fails the test with the message on error. */
static inline void
est_run (SgGraph *g, const char *cluster, const char *profile)
{
  SgConfig cfg = est_cfg (cluster, profile);
  GError *error = NULL;
  if (!sg_estimate_costs (g, &cfg, &error))
    ck_abort_msg ("estimate failed: %s", error->message);
}

/* Runs the pass expecting failure; returns the message (transfer full). */
static inline char *
est_fail (SgGraph *g, const char *cluster, const char *profile, int code)
{
  SgConfig cfg = est_cfg (cluster, profile);
  GError *error = NULL;
  ck_assert_msg (!sg_estimate_costs (g, &cfg, &error), "estimate should have failed");
  ck_assert (error != NULL);
  ck_assert_int_eq (error->domain, SG_ESTIMATE_ERROR);
  ck_assert_int_eq (error->code, code);
  char *msg = g_strdup (error->message);
  g_error_free (error);
  return msg;
}

/* Writes @text to a new file in a fresh temp dir; returns its path. */
static inline char *
est_tmpfile (const char *name, const char *text)
{
  g_autofree char *dir = g_dir_make_tmp ("sg-est-XXXXXX", NULL);
  ck_assert (dir != NULL);
  char *path = g_build_filename (dir, name, NULL);
  ck_assert (g_file_set_contents (path, text, -1, NULL));
  return path;
}

/* A world-@world graph with group "0" over ranks 0..@world-1 (world <= 64). */
static inline SgGraph *
est_graph (int32_t world)
{
  SgGraph *g = tb_new (world);
  int32_t ranks[64];
  for (int32_t i = 0; i < world; i++)
    ranks[i] = i;
  GError *error = NULL;
  ck_assert (sg_graph_add_group (g, "0", ranks, world, NULL, 0, &error) >= 0);
  return g;
}

static inline double
rel_err (double model, double measured)
{
  return model / measured - 1.0;
}

/* Removes a file made by est_tmpfile() and its directory. */
static inline void
est_rmtmp (const char *path)
{
  g_autofree char *dir = g_path_get_dirname (path);
  g_remove (path);
  g_rmdir (dir);
}

/* Parses the JSON file @dir/@name (transfer full); fails the test when it
 * cannot be read or parsed. */
static inline cJSON *
est_load_json (const char *dir, const char *name)
{
  g_autofree char *path = g_build_filename (dir, name, NULL);
  g_autofree char *text = NULL;
  ck_assert_msg (g_file_get_contents (path, &text, NULL, NULL), "cannot read %s", path);
  cJSON *root = cJSON_Parse (text);
  ck_assert_msg (root != NULL, "%s is not JSON", path);
  return root;
}

/* Runs every test of @s; the exit status for main(): 0 when all passed. */
static inline int
est_run_suite (Suite *s)
{
  SRunner *sr = srunner_create (s);
  srunner_run_all (sr, CK_NORMAL);
  int failed = srunner_ntests_failed (sr);
  srunner_free (sr);
  return failed ? 1 : 0;
}
