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
 *    instruction order, best-fit from a coalescing free list (a treap by
 *    size and two hash maps by the gaps' ends), O(n log n).
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

/* A free gap of the online heap. */
typedef struct {
  uint64_t off, size;
  uint64_t prio;       /* the treap's heap order: a hash of the gap */
  int32_t left, right; /* the treap by (size, off); left: the free list's link */
} Gap;

/* Gaps by start or by end offset: open addressing, linear probing,
 * deletion by backward shift (no tombstones). */
#define NO_KEY UINT64_MAX
typedef struct {
  uint64_t *key;
  int32_t *gap;
  uint32_t shift; /* 64 - log2 (capacity) */
  uint32_t n;
} GapMap;

typedef struct {
  Gap *gap;
  int32_t cap, free_gap, root; /* free_gap: -1 or the first unused slot */
  GapMap by_start, by_end;
  uint64_t top;
} Heap;

static void
map_init (GapMap *m, uint32_t log2_cap)
{
  const size_t cap = (size_t)1 << log2_cap;
  m->key = g_new (uint64_t, cap);
  m->gap = g_new (int32_t, cap);
  for (size_t i = 0; i < cap; i++)
    m->key[i] = NO_KEY;
  m->shift = 64 - log2_cap;
  m->n = 0;
}

static inline size_t
map_slot (const GapMap *m, uint64_t key)
{
  return (size_t)((key * UINT64_C (0x9E3779B97F4A7C15)) >> m->shift);
}

static int32_t
map_get (const GapMap *m, uint64_t key)
{
  const size_t mask = ((size_t)1 << (64 - m->shift)) - 1;
  for (size_t i = map_slot (m, key);; i = (i + 1) & mask) {
    if (m->key[i] == key)
      return m->gap[i];
    if (m->key[i] == NO_KEY)
      return -1;
  }
}

static void map_put (GapMap *m, uint64_t key, int32_t gap);

static void
map_grow (GapMap *m)
{
  GapMap old = *m;
  const size_t cap = (size_t)1 << (64 - old.shift);
  map_init (m, 64 - old.shift + 1);
  for (size_t i = 0; i < cap; i++)
    if (old.key[i] != NO_KEY)
      map_put (m, old.key[i], old.gap[i]);
  g_free (old.key);
  g_free (old.gap);
}

static void
map_put (GapMap *m, uint64_t key, int32_t gap)
{
  if (2 * ((size_t)m->n + 1) > (size_t)1 << (64 - m->shift))
    map_grow (m);
  const size_t mask = ((size_t)1 << (64 - m->shift)) - 1;
  size_t i = map_slot (m, key);
  while (m->key[i] != NO_KEY)
    i = (i + 1) & mask;
  m->key[i] = key;
  m->gap[i] = gap;
  m->n++;
}

static void
map_remove (GapMap *m, uint64_t key)
{
  const size_t mask = ((size_t)1 << (64 - m->shift)) - 1;
  size_t i = map_slot (m, key);
  while (m->key[i] != key)
    i = (i + 1) & mask;
  /* shift back the entries after it that probed past it */
  for (size_t j = (i + 1) & mask; m->key[j] != NO_KEY; j = (j + 1) & mask) {
    const size_t home = map_slot (m, m->key[j]);
    if (((j - home) & mask) >= ((j - i) & mask)) {
      m->key[i] = m->key[j];
      m->gap[i] = m->gap[j];
      i = j;
    }
  }
  m->key[i] = NO_KEY;
  m->n--;
}

static inline bool
gap_less (const Gap *x, const Gap *y)
{
  return x->size != y->size ? x->size < y->size : x->off < y->off;
}

/* The treap: @t split into the gaps before @key (*@l) and the others. */
static void
treap_split (Gap *gp, int32_t t, const Gap *key, int32_t *l, int32_t *r)
{
  while (t >= 0) {
    if (gap_less (&gp[t], key)) {
      *l = t;
      l = &gp[t].right;
      t = gp[t].right;
    } else {
      *r = t;
      r = &gp[t].left;
      t = gp[t].left;
    }
  }
  *l = *r = -1;
}

/* Every gap of @a before every gap of @b. */
static int32_t
treap_merge (Gap *gp, int32_t a, int32_t b)
{
  int32_t root = -1, *at = &root;
  while (a >= 0 && b >= 0) {
    if (gp[a].prio > gp[b].prio) {
      *at = a;
      at = &gp[a].right;
      a = gp[a].right;
    } else {
      *at = b;
      at = &gp[b].left;
      b = gp[b].left;
    }
  }
  *at = a >= 0 ? a : b;
  return root;
}

static void
heap_add_gap (Heap *h, uint64_t off, uint64_t size)
{
  if (h->free_gap < 0) {
    const int32_t old = h->cap;
    h->cap = MAX (64, 2 * h->cap);
    h->gap = g_renew (Gap, h->gap, (size_t)h->cap);
    for (int32_t i = old; i < h->cap; i++)
      h->gap[i].left = i + 1 < h->cap ? i + 1 : -1;
    h->free_gap = old;
  }
  const int32_t g = h->free_gap;
  Gap *x = &h->gap[g];
  h->free_gap = x->left;
  uint64_t z = off * UINT64_C (0x9E3779B97F4A7C15) + size; /* splitmix64 of the gap */
  z = (z ^ (z >> 30)) * UINT64_C (0xBF58476D1CE4E5B9);
  z = (z ^ (z >> 27)) * UINT64_C (0x94D049BB133111EB);
  *x = (Gap){ off, size, z ^ (z >> 31), -1, -1 };
  /* down to where its priority puts it, then the subtree there split
   * around it */
  int32_t *at = &h->root;
  while (*at >= 0 && h->gap[*at].prio > x->prio)
    at = gap_less (x, &h->gap[*at]) ? &h->gap[*at].left : &h->gap[*at].right;
  treap_split (h->gap, *at, x, &x->left, &x->right);
  *at = g;
  map_put (&h->by_start, off, g);
  map_put (&h->by_end, off + size, g);
}

static void
heap_remove (Heap *h, int32_t g)
{
  Gap *x = &h->gap[g];
  int32_t *at = &h->root;
  while (*at != g)
    at = gap_less (x, &h->gap[*at]) ? &h->gap[*at].left : &h->gap[*at].right;
  *at = treap_merge (h->gap, x->left, x->right);
  map_remove (&h->by_start, x->off);
  map_remove (&h->by_end, x->off + x->size);
  x->left = h->free_gap;
  h->free_gap = g;
}

static uint64_t
heap_alloc (Heap *h, uint64_t size)
{
  /* the smallest gap that holds it; ties: the lowest offset */
  int32_t best = -1;
  for (int32_t t = h->root; t >= 0;)
    if (h->gap[t].size >= size) {
      best = t;
      t = h->gap[t].left;
    } else
      t = h->gap[t].right;
  if (best >= 0) {
    const Gap g = h->gap[best];
    heap_remove (h, best);
    if (g.size > size)
      heap_add_gap (h, g.off + size, g.size - size);
    return g.off;
  }
  const int32_t last = map_get (&h->by_end, h->top);
  if (last >= 0) { /* a free run at the top grows instead of leaving a hole */
    const uint64_t o = h->gap[last].off;
    heap_remove (h, last);
    h->top = o + size;
    return o;
  }
  uint64_t o = h->top;
  h->top += size;
  return o;
}

static void
heap_release (Heap *h, uint64_t off, uint64_t size)
{
  const int32_t prev = map_get (&h->by_end, off);
  if (prev >= 0) {
    off = h->gap[prev].off;
    size += h->gap[prev].size;
    heap_remove (h, prev);
  }
  const int32_t next = map_get (&h->by_start, off + size);
  if (next >= 0) {
    size += h->gap[next].size;
    heap_remove (h, next);
  }
  heap_add_gap (h, off, size);
}

/* Allocation in instruction order: a buffer is placed at its first
 * instruction, best fit among the free gaps, and its bytes return to the
 * free list (coalesced) after its last one. The gaps are kept by (size,
 * offset) in a treap for the best fit and by their two ends in hash maps
 * for coalescing: O(n log n). */
uint64_t
sg_codegen_pack_online (const SgPlan *p, const int32_t *order, int32_t n, uint64_t base,
                        uint64_t *off)
{
  /* allocations by (first, the size order), releases by (last, id) */
  g_autofree int32_t *alloc = g_memdup2 (order, sizeof (int32_t) * (size_t)MAX (n, 1));
  g_autofree int32_t *release = g_new (int32_t, (size_t)n + 1);
  g_autofree bool *listed = g_new0 (bool, (size_t)p->n_buffers + 1);
  for (int32_t k = 0; k < n; k++)
    listed[order[k]] = true;
  for (int32_t b = 0, m = 0; b < p->n_buffers; b++)
    if (listed[b])
      release[m++] = b;
  sg_plan_sort_buffers_by_time (p, alloc, n, false);
  sg_plan_sort_buffers_by_time (p, release, n, true);
  Heap h = { .free_gap = -1, .root = -1, .top = base };
  map_init (&h.by_start, 6);
  map_init (&h.by_end, 6);
  int32_t r = 0;
  for (int32_t k = 0; k < n; k++) {
    const SgPlanBuffer *x = &p->buffers[alloc[k]];
    for (; r < n && p->buffers[release[r]].last_ins < x->first_ins; r++)
      heap_release (&h, off[release[r]], sg_align_up (p->buffers[release[r]].bytes));
    off[alloc[k]] = heap_alloc (&h, sg_align_up (x->bytes));
  }
  g_free (h.gap);
  g_free (h.by_start.key);
  g_free (h.by_start.gap);
  g_free (h.by_end.key);
  g_free (h.by_end.gap);
  return h.top;
}

/* Sorts the @n buffer ids at @order (ascending) largest first, ties by
 * earlier first use, then id: stably by first use, then stably by aligned
 * size, descending. */
void
sg_codegen_sort_by_size (const SgPlan *p, int32_t *order, int32_t n)
{
  sg_plan_sort_buffers_by_time (p, order, n, false);
  uint64_t top = 0;
  g_autofree uint64_t *key = g_new (uint64_t, (size_t)p->n_buffers + 1);
  for (int32_t k = 0; k < n; k++)
    top = MAX (top, sg_align_up (p->buffers[order[k]].bytes) / SG_ARENA_ALIGN);
  for (int32_t k = 0; k < n; k++) /* descending size: ascending key */
    key[order[k]] = top - sg_align_up (p->buffers[order[k]].bytes) / SG_ARENA_ALIGN;
  sg_plan_sort_by_key (order, n, key, top);
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
  sg_codegen_sort_by_size (p, order, n);
  g_autofree uint64_t *greedy = g_new0 (uint64_t, (size_t)p->n_buffers + 1);
  g_autofree uint64_t *online = g_new0 (uint64_t, (size_t)p->n_buffers + 1);
  uint64_t top_online = sg_codegen_pack_online (p, order, n, base, online);
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
