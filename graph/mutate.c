/* mutate.c: removing nodes and copying graphs.
 *
 * Mirrors torch.fx's Graph.erase_node / copy.deepcopy(graph) in our dense
 * IR. Passes that add and replace nodes use the rewrite API (rewrite.c).
 * Arguments hold input indices, not ids, so renumbering touches only the
 * inputs pool and the implicit edges. Requires: nothing. Invalidates:
 * users (CSR), node ids (compact, select).
 */
#include "graph-private.h"

#include <string.h>

/* Renumbers implicit edges by @new_id, dropping those that touch a node
 * mapped to SG_NO_NODE. */
static void
remap_edges (SgGraph *g, const SgNodeId *new_id)
{
  if (!g->implicit_edges)
    return;
  guint w = 0;
  for (guint i = 0; i < g->implicit_edges->len; i++) {
    SgImplicitEdge e = g_array_index (g->implicit_edges, SgImplicitEdge, i);
    e.from = new_id[e.from];
    e.to = new_id[e.to];
    if (e.from != SG_NO_NODE && e.to != SG_NO_NODE)
      g_array_index (g->implicit_edges, SgImplicitEdge, w++) = e;
  }
  g_array_set_size (g->implicit_edges, w);
}

bool
sg_graph_compact (SgGraph *g, const bool *keep, GError **error)
{
  g_return_val_if_fail (g && keep, false);
  int32_t n = g->n_nodes;
  if (g->output != SG_NO_NODE && !keep[g->output]) {
    g_set_error (error, SG_GRAPH_ERROR, SG_GRAPH_ERROR_INVALID,
                 "compact: node '%s': the output node cannot be removed",
                 g->nodes[g->output].name);
    return false;
  }
  for (SgNodeId i = 0; i < n; i++) {
    if (!keep[i])
      continue;
    uint32_t k;
    const SgNodeId *in = sg_node_inputs (g, i, &k);
    for (uint32_t j = 0; j < k; j++)
      if (!keep[in[j]]) {
        g_set_error (error, SG_GRAPH_ERROR, SG_GRAPH_ERROR_REF,
                     "compact: node '%s' reads '%s', which is being removed", g->nodes[i].name,
                     g->nodes[in[j]].name);
        return false;
      }
  }
  g_autofree SgNodeId *new_id = g_new (SgNodeId, (size_t)n + 1);
  SgNodeId w = 0;
  for (SgNodeId i = 0; i < n; i++)
    new_id[i] = keep[i] ? w++ : SG_NO_NODE;
  remap_edges (g, new_id);
  /* The inputs pool is rebuilt: every entry must stay a valid id (permute
   * renumbers the whole pool). */
  GArray *inputs = g_array_sized_new (FALSE, FALSE, sizeof (SgNodeId), g->inputs->len);
  for (SgNodeId i = 0; i < n; i++) {
    if (!keep[i])
      continue;
    SgNode node = g->nodes[i];
    uint32_t n_in;
    const SgNodeId *in = sg_node_inputs (g, i, &n_in);
    node.in_first = inputs->len;
    for (uint32_t j = 0; j < n_in; j++) {
      SgNodeId v = new_id[in[j]];
      g_array_append_val (inputs, v);
    }
    g->nodes[new_id[i]] = node;
  }
  g_array_unref (g->inputs);
  g->inputs = inputs;
  g->n_nodes = w;
  sg_graph_names_drop (g);
  if (g->output != SG_NO_NODE)
    g->output = new_id[g->output];
  sg_graph_changed (g);
  return true;
}

static const char *
copy_str (SgGraph *dst, const char *s, bool unique)
{
  return unique ? g_string_chunk_insert (dst->strings, s)
                : g_string_chunk_insert_const (dst->strings, s);
}

SgGraph *
sg_graph_copy (const SgGraph *g)
{
  g_return_val_if_fail (g, NULL);
  SgGraph *c = sg_graph_new (g->world_size, g->rank);
  g_free (c->source);
  c->source = g_strdup (g->source);
  c->cluster_json = g_strdup (g->cluster_json);
  c->description = g_strdup (g->description);
  c->n_groups = g->n_groups;
  c->groups = g_new0 (SgGroup, (size_t)g->n_groups + 1);
  for (int32_t i = 0; i < g->n_groups; i++) {
    const SgGroup *s = &g->groups[i];
    SgGroup *d = &c->groups[i];
    d->name = g_strdup (s->name);
    d->n_ranks = s->n_ranks;
    d->ranks = g_memdup2 (s->ranks, sizeof (int32_t) * (size_t)s->n_ranks);
    d->n_instances = s->n_instances;
    d->partition = s->partition ? g_memdup2 (s->partition, sizeof (int32_t) * (size_t)s->n_ranks
                                                                * (size_t)s->n_instances)
                                : NULL;
  }
  g_array_append_vals (c->dims, g->dims->data, g->dims->len);
  g_array_append_vals (c->inputs, g->inputs->data, g->inputs->len);
  g_array_append_vals (c->tuple_metas, g->tuple_metas->data, g->tuple_metas->len);
  g_array_append_vals (c->args, g->args->data, g->args->len);
  sg_args_reintern (c, 0, c->args->len);
  c->nodes_cap = g->n_nodes > 0 ? g->n_nodes : 1;
  c->nodes = g_new (SgNode, (size_t)c->nodes_cap);
  c->n_nodes = g->n_nodes;
  for (SgNodeId i = 0; i < g->n_nodes; i++) {
    SgNode n = g->nodes[i];
    /* Names are unique per node; targets repeat. */
    n.name = copy_str (c, n.name, true);
    n.target = copy_str (c, n.target, false);
    c->nodes[i] = n;
    g_hash_table_insert (sg_graph_names (c), (gpointer)c->nodes[i].name, GINT_TO_POINTER (i + 1));
  }
  c->output = g->output;
  if (g->implicit_edges)
    c->implicit_edges = g_array_copy (g->implicit_edges);
  c->cost_model = g->cost_model;
  c->cost_model_free = NULL;
  return c;
}

bool
sg_graph_select (SgGraph *g, const SgNodeId *order, int32_t n, GError **error)
{
  g_return_val_if_fail (g && (order || n == 0) && n >= 0 && n <= g->n_nodes, false);
  g_autofree SgNodeId *new_id = g_new (SgNodeId, (size_t)g->n_nodes + 1);
  if (!sg_graph_check_order (g, order, n, new_id, error))
    return false;
  remap_edges (g, new_id);
  SgNode *nodes = g_new (SgNode, (size_t)MAX (g->nodes_cap, 1));
  GArray *inputs = g_array_sized_new (FALSE, FALSE, sizeof (SgNodeId), g->inputs->len);
  for (int32_t i = 0; i < n; i++) {
    SgNode node = g->nodes[order[i]];
    uint32_t n_in;
    const SgNodeId *in = sg_node_inputs (g, order[i], &n_in);
    node.in_first = inputs->len;
    for (uint32_t j = 0; j < n_in; j++) {
      SgNodeId v = new_id[in[j]];
      g_array_append_val (inputs, v);
    }
    nodes[i] = node;
  }
  g_free (g->nodes);
  g->nodes = nodes;
  g->n_nodes = n;
  g_array_unref (g->inputs);
  g->inputs = inputs;
  sg_graph_names_drop (g);
  if (g->output != SG_NO_NODE)
    g->output = new_id[g->output];
  sg_graph_changed (g);
  return true;
}
