/* fit.h: fitting the contention model to runtime measurements (tools/sgfit).
 *
 * A manifest lists runs: a graph, the profile and cluster it was planned
 * with, the order that ran (a plan from schedgraph -o, or an order file of
 * node names) and schedrun's report of it (docs/report-format.md), each in
 * the fit set or the judge set. The fit searches cluster fields (the pair
 * scales of a contention profile, or the global factors) for the least
 * loss on the fit runs only, re-simulating each order with the candidate;
 * the judge runs are then scored with the fitted fields and never enter the
 * search (docs/cost-model.md "Fitting").
 */
#pragma once

#include <cjson/cJSON.h>
#include <glib.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

G_BEGIN_DECLS

#define SG_FIT_ERROR (sg_fit_error_quark ())
GQuark sg_fit_error_quark (void);
typedef enum {
  SG_FIT_ERROR_MANIFEST, /* unreadable or malformed manifest */
  SG_FIT_ERROR_RUN,      /* a run's graph, order, plan, profile or report */
  SG_FIT_ERROR_ARGS,     /* a bad axis */
} SgFitError;

typedef struct SgFit SgFit;

/* Loads @path (JSON: {"runs": [{"name", "graph", "profile"?, "cluster"?,
 * "plan" | "order", "report", "set": "fit" | "judge"}]}; paths relative to
 * the manifest's folder). NULL with @error naming the run and field. */
SgFit *sg_fit_load (const char *path, GError **error);
void sg_fit_free (SgFit *f);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (SgFit, sg_fit_free)

/* One searched cluster field: values lo, lo + step, ... <= hi. */
typedef struct {
  char field[48];
  double lo, hi, step;
} SgFitAxis;

/* The default axes: the pair scales when a fit run's profile has measured
 * pairs, else the global factors (docs/cost-model.md "Fitting"). Fills
 * @axes (at most 8), returns their count. */
int sg_fit_default_axes (const SgFit *f, SgFitAxis *axes);
/* Parses "field=lo:hi:step". */
bool sg_fit_parse_axis (const char *text, SgFitAxis *out, GError **error);

/* Loss of the cluster fields @values (one per axis) over the runs of @set
 * ("fit" or "judge"): per run, ((predicted - measured) exposed / max(25%
 * of measured, 200 us))^2 + (step error / 10%)^2 + the mean squared log
 * ratio of predicted to measured duration of its collectives of >= 1 MiB;
 * the mean over runs. */
bool sg_fit_loss (SgFit *f, const SgFitAxis *axes, const double *values, int n_axes,
                  const char *set, double *loss, GError **error);

/* The loss is not convex in the scales: the search first takes the best
 * point of the whole grid when it has at most this many points. */
#define SG_FIT_GRID_MAX 4096

/* The best point of the axes' whole grid (when it has at most
 * SG_FIT_GRID_MAX points) if better than @values, then coordinate descent
 * over the axes' grids from there (in: the start, out: the best), on the
 * fit set; at most @rounds passes. */
bool sg_fit_search (SgFit *f, const SgFitAxis *axes, double *values, int n_axes, int rounds,
                    double *loss, GError **error);

/* (transfer full) The report: {"axes", "fitted": {field: value}, "fit": {...},
 * "judge": {...}}, per run the predicted and measured exposed and step time,
 * their errors and whether the bar holds (exposed within 25% or
 * 200 us), and per graph whether the predicted order of exposed times
 * matches the measured one. */
cJSON *sg_fit_report (SgFit *f, const SgFitAxis *axes, const double *values, int n_axes,
                      GError **error);
/* Writes each run's order (rebuilt from its plan, or as read) to
 * @dir/NAME.order.json, an order file (JSON array of node names, the format
 * of schedgraph --order) named after the run (characters other than
 * letters, digits, '-' and '_' become '.'), so that a manifest can name
 * orders instead of plans. */
bool sg_fit_write_orders (SgFit *f, const char *dir, GError **error);

/* The default values of @axes: the cluster's own (of the first run). */
bool sg_fit_start (SgFit *f, const SgFitAxis *axes, double *values, int n_axes, GError **error);

/* Rank skew (skew.c, sgfit --skew; docs/cost-model.md "Rank skew"):
 * (transfer full) {"runs": [...], "profiles": [...]}: per schedrun report
 * (its by_rank, docs/runtime.md) each rank's step and compute time against
 * the fastest, and per collective the launch skew (latest minus earliest
 * launch over ranks, and the last rank), end skew and the spreads of its
 * duration, its stall and the compute before it; per profile each rank's
 * kernel times (us_by_rank, docs/profile-format.md) summed over the
 * kernels that have them, over the sum of their medians, per family and
 * for all, and the spread between ranks in percent. NULL with @error
 * (SG_FIT_ERROR_RUN) naming the file and field of the first bad one. */
cJSON *sg_skew_report (const char *const *reports, int n_reports, const char *const *profiles,
                       int n_profiles, GError **error);
/* Prints @skew (sg_skew_report's) as tables on @out. */
void sg_skew_print (FILE *out, const cJSON *skew);

G_END_DECLS
