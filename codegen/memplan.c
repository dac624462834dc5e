/* memplan.c: static memory planning: one arena offset per buffer.
 *
 * Mirrors: TFLite's ArenaPlanner "greedy by size" and XLA's
 * GlobalDecreasingSizeBestFitHeap: buffers are placed offline, largest
 * first (ties: earlier first use, then id), each at the best-fitting gap
 * (the smallest gap that holds it; ties: the lowest offset) among the
 * buffers already placed whose lifetimes overlap its own; no fitting gap:
 * above the highest of them. 256-byte aligned. Whole-step buffers
 * (placeholders) go first, contiguously, and are not searched.
 * Requires: buffers' bytes and [first_ins, last_ins].
 * Invalidates: nothing else.
 *
 * Cost: the placed buffers that overlap a lifetime are found through a
 * time index (blocks of BLOCK instructions, each listing the placed
 * buffers that touch it), so a query visits the blocks it spans instead of
 * every placed buffer.
 */
#include "codegen-private.h"

#include <string.h>

#define BLOCK 64

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

static int
cmp_span (gconstpointer a, gconstpointer b)
{
  const Span *x = a, *y = b;
  if (x->off != y->off)
    return x->off < y->off ? -1 : 1;
  return (x->end > y->end) - (x->end < y->end);
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
  uint64_t top = base;

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

  int32_t n_blocks = p->n_ins / BLOCK + 1;
  GArray **blocks = g_new0 (GArray *, (size_t)n_blocks);
  g_autofree int32_t *stamp = g_new0 (int32_t, (size_t)p->n_buffers + 1);
  GArray *spans = g_array_new (FALSE, FALSE, sizeof (Span));

  for (int32_t k = 0; k < n; k++) {
    int32_t b = order[k];
    SgPlanBuffer *x = &p->buffers[b];
    uint64_t size = sg_align_up (x->bytes);
    int32_t b0 = x->first_ins / BLOCK, b1 = x->last_ins / BLOCK;
    g_array_set_size (spans, 0);
    for (int32_t bl = b0; bl <= b1; bl++) {
      if (!blocks[bl])
        continue;
      for (guint j = 0; j < blocks[bl]->len; j++) {
        int32_t y = g_array_index (blocks[bl], int32_t, j);
        if (stamp[y] == k + 1)
          continue;
        stamp[y] = k + 1;
        const SgPlanBuffer *py = &p->buffers[y];
        if (py->last_ins < x->first_ins || py->first_ins > x->last_ins)
          continue;
        Span s = { py->offset, py->offset + sg_align_up (py->bytes) };
        g_array_append_val (spans, s);
      }
    }
    g_array_sort (spans, cmp_span);
    /* best fit over the gaps between the (possibly overlapping) busy spans */
    uint64_t cursor = base, best = UINT64_MAX, best_gap = UINT64_MAX;
    for (guint j = 0; j < spans->len; j++) {
      const Span *s = &g_array_index (spans, Span, j);
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
    x->offset = best != UINT64_MAX ? best : cursor;
    if (x->offset + size > top)
      top = x->offset + size;
    for (int32_t bl = b0; bl <= b1; bl++) {
      if (!blocks[bl])
        blocks[bl] = g_array_new (FALSE, FALSE, sizeof (int32_t));
      g_array_append_val (blocks[bl], b);
    }
  }
  for (int32_t bl = 0; bl < n_blocks; bl++)
    if (blocks[bl])
      g_array_free (blocks[bl], TRUE);
  g_free (blocks);
  g_array_free (spans, TRUE);
  p->arena_bytes = top;
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
