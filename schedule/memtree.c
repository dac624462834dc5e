/* memtree.c: range add / range maximum over positions, the scheduler's
 * memory profile (input-order live bytes plus what its decisions add) and
 * the deferred waits' prefix checks (defer.c).
 *
 * Positions come in blocks of MT_BLOCK: a block keeps its values relative
 * to what was added to it whole (badd), and a segment tree over the blocks
 * holds each block's maximum: the bottom-up tree of "Efficient and easy
 * segment trees" (Al.Cash), t[] maxima, d[] the adds pending at inner
 * nodes. A range touches at most two blocks in part (their values, then
 * their maxima up the tree) and adds to the whole blocks between through
 * the tree; O(MT_BLOCK + log n) per operation, 8 bytes a position and a
 * few a block. Range maxima and point sets push nothing down (they add the
 * pending adds above instead); range adds stop fixing ancestors once
 * neither path's node changes; only the first-above search (recursive)
 * pushes. A range maximum's position is one holding it (the scheduler's
 * refusals only need a position that is full). Requires: nothing.
 * Invalidates: nothing.
 */
#include <string.h>

#include "schedule-private.h"

/* Positions per block. */
#define MT_BLOCK 8

/* Allocates @s for @n positions, past them SG_MEMTREE_NONE, no adds
 * pending; the caller writes the first @n values and then tree_build. */
static void
tree_alloc (SgMemTree *s, int32_t n)
{
  s->n = n;
  s->nb = MAX ((n + MT_BLOCK - 1) / MT_BLOCK, 1);
  /* A power-of-two leaf count keeps every inner node a contiguous range. */
  s->p2 = 1;
  while (s->p2 < s->nb)
    s->p2 *= 2;
  s->v = g_new (int64_t, (size_t)s->nb * MT_BLOCK); /* every entry written */
  s->badd = g_new0 (int64_t, (size_t)s->nb);
  s->t = g_new (int64_t, 2 * (size_t)s->p2);
  s->d = g_new0 (int64_t, (size_t)s->p2);
  for (int32_t i = n; i < s->nb * MT_BLOCK; i++)
    s->v[i] = SG_MEMTREE_NONE;
  for (int32_t b = s->nb; b < s->p2; b++)
    s->t[s->p2 + b] = SG_MEMTREE_NONE;
}

/* The largest value of block @b, relative to its badd and the adds above. */
static inline int64_t
block_max (const SgMemTree *s, int32_t b)
{
  const int64_t *v = s->v + (size_t)b * MT_BLOCK;
  int64_t m = v[0];
  for (int32_t i = 1; i < MT_BLOCK; i++)
    m = MAX (m, v[i]);
  return m;
}

/* Block @b's leaf from its values. */
static inline void
leaf_update (SgMemTree *s, int32_t b)
{
  s->t[s->p2 + b] = block_max (s, b) + s->badd[b];
}

/* Leaves from the values, inner nodes from the leaves (t[0] is unused). */
static void
tree_build (SgMemTree *s)
{
  for (int32_t b = 0; b < s->nb; b++)
    leaf_update (s, b);
  s->t[0] = 0;
  for (int32_t i = s->p2 - 1; i > 0; i--)
    s->t[i] = MAX (s->t[2 * i], s->t[2 * i + 1]);
}

void
sg_memtree_init (SgMemTree *s, int32_t n, const uint64_t *v)
{
  tree_alloc (s, n);
  for (int32_t i = 0; i < n; i++)
    s->v[i] = (int64_t)v[i];
  tree_build (s);
}

void
sg_memtree_init_fill (SgMemTree *s, int32_t n, int64_t v)
{
  tree_alloc (s, n);
  for (int32_t i = 0; i < n; i++)
    s->v[i] = v;
  tree_build (s);
}

/* Adds @v to tree node @p (a leaf: to its block). */
static void
tree_apply (SgMemTree *s, int32_t p, int64_t v)
{
  s->t[p] += v;
  if (p < s->p2)
    s->d[p] += v;
  else
    s->badd[p - s->p2] += v;
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

/* What is added to every value of block @b (its badd and the adds above). */
static inline int64_t
block_base (const SgMemTree *s, int32_t b)
{
  return s->badd[b] + tree_above (s, s->p2 + b);
}

/* Adds @v to positions [@l, @r) of one block and sets its leaf; false
 * when the leaf keeps its value. */
static bool
block_add (SgMemTree *s, int32_t l, int32_t r, int64_t v)
{
  int32_t b = l / MT_BLOCK, p = s->p2 + b;
  int64_t m = s->t[p] - s->badd[b]; /* the block's largest value */
  if (v > 0) {
    /* it only grows: the largest of the range may pass it */
    for (int32_t i = l; i < r; i++) {
      s->v[i] += v;
      m = MAX (m, s->v[i]);
    }
  } else {
    for (int32_t i = l; i < r; i++)
      s->v[i] += v;
    m = block_max (s, b);
  }
  if (m + s->badd[b] == s->t[p])
    return false;
  s->t[p] = m + s->badd[b];
  return true;
}

/* The blocks in part (their values and leaves), the whole blocks between
 * through the tree's nodes, then one pull up the two outer blocks' paths:
 * the nodes the tree's loop adds to hang off the paths of the blocks just
 * outside their range (or of its ends, when the range starts or ends on a
 * block's edge). */
void
sg_memtree_add (SgMemTree *s, int32_t l, int32_t r, int64_t v)
{
  if (l >= r)
    return;
  int32_t bl = l / MT_BLOCK, br = (r - 1) / MT_BLOCK;
  if (bl == br && (l % MT_BLOCK || r % MT_BLOCK)) {
    if (block_add (s, l, r, v))
      tree_pull (s, s->p2 + bl, s->p2 + bl, 0);
    return;
  }
  int32_t fb = bl, fe = br + 1, pl = bl, pr = br, k = 0;
  if (l % MT_BLOCK) {
    block_add (s, l, (bl + 1) * MT_BLOCK, v);
    fb++;
  }
  if (r % MT_BLOCK) {
    block_add (s, br * MT_BLOCK, r, v);
    fe--;
  }
  for (int32_t lo = fb + s->p2, hi = fe + s->p2; lo < hi; lo >>= 1, hi >>= 1, k++) {
    if (lo & 1)
      tree_apply (s, lo++, v);
    if (hi & 1)
      tree_apply (s, --hi, v);
  }
  tree_pull (s, s->p2 + pl, s->p2 + pr, k);
}

/* The first position of [@l, @r) (one block) holding its largest value,
 * and that value (relative). */
static inline int64_t
span_max (const SgMemTree *s, int32_t l, int32_t r, int32_t *at)
{
  int64_t m = s->v[l];
  int32_t a = l;
  for (int32_t i = l + 1; i < r; i++)
    if (s->v[i] > m) {
      m = s->v[i];
      a = i;
    }
  *at = a;
  return m;
}

/* A position of block @b holding its largest value, @p the tree node the
 * search stops at (a leaf, or a node to follow down first). */
static int32_t
max_position (const SgMemTree *s, int32_t p)
{
  /* Pending adds of a node apply to both children alike: follow the
   * larger child down to a leaf. */
  while (p < s->p2)
    p = s->t[2 * p] >= s->t[2 * p + 1] ? 2 * p : 2 * p + 1;
  int32_t b = p - s->p2, at;
  span_max (s, b * MT_BLOCK, (b + 1) * MT_BLOCK, &at);
  return at;
}

/* Maximum over [l, r); *at (if not NULL) gets a position holding it. The
 * first and last blocks in part or whole, the blocks between through the
 * tree, in one walk up that pushes nothing: each side's best is kept
 * relative to the node it lies under (at first the first and last
 * blocks' leaves) and gets that node's parent's pending add at each step
 * up, the rest above at the end. */
int64_t
sg_memtree_max (SgMemTree *s, int32_t l, int32_t r, int32_t *at)
{
  int32_t bl = l / MT_BLOCK, br = (r - 1) / MT_BLOCK, a;
  if (bl == br) {
    int64_t m = span_max (s, l, r, &a) + block_base (s, bl);
    if (at)
      *at = a;
    return m;
  }
  int32_t al, ar;
  int64_t ml = span_max (s, l, (bl + 1) * MT_BLOCK, &al) + s->badd[bl];
  int64_t mr = span_max (s, br * MT_BLOCK, r, &ar) + s->badd[br];
  int32_t nl = -1, nr = -1; /* the tree node holding a side's best, -1: its block in part */
  int32_t lo = s->p2 + bl + 1, hi = s->p2 + br;
  while (lo < hi) {
    if (lo & 1) {
      if (s->t[lo] > ml) {
        ml = s->t[lo];
        nl = lo;
      }
      lo++;
    }
    if (hi & 1) {
      hi--;
      if (s->t[hi] > mr) {
        mr = s->t[hi];
        nr = hi;
      }
    }
    lo >>= 1;
    hi >>= 1;
    ml += s->d[lo - 1];
    mr += s->d[hi];
  }
  ml += tree_above (s, lo - 1);
  mr += tree_above (s, hi);
  if (ml >= mr) {
    if (at)
      *at = nl < 0 ? al : max_position (s, nl);
    return ml;
  }
  if (at)
    *at = nr < 0 ? ar : max_position (s, nr);
  return mr;
}

/* Position @i's value is @v less what is added to its whole block. */
void
sg_memtree_set (SgMemTree *s, int32_t i, int64_t v)
{
  int32_t b = i / MT_BLOCK;
  s->v[i] = v - block_base (s, b);
  leaf_update (s, b);
  tree_pull (s, s->p2 + b, s->p2 + b, 0);
}

/* The first block >= @l in node @p's range [@lo, @lo + @len) whose largest
 * value exceeds @x, or -1; t[@p] is exact (its ancestors are pushed). */
static int32_t
first_above (SgMemTree *s, int32_t p, int32_t lo, int32_t len, int32_t l, int64_t x)
{
  if (lo + len <= l || s->t[p] <= x)
    return -1;
  if (p >= s->p2)
    return lo;
  tree_push_one (s, p);
  int32_t half = len / 2;
  int32_t at = first_above (s, 2 * p, lo, half, l, x);
  return at >= 0 ? at : first_above (s, 2 * p + 1, lo + half, half, l, x);
}

/* The first position of [@l, end of its block) whose value exceeds @x. */
static int32_t
first_in_block (const SgMemTree *s, int32_t l, int64_t x)
{
  int32_t b = l / MT_BLOCK;
  int64_t base = block_base (s, b);
  for (int32_t i = l; i < (b + 1) * MT_BLOCK; i++)
    if (s->v[i] + base > x)
      return i;
  return -1;
}

int32_t
sg_memtree_first_above (SgMemTree *s, int32_t l, int64_t x)
{
  int32_t b = l / MT_BLOCK;
  if (b < s->nb) {
    int32_t at = first_in_block (s, l, x);
    if (at >= 0)
      return at;
    b++;
  }
  /* past the blocks, positions hold SG_MEMTREE_NONE (as in a block's tail) */
  b = first_above (s, 1, 0, s->p2, b, x);
  if (b < 0)
    return -1;
  return b < s->nb ? first_in_block (s, b * MT_BLOCK, x) : MAX (l, b * MT_BLOCK);
}

void
sg_memtree_clear (SgMemTree *s)
{
  g_free (s->v);
  g_free (s->badd);
  g_free (s->t);
  g_free (s->d);
  memset (s, 0, sizeof *s);
}
