/* builder.h: a tiny graph builder for unit tests (Mesa NIR's builder idea).
 *
 * Every call appends one node through sg_graph_append() (the loader's own
 * path) and aborts the test on error; shapes of results are derived.
 * Names are node names; dims are row-major contiguous.
 */
#pragma once

#include "graph.h"

/* A graph with @world ranks, seen from rank 0, and no groups. */
SgGraph *tb_new (int32_t world);
/* Adds group @name over @n ranks listed after it. */
void tb_group (SgGraph *g, const char *name, int n, ...);
/* A placeholder of @dtype ("bfloat16"...) with @ndim dims listed after it. */
SgNodeId tb_input (SgGraph *g, const char *name, const char *dtype, int ndim, ...);
/* aten.mm.default: [m,k] x [k,n] -> [m,n]. */
SgNodeId tb_mm (SgGraph *g, const char *name, const char *a, const char *b);
/* aten.t.default of a 2-d tensor (a view). */
SgNodeId tb_t (SgGraph *g, const char *name, const char *a);
/* A pointwise op (e.g. "aten.add.Tensor", "aten.silu.default") whose value
 * has @a's shape; @b may be NULL for unary ops. */
SgNodeId tb_pointwise (SgGraph *g, const char *name, const char *target, const char *a,
                       const char *b);
/* c10d functional collectives over group @group (size from the group). */
SgNodeId tb_all_gather (SgGraph *g, const char *name, const char *in, const char *group);
SgNodeId tb_reduce_scatter (SgGraph *g, const char *name, const char *in, const char *group);
SgNodeId tb_all_reduce (SgGraph *g, const char *name, const char *in, const char *group);
SgNodeId tb_wait (SgGraph *g, const char *name, const char *coll);
/* schedgraph.collective_permute of @in over @group: @pairs is the JSON list
 * of [source, target] group ranks ("[[0,1],[1,0]]"), @transport "nccl" or
 * "ce" (NULL: no kwarg). */
SgNodeId tb_permute (SgGraph *g, const char *name, const char *in, const char *group,
                     const char *pairs, const char *transport);
/* schedgraph.rank_roll of @in over @group (docs/ops.md). */
SgNodeId tb_rank_roll (SgGraph *g, const char *name, const char *in, const char *group,
                       int64_t shift, int64_t sign);
/* Sets the node's `cost_us` override. */
void tb_cost (SgGraph *g, SgNodeId id, double us);
/* The output node over @n values listed after it. */
SgNodeId tb_output (SgGraph *g, int n, ...);
/* (transfer full) Node @id's args and kwargs as compact JSON, "ARGS KWARGS"
 * (sg_node_args_json, references as {"node": NAME}). */
char *tb_args_text (const SgGraph *g, SgNodeId id);
/* Appends a raw node JSON (printf format). */
SgNodeId tb_node (SgGraph *g, const char *fmt, ...) G_GNUC_PRINTF (2, 3);
