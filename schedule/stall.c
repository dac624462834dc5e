/* stall.c: what the list scheduler does around stalls and start-wait
 * holds: the shield (a ready non-GEMM node between a collective's issue and
 * the GEMM that would hold it), the critical-path variant's choice to wait
 * for a blocked node, a shorter stall first (a wait that unblocks work ends
 * before the frontier's), and the tail (waits in the order their
 * collectives end). docs/scheduler.md has the rules.
 * Requires: a Run (listsched-private.h). Invalidates: nothing.
 */
#include <math.h>
#include <string.h>

#include "listsched-private.h"

bool
ls_holds_sms (const Run *R, SgNodeId x)
{
  return sg_eng_would_hold (&R->eng, R->P->cost[x], R->P->kslot[x]);
}

/* How far down the ready heap's array a shield is looked for, and how far
 * ahead of the GEMM (ids) it may come from. */
#define SHIELD_SCAN 64
#define SHIELD_WINDOW 256

/* Start wait (docs/scheduler.md): a collective issued right before a
 * matmul/attention kernel waits for it. When one was just issued (the
 * engine holds it for the next kernel) and @x, a GEMM that would run next,
 * returns a ready compute node that does not hold the SMs (cost > 0; the
 * lowest priority key among the first SHIELD_SCAN heap entries, at most
 * SHIELD_WINDOW ids after @x) to run first, so the collective starts at once; else
 * SG_NO_NODE. */
static SgNodeId
shield_for (Run *R, SgNodeId x)
{
  const SgSchedProblem *P = R->P;
  if (R->eng.n_held <= R->eng.n_kheld || !ls_holds_sms (R, x) || ls_would_stall (R, x))
    return SG_NO_NODE;
  int64_t best = INT64_MAX;
  for (int32_t i = 0; i < MIN (R->ready.n, SHIELD_SCAN); i++) {
    int64_t k = R->ready.a[i];
    SgNodeId c = KEY_ID (k);
    if (k >= best || R->placed[c] || c == x || P->cost[c] <= 0.0 || c - x > SHIELD_WINDOW
        || ls_holds_sms (R, c))
      continue;
    best = k;
  }
  return best == INT64_MAX ? SG_NO_NODE : KEY_ID (best);
}

/* Places the shield for @next, if any and memory allows; its heap entry
 * goes when it reaches the top (placed entries are skipped). */
bool
ls_run_shield (Run *R, SgNodeId next)
{
  SgNodeId s = shield_for (R, next);
  if (s == SG_NO_NODE || !ls_mem_fits_moved (R, s))
    return false;
  R->n_shielded++;
  ls_run_demand (R, s);
  return true;
}

/* Critical-path variant: the best-ranked ready compute node is blocked by
 * a running collective and @f, the best unblocked one, ranks lower. Runs
 * @f first or waits for the blocker? Each choice gives a lower bound on
 * the step: f first, now + cost(f) + cp(u) and now + the compute left;
 * waiting, end + cp(u) and end + the compute left. Waits (places the
 * blocked node, stalling) when that bound is lower. */
bool
ls_stall_for_critical (Run *R, SgNodeId f)
{
  const SgSchedProblem *P = R->P;
  SgNodeId u = SG_NO_NODE;
  while (R->blocked.n > 0) {
    u = KEY_ID (R->blocked.a[0]);
    if (!R->placed[u] && R->nblk[u] > 0)
      break;
    ls_heap_pop (&R->blocked);
    u = SG_NO_NODE;
  }
  if (u == SG_NO_NODE || (f != SG_NO_NODE && ls_prio (R, f) < ls_prio (R, u)))
    return false;
  double end = R->eng.now;
  uint32_t k;
  const SgNodeId *in = sg_sched_inputs (P, u, &k);
  for (uint32_t j = 0; j < k; j++) {
    SgNodeId c = P->coll_of[in[j]];
    if (!R->placed[in[j]] && P->role[in[j]] == SG_ROLE_WAIT && c != SG_NO_NODE && R->placed[c])
      end = MAX (end, ls_queue_end (R, c));
  }
  double left = P->compute_us - R->done_us, now = R->eng.now;
  double run_f = f == SG_NO_NODE ? INFINITY
                                 : MAX (now + P->cost[f] + P->cp_us[u], now + left);
  double wait = MAX (end + P->cp_us[u], end + left);
  if (wait >= run_f || !ls_mem_fits_moved (R, u))
    return false;
  ls_heap_pop (&R->blocked);
  R->n_boosted++;
  ls_run_demand (R, u);
  return true;
}

/* How deep into each group's queue a shorter stall is looked for. */
#define STALL_SCAN 16

/* The frontier @x is about to stall on its unfinished collectives. If
 * another running collective is expected to end sooner and its wait is
 * useful (a collective reads it, or it is all that blocks a ready compute
 * node this variant may pull), places that wait first: a shorter stall
 * after which that work runs while @x's collectives go on. True when it
 * placed one. */
bool
ls_stall_shorter (Run *R, SgNodeId x)
{
  const SgSchedProblem *P = R->P;
  const SgSimEngine *e = &R->eng;
  double until = 0.0;
  uint32_t k;
  const SgNodeId *in = sg_sched_inputs (P, x, &k);
  for (uint32_t j = 0; j < k; j++) {
    SgNodeId c = P->coll_of[in[j]];
    if (R->placed[in[j]] || P->role[in[j]] != SG_ROLE_WAIT || c == SG_NO_NODE)
      continue;
    double t = R->placed[c] ? ls_queue_end (R, c) : INFINITY;
    until = MAX (until, t);
  }
  SgNodeId best = SG_NO_NODE;
  double best_end = until - 1e-9 * (1.0 + until);
  for (int32_t grp = 0; grp < P->n_groups; grp++) {
    double t = e->now;
    int32_t depth = 0;
    for (int32_t r = e->ghead[grp]; r >= 0 && depth < STALL_SCAN; r = e->rnext[r], depth++) {
      t += e->rem[r];
      SgNodeId c = e->rows[r].node, w = P->wait_of[c];
      if (t >= best_end || w == SG_NO_NODE || R->placed[w])
        continue;
      bool useful = P->feeds_coll[w];
      for (uint32_t a = P->ufirst[w]; a < P->ufirst[w + 1] && !useful && R->window > 0; a++) {
        SgNodeId u = P->users[a];
        useful = P->role[u] == SG_ROLE_COMPUTE && !R->placed[u] && R->npend[u] == 0
                 && R->nblk[u] == 1 && u - x <= R->window && P->cost[u] > 0.0;
      }
      if (useful) {
        best = w;
        best_end = t;
      }
    }
  }
  if (best == SG_NO_NODE)
    return false;
  R->n_short_stalls++;
  ls_run_demand (R, best);
  return true;
}

/* Everything but the output is placed: what can go in without a stall
 * first (in id order), then the waits in the order their collectives are
 * expected to end, so a collective that reads one is issued as early as
 * possible and the drain overlaps the longest stall. */
void
ls_finish_tail (Run *R)
{
  const SgSchedProblem *P = R->P;
  /* every node not placed (n_order are), the output among them */
  g_autofree SgNodeId *left = g_new (SgNodeId, (size_t)(P->n - R->n_order) + 1);
  int32_t nl = 0;
  for (SgNodeId i = 0; i < P->n; i++)
    if (!R->placed[i] && i != P->g->output)
      left[nl++] = i;
  while (nl > 0) {
    ls_try_issue (R, true);
    bool moved = false;
    SgNodeId stall = SG_NO_NODE;
    double stall_end = INFINITY;
    int32_t k = 0;
    for (int32_t a = 0; a < nl; a++) {
      SgNodeId u = left[a];
      if (R->placed[u])
        continue;
      bool ok = ls_inputs_placed (R, u);
      SgNodeId c = P->role[u] == SG_ROLE_WAIT ? P->coll_of[u] : SG_NO_NODE;
      if (ok && c != SG_NO_NODE && !sg_eng_finished (&R->eng, c)) {
        double t = ls_queue_end (R, c);
        if (t < stall_end) {
          stall_end = t;
          stall = u;
        }
        ok = false;
      }
      if (ok) {
        ls_run_place (R, u);
        moved = true;
        continue;
      }
      left[k++] = u;
    }
    nl = k;
    if (!moved && stall != SG_NO_NODE)
      ls_run_place (R, stall);
    else if (!moved)
      break;
  }
}

