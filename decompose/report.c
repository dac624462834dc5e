/* report.c: the decomposition pass's report section and summary lines
 * (docs/report-format.md "decompose", docs/decompose.md "Report").
 *
 * Every collective the pass looked at is one row, in graph order: its
 * kind of site, the choice (decomposed, or the reason it was left), the
 * form priced best (steps or chunks, transport, SM-count target), its
 * exposure in the scheduled undecomposed graph and the form's predicted
 * saving on the site; then the whole graph's predicted step and exposure
 * without and with the chosen rewrites. Fixed field order, us rounded to
 * 0.001: byte-identical for the same input.
 * Requires: sg_decompose_pass's statistics. Invalidates: nothing.
 */
#include "decompose-private.h"

#include <math.h>

static const char *const kind_names[] = {
  [SG_SITE_ALL_GATHER_MM] = "all_gather_mm",
  [SG_SITE_MM_REDUCE_SCATTER] = "mm_reduce_scatter",
  [SG_SITE_MM_ALL_REDUCE] = "mm_all_reduce",
};

const char *
sg_site_kind_name (SgSiteKind k)
{
  return (unsigned)k < G_N_ELEMENTS (kind_names) ? kind_names[k] : "?";
}

static const struct {
  const char *name, *text;
} reasons[SG_SITE_N_REASONS] = {
  [SG_SITE_DECOMPOSED] = { "decomposed", "decomposed" },
  [SG_SITE_NO_WAIT] = { "no_wait", "not exactly one user, its wait_tensor" },
  [SG_SITE_SMALL_GROUP] = { "small_group", "a group of one rank" },
  [SG_SITE_NO_ROWS] = { "no_rows", "no mm reads the gathered dim as its rows" },
  [SG_SITE_REDUCE_OP] = { "reduce_op", "a reduction other than sum" },
  [SG_SITE_PRODUCER] = { "producer", "the reduced tensor is not an mm or a sum of mms" },
  [SG_SITE_SHARED] = { "shared", "an mm or add of the reduced tensor has other users" },
  [SG_SITE_INDIVISIBLE] = { "indivisible", "the rows do not split into the chunks" },
  [SG_SITE_META] = { "meta", "shapes or dtypes disagree along the site" },
  [SG_SITE_OFF] = { "off", "off by the mode (--no-decompose, --exact, --decompose all-gather)" },
  [SG_SITE_NO_GAIN] = { "no_gain", "no form is predicted to save time on the site, or the "
                                    "sites together save less than the step's tie band" },
  [SG_SITE_GRAPH_LONGER] = { "graph_longer",
                             "the whole-graph simulation predicted no shorter step" },
  [SG_SITE_PEAK] = { "peak", "a shorter step, but a peak past --max-peak-increase over the "
                             "scheduled undecomposed graph's" },
};

const char *
sg_site_reason_name (SgSiteReason r)
{
  return (unsigned)r < SG_SITE_N_REASONS ? reasons[r].name : "?";
}

const char *
sg_site_reason_text (SgSiteReason r)
{
  return (unsigned)r < SG_SITE_N_REASONS ? reasons[r].text : "?";
}

static bool
is_site (SgSiteReason r)
{
  return r == SG_SITE_DECOMPOSED || r >= SG_SITE_OFF;
}

static cJSON *
site_row (const SgSiteInfo *s)
{
  cJSON *o = cJSON_CreateObject ();
  cJSON_AddStringToObject (o, "name", s->name);
  cJSON_AddStringToObject (o, "kind", sg_site_kind_name (s->kind));
  cJSON_AddStringToObject (o, "group", s->group);
  cJSON_AddStringToObject (o, "choice", sg_site_reason_name (s->reason));
  cJSON_AddNumberToObject (o, "mms", s->n_mm);
  cJSON_AddNumberToObject (o, "whole_users", s->n_whole);
  if (s->form.chunks > 0) {
    cJSON_AddNumberToObject (o, "chunks", s->form.chunks);
    cJSON_AddStringToObject (o, "transport", s->kind == SG_SITE_MM_ALL_REDUCE
                                                 ? "collective"
                                                 : sg_transport_name (s->form.transport));
    cJSON_AddNumberToObject (o, "sm_count", s->form.sm_count);
    if (s->n_whole > 0)
      cJSON_AddStringToObject (o, "whole", s->form.regather ? "regather" : "ring");
    if (s->kind == SG_SITE_MM_REDUCE_SCATTER)
      cJSON_AddStringToObject (o, "exchange", s->form.direct ? "direct" : "ring");
    sg_report_add_us (o, "exposed_us", s->exposed_us);
    sg_report_add_us (o, "gain_us", s->gain_us);
  } else if (isfinite (s->bound_us)) {
    sg_report_add_us (o, "bound_us", s->bound_us);
  }
  return o;
}

cJSON *
sg_decompose_report (const SgGraph *g)
{
  const SgDecomposeStats *st = sg_decompose_stats (g);
  cJSON *o = cJSON_CreateObject ();
  cJSON_AddBoolToObject (o, "enabled", st != NULL);
  if (!st)
    return o;
  cJSON_AddStringToObject (o, "mode", sg_decompose_mode_name (st->mode));
  cJSON_AddNumberToObject (o, "collectives", st->n_sites);
  cJSON_AddNumberToObject (o, "sites", st->candidates);
  cJSON_AddNumberToObject (o, "decomposed", st->decomposed);
  cJSON_AddNumberToObject (o, "confirm_rounds", st->confirm_rounds);
  cJSON_AddNumberToObject (o, "nodes_before", st->nodes_before);
  cJSON_AddNumberToObject (o, "nodes_after", st->nodes_after);
  if (st->judged) {
    cJSON_AddStringToObject (o, "order", st->scheduled ? "scheduled" : "input");
    sg_report_add_us (o, "step_before_us", st->step_before_us);
    sg_report_add_us (o, "step_after_us", st->step_after_us);
    sg_report_add_us (o, "exposed_before_us", st->exposed_before_us);
    sg_report_add_us (o, "exposed_after_us", st->exposed_after_us);
    cJSON_AddNumberToObject (o, "peak_before_bytes", (double)st->peak_before_bytes);
    cJSON_AddNumberToObject (o, "peak_after_bytes", (double)st->peak_after_bytes);
  }
  cJSON *rows = cJSON_AddArrayToObject (o, "rows");
  for (int32_t i = 0; i < st->n_sites; i++)
    cJSON_AddItemToArray (rows, site_row (&st->sites[i]));
  return o;
}

/* Indices of the sites: decomposed first, then priced, each largest
 * saving first (ties in graph order). */
static int
gain_cmp (const void *pa, const void *pb, void *ud)
{
  const SgDecomposeStats *st = ud;
  const int32_t a = *(const int32_t *)pa, b = *(const int32_t *)pb;
  const SgSiteInfo *sa = &st->sites[a], *sb = &st->sites[b];
  const int ra = (sa->reason != SG_SITE_DECOMPOSED) + (sa->form.chunks == 0);
  const int rb = (sb->reason != SG_SITE_DECOMPOSED) + (sb->form.chunks == 0);
  if (ra != rb)
    return ra - rb;
  const double ga = sa->gain_us, gb = sb->gain_us;
  if (ga != gb)
    return ga > gb ? -1 : 1;
  return a - b;
}

void
sg_decompose_summary (const SgGraph *g, GString *out)
{
  const SgDecomposeStats *st = sg_decompose_stats (g);
  if (!st || st->n_sites == 0)
    return;
  g_string_append_printf (out, "decompose (%s): %d collectives, %d sites, %d decomposed",
                          sg_decompose_mode_name (st->mode), st->n_sites, st->candidates,
                          st->decomposed);
  if (st->judged)
    g_string_append_printf (out, "; %s step %.3f -> %.3f us, exposed %.3f -> %.3f us",
                            st->scheduled ? "scheduled" : "input order", st->step_before_us,
                            st->step_after_us, st->exposed_before_us, st->exposed_after_us);
  g_string_append_c (out, '\n');
  int32_t count[SG_SITE_N_REASONS] = { 0 };
  g_autofree int32_t *idx = g_new (int32_t, (size_t)st->n_sites);
  int32_t m = 0;
  for (int32_t i = 0; i < st->n_sites; i++) {
    count[st->sites[i].reason]++;
    if (is_site (st->sites[i].reason))
      idx[m++] = i;
  }
  g_qsort_with_data (idx, m, sizeof *idx, gain_cmp, (gpointer)st);
  for (int32_t i = 0; i < MIN (m, 5); i++) {
    const SgSiteInfo *s = &st->sites[idx[i]];
    g_string_append_printf (out, "  %-12s %-32s %-17s group %-4s", sg_site_reason_name (s->reason),
                            s->name, sg_site_kind_name (s->kind), s->group);
    if (s->form.chunks > 0)
      g_string_append_printf (out, " %d %s %s%s sm %d exposed %.3f us gain %.3f us",
                              s->form.chunks,
                              s->kind == SG_SITE_MM_ALL_REDUCE ? "chunks" : "steps",
                              s->kind == SG_SITE_MM_ALL_REDUCE
                                  ? "collective"
                                  : sg_transport_name (s->form.transport),
                              s->form.regather && s->n_whole > 0 ? " regather"
                              : s->form.direct                     ? " direct"
                                                                   : "",
                              s->form.sm_count, s->exposed_us, s->gain_us);
    else if (isfinite (s->bound_us))
      g_string_append_printf (out, " not priced: bound %.3f us", s->bound_us);
    g_string_append_c (out, '\n');
  }
  bool any = false;
  for (int32_t r = 1; r < SG_SITE_N_REASONS; r++) {
    if (!count[r])
      continue;
    g_string_append_printf (out, "%s%s %d", any ? ", " : "  left or not sites: ",
                            sg_site_reason_name ((SgSiteReason)r), count[r]);
    any = true;
  }
  if (any)
    g_string_append_c (out, '\n');
}
