/* schedule-private.h: schedule/'s internal pieces shared by its files.
 *
 * The timeline engine (sim.c) is the one model of time: sg_simulate() walks
 * a whole order through it and the list scheduler (scheduler.c) drives it
 * one placement at a time, so the scheduler's clock and the judge agree by
 * construction.
 */
#pragma once

#include "schedule.h"

/* What a node is to the timeline. */
typedef enum {
  SG_ROLE_COMPUTE, /* runs on the compute stream (free nodes take 0 us) */
  SG_ROLE_COLL,    /* runs on its group's comm stream */
  SG_ROLE_WAIT,    /* stalls the compute stream until its collective ends */
} SgRole;

static inline SgRole
sg_sched_role (const SgNode *n)
{
  SgOpClass c = sg_op_class (n->kind);
  if (c == SG_CLASS_COLLECTIVE)
    return SG_ROLE_COLL;
  if (c == SG_CLASS_WAIT)
    return SG_ROLE_WAIT;
  return SG_ROLE_COMPUTE;
}

/* Solo cost the timeline uses: est_us for compute and collectives, 0 for
 * aliases (views, getitem, waits), inputs and the output. */
static inline double
sg_sched_cost (const SgNode *n)
{
  SgOpClass c = sg_op_class (n->kind);
  if (c == SG_CLASS_VIEW || c == SG_CLASS_GETITEM || c == SG_CLASS_WAIT || c == SG_CLASS_INPUT
      || c == SG_CLASS_OUTPUT)
    return 0.0;
  return n->est_us > 0.0 ? n->est_us : 0.0;
}

/* The engine. Collectives of one group run FIFO on the group's stream; the
 * head of each non-empty queue is running unless it is held (start wait,
 * below). Rates are per pair (estimate/'s contention table: a collective
 * beside the running kernel's slot, SgPairRates): while a kernel runs, a
 * running collective progresses at 1/comm_x of that pair and the kernel at
 * 1/kernel_x of the most disturbing running collective (the largest); with
 * the compute stream idle, or no collective running, at 1.
 * Start wait: a head that becomes startable while a kernel runs is held
 * until that kernel has done the pair's wait_during of its remaining work;
 * one that becomes startable while the compute stream is idle is held until
 * the next engine call: the next compute kernel (work > 0) holds it for the
 * pair's wait_before of its work (not at all when that is 0), anything else
 * (a stall, the drain) starts it at once. Without a contention profile the
 * pairs are the global factors (sg_contention_global_rates: waits only
 * beside matmul/attention, comm_start_wait of the graph's cost model, 0
 * without one). */
enum { SG_HOLD_NONE, SG_HOLD_NEXT, SG_HOLD_KERNEL };
typedef struct {
  const SgGraph *g;
  const SgCostModel *pairs; /* the table the rates come from; NULL: global factors */
  SgContention cont;        /* global factors (pairs NULL) */
  double sw;                /* their start wait (comm_start_wait) */
  int32_t n_slots;          /* kernel slots (sg_cost_contention_slots) */
  double now;    /* the compute stream's clock */
  double busy_us;
  int32_t n_groups, n_active; /* n_active: non-empty queues (held or running) */
  int32_t n_held, n_kheld;    /* held heads; of those, held by the kernel */
  uint8_t *hold;              /* per group: SG_HOLD_* of its head */
  double *hold_at;            /* per group: kernel work left at which its head starts */
  bool in_kernel;             /* a compute kernel runs */
  int32_t kslot;              /* its slot */
  double kleft;               /* its solo work left */
  int32_t *ghead, *gtail; /* per group: queue of row indices, -1 when empty */
  int32_t *rnext;         /* per row: next in its group's queue */
  double *rem;            /* per row: solo work left */
  SgPairRates *rates;     /* per row: n_slots pairs (the collective beside each slot) */
  uint8_t *wnext;         /* per row: some slot has wait_before > 0 */
  uint8_t *fin;           /* per row: finished */
  SgCollRow *rows;
  int32_t n_rows, cap_rows;
  int32_t *row_of;            /* per node: its row, -1 */
  double *node_start, *node_end; /* per node; NULL when not tracked */
  /* Called when a collective finishes (the scheduler unblocks its users). */
  void (*on_finish) (void *ud, SgNodeId coll);
  void *ud;
} SgSimEngine;

/* @cont NULL: the rates of the graph's cost model (its contention table,
 * measured pairs included); else these global factors for every pair, with
 * the cost model's comm_start_wait (0 without one). */
void sg_eng_init (SgSimEngine *e, const SgGraph *g, const SgContention *cont, bool track_nodes);
void sg_eng_clear (SgSimEngine *e);
/* Issues collective @c now; returns its row. */
int32_t sg_eng_issue (SgSimEngine *e, SgNodeId c);
/* Runs compute node @x of solo @work us on the compute stream. */
void sg_eng_compute (SgSimEngine *e, SgNodeId x, double work);
/* Wait @w on collective @c: stalls until @c ends; returns the stall. */
double sg_eng_wait (SgSimEngine *e, SgNodeId w, SgNodeId c);
/* Runs every queued collective to its end (compute idle). */
void sg_eng_drain (SgSimEngine *e);
/* True when compute node @x of solo @work, run next, would hold a collective
 * the engine holds for the next kernel (its pair's wait_before > 0). */
bool sg_eng_would_hold (const SgSimEngine *e, SgNodeId x, double work);
static inline bool
sg_eng_finished (const SgSimEngine *e, SgNodeId c)
{
  int32_t r = e->row_of[c];
  return r >= 0 && e->fin[r];
}

/* Sets every row's status (hidden: exposed below 0.5% of its estimate or
 * 0.01 us; exposed: no compute overlapped it; partial otherwise) and the
 * counts and exposed_us of @out. */
void sg_sim_classify (SgCollRow *rows, int32_t n_rows, SgSimResult *out);

/* id -> position for @order (NULL = identity), (transfer full). */
int32_t *sg_sched_positions (const SgGraph *g, const SgNodeId *order);

/* Range add / range max over positions [0, n) (memtree.c). */
typedef struct {
  int64_t *t, *d;
  int32_t n, h;
} SgMemTree;

/* Leaves 0..n-1 start at @v[i]. */
void sg_memtree_init (SgMemTree *s, int32_t n, const uint64_t *v);
void sg_memtree_clear (SgMemTree *s);
/* Adds @v to positions [l, r). */
void sg_memtree_add (SgMemTree *s, int32_t l, int32_t r, int64_t v);
/* Maximum over [l, r) (l < r); *at (if not NULL) gets a position holding it. */
int64_t sg_memtree_max (SgMemTree *s, int32_t l, int32_t r, int32_t *at);

/* --- the list scheduler (problem.c, listsched.c) ---------------------------- */

/* What every variant shares (problem.c). */
typedef struct {
  const SgGraph *g;
  int32_t n, n_groups;
  uint8_t *role;
  double *cost;
  uint64_t *alloc;   /* bytes a node allocates (0 for aliases) */
  SgNodeId *root;    /* storage root of every node */
  uint64_t *comm;    /* bytes a collective moves */
  uint64_t *in_bytes; /* collective -> bytes of its input's storage (held until the wait) */
  int32_t *in_end;    /* collective -> input position where that storage dies in the input order */
  SgNodeId *wait_of; /* collective -> its first wait, or SG_NO_NODE */
  SgNodeId *coll_of; /* wait -> its collective */
  int32_t *deadline; /* collective -> id of the first user of its wait */
  uint8_t *feeds_coll; /* wait -> read by a collective (placed as soon as free) */
  int32_t *near_coll; /* compute -> lowest id of a collective it feeds through compute, or n */
  int32_t *near_dead; /* compute -> earliest deadline of a collective it feeds, or n */
  uint32_t *ufirst;  /* users CSR (g is const here) */
  SgNodeId *users;
  uint64_t *profile; /* live bytes of the input order, by id */
  uint64_t peak_in, limit;
  uint64_t max_in_flight;
  int32_t prefetch_limit;
} SgSchedProblem;

void sg_sched_problem_init (SgSchedProblem *P, const SgGraph *g, const SgConfig *cfg);
void sg_sched_problem_clear (SgSchedProblem *P);

/* Runs one variant: stall-fill @window (0 = never), priority @boost and
 * @shield (a ready non-GEMM node between a just-issued collective and the
 * GEMM that would hold it; only with comm_start_wait > 0), see
 * docs/scheduler.md. Returns the order (transfer full); fills @st's
 * counters and @res's totals (hidden/partial/exposed counts, exposed_us,
 * step_us, peak_bytes; no rows). */
SgNodeId *sg_sched_run_variant (const SgSchedProblem *P, int32_t window, int32_t boost,
                                bool shield, SgScheduleStats *st, SgSimResult *res);
