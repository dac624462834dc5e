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
 * (exact.c). The compute of every collective's ancestors and descendants
 * comes from bit-parallel reachability, 256 collectives per pass pair
 * (sg_bound_reach_sums), within a budget of word operations; collectives
 * past it keep their paths.
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
sg_bound_rates_init (SgBoundRates *R, const SgSimEngine *e, const SgNodeId *colls, int32_t n)
{
  int32_t ng = MAX (e->g->n_groups, 1), ns = MAX (e->n_slots, 1);
  *R = (SgBoundRates){ .cs = INFINITY, .n_groups = e->g->n_groups, .monotone = true };
  R->slot = g_new (double, (size_t)ng * 2);
  for (int32_t k = 0; k < 2 * ng; k++)
    R->slot[k] = INFINITY;
  g_autofree SgPairRates *own = g_new (SgPairRates, (size_t)ns);
  for (int32_t i = 0; i < n; i++) {
    SgNodeId c = colls[i];
    int32_t r = e->row_of[c];
    const SgPairRates *pr = own;
    if (r >= 0)
      pr = &e->rates[(size_t)r * (size_t)e->n_slots];
    else
      sg_eng_pair_rates (e, c, own);
    int32_t k = sg_bound_slot (&e->g->nodes[c]);
    for (int32_t s = 0; s < e->n_slots; s++) {
      double cx = MAX (pr[s].comm_x, 1.0), kx = MAX (pr[s].kernel_x, 1.0);
      R->slot[k] = MIN (R->slot[k], cx);
      R->cs = MIN (R->cs, kx);
      R->monotone &= kx * (1.0 - 1.0 / cx) < 1.0;
    }
  }
  R->cs = isfinite (R->cs) ? R->cs : 1.0;
  for (int32_t k = 0; k < 2 * ng; k++)
    R->slot[k] = isfinite (R->slot[k]) ? R->slot[k] : 1.0;
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
  g_free (s->order);
  g_free (s->rank);
  g_free (s->tails);
  g_free (s->fen);
  g_free (s->sum);
  memset (s, 0, sizeof *s);
}

typedef struct {
  double key;
  int32_t idx;
} Keyed;

/* Descending key, then ascending index: deterministic. */
static int
by_key_desc (const void *a, const void *b)
{
  const Keyed *x = a, *y = b;
  if (x->key != y->key)
    return x->key > y->key ? -1 : 1;
  return (x->idx > y->idx) - (x->idx < y->idx);
}

static int
by_double_asc (const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static void
scratch_reserve (SgBoundScratch *s, int32_t n, int32_t ns)
{
  if (n <= s->cap && ns <= s->cap_slots)
    return;
  sg_bound_scratch_clear (s);
  s->cap = MAX (n, 16);
  s->cap_slots = MAX (ns, 2);
  s->order = g_new (Keyed, (size_t)s->cap);
  s->rank = g_new (int32_t, (size_t)s->cap);
  s->tails = g_new (double, (size_t)s->cap);
  s->fen = g_new (double, (size_t)(s->cap + 1) * (size_t)s->cap_slots);
  s->sum = g_new (double, (size_t)s->cap_slots * 2);
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

/* h + t + overlap (compute - h - t, w). */
static double
window_value (const SgBoundRates *R, double compute, double h, double t, const double *w)
{
  return h + t + sg_bound_overlap (R, compute - h - t, w);
}

double
sg_bound_windows (const SgBoundRates *R, double compute, const SgBoundJob *jobs, int32_t n,
                  SgBoundScratch *s)
{
  int32_t ns = 2 * R->n_groups;
  if (n <= 0 || ns <= 0)
    return 0.0;
  scratch_reserve (s, n, ns);
  Keyed *order = s->order;
  double *total = s->sum, *pre = s->sum + ns;
  double best = 0.0;
  /* (0, t): the jobs with the largest tails, by prefix. */
  for (int32_t i = 0; i < n; i++)
    order[i] = (Keyed){ jobs[i].tail, i };
  qsort (order, (size_t)n, sizeof *order, by_key_desc);
  memset (total, 0, sizeof (double) * (size_t)ns);
  for (int32_t i = 0; i < n; i++) {
    const SgBoundJob *j = &jobs[order[i].idx];
    total[j->slot] += j->work;
    if (i + 1 == n || order[i + 1].key < order[i].key)
      best = MAX (best, window_value (R, compute, 0.0, j->tail, total));
  }
  /* Tail ranks for the Fenwick tree (equal tails share a rank). */
  for (int32_t i = 0; i < n; i++)
    s->tails[i] = jobs[i].tail;
  qsort (s->tails, (size_t)n, sizeof (double), by_double_asc);
  int32_t nt = 0;
  for (int32_t i = 0; i < n; i++)
    if (nt == 0 || s->tails[i] > s->tails[nt - 1])
      s->tails[nt++] = s->tails[i];
  for (int32_t i = 0; i < n; i++) {
    int32_t lo = 0, hi = nt - 1;
    while (lo < hi) { /* first rank whose tail >= the job's */
      int32_t mid = (lo + hi) / 2;
      if (s->tails[mid] < jobs[i].tail)
        lo = mid + 1;
      else
        hi = mid;
    }
    s->rank[i] = lo + 1;
  }
  memset (s->fen, 0, sizeof (double) * (size_t)(nt + 1) * (size_t)ns);
  /* (h, 0) and (h, t): add jobs by head, largest first; after each run of
   * equal heads, every job of the run opens a window at its own tail. */
  for (int32_t i = 0; i < n; i++)
    order[i] = (Keyed){ jobs[i].head, i };
  qsort (order, (size_t)n, sizeof *order, by_key_desc);
  memset (total, 0, sizeof (double) * (size_t)ns);
  for (int32_t i = 0; i < n;) {
    int32_t e = i;
    while (e < n && order[e].key == order[i].key) {
      const SgBoundJob *j = &jobs[order[e].idx];
      total[j->slot] += j->work;
      fen_add (s->fen, nt, ns, s->rank[order[e].idx], j->slot, j->work);
      e++;
    }
    double h = order[i].key;
    best = MAX (best, window_value (R, compute, h, 0.0, total));
    for (int32_t k = i; k < e; k++) {
      const SgBoundJob *j = &jobs[order[k].idx];
      if (j->tail <= 0.0)
        continue;
      fen_prefix (s->fen, ns, s->rank[order[k].idx] - 1, pre);
      for (int32_t q = 0; q < ns; q++)
        pre[q] = MAX (0.0, total[q] - pre[q]);
      best = MAX (best, window_value (R, compute, h, j->tail, pre));
    }
    i = e;
  }
  return best;
}

/* --- the terms ------------------------------------------------------------------- */

/* Is @nd one of the collectives the bound counts (one with a group)? */
static bool
bound_coll (const SgNode *nd, SgRole role)
{
  return role == SG_ROLE_COLL && nd->group >= 0;
}

/* The graph's collectives (n of them, transfer full). */
static SgNodeId *
collectives (const SgGraph *g, int32_t *n)
{
  SgNodeId *c = g_new (SgNodeId, (size_t)MAX (g->n_nodes, 1));
  *n = 0;
  for (SgNodeId x = 0; x < g->n_nodes; x++)
    if (bound_coll (&g->nodes[x], sg_sched_role (&g->nodes[x])))
      c[(*n)++] = x;
  return c;
}

static void
finish (SgLowerBound *b)
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
    switch (sg_sched_role (nd)) {
    case SG_ROLE_COMPUTE: out->compute_us += c; break;
    case SG_ROLE_COLL: w[sg_bound_slot (nd)] += c; break;
    case SG_ROLE_WAIT: break;
    }
  }
  for (int32_t grp = 0; grp < g->n_groups; grp++)
    out->comm_stream_us = MAX (out->comm_stream_us, w[2 * grp] + w[2 * grp + 1]);
  int32_t nc;
  g_autofree SgNodeId *colls = collectives (g, &nc);
  SgBoundRates R;
  sg_bound_rates_init (&R, e, colls, nc);
  out->overlap_us = sg_bound_overlap (&R, out->compute_us, w);
  sg_bound_rates_clear (&R);
  finish (out);
}

/* Word operations the reach sums may take per refine: a mask word zeroed,
 * read into an OR or stored, and a set bit of a flushed run. A chunk starts
 * only while its passes fit in what is left; past it, the remaining
 * collectives keep their path heads and tails (valid, only weaker). Every
 * collective of the 36K graph fits (12.4M for the input order); at 1M nodes
 * the first two chunks do (about 8M each), in about the time the depth-first
 * walks' 8M node visits took. */
#define SUM_BUDGET ((int64_t)16 * 1000 * 1000)

enum { REACH_WORDS = SG_BOUND_REACH_BITS / 64 };

/* One bit per collective of a chunk. */
typedef struct {
  uint64_t w[REACH_WORDS];
} Mask;

/* The graph's inputs as CSR (adj[first[x] .. first[x + 1]), in the graph's
 * order) with each node's compute work, and one mask per node. */
typedef struct {
  int32_t n;
  uint32_t *first;
  SgNodeId *adj;
  double *work; /* 0 for the roles that are not compute */
  Mask *mask;
  int64_t budget;
} Reach;

/* Consecutive compute nodes with one mask: their work is summed first and
 * added to the sums of the mask's bits once (a fixed order: deterministic). */
typedef struct {
  Mask m;
  double sum;
} Run;

static void
run_flush (Reach *r, const Run *run, double *sums)
{
  for (int k = 0; k < REACH_WORDS; k++)
    for (uint64_t b = run->m.w[k]; b; b &= b - 1) {
      sums[64 * k + __builtin_ctzll (b)] += run->sum;
      r->budget--;
    }
}

static void
run_add (Reach *r, Run *run, const Mask *m, double work, double *sums)
{
  if (memcmp (&run->m, m, sizeof *m) == 0) {
    run->sum += work;
    return;
  }
  run_flush (r, run, sums);
  run->m = *m;
  run->sum = work;
}

/* Tails: @tail[k] += the work of every compute node that descends from
 * member k of @mem (@m ascending ids), by ascending id. mask[x] = the OR of
 * its inputs' masks, and x's own bit once its sum is taken. */
static void
pass_down (Reach *r, const SgNodeId *mem, int32_t m, double *tail)
{
  SgNodeId lo = mem[0];
  memset (r->mask, 0, sizeof (Mask) * (size_t)lo);
  Run run = { 0 };
  int32_t next = 0;
  for (SgNodeId x = lo; x < r->n; x++) {
    Mask acc = { 0 };
    for (uint32_t a = r->first[x]; a < r->first[x + 1]; a++) {
      const Mask *in = &r->mask[r->adj[a]];
      for (int k = 0; k < REACH_WORDS; k++)
        acc.w[k] |= in->w[k];
    }
    if (r->work[x] != 0.0)
      run_add (r, &run, &acc, r->work[x], tail);
    if (next < m && mem[next] == x) {
      acc.w[next / 64] |= (uint64_t)1 << (next % 64);
      next++;
    }
    r->mask[x] = acc;
  }
  run_flush (r, &run, tail);
}

static bool
mask_empty (const Mask *m)
{
  uint64_t any = 0;
  for (int k = 0; k < REACH_WORDS; k++)
    any |= m->w[k];
  return any == 0;
}

/* Heads: @head[k] += the work of every compute node that member k of @mem
 * descends from, by descending id. Each node's mask, final once its users
 * (later ids) have ORed theirs in, is ORed into its inputs'. */
static void
pass_up (Reach *r, const SgNodeId *mem, int32_t m, double *head)
{
  SgNodeId hi = mem[m - 1];
  memset (r->mask, 0, sizeof (Mask) * ((size_t)hi + 1));
  Run run = { 0 };
  int32_t next = m - 1;
  for (SgNodeId x = hi; x >= 0; x--) {
    Mask acc = r->mask[x];
    if (r->work[x] != 0.0)
      run_add (r, &run, &acc, r->work[x], head);
    if (next >= 0 && mem[next] == x) {
      acc.w[next / 64] |= (uint64_t)1 << (next % 64);
      next--;
    }
    if (mask_empty (&acc))
      continue;
    for (uint32_t a = r->first[x]; a < r->first[x + 1]; a++) {
      Mask *in = &r->mask[r->adj[a]];
      for (int k = 0; k < REACH_WORDS; k++)
        in->w[k] |= acc.w[k];
    }
  }
  run_flush (r, &run, head);
}

static void
reach_init (Reach *r, const SgGraph *g, int64_t budget)
{
  int32_t n = g->n_nodes;
  *r = (Reach){ .n = n, .budget = budget };
  r->first = g_new (uint32_t, (size_t)n + 1);
  r->work = g_new (double, (size_t)MAX (n, 1));
  r->first[0] = 0;
  for (SgNodeId x = 0; x < n; x++) {
    const SgNode *nd = &g->nodes[x];
    r->first[x + 1] = r->first[x] + nd->n_in;
    r->work[x] = sg_sched_role (nd) == SG_ROLE_COMPUTE ? sg_sched_cost (nd) : 0.0;
  }
  r->adj = g_new (SgNodeId, (size_t)r->first[n] + 1);
  for (SgNodeId x = 0; x < n; x++) {
    uint32_t k;
    const SgNodeId *ins = sg_node_inputs (g, x, &k);
    memcpy (&r->adj[r->first[x]], ins, sizeof (SgNodeId) * k);
  }
  r->mask = NULL; /* at the first chunk */
}

static void
reach_clear (Reach *r)
{
  g_free (r->first);
  g_free (r->adj);
  g_free (r->work);
  g_free (r->mask);
}

/* The sums of sg_bound_reach_sums on @r's graph, chunk by chunk while
 * @r->budget lasts. */
static int32_t
reach_sums (Reach *r, const SgNodeId *colls, int32_t nc, double *head, double *tail)
{
  int32_t done = 0;
  for (int32_t m; done < nc; done += m) {
    m = MIN (SG_BOUND_REACH_BITS, nc - done);
    const SgNodeId *mem = &colls[done];
    SgNodeId lo = mem[0], hi = mem[m - 1];
    /* both passes, their zeroing included, before the set bits */
    int64_t cost = (int64_t)REACH_WORDS
                   * ((int64_t)r->n + 2 * ((int64_t)hi + 1) + (r->first[r->n] - r->first[lo])
                      + r->first[hi + 1]);
    if (cost > r->budget)
      break;
    r->budget -= cost;
    if (!r->mask)
      r->mask = g_new (Mask, (size_t)r->n);
    memset (&head[done], 0, sizeof (double) * (size_t)m);
    memset (&tail[done], 0, sizeof (double) * (size_t)m);
    pass_up (r, mem, m, &head[done]);
    pass_down (r, mem, m, &tail[done]);
  }
  for (int32_t i = done; i < nc; i++)
    head[i] = tail[i] = -1.0;
  return done;
}

int32_t
sg_bound_reach_sums (const SgGraph *g, const SgNodeId *colls, int32_t nc, int64_t budget,
                     double *head, double *tail)
{
  g_return_val_if_fail (g != NULL && nc >= 0, 0);
  for (int32_t i = 0; i < nc; i++)
    g_return_val_if_fail (colls[i] >= 0 && colls[i] < g->n_nodes
                          && (i == 0 || colls[i] > colls[i - 1]), 0);
  Reach r;
  reach_init (&r, g, budget);
  int32_t done = reach_sums (&r, colls, nc, head, tail);
  reach_clear (&r);
  return done;
}

void
sg_bound_refine_within (const SgGraph *g, SgSimResult *r, int64_t budget)
{
  g_return_if_fail (g != NULL && r != NULL);
  SgLowerBound *b = &r->bound;
  if (b->refined)
    return;
  int32_t n = g->n_nodes;
  /* longest paths: to a node's end (fwd), from a node's start (bwd) */
  g_autofree double *fwd = g_new0 (double, (size_t)MAX (n, 1));
  g_autofree double *bwd = g_new0 (double, (size_t)MAX (n, 1));
  g_autofree double *after = g_new0 (double, (size_t)MAX (n, 1));
  g_autofree double *cost = g_new (double, (size_t)MAX (n, 1));
  Reach rc;
  reach_init (&rc, g, budget);
  const uint32_t *ifirst = rc.first;
  const SgNodeId *ins = rc.adj;
  /* the graph's collectives (collectives ()'s, on this pass over the nodes) */
  g_autofree SgNodeId *colls = g_new (SgNodeId, (size_t)MAX (n, 1));
  int32_t nc = 0;
  for (SgNodeId x = 0; x < n; x++) {
    const SgNode *nd = &g->nodes[x];
    cost[x] = sg_sched_cost (nd);
    if (bound_coll (nd, sg_sched_role (nd)))
      colls[nc++] = x;
    double t = 0.0;
    for (uint32_t a = ifirst[x]; a < ifirst[x + 1]; a++)
      t = MAX (t, fwd[ins[a]]);
    fwd[x] = t + cost[x];
  }
  for (SgNodeId x = n - 1; x >= 0; x--) {
    bwd[x] = after[x] + cost[x];
    for (uint32_t a = ifirst[x]; a < ifirst[x + 1]; a++)
      after[ins[a]] = MAX (after[ins[a]], bwd[x]);
  }
  g_autofree double *head = g_new (double, (size_t)MAX (nc, 1));
  g_autofree double *tail = g_new (double, (size_t)MAX (nc, 1));
  reach_sums (&rc, colls, nc, head, tail);
  reach_clear (&rc);
  g_autofree SgBoundJob *jobs = g_new (SgBoundJob, (size_t)MAX (nc, 1));
  for (int32_t i = 0; i < nc; i++) {
    SgNodeId c = colls[i];
    /* a sum past the budget is -1: the path's head or tail stays */
    jobs[i] = (SgBoundJob){ MAX (fwd[c] - cost[c], head[i]), MAX (after[c], tail[i]), cost[c],
                            sg_bound_slot (&g->nodes[c]) };
  }
  /* the rates: the graph's cost model (its pairs), as sg_simulate's */
  SgSimEngine e;
  sg_eng_init (&e, g, NULL, false);
  SgBoundRates R;
  sg_bound_rates_init (&R, &e, colls, nc);
  sg_eng_clear (&e);
  SgBoundScratch s = { 0 };
  b->window_us = sg_bound_windows (&R, b->compute_us, jobs, nc, &s);
  sg_bound_scratch_clear (&s);
  sg_bound_rates_clear (&R);
  b->refined = true;
  finish (b);
  r->lower_bound_us = b->lower_bound_us;
}

void
sg_lower_bound_refine (const SgGraph *g, SgSimResult *r)
{
  sg_bound_refine_within (g, r, SUM_BUDGET);
}
