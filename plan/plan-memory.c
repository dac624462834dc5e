/* plan-memory.c: the plan's memory rule (sg_plan_check_memory,
 * plan-private.h) and the buffers' order by time (plan.h).
 *
 * Mirrors: the sweep-line test for intersecting rectangles (Bentley and
 * Ottmann's setting: time one axis, bytes the other).
 * Requires: the buffers' own rules (plan-validate.c: lifetimes within the
 * instructions). Invalidates: nothing.
 *
 * Buffers whose lifetimes overlap never share a byte: a sweep in order of
 * first instruction (ties: id) keeps the live buffers as a set ordered by
 * offset, and a new buffer is checked against its live neighbours there.
 * The set is a bitset of ranks in the (offset, id) order (radix sorted),
 * with a bit per nonzero word above each level, so a neighbour is found in
 * a few word operations (a GTree of offsets did the same, three times
 * slower: tests/codegen/test_plan.c compares the two on random buffers).
 */
#include "plan-private.h"

#include <inttypes.h>
#include <string.h>

void
sg_plan_sort_buffers_by_time (const SgPlan *p, int32_t *ids, int32_t n, bool by_last)
{
  g_return_if_fail (p != NULL && (ids != NULL || n == 0));
  int32_t hi = 0;
  for (int32_t k = 0; k < n; k++) {
    const SgPlanBuffer *b = &p->buffers[ids[k]];
    int32_t t = by_last ? b->last_ins : b->first_ins;
    g_return_if_fail (t >= 0);
    hi = MAX (hi, t);
  }
  /* a counting sort: at[t] is where the first id of time t goes */
  g_autofree int32_t *at = g_new0 (int32_t, (size_t)hi + 2);
  g_autofree int32_t *in = g_memdup2 (ids, sizeof (int32_t) * ((size_t)n + 1));
  for (int32_t k = 0; k < n; k++) {
    const SgPlanBuffer *b = &p->buffers[in[k]];
    at[(by_last ? b->last_ins : b->first_ins) + 1]++;
  }
  for (int32_t t = 0; t <= hi; t++)
    at[t + 1] += at[t];
  for (int32_t k = 0; k < n; k++) {
    const SgPlanBuffer *b = &p->buffers[in[k]];
    ids[at[by_last ? b->last_ins : b->first_ins]++] = in[k];
  }
}

/* A set of ranks 0 .. n-1 (the live buffers by offset): a bit per rank,
 * and above each level a bit per nonzero word of it, so a neighbour is
 * found in a few word operations. */
#define SET_LEVELS 6 /* 64^6 > 2^32 ranks */
typedef struct {
  int levels;
  uint64_t *bits[SET_LEVELS];
  size_t words[SET_LEVELS];
} RankSet;

static void
rankset_init (RankSet *s, size_t n)
{
  s->levels = 0;
  do {
    n = (n + 63) / 64;
    s->words[s->levels] = MAX (n, 1);
    s->bits[s->levels++] = g_new0 (uint64_t, MAX (n, 1));
  } while (n > 1);
}

static void
rankset_clear (RankSet *s)
{
  for (int l = 0; l < s->levels; l++)
    g_free (s->bits[l]);
}

static void
rankset_add (RankSet *s, size_t r)
{
  for (int l = 0; l < s->levels; l++, r >>= 6) {
    uint64_t *w = &s->bits[l][r >> 6];
    const bool had = *w != 0;
    *w |= UINT64_C (1) << (r & 63);
    if (had)
      break;
  }
}

static void
rankset_remove (RankSet *s, size_t r)
{
  for (int l = 0; l < s->levels; l++, r >>= 6) {
    uint64_t *w = &s->bits[l][r >> 6];
    *w &= ~(UINT64_C (1) << (r & 63));
    if (*w)
      break;
  }
}

/* The smallest member >= @r; SIZE_MAX when none. */
static size_t
rankset_next (const RankSet *s, size_t r)
{
  int l = 0;
  for (;; l++) {
    if (l == s->levels || r >> 6 >= s->words[l])
      return SIZE_MAX;
    const uint64_t w = s->bits[l][r >> 6] & (~UINT64_C (0) << (r & 63));
    if (w) {
      r = (r & ~(size_t)63) + (size_t)__builtin_ctzll (w);
      break;
    }
    r = (r >> 6) + 1; /* the next word, a bit of the level above */
  }
  for (; l > 0; l--)
    r = (r << 6) + (size_t)__builtin_ctzll (s->bits[l - 1][r]);
  return r;
}

/* The largest member < @r; SIZE_MAX when none. */
static size_t
rankset_prev (const RankSet *s, size_t r)
{
  if (r == 0)
    return SIZE_MAX;
  r--;
  int l = 0;
  for (;; l++) {
    if (l == s->levels)
      return SIZE_MAX;
    const uint64_t w = s->bits[l][r >> 6] & (~UINT64_C (0) >> (63 - (r & 63)));
    if (w) {
      r = (r & ~(size_t)63) + 63 - (size_t)__builtin_clzll (w);
      break;
    }
    if (r >> 6 == 0)
      return SIZE_MAX;
    r = (r >> 6) - 1;
  }
  for (; l > 0; l--)
    r = (r << 6) + 63 - (size_t)__builtin_clzll (s->bits[l - 1][r]);
  return r;
}

/* Sorts the @n buffer ids at @ids (ascending) by offset, stably: by
 * (offset, id). LSD radix sort, 11 bits a pass, as many passes as the
 * largest offset needs. */
static void
sort_by_offset (const SgPlan *p, int32_t *ids, int32_t n)
{
  uint64_t top = 0;
  for (int32_t k = 0; k < n; k++)
    top = MAX (top, p->buffers[ids[k]].offset);
  g_autofree int32_t *tmp = g_new (int32_t, (size_t)n + 1);
  int32_t cnt[2048 + 1];
  for (int shift = 0; shift < 64 && top >> shift; shift += 11) {
    memset (cnt, 0, sizeof cnt);
    for (int32_t k = 0; k < n; k++)
      cnt[(p->buffers[ids[k]].offset >> shift & 2047) + 1]++;
    for (int d = 0; d < 2048; d++)
      cnt[d + 1] += cnt[d];
    for (int32_t k = 0; k < n; k++)
      tmp[cnt[p->buffers[ids[k]].offset >> shift & 2047]++] = ids[k];
    memcpy (ids, tmp, sizeof (int32_t) * (size_t)n);
  }
}

/* The sweep: live offsets are distinct (or it stopped), so a new buffer's
 * neighbours are the first live one at or above its offset and the last
 * below. */
bool
sg_plan_check_memory (const SgPlan *p, GError **error)
{
  int32_t n = 0;
  g_autofree int32_t *by_first = g_new (int32_t, (size_t)p->n_buffers + 1);
  for (int32_t b = 0; b < p->n_buffers; b++)
    if (p->buffers[b].bytes > 0)
      by_first[n++] = b;
  g_autofree int32_t *by_last = g_memdup2 (by_first, sizeof (int32_t) * ((size_t)n + 1));
  g_autofree int32_t *by_off = g_memdup2 (by_first, sizeof (int32_t) * ((size_t)n + 1));
  /* (first, id) and (last, id): ids ascending, sorted stably */
  sg_plan_sort_buffers_by_time (p, by_first, n, false);
  sg_plan_sort_buffers_by_time (p, by_last, n, true);
  sort_by_offset (p, by_off, n);
  /* per buffer: its rank, and the rank of the first at its offset */
  g_autofree int32_t *rank = g_new (int32_t, (size_t)p->n_buffers + 1);
  g_autofree int32_t *low = g_new (int32_t, (size_t)p->n_buffers + 1);
  for (int32_t k = 0; k < n; k++) {
    rank[by_off[k]] = k;
    low[by_off[k]] = k > 0 && p->buffers[by_off[k - 1]].offset == p->buffers[by_off[k]].offset
                       ? low[by_off[k - 1]]
                       : k;
  }
  RankSet live;
  rankset_init (&live, (size_t)n);
  bool ok = true;
  int32_t r = 0;
  for (int32_t k = 0; k < n && ok; k++) {
    int32_t b = by_first[k];
    const SgPlanBuffer *x = &p->buffers[b];
    for (; r < n && p->buffers[by_last[r]].last_ins < x->first_ins; r++)
      rankset_remove (&live, (size_t)rank[by_last[r]]);
    const size_t next = rankset_next (&live, (size_t)low[b]);
    const size_t prev = rankset_prev (&live, (size_t)low[b]);
    int32_t hit = -1;
    if (next != SIZE_MAX && p->buffers[by_off[next]].offset < x->offset + x->bytes)
      hit = by_off[next];
    if (hit < 0 && prev != SIZE_MAX
        && p->buffers[by_off[prev]].offset + p->buffers[by_off[prev]].bytes > x->offset)
      hit = by_off[prev];
    if (hit >= 0) {
      const SgPlanBuffer *y = &p->buffers[hit];
      g_set_error (error, SG_PLAN_ERROR, SG_PLAN_ERROR_INVALID,
                   "buffers[%d] [%" PRIu64 ", %" PRIu64 ") live [%d, %d] overlaps buffers[%d] "
                   "[%" PRIu64 ", %" PRIu64 ") live [%d, %d]",
                   b, x->offset, x->offset + x->bytes, x->first_ins, x->last_ins, hit, y->offset,
                   y->offset + y->bytes, y->first_ins, y->last_ins);
      ok = false;
    } else
      rankset_add (&live, (size_t)rank[b]);
  }
  rankset_clear (&live);
  return ok;
}
