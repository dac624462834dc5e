/* load-refs.c: diagnosing a node reference that does not resolve.
 *
 * The loader appends nodes in file order, so a reference to a name not
 * defined yet fails. To say why, the rest of the file is read (only on
 * this error path): the name is a forward reference when a later node
 * defines it, a cycle when following references from it through later
 * nodes leads back to the referencing node (the chain is printed), and a
 * dangling reference otherwise.
 *
 * Requires: nothing. Invalidates: nothing.
 */
#include <string.h>

#include "load-private.h"

/* First {"node": NAME} in @v (depth first, the order graph.c walks) whose
 * name is not defined yet; @path receives its location. */
const char *
sg_load_first_undefined (const SgGraph *g, const cJSON *v, GString *path)
{
  if (cJSON_IsObject (v)) {
    const cJSON *ref = cJSON_GetObjectItemCaseSensitive (v, "node");
    if (cJSON_IsString (ref) && cJSON_GetArraySize (v) == 1)
      return sg_graph_lookup (g, ref->valuestring) == SG_NO_NODE ? ref->valuestring : NULL;
  }
  if (!cJSON_IsArray (v) && !cJSON_IsObject (v))
    return NULL;
  gsize len = path->len;
  int i = 0;
  const cJSON *c;
  cJSON_ArrayForEach (c, v)
  {
    if (cJSON_IsArray (v))
      g_string_append_printf (path, "[%d]", i);
    else
      g_string_append_printf (path, ".%s", c->string);
    const char *r = sg_load_first_undefined (g, c, path);
    if (r)
      return r;
    g_string_truncate (path, len);
    i++;
  }
  return NULL;
}

static void
collect_refs (const cJSON *v, GPtrArray *out)
{
  if (cJSON_IsObject (v)) {
    const cJSON *ref = cJSON_GetObjectItemCaseSensitive (v, "node");
    if (cJSON_IsString (ref)) {
      g_ptr_array_add (out, g_strdup (ref->valuestring));
      return;
    }
  }
  if (cJSON_IsArray (v) || cJSON_IsObject (v)) {
    const cJSON *c;
    cJSON_ArrayForEach (c, v) collect_refs (c, out);
  }
}

typedef struct {
  int index;      /* position in `nodes` */
  GPtrArray *refs; /* names */
  const char *parent; /* BFS: the name we came from */
  bool seen;
} Later;

static void
later_free (gpointer p)
{
  Later *l = p;
  g_ptr_array_unref (l->refs);
  g_free (l);
}

/* Replaces the append error for node @name (index @index) whose reference
 * to @missing at @field does not resolve; @rest points after the node. */
void
sg_load_diagnose_ref (const char *name, int index, const char *field, const char *missing,
                      const char *rest, const char *end, GError **error)
{
  g_clear_error (error);
  if (strcmp (missing, name) == 0) {
    g_set_error (error, SG_GRAPH_ERROR, SG_GRAPH_ERROR_CYCLE,
                 "node '%s': %s: refers to itself (a cycle)", name, field);
    return;
  }
  /* Names and references of every later node (the error path only). */
  g_autoptr (GHashTable) later = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, later_free);
  const char *p = sg_load_skip_ws (rest, end);
  int k = index + 1;
  while (p < end && *p == ',') {
    const char *e = NULL;
    cJSON *obj = cJSON_ParseWithLengthOpts (p + 1, (size_t)(end - p - 1), &e, false);
    if (!obj)
      break;
    const cJSON *jn = cJSON_GetObjectItemCaseSensitive (obj, "name");
    if (cJSON_IsString (jn) && !g_hash_table_contains (later, jn->valuestring)) {
      Later *l = g_new0 (Later, 1);
      l->index = k;
      l->refs = g_ptr_array_new_with_free_func (g_free);
      collect_refs (cJSON_GetObjectItemCaseSensitive (obj, "args"), l->refs);
      collect_refs (cJSON_GetObjectItemCaseSensitive (obj, "kwargs"), l->refs);
      g_hash_table_insert (later, g_strdup (jn->valuestring), l);
    }
    cJSON_Delete (obj);
    p = sg_load_skip_ws (e, end);
    k++;
  }
  Later *target = g_hash_table_lookup (later, missing);
  if (!target) {
    g_set_error (error, SG_GRAPH_ERROR, SG_GRAPH_ERROR_REF,
                 "node '%s': %s: dangling reference to '%s', which no node defines", name, field,
                 missing);
    return;
  }
  /* Breadth first from @missing through later nodes' references. */
  GQueue q = G_QUEUE_INIT;
  g_queue_push_tail (&q, (gpointer)missing);
  target->seen = true;
  const char *closing = NULL;
  while (!closing && !g_queue_is_empty (&q)) {
    const char *cur = g_queue_pop_head (&q);
    Later *l = g_hash_table_lookup (later, cur);
    for (guint i = 0; i < l->refs->len; i++) {
      const char *r = g_ptr_array_index (l->refs, i);
      if (strcmp (r, name) == 0) {
        closing = cur;
        break;
      }
      Later *lr = g_hash_table_lookup (later, r);
      if (lr && !lr->seen) {
        lr->seen = true;
        lr->parent = cur;
        g_queue_push_tail (&q, (gpointer)r);
      }
    }
  }
  g_queue_clear (&q);
  if (!closing) {
    g_set_error (error, SG_GRAPH_ERROR, SG_GRAPH_ERROR_REF,
                 "node '%s': %s: forward reference to '%s' (node #%d, defined later); nodes "
                 "must be in topological order",
                 name, field, missing, target->index);
    return;
  }
  /* closing -> ... -> missing, reversed along parents. */
  g_autoptr (GPtrArray) chain = g_ptr_array_new ();
  for (const char *c = closing; c; c = ((Later *)g_hash_table_lookup (later, c))->parent)
    g_ptr_array_add (chain, (gpointer)c);
  GString *s = g_string_new (name);
  for (guint i = chain->len; i-- > 0;)
    g_string_append_printf (s, " -> %s", (const char *)g_ptr_array_index (chain, i));
  g_string_append_printf (s, " -> %s", name);
  g_set_error (error, SG_GRAPH_ERROR, SG_GRAPH_ERROR_CYCLE, "node '%s': %s: cycle: %s", name,
               field, s->str);
  g_string_free (s, TRUE);
}
