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
 * Only windows with something to gain are searched: one where the compute
 * stream stalls or a collective is held by the start wait. The states
 * searched are bounded per window and in total (proportional to the nodes),
 * so the pass stays near-linear; the counts are deterministic.
 * Mirrors: large neighbourhood search (Shaw, CP 1998) with the exact
 * scheduler as the neighbourhood solver.
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

static bool
is_decision (const SgGraph *g, SgNodeId x)
{
  const SgNode *n = &g->nodes[x];
  SgRole r = sg_sched_role (n);
  return r != SG_ROLE_COMPUTE || sg_sched_cost (n) > 0.0;
}

/* End of the window that starts at @pos: @k decisions further. */
static int32_t
window_end (const SgGraph *g, const SgNodeId *order, int32_t pos, int32_t k)
{
  int32_t end = pos, d = 0;
  while (end < g->n_nodes && d < k && end - pos < WINDOW_NODES)
    d += is_decision (g, order[end++]);
  /* the free nodes that follow go with it */
  while (end < g->n_nodes && end - pos < WINDOW_NODES && !is_decision (g, order[end])
         && order[end] != g->output)
    end++;
  return end;
}

/* Does the window [@pos, @end) stall or hold a collective? Simulates it
 * on @e (a scratch copy is not needed: the caller restores @e). */
static bool
has_trouble (SgSimEngine *e, const SgNodeId *order, int32_t pos, int32_t end)
{
  for (int32_t i = pos; i < end; i++) {
    double t0 = e->now;
    SgRole r = sg_sched_role (&e->g->nodes[order[i]]);
    sg_eng_place (e, order[i]);
    if ((r == SG_ROLE_WAIT && e->now > t0) || e->n_held > 0)
      return true;
  }
  return false;
}

/* Nodes past a window over which a changed window must catch up with the
 * given order (dominate it at the same point) to be taken. */
#define HORIZON 96

/* What the dominance below compares of an engine state: the clock and,
 * per group, the first SG_SNAP_PREFIX queued collectives (node and work
 * left: the rows sg_eng_save keeps) and whether its head is held. Cheaper
 * to take than a save, which also keeps what restoring needs. */
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
  F->node = g_new (SgNodeId, (size_t)ng * SG_SNAP_PREFIX);
  F->rem = g_new (double, (size_t)ng * SG_SNAP_PREFIX);
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

/* @e's state (its queues are per group: a collective queues in its own). */
static void
front_of (const SgSimEngine *e, int32_t ng, Front *F)
{
  int32_t k = 0;
  F->now = e->now;
  for (int32_t grp = 0; grp < ng; grp++) {
    F->first[grp] = k;
    F->held[grp] = e->hold[grp] != SG_HOLD_NONE;
    int32_t r = e->ghead[grp];
    for (int32_t depth = 0; r >= 0 && depth < SG_SNAP_PREFIX; r = e->rnext[r], depth++) {
      F->node[k] = e->rows[r].node;
      F->rem[k++] = e->rem[r];
    }
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

/* Is state @a at least as good as @b (same nodes placed)? Clock no later;
 * per group, @a's queue is a tail of @b's (it finished more) with no more
 * work left on each, and its head held only where @b's is. With @equal,
 * the states must match. */
static bool
front_dominates (int32_t ng, const Front *a, const Front *b, bool equal)
{
  double tol = 1e-9 * (1.0 + b->now);
  if (!within (a->now, b->now, tol, equal))
    return false;
  for (int32_t grp = 0; grp < ng; grp++) {
    int32_t ia = a->first[grp], la = a->first[grp + 1] - ia;
    int32_t ib = b->first[grp], lb = b->first[grp + 1] - ib;
    if (la > lb || (equal && la != lb))
      return false;
    for (int32_t k = 0; k < la; k++) {
      int32_t kb = ib + lb - la + k;
      if (a->node[ia + k] != b->node[kb] || !within (a->rem[ia + k], b->rem[kb], tol, equal))
        return false;
    }
    if (la > 0 && a->held[grp] && (la != lb || !b->held[grp]))
      return false;
    if (equal && a->held[grp] != b->held[grp])
      return false;
  }
  return true;
}

typedef struct {
  const SgGraph *g;
  SgSimEngine *e;
  int32_t ng;               /* groups (at least 1) */
  bool equal;               /* dominance means equality (overlap can lose) */
  SgEngSnap at;             /* the window's start */
  Front cur;                /* scratch */
  Front trail[HORIZON + 1]; /* the given order past the window */
  double given_step;        /* its step, when it ends within the horizon */
} Polish;

/* Simulates the given order over the window and HORIZON nodes past it
 * from the window's start, saving the state at each node past it (and the
 * step, when the order ends within the horizon). */
static void
given_trail (Polish *Q, const SgNodeId *out, int32_t pos, int32_t end)
{
  int32_t n = Q->g->n_nodes, h = MIN (n, end + HORIZON);
  sg_eng_restore (Q->e, &Q->at);
  for (int32_t i = pos; i < end; i++)
    sg_eng_place (Q->e, out[i]);
  for (int32_t p = end; p <= h; p++) {
    front_of (Q->e, Q->ng, &Q->trail[p - end]);
    if (p < h)
      sg_eng_place (Q->e, out[p]);
  }
  Q->given_step = 0.0;
  if (h == n) {
    double ce = Q->e->now;
    sg_eng_drain (Q->e);
    Q->given_step = MAX (ce, Q->e->now);
  }
}

/* Does the window order @cand for out[@pos, @end), placed on the window's
 * start and followed by the given order, catch up with the given order
 * (given_trail) within HORIZON nodes, or end with a shorter step? */
static bool
catches_up (Polish *Q, const SgNodeId *out, int32_t pos, int32_t end, const SgNodeId *cand)
{
  int32_t n = Q->g->n_nodes, h = MIN (n, end + HORIZON);
  sg_eng_restore (Q->e, &Q->at);
  for (int32_t i = 0; i < end - pos; i++)
    sg_eng_place (Q->e, cand[i]);
  for (int32_t p = end; p <= h; p++) {
    /* front_dominates's first test, on the clock, before taking the
     * candidate's front */
    const Front *t = &Q->trail[p - end];
    if (within (Q->e->now, t->now, 1e-9 * (1.0 + t->now), Q->equal)) {
      front_of (Q->e, Q->ng, &Q->cur);
      if (front_dominates (Q->ng, &Q->cur, t, Q->equal)
          && !front_dominates (Q->ng, t, &Q->cur, Q->equal))
        return true;
    }
    if (p < h)
      sg_eng_place (Q->e, out[p]);
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

int32_t
sg_polish (const SgSchedProblem *P, SgNodeId *order, SgSimResult *res)
{
  const SgGraph *g = P->g;
  int32_t n = g->n_nodes;
  SgSimEngine e;
  sg_eng_init (&e, g, NULL, false);
  Polish Q = { .g = g, .e = &e, .ng = MAX (g->n_groups, 1) };
  front_init (&Q.cur, Q.ng);
  for (int32_t i = 0; i <= HORIZON; i++)
    front_init (&Q.trail[i], Q.ng);
  {
    SgBoundRates R;
    int32_t nc = 0;
    g_autofree SgNodeId *colls = g_new (SgNodeId, (size_t)MAX (n, 1));
    for (SgNodeId x = 0; x < n; x++)
      if (P->role[x] == SG_ROLE_COLL)
        colls[nc++] = x;
    sg_bound_rates_init (&R, &e, colls, nc);
    Q.equal = !R.monotone;
    sg_bound_rates_clear (&R);
  }
  g_autofree int32_t *local = g_new (int32_t, (size_t)MAX (n, 1));
  for (int32_t i = 0; i < n; i++)
    local[i] = -1;
  g_autofree SgNodeId *out = g_memdup2 (order, sizeof (SgNodeId) * (size_t)MAX (n, 1));
  g_autofree SgNodeId *cand = g_new (SgNodeId, (size_t)MAX (n, 1));
  g_autofree double *pre = g_new0 (double, (size_t)n + 1);
  int32_t pre_ok = 0;
  int64_t budget = MIN ((int64_t)STATES_PER_NODE * n + WINDOW_BUDGET, STATES_MAX);
  int32_t improved = 0;
  int64_t window_budget = WINDOW_BUDGET;
  SgSearch *S = NULL; /* one search, aimed at each window in turn */
  for (int32_t pos = 0; pos < n;) {
    int32_t end = window_end (g, out, pos, POLISH_DECISIONS);
    int32_t mid = window_end (g, out, pos, POLISH_DECISIONS / 2);
    sg_eng_save (&e, &Q.at);
    bool trouble = budget > 0 && has_trouble (&e, out, pos, end);
    sg_eng_restore (&e, &Q.at);
    if (trouble && sg_search_fits (g, &e, out + pos, end - pos)) {
      int64_t states = MIN (window_budget, budget);
      if (S)
        sg_search_reset (S, out + pos, end - pos, SG_SEARCH_EARLY, states);
      else
        S = sg_search_new (g, &e, out + pos, end - pos, local, SG_SEARCH_EARLY, states);
      sg_search_run (S, P->base_us[P->n] - done_before (P, out, pre, &pre_ok, end));
      budget -= sg_search_expanded (S);
      bool took = false;
      int32_t tries = window_budget == WINDOW_BUDGET ? SG_SEARCH_KEEP : 2;
      bool traced = false;
      for (int32_t k = 0; k < MIN (sg_search_n_kept (S), tries) && !took; k++) {
        sg_search_kept (S, k, cand);
        if (memcmp (cand, out + pos, sizeof (SgNodeId) * (size_t)(end - pos)) == 0)
          continue;
        if (!traced)
          given_trail (&Q, out, pos, end);
        traced = true;
        took = catches_up (&Q, out, pos, end, cand);
        budget -= (end - pos + HORIZON) / 4; /* a check costs about that many states */
      }
      if (took) {
        memcpy (out + pos, cand, sizeof (SgNodeId) * (size_t)(end - pos));
        pre_ok = MIN (pre_ok, pos);
        improved++;
      }
      /* effort goes where windows improve */
      window_budget = took ? WINDOW_BUDGET : MAX (window_budget / 2, WINDOW_MIN);
      sg_eng_restore (&e, &Q.at);
    }
    if (budget <= 0)
      break; /* the rest stays as it is */
    if (end >= n)
      mid = n;
    for (int32_t i = pos; i < mid; i++)
      sg_eng_place (&e, out[i]);
    pos = mid;
  }
  sg_search_free (S);
  sg_eng_snap_clear (&Q.at);
  front_clear (&Q.cur);
  for (int32_t i = 0; i <= HORIZON; i++)
    front_clear (&Q.trail[i]);
  sg_eng_clear (&e);
  if (improved == 0)
    return 0;
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
  return better ? improved : 0;
}
