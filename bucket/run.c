/* run.c: the bucket pass's driver (sg_bucket_run).
 *
 * Sets up what the searches share (the bucketable collectives and their
 * keys, the augmented graph without hiding edges, the rewrite of the
 * trial graphs),
 * simulates the unbucketed graph, runs the searches of the mode
 * (auto: the greedy of bucket.c, once more flat-only when it grouped a
 * bucket, and the per-layer buckets of layers.c; per-layer: those alone),
 * keeps the set with the shortest predicted step (never one that
 * lengthens it, never one past the peak limit, in auto mode), lowers each
 * bucket flat or grouped (lower.c: the rule, then one flip at a time
 * judged by the simulator), applies it (what sg_bucket_apply does, with
 * the rewrite of the trials: sg_bucket_trials_commit), costs the
 * new nodes and records the hiding relation of the bucketed order. The simulator is the judge:
 * its cost model prices the new nodes, with the copies codegen elides
 * (graph/elide.c) at zero; its verdicts (verdict.c) are kept by the
 * lowered buckets they judged (a set met again is not simulated again),
 * and those a search will ask about next are judged ahead on the pool's
 * threads, within a memory budget.
 * Mirrors: the pass structure of PyTorch's bucketing passes (collect
 * candidates, decide, one graph surgery at the end).
 * Requires: estimate (g->cost_model, est_us), a topological order (the
 * scheduler's), implicit edges of the scheduler (optional).
 * Invalidates: node ids, users; adds pack/unpack nodes or coalesced
 * collectives with their getitems. Keeps the simulation of the bucketed
 * order with the graph (schedule/kept.c).
 */
#include "bucket-private.h"

#include <math.h>
#include <string.h>


/* A worker that judges trials (verdict.c) holds a trial graph, a
 * rewrite's working arrays, a judge and a fork of the pools: about this
 * many bytes per node of the graph (measured: 570 at 6.7K nodes, 640 at
 * 36K). Together the workers beside the pass's own may hold the budget; a
 * graph too large for one more has none (the searches run one after the
 * other and judge nothing ahead). At most AHEAD_MAX_WORKERS, one per
 * thread of a 16-core server: there, on the 6.7K-node graph, the pass
 * took 51-54 ms with 16 workers, 55-63 with 12, 61-70 with 8 (six runs
 * each; peak RSS 69, 53, 37-39 MB); on the 36K-node one, which the
 * budget holds to 11, 277-311 ms against 285-340 with 8 (265-272 MB
 * against 197-207). */
#define AHEAD_BYTES_PER_NODE 700
#define AHEAD_BUDGET_BYTES ((uint64_t)256 << 20)
#define AHEAD_MAX_WORKERS 16

void
sg_bucket_specs_free (SgBucketSpec *specs, int32_t n)
{
  for (int32_t i = 0; i < n; i++)
    g_free (specs[i].members);
  g_free (specs);
}

bool
sg_bucket_cands_independent (SgAug *aug, const SgBucketCand *a, const SgBucketCand *b)
{
  return !sg_aug_reaches (aug, a->c, b->c) && !sg_aug_reaches (aug, b->c, a->c)
         && !sg_aug_reaches (aug, a->w, b->w) && !sg_aug_reaches (aug, b->w, a->w);
}

static int32_t
key_index (GArray *keys, SgBucketKey k)
{
  for (guint i = 0; i < keys->len; i++) {
    SgBucketKey *o = &g_array_index (keys, SgBucketKey, i);
    if (o->kind == k.kind && o->group == k.group && o->dtype == k.dtype && o->reduce == k.reduce)
      return (int32_t)i;
  }
  g_array_append_val (keys, k);
  return (int32_t)keys->len - 1;
}

static int32_t
count_collectives (const SgGraph *g)
{
  int32_t n = 0;
  for (SgNodeId i = 0; i < g->n_nodes; i++)
    n += sg_op_is_collective (g->nodes[i].kind);
  return n;
}

/* The totals of the simulation of @g's order (kept with the graph: the
 * scheduler's, handed on). */
static bool
simulate_graph (SgGraph *g, SgBucketEval *ev, GError **error)
{
  const SgSimResult *r = sg_graph_simulation (g, error);
  if (!r)
    return false;
  ev->exposed_us = r->exposed_us;
  ev->step_us = r->step_us;
  ev->peak_bytes = r->peak_bytes;
  return true;
}

/* The hiding relation of the bucketed order, as the scheduler records it
 * (schedule/scheduler.c): collective -> first hiding compute, last hiding
 * compute -> wait. Only called when buckets changed the graph. */
static void
record_hiding (SgGraph *g, const SgSimResult *r)
{
  sg_implicit_edges_clear (g, SG_EDGE_HIDE_START);
  sg_implicit_edges_clear (g, SG_EDGE_HIDE_WAIT);
  for (int32_t i = 0; i < r->n_rows; i++) {
    const SgCollRow *row = &r->rows[i];
    if (row->hidden_by == SG_NO_NODE)
      continue;
    sg_implicit_edge_add (g, row->node, row->hidden_by, SG_EDGE_HIDE_START);
    if (row->wait != SG_NO_NODE && row->last_hiding != SG_NO_NODE)
      sg_implicit_edge_add (g, row->last_hiding, row->wait, SG_EDGE_HIDE_WAIT);
  }
}

/* The augmented graph of @g without its hiding edges: the hiding relation
 * is the unbucketed overlap, which the simulator judges instead
 * (docs/bucketing.md). It reads @g's inputs, so it must go before @g
 * changes; @g's edges are swapped out for the filtered list only while it
 * is built. */
SgAug *
sg_bucket_constraints (SgGraph *g)
{
  GArray *all = g->implicit_edges;
  if (!all)
    return sg_aug_new (g);
  GArray *kept = g_array_sized_new (FALSE, FALSE, sizeof (SgImplicitEdge), all->len);
  for (guint i = 0; i < all->len; i++) {
    const SgImplicitEdge *e = &g_array_index (all, SgImplicitEdge, i);
    if (e->kind != SG_EDGE_HIDE_START && e->kind != SG_EDGE_HIDE_WAIT)
      g_array_append_vals (kept, e, 1);
  }
  g->implicit_edges = kept;
  SgAug *a = sg_aug_new (g);
  g->implicit_edges = all;
  g_array_unref (kept);
  return a;
}

/* The bucketable collectives of @g in id order, with their keys. */
static void
collect_cands (SgBucketSearch *s)
{
  SgGraph *g = s->g;
  sg_graph_fill_users (g);
  s->cands = g_new (SgBucketCand, (size_t)g->n_nodes + 1);
  g_autoptr (GArray) keys = g_array_new (FALSE, FALSE, sizeof (SgBucketKey));
  for (SgNodeId i = 0; i < g->n_nodes; i++) {
    const SgNode *n = &g->nodes[i];
    SgNodeId w;
    if (!sg_op_is_collective (n->kind) || !sg_bucket_member_check (g, i, &w, NULL))
      continue;
    uint64_t bytes = sg_node_comm_bytes (g, i);
    if (bytes == 0)
      continue;
    SgBucketKey k = { n->kind, n->group, n->meta.dtype, n->reduce };
    s->cands[s->n_cands++] = (SgBucketCand){ i, w, key_index (keys, k), bytes };
  }
  s->n_keys = (int32_t)keys->len;
}

/* Runs the searches of cfg's mode; returns the specs to apply (transfer
 * full; NULL with *n_specs 0 for none, and with @error set on failure) and
 * their evaluation in *@ev (*@base for none; per-layer mode: its
 * evaluation when it had one). */
static SgBucketSpec *
choose (SgBucketSearch *s, const SgBucketEval *base, SgBucketEval *ev, int32_t *n_specs,
        GError **error)
{
  SgBucketStats *st = s->st;
  SgBucketChoice layer = { .ev = *base, .source = SG_BUCKET_FROM_PER_LAYER };
  layer.specs = sg_bucket_per_layer (s, &layer.n, &st->layers);
  bool layer_ok = layer.n > 0 && sg_bucket_evaluate (s, layer.specs, layer.n, &layer.ev);
  if (layer_ok) {
    st->per_layer_step_us = layer.ev.step_us;
    st->per_layer_peak_bytes = layer.ev.peak_bytes;
  }
  if (st->mode == SG_BUCKET_MODE_PER_LAYER || !layer_ok
      || layer.ev.peak_bytes > s->peak_limit) {
    if (st->mode == SG_BUCKET_MODE_PER_LAYER && layer_ok) {
      st->source = SG_BUCKET_FROM_PER_LAYER;
      *n_specs = layer.n;
      *ev = layer.ev;
      return layer.specs;
    }
    sg_bucket_specs_free (layer.specs, layer.n);
    layer.specs = NULL, layer.n = 0, layer_ok = false;
    if (st->mode == SG_BUCKET_MODE_PER_LAYER) {
      *n_specs = 0;
      return NULL;
    }
  }
  SgBucketChoice greedy = { .source = SG_BUCKET_FROM_GREEDY };
  if (!sg_bucket_searches (s, base, &greedy, &layer, layer_ok, error)) {
    sg_bucket_specs_free (greedy.specs, greedy.n);
    sg_bucket_specs_free (layer.specs, layer.n);
    return NULL;
  }
  st->greedy_step_us = greedy.ev.step_us;
  /* the unbucketed graph, the greedy's buckets, the per-layer buckets:
   * the shortest predicted step wins (ties: fewer collectives) */
  SgBucketChoice best = { .specs = g_new0 (SgBucketSpec, 1), .ev = *base };
  sg_bucket_keep_better (&best, greedy);
  if (layer_ok) {
    st->per_layer_refined_step_us = layer.ev.step_us;
    sg_bucket_keep_better (&best, layer);
  }
  st->source = best.n > 0 ? best.source : SG_BUCKET_FROM_NONE;
  *n_specs = best.n;
  *ev = best.ev;
  return best.specs;
}

void
sg_bucket_search_clear (SgBucketSearch *s)
{
  g_clear_pointer (&s->aug, sg_aug_free);
  g_clear_pointer (&s->replicas, sg_bucket_replicas_free);
  s->home = NULL;
  g_clear_pointer (&s->base_alloc, g_free);
  g_clear_pointer (&s->lower_memo, g_hash_table_unref);
  g_clear_pointer (&s->eval_memo, g_hash_table_unref);
  if (s->memo_lock) {
    g_mutex_clear (s->memo_lock);
    g_clear_pointer (&s->memo_lock, g_free);
  }
  g_clear_pointer (&s->cands, g_free);
}

void
sg_bucket_search_init (SgBucketSearch *s, SgGraph *g, const SgConfig *cfg, SgBucketStats *st,
                       const SgBucketEval *base)
{
  *s = (SgBucketSearch){ .g = g, .cfg = cfg, .st = st, .cap = st->cap_bytes,
                         .lowering = st->lowering,
                         .flat_only = st->lowering == SG_BUCKET_LOWERING_FLAT };
  double grow = cfg ? cfg->max_peak_increase : SG_SCHEDULE_DEFAULT_MAX_PEAK_INCREASE;
  s->peak_limit = (uint64_t)((double)base->peak_bytes * (1.0 + MAX (grow, 0.0)));
  s->base_step_us = base->step_us;
  collect_cands (s);
  s->aug = sg_bucket_constraints (g);
  SgPool *pool = cfg ? cfg->pool : NULL;
  int32_t budget = (int32_t)MIN (
      AHEAD_MAX_WORKERS,
      1 + AHEAD_BUDGET_BYTES / (AHEAD_BYTES_PER_NODE * (uint64_t)MAX (g->n_nodes, 1)));
  s->replicas = sg_bucket_replicas_new (g, cfg, budget);
  s->home = sg_bucket_replica_take (s->replicas); /* the one on @g */
  s->owner = sg_pool_worker (pool);
  s->ahead = budget;
  s->lower_memo = sg_bucket_memo_new (NULL);
  s->eval_memo = sg_bucket_memo_new (g_free);
  s->memo_lock = g_new (GMutex, 1);
  g_mutex_init (s->memo_lock);
  s->base_alloc = g_new (uint64_t, (size_t)MAX (g->n_nodes, 1));
  s->base_costed = true;
  for (SgNodeId i = 0; i < g->n_nodes; i++) {
    s->base_alloc[i] = sg_node_alloc_bytes (g, i);
    s->base_costed = s->base_costed && g->nodes[i].est_src != SG_COST_NONE;
  }
}

bool
sg_bucket_run (SgGraph *g, const SgConfig *cfg, SgBucketStats *st, GError **error)
{
  g_return_val_if_fail (g && st, false);
  memset (st, 0, sizeof *st);
  st->ran = cfg ? cfg->bucket : true;
  st->mode = cfg ? cfg->bucket_mode : SG_BUCKET_MODE_AUTO;
  st->lowering = cfg ? cfg->bucket_lowering : SG_BUCKET_LOWERING_AUTO;
  st->cap_bytes = cfg && cfg->bucket_cap_bytes ? cfg->bucket_cap_bytes
                                               : SG_BUCKET_DEFAULT_CAP_BYTES;
  st->greedy_step_us = st->per_layer_step_us = st->per_layer_refined_step_us = NAN;
  st->collectives_before = st->collectives_after = count_collectives (g);
  if (!sg_graph_cost_model (g)) {
    g_set_error (error, SG_BUCKET_ERROR, SG_BUCKET_ERROR_SIM,
                 "bucket: the graph has no cost model (run the estimate pass first)");
    return false;
  }
  SgBucketEval base;
  if (!simulate_graph (g, &base, error))
    return false;
  st->exposed_before_us = st->exposed_after_us = base.exposed_us;
  st->step_before_us = st->step_after_us = base.step_us;
  st->peak_before_bytes = st->peak_after_bytes = base.peak_bytes;
  if (!st->ran)
    return true;

  SgBucketSearch s;
  sg_bucket_search_init (&s, g, cfg, st, &base);
  int32_t ns = 0;
  GError *err = NULL;
  SgBucketEval chosen = base;
  SgBucketSpec *specs = choose (&s, &base, &chosen, &ns, &err);
  if (!err) { /* each bucket flat or grouped: the rule, then the simulator */
    sg_bucket_lower_specs (&s, specs, ns);
    if (st->mode == SG_BUCKET_MODE_AUTO)
      sg_bucket_relower (&s, specs, ns, &chosen);
  }
  /* The chosen buckets are applied with the trials of the worker on the
   * graph itself (sg_bucket_trials_commit): the last trial's memory and
   * order serve the final layout; the other workers go first. */
  SgBucketTrials *trials = !err && ns > 0 ? g_steal_pointer (&s.home->trial) : NULL;
  sg_bucket_search_clear (&s);
  if (err) {
    g_propagate_error (error, err);
    return false;
  }

  /* The chosen buckets, applied to the graph itself; its simulation is
   * kept with it for the next pass. */
  const SgSimResult *r = NULL;
  bool ok = ns == 0 || sg_bucket_trials_commit (trials, specs, ns, error);
  sg_bucket_trials_free (trials);
  if (ok && ns > 0) {
    sg_cost_new_nodes (sg_graph_cost_model (g), g, NULL, 0, cfg ? cfg->pool : NULL);
    ok = (r = sg_graph_simulation (g, error)) != NULL;
  }
  sg_bucket_specs_free (specs, ns);
  if (!ok)
    return false;
  if (ns > 0) {
    st->exposed_after_us = r->exposed_us;
    st->step_after_us = r->step_us;
    st->peak_after_bytes = r->peak_bytes;
    record_hiding (g, r);
  }
  st->collectives_after = count_collectives (g);
  sg_bucket_collect_infos (g, st);
  st->buckets = st->n_infos;
  for (int32_t i = 0; i < st->n_infos; i++)
    st->grouped += st->infos[i].grouped;
  return true;
}
