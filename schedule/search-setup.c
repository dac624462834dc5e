/* search-setup.c: a search's window (search.c): positions, decisions,
 * in-window inputs and users, the compute each collective needs and feeds,
 * the frames; and the check that a window fits. sg_search_reset aims a
 * search at another window in the buffers it has (the polish searches
 * window after window): it sets everything sg_search_new sets. Positions
 * are looked up in the caller's node-indexed array, or (none given) in a
 * table of the window's nodes the search keeps, so that searches of one
 * graph can run side by side. What placing a position takes (a
 * collective's rates entry, a compute node's kernel slot) is looked up
 * once per window.
 * Requires: an engine at the window's start. Invalidates: nothing.
 */
#include <string.h>

#include "search-private.h"

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

/* Where node @x sits in the window, or -1 (the caller's local, or the
 * search's own table). */
static inline int32_t
local_of (const SgSearch *S, SgNodeId x)
{
  if (S->local)
    return S->local[x];
  uint32_t mask = S->hcap - 1;
  for (uint32_t i = ((uint32_t)x * 0x9E3779B1u) & mask;; i = (i + 1) & mask) {
    if (S->hnode[i] == x)
      return S->hpos[i];
    if (S->hnode[i] == SG_NO_NODE)
      return -1;
  }
}

/* Records the window's nodes @nodes (@m) in the search's own table. */
static void
local_fill (SgSearch *S, const SgNodeId *nodes, int32_t m)
{
  uint32_t cap = 64;
  while (cap < 2 * (uint32_t)m)
    cap *= 2;
  if (cap > S->hcap) {
    S->hcap = cap;
    S->hnode = g_renew (SgNodeId, S->hnode, cap);
    S->hpos = g_renew (int32_t, S->hpos, cap);
  }
  memset (S->hnode, 0xff, sizeof (SgNodeId) * S->hcap); /* SG_NO_NODE */
  uint32_t mask = S->hcap - 1;
  for (int32_t k = 0; k < m; k++) {
    uint32_t i = ((uint32_t)nodes[k] * 0x9E3779B1u) & mask;
    while (S->hnode[i] != SG_NO_NODE)
      i = (i + 1) & mask;
    S->hnode[i] = nodes[k];
    S->hpos[i] = k;
  }
}

/* What a frame's buf holds: rq, npend and n_issued for cap_m positions. */
static size_t
frame_bytes (const SgSearch *S)
{
  return sizeof (uint64_t) * (size_t)((S->cap_m + 63) / 64)
         + sizeof (int32_t) * (size_t)S->cap_m + (size_t)S->ng;
}

/* Lays out the frames' rq, npend and n_issued for the window's m
 * positions, one after the other in buf. */
static void
frames_lay_out (SgSearch *S)
{
  for (int32_t d = 0; d < S->cap_frames; d++) {
    Frame *f = &S->frames[d];
    f->rq = f->buf;
    f->npend = (int32_t *)(f->rq + S->nw);
    f->n_issued = (uint8_t *)(f->npend + S->m);
  }
}

/* Grows the per-position arrays to hold @m positions. */
static void
reserve_positions (SgSearch *S, int32_t m)
{
  if (m <= S->cap_m)
    return;
  int32_t cap = MAX (m, 2 * S->cap_m);
  S->node = g_renew (SgNodeId, S->node, (size_t)cap);
  S->role = g_renew (uint8_t, S->role, (size_t)cap);
  S->cost = g_renew (double, S->cost, (size_t)cap);
  S->dec = g_renew (int32_t, S->dec, (size_t)cap);
  S->comp = g_renew (int32_t, S->comp, (size_t)cap);
  S->coll = g_renew (int32_t, S->coll, (size_t)cap);
  S->coll_of = g_renew (SgNodeId, S->coll_of, (size_t)cap);
  S->eng_arg = g_renew (int32_t, S->eng_arg, (size_t)cap);
  S->decs = g_renew (int32_t, S->decs, (size_t)cap);
  S->ifirst = g_renew (uint32_t, S->ifirst, (size_t)cap + 1);
  S->ufirst = g_renew (uint32_t, S->ufirst, (size_t)cap + 1);
  S->fill = g_renew (uint32_t, S->fill, (size_t)cap + 1);
  S->order = g_renew (int32_t, S->order, (size_t)cap);
  S->best = g_renew (int32_t, S->best, (size_t)cap);
  S->ef = g_renew (double, S->ef, (size_t)cap);
  for (int32_t k = 0; k < SG_SEARCH_KEEP; k++)
    S->kept[k] = g_renew (int32_t, S->kept[k], (size_t)cap);
  S->cap_m = cap;
  for (int32_t d = 0; d < S->cap_frames; d++)
    S->frames[d].buf = g_realloc (S->frames[d].buf, frame_bytes (S));
}

/* Grows the frames to @n (a depth per decision, and two). */
static void
reserve_frames (SgSearch *S, int32_t n)
{
  if (n <= S->cap_frames)
    return;
  S->frames = g_renew (Frame, S->frames, (size_t)n);
  memset (S->frames + S->cap_frames, 0, sizeof (Frame) * (size_t)(n - S->cap_frames));
  for (int32_t d = S->cap_frames; d < n; d++)
    S->frames[d].buf = g_malloc (frame_bytes (S));
  S->cap_frames = n;
}

/* The in-window inputs and users of each position (CSR). */
static void
fill_edges (SgSearch *S)
{
  const SgGraph *g = S->g;
  int32_t m = S->m;
  memset (S->ifirst, 0, sizeof (uint32_t) * ((size_t)m + 1));
  memset (S->ufirst, 0, sizeof (uint32_t) * ((size_t)m + 1));
  for (int32_t i = 0; i < m; i++) {
    uint32_t k;
    const SgNodeId *in = sg_node_inputs (g, S->node[i], &k);
    for (uint32_t j = 0; j < k; j++) {
      int32_t l = local_of (S, in[j]);
      if (l >= 0) {
        S->ifirst[i + 1]++;
        S->ufirst[l + 1]++;
      }
    }
  }
  for (int32_t i = 0; i < m; i++) {
    S->ifirst[i + 1] += S->ifirst[i];
    S->ufirst[i + 1] += S->ufirst[i];
  }
  if (S->ifirst[m] + 1 > S->cap_ins) {
    S->cap_ins = MAX (S->ifirst[m] + 1, 2 * S->cap_ins);
    S->ins = g_renew (int32_t, S->ins, (size_t)S->cap_ins);
    S->users = g_renew (int32_t, S->users, (size_t)S->cap_ins);
  }
  memcpy (S->fill, S->ufirst, sizeof (uint32_t) * ((size_t)m + 1));
  uint32_t at = 0;
  for (int32_t i = 0; i < m; i++) {
    uint32_t k;
    const SgNodeId *in = sg_node_inputs (g, S->node[i], &k);
    for (uint32_t j = 0; j < k; j++) {
      int32_t l = local_of (S, in[j]);
      if (l < 0)
        continue;
      S->ins[at++] = l;
      S->users[S->fill[l]++] = i;
    }
  }
}

/* Positions: roles, costs, decision / compute / collective numbers, the
 * collective each wait waits on. */
static void
fill_positions (SgSearch *S)
{
  const SgGraph *g = S->g;
  for (int32_t i = 0; i < S->m; i++) {
    const SgNode *x = &g->nodes[S->node[i]];
    S->role[i] = (uint8_t)sg_sched_role (x);
    S->cost[i] = sg_sched_cost (x);
    S->dec[i] = S->comp[i] = S->coll[i] = -1;
    S->coll_of[i] = SG_NO_NODE;
    S->eng_arg[i] = sg_eng_place_arg (
      S->e, S->node[i], (SgRole)S->role[i],
      costly (S, i) ? sg_cost_contention_slot (S->e->pairs, g, S->node[i], S->cost[i]) : 0);
    if (costly (S, i)) {
      S->comp[i] = S->n_comp;
      S->ccost[S->n_comp++] = S->cost[i];
      S->window_work += S->cost[i];
    } else if (S->role[i] == SG_ROLE_COLL) {
      S->coll_node[S->n_coll] = S->node[i];
      S->coll[i] = S->n_coll++;
    } else if (S->role[i] == SG_ROLE_WAIT) {
      SgNodeId c = S->eng_arg[i];
      if (c != SG_NO_NODE && sg_sched_role (&g->nodes[c]) == SG_ROLE_COLL)
        S->coll_of[i] = c;
    }
    if (S->comp[i] >= 0 || S->coll[i] >= 0 || S->coll_of[i] != SG_NO_NODE) {
      int kind = S->coll[i] >= 0 ? 0 : S->comp[i] >= 0 ? 1 : 2;
      S->kind_decs[kind] |= (uint64_t)1 << S->n_dec;
      S->decs[S->n_dec] = i;
      S->dec[i] = S->n_dec++;
    }
  }
}

/* Forgets the window's positions in the caller's @local. */
static void
unmark (SgSearch *S)
{
  if (!S->local)
    return;
  for (int32_t i = 0; i < S->m; i++)
    S->local[S->node[i]] = -1;
}

SgSearch *
sg_search_new (const SgGraph *g, SgSimEngine *e, const SgNodeId *nodes, int32_t m,
               int32_t *local, SgSearchGoal goal, int64_t budget)
{
  g_return_val_if_fail (sg_search_fits (g, e, nodes, m), NULL);
  SgSearch *S = g_new0 (SgSearch, 1);
  S->g = g;
  S->e = e;
  S->ng = MAX (g->n_groups, 1);
  S->local = local;
  S->beyond = g_new (SgNodeId, (size_t)S->ng);
  S->n_pre = g_new (uint8_t, (size_t)S->ng);
  S->mcap = 64;
  S->mkeys = g_new (uint64_t, (size_t)S->mcap);
  S->mhead = g_new (int32_t, (size_t)S->mcap);
  S->mslot = g_new (int32_t, (size_t)S->mcap / 2);
  memset (S->mhead, 0xff, sizeof (int32_t) * (size_t)S->mcap); /* -1: empty */
  sg_search_reset (S, nodes, m, goal, budget);
  return S;
}

void
sg_search_reset (SgSearch *S, const SgNodeId *nodes, int32_t m, SgSearchGoal goal,
                 int64_t budget)
{
  const SgGraph *g = S->g;
  const SgSimEngine *e = S->e;
  g_return_if_fail (sg_search_fits (g, e, nodes, m));
  unmark (S);
  sg_bound_rates_clear (&S->rates);
  reserve_positions (S, MAX (m, 1));
  S->goal = goal;
  S->m = m;
  S->nw = (m + 63) / 64;
  S->budget = budget;
  memcpy (S->node, nodes, sizeof (SgNodeId) * (size_t)m);
  if (S->local)
    for (int32_t i = 0; i < m; i++)
      S->local[nodes[i]] = i;
  else
    local_fill (S, nodes, m);
  S->n_dec = S->n_comp = S->n_coll = 0;
  memset (S->kind_decs, 0, sizeof S->kind_decs);
  S->window_work = 0.0;
  memset (S->ccost, 0, sizeof S->ccost);
  memset (S->anc, 0, sizeof S->anc);
  memset (S->desc, 0, sizeof S->desc);
  fill_positions (S);
  S->n_track = S->n_coll;
  S->n_seqw = (S->n_coll + 7) / 8;
  S->row0 = e->n_rows;
  S->any_beyond = false;
  for (int32_t grp = 0; grp < S->ng; grp++) {
    int32_t depth = 0, r = grp < e->n_groups ? e->ghead[grp] : -1;
    for (; r >= 0 && depth < SG_SEARCH_QUEUE_DEPTH; r = e->rnext[r], depth++) {
      S->track_idx[S->n_track] = (uint8_t)depth;
      S->track_row[S->n_track] = r;
      S->coll_node[S->n_track++] = e->rows[r].node;
    }
    S->n_pre[grp] = (uint8_t)depth;
    S->beyond[grp] = r >= 0 ? e->rows[r].node : SG_NO_NODE;
    S->any_beyond |= r >= 0;
  }
  for (int32_t c = 0; c < S->n_track; c++)
    S->coll_group[c] = g->nodes[S->coll_node[c]].group;
  fill_edges (S);
  if (goal == SG_SEARCH_STEP) {
    g_autofree uint8_t *seen = g_new (uint8_t, (size_t)MAX (m, 1));
    g_autofree int32_t *stack = g_new (int32_t, (size_t)m + 1);
    for (int32_t i = 0; i < m; i++)
      if (S->coll[i] >= 0) {
        S->anc[S->coll[i]] = reach_mask (S, i, true, seen, stack);
        S->desc[S->coll[i]] = reach_mask (S, i, false, seen, stack);
      }
  }
  sg_bound_rates_init (&S->rates, e, S->coll_node, S->n_track);
  S->monotone = S->rates.monotone;
  reserve_frames (S, S->n_dec + 2);
  frames_lay_out (S);
  Frame *f0 = &S->frames[0];
  memset (f0->n_issued, 0, (size_t)S->ng);
  memset (f0->seq, 0, sizeof f0->seq);
  f0->n_placed = 0;
  f0->key = f0->cmask = f0->seqh = 0;
  f0->work = 0.0;
  S->best_value = INFINITY;
  S->rest = 0.0;
  S->n_kept = 0;
  S->found = S->gave_up = false;
  S->expanded = 0;
  for (int32_t j = 0; j < S->mused; j++)
    S->mhead[S->mslot[j]] = -1;
  S->mused = 0;
  S->n_states = 0;
}

void
sg_search_free (SgSearch *S)
{
  if (!S)
    return;
  unmark (S);
  for (int32_t d = 0; d < S->cap_frames; d++) {
    sg_eng_snap_clear (&S->frames[d].snap);
    g_free (S->frames[d].buf);
  }
  g_free (S->frames);
  g_free (S->beyond);
  g_free (S->n_pre);
  g_free (S->hnode);
  g_free (S->hpos);
  g_free (S->node);
  g_free (S->role);
  g_free (S->cost);
  g_free (S->dec);
  g_free (S->comp);
  g_free (S->coll);
  g_free (S->coll_of);
  g_free (S->eng_arg);
  g_free (S->decs);
  g_free (S->ifirst);
  g_free (S->ufirst);
  g_free (S->fill);
  g_free (S->ins);
  g_free (S->users);
  g_free (S->order);
  g_free (S->best);
  for (int32_t k = 0; k < SG_SEARCH_KEEP; k++)
    g_free (S->kept[k]);
  g_free (S->ef);
  g_free (S->mkeys);
  g_free (S->mhead);
  g_free (S->mslot);
  g_free (S->mseqh);
  g_free (S->mnow);
  g_free (S->mnext);
  g_free (S->mgrp);
  g_free (S->mseq);
  sg_bound_scratch_clear (&S->bs);
  sg_bound_rates_clear (&S->rates);
  g_free (S);
}
