/* emit.c: one site in one form, written into a graph rewrite.
 *
 * The forms are docs/ops.md "Ring decompositions" (tests/runtime/mkring.c
 * runs the same ones), over the site's group of k ranks:
 *  - all_gather -> mm: k - 1 ring steps c_s = wait(collective_permute(
 *    c_{s-1}, {i -> i+1})) from c_0 = x; every mm that reads the gathered
 *    rows multiplies each c_s (through its view), y = cat([m_0, m_{k-1},
 *    ..., m_1]) and rank_roll(y, 0, -1) is its result; users that need the
 *    whole gathered tensor read rank_roll(cat([c_0, c_{k-1}, ..., c_1]),
 *    0, -1);
 *  - (sum of) mm -> reduce_scatter: each mm's rows operand rolled once
 *    (rank_roll(a, -1, 1)), step s multiplies the static row block
 *    (k - s) mod k and adds what arrives from the previous rank:
 *    acc_s = add(wait(collective_permute(acc_{s-1}, {i -> i+1})), p_s);
 *  - (sum of) mm -> all_reduce: the rows in q chunks, each computed and
 *    all-reduced on its own, the results concatenated.
 * Every value keeps its summation order except the ring reduce_scatter's,
 * which adds the ranks' partial sums in ring order (docs/ops.md states
 * the tolerance). The first new collective lists the nodes the site drops
 * in its `schedgraph_replaces` kwarg (docs/python.md).
 * Placement (the order before scheduling, and the scheduler's base
 * priority): the first step where the collective was, the rest in ring
 * order at the last mm that read the gathered rows, or at the reducing
 * collective; a whole gathered tensor before its first user.
 * Mirrors: XLA's collective-matmul decomposition (windowed einsum,
 * collective_permute loops) and nvFuser's stream-parallel host loops.
 * Requires: the site found on the rewrite's graph (find.c). Invalidates:
 * nothing until the rewrite is committed.
 */
#include "decompose-private.h"

#include <math.h>

typedef struct {
  SgRewrite *rw;
  SgGraph *g;
  const SgSite *s;
  const SgSiteForm *f;
  GArray *span;
  GError **error;
  SgArg group;   /* the collective's group name */
  SgArg pairs;   /* the ring {i -> i+1} */
  SgArg dropped; /* the names the site drops (a list), for schedgraph_replaces */
  bool listed;   /* the first collective carries them */
  GArray *anchors; /* SgNodeId per added id - n0: the base node it is placed before */
} Emit;

/* Places added node @id just before base node @anchor (SG_PLACE_BEFORE;
 * added nodes of one anchor keep their creation order) and records it. */
static void
place (Emit *e, SgNodeId id, SgNodeId anchor)
{
  sg_rewrite_place (e->rw, id, anchor, SG_PLACE_BEFORE);
  if (e->anchors) {
    const guint i = (guint)(id - e->g->n_nodes);
    if (e->anchors->len <= i)
      g_array_set_size (e->anchors, i + 1);
    g_array_index (e->anchors, SgNodeId, i) = anchor;
  }
}

/* Adds one node of @kind, shaped @shape (@stride NULL: contiguous); false
 * on a refusal (e->error). */
static SgNodeId
add (Emit *e, SgOpKind kind, char *name, const SgArg *args, uint32_t n_args, const SgKwarg *kw,
     uint32_t n_kw, const int64_t *shape, const int64_t *stride, int32_t ndim, SgDtype dt,
     int32_t sm)
{
  SgNodeSpec spec = { .name = name, .kind = kind, .args = args, .n_args = n_args,
                      .kwargs = kw, .n_kwargs = n_kw,
                      .meta = sg_rewrite_meta (e->rw, shape, stride, ndim, dt),
                      .cost_us = NAN, .sm_count = sm };
  SgNodeId id = sg_rewrite_add (e->rw, &spec, e->error);
  g_free (name);
  return id;
}

/* Appends @id to the span (when it runs) and returns it. */
static SgNodeId
run (Emit *e, SgNodeId id)
{
  if (id != SG_NO_NODE)
    g_array_append_val (e->span, id);
  return id;
}

static const int64_t *
shape_of (const Emit *e, SgNodeId id)
{
  const SgNode *n = sg_rewrite_node (e->rw, id);
  return sg_meta_shape (e->g, &n->meta);
}

static SgDtype
dtype_of (const Emit *e, SgNodeId id)
{
  return sg_rewrite_node (e->rw, id)->meta.dtype;
}

/* {i -> i + @shift} over @k ranks. */
static SgArg
ring_pairs (SgRewrite *rw, int32_t k, int32_t shift)
{
  g_autofree SgArg *pairs = g_new (SgArg, (size_t)k);
  for (int32_t i = 0; i < k; i++) {
    SgArg st[] = { sg_arg_i (i), sg_arg_i ((i + shift) % k) };
    pairs[i] = sg_rewrite_list (rw, st, 2);
  }
  return sg_rewrite_list (rw, pairs, (uint32_t)k);
}

/* collective_permute(@in, ring, group), named after ring step @step; the
 * first of the site carries schedgraph_replaces. Its wait comes later
 * (ring_wait), after the chunk GEMMs that run beside it: added nodes of
 * one anchor keep their creation order. */
static SgNodeId
ring_permute (Emit *e, SgNodeId in, int32_t step, SgArg pairs)
{
  const SgNode *n = sg_rewrite_node (e->rw, in);
  const char *base = e->g->nodes[e->s->coll].name;
  SgArg args[] = { sg_arg_ref (in), pairs, e->group };
  SgKwarg kw[2] = { { "transport", sg_rewrite_str (e->rw, sg_transport_name (e->f->transport)) },
                    { "schedgraph_replaces", e->dropped } };
  SgNodeId p = add (e, SG_OP_COLLECTIVE_PERMUTE, g_strdup_printf ("%s_ring%d", base, step), args,
                    3, kw, e->listed ? 1 : 2, sg_meta_shape (e->g, &n->meta), NULL, n->meta.ndim,
                    n->meta.dtype, 0);
  e->listed = true;
  return run (e, p);
}

/* The wait of ring step @step's permute @perm. */
static SgNodeId
ring_wait (Emit *e, SgNodeId perm, int32_t step)
{
  const SgNode *n = sg_rewrite_node (e->rw, perm);
  SgArg args[] = { sg_arg_ref (perm) };
  return run (e, add (e, SG_OP_WAIT,
                      g_strdup_printf ("%s_ring%d_wait", e->g->nodes[e->s->coll].name, step),
                      args, 1, NULL, 0, sg_meta_shape (e->g, &n->meta), NULL, n->meta.ndim,
                      n->meta.dtype, 0));
}

/* mm(@a, @b) of @rows x the columns of @b, SM-count target @sm. */
static SgNodeId
chunk_mm (Emit *e, const char *like, int32_t step, SgNodeId a, SgNodeId b, int64_t rows,
          int64_t cols, int32_t sm)
{
  SgArg args[] = { sg_arg_ref (a), sg_arg_ref (b) };
  int64_t shape[2] = { rows, cols };
  return run (e, add (e, SG_OP_MM, g_strdup_printf ("%s_chunk%d", like, step), args, 2, NULL, 0,
                      shape, NULL, 2, dtype_of (e, a), sm));
}

/* rank_roll(cat(@parts), 0, -1) over dim 0: the parts' rows in rank order. */
static SgNodeId
cat_roll (Emit *e, const char *like, const SgNodeId *parts, int32_t n, SgNodeId anchor)
{
  g_autofree SgArg *refs = g_new (SgArg, (size_t)n);
  for (int32_t i = 0; i < n; i++)
    refs[i] = sg_arg_ref (parts[i]);
  const SgNode *p0 = sg_rewrite_node (e->rw, parts[0]);
  int64_t shape[SG_MAX_DIMS];
  const int32_t nd = p0->meta.ndim;
  const SgDtype dt = p0->meta.dtype;
  for (int32_t d = 0; d < nd; d++)
    shape[d] = sg_meta_shape (e->g, &p0->meta)[d];
  shape[0] *= n;
  SgArg cargs[] = { sg_rewrite_list (e->rw, refs, (uint32_t)n), sg_arg_i (0) };
  SgNodeId y = run (e, add (e, SG_OP_CAT, g_strdup_printf ("%s_cat", like), cargs, 2, NULL, 0,
                            shape, NULL, nd, dt, 0));
  if (y == SG_NO_NODE)
    return SG_NO_NODE;
  SgArg rargs[] = { sg_arg_ref (y), sg_arg_i (0), sg_arg_i (-1), e->group };
  SgNodeId r = run (e, add (e, SG_OP_RANK_ROLL, g_strdup_printf ("%s_roll", like), rargs, 4, NULL,
                            0, shape, NULL, nd, dt, 0));
  if (r != SG_NO_NODE) {
    place (e, y, anchor);
    place (e, r, anchor);
  }
  return r;
}

/* The names a site drops, as a list of strings (the collective and its
 * wait unless @keep_coll). */
static SgArg
dropped_names (SgRewrite *rw, const SgGraph *g, const SgSite *s, bool keep_coll)
{
  g_autoptr (GArray) names = g_array_new (FALSE, FALSE, sizeof (SgArg));
  SgNodeId ids[2] = { s->coll, s->wait };
  for (int i = 0; i < (keep_coll ? 0 : 2); i++) {
    SgArg a = { .type = SG_ARG_STR };
    a.s = g->nodes[ids[i]].name;
    g_array_append_val (names, a);
  }
  for (int32_t i = 0; i < s->n_mm; i++) {
    SgArg a = { .type = SG_ARG_STR };
    if (s->view[i] != SG_NO_NODE && (i == 0 || s->view[i - 1] != s->view[i])) {
      a.s = g->nodes[s->view[i]].name;
      g_array_append_val (names, a);
    }
    a.s = g->nodes[s->mm[i]].name;
    g_array_append_val (names, a);
  }
  for (int32_t i = 0; i < s->n_terms; i++) {
    SgArg a = { .type = SG_ARG_STR };
    a.s = g->nodes[s->terms[i].node].name;
    g_array_append_val (names, a);
  }
  return sg_rewrite_list (rw, (const SgArg *)(void *)names->data, names->len);
}

/* The operands of the matmul @mm (rows, other). */
static void
operands (const SgGraph *g, SgNodeId mm, SgNodeId *a, SgNodeId *b)
{
  SgParam pa, pb;
  g_assert (sg_op_matmul_params (g->nodes[mm].kind, &pa, &pb));
  *a = sg_node_param_node (g, mm, pa);
  *b = sg_node_param_node (g, mm, pb);
}

/* The mm of consumer @j of an all_gather site on chunk @in (through the
 * consumer's view), for ring step @st. */
static SgNodeId
gather_mm (Emit *e, int32_t j, SgNodeId in, int32_t st, SgNodeId anchor)
{
  const SgSite *s = e->s;
  const SgGraph *g = e->g;
  const int32_t k = s->k;
  SgNodeId a, b;
  operands (g, s->mm[j], &a, &b);
  const int64_t *ms = sg_meta_shape (g, &g->nodes[s->mm[j]].meta);
  const char *like = g->nodes[s->mm[j]].name;
  if (s->view[j] != SG_NO_NODE) {
    const int64_t *vs = sg_meta_shape (g, &g->nodes[s->view[j]].meta);
    int64_t vshape[2] = { vs[0] / k, vs[1] };
    SgArg size[] = { sg_arg_i (vshape[0]), sg_arg_i (vshape[1]) };
    SgArg vargs[] = { sg_arg_ref (in), sg_rewrite_list (e->rw, size, 2) };
    in = add (e, SG_OP_VIEW, g_strdup_printf ("%s_chunk%d_view", like, st), vargs, 2, NULL, 0,
              vshape, NULL, 2, dtype_of (e, in), 0);
    if (in == SG_NO_NODE)
      return SG_NO_NODE;
    place (e, in, anchor);
  }
  SgNodeId mm = chunk_mm (e, like, st, in, b, ms[0] / k, ms[1], st + 1 < k ? e->f->sm_count : 0);
  if (mm != SG_NO_NODE)
    place (e, mm, anchor);
  return mm;
}

SgNodeId
sg_site_first_whole (const SgGraph *g, const SgSite *s)
{
  uint32_t nu;
  const SgNodeId *u = sg_node_users (g, s->wait, &nu);
  for (uint32_t i = 0; i < nu; i++) {
    bool taken = false;
    for (int32_t j = 0; j < s->n_mm && !taken; j++)
      taken = u[i] == s->mm[j] || u[i] == s->view[j];
    if (!taken)
      return u[i];
  }
  return s->wait;
}

static bool
emit_gather (Emit *e)
{
  const SgSite *s = e->s;
  const SgGraph *g = e->g;
  const int32_t k = s->k;
  uint32_t nin;
  g_autofree SgNodeId *c = g_new (SgNodeId, (size_t)k);
  g_autofree SgNodeId *m = g_new (SgNodeId, (size_t)k * (size_t)s->n_mm);
  g_autofree SgNodeId *parts = g_new (SgNodeId, (size_t)k);
  SgNodeId anchor = s->mm[0];
  for (int32_t j = 0; j < s->n_mm; j++)
    anchor = MAX (anchor, s->mm[j]);
  c[0] = sg_node_inputs (g, s->coll, &nin)[0];
  /* step st: the permute of chunk st (to step st + 1), the mms of chunk
   * st beside it, then its wait */
  for (int32_t st = 0; st < k; st++) {
    SgNodeId perm = SG_NO_NODE;
    if (st + 1 < k) {
      if ((perm = ring_permute (e, c[st], st + 1, e->pairs)) == SG_NO_NODE)
        return false;
      place (e, perm, st == 0 ? s->coll : anchor);
    }
    for (int32_t j = 0; j < s->n_mm; j++)
      if ((m[(size_t)j * (size_t)k + (size_t)st] = gather_mm (e, j, c[st], st, anchor))
          == SG_NO_NODE)
        return false;
    if (st + 1 < k) {
      if ((c[st + 1] = ring_wait (e, perm, st + 1)) == SG_NO_NODE)
        return false;
      place (e, c[st + 1], anchor);
    }
  }
  /* results in rank order: block t of the cat is the chunk of rank r + t,
   * which step (k - t) mod k multiplied */
  for (int32_t j = 0; j < s->n_mm; j++) {
    for (int32_t t = 0; t < k; t++)
      parts[t] = m[(size_t)j * (size_t)k + (size_t)((k - t) % k)];
    SgNodeId r = cat_roll (e, g->nodes[s->mm[j]].name, parts, k, anchor);
    if (r == SG_NO_NODE)
      return false;
    sg_rewrite_replace_uses (e->rw, s->mm[j], r);
    sg_rewrite_remove (e->rw, s->mm[j]);
    if (s->view[j] != SG_NO_NODE && (j == 0 || s->view[j - 1] != s->view[j]))
      sg_rewrite_remove (e->rw, s->view[j]);
  }
  if (s->n_whole > 0 && e->f->regather)
    return true; /* the all_gather stays for them */
  if (s->n_whole > 0) {
    for (int32_t t = 0; t < k; t++)
      parts[t] = c[(k - t) % k];
    SgNodeId whole = cat_roll (e, g->nodes[s->wait].name, parts, k, sg_site_first_whole (g, s));
    if (whole == SG_NO_NODE)
      return false;
    sg_rewrite_replace_uses (e->rw, s->wait, whole);
  }
  sg_rewrite_remove (e->rw, s->wait);
  sg_rewrite_remove (e->rw, s->coll);
  return true;
}

/* slice(@src, 0, @start, @start + @rows): a row block, @src's strides. */
static SgNodeId
slice_rows (Emit *e, SgNodeId src, int64_t start, int64_t rows, const char *like, int32_t st)
{
  const SgNode *n = sg_rewrite_node (e->rw, src);
  const SgGraph *g = e->g;
  const int32_t nd = n->meta.ndim;
  int64_t shape[SG_MAX_DIMS], stride[SG_MAX_DIMS];
  for (int32_t d = 0; d < nd; d++) {
    shape[d] = sg_meta_shape (g, &n->meta)[d];
    stride[d] = sg_meta_stride (g, &n->meta)[d];
  }
  shape[0] = rows;
  SgArg args[] = { sg_arg_ref (src), sg_arg_i (0), sg_arg_i (start), sg_arg_i (start + rows) };
  return add (e, SG_OP_SLICE, g_strdup_printf ("%s_chunk%d_rows", like, st), args, 4, NULL, 0,
              shape, stride, nd, n->meta.dtype, 0);
}

/* The site's sum of mms on a block of @rows rows: leaf i multiplies the
 * row block @start of @src[i] (its rows operand, or that rolled); the adds
 * as the tree has them. Returns the root's value. */
static SgNodeId
emit_terms (Emit *e, const SgNodeId *src, int64_t start, int64_t rows, int32_t st, int32_t sm,
            SgNodeId anchor, SgNodeId *val)
{
  const SgSite *s = e->s;
  const SgGraph *g = e->g;
  for (int32_t i = 0; i < s->n_terms; i++) {
    const SgSiteTerm *t = &s->terms[i];
    const char *like = g->nodes[t->node].name;
    const int64_t cols = sg_meta_shape (g, &g->nodes[t->node].meta)[1];
    if (t->a < 0) {
      SgNodeId a, b;
      operands (g, t->node, &a, &b);
      SgNodeId v = slice_rows (e, src[i], start, rows, like, st);
      val[i] = v == SG_NO_NODE ? v : chunk_mm (e, like, st, v, b, rows, cols, sm);
      if (v != SG_NO_NODE)
        place (e, v, anchor);
    } else {
      SgArg args[] = { sg_arg_ref (val[t->a]), sg_arg_ref (val[t->b]) };
      int64_t shape[2] = { rows, cols };
      val[i] = run (e, add (e, SG_OP_ADD_TENSOR, g_strdup_printf ("%s_chunk%d", like, st), args,
                            2, NULL, 0, shape, NULL, 2, g->nodes[t->node].meta.dtype, 0));
    }
    if (val[i] == SG_NO_NODE)
      return SG_NO_NODE;
    place (e, val[i], anchor);
  }
  return val[s->n_terms - 1];
}

/* The users of the site's wait read @result; the site's collective, wait
 * and tree go. */
static bool
replace_site (Emit *e, SgNodeId result)
{
  sg_rewrite_replace_uses (e->rw, e->s->wait, result);
  for (int32_t i = 0; i < e->s->n_terms; i++)
    sg_rewrite_remove (e->rw, e->s->terms[i].node);
  sg_rewrite_remove (e->rw, e->s->wait);
  sg_rewrite_remove (e->rw, e->s->coll);
  return true;
}

/* Each leaf's rows operand rolled by @shift (rank_roll(a, @shift, 1):
 * its block t is a's block t + @shift + r) into @src (adds: SG_NO_NODE). */
static bool
rolled_sources (Emit *e, int64_t shift, SgNodeId *src)
{
  const SgSite *s = e->s;
  const SgGraph *g = e->g;
  for (int32_t i = 0; i < s->n_terms; i++) {
    src[i] = SG_NO_NODE;
    if (s->terms[i].a >= 0)
      continue;
    SgNodeId a, b;
    operands (g, s->terms[i].node, &a, &b);
    const SgMeta *am = &g->nodes[a].meta;
    SgArg args[] = { sg_arg_ref (a), sg_arg_i (shift), sg_arg_i (1), e->group };
    src[i] = run (e, add (e, SG_OP_RANK_ROLL,
                          g_strdup_printf ("%s_rolled", g->nodes[s->terms[i].node].name), args, 4,
                          NULL, 0, sg_meta_shape (g, am), NULL, am->ndim, am->dtype, 0));
    if (src[i] == SG_NO_NODE)
      return false;
    place (e, src[i], s->terms[i].node);
  }
  return true;
}

/* Ring step @st's arrival: the wait of its permute @perm, then
 * add(that, @other), the reduced block's shape; both placed at the
 * collective. */
static SgNodeId
arrive (Emit *e, SgNodeId perm, int32_t st, SgNodeId other)
{
  SgNodeId w = ring_wait (e, perm, st);
  if (w == SG_NO_NODE)
    return SG_NO_NODE;
  place (e, w, e->s->coll);
  SgArg args[] = { sg_arg_ref (w), sg_arg_ref (other) };
  int64_t shape[2] = { e->s->rows / e->s->k, shape_of (e, other)[1] };
  SgNodeId v = run (e, add (e, SG_OP_ADD_TENSOR,
                            g_strdup_printf ("%s_ring%d_sum", e->g->nodes[e->s->coll].name, st),
                            args, 2, NULL, 0, shape, NULL, 2, dtype_of (e, other), 0));
  if (v != SG_NO_NODE)
    place (e, v, e->s->coll);
  return v;
}

/* The reduce_scatter with each partial sent straight to its rank: rank r
 * computes the partial of block r + s (s = 1 .. k - 1) and sends it with
 * shift s, then sums its own (block r) and what arrived. The sums are off
 * the chain of permutes: those of earlier arrivals run beside later ones. */
static bool
emit_reduce_scatter_direct (Emit *e)
{
  const SgSite *s = e->s;
  const int32_t k = s->k;
  const int64_t mb = s->rows / k;
  g_autofree SgNodeId *src = g_new (SgNodeId, (size_t)s->n_terms);
  g_autofree SgNodeId *val = g_new (SgNodeId, (size_t)s->n_terms);
  g_autofree SgNodeId *perm = g_new (SgNodeId, (size_t)k);
  /* R = rank_roll(a, 0, 1): block s is a's block r + s */
  if (!rolled_sources (e, 0, src))
    return false;
  SgNodeId own = SG_NO_NODE;
  for (int32_t j = 1; j <= k; j++) {
    const int32_t st = j % k; /* partials 1 .. k - 1 go out first, the own one last */
    SgNodeId p = emit_terms (e, src, st * mb, mb, st, j > 1 ? e->f->sm_count : 0, s->coll, val);
    if (p == SG_NO_NODE)
      return false;
    if (st == 0) {
      own = p;
      continue;
    }
    if ((perm[st] = ring_permute (e, p, st, ring_pairs (e->rw, k, st))) == SG_NO_NODE)
      return false;
    place (e, perm[st], s->coll);
  }
  /* IEEE addition commutes: arrival + acc is acc + arrival, bit for bit */
  SgNodeId acc = own;
  for (int32_t st = 1; st < k; st++)
    if ((acc = arrive (e, perm[st], st, acc)) == SG_NO_NODE)
      return false;
  return replace_site (e, acc);
}

/* The ring reduce_scatter: rank r ends with its row block summed. */
static bool
emit_reduce_scatter (Emit *e)
{
  const SgSite *s = e->s;
  const int32_t k = s->k;
  const int64_t mb = s->rows / k;
  if (e->f->direct)
    return emit_reduce_scatter_direct (e);
  g_autofree SgNodeId *src = g_new (SgNodeId, (size_t)s->n_terms);
  g_autofree SgNodeId *val = g_new (SgNodeId, (size_t)s->n_terms);
  /* R = rank_roll(a, -1, 1): its block t is a's block t - 1 + r, so step
   * s's static block (k - s) mod k is a's block r - s - 1 */
  if (!rolled_sources (e, -1, src))
    return false;
  SgNodeId acc = SG_NO_NODE;
  for (int32_t st = 0; st < k; st++) {
    SgNodeId perm = SG_NO_NODE;
    if (st > 0) {
      if ((perm = ring_permute (e, acc, st, e->pairs)) == SG_NO_NODE)
        return false;
      place (e, perm, s->coll);
    }
    SgNodeId p = emit_terms (e, src, ((k - st) % k) * mb, mb, st, st > 0 ? e->f->sm_count : 0,
                             s->coll, val);
    if (p == SG_NO_NODE)
      return false;
    if (st == 0) {
      acc = p;
      continue;
    }
    if ((acc = arrive (e, perm, st, p)) == SG_NO_NODE)
      return false;
  }
  return replace_site (e, acc);
}

/* The all_reduce in row chunks, each all-reduced as soon as it is
 * computed. */
static bool
emit_all_reduce (Emit *e)
{
  const SgSite *s = e->s;
  const SgGraph *g = e->g;
  const int32_t q = e->f->chunks;
  const int64_t mq = s->rows / q;
  g_autofree SgNodeId *src = g_new (SgNodeId, (size_t)s->n_terms);
  g_autofree SgNodeId *val = g_new (SgNodeId, (size_t)s->n_terms);
  g_autofree SgNodeId *w = g_new (SgNodeId, (size_t)q);
  for (int32_t i = 0; i < s->n_terms; i++) {
    SgNodeId b;
    src[i] = SG_NO_NODE;
    if (s->terms[i].a < 0)
      operands (g, s->terms[i].node, &src[i], &b);
  }
  SgArg args[8];
  SgKwarg kw[8];
  const uint32_t na = sg_rewrite_args_of (e->rw, s->coll, args, G_N_ELEMENTS (args));
  const uint32_t nk = sg_rewrite_kwargs_of (e->rw, s->coll, kw, G_N_ELEMENTS (kw) - 2);
  g_return_val_if_fail (na <= G_N_ELEMENTS (args) && nk + 2 <= G_N_ELEMENTS (kw), false);
  /* every chunk names its site (the bucket pass leaves such collectives
   * apart, docs/bucketing.md); the first lists what the site drops */
  kw[nk] = (SgKwarg){ SG_CHUNK_KWARG, sg_rewrite_str (e->rw, g->nodes[s->coll].name) };
  kw[nk + 1] = (SgKwarg){ "schedgraph_replaces", e->dropped };
  const int ip = sg_op_param_pos (SG_OP_ALL_REDUCE, SG_PARAM_INPUT);
  const char *base = g->nodes[s->coll].name;
  for (int32_t j = 0; j < q; j++) {
    SgNodeId p = emit_terms (e, src, j * mq, mq, j, j > 0 ? e->f->sm_count : 0, s->coll, val);
    if (p == SG_NO_NODE)
      return false;
    args[ip] = sg_arg_ref (p);
    int64_t shape[2] = { mq, shape_of (e, p)[1] };
    SgNodeId c = run (e, add (e, SG_OP_ALL_REDUCE, g_strdup_printf ("%s_chunk%d", base, j), args,
                              na, kw, j == 0 ? nk + 2 : nk + 1, shape, NULL, 2, dtype_of (e, p), 0));
    if (c == SG_NO_NODE)
      return false;
    place (e, c, s->coll);
    SgArg wargs[] = { sg_arg_ref (c) };
    w[j] = add (e, SG_OP_WAIT, g_strdup_printf ("%s_chunk%d_wait", base, j), wargs, 1, NULL, 0,
                shape, NULL, 2, dtype_of (e, p), 0);
    if (w[j] == SG_NO_NODE)
      return false;
    place (e, w[j], s->wait);
  }
  g_autofree SgArg *refs = g_new (SgArg, (size_t)q);
  for (int32_t j = 0; j < q; j++) {
    run (e, w[j]);
    refs[j] = sg_arg_ref (w[j]);
  }
  const SgMeta *wm = &g->nodes[s->wait].meta;
  SgArg cargs[] = { sg_rewrite_list (e->rw, refs, (uint32_t)q), sg_arg_i (0) };
  SgNodeId out = run (e, add (e, SG_OP_CAT, g_strdup_printf ("%s_cat", base), cargs, 2, NULL, 0,
                              sg_meta_shape (g, wm), NULL, wm->ndim, wm->dtype, 0));
  if (out == SG_NO_NODE)
    return false;
  place (e, out, s->wait);
  return replace_site (e, out);
}

bool
sg_site_emit (SgRewrite *rw, const SgSite *s, const SgSiteForm *f, GArray *span, GArray *anchors,
              GError **error)
{
  g_return_val_if_fail (rw && s && f && span && s->reason == SG_SITE_DECOMPOSED, false);
  Emit e = { .rw = rw, .g = sg_rewrite_graph (rw), .s = s, .f = f, .span = span, .error = error,
             .anchors = anchors };
  const SgArg *grp = sg_node_param (e.g, s->coll, SG_PARAM_GROUP_NAME);
  g_return_val_if_fail (grp && grp->type == SG_ARG_STR, false);
  e.group = *grp;
  e.pairs = ring_pairs (rw, s->k, 1);
  e.dropped = dropped_names (rw, e.g, s, s->n_whole > 0 && f->regather);
  switch (s->kind) {
  case SG_SITE_ALL_GATHER_MM: return emit_gather (&e);
  case SG_SITE_MM_REDUCE_SCATTER: return emit_reduce_scatter (&e);
  case SG_SITE_MM_ALL_REDUCE: return emit_all_reduce (&e);
  }
  return false;
}

void
sg_site_base_nodes (const SgSite *s, GArray *out)
{
  for (int32_t j = 0; j < s->n_mm; j++)
    g_array_append_val (out, s->mm[j]);
  for (int32_t i = 0; i < s->n_terms; i++)
    g_array_append_val (out, s->terms[i].node);
}
