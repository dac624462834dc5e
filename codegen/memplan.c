/* memplan.c: static memory planning: one arena offset per buffer.
 *
 * Two deterministic packings; the smaller arena wins (ties: greedy).
 * 1. Greedy by size (TFLite's ArenaPlanner, XLA's
 *    GlobalDecreasingSizeBestFitHeap): buffers placed offline, largest
 *    first (ties: earlier first use, then id), each at the best-fitting gap
 *    (the smallest that holds it; ties: the lowest offset) among the placed
 *    buffers whose lifetimes overlap its own; else above them. Overlapping
 *    buffers are found through a time index (blocks of BLOCK instructions
 *    listing the placed buffers that touch them). Its cost grows with the
 *    number of long-lived buffers, so it runs only when its work (the
 *    index entries it would visit, greedy_work) is within GREEDY_BUDGET.
 *    That work depends on the lifetimes and the order alone, not on the
 *    offsets, so it is counted first: in O(n log n) (Fenwick trees) plus
 *    the blocks spanned, one of the work's own terms.
 * 2. Online best fit (a heap simulation, like a caching allocator): in
 *    instruction order, best-fit from a coalescing free list, O(n log n).
 * 256-byte aligned. Whole-step buffers (placeholders) go first,
 * contiguously, and are not searched.
 * Requires: buffers' bytes and [first_ins, last_ins].
 * Invalidates: nothing else.
 */
#include "codegen-private.h"

#include <string.h>

#define BLOCK 64
/* Work (greedy_work) above which greedy-by-size is not run and the online
 * result stands: a few tens of ms of packing. */
#define GREEDY_BUDGET ((uint64_t)20 * 1000 * 1000)

typedef struct {
  uint64_t off, end;
} Span;

static int
cmp_by_size (gconstpointer a, gconstpointer b, gpointer data)
{
  const SgPlanBuffer *bufs = data;
  int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
  uint64_t sx = sg_align_up (bufs[x].bytes), sy = sg_align_up (bufs[y].bytes);
  if (sx != sy)
    return sx > sy ? -1 : 1;
  if (bufs[x].first_ins != bufs[y].first_ins)
    return bufs[x].first_ins < bufs[y].first_ins ? -1 : 1;
  return (x > y) - (x < y);
}

static inline bool
span_less (const Span *x, const Span *y)
{
  return x->off != y->off ? x->off < y->off : x->end < y->end;
}

/* Sorts @a by (off, end): the busy spans in offset order. Equal spans are
 * interchangeable, so any sort gives the same sequence; this one inlines
 * the comparison (the greedy sorts once per buffer). */
static void
sort_spans (Span *a, int64_t n)
{
  while (n > 16) {
    /* median of three as the pivot, then Hoare's partition */
    Span *m = &a[n / 2], *z = &a[n - 1];
    Span p = span_less (a, m) ? (span_less (m, z) ? *m : span_less (a, z) ? *z : *a)
                              : (span_less (a, z) ? *a : span_less (m, z) ? *z : *m);
    int64_t i = -1, j = n;
    for (;;) {
      do
        i++;
      while (span_less (&a[i], &p));
      do
        j--;
      while (span_less (&p, &a[j]));
      if (i >= j)
        break;
      Span t = a[i];
      a[i] = a[j];
      a[j] = t;
    }
    /* recurse into the smaller part, loop on the larger */
    if (j + 1 < n - j - 1) {
      sort_spans (a, j + 1);
      a += j + 1;
      n -= j + 1;
    } else {
      sort_spans (a + j + 1, n - j - 1);
      n = j + 1;
    }
  }
  for (int64_t i = 1; i < n; i++) {
    Span t = a[i];
    int64_t j = i;
    for (; j > 0 && span_less (&t, &a[j - 1]); j--)
      a[j] = a[j - 1];
    a[j] = t;
  }
}

/* A growable list of buffer ids (one per time block). */
typedef struct {
  int32_t *ids;
  int32_t n, cap;
} IdList;

static inline void
idlist_push (IdList *l, int32_t id)
{
  if (l->n == l->cap) {
    l->cap = MAX (8, 2 * l->cap);
    l->ids = g_renew (int32_t, l->ids, (size_t)l->cap);
  }
  l->ids[l->n++] = id;
}

/* A Fenwick tree (1-based) of n counts: one more at slot i, and the sum of
 * the slots 1..i. */
static inline void
cnt_add (int32_t *t, int64_t n, int64_t i)
{
  for (; i <= n; i += i & -i)
    t[i]++;
}

static inline int64_t
cnt_sum (const int32_t *t, int64_t i)
{
  int64_t s = 0;
  for (; i > 0; i -= i & -i)
    s += t[i];
  return s;
}

/* The work pack_greedy does for @order, stopping once it passes @budget:
 * for each buffer, the entries of the time blocks it spans (each placed
 * buffer once per block it touches), 8 per placed buffer overlapping its
 * lifetime (the span sort) and one per block. Every term counts placed
 * lifetimes only, never offsets. A placed buffer overlaps [first, last]
 * unless it ends before first or starts after last (never both). */
static uint64_t
greedy_work (const SgPlan *p, const int32_t *order, int32_t n, uint64_t budget)
{
  int64_t ni = (int64_t)p->n_ins + 1;
  /* placed buffers per time block: read and bumped block by block, at a
   * cost that is itself a term of the work (so bounded by the budget) */
  g_autofree int32_t *in_block = g_new0 (int32_t, (size_t)(p->n_ins / BLOCK) + 1);
  g_autofree int32_t *firsts = g_new0 (int32_t, (size_t)ni + 2);
  g_autofree int32_t *lasts = g_new0 (int32_t, (size_t)ni + 2);
  uint64_t work = 0;
  for (int32_t k = 0; k < n && work <= budget; k++) {
    const SgPlanBuffer *x = &p->buffers[order[k]];
    int32_t b0 = x->first_ins / BLOCK, b1 = x->last_ins / BLOCK;
    for (int32_t bl = b0; bl <= b1; bl++)
      work += (uint64_t)in_block[bl]++;
    int64_t ends_before = cnt_sum (lasts, x->first_ins); /* last + 1 <= first */
    int64_t starts_after = k - cnt_sum (firsts, (int64_t)x->last_ins + 1);
    int64_t ns = k - ends_before - starts_after;
    work += (uint64_t)ns * 8 + (uint64_t)(b1 - b0 + 1);
    cnt_add (firsts, ni, (int64_t)x->first_ins + 1);
    cnt_add (lasts, ni, (int64_t)x->last_ins + 1);
  }
  return work;
}

/* Greedy by size into off[] (indexed by buffer). Returns the top. */
static uint64_t
pack_greedy (const SgPlan *p, const int32_t *order, int32_t n, uint64_t base, uint64_t *off)
{
  uint64_t top = base;
  int32_t n_blocks = p->n_ins / BLOCK + 1;
  IdList *blocks = g_new0 (IdList, (size_t)n_blocks);
  g_autofree int32_t *stamp = g_new0 (int32_t, (size_t)p->n_buffers + 1);
  /* the busy spans of one placement: at most one per placed buffer */
  g_autofree Span *spans = g_new (Span, (size_t)n + 1);

  for (int32_t k = 0; k < n; k++) {
    int32_t b = order[k];
    const SgPlanBuffer *x = &p->buffers[b];
    uint64_t size = sg_align_up (x->bytes);
    int32_t b0 = x->first_ins / BLOCK, b1 = x->last_ins / BLOCK;
    int32_t ns = 0;
    for (int32_t bl = b0; bl <= b1; bl++) {
      const IdList *l = &blocks[bl];
      for (int32_t j = 0; j < l->n; j++) {
        int32_t y = l->ids[j];
        if (stamp[y] == k + 1)
          continue;
        stamp[y] = k + 1;
        const SgPlanBuffer *py = &p->buffers[y];
        if (py->last_ins < x->first_ins || py->first_ins > x->last_ins)
          continue;
        spans[ns++] = (Span){ off[y], off[y] + sg_align_up (py->bytes) };
      }
    }
    sort_spans (spans, ns);
    /* best fit over the gaps between the (possibly overlapping) busy spans */
    uint64_t cursor = base, best = UINT64_MAX, best_gap = UINT64_MAX;
    for (int32_t j = 0; j < ns; j++) {
      const Span *s = &spans[j];
      if (s->off > cursor) {
        uint64_t gap = s->off - cursor;
        if (gap >= size && gap < best_gap) {
          best_gap = gap;
          best = cursor;
        }
      }
      if (s->end > cursor)
        cursor = s->end;
    }
    off[b] = best != UINT64_MAX ? best : cursor;
    top = MAX (top, off[b] + size);
    for (int32_t bl = b0; bl <= b1; bl++)
      idlist_push (&blocks[bl], b);
  }
  for (int32_t bl = 0; bl < n_blocks; bl++)
    g_free (blocks[bl].ids);
  g_free (blocks);
  return top;
}

/* --- online best fit ------------------------------------------------------- */

typedef struct {
  uint64_t off, size;
} Gap;

static int
cmp_gap_off (gconstpointer a, gconstpointer b, gpointer data)
{
  (void)data;
  const Gap *x = a, *y = b;
  return (x->off > y->off) - (x->off < y->off);
}

static int
cmp_gap_size (gconstpointer a, gconstpointer b, gpointer data)
{
  (void)data;
  const Gap *x = a, *y = b;
  if (x->size != y->size)
    return x->size < y->size ? -1 : 1;
  return (x->off > y->off) - (x->off < y->off);
}

typedef struct {
  GTree *by_off, *by_size; /* the same Gap objects; by_off owns them */
  uint64_t top;
} Heap;

static void
heap_remove (Heap *h, Gap *gp)
{
  g_tree_remove (h->by_size, gp);
  g_tree_remove (h->by_off, gp); /* frees it */
}

static void
heap_add_gap (Heap *h, uint64_t off, uint64_t size)
{
  Gap *gp = g_new (Gap, 1);
  *gp = (Gap){ off, size };
  g_tree_insert (h->by_off, gp, gp);
  g_tree_insert (h->by_size, gp, gp);
}

static uint64_t
heap_alloc (Heap *h, uint64_t size)
{
  Gap key = { 0, size };
  GTreeNode *nd = g_tree_lower_bound (h->by_size, &key);
  if (nd) { /* the smallest gap that holds it; ties: the lowest offset */
    Gap g = *(Gap *)g_tree_node_key (nd);
    heap_remove (h, g_tree_node_key (nd));
    if (g.size > size)
      heap_add_gap (h, g.off + size, g.size - size);
    return g.off;
  }
  GTreeNode *last = g_tree_node_last (h->by_off);
  if (last) { /* a free run at the top grows instead of leaving a hole */
    Gap *g = g_tree_node_key (last);
    if (g->off + g->size == h->top) {
      uint64_t o = g->off;
      heap_remove (h, g);
      h->top = o + size;
      return o;
    }
  }
  uint64_t o = h->top;
  h->top += size;
  return o;
}

static void
heap_release (Heap *h, uint64_t off, uint64_t size)
{
  Gap key = { off, 0 };
  GTreeNode *next = g_tree_lower_bound (h->by_off, &key);
  GTreeNode *prev = next ? g_tree_node_previous (next) : g_tree_node_last (h->by_off);
  if (prev) {
    Gap *g = g_tree_node_key (prev);
    if (g->off + g->size == off) {
      off = g->off;
      size += g->size;
      heap_remove (h, g);
    }
  }
  if (next) {
    Gap *g = g_tree_node_key (next);
    if (off + size == g->off) {
      size += g->size;
      heap_remove (h, g);
    }
  }
  heap_add_gap (h, off, size);
}

/* Allocation in instruction order: a buffer is placed at its first
 * instruction, best fit among the free gaps, and its bytes return to the
 * free list (coalesced) after its last one. O(n log n). */
static uint64_t
pack_online (const SgPlan *p, const int32_t *order, int32_t n, uint64_t base, uint64_t *off)
{
  /* allocations by (first, the size order), releases by (last, id) */
  g_autofree int32_t *alloc = g_memdup2 (order, sizeof (int32_t) * ((size_t)n + 1));
  g_autofree int32_t *release = g_new (int32_t, (size_t)n + 1);
  g_autofree bool *listed = g_new0 (bool, (size_t)p->n_buffers + 1);
  for (int32_t k = 0; k < n; k++)
    listed[order[k]] = true;
  for (int32_t b = 0, m = 0; b < p->n_buffers; b++)
    if (listed[b])
      release[m++] = b;
  sg_plan_sort_buffers_by_time (p, alloc, n, false);
  sg_plan_sort_buffers_by_time (p, release, n, true);
  Heap h = { g_tree_new_full (cmp_gap_off, NULL, g_free, NULL),
             g_tree_new_full (cmp_gap_size, NULL, NULL, NULL), base };
  int32_t r = 0;
  for (int32_t k = 0; k < n; k++) {
    const SgPlanBuffer *x = &p->buffers[alloc[k]];
    for (; r < n && p->buffers[release[r]].last_ins < x->first_ins; r++)
      heap_release (&h, off[release[r]], sg_align_up (p->buffers[release[r]].bytes));
    off[alloc[k]] = heap_alloc (&h, sg_align_up (x->bytes));
  }
  g_tree_destroy (h.by_size);
  g_tree_destroy (h.by_off);
  return h.top;
}

void
sg_codegen_pack_buffers (SgPlan *p, const bool *pinned)
{
  uint64_t base = 0;
  for (int32_t b = 0; b < p->n_buffers; b++)
    if (pinned[b]) {
      p->buffers[b].offset = base;
      base += sg_align_up (p->buffers[b].bytes);
    }
  int32_t n = 0;
  g_autofree int32_t *order = g_new (int32_t, (size_t)p->n_buffers + 1);
  for (int32_t b = 0; b < p->n_buffers; b++) {
    if (pinned[b])
      continue;
    if (p->buffers[b].bytes == 0)
      p->buffers[b].offset = 0;
    else
      order[n++] = b;
  }
  g_qsort_with_data (order, n, sizeof (int32_t), cmp_by_size, p->buffers);
  g_autofree uint64_t *greedy = g_new0 (uint64_t, (size_t)p->n_buffers + 1);
  g_autofree uint64_t *online = g_new0 (uint64_t, (size_t)p->n_buffers + 1);
  uint64_t top_online = pack_online (p, order, n, base, online);
  uint64_t top_greedy = greedy_work (p, order, n, GREEDY_BUDGET) <= GREEDY_BUDGET
                          ? pack_greedy (p, order, n, base, greedy)
                          : UINT64_MAX;
  const uint64_t *off = top_greedy <= top_online ? greedy : online;
  for (int32_t k = 0; k < n; k++)
    p->buffers[order[k]].offset = off[order[k]];
  p->arena_bytes = MAX (MIN (top_greedy, top_online), base);
}

void
sg_codegen_mem_stats (const SgPlan *p, SgMemStats *st)
{
  memset (st, 0, sizeof *st);
  st->arena_bytes = p->arena_bytes;
  st->n_buffers = p->n_buffers;
  /* live bytes per instruction by a difference array */
  g_autofree int64_t *delta = g_new0 (int64_t, (size_t)p->n_ins + 2);
  for (int32_t b = 0; b < p->n_buffers; b++) {
    const SgPlanBuffer *x = &p->buffers[b];
    uint64_t sz = sg_align_up (x->bytes);
    st->sum_bytes += sz;
    if (x->first_ins == 0 && x->last_ins == p->n_ins - 1)
      st->input_bytes += sz;
    delta[x->first_ins] += (int64_t)sz;
    delta[x->last_ins + 1] -= (int64_t)sz;
  }
  int64_t live = 0;
  for (int32_t i = 0; i <= p->n_ins; i++) {
    live += delta[i];
    if ((uint64_t)live > st->live_peak_bytes)
      st->live_peak_bytes = (uint64_t)live;
  }
}
