/* find.c: the sites of the decomposition pass (docs/decompose.md "Sites").
 *
 * Every all_gather, reduce_scatter and all_reduce is looked at once:
 *  - all_gather -> wait: the users of the wait that are mms reading the
 *    gathered dim as their rows (M), directly or through one view that
 *    keeps rank blocks as row blocks (a 2-d view whose rows divide by the
 *    group size), share one ring; every other user gets the whole
 *    gathered tensor back (the K-consumers of the backward: t(dy) @ x);
 *  - mm -> reduce_scatter, mm -> all_reduce: the reduced tensor is an mm
 *    or a sum of mms (a tree of add.Tensor over mms of one shape, as the
 *    backward sums the input gradients of q/k/v or gate/up), each node of
 *    it read by nothing else; its rows are the scatter dim.
 * Mirrors the pattern matching of PyTorch's micro-pipeline TP pass
 * (torch/_inductor/fx_passes/micro_pipeline_tp.py: all_gather -> mm with
 * the users sharing one gather, reduce_scatter of an mm) and XLA's
 * collective-matmul (windowed einsum) matcher.
 * Sites of one class (sg_sites_classes: the same collective kind, group,
 * shapes and dtypes, and the same mms or tree of adds) rewrite into the
 * same new nodes, so the judge prices each class's forms once.
 * sg_sites_find_pool looks at ranges of nodes on the pool and joins their
 * sites in range order: the same list.
 * Requires: users. Invalidates: nothing.
 */
#include "decompose-private.h"

#include <string.h>

/* The node parameter @p of @id references, for the matmul operands. */
static void
mm_operands (const SgGraph *g, SgNodeId id, SgNodeId *a, SgNodeId *b)
{
  SgParam pa, pb;
  *a = *b = SG_NO_NODE;
  if (sg_op_matmul_params (g->nodes[id].kind, &pa, &pb)) {
    *a = sg_node_param_node (g, id, pa);
    *b = sg_node_param_node (g, id, pb);
  }
}

/* An mm that reads @v as its rows (first operand) and not as its second. */
static bool
reads_rows (const SgGraph *g, SgNodeId mm, SgNodeId v)
{
  if (g->nodes[mm].kind != SG_OP_MM || g->nodes[mm].meta.ndim != 2)
    return false;
  SgNodeId a, b;
  mm_operands (g, mm, &a, &b);
  return a == v && b != v && b != SG_NO_NODE;
}

/* A view of the gathered tensor @w that every user multiplies by rows: a
 * 2-d view (view, _unsafe_view) whose rows split into @k equal blocks, so
 * that rank block t of @w is row block t of the view (@w is contiguous). */
static bool
row_view (const SgGraph *g, SgNodeId v, int32_t k)
{
  const SgNode *n = &g->nodes[v];
  if ((n->kind != SG_OP_VIEW && n->kind != SG_OP_UNSAFE_VIEW) || n->meta.ndim != 2
      || sg_meta_shape (g, &n->meta)[0] % k != 0)
    return false;
  uint32_t nu;
  const SgNodeId *u = sg_node_users (g, v, &nu);
  for (uint32_t i = 0; i < nu; i++)
    if (!reads_rows (g, u[i], v))
      return false;
  return nu > 0;
}

static void
add_mm (SgSite *s, GArray *mm, GArray *view, SgNodeId m, SgNodeId v)
{
  g_array_append_val (mm, m);
  g_array_append_val (view, v);
  s->n_mm++;
}

/* @m is @of's shape with dim 0 times @k, and the same dtype. */
static bool
gathered_shape (const SgGraph *g, const SgMeta *m, const SgMeta *of, int64_t k)
{
  if (m->ndim != of->ndim || m->ndim < 1 || m->dtype != of->dtype)
    return false;
  for (int32_t d = 0; d < m->ndim; d++)
    if (sg_meta_shape (g, m)[d] != sg_meta_shape (g, of)[d] * (d == 0 ? k : 1))
      return false;
  return true;
}

/* An mm of rows consumer @mm on @a: its rows are @a's and its dtype @a's. */
static bool
mm_meta_ok (const SgGraph *g, SgNodeId mm, SgNodeId a)
{
  const SgMeta *m = &g->nodes[mm].meta, *am = &g->nodes[a].meta;
  return am->ndim == 2 && m->dtype == am->dtype && sg_meta_shape (g, m)[0] == sg_meta_shape (g, am)[0];
}

static void
find_gather (const SgGraph *g, SgSite *s)
{
  const SgMeta *wm = &g->nodes[s->wait].meta;
  uint32_t nin;
  const SgNodeId x = sg_node_inputs (g, s->coll, &nin)[0];
  if (nin != 1 || !gathered_shape (g, wm, &g->nodes[x].meta, s->k)
      || !gathered_shape (g, &g->nodes[s->coll].meta, &g->nodes[x].meta, s->k)
      || !sg_strides_dense (wm->ndim, sg_meta_shape (g, wm), sg_meta_stride (g, wm))) {
    s->reason = SG_SITE_META;
    return;
  }
  s->rows = sg_meta_shape (g, wm)[0];
  g_autoptr (GArray) mm = g_array_new (FALSE, FALSE, sizeof (SgNodeId));
  g_autoptr (GArray) view = g_array_new (FALSE, FALSE, sizeof (SgNodeId));
  uint32_t nu;
  const SgNodeId *u = sg_node_users (g, s->wait, &nu);
  for (uint32_t i = 0; i < nu; i++) {
    if (wm->ndim == 2 && reads_rows (g, u[i], s->wait)) {
      add_mm (s, mm, view, u[i], SG_NO_NODE);
    } else if (row_view (g, u[i], s->k)) {
      uint32_t nv;
      const SgNodeId *vu = sg_node_users (g, u[i], &nv);
      for (uint32_t j = 0; j < nv; j++)
        add_mm (s, mm, view, vu[j], u[i]);
    } else {
      s->n_whole++;
    }
  }
  if (s->n_mm == 0 || s->rows % s->k != 0) {
    s->reason = s->n_mm == 0 ? SG_SITE_NO_ROWS : SG_SITE_INDIVISIBLE;
    return;
  }
  for (guint i = 0; i < mm->len; i++) {
    const SgNodeId v = g_array_index (view, SgNodeId, i);
    if (!mm_meta_ok (g, g_array_index (mm, SgNodeId, i), v != SG_NO_NODE ? v : s->wait)
        || (v != SG_NO_NODE && g->nodes[v].meta.dtype != wm->dtype)) {
      s->reason = SG_SITE_META;
      return;
    }
  }
  s->mm = (SgNodeId *)(void *)g_array_free (g_steal_pointer (&mm), FALSE);
  s->view = (SgNodeId *)(void *)g_array_free (g_steal_pointer (&view), FALSE);
}

static bool
same_shape (const SgGraph *g, const SgMeta *a, const SgMeta *b)
{
  if (a->ndim != b->ndim || a->dtype != b->dtype)
    return false;
  for (int32_t d = 0; d < a->ndim; d++)
    if (sg_meta_shape (g, a)[d] != sg_meta_shape (g, b)[d])
      return false;
  return true;
}

/* Appends the tree of @v (read by @parent alone) to @terms; its index, or
 * -1 with s->reason set. */
static int32_t
add_term (const SgGraph *g, SgSite *s, SgNodeId v, SgNodeId parent, GArray *terms, int depth)
{
  const SgNode *n = &g->nodes[v];
  uint32_t nu;
  const SgNodeId *u = sg_node_users (g, v, &nu);
  if (nu != 1 || u[0] != parent) {
    s->reason = SG_SITE_SHARED;
    return -1;
  }
  SgSiteTerm t = { v, -1, -1 };
  if (n->kind == SG_OP_MM && n->meta.ndim == 2) {
    SgNodeId a, b;
    mm_operands (g, v, &a, &b);
    if (a == SG_NO_NODE || b == SG_NO_NODE || ++s->n_leaves > SG_SITE_MAX_LEAVES) {
      s->reason = SG_SITE_PRODUCER;
      return -1;
    }
    if (!mm_meta_ok (g, v, a)) {
      s->reason = SG_SITE_META;
      return -1;
    }
  } else if (n->kind == SG_OP_ADD_TENSOR && n->n_args == 2 && n->n_kwargs == 0 && depth < 8) {
    uint32_t nin;
    const SgNodeId *in = sg_node_inputs (g, v, &nin);
    if (nin != 2 || !same_shape (g, &g->nodes[in[0]].meta, &n->meta)
        || !same_shape (g, &g->nodes[in[1]].meta, &n->meta)) {
      s->reason = SG_SITE_PRODUCER;
      return -1;
    }
    SgNodeId x = sg_node_param_node (g, v, SG_PARAM_SELF);
    SgNodeId y = sg_node_param_node (g, v, SG_PARAM_OTHER);
    if ((t.a = add_term (g, s, x, v, terms, depth + 1)) < 0
        || (t.b = add_term (g, s, y, v, terms, depth + 1)) < 0)
      return -1;
  } else {
    s->reason = SG_SITE_PRODUCER;
    return -1;
  }
  g_array_append_val (terms, t);
  return (int32_t)terms->len - 1;
}

static void
find_reduce (const SgGraph *g, SgSite *s)
{
  const SgNode *c = &g->nodes[s->coll];
  if (c->reduce != SG_REDUCE_SUM) {
    s->reason = SG_SITE_REDUCE_OP;
    return;
  }
  uint32_t nin;
  SgNodeId p = sg_node_inputs (g, s->coll, &nin)[0];
  if (nin != 1 || g->nodes[p].meta.ndim != 2) {
    s->reason = SG_SITE_PRODUCER;
    return;
  }
  s->rows = sg_meta_shape (g, &g->nodes[p].meta)[0];
  /* the result is the input's shape (all_reduce) or its rows / k */
  const SgMeta *pm = &g->nodes[p].meta;
  const SgMeta *res[2] = { &c->meta, &g->nodes[s->wait].meta };
  for (int i = 0; i < 2; i++) {
    const SgMeta *m = res[i];
    const int64_t div = s->kind == SG_SITE_MM_REDUCE_SCATTER ? s->k : 1;
    if (m->ndim != 2 || m->dtype != pm->dtype || sg_meta_shape (g, m)[1] != sg_meta_shape (g, pm)[1]
        || sg_meta_shape (g, m)[0] * div != s->rows) {
      s->reason = SG_SITE_META;
      return;
    }
  }
  g_autoptr (GArray) terms = g_array_new (FALSE, FALSE, sizeof (SgSiteTerm));
  if (add_term (g, s, p, s->coll, terms, 0) < 0)
    return;
  /* reduce_scatter: k ring steps; all_reduce: at least two row chunks */
  if (s->rows % (s->kind == SG_SITE_MM_REDUCE_SCATTER ? s->k : 2) != 0) {
    s->reason = SG_SITE_INDIVISIBLE;
    return;
  }
  s->n_terms = (int32_t)terms->len;
  s->terms = (SgSiteTerm *)(void *)g_array_free (g_steal_pointer (&terms), FALSE);
}

/* Nodes per range of sg_sites_find_pool's tasks. */
#define RANGE_NODES 16384

typedef struct {
  const SgGraph *g;
  GArray **found; /* per range: its sites, in id order */
} Finding;

static void
find_range (gpointer data, int32_t r, int32_t worker)
{
  (void)worker;
  Finding *f = data;
  const SgGraph *g = f->g;
  GArray *out = f->found[r] = g_array_new (FALSE, TRUE, sizeof (SgSite));
  SgNodeId begin, end;
  sg_range_of (r, RANGE_NODES, g->n_nodes, &begin, &end);
  for (SgNodeId i = begin; i < end; i++) {
    const SgNode *c = &g->nodes[i];
    SgSite s = { .coll = i, .wait = SG_NO_NODE, .k = c->group_size };
    switch (c->kind) {
    case SG_OP_ALL_GATHER: s.kind = SG_SITE_ALL_GATHER_MM; break;
    case SG_OP_REDUCE_SCATTER: s.kind = SG_SITE_MM_REDUCE_SCATTER; break;
    case SG_OP_ALL_REDUCE: s.kind = SG_SITE_MM_ALL_REDUCE; break;
    default: continue;
    }
    uint32_t nu;
    const SgNodeId *u = sg_node_users (g, i, &nu);
    if (nu != 1 || g->nodes[u[0]].kind != SG_OP_WAIT)
      s.reason = SG_SITE_NO_WAIT;
    else if (s.k < 2)
      s.reason = SG_SITE_SMALL_GROUP;
    if (s.reason == SG_SITE_DECOMPOSED) {
      s.wait = u[0];
      if (s.kind == SG_SITE_ALL_GATHER_MM)
        find_gather (g, &s);
      else
        find_reduce (g, &s);
    }
    g_array_append_val (out, s);
  }
}

SgSite *
sg_sites_find_pool (const SgGraph *g, SgPool *pool, int32_t *n)
{
  int32_t n_ranges = sg_ranges (g->n_nodes, RANGE_NODES);
  Finding f = { g, g_new (GArray *, (size_t)n_ranges) };
  sg_pool_run (pool, n_ranges, find_range, &f);
  GArray *out = f.found[0];
  for (int32_t r = 1; r < n_ranges; r++) {
    g_array_append_vals (out, f.found[r]->data, f.found[r]->len);
    g_array_free (f.found[r], TRUE);
  }
  g_free (f.found);
  *n = (int32_t)out->len;
  return (SgSite *)(void *)g_array_free (out, FALSE);
}

SgSite *
sg_sites_find (const SgGraph *g, int32_t *n)
{
  return sg_sites_find_pool (g, NULL, n);
}

void
sg_sites_free (SgSite *sites, int32_t n)
{
  for (int32_t i = 0; i < n; i++) {
    g_free (sites[i].mm);
    g_free (sites[i].view);
    g_free (sites[i].terms);
  }
  g_free (sites);
}

static void
put_meta (GString *k, const SgGraph *g, const SgMeta *m)
{
  g_string_append_printf (k, "|%d:%d", (int)m->dtype, m->ndim);
  for (int32_t d = 0; d < m->ndim; d++)
    g_string_append_printf (k, ",%" G_GINT64_FORMAT "/%" G_GINT64_FORMAT,
                            sg_meta_shape (g, m)[d], sg_meta_stride (g, m)[d]);
}

/* A matmul @mm's operands and result. */
static void
put_mm (GString *k, const SgGraph *g, SgNodeId mm)
{
  SgNodeId a, b;
  mm_operands (g, mm, &a, &b);
  put_meta (k, g, &g->nodes[a].meta);
  put_meta (k, g, &g->nodes[b].meta);
  put_meta (k, g, &g->nodes[mm].meta);
}

int32_t *
sg_sites_classes (const SgGraph *g, const SgSite *sites, int32_t n, int32_t *n_classes)
{
  g_autoptr (GHashTable) seen = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  int32_t *cls = g_new (int32_t, (size_t)n + 1);
  g_autoptr (GString) k = g_string_new ("");
  *n_classes = 0;
  for (int32_t i = 0; i < n; i++) {
    const SgSite *s = &sites[i];
    cls[i] = -1;
    if (s->reason != SG_SITE_DECOMPOSED)
      continue;
    const SgNode *c = &g->nodes[s->coll];
    g_string_printf (k, "%d:%d:%d:%" G_GINT64_FORMAT ":%d:%d:%d", (int)s->kind, c->group, s->k,
                     s->rows, s->n_mm, s->n_whole, s->n_terms);
    put_meta (k, g, &c->meta);
    uint32_t nin;
    put_meta (k, g, &g->nodes[sg_node_inputs (g, s->coll, &nin)[0]].meta);
    for (int32_t j = 0; j < s->n_mm; j++) {
      g_string_append (k, s->view[j] != SG_NO_NODE ? "|v" : "|-");
      if (s->view[j] != SG_NO_NODE)
        put_meta (k, g, &g->nodes[s->view[j]].meta);
      put_mm (k, g, s->mm[j]);
    }
    for (int32_t j = 0; j < s->n_terms; j++) {
      g_string_append_printf (k, "|t%d,%d", s->terms[j].a, s->terms[j].b);
      if (s->terms[j].a < 0)
        put_mm (k, g, s->terms[j].node);
    }
    gpointer v;
    if (g_hash_table_lookup_extended (seen, k->str, NULL, &v)) {
      cls[i] = GPOINTER_TO_INT (v);
    } else {
      cls[i] = (*n_classes)++;
      g_hash_table_insert (seen, g_strdup (k->str), GINT_TO_POINTER (cls[i]));
    }
  }
  return cls;
}
