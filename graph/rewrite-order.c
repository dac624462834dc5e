/* rewrite-order.c: the layout of a rewritten graph (rewrite.c's commit and
 * trial graphs both come from here).
 *
 * Checks the edits (no kept node reads a removed one, the output stays),
 * redirects the uses of replaced nodes, moves implicit edges, and orders
 * the nodes: among nodes whose data inputs and implicit-edge sources are
 * placed, the smallest placement key goes first, ties on the id in the
 * rewrite (base nodes have keys 4 id + 2, added nodes 4 anchor + slot,
 * the output the largest: it stays last).
 * Base nodes come sorted by key already, so a cursor walks the merged key
 * order and only nodes that become ready behind it pass through a heap:
 * the same sequence as a plain heap in O(n + late log late). Untouched
 * base nodes are released through the base graph's users; only edited
 * edges (added nodes' inputs, redirected users) are built here.
 * Mirrors Kahn's algorithm with a priority queue (a stable topological
 * sort); sg_graph_order_by_key is the same sort over a whole graph by keys
 * a pass gives (decompose/ carries a schedule over to a rewritten graph
 * with it). Working arrays are the rewrite's and reused by its next layout
 * (a pass's trials). Requires: @g's users fresh. Invalidates: nothing
 * (appends the re-indexed args of users whose inputs merged to g->args).
 */
#include "graph-private.h"

#include <stdlib.h>
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

void *
sg_rewrite_work (SgRewrite *rw, int slot, size_t bytes)
{
  g_assert (slot >= 0 && slot < SG_RW_N_WORK);
  if (rw->work_size[slot] < bytes) {
    g_free (rw->work[slot]);
    rw->work_size[slot] = MAX (bytes, rw->work_size[slot] + rw->work_size[slot] / 4);
    rw->work[slot] = g_malloc (rw->work_size[slot]);
  }
  return rw->work[slot];
}

#define WORK(rw, slot, type, n) ((type *)sg_rewrite_work ((rw), (slot), sizeof (type) * ((size_t)(n) + 1)))

/* Pairs (from, to) of a CSR, p[2 i] and p[2 i + 1]. */
typedef struct {
  SgNodeId *p;
  guint n;
} Pairs;

/* A CSR of extra edges by source over the rewrite's ids, from (from, to)
 * pairs, in the rewrite's slots @first_slot and @adj_slot. */
typedef struct {
  const uint32_t *first; /* n1 + 1 */
  const SgNodeId *adj;
} Csr;

static Csr
csr_build (SgRewrite *rw, int first_slot, int adj_slot, int32_t n1, const Pairs *pairs)
{
  uint32_t *first = WORK (rw, first_slot, uint32_t, n1 + 1);
  guint m = pairs->n;
  const SgNodeId *p = pairs->p;
  SgNodeId *adj = WORK (rw, adj_slot, SgNodeId, m);
  memset (first, 0, sizeof (uint32_t) * ((size_t)n1 + 2));
  for (guint i = 0; i < m; i++)
    first[p[2 * i] + 1]++;
  for (int32_t i = 0; i < n1; i++)
    first[i + 1] += first[i];
  uint32_t *fill = WORK (rw, SG_RW_FILL, uint32_t, n1);
  memcpy (fill, first, sizeof (uint32_t) * ((size_t)n1 + 1));
  for (guint i = 0; i < m; i++)
    adj[fill[p[2 * i]]++] = p[2 * i + 1];
  return (Csr){ first, adj };
}

/* A base node whose inputs a redirect changed. */
typedef struct {
  SgNodeId node;
  uint32_t first, n;           /* its inputs in t_in */
  uint32_t args_first, kwargs_first; /* re-indexed args when inputs merged */
  bool reindexed;
} Touched;

/* Working state of one layout. */
typedef struct {
  SgRewrite *rw;
  SgGraph *g;
  int32_t n0, n1;
  bool *keep;
  uint8_t *plain; /* per node: a kept base node that no redirect touched */
  int32_t *in_pos; /* per node: its place among the new inputs of the user
                    * being redirected, or -1 */
  SgNodeId *redir; /* per base node: its replacement, or SG_NO_NODE; NULL: none */
  int32_t *tix;    /* per node: its Touched, or -1 */
  const int64_t *akey; /* keys of added nodes */
  SgNodeId *eres;  /* per implicit edge of @g: its ends in the result, or
                    * both SG_NO_NODE where it is dropped */
  /* Added nodes of the last layout from @map_from on are this one's from
   * @map_from - @map_d on, the same nodes (match_added); @low: added nodes
   * before n0 + low are the same in both by id. */
  SgNodeId map_from;
  int32_t map_d, low;
} Ctx;

/* A node id of the last layout as this layout numbers it. */
static inline SgNodeId
remap (const Ctx *x, SgNodeId v)
{
  return v >= x->map_from ? v - x->map_d : v;
}

/* Whether the last layout's @a is this layout's @b: the same node, or a
 * node that is the same in both. */
static inline bool
same_node (const Ctx *x, SgNodeId a, SgNodeId b)
{
  return remap (x, a) == b && (a < x->n0 + x->low || a >= x->map_from);
}

static const char *
name_of (const Ctx *x, SgNodeId id)
{
  return sg_rewrite_node (x->rw, id)->name;
}

static inline const Touched *
touched_of (const Ctx *x, SgNodeId id)
{
  if (!x->tix || x->tix[id] < 0)
    return NULL;
  return &g_array_index (x->rw->touched, Touched, x->tix[id]);
}

/* The output's key is above every other: it stays last even where an
 * added node is placed after it (nothing reads the output). */
static inline int64_t
key_of (const Ctx *x, SgNodeId v)
{
  if (v == x->g->output)
    return INT64_MAX;
  return v < x->n0 ? 4 * (int64_t)v + 2 : x->akey[v - x->n0];
}

/* @id's inputs in the result, before renumbering. */
static inline const SgNodeId *
new_inputs (const Ctx *x, SgNodeId id, uint32_t *n)
{
  const Touched *t = touched_of (x, id);
  if (t) {
    *n = t->n;
    return &g_array_index (x->rw->t_in, SgNodeId, t->first);
  }
  if (id < x->n0) {
    *n = x->g->nodes[id].n_in;
    return &g_array_index (x->g->inputs, SgNodeId, x->g->nodes[id].in_first);
  }
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

/* Copies args entry @src with input indices mapped by @map. */
static SgArg
reindex (SgGraph *g, const SgArg *src, const uint32_t *map)
{
  SgArg a = *src; /* @src may move: the pool grows below */
  if (a.type == SG_ARG_NODE) {
    a.input = map[a.input];
  } else if (a.type == SG_ARG_LIST || a.type == SG_ARG_DICT) {
    uint32_t len = a.type == SG_ARG_DICT ? 2 * a.n : a.n, from = a.first;
    a.first = g->args->len;
    g_array_set_size (g->args, a.first + len);
    for (uint32_t i = 0; i < len; i++) {
      SgArg item = g_array_index (g->args, SgArg, from + i);
      item = reindex (g, &item, map);
      g_array_index (g->args, SgArg, a.first + i) = item;
    }
  }
  return a;
}

/* One user @u of replaced nodes: its inputs redirected and kept distinct
 * (an added node's only where they are removed); its args re-indexed when
 * two inputs became one. */
static void
redirect_user (Ctx *x, SgNodeId u, uint32_t **map, uint32_t *map_len)
{
  SgGraph *g = x->g;
  GArray *t_in = x->rw->t_in;
  uint32_t n;
  const SgNodeId *in = new_inputs (x, u, &n); /* not touched yet: its own */
  Touched t = { u, t_in->len, 0, 0, 0, false };
  if (n > *map_len) {
    *map_len = MAX (n, 2 * *map_len);
    *map = g_renew (uint32_t, *map, *map_len);
  }
  for (uint32_t j = 0; j < n; j++) {
    SgNodeId v = u < x->n0 || !x->keep[in[j]] ? final_target (x, in[j]) : in[j];
    int32_t at = x->in_pos[v]; /* where @v already is among the new inputs */
    if (at < 0) {
      at = (int32_t)(t_in->len - t.first);
      x->in_pos[v] = at;
      g_array_append_val (t_in, v);
    }
    (*map)[j] = (uint32_t)at;
  }
  t.n = t_in->len - t.first;
  for (uint32_t j = 0; j < t.n; j++) /* clean for the next user */
    x->in_pos[g_array_index (t_in, SgNodeId, t.first + j)] = -1;
  if (t.n < n) {
    const SgNode *un = sg_rewrite_node (x->rw, u);
    SgArg args = { .type = SG_ARG_LIST, .n = un->n_args, .first = un->args_first };
    SgArg kw = { .type = SG_ARG_DICT, .n = un->n_kwargs, .first = un->kwargs_first };
    t.args_first = reindex (g, &args, *map).first;
    t.kwargs_first = reindex (g, &kw, *map).first;
    t.reindexed = true;
  }
  x->tix[u] = (int32_t)x->rw->touched->len;
  g_array_append_val (x->rw->touched, t);
}

static void
redirect_users (Ctx *x)
{
  g_autofree uint32_t *map = NULL;
  uint32_t map_len = 0;
  for (SgNodeId old = 0; old < x->n0; old++) {
    if (x->redir[old] == SG_NO_NODE)
      continue;
    uint32_t nu;
    const SgNodeId *users = sg_node_users (x->g, old, &nu);
    for (uint32_t k = 0; k < nu; k++)
      if (x->tix[users[k]] < 0)
        redirect_user (x, users[k], &map, &map_len);
  }
  /* Added nodes that read a replaced node being removed (nothing may read
   * it) read its replacement: e.g. a bucket's pack of another bucket's
   * member waits. */
  for (SgNodeId v = x->n0; v < x->n1; v++) {
    uint32_t n;
    const SgNodeId *in = new_inputs (x, v, &n);
    for (uint32_t j = 0; j < n; j++)
      if (in[j] < x->n0 && x->redir[in[j]] != SG_NO_NODE && !x->keep[in[j]]) {
        redirect_user (x, v, &map, &map_len);
        break;
      }
  }
}

/* The first of @v's new inputs that is removed, or -1. */
static int32_t
reads_removed (const Ctx *x, SgNodeId v)
{
  uint32_t n;
  const SgNodeId *in = new_inputs (x, v, &n);
  for (uint32_t j = 0; j < n; j++)
    if (!x->keep[in[j]])
      return (int32_t)j;
  return -1;
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
      if (x->keep[users[k]] && !touched_of (x, users[k])) {
        g_set_error (error, SG_GRAPH_ERROR, SG_GRAPH_ERROR_REF,
                     "node '%s' reads '%s', which is being removed", name_of (x, users[k]),
                     name_of (x, r));
        return false;
      }
  }
  /* Redirected users and added nodes: their inputs in the result (the
   * first such node in id order that reads a removed one is named) */
  SgNodeId bad = SG_NO_NODE;
  const GArray *tl = x->rw->touched;
  for (guint i = 0; i < tl->len; i++) {
    SgNodeId v = g_array_index (tl, Touched, i).node;
    if (v < x->n0 && x->keep[v] && (bad == SG_NO_NODE || v < bad) && reads_removed (x, v) >= 0)
      bad = v;
  }
  for (SgNodeId v = x->n0; v < x->n1 && bad == SG_NO_NODE; v++)
    if (x->keep[v] && reads_removed (x, v) >= 0)
      bad = v;
  if (bad != SG_NO_NODE) {
    uint32_t n;
    const SgNodeId *in = new_inputs (x, bad, &n);
    g_set_error (error, SG_GRAPH_ERROR, SG_GRAPH_ERROR_REF,
                 "node '%s' reads '%s', which is being removed", name_of (x, bad),
                 name_of (x, in[reads_removed (x, bad)]));
    return false;
  }
  return true;
}

/* Implicit edges after moves, over the rewrite's ids: moved ends renamed
 * (or the edge dropped for its kind), edges touching removed nodes and
 * self-loops dropped. */
static GArray *
moved_edges (Ctx *x)
{
  SgGraph *g = x->g;
  guint ne = g->implicit_edges ? g->implicit_edges->len : 0;
  GArray *out = g_array_sized_new (FALSE, FALSE, sizeof (SgImplicitEdge), ne);
  g_array_set_size (out, ne);
  SgImplicitEdge *dst = (SgImplicitEdge *)(void *)out->data;
  guint w = 0;
  const GArray *mv = x->rw->moves;
  int32_t *moved = NULL; /* per base node: its move, or -1 */
  if (mv->len) {
    moved = WORK (x->rw, SG_RW_MOVED, int32_t, x->n0);
    memset (moved, -1, sizeof (int32_t) * (size_t)x->n0);
    for (guint i = 0; i < mv->len; i++)
      moved[g_array_index (mv, SgRewriteMove, i).old] = (int32_t)i;
  }
  for (guint i = 0; i < ne; i++) {
    SgImplicitEdge e = g_array_index (g->implicit_edges, SgImplicitEdge, i);
    uint32_t bit = e.kind >= 0 && e.kind < 32 ? 1u << e.kind : 0;
    x->eres[2 * i] = x->eres[2 * i + 1] = SG_NO_NODE;
    if (moved) {
      const SgRewriteMove *a
          = moved[e.from] >= 0 ? &g_array_index (mv, SgRewriteMove, moved[e.from]) : NULL;
      const SgRewriteMove *b
          = moved[e.to] >= 0 ? &g_array_index (mv, SgRewriteMove, moved[e.to]) : NULL;
      if ((a && (a->drop & bit)) || (b && (b->drop & bit)))
        continue;
      e.from = a ? a->to : e.from;
      e.to = b ? b->to : e.to;
    }
    if (x->keep[e.from] && x->keep[e.to] && e.from != e.to) {
      dst[w++] = e;
      x->eres[2 * i] = e.from;
      x->eres[2 * i + 1] = e.to;
    }
  }
  g_array_set_size (out, w);
  return out;
}

/* Keys of added nodes: as placed, else just after their latest input's
 * anchor (base nodes have 4 id + 2, key_of). */
static void
added_keys (Ctx *x, int64_t *akey)
{
  x->akey = akey;
  for (SgNodeId v = x->n0; v < x->n1; v++) {
    int64_t k = g_array_index (x->rw->keys, int64_t, v - x->n0);
    if (k < 0) {
      uint32_t n;
      const SgNodeId *in = new_inputs (x, v, &n);
      int64_t anchor = -1;
      for (uint32_t j = 0; j < n; j++)
        anchor = MAX (anchor, key_of (x, in[j]) / 4);
      k = anchor >= 0 ? 4 * anchor + SG_PLACE_AFTER : SG_PLACE_BEFORE;
    }
    akey[v - x->n0] = k;
  }
}

static inline Item
item_of (const Ctx *x, SgNodeId v)
{
  return (Item){ key_of (x, v), v };
}

/* A part of the order a layout computes: the nodes whose keys are between
 * @lo and @hi (exclusive; a missing bound is open), in place of the last
 * layout's order from @p to @s. The whole order: one window, no bounds. */
typedef struct {
  bool has_lo, has_hi;
  int64_t lo, hi;
  int32_t p, s;
  int32_t n; /* its nodes in this layout */
} Window;

typedef struct {
  Window *w;
  int32_t n;
  bool reuse; /* the last order outside the windows is kept */
  int32_t *wix; /* per node: its window while one is ordered, else -1 */
} Windows;

/* Keys from @lo to @hi (inclusive) that a window must hold. */
typedef struct {
  int64_t lo, hi;
} Span;

/* The window that holds key @k, or -1. */
static inline int32_t
window_of (const Windows *ws, int64_t k)
{
  int32_t a = 0, b = ws->n;
  while (a < b) {
    int32_t m = a + (b - a) / 2;
    const Window *w = &ws->w[m];
    if (w->has_lo && k <= w->lo)
      b = m;
    else if (w->has_hi && k >= w->hi)
      a = m + 1;
    else
      return m;
  }
  return -1;
}

/* The first base node in [0, n0] whose key 4 v + 2 is not below @k
 * (@strict: above it). */
static SgNodeId
base_from (int32_t n0, int64_t k, bool strict)
{
  SgNodeId a = 0, b = n0;
  while (a < b) {
    SgNodeId m = a + (b - a) / 2;
    int64_t km = 4 * (int64_t)m + 2;
    if (strict ? km > k : km >= k)
      b = m;
    else
      a = m + 1;
  }
  return a;
}

/* The windows' nodes by (key, id) into @sorted, window after window (each
 * w->n): base nodes in id order, added ones merged in (with windows, the
 * output is the last base node, find_windows); their places into @pos. */
static int32_t
window_nodes (const Ctx *x, Windows *ws, SgNodeId *sorted, int32_t *pos, Item *heap)
{
  int32_t n0 = x->n0, hn = 0, ns = 0;
  for (SgNodeId v = n0; v < x->n1; v++)
    if (x->keep[v] && (!ws->reuse || window_of (ws, key_of (x, v)) >= 0))
      heap_push (heap, &hn, item_of (x, v));
  for (int32_t k = 0; k < ws->n; k++) {
    Window *w = &ws->w[k];
    SgNodeId blo = w->has_lo ? base_from (n0, w->lo, true) : 0;
    SgNodeId bhi = w->has_hi ? base_from (n0, w->hi, false) : n0;
    int32_t first = ns;
    for (SgNodeId i = blo; i <= bhi; i++) {
      while (hn > 0 && (i < bhi ? heap[0].key < key_of (x, i)
                                : !w->has_hi || heap[0].key < w->hi))
        sorted[ns++] = heap_pop (heap, &hn).id;
      if (i < bhi && x->keep[i] && (i != x->g->output || window_of (ws, key_of (x, i)) == k))
        sorted[ns++] = i;
    }
    w->n = ns - first;
    for (int32_t q = first; q < ns; q++) {
      pos[sorted[q]] = q;
      ws->wix[sorted[q]] = k;
    }
  }
  return ns;
}

/* Whether @u (a predecessor of @v, in window @kv) holds @v back within the
 * windows: 1 (it is in a window), 0 (it is placed before them), -1 (it is
 * after @v's window: the windows do not hold). */
static inline int
pred_in (const Windows *ws, const Ctx *x, SgNodeId u, Item iv, int32_t kv)
{
  int32_t ku = ws->wix[u];
  return ku < 0 ? (item_less (iv, item_of (x, u)) ? -1 : 0) : ku > kv ? -1 : 1;
}

/* @v (item @iv) reads @u, after its window: the span a window must hold. */
static void
bad_pred (const Ctx *x, GArray *bad, Item iv, SgNodeId u)
{
  Span sp = { iv.key, key_of (x, u) };
  Span *last = bad && bad->len ? &g_array_index (bad, Span, bad->len - 1) : NULL;
  if (last && last->lo == sp.lo) {
    last->hi = MAX (last->hi, sp.hi);
  } else if (bad) {
    g_array_append_val (bad, sp);
  }
}

static int order_windows (const Ctx *x, Windows *ws, const GArray *edges, SgNodeId *order,
                          int32_t *n_order, int32_t *ns, GArray *bad, GError **error);

/* The stable order of the windows' nodes into @order (*n_order of them),
 * window after window: 1, or 0 on a cycle, or -1 when the windows do not
 * hold: nodes of windows read nodes after them (the spans from each to
 * the last it reads appended to @bad, when not NULL) or the windows'
 * nodes do not all come out. Nodes outside the windows count as placed. */
static int
stable_order (const Ctx *x, Windows *ws, const GArray *edges, SgNodeId *order,
              int32_t *n_order, GArray *bad, GError **error)
{
  SgRewrite *rw = x->rw;
  if (rw->wix_cap < (size_t)x->n1) {
    size_t cap = MAX ((size_t)x->n1, rw->wix_cap + rw->wix_cap / 4);
    rw->wix = g_renew (int32_t, rw->wix, cap);
    memset (rw->wix + rw->wix_cap, 0xff, sizeof (int32_t) * (cap - rw->wix_cap));
    rw->wix_cap = cap;
  }
  ws->wix = rw->wix;
  int32_t ns = 0;
  int r = order_windows (x, ws, edges, order, n_order, &ns, bad, error);
  const SgNodeId *sorted = rw->work[SG_RW_SORTED];
  for (int32_t q = 0; q < ns; q++)
    ws->wix[sorted[q]] = -1;
  return r;
}

static int
order_windows (const Ctx *x, Windows *ws, const GArray *edges, SgNodeId *order,
               int32_t *n_order, int32_t *ns_out, GArray *bad, GError **error)
{
  SgRewrite *rw = x->rw;
  SgGraph *g = x->g;
  int32_t n0 = x->n0, n1 = x->n1;
  int32_t *indeg = WORK (rw, SG_RW_INDEG, int32_t, n1);
  int32_t *pos = WORK (rw, SG_RW_POS, int32_t, n1);
  SgNodeId *sorted = WORK (rw, SG_RW_SORTED, SgNodeId, n1);
  Item *heap = WORK (rw, SG_RW_HEAP, Item, n1);
  int32_t ns = window_nodes (x, ws, sorted, pos, heap), hn = 0;
  *ns_out = ns;
  /* In-degrees within the windows: untouched base nodes from their own
   * inputs, edited nodes from their new inputs, which are also the edited
   * data edges; and the implicit edges, which go with the edited edges
   * into one CSR by source (its place in @sorted). */
  size_t m = edges->len;
  bool fail = false;
  for (int32_t q = 0, k = 0, end = ws->n ? ws->w[0].n : 0; q < ns; q++) {
    while (q == end)
      end += ws->w[++k].n;
    SgNodeId v = sorted[q];
    uint32_t n;
    const SgNodeId *in = x->plain[v] ? sg_node_inputs (g, v, &n) : new_inputs (x, v, &n);
    if (!x->plain[v])
      m += n;
    int32_t d = 0;
    for (uint32_t j = 0; j < n; j++) {
      int r = pred_in (ws, x, in[j], item_of (x, v), k);
      if (r < 0) {
        bad_pred (x, bad, item_of (x, v), in[j]);
        fail = true;
      }
      d += r;
    }
    indeg[v] = d;
  }
  SgNodeId *pp = WORK (rw, SG_RW_PAIRS, SgNodeId, 2 * m);
  Pairs pairs = { pp, 0 };
  for (int32_t q = 0; q < ns; q++) {
    SgNodeId v = sorted[q];
    if (x->plain[v])
      continue;
    uint32_t n;
    const SgNodeId *in = new_inputs (x, v, &n);
    for (uint32_t j = 0; j < n; j++)
      if (ws->wix[in[j]] >= 0) {
        pp[2 * pairs.n] = pos[in[j]];
        pp[2 * pairs.n++ + 1] = v;
      }
  }
  for (guint i = 0; i < edges->len; i++) {
    const SgImplicitEdge *e = &g_array_index (edges, SgImplicitEdge, i);
    Item to = item_of (x, e->to);
    int32_t kt = ws->wix[e->to];
    if (kt < 0)
      continue;
    int r = pred_in (ws, x, e->from, to, kt);
    if (r < 0) {
      bad_pred (x, bad, to, e->from);
      fail = true;
    }
    if (r <= 0)
      continue;
    pp[2 * pairs.n] = pos[e->from];
    pp[2 * pairs.n++ + 1] = e->to;
    indeg[e->to]++;
  }
  if (fail)
    return -1;
  Csr extra = csr_build (rw, SG_RW_XFIRST, SG_RW_XADJ, ns, &pairs);

  int32_t cur = 0, w = 0;
#define RELEASE(u)                                                                                 \
  do {                                                                                             \
    SgNodeId u_ = (u);                                                                             \
    if (--indeg[u_] == 0 && pos[u_] < cur)                                                         \
      heap_push (heap, &hn, item_of (x, u_));                                                      \
  } while (0)
  for (;;) {
    while (cur < ns && indeg[sorted[cur]] != 0)
      cur++;
    SgNodeId v;
    if (hn > 0 && (cur == ns || item_less (heap[0], item_of (x, sorted[cur]))))
      v = heap_pop (heap, &hn).id;
    else if (cur < ns)
      v = sorted[cur++];
    else
      break;
    order[w++] = v;
    if (v < n0) {
      uint32_t nu;
      const SgNodeId *users = sg_node_users (g, v, &nu);
      for (uint32_t j = 0; j < nu; j++)
        if (x->plain[users[j]] && ws->wix[users[j]] >= 0)
          RELEASE (users[j]);
    }
    for (uint32_t j = extra.first[pos[v]]; j < extra.first[pos[v] + 1]; j++)
      RELEASE (extra.adj[j]);
  }
#undef RELEASE
  if (w < ns) {
    if (ws->reuse)
      return -1;
    for (SgNodeId v = 0; v < n1; v++)
      if (x->keep[v] && indeg[v] > 0) {
        g_set_error (error, SG_GRAPH_ERROR, SG_GRAPH_ERROR_CYCLE,
                     "node '%s': the edits close a cycle through it", name_of (x, v));
        break;
      }
    return 0;
  }
  *n_order = w;
  return 1;
}

/* The item node @v had in the last layout (its added nodes' keys @lakey). */
static inline Item
last_item (const Ctx *x, const int64_t *lakey, SgNodeId v)
{
  if (v == x->g->output)
    return (Item){ INT64_MAX, v };
  return (Item){ v < x->n0 ? 4 * (int64_t)v + 2 : lakey[v - x->n0], v };
}

static bool
same_list (const Ctx *x, const SgNodeId *a, uint32_t na, const SgNodeId *b, uint32_t nb)
{
  if (na != nb)
    return false;
  for (uint32_t k = 0; k < na; k++)
    if (!same_node (x, a[k], b[k]))
      return false;
  return true;
}

/* Touched @b of the last layout has the new inputs of touched @a. */
static bool
same_inputs (const Ctx *x, const Touched *a, const Touched *b)
{
  const SgNodeId *ia = &g_array_index (x->rw->t_in, SgNodeId, a->first);
  const SgNodeId *ib = &g_array_index (x->rw->last_t_in, SgNodeId, b->first);
  return same_list (x, ib, b->n, ia, a->n);
}

/* Added node @j1 of the last layout is added node @j2 of this one: kept
 * alike, the same key, inputs and new inputs. */
static bool
same_added (const Ctx *x, int32_t j1, int32_t j2)
{
  SgRewrite *rw = x->rw;
  int32_t n0 = x->n0;
  const int64_t *lakey = rw->work[SG_RW_LAST_AKEY];
  const bool *lkeep = rw->work[SG_RW_LAST_KEEP];
  const int32_t *ltix = rw->work[SG_RW_LAST_TIX];
  const uint32_t *lat = rw->work[SG_RW_LAST_AIN_AT];
  if (lakey[j1] != x->akey[j2] || lkeep[n0 + j1] != x->keep[n0 + j2]
      || (ltix[n0 + j1] < 0) != (x->tix[n0 + j2] < 0))
    return false;
  const SgNode *a = &g_array_index (rw->nodes, SgNode, j2);
  if (!same_list (x, &g_array_index (rw->last_ain, SgNodeId, lat[2 * j1]), lat[2 * j1 + 1],
                  &g_array_index (rw->inputs, SgNodeId, a->in_first), a->n_in))
    return false;
  return ltix[n0 + j1] < 0
         || same_inputs (x, &g_array_index (rw->touched, Touched, x->tix[n0 + j2]),
                         &g_array_index (rw->last_touched, Touched, ltix[n0 + j1]));
}

/* The added nodes the two layouts end with alike (a pass that describes
 * again what follows a change adds the same nodes under other ids): the
 * longest such run whose inputs are outside the nodes added since the
 * last layout or inside the run, into x->map_from and x->map_d. */
static void
match_added (Ctx *x)
{
  int32_t n0 = x->n0, added = x->n1 - n0, last_added = x->rw->last_added;
  int32_t run = MIN (added, last_added) - x->low;
  for (int tries = 0; run > 0; tries++) {
    x->map_from = n0 + last_added - run;
    x->map_d = last_added - added;
    int32_t bad = -1;
    for (int32_t j2 = added - run; j2 < added && tries < 8; j2++)
      if (!same_added (x, j2 + x->map_d, j2))
        bad = j2;
    if (tries == 8)
      run = 0;
    else if (bad < 0)
      return;
    else
      run = added - bad - 1;
  }
  x->map_from = G_MAXINT32;
  x->map_d = 0;
}

/* Node @v changed: its keys in the last layout and in this one (every
 * node of such a key: ids of the two layouts differ, keys do not). */
static inline void
changed (const Ctx *x, GArray *out, const int64_t *lakey, SgNodeId v, bool before, bool now)
{
  Span sp[2];
  guint n = 0;
  if (before) {
    int64_t k = last_item (x, lakey, v).key;
    sp[n++] = (Span){ k, k };
  }
  if (now) {
    int64_t k = key_of (x, v);
    sp[n++] = (Span){ k, k };
  }
  g_array_append_vals (out, sp, n);
}

/* The items, in this layout and the last, of every node whose place in the
 * order may differ: what the order is a function of (the nodes kept, their
 * keys, their inputs and the implicit edges) changed for it. Nodes added
 * since the last layout (from rw->low_nodes on) are new; the rest are
 * compared with what the last layout kept. */
static void
changed_items (const Ctx *x, GArray *out)
{
  SgRewrite *rw = x->rw;
  int32_t n0 = x->n0, added = x->n1 - n0, last_added = rw->last_added;
  const int64_t *lakey = rw->work[SG_RW_LAST_AKEY];
  const bool *lkeep = rw->work[SG_RW_LAST_KEEP];
  const int32_t *ltix = rw->work[SG_RW_LAST_TIX];
  const SgNodeId *leres = rw->work[SG_RW_LAST_ERES];
  bool mapped = x->map_from != G_MAXINT32;
  int32_t low = x->low, s1 = mapped ? x->map_from - n0 : last_added;
  int32_t s2 = mapped ? s1 - x->map_d : added;
  for (int32_t j = low; j < MAX (s1, s2); j++)
    changed (x, out, lakey, n0 + j, j < s1, j < s2);
  /* the nodes both layouts have: kept, placed, touched alike? */
  int32_t nk = n0 + low;
  for (SgNodeId v = 0; v < nk; v++) {
    if (v + 8 <= nk && memcmp (&lkeep[v], &x->keep[v], 8) == 0) {
      v += 7;
      continue;
    }
    if (lkeep[v] != x->keep[v])
      changed (x, out, lakey, v, true, true);
  }
  for (int32_t j = 0; j < low; j++)
    if (lakey[j] != x->akey[j])
      changed (x, out, lakey, n0 + j, true, true);
  for (guint i = 0; i < rw->touched->len; i++) {
    const Touched *t = &g_array_index (rw->touched, Touched, i);
    if (t->node < nk
        && (ltix[t->node] < 0
            || !same_inputs (x, t, &g_array_index (rw->last_touched, Touched, ltix[t->node]))))
      changed (x, out, lakey, t->node, true, true);
  }
  for (guint i = 0; i < rw->last_touched->len; i++) {
    SgNodeId v = g_array_index (rw->last_touched, Touched, i).node;
    if (v < nk && x->tix[v] < 0)
      changed (x, out, lakey, v, true, true);
  }
  /* implicit edges whose ends changed: their ends, before and now */
  for (guint i = 0; i < 2 * rw->last_edges; i += 2) {
    if ((leres[i] == SG_NO_NODE ? x->eres[i] == SG_NO_NODE : same_node (x, leres[i], x->eres[i]))
        && (leres[i + 1] == SG_NO_NODE ? x->eres[i + 1] == SG_NO_NODE
                                       : same_node (x, leres[i + 1], x->eres[i + 1])))
      continue;
    for (guint k = i; k < i + 2; k++) {
      if (leres[k] != SG_NO_NODE)
        changed (x, out, lakey, leres[k], true, false);
      if (x->eres[k] != SG_NO_NODE)
        changed (x, out, lakey, x->eres[k], false, true);
    }
  }
}

/* Sorts @n spans by their first item (a merge sort through @tmp). */
static void
sort_spans (Span *a, Span *tmp, guint n)
{
  for (guint w = 1; w < n; w *= 2) {
    for (guint i = 0; i < n; i += 2 * w) {
      guint m = MIN (i + w, n), e = MIN (i + 2 * w, n), p = i, q = m, o = i;
      while (p < m && q < e)
        tmp[o++] = a[q].lo < a[p].lo ? a[q++] : a[p++];
      while (p < m)
        tmp[o++] = a[p++];
      while (q < e)
        tmp[o++] = a[q++];
    }
    memcpy (a, tmp, sizeof *a * n);
  }
}

/* The last layout's first place at or after @from whose suffix minimum is
 * above key @k, moved up to a cut. */
static int32_t
cut_after (const int64_t *pmax, const int64_t *smin, int32_t n, int32_t from, int64_t k)
{
  int32_t a = from, b = n;
  while (a < b) {
    int32_t m = a + (b - a) / 2;
    if (k < smin[m])
      b = m;
    else
      a = m + 1;
  }
  while (a > 0 && a < n && pmax[a - 1] >= smin[a])
    a++;
  return a;
}

/* One open window: the whole order. */
static void
whole (SgRewrite *rw, Windows *ws)
{
  ws->w = WORK (rw, SG_RW_WINDOWS, Window, 1);
  ws->w[0] = (Window){ 0 };
  ws->n = 1;
  ws->reuse = false;
}

/* The parts of the order this layout computes (docs/ir.md "Speed"): around
 * each span of rw->changed, from the last cut of the last layout's order
 * (no later node has an item below an earlier one) before it to the first
 * cut after it. Between them the nodes are the same, with the same
 * inputs and edges, so the stable order keeps them as the last layout
 * did. */
static void
find_windows (const Ctx *x, Windows *ws)
{
  SgRewrite *rw = x->rw;
  Span *it = (Span *)(void *)rw->changed->data;
  guint ni = rw->changed->len;
  sort_spans (it, WORK (rw, SG_RW_SPANS, Span, ni), ni);
  int32_t n = rw->last_n;
  const int64_t *pmax = rw->work[SG_RW_LAST_PMAX], *smin = rw->work[SG_RW_LAST_SMIN];
  ws->w = WORK (rw, SG_RW_WINDOWS, Window, ni);
  ws->n = 0;
  ws->reuse = true;
  for (guint i = 0; i < ni; i++) {
    Window *last = ws->n ? &ws->w[ws->n - 1] : NULL;
    if (last && (!last->has_hi || it[i].lo < last->hi)) { /* in the last window */
      if (last->has_hi && it[i].hi >= last->hi) {
        last->s = cut_after (pmax, smin, n, last->s, it[i].hi);
        last->has_hi = last->s < n;
        if (last->has_hi)
          last->hi = smin[last->s];
      }
      continue;
    }
    int32_t a = last ? last->s : 0, b = n; /* the first place not below it */
    while (a < b) {
      int32_t m = a + (b - a) / 2;
      if (pmax[m] < it[i].lo)
        a = m + 1;
      else
        b = m;
    }
    int32_t p = a;
    while (p > 0 && p < n && pmax[p - 1] >= smin[p])
      p--;
    int32_t s = cut_after (pmax, smin, n, p, it[i].hi);
    if (last && p <= last->s) { /* overlaps the last window: one window */
      last->s = s;
      last->has_hi = s < n;
      if (s < n)
        last->hi = smin[s];
      continue;
    }
    Window w = { .has_lo = p > 0, .has_hi = s < n, .p = p, .s = s };
    if (p > 0)
      w.lo = pmax[p - 1];
    if (s < n)
      w.hi = smin[s];
    ws->w[ws->n++] = w;
  }
}

static void
swap_work (SgRewrite *rw, int slot)
{
  void *p = rw->work[slot];
  size_t z = rw->work_size[slot];
  rw->work[slot] = rw->work[slot + 1];
  rw->work_size[slot] = rw->work_size[slot + 1];
  rw->work[slot + 1] = p;
  rw->work_size[slot + 1] = z;
}

/* The order of the whole result into @order, with its prefix maxima and
 * suffix minima of items into rw's PMAX and SMIN (the next layout's cuts):
 * the windows' orders between the last order's nodes outside them (whose
 * maxima and minima are the last ones: a cut bounds them). False on a
 * cycle. */
static bool
order_all (Ctx *x, const GArray *edges, SgNodeId *order, int32_t *n_order, GError **error)
{
  SgRewrite *rw = x->rw;
  Windows ws;
  SgNodeId *wo = WORK (rw, SG_RW_WORDER, SgNodeId, x->n1);
  int32_t nw = 0;
  int r = -1;
  guint ne = x->g->implicit_edges ? x->g->implicit_edges->len : 0;
  if (rw->last_ok && ne == rw->last_edges
      && (x->g->output == SG_NO_NODE || x->g->output == x->n0 - 1)) {
    if (!rw->changed)
      rw->changed = g_array_new (FALSE, FALSE, sizeof (Span));
    g_array_set_size (rw->changed, 0);
    x->low = MIN ((int32_t)rw->low_nodes, MIN (x->n1 - x->n0, rw->last_added));
    match_added (x);
    changed_items (x, rw->changed);
    /* a window whose node reads one after it grows to hold both */
    for (int tries = 0; r < 0 && tries < 8; tries++) {
      find_windows (x, &ws);
      guint had = rw->changed->len;
      r = stable_order (x, &ws, edges, wo, &nw, rw->changed, error);
      if (r < 0 && rw->changed->len == had)
        break;
    }
  }
  if (r < 0) {
    whole (rw, &ws);
    r = stable_order (x, &ws, edges, wo, &nw, NULL, error);
  }
  if (r == 0)
    return false;
  int32_t n = nw;
  if (ws.reuse)
    for (int32_t k = 0, at = 0; k < ws.n; at = ws.w[k++].s)
      n += ws.w[k].p - at;
  if (ws.reuse)
    n += rw->last_n - (ws.n ? ws.w[ws.n - 1].s : 0);
  const SgNodeId *last = rw->work[SG_RW_LAST_ORDER];
  const int64_t *lpmax = rw->work[SG_RW_LAST_PMAX], *lsmin = rw->work[SG_RW_LAST_SMIN];
  int64_t *pmax = WORK (rw, SG_RW_PMAX, int64_t, n), *smin = WORK (rw, SG_RW_SMIN, int64_t, n);
  int32_t *at_w = WORK (rw, SG_RW_AT_W, int32_t, ws.n); /* where each window went */
  int32_t o = 0, from = 0;
  for (int32_t k = 0, q = 0; k <= ws.n; k++) {
    int32_t to = k < ws.n ? ws.w[k].p : rw->last_n;
    if (ws.reuse && to > from) { /* the last order up to the window */
      memcpy (pmax + o, lpmax + from, sizeof (int64_t) * (size_t)(to - from));
      memcpy (smin + o, lsmin + from, sizeof (int64_t) * (size_t)(to - from));
      if (x->map_from == G_MAXINT32)
        memcpy (order + o, last + from, sizeof (SgNodeId) * (size_t)(to - from));
      else
        for (int32_t i = from; i < to; i++)
          order[o + i - from] = remap (x, last[i]);
      o += to - from;
    }
    if (k == ws.n)
      break;
    at_w[k] = o;
    for (int32_t i = 0; i < ws.w[k].n; i++, o++) {
      order[o] = wo[q++];
      int64_t k = key_of (x, order[o]);
      pmax[o] = o > 0 ? MAX (pmax[o - 1], k) : k;
    }
    from = ws.w[k].s;
  }
  g_assert (o == n);
  for (int32_t k = ws.n; k-- > 0;)
    for (int32_t i = at_w[k] + ws.w[k].n; i-- > at_w[k];) {
      int64_t k = key_of (x, order[i]);
      smin[i] = i < n - 1 ? MIN (smin[i + 1], k) : k;
    }
  *n_order = n;
  rw->reused = n - nw;
  if (rw->verify && ws.reuse) {
    SgNodeId *full = WORK (rw, SG_RW_CHECK, SgNodeId, x->n1);
    Windows all;
    whole (rw, &all);
    int32_t nf = 0;
    if (stable_order (x, &all, edges, full, &nf, NULL, NULL) != 1 || nf != n
        || memcmp (full, order, sizeof (SgNodeId) * (size_t)nf) != 0)
      g_error ("rewrite: the layout reusing the last one (%d of %d nodes kept) differs from a "
               "full layout", n - nw, n);
  }
  return true;
}

/* What the next layout compares itself with: this one's nodes kept, keys,
 * touched nodes, edges, and order with its prefix maxima and suffix
 * minima. */
static void
keep_last (const Ctx *x, int32_t n)
{
  SgRewrite *rw = x->rw;
  uint32_t *at = WORK (rw, SG_RW_LAST_AIN_AT, uint32_t, 2 * (size_t)(x->n1 - x->n0));
  for (int32_t j = 0; j < x->n1 - x->n0; j++) {
    const SgNode *a = &g_array_index (rw->nodes, SgNode, j);
    at[2 * j] = a->in_first;
    at[2 * j + 1] = a->n_in;
  }
  if (!rw->last_ain)
    rw->last_ain = g_array_new (FALSE, FALSE, sizeof (SgNodeId));
  g_array_set_size (rw->last_ain, 0);
  g_array_append_vals (rw->last_ain, rw->inputs->data, rw->inputs->len);
  static const int slots[] = { SG_RW_KEEP, SG_RW_TIX, SG_RW_AKEY, SG_RW_ORDER, SG_RW_PMAX,
                               SG_RW_SMIN, SG_RW_ERES };
  for (guint i = 0; i < G_N_ELEMENTS (slots); i++)
    swap_work (rw, slots[i]);
  GArray *t = rw->touched;
  rw->touched = rw->last_touched;
  rw->last_touched = t;
  t = rw->t_in;
  rw->t_in = rw->last_t_in;
  rw->last_t_in = t;
  rw->last_n = n;
  rw->last_added = x->n1 - x->n0;
  rw->low_nodes = rw->nodes->len;
  rw->last_edges = x->g->implicit_edges ? x->g->implicit_edges->len : 0;
  rw->last_ok = true;
}

/* Nodes in @order, inputs and edges renumbered, into @out. */
static void
lay_out (const Ctx *x, const SgNodeId *order, int32_t n, GArray *edges, SgRewriteLayout *out)
{
  SgRewrite *rw = x->rw;
  SgGraph *g = x->g;
  int32_t n0 = x->n0, n1 = x->n1;
  SgNodeId *new_id = WORK (rw, SG_RW_NEW_ID, SgNodeId, n1);
  for (SgNodeId v = 0; v < n1; v++)
    new_id[v] = SG_NO_NODE;
  for (int32_t i = 0; i < n; i++)
    new_id[order[i]] = i;
  out->n = n;
  if (rw->spare_nodes && rw->spare_cap >= n) {
    out->nodes = g_steal_pointer (&rw->spare_nodes);
    out->nodes_cap = rw->spare_cap;
  } else {
    out->nodes_cap = MAX (n, 1);
    out->nodes = g_new (SgNode, (size_t)out->nodes_cap);
  }
  /* Room for every input there may be; trimmed below. */
  guint bound = g->inputs->len + rw->inputs->len + rw->t_in->len;
  out->inputs = rw->spare_inputs ? g_steal_pointer (&rw->spare_inputs)
                                 : g_array_new (FALSE, FALSE, sizeof (SgNodeId));
  g_array_set_size (out->inputs, bound);
  SgNodeId *dst = (SgNodeId *)(void *)out->inputs->data;
  uint32_t at = 0;
  for (int32_t i = 0; i < n; i++) {
    SgNodeId v = order[i];
    SgNode *node = &out->nodes[i];
    if (v < n0)
      memcpy (node, &g->nodes[v], sizeof *node);
    else
      memcpy (node, &g_array_index (rw->nodes, SgNode, v - n0), sizeof *node);
    uint32_t k = node->n_in; /* an untouched base node: its own inputs */
    const SgNodeId *in = x->plain[v] ? &g_array_index (g->inputs, SgNodeId, node->in_first)
                                     : new_inputs (x, v, &k);
    node->in_first = at;
    node->n_in = k;
    for (uint32_t j = 0; j < k; j++)
      dst[at++] = new_id[in[j]];
    const Touched *t = x->plain[v] ? NULL : touched_of (x, v);
    if (t && t->reindexed) {
      node->args_first = t->args_first;
      node->kwargs_first = t->kwargs_first;
    }
  }
  g_array_set_size (out->inputs, at);
  if (g->implicit_edges) {
    for (guint i = 0; i < edges->len; i++) {
      SgImplicitEdge *e = &g_array_index (edges, SgImplicitEdge, i);
      e->from = new_id[e->from];
      e->to = new_id[e->to];
    }
    out->edges = g_array_ref (edges);
  }
  out->output = g->output != SG_NO_NODE ? new_id[g->output] : SG_NO_NODE;
  out->old_id = order;
}

bool
sg_rewrite_layout (SgRewrite *rw, SgRewriteLayout *out, GError **error)
{
  SgGraph *g = rw->g;
  Ctx x = { .rw = rw, .g = g, .n0 = rw->n0, .n1 = rw->n0 + (int32_t)rw->nodes->len,
            .map_from = G_MAXINT32 };
  int32_t n0 = x.n0, n1 = x.n1;
  memset (out, 0, sizeof *out);
  sg_graph_fill_users (g);
  x.keep = WORK (rw, SG_RW_KEEP, bool, n1);
  memset (x.keep, 1, sizeof (bool) * (size_t)n1);
  for (guint i = 0; i < rw->removed->len; i++)
    x.keep[g_array_index (rw->removed, SgNodeId, i)] = false;
  if (!rw->touched)
    rw->touched = g_array_new (FALSE, FALSE, sizeof (Touched));
  g_array_set_size (rw->touched, 0);
  g_array_set_size (rw->t_in, 0);
  x.tix = WORK (rw, SG_RW_TIX, int32_t, n1);
  memset (x.tix, 0xff, sizeof (int32_t) * (size_t)n1);
  if (rw->redirects->len) {
    x.redir = WORK (rw, SG_RW_REDIR, SgNodeId, n0);
    for (SgNodeId v = 0; v < n0; v++)
      x.redir[v] = SG_NO_NODE;
    for (guint i = 0; i < rw->redirects->len; i += 2)
      x.redir[g_array_index (rw->redirects, SgNodeId, i)]
          = g_array_index (rw->redirects, SgNodeId, i + 1);
    x.in_pos = WORK (rw, SG_RW_IN_POS, int32_t, n1);
    memset (x.in_pos, 0xff, sizeof (int32_t) * (size_t)n1);
    redirect_users (&x);
  }
  x.plain = WORK (rw, SG_RW_PLAIN, uint8_t, n1);
  memcpy (x.plain, x.keep, (size_t)n0);
  memset (x.plain + n0, 0, (size_t)(n1 - n0));
  for (guint i = 0; i < rw->touched->len; i++)
    x.plain[g_array_index (rw->touched, Touched, i).node] = 0;
  if (!check_removed (&x, error)) {
    rw->last_ok = false;
    return false;
  }
  guint ne = g->implicit_edges ? g->implicit_edges->len : 0;
  x.eres = WORK (rw, SG_RW_ERES, SgNodeId, 2 * (size_t)ne);
  g_autoptr (GArray) edges = moved_edges (&x);
  added_keys (&x, WORK (rw, SG_RW_AKEY, int64_t, n1 - n0));
  SgNodeId *order = WORK (rw, SG_RW_ORDER, SgNodeId, n1);
  int32_t n;
  if (!order_all (&x, edges, order, &n, error)) {
    rw->last_ok = false;
    return false;
  }
  lay_out (&x, order, n, edges, out);
  keep_last (&x, n);
  return true;
}

void
sg_rewrite_layout_clear (SgRewriteLayout *l)
{
  g_clear_pointer (&l->nodes, g_free);
  g_clear_pointer (&l->inputs, g_array_unref);
  g_clear_pointer (&l->edges, g_array_unref);
}

SgNodeId *
sg_graph_order_by_key (SgGraph *g, const int64_t *key)
{
  g_return_val_if_fail (g && key, NULL);
  const int32_t n = g->n_nodes;
  sg_graph_fill_users (g);
  /* implicit edges by source (CSR) */
  const guint ne = g->implicit_edges ? g->implicit_edges->len : 0;
  g_autofree uint32_t *efirst = g_new0 (uint32_t, (size_t)n + 1);
  g_autofree SgNodeId *eto = g_new (SgNodeId, (size_t)ne + 1);
  g_autofree int32_t *indeg = g_new0 (int32_t, (size_t)n + 1);
  for (guint e = 0; e < ne; e++) {
    const SgImplicitEdge *ie = &g_array_index (g->implicit_edges, SgImplicitEdge, e);
    g_return_val_if_fail (ie->from >= 0 && ie->from < n && ie->to >= 0 && ie->to < n, NULL);
    efirst[ie->from + 1]++;
    indeg[ie->to]++;
  }
  for (int32_t v = 0; v < n; v++)
    efirst[v + 1] += efirst[v];
  g_autofree uint32_t *fill = g_memdup2 (efirst, sizeof (uint32_t) * ((size_t)n + 1));
  for (guint e = 0; e < ne; e++) {
    const SgImplicitEdge *ie = &g_array_index (g->implicit_edges, SgImplicitEdge, e);
    eto[fill[ie->from]++] = ie->to;
  }
  for (SgNodeId v = 0; v < n; v++) {
    uint32_t k;
    sg_node_inputs (g, v, &k);
    indeg[v] += (int32_t)k;
  }
  g_autofree Item *heap = g_new (Item, (size_t)n + 1);
  int32_t hn = 0, placed = 0;
  SgNodeId *order = g_new (SgNodeId, (size_t)n + 1);
  for (SgNodeId v = 0; v < n; v++)
    if (indeg[v] == 0)
      heap_push (heap, &hn, (Item){ key[v], v });
  while (hn > 0) {
    const SgNodeId v = heap_pop (heap, &hn).id;
    order[placed++] = v;
    uint32_t nu;
    const SgNodeId *u = sg_node_users (g, v, &nu);
    for (uint32_t i = 0; i < nu; i++)
      if (--indeg[u[i]] == 0)
        heap_push (heap, &hn, (Item){ key[u[i]], u[i] });
    for (uint32_t i = efirst[v]; i < efirst[v + 1]; i++)
      if (--indeg[eto[i]] == 0)
        heap_push (heap, &hn, (Item){ key[eto[i]], eto[i] });
  }
  if (placed < n) { /* an implicit edge closes a cycle */
    g_free (order);
    return NULL;
  }
  return order;
}
