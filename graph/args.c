/* args.c: typed node arguments (graph.h "arguments", docs/ir.md).
 *
 * A node's args and kwargs are parsed once, when the node enters the IR
 * (from graph-format JSON, or from an SgNodeSpec of the rewrite API), into
 * SgArg values in the graph's args pool: lists and objects as ranges of the
 * pool, node references as indices into the node's inputs, strings
 * interned, and strings at the dtype/device/layout/memory_format keywords
 * as enums that keep their spelling. Every pass reads this form; JSON is
 * written back from it only where arguments are echoed (plans, tools), by
 * sg_node_args_json(), which gives the input's compact text again.
 * Mirrors torch.fx's Node.args/kwargs (typed Python values, Node objects
 * for references). Requires: nothing. Invalidates: nothing.
 */
#include "graph-private.h"

#include <string.h>

#define FAIL(code, ...)                                                        \
  do {                                                                         \
    g_set_error (b->error, SG_GRAPH_ERROR, code, __VA_ARGS__);                 \
    return false;                                                              \
  } while (0)

void
sg_arg_build_init (SgArgBuild *b, SgGraph *g, const char *node, const GArray *scratch,
                   GArray *refs, GError **error)
{
  if (refs)
    g_array_set_size (refs, 0);
  *b = (SgArgBuild){ g, node, refs ? refs : g_array_new (FALSE, FALSE, sizeof (SgNodeId)), !refs,
                     NULL, scratch, error };
}

void
sg_arg_build_clear (SgArgBuild *b)
{
  if (b->own_refs)
    g_clear_pointer (&b->refs, g_array_unref);
  g_clear_pointer (&b->seen, g_hash_table_unref);
}

uint32_t
sg_ids_position_set (const SgNodeId *ids, uint32_t n, SgNodeId id, GHashTable **set)
{
  if (!*set) {
    *set = g_hash_table_new (g_direct_hash, g_direct_equal);
    for (uint32_t i = 0; i < n; i++)
      g_hash_table_insert (*set, GINT_TO_POINTER (ids[i] + 1), GUINT_TO_POINTER (i + 1));
  }
  gpointer at = g_hash_table_lookup (*set, GINT_TO_POINTER (id + 1));
  if (at)
    return GPOINTER_TO_UINT (at) - 1;
  g_hash_table_insert (*set, GINT_TO_POINTER (id + 1), GUINT_TO_POINTER (n + 1));
  return n;
}

/* Index of @id among the node's inputs, appended when new. */
static uint32_t
input_index (SgArgBuild *b, SgNodeId id)
{
  GArray *r = b->refs;
  uint32_t i = sg_ids_position ((const SgNodeId *)(void *)r->data, r->len, id, &b->seen);
  if (i == r->len)
    g_array_append_val (r, id);
  return i;
}

/* The node named @name: among the last RECENT nodes first (most
 * references are to a node just before; names are unique, so a match is
 * the node), else by the name table, whose probe is a cache miss or two in
 * a large graph. */
#define RECENT 8

static SgNodeId
lookup_ref (const SgGraph *g, const char *name)
{
  for (SgNodeId id = g->n_nodes - 1; id >= 0 && id >= g->n_nodes - RECENT; id--) {
    const char *have = g->nodes[id].name;
    if (have && have[0] == name[0] && strcmp (have, name) == 0)
      return id;
  }
  return sg_graph_lookup (g, name);
}

/* Reserves @n entries of the pool; returns the first. */
static uint32_t
reserve (SgGraph *g, uint32_t n)
{
  uint32_t first = g->args->len;
  g_array_set_size (g->args, first + n);
  return first;
}

static inline SgArg *
at (SgGraph *g, uint32_t i)
{
  return &g_array_index (g->args, SgArg, i);
}

static SgArg
str_arg (SgGraph *g, const char *s)
{
  SgArg a = { .type = SG_ARG_STR };
  a.s = g_string_chunk_insert_const (g->strings, s);
  return a;
}

void
sg_arg_classify (SgArg *a, const char *key)
{
  if (!key)
    return;
  if (strcmp (key, "dtype") == 0) {
    SgDtype d = sg_dtype_from_name (a->s);
    if (d != SG_DTYPE_INVALID)
      a->type = SG_ARG_DTYPE, a->tag = (uint8_t)d;
  } else if (strcmp (key, "device") == 0) {
    SgDeviceType t;
    int32_t idx;
    if (sg_device_from_name (a->s, &t, &idx))
      a->type = SG_ARG_DEVICE, a->tag = (uint8_t)t, a->n = (uint32_t)idx;
  } else if (strcmp (key, "layout") == 0) {
    SgLayout l = sg_layout_from_name (a->s);
    if (l)
      a->type = SG_ARG_LAYOUT, a->tag = (uint8_t)l;
  } else if (strcmp (key, "memory_format") == 0) {
    SgMemoryFormat m = sg_memory_format_from_name (a->s);
    if (m)
      a->type = SG_ARG_MEMORY_FORMAT, a->tag = (uint8_t)m;
  }
}

/* --- from JSON --------------------------------------------------------------- */

static bool json_value (SgArgBuild *b, const cJSON *v, int depth, const char *where,
                        const char *key, uint32_t slot);

/* The entries of list or object @v into @n (or 2 @n) reserved slots. */
static bool
json_children (SgArgBuild *b, const cJSON *v, int depth, const char *where, uint32_t first)
{
  bool obj = cJSON_IsObject (v);
  uint32_t i = 0;
  const cJSON *c;
  cJSON_ArrayForEach (c, v)
  {
    if (obj) {
      *at (b->g, first + 2 * i) = str_arg (b->g, c->string ? c->string : "");
      if (!json_value (b, c, depth + 1, where, NULL, first + 2 * i + 1))
        return false;
    } else if (!json_value (b, c, depth + 1, where, NULL, first + i)) {
      return false;
    }
    i++;
  }
  return true;
}

/* Parses @v into pool slot @slot (reserved by the caller). */
static bool
json_value (SgArgBuild *b, const cJSON *v, int depth, const char *where, const char *key,
            uint32_t slot)
{
  SgGraph *g = b->g;
  if (depth > SG_MAX_ARG_DEPTH)
    FAIL (SG_GRAPH_ERROR_PARSE, "node '%s': %s: nesting deeper than %d", b->node, where,
          SG_MAX_ARG_DEPTH);
  SgArg a = { .type = SG_ARG_NONE };
  if (cJSON_IsObject (v)) {
    const cJSON *ref = sg_json_member (v, "node");
    if (ref) {
      if (!cJSON_IsString (ref) || cJSON_GetArraySize (v) != 1)
        FAIL (SG_GRAPH_ERROR_FORMAT,
              "node '%s': %s: a node reference must be {\"node\": \"<name>\"}", b->node, where);
      SgNodeId id = lookup_ref (g, ref->valuestring);
      if (id == SG_NO_NODE)
        FAIL (SG_GRAPH_ERROR_REF,
              "node '%s': %s: reference to '%s', which is not defined before it", b->node, where,
              ref->valuestring);
      a.type = SG_ARG_NODE;
      a.input = input_index (b, id);
    } else {
      a.type = SG_ARG_DICT;
      a.n = (uint32_t)cJSON_GetArraySize (v);
      a.first = reserve (g, 2 * a.n);
      if (!json_children (b, v, depth, where, a.first))
        return false;
    }
  } else if (cJSON_IsArray (v)) {
    a.type = SG_ARG_LIST;
    a.n = (uint32_t)cJSON_GetArraySize (v);
    a.first = reserve (g, a.n);
    if (!json_children (b, v, depth, where, a.first))
      return false;
  } else if (cJSON_IsString (v)) {
    a = str_arg (g, v->valuestring);
    sg_arg_classify (&a, key);
  } else if (cJSON_IsNumber (v)) {
    a = sg_arg_number (v->valuedouble);
  } else if (cJSON_IsBool (v)) {
    a.type = SG_ARG_BOOL;
    a.b = cJSON_IsTrue (v);
  }
  *at (g, slot) = a;
  return true;
}

bool
sg_args_from_json (SgArgBuild *b, const cJSON *args, const cJSON *kwargs, SgNode *n)
{
  SgGraph *g = b->g;
  n->n_args = args ? (uint32_t)cJSON_GetArraySize (args) : 0;
  n->args_first = reserve (g, n->n_args);
  if (args && !json_children (b, args, 0, "args", n->args_first))
    return false;
  n->n_kwargs = kwargs ? (uint32_t)cJSON_GetArraySize (kwargs) : 0;
  n->kwargs_first = reserve (g, 2 * n->n_kwargs);
  uint32_t i = 0;
  const cJSON *c;
  cJSON_ArrayForEach (c, kwargs)
  {
    *at (g, n->kwargs_first + 2 * i) = str_arg (g, c->string);
    if (!json_value (b, c, 1, "kwargs", c->string, n->kwargs_first + 2 * i + 1))
      return false;
    i++;
  }
  return true;
}

/* --- from a spec ------------------------------------------------------------- */

static bool
spec_value (SgArgBuild *b, const SgArg *v, int depth, SgNodeId node_count, const char *key,
            uint32_t slot)
{
  SgGraph *g = b->g;
  if (depth > SG_MAX_ARG_DEPTH)
    FAIL (SG_GRAPH_ERROR_PARSE, "node '%s': args: nesting deeper than %d", b->node,
          SG_MAX_ARG_DEPTH);
  SgArg a = *v;
  switch (v->type) {
  case SG_ARG_NODE:
    if (v->ref < 0 || v->ref >= node_count)
      FAIL (SG_GRAPH_ERROR_REF, "node '%s': args: reference to node id %d, which does not exist",
            b->node, v->ref);
    a.input = input_index (b, v->ref);
    break;
  case SG_ARG_LIST:
  case SG_ARG_DICT: {
    uint32_t len = v->type == SG_ARG_DICT ? 2 * v->n : v->n;
    g_return_val_if_fail (b->scratch && v->first + len <= b->scratch->len, false);
    a.first = reserve (g, len);
    for (uint32_t i = 0; i < len; i++) {
      const SgArg *item = &g_array_index (b->scratch, SgArg, v->first + i);
      if (!spec_value (b, item, depth + 1, node_count, NULL, a.first + i))
        return false;
    }
    break;
  }
  case SG_ARG_STR: /* interned already (sg_rewrite_str, or a node's args) */
    sg_arg_classify (&a, key);
    break;
  default:
    break;
  }
  *at (g, slot) = a;
  return true;
}

bool
sg_args_from_spec (SgArgBuild *b, const SgArg *args, uint32_t n_args, const SgKwarg *kwargs,
                   uint32_t n_kwargs, SgNodeId node_count, SgNode *n)
{
  SgGraph *g = b->g;
  n->n_args = n_args;
  n->args_first = reserve (g, n_args);
  for (uint32_t i = 0; i < n_args; i++)
    if (!spec_value (b, &args[i], 1, node_count, NULL, n->args_first + i))
      return false;
  n->n_kwargs = n_kwargs;
  n->kwargs_first = reserve (g, 2 * n_kwargs);
  for (uint32_t i = 0; i < n_kwargs; i++) {
    *at (g, n->kwargs_first + 2 * i) = str_arg (g, kwargs[i].key);
    if (!spec_value (b, &kwargs[i].value, 1, node_count, kwargs[i].key,
                     n->kwargs_first + 2 * i + 1))
      return false;
  }
  return true;
}

SgArg
sg_arg_to_spec (const SgGraph *g, const SgNodeId *src_inputs, const SgArg *a, GArray *scratch)
{
  SgArg r = *a;
  if (a->type == SG_ARG_NODE) {
    r.ref = src_inputs[a->input];
  } else if (a->type == SG_ARG_LIST || a->type == SG_ARG_DICT) {
    uint32_t len = a->type == SG_ARG_DICT ? 2 * a->n : a->n;
    r.first = scratch->len;
    g_array_set_size (scratch, scratch->len + len);
    for (uint32_t i = 0; i < len; i++) {
      SgArg item = sg_arg_to_spec (g, src_inputs, &g_array_index (g->args, SgArg, a->first + i),
                                   scratch);
      g_array_index (scratch, SgArg, r.first + i) = item;
    }
  }
  return r;
}

void
sg_args_reintern (SgGraph *dst, guint from, guint to)
{
  for (guint i = from; i < to; i++) {
    SgArg *a = at (dst, i);
    if (sg_arg_str (a))
      a->s = g_string_chunk_insert_const (dst->strings, a->s);
  }
}

/* --- readers ----------------------------------------------------------------- */

const SgArg *
sg_node_kwarg (const SgGraph *g, SgNodeId id, const char *key)
{
  const SgNode *n = &g->nodes[id];
  for (uint32_t i = 0; i < n->n_kwargs; i++) {
    const SgArg *k = &g_array_index (g->args, SgArg, n->kwargs_first + 2 * i);
    if (strcmp (k->s, key) == 0)
      return k + 1;
  }
  return NULL;
}

const SgArg *
sg_node_param (const SgGraph *g, SgNodeId id, SgParam p)
{
  const SgArg *a = g->nodes[id].n_kwargs ? sg_node_kwarg (g, id, sg_param_name (p)) : NULL;
  if (a)
    return a;
  int pos = sg_op_param_pos (g->nodes[id].kind, p);
  return pos >= 0 ? sg_node_arg (g, id, (uint32_t)pos) : NULL;
}

const SgMeta *
sg_node_param_meta (const SgGraph *g, SgNodeId id, SgParam p)
{
  SgNodeId r = sg_node_param_node (g, id, p);
  return r != SG_NO_NODE && g->nodes[r].meta.ndim >= 0 ? &g->nodes[r].meta : NULL;
}

bool
sg_arg_int (const SgArg *a, int64_t *out)
{
  if (!a || a->type != SG_ARG_INT)
    return false;
  *out = a->i;
  return true;
}

bool
sg_arg_float (const SgArg *a, double *out)
{
  if (!a || (a->type != SG_ARG_INT && a->type != SG_ARG_FLOAT))
    return false;
  *out = a->type == SG_ARG_INT ? (double)a->i : a->f;
  return true;
}

bool
sg_arg_bool (const SgArg *a, bool *out)
{
  if (!a || a->type != SG_ARG_BOOL)
    return false;
  *out = a->b;
  return true;
}

const char *
sg_arg_str (const SgArg *a)
{
  if (!a)
    return NULL;
  switch (a->type) {
  case SG_ARG_STR: case SG_ARG_DTYPE: case SG_ARG_DEVICE: case SG_ARG_LAYOUT:
  case SG_ARG_MEMORY_FORMAT:
    return a->s;
  default:
    return NULL;
  }
}

/* --- back to JSON ------------------------------------------------------------ */

static cJSON *
to_json (const SgGraph *g, SgNodeId owner, const SgArg *a, SgArgRefJson ref, gpointer user)
{
  switch (a->type) {
  case SG_ARG_BOOL:
    return cJSON_CreateBool (a->b);
  case SG_ARG_INT:
    return cJSON_CreateNumber ((double)a->i);
  case SG_ARG_FLOAT:
    return cJSON_CreateNumber (a->f);
  case SG_ARG_NODE: {
    SgNodeId id = sg_arg_node (g, owner, a);
    if (ref)
      return ref (g, id, user);
    cJSON *o = cJSON_CreateObject ();
    cJSON_AddStringToObject (o, "node", g->nodes[id].name);
    return o;
  }
  case SG_ARG_LIST: {
    cJSON *l = cJSON_CreateArray ();
    for (uint32_t i = 0; i < a->n; i++)
      cJSON_AddItemToArray (l, to_json (g, owner, &g_array_index (g->args, SgArg, a->first + i),
                                        ref, user));
    return l;
  }
  case SG_ARG_DICT: {
    cJSON *o = cJSON_CreateObject ();
    for (uint32_t i = 0; i < a->n; i++) {
      const SgArg *k = &g_array_index (g->args, SgArg, a->first + 2 * i);
      cJSON_AddItemToObject (o, k->s, to_json (g, owner, k + 1, ref, user));
    }
    return o;
  }
  case SG_ARG_NONE:
    return cJSON_CreateNull ();
  default:
    return cJSON_CreateString (a->s);
  }
}

cJSON *
sg_node_args_json (const SgGraph *g, SgNodeId id, bool kwargs, SgArgRefJson ref, gpointer user)
{
  g_return_val_if_fail (g && id >= 0 && id < g->n_nodes, NULL);
  const SgNode *n = &g->nodes[id];
  SgArg whole = { .type = kwargs ? SG_ARG_DICT : SG_ARG_LIST };
  whole.n = kwargs ? n->n_kwargs : n->n_args;
  whole.first = kwargs ? n->kwargs_first : n->args_first;
  return to_json (g, id, &whole, ref, user);
}
