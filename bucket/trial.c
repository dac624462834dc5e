/* trial.c: the bucketed graph of a trial, built from arrays.
 *
 * The pass judges every proposal by simulating the graph sg_bucket_apply
 * would make from the scheduled graph and all buckets so far. Doing that
 * with the rewrite itself costs a deep copy, JSON for every new node and
 * name lookups for every edge, per trial, for every accepted bucket again.
 * This file builds the same graph as far as the simulator and the cost
 * model read it (kinds, metas, inputs, groups, costs, node order) straight
 * from arrays: the same checks and layout (sg_bucket_specs_check,
 * sg_bucket_plan_make), the same new nodes (P, C, W, one U per member), the
 * same rewiring and implicit edges, the same stable topological sort keys
 * and tie rule. tests/bucket/test_trial.c compares the two node by node.
 * Mirrors: rewrite.c (sg_bucket_apply). Requires: a topological id order,
 * users of the base graph. Invalidates: nothing (the base graph's dims pool
 * grows while a trial graph lives and shrinks back when it is freed).
 */
#include "bucket-private.h"

#include <math.h>
#include <string.h>

struct SgBucketTrial {
  SgGraph *g;
  int32_t n0;
  guint dims_len; /* g->dims->len outside builds */
  /* g's implicit edges by id, as sg_bucket_stable_order resolves them */
  SgNodeId *efrom, *eto;
  int32_t *ekind;
  int32_t n_edges;
  const char *pack_target, *wait_target, *unpack_target;
  SgOpKind pack_kind, wait_kind, unpack_kind;
  int32_t *n_in;         /* per base node: its input count */
  SgNodeId *uncosted;    /* base nodes without a cost (normally none) */
  int32_t n_uncosted;
  SgNode *spare;         /* the last trial graph's node array, reused */
  int32_t spare_cap;
};

SgBucketTrial *
sg_bucket_trial_new (SgGraph *g)
{
  g_return_val_if_fail (g, NULL);
  SgBucketTrial *t = g_new0 (SgBucketTrial, 1);
  t->g = g;
  t->n0 = g->n_nodes;
  t->dims_len = g->dims->len;
  sg_graph_fill_users (g);
  guint ne = g->implicit_edges ? g->implicit_edges->len : 0;
  t->efrom = g_new (SgNodeId, ne + 1);
  t->eto = g_new (SgNodeId, ne + 1);
  t->ekind = g_new (int32_t, ne + 1);
  for (guint i = 0; i < ne; i++) {
    SgImplicitEdge e = g_array_index (g->implicit_edges, SgImplicitEdge, i);
    SgNodeId a = sg_graph_lookup (g, e.from), b = sg_graph_lookup (g, e.to);
    if (a == SG_NO_NODE || b == SG_NO_NODE || a == b)
      continue;
    t->efrom[t->n_edges] = a, t->eto[t->n_edges] = b, t->ekind[t->n_edges++] = e.kind;
  }
  t->n_in = g_new (int32_t, (size_t)t->n0 + 1);
  t->uncosted = g_new (SgNodeId, (size_t)t->n0 + 1);
  for (SgNodeId i = 0; i < t->n0; i++) {
    t->n_in[i] = (int32_t)g->nodes[i].n_in;
    if (g->nodes[i].est_src == SG_COST_NONE)
      t->uncosted[t->n_uncosted++] = i;
  }
  t->pack_target = sg_op_info (SG_OP_BUCKET_PACK)->target;
  t->wait_target = sg_op_info (SG_OP_WAIT)->target;
  t->unpack_target = sg_op_info (SG_OP_BUCKET_UNPACK)->target;
  t->pack_kind = sg_op_from_target (t->pack_target);
  t->wait_kind = sg_op_from_target (t->wait_target);
  t->unpack_kind = sg_op_from_target (t->unpack_target);
  return t;
}

void
sg_bucket_trial_free (SgBucketTrial *t)
{
  if (!t)
    return;
  g_free (t->efrom);
  g_free (t->eto);
  g_free (t->ekind);
  g_free (t->n_in);
  g_free (t->uncosted);
  g_free (t->spare);
  g_free (t);
}

/* A meta in the borrowed dims pool: @shape with contiguous strides, as the
 * loader stores {"shape", "stride": contiguous, "dtype"}. */
static SgMeta
push_meta (GArray *dims, const int64_t *shape, int32_t ndim, SgDtype dtype)
{
  SgMeta m = { ndim, dtype, dims->len };
  int64_t st[SG_MAX_DIMS];
  int64_t s = 1;
  for (int32_t d = ndim - 1; d >= 0; d--) {
    st[d] = s;
    s *= shape[d] ? shape[d] : 1;
  }
  g_array_append_vals (dims, shape, (guint)ndim);
  g_array_append_vals (dims, st, (guint)ndim);
  return m;
}

static SgNode
new_node (const char *name, const char *target, SgOpKind kind, SgMeta meta)
{
  SgNode n = { 0 };
  n.name = name;
  n.target = target;
  n.args_json = "[]";
  n.kwargs_json = "{}";
  n.op = SG_NODE_CALL;
  n.kind = kind;
  n.meta = meta;
  n.group = -1;
  n.getitem_index = -1;
  n.cost_us = NAN;
  return n;
}

/* Per build: what each id of the rewritten graph (before renumbering) is. */
typedef struct {
  int32_t n0, n1, ns;
  const SgBucketSpec *specs;
  SgBucketPlan *plans;
  SgNodeId *waits;     /* per member, spec order */
  int32_t *first;      /* per spec: its first member's index in waits */
  SgNodeId *p_id;      /* per spec: id of its P; C, W, U_i follow */
  int32_t *bucket_of;  /* per new node (id - n0): its spec */
  SgNodeId *redir;     /* per base node: the unpack that replaces a member's wait, or -1 */
  SgNodeId *rename;    /* per base node: C or W for members and their waits, or -1 */
  SgNodeId **p_inputs; /* per spec: P's distinct inputs */
  uint32_t *p_n_in;
} Build;

static void
build_clear (Build *b)
{
  for (int32_t i = 0; i < b->ns; i++) {
    if (b->plans)
      sg_bucket_plan_clear (&b->plans[i]);
    if (b->p_inputs)
      g_free (b->p_inputs[i]);
  }
  g_free (b->plans);
  g_free (b->p_inputs);
  g_free (b->p_n_in);
  g_free (b->waits);
  g_free (b->first);
  g_free (b->p_id);
  g_free (b->bucket_of);
  g_free (b->redir);
  g_free (b->rename);
}

/* The data successors of @v in the rewritten graph: @a, @b and the ids
 * [lo, hi). (Implicit edges are walked by the caller.) */
typedef struct {
  const SgNodeId *a, *b;
  uint32_t na, nb;
  SgNodeId lo, hi;
} Succ;

static Succ
successors (const Build *bd, const SgGraph *g, SgNodeId v, const uint32_t *xfirst,
            const SgNodeId *xadj)
{
  Succ s = { 0 };
  if (v < bd->n0) { /* its users, and the P of every bucket it feeds */
    s.a = sg_node_users (g, v, &s.na);
    s.b = &xadj[xfirst[v]];
    s.nb = xfirst[v + 1] - xfirst[v];
    return s;
  }
  int32_t b = bd->bucket_of[v - bd->n0];
  int32_t r = v - bd->p_id[b];
  if (r < 2) { /* P -> C, C -> W */
    s.lo = v + 1, s.hi = v + 2;
  } else if (r == 2) { /* W -> every U */
    s.lo = v + 1, s.hi = v + 1 + bd->specs[b].n_members;
  } else { /* U_i -> the users of member i's wait, the packs that read it */
    s.a = sg_node_users (g, bd->waits[bd->first[b] + r - 3], &s.na);
    s.b = &xadj[xfirst[v]];
    s.nb = xfirst[v + 1] - xfirst[v];
  }
  return s;
}

/* One input of @u is done; once all are and the cursor has passed it, @u
 * waits in the heap (the cursor finds those ahead of it). */
static void
release (SgNodeId u, int32_t *indeg, const bool *keep, const int64_t *key, const int32_t *pos,
         int32_t cur, HeapItem *heap, int32_t *hn)
{
  if (--indeg[u] == 0 && keep[u] && pos[u] < cur)
    heap_push (heap, hn, (HeapItem){ key[u], u });
}

SgGraph *
sg_bucket_trial_build (SgBucketTrial *t, const SgBucketSpec *specs, int32_t n_specs,
                       GError **error)
{
  SgGraph *g = t->g;
  int32_t n0 = g->n_nodes;
  g_return_val_if_fail (n0 == t->n0 && g->dims->len == t->dims_len, NULL);
  g_return_val_if_fail ((specs || n_specs == 0) && n_specs >= 0, NULL);
  sg_graph_fill_users (g);
  Build bd = { .n0 = n0, .ns = n_specs, .specs = specs };
  int32_t total = 0;
  for (int32_t b = 0; b < n_specs; b++)
    total += MAX (specs[b].n_members, 0);
  g_autofree bool *taken = g_new0 (bool, (size_t)n0 + 1);
  g_autofree int64_t *start_pos = g_new (int64_t, (size_t)n_specs + 1);
  g_autofree int64_t *use_pos = g_new (int64_t, (size_t)n_specs + 1);
  bd.waits = g_new (SgNodeId, (size_t)total + 1);
  if (!sg_bucket_specs_check (g, specs, n_specs, taken, bd.waits, start_pos, use_pos, error)) {
    build_clear (&bd);
    return NULL;
  }
  bd.plans = g_new0 (SgBucketPlan, (size_t)n_specs + 1);
  bd.p_inputs = g_new0 (SgNodeId *, (size_t)n_specs + 1);
  bd.p_n_in = g_new0 (uint32_t, (size_t)n_specs + 1);
  bd.first = g_new (int32_t, (size_t)n_specs + 1);
  bd.p_id = g_new (SgNodeId, (size_t)n_specs + 1);
  int32_t n1 = n0;
  for (int32_t b = 0, f = 0; b < n_specs; b++) {
    bd.first[b] = f;
    if (!sg_bucket_plan_make (g, &specs[b], &bd.waits[f], &bd.plans[b], error)) {
      build_clear (&bd);
      return NULL;
    }
    bd.p_id[b] = n1;
    n1 += 3 + specs[b].n_members;
    f += specs[b].n_members;
  }
  bd.n1 = n1;
  bd.bucket_of = g_new (int32_t, (size_t)(n1 - n0) + 1);
  bd.redir = g_new (SgNodeId, (size_t)n0 + 1);
  bd.rename = g_new (SgNodeId, (size_t)n0 + 1);
  for (SgNodeId i = 0; i < n0; i++)
    bd.redir[i] = bd.rename[i] = -1;
  g_autofree bool *keep = g_new (bool, (size_t)n1 + 1);
  g_autofree int64_t *key = g_new (int64_t, (size_t)n1 + 1);
  g_autofree int32_t *indeg = g_new (int32_t, (size_t)n1 + 1);
  memcpy (indeg, t->n_in, sizeof (int32_t) * (size_t)n0);
  for (SgNodeId i = 0; i < n0; i++) {
    key[i] = 4 * (int64_t)i + 2;
    keep[i] = !taken[i];
  }
  for (int32_t b = 0; b < n_specs; b++) {
    SgNodeId p = bd.p_id[b], c = p + 1, w = p + 2;
    for (int32_t i = 0; i < specs[b].n_members; i++) {
      SgNodeId wt = bd.waits[bd.first[b] + i];
      keep[wt] = false;
      bd.redir[wt] = p + 3 + i;
      bd.rename[specs[b].members[i]] = c;
      bd.rename[wt] = w;
    }
  }
  /* Extra data edges: a member's input -> its bucket's P (distinct per P,
   * in member order, as the loader keeps references). An input that is
   * another bucket's member's wait is that member's unpack (the rewrite's
   * rule for chained buckets). CSR by source over all ids. */
  g_autofree uint32_t *xfirst = g_new0 (uint32_t, (size_t)n1 + 2);
  g_autoptr (GArray) xpairs = g_array_new (FALSE, FALSE, sizeof (SgNodeId));
  for (int32_t b = 0; b < n_specs; b++) {
    const SgBucketPlan *pl = &bd.plans[b];
    SgNodeId p = bd.p_id[b], c = p + 1, w = p + 2;
    bd.p_inputs[b] = g_new (SgNodeId, (size_t)pl->n);
    for (int32_t i = 0; i < pl->n; i++) {
      SgNodeId src = bd.redir[pl->inputs[i]] >= 0 ? bd.redir[pl->inputs[i]] : pl->inputs[i];
      bool seen = false;
      for (uint32_t j = 0; j < bd.p_n_in[b] && !seen; j++)
        seen = bd.p_inputs[b][j] == src;
      if (!seen) {
        bd.p_inputs[b][bd.p_n_in[b]++] = src;
        xfirst[src + 1]++;
        SgNodeId pair[2] = { src, p };
        g_array_append_vals (xpairs, pair, 2);
      }
    }
    for (SgNodeId id = p; id < p + 3 + pl->n; id++) {
      bd.bucket_of[id - n0] = b;
      keep[id] = true;
      key[id] = 4 * (id <= c ? start_pos[b] : use_pos[b]) + (id == p || id == w ? 0 : 1);
      indeg[id] = 1;
    }
    indeg[p] = (int32_t)bd.p_n_in[b];
  }
  for (SgNodeId i = 0; i < n1; i++)
    xfirst[i + 1] += xfirst[i];
  g_autofree SgNodeId *xadj = g_new (SgNodeId, xpairs->len / 2 + 1);
  {
    g_autofree uint32_t *fill = g_memdup2 (xfirst, sizeof (uint32_t) * ((size_t)n1 + 1));
    for (guint i = 0; i < xpairs->len; i += 2)
      xadj[fill[g_array_index (xpairs, SgNodeId, i)]++] = g_array_index (xpairs, SgNodeId, i + 1);
  }
  /* Implicit edges, moved as move_implicit_edges does: ends that are
   * members or their waits become C or W; hiding edges of members drop. */
  g_autofree uint32_t *ifirst = g_new0 (uint32_t, (size_t)n1 + 2);
  g_autofree SgNodeId *ia = g_new (SgNodeId, (size_t)t->n_edges + 1);
  g_autofree SgNodeId *ib = g_new (SgNodeId, (size_t)t->n_edges + 1);
  int32_t m = 0;
  for (int32_t i = 0; i < t->n_edges; i++) {
    SgNodeId a = t->efrom[i], b = t->eto[i];
    SgNodeId ra = bd.rename[a], rb = bd.rename[b];
    if ((ra >= 0 || rb >= 0)
        && (t->ekind[i] == SG_EDGE_HIDE_START || t->ekind[i] == SG_EDGE_HIDE_WAIT))
      continue;
    a = ra >= 0 ? ra : a;
    b = rb >= 0 ? rb : b;
    if (a == b)
      continue;
    ia[m] = a, ib[m] = b, m++;
    ifirst[a + 1]++;
  }
  for (int32_t i = 0; i < n1; i++)
    ifirst[i + 1] += ifirst[i];
  g_autofree SgNodeId *iadj = g_new (SgNodeId, (size_t)m + 1);
  {
    g_autofree uint32_t *fill = g_memdup2 (ifirst, sizeof (uint32_t) * ((size_t)n1 + 1));
    for (int32_t i = 0; i < m; i++) {
      iadj[fill[ia[i]]++] = ib[i];
      indeg[ib[i]]++;
    }
  }

  /* sg_bucket_stable_order over the rewritten graph: among ready nodes
   * the smallest (key, id). Nodes are visited in that order (base ids are
   * already sorted, 4i + 2; new nodes are merged in); a cursor takes the
   * next ready one, and only nodes that become ready behind the cursor go
   * through a heap: the same sequence in O(n + late log late). */
  int32_t n_keep = 0;
  for (int32_t i = 0; i < n1; i++)
    n_keep += keep[i];
  g_autofree HeapItem *heap = g_new (HeapItem, (size_t)n1 + 1);
  g_autofree SgNodeId *order = g_new (SgNodeId, (size_t)n1 + 1);
  g_autofree SgNodeId *sorted = g_new (SgNodeId, (size_t)n1 + 1);
  g_autofree int32_t *pos = g_new (int32_t, (size_t)n1 + 1);
  int32_t hn = 0, w = 0;
  {
    int32_t nn = n1 - n0, j = 0, k = 0;
    for (SgNodeId id = n0; id < n1; id++)
      heap_push (heap, &hn, (HeapItem){ key[id], id });
    for (SgNodeId i = 0; i <= n0; i++) {
      while (j < nn && (i == n0 || heap[0].key < key[i])) {
        sorted[k++] = heap_pop (heap, &hn).id;
        j++;
      }
      if (i < n0)
        sorted[k++] = i;
    }
    for (int32_t q = 0; q < n1; q++)
      pos[sorted[q]] = q;
  }
  int32_t cur = 0;
  for (;;) {
    while (cur < n1 && !(keep[sorted[cur]] && indeg[sorted[cur]] == 0))
      cur++;
    SgNodeId v;
    if (hn > 0 && (cur == n1 || item_less (heap[0], (HeapItem){ key[sorted[cur]], sorted[cur] })))
      v = heap_pop (heap, &hn).id;
    else if (cur < n1)
      v = sorted[cur++];
    else
      break;
    order[w++] = v;
    Succ s = successors (&bd, g, v, xfirst, xadj);
    for (uint32_t j = 0; j < s.na; j++)
      release (s.a[j], indeg, keep, key, pos, cur, heap, &hn);
    for (uint32_t j = 0; j < s.nb; j++)
      release (s.b[j], indeg, keep, key, pos, cur, heap, &hn);
    for (SgNodeId u = s.lo; u < s.hi; u++)
      release (u, indeg, keep, key, pos, cur, heap, &hn);
    for (uint32_t j = ifirst[v]; j < ifirst[v + 1]; j++)
      release (iadj[j], indeg, keep, key, pos, cur, heap, &hn);
  }
  if (n_specs == 0) /* sg_bucket_apply leaves the graph as it is */
    for (w = 0; w < n0; w++)
      order[w] = w;
  if (w < n_keep) {
    for (int32_t i = 0; i < n1; i++)
      if (indeg[i] > 0 && keep[i]) {
        const char *name = i < n0 ? g->nodes[i].name
                                  : g->nodes[specs[bd.bucket_of[i - n0]].members[0]].name;
        g_set_error (error, SG_BUCKET_ERROR, SG_BUCKET_ERROR_CYCLE,
                     "bucket: node '%s'%s: the buckets close a cycle through it", name,
                     i < n0 ? "" : " (its bucket)");
        break;
      }
    build_clear (&bd);
    return NULL;
  }

  /* The selected graph: nodes in that order, pools borrowed from @g. */
  SgGraph *tg = sg_graph_new (g->world_size, g->rank);
  g_free (tg->source);
  tg->source = g_strdup (g->source);
  g_array_unref (tg->dims);
  tg->dims = g_array_ref (g->dims);
  g_array_unref (tg->tuple_metas);
  tg->tuple_metas = g_array_ref (g->tuple_metas);
  tg->groups = g->groups;
  tg->n_groups = g->n_groups;
  tg->cost_model = g->cost_model;
  tg->cost_model_free = g->cost_model_free;
  g_autofree SgNodeId *new_id = g_new (SgNodeId, (size_t)n1 + 1);
  for (int32_t i = 0; i < n1; i++)
    new_id[i] = SG_NO_NODE;
  for (int32_t i = 0; i < w; i++)
    new_id[order[i]] = i;
  if (t->spare && t->spare_cap >= w) {
    tg->nodes = t->spare;
    tg->nodes_cap = t->spare_cap;
    t->spare = NULL;
  } else {
    tg->nodes = g_new (SgNode, (size_t)MAX (w, 1));
    tg->nodes_cap = MAX (w, 1);
  }
  g_array_unref (tg->inputs);
  tg->inputs = g_array_sized_new (FALSE, FALSE, sizeof (SgNodeId),
                                  g->inputs->len + (guint)(n1 - n0) + (guint)total);
  for (int32_t i = 0; i < w; i++) {
    SgNodeId v = order[i];
    SgNode node;
    if (v < n0) {
      node = g->nodes[v];
      uint32_t k;
      const SgNodeId *in = sg_node_inputs (g, v, &k);
      node.in_first = tg->inputs->len;
      for (uint32_t j = 0; j < k; j++) {
        SgNodeId x = bd.redir[in[j]] >= 0 ? bd.redir[in[j]] : in[j];
        g_array_append_val (tg->inputs, new_id[x]);
      }
    } else {
      int32_t b = bd.bucket_of[v - n0];
      const SgBucketPlan *pl = &bd.plans[b];
      const SgNode *m0 = &g->nodes[specs[b].members[0]];
      int32_t r = v - bd.p_id[b];
      if (r == 0) {
        int64_t numel = (int64_t)pl->l.pack_numel;
        node = new_node ("bucket_pack", t->pack_target, t->pack_kind,
                         push_meta (tg->dims, &numel, 1, pl->dtype));
        node.in_first = tg->inputs->len;
        node.n_in = bd.p_n_in[b];
        for (uint32_t j = 0; j < bd.p_n_in[b]; j++)
          g_array_append_val (tg->inputs, new_id[bd.p_inputs[b][j]]);
      } else {
        int64_t numel = (int64_t)pl->l.out_numel;
        if (r == 1) {
          node = new_node ("bucket", m0->target, m0->kind,
                           push_meta (tg->dims, &numel, 1, pl->dtype));
          node.group = m0->group;
          node.group_size = m0->group_size;
          node.reduce = m0->reduce;
        } else if (r == 2) {
          node = new_node ("bucket_wait", t->wait_target, t->wait_kind,
                           push_meta (tg->dims, &numel, 1, pl->dtype));
        } else {
          const SgMeta *wm = &g->nodes[bd.waits[bd.first[b] + r - 3]].meta;
          int64_t shape[SG_MAX_DIMS];
          memcpy (shape, sg_meta_shape (g, wm), sizeof (int64_t) * (size_t)wm->ndim);
          node = new_node ("bucket_unpack", t->unpack_target, t->unpack_kind,
                           push_meta (tg->dims, shape, wm->ndim, pl->dtype));
        }
        node.in_first = tg->inputs->len;
        node.n_in = 1;
        SgNodeId src = r <= 2 ? v - 1 : bd.p_id[b] + 2;
        g_array_append_val (tg->inputs, new_id[src]);
      }
    }
    tg->nodes[i] = node;
  }
  tg->n_nodes = w;
  tg->output = g->output != SG_NO_NODE ? new_id[g->output] : SG_NO_NODE;
  build_clear (&bd);
  /* What cost_new_nodes in bucket.c costs: every node without a source,
   * i.e. the new nodes and the base graph's uncosted ones. */
  const SgCostModel *cm = sg_graph_cost_model (tg);
  int32_t n_cost = n1 - n0 + t->n_uncosted;
  g_autofree SgNodeId *to_cost = g_new (SgNodeId, (size_t)n_cost + 1);
  for (int32_t j = 0; j < n_cost; j++) /* SG_NO_NODE: an uncosted member or wait, gone */
    to_cost[j] = new_id[j < n1 - n0 ? n0 + j : t->uncosted[j - (n1 - n0)]];
  if (cm)
    sg_cost_new_nodes (cm, tg, to_cost, n_cost);
  return tg;
}

void
sg_bucket_trial_graph_free (SgBucketTrial *t, SgGraph *tg)
{
  if (!tg)
    return;
  g_array_set_size (t->g->dims, t->dims_len);
  if (!t->spare || t->spare_cap < tg->nodes_cap) {
    g_free (t->spare);
    t->spare = tg->nodes;
    t->spare_cap = tg->nodes_cap;
    tg->nodes = NULL;
  }
  tg->groups = NULL;
  tg->n_groups = 0;
  tg->cost_model = NULL; /* borrowed */
  sg_graph_free (tg);
}
