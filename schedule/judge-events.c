/* judge-events.c: what each node of a judged graph is to the timeline,
 * its event, for the judge's run (judge.c, judge-run.c).
 *
 * An event is a node's role and solo cost, and its kernel slot (compute),
 * its rates entry (collective) or the collective it waits for (wait).
 * The events of trial graphs' base nodes are kept by origin
 * (sg_graph_trial_origins): a compute node's kernel slot and a
 * collective's rates entry are reused while what they are functions of
 * (kind, SM count and cost; kind, group, group size and the input's
 * origin) is the same, instead of being looked up again in every trial.
 * A trial graph after another of the same rewrite holds most of its base
 * nodes again, shifted by what was added or removed before them: a base
 * compute node's whole event is the previous graph's for its origin (found
 * where the last one was found, or where the alignment last saw it) while
 * its cost is the same bit for bit (ev_reuse), without looking at its kind,
 * kept slot or class again; so is, in a run of such nodes at one shift, a
 * base collective's of the same cost whose rates entry is the same (its
 * bytes its own output's, or a reduce-scatter's input's origin the one it
 * kept), and a base wait's with the collective it waits for now
 * (ev_copy_other).
 * The events are made in ranges of nodes on the judge's pool, or in one,
 * with the same results (below). Each event is compared with the previous
 * graph's for their longest common prefix.
 * Requires: est_us (estimate/), the judge's engine sized for the graph
 * (sg_judge_engine_for: the rates memo). Invalidates: nothing.
 */
#include <string.h>

#include "schedule-private.h"

/* The fewest nodes a range of the events has (sg_judge_events_range). */
#define EV_RANGE_MIN 256

/* What a base node of the trials was to the timeline the last time it was
 * seen (indexed by its id in the base graph, sg_graph_trial_origins): its
 * kernel slot, a pure function of (kernel class, solo cost), the class one
 * of (kind, SM count); or its rates entry, a pure function of (kind, group,
 * group size, bytes, transport), where the bytes are the node's own
 * output's or, for a reduce-scatter, its input's (a base node too: its
 * origin is kept). */
struct SgJudgeKept {
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
};
G_STATIC_ASSERT (sizeof (SgJudgeKept) == 24);


/* --- events ------------------------------------------------------------------- */

/* Does @k hold the slot of compute node @nd at solo cost @cost (its kind,
 * SM count and cost the same)? */
static inline bool
kept_slot_of (const SgJudgeKept *k, const SgNode *nd, double cost)
{
  return k->aux >= 0 && k->role == SG_ROLE_COMPUTE && k->kind == (int16_t)nd->kind
         && k->sm_count == nd->sm_count && memcmp (&k->cost, &cost, sizeof cost) == 0;
}

static inline void
keep_slot (SgJudgeKept *k, const SgNode *nd, double cost, int32_t slot)
{
  *k = (SgJudgeKept){ .cost = cost, .aux = slot, .sm_count = nd->sm_count,
                      .kind = (int16_t)nd->kind, .role = SG_ROLE_COMPUTE };
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
kept_entry_of (const SgJudgeKept *k, const SgGraph *g, SgNodeId x, const SgNodeId *orig)
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
  SgJudgeKept *k = o != SG_NO_NODE ? &j->kept[o] : NULL;
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
  *k = (SgJudgeKept){ .aux = at, .in_orig = in_orig, .group = nd->group,
                      .group_size = nd->group_size, .kind = (int16_t)nd->kind,
                      .role = SG_ROLE_COLL };
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
    j->kept = g_renew (SgJudgeKept, j->kept, (size_t)j->cap_kept);
    for (int32_t i = was; i < j->cap_kept; i++)
      j->kept[i].aux = -1;
  }
  return orig;
}

static inline bool
ev_same (const SgJudgeEv *a, const SgJudgeEv *b)
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
 * itself when it is the only one, else after the ranges (sg_judge_events_finish),
 * to which each range leaves its nodes. The integer results combine in
 * range order; the floating-point sums are the only range's, or made in
 * id order over the events (sg_judge_events_sums). */
/* The step of node @x's event @v that goes in id order: a collective's
 * rates entry (what its origin kept, when that is for the same kind,
 * group and input), a compute node's slot to keep. */
static inline void
ev_in_order (SgSimJudge *j, const SgGraph *g, SgNodeId x, const SgNodeId *orig, SgJudgeEv *v)
{
  const SgNodeId o = orig ? orig[x] : SG_NO_NODE;
  if (v->role == SG_ROLE_COLL)
    v->aux = coll_entry (j, g, x, o, orig);
  else
    keep_slot (&j->kept[o], &g->nodes[x], v->cost, v->aux);
}

/* Compute node @x's event, when it is a base node whose event the
 * previous graph holds (@J->prev_orig): that event, found where the last
 * one found was (*@d nodes further on there) or where align last saw its
 * origin (j->at, a hint the previous graph's origins confirm). A compute
 * event is a function of the node's kind, SM count and solo cost (its
 * kernel slot), the same for one origin (judge.c's Requires) but for
 * est_us, which the caller may set per trial: it must be the solo cost
 * kept, bit for bit (a node of a class of free nodes keeps 0 and matches
 * only at 0). */
typedef struct {
  const SgGraph *g;
  const SgJudgeKept *kept;
  const SgNodeId *orig, *prev_orig, *at;
  const SgJudgeEv *prev_ev;
  const SgNode *nodes;
  int32_t prev_n, n_at;
} Reuse;

G_ALWAYS_INLINE static inline bool
ev_reuse (const Reuse U, SgNodeId x, int32_t *d, SgJudgeEv *v)
{
  const SgNodeId o = U.orig[x];
  if (o < 0)
    return false;
  int32_t y = x + *d;
  if (y < 0 || y >= U.prev_n || U.prev_orig[y] != o) {
    if (o >= U.n_at)
      return false;
    y = U.at[o];
    if (y < 0 || y >= U.prev_n || U.prev_orig[y] != o)
      return false;
    *d = y - x;
  }
  const SgJudgeEv r = U.prev_ev[y];
  const double est = U.nodes[x].est_us;
  if (r.role != SG_ROLE_COMPUTE || memcmp (&est, &r.cost, sizeof est) != 0)
    return false;
  *v = r;
  return true;
}

/* The aux of wait @x's event: the collective it waits for, or -1. */
static inline int32_t
wait_aux (const SgGraph *g, SgNodeId x)
{
  const SgNodeId c = sg_node_wait_target (g, x);
  return c != SG_NO_NODE && sg_sched_role (&g->nodes[c]) == SG_ROLE_COLL ? c : -1;
}

/* Base node @x's event when the previous graph's @r, of the same origin,
 * is a collective's or a wait's, into @v; false when it must be made.
 * A collective's event is a function of its kind, group, solo cost and
 * rates key (kind, group, group size, bytes, transport), the same for
 * one origin (judge.c's Requires) when its cost is the same bit for bit
 * and its bytes are its own output's, or a reduce-scatter's input's of
 * the origin it kept (kept_entry_of, for the entry @r holds), not a
 * permute's nor a coalesced one's (its entry is then the same row of the
 * memo, which only grows). A wait's is @r's (role, cost 0) but for the
 * collective it waits for (wait_aux), and its own est_us must still be a
 * cost (ev_make's check). At the shift @d = 0 (the common prefix is found
 * on that) the event must equal @r. */
G_ALWAYS_INLINE static inline bool
ev_copy_other (const Reuse U, SgNodeId x, int32_t d, const SgJudgeEv *r, SgJudgeEv *v)
{
  const SgNode *nd = &U.nodes[x];
  const double est = nd->est_us;
  if (r->role == SG_ROLE_COLL) {
    const SgOpKind kind = nd->kind;
    if (memcmp (&est, &r->cost, sizeof est) != 0 || kind == SG_OP_COLLECTIVE_PERMUTE
        || sg_op_is_coalesced (kind))
      return false;
    if (kind == SG_OP_REDUCE_SCATTER) {
      const SgJudgeKept *k = &U.kept[U.orig[x]];
      if (k->aux != r->aux || !kept_entry_of (k, U.g, x, U.orig))
        return false;
    }
    *v = *r;
    return true;
  }
  if (!sg_sim_cost_ok (est))
    return false;
  const int32_t aux = wait_aux (U.g, x);
  if (d == 0 && aux != r->aux)
    return false;
  *v = *r;
  v->aux = aux;
  return true;
}

/* From @x on (below @end), the base nodes whose events the previous graph
 * holds at the shift @d, in one go: a compute node's while its cost is the
 * same bit for bit (ev_reuse), a collective's or a wait's as
 * ev_copy_other says; their costs summed in id order into *@compute and
 * *@comm, the collectives counted in *@n_coll; returns the first node that
 * is not one. */
G_ALWAYS_INLINE static inline SgNodeId
ev_copy_run (const Reuse U, SgNodeId x, SgNodeId end, int32_t d, SgJudgeEv *ev, double *compute,
             double *comm, int32_t *n_coll)
{
  if (x + d < 0)
    return x;
  end = MIN (end, U.prev_n - d);
  double sum = *compute;
  for (; x < end; x++) {
    const SgNodeId o = U.orig[x];
    const SgJudgeEv *r = &U.prev_ev[x + d];
    if (o < 0 || U.prev_orig[x + d] != o)
      break;
    if (r->role == SG_ROLE_COMPUTE) {
      const double est = U.nodes[x].est_us;
      if (memcmp (&est, &r->cost, sizeof est) != 0)
        break;
      ev[x] = *r;
      sum += r->cost;
      continue;
    }
    if (!ev_copy_other (U, x, d, r, &ev[x]))
      break;
    if (r->role == SG_ROLE_COLL) {
      *comm += r->cost;
      ++*n_coll;
    }
  }
  *compute = sum;
  return x;
}

/* Node @x's event into @v, but for the id-order step (ev_in_order) that
 * it returns true for; false with out->bad set at a node without a cost. */
G_ALWAYS_INLINE static inline bool
ev_make (const SgJudgeEvJob *J, const SgJudgeKept *kept, SgNodeId x, SgJudgeEv *v,
         SgJudgeEvRange *out, double *compute, double *comm, bool *later)
{
  const SgGraph *g = J->g;
  const SgNode *nd = &g->nodes[x];
  if (!sg_sim_cost_ok (nd->est_us)) {
    out->bad = x;
    return false;
  }
  const SgNodeId o = J->orig ? J->orig[x] : SG_NO_NODE;
  *v = (SgJudgeEv){ .cost = sg_sched_cost (nd), .aux = -1, .role = (uint8_t)sg_sched_role (nd) };
  *later = false;
  if (v->role == SG_ROLE_COLL) {
    v->group = (uint16_t)nd->group;
    out->n_coll++;
    *comm += v->cost;
    if (o != SG_NO_NODE && kept_entry_of (&kept[o], g, x, J->orig))
      v->aux = kept[o].aux;
    else
      *later = true;
  } else if (v->role == SG_ROLE_WAIT) {
    v->aux = wait_aux (g, x);
  } else {
    *compute += v->cost;
    if (v->cost > 0.0) {
      if (o != SG_NO_NODE && kept_slot_of (&kept[o], nd, v->cost)) {
        v->aux = kept[o].aux;
      } else {
        v->aux = sg_cost_contention_slot (J->j->e.pairs, g, x, v->cost);
        *later = o != SG_NO_NODE; /* its slot to keep */
      }
    }
  }
  return true;
}

/* Node @x's event @v after ev_make: its id-order step in the range when
 * it is the only one, else left to sg_judge_events_finish; false when a
 * collective's event is left whole (not to compare yet). */
G_ALWAYS_INLINE static inline bool
ev_step (const SgJudgeEvJob *J, SgJudgeEvRange *out, int32_t a, SgNodeId x, SgJudgeEv *v,
         bool later)
{
  if (!later)
    return true;
  if (J->in_order) {
    ev_in_order (J->j, J->g, x, J->orig, v);
    return true;
  }
  J->j->ev_left[a + out->n_left++] = x; /* this range's part */
  return v->role != SG_ROLE_COLL;       /* its event is made after the ranges */
}

void
sg_judge_events_range (gpointer data, int32_t task, int32_t worker)
{
  (void)worker;
  const SgJudgeEvJob *J = data;
  const SgJudgeKept *kept = J->j->kept;
  int32_t a, b;
  sg_range_of (task, J->size, J->g->n_nodes, &a, &b);
  SgJudgeEvRange *out = &J->j->ev_ranges[task];
  *out = (SgJudgeEvRange){ -1, -1, 0, 0, 0.0, 0.0 };
  SgJudgeEv *ev = J->r->ev;
  const SgJudgeEv *prev = J->prev->ev;
  double compute = 0.0, comm = 0.0;
  bool later;
  int32_t d = 0; /* where the previous graph's events were last found */
  const Reuse U = { J->g, J->j->kept, J->orig, J->prev_orig, J->j->at, J->prev->ev, J->g->nodes, J->prev->n,
                    J->j->n_at };
  SgNodeId x = a;
  /* up to the first difference from the previous graph's events */
  for (const int32_t m = MIN (b, J->m); x < m; x++) {
    /* at the same places the copied events are the previous ones */
    if (J->prev_orig && d == 0 && (x = ev_copy_run (U, x, m, 0, ev, &compute, &comm, &out->n_coll)) == m)
      break;
    if (J->prev_orig && ev_reuse (U, x, &d, &ev[x])) {
      compute += ev[x].cost;
      later = false;
    } else if (!ev_make (J, kept, x, &ev[x], out, &compute, &comm, &later)) {
      return;
    }
    if (ev_step (J, out, a, x, &ev[x], later) && !ev_same (&ev[x], &prev[x])) {
      out->differ = x++;
      break;
    }
  }
  for (; x < b; x++) {
    if (J->prev_orig && (x = ev_copy_run (U, x, b, d, ev, &compute, &comm, &out->n_coll)) == b)
      break;
    if (J->prev_orig && ev_reuse (U, x, &d, &ev[x]))
      compute += ev[x].cost;
    else if (!ev_make (J, kept, x, &ev[x], out, &compute, &comm, &later))
      return;
    else
      ev_step (J, out, a, x, &ev[x], later);
  }
  out->compute_us = compute, out->comm_us = comm;
}

/* Sizes @r and the judge's arrays for @g's events, in ranges when
 * @ranges (on the judge's pool) else in one, and fills @J; returns the
 * count of ranges (sg_judge_events_range's tasks). */
int32_t
sg_judge_events_setup (SgSimJudge *j, const SgGraph *g, SgJudgeRec *r, const SgJudgeRec *prev,
                       bool ranges, SgJudgeEvJob *J)
{
  const int32_t n = g->n_nodes;
  SG_JUDGE_GROW (r->ev, r->cap_ev, (size_t)MAX (n, 1), SgJudgeEv);
  r->n = n;
  const SgNodeId *orig = kept_for (j, g);
  const bool again = orig && prev->valid && prev->orig_of == (const void *)g->trial_of;
  *J = (SgJudgeEvJob){ j, g, r, prev, orig, again ? prev->orig : NULL,
                       prev->valid ? MIN (n, prev->n) : 0, MAX (n, 1), true };
  if (ranges)
    J->size = sg_pool_range_size (j->pool, n, EV_RANGE_MIN);
  const int32_t n_ranges = sg_ranges (n, J->size);
  J->in_order = n_ranges == 1;
  if (!J->in_order)
    SG_JUDGE_GROW (j->ev_left, j->cap_ev_left, n, int32_t);
  SG_JUDGE_GROW (j->ev_ranges, j->cap_ev_ranges, n_ranges, SgJudgeEvRange);
  return n_ranges;
}

/* Once @J's @n_ranges ranges ran: the id-order steps of the nodes they
 * left (below the first node without a cost). Returns the count of
 * collectives, -1 at a node whose est_us is not a finite cost >= 0
 * (sg_sim_check_costs names it); *@p gets the length of the longest
 * common prefix of events with the previous graph's (valid, or 0). */
int32_t
sg_judge_events_finish (const SgJudgeEvJob *J, int32_t n_ranges, int32_t *p)
{
  SgSimJudge *j = J->j;
  int32_t bad = -1, differ = J->m, n_coll = 0;
  for (int32_t t = 0; t < n_ranges && bad < 0; t++) {
    const SgJudgeEvRange *o = &j->ev_ranges[t];
    bad = o->bad;
    n_coll += o->n_coll;
    if (o->differ >= 0 && o->differ < differ)
      differ = o->differ;
    for (int32_t i = 0; i < o->n_left; i++) {
      const SgNodeId x = j->ev_left[(size_t)t * (size_t)J->size + (size_t)i];
      SgJudgeEv *v = &J->r->ev[x];
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
void
sg_judge_events_sums (const SgJudgeRec *r, double *compute_us, double *comm_us)
{
  double compute = 0.0, comm = 0.0;
  for (int32_t x = 0; x < r->n; x++) {
    const SgJudgeEv *v = &r->ev[x];
    if (v->role == SG_ROLE_COLL)
      comm += v->cost;
    else if (v->role != SG_ROLE_WAIT)
      compute += v->cost;
  }
  *compute_us = compute;
  *comm_us = comm;
}

