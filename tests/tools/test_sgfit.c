/* test_sgfit.c: tools/sgfit on synthetic measurements. A sample graph with
 * a synthetic contention profile is simulated with known pair scales; its
 * timelines, written as schedrun reports of the orders that "ran" (a plan
 * from codegen, an order file), are the fit set; other orders and another
 * graph the judge set. The fit must find the scales from the fit set alone
 * and then predict the judge set as "measured". */
#include <check.h>
#include <glib/gstdio.h>
#include <math.h>
#include <string.h>

#include "codegen.h"
#include "fit.h"
#include "schedule.h"

static const char *data = SG_TEST_DATA;

/* Pairs of all_gather and reduce_scatter (2 ranks) beside GEMMs and maps:
 * a run that slowed both sides (comm_x 1.5, kernel_x 2, wait 0.5, from
 * tests/estimate) and a collective twice as slow beside maps, which it
 * slows by 1.5 (tests/schedule/test_pairs.c). */
#define PAIR(kind, kernel, key, solo, rep, comm, reps)                                          \
  "{\"kind\":\"" kind "\",\"bytes\":1048576,\"group_size\":2,\"kernel\":\"" kernel "\","        \
  "\"kernel_key\":\"" key "\",\"order\":\"comm_first\",\"comm_solo_us\":" solo ","              \
  "\"rep_solo_us\":" rep ",\"comm_us\":" comm ",\"reps_us\":[" reps "]}"
static const char *profile_text =
  "{\"format\":\"schedgraph.profile\",\"version\":2,\"world_size\":2,\"contention\":["
  PAIR ("all_gather", "gemm", "g", "300", "100", "500", "150,200,175,100,100") ","
  PAIR ("reduce_scatter", "gemm", "g", "300", "100", "500", "150,200,175,100,100") ","
  PAIR ("all_gather", "map", "m", "30", "10", "60", "15,15,15,15,10,10,10,10,10,10") ","
  PAIR ("reduce_scatter", "map", "m", "30", "10", "60", "15,15,15,15,10,10,10,10,10,10")
  "]}";

static const char *const truth_fields[] = { "contention_comm_scale", "contention_compute_scale",
                                            "contention_wait_scale" };
static const double truth[] = { 2.0, 0.5, 1.0 };

static char *dir;

static char *
in_dir (const char *name)
{
  return g_build_filename (dir, name, NULL);
}

/* @dir/@tag@suffix */
static char *
tagged (const char *tag, const char *suffix)
{
  g_autofree char *name = g_strconcat (tag, suffix, NULL);
  return in_dir (name);
}

static SgGraph *
load_estimated (const char *graph, const char *profile, bool truth_scales)
{
  g_autofree char *path = g_build_filename (data, graph, NULL);
  SgGraph *g = sg_graph_load (path, NULL);
  ck_assert (g != NULL);
  if (truth_scales) { /* the graph's cluster and the true scales */
    cJSON *c = g->cluster_json ? cJSON_Parse (g->cluster_json) : cJSON_CreateObject ();
    for (size_t i = 0; i < G_N_ELEMENTS (truth); i++)
      cJSON_AddNumberToObject (c, truth_fields[i], truth[i]);
    g_free (g->cluster_json);
    g->cluster_json = cJSON_PrintUnformatted (c);
    cJSON_Delete (c);
  }
  SgConfig cfg;
  sg_config_init (&cfg);
  cfg.profile = profile;
  GError *e = NULL;
  ck_assert_msg (sg_estimate_costs (g, &cfg, &e), "%s", e ? e->message : "");
  return g;
}

/* Writes what schedrun's report of @order would say if the model with the
 * true scales were the machine. */
static void
write_report (const SgGraph *g, const SgNodeId *order, const char *path)
{
  SgSimResult r;
  ck_assert (sg_simulate (g, order, &r, NULL));
  cJSON *root = cJSON_CreateObject ();
  cJSON *m = cJSON_AddObjectToObject (root, "measured");
  cJSON_AddNumberToObject (m, "step_us", r.step_us);
  cJSON_AddNumberToObject (m, "exposed_us", r.exposed_us);
  cJSON *rows = cJSON_AddArrayToObject (root, "collectives");
  g_autofree double *free_at = g_new0 (double, (size_t)g->n_groups);
  for (int32_t i = 0; i < r.n_rows; i++) {
    const SgCollRow *row = &r.rows[i];
    const int32_t grp = g->nodes[row->node].group;
    cJSON *o = cJSON_CreateObject ();
    cJSON_AddStringToObject (o, "name", g->nodes[row->node].name);
    cJSON_AddNumberToObject (o, "measured_us", row->end_us - MAX (row->issue_us, free_at[grp]));
    cJSON_AddNumberToObject (o, "exposed_us", row->exposed_us);
    cJSON_AddItemToArray (rows, o);
    free_at[grp] = row->end_us;
  }
  char *text = cJSON_Print (root);
  ck_assert (g_file_set_contents (path, text, -1, NULL));
  cJSON_free (text);
  cJSON_Delete (root);
  sg_sim_result_clear (&r);
}

static void
write_order (const SgGraph *g, const SgNodeId *order, const char *path)
{
  cJSON *a = cJSON_CreateArray ();
  for (int32_t i = 0; i < g->n_nodes; i++)
    cJSON_AddItemToArray (a, cJSON_CreateString (g->nodes[order[i]].name));
  char *text = cJSON_PrintUnformatted (a);
  ck_assert (g_file_set_contents (path, text, -1, NULL));
  cJSON_free (text);
  cJSON_Delete (a);
}

/* Measurements of @graph: its input order as a plan, its schedule and (if
 * it has one) the peer order as order files; manifest rows appended. */
static void
measure (GString *manifest, const char *graph, const char *tag, const char *set_input,
         const char *set_other, const char *profile)
{
  g_autoptr (SgGraph) g = load_estimated (graph, profile, true);
  g_autofree char *graph_path = g_build_filename (data, graph, NULL);
  /* the input order, as schedgraph --no-reorder --no-bucket -o would plan it */
  g_autofree char *plan = tagged (tag, ".input.plan.json");
  GError *e = NULL;
  SgConfig cfg;
  sg_config_init (&cfg);
  ck_assert_msg (sg_codegen_write (g, &cfg, graph, plan, NULL, &e), "%s", e ? e->message : "");
  g_autofree SgNodeId *ids = g_new (SgNodeId, (size_t)g->n_nodes);
  for (SgNodeId i = 0; i < g->n_nodes; i++)
    ids[i] = i;
  g_autofree char *rep = tagged (tag, ".input.report.json");
  write_report (g, ids, rep);
  g_string_append_printf (manifest, "%s{\"name\":\"%s input\",\"graph\":\"%s\",\"profile\":\"%s\","
                          "\"plan\":\"%s\",\"report\":\"%s\",\"set\":\"%s\"}",
                          manifest->len > 10 ? "," : "", tag, graph_path, profile, plan, rep,
                          set_input);
  /* our schedule */
  SgScheduleStats st;
  g_autofree SgNodeId *sched = sg_schedule_compute (g, NULL, &st, &e);
  ck_assert (sched != NULL);
  g_autofree char *ord = tagged (tag, ".sched.order.json");
  g_autofree char *rep2 = tagged (tag, ".sched.report.json");
  write_order (g, sched, ord);
  write_report (g, sched, rep2);
  g_string_append_printf (manifest, ",{\"name\":\"%s sched\",\"graph\":\"%s\",\"profile\":\"%s\","
                          "\"order\":\"%s\",\"report\":\"%s\",\"set\":\"%s\"}",
                          tag, graph_path, profile, ord, rep2, set_other);
  /* the peer's order, where tests/data has it */
  g_autofree char *base = g_strndup (graph, strlen (graph) - 5);
  g_autofree char *peer = g_strdup_printf ("%s/%s.peer_order_plain.json", data, base);
  g_autofree SgNodeId *po = g_file_test (peer, G_FILE_TEST_EXISTS) ? sg_order_load (g, peer, &e)
                                                                   : NULL;
  if (po) {
    g_autofree char *rep3 = tagged (tag, ".peer.report.json");
    write_report (g, po, rep3);
    g_string_append_printf (manifest, ",{\"name\":\"%s peer\",\"graph\":\"%s\",\"profile\":\"%s\","
                            "\"order\":\"%s\",\"report\":\"%s\",\"set\":\"judge\"}",
                            tag, graph_path, profile, peer, rep3);
  }
}

START_TEST (the_fit_finds_the_scales_from_the_fit_set_and_predicts_the_judge_set)
{
  dir = g_dir_make_tmp ("sg-fit-XXXXXX", NULL);
  g_autofree char *profile = in_dir ("profile.json");
  ck_assert (g_file_set_contents (profile, profile_text, -1, NULL));
  GString *m = g_string_new ("{\"runs\":[");
  measure (m, "w2_tiny_fsdp2_L2_h256.json", "fsdp", "fit", "fit", profile);
  measure (m, "w2_tiny_tp2_L2_h256.json", "tp", "judge", "judge", profile);
  g_string_append (m, "]}");
  g_autofree char *manifest = in_dir ("manifest.json");
  ck_assert (g_file_set_contents (manifest, m->str, -1, NULL));
  g_string_free (m, TRUE);

  GError *e = NULL;
  g_autoptr (SgFit) f = sg_fit_load (manifest, &e);
  ck_assert_msg (f != NULL, "%s", e ? e->message : "");
  SgFitAxis axes[8];
  const int n = sg_fit_default_axes (f, axes);
  ck_assert_int_eq (n, 3);
  for (int i = 0; i < n; i++)
    ck_assert_str_eq (axes[i].field, truth_fields[i]);
  double v[8], loss, start_loss;
  ck_assert (sg_fit_start (f, axes, v, n, &e));
  ck_assert (v[0] == 1.0 && v[1] == 1.0 && v[2] == 1.0);
  ck_assert (sg_fit_loss (f, axes, v, n, "fit", &start_loss, &e));
  ck_assert_msg (start_loss > 1e-3, "the default scales already fit (%g): no test", start_loss);
  ck_assert_msg (sg_fit_search (f, axes, v, n, 8, &loss, &e), "%s", e ? e->message : "");
  ck_assert_msg (loss < 1e-9, "fit loss %g at %g %g %g", loss, v[0], v[1], v[2]);
  ck_assert_double_eq_tol (v[0], truth[0], 1e-9);
  ck_assert_double_eq_tol (v[1], truth[1], 1e-9);
  /* the judge set was not looked at, and is predicted as measured */
  double judge;
  ck_assert (sg_fit_loss (f, axes, v, n, "judge", &judge, &e));
  ck_assert_msg (judge < 1e-9, "judge loss %g", judge);
  cJSON *rep = sg_fit_report (f, axes, v, n, &e);
  ck_assert (rep != NULL);
  const cJSON *js = cJSON_GetObjectItem (rep, "judge");
  ck_assert_int_eq (cJSON_GetObjectItem (js, "runs")->valueint, 4); /* tp x 3, fsdp peer */
  ck_assert_int_eq (cJSON_GetObjectItem (js, "exposed_within_bar")->valueint, 4);
  cJSON_Delete (rep);
  g_autofree char *cmd = g_strdup_printf ("rm -rf '%s'", dir);
  ck_assert_int_eq (system (cmd), 0);
  g_free (dir);
}
END_TEST

START_TEST (bad_manifests_and_axes_are_rejected_naming_the_run)
{
  dir = g_dir_make_tmp ("sg-fit-XXXXXX", NULL);
  g_autofree char *manifest = in_dir ("manifest.json");
  ck_assert (g_file_set_contents (manifest, "{\"runs\":[{\"name\":\"a\",\"graph\":\"g.json\"}]}",
                                  -1, NULL));
  GError *e = NULL;
  ck_assert (sg_fit_load (manifest, &e) == NULL);
  ck_assert_msg (strstr (e->message, "runs[0] (a): needs graph, plan or order, report and set"),
                 "%s", e->message);
  g_clear_error (&e);
  SgFitAxis a;
  ck_assert (!sg_fit_parse_axis ("comm_slowdown=2:1:0.1", &a, &e));
  ck_assert (strstr (e->message, "LO <= HI") != NULL);
  g_clear_error (&e);
  ck_assert (sg_fit_parse_axis ("comm_slowdown=1:2:0.25", &a, &e));
  ck_assert_str_eq (a.field, "comm_slowdown");
  ck_assert (a.lo == 1 && a.hi == 2 && a.step == 0.25);
  g_remove (manifest);
  g_rmdir (dir);
  g_free (dir);
}
END_TEST

int
main (void)
{
  Suite *s = suite_create ("sgfit");
  TCase *tc = tcase_create ("sgfit");
  tcase_set_timeout (tc, 300);
  tcase_add_test (tc, the_fit_finds_the_scales_from_the_fit_set_and_predicts_the_judge_set);
  tcase_add_test (tc, bad_manifests_and_axes_are_rejected_naming_the_run);
  suite_add_tcase (s, tc);
  SRunner *sr = srunner_create (s);
  srunner_run_all (sr, CK_NORMAL);
  const int failed = srunner_ntests_failed (sr);
  srunner_free (sr);
  return failed ? 1 : 0;
}
