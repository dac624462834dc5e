/* bucket.c: the greedy, simulator-checked search for buckets.
 *
 * Mirrors the idea of PyTorch 2.11's overlap-preserving bucketer
 * (torch/_inductor/fx_passes/overlap_preserving_bucketer.py): walk the
 * collectives in the scheduled order, grow one open bucket per (kind, group,
 * dtype, reduce op) with the next collective of that key, and keep a merge
 * only when the augmented graph stays acyclic, the bucket stays under the
 * byte cap, the timeline simulator's step_us does not rise and the
 * predicted peak stays within the limit. Ours judges every merge by
 * re-simulating the whole bucketed graph (contention included) rather than
 * by interval bookkeeping. Scale: above 256 candidates merges are tried in
 * batches (one simulation per batch, then windows that halve on refusal
 * and grow on success) behind cheap screens, within a simulation budget
 * (docs/bucketing.md). Trial graphs are built from arrays (trial.c), not
 * by copying and rewriting the graph. run.c compares the result with the
 * per-layer buckets (layers.c) and applies the better.
 * Requires: the search set up by run.c (costs, a topological order, the
 * augmented graph without hiding edges).
 * Invalidates: nothing (the graph is only simulated).
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

typedef struct {
  GArray *members; /* candidate indices (accepted), ascending */
  GArray *tent;    /* candidate indices proposed in the open batch */
  uint64_t bytes;  /* accepted + tentative */
  /* AUTO (the local rule, lower.c), or the lowering a refused proposal
   * needed to pass (trial) */
  SgBucketLowering lowering;
} Bucket;

typedef struct {
  SgBucketSearch *s;
  SgBucketStats *st;
  SgBucketPredict *pred; /* batch mode only */
  uint64_t *mem_cap;     /* per key: smallest bucket the memory limit refused */
  int32_t *fails;        /* per key: refused proposals since its last accepted one */
  int32_t budget;        /* simulations left (batch mode), or -1: unlimited */
  int32_t batch_left;    /* of those, for the open batch (batch mode) */
  int32_t per_batch;     /* simulations each batch adds to batch_left */
  const SgBucketCand *cands;
  GArray *buckets; /* Bucket */
  /* proposals of the open batch: candidate index and target bucket */
  GArray *prop_c, *prop_b;
  /* per proposal: the next one proposed to the same bucket, or -1; while
   * resolve() decides in order, every undecided proposal after p in p's
   * chain targets p's bucket, and no other one does */
  int32_t *next_same;
  GArray *multi;     /* buckets of two accepted members or more, by index */
  int32_t *slot;     /* build_specs' scratch per bucket: -1 */
  guint n_slot;
  SgBucketEval cur;
} Ctx;

static int
cmp_i32 (const void *a, const void *b)
{
  int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
  return (x > y) - (x < y);
}

/* Specs of the accepted buckets plus proposals [lo, hi) of the batch, in
 * the graph's ids: the buckets of two members or more (x->multi) and
 * those proposed to, in bucket order. (transfer full) members arrays of
 * the specs. */
static SgBucketSpec *
build_specs (Ctx *x, int32_t lo, int32_t hi, int32_t *n_specs)
{
  guint nb = x->buckets->len;
  if (x->n_slot < nb) { /* slot[b]: proposals to b, then b's spec; -1 between calls */
    guint n = MAX (nb, 2 * x->n_slot);
    x->slot = g_renew (int32_t, x->slot, n);
    memset (x->slot + x->n_slot, 0xff, sizeof (int32_t) * (n - x->n_slot));
    x->n_slot = n;
  }
  g_autoptr (GArray) touched = g_array_copy (x->multi);
  for (guint i = 0; i < touched->len; i++)
    x->slot[g_array_index (touched, int32_t, i)] = 0;
  for (int32_t p = lo; p < hi; p++) {
    int32_t b = g_array_index (x->prop_b, int32_t, p);
    if (x->slot[b] < 0) {
      x->slot[b] = 0;
      g_array_append_val (touched, b);
    }
    x->slot[b]++;
  }
  if (touched->len > 1) /* (an empty array may have no data) */
    qsort (touched->data, touched->len, sizeof (int32_t), cmp_i32);
  SgBucketSpec *specs = g_new0 (SgBucketSpec, touched->len + 1);
  int32_t ns = 0;
  for (guint i = 0; i < touched->len; i++) {
    int32_t b = g_array_index (touched, int32_t, i);
    Bucket *bk = &g_array_index (x->buckets, Bucket, b);
    guint na = bk->members->len, ne = (guint)x->slot[b];
    x->slot[b] = -1;
    if (na + ne < 2)
      continue;
    x->slot[b] = ns;
    SgBucketSpec *sp = &specs[ns++];
    sp->lowering = bk->lowering;
    sp->members = g_new (SgNodeId, na + ne);
    /* accepted members precede every proposal in candidate order */
    for (guint j = 0; j < na; j++)
      sp->members[sp->n_members++] = x->cands[g_array_index (bk->members, int32_t, j)].c;
  }
  for (int32_t p = lo; p < hi; p++) {
    int32_t b = g_array_index (x->prop_b, int32_t, p);
    if (x->slot[b] >= 0) {
      SgBucketSpec *sp = &specs[x->slot[b]];
      sp->members[sp->n_members++] = x->cands[g_array_index (x->prop_c, int32_t, p)].c;
    }
  }
  for (guint i = 0; i < touched->len; i++)
    x->slot[g_array_index (touched, int32_t, i)] = -1;
  *n_specs = ns;
  return specs;
}

typedef enum { TRIAL_OK, TRIAL_CYCLE, TRIAL_STEP, TRIAL_MEMORY, TRIAL_BUDGET } Trial;

static Trial
judge (Ctx *x, int32_t lo, int32_t hi, SgBucketEval *ev)
{
  int32_t ns;
  SgBucketSpec *specs = build_specs (x, lo, hi, &ns);
  bool ok = sg_bucket_evaluate (x->s, specs, ns, ev);
  sg_bucket_specs_free (specs, ns);
  if (!ok)
    return TRIAL_CYCLE; /* the rewrite found a cycle through implicit edges */
  /* The objective: no merge may lengthen the predicted step. */
  if (ev->step_us > MIN (x->cur.step_us, x->s->base_step_us) + SG_BUCKET_TIE_US)
    return TRIAL_STEP;
  return ev->peak_bytes <= x->s->peak_limit ? TRIAL_OK : TRIAL_MEMORY;
}

/* The lowering a refused single proposal @p is judged with a second time:
 * the other one than the rule's for the bucket it would make (its
 * bucket's members and it); AUTO when there is no second try (a lowering
 * forced for every bucket, or its bucket's decided already). */
static SgBucketLowering
second_lowering (Ctx *x, int32_t p)
{
  Bucket *bk = &g_array_index (x->buckets, Bucket, g_array_index (x->prop_b, int32_t, p));
  if (x->s->lowering != SG_BUCKET_LOWERING_AUTO || bk->lowering != SG_BUCKET_LOWERING_AUTO)
    return SG_BUCKET_LOWERING_AUTO;
  guint na = bk->members->len;
  g_autofree SgNodeId *members = g_new (SgNodeId, na + 1);
  for (guint i = 0; i < na; i++)
    members[i] = x->cands[g_array_index (bk->members, int32_t, i)].c;
  members[na] = x->cands[g_array_index (x->prop_c, int32_t, p)].c;
  SgBucketSpec one = { members, (int32_t)na + 1, SG_BUCKET_LOWERING_AUTO };
  sg_bucket_lower_specs (x->s, &one, 1);
  return sg_bucket_lowering_other (one.lowering);
}

/* Judges proposals [lo, hi). A single proposal that lengthens the step
 * with its bucket lowered by the rule is judged once more lowered the
 * other way (the rule weighs copies against comm time that the schedule
 * may hide); the bucket keeps the lowering that passed. */
static Trial
trial (Ctx *x, int32_t lo, int32_t hi, SgBucketEval *ev)
{
  Trial t = judge (x, lo, hi, ev);
  if (t != TRIAL_STEP || hi - lo != 1 || x->s->lowering != SG_BUCKET_LOWERING_AUTO)
    return t;
  SgBucketLowering other = second_lowering (x, lo);
  if (other == SG_BUCKET_LOWERING_AUTO)
    return t;
  Bucket *bk = &g_array_index (x->buckets, Bucket, g_array_index (x->prop_b, int32_t, lo));
  bk->lowering = other;
  t = judge (x, lo, hi, ev);
  if (t != TRIAL_OK)
    bk->lowering = SG_BUCKET_LOWERING_AUTO;
  return t;
}

static void
commit (Ctx *x, int32_t lo, int32_t hi)
{
  for (int32_t p = lo; p < hi; p++) {
    Bucket *bk = &g_array_index (x->buckets, Bucket, g_array_index (x->prop_b, int32_t, p));
    int32_t cand = g_array_index (x->prop_c, int32_t, p);
    g_array_append_val (bk->members, cand);
    if (bk->members->len == 2)
      g_array_append_val (x->multi, g_array_index (x->prop_b, int32_t, p));
    x->fails[x->cands[cand].key] = 0;
    x->st->merges_accepted++;
  }
}

static int32_t
new_bucket (Ctx *x, int32_t cand)
{
  Bucket b = { g_array_new (FALSE, FALSE, sizeof (int32_t)),
               g_array_new (FALSE, FALSE, sizeof (int32_t)), x->cands[cand].bytes,
               SG_BUCKET_LOWERING_AUTO };
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
  case TRIAL_BUDGET: x->st->refused_budget++; break;
  default: x->st->refused_step++; break;
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
  for (int32_t q = x->next_same[p]; q >= 0; q = x->next_same[q])
    g_array_index (x->prop_b, int32_t, q) = nb;
  g_array_append_val (rejected, nb);
  g_array_append_val (rejected, p);
}

/* What resolve() will judge from window [@lo, @lo + @n) on while it is
 * refused (each refusal halves it, from the same start and the same
 * accepted buckets), down to the single proposal and its second try,
 * within the simulations left: judged ahead (verdict.c). (What follows an
 * acceptance is not: judging it ahead too made 60% more trials at 36K
 * nodes for 5% fewer rounds, and trials side by side slow each other.) */
static void
prefetch_halving (Ctx *x, int32_t lo, int32_t n)
{
  if (sg_bucket_ahead_width (x->s) < 2) /* sg_bucket_prefetch would judge none */
    return;
  int32_t left = x->budget < 0 ? G_MAXINT32 : MIN (x->budget, x->batch_left);
  SgBucketSet sets[40] = { 0 };
  int32_t k = 0;
  for (int32_t w = n; w >= 1 && k < left && k < 38; w /= 2) {
    sets[k].specs = build_specs (x, lo, lo + w, &sets[k].n_specs);
    k++;
    SgBucketLowering other = w == 1 && k < left ? second_lowering (x, lo)
                                                : SG_BUCKET_LOWERING_AUTO;
    if (other != SG_BUCKET_LOWERING_AUTO) { /* trial()'s second try */
      Bucket *bk = &g_array_index (x->buckets, Bucket, g_array_index (x->prop_b, int32_t, lo));
      bk->lowering = other;
      sets[k].specs = build_specs (x, lo, lo + 1, &sets[k].n_specs);
      bk->lowering = SG_BUCKET_LOWERING_AUTO;
      k++;
    }
  }
  sg_bucket_prefetch (x->s, sets, k);
  for (int32_t i = 0; i < k; i++)
    sg_bucket_specs_free ((SgBucketSpec *)sets[i].specs, sets[i].n_specs);
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
    int32_t n = MIN (window, hi - lo);
    prefetch_halving (x, lo, n);
    if (x->budget > 0)
      x->budget--, x->batch_left--;
    SgBucketEval ev;
    Trial t = trial (x, lo, lo + n, &ev);
    if (t == TRIAL_OK) {
      commit (x, lo, lo + n);
      x->cur = ev;
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
flush_batch (Ctx *x, int32_t *open)
{
  int32_t np = (int32_t)x->prop_c->len;
  if (np == 0)
    return;
  /* (new bucket, proposal) pairs of refused proposals */
  g_autoptr (GArray) rejected = g_array_new (FALSE, FALSE, sizeof (int32_t));
  if (x->budget >= 0)
    x->batch_left += x->per_batch;
  g_autofree int32_t *last = g_new (int32_t, (size_t)x->buckets->len + 1);
  memset (last, 0xff, sizeof (int32_t) * x->buckets->len); /* -1: none yet */
  x->next_same = g_new (int32_t, (guint)np + 1);
  for (int32_t p = np - 1; p >= 0; p--) {
    int32_t b = g_array_index (x->prop_b, int32_t, p);
    x->next_same[p] = last[b];
    last[b] = p;
  }
  resolve (x, 0, np, rejected);
  g_clear_pointer (&x->next_same, g_free);
  g_autofree int32_t *ended = g_new (int32_t, (guint)np + 1);
  for (int32_t p = 0; p < np; p++)
    ended[p] = g_array_index (x->prop_b, int32_t, p);
  for (guint i = 0; i + 1 < rejected->len; i += 2)
    ended[g_array_index (rejected, int32_t, i + 1)] = g_array_index (rejected, int32_t, i);
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

/* No path between @cand and any member (accepted or proposed) of @bk. */
static bool
acyclic_with (Ctx *x, const Bucket *bk, int32_t cand)
{
  const GArray *lists[2] = { bk->members, bk->tent };
  for (int l = 0; l < 2; l++)
    for (guint i = 0; i < lists[l]->len; i++)
      if (!sg_bucket_cands_independent (x->s->aug, &x->cands[g_array_index (lists[l], int32_t, i)],
                                        &x->cands[cand]))
        return false;
  return true;
}

/* The local screen of predict.c over the bucket's members plus @cand. */
static bool
predicted_ok (Ctx *x, const Bucket *bk, int32_t cand)
{
  guint n = bk->members->len + bk->tent->len + 1;
  g_autofree SgNodeId *colls = g_new (SgNodeId, n), *waits = g_new (SgNodeId, n);
  g_autofree uint64_t *sizes = g_new (uint64_t, n);
  const GArray *lists[2] = { bk->members, bk->tent };
  guint w = 0;
  for (int l = 0; l < 2; l++)
    for (guint i = 0; i < lists[l]->len; i++) {
      const SgBucketCand *m = &x->cands[g_array_index (lists[l], int32_t, i)];
      colls[w] = m->c, waits[w] = m->w, sizes[w++] = m->bytes;
    }
  colls[w] = x->cands[cand].c, waits[w] = x->cands[cand].w, sizes[w++] = x->cands[cand].bytes;
  return sg_bucket_predict_ok (x->pred, colls, waits, sizes, (int32_t)w,
                               bk->bytes + x->cands[cand].bytes,
                               x->s->lowering,
                               x->s->cap);
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
  g_clear_pointer (&x->multi, g_array_unref);
  g_clear_pointer (&x->slot, g_free);
  g_clear_pointer (&x->pred, sg_bucket_predict_free);
  g_clear_pointer (&x->mem_cap, g_free);
  g_clear_pointer (&x->fails, g_free);
}

/* Whether candidate @ci may be proposed to @bk (NULL: no open bucket);
 * counts the refusals of the pre-checks. */
static bool
may_join (Ctx *x, const Bucket *bk, int32_t ci)
{
  const SgBucketCand *c = &x->cands[ci];
  if (!bk)
    return false;
  /* the cap bounds flat buckets: a larger one is grouped (lower.c) */
  if ((x->s->flat_only && (bk->bytes + c->bytes > x->s->cap || c->bytes > x->s->cap))
      || bk->members->len + bk->tent->len >= MAX_MEMBERS) {
    x->st->refused_cap++;
    return false;
  }
  if (!acyclic_with (x, bk, ci)) {
    x->st->refused_cycle++;
    return false;
  }
  if (x->budget == 0) {
    x->st->refused_budget++;
    return false;
  }
  if (x->pred
      && (x->fails[c->key] >= GIVE_UP_AFTER || bk->bytes + c->bytes >= x->mem_cap[c->key]
          || !predicted_ok (x, bk, ci))) {
    x->st->refused_predicted++;
    return false;
  }
  return true;
}

SgBucketSpec *
sg_bucket_greedy (SgBucketSearch *s, const SgBucketEval *base, SgBucketEval *out,
                  int32_t *n_specs, GError **error)
{
  Ctx x = { .s = s, .st = s->st, .cands = s->cands, .cur = *base };
  int32_t n_keys = s->n_keys;
  x.buckets = g_array_new (FALSE, FALSE, sizeof (Bucket));
  x.prop_c = g_array_new (FALSE, FALSE, sizeof (int32_t));
  x.prop_b = g_array_new (FALSE, FALSE, sizeof (int32_t));
  x.multi = g_array_new (FALSE, FALSE, sizeof (int32_t));
  int32_t n_batches = TARGET_BATCHES;
  if (s->g->n_nodes > BATCH_NODES)
    n_batches = MAX (4, (int32_t)((int64_t)TARGET_BATCHES * BATCH_NODES / s->g->n_nodes));
  int32_t batch = s->n_cands <= SEQUENTIAL_LIMIT ? 1 : MAX (1, s->n_cands / n_batches);
  if (batch > 1 && !(x.pred = sg_bucket_predict_new (s->g, error))) {
    ctx_clear (&x);
    return NULL;
  }
  g_autofree int32_t *open = g_new (int32_t, (size_t)n_keys + 1);
  x.mem_cap = g_new (uint64_t, (size_t)n_keys + 1);
  x.fails = g_new0 (int32_t, (size_t)n_keys + 1);
  x.per_batch = MAX (SIM_BUDGET_PER_BATCH, (int32_t)g_bit_storage ((gulong)batch) / 2);
  x.budget = batch > 1 ? x.per_batch * n_batches : -1;
  x.batch_left = batch > 1 ? 0 : -1;
  for (int32_t k = 0; k < n_keys; k++)
    open[k] = -1, x.mem_cap[k] = G_MAXUINT64;

  for (int32_t ci = 0; ci < s->n_cands; ci++) {
    const SgBucketCand *c = &s->cands[ci];
    int32_t b = open[c->key];
    Bucket *bk = b >= 0 ? &g_array_index (x.buckets, Bucket, b) : NULL;
    if (!may_join (&x, bk, ci)) {
      open[c->key] = new_bucket (&x, ci);
    } else {
      g_array_append_val (bk->tent, ci);
      bk->bytes += c->bytes;
      g_array_append_val (x.prop_c, ci);
      g_array_append_val (x.prop_b, b);
    }
    if ((int32_t)x.prop_c->len >= batch)
      flush_batch (&x, open);
  }
  flush_batch (&x, open);
  SgBucketSpec *specs = build_specs (&x, 0, 0, n_specs);
  *out = x.cur;
  ctx_clear (&x);
  return specs;
}
