/* schedgraph-private.h: what the CLI's files share (schedgraph.c: options
 * and the pipeline; outputs.c: summary, report, trace, plan, writing). */
#pragma once

#include "bucket.h"
#include "codegen.h"
#include "decompose.h"
#include "estimate.h"
#include "graph.h"
#include "plan.h"
#include "schedule.h"

enum { EXIT_OK = 0, EXIT_INPUT = 1, EXIT_USAGE = 2 };

typedef struct {
  SgConfig cfg;
  const char *graph_path;
  const char *output, *report, *trace, *order, *emit_graph;
  const char *stop_after; /* run the pipeline up to this step, then summarise */
  bool costs, quiet;
  int32_t threads; /* --threads; 0: sg_pool_default_threads () */
} Cli;

#define MAX_TIMES 32

/* The state of one run of the pipeline. */
typedef struct {
  const Cli *cli;
  SgGraph *g;
  int32_t input_nodes; /* before bucket/ rewrote the graph */
  /* simulations: the --order one; the final order's (kept with the graph) */
  SgSimResult given;
  bool have_given;
  SgSimResult *final;
  /* report pieces whose node names must be resolved before a pass
   * renumbers the graph */
  cJSON *input_metrics, *input_rows, *given_metrics, *given_rows;
  GString *summary; /* stdout text, in pipeline order */
  SgPlan *plan;
  SgPassTime times[MAX_TIMES];
  size_t n_times;
  const char *error_file; /* the file an error is about; NULL = the graph */
} Run;

void run_clear (Run *r);

/* Appends the graph summary (nodes, collectives by kind and group, bytes
 * communicated, peak live bytes of the current order) to r->summary. */
void summary_graph (Run *r);
/* Appends sg_report_print_summary() of @sim under @label. */
void summary_sim (Run *r, const char *label, const SgSimResult *sim);
/* Appends the bucket statistics and the pass timings. */
void summary_finish (Run *r);

/* (transfer full) The usage error when an output would overwrite an input
 * (graph, --order, --cluster or --profile file) or another output, as
 * files (sg_same_file: any spelling or link), else NULL. */
char *outputs_clash (const Cli *cli);

/* Builds every requested output in memory, then writes them atomically;
 * on failure nothing new is left behind. Frees the graph (r->g) once the
 * texts that read it are made. */
bool write_outputs (Run *r, GError **error);
