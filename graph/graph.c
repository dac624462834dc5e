/* graph.c: construction, node parsing, queries and mutation of the IR.
 *
 * A node enters the IR through sg_graph_append() (graph-format JSON: the
 * file loader, the test builder) or sg_rewrite_add() (passes); both end in
 * sg_node_finish(), which interns the target and checks everything that
 * concerns the node alone. Arguments are parsed in args.c. Whole-graph
 * rules live in validate.c.
 */
#include "graph-private.h"

#include <stdlib.h>
#include <string.h>

G_DEFINE_QUARK (sg-graph-error-quark, sg_graph_error)

/* Every pass and every trial graph holds a node array: no padding in a
 * node (4-byte fields between the pointers and the doubles). */
#if GLIB_SIZEOF_VOID_P == 8
G_STATIC_ASSERT (sizeof (SgNode) == 112);
#endif

const char *
sg_cost_source_name (SgCostSource src)
{
  static const char *const names[] = { "none", "free", "graph", "profile", "model" };
  g_return_val_if_fail ((size_t)src < G_N_ELEMENTS (names), "none");
  return names[src];
}

SgGraph *
sg_graph_new (int32_t world_size, int32_t rank)
{
  SgGraph *g = g_new0 (SgGraph, 1);
  g->world_size = world_size;
  g->rank = rank;
  g->output = SG_NO_NODE;
  g->source = g_strdup ("<builder>");
  g->strings = g_string_chunk_new (1 << 16);
  g->dims = g_array_new (FALSE, FALSE, sizeof (int64_t));
  g->inputs = g_array_new (FALSE, FALSE, sizeof (SgNodeId));
  g->tuple_metas = g_array_new (FALSE, FALSE, sizeof (SgMeta));
  g->args = g_array_new (FALSE, FALSE, sizeof (SgArg));
  g->by_name = g_hash_table_new (g_str_hash, g_str_equal);
  return g;
}

static void
users_invalidate (SgGraph *g)
{
  g_clear_pointer (&g->user_first, g_free);
  g_clear_pointer (&g->users, g_free);
}

static void
kept_drop (SgGraph *g)
{
  if (g->kept && g->kept_class->free)
    g->kept_class->free (g->kept);
  g->kept = NULL;
  g->kept_class = NULL;
}

void
sg_graph_keep (SgGraph *g, gpointer data, const SgKeptClass *cls)
{
  g_return_if_fail (g != NULL && cls != NULL);
  kept_drop (g);
  g->kept = data;
  g->kept_class = cls;
}

gpointer
sg_graph_kept (const SgGraph *g, const SgKeptClass *cls)
{
  g_return_val_if_fail (g != NULL, NULL);
  return g->kept_class == cls ? g->kept : NULL;
}

void
sg_graph_changed (SgGraph *g)
{
  g_return_if_fail (g != NULL);
  g_return_if_fail (g->fork_of == NULL); /* a fork borrows what this drops */
  users_invalidate (g);
  kept_drop (g);
}

void
sg_graph_free (SgGraph *g)
{
  if (!g)
    return;
  if (g->fork_of) { /* a fork owns its pools and strings, nothing else */
    g_string_chunk_free (g->strings);
    g_array_unref (g->dims);
    g_array_unref (g->tuple_metas);
    g_array_unref (g->args);
    g_free (g);
    return;
  }
  /* A trial graph borrows groups, strings and the cost model, and hands
   * its arrays back to its rewrite. */
  bool trial = g->trial_of != NULL;
  if (trial)
    sg_rewrite_trial_release (g);
  for (int32_t i = 0; !trial && i < g->n_groups; i++) {
    g_free (g->groups[i].name);
    g_free (g->groups[i].ranks);
    g_free (g->groups[i].partition);
  }
  if (!trial) {
    g_free (g->groups);
    g_string_chunk_free (g->strings);
  }
  g_free (g->nodes);
  g_free (g->source);
  g_free (g->cluster_json);
  g_free (g->description);
  g_array_unref (g->dims);
  g_array_unref (g->inputs);
  g_array_unref (g->tuple_metas);
  g_array_unref (g->args);
  sg_graph_names_drop (g);
  sg_graph_changed (g);
  if (g->cost_model && g->cost_model_free && !trial)
    g->cost_model_free (g->cost_model);
  if (g->implicit_edges)
    g_array_unref (g->implicit_edges);
  if (g->bucket_stats && g->bucket_stats_free)
    g->bucket_stats_free (g->bucket_stats);
  if (g->decompose_stats && g->decompose_stats_free)
    g->decompose_stats_free (g->decompose_stats);
  g_free (g);
}

const char *
sg_graph_intern (SgGraph *g, const char *s)
{
  return g_string_chunk_insert_const (g->strings, s);
}

/* --- groups ---------------------------------------------------------------- */

static int
cmp_i32 (const void *a, const void *b)
{
  int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
  return (x > y) - (x < y);
}

static char *
ranks_str (const int32_t *r, int32_t n)
{
  GString *s = g_string_new ("[");
  for (int32_t i = 0; i < n; i++)
    g_string_append_printf (s, "%s%d", i ? ", " : "", r[i]);
  g_string_append_c (s, ']');
  return g_string_free (s, FALSE);
}

/* Mesh-dimension inference: a contiguous block of n ranks, or n ranks at a
 * fixed stride s; the other instances are the same pattern shifted. */
static int32_t *
infer_partition (const int32_t *r, int32_t n, int32_t world, int32_t *n_instances)
{
  if (n == world) {
    *n_instances = 1;
    return g_memdup2 (r, sizeof (int32_t) * (size_t)n);
  }
  int32_t s = n > 1 ? r[1] - r[0] : 1;
  for (int32_t i = 1; i < n; i++)
    if (r[i] - r[i - 1] != s)
      return NULL;
  int64_t block = (int64_t)s * n;
  if (s <= 0 || world % block != 0)
    return NULL;
  *n_instances = world / n;
  int32_t *p = g_new (int32_t, (size_t)world);
  int32_t row = 0;
  for (int64_t b = 0; b < world; b += block)
    for (int32_t o = 0; o < s; o++, row++)
      for (int32_t i = 0; i < n; i++)
        p[row * n + i] = (int32_t)(b + o + (int64_t)i * s);
  return p;
}

int32_t
sg_graph_add_group (SgGraph *g, const char *name, const int32_t *ranks, int32_t n,
                    const int32_t *partition, int32_t n_instances, GError **error)
{
  if (sg_graph_find_group (g, name) >= 0) {
    g_set_error (error, SG_GRAPH_ERROR, SG_GRAPH_ERROR_GROUP, "groups: duplicate group '%s'", name);
    return -1;
  }
  if (n <= 0) {
    g_set_error (error, SG_GRAPH_ERROR, SG_GRAPH_ERROR_GROUP, "groups.%s.ranks: empty", name);
    return -1;
  }
  int32_t *sorted = g_memdup2 (ranks, sizeof (int32_t) * (size_t)n);
  qsort (sorted, (size_t)n, sizeof (int32_t), cmp_i32);
  for (int32_t i = 0; i < n; i++) {
    if (sorted[i] < 0 || sorted[i] >= g->world_size || (i && sorted[i] == sorted[i - 1])) {
      g_set_error (error, SG_GRAPH_ERROR, SG_GRAPH_ERROR_GROUP,
                   "groups.%s.ranks: rank %d is %s (world_size %d)", name, sorted[i],
                   (i && sorted[i] == sorted[i - 1]) ? "listed twice" : "outside the world",
                   g->world_size);
      g_free (sorted);
      return -1;
    }
  }
  int32_t *part;
  if (partition) {
    part = g_memdup2 (partition, sizeof (int32_t) * (size_t)n * (size_t)n_instances);
  } else {
    part = infer_partition (sorted, n, g->world_size, &n_instances);
    if (!part) {
      g_autofree char *rs = ranks_str (sorted, n);
      g_set_error (error, SG_GRAPH_ERROR, SG_GRAPH_ERROR_GROUP,
                   "groups.%s.ranks: cannot infer the other ranks' instances of %s in a world "
                   "of %d (not a block or a fixed stride); give `partition`",
                   name, rs, g->world_size);
      g_free (sorted);
      return -1;
    }
  }
  /* The partition must cover the world exactly once and hold our instance. */
  g_autofree int8_t *seen = g_new0 (int8_t, (size_t)g->world_size);
  bool ok = (int64_t)n * n_instances == g->world_size, has_own = false;
  for (int32_t row = 0; ok && row < n_instances; row++) {
    qsort (part + row * n, (size_t)n, sizeof (int32_t), cmp_i32);
    ok = memcmp (part + row * n, sorted, sizeof (int32_t) * (size_t)n) == 0 ? (has_own = true) : true;
    for (int32_t i = 0; ok && i < n; i++) {
      int32_t r = part[row * n + i];
      ok = r >= 0 && r < g->world_size && !seen[r];
      if (ok)
        seen[r] = 1;
    }
  }
  if (!ok || !has_own) {
    g_set_error (error, SG_GRAPH_ERROR, SG_GRAPH_ERROR_GROUP,
                 "groups.%s.partition: must split all %d ranks into groups of %d, one of them "
                 "equal to `ranks`",
                 name, g->world_size, n);
    g_free (sorted);
    g_free (part);
    return -1;
  }
  g->groups = g_renew (SgGroup, g->groups, (size_t)g->n_groups + 1);
  g->groups[g->n_groups] = (SgGroup){ g_strdup (name), sorted, n, part, n_instances };
  return g->n_groups++;
}

int32_t
sg_graph_find_group (const SgGraph *g, const char *name)
{
  for (int32_t i = 0; i < g->n_groups; i++)
    if (strcmp (g->groups[i].name, name) == 0)
      return i;
  return -1;
}

const int32_t *
sg_group_instance_of (const SgGroup *group, int32_t rank)
{
  for (int32_t i = 0; i < group->n_ranks * group->n_instances; i++)
    if (group->partition[i] == rank)
      return group->partition + (i / group->n_ranks) * group->n_ranks;
  return NULL;
}

/* --- node parsing ---------------------------------------------------------- */

#define FAIL(code, ...)                                                        \
  do {                                                                         \
    g_set_error (error, SG_GRAPH_ERROR, code, __VA_ARGS__);                    \
    return false;                                                              \
  } while (0)

static bool
json_int (const cJSON *v, int64_t *out)
{
  return cJSON_IsNumber (v) && sg_int62 (v->valuedouble, out);
}

/* Parses {shape, stride, dtype} into the dims pool. */
static bool
parse_meta (SgGraph *g, const char *node, const char *field, const cJSON *m, SgMeta *out,
            GError **error)
{
  out->ndim = -1;
  out->dtype = SG_DTYPE_INVALID;
  out->first = 0;
  if (!m || cJSON_IsNull (m))
    return true;
  if (!cJSON_IsObject (m))
    FAIL (SG_GRAPH_ERROR_FORMAT, "node '%s': %s: expected an object", node, field);
  const cJSON *shape = sg_json_member (m, "shape");
  const cJSON *stride = sg_json_member (m, "stride");
  const cJSON *dtype = sg_json_member (m, "dtype");
  if (!shape && !dtype)
    return true; /* no tensor value described */
  if (!cJSON_IsArray (shape))
    FAIL (SG_GRAPH_ERROR_FORMAT, "node '%s': %s.shape: expected a list of integers", node, field);
  int ndim = cJSON_GetArraySize (shape);
  if (ndim > SG_MAX_DIMS)
    FAIL (SG_GRAPH_ERROR_SHAPE, "node '%s': %s.shape: %d dimensions (at most %d)", node, field,
          ndim, SG_MAX_DIMS);
  if (!cJSON_IsString (dtype))
    FAIL (SG_GRAPH_ERROR_FORMAT, "node '%s': %s.dtype: expected a string", node, field);
  SgDtype dt = sg_dtype_from_name (dtype->valuestring);
  if (dt == SG_DTYPE_INVALID)
    FAIL (SG_GRAPH_ERROR_FORMAT, "node '%s': %s.dtype: unknown dtype '%s'", node, field,
          dtype->valuestring);
  if (stride && !cJSON_IsNull (stride)
      && (!cJSON_IsArray (stride) || cJSON_GetArraySize (stride) != ndim))
    FAIL (SG_GRAPH_ERROR_SHAPE, "node '%s': %s.stride: expected %d integers like shape", node,
          field, ndim);
  int64_t sh[SG_MAX_DIMS], st[SG_MAX_DIMS];
  int i = 0;
  const cJSON *v;
  uint64_t numel = 1;
  cJSON_ArrayForEach (v, shape)
  {
    if (!json_int (v, &sh[i]) || sh[i] < 0)
      FAIL (SG_GRAPH_ERROR_SHAPE, "node '%s': %s.shape[%d]: expected a non-negative integer",
            node, field, i);
    if (!sg_numel_times (&numel, sh[i]))
      FAIL (SG_GRAPH_ERROR_SHAPE, "node '%s': %s.shape: element count overflows 2^62", node,
            field);
    i++;
  }
  if (!sg_numel_bytes_ok (numel, dt))
    FAIL (SG_GRAPH_ERROR_SHAPE, "node '%s': %s.shape: byte size overflows 2^62", node, field);
  if (stride && cJSON_IsArray (stride)) {
    i = 0;
    cJSON_ArrayForEach (v, stride)
    {
      if (!json_int (v, &st[i]) || st[i] < 0)
        FAIL (SG_GRAPH_ERROR_SHAPE, "node '%s': %s.stride[%d]: expected a non-negative integer",
              node, field, i);
      i++;
    }
  } else {
    sg_shape_strides (sh, ndim, st);
  }
  out->ndim = ndim;
  out->dtype = dt;
  out->first = g->dims->len;
  g_array_append_vals (g->dims, sh, (guint)ndim);
  g_array_append_vals (g->dims, st, (guint)ndim);
  return true;
}

const char *
sg_node_op_name (SgNodeOp op)
{
  g_return_val_if_fail ((unsigned)op <= SG_NODE_OUTPUT, NULL);
  return sg_node_ops[op].text;
}

/* An integer argument as the loader accepts one: within +-2^62. */
static bool
arg_int62 (const SgArg *a, int64_t *out)
{
  return sg_arg_int (a, out) && *out >= -SG_MAX_EXTENT && *out <= SG_MAX_EXTENT;
}

/* The rule sg_collective_sizes_ok checks, as a message says it. */
static const char *
sizes_rule (SgOpKind kind)
{
  switch (sg_op_member_kind (kind)) {
  case SG_OP_ALL_GATHER: return "output = input x group size";
  case SG_OP_REDUCE_SCATTER: return "input = output x group size";
  default: return "output = input";
  }
}

/* A coalesced collective's inputs list (args[0], docs/graph-format.md):
 * a non-empty list of distinct tensor references, one per element of its
 * tuple result. @n is not in the graph yet; its args are in the pool. */
static bool
check_coalesced_list (const SgGraph *g, const SgNode *n, GError **error)
{
  const SgArg *list = n->n_args ? &g_array_index (g->args, SgArg, n->args_first) : NULL;
  if (!list || list->type != SG_ARG_LIST || list->n == 0)
    FAIL (SG_GRAPH_ERROR_FORMAT, "node '%s': args[0]: expected the list of input tensors (a "
          "coalesced collective takes one or more)", n->name);
  if (n->n_tuple != list->n)
    FAIL (SG_GRAPH_ERROR_SHAPE, "node '%s': meta.tuple: %u results for %u inputs (a coalesced "
          "collective returns one tensor per input)", n->name, n->n_tuple, list->n);
  g_autofree bool *seen = g_new0 (bool, (size_t)n->n_in + 1);
  for (uint32_t i = 0; i < list->n; i++) {
    const SgArg *a = &g_array_index (g->args, SgArg, list->first + i);
    if (a->type != SG_ARG_NODE)
      FAIL (SG_GRAPH_ERROR_FORMAT, "node '%s': args[0][%u]: expected a tensor reference", n->name,
            i);
    if (seen[a->input])
      FAIL (SG_GRAPH_ERROR_INVALID, "node '%s': args[0][%u]: an input listed twice (each "
            "member of a coalesced collective has its own)", n->name, i);
    seen[a->input] = true;
  }
  return true;
}

/* Member @i of collective @n (whose inputs are @inputs, the node perhaps
 * not in the graph yet): its input's position in @inputs and its output
 * meta (the node's, or element @i of a coalesced collective's tuple). */
static uint32_t
member_input (const SgGraph *g, const SgNode *n, uint32_t i)
{
  if (!sg_op_is_coalesced (n->kind))
    return 0;
  const SgArg *list = &g_array_index (g->args, SgArg, n->args_first);
  return g_array_index (g->args, SgArg, list->first + i).input;
}

static const SgMeta *
member_output (const SgGraph *g, const SgNode *n, uint32_t i)
{
  return sg_op_is_coalesced (n->kind) ? &g_array_index (g->tuple_metas, SgMeta, n->tuple_first + i)
                                      : &n->meta;
}

/* "meta.tuple[@i]" into @buf (32 bytes). */
static const char *
member_field (char *buf, uint32_t i)
{
  g_snprintf (buf, 32, "meta.tuple[%u]", i);
  return buf;
}

bool
sg_coll_check_members (const SgGraph *g, const SgNode *n, const SgNodeId *inputs,
                       SgNodeOf node_of, gconstpointer ctx, GError **error)
{
  const SgGroup *grp = &g->groups[n->group];
  bool coalesced = sg_op_is_coalesced (n->kind);
  if (coalesced && !check_coalesced_list (g, n, error))
    return false;
  /* Sizes must agree with the group: compare element counts of each
   * member's input and output where both are known. */
  if (n->n_in == 0)
    FAIL (SG_GRAPH_ERROR_FORMAT, "node '%s': args[0]: expected the input tensor", n->name);
  uint32_t members = coalesced ? n->n_tuple : 1;
  for (uint32_t i = 0; i < members; i++) {
    const SgNode *in = node_of (ctx, inputs[member_input (g, n, i)]);
    const SgMeta *im = &in->meta, *om = member_output (g, n, i);
    char fb[32]; /* the member's field, spelled out only for a message */
    if (coalesced && (im->ndim < 0 || om->ndim < 0))
      FAIL (SG_GRAPH_ERROR_FORMAT, "node '%s': %s: a member of a coalesced collective reads and "
            "returns a tensor ('%s' is none)", n->name,
            om->ndim < 0 ? member_field (fb, i) : "args[0]",
            om->ndim < 0 ? n->name : in->name);
    if (im->ndim < 0 || om->ndim < 0)
      continue;
    if (coalesced && im->dtype != om->dtype)
      FAIL (SG_GRAPH_ERROR_SHAPE, "node '%s': %s.dtype: %s, but its input '%s' is %s", n->name,
            member_field (fb, i), sg_dtype_name (om->dtype), in->name, sg_dtype_name (im->dtype));
    if (coalesced && om->dtype != member_output (g, n, 0)->dtype)
      FAIL (SG_GRAPH_ERROR_SHAPE, "node '%s': %s.dtype: %s, but member 0 is %s (the members of "
            "a coalesced collective share one dtype)", n->name, member_field (fb, i),
            sg_dtype_name (om->dtype),
            sg_dtype_name (member_output (g, n, 0)->dtype));
    uint64_t ie = sg_meta_numel (g, im), oe = sg_meta_numel (g, om);
    if (!sg_collective_sizes_ok (n->kind, ie, oe, (uint64_t)grp->n_ranks))
      FAIL (SG_GRAPH_ERROR_GROUP,
            "node '%s': %s.shape: %" G_GUINT64_FORMAT " elements out for %" G_GUINT64_FORMAT
            " in disagrees with group '%s' of %d ranks (%s)",
            n->name, coalesced ? member_field (fb, i) : "meta", oe, ie, grp->name, grp->n_ranks,
            sizes_rule (n->kind));
  }
  return true;
}

static bool
check_collective (SgGraph *g, SgNode *n, const SgNodeId *inputs, SgNodeOf node_of,
                  gconstpointer ctx, GError **error)
{
  int group_arg = sg_op_param_pos (n->kind, SG_PARAM_GROUP_NAME);
  int size_arg = sg_op_param_pos (n->kind, SG_PARAM_GROUP_SIZE);
  int reduce_arg = sg_op_param_pos (n->kind, SG_PARAM_REDUCE_OP);
  /* n is not in g->nodes yet; a node without arguments has no slot in
   * g->args (whose data may then be NULL): no address is formed for it */
#define ARG(i)                                                                                     \
  ((i) >= 0 && (uint32_t)(i) < n->n_args                                                         \
       ? &g_array_index (g->args, SgArg, n->args_first + (uint32_t)(i))                          \
       : NULL)
  const char *gname =
      ARG (group_arg) && ARG (group_arg)->type == SG_ARG_STR ? ARG (group_arg)->s : NULL;
  if (!gname)
    FAIL (SG_GRAPH_ERROR_GROUP, "node '%s': args[%d]: expected the group name (a string)", n->name,
          group_arg);
  n->group = sg_graph_find_group (g, gname);
  if (n->group < 0)
    FAIL (SG_GRAPH_ERROR_GROUP, "node '%s': args[%d]: group '%s' is not in `groups`", n->name,
          group_arg, gname);
  const SgGroup *grp = &g->groups[n->group];
  n->group_size = grp->n_ranks;
  if (size_arg >= 0) {
    int64_t size;
    if (!arg_int62 (ARG (size_arg), &size))
      FAIL (SG_GRAPH_ERROR_GROUP, "node '%s': args[%d]: expected the group size (an integer)",
            n->name, size_arg);
    if (size != grp->n_ranks)
      FAIL (SG_GRAPH_ERROR_GROUP, "node '%s': args[%d]: group size %" G_GINT64_FORMAT
            " disagrees with group '%s' of %d ranks",
            n->name, size_arg, size, grp->name, grp->n_ranks);
  }
  if (reduce_arg >= 0) {
    const SgArg *r = ARG (reduce_arg);
    if (!r || r->type != SG_ARG_STR || !sg_reduce_from_name (r->s, &n->reduce))
      FAIL (SG_GRAPH_ERROR_FORMAT, "node '%s': args[%d]: expected a reduce op (sum, avg, max, "
            "min, product)", n->name, reduce_arg);
  }
#undef ARG
  if (!sg_coll_check_members (g, n, inputs, node_of, ctx, error))
    return false;
  if (n->kind == SG_OP_COLLECTIVE_PERMUTE) {
    SgPermute p;
    bool ok = sg_permute_read (g, n, &p, error);
    sg_permute_clear (&p);
    if (!ok)
      return false;
  }
  return true;
}

/* The coalesced collective whose element @id (a node, perhaps added by a
 * rewrite) is, or SG_NO_NODE. */
static SgNodeId
coalesced_source (SgNodeOf node_of, SgInputOf input_of, gconstpointer ctx, SgNodeId id)
{
  if (node_of (ctx, id)->kind != SG_OP_GETITEM)
    return SG_NO_NODE;
  SgNodeId src = input_of (ctx, id);
  return src != SG_NO_NODE && sg_op_is_coalesced (node_of (ctx, src)->kind) ? src : SG_NO_NODE;
}

bool
sg_node_finish (SgGraph *g, SgNode *n, const SgNodeId *inputs, SgNodeOf node_of,
                SgInputOf input_of, gconstpointer ctx, GError **error)
{
  if (n->op != SG_NODE_CALL)
    n->kind = sg_node_op_kind (n->op);
  else if (n->kind == SG_OP_UNKNOWN) /* a kind set by the caller is its target's */
    n->kind = sg_op_from_target (n->target);
  n->group = -1;
  n->getitem_index = -1;
  /* a coalesced collective's results are a list: only getitem reads it */
  for (uint32_t j = 0; j < n->n_in && n->kind != SG_OP_GETITEM; j++)
    if (sg_op_is_coalesced (node_of (ctx, inputs[j])->kind))
      FAIL (SG_GRAPH_ERROR_INVALID, "node '%s': args: reads coalesced collective '%s' directly "
            "(its results are read through getitem)", n->name, node_of (ctx, inputs[j])->name);
  if (sg_op_is_collective (n->kind))
    return check_collective (g, n, inputs, node_of, ctx, error);
  if (n->kind == SG_OP_WAIT) {
    const SgNode *c = n->n_in ? node_of (ctx, inputs[0]) : NULL;
    bool element = c && coalesced_source (node_of, input_of, ctx, inputs[0]) != SG_NO_NODE;
    if (!c || (!sg_op_is_collective (c->kind) && !element))
      FAIL (SG_GRAPH_ERROR_INVALID,
            "node '%s': args[0]: wait_tensor must wait on a collective%s%s%s", n->name,
            c ? " ('" : "", c ? c->name : "", c ? "' is not one)" : "");
  } else if (n->kind == SG_OP_GETITEM) {
    int64_t idx;
    const SgArg *ia = n->n_args > 1 ? &g_array_index (g->args, SgArg, n->args_first + 1) : NULL;
    if (n->n_in != 1 || !arg_int62 (ia, &idx) || idx < 0)
      FAIL (SG_GRAPH_ERROR_FORMAT, "node '%s': args: getitem takes (node, index >= 0)", n->name);
    const SgNode *src = node_of (ctx, inputs[0]);
    if (src->n_tuple && idx >= src->n_tuple)
      FAIL (SG_GRAPH_ERROR_FORMAT, "node '%s': args[1]: index %" G_GINT64_FORMAT
            " out of range for '%s' (a tuple of %u)", n->name, idx, src->name, src->n_tuple);
    n->getitem_index = (int32_t)idx;
  } else if (n->kind == SG_OP_RANK_ROLL) {
    SgRankRoll rr;
    return sg_rank_roll_read (g, n, n->n_in ? node_of (ctx, inputs[0]) : NULL, &rr, error);
  }
  return true;
}

const SgNode *
sg_graph_node_of (gconstpointer ctx, SgNodeId id)
{
  return &((const SgGraph *)ctx)->nodes[id];
}

SgNodeId
sg_graph_input_of (gconstpointer ctx, SgNodeId id)
{
  const SgGraph *g = ctx;
  uint32_t k;
  const SgNodeId *in = sg_node_inputs (g, id, &k);
  return k ? in[0] : SG_NO_NODE;
}

SgNodeId
sg_graph_append (SgGraph *g, const cJSON *obj, GError **error)
{
  return sg_graph_append_with (g, obj, NULL, error);
}

/* Target @t interned, and its kind in *@kind (SG_OP_UNKNOWN: left to
 * sg_node_finish), through @scratch's cache when there is one. */
static const char *
intern_target (SgGraph *g, SgAppendScratch *scratch, const char *t, SgOpKind *kind)
{
  *kind = SG_OP_UNKNOWN;
  if (!scratch)
    return sg_graph_intern (g, t);
  uint32_t h = 2166136261u; /* FNV-1a */
  for (const char *c = t; *c; c++)
    h = (h ^ (unsigned char)*c) * 16777619u;
  SgTargetEntry *e = &scratch->targets[h % SG_TARGET_CACHE];
  if (!e->target || strcmp (e->target, t) != 0) {
    e->target = sg_graph_intern (g, t);
    e->kind = sg_op_from_target (e->target);
  }
  *kind = e->kind;
  return e->target;
}

SgNodeId
sg_graph_append_with (SgGraph *g, const cJSON *obj, SgAppendScratch *scratch, GError **error)
{
#define NFAIL(code, ...)                                                       \
  do {                                                                         \
    g_set_error (error, SG_GRAPH_ERROR, code, __VA_ARGS__);                    \
    goto fail;                                                                 \
  } while (0)
  guint dims_len = g->dims->len, tuples_len = g->tuple_metas->len, inputs_len = g->inputs->len;
  guint args_len = g->args->len;
  SgArgBuild ab = { 0 };
  if (!cJSON_IsObject (obj))
    NFAIL (SG_GRAPH_ERROR_FORMAT, "node #%d: expected an object", g->n_nodes);
  const cJSON *jname = sg_json_member (obj, "name");
  if (!cJSON_IsString (jname) || !jname->valuestring[0])
    NFAIL (SG_GRAPH_ERROR_FORMAT, "node #%d: field 'name': expected a non-empty string",
           g->n_nodes);
  const char *name = jname->valuestring;
  SgNodeId dup = sg_graph_lookup (g, name);
  if (dup != SG_NO_NODE)
    NFAIL (SG_GRAPH_ERROR_REF, "node '%s' (#%d): duplicate name (already node #%d)", name,
           g->n_nodes, dup);
  const cJSON *jop = sg_json_member (obj, "op");
  if (!cJSON_IsString (jop))
    NFAIL (SG_GRAPH_ERROR_FORMAT, "node '%s': field 'op': expected a string", name);
  int op_or_none = sg_node_op_from_text (jop->valuestring, strlen (jop->valuestring));
  if (op_or_none < 0)
    NFAIL (SG_GRAPH_ERROR_FORMAT,
           "node '%s': field 'op': unknown op '%s' (placeholder, get_attr, call_function, output)",
           name, jop->valuestring);
  SgNodeOp op = (SgNodeOp)op_or_none;
  const cJSON *jtarget = sg_json_member (obj, "target");
  if (!cJSON_IsString (jtarget))
    NFAIL (SG_GRAPH_ERROR_FORMAT, "node '%s': field 'target': expected a string", name);
  const cJSON *args = sg_json_member (obj, "args");
  const cJSON *kwargs = sg_json_member (obj, "kwargs");
  if (args && !cJSON_IsArray (args))
    NFAIL (SG_GRAPH_ERROR_FORMAT, "node '%s': field 'args': expected a list", name);
  if (kwargs && !cJSON_IsObject (kwargs))
    NFAIL (SG_GRAPH_ERROR_FORMAT, "node '%s': field 'kwargs': expected an object", name);
  if (op == SG_NODE_OUTPUT && g->output != SG_NO_NODE)
    NFAIL (SG_GRAPH_ERROR_INVALID, "node '%s': a second output node (first: '%s')", name,
           g->nodes[g->output].name);

  SgNode n = { 0 };
  n.op = op;
  sg_arg_build_init (&ab, g, name, NULL, scratch ? scratch->refs : NULL, error);
  if (!sg_args_from_json (&ab, args, kwargs, &n))
    goto fail;
  n.name = g_string_chunk_insert (g->strings, name); /* unique: no table of names to share */
  n.target = intern_target (g, scratch, jtarget->valuestring, &n.kind);
  n.cost_us = NAN;

  const cJSON *meta = sg_json_member (obj, "meta");
  const cJSON *tuple = meta ? sg_json_member (meta, "tuple") : NULL;
  if (tuple) {
    if (!cJSON_IsArray (tuple))
      NFAIL (SG_GRAPH_ERROR_FORMAT, "node '%s': meta.tuple: expected a list", name);
    n.meta.ndim = -1;
    /* Straight into the pool (rolled back on failure): a tuple may be
     * long, so nothing proportional to it goes on the stack. */
    n.tuple_first = g->tuple_metas->len;
    uint32_t k = 0;
    const cJSON *e;
    cJSON_ArrayForEach (e, tuple)
    {
      char field[32];
      SgMeta m;
      g_snprintf (field, sizeof field, "meta.tuple[%u]", k);
      if (!parse_meta (g, name, field, e, &m, error))
        goto fail;
      g_array_append_val (g->tuple_metas, m);
      k++;
    }
    n.n_tuple = k;
  } else if (!parse_meta (g, name, "meta", meta, &n.meta, error)) {
    goto fail;
  }

  const cJSON *cost = sg_json_member (obj, "cost_us");
  if (cost) {
    if (!cJSON_IsNumber (cost))
      NFAIL (SG_GRAPH_ERROR_FORMAT, "node '%s': field 'cost_us': expected a number of "
             "microseconds", name);
    if (!(cost->valuedouble >= 0 && cost->valuedouble < SG_MAX_COST_US))
      NFAIL (SG_GRAPH_ERROR_FORMAT, "node '%s': field 'cost_us': %g is outside [0, %g) "
             "microseconds", name, cost->valuedouble, SG_MAX_COST_US);
    n.cost_us = cost->valuedouble;
  }
  const cJSON *sms = sg_json_member (obj, "sm_count");
  if (sms) {
    int64_t v;
    if (!json_int (sms, &v) || v < 0 || v > SG_MAX_SM_COUNT)
      NFAIL (SG_GRAPH_ERROR_FORMAT, "node '%s': field 'sm_count': expected an integer in [0, %d]",
             name, SG_MAX_SM_COUNT);
    n.sm_count = (int32_t)v;
  }

  n.in_first = g->inputs->len;
  n.n_in = ab.refs->len;
  g_array_append_vals (g->inputs, ab.refs->data, ab.refs->len);

  if (g->n_nodes == G_MAXINT32 - 1)
    NFAIL (SG_GRAPH_ERROR_INVALID, "node '%s': too many nodes", name);
  if (!sg_node_finish (g, &n, (const SgNodeId *)(void *)ab.refs->data, sg_graph_node_of,
                       sg_graph_input_of, g, error))
    goto fail;
  if (g->n_nodes == g->nodes_cap) {
    g->nodes_cap = g->nodes_cap ? g->nodes_cap * 2 : 256;
    g->nodes = g_renew (SgNode, g->nodes, (size_t)g->nodes_cap);
  }
  SgNodeId id = g->n_nodes;
  g->nodes[id] = n;
  if (op == SG_NODE_OUTPUT)
    g->output = id;
  g->n_nodes++;
  g_clear_pointer (&g->name_table, sg_name_table_free); /* it lacks this node */
  g_hash_table_insert (sg_graph_names (g), (gpointer)g->nodes[id].name, GINT_TO_POINTER (id + 1));
  sg_graph_changed (g);
  sg_arg_build_clear (&ab);
  return id;

fail:
  g_array_set_size (g->dims, dims_len);
  g_array_set_size (g->tuple_metas, tuples_len);
  g_array_set_size (g->inputs, inputs_len);
  g_array_set_size (g->args, args_len);
  sg_arg_build_clear (&ab);
  return SG_NO_NODE;
#undef NFAIL
}

SgNodeId
sg_graph_append_json (SgGraph *g, const char *node_json, GError **error)
{
  cJSON *obj = cJSON_Parse (node_json);
  if (!obj) {
    g_set_error (error, SG_GRAPH_ERROR, SG_GRAPH_ERROR_PARSE, "node #%d: malformed JSON",
                 g->n_nodes);
    return SG_NO_NODE;
  }
  SgNodeId id = sg_graph_append (g, obj, error);
  cJSON_Delete (obj);
  return id;
}

/* --- queries ---------------------------------------------------------------- */

GHashTable *
sg_graph_names (const SgGraph *g)
{
  if (!g->by_name) {
    SgGraph *m = (SgGraph *)g;
    m->by_name = g_hash_table_new (g_str_hash, g_str_equal);
    for (SgNodeId i = 0; i < g->n_nodes; i++)
      g_hash_table_insert (m->by_name, (gpointer)g->nodes[i].name, GINT_TO_POINTER (i + 1));
  }
  return g->by_name;
}

void
sg_graph_names_drop (SgGraph *g)
{
  g_clear_pointer (&g->by_name, g_hash_table_unref);
  g_clear_pointer (&g->name_table, sg_name_table_free);
}

SgNodeId
sg_graph_lookup (const SgGraph *g, const char *name)
{
  gpointer v = g_hash_table_lookup (sg_graph_names (g), name);
  return v ? GPOINTER_TO_INT (v) - 1 : SG_NO_NODE;
}

uint64_t
sg_meta_numel (const SgGraph *g, const SgMeta *m)
{
  if (m->ndim < 0)
    return 0;
  const int64_t *sh = sg_meta_shape (g, m);
  uint64_t n = 1;
  for (int32_t i = 0; i < m->ndim; i++)
    n *= (uint64_t)sh[i];
  return n;
}

uint64_t
sg_meta_bytes (const SgGraph *g, const SgMeta *m)
{
  return sg_meta_numel (g, m) * sg_dtype_size (m->dtype);
}

uint64_t
sg_node_alloc_bytes (const SgGraph *g, SgNodeId id)
{
  const SgNode *n = &g->nodes[id];
  if (sg_op_is_alias (n->kind) || n->kind == SG_OP_OUTPUT)
    return 0;
  if (n->n_tuple) {
    uint64_t sum = 0;
    for (uint32_t i = 0; i < n->n_tuple; i++)
      sum += sg_meta_bytes (g, sg_node_tuple_meta (g, id, i));
    return sum;
  }
  return sg_meta_bytes (g, &n->meta);
}

uint32_t
sg_node_coll_members (const SgGraph *g, SgNodeId id)
{
  const SgNode *n = &g->nodes[id];
  if (!sg_op_is_collective (n->kind))
    return 0;
  return sg_op_is_coalesced (n->kind) ? n->n_tuple : 1;
}

SgNodeId
sg_node_coll_input (const SgGraph *g, SgNodeId id, uint32_t i)
{
  const SgNode *n = &g->nodes[id];
  if (i >= sg_node_coll_members (g, id) || n->n_in == 0)
    return SG_NO_NODE;
  uint32_t k;
  return sg_node_inputs (g, id, &k)[member_input (g, n, i)];
}

const SgMeta *
sg_node_coll_output (const SgGraph *g, SgNodeId id, uint32_t i)
{
  g_return_val_if_fail (i < sg_node_coll_members (g, id), &g->nodes[id].meta);
  return member_output (g, &g->nodes[id], i);
}

uint64_t
sg_node_member_bytes (const SgGraph *g, SgNodeId id, uint32_t i)
{
  const SgNode *n = &g->nodes[id];
  if (i >= sg_node_coll_members (g, id))
    return 0;
  if (sg_op_member_kind (n->kind) == SG_OP_REDUCE_SCATTER) {
    SgNodeId in = sg_node_coll_input (g, id, i);
    return in == SG_NO_NODE ? 0 : sg_meta_bytes (g, &g->nodes[in].meta);
  }
  return sg_meta_bytes (g, member_output (g, n, i));
}

uint64_t
sg_node_comm_bytes (const SgGraph *g, SgNodeId id)
{
  uint64_t sum = 0;
  uint32_t m = sg_node_coll_members (g, id);
  for (uint32_t i = 0; i < m; i++)
    sum += sg_node_member_bytes (g, id, i);
  return sum;
}

SgNodeId
sg_node_storage_root (const SgGraph *g, SgNodeId id)
{
  while (sg_op_is_alias (g->nodes[id].kind) && g->nodes[id].n_in > 0) {
    uint32_t k;
    id = sg_node_inputs (g, id, &k)[0];
  }
  return id;
}

void
sg_graph_fill_users (SgGraph *g)
{
  if (g->user_first)
    return;
  uint32_t *first = g_new0 (uint32_t, (size_t)g->n_nodes + 1);
  for (SgNodeId i = 0; i < g->n_nodes; i++) {
    uint32_t k;
    const SgNodeId *in = sg_node_inputs (g, i, &k);
    for (uint32_t j = 0; j < k; j++)
      first[in[j] + 1]++;
  }
  for (SgNodeId i = 0; i < g->n_nodes; i++)
    first[i + 1] += first[i];
  SgNodeId *users = g_new (SgNodeId, (size_t)first[g->n_nodes] + 1);
  g_autofree uint32_t *fill = g_memdup2 (first, sizeof (uint32_t) * (size_t)g->n_nodes);
  for (SgNodeId i = 0; i < g->n_nodes; i++) {
    uint32_t k;
    const SgNodeId *in = sg_node_inputs (g, i, &k);
    for (uint32_t j = 0; j < k; j++)
      users[fill[in[j]]++] = i; /* ascending user ids: the loop runs in id order */
  }
  g->user_first = first;
  g->users = users;
}

/* --- mutation --------------------------------------------------------------- */

bool
sg_graph_check_order (const SgGraph *g, const SgNodeId *order, int32_t n, SgNodeId *new_id,
                      GError **error)
{
  g_return_val_if_fail (g && (order || n == 0) && n >= 0 && n <= g->n_nodes, false);
  g_autofree SgNodeId *own = new_id ? NULL : g_new (SgNodeId, (size_t)g->n_nodes + 1);
  SgNodeId *pos = new_id ? new_id : own;
  for (int32_t i = 0; i < g->n_nodes; i++)
    pos[i] = SG_NO_NODE;
  for (int32_t i = 0; i < n; i++) {
    SgNodeId o = order[i];
    if (o < 0 || o >= g->n_nodes) {
      g_set_error (error, SG_GRAPH_ERROR, SG_GRAPH_ERROR_CYCLE,
                   "order position %d: node id %d is not a node of the graph", i, o);
      return false;
    }
    if (pos[o] != SG_NO_NODE) {
      g_set_error (error, SG_GRAPH_ERROR, SG_GRAPH_ERROR_CYCLE,
                   "order position %d: node '%s' is repeated (first at position %d)", i,
                   g->nodes[o].name, pos[o]);
      return false;
    }
    pos[o] = i;
  }
  /* The output reads what the step returns and nothing reads it: it is
   * the last node of every order (graph-format.md). */
  if (g->output != SG_NO_NODE && pos[g->output] == SG_NO_NODE) {
    g_set_error (error, SG_GRAPH_ERROR, SG_GRAPH_ERROR_REF,
                 "order: node '%s': the output node cannot be removed", g->nodes[g->output].name);
    return false;
  }
  if (g->output != SG_NO_NODE && pos[g->output] != n - 1) {
    g_set_error (error, SG_GRAPH_ERROR, SG_GRAPH_ERROR_CYCLE,
                 "order position %d: the output node '%s' must come last (position %d)",
                 pos[g->output], g->nodes[g->output].name, n - 1);
    return false;
  }
  for (int32_t i = 0; i < n; i++) {
    uint32_t k;
    const SgNodeId *in = sg_node_inputs (g, order[i], &k);
    for (uint32_t j = 0; j < k; j++) {
      if (pos[in[j]] == SG_NO_NODE) {
        g_set_error (error, SG_GRAPH_ERROR, SG_GRAPH_ERROR_REF,
                     "order position %d: node '%s' reads '%s', which the order leaves out", i,
                     g->nodes[order[i]].name, g->nodes[in[j]].name);
        return false;
      }
      if (pos[in[j]] > i) {
        g_set_error (error, SG_GRAPH_ERROR, SG_GRAPH_ERROR_CYCLE,
                     "order position %d: node '%s' comes before its input '%s' (position %d)", i,
                     g->nodes[order[i]].name, g->nodes[in[j]].name, pos[in[j]]);
        return false;
      }
    }
  }
  return true;
}

bool
sg_graph_permute (SgGraph *g, const SgNodeId *order, GError **error)
{
  int32_t n = g->n_nodes;
  g_autofree SgNodeId *new_id = g_new (SgNodeId, (size_t)n + 1);
  if (!sg_graph_check_order (g, order, n, new_id, error))
    return false;
  SgNode *nodes = g_new (SgNode, (size_t)g->nodes_cap);
  for (int32_t i = 0; i < n; i++)
    nodes[i] = g->nodes[order[i]];
  g_free (g->nodes);
  g->nodes = nodes;
  for (guint j = 0; j < g->inputs->len; j++) {
    SgNodeId *p = &g_array_index (g->inputs, SgNodeId, j);
    *p = new_id[*p];
  }
  sg_graph_names_drop (g);
  if (g->output != SG_NO_NODE)
    g->output = new_id[g->output];
  for (guint j = 0; g->implicit_edges && j < g->implicit_edges->len; j++) {
    SgImplicitEdge *e = &g_array_index (g->implicit_edges, SgImplicitEdge, j);
    e->from = new_id[e->from];
    e->to = new_id[e->to];
  }
  sg_graph_changed (g);
  return true;
}
