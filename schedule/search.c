/* search.c: exhaustive search over the orders of a set of nodes, from a
 * timeline state, with the simulator's own engine (the exact scheduler's
 * and the polish pass's one search).
 *
 * The set is a window of an order: every input of one of its nodes is in
 * the window or placed before it. Two goals:
 * - SG_SEARCH_STEP (exact.c): the window is the whole graph; find the
 *   order of least step (the drain included), pruning with a lower bound
 *   of the rest (the engine's clock plus the critical path of what is
 *   left, and the window relaxation of bound.c) against the best so far;
 * - SG_SEARCH_EARLY (polish.c): keep the SG_SEARCH_KEEP orders of the
 *   window with the least score, the later of its end clock plus the
 *   compute after it and each group's end if its queue ran unhindered (a
 *   cheap proxy: polish.c checks them against the given order); pruned
 *   when the clock cannot end below the last kept.
 * A decision is the next compute node with a cost, the next collective to
 * issue, or a wait on a running collective (a deliberate stall: under the
 * start wait a stall lets a collective start before a GEMM can hold it).
 * Nodes that cannot change the timeline are placed as soon as they are
 * ready: 0 us compute (views, getitem, inputs) and waits on finished
 * collectives; the output last.
 * Dominance between partial orders: two that placed the same set and
 * issued each group's collectives in the same order are compared as above;
 * the dominated one is dropped. More progress is never worse when
 * overlapping a collective costs less than exposing it (compute_slowdown x
 * (1 - 1/comm slowdown) < 1, true of every preset); otherwise only equal
 * states are merged.
 * Deterministic: decisions are tried in a fixed order (collectives, then
 * compute, then stalls, each by window position), and only a strictly
 * better result (by more than 1e-9 relative) replaces the best.
 * Mirrors: dynamic programming over scheduled sets with dominance (Held
 * and Karp 1962; Kohler and Steiglitz, JACM 1974); the backtracking engine
 * uses sparse saves (sim.c).
 * Requires: est_us (estimate/). Invalidates: nothing.
 */
#include <string.h>

#include "search-private.h"

/* --- placing ------------------------------------------------------------------------ */

/* Neither costly compute nor a collective: closure places it when free. */
static inline bool
quick (const SgSearch *S, int32_t i)
{
  return S->comp[i] < 0 && S->coll[i] < 0;
}

/* Position @i's inputs are placed: a quick one joins rq, a decision
 * ready. */
static inline void
mark_ready (const SgSearch *S, Frame *f, int32_t i)
{
  if (quick (S, i))
    f->rq[i >> 6] |= (uint64_t)1 << (i & 63);
  if (S->dec[i] >= 0)
    f->ready |= (uint64_t)1 << S->dec[i];
}

static void
place (SgSearch *S, Frame *f, int32_t i)
{
  g_assert (f->npend[i] == 0);
  SgNodeId x = S->node[i];
  /* sg_eng_place, with what it looks up per node looked up once */
  sg_eng_place_as (S->e, x, (SgRole)S->role[i], S->cost[i], S->eng_arg[i]);
  int32_t c = S->coll[i];
  if (c >= 0) {
    int32_t grp = S->coll_group[c], rank = f->n_issued[grp]++;
    f->seq[c] = (uint8_t)rank;
    f->seqh += search_seq_hash (c, rank);
    /* its row: the last issued */
    S->row_idx[S->e->n_rows - 1 - S->row0] = (uint8_t)(S->n_pre[grp] + rank);
  }
  f->npend[i] = -1;
  S->order[f->n_placed++] = i;
  if (S->dec[i] >= 0) {
    f->key |= (uint64_t)1 << S->dec[i];
    f->ready &= ~((uint64_t)1 << S->dec[i]);
  }
  if (S->comp[i] >= 0) {
    f->cmask |= (uint64_t)1 << S->comp[i];
    f->work += S->cost[i];
  }
  if (quick (S, i))
    f->rq[i >> 6] &= ~((uint64_t)1 << (i & 63));
  for (uint32_t a = S->ufirst[i]; a < S->ufirst[i + 1]; a++) {
    int32_t u = S->users[a];
    if (--f->npend[u] == 0)
      mark_ready (S, f, u);
  }
}

/* Would placing ready position @i now leave the timeline as it is? */
static bool
free_now (const SgSearch *S, const Frame *f, int32_t i)
{
  if (S->node[i] == S->g->output)
    return f->n_placed == S->m - 1;
  if (S->role[i] == SG_ROLE_COMPUTE)
    return S->cost[i] <= 0.0;
  if (S->role[i] == SG_ROLE_WAIT)
    return S->coll_of[i] == SG_NO_NODE || S->e->row_of[S->coll_of[i]] < 0
           || sg_eng_finished (S->e, S->coll_of[i]);
  return false;
}

/* The first bit set at or after @from in @w (@nw words), or -1. */
static int32_t
next_bit (const uint64_t *w, int32_t nw, int32_t from)
{
  int32_t k = from >> 6;
  if (k >= nw)
    return -1;
  uint64_t x = w[k] & (~(uint64_t)0 << (from & 63));
  while (x == 0) {
    if (++k >= nw)
      return -1;
    x = w[k];
  }
  return (k << 6) + __builtin_ctzll (x);
}

/* Places the quick positions that are free now, in sweeps by position
 * until one places nothing. A sweep looks at the ready ones (rq: a
 * placement adds its ready users, all later in the window, to the same
 * sweep). Only a placement changes what is free (the engine, the pending
 * inputs, the count placed), so a sweep that has placed nothing yet stops
 * past the last placement of the one before: the positions after it were
 * seen after it. */
static void
closure (SgSearch *S, Frame *f)
{
  for (int32_t seen_from = S->m;;) {
    int32_t last = -1;
    for (int32_t i = next_bit (f->rq, S->nw, 0); i >= 0; i = next_bit (f->rq, S->nw, i + 1)) {
      if (last < 0 && i > seen_from)
        return;
      if (free_now (S, f, i)) {
        place (S, f, i);
        last = i;
      }
    }
    if (last < 0)
      return;
    seen_from = last;
  }
}

static void
frame_copy (const SgSearch *S, Frame *dst, const Frame *src)
{
  /* rq, npend and n_issued, laid out one after the other */
  memcpy (dst->rq, src->rq,
          (size_t)((uint8_t *)(src->n_issued + S->ng) - (uint8_t *)src->rq));
  memcpy (dst->seq, src->seq, sizeof dst->seq);
  dst->n_placed = src->n_placed;
  dst->key = src->key;
  dst->ready = src->ready;
  dst->cmask = src->cmask;
  dst->work = src->work;
  dst->seqh = src->seqh;
}

static bool
prune (SgSearch *S, const Frame *f)
{
  if (S->goal == SG_SEARCH_STEP)
    return search_lower_bound (S, f) >= S->best_value - EPS * (1.0 + S->best_value);
  /* the window's compute still to run, and the compute after it, only
   * push the clock on */
  if (S->n_kept < SG_SEARCH_KEEP)
    return false;
  double end = S->e->now + (S->window_work - f->work) + S->rest;
  double worst = S->kept_score[SG_SEARCH_KEEP - 1];
  return end >= worst - EPS * (1.0 + worst);
}


/* --- the search ------------------------------------------------------------------------ */

static void
leaf (SgSearch *S)
{
  if (S->goal == SG_SEARCH_STEP) {
    double compute_end = S->e->now;
    sg_eng_drain (S->e);
    double step = MAX (compute_end, S->e->now);
    if (step < S->best_value - EPS * (1.0 + S->best_value)) {
      S->best_value = step;
      S->found = true;
      memcpy (S->best, S->order, sizeof (int32_t) * (size_t)S->m);
    }
    return;
  }
  /* score: when the compute after the window could end if nothing held it
   * up, or when the busiest group's collectives could */
  const SgSimEngine *e = S->e;
  double score = e->now + S->rest;
  for (int32_t grp = 0; grp < e->n_groups; grp++) {
    double t = e->now;
    for (int32_t r = e->ghead[grp]; r >= 0; r = e->rnext[r])
      t += e->rem[r];
    score = MAX (score, t);
  }
  if (S->n_kept == SG_SEARCH_KEEP && score >= S->kept_score[SG_SEARCH_KEEP - 1])
    return;
  int32_t at = MIN (S->n_kept, SG_SEARCH_KEEP - 1);
  int32_t *slot = S->kept[at];
  while (at > 0 && S->kept_score[at - 1] > score) {
    S->kept[at] = S->kept[at - 1];
    S->kept_score[at] = S->kept_score[at - 1];
    at--;
  }
  S->kept[at] = slot;
  S->kept_score[at] = score;
  memcpy (slot, S->order, sizeof (int32_t) * (size_t)S->m);
  S->n_kept = MIN (S->n_kept + 1, SG_SEARCH_KEEP);
  S->found = true;
}

static void
dfs (SgSearch *S, int32_t d)
{
  Frame *f = &S->frames[d];
  closure (S, f);
  if (f->n_placed == S->m) {
    leaf (S);
    return;
  }
  if (++S->expanded > S->budget) {
    S->gave_up = true;
    return;
  }
  if (!search_memo_admit (S, f) || prune (S, f))
    return;
  /* collectives, then compute, then stalls; each by position (decision
   * bits are in position order; @f does not change below: the children
   * work on the next frame) */
  const uint64_t ready = f->ready;
  /* The engine is at @f's state for the first child; it is saved only for
   * the later ones. Nothing is restored on the way out: the caller restores
   * its own state before it goes on (sg_search_run, the one at depth 0). */
  if (ready & (ready - 1))
    sg_eng_save (S->e, &f->snap);
  bool at_f = true;
  for (int pass = 0; pass < 3 && !S->gave_up; pass++)
    for (uint64_t mk = ready & S->kind_decs[pass]; mk && !S->gave_up; mk &= mk - 1) {
      Frame *c = &S->frames[d + 1];
      frame_copy (S, c, f);
      if (!at_f)
        sg_eng_restore (S->e, &f->snap);
      at_f = false;
      place (S, c, S->decs[__builtin_ctzll (mk)]);
      dfs (S, d + 1);
    }
}

bool
sg_search_run (SgSearch *S, double incumbent)
{
  Frame *f0 = &S->frames[0];
  memset (f0->rq, 0, sizeof (uint64_t) * (size_t)S->nw);
  f0->ready = 0;
  for (int32_t i = 0; i < S->m; i++) {
    f0->npend[i] = (int32_t)(S->ifirst[i + 1] - S->ifirst[i]);
    if (f0->npend[i] == 0)
      mark_ready (S, f0, i);
  }
  SgEngSnap start = { 0 };
  sg_eng_save (S->e, &start);
  if (S->goal == SG_SEARCH_EARLY)
    S->rest = incumbent;
  else
    S->best_value = incumbent;
  dfs (S, 0);
  sg_eng_restore (S->e, &start);
  sg_eng_snap_clear (&start);
  return S->found;
}

void
sg_search_result (const SgSearch *S, SgNodeId *out)
{
  for (int32_t i = 0; i < S->m; i++)
    out[i] = S->node[S->best[i]];
}

int32_t
sg_search_n_kept (const SgSearch *S)
{
  return S->n_kept;
}

void
sg_search_kept (const SgSearch *S, int32_t k, SgNodeId *out)
{
  g_return_if_fail (k >= 0 && k < S->n_kept);
  for (int32_t i = 0; i < S->m; i++)
    out[i] = S->node[S->kept[k][i]];
}

void
sg_search_kept_positions (const SgSearch *S, int32_t k, int32_t *out)
{
  g_return_if_fail (k >= 0 && k < S->n_kept);
  memcpy (out, S->kept[k], sizeof (int32_t) * (size_t)S->m);
}

double
sg_search_value (const SgSearch *S)
{
  return S->best_value;
}

int64_t
sg_search_expanded (const SgSearch *S)
{
  return S->expanded;
}

bool
sg_search_gave_up (const SgSearch *S)
{
  return S->gave_up;
}
