/* judge-align.c: where a judged graph's events are the previous graph's
 * (judge.c, judge-run.c): segments of consecutive nodes whose events
 * equal, one for one, those of consecutive nodes of the previous graph.
 *
 * A trial graph differs from the one judged before it in a few buckets:
 * a few nodes added, removed or changed at a few places, everything
 * between them the same events shifted by what was added or removed
 * before. The segments are found in one walk from the first difference
 * (the common prefix is the first segment): equal events extend the
 * current segment; at a difference the walk resumes at the next node of
 * the new graph whose origin (sg_graph_trial_origins: both graphs trials
 * of one rewrite) lies ahead in the previous graph, or, for other graphs,
 * at the start of their common suffix of events. Events are equal when
 * role, cost, group and kernel slot or rates entry are, and a wait waits
 * for the collective that the segments map the previous wait's collective
 * to (or both for none): the judge's run maps the previous run's rows,
 * queues and log through the segments (sg_judge_map), so its waits must
 * mean the same collective. Requires: both graphs' events
 * (judge-events.c). Invalidates: nothing.
 */
#include <string.h>

#include "schedule-private.h"

int32_t
sg_judge_map (const SgSimJudge *j, int32_t y)
{
  int32_t lo = 0, hi = j->n_segs; /* the last segment starting at or before y */
  /* most often one of the last ones, nearest: bounds from the end, in
   * steps that double, then halved */
  for (int32_t step = 1, at = hi - 1; at >= 0; step *= 2, at = hi - step) {
    if (j->segs[at].r <= y) {
      lo = at;
      break;
    }
    hi = at;
  }
  while (hi - lo > 1) {
    int32_t mid = (lo + hi) / 2;
    if (j->segs[mid].r <= y)
      lo = mid;
    else
      hi = mid;
  }
  if (hi == 0)
    return -1;
  const SgJudgeSeg *s = &j->segs[lo];
  return y >= s->r && y < s->r + s->len ? y - s->r + s->t : -1;
}

/* Is node @x of the new graph outside @j's segments? */
static bool
unmapped (const SgSimJudge *j, int32_t x)
{
  int32_t lo = 0, hi = j->n_segs; /* the last segment starting at or before x */
  while (hi - lo > 1) {
    int32_t mid = (lo + hi) / 2;
    if (j->segs[mid].t <= x)
      lo = mid;
    else
      hi = mid;
  }
  return hi == 0 || x < j->segs[lo].t || x >= j->segs[lo].t + j->segs[lo].len;
}

/* Event @t of the new graph and @r (node @y) of the previous one are the
 * same to the run: a wait's collective mapped, or both outside the
 * segments (a gap wait, listed in @j->gapw). */
/* Are @t and @r the same event, neither a wait for a collective? */
static inline bool
ev_plain_same (const SgJudgeEv *t, const SgJudgeEv *r)
{
  uint64_t a[2], b[2]; /* cost; aux, group, role and zero */
  memcpy (a, t, sizeof a);
  memcpy (b, r, sizeof b);
  return a[0] == b[0] && a[1] == b[1] && (t->role != SG_ROLE_WAIT || t->aux < 0);
}

static inline bool
ev_match (SgSimJudge *j, const SgJudgeEv *t, const SgJudgeEv *r, int32_t y, bool open)
{
  uint64_t a[2], b[2]; /* cost; aux, group, role and zero */
  memcpy (a, t, sizeof a);
  memcpy (b, r, sizeof b);
  if (t->role != SG_ROLE_WAIT || r->aux < 0)
    return a[0] == b[0] && a[1] == b[1];
  if (r->role != SG_ROLE_WAIT || t->aux < 0 || a[0] != b[0] || t->group != r->group)
    return false;
  /* the segment being walked is mapped too (@open: it has nodes) */
  j->n_segs += open;
  const int32_t m = sg_judge_map (j, r->aux);
  const bool outside = m < 0 && unmapped (j, t->aux);
  j->n_segs -= open;
  if (m >= 0)
    return t->aux == m;
  if (!outside)
    return false;
  SG_JUDGE_GROW (j->gapw, j->cap_gapw, j->n_gapw + 1, SgJudgeGapWait);
  j->gapw[j->n_gapw++] = (SgJudgeGapWait){ y, t->aux };
  return true;
}

/* The longest common suffix of events, waits by distance (ev_match checks
 * them again): *@s_new, *@s_prev where it starts, not below @p. */
static void
common_suffix (const SgJudgeRec *T, const SgJudgeRec *R, int32_t p, int32_t *s_new,
               int32_t *s_prev)
{
  int32_t a = T->n, b = R->n;
  for (; a > p && b > p; a--, b--) {
    const SgJudgeEv *t = &T->ev[a - 1], *r = &R->ev[b - 1];
    if (t->role != r->role || memcmp (&t->cost, &r->cost, sizeof (double)) != 0
        || t->group != r->group)
      break;
    if (t->role == SG_ROLE_WAIT && t->aux >= p && r->aux >= p ? t->aux - a != r->aux - b
                                                              : t->aux != r->aux)
      break;
  }
  *s_new = a, *s_prev = b;
}

/* Where the origins of the new graph's nodes are: j->at[o] is the
 * position of base node o in the last graph walked, a hint that the
 * previous graph's kept origins (R->orig) confirm. */
static inline void
note_at (SgSimJudge *j, const SgNodeId *orig, int32_t x)
{
  if (orig && orig[x] >= 0)
    j->at[orig[x]] = x;
}

/* After a difference at (*@x, *@y): the next pair of nodes to compare,
 * false for none. With origins (@orig, of the same rewrite as @R's), the
 * first node from *@x on whose origin @R holds at or after *@y (not the
 * pair that differed), noting where the nodes passed are; without, the
 * common suffix's start, then on along the diagonal. */
static bool
resync (SgSimJudge *j, const SgJudgeRec *T, const SgJudgeRec *R, const SgNodeId *orig,
        int32_t s_new, int32_t s_prev, int32_t *x, int32_t *y)
{
  if (!orig) {
    if (*x < s_new)
      *x = s_new, *y = s_prev;
    else
      ++*x, ++*y;
    return *x < T->n && *y < R->n;
  }
  for (int32_t a = *x; a < T->n; a++) {
    const SgNodeId o = orig[a];
    if (o >= 0 && o < j->n_at) {
      const int32_t b = j->at[o];
      if (b >= *y && b < R->n && R->orig[b] == o && (a > *x || b > *y)) {
        *x = a, *y = b;
        return true;
      }
      j->at[o] = a;
    }
  }
  *x = T->n;
  return false;
}

/* Keeps @g's trial origins in @T and sizes @j->at for their base graph;
 * returns them, or NULL for none. */
static const SgNodeId *
keep_origins (SgSimJudge *j, SgJudgeRec *T, const SgGraph *g)
{
  const SgNodeId *orig = sg_graph_trial_origins (g);
  T->orig_of = orig ? g->trial_of : NULL;
  if (!orig)
    return NULL;
  SG_JUDGE_GROW (T->orig, T->cap_orig, MAX (g->n_nodes, 1), int32_t);
  memcpy (T->orig, orig, sizeof (int32_t) * (size_t)g->n_nodes);
  const int32_t base = sg_rewrite_graph (g->trial_of)->n_nodes;
  if (base > j->n_at) {
    j->at = g_renew (int32_t, j->at, (size_t)base);
    for (int32_t i = j->n_at; i < base; i++)
      j->at[i] = -1;
    j->n_at = base;
  }
  return orig;
}

void
sg_judge_align (SgSimJudge *j, const SgGraph *g, SgJudgeRec *T, const SgJudgeRec *R, int32_t p)
{
  const SgNodeId *orig = keep_origins (j, T, g);
  j->n_segs = j->n_gapw = 0;
  int32_t x = 0;
  if (!R->valid)
    goto rest;
  /* the previous graph's origins, when of the same rewrite, guide the walk */
  const SgNodeId *guide = orig && R->orig_of == T->orig_of ? orig : NULL;
  int32_t s_new = T->n, s_prev = R->n;
  if (!guide)
    common_suffix (T, R, p, &s_new, &s_prev);
  SG_JUDGE_GROW (j->segs, j->cap_segs, 1, SgJudgeSeg);
  if (p > 0)
    j->segs[j->n_segs++] = (SgJudgeSeg){ 0, 0, p };
  if (guide)
    x = p; /* the prefix's origins are where they were, in the previous graph */
  for (int32_t y = p; x < T->n && y < R->n;) {
    /* a segment from (x, y): equal events but waits for a collective,
     * which the segment itself may hold (its length kept up to date) */
    SG_JUDGE_GROW (j->segs, j->cap_segs, j->n_segs + 1, SgJudgeSeg);
    SgJudgeSeg *seg = &j->segs[j->n_segs];
    *seg = (SgJudgeSeg){ x, y, 0 };
    for (;; x++, y++) {
      const int32_t lim = MIN (T->n - x, R->n - y);
      int32_t k = 0;
      if (guide) {
        for (; k < lim && ev_plain_same (&T->ev[x + k], &R->ev[y + k]); k++)
          note_at (j, guide, x + k);
      } else {
        while (k < lim && ev_plain_same (&T->ev[x + k], &R->ev[y + k]))
          k++;
      }
      x += k, y += k;
      seg->len = x - seg->t;
      if (k == lim || !ev_match (j, &T->ev[x], &R->ev[y], y, seg->len > 0))
        break;
      note_at (j, guide, x);
      seg->len++;
    }
    if (seg->len > 0)
      j->n_segs++;
    if (x >= T->n || y >= R->n || !resync (j, T, R, guide, s_new, s_prev, &x, &y))
      break;
  }
  if (!guide)
    x = 0;
rest:
  for (; x < T->n; x++)
    note_at (j, orig, x);
}
