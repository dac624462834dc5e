/* searches.c: the searches of auto mode, side by side where they can be
 * (sg_bucket_searches).
 *
 * Auto mode compares three sets of buckets (docs/bucketing.md): the
 * greedy's (bucket.c) refined (refine.c); when that holds a bucket the
 * rule lowers grouped, the flat-only greedy's refined, the shorter of the
 * two standing for the greedy; and the per-layer buckets (layers.c)
 * refined. The three searches read the same graph and verdicts and
 * decide nothing for one another, so with a pool of several threads and
 * workers to judge for them (verdict.c: each search asks on its own
 * worker) they run as tasks of one job, each on its own copy of the
 * search (its statistics, its queries' scratch, its rule memo; the
 * verdicts' memo is shared behind its lock) and its own judged-ahead
 * jobs; the flat-only greedy runs before the first greedy's result says
 * whether it is needed, and its result and counts are dropped when it is
 * not. The results are then combined in the order of the searches one
 * after the other, and the counts summed: the same buckets, statistics
 * and plans whatever ran where (tests/bucket/test_pass.c). A search with
 * no worker free for it runs after the others, on the pass's own.
 * Mirrors: independent restarts of a local search run in parallel
 * (portfolio search), results merged deterministically.
 * Requires: the search of run.c. Invalidates: nothing.
 */
#include "bucket-private.h"

#include <string.h>

/* Collectives a set of specs removes. */
static int32_t
merged (const SgBucketSpec *specs, int32_t n)
{
  int32_t m = 0;
  for (int32_t i = 0; i < n; i++)
    m += specs[i].n_members - 1;
  return m;
}

void
sg_bucket_keep_better (SgBucketChoice *best, SgBucketChoice c)
{
  bool shorter = c.ev.step_us < best->ev.step_us - SG_BUCKET_TIE_US;
  bool tie = c.ev.step_us <= best->ev.step_us + SG_BUCKET_TIE_US;
  if (shorter || (tie && merged (c.specs, c.n) > merged (best->specs, best->n))) {
    sg_bucket_specs_free (best->specs, best->n);
    *best = c;
  } else {
    sg_bucket_specs_free (c.specs, c.n);
  }
}

/* Refines @c in place (refine.c). */
static void
refine (SgBucketSearch *s, SgBucketChoice *c)
{
  int32_t n;
  SgBucketSpec *r = sg_bucket_refine (s, c->specs, c->n, &c->ev, &n);
  sg_bucket_specs_free (c->specs, c->n);
  c->specs = r;
  c->n = n;
}

/* True when the rule lowers one of @specs grouped (or they say so). */
static bool
any_grouped (const SgBucketSearch *s, const SgBucketSpec *specs, int32_t n)
{
  g_autofree SgBucketSpec *l = g_memdup2 (specs, sizeof *specs * (size_t)MAX (n, 1));
  sg_bucket_lower_specs (s, l, n);
  for (int32_t b = 0; b < n; b++)
    if (l[b].lowering == SG_BUCKET_LOWERING_GROUPED)
      return true;
  return false;
}

typedef enum { SEARCH_GREEDY, SEARCH_FLAT, SEARCH_LAYER, N_SEARCHES } Which;

/* One search: the greedy refined (@which GREEDY), the flat-only greedy
 * refined (FLAT: every bucket flat and the cap on every bucket, what the
 * pass did before grouped buckets; a grouped merge the greedy kept early
 * can hold back flat merges that end shorter, across machines every
 * member of a group paying a network latency), or the per-layer buckets
 * in @c refined (LAYER). False with @error when a greedy fails. */
static bool
search (SgBucketSearch *s, Which which, const SgBucketEval *base, SgBucketChoice *c,
        GError **error)
{
  if (which == SEARCH_LAYER) {
    refine (s, c);
    return true;
  }
  if (which == SEARCH_FLAT) {
    s->lowering = SG_BUCKET_LOWERING_FLAT;
    s->flat_only = true;
  }
  *c = (SgBucketChoice){ .source = SG_BUCKET_FROM_GREEDY };
  c->specs = sg_bucket_greedy (s, base, &c->ev, &c->n, error);
  bool ok = c->specs != NULL;
  if (ok) /* (refined to no bucket, the specs may be NULL) */
    refine (s, c);
  if (which == SEARCH_FLAT) {
    for (int32_t b = 0; b < c->n; b++) /* decided now: the rule would not keep them flat */
      c->specs[b].lowering = SG_BUCKET_LOWERING_FLAT;
    s->lowering = SG_BUCKET_LOWERING_AUTO;
    s->flat_only = false;
  }
  return ok;
}

/* A search of the job below: its copy of the search, counts and result. */
typedef struct {
  SgBucketSearch s;
  SgBucketStats st;
  SgBucketChoice c;
  GError *error;
  bool ok, run;
} Side;

typedef struct {
  Side side[N_SEARCHES];
  Which order[N_SEARCHES]; /* the task of each search */
  const SgBucketEval *base;
} Job;

static void
side_task (gpointer data, int32_t t, int32_t worker)
{
  Job *j = data;
  Side *x = &j->side[j->order[t]];
  x->s.owner = worker;
  x->ok = search (&x->s, j->order[t], j->base, &x->c, &x->error);
  x->run = true;
}

/* @root for a search beside the others: its own statistics (counts from
 * zero), queries' scratch and rule memo, asking on @home. */
static void
side_init (Side *x, const SgBucketSearch *root, SgBucketWorker *home)
{
  x->s = *root;
  memset (&x->st, 0, sizeof x->st);
  x->s.st = &x->st;
  x->s.aug = sg_bucket_constraints (root->g);
  x->s.lower_memo = sg_bucket_memo_new (NULL);
  x->s.home = home;
}

static void
side_clear (Side *x, const SgBucketSearch *root)
{
  if (x->s.home && x->s.home != root->home)
    sg_bucket_replica_give (root->replicas, x->s.home);
  sg_aug_free (x->s.aug);
  g_hash_table_unref (x->s.lower_memo);
  g_clear_error (&x->error);
}

/* The counts of @from added to @to. */
static void
counts_add (SgBucketStats *to, const SgBucketStats *from)
{
  to->merges_accepted += from->merges_accepted;
  to->refused_cycle += from->refused_cycle;
  to->refused_cap += from->refused_cap;
  to->refused_memory += from->refused_memory;
  to->refused_step += from->refused_step;
  to->refused_budget += from->refused_budget;
  to->refused_predicted += from->refused_predicted;
  to->simulations += from->simulations;
  to->lowering_flips += from->lowering_flips;
}

/* The searches @want side by side on the pool, each one that gets a
 * worker; a search left out has side[].run false. */
static void
side_by_side (SgBucketSearch *s, const bool *want, SgBucketChoice *layer, Job *j)
{
  int32_t n = 0;
  for (Which w = 0; w < N_SEARCHES; w++) {
    if (!want[w])
      continue;
    /* the greedy asks on the pass's own worker, the others on their own */
    SgBucketWorker *home = w == SEARCH_GREEDY ? s->home : sg_bucket_replica_take (s->replicas);
    if (!home)
      continue;
    side_init (&j->side[w], s, home);
    if (w == SEARCH_LAYER)
      j->side[w].c = *layer;
    j->order[n++] = w;
  }
  if (n > 1)
    sg_pool_run (s->cfg->pool, n, side_task, j);
  else if (n == 1) /* one search alone: on this thread, as worker it is */
    side_task (j, 0, s->owner);
}

bool
sg_bucket_searches (SgBucketSearch *s, const SgBucketEval *base, SgBucketChoice *greedy,
                    SgBucketChoice *layer, bool refine_layer, GError **error)
{
  bool auto_lowering = s->lowering == SG_BUCKET_LOWERING_AUTO;
  bool want[N_SEARCHES] = { [SEARCH_GREEDY] = true, [SEARCH_FLAT] = auto_lowering,
                            [SEARCH_LAYER] = refine_layer };
  Job j = { .base = base };
  if (sg_bucket_ahead_width (s) > 1 && (want[SEARCH_FLAT] || want[SEARCH_LAYER]))
    side_by_side (s, want, layer, &j);
  /* in the order of the searches one after the other: the greedy; the
   * flat-only greedy when the greedy grouped a bucket; the per-layer
   * buckets; each not run beside the others runs now, on the pass's own
   * worker and counts */
  Side *g = &j.side[SEARCH_GREEDY], *f = &j.side[SEARCH_FLAT], *l = &j.side[SEARCH_LAYER];
  bool ok = g->run ? g->ok : search (s, SEARCH_GREEDY, base, greedy, error);
  if (g->run) {
    counts_add (s->st, &g->st);
    *greedy = g->c;
    if (!ok)
      g_propagate_error (error, g_steal_pointer (&g->error));
  }
  bool flat = ok && auto_lowering && any_grouped (s, greedy->specs, greedy->n);
  if (flat && f->run) {
    counts_add (s->st, &f->st);
    ok = f->ok;
    if (ok)
      sg_bucket_keep_better (greedy, f->c);
    else
      g_propagate_error (error, g_steal_pointer (&f->error));
  } else if (flat) {
    SgBucketChoice c;
    ok = search (s, SEARCH_FLAT, base, &c, error);
    if (ok)
      sg_bucket_keep_better (greedy, c);
  } else if (f->run) { /* not needed after all: nothing of it counts */
    sg_bucket_specs_free (f->c.specs, f->c.n);
  }
  if (ok && refine_layer) {
    if (l->run) {
      counts_add (s->st, &l->st);
      *layer = l->c;
    } else {
      search (s, SEARCH_LAYER, base, layer, NULL);
    }
  } else if (l->run) { /* a greedy failed: the pass fails, the layer's set goes */
    *layer = l->c;
  }
  for (Which w = 0; w < N_SEARCHES; w++)
    if (j.side[w].s.g)
      side_clear (&j.side[w], s);
  return ok;
}
