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

/* Typed arguments. Every node's args and kwargs are parsed once, when the
 * node enters the IR, into values in the graph's args pool (docs/ir.md):
 *   SG_ARG_NONE    JSON null (Python None)
 *   SG_ARG_BOOL    .b
 *   SG_ARG_INT     .i: a JSON number with an integral value in int64 range
 *   SG_ARG_FLOAT   .f: any other JSON number
 *   SG_ARG_STR     .s: interned in the graph's strings
 *   SG_ARG_DTYPE, SG_ARG_DEVICE, SG_ARG_LAYOUT, SG_ARG_MEMORY_FORMAT:
 *                  a string at a keyword of that name (dtype=, device=,
 *                  layout=, memory_format=) that names one; .s keeps the
 *                  spelling, .tag the SgDtype / SgDeviceType / SgLayout /
 *                  SgMemoryFormat, .n the device index (-1: none)
 *   SG_ARG_NODE    a node reference {"node": NAME}: .input is the index of
 *                  the referenced node in the owner's inputs (so arguments
 *                  never hold node ids and survive every renumbering); read
 *                  it with sg_arg_node()
 *   SG_ARG_LIST    .n items at g->args[.first ..]
 *   SG_ARG_DICT    a JSON object that is not a node reference: .n (key, value)
 *                  pairs, 2 .n entries at g->args[.first ..], keys SG_ARG_STR
 * In an SgNodeSpec (the rewrite API) an SG_ARG_NODE holds the node id
 * itself (.ref, made by sg_arg_ref()); the graph stores the input index. */
typedef enum {
  SG_ARG_NONE = 0,
  SG_ARG_BOOL,
  SG_ARG_INT,
  SG_ARG_FLOAT,
  SG_ARG_STR,
  SG_ARG_DTYPE,
  SG_ARG_DEVICE,
  SG_ARG_LAYOUT,
  SG_ARG_MEMORY_FORMAT,
  SG_ARG_NODE,
  SG_ARG_LIST,
  SG_ARG_DICT,
} SgArgType;

typedef struct {
  uint8_t type; /* SgArgType */
  uint8_t tag;  /* enum-typed strings: the enum value */
  uint16_t reserved;
  uint32_t n; /* LIST: items; DICT: pairs; DEVICE: index (as int32_t) */
  union {
    bool b;
    int64_t i;
    double f;
    const char *s;
    uint32_t input; /* NODE in the graph: index into the owner's inputs */
    SgNodeId ref;   /* NODE in an SgNodeSpec: the node id */
    uint32_t first; /* LIST, DICT: first entry in g->args */
  };
} SgArg;

typedef struct {
  const char *name;        /* unique; (transfer none) owned by the graph */
  const char *target;      /* as in the input (str(node.target)) */
  SgNodeOp op;
  SgOpKind kind;
  /* Data inputs: distinct referenced nodes, in order of first appearance in
   * args then kwargs: g->inputs[in_first .. in_first + n_in). */
  uint32_t in_first, n_in;
  /* Positional arguments: g->args[args_first .. + n_args). Keyword
   * arguments: n_kwargs (key, value) pairs, g->args[kwargs_first .. + 2
   * n_kwargs), keys SG_ARG_STR, in input order. */
  uint32_t args_first, n_args;
  uint32_t kwargs_first, n_kwargs;
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
  /* Matmuls: the SM-count target of the GEMM (the node's `sm_count` key,
   * docs/graph-format.md; a pass may set it): run on that many SMs so that
   * a collective beside it is not held until it ends; 0 = every SM.
   * (Here, between 4-byte fields: no padding before the doubles.) */
  int32_t sm_count;
  double cost_us;        /* the graph's override; NAN when absent */
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
  GArray *args;        /* SgArg: every node's args and kwargs */
  /* name -> GINT_TO_POINTER(id + 1); lookups only. NULL while not built:
   * the loader does not build it, reorders and rewrites drop it, the next
   * lookup builds it again (a million names are 32 MB, and most passes
   * look none up). */
  GHashTable *by_name;
  /* The loader's table of the nodes' names (graph/names.c), handed on so
   * that the validator does not build it again; NULL when not there. It
   * holds ids: dropped with by_name whenever the nodes move or change. */
  struct SgNameTable *name_table;

  /* derived, rebuilt on demand (NULL when stale) */
  uint32_t *user_first; /* n_nodes + 1 */
  SgNodeId *users;

  /* estimate/'s cost model, opaque here; freed with the graph */
  void *cost_model;
  GDestroyNotify cost_model_free;

  /* bucket/'s statistics of its last run, opaque here; freed with the graph */
  void *bucket_stats;
  GDestroyNotify bucket_stats_free;

  /* decompose/'s sites and choices of its last run, opaque here; freed
   * with the graph */
  void *decompose_stats;
  GDestroyNotify decompose_stats_free;

  /* An analysis of the graph as it is now, kept for the next passes
   * (sg_graph_keep: schedule/'s simulation of the current order); dropped
   * by sg_graph_changed() */
  void *kept;
  const struct SgKeptClass *kept_class;

  /* Implicit (non-data) ordering edges recorded by passes (schedule/,
   * bucket/): a GArray of SgImplicitEdge, NULL when none. Edges hold node
   * ids; sg_graph_permute(), _compact(), _select() and the rewrite API
   * renumber them (and drop those whose ends are removed).
   * schedule.h has the kinds and helpers; docs/scheduler.md the rules. */
  GArray *implicit_edges;

  /* A trial graph of the rewrite API shares the pools, strings and groups
   * of the graph it was made from; NULL for graphs that own theirs. Its
   * nodes' ids in the rewrite (sg_graph_trial_origins), n_nodes. */
  struct SgRewrite *trial_of;
  SgNodeId *trial_origin;
  /* A fork (sg_rewrite_fork) of this graph, whose arrays it borrows but
   * for its pools and strings; NULL for other graphs. */
  const struct SgGraph *fork_of;
} SgGraph;

/* One implicit edge: @to must run after @from. @kind is an SgEdgeKind
 * (schedule.h). */
typedef struct {
  SgNodeId from, to;
  int32_t kind;
} SgImplicitEdge;

/* What an analysis kept with the graph is (sg_graph_keep). */
typedef struct SgKeptClass {
  const char *name; /* for messages: "simulation" */
  GDestroyNotify free;
  /* Does @data still describe @g? false with @error naming what differs.
   * The pass runner asks after every pass when it validates: a stale
   * analysis is a bug of the pass that changed the graph without
   * sg_graph_changed(). */
  bool (*check) (const SgGraph *g, gconstpointer data, GError **error);
} SgKeptClass;

/* Keeps @data (transfer full), an analysis of @g as it is now, until the
 * graph changes; replaces the one kept before. */
void sg_graph_keep (SgGraph *g, gpointer data, const SgKeptClass *cls);
/* (transfer none) The analysis of class @cls kept with @g, or NULL. */
gpointer sg_graph_kept (const SgGraph *g, const SgKeptClass *cls);
/* Drops what is derived from the graph (users, the kept analysis): every
 * change of nodes, their order, inputs or costs calls it. The mutation
 * functions of graph/ do; a pass that writes node fields itself (estimate/'s
 * costs) calls it after. */
void sg_graph_changed (SgGraph *g);

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

/* Worker threads (pool.c, "worker threads" below). */
typedef struct SgPool SgPool;

/* (transfer full) Loads a graph file (graph-format.md). NULL with @error
 * naming the file position/node/field on any bad input. Runs the validator. */
SgGraph *sg_graph_load (const char *path, GError **error);
/* Same from memory; @name is used in messages. */
SgGraph *sg_graph_load_data (const char *data, size_t len, const char *name, GError **error);
/* sg_graph_load() with the final validator optional (the CLI runs it as its
 * own timed pass; everything the loader checks itself is still checked),
 * the `nodes` list read (and the validator run) on @pool's threads (NULL:
 * the calling thread alone). The graph, and the message on bad input, are
 * the same whatever @pool. */
SgGraph *sg_graph_load_with (const char *path, bool validate, SgPool *pool,
                             GError **error);

/* Checks every IR invariant and every rule of graph-format.md "Errors":
 * topological ids, references, one output last, groups and sizes, waits on
 * collectives, shapes. The message names the node and the field. */
bool sg_graph_validate (const SgGraph *g, GError **error);
/* sg_graph_validate() on @pool's threads (NULL: the calling thread alone):
 * the same verdict and message (the first failing node in id order). */
bool sg_graph_validate_with (const SgGraph *g, SgPool *pool, GError **error);

/* --- arguments (args.c) --------------------------------------------------- */

/* (transfer none) Positional argument @pos of node @id, or NULL when the
 * node has fewer. */
static inline const SgArg *
sg_node_arg (const SgGraph *g, SgNodeId id, uint32_t pos)
{
  const SgNode *n = &g->nodes[id];
  return pos < n->n_args ? &g_array_index (g->args, SgArg, n->args_first + pos) : NULL;
}

/* (transfer none) Keyword argument @key of node @id, or NULL. */
const SgArg *sg_node_kwarg (const SgGraph *g, SgNodeId id, const char *key);

/* The kwarg that marks a collective as one chunk of a decomposed
 * collective matmul (decompose/: the chunked all_reduce), naming the
 * site's original collective; the bucket pass leaves such collectives
 * apart (docs/bucketing.md). */
#define SG_CHUNK_KWARG "schedgraph_chunk"

/* (transfer none) The argument for parameter @p of node @id's op: the
 * keyword argument of that name when given, else the positional one where
 * the op table puts it (sg_op_param_pos); NULL when neither is there. */
const SgArg *sg_node_param (const SgGraph *g, SgNodeId id, SgParam p);

/* (transfer none) The items of a LIST (@n of them), or of a DICT (2 @n
 * entries, key then value). NULL with *n = 0 for other types. */
static inline const SgArg *
sg_arg_items (const SgGraph *g, const SgArg *a, uint32_t *n)
{
  if (!a || (a->type != SG_ARG_LIST && a->type != SG_ARG_DICT) || a->n == 0) {
    *n = 0;
    return NULL;
  }
  *n = a->n;
  return &g_array_index (g->args, SgArg, a->first);
}

/* The node that @a (an argument of node @owner) references, or SG_NO_NODE
 * when @a is NULL or not a node reference. */
static inline SgNodeId
sg_arg_node (const SgGraph *g, SgNodeId owner, const SgArg *a)
{
  if (!a || a->type != SG_ARG_NODE)
    return SG_NO_NODE;
  return g_array_index (g->inputs, SgNodeId, g->nodes[owner].in_first + a->input);
}

/* The node that parameter @p of node @id references, or SG_NO_NODE. */
static inline SgNodeId
sg_node_param_node (const SgGraph *g, SgNodeId id, SgParam p)
{
  return sg_arg_node (g, id, sg_node_param (g, id, p));
}

/* (transfer none) The tensor meta of that node, or NULL when there is no
 * such reference or its value is not a tensor (ndim -1). */
const SgMeta *sg_node_param_meta (const SgGraph *g, SgNodeId id, SgParam p);

/* Scalar readers: true with *out set when @a has that type (an INT reads
 * as a float too); false for NULL and other types. */
bool sg_arg_int (const SgArg *a, int64_t *out);
bool sg_arg_float (const SgArg *a, double *out);
bool sg_arg_bool (const SgArg *a, bool *out);
/* The text of a STR or an enum-typed string; NULL for other types. */
const char *sg_arg_str (const SgArg *a);
/* True for an absent argument or None. */
static inline bool
sg_arg_is_none (const SgArg *a)
{
  return !a || a->type == SG_ARG_NONE;
}

/* Builds a node reference for an SgNodeSpec (and the other spec values;
 * strings and lists come from sg_rewrite_str / sg_rewrite_list). */
static inline SgArg
sg_arg_ref (SgNodeId id)
{
  SgArg a = { .type = SG_ARG_NODE };
  a.ref = id;
  return a;
}
static inline SgArg
sg_arg_i (int64_t v)
{
  SgArg a = { .type = SG_ARG_INT };
  a.i = v;
  return a;
}
static inline SgArg
sg_arg_f (double v)
{
  SgArg a = { .type = SG_ARG_FLOAT };
  a.f = v;
  return a;
}
static inline SgArg
sg_arg_b (bool v)
{
  SgArg a = { .type = SG_ARG_BOOL };
  a.b = v;
  return a;
}

/* Makes the JSON of a node reference when arguments are written out:
 * {"node": NAME} by default (@ref NULL), {"value": ID} in plans. Returns a
 * new cJSON item (transfer full). */
typedef cJSON *(*SgArgRefJson) (const SgGraph *g, SgNodeId ref, gpointer user);

/* (transfer full) Node @id's args as a JSON array (@kwargs false) or its
 * kwargs as a JSON object (@kwargs true), node references written by @ref
 * (NULL: {"node": NAME}). Numbers, strings, nesting and key order are
 * those of the input, so printing this gives the input's compact text.
 * This is where arguments go back to JSON (plans, tools); nothing parses
 * argument JSON after load. */
cJSON *sg_node_args_json (const SgGraph *g, SgNodeId id, bool kwargs, SgArgRefJson ref,
                          gpointer user);

/* (transfer full) @g in the graph format (docs/graph-format.md), nodes in id
 * order: what sg_graph_load() reads back into the same graph (write.c). */
cJSON *sg_graph_to_json (const SgGraph *g);

/* --- queries ------------------------------------------------------------ */

/* (transfer none) The node's inputs, *@n of them. A node without inputs
 * gets an empty list that is not NULL, and no arithmetic on the pool: the
 * pool has no storage before the first input (NULL + 0 is undefined). */
static inline const SgNodeId *
sg_node_inputs (const SgGraph *g, SgNodeId id, uint32_t *n)
{
  static const SgNodeId none[1] = { SG_NO_NODE };
  *n = g->nodes[id].n_in;
  return *n ? &g_array_index (g->inputs, SgNodeId, g->nodes[id].in_first) : none;
}

/* The extents and strides of @m, ndim of each. A 0-d (or unknown) meta
 * has none and points at no pool entry: the pool of a graph of scalars is
 * empty and has no storage to point into. */
static inline const int64_t *
sg_meta_shape (const SgGraph *g, const SgMeta *m)
{
  static const int64_t none[1] = { 0 };
  return m->ndim > 0 ? &g_array_index (g->dims, int64_t, m->first) : none;
}

static inline const int64_t *
sg_meta_stride (const SgGraph *g, const SgMeta *m)
{
  return sg_meta_shape (g, m) + (m->ndim > 0 ? m->ndim : 0);
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
 * broadcast tensor; a coalesced collective's members summed. 0 for
 * non-collectives. */
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

/* The first input of @id when it is a node of @kind, else SG_NO_NODE. */
static inline SgNodeId
sg_node_first_input_if (const SgGraph *g, SgNodeId id, SgOpKind kind)
{
  const SgNode *n = &g->nodes[id];
  return n->kind == kind && n->n_in ? g_array_index (g->inputs, SgNodeId, n->in_first)
                                    : SG_NO_NODE;
}

/* The coalesced collective whose result element getitem @id reads, or
 * SG_NO_NODE. */
static inline SgNodeId
sg_node_coalesced_of (const SgGraph *g, SgNodeId id)
{
  SgNodeId src = sg_node_first_input_if (g, id, SG_OP_GETITEM);
  return src != SG_NO_NODE && sg_op_is_coalesced (g->nodes[src].kind) ? src : SG_NO_NODE;
}

/* The collective a wait waits on: its first input, or the coalesced
 * collective whose element (a getitem) it waits on; SG_NO_NODE for a node
 * that is not a wait. Several waits share one coalesced collective, which
 * ends as a whole (one NCCL group). */
static inline SgNodeId
sg_node_wait_target (const SgGraph *g, SgNodeId wait)
{
  SgNodeId t = sg_node_first_input_if (g, wait, SG_OP_WAIT);
  SgNodeId c = t != SG_NO_NODE ? sg_node_coalesced_of (g, t) : SG_NO_NODE;
  return c != SG_NO_NODE ? c : t;
}

/* --- collectives and their members (graph.c) ------------------------------ */

/* A collective has one member (itself) or, when coalesced
 * (all_gather_into_tensor_coalesced ...: one call over a list of tensors,
 * docs/graph-format.md), one member per item of its inputs list, each with
 * its own input tensor and its own result (element i of its tuple), of
 * kind sg_op_member_kind(). */

/* Members of collective @id; 0 for a node that is not a collective. */
uint32_t sg_node_coll_members (const SgGraph *g, SgNodeId id);
/* Member @i's input node, or SG_NO_NODE when there is none. */
SgNodeId sg_node_coll_input (const SgGraph *g, SgNodeId id, uint32_t i);
/* (transfer none) Member @i's result meta: the node's meta, or element @i
 * of a coalesced collective's tuple. */
const SgMeta *sg_node_coll_output (const SgGraph *g, SgNodeId id, uint32_t i);
/* Bytes member @i moves per rank, as sg_node_comm_bytes counts them
 * (which sums this over the members); 0 past the last member. */
uint64_t sg_node_member_bytes (const SgGraph *g, SgNodeId id, uint32_t i);

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

/* The same rule at positions @pos (id -> position, a permutation; NULL
 * for the id order). Fills
 * @profile (n_nodes entries by position, or NULL) with the live bytes while
 * the node at that position runs and returns the peak. @roots
 * (sg_graph_storage_roots) and @alloc (sg_node_alloc_bytes of every node)
 * may be given precomputed, or NULL. */
uint64_t sg_graph_liveness (const SgGraph *g, const int32_t *pos, uint64_t *profile,
                            const SgNodeId *roots, const uint64_t *alloc);

/* Working arrays of sg_graph_liveness_in, for a caller that measures many
 * graphs (bucket trials): grown as needed, reused from one call to the
 * next. Zero-initialise; free with sg_live_scratch_clear. With @pool set
 * (not owned), a liveness without a profile runs in ranges of nodes on
 * it: the same peak. */
typedef struct {
  int32_t *last, *start, *wait_at;
  int64_t *delta; /* all zero between calls */
  bool ids_clean; /* last and wait_at all -1 (the id order's pass leaves them so) */
  size_t cap;
  SgPool *pool;
  struct SgLiveRange *ranges; /* per range, on the pool */
  size_t cap_ranges;
} SgLiveScratch;

/* sg_graph_liveness with @roots and @alloc given and its working arrays
 * in @w; @pos NULL for the id order (then @roots must be the storage roots
 * of sg_graph_elision: each at or below its node's id). */
uint64_t sg_graph_liveness_in (const SgGraph *g, const int32_t *pos, uint64_t *profile,
                               const SgNodeId *roots, const uint64_t *alloc, SgLiveScratch *w);
void sg_live_scratch_clear (SgLiveScratch *w);

/* Last position (by @pos) at which every storage root is used under that
 * rule; @last has n_nodes entries by id, meaningful for roots. */
void sg_graph_last_use (const SgGraph *g, const int32_t *pos, const SgNodeId *root,
                        int32_t *last);

/* Storage root of every node, aliases resolved (n_nodes), (transfer full). */
SgNodeId *sg_graph_storage_roots (const SgGraph *g);

/* --- zero-copy copies (elide.c, elide-passes.c) -------------------------- */

/* Why a copy codegen could lower to views (schedgraph.bucket_pack /
 * bucket_unpack, aten.cat, schedgraph.rank_roll: docs/ops.md "Zero-copy
 * lowering") stays a kernel; SG_COPY_ELIDED when it does not. */
typedef enum {
  SG_COPY_ELIDED = 0,
  SG_COPY_RANK_MAJOR,    /* all_gather unpack: the member is strided over rank segments */
  SG_COPY_INTERLEAVED,   /* reduce_scatter pack: chunk r of every member in segment r */
  SG_COPY_STRIDED_INPUT, /* a member input is not a whole contiguous tensor */
  SG_COPY_SHARED_INPUT,  /* a member input is placed elsewhere in another layout */
  SG_COPY_OUTPUT_INPUT,  /* a member input is a graph output */
  SG_COPY_MIXED_INPUTS,  /* graph inputs and computed members */
  SG_COPY_COMM_WRITTEN,  /* a member input is written by a collective */
  SG_COPY_TUPLE_INPUT,   /* a member input is a tuple element */
  SG_COPY_NO_COLLECTIVE, /* no single collective reads the pack */
  SG_COPY_CAT_DIM,       /* a cat along a dim that interleaves its inputs' rows */
  SG_COPY_ROLL_USERS,    /* a rank_roll neither over a cat of one block per rank nor read
                          * only by one-block row slices */
  SG_COPY_N_REASONS
} SgCopyReason;

/* (transfer none) "elided", or the reason's name and a sentence. */
const char *sg_copy_reason_text (SgCopyReason r);

/* A placement at a rank-dependent block (a rank_roll lowered to views):
 * @block bytes times block index sg_rank_roll_block (0, k, @shift, @sign,
 * r), r the rank's position in group @group (k ranks). @group -1: none. */
typedef struct {
  int32_t group;
  int32_t sign;
  int64_t shift;
  uint64_t block;
} SgRollPlace;

/* The zero-copy layout of a graph's copies (n_nodes entries each):
 *  reason[v]   an SgCopyReason for the copies above (0 elsewhere);
 *  view_of[v]  an elided unpack: its input (the bucket result); an elided
 *              pack or cat whose inputs already lie back to back: its
 *              first input; a member input relocated into an elided
 *              pack's or cat's buffer ("relocated"): that node; an input
 *              relocated into an elided rank_roll's buffer at a
 *              rank-dependent block: that rank_roll, and the cat between
 *              them likewise (it has no storage of its own: its rows lie
 *              in rank order there); a rank_roll lowered to views of its
 *              input's blocks: that input; else -1. An elided pack, cat
 *              or rank_roll with view_of -1 owns the buffer its
 *              relocated inputs share;
 *  view_off[v] the byte offset there (from the viewed value's start, or
 *              from the owner's buffer start for a relocated input);
 *  roll[v]     the rank-dependent block added to view_off: a relocated
 *              input of a rank_roll, and each row-block slice of a
 *              rank_roll lowered to views (a view of the rank_roll's
 *              input); group -1 elsewhere. NULL when the graph has no
 *              rank_roll;
 *  root[v]     the storage root of v with elision (sg_graph_storage_roots). */
typedef struct SgElisionWork SgElisionWork;
typedef struct {
  uint8_t *reason;
  SgNodeId *view_of;
  uint64_t *view_off;
  SgRollPlace *roll;
  SgNodeId *root;
  int32_t n_elided; /* copies lowered without a kernel */
  SgElisionWork *work; /* sg_graph_elision_again's arrays kept between analyses */
} SgElision;

/* Fills @e for @g (clear it with sg_elision_clear). O(n_nodes). */
void sg_graph_elision (const SgGraph *g, SgElision *e);
/* The same analysis into @e, which is zeroed or holds an earlier one by
 * this function (of any graph): its arrays and working memory are reused
 * and only the entries the earlier analysis set are cleared, so nothing
 * of n_nodes entries is allocated or cleared (a pass's trial graphs),
 * except e->roll and its working arrays, made again for a graph with a
 * rank_roll.
 * Clear it with sg_elision_clear. */
void sg_graph_elision_again (const SgGraph *g, SgElision *e);
/* The pool (not owned; NULL: none) the passes over every node of the
 * analyses into @e by sg_graph_elision_again, and sg_elision_storage_bytes
 * of them, run on in ranges (the same result with any pool). @e as
 * sg_graph_elision_again takes it. */
void sg_elision_set_pool (SgElision *e, SgPool *pool);
/* The same without e->root (NULL): what the cost model reads; its passes
 * over every node in ranges on @pool (NULL: none; the same result). */
void sg_graph_elision_reasons (const SgGraph *g, SgElision *e, SgPool *pool);
void sg_elision_clear (SgElision *e);
/* Bytes each storage root of @e (sg_graph_elision) allocates, 0 for the
 * other nodes: what the nodes sharing it allocate themselves
 * (sg_node_alloc_bytes, or @node_alloc when given), elided copies aside;
 * sg_graph_liveness's @alloc with @e->root. Into @out (n_nodes entries)
 * when given, else a new array (transfer full). With @node_alloc and an
 * analysis by sg_graph_elision_again, on e's pool (sg_elision_set_pool)
 * without reading the nodes. */
uint64_t *sg_elision_storage_bytes (const SgGraph *g, const SgElision *e,
                                    const uint64_t *node_alloc, uint64_t *out);
/* True when @v's storage lives in an elided pack's, cat's or rank_roll's
 * buffer (e->view_of[v]). */
bool sg_elision_relocated (const SgGraph *g, const SgElision *e, SgNodeId v);
/* True for the kinds elision decides on: bucket_pack, bucket_unpack, cat,
 * rank_roll (inline: the storage sizes and the cost model ask per node). */
static inline bool
sg_elision_candidate (SgOpKind k)
{
  return k == SG_OP_BUCKET_PACK || k == SG_OP_BUCKET_UNPACK || k == SG_OP_CAT
         || k == SG_OP_RANK_ROLL;
}
/* True for a copy (pack, unpack, cat, rank_roll) codegen lowers without a
 * kernel. */
static inline bool
sg_elision_elided (const SgGraph *g, const SgElision *e, SgNodeId v)
{
  return sg_elision_candidate (g->nodes[v].kind) && e->reason[v] == SG_COPY_ELIDED;
}
/* True when @v is placed at a rank-dependent block (e->roll[v]). */
bool sg_elision_rolled (const SgElision *e, SgNodeId v);

/* --- mutation ----------------------------------------------------------- */

/* The one check of an order (every reorder applies it: sg_graph_permute,
 * sg_graph_select, schedule/'s order files and simulations): @order lists
 * @n distinct node ids of @g, each after its inputs, and the output node
 * (when @g has one) last. @n < g->n_nodes leaves nodes out; none that is
 * listed may read one left out. Fills @new_id (g->n_nodes entries, may be
 * NULL): each id's position, SG_NO_NODE when not listed. False with
 * @error naming the position and node (SG_GRAPH_ERROR_CYCLE: not an order,
 * the output not last; SG_GRAPH_ERROR_REF: a node left out that is read,
 * or the output). */
bool sg_graph_check_order (const SgGraph *g, const SgNodeId *order, int32_t n, SgNodeId *new_id,
                           GError **error);

/* Renumbers nodes so that new id i is old id @order[i] (a permutation of all
 * ids). Fails as sg_graph_check_order() does (naming the first node whose
 * input comes after it, or the output when it is not last); the graph is
 * unchanged then. */
bool sg_graph_permute (SgGraph *g, const SgNodeId *order, GError **error);

/* The stable topological order of @g by @key (n_nodes entries): among
 * nodes whose data inputs and implicit-edge sources are placed, the one of
 * smallest key, ties on id (what the rewrite API lays out by its placement
 * keys). (transfer full) n_nodes ids, or NULL when implicit edges close a
 * cycle. Fills users. O((nodes + edges) log nodes). */
SgNodeId *sg_graph_order_by_key (SgGraph *g, const int64_t *key);

/* Interns a string in the graph's chunk. (transfer none) */
const char *sg_graph_intern (SgGraph *g, const char *s);

/* --- configuration and the pass runner (pass.c) -------------------------- */

/* How bucket/ forms buckets (--bucket-mode). */
typedef enum {
  SG_BUCKET_MODE_AUTO = 0,  /* the best predicted step of the greedy and per-layer */
  SG_BUCKET_MODE_PER_LAYER, /* FSDP2's buckets: one per layer and collective kind */
} SgBucketMode;

/* Whether decompose/ splits collective matmuls into ring steps
 * (--decompose, --no-decompose; docs/decompose.md). */
typedef enum {
  SG_DECOMPOSE_AUTO = 0, /* the sites where the simulator predicts a shorter step */
  SG_DECOMPOSE_OFF,      /* none (--no-decompose) */
  SG_DECOMPOSE_ALL,      /* every site found, each in its best form (tests, inspection) */
  SG_DECOMPOSE_ALL_GATHER, /* every all_gather -> mm site, nothing else (exactness tests) */
} SgDecomposeMode;

/* "auto", "off", "all", "all-gather" (the --decompose spellings). */
const char *sg_decompose_mode_name (SgDecomposeMode mode);
/* Parses a --decompose spelling; false for anything else. */
bool sg_decompose_mode_from_name (const char *name, SgDecomposeMode *out);

/* "auto", "per-layer" (the --bucket-mode spellings). */
const char *sg_bucket_mode_name (SgBucketMode mode);
/* Parses a --bucket-mode spelling; false for anything else. */
bool sg_bucket_mode_from_name (const char *name, SgBucketMode *out);

/* How bucket/ lowers a bucket (--bucket-lowering, docs/bucketing.md). */
typedef enum {
  SG_BUCKET_LOWERING_AUTO = 0, /* per bucket, whichever predicts the shorter step */
  SG_BUCKET_LOWERING_FLAT,     /* one collective over a flat buffer (pack / unpack) */
  SG_BUCKET_LOWERING_GROUPED,  /* one coalesced collective (one NCCL group), no copy */
} SgBucketLowering;

/* "auto", "flat", "grouped" (the --bucket-lowering spellings). */
const char *sg_bucket_lowering_name (SgBucketLowering lowering);
/* Parses a --bucket-lowering spelling; false for anything else. */
bool sg_bucket_lowering_from_name (const char *name, SgBucketLowering *out);

/* --- worker threads (pool.c) --------------------------------------------- */

/* A pool of threads that run the tasks of jobs (the caller's thread among
 * them). Results never depend on the thread count: a task writes only
 * what its index owns, the caller combines results in index order, and
 * @worker only picks the task's scratch (0 .. sg_pool_size-1; one task at
 * a time per worker). A job started inside a task spreads over the idle
 * workers too; a thread that is neither the pool's creator nor one of its
 * workers runs its jobs alone, as worker 0. */
typedef void (*SgPoolFunc) (gpointer ctx, int32_t task, int32_t worker);
/* At most this many threads (the default: one per processor, up to it). */
#define SG_POOL_MAX_THREADS 64
/* (transfer full) @n_threads threads in all, the caller's included (<= 1:
 * none is started; fewer when the system refuses some). */
SgPool *sg_pool_new (int32_t n_threads);
void sg_pool_free (SgPool *p);
/* Threads of @p, the caller's included (1 for NULL): the scratch a job
 * needs, one per worker. */
int32_t sg_pool_size (const SgPool *p);
/* One per processor (g_get_num_processors: the CPU affinity), at most
 * SG_POOL_MAX_THREADS. */
int32_t sg_pool_default_threads (void);
/* Gives the free pages of every malloc arena back to the system (glibc's
 * malloc_trim; nothing elsewhere): glibc returns on its own only the top
 * of a heap, and keeps what a thread frees in that thread's arena. */
void sg_heap_trim (void);
/* sg_heap_trim after a job whose tasks freed large working sets on @p's
 * threads: their arenas, which the passes that follow on the calling
 * thread do not allocate from. Nothing without a pool of several
 * threads. */
void sg_pool_trim (SgPool *p);
/* The worker the calling thread is to @p's tasks (0: its creator, or a
 * thread outside it). */
int32_t sg_pool_worker (const SgPool *p);
/* The pause of a thread that polls for another's work between two polls
 * (the pool's idle workers; a task waiting for tasks before it). */
static inline void
sg_cpu_relax (void)
{
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause ();
#elif defined(__aarch64__)
  __asm__ __volatile__ ("yield");
#endif
}
/* The ranges of @size items that cover [0, @n) as a job's tasks: how
 * many (at least one, empty for @n 0), and range @r's items [*@a, *@b). */
static inline int32_t
sg_ranges (int32_t n, int32_t size)
{
  return MAX (1, (int32_t)(((int64_t)n + size - 1) / size));
}
static inline void
sg_range_of (int32_t r, int32_t size, int32_t n, int32_t *a, int32_t *b)
{
  *a = (int32_t)MIN ((int64_t)r * size, n);
  *b = (int32_t)MIN ((int64_t)(r + 1) * size, n);
}
/* The size of the ranges a job over @n items splits them into on @p: a
 * few per thread (four, to even out their times), none smaller than @min;
 * one range without a pool of several threads. */
static inline int32_t
sg_pool_range_size (const SgPool *p, int32_t n, int32_t min)
{
  const int32_t per = 4 * sg_pool_size (p);
  if (per <= 4)
    return MAX (n, 1);
  return MAX (min, (int32_t)(((int64_t)n + per - 1) / per));
}
/* Runs @fn (@ctx, i, worker) for i in 0 .. @n_tasks-1 and returns when all
 * have run; @p NULL runs them in order on the caller. */
void sg_pool_run (SgPool *p, int32_t n_tasks, SgPoolFunc fn, gpointer ctx);

/* Every option of every pass; CLI flags map 1:1 onto these fields.
 * sg_config_init() sets the documented defaults. */
typedef struct {
  /* estimate/ */
  const char *cluster;      /* preset name or JSON file; NULL: the graph's, else h200-sxm */
  const char *profile;      /* measured-times JSON, or NULL */
  /* decompose/ */
  SgDecomposeMode decompose; /* auto: where it wins (default); off: --no-decompose */
  /* schedule/ */
  bool reorder;             /* false: keep the input order (--no-reorder) */
  uint64_t max_in_flight_bytes; /* per group; 0 = unlimited */
  double max_peak_increase;     /* allowed peak-memory growth over the input order, fraction */
  int32_t prefetch_limit;       /* max collectives started ahead per group; 0 = unlimited */
  bool exact;               /* the exact scheduler instead of the list scheduler (--exact) */
  /* bucket/ */
  bool bucket;              /* false: --no-bucket */
  uint64_t bucket_cap_bytes;
  SgBucketMode bucket_mode;
  SgBucketLowering bucket_lowering;
  /* runner */
  bool validate_between;    /* run the validator after every pass */
  const char *dump_pass;    /* dump the IR after this pass ("all" for every pass) */
  FILE *dump_file;          /* where dumps go; NULL = stderr */
  /* the passes' worker threads (--threads; NULL: the calling thread
   * alone). Never changes a result, only how soon it comes. */
  SgPool *pool;
} SgConfig;

void sg_config_init (SgConfig *cfg);

typedef bool (*SgPassFunc) (SgGraph *g, const SgConfig *cfg, GError **error);
/* A step of a driver's pipeline: a pass that also reads or writes the
 * driver's state (@data). *@g is NULL before the graph is loaded; the step
 * that loads it sets it. Its errors are its own (not prefixed with its
 * name): they name the file they are about. */
typedef bool (*SgStepFunc) (SgGraph **g, const SgConfig *cfg, gpointer data, GError **error);

typedef struct {
  const char *name; /* "estimate", "schedule", "bucket", ... */
  SgPassFunc run;   /* a graph pass, or NULL */
  SgStepFunc step;  /* else a step */
  /* The graph is not valid yet after it (loading): no validator after it. */
  bool unchecked;
} SgPass;

typedef struct {
  const char *name;
  double ms;
} SgPassTime;

/* Runs @passes in order on *@g, timing each into @times (n_passes entries),
 * running the validator (and the check of the kept analysis) after each
 * when cfg->validate_between, and dumping the IR after the pass named
 * cfg->dump_pass. Steps get @data. Stops at the first failure: a graph
 * pass's error names the pass. */
bool sg_pass_run (SgGraph **g, const SgConfig *cfg, const SgPass *passes, size_t n_passes,
                  gpointer data, SgPassTime *times, GError **error);
/* The pass-function form of sg_graph_validate(), for pass lists. */
bool sg_graph_validate_pass (SgGraph *g, const SgConfig *cfg, GError **error);

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
 * graph unchanged and the node named, where sg_graph_check_order() does: a
 * repeated or invalid id, a kept node that reads a dropped one or comes
 * before its input, a dropped output node or one not last. Implicit edges
 * touching dropped nodes are dropped. */
bool sg_graph_select (SgGraph *g, const SgNodeId *order, int32_t n, GError **error);


/* --- the rewrite API (rewrite.c; docs/ir.md) ------------------------------ */

/* A batch of edits to a graph, committed at once: passes that add, replace
 * and remove nodes (bucketing, decompositions) describe the result here,
 * then either commit it to the graph or build a trial graph from it to
 * judge it (simulate, cost) without changing the graph. Trial and commit
 * run the same code; a trial graph is the committed graph node for node
 * (ids, kinds, names, args, metas, inputs, groups, implicit edges).
 *
 *   SgRewrite *rw = sg_rewrite_new (g);
 *   SgNodeId a = sg_rewrite_add (rw, &spec_a, error);   // ids >= g->n_nodes
 *   sg_rewrite_replace_uses (rw, old, b);                // users of old read b
 *   sg_rewrite_remove (rw, old);
 *   ok = sg_rewrite_commit (rw, error);                  // or sg_rewrite_trial
 *   sg_rewrite_free (rw);
 *
 * Node ids: base nodes keep their ids while the rewrite is built; added
 * nodes get g->n_nodes, g->n_nodes + 1, ... in creation order. The result
 * is renumbered into one topological order: the stable order that picks,
 * among nodes whose inputs (and implicit-edge sources) are placed, the one
 * with the smallest key, ties on the pre-commit id. A base node's key is
 * its position; an added node's key is set by sg_rewrite_place() (default:
 * just after its latest input). Everything not edited keeps its relative
 * order unless implicit edges say otherwise.
 *
 * @g must not change while the rewrite lives: added nodes' args, metas and
 * strings go to @g's pools at once and are taken back by sg_rewrite_free()
 * or sg_rewrite_reset() unless committed. A pass that judges many
 * rewrites of one graph keeps one SgRewrite and resets it between them:
 * its working memory is reused. */
typedef struct SgRewrite SgRewrite;

/* Keyword argument of an SgNodeSpec; @key is copied. */
typedef struct {
  const char *key;
  SgArg value;
} SgKwarg;

/* A node to add. Node references in @args / @kwargs are sg_arg_ref(id) of
 * base or already added nodes; lists are sg_rewrite_list() values; strings
 * live in the graph's strings: sg_rewrite_str() values, strings of a node's
 * args, node names. */
typedef struct {
  const char *name;   /* made unique on commit: name, name_1, name_2 ... */
  SgOpKind kind;      /* a call_function of this op (its table target) */
  const char *target; /* NULL: the op table's target of @kind */
  const SgArg *args;
  uint32_t n_args;
  const SgKwarg *kwargs;
  uint32_t n_kwargs;
  SgMeta meta;          /* sg_rewrite_meta(), or ndim -1 */
  const SgMeta *tuple;  /* a tuple value: n_tuple metas (meta ignored) */
  uint32_t n_tuple;
  double cost_us;       /* NAN: none (the pass costs new nodes) */
  int32_t sm_count;     /* matmuls: the SM-count target (SgNode.sm_count), 0: all */
} SgNodeSpec;

/* Where an added node goes relative to a base node @anchor
 * (sg_rewrite_place): keys 4 anchor + slot, base nodes have slot 2. */
typedef enum {
  SG_PLACE_BEFORE_EARLY = 0, /* before the anchor, ahead of SG_PLACE_BEFORE nodes */
  SG_PLACE_BEFORE = 1,       /* just before the anchor */
  SG_PLACE_AFTER = 3,        /* just after the anchor */
} SgPlace;

/* (transfer full) Starts a rewrite of @g (users are rebuilt if stale). */
SgRewrite *sg_rewrite_new (SgGraph *g);
/* Frees @rw; uncommitted additions are taken back from @g's pools. No
 * trial graph of it may be alive. */
void sg_rewrite_free (SgRewrite *rw);
/* Discards every edit and addition (as sg_rewrite_new would start), keeping
 * the working memory for the next rewrite of the same, unchanged graph.
 * Not after a commit; no trial graph of it may be alive. */
void sg_rewrite_reset (SgRewrite *rw);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (SgRewrite, sg_rewrite_free)
/* A layout (trial or commit) after another of the same rewrite reuses the
 * last one's order where nothing it depends on changed; with @on, each
 * such order is also computed in full and a difference aborts (the
 * validator's check; off by default). */
void sg_rewrite_set_verify (SgRewrite *rw, bool on);
/* Lets @rw's layouts (trials and the commit) copy large graphs' nodes on
 * @pool's threads (NULL: the calling thread); the same result. */
void sg_rewrite_set_pool (SgRewrite *rw, SgPool *pool);
/* How many nodes of the last layout's order were kept from the layout
 * before it (0: it was laid out in full). */
int32_t sg_rewrite_last_reused (const SgRewrite *rw);

/* (transfer none) The graph being rewritten. */
SgGraph *sg_rewrite_graph (const SgRewrite *rw);

/* A meta for an added node: @shape (@ndim dims) with @stride (NULL:
 * contiguous) of @dtype, stored in the graph's dims pool (@shape may be
 * another meta's, sg_meta_shape). */
SgMeta sg_rewrite_meta (SgRewrite *rw, const int64_t *shape, const int64_t *stride, int32_t ndim,
                        SgDtype dtype);
/* Spec values: an interned string, a list of @n items (spec form). */
SgArg sg_rewrite_str (SgRewrite *rw, const char *s);
SgArg sg_rewrite_list (SgRewrite *rw, const SgArg *items, uint32_t n);
/* Node @src's positional arguments in spec form (references as ids, lists
 * copied), at most @max into @out; returns how many @src has. Kwargs
 * likewise. Use them to add a node like an existing one. */
uint32_t sg_rewrite_args_of (SgRewrite *rw, SgNodeId src, SgArg *out, uint32_t max);
uint32_t sg_rewrite_kwargs_of (SgRewrite *rw, SgNodeId src, SgKwarg *out, uint32_t max);
/* The node an argument of @id references, whether @id is a base node or
 * an added one. */
SgNodeId sg_rewrite_arg_node (const SgRewrite *rw, SgNodeId id, const SgArg *a);
/* (transfer none) A node of the rewrite (base or added); valid until the
 * next sg_rewrite_add. */
const SgNode *sg_rewrite_node (const SgRewrite *rw, SgNodeId id);

/* Adds a node: interns its target, derives its inputs (distinct references
 * in order of first appearance) and its collective group, size and reduce
 * op or getitem index from the typed args, with the loader's checks of the
 * node alone (sg_graph_append's). Returns its id, or SG_NO_NODE with
 * @error naming the node and field. */
SgNodeId sg_rewrite_add (SgRewrite *rw, const SgNodeSpec *spec, GError **error);

/* Places added node @id at @anchor (a base node) in slot @where. */
void sg_rewrite_place (SgRewrite *rw, SgNodeId id, SgNodeId anchor, SgPlace where);

/* Every base node that reads @old reads @to instead (in its inputs and
 * its args). Added nodes read what their spec names, except where that is
 * @old and @old is removed (nothing may read a removed node): then they
 * read @to as well. @old must be a base node; @to any node. */
void sg_rewrite_replace_uses (SgRewrite *rw, SgNodeId old, SgNodeId to);

/* Removes node @id. Committing fails if a kept node still reads it. */
void sg_rewrite_remove (SgRewrite *rw, SgNodeId id);

/* Implicit edges of base node @old (removed) move to @to, except those of
 * a kind in @drop_kinds (a bit mask: 1 << SgEdgeKind), which are dropped.
 * Edges of removed nodes that are not moved are dropped. */
void sg_rewrite_move_edges (SgRewrite *rw, SgNodeId old, SgNodeId to, uint32_t drop_kinds);

/* Applies the rewrite to the graph: renumbered as described above, new
 * names made unique, users and derived tables invalidated. False with
 * @error (SG_GRAPH_ERROR_REF naming a kept node that reads a removed one
 * or the removed output; SG_GRAPH_ERROR_CYCLE naming a node the edits put
 * on a cycle) and the graph unchanged. At most once per rewrite. */
bool sg_rewrite_commit (SgRewrite *rw, GError **error);

/* (transfer full) The graph sg_rewrite_commit would make, as a new graph
 * that shares @g's pools, strings and groups (@g stays as it is); names of
 * added nodes are as given (uniqueness is settled on commit) and it has no
 * name table. It borrows @rw and @g: free it (sg_graph_free) before either
 * changes, is reset or is freed. NULL with @error where sg_rewrite_commit
 * would fail. The rewrite may be committed or tried again afterwards. */
SgGraph *sg_rewrite_trial (SgRewrite *rw, GError **error);

/* A point in the description of a rewrite: sg_rewrite_rollback to it
 * undoes every add, replace, remove and move made since, and the places of
 * the nodes added since, leaving the rewrite as if only what came before
 * had been described (a pass that tries many rewrites sharing a first part
 * describes only what follows it again). */
typedef struct {
  guint nodes, inputs, scratch, redirects, removed, moves, args, dims, tuples, name_blocks;
  size_t name_used;
} SgRewriteMark;
void sg_rewrite_mark (const SgRewrite *rw, SgRewriteMark *m);
/* Not after a commit, nor while a trial graph of @rw lives. */
void sg_rewrite_rollback (SgRewrite *rw, const SgRewriteMark *m);

/* Keeps a copy of what @rw described between its marks @from and @to (@to
 * at most its current point), names included, so that parts of it can be
 * described again after a rollback without building their nodes again
 * (rewrite-stash.c): a pass whose next trial rolls back to a changed first
 * part and then describes parts it described before (under other ids of
 * added nodes) replays those parts. The copy lives in memory the rewrite
 * holds idle between trials (the last trial graph's node array, given
 * back when it was freed): it costs no memory of its own, and lasts until
 * the next stash, trial, commit or reset. Not while a trial graph of @rw
 * lives. False, with nothing kept, when there is no such memory or too
 * little. */
bool sg_rewrite_stash (SgRewrite *rw, const SgRewriteMark *from, const SgRewriteMark *to);
/* Describes part [@a, @b) of the kept copy again at the current point of
 * @rw (@a, @b: marks of @rw's description inside the copy's span),
 * exactly as sg_rewrite_add, _place, _replace_uses, _remove and
 * _move_edges with the same specs would now: the part's added nodes get
 * the ids they get now and references to them follow; references to base
 * nodes and to nodes added before the copy's @from stay; pool offsets
 * move to where the part lands; no check is made again. False, with
 * nothing added, when the part refers to other nodes of the copy (added
 * between @from and @a or after @b). @rw's base graph must be as when the
 * part was described. */
bool sg_rewrite_replay (SgRewrite *rw, const SgRewriteMark *a, const SgRewriteMark *b);
/* Whether what @rw described from @m1 to @m2 and what it described from
 * @m2 on are the same part, field by field, but for where each lies
 * (added nodes of the first part read as those of the second; pool
 * offsets shifted likewise): checks a replay against describing the part
 * afresh. */
bool sg_rewrite_parts_same (const SgRewrite *rw, const SgRewriteMark *m1, const SgRewriteMark *m2);

/* (transfer none) For a trial graph of sg_rewrite_trial: per node, the id
 * of the base node it copies (its kind, meta, costs; its inputs may be
 * redirected), or SG_NO_NODE for an added node; NULL for other graphs.
 * Lets a pass keep what it derives from base nodes from one trial to the
 * next. */
const SgNodeId *sg_graph_trial_origins (const SgGraph *g);

/* (transfer full) A base for rewrites on another thread: a graph that
 * shares @g's nodes, groups, inputs, users, implicit edges and cost model
 * read-only, and has its own copies of the pools a rewrite appends to
 * (dims, tuple metas, args) and its own strings for what a rewrite interns
 * (names and targets of @g's nodes stay @g's). Several threads may each
 * build and try rewrites of their own fork of one graph at once. @g must
 * not change while a fork lives; its users are filled here, so forks made
 * on several threads at once need them filled before (a rewrite of @g
 * fills them). A fork is never committed to. Free it with sg_graph_free. */
SgGraph *sg_rewrite_fork (SgGraph *g);

/* After a successful sg_rewrite_trial or sg_rewrite_commit: the id node
 * @id of the rewrite (a base node or an added one) has in the result, or
 * SG_NO_NODE when it was removed. Valid until the rewrite lays out again
 * (the next trial) or is reset. */
SgNodeId sg_rewrite_result_id (const SgRewrite *rw, SgNodeId id);

G_END_DECLS
