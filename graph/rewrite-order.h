/* rewrite-order.h: what the files of the layout share (private to
 * rewrite-order.c, the stable order, rewrite-reuse.c, what a layout
 * reuses from the last one, and rewrite-redirect.c, the redirects). */
#pragma once

#include "graph-private.h"

/* A node in the stable order: (key, id), smallest first. */
typedef struct {
  int64_t key;
  SgNodeId id;
} Item;

static inline bool
item_less (Item a, Item b)
{
  return a.key < b.key || (a.key == b.key && a.id < b.id);
}

#define WORK(rw, slot, type, n) ((type *)sg_rewrite_work ((rw), (slot), sizeof (type) * ((size_t)(n) + 1)))


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
  uint64_t *redirected; /* bit per base node: redir set (with @redir) */
  int32_t *tix;    /* per node: its Touched, or -1 */
  const int64_t *akey; /* keys of added nodes */
  SgNodeId *eres;  /* per implicit edge of @g: its ends in the result, or
                    * both SG_NO_NODE where it is dropped */
  /* Added nodes of the last layout from @map_from on are this one's from
   * @map_from - @map_d on, the same nodes (match_added); @low: added nodes
   * before n0 + low are the same in both by id. */
  SgNodeId map_from;
  int32_t map_d, low;
  /* Places from 0 of the order that hold what the last layout's held
   * (before the first window; ids from @map_from on remapped): 0 when
   * nothing was reused (sg_rw_order_all). */
  int32_t same_prefix;
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

static inline const Touched *
touched_of (const Ctx *x, SgNodeId id)
{
  if (!x->tix || x->tix[id] < 0)
    return NULL;
  return &g_array_index (x->rw->touched, Touched, x->tix[id]);
}

/* A base node's placement key (added nodes': 4 anchor + slot, rewrite.c). */
static inline int64_t
base_key (SgNodeId v)
{
  return 4 * (int64_t)v + 2;
}

/* @v's key with the added nodes' keys @akey (this layout's, or the last
 * one's). The output's key is above every other: it stays last even where
 * an added node is placed after it (nothing reads the output). */
static inline int64_t
key_with (const Ctx *x, const int64_t *akey, SgNodeId v)
{
  if (v == x->g->output)
    return INT64_MAX;
  return v < x->n0 ? base_key (v) : akey[v - x->n0];
}

static inline int64_t
key_of (const Ctx *x, SgNodeId v)
{
  return key_with (x, x->akey, v);
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

static inline Item
item_of (const Ctx *x, SgNodeId v)
{
  return (Item){ key_of (x, v), v };
}

/* A part of the order a layout computes: the nodes whose keys are between
 * @lo and @hi (exclusive; a missing bound is open), in place of the last
 * layout's order from @p to @s. The whole order: one window, no bounds. */
typedef struct {
  int64_t lo, hi;
  int32_t p, s;
  int32_t n;     /* its nodes in this layout */
  int32_t first; /* where they start among the windows' nodes by key */
  int32_t out;   /* how many of them its stable order placed */
  bool has_lo, has_hi;
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

/* The stable order of the windows' nodes into @order (*n_order of them),
 * window after window: 1, or 0 on a cycle, or -1 when the windows do not
 * hold: nodes of windows read nodes after them (the spans from each to
 * the last it reads appended to @bad, when not NULL) or the windows'
 * nodes do not all come out. Nodes outside the windows count as placed
 * (rewrite-order.c). */
int sg_rw_stable_order (const Ctx *x, Windows *ws, const GArray *edges, SgNodeId *order,
                        int32_t *n_order, GArray *bad, GError **error);
/* The order of the whole result into @order, reusing the last layout's
 * where it holds; false on a cycle (rewrite-reuse.c). */
bool sg_rw_order_all (Ctx *x, const GArray *edges, SgNodeId *order, int32_t *n_order,
                      GError **error);
/* Keeps what the next layout compares itself with (rewrite-reuse.c). */
void sg_rw_keep_last (const Ctx *x, int32_t n);

/* The users of replaced nodes redirected to their replacements
 * (rewrite-redirect.c): rw->touched and rw->t_in, x->tix. */
void sg_rw_redirect_users (Ctx *x);

/* The nodes in @order (@n of them: every kept node), inputs, edges and
 * the output renumbered, into @out; where every node of the rewrite went
 * into rw->result_id (rewrite-layout.c). */
void sg_rw_lay_out (const Ctx *x, const SgNodeId *order, int32_t n, GArray *edges,
                    SgRewriteLayout *out);
