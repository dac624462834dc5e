/* aug.c: the augmented graph (data edges + implicit edges) and its
 * reachability queries; the implicit-edge side table of the graph.
 *
 * Reachability without per-node ancestor sets: the nodes carry a
 * topological position (initially the id order, which is topological for
 * data edges). A query A ->* B searches forward from A and backward from B
 * in turn, visiting only nodes whose position lies between theirs, with a
 * visited-stamp array (no clearing, no allocation per query); the searches
 * stop when they meet or when one side runs out (bidirectional search). An edge that goes against the current positions is accepted when
 * it closes no cycle and the positions of the affected region are
 * rearranged with Pearce and Kelly's dynamic topological sort ("A dynamic
 * topological sort algorithm for directed acyclic graphs", JEA 2006): only
 * nodes between the two endpoints' positions are touched.
 * Mirrors: Inductor's overlap scheduler adds the same kinds of "additional
 * deps" and checks them against its ancestor sets; XLA keeps a
 * HloReachabilityMap (bitsets). Requires: nothing. Invalidates: nothing.
 */
#include <string.h>

#include "schedule-private.h"

const char *
sg_edge_kind_name (SgEdgeKind k)
{
  switch (k) {
  case SG_EDGE_HIDE_START:
    return "hide_start";
  case SG_EDGE_HIDE_WAIT:
    return "hide_wait";
  case SG_EDGE_BUCKET:
    return "bucket";
  case SG_EDGE_OTHER:
    return "other";
  }
  return "other";
}

void
sg_implicit_edge_add (SgGraph *g, SgNodeId from, SgNodeId to, SgEdgeKind kind)
{
  g_return_if_fail (from >= 0 && from < g->n_nodes && to >= 0 && to < g->n_nodes);
  if (!g->implicit_edges)
    g->implicit_edges = g_array_new (FALSE, FALSE, sizeof (SgImplicitEdge));
  SgImplicitEdge e = { from, to, (int32_t)kind };
  g_array_append_val (g->implicit_edges, e);
}

void
sg_implicit_edges_clear (SgGraph *g, SgEdgeKind kind)
{
  if (!g->implicit_edges)
    return;
  guint w = 0;
  for (guint i = 0; i < g->implicit_edges->len; i++) {
    SgImplicitEdge e = g_array_index (g->implicit_edges, SgImplicitEdge, i);
    if (kind != 0 && e.kind != (int32_t)kind)
      g_array_index (g->implicit_edges, SgImplicitEdge, w++) = e;
  }
  g_array_set_size (g->implicit_edges, w);
}

/* --- the augmented graph ---------------------------------------------------- */

struct SgAug {
  const SgGraph *g;
  int32_t n;
  uint32_t *ufirst; /* data successors, CSR */
  SgNodeId *users;
  /* implicit edges: singly linked out- and in-lists in one pool */
  GArray *e_from, *e_to, *e_next_out, *e_next_in; /* int32_t each */
  int32_t *out_head, *in_head;
  int32_t *pos; /* node -> topological position */
  SgNodeId *at; /* position -> node */
  uint32_t *stamp;
  uint32_t cur;
  SgNodeId *stack, *back; /* search stacks (back: sg_aug_reaches' backward side) */
  GArray *fwd, *bwd; /* Pearce-Kelly scratch */
};

#define EIDX(arr, i) g_array_index ((arr), int32_t, (i))

/* Stamps below this: NO_STAMP marks nothing. */
#define NO_STAMP UINT32_MAX

/* A fresh stamp (no node carries it). */
static uint32_t
next_stamp (SgAug *a)
{
  if (a->cur >= NO_STAMP - 1) {
    memset (a->stamp, 0, sizeof (uint32_t) * (size_t)a->n);
    a->cur = 0;
  }
  return ++a->cur;
}

/* @w, a neighbour met by a search (stamp @mine): true when it is @goal or
 * the other search (stamp @other) visited it; else pushed on @stack when
 * new and lo < pos < hi. */
static inline bool
meet (SgAug *a, SgNodeId w, SgNodeId goal, uint32_t mine, uint32_t other, int32_t lo,
      int32_t hi, SgNodeId *stack, int32_t *sp)
{
  if (w == goal || a->stamp[w] == other)
    return true;
  if (a->stamp[w] != mine && a->pos[w] > lo && a->pos[w] < hi) {
    a->stamp[w] = mine;
    stack[(*sp)++] = w;
  }
  return false;
}

/* Visits the successors (@forward) or predecessors of @v, data edges then
 * implicit ones, through meet(); true as soon as one meets. */
static bool
expand (SgAug *a, SgNodeId v, bool forward, SgNodeId goal, uint32_t mine, uint32_t other,
        int32_t lo, int32_t hi, SgNodeId *stack, int32_t *sp)
{
  uint32_t k = 0;
  const SgNodeId *nb;
  if (forward) {
    nb = &a->users[a->ufirst[v]];
    k = a->ufirst[v + 1] - a->ufirst[v];
  } else {
    nb = sg_node_inputs (a->g, v, &k);
  }
  for (uint32_t j = 0; j < k; j++)
    if (meet (a, nb[j], goal, mine, other, lo, hi, stack, sp))
      return true;
  for (int32_t e = forward ? a->out_head[v] : a->in_head[v]; e >= 0;
       e = forward ? EIDX (a->e_next_out, e) : EIDX (a->e_next_in, e))
    if (meet (a, forward ? EIDX (a->e_to, e) : EIDX (a->e_from, e), goal, mine, other, lo, hi,
              stack, sp))
      return true;
  return false;
}

/* Depth-first search over successors (@forward) or predecessors, visiting
 * only nodes with lo < pos < hi (plus the start). Collects the visited
 * nodes in @acc when non-NULL; returns true when it reaches @target. */
static bool
search (SgAug *a, SgNodeId start, SgNodeId target, bool forward, int32_t lo, int32_t hi,
        GArray *acc)
{
  uint32_t s = next_stamp (a);
  int32_t sp = 0;
  a->stack[sp++] = start;
  a->stamp[start] = s;
  while (sp > 0) {
    SgNodeId v = a->stack[--sp];
    if (acc)
      g_array_append_val (acc, v);
    if (expand (a, v, forward, target, s, NO_STAMP, lo, hi, a->stack, &sp))
      return true;
  }
  return false;
}

bool
sg_aug_reaches (SgAug *a, SgNodeId from, SgNodeId to)
{
  g_return_val_if_fail (a && from >= 0 && from < a->n && to >= 0 && to < a->n, false);
  if (from == to)
    return true;
  if (a->pos[from] > a->pos[to])
    return false;
  /* Both ways at once, a node each in turn: they meet on a path if there
   * is one; either side running out first proves there is none (it saw
   * all it reaches without meeting the other). */
  uint32_t sf = next_stamp (a), sb = next_stamp (a);
  int32_t lo = a->pos[from], hi = a->pos[to], nf = 0, nb = 0;
  a->stack[nf++] = from;
  a->stamp[from] = sf;
  a->back[nb++] = to;
  a->stamp[to] = sb;
  while (nf > 0 && nb > 0) {
    if (expand (a, a->stack[--nf], true, to, sf, sb, lo, hi, a->stack, &nf))
      return true;
    if (nf > 0 && expand (a, a->back[--nb], false, from, sb, sf, lo, hi, a->back, &nb))
      return true;
  }
  return false;
}

static int
cmp_pos (gconstpointer x, gconstpointer y, gpointer ud)
{
  const int32_t *pos = ud;
  int32_t a = pos[*(const SgNodeId *)x], b = pos[*(const SgNodeId *)y];
  return (a > b) - (a < b);
}

static int
cmp_i32 (gconstpointer x, gconstpointer y)
{
  int32_t a = *(const int32_t *)x, b = *(const int32_t *)y;
  return (a > b) - (a < b);
}

/* Pearce-Kelly: @to's position is below @from's; move the nodes that must
 * follow @to (forward region) after those that must precede @from. */
static void
reorder (SgAug *a, SgNodeId from, SgNodeId to)
{
  int32_t lb = a->pos[to], ub = a->pos[from];
  g_array_set_size (a->fwd, 0);
  g_array_set_size (a->bwd, 0);
  search (a, to, SG_NO_NODE, true, lb, ub, a->fwd);
  search (a, from, SG_NO_NODE, false, lb, ub, a->bwd);
  g_array_sort_with_data (a->fwd, cmp_pos, a->pos);
  g_array_sort_with_data (a->bwd, cmp_pos, a->pos);
  guint nf = a->fwd->len, nb = a->bwd->len;
  g_autofree int32_t *slots = g_new (int32_t, nf + nb);
  for (guint i = 0; i < nb; i++)
    slots[i] = a->pos[g_array_index (a->bwd, SgNodeId, i)];
  for (guint i = 0; i < nf; i++)
    slots[nb + i] = a->pos[g_array_index (a->fwd, SgNodeId, i)];
  qsort (slots, nf + nb, sizeof (int32_t), (int (*) (const void *, const void *))cmp_i32);
  for (guint i = 0; i < nb; i++) {
    SgNodeId v = g_array_index (a->bwd, SgNodeId, i);
    a->pos[v] = slots[i];
    a->at[slots[i]] = v;
  }
  for (guint i = 0; i < nf; i++) {
    SgNodeId v = g_array_index (a->fwd, SgNodeId, i);
    a->pos[v] = slots[nb + i];
    a->at[slots[nb + i]] = v;
  }
}

static void
link_edge (SgAug *a, SgNodeId from, SgNodeId to)
{
  int32_t e = (int32_t)a->e_from->len;
  g_array_append_val (a->e_from, from);
  g_array_append_val (a->e_to, to);
  g_array_append_val (a->e_next_out, a->out_head[from]);
  g_array_append_val (a->e_next_in, a->in_head[to]);
  a->out_head[from] = e;
  a->in_head[to] = e;
}

bool
sg_aug_add_edge (SgAug *a, SgNodeId from, SgNodeId to, GError **error)
{
  g_return_val_if_fail (a && from >= 0 && from < a->n && to >= 0 && to < a->n, false);
  if (from == to || sg_aug_reaches (a, to, from)) {
    g_set_error (error, SG_SCHEDULE_ERROR, SG_SCHEDULE_ERROR_CYCLE,
                 "implicit edge '%s' -> '%s' would close a cycle ('%s' already reaches '%s')",
                 a->g->nodes[from].name, a->g->nodes[to].name, a->g->nodes[to].name,
                 a->g->nodes[from].name);
    return false;
  }
  if (a->pos[from] > a->pos[to])
    reorder (a, from, to);
  link_edge (a, from, to);
  return true;
}

SgAug *
sg_aug_new (const SgGraph *g)
{
  g_return_val_if_fail (g != NULL, NULL);
  SgAug *a = g_new0 (SgAug, 1);
  int32_t n = g->n_nodes;
  a->g = g;
  a->n = n;
  a->ufirst = g_new0 (uint32_t, (size_t)n + 1);
  for (SgNodeId i = 0; i < n; i++) {
    uint32_t k;
    const SgNodeId *in = sg_node_inputs (g, i, &k);
    for (uint32_t j = 0; j < k; j++)
      a->ufirst[in[j] + 1]++;
  }
  for (SgNodeId i = 0; i < n; i++)
    a->ufirst[i + 1] += a->ufirst[i];
  a->users = g_new (SgNodeId, (size_t)a->ufirst[n] + 1);
  g_autofree uint32_t *fill = g_memdup2 (a->ufirst, sizeof (uint32_t) * ((size_t)n + 1));
  for (SgNodeId i = 0; i < n; i++) {
    uint32_t k;
    const SgNodeId *in = sg_node_inputs (g, i, &k);
    for (uint32_t j = 0; j < k; j++)
      a->users[fill[in[j]]++] = i;
  }
  a->e_from = g_array_new (FALSE, FALSE, sizeof (int32_t));
  a->e_to = g_array_new (FALSE, FALSE, sizeof (int32_t));
  a->e_next_out = g_array_new (FALSE, FALSE, sizeof (int32_t));
  a->e_next_in = g_array_new (FALSE, FALSE, sizeof (int32_t));
  a->out_head = g_new (int32_t, (size_t)MAX (n, 1));
  a->in_head = g_new (int32_t, (size_t)MAX (n, 1));
  a->pos = g_new (int32_t, (size_t)MAX (n, 1));
  a->at = g_new (SgNodeId, (size_t)MAX (n, 1));
  for (SgNodeId i = 0; i < n; i++) {
    a->out_head[i] = a->in_head[i] = -1;
    a->pos[i] = a->at[i] = i;
  }
  a->stamp = g_new0 (uint32_t, (size_t)MAX (n, 1));
  a->stack = g_new (SgNodeId, (size_t)n + 1);
  a->back = g_new (SgNodeId, (size_t)n + 1);
  a->fwd = g_array_new (FALSE, FALSE, sizeof (SgNodeId));
  a->bwd = g_array_new (FALSE, FALSE, sizeof (SgNodeId));
  if (g->implicit_edges) {
    for (guint i = 0; i < g->implicit_edges->len; i++) {
      const SgImplicitEdge *e = &g_array_index (g->implicit_edges, SgImplicitEdge, i);
      SgNodeId f = e->from, t = e->to;
      if (f < 0 || f >= n || t < 0 || t >= n)
        continue;
      /* Edges consistent with the id order (the scheduler's) cost O(1). */
      if (f < t && a->pos[f] < a->pos[t])
        link_edge (a, f, t);
      else
        sg_aug_add_edge (a, f, t, NULL);
    }
  }
  return a;
}

void
sg_aug_free (SgAug *a)
{
  if (!a)
    return;
  g_free (a->ufirst);
  g_free (a->users);
  g_array_unref (a->e_from);
  g_array_unref (a->e_to);
  g_array_unref (a->e_next_out);
  g_array_unref (a->e_next_in);
  g_free (a->out_head);
  g_free (a->in_head);
  g_free (a->pos);
  g_free (a->at);
  g_free (a->stamp);
  g_free (a->stack);
  g_free (a->back);
  g_array_unref (a->fwd);
  g_array_unref (a->bwd);
  g_free (a);
}

const SgNodeId *
sg_aug_order (const SgAug *a)
{
  return a->at;
}

int32_t
sg_aug_n_implicit (const SgAug *a)
{
  return (int32_t)a->e_from->len;
}
