/* memtree.c: range add / range maximum over positions, the scheduler's
 * memory profile (input-order live bytes plus what its decisions add) and
 * the deferred waits' prefix checks (defer.c).
 *
 * The bottom-up tree of "Efficient and easy segment trees" (Al.Cash):
 * t[] holds maxima, d[] the adds pending at inner nodes; O(log n) per
 * operation, no recursion. Requires: nothing. Invalidates: nothing.
 */
#include "schedule-private.h"

void
sg_memtree_init (SgMemTree *s, int32_t n, const uint64_t *v)
{
  sg_memtree_init_fill (s, n, 0);
  for (int32_t i = 0; i < n; i++)
    s->t[s->n + i] = (int64_t)v[i];
  for (int32_t i = s->n - 1; i > 0; i--)
    s->t[i] = MAX (s->t[2 * i], s->t[2 * i + 1]);
}

void
sg_memtree_init_fill (SgMemTree *s, int32_t n, int64_t v)
{
  /* A power-of-two leaf count keeps every inner node a contiguous range. */
  s->n = 1;
  s->h = 0;
  while (s->n < n) {
    s->n *= 2;
    s->h++;
  }
  s->t = g_new0 (int64_t, 2 * (size_t)s->n);
  s->d = g_new0 (int64_t, (size_t)s->n);
  for (int32_t i = 0; i < s->n; i++)
    s->t[s->n + i] = i < n ? v : SG_MEMTREE_NONE;
  for (int32_t i = s->n - 1; i > 0; i--)
    s->t[i] = MAX (s->t[2 * i], s->t[2 * i + 1]);
}

static void
tree_apply (SgMemTree *s, int32_t p, int64_t v)
{
  s->t[p] += v;
  if (p < s->n)
    s->d[p] += v;
}

static inline void
tree_fix (SgMemTree *s, int32_t p)
{
  s->t[p] = MAX (s->t[2 * p], s->t[2 * p + 1]) + s->d[p];
}

/* Recomputes the ancestors of leaves @p and @q (@p <= @q), each once: both
 * paths go up level by level, so every node is fixed after its children. */
static void
tree_pull (SgMemTree *s, int32_t p, int32_t q)
{
  while (p > 1) {
    p >>= 1;
    q >>= 1;
    tree_fix (s, p);
    if (q != p)
      tree_fix (s, q);
  }
}

static inline void
tree_push_one (SgMemTree *s, int32_t i)
{
  if (s->d[i] != 0) {
    tree_apply (s, 2 * i, s->d[i]);
    tree_apply (s, 2 * i + 1, s->d[i]);
    s->d[i] = 0;
  }
}

/* Pushes the pending adds above leaves @p and @q (@p <= @q) down, each
 * node once, from the root: every node after its ancestors. */
static void
tree_push (SgMemTree *s, int32_t p, int32_t q)
{
  for (int32_t k = s->h; k > 0; k--) {
    tree_push_one (s, p >> k);
    if (q >> k != p >> k)
      tree_push_one (s, q >> k);
  }
}

void
sg_memtree_add (SgMemTree *s, int32_t l, int32_t r, int64_t v)
{
  l += s->n;
  r += s->n;
  int32_t l0 = l, r0 = r;
  for (; l < r; l >>= 1, r >>= 1) {
    if (l & 1)
      tree_apply (s, l++, v);
    if (r & 1)
      tree_apply (s, --r, v);
  }
  tree_pull (s, l0, r0 - 1);
}

/* Maximum over [l, r); *at (if not NULL) gets a position holding it. */
int64_t
sg_memtree_max (SgMemTree *s, int32_t l, int32_t r, int32_t *at)
{
  l += s->n;
  r += s->n;
  tree_push (s, l, r - 1);
  int64_t m = INT64_MIN;
  int32_t best = -1;
  for (; l < r; l >>= 1, r >>= 1) {
    if (l & 1) {
      if (s->t[l] > m) {
        m = s->t[l];
        best = l;
      }
      l++;
    }
    if (r & 1) {
      r--;
      if (s->t[r] > m) {
        m = s->t[r];
        best = r;
      }
    }
  }
  if (at && best > 0) {
    /* Pending adds of a node apply to both children alike: follow the
     * larger child down to a leaf. */
    while (best < s->n)
      best = s->t[2 * best] >= s->t[2 * best + 1] ? 2 * best : 2 * best + 1;
    *at = best - s->n;
  }
  return m;
}

void
sg_memtree_set (SgMemTree *s, int32_t i, int64_t v)
{
  int32_t p = i + s->n;
  tree_push (s, p, p);
  s->t[p] = v;
  tree_pull (s, p, p);
}

/* The first position >= @l in node @p's range [@lo, @lo + @len) whose value
 * exceeds @x, or -1; t[@p] is exact (its ancestors are pushed). */
static int32_t
first_above (SgMemTree *s, int32_t p, int32_t lo, int32_t len, int32_t l, int64_t x)
{
  if (lo + len <= l || s->t[p] <= x)
    return -1;
  if (p >= s->n)
    return lo;
  if (s->d[p] != 0) {
    tree_apply (s, 2 * p, s->d[p]);
    tree_apply (s, 2 * p + 1, s->d[p]);
    s->d[p] = 0;
  }
  int32_t half = len / 2;
  int32_t at = first_above (s, 2 * p, lo, half, l, x);
  return at >= 0 ? at : first_above (s, 2 * p + 1, lo + half, half, l, x);
}

int32_t
sg_memtree_first_above (SgMemTree *s, int32_t l, int64_t x)
{
  return first_above (s, 1, 0, s->n, l, x);
}

void
sg_memtree_clear (SgMemTree *s)
{
  g_free (s->t);
  g_free (s->d);
  s->t = s->d = NULL;
}
