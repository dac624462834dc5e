/* order.c: orders given from outside (another tool's schedule, a user's
 * file) and the check that an order is one of the graph (graph/'s
 * sg_graph_check_order: topological, the output last).
 *
 * An order file is a JSON array of node names, every node exactly once
 * (the format of tests/data/NAME.peer_order_plain.json, written from
 * [n.name for n in gm.graph.nodes] after PyTorch's pass).
 * Requires: nothing. Invalidates: nothing.
 */
#include <string.h>

#include "schedule-private.h"
#include "textio.h"

/* sg_graph_check_order()'s verdict in schedule/'s domain, prefixed with
 * @what when not NULL. */
static bool
check_order (const SgGraph *g, const SgNodeId *order, const char *what, GError **error)
{
  GError *e = NULL;
  if (sg_graph_check_order (g, order, g->n_nodes, NULL, &e))
    return true;
  g_set_error (error, SG_SCHEDULE_ERROR, SG_SCHEDULE_ERROR_ORDER, "%s%s%s", what ? what : "",
               what ? ": " : "", e->message);
  g_error_free (e);
  return false;
}

bool
sg_order_check (const SgGraph *g, const SgNodeId *order, GError **error)
{
  return check_order (g, order, NULL, error);
}

SgNodeId *
sg_order_from_json (const SgGraph *g, const cJSON *arr, const char *what, GError **error)
{
  int32_t n = g->n_nodes;
  if (!cJSON_IsArray (arr)) {
    g_set_error (error, SG_SCHEDULE_ERROR, SG_SCHEDULE_ERROR_ORDER,
                 "%s: an order must be a JSON array of node names", what);
    return NULL;
  }
  g_autofree SgNodeId *order = g_new (SgNodeId, (size_t)MAX (n, 1));
  g_autofree int32_t *pos = g_new (int32_t, (size_t)MAX (n, 1));
  for (int32_t i = 0; i < n; i++)
    pos[i] = -1;
  int32_t p = 0;
  const cJSON *it;
  cJSON_ArrayForEach (it, arr)
  {
    if (!cJSON_IsString (it)) {
      g_set_error (error, SG_SCHEDULE_ERROR, SG_SCHEDULE_ERROR_ORDER,
                   "%s: position %d is not a string (node name)", what, p);
      return NULL;
    }
    SgNodeId x = sg_graph_lookup (g, it->valuestring);
    if (x == SG_NO_NODE) {
      g_set_error (error, SG_SCHEDULE_ERROR, SG_SCHEDULE_ERROR_ORDER,
                   "%s: position %d: unknown node '%s'", what, p, it->valuestring);
      return NULL;
    }
    if (pos[x] >= 0) {
      g_set_error (error, SG_SCHEDULE_ERROR, SG_SCHEDULE_ERROR_ORDER,
                   "%s: position %d: node '%s' is repeated (first at position %d)", what, p,
                   it->valuestring, pos[x]);
      return NULL;
    }
    pos[x] = p;
    order[p++] = x;
  }
  if (p != n) {
    for (SgNodeId i = 0; i < n; i++)
      if (pos[i] < 0) {
        g_set_error (error, SG_SCHEDULE_ERROR, SG_SCHEDULE_ERROR_ORDER,
                     "%s: node '%s' is missing (%d of %d nodes listed)", what,
                     g->nodes[i].name, p, n);
        return NULL;
      }
  }
  if (!check_order (g, order, what, error))
    return NULL;
  return g_steal_pointer (&order);
}

SgNodeId *
sg_order_load (const SgGraph *g, const char *path, GError **error)
{
  g_autofree char *data = NULL;
  gsize len = 0;
  GError *err = NULL;
  if (!g_file_get_contents (path, &data, &len, &err)) {
    g_set_error (error, SG_SCHEDULE_ERROR, SG_SCHEDULE_ERROR_IO, "order %s: %s", path,
                 err->message);
    g_error_free (err);
    return NULL;
  }
  cJSON *arr = sg_json_parse (data, len, &err);
  if (!arr) {
    g_set_error (error, SG_SCHEDULE_ERROR, SG_SCHEDULE_ERROR_IO, "order %s: %s", path,
                 err->message);
    g_error_free (err);
    return NULL;
  }
  g_autofree char *what = g_strdup_printf ("order %s", path);
  SgNodeId *order = sg_order_from_json (g, arr, what, error);
  cJSON_Delete (arr);
  return order;
}
