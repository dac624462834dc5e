/* rewrite-order.c: the layout of a rewritten graph (rewrite.c's commit and
 * trial graphs both come from here).
 *
 * Checks the edits (no kept node reads a removed one, the output stays),
 * redirects the uses of replaced nodes, moves implicit edges, and orders
 * the nodes: among nodes whose data inputs and implicit-edge sources are
 * placed, the smallest placement key goes first, ties on the id in the
 * rewrite (base nodes have keys 4 id + 2, added nodes 4 anchor + slot).
 * Base nodes come sorted by key already, so a cursor walks the merged key
 * order and only nodes that become ready behind it pass through a heap:
 * the same sequence as a plain heap in O(n + late log late). Untouched
 * base nodes are released through the base graph's users; only edited
 * edges (added nodes' inputs, redirected users) are built here.
 * Mirrors Kahn's algorithm with a priority queue (a stable topological
 * sort). Requires: @g's users fresh. Invalidates: nothing (appends the
 * re-indexed args of users whose inputs merged to g->args).
 */
#include "graph-private.h"

#include <string.h>

/* Min-heap of (key, id). */
typedef struct {
  int64_t key;
  SgNodeId id;
} Item;

static inline bool
item_less (Item a, Item b)
{
  return a.key < b.key || (a.key == b.key && a.id < b.id);
}

static void
heap_push (Item *h, int32_t *n, Item it)
{
  int32_t i = (*n)++;
  while (i > 0 && item_less (it, h[(i - 1) / 2])) {
    h[i] = h[(i - 1) / 2];
    i = (i - 1) / 2;
  }
  h[i] = it;
}

static Item
heap_pop (Item *h, int32_t *n)
{
  Item top = h[0], last = h[--(*n)];
  int32_t i = 0;
  for (;;) {
    int32_t c = 2 * i + 1;
    if (c >= *n)
      break;
    if (c + 1 < *n && item_less (h[c + 1], h[c]))
      c++;
    if (!item_less (h[c], last))
      break;
    h[i] = h[c];
    i = c;
  }
  h[i] = last;
  return top;
}

/* A CSR of extra edges by source over the rewrite's ids. */
typedef struct {
  uint32_t *first; /* n1 + 1 */
  SgNodeId *adj;
} Csr;

static void
csr_build (Csr *c, int32_t n1, const GArray *pairs)
{
  c->first = g_new0 (uint32_t, (size_t)n1 + 2);
  guint m = pairs->len / 2;
  c->adj = g_new (SgNodeId, m + 1);
  for (guint i = 0; i < m; i++)
    c->first[g_array_index (pairs, SgNodeId, 2 * i) + 1]++;
  for (int32_t i = 0; i < n1; i++)
    c->first[i + 1] += c->first[i];
  g_autofree uint32_t *fill = g_memdup2 (c->first, sizeof (uint32_t) * ((size_t)n1 + 1));
  for (guint i = 0; i < m; i++)
    c->adj[fill[g_array_index (pairs, SgNodeId, 2 * i)]++]
        = g_array_index (pairs, SgNodeId, 2 * i + 1);
}

static void
csr_clear (Csr *c)
{
  g_clear_pointer (&c->first, g_free);
  g_clear_pointer (&c->adj, g_free);
}

/* Working state of one layout. */
typedef struct {
  SgRewrite *rw;
  SgGraph *g;
  int32_t n0, n1;
  bool *keep;
  SgNodeId *redir;   /* per base node: its replacement, or SG_NO_NODE; NULL: none */
  bool *touched;     /* per base node: a user of a replaced node */
  uint32_t *t_first; /* touched: its inputs in @t_in */
  uint32_t *t_n;
  GArray *t_in;      /* SgNodeId */
  uint32_t *t_args, *t_kwargs; /* touched with merged inputs: re-indexed args */
  bool *t_reindexed;
} Ctx;

static const char *
name_of (const Ctx *x, SgNodeId id)
{
  return sg_rewrite_node (x->rw, id)->name;
}

/* @id's inputs in the result, before renumbering. */
static const SgNodeId *
new_inputs (const Ctx *x, SgNodeId id, uint32_t *n)
{
  if (id < x->n0 && x->touched && x->touched[id]) {
    *n = x->t_n[id];
    return &g_array_index (x->t_in, SgNodeId, x->t_first[id]);
  }
  if (id < x->n0)
    return sg_node_inputs (x->g, id, n);
  const SgNode *a = &g_array_index (x->rw->nodes, SgNode, id - x->n0);
  *n = a->n_in;
  return &g_array_index (x->rw->inputs, SgNodeId, a->in_first);
}

/* The replacement of @v after every redirect (chains followed). */
static SgNodeId
final_target (const Ctx *x, SgNodeId v)
{
  for (int32_t steps = 0; v < x->n0 && x->redir[v] != SG_NO_NODE && steps <= x->n0; steps++)
    v = x->redir[v];
  return v;
}

/* Copies args entry @a of node @u with input indices mapped by @map. */
static SgArg
reindex (SgGraph *g, const SgArg *src, const uint32_t *map)
{
  SgArg a = *src;
  if (a.type == SG_ARG_NODE) {
    a.input = map[a.input];
  } else if (a.type == SG_ARG_LIST || a.type == SG_ARG_DICT) {
    uint32_t len = a.type == SG_ARG_DICT ? 2 * a.n : a.n;
    a.first = g->args->len;
    g_array_set_size (g->args, a.first + len);
    for (uint32_t i = 0; i < len; i++) {
      SgArg item = reindex (g, &g_array_index (g->args, SgArg, src->first + i), map);
      g_array_index (g->args, SgArg, a.first + i) = item;
    }
  }
  return a;
}

/* Users of replaced nodes: their inputs redirected and kept distinct; the
 * args of one whose inputs merged are re-indexed. @stamp: n1 entries. */
static void
redirect_users (Ctx *x, int32_t *stamp, uint32_t *slot)
{
  SgGraph *g = x->g;
  for (SgNodeId old = 0; old < x->n0; old++) {
    if (x->redir[old] == SG_NO_NODE)
      continue;
    uint32_t nu;
    const SgNodeId *users = sg_node_users (g, old, &nu);
    for (uint32_t k = 0; k < nu; k++) {
      SgNodeId u = users[k];
      if (x->touched[u])
        continue;
      x->touched[u] = true;
      uint32_t n;
      const SgNodeId *in = sg_node_inputs (g, u, &n);
      x->t_first[u] = x->t_in->len;
      g_autofree uint32_t *map = g_new (uint32_t, (size_t)n + 1);
      for (uint32_t j = 0; j < n; j++) {
        SgNodeId v = final_target (x, in[j]);
        if (stamp[v] != u + 1) {
          stamp[v] = u + 1;
          slot[v] = x->t_in->len - x->t_first[u];
          g_array_append_val (x->t_in, v);
        }
        map[j] = slot[v];
      }
      x->t_n[u] = x->t_in->len - x->t_first[u];
      if (x->t_n[u] == n)
        continue;
      /* Two inputs became one: argument indices shift. */
      const SgNode *nu_ = &g->nodes[u];
      SgArg args = { .type = SG_ARG_LIST, .n = nu_->n_args, .first = nu_->args_first };
      SgArg kw = { .type = SG_ARG_DICT, .n = nu_->n_kwargs, .first = nu_->kwargs_first };
      x->t_args[u] = reindex (g, &args, map).first;
      x->t_kwargs[u] = reindex (g, &kw, map).first;
      x->t_reindexed[u] = true;
    }
  }
}

/* Kept nodes that read removed ones, and the removed output. */
static bool
check_removed (const Ctx *x, GError **error)
{
  SgGraph *g = x->g;
  if (g->output != SG_NO_NODE && !x->keep[g->output]) {
    g_set_error (error, SG_GRAPH_ERROR, SG_GRAPH_ERROR_REF,
                 "node '%s': the output node cannot be removed", g->nodes[g->output].name);
    return false;
  }
  const GArray *rm = x->rw->removed;
  for (guint i = 0; i < rm->len; i++) {
    SgNodeId r = g_array_index (rm, SgNodeId, i);
    uint32_t nu;
    const SgNodeId *users = r < x->n0 ? sg_node_users (g, r, &nu) : (nu = 0, NULL);
    for (uint32_t k = 0; k < nu; k++)
      if (x->keep[users[k]] && !(x->touched && x->touched[users[k]])) {
        g_set_error (error, SG_GRAPH_ERROR, SG_GRAPH_ERROR_REF,
                     "node '%s' reads '%s', which is being removed",
                     name_of (x, users[k]), name_of (x, r));
        return false;
      }
  }
  /* Redirected users and added nodes: their inputs in the result. */
  for (SgNodeId v = 0; v < x->n1; v++) {
    if (!x->keep[v] || (v < x->n0 && !(x->touched && x->touched[v])))
      continue;
    uint32_t n;
    const SgNodeId *in = new_inputs (x, v, &n);
    for (uint32_t j = 0; j < n; j++)
      if (!x->keep[in[j]]) {
        g_set_error (error, SG_GRAPH_ERROR, SG_GRAPH_ERROR_REF,
                     "node '%s' reads '%s', which is being removed", name_of (x, v),
                     name_of (x, in[j]));
        return false;
      }
  }
  return true;
}

/* Implicit edges after moves, as (from, to, kind) triples over the
 * rewrite's ids: moved ends renamed (or the edge dropped for its kind),
 * edges touching removed nodes and self-loops dropped. */
static GArray *
moved_edges (const Ctx *x)
{
  SgGraph *g = x->g;
  GArray *out = g_array_new (FALSE, FALSE, sizeof (SgImplicitEdge));
  if (!g->implicit_edges)
    return out;
  const GArray *mv = x->rw->moves;
  g_autofree SgNodeId *to = NULL;
  g_autofree uint32_t *drop = NULL;
  if (mv->len) {
    to = g_new (SgNodeId, (size_t)x->n0 + 1);
    drop = g_new0 (uint32_t, (size_t)x->n0 + 1);
    for (SgNodeId i = 0; i < x->n0; i++)
      to[i] = SG_NO_NODE;
    for (guint i = 0; i < mv->len; i++) {
      const SgRewriteMove *m = &g_array_index (mv, SgRewriteMove, i);
      to[m->old] = m->to;
      drop[m->old] = m->drop;
    }
  }
  for (guint i = 0; i < g->implicit_edges->len; i++) {
    SgImplicitEdge e = g_array_index (g->implicit_edges, SgImplicitEdge, i);
    uint32_t bit = e.kind >= 0 && e.kind < 32 ? 1u << e.kind : 0;
    if (to) {
      bool ma = to[e.from] != SG_NO_NODE, mb = to[e.to] != SG_NO_NODE;
      if ((ma && (drop[e.from] & bit)) || (mb && (drop[e.to] & bit)))
        continue;
      e.from = ma ? to[e.from] : e.from;
      e.to = mb ? to[e.to] : e.to;
    }
    if (x->keep[e.from] && x->keep[e.to] && e.from != e.to)
      g_array_append_val (out, e);
  }
  return out;
}

/* Placement keys: base nodes 4 id + 2; added nodes as placed, else just
 * after their latest input's anchor. */
static int64_t *
make_keys (const Ctx *x)
{
  int64_t *key = g_new (int64_t, (size_t)x->n1 + 1);
  for (SgNodeId i = 0; i < x->n0; i++)
    key[i] = 4 * (int64_t)i + 2;
  for (SgNodeId v = x->n0; v < x->n1; v++) {
    key[v] = g_array_index (x->rw->keys, int64_t, v - x->n0);
    if (key[v] >= 0)
      continue;
    uint32_t n;
    const SgNodeId *in = new_inputs (x, v, &n);
    int64_t anchor = -1;
    for (uint32_t j = 0; j < n; j++)
      anchor = MAX (anchor, key[in[j]] / 4);
    key[v] = anchor >= 0 ? 4 * anchor + SG_PLACE_AFTER : SG_PLACE_BEFORE;
  }
  return key;
}

/* The stable order; *n_order nodes into @order, or false on a cycle. */
static bool
stable_order (const Ctx *x, const int64_t *key, const GArray *edges, SgNodeId *order,
              int32_t *n_order, GError **error)
{
  SgGraph *g = x->g;
  int32_t n0 = x->n0, n1 = x->n1;
  bool ok = false;
  g_autofree int32_t *indeg = g_new0 (int32_t, (size_t)n1 + 1);
  g_autofree int32_t *pos = g_new (int32_t, (size_t)n1 + 1);
  g_autofree SgNodeId *sorted = g_new (SgNodeId, (size_t)n1 + 1);
  g_autofree Item *heap = g_new (Item, (size_t)n1 + 1);
  Csr extra = { 0 }, imp = { 0 };
  /* Edited data edges (into added and redirected nodes), implicit edges. */
  g_autoptr (GArray) pairs = g_array_new (FALSE, FALSE, sizeof (SgNodeId));
  int32_t n_keep = 0;
  for (SgNodeId v = 0; v < n1; v++) {
    if (!x->keep[v])
      continue;
    n_keep++;
    uint32_t n;
    const SgNodeId *in = new_inputs (x, v, &n);
    indeg[v] = (int32_t)n;
    if (v < n0 && !(x->touched && x->touched[v]))
      continue;
    for (uint32_t j = 0; j < n; j++) {
      SgNodeId pr[2] = { in[j], v };
      g_array_append_vals (pairs, pr, 2);
    }
  }
  csr_build (&extra, n1, pairs);
  g_array_set_size (pairs, 0);
  for (guint i = 0; i < edges->len; i++) {
    const SgImplicitEdge *e = &g_array_index (edges, SgImplicitEdge, i);
    SgNodeId pr[2] = { e->from, e->to };
    g_array_append_vals (pairs, pr, 2);
    indeg[e->to]++;
  }
  csr_build (&imp, n1, pairs);

  /* All nodes by (key, id): base nodes in id order, added ones merged in. */
  int32_t hn = 0, w = 0;
  for (SgNodeId v = n0; v < n1; v++)
    heap_push (heap, &hn, (Item){ key[v], v });
  for (SgNodeId i = 0, k = 0; i <= n0; i++) {
    while (hn > 0 && (i == n0 || heap[0].key < key[i]))
      sorted[k++] = heap_pop (heap, &hn).id;
    if (i < n0)
      sorted[k++] = i;
  }
  for (int32_t q = 0; q < n1; q++)
    pos[sorted[q]] = q;
  int32_t cur = 0;
#define RELEASE(u)                                                                                 \
  do {                                                                                             \
    SgNodeId u_ = (u);                                                                             \
    if (--indeg[u_] == 0 && x->keep[u_] && pos[u_] < cur)                                          \
      heap_push (heap, &hn, (Item){ key[u_], u_ });                                                \
  } while (0)
  for (;;) {
    while (cur < n1 && !(x->keep[sorted[cur]] && indeg[sorted[cur]] == 0))
      cur++;
    SgNodeId v;
    if (hn > 0 && (cur == n1 || item_less (heap[0], (Item){ key[sorted[cur]], sorted[cur] })))
      v = heap_pop (heap, &hn).id;
    else if (cur < n1)
      v = sorted[cur++];
    else
      break;
    order[w++] = v;
    if (v < n0) {
      uint32_t nu;
      const SgNodeId *users = sg_node_users (g, v, &nu);
      for (uint32_t j = 0; j < nu; j++)
        if (x->keep[users[j]] && !(x->touched && x->touched[users[j]]))
          RELEASE (users[j]);
    }
    for (uint32_t j = extra.first[v]; j < extra.first[v + 1]; j++)
      RELEASE (extra.adj[j]);
    for (uint32_t j = imp.first[v]; j < imp.first[v + 1]; j++)
      RELEASE (imp.adj[j]);
  }
#undef RELEASE
  if (w < n_keep) {
    for (SgNodeId v = 0; v < n1; v++)
      if (x->keep[v] && indeg[v] > 0) {
        g_set_error (error, SG_GRAPH_ERROR, SG_GRAPH_ERROR_CYCLE,
                     "node '%s': the edits close a cycle through it", name_of (x, v));
        break;
      }
    goto out;
  }
  *n_order = w;
  ok = true;
out:
  csr_clear (&extra);
  csr_clear (&imp);
  return ok;
}

static void
ctx_clear (Ctx *x)
{
  g_free (x->keep);
  g_free (x->redir);
  g_free (x->touched);
  g_free (x->t_first);
  g_free (x->t_n);
  g_free (x->t_args);
  g_free (x->t_kwargs);
  g_free (x->t_reindexed);
  if (x->t_in)
    g_array_unref (x->t_in);
}

bool
sg_rewrite_layout (SgRewrite *rw, SgRewriteLayout *out, GError **error)
{
  SgGraph *g = rw->g;
  Ctx x = { .rw = rw, .g = g, .n0 = rw->n0, .n1 = rw->n0 + (int32_t)rw->nodes->len };
  int32_t n0 = x.n0, n1 = x.n1;
  bool ok = false;
  g_autofree int64_t *key = NULL;
  g_autofree SgNodeId *order = NULL, *new_id = NULL;
  g_autoptr (GArray) edges = NULL;
  memset (out, 0, sizeof *out);
  sg_graph_fill_users (g);
  x.keep = g_new (bool, (size_t)n1 + 1);
  for (SgNodeId v = 0; v < n1; v++)
    x.keep[v] = true;
  for (guint i = 0; i < rw->removed->len; i++)
    x.keep[g_array_index (rw->removed, SgNodeId, i)] = false;
  if (rw->redirects->len) {
    x.redir = g_new (SgNodeId, (size_t)n0 + 1);
    for (SgNodeId v = 0; v < n0; v++)
      x.redir[v] = SG_NO_NODE;
    for (guint i = 0; i < rw->redirects->len; i += 2)
      x.redir[g_array_index (rw->redirects, SgNodeId, i)]
          = g_array_index (rw->redirects, SgNodeId, i + 1);
    x.touched = g_new0 (bool, (size_t)n0 + 1);
    x.t_first = g_new (uint32_t, (size_t)n0 + 1);
    x.t_n = g_new (uint32_t, (size_t)n0 + 1);
    x.t_args = g_new (uint32_t, (size_t)n0 + 1);
    x.t_kwargs = g_new (uint32_t, (size_t)n0 + 1);
    x.t_reindexed = g_new0 (bool, (size_t)n0 + 1);
    x.t_in = g_array_new (FALSE, FALSE, sizeof (SgNodeId));
    g_autofree int32_t *stamp = g_new0 (int32_t, (size_t)n1 + 1);
    g_autofree uint32_t *slot = g_new (uint32_t, (size_t)n1 + 1);
    redirect_users (&x, stamp, slot);
  }
  if (!check_removed (&x, error))
    goto done;
  edges = moved_edges (&x);
  key = make_keys (&x);
  order = g_new (SgNodeId, (size_t)n1 + 1);
  int32_t n;
  if (!stable_order (&x, key, edges, order, &n, error))
    goto done;

  /* The layout: nodes in order, inputs and edges renumbered. */
  new_id = g_new (SgNodeId, (size_t)n1 + 1);
  for (SgNodeId v = 0; v < n1; v++)
    new_id[v] = SG_NO_NODE;
  for (int32_t i = 0; i < n; i++)
    new_id[order[i]] = i;
  out->n = n;
  out->nodes = g_new (SgNode, (size_t)MAX (n, 1));
  out->inputs = g_array_sized_new (FALSE, FALSE, sizeof (SgNodeId),
                                   g->inputs->len + rw->inputs->len);
  for (int32_t i = 0; i < n; i++) {
    SgNodeId v = order[i];
    SgNode node = *sg_rewrite_node (rw, v);
    uint32_t k;
    const SgNodeId *in = new_inputs (&x, v, &k);
    node.in_first = out->inputs->len;
    node.n_in = k;
    for (uint32_t j = 0; j < k; j++)
      g_array_append_val (out->inputs, new_id[in[j]]);
    if (v < n0 && x.t_reindexed && x.t_reindexed[v]) {
      node.args_first = x.t_args[v];
      node.kwargs_first = x.t_kwargs[v];
    }
    out->nodes[i] = node;
  }
  if (g->implicit_edges) {
    for (guint i = 0; i < edges->len; i++) {
      SgImplicitEdge *e = &g_array_index (edges, SgImplicitEdge, i);
      e->from = new_id[e->from];
      e->to = new_id[e->to];
    }
    out->edges = g_steal_pointer (&edges);
  }
  out->output = g->output != SG_NO_NODE ? new_id[g->output] : SG_NO_NODE;
  out->old_id = g_steal_pointer (&order);
  ok = true;
done:
  ctx_clear (&x);
  return ok;
}

void
sg_rewrite_layout_clear (SgRewriteLayout *l)
{
  g_clear_pointer (&l->nodes, g_free);
  g_clear_pointer (&l->inputs, g_array_unref);
  g_clear_pointer (&l->edges, g_array_unref);
  g_clear_pointer (&l->old_id, g_free);
}
