/* liveness.c: peak live tensor bytes of an order (sg_graph_peak_bytes).
 *
 * Mirrors the liveness rule of Inductor's memory estimator
 * (torch/_inductor/memory.py): every storage is allocated by the node that
 * produces it and freed after its last use, where uses reach through
 * aliases (views, getitem, wait_tensor share their root's storage).
 * Two refinements for a training step:
 *  - placeholders and get_attr values exist before the step starts, and
 *    values the output node returns exist after it ends;
 *  - a collective runs asynchronously until its wait_tensor, so a use by a
 *    collective lasts until that wait (its input cannot be freed earlier);
 *    a coalesced one until the first wait on any of its elements.
 * Zero-copy copies (elide.c) share storage too: an elided unpack is an
 * alias of the bucket's result, an elided pack or cat of the storage its
 * inputs already form, a rank_roll lowered to views of its input's blocks
 * an alias of that input, and the inputs relocated into an elided pack's,
 * cat's or rank_roll's buffer are one storage of its bytes, allocated
 * with its lowest-id input.
 * Live bytes at step t are the storages with start <= t <= end; the peak is
 * their maximum. O(n + edges) with a difference array; on a pool of four
 * threads or more (SgLiveScratch.pool) in ranges of nodes, exactly (integer
 * minima, maxima and sums, the same in any grouping). schedule/ calls
 * sg_graph_liveness() with cached roots and sizes and a per-step profile. Graphs whose
 * tensors total more than 2^62 bytes (the validator rejects them) give
 * G_MAXUINT64.
 *
 * Requires: nothing. Invalidates: nothing.
 */
#include "graph.h"

#include <string.h>

SgNodeId *
sg_graph_storage_roots (const SgGraph *g)
{
  SgElision e;
  sg_graph_elision (g, &e);
  SgNodeId *root = e.root;
  e.root = NULL;
  sg_elision_clear (&e);
  return root;
}

/* sg_graph_last_use with @wait_at (n_nodes entries) as its working array:
 * the first wait's position per collective, -1 for none. With @start
 * (n_nodes entries, may be NULL), also each storage's first producer's
 * position (a storage shared by several producers, a relocation, starts
 * with the first of them), meaningful for roots. */
static void
last_use_in (const SgGraph *g, const int32_t *pos, const SgNodeId *root, int32_t *last,
             int32_t *wait_at, int32_t *start)
{
  int32_t n = g->n_nodes;
  /* A collective's uses end at its wait, when it has one; a coalesced
   * collective ends as a whole, at the first wait on any element (where
   * codegen waits for it). */
  for (SgNodeId i = 0; i < n; i++) {
    last[i] = pos[i];
    wait_at[i] = -1;
  }
  if (start)
    memcpy (start, pos, sizeof (int32_t) * (size_t)n);
  /* In reverse id order (ids are topological: a wait comes after its
   * collective), a node's waits are all seen before the node. */
  for (SgNodeId u = n - 1; u >= 0; u--) {
    SgNodeId c = sg_node_wait_target (g, u);
    if (c != SG_NO_NODE && (wait_at[c] < 0 || pos[u] < wait_at[c]))
      wait_at[c] = pos[u];
    const SgNode *nd = &g->nodes[u];
    if (start && root[u] != u && !sg_op_is_alias (nd->kind) && pos[u] < start[root[u]])
      start[root[u]] = pos[u];
    uint32_t k;
    const SgNodeId *in = sg_node_inputs (g, u, &k);
    int32_t t = nd->op == SG_NODE_OUTPUT ? n - 1 : MAX (pos[u], wait_at[u]);
    for (uint32_t j = 0; j < k; j++) {
      SgNodeId r = root[in[j]];
      if (t > last[r])
        last[r] = t;
    }
  }
}

void
sg_graph_last_use (const SgGraph *g, const int32_t *pos, const SgNodeId *root, int32_t *last)
{
  g_autofree int32_t *wait_at = g_new (int32_t, (size_t)MAX (g->n_nodes, 1));
  last_use_in (g, pos, root, last, wait_at, NULL);
}

static void
scratch_reserve (SgLiveScratch *w, size_t n)
{
  if (n <= w->cap)
    return;
  w->cap = MAX (n, w->cap + w->cap / 2);
  w->last = g_renew (int32_t, w->last, w->cap);
  w->start = g_renew (int32_t, w->start, w->cap);
  w->wait_at = g_renew (int32_t, w->wait_at, w->cap);
  g_free (w->delta);
  w->delta = g_new0 (int64_t, w->cap + 1); /* zero between calls */
}

void
sg_live_scratch_clear (SgLiveScratch *w)
{
  g_clear_pointer (&w->last, g_free);
  g_clear_pointer (&w->start, g_free);
  g_clear_pointer (&w->wait_at, g_free);
  g_clear_pointer (&w->delta, g_free);
  g_clear_pointer (&w->ranges, g_free);
  w->cap = w->cap_ranges = 0;
}

/* --- the liveness in ranges on a pool --------------------------------------------- */

/* sg_graph_liveness_in split into ranges of nodes (a pool's tasks), step
 * by step, exactly: every result is an integer minimum, maximum or sum,
 * the same in any grouping. The waits' and the storages' first positions
 * are minima over nodes, the last uses maxima over users (each written
 * with an atomic compare-and-swap), the allocations and frees sums into
 * delta (atomic adds); the peak is the largest prefix sum of delta, made
 * per range (its sum and its largest prefix) and combined in order. */
typedef enum { LIVE_INIT, LIVE_FIRSTS, LIVE_LASTS, LIVE_DELTA, LIVE_SCAN } LiveStep;

typedef struct SgLiveRange {
  int64_t sum, best; /* LIVE_SCAN: delta's sum over the range, its largest prefix */
  uint64_t total;    /* LIVE_DELTA: the range's storage bytes, capped */
  bool over;         /* LIVE_DELTA: a storage above 2^62 bytes, or the cap */
} LiveRange;

typedef struct {
  const SgGraph *g;
  const int32_t *pos;
  const SgNodeId *root;
  const uint64_t *alloc;
  SgLiveScratch *w;
  LiveStep step;
  int32_t size;
} LiveJob;

#define LIVE_CAP ((uint64_t)1 << 62)
/* The fewest nodes a range of the liveness has, and the fewest threads
 * its ranges run on: they do about twice the sequential work (atomic
 * updates, five passes over the nodes). */
#define LIVE_RANGE_MIN 4096
#define LIVE_MIN_THREADS 4

static inline void
atomic_min_int (int32_t *at, int32_t v)
{
  gint cur = g_atomic_int_get ((gint *)at);
  while (v < cur && !g_atomic_int_compare_and_exchange ((gint *)at, cur, v))
    cur = g_atomic_int_get ((gint *)at);
}

static inline void
atomic_max_int (int32_t *at, int32_t v)
{
  gint cur = g_atomic_int_get ((gint *)at);
  while (v > cur && !g_atomic_int_compare_and_exchange ((gint *)at, cur, v))
    cur = g_atomic_int_get ((gint *)at);
}

/* last_use_in's first loop and its waits and starts, over [@a, @b). */
static void
live_firsts (const LiveJob *L, int32_t a, int32_t b)
{
  const SgGraph *g = L->g;
  SgLiveScratch *w = L->w;
  for (SgNodeId u = a; u < b; u++) {
    SgNodeId c = sg_node_wait_target (g, u);
    if (c != SG_NO_NODE) {
      /* -1 (none) as the largest */
      gint *at = (gint *)&w->wait_at[c], cur = g_atomic_int_get (at), v = L->pos[u];
      while ((cur < 0 || v < cur) && !g_atomic_int_compare_and_exchange (at, cur, v))
        cur = g_atomic_int_get (at);
    }
    const SgNodeId r = L->root[u];
    if (r != u && !sg_op_is_alias (g->nodes[u].kind))
      atomic_min_int (&w->start[r], L->pos[u]);
  }
}

static void
live_lasts (const LiveJob *L, int32_t a, int32_t b)
{
  const SgGraph *g = L->g;
  const int32_t n = g->n_nodes;
  for (SgNodeId u = a; u < b; u++) {
    uint32_t k;
    const SgNodeId *in = sg_node_inputs (g, u, &k);
    const int32_t t = g->nodes[u].op == SG_NODE_OUTPUT ? n - 1 : MAX (L->pos[u], L->w->wait_at[u]);
    for (uint32_t j = 0; j < k; j++)
      atomic_max_int (&L->w->last[L->root[in[j]]], t);
  }
}

static void
live_delta (const LiveJob *L, int32_t a, int32_t b, LiveRange *out)
{
  const SgGraph *g = L->g;
  SgLiveScratch *w = L->w;
  for (SgNodeId i = a; i < b; i++) {
    if (L->root[i] != i)
      continue;
    const uint64_t bytes = L->alloc[i];
    if (!bytes)
      continue;
    if (bytes > LIVE_CAP || (out->total += bytes) > LIVE_CAP) {
      out->over = true;
      return;
    }
    SgNodeOp op = g->nodes[i].op;
    bool input = op == SG_NODE_PLACEHOLDER || op == SG_NODE_GET_ATTR;
    __atomic_fetch_add (&w->delta[input ? 0 : w->start[i]], (int64_t)bytes, __ATOMIC_RELAXED);
    __atomic_fetch_add (&w->delta[w->last[i] + 1], -(int64_t)bytes, __ATOMIC_RELAXED);
  }
}

static void
live_task (gpointer data, int32_t task, int32_t worker)
{
  (void)worker;
  const LiveJob *L = data;
  SgLiveScratch *w = L->w;
  int32_t a, b;
  sg_range_of (task, L->size, L->g->n_nodes, &a, &b);
  LiveRange *out = &w->ranges[task];
  switch (L->step) {
  case LIVE_INIT:
    for (SgNodeId i = a; i < b; i++) {
      w->last[i] = w->start[i] = L->pos[i];
      w->wait_at[i] = -1;
    }
    break;
  case LIVE_FIRSTS:
    live_firsts (L, a, b);
    break;
  case LIVE_LASTS:
    live_lasts (L, a, b);
    break;
  case LIVE_DELTA:
    *out = (LiveRange){ 0 };
    live_delta (L, a, b, out);
    break;
  case LIVE_SCAN: {
    int64_t live = 0, best = 0;
    for (int32_t t = a; t < b; t++) {
      live += w->delta[t];
      w->delta[t] = 0;
      if (live > best)
        best = live;
    }
    out->sum = live, out->best = best;
    break;
  }
  }
}

/* sg_graph_liveness_in without a profile, in ranges on @w's pool. */
static uint64_t
liveness_pooled (const SgGraph *g, const int32_t *pos, const SgNodeId *root,
                 const uint64_t *alloc, SgLiveScratch *w)
{
  const int32_t n = g->n_nodes;
  LiveJob L = { g, pos, root, alloc, w, LIVE_INIT,
                sg_pool_range_size (w->pool, n, LIVE_RANGE_MIN) };
  const int32_t n_ranges = sg_ranges (n, L.size);
  if ((size_t)n_ranges > w->cap_ranges) {
    w->cap_ranges = MAX ((size_t)n_ranges, 2 * w->cap_ranges);
    w->ranges = g_renew (LiveRange, w->ranges, w->cap_ranges);
  }
  for (L.step = LIVE_INIT; L.step <= LIVE_DELTA; L.step++)
    sg_pool_run (w->pool, n_ranges, live_task, &L);
  uint64_t total = 0;
  for (int32_t r = 0; r < n_ranges; r++) {
    const LiveRange *o = &w->ranges[r];
    if (o->over || (total += o->total) > LIVE_CAP) {
      memset (w->delta, 0, sizeof (int64_t) * ((size_t)n + 1));
      return G_MAXUINT64;
    }
  }
  L.step = LIVE_SCAN;
  sg_pool_run (w->pool, n_ranges, live_task, &L);
  int64_t live = 0, peak = 0;
  for (int32_t r = 0; r < n_ranges; r++) {
    const LiveRange *o = &w->ranges[r];
    if (live + o->best > peak)
      peak = live + o->best;
    live += o->sum;
  }
  w->delta[n] = 0;
  return (uint64_t)peak;
}

uint64_t
sg_graph_liveness_in (const SgGraph *g, const int32_t *pos, uint64_t *profile,
                      const SgNodeId *root, const uint64_t *alloc, SgLiveScratch *w)
{
  g_return_val_if_fail (g != NULL && pos != NULL && root && alloc && w, 0);
  int32_t n = g->n_nodes;
  if (n <= 0)
    return 0;
  scratch_reserve (w, (size_t)n);
  if (!profile && sg_pool_size (w->pool) >= LIVE_MIN_THREADS && n >= 2 * LIVE_RANGE_MIN)
    return liveness_pooled (g, pos, root, alloc, w);
  int32_t *last = w->last, *start = w->start;
  last_use_in (g, pos, root, last, w->wait_at, start);

  /* delta[t]: bytes allocated at t minus bytes freed after t - 1. Every
   * partial sum is bounded by the total, which the validator keeps below
   * 2^62; a graph that breaks that bound reports G_MAXUINT64. The scratch
   * keeps delta zero between calls: the sums below clear what they read. */
  int64_t *delta = w->delta;
  uint64_t total = 0;
  for (SgNodeId i = 0; i < n; i++) {
    if (root[i] != i)
      continue;
    uint64_t b = alloc[i];
    if (!b)
      continue;
    if (b > ((uint64_t)1 << 62) || (total += b) > ((uint64_t)1 << 62)) {
      memset (delta, 0, sizeof (int64_t) * ((size_t)n + 1));
      for (int32_t t = 0; profile && t < n; t++)
        profile[t] = G_MAXUINT64;
      return G_MAXUINT64;
    }
    SgNodeOp op = g->nodes[i].op;
    bool input = op == SG_NODE_PLACEHOLDER || op == SG_NODE_GET_ATTR;
    delta[input ? 0 : start[i]] += (int64_t)b;
    delta[last[i] + 1] -= (int64_t)b;
  }
  int64_t live = 0, peak = 0;
  for (int32_t t = 0; t < n; t++) {
    live += delta[t];
    delta[t] = 0;
    if (profile)
      profile[t] = (uint64_t)live;
    if (live > peak)
      peak = live;
  }
  delta[n] = 0;
  return (uint64_t)peak;
}

uint64_t
sg_graph_liveness (const SgGraph *g, const int32_t *pos, uint64_t *profile, const SgNodeId *roots,
                   const uint64_t *alloc)
{
  g_return_val_if_fail (g != NULL && pos != NULL, 0);
  if (g->n_nodes <= 0)
    return 0;
  SgElision e = { 0 };
  if (!roots || !alloc)
    sg_graph_elision (g, &e);
  g_autofree uint64_t *own_alloc = alloc ? NULL : sg_elision_storage_bytes (g, &e, NULL, NULL);
  SgLiveScratch w = { 0 };
  uint64_t peak = sg_graph_liveness_in (g, pos, profile, roots ? roots : e.root,
                                        alloc ? alloc : own_alloc, &w);
  sg_live_scratch_clear (&w);
  sg_elision_clear (&e);
  return peak;
}

uint64_t
sg_graph_peak_bytes (const SgGraph *g, const SgNodeId *order)
{
  g_return_val_if_fail (g != NULL, 0);
  if (g->n_nodes <= 0)
    return 0;
  g_autofree int32_t *pos = g_new (int32_t, (size_t)g->n_nodes);
  for (int32_t t = 0; t < g->n_nodes; t++)
    pos[order ? order[t] : t] = t;
  return sg_graph_liveness (g, pos, NULL, NULL, NULL);
}
