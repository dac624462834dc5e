/* bound.c: a lower bound on the step of any order of a graph, by term.
 *
 * Terms (docs/scheduler.md "Lower bound"): compute work; the busiest comm
 * stream; the critical path; `overlap`, a linear relaxation of the
 * simulator's timeline in which overlapping a collective with compute costs
 * compute_slowdown and not overlapping it costs its whole time; and
 * `window`: for thresholds (h, t), the collectives that cannot start before
 * h (compute of their ancestors, or their longest input path) and must end
 * t before the step does (compute of their descendants, or their longest
 * output path) all run inside [h, step - t], together with all compute but
 * at most h + t of it, so the step is at least h + t + overlap(that). The
 * same relaxation prices the rest of a partial order in the exact scheduler
 * (exact.c). The window term's heads and tails are made in window.c
 * (sg_lower_bound_refine; the compute of every collective's ancestors and
 * descendants by bit-parallel reachability, reach.c); here the windows
 * over them (sg_bound_windows) and every other term (sg_bound_basic, one
 * pass over the nodes).
 * Mirrors: the preemptive one-machine bound with heads and tails (Jackson;
 * Carlier, "The one-machine sequencing problem", EJOR 1982), with the
 * machine shared by compute and contention added.
 * Requires: est_us (estimate/). Invalidates: nothing.
 */
#include <stdlib.h>
#include <string.h>

#include "schedule-private.h"

/* --- the relaxation ---------------------------------------------------------- */

/* The step of the relaxation when compute is busy beside running comm for
 * @b us: compute left alone, plus @b, plus the comm work the busiest group
 * still has to do alone (each group uses @b on its cheapest slot first). */
static double
overlap_at (const SgBoundRates *R, double compute, const double *w, double b)
{
  double t = b + MAX (0.0, compute - b / R->cs);
  double worst = 0.0;
  for (int32_t grp = 0; grp < R->n_groups; grp++) {
    /* the group uses b on its cheaper slot first */
    int32_t f = R->slot[2 * grp + 1] < R->slot[2 * grp] ? 2 * grp + 1 : 2 * grp;
    int32_t s = f ^ 1;
    double left = b, rem = w[f] + w[s];
    double use = MIN (left, R->slot[f] * w[f]);
    rem -= use / R->slot[f];
    left -= use;
    use = MIN (left, R->slot[s] * w[s]);
    rem -= use / R->slot[s];
    worst = MAX (worst, rem);
  }
  return t + worst;
}

double
sg_bound_overlap (const SgBoundRates *R, double compute, const double *slot_work)
{
  /* The relaxation is convex and piecewise linear in b: its minimum is at
   * a breakpoint. */
  compute = MAX (compute, 0.0);
  double best = overlap_at (R, compute, slot_work, 0.0);
  best = MIN (best, overlap_at (R, compute, slot_work, R->cs * compute));
  for (int32_t grp = 0; grp < R->n_groups; grp++) {
    int32_t f = R->slot[2 * grp + 1] < R->slot[2 * grp] ? 2 * grp + 1 : 2 * grp;
    double b1 = R->slot[f] * slot_work[f];
    double b2 = b1 + R->slot[f ^ 1] * slot_work[f ^ 1];
    best = MIN (best, overlap_at (R, compute, slot_work, b1));
    best = MIN (best, overlap_at (R, compute, slot_work, b2));
  }
  return best;
}

void
sg_bound_rates_begin (SgBoundRates *R, int32_t n_groups)
{
  int32_t ng = MAX (n_groups, 1);
  *R = (SgBoundRates){ .cs = INFINITY, .n_groups = n_groups, .monotone = true };
  R->slot = g_new (double, (size_t)ng * 2);
  for (int32_t k = 0; k < 2 * ng; k++)
    R->slot[k] = INFINITY;
}

void
sg_bound_rates_add (SgBoundRates *R, int32_t slot, const SgPairRates *pr, int32_t n_slots)
{
  for (int32_t s = 0; s < n_slots; s++) {
    double cx = MAX (pr[s].comm_x, 1.0), kx = MAX (pr[s].kernel_x, 1.0);
    R->slot[slot] = MIN (R->slot[slot], cx);
    R->cs = MIN (R->cs, kx);
    R->monotone &= kx * (1.0 - 1.0 / cx) < 1.0;
  }
}

void
sg_bound_rates_end (SgBoundRates *R)
{
  int32_t ng = MAX (R->n_groups, 1);
  R->cs = isfinite (R->cs) ? R->cs : 1.0;
  for (int32_t k = 0; k < 2 * ng; k++)
    R->slot[k] = isfinite (R->slot[k]) ? R->slot[k] : 1.0;
}

/* Adds collective @c's rates on engine @e: its row's pairs when issued,
 * else sg_eng_pair_rates' (through @own, n_slots of them). */
static void
rates_add_coll (SgBoundRates *R, const SgSimEngine *e, SgNodeId c, SgPairRates *own)
{
  int32_t r = e->row_of ? e->row_of[c] : -1;
  const SgPairRates *pr = own;
  if (r >= 0)
    pr = sg_eng_row_rates (e, r);
  else
    sg_eng_pair_rates (e, c, own);
  sg_bound_rates_add (R, sg_bound_slot (&e->g->nodes[c]), pr, e->n_slots);
}

void
sg_bound_rates_init (SgBoundRates *R, const SgSimEngine *e, const SgNodeId *colls, int32_t n)
{
  sg_bound_rates_begin (R, e->g->n_groups);
  g_autofree SgPairRates *own = g_new (SgPairRates, (size_t)MAX (e->n_slots, 1));
  for (int32_t i = 0; i < n; i++)
    rates_add_coll (R, e, colls[i], own);
  sg_bound_rates_end (R);
}

void
sg_bound_rates_clear (SgBoundRates *R)
{
  g_free (R->slot);
  R->slot = NULL;
}

/* --- windows ------------------------------------------------------------------- */

void
sg_bound_scratch_clear (SgBoundScratch *s)
{
  g_free (s->by_tail);
  g_free (s->by_head);
  g_free (s->spare[0]);
  g_free (s->spare[1]);
  g_free (s->rank);
  g_free (s->fen);
  g_free (s->sum);
  memset (s, 0, sizeof *s);
}

typedef SgBoundKeyed Keyed;

/* Descending key, then ascending index: deterministic. */
static int
by_key_desc (const void *a, const void *b)
{
  const Keyed *x = a, *y = b;
  if (x->key != y->key)
    return x->key > y->key ? -1 : 1;
  return (x->idx > y->idx) - (x->idx < y->idx);
}

/* Below this many jobs qsort, else a radix sort: the same order. */
#define RADIX_MIN 256

/* Entry @x's key as an unsigned integer that orders as by_key_desc
 * orders keys (equal keys, -0 and +0 among them, give equal integers). */
static inline uint64_t
desc_bits (const void *x)
{
  return ~sg_double_order_bits (((const Keyed *)x)->key);
}

/* Sorts @v (@n of them, by ascending index) in by_key_desc's order:
 * sg_radix_sort over desc_bits, bytes from the lowest, through @tmp (ties
 * keep their index order). qsort for few jobs or a NaN. */
static void
sort_desc (Keyed *v, Keyed *tmp, int32_t n)
{
  bool nan = false;
  for (int32_t i = 0; i < n && n >= RADIX_MIN; i++)
    nan |= isnan (v[i].key);
  if (n < RADIX_MIN || nan) {
    qsort (v, (size_t)n, sizeof *v, by_key_desc);
    return;
  }
  sg_radix_sort (v, tmp, n, sizeof *v, 8, desc_bits);
}

void
sg_bound_windows_reserve (SgBoundScratch *s, int32_t n, int32_t n_slots)
{
  if (n <= s->cap && n_slots <= s->cap_slots)
    return;
  sg_bound_scratch_clear (s);
  s->cap = MAX (n, 16);
  s->cap_slots = MAX (n_slots, 2);
  s->by_tail = g_new (Keyed, (size_t)s->cap);
  s->by_head = g_new (Keyed, (size_t)s->cap);
  s->spare[0] = g_new (Keyed, (size_t)s->cap);
  s->spare[1] = g_new (Keyed, (size_t)s->cap);
  s->rank = g_new (int32_t, (size_t)s->cap);
  s->fen = g_new (double, (size_t)(s->cap + 1) * (size_t)s->cap_slots);
  s->sum = g_new (double, (size_t)s->cap_slots * 3);
}

void
sg_bound_windows_sort (const SgBoundJob *jobs, int32_t n, bool by_head, SgBoundScratch *s)
{
  Keyed *order = by_head ? s->by_head : s->by_tail;
  for (int32_t i = 0; i < n; i++)
    order[i] = (Keyed){ by_head ? jobs[i].head : jobs[i].tail, i };
  sort_desc (order, s->spare[by_head], n);
}

void
sg_bound_windows_ranks (int32_t n, SgBoundScratch *s)
{
  const Keyed *order = s->by_tail;
  int32_t nt = 0; /* distinct tails */
  for (int32_t i = 0; i < n; i++)
    nt += i + 1 == n || order[i + 1].key != order[i].key;
  /* 1 for the least (equal tails share a rank) */
  for (int32_t i = 0, d = 0; i < n; i++) {
    s->rank[order[i].idx] = nt - d;
    d += i + 1 < n && order[i + 1].key != order[i].key;
  }
  s->n_tails = nt;
}

/* Fenwick tree of slot vectors over tail ranks 1..n. */
static void
fen_add (double *fen, int32_t n, int32_t ns, int32_t at, int32_t slot, double v)
{
  for (int32_t i = at; i <= n; i += i & -i)
    fen[(size_t)i * (size_t)ns + (size_t)slot] += v;
}

/* out[slot] = sum over ranks 1..at. */
static void
fen_prefix (const double *fen, int32_t ns, int32_t at, double *out)
{
  memset (out, 0, sizeof (double) * (size_t)ns);
  for (int32_t i = at; i > 0; i -= i & -i)
    for (int32_t k = 0; k < ns; k++)
      out[k] += fen[(size_t)i * (size_t)ns + (size_t)k];
}

/* max (@best, h + t + overlap (compute - h - t, w)). The relaxation at
 * b = 0 (its first breakpoint) is at least its minimum, and a sum rounds
 * monotonically: where that bound is no more than @best, so is the value,
 * and it is not made. */
static double
window_raise (const SgBoundRates *R, double compute, double h, double t, const double *w,
              double best)
{
  if (h + t + overlap_at (R, MAX (compute - h - t, 0.0), w, 0.0) <= best)
    return best;
  return MAX (best, h + t + sg_bound_overlap (R, compute - h - t, w));
}

double
sg_bound_windows_seed (const SgBoundRates *R, double compute, const SgBoundJob *jobs, int32_t n,
                       SgBoundScratch *s)
{
  int32_t ns = 2 * R->n_groups;
  const Keyed *order = s->by_tail;
  double *total = s->sum;
  /* the (0, t) window of the least tail: every job, summed in the order
   * the tail sweep sums them */
  memset (total, 0, sizeof (double) * (size_t)ns);
  for (int32_t i = 0; i < n; i++)
    total[jobs[order[i].idx].slot] += jobs[order[i].idx].work;
  return window_raise (R, compute, 0.0, jobs[order[n - 1].idx].tail, total, 0.0);
}

double
sg_bound_tail_windows (const SgBoundRates *R, double compute, const SgBoundJob *jobs, int32_t n,
                       SgBoundScratch *s, double best)
{
  int32_t ns = 2 * R->n_groups;
  const Keyed *order = s->by_tail;
  double *total = s->sum;
  /* (0, t): the jobs with the largest tails, by prefix */
  memset (total, 0, sizeof (double) * (size_t)ns);
  for (int32_t i = 0; i < n; i++) {
    const SgBoundJob *j = &jobs[order[i].idx];
    total[j->slot] += j->work;
    if (i + 1 == n || order[i + 1].key < order[i].key)
      best = window_raise (R, compute, 0.0, j->tail, total, best);
  }
  return best;
}

double
sg_bound_head_windows (const SgBoundRates *R, double compute, const SgBoundJob *jobs, int32_t n,
                       SgBoundScratch *s, double best)
{
  int32_t ns = 2 * R->n_groups, nt = s->n_tails;
  const Keyed *order = s->by_head;
  double *total = s->sum + ns, *pre = s->sum + 2 * ns;
  memset (s->fen, 0, sizeof (double) * (size_t)(nt + 1) * (size_t)ns);
  /* (h, 0) and (h, t): add jobs by head, largest first; after each run of
   * equal heads, every job of the run opens a window at its own tail. */
  memset (total, 0, sizeof (double) * (size_t)ns);
  for (int32_t i = 0; i < n;) {
    int32_t e = i;
    do { /* a run of equal heads (a NaN alone: it equals nothing) */
      const SgBoundJob *j = &jobs[order[e].idx];
      total[j->slot] += j->work;
      fen_add (s->fen, nt, ns, s->rank[order[e].idx], j->slot, j->work);
      e++;
    } while (e < n && order[e].key == order[i].key);
    double h = order[i].key;
    best = window_raise (R, compute, h, 0.0, total, best);
    /* a window (h, t) holds at most @total: overlap_at (0) over it is at
     * most this (window_raise's bound, without the tree's prefix) */
    double most = 0.0;
    for (int32_t grp = 0; grp < R->n_groups; grp++)
      most = MAX (most, total[2 * grp] + total[2 * grp + 1]);
    for (int32_t k = i; k < e; k++) {
      const SgBoundJob *j = &jobs[order[k].idx];
      if (j->tail <= 0.0 || h + j->tail + (MAX (compute - h - j->tail, 0.0) + most) <= best)
        continue;
      fen_prefix (s->fen, ns, s->rank[order[k].idx] - 1, pre);
      for (int32_t q = 0; q < ns; q++)
        pre[q] = MAX (0.0, total[q] - pre[q]);
      best = window_raise (R, compute, h, j->tail, pre, best);
    }
    i = e;
  }
  return best;
}

double
sg_bound_windows (const SgBoundRates *R, double compute, const SgBoundJob *jobs, int32_t n,
                  SgBoundScratch *s)
{
  int32_t ns = 2 * R->n_groups;
  if (n <= 0 || ns <= 0)
    return 0.0;
  sg_bound_windows_reserve (s, n, ns);
  sg_bound_windows_sort (jobs, n, false, s);
  sg_bound_windows_ranks (n, s);
  double best = sg_bound_windows_seed (R, compute, jobs, n, s);
  best = sg_bound_tail_windows (R, compute, jobs, n, s, best);
  sg_bound_windows_sort (jobs, n, true, s);
  return sg_bound_head_windows (R, compute, jobs, n, s, best);
}

/* --- the terms ------------------------------------------------------------------- */

void
sg_bound_finish (SgLowerBound *b)
{
  b->lower_bound_us = MAX (MAX (b->compute_us, b->comm_stream_us),
                           MAX (b->critical_path_us, MAX (b->overlap_us, b->window_us)));
}

void
sg_bound_basic (const SgGraph *g, const SgSimEngine *e, SgLowerBound *out)
{
  memset (out, 0, sizeof *out);
  int32_t n = g->n_nodes, ns = 2 * MAX (g->n_groups, 1);
  g_autofree double *fin = g_new0 (double, (size_t)MAX (n, 1));
  g_autofree double *w = g_new0 (double, (size_t)ns);
  /* the rates of the collectives the bound counts, on this one pass over
   * the nodes */
  SgBoundRates R;
  sg_bound_rates_begin (&R, g->n_groups);
  g_autofree SgPairRates *own = g_new (SgPairRates, (size_t)MAX (e->n_slots, 1));
  for (SgNodeId x = 0; x < n; x++) {
    const SgNode *nd = &g->nodes[x];
    double c = sg_sched_cost (nd);
    uint32_t k;
    const SgNodeId *in = sg_node_inputs (g, x, &k);
    double t = 0.0;
    for (uint32_t j = 0; j < k; j++)
      t = MAX (t, fin[in[j]]);
    fin[x] = t + c;
    out->critical_path_us = MAX (out->critical_path_us, fin[x]);
    SgRole role = sg_sched_role (nd);
    switch (role) {
    case SG_ROLE_COMPUTE: out->compute_us += c; break;
    case SG_ROLE_COLL:
      w[sg_bound_slot (nd)] += c;
      if (sg_bound_coll (nd, role))
        rates_add_coll (&R, e, x, own);
      break;
    case SG_ROLE_WAIT: break;
    }
  }
  for (int32_t grp = 0; grp < g->n_groups; grp++)
    out->comm_stream_us = MAX (out->comm_stream_us, w[2 * grp] + w[2 * grp + 1]);
  sg_bound_rates_end (&R);
  out->overlap_us = sg_bound_overlap (&R, out->compute_us, w);
  sg_bound_rates_clear (&R);
  sg_bound_finish (out);
}
