/* report.c: the per-node cost table (`schedgraph --costs`).
 *
 * One row per node that has a cost (views, waits, inputs are left out),
 * sorted by estimate descending then id; then totals by op class and by
 * source, then the unknown targets. Integers for microseconds, fixed column
 * order, no pointers: diffable.
 *
 * Requires: sg_estimate_costs(). Invalidates: nothing.
 */
#include "estimate-private.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *
class_name (SgOpClass k)
{
  static const char *const names[] = {
    [SG_CLASS_UNKNOWN] = "unknown",     [SG_CLASS_INPUT] = "input",
    [SG_CLASS_OUTPUT] = "output",       [SG_CLASS_GETITEM] = "getitem",
    [SG_CLASS_MATMUL] = "matmul",       [SG_CLASS_ATTENTION] = "attention",
    [SG_CLASS_POINTWISE] = "pointwise", [SG_CLASS_REDUCTION] = "reduction",
    [SG_CLASS_VIEW] = "view",           [SG_CLASS_COPY] = "copy",
    [SG_CLASS_CREATION] = "creation",   [SG_CLASS_COLLECTIVE] = "collective",
    [SG_CLASS_WAIT] = "wait",           [SG_CLASS_BUCKET] = "bucket",
  };
  return (size_t)k < G_N_ELEMENTS (names) && names[k] ? names[k] : "?";
}

#define N_CLASSES (SG_CLASS_BUCKET + 1)

static void
bytes_str (GString *s, uint64_t b)
{
  if (b >= (1u << 30) && b % (1u << 30) == 0)
    g_string_append_printf (s, "%" G_GUINT64_FORMAT "GiB", b >> 30);
  else if (b >= (1u << 20) && b % (1u << 20) == 0)
    g_string_append_printf (s, "%" G_GUINT64_FORMAT "MiB", b >> 20);
  else if (b >= (1u << 10) && b % (1u << 10) == 0)
    g_string_append_printf (s, "%" G_GUINT64_FORMAT "KiB", b >> 10);
  else
    g_string_append_printf (s, "%" G_GUINT64_FORMAT "B", b);
}

static void
meta_str (GString *s, const SgGraph *g, const SgMeta *m)
{
  if (m->ndim < 0) {
    g_string_append (s, "-");
    return;
  }
  const int64_t *sh = sg_meta_shape (g, m);
  g_string_append_c (s, '[');
  for (int32_t i = 0; i < m->ndim; i++)
    g_string_append_printf (s, "%s%" G_GINT64_FORMAT, i ? "," : "", sh[i]);
  g_string_append_printf (s, "] %s", sg_dtype_name (m->dtype));
}

static void
shape_summary (GString *s, const SgGraph *g, const SgCostModel *cm, SgNodeId id)
{
  const SgNode *n = &g->nodes[id];
  SgShape sh;
  g_string_truncate (s, 0);
  switch (sg_op_class (n->kind)) {
  case SG_CLASS_MATMUL:
  case SG_CLASS_ATTENTION:
    if (sg_compute_shape (g, id, &sh)) {
      if (sg_op_class (n->kind) == SG_CLASS_MATMUL) {
        if (sh.batch > 1)
          g_string_append_printf (s, "%" G_GINT64_FORMAT "x", sh.batch);
        g_string_append_printf (s, "%" G_GINT64_FORMAT "x%" G_GINT64_FORMAT "x%" G_GINT64_FORMAT,
                                sh.m, sh.k, sh.n);
      } else {
        g_string_append_printf (s,
                                "b%" G_GINT64_FORMAT " h%" G_GINT64_FORMAT " q%" G_GINT64_FORMAT
                                " kv%" G_GINT64_FORMAT " d%" G_GINT64_FORMAT "%s",
                                sh.batch, sh.heads, sh.seq_q, sh.seq_kv, sh.head_dim,
                                sh.causal ? " causal" : "");
      }
      g_string_append_printf (s, " %s", sg_dtype_name (sh.dtype));
      return;
    }
    break;
  case SG_CLASS_COLLECTIVE: {
    bytes_str (s, sg_node_comm_bytes (g, id));
    int32_t nodes = n->group >= 0 && n->group < cm->n_groups ? cm->group_nodes[n->group] : 1;
    g_string_append_printf (s, " g%d", n->group_size);
    if (nodes > 1)
      g_string_append_printf (s, " nodes%d", nodes);
    if (n->kind == SG_OP_COLLECTIVE_PERMUTE) {
      SgPermute p;
      if (sg_node_permute (g, id, &p, NULL))
        g_string_append_printf (s, " p2p/%s pairs%d", sg_transport_name (p.transport), p.n_pairs);
      sg_permute_clear (&p);
    } else if (sg_op_is_coalesced (n->kind)) { /* one NCCL group of its members */
      g_string_append_printf (s, " group of %u", sg_node_coll_members (g, id));
    } else if (n->est_src == SG_COST_MODEL) { /* what NCCL would pick */
      SgNcclChoice ch =
        sg_nccl_time (&cm->cluster, n->kind, sg_node_comm_bytes (g, id), n->group_size, nodes);
      g_string_append_printf (s, " %s/%s", sg_nccl_algo_name (ch.algo),
                              sg_nccl_proto_name (ch.proto));
    }
    return;
  }
  default:
    break;
  }
  if (n->n_tuple)
    g_string_append_printf (s, "tuple(%u)", n->n_tuple);
  else
    meta_str (s, g, &n->meta);
}

static int
row_cmp (const void *a, const void *b, void *user)
{
  const SgGraph *g = user;
  SgNodeId x = *(const SgNodeId *)a, y = *(const SgNodeId *)b;
  double cx = g->nodes[x].est_us, cy = g->nodes[y].est_us;
  if (cx != cy)
    return cx > cy ? -1 : 1;
  return (x > y) - (x < y);
}

static long long
us_int (double us)
{
  return (long long)llround (us);
}

void
sg_estimate_print_costs (const SgGraph *g, FILE *out)
{
  g_return_if_fail (g && out);
  const SgCostModel *cm = sg_graph_cost_model (g);
  if (!cm) {
    fprintf (out, "# costs: not estimated\n");
    return;
  }
  fprintf (out, "# costs: cluster %s, profile %s%s%s%s", cm->cluster.name,
           cm->profile_path ? cm->profile_path : "none", cm->profile ? " (" : "",
           cm->profile ? sg_profile_device (cm->profile) : "", cm->profile ? ")" : "");
  const int32_t pairs = sg_cost_contention_pairs (cm);
  if (pairs > 0) /* docs/cost-model.md section 3, "Contention per pair" */
    fprintf (out, ", %d contention pairs over %d kernel slots", pairs,
             sg_cost_contention_slots (cm));
  fprintf (out, "\n");
  sg_contention_print_pairs (cm, out);
  GArray *rows = g_array_sized_new (FALSE, FALSE, sizeof (SgNodeId), (guint)g->n_nodes);
  double cls_us[N_CLASSES] = { 0 }, src_us[SG_COST_MODEL + 1] = { 0 };
  int64_t cls_n[N_CLASSES] = { 0 }, src_n[SG_COST_MODEL + 1] = { 0 };
  double total = 0.0;
  for (SgNodeId i = 0; i < g->n_nodes; i++) {
    const SgNode *n = &g->nodes[i];
    SgOpClass k = sg_op_class (n->kind);
    if (n->est_src <= SG_COST_MODEL) {
      src_us[n->est_src] += n->est_us;
      src_n[n->est_src]++;
    }
    if (n->est_src == SG_COST_FREE || n->est_src == SG_COST_NONE)
      continue;
    cls_us[k] += n->est_us;
    cls_n[k]++;
    total += n->est_us;
    g_array_append_val (rows, i);
  }
  g_array_sort_with_data (rows, row_cmp, (gpointer)g);

  /* column widths from the content: aligned and still deterministic */
  GPtrArray *shapes = g_ptr_array_new_full (rows->len, g_free);
  GString *shape = g_string_new (NULL);
  int wn = 4, wk = 4, ws = 5;
  for (guint r = 0; r < rows->len; r++) {
    SgNodeId id = g_array_index (rows, SgNodeId, r);
    const SgNode *n = &g->nodes[id];
    shape_summary (shape, g, cm, id);
    g_ptr_array_add (shapes, g_strdup (shape->str));
    const char *kind = n->kind == SG_OP_UNKNOWN ? n->target : sg_op_name (n->kind);
    wn = MAX (wn, (int)strlen (n->name));
    wk = MAX (wk, (int)strlen (kind));
    ws = MAX (ws, (int)shape->len);
  }
  fprintf (out, "# %-*s %-*s %-*s %10s  %s\n", wn, "name", wk, "kind", ws, "shape", "est_us",
           "source");
  for (guint r = 0; r < rows->len; r++) {
    SgNodeId id = g_array_index (rows, SgNodeId, r);
    const SgNode *n = &g->nodes[id];
    const char *kind = n->kind == SG_OP_UNKNOWN ? n->target : sg_op_name (n->kind);
    fprintf (out, "  %-*s %-*s %-*s %10lld  %s\n", wn, n->name, wk, kind, ws,
             (const char *)shapes->pdata[r], us_int (n->est_us), sg_cost_source_name (n->est_src));
  }
  g_ptr_array_unref (shapes);
  g_string_free (shape, TRUE);
  guint n_rows = rows->len;
  g_array_unref (rows);

  fprintf (out, "# totals by class\n# %-12s %10s %12s\n", "class", "nodes", "est_us");
  for (int k = 0; k < N_CLASSES; k++)
    if (cls_n[k])
      fprintf (out, "  %-12s %10" G_GINT64_FORMAT " %12lld\n", class_name ((SgOpClass)k), cls_n[k],
               us_int (cls_us[k]));
  fprintf (out, "  %-12s %10u %12lld\n", "total", n_rows, us_int (total));
  fprintf (out, "# totals by source\n# %-12s %10s %12s\n", "source", "nodes", "est_us");
  for (int s = SG_COST_FREE; s <= SG_COST_MODEL; s++)
    fprintf (out, "  %-12s %10" G_GINT64_FORMAT " %12lld\n", sg_cost_source_name ((SgCostSource)s),
             src_n[s], us_int (src_us[s]));
  size_t n_unknown;
  const char *const *unknown = sg_estimate_unknown_targets (g, &n_unknown);
  fprintf (out, "# unknown targets (costed as cheap compute): %zu\n", n_unknown);
  for (size_t i = 0; i < n_unknown; i++)
    fprintf (out, "  %s\n", unknown[i]);
}
