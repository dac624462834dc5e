/* listsched.c: one variant of the exposure-aware list scheduler.
 *
 * Mirrors: PyTorch Inductor's schedule_overlap_bucketing (compute order
 * kept, collectives pulled forward, waits deferred, bytes in flight capped)
 * and XLA's latency-hiding scheduler (a clock-driven list scheduler that
 * fills a stall with independent work). The clock is the simulator's own
 * engine; memory is checked against the input order's whole profile
 * (memtree.c). docs/scheduler.md has the rules.
 *
 * Requires: an SgSchedProblem (problem.c). Invalidates: nothing (it returns
 * an order; the driver in scheduler.c applies it).
 */
#include <string.h>

#include "listsched-private.h"


static void
became_ready (Run *R, SgNodeId u)
{
  const SgSchedProblem *P = R->P;
  if (P->role[u] == SG_ROLE_COLL) {
    ls_heap_push (&R->rq[P->group[u]], KEY (P->due_rank[u], u));
    R->gver[P->group[u]]++;
  }
  if (P->role[u] != SG_ROLE_COMPUTE)
    return;
  if (P->free_feed[u])
    ls_heap_push (&R->freeq, KEY (0, u));
  int32_t blk = 0;
  uint32_t k = 0;
  /* most compute reads no wait: its inputs go unread */
  const SgNodeId *in = P->reads_wait[u] ? sg_sched_inputs (P, u, &k) : NULL;
  for (uint32_t j = 0; j < k; j++)
    if (P->role[in[j]] == SG_ROLE_WAIT && !R->placed[in[j]] && P->coll_of[in[j]] != SG_NO_NODE
        && !sg_eng_finished (&R->eng, P->coll_of[in[j]]))
      blk++;
  R->nblk[u] = blk;
  if (blk == 0)
    ls_heap_push (&R->ready, KEY (ls_prio (R, u), u));
  else if (R->boost == SG_BOOST_CRITICAL_PATH)
    ls_heap_push (&R->blocked, KEY (ls_prio (R, u), u));
}

static void
dec_pending (Run *R, SgNodeId u)
{
  if (--R->npend[u] == 0)
    became_ready (R, u);
}

static void
on_finish (void *ud, SgNodeId c)
{
  Run *R = ud;
  const SgSchedProblem *P = R->P;
  for (uint32_t a = P->ufirst[c]; a < P->ufirst[c + 1]; a++) {
    SgNodeId w = P->users[a];
    if (P->role[w] != SG_ROLE_WAIT)
      continue;
    ls_defer_finished (R, w);
    for (uint32_t b = P->ufirst[w]; b < P->ufirst[w + 1]; b++) {
      SgNodeId u = P->users[b];
      if (P->role[u] == SG_ROLE_COMPUTE && R->npend[u] == 0 && !R->placed[u]
          && --R->nblk[u] == 0)
        ls_heap_push (&R->ready, KEY (ls_prio (R, u), u));
    }
  }
  R->gdone[P->group[c]] += P->cost[c];
  SgNodeId w = P->wait_of[c];
  if (w != SG_NO_NODE && (P->feeds_coll[w] || R->deferred[w]))
    R->done[R->n_done++] = c;
  if (P->wait_of[c] == SG_NO_NODE && !R->released[c]) {
    R->released[c] = 1;
    R->in_flight[P->group[c]] -= P->comm[c];
    R->n_in_flight[P->group[c]]--;
  }
}

/* Memory is checked against the input order's live-bytes profile (by
 * base position, i.e. input-order id) plus what earlier decisions added:
 * @b more bytes over positions [@a, @e) must stay within the limit. */
bool
ls_mem_fits_range_at (Run *R, uint64_t b, int32_t a, int32_t e, int32_t *at)
{
  if (b == 0 || a >= e)
    return true;
  int64_t m = sg_memtree_max (&R->seg, a, e, at);
  return m + (int64_t)b <= (int64_t)R->P->limit;
}

static void
mem_take_range (Run *R, uint64_t b, int32_t a, int32_t e)
{
  if (b > 0 && a < e)
    sg_memtree_add (&R->seg, a, e, (int64_t)b);
}

/* Running compute @x at the frontier instead of its own position allocates
 * early; a refusal is remembered until the frontier passes the position
 * that was full (added bytes never go away, see try_issue). */
bool
ls_mem_fits_moved (Run *R, SgNodeId x)
{
  if (R->mem_wait_x == x && R->frontier < R->mem_wait_x_at)
    return false;
  int32_t at = -1;
  bool ok = ls_mem_fits_range_at (R, R->P->alloc[x], R->frontier, x, &at);
  R->mem_wait_x = ok ? SG_NO_NODE : x;
  R->mem_wait_x_at = at + 1;
  return ok;
}

static void
mem_take (Run *R, SgNodeId x, int32_t at)
{
  mem_take_range (R, R->P->alloc[x], at, x);
}

void
ls_release (Run *R, SgNodeId c)
{
  if (R->released[c])
    return;
  R->released[c] = 1;
  int32_t grp = R->P->group[c];
  R->in_flight[grp] -= R->P->comm[c];
  R->n_in_flight[grp]--;
}

void
ls_run_place (Run *R, SgNodeId x)
{
  const SgSchedProblem *P = R->P;
  g_assert (!R->placed[x]);
  R->placed[x] = 1;
  R->order[R->n_order++] = x;
  mem_take (R, x, MIN (R->frontier, P->n - 1));
  switch ((SgRole)P->role[x]) {
  case SG_ROLE_COLL: {
    int32_t grp = P->group[x];
    R->gver[grp]++;
    R->in_flight[grp] += P->comm[x];
    R->n_in_flight[grp]++;
    R->fifo_next[P->due_rank[x]] = -1;
    if (R->fifo_tail[grp] < 0)
      R->fifo_head[grp] = x;
    else
      R->fifo_next[P->due_rank[R->fifo_tail[grp]]] = x;
    R->fifo_tail[grp] = x;
    R->gissued[grp] += P->cost[x];
    R->comm_us += P->cost[x];
    R->cum[P->due_rank[x]] = R->gissued[grp];
    sg_eng_issue_entry (&R->eng, x, P->rates_at[x]);
    for (uint32_t a = P->ufirst[x]; a < P->ufirst[x + 1]; a++) {
      SgNodeId w = P->users[a];
      if (P->role[w] != SG_ROLE_WAIT || R->avail[w])
        continue;
      R->avail[w] = 1;
      for (uint32_t b = P->ufirst[w]; b < P->ufirst[w + 1]; b++)
        if (P->role[P->users[b]] == SG_ROLE_COMPUTE)
          dec_pending (R, P->users[b]);
    }
    break;
  }
  case SG_ROLE_WAIT: {
    ls_defer_placed (R, x);
    SgNodeId c = P->coll_of[x]; /* issued: one of the wait's inputs or theirs */
    sg_eng_place_as (&R->eng, x, SG_ROLE_WAIT, 0.0, c);
    if (c != SG_NO_NODE)
      ls_release (R, c);
    break;
  }
  case SG_ROLE_COMPUTE:
    sg_eng_compute_in (&R->eng, x, P->cost[x], P->kslot[x]);
    R->done_us += P->cost[x];
    break;
  }
  bool wait_avail = P->role[x] == SG_ROLE_WAIT && R->avail[x];
  for (uint32_t a = P->ufirst[x]; a < P->ufirst[x + 1]; a++) {
    SgNodeId u = P->users[a];
    if (wait_avail && P->role[u] == SG_ROLE_COMPUTE) {
      /* counted when the collective was issued; a free feeder waited
       * for this wait to be placed */
      if (P->free_feed[u] && R->npend[u] == 0)
        ls_heap_push (&R->freeq, KEY (0, u));
      continue;
    }
    dec_pending (R, u);
  }
}

bool
ls_inputs_placed (const Run *R, SgNodeId u)
{
  uint32_t k;
  const SgNodeId *in = sg_sched_inputs (R->P, u, &k);
  for (uint32_t j = 0; j < k; j++)
    if (!R->placed[in[j]])
      return false;
  return true;
}

/* Places every free feeder whose inputs are all placed (a free feeder that
 * reads a wait not placed yet comes back when the wait is). Moving one up
 * changes no time and no memory: it takes 0 us and allocates nothing, or is
 * an input, live from the start anyway. */
static void
place_free_feeders (Run *R)
{
  const SgSchedProblem *P = R->P;
  while (R->freeq.n > 0) {
    SgNodeId u = KEY_ID (R->freeq.a[0]);
    ls_heap_pop (&R->freeq);
    if (R->placed[u])
      continue;
    if (!ls_inputs_placed (R, u))
      continue;
    R->placed[u] = 1;
    R->order[R->n_order++] = u;
    sg_eng_instant (&R->eng, u); /* what sg_eng_place's 0 us compute does */
    for (uint32_t a = P->ufirst[u]; a < P->ufirst[u + 1]; a++)
      dec_pending (R, P->users[a]);
  }
}

/* Places @x after everything it needs that is not placed yet (waits, and
 * collectives not issued yet, which are then issued regardless of limits). */
void
ls_run_demand (Run *R, SgNodeId x)
{
  const SgSchedProblem *P = R->P;
  int32_t sp = 0;
  R->stack[sp++] = x;
  while (sp > 0) {
    SgNodeId t = R->stack[sp - 1];
    uint32_t k;
    const SgNodeId *in = sg_sched_inputs (P, t, &k);
    SgNodeId need = SG_NO_NODE;
    for (uint32_t j = 0; j < k && need == SG_NO_NODE; j++)
      if (!R->placed[in[j]])
        need = in[j];
    if (need != SG_NO_NODE) {
      if (sp == R->stack_cap) {
        R->stack_cap *= 2;
        R->stack = g_renew (SgNodeId, R->stack, (size_t)R->stack_cap);
      }
      R->stack[sp++] = need;
      continue;
    }
    sp--;
    if (!R->placed[t]) {
      if (P->role[t] == SG_ROLE_COLL)
        R->n_forced++;
      ls_run_place (R, t);
    }
  }
}

/* Would placing @x now stall the compute stream on a collective? */
bool
ls_would_stall (Run *R, SgNodeId x)
{
  const SgSchedProblem *P = R->P;
  uint32_t k;
  const SgNodeId *in = sg_sched_inputs (P, x, &k);
  for (uint32_t j = 0; j < k; j++) {
    SgNodeId i = in[j];
    if (R->placed[i])
      continue;
    if (P->role[i] == SG_ROLE_COLL)
      return true;
    if (P->role[i] == SG_ROLE_WAIT
        && (P->coll_of[i] == SG_NO_NODE || !sg_eng_finished (&R->eng, P->coll_of[i])))
      return true;
  }
  return false;
}

static bool
frontier_stop (const Run *R, SgNodeId x)
{
  const SgSchedProblem *P = R->P;
  if (R->placed[x])
    return false;
  return P->role[x] == SG_ROLE_COMPUTE || (P->role[x] == SG_ROLE_WAIT && !R->deferred[x]);
}

static void
run_init (Run *R, const SgSchedProblem *P, int32_t window, int32_t boost)
{
  memset (R, 0, sizeof *R);
  int32_t n = P->n, ng = MAX (P->n_groups, 1);
  R->P = P;
  R->window = window;
  R->boost = boost;
  R->placed = g_new0 (uint8_t, (size_t)n);
  R->avail = g_new0 (uint8_t, (size_t)n);
  R->released = g_new0 (uint8_t, (size_t)n);
  R->deferred = g_new0 (uint8_t, (size_t)n);
  R->root_resv = g_new0 (int32_t, (size_t)MAX (P->n_roots, 1));
  R->npend = g_new (int32_t, (size_t)n);
  R->nblk = g_new0 (int32_t, (size_t)n);
  R->gissued = g_new0 (double, (size_t)ng);
  R->gdone = g_new0 (double, (size_t)ng);
  int32_t nc = MAX (P->n_colls, 1);
  R->cum = g_new0 (double, (size_t)nc);
  R->rq = g_new0 (Heap, (size_t)ng);
  R->gnext = g_new (int32_t, (size_t)ng);
  for (int32_t i = 0; i < ng; i++)
    R->gnext[i] = i < P->n_groups ? P->gfirst[i] : 0;
  R->fifo_next = g_new (int32_t, (size_t)nc);
  R->fifo_head = g_new (int32_t, (size_t)ng);
  R->fifo_tail = g_new (int32_t, (size_t)ng);
  for (int32_t i = 0; i < ng; i++)
    R->fifo_head[i] = R->fifo_tail[i] = -1;
  R->in_flight = g_new0 (uint64_t, (size_t)ng);
  R->n_in_flight = g_new0 (int32_t, (size_t)ng);
  R->mem_wait_c = g_new (SgNodeId, (size_t)ng);
  R->mem_wait_at = g_new0 (int32_t, (size_t)ng);
  R->mem_wait_x = SG_NO_NODE;
  for (int32_t i = 0; i < ng; i++)
    R->mem_wait_c[i] = SG_NO_NODE;
  sg_memtree_init (&R->seg, n, P->profile);
  ls_defer_init (R);
  ls_issue_init (R);
  sg_eng_init_sized (&R->eng, P->g, NULL, P->full_sims, P->n_colls);
  R->eng.on_finish = on_finish;
  R->eng.ud = R;
  /* the memo numbers the rates as the problem does (P->rates_at) */
  for (int32_t a = 0; a < P->n_rates; a++) {
    int32_t at = sg_eng_rates_entry (&R->eng, P->rates_first[a], NULL);
    g_assert (at == a);
  }
  R->order = g_new (SgNodeId, (size_t)n);
  R->stack_cap = 64;
  R->stack = g_new (SgNodeId, (size_t)R->stack_cap);
  R->done = g_new (SgNodeId, (size_t)nc + 1);
  /* The output waits for one more input than it reads: everything else.
   * It never becomes ready, so no heap offers it (a stall filler, a
   * boosted node, a shield); the frontier places it last (run). */
  for (SgNodeId i = 0; i < n; i++) {
    R->npend[i] = (int32_t)(P->ifirst[i + 1] - P->ifirst[i]) + (i == P->g->output);
    if (R->npend[i] == 0)
      became_ready (R, i);
  }
}

static void
run_clear (Run *R)
{
  g_free (R->placed);
  g_free (R->avail);
  g_free (R->released);
  g_free (R->deferred);
  g_free (R->root_resv);
  g_free (R->npend);
  g_free (R->nblk);
  g_free (R->ready.a);
  g_free (R->freeq.a);
  g_free (R->blocked.a);
  g_free (R->gnext);
  for (int32_t i = 0; i < MAX (R->P->n_groups, 1); i++)
    g_free (R->rq[i].a);
  g_free (R->rq);
  g_free (R->gissued);
  g_free (R->gdone);
  g_free (R->cum);
  g_free (R->fifo_next);
  g_free (R->fifo_head);
  g_free (R->fifo_tail);
  g_free (R->in_flight);
  g_free (R->n_in_flight);
  g_free (R->mem_wait_c);
  g_free (R->mem_wait_at);
  sg_memtree_clear (&R->seg);
  ls_defer_clear (R);
  ls_issue_clear (R);
  sg_eng_clear (&R->eng);
  g_free (R->stack);
  g_free (R->done);
}

SgNodeId *
sg_sched_run_variant (const SgSchedProblem *P, int32_t window, int32_t boost, bool shield,
                      SgScheduleStats *st, SgSimResult *res)
{
  Run R;
  run_init (&R, P, window, boost);
  shield = shield && R.eng.sw > 0.0;
  int32_t n = P->n;
  while (R.n_order < n) {
    while (R.frontier < n && !frontier_stop (&R, R.frontier))
      R.frontier++;
    if (R.frontier >= n) {
      /* Only collectives without consumers are left. */
      ls_try_issue (&R, true);
      for (SgNodeId i = 0; i < n; i++)
        if (!R.placed[i])
          ls_run_demand (&R, i);
      break;
    }
    SgNodeId x = R.frontier;
    if (x == P->g->output) {
      ls_finish_tail (&R);
      for (SgNodeId i = 0; i < n; i++)
        if (!R.placed[i] && i != x)
          ls_run_demand (&R, i);
      ls_run_demand (&R, x);
      continue;
    }
    place_free_feeders (&R);
    /* A wait whose collective is done goes in now (free) when a collective
     * reads its result; a deferred one stays back while its memory fits
     * under the input order's peak (ls_extend_deferred): that slack costs
     * nothing in the model and absorbs what the model does not see (ranks
     * that drift apart, a collective dispatched late; docs/scheduler.md). */
    for (int32_t d = 0; d < R.n_done; d++)
      if (!R.placed[P->wait_of[R.done[d]]] && P->feeds_coll[P->wait_of[R.done[d]]])
        ls_run_demand (&R, P->wait_of[R.done[d]]);
    R.n_done = 0;
    ls_extend_deferred (&R);
    ls_try_issue (&R, false);
    if (R.placed[x])
      continue;
    if (P->role[x] == SG_ROLE_WAIT) {
      ls_reach_wait (&R, x);
      continue;
    }
    SgNodeId f = SG_NO_NODE;
    while (R.ready.n > 0) {
      SgNodeId c = KEY_ID (R.ready.a[0]);
      if (R.placed[c]) {
        ls_heap_pop (&R.ready);
        continue;
      }
      f = c;
      break;
    }
    if (R.boost == SG_BOOST_CRITICAL_PATH && ls_stall_for_critical (&R, f))
      continue;
    /* the critical-path order moves compute within the window only */
    bool near = R.boost != SG_BOOST_CRITICAL_PATH || f - x <= R.window;
    if (f != SG_NO_NODE && f != x && near && ls_prio (&R, f) < ls_prio (&R, x)
        && ls_mem_fits_moved (&R, f)) {
      if (shield && ls_run_shield (&R, f))
        continue;
      ls_heap_pop (&R.ready);
      R.n_boosted++;
      ls_run_demand (&R, f);
      continue;
    }
    if (R.window > 0 && ls_would_stall (&R, x)) {
      if (f != SG_NO_NODE && f != x && f - x <= R.window && ls_mem_fits_moved (&R, f)) {
        if (shield && ls_run_shield (&R, f))
          continue;
        ls_heap_pop (&R.ready);
        R.n_pulled++;
        ls_run_demand (&R, f);
        continue;
      }
    }
    if (shield && ls_run_shield (&R, x))
      continue;
    if (ls_would_stall (&R, x) && ls_stall_shorter (&R, x))
      continue;
    ls_run_demand (&R, x);
  }
  st->n_pulled = R.n_pulled + R.n_shielded; /* a shield is pulled forward too */
  st->n_early_waits = R.n_early;
  st->n_forced = R.n_forced;
  st->n_forced_waits = R.n_forced_waits;
  st->n_boosted = R.n_boosted;
  /* The run drove the simulator's own engine through this very order, so
   * its numbers are what sg_simulate() would report. */
  memset (res, 0, sizeof *res);
  sg_eng_finish (&R.eng, res);
  if (P->full_sims) {
    res->compute_us = R.done_us;
    res->comm_us = R.comm_us;
    sg_eng_take (&R.eng, res);
  }
  SgNodeId *order = g_steal_pointer (&R.order);
  run_clear (&R);
  return order;
}
