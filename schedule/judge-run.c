/* judge-run.c: the judge's run of a graph's events (judge.c): from the
 * previous run's last checkpoint before the first difference; wherever
 * its state equals the previous run's at one of that run's checkpoints in
 * a segment of the same events (judge-align.c), the previous run's clock
 * log is replayed over the segment, to the end of both graphs or to the
 * segment's last checkpoint, whose state the engine then takes (with the
 * rows the previous run issued meanwhile, renumbered) to run on from
 * there (judge.c's contract says why that is exact).
 *
 * A checkpoint (every SNAP_EVERY nodes) is the engine between two nodes,
 * when no kernel runs: its clock and counts, and per group its hold and
 * its queue's head and length. The run places each node from its event
 * (sg_eng_place_as, with the rates entry or kernel slot it holds), the
 * same engine operations as sg_eng_place.
 * Requires: the graph's events and the previous graph's record
 * (judge-events.c), their segments (judge-align.c). Invalidates: nothing.
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
    e->rent = g_renew (int32_t, e->rent, c);
    e->fin = g_renew (uint8_t, e->fin, c);
    memset (e->rows + old, 0, sizeof (SgCollRow) * (c - old));
    memset (e->fin + old, 0, c - old);
  }
  if (g->n_nodes > j->cap_nodes) {
    int32_t was = j->cap_nodes;
    j->cap_nodes = MAX (g->n_nodes, 2 * j->cap_nodes);
    e->row_of = g_renew (int32_t, e->row_of, (size_t)j->cap_nodes);
    for (int32_t i = was; i < j->cap_nodes; i++)
      e->row_of[i] = -1;
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

/* Row @w of the engine for collective @node, event @v, issued and no
 * more (its times, exposure and wait to come). */
static void
row_init (SgSimEngine *e, int32_t w, SgNodeId node, const SgJudgeEv *v)
{
  SgCollRow *row = &e->rows[w];
  memset (row, 0, sizeof *row);
  row->node = node;
  row->wait = row->hidden_by = row->last_hiding = SG_NO_NODE;
  row->est_us = v->cost;
  e->row_of[node] = w;
}

/* Queues row @w last in group @grp, unfinished, with @rem of its work
 * left and the rates of entry @aux. */
static void
queue_row (SgSimEngine *e, int32_t grp, int32_t w, double rem, int32_t aux)
{
  e->rem[w] = rem;
  e->fin[w] = 0;
  e->rent[w] = aux;
  e->rnext[w] = -1;
  if (e->gtail[grp] >= 0)
    e->rnext[e->gtail[grp]] = w;
  else
    e->ghead[grp] = w;
  e->gtail[grp] = w;
}

/* The engine's scalars at checkpoint @s, its clock at @now; no kernel
 * runs there. */
static void
scalars_restore (SgSimEngine *e, const SgJudgeSnap *s, double now, double busy_us)
{
  e->now = now;
  e->busy_us = busy_us;
  e->n_active = s->n_active, e->n_held = s->n_held, e->n_kheld = s->n_kheld;
  e->in_kernel = false;
  e->kleft = 0.0;
}

/* Puts the engine in state @s of record @r. Rows issued before it and not
 * queued in it are finished (the engine's arrays hold the run @r was made
 * by, which drained every collective). The queued rows go to @act. */
static int32_t
snap_restore (SgSimEngine *e, const SgJudgeRec *r, const SgJudgeSnap *s, int32_t **act,
              int32_t *cap_act)
{
  scalars_restore (e, s, s->now, s->busy_us);
  e->n_rows = s->n_rows;
  int32_t n_act = 0;
  for (int32_t grp = 0; grp < MAX (e->n_groups, 1); grp++) {
    const SgJudgeGState *gs = &r->gs[s->g_first + (size_t)grp];
    e->hold[grp] = gs->hold;
    e->hold_at[grp] = gs->hold_at;
    e->ghead[grp] = e->gtail[grp] = -1;
    FOR_QUEUED (r, gs, grp, w, k) {
      const int32_t node = r->row_node[w];
      row_init (e, w, node, &r->ev[node]);
      queue_row (e, grp, w, k == 0 ? gs->head_rem : r->ev[node].cost, r->ev[node].aux);
      if (n_act == *cap_act) {
        *cap_act = MAX (16, 2 * *cap_act);
        *act = g_renew (int32_t, *act, (size_t)*cap_act);
      }
      (*act)[n_act++] = w;
    }
  }
  return n_act;
}

/* Does the engine's state equal @s of the previous record @R (its nodes
 * mapped through @j's segments), durations bit for bit? */
static bool
state_equals (const SgSimJudge *j, const SgJudgeRec *R, const SgJudgeSnap *s)
{
  const SgSimEngine *e = &j->e;
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
      if (w < 0 || e->rows[w].node != sg_judge_map (j, R->row_node[rw]))
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

/* A replay of the previous run @R from its checkpoint ci, where the
 * engine's state equals it, over a segment of nodes @delta further on in
 * the new graph: @R's rows from row0 on are the engine's @row_delta
 * further on. */
typedef struct {
  const SgJudgeRec *R;
  int32_t ci, delta, row0, row_delta;
} Replay;

/* The new graph's node that @R's node @y is: past checkpoint ci, in the
 * replayed segment, else through the segments. */
static inline int32_t
replay_node (const SgSimJudge *j, const Replay *P, int32_t y)
{
  int32_t x = y >= P->R->snaps[P->ci].pos ? y + P->delta : sg_judge_map (j, y);
  g_assert (x >= 0);
  return x;
}

/* @R's checkpoint @c, as the new graph's, into @T at clock @now. */
static void
carry_snap (const SgSimJudge *j, SgJudgeRec *T, const Replay *P, int32_t c, double now)
{
  const SgJudgeRec *R = P->R;
  const SgJudgeSnap *rs = &R->snaps[c];
  const int32_t ng = MAX (j->e.n_groups, 1);
  SG_JUDGE_GROW (T->snaps, T->cap_snaps, T->n_snaps + 1, SgJudgeSnap);
  T->snaps[T->n_snaps++] = (SgJudgeSnap){ rs->pos + P->delta, rs->n_rows + P->row_delta,
                                          T->log.n,           now,
                                          NAN,                rs->n_active,
                                          rs->n_held,         rs->n_kheld,
                                          T->n_gs };
  SG_JUDGE_GROW (T->gs, T->cap_gs, T->n_gs + (size_t)ng, SgJudgeGState);
  for (int32_t grp = 0; grp < ng; grp++) {
    SgJudgeGState g = R->gs[rs->g_first + (size_t)grp];
    if (g.qlen > 0) {
      const int32_t x = replay_node (j, P, g.head_node);
      g.head_row = g.head_row >= P->row0 ? g.head_row + P->row_delta : j->e.row_of[x];
      g.head_node = x;
    }
    T->gs[T->n_gs++] = g;
  }
}

/* Replays @P->R's clock log from checkpoint ci up to checkpoint @cj, or
 * to its end (@cj = R->n_snaps), from the engine's clock: the rows @R
 * issued meanwhile become the engine's (finished: a rejoin past them
 * queues again those still queued there), the stalls land on the
 * engine's rows, @R's checkpoints on the way are carried over to @T.
 * Returns the clock; *@compute_end gets it at the compute stream's end
 * (to the end only). */
static double
replay (SgSimJudge *j, SgJudgeRec *T, const Replay *P, int32_t cj, double *compute_end)
{
  SgSimEngine *e = &j->e;
  const SgJudgeRec *R = P->R;
  const SgJudgeSnap *s = &R->snaps[P->ci];
  for (int32_t grp = 0; grp < MAX (e->n_groups, 1); grp++)
    for (int32_t w = e->ghead[grp]; w >= 0; w = e->rnext[w])
      e->fin[w] = 1; /* finished by the end of the replay, or queued again */
  const int32_t rows_end = cj < R->n_snaps ? R->snaps[cj].n_rows : R->n_rows;
  g_assert (rows_end + P->row_delta <= e->cap_rows);
  for (int32_t r = P->row0; r < rows_end; r++) {
    const int32_t node = R->row_node[r];
    row_init (e, r + P->row_delta, node + P->delta, &R->ev[node]);
    e->fin[r + P->row_delta] = 1;
  }
  e->n_rows = rows_end + P->row_delta;
  double now = e->now, t0 = now, cend = now;
  int32_t gap = 0; /* the gap waits are in the order of the log's waits */
  for (int32_t hi = j->n_gapw; gap < hi;) {
    const int32_t mid = (gap + hi) / 2;
    if (j->gapw[mid].y < s->pos)
      gap = mid + 1;
    else
      hi = mid;
  }
  const int32_t last = MIN (cj, R->n_snaps - 1);
  size_t i = s->log_at;
  for (int32_t c = P->ci + 1; c <= last + 1; c++) {
    /* the entries up to the next checkpoint (checkpoints are in log order) */
    const size_t stop = c <= last ? R->snaps[c].log_at : cj < R->n_snaps ? i : R->log.n;
    /* the entries carried over as they are, the rows' renumbered */
    SG_JUDGE_GROW (T->log.v, T->log.cap, T->log.n + (stop - i) + 1, SgTlogEntry);
    SgTlogEntry *out = &T->log.v[T->log.n];
    memcpy (out, &R->log.v[i], sizeof (SgTlogEntry) * (stop - i));
    T->log.n += stop - i;
    for (SgTlogEntry *l = out; i < stop; i++, l++) {
      switch (l->tag) {
      case SG_TLOG_ADD:
        now += l->x;
        break;
      case SG_TLOG_WAIT:
        t0 = now;
        break;
      case SG_TLOG_COMPUTE_END:
        cend = now;
        break;
      default: {
        int32_t x = l->node >= s->pos ? l->node + P->delta : sg_judge_map (j, l->node);
        if (x < 0) {
          /* a gap wait's: its collective had finished (the same in the
           * new graph's), it waited for nothing */
          g_assert (gap < j->n_gapw && now == t0);
          x = j->gapw[gap++].x;
        }
        const int32_t row = l->tag >= P->row0 ? l->tag + P->row_delta : e->row_of[x];
        e->rows[row].exposed_us += now - t0;
        l->tag = row, l->node = x;
        break;
      }
      }
    }
    if (c <= last)
      carry_snap (j, T, P, c, now);
  }
  if (compute_end)
    *compute_end = cend;
  return now;
}

/* After a replay up to @R's checkpoint @cj: the engine in its state, its
 * clock at @now. */
static void
resume_at (SgSimJudge *j, const Replay *P, int32_t cj, double now)
{
  SgSimEngine *e = &j->e;
  const SgJudgeRec *R = P->R;
  const SgJudgeSnap *s = &R->snaps[cj];
  scalars_restore (e, s, now, NAN);
  for (int32_t grp = 0; grp < MAX (e->n_groups, 1); grp++) {
    const SgJudgeGState *gs = &R->gs[s->g_first + (size_t)grp];
    e->hold[grp] = gs->hold;
    e->hold_at[grp] = gs->hold_at;
    e->ghead[grp] = e->gtail[grp] = -1;
    FOR_QUEUED (R, gs, grp, w, k) {
      const int32_t node = R->row_node[w];
      const int32_t tw = w >= P->row0 ? w + P->row_delta : e->row_of[replay_node (j, P, node)];
      queue_row (e, grp, tw, k == 0 ? gs->head_rem : R->ev[node].cost, R->ev[node].aux);
    }
  }
}

/* The new graph's position of @R's next checkpoint (from *@next on, at or
 * after @x) where rejoining its run pays: inside a segment, with another
 * checkpoint of the segment after it, or in the segment that reaches both
 * graphs' ends; INT32_MAX for none. *@next and *@sg get it and its
 * segment. */
static int32_t
next_join (const SgSimJudge *j, const SgJudgeRec *R, int32_t n, int32_t *next, int32_t *sg,
           int32_t x)
{
  for (; *next < R->n_snaps; ++*next) {
    const int32_t y = R->snaps[*next].pos;
    while (*sg + 1 < j->n_segs && j->segs[*sg].r + j->segs[*sg].len <= y)
      ++*sg;
    if (*sg >= j->n_segs)
      return INT32_MAX;
    const SgJudgeSeg *s = &j->segs[*sg];
    const int32_t end = s->r + s->len;
    if (y < s->r || y > end || y + s->t - s->r < x)
      continue;
    if ((s->t + s->len == n && end == R->n)
        || (*next + 1 < R->n_snaps && R->snaps[*next + 1].pos <= end))
      return y + s->t - s->r;
  }
  return INT32_MAX;
}

/* The run of @T's events from @start (the engine in its state there;
 * a checkpoint to save first when @save_first) to their end: where its
 * state equals the previous run's at a checkpoint in a segment, the
 * previous run is replayed over the segment, to its end or to its last
 * checkpoint there, from where the run goes on. Returns the nodes placed;
 * *@compute_end and *@end get the compute stream's end and the clock's. */
static int32_t
run_from (SgSimJudge *j, SgJudgeRec *T, const SgJudgeRec *R, int32_t start, bool save_first,
          double *compute_end, double *end)
{
  SgSimEngine *e = &j->e;
  const int32_t n = T->n;
  int32_t next = 0, sg = 0, placed = 0, next_save = save_first ? start : start + SNAP_EVERY;
  for (int32_t x = start;;) {
    if (x == next_save) {
      snap_save (T, e, x);
      next_save += SNAP_EVERY;
    }
    const int32_t cx = R->valid ? next_join (j, R, n, &next, &sg, x) : INT32_MAX;
    if (cx == x) {
      if (!state_equals (j, R, &R->snaps[next])) {
        j->stats.differed++;
        next++;
        continue;
      }
      j->stats.joins++;
      const SgJudgeSeg *s = &j->segs[sg];
      const Replay P = { R, next, s->t - s->r, R->snaps[next].n_rows,
                         e->n_rows - R->snaps[next].n_rows };
      if (s->t + s->len == n && s->r + s->len == R->n) {
        *end = replay (j, T, &P, R->n_snaps, compute_end);
        return placed;
      }
      int32_t cj = next + 1; /* the segment's last checkpoint */
      while (cj + 1 < R->n_snaps && R->snaps[cj + 1].pos <= s->r + s->len)
        cj++;
      resume_at (j, &P, cj, replay (j, T, &P, cj, NULL));
      x = R->snaps[cj].pos + P.delta;
      next = cj + 1;
      next_save = x + SNAP_EVERY;
      continue;
    }
    if (x == n)
      break;
    const int32_t stop = MIN (MIN (n, next_save), cx);
    placed += stop - x;
    for (; x < stop; x++)
      place_ev (e, x, &T->ev[x]);
  }
  *compute_end = e->now;
  sg_tlog_add (&T->log, 0.0, SG_TLOG_COMPUTE_END, -1);
  sg_eng_drain (e);
  *end = e->now;
  return placed;
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

  /* where the events are the previous graph's */
  sg_judge_align (j, g, T, R, p);

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
  double compute_end = 0.0, end = 0.0;
  const int32_t placed = run_from (j, T, R, start, k < 0, &compute_end, &end);
  /* the rows this run issued, replayed or found queued are its own; the
   * others, the previous run's, finished before the checkpoint */
  rows_reserve (T, MAX (e->n_rows, 1));
  for (int32_t r = rows_restored; r < e->n_rows; r++) {
    T->row_exp[r] = e->rows[r].exposed_us;
    T->row_node[r] = e->rows[r].node;
  }
  for (int32_t i = 0; i < n_act; i++)
    T->row_exp[j->act[i]] = e->rows[j->act[i]].exposed_us;
  T->n_rows = e->n_rows;
  e->tlog = NULL;
  T->valid = true;
  j->cur ^= 1;
  j->stats.nodes_skipped += n - placed;

  double exposed = 0.0;
  for (int32_t r = 0; r < T->n_rows; r++)
    exposed += T->row_exp[r];
  out->step_us = MAX (compute_end, end);
  out->exposed_us = exposed;
  j->stats.nodes += n;
}
