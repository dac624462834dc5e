/* skew.c: how far the ranks drift apart, from schedrun's per-rank data
 * (sgfit --skew; docs/cost-model.md "Rank skew").
 *
 * A report's by_rank (docs/runtime.md "Report") holds every rank's times
 * in the median step, each on its own clock from the step's start (the
 * ranks start together after a barrier). Per collective: the launch skew
 * (latest launch minus earliest, and which rank was last), the end skew,
 * the spread of the collective's duration over ranks (the early rank's
 * extra is waiting for its peers) and the spread of the compute stream's
 * busy time before the launch (what the ranks' compute rates accumulated).
 * Per rank: step and compute time against the fastest. A profile's
 * us_by_rank (docs/profile-format.md) gives each rank's kernel times: per
 * rank the sum over the kernels that have them against the sum of their
 * medians, and the spread of that ratio between ranks.
 * Nothing here enters the cost model: no skew term is fitted (the data to
 * fit one come from these numbers, on more than one graph).
 * Requires: reports of schedrun with by_rank; profiles with us_by_rank.
 * Invalidates: nothing.
 */
#include "fit.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sgfit-private.h"

static double
r3 (double us)
{
  return round (us * 1000.0) / 1000.0;
}

static int
cmp_double (const void *a, const void *b)
{
  const double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* The median of @n values (sorts @v). */
static double
median_of (double *v, int n)
{
  qsort (v, (size_t)n, sizeof *v, cmp_double);
  return n == 0 ? 0 : n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* @key of @obj: an array of @world finite numbers >= 0 into @out. */
static bool
read_by_rank (const cJSON *obj, const char *key, int world, double *out)
{
  const cJSON *a = cJSON_GetObjectItemCaseSensitive (obj, key), *x;
  if (!cJSON_IsArray (a) || cJSON_GetArraySize (a) != world)
    return false;
  int i = 0;
  cJSON_ArrayForEach (x, a)
  {
    if (!cJSON_IsNumber (x) || !isfinite (x->valuedouble) || x->valuedouble < 0)
      return false;
    out[i++] = x->valuedouble;
  }
  return true;
}

/* Max minus min of @v[@world], the index of the max in *@at. */
static double
spread (const double *v, int world, int *at)
{
  double lo = v[0], hi = v[0];
  int arg = 0;
  for (int r = 1; r < world; r++) {
    lo = MIN (lo, v[r]);
    if (v[r] > hi) {
      hi = v[r];
      arg = r;
    }
  }
  if (at)
    *at = arg;
  return hi - lo;
}

#define BAD(...)                                                                               \
  do {                                                                                         \
    g_set_error (error, SG_FIT_ERROR, SG_FIT_ERROR_RUN, __VA_ARGS__);                          \
    goto fail;                                                                                 \
  } while (0)

/* Per rank: step, compute, and compute against the fastest rank's. */
static bool
add_ranks (cJSON *run, const cJSON *b, int world, const char *path, GError **error)
{
  double *step = g_new (double, world), *comp = g_new (double, world);
  bool ok = false;
  if (!read_by_rank (b, "step_us", world, step) || !read_by_rank (b, "compute_us", world, comp))
    BAD ("report %s: by_rank: step_us and compute_us must hold %d times >= 0 (one per rank)",
         path, world);
  double fastest = comp[0];
  for (int r = 1; r < world; r++)
    fastest = MIN (fastest, comp[r]);
  cJSON *ranks = cJSON_AddArrayToObject (run, "ranks");
  for (int r = 0; r < world; r++) {
    cJSON *o = cJSON_CreateObject ();
    cJSON_AddNumberToObject (o, "rank", r);
    cJSON_AddNumberToObject (o, "step_us", r3 (step[r]));
    cJSON_AddNumberToObject (o, "compute_us", r3 (comp[r]));
    cJSON_AddNumberToObject (o, "compute_vs_fastest",
                             fastest > 0 ? round (1e4 * comp[r] / fastest) / 1e4 : 1.0);
    cJSON_AddItemToArray (ranks, o);
  }
  ok = true;
fail:
  g_free (step);
  g_free (comp);
  return ok;
}

/* One collective's row: the skews of its by_rank. */
static bool
add_collective (cJSON *out, const cJSON *row, int world, int index, const char *path,
                double *launch_skew, GError **error)
{
  static const char *const keys[] = { "launch_us", "end_us", "exposed_us", "compute_before_us" };
  double *v[4];
  for (int k = 0; k < 4; k++)
    v[k] = g_new (double, world);
  double *dur = g_new (double, world);
  bool ok = false;
  const cJSON *b = cJSON_GetObjectItemCaseSensitive (row, "by_rank");
  const cJSON *name = cJSON_GetObjectItemCaseSensitive (row, "name");
  const cJSON *kind = cJSON_GetObjectItemCaseSensitive (row, "kind");
  for (int k = 0; k < 4; k++)
    if (!read_by_rank (b, keys[k], world, v[k]))
      BAD ("report %s: collectives[%d].by_rank.%s: expected %d times >= 0 (one per rank)", path,
           index, keys[k], world);
  for (int r = 0; r < world; r++)
    dur[r] = v[1][r] - v[0][r];
  int last = 0;
  cJSON *o = cJSON_CreateObject ();
  cJSON_AddStringToObject (o, "name", cJSON_IsString (name) ? name->valuestring : "");
  cJSON_AddStringToObject (o, "kind", cJSON_IsString (kind) ? kind->valuestring : "");
  *launch_skew = spread (v[0], world, &last);
  cJSON_AddNumberToObject (o, "launch_skew_us", r3 (*launch_skew));
  cJSON_AddNumberToObject (o, "last_rank", last);
  cJSON_AddNumberToObject (o, "end_skew_us", r3 (spread (v[1], world, NULL)));
  cJSON_AddNumberToObject (o, "duration_spread_us", r3 (spread (dur, world, NULL)));
  cJSON_AddNumberToObject (o, "exposed_spread_us", r3 (spread (v[2], world, NULL)));
  cJSON_AddNumberToObject (o, "compute_before_spread_us", r3 (spread (v[3], world, NULL)));
  cJSON_AddItemToArray (out, o);
  ok = true;
fail:
  for (int k = 0; k < 4; k++)
    g_free (v[k]);
  g_free (dur);
  return ok;
}

/* One report: its ranks, its collectives' skews and their summary. */
static cJSON *
skew_of_report (const char *path, GError **error)
{
  cJSON *j = sg_fit_read_json (path, "report", error);
  if (!j)
    return NULL;
  cJSON *run = cJSON_CreateObject ();
  double *skews = NULL;
  const cJSON *ws = cJSON_GetObjectItemCaseSensitive (j, "world_size");
  const cJSON *b = cJSON_GetObjectItemCaseSensitive (j, "by_rank");
  const cJSON *rows = cJSON_GetObjectItemCaseSensitive (j, "collectives");
  const cJSON *it = cJSON_GetObjectItemCaseSensitive (b, "iteration");
  if (!cJSON_IsNumber (ws) || ws->valuedouble < 1 || ws->valuedouble > 1 << 20
      || !cJSON_IsArray (rows))
    BAD ("report %s: not a schedrun report (world_size, collectives)", path);
  if (!cJSON_IsObject (b) || !cJSON_IsNumber (it))
    BAD ("report %s: no by_rank (per-rank times): written by a schedrun older than issue 20's "
         "per-rank data", path);
  const int world = ws->valueint;
  const cJSON *graph = cJSON_GetObjectItemCaseSensitive (
    cJSON_GetObjectItemCaseSensitive (j, "plan"), "graph");
  cJSON_AddStringToObject (run, "report", path);
  cJSON_AddStringToObject (run, "graph", cJSON_IsString (graph) ? graph->valuestring : "");
  cJSON_AddNumberToObject (run, "world_size", world);
  cJSON_AddNumberToObject (run, "iteration", it->valueint);
  if (!add_ranks (run, b, world, path, error))
    goto fail;
  cJSON *colls = cJSON_AddArrayToObject (run, "collectives");
  const int nc = cJSON_GetArraySize (rows);
  skews = g_new (double, MAX (nc, 1));
  int c = 0, at = -1;
  const cJSON *row;
  cJSON_ArrayForEach (row, rows)
  {
    if (!add_collective (colls, row, world, c, path, &skews[c], error))
      goto fail;
    if (at < 0 || skews[c] > skews[at])
      at = c;
    c++;
  }
  cJSON *sum = cJSON_AddObjectToObject (run, "launch_skew_us");
  cJSON_AddNumberToObject (sum, "max", at >= 0 ? r3 (skews[at]) : 0);
  const cJSON *worst = at >= 0 ? cJSON_GetArrayItem (colls, at) : NULL;
  cJSON_AddStringToObject (sum, "max_at",
                           worst ? cJSON_GetObjectItem (worst, "name")->valuestring : "");
  const cJSON *tail = nc > 0 ? cJSON_GetArrayItem (colls, nc - 1) : NULL;
  cJSON_AddNumberToObject (sum, "last",
                           tail ? cJSON_GetObjectItem (tail, "launch_skew_us")->valuedouble : 0);
  cJSON_AddNumberToObject (sum, "median", r3 (median_of (skews, nc)));
  g_free (skews);
  cJSON_Delete (j);
  return run;
fail:
  g_free (skews);
  cJSON_Delete (run);
  cJSON_Delete (j);
  return NULL;
}

/* A profile's kernels with us_by_rank: per rank their summed times against
 * the sum of their medians, per family and for all. */
static cJSON *
rates_of_profile (const char *path, GError **error)
{
  static const char *const fams[] = { "gemm", "attention", "ops" };
  cJSON *j = sg_fit_read_json (path, "profile", error);
  if (!j)
    return NULL;
  cJSON *out = cJSON_CreateObject ();
  double *sum = NULL, *fam_sum = NULL, *v = NULL;
  const cJSON *ws = cJSON_GetObjectItemCaseSensitive (j, "world_size");
  if (!cJSON_IsNumber (ws) || ws->valuedouble < 1 || ws->valuedouble > 1 << 20)
    BAD ("profile %s: world_size: expected an integer >= 1", path);
  const int world = ws->valueint;
  sum = g_new0 (double, world);
  fam_sum = g_new0 (double, world);
  v = g_new (double, world);
  double med_total = 0;
  int n_kernels = 0;
  cJSON_AddStringToObject (out, "profile", path);
  cJSON_AddNumberToObject (out, "world_size", world);
  cJSON *by_fam = cJSON_AddObjectToObject (out, "families");
  for (int f = 0; f < 3; f++) {
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive (j, fams[f]), *e;
    double fam_med = 0;
    int n = 0, i = 0;
    memset (fam_sum, 0, sizeof (double) * (size_t)world);
    cJSON_ArrayForEach (e, arr)
    {
      const cJSON *us = cJSON_GetObjectItemCaseSensitive (e, "us");
      if (cJSON_GetObjectItemCaseSensitive (e, "us_by_rank")) {
        bool ok = read_by_rank (e, "us_by_rank", world, v) && cJSON_IsNumber (us)
                  && us->valuedouble > 0;
        for (int r = 0; ok && r < world; r++)
          ok = v[r] > 0;
        if (!ok)
          BAD ("profile %s: %s[%d].us_by_rank: expected %d times > 0 (one per rank) beside us",
               path, fams[f], i, world);
        for (int r = 0; r < world; r++)
          fam_sum[r] += v[r];
        fam_med += us->valuedouble;
        n++;
      }
      i++;
    }
    if (n == 0)
      continue;
    cJSON *o = cJSON_AddObjectToObject (by_fam, fams[f]);
    cJSON_AddNumberToObject (o, "kernels", n);
    cJSON *ratio = cJSON_AddArrayToObject (o, "ratio_by_rank");
    for (int r = 0; r < world; r++) {
      cJSON_AddItemToArray (ratio, cJSON_CreateNumber (round (1e4 * fam_sum[r] / fam_med) / 1e4));
      sum[r] += fam_sum[r];
    }
    med_total += fam_med;
    n_kernels += n;
  }
  if (n_kernels == 0)
    BAD ("profile %s: no gemm, attention or ops entry has us_by_rank (written by schedrun "
         "--profile since issue 20's per-rank data)", path);
  cJSON_AddNumberToObject (out, "kernels", n_kernels);
  cJSON *ratio = cJSON_AddArrayToObject (out, "ratio_by_rank");
  double lo = INFINITY, hi = 0;
  for (int r = 0; r < world; r++) {
    const double x = sum[r] / med_total;
    lo = MIN (lo, x);
    hi = MAX (hi, x);
    cJSON_AddItemToArray (ratio, cJSON_CreateNumber (round (1e4 * x) / 1e4));
  }
  cJSON_AddNumberToObject (out, "spread_pct", round (1e4 * (hi / lo - 1.0)) / 1e2);
  g_free (sum);
  g_free (fam_sum);
  g_free (v);
  cJSON_Delete (j);
  return out;
fail:
  g_free (sum);
  g_free (fam_sum);
  g_free (v);
  cJSON_Delete (out);
  cJSON_Delete (j);
  return NULL;
}

/* Appends @one(@files[i]) for each file to a new array @key of @root;
 * false with @error at the first that fails. */
static bool
add_each (cJSON *root, const char *key, const char *const *files, int n,
          cJSON *(*one) (const char *, GError **), GError **error)
{
  cJSON *arr = cJSON_AddArrayToObject (root, key);
  for (int i = 0; i < n; i++) {
    cJSON *x = one (files[i], error);
    if (!x)
      return false;
    cJSON_AddItemToArray (arr, x);
  }
  return true;
}

cJSON *
sg_skew_report (const char *const *reports, int n_reports, const char *const *profiles,
                int n_profiles, GError **error)
{
  g_return_val_if_fail (n_reports + n_profiles > 0, NULL);
  cJSON *root = cJSON_CreateObject ();
  if (!add_each (root, "runs", reports, n_reports, skew_of_report, error)
      || !add_each (root, "profiles", profiles, n_profiles, rates_of_profile, error)) {
    cJSON_Delete (root);
    return NULL;
  }
  return root;
}

/* One line: @label, @o's kernels and its ratio_by_rank. */
static void
print_ratios (FILE *out, const char *label, const cJSON *o)
{
  const cJSON *x;
  fprintf (out, "  %-10s (%4d)", label, cJSON_GetObjectItem (o, "kernels")->valueint);
  cJSON_ArrayForEach (x, cJSON_GetObjectItem (o, "ratio_by_rank"))
  fprintf (out, " %.4f", x->valuedouble);
  fputc ('\n', out);
}

void
sg_skew_print (FILE *out, const cJSON *skew)
{
#define NUM(o, k) cJSON_GetObjectItem ((o), (k))->valuedouble
#define STR(o, k) cJSON_GetObjectItem ((o), (k))->valuestring
  const cJSON *run, *x;
  cJSON_ArrayForEach (run, cJSON_GetObjectItem (skew, "runs"))
  {
    fprintf (out, "%s (graph %s, %d ranks, the median step: iteration %d)\n", STR (run, "report"),
             STR (run, "graph"), (int)NUM (run, "world_size"), (int)NUM (run, "iteration"));
    fprintf (out, "  %-5s %14s %14s %10s\n", "rank", "step us", "compute us", "vs fastest");
    cJSON_ArrayForEach (x, cJSON_GetObjectItem (run, "ranks"))
    fprintf (out, "  %-5d %14.1f %14.1f %10.4f\n", (int)NUM (x, "rank"), NUM (x, "step_us"),
             NUM (x, "compute_us"), NUM (x, "compute_vs_fastest"));
    fprintf (out, "  %-34s %-14s %12s %5s %12s %12s %12s %12s\n", "collective", "kind",
             "launch skew", "last", "end skew", "dur spread", "exp spread", "busy spread");
    cJSON_ArrayForEach (x, cJSON_GetObjectItem (run, "collectives"))
    fprintf (out, "  %-34.34s %-14s %12.1f %5d %12.1f %12.1f %12.1f %12.1f\n", STR (x, "name"),
             STR (x, "kind"), NUM (x, "launch_skew_us"), (int)NUM (x, "last_rank"),
             NUM (x, "end_skew_us"), NUM (x, "duration_spread_us"), NUM (x, "exposed_spread_us"),
             NUM (x, "compute_before_spread_us"));
    const cJSON *s = cJSON_GetObjectItem (run, "launch_skew_us");
    fprintf (out, "  launch skew: median %.1f us, max %.1f us (%s), last collective %.1f us\n",
             NUM (s, "median"), NUM (s, "max"), STR (s, "max_at"), NUM (s, "last"));
  }
  cJSON_ArrayForEach (run, cJSON_GetObjectItem (skew, "profiles"))
  {
    fprintf (out, "%s: %d kernels timed on each of %d ranks; each rank's time over the median\n",
             STR (run, "profile"), (int)NUM (run, "kernels"), (int)NUM (run, "world_size"));
    const cJSON *fam;
    cJSON_ArrayForEach (fam, cJSON_GetObjectItem (run, "families"))
    print_ratios (out, fam->string, fam);
    print_ratios (out, "all", run);
    fprintf (out, "  rate spread between ranks: %.2f%%\n", NUM (run, "spread_pct"));
  }
#undef NUM
#undef STR
}
