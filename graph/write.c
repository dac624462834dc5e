/* write.c: the IR back to the graph format (docs/graph-format.md).
 *
 * The inverse of load.c: top-level keys in the order the exporters write
 * them (format, version, world_size, rank, groups, nodes, cluster,
 * description), groups with their explicit `partition`, every node in id
 * order (the current program order) with its args and kwargs as loaded
 * (sg_node_args_json: the input's numbers, nesting and key order),
 * its meta (tuple metas included), its `cost_us` override and its
 * `sm_count` target. Whatever a
 * pass added (bucket/'s pack, collective and unpack nodes) is written like
 * any other node, so the file loads back into the same graph. Integers are
 * written exactly (as text, not through doubles). `tools/schedgraph
 * --emit-graph` writes the final graph with it; the Python package reads
 * that file to apply the schedule to a torch.fx graph (docs/python.md).
 *
 * Requires: a graph that sg_graph_validate() accepts. Invalidates: nothing.
 */
#include "graph.h"

/* "[a,b,c]" as a raw JSON item: int64 values printed exactly. */
static cJSON *
int_list (const int64_t *v, int32_t n)
{
  GString *s = g_string_new ("[");
  for (int32_t i = 0; i < n; i++)
    g_string_append_printf (s, "%s%" G_GINT64_FORMAT, i ? "," : "", v[i]);
  g_string_append_c (s, ']');
  cJSON *raw = cJSON_CreateRaw (s->str);
  g_string_free (s, TRUE);
  return raw;
}

static cJSON *
meta_json (const SgGraph *g, const SgMeta *m)
{
  if (m->ndim < 0)
    return cJSON_CreateNull ();
  cJSON *o = cJSON_CreateObject ();
  cJSON_AddItemToObject (o, "shape", int_list (sg_meta_shape (g, m), m->ndim));
  cJSON_AddItemToObject (o, "stride", int_list (sg_meta_stride (g, m), m->ndim));
  cJSON_AddStringToObject (o, "dtype", sg_dtype_name (m->dtype));
  return o;
}

static cJSON *
groups_json (const SgGraph *g)
{
  cJSON *groups = cJSON_CreateObject ();
  for (int32_t i = 0; i < g->n_groups; i++) {
    const SgGroup *grp = &g->groups[i];
    cJSON *o = cJSON_AddObjectToObject (groups, grp->name);
    cJSON_AddItemToObject (o, "ranks", cJSON_CreateIntArray (grp->ranks, grp->n_ranks));
    cJSON *part = cJSON_AddArrayToObject (o, "partition");
    for (int32_t r = 0; r < grp->n_instances; r++)
      cJSON_AddItemToArray (part, cJSON_CreateIntArray (&grp->partition[r * grp->n_ranks],
                                                        grp->n_ranks));
  }
  return groups;
}

static cJSON *
node_json (const SgGraph *g, SgNodeId id)
{
  const SgNode *n = &g->nodes[id];
  cJSON *o = cJSON_CreateObject ();
  cJSON_AddStringToObject (o, "name", n->name);
  cJSON_AddStringToObject (o, "op", sg_node_op_name (n->op));
  cJSON_AddStringToObject (o, "target", n->target);
  cJSON_AddItemToObject (o, "args", sg_node_args_json (g, id, false, NULL, NULL));
  cJSON_AddItemToObject (o, "kwargs", sg_node_args_json (g, id, true, NULL, NULL));
  if (n->n_tuple) {
    cJSON *tuple = cJSON_AddArrayToObject (cJSON_AddObjectToObject (o, "meta"), "tuple");
    for (uint32_t t = 0; t < n->n_tuple; t++)
      cJSON_AddItemToArray (tuple, meta_json (g, sg_node_tuple_meta (g, id, t)));
  } else if (n->meta.ndim >= 0) {
    cJSON_AddItemToObject (o, "meta", meta_json (g, &n->meta));
  }
  if (!isnan (n->cost_us))
    cJSON_AddNumberToObject (o, "cost_us", n->cost_us);
  if (n->sm_count > 0)
    cJSON_AddNumberToObject (o, "sm_count", n->sm_count);
  return o;
}

cJSON *
sg_graph_to_json (const SgGraph *g)
{
  g_return_val_if_fail (g != NULL, NULL);
  cJSON *o = cJSON_CreateObject ();
  cJSON_AddStringToObject (o, "format", SG_GRAPH_FORMAT);
  cJSON_AddNumberToObject (o, "version", SG_GRAPH_VERSION);
  cJSON_AddNumberToObject (o, "world_size", g->world_size);
  cJSON_AddNumberToObject (o, "rank", g->rank);
  cJSON_AddItemToObject (o, "groups", groups_json (g));
  cJSON *nodes = cJSON_AddArrayToObject (o, "nodes");
  for (SgNodeId id = 0; id < g->n_nodes; id++)
    cJSON_AddItemToArray (nodes, node_json (g, id));
  if (g->cluster_json)
    cJSON_AddItemToObject (o, "cluster", cJSON_CreateRaw (g->cluster_json));
  if (g->description)
    cJSON_AddStringToObject (o, "description", g->description);
  return o;
}
