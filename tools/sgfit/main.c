/* main.c: the sgfit command line (fit.h; docs/cost-model.md "Fitting"). */
#include <stdio.h>
#include <string.h>

#include "fit.h"

#define MAX_AXES 8

static int
usage (const char *msg)
{
  fprintf (stderr, "sgfit: %s\nUsage: sgfit MANIFEST.json [--axis FIELD=LO:HI:STEP]... "
                   "[--rounds N] [-o FIT.json] [--write-orders DIR]\n", msg);
  return 2;
}

int
main (int argc, char **argv)
{
  char **axis_text = NULL, *out = NULL, *orders = NULL;
  int rounds = 8;
  GOptionEntry entries[] = {
    { "axis", 0, 0, G_OPTION_ARG_STRING_ARRAY, &axis_text,
      "a cluster field to fit and its grid (repeatable; default: the pair scales with a "
      "contention profile, else the global factors)", "FIELD=LO:HI:STEP" },
    { "rounds", 0, 0, G_OPTION_ARG_INT, &rounds, "coordinate-descent passes, at most (8)", "N" },
    { "output", 'o', 0, G_OPTION_ARG_FILENAME, &out, "write the result JSON here", "FIT.json" },
    { "write-orders", 0, 0, G_OPTION_ARG_FILENAME, &orders,
      "write each run's order as DIR/NAME.order.json (schedgraph --order's format)", "DIR" },
    { NULL, 0, 0, 0, NULL, NULL, NULL },
  };
  GOptionContext *oc = g_option_context_new (
    "MANIFEST.json - fit the contention model to schedrun reports (fit set), score it on "
    "the judge set");
  g_option_context_add_main_entries (oc, entries, NULL);
  GError *error = NULL;
  const bool parsed = g_option_context_parse (oc, &argc, &argv, &error);
  g_option_context_free (oc);
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
  int rc = 0;
  if (out) {
    char *text = cJSON_Print (rep);
    GError *werr = NULL;
    if (!g_file_set_contents (out, text, -1, &werr)) {
      fprintf (stderr, "sgfit: %s\n", werr->message);
      g_error_free (werr);
      rc = 1;
    }
    cJSON_free (text);
  }
  cJSON_Delete (rep);
  g_free (out);
  return rc;
}
