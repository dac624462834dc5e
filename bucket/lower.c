/* lower.c: how each bucket is lowered, flat or grouped.
 *
 * A flat bucket is one NCCL call over a packed buffer: the per-call cost
 * is paid once, but the copies zero-copy cannot elide run on the compute
 * stream (graph/elide.c: each all_gather member copied out of the
 * rank-major result, every reduce_scatter member interleaved into the
 * input). A grouped bucket is one coalesced collective, one NCCL group of
 * the members' own calls: no copy and one launch, but every member still
 * runs its own NCCL algorithm (estimate/'s sg_cost_coalesced_us; NCCL
 * issue 725: a group of many small reduce_scatters is much slower than
 * one over their concatenation).
 *
 * The local rule prices both lowerings of one bucket from the cost model:
 * flat = the flat call at the bucket's size + the copies that always stay
 * (rank_major unpacks, the interleaved pack; the others are assumed
 * elided, as they are for FSDP's parameter shards and gradients); grouped
 * = the coalesced call; the cheaper wins (flat on a tie). The byte cap
 * (--bucket-cap) bounds a flat bucket's buffer: a larger bucket is
 * grouped, which needs no buffer of its own. The searches
 * (bucket.c, refine.c, the per-layer set) judge every proposal with its
 * buckets lowered by the rule. The chosen set is then re-lowered one
 * bucket at a time, the closest calls of the rule first: a bucket whose
 * other lowering the simulator predicts to shorten the step keeps it.
 * --bucket-lowering flat / grouped lowers every bucket that way instead.
 * Mirrors: the cost-based choice between concatenated and grouped
 * collectives of PyTorch's bucketers (torch/_inductor/fx_passes/
 * bucketing.py emits either a flat buffer or the *_coalesced ops).
 * Requires: the search of run.c (a cost model). Invalidates: nothing.
 */
#include "bucket-private.h"

#include <math.h>
#include <string.h>

/* Simulations of the re-lowering: as refine.c's (fewer on large graphs). */
#define RELOWER_SIMULATIONS 64
#define RELOWER_NODES 20000

/* The two lowerings of the @n collectives @colls (one bucket) as the rule
 * prices them: *@flat_us (the flat call plus its inherent copies) and
 * *@grouped_us (the coalesced call), and the comm time of each; only the
 * flat call's comm time when @want is FLAT, only the coalesced call when
 * GROUPED (the others NAN). @sizes: the members' sg_node_comm_bytes, or
 * NULL to compute them. Returns the bucket's bytes. */
static uint64_t
price (const SgGraph *g, const SgNodeId *colls, const uint64_t *sizes, int32_t n,
       SgBucketLowering want, double *flat_us, double *grouped_us, double *flat_comm_us)
{
  const SgCostModel *cm = sg_graph_cost_model (g);
  const SgNode *c0 = &g->nodes[colls[0]];
  const int32_t nodes = sg_cost_group_nodes (cm, &g->groups[c0->group]);
  g_autofree uint64_t *own = sizes ? NULL : g_new (uint64_t, (size_t)n);
  const uint64_t *bytes = sizes ? sizes : own;
  bool copied = want == SG_BUCKET_LOWERING_AUTO;
  uint64_t total = 0;
  double copies = 0.0;
  for (int32_t i = 0; i < n; i++) {
    if (own)
      own[i] = sg_node_comm_bytes (g, colls[i]);
    total += bytes[i];
    /* an all_gather member's result copied out of the rank-major buffer */
    if (copied && c0->kind == SG_OP_ALL_GATHER && c0->group_size > 1)
      copies += sg_cost_copy_us (cm, 2 * bytes[i]);
  }
  /* the reduce_scatter input interleaved: every member's input copied once */
  if (copied && c0->kind == SG_OP_REDUCE_SCATTER && c0->group_size > 1)
    copies += sg_cost_copy_us (cm, 2 * total);
  SgCostSource src;
  *flat_us = *grouped_us = *flat_comm_us = NAN;
  if (want != SG_BUCKET_LOWERING_GROUPED)
    *flat_comm_us = sg_cost_collective_us (cm, c0->kind, c0->meta.dtype, total, c0->group_size,
                                           nodes, &src);
  if (copied)
    *flat_us = *flat_comm_us + copies;
  if (want != SG_BUCKET_LOWERING_FLAT)
    *grouped_us = sg_cost_coalesced_us (cm, c0->kind, c0->meta.dtype, bytes, n, c0->group_size,
                                        nodes, &src);
  return total;
}

bool
sg_bucket_lower_rule_sized (const SgGraph *g, SgBucketLowering forced, uint64_t cap,
                            const SgNodeId *colls, const uint64_t *sizes, int32_t n,
                            double *comm_us)
{
  if (forced != SG_BUCKET_LOWERING_AUTO && !comm_us)
    return forced == SG_BUCKET_LOWERING_GROUPED;
  double flat, grouped, flat_comm;
  uint64_t bytes = price (g, colls, sizes, n, forced, &flat, &grouped, &flat_comm);
  bool use_grouped = forced == SG_BUCKET_LOWERING_AUTO ? grouped < flat || bytes > cap
                                                       : forced == SG_BUCKET_LOWERING_GROUPED;
  if (comm_us)
    *comm_us = use_grouped ? grouped : flat_comm;
  return use_grouped;
}

bool
sg_bucket_lower_rule (const SgGraph *g, SgBucketLowering forced, uint64_t cap,
                      const SgNodeId *colls, int32_t n, double *comm_us)
{
  return sg_bucket_lower_rule_sized (g, forced, cap, colls, NULL, n, comm_us);
}

SgBucketMemoKey *
sg_bucket_memo_key (int32_t n)
{
  SgBucketMemoKey *k = g_malloc (sizeof *k + sizeof (int32_t) * (size_t)MAX (n, 1));
  k->n = n;
  return k;
}

static guint
memo_hash (gconstpointer p)
{
  const SgBucketMemoKey *k = p;
  guint h = 2166136261u ^ (guint)k->n;
  for (int32_t i = 0; i < k->n; i++)
    h = (h ^ (guint)k->items[i]) * 16777619u;
  return h;
}

static gboolean
memo_equal (gconstpointer a, gconstpointer b)
{
  const SgBucketMemoKey *x = a, *y = b;
  return x->n == y->n && memcmp (x->items, y->items, sizeof (int32_t) * (size_t)x->n) == 0;
}

GHashTable *
sg_bucket_memo_new (GDestroyNotify value_free)
{
  return g_hash_table_new_full (memo_hash, memo_equal, g_free, value_free);
}

/* The rule's verdict (grouped or not) on the bucket of @colls: the
 * searches ask again for the same buckets trial after trial, so the
 * verdicts are kept by members (the rule is a function of them). */
static bool
rule_of (const SgBucketSearch *s, const SgNodeId *colls, int32_t n)
{
  if (!s->lower_memo)
    return sg_bucket_lower_rule (s->g, SG_BUCKET_LOWERING_AUTO, s->cap, colls, n, NULL);
  g_autofree SgBucketMemoKey *k = sg_bucket_memo_key (n);
  memcpy (k->items, colls, sizeof (SgNodeId) * (size_t)n);
  gpointer v;
  if (g_hash_table_lookup_extended (s->lower_memo, k, NULL, &v))
    return GPOINTER_TO_INT (v);
  bool grouped = sg_bucket_lower_rule (s->g, SG_BUCKET_LOWERING_AUTO, s->cap, colls, n, NULL);
  g_hash_table_insert (s->lower_memo, g_steal_pointer (&k), GINT_TO_POINTER (grouped));
  return grouped;
}

void
sg_bucket_lower_specs (const SgBucketSearch *s, SgBucketSpec *specs, int32_t n)
{
  SgBucketLowering forced = s->lowering;
  for (int32_t b = 0; b < n; b++) {
    if (forced != SG_BUCKET_LOWERING_AUTO)
      specs[b].lowering = forced;
    else if (specs[b].lowering == SG_BUCKET_LOWERING_AUTO)
      specs[b].lowering = rule_of (s, specs[b].members, specs[b].n_members)
                            ? SG_BUCKET_LOWERING_GROUPED
                            : SG_BUCKET_LOWERING_FLAT;
  }
}

SgBucketLowering
sg_bucket_lowering_other (SgBucketLowering l)
{
  return l == SG_BUCKET_LOWERING_GROUPED ? SG_BUCKET_LOWERING_FLAT : SG_BUCKET_LOWERING_GROUPED;
}

typedef struct {
  int32_t spec;
  double margin; /* |flat - grouped| of the rule: small = a close call */
} Close;

static int
by_margin (const void *a, const void *b)
{
  const Close *x = a, *y = b;
  return x->margin < y->margin ? -1 : x->margin > y->margin ? 1 : x->spec - y->spec;
}

/* The flips from the @t-th on, each alone on @specs as they are: what the
 * loop below judges while it keeps none; judged ahead, as many as the
 * search has threads to judge them (verdict.c). */
static void
prefetch_flips (SgBucketSearch *s, const SgBucketSpec *specs, int32_t n, const Close *order,
                int64_t t, int64_t budget)
{
  int32_t k = (int32_t)MIN (budget - t, (int64_t)sg_bucket_ahead_width (s));
  if (k < 2)
    return;
  g_autofree SgBucketSet *sets = g_new (SgBucketSet, (size_t)k);
  g_autofree SgBucketSpec *copies = g_new (SgBucketSpec, (size_t)k * (size_t)n);
  for (int32_t i = 0; i < k; i++) {
    SgBucketSpec *c = &copies[(size_t)i * (size_t)n];
    memcpy (c, specs, sizeof *c * (size_t)n); /* members shared, not copied */
    SgBucketSpec *sp = &c[order[t + i].spec];
    sp->lowering = sg_bucket_lowering_other (sp->lowering);
    sets[i] = (SgBucketSet){ c, n };
  }
  sg_bucket_prefetch (s, sets, k);
}

void
sg_bucket_relower (SgBucketSearch *s, SgBucketSpec *specs, int32_t n, SgBucketEval *ev)
{
  if (n == 0 || s->lowering != SG_BUCKET_LOWERING_AUTO)
    return;
  g_autofree Close *order = g_new (Close, (size_t)n);
  int32_t m = 0;
  for (int32_t b = 0; b < n; b++) {
    double flat, grouped, comm;
    if (price (s->g, specs[b].members, NULL, specs[b].n_members, SG_BUCKET_LOWERING_AUTO, &flat,
               &grouped, &comm)
        <= s->cap)
      order[m++] = (Close){ b, fabs (flat - grouped) }; /* a larger one cannot be flat */
  }
  qsort (order, (size_t)m, sizeof *order, by_margin);
  int64_t budget = (int64_t)RELOWER_SIMULATIONS * RELOWER_NODES / MAX (s->g->n_nodes, 1);
  budget = MIN (CLAMP (budget, 4, RELOWER_SIMULATIONS), m);
  for (int64_t t = 0; t < budget; t++) {
    prefetch_flips (s, specs, n, order, t, budget);
    SgBucketSpec *sp = &specs[order[t].spec];
    SgBucketLowering was = sp->lowering;
    sp->lowering = sg_bucket_lowering_other (was);
    SgBucketEval e;
    bool ok = sg_bucket_evaluate (s, specs, n, &e);
    if (ok && e.step_us < ev->step_us - SG_BUCKET_TIE_US && e.peak_bytes <= s->peak_limit) {
      *ev = e;
      s->st->lowering_flips++;
    } else {
      sp->lowering = was;
    }
  }
}
