/* defer.c: the list scheduler's deferred waits and the memory their
 * collectives' inputs keep alive (docs/scheduler.md "Waits").
 *
 * The rule (listsched.c's loop calls it): when the frontier reaches a wait
 * whose collective still runs, the wait is deferred while the collective's
 * input, held until the wait, fits in memory; at every step, in the order
 * the waits were deferred, each one's reservation grows to the frontier,
 * and a wait whose input no longer fits is placed (a forced wait). One
 * storage read by several collectives is reserved once, by the first of
 * their deferred waits (the root's leader).
 *
 * Done one wait at a time that costs O(pending waits) tree operations per
 * step, quadratic in the graph. Here it costs O(log n) per step plus
 * O(log n) per forced wait, with the same decisions: the leaders whose
 * reservation reaches the last step's position ("synced", almost all of
 * them) share one range [sync, frontier + 1); leader i fails when
 * max(profile over that range) + (bytes of the synced leaders deferred
 * before it, itself included) > its cap (the input order's peak once its
 * collective has finished, else the limit). A second tree over deferral
 * slots holds those prefix sums minus the cap, so the first failing leader
 * is one descent; the leaders before it take one range add. Leaders in any
 * other state (a reservation that starts later, an input still alive in
 * the input order) are rare: a step with one takes the wait-by-wait loop
 * and rebuilds the structure.
 *
 * Requires: a Run (listsched-private.h). Invalidates: nothing.
 */
#include "listsched-private.h"

/* Slot states. */
enum {
  DEF_FOLLOW, /* not a leader (or the structure is dismantled) */
  DEF_NONE,   /* its collective has no input: nothing to reserve */
  DEF_SYNCED, /* a leader reserved up to sync, in the slot tree */
  DEF_IDLE,   /* a leader whose reservation starts at or past the frontier */
  DEF_PROMO,  /* a leader promoted during a step, synced once the step ends */
};

/* The number of collective @c's input's storage root (P->in_root), or
 * NO_ROOT. */
#define NO_ROOT (-1)
static inline int32_t
root_of (const Run *R, SgNodeId c)
{
  return R->P->in_root[c];
}

static int64_t
cap_of (const Run *R, SgNodeId c)
{
  const SgSchedProblem *P = R->P;
  return (int64_t)(R->placed[c] && sg_eng_finished (&R->eng, c) ? P->peak_in : P->limit);
}

static void
fen_add (Defer *D, int32_t s, int64_t v)
{
  for (int32_t i = s + 1; i <= D->cap; i += i & -i)
    D->fen[i] += v;
  D->fen_total += v;
}

/* Bytes of the synced leaders in slots [0, @s]. */
static int64_t
fen_sum (const Defer *D, int32_t s)
{
  int64_t v = 0;
  for (int32_t i = s + 1; i > 0; i -= i & -i)
    v += D->fen[i];
  return v;
}

static void
synced_add (Run *R, int32_t s)
{
  Defer *D = &R->defer;
  SgNodeId c = R->P->coll_of[D->slot_w[s]];
  int64_t b = (int64_t)R->P->in_bytes[c];
  fen_add (D, s, b);
  if (s + 1 < D->cap)
    sg_memtree_add (&D->vt, s + 1, D->cap, b);
  sg_memtree_set (&D->vt, s, fen_sum (D, s) - cap_of (R, c));
  D->state[s] = DEF_SYNCED;
  D->n_synced++;
}

static void
synced_remove (Run *R, int32_t s)
{
  Defer *D = &R->defer;
  int64_t b = (int64_t)R->P->in_bytes[R->P->coll_of[D->slot_w[s]]];
  fen_add (D, s, -b);
  if (s + 1 < D->cap)
    sg_memtree_add (&D->vt, s + 1, D->cap, -b);
  sg_memtree_set (&D->vt, s, SG_MEMTREE_NONE);
  D->state[s] = DEF_FOLLOW;
  D->n_synced--;
}

/* Where the reservation of the root led by synced slot @s ends now. */
static int32_t
synced_resv (const Defer *D, int32_t s)
{
  return D->scan >= 0 && s < D->scan ? D->to : D->sync;
}

void
ls_defer_init (Run *R)
{
  const SgSchedProblem *P = R->P;
  Defer *D = &R->defer;
  int32_t nr = MAX (P->n_roots, 1);
  D->cap = MAX (P->n_waits, 1);
  D->slot_w = g_new (SgNodeId, (size_t)D->cap);
  D->live = g_new (int32_t, (size_t)D->cap);
  D->next_same = g_new (int32_t, (size_t)D->cap);
  D->state = g_new0 (uint8_t, (size_t)D->cap);
  D->promo = g_new (int32_t, (size_t)D->cap);
  D->fen = g_new0 (int64_t, (size_t)D->cap + 1);
  D->slot_of = g_new (int32_t, (size_t)D->cap);
  D->lead = g_new (int32_t, (size_t)nr);
  D->tail = g_new (int32_t, (size_t)nr);
  for (int32_t i = 0; i < D->cap; i++)
    D->slot_of[i] = -1;
  for (int32_t i = 0; i < nr; i++)
    D->lead[i] = D->tail[i] = -1;
  sg_memtree_init_fill (&D->vt, D->cap, SG_MEMTREE_NONE);
  D->scan = -1;
  D->idle_from = INT32_MAX;
}

void
ls_defer_clear (Run *R)
{
  Defer *D = &R->defer;
  g_free (D->slot_w);
  g_free (D->live);
  g_free (D->next_same);
  g_free (D->state);
  g_free (D->promo);
  g_free (D->fen);
  g_free (D->slot_of);
  g_free (D->lead);
  g_free (D->tail);
  sg_memtree_clear (&D->vt);
}

/* Makes slot @s, the new leader of root @r, whose reservation ends at
 * @resv, synced or idle. A reservation never ends before sync: a new
 * deferred wait reserves to the frontier, and a step leaves every leader
 * at the frontier or idle. */
static void
lead_state (Run *R, int32_t s, int32_t r, int32_t resv)
{
  Defer *D = &R->defer;
  SgNodeId c = R->P->coll_of[D->slot_w[s]];
  int32_t from = MAX (resv, R->P->in_end[c]);
  R->root_resv[r] = resv;
  if (from == D->sync) {
    synced_add (R, s);
  } else {
    g_assert (from > D->sync);
    D->state[s] = DEF_IDLE;
    D->n_idle++;
    D->idle_from = MIN (D->idle_from, from);
  }
}

void
ls_defer_placed (Run *R, SgNodeId w)
{
  Defer *D = &R->defer;
  int32_t s = D->slot_of[R->P->wait_idx[w]];
  if (s < 0)
    return;
  int32_t r = root_of (R, R->P->coll_of[w]);
  if (r == NO_ROOT || D->lead[r] != s)
    return;
  uint8_t st = D->state[s];
  int32_t resv = R->root_resv[r];
  if (st == DEF_SYNCED) {
    resv = synced_resv (D, s);
    synced_remove (R, s);
  } else if (st == DEF_PROMO) {
    resv = D->to;
  } else if (st == DEF_IDLE && --D->n_idle == 0) {
    D->idle_from = INT32_MAX;
  }
  R->root_resv[r] = resv;
  D->state[s] = DEF_FOLLOW;
  int32_t t = D->next_same[s];
  while (t >= 0 && R->placed[D->slot_w[t]])
    t = D->next_same[t];
  D->lead[r] = t;
  if (t < 0) {
    D->tail[r] = -1;
    return;
  }
  /* The next deferred wait of the root reserves from where this one
   * stopped: within a step, after the step when this one had its turn. */
  if (st == DEF_PROMO || (st == DEF_SYNCED && D->scan >= 0 && s < D->scan)) {
    D->state[t] = DEF_PROMO;
    D->promo[D->n_promo++] = t;
  } else {
    lead_state (R, t, r, resv);
  }
}

void
ls_defer_finished (Run *R, SgNodeId w)
{
  Defer *D = &R->defer;
  int32_t s = D->slot_of[R->P->wait_idx[w]];
  if (s >= 0 && D->state[s] == DEF_SYNCED)
    sg_memtree_add (&D->vt, s, s + 1, (int64_t)(R->P->limit - R->P->peak_in));
}

/* Reserves the memory that keeps collective @c's input (root @r) alive up
 * to input position @to; false (nothing reserved) when it does not fit. A
 * finished collective's wait is only kept back for slack, which may not
 * raise the input order's peak; one still running may use the limit. */
static bool
reserve_input (Run *R, SgNodeId c, int32_t r, int32_t to)
{
  const SgSchedProblem *P = R->P;
  /* The input lives to in_end in the input order anyway. */
  int32_t from = MAX (R->root_resv[r], P->in_end[c]);
  if (from >= to)
    return true;
  if (sg_memtree_max (&R->seg, from, to, NULL) + (int64_t)P->in_bytes[c] > cap_of (R, c))
    return false;
  if (P->in_bytes[c] > 0)
    sg_memtree_add (&R->seg, from, to, (int64_t)P->in_bytes[c]);
  R->root_resv[r] = to;
  return true;
}

void
ls_reach_wait (Run *R, SgNodeId w)
{
  const SgSchedProblem *P = R->P;
  Defer *D = &R->defer;
  SgNodeId c = P->coll_of[w];
  if (c == SG_NO_NODE || (R->placed[c] && sg_eng_finished (&R->eng, c) && P->feeds_coll[w])) {
    ls_run_demand (R, w);
    return;
  }
  int32_t r = root_of (R, c);
  bool leads = r != NO_ROOT && D->lead[r] < 0;
  /* A root with a leader is reserved up to the frontier already. */
  if (leads && !reserve_input (R, c, r, w + 1)) {
    ls_run_demand (R, w);
    return;
  }
  R->deferred[w] = 1;
  int32_t s = D->n_slots++;
  D->slot_w[s] = w;
  D->slot_of[R->P->wait_idx[w]] = s;
  D->live[D->n_live++] = s;
  D->next_same[s] = -1;
  D->state[s] = r == NO_ROOT ? DEF_NONE : DEF_FOLLOW;
  if (r == NO_ROOT)
    return;
  if (D->tail[r] >= 0)
    D->next_same[D->tail[r]] = s;
  D->tail[r] = s;
  if (leads) {
    D->lead[r] = s;
    lead_state (R, s, r, R->root_resv[r]);
  }
}

/* Takes every leader out of the slot tree, their reservations written to
 * root_resv: the state the wait-by-wait loop works on. */
static void
dismantle (Run *R)
{
  Defer *D = &R->defer;
  for (int32_t i = 0; i < D->n_live; i++) {
    int32_t s = D->live[i];
    int32_t r = root_of (R, R->P->coll_of[D->slot_w[s]]);
    if (r == NO_ROOT || D->lead[r] != s)
      continue;
    if (D->state[s] == DEF_SYNCED) {
      R->root_resv[r] = D->sync;
      synced_remove (R, s);
    }
    D->state[s] = DEF_FOLLOW;
    D->lead[r] = D->tail[r] = -1;
  }
  D->n_idle = 0;
  D->idle_from = INT32_MAX;
}

/* Links the waits not placed, in deferral order, per root, and sets each
 * root's leader's state (sync is the frontier's position). */
static void
rebuild (Run *R)
{
  Defer *D = &R->defer;
  int32_t k = 0;
  for (int32_t i = 0; i < D->n_live; i++) {
    int32_t s = D->live[i];
    if (R->placed[D->slot_w[s]])
      continue;
    D->live[k++] = s;
    D->next_same[s] = -1;
    int32_t r = root_of (R, R->P->coll_of[D->slot_w[s]]);
    if (r == NO_ROOT)
      continue;
    if (D->tail[r] >= 0) {
      D->next_same[D->tail[r]] = s;
    } else {
      D->lead[r] = s;
      lead_state (R, s, r, R->root_resv[r]);
    }
    D->tail[r] = s;
  }
  D->n_live = k;
}

/* The wait-by-wait loop: every deferred wait in deferral order. */
static void
extend_each (Run *R, int32_t to)
{
  Defer *D = &R->defer;
  dismantle (R);
  for (int32_t i = 0; i < D->n_live; i++) {
    SgNodeId w = D->slot_w[D->live[i]];
    SgNodeId c = R->P->coll_of[w];
    int32_t r = root_of (R, c);
    if (R->placed[w] || r == NO_ROOT)
      continue;
    if (!reserve_input (R, c, r, to)) {
      R->n_forced_waits++;
      ls_run_demand (R, w);
    }
  }
  D->sync = to;
  rebuild (R);
}

void
ls_extend_deferred (Run *R)
{
  Defer *D = &R->defer;
  int32_t to = MIN (R->frontier + 1, R->P->n), f0 = D->sync;
  if (to <= f0)
    return;
  if (D->idle_from < to || R->P->defer_each) {
    extend_each (R, to);
    return;
  }
  D->scan = 0;
  D->to = to;
  D->n_promo = 0;
  while (D->n_synced > 0) {
    int64_t before = fen_sum (D, D->scan - 1);
    int64_t m = sg_memtree_max (&R->seg, f0, to, NULL);
    /* the first synced leader from scan on that does not fit */
    int32_t j = sg_memtree_first_above (&D->vt, D->scan, before - m);
    int64_t upto = j < 0 ? D->fen_total : fen_sum (D, j - 1);
    if (upto > before)
      sg_memtree_add (&R->seg, f0, to, upto - before);
    if (j < 0)
      break;
    D->scan = j;
    R->n_forced_waits++;
    ls_run_demand (R, D->slot_w[j]);
    D->scan = j + 1;
  }
  D->scan = -1;
  D->sync = to;
  for (int32_t i = 0; i < D->n_promo; i++) {
    int32_t s = D->promo[i];
    if (D->state[s] == DEF_PROMO)
      synced_add (R, s);
  }
  D->n_promo = 0;
}
