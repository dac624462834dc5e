/* judge.c: the simulator's totals of many graphs that differ little from
 * one another, each simulated only where it differs (sg_sim_judge_*).
 *
 * bucket/ judges every set of buckets it considers on a trial graph that
 * differs from the one before it in a few buckets. The engine's run over a
 * graph's id order depends on each node only through what the node is to
 * the timeline (an event: role, solo cost, kernel slot, group and pair
 * rates of a collective, the collective a wait waits for), so:
 *  - the runs of two graphs agree, bit for bit, over their longest common
 *    prefix of events: the new run starts from the engine state saved at
 *    the last checkpoint (every SNAP_EVERY nodes) before the first
 *    difference;
 *  - past the differences, the graphs end with a common suffix of events.
 *    Where the new run's state there equals the previous run's state at
 *    the same event (every duration: the work left and the pair of each
 *    queued collective, held heads; the clock itself may differ), the rest
 *    of the run performs the same operations on the same durations, and
 *    only the clock's absolute values differ: the previous run's log of
 *    its clock (every advance, every wait's start and end) is replayed
 *    from the new clock, which gives the same floating-point results as
 *    running it (stalls are differences of clock values, as in sim.c).
 * The totals are then those of sg_simulate_totals, exactly; with the
 * validator on, bucket/ checks every one against a full simulation.
 * The events of trial graphs' base nodes are kept by origin
 * (sg_graph_trial_origins): a compute node's kernel slot and a
 * collective's rates entry are reused while what they are functions of
 * (kind, SM count and cost; kind, group, group size and the input's
 * origin) is the same, instead of being looked up again in every trial.
 * The run places each node from its event (sg_eng_place_as, with the
 * rates entry or kernel slot it holds), the same engine operations as
 * sg_eng_place.
 * With a pool (sg_sim_judge_set_pool) a judge's wall time is shorter, its
 * results the same: in one job, the events are made in ranges of nodes
 * (what adds to the engine's rates memo or writes kept entries after
 * them, in id order, before the run), and the run goes beside the events'
 * sums (in id order) and the liveness (in ranges too on four threads or
 * more, graph/liveness.c); a graph below the judge's ranges minimum is
 * one task, its events and its run, beside its liveness in one pass (at
 * 36K nodes the liveness is about half of the events and the run: in
 * ranges it would only add work beside the longer task).
 * Mirrors: incremental re-simulation with checkpoints and convergence
 * detection (the "early termination" of incremental timing analysis).
 * Requires: est_us (estimate/), graphs in topological id order sharing one
 * cost model and groups (fewer than 2^16: the loader allows 1024); the
 * trials of one rewrite, whose base graph's nodes keep their kind, group
 * and output while the judge lives (another rewrite starts the kept
 * events over). Invalidates: nothing.
 */
#include <string.h>

#include "schedule-private.h"

#define SNAP_EVERY 64
/* The fewest nodes a range of the events has (events_range). */
#define EV_RANGE_MIN 256

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
} Ev;
G_STATIC_ASSERT (sizeof (Ev) == 16);

/* The engine between two nodes (no kernel runs then). */
typedef struct {
  int32_t pos;     /* nodes placed */
  int32_t n_rows;  /* collectives issued */
  size_t log_at;   /* clock log entries before it */
  double now, busy_us;
  int32_t n_active, n_held, n_kheld;
  size_t g_first;  /* its per-group state (n_groups entries) */
} Snap;

/* A group's queue at a checkpoint: its head (the only collective of the
 * group that may have started) and how many are queued; the others are
 * the group's later rows in issue order, none started (their work left
 * is their cost). */
typedef struct {
  uint8_t hold;
  int32_t qlen, head_row, head_node;
  double hold_at, head_rem;
} GState;

/* One judged graph. */
typedef struct {
  int32_t n;
  Ev *ev;
  size_t cap_ev;
  Snap *snaps;
  int32_t n_snaps, cap_snaps;
  GState *gs;
  size_t n_gs, cap_gs;
  SgTlog log;
  double *row_exp;   /* per row (issue order): its exposed time */
  int32_t *row_node; /* per row: its collective */
  int32_t n_rows, cap_rows;
  bool valid;
} Rec;

/* What a base node of the trials was to the timeline the last time it was
 * seen (indexed by its id in the base graph, sg_graph_trial_origins): its
 * kernel slot, a pure function of (kernel class, solo cost), the class one
 * of (kind, SM count); or its rates entry, a pure function of (kind, group,
 * group size, bytes, transport), where the bytes are the node's own
 * output's or, for a reduce-scatter, its input's (a base node too: its
 * origin is kept). */
typedef struct {
  union { /* by role: 24 bytes a base node, not 32 */
    struct {
      double cost;      /* the solo cost the slot is for */
      int32_t sm_count;
    }; /* compute */
    struct {
      int32_t in_orig; /* a reduce-scatter's input's origin, else SG_NO_NODE */
      int32_t group, group_size;
    }; /* collective */
  };
  int32_t aux; /* the kernel slot or rates entry; -1: nothing kept */
  int16_t kind;
  uint8_t role;
} Kept;
G_STATIC_ASSERT (sizeof (Kept) == 24);

struct SgSimJudge {
  SgSimEngine e;
  bool have_engine;
  const SgCostModel *cm;
  int32_t n_groups;
  Rec rec[2];
  int32_t cur; /* rec[cur ^ 1] is the previous graph's */
  int32_t *pos; /* identity positions for the liveness */
  int32_t cap_pos;
  SgLiveScratch live; /* the liveness's working arrays */
  int32_t *act; /* rows queued at the checkpoint a run starts from */
  int32_t cap_act;
  Kept *kept;   /* per base node of the trials of kept_of */
  int32_t cap_kept;
  const void *kept_of;
  SgSimJudgeStats stats;
  SgPool *pool; /* the events in ranges, the liveness beside the run
                 * (sg_sim_judge_set_pool) */
  int32_t ranges_min; /* graphs of fewer nodes: no ranges */
  struct EvRange *ev_ranges; /* per range of the events (events_range) */
  int32_t cap_ev_ranges;
  int32_t *ev_left; /* per range, from its first node: the nodes it left */
  int32_t cap_ev_left;
};

SgSimJudge *
sg_sim_judge_new (void)
{
  return g_new0 (SgSimJudge, 1);
}

static void
rec_clear (Rec *r)
{
  g_free (r->ev);
  g_free (r->snaps);
  g_free (r->gs);
  g_free (r->log.v);
  g_free (r->row_exp);
  g_free (r->row_node);
  memset (r, 0, sizeof *r);
}

void
sg_sim_judge_free (SgSimJudge *j)
{
  if (!j)
    return;
  if (j->have_engine)
    sg_eng_clear (&j->e);
  rec_clear (&j->rec[0]);
  rec_clear (&j->rec[1]);
  g_free (j->pos);
  sg_live_scratch_clear (&j->live);
  g_free (j->act);
  g_free (j->kept);
  g_free (j->ev_ranges);
  g_free (j->ev_left);
  g_free (j);
}

const SgSimJudgeStats *
sg_sim_judge_stats (const SgSimJudge *j)
{
  return &j->stats;
}

#define GROW(ptr, cap, need, type)                                                               \
  do {                                                                                           \
    if ((size_t)(need) > (size_t)(cap)) {                                                        \
      (cap) = MAX ((size_t)(need), 2 * (size_t)(cap));                                           \
      (ptr) = g_renew (type, (ptr), (size_t)(cap));                                              \
    }                                                                                            \
  } while (0)

/* --- the engine, sized for @g ------------------------------------------------ */

/* Points the engine at @g, growing its arrays for @n_coll rows and @g's
 * nodes; a new cost model or group count starts over. */
static void
engine_for (SgSimJudge *j, const SgGraph *g, int32_t n_coll)
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

/* --- events ------------------------------------------------------------------- */

/* Does @k hold the slot of compute node @nd at solo cost @cost (its kind,
 * SM count and cost the same)? */
static inline bool
kept_slot_of (const Kept *k, const SgNode *nd, double cost)
{
  return k->aux >= 0 && k->role == SG_ROLE_COMPUTE && k->kind == (int16_t)nd->kind
         && k->sm_count == nd->sm_count && memcmp (&k->cost, &cost, sizeof cost) == 0;
}

static inline void
keep_slot (Kept *k, const SgNode *nd, double cost, int32_t slot)
{
  *k = (Kept){ .cost = cost, .aux = slot, .sm_count = nd->sm_count, .kind = (int16_t)nd->kind,
               .role = SG_ROLE_COMPUTE };
}

/* The origin of single-member collective @x's input; SG_NO_NODE for none
 * or a new node. */
static inline SgNodeId
input_origin (const SgGraph *g, SgNodeId x, const SgNodeId *orig)
{
  uint32_t n;
  const SgNodeId *in = sg_node_inputs (g, x, &n);
  return n > 0 ? orig[in[0]] : SG_NO_NODE;
}

/* Does @k hold the rates entry of collective @x (its kind, group and
 * input the same)? */
static inline bool
kept_entry_of (const Kept *k, const SgGraph *g, SgNodeId x, const SgNodeId *orig)
{
  const SgNode *nd = &g->nodes[x];
  return k->aux >= 0 && k->role == SG_ROLE_COLL && k->kind == (int16_t)nd->kind
         && k->group == nd->group && k->group_size == nd->group_size
         && (k->in_orig == SG_NO_NODE || input_origin (g, x, orig) == k->in_orig);
}

/* The rates entry of collective @x, from what its origin @o kept when its
 * kind, group and input are the same (kept only for a single-member
 * collective other than a permute: its bytes are then its own output's or
 * its input's). */
G_ALWAYS_INLINE static inline int32_t
coll_entry (SgSimJudge *j, const SgGraph *g, SgNodeId x, SgNodeId o, const SgNodeId *orig)
{
  const SgNode *nd = &g->nodes[x];
  Kept *k = o != SG_NO_NODE ? &j->kept[o] : NULL;
  if (k && kept_entry_of (k, g, x, orig))
    return k->aux;
  const int32_t at = sg_eng_rates_entry (&j->e, x, NULL);
  if (!k || nd->kind == SG_OP_COLLECTIVE_PERMUTE || sg_op_is_coalesced (nd->kind))
    return at;
  int32_t in_orig = SG_NO_NODE;
  if (nd->kind == SG_OP_REDUCE_SCATTER) {
    in_orig = input_origin (g, x, orig);
    if (in_orig == SG_NO_NODE)
      return at; /* a new node's bytes: nothing kept */
  }
  *k = (Kept){ .aux = at, .in_orig = in_orig, .group = nd->group, .group_size = nd->group_size,
               .kind = (int16_t)nd->kind, .role = SG_ROLE_COLL };
  return at;
}

/* The base nodes' kept events serve the trials of one rewrite (the base
 * graph fixed while the judge lives); another rewrite starts over. */
static const SgNodeId *
kept_for (SgSimJudge *j, const SgGraph *g)
{
  const SgNodeId *orig = sg_graph_trial_origins (g);
  if (!orig)
    return NULL;
  if (j->kept_of != (const void *)g->trial_of) {
    for (int32_t i = 0; i < j->cap_kept; i++)
      j->kept[i].aux = -1;
    j->kept_of = g->trial_of;
  }
  /* origins are ids of the base graph */
  const int32_t need = sg_rewrite_graph (g->trial_of)->n_nodes;
  if (need > j->cap_kept) {
    int32_t was = j->cap_kept;
    j->cap_kept = MAX (need, 2 * j->cap_kept);
    j->kept = g_renew (Kept, j->kept, (size_t)j->cap_kept);
    for (int32_t i = was; i < j->cap_kept; i++)
      j->kept[i].aux = -1;
  }
  return orig;
}

static inline bool
ev_same (const Ev *a, const Ev *b)
{
  return a->role == b->role && memcmp (&a->cost, &b->cost, sizeof (double)) == 0
         && a->group == b->group && a->aux == b->aux;
}

/* --- events, in ranges of nodes ----------------------------------------------------- */

/* @g's events are made in ranges of nodes (a pool's tasks; one range
 * without a pool or below the judge's ranges minimum), exactly as in one
 * pass in id order: a node's event is a pure function of the node and
 * what the base nodes kept before the trial, but for a collective whose
 * entry is not kept (sg_eng_rates_entry adds to the engine's memo, whose
 * entries are numbered in the order they are added) and for the kept
 * slots to write. Those steps (ev_in_order) go in id order: in the range
 * itself when it is the only one, else after the ranges (events_finish),
 * to which each range leaves its nodes. The integer results combine in
 * range order; the floating-point sums are the only range's, or made in
 * id order over the events (events_sums). */
typedef struct EvRange {
  int32_t bad;    /* the first node without a valid cost, or -1 */
  int32_t differ; /* the first node below m whose event differs from the
                   * previous one's (a left collective excepted), or -1 */
  int32_t n_left, n_coll;
  double compute_us, comm_us; /* its sums, in id order */
} EvRange;

typedef struct {
  SgSimJudge *j;
  const SgGraph *g;
  Rec *r;
  const Rec *prev;
  const SgNodeId *orig;
  int32_t m, size;
  bool in_order; /* one range: the id-order steps in it */
} EvJob;

/* The step of node @x's event @v that goes in id order: a collective's
 * rates entry (what its origin kept, when that is for the same kind,
 * group and input), a compute node's slot to keep. */
static inline void
ev_in_order (SgSimJudge *j, const SgGraph *g, SgNodeId x, const SgNodeId *orig, Ev *v)
{
  const SgNodeId o = orig ? orig[x] : SG_NO_NODE;
  if (v->role == SG_ROLE_COLL)
    v->aux = coll_entry (j, g, x, o, orig);
  else
    keep_slot (&j->kept[o], &g->nodes[x], v->cost, v->aux);
}

static void
events_range (gpointer data, int32_t task, int32_t worker)
{
  (void)worker;
  const EvJob *J = data;
  const SgGraph *g = J->g;
  const Kept *kept = J->j->kept;
  int32_t a, b;
  sg_range_of (task, J->size, g->n_nodes, &a, &b);
  EvRange *out = &J->j->ev_ranges[task];
  *out = (EvRange){ -1, -1, 0, 0, 0.0, 0.0 };
  double compute = 0.0, comm = 0.0;
  for (SgNodeId x = a; x < b; x++) {
    const SgNode *nd = &g->nodes[x];
    if (!sg_sim_cost_ok (nd->est_us)) {
      out->bad = x;
      return;
    }
    const SgNodeId o = J->orig ? J->orig[x] : SG_NO_NODE;
    Ev *v = &J->r->ev[x];
    v->role = (uint8_t)sg_sched_role (nd);
    v->cost = sg_sched_cost (nd);
    v->aux = -1;
    v->group = 0;
    bool later = false; /* its id-order step to take */
    if (v->role == SG_ROLE_COLL) {
      v->group = (uint16_t)nd->group;
      out->n_coll++;
      comm += v->cost;
      if (o != SG_NO_NODE && kept_entry_of (&kept[o], g, x, J->orig))
        v->aux = kept[o].aux;
      else
        later = true;
    } else if (v->role == SG_ROLE_WAIT) {
      SgNodeId c = sg_node_wait_target (g, x);
      if (c != SG_NO_NODE && sg_sched_role (&g->nodes[c]) == SG_ROLE_COLL)
        v->aux = c;
    } else {
      compute += v->cost;
      if (v->cost > 0.0) {
        if (o != SG_NO_NODE && kept_slot_of (&kept[o], nd, v->cost)) {
          v->aux = kept[o].aux;
        } else {
          v->aux = sg_cost_contention_slot (J->j->e.pairs, g, x, v->cost);
          later = o != SG_NO_NODE; /* its slot to keep */
        }
      }
    }
    if (later && J->in_order) {
      ev_in_order (J->j, g, x, J->orig, v);
    } else if (later) {
      J->j->ev_left[a + out->n_left++] = x; /* this range's part */
      if (v->role == SG_ROLE_COLL)
        continue; /* its event is made after the ranges */
    }
    if (out->differ < 0 && x < J->m && !ev_same (v, &J->prev->ev[x]))
      out->differ = x;
  }
  out->compute_us = compute, out->comm_us = comm;
}

/* Sizes @r and the judge's arrays for @g's events, in ranges when
 * @ranges (on the judge's pool) else in one, and fills @J; returns the
 * count of ranges (events_range's tasks). */
static int32_t
events_setup (SgSimJudge *j, const SgGraph *g, Rec *r, const Rec *prev, bool ranges, EvJob *J)
{
  const int32_t n = g->n_nodes;
  GROW (r->ev, r->cap_ev, (size_t)MAX (n, 1), Ev);
  r->n = n;
  *J = (EvJob){ j, g, r, prev, kept_for (j, g), prev->valid ? MIN (n, prev->n) : 0, MAX (n, 1),
                true };
  if (ranges)
    J->size = sg_pool_range_size (j->pool, n, EV_RANGE_MIN);
  const int32_t n_ranges = sg_ranges (n, J->size);
  J->in_order = n_ranges == 1;
  if (!J->in_order)
    GROW (j->ev_left, j->cap_ev_left, n, int32_t);
  GROW (j->ev_ranges, j->cap_ev_ranges, n_ranges, EvRange);
  return n_ranges;
}

/* Once @J's @n_ranges ranges ran: the id-order steps of the nodes they
 * left (below the first node without a cost). Returns the count of
 * collectives, -1 at a node whose est_us is not a finite cost >= 0
 * (sg_sim_check_costs names it); *@p gets the length of the longest
 * common prefix of events with the previous graph's (valid, or 0). */
static int32_t
events_finish (const EvJob *J, int32_t n_ranges, int32_t *p)
{
  SgSimJudge *j = J->j;
  int32_t bad = -1, differ = J->m, n_coll = 0;
  for (int32_t t = 0; t < n_ranges && bad < 0; t++) {
    const EvRange *o = &j->ev_ranges[t];
    bad = o->bad;
    n_coll += o->n_coll;
    if (o->differ >= 0 && o->differ < differ)
      differ = o->differ;
    for (int32_t i = 0; i < o->n_left; i++) {
      const SgNodeId x = j->ev_left[(size_t)t * (size_t)J->size + (size_t)i];
      Ev *v = &J->r->ev[x];
      ev_in_order (j, J->g, x, J->orig, v);
      if (v->role == SG_ROLE_COLL && x < differ && !ev_same (v, &J->prev->ev[x]))
        differ = x;
    }
  }
  if (bad >= 0)
    return -1;
  *p = differ;
  return n_coll;
}

/* The sums of the events of @r: compute_us and comm_us, in id order. */
static void
events_sums (const Rec *r, double *compute_us, double *comm_us)
{
  double compute = 0.0, comm = 0.0;
  for (int32_t x = 0; x < r->n; x++) {
    const Ev *v = &r->ev[x];
    if (v->role == SG_ROLE_COLL)
      comm += v->cost;
    else if (v->role != SG_ROLE_WAIT)
      compute += v->cost;
  }
  *compute_us = compute;
  *comm_us = comm;
}

/* Event @t (at @it of the new graph) and @r (at @ir of the previous one)
 * in their common suffix: equal, a wait's collective at the same distance
 * behind (or the same node of the common prefix, below @p). */
static inline bool
ev_same_shifted (const Ev *t, int32_t it, const Ev *r, int32_t ir, int32_t p)
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
place_ev (SgSimEngine *e, SgNodeId x, const Ev *v)
{
  /* a 0 us compute node's aux is -1 */
  sg_eng_place_as (e, x, (SgRole)v->role, v->cost,
                   v->role != SG_ROLE_COMPUTE || v->cost > 0.0 ? v->aux : 0);
}

/* --- checkpoints --------------------------------------------------------------- */

static void
snap_save (Rec *r, const SgSimEngine *e, int32_t pos)
{
  GROW (r->snaps, r->cap_snaps, r->n_snaps + 1, Snap);
  int32_t ng = MAX (e->n_groups, 1);
  Snap *s = &r->snaps[r->n_snaps++];
  *s = (Snap){ pos, e->n_rows, r->log.n, e->now, e->busy_us, e->n_active, e->n_held, e->n_kheld,
               r->n_gs };
  GROW (r->gs, r->cap_gs, r->n_gs + (size_t)ng, GState);
  for (int32_t grp = 0; grp < ng; grp++) {
    GState *gs = &r->gs[r->n_gs++];
    int32_t h = e->ghead[grp];
    *gs = (GState){ e->hold[grp], 0, h, h >= 0 ? e->rows[h].node : -1, e->hold_at[grp],
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
next_in_group (const Rec *r, int32_t grp, int32_t w)
{
  for (w++; w < r->n_rows && r->ev[r->row_node[w]].group != grp; w++)
    ;
  return w;
}

/* Puts the engine in state @s of record @r. Rows issued before it and not
 * queued in it are finished (the engine's arrays hold the run @r was made
 * by, which drained every collective). The queued rows go to @act. */
static int32_t
snap_restore (SgSimEngine *e, const Rec *r, const Snap *s, int32_t **act, int32_t *cap_act)
{
  e->now = s->now;
  e->busy_us = s->busy_us;
  e->n_active = s->n_active, e->n_held = s->n_held, e->n_kheld = s->n_kheld;
  e->n_rows = s->n_rows;
  e->in_kernel = false;
  e->kleft = 0.0;
  int32_t n_act = 0;
  for (int32_t grp = 0; grp < MAX (e->n_groups, 1); grp++) {
    const GState *gs = &r->gs[s->g_first + (size_t)grp];
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
state_equals (const SgSimEngine *e, const Rec *R, const Snap *s, int32_t p, int32_t s_prev,
              int32_t d)
{
  if (e->n_active != s->n_active || e->n_held != s->n_held || e->n_kheld != s->n_kheld)
    return false;
  for (int32_t grp = 0; grp < MAX (e->n_groups, 1); grp++) {
    const GState *gs = &R->gs[s->g_first + (size_t)grp];
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
rows_reserve (Rec *T, int32_t n)
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
copy_prefix (Rec *T, const Rec *R, int32_t k, int32_t n_groups)
{
  const Snap *s = &R->snaps[k];
  GROW (T->snaps, T->cap_snaps, k + 1, Snap);
  memcpy (T->snaps, R->snaps, sizeof (Snap) * (size_t)(k + 1));
  T->n_snaps = k + 1;
  size_t g_end = s->g_first + (size_t)n_groups;
  GROW (T->gs, T->cap_gs, g_end, GState);
  memcpy (T->gs, R->gs, sizeof (GState) * g_end);
  T->n_gs = g_end;
  GROW (T->log.v, T->log.cap, MAX (s->log_at, 1), SgTlogEntry);
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
replay (SgSimJudge *j, Rec *T, const Rec *R, int32_t si, int32_t p, int32_t s_prev, int32_t d,
        double *end)
{
  SgSimEngine *e = &j->e;
  const Snap *s = &R->snaps[si];
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
      const Snap *rs = &R->snaps[next_snap++];
      GROW (T->snaps, T->cap_snaps, T->n_snaps + 1, Snap);
      Snap *ts = &T->snaps[T->n_snaps++];
      *ts = (Snap){ rs->pos + d, rs->n_rows + row_delta, T->log.n, now, NAN, rs->n_active,
                    rs->n_held, rs->n_kheld, T->n_gs };
      for (int32_t grp = 0; grp < MAX (e->n_groups, 1); grp++) {
        GState g = R->gs[rs->g_first + (size_t)grp];
        if (g.qlen > 0) {
          int32_t x = map_node (g.head_node, p, s_prev, d);
          g.head_node = x;
          g.head_row = x < conv ? e->row_of[x] : g.head_row + row_delta;
        }
        GROW (T->gs, T->cap_gs, T->n_gs + 1, GState);
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

/* A judge that found a node without a cost (make_events: -1): @error
 * names it; false. */
static bool
judge_failed (SgSimJudge *j, const SgGraph *g, GError **error)
{
  j->rec[j->cur].valid = false; /* its events are half made */
  bool ok = sg_sim_check_costs (g, error);
  g_assert (!ok);
  return false;
}

/* sg_sim_judge_totals' step and exposed time: the run of @g's events
 * (judge_events: @n_coll collectives, *@p common with the previous
 * graph's). */
static void
judge_run (SgSimJudge *j, const SgGraph *g, int32_t n_coll, int32_t p, SgSimTotals *out)
{
  Rec *T = &j->rec[j->cur], *R = &j->rec[j->cur ^ 1];
  engine_for (j, g, n_coll);
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

/* With a pool, one job: the events in ranges (tasks 0 .. n_ranges-1),
 * then the run (after the nodes the ranges left), the events' sums and
 * the liveness side by side. Tasks are taken in index order, so the run
 * and the sums wait only for ranges already taken, which run to their
 * end; the liveness needs no events. Each task writes only its own. */
typedef struct {
  SgSimJudge *j;
  const SgGraph *g;
  const SgNodeId *roots;
  const uint64_t *alloc;
  EvJob ev;
  int32_t n_ranges;
  gint ranges_done; /* atomic */
  int32_t n_coll;   /* -1: a node without a cost */
  SgSimTotals *out;
  uint64_t peak;
} Side;

/* @g's peak live bytes, in @j's liveness scratch when @roots and @alloc
 * are given. */
static uint64_t
judge_peak (SgSimJudge *j, const SgGraph *g, const SgNodeId *roots, const uint64_t *alloc)
{
  return roots && alloc ? sg_graph_liveness_in (g, j->pos, NULL, roots, alloc, &j->live)
                        : sg_graph_liveness (g, j->pos, NULL, roots, alloc);
}

static void
await_ranges (Side *s)
{
  while (g_atomic_int_get (&s->ranges_done) < s->n_ranges)
    sg_cpu_relax ();
}

/* Once the events' ranges ran: the id-order steps they left, then the
 * run. */
static void
events_then_run (Side *s)
{
  int32_t p = 0;
  s->n_coll = events_finish (&s->ev, s->n_ranges, &p);
  if (s->n_coll >= 0)
    judge_run (s->j, s->g, s->n_coll, p, s->out);
}

static void
side_task (gpointer data, int32_t task, int32_t worker)
{
  Side *s = data;
  if (task < s->n_ranges) {
    events_range (&s->ev, task, worker);
    g_atomic_int_inc (&s->ranges_done);
    return;
  }
  switch (task - s->n_ranges) {
  case 0:
    await_ranges (s);
    events_then_run (s);
    break;
  case 1:
    await_ranges (s);
    events_sums (s->ev.r, &s->out->compute_us, &s->out->comm_us);
    break;
  default:
    s->peak = judge_peak (s->j, s->g, s->roots, s->alloc);
    break;
  }
}

/* The events in one range: they and the run (task 0), and the liveness
 * (task 1). */
static void
whole_task (gpointer data, int32_t task, int32_t worker)
{
  Side *s = data;
  if (task == 1) {
    s->peak = judge_peak (s->j, s->g, s->roots, s->alloc);
    return;
  }
  events_range (&s->ev, 0, worker);
  const EvRange *one = &s->j->ev_ranges[0];
  s->out->compute_us = one->compute_us;
  s->out->comm_us = one->comm_us;
  events_then_run (s);
}

void
sg_sim_judge_set_pool (SgSimJudge *j, SgPool *pool, int32_t ranges_min)
{
  j->pool = pool;
  j->ranges_min = ranges_min;
}

bool
sg_sim_judge_totals (SgSimJudge *j, const SgGraph *g, const SgNodeId *roots,
                     const uint64_t *alloc, SgSimTotals *out, GError **error)
{
  g_return_val_if_fail (j && g && out && g->n_groups < EV_GROUPS, false);
  memset (out, 0, sizeof *out);
  /* the engine first: the events read its rates memo; the liveness its
   * positions (sized here for @g, not again in the run) */
  engine_for (j, g, 0);
  Side s = { .j = j, .g = g, .roots = roots, .alloc = alloc, .out = out };
  const bool ranges = sg_pool_size (j->pool) > 1 && g->n_nodes >= j->ranges_min;
  s.n_ranges = events_setup (j, g, &j->rec[j->cur], &j->rec[j->cur ^ 1], ranges, &s.ev);
  j->live.pool = ranges ? j->pool : NULL; /* one minimum for both */
  /* without @roots and @alloc the liveness analyses @g itself: after */
  const bool beside = roots && alloc && sg_pool_size (j->pool) > 1;
  if (s.n_ranges == 1)
    sg_pool_run (beside ? j->pool : NULL, 2, whole_task, &s); /* NULL: in order */
  else
    sg_pool_run (j->pool, s.n_ranges + (beside ? 3 : 2), side_task, &s);
  if (s.n_coll < 0)
    return judge_failed (j, g, error);
  out->peak_bytes = beside || s.n_ranges == 1 ? s.peak : judge_peak (j, g, roots, alloc);
  return true;
}
