/* layers.c: FSDP2's per-layer buckets, found from the graph's structure.
 *
 * FSDP2 (torch.distributed.fsdp.fully_shard per transformer block) issues
 * one all_gather for all parameters of a block before its forward and one
 * reduce_scatter (plus, with HSDP, one all_reduce) for all their gradients
 * after its backward. The traced graph has one collective per parameter
 * and no module boundaries, so the blocks are recovered from data flow:
 *
 * 1. Parameter collectives: all_gathers whose input is a graph input (a
 *    parameter shard); reduce_scatters and all_reduces whose result
 *    reaches only the output node (gradients), directly or through the
 *    all_reduce of a replica group (HSDP).
 * 2. Dominators: from a virtual root over the graph inputs that are not
 *    parameter shards (the activations), over data edges, in id order (a
 *    DAG in topological order: idom(v) is the nearest common ancestor of
 *    v's reachable inputs; skew-binary jump pointers make that O(log n)).
 *    Parameter shards, their gathers and views are not reachable, so a
 *    forward consumer of a gathered weight is dominated by its
 *    activations only, and a weight gradient (saved activation x upstream
 *    gradient) by the residual-stream node at the start of the sub-layer
 *    that used the weight.
 * 3. The trunk: the heavy path of the dominator tree from the root (the
 *    child with the most nodes below it, ties on id), which is the
 *    residual stream: every later node of the step hangs below the next
 *    residual node, while a sub-layer's own nodes form a light subtree.
 *    Each parameter collective's anchor (the first reachable consumer of
 *    a gather, the producer of a gradient) belongs to the segment of its
 *    nearest trunk ancestor.
 * 4. Layers: consecutive segments with parameter collectives form the
 *    sequence a transformer repeats (attention, MLP, attention, MLP ...);
 *    the smallest period p whose shifted sequence of signatures (counts
 *    and bytes per kind) disagrees least is the number of segments per
 *    block, the periodic run starts where the first p signatures repeat,
 *    and segments before it are layers of their own (an embedding).
 *
 * Names are never read. One bucket per layer and key (kind, group, dtype,
 * reduce op), members in id order, split only where two members depend on
 * each other in the augmented graph (a cycle).
 * Mirrors: FSDP2's per-module parameter groups (FSDPParamGroup); the
 * dominator computation of Cooper, Harvey and Kennedy on a DAG; Myers'
 * skew-binary level ancestors.
 * Requires: users; the search's candidates and augmented graph (run.c).
 * Invalidates: nothing.
 */
#include "bucket-private.h"

#include <string.h>

/* Periods tried: segments per transformer block. */
#define MAX_PERIOD 8
/* Consumers of a gathered weight searched through its views and casts. */
#define MAX_CONE 64

enum { P_AG, P_RS, P_AR, P_KINDS };

typedef struct {
  const SgGraph *g;
  int32_t n;        /* nodes; the virtual root is index n */
  bool *reach;      /* reachable from the root */
  int32_t *idom, *depth, *jump;
  int32_t *trunk;   /* trunk[d]: the trunk node at depth d */
  int32_t n_trunk;
} Dom;

static int32_t
level_ancestor (const Dom *d, int32_t v, int32_t depth)
{
  while (d->depth[v] > depth)
    v = d->depth[d->jump[v]] >= depth ? d->jump[v] : d->idom[v];
  return v;
}

static int32_t
nca (const Dom *d, int32_t a, int32_t b)
{
  if (d->depth[a] > d->depth[b])
    a = level_ancestor (d, a, d->depth[b]);
  else
    b = level_ancestor (d, b, d->depth[a]);
  while (a != b) {
    if (d->jump[a] != d->jump[b])
      a = d->jump[a], b = d->jump[b];
    else
      a = d->idom[a], b = d->idom[b];
  }
  return a;
}

/* Adds @v below @p (skew-binary jump pointers: a jump skips to where the
 * parent's jump jumps when the two jumps below it are equally long). */
static void
attach (Dom *d, int32_t v, int32_t p)
{
  d->idom[v] = p;
  d->depth[v] = d->depth[p] + 1;
  int32_t j = d->jump[p];
  d->jump[v] = d->depth[p] - d->depth[j] == d->depth[j] - d->depth[d->jump[j]] ? d->jump[j] : p;
}

static void
dom_build (Dom *d, const SgGraph *g, const bool *param_input)
{
  int32_t n = g->n_nodes, root = n;
  d->g = g;
  d->n = n;
  d->reach = g_new0 (bool, (size_t)n + 1);
  d->idom = g_new (int32_t, (size_t)n + 1);
  d->depth = g_new0 (int32_t, (size_t)n + 1);
  d->jump = g_new (int32_t, (size_t)n + 1);
  d->idom[root] = d->jump[root] = root;
  d->reach[root] = true;
  for (SgNodeId v = 0; v < n; v++) {
    const SgNode *x = &g->nodes[v];
    d->idom[v] = -1;
    if (x->op == SG_NODE_PLACEHOLDER || x->op == SG_NODE_GET_ATTR) {
      if (!param_input[v]) {
        d->reach[v] = true;
        attach (d, v, root);
      }
      continue;
    }
    uint32_t k;
    const SgNodeId *in = sg_node_inputs (g, v, &k);
    int32_t a = -1;
    for (uint32_t j = 0; j < k; j++)
      if (d->reach[in[j]])
        a = a < 0 ? in[j] : nca (d, a, in[j]);
    if (a >= 0) {
      d->reach[v] = true;
      attach (d, v, a);
    }
  }
  /* the trunk: heavy children from the root */
  g_autofree int64_t *size = g_new0 (int64_t, (size_t)n + 1);
  g_autofree int32_t *heavy = g_new (int32_t, (size_t)n + 1);
  for (int32_t v = n - 1; v >= 0; v--)
    if (d->reach[v])
      size[v] += 1, size[d->idom[v]] += size[v];
  for (int32_t v = 0; v <= n; v++)
    heavy[v] = -1;
  for (int32_t v = 0; v < n; v++) {
    if (!d->reach[v])
      continue;
    int32_t p = d->idom[v];
    if (heavy[p] < 0 || size[v] > size[heavy[p]])
      heavy[p] = v;
  }
  d->trunk = g_new (int32_t, (size_t)n + 2);
  d->n_trunk = 0;
  for (int32_t t = root; t >= 0; t = heavy[t])
    d->trunk[d->n_trunk++] = t;
}

static void
dom_clear (Dom *d)
{
  g_free (d->reach);
  g_free (d->idom);
  g_free (d->depth);
  g_free (d->jump);
  g_free (d->trunk);
}

/* Depth of @v's nearest trunk ancestor (the trunk is a root path: the
 * ancestor at depth x is on it exactly for x up to that depth). */
static int32_t
trunk_depth (const Dom *d, int32_t v)
{
  int32_t lo = 0, hi = MIN (d->depth[v], d->n_trunk - 1);
  while (lo < hi) {
    int32_t mid = (lo + hi + 1) / 2;
    if (level_ancestor (d, v, mid) == d->trunk[mid])
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

/* True when everything reading @v ends at the output node: directly,
 * through aliases, or (for gradients of HSDP) through a bucketable
 * all_reduce whose result does. */
static bool
reaches_only_output (const SgGraph *g, SgNodeId v, int depth)
{
  uint32_t nu;
  const SgNodeId *u = sg_node_users (g, v, &nu);
  if (nu == 0 || depth > 8)
    return false;
  for (uint32_t i = 0; i < nu; i++) {
    const SgNode *x = &g->nodes[u[i]];
    SgNodeId w;
    if (x->op == SG_NODE_OUTPUT)
      continue;
    if (sg_op_is_alias (x->kind) && reaches_only_output (g, u[i], depth + 1))
      continue;
    if (x->kind == SG_OP_ALL_REDUCE && sg_bucket_member_check (g, u[i], &w, NULL)
        && reaches_only_output (g, w, depth + 1))
      continue;
    return false;
  }
  return true;
}

/* The first node reachable from the root that reads @w (a gathered weight)
 * through views and casts of it, or -1. */
static int32_t
first_consumer (const Dom *d, SgNodeId w)
{
  const SgGraph *g = d->g;
  SgNodeId stack[MAX_CONE], best = -1;
  int32_t top = 0, seen = 0;
  stack[top++] = w;
  while (top > 0 && seen < MAX_CONE) {
    SgNodeId v = stack[--top];
    seen++;
    uint32_t nu;
    const SgNodeId *u = sg_node_users (g, v, &nu);
    for (uint32_t i = 0; i < nu; i++) {
      if (d->reach[u[i]])
        best = best < 0 || u[i] < best ? u[i] : best;
      else if (g->nodes[u[i]].op != SG_NODE_OUTPUT && top < MAX_CONE)
        stack[top++] = u[i];
    }
  }
  return best;
}

typedef struct {
  int32_t n[P_KINDS];
  uint64_t bytes[P_KINDS];
} Sig;

static bool
sig_eq (const Sig *a, const Sig *b)
{
  return memcmp (a, b, sizeof *a) == 0;
}

/* Layer of every segment: prefix segments alone, then windows of the
 * period. Returns the number of layers. */
static int32_t
group_segments (const Sig *sig, int32_t m, int32_t *layer_of)
{
  int32_t best_p = 1, best_mism = G_MAXINT32;
  for (int32_t p = 1; p <= MIN (MAX_PERIOD, m / 2); p++) {
    int32_t mism = 0;
    for (int32_t j = 0; j + p < m; j++)
      mism += !sig_eq (&sig[j], &sig[j + p]);
    if (mism < best_mism)
      best_mism = mism, best_p = p;
  }
  int32_t p = best_p;
  if (best_mism > (m - p) / 2) /* no repetition worth the name */
    p = 1;
  int32_t start = 0; /* where the first p signatures repeat */
  for (; start + 2 * p <= m; start++) {
    bool rep = true;
    for (int32_t t = 0; t < p && rep; t++)
      rep = sig_eq (&sig[start + t], &sig[start + t + p]);
    if (rep)
      break;
  }
  if (start + 2 * p > m)
    start = 0;
  int32_t layers = 0;
  for (int32_t j = 0; j < start; j++)
    layer_of[j] = layers++;
  for (int32_t j = start; j < m; j += p, layers++)
    for (int32_t t = j; t < MIN (j + p, m); t++)
      layer_of[t] = layers;
  return layers;
}

/* Per candidate: its parameter kind (P_AG..) or -1. */
static void
classify (const SgBucketSearch *s, int32_t *pkind, bool *param_input)
{
  const SgGraph *g = s->g;
  for (int32_t i = 0; i < s->n_cands; i++) {
    const SgBucketCand *c = &s->cands[i];
    const SgNode *x = &g->nodes[c->c];
    uint32_t k;
    SgNodeId in = sg_node_inputs (g, c->c, &k)[0];
    SgNodeId root = sg_node_storage_root (g, in);
    SgNodeOp rop = g->nodes[root].op;
    pkind[i] = -1;
    if (x->kind == SG_OP_ALL_GATHER && (rop == SG_NODE_PLACEHOLDER || rop == SG_NODE_GET_ATTR)) {
      pkind[i] = P_AG;
      param_input[root] = true;
    } else if (x->kind == SG_OP_REDUCE_SCATTER && reaches_only_output (g, c->w, 0)) {
      pkind[i] = P_RS;
    } else if (x->kind == SG_OP_ALL_REDUCE && reaches_only_output (g, c->w, 0)) {
      pkind[i] = P_AR;
    }
  }
}

/* The node whose segment a parameter collective serves, or -1. */
static int32_t
anchor (const Dom *d, const SgBucketSearch *s, const int32_t *pkind, const int32_t *cand_of,
        const int32_t *anchors, int32_t i)
{
  const SgGraph *g = s->g;
  const SgBucketCand *c = &s->cands[i];
  if (pkind[i] == P_AG)
    return first_consumer (d, c->w);
  uint32_t k;
  SgNodeId root = sg_node_storage_root (g, sg_node_inputs (g, c->c, &k)[0]);
  if (g->nodes[root].kind == SG_OP_WAIT || sg_op_is_collective (g->nodes[root].kind)) {
    /* the all_reduce of a reduce_scatter's result (HSDP): its layer */
    SgNodeId coll = g->nodes[root].kind == SG_OP_WAIT ? sg_node_wait_target (g, root) : root;
    int32_t j = coll != SG_NO_NODE ? cand_of[coll] : -1;
    return j >= 0 && j < i ? anchors[j] : -1;
  }
  return d->reach[root] ? root : -1;
}

SgBucketSpec *
sg_bucket_per_layer (SgBucketSearch *s, int32_t *n_specs, int32_t *n_layers)
{
  SgGraph *g = s->g;
  int32_t n = g->n_nodes, nc = s->n_cands;
  *n_specs = 0;
  *n_layers = 0;
  sg_graph_fill_users (g);
  g_autofree int32_t *pkind = g_new (int32_t, (size_t)nc + 1);
  g_autofree bool *param_input = g_new0 (bool, (size_t)n + 1);
  classify (s, pkind, param_input);
  Dom d = { 0 };
  dom_build (&d, g, param_input);
  g_autofree int32_t *cand_of = g_new (int32_t, (size_t)n + 1);
  for (SgNodeId v = 0; v < n; v++)
    cand_of[v] = -1;
  for (int32_t i = 0; i < nc; i++)
    cand_of[s->cands[i].c] = i;
  /* segment (trunk depth) of every parameter collective */
  g_autofree int32_t *anchors = g_new (int32_t, (size_t)nc + 1);
  g_autofree int32_t *seg = g_new (int32_t, (size_t)nc + 1);
  g_autofree int32_t *seg_index = g_new (int32_t, (size_t)d.n_trunk + 1);
  for (int32_t t = 0; t < d.n_trunk; t++)
    seg_index[t] = -1;
  for (int32_t i = 0; i < nc; i++) {
    anchors[i] = pkind[i] >= 0 ? anchor (&d, s, pkind, cand_of, anchors, i) : -1;
    seg[i] = anchors[i] >= 0 ? trunk_depth (&d, anchors[i]) : -1;
    if (seg[i] >= 0)
      seg_index[seg[i]] = 0;
  }
  int32_t m = 0;
  for (int32_t t = 0; t < d.n_trunk; t++)
    if (seg_index[t] >= 0)
      seg_index[t] = m++;
  dom_clear (&d);
  if (m == 0)
    return NULL;
  g_autofree Sig *sig = g_new0 (Sig, (size_t)m);
  for (int32_t i = 0; i < nc; i++)
    if (seg[i] >= 0) {
      Sig *x = &sig[seg_index[seg[i]]];
      x->n[pkind[i]]++;
      x->bytes[pkind[i]] += s->cands[i].bytes;
    }
  g_autofree int32_t *layer_of = g_new (int32_t, (size_t)m);
  int32_t nl = group_segments (sig, m, layer_of);
  *n_layers = nl;

  /* one bucket per (layer, key); members in id order */
  int32_t nk = s->n_keys;
  g_autofree int32_t *open = g_new (int32_t, (size_t)nl * (size_t)nk);
  for (int64_t i = 0; i < (int64_t)nl * nk; i++)
    open[i] = -1;
  g_autoptr (GArray) buckets = g_array_new (FALSE, FALSE, sizeof (GArray *));
  for (int32_t i = 0; i < nc; i++) {
    if (seg[i] < 0)
      continue;
    int64_t slot = (int64_t)layer_of[seg_index[seg[i]]] * nk + s->cands[i].key;
    GArray *b = open[slot] >= 0 ? g_array_index (buckets, GArray *, open[slot]) : NULL;
    for (guint j = 0; b && j < b->len; j++)
      if (!sg_bucket_cands_independent (s->aug, &s->cands[g_array_index (b, int32_t, j)],
                                        &s->cands[i]))
        b = NULL; /* a cycle: the rest of the layer's key starts a new bucket */
    if (!b) {
      b = g_array_new (FALSE, FALSE, sizeof (int32_t));
      g_array_append_val (buckets, b);
      open[slot] = (int32_t)buckets->len - 1;
    }
    g_array_append_val (b, i);
  }
  SgBucketSpec *specs = g_new0 (SgBucketSpec, buckets->len + 1);
  for (guint j = 0; j < buckets->len; j++) {
    GArray *b = g_array_index (buckets, GArray *, j);
    if (b->len >= 2) {
      SgBucketSpec *sp = &specs[(*n_specs)++];
      sp->members = g_new (SgNodeId, b->len);
      for (guint t = 0; t < b->len; t++)
        sp->members[sp->n_members++] = s->cands[g_array_index (b, int32_t, t)].c;
    }
    g_array_unref (b);
  }
  return specs;
}
