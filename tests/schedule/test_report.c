/* test_report.c: report JSON (metrics, rows), the readable summary and the
 * Chrome trace, against a hand-computed timeline. */
#include <check.h>
#include <string.h>

#include "builder.h"
#include "schedule.h"

static SgNodeId
id_of (const SgGraph *g, const char *name)
{
  SgNodeId id = sg_graph_lookup (g, name);
  ck_assert_msg (id != SG_NO_NODE, "no node %s", name);
  return id;
}

/* ag (50 us, exposed 20: hidden 30 by mm0) */
static SgGraph *
graph (void)
{
  SgGraph *g = tb_new (2);
  tb_group (g, "0", 2, 0, 1);
  tb_input (g, "x", "bfloat16", 2, 64, 64);
  tb_input (g, "w", "bfloat16", 2, 32, 64);
  tb_all_gather (g, "ag", "w", "0");
  tb_mm (g, "mm0", "x", "x");
  tb_wait (g, "wt", "ag");
  tb_mm (g, "mm1", "x", "wt");
  tb_output (g, 2, "mm0", "mm1");
  g->nodes[id_of (g, "ag")].est_us = 50.00049;
  g->nodes[id_of (g, "ag")].est_src = SG_COST_MODEL;
  g->nodes[id_of (g, "mm0")].est_us = 30;
  g->nodes[id_of (g, "mm1")].est_us = 10;
  return g;
}

static double
num (const cJSON *o, const char *key)
{
  const cJSON *v = cJSON_GetObjectItemCaseSensitive (o, key);
  ck_assert_msg (cJSON_IsNumber (v), "missing number %s", key);
  return v->valuedouble;
}

static const char *
str (const cJSON *o, const char *key)
{
  const cJSON *v = cJSON_GetObjectItemCaseSensitive (o, key);
  ck_assert_msg (cJSON_IsString (v), "missing string %s", key);
  return v->valuestring;
}

START_TEST (metrics_have_every_key_rounded_to_a_nanosecond)
{
  g_autoptr (SgGraph) g = graph ();
  SgContention none = { 1, 1, 1 };
  SgSimResult r;
  ck_assert (sg_simulate_with (g, NULL, &none, &r, NULL));
  cJSON *m = sg_report_metrics (g, &r);
  ck_assert_int_eq ((int)num (m, "collectives"), 1);
  ck_assert_int_eq ((int)num (m, "hidden"), 0);
  ck_assert_int_eq ((int)num (m, "partial"), 1);
  ck_assert_int_eq ((int)num (m, "exposed"), 0);
  ck_assert_double_eq (num (m, "exposed_us"), 20.0);
  ck_assert_double_eq (num (m, "comm_us"), 50.0);
  ck_assert_double_eq (num (m, "compute_us"), 40.0);
  ck_assert_double_eq (num (m, "step_us"), 60.0);
  ck_assert_double_eq (num (m, "lower_bound_us"), 60.0); /* ag + mm1 */
  ck_assert_double_eq (num (m, "peak_bytes"), (double)r.peak_bytes);
  /* the bound by term: the critical path binds; the window term comes with
   * sg_lower_bound_refine */
  const cJSON *lb = cJSON_GetObjectItemCaseSensitive (m, "lower_bound");
  ck_assert_double_eq (num (lb, "compute_us"), 40.0);
  ck_assert_double_eq (num (lb, "comm_stream_us"), 50.0);
  ck_assert_double_eq (num (lb, "critical_path_us"), 60.0);
  ck_assert_double_eq (num (lb, "overlap_us"), 50.0);
  ck_assert (cJSON_IsNull (cJSON_GetObjectItemCaseSensitive (lb, "window_us")));
  ck_assert_str_eq (str (lb, "binding"), "critical_path");
  ck_assert_double_eq (num (m, "gap"), 1.0);
  ck_assert_int_eq (cJSON_GetArraySize (m), 12);
  char *s = cJSON_PrintUnformatted (m);
  ck_assert_msg (strstr (s, "\"comm_us\":50,") != NULL, "%s", s);
  cJSON_free (s);
  cJSON_Delete (m);
  ck_assert_double_eq (sg_report_round_us (1.23456), 1.235);
  ck_assert_double_eq (sg_report_round_us (-0.0001), 0.0);
  sg_sim_result_clear (&r);
}
END_TEST

START_TEST (rows_resolve_names_after_a_permute)
{
  g_autoptr (SgGraph) g = graph ();
  SgContention none = { 1, 1, 1 };
  /* renumbered: rows hold the new ids, names are resolved from them */
  SgNodeId order[] = { 0, 1, 3, 2, 4, 5, 6 };
  ck_assert (sg_graph_permute (g, order, NULL));
  SgSimResult r;
  ck_assert (sg_simulate_with (g, NULL, &none, &r, NULL));
  cJSON *rows = sg_report_rows (g, &r);
  ck_assert_int_eq (cJSON_GetArraySize (rows), 1);
  const cJSON *row = cJSON_GetArrayItem (rows, 0);
  ck_assert_str_eq (str (row, "name"), "ag");
  ck_assert_str_eq (str (row, "kind"), "all_gather");
  ck_assert_str_eq (str (row, "group"), "0");
  ck_assert_double_eq (num (row, "bytes"), 64.0 * 64 * 2);
  ck_assert_double_eq (num (row, "estimated_us"), 50.0);
  /* mm0 now runs first; ag is issued after it and nothing hides it */
  ck_assert_double_eq (num (row, "exposed_us"), 50.0);
  ck_assert_str_eq (str (row, "status"), "exposed");
  ck_assert_str_eq (str (row, "source"), "model");
  ck_assert_double_eq (num (row, "start_us"), 30.0);
  ck_assert_double_eq (num (row, "end_us"), 80.0);
  ck_assert (cJSON_IsNull (cJSON_GetObjectItemCaseSensitive (row, "hidden_by")));
  ck_assert_str_eq (str (row, "wait"), "wt");
  ck_assert_int_eq (r.rows[0].node, 3);
  cJSON_Delete (rows);
  sg_sim_result_clear (&r);
}
END_TEST

START_TEST (trace_has_a_compute_track_and_one_per_group)
{
  g_autoptr (SgGraph) g = graph ();
  SgContention none = { 1, 1, 1 };
  SgSimResult r;
  ck_assert (sg_simulate_with (g, NULL, &none, &r, NULL));
  cJSON *t = sg_trace_build (g, &r);
  const cJSON *ev = cJSON_GetObjectItemCaseSensitive (t, "traceEvents");
  ck_assert (cJSON_IsArray (ev));
  int n_x = 0, n_names = 0;
  bool comm_seen = false, stall_seen = false;
  const cJSON *e;
  cJSON_ArrayForEach (e, ev)
  {
    const char *ph = str (e, "ph");
    ck_assert_double_eq (num (e, "pid"), 0);
    if (strcmp (ph, "M") == 0) {
      if (strcmp (str (e, "name"), "thread_name") == 0)
        n_names++;
      continue;
    }
    ck_assert_str_eq (ph, "X");
    n_x++;
    const char *name = str (e, "name");
    int tid = (int)num (e, "tid");
    if (strcmp (name, "ag") == 0) {
      comm_seen = true;
      ck_assert_int_eq (tid, 1);
      ck_assert_double_eq (num (e, "dur"), 50.0);
      const cJSON *args = cJSON_GetObjectItemCaseSensitive (e, "args");
      ck_assert_double_eq (num (args, "est_us"), 50.0);
      ck_assert_str_eq (str (args, "source"), "model");
    } else if (strcmp (name, "wt") == 0) {
      stall_seen = true;
      ck_assert_int_eq (tid, 0);
      ck_assert_double_eq (num (e, "ts"), 30.0);
      ck_assert_double_eq (num (e, "dur"), 20.0);
    } else {
      ck_assert_int_eq (tid, 0);
    }
  }
  ck_assert (comm_seen && stall_seen);
  ck_assert_int_eq (n_x, 4); /* mm0, wt (stall), mm1, ag */
  ck_assert_int_eq (n_names, 2);
  cJSON_Delete (t);
  sg_sim_result_clear (&r);
}
END_TEST

START_TEST (summary_names_counts_and_the_worst_collective)
{
  g_autoptr (SgGraph) g = graph ();
  SgContention none = { 1, 1, 1 };
  SgSimResult r;
  ck_assert (sg_simulate_with (g, NULL, &none, &r, NULL));
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream (&buf, &len);
  sg_report_print_summary (f, "scheduled", g, &r);
  fclose (f);
  ck_assert_msg (strstr (buf, "scheduled:") && strstr (buf, "1 partial")
                     && strstr (buf, "exposed 20.000 us") && strstr (buf, " ag "),
                 "%s", buf);
  free (buf);
  sg_sim_result_clear (&r);
}
END_TEST

static Suite *
report_suite (void)
{
  Suite *s = suite_create ("report");
  TCase *tc = tcase_create ("core");
  tcase_add_test (tc, metrics_have_every_key_rounded_to_a_nanosecond);
  tcase_add_test (tc, rows_resolve_names_after_a_permute);
  tcase_add_test (tc, trace_has_a_compute_track_and_one_per_group);
  tcase_add_test (tc, summary_names_counts_and_the_worst_collective);
  suite_add_tcase (s, tc);
  return s;
}

int
main (void)
{
  SRunner *sr = srunner_create (report_suite ());
  srunner_run_all (sr, CK_NORMAL);
  int failed = srunner_ntests_failed (sr);
  srunner_free (sr);
  return failed ? 1 : 0;
}
