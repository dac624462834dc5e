/* rewrite.c: turns buckets of collectives into pack -> collective -> wait
 * -> unpacks (docs/ops.md, docs/bucketing.md), or into one coalesced
 * collective whose elements the members' waits read (grouped buckets),
 * for the final graph and for the pass's trial graphs alike.
 *
 * Mirrors the graph surgery of PyTorch's merge_all_gather /
 * merge_reduce_scatter (torch/_inductor/fx_passes/bucketing.py), on the
 * graph rewrite API (graph.h): the new nodes are added with typed args
 * (the loader's checks, including the collective's element counts against
 * its group), the users of each member's wait read its unpack, members and
 * waits are removed, and the result is committed (sg_bucket_apply) or
 * built as a trial graph (sg_bucket_trial) by the same code; the pass
 * commits its choice with the rewrite of its trials
 * (sg_bucket_trials_commit), whose memory and last layout serve the
 * final one. Placement
 * keeps every other node where it was: P and C at the earliest member's
 * position (later only if an input comes later), W and the unpacks just
 * before the first consumer of any member's wait. Trials of one rewrite
 * describe again only from the first bucket that changed, and copy the
 * buckets after it that the last trial had too (sg_rewrite_replay, with
 * the validator compared with building them: the same records).
 * Requires: a topological id order; users (rebuilt here).
 * Invalidates: node ids, users; hiding edges of members (stale once they
 * merge) are dropped, their other implicit edges move to the bucket's
 * collective and wait.
 */
#include "bucket-private.h"

#include <string.h>

#define FAIL(code, ...)                                                        \
  do {                                                                         \
    g_set_error (error, SG_BUCKET_ERROR, code, __VA_ARGS__);                   \
    return false;                                                              \
  } while (0)

bool
sg_bucket_member_check (const SgGraph *g, SgNodeId c, SgNodeId *wait, GError **error)
{
  const SgNode *n = &g->nodes[c];
  if (n->kind != SG_OP_ALL_GATHER && n->kind != SG_OP_REDUCE_SCATTER
      && n->kind != SG_OP_ALL_REDUCE)
    FAIL (SG_BUCKET_ERROR_LAYOUT, "bucket: node '%s': %s cannot be bucketed", n->name,
          sg_op_name (n->kind));
  if (sg_node_kwarg (g, c, SG_CHUNK_KWARG))
    FAIL (SG_BUCKET_ERROR_LAYOUT, "bucket: node '%s': kwargs.%s: a chunk of a decomposed "
          "collective matmul (merging the chunks would undo the pipeline)", n->name,
          SG_CHUNK_KWARG);
  uint32_t nu, nin;
  const SgNodeId *u = sg_node_users (g, c, &nu);
  if (nu != 1 || g->nodes[u[0]].kind != SG_OP_WAIT)
    FAIL (SG_BUCKET_ERROR_LAYOUT, "bucket: node '%s': users: needs exactly one user, its "
          "wait_tensor (has %u)", n->name, nu);
  sg_node_inputs (g, c, &nin);
  if (nin != 1 || n->meta.ndim < 0 || g->nodes[sg_node_inputs (g, c, &nin)[0]].meta.ndim < 0)
    FAIL (SG_BUCKET_ERROR_LAYOUT, "bucket: node '%s': args[0]: needs one tensor input with "
          "known meta", n->name);
  *wait = u[0];
  return true;
}

bool
sg_bucket_plan_make (const SgGraph *g, const SgBucketSpec *spec, const SgNodeId *waits,
                     SgBucketPlan *p, GError **error)
{
  int32_t n = spec->n_members;
  const SgNode *m0 = &g->nodes[spec->members[0]];
  memset (p, 0, sizeof *p);
  p->n = n;
  p->kind = m0->kind;
  p->group = m0->group, p->k = m0->group_size;
  p->reduce = m0->reduce;
  p->dtype = m0->meta.dtype;
  p->in_numel = g_new (uint64_t, (size_t)n);
  p->offsets = g_new (uint64_t, (size_t)n);
  p->out_numel = g_new (uint64_t, (size_t)n);
  p->inputs = g_new (SgNodeId, (size_t)n);
  for (int32_t i = 0; i < n; i++) {
    const SgNode *m = &g->nodes[spec->members[i]];
    uint32_t nin;
    p->inputs[i] = sg_node_inputs (g, spec->members[i], &nin)[0];
    const SgMeta *im = &g->nodes[p->inputs[i]].meta;
    if (m->kind != p->kind || m->group != p->group || m->reduce != p->reduce
        || m->meta.dtype != p->dtype || im->dtype != p->dtype) {
      sg_bucket_plan_clear (p);
      FAIL (SG_BUCKET_ERROR_LAYOUT,
            "bucket: node '%s': kind, group, dtype or reduce op differs from '%s'", m->name,
            m0->name);
    }
    p->in_numel[i] = sg_meta_numel (g, im);
  }
  if (!sg_bucket_layout (p->kind, p->k, p->in_numel, n, p->offsets, p->out_numel, &p->l,
                         error)) {
    sg_bucket_plan_clear (p);
    return false;
  }
  for (int32_t i = 0; i < n; i++) {
    const SgMeta *wm = &g->nodes[waits[i]].meta;
    if (wm->ndim < 0 || sg_meta_numel (g, wm) != p->out_numel[i] * (uint64_t)p->l.unpack_k) {
      sg_bucket_plan_clear (p);
      FAIL (SG_BUCKET_ERROR_LAYOUT, "bucket: node '%s': meta.shape: its wait's element count "
            "disagrees with its input", g->nodes[spec->members[i]].name);
    }
  }
  return true;
}

void
sg_bucket_plan_clear (SgBucketPlan *p)
{
  g_clear_pointer (&p->in_numel, g_free);
  g_clear_pointer (&p->offsets, g_free);
  g_clear_pointer (&p->out_numel, g_free);
  g_clear_pointer (&p->inputs, g_free);
}

bool
sg_bucket_specs_check (SgGraph *g, const SgBucketSpec *specs, int32_t n_specs, int32_t from,
                       const int32_t *known, bool *taken, SgNodeId *waits, int64_t *start_pos,
                       int64_t *use_pos, GError **error)
{
  int32_t n0 = g->n_nodes;
  sg_graph_fill_users (g);
  for (int32_t b = 0; b < n_specs; b++)
    if (specs[b].n_members < 2)
      FAIL (SG_BUCKET_ERROR_LAYOUT, "bucket: bucket %d has %d member(s); at least 2 are needed",
            b, specs[b].n_members);
  int32_t t = 0;
  for (int32_t b = 0; b < from; b++)
    for (int32_t i = 0; i < specs[b].n_members; i++, t++)
      taken[specs[b].members[i]] = true;
  for (int32_t b = from; b < n_specs; b++) {
    bool seen = known && known[b] >= 0;
    start_pos[b] = G_MAXINT64, use_pos[b] = G_MAXINT64;
    for (int32_t i = 0; i < specs[b].n_members; i++, t++) {
      SgNodeId c = specs[b].members[i];
      if (c < 0 || c >= n0)
        FAIL (SG_BUCKET_ERROR_LAYOUT, "bucket: bucket %d: member id %d out of range", b, c);
      if (taken[c])
        FAIL (SG_BUCKET_ERROR_LAYOUT, "bucket: node '%s' is in two buckets", g->nodes[c].name);
      taken[c] = true;
      if (seen)
        continue;
      if (!sg_bucket_member_check (g, c, &waits[t], error))
        return false;
      uint32_t nu;
      const SgNodeId *u = sg_node_users (g, waits[t], &nu);
      start_pos[b] = MIN (start_pos[b], (int64_t)c);
      use_pos[b] = MIN (use_pos[b], nu ? (int64_t)u[0] : (int64_t)waits[t]);
    }
  }
  return true;
}

/* Member names of the bucket: each member's own, or, for a member that is
 * a bucket itself, its members (the list always names original
 * collectives). */
static SgArg
member_names (SgRewrite *rw, const SgBucketSpec *spec)
{
  const SgGraph *g = sg_rewrite_graph (rw);
  g_autoptr (GArray) names = g_array_new (FALSE, FALSE, sizeof (SgArg));
  for (int32_t i = 0; i < spec->n_members; i++) {
    const SgArg *inner = sg_node_kwarg (g, spec->members[i], SG_BUCKET_KWARG);
    uint32_t n;
    const SgArg *items = sg_arg_items (g, inner, &n);
    if (inner && inner->type == SG_ARG_LIST) {
      g_array_append_vals (names, items, n);
    } else { /* node names live in the graph's strings already */
      SgArg a = { .type = SG_ARG_STR };
      a.s = g->nodes[spec->members[i]].name;
      g_array_append_val (names, a);
    }
  }
  return sg_rewrite_list (rw, (const SgArg *)(void *)names->data, names->len);
}

/* A bucket collective's arguments: the first member's, with @input where
 * its input was, and its kwargs with the members listed last. */
typedef struct {
  SgArg args[16];
  SgKwarg kwargs[16];
  uint32_t n_args, n_kwargs;
} CollArgs;

static void
coll_args (SgRewrite *rw, const SgBucketSpec *spec, SgOpKind member_kind, SgArg input,
           CollArgs *ca)
{
  SgNodeId m0 = spec->members[0];
  ca->n_args = sg_rewrite_args_of (rw, m0, ca->args, G_N_ELEMENTS (ca->args));
  uint32_t nk = sg_rewrite_kwargs_of (rw, m0, ca->kwargs, G_N_ELEMENTS (ca->kwargs) - 1);
  g_assert (ca->n_args <= G_N_ELEMENTS (ca->args) && nk < G_N_ELEMENTS (ca->kwargs));
  ca->args[sg_op_param_pos (member_kind, SG_PARAM_INPUT)] = input;
  ca->n_kwargs = 0;
  for (uint32_t i = 0; i < nk; i++)
    if (strcmp (ca->kwargs[i].key, SG_BUCKET_KWARG) != 0)
      ca->kwargs[ca->n_kwargs++] = ca->kwargs[i];
  ca->kwargs[ca->n_kwargs++] = (SgKwarg){ SG_BUCKET_KWARG, member_names (rw, spec) };
}

static SgNodeId
add (SgRewrite *rw, const char *prefix, const char *base, SgNodeSpec *spec, GError **error)
{
  char buf[256]; /* the name, on the stack when it fits (the rewrite copies it) */
  size_t lp = strlen (prefix), lb = strlen (base);
  g_autofree char *big = lp + lb < sizeof buf ? NULL : g_malloc (lp + lb + 1);
  char *name = big ? big : buf;
  memcpy (name, prefix, lp);
  memcpy (name + lp, base, lb + 1);
  spec->name = name;
  spec->cost_us = NAN; /* est_src stays SG_COST_NONE: the pass costs new nodes */
  return sg_rewrite_add (rw, spec, error);
}

/* The flat 1-d meta of @numel elements. */
static SgMeta
flat_meta (SgRewrite *rw, uint64_t numel, SgDtype dtype)
{
  int64_t shape = (int64_t)numel;
  return sg_rewrite_meta (rw, &shape, NULL, 1, dtype);
}

/* Adds the bucket's nodes for @spec (members with their @waits), placed
 * at @start (the earliest member) and @use (the first consumer of any of
 * their waits), and rewires and removes the members. */
static bool
add_bucket (SgRewrite *rw, const SgBucketSpec *spec, const SgNodeId *waits, SgNodeId start,
            SgNodeId use, GError **error)
{
  SgGraph *g = sg_rewrite_graph (rw);
  int32_t n = spec->n_members;
  SgBucketPlan plan;
  if (!sg_bucket_plan_make (g, spec, waits, &plan, error))
    return false;
  bool ok = false;
  SgNodeId m0 = spec->members[0];
  const char *first = g->nodes[m0].name;
  SgBucketLayout l = plan.l;

  /* P = bucket_pack([in...], k, interleave) */
  g_autofree SgArg *refs = g_new (SgArg, (size_t)n);
  for (int32_t i = 0; i < n; i++)
    refs[i] = sg_arg_ref (plan.inputs[i]);
  SgArg pargs[] = { sg_rewrite_list (rw, refs, (uint32_t)n), sg_arg_i (plan.k),
                    sg_arg_b (l.interleave) };
  SgNodeSpec ps = { .kind = SG_OP_BUCKET_PACK, .args = pargs, .n_args = G_N_ELEMENTS (pargs),
                    .meta = flat_meta (rw, l.pack_numel, plan.dtype) };
  SgNodeId p = add (rw, "bucket_pack_", first, &ps, error);
  if (p == SG_NO_NODE)
    goto out;
  sg_rewrite_place (rw, p, start, SG_PLACE_BEFORE_EARLY);

  /* C = the member's collective on P, same other args, kwargs listing the
   * members last */
  CollArgs ca;
  coll_args (rw, spec, plan.kind, sg_arg_ref (p), &ca);
  SgNodeSpec cs = { .kind = plan.kind, .target = g->nodes[m0].target, .args = ca.args,
                    .n_args = ca.n_args, .kwargs = ca.kwargs, .n_kwargs = ca.n_kwargs,
                    .meta = flat_meta (rw, l.out_numel, plan.dtype) };
  SgNodeId c = add (rw, "bucket_", first, &cs, error);
  if (c == SG_NO_NODE)
    goto out;
  sg_rewrite_place (rw, c, start, SG_PLACE_BEFORE);

  /* W = wait_tensor(C) */
  SgArg wargs[] = { sg_arg_ref (c) };
  SgNodeSpec ws = { .kind = SG_OP_WAIT, .args = wargs, .n_args = 1,
                    .meta = flat_meta (rw, l.out_numel, plan.dtype) };
  SgNodeId wt = add (rw, "bucket_wait_", first, &ws, error);
  if (wt == SG_NO_NODE)
    goto out;
  sg_rewrite_place (rw, wt, use, SG_PLACE_BEFORE_EARLY);

  /* U_i = bucket_unpack(W, k, offset_i, numel_i), shaped like member i's
   * wait; its users read U_i; member i and its wait go. */
  uint32_t hiding = (1u << SG_EDGE_HIDE_START) | (1u << SG_EDGE_HIDE_WAIT);
  for (int32_t i = 0; i < n; i++) {
    const SgMeta *wm = &g->nodes[waits[i]].meta;
    SgArg uargs[] = { sg_arg_ref (wt), sg_arg_i (l.unpack_k), sg_arg_i ((int64_t)plan.offsets[i]),
                      sg_arg_i ((int64_t)plan.out_numel[i]) };
    SgNodeSpec us = { .kind = SG_OP_BUCKET_UNPACK, .args = uargs, .n_args = G_N_ELEMENTS (uargs),
                      .meta = sg_rewrite_meta (rw, sg_meta_shape (g, wm), NULL, wm->ndim,
                                               plan.dtype) };
    SgNodeId u = add (rw, "bucket_unpack_", g->nodes[spec->members[i]].name, &us, error);
    if (u == SG_NO_NODE)
      goto out;
    sg_rewrite_place (rw, u, use, SG_PLACE_BEFORE);
    sg_rewrite_replace_uses (rw, waits[i], u);
    sg_rewrite_remove (rw, spec->members[i]);
    sg_rewrite_remove (rw, waits[i]);
    sg_rewrite_move_edges (rw, spec->members[i], c, hiding);
    sg_rewrite_move_edges (rw, waits[i], wt, hiding);
  }
  ok = true;
out:
  sg_bucket_plan_clear (&plan);
  return ok;
}

/* Adds grouped bucket @spec (members with their @waits), placed at @start
 * (the earliest member): C = <kind>_coalesced([in_1..in_n], <the first
 * member's other args>), kwargs listing the members; G_i = getitem(C, i)
 * shaped like member i; member i's wait (kept where it is) reads G_i, and
 * member i goes. The members' hiding edges are dropped, their other
 * implicit edges move to C. */
static bool
add_grouped (SgRewrite *rw, const SgBucketSpec *spec, const SgNodeId *waits, SgNodeId start,
             GError **error)
{
  SgGraph *g = sg_rewrite_graph (rw);
  int32_t n = spec->n_members;
  SgBucketPlan plan;
  if (!sg_bucket_plan_make (g, spec, waits, &plan, error))
    return false;
  SgNodeId m0 = spec->members[0];
  const char *first = g->nodes[m0].name;
  SgOpKind kind = sg_op_coalesced_kind (plan.kind);
  g_autofree SgArg *refs = g_new (SgArg, (size_t)n);
  g_autofree SgMeta *metas = g_new (SgMeta, (size_t)n);
  for (int32_t i = 0; i < n; i++) {
    const SgMeta *mm = &g->nodes[spec->members[i]].meta;
    refs[i] = sg_arg_ref (plan.inputs[i]);
    metas[i] = sg_rewrite_meta (rw, sg_meta_shape (g, mm), NULL, mm->ndim, plan.dtype);
  }
  /* the coalesced op's parameters are the member's, with the list of
   * inputs where the input was (graph/ops.c) */
  g_assert (sg_op_param_pos (kind, SG_PARAM_INPUTS) == sg_op_param_pos (plan.kind, SG_PARAM_INPUT));
  CollArgs ca;
  coll_args (rw, spec, plan.kind, sg_rewrite_list (rw, refs, (uint32_t)n), &ca);
  SgNodeSpec cs = { .kind = kind, .args = ca.args, .n_args = ca.n_args, .kwargs = ca.kwargs,
                    .n_kwargs = ca.n_kwargs, .tuple = metas, .n_tuple = (uint32_t)n };
  cs.meta.ndim = -1;
  bool ok = false;
  SgNodeId c = add (rw, "bucket_", first, &cs, error);
  if (c == SG_NO_NODE)
    goto out;
  sg_rewrite_place (rw, c, start, SG_PLACE_BEFORE);
  uint32_t hiding = (1u << SG_EDGE_HIDE_START) | (1u << SG_EDGE_HIDE_WAIT);
  for (int32_t i = 0; i < n; i++) {
    SgArg gargs[] = { sg_arg_ref (c), sg_arg_i (i) };
    SgNodeSpec gs = { .kind = SG_OP_GETITEM, .args = gargs, .n_args = G_N_ELEMENTS (gargs),
                      .meta = metas[i] };
    SgNodeId e = add (rw, "bucket_item_", g->nodes[spec->members[i]].name, &gs, error);
    if (e == SG_NO_NODE)
      goto out;
    sg_rewrite_place (rw, e, start, SG_PLACE_BEFORE);
    sg_rewrite_replace_uses (rw, spec->members[i], e);
    sg_rewrite_remove (rw, spec->members[i]);
    sg_rewrite_move_edges (rw, spec->members[i], c, hiding);
  }
  ok = true;
out:
  sg_bucket_plan_clear (&plan);
  return ok;
}

/* The rewrite's refusals as the pass names them. */
static void
bucket_error (GError **error)
{
  if (error && *error && (*error)->domain == SG_GRAPH_ERROR) {
    GError *e = *error;
    *error = g_error_new (SG_BUCKET_ERROR,
                          e->code == SG_GRAPH_ERROR_CYCLE ? SG_BUCKET_ERROR_CYCLE
                                                          : SG_BUCKET_ERROR_LAYOUT,
                          "bucket: %s", e->message);
    g_error_free (e);
  }
}

struct SgBucketTrials {
  SgRewrite *rw;
  SgBucketSpec *specs;   /* the buckets described in @rw now (own copies) */
  int32_t n_specs, cap;
  SgRewriteMark *marks;  /* marks[b]: before bucket b was described */
  bool valid;            /* @rw describes @specs */
  bool verify;           /* each replayed bucket checked against a fresh one */
  /* The last trial's buckets from the first that changed on, kept in the
   * rewrite (sg_rewrite_stash) to be replayed where the next trial has
   * them again (describe). */
  SgRewriteMark *old_marks; /* their marks, old_marks[b - from] */
  GHashTable *by_first;  /* first member id + 1 -> old bucket index + 1 */
  int32_t replayed;      /* buckets the last describe replayed */
  bool *taken;           /* per node of the graph: false between describes */
};

SgBucketTrials *
sg_bucket_trials_new (SgGraph *g, bool verify, SgPool *pool)
{
  SgBucketTrials *t = g_new0 (SgBucketTrials, 1);
  t->rw = sg_rewrite_new (g);
  t->verify = verify;
  sg_rewrite_set_verify (t->rw, verify);
  sg_rewrite_set_pool (t->rw, pool);
  t->by_first = g_hash_table_new (NULL, NULL);
  return t;
}

static void
forget_from (SgBucketTrials *t, int32_t b)
{
  for (int32_t i = b; i < t->n_specs; i++)
    g_free (t->specs[i].members);
  t->n_specs = MIN (t->n_specs, b);
}

void
sg_bucket_trials_free (SgBucketTrials *t)
{
  if (!t)
    return;
  forget_from (t, 0);
  g_free (t->specs);
  g_free (t->marks);
  g_free (t->old_marks);
  g_hash_table_unref (t->by_first);
  g_free (t->taken);
  sg_rewrite_free (t->rw);
  g_free (t);
}

int32_t
sg_bucket_trials_replayed (const SgBucketTrials *t)
{
  g_return_val_if_fail (t != NULL, 0);
  return t->replayed;
}

static bool
same_spec (const SgBucketSpec *a, const SgBucketSpec *b)
{
  return a->n_members == b->n_members && a->lowering == b->lowering
         && memcmp (a->members, b->members, sizeof (SgNodeId) * (size_t)a->n_members) == 0;
}

/* Per bucket b >= @keep of @specs, the bucket of the last trial (index >=
 * @keep) with the same spec, or -1 (@replay[b]). How many there are. */
static int32_t
match_old (SgBucketTrials *t, const SgBucketSpec *specs, int32_t n_specs, int32_t keep,
           int32_t *replay)
{
  g_hash_table_remove_all (t->by_first);
  for (int32_t b = keep; b < t->n_specs; b++)
    g_hash_table_insert (t->by_first, GINT_TO_POINTER (t->specs[b].members[0] + 1),
                         GINT_TO_POINTER (b + 1));
  int32_t found = 0;
  for (int32_t b = keep; b < n_specs; b++) {
    replay[b] = -1;
    if (specs[b].n_members < 1)
      continue;
    int32_t o = GPOINTER_TO_INT (g_hash_table_lookup (t->by_first,
                                                      GINT_TO_POINTER (specs[b].members[0] + 1)))
                - 1;
    if (o >= 0 && same_spec (&specs[b], &t->specs[o]))
      replay[b] = o, found++;
  }
  return found;
}

/* Adds bucket @b of @specs: a copy of the last trial's bucket @old
 * (>= 0) from the stash, or built (its members' @waits, start and use
 * positions). With @t->verify a copy is checked against building it. */
static bool
add_one (SgBucketTrials *t, const SgBucketSpec *spec, int32_t old, int32_t old_from,
         const SgNodeId *waits, int64_t start, int64_t use, GError **error)
{
  SgRewrite *rw = t->rw;
  SgRewriteMark m1, m2;
  sg_rewrite_mark (rw, &m1);
  if (old >= 0) {
    /* a bucket's nodes read base nodes and each other only */
    if (!sg_rewrite_replay (rw, &t->old_marks[old - old_from],
                            &t->old_marks[old + 1 - old_from]))
      g_error ("bucket: the last trial's bucket of node '%s' reads another bucket's nodes",
               sg_rewrite_graph (rw)->nodes[spec->members[0]].name);
    if (!t->verify)
      return true;
    sg_rewrite_mark (rw, &m2);
  }
  bool ok = spec->lowering == SG_BUCKET_LOWERING_GROUPED
                ? add_grouped (rw, spec, waits, (SgNodeId)start, error)
                : add_bucket (rw, spec, waits, (SgNodeId)start, (SgNodeId)use, error);
  if (ok && old >= 0) {
    if (!sg_rewrite_parts_same (rw, &m1, &m2))
      g_error ("bucket: a bucket described again from the last trial's differs from one "
               "built afresh (node '%s')", sg_rewrite_graph (rw)->nodes[spec->members[0]].name);
    sg_rewrite_rollback (rw, &m2);
  }
  return ok;
}

/* Keeps the last trial's buckets from @keep on in the rewrite, to replay
 * the ones @replay names; false when there is no room. */
static bool
stash_from (SgBucketTrials *t, int32_t keep)
{
  int32_t n_old = t->n_specs - keep;
  if (!sg_rewrite_stash (t->rw, &t->marks[keep], &t->marks[t->n_specs]))
    return false;
  t->old_marks = g_renew (SgRewriteMark, t->old_marks, (size_t)n_old + 1);
  memcpy (t->old_marks, &t->marks[keep], sizeof (SgRewriteMark) * ((size_t)n_old + 1));
  return true;
}

/* Describes @specs in @t->rw: from the first bucket that differs from
 * those it describes now (bucket_rewrite's work, bucket by bucket); a
 * bucket the last trial described too (same spec) is replayed from it
 * (sg_rewrite_replay), the same as building it again. */
static bool
describe (SgBucketTrials *t, const SgBucketSpec *specs, int32_t n_specs, GError **error)
{
  SgRewrite *rw = t->rw;
  SgGraph *g = sg_rewrite_graph (rw);
  int32_t total = 0;
  for (int32_t b = 0; b < n_specs; b++)
    total += MAX (specs[b].n_members, 0);
  if (!t->taken)
    t->taken = g_new0 (bool, (size_t)g->n_nodes + 1);
  g_autofree SgNodeId *waits = g_new (SgNodeId, (size_t)total + 1);
  g_autofree int64_t *start_pos = g_new (int64_t, (size_t)n_specs + 1);
  g_autofree int64_t *use_pos = g_new (int64_t, (size_t)n_specs + 1);
  g_autofree int32_t *replay = g_new (int32_t, (size_t)n_specs + 1);
  int32_t keep = 0, found = 0;
  t->replayed = 0;
  if (t->valid) {
    while (keep < MIN (n_specs, t->n_specs) && same_spec (&specs[keep], &t->specs[keep]))
      keep++;
    found = match_old (t, specs, n_specs, keep, replay);
    if (found && !stash_from (t, keep))
      found = 0;
  }
  bool checked = sg_bucket_specs_check (g, specs, n_specs, keep,
                                        found && !t->verify ? replay : NULL, t->taken, waits,
                                        start_pos, use_pos, error);
  for (int32_t b = 0; b < n_specs; b++) /* what the checks marked */
    for (int32_t i = 0; i < specs[b].n_members; i++)
      if (specs[b].members[i] >= 0 && specs[b].members[i] < g->n_nodes)
        t->taken[specs[b].members[i]] = false;
  if (!checked)
    return false;
  if (!t->valid) {
    sg_rewrite_reset (rw);
    forget_from (t, 0);
    keep = 0;
  } else {
    sg_rewrite_rollback (rw, &t->marks[keep]);
    forget_from (t, keep);
  }
  t->valid = false;
  if (n_specs + 1 > t->cap) {
    t->cap = MAX (n_specs + 1, 2 * t->cap);
    t->specs = g_renew (SgBucketSpec, t->specs, (size_t)t->cap);
    t->marks = g_renew (SgRewriteMark, t->marks, (size_t)t->cap);
  }
  int32_t w = 0;
  for (int32_t b = 0; b < keep; b++)
    w += specs[b].n_members;
  for (int32_t b = keep; b < n_specs; w += specs[b].n_members, b++) {
    sg_rewrite_mark (rw, &t->marks[b]);
    if (!add_one (t, &specs[b], found ? replay[b] : -1, keep, &waits[w], start_pos[b],
                  use_pos[b], error))
      return false;
    t->specs[b] = specs[b];
    t->specs[b].members = g_memdup2 (specs[b].members,
                                     sizeof (SgNodeId) * (size_t)specs[b].n_members);
    t->n_specs = b + 1;
  }
  sg_rewrite_mark (rw, &t->marks[n_specs]);
  t->n_specs = n_specs;
  t->valid = true;
  t->replayed = found;
  return true;
}

SgGraph *
sg_bucket_trial (SgBucketTrials *t, const SgBucketSpec *specs, int32_t n_specs, GError **error)
{
  g_return_val_if_fail (t && (specs || n_specs == 0) && n_specs >= 0, NULL);
  SgGraph *tg = describe (t, specs, n_specs, error) ? sg_rewrite_trial (t->rw, error) : NULL;
  if (!tg)
    bucket_error (error);
  return tg;
}

bool
sg_bucket_trials_commit (SgBucketTrials *t, const SgBucketSpec *specs, int32_t n_specs,
                         GError **error)
{
  g_return_val_if_fail (t && (specs || n_specs == 0) && n_specs >= 0, false);
  bool ok = describe (t, specs, n_specs, error) && sg_rewrite_commit (t->rw, error);
  if (!ok)
    bucket_error (error);
  return ok;
}

bool
sg_bucket_apply (SgGraph *g, const SgBucketSpec *specs, int32_t n_specs, GError **error)
{
  g_return_val_if_fail (g && (specs || n_specs == 0) && n_specs >= 0, false);
  if (n_specs <= 0)
    return true;
  SgBucketTrials *t = sg_bucket_trials_new (g, false, NULL);
  bool ok = sg_bucket_trials_commit (t, specs, n_specs, error);
  sg_bucket_trials_free (t);
  return ok;
}
