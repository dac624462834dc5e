/* search-memo.c: what prunes a search (search.c): dominance between
 * partial orders that placed the same set (the memo, keyed by that set)
 * and, for SG_SEARCH_STEP, the lower bound of the rest (the clock plus the
 * critical path left, and bound.c's window relaxation of the compute and
 * comm left). The rules are in search.c's contract.
 * Requires: a search. Invalidates: nothing.
 */
#include <string.h>

#include "search-private.h"

/* --- dominance ------------------------------------------------------------------------- */

/* Writes @f's state as kept state @k (room reserved). */
static void
state_of (const SgSearch *S, const Frame *f, int32_t k)
{
  const SgSimEngine *e = S->e;
  size_t at = (size_t)k * (size_t)S->n_track;
  double *rem = S->mrem + at;
  uint8_t *hold = S->mhold + at, *seq = S->mseq + at;
  S->mnow[k] = e->now;
  /* f->seq is 0 past the window's collectives (those running at its start) */
  memcpy (seq, f->seq, (size_t)S->n_track);
  for (int32_t c = 0; c < S->n_track; c++) {
    int32_t r = e->row_of[S->coll_node[c]];
    rem[c] = 0.0;
    hold[c] = 0;
    if (r < 0 || e->fin[r])
      continue;
    rem[c] = e->rem[r];
    int32_t grp = S->coll_group[c];
    hold[c] = e->ghead[grp] == r && e->hold[grp] != SG_HOLD_NONE;
  }
}

/* Is kept state @a at least as good as kept state @b (same placed set)? */
static bool
dominates (const SgSearch *S, int32_t a, int32_t b)
{
  double tol = EPS * (1.0 + S->mnow[b]);
  bool eq = !S->monotone;
  if (eq ? fabs (S->mnow[a] - S->mnow[b]) > tol : S->mnow[a] > S->mnow[b] + tol)
    return false;
  size_t nt = (size_t)S->n_track;
  const double *ra = S->mrem + (size_t)a * nt, *rb = S->mrem + (size_t)b * nt;
  const uint8_t *ha = S->mhold + (size_t)a * nt, *hb = S->mhold + (size_t)b * nt;
  const uint8_t *sa = S->mseq + (size_t)a * nt, *sb = S->mseq + (size_t)b * nt;
  for (size_t c = 0; c < nt; c++) {
    if (sa[c] != sb[c])
      return false;
    if (eq ? fabs (ra[c] - rb[c]) > tol || ha[c] != hb[c] : ra[c] > rb[c] + tol || ha[c] > hb[c])
      return false;
  }
  return true;
}

/* Room for one more kept state. */
static void
states_reserve (SgSearch *S)
{
  size_t nt = (size_t)MAX (S->n_track, 1);
  if (S->n_states < S->cap_states && (size_t)(S->n_states + 1) * nt <= S->cap_rows)
    return;
  if (S->n_states == S->cap_states) {
    S->cap_states = MAX (256, S->cap_states * 2);
    S->mnow = g_renew (double, S->mnow, (size_t)S->cap_states);
    S->mnext = g_renew (int32_t, S->mnext, (size_t)S->cap_states);
  }
  size_t rows = (size_t)S->cap_states * nt;
  if (rows > S->cap_rows) {
    S->cap_rows = rows;
    S->mrem = g_renew (double, S->mrem, rows);
    S->mhold = g_renew (uint8_t, S->mhold, rows);
    S->mseq = g_renew (uint8_t, S->mseq, rows);
  }
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
bool
search_memo_admit (SgSearch *S, const Frame *f)
{
  if (untracked_moved (S))
    return true;
  states_reserve (S);
  int32_t k = S->n_states;
  state_of (S, f, k);
  if (2 * (S->mused + 1) > S->mcap)
    memo_grow (S);
  uint64_t at = mix (f->key) & (uint64_t)(S->mcap - 1);
  while (S->mhead[at] >= 0 && S->mkeys[at] != f->key)
    at = (at + 1) & (uint64_t)(S->mcap - 1);
  if (S->mhead[at] < 0) {
    S->mkeys[at] = f->key;
    S->mused++;
  }
  for (int32_t i = S->mhead[at]; i >= 0; i = S->mnext[i])
    if (dominates (S, i, k))
      return false;
  S->mnext[k] = S->mhead[at];
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
double
search_lower_bound (SgSearch *S, const Frame *f)
{
  const SgSimEngine *e = S->e;
  double now = e->now, best = now;
  for (int32_t i = 0; i < S->m; i++) {
    double t;
    if (f->npend[i] < 0) { /* placed */
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

