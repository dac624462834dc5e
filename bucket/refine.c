/* refine.c: local moves on a set of buckets, judged by the simulator.
 *
 * The greedy (bucket.c) grows buckets one collective at a time and the
 * per-layer buckets (layers.c) follow the model's structure; neither looks
 * at the two ends of the step, where a bucket costs most: the first
 * all_gather bucket must arrive before the first layer can start, and the
 * last gradients' reduce_scatter bucket can only start after the last of
 * them is computed. Two kinds of moves, each kept only when the predicted
 * step gets shorter (a split) or not longer (a merge, SG_BUCKET_TIE_US),
 * with the peak within the limit:
 *  - split: the first and the last bucket of a key are cut in two where
 *    the step is shortest (every cut simulated), repeatedly while that
 *    shortens the step;
 *  - merge: two neighbouring units of a key (buckets or single
 *    collectives, in issue order) become one, where no path joins them in
 *    the augmented graph and the cap allows.
 * At most REFINE_SIMULATIONS simulations per set (fewer above 20k nodes):
 * the pass stays near linear on large graphs.
 * Mirrors: the split/merge moves of local search over partitions (e.g.
 * XLA's and Alpa's cost-model-driven bucketing), without annealing.
 * Requires: the search of run.c. Invalidates: nothing.
 */
#include "bucket-private.h"

/* Simulations per refined set: 64 up to 20k nodes, fewer above (12 at
 * 100k, at least 4), about what the greedy spends in batch mode. */
#define REFINE_SIMULATIONS 64
#define REFINE_NODES 20000
#define SPLITS_PER_END 4
#define MAX_MEMBERS 64

/* Units of one key in issue order: each a GArray of candidate indices. */
typedef struct {
  SgBucketSearch *s;
  GPtrArray **units; /* per key */
  /* per candidate: the lowering of the unit it heads (AUTO: the rule's);
   * a unit takes its first member's */
  SgBucketLowering *lowering;
  SgBucketEval cur;
  int32_t budget;
  /* merges judged ahead: those of @ahead_units below @ahead_to, while no
   * move was kept since (@kept counts the moves kept) */
  GPtrArray *ahead_units;
  guint ahead_to;
  int32_t kept, ahead_kept;
  /* end splits judged ahead: key * 2 + end below @ahead_end_to, while no
   * move was kept since */
  int32_t ahead_end_to, ahead_end_kept;
} Refine;

static SgBucketSpec *
to_specs (const Refine *r, int32_t *n_specs)
{
  const SgBucketSearch *s = r->s;
  GArray *out = g_array_new (FALSE, TRUE, sizeof (SgBucketSpec));
  for (int32_t k = 0; k < s->n_keys; k++)
    for (guint u = 0; u < r->units[k]->len; u++) {
      GArray *a = g_ptr_array_index (r->units[k], u);
      if (a->len < 2)
        continue;
      SgBucketSpec sp = { .members = g_new (SgNodeId, a->len), .n_members = (int32_t)a->len,
                          .lowering = r->lowering[g_array_index (a, int32_t, 0)] };
      for (guint i = 0; i < a->len; i++)
        sp.members[i] = s->cands[g_array_index (a, int32_t, i)].c;
      g_array_append_val (out, sp);
    }
  *n_specs = (int32_t)out->len;
  return (SgBucketSpec *)(void *)g_array_free (out, FALSE);
}

/* Unit @a alone as one spec, its lowering decided by the rule (transfer
 * full). */
static SgBucketSpec *
to_specs_of (const Refine *r, const GArray *a, int32_t *n)
{
  SgBucketSpec *sp = g_new0 (SgBucketSpec, 1);
  sp->members = g_new (SgNodeId, a->len);
  sp->n_members = (int32_t)a->len;
  for (guint i = 0; i < a->len; i++)
    sp->members[i] = r->s->cands[g_array_index (a, int32_t, i)].c;
  sg_bucket_lower_specs (r->s, sp, 1);
  *n = 1;
  return sp;
}

/* Simulates the current units; true (and @ev set) when they may stand in
 * for the current set: shorter, or with @ties not longer. */
static bool
better (Refine *r, bool ties, SgBucketEval *ev)
{
  if (r->budget <= 0)
    return false;
  r->budget--;
  int32_t ns;
  SgBucketSpec *specs = to_specs (r, &ns);
  bool ok = sg_bucket_evaluate (r->s, specs, ns, ev);
  sg_bucket_specs_free (specs, ns);
  double limit = ties ? MIN (r->cur.step_us, r->s->base_step_us) + SG_BUCKET_TIE_US
                      : r->cur.step_us - SG_BUCKET_TIE_US;
  return ok && ev->step_us <= limit && ev->peak_bytes <= r->s->peak_limit;
}

/* Unit @u of @units being cut in two: its members and their lowerings as
 * they were, and the unit after it that takes its tail (cut_begin). */
typedef struct {
  GArray *a, *tail;
  int32_t *saved;
  SgBucketLowering *kept;
  guint m;
} Cut;

static void
cut_begin (Refine *r, GPtrArray *units, guint u, Cut *c)
{
  c->a = g_ptr_array_index (units, u);
  c->m = c->a->len;
  c->saved = g_memdup2 (c->a->data, sizeof (int32_t) * c->m);
  c->kept = g_new (SgBucketLowering, c->m);
  for (guint j = 0; j < c->m; j++)
    c->kept[j] = r->lowering[c->saved[j]];
  c->tail = g_array_new (FALSE, FALSE, sizeof (int32_t));
  g_ptr_array_insert (units, (gint)(u + 1), c->tail);
}

/* The unit cut after its @j first members (0 < @j < m). */
static void
cut_at (Refine *r, const Cut *c, guint j)
{
  g_array_set_size (c->tail, 0);
  g_array_append_vals (c->tail, c->saved + j, c->m - j);
  g_array_set_size (c->a, 0);
  g_array_append_vals (c->a, c->saved, j);
  for (guint i = 0; i < c->m; i++) /* the tail, a unit of its own, keeps the bucket's */
    r->lowering[c->saved[i]] = i == j ? c->kept[0] : c->kept[i];
}

/* Ends the cut: kept after the first @j members, or (@j 0) the unit as it
 * was (the tail unit gone). */
static void
cut_end (Refine *r, GPtrArray *units, guint u, Cut *c, guint j)
{
  for (guint i = 0; i < c->m; i++)
    r->lowering[c->saved[i]] = c->kept[i];
  if (j > 0) {
    cut_at (r, c, j);
  } else {
    g_ptr_array_remove_index (units, u + 1); /* frees the tail */
    g_array_set_size (c->a, 0);
    g_array_append_vals (c->a, c->saved, c->m);
  }
  g_free (c->saved);
  g_free (c->kept);
}

/* Judges @sets ahead and frees them. */
static void
prefetch_sets (Refine *r, SgBucketSet *sets, int32_t k)
{
  sg_bucket_prefetch (r->s, sets, k);
  for (int32_t i = 0; i < k; i++)
    sg_bucket_specs_free ((SgBucketSpec *)sets[i].specs, sets[i].n_specs);
}

/* The unit try_split cuts at end @end (0: the first, 1: the last) of
 * @units: the first or last one of at least two members; -1: none. */
static int32_t
end_unit (const GPtrArray *units, int end)
{
  if (end == 0) {
    for (guint u = 0; u < units->len; u++)
      if (((GArray *)g_ptr_array_index (units, u))->len >= 2)
        return (int32_t)u;
  } else {
    for (guint u = units->len; u > 0; u--)
      if (((GArray *)g_ptr_array_index (units, u - 1))->len >= 2)
        return (int32_t)u - 1;
  }
  return -1;
}

/* The sets of the cuts of unit @u of @units (after its first j members,
 * for j = 1, 2, ...), into @sets from *@k on, at most @max in all; the
 * units left as they were. */
static void
cut_sets (Refine *r, GPtrArray *units, guint u, SgBucketSet *sets, int32_t *k, int32_t max)
{
  Cut c;
  cut_begin (r, units, u, &c);
  for (guint j = 1; j < c.m && *k < max; j++) {
    cut_at (r, &c, j);
    sets[*k].specs = to_specs (r, &sets[*k].n_specs);
    (*k)++;
  }
  cut_end (r, units, u, &c, 0);
}

/* The cuts the end splits of sg_bucket_refine judge from key @key's end
 * @end on while they keep none (every cut of a unit is judged against the
 * same set; a split that keeps nothing ends its end, and the next end or
 * key is cut from the same set), within the budget and about twice as
 * many as the search has threads: judged ahead (verdict.c). */
static void
prefetch_ends (Refine *r, int32_t key, int end)
{
  int32_t width = sg_bucket_ahead_width (r->s);
  int32_t max = MIN (2 * width, r->budget);
  if (width < 2 || max < 2 || (r->ahead_end_kept == r->kept && key * 2 + end < r->ahead_end_to))
    return;
  g_autofree SgBucketSet *sets = g_new0 (SgBucketSet, (size_t)max);
  int32_t k = 0, at = key * 2 + end;
  for (; at < 2 * r->s->n_keys && k < max; at++) {
    GPtrArray *units = r->units[at / 2];
    int32_t u = end_unit (units, at % 2);
    if (u >= 0)
      cut_sets (r, units, (guint)u, sets, &k, max);
  }
  r->ahead_end_to = at, r->ahead_end_kept = r->kept;
  prefetch_sets (r, sets, k);
}

/* Cuts unit @u in two where the step is shortest (every cut is
 * simulated), and keeps that cut when it shortens the step. */
static bool
try_split (Refine *r, GPtrArray *units, guint u)
{
  if (((GArray *)g_ptr_array_index (units, u))->len < 2)
    return false;
  Cut c;
  cut_begin (r, units, u, &c);
  guint best = 0;
  SgBucketEval best_ev = r->cur, ev;
  for (guint j = 1; j < c.m && r->budget > 0; j++) {
    cut_at (r, &c, j);
    if (better (r, false, &ev) && ev.step_us < best_ev.step_us)
      best = j, best_ev = ev;
  }
  cut_end (r, units, u, &c, best);
  if (best == 0)
    return false;
  r->cur = best_ev;
  r->kept++;
  return true;
}

static bool
mergeable (const Refine *r, const GArray *a, const GArray *b)
{
  const SgBucketSearch *s = r->s;
  uint64_t bytes = 0;
  for (guint i = 0; i < a->len; i++)
    bytes += s->cands[g_array_index (a, int32_t, i)].bytes;
  for (guint i = 0; i < b->len; i++)
    bytes += s->cands[g_array_index (b, int32_t, i)].bytes;
  if ((s->flat_only && bytes > s->cap) || a->len + b->len > MAX_MEMBERS)
    return false;
  for (guint i = 0; i < a->len; i++)
    for (guint j = 0; j < b->len; j++)
      if (!sg_bucket_cands_independent (s->aug, &s->cands[g_array_index (a, int32_t, i)],
                                        &s->cands[g_array_index (b, int32_t, j)]))
        return false;
  return true;
}

/* Units @u and @u + 1 of @units as one (the second's members after the
 * first's), its lowering undecided (the rule's); returns the second unit,
 * taken off @units, for merge_undo with *@na and *@was. */
static GArray *
merge_do (Refine *r, GPtrArray *units, guint u, guint *na, SgBucketLowering *was)
{
  GArray *a = g_ptr_array_index (units, u), *b = g_ptr_array_index (units, u + 1);
  *na = a->len;
  SgNodeId head = g_array_index (a, int32_t, 0);
  *was = r->lowering[head];
  g_array_append_vals (a, b->data, b->len);
  g_ptr_array_steal_index (units, u + 1);
  r->lowering[head] = SG_BUCKET_LOWERING_AUTO;
  return b;
}

static void
merge_undo (Refine *r, GPtrArray *units, guint u, GArray *b, guint na, SgBucketLowering was)
{
  GArray *a = g_ptr_array_index (units, u);
  r->lowering[g_array_index (a, int32_t, 0)] = was;
  g_array_set_size (a, na);
  g_ptr_array_insert (units, (gint)(u + 1), b);
}

/* Merged unit @u lowered the other way than the rule lowers it (the
 * second try when the rule's lengthens the step). */
static void
merge_other_way (Refine *r, GPtrArray *units, guint u)
{
  GArray *a = g_ptr_array_index (units, u);
  int32_t ns;
  SgBucketSpec *one = to_specs_of (r, a, &ns);
  r->lowering[g_array_index (a, int32_t, 0)] = sg_bucket_lowering_other (one->lowering);
  sg_bucket_specs_free (one, ns);
}

/* Merges unit @u with the next one, lowered by the rule and, when that
 * lengthens the step, the other way; undoes it when both do. */
static bool
try_merge (Refine *r, GPtrArray *units, guint u)
{
  if (!mergeable (r, g_ptr_array_index (units, u), g_ptr_array_index (units, u + 1)))
    return false;
  guint na;
  SgBucketLowering was;
  GArray *b = merge_do (r, units, u, &na, &was);
  SgBucketEval ev;
  bool ok = better (r, true, &ev);
  if (!ok && r->s->lowering == SG_BUCKET_LOWERING_AUTO) {
    merge_other_way (r, units, u);
    ok = better (r, true, &ev);
  }
  if (ok) {
    r->cur = ev;
    r->kept++;
    g_array_unref (b);
    return true;
  }
  merge_undo (r, units, u, b, na, was);
  return false;
}

/* The sets try_merge judges for units @u and @u + 1 (merged, lowered by
 * the rule; then the other way), into @sets from *@k on (at most @max),
 * the units left as they were. */
static void
merge_sets (Refine *r, GPtrArray *units, guint u, SgBucketSet *sets, int32_t *k, int32_t max)
{
  if (!mergeable (r, g_ptr_array_index (units, u), g_ptr_array_index (units, u + 1)))
    return;
  guint na;
  SgBucketLowering was;
  GArray *b = merge_do (r, units, u, &na, &was);
  sets[*k].specs = to_specs (r, &sets[*k].n_specs);
  (*k)++;
  if (*k < max && r->s->lowering == SG_BUCKET_LOWERING_AUTO) {
    merge_other_way (r, units, u);
    sets[*k].specs = to_specs (r, &sets[*k].n_specs);
    (*k)++;
  }
  merge_undo (r, units, u, b, na, was);
}

/* The merges from units @u, @u + 1 of @units on, as the loop of
 * sg_bucket_refine judges them while it keeps none: judged ahead
 * (verdict.c), as many sets as the search has threads for. */
static void
prefetch_merges (Refine *r, GPtrArray *units, guint u)
{
  int32_t max = MIN (sg_bucket_ahead_width (r->s), r->budget);
  if (max < 2
      || (r->ahead_units == units && u < r->ahead_to && r->ahead_kept == r->kept))
    return;
  g_autofree SgBucketSet *sets = g_new0 (SgBucketSet, (size_t)max);
  int32_t k = 0;
  guint v = u;
  for (; v + 1 < units->len && k < max; v++)
    merge_sets (r, units, v, sets, &k, max);
  r->ahead_units = units, r->ahead_to = v, r->ahead_kept = r->kept;
  prefetch_sets (r, sets, k);
}

static void
free_unit (gpointer p)
{
  g_array_unref (p);
}

SgBucketSpec *
sg_bucket_refine (SgBucketSearch *s, const SgBucketSpec *specs, int32_t n_specs,
                  SgBucketEval *ev, int32_t *n_out)
{
  int64_t budget = (int64_t)REFINE_SIMULATIONS * REFINE_NODES / MAX (s->g->n_nodes, 1);
  Refine r = { .s = s, .cur = *ev, .budget = (int32_t)CLAMP (budget, 4, REFINE_SIMULATIONS) };
  r.units = g_new (GPtrArray *, (size_t)s->n_keys + 1);
  r.lowering = g_new0 (SgBucketLowering, (size_t)s->n_cands + 1);
  for (int32_t k = 0; k < s->n_keys; k++)
    r.units[k] = g_ptr_array_new_with_free_func (free_unit);
  /* every candidate in one unit: its bucket's, else its own */
  g_autofree int32_t *unit_of = g_new (int32_t, (size_t)s->g->n_nodes + 1);
  for (SgNodeId v = 0; v < s->g->n_nodes; v++)
    unit_of[v] = -1;
  for (int32_t b = 0; b < n_specs; b++)
    for (int32_t i = 0; i < specs[b].n_members; i++)
      unit_of[specs[b].members[i]] = b;
  g_autofree GArray **made = g_new0 (GArray *, (size_t)n_specs + 1);
  for (int32_t i = 0; i < s->n_cands; i++) {
    int32_t b = unit_of[s->cands[i].c];
    GArray *a = b >= 0 ? made[b] : NULL;
    if (!a) {
      a = g_array_new (FALSE, FALSE, sizeof (int32_t));
      g_ptr_array_add (r.units[s->cands[i].key], a);
      if (b >= 0) {
        made[b] = a;
        r.lowering[i] = specs[b].lowering;
      }
    }
    g_array_append_val (a, i);
  }
  /* the ends first: cut the first and the last bucket of every key */
  for (int32_t k = 0; k < s->n_keys; k++)
    for (int end = 0; end < 2; end++)
      for (int t = 0; t < SPLITS_PER_END; t++) {
        int32_t u = end_unit (r.units[k], end);
        if (u < 0)
          break;
        prefetch_ends (&r, k, end);
        if (!try_split (&r, r.units[k], (guint)u))
          break;
      }
  /* then neighbours, in issue order, while the budget lasts */
  for (int32_t k = 0; k < s->n_keys && r.budget > 0; k++) {
    GPtrArray *units = r.units[k];
    for (guint u = 0; u + 1 < units->len && r.budget > 0;) {
      prefetch_merges (&r, units, u);
      if (!try_merge (&r, units, u))
        u++;
    }
  }
  SgBucketSpec *out = to_specs (&r, n_out);
  *ev = r.cur;
  for (int32_t k = 0; k < s->n_keys; k++)
    g_ptr_array_unref (r.units[k]);
  g_free (r.units);
  g_free (r.lowering);
  return out;
}
