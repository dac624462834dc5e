/* permute.c: the one reader of schedgraph's ring-op arguments (docs/ops.md).
 *
 * schedgraph.collective_permute(input, source_target_pairs, group_name,
 * transport=...) and schedgraph.rank_roll(input, shift, sign, group_name):
 * the loader, the validator, estimate/ and codegen/ read them through
 * sg_node_permute() / sg_node_rank_roll() only, so the rules (a partial
 * permutation of the group's ranks, a known transport, blocks that divide)
 * live here once.
 * Mirrors XLA's CollectivePermute (source_target_pairs; ranks that receive
 * nothing get zeros) and its partition-id-dependent dynamic slices, which
 * rank_roll stands for in an SPMD graph.
 * Arguments are the typed ones (graph.h); the checks at load and in
 * sg_rewrite_add read a node not in the graph yet (sg_permute_read,
 * sg_rank_roll_read).
 * Requires: the node's group resolved (collectives) and its inputs known.
 * Invalidates: nothing.
 */
#include "graph-private.h"

#include <math.h>
#include <string.h>

#define PFAIL(code, ...)                                                       \
  do {                                                                         \
    g_set_error (error, SG_GRAPH_ERROR, code, __VA_ARGS__);                    \
    goto fail;                                                                 \
  } while (0)

void
sg_permute_clear (SgPermute *p)
{
  g_free (p->target);
  g_free (p->source);
  g_free (p->pairs);
  memset (p, 0, sizeof *p);
}

/* An integer argument as the ring ops take one (|v| <= 2^53). */
static bool
as_int (const SgArg *a, int64_t *out)
{
  double d;
  if (!sg_arg_float (a, &d) || d != floor (d) || fabs (d) > 9007199254740992.0)
    return false;
  *out = (int64_t)d;
  return true;
}

/* Positional argument @pos of node @n (not necessarily in g->nodes yet). */
static const SgArg *
arg_of (const SgGraph *g, const SgNode *n, int pos)
{
  return pos >= 0 && (uint32_t)pos < n->n_args
             ? &g_array_index (g->args, SgArg, n->args_first + (uint32_t)pos)
             : NULL;
}

static const SgArg *
kwarg_of (const SgGraph *g, const SgNode *n, const char *key)
{
  for (uint32_t i = 0; i < n->n_kwargs; i++) {
    const SgArg *k = &g_array_index (g->args, SgArg, n->kwargs_first + 2 * i);
    if (strcmp (k->s, key) == 0)
      return k + 1;
  }
  return NULL;
}

bool
sg_permute_read (const SgGraph *g, const SgNode *n, SgPermute *out, GError **error)
{
  g_return_val_if_fail (g && n && out, false);
  memset (out, 0, sizeof *out);
  const int pa = sg_op_param_pos (n->kind, SG_PARAM_SOURCE_TARGET_PAIRS);
  g_return_val_if_fail (pa >= 0, false);
  if (n->group < 0 || n->group >= g->n_groups)
    PFAIL (SG_GRAPH_ERROR_GROUP, "node '%s': args[%d]: no known group", n->name,
           sg_op_param_pos (n->kind, SG_PARAM_GROUP_NAME));
  const int32_t k = g->groups[n->group].n_ranks;
  out->n_ranks = k;
  out->target = g_new (int32_t, (size_t)k);
  out->source = g_new (int32_t, (size_t)k);
  const SgArg *list = arg_of (g, n, pa);
  if (!list || list->type != SG_ARG_LIST)
    PFAIL (SG_GRAPH_ERROR_FORMAT,
           "node '%s': args[%d]: expected the source->target pairs (a list of [source, target] "
           "group ranks)", n->name, pa);
  uint32_t np;
  const SgArg *e = sg_arg_items (g, list, &np);
  if (np > (uint32_t)k)
    PFAIL (SG_GRAPH_ERROR_GROUP, "node '%s': args[%d]: %u pairs for a group of %d ranks", n->name,
           pa, np, k);
  out->pairs = g_new (int32_t, 2 * (size_t)np + 1);
  for (uint32_t i = 0; i < np; i++) {
    uint32_t two;
    const SgArg *st = e[i].type == SG_ARG_LIST ? sg_arg_items (g, &e[i], &two) : (two = 0, NULL);
    int64_t s, t;
    if (two != 2 || !as_int (&st[0], &s) || !as_int (&st[1], &t))
      PFAIL (SG_GRAPH_ERROR_FORMAT, "node '%s': args[%d][%u]: expected [source, target]",
             n->name, pa, i);
    out->pairs[2 * i] = (int32_t)CLAMP (s, -1, (int64_t)k);
    out->pairs[2 * i + 1] = (int32_t)CLAMP (t, -1, (int64_t)k);
  }
  int32_t bad = 0;
  switch (sg_pairs_check (out->pairs, (int32_t)np, k, out->target, out->source, &bad)) {
  case SG_PAIRS_OK:
    break;
  case SG_PAIRS_RANGE:
    PFAIL (SG_GRAPH_ERROR_GROUP,
           "node '%s': args[%d][%d]: a pair of ranks outside group '%s' (0 .. %d)", n->name, pa,
           bad, g->groups[n->group].name, k - 1);
  case SG_PAIRS_SENDS_TWICE:
    PFAIL (SG_GRAPH_ERROR_GROUP,
           "node '%s': args[%d][%d]: rank %d sends twice (also to %d): the pairs must be a "
           "partial permutation", n->name, pa, bad, out->pairs[2 * bad],
           out->target[out->pairs[2 * bad]]);
  case SG_PAIRS_RECEIVES_TWICE:
    PFAIL (SG_GRAPH_ERROR_GROUP,
           "node '%s': args[%d][%d]: rank %d receives twice (also from %d): the pairs must be a "
           "partial permutation", n->name, pa, bad, out->pairs[2 * bad + 1],
           out->source[out->pairs[2 * bad + 1]]);
  }
  out->n_pairs = (int32_t)np;
  const SgArg *tr = kwarg_of (g, n, sg_param_name (SG_PARAM_TRANSPORT));
  out->transport = SG_TRANSPORT_NCCL;
  if (tr && !(sg_arg_str (tr) && sg_transport_from_name (sg_arg_str (tr), &out->transport)))
    PFAIL (SG_GRAPH_ERROR_FORMAT, "node '%s': kwargs.transport: expected \"nccl\" or \"ce\"",
           n->name);
  return true;
fail:
  return false;
}

bool
sg_node_permute (const SgGraph *g, SgNodeId id, SgPermute *out, GError **error)
{
  g_return_val_if_fail (g && id >= 0 && id < g->n_nodes && out, false);
  return sg_permute_read (g, &g->nodes[id], out, error);
}

bool
sg_rank_roll_read (const SgGraph *g, const SgNode *n, const SgNode *input, SgRankRoll *out,
                   GError **error)
{
  g_return_val_if_fail (g && n && out, false);
  const int ga = sg_op_param_pos (n->kind, SG_PARAM_GROUP_NAME);
  g_return_val_if_fail (ga >= 0, false);
  const char *gname = arg_of (g, n, ga) && arg_of (g, n, ga)->type == SG_ARG_STR
                          ? arg_of (g, n, ga)->s
                          : NULL;
  if (!gname)
    PFAIL (SG_GRAPH_ERROR_GROUP, "node '%s': args[%d]: expected the group name (a string)",
           n->name, ga);
  out->group = sg_graph_find_group (g, gname);
  if (out->group < 0)
    PFAIL (SG_GRAPH_ERROR_GROUP, "node '%s': args[%d]: group '%s' is not in `groups`", n->name,
           ga, gname);
  const int sh = sg_op_param_pos (n->kind, SG_PARAM_SHIFT);
  const int sg = sg_op_param_pos (n->kind, SG_PARAM_SIGN);
  if (!as_int (arg_of (g, n, sh), &out->shift))
    PFAIL (SG_GRAPH_ERROR_FORMAT, "node '%s': args[%d]: expected the shift (an integer)", n->name,
           sh);
  if (!as_int (arg_of (g, n, sg), &out->sign) || (out->sign != 1 && out->sign != -1))
    PFAIL (SG_GRAPH_ERROR_FORMAT, "node '%s': args[%d]: expected the sign (1 or -1)", n->name,
           sg);
  const SgMeta *im = input ? &input->meta : NULL;
  if (!im || im->ndim < 1 || n->meta.ndim < 0)
    PFAIL (SG_GRAPH_ERROR_FORMAT, "node '%s': args[0]: rank_roll needs a tensor of >= 1 dims",
           n->name);
  const int64_t k = g->groups[out->group].n_ranks;
  const int64_t d0 = sg_meta_shape (g, im)[0];
  if (d0 % k != 0)
    PFAIL (SG_GRAPH_ERROR_SHAPE,
           "node '%s': args[0]: dim 0 of '%s' (%" G_GINT64_FORMAT ") is not divisible into the %"
           G_GINT64_FORMAT " blocks of group '%s'", n->name, input->name, d0, k,
           g->groups[out->group].name);
  bool same = n->meta.ndim == im->ndim && n->meta.dtype == im->dtype;
  for (int32_t d = 0; same && d < im->ndim; d++)
    same = sg_meta_shape (g, &n->meta)[d] == sg_meta_shape (g, im)[d];
  if (!same)
    PFAIL (SG_GRAPH_ERROR_SHAPE, "node '%s': meta: a rank_roll keeps its input's shape and dtype",
           n->name);
  return true;
fail:
  return false;
}

bool
sg_node_rank_roll (const SgGraph *g, SgNodeId id, SgRankRoll *out, GError **error)
{
  g_return_val_if_fail (g && id >= 0 && id < g->n_nodes && out, false);
  SgNodeId in = g->nodes[id].n_in ? sg_node_inputs (g, id, &(uint32_t){ 0 })[0] : SG_NO_NODE;
  return sg_rank_roll_read (g, &g->nodes[id], in != SG_NO_NODE ? &g->nodes[in] : NULL, out,
                            error);
}
