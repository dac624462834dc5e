/* search-setup.c: a search's window (search.c): positions, decisions,
 * in-window inputs and users, the compute each collective needs and feeds,
 * the frames; and the check that a window fits.
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
  sg_bound_rates_init (&S->rates, e, S->coll_node, S->n_track);
  S->monotone = S->rates.monotone;
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
  sg_bound_rates_clear (&S->rates);
  g_free (S);
}

