/* builder.c: see builder.h. */
#include "builder.h"

#include <stdarg.h>

static SgNodeId
append (SgGraph *g, char *json)
{
  GError *error = NULL;
  SgNodeId id = sg_graph_append_json (g, json, &error);
  if (id == SG_NO_NODE)
    g_error ("builder: %s\n  in %s", error->message, json);
  g_free (json);
  return id;
}

SgNodeId
tb_node (SgGraph *g, const char *fmt, ...)
{
  va_list ap;
  va_start (ap, fmt);
  char *json = g_strdup_vprintf (fmt, ap);
  va_end (ap);
  return append (g, json);
}

SgGraph *
tb_new (int32_t world)
{
  return sg_graph_new (world, 0);
}

void
tb_group (SgGraph *g, const char *name, int n, ...)
{
  int32_t ranks[64];
  g_assert (n > 0 && n <= 64);
  va_list ap;
  va_start (ap, n);
  for (int i = 0; i < n; i++)
    ranks[i] = va_arg (ap, int);
  va_end (ap);
  GError *error = NULL;
  if (sg_graph_add_group (g, name, ranks, n, NULL, 0, &error) < 0)
    g_error ("builder: %s", error->message);
}

static char *
meta_json (const char *dtype, int ndim, const int64_t *dims)
{
  GString *s = g_string_new ("{\"shape\":[");
  for (int i = 0; i < ndim; i++)
    g_string_append_printf (s, "%s%" G_GINT64_FORMAT, i ? "," : "", dims[i]);
  g_string_append (s, "],\"stride\":[");
  int64_t st = 1, strides[SG_MAX_DIMS];
  for (int i = ndim - 1; i >= 0; i--) {
    strides[i] = st;
    st *= dims[i] ? dims[i] : 1;
  }
  for (int i = 0; i < ndim; i++)
    g_string_append_printf (s, "%s%" G_GINT64_FORMAT, i ? "," : "", strides[i]);
  g_string_append_printf (s, "],\"dtype\":\"%s\"}", dtype);
  return g_string_free (s, FALSE);
}

static const SgNode *
node (SgGraph *g, const char *name)
{
  SgNodeId id = sg_graph_lookup (g, name);
  if (id == SG_NO_NODE)
    g_error ("builder: no node '%s'", name);
  return &g->nodes[id];
}

static SgNodeId
call (SgGraph *g, const char *name, const char *target, const char *args, const char *dtype,
      int ndim, const int64_t *dims)
{
  g_autofree char *m = meta_json (dtype, ndim, dims);
  return tb_node (g,
                  "{\"name\":\"%s\",\"op\":\"call_function\",\"target\":\"%s\",\"args\":%s,"
                  "\"kwargs\":{},\"meta\":%s}",
                  name, target, args, m);
}

SgNodeId
tb_input (SgGraph *g, const char *name, const char *dtype, int ndim, ...)
{
  int64_t dims[SG_MAX_DIMS];
  va_list ap;
  va_start (ap, ndim);
  for (int i = 0; i < ndim; i++)
    dims[i] = va_arg (ap, int64_t);
  va_end (ap);
  g_autofree char *m = meta_json (dtype, ndim, dims);
  return tb_node (g,
                  "{\"name\":\"%s\",\"op\":\"placeholder\",\"target\":\"%s\",\"args\":[],"
                  "\"kwargs\":{},\"meta\":%s}",
                  name, name, m);
}

static void
shape_of (SgGraph *g, const SgNode *n, int *ndim, int64_t *dims)
{
  *ndim = n->meta.ndim;
  const int64_t *sh = sg_meta_shape (g, &n->meta);
  for (int i = 0; i < *ndim; i++)
    dims[i] = sh[i];
}

SgNodeId
tb_mm (SgGraph *g, const char *name, const char *a, const char *b)
{
  const SgNode *na = node (g, a), *nb = node (g, b);
  g_assert (na->meta.ndim == 2 && nb->meta.ndim == 2);
  int64_t dims[2] = { sg_meta_shape (g, &na->meta)[0], sg_meta_shape (g, &nb->meta)[1] };
  g_autofree char *args = g_strdup_printf ("[{\"node\":\"%s\"},{\"node\":\"%s\"}]", a, b);
  return call (g, name, "aten.mm.default", args, sg_dtype_name (na->meta.dtype), 2, dims);
}

SgNodeId
tb_t (SgGraph *g, const char *name, const char *a)
{
  const SgNode *na = node (g, a);
  g_assert (na->meta.ndim == 2);
  const int64_t *sh = sg_meta_shape (g, &na->meta);
  return tb_node (g,
                  "{\"name\":\"%s\",\"op\":\"call_function\",\"target\":\"aten.t.default\","
                  "\"args\":[{\"node\":\"%s\"}],\"kwargs\":{},\"meta\":{\"shape\":[%" G_GINT64_FORMAT
                  ",%" G_GINT64_FORMAT "],\"stride\":[1,%" G_GINT64_FORMAT "],\"dtype\":\"%s\"}}",
                  name, a, sh[1], sh[0], sh[1], sg_dtype_name (na->meta.dtype));
}

SgNodeId
tb_pointwise (SgGraph *g, const char *name, const char *target, const char *a, const char *b)
{
  const SgNode *na = node (g, a);
  int ndim;
  int64_t dims[SG_MAX_DIMS];
  shape_of (g, na, &ndim, dims);
  g_autofree char *args = b ? g_strdup_printf ("[{\"node\":\"%s\"},{\"node\":\"%s\"}]", a, b)
                            : g_strdup_printf ("[{\"node\":\"%s\"}]", a);
  return call (g, name, target, args, sg_dtype_name (na->meta.dtype), ndim, dims);
}

static SgNodeId
collective (SgGraph *g, const char *name, const char *in, const char *group, SgOpKind kind)
{
  const SgNode *na = node (g, in);
  int32_t gi = sg_graph_find_group (g, group);
  g_assert (gi >= 0);
  int32_t k = g->groups[gi].n_ranks;
  int ndim;
  int64_t dims[SG_MAX_DIMS];
  shape_of (g, na, &ndim, dims);
  g_autofree char *args = NULL;
  if (kind == SG_OP_ALL_GATHER) {
    dims[0] *= k;
    args = g_strdup_printf ("[{\"node\":\"%s\"},%d,\"%s\"]", in, k, group);
  } else if (kind == SG_OP_REDUCE_SCATTER) {
    g_assert (dims[0] % k == 0);
    dims[0] /= k;
    args = g_strdup_printf ("[{\"node\":\"%s\"},\"sum\",%d,\"%s\"]", in, k, group);
  } else {
    args = g_strdup_printf ("[{\"node\":\"%s\"},\"sum\",\"%s\"]", in, group);
  }
  return call (g, name, sg_op_info (kind)->target, args, sg_dtype_name (na->meta.dtype), ndim,
               dims);
}

SgNodeId
tb_all_gather (SgGraph *g, const char *name, const char *in, const char *group)
{
  return collective (g, name, in, group, SG_OP_ALL_GATHER);
}

SgNodeId
tb_reduce_scatter (SgGraph *g, const char *name, const char *in, const char *group)
{
  return collective (g, name, in, group, SG_OP_REDUCE_SCATTER);
}

SgNodeId
tb_all_reduce (SgGraph *g, const char *name, const char *in, const char *group)
{
  return collective (g, name, in, group, SG_OP_ALL_REDUCE);
}

SgNodeId
tb_wait (SgGraph *g, const char *name, const char *coll)
{
  const SgNode *nc = node (g, coll);
  int ndim;
  int64_t dims[SG_MAX_DIMS];
  shape_of (g, nc, &ndim, dims);
  g_autofree char *args = g_strdup_printf ("[{\"node\":\"%s\"}]", coll);
  return call (g, name, "_c10d_functional.wait_tensor.default", args,
               sg_dtype_name (nc->meta.dtype), ndim, dims);
}

/* A call of @target whose value has @in's shape and dtype. */
static SgNodeId
same_shape_call (SgGraph *g, const char *name, const char *in, const char *target,
                 const char *args, const char *kwargs)
{
  const SgNode *na = node (g, in);
  int ndim;
  int64_t dims[SG_MAX_DIMS];
  shape_of (g, na, &ndim, dims);
  GString *sh = g_string_new ("");
  for (int i = 0; i < ndim; i++)
    g_string_append_printf (sh, "%s%" G_GINT64_FORMAT, i ? "," : "", dims[i]);
  SgNodeId id = tb_node (g,
                         "{\"name\":\"%s\",\"op\":\"call_function\",\"target\":\"%s\","
                         "\"args\":%s,\"kwargs\":%s,\"meta\":{\"shape\":[%s],\"dtype\":\"%s\"}}",
                         name, target, args, kwargs, sh->str, sg_dtype_name (na->meta.dtype));
  g_string_free (sh, TRUE);
  return id;
}

SgNodeId
tb_permute (SgGraph *g, const char *name, const char *in, const char *group, const char *pairs,
            const char *transport)
{
  g_autofree char *args = g_strdup_printf ("[{\"node\":\"%s\"},%s,\"%s\"]", in, pairs, group);
  g_autofree char *kwargs = transport ? g_strdup_printf ("{\"transport\":\"%s\"}", transport)
                                      : g_strdup ("{}");
  return same_shape_call (g, name, in, sg_op_info (SG_OP_COLLECTIVE_PERMUTE)->target, args,
                          kwargs);
}

SgNodeId
tb_rank_roll (SgGraph *g, const char *name, const char *in, const char *group, int64_t shift,
              int64_t sign)
{
  g_autofree char *args = g_strdup_printf ("[{\"node\":\"%s\"},%" G_GINT64_FORMAT
                                           ",%" G_GINT64_FORMAT ",\"%s\"]",
                                           in, shift, sign, group);
  return same_shape_call (g, name, in, sg_op_info (SG_OP_RANK_ROLL)->target, args, "{}");
}

void
tb_cost (SgGraph *g, SgNodeId id, double us)
{
  g->nodes[id].cost_us = us;
}

SgNodeId
tb_output (SgGraph *g, int n, ...)
{
  GString *s = g_string_new ("[[");
  va_list ap;
  va_start (ap, n);
  for (int i = 0; i < n; i++)
    g_string_append_printf (s, "%s{\"node\":\"%s\"}", i ? "," : "", va_arg (ap, const char *));
  va_end (ap);
  g_string_append (s, "]]");
  g_autofree char *args = g_string_free (s, FALSE);
  return tb_node (g,
                  "{\"name\":\"output\",\"op\":\"output\",\"target\":\"output\",\"args\":%s,"
                  "\"kwargs\":{}}",
                  args);
}

char *
tb_args_text (const SgGraph *g, SgNodeId id)
{
  cJSON *a = sg_node_args_json (g, id, false, NULL, NULL);
  cJSON *k = sg_node_args_json (g, id, true, NULL, NULL);
  char *at = cJSON_PrintUnformatted (a), *kt = cJSON_PrintUnformatted (k);
  char *s = g_strdup_printf ("%s %s", at, kt);
  cJSON_free (at);
  cJSON_free (kt);
  cJSON_Delete (a);
  cJSON_Delete (k);
  return s;
}
