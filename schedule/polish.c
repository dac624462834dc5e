/* polish.c: local improvement of the list scheduler's order by exact
 * search on windows.
 *
 * Walks the order with the simulator's engine. At each window (the next
 * POLISH_DECISIONS decisions: compute with a cost, collectives, waits,
 * with the free nodes between them), the search of search.c looks for an
 * order of the same nodes whose end state dominates the given one (no
 * later clock, no more work left on any collective, none held where it
 * ran, same issue order per group) and is strictly better, and takes it;
 * the walk then moves on by half a window. The same nodes end each window,
 * so the rest of the order stays valid, and by dominance its step can only
 * shrink; the result is simulated once more and kept only when its step is
 * shorter and its peak memory within the limit.
 * A check of a window order stops where it is back in the given order's
 * state (it cannot catch up from there).
 * Only windows with something to gain are searched: one where the compute
 * stream stalls or a collective is held by the start wait. The states
 * searched are bounded per window and in total (proportional to the nodes),
 * so the pass stays near-linear; the counts are deterministic.
 * On the worker pool, windows are searched a batch at a time, one per
 * slot: the walk goes on through the next windows as if none of them
 * changed the order (most do not), giving each the state, the budget and
 * the tries the one-at-a-time walk would give it then, and each slot
 * searches its window from a copy of that state (snap.c). The results are
 * taken in order up to the first window that changed the order, or whose
 * budget the total left would have cut; the walk goes back there and the
 * windows after it are searched again. Every window taken was searched
 * from the same state with the same budget, so the order and the counts
 * are those of one window at a time (tests/schedule/test_parallel.c).
 * Mirrors: large neighbourhood search (Shaw, CP 1998) with the exact
 * scheduler as the neighbourhood solver; the batches, speculative
 * execution past a branch that is usually not taken.
 * Requires: est_us (estimate/). Invalidates: nothing (rewrites an order).
 */
#include <string.h>

#include "schedule-private.h"

/* Decisions per window; states per window; states per node and in all. */
#define POLISH_DECISIONS 20
#define WINDOW_BUDGET 2000
#define STATES_PER_NODE 20
#define STATES_MAX (300 * 1000)
/* States of a window after windows that did not improve (halved each time
 * down to this; back to WINDOW_BUDGET after one that did). */
#define WINDOW_MIN 64
/* Nodes per window, free ones included. */
#define WINDOW_NODES 96
/* Windows searched side by side at most (one per worker). */
#define POLISH_MAX_SLOTS 16

static bool
is_decision (const SgSchedProblem *P, SgNodeId x)
{
  return P->role[x] != SG_ROLE_COMPUTE || P->cost[x] > 0.0;
}

/* End of the window that starts at @pos: @k decisions further. */
static int32_t
window_end (const SgSchedProblem *P, const SgNodeId *order, int32_t pos, int32_t k)
{
  const SgGraph *g = P->g;
  int32_t end = pos, d = 0;
  while (end < g->n_nodes && d < k && end - pos < WINDOW_NODES)
    d += is_decision (P, order[end++]);
  /* the free nodes that follow go with it */
  while (end < g->n_nodes && end - pos < WINDOW_NODES && !is_decision (P, order[end])
         && order[end] != g->output)
    end++;
  return end;
}

/* Does the window [@pos, @end) stall or hold a collective? Simulates it
 * on @e (a scratch copy is not needed: the caller restores @e). */
static bool
has_trouble (const SgSchedProblem *P, SgSimEngine *e, const SgNodeId *order, int32_t pos,
             int32_t end)
{
  for (int32_t i = pos; i < end; i++) {
    double t0 = e->now;
    SgRole r = (SgRole)P->role[order[i]];
    sg_sched_place (P, e, order[i]);
    if ((r == SG_ROLE_WAIT && e->now > t0) || e->n_held > 0)
      return true;
  }
  return false;
}

/* Nodes past a window over which a changed window must catch up with the
 * given order (dominate it at the same point) to be taken. */
#define HORIZON 96

/* What the dominance below compares of an engine state: the clock and,
 * per group, the first FRONT_DEPTH queued collectives (node and work left)
 * and whether its head is held. */
#define FRONT_DEPTH 8
typedef struct {
  double now;
  int32_t *first; /* per group, and one past the last: where its rows start */
  SgNodeId *node;
  double *rem;
  bool *held;
} Front;

static void
front_init (Front *F, int32_t ng)
{
  F->first = g_new (int32_t, (size_t)ng + 1);
  F->node = g_new (SgNodeId, (size_t)ng * FRONT_DEPTH);
  F->rem = g_new (double, (size_t)ng * FRONT_DEPTH);
  F->held = g_new (bool, (size_t)ng);
}

static void
front_clear (Front *F)
{
  g_free (F->first);
  g_free (F->node);
  g_free (F->rem);
  g_free (F->held);
}

/* Group @grp's first FRONT_DEPTH queued collectives in @e (node and work
 * left, into @node and @rem); how many. */
static inline int32_t
group_front (const SgSimEngine *e, int32_t grp, SgNodeId *node, double *rem)
{
  int32_t k = 0;
  for (int32_t r = e->ghead[grp]; r >= 0 && k < FRONT_DEPTH; r = e->rnext[r], k++) {
    node[k] = e->rows[r].node;
    rem[k] = e->rem[r];
  }
  return k;
}

/* @e's state (its queues are per group: a collective queues in its own). */
static void
front_of (const SgSimEngine *e, int32_t ng, Front *F)
{
  int32_t k = 0;
  F->now = e->now;
  for (int32_t grp = 0; grp < ng; grp++) {
    F->first[grp] = k;
    F->held[grp] = e->hold[grp] != SG_HOLD_NONE;
    k += group_front (e, grp, F->node + k, F->rem + k);
  }
  F->first[ng] = k;
}

/* Is @a no later than @b (with @equal: the same) within @tol? NaN passes,
 * as it always did here. */
static inline bool
within (double a, double b, double tol, bool equal)
{
  return !(equal ? fabs (a - b) > tol : a > b + tol);
}

/* Is @e's state (a) better than @b (same nodes placed): at least as good,
 * and @b not at least as good as a? X is at least as good as Y when its
 * clock is no later and, per group, X's queue is a tail of Y's (it
 * finished more) with no more work left on each, and its head held only
 * where Y's is; with @equal, the states must match (within Y's tolerance,
 * from its clock). Both ways in one pass: @b can be at least as good as a
 * only where their queues are as long. a's groups are read from @e as
 * they are compared. */
static bool
better_than (const SgSimEngine *e, int32_t ng, const Front *b, bool equal)
{
  double tola = 1e-9 * (1.0 + e->now), tolb = 1e-9 * (1.0 + b->now);
  if (!within (e->now, b->now, tolb, equal))
    return false;
  bool ba = within (b->now, e->now, tola, equal);
  SgNodeId anode[FRONT_DEPTH];
  double arem[FRONT_DEPTH];
  for (int32_t grp = 0; grp < ng; grp++) {
    int32_t la = group_front (e, grp, anode, arem);
    bool aheld = e->hold[grp] != SG_HOLD_NONE;
    int32_t ib = b->first[grp], lb = b->first[grp + 1] - ib;
    if (la > lb || (equal && la != lb))
      return false;
    ba = ba && la == lb;
    for (int32_t k = 0; k < la; k++) {
      int32_t kb = ib + lb - la + k;
      if (anode[k] != b->node[kb] || !within (arem[k], b->rem[kb], tolb, equal))
        return false;
      ba = ba && within (b->rem[kb], arem[k], tola, equal);
    }
    if (la > 0 && aheld && (la != lb || !b->held[grp]))
      return false;
    if (equal && aheld != b->held[grp])
      return false;
    /* @b's queue as long as a's (ba) */
    if (lb > 0 && b->held[grp] && !aheld)
      ba = false;
  }
  return !ba;
}

typedef struct {
  const SgSchedProblem *P;
  const SgGraph *g;
  SgSimEngine *e;
  int32_t ng;               /* groups (at least 1) */
  bool equal;               /* dominance means equality (overlap can lose) */
  SgEngSnap at;             /* the window's start */
  Front trail[HORIZON + 1]; /* the given order past the window */
  double given_step;        /* its step, when it ends within the horizon */
  /* the collectives the given order issues in the window, in order (rows
   * from at's n_rows on) */
  int32_t n_given_rows;
  SgNodeId given_rows[WINDOW_NODES];
  /* per node of the window and the horizon: what sg_eng_place looks up
   * (sg_eng_place_arg) */
  int32_t arg[WINDOW_NODES + HORIZON];
} Polish;

/* Looks up what placing out[@pos, @h) needs. */
static void
look_up (Polish *Q, const SgNodeId *out, int32_t pos, int32_t h)
{
  for (int32_t i = pos; i < h; i++) {
    SgNodeId x = out[i];
    Q->arg[i - pos] = sg_eng_place_arg (Q->e, x, (SgRole)Q->P->role[x], Q->P->kslot[x]);
  }
}

/* sg_eng_place of @x (no node times), with what look_up found (@arg). */
static inline void
place_at (Polish *Q, SgNodeId x, int32_t arg)
{
  sg_eng_place_as (Q->e, x, (SgRole)Q->P->role[x], Q->P->cost[x], arg);
}

/* Is the state past the window at @p (end < @p) the one at @p - 1? Placing
 * compute of no work changes nothing the fronts hold (sg_eng_compute_in:
 * the node's times alone), in the given order as after a window order:
 * the checks there are those at @p - 1. */
static inline bool
as_before (const Polish *Q, const SgNodeId *out, int32_t end, int32_t p)
{
  SgNodeId x = out[p - 1];
  return p > end && Q->P->role[x] == SG_ROLE_COMPUTE && !(Q->P->cost[x] > 0.0);
}

/* Simulates the given order over the window and HORIZON nodes past it
 * from the window's start, saving the state at each node past it where it
 * may have changed (as_before) and the step, when the order ends within
 * the horizon. */
static void
given_trail (Polish *Q, const SgNodeId *out, int32_t pos, int32_t end)
{
  int32_t n = Q->g->n_nodes, h = MIN (n, end + HORIZON);
  sg_eng_restore (Q->e, &Q->at);
  look_up (Q, out, pos, h);
  for (int32_t i = pos; i < end; i++)
    place_at (Q, out[i], Q->arg[i - pos]);
  Q->n_given_rows = Q->e->n_rows - Q->at.top.n_rows;
  for (int32_t k = 0; k < Q->n_given_rows; k++)
    Q->given_rows[k] = Q->e->rows[Q->at.top.n_rows + k].node;
  for (int32_t p = end; p <= h; p++) {
    if (!as_before (Q, out, end, p))
      front_of (Q->e, Q->ng, &Q->trail[p - end]);
    if (p < h)
      place_at (Q, out[p], Q->arg[p - pos]);
  }
  Q->given_step = 0.0;
  if (h == n) {
    double ce = Q->e->now;
    sg_eng_drain (Q->e);
    Q->given_step = MAX (ce, Q->e->now);
  }
}

/* Did the window's collectives issue in the given order's order (so rows
 * are the same collectives in both)? */
static bool
same_rows (const Polish *Q)
{
  const SgSimEngine *e = Q->e;
  if (e->n_rows - Q->at.top.n_rows != Q->n_given_rows)
    return false;
  for (int32_t k = 0; k < Q->n_given_rows; k++)
    if (e->rows[Q->at.top.n_rows + k].node != Q->given_rows[k])
      return false;
  return true;
}

/* With the same rows (same_rows), is @e's state the one of front @b, as
 * far as what follows depends on it? Between placements only a group's
 * head runs or is held (held for the next kernel: no kernel runs), the
 * rows behind it are as issued, and the rates are the rows'. Then the two
 * go on alike: neither can catch up with the other. */
static bool
same_as (const SgSimEngine *e, int32_t ng, const Front *b)
{
  if (e->now != b->now)
    return false;
  for (int32_t grp = 0; grp < ng; grp++) {
    int32_t ib = b->first[grp], lb = b->first[grp + 1] - ib;
    int32_t r = e->ghead[grp], la = 0;
    for (int32_t q = r; q >= 0 && la < FRONT_DEPTH; q = e->rnext[q])
      la++;
    if (la != lb || (e->hold[grp] != SG_HOLD_NONE) != b->held[grp])
      return false;
    if (la > 0 && (e->rows[r].node != b->node[ib] || e->rem[r] != b->rem[ib]))
      return false;
  }
  return true;
}

/* Does the window order @cand (window positions) for out[@pos, @end),
 * placed on the window's start and followed by the given order, catch up
 * with the given order (given_trail) within HORIZON nodes, or end with a
 * shorter step? */
static bool
catches_up (Polish *Q, const SgNodeId *out, int32_t pos, int32_t end, const int32_t *cand)
{
  int32_t n = Q->g->n_nodes, h = MIN (n, end + HORIZON);
  sg_eng_restore (Q->e, &Q->at);
  for (int32_t i = 0; i < end - pos; i++)
    place_at (Q, out[pos + cand[i]], Q->arg[cand[i]]);
  bool rows = same_rows (Q);
  for (int32_t p = end; p <= h; p++) {
    /* better_than's first test, on the clock, before reading the
     * candidate's state; none where both states are as before (the
     * checks there found nothing) */
    const Front *t = &Q->trail[p - end];
    if (!as_before (Q, out, end, p)
        && within (Q->e->now, t->now, 1e-9 * (1.0 + t->now), Q->equal)) {
      if (rows && same_as (Q->e, Q->ng, t))
        return false; /* the same from here on: not better */
      if (better_than (Q->e, Q->ng, t, Q->equal))
        return true;
    }
    if (p < h)
      place_at (Q, out[p], Q->arg[p - pos]);
  }
  if (h < n)
    return false;
  double ce = Q->e->now;
  sg_eng_drain (Q->e);
  return MAX (ce, Q->e->now) < Q->given_step - 1e-9 * (1.0 + Q->given_step);
}

/* Compute work of out[0, @end), summed in order: the prefix sums
 * pre[0 .. *ok] are valid (a window that changes moves *ok back to its
 * start), so each is added once per change instead of once per window. */
static double
done_before (const SgSchedProblem *P, const SgNodeId *out, double *pre, int32_t *ok,
             int32_t end)
{
  for (; *ok < end; (*ok)++)
    pre[*ok + 1] = pre[*ok] + (P->role[out[*ok]] == SG_ROLE_COMPUTE ? P->cost[out[*ok]] : 0.0);
  return pre[end];
}

/* --- the walk, windows searched side by side ---------------------------------------- */

/* Where a window is searched: its engine (the walk's own when windows are
 * searched one at a time, else a copy), search and checks. */
typedef struct {
  SgSimEngine own;
  int32_t lo; /* sg_eng_copy_state into own */
  SgSearch *S;
  Polish Q;   /* Q.e: the engine */
  int32_t cpos[WINDOW_NODES]; /* a kept order (window positions) */
  SgNodeId cand[WINDOW_NODES]; /* its nodes */
} Slot;

/* A window to search: what the sequential walk would give it (given that
 * the windows before it in its batch change nothing), and what it found. */
typedef struct {
  int32_t pos, end, mid;
  int64_t window_budget, states;
  int32_t tries; /* kept orders checked at most */
  double rest;   /* compute work after the window */
  SgEngSnap at;  /* the walk's engine at pos */
  int64_t expanded;
  int32_t checks; /* catch-up checks made */
  bool took;      /* its slot's cand is the window's new order */
} Win;

typedef struct {
  const SgSchedProblem *P;
  const SgGraph *g;
  int32_t n, n_slots;
  SgNodeId *out;
  SgSimEngine e; /* the walk: at out[pos] */
  int32_t pos;
  double *pre; /* done_before */
  int32_t pre_ok;
  int64_t budget, window_budget;
  int32_t improved;
  Slot *slots;
  Win *wins; /* n_slots */
  int32_t n_wins;
  int32_t batch; /* windows to search in the next batch (<= n_slots) */
} Walk;

static void
slot_init (Slot *s, const SgSchedProblem *P, SgSimEngine *e, bool equal)
{
  const SgGraph *g = P->g;
  int32_t ng = MAX (g->n_groups, 1);
  if (!e) {
    sg_eng_init (&s->own, g, NULL, false);
    e = &s->own;
  }
  s->Q = (Polish){ .P = P, .g = g, .e = e, .ng = ng, .equal = equal };
  for (int32_t i = 0; i <= HORIZON; i++)
    front_init (&s->Q.trail[i], ng);
}

static void
slot_clear (Slot *s)
{
  sg_search_free (s->S);
  sg_eng_snap_clear (&s->Q.at);
  for (int32_t i = 0; i <= HORIZON; i++)
    front_clear (&s->Q.trail[i]);
  if (s->Q.e == &s->own)
    sg_eng_clear (&s->own);
}

/* Nodes per task of the setup's rate look-ups. */
#define SETUP_CHUNK 65536

/* The setup's tasks: whether overlap can cost more than exposing (the
 * bound's rates of the collectives, a chunk of nodes each, on their own
 * rates memo), then the slots' engines. */
typedef struct {
  Walk *W;
  int32_t n_chunks;
  bool *monotone; /* per chunk */
} Setup;

static void
setup_task (gpointer data, int32_t i, int32_t worker)
{
  (void)worker;
  Setup *su = data;
  Walk *W = su->W;
  if (i >= su->n_chunks) {
    slot_init (&W->slots[i - su->n_chunks], W->P, NULL, false);
    return;
  }
  int32_t lo = i * SETUP_CHUNK, hi = MIN (W->n, lo + SETUP_CHUNK), nc = 0;
  g_autofree SgNodeId *colls = g_new (SgNodeId, (size_t)MAX (hi - lo, 1));
  for (SgNodeId x = lo; x < hi; x++)
    if (W->P->role[x] == SG_ROLE_COLL)
      colls[nc++] = x;
  SgSimEngine e;
  sg_eng_fork_rates (&e, &W->e);
  SgBoundRates R;
  sg_bound_rates_init (&R, &e, colls, nc);
  su->monotone[i] = R.monotone;
  sg_bound_rates_clear (&R);
  sg_eng_fork_clear (&e);
}

/* Searches window @i of the batch on its slot (a task): the search, then
 * the kept orders against the given one until one catches up. */
static void
window_task (gpointer data, int32_t i, int32_t worker)
{
  (void)worker;
  Walk *W = data;
  Win *w = &W->wins[i];
  Slot *s = &W->slots[i];
  SgSimEngine *e = s->Q.e;
  const SgNodeId *out = W->out;
  int32_t m = w->end - w->pos;
  sg_eng_save (e, &s->Q.at);
  if (s->S)
    sg_search_reset (s->S, out + w->pos, m, SG_SEARCH_EARLY, w->states);
  else
    s->S = sg_search_new (W->g, e, out + w->pos, m, NULL, SG_SEARCH_EARLY, w->states);
  sg_search_run (s->S, w->rest);
  w->expanded = sg_search_expanded (s->S);
  w->checks = 0;
  w->took = false;
  bool traced = false;
  for (int32_t k = 0; k < MIN (sg_search_n_kept (s->S), w->tries) && !w->took; k++) {
    sg_search_kept_positions (s->S, k, s->cpos);
    sg_search_kept (s->S, k, s->cand);
    if (memcmp (s->cand, out + w->pos, sizeof (SgNodeId) * (size_t)m) == 0)
      continue;
    if (!traced)
      given_trail (&s->Q, out, w->pos, w->end);
    traced = true;
    w->took = catches_up (&s->Q, out, w->pos, w->end, s->cpos);
    w->checks++;
  }
  sg_eng_restore (e, &s->Q.at);
}

/* Places out[pos, mid) of the window at pos (to the end when the window
 * reaches it). */
static void
walk_on (Walk *W, int32_t end, int32_t mid)
{
  if (end >= W->n)
    mid = W->n;
  for (int32_t i = W->pos; i < mid; i++)
    sg_sched_place (W->P, &W->e, W->out[i]);
  W->pos = mid;
}

/* Walks from pos to the next n_slots windows to search (or to the end),
 * setting them up: each gets the state, budget and tries the sequential
 * walk would give it if the windows before it took nothing. The walk
 * stops at the last window when the batch is full (it is searched from
 * there). */
static void
plan_batch (Walk *W)
{
  const SgGraph *g = W->g;
  int64_t wb = W->window_budget;
  W->n_wins = 0;
  while (W->pos < W->n) {
    Win *w = &W->wins[W->n_wins];
    int32_t pos = W->pos;
    int32_t end = window_end (W->P, W->out, pos, POLISH_DECISIONS);
    int32_t mid = window_end (W->P, W->out, pos, POLISH_DECISIONS / 2);
    sg_eng_save (&W->e, &w->at);
    bool trouble = has_trouble (W->P, &W->e, W->out, pos, end);
    sg_eng_restore (&W->e, &w->at);
    if (trouble && sg_search_fits (g, &W->e, W->out + pos, end - pos)) {
      w->pos = pos;
      w->end = end;
      w->mid = mid;
      w->window_budget = wb;
      /* past the first window the budget left is not known: assumed to
       * cover the window's, and checked when the result is taken */
      w->states = W->n_wins == 0 ? MIN (wb, W->budget) : wb;
      w->tries = wb == WINDOW_BUDGET ? SG_SEARCH_KEEP : 2;
      w->rest = W->P->base_us[W->n] - done_before (W->P, W->out, W->pre, &W->pre_ok, end);
      Slot *s = &W->slots[W->n_wins];
      if (s->Q.e != &W->e)
        sg_eng_copy_state (s->Q.e, &W->e, &s->lo);
      wb = MAX (wb / 2, WINDOW_MIN);
      if (++W->n_wins == W->batch)
        return;
    }
    walk_on (W, end, mid);
  }
}

/* The walk's engine is back at window @w's start: the collectives the
 * slots issued past that state may not be the ones it goes on to issue. */
static void
rewind_to (Walk *W, const Win *w)
{
  sg_eng_restore (&W->e, &w->at);
  W->pos = w->pos;
  for (int32_t i = 0; i < W->n_slots; i++)
    W->slots[i].lo = MIN (W->slots[i].lo, W->e.n_rows);
}

/* The next batch: twice this one when all of it was taken, else twice
 * what was (windows that change the order come in runs). Only the time
 * the pass takes depends on it. */
static void
next_batch (Walk *W, int32_t taken)
{
  W->batch = CLAMP (2 * taken, MIN (2, W->n_slots), W->n_slots);
}

/* Takes the batch's results in order, as the sequential walk would, up to
 * the first window that changed the order (the rest assumed it did not)
 * or whose budget was not what the walk gives it. False when the budget
 * is spent. */
static bool
take_batch (Walk *W)
{
  for (int32_t i = 0; i < W->n_wins; i++) {
    Win *w = &W->wins[i];
    if (w->window_budget != W->window_budget || w->states != MIN (W->window_budget, W->budget)) {
      rewind_to (W, w); /* searched again, first of the next batch */
      next_batch (W, i);
      return true;
    }
    W->budget -= w->expanded;
    W->budget -= (int64_t)w->checks * ((w->end - w->pos + HORIZON) / 4); /* a check costs about
                                                                        * that many states */
    if (w->took) {
      memcpy (W->out + w->pos, W->slots[i].cand, sizeof (SgNodeId) * (size_t)(w->end - w->pos));
      W->pre_ok = MIN (W->pre_ok, w->pos);
      W->improved++;
    }
    /* effort goes where windows improve */
    W->window_budget = w->took ? WINDOW_BUDGET : MAX (W->window_budget / 2, WINDOW_MIN);
    if (W->budget <= 0)
      return false; /* the rest stays as it is */
    bool last = i == W->n_wins - 1 && W->pos == w->pos;
    if (w->took || last) {
      if (w->took)
        rewind_to (W, w);
      walk_on (W, w->end, w->mid);
      next_batch (W, i + 1);
      return true;
    }
  }
  next_batch (W, W->n_wins);
  return true;
}

int32_t
sg_polish (SgSchedProblem *P, SgPool *pool, SgNodeId *order, SgSimResult *res)
{
  const SgGraph *g = P->g;
  int32_t n = g->n_nodes;
  Walk W = { .P = P, .g = g, .n = n };
  sg_eng_init (&W.e, g, NULL, false);
  /* Windows are searched a batch at a time, one per slot: with one slot,
   * on the walk's engine, as the sequential walk does. */
  W.n_slots = MIN (sg_pool_size (pool), POLISH_MAX_SLOTS);
  W.batch = W.n_slots;
  W.slots = g_new0 (Slot, (size_t)W.n_slots);
  W.wins = g_new0 (Win, (size_t)W.n_slots);
  Setup su = { .W = &W, .n_chunks = MAX ((n + SETUP_CHUNK - 1) / SETUP_CHUNK, 1) };
  g_autofree bool *monotone = su.monotone = g_new (bool, (size_t)su.n_chunks);
  sg_pool_run (pool, su.n_chunks + (W.n_slots > 1 ? W.n_slots : 0), setup_task, &su);
  if (W.n_slots == 1)
    slot_init (&W.slots[0], P, &W.e, false);
  /* dominance means equality when overlap can lose */
  bool equal = false;
  for (int32_t i = 0; i < su.n_chunks; i++)
    equal |= !monotone[i];
  for (int32_t i = 0; i < W.n_slots; i++)
    W.slots[i].Q.equal = equal;
  W.out = g_memdup2 (order, sizeof (SgNodeId) * (size_t)MAX (n, 1));
  W.pre = g_new0 (double, (size_t)n + 1);
  W.budget = MIN ((int64_t)STATES_PER_NODE * n + WINDOW_BUDGET, STATES_MAX);
  W.window_budget = WINDOW_BUDGET;
  for (;;) {
    plan_batch (&W);
    if (W.n_wins == 0)
      break;
    if (W.n_wins == 1)
      window_task (&W, 0, 0);
    else
      sg_pool_run (pool, W.n_wins, window_task, &W);
    if (!take_batch (&W))
      break;
  }
  for (int32_t i = 0; i < W.n_slots; i++) {
    slot_clear (&W.slots[i]);
    sg_eng_snap_clear (&W.wins[i].at);
  }
  g_free (W.slots);
  g_free (W.wins);
  g_free (W.pre);
  sg_eng_clear (&W.e);
  if (W.n_slots > 1)
    sg_pool_trim (pool);
  g_autofree SgNodeId *out = W.out;
  if (W.improved == 0)
    return 0;
  if (!P->has_limit)
    sg_sched_problem_live (P, false);
  SgSimResult r;
  if (!sg_simulate (g, out, &r, NULL))
    return 0;
  bool better = r.step_us < res->step_us - 1e-9 * (1.0 + res->step_us)
                && r.peak_bytes <= MAX (P->limit, res->peak_bytes);
  if (better) {
    memcpy (order, out, sizeof (SgNodeId) * (size_t)n);
    *res = r;
  } else {
    sg_sim_result_clear (&r);
  }
  return better ? W.improved : 0;
}
