/* judge-run.c: the judge's run of a graph's events (judge.c): from the
 * previous run's last checkpoint before the first difference, until its
 * state equals the previous run's at a checkpoint past the differences,
 * from where the previous run's clock log is replayed (judge.c's contract
 * says why that is exact).
 *
 * A checkpoint (every SNAP_EVERY nodes) is the engine between two nodes,
 * when no kernel runs: its clock and counts, and per group its hold and
 * its queue's head and length. The run places each node from its event
 * (sg_eng_place_as, with the rates entry or kernel slot it holds), the
 * same engine operations as sg_eng_place.
 * Requires: the graph's events and the previous graph's record
 * (judge-events.c). Invalidates: nothing.
 */
#include <string.h>

#include "schedule-private.h"

#define SNAP_EVERY 64

/* The engine between two nodes (no kernel runs then). */
struct SgJudgeSnap {
  int32_t pos;     /* nodes placed */
  int32_t n_rows;  /* collectives issued */
  size_t log_at;   /* clock log entries before it */
  double now, busy_us;
  int32_t n_active, n_held, n_kheld;
  size_t g_first;  /* its per-group state (n_groups entries) */
};

/* A group's queue at a checkpoint: its head (the only collective of the
 * group that may have started) and how many are queued; the others are
 * the group's later rows in issue order, none started (their work left
 * is their cost). */
struct SgJudgeGState {
  uint8_t hold;
  int32_t qlen, head_row, head_node;
  double hold_at, head_rem;
};

/* --- the engine, sized for @g ------------------------------------------------ */

/* Points the engine at @g, growing its arrays for @n_coll rows and @g's
 * nodes; a new cost model or group count starts over. */
void
sg_judge_engine_for (SgSimJudge *j, const SgGraph *g, int32_t n_coll)
{
  SgSimEngine *e = &j->e;
  const SgCostModel *cm = sg_graph_cost_model (g);
  if (j->have_engine && (cm != j->cm || g->n_groups != j->n_groups)) {
    sg_eng_clear (e);
    j->have_engine = false;
    j->rec[0].valid = j->rec[1].valid = false;
    j->kept_of = NULL; /* the rates entries were the old engine's */
  }
  if (!j->have_engine) {
    sg_eng_init (e, g, NULL, false);
    j->have_engine = true;
    j->cm = cm;
    j->n_groups = g->n_groups;
  }
  e->g = g;
  int32_t cap = MAX (n_coll, 1);
  if (cap > e->cap_rows) {
    size_t old = (size_t)e->cap_rows;
    e->cap_rows = MAX (cap, 2 * e->cap_rows);
    size_t c = (size_t)e->cap_rows;
    e->rows = g_renew (SgCollRow, e->rows, c);
    e->rnext = g_renew (int32_t, e->rnext, c);
    e->rem = g_renew (double, e->rem, c);
    e->rates = g_renew (SgPairRates, e->rates, c * (size_t)e->n_slots);
    e->wnext = g_renew (uint8_t, e->wnext, c);
    e->fin = g_renew (uint8_t, e->fin, c);
    memset (e->rows + old, 0, sizeof (SgCollRow) * (c - old));
    memset (e->fin + old, 0, c - old);
  }
  if (g->n_nodes > j->cap_pos) {
    int32_t was = j->cap_pos;
    j->cap_pos = MAX (g->n_nodes, 2 * j->cap_pos);
    e->row_of = g_renew (int32_t, e->row_of, (size_t)j->cap_pos);
    for (int32_t i = was; i < j->cap_pos; i++)
      e->row_of[i] = -1;
    j->pos = g_renew (int32_t, j->pos, (size_t)j->cap_pos);
    for (int32_t i = was; i < j->cap_pos; i++)
      j->pos[i] = i;
  }
}

/* A fresh start: no collective issued, the clock at 0. */
static void
engine_start (SgSimEngine *e)
{
  e->now = e->busy_us = 0.0;
  e->n_active = e->n_held = e->n_kheld = 0;
  e->n_rows = 0;
  e->in_kernel = false;
  e->kleft = 0.0;
  e->kslot = 0;
  for (int32_t grp = 0; grp < MAX (e->n_groups, 1); grp++) {
    e->ghead[grp] = e->gtail[grp] = -1;
    e->hold[grp] = SG_HOLD_NONE;
    e->hold_at[grp] = 0.0;
  }
}

/* Event @t (at @it of the new graph) and @r (at @ir of the previous one)
 * in their common suffix: equal, a wait's collective at the same distance
 * behind (or the same node of the common prefix, below @p). */
static inline bool
ev_same_shifted (const SgJudgeEv *t, int32_t it, const SgJudgeEv *r, int32_t ir, int32_t p)
{
  if (t->role != r->role || memcmp (&t->cost, &r->cost, sizeof (double)) != 0
      || t->group != r->group)
    return false;
  if (t->role == SG_ROLE_WAIT && t->aux >= p && r->aux >= p) /* p >= 0 */
    return t->aux - it == r->aux - ir;
  return t->aux == r->aux;
}

/* Places node @x, event @v, as sg_eng_place does, with the slot or rates
 * entry the event already holds. */
static inline void
place_ev (SgSimEngine *e, SgNodeId x, const SgJudgeEv *v)
{
  /* a 0 us compute node's aux is -1 */
  sg_eng_place_as (e, x, (SgRole)v->role, v->cost,
                   v->role != SG_ROLE_COMPUTE || v->cost > 0.0 ? v->aux : 0);
}

/* --- checkpoints --------------------------------------------------------------- */

static void
snap_save (SgJudgeRec *r, const SgSimEngine *e, int32_t pos)
{
  SG_JUDGE_GROW (r->snaps, r->cap_snaps, r->n_snaps + 1, SgJudgeSnap);
  int32_t ng = MAX (e->n_groups, 1);
  SgJudgeSnap *s = &r->snaps[r->n_snaps++];
  *s = (SgJudgeSnap){ pos,         e->n_rows, r->log.n,   e->now, e->busy_us,
                      e->n_active, e->n_held, e->n_kheld, r->n_gs };
  SG_JUDGE_GROW (r->gs, r->cap_gs, r->n_gs + (size_t)ng, SgJudgeGState);
  for (int32_t grp = 0; grp < ng; grp++) {
    SgJudgeGState *gs = &r->gs[r->n_gs++];
    int32_t h = e->ghead[grp];
    *gs = (SgJudgeGState){ e->hold[grp], 0, h, h >= 0 ? e->rows[h].node : -1, e->hold_at[grp],
                           h >= 0 ? e->rem[h] : 0.0 };
    for (int32_t w = h; w >= 0; w = e->rnext[w])
      gs->qlen++;
  }
}

/* Row @w over the rows queued in group @grp at checkpoint @gs of record
 * @r (whose rows are complete), @k its place in the queue: the head, then
 * the group's later rows in issue order. */
#define FOR_QUEUED(r, gs, grp, w, k)                                                              \
  for (int32_t w = (gs)->head_row, k = 0; k < (gs)->qlen; k++, w = next_in_group (r, grp, w))

static inline int32_t
next_in_group (const SgJudgeRec *r, int32_t grp, int32_t w)
{
  for (w++; w < r->n_rows && r->ev[r->row_node[w]].group != grp; w++)
    ;
  return w;
}

/* Puts the engine in state @s of record @r. Rows issued before it and not
 * queued in it are finished (the engine's arrays hold the run @r was made
 * by, which drained every collective). The queued rows go to @act. */
static int32_t
snap_restore (SgSimEngine *e, const SgJudgeRec *r, const SgJudgeSnap *s, int32_t **act,
              int32_t *cap_act)
{
  e->now = s->now;
  e->busy_us = s->busy_us;
  e->n_active = s->n_active, e->n_held = s->n_held, e->n_kheld = s->n_kheld;
  e->n_rows = s->n_rows;
  e->in_kernel = false;
  e->kleft = 0.0;
  int32_t n_act = 0;
  for (int32_t grp = 0; grp < MAX (e->n_groups, 1); grp++) {
    const SgJudgeGState *gs = &r->gs[s->g_first + (size_t)grp];
    e->hold[grp] = gs->hold;
    e->hold_at[grp] = gs->hold_at;
    e->ghead[grp] = e->gtail[grp] = -1;
    FOR_QUEUED (r, gs, grp, w, k) {
      int32_t node = r->row_node[w];
      SgCollRow *row = &e->rows[w];
      memset (row, 0, sizeof *row);
      row->node = node;
      row->wait = row->hidden_by = row->last_hiding = SG_NO_NODE;
      row->est_us = r->ev[node].cost;
      e->rem[w] = k == 0 ? gs->head_rem : row->est_us;
      e->fin[w] = 0;
      e->row_of[node] = w;
      const SgPairRates *pr = sg_eng_entry_rates (e, r->ev[node].aux);
      memcpy (&e->rates[(size_t)w * (size_t)e->n_slots], pr, sizeof *pr * (size_t)e->n_slots);
      e->wnext[w] = 0;
      for (int32_t sl = 0; sl < e->n_slots; sl++)
        e->wnext[w] |= pr[sl].wait_before > 0.0;
      e->rnext[w] = -1;
      if (e->gtail[grp] >= 0)
        e->rnext[e->gtail[grp]] = w;
      else
        e->ghead[grp] = w;
      e->gtail[grp] = w;
      if (n_act == *cap_act) {
        *cap_act = MAX (16, 2 * *cap_act);
        *act = g_renew (int32_t, *act, (size_t)*cap_act);
      }
      (*act)[n_act++] = w;
    }
  }
  return n_act;
}

/* The node of the new graph that is @x of the previous one: the same id in
 * the common prefix (below @p), shifted by @d from @s_prev on; -1 in the
 * part that changed. */
static inline int32_t
map_node (int32_t x, int32_t p, int32_t s_prev, int32_t d)
{
  return x < p ? x : x >= s_prev ? x + d : -1;
}

/* Does the engine's state equal @s of the previous record @R (its nodes
 * mapped), durations bit for bit? */
static bool
state_equals (const SgSimEngine *e, const SgJudgeRec *R, const SgJudgeSnap *s, int32_t p,
              int32_t s_prev, int32_t d)
{
  if (e->n_active != s->n_active || e->n_held != s->n_held || e->n_kheld != s->n_kheld)
    return false;
  for (int32_t grp = 0; grp < MAX (e->n_groups, 1); grp++) {
    const SgJudgeGState *gs = &R->gs[s->g_first + (size_t)grp];
    if (e->hold[grp] != gs->hold
        || (gs->hold != SG_HOLD_NONE && memcmp (&e->hold_at[grp], &gs->hold_at, sizeof (double))))
      return false;
    int32_t w = e->ghead[grp];
    if (gs->qlen > 0 && (w < 0 || memcmp (&e->rem[w], &gs->head_rem, sizeof (double)) != 0))
      return false;
    FOR_QUEUED (R, gs, grp, rw, k) {
      if (w < 0 || e->rows[w].node != map_node (R->row_node[rw], p, s_prev, d))
        return false;
      w = e->rnext[w];
    }
    if (w >= 0)
      return false;
  }
  return true;
}

/* --- the run ------------------------------------------------------------------ */

static void
rows_reserve (SgJudgeRec *T, int32_t n)
{
  if (n <= T->cap_rows)
    return;
  T->cap_rows = MAX (n, 2 * T->cap_rows);
  T->row_exp = g_renew (double, T->row_exp, (size_t)T->cap_rows);
  T->row_node = g_renew (int32_t, T->row_node, (size_t)T->cap_rows);
}

/* Copies @R's checkpoints up to @k (inclusive), its log before the last
 * of them and its rows issued before it into @T. */
static void
copy_prefix (SgJudgeRec *T, const SgJudgeRec *R, int32_t k, int32_t n_groups)
{
  const SgJudgeSnap *s = &R->snaps[k];
  SG_JUDGE_GROW (T->snaps, T->cap_snaps, k + 1, SgJudgeSnap);
  memcpy (T->snaps, R->snaps, sizeof (SgJudgeSnap) * (size_t)(k + 1));
  T->n_snaps = k + 1;
  size_t g_end = s->g_first + (size_t)n_groups;
  SG_JUDGE_GROW (T->gs, T->cap_gs, g_end, SgJudgeGState);
  memcpy (T->gs, R->gs, sizeof (SgJudgeGState) * g_end);
  T->n_gs = g_end;
  SG_JUDGE_GROW (T->log.v, T->log.cap, MAX (s->log_at, 1), SgTlogEntry);
  memcpy (T->log.v, R->log.v, sizeof (SgTlogEntry) * s->log_at);
  T->log.n = s->log_at;
  rows_reserve (T, MAX (s->n_rows, 1));
  memcpy (T->row_exp, R->row_exp, sizeof (double) * (size_t)s->n_rows);
  memcpy (T->row_node, R->row_node, sizeof (int32_t) * (size_t)s->n_rows);
}


/* Replays @R's clock log from checkpoint @s on (@T's run converged with
 * @R's there), from the engine's clock: the stalls land on @T's rows;
 * @R's later checkpoints and log are carried over to @T, mapped. Returns
 * the compute stream's end; *@end gets the clock's. */
static double
replay (SgSimJudge *j, SgJudgeRec *T, const SgJudgeRec *R, int32_t si, int32_t p,
        int32_t s_prev, int32_t d, double *end)
{
  SgSimEngine *e = &j->e;
  const SgJudgeSnap *s = &R->snaps[si];
  const int32_t conv = s->pos + d;       /* the new graph's position */
  const int32_t row_delta = e->n_rows - s->n_rows;
  const int32_t n_rows = R->n_rows + row_delta;
  rows_reserve (T, n_rows);
  /* rows issued from here on: the previous run's, renumbered */
  for (int32_t r = s->n_rows; r < R->n_rows; r++) {
    T->row_exp[r + row_delta] = 0.0;
    T->row_node[r + row_delta] = R->row_node[r] + d;
  }
  /* rows queued here have had no wait yet: their exposure starts at 0 */
  double now = e->now, t0 = now, compute_end = now;
  int32_t next_snap = si + 1;
  for (size_t i = s->log_at; i < R->log.n;) {
    while (next_snap < R->n_snaps && R->snaps[next_snap].log_at == i) {
      /* the previous run's checkpoint, as the new graph's */
      const SgJudgeSnap *rs = &R->snaps[next_snap++];
      SG_JUDGE_GROW (T->snaps, T->cap_snaps, T->n_snaps + 1, SgJudgeSnap);
      SgJudgeSnap *ts = &T->snaps[T->n_snaps++];
      *ts = (SgJudgeSnap){ rs->pos + d, rs->n_rows + row_delta, T->log.n, now, NAN, rs->n_active,
                           rs->n_held,  rs->n_kheld,           T->n_gs };
      for (int32_t grp = 0; grp < MAX (e->n_groups, 1); grp++) {
        SgJudgeGState g = R->gs[rs->g_first + (size_t)grp];
        if (g.qlen > 0) {
          int32_t x = map_node (g.head_node, p, s_prev, d);
          g.head_node = x;
          g.head_row = x < conv ? e->row_of[x] : g.head_row + row_delta;
        }
        SG_JUDGE_GROW (T->gs, T->cap_gs, T->n_gs + 1, SgJudgeGState);
        T->gs[T->n_gs++] = g;
      }
    }
    /* the entries up to the next checkpoint (checkpoints are in log order) */
    const size_t stop = next_snap < R->n_snaps ? MIN (R->log.n, R->snaps[next_snap].log_at)
                                               : R->log.n;
    for (; i < stop; i++) {
      const SgTlogEntry *l = &R->log.v[i];
      switch (l->tag) {
      case SG_TLOG_ADD:
        now += l->x;
        sg_tlog_add (&T->log, l->x, SG_TLOG_ADD, -1);
        break;
      case SG_TLOG_WAIT:
        t0 = now;
        sg_tlog_add (&T->log, 0.0, SG_TLOG_WAIT, -1);
        break;
      case SG_TLOG_COMPUTE_END:
        compute_end = now;
        sg_tlog_add (&T->log, 0.0, SG_TLOG_COMPUTE_END, -1);
        break;
      default: {
        int32_t c = l->node < p ? l->node : l->node + d;
        int32_t row = c < conv ? e->row_of[c] : l->tag + row_delta;
        T->row_exp[row] += now - t0;
        sg_tlog_add (&T->log, 0.0, row, c);
        break;
      }
      }
    }
  }
  /* the engine as the full run would leave it: every collective issued,
   * finished and found by its node */
  for (int32_t r = e->n_rows; r < n_rows; r++)
    e->row_of[T->row_node[r]] = r;
  for (int32_t r = 0; r < n_rows; r++)
    e->fin[r] = 1;
  e->n_rows = n_rows;
  T->n_rows = n_rows;
  *end = now;
  return compute_end;
}

/* sg_sim_judge_totals' step and exposed time: the run of @g's events
 * (its events: @n_coll collectives, *@p common with the previous
 * graph's). */
void
sg_judge_run (SgSimJudge *j, const SgGraph *g, int32_t n_coll, int32_t p, SgSimTotals *out)
{
  SgJudgeRec *T = &j->rec[j->cur], *R = &j->rec[j->cur ^ 1];
  sg_judge_engine_for (j, g, n_coll);
  SgSimEngine *e = &j->e;
  const int32_t n = g->n_nodes, ng = MAX (g->n_groups, 1);
  j->stats.runs++;

  /* the common prefix and suffix with the previous graph */
  int32_t s_new = n, s_prev = R->valid ? R->n : 0;
  if (R->valid) {
    while (s_new > p && s_prev > p
           && ev_same_shifted (&T->ev[s_new - 1], s_new - 1, &R->ev[s_prev - 1], s_prev - 1, p))
      s_new--, s_prev--;
  }
  const int32_t d = R->valid ? n - R->n : 0;

  /* from the previous run's last checkpoint at or before p */
  int32_t k = -1, start = 0, n_act = 0;
  if (R->valid)
    for (int32_t i = 0; i < R->n_snaps && R->snaps[i].pos <= p; i++)
      k = i;
  if (k >= 0) {
    copy_prefix (T, R, k, ng);
    n_act = snap_restore (e, R, &R->snaps[k], &j->act, &j->cap_act);
    start = R->snaps[k].pos;
  } else {
    T->n_snaps = 0, T->n_gs = 0, T->log.n = 0;
    engine_start (e);
  }
  const int32_t rows_restored = e->n_rows;
  e->tlog = &T->log;

  /* the run from there; past the differences, the previous run's
   * checkpoints are where it may rejoin that run */
  int32_t next = 0;
  while (R->valid && next < R->n_snaps && R->snaps[next].pos + d < MAX (s_new, start))
    next++;
  double compute_end = 0.0, end = 0.0;
  int32_t joined_at = -1;
  for (int32_t x = start;;) {
    if ((x - start) % SNAP_EVERY == 0 && (x > start || k < 0))
      snap_save (T, e, x);
    if (R->valid && next < R->n_snaps && R->snaps[next].pos + d == x) {
      if (state_equals (e, R, &R->snaps[next], p, s_prev, d)) {
        joined_at = x;
        j->stats.joins++;
        break;
      }
      j->stats.differed++;
      next++;
    }
    if (x == n)
      break;
    /* on to the next checkpoint to save or to compare (both past x) */
    int32_t stop = MIN (n, start + ((x - start) / SNAP_EVERY + 1) * SNAP_EVERY);
    if (R->valid && next < R->n_snaps)
      stop = MIN (stop, R->snaps[next].pos + d);
    for (; x < stop; x++)
      place_ev (e, x, &T->ev[x]);
  }
  /* the rows this run issued or found queued are its own; the others, the
   * previous run's, finished before the checkpoint */
  rows_reserve (T, MAX (e->n_rows, 1));
  for (int32_t r = rows_restored; r < e->n_rows; r++) {
    T->row_exp[r] = e->rows[r].exposed_us;
    T->row_node[r] = e->rows[r].node;
  }
  for (int32_t i = 0; i < n_act; i++)
    T->row_exp[j->act[i]] = e->rows[j->act[i]].exposed_us;
  if (joined_at >= 0) {
    compute_end = replay (j, T, R, next, p, s_prev, d, &end);
    j->stats.nodes_skipped += start + (n - joined_at);
  } else {
    compute_end = e->now;
    sg_tlog_add (&T->log, 0.0, SG_TLOG_COMPUTE_END, -1);
    sg_eng_drain (e);
    end = e->now;
    T->n_rows = e->n_rows;
    j->stats.nodes_skipped += start;
  }
  e->tlog = NULL;
  T->valid = true;
  j->cur ^= 1;

  double exposed = 0.0;
  for (int32_t r = 0; r < T->n_rows; r++)
    exposed += T->row_exp[r];
  out->step_us = MAX (compute_end, end);
  out->exposed_us = exposed;
  j->stats.nodes += n;
}

