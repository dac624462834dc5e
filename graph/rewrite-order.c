/* rewrite-order.c: the layout of a rewritten graph (rewrite.c's commit and
 * trial graphs both come from here).
 *
 * Checks the edits (no kept node reads a removed one, the output stays),
 * redirects the uses of replaced nodes (rewrite-redirect.c), moves
 * implicit edges, and orders
 * the nodes: among nodes whose data inputs and implicit-edge sources are
 * placed, the smallest placement key goes first, ties on the id in the
 * rewrite (base nodes have keys 4 id + 2, added nodes 4 anchor + slot,
 * the output the largest: it stays last).
 * Base nodes come sorted by key already, so a cursor walks the merged key
 * order and only nodes that become ready behind it pass through a heap:
 * the same sequence as a plain heap in O(n + late log late). Untouched
 * base nodes are released through the base graph's users; only edited
 * edges (added nodes' inputs, redirected users) are built here.
 * A layout after another of the same rewrite (a pass's trials) orders only
 * windows: it lists the nodes whose order inputs changed since (kept or
 * not, key, new inputs, implicit-edge ends; added nodes re-described under
 * shifted ids are matched, match_added), puts a window around each key
 * between cuts of the last order (every key before a cut is below every
 * key after it), runs the same stable order over the windows' nodes and
 * copies the last order between them: there the nodes, their inputs and
 * edges are the same and the cut keeps the rest of the graph out of their
 * way, so the stable order is the same. A window whose node reads one
 * after it grows to hold both; when windows do not hold, everything is
 * ordered (one open window: the commit's path too). Every key of a window
 * is below every key of the next and its nodes read only nodes of it or
 * of earlier windows, so each window is ordered on its own, earlier ones
 * placed: from WINDOWS_PARALLEL nodes the windows go side by side on the
 * rewrite's pool, after their in-degrees in ranges. docs/ir.md "Speed".
 * Mirrors Kahn's algorithm with a priority queue (a stable topological
 * sort); sg_graph_order_by_key is the same sort over a whole graph by keys
 * a pass gives (decompose/ carries a schedule over to a rewritten graph
 * with it). Working arrays are the rewrite's and reused by its next layout
 * (a pass's trials). The nodes are then laid out in that order by
 * rewrite-layout.c (sg_rw_lay_out), which keeps what the last trial graph
 * laid out before the first window. Requires: @g's users
 * fresh. Invalidates: nothing
 * (appends the re-indexed args of users whose inputs merged to g->args).
 */
#include "rewrite-order.h"

#include <string.h>

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
    /* room for the next layouts, which may hold a few more nodes (memory
     * never written is not resident) */
    g_free (rw->work[slot]);
    rw->work_size[slot] = MAX (bytes + bytes / 8, rw->work_size[slot] + rw->work_size[slot] / 4);
    rw->work[slot] = g_malloc (rw->work_size[slot]);
  }
  return rw->work[slot];
}

void *
sg_rw_work_clean (SgRewrite *rw, int slot, size_t bytes, int byte)
{
  size_t had = rw->work_size[slot];
  char *p = sg_rewrite_work (rw, slot, bytes);
  if (rw->work_size[slot] != had) /* new memory */
    rw->filled[slot] = 0;
  if (rw->filled[slot] < bytes) {
    memset (p + rw->filled[slot], byte, bytes - rw->filled[slot]);
    rw->filled[slot] = bytes;
  }
  return p;
}

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

static const char *
name_of (const Ctx *x, SgNodeId id)
{
  return sg_rewrite_node (x->rw, id)->name;
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
  /* a freed trial graph's edge array, when there is one */
  GArray *out = x->rw->spare_edges ? g_steal_pointer (&x->rw->spare_edges)
                                   : g_array_sized_new (FALSE, FALSE, sizeof (SgImplicitEdge), ne);
  g_array_set_size (out, ne);
  SgImplicitEdge *dst = (SgImplicitEdge *)(void *)out->data;
  guint w = 0;
  const GArray *mv = x->rw->moves;
  int32_t *moved = NULL; /* per base node: its move, or -1 (between layouts too) */
  if (mv->len) {
    moved = sg_rw_work_clean (x->rw, SG_RW_MOVED, sizeof (int32_t) * ((size_t)x->n0 + 1), 0xff);
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
  for (guint i = 0; moved && i < mv->len; i++)
    moved[g_array_index (mv, SgRewriteMove, i).old] = -1;
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

/* The first base node in [0, n0] whose key 4 v + 2 is not below @k
 * (@strict: above it): ceil ((k - 2) / 4), or floor ((k - 2) / 4) + 1,
 * clamped to [0, n0]. */
static SgNodeId
base_from (int32_t n0, int64_t k, bool strict)
{
  if (k < 2)
    return 0;
  int64_t v = (k - 2) / 4 + (strict || (k - 2) % 4 != 0);
  return (SgNodeId)MIN (v, (int64_t)n0);
}

/* From this many nodes in more than one window the windows are ordered
 * side by side on the rewrite's pool; their in-degrees and which window
 * each added node is in (from this many added nodes) go in ranges of
 * WINDOWS_RANGE. */
#define WINDOWS_PARALLEL 16384
#define WINDOWS_RANGE 4096

/* WINDOWS_PARALLEL, or the rewrite's own minimum (tests lower it). */
static inline int32_t
windows_parallel (const SgRewrite *rw)
{
  return rw->windows_min ? rw->windows_min : WINDOWS_PARALLEL;
}

/* Range @r of the added nodes: the window each kept one is in, or -1,
 * into @wk (indexed by node id). */
typedef struct {
  const Ctx *x;
  const Windows *ws;
  int32_t *wk;
} AddedIn;

static void
added_in_task (gpointer data, int32_t r, int32_t worker)
{
  (void)worker;
  const AddedIn *a = data;
  const Ctx *x = a->x;
  int32_t lo, hi;
  sg_range_of (r, WINDOWS_RANGE, x->n1 - x->n0, &lo, &hi);
  for (SgNodeId v = x->n0 + lo; v < x->n0 + hi; v++)
    a->wk[v] = x->keep[v] ? window_of (a->ws, key_of (x, v)) : -1;
}

/* The windows' nodes by (key, id) into @sorted, window after window (each
 * w->n): base nodes in id order, added ones merged in (with windows, the
 * output is the last base node, find_windows); their places into @pos.
 * @wk: scratch per node (the added nodes' windows, when found on the
 * pool). */
static int32_t
window_nodes (const Ctx *x, Windows *ws, SgNodeId *sorted, int32_t *pos, Item *heap,
              int32_t *wk)
{
  int32_t n0 = x->n0, hn = 0, ns = 0;
  if (ws->reuse && sg_pool_size (x->rw->pool) > 1 && x->n1 - n0 >= windows_parallel (x->rw)) {
    AddedIn a = { x, ws, wk };
    sg_pool_run (x->rw->pool, sg_ranges (x->n1 - n0, WINDOWS_RANGE), added_in_task, &a);
    for (SgNodeId v = n0; v < x->n1; v++)
      if (wk[v] >= 0)
        heap_push (heap, &hn, item_of (x, v));
  } else {
    for (SgNodeId v = n0; v < x->n1; v++)
      if (x->keep[v] && (!ws->reuse || window_of (ws, key_of (x, v)) >= 0))
        heap_push (heap, &hn, item_of (x, v));
  }
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
    w->first = first;
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


int
sg_rw_stable_order (const Ctx *x, Windows *ws, const GArray *edges, SgNodeId *order,
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

/* The windows' stable orders: each window's nodes read only nodes of
 * their window or of earlier ones, and every key of a window is below
 * every key of the next, so the order of all windows is the windows'
 * orders one after the other, each with the earlier windows placed. */
typedef struct {
  const Ctx *x;
  Windows *ws;
  int32_t *indeg; /* per node: its unplaced inputs and edge sources in its window */
  const int32_t *pos;
  const SgNodeId *sorted;
  Item *heap; /* a task's windows' heap from the first place of its first */
  Csr extra;  /* edited edges within windows, by their source's place */
  SgNodeId *order;
  int32_t n_tasks;
} Kahn;

/* Window @k's stable order into order[w->first ..], how many came out
 * into w->out: fewer than its nodes on a cycle. Kahn's algorithm with a
 * cursor over its nodes by key; only nodes that become ready behind the
 * cursor go through @heap (empty again at the end). */
static void
order_window (const Kahn *kn, int32_t k, Item *heap)
{
  const Ctx *x = kn->x;
  Window *win = &kn->ws->w[k];
  const int32_t *wix = kn->ws->wix, *pos = kn->pos;
  const SgNodeId *sorted = kn->sorted;
  int32_t *indeg = kn->indeg;
  int32_t lo = win->first, hi = lo + win->n, cur = lo, w = lo, hn = 0;
#define RELEASE(u)                                                                                 \
  do {                                                                                             \
    SgNodeId u_ = (u);                                                                             \
    if (--indeg[u_] == 0 && pos[u_] < cur)                                                         \
      heap_push (heap, &hn, item_of (x, u_));                                                      \
  } while (0)
  for (;;) {
    while (cur < hi && indeg[sorted[cur]] != 0)
      cur++;
    SgNodeId v;
    if (hn > 0 && (cur == hi || item_less (heap[0], item_of (x, sorted[cur]))))
      v = heap_pop (heap, &hn).id;
    else if (cur < hi)
      v = sorted[cur++];
    else
      break;
    kn->order[w++] = v;
    if (v < x->n0) {
      uint32_t nu;
      const SgNodeId *users = sg_node_users (x->g, v, &nu);
      for (uint32_t j = 0; j < nu; j++)
        if (x->plain[users[j]] && wix[users[j]] == k)
          RELEASE (users[j]);
    }
    for (uint32_t j = kn->extra.first[pos[v]]; j < kn->extra.first[pos[v] + 1]; j++)
      RELEASE (kn->extra.adj[j]);
  }
#undef RELEASE
  win->out = w - lo;
}

/* Task @t orders the windows that start in its share of the nodes. */
static void
kahn_task (gpointer data, int32_t t, int32_t worker)
{
  (void)worker;
  const Kahn *kn = data;
  const Windows *ws = kn->ws;
  int32_t ns = ws->w[ws->n - 1].first + ws->w[ws->n - 1].n;
  int32_t from = (int32_t)((int64_t)ns * t / kn->n_tasks);
  int32_t to = (int32_t)((int64_t)ns * (t + 1) / kn->n_tasks);
  int32_t a = 0, b = ws->n; /* the first window that starts at or after @from */
  while (a < b) {
    int32_t m = a + (b - a) / 2;
    if (ws->w[m].first < from)
      a = m + 1;
    else
      b = m;
  }
  for (int32_t k = a; k < ws->n && (ws->w[k].first < to || t == kn->n_tasks - 1); k++)
    order_window (kn, k, kn->heap + ws->w[a].first);
}

/* In-degrees within the windows of their nodes @sorted[lo .. hi) into
 * @indeg: untouched base nodes from their own inputs, edited nodes from
 * their new inputs; only inputs in the node's own window count (earlier
 * windows come out first). Returns the count of the edited nodes' inputs
 * (the edited data edges); sets *@fail where a node reads one after its
 * window (the span appended to @bad, when not NULL). */
static size_t
in_degrees (const Ctx *x, const Windows *ws, const SgNodeId *sorted, int32_t lo, int32_t hi,
            int32_t *indeg, GArray *bad, bool *fail)
{
  size_t m = 0;
  for (int32_t q = lo; q < hi; q++) {
    SgNodeId v = sorted[q];
    int32_t k = ws->wix[v];
    uint32_t n;
    const SgNodeId *in = x->plain[v] ? sg_node_inputs (x->g, v, &n) : new_inputs (x, v, &n);
    if (!x->plain[v])
      m += n;
    int32_t d = 0;
    for (uint32_t j = 0; j < n; j++) {
      int r = pred_in (ws, x, in[j], item_of (x, v), k);
      if (r < 0) {
        bad_pred (x, bad, item_of (x, v), in[j]);
        *fail = true;
      }
      d += r > 0 && ws->wix[in[j]] == k;
    }
    indeg[v] = d;
  }
  return m;
}

/* in_degrees in ranges of WINDOWS_RANGE places on the rewrite's pool:
 * each range's count of edited inputs into @m, SIZE_MAX where it fails. */
typedef struct {
  const Ctx *x;
  const Windows *ws;
  const SgNodeId *sorted;
  int32_t *indeg;
  int32_t ns;
  size_t *m;
} InDeg;

static void
in_degree_task (gpointer data, int32_t r, int32_t worker)
{
  (void)worker;
  const InDeg *a = data;
  int32_t lo, hi;
  sg_range_of (r, WINDOWS_RANGE, a->ns, &lo, &hi);
  bool fail = false;
  size_t m = in_degrees (a->x, a->ws, a->sorted, lo, hi, a->indeg, NULL, &fail);
  a->m[r] = fail ? SIZE_MAX : m;
}

static int
order_windows (const Ctx *x, Windows *ws, const GArray *edges, SgNodeId *order,
               int32_t *n_order, int32_t *ns_out, GArray *bad, GError **error)
{
  SgRewrite *rw = x->rw;
  int32_t n1 = x->n1;
  int32_t *indeg = WORK (rw, SG_RW_INDEG, int32_t, n1);
  int32_t *pos = WORK (rw, SG_RW_POS, int32_t, n1);
  SgNodeId *sorted = WORK (rw, SG_RW_SORTED, SgNodeId, n1);
  Item *heap = WORK (rw, SG_RW_HEAP, Item, n1);
  int32_t ns = window_nodes (x, ws, sorted, pos, heap, indeg); /* @indeg: its scratch */
  *ns_out = ns;
  /* In-degrees within the windows: untouched base nodes from their own
   * inputs, edited nodes from their new inputs, which are also the edited
   * data edges; and the implicit edges, which go with the edited edges
   * into one CSR by source (its place in @sorted). */
  size_t m = edges->len;
  bool fail = false;
  int32_t threads = sg_pool_size (rw->pool);
  int32_t par_min = windows_parallel (rw);
  if (threads > 1 && ns >= par_min) {
    int32_t nr = sg_ranges (ns, WINDOWS_RANGE);
    InDeg id = { x, ws, sorted, indeg, ns, WORK (rw, SG_RW_RANGES, size_t, nr) };
    sg_pool_run (rw->pool, nr, in_degree_task, &id);
    for (int32_t r = 0; r < nr; r++) {
      fail |= id.m[r] == SIZE_MAX;
      m += id.m[r] == SIZE_MAX ? 0 : id.m[r];
    }
    if (fail) /* again in order, for the spans the windows must hold */
      m = edges->len + in_degrees (x, ws, sorted, 0, ns, indeg, bad, &fail);
  } else {
    m += in_degrees (x, ws, sorted, 0, ns, indeg, bad, &fail);
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
      if (ws->wix[in[j]] == ws->wix[v]) {
        pp[2 * pairs.n] = pos[in[j]];
        pp[2 * pairs.n++ + 1] = v;
      }
  }
  for (guint i = 0; i < edges->len; i++) {
    const SgImplicitEdge *e = &g_array_index (edges, SgImplicitEdge, i);
    int32_t kt = ws->wix[e->to];
    if (kt < 0)
      continue;
    Item to = item_of (x, e->to);
    int r = pred_in (ws, x, e->from, to, kt);
    if (r < 0) {
      bad_pred (x, bad, to, e->from);
      fail = true;
    }
    if (r <= 0 || ws->wix[e->from] != kt)
      continue;
    pp[2 * pairs.n] = pos[e->from];
    pp[2 * pairs.n++ + 1] = e->to;
    indeg[e->to]++;
  }
  if (fail)
    return -1;
  Csr extra = csr_build (rw, SG_RW_XFIRST, SG_RW_XADJ, ns, &pairs);
  Kahn kn = { x, ws, indeg, pos, sorted, heap, extra, order, 1 };
  if (threads > 1 && ws->n > 1 && ns >= par_min)
    kn.n_tasks = MIN (ws->n, 4 * threads);
  if (ws->n > 0)
    sg_pool_run (kn.n_tasks > 1 ? rw->pool : NULL, kn.n_tasks, kahn_task, &kn);
  int32_t w = 0;
  for (int32_t k = 0; k < ws->n; k++)
    w += ws->w[k].out;
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

/* sg_rewrite_layout after the redirects: the checks, the order and the
 * layout. */
static bool
order_result (Ctx *x, SgRewriteLayout *out, GError **error)
{
  SgRewrite *rw = x->rw;
  SgGraph *g = x->g;
  int32_t n0 = x->n0, n1 = x->n1;
  x->plain = WORK (rw, SG_RW_PLAIN, uint8_t, n1);
  memcpy (x->plain, x->keep, (size_t)n0);
  memset (x->plain + n0, 0, (size_t)(n1 - n0));
  for (guint i = 0; i < rw->touched->len; i++)
    x->plain[g_array_index (rw->touched, Touched, i).node] = 0;
  if (!check_removed (x, error))
    return false;
  guint ne = g->implicit_edges ? g->implicit_edges->len : 0;
  x->eres = WORK (rw, SG_RW_ERES, SgNodeId, 2 * (size_t)ne);
  g_autoptr (GArray) edges = moved_edges (x);
  added_keys (x, WORK (rw, SG_RW_AKEY, int64_t, n1 - n0));
  SgNodeId *order = WORK (rw, SG_RW_ORDER, SgNodeId, n1);
  int32_t n;
  if (!sg_rw_order_all (x, edges, order, &n, error))
    return false;
  sg_rw_lay_out (x, order, n, edges, out);
  sg_rw_keep_last (x, n);
  return true;
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
  /* tix is -1 between layouts but at the nodes rw->touched lists (and
   * the last layout's at rw->last_touched: the two swap together) */
  if (!rw->touched)
    rw->touched = g_array_new (FALSE, FALSE, sizeof (Touched));
  int32_t *tix = rw->work[SG_RW_TIX];
  for (guint i = 0; i < rw->touched->len; i++) {
    SgNodeId v = g_array_index (rw->touched, Touched, i).node;
    if (sizeof (int32_t) * (size_t)v < rw->filled[SG_RW_TIX])
      tix[v] = -1;
  }
  g_array_set_size (rw->touched, 0);
  g_array_set_size (rw->t_in, 0);
  x.tix = sg_rw_work_clean (rw, SG_RW_TIX, sizeof (int32_t) * ((size_t)n1 + 1), 0xff);
  /* redir and in_pos are -1 between layouts, redirected 0: they are
   * cleared below, sg_rw_redirect_users clears in_pos */
  if (rw->redirects->len) {
    x.redir = sg_rw_work_clean (rw, SG_RW_REDIR, sizeof (SgNodeId) * ((size_t)n0 + 1), 0xff);
    x.redirected = sg_rw_work_clean (rw, SG_RW_REDIRECTED, sizeof (uint64_t) * ((size_t)n0 / 64 + 1), 0);
    for (guint i = 0; i < rw->redirects->len; i += 2) {
      SgNodeId old = g_array_index (rw->redirects, SgNodeId, i);
      x.redir[old] = g_array_index (rw->redirects, SgNodeId, i + 1);
      x.redirected[old / 64] |= (uint64_t)1 << (old % 64);
    }
    x.in_pos = sg_rw_work_clean (rw, SG_RW_IN_POS, sizeof (int32_t) * ((size_t)n1 + 1), 0xff);
    sg_rw_redirect_users (&x);
  }
  bool ok = order_result (&x, out, error);
  for (guint i = 0; x.redir && i < rw->redirects->len; i += 2) {
    SgNodeId old = g_array_index (rw->redirects, SgNodeId, i);
    x.redir[old] = SG_NO_NODE;
    x.redirected[old / 64] = 0;
  }
  rw->last_ok = ok;
  return ok;
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
