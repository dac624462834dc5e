/* plan-memory.c: the plan's memory rule (sg_plan_check_memory,
 * plan-private.h) and the two sorts of ids it uses (buffers by time, ids
 * by a key: plan.h; codegen's packer uses both too).
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
 *
 * On several threads (sg_plan_check_memory_with, a verdict only): the
 * buffers live for the whole step must be apart (sorted by offset, each
 * misses the next), every other misses them (its neighbours among them);
 * the others are swept in slabs of time at once, each slab from the
 * buffers alive at its start (themselves checked as they are added).
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
  g_autofree int32_t *in = g_memdup2 (ids, sizeof (int32_t) * (size_t)MAX (n, 1));
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

void
sg_plan_sort_by_key (int32_t *ids, int32_t n, const uint64_t *key, uint64_t top)
{
  g_return_if_fail ((ids != NULL && key != NULL) || n == 0);
  g_autofree int32_t *tmp = g_new (int32_t, (size_t)n + 1);
  int32_t cnt[2048 + 1];
  for (int shift = 0; shift < 64 && top >> shift; shift += 11) {
    memset (cnt, 0, sizeof cnt);
    for (int32_t k = 0; k < n; k++)
      cnt[(key[ids[k]] >> shift & 2047) + 1]++;
    for (int d = 0; d < 2048; d++)
      cnt[d + 1] += cnt[d];
    for (int32_t k = 0; k < n; k++)
      tmp[cnt[key[ids[k]] >> shift & 2047]++] = ids[k];
    memcpy (ids, tmp, sizeof (int32_t) * (size_t)n);
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

/* The sweep over the @n buffers at @ids: the first @n_alive are live at
 * once (from before), the others start after them in (first, id) order.
 * Each is checked against its live neighbours by offset, then added;
 * before each of the others, the buffers that died before it leave. Live
 * offsets are distinct (or it stopped), so the neighbours are the first
 * live one at or above its offset and the last below. False at the first
 * that overlaps one: *@at, *@hit. */
static bool
sweep (const SgPlan *p, const int32_t *ids, int32_t n_alive, int32_t n, int32_t *at, int32_t *hit)
{
  /* positions by offset (ranks) and by last instruction */
  g_autofree uint64_t *key = g_new (uint64_t, (size_t)n + 1);
  g_autofree int32_t *by_off = g_new (int32_t, (size_t)n + 1);
  g_autofree int32_t *by_last = g_new (int32_t, (size_t)n + 1);
  uint64_t top = 0;
  for (int32_t k = 0; k < n; k++) {
    by_off[k] = by_last[k] = k;
    key[k] = p->buffers[ids[k]].offset;
    top = MAX (top, key[k]);
  }
  sg_plan_sort_by_key (by_off, n, key, top);
  top = 0;
  for (int32_t k = 0; k < n; k++) {
    key[k] = (uint64_t)p->buffers[ids[k]].last_ins;
    top = MAX (top, key[k]);
  }
  sg_plan_sort_by_key (by_last, n, key, top);
  g_autofree int32_t *rank = g_new (int32_t, (size_t)n + 1);
  g_autofree int32_t *low = g_new (int32_t, (size_t)n + 1); /* the first rank at its offset */
  for (int32_t k = 0; k < n; k++) {
    rank[by_off[k]] = k;
    low[by_off[k]] = k > 0 && p->buffers[ids[by_off[k - 1]]].offset
                                  == p->buffers[ids[by_off[k]]].offset
                       ? low[by_off[k - 1]]
                       : k;
  }
  RankSet live;
  rankset_init (&live, (size_t)n);
  *hit = -1;
  int32_t r = 0;
  for (int32_t k = 0; k < n && *hit < 0; k++) {
    const SgPlanBuffer *x = &p->buffers[ids[k]];
    for (; k >= n_alive && r < n && p->buffers[ids[by_last[r]]].last_ins < x->first_ins; r++)
      rankset_remove (&live, (size_t)rank[by_last[r]]);
    const size_t next = rankset_next (&live, (size_t)low[k]);
    const size_t prev = rankset_prev (&live, (size_t)low[k]);
    if (next != SIZE_MAX && p->buffers[ids[by_off[next]]].offset < x->offset + x->bytes)
      *hit = ids[by_off[next]];
    else if (prev != SIZE_MAX && p->buffers[ids[by_off[prev]]].offset
                                     + p->buffers[ids[by_off[prev]]].bytes > x->offset)
      *hit = ids[by_off[prev]];
    else
      rankset_add (&live, (size_t)rank[k]);
    *at = ids[k];
  }
  rankset_clear (&live);
  return *hit < 0;
}

bool
sg_plan_check_memory (const SgPlan *p, GError **error)
{
  int32_t n = 0;
  g_autofree int32_t *by_first = g_new (int32_t, (size_t)p->n_buffers + 1);
  for (int32_t b = 0; b < p->n_buffers; b++)
    if (p->buffers[b].bytes > 0)
      by_first[n++] = b;
  /* (first, id): ids ascending, sorted stably */
  sg_plan_sort_buffers_by_time (p, by_first, n, false);
  int32_t b, hit;
  if (sweep (p, by_first, 0, n, &b, &hit))
    return true;
  const SgPlanBuffer *x = &p->buffers[b], *y = &p->buffers[hit];
  g_set_error (error, SG_PLAN_ERROR, SG_PLAN_ERROR_INVALID,
               "buffers[%d] [%" PRIu64 ", %" PRIu64 ") live [%d, %d] overlaps buffers[%d] "
               "[%" PRIu64 ", %" PRIu64 ") live [%d, %d]",
               b, x->offset, x->offset + x->bytes, x->first_ins, x->last_ins, hit, y->offset,
               y->offset + y->bytes, y->first_ins, y->last_ins);
  return false;
}

/* --- on several threads ---------------------------------------------------- */

/* Slabs of time per worker; whole-step buffers' neighbours per task. */
#define SLABS_PER_WORKER 4
#define CHUNK 4096

typedef struct {
  const SgPlan *p;
  const int32_t *whole; /* the whole-step buffers by offset, pairwise apart */
  int32_t n_whole;
  const int32_t *by_first; /* the others by (first, id) */
  int32_t n, n_slabs, width;
  const int32_t *alive_at, *alive; /* per slab: the others alive at its start (CSR) */
  const int32_t *first_at;         /* per slab: its first in by_first starting after it */
  int32_t n_chunks;
  bool *ok;
} Slabs;

/* Buffer @b misses every whole-step buffer (they are apart: only its
 * neighbours by offset can touch it). */
static bool
misses_whole (const Slabs *c, int32_t b)
{
  const SgPlanBuffer *x = &c->p->buffers[b];
  int32_t lo = 0, hi = c->n_whole; /* the first at or above its offset */
  while (lo < hi) {
    const int32_t mid = lo + (hi - lo) / 2;
    if (c->p->buffers[c->whole[mid]].offset < x->offset)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (lo < c->n_whole && c->p->buffers[c->whole[lo]].offset < x->offset + x->bytes)
    return false;
  const SgPlanBuffer *y = lo > 0 ? &c->p->buffers[c->whole[lo - 1]] : NULL;
  return !y || y->offset + y->bytes <= x->offset;
}

static void
slab_task (gpointer ctx, int32_t t, int32_t worker)
{
  (void)worker;
  Slabs *c = ctx;
  bool ok = true;
  if (t < c->n_slabs) { /* the sweep from the slab's start to its end */
    const int32_t n_alive = c->alive_at[t + 1] - c->alive_at[t];
    const int32_t from = c->first_at[t], to = c->first_at[t + 1];
    g_autofree int32_t *ids = g_new (int32_t, (size_t)(n_alive + to - from) + 1);
    memcpy (ids, c->alive + c->alive_at[t], sizeof (int32_t) * (size_t)n_alive);
    memcpy (ids + n_alive, c->by_first + from, sizeof (int32_t) * (size_t)(to - from));
    int32_t at, hit;
    ok = sweep (c->p, ids, n_alive, n_alive + to - from, &at, &hit);
  } else {
    const int32_t k = t - c->n_slabs;
    for (int32_t i = k * CHUNK; ok && i < MIN (c->n, (k + 1) * CHUNK); i++)
      ok = misses_whole (c, c->by_first[i]);
  }
  c->ok[t] = ok;
}

/* The others' slabs: slab s covers instructions [s width, (s + 1) width);
 * alive at its start are those with first <= s width <= last. Two buffers
 * alive at once are both alive when the later starts: at a slab's start
 * (both alive there) or inside it (the later starts there, the other is
 * alive at the start or starts before it there). */
static void
build_slabs (Slabs *c, int32_t *alive_at, int32_t **alive, int32_t *first_at)
{
  const SgPlan *p = c->p;
  for (int32_t k = 0; k < c->n; k++) {
    const SgPlanBuffer *x = &p->buffers[c->by_first[k]];
    for (int32_t s = (x->first_ins + c->width - 1) / c->width;
         s < c->n_slabs && (int64_t)s * c->width <= x->last_ins; s++)
      alive_at[s + 1]++;
  }
  for (int32_t s = 0; s < c->n_slabs; s++)
    alive_at[s + 1] += alive_at[s];
  *alive = g_new (int32_t, (size_t)alive_at[c->n_slabs] + 1);
  g_autofree int32_t *fill = g_memdup2 (alive_at, sizeof (int32_t) * ((size_t)c->n_slabs + 1));
  for (int32_t k = 0; k < c->n; k++) {
    const SgPlanBuffer *x = &p->buffers[c->by_first[k]];
    for (int32_t s = (x->first_ins + c->width - 1) / c->width;
         s < c->n_slabs && (int64_t)s * c->width <= x->last_ins; s++)
      (*alive)[fill[s]++] = c->by_first[k];
  }
  /* first_at[s]: the first starting after slab s's start (first > s
   * width); slab s sweeps those up to first_at[s + 1] (one more
   * instruction than it covers: a buffer starting at the next slab's start
   * is swept twice, which finds nothing that is not there) */
  for (int32_t s = 0, k = 0; s <= c->n_slabs; s++) {
    while (k < c->n && p->buffers[c->by_first[k]].first_ins <= (int64_t)s * c->width)
      k++;
    first_at[s] = s == c->n_slabs ? c->n : k;
  }
}

bool
sg_plan_check_memory_with (const SgPlan *p, const SgPlanRunner *runner)
{
  g_return_val_if_fail (p != NULL, false);
  if (!runner || runner->n_workers <= 1 || p->n_ins < 1)
    return sg_plan_check_memory (p, NULL);
  const int32_t end = p->n_ins - 1;
  Slabs c = { .p = p };
  g_autofree int32_t *whole = g_new (int32_t, (size_t)p->n_buffers + 1);
  g_autofree int32_t *by_first = g_new (int32_t, (size_t)p->n_buffers + 1);
  for (int32_t b = 0; b < p->n_buffers; b++) {
    const SgPlanBuffer *x = &p->buffers[b];
    if (x->bytes == 0)
      continue;
    if (x->first_ins == 0 && x->last_ins == end)
      whole[c.n_whole++] = b;
    else
      by_first[c.n++] = b;
  }
  /* the whole-step buffers: apart iff each misses the next by offset */
  g_autofree uint64_t *off = g_new (uint64_t, (size_t)p->n_buffers + 1);
  uint64_t top = 0;
  for (int32_t k = 0; k < c.n_whole; k++) {
    off[whole[k]] = p->buffers[whole[k]].offset;
    top = MAX (top, off[whole[k]]);
  }
  sg_plan_sort_by_key (whole, c.n_whole, off, top);
  for (int32_t k = 1; k < c.n_whole; k++)
    if (p->buffers[whole[k - 1]].offset + p->buffers[whole[k - 1]].bytes
        > p->buffers[whole[k]].offset)
      return false;
  sg_plan_sort_buffers_by_time (p, by_first, c.n, false);
  c.whole = whole;
  c.by_first = by_first;
  c.n_slabs = MAX (1, MIN (SLABS_PER_WORKER * runner->n_workers, p->n_ins));
  c.width = (p->n_ins + c.n_slabs - 1) / c.n_slabs;
  g_autofree int32_t *alive_at = g_new0 (int32_t, (size_t)c.n_slabs + 2);
  g_autofree int32_t *first_at = g_new0 (int32_t, (size_t)c.n_slabs + 2);
  g_autofree int32_t *alive = NULL;
  build_slabs (&c, alive_at, &alive, first_at);
  c.alive_at = alive_at;
  c.alive = alive;
  c.first_at = first_at;
  c.n_chunks = (c.n + CHUNK - 1) / CHUNK;
  c.ok = g_new (bool, (size_t)(c.n_slabs + c.n_chunks) + 1);
  runner->run (runner->pool, c.n_slabs + c.n_chunks, slab_task, &c);
  bool ok = true;
  for (int32_t t = 0; t < c.n_slabs + c.n_chunks; t++)
    ok = ok && c.ok[t];
  g_free (c.ok);
  return ok;
}
