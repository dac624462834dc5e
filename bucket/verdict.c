/* verdict.c: the simulator's verdicts on sets of buckets
 * (sg_bucket_evaluate), kept by lowered specs, and verdicts judged ahead on
 * the pool's threads (sg_bucket_prefetch).
 *
 * A verdict is a trial graph (sg_bucket_trial), its zero-copy analysis,
 * the costs of its new nodes and its storages, judged by the simulator's
 * judge (schedule/judge.c): step, exposed time and peak, exactly those of
 * a whole simulation. It is a function of the lowered specs alone while
 * the search lives (its graph and cost model fixed), so the search keeps
 * it by them (s->eval_memo) and answers a repeat from there.
 * The searches decide one proposal at a time, but many of the sets they
 * will ask about next are known before they ask: every cut of a bucket
 * (refine.c) is judged against the same current set, and so are the
 * greedy's halving windows, the refinement's merges and the re-lowering's
 * flips while proposals keep being refused. A search names such sets
 * ahead (sg_bucket_prefetch); they are judged in parallel, each on a
 * worker's own trial rewrite, judge and scratch (SgBucketWorker, over a
 * fork of the graph: sg_rewrite_fork), and their verdicts enter the memo,
 * where sg_bucket_evaluate finds them. The decisions, their order and the
 * counts (`simulations`) stay the sequential search's: which thread
 * judged a verdict, or whether it was judged ahead at all, changes
 * nothing; a set named ahead and never asked about only cost time.
 * Mirrors: speculative parallel evaluation of a local search's
 * neighbourhood, committed in order.
 * Requires: the search of run.c (sg_bucket_search_init). Invalidates:
 * nothing (trial graphs only).
 */
#include "bucket-private.h"

#include <string.h>

/* With the validator on: the judge's totals against a full simulation's. */
static void
check_judge (const SgGraph *tg, const SgSimTotals *t)
{
  SgSimResult r;
  if (!sg_simulate_totals (tg, &r, NULL))
    return;
  if (r.step_us != t->step_us || r.exposed_us != t->exposed_us || r.peak_bytes != t->peak_bytes)
    g_error ("bucket: the judge's totals (step %.17g, exposed %.17g, peak %" G_GUINT64_FORMAT
             ") differ from a full simulation's (%.17g, %.17g, %" G_GUINT64_FORMAT ")",
             t->step_us, t->exposed_us, t->peak_bytes, r.step_us, r.exposed_us, r.peak_bytes);
  sg_sim_result_clear (&r);
}

/* With the validator on: the analysis of a trial graph reusing the last
 * one's memory (sg_graph_elision_again) against a new one's. */
static void
check_elision (const SgGraph *tg, const SgElision *el)
{
  SgElision fresh;
  sg_graph_elision (tg, &fresh);
  size_t n = (size_t)tg->n_nodes;
  bool same = fresh.n_elided == el->n_elided && !fresh.roll == !el->roll
              && memcmp (fresh.reason, el->reason, n) == 0
              && memcmp (fresh.view_of, el->view_of, n * sizeof (SgNodeId)) == 0
              && memcmp (fresh.view_off, el->view_off, n * sizeof (uint64_t)) == 0
              && memcmp (fresh.root, el->root, n * sizeof (SgNodeId)) == 0
              && (!fresh.roll || memcmp (fresh.roll, el->roll, n * sizeof (SgRollPlace)) == 0);
  sg_elision_clear (&fresh);
  if (!same)
    g_error ("bucket: the zero-copy analysis of a trial graph reusing the last one's memory "
             "differs from a new one");
}

static void
worker_init (SgBucketWorker *w, SgGraph *g, bool verify, SgPool *pool)
{
  *w = (SgBucketWorker){ .g = g, .pool = pool };
  w->trial = sg_bucket_trials_new (g, verify, pool);
  w->judge = sg_sim_judge_new ();
  sg_sim_judge_set_pool (w->judge, pool, SG_SIM_JUDGE_RANGES_MIN);
  sg_elision_set_pool (&w->el, pool);
}

static void
worker_free (SgBucketWorker *w)
{
  sg_bucket_trials_free (w->trial);
  sg_sim_judge_free (w->judge);
  g_free (w->node_alloc);
  g_free (w->storage_alloc);
  g_free (w->added);
  sg_elision_clear (&w->el);
  if (w->g->fork_of) /* a fork: the search's graph is not ours */
    sg_graph_free (w->g);
  g_free (w);
}

struct SgBucketReplicas {
  GMutex lock;
  SgGraph *g;
  bool verify;
  SgPool *pool;
  SgBucketWorker **all; /* made so far; all[0] on @g itself */
  bool *held;
  int32_t n, max;
};

SgBucketReplicas *
sg_bucket_replicas_new (SgGraph *g, const SgConfig *cfg, int32_t max)
{
  SgBucketReplicas *r = g_new0 (SgBucketReplicas, 1);
  g_mutex_init (&r->lock);
  r->g = g;
  r->verify = cfg && cfg->validate_between;
  r->pool = cfg ? cfg->pool : NULL;
  r->max = MAX (max, 1);
  r->all = g_new0 (SgBucketWorker *, (size_t)r->max);
  r->held = g_new0 (bool, (size_t)r->max);
  r->all[0] = g_new0 (SgBucketWorker, 1);
  worker_init (r->all[0], g, r->verify, r->pool);
  r->n = 1;
  return r;
}

void
sg_bucket_replicas_free (SgBucketReplicas *r)
{
  if (!r)
    return;
  for (int32_t i = 0; i < r->n; i++)
    worker_free (r->all[i]);
  g_free (r->all);
  g_free (r->held);
  g_mutex_clear (&r->lock);
  g_free (r);
}

SgBucketWorker *
sg_bucket_replica_take (SgBucketReplicas *r)
{
  g_mutex_lock (&r->lock);
  int32_t i = 0;
  while (i < r->n && r->held[i])
    i++;
  bool got = i < r->max, make = got && i == r->n;
  if (got)
    r->held[i] = true;
  if (make)
    r->n++;
  g_mutex_unlock (&r->lock);
  if (!got)
    return NULL;
  if (make) { /* outside the lock: a fork copies the graph's pools */
    SgBucketWorker *w = g_new0 (SgBucketWorker, 1);
    worker_init (w, sg_rewrite_fork (r->g), r->verify, r->pool);
    g_mutex_lock (&r->lock);
    r->all[i] = w;
    g_mutex_unlock (&r->lock);
  }
  return r->all[i];
}

void
sg_bucket_replica_give (SgBucketReplicas *r, SgBucketWorker *w)
{
  g_mutex_lock (&r->lock);
  for (int32_t i = 0; i < r->n; i++)
    if (r->all[i] == w)
      r->held[i] = false;
  g_mutex_unlock (&r->lock);
}

/* Trial graphs from this many nodes on fill their allocations in chunks
 * on the worker's pool. */
#define ALLOC_PARALLEL 8192
#define ALLOC_CHUNK 4096

/* The allocation of every node of a trial graph: a base node's is the
 * base graph's (the same in every trial), a new node's is computed; the
 * new nodes are listed in id order. */
typedef struct {
  const SgGraph *tg;
  const SgNodeId *orig;
  const uint64_t *base_alloc;
  uint64_t *node_alloc;
  SgNodeId *added;   /* chunk r lists its new nodes from its first id on */
  int32_t *n_added;  /* per chunk */
} Alloc;

static void
alloc_task (gpointer data, int32_t r, int32_t worker)
{
  (void)worker;
  Alloc *a = data;
  int32_t lo, hi, k = 0;
  sg_range_of (r, ALLOC_CHUNK, a->tg->n_nodes, &lo, &hi);
  for (SgNodeId i = lo; i < hi; i++) {
    if (a->orig[i] != SG_NO_NODE) {
      a->node_alloc[i] = a->base_alloc[a->orig[i]];
    } else {
      a->node_alloc[i] = sg_node_alloc_bytes (a->tg, i);
      a->added[lo + k++] = i;
    }
  }
  a->n_added[r] = k;
}

/* Fills @w->node_alloc for trial graph @tg and lists its new nodes in
 * @w->added (in id order); returns how many. Large graphs in chunks on
 * the worker's pool, each listing its new nodes from its own first id on,
 * moved together after. */
static int32_t
trial_allocs (const SgBucketSearch *s, SgBucketWorker *w, const SgGraph *tg)
{
  const int32_t n = tg->n_nodes, chunks = sg_ranges (n, ALLOC_CHUNK);
  g_autofree int32_t *counts = g_new (int32_t, (size_t)chunks);
  Alloc a = { tg, sg_graph_trial_origins (tg), s->base_alloc, w->node_alloc, w->added, counts };
  sg_pool_run (n >= ALLOC_PARALLEL ? w->pool : NULL, chunks, alloc_task, &a);
  int32_t total = 0;
  for (int32_t r = 0; r < chunks; r++) {
    memmove (w->added + total, w->added + (size_t)r * ALLOC_CHUNK,
             sizeof (SgNodeId) * (size_t)counts[r]);
    total += counts[r];
  }
  return total;
}

/* The simulator's verdict, with @w's trial rewrite, judge and scratch, on
 * @s->g with the lowered @specs applied: the trial graph, its zero-copy
 * analysis, storages and the judge. Reads @s only. */
static bool
judge_trial (const SgBucketSearch *s, SgBucketWorker *w, const SgBucketSpec *specs,
             int32_t n_specs, SgBucketEval *out)
{
  g_autoptr (GError) err = NULL;
  SgGraph *tg = sg_bucket_trial (w->trial, specs, n_specs, &err);
  if (!tg)
    return false;
  if ((size_t)MAX (tg->n_nodes, 1) > w->n_alloc) { /* a trial graph grows by its new nodes */
    w->n_alloc = (size_t)MAX (tg->n_nodes, 1) + (size_t)tg->n_nodes / 4;
    w->node_alloc = g_renew (uint64_t, w->node_alloc, w->n_alloc);
    w->storage_alloc = g_renew (uint64_t, w->storage_alloc, w->n_alloc);
    w->added = g_renew (SgNodeId, w->added, w->n_alloc);
  }
  const int32_t n_added = trial_allocs (s, w, tg);
  /* one zero-copy analysis prices the new copies and gives the liveness
   * its storages; only new nodes lack a cost (base nodes have theirs,
   * s->base_costed) */
  SgElision *el = &w->el;
  sg_graph_elision_again (tg, el);
  if (s->base_costed)
    sg_cost_new_nodes_elided (sg_graph_cost_model (tg), tg, w->added, n_added, el, w->pool);
  else
    sg_cost_new_nodes_elided (sg_graph_cost_model (tg), tg, NULL, 0, el, w->pool);
  uint64_t *alloc = sg_elision_storage_bytes (tg, el, w->node_alloc, w->storage_alloc);
  SgSimTotals t;
  bool ok = sg_sim_judge_totals (w->judge, tg, el->root, alloc, &t, &err);
  if (ok && s->cfg && s->cfg->validate_between) {
    check_judge (tg, &t);
    check_elision (tg, el);
  }
  sg_graph_free (tg);
  if (!ok)
    return false;
  out->exposed_us = t.exposed_us;
  out->step_us = t.step_us;
  out->peak_bytes = t.peak_bytes;
  return true;
}

/* A memo entry: the verdict, or false when the rewrite refused the specs. */
typedef struct {
  bool ok;
  SgBucketEval ev;
} Verdict;

/* Appends @v to @buf as a LEB128 varint; returns the new end. */
static uint8_t *
put_varint (uint8_t *buf, uint64_t v)
{
  while (v >= 0x80) {
    *buf++ = (uint8_t)(v | 0x80);
    v >>= 7;
  }
  *buf++ = (uint8_t)v;
  return buf;
}

/* @specs (lowered) spelled out as a memo key: per bucket its lowering,
 * member count and members, each member as the zigzag difference from the
 * one before it, all as varints (a key is the whole set of buckets and the
 * memo keeps one per set judged: about a quarter of the 4-byte ids). The
 * encoding is injective, so equal keys are equal specs; items[0] is the
 * byte count, the bytes follow (the last word zero-padded). */
static SgBucketMemoKey *
specs_key (const SgBucketSpec *specs, int32_t n_specs)
{
  size_t n = 0;
  for (int32_t b = 0; b < n_specs; b++)
    n += 2 + (size_t)specs[b].n_members;
  g_autofree uint8_t *bytes = g_malloc (10 * n + 1);
  uint8_t *w = bytes;
  int64_t prev = 0;
  for (int32_t b = 0; b < n_specs; b++) {
    w = put_varint (w, (uint64_t)specs[b].lowering);
    w = put_varint (w, (uint64_t)specs[b].n_members);
    for (int32_t i = 0; i < specs[b].n_members; i++) {
      int64_t d = (int64_t)specs[b].members[i] - prev;
      prev = specs[b].members[i];
      w = put_varint (w, d >= 0 ? 2 * (uint64_t)d : 2 * (uint64_t)(-d) - 1);
    }
  }
  size_t len = (size_t)(w - bytes);
  SgBucketMemoKey *k = sg_bucket_memo_key (1 + (int32_t)((len + 3) / 4));
  k->items[0] = (int32_t)len;
  k->items[k->n - 1] = 0;
  memcpy (&k->items[1], bytes, len);
  return k;
}

/* (transfer full) @specs with every undecided lowering decided by the
 * rule (lower.c); NULL for none. */
static SgBucketSpec *
lowered_copy (const SgBucketSearch *s, const SgBucketSpec *specs, int32_t n_specs)
{
  if (n_specs == 0)
    return NULL;
  SgBucketSpec *l = g_memdup2 (specs, sizeof *specs * (size_t)n_specs);
  sg_bucket_lower_specs (s, l, n_specs);
  return l;
}

/* The searches judge some sets of buckets more than once (the greedy, its
 * flat-only rerun and the refinements meet the same sets), and some were
 * judged ahead (sg_bucket_prefetch): a verdict in s->eval_memo answers.
 * Every call counts as a simulation, as before the memo. */
bool
sg_bucket_evaluate (SgBucketSearch *s, const SgBucketSpec *specs, int32_t n_specs,
                    SgBucketEval *out)
{
  s->st->simulations++;
  g_autofree SgBucketSpec *lowered = lowered_copy (s, specs, n_specs);
  if (lowered)
    specs = lowered;
  g_autofree SgBucketMemoKey *key = s->eval_memo ? specs_key (specs, n_specs) : NULL;
  if (key) {
    g_mutex_lock (s->memo_lock);
    const Verdict *seen = g_hash_table_lookup (s->eval_memo, key);
    Verdict v = seen ? *seen : (Verdict){ 0 };
    g_mutex_unlock (s->memo_lock);
    if (seen) {
      if (v.ok)
        *out = v.ev;
      return v.ok;
    }
  }
  Verdict *v = g_new0 (Verdict, 1);
  v->ok = judge_trial (s, s->home, specs, n_specs, &v->ev);
  if (v->ok)
    *out = v->ev;
  bool ok = v->ok;
  if (key) { /* (another search may have put the same verdict first) */
    g_mutex_lock (s->memo_lock);
    g_hash_table_replace (s->eval_memo, g_steal_pointer (&key), v);
    g_mutex_unlock (s->memo_lock);
  } else {
    g_free (v);
  }
  return ok;
}

/* --- judged ahead ---------------------------------------------------------- */

typedef struct {
  SgBucketSearch *s;
  SgBucketSpec **lowered; /* per set to judge */
  const int32_t *n_specs;
  Verdict *verdicts;
  bool *judged;          /* per set: a worker was free to judge it */
  int32_t n, n_tasks;
} Ahead;

/* Task @t judges a run of consecutive sets (neighbours differ least, so
 * each worker's judge and layout reuse the most of their last trial): on
 * the search's own worker when it runs on the search's thread (which only
 * waits for the job meanwhile), else on one no one holds; none free, and
 * the sets stay for the search to judge when it asks. */
static void
ahead_task (gpointer data, int32_t t, int32_t worker)
{
  Ahead *a = data;
  SgBucketSearch *s = a->s;
  bool own = worker == s->owner;
  SgBucketWorker *w = own ? s->home : sg_bucket_replica_take (s->replicas);
  if (!w)
    return;
  int32_t lo = (int32_t)((int64_t)a->n * t / a->n_tasks);
  int32_t hi = (int32_t)((int64_t)a->n * (t + 1) / a->n_tasks);
  for (int32_t i = lo; i < hi; i++) {
    a->verdicts[i].ok = judge_trial (s, w, a->lowered[i], a->n_specs[i], &a->verdicts[i].ev);
    a->judged[i] = true;
  }
  if (!own)
    sg_bucket_replica_give (s->replicas, w);
}

int32_t
sg_bucket_ahead_width (const SgBucketSearch *s)
{
  if (!s->eval_memo)
    return 1;
  return MAX (1, MIN (sg_pool_size (s->cfg ? s->cfg->pool : NULL), s->ahead));
}

void
sg_bucket_prefetch (SgBucketSearch *s, const SgBucketSet *sets, int32_t n_sets)
{
  SgPool *pool = s->cfg ? s->cfg->pool : NULL;
  int32_t threads = sg_bucket_ahead_width (s);
  if (threads < 2 || n_sets < 2)
    return;
  /* the sets not judged yet, each once, lowered here (the rule's memo is
   * the search's own) */
  g_autofree SgBucketSpec **lowered = g_new0 (SgBucketSpec *, (size_t)n_sets);
  g_autofree int32_t *n_specs = g_new (int32_t, (size_t)n_sets);
  g_autofree SgBucketMemoKey **keys = g_new0 (SgBucketMemoKey *, (size_t)n_sets);
  g_autoptr (GHashTable) batch = sg_bucket_memo_new (NULL);
  int32_t n = 0;
  for (int32_t i = 0; i < n_sets; i++) {
    SgBucketSpec *l = lowered_copy (s, sets[i].specs, sets[i].n_specs);
    SgBucketMemoKey *k = specs_key (l ? l : sets[i].specs, sets[i].n_specs);
    g_mutex_lock (s->memo_lock);
    bool known = g_hash_table_contains (s->eval_memo, k);
    g_mutex_unlock (s->memo_lock);
    if (known || g_hash_table_contains (batch, k)) {
      g_free (k);
      g_free (l);
      continue;
    }
    g_hash_table_add (batch, k);
    lowered[n] = l, n_specs[n] = sets[i].n_specs, keys[n] = k;
    n++;
  }
  g_hash_table_steal_all (batch); /* the keys are keys[] */
  if (n >= 2) {
    g_autofree Verdict *verdicts = g_new0 (Verdict, (size_t)n);
    g_autofree bool *judged = g_new0 (bool, (size_t)n);
    Ahead a = { s, lowered, n_specs, verdicts, judged, n, MIN (n, threads) };
    sg_pool_run (pool, a.n_tasks, ahead_task, &a);
    g_mutex_lock (s->memo_lock);
    for (int32_t i = 0; i < n; i++)
      if (judged[i])
        g_hash_table_replace (s->eval_memo, g_steal_pointer (&keys[i]),
                              g_memdup2 (&verdicts[i], sizeof (Verdict)));
    g_mutex_unlock (s->memo_lock);
  }
  /* a lone set is left to the search (judged when asked, on its worker) */
  for (int32_t i = 0; i < n; i++) {
    g_free (lowered[i]);
    g_free (keys[i]);
  }
}
