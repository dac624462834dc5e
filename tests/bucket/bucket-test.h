/* bucket-test.h: helpers shared by the bucket pass tests (test_pass.c,
 * test_trial.c, test_modes.c): the data folder from argv[1], the Check
 * runner, and graphgen's steps (in memory) as loaded.
 * Requires: Check; graphgen for bt_generated_fsdp8. Invalidates: nothing.
 */
#pragma once

#include <check.h>
#include <stdio.h>
#include <stdlib.h>

#include "builder.h"
#include "graph.h"
#ifdef HAVE_GRAPHGEN
#include "graphgen.h"
#endif

/* Runs @s; argv[1], when given, replaces *@data_dir (the sample graphs). */
static inline int
bt_main (int argc, char **argv, const char **data_dir, Suite *s)
{
  if (argc > 1)
    *data_dir = argv[1];
  SRunner *sr = srunner_create (s);
  srunner_run_all (sr, CK_NORMAL);
  const int failed = srunner_ntests_failed (sr);
  srunner_free (sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

/* Two all_gathers of 1 MiB shards over two ranks issued up front, then
 * one compute of @busy_us, then their consumers (matmuls). With a short
 * compute the second gather waits behind the first on the comm stream and
 * is exposed: one bucket pays one latency; with a long one both hide. */
static inline SgGraph *
bt_two_gathers (double busy_us)
{
  SgGraph *g = tb_new (2);
  tb_group (g, "0", 2, 0, 1);
  tb_input (g, "x", "bfloat16", 2, (int64_t)1024, (int64_t)1024);
  tb_input (g, "w1", "bfloat16", 2, (int64_t)512, (int64_t)1024);
  tb_input (g, "w2", "bfloat16", 2, (int64_t)512, (int64_t)1024);
  tb_all_gather (g, "ag1", "w1", "0");
  tb_all_gather (g, "ag2", "w2", "0");
  tb_cost (g, tb_mm (g, "busy", "x", "x"), busy_us);
  tb_wait (g, "ag1_w", "ag1");
  tb_wait (g, "ag2_w", "ag2");
  tb_mm (g, "mm1", "busy", "ag1_w");
  tb_mm (g, "mm2", "mm1", "ag2_w");
  tb_output (g, 1, "mm2");
  return g;
}

#ifdef HAVE_GRAPHGEN
/* (transfer full) graphgen's graph JSON for @gc, *@len bytes. */
static inline char *
bt_generate_text (const GgConfig *gc, size_t *len)
{
  char *text = NULL;
  FILE *f = open_memstream (&text, len);
  GError *error = NULL;
  ck_assert_msg (gg_write (gc, f, NULL, &error), "%s", error ? error->message : "");
  fclose (f);
  return text;
}

/* graphgen's step for @gc, loaded as a graph (not estimated, not
 * scheduled). */
static inline SgGraph *
bt_generated (const GgConfig *gc)
{
  size_t len = 0;
  char *text = bt_generate_text (gc, &len);
  GError *error = NULL;
  SgGraph *g = sg_graph_load_data (text, len, "graphgen", &error);
  free (text);
  ck_assert_msg (g, "%s", error ? error->message : "");
  return g;
}

/* graphgen's FSDP step over 8 ranks, layers sized for about @nodes nodes. */
static inline SgGraph *
bt_generated_fsdp8 (int64_t nodes)
{
  GgConfig gc;
  gg_config_init (&gc);
  gc.dp = 8, gc.world = 8;
  gc.layers = gg_layers_for_nodes (&gc, nodes);
  return bt_generated (&gc);
}
#endif
