/* codegen.h: lowers the scheduled, bucketed graph to a stream program.
 *
 * The graph's id order is the final schedule. Output: an SgPlan (plan.h;
 * docs/plan-format.md) with one value per tensor (aliases share their
 * root's buffer), kernels on stream 0, each collective on its group's comm
 * stream bracketed by events, FREEs at lifetime ends, and every buffer
 * placed in one arena per rank by lifetime-aware interval packing.
 * Deterministic: the same graph and options give byte-identical plans.
 */
#pragma once

#include "graph.h"
#include "plan.h"
#include "schedule.h"

G_BEGIN_DECLS

#define SG_CODEGEN_ERROR (sg_codegen_error_quark ())
GQuark sg_codegen_error_quark (void);
typedef enum {
  SG_CODEGEN_ERROR_GRAPH, /* the graph cannot be lowered (names the node and field) */
  SG_CODEGEN_ERROR_PLAN,  /* the lowered plan broke a plan rule (a codegen bug) */
} SgCodegenError;

/* Memory-planning statistics of a plan (codegen fills them, tests and
 * reports print them). */
typedef struct {
  uint64_t arena_bytes;    /* the planned arena */
  uint64_t sum_bytes;      /* sum of all buffers (256-aligned): no reuse at all */
  uint64_t live_peak_bytes; /* max over instructions of the live buffers' bytes:
                             * no packing can beat it */
  uint64_t input_bytes;    /* buffers live for the whole step (placeholders) */
  int32_t n_buffers;
} SgMemStats;

/* Lowers @g (estimated, scheduled, bucketed: its id order is the program
 * order) to a plan. @pred is sg_simulate() of that order, or NULL (no
 * predictions: -1 everywhere). @graph_name and @options_text are copied
 * into the plan (the options text must be canonical: fixed order). @cfg
 * may be NULL; its pool (cfg->pool) runs the parts that divide: the same
 * plan whatever its threads. The plan passes sg_plan_validate().
 * (transfer full) *@out.
 * False with @error naming the node and field when the graph cannot be
 * lowered. */
bool sg_codegen_plan (const SgGraph *g, const SgConfig *cfg, const SgSimResult *pred,
                      const char *graph_name, const char *options_text, SgPlan **out,
                      GError **error);

/* The options that shape a plan, as canonical text (fixed order, one
 * "key=value" per option, space separated) for sg_codegen_plan's
 * @options_text; a cluster or profile file by its last path component.
 * (transfer full) g_free() it. */
char *sg_codegen_options_text (const SgConfig *cfg);

/* What `schedgraph -o PATH` does after the passes: simulates @g's order
 * (when estimate/ attached a cost model; else no predictions), lowers it
 * with sg_codegen_options_text(@cfg) and writes @path atomically (nothing
 * is left at @path on failure). @plan_out (may be NULL) receives the plan
 * (transfer full). */
bool sg_codegen_write (const SgGraph *g, const SgConfig *cfg, const char *graph_name,
                       const char *path, SgPlan **plan_out, GError **error);

/* @cfg's worker threads (cfg->pool; NULL @cfg or pool: none) as plan/'s
 * runner, for sg_plan_write_file_with and sg_plan_validate_with. */
void sg_codegen_plan_runner (const SgConfig *cfg, SgPlanRunner *out);

/* sg_plan_write_file with the text made and hashed on @cfg's threads: the
 * same bytes. */
bool sg_codegen_write_plan (SgPlan *plan, const SgConfig *cfg, const char *path,
                            GError **error);

/* Fills @stats from a plan's buffers (any plan, loaded or lowered). */
void sg_codegen_mem_stats (const SgPlan *plan, SgMemStats *stats);

G_END_DECLS
