/* rewrite-reuse.c: what a layout of a rewrite reuses from the last one
 * (rewrite-order.c's windows; docs/ir.md "Speed").
 *
 * A layout keeps, for the next one of the same rewrite, what the stable
 * order is a function of: the nodes kept, the added nodes' keys and
 * inputs, the touched nodes' new inputs, the implicit edges' ends, and
 * the order with its prefix maxima and suffix minima of keys. The next
 * layout lists the keys of the nodes for which any of these changed
 * (added nodes that the pass described again under shifted ids are
 * matched first), puts a window around each between cuts of the last
 * order (every key before a cut below every key after it), orders the
 * windows' nodes (sg_rw_stable_order) and copies the last order between
 * them; before the first window only what the arrays being written do
 * not already hold (the order's slots swap every layout: the one before
 * the last copied its same prefix into the arrays now written, which
 * hold it still unless ids were remapped or an array was made anew). A
 * window whose node reads one after it grows to hold both;
 * windows that still do not hold give way to the whole order. With
 * rw->verify every reused order is checked against the whole order.
 * Mirrors incremental topological ordering with change windows (the
 * "affected region" of dynamic topological sort, Pearce and Kelly).
 * Requires: the last layout of the same rewrite (rw->last_ok), @g
 * unchanged. Invalidates: nothing.
 */
#include "rewrite-order.h"

#include <string.h>

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
    int64_t k = key_with (x, lakey, v);
    sp[n++] = (Span){ k, k };
  }
  if (now) {
    int64_t k = key_of (x, v);
    sp[n++] = (Span){ k, k };
  }
  g_array_append_vals (out, sp, n);
}

/* The keys, in this layout and the last, of every node whose place in the
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
  /* the added nodes of one layout and not the other: their keys then and
   * now (changed, in one go) */
  guint at = out->len, n_new = (guint)MAX (s1 - low, 0) + (guint)MAX (s2 - low, 0);
  if (n_new > 0) { /* (an empty array may have no data to point into) */
    g_array_set_size (out, at + n_new);
    Span *sp = &g_array_index (out, Span, at);
    for (int32_t j = low; j < s1; j++, sp++)
      *sp = (Span){ lakey[j], lakey[j] };
    for (int32_t j = low; j < s2; j++, sp++)
      *sp = (Span){ x->akey[j], x->akey[j] };
  }
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

/* @k's rank among keys from @lo to @top, the output's key (INT64_MAX, the
 * largest: key_with) next after @top. */
static inline uint64_t
span_rank (int64_t k, int64_t lo, int64_t top)
{
  return (uint64_t)(k == INT64_MAX ? top : k) - (uint64_t)lo;
}

/* Sorts @n spans by their first key, stably, through @tmp: a radix sort
 * of their ranks (span_rank), a byte at a time, over the bytes where they
 * differ (the keys of a graph's nodes span a few bytes); already sorted
 * spans stay. */
static void
sort_spans (Span *a, Span *tmp, guint n)
{
  int64_t lo = INT64_MAX, hi = INT64_MIN;
  bool sorted = true;
  for (guint i = 0; i < n; i++) {
    lo = MIN (lo, a[i].lo);
    if (a[i].lo != INT64_MAX)
      hi = MAX (hi, a[i].lo);
    sorted = sorted && (i == 0 || a[i].lo >= a[i - 1].lo);
  }
  if (sorted)
    return;
  int64_t top = hi + 1; /* hi < INT64_MAX: some key is below another */
  uint64_t range = span_rank (INT64_MAX, lo, top);
  Span *src = a, *dst = tmp;
  for (int shift = 0; shift < 64 && (range >> shift) != 0; shift += 8) {
    guint at[257] = { 0 };
    for (guint i = 0; i < n; i++)
      at[(span_rank (src[i].lo, lo, top) >> shift & 0xff) + 1]++;
    for (int d = 0; d < 256; d++)
      at[d + 1] += at[d];
    for (guint i = 0; i < n; i++)
      dst[at[span_rank (src[i].lo, lo, top) >> shift & 0xff]++] = src[i];
    Span *t = src;
    src = dst;
    dst = t;
  }
  if (src != a)
    memcpy (a, src, sizeof *a * n);
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
 * each span of keys in rw->changed, from the last cut of the last layout's
 * order (no later node has a key below an earlier one) before it to the
 * first cut after it. Between them the nodes are the same, with the same
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
  size_t z = rw->work_size[slot], f = rw->filled[slot];
  rw->work[slot] = rw->work[slot + 1];
  rw->work_size[slot] = rw->work_size[slot + 1];
  rw->filled[slot] = rw->filled[slot + 1];
  rw->work[slot + 1] = p;
  rw->work_size[slot + 1] = z;
  rw->filled[slot + 1] = f;
}

/* The last order's pieces between the windows are copied in pieces of
 * at most this many entries, on the rewrite's pool from twice that. */
#define COPY_PIECE 4096

/* A piece of the last order to copy: entries [@from, @from + @n) to @o,
 * the order's (@order) and the prefix maxima and suffix minima (@keys). */
typedef struct {
  int32_t from, o, n;
  bool order, keys;
} Piece;

typedef struct {
  const Ctx *x;
  const Piece *pieces;
  SgNodeId *order;
  int64_t *pmax, *smin;
} CopyJob;

/* @dst[i] = remap (@src[i]) for i < @n (separate arrays: vectorized). */
static void
remap_run (SgNodeId *restrict dst, const SgNodeId *restrict src, int32_t n, SgNodeId map_from,
           int32_t map_d)
{
  for (int32_t i = 0; i < n; i++)
    dst[i] = src[i] >= map_from ? src[i] - map_d : src[i];
}

static void
copy_piece (gpointer data, int32_t t, int32_t worker)
{
  (void)worker;
  const CopyJob *c = data;
  const Ctx *x = c->x;
  const SgRewrite *rw = x->rw;
  const Piece *p = &c->pieces[t];
  const SgNodeId *last = rw->work[SG_RW_LAST_ORDER];
  const int64_t *lpmax = rw->work[SG_RW_LAST_PMAX], *lsmin = rw->work[SG_RW_LAST_SMIN];
  if (p->keys) {
    memcpy (c->pmax + p->o, lpmax + p->from, sizeof (int64_t) * (size_t)p->n);
    memcpy (c->smin + p->o, lsmin + p->from, sizeof (int64_t) * (size_t)p->n);
  }
  if (p->order && x->map_from == G_MAXINT32)
    memcpy (c->order + p->o, last + p->from, sizeof (SgNodeId) * (size_t)p->n);
  else if (p->order)
    remap_run (c->order + p->o, last + p->from, p->n, x->map_from, x->map_d);
}

static const int synced_slots[3] = { SG_RW_ORDER, SG_RW_PMAX, SG_RW_SMIN };

/* Places from 0 where the prefix maxima and suffix minima (*@keys) and
 * the order (*@order: 0 when ids are remapped) being made already hold
 * the last layout's: its same prefix, copied from the one before into
 * the arrays that are now the LAST_ slots, while no slot was made anew
 * since. Consumed: 0 until the next sg_rw_keep_last. */
static void
synced_prefix (const Ctx *x, int32_t *keys, int32_t *order)
{
  SgRewrite *rw = x->rw;
  bool same = true;
  for (int i = 0; i < 3; i++)
    same = same && rw->work_size[synced_slots[i]] == rw->synced_size[i];
  *keys = same ? rw->keys_synced : 0;
  *order = same && x->map_from == G_MAXINT32 ? MIN (rw->order_synced, *keys) : 0;
  rw->keys_synced = rw->order_synced = 0;
}

/* Pieces of [@from, @to) of the last order to @o on, into @pieces. */
static void
add_pieces (GArray *pieces, int32_t from, int32_t to, int32_t o, bool order, bool keys)
{
  for (int32_t a = from; a < to; a += COPY_PIECE) {
    Piece p = { a, o + a - from, MIN (COPY_PIECE, to - a), order, keys };
    g_array_append_val (pieces, p);
  }
}

/* Where each window of @ws goes in the order into @at_w, and, when the
 * last order outside them is reused, that order with its prefix maxima
 * and suffix minima into place between them (in pieces, on the rewrite's
 * pool when long; before the first window only what is not already in
 * place, synced_prefix). Returns the order's length. */
static int32_t
place_windows (const Ctx *x, const Windows *ws, SgNodeId *order, int64_t *pmax, int64_t *smin,
               int32_t *at_w)
{
  SgRewrite *rw = x->rw;
  g_autoptr (GArray) pieces = g_array_new (FALSE, FALSE, sizeof (Piece));
  int32_t o = 0, from = 0, copied = 0, keys_in, order_in;
  synced_prefix (x, &keys_in, &order_in);
  for (int32_t k = 0; k <= ws->n; k++) {
    int32_t to = k < ws->n ? ws->w[k].p : rw->last_n;
    if (ws->reuse && to > from) { /* the last order up to the window */
      if (k == 0) { /* from 0: the order, then all, where not in place */
        int32_t ko = MIN (keys_in, to), oo = MIN (order_in, ko);
        add_pieces (pieces, oo, ko, oo, true, false);
        add_pieces (pieces, ko, to, ko, true, true);
      } else {
        add_pieces (pieces, from, to, o, true, true);
      }
      copied += to - from;
      o += to - from;
    }
    if (k == ws->n)
      break;
    at_w[k] = o;
    o += ws->w[k].n;
    from = ws->w[k].s;
  }
  CopyJob c = { x, (const Piece *)(const void *)pieces->data, order, pmax, smin };
  sg_pool_run (copied >= 2 * COPY_PIECE ? rw->pool : NULL, (int32_t)pieces->len, copy_piece, &c);
  return o;
}

/* The order of the whole result into @order, with its prefix maxima and
 * suffix minima of keys into rw's PMAX and SMIN (the next layout's cuts):
 * the windows' orders between the last order's nodes outside them (whose
 * maxima and minima are the last ones: a cut bounds them). False on a
 * cycle. */
bool
sg_rw_order_all (Ctx *x, const GArray *edges, SgNodeId *order, int32_t *n_order, GError **error)
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
      r = sg_rw_stable_order (x, &ws, edges, wo, &nw, rw->changed, error);
      if (r < 0 && rw->changed->len == had)
        break;
    }
  }
  if (r < 0) {
    whole (rw, &ws);
    r = sg_rw_stable_order (x, &ws, edges, wo, &nw, NULL, error);
  }
  if (r == 0)
    return false;
  int32_t n = nw;
  if (ws.reuse) { /* and the last order's nodes outside the windows */
    for (int32_t k = 0, at = 0; k < ws.n; at = ws.w[k++].s)
      n += ws.w[k].p - at;
    n += rw->last_n - (ws.n ? ws.w[ws.n - 1].s : 0);
  }
  int64_t *pmax = WORK (rw, SG_RW_PMAX, int64_t, n), *smin = WORK (rw, SG_RW_SMIN, int64_t, n);
  int32_t *at_w = WORK (rw, SG_RW_AT_W, int32_t, ws.n); /* where each window went */
  int32_t placed = place_windows (x, &ws, order, pmax, smin, at_w);
  g_assert (placed == n);
  for (int32_t k = 0, q = 0; k < ws.n; k++)
    for (int32_t i = 0, o = at_w[k]; i < ws.w[k].n; i++, o++) {
      order[o] = wo[q++];
      int64_t key = key_of (x, order[o]);
      pmax[o] = o > 0 ? MAX (pmax[o - 1], key) : key;
    }
  for (int32_t k = ws.n; k-- > 0;)
    for (int32_t i = at_w[k] + ws.w[k].n; i-- > at_w[k];) {
      int64_t key = key_of (x, order[i]);
      smin[i] = i < n - 1 ? MIN (smin[i + 1], key) : key;
    }
  *n_order = n;
  rw->reused = n - nw;
  x->same_prefix = ws.reuse ? (ws.n ? ws.w[0].p : n) : 0;
  if (rw->verify && ws.reuse) {
    SgNodeId *full = WORK (rw, SG_RW_CHECK, SgNodeId, x->n1);
    Windows all;
    whole (rw, &all);
    int32_t nf = 0;
    if (sg_rw_stable_order (x, &all, edges, full, &nf, NULL, NULL) != 1 || nf != n
        || memcmp (full, order, sizeof (SgNodeId) * (size_t)nf) != 0)
      g_error ("rewrite: the layout reusing the last one (%d of %d nodes kept) differs from a "
               "full layout", n - nw, n);
  }
  return true;
}

/* What the next layout compares itself with: this one's nodes kept, keys,
 * touched nodes, edges, and order with its prefix maxima and suffix
 * minima. */
void
sg_rw_keep_last (const Ctx *x, int32_t n)
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
  /* the same prefix was copied, into the arrays now the LAST_ slots, from
   * those now the ORDER, PMAX and SMIN ones (the order as it was unless
   * ids were remapped) */
  rw->keys_synced = x->same_prefix;
  rw->order_synced = x->map_from == G_MAXINT32 ? x->same_prefix : 0;
  for (int i = 0; i < 3; i++)
    rw->synced_size[i] = rw->work_size[synced_slots[i]];
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

