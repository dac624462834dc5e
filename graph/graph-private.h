/* graph-private.h: what the files of graph/ share (not a public contract). */
#pragma once

#include "graph.h"

#include <string.h>

/* Deeper nesting inside args/kwargs is refused at load. */
#define SG_MAX_ARG_DEPTH 64
/* Anything above 2^62 elements or bytes is absurd and risks overflow. */
#define SG_MAX_EXTENT ((int64_t)1 << 62)

/* The validator's failure (validate.c, validate-graph.c): @error set,
 * false returned. */
#define VFAIL(code, ...)                                                       \
  do {                                                                         \
    g_set_error (error, SG_GRAPH_ERROR, code, __VA_ARGS__);                    \
    return false;                                                              \
  } while (0)
/* A node's `cost_us` above 1e12 us (11.6 days) is a unit mistake. */
#define SG_MAX_COST_US 1e12

/* @d as an integer when it is one within +-2^62 (SG_MAX_EXTENT): every
 * integer field of the graph format (the loaders' one range test). */
static inline bool
sg_int62 (double d, int64_t *out)
{
  if (!(d >= -(double)SG_MAX_EXTENT && d <= (double)SG_MAX_EXTENT) || d != (double)(int64_t)d)
    return false;
  *out = (int64_t)d;
  return true;
}

/* A tensor meta's rules on its shape past those of each extent (an
 * integer >= 0), the loaders' (parse_meta, load-tape.c sg_chunk_meta) and
 * the validator's: the element count within 2^62 after each extent (*@numel
 * times @x, false when it passes), then the byte size. */
static inline bool
sg_numel_times (uint64_t *numel, int64_t x)
{
  if (x && *numel > (uint64_t)SG_MAX_EXTENT / (uint64_t)x)
    return false;
  *numel *= (uint64_t)x;
  return true;
}

static inline bool
sg_numel_bytes_ok (uint64_t numel, SgDtype dt)
{
  return numel <= (uint64_t)SG_MAX_EXTENT / sg_dtype_size (dt);
}

/* The strides of a contiguous tensor of the @n extents at @sh into @st
 * (a meta without `stride`). */
static inline void
sg_shape_strides (const int64_t *sh, int n, int64_t *st)
{
  int64_t s = 1;
  for (int i = n - 1; i >= 0; i--) {
    st[i] = s;
    s *= sh[i] ? sh[i] : 1;
  }
}

/* The graph format's `op` strings, by SgNodeOp (sg_node_op_name). */
static const struct {
  const char *text;
  size_t len;
} sg_node_ops[] = { { "placeholder", 11 }, { "get_attr", 8 }, { "call_function", 13 },
                    { "output", 6 } };
G_STATIC_ASSERT (G_N_ELEMENTS (sg_node_ops) == SG_NODE_OUTPUT + 1);

/* The SgNodeOp the @len bytes at @s spell, -1 when none. */
static inline int
sg_node_op_from_text (const char *s, size_t len)
{
  for (int op = 0; op <= SG_NODE_OUTPUT; op++)
    if (len == sg_node_ops[op].len && memcmp (s, sg_node_ops[op].text, len) == 0)
      return op;
  return -1;
}

/* The kind a node of op @op has: placeholder, get_attr and output have
 * their own, a call_function's (SG_OP_UNKNOWN here) is its target's. */
static inline SgOpKind
sg_node_op_kind (SgNodeOp op)
{
  static const SgOpKind kinds[] = { SG_OP_PLACEHOLDER, SG_OP_GET_ATTR, SG_OP_UNKNOWN,
                                    SG_OP_OUTPUT };
  G_STATIC_ASSERT (G_N_ELEMENTS (kinds) == SG_NODE_OUTPUT + 1);
  return kinds[op];
}

/* cJSON_GetObjectItemCaseSensitive(), inlined: the first member of @obj
 * named @key (duplicates: the first), NULL when none or @obj is not an
 * object. The loader looks up every field of every node. */
static inline const cJSON *
sg_json_member (const cJSON *obj, const char *key)
{
  for (const cJSON *c = obj ? obj->child : NULL; c && c->string; c = c->next)
    if (c->string[0] == key[0] && strcmp (c->string, key) == 0)
      return c;
  return NULL;
}

/* What the loader keeps from node to node for sg_graph_append_with(): an
 * array for a node's inputs, and the recent targets, interned, with their
 * kinds (a few dozen distinct targets make up a graph), by a hash of the
 * text. Zero-initialised, refs set by the caller. */
#define SG_TARGET_CACHE 64
typedef struct {
  const char *target; /* interned in the graph */
  SgOpKind kind;      /* sg_op_from_target (target) */
} SgTargetEntry;
typedef struct {
  GArray *refs; /* SgNodeId */
  SgTargetEntry targets[SG_TARGET_CACHE];
} SgAppendScratch;

/* sg_graph_append() with @scratch (NULL: none) reused across calls on the
 * same graph. */
SgNodeId sg_graph_append_with (SgGraph *g, const cJSON *obj, SgAppendScratch *scratch,
                               GError **error);

/* A JSON number as an argument: integral values in int64 range are ints
 * (JSON does not tell 2.0 from 2; written back, both print as 2), the
 * rest floats. Range first: casting an out-of-range double is undefined. */
static inline SgArg
sg_arg_number (double d)
{
  SgArg a = { .type = SG_ARG_FLOAT };
  if (d >= -9223372036854775808.0 && d < 9223372036854775808.0 && d == (double)(int64_t)d) {
    a.type = SG_ARG_INT;
    a.i = (int64_t)d;
  } else {
    a.f = d;
  }
  return a;
}

/* args.c: a string argument @a (SG_ARG_STR, .s set) at keyword @key (NULL:
 * positional or nested) as an enum when the keyword names a tensor option
 * (dtype, device, layout, memory_format) and the text is one. */
void sg_arg_classify (SgArg *a, const char *key);

/* args.c: building a node's typed arguments in g->args. */
typedef struct {
  SgGraph *g;
  const char *node;   /* the node's name, for messages */
  GArray *refs;       /* SgNodeId: the node's inputs so far (distinct) */
  bool own_refs;      /* refs is this build's (else the caller's, reused) */
  GHashTable *seen;   /* id + 1 -> index + 1, once refs is long */
  const GArray *scratch; /* SgArg: where spec lists live (rewrite.c) */
  GError **error;
} SgArgBuild;

/* @refs: an array to collect the inputs in (emptied first), or NULL for
 * one of the build's own. */
void sg_arg_build_init (SgArgBuild *b, SgGraph *g, const char *node, const GArray *scratch,
                        GArray *refs, GError **error);
void sg_arg_build_clear (SgArgBuild *b);

/* The position of @id among the @n ids at @ids, or @n when it is not
 * there (@id then counts as at @n: the caller puts it there). A scan
 * while @n is short, past it a set (*@set, made by args.c's
 * sg_ids_position_set, freed by the caller, for one growing list): linear
 * for an output node's thousands of inputs (a scan would be quadratic).
 * The loader's distinct inputs and the validator's. */
#define SG_SCAN_IDS 32
uint32_t sg_ids_position_set (const SgNodeId *ids, uint32_t n, SgNodeId id, GHashTable **set);
static inline uint32_t
sg_ids_position (const SgNodeId *ids, uint32_t n, SgNodeId id, GHashTable **set)
{
  if (*set || n >= SG_SCAN_IDS)
    return sg_ids_position_set (ids, n, id, set);
  for (uint32_t i = 0; i < n; i++)
    if (ids[i] == id)
      return i;
  return n;
}

/* Parses graph-format @args (a JSON list or NULL) and @kwargs (an object or
 * NULL) of node @n into g->args, resolving {"node": NAME} by name into
 * b->refs; sets n's args_first, n_args, kwargs_first, n_kwargs. False with
 * b->error set (the caller truncates g->args). */
bool sg_args_from_json (SgArgBuild *b, const cJSON *args, const cJSON *kwargs, SgNode *n);

/* The same from an SgNodeSpec's values (references are node ids, lists
 * live in b->scratch); @node_count bounds valid references. */
bool sg_args_from_spec (SgArgBuild *b, const SgArg *args, uint32_t n_args, const SgKwarg *kwargs,
                        uint32_t n_kwargs, SgNodeId node_count, SgNode *n);

/* Node @src's argument @a (a node of @g whose inputs are @src_inputs) in
 * spec form, lists copied into @scratch. */
SgArg sg_arg_to_spec (const SgGraph *g, const SgNodeId *src_inputs, const SgArg *a,
                      GArray *scratch);

/* graph.c: what sg_graph_append and sg_rewrite_add share once a node's
 * args and inputs are built: kind from op and target, collective group,
 * size and reduce op, getitem index, and the checks of the node alone.
 * @node_of resolves an input id to its node (base or added). */
typedef const SgNode *(*SgNodeOf) (gconstpointer ctx, SgNodeId id);
/* @input_of gives a node's first input (SG_NO_NODE: none): a wait on an
 * element of a coalesced collective looks through its getitem. */
typedef SgNodeId (*SgInputOf) (gconstpointer ctx, SgNodeId id);
bool sg_node_finish (SgGraph *g, SgNode *n, const SgNodeId *inputs, SgNodeOf node_of,
                     SgInputOf input_of, gconstpointer ctx, GError **error);
/* The SgNodeOf and SgInputOf of a graph's own nodes (@ctx: the graph). */
const SgNode *sg_graph_node_of (gconstpointer ctx, SgNodeId id);
SgNodeId sg_graph_input_of (gconstpointer ctx, SgNodeId id);

/* graph.c: collective @n's members (docs/graph-format.md): a coalesced
 * collective's inputs list, and every member's input and result agreeing
 * with the group (sg_collective_sizes_ok) and, coalesced, in dtype. Needs
 * n->group set; the loader and the validator share it. */
bool sg_coll_check_members (const SgGraph *g, const SgNode *n, const SgNodeId *inputs,
                            SgNodeOf node_of, gconstpointer ctx, GError **error);

/* validate.c, validate-graph.c: the validator. Per node, what later nodes
 * check of their inputs, one compact entry each (the nodes themselves are
 * 112 bytes apart: a cache miss per input at a million nodes). */
typedef struct {
  uint8_t op, kind;
} SgBrief;
G_STATIC_ASSERT (SG_OP_N_KINDS <= 256);

/* What every node's rules read besides the node and its inputs: the
 * graph's, and arrays the validator fills before the rules run. */
typedef struct {
  const SgGraph *g;
  const char **key_of; /* each node's key in g->by_name; NULL: names are distinct */
  SgBrief *brief;
  gint *wait_first; /* per node: the first wait_tensor on it, id + 1 (0: none) */
  gint *elem_first; /* per element of a coalesced collective: its first getitem */
} SgValidateShared;

/* Node @id's rules (validate.c), in their order: false with the first
 * broken one's message. */
bool sg_validate_node (const SgValidateShared *sh, SgNodeId id, GError **error);

/* permute.c: the ring ops' readers for a node that may not be in the graph
 * yet (its args in the pool; @input: its first input's node, or NULL). */
bool sg_permute_read (const SgGraph *g, const SgNode *n, SgPermute *out, GError **error);
bool sg_rank_roll_read (const SgGraph *g, const SgNode *n, const SgNode *input, SgRankRoll *out,
                        GError **error);

/* Interns string arguments of the args pool entries [from, to) of @src
 * into @dst's strings (sg_graph_copy). */
void sg_args_reintern (SgGraph *dst, guint from, guint to);

/* names.c: a table of node names (name -> id) filled on worker threads,
 * for the loader's references and the validator's distinct names; it
 * points to the nodes' names, holds no copy. */
#define SG_NAME_PARTS 64
typedef struct SgNameTable SgNameTable;
SgNameTable *sg_name_table_new (void);
void sg_name_table_free (SgNameTable *t);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (SgNameTable, sg_name_table_free)
/* Room for about @n names without growing (an estimate: parts grow
 * past it). */
void sg_name_table_reserve (SgNameTable *t, int64_t n);
/* The hash the table keys @len bytes at @s by. */
uint64_t sg_name_hash (const char *s, size_t len);
/* Node i's name, to both calls below, is at @names + i * @stride
 * (&g->nodes[0].name, sizeof (SgNode)). Adds nodes @from .. @from + @n -
 * 1, whose names hash to @hash[0 .. @n - 1], on @pool's threads; returns
 * how many of them have a name the table held already (an earlier id, or
 * an earlier node of the range): those are not added. */
int64_t sg_name_table_add (SgNameTable *t, const char *const *names, size_t stride,
                           const uint64_t *hash, SgNodeId from, int32_t n, SgPool *pool);
/* The node of @t named by the @len bytes at @s (no NUL among them), whose
 * hash is @hash, or SG_NO_NODE. Safe beside other lookups, not beside
 * sg_name_table_add. */
SgNodeId sg_name_table_find (const SgNameTable *t, const char *const *names, size_t stride,
                             const char *s, size_t len, uint64_t hash);
/* How many names @t holds (each distinct). */
int64_t sg_name_table_count (const SgNameTable *t);

/* (transfer full) A table of @g's node names, hashed and added on @pool's
 * threads, with *@dups the nodes whose name an earlier node has; NULL when
 * a node has no name. */
SgNameTable *sg_name_table_of (const SgGraph *g, SgPool *pool, int64_t *dups);

/* (transfer none) g->by_name, built from the nodes' names first when
 * a reorder or rewrite dropped it (a cache of the nodes: built through a
 * const graph too). */
GHashTable *sg_graph_names (const SgGraph *g);
/* Drops g->by_name and g->name_table after the nodes moved (by_name is
 * built again when needed). */
void sg_graph_names_drop (SgGraph *g);

/* rewrite.c and rewrite-order.c: the rewrite being built. */
typedef struct {
  SgNodeId old, to;
  uint32_t drop; /* implicit-edge kinds dropped, 1 << kind */
} SgRewriteMove;

/* Working arrays of the layout (rewrite-order.c), kept by the rewrite so
 * that trial after trial reuses them. */
enum {
  SG_RW_REDIR, SG_RW_INDEG, SG_RW_POS, SG_RW_SORTED,
  SG_RW_HEAP, SG_RW_NEW_ID, SG_RW_XFIRST, SG_RW_XADJ,
  SG_RW_FILL, SG_RW_MOVED, SG_RW_PLAIN, SG_RW_PAIRS, SG_RW_IN_POS, SG_RW_CHECK,
  SG_RW_WORDER, SG_RW_WINDOWS, SG_RW_AT_W, SG_RW_LAST_AIN_AT, SG_RW_SPANS, SG_RW_RANGES,
  SG_RW_REDIRECTED,
  /* what a layout leaves for the next one: each slot and, after it, the
   * last layout's (swapped at the end of a layout) */
  SG_RW_KEEP, SG_RW_LAST_KEEP, SG_RW_TIX, SG_RW_LAST_TIX, SG_RW_AKEY, SG_RW_LAST_AKEY,
  SG_RW_ORDER, SG_RW_LAST_ORDER, SG_RW_PMAX, SG_RW_LAST_PMAX, SG_RW_SMIN, SG_RW_LAST_SMIN,
  SG_RW_ERES, SG_RW_LAST_ERES,
  SG_RW_N_WORK
};

/* rewrite-stash.c: a copy of part of the description (sg_rewrite_stash),
 * in the rewrite's spare node array (idle between a trial's release and
 * the next layout); its arrays point there. */
typedef struct {
  bool valid;             /* until the next stash, layout or reset */
  SgRewriteMark from, to; /* the part copied */
  SgNode *nodes;          /* to.nodes - from.nodes; names in @names */
  int64_t *keys;
  guint *name_at;         /* per node: its name's offset in @names */
  SgNodeId *inputs, *redirects, *removed;
  SgRewriteMove *moves;
  SgArg *args;
  int64_t *dims;
  SgMeta *tuples;
  char *names;
} SgRewriteStashed;

struct SgRewrite {
  SgGraph *g;
  int32_t n0;
  guint dims0, tuples0, args0; /* @g's pool lengths at the start */
  GArray *nodes;               /* SgNode: added nodes, id n0 + i */
  GArray *inputs;              /* SgNodeId: added nodes' inputs (their in_first) */
  GArray *keys;                /* int64_t per added node; -1: default placement */
  GPtrArray *name_blocks;      /* added nodes' names as given: blocks of text */
  size_t name_used;            /* bytes used in the last block */
  GArray *scratch;             /* SgArg: lists of specs */
  GArray *refs;                /* SgNodeId: reused by sg_rewrite_add */
  const char *targets[SG_OP_N_KINDS]; /* interned table targets, as used */
  GArray *redirects;           /* SgNodeId pairs (old, to) */
  GArray *removed;             /* SgNodeId */
  GArray *moves;               /* SgRewriteMove */
  bool done;                   /* committed: its additions stay in @g's pools */
  int32_t trials;              /* trial graphs alive */
  /* reused memory */
  void *work[SG_RW_N_WORK];
  size_t work_size[SG_RW_N_WORK];
  size_t filled[SG_RW_N_WORK]; /* bytes of work[] that sg_rw_work_clean keeps filled */
  GArray *touched, *t_in;      /* layout's (touched: created by it) */
  GArray *last_touched, *last_t_in; /* and the last layout's */
  GArray *changed;             /* layout's: items of nodes that changed since the last */
  GArray *last_ain;            /* the last layout's added nodes' inputs (SG_RW_LAST_AIN_AT) */
  /* The last layout, which the next one reuses where nothing it depends on
   * changed (rewrite-order.c): valid while @last_ok. */
  bool last_ok;
  bool verify;                 /* check each reusing layout against a full one */
  int32_t reused;              /* nodes the last layout kept from the one before */
  int32_t *wix;                /* per node: -1 between layouts (rewrite-order.c) */
  size_t wix_cap;
  guint low_nodes;             /* added nodes unchanged since the last layout */
  int32_t last_n, last_added;  /* its nodes laid out, nodes added */
  guint last_edges;            /* @g's implicit edges then */
  SgNode *spare_nodes;         /* a freed trial graph's node array */
  int32_t spare_cap;
  int32_t spare_n;             /* its nodes written (resident) */
  SgRewriteStashed stash;      /* lives in @spare_nodes (rewrite-stash.c) */
  size_t spare_stashed;        /* bytes of @spare_nodes from its start the stash wrote */
  GArray *spare_inputs;        /* and its inputs */
  GArray *spare_edges;         /* a freed trial graph's implicit edges (memory only) */
  struct SgRwList *redirect_lists; /* rewrite-redirect.c's per range, kept */
  int32_t n_redirect_lists;
  SgNodeId *spare_origin;      /* the last trial graph's trial_origin, freed */
  int32_t spare_origin_cap, origin_cap; /* its entries; the last trial's */
  bool spare_last;             /* the spare nodes and inputs are the last layout's
                                * trial graph's, as laid out (but the stash's bytes) */
  const SgGraph *last_trial;   /* the last layout's trial graph (identity only) */
  int32_t same_prefix;         /* places from 0 of the last layout's order that hold
                                * the nodes the one before held (rewrite-reuse.c) */
  int32_t laid_kept;           /* of them, where it kept the one before's nodes */
  /* Places from 0 where the PMAX and SMIN slots (@keys_synced), and the
   * ORDER slot (@order_synced), hold what their LAST_ slots hold (the last
   * layout copied them so), while the slots' sizes are @synced_size
   * (rewrite-reuse.c) */
  int32_t keys_synced, order_synced;
  size_t synced_size[3];
  int8_t base_costed;          /* every base node has its cost: 1, not: -1, unknown: 0 */
  SgNodeId *result_id;         /* rewrite id -> id in the last trial or commit
                                * (work[SG_RW_NEW_ID]) */
  int32_t result_n;            /* entries of result_id (0: none laid out yet) */
  SgPool *pool;                /* layouts copy nodes on it (sg_rewrite_set_pool) */
  int32_t windows_min;         /* layouts order windows side by side on @pool from
                                * this many nodes in them, and redirect in ranges
                                * from this many base nodes; 0: WINDOWS_PARALLEL
                                * and REDIRECT_PARALLEL (tests lower it) */
};

/* The edited graph laid out in its new order. */
typedef struct {
  int32_t n;        /* nodes kept */
  SgNode *nodes;    /* n (capacity nodes_cap), in the new order; added
                     * nodes named as given */
  int32_t nodes_cap;
  GArray *inputs;   /* SgNodeId, renumbered */
  GArray *edges;    /* SgImplicitEdge, renumbered; NULL when @g had none */
  SgNodeId output;
  const SgNodeId *old_id; /* new id -> id in the rewrite; the rewrite's
                           * memory, valid until its next layout */
} SgRewriteLayout;

/* Checks the edits and lays the result out (rewrite-order.c): the stable
 * topological order by placement keys, inputs and implicit edges
 * renumbered, args of users whose inputs merged re-indexed (appended to
 * g->args), where every node went in rw->result_id. Node and input arrays come from the rewrite's spares when it
 * has them. False with @error as sg_rewrite_commit. */
bool sg_rewrite_layout (SgRewrite *rw, SgRewriteLayout *out, GError **error);
void sg_rewrite_layout_clear (SgRewriteLayout *l);
/* rewrite-redirect.c: frees the lists its ranges keep in @rw. */
void sg_rw_redirect_lists_free (SgRewrite *rw);
/* A working array of at least @bytes, kept by @rw (contents undefined). */
void *sg_rewrite_work (SgRewrite *rw, int slot, size_t bytes);
/* The same with its first @bytes all @byte, for arrays that their users
 * give back so between layouts (they clear what they set): only memory
 * new to the slot is filled (rewrite-order.c). */
void *sg_rw_work_clean (SgRewrite *rw, int slot, size_t bytes, int byte);

/* rewrite.c: a copy of @name that lives until the rewrite is reset, freed
 * or rolled back to before it (added nodes' names, sg_rewrite_add and
 * rewrite-stash.c's replays). */
const char *sg_rewrite_keep_name (SgRewrite *rw, const char *name);

/* rewrite-names.c: unique names for @rw's added nodes, interned in its
 * graph, into @nodes (laid out: added node j at @new_id[n0 + j]). */
void sg_rw_name_added (SgRewrite *rw, SgNode *nodes, const SgNodeId *new_id);

/* rewrite.c: frees what a trial graph borrowed (sg_graph_free). */
void sg_rewrite_trial_release (SgGraph *trial);

/* elide.c, elide-passes.c: what the zero-copy analysis's decisions read
 * and write (the SgElision being made and the passes' findings). */
typedef struct SgElisionCtx SgElisionCtx;
struct SgElisionCtx {
  const SgGraph *g;
  SgElision *e;
  SgElisionWork *w;
  GArray *viewed; /* w's: the nodes whose view_of is set */
  SgNodeId *reader, *group_root; /* w's */
  bool *is_output;
  uint8_t kf[SG_OP_N_KINDS]; /* elide-passes.c's K_ flags per kind */
  int32_t *block;      /* per one-block row slice of a rank_roll: its block, else -1 */
  uint8_t *roll_why;   /* per rank_roll: why its cat could not be relocated into it */
  int32_t n_ranges;    /* of the passes over every node (ranges_for) */
};

/* elide.c: the reasons of @copies (ids, in id order) into x->e, each from
 * the decisions before it; an elided copy's placements set. */
void sg_elision_decide (SgElisionCtx *x, const GArray *copies);
/* elide.c: the row block of rank_roll @r that slice @u reads, or -1: a
 * slice along dim 0, step 1, of exactly one of the k row blocks, as
 * contiguous as the roll. */
int32_t sg_elision_slice_block (const SgGraph *g, SgNodeId u, SgNodeId r);
