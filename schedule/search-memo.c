/* search-memo.c: what prunes a search (search.c): dominance between
 * partial orders that placed the same set with the same issue order per
 * group (the memo, keyed by both: the set's bits and a hash of the ranks)
 * and, for SG_SEARCH_STEP, the lower bound of the rest (the clock plus the
 * critical path left, and bound.c's window relaxation of the compute and
 * comm left). The rules are in search.c's contract. A kept state is its
 * clock, its issue ranks and per group where its head is among the
 * group's tracked collectives (the work of the others follows from it).
 * Requires: a search. Invalidates: nothing.
 */
#include <string.h>

#include "search-private.h"

/* --- dominance ------------------------------------------------------------------------- */

/* A state is compared per tracked collective (its work left and whether
 * it is held, 0 and not when finished or not issued), and with the same
 * issue ranks (seq) in both: then the same collectives were issued in each
 * group in the same order, a group's finish in that order, only its head
 * runs or is held, and a collective queued behind it has its solo work
 * left (as issued: a row's work changes once it starts). So a kept state
 * is its clock, its ranks and per group where its head is (GroupState);
 * where two states' heads are in the same places, only the heads can
 * differ. */

/* The place of a group's head row @r in the group's tracked
 * collectives. */
static inline int32_t
head_place (const SgSearch *S, int32_t r)
{
  if (r >= S->row0)
    return S->row_idx[r - S->row0];
  /* queued at the start: tracked (untracked_moved) */
  for (int32_t c = S->n_coll; c < S->n_track; c++)
    if (S->track_row[c] == r)
      return S->track_idx[c];
  g_assert_not_reached ();
}

/* Writes @f's state (the engine's) as kept state @k (room reserved). */
static void
state_of (const SgSearch *S, const Frame *f, int32_t k)
{
  const SgSimEngine *e = S->e;
  GroupState *gs = S->mgrp + (size_t)k * (size_t)S->ng;
  S->mnow[k] = e->now;
  S->mseqh[k] = f->seqh;
  /* f->seq is 0 past the window's collectives (those running at its
   * start): their ranks, in words, are all of it */
  uint64_t *seq = S->mseq + (size_t)k * (size_t)S->n_seqw;
  for (int32_t w = 0; w < S->n_seqw; w++)
    memcpy (&seq[w], f->seq + 8 * w, 8);
  for (int32_t grp = 0; grp < e->n_groups; grp++) {
    int32_t r = e->ghead[grp];
    if (r < 0) {
      gs[grp] = (GroupState){ 0.0, (uint8_t)(S->n_pre[grp] + f->n_issued[grp]), 0 };
      continue;
    }
    gs[grp] = (GroupState){ e->rem[r], (uint8_t)head_place (S, r),
                            e->hold[grp] != SG_HOLD_NONE };
  }
}

/* Is (@ra, @ha) at least as good as (@rb, @hb) within @tol (@eq: the
 * same)? */
static inline bool
entry_ok (double ra, uint8_t ha, double rb, uint8_t hb, double tol, bool eq)
{
  return !(eq ? fabs (ra - rb) > tol || ha != hb : ra > rb + tol || ha > hb);
}

/* dominates () where a group's head is not in the same place in kept
 * state @a as in @f's (the engine's state, kept as @b): each tracked
 * collective compared. */
static bool
dominates_each (const SgSearch *S, int32_t a, const Frame *f, double tol, bool eq)
{
  const SgSimEngine *e = S->e;
  const GroupState *ga = S->mgrp + (size_t)a * (size_t)S->ng;
  for (int32_t c = 0; c < S->n_track; c++) {
    int32_t r = e->row_of[S->coll_node[c]];
    if (r < 0)
      continue; /* not issued in either */
    int32_t grp = S->coll_group[c];
    double rb = 0.0;
    uint8_t hb = 0;
    if (!e->fin[r]) {
      rb = e->rem[r];
      hb = e->ghead[grp] == r && e->hold[grp] != SG_HOLD_NONE;
    }
    int32_t at = c < S->n_coll ? S->n_pre[grp] + f->seq[c] : S->track_idx[c];
    double ra = 0.0;
    uint8_t ha = 0;
    if (at == ga[grp].done) {
      ra = ga[grp].rem;
      ha = ga[grp].held;
    } else if (at > ga[grp].done) {
      ra = e->rows[r].est_us; /* queued: as issued */
    }
    if (!entry_ok (ra, ha, rb, hb, tol, eq))
      return false;
  }
  return true;
}

/* Is kept state @a at least as good as kept state @b, @f's (same placed
 * set and seqh)? */
static bool
dominates (const SgSearch *S, int32_t a, int32_t b, const Frame *f)
{
  double tol = EPS * (1.0 + S->mnow[b]);
  bool eq = !S->monotone;
  if (eq ? fabs (S->mnow[a] - S->mnow[b]) > tol : S->mnow[a] > S->mnow[b] + tol)
    return false;
  size_t nw = (size_t)S->n_seqw, ng = (size_t)S->ng;
  const uint64_t *sa = S->mseq + (size_t)a * nw, *sb = S->mseq + (size_t)b * nw;
  for (size_t w = 0; w < nw; w++)
    if (sa[w] != sb[w])
      return false;
  const GroupState *ga = S->mgrp + (size_t)a * ng, *gb = S->mgrp + (size_t)b * ng;
  for (int32_t grp = 0; grp < S->e->n_groups; grp++) {
    if (ga[grp].done != gb[grp].done)
      return dominates_each (S, a, f, tol, eq);
    /* elsewhere both finished, both not issued, or both queued */
    if (!entry_ok (ga[grp].rem, ga[grp].held, gb[grp].rem, gb[grp].held, tol, eq))
      return false;
  }
  return true;
}

/* Room for one more kept state. */
static void
states_reserve (SgSearch *S)
{
  size_t nw = (size_t)MAX (S->n_seqw, 1);
  if (S->n_states < S->cap_states && (size_t)(S->n_states + 1) * nw <= S->cap_rows)
    return;
  if (S->n_states == S->cap_states) {
    S->cap_states = MAX (256, S->cap_states * 2);
    S->mseqh = g_renew (uint64_t, S->mseqh, (size_t)S->cap_states);
    S->mnow = g_renew (double, S->mnow, (size_t)S->cap_states);
    S->mnext = g_renew (int32_t, S->mnext, (size_t)S->cap_states);
    S->mgrp = g_renew (GroupState, S->mgrp, (size_t)S->cap_states * (size_t)S->ng);
  }
  size_t rows = (size_t)S->cap_states * nw;
  if (rows > S->cap_rows) {
    S->cap_rows = rows;
    S->mseq = g_renew (uint64_t, S->mseq, rows);
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
  S->mslot = g_renew (int32_t, S->mslot, (size_t)S->mcap / 2);
  for (int32_t i = 0; i < S->mcap; i++)
    S->mhead[i] = -1;
  int32_t used = 0;
  for (int32_t i = 0; i < oc; i++) {
    if (oh[i] < 0)
      continue;
    uint64_t at = mix (ok[i] ^ S->mseqh[oh[i]]) & (uint64_t)(S->mcap - 1);
    while (S->mhead[at] >= 0)
      at = (at + 1) & (uint64_t)(S->mcap - 1);
    S->mkeys[at] = ok[i];
    S->mhead[at] = oh[i];
    S->mslot[used++] = (int32_t)at;
  }
  g_assert (used == S->mused);
  g_free (ok);
  g_free (oh);
}

/* Has a collective queued past the tracked depth started, or ended? Then
 * the state is not compared. */
static bool
untracked_moved (const SgSearch *S)
{
  const SgSimEngine *e = S->e;
  if (!S->any_beyond)
    return false;
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
  /* a state dominates only one of the same issue ranks: keyed by both */
  uint64_t at = mix (f->key ^ f->seqh) & (uint64_t)(S->mcap - 1);
  while (S->mhead[at] >= 0 && (S->mkeys[at] != f->key || S->mseqh[S->mhead[at]] != f->seqh))
    at = (at + 1) & (uint64_t)(S->mcap - 1);
  if (S->mhead[at] < 0) {
    S->mkeys[at] = f->key;
    S->mslot[S->mused++] = (int32_t)at;
  }
  for (int32_t i = S->mhead[at]; i >= 0; i = S->mnext[i])
    if (dominates (S, i, k, f))
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

