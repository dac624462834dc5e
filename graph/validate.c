/* validate.c: the IR validator's rules (Mesa's nir_validate for
 * schedgraph): each node's, as sg_validate_node checks them.
 *
 * Checks every invariant of graph.h and every rule under "Errors" of
 * graph-format.md on the IR as it is, whoever built it: the loader, the
 * test builder, or a pass that just rewrote it. It runs after loading and,
 * in test and debug builds, after every pass (sg_pass_run). Each rule has
 * its own message naming the node and the field. A node's rules read the
 * node, its inputs and what validate-graph.c fixed before (each node's op
 * and kind, the first wait on each collective, the first getitem of each
 * coalesced element), so nodes are checked in any order, on any thread;
 * validate-graph.c runs them and the rules of the whole graph.
 *
 * Requires: nothing (it trusts no derived table). Invalidates: nothing.
 */
#include "graph-private.h"

#include <string.h>


/* The field a message names: "meta", or "meta.tuple[T]" for @t >= 0
 * (formatted only when a rule fails). */
static const char *
meta_field (char buf[32], int64_t t)
{
  if (t < 0)
    return "meta";
  g_snprintf (buf, 32, "meta.tuple[%" G_GINT64_FORMAT "]", t);
  return buf;
}

static bool
validate_meta (const SgGraph *g, const SgNode *n, const SgMeta *m, int64_t t, GError **error)
{
  if (m->ndim < 0)
    return true;
  char buf[32];
  if (m->ndim > SG_MAX_DIMS)
    VFAIL (SG_GRAPH_ERROR_SHAPE, "node '%s': %s.shape: %d dimensions (at most %d)", n->name,
           meta_field (buf, t), m->ndim, SG_MAX_DIMS);
  if ((uint64_t)m->first + 2 * (uint64_t)m->ndim > g->dims->len)
    VFAIL (SG_GRAPH_ERROR_INVALID, "node '%s': %s: dims outside the pool", n->name,
           meta_field (buf, t));
  if (m->dtype <= SG_DTYPE_INVALID || m->dtype >= SG_DTYPE_N)
    VFAIL (SG_GRAPH_ERROR_FORMAT, "node '%s': %s.dtype: not a known dtype", n->name,
           meta_field (buf, t));
  const int64_t *sh = sg_meta_shape (g, m), *st = sg_meta_stride (g, m);
  uint64_t numel = 1;
  for (int32_t d = 0; d < m->ndim; d++) {
    if (sh[d] < 0)
      VFAIL (SG_GRAPH_ERROR_SHAPE, "node '%s': %s.shape[%d]: negative extent %" G_GINT64_FORMAT,
             n->name, meta_field (buf, t), d, sh[d]);
    if (st[d] < 0)
      VFAIL (SG_GRAPH_ERROR_SHAPE, "node '%s': %s.stride[%d]: negative stride %" G_GINT64_FORMAT,
             n->name, meta_field (buf, t), d, st[d]);
    if (!sg_numel_times (&numel, sh[d]))
      VFAIL (SG_GRAPH_ERROR_SHAPE, "node '%s': %s.shape: element count overflows 2^62", n->name,
             meta_field (buf, t));
  }
  if (!sg_numel_bytes_ok (numel, m->dtype))
    VFAIL (SG_GRAPH_ERROR_SHAPE, "node '%s': %s.shape: byte size overflows 2^62", n->name,
           meta_field (buf, t));
  return true;
}

/* Elements a strided tensor reaches from its first one: 0 when empty. */
static uint64_t
span_of (const SgGraph *g, const SgMeta *m)
{
  const int64_t *sh = sg_meta_shape (g, m), *st = sg_meta_stride (g, m);
  uint64_t span = 1;
  for (int32_t d = 0; d < m->ndim; d++) {
    if (sh[d] == 0)
      return 0;
    uint64_t reach = (uint64_t)(sh[d] - 1), step = (uint64_t)st[d];
    if (step && reach > (G_MAXUINT64 - span) / step)
      return G_MAXUINT64; /* absurd strides: reaches everything */
    span += reach * step;
  }
  return span;
}

/* A value that gets its own storage (not an alias) holds numel elements:
 * its strides cannot reach past them (dense in some dim order, or
 * overlapping with stride 0), else kernels would write outside it. */
static bool
validate_fresh (const SgGraph *g, SgNodeId id, GError **error)
{
  const SgNode *n = &g->nodes[id];
  uint32_t count = n->n_tuple ? n->n_tuple : 1;
  for (uint32_t t = 0; t < count; t++) {
    const SgMeta *m = n->n_tuple ? sg_node_tuple_meta (g, id, t) : &n->meta;
    if (m->ndim < 0)
      continue;
    uint64_t span = span_of (g, m), numel = sg_meta_numel (g, m);
    if (span > numel) {
      char field[32] = "meta";
      if (n->n_tuple)
        g_snprintf (field, sizeof field, "meta.tuple[%u]", t);
      VFAIL (SG_GRAPH_ERROR_SHAPE, "node '%s': %s.stride: reaches %" G_GUINT64_FORMAT
             " elements, but the value holds %" G_GUINT64_FORMAT, n->name, field, span, numel);
    }
  }
  return true;
}

/* A view has an input tensor (its args[0]: a view of nothing has no
 * storage to alias) and reads its elements only: it cannot reach further
 * than the input does (slices start later, so this bound holds for them
 * too), and it keeps the element type. */
static bool
validate_view (const SgGraph *g, SgNodeId id, GError **error)
{
  const SgNode *n = &g->nodes[id];
  if (n->n_in == 0)
    VFAIL (SG_GRAPH_ERROR_FORMAT, "node '%s': args[0]: a view (%s) needs an input tensor", n->name,
           sg_op_name (n->kind));
  if (n->meta.ndim < 0)
    return true;
  uint32_t k;
  const SgNode *base = &g->nodes[sg_node_inputs (g, id, &k)[0]];
  if (base->meta.ndim < 0)
    return true;
  if (base->meta.dtype != n->meta.dtype)
    VFAIL (SG_GRAPH_ERROR_SHAPE, "node '%s': meta.dtype: %s, but the %s of '%s' (%s) keeps the "
           "element type", n->name, sg_dtype_name (n->meta.dtype), sg_op_name (n->kind),
           base->name, sg_dtype_name (base->meta.dtype));
  uint64_t span = span_of (g, &n->meta), base_span = span_of (g, &base->meta);
  if (span > base_span)
    VFAIL (SG_GRAPH_ERROR_SHAPE,
           "node '%s': meta.shape/stride: the %s reaches %" G_GUINT64_FORMAT " elements, but its "
           "input '%s' spans only %" G_GUINT64_FORMAT,
           n->name, sg_op_name (n->kind), span, base->name, base_span);
  return true;
}

/* Matmul family shapes: mm [m,k] x [k,n] -> [m,n]; bmm with a batch dim;
 * addmm/baddbmm take the bias first. The cost model counts flops from
 * these shapes and the runtime refuses disagreeing ones, so say it here. */
static bool
validate_matmul (const SgGraph *g, SgNodeId id, GError **error)
{
  const SgNode *n = &g->nodes[id];
  bool batched = n->kind == SG_OP_BMM || n->kind == SG_OP_BADDBMM;
  int32_t rank = batched ? 3 : 2;
  SgParam pa, pb;
  if (n->meta.ndim < 0 || !sg_op_matmul_params (n->kind, &pa, &pb))
    return true;
  const SgMeta *a = sg_node_param_meta (g, id, pa), *b = sg_node_param_meta (g, id, pb);
  const char *an = a ? g->nodes[sg_node_param_node (g, id, pa)].name : NULL;
  const char *bn = b ? g->nodes[sg_node_param_node (g, id, pb)].name : NULL;
  bool ok = true;
  if (!a || !b) {
    g_set_error (error, SG_GRAPH_ERROR, SG_GRAPH_ERROR_FORMAT,
                 "node '%s': args[%d]: %s needs a tensor (a reference to a node with meta) here",
                 n->name, sg_op_param_pos (n->kind, a ? pb : pa), sg_op_name (n->kind));
    ok = false;
  } else {
    const int64_t *as = sg_meta_shape (g, a), *bs = sg_meta_shape (g, b);
    const int64_t *os = sg_meta_shape (g, &n->meta);
    if (a->ndim != rank || b->ndim != rank || n->meta.ndim != rank) {
      g_set_error (error, SG_GRAPH_ERROR, SG_GRAPH_ERROR_SHAPE,
                   "node '%s': meta.shape: %s takes %d-d operands and gives a %d-d result "
                   "('%s' is %d-d, '%s' %d-d, the result %d-d)",
                   n->name, sg_op_name (n->kind), rank, rank, an, a->ndim, bn, b->ndim,
                   n->meta.ndim);
      ok = false;
    } else if (as[rank - 1] != bs[rank - 2] || os[rank - 2] != as[rank - 2]
               || os[rank - 1] != bs[rank - 1]
               || (batched && (as[0] != bs[0] || os[0] != as[0]))) {
      g_set_error (error, SG_GRAPH_ERROR, SG_GRAPH_ERROR_SHAPE,
                   "node '%s': meta.shape: %s of '%s' [%s%" G_GINT64_FORMAT ", %" G_GINT64_FORMAT
                   "] and '%s' [%s%" G_GINT64_FORMAT ", %" G_GINT64_FORMAT
                   "] cannot give [%s%" G_GINT64_FORMAT ", %" G_GINT64_FORMAT "]",
                   n->name, sg_op_name (n->kind), an, batched ? "B, " : "", as[rank - 2],
                   as[rank - 1], bn, batched ? "B, " : "", bs[rank - 2], bs[rank - 1],
                   batched ? "B, " : "", os[rank - 2], os[rank - 1]);
      ok = false;
    }
  }
  return ok;
}

/* Pointwise results have the broadcast shape of their tensor inputs:
 * right-aligned, each input dim equal to the result's or 1, and each
 * result dim reached by some input (or 1). */
static bool
validate_pointwise (const SgGraph *g, SgNodeId id, GError **error)
{
  const SgNode *n = &g->nodes[id];
  if (n->meta.ndim < 0)
    return true;
  const int64_t *os = sg_meta_shape (g, &n->meta);
  int64_t reach[SG_MAX_DIMS];
  for (int32_t d = 0; d < n->meta.ndim; d++)
    reach[d] = 1;
  uint32_t k;
  const SgNodeId *in = sg_node_inputs (g, id, &k);
  uint32_t tensors = 0;
  for (uint32_t j = 0; j < k; j++) {
    const SgNode *a = &g->nodes[in[j]];
    if (a->meta.ndim < 0)
      continue;
    tensors++;
    const int64_t *as = sg_meta_shape (g, &a->meta);
    int32_t off = n->meta.ndim - a->meta.ndim;
    for (int32_t d = 0; d < a->meta.ndim; d++)
      if (off < 0 || (as[d] != 1 && as[d] != os[off + d]))
        VFAIL (SG_GRAPH_ERROR_SHAPE, "node '%s': meta.shape: input '%s' (dim %d of %" G_GINT64_FORMAT
               ") does not broadcast to the %s result", n->name, a->name, d, as[d],
               sg_op_name (n->kind));
      else if (as[d] != 1)
        reach[off + d] = as[d];
  }
  for (int32_t d = 0; tensors && d < n->meta.ndim; d++)
    if (reach[d] != os[d])
      VFAIL (SG_GRAPH_ERROR_SHAPE, "node '%s': meta.shape[%d]: %" G_GINT64_FORMAT ", but the "
             "inputs broadcast to %" G_GINT64_FORMAT, n->name, d, os[d], reach[d]);
  return true;
}

/* Reductions: sum.dim_IntList / mean.dim / amax (x, dims, keepdim) drop
 * the reduced dims (or keep them as 1); an empty dim list and sum/mean
 * .default reduce every dim. Dims may be negative, counted from the end. */
static bool
validate_reduction (const SgGraph *g, SgNodeId id, GError **error)
{
  const SgNode *n = &g->nodes[id];
  if (n->meta.ndim < 0 || n->n_in == 0)
    return true;
  uint32_t k;
  const SgNode *x = &g->nodes[sg_node_inputs (g, id, &k)[0]];
  if (x->meta.ndim < 0)
    return true;
  bool all = n->kind == SG_OP_SUM || n->kind == SG_OP_MEAN, keep = false, ok = true;
  bool reduced[SG_MAX_DIMS] = { false };
  const SgArg *dims = all ? NULL : sg_node_param (g, id, SG_PARAM_DIM);
  sg_arg_bool (sg_node_param (g, id, SG_PARAM_KEEPDIM), &keep);
  if (dims && dims->type != SG_ARG_LIST && dims->type != SG_ARG_INT
      && dims->type != SG_ARG_FLOAT && dims->type != SG_ARG_NONE) {
    g_set_error (error, SG_GRAPH_ERROR, SG_GRAPH_ERROR_FORMAT,
                 "node '%s': args[1]: expected the reduced dims (a list or one dim)", n->name);
    ok = false;
  }
  /* One dim given as a number counts as a list of one. */
  uint32_t n_dims = 0;
  const SgArg *list = dims && dims->type == SG_ARG_LIST ? sg_arg_items (g, dims, &n_dims) : NULL;
  if (dims && (dims->type == SG_ARG_INT || dims->type == SG_ARG_FLOAT))
    list = dims, n_dims = 1;
  int32_t nd = x->meta.ndim, count = 0;
  for (uint32_t i = 0; ok && i < n_dims; i++) {
    double v;
    if (!sg_arg_float (&list[i], &v))
      v = (double)nd;
    if (!(v >= -nd && v < nd) || v != (double)(int32_t)v) {
      g_set_error (error, SG_GRAPH_ERROR, SG_GRAPH_ERROR_SHAPE,
                   "node '%s': args[1][%d]: not a dim of the %d-d input '%s'", n->name, count, nd,
                   x->name);
      ok = false;
      break;
    }
    reduced[((int32_t)v + nd) % nd] = true;
    count++;
  }
  if (ok) {
    int64_t want[SG_MAX_DIMS];
    int32_t w = 0;
    const int64_t *xs = sg_meta_shape (g, &x->meta);
    for (int32_t i = 0; i < nd; i++) {
      bool r = all || count == 0 || reduced[i];
      if (!r)
        want[w++] = xs[i];
      else if (keep)
        want[w++] = 1;
    }
    const int64_t *os = sg_meta_shape (g, &n->meta);
    bool same = w == n->meta.ndim;
    for (int32_t i = 0; same && i < w; i++)
      same = os[i] == want[i];
    if (!same) {
      GString *ws = g_string_new ("[");
      for (int32_t i = 0; i < w; i++)
        g_string_append_printf (ws, "%s%" G_GINT64_FORMAT, i ? ", " : "", want[i]);
      g_string_append_c (ws, ']');
      g_set_error (error, SG_GRAPH_ERROR, SG_GRAPH_ERROR_SHAPE,
                   "node '%s': meta.shape: the %s of '%s' has shape %s", n->name,
                   sg_op_name (n->kind), x->name, ws->str);
      g_string_free (ws, TRUE);
      ok = false;
    }
  }
  return ok;
}

static const SgNode *
node_in_graph (gconstpointer ctx, SgNodeId id)
{
  return &((const SgGraph *)ctx)->nodes[id];
}

static bool
validate_collective (const SgGraph *g, SgNodeId id, GError **error)
{
  const SgNode *n = &g->nodes[id];
  int group_arg = sg_op_param_pos (n->kind, SG_PARAM_GROUP_NAME);
  int size_arg = sg_op_param_pos (n->kind, SG_PARAM_GROUP_SIZE);
  int reduce_arg = sg_op_param_pos (n->kind, SG_PARAM_REDUCE_OP);
  if (n->group < 0 || n->group >= g->n_groups)
    VFAIL (SG_GRAPH_ERROR_GROUP, "node '%s': args[%d]: group index %d is not in `groups`",
           n->name, group_arg, n->group);
  const SgGroup *grp = &g->groups[n->group];
  if (n->group_size != grp->n_ranks)
    VFAIL (SG_GRAPH_ERROR_GROUP,
           "node '%s': args[%d]: group size %d disagrees with group '%s' of %d ranks", n->name,
           size_arg >= 0 ? size_arg : group_arg, n->group_size, grp->name, grp->n_ranks);
  if (n->n_in == 0)
    VFAIL (SG_GRAPH_ERROR_FORMAT, "node '%s': args[0]: a collective needs an input tensor",
           n->name);
  if (reduce_arg >= 0 && n->reduce == SG_REDUCE_NONE)
    VFAIL (SG_GRAPH_ERROR_FORMAT, "node '%s': args[%d]: no reduce op", n->name, reduce_arg);
  uint32_t k;
  const SgNodeId *in = sg_node_inputs (g, id, &k);
  if (!sg_coll_check_members (g, n, in, node_in_graph, g, error))
    return false;
  if (n->kind == SG_OP_COLLECTIVE_PERMUTE) {
    const SgMeta *im = &g->nodes[in[0]].meta;
    if (im->ndim >= 0 && n->meta.ndim >= 0 && im->dtype != n->meta.dtype)
      VFAIL (SG_GRAPH_ERROR_SHAPE, "node '%s': meta.dtype: %s, but its input '%s' is %s (a "
             "collective_permute moves elements unchanged)", n->name,
             sg_dtype_name (n->meta.dtype), g->nodes[in[0]].name, sg_dtype_name (im->dtype));
    SgPermute p;
    bool ok = sg_node_permute (g, id, &p, error);
    sg_permute_clear (&p);
    if (!ok)
      return false;
  }
  return true;
}

/* Arguments lie in the pool, nest no deeper than the loader allows, and
 * reference only the node's own inputs (by index). */
static bool
check_arg (const SgGraph *g, const SgNode *n, const SgArg *a, int depth, GError **error)
{
  if (depth > SG_MAX_ARG_DEPTH)
    VFAIL (SG_GRAPH_ERROR_PARSE, "node '%s': args: nesting deeper than %d", n->name,
           SG_MAX_ARG_DEPTH);
  if (a->type > SG_ARG_DICT)
    VFAIL (SG_GRAPH_ERROR_INVALID, "node '%s': args: unknown argument type %d", n->name, a->type);
  if (a->type == SG_ARG_NODE && a->input >= n->n_in)
    VFAIL (SG_GRAPH_ERROR_REF, "node '%s': args: reference to input #%u of %u", n->name,
           a->input, n->n_in);
  if (a->type != SG_ARG_LIST && a->type != SG_ARG_DICT)
    return true;
  uint64_t len = a->type == SG_ARG_DICT ? 2 * (uint64_t)a->n : a->n;
  if (a->first + len > g->args->len)
    VFAIL (SG_GRAPH_ERROR_INVALID, "node '%s': args: a list outside the pool", n->name);
  for (uint64_t i = 0; i < len; i++)
    if (!check_arg (g, n, &g_array_index (g->args, SgArg, a->first + i), depth + 1, error))
      return false;
  return true;
}

static bool
validate_args (const SgGraph *g, SgNodeId id, GError **error)
{
  const SgNode *n = &g->nodes[id];
  SgArg args = { .type = SG_ARG_LIST, .n = n->n_args, .first = n->args_first };
  SgArg kwargs = { .type = SG_ARG_DICT, .n = n->n_kwargs, .first = n->kwargs_first };
  return check_arg (g, n, &args, 0, error) && check_arg (g, n, &kwargs, 0, error);
}


bool
sg_validate_node (const SgValidateShared *sh, SgNodeId id, GError **error)
{
  const SgGraph *g = sh->g;
  const SgBrief *brief = sh->brief;
  const SgNode *n = &g->nodes[id];
  if (!n->name || !n->name[0])
    VFAIL (SG_GRAPH_ERROR_FORMAT, "node #%d: name: missing", id);
  const char *key = sh->key_of ? sh->key_of[id] : n->name;
  bool resolves = key && (key == n->name || strcmp (key, n->name) == 0);
  if (!resolves && sg_graph_lookup (g, n->name) != id)
    VFAIL (SG_GRAPH_ERROR_REF, "node '%s' (#%d): name: duplicate name or stale name table (it "
           "resolves to #%d)", n->name, id, sg_graph_lookup (g, n->name));
  if (!n->target)
    VFAIL (SG_GRAPH_ERROR_FORMAT, "node '%s': target: missing", n->name);
  if (!validate_args (g, id, error))
    return false;
  if ((unsigned)n->op > SG_NODE_OUTPUT)
    VFAIL (SG_GRAPH_ERROR_FORMAT, "node '%s': op: unknown op %d", n->name, (int)n->op);
  if ((unsigned)n->kind >= SG_OP_N_KINDS)
    VFAIL (SG_GRAPH_ERROR_FORMAT, "node '%s': target: op kind %d outside the op table", n->name,
           (int)n->kind);
  if (n->op != SG_NODE_CALL && n->kind != sg_node_op_kind (n->op))
    VFAIL (SG_GRAPH_ERROR_FORMAT, "node '%s': op: '%s' node has kind '%s'", n->name,
           n->op == SG_NODE_OUTPUT ? "output" : "placeholder/get_attr", sg_op_name (n->kind));
  if (n->op == SG_NODE_CALL
      && (n->kind == SG_OP_PLACEHOLDER || n->kind == SG_OP_GET_ATTR || n->kind == SG_OP_OUTPUT))
    VFAIL (SG_GRAPH_ERROR_FORMAT, "node '%s': op: call_function with structural kind '%s'",
           n->name, sg_op_name (n->kind));
  if (n->op == SG_NODE_OUTPUT && id != g->n_nodes - 1)
    VFAIL (SG_GRAPH_ERROR_INVALID, "node '%s' (#%d): op: the output node must be last (#%d)",
           n->name, id, g->n_nodes - 1);
  if ((n->op == SG_NODE_PLACEHOLDER || n->op == SG_NODE_GET_ATTR) && n->n_in)
    VFAIL (SG_GRAPH_ERROR_INVALID, "node '%s': args: a %s takes no node references", n->name,
           n->op == SG_NODE_PLACEHOLDER ? "placeholder" : "get_attr");
  if ((uint64_t)n->in_first + n->n_in > g->inputs->len)
    VFAIL (SG_GRAPH_ERROR_INVALID, "node '%s': inputs outside the pool", n->name);
  uint32_t k;
  const SgNodeId *in = sg_node_inputs (g, id, &k);
  g_autoptr (GHashTable) listed = NULL;
  for (uint32_t j = 0; j < k; j++) {
    if (in[j] == id)
      VFAIL (SG_GRAPH_ERROR_CYCLE, "node '%s': args: refers to itself (a cycle)", n->name);
    if (in[j] < 0 || in[j] >= g->n_nodes)
      VFAIL (SG_GRAPH_ERROR_REF, "node '%s': args: dangling input id %d", n->name, in[j]);
    if (in[j] > id)
      VFAIL (SG_GRAPH_ERROR_CYCLE,
             "node '%s' (#%d): args: input '%s' (#%d) comes after it (forward reference or "
             "cycle: ids must be topological)",
             n->name, id, g->nodes[in[j]].name, in[j]);
    if (brief[in[j]].op == SG_NODE_OUTPUT)
      VFAIL (SG_GRAPH_ERROR_INVALID, "node '%s': args: uses the output node", n->name);
    /* A collective's result exists once its wait_tensor has run: reading
     * it before would race with the transfer (what c10d's functional
     * collectives forbid too). The output may list it (it runs nothing). */
    if (sg_op_is_collective (brief[in[j]].kind) && !sg_op_is_coalesced (brief[in[j]].kind)
        && n->kind != SG_OP_WAIT && n->op != SG_NODE_OUTPUT) /* coalesced: below */
      VFAIL (SG_GRAPH_ERROR_INVALID,
             "node '%s': args: reads collective '%s' directly; its result is read through its "
             "wait_tensor",
             n->name, g->nodes[in[j]].name);
    if (sg_ids_position (in, j, in[j], &listed) < j)
      VFAIL (SG_GRAPH_ERROR_INVALID, "node '%s': inputs: '%s' listed twice", n->name,
             g->nodes[in[j]].name);
  }
  if (!(isnan (n->cost_us) || (n->cost_us >= 0 && n->cost_us < SG_MAX_COST_US)))
    VFAIL (SG_GRAPH_ERROR_FORMAT, "node '%s': cost_us: %g is not a time >= 0", n->name,
           n->cost_us);
  if (n->n_tuple) {
    if ((uint64_t)n->tuple_first + n->n_tuple > g->tuple_metas->len)
      VFAIL (SG_GRAPH_ERROR_INVALID, "node '%s': meta.tuple outside the pool", n->name);
    uint64_t bytes = 0;
    for (uint32_t t = 0; t < n->n_tuple; t++) {
      char field[32];
      if (!validate_meta (g, n, sg_node_tuple_meta (g, id, t), t, error))
        return false;
      bytes += sg_meta_bytes (g, sg_node_tuple_meta (g, id, t));
      if (bytes > (uint64_t)SG_MAX_EXTENT)
        VFAIL (SG_GRAPH_ERROR_SHAPE, "node '%s': %s: the tuple totals more than 2^62 bytes",
               n->name, meta_field (field, t));
    }
  } else if (!validate_meta (g, n, &n->meta, -1, error)) {
    return false;
  }

  if (sg_op_class (n->kind) == SG_CLASS_VIEW && !validate_view (g, id, error))
    return false;
  if (!sg_op_is_alias (n->kind) && !validate_fresh (g, id, error))
    return false;
  if (sg_op_class (n->kind) == SG_CLASS_MATMUL && !validate_matmul (g, id, error))
    return false;
  if (sg_op_class (n->kind) == SG_CLASS_POINTWISE && !validate_pointwise (g, id, error))
    return false;
  if (sg_op_class (n->kind) == SG_CLASS_REDUCTION && !validate_reduction (g, id, error))
    return false;
  if (sg_op_is_collective (n->kind)) {
    if (!validate_collective (g, id, error))
      return false;
  } else if (n->group != -1) {
    VFAIL (SG_GRAPH_ERROR_INVALID, "node '%s': group: set on a non-collective", n->name);
  }
  for (uint32_t j = 0; j < k && n->kind != SG_OP_GETITEM; j++)
    if (sg_op_is_coalesced (brief[in[j]].kind))
      VFAIL (SG_GRAPH_ERROR_INVALID, "node '%s': args: reads coalesced collective '%s' directly "
             "(its results are read through getitem)", n->name, g->nodes[in[j]].name);
  if (n->kind == SG_OP_WAIT) {
    /* an element of a coalesced collective is waited on through its getitem */
    bool element = k && sg_node_coalesced_of (g, in[0]) != SG_NO_NODE;
    if (k == 0 || (!sg_op_is_collective (g->nodes[in[0]].kind) && !element))
      VFAIL (SG_GRAPH_ERROR_INVALID,
             "node '%s': args[0]: wait_tensor must wait on a collective%s%s%s", n->name,
             k ? " ('" : "", k ? g->nodes[in[0]].name : "", k ? "' is not one)" : "");
    gint first = g_atomic_int_get (&sh->wait_first[in[0]]);
    if (first != 0 && first != id + 1)
      VFAIL (SG_GRAPH_ERROR_INVALID, "node '%s': args[0]: %s '%s' is already waited on "
             "by '%s'", n->name, element ? "element" : "collective", g->nodes[in[0]].name,
             g->nodes[first - 1].name);
  }
  if (n->sm_count != 0 && sg_op_class (n->kind) != SG_CLASS_MATMUL)
    VFAIL (SG_GRAPH_ERROR_FORMAT, "node '%s': sm_count: only matmuls (mm, addmm, bmm, baddbmm) "
           "take an SM-count target, not %s", n->name, sg_op_name (n->kind));
  if (n->sm_count < 0 || n->sm_count > SG_MAX_SM_COUNT)
    VFAIL (SG_GRAPH_ERROR_FORMAT, "node '%s': sm_count: %d is outside [0, %d]", n->name,
           n->sm_count, SG_MAX_SM_COUNT);
  if (n->kind == SG_OP_RANK_ROLL) {
    SgRankRoll rr;
    if (!sg_node_rank_roll (g, id, &rr, error))
      return false;
  }
  if (n->kind == SG_OP_GETITEM) {
    if (k != 1 || n->getitem_index < 0)
      VFAIL (SG_GRAPH_ERROR_FORMAT, "node '%s': args: getitem takes (node, index >= 0)", n->name);
    const SgNode *src = &g->nodes[in[0]];
    if (src->n_tuple && (uint32_t)n->getitem_index >= src->n_tuple)
      VFAIL (SG_GRAPH_ERROR_FORMAT, "node '%s': args[1]: index %d out of range for '%s' (a "
             "tuple of %u)", n->name, n->getitem_index, src->name, src->n_tuple);
    /* one getitem per element of a coalesced collective: one wait each */
    uint32_t elem = src->tuple_first + (uint32_t)n->getitem_index;
    gint first = sg_op_is_coalesced (src->kind) && elem <= g->tuple_metas->len
                   ? g_atomic_int_get (&sh->elem_first[elem]) : 0;
    if (first != 0 && first != id + 1)
      VFAIL (SG_GRAPH_ERROR_INVALID, "node '%s': args[1]: element %d of coalesced collective "
             "'%s' is already read by '%s'", n->name, n->getitem_index, src->name,
             g->nodes[first - 1].name);
  } else if (n->getitem_index != -1) {
    VFAIL (SG_GRAPH_ERROR_INVALID, "node '%s': getitem index set on a '%s' node", n->name,
           sg_op_name (n->kind));
  }
  return true;
}
