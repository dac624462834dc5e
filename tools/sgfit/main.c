/* main.c: the sgfit command line (fit.h; docs/cost-model.md "Fitting",
 * and --skew: "Rank skew"). */
#include <stdio.h>
#include <string.h>

#include "fit.h"

#define MAX_AXES 8

static int
usage (const char *msg)
{
  fprintf (stderr, "sgfit: %s\nUsage: sgfit MANIFEST.json [--axis FIELD=LO:HI:STEP]... "
                   "[--rounds N] [-o FIT.json] [--write-orders DIR]\n"
                   "       sgfit --skew [REPORT.json]... [--profile PROFILE.json]... "
                   "[-o SKEW.json]\n", msg);
  return 2;
}

/* The JSON text of @o to @path (atomically); false with a message. */
static bool
write_json (const char *path, const cJSON *o)
{
  char *text = cJSON_Print (o);
  GError *werr = NULL;
  const bool ok = g_file_set_contents (path, text, -1, &werr);
  if (!ok) {
    fprintf (stderr, "sgfit: %s\n", werr->message);
    g_error_free (werr);
  }
  cJSON_free (text);
  return ok;
}

/* sgfit --skew: the ranks' skew of schedrun reports and the spread of
 * compute rates of profiles (skew.c). */
static int
skew_main (char **reports, int n_reports, char **profiles, const char *out)
{
  const int n_profiles = profiles ? (int)g_strv_length (profiles) : 0;
  if (n_reports + n_profiles == 0)
    return usage ("--skew needs a report or a --profile");
  GError *error = NULL;
  cJSON *skew = sg_skew_report ((const char *const *)reports, n_reports,
                                (const char *const *)profiles, n_profiles, &error);
  if (!skew) {
    fprintf (stderr, "sgfit: %s\n", error->message);
    g_error_free (error);
    return 1;
  }
  sg_skew_print (stdout, skew);
  const bool ok = !out || write_json (out, skew);
  cJSON_Delete (skew);
  return ok ? 0 : 1;
}

int
main (int argc, char **argv)
{
  char **axis_text = NULL, *out = NULL, *orders = NULL, **profiles = NULL;
  int rounds = 8;
  gboolean skew = FALSE;
  GOptionEntry entries[] = {
    { "axis", 0, 0, G_OPTION_ARG_STRING_ARRAY, &axis_text,
      "a cluster field to fit and its grid (repeatable; default: the pair scales with a "
      "contention profile, else the global factors)", "FIELD=LO:HI:STEP" },
    { "rounds", 0, 0, G_OPTION_ARG_INT, &rounds, "coordinate-descent passes, at most (8)", "N" },
    { "output", 'o', 0, G_OPTION_ARG_FILENAME, &out, "write the result JSON here", "FIT.json" },
    { "write-orders", 0, 0, G_OPTION_ARG_FILENAME, &orders,
      "write each run's order as DIR/NAME.order.json (schedgraph --order's format)", "DIR" },
    { "skew", 0, 0, G_OPTION_ARG_NONE, &skew,
      "instead of fitting: the ranks' skew in schedrun reports (their by_rank) given as "
      "arguments, and the spread of compute rates of --profile files", NULL },
    { "profile", 0, 0, G_OPTION_ARG_FILENAME_ARRAY, &profiles,
      "with --skew: a profile of schedrun --profile (its us_by_rank; repeatable)", "FILE" },
    { NULL, 0, 0, 0, NULL, NULL, NULL },
  };
  GOptionContext *oc = g_option_context_new (
    "MANIFEST.json - fit the contention model to schedrun reports (fit set), score it on "
    "the judge set");
  g_option_context_add_main_entries (oc, entries, NULL);
  GError *error = NULL;
  const bool parsed = g_option_context_parse (oc, &argc, &argv, &error);
  g_option_context_free (oc);
  if (parsed && skew) {
    int rc = axis_text || orders ? usage ("--skew takes reports, --profile and -o only")
                                 : skew_main (argv + 1, argc - 1, profiles, out);
    g_strfreev (axis_text);
    g_strfreev (profiles);
    g_free (orders);
    g_free (out);
    return rc;
  }
  g_strfreev (profiles);
  if (!parsed || argc != 2 || rounds < 1 || rounds > 100) {
    int rc = usage (error ? error->message : "expected one manifest");
    g_clear_error (&error);
    return rc;
  }
  g_autoptr (SgFit) f = sg_fit_load (argv[1], &error);
  SgFitAxis axes[MAX_AXES];
  int n = 0;
  double values[MAX_AXES], loss = 0;
  cJSON *rep = NULL;
  bool ok = f != NULL;
  for (int i = 0; ok && axis_text && axis_text[i]; i++) {
    if (n == MAX_AXES) {
      g_strfreev (axis_text);
      return usage ("at most 8 axes");
    }
    ok = sg_fit_parse_axis (axis_text[i], &axes[n++], &error);
  }
  if (ok && n == 0)
    n = sg_fit_default_axes (f, axes);
  ok = ok && (!orders || sg_fit_write_orders (f, orders, &error));
  g_free (orders);
  ok = ok && sg_fit_start (f, axes, values, n, &error)
       && sg_fit_search (f, axes, values, n, rounds, &loss, &error)
       && (rep = sg_fit_report (f, axes, values, n, &error)) != NULL;
  g_strfreev (axis_text);
  if (!ok) {
    fprintf (stderr, "sgfit: %s\n", error->message);
    g_error_free (error);
    g_free (out);
    return 1;
  }
  printf ("fitted on the fit set (loss %.4f):", loss);
  for (int i = 0; i < n; i++)
    printf (" %s=%g", axes[i].field, values[i]);
  printf ("\n%-34s %-5s %12s %12s %8s %12s %12s %6s\n", "run", "set", "pred exp us",
          "meas exp us", "in bar", "pred step", "meas step", "dur");
  const cJSON *r;
  cJSON_ArrayForEach (r, cJSON_GetObjectItem (rep, "runs"))
  printf ("%-34.34s %-5s %12.1f %12.1f %8s %12.1f %12.1f %6.3f\n",
          cJSON_GetObjectItem (r, "name")->valuestring, cJSON_GetObjectItem (r, "set")->valuestring,
          cJSON_GetObjectItem (r, "predicted_exposed_us")->valuedouble,
          cJSON_GetObjectItem (r, "measured_exposed_us")->valuedouble,
          cJSON_IsTrue (cJSON_GetObjectItem (r, "exposed_within_bar")) ? "yes" : "no",
          cJSON_GetObjectItem (r, "predicted_step_us")->valuedouble,
          cJSON_GetObjectItem (r, "measured_step_us")->valuedouble,
          cJSON_GetObjectItem (r, "duration_rms_log")->valuedouble);
  const char *sets[] = { "fit", "judge" };
  for (int k = 0; k < 2; k++) {
    const cJSON *s = cJSON_GetObjectItem (rep, sets[k]);
    printf ("%s set: %d runs, loss %.4f, exposed within the bar %d, orders ranked right %d of %d\n",
            sets[k], cJSON_GetObjectItem (s, "runs")->valueint,
            cJSON_GetObjectItem (s, "loss")->valuedouble,
            cJSON_GetObjectItem (s, "exposed_within_bar")->valueint,
            cJSON_GetObjectItem (s, "order_pairs_ranked_right")->valueint,
            cJSON_GetObjectItem (s, "order_pairs")->valueint);
  }
  const int rc = out && !write_json (out, rep) ? 1 : 0;
  cJSON_Delete (rep);
  g_free (out);
  return rc;
}
