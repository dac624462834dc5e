/* sim.c: the timeline simulator, the single judge of an order.
 *
 * One compute stream and one comm stream per process group (NCCL
 * serialises the collectives of one communicator). Walking the order:
 * compute nodes run back to back on the compute stream; a collective is
 * queued on its group's stream at the compute stream's current time and
 * starts when the stream is free; a wait stalls the compute stream until
 * its collective ends (that stall is the collective's exposed time).
 * Contention is integrated piecewise, event by event, per pair (the
 * collective and the running kernel's slot, estimate/'s contention table):
 * while the compute stream is busy, running collectives progress at
 * 1/comm_x of their pair; while any collective runs, compute progresses at
 * 1/kernel_x of the most disturbing one. Without a contention profile the
 * pairs are the global comm/reduce/compute slowdowns.
 * Start wait: a collective that becomes startable beside a running kernel,
 * or right before one starts (the kernel issued after it), starts only
 * after the pair's wait (during / before) x that kernel's remaining time
 * (Hopper GEMMs hold every SM; docs/cost-model.md section 3); without a
 * contention profile only matmul/attention kernels hold, and a matmul with
 * an SM-count target leaves SMs free and holds nothing (its own kernel
 * class, sg_node_kernel_class).
 * Mirrors: the runtime estimate of Inductor's overlap scheduler and XLA's
 * latency-hiding scheduler's async tracker, with contention added.
 * Requires: est_us (estimate/); the graph's cost model for the pairs
 * (global factors without one, no start wait). Invalidates: nothing
 * (read-only).
 * snap.c saves and restores the engine's state for the searches: a new
 * per-row or per-group array of SgSimEngine needs a line there (scalars
 * are copied with the struct).
 */
#include <string.h>

#include "schedule-private.h"

G_DEFINE_QUARK (sg-schedule-error-quark, sg_schedule_error)

/* Below this much work left, a collective counts as finished (rounding). */
#define REM_EPS 1e-9

const char *
sg_exposure_name (SgExposure e)
{
  switch (e) {
  case SG_EXPOSURE_HIDDEN:
    return "hidden";
  case SG_EXPOSURE_PARTIAL:
    return "partial";
  case SG_EXPOSURE_EXPOSED:
    return "exposed";
  }
  return "exposed";
}

/* --- pair rates, memoised --------------------------------------------------- */

/* Open addressing, linear probing; entry i's rates at rates[i * n_slots]. */
struct SgRatesMemo {
  int32_t n_slots, cap, used;
  SgRatesKey *keys;
  int32_t *slot_of; /* cap entries: index into keys/rates, -1 empty */
  SgPairRates *rates;
  uint8_t *wnext; /* per entry: some slot has wait_before > 0 */
};

static SgRatesMemo *
memo_new (int32_t n_slots)
{
  SgRatesMemo *m = g_new0 (SgRatesMemo, 1);
  m->n_slots = n_slots;
  return m;
}

static void
memo_free (SgRatesMemo *m)
{
  if (!m)
    return;
  g_free (m->keys);
  g_free (m->slot_of);
  g_free (m->rates);
  g_free (m->wnext);
  g_free (m);
}

/* The entry of @k: its index, or where it goes (-1 - slot). */
static int32_t
memo_find (const SgRatesMemo *m, const SgRatesKey *k, uint32_t *slot)
{
  uint32_t mask = (uint32_t)m->cap - 1;
  for (uint32_t i = sg_rates_key_hash (k) & mask;; i = (i + 1) & mask) {
    int32_t at = m->slot_of[i];
    if (at < 0 || sg_rates_key_equal (&m->keys[at], k)) {
      *slot = i;
      return at;
    }
  }
}

/* A copy of @src (for a fork: its rows' entries are the same). */
static SgRatesMemo *
memo_dup (const SgRatesMemo *src)
{
  SgRatesMemo *m = memo_new (src->n_slots);
  m->cap = src->cap;
  m->used = src->used;
  if (src->cap > 0) {
    size_t half = (size_t)src->cap / 2;
    m->slot_of = g_memdup2 (src->slot_of, sizeof (int32_t) * (size_t)src->cap);
    m->keys = g_memdup2 (src->keys, sizeof (SgRatesKey) * half);
    m->rates = g_memdup2 (src->rates, sizeof (SgPairRates) * half * (size_t)src->n_slots);
    m->wnext = g_memdup2 (src->wnext, half);
  }
  return m;
}

static void
memo_grow (SgRatesMemo *m)
{
  int32_t cap = m->cap ? 2 * m->cap : 64;
  g_free (m->slot_of);
  m->cap = cap;
  m->slot_of = g_new (int32_t, (size_t)cap);
  memset (m->slot_of, 0xff, sizeof (int32_t) * (size_t)cap);
  m->keys = g_renew (SgRatesKey, m->keys, (size_t)cap / 2);
  m->rates = g_renew (SgPairRates, m->rates, (size_t)cap / 2 * (size_t)m->n_slots);
  m->wnext = g_renew (uint8_t, m->wnext, (size_t)cap / 2);
  for (int32_t e = 0; e < m->used; e++) {
    uint32_t slot;
    memo_find (m, &m->keys[e], &slot);
    m->slot_of[slot] = e;
  }
}

void
sg_tlog_grow (SgTlog *l)
{
  l->cap = MAX (1024, 2 * l->cap);
  l->v = g_renew (SgTlogEntry, l->v, l->cap);
}

/* Advances the clock by @dt (logged when the engine logs). */
static inline void
advance (SgSimEngine *e, double dt)
{
  e->now += dt;
  if (e->tlog)
    sg_tlog_add (e->tlog, dt, SG_TLOG_ADD, -1);
}

/* --- engine --------------------------------------------------------------- */

void
sg_eng_init_rates (SgSimEngine *e, const SgGraph *g, const SgContention *cont)
{
  memset (e, 0, sizeof *e);
  e->g = g;
  const SgCostModel *cm = sg_graph_cost_model (g);
  static const SgContention none = { 1.0, 1.0, 1.0 };
  if (!cont && cm)
    e->pairs = cm;
  e->cont = cont ? *cont : none;
  double sw = cm ? sg_cost_model_comm_start_wait (cm) : 0.0;
  e->sw = isfinite (sw) ? CLAMP (sw, 0.0, 1.0) : 0.0;
  e->n_slots = sg_cost_contention_slots (e->pairs);
  e->held_scale = e->pairs ? sg_cost_model_held_scale (e->pairs) : 0.0;
  e->n_groups = g->n_groups;
  e->memo = memo_new (e->n_slots);
}

void
sg_eng_init (SgSimEngine *e, const SgGraph *g, const SgContention *cont, bool track_nodes)
{
  int32_t nc = 0;
  for (SgNodeId i = 0; i < g->n_nodes; i++)
    nc += sg_sched_role (&g->nodes[i]) == SG_ROLE_COLL;
  sg_eng_init_sized (e, g, cont, track_nodes, nc);
}

void
sg_eng_init_sized (SgSimEngine *e, const SgGraph *g, const SgContention *cont, bool track_nodes,
                   int32_t n_coll)
{
  sg_eng_init_rates (e, g, cont);
  int32_t ng = MAX (g->n_groups, 1);
  e->hold = g_new0 (uint8_t, (size_t)ng);
  e->hold_at = g_new0 (double, (size_t)ng);
  e->ghead = g_new (int32_t, (size_t)ng);
  e->gtail = g_new (int32_t, (size_t)ng);
  for (int32_t i = 0; i < ng; i++)
    e->ghead[i] = e->gtail[i] = -1;
  e->cap_rows = MAX (n_coll, 1);
  e->rows = g_new0 (SgCollRow, (size_t)e->cap_rows);
  e->rnext = g_new (int32_t, (size_t)e->cap_rows);
  e->rem = g_new0 (double, (size_t)e->cap_rows);
  e->rent = g_new (int32_t, (size_t)e->cap_rows);
  e->fin = g_new0 (uint8_t, (size_t)e->cap_rows);
  e->row_of = g_new (int32_t, (size_t)MAX (g->n_nodes, 1));
  memset (e->row_of, 0xff, sizeof (int32_t) * (size_t)MAX (g->n_nodes, 1)); /* -1 */
  if (track_nodes) {
    e->node_start = g_new0 (double, (size_t)MAX (g->n_nodes, 1));
    e->node_end = g_new0 (double, (size_t)MAX (g->n_nodes, 1));
  }
}

void
sg_eng_fork_rates (SgSimEngine *dst, const SgSimEngine *src)
{
  *dst = *src;
  dst->memo = memo_dup (src->memo);
}

void
sg_eng_fork_clear (SgSimEngine *e)
{
  memo_free (e->memo);
  memset (e, 0, sizeof *e);
}

void
sg_eng_clear (SgSimEngine *e)
{
  g_free (e->ghead);
  g_free (e->gtail);
  g_free (e->hold);
  g_free (e->hold_at);
  g_free (e->rows);
  g_free (e->rnext);
  g_free (e->rem);
  g_free (e->rent);
  g_free (e->fin);
  g_free (e->row_of);
  g_free (e->node_start);
  g_free (e->node_end);
  memo_free (e->memo);
  memset (e, 0, sizeof *e);
}

static void
start_head (SgSimEngine *e, int32_t grp)
{
  int32_t r = e->ghead[grp];
  e->rows[r].start_us = e->now;
  if (e->node_start)
    e->node_start[e->rows[r].node] = e->now;
}

/* Row @r's pairs (n_slots). */
static inline const SgPairRates *
row_rates (const SgSimEngine *e, int32_t r)
{
  return &e->memo->rates[(size_t)e->rent[r] * (size_t)e->n_slots];
}

/* Row @r's pair with the running kernel. */
static inline const SgPairRates *
pair (const SgSimEngine *e, int32_t r)
{
  return &row_rates (e, r)[e->kslot];
}

/* The head of @grp became startable now: starts it, or holds it (the start
 * wait rule, schedule-private.h). */
static void
head_ready (SgSimEngine *e, int32_t grp)
{
  const int32_t r = e->ghead[grp];
  double wd;
  if (!e->in_kernel && e->memo->wnext[e->rent[r]]) {
    e->hold[grp] = SG_HOLD_NEXT;
    e->n_held++;
  } else if (e->in_kernel && e->kleft > 0.0 && (wd = pair (e, r)->wait_during) > 0.0) {
    e->hold[grp] = SG_HOLD_KERNEL;
    e->hold_at[grp] = e->kleft * (1.0 - wd);
    e->n_held++;
    e->n_kheld++;
  } else {
    start_head (e, grp);
  }
}

static void
release (SgSimEngine *e, int32_t grp)
{
  e->n_held--;
  e->n_kheld -= e->hold[grp] == SG_HOLD_KERNEL;
  e->hold[grp] = SG_HOLD_NONE;
  start_head (e, grp);
}

/* Releases every head held with @kind. */
static void
release_all (SgSimEngine *e, uint8_t kind)
{
  for (int32_t grp = 0; grp < e->n_groups && e->n_held > 0; grp++)
    if (e->hold[grp] == kind)
      release (e, grp);
}

static void
finish_head (SgSimEngine *e, int32_t grp)
{
  int32_t r = e->ghead[grp];
  e->rem[r] = 0.0;
  e->fin[r] = 1;
  e->rows[r].end_us = e->now;
  if (e->node_end)
    e->node_end[e->rows[r].node] = e->now;
  e->ghead[grp] = e->rnext[r];
  if (e->ghead[grp] < 0) {
    e->gtail[grp] = -1;
    e->n_active--;
  } else {
    head_ready (e, grp);
  }
  if (e->on_finish)
    e->on_finish (e->ud, e->rows[r].node);
}

/* Is @grp's head running with no work left? */
static inline bool
head_done (const SgSimEngine *e, int32_t grp)
{
  return e->ghead[grp] >= 0 && !e->hold[grp] && e->rem[e->ghead[grp]] <= REM_EPS;
}

static void
finish_done (SgSimEngine *e, int32_t grp)
{
  do
    finish_head (e, grp);
  while (head_done (e, grp));
}

/* Finishes every running collective with no work left. */
static inline void
settle (SgSimEngine *e)
{
  for (int32_t grp = 0; grp < e->n_groups; grp++)
    if (head_done (e, grp))
      finish_done (e, grp);
}

/* Advances time with the compute stream idle, to the next collective end
 * (or start of a held one, released first). The engine is settled, and is
 * again on return. Returns true when nothing ran (no time passed). */
static bool
idle_step (SgSimEngine *e)
{
  if (e->n_held > 0) {
    /* time passes with the compute stream idle: nothing holds the SMs */
    release_all (e, SG_HOLD_NEXT);
    release_all (e, SG_HOLD_KERNEL);
    settle (e);
  }
  if (e->n_active - e->n_held == 0) {
    advance (e, 0.0);
    return true;
  }
  double best = INFINITY;
  int32_t who = -1;
  for (int32_t grp = 0; grp < e->n_groups; grp++) {
    int32_t h = e->ghead[grp];
    if (h < 0 || e->hold[grp])
      continue;
    if (e->rem[h] < best) {
      best = e->rem[h];
      who = grp;
    }
  }
  for (int32_t grp = 0; grp < e->n_groups; grp++) {
    int32_t h = e->ghead[grp];
    if (h < 0 || e->hold[grp])
      continue;
    e->rem[h] = grp == who ? 0.0 : e->rem[h] - best;
  }
  advance (e, best);
  if (who >= 0) {
    finish_head (e, who);
    settle (e);
    return false;
  }
  return true;
}

/* Advances time while kernel @hider runs (slot kslot, kleft work left),
 * by at most the kernel's end: to the next collective end or held
 * collective's start, when earlier. The engine is settled and some
 * collective runs or is held by the kernel. Returns true when the
 * kernel's end came first; else the engine is settled again. */
static bool
kernel_step (SgSimEngine *e, SgNodeId hider)
{
  /* row r's pair: kr[rent[r] * n_slots] */
  const SgPairRates *kr = e->memo->rates + e->kslot;
  const int32_t *rent = e->rent;
  const size_t ns = (size_t)e->n_slots;
  /* In one pass, the kernel's rate and the first running collective to
   * end alone (the earliest end; of equal ends, the first group's). The
   * rate: wall time per unit of kernel work, the kernel_x of the most
   * disturbing running collective, 1 when none runs. With measured pairs
   * a head held by the start wait slows it too (by held_scale of its
   * kernel_x): on 2 GPUs it is resident on the rank where it got in
   * first, waiting for its peer, and the step goes at the pace of the
   * slower rank (docs/cost-model.md, "Held collectives"). */
  double x = 0.0, first = INFINITY;
  int32_t who = -1;
  for (int32_t grp = 0; grp < e->n_groups; grp++) {
    int32_t h = e->ghead[grp];
    if (h < 0)
      continue;
    const SgPairRates *hr = &kr[(size_t)rent[h] * ns];
    const double kx = hr->kernel_x;
    if (e->hold[grp]) {
      x = MAX (x, 1.0 + e->held_scale * (kx - 1.0));
      continue;
    }
    x = MAX (x, kx);
    double t = e->rem[h] * hr->comm_x;
    if (t < first) {
      first = t;
      who = grp;
    }
  }
  const double crate = x > 0.0 ? x : 1.0; /* wall time per unit of kernel work */
  /* the earliest of those ends and the kernel's, the kernel's on a tie */
  double best = e->kleft * crate;
  if (first < best)
    best = first;
  else
    who = -1;
  int32_t rel = -1;
  if (e->n_kheld > 0) {
    for (int32_t grp = 0; grp < e->n_groups; grp++) {
      if (e->hold[grp] != SG_HOLD_KERNEL)
        continue;
      double t = MAX (e->kleft - e->hold_at[grp], 0.0) * crate;
      if (t < best) {
        best = t;
        who = -1;
        rel = grp;
      }
    }
  }
  bool hides = best > 0.0 && hider != SG_NO_NODE;
  for (int32_t grp = 0; grp < e->n_groups; grp++) {
    int32_t h = e->ghead[grp];
    if (h < 0 || e->hold[grp])
      continue;
    e->rem[h] = grp == who ? 0.0 : e->rem[h] - best / kr[(size_t)rent[h] * ns].comm_x;
    if (hides) {
      SgCollRow *row = &e->rows[h];
      row->overlap_us += best;
      if (row->last_hiding != hider) {
        row->n_hiding++;
        row->last_hiding = hider;
        if (row->hidden_by == SG_NO_NODE)
          row->hidden_by = hider;
      }
    }
  }
  advance (e, best);
  e->kleft -= best / crate;
  if (rel >= 0) {
    /* that head and every other whose point is reached (ties) start now */
    for (int32_t grp = 0; grp < e->n_groups; grp++)
      if (e->hold[grp] == SG_HOLD_KERNEL
          && (grp == rel || e->kleft - e->hold_at[grp] <= REM_EPS * (1.0 + e->kleft)))
        release (e, grp);
    settle (e);
    return false;
  }
  if (who >= 0) {
    finish_head (e, who);
    settle (e);
    return false;
  }
  return true;
}

/* The rates of @k, made. */
static void
pair_rates (const SgSimEngine *e, const SgRatesKey *k, SgPairRates *out)
{
  if (e->pairs) {
    const SgCostModel *cm = e->pairs;
    sg_cost_contention_rates (cm, (SgTransport)k->transport, (SgOpKind)k->kind, k->bytes,
                              k->group_size, sg_cost_group_nodes (cm, &e->g->groups[k->group]),
                              out);
  } else {
    for (int32_t s = 0; s < e->n_slots; s++)
      sg_contention_global_rates (&e->cont, e->sw, (SgOpKind)k->kind, (SgKernelClass)s, &out[s]);
  }
}

int32_t
sg_eng_rates_entry (const SgSimEngine *e, SgNodeId c, const SgPairRates **out)
{
  const SgNode *n = &e->g->nodes[c];
  /* the global factors depend on the kind alone */
  SgRatesKey k = e->pairs ? sg_rates_key_of (e->g, c, e->pairs)
                          : (SgRatesKey){ 0, n->kind, 0, 0, SG_TRANSPORT_NCCL };
  SgRatesMemo *m = e->memo;
  if (2 * (m->used + 1) > m->cap)
    memo_grow (m);
  uint32_t slot;
  int32_t at = memo_find (m, &k, &slot);
  if (at < 0) {
    at = m->used++;
    m->keys[at] = k;
    m->slot_of[slot] = at;
    SgPairRates *pr = &m->rates[(size_t)at * (size_t)m->n_slots];
    pair_rates (e, &k, pr);
    m->wnext[at] = 0;
    for (int32_t s = 0; s < m->n_slots; s++)
      m->wnext[at] |= pr[s].wait_before > 0.0;
  }
  if (out)
    *out = &m->rates[(size_t)at * (size_t)m->n_slots];
  return at;
}

void
sg_eng_pair_rates (const SgSimEngine *e, SgNodeId c, SgPairRates *out)
{
  const SgPairRates *r;
  sg_eng_rates_entry (e, c, &r);
  memcpy (out, r, sizeof *out * (size_t)e->n_slots);
}

const SgPairRates *
sg_eng_entry_rates (const SgSimEngine *e, int32_t at)
{
  g_return_val_if_fail (at >= 0 && at < e->memo->used, NULL);
  return &e->memo->rates[(size_t)at * (size_t)e->memo->n_slots];
}

const SgPairRates *
sg_eng_row_rates (const SgSimEngine *e, int32_t r)
{
  g_return_val_if_fail (r >= 0 && r < e->n_rows, NULL);
  return row_rates (e, r);
}

int32_t
sg_eng_adopt_entry (SgSimEngine *dst, const SgSimEngine *src, int32_t at)
{
  const SgRatesMemo *sm = src->memo;
  SgRatesMemo *m = dst->memo;
  g_return_val_if_fail (at >= 0 && at < sm->used && m->n_slots == sm->n_slots, -1);
  const SgRatesKey *k = &sm->keys[at];
  if (at < m->used && sg_rates_key_equal (&m->keys[at], k))
    return at; /* numbered alike (as the list scheduler's and most engines' are) */
  if (2 * (m->used + 1) > m->cap)
    memo_grow (m);
  uint32_t slot;
  int32_t to = memo_find (m, k, &slot);
  if (to < 0) {
    to = m->used++;
    m->keys[to] = *k;
    m->slot_of[slot] = to;
    memcpy (&m->rates[(size_t)to * (size_t)m->n_slots], &sm->rates[(size_t)at * (size_t)m->n_slots],
            sizeof (SgPairRates) * (size_t)m->n_slots);
    m->wnext[to] = sm->wnext[at];
  }
  return to;
}

int32_t
sg_eng_issue (SgSimEngine *e, SgNodeId c)
{
  return sg_eng_issue_entry (e, c, sg_eng_rates_entry (e, c, NULL));
}

int32_t
sg_eng_issue_entry (SgSimEngine *e, SgNodeId c, int32_t at)
{
  const SgNode *n = &e->g->nodes[c];
  g_return_val_if_fail (e->n_rows < e->cap_rows && n->group >= 0 && n->group < e->n_groups
                            && at >= 0 && at < e->memo->used,
                        -1);
  int32_t r = e->n_rows++;
  SgCollRow *row = &e->rows[r];
  memset (row, 0, sizeof *row);
  row->node = c;
  row->wait = SG_NO_NODE;
  row->est_us = sg_sched_cost (n);
  row->issue_us = e->now;
  row->hidden_by = row->last_hiding = SG_NO_NODE;
  row->status = SG_EXPOSURE_HIDDEN;
  e->rem[r] = row->est_us;
  e->fin[r] = 0;
  e->rent[r] = at;
  e->rnext[r] = -1;
  e->row_of[c] = r;
  int32_t grp = n->group;
  if (e->gtail[grp] < 0) {
    e->ghead[grp] = e->gtail[grp] = r;
    e->n_active++;
    head_ready (e, grp);
  } else {
    e->rnext[e->gtail[grp]] = r;
    e->gtail[grp] = r;
  }
  settle (e);
  return r;
}

/* The kernel slot of compute node @x of solo @work (0 at 0 us). */
static inline int32_t
kernel_slot (const SgSimEngine *e, SgNodeId x, double work)
{
  return work > 0.0 ? sg_cost_contention_slot (e->pairs, e->g, x, work) : 0;
}

void
sg_eng_compute (SgSimEngine *e, SgNodeId x, double work)
{
  sg_eng_compute_in (e, x, work, kernel_slot (e, x, work));
}

/* Runs kernel @x of solo @work > 0 (slot kslot; sg_eng_compute_in, inline
 * in schedule-private.h, calls it only for a kernel: the calls of no work
 * pay for no call). */
void
sg_eng_run_kernel (SgSimEngine *e, SgNodeId x, double work)
{
  double t0 = e->now;
  if (e->node_start)
    e->node_start[x] = t0;
  if (e->n_held > 0) {
    /* heads held for the next kernel: this one */
    for (int32_t grp = 0; grp < e->n_groups; grp++) {
      if (e->hold[grp] != SG_HOLD_NEXT)
        continue;
      const double wb = pair (e, e->ghead[grp])->wait_before;
      if (wb > 0.0) {
        e->hold[grp] = SG_HOLD_KERNEL;
        e->hold_at[grp] = work * (1.0 - wb);
        e->n_kheld++;
      } else {
        release (e, grp);
      }
    }
  }
  e->in_kernel = true;
  e->kleft = work;
  /* settled before the first event; kernel_step settles when it returns
   * false */
  settle (e);
  while (e->kleft > 0.0) {
    if (e->n_active - e->n_held == 0 && e->n_kheld == 0) {
      advance (e, e->kleft);
      break;
    }
    if (kernel_step (e, x))
      break;
    if (e->kleft <= REM_EPS * work)
      break;
  }
  e->in_kernel = false;
  e->kleft = 0.0;
  /* the kernel ended: what it held starts now */
  if (e->n_kheld > 0) {
    release_all (e, SG_HOLD_KERNEL);
    settle (e);
  }
  e->busy_us += e->now - t0;
  if (e->node_end)
    e->node_end[x] = e->now;
}

bool
sg_eng_would_hold (const SgSimEngine *e, double work, int32_t slot)
{
  if (!(work > 0.0) || e->n_held <= e->n_kheld)
    return false;
  for (int32_t grp = 0; grp < e->n_groups; grp++)
    if (e->hold[grp] == SG_HOLD_NEXT
        && row_rates (e, e->ghead[grp])[slot].wait_before > 0.0)
      return true;
  return false;
}

double
sg_eng_wait (SgSimEngine *e, SgNodeId w, SgNodeId c)
{
  int32_t r = e->row_of[c];
  g_return_val_if_fail (r >= 0, 0.0);
  double t0 = e->now;
  if (e->node_start)
    e->node_start[w] = t0;
  if (e->tlog)
    sg_tlog_add (e->tlog, 0.0, SG_TLOG_WAIT, -1);
  /* a collective left with rounding-level work (it ended with the last
   * kernel) is finished now, not after the next event */
  settle (e);
  while (!e->fin[r])
    idle_step (e);
  double stall = e->now - t0;
  e->rows[r].exposed_us += stall;
  if (e->tlog)
    sg_tlog_add (e->tlog, 0.0, r, c);
  if (e->rows[r].wait == SG_NO_NODE)
    e->rows[r].wait = w;
  if (e->node_end)
    e->node_end[w] = e->now;
  return stall;
}

void
sg_eng_place (SgSimEngine *e, SgNodeId x)
{
  const SgNode *n = &e->g->nodes[x];
  SgRole role = sg_sched_role (n);
  double cost = sg_sched_cost (n);
  int32_t kslot = role == SG_ROLE_COMPUTE ? kernel_slot (e, x, cost) : 0;
  sg_eng_place_as (e, x, role, cost, sg_eng_place_arg (e, x, role, kslot));
}

void
sg_eng_drain (SgSimEngine *e)
{
  if (e->n_active == 0)
    return;
  settle (e);
  do
    idle_step (e);
  while (e->n_active > 0);
}

/* --- liveness ------------------------------------------------------------- */

int32_t *
sg_sched_positions (const SgGraph *g, const SgNodeId *order)
{
  int32_t *pos = g_new (int32_t, (size_t)MAX (g->n_nodes, 1));
  for (int32_t p = 0; p < g->n_nodes; p++)
    pos[order ? order[p] : p] = p;
  return pos;
}

/* --- sg_simulate ------------------------------------------------------------ */

static void
classify (SgCollRow *rows, int32_t n_rows, SgSimResult *out)
{
  out->hidden = out->partial = out->exposed = 0;
  out->exposed_us = 0.0;
  for (int32_t r = 0; r < n_rows; r++) {
    SgCollRow *row = &rows[r];
    double thr = MAX (0.005 * row->est_us, 0.01);
    if (row->exposed_us < thr)
      row->status = SG_EXPOSURE_HIDDEN;
    else if (row->overlap_us <= 0.0)
      row->status = SG_EXPOSURE_EXPOSED;
    else
      row->status = SG_EXPOSURE_PARTIAL;
    out->hidden += row->status == SG_EXPOSURE_HIDDEN;
    out->partial += row->status == SG_EXPOSURE_PARTIAL;
    out->exposed += row->status == SG_EXPOSURE_EXPOSED;
    out->exposed_us += row->exposed_us;
  }
}

void
sg_sim_result_clear (SgSimResult *r)
{
  if (!r)
    return;
  g_free (r->rows);
  g_free (r->node_start);
  g_free (r->node_end);
  memset (r, 0, sizeof *r);
}

bool
sg_sim_check_costs (const SgGraph *g, GError **error)
{
  for (SgNodeId i = 0; i < g->n_nodes; i++) {
    double c = g->nodes[i].est_us;
    if (!sg_sim_cost_ok (c)) {
      g_set_error (error, SG_SCHEDULE_ERROR, SG_SCHEDULE_ERROR_COST,
                   "node '%s': est_us is %g, not a finite cost >= 0 (run the estimate pass)",
                   g->nodes[i].name, c);
      return false;
    }
  }
  return true;
}

void
sg_eng_finish (SgSimEngine *e, SgSimResult *out)
{
  double compute_end = e->now;
  sg_eng_drain (e);
  out->step_us = MAX (compute_end, e->now);
  out->compute_busy_us = e->busy_us;
  classify (e->rows, e->n_rows, out);
}

void
sg_eng_take (SgSimEngine *e, SgSimResult *out)
{
  out->n_rows = e->n_rows;
  out->rows = g_steal_pointer (&e->rows);
  out->node_start = g_steal_pointer (&e->node_start);
  out->node_end = g_steal_pointer (&e->node_end);
  out->n_nodes = e->g->n_nodes;
}

/* The simulation of @order; @full: rows, node times and the lower bound
 * too, else the totals only. */
static bool
simulate (const SgGraph *g, const SgNodeId *order, const SgContention *cont, bool full,
          SgSimResult *out, GError **error)
{
  g_return_val_if_fail (g != NULL && out != NULL, false);
  memset (out, 0, sizeof *out);
  if (order && !sg_order_check (g, order, error))
    return false;
  if (!sg_sim_check_costs (g, error))
    return false;
  SgSimEngine e;
  sg_eng_init (&e, g, cont, full);
  double compute_us = 0.0, comm_us = 0.0;
  for (int32_t p = 0; p < g->n_nodes; p++) {
    SgNodeId x = order ? order[p] : p;
    const SgNode *n = &g->nodes[x];
    SgRole role = sg_sched_role (n);
    comm_us += role == SG_ROLE_COLL ? sg_sched_cost (n) : 0.0;
    compute_us += role == SG_ROLE_COMPUTE ? sg_sched_cost (n) : 0.0;
    sg_eng_place (&e, x);
  }
  sg_eng_finish (&e, out);
  out->compute_us = compute_us;
  out->comm_us = comm_us;
  g_autofree int32_t *pos = sg_sched_positions (g, order);
  out->peak_bytes = sg_graph_liveness (g, pos, NULL, NULL, NULL);
  if (full) {
    sg_bound_basic (g, &e, &out->bound);
    out->critical_path_us = out->bound.critical_path_us;
    out->lower_bound_us = out->bound.lower_bound_us;
    sg_eng_take (&e, out);
  }
  sg_eng_clear (&e);
  return true;
}

bool
sg_simulate_with (const SgGraph *g, const SgNodeId *order, const SgContention *cont,
                  SgSimResult *out, GError **error)
{
  return simulate (g, order, cont, true, out, error);
}

bool
sg_simulate_totals (const SgGraph *g, SgSimResult *out, GError **error)
{
  return simulate (g, NULL, NULL, false, out, error);
}

bool
sg_simulate (const SgGraph *g, const SgNodeId *order, SgSimResult *out, GError **error)
{
  return sg_simulate_with (g, order, NULL, out, error);
}
