/* bucket.c: the greedy, simulator-checked bucketing pass.
 *
 * Mirrors the idea of PyTorch 2.11's overlap-preserving bucketer
 * (torch/_inductor/fx_passes/overlap_preserving_bucketer.py): walk the
 * collectives in the scheduled order, grow one open bucket per (kind, group,
 * dtype, reduce op) with the next collective of that key, and keep a merge
 * only when the augmented graph stays acyclic, the bucket stays under the
 * byte cap, the timeline simulator's exposed_us does not rise and, when
 * exposure does not fall, step_us does not rise. Ours judges every merge by
 * re-simulating the whole bucketed graph (contention included) rather than
 * by interval bookkeeping. Scale: above 256 candidates merges are tried in
 * batches (one simulation per batch, then windows that halve on refusal
 * and grow on success) behind cheap screens, within a simulation budget
 * (docs/bucketing.md). Trial graphs are the rewrite itself, built as
 * trial graphs of the graph rewrite API (sg_bucket_trial), not copies.
 * Requires: estimate (g->cost_model, est_us), a topological order (the
 * scheduler's), implicit edges of the scheduler (optional).
 * Invalidates: node ids, users; adds pack/unpack nodes.
 */
#include "bucket-private.h"

#include <string.h>

/* At most this many members per bucket (bounds the pairwise cycle checks). */
#define MAX_MEMBERS 64
/* Batch mode stops proposing merges of a key after this many refusals in a
 * row (PyTorch's bucketer gives up after 20 failed merges, for all keys). */
#define GIVE_UP_AFTER 8
/* Candidates up to this count are decided one merge per simulation. */
#define SEQUENTIAL_LIMIT 256
/* Batches of larger graphs: about this many simulations when all succeed;
 * fewer (down to 4) above 100k nodes, so the pass stays near linear. */
#define TARGET_BATCHES 16
#define BATCH_NODES 100000
/* Batch mode gives each batch of B proposals max(4, log2(B) / 2)
 * simulations (halving down to one proposal takes log2 B) plus what
 * earlier batches left unused, so a batch that needs a long search cannot
 * starve the later ones; the pass simulates at most that times the
 * batches. Proposals left undecided are refused (refused.budget). */
#define SIM_BUDGET_PER_BATCH 4
#define EXPOSED_EPS_US 1e-9

typedef struct {
  SgOpKind kind;
  int32_t group;
  SgDtype dtype;
  SgReduceOp reduce;
} Key;

typedef struct {
  SgNodeId c, w;
  int32_t key;
  uint64_t bytes;
} Cand;

typedef struct {
  GArray *members; /* candidate indices (accepted), ascending */
  GArray *tent;    /* candidate indices proposed in the open batch */
  uint64_t bytes;  /* accepted + tentative */
} Bucket;

typedef struct {
  SgGraph *g;
  const SgConfig *cfg;
  SgBucketStats *st;
  SgAug *aug;
  SgBucketPredict *pred; /* batch mode only */
  SgRewrite *trial;      /* the rewrite every trial graph is built with */
  uint64_t *mem_cap;     /* per key: smallest bucket the memory limit refused */
  int32_t *fails;        /* per key: refused proposals since its last accepted one */
  int32_t budget;        /* simulations left (batch mode), or -1: unlimited */
  int32_t batch_left;    /* of those, for the open batch (batch mode) */
  int32_t per_batch;     /* simulations each batch adds to batch_left */
  Cand *cands;
  int32_t n_cands;
  GArray *buckets; /* Bucket */
  /* proposals of the open batch: candidate index and target bucket */
  GArray *prop_c, *prop_b;
  double cur_exposed, cur_step;
  uint64_t cap;
  uint64_t peak_limit; /* bytes: the unbucketed peak x (1 + max_peak_increase) */
} Ctx;

void
sg_bucket_cost_new_nodes (SgGraph *g)
{
  const SgCostModel *cm = sg_graph_cost_model (g);
  for (SgNodeId i = 0; i < g->n_nodes; i++) {
    SgNode *n = &g->nodes[i];
    if (n->est_src == SG_COST_NONE)
      n->est_us = cm ? sg_cost_node_us (cm, g, i, &n->est_src) : 0.0;
  }
}

/* Specs of the accepted buckets plus proposals [lo, hi) of the batch, in
 * @base's ids. (transfer full) members arrays of the specs. */
static SgBucketSpec *
build_specs (Ctx *x, int32_t lo, int32_t hi, int32_t *n_specs)
{
  guint nb = x->buckets->len;
  g_autofree GArray **extra = g_new0 (GArray *, nb + 1);
  for (int32_t p = lo; p < hi; p++) {
    int32_t b = g_array_index (x->prop_b, int32_t, p);
    if (!extra[b])
      extra[b] = g_array_new (FALSE, FALSE, sizeof (int32_t));
    g_array_append_val (extra[b], g_array_index (x->prop_c, int32_t, p));
  }
  SgBucketSpec *specs = g_new0 (SgBucketSpec, nb + 1);
  int32_t ns = 0;
  for (guint b = 0; b < nb; b++) {
    Bucket *bk = &g_array_index (x->buckets, Bucket, b);
    guint na = bk->members->len, ne = extra[b] ? extra[b]->len : 0;
    if (na + ne >= 2) {
      SgBucketSpec *s = &specs[ns++];
      s->members = g_new (SgNodeId, na + ne);
      /* accepted members precede every proposal in candidate order */
      for (guint i = 0; i < na; i++)
        s->members[s->n_members++] = x->cands[g_array_index (bk->members, int32_t, i)].c;
      for (guint i = 0; i < ne; i++)
        s->members[s->n_members++] = x->cands[g_array_index (extra[b], int32_t, i)].c;
    }
    if (extra[b])
      g_array_unref (extra[b]);
  }
  *n_specs = ns;
  return specs;
}

static void
specs_free (SgBucketSpec *specs, int32_t n)
{
  for (int32_t i = 0; i < n; i++)
    g_free (specs[i].members);
  g_free (specs);
}

/* Applies @specs to @g (a copy or the graph itself), costs the new nodes and
 * simulates. False with @error when the rewrite or the simulator refuses. */
static bool
apply_and_simulate (SgGraph *g, const SgBucketSpec *specs, int32_t n_specs, SgSimResult *r,
                    GError **error)
{
  if (!sg_bucket_apply (g, specs, n_specs, error))
    return false;
  sg_bucket_cost_new_nodes (g);
  return sg_simulate (g, NULL, r, error);
}

typedef enum { TRIAL_OK, TRIAL_CYCLE, TRIAL_EXPOSED, TRIAL_STEP, TRIAL_MEMORY, TRIAL_BUDGET } Trial;

static Trial
trial (Ctx *x, int32_t lo, int32_t hi, double *exposed, double *step)
{
  int32_t ns;
  SgBucketSpec *specs = build_specs (x, lo, hi, &ns);
  SgSimResult r;
  g_autoptr (GError) err = NULL;
  x->st->simulations++;
  SgGraph *tg = sg_bucket_trial (x->trial, specs, ns, &err);
  if (tg)
    sg_bucket_cost_new_nodes (tg);
  bool ok = tg && sg_simulate (tg, NULL, &r, &err);
  sg_graph_free (tg);
  specs_free (specs, ns);
  if (!ok)
    return TRIAL_CYCLE; /* the rewrite found a cycle through implicit edges */
  *exposed = r.exposed_us;
  *step = r.step_us;
  uint64_t peak = r.peak_bytes;
  sg_sim_result_clear (&r);
  if (*exposed > x->cur_exposed + EXPOSED_EPS_US)
    return TRIAL_EXPOSED;
  /* Prefer merges that lower step_us: one that leaves exposure where it
   * was must not make the step longer (its copies would be pure cost). */
  if (*exposed >= x->cur_exposed - EXPOSED_EPS_US && *step > x->cur_step + EXPOSED_EPS_US)
    return TRIAL_STEP;
  return peak <= x->peak_limit ? TRIAL_OK : TRIAL_MEMORY;
}

static void
commit (Ctx *x, int32_t lo, int32_t hi)
{
  for (int32_t p = lo; p < hi; p++) {
    Bucket *bk = &g_array_index (x->buckets, Bucket, g_array_index (x->prop_b, int32_t, p));
    int32_t cand = g_array_index (x->prop_c, int32_t, p);
    g_array_append_val (bk->members, cand);
    x->fails[x->cands[cand].key] = 0;
    x->st->merges_accepted++;
  }
}

static int32_t
new_bucket (Ctx *x, int32_t cand)
{
  Bucket b = { g_array_new (FALSE, FALSE, sizeof (int32_t)),
               g_array_new (FALSE, FALSE, sizeof (int32_t)), x->cands[cand].bytes };
  g_array_append_val (b.members, cand);
  g_array_append_val (x->buckets, b);
  return (int32_t)x->buckets->len - 1;
}

/* Refuses proposal @p for reason @t. The refused candidate opens a bucket,
 * and the later proposals to the same bucket join it instead (what the
 * sequential greedy would do); their pre-checks covered it: it was a
 * tentative member then. */
static void
refuse (Ctx *x, int32_t p, Trial t, GArray *rejected)
{
  switch (t) {
  case TRIAL_CYCLE: x->st->refused_cycle++; break;
  case TRIAL_MEMORY: x->st->refused_memory++; break;
  case TRIAL_STEP: x->st->refused_step++; break;
  case TRIAL_BUDGET: x->st->refused_budget++; break;
  default: x->st->refused_exposed++; break;
  }
  int32_t b = g_array_index (x->prop_b, int32_t, p);
  int32_t cand = g_array_index (x->prop_c, int32_t, p);
  if (t != TRIAL_BUDGET) /* the key's give-up rule counts judged refusals */
    x->fails[x->cands[cand].key]++;
  if (t == TRIAL_MEMORY) {
    const Bucket *bk = &g_array_index (x->buckets, Bucket, b);
    uint64_t bytes = x->cands[cand].bytes;
    for (guint i = 0; i < bk->members->len; i++)
      bytes += x->cands[g_array_index (bk->members, int32_t, i)].bytes;
    x->mem_cap[x->cands[cand].key] = MIN (x->mem_cap[x->cands[cand].key], bytes);
  }
  int32_t nb = new_bucket (x, cand);
  for (int32_t q = p + 1; q < (int32_t)x->prop_b->len; q++)
    if (g_array_index (x->prop_b, int32_t, q) == b)
      g_array_index (x->prop_b, int32_t, q) = nb;
  g_array_append_val (rejected, nb);
  g_array_append_val (rejected, p);
}

/* Decides proposals [lo, hi) in order, a window at a time: first all of
 * them; a refused window is halved (from the same start), an accepted one
 * is committed and the next window is twice as long; after a refusal the
 * window restarts at the run that was accepted before it (buckets that
 * outgrow what compute can hide tend to do so at similar sizes). Every
 * committed window passed a whole-graph simulation; a batch of
 * single-proposal windows is the sequential greedy. */
static void
resolve (Ctx *x, int32_t lo, int32_t hi, GArray *rejected)
{
  int32_t window = hi - lo, run = 0;
  while (lo < hi) {
    if (x->budget == 0 || x->batch_left == 0) { /* out of simulations: refuse in order */
      for (int32_t p = lo; p < hi; p++)
        refuse (x, p, TRIAL_BUDGET, rejected);
      return;
    }
    if (x->budget > 0)
      x->budget--, x->batch_left--;
    int32_t n = MIN (window, hi - lo);
    double e = 0, s = 0;
    Trial t = trial (x, lo, lo + n, &e, &s);
    if (t == TRIAL_OK) {
      commit (x, lo, lo + n);
      x->cur_exposed = e;
      x->cur_step = s;
      lo += n;
      run += n;
      window = 2 * n;
    } else if (n == 1) {
      refuse (x, lo, t, rejected);
      lo++;
      window = MAX (run, 1);
      run = 0;
    } else {
      window = n / 2;
    }
  }
}

/* Resolves the open batch; each key stays open on the bucket its last
 * proposal ended in (its own new bucket if refused), so one-merge batches
 * are exactly the sequential greedy. */
static void
flush_batch (Ctx *x, int32_t *open, int32_t n_keys)
{
  int32_t np = (int32_t)x->prop_c->len;
  if (np == 0)
    return;
  /* (new bucket, proposal) pairs of refused proposals */
  g_autoptr (GArray) rejected = g_array_new (FALSE, FALSE, sizeof (int32_t));
  if (x->budget >= 0)
    x->batch_left += x->per_batch;
  resolve (x, 0, np, rejected);
  g_autofree int32_t *ended = g_new (int32_t, (size_t)np + 1);
  for (int32_t p = 0; p < np; p++)
    ended[p] = g_array_index (x->prop_b, int32_t, p);
  for (guint i = 0; i + 1 < rejected->len; i += 2)
    ended[g_array_index (rejected, int32_t, i + 1)] = g_array_index (rejected, int32_t, i);
  (void)n_keys;
  for (int32_t p = 0; p < np; p++)
    open[x->cands[g_array_index (x->prop_c, int32_t, p)].key] = ended[p];
  for (guint b = 0; b < x->buckets->len; b++) {
    Bucket *bk = &g_array_index (x->buckets, Bucket, b);
    if (bk->tent->len == 0)
      continue;
    g_array_set_size (bk->tent, 0);
    bk->bytes = 0;
    for (guint i = 0; i < bk->members->len; i++)
      bk->bytes += x->cands[g_array_index (bk->members, int32_t, i)].bytes;
  }
  g_array_set_size (x->prop_c, 0);
  g_array_set_size (x->prop_b, 0);
}

/* No path between @c and any member (accepted or proposed) of @bk, between
 * collectives or between waits: merging them would close a cycle. */
static bool
acyclic_with (Ctx *x, const Bucket *bk, int32_t cand)
{
  const Cand *c = &x->cands[cand];
  const GArray *lists[2] = { bk->members, bk->tent };
  for (int l = 0; l < 2; l++)
    for (guint i = 0; i < lists[l]->len; i++) {
      const Cand *m = &x->cands[g_array_index (lists[l], int32_t, i)];
      if (sg_aug_reaches (x->aug, m->c, c->c) || sg_aug_reaches (x->aug, c->c, m->c)
          || sg_aug_reaches (x->aug, m->w, c->w) || sg_aug_reaches (x->aug, c->w, m->w))
        return false;
    }
  return true;
}

/* The local screen of predict.c over the bucket's members plus @cand. */
static bool
predicted_ok (Ctx *x, const Bucket *bk, int32_t cand)
{
  guint n = bk->members->len + bk->tent->len + 1;
  g_autofree SgNodeId *colls = g_new (SgNodeId, n), *waits = g_new (SgNodeId, n);
  const GArray *lists[2] = { bk->members, bk->tent };
  guint w = 0;
  for (int l = 0; l < 2; l++)
    for (guint i = 0; i < lists[l]->len; i++) {
      const Cand *m = &x->cands[g_array_index (lists[l], int32_t, i)];
      colls[w] = m->c, waits[w++] = m->w;
    }
  colls[w] = x->cands[cand].c, waits[w++] = x->cands[cand].w;
  return sg_bucket_predict_ok (x->pred, colls, waits, (int32_t)w,
                               bk->bytes + x->cands[cand].bytes);
}

static int32_t
key_index (GArray *keys, Key k)
{
  for (guint i = 0; i < keys->len; i++) {
    Key *o = &g_array_index (keys, Key, i);
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

static bool
simulate_graph (SgGraph *g, double *exposed, double *step, uint64_t *peak, GError **error)
{
  SgSimResult r;
  if (!sg_simulate (g, NULL, &r, error))
    return false;
  *exposed = r.exposed_us;
  *step = r.step_us;
  *peak = r.peak_bytes;
  sg_sim_result_clear (&r);
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

/* The augmented graph of @g without its hiding edges. It reads @g's
 * inputs, so it must go before @g changes; @g's edges are swapped out for
 * the filtered list only while it is built. */
static SgAug *
constraints_aug (SgGraph *g)
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

static void
ctx_clear (Ctx *x)
{
  if (x->buckets) {
    for (guint b = 0; b < x->buckets->len; b++) {
      g_array_unref (g_array_index (x->buckets, Bucket, b).members);
      g_array_unref (g_array_index (x->buckets, Bucket, b).tent);
    }
    g_array_unref (x->buckets);
  }
  g_clear_pointer (&x->prop_c, g_array_unref);
  g_clear_pointer (&x->prop_b, g_array_unref);
  g_clear_pointer (&x->aug, sg_aug_free);
  g_clear_pointer (&x->pred, sg_bucket_predict_free);
  g_clear_pointer (&x->trial, sg_rewrite_free);
  g_clear_pointer (&x->mem_cap, g_free);
  g_clear_pointer (&x->fails, g_free);
  g_free (x->cands);
}

bool
sg_bucket_run (SgGraph *g, const SgConfig *cfg, SgBucketStats *st, GError **error)
{
  g_return_val_if_fail (g && st, false);
  memset (st, 0, sizeof *st);
  st->ran = cfg ? cfg->bucket : true;
  st->cap_bytes = cfg && cfg->bucket_cap_bytes ? cfg->bucket_cap_bytes
                                               : SG_BUCKET_DEFAULT_CAP_BYTES;
  st->collectives_before = st->collectives_after = count_collectives (g);
  if (!sg_graph_cost_model (g)) {
    g_set_error (error, SG_BUCKET_ERROR, SG_BUCKET_ERROR_SIM,
                 "bucket: the graph has no cost model (run the estimate pass first)");
    return false;
  }
  if (!simulate_graph (g, &st->exposed_before_us, &st->step_before_us, &st->peak_before_bytes,
                       error))
    return false;
  st->peak_after_bytes = st->peak_before_bytes;
  st->exposed_after_us = st->exposed_before_us;
  st->step_after_us = st->step_before_us;
  if (!st->ran)
    return true;

  Ctx x = { .g = g, .cfg = cfg, .st = st, .cap = st->cap_bytes };
  x.cur_exposed = st->exposed_before_us;
  x.cur_step = st->step_before_us;
  double grow = cfg ? cfg->max_peak_increase : SG_SCHEDULE_DEFAULT_MAX_PEAK_INCREASE;
  x.peak_limit = (uint64_t)((double)st->peak_before_bytes * (1.0 + MAX (grow, 0.0)));
  sg_graph_fill_users (g);
  x.cands = g_new (Cand, (size_t)g->n_nodes + 1);
  g_autoptr (GArray) keys = g_array_new (FALSE, FALSE, sizeof (Key));
  for (SgNodeId i = 0; i < g->n_nodes; i++) {
    const SgNode *n = &g->nodes[i];
    SgNodeId w;
    if (!sg_op_is_collective (n->kind) || !sg_bucket_member_check (g, i, &w, NULL))
      continue;
    uint64_t bytes = sg_node_comm_bytes (g, i);
    if (bytes == 0)
      continue;
    Key k = { n->kind, n->group, n->meta.dtype, n->reduce };
    x.cands[x.n_cands++] = (Cand){ i, w, key_index (keys, k), bytes };
  }
  int32_t n_keys = (int32_t)keys->len;
  x.buckets = g_array_new (FALSE, FALSE, sizeof (Bucket));
  x.prop_c = g_array_new (FALSE, FALSE, sizeof (int32_t));
  x.prop_b = g_array_new (FALSE, FALSE, sizeof (int32_t));
  /* The cycle pre-check sees data edges and the implicit edges that stay
   * constraints; hiding edges are the unbucketed overlap, which the
   * simulator judges instead (docs/bucketing.md). */
  x.aug = constraints_aug (g);
  x.trial = sg_rewrite_new (g);
  int32_t n_batches = TARGET_BATCHES;
  if (g->n_nodes > BATCH_NODES)
    n_batches = MAX (4, (int32_t)((int64_t)TARGET_BATCHES * BATCH_NODES / g->n_nodes));
  int32_t batch = x.n_cands <= SEQUENTIAL_LIMIT ? 1 : MAX (1, x.n_cands / n_batches);
  if (batch > 1 && !(x.pred = sg_bucket_predict_new (g, error))) {
    ctx_clear (&x);
    return false;
  }
  g_autofree int32_t *open = g_new (int32_t, (size_t)n_keys + 1);
  x.mem_cap = g_new (uint64_t, (size_t)n_keys + 1);
  x.fails = g_new0 (int32_t, (size_t)n_keys + 1);
  x.per_batch = MAX (SIM_BUDGET_PER_BATCH, (int32_t)g_bit_storage ((gulong)batch) / 2);
  x.budget = batch > 1 ? x.per_batch * n_batches : -1;
  x.batch_left = batch > 1 ? 0 : -1;
  for (int32_t k = 0; k < n_keys; k++)
    open[k] = -1, x.mem_cap[k] = G_MAXUINT64;

  for (int32_t ci = 0; ci < x.n_cands; ci++) {
    const Cand *c = &x.cands[ci];
    int32_t b = open[c->key];
    Bucket *bk = b >= 0 ? &g_array_index (x.buckets, Bucket, b) : NULL;
    bool join = bk != NULL;
    if (join && (bk->bytes + c->bytes > x.cap || c->bytes > x.cap)) {
      st->refused_cap++;
      join = false;
    } else if (join && bk->members->len + bk->tent->len >= MAX_MEMBERS) {
      st->refused_cap++;
      join = false;
    } else if (join && !acyclic_with (&x, bk, ci)) {
      st->refused_cycle++;
      join = false;
    } else if (join && x.budget == 0) {
      st->refused_budget++;
      join = false;
    } else if (join && x.pred
               && (x.fails[c->key] >= GIVE_UP_AFTER || bk->bytes + c->bytes >= x.mem_cap[c->key]
                   || !predicted_ok (&x, bk, ci))) {
      st->refused_predicted++;
      join = false;
    }
    if (!join) {
      open[c->key] = new_bucket (&x, ci);
    } else {
      g_array_append_val (bk->tent, ci);
      bk->bytes += c->bytes;
      g_array_append_val (x.prop_c, ci);
      g_array_append_val (x.prop_b, b);
    }
    if ((int32_t)x.prop_c->len >= batch)
      flush_batch (&x, open, n_keys);
  }
  flush_batch (&x, open, n_keys);
  g_clear_pointer (&x.aug, sg_aug_free);
  g_clear_pointer (&x.trial, sg_rewrite_free);

  /* The accepted buckets, applied to the graph itself. */
  int32_t ns;
  SgBucketSpec *specs = build_specs (&x, 0, 0, &ns);
  SgSimResult r;
  bool ok = ns == 0 || apply_and_simulate (g, specs, ns, &r, error);
  specs_free (specs, ns);
  ctx_clear (&x);
  if (!ok)
    return false;
  if (ns > 0) {
    st->exposed_after_us = r.exposed_us;
    st->step_after_us = r.step_us;
    st->peak_after_bytes = r.peak_bytes;
    record_hiding (g, &r);
    sg_sim_result_clear (&r);
  }
  st->collectives_after = count_collectives (g);
  sg_bucket_collect_infos (g, st);
  st->buckets = st->n_infos;
  return true;
}

