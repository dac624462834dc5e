/* schedule.h: the exposure-analysis scheduler and the timeline simulator.
 *
 * The simulator is the single judge of hidden / partial / exposed and of
 * predicted step time, for any order: one compute stream, one comm stream
 * per group (NCCL serialises collectives inside a communicator), costs from
 * estimate/ including contention.
 */
#pragma once

#include "estimate.h"
#include "graph.h"

G_BEGIN_DECLS

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
} SgCollRow;

typedef struct {
  SgCollRow *rows; /* collectives in issue order */
  int32_t n_rows;
  int32_t hidden, partial, exposed;
  double step_us, compute_us, comm_us, exposed_us, lower_bound_us;
  uint64_t peak_bytes;
  /* per node start/end on its stream (n_nodes each), for traces */
  double *node_start, *node_end;
} SgSimResult;

/* Simulates @order (all node ids; NULL = id order) with the graph's cost
 * model (sg_estimate_costs must have run). Fills @out (clear it with
 * sg_sim_result_clear). False with @error for an order that is not a
 * topological order of the graph, naming the first offending node. */
bool sg_simulate (const SgGraph *g, const SgNodeId *order, SgSimResult *out, GError **error);
void sg_sim_result_clear (SgSimResult *r);

/* The scheduling pass: reorders the graph (sg_graph_permute) to minimise
 * exposed communication within cfg's memory limits; keeps id order when
 * !cfg->reorder. Deterministic. */
bool sg_schedule_reorder (SgGraph *g, const SgConfig *cfg, GError **error);

/* Reads a JSON array of node names (another tool's order) and returns ids
 * (transfer full), or NULL with @error naming the first name that is
 * unknown, missing, repeated, or placed before one of its inputs. */
SgNodeId *sg_order_load (const SgGraph *g, const char *path, GError **error);

G_END_DECLS
