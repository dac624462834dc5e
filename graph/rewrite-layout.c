/* rewrite-layout.c: a rewritten graph's nodes laid out in the order
 * rewrite-order.c found (sg_rw_lay_out): every kept node copied with its
 * inputs renumbered, a touched node with its new inputs and re-indexed
 * args, the implicit edges and the output renumbered, and where every
 * node of the rewrite went (rw->result_id).
 * A trial after another of the same rewrite keeps what the last trial
 * graph laid out before the first window of its order (the places
 * sg_rw_order_all copied from the last order), when that graph's arrays
 * came back as the spares: there the nodes, their inputs and numbering
 * are the last ones; only nodes that are not untouched base nodes in
 * both layouts (added nodes, whose costs the trial's user writes; users
 * whose args were re-indexed) and the bytes the stash wrote over are
 * copied again. With rw->verify every such layout is checked against a
 * fresh copy. From LAY_OUT_PARALLEL nodes the numbering and the copy go
 * in ranges on the rewrite's pool. docs/ir.md "Speed".
 * Requires: the order of rewrite-order.c (every kept node once, inputs
 * first). Invalidates: nothing.
 */
#include "rewrite-order.h"

#include <string.h>

/* Below this many nodes a layout copies and numbers them on the calling
 * thread; the numbering goes in ranges of this many. */
#define LAY_OUT_PARALLEL 16384

/* lay_out's copy of the nodes @order[lo .. hi), their inputs renumbered
 * from @at on in @dst; the count of those inputs when @dst is NULL. */
static uint32_t
copy_nodes (const Ctx *x, const SgNodeId *order, int32_t lo, int32_t hi, SgNode *nodes,
            SgNodeId *dst, uint32_t at)
{
  const SgRewrite *rw = x->rw;
  const SgGraph *g = x->g;
  const int32_t n0 = x->n0;
  const SgNodeId *new_id = rw->result_id;
  uint32_t count = 0;
  for (int32_t i = lo; i < hi; i++) {
    SgNodeId v = order[i];
    const SgNode *src = v < n0 ? &g->nodes[v] : &g_array_index (rw->nodes, SgNode, v - n0);
    uint32_t k = src->n_in; /* an untouched base node: its own inputs */
    const SgNodeId *in = x->plain[v] ? &g_array_index (g->inputs, SgNodeId, src->in_first)
                                     : new_inputs (x, v, &k);
    if (!dst) {
      count += k;
      continue;
    }
    SgNode *node = &nodes[i];
    memcpy (node, src, sizeof *node);
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
  return dst ? at : count;
}

/* The copy in chunks on the rewrite's pool: each chunk's input count,
 * then each chunk copied from where the ones before it end. */
typedef struct {
  const Ctx *x;
  const SgNodeId *order;
  int32_t n, n_chunks;
  SgNode *nodes;
  SgNodeId *dst; /* NULL: counting */
  uint32_t *at;  /* per chunk: its inputs' count, then where they start */
} Copy;

static void
copy_task (gpointer data, int32_t c, int32_t worker)
{
  (void)worker;
  Copy *cp = data;
  int32_t lo = (int32_t)((int64_t)cp->n * c / cp->n_chunks);
  int32_t hi = (int32_t)((int64_t)cp->n * (c + 1) / cp->n_chunks);
  uint32_t r = copy_nodes (cp->x, cp->order, lo, hi, cp->nodes, cp->dst, cp->dst ? cp->at[c] : 0);
  if (!cp->dst)
    cp->at[c] = r;
}

/* new_id[order[from + i]] = from + i for the range of task @r (the order
 * is a permutation of the kept nodes: tasks write disjoint entries). */
typedef struct {
  const SgNodeId *order;
  SgNodeId *new_id;
  int32_t from, n;
} Number;

static void
number_task (gpointer data, int32_t r, int32_t worker)
{
  (void)worker;
  const Number *a = data;
  int32_t lo, hi;
  sg_range_of (r, LAY_OUT_PARALLEL, a->n, &lo, &hi);
  const SgNodeId *order = a->order;
  SgNodeId *new_id = a->new_id;
  for (int32_t i = a->from + lo, end = a->from + hi; i < end; i++)
    new_id[order[i]] = i;
}

/* Whether base node @v of the same prefix is as the last layout laid it
 * out: untouched then and now, or touched both times without re-indexed
 * args (outside the windows its new inputs are the same,
 * changed_items). Its inputs are then at the same places and its cost is
 * its own, which a trial's users write only where there is none
 * (rw->base_costed). */
static inline bool
as_laid (const Ctx *x, const int32_t *ltix, SgNodeId v)
{
  int32_t a = x->tix[v], b = ltix[v]; /* @v is kept: plain unless touched */
  if (a < 0 || b < 0)
    return a < 0 && b < 0;
  return !g_array_index (x->rw->touched, Touched, a).reindexed
         && !g_array_index (x->rw->last_touched, Touched, b).reindexed;
}

/* Places [@lo, @hi) of the same prefix: added nodes and base nodes not
 * as_laid copied again where the last layout had them (their inputs are
 * the same, so the same count before them). */
static void
refresh_prefix (const Ctx *x, const SgNodeId *order, int32_t lo, int32_t hi, SgNode *nodes,
                SgNodeId *dst)
{
  const int32_t *ltix = x->rw->work[SG_RW_LAST_TIX];
  const int32_t n0 = x->n0;
  for (int32_t i = lo; i < hi; i++) {
    SgNodeId v = order[i];
    if (v < n0 && as_laid (x, ltix, v))
      continue;
    uint32_t at = nodes[i].in_first, k = nodes[i].n_in;
    uint32_t end = copy_nodes (x, order, i, i + 1, nodes, dst, at);
    g_assert (end == at + k);
  }
}

typedef struct {
  const Ctx *x;
  const SgNodeId *order;
  int32_t from, n;
  SgNode *nodes;
  SgNodeId *dst;
} Refresh;

static void
refresh_task (gpointer data, int32_t r, int32_t worker)
{
  (void)worker;
  const Refresh *a = data;
  int32_t lo, hi;
  sg_range_of (r, LAY_OUT_PARALLEL, a->n, &lo, &hi);
  refresh_prefix (a->x, a->order, a->from + lo, a->from + hi, a->nodes, a->dst);
}

/* Every base node of the rewrite's graph has its cost (computed once). */
static bool
base_costed (SgRewrite *rw)
{
  if (rw->base_costed == 0) {
    rw->base_costed = 1;
    for (SgNodeId v = 0; v < rw->n0 && rw->base_costed > 0; v++)
      if (rw->g->nodes[v].est_src == SG_COST_NONE)
        rw->base_costed = -1;
  }
  return rw->base_costed > 0;
}

/* The places from 0 whose nodes, inputs and numbering the last layout
 * left in @nodes, @dst and @new_id as this one would write them, but for
 * nodes not as laid (refresh_prefix) and the stash's bytes: the order's same
 * prefix, when the spare arrays are the last layout's trial graph's and
 * the numbering stayed (@ids_kept). */
static int32_t
laid_prefix (const Ctx *x, bool spares, bool ids_kept)
{
  if (!spares || !ids_kept || x->same_prefix == 0 || !base_costed (x->rw))
    return 0;
  return x->same_prefix;
}

/* The numbering of the places from @p on, and of the added nodes that
 * moved ids in the same prefix (the last layout's from x->map_from on),
 * into @new_id: the rest of the prefix is numbered as the last layout
 * numbered it. */
static void
number_from (const Ctx *x, const SgNodeId *order, int32_t n, int32_t p, SgNodeId *new_id)
{
  SgRewrite *rw = x->rw;
  if (p > 0 && x->map_from != G_MAXINT32) {
    int32_t last_n1 = x->n0 + rw->last_added, m = 0;
    SgNodeId *moved = WORK (rw, SG_RW_FILL, SgNodeId, MAX (last_n1 - x->map_from, 0));
    for (SgNodeId u = x->map_from; u < last_n1; u++)
      if (new_id[u] != SG_NO_NODE && new_id[u] < p)
        moved[m++] = new_id[u];
    for (int32_t i = 0; i < m; i++)
      new_id[order[moved[i]]] = moved[i];
  }
  Number num = { order, new_id, p, n - p };
  int32_t threads = sg_pool_size (rw->pool);
  sg_pool_run (threads > 1 ? rw->pool : NULL, sg_ranges (n - p, LAY_OUT_PARALLEL), number_task,
               &num);
}

/* With rw->verify: the layout that reused the last one's prefix is the
 * one copied afresh. */
static void
check_laid (const Ctx *x, const SgNodeId *order, int32_t n, int32_t p, const SgRewriteLayout *out)
{
  g_autofree SgNode *nodes = g_new (SgNode, (size_t)MAX (n, 1));
  guint len = out->inputs->len;
  g_autofree SgNodeId *dst = g_new (SgNodeId, (size_t)len + 1);
  uint32_t at = copy_nodes (x, order, 0, n, nodes, dst, 0);
  if (at != len || memcmp (nodes, out->nodes, sizeof (SgNode) * (size_t)n) != 0
      || memcmp (dst, out->inputs->data, sizeof (SgNodeId) * len) != 0)
    g_error ("rewrite: the layout reusing the last one's first %d nodes differs from a fresh "
             "copy", p);
}

/* Nodes in @order, inputs and edges renumbered, into @out; where every
 * node of the rewrite went into rw->result_id (sg_rewrite_result_id).
 * The places of the order's same prefix keep what the last layout wrote
 * there when its trial graph's arrays come back as the spares
 * (laid_prefix): only its nodes that are not as laid are copied again. */
void
sg_rw_lay_out (const Ctx *x, const SgNodeId *order, int32_t n, GArray *edges, SgRewriteLayout *out)
{
  SgRewrite *rw = x->rw;
  SgGraph *g = x->g;
  int32_t n1 = x->n1;
  /* @order holds every kept node */
  size_t ids_size = rw->work_size[SG_RW_NEW_ID];
  SgNodeId *new_id = rw->result_id = WORK (rw, SG_RW_NEW_ID, SgNodeId, n1);
  bool ids_kept = rw->work_size[SG_RW_NEW_ID] == ids_size; /* the last layout's */
  int32_t threads = sg_pool_size (rw->pool);
  bool spares = rw->spare_last && rw->spare_nodes && rw->spare_cap >= n && rw->spare_inputs;
  rw->spare_last = false;
  out->n = n;
  if (rw->spare_nodes && rw->spare_cap >= n) {
    out->nodes = g_steal_pointer (&rw->spare_nodes);
    out->nodes_cap = rw->spare_cap;
  } else {
    /* A spare too small goes first: a large graph's node arrays never
     * coexist. The next trials may grow by a few nodes: some room for
     * them, untouched (not resident) until used. */
    g_clear_pointer (&rw->spare_nodes, g_free);
    out->nodes_cap = MAX (n, 1) + n / 64;
    out->nodes = g_new (SgNode, (size_t)out->nodes_cap);
  }
  int32_t p = laid_prefix (x, spares, ids_kept);
  int32_t stashed = (int32_t)MIN ((rw->spare_stashed + sizeof (SgNode) - 1) / sizeof (SgNode),
                                  (size_t)p);
  rw->spare_stashed = 0;
  number_from (x, order, n, p, new_id);
  for (guint i = 0; i < rw->removed->len; i++)
    new_id[g_array_index (rw->removed, SgNodeId, i)] = SG_NO_NODE;
  rw->result_n = n1;
  /* Room for every input there may be; trimmed below. */
  guint bound = g->inputs->len + rw->inputs->len + rw->t_in->len;
  out->inputs = rw->spare_inputs ? g_steal_pointer (&rw->spare_inputs)
                                 : g_array_new (FALSE, FALSE, sizeof (SgNodeId));
  g_array_set_size (out->inputs, bound);
  SgNodeId *dst = (SgNodeId *)(void *)out->inputs->data;
  uint32_t at = 0;
  if (p > 0) {
    /* the stash's places afresh, the rest of the prefix where it differs */
    at = copy_nodes (x, order, 0, stashed, out->nodes, dst, 0);
    g_assert (stashed == p || at == out->nodes[stashed].in_first);
    Refresh rf = { x, order, stashed, p - stashed, out->nodes, dst };
    sg_pool_run (threads > 1 && p - stashed >= LAY_OUT_PARALLEL ? rw->pool : NULL,
                 sg_ranges (p - stashed, LAY_OUT_PARALLEL), refresh_task, &rf);
    at = out->nodes[p - 1].in_first + out->nodes[p - 1].n_in;
  }
  if (threads > 1 && n - p >= LAY_OUT_PARALLEL) {
    Copy cp = { x, order + p, n - p, MIN (4 * threads, (n - p) / 1024), out->nodes + p, NULL,
                NULL };
    g_autofree uint32_t *starts = g_new (uint32_t, (size_t)cp.n_chunks);
    cp.at = starts;
    sg_pool_run (rw->pool, cp.n_chunks, copy_task, &cp);
    for (int32_t c = 0; c < cp.n_chunks; c++) {
      uint32_t k = starts[c];
      starts[c] = at;
      at += k;
    }
    cp.dst = dst;
    sg_pool_run (rw->pool, cp.n_chunks, copy_task, &cp);
  } else {
    at = copy_nodes (x, order + p, 0, n - p, out->nodes + p, dst, at);
  }
  g_array_set_size (out->inputs, at);
  if (rw->verify && p > 0)
    check_laid (x, order, n, p, out);
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
  rw->same_prefix = x->same_prefix;
  rw->laid_kept = p;
}
