/* common.c: see common.h. */
#include "common.h"

#include <string.h>

void
assert_error (GError *error, int code, const char *substring)
{
  ck_assert_msg (error != NULL, "no error, want '%s'", substring);
  ck_assert_msg (error->domain == SG_GRAPH_ERROR, "domain %s", g_quark_to_string (error->domain));
  ck_assert_msg (error->code == code, "code %d, want %d: %s", error->code, code, error->message);
  ck_assert_msg (strstr (error->message, substring), "'%s' lacks '%s'", error->message, substring);
  g_error_free (error);
}

void
assert_invalid (const SgGraph *g, int code, const char *substring)
{
  GError *error = NULL;
  ck_assert (!sg_graph_validate (g, &error));
  assert_error (error, code, substring);
}

void
assert_valid (const SgGraph *g)
{
  GError *error = NULL;
  ck_assert_msg (sg_graph_validate (g, &error), "%s", error ? error->message : "?");
}

int
run_suite (Suite *s)
{
  SRunner *sr = srunner_create (s);
  srunner_run_all (sr, CK_NORMAL);
  int failed = srunner_ntests_failed (sr);
  srunner_free (sr);
  return failed ? 1 : 0;
}

/* x[4,8] f32, w[2,8] f32 -> ag = all_gather(w) over "0" (2 ranks) -> wait ->
 * t -> mm(x, t) [4,4] -> relu -> output. */
SgGraph *
small_graph (void)
{
  SgGraph *g = tb_new (2);
  tb_group (g, "0", 2, 0, 1);
  tb_input (g, "x", "float32", 2, (int64_t)4, (int64_t)8);
  tb_input (g, "w", "float32", 2, (int64_t)2, (int64_t)8);
  tb_all_gather (g, "ag", "w", "0");
  tb_wait (g, "ag_w", "ag");
  tb_t (g, "wt", "ag_w");
  tb_mm (g, "mm", "x", "wt");
  tb_pointwise (g, "relu", "aten.relu.default", "mm", NULL);
  tb_output (g, 1, "relu");
  return g;
}
