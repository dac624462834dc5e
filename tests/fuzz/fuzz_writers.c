/* fuzz_writers.c: schedgraph's pipeline and writers on fuzzed graphs that
 * load: estimate, the input order's simulation, decompose (mode auto, or
 * all for inputs of odd size, so that every site found is rewritten),
 * schedule, bucket, polish, the final simulation, codegen, and every
 * output (report metrics and rows, summary, Chrome trace, decompose and
 * bucket reports, plan).
 *
 * Inputs that do not load are the loader's business (fuzz_graph) and are
 * skipped. Properties: a pass that fails says why (and never by refusing
 * an order it made); the IR is valid after every pass (the validator, as
 * --validate runs it); the plan codegen writes loads back through the plan
 * loader, validator and race checker; every JSON output prints and parses
 * back.
 */
#include <stdio.h>

#include "bucket.h"
#include "codegen.h"
#include "decompose.h"
#include "estimate.h"
#include "fuzz.h"
#include "plan.h"
#include "schedule.h"

static FILE *devnull;

/* Prints @o, parses the text back, frees both. */
static void
print_json (cJSON *o, const char *what)
{
  if (!o)
    fuzz_bug ("%s: no JSON built", what);
  char *text = cJSON_PrintUnformatted (o);
  cJSON *back = text ? cJSON_Parse (text) : NULL;
  if (!back)
    fuzz_bug ("%s: the printed JSON does not parse back", what);
  cJSON_Delete (back);
  cJSON_free (text);
  cJSON_Delete (o);
}

static void
valid_after (const SgGraph *g, const char *pass)
{
  GError *e = NULL;
  if (!sg_graph_validate (g, &e))
    fuzz_bug ("invalid IR after %s: %s", pass, e->message);
}

/* A pass that fails must say why (schedgraph then exits 1). An order
 * refused by graph/ (sg_graph_check_order) or a committed bucket rewrite
 * that closes a cycle is one the pass made itself: a bug, not a
 * rejection. */
static bool
ran (bool ok, GError *e, const char *pass)
{
  if (ok)
    return true;
  if (e && (g_error_matches (e, SG_GRAPH_ERROR, SG_GRAPH_ERROR_CYCLE)
            || g_error_matches (e, SG_BUCKET_ERROR, SG_BUCKET_ERROR_CYCLE)))
    fuzz_bug ("%s made an order that is not one: %s", pass, e->message);
  fuzz_rejected (e);
  return false;
}

static void
outputs (SgGraph *g, const SgConfig *cfg)
{
  GError *e = NULL;
  SgSimResult final;
  if (!ran (sg_simulate (g, NULL, &final, &e), e, "simulate"))
    return;
  sg_report_print_summary (devnull, "scheduled order", g, &final);
  print_json (sg_report_metrics (g, &final), "metrics");
  print_json (sg_report_rows (g, &final), "rows");
  print_json (sg_trace_build (g, &final), "trace");
  print_json (sg_bucket_report (g, NULL), "bucket report");
  print_json (sg_decompose_report (g), "decompose report");
  GString *summary = g_string_new (NULL);
  sg_decompose_summary (g, summary);
  g_string_free (summary, TRUE);
  SgPlan *plan = NULL;
  g_autofree char *opts = sg_codegen_options_text (cfg);
  if (ran (sg_codegen_plan (g, cfg, &final, "fuzz.json", opts, &plan, &e), e, "codegen")) {
    size_t len;
    g_autofree char *text = sg_plan_to_json (plan, &len);
    SgPlan *back = sg_plan_load_data (text, len, "plan.json", &e);
    if (!back)
      fuzz_bug ("the plan codegen wrote does not load: %s", e->message);
    sg_plan_free (back);
    sg_plan_free (plan);
  }
  sg_sim_result_clear (&final);
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  if (!devnull)
    devnull = fopen ("/dev/null", "w");
  GError *e = NULL;
  SgGraph *g = sg_graph_load_data ((const char *)data, size, "fuzz.json", &e);
  if (!g) {
    g_error_free (e);
    return 0;
  }
  SgConfig cfg;
  sg_config_init (&cfg);
  SgSimResult input;
  if (ran (sg_estimate_costs (g, &cfg, &e), e, "estimate")
      && ran (sg_simulate (g, NULL, &input, &e), e, "simulate-input")) {
    sg_report_print_summary (devnull, "input order", g, &input);
    print_json (sg_report_metrics (g, &input), "input metrics");
    print_json (sg_report_rows (g, &input), "input rows");
    sg_sim_result_clear (&input);
    cfg.decompose = size % 2 ? SG_DECOMPOSE_ALL : SG_DECOMPOSE_AUTO;
    if (ran (sg_decompose_pass (g, &cfg, &e), e, "decompose")) {
      valid_after (g, "decompose");
      if (ran (sg_schedule_reorder (g, &cfg, &e), e, "schedule")) {
        valid_after (g, "schedule");
        if (ran (sg_bucket_pass (g, &cfg, &e), e, "bucket")) {
          valid_after (g, "bucket");
          if (ran (sg_schedule_polish_pass (g, &cfg, &e), e, "polish")) {
            valid_after (g, "polish");
            outputs (g, &cfg);
          }
        }
      }
    }
  }
  sg_graph_free (g);
  return 0;
}
