/* schedule.h: the exposure-analysis scheduler and the timeline simulator.
 *
 * The simulator is the single judge of hidden / partial / exposed and of
 * predicted step time, for any order: one compute stream, one comm stream
 * per group (NCCL serialises collectives inside a communicator), costs from
 * estimate/ including contention.
 */
#pragma once

#include <cjson/cJSON.h>
#include <stdio.h>

#include "estimate.h"
#include "graph.h"

G_BEGIN_DECLS

/* GError domain of schedule/. */
#define SG_SCHEDULE_ERROR (sg_schedule_error_quark ())
GQuark sg_schedule_error_quark (void);
typedef enum {
  SG_SCHEDULE_ERROR_ORDER, /* not a valid order: unknown/missing/repeated name, input after user */
  SG_SCHEDULE_ERROR_IO,    /* unreadable order file, malformed JSON */
  SG_SCHEDULE_ERROR_COST,  /* the estimate pass has not run */
  SG_SCHEDULE_ERROR_CYCLE, /* an implicit edge would close a cycle */
  SG_SCHEDULE_ERROR_CONFIG, /* an option out of range */
  SG_SCHEDULE_ERROR_LIMIT,  /* beyond the exact scheduler's size or search limits */
} SgScheduleError;

typedef enum {
  SG_EXPOSURE_HIDDEN,  /* 0 us exposed */
  SG_EXPOSURE_PARTIAL, /* some overlap, some exposed */
  SG_EXPOSURE_EXPOSED, /* no overlap at all */
} SgExposure;

const char *sg_exposure_name (SgExposure e); /* "hidden", "partial", "exposed" */

typedef struct {
  SgNodeId node;      /* the collective */
  SgNodeId wait;      /* its wait (SG_NO_NODE if none) */
  double est_us;      /* solo estimate */
  double start_us, end_us; /* on its comm stream, contention included */
  double exposed_us;  /* time the compute stream stalled at the wait for it */
  SgExposure status;
  SgNodeId hidden_by; /* the first compute node that overlapped it, or SG_NO_NODE */
  int32_t n_hiding;   /* compute nodes that overlapped it */
  SgNodeId last_hiding; /* the last compute node that overlapped it, or SG_NO_NODE */
  double overlap_us;  /* time it ran while the compute stream was busy */
  double issue_us;    /* compute-stream time at which it was issued */
} SgCollRow;

/* A lower bound on the step of any order of a graph, term by term
 * (bound.c, docs/scheduler.md "Lower bound"). Every term is a step no order
 * can beat under the simulator's model; lower_bound_us is their maximum. */
typedef struct {
  double compute_us;       /* compute work (solo) */
  double comm_stream_us;   /* the busiest group's comm work (solo) */
  double critical_path_us; /* longest data path with solo costs */
  double overlap_us;       /* compute and comm with contention: overlapping costs
                            * compute_slowdown, not overlapping costs the comm time */
  double window_us;        /* the best window: collectives that cannot start before
                            * `head` of compute nor end later than `tail` before the
                            * step's end, with the compute left between (0 until
                            * sg_lower_bound_refine) */
  double lower_bound_us;   /* the maximum of the above */
  bool refined;            /* window_us was computed */
} SgLowerBound;

typedef struct {
  SgCollRow *rows; /* collectives in issue order */
  int32_t n_rows;
  int32_t hidden, partial, exposed;
  double step_us, compute_us, comm_us, exposed_us, lower_bound_us;
  uint64_t peak_bytes;
  /* per node start/end on its stream (n_nodes each), for traces */
  double *node_start, *node_end;
  int32_t n_nodes;
  double compute_busy_us; /* compute-stream busy time, contention included */
  double critical_path_us; /* longest data path with solo costs */
  /* lower_bound_us by term: sg_simulate fills every term but window_us
   * (O(nodes + edges)); sg_lower_bound_refine adds it */
  SgLowerBound bound;
} SgSimResult;

/* Simulates @order (all node ids; NULL = id order) with the graph's cost
 * model (sg_estimate_costs must have run). Fills @out (clear it with
 * sg_sim_result_clear). False with @error for an order that is not a
 * topological order of the graph, naming the first offending node. */
bool sg_simulate (const SgGraph *g, const SgNodeId *order, SgSimResult *out, GError **error);
void sg_sim_result_clear (SgSimResult *r);
/* sg_simulate of the id order, the totals only (step, compute, comm,
 * exposure counts, exposed_us, peak_bytes, compute_busy_us): no rows, node
 * times or lower bound. For a search that judges many graphs (bucket/'s
 * trials). */
bool sg_simulate_totals (const SgGraph *g, SgSimResult *out, GError **error);

/* --- many graphs that differ little (judge.c) ------------------------------ */

/* What sg_simulate_totals gives of the id order that a judge gives too. */
typedef struct {
  double step_us, exposed_us, compute_us, comm_us;
  uint64_t peak_bytes;
} SgSimTotals;

/* Nodes a judge was given and those it did not have to run again; runs
 * that rejoined the previous one, and checkpoints where the states still
 * differed. */
typedef struct {
  int64_t runs, nodes, nodes_skipped, joins, differed;
} SgSimJudgeStats;

/* The totals of the id orders of graphs that each differ little from the
 * one judged before (bucket/'s trial graphs), equal bit for bit to
 * sg_simulate_totals': each graph is run from the previous run's last
 * checkpoint before the first node the two differ in, and wherever its
 * run rejoins the previous one over nodes whose events are the previous
 * graph's (the same state, the clock aside), the previous run is replayed
 * on the new clock instead of run, up to the next difference or the end
 * (judge.c). The graphs must share a cost model and
 * groups; the kernel slots and collective rates of trial graphs' base
 * nodes are kept by origin (sg_graph_trial_origins), so the base graph of
 * their rewrite must keep its nodes' outputs while @j lives. */
typedef struct SgSimJudge SgSimJudge;
SgSimJudge *sg_sim_judge_new (void);
void sg_sim_judge_free (SgSimJudge *j);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (SgSimJudge, sg_sim_judge_free)
/* The totals of @g's id order; @roots and @alloc as sg_graph_liveness
 * takes them (NULL: computed). False with @error when a node has no
 * finite cost. */
bool sg_sim_judge_totals (SgSimJudge *j, const SgGraph *g, const SgNodeId *roots,
                          const uint64_t *alloc, SgSimTotals *out, GError **error);
/* (transfer none) */
const SgSimJudgeStats *sg_sim_judge_stats (const SgSimJudge *j);
/* Lets @j use @pool's threads (NULL: none): a graph of @ranges_min nodes
 * or more has its events made in ranges of nodes and its peak computed
 * beside its run (the liveness itself in ranges from 4 threads on); a
 * smaller one is one task beside its peak. The totals are the same.
 * SG_SIM_JUDGE_RANGES_MIN is what the bucket pass gives: below it its
 * trials run several at once and ranges would be a few hundred nodes
 * each, all hand-offs and waits (no gain measured at 6.7K or 36K nodes
 * on 16 threads); at 1M nodes one trial runs at a time and they pay. */
#define SG_SIM_JUDGE_RANGES_MIN 65536
void sg_sim_judge_set_pool (SgSimJudge *j, SgPool *pool, int32_t ranges_min);

/* (transfer none) The simulation of @g's current order (sg_simulate with
 * the id order), made once and kept with the graph until it changes
 * (sg_graph_changed), so that passes and the driver hand it on instead of
 * simulating the same order again (schedule/kept.c). NULL with @error as
 * sg_simulate. */
SgSimResult *sg_graph_simulation (SgGraph *g, GError **error);
/* (transfer none) sg_graph_simulation with its window term
 * (sg_lower_bound_refine_pool): when none is kept, the simulation runs on
 * one of @pool's threads beside the term's work on the others. */
SgSimResult *sg_graph_simulation_refined (SgGraph *g, SgPool *pool, GError **error);
/* (transfer none) The simulation of @g's current order when one is kept
 * with the graph, else NULL (for readers of a const graph). */
const SgSimResult *sg_graph_simulation_kept (const SgGraph *g);
/* Keeps @r, the simulation of @g's current order, with the graph
 * (transfer full: *@r is emptied). */
void sg_graph_keep_simulation (SgGraph *g, SgSimResult *r);
/* Makes @r, the simulation of @order on a graph that sg_graph_permute
 * (@g, @order) has since renumbered, the simulation of @g's id order: ids
 * renumbered, the bound's terms made again (they are summed in id order),
 * the window term dropped. The bound's terms and the ids run side by side
 * on @pool (NULL: one after the other); the result does not depend on it. */
void sg_sim_result_renumber (const SgGraph *g, const SgNodeId *order, SgSimResult *r,
                             SgPool *pool);

/* Adds the window term to @r's lower bound (r->bound, r->lower_bound_us)
 * for the graph @r was simulated on (priced with the graph's cost model,
 * as sg_simulate does): per window, the collectives whose
 * inputs need at least `head` us of compute or path and whose results are
 * followed by at least `tail` us, priced with contention against the
 * compute that must run between. O((nodes + edges) + collectives x log) plus
 * the compute of every collective's ancestors and descendants, bit-parallel
 * within a budget (docs/scheduler.md). The term depends on the graph
 * alone: with a refined simulation kept with @g (sg_graph_simulation_refined)
 * its term is taken. Idempotent. */
void sg_lower_bound_refine (const SgGraph *g, SgSimResult *r);
/* sg_lower_bound_refine on @pool's threads (NULL: this one): the same
 * bound. */
void sg_lower_bound_refine_pool (const SgGraph *g, SgSimResult *r, SgPool *pool);

/* The scheduling pass: reorders the graph (sg_graph_permute) to minimise
 * the predicted step within cfg's memory limits; keeps id order when
 * !cfg->reorder. With cfg->bucket the polish is left to
 * sg_schedule_polish_pass after bucketing. Deterministic. */
bool sg_schedule_reorder (SgGraph *g, const SgConfig *cfg, GError **error);

/* The order sg_schedule_reorder gives @g (unpolished when bucketing
 * follows, as there), without touching @g: (transfer full) n_nodes ids, or
 * NULL with @error. */
SgNodeId *sg_schedule_order (const SgGraph *g, const SgConfig *cfg, GError **error);

/* The polish pass (polish.c) on the graph's current order after bucketing:
 * windows of it improved by exact search, the step never longer, the peak
 * within cfg's limit; re-records the hiding relation. Nothing unless
 * cfg->reorder and cfg->bucket (else the schedule pass polished) and not
 * cfg->exact. */
bool sg_schedule_polish_pass (SgGraph *g, const SgConfig *cfg, GError **error);

/* Reads a JSON array of node names (another tool's order) and returns ids
 * (transfer full), or NULL with @error naming the first name that is
 * unknown, missing, repeated, or placed before one of its inputs. */
SgNodeId *sg_order_load (const SgGraph *g, const char *path, GError **error);

/* --- pricing beside a simulated timeline (beside.c) ------------------------ */

/* The compute intervals of one simulated order (node, start, end, kernel
 * slot), for pricing a collective that is not in it without simulating
 * again: bucket/'s screen of a merge. */
typedef struct SgBeside SgBeside;
/* (transfer full) From @r (sg_simulate's node times of an order of @g);
 * @g must keep its cost model while the result lives. */
SgBeside *sg_beside_new (const SgGraph *g, const SgSimResult *r);
void sg_beside_free (SgBeside *b);
/* End of a collective like node @like (kind, group, transport) of @bytes
 * and solo @us that starts at @t0 and runs beside the timeline's compute:
 * at 1/comm_x of its pair with each kernel (the simulator's rates), at 1
 * between kernels and after the last. The order's own collectives, start
 * waits and the compute's slowdown are left out (the simulator judges what
 * passes). When the collective's rate does not depend on the kernel (no
 * contention profile), it is taken to run beside compute throughout:
 * t0 + us x that rate. */
double sg_beside_end (const SgBeside *b, SgNodeId like, uint64_t bytes, double t0, double us);

/* --- a fragment of an order (span.c) --------------------------------------- */

/* The simulator over a few nodes: a local judge for passes that weigh a
 * rewrite site by site (decompose/). */
typedef struct SgSpan SgSpan;
/* (transfer full) For @g (costed; it must outlive the span and not change
 * while it lives). O(nodes) once. */
SgSpan *sg_span_new (const SgGraph *g);
void sg_span_free (SgSpan *s);
/* Runs @nodes (@n ids of @g, a topological fragment) in that order on an
 * idle timeline with the graph's cost model, as sg_simulate would run
 * them, and returns the time until they and the collectives among them
 * have ended. A wait on a collective not in the fragment costs nothing.
 * Fragments do not see each other. */
double sg_span_run (SgSpan *s, const SgNodeId *nodes, int32_t n);

/* Simulates with explicit global contention factors for every pair instead
 * of the cost model's contention table (tests; the model's comm_start_wait
 * still applies to matmul/attention kernels); @cont NULL = the model's
 * table, measured pairs included, or none when no model is attached. */
bool sg_simulate_with (const SgGraph *g, const SgNodeId *order, const SgContention *cont,
                       SgSimResult *out, GError **error);

/* Checks that @order (n_nodes ids) is a permutation of the graph's ids in
 * which every node comes after its inputs and the output node comes last
 * (sg_graph_check_order); @error (SG_SCHEDULE_ERROR_ORDER) names the first
 * node at fault. */
bool sg_order_check (const SgGraph *g, const SgNodeId *order, GError **error);

/* Same as sg_order_load() from a parsed JSON array; (transfer none) @arr. */
SgNodeId *sg_order_from_json (const SgGraph *g, const cJSON *arr, const char *what,
                              GError **error);

/* Statistics of the last sg_schedule_reorder() run on a graph. */
typedef struct {
  int32_t variant;          /* index of the winning variant; -1 = input order kept */
  const char *variant_name; /* "input", "deadline-64", "pull-128/feed-16"... (static) */
  double input_exposed_us, scheduled_exposed_us;
  uint64_t input_peak_bytes, peak_limit_bytes, scheduled_peak_bytes;
  int32_t n_variants; /* variants simulated */
  /* of the winner: compute pulled into a stall, compute moved up because it
   * feeds a collective, waits placed early to free budget, collectives
   * issued past a limit because a consumer needed them */
  int32_t n_pulled, n_boosted, n_early_waits, n_forced;
  /* of the winner: deferred waits placed because their collective's input
   * no longer fit in memory */
  int32_t n_forced_waits;
  int32_t n_polished; /* windows the polish pass improved (polish.c) */
  /* the exact scheduler (cfg->exact): states it expanded, and the step of
   * the list scheduler's order it started from (0 otherwise) */
  int64_t exact_states;
  double list_step_us, step_us;
} SgScheduleStats;

/* Runs the scheduler without touching the graph: the chosen order
 * (transfer full, n_nodes ids) and its statistics. cfg may be NULL
 * (defaults). With cfg->exact, the exact scheduler (below). */
SgNodeId *sg_schedule_compute (const SgGraph *g, const SgConfig *cfg, SgScheduleStats *stats,
                               GError **error);

/* The exact scheduler's size limits: compute nodes with a cost > 0, and
 * collectives. */
#define SG_EXACT_MAX_COMPUTE 16
#define SG_EXACT_MAX_COLLECTIVES 6

/* An order of least predicted step (sg_simulate's step_us) for a small
 * graph, by branch and bound over partial orders (exact.c,
 * docs/scheduler.md "The exact scheduler"); no memory limit. Refuses
 * (SG_SCHEDULE_ERROR_LIMIT) a graph beyond SG_EXACT_MAX_COMPUTE or
 * SG_EXACT_MAX_COLLECTIVES, naming its counts and the limits, and a search
 * that outgrows its state budget. Deterministic. (transfer full) */
SgNodeId *sg_schedule_exact (const SgGraph *g, const SgConfig *cfg, SgScheduleStats *stats,
                             GError **error);

/* Documented defaults of the scheduler's limits (docs/scheduler.md). */
#define SG_SCHEDULE_DEFAULT_MAX_PEAK_INCREASE 0.05
#define SG_SCHEDULE_DEFAULT_IN_FLIGHT_BYTES 0 /* unlimited: memory decides */
#define SG_SCHEDULE_DEFAULT_PREFETCH_LIMIT 0  /* unlimited: memory decides */

/* --- augmented graph (aug.c) -------------------------------------------- */

/* Kinds of implicit edges (SgImplicitEdge.kind). */
typedef enum {
  SG_EDGE_HIDE_START = 1, /* collective -> the first compute that hides it */
  SG_EDGE_HIDE_WAIT,      /* the last compute that hides it -> the collective's wait */
  SG_EDGE_BUCKET,         /* a bucket member shares its siblings' dependencies */
  SG_EDGE_OTHER,
} SgEdgeKind;

const char *sg_edge_kind_name (SgEdgeKind k); /* "hide_start", "hide_wait", "bucket", "other" */

/* Appends an implicit edge to g->implicit_edges (by id). */
void sg_implicit_edge_add (SgGraph *g, SgNodeId from, SgNodeId to, SgEdgeKind kind);
/* Removes every implicit edge of @kind (0 = all). */
void sg_implicit_edges_clear (SgGraph *g, SgEdgeKind kind);

/* The augmented graph: data edges plus implicit edges, with a dynamic
 * topological order (Pearce-Kelly) used to prune reachability searches.
 * Memory O(nodes + edges); no per-node ancestor sets. */
typedef struct SgAug SgAug;

/* (transfer full) The augmented graph of @g over its current id order, with
 * g->implicit_edges loaded (edges with ids outside the graph, or that would
 * close a cycle, are skipped). O(nodes + edges). @g must outlive it and must not
 * be mutated while it lives. */
SgAug *sg_aug_new (const SgGraph *g);
void sg_aug_free (SgAug *a);

/* Adds @from -> @to. Refuses (false, SG_SCHEDULE_ERROR_CYCLE naming both
 * nodes) when @to already reaches @from. Cost: one reachability search,
 * plus, when the edge goes against the current topological order, a
 * Pearce-Kelly reorder of the affected region only. */
bool sg_aug_add_edge (SgAug *a, SgNodeId from, SgNodeId to, GError **error);

/* True when there is a path @from ->* @to (true for from == to). Two
 * depth-first searches, forward from @from and backward from @to, a node
 * each in turn, that only visit nodes whose topological position lies
 * between the two (visited stamps, no allocation): they stop when they
 * meet or one runs out, so the cost is about twice the smaller side's;
 * O(1) when @to comes first. */
bool sg_aug_reaches (SgAug *a, SgNodeId from, SgNodeId to);

/* (transfer none) The current topological order of the augmented graph
 * (n_nodes ids); id order until an edge against it is added. */
const SgNodeId *sg_aug_order (const SgAug *a);

/* Number of implicit edges currently held. */
int32_t sg_aug_n_implicit (const SgAug *a);

/* --- reports (report.c) -------------------------------------------------- */

/* (transfer full) The metrics object M of docs/report-format.md: collectives,
 * hidden, partial, exposed, exposed_us, comm_us, compute_us, step_us,
 * lower_bound_us, peak_bytes (us rounded to 0.001), lower_bound (the terms),
 * gap. */
cJSON *sg_report_metrics (const SgGraph *g, const SgSimResult *r);
/* step_us / lower_bound_us, rounded to 0.0001 (1 when the bound is 0). */
double sg_report_gap (const SgSimResult *r);
/* (transfer none) The name of the first term that reaches the bound:
 * "compute", "comm_stream", "critical_path", "overlap" or "window". */
const char *sg_lower_bound_binding (const SgLowerBound *b);
/* (transfer full) One row per collective, in issue order: name, kind,
 * group, bytes, estimated_us, exposed_us, status, source, start_us, end_us,
 * hidden_by (null when none). Names are resolved now, from @g's ids. */
cJSON *sg_report_rows (const SgGraph *g, const SgSimResult *r);
/* A readable multi-line summary headed by @label. */
void sg_report_print_summary (FILE *out, const char *label, const SgGraph *g,
                              const SgSimResult *r);
/* (transfer full) A Chrome-trace JSON object {"traceEvents": [...],
 * "displayTimeUnit": "ns"}: ph "X" events on pid 0, tid 0 = compute, tid 1+g
 * = group g's comm stream, plus thread_name metadata. Opens in
 * ui.perfetto.dev. */
cJSON *sg_trace_build (const SgGraph *g, const SgSimResult *r);
/* Rounds to 0.001 (the precision every report uses). */
double sg_report_round_us (double us);
/* Adds @us to @o under @key, rounded as sg_report_round_us() does. */
void sg_report_add_us (cJSON *o, const char *key, double us);

G_END_DECLS
