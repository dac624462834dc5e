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
 * their maximum. O(n + edges) with a difference array: in the id order
 * (no positions: the bucket trials' judge) in one reverse pass, storages
 * entering the array where the pass reaches their roots; on a pool of four
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

/* The liveness in one pass over the nodes, or in ranges of them on a
 * pool (SgLiveScratch.pool), step by step, exactly: every result is an
 * integer minimum, maximum or sum, the same in any grouping. The waits'
 * and the storages' first positions are minima over nodes, the last uses
 * maxima over users, the allocations and frees sums into delta; the peak
 * is the largest prefix sum of delta, made per range (its sum and its
 * largest prefix) and combined in order. Each rule is written once, for
 * both: in ranges (@shared), its updates are atomic (a compare-and-swap,
 * an atomic add). */
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
  int32_t *last, *wait_at;
  int32_t *start; /* NULL: not wanted */
  int64_t *delta;
  LiveRange *ranges;
  LiveStep step;
  int32_t n, size; /* the graph's nodes, a range's */
} LiveJob;

#define LIVE_CAP ((uint64_t)1 << 62)
/* The fewest nodes a range of the liveness has, and the fewest threads
 * its ranges run on: they do about twice the sequential work (atomic
 * updates, five passes over the nodes). */
#define LIVE_RANGE_MIN 4096
#define LIVE_MIN_THREADS 4

/* *@at = MIN (*@at, @v), as unsigned (-1, none, above every position). */
G_ALWAYS_INLINE static inline void
lower_to (int32_t *at, int32_t v, bool shared)
{
  if (!shared) {
    if ((uint32_t)v < (uint32_t)*at)
      *at = v;
    return;
  }
  gint cur = g_atomic_int_get ((gint *)at);
  while ((uint32_t)v < (uint32_t)cur && !g_atomic_int_compare_and_exchange ((gint *)at, cur, v))
    cur = g_atomic_int_get ((gint *)at);
}

/* *@at = MAX (*@at, @v). */
G_ALWAYS_INLINE static inline void
raise_to (int32_t *at, int32_t v, bool shared)
{
  if (!shared) {
    if (v > *at)
      *at = v;
    return;
  }
  gint cur = g_atomic_int_get ((gint *)at);
  while (v > cur && !g_atomic_int_compare_and_exchange ((gint *)at, cur, v))
    cur = g_atomic_int_get ((gint *)at);
}

G_ALWAYS_INLINE static inline void
add_to (int64_t *at, int64_t v, bool shared)
{
  if (shared)
    __atomic_fetch_add (at, v, __ATOMIC_RELAXED);
  else
    *at += v;
}

/* Nodes [@a, @b) before the other steps: each storage used, and started
 * (into @start, or NULL), where its producer runs; no collective waited
 * for. */
G_ALWAYS_INLINE static inline void
live_init (const int32_t *pos, int32_t *last, int32_t *wait_at, int32_t *start, int32_t a,
           int32_t b)
{
  for (SgNodeId i = a; i < b; i++) {
    last[i] = pos ? pos[i] : i;
    wait_at[i] = -1;
  }
  if (start && pos)
    memcpy (start + a, pos + a, sizeof (int32_t) * (size_t)(b - a));
  for (SgNodeId i = a; start && !pos && i < b; i++)
    start[i] = i;
}

/* Node @u's firsts: a collective's first wait's position (a collective's
 * uses end at its wait when it has one; a coalesced collective ends as a
 * whole, at the first wait on any element, where codegen waits for it),
 * and, into @start (or NULL), a storage's first producer's (a storage
 * shared by several producers, a relocation, starts with the first of
 * them). */
G_ALWAYS_INLINE static inline void
live_first (const SgGraph *g, const int32_t *pos, const SgNodeId *root, int32_t *wait_at,
            int32_t *start, SgNodeId u, bool shared)
{
  const SgNodeId c = sg_node_wait_target (g, u);
  if (c != SG_NO_NODE)
    lower_to (&wait_at[c], pos ? pos[u] : u, shared);
  if (start && root[u] != u && !sg_op_is_alias (g->nodes[u].kind))
    lower_to (&start[root[u]], pos ? pos[u] : u, shared);
}

/* Node @u's uses (its waits' positions final): its inputs' storages live
 * until it runs or, for a collective, until its wait; until the end for
 * the output node's. */
G_ALWAYS_INLINE static inline void
live_uses (const SgGraph *g, const int32_t *pos, const SgNodeId *root, const int32_t *wait_at,
           int32_t *last, SgNodeId u, bool shared)
{
  uint32_t k;
  const SgNodeId *in = sg_node_inputs (g, u, &k);
  const int32_t t = g->nodes[u].op == SG_NODE_OUTPUT ? g->n_nodes - 1
                                                     : MAX (pos ? pos[u] : u, wait_at[u]);
  for (uint32_t j = 0; j < k; j++)
    raise_to (&last[root[in[j]]], t, shared);
}

/* The storages of roots [@a, @b) into delta (delta[t]: bytes allocated at
 * t minus bytes freed after t - 1) and their bytes into @out; stops with
 * @out->over at a storage above LIVE_CAP or a total above it (every
 * partial sum is bounded by the total, which the validator keeps below
 * 2^62). */
G_ALWAYS_INLINE static inline void
live_delta (const LiveJob *L, int32_t a, int32_t b, LiveRange *out, bool shared)
{
  const SgNode *nodes = L->g->nodes;
  const SgNodeId *root = L->root;
  const uint64_t *alloc = L->alloc;
  const int32_t *start = L->start, *last = L->last;
  int64_t *delta = L->delta;
  uint64_t total = 0;
  *out = (LiveRange){ 0 };
  for (SgNodeId i = a; i < b; i++) {
    if (root[i] != i)
      continue;
    const uint64_t bytes = alloc[i];
    if (!bytes)
      continue;
    if (bytes > LIVE_CAP || (total += bytes) > LIVE_CAP) {
      out->over = true;
      return;
    }
    SgNodeOp op = nodes[i].op;
    bool input = op == SG_NODE_PLACEHOLDER || op == SG_NODE_GET_ATTR;
    add_to (&delta[input ? 0 : start[i]], (int64_t)bytes, shared);
    add_to (&delta[last[i] + 1], -(int64_t)bytes, shared);
  }
  out->total = total;
}

/* Delta's sum over [@a, @b) and its largest prefix (at least 0) into
 * @out, the live bytes at each position into @profile (a range from 0, or
 * NULL); delta read is cleared. */
static void
live_scan (const LiveJob *L, int32_t a, int32_t b, uint64_t *profile, LiveRange *out)
{
  int64_t *delta = L->delta, live = 0, best = 0;
  for (int32_t t = a; t < b; t++) {
    live += delta[t];
    delta[t] = 0;
    if (profile)
      profile[t] = (uint64_t)live;
    if (live > best)
      best = live;
  }
  out->sum = live, out->best = best;
}

/* The last uses (and the waits, and the starts when wanted) in one pass:
 * in reverse id order (ids are topological: a wait comes after its
 * collective), a node's waits are all seen before its uses. */
static void
last_use_in (const SgGraph *g, const int32_t *pos, const SgNodeId *root, int32_t *last,
             int32_t *wait_at, int32_t *start)
{
  const int32_t n = g->n_nodes;
  live_init (pos, last, wait_at, start, 0, n);
  for (SgNodeId u = n - 1; u >= 0; u--) {
    live_first (g, pos, root, wait_at, start, u, false);
    live_uses (g, pos, root, wait_at, last, u, false);
  }
}

/* The liveness of the id order (every node at its id) in one pass, in
 * reverse id order: a node's waits and users come after it, and so do the
 * other producers of its storage (what a node resolves to has a lower id:
 * elide-passes.c), so when the pass reaches a root every use of its
 * storage has been seen and its bytes go into delta there, from the root
 * itself (its first producer) to its last use. @last and @wait_at start at
 * -1 (none): a storage ends at its root, a use at its node, when nothing
 * later holds them; the pass sets each back to -1 where it reads it last
 * (@w->ids_clean: none to clear before the next one). Stops with
 * @out->over as live_delta does (the total bounds every partial sum in
 * either order). */
static void
live_id_order (const LiveJob *L, SgLiveScratch *w, LiveRange *out)
{
  const SgGraph *g = L->g;
  const SgNode *nodes = g->nodes;
  const SgNodeId *root = L->root;
  const uint64_t *alloc = L->alloc;
  int32_t *last = L->last, *wait_at = L->wait_at;
  int64_t *delta = L->delta;
  const int32_t n = L->n;
  if (!w->ids_clean) {
    memset (last, 0xff, sizeof (int32_t) * w->cap);
    memset (wait_at, 0xff, sizeof (int32_t) * w->cap);
  }
  w->ids_clean = false; /* until the pass ends */
  uint64_t total = 0;
  *out = (LiveRange){ 0 };
  const SgNodeId *inputs = (const SgNodeId *)(const void *)g->inputs->data;
  for (SgNodeId u = n - 1; u >= 0; u--) {
    const SgNode *nd = &nodes[u];
    const uint32_t k = nd->n_in;
    const SgNodeId *in = k > 0 ? inputs + nd->in_first : NULL;
    if (nd->kind == SG_OP_WAIT && k > 0) {
      const SgNodeId c = sg_node_wait_target (g, u);
      wait_at[c] = u; /* going down: the first wait is the last seen */
    }
    const SgNodeOp op = nd->op;
    const int32_t t = op == SG_NODE_OUTPUT ? n - 1 : MAX (u, wait_at[u]);
    wait_at[u] = -1;
    for (uint32_t j = 0; j < k; j++)
      raise_to (&last[root[in[j]]], t, false);
    if (root[u] != u) {
      g_assert (root[u] < u);
      continue;
    }
    const int32_t end = MAX (last[u], u);
    last[u] = -1;
    const uint64_t bytes = alloc[u];
    if (!bytes)
      continue;
    if (bytes > LIVE_CAP || (total += bytes) > LIVE_CAP) {
      out->over = true;
      return;
    }
    const bool input = op == SG_NODE_PLACEHOLDER || op == SG_NODE_GET_ATTR;
    delta[input ? 0 : u] += (int64_t)bytes;
    delta[end + 1] -= (int64_t)bytes;
  }
  w->ids_clean = true;
  out->total = total;
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
  w->ids_clean = false;
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
  w->ids_clean = false;
}

/* --- the liveness in ranges on a pool --------------------------------------------- */

static void
live_task (gpointer data, int32_t task, int32_t worker)
{
  (void)worker;
  const LiveJob *L = data;
  int32_t a, b;
  sg_range_of (task, L->size, L->n, &a, &b);
  LiveRange *out = &L->ranges[task];
  switch (L->step) {
  case LIVE_INIT:
    live_init (L->pos, L->last, L->wait_at, L->start, a, b);
    break;
  case LIVE_FIRSTS:
    for (SgNodeId u = a; u < b; u++)
      live_first (L->g, L->pos, L->root, L->wait_at, L->start, u, true);
    break;
  case LIVE_LASTS:
    for (SgNodeId u = a; u < b; u++)
      live_uses (L->g, L->pos, L->root, L->wait_at, L->last, u, true);
    break;
  case LIVE_DELTA:
    live_delta (L, a, b, out, true);
    break;
  case LIVE_SCAN:
    live_scan (L, a, b, NULL, out);
    break;
  }
}

/* Whether @L's storages are over the cap (one above LIVE_CAP bytes, or
 * all of them together), from its @n_ranges ranges' totals in order: then
 * delta is cleared and @profile (or NULL) filled with G_MAXUINT64. */
static bool
live_over (const LiveJob *L, int32_t n_ranges, uint64_t *profile)
{
  const int32_t n = L->n;
  uint64_t total = 0;
  for (int32_t r = 0; r < n_ranges; r++) {
    const LiveRange *o = &L->ranges[r];
    if (o->over || (total += o->total) > LIVE_CAP) {
      memset (L->delta, 0, sizeof (int64_t) * ((size_t)n + 1));
      for (int32_t t = 0; profile && t < n; t++)
        profile[t] = G_MAXUINT64;
      return true;
    }
  }
  return false;
}

uint64_t
sg_graph_liveness_in (const SgGraph *g, const int32_t *pos, uint64_t *profile,
                      const SgNodeId *root, const uint64_t *alloc, SgLiveScratch *w)
{
  g_return_val_if_fail (g != NULL && root && alloc && w, 0);
  const int32_t n = g->n_nodes;
  if (n <= 0)
    return 0;
  scratch_reserve (w, (size_t)n);
  const bool ranges = !profile && sg_pool_size (w->pool) >= LIVE_MIN_THREADS
                      && n >= 2 * LIVE_RANGE_MIN;
  LiveJob L = { g, pos, root, alloc, w->last, w->wait_at, w->start, w->delta, NULL, LIVE_INIT,
                n, ranges ? sg_pool_range_size (w->pool, n, LIVE_RANGE_MIN) : n };
  const int32_t n_ranges = sg_ranges (n, L.size);
  if ((size_t)n_ranges > w->cap_ranges) {
    w->cap_ranges = MAX ((size_t)n_ranges, 2 * w->cap_ranges);
    w->ranges = g_renew (LiveRange, w->ranges, w->cap_ranges);
  }
  L.ranges = w->ranges;
  if (n_ranges > 1) {
    w->ids_clean = false;
    for (L.step = LIVE_INIT; L.step <= LIVE_DELTA; L.step++)
      sg_pool_run (w->pool, n_ranges, live_task, &L);
  } else if (!pos) {
    live_id_order (&L, w, &L.ranges[0]);
  } else {
    w->ids_clean = false;
    last_use_in (g, pos, root, L.last, L.wait_at, L.start);
    live_delta (&L, 0, n, &L.ranges[0], false);
  }
  if (live_over (&L, n_ranges, profile))
    return G_MAXUINT64;
  L.step = LIVE_SCAN;
  if (n_ranges > 1)
    sg_pool_run (w->pool, n_ranges, live_task, &L);
  else
    live_scan (&L, 0, n, profile, &L.ranges[0]);
  int64_t live = 0, peak = 0;
  for (int32_t r = 0; r < n_ranges; r++) {
    const LiveRange *o = &L.ranges[r];
    if (live + o->best > peak)
      peak = live + o->best;
    live += o->sum;
  }
  L.delta[n] = 0;
  return (uint64_t)peak;
}

uint64_t
sg_graph_liveness (const SgGraph *g, const int32_t *pos, uint64_t *profile, const SgNodeId *roots,
                   const uint64_t *alloc)
{
  g_return_val_if_fail (g != NULL, 0);
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
