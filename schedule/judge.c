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
 *  - between and past the differences, the graphs' events are the same
 *    over segments, shifted by what was added or removed before
 *    (judge-align.c). Where the new run's state at a checkpoint of the
 *    previous run in a segment equals the previous run's state there
 *    (every duration: the work left and the pair of each queued
 *    collective, held heads, its nodes mapped through the segments; the
 *    clock itself may differ), the run over the rest of the segment
 *    performs the same operations on the same durations, and only the
 *    clock's absolute values differ: the previous run's log of its clock
 *    (every advance, every wait's start and end) is replayed from the new
 *    clock, which gives the same floating-point results as running it
 *    (stalls are differences of clock values, as in sim.c), up to the
 *    segment's last checkpoint, where the engine takes the previous run's
 *    state and the run goes on (or to the end, for the segment that ends
 *    both graphs). A wait in a segment may wait for a collective outside
 *    the segments in both graphs (a changed bucket's): no such collective
 *    can be queued in equal states, so it has finished and the wait waits
 *    for nothing in both runs.
 * The totals are then those of sg_simulate_totals, exactly; with the
 * validator on, bucket/ checks every one against a full simulation.
 * The events of trial graphs' base nodes are kept by origin
 * (sg_graph_trial_origins): a compute node's kernel slot and a
 * collective's rates entry are reused while what they are functions of
 * (kind, SM count and cost; kind, group, group size and the input's
 * origin) is the same, instead of being looked up again in every trial,
 * and a base compute node's whole event is the previous trial's for its
 * origin while its cost is the same (a collective's and a wait's too, while
 * the same: judge-events.c). The liveness is that of the id order
 * (graph/liveness.c: one reverse pass, no positions).
 * The run places each node from its event (sg_eng_place_as, with the
 * rates entry or kernel slot it holds), the same engine operations as
 * sg_eng_place. The events are made in judge-events.c, the segments in
 * judge-align.c, the run in judge-run.c; here the judge's lifetime and
 * its job on the pool.
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

SgSimJudge *
sg_sim_judge_new (void)
{
  return g_new0 (SgSimJudge, 1);
}

static void
rec_clear (SgJudgeRec *r)
{
  g_free (r->ev);
  g_free (r->snaps);
  g_free (r->gs);
  g_free (r->log.v);
  g_free (r->row_exp);
  g_free (r->row_node);
  g_free (r->orig);
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
  sg_live_scratch_clear (&j->live);
  g_free (j->act);
  g_free (j->kept);
  g_free (j->ev_ranges);
  g_free (j->ev_left);
  g_free (j->segs);
  g_free (j->gapw);
  g_free (j->at);
  g_free (j);
}

const SgSimJudgeStats *
sg_sim_judge_stats (const SgSimJudge *j)
{
  return &j->stats;
}

/* A judge that found a node without a cost (sg_judge_events_finish: -1): @error
 * names it; false. */
static bool
judge_failed (SgSimJudge *j, const SgGraph *g, GError **error)
{
  j->rec[j->cur].valid = false; /* its events are half made */
  bool ok = sg_sim_check_costs (g, error);
  g_assert (!ok);
  return false;
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
  SgJudgeEvJob ev;
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
  return roots && alloc ? sg_graph_liveness_in (g, NULL, NULL, roots, alloc, &j->live)
                        : sg_graph_liveness (g, NULL, NULL, roots, alloc);
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
  s->n_coll = sg_judge_events_finish (&s->ev, s->n_ranges, &p);
  if (s->n_coll >= 0)
    sg_judge_run (s->j, s->g, s->n_coll, p, s->out);
}

static void
side_task (gpointer data, int32_t task, int32_t worker)
{
  Side *s = data;
  if (task < s->n_ranges) {
    sg_judge_events_range (&s->ev, task, worker);
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
    sg_judge_events_sums (s->ev.r, &s->out->compute_us, &s->out->comm_us);
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
  sg_judge_events_range (&s->ev, 0, worker);
  const SgJudgeEvRange *one = &s->j->ev_ranges[0];
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
  /* the engine first: the events read its rates memo (sized here for
   * @g, not again in the run) */
  sg_judge_engine_for (j, g, 0);
  Side s = { .j = j, .g = g, .roots = roots, .alloc = alloc, .out = out };
  const bool ranges = sg_pool_size (j->pool) > 1 && g->n_nodes >= j->ranges_min;
  s.n_ranges = sg_judge_events_setup (j, g, &j->rec[j->cur], &j->rec[j->cur ^ 1], ranges, &s.ev);
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
