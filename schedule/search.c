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

#include "schedule-private.h"

#define EPS 1e-9

/* A partial order kept for dominance. */
typedef struct {
  double now;
  double rem[SG_SEARCH_MAX_COLLS];
  uint8_t hold[SG_SEARCH_MAX_COLLS];
  uint8_t seq[SG_SEARCH_MAX_COLLS];
  int32_t next; /* next state of the same key, -1 */
} Memo;

/* One depth of the search. */
typedef struct {
  SgEngSnap snap;
  uint8_t *placed;
  int32_t *npend; /* inputs in the window not placed */
  int32_t n_placed;
  uint64_t key;   /* decision nodes placed (bits) */
  uint64_t cmask; /* compute nodes with a cost placed (bits) */
  double work;    /* their work */
  uint8_t seq[SG_SEARCH_MAX_COLLS];
  uint8_t *n_issued; /* per group: collectives issued in the window */
} Frame;

struct SgSearch {
  const SgGraph *g;
  SgSimEngine *e; /* at the window's start on entry, restored on exit */
  SgSearchGoal goal;
  int32_t m, ng;
  SgNodeId *node;  /* window position -> node */
  int32_t *local;  /* node -> window position, -1 (n entries, owned by the caller) */
  uint8_t *role;
  double *cost;
  int32_t *dec, *comp, *coll; /* position -> decision bit / compute bit / collective index, -1 */
  SgNodeId *coll_of;          /* position -> the collective a wait waits on, SG_NO_NODE */
  uint32_t *ifirst, *ufirst;  /* in-window inputs and users, CSR by position */
  int32_t *ins, *users;
  int32_t n_dec, n_comp, n_coll;
  int32_t *quick; /* positions closure may place: neither costly compute nor a collective */
  int32_t n_quick;
  SgNodeId coll_node[SG_SEARCH_MAX_COLLS]; /* tracked collectives: the window's, then
                                            * those running at its start */
  int32_t n_track;
  uint64_t anc[SG_SEARCH_MAX_COLLS], desc[SG_SEARCH_MAX_COLLS]; /* compute bits */
  SgNodeId *beyond; /* per group: the first queued collective not tracked, or SG_NO_NODE */
  double ccost[64];
  double window_work; /* compute work of the window */
  SgBoundRates rates;
  SgBoundScratch bs;
  bool monotone;
  Frame *frames;
  int32_t *order, *best; /* positions */
  double best_value;
  double rest; /* SG_SEARCH_EARLY: compute work after the window */
  /* SG_SEARCH_EARLY: the SG_SEARCH_KEEP best window orders by score */
  int32_t n_kept;
  double kept_score[SG_SEARCH_KEEP];
  int32_t *kept[SG_SEARCH_KEEP];
  bool found;
  double *ef;    /* scratch of the critical-path bound (by position) */
  uint64_t *mkeys;
  int32_t *mhead;
  int32_t mcap, mused;
  Memo *states;
  int32_t n_states, cap_states;
  int64_t expanded, budget;
  bool gave_up;
};

/* --- setup -------------------------------------------------------------------------- */

static bool
costly (const SgSearch *S, int32_t i)
{
  return S->role[i] == SG_ROLE_COMPUTE && S->cost[i] > 0.0;
}

/* Bits of the window's costly compute reachable from position @from. */
static uint64_t
reach_mask (const SgSearch *S, int32_t from, bool up, uint8_t *seen, int32_t *stack)
{
  memset (seen, 0, (size_t)S->m);
  int32_t sp = 0;
  uint64_t mk = 0;
  stack[sp++] = from;
  seen[from] = 1;
  while (sp > 0) {
    int32_t x = stack[--sp];
    if (x != from && S->comp[x] >= 0)
      mk |= (uint64_t)1 << S->comp[x];
    const uint32_t *first = up ? S->ifirst : S->ufirst;
    const int32_t *next = up ? S->ins : S->users;
    for (uint32_t a = first[x]; a < first[x + 1]; a++)
      if (!seen[next[a]]) {
        seen[next[a]] = 1;
        stack[sp++] = next[a];
      }
  }
  return mk;
}

bool
sg_search_fits (const SgGraph *g, const SgSimEngine *e, const SgNodeId *nodes, int32_t m)
{
  int32_t nd = 0, nc = 0, run = 0;
  for (int32_t i = 0; i < m; i++) {
    const SgNode *x = &g->nodes[nodes[i]];
    SgRole r = sg_sched_role (x);
    nd += r != SG_ROLE_COMPUTE || sg_sched_cost (x) > 0.0;
    nc += r == SG_ROLE_COLL;
  }
  for (int32_t grp = 0; grp < e->n_groups; grp++) {
    int32_t depth = 0;
    for (int32_t r = e->ghead[grp]; r >= 0 && depth < SG_SEARCH_QUEUE_DEPTH; r = e->rnext[r])
      depth++;
    run += depth;
  }
  return nd <= 64 && nc + run <= SG_SEARCH_MAX_COLLS && g->n_groups <= 255;
}

SgSearch *
sg_search_new (const SgGraph *g, SgSimEngine *e, const SgNodeId *nodes, int32_t m,
               int32_t *local, SgSearchGoal goal, int64_t budget)
{
  g_return_val_if_fail (sg_search_fits (g, e, nodes, m), NULL);
  SgSearch *S = g_new0 (SgSearch, 1);
  S->g = g;
  S->e = e;
  S->goal = goal;
  S->m = m;
  S->ng = MAX (g->n_groups, 1);
  S->local = local;
  S->budget = budget;
  S->node = g_memdup2 (nodes, sizeof (SgNodeId) * (size_t)MAX (m, 1));
  S->role = g_new (uint8_t, (size_t)MAX (m, 1));
  S->cost = g_new (double, (size_t)MAX (m, 1));
  S->dec = g_new (int32_t, (size_t)MAX (m, 1));
  S->comp = g_new (int32_t, (size_t)MAX (m, 1));
  S->coll = g_new (int32_t, (size_t)MAX (m, 1));
  S->coll_of = g_new (SgNodeId, (size_t)MAX (m, 1));
  S->quick = g_new (int32_t, (size_t)MAX (m, 1));
  S->ifirst = g_new0 (uint32_t, (size_t)m + 1);
  S->ufirst = g_new0 (uint32_t, (size_t)m + 1);
  for (int32_t i = 0; i < m; i++)
    local[nodes[i]] = i;
  for (int32_t i = 0; i < m; i++) {
    const SgNode *x = &g->nodes[nodes[i]];
    S->role[i] = (uint8_t)sg_sched_role (x);
    S->cost[i] = sg_sched_cost (x);
    S->dec[i] = S->comp[i] = S->coll[i] = -1;
    S->coll_of[i] = SG_NO_NODE;
    if (costly (S, i)) {
      S->comp[i] = S->n_comp;
      S->ccost[S->n_comp++] = S->cost[i];
      S->window_work += S->cost[i];
    } else if (S->role[i] == SG_ROLE_COLL) {
      S->coll_node[S->n_coll] = nodes[i];
      S->coll[i] = S->n_coll++;
    } else if (S->role[i] == SG_ROLE_WAIT) {
      SgNodeId c = sg_node_wait_target (g, nodes[i]);
      if (c != SG_NO_NODE && sg_sched_role (&g->nodes[c]) == SG_ROLE_COLL)
        S->coll_of[i] = c;
    }
    if (S->comp[i] >= 0 || S->coll[i] >= 0 || S->coll_of[i] != SG_NO_NODE)
      S->dec[i] = S->n_dec++;
    if (S->comp[i] < 0 && S->coll[i] < 0)
      S->quick[S->n_quick++] = i;
    uint32_t k;
    const SgNodeId *in = sg_node_inputs (g, nodes[i], &k);
    for (uint32_t j = 0; j < k; j++)
      if (local[in[j]] >= 0) {
        S->ifirst[i + 1]++;
        S->ufirst[local[in[j]] + 1]++;
      }
  }
  S->n_track = S->n_coll;
  S->beyond = g_new (SgNodeId, (size_t)S->ng);
  for (int32_t grp = 0; grp < S->ng; grp++) {
    int32_t depth = 0, r = grp < e->n_groups ? e->ghead[grp] : -1;
    for (; r >= 0 && depth < SG_SEARCH_QUEUE_DEPTH; r = e->rnext[r], depth++)
      S->coll_node[S->n_track++] = e->rows[r].node;
    S->beyond[grp] = r >= 0 ? e->rows[r].node : SG_NO_NODE;
  }
  for (int32_t i = 0; i < m; i++) {
    S->ifirst[i + 1] += S->ifirst[i];
    S->ufirst[i + 1] += S->ufirst[i];
  }
  S->ins = g_new (int32_t, (size_t)S->ifirst[m] + 1);
  S->users = g_new (int32_t, (size_t)S->ufirst[m] + 1);
  g_autofree uint32_t *fi = g_memdup2 (S->ifirst, sizeof (uint32_t) * ((size_t)m + 1));
  g_autofree uint32_t *fu = g_memdup2 (S->ufirst, sizeof (uint32_t) * ((size_t)m + 1));
  for (int32_t i = 0; i < m; i++) {
    uint32_t k;
    const SgNodeId *in = sg_node_inputs (g, nodes[i], &k);
    for (uint32_t j = 0; j < k; j++) {
      int32_t l = local[in[j]];
      if (l < 0)
        continue;
      S->ins[fi[i]++] = l;
      S->users[fu[l]++] = i;
    }
  }
  if (goal == SG_SEARCH_STEP) {
    g_autofree uint8_t *seen = g_new (uint8_t, (size_t)MAX (m, 1));
    g_autofree int32_t *stack = g_new (int32_t, (size_t)m + 1);
    for (int32_t i = 0; i < m; i++)
      if (S->coll[i] >= 0) {
        S->anc[S->coll[i]] = reach_mask (S, i, true, seen, stack);
        S->desc[S->coll[i]] = reach_mask (S, i, false, seen, stack);
      }
  }
  S->rates = (SgBoundRates){ e->cs, e->ms, e->mr, g->n_groups };
  S->monotone = e->cs * (1.0 - 1.0 / MAX (e->ms, e->mr)) < 1.0;
  S->frames = g_new0 (Frame, (size_t)S->n_dec + 2);
  for (int32_t d = 0; d < S->n_dec + 2; d++) {
    S->frames[d].placed = g_new0 (uint8_t, (size_t)MAX (m, 1));
    S->frames[d].npend = g_new0 (int32_t, (size_t)MAX (m, 1));
    S->frames[d].n_issued = g_new0 (uint8_t, (size_t)S->ng);
  }
  S->order = g_new (int32_t, (size_t)MAX (m, 1));
  S->best = g_new (int32_t, (size_t)MAX (m, 1));
  S->ef = g_new (double, (size_t)MAX (m, 1));
  S->best_value = INFINITY;
  if (goal == SG_SEARCH_EARLY)
    for (int32_t k = 0; k < SG_SEARCH_KEEP; k++)
      S->kept[k] = g_new (int32_t, (size_t)MAX (m, 1));
  S->mcap = 64;
  S->mkeys = g_new (uint64_t, (size_t)S->mcap);
  S->mhead = g_new (int32_t, (size_t)S->mcap);
  for (int32_t i = 0; i < S->mcap; i++)
    S->mhead[i] = -1;
  return S;
}

void
sg_search_free (SgSearch *S)
{
  if (!S)
    return;
  for (int32_t i = 0; i < S->m; i++)
    S->local[S->node[i]] = -1;
  for (int32_t d = 0; d < S->n_dec + 2; d++) {
    sg_eng_snap_clear (&S->frames[d].snap);
    g_free (S->frames[d].placed);
    g_free (S->frames[d].npend);
    g_free (S->frames[d].n_issued);
  }
  g_free (S->frames);
  g_free (S->beyond);
  g_free (S->node);
  g_free (S->role);
  g_free (S->cost);
  g_free (S->dec);
  g_free (S->comp);
  g_free (S->coll);
  g_free (S->coll_of);
  g_free (S->quick);
  g_free (S->ifirst);
  g_free (S->ufirst);
  g_free (S->ins);
  g_free (S->users);
  g_free (S->order);
  g_free (S->best);
  for (int32_t k = 0; k < SG_SEARCH_KEEP; k++)
    g_free (S->kept[k]);
  g_free (S->ef);
  g_free (S->mkeys);
  g_free (S->mhead);
  g_free (S->states);
  sg_bound_scratch_clear (&S->bs);
  g_free (S);
}

/* --- placing ------------------------------------------------------------------------ */

static void
place (SgSearch *S, Frame *f, int32_t i)
{
  g_assert (!f->placed[i] && f->npend[i] == 0);
  SgNodeId x = S->node[i];
  if (S->coll[i] >= 0)
    f->seq[S->coll[i]] = f->n_issued[S->g->nodes[x].group]++;
  sg_eng_place (S->e, x);
  f->placed[i] = 1;
  S->order[f->n_placed++] = i;
  if (S->dec[i] >= 0)
    f->key |= (uint64_t)1 << S->dec[i];
  if (S->comp[i] >= 0) {
    f->cmask |= (uint64_t)1 << S->comp[i];
    f->work += S->cost[i];
  }
  for (uint32_t a = S->ufirst[i]; a < S->ufirst[i + 1]; a++)
    f->npend[S->users[a]]--;
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

static void
closure (SgSearch *S, Frame *f)
{
  for (bool changed = true; changed;) {
    changed = false;
    for (int32_t k = 0; k < S->n_quick; k++) {
      int32_t i = S->quick[k];
      if (!f->placed[i] && f->npend[i] == 0 && free_now (S, f, i)) {
        place (S, f, i);
        changed = true;
      }
    }
  }
}

static void
frame_copy (const SgSearch *S, Frame *dst, const Frame *src)
{
  memcpy (dst->placed, src->placed, (size_t)S->m);
  memcpy (dst->npend, src->npend, sizeof (int32_t) * (size_t)S->m);
  memcpy (dst->n_issued, src->n_issued, (size_t)S->ng);
  memcpy (dst->seq, src->seq, sizeof dst->seq);
  dst->n_placed = src->n_placed;
  dst->key = src->key;
  dst->cmask = src->cmask;
  dst->work = src->work;
}

/* --- dominance ------------------------------------------------------------------------- */

static void
state_of (const SgSearch *S, const Frame *f, Memo *mo)
{
  const SgSimEngine *e = S->e;
  memset (mo, 0, sizeof *mo);
  mo->now = e->now;
  for (int32_t c = 0; c < S->n_track; c++) {
    int32_t r = e->row_of[S->coll_node[c]];
    mo->seq[c] = c < S->n_coll ? f->seq[c] : 0;
    if (r < 0 || e->fin[r])
      continue;
    mo->rem[c] = e->rem[r];
    int32_t grp = S->g->nodes[S->coll_node[c]].group;
    mo->hold[c] = e->ghead[grp] == r && e->hold[grp] != SG_HOLD_NONE;
  }
}

/* Is @a at least as good as @b (same placed set)? */
static bool
dominates (const SgSearch *S, const Memo *a, const Memo *b)
{
  double tol = EPS * (1.0 + b->now);
  bool eq = !S->monotone;
  if (eq ? fabs (a->now - b->now) > tol : a->now > b->now + tol)
    return false;
  for (int32_t c = 0; c < S->n_track; c++) {
    if (a->seq[c] != b->seq[c])
      return false;
    if (eq ? fabs (a->rem[c] - b->rem[c]) > tol || a->hold[c] != b->hold[c]
           : a->rem[c] > b->rem[c] + tol || a->hold[c] > b->hold[c])
      return false;
  }
  return true;
}

static uint64_t
mix (uint64_t k)
{
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdULL;
  k ^= k >> 33;
  k *= 0xc4ceb9fe1a85ec53ULL;
  return k ^ (k >> 33);
}

static void
memo_grow (SgSearch *S)
{
  int32_t oc = S->mcap;
  uint64_t *ok = S->mkeys;
  int32_t *oh = S->mhead;
  S->mcap *= 2;
  S->mkeys = g_new (uint64_t, (size_t)S->mcap);
  S->mhead = g_new (int32_t, (size_t)S->mcap);
  for (int32_t i = 0; i < S->mcap; i++)
    S->mhead[i] = -1;
  for (int32_t i = 0; i < oc; i++) {
    if (oh[i] < 0)
      continue;
    uint64_t at = mix (ok[i]) & (uint64_t)(S->mcap - 1);
    while (S->mhead[at] >= 0)
      at = (at + 1) & (uint64_t)(S->mcap - 1);
    S->mkeys[at] = ok[i];
    S->mhead[at] = oh[i];
  }
  g_free (ok);
  g_free (oh);
}

/* Has a collective queued past the tracked depth started, or ended? Then
 * the state is not compared. */
static bool
untracked_moved (const SgSearch *S)
{
  const SgSimEngine *e = S->e;
  for (int32_t grp = 0; grp < e->n_groups; grp++) {
    SgNodeId c = S->beyond[grp];
    if (c == SG_NO_NODE)
      continue;
    int32_t r = e->row_of[c];
    if (e->fin[r] || e->ghead[grp] == r)
      return true;
  }
  return false;
}

/* False when a partial order seen before dominates @f's; else remembers it. */
static bool
memo_admit (SgSearch *S, const Frame *f)
{
  if (untracked_moved (S))
    return true;
  Memo mo;
  state_of (S, f, &mo);
  if (2 * (S->mused + 1) > S->mcap)
    memo_grow (S);
  uint64_t at = mix (f->key) & (uint64_t)(S->mcap - 1);
  while (S->mhead[at] >= 0 && S->mkeys[at] != f->key)
    at = (at + 1) & (uint64_t)(S->mcap - 1);
  if (S->mhead[at] < 0) {
    S->mkeys[at] = f->key;
    S->mused++;
  }
  for (int32_t i = S->mhead[at]; i >= 0; i = S->states[i].next)
    if (dominates (S, &S->states[i], &mo))
      return false;
  if (S->n_states == S->cap_states) {
    S->cap_states = MAX (256, S->cap_states * 2);
    S->states = g_renew (Memo, S->states, (size_t)S->cap_states);
  }
  mo.next = S->mhead[at];
  S->states[S->n_states] = mo;
  S->mhead[at] = S->n_states++;
  return true;
}

/* --- bounds ------------------------------------------------------------------------------ */

static double
mask_cost (const SgSearch *S, uint64_t mk)
{
  double s = 0.0;
  for (; mk; mk &= mk - 1)
    s += S->ccost[__builtin_ctzll (mk)];
  return s;
}

/* SG_SEARCH_STEP: a lower bound on the step of any completion of @f. */
static double
lower_bound (SgSearch *S, const Frame *f)
{
  const SgSimEngine *e = S->e;
  double now = e->now, best = now;
  for (int32_t i = 0; i < S->m; i++) {
    double t;
    if (f->placed[i]) {
      int32_t r = S->role[i] == SG_ROLE_COLL ? e->row_of[S->node[i]] : -1;
      t = r >= 0 && !e->fin[r] ? now + e->rem[r] : now;
    } else {
      t = now;
      for (uint32_t a = S->ifirst[i]; a < S->ifirst[i + 1]; a++)
        t = MAX (t, S->ef[S->ins[a]]);
      t += S->cost[i];
    }
    S->ef[i] = t;
    best = MAX (best, t);
  }
  SgBoundJob jobs[SG_SEARCH_MAX_COLLS];
  int32_t nj = 0;
  uint64_t left = ~f->cmask;
  for (int32_t c = 0; c < S->n_track; c++) {
    SgNodeId x = S->coll_node[c];
    int32_t r = e->row_of[x];
    if (r >= 0 && e->fin[r])
      continue;
    SgBoundJob *j = &jobs[nj++];
    j->slot = sg_bound_slot (&S->g->nodes[x]);
    j->tail = c < S->n_coll ? mask_cost (S, S->desc[c] & left) : 0.0;
    j->head = r >= 0 ? 0.0 : mask_cost (S, S->anc[c] & left);
    j->work = r >= 0 ? e->rem[r] : sg_sched_cost (&S->g->nodes[x]);
  }
  double w = sg_bound_windows (&S->rates, S->window_work - f->work, jobs, nj, &S->bs);
  return MAX (best, now + w);
}

static bool
prune (SgSearch *S, const Frame *f)
{
  if (S->goal == SG_SEARCH_STEP)
    return lower_bound (S, f) >= S->best_value - EPS * (1.0 + S->best_value);
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

/* Is ready position @i a decision now? */
static bool
decision (const SgSearch *S, const Frame *f, int32_t i)
{
  if (f->placed[i] || f->npend[i] > 0)
    return false;
  return S->coll[i] >= 0 || S->comp[i] >= 0 || S->coll_of[i] != SG_NO_NODE;
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
  if (!memo_admit (S, f) || prune (S, f))
    return;
  sg_eng_save (S->e, &f->snap);
  /* collectives, then compute, then stalls; each by position */
  for (int pass = 0; pass < 3 && !S->gave_up; pass++)
    for (int32_t i = 0; i < S->m && !S->gave_up; i++) {
      if (!decision (S, f, i))
        continue;
      int kind = S->coll[i] >= 0 ? 0 : S->comp[i] >= 0 ? 1 : 2;
      if (kind != pass)
        continue;
      Frame *c = &S->frames[d + 1];
      frame_copy (S, c, f);
      sg_eng_restore (S->e, &f->snap);
      place (S, c, i);
      dfs (S, d + 1);
    }
  sg_eng_restore (S->e, &f->snap);
}

bool
sg_search_run (SgSearch *S, double incumbent)
{
  Frame *f0 = &S->frames[0];
  for (int32_t i = 0; i < S->m; i++)
    f0->npend[i] = (int32_t)(S->ifirst[i + 1] - S->ifirst[i]);
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
