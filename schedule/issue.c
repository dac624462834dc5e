/* issue.c: when the list scheduler issues collectives.
 *
 * Per group, collectives are taken in order of due (P->due_us: when the
 * input order needs their result, chains included); a ready one goes ahead
 * of a more urgent one that is not ready yet only if that does not make
 * the worst lateness of the two worse (collectives of a group run in issue
 * order, so it would delay the urgent one). Times are estimated from the
 * engine's queues and the input order's compute from the frontier on.
 * Limits (bytes and count in flight, memory) as before: a group over its
 * budget places the wait of a finished collective to free it. A group's
 * scan for the collectives not ready is kept from call to call while none
 * of its collectives became ready or was placed and its first entry not
 * issued stays.
 * Mirrors: earliest-due-date sequencing with release times on one machine
 * (each group's stream), as list schedulers order their ready queue.
 * Requires: a Run (listsched-private.h). Invalidates: nothing.
 */
#include <math.h>
#include <string.h>

#include "listsched-private.h"

bool
ls_budget_allows (Run *R, SgNodeId c)
{
  const SgSchedProblem *P = R->P;
  int32_t grp = P->group[c];
  if (R->n_in_flight[grp] == 0)
    return true;
  if (P->max_in_flight > 0 && R->in_flight[grp] + P->comm[c] > P->max_in_flight)
    return false;
  if (P->prefetch_limit > 0 && R->n_in_flight[grp] >= P->prefetch_limit)
    return false;
  return true;
}

/* Places the wait of the group's oldest in-flight collective when that
 * collective has already finished (no stall): frees budget for the next. */
bool
ls_release_early (Run *R, int32_t grp)
{
  const SgSchedProblem *P = R->P;
  while (R->fifo_head[grp] >= 0 && R->released[R->fifo_head[grp]])
    R->fifo_head[grp] = R->fifo_next[P->due_rank[R->fifo_head[grp]]];
  if (R->fifo_head[grp] < 0)
    R->fifo_tail[grp] = -1;
  SgNodeId c = R->fifo_head[grp];
  if (c < 0 || !sg_eng_finished (&R->eng, c) || P->wait_of[c] == SG_NO_NODE)
    return false;
  R->n_early++;
  ls_run_demand (R, P->wait_of[c]);
  return true;
}

/* Entries of a group's order by due looked at for collectives not ready
 * yet; how many of those a ready one is checked against; ready ones passed
 * over for less urgent ones per group and call. */
#define ISSUE_SCAN 32
#define ISSUE_LATER 8
#define ISSUE_TRIES 8

/* A group's last scan for collectives not ready: what it found, and the
 * group's version and gnext it saw (the same again: the same result). */
struct LsScan {
  uint32_t ver;
  int32_t from, n;
  int32_t rank[ISSUE_LATER];
};

void
ls_issue_init (Run *R)
{
  int32_t ng = MAX (R->P->n_groups, 1);
  R->gver = g_new0 (uint32_t, (size_t)ng);
  R->scan = g_new (struct LsScan, (size_t)ng);
  for (int32_t i = 0; i < ng; i++)
    R->scan[i].from = -1;
}

void
ls_issue_clear (Run *R)
{
  g_free (R->gver);
  g_free (R->scan);
}

/* Work of the group's head done so far. */
static double
head_done (const Run *R, int32_t grp)
{
  int32_t h = R->eng.ghead[grp];
  return h >= 0 ? R->eng.rows[h].est_us - R->eng.rem[h] : 0.0;
}

double
ls_queue_end (const Run *R, SgNodeId c)
{
  const SgSimEngine *e = &R->eng;
  int32_t r = e->row_of[c], grp = R->P->group[c];
  if (r < 0)
    return NAN;
  if (e->fin[r])
    return e->now;
  return e->now + R->cum[R->P->due_rank[c]] - R->gdone[grp] - head_done (R, grp);
}

double
ls_group_free (const Run *R, int32_t grp)
{
  return R->eng.now + R->gissued[grp] - R->gdone[grp] - head_done (R, grp);
}

/* When collective @c, not ready, is expected to be: its inputs' times in
 * the input order from the frontier on, with compute resuming at @resume
 * (after the frontier's stall, if it has one), a chained input at its
 * collective's expected end. */
static double
expect_ready (const Run *R, SgNodeId c, double resume)
{
  const SgSchedProblem *P = R->P;
  double base = P->base_us[MIN (R->frontier, P->n)], t = resume;
  uint32_t k;
  const SgNodeId *in = sg_sched_inputs (P, c, &k);
  for (uint32_t j = 0; j < k; j++) {
    SgNodeId i = in[j], p = P->coll_of[i];
    if (R->placed[i])
      continue;
    if (P->role[i] == SG_ROLE_WAIT && p != SG_NO_NODE && R->placed[p])
      t = MAX (t, ls_queue_end (R, p));
    else if (P->role[i] == SG_ROLE_WAIT && p != SG_NO_NODE)
      t = MAX (t, resume + MAX (0.0, P->ready_us[p] - base) + P->cost[p]);
    else
      t = MAX (t, resume + MAX (0.0, P->base_us[i + 1] - base));
  }
  return t;
}

/* When the compute stream can go on: now, or when the collectives the
 * frontier node waits for are expected to end. */
static double
frontier_resume (const Run *R)
{
  const SgSchedProblem *P = R->P;
  double t = R->eng.now;
  if (R->frontier >= P->n)
    return t;
  SgNodeId x = R->frontier;
  uint32_t k;
  const SgNodeId *in = sg_sched_inputs (P, x, &k);
  for (uint32_t j = 0; j < k; j++) {
    SgNodeId w = in[j], c = P->coll_of[w];
    if (P->role[w] == SG_ROLE_WAIT && !R->placed[w] && c != SG_NO_NODE && R->placed[c])
      t = MAX (t, ls_queue_end (R, c));
  }
  if (P->role[x] == SG_ROLE_WAIT && P->coll_of[x] != SG_NO_NODE && R->placed[P->coll_of[x]]
      && !R->deferred[x])
    t = MAX (t, ls_queue_end (R, P->coll_of[x]));
  return t;
}

/* A collective of a group's order that is not ready yet: when it is
 * expected, when it is due (engine time) and its work. */
typedef struct {
  double ready, due, work;
} Later;

/* Should ready collective @c (due @due) be issued now, with the stream free
 * at @free_at, ahead of the more urgent collectives @w that are not ready?
 * Yes when that makes the worst lateness (end - due, 0 when early) of @c
 * and each of them no worse than issuing @c after it (collectives of a
 * group run in issue order, so @c would delay it). */
static bool
worth_issuing (double free_at, double work, double due, const Later *w, int32_t n)
{
  for (int32_t k = 0; k < n; k++) {
    double end_c = free_at + work;
    double a = MAX (end_c - due, MAX (w[k].ready, end_c) + w[k].work - w[k].due);
    double end_w = MAX (w[k].ready, free_at) + w[k].work;
    double b = MAX (end_w - w[k].due, end_w + work - due);
    if (MAX (a, 0.0) > MAX (b, 0.0)) /* finishing early gains nothing */
      return false;
  }
  return true;
}

/* The times of the not-ready collectives ls_try_issue weighs a ready one
 * against, computed when first read or before the state first changes
 * (they are the call's start state's, as if computed up front: most
 * calls never read them). */
typedef struct {
  bool have_resume, have_later;
  double resume, to_engine; /* of the call's start */
  int32_t n_later;
  int32_t rank[ISSUE_LATER]; /* positions in the group's order by due */
  Later later[ISSUE_LATER];
} Urgent;

static void
urgent_resume (const Run *R, Urgent *u)
{
  if (u->have_resume)
    return;
  u->have_resume = true;
  u->resume = frontier_resume (R);
  u->to_engine = u->resume - R->P->base_us[MIN (R->frontier, R->P->n)];
}

/* The state is about to change: what was not read yet is taken now. */
static void
urgent_fix (const Run *R, Urgent *u)
{
  const SgSchedProblem *P = R->P;
  urgent_resume (R, u);
  for (int32_t k = 0; k < u->n_later && !u->have_later; k++) {
    SgNodeId c = P->gorder[u->rank[k]];
    u->later[k] = (Later){ expect_ready (R, c, u->resume), P->due_us[c] + u->to_engine,
                           P->cost[c] };
  }
  u->have_later = true;
}

/* Issues ready collectives, per group in order of due (a heap of the ready
 * ones); a ready one goes ahead of more urgent ones that are not ready
 * (the first ISSUE_LATER of the group's order, looked for among its next
 * ISSUE_SCAN entries) only if worth_issuing. Up to ISSUE_TRIES ready ones
 * that may not go yet are passed over for less urgent ones that may. */
void
ls_try_issue (Run *R, bool force)
{
  const SgSchedProblem *P = R->P;
  int64_t passed[ISSUE_TRIES];
  /* forced, nothing waits for the more urgent ones: their times go unread */
  Urgent u; /* not zeroed whole: rank and later are written before read */
  u.have_resume = u.have_later = force;
  u.resume = u.to_engine = 0.0;
  u.n_later = 0;
  for (int32_t grp = 0; grp < P->n_groups; grp++) {
    Heap *h = &R->rq[grp];
    if (h->n == 0)
      continue; /* nothing ready: nothing to decide */
    int32_t end = P->gfirst[grp + 1], n_passed = 0;
    while (R->gnext[grp] < end && R->placed[P->gorder[R->gnext[grp]]])
      R->gnext[grp]++;
    u.n_later = 0;
    u.have_later = force;
    struct LsScan *sc = &R->scan[grp];
    if (!force && (sc->from != R->gnext[grp] || sc->ver != R->gver[grp])) {
      sc->from = R->gnext[grp];
      sc->ver = R->gver[grp];
      sc->n = 0;
      for (int32_t i = sc->from; i < end && i - sc->from < ISSUE_SCAN && sc->n < ISSUE_LATER; i++) {
        SgNodeId c = P->gorder[i];
        if (!R->placed[c] && R->npend[c] > 0)
          sc->rank[sc->n++] = i;
      }
    }
    if (!force) {
      u.n_later = sc->n;
      memcpy (u.rank, sc->rank, sizeof (int32_t) * (size_t)sc->n);
    }
    double free_at = ls_group_free (R, grp);
    while (h->n > 0) {
      int64_t key = h->a[0];
      SgNodeId c = KEY_ID (key);
      ls_heap_pop (h);
      if (R->placed[c])
        continue;
      int32_t n_before = 0;
      while (n_before < u.n_later && u.rank[n_before] < P->due_rank[c])
        n_before++;
      if (!force && n_before > 0)
        urgent_fix (R, &u);
      if (!force
          && !worth_issuing (free_at, P->cost[c], P->due_us[c] + u.to_engine, u.later,
                             n_before)) {
        passed[n_passed++] = key;
        if (n_passed == ISSUE_TRIES)
          break;
        continue;
      }
      /* Added bytes never go away, so a collective that did not fit
       * cannot fit before the frontier passes the position that was full. */
      bool fits;
      if (R->mem_wait_c[grp] == c && R->frontier < R->mem_wait_at[grp]) {
        fits = false;
      } else {
        int32_t at = -1;
        fits = ls_mem_fits_range_at (R, P->alloc[c], R->frontier, c, &at);
        R->mem_wait_c[grp] = fits ? SG_NO_NODE : c;
        R->mem_wait_at[grp] = at + 1;
      }
      if (force || (ls_budget_allows (R, c) && fits)) {
        urgent_fix (R, &u);
        ls_run_place (R, c);
        free_at += P->cost[c];
        continue;
      }
      ls_heap_push (h, key);
      if (fits) {
        urgent_fix (R, &u);
        if (ls_release_early (R, grp))
          continue; /* the budget is back: this one again */
      }
      break;
    }
    for (int32_t k = 0; k < n_passed; k++)
      ls_heap_push (h, passed[k]);
  }
}
