/* memtree.c: range add / range maximum over positions, the scheduler's
 * memory profile (input-order live bytes plus what its decisions add) and
 * the deferred waits' prefix checks (defer.c).
 *
 * The bottom-up tree of "Efficient and easy segment trees" (Al.Cash):
 * t[] holds maxima, d[] the adds pending at inner nodes; O(log n) per
 * operation. Range maxima and point sets push nothing down (they add the
 * pending adds above instead); range adds stop fixing ancestors once
 * neither path's node changes; only the first-above search (recursive)
 * pushes. Requires: nothing. Invalidates: nothing.
 */
#include "schedule-private.h"

/* Allocates @s for @n positions, past them SG_MEMTREE_NONE, no adds
 * pending; the caller writes the first @n leaves and then tree_build. */
static void
tree_alloc (SgMemTree *s, int32_t n)
{
  /* A power-of-two leaf count keeps every inner node a contiguous range. */
  s->n = 1;
  while (s->n < n)
    s->n *= 2;
  s->t = g_new (int64_t, 2 * (size_t)s->n); /* every entry written below */
  s->d = g_new0 (int64_t, (size_t)s->n);
  for (int32_t i = n; i < s->n; i++)
    s->t[s->n + i] = SG_MEMTREE_NONE;
}

/* Inner nodes from the leaves (t[0] is unused). */
static void
tree_build (SgMemTree *s)
{
  s->t[0] = 0;
  for (int32_t i = s->n - 1; i > 0; i--)
    s->t[i] = MAX (s->t[2 * i], s->t[2 * i + 1]);
}

void
sg_memtree_init (SgMemTree *s, int32_t n, const uint64_t *v)
{
  tree_alloc (s, n);
  for (int32_t i = 0; i < n; i++)
    s->t[s->n + i] = (int64_t)v[i];
  tree_build (s);
}

void
sg_memtree_init_fill (SgMemTree *s, int32_t n, int64_t v)
{
  tree_alloc (s, n);
  for (int32_t i = 0; i < n; i++)
    s->t[s->n + i] = v;
  tree_build (s);
}

static void
tree_apply (SgMemTree *s, int32_t p, int64_t v)
{
  s->t[p] += v;
  if (p < s->n)
    s->d[p] += v;
}

/* Recomputes node @p from its children. */
static inline void
tree_fix (SgMemTree *s, int32_t p)
{
  s->t[p] = MAX (s->t[2 * p], s->t[2 * p + 1]) + s->d[p];
}

/* tree_fix, false if @p's value stays. */
static inline bool
tree_fix_changed (SgMemTree *s, int32_t p)
{
  int64_t v = MAX (s->t[2 * p], s->t[2 * p + 1]) + s->d[p];
  if (v == s->t[p])
    return false;
  s->t[p] = v;
  return true;
}

/* Recomputes the ancestors of leaves @p and @q (@p <= @q), each once: both
 * paths go up level by level, so every node is fixed after its children.
 * Below level @k_top (where the caller's range add ended) changed nodes
 * hang off the paths, so every path node is fixed; from it up only the
 * paths' nodes can change (the range lies under at most two nodes of that
 * level), so once neither path's node changes, nothing above does. */
static void
tree_pull (SgMemTree *s, int32_t p, int32_t q, int32_t k_top)
{
  int32_t k = 1;
  for (; p > 1 && k < k_top; k++) {
    p >>= 1;
    q >>= 1;
    tree_fix (s, p);
    tree_fix (s, q);
  }
  for (; p > 1; k++) {
    p >>= 1;
    q >>= 1;
    bool changed = tree_fix_changed (s, p);
    if (q != p)
      changed |= tree_fix_changed (s, q);
    if (!changed)
      return;
  }
}

/* Moves inner node @i's pending add to its children. */
static inline void
tree_push_one (SgMemTree *s, int32_t i)
{
  if (s->d[i] != 0) {
    tree_apply (s, 2 * i, s->d[i]);
    tree_apply (s, 2 * i + 1, s->d[i]);
    s->d[i] = 0;
  }
}

void
sg_memtree_add (SgMemTree *s, int32_t l, int32_t r, int64_t v)
{
  l += s->n;
  r += s->n;
  int32_t l0 = l, r0 = r, k = 0;
  for (; l < r; l >>= 1, r >>= 1, k++) {
    if (l & 1)
      tree_apply (s, l++, v);
    if (r & 1)
      tree_apply (s, --r, v);
  }
  tree_pull (s, l0, r0 - 1, k);
}

/* The pending adds at @p's ancestors (inner nodes above leaf or node @p). */
static inline int64_t
tree_above (const SgMemTree *s, int32_t p)
{
  int64_t sum = 0;
  while (p > 1) {
    p >>= 1;
    sum += s->d[p];
  }
  return sum;
}

/* Maximum over [l, r); *at (if not NULL) gets a position holding it.
 * Nothing is pushed: the nodes of the left side taken so far lie under
 * l - 1 and those of the right side under r (at the level reached), so
 * each side's best is kept relative to that node and gets its parent's
 * pending add at each step up, the rest above at the end. Of the nodes
 * holding the maximum, the one of the lowest level wins, the left side's
 * at equal levels (the order of one scan level by level, left first), so
 * *at is the position the pushing query gave. */
int64_t
sg_memtree_max (SgMemTree *s, int32_t l, int32_t r, int32_t *at)
{
  l += s->n;
  r += s->n;
  int64_t ml = INT64_MIN, mr = INT64_MIN;
  int32_t bl = -1, br = -1, kl = 0, kr = 0;
  for (int32_t k = 0; l < r; k++) {
    if (l & 1) {
      if (bl < 0 || s->t[l] > ml) {
        ml = s->t[l];
        bl = l;
        kl = k;
      }
      l++;
    }
    if (r & 1) {
      r--;
      if (br < 0 || s->t[r] > mr) {
        mr = s->t[r];
        br = r;
        kr = k;
      }
    }
    l >>= 1;
    r >>= 1;
    if (bl >= 0)
      ml += s->d[l - 1];
    if (br >= 0)
      mr += s->d[r];
  }
  if (bl >= 0)
    ml += tree_above (s, l - 1);
  if (br >= 0)
    mr += tree_above (s, r);
  int64_t m;
  int32_t best;
  if (br < 0 || (bl >= 0 && (ml > mr || (ml == mr && kl <= kr)))) {
    m = ml;
    best = bl;
  } else {
    m = mr;
    best = br;
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

/* Leaf @i's own value is @v less the pending adds above it (nothing is
 * pushed). */
void
sg_memtree_set (SgMemTree *s, int32_t i, int64_t v)
{
  int32_t p = i + s->n;
  s->t[p] = v - tree_above (s, p);
  tree_pull (s, p, p, 0);
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
  tree_push_one (s, p);
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
