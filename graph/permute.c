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
 * Requires: the node's group resolved (collectives) and its inputs in place.
 * Invalidates: nothing.
 */
#include "graph.h"

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

static bool
as_int (const cJSON *v, int64_t *out)
{
  if (!cJSON_IsNumber (v) || v->valuedouble != floor (v->valuedouble) ||
      fabs (v->valuedouble) > 9007199254740992.0)
    return false;
  *out = (int64_t)v->valuedouble;
  return true;
}

bool
sg_node_permute (const SgGraph *g, SgNodeId id, SgPermute *out, GError **error)
{
  g_return_val_if_fail (out, false);
  memset (out, 0, sizeof *out);
  /* id == n_nodes: the node being appended (the loader checks it in place) */
  g_return_val_if_fail (g && id >= 0 && id < g->nodes_cap, false);
  const SgNode *n = &g->nodes[id];
  const int pa = sg_op_info (n->kind)->pairs_arg;
  g_return_val_if_fail (pa >= 0, false);
  cJSON *args = cJSON_Parse (n->args_json), *kwargs = cJSON_Parse (n->kwargs_json);
  if (n->group < 0 || n->group >= g->n_groups)
    PFAIL (SG_GRAPH_ERROR_GROUP, "node '%s': args[%d]: no known group", n->name,
           sg_op_info (n->kind)->group_arg);
  const int32_t k = g->groups[n->group].n_ranks;
  out->n_ranks = k;
  out->target = g_new (int32_t, (size_t)k);
  out->source = g_new (int32_t, (size_t)k);
  const cJSON *list = cJSON_GetArrayItem (args, pa);
  if (!cJSON_IsArray (list))
    PFAIL (SG_GRAPH_ERROR_FORMAT,
           "node '%s': args[%d]: expected the source->target pairs (a list of [source, target] "
           "group ranks)", n->name, pa);
  const int np = cJSON_GetArraySize (list);
  if (np > k)
    PFAIL (SG_GRAPH_ERROR_GROUP, "node '%s': args[%d]: %d pairs for a group of %d ranks", n->name,
           pa, np, k);
  out->pairs = g_new (int32_t, 2 * (size_t)np + 1);
  const cJSON *e;
  int i = 0;
  cJSON_ArrayForEach (e, list)
  {
    int64_t s, t;
    if (!cJSON_IsArray (e) || cJSON_GetArraySize (e) != 2 ||
        !as_int (cJSON_GetArrayItem (e, 0), &s) || !as_int (cJSON_GetArrayItem (e, 1), &t))
      PFAIL (SG_GRAPH_ERROR_FORMAT, "node '%s': args[%d][%d]: expected [source, target]",
             n->name, pa, i);
    out->pairs[2 * i] = (int32_t)CLAMP (s, -1, (int64_t)k);
    out->pairs[2 * i + 1] = (int32_t)CLAMP (t, -1, (int64_t)k);
    i++;
  }
  int32_t bad = 0;
  switch (sg_pairs_check (out->pairs, np, k, out->target, out->source, &bad)) {
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
  out->n_pairs = np;
  const cJSON *tr = cJSON_GetObjectItemCaseSensitive (kwargs, "transport");
  out->transport = SG_TRANSPORT_NCCL;
  if (tr && !(cJSON_IsString (tr) && sg_transport_from_name (tr->valuestring, &out->transport)))
    PFAIL (SG_GRAPH_ERROR_FORMAT, "node '%s': kwargs.transport: expected \"nccl\" or \"ce\"",
           n->name);
  cJSON_Delete (args);
  cJSON_Delete (kwargs);
  return true;
fail:
  cJSON_Delete (args);
  cJSON_Delete (kwargs);
  return false;
}

bool
sg_node_rank_roll (const SgGraph *g, SgNodeId id, SgRankRoll *out, GError **error)
{
  g_return_val_if_fail (g && id >= 0 && id < g->nodes_cap && out, false);
  const SgNode *n = &g->nodes[id];
  const int ga = sg_op_info (n->kind)->group_arg;
  g_return_val_if_fail (ga >= 0, false);
  cJSON *args = cJSON_Parse (n->args_json);
  const cJSON *gname = cJSON_GetArrayItem (args, ga);
  if (!cJSON_IsString (gname))
    PFAIL (SG_GRAPH_ERROR_GROUP, "node '%s': args[%d]: expected the group name (a string)",
           n->name, ga);
  out->group = sg_graph_find_group (g, gname->valuestring);
  if (out->group < 0)
    PFAIL (SG_GRAPH_ERROR_GROUP, "node '%s': args[%d]: group '%s' is not in `groups`", n->name,
           ga, gname->valuestring);
  if (!as_int (cJSON_GetArrayItem (args, 1), &out->shift))
    PFAIL (SG_GRAPH_ERROR_FORMAT, "node '%s': args[1]: expected the shift (an integer)", n->name);
  if (!as_int (cJSON_GetArrayItem (args, 2), &out->sign) || (out->sign != 1 && out->sign != -1))
    PFAIL (SG_GRAPH_ERROR_FORMAT, "node '%s': args[2]: expected the sign (1 or -1)", n->name);
  uint32_t nin;
  const SgNodeId *in = sg_node_inputs (g, id, &nin);
  const SgMeta *im = nin ? &g->nodes[in[0]].meta : NULL;
  if (!im || im->ndim < 1 || n->meta.ndim < 0)
    PFAIL (SG_GRAPH_ERROR_FORMAT, "node '%s': args[0]: rank_roll needs a tensor of >= 1 dims",
           n->name);
  const int64_t k = g->groups[out->group].n_ranks;
  const int64_t d0 = sg_meta_shape (g, im)[0];
  if (d0 % k != 0)
    PFAIL (SG_GRAPH_ERROR_SHAPE,
           "node '%s': args[0]: dim 0 of '%s' (%" G_GINT64_FORMAT ") is not divisible into the %"
           G_GINT64_FORMAT " blocks of group '%s'", n->name, g->nodes[in[0]].name, d0, k,
           g->groups[out->group].name);
  bool same = n->meta.ndim == im->ndim && n->meta.dtype == im->dtype;
  for (int32_t d = 0; same && d < im->ndim; d++)
    same = sg_meta_shape (g, &n->meta)[d] == sg_meta_shape (g, im)[d];
  if (!same)
    PFAIL (SG_GRAPH_ERROR_SHAPE, "node '%s': meta: a rank_roll keeps its input's shape and dtype",
           n->name);
  cJSON_Delete (args);
  return true;
fail:
  cJSON_Delete (args);
  return false;
}
