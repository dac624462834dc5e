/* listsched-private.h: the state of one run of the list scheduler, shared
 * by its files: listsched.c (the main loop, readiness, memory, waits),
 * issue.c (when collectives are issued) and stall.c (what is done around
 * stalls and start-wait holds). docs/scheduler.md has the rules.
 */
#pragma once

#include "schedule-private.h"

/* --- small containers ------------------------------------------------------ */

/* Binary min-heap of 64-bit keys: (priority << 32) | id, so ties break on id. */
typedef struct {
  int64_t *a;
  int32_t n, cap;
} Heap;


static inline void
ls_heap_push (Heap *h, int64_t k)
{
  if (h->n == h->cap) {
    h->cap = MAX (16, h->cap * 2);
    h->a = g_renew (int64_t, h->a, (size_t)h->cap);
  }
  int32_t i = h->n++;
  while (i > 0) {
    int32_t p = (i - 1) / 2;
    if (h->a[p] <= k)
      break;
    h->a[i] = h->a[p];
    i = p;
  }
  h->a[i] = k;
}

static inline void
ls_heap_pop (Heap *h)
{
  int64_t k = h->a[--h->n];
  int32_t i = 0;
  for (;;) {
    int32_t c = 2 * i + 1;
    if (c >= h->n)
      break;
    if (c + 1 < h->n && h->a[c + 1] < h->a[c])
      c++;
    if (k <= h->a[c])
      break;
    h->a[i] = h->a[c];
    i = c;
  }
  if (h->n > 0)
    h->a[i] = k;
}

#define KEY(prio, id) (((int64_t)(prio) << 32) | (int64_t)(uint32_t)(id))
#define KEY_ID(k) ((SgNodeId)((k) & 0xffffffff))

/* --- one variant ------------------------------------------------------------- */

/* The deferred waits (defer.c). A slot per deferred wait, in deferral
 * order; per storage root, its leader (the first deferred wait not placed)
 * reserves the root's memory. */
typedef struct {
  int32_t cap;        /* slots: the graph's waits */
  SgNodeId *slot_w;   /* per slot: the wait */
  int32_t *live;      /* slots whose wait may not be placed yet, in order */
  int32_t n_slots, n_live;
  int32_t *next_same; /* per slot: the next slot of its root, or -1 */
  uint8_t *state;     /* per slot: DEF_* (defer.c) */
  int32_t *slot_of;   /* per wait (P->wait_idx): its slot, or -1 */
  int32_t *lead, *tail; /* per root (P->in_root): first and last slot not placed, or -1 */
  /* Synced leaders (reserved up to sync): the slot tree holds, per slot,
   * their bytes up to it minus its cap; fen the bytes (Fenwick). */
  SgMemTree vt;
  int64_t *fen, fen_total;
  int32_t n_synced, sync;
  int32_t n_idle, idle_from; /* idle leaders, the least position one reserves from */
  int32_t scan, to;          /* within a step: slots < scan have had their turn */
  int32_t *promo, n_promo;   /* leaders promoted within a step */
} Defer;

typedef struct {
  const SgSchedProblem *P;
  int32_t window; /* how far (ids) compute may be pulled into a stall; 0 = never */
  int32_t boost;  /* priority boost of compute feeding a collective (see prio) */
  uint8_t *placed;
  uint8_t *avail;    /* wait whose collective is issued: its readers may become ready */
  uint8_t *released; /* collective whose budget (bytes, count in flight) is returned */
  uint8_t *deferred; /* wait passed by the frontier while its collective ran */
  /* Per storage root (P->in_root), the input position up to which the
   * memory a deferred wait keeps alive is reserved (one storage read by
   * several collectives is counted once; defer.c keeps its leaders'
   * lazily). */
  int32_t *root_resv;
  Defer defer;
  int32_t *npend; /* inputs not placed (a wait counts as placed once available) */
  int32_t *nblk;  /* of a ready node: available waits whose collective still runs */
  Heap ready;  /* compute ready and not blocked by an unfinished collective */
  Heap freeq;  /* free feeders (P->free_feed) whose inputs may all be placed */
  Heap blocked; /* critical-path variant: ready compute blocked by a running collective */
  /* compute and collective work placed, summed in the order's order (a
   * full simulation's compute_us and comm_us, as sg_simulate sums them) */
  double done_us, comm_us;
  int32_t *gnext; /* per group: first entry of P->gorder not issued */
  /* Per group: bumped when one of its collectives becomes ready or is
   * placed; ls_try_issue's scan for the ones not ready (issue.c) is kept
   * with the version and the gnext it saw. */
  uint32_t *gver;
  struct LsScan *scan;
  Heap *rq;       /* per group: ready collectives by (P->due_rank, id) */
  /* Solo work per group: issued in all (gissued), of the finished
   * collectives (gdone); per collective (by P->due_rank), issued in its
   * group up to it (cum): queue ends in O(1) */
  double *gissued, *gdone, *cum;
  /* per group: issued, unreleased, FIFO (fifo_next by P->due_rank) */
  int32_t *fifo_next, *fifo_head, *fifo_tail;
  uint64_t *in_flight;
  int32_t *n_in_flight;
  SgNodeId mem_wait_x;  /* compute the memory check refused to move up */
  int32_t mem_wait_x_at;
  SgNodeId *mem_wait_c; /* per group: collective the memory check refused */
  int32_t *mem_wait_at; /* ... until the frontier reaches this position */
  SgMemTree seg;
  SgSimEngine eng;
  SgNodeId *order;
  int32_t n_order, frontier;
  SgNodeId *stack; /* ls_run_demand's (grows) */
  int32_t stack_cap;
  SgNodeId *done; /* finished collectives whose wait is deferred or feeds a collective */
  int32_t n_done;
  int32_t n_pulled, n_early, n_forced, n_boosted, n_forced_waits, n_shielded, n_short_stalls;
} Run;

/* listsched.c */
/* Base priority: the input order, except that compute feeding a collective
 * (through compute only) is ordered by that collective's position (boost >
 * 0) or deadline (boost < 0) when that is less than |boost| ahead: the
 * collective's inputs run first, so it starts earlier. Non-negative; ties
 * break on id. Inline: every heap push of compute asks it. */
static inline int32_t
ls_prio (const Run *R, SgNodeId x)
{
  if (R->boost == SG_BOOST_CRITICAL_PATH)
    return R->P->cp_rank[x];
  if (R->boost < 0)
    return MIN (x - R->boost, R->P->near_dead[x]);
  return MIN (x + R->boost, R->P->near_coll[x]);
}
void ls_run_place (Run *R, SgNodeId x);
/* Places @x after everything it needs that is not placed yet. */
void ls_run_demand (Run *R, SgNodeId x);
bool ls_mem_fits_range_at (Run *R, uint64_t b, int32_t a, int32_t e, int32_t *at);
bool ls_mem_fits_moved (Run *R, SgNodeId x);
void ls_release (Run *R, SgNodeId c);
bool ls_would_stall (Run *R, SgNodeId x);
/* Are all inputs of @u placed (waits included)? */
bool ls_inputs_placed (const Run *R, SgNodeId u);

/* defer.c */
void ls_defer_init (Run *R);
void ls_defer_clear (Run *R);
/* The frontier reached wait @w: place it, or defer it while the memory its
 * collective's input keeps alive fits. */
void ls_reach_wait (Run *R, SgNodeId w);
/* Grows every deferred wait's reservation to the frontier, placing those
 * whose input no longer fits (in deferral order). */
void ls_extend_deferred (Run *R);
/* Wait @w was placed / its collective finished. */
void ls_defer_placed (Run *R, SgNodeId w);
void ls_defer_finished (Run *R, SgNodeId w);

/* issue.c */
void ls_issue_init (Run *R);
void ls_issue_clear (Run *R);
bool ls_budget_allows (Run *R, SgNodeId c);
bool ls_release_early (Run *R, int32_t grp);
/* Engine time at which issued collective @c would end (solo work of its
 * queue up to it), or NAN when it is not issued. O(1). */
double ls_queue_end (const Run *R, SgNodeId c);
/* Engine time at which group @grp's queue would be done (solo work). */
double ls_group_free (const Run *R, int32_t grp);
void ls_try_issue (Run *R, bool force);

/* stall.c */
/* Would compute node @x, run next, hold a collective the engine holds for
 * the next kernel (sg_eng_would_hold)? */
bool ls_holds_sms (const Run *R, SgNodeId x);
bool ls_run_shield (Run *R, SgNodeId next);
bool ls_stall_for_critical (Run *R, SgNodeId f);
bool ls_stall_shorter (Run *R, SgNodeId x);
void ls_finish_tail (Run *R);
