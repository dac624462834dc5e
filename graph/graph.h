/* graph.h: schedgraph's IR, the only data structure shared by the passes.
 *
 * A graph mirrors one torch.fx graph of a training step (graph-format.md):
 * nodes are dense ids. Invariant between passes: id order is the current
 * program order and is topological (every input id < the user's id); a pass
 * that reorders calls sg_graph_permute(). Per-pass data are arrays indexed
 * by id; ties break on id; hash tables never decide output order.
 *
 * Ownership: the graph owns every string, array and side table it holds.
 */
#pragma once

#include <cjson/cJSON.h>
#include <glib.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "ops.h"

G_BEGIN_DECLS

#define SG_GRAPH_FORMAT "schedgraph.graph"
#define SG_GRAPH_VERSION 1
/* Tensors of more dimensions are rejected at load with the node named. */
#define SG_MAX_DIMS 12
/* Largest `sm_count` a node may ask for (no GPU has more SMs). */
#define SG_MAX_SM_COUNT 4096

typedef int32_t SgNodeId;
#define SG_NO_NODE ((SgNodeId)-1)

/* GError domain of graph/ (load, validate, mutate). */
#define SG_GRAPH_ERROR (sg_graph_error_quark ())
GQuark sg_graph_error_quark (void);
typedef enum {
  SG_GRAPH_ERROR_IO,      /* unreadable path, directory, empty file */
  SG_GRAPH_ERROR_PARSE,   /* malformed JSON, bad UTF-8, nesting */
  SG_GRAPH_ERROR_FORMAT,  /* wrong format/version, missing or mistyped fields */
  SG_GRAPH_ERROR_REF,     /* dangling/forward reference, duplicate name */
  SG_GRAPH_ERROR_CYCLE,   /* cycle, or an order that is not topological */
  SG_GRAPH_ERROR_GROUP,   /* unknown group, size mismatch */
  SG_GRAPH_ERROR_SHAPE,   /* negative, absurd or overflowing shapes */
  SG_GRAPH_ERROR_INVALID, /* any other broken rule (validator) */
} SgGraphError;

/* The fx node's `op`. */
typedef enum {
  SG_NODE_PLACEHOLDER,
  SG_NODE_GET_ATTR,
  SG_NODE_CALL,
  SG_NODE_OUTPUT,
} SgNodeOp;

/* Where a node's cost estimate came from (estimate/ fills it). */
typedef enum {
  SG_COST_NONE = 0, /* not estimated yet */
  SG_COST_FREE,     /* views, getitem, placeholders, waits: 0 us by definition */
  SG_COST_GRAPH,    /* the node's `cost_us` in the graph */
  SG_COST_PROFILE,  /* a measured profile entry (exact or interpolated) */
  SG_COST_MODEL,    /* the analytical model */
} SgCostSource;

const char *sg_cost_source_name (SgCostSource src); /* "none","free","graph","profile","model" */

/* Tensor metadata. Shape and stride live in the graph's dims pool:
 * dims[first .. first+ndim) is the shape, dims[first+ndim .. first+2*ndim)
 * the stride, in elements. */
typedef struct {
  int32_t ndim; /* -1: the value is not a tensor (or unknown) */
  SgDtype dtype;
  uint32_t first;
} SgMeta;

typedef struct {
  const char *name;        /* unique; (transfer none) owned by the graph */
  const char *target;      /* as in the input (str(node.target)) */
  const char *args_json;   /* compact JSON array; node refs are {"node": NAME} */
  const char *kwargs_json; /* compact JSON object */
  SgNodeOp op;
  SgOpKind kind;
  /* Data inputs: distinct referenced nodes, in order of first appearance in
   * args then kwargs: g->inputs[in_first .. in_first + n_in). */
  uint32_t in_first, n_in;
  SgMeta meta;
  /* Tuple values: g->tuple_metas[tuple_first .. + n_tuple); elements that
   * are not tensors have ndim -1. n_tuple == 0 for plain values. */
  uint32_t tuple_first, n_tuple;
  /* Collectives: index into g->groups, the group size the op states
   * (group_size argument, else the group's size) and the reduce op. */
  int32_t group;
  int32_t group_size;
  SgReduceOp reduce;
  int32_t getitem_index; /* getitem: the tuple index; otherwise -1 */
  double cost_us;        /* the graph's override; NAN when absent */
  /* Matmuls: the SM-count target of the GEMM (the node's `sm_count` key,
   * docs/graph-format.md; a pass may set it): run on that many SMs so that
   * a collective beside it is not held until it ends; 0 = every SM. */
  int32_t sm_count;
  double est_us;         /* estimate/: the node's cost in microseconds */
  SgCostSource est_src;
} SgNode;

typedef struct {
  char *name;      /* key in the graph's `groups` */
  int32_t *ranks;  /* the group as the graph's rank sees it, ascending */
  int32_t n_ranks;
  /* Every instance of this group across the world (SPMD: each rank is in
   * exactly one): partition[i * n_ranks + j], n_instances rows. From the
   * optional `partition` key (graph-format extension, docs/graph-format.md)
   * or inferred from ranks as a mesh dimension (contiguous block or stride). */
  int32_t *partition;
  int32_t n_instances;
} SgGroup;

typedef struct SgGraph {
  int32_t world_size;
  int32_t rank;
  SgNode *nodes;
  int32_t n_nodes, nodes_cap;
  SgGroup *groups; /* in the order they first appear in the file */
  int32_t n_groups;
  SgNodeId output; /* the single output node, or SG_NO_NODE while building */
  char *source;    /* path for messages, or "<builder>" */
  char *cluster_json; /* the graph's `cluster` object as compact JSON, or NULL */
  char *description;  /* optional top-level `description`, or NULL */

  /* pools */
  GStringChunk *strings;
  GArray *dims;        /* int64_t */
  GArray *inputs;      /* SgNodeId */
  GArray *tuple_metas; /* SgMeta */
  GHashTable *by_name; /* name -> GINT_TO_POINTER(id + 1); lookups only */

  /* derived, rebuilt on demand (NULL when stale) */
  uint32_t *user_first; /* n_nodes + 1 */
  SgNodeId *users;

  /* estimate/'s cost model, opaque here; freed with the graph */
  void *cost_model;
  GDestroyNotify cost_model_free;

  /* bucket/'s statistics of its last run, opaque here; freed with the graph */
  void *bucket_stats;
  GDestroyNotify bucket_stats_free;

  /* Implicit (non-data) ordering edges recorded by passes (schedule/,
   * bucket/): a GArray of SgImplicitEdge, NULL when none. Edges hold node
   * names (interned in @strings), so they survive sg_graph_permute().
   * schedule.h has the kinds and helpers; docs/scheduler.md the rules. */
  GArray *implicit_edges;
} SgGraph;

/* One implicit edge: @to must run after @from. @kind is an SgEdgeKind
 * (schedule.h). */
typedef struct {
  const char *from, *to;
  int32_t kind;
} SgImplicitEdge;

/* --- construction ------------------------------------------------------- */

/* (transfer full) An empty graph. */
SgGraph *sg_graph_new (int32_t world_size, int32_t rank);
void sg_graph_free (SgGraph *g);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (SgGraph, sg_graph_free)

/* Adds a group; ranks are copied and sorted. Returns its index, or -1 with
 * @error set for a duplicate name, an empty list or a rank outside the
 * world. @partition (n_instances rows of n ranks, or NULL to infer) is
 * checked to cover every rank exactly once and to contain @ranks. */
int32_t sg_graph_add_group (SgGraph *g, const char *name, const int32_t *ranks, int32_t n,
                            const int32_t *partition, int32_t n_instances, GError **error);
/* Index of the group named @name, or -1. */
int32_t sg_graph_find_group (const SgGraph *g, const char *name);
/* (transfer none) The instance of @group that contains @rank, n_ranks long. */
const int32_t *sg_group_instance_of (const SgGroup *group, int32_t rank);

/* Appends one node given as graph-format JSON (an element of `nodes`).
 * References must name existing nodes (any id: bucket/ appends nodes that
 * will be moved by sg_graph_permute()). Interns target and dtype, checks
 * the node's own fields (op, meta shapes, collective group/size, getitem
 * index) and sets @error naming the node and field on failure.
 * (transfer none) @node_obj. Returns the new id or SG_NO_NODE. */
SgNodeId sg_graph_append (SgGraph *g, const cJSON *node_obj, GError **error);
/* Same from a JSON text (tests, tools). */
SgNodeId sg_graph_append_json (SgGraph *g, const char *node_json, GError **error);

/* --- loading and checking (load.c, validate.c) --------------------------- */

/* (transfer full) Loads a graph file (graph-format.md). NULL with @error
 * naming the file position/node/field on any bad input. Runs the validator. */
SgGraph *sg_graph_load (const char *path, GError **error);
/* Same from memory; @name is used in messages. */
SgGraph *sg_graph_load_data (const char *data, size_t len, const char *name, GError **error);
/* sg_graph_load() with the final validator optional (the CLI runs it as its
 * own timed pass). Everything the loader checks itself is still checked. */
SgGraph *sg_graph_load_full (const char *path, bool validate, GError **error);

/* Checks every IR invariant and every rule of graph-format.md "Errors":
 * topological ids, references, one output last, groups and sizes, waits on
 * collectives, shapes. The message names the node and the field. */
bool sg_graph_validate (const SgGraph *g, GError **error);

/* (transfer full) @g in the graph format (docs/graph-format.md), nodes in id
 * order: what sg_graph_load() reads back into the same graph (write.c). */
cJSON *sg_graph_to_json (const SgGraph *g);

/* --- queries ------------------------------------------------------------ */

static inline const SgNodeId *
sg_node_inputs (const SgGraph *g, SgNodeId id, uint32_t *n)
{
  *n = g->nodes[id].n_in;
  return &g_array_index (g->inputs, SgNodeId, g->nodes[id].in_first);
}

static inline const int64_t *
sg_meta_shape (const SgGraph *g, const SgMeta *m)
{
  return &g_array_index (g->dims, int64_t, m->first);
}

static inline const int64_t *
sg_meta_stride (const SgGraph *g, const SgMeta *m)
{
  return &g_array_index (g->dims, int64_t, m->first + (uint32_t)m->ndim);
}

static inline const SgMeta *
sg_node_tuple_meta (const SgGraph *g, SgNodeId id, uint32_t i)
{
  return &g_array_index (g->tuple_metas, SgMeta, g->nodes[id].tuple_first + i);
}

/* Element count of a tensor meta (1 for a 0-d tensor, 0 for ndim -1). */
uint64_t sg_meta_numel (const SgGraph *g, const SgMeta *m);
/* Bytes a fresh contiguous tensor of this meta takes. */
uint64_t sg_meta_bytes (const SgGraph *g, const SgMeta *m);
/* Bytes the node's value takes when freshly allocated: its meta, or the sum
 * of its tuple elements; 0 for aliases (views, getitem, wait). */
uint64_t sg_node_alloc_bytes (const SgGraph *g, SgNodeId id);
/* Bytes a collective moves per rank, as the cost model and reports count
 * them: all_gather output, reduce_scatter input, all_reduce / all_to_all /
 * broadcast tensor. 0 for non-collectives. */
uint64_t sg_node_comm_bytes (const SgGraph *g, SgNodeId id);
/* True for kernels that hold every SM while they run (matmul and attention
 * with a cost and no SM-count target): a collective issued beside one
 * waits for it (the cost model's comm_start_wait, docs/cost-model.md). */
static inline bool
sg_node_holds_sms (const SgNode *n)
{
  SgOpClass c = sg_op_class (n->kind);
  return (c == SG_CLASS_MATMUL && n->sm_count == 0) || c == SG_CLASS_ATTENTION;
}

/* --- schedgraph's ring ops (permute.c, docs/ops.md) ---------------------- */

/* A collective_permute's arguments: over a group instance of n_ranks,
 * group rank r sends its input to target[r] (-1: sends nothing) and
 * receives its output from source[r] (-1: receives nothing, its output is
 * zeros). pairs[2 i], pairs[2 i + 1] are the n_pairs (source, target)
 * pairs in argument order. */
typedef struct {
  int32_t n_ranks, n_pairs;
  int32_t *target, *source, *pairs;
  SgTransport transport; /* kwargs.transport, default nccl */
} SgPermute;

/* Reads node @id's pairs and transport (the one reader of them) into @out,
 * checking that the pairs form a partial permutation of its group's ranks.
 * False with @error naming the node and the field. (transfer full) @out:
 * sg_permute_clear() it, also after a failure. */
bool sg_node_permute (const SgGraph *g, SgNodeId id, SgPermute *out, GError **error);
void sg_permute_clear (SgPermute *p);

/* A rank_roll's arguments: its group (index into g->groups), shift, sign
 * (+1 or -1); block arithmetic in sg_rank_roll_block (ops.h). */
typedef struct {
  int32_t group;
  int64_t shift, sign;
} SgRankRoll;

/* Reads and checks node @id's rank_roll arguments: a known group, an
 * integer shift, sign +-1, dim 0 of the input divisible by the group size,
 * output of the input's shape and dtype. False with @error naming the node. */
bool sg_node_rank_roll (const SgGraph *g, SgNodeId id, SgRankRoll *out, GError **error);

/* The collective a wait waits on (its first input), or SG_NO_NODE. */
SgNodeId sg_node_wait_target (const SgGraph *g, SgNodeId wait);

/* The graph format's `op` string of @op ("placeholder", "call_function", ...). */
const char *sg_node_op_name (SgNodeOp op);

/* Id of the node named @name, or SG_NO_NODE. */
SgNodeId sg_graph_lookup (const SgGraph *g, const char *name);

/* Users (consumers) of every node, CSR, rebuilt if stale. */
void sg_graph_fill_users (SgGraph *g);
static inline const SgNodeId *
sg_node_users (const SgGraph *g, SgNodeId id, uint32_t *n)
{
  *n = g->user_first[id + 1] - g->user_first[id];
  return &g->users[g->user_first[id]];
}

/* The node that owns @id's storage: itself for allocating nodes, the root of
 * the first input for aliases (views, getitem, wait). */
SgNodeId sg_node_storage_root (const SgGraph *g, SgNodeId id);

/* Peak live bytes when nodes run in @order (n_nodes ids; NULL = id order):
 * a storage is live from its producer until its last (transitive, through
 * aliases) use; placeholders are live from the start, outputs to the end. */
uint64_t sg_graph_peak_bytes (const SgGraph *g, const SgNodeId *order);

/* The same rule at positions @pos (id -> position, a permutation). Fills
 * @profile (n_nodes entries by position, or NULL) with the live bytes while
 * the node at that position runs and returns the peak. @roots
 * (sg_graph_storage_roots) and @alloc (sg_node_alloc_bytes of every node)
 * may be given precomputed, or NULL. */
uint64_t sg_graph_liveness (const SgGraph *g, const int32_t *pos, uint64_t *profile,
                            const SgNodeId *roots, const uint64_t *alloc);

/* Last position (by @pos) at which every storage root is used under that
 * rule; @last has n_nodes entries by id, meaningful for roots. */
void sg_graph_last_use (const SgGraph *g, const int32_t *pos, const SgNodeId *root,
                        int32_t *last);

/* Storage root of every node, aliases resolved (n_nodes), (transfer full). */
SgNodeId *sg_graph_storage_roots (const SgGraph *g);

/* --- mutation ----------------------------------------------------------- */

/* Renumbers nodes so that new id i is old id @order[i] (a permutation of all
 * ids). Fails, naming the first node whose input comes after it, when
 * @order is not topological; the graph is unchanged then. */
bool sg_graph_permute (SgGraph *g, const SgNodeId *order, GError **error);

/* Interns a string in the graph's chunk. (transfer none) */
const char *sg_graph_intern (SgGraph *g, const char *s);

/* --- configuration and the pass runner (pass.c) -------------------------- */

/* Every option of every pass; CLI flags map 1:1 onto these fields.
 * sg_config_init() sets the documented defaults. */
typedef struct {
  /* estimate/ */
  const char *cluster;      /* preset name or JSON file; NULL: the graph's, else h200-sxm */
  const char *profile;      /* measured-times JSON, or NULL */
  /* schedule/ */
  bool reorder;             /* false: keep the input order (--no-reorder) */
  uint64_t max_in_flight_bytes; /* per group; 0 = unlimited */
  double max_peak_increase;     /* allowed peak-memory growth over the input order, fraction */
  int32_t prefetch_limit;       /* max collectives started ahead per group; 0 = unlimited */
  /* bucket/ */
  bool bucket;              /* false: --no-bucket */
  uint64_t bucket_cap_bytes;
  /* runner */
  bool validate_between;    /* run the validator after every pass */
  const char *dump_pass;    /* dump the IR after this pass ("all" for every pass) */
  FILE *dump_file;          /* where dumps go; NULL = stderr */
} SgConfig;

void sg_config_init (SgConfig *cfg);

typedef bool (*SgPassFunc) (SgGraph *g, const SgConfig *cfg, GError **error);

typedef struct {
  const char *name; /* "estimate", "schedule", "bucket", ... */
  SgPassFunc run;
} SgPass;

typedef struct {
  const char *name;
  double ms;
} SgPassTime;

/* Runs @passes in order, timing each into @times (n_passes entries), running
 * the validator after each when cfg->validate_between, and dumping the IR
 * after the pass named cfg->dump_pass. Stops at the first failure, with the
 * pass named in @error. */
bool sg_pass_run (SgGraph *g, const SgConfig *cfg, const SgPass *passes, size_t n_passes,
                  SgPassTime *times, GError **error);

/* Writes a readable, diffable dump of the IR (one line per node). */
void sg_graph_dump (const SgGraph *g, FILE *out);

/* --- mutation for passes that add and remove nodes (mutate.c) ----------- */

/* Removes every node whose @keep entry (n_nodes entries) is false and
 * renumbers the rest densely in their current order. Fails, with the graph
 * unchanged, naming the node, when a kept node reads a removed one or the
 * output node is removed. Implicit edges touching removed nodes are dropped. */
bool sg_graph_compact (SgGraph *g, const bool *keep, GError **error);

/* (transfer full) A deep copy of @g (nodes, strings, pools, groups). The
 * cost model is shared, not owned: the copy must not outlive @g's model.
 * Implicit edges are copied; bucket_stats is not. */
SgGraph *sg_graph_copy (const SgGraph *g);

/* Keeps exactly the @n nodes listed in @order, renumbered in that order
 * (sg_graph_compact and sg_graph_permute in one pass). Fails, with the
 * graph unchanged and the node named, on a repeated or invalid id, a kept
 * node that reads a dropped one or comes before its input, or a dropped
 * output node. Implicit edges touching dropped nodes are dropped. */
bool sg_graph_select (SgGraph *g, const SgNodeId *order, int32_t n, GError **error);

/* Makes @user read new_inputs[i] wherever it read old_inputs[i], for @n
 * pairs at once: the {"node": ...} references in its args/kwargs, and its
 * inputs, kept distinct in order of first appearance. Args and kwargs are
 * parsed and written once (a user reading thousands of values, like the
 * output node, stays linear). */
void sg_graph_replace_inputs (SgGraph *g, SgNodeId user, const SgNodeId *old_inputs,
                              const SgNodeId *new_inputs, uint32_t n);

G_END_DECLS
