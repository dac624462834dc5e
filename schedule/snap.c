/* snap.c: saving and restoring the simulator engine's state (sim.c), for
 * the searches that backtrack (search.c, polish.c).
 *
 * A save keeps the scalars (a copy of the engine struct: a scalar added to
 * SgSimEngine is saved with no change here), the per-group arrays and each
 * group's head row (its row, work left): O(groups), however deep the
 * queues. Only a head runs: a collective queued behind it has not started
 * at the save, and its row is as issued (a row's state changes only once
 * it starts; unstart puts one back). Restoring puts any of them that
 * started since back as queued, cuts each queue at its saved tail, and
 * forgets the collectives issued since.
 * Node times (track_nodes) are not saved.
 * sg_eng_copy_state gives a second engine an engine's state, for searches
 * that run side by side (polish.c): of the collectives both issued, only
 * those one of them finished or started since are copied (and the queues'
 * links; a row's rates entry as numbered in the copy's own memo), so a
 * copy costs O(groups + those rows + rows issued since the last copy).
 * Requires: an engine of sim.c. Invalidates: nothing.
 */
#include <string.h>

#include "schedule-private.h"

/* Puts row @r back as queued and never started (nor waited on). */
static void
unstart (SgSimEngine *e, int32_t r)
{
  SgCollRow *row = &e->rows[r];
  e->rem[r] = row->est_us;
  e->fin[r] = 0;
  row->start_us = row->end_us = row->exposed_us = row->overlap_us = 0.0;
  row->n_hiding = 0;
  row->hidden_by = row->last_hiding = row->wait = SG_NO_NODE;
}

/* Rows' state: the row, its queue link, its solo work left, finished. */
typedef struct {
  SgCollRow *rows;
  int32_t *rnext;
  double *rem;
  uint8_t *fin;
} RowState;

static inline RowState
eng_rows (const SgSimEngine *e)
{
  return (RowState){ e->rows, e->rnext, e->rem, e->fin };
}

/* The state of @k rows, from @src's at @j on to @dst's at @i on. */
static inline void
copy_rows (RowState dst, int32_t i, RowState src, int32_t j, size_t k)
{
  memcpy (dst.rows + i, src.rows + j, k * sizeof *dst.rows);
  memcpy (dst.rnext + i, src.rnext + j, k * sizeof *dst.rnext);
  memcpy (dst.rem + i, src.rem + j, k * sizeof *dst.rem);
  memcpy (dst.fin + i, src.fin + j, k * sizeof *dst.fin);
}

/* The per-group arrays, from the @s* ones. */
static void
copy_groups (size_t ng, uint8_t *hold, double *hold_at, int32_t *ghead, int32_t *gtail,
             const uint8_t *shold, const double *shold_at, const int32_t *sghead,
             const int32_t *sgtail)
{
  memcpy (hold, shold, ng * sizeof *hold);
  memcpy (hold_at, shold_at, ng * sizeof *hold_at);
  memcpy (ghead, sghead, ng * sizeof *ghead);
  memcpy (gtail, sgtail, ng * sizeof *gtail);
}

void
sg_eng_save (const SgSimEngine *e, SgEngSnap *s)
{
  int32_t ng = MAX (e->g->n_groups, 1);
  if (!s->groups)
    s->groups = g_new (SgSnapGroup, (size_t)ng);
  s->top = *e;
  for (int32_t grp = 0; grp < ng; grp++) {
    SgSnapGroup *sg = &s->groups[grp];
    int32_t r = e->ghead[grp];
    sg->head = r;
    sg->tail = e->gtail[grp];
    sg->hold = e->hold[grp];
    sg->hold_at = e->hold_at[grp];
    sg->behind = -1;
    if (r >= 0) {
      sg->row = e->rows[r];
      sg->rem = e->rem[r];
      sg->behind = e->rnext[r];
    }
  }
}

void
sg_eng_restore (SgSimEngine *e, const SgEngSnap *s)
{
  int32_t ng = MAX (e->g->n_groups, 1);
  /* rows issued since: forgotten, and clean for the next issue (which
   * expects the fields it does not set to be zero) */
  g_return_if_fail (s->top.rows == e->rows); /* a save of this engine */
  for (int32_t r = s->top.n_rows; r < e->n_rows; r++) {
    e->row_of[e->rows[r].node] = -1;
    unstart (e, r);
  }
  for (int32_t grp = 0; grp < ng; grp++) {
    const SgSnapGroup *sg = &s->groups[grp];
    /* rows behind the saved head that started since (FIFO: a run of them) */
    for (int32_t r = sg->behind; r >= 0 && (e->fin[r] || e->ghead[grp] == r); r = e->rnext[r]) {
      bool head = e->ghead[grp] == r;
      unstart (e, r);
      if (head || r == sg->tail)
        break;
    }
    /* the tail at the save ends its queue again */
    if (sg->tail >= 0)
      e->rnext[sg->tail] = -1;
  }
  *e = s->top;
  for (int32_t grp = 0; grp < ng; grp++) {
    const SgSnapGroup *sg = &s->groups[grp];
    e->ghead[grp] = sg->head;
    e->gtail[grp] = sg->tail;
    e->hold[grp] = sg->hold;
    e->hold_at[grp] = sg->hold_at;
    if (sg->head >= 0) {
      /* a head is not finished; its queue link is as saved (the tail's
       * above) */
      e->rows[sg->head] = sg->row;
      e->rem[sg->head] = sg->rem;
      e->fin[sg->head] = 0;
    }
  }
}

/* sg_eng_copy_state keeps @dst's arrays and what it owns by name (own):
 * a field added to the engine must be listed there when it is one of
 * those, and then this size changed. */
G_STATIC_ASSERT (sizeof (SgSimEngine) == 248);

void
sg_eng_copy_state (SgSimEngine *dst, const SgSimEngine *src, int32_t *lo)
{
  g_return_if_fail (dst->g == src->g && dst->n_slots == src->n_slots);
  size_t ng = (size_t)MAX (src->g->n_groups, 1);
  int32_t from = MIN (*lo, MIN (dst->n_rows, src->n_rows));
  /* Below from the rows are the same collectives, issued alike: those
   * finished in both are alike, and so are those queued in both behind
   * both heads (not started). A group's queue holds its rows in issue
   * order, so the rest lie from the earlier head to the later one (one
   * engine finished them, the other did not, or runs the head). */
  int32_t q = from;
  RowState to_rows = eng_rows (dst), from_rows = eng_rows (src);
  for (int32_t grp = 0; grp < src->n_groups; grp++) {
    int32_t a = dst->ghead[grp], b = src->ghead[grp];
    a = a < 0 ? INT32_MAX : a;
    b = b < 0 ? INT32_MAX : b;
    const SgSimEngine *early = a <= b ? dst : src;
    int32_t later = MAX (a, b);
    q = MIN (q, MIN (a, b));
    for (int32_t r = early->ghead[grp]; r >= 0 && r < from && r <= later;) {
      int32_t next = early->rnext[r]; /* read before @dst's row is written */
      copy_rows (to_rows, r, from_rows, r, 1);
      r = next;
    }
  }
  /* and the links of what may be queued (a tail's may now lead on) */
  if (q < from)
    memcpy (dst->rnext + q, src->rnext + q, (size_t)(from - q) * sizeof *dst->rnext);
  /* From there on, whole rows (a row's rates are its collective's, set at
   * its issue: @src's memo entry, as numbered in @dst's) */
  for (int32_t r = from; r < dst->n_rows; r++)
    dst->row_of[dst->rows[r].node] = -1;
  for (int32_t r = from; r < src->n_rows; r++) {
    if (r >= dst->n_rows || dst->rows[r].node != src->rows[r].node)
      dst->rent[r] = sg_eng_adopt_entry (dst, src, src->rent[r]);
    dst->row_of[src->rows[r].node] = r;
  }
  copy_rows (to_rows, from, from_rows, from, (size_t)(src->n_rows - from));
  /* the scalars; the arrays and what the engine owns stay @dst's */
  SgSimEngine own = *dst;
  *dst = *src;
  dst->hold = own.hold;
  dst->hold_at = own.hold_at;
  dst->ghead = own.ghead;
  dst->gtail = own.gtail;
  dst->rnext = own.rnext;
  dst->rem = own.rem;
  dst->rent = own.rent;
  dst->fin = own.fin;
  dst->rows = own.rows;
  dst->cap_rows = own.cap_rows;
  dst->row_of = own.row_of;
  dst->memo = own.memo;
  dst->tlog = own.tlog;
  dst->node_start = own.node_start;
  dst->node_end = own.node_end;
  dst->on_finish = own.on_finish;
  dst->ud = own.ud;
  copy_groups (ng, dst->hold, dst->hold_at, dst->ghead, dst->gtail, src->hold, src->hold_at,
               src->ghead, src->gtail);
  *lo = src->n_rows;
}

void
sg_eng_snap_clear (SgEngSnap *s)
{
  g_free (s->groups);
  memset (s, 0, sizeof *s);
}
