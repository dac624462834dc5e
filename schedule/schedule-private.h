/* schedule-private.h: schedule/'s internal pieces shared by its files.
 *
 * The timeline engine (sim.c) is the one model of time: sg_simulate() walks
 * a whole order through it and the list scheduler (scheduler.c) drives it
 * one placement at a time, so the scheduler's clock and the judge agree by
 * construction.
 */
#pragma once

#include <math.h>
#include <string.h>

#include "schedule.h"

/* What a collective's pair rates depend on (sg_cost_contention_rates: the
 * member kind, transport, bytes, group size and the group's span; the
 * global factors: the kind): sim.c's memo of rates and the bound's rates
 * (window.c) by it. */
typedef struct {
  uint64_t bytes;
  int32_t kind, group, group_size, transport;
} SgRatesKey;

/* The key of collective @c of @g priced with the pairs of @cm. */
static inline SgRatesKey
sg_rates_key_of (const SgGraph *g, SgNodeId c, const SgCostModel *cm)
{
  const SgNode *n = &g->nodes[c];
  return (SgRatesKey){ sg_node_comm_bytes (g, c), n->kind, n->group, n->group_size,
                       sg_cost_collective_transport (cm, g, c) };
}

static inline uint32_t
sg_rates_key_hash (const SgRatesKey *k)
{
  uint64_t h = k->bytes * 0x9E3779B97F4A7C15ull;
  h ^= ((uint64_t)(uint32_t)k->kind << 40) ^ ((uint64_t)(uint32_t)k->group << 20)
       ^ ((uint64_t)(uint32_t)k->group_size << 8) ^ (uint64_t)(uint32_t)k->transport;
  h *= 0xBF58476D1CE4E5B9ull;
  return (uint32_t)(h >> 32);
}

static inline bool
sg_rates_key_equal (const SgRatesKey *a, const SgRatesKey *b)
{
  return a->bytes == b->bytes && a->kind == b->kind && a->group == b->group
         && a->group_size == b->group_size && a->transport == b->transport;
}

/* @d as an unsigned integer that orders as the doubles do, ascending
 * (-0 and +0 equal): the radix sorts' key (problem.c, bound.c). */
static inline uint64_t
sg_double_order_bits (double d)
{
  if (d == 0.0)
    d = 0.0;
  uint64_t u;
  memcpy (&u, &d, sizeof u);
  return u >> 63 ? ~u : u | (uint64_t)1 << 63;
}

/* Sorts the @n entries of @size bytes at @a stably by @key of each,
 * ascending, through @tmp (room for @n): an LSD radix sort by digits of
 * @bits bits (at most 11), which skips the digits every key shares. For
 * problem.c's orders by critical path and due and bound.c's windows, each
 * with its own digits; inline, so that @size, @bits and @key are constants
 * where it is expanded. */
static inline void
sg_radix_sort (void *a, void *tmp, int32_t n, size_t size, int bits,
               uint64_t (*key) (const void *))
{
  const int passes = (64 + bits - 1) / bits;
  const size_t nb = (size_t)1 << bits;
  const uint64_t mask = nb - 1;
  uint32_t count[6 << 11]; /* passes x nb, for bits <= 11 */
  g_return_if_fail (bits >= 6 && bits <= 11 && n > 0);
  memset (count, 0, sizeof (uint32_t) * (size_t)passes * nb);
  char *src = a, *dst = tmp;
  for (int32_t i = 0; i < n; i++) {
    uint64_t k = key (src + (size_t)i * size);
    for (int d = 0; d < passes; d++)
      count[(size_t)d * nb + ((k >> (d * bits)) & mask)]++;
  }
  for (int d = 0; d < passes; d++) {
    uint32_t *c = count + (size_t)d * nb;
    if (c[(key (src) >> (d * bits)) & mask] == (uint32_t)n)
      continue; /* every key has this digit */
    uint32_t at = 0;
    for (size_t b = 0; b < nb; b++) {
      uint32_t k = c[b];
      c[b] = at;
      at += k;
    }
    for (int32_t i = 0; i < n; i++) {
      const char *x = src + (size_t)i * size;
      memcpy (dst + (size_t)c[(key (x) >> (d * bits)) & mask]++ * size, x, size);
    }
    char *t = src;
    src = dst;
    dst = t;
  }
  if (src != (char *)a)
    memcpy (a, src, size * (size_t)n);
}

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
/* The pair rates of the collectives an engine issued, by what they depend
 * on (sim.c): a graph's collectives come in few sizes. */
typedef struct SgRatesMemo SgRatesMemo;
/* What the engine did to its clock, in order (judge.c replays it): an
 * advance by x (SG_TLOG_ADD), the start of a wait (SG_TLOG_WAIT), its end
 * (tag >= 0: the row waited on, node: its collective), the end of the
 * compute stream's work (SG_TLOG_COMPUTE_END, written by the caller). */
enum { SG_TLOG_ADD = -1, SG_TLOG_WAIT = -2, SG_TLOG_COMPUTE_END = -3 };
typedef struct {
  double x;
  int32_t tag, node;
} SgTlogEntry;
typedef struct {
  SgTlogEntry *v;
  size_t n, cap;
} SgTlog;
/* Makes room for one more entry (sim.c). */
void sg_tlog_grow (SgTlog *l);
static inline void
sg_tlog_add (SgTlog *l, double x, int32_t tag, int32_t node)
{
  if (l->n == l->cap)
    sg_tlog_grow (l);
  l->v[l->n++] = (SgTlogEntry){ x, tag, node };
}
typedef struct {
  const SgGraph *g;
  const SgCostModel *pairs; /* the table the rates come from; NULL: global factors */
  SgContention cont;        /* global factors (pairs NULL) */
  double sw;                /* their start wait (comm_start_wait) */
  double held_scale;        /* a held head's kernel_x applies by this much (sim.c) */
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
  int32_t *rent;          /* per row: its collective's entry in memo (its n_slots pairs,
                           * the collective beside each slot; sg_eng_row_rates) */
  uint8_t *fin;           /* per row: finished */
  SgCollRow *rows;
  int32_t n_rows, cap_rows;
  int32_t *row_of;            /* per node: its row, -1 */
  SgRatesMemo *memo;          /* (owned) sg_eng_pair_rates by key */
  SgTlog *tlog;               /* when set, the clock's changes are logged there */
  double *node_start, *node_end; /* per node; NULL when not tracked */
  /* Called when a collective finishes (the scheduler unblocks its users). */
  void (*on_finish) (void *ud, SgNodeId coll);
  void *ud;
} SgSimEngine;

/* @cont NULL: the rates of the graph's cost model (its contention table,
 * measured pairs included); else these global factors for every pair, with
 * the cost model's comm_start_wait (0 without one). */
/* False with @error naming the first node whose est_us is not a finite
 * cost >= 0 (sim.c; the simulator and the judge check it first). */
bool sg_sim_check_costs (const SgGraph *g, GError **error);
/* The rule sg_sim_check_costs applies to each node's est_us. */
static inline bool
sg_sim_cost_ok (double c)
{
  return isfinite (c) && c >= 0.0;
}
void sg_eng_init (SgSimEngine *e, const SgGraph *g, const SgContention *cont, bool track_nodes);
/* sg_eng_init with @g's count of collectives known: @n_coll (rows). */
void sg_eng_init_sized (SgSimEngine *e, const SgGraph *g, const SgContention *cont,
                        bool track_nodes, int32_t n_coll);
/* An engine for rate look-ups alone (sg_eng_pair_rates, sg_eng_rates_entry,
 * sg_bound_rates_init): sg_eng_init's rates and memo, no rows (row_of
 * NULL: nothing issued) and nothing to place. Clear it with sg_eng_clear. */
void sg_eng_init_rates (SgSimEngine *e, const SgGraph *g, const SgContention *cont);
void sg_eng_clear (SgSimEngine *e);
/* An engine for rate look-ups (sg_eng_pair_rates, sg_eng_rates_entry,
 * sg_bound_rates_init) on another thread: @src's state, its arrays shared
 * (read-only, and @src must not change while @dst is used), a rates memo
 * of its own, starting as a copy of @src's (its rows' entries). Clear it with sg_eng_fork_clear (the arrays stay @src's). */
void sg_eng_fork_rates (SgSimEngine *dst, const SgSimEngine *src);
void sg_eng_fork_clear (SgSimEngine *e);
/* A saved engine state, O(groups): searches save at each depth and
 * restore when they backtrack. Per group it keeps the queue's ends and its
 * head's row: a collective queued behind the head has not started, and is
 * as issued (restoring puts back any of them that started since).
 * Restoring forgets every collective issued since the save. Node times
 * (track_nodes) are not saved. */
typedef struct {
  SgCollRow row;   /* the head's row (head < 0: none) */
  double rem;      /* its solo work left */
  double hold_at;
  int32_t head, tail; /* the queue's ends, -1 when empty */
  int32_t behind;  /* the row queued behind the head, or -1 */
  uint8_t hold;
} SgSnapGroup;
typedef struct {
  SgSimEngine top;     /* the engine's scalars (its array pointers: the engine's own) */
  SgSnapGroup *groups; /* per group */
} SgEngSnap;

void sg_eng_save (const SgSimEngine *e, SgEngSnap *s);
void sg_eng_restore (SgSimEngine *e, const SgEngSnap *s);
void sg_eng_snap_clear (SgEngSnap *s);
/* Gives engine @dst (made by sg_eng_init for the same graph and rates,
 * without node times or a clock log) @src's state, as far as the engine's
 * future depends on it (a finished row's times are not copied again).
 * Rows below *@lo must be the same collectives in both: *@lo is 0, or what
 * the last copy into @dst set, with @dst since back at that state and
 * @src on from it along the same order (when @src goes back to an earlier
 * state, lower *@lo to that state's n_rows). Sets *@lo to @src's n_rows.
 * O(groups + rows finished or started in one of them, not the other +
 * rows from *@lo). */
void sg_eng_copy_state (SgSimEngine *dst, const SgSimEngine *src, int32_t *lo);
/* Collective @c's pair rates beside each kernel slot (n_slots entries):
 * the engine's table, or its global factors. */
void sg_eng_pair_rates (const SgSimEngine *e, SgNodeId c, SgPairRates *out);
/* The memo entry of @c's pair rates (equal entries: equal rates) and, in
 * @out (may be NULL), the rates. */
int32_t sg_eng_rates_entry (const SgSimEngine *e, SgNodeId c, const SgPairRates **out);
/* The rates of memo entry @at (sg_eng_rates_entry), n_slots entries. */
const SgPairRates *sg_eng_entry_rates (const SgSimEngine *e, int32_t at);
/* The rates of issued row @r (n_slots entries): its entry's. */
const SgPairRates *sg_eng_row_rates (const SgSimEngine *e, int32_t r);
/* The entry of @dst's memo with the key and rates of entry @at of
 * @src's (an engine for the same graph and rates), added when @dst has
 * none: rows copied from @src take it. */
int32_t sg_eng_adopt_entry (SgSimEngine *dst, const SgSimEngine *src, int32_t at);
/* Issues collective @c now; returns its row. */
int32_t sg_eng_issue (SgSimEngine *e, SgNodeId c);
/* sg_eng_issue with @c's rates entry @at known (sg_eng_rates_entry). */
int32_t sg_eng_issue_entry (SgSimEngine *e, SgNodeId c, int32_t at);
/* Runs compute node @x of solo @work us on the compute stream. */
void sg_eng_compute (SgSimEngine *e, SgNodeId x, double work);
/* Wait @w on collective @c: stalls until @c ends; returns the stall. */
double sg_eng_wait (SgSimEngine *e, SgNodeId w, SgNodeId c);
/* Places node @x by its role: issues a collective, waits (a wait on a
 * collective not issued, or on no collective, costs nothing), or runs
 * compute for its sg_sched_cost. */
void sg_eng_place (SgSimEngine *e, SgNodeId x);
/* Node @x took no time, now: its node times (when tracked) are now. */
static inline void
sg_eng_instant (SgSimEngine *e, SgNodeId x)
{
  if (e->node_start)
    e->node_start[x] = e->node_end[x] = e->now;
}
/* Runs kernel @x of solo @work > 0 on the compute stream, its slot in
 * kslot (sim.c; sg_eng_compute_in). */
void sg_eng_run_kernel (SgSimEngine *e, SgNodeId x, double work);
/* sg_eng_compute with @x's kernel slot known (sg_cost_contention_slot of
 * @work; anything when @work is 0). */
static inline void
sg_eng_compute_in (SgSimEngine *e, SgNodeId x, double work, int32_t slot)
{
  e->kslot = slot;
  if (work > 0.0)
    sg_eng_run_kernel (e, x, work);
  else
    /* no kernel: nothing holds, nothing runs beside it (and no kernel
     * holds a head between engine calls: n_kheld is 0) */
    sg_eng_instant (e, x);
}
/* What sg_eng_place looks up for node @x of role @role: a collective's
 * rates entry (sg_eng_rates_entry), a wait's collective
 * (sg_node_wait_target, SG_NO_NODE for none); for compute, @kslot (its
 * kernel slot, which the caller knows: sg_cost_contention_slot of its
 * cost, anything at 0 us). */
static inline int32_t
sg_eng_place_arg (const SgSimEngine *e, SgNodeId x, SgRole role, int32_t kslot)
{
  if (role == SG_ROLE_COLL)
    return sg_eng_rates_entry (e, x, NULL);
  return role == SG_ROLE_WAIT ? sg_node_wait_target (e->g, x) : kslot;
}
/* sg_eng_place of node @x with its @role, solo @cost and what it looks
 * up (@arg: sg_eng_place_arg) known. */
static inline void
sg_eng_place_as (SgSimEngine *e, SgNodeId x, SgRole role, double cost, int32_t arg)
{
  switch (role) {
  case SG_ROLE_COLL:
    sg_eng_issue_entry (e, x, arg);
    break;
  case SG_ROLE_WAIT:
    if (arg != SG_NO_NODE && e->row_of[arg] >= 0)
      sg_eng_wait (e, x, arg);
    else
      sg_eng_instant (e, x);
    break;
  case SG_ROLE_COMPUTE:
    sg_eng_compute_in (e, x, cost, arg);
    break;
  }
}
/* Runs every queued collective to its end (compute idle). */
void sg_eng_drain (SgSimEngine *e);
/* True when a compute node of solo @work and kernel slot @slot
 * (sg_cost_contention_slot), run next, would hold a collective the engine
 * holds for the next kernel (its pair's wait_before > 0). */
bool sg_eng_would_hold (const SgSimEngine *e, double work, int32_t slot);
static inline bool
sg_eng_finished (const SgSimEngine *e, SgNodeId c)
{
  int32_t r = e->row_of[c];
  return r >= 0 && e->fin[r];
}

/* The end of sg_simulate, for an engine that placed every node of an
 * order (sim.c): drains @e; @out's step_us, compute_busy_us, every row's
 * status (hidden: exposed below 0.5% of its estimate or 0.01 us; exposed:
 * no compute overlapped it; partial otherwise) and the counts and
 * exposed_us. */
void sg_eng_finish (SgSimEngine *e, SgSimResult *out);
/* @out takes @e's rows and node times (after sg_eng_finish), as a full
 * sg_simulate's result holds them. */
void sg_eng_take (SgSimEngine *e, SgSimResult *out);

/* id -> position for @order (NULL = identity), (transfer full). */
int32_t *sg_sched_positions (const SgGraph *g, const SgNodeId *order);

/* Range add / range max over positions [0, n) (memtree.c). */
typedef struct {
  int64_t *v, *badd; /* values by block, relative to what their block got whole */
  int64_t *t, *d;    /* the tree over the blocks */
  int32_t n, nb, p2;
} SgMemTree;

/* The value of positions past n (below any sum of real values). */
#define SG_MEMTREE_NONE (INT64_MIN / 4)
/* Leaves 0..n-1 start at @v[i]. */
void sg_memtree_init (SgMemTree *s, int32_t n, const uint64_t *v);
/* Leaves 0..n-1 start at @v. */
void sg_memtree_init_fill (SgMemTree *s, int32_t n, int64_t v);
void sg_memtree_clear (SgMemTree *s);
/* Sets position @i to @v. */
void sg_memtree_set (SgMemTree *s, int32_t i, int64_t v);
/* The first position >= @l whose value exceeds @x, or -1. O(log n). */
int32_t sg_memtree_first_above (SgMemTree *s, int32_t l, int64_t x);
/* Adds @v to positions [l, r). */
void sg_memtree_add (SgMemTree *s, int32_t l, int32_t r, int64_t v);
/* Maximum over [l, r) (l < r); *at (if not NULL) gets a position holding it. */
int64_t sg_memtree_max (SgMemTree *s, int32_t l, int32_t r, int32_t *at);

/* --- the list scheduler (problem.c, listsched.c, scheduler.c) ------------------ */

/* The list scheduler's variants and the choice among them (scheduler.c),
 * then, with @polish, the polish pass on the winner; sg_schedule_compute
 * without cfg->exact. @base: the simulation of @g's id order, or NULL (it
 * is made). @sim (may be NULL): the simulation of the returned order (the
 * polish's, or the winning variant's run) but its bound, which
 * sg_sim_result_renumber makes (clear it); zeroed when the input order is
 * kept. */
SgNodeId *sg_schedule_list (const SgGraph *g, const SgConfig *cfg, bool polish,
                            const SgSimResult *base, SgScheduleStats *stats, SgSimResult *sim,
                            GError **error);

/* What every variant shares (problem.c). */
typedef struct {
  const SgGraph *g;
  int32_t n, n_groups;
  uint8_t *role;
  double *cost;
  uint8_t *kslot;    /* compute with a cost -> its kernel slot (sg_eng_compute_in), else 0 */
  uint64_t *alloc;   /* bytes a node allocates (0 for aliases) */
  SgNodeId *root;    /* storage root of every node */
  uint64_t *comm;    /* bytes a collective moves */
  uint64_t *in_bytes; /* collective -> bytes of its input's storage (held until the wait) */
  int32_t *in_end;    /* collective -> input position where that storage dies in the input order */
  /* The storage roots of the collectives' inputs, numbered: collective ->
   * its input's root's number (-1 without an input); n_roots of them. */
  int32_t *in_root;
  int32_t n_roots;
  int32_t *wait_idx; /* wait -> its number among the waits (n_waits), else -1 */
  int32_t n_waits, n_colls; /* a collective's number: due_rank */
  SgNodeId *wait_of; /* collective -> its first wait, or SG_NO_NODE */
  SgNodeId *coll_of; /* wait -> its collective */
  int32_t *deadline; /* collective -> id of the first user of its wait */
  uint8_t *feeds_coll; /* wait -> read by a collective (placed as soon as free) */
  uint8_t *reads_wait; /* node -> reads a wait of a collective (coll_of) */
  int32_t *near_coll; /* compute -> lowest id of a collective it feeds through compute, or n */
  int32_t *near_dead; /* compute -> earliest deadline of a collective it feeds, or n */
  /* Time in the input order, compute only (no stalls): base_us[x] = solo
   * compute before node x (n + 1 entries). Per collective: due_us, when the
   * input order needs its result (its wait's first compute user, or the
   * due of a collective reading it minus that one's work; the end when
   * nothing does), and ready_us, when the input order has its inputs. */
  double *base_us, *due_us, *ready_us;
  /* Per group, its collectives by (due_us, id): gorder[gfirst[g] ..
   * gfirst[g + 1]). */
  SgNodeId *gorder;
  int32_t *gfirst;
  int32_t *due_rank; /* collective -> its index in gorder */
  double *cp_us;     /* longest path from a node's start to the end (solo costs,
                     * comm included) */
  int32_t *cp_rank;  /* rank by cp_us, longest first: the critical-path priority */
  double compute_us; /* all compute work (solo) */
  uint8_t *free_feed; /* an input, or a 0 us view of inputs, that feeds a collective
                       * through such nodes: placed as soon as it is ready */
  uint32_t *ufirst;  /* users CSR (g is const here) */
  SgNodeId *users;
  uint32_t *ifirst;  /* inputs CSR: the graph's, compact (the nodes are 112 bytes) */
  SgNodeId *ins;
  int32_t *group;    /* collective -> its group */
  uint64_t *profile; /* live bytes of the input order, by id */
  uint64_t peak_in, limit;
  double peak_increase; /* limit = peak_in x (1 + peak_increase) */
  bool has_limit;       /* peak_in and limit are made */
  uint64_t max_in_flight;
  int32_t prefetch_limit;
  /* Tests: every step grows the deferred waits' reservations one wait at a
   * time (defer.c's reference rule) instead of through its slot tree. */
  bool defer_each;
  /* Variants give the whole simulation of their order (node times too). */
  bool full_sims;
  /* Per storage root (root), the bytes it allocates
   * (sg_elision_storage_bytes), what a simulation's peak counts
   * (sg_sched_sim_peak); NULL unless the problem was made with sim_peaks. */
  uint64_t *store_bytes;
  /* The collectives' pair rates (sg_eng_rates_entry of an engine without
   * contention factors, as the variants make): collective -> the number
   * of its rates among the distinct ones (rates_at), numbered in order of
   * their first collective by id (rates_first, n_rates of them; -1 for
   * other nodes). An engine
   * that looks up rates_first's collectives in that order first numbers
   * its memo's entries so: a variant then issues with rates_at and never
   * makes a collective's key again. */
  int32_t *rates_at;
  SgNodeId *rates_first;
  int32_t n_rates;
} SgSchedProblem;

/* The whole problem; with @sim_peaks, store_bytes too. */
void sg_sched_problem_init (SgSchedProblem *P, const SgGraph *g, const SgConfig *cfg,
                            bool sim_peaks);
/* The live-bytes peak a simulation of the order with positions @pos gives
 * (sg_graph_peak_bytes of that order), from a problem made with
 * sim_peaks. */
uint64_t sg_sched_sim_peak (const SgSchedProblem *P, const int32_t *pos);
/* The part sg_polish reads: g, n, n_groups, role, cost, kslot, alloc, base_us,
 * compute_us and the limits' settings; the rest stays NULL, root, profile,
 * peak_in and limit too (has_limit false) until sg_sched_problem_live (sg_sched_problem_clear
 * frees either). */
void sg_sched_problem_init_basic (SgSchedProblem *P, const SgGraph *g, const SgConfig *cfg);
/* The input order's live bytes: root, peak_in and limit, and with
 * @profile, profile. */
void sg_sched_problem_live (SgSchedProblem *P, bool profile);
void sg_sched_problem_clear (SgSchedProblem *P);

/* sg_eng_place of node @x on @e (an engine without node times, of
 * P->g's cost model's rates), with the role, cost and kernel slot the
 * problem looked up. */
static inline void
sg_sched_place (const SgSchedProblem *P, SgSimEngine *e, SgNodeId x)
{
  if (P->role[x] == SG_ROLE_COMPUTE)
    sg_eng_compute_in (e, x, P->cost[x], P->kslot[x]);
  else
    sg_eng_place (e, x);
}

/* The inputs of node @x (P->ins, P->ifirst), *@k of them. */
static inline const SgNodeId *
sg_sched_inputs (const SgSchedProblem *P, SgNodeId x, uint32_t *k)
{
  *k = P->ifirst[x + 1] - P->ifirst[x];
  return P->ins + P->ifirst[x];
}

/* The boost that ranks compute by the critical path (cp_rank) instead of
 * the input order. */
#define SG_BOOST_CRITICAL_PATH INT32_MIN

/* Runs one variant: stall-fill @window (0 = never), priority @boost and
 * @shield (a ready non-GEMM node between a just-issued collective and the
 * GEMM that would hold it; only with comm_start_wait > 0), see
 * docs/scheduler.md. Returns the order (transfer full); fills @st's
 * counters and @res's totals (hidden/partial/exposed counts, exposed_us,
 * step_us; no rows; peak_bytes 0: the caller computes the peak of the
 * orders it may keep). With P->full_sims, @res is what sg_simulate gives
 * for the order (clear it) but the peak and the bound (sg_bound_basic):
 * the run drove the simulator's engine through it. */
SgNodeId *sg_sched_run_variant (const SgSchedProblem *P, int32_t window, int32_t boost,
                                bool shield, SgScheduleStats *st, SgSimResult *res);

/* --- the lower bound's pieces (bound.c) ------------------------------------ */

/* Rates of the bound, the least of the simulator's pairs (so the
 * relaxation stays below every order): cs, the least kernel_x of any pair;
 * per group two slots of comm work, 2g for the collectives that do not
 * reduce and 2g + 1 for those that do (a grouping only), each at the least
 * comm_x of its collectives beside any kernel slot. monotone: every pair
 * has kernel_x x (1 - 1/comm_x) < 1 (overlapping never costs more than
 * exposing; the searches' dominance needs it). */
typedef struct {
  double cs;
  int32_t n_groups;
  double *slot; /* 2 x n_groups */
  bool monotone;
} SgBoundRates;

static inline int32_t
sg_bound_slot (const SgNode *n)
{
  SgOpKind k = sg_op_member_kind (n->kind);
  return 2 * n->group + (k == SG_OP_REDUCE_SCATTER || k == SG_OP_ALL_REDUCE ? 1 : 0);
}

/* Whether the bound counts node @n of role @role among its collectives
 * (the rates and the windows' jobs): a collective with a group. */
static inline bool
sg_bound_coll (const SgNode *n, SgRole role)
{
  return role == SG_ROLE_COLL && n->group >= 0;
}

/* The rates of collectives @colls (@n of them) on engine @e: the pairs of
 * its rows for those issued, sg_eng_pair_rates for the others (all of them
 * on an engine of sg_eng_init_rates). Clear with sg_bound_rates_clear. */
void sg_bound_rates_init (SgBoundRates *R, const SgSimEngine *e, const SgNodeId *colls,
                          int32_t n);
void sg_bound_rates_clear (SgBoundRates *R);
/* sg_bound_rates_init by parts: begin, add the @n_slots pairs @pr of each
 * collective (bound slot @slot; a least and a conjunction, so adding the
 * same rates again changes nothing), end. */
void sg_bound_rates_begin (SgBoundRates *R, int32_t n_groups);
void sg_bound_rates_add (SgBoundRates *R, int32_t slot, const SgPairRates *pr, int32_t n_slots);
void sg_bound_rates_end (SgBoundRates *R);

/* One collective of a window bound: solo work, slot, and the time that must
 * pass before it can start (head) and after it ends (tail). */
typedef struct {
  double head, tail, work;
  int32_t slot;
} SgBoundJob;

/* A job's index and its head or tail. */
typedef struct {
  double key;
  int32_t idx;
} SgBoundKeyed;

/* Scratch space of sg_bound_windows, reused between calls. */
typedef struct {
  int32_t cap, cap_slots;
  SgBoundKeyed *by_tail, *by_head, *spare[2]; /* the jobs by descending tail, head */
  int32_t *rank;   /* per job: its tail's rank, 1 for the least */
  int32_t n_tails; /* distinct tails */
  double *fen, *sum;
} SgBoundScratch;

void sg_bound_scratch_clear (SgBoundScratch *s);

/* The shortest time in which @compute us of compute work and @slot_work
 * (2 x n_groups entries) of comm work can all be done, with overlap priced
 * by the rates: a linear relaxation of the simulator's timeline (each group
 * runs one collective at a time; compute beside a running collective
 * progresses at 1/cs, a collective beside compute at 1/ms or 1/mr, alone at
 * 1). O(groups^2). */
double sg_bound_overlap (const SgBoundRates *R, double compute, const double *slot_work);

/* max over windows (h, t) of h + t + sg_bound_overlap (compute - h - t,
 * work of the jobs with head >= h and tail >= t), for (h, t) = (head_j,
 * tail_j), (head_j, 0), (0, tail_j) of every job: every job of a window
 * runs inside [h, step - t], and the compute outside it takes at most
 * h + t. O(n log n x groups). */
double sg_bound_windows (const SgBoundRates *R, double compute, const SgBoundJob *jobs,
                         int32_t n, SgBoundScratch *s);
/* sg_bound_windows by parts, for @n > 0 jobs and groups (window.c runs
 * the two sweeps side by side): room for @n jobs of @n_slots slots; the
 * jobs sorted by descending tail or head (ties by index); the tail ranks
 * and the value of the window of every job (the last (0, t) window: a
 * seed for the sweeps, which skip what cannot pass their best), after the
 * tail sort; the (0, t) windows (after the tail sort) and the (h, 0) and
 * (h, t) windows (after the head sort and the ranks), each the larger of
 * @best and its windows' maximum. The two sweeps use apart parts of @s. */
void sg_bound_windows_reserve (SgBoundScratch *s, int32_t n, int32_t n_slots);
void sg_bound_windows_sort (const SgBoundJob *jobs, int32_t n, bool by_head, SgBoundScratch *s);
void sg_bound_windows_ranks (int32_t n, SgBoundScratch *s);
double sg_bound_windows_seed (const SgBoundRates *R, double compute, const SgBoundJob *jobs,
                              int32_t n, SgBoundScratch *s);
double sg_bound_tail_windows (const SgBoundRates *R, double compute, const SgBoundJob *jobs,
                              int32_t n, SgBoundScratch *s, double best);
double sg_bound_head_windows (const SgBoundRates *R, double compute, const SgBoundJob *jobs,
                              int32_t n, SgBoundScratch *s, double best);

/* Every term of @out but window_us, for sg_simulate (engine @e, every
 * collective issued, gives the rates). O(nodes + edges). */
void sg_bound_basic (const SgGraph *g, const SgSimEngine *e, SgLowerBound *out);
/* @b's lower_bound_us: the largest of its terms. */
void sg_bound_finish (SgLowerBound *b);

/* Collectives per chunk of the reach sums (SgReach; one bit each). */
#define SG_BOUND_REACH_BITS 256

/* One bit per collective of a chunk of the reach sums. */
typedef struct {
  uint64_t w[SG_BOUND_REACH_BITS / 64];
} SgReachMask;

/* A graph's inputs as CSR (adj[first[x] .. first[x + 1]), in the graph's
 * order) with each node's compute work (0 for the roles that are not
 * compute): what the reach sums read. */
typedef struct {
  int32_t n;
  uint32_t *first;
  SgNodeId *adj;
  double *work;
} SgReachCsr;

void sg_reach_csr_clear (SgReachCsr *c);

/* For each of @nc collectives (ascending ids) over a graph's CSR: @head,
 * the compute work of its ancestors, and @tail, that of its descendants
 * (itself excluded). Bit-parallel reachability, SG_BOUND_REACH_BITS
 * collectives at a time: per chunk one pass over the nodes in id order ORs
 * each node's inputs' masks (descendants), one in reverse order ORs each
 * node's mask into its inputs' (ancestors), and each compute node adds its
 * work to the sums of its mask's bits. O(chunks x (nodes + edges)) word
 * operations plus the set bits; a chunk starts only while its passes fit
 * in the budget (word operations) as one thread spends it, and the
 * collectives of the chunks past it get -1 in both. Sums are in a fixed
 * order (runs of equal masks in id order): deterministic, equal to any
 * other order's up to rounding. */
typedef struct {
  const SgReachCsr *c;
  const SgNodeId *colls;
  int32_t nc;
  int64_t budget;
  int32_t n_chunks; /* whose passes alone could fit: passes 0 .. 2 n_chunks - 1 */
  int64_t *flushed; /* per pass: the set bits it flushed, once done */
  gint *done;       /* per chunk: its passes done */
  double *head, *tail;
} SgReach;

/* Starts @r's sums into @head and @tail (@nc each). */
void sg_reach_begin (SgReach *r, const SgReachCsr *c, const SgNodeId *colls, int32_t nc,
                     int64_t budget, double *head, double *tail);
/* Pass @p (2k: chunk k's heads, 2k + 1 its tails) through @mask (c->n of
 * them), unless the chunks done before it show that one thread would have
 * stopped before its chunk. Passes may run in any order, at once on
 * threads of their own masks; with each pass's chunks before it done, none
 * runs in vain. */
void sg_reach_pass (SgReach *r, int32_t p, SgReachMask *mask);
/* After the passes: the chunks one thread would have run (the budget
 * replayed in chunk order) keep their sums, the others' collectives get
 * -1; returns how many collectives got sums (a multiple of
 * SG_BOUND_REACH_BITS, or @nc). */
int32_t sg_reach_end (SgReach *r);

/* @r's window term made on @pool (NULL: this thread) with @budget word
 * operations for the reach sums (sg_lower_bound_refine_pool's is window.c's
 * SUM_BUDGET): past it, collectives keep their path heads and tails. */
void sg_bound_refine_within (const SgGraph *g, SgSimResult *r, int64_t budget, SgPool *pool);

/* The window term of @g (sg_lower_bound_refine's) on @pool (NULL: this
 * thread), its windows taking the graph's compute summed in id order, as
 * sg_bound_basic sums it: the term of any simulation of @g. */
double sg_bound_window_term (const SgGraph *g, SgPool *pool);
/* Sets @r's window term to @window_us (refined) and its bound. */
void sg_bound_set_window (SgSimResult *r, double window_us);

/* --- the search over orders of a window (search.c) ------------------------------ */

/* Collectives a search tracks: the window's and those running at its
 * start. */
#define SG_SEARCH_MAX_COLLS 64
/* Collectives queued at a window's start that a search tracks per group
 * (deeper ones are not compared; a state where one of them started is
 * never pruned as dominated). */
#define SG_SEARCH_QUEUE_DEPTH 16
/* Window orders SG_SEARCH_EARLY keeps. */
#define SG_SEARCH_KEEP 8

typedef enum {
  SG_SEARCH_STEP,     /* the whole graph: least step */
  SG_SEARCH_EARLY,    /* a window: least end clock + collective work left */
} SgSearchGoal;

typedef struct SgSearch SgSearch;

/* Can a window of @m @nodes be searched from @e's state: at most 64
 * decisions (compute with a cost, collectives, waits) and
 * SG_SEARCH_MAX_COLLS collectives of the window or running? */
bool sg_search_fits (const SgGraph *g, const SgSimEngine *e, const SgNodeId *nodes, int32_t m);

/* A search over the orders of @nodes (in a topological order; for
 * SG_SEARCH_EARLY, the order to beat), every other input of which is
 * placed on engine @e, which the search drives and restores. @local: n_nodes
 * entries of -1, used and restored, or NULL (the search keeps its own
 * table of the window's nodes: searches of one graph may run side by
 * side). At most @budget states. */
SgSearch *sg_search_new (const SgGraph *g, SgSimEngine *e, const SgNodeId *nodes, int32_t m,
                         int32_t *local, SgSearchGoal goal, int64_t budget);
void sg_search_free (SgSearch *S);
/* Aims @S at another window of @m @nodes, on the same graph, engine (now
 * at the window's start) and @local: the same search as sg_search_new's,
 * in the buffers of the last one. */
void sg_search_reset (SgSearch *S, const SgNodeId *nodes, int32_t m, SgSearchGoal goal,
                      int64_t budget);
/* Searches; true when it found an order: STEP, better than @incumbent;
 * EARLY, any (@incumbent: the compute work after the window). */
bool sg_search_run (SgSearch *S, double incumbent);
/* EARLY: the orders kept, best score first (m ids each). */
int32_t sg_search_n_kept (const SgSearch *S);
void sg_search_kept (const SgSearch *S, int32_t k, SgNodeId *out);
/* The same as window positions (0 .. m-1 of @nodes). */
void sg_search_kept_positions (const SgSearch *S, int32_t k, int32_t *out);
/* The best order found (m ids). */
void sg_search_result (const SgSearch *S, SgNodeId *out);
/* STEP: its step. */
double sg_search_value (const SgSearch *S);
int64_t sg_search_expanded (const SgSearch *S);
/* Did the search stop at its budget (its result, if any, is then only the
 * best seen)? */
bool sg_search_gave_up (const SgSearch *S);

/* --- the polish pass (polish.c) --------------------------------------------------- */

/* Improves @order window by window with the search of search.c (see
 * polish.c); @res holds the order's step_us and peak_bytes on entry, and
 * nothing to free (it is overwritten). Returns the windows it changed;
 * when > 0, @order was improved and @res is its full simulation (clear
 * it). @P's live bytes are made (sg_sched_problem_live) when a changed
 * order needs the limit and @P has none. */
int32_t sg_polish (SgSchedProblem *P, SgPool *pool, SgNodeId *order, SgSimResult *res);

/* --- the judge (judge.c, judge-events.c, judge-run.c) ------------------------- */

/* What node p is to the timeline: 16 bytes (two records of one per node
 * live through the bucket pass), so the group is 16 bits (no bit fields:
 * the runs read role and group of every node). */
#define EV_GROUPS (1 << 16)
typedef struct {
  double cost;    /* sg_sched_cost */
  int32_t aux;    /* compute: kernel slot; collective: rates entry; wait: the
                   * collective's id when it has a row, else -1 */
  uint16_t group; /* collective (below EV_GROUPS) */
  uint8_t role;
  uint8_t zero; /* 0: no padding, events compare as two words (judge-align.c) */
} SgJudgeEv;
G_STATIC_ASSERT (sizeof (SgJudgeEv) == 16);

typedef struct SgJudgeSnap SgJudgeSnap;   /* judge-run.c */
typedef struct SgJudgeGState SgJudgeGState;
typedef struct SgJudgeKept SgJudgeKept;   /* judge-events.c */

/* One judged graph. */
typedef struct {
  int32_t n;
  SgJudgeEv *ev;
  size_t cap_ev;
  SgJudgeSnap *snaps;
  int32_t n_snaps, cap_snaps;
  SgJudgeGState *gs;
  size_t n_gs, cap_gs;
  SgTlog log;
  double *row_exp;   /* per row (issue order): its exposed time */
  int32_t *row_node; /* per row: its collective */
  int32_t n_rows, cap_rows;
  const void *orig_of; /* a trial graph's rewrite (its origins kept), or NULL */
  int32_t *orig;       /* per node: its origin (sg_graph_trial_origins) */
  size_t cap_orig;
  bool valid;
} SgJudgeRec;

/* Nodes [t, t + len) of a judged graph whose events are those of nodes
 * [r, r + len) of the previous one (judge-align.c). */
typedef struct {
  int32_t t, r, len;
} SgJudgeSeg;
/* A wait at node y of the previous graph, in a segment, whose collective
 * lies outside the segments, as does x, the collective of the new graph's
 * wait: both finished wherever the runs may rejoin (judge-run.c). */
typedef struct SgJudgeGapWait {
  int32_t y, x;
} SgJudgeGapWait;

struct SgSimJudge {
  SgSimEngine e;
  bool have_engine;
  const SgCostModel *cm;
  int32_t n_groups;
  SgJudgeRec rec[2];
  int32_t cur; /* rec[cur ^ 1] is the previous graph's */
  int32_t cap_nodes; /* the engine's row_of */
  SgLiveScratch live; /* the liveness's working arrays */
  int32_t *act; /* rows queued at the checkpoint a run starts from */
  int32_t cap_act;
  SgJudgeKept *kept; /* per base node of the trials of kept_of */
  int32_t cap_kept;
  const void *kept_of;
  SgSimJudgeStats stats;
  SgPool *pool; /* the events in ranges, the liveness beside the run
                 * (sg_sim_judge_set_pool) */
  int32_t ranges_min; /* graphs of fewer nodes: no ranges */
  struct SgJudgeEvRange *ev_ranges; /* per range of the events (sg_judge_events_range) */
  int32_t cap_ev_ranges;
  int32_t *ev_left; /* per range, from its first node: the nodes it left */
  int32_t cap_ev_left;
  SgJudgeSeg *segs; /* where the graph's events are the previous graph's, in order */
  int32_t n_segs, cap_segs;
  struct SgJudgeGapWait *gapw; /* the segments' waits for collectives outside them */
  int32_t n_gapw, cap_gapw;
  int32_t *at; /* per base node of the trials: where it was last seen (judge-align.c) */
  int32_t n_at;
};

/* A range of a judged graph's nodes whose events were made
 * (sg_judge_events_range). */
typedef struct SgJudgeEvRange {
  int32_t bad;    /* the first node without a valid cost, or -1 */
  int32_t differ; /* the first node below m whose event differs from the
                   * previous one's (a left collective excepted), or -1 */
  int32_t n_left, n_coll;
  double compute_us, comm_us; /* its sums, in id order */
} SgJudgeEvRange;

typedef struct {
  SgSimJudge *j;
  const SgGraph *g;
  SgJudgeRec *r;
  const SgJudgeRec *prev;
  const SgNodeId *orig;
  const SgNodeId *prev_orig; /* the previous graph's origins, when of the same
                              * rewrite: its compute events serve again */
  int32_t m, size;
  bool in_order; /* one range: the id-order steps in it */
} SgJudgeEvJob;

#define SG_JUDGE_GROW(ptr, cap, need, type)                                                       \
  do {                                                                                            \
    if ((size_t)(need) > (size_t)(cap)) {                                                         \
      (cap) = MAX ((size_t)(need), 2 * (size_t)(cap));                                            \
      (ptr) = g_renew (type, (ptr), (size_t)(cap));                                               \
    }                                                                                             \
  } while (0)

/* Points @j's engine at @g, growing its arrays for @n_coll rows and @g's
 * nodes; a new cost model or group count starts over. */
void sg_judge_engine_for (SgSimJudge *j, const SgGraph *g, int32_t n_coll);
/* Sizes @r and @j's arrays for @g's events, in ranges on @j's pool when
 * @ranges else in one, and fills @J; returns the count of ranges, the
 * tasks of sg_judge_events_range (an SgPoolFunc on @J). */
int32_t sg_judge_events_setup (SgSimJudge *j, const SgGraph *g, SgJudgeRec *r,
                               const SgJudgeRec *prev, bool ranges, SgJudgeEvJob *J);
void sg_judge_events_range (gpointer data, int32_t task, int32_t worker);
/* Once @J's @n_ranges ranges ran: the steps they left. Returns the count
 * of collectives, -1 at a node without a finite cost >= 0; *@p gets the
 * length of the longest common prefix of events with the previous
 * graph's. */
int32_t sg_judge_events_finish (const SgJudgeEvJob *J, int32_t n_ranges, int32_t *p);
/* compute_us and comm_us of @r's events, in id order. */
void sg_judge_events_sums (const SgJudgeRec *r, double *compute_us, double *comm_us);
/* The segments (@j->segs, in order of both graphs' ids) where the events
 * of @T, those of @g, are those of @R (when valid): their common prefix
 * of @p events, then from the first difference on, resuming after each
 * difference at a node of @T whose origin (sg_graph_trial_origins) @R
 * holds further on when both are trials of one rewrite, else at their
 * common suffix. Keeps @g's origins in @T for the next graph. */
void sg_judge_align (SgSimJudge *j, const SgGraph *g, SgJudgeRec *T, const SgJudgeRec *R,
                     int32_t p);
/* The node of the new graph that node @y of the previous one is, through
 * @j's segments; -1 outside them. */
int32_t sg_judge_map (const SgSimJudge *j, int32_t y);
/* @out's step and exposed time: the run of @g's events (@n_coll
 * collectives, @p common with the previous graph's), from the previous
 * run where they agree. */
void sg_judge_run (SgSimJudge *j, const SgGraph *g, int32_t n_coll, int32_t p, SgSimTotals *out);
